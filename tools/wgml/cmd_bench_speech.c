/*
 * cmd_bench_speech.c - `wgml bench -m kokoro.gguf`: speech synthesis speed
 * of a model with the SPEECH task (wgml bench hands its arguments here when
 * the file's family speaks, or with --speech).
 *
 * Two inputs, both phonemes so that no G2P runs inside the timing:
 *   sentence   one 20-word sentence, one piece: its real-time factor (RTF =
 *              synthesis time / audio time) is the figure to compare with
 *              other engines;
 *   paragraph  three sentences streamed piece by piece: the time to the first
 *              audio (what a listener waits for), and its RTF.
 * Each run of each is timed; figures are medians of the runs, after one
 * warm-up of each (pipelines, scratch buffers, page faults). The peak RSS is
 * the process's after the runs. --profile adds the per-op time of the last
 * sentence run (CPU op time, or GPU timestamps).
 */
#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "cli.h"
#include "tools_internal.h"

typedef struct {
    cli_model_opts mo;
    const char *voice, *phonemes;
    int repeat, json, profile, full, speech;
    uint64_t seed;
} bench_speech_opts;

static const cli_opt options[] = {
    CLI_INCLUDE(cli_model_table, bench_speech_opts, mo),
    CLI_FLAG("--speech", NULL, bench_speech_opts, speech, NULL), /* what brought the arguments here */
    CLI_STRING("--voice", "-v", bench_speech_opts, voice, "V", "the voice (default: the model's first)"),
    CLI_STRING("--phonemes", NULL, bench_speech_opts, phonemes, "P",
               "the sentence to time instead of the built-in one (the model's symbols)"),
    CLI_INT("--repeat", NULL, bench_speech_opts, repeat, "R", 1, 64, "runs; figures are medians (default 3)"),
    CLI_U64("--seed", NULL, bench_speech_opts, seed, "N", "the vocoder's noise (default 0)"),
    CLI_FLAG("--full-precision", NULL, bench_speech_opts, full,
             "every product in f32 (default: the decoder's and vocoder's as bf16 pairs\n"
             "where the CPU has them, as wgml speak)"),
    CLI_FLAG("--profile", NULL, bench_speech_opts, profile,
             "per-op time table of the last sentence run (GPU timestamps / CPU op time);\n"
             "on the CPU each matmul kernel's GFLOP/s and its share of the FMA peak\n"
             "(f32, or bf16 pairs for their path) measured in the same run"),
    CLI_FLAG("--json", NULL, bench_speech_opts, json, "print one JSON object on stdout"),
    CLI_END,
};

static const cli_spec spec = {
    .usage = "usage: wgml bench -m MODEL [options]    (a speech model: wgml convert kokoro)\n",
    .about = "Measures speech synthesis: the real-time factor (synthesis time / audio time) of one\n"
             "20-word sentence, the time to first audio and the RTF of a 3-sentence paragraph spoken\n"
             "sentence by sentence, and the peak memory.\n",
    .opts = options,
};

/* "The old lighthouse keeper climbed the narrow stairs every evening to watch
 * the ships return safely across the dark harbor." (wgml phonemize, en-us) */
static const char *sentence =
    "ðɪ ˈoʊld lˈaɪthaʊs kˈiːpɚ klˈaɪmd ðə nˈæɹoʊ stˈɛɹz ˈɛvɹi ˈiːvnɪŋ tə wˈɑːtʃ ðə ʃˈɪps ɹᵻtˈɜːn sˈeɪfli "
    "əkɹˌɑːs ðə dˈɑːɹk hˈɑːɹbɚ.";

/* "Rain had fallen all night. By morning the river was high, brown and fast,
 * and the ferry did not run. So we walked the long way round, over the old
 * stone bridge, and reached the market just as it opened." */
static const char *paragraph =
    "ɹˈeɪn hæd fˈɔːlən ˈɔːl nˈaɪt. baɪ mˈɔːɹnɪŋ ðə ɹˈɪvɚ wʌz hˈaɪ, bɹˈaʊn ænd fˈæst, ænd ðə fˈɛɹi dɪdnˌɑːt "
    "ɹˈʌn. sˌoʊ wiː wˈɔːkt ðə lˈɔŋ wˈeɪ ɹˈaʊnd, ˌoʊvɚ ðɪ ˈoʊld stˈoʊn bɹˈɪdʒ, ænd ɹˈiːtʃt ðə mˈɑːɹkɪt dʒˈʌst "
    "æz ɪɾ ˈoʊpənd.";

static int ignore_audio(void *user, const wgml_audio_chunk *c) {
    (void)user, (void)c;
    return 0;
}

typedef struct {
    double rtf, total_ms, first_ms, audio_s;
    int chunks;
} speak_run;

static int speak_once(wgml_model *m, const char *ph, const char *voice, const wgml_speak_params *sp, speak_run *out) {
    wgml_speak_result res;
    wgml_error err;
    if (wgml_speak(m, ph, voice, sp, ignore_audio, NULL, &res, &err)) return cli_fail_err(&err);
    wgml_model_info info;
    wgml_model_get_info(m, &info);
    out->audio_s = (double)res.n_samples / (info.sample_rate > 0 ? info.sample_rate : 24000);
    out->total_ms = res.total_ms;
    out->first_ms = res.first_audio_ms;
    out->rtf = out->audio_s > 0 ? res.total_ms / 1e3 / out->audio_s : 0;
    out->chunks = res.n_chunks;
    return CLI_OK;
}

int cmd_bench_speech(int argc, char **argv) {
    bench_speech_opts opt = {.repeat = 3, .phonemes = sentence};
    int rc = cli_parse(&spec, &opt, argc, argv, NULL);
    if (rc >= 0) return rc;
    const cli_model_opts mo = opt.mo;
    const char *voice = opt.voice, *ph = opt.phonemes;
    const int json = opt.json, profile = opt.profile, full = opt.full;
    if (!mo.model && !getenv("WGML_MODEL")) return cli_usage_error("give a speech model with -m");
    double load_ms = 0;
    wgml_model *m = cli_load_model(&mo, &load_ms);
    if (!m) return CLI_FAIL;
    wgml_model_info info;
    wgml_model_get_info(m, &info);
    const int R = opt.repeat;
    rc = CLI_OK;
    if (!(info.tasks & WGML_TASK_SPEECH)) {
        rc = cli_fail("a %s model (%s) does not speak", info.family, info.architecture);
        goto done;
    }
    if (!voice) voice = wgml_speech_voice(m, 0);
    if (!voice) {
        rc = cli_fail("the model has no voice");
        goto done;
    }
    wgml_speak_params sp = wgml_speak_default_params();
    sp.phonemes = 1;
    sp.seed = opt.seed;
    sp.full_precision = full;
    speak_run s[64], p[64], warm;
    /* warm-up of both inputs: pipelines, scratch buffers at their sizes, page faults */
    if ((rc = speak_once(m, ph, voice, &sp, &warm)) || (rc = speak_once(m, paragraph, voice, &sp, &warm))) goto done;
    wgml_kernel_stat kt[64];
    int n_kt = 0;
    cli_progress bar;
    cli_progress_begin(&bar, "bench");
    for (int r = 0; r < R && !rc; r++) {
        int prof = profile && r == R - 1;
        if (prof) wgml_model_set_profiling(m, 1);
        rc = speak_once(m, ph, voice, &sp, &s[r]);
        if (prof) {
            n_kt = wgml_model_get_kernel_times(m, kt, 64);
            wgml_model_set_profiling(m, 0);
        }
        if (!rc) rc = speak_once(m, paragraph, voice, &sp, &p[r]);
        cli_progress_update(&bar, (uint64_t)r + 1, (uint64_t)R);
    }
    cli_progress_end(&bar);
    if (rc) goto done;
    /* with --profile on the CPU: the arithmetic peak of these threads, measured now, for the GEMMs' share */
    double peak32 = 0, peak16 = 0;
    if (profile && !strcmp(info.backend, "cpu")) {
        wgml_error e;
        if (wgml_model_measure_fma_peak(m, &peak32, &peak16, &e)) peak32 = peak16 = 0;
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double rss_mb = ru.ru_maxrss / 1024.0;
    const char *path = mo.model ? mo.model : getenv("WGML_MODEL");
    struct stat st;
    double file_mb = stat(path, &st) ? 0 : st.st_size / (1024.0 * 1024.0);
    double v_s_rtf[64], v_s_ms[64], v_p_rtf[64], v_p_first[64], v_p_ms[64];
    for (int r = 0; r < R; r++) {
        v_s_rtf[r] = s[r].rtf, v_s_ms[r] = s[r].total_ms;
        v_p_rtf[r] = p[r].rtf, v_p_first[r] = p[r].first_ms, v_p_ms[r] = p[r].total_ms;
    }
    /* the CPU's products: f32 or bf16 pairs, as measured on this machine (cpu_tune.h) */
    char gemm[900] = "";
    const int on_cpu = !strcmp(info.backend, "cpu");
    if (on_cpu) {
        if (full) snprintf(gemm, sizeof gemm, "f32 (--full-precision)");
        else cpu_gemm_choice_describe(gemm, sizeof gemm);
    }
    if (json) {
        json_object *o = json_object_new_object();
        json_object_object_add(o, "model", json_object_new_string(path));
        if (on_cpu) json_object_object_add(o, "cpu_gemm", json_object_new_string(gemm));
        json_object_object_add(o, "architecture", json_object_new_string(info.architecture));
        json_object_object_add(o, "backend", json_object_new_string(info.backend));
        json_object_object_add(o, "adapter", json_object_new_string(info.adapter));
        json_object_object_add(o, "threads", json_object_new_int(info.n_threads));
        json_object_object_add(o, "full_precision", json_object_new_boolean(full));
        json_object_object_add(o, "n_params", json_object_new_int64((int64_t)info.n_params));
        json_object_object_add(o, "file_mb", json_object_new_double(file_mb));
        json_object_object_add(o, "voice", json_object_new_string(voice));
        json_object_object_add(o, "repeat", json_object_new_int(R));
        json_object_object_add(o, "load_ms", json_object_new_double(load_ms));
        json_object_object_add(o, "sentence_audio_s", json_object_new_double(s[0].audio_s));
        json_object_object_add(o, "sentence_ms", json_object_new_double(cli_median(v_s_ms, R)));
        json_object_object_add(o, "sentence_rtf", json_object_new_double(cli_median(v_s_rtf, R)));
        json_object_object_add(o, "paragraph_audio_s", json_object_new_double(p[0].audio_s));
        json_object_object_add(o, "paragraph_chunks", json_object_new_int(p[0].chunks));
        json_object_object_add(o, "paragraph_first_audio_ms", json_object_new_double(cli_median(v_p_first, R)));
        json_object_object_add(o, "paragraph_ms", json_object_new_double(cli_median(v_p_ms, R)));
        json_object_object_add(o, "paragraph_rtf", json_object_new_double(cli_median(v_p_rtf, R)));
        json_object_object_add(o, "peak_rss_mb", json_object_new_double(rss_mb));
        if (profile) json_object_object_add(o, "kernels", cli_kernels_json(kt, n_kt < 64 ? n_kt : 64));
        if (peak32 > 0) {
            json_object_object_add(o, "fma_peak_gflops", json_object_new_double(peak32));
            json_object_object_add(o, "bf16_peak_gflops", json_object_new_double(peak16));
        }
        printf("%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE));
        json_object_put(o);
    } else {
        printf("model        %s (%s, %.2f M params, %.1f MiB)\n", path, info.architecture, info.n_params / 1e6, file_mb);
        printf("backend      %s%s%s", info.backend, *info.adapter ? " / " : "", info.adapter);
        if (!strcmp(info.backend, "cpu")) printf(" (%d threads)", info.n_threads);
        if (full) printf(", full precision");
        if (on_cpu) printf("\nproducts     %s", gemm);
        printf("\nvoice        %s, %d runs (medians)\n", voice, R);
        printf("sentence     %.2f s of audio in %.0f ms: RTF %.3f\n", s[0].audio_s, cli_median(v_s_ms, R),
               cli_median(v_s_rtf, R));
        printf("paragraph    %.2f s of audio in %d pieces: first audio %.0f ms, RTF %.3f\n", p[0].audio_s, p[0].chunks,
               cli_median(v_p_first, R), cli_median(v_p_rtf, R));
        printf("peak RSS     %.1f MiB\n", rss_mb);
        if (peak32 > 0)
            printf("FMA peak     %.0f GFLOP/s f32, %.0f bf16 pairs (%d threads, a register-only loop, now)\n", peak32,
                   peak16, info.n_threads);
        for (int i = 0; i < n_kt && i < 64; i++) {
            printf("  %-40s %8llu calls %10.2f ms", kt[i].name, (unsigned long long)kt[i].calls, kt[i].total_ms);
            if (kt[i].flop > 0 && kt[i].total_ms > 0) {
                const double g = kt[i].flop / (kt[i].total_ms * 1e6);
                const double peak = strstr(kt[i].name, "bf16 pairs") ? peak16 : peak32;
                printf(" %8.1f GFLOP/s", g);
                if (peak > 0) printf(" (%.0f%% of the peak)", 100 * g / peak);
            }
            printf("\n");
        }
    }
done:
    wgml_model_free(m);
    return rc;
}
