/*
 * resample.c - windowed-sinc resampling through polyphase tables (resample.h).
 *
 * Output j lies at input time t = j M / L = k0 + phase / L (k0 = floor, the
 * phase an integer in [0, L)); it is
 *     y[j] = sum_i x[i] g(t - i),  g(tau) = 2 fc sinc(2 fc tau) kaiser(tau / T)
 * over the 2K inputs i = k0 - K + 1 .. k0 + K (K = ceil(T)), fc the cutoff in
 * cycles per input sample and T the half-width in input samples. Row p of the
 * table holds g(p / P + K - 1 - m) for m < 2K (padded with zeros to a multiple
 * of 8 taps), scaled to sum to 1. Both the one-shot call and the stream read
 * each output's taps from a contiguous window (gathered with zeros where it
 * leaves the signal) and take the same dot product: the same bits.
 */
#include "audio/resample.h"

#include "core/alloc.h"
#include "core/error.h"

#include <math.h>
#include <string.h>

#define PASS_EDGE   0.90 /* of the lower Nyquist frequency */
#define STOP_EDGE   1.00
#define HALF_WIDTH  66.0  /* in samples of the lower rate; Kaiser's estimate for 100 dB: 64.1 */
#define KAISER_BETA 10.06 /* 0.1102 (A - 8.7), A = 100 dB */
#define MAX_PHASES  1024  /* exact phases up to this; more are interpolated from this many */

struct wgml_resampler {
    int rate_in, rate_out;
    uint64_t L, M; /* rate_out / rate_in reduced */
    int copy;      /* equal rates */
    int K;         /* taps k0 - K + 1 .. k0 + K */
    int ntap;      /* 2K rounded up to 8 */
    int P;         /* tabulated phases: L, or MAX_PHASES (+1 row, interpolated) */
    int interp;
    float *table;
    float *tmp; /* ntap: a window gathered at the edges */
    /* the stream */
    uint64_t j, k0, rem; /* next output, floor(j M / L), (j M) mod L */
    uint64_t n_in;       /* samples pushed since the start */
    float *buf;          /* inputs [buf_start, n_in) */
    uint64_t buf_start;
    size_t buf_cap;
};

static uint64_t gcd_u64(uint64_t a, uint64_t b) {
    while (b) {
        uint64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

static int rate_ok(int r) { return r >= 1 && r <= WGML_RESAMPLE_MAX_RATE; }

/* ceil(a * L / M) without overflow for M, L <= 1e6; UINT64_MAX when it does not fit. */
static uint64_t mul_div_ceil(uint64_t a, uint64_t L, uint64_t M) {
    uint64_t q = a / M, r = a % M;
    if (q > (UINT64_MAX - L) / L) return UINT64_MAX;
    return q * L + (r * L + M - 1) / M;
}

size_t wgml_resample_length(size_t n, int rate_in, int rate_out) {
    if (!rate_ok(rate_in) || !rate_ok(rate_out)) return 0;
    uint64_t g = gcd_u64((uint64_t)rate_in, (uint64_t)rate_out);
    uint64_t v = mul_div_ceil((uint64_t)n, (uint64_t)rate_out / g, (uint64_t)rate_in / g);
    if (v == UINT64_MAX || v > (uint64_t)(SIZE_MAX / sizeof(float))) return 0;
    return (size_t)v;
}

/* I0, the modified Bessel function of the first kind, by its series. */
static double bessel_i0(double x) {
    double sum = 1, term = 1, q = x * x / 4;
    for (int k = 1; k < 200; k++) {
        term *= q / ((double)k * k);
        sum += term;
        if (term < sum * 1e-17) break;
    }
    return sum;
}

static double kernel(double tau, double fc, double T, double i0_beta) {
    double u = tau / T;
    if (u <= -1 || u >= 1) return 0;
    double x = 2 * fc * tau, s = x == 0 ? 1 : sin(M_PI * x) / (M_PI * x);
    return 2 * fc * s * bessel_i0(KAISER_BETA * sqrt(1 - u * u)) / i0_beta;
}

static wgml_status build(wgml_resampler *r, wgml_error *err) {
    const double ratio = (double)r->rate_out / r->rate_in, low = ratio < 1 ? ratio : 1;
    const double fc = 0.5 * low * (PASS_EDGE + STOP_EDGE) / 2, T = HALF_WIDTH / low;
    r->K = (int)ceil(T);
    r->ntap = (2 * r->K + 7) / 8 * 8;
    r->interp = r->L > MAX_PHASES;
    r->P = r->interp ? MAX_PHASES : (int)r->L;
    const int rows = r->P + r->interp;
    r->table = wgml_calloc((size_t)rows * (size_t)r->ntap, sizeof(float));
    r->tmp = wgml_calloc((size_t)r->ntap, sizeof(float));
    double *row = wgml_malloc((size_t)r->ntap * sizeof(double));
    if (!r->table || !r->tmp || !row) {
        wgml_free(row);
        return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "resample: out of memory for the filter table");
    }
    const double i0_beta = bessel_i0(KAISER_BETA);
    for (int p = 0; p < rows; p++) {
        const double phase = (double)p / r->P;
        double sum = 0;
        for (int m = 0; m < 2 * r->K; m++) {
            row[m] = kernel(phase + r->K - 1 - m, fc, T, i0_beta);
            sum += row[m];
        }
        float *dst = r->table + (size_t)p * (size_t)r->ntap;
        for (int m = 0; m < 2 * r->K; m++)
            dst[m] = (float)(row[m] / sum);
    }
    wgml_free(row);
    return WGML_OK;
}

wgml_status wgml_resampler_create(int rate_in, int rate_out, wgml_resampler **out, wgml_error *err) {
    *out = NULL;
    if (!rate_ok(rate_in) || !rate_ok(rate_out))
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "resample: rates %d -> %d Hz: each must lie in [1, %d]",
                         rate_in, rate_out, WGML_RESAMPLE_MAX_RATE);
    wgml_resampler *r = wgml_calloc(1, sizeof *r);
    if (!r) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "resample: out of memory");
    r->rate_in = rate_in;
    r->rate_out = rate_out;
    const uint64_t g = gcd_u64((uint64_t)rate_in, (uint64_t)rate_out);
    r->L = (uint64_t)rate_out / g;
    r->M = (uint64_t)rate_in / g;
    r->copy = rate_in == rate_out;
    if (!r->copy) {
        wgml_status st = build(r, err);
        if (st) {
            wgml_resampler_free(r);
            return st;
        }
    }
    *out = r;
    return WGML_OK;
}

void wgml_resampler_free(wgml_resampler *r) {
    if (!r) return;
    wgml_free(r->table);
    wgml_free(r->tmp);
    wgml_free(r->buf);
    wgml_free(r);
}

static float dot(const float *a, const float *b, int n) {
    float acc[8] = {0};
    for (int i = 0; i < n; i += 8)
        for (int k = 0; k < 8; k++)
            acc[k] += a[i + k] * b[i + k];
    return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

/* Outputs [j, j_end) from the signal x, whose sample at absolute index i is
 * x[i - x0] for lo <= i < hi and zero elsewhere (lo >= x0). Advances r's
 * (j, k0, rem). */
static void run(wgml_resampler *r, const float *x, int64_t x0, int64_t lo, int64_t hi, uint64_t j_end, float *out) {
    const int ntap = r->ntap, K = r->K;
    const uint64_t step_k = r->M / r->L, step_r = r->M % r->L;
    for (; r->j < j_end; r->j++) {
        const int64_t first = (int64_t)r->k0 - K + 1;
        const float *w;
        if (first >= lo && first + ntap <= hi) {
            w = x + (first - x0);
        } else {
            for (int m = 0; m < ntap; m++) {
                int64_t i = first + m;
                r->tmp[m] = i >= lo && i < hi ? x[i - x0] : 0.0f;
            }
            w = r->tmp;
        }
        float y;
        if (!r->interp) {
            y = dot(r->table + (size_t)r->rem * (size_t)ntap, w, ntap);
        } else {
            const double pos = (double)r->rem * r->P / (double)r->L;
            const int p0 = (int)pos;
            const float a = (float)(pos - p0);
            const float *t0 = r->table + (size_t)p0 * (size_t)ntap;
            y = (1 - a) * dot(t0, w, ntap) + a * dot(t0 + ntap, w, ntap);
        }
        *out++ = y;
        r->k0 += step_k;
        r->rem += step_r;
        if (r->rem >= r->L) {
            r->rem -= r->L;
            r->k0++;
        }
    }
}

/* The index one past the last output computable from n_tot samples (all when flushing). */
static uint64_t output_end(const wgml_resampler *r, uint64_t n_tot, int flush) {
    if (flush) return mul_div_ceil(n_tot, r->L, r->M);
    /* j such that floor(j M / L) + K <= n_tot - 1, i.e. j M < (n_tot - K) L */
    if (n_tot <= (uint64_t)r->K) return 0;
    return mul_div_ceil(n_tot - (uint64_t)r->K, r->L, r->M);
}

size_t wgml_resampler_max_output(const wgml_resampler *r, size_t n, int flush) {
    if (r->copy) return n;
    if (r->n_in > UINT64_MAX - n) return SIZE_MAX;
    const uint64_t end = output_end(r, r->n_in + n, flush);
    if (end == UINT64_MAX || end - r->j > SIZE_MAX) return SIZE_MAX;
    return end > r->j ? (size_t)(end - r->j) : 0;
}

static void reset(wgml_resampler *r) {
    r->j = r->k0 = r->rem = 0;
    r->n_in = 0;
    r->buf_start = 0;
}

wgml_status wgml_resampler_push(wgml_resampler *r, const float *in, size_t n, int flush, float *out, size_t cap,
                                size_t *n_out, wgml_error *err) {
    *n_out = 0;
    const size_t want = wgml_resampler_max_output(r, n, flush);
    if (want == SIZE_MAX)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "resample: the stream is too long to count its samples");
    if (want > cap)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "resample: %zu output samples, room for %zu", want, cap);
    if (r->copy) {
        if (n) memcpy(out, in, n * sizeof *in);
        *n_out = n;
        return WGML_OK;
    }
    /* append to the buffer of inputs [buf_start, n_in) */
    const size_t have = (size_t)(r->n_in - r->buf_start);
    if (have + n > r->buf_cap) {
        size_t cap2 = r->buf_cap ? r->buf_cap : 4096;
        while (cap2 < have + n)
            cap2 = cap2 > SIZE_MAX / 2 / sizeof(float) ? have + n : cap2 * 2;
        float *b = cap2 > SIZE_MAX / sizeof(float) ? NULL : wgml_realloc(r->buf, cap2 * sizeof(float));
        if (!b) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "resample: out of memory for %zu samples", have + n);
        r->buf = b;
        r->buf_cap = cap2;
    }
    if (n) memcpy(r->buf + have, in, n * sizeof *in);
    r->n_in += n;
    const uint64_t end = r->j + want;
    run(r, r->buf, (int64_t)r->buf_start, (int64_t)r->buf_start, (int64_t)r->n_in, end, out);
    *n_out = want;
    if (flush) {
        reset(r);
        return WGML_OK;
    }
    /* keep the inputs from the next output's first tap on */
    const int64_t keep = (int64_t)r->k0 - r->K + 1;
    if (keep > (int64_t)r->buf_start) {
        const uint64_t drop = (uint64_t)keep - r->buf_start < r->n_in - r->buf_start ? (uint64_t)keep - r->buf_start
                                                                                     : r->n_in - r->buf_start;
        memmove(r->buf, r->buf + drop, (size_t)(r->n_in - r->buf_start - drop) * sizeof(float));
        r->buf_start += drop;
    }
    return WGML_OK;
}

wgml_status wgml_resample(const float *in, size_t n, int rate_in, int rate_out, float **out, size_t *n_out,
                          wgml_error *err) {
    *out = NULL;
    *n_out = 0;
    if (!rate_ok(rate_in) || !rate_ok(rate_out))
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "resample: rates %d -> %d Hz: each must lie in [1, %d]",
                         rate_in, rate_out, WGML_RESAMPLE_MAX_RATE);
    const size_t m = wgml_resample_length(n, rate_in, rate_out);
    if (!m && n)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                         "resample: %zu samples at %d Hz -> %d Hz: the output is too long to hold", n, rate_in,
                         rate_out);
    if (!m) return WGML_OK;
    float *y = wgml_malloc(m * sizeof(float));
    if (!y) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "resample: out of memory for %zu samples", m);
    if (rate_in == rate_out) {
        memcpy(y, in, n * sizeof *in);
    } else {
        wgml_resampler *r;
        wgml_status st = wgml_resampler_create(rate_in, rate_out, &r, err);
        if (st) {
            wgml_free(y);
            return st;
        }
        run(r, in, 0, 0, (int64_t)n, m, y);
        wgml_resampler_free(r);
    }
    *out = y;
    *n_out = m;
    return WGML_OK;
}
