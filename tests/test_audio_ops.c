/*
 * test_audio_ops.c - the CPU backend's audio ops (ops.h: im2col, col2im,
 * instance_norm, lstm, stft, istft, nsf_source) against the math written out
 * here in double: a convolution and a transposed convolution from their
 * definitions (PyTorch's Conv1d / ConvTranspose1d, weights in PyTorch's
 * layout), an LSTM step by step, a DFT, the STFT round trip, the NSF source's
 * phase as the official code computes it in float64; then the op grids
 * (opcheck) with the fast CPU backend against the exact one, and argument
 * errors.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/opcheck.h"
#include "core/kit_rng.h"
#include "testutil.h"

static wgml_backend *be;
static tu_rng rng = {777};

static int setup(void **state) {
    (void)state;
    wgml_error err;
    return wgml_backend_cpu_create(2, &be, &err) == WGML_OK ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    be->free(be);
    return 0;
}

typedef struct {
    wgml_tensor t;
    wgml_buffer *b;
} tbuf;

static tbuf make(int64_t ne0, int64_t ne1, const float *data) {
    tbuf r;
    size_t size = (size_t)(ne0 * ne1) * 4;
    wgml_error err;
    assert_int_equal(be->buffer_create(be, size, WGML_BUFFER_ACTIVATIONS, &r.b, &err), WGML_OK);
    float *z = data ? NULL : calloc((size_t)(ne0 * ne1) + 1, 4);
    assert_int_equal(be->buffer_write(be, r.b, 0, data ? data : z, size, &err), WGML_OK);
    free(z);
    r.t = (wgml_tensor){.type = WGML_F32, .ne = {ne0, ne1, 1, 1}, .buf = r.b, .name = "t"};
    return r;
}

static void drop(tbuf *t) { be->buffer_free(be, t->b); }

static float *get(const tbuf *t) {
    float *v = malloc(wgml_tensor_nbytes(&t->t));
    wgml_error err;
    assert_int_equal(be->buffer_read(be, t->b, 0, v, wgml_tensor_nbytes(&t->t), &err), WGML_OK);
    return v;
}

static float *randv(size_t n, float scale) {
    float *v = malloc(n * sizeof *v + 4);
    for (size_t i = 0; i < n; i++) v[i] = tu_normal(&rng) * scale;
    return v;
}

static void step(void) { be->begin(be, &(wgml_step){0, 1}); }

static void end_ok(void) {
    wgml_error err;
    wgml_status st = be->end(be, &err);
    if (st) fprintf(stderr, "step failed: %s\n", err.message);
    assert_int_equal(st, WGML_OK);
}

static double rel_err(const float *a, const double *b, size_t n) {
    double mx = 0, e = 0;
    for (size_t i = 0; i < n; i++) mx = fmax(mx, fabs(b[i]));
    for (size_t i = 0; i < n; i++) e = fmax(e, fabs(a[i] - b[i]));
    return e / (1 + mx);
}

/* Conv1d(Ci, Co, K, stride, padding, dilation) of x [T][Ci] with PyTorch's
 * weight [Co][Ci][K]: im2col, then a matmul with the weight laid out
 * [Co][K][Ct], against the definition. Ct > Ci: each tap padded with zero
 * columns (a quantized Kokoro's), the unfolded signal's extra channels
 * zeroed by im2col without an x over a buffer of NaN (a scratch's old values). */
static void conv_case(int64_t T, int64_t Ci, int64_t Co, int K, int stride, int pad, int dil, int64_t Ct) {
    const int64_t T_out = (T + 2 * pad - dil * (K - 1) - 1) / stride + 1;
    float *x = randv((size_t)(T * Ci), 1), *w = randv((size_t)(Co * Ci * K), 0.3f), *bias = randv((size_t)Co, 1);
    float *wl = calloc((size_t)(Co * Ct * K), 4), *nan = malloc((size_t)(T_out * K * Ct) * 4);
    for (int64_t o = 0; o < Co; o++)
        for (int64_t i = 0; i < Ci; i++)
            for (int k = 0; k < K; k++) wl[(o * K + k) * Ct + i] = w[(o * Ci + i) * K + k];
    for (int64_t i = 0; i < T_out * K * Ct; i++) nan[i] = NAN;
    tbuf tx = make(Ci, T, x), tcol = make(K * Ct, T_out, nan), tw = make(K * Ct, Co, wl), tb = make(Co, 1, bias),
         ty = make(Co, T_out, NULL);
    step();
    wgml_op_im2col(be, &(wgml_im2col_args){.out = &tcol.t, .x = &tx.t, .kernel = K, .stride = stride, .dilation = dil,
                                           .pad_l = pad, .pad_r = pad});
    if (Ct > Ci)
        wgml_op_im2col(be, &(wgml_im2col_args){.out = &tcol.t, .kernel = K, .c0 = (int)Ci, .zero_c = (int)(Ct - Ci)});
    wgml_op_matmul(be, &(wgml_matmul_args){.x = &tcol.t, .n_w = 1, .w = {&tw.t}, .bias = {&tb.t}, .out = {&ty.t}});
    end_ok();
    double *ref = calloc((size_t)(T_out * Co), sizeof *ref);
    for (int64_t t = 0; t < T_out; t++)
        for (int64_t o = 0; o < Co; o++) {
            double acc = bias[o];
            for (int64_t i = 0; i < Ci; i++)
                for (int k = 0; k < K; k++) {
                    int64_t s = t * stride - pad + (int64_t)k * dil;
                    if (s >= 0 && s < T) acc += (double)w[(o * Ci + i) * K + k] * x[s * Ci + i];
                }
            ref[t * Co + o] = acc;
        }
    float *y = get(&ty);
    double e = rel_err(y, ref, (size_t)(T_out * Co));
    if (e > 1e-5) fprintf(stderr, "conv T=%lld Ci=%lld K=%d stride %d: err %g\n", (long long)T, (long long)Ci, K, stride, e);
    assert_true(e <= 1e-5);
    free(x), free(w), free(wl), free(nan), free(bias), free(ref), free(y);
    drop(&tx), drop(&tcol), drop(&tw), drop(&tb), drop(&ty);
}

static void test_conv1d(void **state) {
    (void)state;
    conv_case(37, 5, 7, 3, 1, 1, 1, 5);
    conv_case(50, 22, 12, 12, 6, 3, 1, 22); /* Kokoro's noise_convs.0 shape (narrower) */
    conv_case(40, 6, 4, 7, 1, 9, 3, 6);     /* dilation 3, padding d(k-1)/2 */
    conv_case(16, 3, 2, 1, 1, 0, 1, 3);
    conv_case(30, 66, 9, 3, 1, 1, 1, 96);   /* taps padded to 32 columns (kokoro-tiny's decoder.encode.conv1) */
    conv_case(50, 22, 12, 12, 6, 3, 1, 24); /* noise_convs.0 padded: 12 taps of 24, whole blocks of 32 */
    conv_case(20, 34, 5, 1, 1, 0, 1, 64);   /* a 1x1 convolution (a shortcut's) padded */
}

/* ConvTranspose1d(Ci, Co, K, stride, padding, output_padding) with PyTorch's
 * weight [Ci][Co][K]: a matmul with the weight laid out [K][Co][Ci], then
 * col2im, against the definition. Depthwise (groups = Ci = Co): copy of x
 * repeated K times, mul by the weight as one row [K][C], col2im. */
static void convt_case(int64_t T, int64_t Ci, int64_t Co, int K, int stride, int pad, int opad, int depthwise) {
    const int64_t T_out = (T - 1) * stride - 2 * pad + K + opad;
    const int64_t wn = depthwise ? Ci * K : Ci * Co * K;
    float *x = randv((size_t)(T * Ci), 1), *w = randv((size_t)wn, 0.3f), *bias = randv((size_t)Co, 1);
    float *wl = malloc((size_t)wn * 4);
    if (depthwise)
        for (int64_t c = 0; c < Ci; c++)
            for (int k = 0; k < K; k++) wl[k * Ci + c] = w[c * K + k];
    else
        for (int64_t i = 0; i < Ci; i++)
            for (int64_t o = 0; o < Co; o++)
                for (int k = 0; k < K; k++) wl[(k * Co + o) * Ci + i] = w[(i * Co + o) * K + k];
    tbuf tx = make(Ci, T, x), ty = make(K * Co, T, NULL), tb = make(Co, 1, bias), tout = make(Co, T_out, NULL);
    tbuf tw = depthwise ? make(K * Ci, 1, wl) : make(Ci, K * Co, wl);
    step();
    if (depthwise) {
        int64_t ne[4] = {Ci, K, T, 1};
        size_t nb[4] = {4, 0, (size_t)Ci * 4, (size_t)(Ci * T) * 4};
        wgml_tensor rep = wgml_tensor_view(&tx.t, ne, nb, 0);
        wgml_tensor y2 = ty.t;
        y2.ne[0] = Ci, y2.ne[1] = K * T;
        wgml_op_copy(be, &(wgml_copy_args){.out = &y2, .x = &rep});
        wgml_op_mul(be, &(wgml_mul_args){.out = &ty.t, .a = &ty.t, .b = &tw.t});
    } else {
        wgml_op_matmul(be, &(wgml_matmul_args){.x = &tx.t, .n_w = 1, .w = {&tw.t}, .out = {&ty.t}});
    }
    wgml_op_col2im(be, &(wgml_col2im_args){.out = &tout.t, .y = &ty.t, .bias = &tb.t, .kernel = K, .stride = stride,
                                           .pad = pad});
    end_ok();
    double *ref = calloc((size_t)(T_out * Co), sizeof *ref);
    for (int64_t t = 0; t < T_out; t++)
        for (int64_t o = 0; o < Co; o++) ref[t * Co + o] = bias[o];
    for (int64_t i = 0; i < T; i++)
        for (int k = 0; k < K; k++) {
            int64_t t = i * stride - pad + k;
            if (t < 0 || t >= T_out) continue;
            for (int64_t o = 0; o < Co; o++) {
                if (depthwise) {
                    ref[t * Co + o] += (double)x[i * Ci + o] * w[o * K + k];
                    continue;
                }
                for (int64_t c = 0; c < Ci; c++) ref[t * Co + o] += (double)x[i * Ci + c] * w[(c * Co + o) * K + k];
            }
        }
    float *y = get(&tout);
    double e = rel_err(y, ref, (size_t)(T_out * Co));
    if (e > 1e-5) fprintf(stderr, "convT T=%lld K=%d stride %d: err %g\n", (long long)T, K, stride, e);
    assert_true(e <= 1e-5);
    free(x), free(w), free(wl), free(bias), free(ref), free(y);
    drop(&tx), drop(&ty), drop(&tb), drop(&tout), drop(&tw);
}

static void test_conv_transpose1d(void **state) {
    (void)state;
    convt_case(10, 12, 6, 20, 10, 5, 0, 0); /* Kokoro's ups.0 (narrower) */
    convt_case(21, 6, 3, 12, 6, 3, 0, 0);   /* ups.1 */
    convt_case(13, 8, 8, 3, 2, 1, 1, 1);    /* the depthwise pool of AdainResBlk1d */
    convt_case(5, 3, 4, 2, 3, 0, 2, 0);     /* gaps between taps, output padding */
}

/* Short signals take the double path; long ones (rows in blocks of 256 over
 * the threads, float sums) the fast one. */
static void instance_norm_case(int64_t T, int64_t C, double tol) {
    float *x = randv((size_t)(T * C), 2), *w = randv((size_t)C, 1), *b = randv((size_t)C, 1);
    for (int64_t i = 0; i < T * C; i++) x[i] += 50; /* an offset the variance must not cancel against */
    tbuf tx = make(C, T, x), tw = make(C, 1, w), tb = make(C, 1, b);
    step();
    wgml_op_instance_norm(be, &(wgml_instance_norm_args){.out = &tx.t, .x = &tx.t, .w = &tw.t, .b = &tb.t, .eps = 1e-5f});
    end_ok();
    double *ref = malloc((size_t)(T * C) * sizeof *ref);
    for (int64_t c = 0; c < C; c++) {
        double m = 0, v = 0;
        for (int64_t t = 0; t < T; t++) m += x[t * C + c];
        m /= T;
        for (int64_t t = 0; t < T; t++) v += (x[t * C + c] - m) * (x[t * C + c] - m);
        v /= T;
        for (int64_t t = 0; t < T; t++) ref[t * C + c] = (x[t * C + c] - m) / sqrt(v + 1e-5) * w[c] + b[c];
    }
    float *y = get(&tx);
    const double e = rel_err(y, ref, (size_t)(T * C));
    if (e > tol) fprintf(stderr, "instance_norm T=%lld C=%lld: %g\n", (long long)T, (long long)C, e);
    assert_true(e <= tol);
    free(x), free(w), free(b), free(ref), free(y);
    drop(&tx), drop(&tw), drop(&tb);
}

static void test_instance_norm(void **state) {
    (void)state;
    instance_norm_case(53, 9, 1e-6);
    instance_norm_case(1300, 70, 2e-6);
}

static double sig(double v) { return 1 / (1 + exp(-v)); }

/* A bidirectional LSTM from its equations, PyTorch's gate order, against the op. */
static void test_lstm(void **state) {
    (void)state;
    const int64_t T = 23, H = 12, G = 4 * H;
    float *gx = randv((size_t)(T * 2 * G), 1), *w = randv((size_t)(2 * G * H), 0.4f);
    tbuf tg = make(2 * G, T, gx), tw = make(H, 2 * G, w), to = make(2 * H, T, NULL);
    step();
    wgml_op_lstm(be, &(wgml_lstm_args){.out = &to.t, .gx = &tg.t, .w_hh = &tw.t, .hidden = (int)H, .bidirectional = 1});
    end_ok();
    double *ref = malloc((size_t)(T * 2 * H) * sizeof *ref);
    for (int d = 0; d < 2; d++) {
        double h[64] = {0}, c[64] = {0}, z[256];
        for (int64_t s = 0; s < T; s++) {
            int64_t t = d ? T - 1 - s : s;
            for (int64_t i = 0; i < G; i++) {
                z[i] = gx[t * 2 * G + d * G + i];
                for (int64_t j = 0; j < H; j++) z[i] += (double)w[(d * G + i) * H + j] * h[j];
            }
            for (int64_t j = 0; j < H; j++) {
                c[j] = sig(z[H + j]) * c[j] + sig(z[j]) * tanh(z[2 * H + j]);
                h[j] = sig(z[3 * H + j]) * tanh(c[j]);
                ref[t * 2 * H + d * H + j] = h[j];
            }
        }
    }
    float *y = get(&to);
    double e = rel_err(y, ref, (size_t)(T * 2 * H));
    assert_true(e <= 2e-6);
    free(gx), free(w), free(ref), free(y);
    drop(&tg), drop(&tw), drop(&to);
}

/* STFT against a DFT of the reflect-padded frames; ISTFT(STFT(x)) = x. */
static void test_stft_roundtrip(void **state) {
    (void)state;
    const int N = 20, hop = 5, B = N / 2 + 1;
    const int64_t L = 600, F = L / hop + 1;
    float *x = randv((size_t)L, 1), win[20];
    for (int n = 0; n < N; n++) win[n] = (float)(0.5 - 0.5 * cos(2 * M_PI * n / N));
    tbuf tx = make(L, 1, x), tw = make(N, 1, win), ts = make(2 * B, F, NULL), tm = make(B, F, NULL),
         tp = make(B, F, NULL), ty = make(hop * (F - 1), 1, NULL);
    step();
    wgml_op_stft(be, &(wgml_stft_args){.out = &ts.t, .x = &tx.t, .window = &tw.t, .n_fft = N, .hop = hop});
    wgml_tensor mag = wgml_tensor_cols(&ts.t, 0, B), ph = wgml_tensor_cols(&ts.t, B, B);
    wgml_op_copy(be, &(wgml_copy_args){.out = &tm.t, .x = &mag});
    wgml_op_copy(be, &(wgml_copy_args){.out = &tp.t, .x = &ph});
    wgml_op_istft(be, &(wgml_istft_args){.out = &ty.t, .mag = &tm.t, .phase = &tp.t, .window = &tw.t, .n_fft = N,
                                         .hop = hop});
    end_ok();
    float *s = get(&ts), *y = get(&ty);
    double *ref = malloc((size_t)(F * 2 * B) * sizeof *ref);
    for (int64_t f = 0; f < F; f++)
        for (int k = 0; k < B; k++) {
            double re = 0, im = 0;
            for (int n = 0; n < N; n++) {
                int64_t i = f * hop - N / 2 + n;
                i = i < 0 ? -i : i >= L ? 2 * (L - 1) - i : i;
                re += x[i] * win[n] * cos(2 * M_PI * k * n / N);
                im -= x[i] * win[n] * sin(2 * M_PI * k * n / N);
            }
            ref[f * 2 * B + k] = hypot(re, im);
            double p = atan2(im, re);
            if (k == 0 || k == N / 2 || f == 0) p = re >= 0 ? 0 : M_PI; /* canonical: real values */
            ref[f * 2 * B + B + k] = p;
        }
    for (int64_t i = 0; i < F * 2 * B; i++) {
        double d = fabs(s[i] - ref[i]);
        if (i % (2 * B) >= B) d = fmin(d, fabs(d - 2 * M_PI)); /* a phase of about pi may come out as -pi */
        assert_true(d < 1e-5 * (1 + fabs(ref[i])));
    }
    double e = 0;
    for (int64_t i = 0; i < L; i++) e = fmax(e, fabs(y[i] - x[i]));
    assert_true(e < 1e-5);
    free(x), free(s), free(y), free(ref);
    drop(&tx), drop(&tw), drop(&ts), drop(&tm), drop(&tp), drop(&ty);
}

/* The NSF source against the official SineGen math in float64 (README:
 * rad = frac(f0 m / sr) per sample, rad_lo the mean of samples 300i+149 and
 * 300i+150, phase = cumsum(rad_lo) 2pi upp, linear interpolation with
 * align_corners=False), with the kit noise. */
static void test_nsf_source(void **state) {
    (void)state;
    const int64_t N = 40, upp = 300, L = N * upp;
    const int H = 9;
    const uint64_t seed = 4242;
    float *f0 = randv((size_t)N, 150), w[9], b = 0.05f;
    for (int64_t i = 0; i < N; i++) f0[i] += 180; /* mostly voiced, some not */
    f0[3] = -250.5f, f0[4] = 9.5f, f0[5] = 10.0f;
    for (int k = 0; k < H; k++) w[k] = tu_normal(&rng) * 0.5f;
    tbuf tf = make(N, 1, f0), tw = make(H, 1, w), tb = make(1, 1, &b), to = make(L, 1, NULL);
    step();
    wgml_op_nsf_source(be, &(wgml_nsf_source_args){.out = &to.t, .f0 = &tf.t, .w = &tw.t, .b = &tb.t, .harmonics = H,
                                                   .upp = (int)upp, .sample_rate = 24000, .amp = 0.1f,
                                                   .noise_std = 0.003f, .voiced_threshold = 10, .seed = seed});
    end_ok();
    float *y = get(&to);
    double *phase = malloc((size_t)(N * H) * sizeof *phase), *ref = malloc((size_t)L * sizeof *ref);
    for (int k = 0; k < H; k++) {
        double sum = 0;
        for (int64_t i = 0; i < N; i++) {
            double r = fmod((double)f0[i] * (k + 1) / 24000.0, 1.0);
            if (r < 0) r += 1;
            sum += r;
            phase[i * H + k] = sum * upp; /* cycles */
        }
    }
    for (int64_t t = 0; t < L; t++) {
        double pos = (t + 0.5) / upp - 0.5;
        if (pos < 0) pos = 0;
        int64_t i0 = (int64_t)floor(pos), i1 = i0 + 1 < N ? i0 + 1 : N - 1;
        if (i0 > N - 1) i0 = N - 1;
        double lam = pos - (double)i0, acc = b;
        int uv = f0[t / upp] > 10;
        for (int k = 0; k < H; k++) {
            double ph = phase[i0 * H + k] + lam * (phase[i1 * H + k] - phase[i0 * H + k]);
            double n = wgml_kit_normal(seed, wgml_kit_sine_noise_at((uint64_t)t * H + k));
            double e = uv ? 0.1 * sin(2 * M_PI * (ph - floor(ph))) + 0.003 * n : 0.1 / 3 * n;
            acc += w[k] * e;
        }
        ref[t] = tanh(acc);
    }
    double e = rel_err(y, ref, (size_t)L);
    if (e > 1e-6) fprintf(stderr, "nsf_source: err %g\n", e);
    assert_true(e <= 1e-6);
    free(f0), free(y), free(phase), free(ref);
    drop(&tf), drop(&tw), drop(&tb), drop(&to);
}

static void grid_result(void *user, const wgml_opcheck_result *r) {
    (void)user;
    if (!r->pass) fprintf(stderr, "FAIL %s %s: err %g tol %g %s\n", r->op, r->config, r->err, r->tol, r->message);
}

/* The op grids with the fast CPU backend against the exact one. */
static void test_grids(void **state) {
    (void)state;
    wgml_backend *exact;
    wgml_error err;
    assert_int_equal(wgml_backend_cpu_create_exact(2, &exact, &err), WGML_OK);
    wgml_opcheck_options o = {.filter = "im2col,col2im,instance_norm,lstm,stft,istft,nsf_source"};
    assert_int_equal(wgml_opcheck_run(be, exact, &o, grid_result, NULL), 0);
    exact->free(exact);
}

/* Argument errors name the problem and nothing runs. */
static void expect_error(const char *needle) {
    wgml_error err;
    wgml_status st = be->end(be, &err);
    if (st == WGML_OK || !strstr(err.message, needle)) fprintf(stderr, "got: %s\n", st ? err.message : "(ok)");
    assert_int_equal(st, WGML_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, needle));
}

static void test_errors(void **state) {
    (void)state;
    tbuf x = make(4, 10, NULL), o = make(12, 10, NULL), w = make(4, 1, NULL), s = make(10, 1, NULL);
    step();
    wgml_op_im2col(be, &(wgml_im2col_args){.out = &o.t, .x = &x.t, .kernel = 3, .stride = 1, .dilation = 1});
    expect_error("rows of 3 taps");
    step();
    wgml_op_im2col(be, &(wgml_im2col_args){.out = &o.t, .x = &x.t, .kernel = 3, .stride = 1, .dilation = 1, .pad_l = 10,
                                           .pad_r = 1, .reflect = 1});
    expect_error("reflection padding");
    step();
    wgml_op_im2col(be, &(wgml_im2col_args){.out = &o.t, .kernel = 3, .c0 = 2, .zero_c = 3}); /* 5 of 4 channels */
    expect_error("at least 5");
    step();
    wgml_op_im2col(be, &(wgml_im2col_args){.out = &o.t, .kernel = 3, .c0 = 1});
    expect_error("zero_c");
    step();
    wgml_op_im2col(be, &(wgml_im2col_args){.out = &o.t, .x = &x.t, .kernel = 1, .stride = 1, .dilation = 1,
                                           .zero_c = 1});
    expect_error("zero_c");
    step();
    wgml_op_col2im(be, &(wgml_col2im_args){.out = &x.t, .y = &o.t, .kernel = 2, .stride = 1});
    expect_error("col2im");
    step();
    wgml_op_lstm(be, &(wgml_lstm_args){.out = &x.t, .gx = &o.t, .w_hh = &w.t, .hidden = 2, .bidirectional = 0});
    expect_error("lstm");
    step();
    wgml_op_stft(be, &(wgml_stft_args){.out = &o.t, .x = &s.t, .window = &w.t, .n_fft = 3, .hop = 1});
    expect_error("odd");
    step();
    wgml_op_nsf_source(be, &(wgml_nsf_source_args){.out = &s.t, .f0 = &s.t, .w = &w.t, .b = &w.t, .harmonics = 4,
                                                   .upp = 1, .sample_rate = 24000});
    expect_error("nsf_source");
    drop(&x), drop(&o), drop(&w), drop(&s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv1d),      cmocka_unit_test(test_conv_transpose1d),
        cmocka_unit_test(test_instance_norm), cmocka_unit_test(test_lstm),
        cmocka_unit_test(test_stft_roundtrip), cmocka_unit_test(test_nsf_source),
        cmocka_unit_test(test_grids),       cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
