/*
 * cpu_ops_audio.c - the CPU backend's ops for audio models (ops.h): im2col,
 * col2im, instance_norm, lstm, stft, istft, nsf_source.
 *
 * The reference every GPU backend is compared with: sums and transcendental
 * functions in double (on the fast backend the LSTM's in float, and a long
 * signal's instance_norm sums in float blocks added in double; double on the
 * exact one), work shared over the thread pool where there is enough of it.
 * Signals are [time][channels] activations (ops.h).
 */
#include <math.h>
#include <string.h>

#include "backend/cpu/cpu_internal.h"
#include "core/fp16.h"
#include "core/kit_rng.h"

#define TWO_PI 6.283185307179586476925286766559

/* Rows per chunk handed to a thread, for rows of n elements. */
static int64_t chunk_for(int64_t n) { return n >= 16384 ? 1 : 16384 / (n > 0 ? n : 1); }

/* ---- im2col ---- */

typedef struct {
    const wgml_im2col_args *a;
    const float *x;
    float *out;
    int64_t T, C, Ct;
} im2col_task;

/* The row of x that padded row p reads, or -1 for a zero. */
static int64_t padded_row(int64_t p, int64_t T, int pad_l, int reflect) {
    int64_t r = p - pad_l;
    if (r >= 0 && r < T) return r;
    if (!reflect) return -1;
    return r < 0 ? -r : 2 * (T - 1) - r;
}

static void im2col_rows(void *p, int64_t lo, int64_t hi, int ith) {
    (void)ith;
    const im2col_task *t = p;
    const wgml_im2col_args *a = t->a;
    for (int64_t r = lo; r < hi; r++) {
        float *o = t->out + r * t->Ct * a->kernel + a->c0;
        for (int k = 0; k < a->kernel; k++, o += t->Ct) {
            const int64_t src =
                t->x ? padded_row(r * a->stride + (int64_t)k * a->dilation, t->T, a->pad_l, a->reflect) : -1;
            if (src < 0) /* padding, or zeros without an x */
                memset(o, 0, (size_t)t->C * sizeof(float));
            else
                memcpy(o, t->x + src * t->C, (size_t)t->C * sizeof(float));
        }
    }
}

void cpu_op_im2col(cpu_backend *cb, const wgml_im2col_args *a) {
    if (!cpu_check(cb, "im2col", a->out) || (a->x && !cpu_check(cb, "im2col", a->x))) return;
    im2col_task t = {a, a->x ? cpu_ptr(a->x) : NULL, cpu_ptr(a->out), a->x ? wgml_tensor_nrows(a->x) : 0,
                     a->x ? a->x->ne[0] : a->zero_c, a->out->ne[0] / a->kernel};
    wgml_threadpool_run_range(cb->pool, im2col_rows, &t, wgml_tensor_nrows(a->out), chunk_for(a->out->ne[0]));
}

/* ---- col2im ---- */

typedef struct {
    const wgml_col2im_args *a;
    const float *y, *bias;
    float *out;
    int64_t T_in, C;
} col2im_task;

static void col2im_rows(void *p, int64_t lo, int64_t hi, int ith) {
    (void)ith;
    const col2im_task *t = p;
    const wgml_col2im_args *a = t->a;
    const int64_t C = t->C, KC = (int64_t)a->kernel * C;
    for (int64_t r = lo; r < hi; r++) {
        float *o = t->out + r * C;
        for (int64_t c = 0; c < C; c++) o[c] = t->bias ? t->bias[c] : 0.0f;
        /* taps k with (r + pad - k) a multiple of stride, i = (r + pad - k) / stride in [0, T_in) */
        const int64_t q = r + a->pad;
        for (int64_t k = q % a->stride; k < a->kernel && k <= q; k += a->stride) {
            const int64_t i = (q - k) / a->stride;
            if (i >= t->T_in) continue;
            const float *y = t->y + i * KC + k * C;
            for (int64_t c = 0; c < C; c++) o[c] += y[c];
        }
    }
}

void cpu_op_col2im(cpu_backend *cb, const wgml_col2im_args *a) {
    if (!cpu_check(cb, "col2im", a->out) || !cpu_check(cb, "col2im", a->y) ||
        (a->bias && !cpu_check(cb, "col2im", a->bias)))
        return;
    col2im_task t = {a, cpu_ptr(a->y), a->bias ? cpu_ptr(a->bias) : NULL, cpu_ptr(a->out), wgml_tensor_nrows(a->y),
                     a->out->ne[0]};
    wgml_threadpool_run_range(cb->pool, col2im_rows, &t, wgml_tensor_nrows(a->out), chunk_for(t.C * a->kernel));
}

/* ---- instance_norm ---- */

typedef struct {
    const float *x, *w, *b;
    float *out;
    int64_t T, C;
    double eps;
} inorm_task;

/* Columns [lo, hi): mean and variance in double, over the rows. */
static void inorm_cols(void *p, int64_t lo, int64_t hi, int ith) {
    (void)ith;
    const inorm_task *t = p;
    double mean[64], m2[64];
    for (int64_t c0 = lo; c0 < hi; c0 += 64) {
        const int64_t n = hi - c0 < 64 ? hi - c0 : 64;
        for (int64_t j = 0; j < n; j++) mean[j] = m2[j] = 0;
        for (int64_t r = 0; r < t->T; r++)
            for (int64_t j = 0; j < n; j++) mean[j] += t->x[r * t->C + c0 + j];
        for (int64_t j = 0; j < n; j++) mean[j] /= (double)t->T;
        for (int64_t r = 0; r < t->T; r++)
            for (int64_t j = 0; j < n; j++) {
                double d = t->x[r * t->C + c0 + j] - mean[j];
                m2[j] += d * d;
            }
        for (int64_t j = 0; j < n; j++) m2[j] = 1.0 / sqrt(m2[j] / (double)t->T + t->eps);
        for (int64_t r = 0; r < t->T; r++)
            for (int64_t j = 0; j < n; j++) {
                const int64_t c = c0 + j;
                double v = (t->x[r * t->C + c] - mean[j]) * m2[j];
                if (t->w) v *= t->w[c];
                if (t->b) v += t->b[c];
                t->out[r * t->C + c] = (float)v;
            }
    }
}

/* The fast path: rows in blocks of INORM_ROWS, shared out over the threads
 * (a signal of 128 channels has only two 64-column chunks, and each thread
 * then strode through the whole tensor three times). Pass 1 and 2 sum each
 * block's columns in float (contiguous rows: vectorized) into per-block
 * partials, added in double (pass 1 about row 0's values, pass 2 about the
 * mean); pass 3 writes (x - mean) * scale + shift per
 * column, the mean as float (pass 2 centers on it too). */
#define INORM_ROWS 256

typedef struct {
    const inorm_task *t;
    double *part;        /* [blocks][C] */
    const float *center; /* pass 1: row 0 (so that an offset does not cost the float sums their bits); then the means */
    int squares;         /* pass 2: squares about center */
    const float *scale, *shift;
} inorm_fast;

static void inorm_block_sums(void *p, int64_t lo, int64_t hi, int ith) {
    (void)ith;
    const inorm_fast *f = p;
    const inorm_task *t = f->t;
    const int64_t C = t->C;
    float acc[64];
    for (int64_t bk = lo; bk < hi; bk++) {
        const int64_t r0 = bk * INORM_ROWS, r1 = r0 + INORM_ROWS < t->T ? r0 + INORM_ROWS : t->T;
        for (int64_t c0 = 0; c0 < C; c0 += 64) {
            const int64_t n = C - c0 < 64 ? C - c0 : 64;
            for (int64_t j = 0; j < n; j++) acc[j] = 0;
            for (int64_t r = r0; r < r1; r++) {
                const float *x = t->x + r * C + c0;
                if (f->squares)
                    for (int64_t j = 0; j < n; j++) {
                        const float d = x[j] - f->center[c0 + j];
                        acc[j] += d * d;
                    }
                else
                    for (int64_t j = 0; j < n; j++) acc[j] += x[j] - f->center[c0 + j];
            }
            for (int64_t j = 0; j < n; j++) f->part[bk * C + c0 + j] = acc[j];
        }
    }
}

static void inorm_apply(void *p, int64_t lo, int64_t hi, int ith) {
    (void)ith;
    const inorm_fast *f = p;
    const inorm_task *t = f->t;
    const int64_t C = t->C;
    for (int64_t r = lo; r < hi; r++) {
        const float *x = t->x + r * C;
        float *o = t->out + r * C;
        for (int64_t c = 0; c < C; c++) o[c] = (x[c] - f->center[c]) * f->scale[c] + f->shift[c];
    }
}

void cpu_op_instance_norm(cpu_backend *cb, const wgml_instance_norm_args *a) {
    if (!cpu_check(cb, "instance_norm", a->out) || !cpu_check(cb, "instance_norm", a->x) ||
        (a->w && !cpu_check(cb, "instance_norm", a->w)) || (a->b && !cpu_check(cb, "instance_norm", a->b)))
        return;
    inorm_task t = {cpu_ptr(a->x), a->w ? cpu_ptr(a->w) : NULL, a->b ? cpu_ptr(a->b) : NULL, cpu_ptr(a->out),
                    wgml_tensor_nrows(a->x), a->x->ne[0], a->eps};
    const int64_t blocks = (t.T + INORM_ROWS - 1) / INORM_ROWS, C = t.C;
    if (cb->exact || blocks < 2) {
        /* each column is read T times: chunks of 64 columns, one per thread at a time */
        wgml_threadpool_run_range(cb->pool, inorm_cols, &t, t.C, 64);
        return;
    }
    double *part = cpu_scratch(cb, (size_t)(blocks * C) * sizeof(double) + (size_t)C * 3 * sizeof(float));
    if (!part) return;
    float *center = (float *)(part + blocks * C), *scale = center + C, *shift = scale + C;
    memcpy(center, t.x, (size_t)C * sizeof(float));
    inorm_fast f = {&t, part, center, 0, scale, shift};
    wgml_threadpool_run_range(cb->pool, inorm_block_sums, &f, blocks, 1);
    for (int64_t c = 0; c < C; c++) {
        double s = 0;
        for (int64_t bk = 0; bk < blocks; bk++) s += part[bk * C + c];
        center[c] = (float)(center[c] + s / (double)t.T);
    }
    f.squares = 1;
    wgml_threadpool_run_range(cb->pool, inorm_block_sums, &f, blocks, 1);
    for (int64_t c = 0; c < C; c++) {
        double s = 0;
        for (int64_t bk = 0; bk < blocks; bk++) s += part[bk * C + c];
        /* the variance about the float mean: (its error)^2 too small to matter */
        const double rs = 1.0 / sqrt(s / (double)t.T + t.eps), w = t.w ? t.w[c] : 1, b = t.b ? t.b[c] : 0;
        scale[c] = (float)(rs * w);
        shift[c] = (float)b;
    }
    wgml_threadpool_run_range(cb->pool, inorm_apply, &f, t.T, chunk_for(C));
}

/* ---- lstm ---- */

typedef struct {
    cpu_backend *cb;
    const float *gx, *w; /* w: the recurrent weights as f32 [dirs*4H][H] */
    float *out;
    int64_t T, H, dirs;
    float *state; /* per direction: h (H floats), then z (4H) */
    double *dstate; /* exact: per direction h (H), c (H), z (4H) */
} lstm_task;

static float sigmoidf_(float x) { return 1.0f / (1.0f + expf(-x)); }

/* One direction's whole sequence. */
static void lstm_dir(void *p, int64_t lo, int64_t hi, int ith) {
    (void)ith;
    const lstm_task *t = p;
    const int64_t H = t->H, G = 4 * H;
    for (int64_t d = lo; d < hi; d++) {
        const float *W = t->w + d * G * H;
        if (t->cb->exact) {
            double *h = t->dstate + d * 6 * H, *c = h + H, *z = c + H;
            for (int64_t j = 0; j < 2 * H; j++) h[j] = 0;
            for (int64_t s = 0; s < t->T; s++) {
                const int64_t r = d ? t->T - 1 - s : s;
                const float *g = t->gx + r * t->dirs * G + d * G;
                for (int64_t i = 0; i < G; i++) {
                    double acc = g[i];
                    const float *wr = W + i * H;
                    for (int64_t j = 0; j < H; j++) acc += (double)wr[j] * h[j];
                    z[i] = acc;
                }
                float *o = t->out + r * t->dirs * H + d * H;
                for (int64_t j = 0; j < H; j++) {
                    double ig = 1 / (1 + exp(-z[j])), fg = 1 / (1 + exp(-z[H + j])), gg = tanh(z[2 * H + j]),
                           og = 1 / (1 + exp(-z[3 * H + j]));
                    c[j] = fg * c[j] + ig * gg;
                    h[j] = og * tanh(c[j]);
                    o[j] = (float)h[j];
                }
            }
            continue;
        }
        float *h = t->state + d * 6 * H, *c = h + H, *z = c + H;
        for (int64_t j = 0; j < 2 * H; j++) h[j] = 0;
        for (int64_t s = 0; s < t->T; s++) {
            const int64_t r = d ? t->T - 1 - s : s;
            const float *g = t->gx + r * t->dirs * G + d * G;
            for (int64_t i = 0; i < G; i++) {
                const float *wr = W + i * H;
                float acc[8] = {0};
                int64_t j = 0;
                for (; j + 8 <= H; j += 8)
                    for (int u = 0; u < 8; u++) acc[u] += wr[j + u] * h[j + u];
                for (; j < H; j++) acc[0] += wr[j] * h[j];
                z[i] = g[i] + ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
            }
            float *o = t->out + r * t->dirs * H + d * H;
            for (int64_t j = 0; j < H; j++) {
                c[j] = sigmoidf_(z[H + j]) * c[j] + sigmoidf_(z[j]) * tanhf(z[2 * H + j]);
                h[j] = sigmoidf_(z[3 * H + j]) * tanhf(c[j]);
                o[j] = h[j];
            }
        }
    }
}

void cpu_op_lstm(cpu_backend *cb, const wgml_lstm_args *a) {
    if (!cpu_check(cb, "lstm", a->out) || !cpu_check(cb, "lstm", a->gx) || !cpu_check(cb, "lstm", a->w_hh)) return;
    const int64_t H = a->hidden, dirs = a->bidirectional ? 2 : 1, G = 4 * H;
    const size_t w_elems = (size_t)(dirs * G * H);
    const size_t w_bytes = a->w_hh->type == WGML_F32 ? 0 : w_elems * sizeof(float);
    const size_t st_bytes = (size_t)(dirs * 6 * H) * (cb->exact ? sizeof(double) : sizeof(float));
    uint8_t *scratch = cpu_scratch(cb, w_bytes + st_bytes);
    if (!scratch) return;
    const float *w = cpu_ptr(a->w_hh);
    if (w_bytes) { /* f16: widened once for the whole sequence */
        const uint16_t *src = cpu_ptr(a->w_hh);
        float *dst = (float *)scratch;
        for (size_t i = 0; i < w_elems; i++) dst[i] = wgml_f16_to_f32(src[i]);
        w = dst;
    }
    lstm_task t = {cb, cpu_ptr(a->gx), w, cpu_ptr(a->out), wgml_tensor_nrows(a->gx), H, dirs,
                   (float *)(scratch + w_bytes), (double *)(scratch + w_bytes)};
    wgml_threadpool_run_range(cb->pool, lstm_dir, &t, dirs, 1);
}

/* ---- stft, istft ---- */

void cpu_op_stft(cpu_backend *cb, const wgml_stft_args *a) {
    if (!cpu_check(cb, "stft", a->out) || !cpu_check(cb, "stft", a->x) || !cpu_check(cb, "stft", a->window)) return;
    const int N = a->n_fft, B = N / 2 + 1, half = N / 2;
    const int64_t L = a->x->ne[0], F = wgml_tensor_nrows(a->out);
    double *tab = cpu_scratch(cb, (size_t)(2 * N + N) * sizeof(double));
    if (!tab) return;
    double *cs = tab, *fr = tab + 2 * N;
    for (int n = 0; n < N; n++) {
        cs[2 * n] = cos(TWO_PI * n / N);
        cs[2 * n + 1] = sin(TWO_PI * n / N);
    }
    const float *x = cpu_ptr(a->x), *w = cpu_ptr(a->window);
    float *out = cpu_ptr(a->out);
    for (int64_t f = 0; f < F; f++) {
        for (int n = 0; n < N; n++) {
            int64_t s = f * a->hop - half + n; /* reflect at both ends */
            if (s < 0) s = -s;
            if (s >= L) s = 2 * (L - 1) - s;
            fr[n] = (double)x[s] * w[n];
        }
        float *o = out + f * 2 * B;
        for (int k = 0; k < B; k++) {
            double re = 0, im = 0;
            for (int n = 0; n < N; n++) {
                int idx = (int)(((int64_t)k * n) % N);
                re += fr[n] * cs[2 * idx];
                im -= fr[n] * cs[2 * idx + 1];
            }
            /* canonical phase where the value is real in exact arithmetic: bins 0 and N/2,
             * and the frames centred on the first or the last sample (reflected about it,
             * so even about n = N/2 with the symmetric window) */
            if (k == 0 || k == half || f == 0 || f * a->hop == L - 1) im = 0;
            o[k] = (float)sqrt(re * re + im * im);
            o[B + k] = (float)(im == 0 ? (re >= 0 ? 0.0 : M_PI) : atan2(im, re));
        }
    }
}

typedef struct {
    const wgml_istft_args *a;
    const float *mag, *ph;
    const double *cs; /* cos, sin of 2 pi n / N */
    double *frames;   /* [F][N]: each frame's inverse DFT */
    double *bins;     /* per thread: 2 B doubles, the bins' re and im */
} istft_task;

/* Frames [lo, hi): the real inverse DFT of each, in double (the bins'
 * cos and sin of the phase once per frame). */
static void istft_frames(void *p, int64_t lo, int64_t hi, int ith) {
    const istft_task *t = p;
    const int N = t->a->n_fft, B = N / 2 + 1, half = N / 2;
    double *re = t->bins + (size_t)ith * 2 * (size_t)B, *im = re + B;
    for (int64_t f = lo; f < hi; f++) {
        const float *m = t->mag + f * B, *ph = t->ph + f * B;
        for (int k = 0; k <= half; k++) {
            re[k] = m[k] * cos((double)ph[k]);
            im[k] = m[k] * sin((double)ph[k]);
        }
        double *fr = t->frames + f * N;
        for (int n = 0; n < N; n++) {
            /* bins 0 and N/2 once (their real parts), the others twice */
            double v = re[0] + (n % 2 ? -1.0 : 1.0) * re[half];
            for (int k = 1; k < half; k++) {
                const int idx = (int)(((int64_t)k * n) % N);
                v += 2 * (re[k] * t->cs[2 * idx] - im[k] * t->cs[2 * idx + 1]);
            }
            fr[n] = v / N;
        }
    }
}

void cpu_op_istft(cpu_backend *cb, const wgml_istft_args *a) {
    if (!cpu_check(cb, "istft", a->out) || !cpu_check(cb, "istft", a->mag) || !cpu_check(cb, "istft", a->phase) ||
        !cpu_check(cb, "istft", a->window))
        return;
    const int N = a->n_fft, half = N / 2, B = N / 2 + 1;
    const int64_t F = wgml_tensor_nrows(a->mag), hop = a->hop, Lp = hop * (F - 1) + N; /* padded length */
    double *buf = cpu_scratch(cb, (size_t)(2 * Lp + 2 * N + F * N + 2 * B * cb->n_threads) * sizeof(double));
    if (!buf) return;
    double *acc = buf, *wsum = buf + Lp, *cs = wsum + Lp, *frames = cs + 2 * N, *bins = frames + F * N;
    for (int64_t i = 0; i < 2 * Lp; i++) buf[i] = 0;
    for (int n = 0; n < N; n++) {
        cs[2 * n] = cos(TWO_PI * n / N);
        cs[2 * n + 1] = sin(TWO_PI * n / N);
    }
    const float *w = cpu_ptr(a->window);
    istft_task t = {a, cpu_ptr(a->mag), cpu_ptr(a->phase), cs, frames, bins};
    wgml_threadpool_run_range(cb->pool, istft_frames, &t, F, 256);
    /* overlap-add, in frame order */
    for (int64_t f = 0; f < F; f++)
        for (int n = 0; n < N; n++) {
            acc[f * hop + n] += frames[f * N + n] * w[n];
            wsum[f * hop + n] += (double)w[n] * w[n];
        }
    float *out = cpu_ptr(a->out);
    const int64_t L = a->out->ne[0];
    for (int64_t i = 0; i < L; i++) {
        double ws = wsum[i + half];
        out[i] = (float)(ws > 1e-11 ? acc[i + half] / ws : acc[i + half]);
    }
}

/* ---- nsf_source ---- */

/* frac(f0 m / sr) * 2^63 rounded to nearest, mod 2^63: f0's float value
 * exactly (a long division of its mantissa by sr); 0 for inf and NaN. The
 * WGSL kernel computes the same bits. */
uint64_t cpu_nsf_rate(float f0, int m, int sr) {
    uint32_t bits;
    memcpy(&bits, &f0, sizeof bits);
    const uint32_t ex = (bits >> 23) & 0xff;
    uint64_t man = bits & 0x7fffff;
    if (ex == 0xff) return 0;
    int e = -149;
    if (ex) {
        man |= 0x800000;
        e = (int)ex - 150;
    }
    uint64_t N = man * (uint64_t)m; /* f0 m = N 2^e; below 2^30 */
    int s = e + 63;                  /* the quotient of N 2^s by sr, mod 2^63 */
    if (s < 0) {
        N = s <= -64 ? 0 : N >> -s;
        s = 0;
    }
    uint64_t rem = 0, q = 0;
    const uint64_t d = (uint64_t)sr, mask = (1ull << 63) - 1;
    for (int b = 63; b >= 0; b--) {
        rem = rem * 2 + ((N >> b) & 1);
        q <<= 1;
        if (rem >= d) {
            rem -= d;
            q |= 1;
        }
    }
    for (int i = 0; i < s; i++) {
        rem *= 2;
        q <<= 1;
        if (rem >= d) {
            rem -= d;
            q |= 1;
        }
    }
    if (2 * rem >= d) q++;
    q &= mask;
    return bits >> 31 ? (0 - q) & mask : q;
}

typedef struct {
    const wgml_nsf_source_args *a;
    const float *f0, *w;
    float b;
    float *out;
    const uint64_t *P, *R; /* per frame and harmonic: phase at the centre (2^-64 cycles), rate (2^-63 cycles) */
    int64_t N;
} nsf_task;

static void nsf_samples(void *p, int64_t lo, int64_t hi, int ith) {
    (void)ith;
    const nsf_task *t = p;
    const wgml_nsf_source_args *a = t->a;
    const int H = a->harmonics, upp = a->upp;
    for (int64_t s = lo; s < hi; s++) {
        const int64_t frame = s / upp;
        const int voiced = t->f0[frame] > a->voiced_threshold;
        /* the centre at or before s: j = floor((2s - (upp-1)) / (2 upp)) */
        const int64_t twice = 2 * s - (upp - 1);
        int64_t j = twice < 0 ? -1 : twice / (2 * upp);
        double acc = t->b;
        for (int k = 0; k < H; k++) {
            uint64_t phi;
            if (j < 0)
                phi = t->P[k];
            else if (j >= t->N - 1)
                phi = t->P[(t->N - 1) * H + k];
            else /* P_j + u r_{j+1}, u = 2 (s - upp j) - (upp - 1), in 2^-64 cycles */
                phi = t->P[j * H + k] + (uint64_t)(2 * (s - upp * j) - (upp - 1)) * t->R[(j + 1) * H + k];
            const double n = wgml_kit_normal(a->seed, wgml_kit_sine_noise_at((uint64_t)s * H + k));
            double e;
            if (voiced)
                e = a->amp * sin(TWO_PI * ((double)phi * 0x1p-64)) + a->noise_std * n;
            else
                e = a->amp / 3.0 * n;
            acc += t->w[k] * e;
        }
        t->out[s] = (float)tanh(acc);
    }
}

void cpu_op_nsf_source(cpu_backend *cb, const wgml_nsf_source_args *a) {
    if (!cpu_check(cb, "nsf_source", a->out) || !cpu_check(cb, "nsf_source", a->f0) ||
        !cpu_check(cb, "nsf_source", a->w) || !cpu_check(cb, "nsf_source", a->b))
        return;
    const int64_t N = a->f0->ne[0];
    const int H = a->harmonics;
    uint64_t *tab = cpu_scratch(cb, (size_t)(2 * N * H) * sizeof(uint64_t));
    if (!tab) return;
    uint64_t *P = tab, *R = tab + N * H;
    const float *f0 = cpu_ptr(a->f0);
    for (int k = 0; k < H; k++) {
        uint64_t sum = 0;
        for (int64_t j = 0; j < N; j++) {
            R[j * H + k] = cpu_nsf_rate(f0[j], k + 1, a->sample_rate);
            sum += 2 * (uint64_t)a->upp * R[j * H + k]; /* upp r_j, wrapping: only the fraction counts */
            P[j * H + k] = sum;
        }
    }
    nsf_task t = {a, f0, cpu_ptr(a->w), *(const float *)cpu_ptr(a->b), cpu_ptr(a->out), P, R, N};
    wgml_threadpool_run_range(cb->pool, nsf_samples, &t, a->out->ne[0], 1024);
}
