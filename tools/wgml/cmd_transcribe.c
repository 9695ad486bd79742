/*
 * cmd_transcribe.c - `wgml transcribe -m MODEL AUDIO`: speech to text with a
 * model of the whisper family (wgml_transcribe). The audio file is read by
 * libsndfile (audio_file.c: WAV, FLAC, OGG, MP3, ...; channels averaged, any
 * rate: the library resamples); the transcript is written as Whisper's
 * txt, srt, vtt or tsv (the official writers) or as OpenAI's json or
 * verbose_json (cli_transcript.c), to -o FILE or stdout. txt goes out
 * segment by segment as each window is decoded; on a terminal the segments
 * also show on stderr as they come ("[00:00.000 --> 00:02.500]  text"),
 * under a progress bar, then a line of figures.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "tools_internal.h"

typedef struct {
    cli_model_opts mo;
    wgml_transcribe_params tp;
    const char *language, *out;
    int format;
} transcribe_opts;

static const cli_choice formats[] = {{"txt", CLI_TRANSCRIPT_TXT},
                                     {"srt", CLI_TRANSCRIPT_SRT},
                                     {"vtt", CLI_TRANSCRIPT_VTT},
                                     {"json", CLI_TRANSCRIPT_JSON},
                                     {"verbose_json", CLI_TRANSCRIPT_VERBOSE_JSON},
                                     {"tsv", CLI_TRANSCRIPT_TSV},
                                     {NULL, 0}};

static const cli_opt options[] = {
    CLI_STRING("--model", "-m", transcribe_opts, mo.model, "FILE",
               "a Whisper model: GGUF, or whisper.cpp's ggml .bin"),
    CLI_STRING("--language", "-l", transcribe_opts, language, "L",
               "the spoken language: a code (en, de, ja, ...) or its English name,\n"
               "or auto (default: detected on the first 30 s)"),
    CLI_FLAG("--translate", NULL, transcribe_opts, tp.translate, "translate into English (multilingual models)"),
    CLI_CHOICE("--format", "-f", transcribe_opts, format, "F", formats,
               "txt (default), srt, vtt, tsv (Whisper's files), json or verbose_json\n"
               "(OpenAI's response bodies)"),
    CLI_STRING("--output", "-o", transcribe_opts, out, "FILE", "write the transcript here (default: standard output)"),
    CLI_FLAG("--word-timestamps", NULL, transcribe_opts, tp.word_timestamps,
             "the time of each word (cross-attention alignment): verbose_json lists\n"
             "them, and segments' times follow their words"),
    CLI_GROUP("Decoding:"),
    CLI_INT("--beam-size", NULL, transcribe_opts, tp.beam_size, "N", 0, 16,
            "beam search with N hypotheses at temperature 0 (default 0: greedy;\n"
            "the official CLI uses 5)"),
    CLI_FLOAT("--patience", NULL, transcribe_opts, tp.patience, "P", 0.01, 16,
              "beam search: stop once N x P hypotheses have finished (default 1)"),
    CLI_FLOAT("--temperature", NULL, transcribe_opts, tp.temperature, "T", 0, 2,
              "the first try's sampling temperature (default 0: greedy or beam)"),
    CLI_CHOICE("--kv-type", NULL, transcribe_opts, tp.kv_type, "T", cli_kv_types,
               "the cross-attention keys and values of a window: auto, f16 or f32\n"
               "(default auto: f16 on the CPU, half the bytes a decoder step reads)"),
    CLI_FLAG("--no-fallback", NULL, transcribe_opts, tp.no_fallback,
             "keep the first try: no retry at higher temperatures when a window's\n"
             "text repeats itself or is unlikely"),
    CLI_STRING("--prompt", NULL, transcribe_opts, tp.prompt, "TEXT",
               "text before the first window (names, spelling, style)"),
    CLI_FLAG("--no-timestamps", NULL, transcribe_opts, tp.without_timestamps,
             "decode without timestamp tokens: one segment per 30 s window"),
    CLI_FLAG_SET("--no-condition", NULL, transcribe_opts, tp.condition_on_previous_text, 0,
                 "windows do not see the text before them (less repetition, less\n"
                 "consistency)"),
    CLI_INT("--max-tokens", NULL, transcribe_opts, tp.max_tokens, "N", 1, 448, "tokens per window (default 224)"),
    CLI_U64("--seed", NULL, transcribe_opts, tp.seed, "N", "sampling at temperatures above 0 (default 0)"),
    CLI_INCLUDE(cli_device_table, transcribe_opts, mo),
    CLI_END,
};

static const cli_spec spec = {
    .usage = "usage: wgml transcribe -m MODEL AUDIO [options]\n",
    .about = "Transcribes (or translates into English) speech with a Whisper model. AUDIO is any file\n"
             "libsndfile reads: WAV, FLAC, OGG Vorbis/Opus, MP3, AIFF, ...; any rate, channels averaged.\n",
    .opts = options,
    .max_args = 1,
    .too_many = "give one audio file",
};

/* Where the segments go as they come. */
typedef struct {
    cli_transcript t;
    int oom;
    FILE *txt;     /* txt: each segment's line written here at once */
    int failed;    /* a write failed */
    int live;      /* show each segment on stderr */
    cli_progress bar;
    double total;  /* seconds of audio */
} sink;

static int on_segment(void *user, const wgml_transcript_segment *s) {
    sink *k = user;
    if (cli_transcript_add(&k->t, s)) {
        k->oom = 1;
        return 1;
    }
    cli_progress_end(&k->bar); /* the bar's line is cleared for what is printed */
    if (k->txt) {
        char *line;
        size_t len;
        if (cli_transcript_txt_line(s, &line, &len) || fwrite(line, 1, len, k->txt) != len || fflush(k->txt))
            k->failed = 1;
        free(line);
    }
    if (k->live) {
        char a[32], b[32];
        if (whisper_format_timestamp(s->start, 0, '.', a) >= 0 && whisper_format_timestamp(s->end, 0, '.', b) >= 0)
            fprintf(stderr, "[%s --> %s] %s\n", a, b, s->text ? s->text : "");
    }
    if (k->total > 0) cli_progress_update(&k->bar, (uint64_t)(s->end * 1000), (uint64_t)(k->total * 1000));
    return k->failed;
}

/* 1 when f (stdout) is the terminal stderr is on. */
static int same_tty(FILE *f) {
    struct stat a, b;
    return isatty(fileno(f)) && isatty(STDERR_FILENO) && fstat(fileno(f), &a) == 0 && fstat(STDERR_FILENO, &b) == 0 &&
           a.st_rdev == b.st_rdev;
}

int cmd_transcribe(int argc, char **argv) {
    transcribe_opts opt = {.tp = wgml_transcribe_default_params(), .format = CLI_TRANSCRIPT_TXT};
    int n_args, rc = cli_parse(&spec, &opt, argc, argv, &n_args);
    if (rc >= 0) return rc;
    const cli_model_opts mo = opt.mo;
    wgml_transcribe_params tp = opt.tp;
    const cli_transcript_format fmt = (cli_transcript_format)opt.format;
    if (!mo.model) return cli_usage_error("-m MODEL is required (a Whisper model: GGUF or whisper.cpp's .bin)");
    if (n_args != 1) return cli_usage_error("give the audio file: wgml transcribe -m MODEL AUDIO");
    const char *path = argv[0];
    if (opt.language && strcmp(opt.language, "auto")) {
        if (!(tp.language = cli_language_code(opt.language)))
            return cli_usage_error("--language '%s' is not a Whisper language: give a code (en, de, ja, ...), its "
                                   "English name or auto", opt.language);
    }
    if (opt.out && !*opt.out) return cli_usage_error("-o needs a file name");

    /* the audio first: a bad file fails before the model loads */
    cli_audio a;
    char msg[4400];
    if (cli_audio_read_file(path, CLI_AUDIO_MAX_SECONDS, &a, msg, sizeof msg)) return cli_fail("%s", msg);
    const double secs = (double)a.n / a.sample_rate;

    sink k;
    memset(&k, 0, sizeof k);
    k.total = secs;
    k.t.with_words = tp.word_timestamps;
    FILE *f = NULL;
    char tmp[4200] = "";
    wgml_model *m = cli_load_model(&mo, NULL);
    rc = CLI_FAIL;
    if (!m) goto done;
    wgml_model_info info;
    wgml_model_get_info(m, &info);
    if (!(info.tasks & WGML_TASK_TRANSCRIBE)) {
        cli_fail("%s: a %s model (%s) does not transcribe speech (a Whisper model does)", mo.model, info.family,
                 info.architecture);
        goto done;
    }
    /* a file is written to OUT.tmp and renamed when complete: a failure leaves no partial file */
    if (opt.out) {
        if (snprintf(tmp, sizeof tmp, "%s.tmp", opt.out) >= (int)sizeof tmp) {
            cli_fail("output path too long");
            goto done;
        }
        if (!(f = fopen(tmp, "wb"))) {
            cli_fail("cannot write '%s': %s", tmp, strerror(errno));
            tmp[0] = 0;
            goto done;
        }
    } else {
        f = stdout;
    }
    if (fmt == CLI_TRANSCRIPT_TXT) k.txt = f;
    /* on a terminal each segment shows as it comes, unless the txt itself goes to that terminal */
    k.live = isatty(STDERR_FILENO) && !(k.txt && same_tty(f));
    cli_progress_begin(&k.bar, "transcribing");
    cli_progress_update(&k.bar, 0, (uint64_t)(secs * 1000));
    wgml_transcribe_result res;
    wgml_error err;
    wgml_status st = wgml_transcribe(m, a.pcm, a.n, a.sample_rate, &tp, on_segment, &k, &res, &err);
    cli_progress_end(&k.bar);
    if (k.oom) {
        cli_fail("out of memory for the transcript");
        goto done;
    }
    if (k.failed) {
        cli_fail("cannot write '%s'", opt.out ? opt.out : "standard output");
        goto done;
    }
    if (st) {
        cli_fail_err(&err);
        goto done;
    }
    if (fmt != CLI_TRANSCRIPT_TXT) {
        char *text;
        size_t len;
        if (cli_transcript_render(&k.t, fmt, tp.translate ? "translate" : "transcribe", res.language, res.duration,
                                  &text, &len, msg, sizeof msg)) {
            cli_fail("%s", msg);
            goto done;
        }
        int ok = fwrite(text, 1, len, f) == len;
        free(text);
        if (!ok) {
            cli_fail("cannot write '%s'", opt.out ? opt.out : "standard output");
            goto done;
        }
    }
    if (opt.out) {
        int closed = fclose(f) == 0;
        f = NULL;
        if (!closed || rename(tmp, opt.out) != 0) {
            cli_fail("cannot write '%s': %s", opt.out, strerror(errno));
            goto done;
        }
        tmp[0] = 0;
    } else if (fflush(stdout) != 0) {
        cli_fail("cannot write standard output");
        goto done;
    }
    fprintf(stderr,
            "wgml transcribe: %.2f s of audio (%s, %d Hz, %d channel%s) in %.2f s (real-time factor %.3f), "
            "language %s, %d segment%s, %d window%s, %s%s%s\n",
            secs, a.format, a.sample_rate, a.channels, a.channels == 1 ? "" : "s", res.total_ms / 1e3,
            res.total_ms / 1e3 / secs, *res.language ? res.language : "?", res.n_segments,
            res.n_segments == 1 ? "" : "s", res.n_windows, res.n_windows == 1 ? "" : "s", info.backend,
            *info.adapter ? " " : "", info.adapter);
    rc = CLI_OK;
done:
    if (f && f != stdout) fclose(f);
    if (tmp[0]) remove(tmp);
    cli_transcript_free(&k.t);
    cli_audio_free(&a);
    wgml_model_free(m);
    return rc;
}
