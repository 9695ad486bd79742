/*
 * opcheck_audio.c - the grids of the audio models' ops: im2col, col2im,
 * instance_norm, lstm, stft, istft, nsf_source, on signals [time][channels]
 * (ops.h). See opcheck.c.
 */
#include "backend/opcheck_impl.h"

#include <math.h>
#include <stdio.h>

#include "core/alloc.h"
#include "core/dtype.h"
#include "core/error.h"

/* ---- audio ops: signals [time][channels] (ops.h) ---- */

/* A case: the op's tensors (slot 0 its output), its parameters, the tolerance. */
typedef struct {
    wgml_op op;
    twin t[5];
    int used[5];
    union {
        wgml_im2col_args im;
        wgml_col2im_args ci;
        wgml_instance_norm_args in;
        wgml_lstm_args ls;
        wgml_stft_args st;
        wgml_istft_args is;
        wgml_nsf_source_args ns;
    } a;
    int in_place; /* the output is slot 1 itself */
} au_case;

static void au_side(wgml_backend *be, int s, void *arg) {
    au_case *k = arg;
    const wgml_tensor *T[5];
    for (int i = 0; i < 5; i++) T[i] = k->used[i] ? &k->t[i].t[s] : NULL;
    if (k->in_place) T[0] = T[1];
    switch (k->op) {
    case WGML_OP_IM2COL: {
        wgml_im2col_args a = k->a.im;
        a.out = T[0], a.x = T[1];
        wgml_op_im2col(be, &a);
        break;
    }
    case WGML_OP_COL2IM: {
        wgml_col2im_args a = k->a.ci;
        a.out = T[0], a.y = T[1], a.bias = T[2];
        wgml_op_col2im(be, &a);
        break;
    }
    case WGML_OP_INSTANCE_NORM: {
        wgml_instance_norm_args a = k->a.in;
        a.out = T[0], a.x = T[1], a.w = T[2], a.b = T[3];
        wgml_op_instance_norm(be, &a);
        break;
    }
    case WGML_OP_LSTM: {
        wgml_lstm_args a = k->a.ls;
        a.out = T[0], a.gx = T[1], a.w_hh = T[2];
        wgml_op_lstm(be, &a);
        break;
    }
    case WGML_OP_STFT: {
        wgml_stft_args a = k->a.st;
        a.out = T[0], a.x = T[1], a.window = T[2];
        wgml_op_stft(be, &a);
        break;
    }
    case WGML_OP_ISTFT: {
        wgml_istft_args a = k->a.is;
        a.out = T[0], a.mag = T[1], a.phase = T[2], a.window = T[3];
        wgml_op_istft(be, &a);
        break;
    }
    case WGML_OP_NSF_SOURCE: {
        wgml_nsf_source_args a = k->a.ns;
        a.out = T[0], a.f0 = T[1], a.w = T[2], a.b = T[3];
        wgml_op_nsf_source(be, &a);
        break;
    }
    default: break;
    }
}

/* Slot i as an activation [rows][n] holding v (random in [-scale, scale) when v is NULL; owned copy freed here). */
static wgml_status au_act(ctx *c, au_case *k, int i, int64_t n, int64_t rows, const float *v, float scale,
                          wgml_error *err) {
    float *r = v ? NULL : oc_randv(c, (size_t)(n * rows), scale);
    if (!v && !r) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory");
    wgml_status st = oc_twin_act(c, &k->t[i], WGML_F32, n, rows, v ? v : r, err);
    wgml_free(r);
    k->used[i] = 1;
    return st;
}

static wgml_status au_weight(ctx *c, au_case *k, int i, uint32_t type, int64_t n, int64_t rows, float scale,
                             wgml_error *err) {
    k->used[i] = 1;
    return oc_twin_weight(c, &k->t[i], type, n, rows, scale, err);
}

/* Runs the case built so far (st: the building's status) and compares slot 0 (or 1 in place). */
static void au_finish(ctx *c, au_case *k, const char *cfg, wgml_status st, wgml_error *err, double tol) {
    const char *op = wgml_op_names[k->op];
    if (!st) st = oc_run_both(c, 0, 1, au_side, k, err);
    if (st) oc_report(c, op, cfg, INFINITY, 0, st, err->message);
    else oc_finish(c, op, cfg, k->in_place ? &k->t[1] : &k->t[0], tol);
    for (int i = 0; i < 5; i++) oc_twin_free(c, &k->t[i]);
}

static void im2col_case(ctx *c, int64_t T, int64_t C, int K, int stride, int dil, int pl, int pr, int reflect,
                        int64_t Ct, int c0) {
    au_case k = {.op = WGML_OP_IM2COL,
                 .a.im = {.kernel = K, .stride = stride, .dilation = dil, .pad_l = pl, .pad_r = pr,
                          .reflect = reflect, .c0 = c0}};
    const int64_t T_out = (T + pl + pr - (int64_t)dil * (K - 1) - 1) / stride + 1;
    char cfg[160];
    snprintf(cfg, sizeof cfg, "T=%lld C=%lld k=%d stride=%d dilation=%d pad=%d,%d%s channels %d..%lld of %lld",
             (long long)T, (long long)C, K, stride, dil, pl, pr, reflect ? " reflect" : "", c0, (long long)(c0 + C),
             (long long)Ct);
    wgml_error err;
    /* out starts random on both sides: the other channel slots must stay as they are */
    wgml_status st = au_act(c, &k, 0, K * Ct, T_out, NULL, 1, &err);
    if (!st) st = au_act(c, &k, 1, C, T, NULL, 1, &err);
    au_finish(c, &k, cfg, st, &err, 0); /* a copy: exact */
}

/* Zeros (no x) into channels [c0, c0 + n) of each of K taps of Ct, over T rows. */
static void im2col_zero_case(ctx *c, int64_t T, int K, int64_t Ct, int c0, int n) {
    au_case k = {.op = WGML_OP_IM2COL, .a.im = {.kernel = K, .c0 = c0, .zero_c = n}};
    char cfg[160];
    snprintf(cfg, sizeof cfg, "zeros: T=%lld k=%d channels %d..%d of %lld", (long long)T, K, c0, c0 + n,
             (long long)Ct);
    wgml_error err;
    /* out starts random on both sides (a scratch buffer's old values): only the zeros' slots change */
    wgml_status st = au_act(c, &k, 0, K * Ct, T, NULL, 1, &err);
    au_finish(c, &k, cfg, st, &err, 0);
}

void oc_check_im2col(ctx *c) {
    im2col_case(c, 37, 5, 3, 1, 1, 1, 1, 0, 5, 0);    /* a k3 p1 convolution */
    im2col_case(c, 50, 22, 12, 6, 1, 3, 3, 0, 22, 0); /* a strided one (Kokoro's noise_convs.0) */
    im2col_case(c, 20, 4, 3, 3, 5, 5, 5, 0, 4, 0);    /* stride and dilation */
    im2col_case(c, 40, 7, 11, 1, 5, 25, 25, 0, 7, 0); /* padding beyond the signal's length on each side */
    im2col_case(c, 30, 1, 20, 5, 1, 10, 10, 1, 1, 0); /* reflection, as an STFT's frames */
    im2col_case(c, 9, 6, 1, 1, 1, 1, 0, 1, 6, 0);     /* ReflectionPad1d((1, 0)) */
    im2col_case(c, 17, 3, 1, 1, 1, 0, 0, 0, 8, 4);    /* a concatenation's part: channels 4..7 of 8 */
    im2col_case(c, 17, 3, 3, 2, 1, 1, 1, 0, 9, 2);    /* the same, unfolded */
    im2col_case(c, 70000, 2, 1, 1, 1, 0, 0, 0, 2, 0); /* rows beyond one grid dimension */
    im2col_case(c, 3000, 100, 8, 1, 1, 4, 3, 1, 100, 0); /* 2.4M outputs: two rows of the flat grid */
    im2col_zero_case(c, 17, 3, 32, 22, 10);   /* a tap padded to a block: channels 22..31 of 32 */
    im2col_zero_case(c, 40, 12, 24, 22, 2);   /* many taps (Kokoro's noise_convs.0 in Q8_0) */
    im2col_zero_case(c, 9, 1, 40, 3, 5);      /* a slot in the middle, the rest kept */
    im2col_zero_case(c, 70000, 1, 64, 34, 30); /* 2.1M zeros, rows beyond one grid dimension */
}

static void col2im_case(ctx *c, int64_t T_in, int64_t C, int K, int stride, int pad, int64_t T_out, int bias) {
    au_case k = {.op = WGML_OP_COL2IM, .a.ci = {.kernel = K, .stride = stride, .pad = pad}};
    char cfg[160];
    snprintf(cfg, sizeof cfg, "T_in=%lld C=%lld k=%d stride=%d pad=%d T_out=%lld bias %s", (long long)T_in,
             (long long)C, K, stride, pad, (long long)T_out, oc_in_names[bias]);
    wgml_error err;
    float *nan = wgml_malloc((size_t)(C * T_out) * 4 + 4);
    for (int64_t i = 0; nan && i < C * T_out; i++) nan[i] = NAN; /* every element must be written */
    wgml_status st = nan ? au_act(c, &k, 0, C, T_out, nan, 0, &err) : wgml_fail(&err, WGML_ERR_OUT_OF_MEMORY, "oom");
    if (!st) st = au_act(c, &k, 1, K * C, T_in, NULL, 1, &err);
    if (!st && bias == IN_WEIGHT) st = au_weight(c, &k, 2, WGML_F32, C, 1, 1, &err);
    if (!st && bias == IN_ACT) st = au_act(c, &k, 2, C, 1, NULL, 1, &err);
    wgml_free(nan);
    au_finish(c, &k, cfg, st, &err, 1e-6);
}

void oc_check_col2im(ctx *c) {
    col2im_case(c, 10, 6, 20, 10, 5, 100, IN_WEIGHT); /* Kokoro's ups.0: ConvTranspose1d k20 s10 p5 */
    col2im_case(c, 33, 5, 12, 6, 3, 198, IN_ACT);     /* ups.1: k12 s6 p3 */
    col2im_case(c, 25, 8, 3, 2, 1, 50, IN_NONE);      /* the depthwise pool: k3 s2 p1, output_padding 1 */
    col2im_case(c, 7, 3, 5, 1, 2, 7, IN_WEIGHT);      /* stride 1 */
    col2im_case(c, 4, 3, 3, 5, 0, 20, IN_NONE);       /* stride beyond the kernel: gaps of bias only */
    col2im_case(c, 3, 2, 4, 2, 0, 11, IN_ACT);        /* output_padding 3: rows no tap reaches */
    col2im_case(c, 500, 600, 20, 10, 5, 5000, IN_WEIGHT); /* 3M outputs: two rows of the flat grid */
}

static void inorm_case(ctx *c, int64_t T, int64_t C, int w, int b, int in_place, float offset) {
    au_case k = {.op = WGML_OP_INSTANCE_NORM, .a.in = {.eps = 1e-5f}, .in_place = in_place};
    char cfg[160];
    snprintf(cfg, sizeof cfg, "T=%lld C=%lld w %s b %s%s%s", (long long)T, (long long)C, oc_in_names[w],
             oc_in_names[b], in_place ? " in place" : "", offset != 0 ? " far from 0" : "");
    wgml_error err;
    float *x = oc_randv(c, (size_t)(T * C), 3);
    for (int64_t i = 0; x && i < T * C; i++) x[i] += offset;
    wgml_status st = x ? WGML_OK : wgml_fail(&err, WGML_ERR_OUT_OF_MEMORY, "out of memory");
    if (!st && !in_place) st = au_act(c, &k, 0, C, T, NULL, 1, &err);
    if (!st) st = au_act(c, &k, 1, C, T, x, 0, &err);
    for (int i = 0; i < 2; i++) {
        int where = i ? b : w;
        if (!st && where == IN_WEIGHT) st = au_weight(c, &k, 2 + i, WGML_F32, C, 1, 1, &err);
        if (!st && where == IN_ACT) st = au_act(c, &k, 2 + i, C, 1, NULL, 1, &err);
    }
    wgml_free(x);
    au_finish(c, &k, cfg, st, &err, 2e-5);
}

void oc_check_instance_norm(ctx *c) {
    inorm_case(c, 37, 5, IN_WEIGHT, IN_WEIGHT, 0, 0);
    inorm_case(c, 37, 5, IN_ACT, IN_ACT, 0, 0);
    inorm_case(c, 300, 70, IN_NONE, IN_NONE, 0, 0);
    inorm_case(c, 1000, 3, IN_ACT, IN_NONE, 1, 0);
    inorm_case(c, 1, 9, IN_ACT, IN_ACT, 0, 0);         /* one row: zero variance, out = b */
    inorm_case(c, 500, 40, IN_ACT, IN_WEIGHT, 0, 100); /* far from 0: the variance must not cancel */
    inorm_case(c, 5000, 2, IN_NONE, IN_ACT, 0, 0);     /* long columns */
    inorm_case(c, 3, 4099, IN_WEIGHT, IN_ACT, 1, 0);   /* wide, in place */
    inorm_case(c, 2, 1100000, IN_ACT, IN_NONE, 0, 0);  /* column groups beyond one grid dimension */
}

static void lstm_case(ctx *c, int64_t T, int64_t H, int bidir, uint32_t w_type, int w_act) {
    const int64_t dirs = bidir ? 2 : 1;
    au_case k = {.op = WGML_OP_LSTM, .a.ls = {.hidden = (int)H, .bidirectional = bidir}};
    char cfg[160];
    snprintf(cfg, sizeof cfg, "T=%lld H=%lld %s w_hh %s %s", (long long)T, (long long)H,
             bidir ? "bidirectional" : "forward", wgml_dtype_name(w_type), w_act ? "activation" : "weight");
    wgml_error err;
    wgml_status st = au_act(c, &k, 0, dirs * H, T, NULL, 1, &err);
    if (!st) st = au_act(c, &k, 1, dirs * 4 * H, T, NULL, 2, &err);
    /* recurrent weights of about 1/sqrt(H): the state neither dies out nor saturates */
    const float ws = 2.0f / sqrtf((float)H);
    if (!st && w_act) st = au_act(c, &k, 2, H, dirs * 4 * H, NULL, ws, &err);
    if (!st && !w_act) st = au_weight(c, &k, 2, w_type, H, dirs * 4 * H, ws, &err);
    au_finish(c, &k, cfg, st, &err, 2e-5);
}

void oc_check_lstm(ctx *c) {
    lstm_case(c, 7, 8, 1, WGML_F32, 0);
    lstm_case(c, 40, 32, 1, WGML_F16, 0);
    lstm_case(c, 13, 16, 0, WGML_F32, 0);
    lstm_case(c, 30, 64, 1, WGML_F32, 1);
    lstm_case(c, 60, 256, 1, WGML_F16, 0); /* Kokoro's width */
    lstm_case(c, 3, 5, 1, WGML_F32, 0);    /* a hidden size no multiple of anything */
    lstm_case(c, 5, 33, 1, WGML_F16, 0);   /* odd, f16: rows starting at odd elements */
    lstm_case(c, 4, 512, 1, WGML_F16, 0);
    lstm_case(c, 2, 1100, 0, WGML_F16, 0); /* above 1024: h in all 16 KiB of workgroup memory */
}

/* A periodic Hann window of n values. */
static float *hann(int n) {
    float *w = wgml_malloc((size_t)n * 4 + 4);
    for (int i = 0; w && i < n; i++) w[i] = (float)(0.5 - 0.5 * cos(2 * M_PI * i / n));
    return w;
}

static void stft_case(ctx *c, int64_t L, int n_fft, int hop) {
    au_case k = {.op = WGML_OP_STFT, .a.st = {.n_fft = n_fft, .hop = hop}};
    char cfg[160];
    snprintf(cfg, sizeof cfg, "L=%lld n_fft=%d hop=%d", (long long)L, n_fft, hop);
    const int64_t F = L / hop + 1;
    wgml_error err;
    float *w = hann(n_fft);
    wgml_status st = w ? au_act(c, &k, 0, 2 * (n_fft / 2 + 1), F, NULL, 1, &err)
                       : wgml_fail(&err, WGML_ERR_OUT_OF_MEMORY, "out of memory");
    if (!st) st = au_act(c, &k, 1, L, 1, NULL, 1, &err);
    if (!st) st = au_act(c, &k, 2, n_fft, 1, w, 0, &err);
    wgml_free(w);
    au_finish(c, &k, cfg, st, &err, 2e-5);
}

void oc_check_stft(ctx *c) {
    stft_case(c, 100, 20, 5); /* Kokoro's: n_fft 20, hop 5 */
    stft_case(c, 1003, 20, 5);
    stft_case(c, 64, 16, 4);
    stft_case(c, 11, 20, 3); /* just long enough to reflect */
    stft_case(c, 30000, 20, 5);
    stft_case(c, 4000, 400, 160); /* Whisper's */
    stft_case(c, 52, 6, 2);       /* n_fft no multiple of 4 */
    stft_case(c, 101, 20, 5);     /* the last frame centred on the last sample: real, phase 0 or pi */
    stft_case(c, 49, 16, 4);
}

static void istft_case(ctx *c, int64_t F, int n_fft, int hop) {
    au_case k = {.op = WGML_OP_ISTFT, .a.is = {.n_fft = n_fft, .hop = hop}};
    char cfg[160];
    snprintf(cfg, sizeof cfg, "F=%lld n_fft=%d hop=%d", (long long)F, n_fft, hop);
    const int64_t B = n_fft / 2 + 1;
    wgml_error err;
    float *w = hann(n_fft), *mag = oc_randv(c, (size_t)(F * B), 1), *ph = oc_randv(c, (size_t)(F * B), (float)M_PI);
    for (int64_t i = 0; mag && i < F * B; i++) mag[i] = expf(2 * mag[i]); /* as exp(conv_post) */
    wgml_status st = w && mag && ph ? au_act(c, &k, 0, hop * (F - 1), 1, NULL, 1, &err)
                                    : wgml_fail(&err, WGML_ERR_OUT_OF_MEMORY, "out of memory");
    if (!st) st = au_act(c, &k, 1, B, F, mag, 0, &err);
    if (!st) st = au_act(c, &k, 2, B, F, ph, 0, &err);
    if (!st) st = au_act(c, &k, 3, n_fft, 1, w, 0, &err);
    wgml_free(w), wgml_free(mag), wgml_free(ph);
    au_finish(c, &k, cfg, st, &err, 2e-5);
}

void oc_check_istft(ctx *c) {
    istft_case(c, 21, 20, 5);
    istft_case(c, 2, 20, 5);
    istft_case(c, 50, 16, 4);
    istft_case(c, 6001, 20, 5);
    istft_case(c, 30, 400, 160);
    istft_case(c, 40, 6, 1);
}

static void nsf_case(ctx *c, int64_t N, int upp, int H, float f0_lo, float f0_hi, uint64_t seed) {
    au_case k = {.op = WGML_OP_NSF_SOURCE,
                 .a.ns = {.harmonics = H, .upp = upp, .sample_rate = 24000, .amp = 0.1f, .noise_std = 0.003f,
                          .voiced_threshold = 10, .seed = seed}};
    char cfg[160];
    snprintf(cfg, sizeof cfg, "frames=%lld upp=%d harmonics=%d f0 %g..%g Hz seed %llu", (long long)N, upp, H,
             (double)f0_lo, (double)f0_hi, (unsigned long long)seed);
    wgml_error err;
    float *f0 = oc_randv(c, (size_t)N, 1);
    for (int64_t i = 0; f0 && i < N; i++) f0[i] = f0_lo + (f0[i] + 1) * 0.5f * (f0_hi - f0_lo);
    wgml_status st = f0 ? au_act(c, &k, 0, N * upp, 1, NULL, 1, &err)
                        : wgml_fail(&err, WGML_ERR_OUT_OF_MEMORY, "out of memory");
    if (!st) st = au_act(c, &k, 1, N, 1, f0, 0, &err);
    if (!st) st = au_weight(c, &k, 2, WGML_F32, H, 1, 0.5f, &err);
    if (!st) st = au_act(c, &k, 3, 1, 1, NULL, 0.1f, &err);
    wgml_free(f0);
    au_finish(c, &k, cfg, st, &err, 2e-5);
}

void oc_check_nsf_source(ctx *c) {
    nsf_case(c, 20, 300, 9, -300, 500, 1);   /* Kokoro's: voiced and unvoiced frames */
    nsf_case(c, 1, 300, 9, 100, 100, 2);     /* one frame */
    nsf_case(c, 700, 300, 9, 50, 450, 3);    /* 210000 samples: the phase over a long utterance */
    nsf_case(c, 33, 7, 3, 1000, 5000, 4);    /* other shapes, high pitch */
    nsf_case(c, 16, 300, 9, 0, 20, 5);       /* around the voicing threshold */
    nsf_case(c, 40, 1, 64, -30000, 30000, 0xfedcba9876543210ull); /* upp 1, 64 harmonics, beyond Nyquist */
    nsf_case(c, 5, 4099, 2, 100, 200, 6);    /* long frames */
}
