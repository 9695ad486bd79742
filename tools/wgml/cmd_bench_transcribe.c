/*
 * cmd_bench_transcribe.c - `wgml bench -m whisper.bin`: speech recognition
 * speed of a model with the TRANSCRIBE task (wgml bench hands its arguments
 * here when the file's family transcribes, or with --transcribe).
 *
 *   encoder     one 30 s window (3000 mel frames of a fixed log-mel) through
 *               the encoder and every decoder layer's cross-attention keys
 *               and values (what whisper.cpp's whisper_encode does): the
 *               median of --repeat runs after one warm-up;
 *   decoder     --steps single-token greedy steps at positions 0, 1, ...
 *               (SOT, then the argmax of the logits read back), attending to
 *               that window: tokens/s of each run (the median) and the
 *               per-step latency (p50, p90 over every step);
 *   transcribe  wgml_transcribe of a --seconds long synthetic clip (16 kHz,
 *               speech-like bursts: voiced pulses and noise through two
 *               formant resonators, syllables of 90-260 ms, pauses; the same
 *               samples every run, --save-audio writes them as a 16-bit WAV
 *               for other engines), greedy and with beam search (--beam):
 *               real-time factor = time / audio time. Random weights decode
 *               gibberish, so the work is fixed: language en, no temperature
 *               fallback, no timestamps (every window advances 30 s: ceil(
 *               seconds / 30) windows), no conditioning on the previous
 *               window's text, at most --max-tokens tokens per window; a
 *               window still ends at the model's EOT, so the tokens decoded
 *               are reported with the times.
 * --only steps|greedy|beam runs one of the three parts (bench/whispercpp.sh
 * pairs each with whisper.cpp). The peak RSS is the process's after the runs
 * (with the steps' own state when they run). --profile adds the per-op time
 * (CPU op time, or GPU timestamps) of the last encoder run, decoder run,
 * greedy and beam transcription. The steps reach behind the public API
 * through tools_internal.h (src/api_transcribe_bench.c).
 */
#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "cli.h"
#include "tools_internal.h"

#define RATE 16000 /* Whisper hears 16 kHz */

typedef struct {
    cli_model_opts mo;
    int repeat, steps, max_tokens, beam, json, profile, transcribe, timestamps, only;
    wgml_kv_type kv;
    float seconds;
    const char *save_audio;
} bench_tr_opts;

enum { ONLY_ALL, ONLY_STEPS, ONLY_GREEDY, ONLY_BEAM };
static const cli_choice only_choices[] = {
    {"all", ONLY_ALL}, {"steps", ONLY_STEPS}, {"greedy", ONLY_GREEDY}, {"beam", ONLY_BEAM}, {NULL, 0}};

static const cli_opt options[] = {
    CLI_INCLUDE(cli_model_table, bench_tr_opts, mo),
    CLI_FLAG("--transcribe", NULL, bench_tr_opts, transcribe, NULL), /* what brought the arguments here */
    CLI_INT("--repeat", NULL, bench_tr_opts, repeat, "R", 1, 64,
            "runs of each figure; figures are medians (default 3)"),
    CLI_INT("--steps", NULL, bench_tr_opts, steps, "N", 1, 448, "decoder steps per run (default 64)"),
    CLI_FLOAT("--seconds", NULL, bench_tr_opts, seconds, "S", 0, 3600,
              "the synthetic clip's length (default 90; 0: no transcription)"),
    CLI_INT("--max-tokens", NULL, bench_tr_opts, max_tokens, "N", 1, 448,
            "tokens per window at most in the transcriptions (default 224)"),
    CLI_INT("--beam", NULL, bench_tr_opts, beam, "B", 0, 16, "beam size of the second transcription (default 5; 0: none)"),
    CLI_CHOICE("--only", NULL, bench_tr_opts, only, "WHAT", only_choices,
               "run only the encoder and decoder steps (steps), the greedy transcription\n"
               "(greedy) or the beam search one (beam); default all"),
    CLI_CHOICE("--kv-type", NULL, bench_tr_opts, kv, "T", cli_kv_types,
               "the cross-attention keys and values: auto, f16 or f32 (default auto: f16 on the CPU)"),
    CLI_FLAG("--timestamps", NULL, bench_tr_opts, timestamps,
             "decode timestamps too (the windows then advance as the random model says)"),
    CLI_STRING("--save-audio", NULL, bench_tr_opts, save_audio, "FILE",
               "write the synthetic clip as a 16 kHz 16-bit WAV (the samples transcribed)"),
    CLI_FLAG("--profile", NULL, bench_tr_opts, profile,
             "per-op time tables of the last encoder, decoder, greedy and beam runs\n(GPU timestamps / CPU op time)"),
    CLI_FLAG("--json", NULL, bench_tr_opts, json, "print one JSON object on stdout"),
    CLI_END,
};

static const cli_spec spec = {
    .usage = "usage: wgml bench -m WHISPER [options]    (whisper.cpp .bin or wgml synth --arch whisper-*)\n",
    .about = "Measures speech recognition: the encoder's time for one 30 s window, the decoder's greedy\n"
             "tokens/s over it, and the real-time factor of transcribing a synthetic clip (greedy and\n"
             "beam search; language en, no fallback, no timestamps, bounded tokens: the work is fixed),\n"
             "and the peak memory.\n",
    .opts = options,
};

/* ---- the synthetic clip ---- */

typedef struct {
    uint64_t s;
} rng;

static double rnd(rng *r) { /* [0, 1) */
    r->s = r->s * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(r->s >> 11) * (1.0 / 9007199254740992.0);
}

/* A two-pole resonator at f Hz, bandwidth bw Hz. */
typedef struct {
    double a1, a2, g, y1, y2;
} reso;

static void reso_set(reso *z, double f, double bw, double rate) {
    const double r = exp(-M_PI * bw / rate), th = 2 * M_PI * f / rate;
    z->a1 = 2 * r * cos(th);
    z->a2 = -r * r;
    z->g = 1 - r;
}

static double reso_run(reso *z, double x) {
    double y = z->g * x + z->a1 * z->y1 + z->a2 * z->y2;
    z->y2 = z->y1;
    z->y1 = y;
    return y;
}

/* n samples at 16 kHz of speech-like sound: words of 1-4 syllables (90-260 ms
 * each: a voiced pulse train at 95-220 Hz with breath noise, or a fricative
 * burst, through two formant resonators, a raised-cosine envelope), 40-120 ms
 * between syllables and 150-600 ms between words; rounded to 16-bit steps so
 * that a WAV of it holds the same samples. */
static void make_clip(float *x, size_t n) {
    const double rate = RATE;
    rng r = {20261207};
    reso f1 = {0}, f2 = {0};
    size_t t = (size_t)(0.3 * rate);
    memset(x, 0, n * sizeof *x);
    double phase = 0;
    while (t < n) {
        int syl = 1 + (int)(rnd(&r) * 4);
        for (int s = 0; s < syl && t < n; s++) {
            const size_t len = (size_t)((0.09 + 0.17 * rnd(&r)) * rate);
            const int voiced = rnd(&r) < 0.8;
            const double f0 = 95 + 125 * rnd(&r), amp = 0.15 + 0.35 * rnd(&r);
            reso_set(&f1, voiced ? 300 + 600 * rnd(&r) : 2500 + 1500 * rnd(&r), voiced ? 90 : 600, rate);
            reso_set(&f2, voiced ? 900 + 1600 * rnd(&r) : 5000 + 1500 * rnd(&r), voiced ? 140 : 900, rate);
            for (size_t i = 0; i < len && t < n; i++, t++) {
                const double env = 0.5 - 0.5 * cos(2 * M_PI * (double)i / (double)len);
                double e = (rnd(&r) * 2 - 1) * (voiced ? 0.15 : 1.0);
                phase += f0 * (1 + 0.05 * sin(2 * M_PI * 3 * (double)i / rate)) / rate;
                if (voiced && phase >= 1) {
                    phase -= 1;
                    e += 6.0;
                }
                const double y = reso_run(&f1, e) + 0.6 * reso_run(&f2, e);
                double v = amp * env * y;
                v = v > 1 ? 1 : v < -1 ? -1 : v;
                x[t] = (float)(lrint(v * 32767.0) / 32767.0);
            }
            t += (size_t)((0.04 + 0.08 * rnd(&r)) * rate);
        }
        t += (size_t)((0.15 + 0.45 * rnd(&r)) * rate);
    }
}

static int save_wav(const char *path, const float *x, size_t n) {
    unsigned char h[64];
    size_t hl = cli_wav_header(h, (int64_t)n, RATE, 0);
    unsigned char *d = malloc(n * 2 + 1);
    FILE *f = fopen(path, "wb");
    int ok = d && f;
    if (ok) {
        cli_audio_bytes(x, (int64_t)n, 0, d);
        ok = fwrite(h, 1, hl, f) == hl && fwrite(d, 1, n * 2, f) == n * 2;
    }
    if (f && fclose(f)) ok = 0;
    free(d);
    return ok ? CLI_OK : cli_fail("cannot write %s", path);
}

/* ---- runs ---- */

typedef struct {
    double ms, rtf, encode_ms, decode_ms;
    int windows, tokens;
} tr_run;

static int transcribe_once(wgml_model *m, const float *pcm, size_t n, const wgml_transcribe_params *p, tr_run *out) {
    wgml_transcribe_result res;
    wgml_error err;
    if (wgml_transcribe(m, pcm, n, RATE, p, NULL, NULL, &res, &err)) return cli_fail_err(&err);
    out->ms = res.total_ms;
    out->rtf = res.total_ms / 1e3 / ((double)n / RATE);
    out->encode_ms = res.encode_ms;
    out->decode_ms = res.decode_ms;
    out->windows = res.n_windows;
    out->tokens = res.n_tokens;
    return CLI_OK;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pct(double *v, int n, double q) {
    if (n <= 0) return 0;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[(int)(q * (n - 1) + 0.5)];
}

static int cmp_kernel(const void *a, const void *b) {
    double x = ((const wgml_kernel_stat *)a)->total_ms, y = ((const wgml_kernel_stat *)b)->total_ms;
    return x > y ? -1 : x < y;
}

typedef struct {
    wgml_kernel_stat k[64];
    int n;
} ktable;

static void take_profile(wgml_model *m, ktable *t) {
    t->n = wgml_model_get_kernel_times(m, t->k, 64);
    if (t->n > 64) t->n = 64;
    qsort(t->k, (size_t)t->n, sizeof t->k[0], cmp_kernel);
    wgml_model_set_profiling(m, 0);
}

static void print_profile(const char *title, const ktable *t) {
    double total = 0;
    for (int i = 0; i < t->n; i++) total += t->k[i].total_ms;
    printf("\n%-28s %8s %12s %10s %7s\n", title, "calls", "total ms", "us/call", "share");
    for (int i = 0; i < t->n; i++)
        printf("%-28s %8llu %12.3f %10.2f %6.1f%%\n", t->k[i].name, (unsigned long long)t->k[i].calls,
               t->k[i].total_ms, t->k[i].calls ? t->k[i].total_ms * 1e3 / (double)t->k[i].calls : 0.0,
               total > 0 ? 100 * t->k[i].total_ms / total : 0.0);
}

static void json_runs(json_object *o, const char *prefix, const tr_run *r, int R) {
    double ms[64], rtf[64], enc[64], dec[64];
    for (int i = 0; i < R; i++) ms[i] = r[i].ms, rtf[i] = r[i].rtf, enc[i] = r[i].encode_ms, dec[i] = r[i].decode_ms;
    char k[64];
#define ADD(name, v)                                      \
    snprintf(k, sizeof k, "%s_%s", prefix, name);         \
    json_object_object_add(o, k, v)
    ADD("ms", json_object_new_double(cli_median(ms, R)));
    ADD("rtf", json_object_new_double(cli_median(rtf, R)));
    ADD("encode_ms", json_object_new_double(cli_median(enc, R)));
    ADD("decode_ms", json_object_new_double(cli_median(dec, R)));
    ADD("windows", json_object_new_int(r[0].windows));
    ADD("tokens", json_object_new_int(r[0].tokens));
    json_object *a = json_object_new_array();
    for (int i = 0; i < R; i++) json_object_array_add(a, json_object_new_double(r[i].ms));
    ADD("runs_ms", a);
#undef ADD
}

static void print_runs(const char *label, const tr_run *r, int R, double seconds) {
    double ms[64], rtf[64], enc[64], dec[64];
    for (int i = 0; i < R; i++) ms[i] = r[i].ms, rtf[i] = r[i].rtf, enc[i] = r[i].encode_ms, dec[i] = r[i].decode_ms;
    printf("%-12s %.1f s of audio in %.0f ms: RTF %.4f (%d windows, %d tokens; encoding %.0f ms, decoding %.0f ms)\n",
           label, seconds, cli_median(ms, R), cli_median(rtf, R), r[0].windows, r[0].tokens, cli_median(enc, R),
           cli_median(dec, R));
}

int cmd_bench_transcribe(int argc, char **argv) {
    bench_tr_opts opt = {.repeat = 3, .steps = 64, .max_tokens = 224, .beam = 5, .seconds = 90};
    int rc = cli_parse(&spec, &opt, argc, argv, NULL);
    if (rc >= 0) return rc;
    const cli_model_opts mo = opt.mo;
    const int R = opt.repeat, steps = opt.steps, json = opt.json, profile = opt.profile;
    if (!mo.model && !getenv("WGML_MODEL")) return cli_usage_error("give a Whisper model with -m");
    const size_t n_clip = (size_t)llround(opt.seconds * RATE);
    const double clip_s = (double)n_clip / RATE;
    const int do_steps = opt.only == ONLY_ALL || opt.only == ONLY_STEPS;
    const int do_greedy = n_clip > 0 && (opt.only == ONLY_ALL || opt.only == ONLY_GREEDY);
    const int do_beam = n_clip > 0 && opt.beam > 1 && (opt.only == ONLY_ALL || opt.only == ONLY_BEAM);
    if (!n_clip && (opt.only == ONLY_GREEDY || opt.only == ONLY_BEAM))
        return cli_usage_error("--only %s transcribes: give --seconds > 0", opt.only == ONLY_GREEDY ? "greedy" : "beam");
    if (opt.only == ONLY_BEAM && opt.beam < 2) return cli_usage_error("--only beam needs --beam 2 or more");
    double load_ms = 0;
    wgml_model *m = cli_load_model(&mo, &load_ms);
    if (!m) return CLI_FAIL;
    wgml_model_info info;
    wgml_model_get_info(m, &info);
    wgml_whisper_bench *wb = NULL;
    float *clip = NULL;
    double *step_ms = NULL;
    wgml_error err;
    rc = CLI_OK;
    if (!(info.tasks & WGML_TASK_TRANSCRIBE)) {
        rc = cli_fail("a %s model (%s) does not transcribe", info.family, info.architecture);
        goto done;
    }
    int f16 = 0;
    if (wgml_whisper_kv_f16(m, opt.kv, &f16, &err)) {
        rc = cli_fail_err(&err);
        goto done;
    }
    const char *cross_kv = f16 ? "f16" : "f32";
    if (do_steps) {
        if (wgml_whisper_bench_create(m, 1, opt.kv, &wb, &err)) {
            rc = cli_fail_err(&err);
            goto done;
        }
        if (steps > wgml_whisper_bench_max_steps(wb)) {
            rc = cli_usage_error("--steps %d: the decoder has %d positions", steps, wgml_whisper_bench_max_steps(wb));
            goto done;
        }
    }
    step_ms = calloc((size_t)R * (size_t)steps, sizeof *step_ms);
    clip = malloc((n_clip ? n_clip : 1) * sizeof *clip);
    if (!step_ms || !clip) {
        rc = cli_fail("out of memory");
        goto done;
    }
    make_clip(clip, n_clip);
    if (opt.save_audio && (rc = save_wav(opt.save_audio, clip, n_clip))) goto done;
    wgml_transcribe_params tp = wgml_transcribe_default_params();
    tp.language = "en";
    tp.no_fallback = 1;
    tp.without_timestamps = !opt.timestamps;
    tp.condition_on_previous_text = 0;
    tp.max_tokens = opt.max_tokens;
    tp.kv_type = opt.kv;
    wgml_transcribe_params bp = tp;
    bp.beam_size = opt.beam;
    /* warm-up: the encoder, decoder steps, and each transcription's state on a short clip */
    double enc_ms[64] = {0}, tps[64] = {0}, warm;
    tr_run g[64] = {{0}}, b[64] = {{0}}, w1;
    ktable kt_enc = {0}, kt_dec = {0}, kt_g = {0}, kt_b = {0};
    if (do_steps &&
        (wgml_whisper_bench_encode(wb, &warm, &err) || wgml_whisper_bench_decode(wb, steps < 8 ? steps : 8, NULL, &err))) {
        rc = cli_fail_err(&err);
        goto done;
    }
    const size_t n_warm = n_clip < 5 * RATE ? n_clip : 5 * RATE;
    if (do_greedy && (rc = transcribe_once(m, clip, n_warm, &tp, &w1))) goto done;
    if (do_beam && (rc = transcribe_once(m, clip, n_warm, &bp, &w1))) goto done;
    cli_progress bar;
    cli_progress_begin(&bar, "bench");
    for (int r = 0; r < R && !rc; r++) {
        const int last = profile && r == R - 1;
        if (do_steps) {
            if (last) wgml_model_set_profiling(m, 1);
            if (wgml_whisper_bench_encode(wb, &enc_ms[r], &err)) {
                rc = cli_fail_err(&err);
                break;
            }
            if (last) take_profile(m, &kt_enc), wgml_model_set_profiling(m, 1);
            if (wgml_whisper_bench_decode(wb, steps, step_ms + (size_t)r * steps, &err)) {
                rc = cli_fail_err(&err);
                break;
            }
            if (last) take_profile(m, &kt_dec);
            double sum = 0;
            for (int i = 0; i < steps; i++) sum += step_ms[(size_t)r * steps + i];
            tps[r] = sum > 0 ? steps / (sum / 1e3) : 0;
        }
        if (do_greedy) {
            if (last) wgml_model_set_profiling(m, 1);
            rc = transcribe_once(m, clip, n_clip, &tp, &g[r]);
            if (last) take_profile(m, &kt_g);
        }
        if (!rc && do_beam) {
            if (last) wgml_model_set_profiling(m, 1);
            rc = transcribe_once(m, clip, n_clip, &bp, &b[r]);
            if (last) take_profile(m, &kt_b);
        }
        cli_progress_update(&bar, (uint64_t)r + 1, (uint64_t)R);
    }
    cli_progress_end(&bar);
    if (rc) goto done;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    const double rss_mb = ru.ru_maxrss / 1024.0;
    const char *path = mo.model ? mo.model : getenv("WGML_MODEL");
    struct stat st;
    const double file_mb = stat(path, &st) ? 0 : st.st_size / (1024.0 * 1024.0);
    double enc_sorted[64];
    memcpy(enc_sorted, enc_ms, (size_t)R * sizeof *enc_ms);
    const double enc_med = cli_median(enc_ms, R), enc_min = pct(enc_sorted, R, 0);
    const double dec_tps = cli_median(tps, R);
    const int n_steps = R * steps;
    const double p50 = pct(step_ms, n_steps, 0.5), p90 = pct(step_ms, n_steps, 0.9);
    if (json) {
        json_object *o = json_object_new_object();
        json_object_object_add(o, "model", json_object_new_string(path));
        json_object_object_add(o, "architecture", json_object_new_string(info.architecture));
        json_object_object_add(o, "backend", json_object_new_string(info.backend));
        json_object_object_add(o, "adapter", json_object_new_string(info.adapter));
        json_object_object_add(o, "threads", json_object_new_int(info.n_threads));
        json_object_object_add(o, "n_params", json_object_new_int64((int64_t)info.n_params));
        json_object_object_add(o, "weights_bytes", json_object_new_int64((int64_t)info.weights_bytes));
        json_object_object_add(o, "matmul_type", json_object_new_string(info.matmul_type));
        json_object_object_add(o, "cross_kv", json_object_new_string(cross_kv));
        json_object_object_add(o, "file_mb", json_object_new_double(file_mb));
        json_object_object_add(o, "repeat", json_object_new_int(R));
        json_object_object_add(o, "load_ms", json_object_new_double(load_ms));
        if (do_steps) {
            json_object_object_add(o, "encode_ms", json_object_new_double(enc_med));
            json_object_object_add(o, "encode_ms_min", json_object_new_double(enc_min));
            json_object *ea = json_object_new_array();
            for (int r = 0; r < R; r++) json_object_array_add(ea, json_object_new_double(enc_ms[r]));
            json_object_object_add(o, "encode_runs_ms", ea);
            json_object_object_add(o, "decode_steps", json_object_new_int(steps));
            json_object_object_add(o, "decode_tokens_per_s", json_object_new_double(dec_tps));
            json_object_object_add(o, "decode_ms_per_token", json_object_new_double(dec_tps > 0 ? 1e3 / dec_tps : 0));
            json_object_object_add(o, "decode_ms_per_token_p50", json_object_new_double(p50));
            json_object_object_add(o, "decode_ms_per_token_p90", json_object_new_double(p90));
        }
        json_object_object_add(o, "clip_seconds", json_object_new_double(do_greedy || do_beam ? clip_s : 0));
        json_object_object_add(o, "max_tokens", json_object_new_int(opt.max_tokens));
        json_object_object_add(o, "timestamps", json_object_new_boolean(opt.timestamps));
        if (do_greedy) json_runs(o, "greedy", g, R);
        json_object_object_add(o, "beam_size", json_object_new_int(do_beam ? opt.beam : 0));
        if (do_beam) json_runs(o, "beam", b, R);
        json_object_object_add(o, "peak_rss_mb", json_object_new_double(rss_mb));
        if (profile) {
            if (do_steps) json_object_object_add(o, "encoder_kernels", cli_kernels_json(kt_enc.k, kt_enc.n));
            if (do_steps) json_object_object_add(o, "decoder_kernels", cli_kernels_json(kt_dec.k, kt_dec.n));
            if (do_greedy) json_object_object_add(o, "greedy_kernels", cli_kernels_json(kt_g.k, kt_g.n));
            if (do_beam) json_object_object_add(o, "beam_kernels", cli_kernels_json(kt_b.k, kt_b.n));
        }
        printf("%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE));
        json_object_put(o);
    } else {
        printf("model        %s (%s, %.2f M params, %s, %.1f MiB)\n", path, info.architecture, info.n_params / 1e6,
               info.matmul_type, file_mb);
        printf("backend      %s%s%s", info.backend, *info.adapter ? " / " : "", info.adapter);
        if (!strcmp(info.backend, "cpu")) printf(" (%d threads)", info.n_threads);
        printf("; cross keys and values %s", cross_kv);
        printf("\nload         %.1f ms; %d runs (medians)\n", load_ms, R);
        if (do_steps) {
            printf("encoder      %.1f ms per 30 s window (min %.1f)\n", enc_med, enc_min);
            printf("decoder      %.1f tokens/s (%.2f ms/token p50, %.2f p90), %d greedy steps over a window\n",
                   dec_tps, p50, p90, steps);
        }
        if (do_greedy || do_beam)
            printf("transcribe   language en, no fallback, %s, not conditioned, <= %d tokens per window\n",
                   opt.timestamps ? "timestamps" : "no timestamps", opt.max_tokens);
        if (do_greedy) print_runs("  greedy", g, R, clip_s);
        if (do_beam) {
            char label[32];
            snprintf(label, sizeof label, "  beam %d", opt.beam);
            print_runs(label, b, R, clip_s);
        }
        printf("peak RSS     %.1f MiB\n", rss_mb);
        if (profile) {
            if (do_steps) print_profile("encoder (one window)", &kt_enc);
            if (do_steps) print_profile("decoder (the steps)", &kt_dec);
            if (do_greedy) print_profile("greedy transcription", &kt_g);
            if (do_beam) print_profile("beam transcription", &kt_b);
        }
    }
done:
    free(step_ms);
    free(clip);
    wgml_whisper_bench_free(wb);
    wgml_model_free(m);
    return rc;
}
