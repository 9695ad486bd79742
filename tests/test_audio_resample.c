/*
 * test_audio_resample.c - src/audio/resample.c: lengths (ceil(n * out / in)),
 * argument and memory errors, sines below the lower Nyquist frequency keep
 * amplitude and phase (error < 1e-3 away from the ends), tones above the new
 * Nyquist frequency are attenuated >= 80 dB, images of an upsampled tone
 * likewise, DC is preserved, the impulse response is symmetric about the
 * impulse, and the stream gives the one-shot output bit for bit, chunked any
 * way.
 */
#include "audio/resample.h"
#include "check_err.h"
#include "core/alloc.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const int rate_pairs[][2] = {
    {8000, 16000},  {11025, 16000}, {22050, 16000}, {24000, 16000}, {32000, 16000}, {44100, 16000},
    {48000, 16000}, {96000, 16000}, {16000, 48000}, {16000, 8000},  {44100, 48000}, {44100, 16001},
};
#define N_PAIRS ((int)(sizeof rate_pairs / sizeof rate_pairs[0]))

static float *resample_ok(const float *x, size_t n, int rin, int rout, size_t *m) {
    float *y;
    wgml_error err;
    wgml_status st = wgml_resample(x, n, rin, rout, &y, m, &err);
    if (st) fail_msg("resample %d -> %d: %s", rin, rout, err.message);
    assert_int_equal(*m, wgml_resample_length(n, rin, rout));
    return y;
}

/* Output samples to skip at each end: the filter's half-width (66 samples of the lower rate) and a margin. */
static size_t edge(int rin, int rout) {
    int low = rin < rout ? rin : rout;
    return (size_t)ceil(70.0 * rout / low) + 2;
}

static void test_lengths(void **state) {
    (void)state;
    assert_int_equal(wgml_resample_length(44100, 44100, 16000), 16000);
    assert_int_equal(wgml_resample_length(48000, 48000, 16000), 16000);
    assert_int_equal(wgml_resample_length(1, 48000, 16000), 1); /* time 0 */
    assert_int_equal(wgml_resample_length(3, 48000, 16000), 1); /* times 0, 1, 2 < 3 */
    assert_int_equal(wgml_resample_length(4, 48000, 16000), 2); /* time 3 < 4 */
    assert_int_equal(wgml_resample_length(5, 8000, 16000), 10);
    assert_int_equal(wgml_resample_length(100, 44100, 16000), 37); /* ceil(36.28) */
    assert_int_equal(wgml_resample_length(0, 44100, 16000), 0);
    assert_int_equal(wgml_resample_length(10, 0, 16000), 0);
    assert_int_equal(wgml_resample_length(10, 16000, 1000001), 0);
    assert_int_equal(wgml_resample_length(SIZE_MAX / 2, 1, 1000000), 0);
    for (int p = 0; p < N_PAIRS; p++) {
        int rin = rate_pairs[p][0], rout = rate_pairs[p][1];
        for (size_t n = 0; n < 300; n += 7) {
            size_t m = wgml_resample_length(n, rin, rout);
            /* every output time j * rin / rout lies in [0, n), the next one does not */
            assert_true((double)m * rin >= (double)n * rout - 1e-9);
            if (m) assert_true((double)(m - 1) * rin < (double)n * rout);
        }
    }
}

static void test_errors(void **state) {
    (void)state;
    float x[4] = {1, 2, 3, 4}, *y = (float *)1;
    size_t m = 99;
    wgml_error err;
    CHECK_ERR("rate 0", wgml_resample(x, 4, 0, 16000, &y, &m, &err), &err, WGML_ERR_INVALID_ARGUMENT, "rates", "0");
    assert_null(y);
    assert_int_equal(m, 0);
    CHECK_ERR("negative rate", wgml_resample(x, 4, 16000, -8000, &y, &m, &err), &err, WGML_ERR_INVALID_ARGUMENT,
              "-8000", NULL);
    CHECK_ERR("absurd rate", wgml_resample(x, 4, 2000000, 16000, &y, &m, &err), &err, WGML_ERR_INVALID_ARGUMENT,
              "2000000", NULL);
    CHECK_ERR("overflow", wgml_resample(x, SIZE_MAX / 4, 1, 1000000, &y, &m, &err), &err, WGML_ERR_INVALID_ARGUMENT,
              "too long", NULL);
    wgml_resampler *r = NULL;
    CHECK_ERR("stream rate", wgml_resampler_create(44100, 0, &r, &err), &err, WGML_ERR_INVALID_ARGUMENT, "rates", NULL);
    assert_null(r);
    /* no room */
    assert_int_equal(wgml_resampler_create(8000, 16000, &r, &err), WGML_OK);
    float big[400] = {0}, out[1000];
    size_t k;
    CHECK_ERR("room", wgml_resampler_push(r, big, 400, 1, out, 10, &k, &err), &err, WGML_ERR_INVALID_ARGUMENT, "room",
              NULL);
    assert_int_equal(k, 0);
    wgml_resampler_free(r);

    /* out of memory at every allocation: an error, nothing leaked */
    for (long fail = 0; fail < 8; fail++) {
        long live = wgml_alloc_live();
        wgml_alloc_fail_after(fail);
        wgml_status st = wgml_resample(big, 400, 44100, 16000, &y, &m, &err);
        wgml_alloc_fail_after(-1);
        if (st == WGML_OK) {
            wgml_free(y);
        } else {
            CHECK_ERR("oom", st, &err, WGML_ERR_OUT_OF_MEMORY, "out of memory", NULL);
            assert_null(y);
        }
        assert_int_equal(wgml_alloc_live(), live);
    }
}

static void test_copy(void **state) {
    (void)state;
    float x[5] = {1, -2, 3.5f, 0, 7}, *y;
    size_t m;
    y = resample_ok(x, 5, 22050, 22050, &m);
    assert_int_equal(m, 5);
    assert_memory_equal(x, y, sizeof x);
    wgml_free(y);
    wgml_error err;
    assert_int_equal(wgml_resample(x, 0, 44100, 16000, &y, &m, &err), WGML_OK);
    assert_null(y);
    assert_int_equal(m, 0);
}

/* Sines in the pass band: amplitude and phase kept. */
static void test_sines(void **state) {
    (void)state;
    for (int p = 0; p < N_PAIRS; p++) {
        const int rin = rate_pairs[p][0], rout = rate_pairs[p][1], low = rin < rout ? rin : rout;
        const double freqs[] = {50, 440, 1000.5, 0.5 * 0.5 * low, 0.85 * 0.5 * low};
        const size_t n = (size_t)rin / 2;
        float *x = malloc(n * sizeof *x);
        double worst = 0;
        for (int fi = 0; fi < 5; fi++) {
            const double f = freqs[fi], ph = 0.3 + fi;
            for (size_t i = 0; i < n; i++)
                x[i] = (float)(0.9 * sin(2 * M_PI * f * (double)i / rin + ph));
            size_t m;
            float *y = resample_ok(x, n, rin, rout, &m);
            const size_t e = edge(rin, rout);
            for (size_t j = e; j + e < m; j++) {
                double want = 0.9 * sin(2 * M_PI * f * (double)j / rout + ph);
                double d = fabs(y[j] - want) / 0.9;
                if (d > worst) worst = d;
                if (d >= 1e-3) fail_msg("%d -> %d Hz, %.1f Hz: sample %zu is %g, want %g", rin, rout, f, j, y[j], want);
            }
            wgml_free(y);
        }
        printf("  %6d -> %6d Hz: pass band max error %.2e\n", rin, rout, worst);
        free(x);
    }
}

/* RMS of y[e, m - e). */
static double rms_mid(const float *y, size_t m, size_t e) {
    double s = 0;
    size_t c = 0;
    for (size_t j = e; j + e < m; j++, c++)
        s += (double)y[j] * y[j];
    return c ? sqrt(s / (double)c) : 0;
}

/* Tones between the new and the old Nyquist frequency disappear (>= 80 dB). */
static void test_stopband(void **state) {
    (void)state;
    for (int p = 0; p < N_PAIRS; p++) {
        const int rin = rate_pairs[p][0], rout = rate_pairs[p][1];
        if (rout >= rin) continue;
        const size_t n = (size_t)rin / 2;
        float *x = malloc(n * sizeof *x);
        double worst = -1000;
        const double nyq = 0.5 * rout,
                     f_list[] = {1.0 * nyq + 5, 1.02 * nyq, 1.3 * nyq, 0.5 * rin - 0.3 * (0.5 * rin - nyq)};
        for (int fi = 0; fi < 4; fi++) {
            for (size_t i = 0; i < n; i++)
                x[i] = (float)sin(2 * M_PI * f_list[fi] * (double)i / rin + 0.1);
            size_t m;
            float *y = resample_ok(x, n, rin, rout, &m);
            double db = 20 * log10(rms_mid(y, m, edge(rin, rout)) / sqrt(0.5) + 1e-30);
            if (db > worst) worst = db;
            if (db > -80) fail_msg("%d -> %d Hz: a %.1f Hz tone comes out at %.1f dB", rin, rout, f_list[fi], db);
            wgml_free(y);
        }
        printf("  %6d -> %6d Hz: stop band worst %.1f dB\n", rin, rout, worst);
        free(x);
    }
}

/* Upsampling a pass-band tone: the output is that tone alone (no images above the old Nyquist). */
static void test_images(void **state) {
    (void)state;
    const int pairs[][2] = {{16000, 48000}, {8000, 16000}, {22050, 44100}, {16000, 44100}};
    for (int p = 0; p < 4; p++) {
        const int rin = pairs[p][0], rout = pairs[p][1];
        const size_t n = (size_t)rin;
        const double f = 0.8 * 0.5 * rin;
        float *x = malloc(n * sizeof *x);
        for (size_t i = 0; i < n; i++)
            x[i] = (float)sin(2 * M_PI * f * (double)i / rin);
        size_t m;
        float *y = resample_ok(x, n, rin, rout, &m);
        for (size_t j = 0; j < m; j++)
            y[j] -= (float)sin(2 * M_PI * f * (double)j / rout);
        double db = 20 * log10(rms_mid(y, m, edge(rin, rout)) / sqrt(0.5) + 1e-30);
        printf("  %6d -> %6d Hz: a %.0f Hz tone, error %.1f dB\n", rin, rout, f, db);
        assert_true(db < -80);
        wgml_free(y);
        free(x);
    }
}

static void test_dc(void **state) {
    (void)state;
    for (int p = 0; p < N_PAIRS; p++) {
        const int rin = rate_pairs[p][0], rout = rate_pairs[p][1];
        const size_t n = 5000;
        float *x = malloc(n * sizeof *x);
        for (size_t i = 0; i < n; i++)
            x[i] = 0.7f;
        size_t m;
        float *y = resample_ok(x, n, rin, rout, &m);
        const size_t e = edge(rin, rout);
        for (size_t j = e; j + e < m; j++)
            if (fabsf(y[j] - 0.7f) > 1e-6f) fail_msg("%d -> %d Hz: DC %zu is %.9g", rin, rout, j, y[j]);
        wgml_free(y);
        free(x);
    }
}

/* An impulse at an input time that is also an output time gives a symmetric response summing to 1. */
static void test_impulse(void **state) {
    (void)state;
    for (int p = 0; p < N_PAIRS; p++) {
        const int rin = rate_pairs[p][0], rout = rate_pairs[p][1];
        if (rout == 16001) continue;
        int a = rin, b = rout;
        while (b) {
            int t = a % b;
            a = b;
            b = t;
        }
        const size_t L = (size_t)rout / (size_t)a, M = (size_t)rin / (size_t)a;
        const size_t c = 1000 / M + 3; /* the impulse at input c M = output c L, well inside */
        const size_t n = c * M * 2 + 1;
        float *x = calloc(n, sizeof *x);
        x[c * M] = 1;
        size_t m;
        float *y = resample_ok(x, n, rin, rout, &m);
        const size_t mid = c * L;
        double sum = 0, asym = 0, peak = 0;
        for (size_t j = 0; j < m; j++) {
            sum += y[j];
            if (fabs(y[j]) > peak) peak = fabs(y[j]);
        }
        for (size_t d = 1; d <= mid && mid + d < m; d++) {
            double e = fabs((double)y[mid + d] - y[mid - d]);
            if (e > asym) asym = e;
        }
        /* outputs every M / L input samples over a kernel of unit area: the sum is L / M */
        const double want = (double)L / (double)M;
        printf("  %6d -> %6d Hz: impulse peak %.4f, sum %.6f (want %.6f), asymmetry %.1e\n", rin, rout, peak, sum, want,
               asym);
        assert_true(asym < 1e-6 * peak);
        assert_true(fabs(sum - want) < 1e-4 * want);
        assert_true(peak == fabs(y[mid]));
        wgml_free(y);
        free(x);
    }
}

static void test_stream(void **state) {
    (void)state;
    tu_rng rng = {99};
    for (int p = 0; p < N_PAIRS; p++) {
        const int rin = rate_pairs[p][0], rout = rate_pairs[p][1];
        const size_t n = 20000 + (size_t)p * 37;
        float *x = malloc(n * sizeof *x);
        for (size_t i = 0; i < n; i++)
            x[i] = tu_uniform(&rng) * 2 - 1;
        size_t m;
        float *y = resample_ok(x, n, rin, rout, &m);
        wgml_resampler *r;
        wgml_error err;
        assert_int_equal(wgml_resampler_create(rin, rout, &r, &err), WGML_OK);
        for (int round = 0; round < 2; round++) { /* the second round after a flush: the same again */
            float *z = malloc((m + 1) * sizeof *z);
            size_t got = 0, i = 0;
            while (i < n) {
                size_t k = (size_t)(tu_next(&rng) % 3000);
                if (k % 5 == 0) k = k % 3;
                if (k > n - i) k = n - i;
                size_t room = wgml_resampler_max_output(r, k, 0), w;
                assert_true(got + room <= m);
                assert_int_equal(wgml_resampler_push(r, x + i, k, 0, z + got, room, &w, &err), WGML_OK);
                assert_int_equal(w, room);
                got += w;
                i += k;
            }
            size_t room = wgml_resampler_max_output(r, 0, 1), w;
            assert_int_equal(got + room, m);
            assert_int_equal(wgml_resampler_push(r, NULL, 0, 1, z + got, room, &w, &err), WGML_OK);
            got += w;
            assert_int_equal(got, m);
            for (size_t j = 0; j < m; j++)
                if (z[j] != y[j])
                    fail_msg("%d -> %d Hz: stream sample %zu is %.9g, one shot %.9g", rin, rout, j, z[j], y[j]);
            free(z);
        }
        wgml_resampler_free(r);
        wgml_free(y);
        free(x);
    }
}

/* A minute of 44.1 kHz audio to 16 kHz: the time it takes. */
static void test_speed(void **state) {
    (void)state;
    const size_t n = 44100 * 60;
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++)
        x[i] = (float)sin(0.01 * (double)i);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    size_t m;
    float *y = resample_ok(x, n, 44100, 16000, &m);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("  60 s at 44.1 kHz -> 16 kHz: %.1f ms\n", (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6);
    wgml_free(y);
    free(x);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lengths), cmocka_unit_test(test_errors),   cmocka_unit_test(test_copy),
        cmocka_unit_test(test_sines),   cmocka_unit_test(test_stopband), cmocka_unit_test(test_images),
        cmocka_unit_test(test_dc),      cmocka_unit_test(test_impulse),  cmocka_unit_test(test_stream),
        cmocka_unit_test(test_speed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
