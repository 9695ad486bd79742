/*
 * test_audio_mel.c - src/audio/mel.c, Whisper's front end:
 *   - the Slaney filters against the official mel_filters_80/128.npy;
 *   - the log-mel (FFT, reflection, window, filters, floor) against a plain
 *     O(N^2) DFT written out here in double, on short clips whose padding
 *     and reflection take every path (a clip shorter than the reflection);
 *   - every window of every case of ../shared/whisper/reference/
 *     whisper-micro-random (silence, hello, sentence, train_gb, jfk, long's 2
 *     windows): audio.npy -> log-mel with 480000 samples of padding -> the
 *     window at seek, against wK_mel.npy (max abs 1e-4), and the manifest's
 *     content_frames, segment_size, mel_max and mel_floor;
 *   - threads and the two-pass form (raw, then normalize) give the same bits;
 *   - argument errors, out of memory;
 *   - the time for a 30 s clip on one core (printed).
 */
#include "audio/mel.h"
#include "check_err.h"
#include "core/alloc.h"
#include "core/threadpool.h"
#include "npy.h"
#include "testutil.h"

#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define REF "whisper/reference/whisper-micro-random"

static float *load_npy_f32(const char *rel, npy_array *a) {
    const char *path = tu_shared(rel);
    if (npy_read(path, a)) fail_msg("cannot read %s", path);
    float *f = malloc((size_t)(a->n ? a->n : 1) * sizeof *f);
    for (int64_t i = 0; i < a->n; i++)
        f[i] = (float)a->v[i];
    return f;
}

static void check_filters(int n_mels) {
    char rel[128];
    snprintf(rel, sizeof rel, "whisper/mel_filters_%d.npy", n_mels);
    npy_array a;
    float *want = load_npy_f32(rel, &a);
    assert_int_equal(a.ndim, 2);
    assert_int_equal(a.shape[0], n_mels);
    assert_int_equal(a.shape[1], WGML_MEL_N_BINS);
    float *got = malloc((size_t)a.n * sizeof *got);
    assert_int_equal(wgml_mel_filters_slaney(n_mels, 16000, 400, got), WGML_OK);
    double worst = 0;
    int exact = 0;
    for (int64_t i = 0; i < a.n; i++) {
        double d = fabs((double)got[i] - want[i]);
        if (d > worst) worst = d;
        exact += got[i] == want[i];
    }
    printf("  %d mel filters: max abs diff %.3g, %d of %lld values bit-exact\n", n_mels, worst, exact, (long long)a.n);
    assert_true(worst < 1e-6);
    free(got);
    free(want);
    npy_free(&a);
}

static void test_filters(void **state) {
    (void)state;
    check_filters(80);
    check_filters(128);
    float f[4];
    assert_int_equal(wgml_mel_filters_slaney(0, 16000, 400, f), WGML_ERR_INVALID_ARGUMENT);
    assert_int_equal(wgml_mel_filters_slaney(80, 0, 400, f), WGML_ERR_INVALID_ARGUMENT);
    assert_int_equal(wgml_mel_filters_slaney(80, 16000, 1, f), WGML_ERR_INVALID_ARGUMENT);
    assert_int_equal(wgml_mel_filters_slaney(80, 16000, 400, NULL), WGML_ERR_INVALID_ARGUMENT);
}

/* ---- a plain reference: numpy reflect, periodic Hann, an O(N^2) DFT, all in double ---- */

static double ref_sample(const float *x, size_t n, size_t len, long long i) {
    while (i < 0 || i >= (long long)len) {
        if (len == 1) {
            i = 0;
            break;
        }
        if (i < 0) i = -i;
        if (i >= (long long)len) i = 2 * ((long long)len - 1) - i;
    }
    return (size_t)i < n ? x[i] : 0.0;
}

static void ref_log_mel(const float *x, size_t n, size_t pad, const float *filters, int n_mels, float *out) {
    const size_t len = n + pad, frames = len / 160;
    double re[201], im[201], power[201], seg[400];
    float mx = -INFINITY;
    for (size_t t = 0; t < frames; t++) {
        for (int j = 0; j < 400; j++)
            seg[j] = ref_sample(x, n, len, (long long)(t * 160) - 200 + j) * (0.5 - 0.5 * cos(2 * M_PI * j / 400));
        for (int k = 0; k <= 200; k++) {
            re[k] = im[k] = 0;
            for (int j = 0; j < 400; j++) {
                double a = -2 * M_PI * (double)((j * k) % 400) / 400;
                re[k] += seg[j] * cos(a);
                im[k] += seg[j] * sin(a);
            }
            power[k] = re[k] * re[k] + im[k] * im[k];
        }
        for (int m = 0; m < n_mels; m++) {
            double acc = 0;
            for (int k = 0; k <= 200; k++)
                acc += (double)filters[m * 201 + k] * power[k];
            float v = (float)log10(acc > 1e-10 ? acc : 1e-10);
            out[(size_t)m * frames + t] = v;
            if (v > mx) mx = v;
        }
    }
    for (size_t i = 0; i < frames * (size_t)n_mels; i++)
        out[i] = ((out[i] > mx - 8 ? out[i] : mx - 8) + 4) / 4;
}

static void test_against_dft(void **state) {
    (void)state;
    float *filters = malloc(80 * 201 * sizeof *filters);
    assert_int_equal(wgml_mel_filters_slaney(80, 16000, 400, filters), WGML_OK);
    const struct {
        size_t n, pad;
    } cases[] = {{4000, 0}, {4000, 37}, {3333, 1000},        {1601, 480}, {150, 170},
                 {50, 0},   {100, 90},  {250, 480000 / 100}, {0, 800}};
    tu_rng rng = {5};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const size_t n = cases[c].n, pad = cases[c].pad, frames = wgml_log_mel_frames(n, pad);
        float *x = malloc((n ? n : 1) * sizeof *x);
        for (size_t i = 0; i < n; i++) /* a chirp, noise, and a silent stretch */
            x[i] = i % 1000 >= 500 && i % 1000 < 600
                       ? 0.0f
                       : (float)(0.3 * sin(1e-4 * (double)i * (double)i) + 0.05 * (tu_uniform(&rng) - 0.5));
        float *got = malloc((frames * 80 + 1) * sizeof *got), *want = malloc((frames * 80 + 1) * sizeof *want);
        wgml_error err;
        float mx;
        assert_int_equal(wgml_log_mel(x, n, pad, filters, 80, NULL, got, &mx, &err), WGML_OK);
        ref_log_mel(x, n, pad, filters, 80, want);
        double worst = 0, top = -INFINITY;
        for (size_t i = 0; i < frames * 80; i++) {
            double d = fabs((double)got[i] - want[i]);
            if (d > worst) worst = d;
            if (want[i] > top) top = want[i];
        }
        printf("  %zu samples + %zu padding (%zu frames): max abs diff from a double DFT %.2e\n", n, pad, frames,
               worst);
        assert_true(worst < 2e-6);
        if (frames) assert_true(fabs(mx - top) < 2e-6);
        free(x);
        free(got);
        free(want);
    }
    free(filters);
}

/* ---- the reference cases ---- */

static json_object *get(json_object *o, const char *key) {
    json_object *v;
    if (!json_object_object_get_ex(o, key, &v)) fail_msg("manifest: no '%s'", key);
    return v;
}

static void test_reference(void **state) {
    (void)state;
    size_t size;
    char *text = (char *)tu_read_file(tu_shared(REF "/manifest.json"), &size);
    assert_non_null(text);
    json_object *man = json_tokener_parse(text);
    free(text);
    assert_non_null(man);
    npy_array fa;
    float *official = load_npy_f32("whisper/mel_filters_80.npy", &fa);
    npy_free(&fa);
    float *slaney = malloc(80 * 201 * sizeof *slaney);
    assert_int_equal(wgml_mel_filters_slaney(80, 16000, 400, slaney), WGML_OK);
    float *win = malloc(80 * 3000 * sizeof *win);
    json_object *cases = get(man, "cases");
    int n_windows = 0;
    for (size_t ci = 0; ci < json_object_array_length(cases); ci++) {
        json_object *c = json_object_array_get_idx(cases, ci);
        const char *name = json_object_get_string(get(c, "name"));
        char rel[256];
        snprintf(rel, sizeof rel, REF "/%s/audio.npy", name);
        npy_array aa;
        float *audio = load_npy_f32(rel, &aa);
        const size_t n = (size_t)aa.n;
        npy_free(&aa);
        assert_int_equal(n, json_object_get_int64(get(c, "samples")));
        const size_t content = wgml_log_mel_content_frames(n);
        assert_int_equal(content, json_object_get_int64(get(c, "content_frames")));
        const size_t frames = wgml_log_mel_frames(n, WGML_MEL_PAD_SAMPLES);
        assert_int_equal(frames, content + 3000);
        float *mel = malloc(frames * 80 * sizeof *mel), *mel2 = malloc(frames * 80 * sizeof *mel2);
        wgml_error err;
        float mx, mx2;
        assert_int_equal(wgml_log_mel(audio, n, WGML_MEL_PAD_SAMPLES, official, 80, NULL, mel, &mx, &err), WGML_OK);
        /* the filters computed here give the same within float rounding */
        assert_int_equal(wgml_log_mel(audio, n, WGML_MEL_PAD_SAMPLES, slaney, 80, NULL, mel2, &mx2, &err), WGML_OK);
        double fdiff = 0;
        for (size_t i = 0; i < frames * 80; i++)
            if (fabs(mel[i] - mel2[i]) > fdiff) fdiff = fabs(mel[i] - mel2[i]);
        const double want_max = json_object_get_double(get(c, "mel_max"));
        const double want_floor = json_object_get_double(get(c, "mel_floor"));
        assert_true(fabs(mx - want_max) < 1e-4);
        /* the floor: max - 2 (8 in log10, over 4), or the padding's log10(1e-10) = -10 -> -1.5 when higher
         * (silence); it is the minimum of the whole tensor (the padding reaches it) */
        assert_true(fabs((mx - 2.0f > -1.5f ? mx - 2.0f : -1.5f) - want_floor) < 1e-4);
        float lo = INFINITY;
        for (size_t i = 0; i < frames * 80; i++)
            if (mel[i] < lo) lo = mel[i];
        assert_true(fabs(lo - want_floor) < 1e-4);
        json_object *windows = get(c, "windows");
        for (size_t wi = 0; wi < json_object_array_length(windows); wi++) {
            json_object *w = json_object_array_get_idx(windows, wi);
            const size_t seek = (size_t)json_object_get_int64(get(w, "seek"));
            assert_int_equal(seek, wi * 3000);
            const size_t seg = wgml_log_mel_window(mel, 80, frames, content, seek, win);
            assert_int_equal(seg, json_object_get_int64(get(w, "segment_size")));
            snprintf(rel, sizeof rel, REF "/%s/w%zu_mel.npy", name, wi);
            npy_array ma;
            float *want = load_npy_f32(rel, &ma);
            assert_int_equal(ma.n, 80 * 3000);
            double worst = 0;
            for (int64_t i = 0; i < ma.n; i++) {
                double d = fabs((double)win[i] - want[i]);
                if (d > worst) worst = d;
            }
            /* the padding columns are exactly 0 */
            for (int m = 0; m < 80; m++)
                for (size_t t = seg; t < 3000; t++)
                    assert_true(win[m * 3000 + t] == 0.0f);
            printf("  %-8s w%zu (seek %4zu, %4zu frames): max abs diff %.2e (max %.6f, floor %.6f; own filters %.1e)\n",
                   name, wi, seek, seg, worst, mx, lo, fdiff);
            if (worst >= 1e-4) fail_msg("%s w%zu: log-mel differs by %g", name, wi, worst);
            free(want);
            npy_free(&ma);
            n_windows++;
        }
        /* no window past the content */
        assert_int_equal(wgml_log_mel_window(mel, 80, frames, content, json_object_array_length(windows) * 3000, win),
                         0);
        free(mel);
        free(mel2);
        free(audio);
    }
    assert_int_equal(n_windows, 7);
    free(win);
    free(slaney);
    free(official);
    json_object_put(man);
}

/* Threads, the two-pass form and the one-call form agree bit for bit. */
static void test_threads_and_parts(void **state) {
    (void)state;
    npy_array aa;
    float *audio = load_npy_f32(REF "/jfk/audio.npy", &aa);
    const size_t n = (size_t)aa.n, pad = WGML_MEL_PAD_SAMPLES, frames = wgml_log_mel_frames(n, pad);
    npy_free(&aa);
    float *filters = malloc(80 * 201 * sizeof *filters);
    assert_int_equal(wgml_mel_filters_slaney(80, 16000, 400, filters), WGML_OK);
    float *a = malloc(frames * 80 * sizeof *a), *b = malloc(frames * 80 * sizeof *b);
    wgml_error err;
    float ma, mb;
    assert_int_equal(wgml_log_mel(audio, n, pad, filters, 80, NULL, a, &ma, &err), WGML_OK);
    wgml_threadpool *pool;
    assert_int_equal(wgml_threadpool_create(3, &pool, &err), WGML_OK);
    assert_int_equal(wgml_log_mel(audio, n, pad, filters, 80, pool, b, &mb, &err), WGML_OK);
    assert_true(ma == mb);
    assert_memory_equal(a, b, frames * 80 * sizeof *a);
    /* two passes: the maximum over all frames in pieces, then a window's frames alone */
    float raw_max = -INFINITY;
    const size_t piece = 777;
    float *tmp = malloc(80 * piece * sizeof *tmp);
    for (size_t f0 = 0; f0 < frames; f0 += piece) {
        size_t f1 = f0 + piece < frames ? f0 + piece : frames;
        float m;
        assert_int_equal(wgml_log_mel_raw(audio, n, pad, filters, 80, f0, f1, pool, tmp, piece, &m, &err), WGML_OK);
        if (m > raw_max) raw_max = m;
    }
    assert_true((raw_max + 4) / 4 == ma);
    const size_t f0 = 500, f1 = 1100;
    float *part = malloc(80 * 700 * sizeof *part);
    assert_int_equal(wgml_log_mel_raw(audio, n, pad, filters, 80, f0, f1, NULL, part, 700, NULL, &err), WGML_OK);
    wgml_log_mel_normalize(part, 80, f1 - f0, 700, raw_max);
    for (int m = 0; m < 80; m++)
        assert_memory_equal(part + m * 700, a + m * frames + f0, (f1 - f0) * sizeof(float));
    free(part);
    free(tmp);
    wgml_threadpool_free(pool);
    free(a);
    free(b);
    free(filters);
    free(audio);
}

static void test_silence(void **state) {
    (void)state;
    float *filters = malloc(128 * 201 * sizeof *filters);
    assert_int_equal(wgml_mel_filters_slaney(128, 16000, 400, filters), WGML_OK);
    float *x = calloc(16000, sizeof *x), *mel = malloc(128 * 200 * sizeof *mel), mx;
    wgml_error err;
    assert_int_equal(wgml_log_mel(x, 16000, 16000, filters, 128, NULL, mel, &mx, &err), WGML_OK);
    assert_true(mx == -1.5f);
    for (int i = 0; i < 128 * 200; i++)
        assert_true(mel[i] == -1.5f);
    free(x);
    free(mel);
    free(filters);
}

static void test_errors(void **state) {
    (void)state;
    float f[201] = {1}, x[1000] = {0}, out[80 * 10];
    wgml_error err;
    CHECK_ERR("bands", wgml_log_mel(x, 1000, 0, f, 0, NULL, out, NULL, &err), &err, WGML_ERR_INVALID_ARGUMENT,
              "mel bands", NULL);
    CHECK_ERR("filters", wgml_log_mel(x, 1000, 0, NULL, 1, NULL, out, NULL, &err), &err, WGML_ERR_INVALID_ARGUMENT,
              "filters", NULL);
    CHECK_ERR("overflow", wgml_log_mel(x, SIZE_MAX - 5, 10, f, 1, NULL, out, NULL, &err), &err,
              WGML_ERR_INVALID_ARGUMENT, "too many", NULL);
    CHECK_ERR("range", wgml_log_mel_raw(x, 1000, 0, f, 1, 3, 7, NULL, out, 4, NULL, &err), &err,
              WGML_ERR_INVALID_ARGUMENT, "frames [3, 7) of 6", NULL);
    CHECK_ERR("stride", wgml_log_mel_raw(x, 1000, 0, f, 1, 0, 6, NULL, out, 4, NULL, &err), &err,
              WGML_ERR_INVALID_ARGUMENT, "stride", NULL);
    /* nothing to do */
    assert_int_equal(wgml_log_mel(NULL, 0, 100, f, 1, NULL, NULL, NULL, &err), WGML_OK);
    for (long fail = 0; fail < 6; fail++) {
        long live = wgml_alloc_live();
        wgml_alloc_fail_after(fail);
        wgml_status st = wgml_log_mel(x, 1000, 0, f, 1, NULL, out, NULL, &err);
        wgml_alloc_fail_after(-1);
        if (st) CHECK_ERR("oom", st, &err, WGML_ERR_OUT_OF_MEMORY, "out of memory", NULL);
        assert_int_equal(wgml_alloc_live(), live);
    }
}

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* A 30 s clip (jfk three times, less a second) with the transcriber's padding, one core. */
static void test_speed(void **state) {
    (void)state;
    npy_array aa;
    float *jfk = load_npy_f32(REF "/jfk/audio.npy", &aa);
    const size_t n = 480000, pad = WGML_MEL_PAD_SAMPLES, frames = wgml_log_mel_frames(n, pad);
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++)
        x[i] = jfk[i % (size_t)aa.n];
    npy_free(&aa);
    float *filters = malloc(80 * 201 * sizeof *filters), *mel = malloc(frames * 80 * sizeof *mel);
    assert_int_equal(wgml_mel_filters_slaney(80, 16000, 400, filters), WGML_OK);
    wgml_error err;
    double best = 1e9;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = now_ms();
        assert_int_equal(wgml_log_mel(x, n, pad, filters, 80, NULL, mel, NULL, &err), WGML_OK);
        double t = now_ms() - t0;
        if (t < best) best = t;
    }
    printf("  log-mel of a 30 s clip (+30 s padding, %zu frames), one thread: %.2f ms (best of 5)\n", frames, best);
    free(x);
    free(jfk);
    free(filters);
    free(mel);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_filters), cmocka_unit_test(test_against_dft),       cmocka_unit_test(test_reference),
        cmocka_unit_test(test_silence), cmocka_unit_test(test_threads_and_parts), cmocka_unit_test(test_errors),
        cmocka_unit_test(test_speed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
