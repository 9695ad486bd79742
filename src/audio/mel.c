/*
 * mel.c - the Slaney mel filters and Whisper's log-mel spectrogram (mel.h).
 *
 * The FFT: a real transform of N = 400 points as a complex one of N / 2 = 200
 * (even samples in the real part, odd in the imaginary), by Stockham
 * autosort stages (radix 4, 2, 5, 5; any size made of 2, 3, 4 and 5 works),
 * twiddles precomputed per stage, then the usual split into the spectrum of
 * the real signal. In double: the frame's power spectrum comes out within
 * 1e-15 of an exact DFT, so the log-mel is as close to the float64 truth as
 * float32 rounding of the result allows.
 */
#include "audio/mel.h"

#include "core/alloc.h"
#include "core/error.h"
#include "core/threadpool.h"

#include <float.h>
#include <math.h>
#include <string.h>

/* ---- the Slaney mel filters (librosa) ---- */

#define MEL_F_SP       (200.0 / 3)
#define MEL_MIN_LOG_HZ 1000.0
#define MEL_MIN_LOG    (MEL_MIN_LOG_HZ / MEL_F_SP) /* 15 */

static double hz_to_mel(double f) {
    if (f >= MEL_MIN_LOG_HZ) return MEL_MIN_LOG + log(f / MEL_MIN_LOG_HZ) / (log(6.4) / 27.0);
    return f / MEL_F_SP;
}

static double mel_to_hz(double m) {
    if (m >= MEL_MIN_LOG) return MEL_MIN_LOG_HZ * exp(log(6.4) / 27.0 * (m - MEL_MIN_LOG));
    return MEL_F_SP * m;
}

wgml_status wgml_mel_filters_slaney(int n_mels, int sample_rate, int n_fft, float *out) {
    if (n_mels < 1 || sample_rate < 1 || n_fft < 2 || !out || n_mels > 100000 || n_fft > 1 << 24)
        return WGML_ERR_INVALID_ARGUMENT;
    const int n_bins = n_fft / 2 + 1;
    double *mel_f = wgml_malloc((size_t)(n_mels + 2) * sizeof(double));
    if (!mel_f) return WGML_ERR_OUT_OF_MEMORY;
    /* mel_frequencies(n_mels + 2, fmin 0, fmax sr / 2): numpy.linspace over the mel scale */
    const double lo = hz_to_mel(0.0), hi = hz_to_mel(sample_rate / 2.0), step = (hi - lo) / (n_mels + 1);
    for (int i = 0; i < n_mels + 2; i++)
        mel_f[i] = mel_to_hz(i == n_mels + 1 ? hi : lo + i * step);
    const double bin_hz = 1.0 / (n_fft * (1.0 / sample_rate)); /* numpy.fft.rfftfreq */
    for (int m = 0; m < n_mels; m++) {
        const double d0 = mel_f[m + 1] - mel_f[m], d1 = mel_f[m + 2] - mel_f[m + 1];
        const double enorm = 2.0 / (mel_f[m + 2] - mel_f[m]);
        for (int k = 0; k < n_bins; k++) {
            const double f = k * bin_hz;
            const double lower = -(mel_f[m] - f) / d0, upper = (mel_f[m + 2] - f) / d1;
            double w = lower < upper ? lower : upper;
            if (w < 0) w = 0;
            /* librosa stores the triangle in float32, then scales it by enorm (in double) */
            out[(size_t)m * n_bins + k] = (float)((double)(float)w * enorm);
        }
    }
    wgml_free(mel_f);
    return WGML_OK;
}

/* ---- the FFT ---- */

typedef struct cpx {
    double re, im;
} cpx;

#define FFT_MAX_STAGES 16

typedef struct fft_plan {
    int n, n_stages;
    int radix[FFT_MAX_STAGES];
    cpx *tw[FFT_MAX_STAGES]; /* stage's w_n^(p k), p < n / r, k < r (n: the stage's length) */
} fft_plan;

static void fft_plan_free(fft_plan *p) {
    for (int s = 0; s < p->n_stages; s++)
        wgml_free(p->tw[s]);
    memset(p, 0, sizeof *p);
}

/* 0, or -1 when n has a prime factor above 5 (or on out of memory: -2). */
static int fft_plan_init(fft_plan *p, int n) {
    memset(p, 0, sizeof *p);
    p->n = n;
    int rest = n;
    while (rest > 1 && p->n_stages < FFT_MAX_STAGES) {
        int r = rest % 4 == 0 ? 4 : rest % 2 == 0 ? 2 : rest % 3 == 0 ? 3 : rest % 5 == 0 ? 5 : 0;
        if (!r) return -1;
        p->radix[p->n_stages++] = r;
        rest /= r;
    }
    if (rest > 1) return -1;
    int len = n;
    for (int s = 0; s < p->n_stages; s++) {
        const int r = p->radix[s], m = len / r;
        p->tw[s] = wgml_malloc((size_t)len * sizeof(cpx));
        if (!p->tw[s]) {
            fft_plan_free(p);
            return -2;
        }
        for (int q = 0; q < m; q++)
            for (int k = 0; k < r; k++) {
                const double a = -2 * M_PI * (double)(q * k) / len;
                p->tw[s][q * r + k] = (cpx){cos(a), sin(a)};
            }
        len = m;
    }
    return 0;
}

static inline cpx cmul(cpx a, cpx b) { return (cpx){a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re}; }

/* Forward DFT of x[0..n) (X_k = sum x_j e^(-2 pi i j k / n)); y is scratch of n. Returns the buffer holding X. */
static cpx *fft_run(const fft_plan *p, cpx *x, cpx *y) {
    int len = p->n, s = 1;
    for (int st = 0; st < p->n_stages; st++) {
        const int r = p->radix[st], m = len / r;
        const cpx *tw = p->tw[st];
        for (int q = 0; q < m; q++) {
            const cpx *w = tw + q * r;
            for (int u = 0; u < s; u++) {
                const cpx *a = x + u + s * q;
                cpx *b = y + u + s * r * q;
                const size_t sm = (size_t)s * m;
                if (r == 4) {
                    cpx a0 = a[0], a1 = a[sm], a2 = a[2 * sm], a3 = a[3 * sm];
                    cpx t0 = {a0.re + a2.re, a0.im + a2.im}, t1 = {a0.re - a2.re, a0.im - a2.im};
                    cpx t2 = {a1.re + a3.re, a1.im + a3.im}, t3 = {a1.re - a3.re, a1.im - a3.im};
                    /* b1 = t1 - i t3, b3 = t1 + i t3 */
                    b[0] = (cpx){t0.re + t2.re, t0.im + t2.im};
                    b[s] = cmul((cpx){t1.re + t3.im, t1.im - t3.re}, w[1]);
                    b[2 * s] = cmul((cpx){t0.re - t2.re, t0.im - t2.im}, w[2]);
                    b[3 * s] = cmul((cpx){t1.re - t3.im, t1.im + t3.re}, w[3]);
                } else if (r == 2) {
                    cpx a0 = a[0], a1 = a[sm];
                    b[0] = (cpx){a0.re + a1.re, a0.im + a1.im};
                    b[s] = cmul((cpx){a0.re - a1.re, a0.im - a1.im}, w[1]);
                } else if (r == 5) {
                    static const double c1 = 0.30901699437494742410, c2 = -0.80901699437494742410,
                                        s1 = 0.95105651629515357212, s2 = 0.58778525229247312917;
                    cpx a0 = a[0], a1 = a[sm], a2 = a[2 * sm], a3 = a[3 * sm], a4 = a[4 * sm];
                    cpx t1 = {a1.re + a4.re, a1.im + a4.im}, t2 = {a2.re + a3.re, a2.im + a3.im};
                    cpx t3 = {a1.re - a4.re, a1.im - a4.im}, t4 = {a2.re - a3.re, a2.im - a3.im};
                    cpx m1 = {a0.re + c1 * t1.re + c2 * t2.re, a0.im + c1 * t1.im + c2 * t2.im};
                    cpx m2 = {a0.re + c2 * t1.re + c1 * t2.re, a0.im + c2 * t1.im + c1 * t2.im};
                    cpx n1 = {s1 * t3.re + s2 * t4.re, s1 * t3.im + s2 * t4.im};
                    cpx n2 = {s2 * t3.re - s1 * t4.re, s2 * t3.im - s1 * t4.im};
                    b[0] = (cpx){a0.re + t1.re + t2.re, a0.im + t1.im + t2.im};
                    b[s] = cmul((cpx){m1.re + n1.im, m1.im - n1.re}, w[1]); /* m1 - i n1 */
                    b[2 * s] = cmul((cpx){m2.re + n2.im, m2.im - n2.re}, w[2]);
                    b[3 * s] = cmul((cpx){m2.re - n2.im, m2.im + n2.re}, w[3]);
                    b[4 * s] = cmul((cpx){m1.re - n1.im, m1.im + n1.re}, w[4]);
                } else { /* 3 */
                    static const double s3 = 0.86602540378443864676;
                    cpx a0 = a[0], a1 = a[sm], a2 = a[2 * sm];
                    cpx t = {a1.re + a2.re, a1.im + a2.im};
                    cpx mm = {a0.re - 0.5 * t.re, a0.im - 0.5 * t.im};
                    cpx nn = {s3 * (a1.re - a2.re), s3 * (a1.im - a2.im)};
                    b[0] = (cpx){a0.re + t.re, a0.im + t.im};
                    b[s] = cmul((cpx){mm.re + nn.im, mm.im - nn.re}, w[1]);
                    b[2 * s] = cmul((cpx){mm.re - nn.im, mm.im + nn.re}, w[2]);
                }
            }
        }
        cpx *t = x;
        x = y;
        y = t;
        len = m;
        s *= r;
    }
    return x;
}

/* ---- the log-mel ---- */

#define HALF (WGML_MEL_N_FFT / 2) /* 200: the complex FFT's size, and the centre padding */

typedef struct mel_plan {
    fft_plan fft;
    double window[WGML_MEL_N_FFT];
    cpx split[HALF + 1]; /* e^(-2 pi i k / 400) */
    const float *filters;
    int n_mels;
    int *lo, *hi; /* each filter's non-zero bins [lo, hi) */
    /* the signal */
    const float *pcm;
    size_t n, len; /* samples, and with the padding */
    size_t f0;
    float *out;
    size_t ld;
    /* per thread */
    int nth;
    double *scratch; /* per thread: 2 (HALF) cpx + (HALF + 1) power */
    float *max;      /* per thread */
} mel_plan;

static size_t scratch_doubles(void) { return 4 * HALF + HALF + 1 + 7; }

/* The padded, reflected signal's sample at i (-200 <= i < len + 200): numpy's reflect, mirrored about 0
 * and len - 1 (periodic in 2 (len - 1), for signals shorter than the reflection too). */
static inline float sample_at(const mel_plan *P, int64_t i) {
    const int64_t len = (int64_t)P->len, period = 2 * (len - 1);
    if (i < 0 || i >= len) {
        if (period <= 0) {
            i = 0;
        } else {
            i %= period;
            if (i < 0) i += period;
            if (i >= len) i = period - i;
        }
    }
    return (uint64_t)i < (uint64_t)P->n ? P->pcm[i] : 0.0f;
}

static const float LOG_FLOOR_IN = 1e-10f;

static void mel_frames(void *ctx, int64_t lo, int64_t hi, int ith) {
    mel_plan *P = ctx;
    double *sc = P->scratch + (size_t)ith * scratch_doubles();
    cpx *x = (cpx *)(void *)sc, *y = x + HALF;
    double *power = sc + 4 * HALF;
    const float silent = log10f(LOG_FLOOR_IN);
    float mx = P->max[ith];
    for (int64_t f = lo; f < hi; f++) {
        const size_t t = P->f0 + (size_t)f;
        const int64_t start = (int64_t)(t * WGML_MEL_HOP) - HALF;
        int any = 0;
        if (start >= 0 && start + WGML_MEL_N_FFT <= (int64_t)P->n) { /* inside the samples: no reflection */
            const float *s = P->pcm + start;
            for (int j = 0; j < HALF; j++) {
                x[j].re = P->window[2 * j] * s[2 * j];
                x[j].im = P->window[2 * j + 1] * s[2 * j + 1];
                any |= s[2 * j] != 0 || s[2 * j + 1] != 0;
            }
        } else if (start >= (int64_t)P->n && start + WGML_MEL_N_FFT <= (int64_t)P->len) { /* in the padding */
            any = 0;
        } else {
            for (int j = 0; j < HALF; j++) {
                float s0 = sample_at(P, start + 2 * j), s1 = sample_at(P, start + 2 * j + 1);
                x[j].re = P->window[2 * j] * s0;
                x[j].im = P->window[2 * j + 1] * s1;
                any |= s0 != 0 || s1 != 0;
            }
        }
        float *o = P->out + (size_t)f;
        if (!any) { /* all zero: mel 0, log10(1e-10) */
            for (int m = 0; m < P->n_mels; m++)
                o[(size_t)m * P->ld] = silent;
            if (silent > mx) mx = silent;
            continue;
        }
        const cpx *Z = fft_run(&P->fft, x, y);
        /* the real signal's spectrum: X_k = E_k + e^(-2 pi i k / 400) O_k */
        for (int k = 0; k <= HALF; k++) {
            const cpx a = Z[k % HALF], b = Z[(HALF - k) % HALF];
            const double er = 0.5 * (a.re + b.re), ei = 0.5 * (a.im - b.im);   /* (Z_k + conj Z_(N-k)) / 2 */
            const double orr = 0.5 * (a.im + b.im), oi = -0.5 * (a.re - b.re); /* (Z_k - conj Z_(N-k)) / 2i */
            const cpx w = P->split[k];
            const double xr = er + w.re * orr - w.im * oi, xi = ei + w.re * oi + w.im * orr;
            power[k] = xr * xr + xi * xi;
        }
        for (int m = 0; m < P->n_mels; m++) {
            const float *fw = P->filters + (size_t)m * WGML_MEL_N_BINS;
            double acc = 0;
            for (int k = P->lo[m]; k < P->hi[m]; k++)
                acc += (double)fw[k] * power[k];
            float v = (float)acc;
            v = log10f(v > LOG_FLOOR_IN ? v : LOG_FLOOR_IN);
            o[(size_t)m * P->ld] = v;
            if (v > mx) mx = v;
        }
    }
    P->max[ith] = mx;
}

static int add_overflows(size_t a, size_t b) { return a > SIZE_MAX - b; }

size_t wgml_log_mel_frames(size_t n, size_t pad) { return add_overflows(n, pad) ? 0 : (n + pad) / WGML_MEL_HOP; }

size_t wgml_log_mel_content_frames(size_t n) { return n / WGML_MEL_HOP; }

static void mel_plan_free(mel_plan *P) {
    fft_plan_free(&P->fft);
    wgml_free(P->lo);
    wgml_free(P->hi);
    wgml_free(P->scratch);
    wgml_free(P->max);
}

wgml_status wgml_log_mel_raw(const float *pcm, size_t n, size_t pad, const float *filters, int n_mels, size_t f0,
                             size_t f1, struct wgml_threadpool *pool, float *out, size_t ld, float *max,
                             wgml_error *err) {
    if (max) *max = -INFINITY;
    if (n_mels < 1 || n_mels > 4096)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "log-mel: %d mel bands (1 to 4096)", n_mels);
    if (add_overflows(n, pad) || n + pad > (size_t)INT64_MAX / 2)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "log-mel: %zu samples and %zu of padding: too many", n, pad);
    const size_t frames = wgml_log_mel_frames(n, pad);
    if (f0 > f1 || f1 > frames)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "log-mel: frames [%zu, %zu) of %zu", f0, f1, frames);
    if (f0 == f1) return WGML_OK;
    if (!filters || !out || (n && !pcm))
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "log-mel: no %s",
                         !filters ? "filters"
                         : !out   ? "output"
                                  : "samples");
    if (ld < f1 - f0 || (size_t)n_mels > SIZE_MAX / sizeof(float) / ld)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "log-mel: row stride %zu for %zu frames", ld, f1 - f0);

    mel_plan P;
    memset(&P, 0, sizeof P);
    P.filters = filters;
    P.n_mels = n_mels;
    P.pcm = pcm;
    P.n = n;
    P.len = n + pad;
    P.f0 = f0;
    P.out = out;
    P.ld = ld;
    P.nth = pool ? wgml_threadpool_size(pool) : 1;
    wgml_status st = WGML_OK;
    int rc = fft_plan_init(&P.fft, HALF);
    P.lo = wgml_malloc((size_t)n_mels * sizeof(int));
    P.hi = wgml_malloc((size_t)n_mels * sizeof(int));
    P.scratch = wgml_calloc((size_t)P.nth, scratch_doubles() * sizeof(double));
    P.max = wgml_malloc((size_t)P.nth * sizeof(float));
    if (rc || !P.lo || !P.hi || !P.scratch || !P.max) {
        st = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "log-mel: out of memory");
        goto done;
    }
    for (int i = 0; i < WGML_MEL_N_FFT; i++)
        P.window[i] = 0.5 - 0.5 * cos(2 * M_PI * i / WGML_MEL_N_FFT);
    for (int k = 0; k <= HALF; k++)
        P.split[k] = (cpx){cos(-2 * M_PI * k / WGML_MEL_N_FFT), sin(-2 * M_PI * k / WGML_MEL_N_FFT)};
    for (int m = 0; m < n_mels; m++) {
        const float *fw = filters + (size_t)m * WGML_MEL_N_BINS;
        int lo = 0, hi = WGML_MEL_N_BINS;
        while (lo < hi && fw[lo] == 0)
            lo++;
        while (hi > lo && fw[hi - 1] == 0)
            hi--;
        P.lo[m] = lo;
        P.hi[m] = hi;
    }
    for (int i = 0; i < P.nth; i++)
        P.max[i] = -INFINITY;
    if (pool && P.nth > 1)
        wgml_threadpool_run_range(pool, mel_frames, &P, (int64_t)(f1 - f0), 64);
    else
        mel_frames(&P, 0, (int64_t)(f1 - f0), 0);
    if (max) {
        float mx = -INFINITY;
        for (int i = 0; i < P.nth; i++)
            if (P.max[i] > mx) mx = P.max[i];
        *max = mx;
    }
done:
    mel_plan_free(&P);
    return st;
}

void wgml_log_mel_normalize(float *mel, int n_mels, size_t frames, size_t ld, float max) {
    const float floor_v = max - 8.0f;
    for (int m = 0; m < n_mels; m++) {
        float *row = mel + (size_t)m * ld;
        for (size_t t = 0; t < frames; t++) {
            float v = row[t] > floor_v ? row[t] : floor_v;
            row[t] = (v + 4.0f) / 4.0f;
        }
    }
}

wgml_status wgml_log_mel(const float *pcm, size_t n, size_t pad, const float *filters, int n_mels,
                         struct wgml_threadpool *pool, float *out, float *max, wgml_error *err) {
    if (max) *max = -INFINITY;
    const size_t frames = wgml_log_mel_frames(n, pad);
    float raw_max;
    wgml_status st =
        wgml_log_mel_raw(pcm, n, pad, filters, n_mels, 0, frames, pool, out, frames ? frames : 1, &raw_max, err);
    if (st) return st;
    if (!frames) return WGML_OK;
    wgml_log_mel_normalize(out, n_mels, frames, frames, raw_max);
    if (max) *max = (raw_max + 4.0f) / 4.0f;
    return WGML_OK;
}

size_t wgml_log_mel_window(const float *mel, int n_mels, size_t frames, size_t content, size_t seek, float *out) {
    size_t size = 0;
    if (seek < content && seek < frames) {
        size = content - seek;
        if (size > frames - seek) size = frames - seek;
        if (size > WGML_MEL_WINDOW_FRAMES) size = WGML_MEL_WINDOW_FRAMES;
    }
    for (int m = 0; m < n_mels; m++) {
        float *o = out + (size_t)m * WGML_MEL_WINDOW_FRAMES;
        if (size) memcpy(o, mel + (size_t)m * frames + seek, size * sizeof(float));
        memset(o + size, 0, (WGML_MEL_WINDOW_FRAMES - size) * sizeof(float));
    }
    return size;
}
