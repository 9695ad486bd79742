/*
 * cmd_speak.c - `wgml speak -m kokoro.gguf (-t TEXT | -f FILE | --phonemes P)
 * -o out.wav`: text to speech with a model of the kokoro family
 * (wgml_speak), written as a WAV file (16-bit PCM, or 32-bit float), with a
 * line on stderr: the audio's length, the real-time factor and the time to
 * the first audio.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

typedef struct {
    cli_model_opts mo;
    const char *text, *file, *phonemes, *out, *voice, *words;
    wgml_speak_params sp;
    int f32, list;
} speak_opts;

static const cli_choice langs[] = {{"en-us", 0}, {"en-gb", 0}, {"es", 0}, {"fr-fr", 0}, {"fr", 0}, {"hi", 0},
                                   {"it", 0}, {"pt-br", 0}, {NULL, 0}};
static const cli_choice wav_formats[] = {{"s16", 0}, {"f32", 1}, {NULL, 0}};
static const cli_choice split_modes[] = {{"sentences", WGML_SPLIT_SENTENCES}, {"none", WGML_SPLIT_NONE}, {NULL, 0}};

static const cli_opt options[] = {
    CLI_STRING("--model", "-m", speak_opts, mo.model, "FILE", "the Kokoro GGUF"),
    CLI_STRING("--text", "-t", speak_opts, text, "TEXT", "what to say"), /* here -t is the text, not --threads */
    CLI_STRING("--file", "-f", speak_opts, file, "FILE", "what to say, read from a file"),
    CLI_STRING("--phonemes", NULL, speak_opts, phonemes, "P", "phonemes in the model's symbols (as `wgml phonemize` prints)"),
    CLI_STRING("--output", "-o", speak_opts, out, "FILE", "the WAV file to write ('-': standard output)"),
    CLI_STRING("--voice", "-v", speak_opts, voice, "V",
               "a voice of the model (default: its first), a voice file (.bin, .pt)\n"
               "or a blend: af_heart:0.6,am_adam:0.4"),
    CLI_FLAG("--list-voices", NULL, speak_opts, list, "print the model's voices and exit"),
    CLI_FLOAT("--speed", NULL, speak_opts, sp.speed, "S", 0.25, 4, "0.25 .. 4 (default 1)"),
    CLI_WORD("--lang", NULL, speak_opts, sp.lang, "L", langs,
             "the text's language: en-us (default), en-gb, es, fr-fr, hi, it or pt-br\n"
             "(the others through the official pipeline's espeak G2P; words timed in English only)"),
    CLI_U64("--seed", NULL, speak_opts, sp.seed, "N", "the vocoder's noise (default 0): the same seed gives the same audio"),
    CLI_CHOICE("--wav-format", NULL, speak_opts, f32, "F", wav_formats,
               "s16 (16-bit PCM, the default) or f32 (32-bit float, no clipping)"),
    CLI_FLAG("--full-precision", NULL, speak_opts, sp.full_precision,
             "every matrix product in f32 (default: the decoder's and vocoder's as\n"
             "bf16 pairs where the CPU has them, ~1.5x faster, same audio to 0.1 dB)"),
    CLI_CHOICE("--split", NULL, speak_opts, sp.split, "S", split_modes,
               "sentences (default: each sentence's audio as soon as it is made) or none\n"
               "(one pass over up to 510 phonemes, as the official KPipeline)"),
    CLI_STRING("--words", NULL, speak_opts, words, "FILE",
               "the time of each word: lines of start<TAB>end<TAB>word<TAB>phonemes\n"
               "(seconds; the word as the text has it, or with --phonemes a phoneme word)"),
    CLI_STRING("--espeak", NULL, speak_opts, sp.espeak, "PROGRAM",
               "the espeak-ng to run (default: $WGML_ESPEAK, else espeak-ng on PATH)"),
    CLI_INCLUDE(cli_backend_table, speak_opts, mo),
    CLI_INT("--threads", NULL, speak_opts, mo.threads, "N", 1, 512, "CPU threads (default: one per core)"),
    CLI_END,
};

static const cli_spec spec = {
    .usage = "usage: wgml speak -m MODEL (-t TEXT | -f FILE | --phonemes P) -o OUT.wav [options]\n",
    .about = "Speaks text (English, Spanish, French, Hindi, Italian, Brazilian Portuguese: --lang) with a\n"
             "Kokoro model (wgml convert kokoro). Text goes through the\n"
             "G2P (needs the espeak-ng program); phonemes (--phonemes) are spoken as given.\n",
    .opts = options,
};

/* n samples as 16-bit PCM or 32-bit float (cli_audio_bytes). */
static int wav_samples(FILE *f, const float *x, int64_t n, int f32) {
    enum { CHUNK = 4096 };
    const size_t bps = f32 ? 4 : 2;
    unsigned char buf[CHUNK * 4];
    for (int64_t i = 0; i < n; i += CHUNK) {
        int64_t m = n - i < CHUNK ? n - i : CHUNK;
        cli_audio_bytes(x + i, m, f32, buf);
        if (fwrite(buf, 1, (size_t)m * bps, f) != (size_t)m * bps) return 0;
    }
    return 1;
}

/* Where the chunks go as they come: the WAV (its header written first, with
 * the final sizes patched in at the end of a file, left at "unknown" on a
 * pipe) and the word times. */
typedef struct {
    FILE *f;
    int f32, rate;
    int64_t n;
    int failed; /* a write failed: stop speaking */
    FILE *words;
    int words_failed;
} sink;

static int on_audio(void *user, const wgml_audio_chunk *c) {
    sink *s = user;
    if (c->sample_rate != s->rate || !wav_samples(s->f, c->samples, c->n_samples, s->f32) || fflush(s->f) != 0) {
        s->failed = 1;
        return 1;
    }
    s->n += c->n_samples;
    for (int i = 0; s->words && i < c->n_words; i++)
        if (fprintf(s->words, "%.3f\t%.3f\t%s\t%s\n", c->words[i].start, c->words[i].end, c->words[i].word,
                    c->words[i].phonemes) < 0)
            s->words_failed = 1;
    return 0;
}

/* The whole of a text file (NUL bytes refused). */
static char *read_text(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        cli_fail("cannot open '%s': %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 4096, n = 0;
    char *s = malloc(cap);
    for (size_t r; s && (r = fread(s + n, 1, cap - n - 1, f)) > 0;) {
        n += r;
        if (n + 1 == cap) {
            char *g = realloc(s, cap * 2);
            if (!g) free(s);
            s = g, cap *= 2;
        }
    }
    int bad = ferror(f);
    fclose(f);
    if (!s) {
        cli_fail("out of memory reading '%s'", path);
        return NULL;
    }
    s[n] = '\0';
    if (bad || strlen(s) != n) {
        cli_fail("'%s': %s", path, bad ? "read error" : "a NUL byte in the text");
        free(s);
        return NULL;
    }
    return s;
}

int cmd_speak(int argc, char **argv) {
    speak_opts opt = {.sp = wgml_speak_default_params()};
    int rc = cli_parse(&spec, &opt, argc, argv, NULL);
    if (rc >= 0) return rc;
    const cli_model_opts mo = opt.mo;
    const char *text = opt.text, *file = opt.file, *phonemes = opt.phonemes, *out = opt.out, *voice = opt.voice,
               *words = opt.words;
    wgml_speak_params sp = opt.sp;
    const int f32 = opt.f32, list = opt.list;
    if (!mo.model) return cli_usage_error("-m MODEL is required (a Kokoro GGUF: wgml convert kokoro)");
    if (!list && (!!text + !!file + !!phonemes) != 1)
        return cli_usage_error("say what to speak: -t TEXT, -f FILE or --phonemes P (one of them)");
    if (!list && !out) return cli_usage_error("-o OUT.wav is required ('-' for standard output)");

    wgml_model *m = cli_load_model(&mo, NULL);
    if (!m) return CLI_FAIL;
    wgml_model_info info;
    wgml_model_get_info(m, &info);
    rc = CLI_OK;
    if (!(info.tasks & WGML_TASK_SPEECH)) {
        rc = cli_fail("%s: a %s model does not speak (a Kokoro model does)", mo.model, info.family);
        goto done;
    }
    if (list) {
        for (int i = 0; wgml_speech_voice(m, i); i++) printf("%s\n", wgml_speech_voice(m, i));
        goto done;
    }
    char *input = file ? read_text(file) : NULL;
    if (file && !input) {
        rc = CLI_FAIL;
        goto done;
    }
    sp.phonemes = phonemes != NULL;
    /* a file is written to OUT.tmp and renamed when complete: a failure leaves no partial file */
    const int to_stdout = !strcmp(out, "-");
    char tmp[4096];
    if (!to_stdout && snprintf(tmp, sizeof tmp, "%s.tmp", out) >= (int)sizeof tmp) {
        rc = cli_fail("output path too long");
        free(input);
        goto done;
    }
    sink s = {.f32 = f32, .rate = info.sample_rate};
    s.f = to_stdout ? stdout : fopen(tmp, "wb");
    if (!s.f) {
        rc = cli_fail("cannot write '%s': %s", tmp, strerror(errno));
        free(input);
        goto done;
    }
    unsigned char h[58];
    size_t hk = cli_wav_header(h, to_stdout ? -1 : 0, s.rate, f32);
    if (fwrite(h, 1, hk, s.f) != hk) s.failed = 1;
    if (words && !(s.words = fopen(words, "w"))) {
        rc = cli_fail("cannot write '%s': %s", words, strerror(errno));
        free(input);
        if (!to_stdout) fclose(s.f), remove(tmp);
        goto done;
    }
    wgml_speak_result res;
    wgml_error err;
    wgml_status st = s.failed ? WGML_OK
                              : wgml_speak(m, phonemes ? phonemes : input ? input : text, voice, &sp, on_audio, &s,
                                           &res, &err);
    free(input);
    if (s.words && (fclose(s.words) != 0 || s.words_failed) && !st) rc = cli_fail("cannot write '%s'", words);
    if (!s.failed && !st && !to_stdout) { /* the final sizes */
        hk = cli_wav_header(h, s.n, s.rate, f32);
        if (fseek(s.f, 0, SEEK_SET) != 0 || fwrite(h, 1, hk, s.f) != hk) s.failed = 1;
    }
    int closed = to_stdout ? fflush(s.f) == 0 : fclose(s.f) == 0;
    if (st && !s.failed) {
        rc = cli_fail_err(&err);
    } else if (s.failed || !closed || (!to_stdout && rename(tmp, out) != 0)) {
        rc = cli_fail("cannot write '%s'", to_stdout ? "standard output" : out);
    } else if (rc == CLI_OK) {
        const double secs = (double)s.n / s.rate;
        fprintf(stderr,
                "wgml speak: %.2f s of audio in %.2f s (real-time factor %.3f), first audio after %.0f ms, "
                "%d chunk%s, %s%s%s\n",
                secs, res.total_ms / 1e3, res.total_ms / 1e3 / secs, res.first_audio_ms, res.n_chunks,
                res.n_chunks == 1 ? "" : "s", info.backend, *info.adapter ? " " : "", info.adapter);
    }
    if (rc != CLI_OK && !to_stdout) remove(tmp);
done:
    wgml_model_free(m);
    return rc;
}
