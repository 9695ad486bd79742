/*
 * test_cpu_ops.c - the CPU backend's ops against straightforward
 * double-precision implementations written here, over ragged shapes and
 * every weight type the backend supports. The CPU backend is the reference
 * every GPU backend is compared with, so it is checked against the math.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cpu/cpu_gemm.h"
#include "backend/cpu/cpu_qgemm.h"
#include "backend/cpu/kernels.h"
#include "core/dtype.h"
#include "core/fp16.h"
#include "core/quant.h"
#include "testutil.h"

static wgml_backend *be;
static tu_rng rng = {12345};

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

/* A tensor in a fresh backend buffer, filled from host data. */
typedef struct {
    wgml_tensor t;
    wgml_buffer *b;
} tbuf;

static tbuf make(uint32_t type, int64_t ne0, int64_t ne1, const void *data) {
    tbuf r;
    size_t size = wgml_row_size(type, ne0) * (size_t)ne1;
    wgml_error err;
    assert_int_equal(be->buffer_create(be, size, WGML_BUFFER_ACTIVATIONS, &r.b, &err), WGML_OK);
    if (data) assert_int_equal(be->buffer_write(be, r.b, 0, data, size, &err), WGML_OK);
    r.t = (wgml_tensor){.type = type, .ne = {ne0, ne1, 1, 1}, .buf = r.b, .name = "t"};
    return r;
}

/* A weight [M][K] of `type` made by weight_create: from memory (streamed: NULL,
 * then weight_write in two pieces of whole rows, the first even). */
static tbuf make_weight(uint32_t type, int K, int M, const uint8_t *q, int streamed) {
    tbuf r;
    wgml_error err;
    assert_int_equal(be->weight_create(be, type, K, M, streamed ? NULL : q, "w", &r.b, &err), WGML_OK);
    if (streamed) {
        const size_t row = wgml_row_size(type, K);
        assert_int_equal(be->weight_write(be, r.b, 0, 2, q, &err), WGML_OK);
        assert_int_equal(be->weight_write(be, r.b, 2, M - 2, q + 2 * row, &err), WGML_OK);
    }
    r.t = (wgml_tensor){.type = type, .ne = {K, M, 1, 1}, .buf = r.b, .name = "w"};
    return r;
}

static void drop(tbuf *t) { be->buffer_free(be, t->b); }

static void read_f32(const tbuf *t, float *out) {
    wgml_error err;
    assert_int_equal(be->buffer_read(be, t->b, 0, out, wgml_tensor_nbytes(&t->t), &err), WGML_OK);
}

static float *randn(size_t n, float scale) {
    float *v = malloc(n * sizeof *v);
    for (size_t i = 0; i < n; i++) v[i] = tu_normal(&rng) * scale;
    return v;
}

static void step(int pos, int n) { be->begin(be, &(wgml_step){pos, n}); }

static void end_ok(void) {
    wgml_error err;
    wgml_status st = be->end(be, &err);
    if (st) fprintf(stderr, "step failed: %s\n", err.message);
    assert_int_equal(st, WGML_OK);
}

/* max |a-b| / (1 + max|b|) over n values */
static double rel_err(const float *a, const double *b, size_t n) {
    double mx = 0, e = 0;
    for (size_t i = 0; i < n; i++) mx = fmax(mx, fabs(b[i]));
    for (size_t i = 0; i < n; i++) e = fmax(e, fabs(a[i] - b[i]));
    return e / (1 + mx);
}

static const uint32_t all_types[] = {WGML_F32, WGML_F16, WGML_BF16, WGML_Q8_0, WGML_Q4_0, WGML_Q4_1, WGML_Q5_0,
                                     WGML_Q5_1, WGML_Q2_K, WGML_Q3_K, WGML_Q4_K, WGML_Q5_K, WGML_Q6_K};

/* Quantized activations (Q8_0/Q8_K) limit how close a quantized matmul can get
 * to exact f32 math: allow ~1% of the output's scale there, 1e-5 for float types. */
static double matmul_tol(uint32_t type, int n, int mode) {
    /* f32_act (bf16_act is held to its own bound below): the weight dequantized exactly, f32 products */
    if (mode >= 1) return type == WGML_F32 ? 1e-5 : 2e-5;
    if (type == WGML_F32) return 1e-5;
    /* BF16 in the blocked GEMM with AVX512_BF16: activations rounded to bf16 (8-bit mantissa) */
    if (type == WGML_BF16 && n >= 32 && cpu_gemm_bf16_ok()) return 4e-3;
    if (type == WGML_F16 || type == WGML_BF16) return 1e-4;
    return 1.5e-2;
}

static void test_matmul_types(void **state) {
    (void)state;
    /* the last three have rows enough for the float types' blocked GEMM (cpu_gemm.c): ragged
     * tiles and panels, k blocks of 512 and a remainder */
    const int shapes[][3] = {{32, 1, 1},   {64, 7, 3},    {256, 33, 1}, {512, 17, 5}, {768, 96, 2},
                             {77, 9, 6},   {40, 8, 8},    {96, 64, 37}, {700, 45, 70}, {1100, 33, 50}};
    for (size_t ti = 0; ti < sizeof all_types / sizeof all_types[0]; ti++) {
        uint32_t type = all_types[ti];
        if (!be->supports_type(be, type)) continue;
        int bs = wgml_dtype_get(type)->block_size;
        /* modes: 0 the type's own activations, 1 f32_act, 2 bf16_act */
        for (size_t si = 0; si < 3 * sizeof shapes / sizeof shapes[0]; si++) {
            const int mode = (int)(si % 3);
            int K = shapes[si / 3][0], M = shapes[si / 3][1], n = shapes[si / 3][2];
            if (K % bs) continue;
            float *wf = randn((size_t)K * M, 0.5f), *x = randn((size_t)K * n, 1.0f);
            size_t row = wgml_row_size(type, K);
            uint8_t *wq = malloc(row * (size_t)M);
            float *wd = malloc((size_t)K * M * sizeof *wd);
            for (int r = 0; r < M; r++) {
                assert_int_equal(wgml_quantize_row(type, wf + (size_t)r * K, wq + r * row, K), row);
                assert_int_equal(wgml_dequantize_row(type, wq + r * row, wd + (size_t)r * K, K), 0);
            }
            tbuf W = make(type, K, M, wq), X = make(WGML_F32, K, n, x), O = make(WGML_F32, M, n, NULL);
            step(0, n);
            wgml_op_matmul(be, &(wgml_matmul_args){.x = &X.t, .n_w = 1, .w = {&W.t}, .out = {&O.t},
                                                   .f32_act = mode >= 1, .bf16_act = mode == 2});
            end_ok();
            float *got = malloc((size_t)M * n * sizeof *got);
            double *want = malloc((size_t)M * n * sizeof *want);
            read_f32(&O, got);
            double bf16_excess = 0; /* bf16_act: error over its bound, sum |w x| * 2^-8 (two roundings of 2^-9) */
            for (int t = 0; t < n; t++)
                for (int r = 0; r < M; r++) {
                    double s = 0, sa = 0;
                    for (int c = 0; c < K; c++) {
                        double p = (double)wd[(size_t)r * K + c] * x[(size_t)t * K + c];
                        s += p, sa += fabs(p);
                    }
                    want[(size_t)t * M + r] = s;
                    double ex = fabs(got[(size_t)t * M + r] - s) - (0x1p-8 * sa + 1e-5);
                    bf16_excess = ex > bf16_excess ? ex : bf16_excess;
                }
            double e = rel_err(got, want, (size_t)M * n);
            if (mode == 2 && cpu_gemm_bf16_ok()) {
                if (bf16_excess > 0) fprintf(stderr, "matmul %s K=%d M=%d n=%d bf16_act: %g over the bound\n",
                                             wgml_dtype_name(type), K, M, n, bf16_excess);
                assert_true(bf16_excess <= 0);
                e = 0;
            }
            if (e > matmul_tol(type, n, mode))
                fprintf(stderr, "matmul %s K=%d M=%d n=%d mode %d: err %g\n", wgml_dtype_name(type), K, M, n, mode, e);
            assert_true(e <= matmul_tol(type, n, mode));
            drop(&W), drop(&X), drop(&O);
            free(wf), free(x), free(wq), free(wd), free(got), free(want);
        }
    }
}

/* Convolutions (matmul's conv) against a double reference from the dequantized
 * weight: channels over one k block (c0 > 0 inside a tap), taps padded to whole
 * blocks with random weights there (read as zero), dilation, stride, pads; rows
 * for the implicit GEMM (40) and fewer (the unfolding written out); f32_act, and
 * bf16_act held to its rounding bound. */
static void test_matmul_conv(void **state) {
    (void)state;
    const struct {
        uint32_t type;
        int C, Ct, T, M;
        wgml_conv1d cv;
    } cases[] = {
        {WGML_Q8_0, 600, 608, 40, 35, {3, 1, 2, 2, 2}},
        {WGML_F32, 600, 600, 44, 33, {2, 2, 1, 1, 0}},
        {WGML_F16, 70, 70, 9, 7, {5, 1, 3, 6, 6}},
        {WGML_Q8_0, 20, 32, 12, 9, {7, 1, 1, 3, 3}},
    };
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const int C = cases[ci].C, Ct = cases[ci].Ct, T = cases[ci].T, M = cases[ci].M, kk = cases[ci].cv.kernel;
        const wgml_conv1d cv = cases[ci].cv;
        const int n = (int)wgml_conv1d_rows(&cv, T), K = kk * Ct;
        const uint32_t type = cases[ci].type;
        float *wf = randn((size_t)K * M, 0.5f), *x = randn((size_t)C * T, 1.0f), *bias = randn((size_t)M, 1.0f);
        size_t row = wgml_row_size(type, K);
        uint8_t *wq = malloc(row * (size_t)M);
        float *wd = malloc((size_t)K * M * sizeof *wd), *got = malloc((size_t)M * n * sizeof *got);
        for (int r = 0; r < M; r++) {
            assert_int_equal(wgml_quantize_row(type, wf + (size_t)r * K, wq + r * row, K), row);
            assert_int_equal(wgml_dequantize_row(type, wq + r * row, wd + (size_t)r * K, K), 0);
        }
        for (int mode = 1; mode <= 2; mode++) {
            tbuf W = make(type, K, M, wq), X = make(WGML_F32, C, T, x), B = make(WGML_F32, M, 1, bias),
                 O = make(WGML_F32, M, n, NULL);
            step(0, n);
            wgml_op_matmul(be, &(wgml_matmul_args){.x = &X.t, .n_w = 1, .w = {&W.t}, .bias = {&B.t}, .out = {&O.t},
                                                   .f32_act = 1, .bf16_act = mode == 2, .conv = cv});
            end_ok();
            read_f32(&O, got);
            double worst = 0, excess = 0, mx = 0;
            for (int t = 0; t < n; t++)
                for (int r = 0; r < M; r++) {
                    double sum = bias[r], sa = fabs(bias[r]);
                    for (int j = 0; j < kk; j++) {
                        const int src = t * cv.stride + j * cv.dilation - cv.pad_l;
                        if (src < 0 || src >= T) continue;
                        for (int c = 0; c < C; c++) {
                            double p = (double)wd[(size_t)r * K + (size_t)j * Ct + c] * x[(size_t)src * C + c];
                            sum += p, sa += fabs(p);
                        }
                    }
                    const double e = fabs(got[(size_t)t * M + r] - sum);
                    worst = fmax(worst, e), mx = fmax(mx, fabs(sum));
                    excess = fmax(excess, e - (0x1p-8 * sa + 1e-5));
                }
            if (mode == 2 && cpu_gemm_bf16_ok()) {
                if (excess > 0) fprintf(stderr, "conv case %zu bf16: %g over the bound\n", ci, excess);
                assert_true(excess <= 0);
            } else {
                if (worst / (1 + mx) > 2e-6) fprintf(stderr, "conv case %zu mode %d: err %g\n", ci, mode, worst / (1 + mx));
                assert_true(worst / (1 + mx) <= 2e-6);
            }
            drop(&W), drop(&X), drop(&B), drop(&O);
        }
        free(wf), free(x), free(bias), free(wq), free(wd), free(got);
    }
}

/* norm prologue, biases, three weights, ADD and SWIGLU epilogues (F32 weights: exact math), for n
 * token rows (3: the dot products; 40: the blocked GEMM, but for SwiGLU). */
static void matmul_fused(int n) {
    const int K = 96, M0 = 40, M1 = 24, M2 = 24;
    const float eps = 1e-5f;
    float *x = randn((size_t)K * n, 1), *g = randn(K, 1), *w0 = randn((size_t)K * M0, 0.3f),
          *w1 = randn((size_t)K * M1, 0.3f), *w2 = randn((size_t)K * M2, 0.3f), *b0 = randn(M0, 1),
          *b2 = randn(M2, 1), *init = randn((size_t)M0 * n, 1);
    tbuf X = make(WGML_F32, K, n, x), G = make(WGML_F32, K, 1, g), W0 = make(WGML_F32, K, M0, w0),
         W1 = make(WGML_F32, K, M1, w1), W2 = make(WGML_F32, K, M2, w2), B0 = make(WGML_F32, M0, 1, b0),
         B2 = make(WGML_F32, M2, 1, b2), O0 = make(WGML_F32, M0, n, init), O1 = make(WGML_F32, M1, n, NULL),
         O2 = make(WGML_F32, M2, n, NULL);
    double *xn = malloc((size_t)n * K * sizeof *xn), *want = malloc((size_t)n * M0 * sizeof *want);
    float *got = malloc((size_t)n * M0 * sizeof *got);
    for (int t = 0; t < n; t++) {
        double ss = 0;
        for (int c = 0; c < K; c++) ss += (double)x[t * K + c] * x[t * K + c];
        double s = 1 / sqrt(ss / K + eps);
        for (int c = 0; c < K; c++) xn[t * K + c] = x[t * K + c] * s * g[c];
    }
    /* three outputs with norm and biases */
    step(0, n);
    wgml_op_matmul(be, &(wgml_matmul_args){.x = &X.t, .norm = &G.t, .eps = eps, .n_w = 3, .w = {&W0.t, &W1.t, &W2.t},
                                  .bias = {&B0.t, NULL, &B2.t}, .out = {&O0.t, &O1.t, &O2.t}});
    end_ok();
    const float *ws[3] = {w0, w1, w2}, *bs[3] = {b0, NULL, b2};
    const int Ms[3] = {M0, M1, M2};
    tbuf *outs[3] = {&O0, &O1, &O2};
    for (int k = 0; k < 3; k++) {
        read_f32(outs[k], got);
        for (int t = 0; t < n; t++)
            for (int r = 0; r < Ms[k]; r++) {
                double s = bs[k] ? bs[k][r] : 0;
                for (int c = 0; c < K; c++) s += ws[k][r * K + c] * xn[t * K + c];
                want[t * Ms[k] + r] = s;
            }
        assert_true(rel_err(got, want, (size_t)Ms[k] * n) < 1e-5);
    }
    /* ADD: out += W x */
    assert_int_equal(be->buffer_write(be, O0.b, 0, init, sizeof(float) * M0 * n, NULL), WGML_OK);
    step(0, n);
    wgml_op_matmul(be, &(wgml_matmul_args){.x = &X.t, .n_w = 1, .w = {&W0.t}, .out = {&O0.t}, .epilogue = WGML_EPI_ADD});
    end_ok();
    read_f32(&O0, got);
    for (int t = 0; t < n; t++)
        for (int r = 0; r < M0; r++) {
            double s = init[t * M0 + r];
            for (int c = 0; c < K; c++) s += (double)w0[r * K + c] * x[t * K + c];
            want[t * M0 + r] = s;
        }
    assert_true(rel_err(got, want, (size_t)M0 * n) < 1e-5);
    /* SWIGLU: out = silu(W1 n(x)) * (W2 n(x) + b2) */
    step(0, n);
    wgml_op_matmul(be, &(wgml_matmul_args){.x = &X.t, .norm = &G.t, .eps = eps, .n_w = 2, .w = {&W1.t, &W2.t},
                                  .bias = {NULL, &B2.t}, .out = {&O1.t}, .epilogue = WGML_EPI_SWIGLU});
    end_ok();
    read_f32(&O1, got);
    for (int t = 0; t < n; t++)
        for (int r = 0; r < M1; r++) {
            double a = 0, b = b2[r];
            for (int c = 0; c < K; c++) a += w1[r * K + c] * xn[t * K + c], b += w2[r * K + c] * xn[t * K + c];
            want[t * M1 + r] = a / (1 + exp(-a)) * b;
        }
    assert_true(rel_err(got, want, (size_t)M1 * n) < 1e-5);
    tbuf *all[] = {&X, &G, &W0, &W1, &W2, &B0, &B2, &O0, &O1, &O2};
    for (int i = 0; i < 10; i++) drop(all[i]);
    free(x), free(g), free(w0), free(w1), free(w2), free(b0), free(b2), free(init), free(xn), free(want), free(got);
}

static void test_matmul_fused(void **state) {
    (void)state;
    matmul_fused(3);
    matmul_fused(40);
}

/* The int8 GEMM (cpu_qgemm.c) of every quantized type against double math on
 * the dequantized weights, held to the bound of its one approximation: each
 * activation rounded to d q with d = max|x| / 127 over its block (32 elements
 * with d stored as f16, or a K-quant's 256; error <= d / 2 per element, plus
 * 127 d 2^-11 for the f16 scale), plus f32 rounding; with bias and ADD, ragged panels
 * and tiles, one and several items per thread, K-quants over several blocks
 * and Q4_0 in its own layout (weight_create). SwiGLU and a norm prologue
 * against the same GEMM's two products combined in double. */
static void test_matmul_qgemm(void **state) {
    (void)state;
    const int shapes[][3] = {{256, 37, 8}, {768, 50, 21}, {1024, 16, 70}, {512, 300, 13}};
    int ran = 0;
    for (size_t ti = 0; ti < sizeof all_types / sizeof all_types[0]; ti++) {
        const uint32_t type = all_types[ti];
        if (!cpu_qgemm_ok(type) || !be->supports_type(be, type)) continue;
        ran++;
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
            const int K = shapes[si][0], M = shapes[si][1], n = shapes[si][2];
            float *wf = randn((size_t)K * M, 0.5f), *x = randn((size_t)K * n, 1.0f), *b = randn(M, 1.0f),
                  *init = randn((size_t)M * n, 1.0f);
            for (int i = 0; i < K * n; i++) x[i] *= (float)(1 + (i / 32) % 5); /* chunks of other scales */
            const size_t row = wgml_row_size(type, K);
            uint8_t *wq = malloc(row * (size_t)M);
            float *wd = malloc((size_t)K * M * sizeof *wd), *got = malloc((size_t)M * n * sizeof *got);
            for (int r = 0; r < M; r++) {
                wgml_quantize_row(type, wf + (size_t)r * K, wq + r * row, K);
                wgml_dequantize_row(type, wq + r * row, wd + (size_t)r * K, K);
            }
            tbuf W = si % 2 ? make_weight(type, K, M, wq, 0) : make(type, K, M, wq);
            tbuf X = make(WGML_F32, K, n, x), B = make(WGML_F32, M, 1, b), O = make(WGML_F32, M, n, init);
            step(0, n);
            wgml_op_matmul(be, &(wgml_matmul_args){.x = &X.t, .n_w = 1, .w = {&W.t}, .bias = {&B.t}, .out = {&O.t},
                                                   .epilogue = WGML_EPI_ADD});
            end_ok();
            read_f32(&O, got);
            for (int t = 0; t < n; t++)
                for (int r = 0; r < M; r++) {
                    double want = (double)init[(size_t)t * M + r] + b[r], qerr = 0, mag = fabs(want), wmax = 0;
                    for (int c = 0; c < K; c++) wmax = fmax(wmax, fabs(wd[(size_t)r * K + c]));
                    const int qb = cpu_qgemm_act_kind(type) ? 256 : 32;
                    for (int c0 = 0; c0 < K; c0 += qb) {
                        double amax = 0, wsum = 0;
                        for (int c = c0; c < c0 + qb; c++) {
                            const double xv = x[(size_t)t * K + c], wv = wd[(size_t)r * K + c];
                            amax = fmax(amax, fabs(xv)), wsum += fabs(wv);
                            want += wv * xv;
                            mag += 3 * wmax * fabs(xv); /* the codes' terms before the offsets cancel */
                        }
                        qerr += amax / 127 * (0.5 + (qb == 32 ? 127 * 0x1p-11 : 0)) * wsum;
                    }
                    const double e = fabs(got[(size_t)t * M + r] - want), tol = qerr * (1 + 1e-4) + 1e-5 * mag;
                    if (e > tol)
                        fail_msg("qgemm %s K=%d M=%d n=%d t=%d r=%d: %.9g, want %.9g (bound %.3g)", wgml_dtype_name(type),
                                 K, M, n, t, r, got[(size_t)t * M + r], want, tol);
                }
            /* SwiGLU of W and W with a norm: silu(a) * (b + bias) from the two products alone */
            const float eps = 1e-5f;
            float *g = randn(K, 1.0f), *a_only = malloc((size_t)M * n * sizeof *a_only);
            tbuf G = make(WGML_F32, K, 1, g), A = make(WGML_F32, M, n, NULL);
            step(0, n);
            wgml_op_matmul(be, &(wgml_matmul_args){.x = &X.t, .norm = &G.t, .eps = eps, .n_w = 1, .w = {&W.t},
                                                   .out = {&A.t}});
            wgml_op_matmul(be, &(wgml_matmul_args){.x = &X.t, .norm = &G.t, .eps = eps, .n_w = 2, .w = {&W.t, &W.t},
                                                   .bias = {NULL, &B.t}, .out = {&O.t}, .epilogue = WGML_EPI_SWIGLU});
            end_ok();
            read_f32(&A, a_only);
            read_f32(&O, got);
            for (int i = 0; i < M * n; i++) {
                const double a = a_only[i], want = a / (1 + exp(-a)) * (a + b[i % M]);
                assert_true(fabs(got[i] - want) <= 1e-5 * (1 + fabs(want)));
            }
            drop(&W), drop(&X), drop(&B), drop(&O), drop(&G), drop(&A);
            free(wf), free(x), free(b), free(init), free(wq), free(wd), free(got), free(g), free(a_only);
        }
    }
    if (cpu_kernels_qgemm()) assert_int_equal(ran, 10); /* every quantized type */
}

static void ref_rope(double *v, int n_head, int hd, int pos, const wgml_rope *r, const float *ff) {
    for (int h = 0; h < n_head; h++)
        for (int i = 0; i < r->n_rot / 2; i++) {
            double th = pos * (double)r->freq_scale * pow(r->freq_base, -2.0 * i / r->n_rot) / (ff ? ff[i] : 1);
            int a = r->neox ? i : 2 * i, b = r->neox ? i + r->n_rot / 2 : 2 * i + 1;
            double x0 = v[h * hd + a], x1 = v[h * hd + b];
            v[h * hd + a] = x0 * cos(th) - x1 * sin(th);
            v[h * hd + b] = x0 * sin(th) + x1 * cos(th);
        }
}

static void test_rope(void **state) {
    (void)state;
    const int n_head = 3, hd = 16, n = 4, pos = 37;
    float ffv[6] = {1, 2, 4, 8, 1.5f, 3};
    tbuf FF = make(WGML_F32, 6, 1, ffv);
    for (int variant = 0; variant < 4; variant++) {
        wgml_rope r = {.n_rot = variant == 3 ? 12 : 16, .neox = variant & 1, .freq_base = 10000, .freq_scale = variant == 2 ? 0.25f : 1,
                       .freq_factors = variant == 3 ? &FF.t : NULL};
        float *x = randn((size_t)n_head * hd * n, 1);
        tbuf X = make(WGML_F32, n_head * hd, n, x);
        step(pos, n);
        wgml_op_rope(be, &(wgml_rope_args){&X.t, n_head, hd, &r});
        end_ok();
        float got[4 * 48];
        double want[4 * 48];
        read_f32(&X, got);
        for (int t = 0; t < n; t++) {
            for (int i = 0; i < n_head * hd; i++) want[t * n_head * hd + i] = x[t * n_head * hd + i];
            ref_rope(want + t * n_head * hd, n_head, hd, pos + t, &r, variant == 3 ? ffv : NULL);
        }
        assert_true(rel_err(got, want, (size_t)n * n_head * hd) < 1e-5);
        drop(&X);
        free(x);
    }
    drop(&FF);
}

/* One attention case: heads, head size, cache rows already filled (pos0) and
 * new tokens (n), on a backend with this many threads. */
typedef struct {
    int n_head, n_kv, hd, pos0, n, threads;
} att_case;

/* Causal GQA attention with RoPE over a cache filled by earlier steps. */
static void check_attention_case(uint32_t cache_type, att_case ac) {
    const int n_head = ac.n_head, n_kv = ac.n_kv, hd = ac.hd, n_ctx = ac.pos0 + ac.n + 3, pos0 = ac.pos0, n = ac.n;
    wgml_backend *saved = be;
    wgml_error berr;
    if (ac.threads != 2) assert_int_equal(wgml_backend_cpu_create(ac.threads, &be, &berr), WGML_OK);
    const int qd = n_head * hd, kvd = n_kv * hd;
    wgml_rope rope = {.n_rot = hd, .neox = 1, .freq_base = 10000, .freq_scale = 1};
    float *kc_init = randn((size_t)n_ctx * kvd, 1), *vc_init = randn((size_t)n_ctx * kvd, 1);
    /* the cache's earlier rows as the cache type will hold them */
    size_t crow = wgml_row_size(cache_type, kvd);
    uint8_t *kc = calloc(n_ctx, crow), *vc = calloc(n_ctx, crow);
    for (int j = 0; j < n_ctx; j++) {
        wgml_quantize_row(cache_type, kc_init + j * kvd, kc + j * crow, kvd);
        wgml_quantize_row(cache_type, vc_init + j * kvd, vc + j * crow, kvd);
    }
    float *q = randn((size_t)n * qd, 1), *k = randn((size_t)n * kvd, 1), *v = randn((size_t)n * kvd, 1);
    tbuf Q = make(WGML_F32, qd, n, q), K = make(WGML_F32, kvd, n, k), V = make(WGML_F32, kvd, n, v),
         KC = make(cache_type, kvd, n_ctx, kc), VC = make(cache_type, kvd, n_ctx, vc), O = make(WGML_F32, qd, n, NULL);
    float scale = 1.0f / sqrtf((float)hd);
    step(pos0, n);
    wgml_op_attention(be, &(wgml_attention_args){.q = &Q.t,
                                        .k = &K.t,
                                        .v = &V.t,
                                        .k_cache = &KC.t,
                                        .v_cache = &VC.t,
                                        .out = &O.t,
                                        .n_head = n_head,
                                        .n_head_kv = n_kv,
                                        .head_dim = hd,
                                        .scale = scale,
                                        .rope = &rope});
    end_ok();
    /* reference: cache rows < pos0 as stored, rows pos0.. from rotated k / v */
    double *K_all = calloc((size_t)n_ctx * kvd, sizeof(double)), *V_all = calloc((size_t)n_ctx * kvd, sizeof(double));
    float *tmp = malloc(kvd * sizeof *tmp);
    for (int j = 0; j < pos0; j++) {
        wgml_dequantize_row(cache_type, kc + j * crow, tmp, kvd);
        for (int i = 0; i < kvd; i++)
            K_all[j * kvd + i] = tmp[i];
        wgml_dequantize_row(cache_type, vc + j * crow, tmp, kvd);
        for (int i = 0; i < kvd; i++)
            V_all[j * kvd + i] = tmp[i];
    }
    double *qr = malloc((size_t)n * qd * sizeof *qr);
    for (int t = 0; t < n; t++) {
        for (int i = 0; i < kvd; i++)
            K_all[(pos0 + t) * kvd + i] = k[t * kvd + i], V_all[(pos0 + t) * kvd + i] = v[t * kvd + i];
        ref_rope(K_all + (pos0 + t) * kvd, n_kv, hd, pos0 + t, &rope, NULL);
        for (int i = 0; i < qd; i++)
            qr[t * qd + i] = q[t * qd + i];
        ref_rope(qr + t * qd, n_head, hd, pos0 + t, &rope, NULL);
    }
    double *want = calloc((size_t)n * qd, sizeof *want);
    for (int t = 0; t < n; t++)
        for (int h = 0; h < n_head; h++) {
            int g = h / (n_head / n_kv), len = pos0 + t + 1;
            double *s = calloc((size_t)len, sizeof *s), mx = -1e300, sum = 0;
            for (int j = 0; j < len; j++) {
                s[j] = 0;
                for (int d = 0; d < hd; d++)
                    s[j] += qr[t * qd + h * hd + d] * K_all[j * kvd + g * hd + d];
                s[j] *= scale;
                mx = fmax(mx, s[j]);
            }
            for (int j = 0; j < len; j++)
                sum += s[j] = exp(s[j] - mx);
            for (int j = 0; j < len; j++)
                for (int d = 0; d < hd; d++)
                    want[t * qd + h * hd + d] += s[j] / sum * V_all[j * kvd + g * hd + d];
            free(s);
        }
    float *got = malloc((size_t)n * qd * sizeof *got);
    read_f32(&O, got);
    double tol = cache_type == WGML_F16 ? 1e-3 : 2e-6;
    double e = rel_err(got, want, (size_t)n * qd);
    if (e > tol || getenv("SHOWERR"))
        fprintf(stderr, "attention (%s cache, %d/%d heads, hd %d, rows %d+%d, %d threads): err %g\n",
                wgml_dtype_name(cache_type), n_head, n_kv, hd, pos0, n, ac.threads, e);
    assert_true(e <= tol);
    /* the new rows are in the cache */
    uint8_t *kc_after = malloc(crow * n_ctx);
    assert_int_equal(be->buffer_read(be, KC.b, 0, kc_after, crow * n_ctx, NULL), WGML_OK);
    wgml_dequantize_row(cache_type, kc_after + (size_t)(pos0 + n - 1) * crow, tmp, kvd);
    for (int i = 0; i < kvd; i++)
        assert_true(fabs(tmp[i] - K_all[(pos0 + n - 1) * kvd + i]) < 2e-3);
    tbuf *all[] = {&Q, &K, &V, &KC, &VC, &O};
    for (int i = 0; i < 6; i++)
        drop(all[i]);
    free(kc_init), free(vc_init), free(kc), free(vc), free(q), free(k), free(v), free(K_all), free(V_all), free(tmp);
    free(qr), free(want), free(got), free(kc_after);
    if (be != saved) be->free(be), be = saved;
}

/* Every path of the kernel: grouped heads in blocks of four and one at a
 * time, head sizes with and without the SIMD width, one token (decode) and
 * several (prefill, causal), and the split-K merge (few KV heads, many
 * threads, hundreds of rows); each with the SIMD kernel and the scalar one. */
static void check_attention(uint32_t cache_type) {
    const att_case cases[] = {
        {6, 2, 8, 11, 5, 2},   /* groups of 3: one head at a time */
        {8, 2, 64, 37, 1, 2},  /* groups of 4, decode */
        {12, 2, 64, 20, 9, 2}, /* groups of 6: a block of four and two single heads */
        {4, 4, 48, 70, 3, 2},  /* multi-head, hd not a multiple of 32 */
        {4, 2, 12, 9, 4, 2},   /* hd not a multiple of 8: the scalar kernel */
        {8, 1, 32, 300, 1, 8}, /* split-K: one KV head, eight threads */
        {8, 2, 64, 200, 2, 6}, /* split-K over two tokens; some chunks past the first token's end */
        /* prompts (8 rows or more): blocks of query rows over the cache (gf_run) */
        {8, 2, 64, 0, 40, 2},  /* from position 0, groups of 4 */
        {6, 6, 32, 17, 23, 3}, /* after 17 rows, no grouping, ragged last block, three threads */
        {4, 2, 12, 5, 16, 2},  /* hd not a multiple of 8 */
    };
    for (int forced = 0; forced < 2; forced++) {
        cpu_kernels_force_scalar(forced);
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
            check_attention_case(cache_type, cases[i]);
    }
    cpu_kernels_force_scalar(0);
}

static void test_attention_f32(void **state) {
    (void)state;
    check_attention(WGML_F32);
}

static void test_attention_f16(void **state) {
    (void)state;
    check_attention(WGML_F16);
}

static void test_attention_overflow(void **state) {
    (void)state;
    const int kvd = 16, n_ctx = 4;
    tbuf Q = make(WGML_F32, 16, 2, NULL), K = make(WGML_F32, kvd, 2, NULL), V = make(WGML_F32, kvd, 2, NULL),
         KC = make(WGML_F32, kvd, n_ctx, NULL), VC = make(WGML_F32, kvd, n_ctx, NULL), O = make(WGML_F32, 16, 2, NULL);
    step(3, 2); /* rows 3 and 4 of a 4-row cache */
    wgml_op_attention(be, &(wgml_attention_args){.q = &Q.t, .k = &K.t, .v = &V.t, .k_cache = &KC.t, .v_cache = &VC.t,
                                        .out = &O.t, .n_head = 2, .n_head_kv = 2, .head_dim = 8, .scale = 1});
    wgml_error err;
    assert_int_equal(be->end(be, &err), WGML_ERR_CONTEXT_FULL);
    tbuf *all[] = {&Q, &K, &V, &KC, &VC, &O};
    for (int i = 0; i < 6; i++) drop(all[i]);
}

/* ---- general attention (ops.h): no cache, bidirectional, seq, pos, mask, cross-attention ---- */

/* The reference: q [n][n_head*hd] and keys, values [n_k][n_kv*hd] as doubles (rotated already);
 * query t sees key j iff the ids agree (seq, kv_seq), position(j) <= position(t) (causal) and
 * the mask entry is not below -1e30 (else it is added). No visible key: zeros. */
typedef struct {
    int n_head, n_kv, hd, n, n_k, causal;
    const int32_t *seq, *kv_seq, *qpos, *kpos;
    const float *mask;
    double scale;
} gen_ref;

static void ref_general(const gen_ref *g, const double *q, const double *k, const double *v, double *out) {
    const int qd = g->n_head * g->hd, kvd = g->n_kv * g->hd;
    double *s = malloc((size_t)g->n_k * sizeof *s);
    for (int t = 0; t < g->n; t++)
        for (int h = 0; h < g->n_head; h++) {
            const int kh = h / (g->n_head / g->n_kv);
            double mx = -INFINITY, sum = 0;
            for (int j = 0; j < g->n_k; j++) {
                const float mk = g->mask ? g->mask[(size_t)t * g->n_k + j] : 0;
                s[j] = -INFINITY;
                if ((g->seq && g->seq[t] != g->kv_seq[j]) || (g->causal && g->kpos[j] > g->qpos[t]) || mk < -1e30f)
                    continue;
                double dot = 0;
                for (int d = 0; d < g->hd; d++) dot += q[t * qd + h * g->hd + d] * k[j * kvd + kh * g->hd + d];
                s[j] = dot * g->scale + mk;
                mx = fmax(mx, s[j]);
            }
            for (int j = 0; j < g->n_k; j++) sum += s[j] = s[j] == -INFINITY ? 0 : exp(s[j] - mx);
            for (int d = 0; d < g->hd; d++) {
                double o = 0;
                for (int j = 0; j < g->n_k; j++) o += s[j] * v[j * kvd + kh * g->hd + d];
                out[t * qd + h * g->hd + d] = sum > 0 ? o / sum : 0;
            }
        }
    free(s);
}

static double *to_double(const float *x, size_t n) {
    double *d = malloc(n * sizeof *d);
    for (size_t i = 0; i < n; i++) d[i] = x[i];
    return d;
}

/* Cross-attention with packed pairs of sequences and a mask, and causal attention over
 * explicit positions (out of order, RoPE) with a mask, against the reference. */
static void test_attention_general_math(void **state) {
    (void)state;
    const int n_head = 4, n_kv = 2, hd = 16, qd = n_head * hd, kvd = n_kv * hd;
    for (int variant = 0; variant < 2; variant++) {
        const int cross = variant == 0, n = cross ? 5 : 6, n_k = cross ? 11 : 6;
        static const int32_t qs[6] = {0, 0, 1, 1, 1, 1}, ks[11] = {0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1};
        static const int32_t pos[6] = {4, 0, 9, 2, 7, 3};
        wgml_rope rope = {.n_rot = hd, .neox = 0, .freq_base = 10000, .freq_scale = 1};
        float *q = randn((size_t)n * qd, 1), *k = randn((size_t)n_k * kvd, 1), *v = randn((size_t)n_k * kvd, 1);
        float *mask = randn((size_t)n * n_k, 1);
        for (int i = 0; i < n * n_k; i++)
            if (i % 5 == 2) mask[i] = i % 2 ? -INFINITY : -3.4028235e38f;
        for (int j = 0; j < n_k; j++) mask[j] = -INFINITY; /* query row 0 sees nothing: zeros */
        tbuf Q = make(WGML_F32, qd, n, q), K = make(WGML_F32, kvd, n_k, k), V = make(WGML_F32, kvd, n_k, v),
             O = make(WGML_F32, qd, n, NULL), M = make(WGML_F32, n_k, n, mask), S = make(WGML_I32, n, 1, qs),
             KS = make(WGML_I32, n_k, 1, ks), P = make(WGML_I32, n, 1, pos);
        step(0, n);
        wgml_op_attention(be, &(wgml_attention_args){.q = &Q.t, .k = &K.t, .v = &V.t, .out = &O.t, .n_head = n_head,
                                                     .n_head_kv = n_kv, .head_dim = hd, .scale = 0.3f,
                                                     .rope = cross ? NULL : &rope, .bidirectional = cross,
                                                     .seq = cross ? &S.t : NULL, .kv_seq = cross ? &KS.t : NULL,
                                                     .pos = cross ? NULL : &P.t, .mask = &M.t});
        end_ok();
        double *qr = to_double(q, (size_t)n * qd), *kr = to_double(k, (size_t)n_k * kvd);
        double *vr = to_double(v, (size_t)n_k * kvd), *want = calloc((size_t)n * qd, sizeof *want);
        if (!cross)
            for (int t = 0; t < n; t++) {
                ref_rope(qr + t * qd, n_head, hd, pos[t], &rope, NULL);
                ref_rope(kr + t * kvd, n_kv, hd, pos[t], &rope, NULL);
            }
        ref_general(&(gen_ref){.n_head = n_head, .n_kv = n_kv, .hd = hd, .n = n, .n_k = n_k, .causal = !cross,
                               .seq = cross ? qs : NULL, .kv_seq = ks, .qpos = pos, .kpos = pos, .mask = mask,
                               .scale = 0.3f},
                    qr, kr, vr, want);
        float got[6 * 64];
        read_f32(&O, got);
        double e = rel_err(got, want, (size_t)n * qd);
        if (e > 1e-6 || getenv("SHOWERR"))
            fprintf(stderr, "general attention (%s): err %g\n", cross ? "cross" : "pos", e);
        assert_true(e <= 1e-6);
        for (int i = 0; i < qd; i++) assert_true(got[i] == 0);
        tbuf *all[] = {&Q, &K, &V, &O, &M, &S, &KS, &P};
        for (int i = 0; i < 8; i++) drop(all[i]);
        free(q), free(k), free(v), free(mask), free(qr), free(kr), free(vr), free(want);
    }
}

/* Three sequences of 1, 5 and 9 rows packed in one step (seq, positions from 0 in each, RoPE)
 * give each sequence's output of that sequence run alone: bidirectional and causal, for
 * grouped and multi-head attention; causal alone also on today's KV-cache path. */
static void test_attention_packed(void **state) {
    (void)state;
    const int lens[3] = {1, 5, 9}, n = 15;
    int32_t seq[15], pos[15];
    for (int s = 0, r = 0; s < 3; s++)
        for (int i = 0; i < lens[s]; i++, r++) seq[r] = s * 7 - 3, pos[r] = i; /* any ids */
    const int heads[][3] = {{8, 2, 8}, {4, 4, 64}};
    for (int hv = 0; hv < 2; hv++) {
        const int n_head = heads[hv][0], n_kv = heads[hv][1], hd = heads[hv][2], qd = n_head * hd, kvd = n_kv * hd;
        wgml_rope rope = {.n_rot = hd, .neox = 1, .freq_base = 10000, .freq_scale = 1};
        float *q = randn((size_t)n * qd, 1), *k = randn((size_t)n * kvd, 1), *v = randn((size_t)n * kvd, 1);
        for (int bidir = 0; bidir < 2; bidir++) {
            tbuf Q = make(WGML_F32, qd, n, q), K = make(WGML_F32, kvd, n, k), V = make(WGML_F32, kvd, n, v),
                 O = make(WGML_F32, qd, n, NULL), S = make(WGML_I32, n, 1, seq), P = make(WGML_I32, n, 1, pos);
            step(0, n);
            wgml_op_attention(be, &(wgml_attention_args){.q = &Q.t, .k = &K.t, .v = &V.t, .out = &O.t,
                                                         .n_head = n_head, .n_head_kv = n_kv, .head_dim = hd,
                                                         .scale = 1.0f / sqrtf((float)hd), .rope = &rope,
                                                         .bidirectional = bidir, .seq = &S.t, .pos = &P.t});
            end_ok();
            float *packed = malloc((size_t)n * qd * sizeof *packed);
            read_f32(&O, packed);
            for (int s = 0, r0 = 0; s < 3; r0 += lens[s], s++) {
                const int len = lens[s];
                for (int fast = 0; fast < 1 + !bidir; fast++) {
                    tbuf q1 = make(WGML_F32, qd, len, q + (size_t)r0 * qd),
                         k1 = make(WGML_F32, kvd, len, k + (size_t)r0 * kvd),
                         v1 = make(WGML_F32, kvd, len, v + (size_t)r0 * kvd), o1 = make(WGML_F32, qd, len, NULL),
                         kc = make(WGML_F32, kvd, len, NULL), vc = make(WGML_F32, kvd, len, NULL);
                    step(0, len); /* alone: positions 0..len-1 from the step */
                    wgml_op_attention(be, &(wgml_attention_args){.q = &q1.t, .k = &k1.t, .v = &v1.t,
                                                                 .k_cache = fast ? &kc.t : NULL,
                                                                 .v_cache = fast ? &vc.t : NULL, .out = &o1.t,
                                                                 .n_head = n_head, .n_head_kv = n_kv, .head_dim = hd,
                                                                 .scale = 1.0f / sqrtf((float)hd), .rope = &rope,
                                                                 .bidirectional = bidir});
                    end_ok();
                    float *alone = malloc((size_t)len * qd * sizeof *alone);
                    read_f32(&o1, alone);
                    double e = 0;
                    for (int i = 0; i < len * qd; i++) e = fmax(e, fabs(alone[i] - packed[(size_t)r0 * qd + i]));
                    if (e > (fast ? 1e-5 : 0) || getenv("SHOWERR"))
                        fprintf(stderr, "packed attention (%s, %d/%d heads, hd %d, sequence %d%s): err %g\n",
                                bidir ? "bidirectional" : "causal", n_head, n_kv, hd, s, fast ? ", KV-cache path" : "",
                                e);
                    assert_true(e <= (fast ? 1e-5 : 0)); /* the same math in the same order: exact */
                    tbuf *all[] = {&q1, &k1, &v1, &o1, &kc, &vc};
                    for (int i = 0; i < 6; i++) drop(all[i]);
                    free(alone);
                }
            }
            tbuf *all[] = {&Q, &K, &V, &O, &S, &P};
            for (int i = 0; i < 6; i++) drop(all[i]);
            free(packed);
        }
        free(q), free(k), free(v);
    }
}

/* The general fields' rules (validate.c) and the positions the CPU checks at run time. */
static void test_attention_general_errors(void **state) {
    (void)state;
    tbuf Q = make(WGML_F32, 16, 3, NULL), K = make(WGML_F32, 16, 3, NULL), V = make(WGML_F32, 16, 3, NULL),
         K5 = make(WGML_F32, 16, 5, NULL), V5 = make(WGML_F32, 16, 5, NULL), O = make(WGML_F32, 16, 3, NULL),
         KC = make(WGML_F32, 16, 8, NULL), VC = make(WGML_F32, 16, 8, NULL), S = make(WGML_I32, 3, 1, NULL),
         S5 = make(WGML_I32, 5, 1, NULL), M = make(WGML_F32, 3, 3, NULL), Q12 = make(WGML_F32, 12, 3, NULL),
         VC6 = make(WGML_F32, 16, 6, NULL), KCH = make(WGML_F16, 16, 8, NULL);
    int32_t bad[3] = {0, 8, 1}, neg[3] = {0, -1, 1};
    tbuf PB = make(WGML_I32, 3, 1, bad), PN = make(WGML_I32, 3, 1, neg);
    const wgml_attention_args base = {.q = &Q.t, .k = &K.t, .v = &V.t, .out = &O.t, .n_head = 2, .n_head_kv = 2,
                                      .head_dim = 8, .scale = 1};
    struct {
        wgml_attention_args a;
        wgml_status st;
        const char *msg;
    } cases[] = {
        {base, WGML_OK, NULL},
        {base, WGML_ERR_INVALID_ARGUMENT, "go together"},                    /* k_cache only */
        {base, WGML_ERR_INVALID_ARGUMENT, "takes no KV cache"},              /* bidirectional with a cache */
        {base, WGML_ERR_INVALID_ARGUMENT, "must be bidirectional"},          /* cross-attention, causal */
        {base, WGML_ERR_INVALID_ARGUMENT, "need the 3 rows of q"},           /* a cache, 5 k rows */
        {base, WGML_ERR_INVALID_ARGUMENT, "the sequence id of each cache"},  /* seq with a cache, no kv_seq */
        {base, WGML_ERR_INVALID_ARGUMENT, "kv_seq needs seq"},               /* kv_seq alone */
        {base, WGML_ERR_INVALID_ARGUMENT, "needs 8"},                        /* kv_seq of 5 for 8 cache rows */
        {base, WGML_ERR_INVALID_ARGUMENT, "needs [3 x 8]"},                  /* a mask of key rows, not cache rows */
        {base, WGML_ERR_INVALID_ARGUMENT, "bidirectional is 2"},             /* bidirectional = 2 */
        {base, WGML_ERR_CONTEXT_FULL, "outside [0, 8)"},                     /* pos 8 in a cache of 8 */
        {base, WGML_ERR_INVALID_ARGUMENT, "outside [0, 1048576)"},           /* pos -1 */
        {base, WGML_OK, NULL},                                               /* cross-attention with ids */
        /* each shape rule names the argument, its shape and what it needs */
        {base, WGML_ERR_INVALID_ARGUMENT, "q 't' has rows of 12 and 3 rows; needs rows of 16 (n_head heads x 8)"},
        {base, WGML_ERR_INVALID_ARGUMENT, "v 't' has rows of 16 and 5 rows; needs rows of 16 (n_head_kv heads x 8) "
                                          "and k's rows"},
        {base, WGML_ERR_INVALID_ARGUMENT, "n_head 3, n_head_kv 2, head_dim 8"},
        {base, WGML_ERR_INVALID_ARGUMENT, "scale 0"},
        {base, WGML_ERR_INVALID_ARGUMENT, "v_cache 't' 6 x 16"},
        {base, WGML_ERR_INVALID_ARGUMENT, "k_cache is F32 and v_cache F16"},
    };
    cases[1].a.k_cache = &KC.t;
    cases[2].a.k_cache = &KC.t, cases[2].a.v_cache = &VC.t, cases[2].a.bidirectional = 1;
    cases[3].a.k = &K5.t, cases[3].a.v = &V5.t;
    cases[4].a.k = &K5.t, cases[4].a.v = &V5.t, cases[4].a.k_cache = &KC.t, cases[4].a.v_cache = &VC.t;
    cases[5].a.k_cache = &KC.t, cases[5].a.v_cache = &VC.t, cases[5].a.seq = &S.t;
    cases[6].a.kv_seq = &S.t;
    cases[7].a.k_cache = &KC.t, cases[7].a.v_cache = &VC.t, cases[7].a.seq = &S.t, cases[7].a.kv_seq = &S5.t;
    cases[8].a.k_cache = &KC.t, cases[8].a.v_cache = &VC.t, cases[8].a.mask = &M.t;
    cases[9].a.bidirectional = 2;
    cases[10].a.k_cache = &KC.t, cases[10].a.v_cache = &VC.t, cases[10].a.pos = &PB.t;
    cases[11].a.pos = &PN.t;
    cases[12].a.k = &K5.t, cases[12].a.v = &V5.t, cases[12].a.bidirectional = 1, cases[12].a.seq = &S.t,
    cases[12].a.kv_seq = &S5.t;
    cases[13].a.q = &Q12.t;
    cases[14].a.v = &V5.t;
    cases[15].a.n_head = 3;
    cases[16].a.scale = 0;
    cases[17].a.k_cache = &KC.t, cases[17].a.v_cache = &VC6.t;
    cases[18].a.k_cache = &KC.t, cases[18].a.v_cache = &KCH.t;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        wgml_error err = {0};
        step(0, 3);
        wgml_op_attention(be, &cases[i].a);
        wgml_status st = be->end(be, &err);
        if (st != cases[i].st || (cases[i].msg && !strstr(err.message, cases[i].msg)))
            fprintf(stderr, "case %zu: status %d, '%s'\n", i, (int)st, st ? err.message : "");
        assert_int_equal(st, cases[i].st);
        if (cases[i].msg) assert_non_null(strstr(err.message, cases[i].msg));
    }
    tbuf *all[] = {&Q, &K, &V, &K5, &V5, &O, &KC, &VC, &S, &S5, &M, &PB, &PN, &Q12, &VC6, &KCH};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) drop(all[i]);
}

/* The other ops' shape and type rules name the op, the argument, the tensor, what it got and what it needs
 * (validate.c), as attention's do above. */
static void test_validation_messages(void **state) {
    (void)state;
    tbuf X = make(WGML_F32, 16, 2, NULL), XH = make(WGML_F16, 16, 2, NULL), W = make(WGML_F32, 16, 8, NULL),
         W6 = make(WGML_F32, 16, 6, NULL), W32 = make(WGML_F32, 32, 8, NULL), O = make(WGML_F32, 8, 2, NULL),
         O3 = make(WGML_F32, 3, 2, NULL), OX = make(WGML_F32, 16, 2, NULL), B5 = make(WGML_F32, 5, 1, NULL),
         N7 = make(WGML_F32, 7, 1, NULL), X48 = make(WGML_F32, 48, 3, NULL), T = make(WGML_F32, 16, 10, NULL),
         I2 = make(WGML_I32, 2, 1, NULL), O16x3 = make(WGML_F32, 16, 3, NULL), X3 = make(WGML_F32, 16, 3, NULL),
         S2 = make(WGML_I32, 2, 1, NULL);
    X.t.name = "x", XH.t.name = "xh", W.t.name = "w", W6.t.name = "w6", W32.t.name = "w32", O.t.name = "o";
    O3.t.name = "o3", OX.t.name = "ox", B5.t.name = "b5", N7.t.name = "n7", X48.t.name = "x48", T.t.name = "table";
    I2.t.name = "ids2", O16x3.t.name = "o16x3", X3.t.name = "x3", S2.t.name = "seq2";
    wgml_rope rope = {.n_rot = 8, .freq_base = 10000, .freq_scale = 1}, rope5 = rope;
    rope5.n_rot = 5;
    const wgml_matmul_args mm = {.x = &X.t, .n_w = 1, .w = {&W.t}, .out = {&O.t}};
    wgml_matmul_args mm_k = mm, mm_out = mm, mm_x = mm, mm_bias = mm, mm_norm = mm, mm_nw = mm, mm_glu = mm,
                     mm_miss = mm;
    mm_k.w[0] = &W32.t;
    mm_out.out[0] = &O3.t;
    mm_x.x = &XH.t;
    mm_bias.bias[0] = &B5.t;
    mm_norm.norm = &N7.t;
    mm_nw.n_w = 0;
    mm_glu.n_w = 2, mm_glu.epilogue = WGML_EPI_SWIGLU, mm_glu.w[1] = &W6.t;
    mm_miss.n_w = 2, mm_miss.out[1] = &O.t;
    const wgml_rms_norm_args rms = {.out = &OX.t, .x = &X.t, .w = &N7.t, .eps = 1e-5f},
                             rms_shape = {.out = &O.t, .x = &X.t, .w = &N7.t, .eps = 1e-5f};
    const wgml_layer_norm_args ln = {.out = &OX.t, .x = &X.t, .w = &N7.t, .eps = 1e-5f};
    const wgml_rope_args rp_x = {.x = &X48.t, .n_head = 4, .head_dim = 8, .rope = &rope},
                         rp_rot = {.x = &X48.t, .n_head = 6, .head_dim = 8, .rope = &rope5};
    const wgml_get_rows_args gr_row = {.out = &O.t, .table = &T.t, .ids = &I2.t},
                             gr_ids = {.out = &O16x3.t, .table = &T.t, .ids = &I2.t};
    const wgml_add_args add = {.out = &OX.t, .a = &X.t, .b = &X3.t};
    const wgml_softmax_args sm = {.out = &OX.t, .x = &I2.t, .scale = 1};
    const wgml_argmax_args am = {.out = &O.t, .x = &X.t};
    const wgml_pool_args pl = {.out = &OX.t, .x = &X.t, .seq = &S2.t, .mode = WGML_POOL_MEAN};
    const wgml_copy_args cp = {.out = &O.t, .x = &X.t};
    const struct {
        wgml_op op;
        const void *args;
        const char *msg;
    } cases[] = {
        {WGML_OP_MATMUL, &mm, NULL},
        {WGML_OP_MATMUL, &mm_k, "matmul: w[0] 'w32' is [8 x 32]; needs rows of 16 (x's row length)"},
        {WGML_OP_MATMUL, &mm_out, "matmul: out[0] 'o3' is [2 x 3]; needs [2 x 8] (x's rows x w[0]'s rows)"},
        {WGML_OP_MATMUL, &mm_x, "matmul: x 'xh' is F16; needs F32"},
        {WGML_OP_MATMUL, &mm_bias, "matmul: bias[0] 'b5' is [1 x 5]; needs rows of 8, the rows of w[0] 'w'"},
        {WGML_OP_MATMUL, &mm_norm, "matmul: norm 'n7' has 7 values; needs 16 (x's row length)"},
        {WGML_OP_MATMUL, &mm_nw, "matmul: n_w is 0 with epilogue STORE; needs 1..3 weights"},
        {WGML_OP_MATMUL, &mm_glu, "matmul: SWIGLU's w[0] 'w' has 8 rows and w[1] 'w6' 6; needs as many"},
        {WGML_OP_MATMUL, &mm_miss, "matmul: w[1] is missing"},
        {WGML_OP_RMS_NORM, &rms, "rms_norm: w 'n7' has rows of 7; needs 16, the row length of x 'x'"},
        {WGML_OP_RMS_NORM, &rms_shape, "rms_norm: out 'o' [2 x 8] and x 'x' [2 x 16] need one shape"},
        {WGML_OP_LAYER_NORM, &ln, "layer_norm: w 'n7' is [1 x 7]; needs one row of 16 values"},
        {WGML_OP_ROPE, &rp_x, "rope: x 'x48' has rows of 48; needs rows of 32 (n_head 4 x head_dim 8)"},
        {WGML_OP_ROPE, &rp_rot, "rope: n_rot 5; needs an even number of dims in 0..8 (head_dim)"},
        {WGML_OP_GET_ROWS, &gr_row, "get_rows: out 'o' is [2 x 8]; needs rows of 16, as table 'table' [10 x 16]"},
        {WGML_OP_GET_ROWS, &gr_ids, "get_rows: ids 'ids2' has 2 ids; needs at least 3 (one per row of out 'o16x3')"},
        {WGML_OP_ADD, &add, "add: b 'x3' is [3 x 16]; needs the shape of a 'x', [2 x 16], or one row of it"},
        {WGML_OP_SOFTMAX, &sm, "softmax: x 'ids2' is I32; needs F32"},
        {WGML_OP_ARGMAX, &am, "argmax: out 'o' is F32 with 16 elements; needs I32 with 2 (one per row of x 'x')"},
        {WGML_OP_POOL, &pl, "pool: seq 'seq2' has 2 offsets; needs 3 (one more than the 2 sequences, out's rows)"},
        {WGML_OP_COPY, &cp, "copy: out 'o' [2 x 8] and x 'x' [2 x 16] need one shape"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        wgml_error err = {0};
        step(0, 2);
        be->run(be, cases[i].op, cases[i].args);
        wgml_status st = be->end(be, &err);
        if ((st == WGML_OK) != !cases[i].msg || (cases[i].msg && !strstr(err.message, cases[i].msg)))
            fprintf(stderr, "case %zu: status %d, '%s'\n", i, (int)st, st ? err.message : "");
        assert_int_equal(st, cases[i].msg ? WGML_ERR_INVALID_ARGUMENT : WGML_OK);
        if (cases[i].msg) assert_non_null(strstr(err.message, cases[i].msg));
    }
    tbuf *all[] = {&X, &XH, &W, &W6, &W32, &O, &O3, &OX, &B5, &N7, &X48, &T, &I2, &O16x3, &X3, &S2};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) drop(all[i]);
}

static void test_elementwise(void **state) {
    (void)state;
    const int n = 37, rows = 3;
    float *a = randn(n * rows, 2), *b = randn(n * rows, 2), *w = randn(n, 1);
    a[5] = 40, a[17] = 40; /* a tie: argmax of row 0 takes the first */
    tbuf A = make(WGML_F32, n, rows, a), B = make(WGML_F32, n, rows, b), W = make(WGML_F32, n, 1, w),
         O = make(WGML_F32, n, rows, NULL), I = make(WGML_I32, rows, 1, NULL);
    float got[111];
    double want[111];
    step(0, rows);
    wgml_op_add(be, &(wgml_add_args){&O.t, &A.t, &B.t});
    end_ok();
    read_f32(&O, got);
    for (int i = 0; i < n * rows; i++) want[i] = (double)a[i] + b[i];
    assert_true(rel_err(got, want, n * rows) < 1e-6);
    step(0, rows);
    wgml_op_swiglu(be, &(wgml_swiglu_args){&O.t, &A.t, &B.t});
    end_ok();
    read_f32(&O, got);
    for (int i = 0; i < n * rows; i++) want[i] = a[i] / (1 + exp(-(double)a[i])) * b[i];
    assert_true(rel_err(got, want, n * rows) < 1e-5);
    step(0, rows);
    wgml_op_rms_norm(be, &(wgml_rms_norm_args){&O.t, &A.t, &W.t, 1e-6f});
    end_ok();
    read_f32(&O, got);
    for (int r = 0; r < rows; r++) {
        double ss = 0;
        for (int i = 0; i < n; i++) ss += (double)a[r * n + i] * a[r * n + i];
        for (int i = 0; i < n; i++) want[r * n + i] = a[r * n + i] / sqrt(ss / n + 1e-6) * w[i];
    }
    assert_true(rel_err(got, want, n * rows) < 1e-5);
    step(0, rows);
    wgml_op_softmax(be, &(wgml_softmax_args){&O.t, &A.t, 0.5f});
    end_ok();
    read_f32(&O, got);
    for (int r = 0; r < rows; r++) {
        double mx = -1e300, s = 0;
        for (int i = 0; i < n; i++) mx = fmax(mx, 0.5 * a[r * n + i]);
        for (int i = 0; i < n; i++) s += exp(0.5 * a[r * n + i] - mx);
        for (int i = 0; i < n; i++) want[r * n + i] = exp(0.5 * a[r * n + i] - mx) / s;
    }
    assert_true(rel_err(got, want, n * rows) < 1e-6);
    step(0, rows);
    wgml_op_argmax(be, &(wgml_argmax_args){&I.t, &A.t});
    end_ok();
    int32_t idx[3];
    assert_int_equal(be->buffer_read(be, I.b, 0, idx, sizeof idx, NULL), WGML_OK);
    assert_int_equal(idx[0], 5);
    for (int r = 1; r < rows; r++) {
        int best = 0;
        for (int i = 1; i < n; i++)
            if (a[r * n + i] > a[r * n + best]) best = i;
        assert_int_equal(idx[r], best);
    }
    tbuf *all[] = {&A, &B, &W, &O, &I};
    for (int i = 0; i < 5; i++) drop(all[i]);
    free(a), free(b), free(w);
}

static void test_get_rows(void **state) {
    (void)state;
    const int K = 256, rows = 10;
    float *tab = randn((size_t)K * rows, 1);
    int32_t ids[4] = {9, 0, 3, 9};
    for (size_t ti = 0; ti < sizeof all_types / sizeof all_types[0]; ti++) {
        uint32_t type = all_types[ti];
        if (!be->supports_type(be, type)) continue;
        size_t row = wgml_row_size(type, K);
        uint8_t *q = malloc(row * rows);
        for (int r = 0; r < rows; r++) wgml_quantize_row(type, tab + r * K, q + r * row, K);
        tbuf T = make(type, K, rows, q), I = make(WGML_I32, 4, 1, ids), O = make(WGML_F32, K, 4, NULL);
        step(0, 4);
        wgml_op_get_rows(be, &(wgml_get_rows_args){&O.t, &T.t, &I.t});
        end_ok();
        float got[4 * 256], want[256];
        read_f32(&O, got);
        for (int i = 0; i < 4; i++) {
            wgml_dequantize_row(type, q + ids[i] * row, want, K);
            assert_memory_equal(got + i * K, want, K * sizeof(float));
        }
        /* an id outside the table is an error, not a read out of bounds */
        int32_t bad[4] = {0, 10, 0, 0};
        assert_int_equal(be->buffer_write(be, I.b, 0, bad, sizeof bad, NULL), WGML_OK);
        step(0, 4);
        wgml_op_get_rows(be, &(wgml_get_rows_args){&O.t, &T.t, &I.t});
        wgml_error err;
        assert_int_equal(be->end(be, &err), WGML_ERR_INVALID_ARGUMENT);
        drop(&T), drop(&I), drop(&O);
        free(q);
    }
    free(tab);
}

/* Weights made by weight_create, some rewritten into their kernels' own layout
 * (kernels.h, `packed`; copied, so not used in place), give the matmul and
 * get_rows results of the same bytes in GGUF's layout in a plain buffer, bit
 * for bit: from memory and streamed, with and without a tail of blocks past
 * the last group of 8, for one token (decode) and several. */
static void test_weights_own_layout(void **state) {
    (void)state;
    const int Ks[] = {512, 288}, M = 12, n_tok[] = {1, 5, 12}; /* 12: the int8 GEMM's unpacking of each layout */
    int32_t ids[3] = {11, 0, 4};
    for (size_t ti = 0; ti < sizeof all_types / sizeof all_types[0]; ti++) {
        const uint32_t type = all_types[ti];
        if (!be->supports_type(be, type)) continue;
        const cpu_type_kernels *k = cpu_kernels_get(type);
        for (size_t ki = 0; ki < 2; ki++) {
            const int K = Ks[ki];
            if (K % wgml_dtype_get(type)->block_size) continue;
            const size_t row = wgml_row_size(type, K);
            float *wf = randn((size_t)K * M, 0.5f), *x = randn((size_t)K * 12, 1.0f);
            uint8_t *q = malloc(row * M);
            for (int r = 0; r < M; r++) wgml_quantize_row(type, wf + (size_t)r * K, q + r * row, K);
            tbuf W[3] = {make(type, K, M, q), make_weight(type, K, M, q, 0), make_weight(type, K, M, q, 1)};
            /* packed weights are copies; the others read the caller's bytes in place */
            assert_int_equal(be->weight_in_place(be, W[1].b), !(k->packed && K % 32 == 0));
            float got[3][12 * 12], rows[3][3 * 512];
            for (int ni = 0; ni < 3; ni++) {
                const int n = n_tok[ni];
                for (int v = 0; v < 3; v++) {
                    tbuf X = make(WGML_F32, K, n, x), O = make(WGML_F32, M, n, NULL);
                    step(0, n);
                    wgml_op_matmul(be, &(wgml_matmul_args){.x = &X.t, .n_w = 1, .w = {&W[v].t}, .out = {&O.t}});
                    end_ok();
                    read_f32(&O, got[v]);
                    drop(&X), drop(&O);
                }
                for (int v = 1; v < 3; v++) assert_memory_equal(got[v], got[0], (size_t)M * n * sizeof(float));
            }
            for (int v = 0; v < 3; v++) {
                tbuf I = make(WGML_I32, 3, 1, ids), O = make(WGML_F32, K, 3, NULL);
                step(0, 3);
                wgml_op_get_rows(be, &(wgml_get_rows_args){&O.t, &W[v].t, &I.t});
                end_ok();
                read_f32(&O, rows[v]);
                drop(&I), drop(&O);
            }
            for (int v = 1; v < 3; v++) assert_memory_equal(rows[v], rows[0], (size_t)K * 3 * sizeof(float));
            for (int v = 0; v < 3; v++) drop(&W[v]);
            free(wf), free(x), free(q);
        }
    }
}

/* A batch-invariant matmul (ops.h) of n token rows gives each row the bits a
 * matmul of that row alone gives (the kernels' dot_rows against dot), for
 * every weight type, ragged K and row counts (more than a pass of the
 * kernels, and than one call of them), with a norm prologue and bias, the ADD
 * and SWIGLU epilogues; weights made by weight_create (Q4_0 in its own layout). */
static void test_matmul_batch_invariant(void **state) {
    (void)state;
    const tu_rng saved = rng; /* the tests after this one see the numbers they saw without it */
    const int Ks[] = {77, 288, 512, 768}, M = 37, n_max = 21;
    const int ns[] = {2, 3, 4, 5, 8, 9, 17, 21};
    const float eps = 1e-5f;
    for (size_t ti = 0; ti < sizeof all_types / sizeof all_types[0]; ti++) {
        const uint32_t type = all_types[ti];
        if (!be->supports_type(be, type)) continue;
        for (size_t ki = 0; ki < sizeof Ks / sizeof Ks[0]; ki++) {
            const int K = Ks[ki];
            if (K % wgml_dtype_get(type)->block_size) continue;
            const size_t row = wgml_row_size(type, K);
            float *wf = randn((size_t)K * M * 2, 0.5f), *x = randn((size_t)K * n_max, 1.0f), *g = randn(K, 1.0f);
            float *bias = randn(M, 1.0f), *init = randn((size_t)M * n_max, 1.0f);
            uint8_t *q = malloc(row * M * 2);
            for (int r = 0; r < 2 * M; r++) wgml_quantize_row(type, wf + (size_t)r * K, q + r * row, K);
            tbuf W0 = make_weight(type, K, M, q, 0), W1 = make_weight(type, K, M, q + row * M, 0);
            tbuf G = make(WGML_F32, K, 1, g), B = make(WGML_F32, M, 1, bias);
            float *alone = malloc((size_t)M * n_max * sizeof(float)), *together = malloc((size_t)M * n_max * sizeof(float));
            for (int epi = 0; epi < 3; epi++) { /* norm + bias; ADD; SWIGLU */
                /* each row alone */
                for (int i = 0; i < n_max; i++) {
                    tbuf X = make(WGML_F32, K, 1, x + (size_t)i * K), O = make(WGML_F32, M, 1, init + (size_t)i * M);
                    wgml_matmul_args a = {.x = &X.t, .n_w = 1, .w = {&W0.t}, .out = {&O.t}, .batch_invariant = 1};
                    if (epi == 0) a.norm = &G.t, a.eps = eps, a.bias[0] = &B.t;
                    if (epi == 1) a.epilogue = WGML_EPI_ADD;
                    if (epi == 2) a.n_w = 2, a.w[1] = &W1.t, a.bias[1] = &B.t, a.epilogue = WGML_EPI_SWIGLU;
                    step(0, 1);
                    wgml_op_matmul(be, &a);
                    end_ok();
                    read_f32(&O, alone + (size_t)i * M);
                    drop(&X), drop(&O);
                }
                for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
                    const int n = ns[ni];
                    tbuf X = make(WGML_F32, K, n, x), O = make(WGML_F32, M, n, init);
                    wgml_matmul_args a = {.x = &X.t, .n_w = 1, .w = {&W0.t}, .out = {&O.t}, .batch_invariant = 1};
                    if (epi == 0) a.norm = &G.t, a.eps = eps, a.bias[0] = &B.t;
                    if (epi == 1) a.epilogue = WGML_EPI_ADD;
                    if (epi == 2) a.n_w = 2, a.w[1] = &W1.t, a.bias[1] = &B.t, a.epilogue = WGML_EPI_SWIGLU;
                    step(0, n);
                    wgml_op_matmul(be, &a);
                    end_ok();
                    read_f32(&O, together);
                    for (int i = 0; i < n; i++)
                        if (memcmp(together + (size_t)i * M, alone + (size_t)i * M, (size_t)M * sizeof(float)))
                            fail_msg("matmul %s K=%d epilogue %d: row %d of %d differs from the row alone",
                                     wgml_dtype_name(type), K, epi, i, n);
                    drop(&X), drop(&O);
                }
            }
            drop(&W0), drop(&W1), drop(&G), drop(&B);
            free(wf), free(x), free(g), free(bias), free(init), free(q), free(alone), free(together);
        }
    }
    rng = saved;
}

static void test_shape_errors(void **state) {
    (void)state;
    tbuf W = make(WGML_F32, 32, 8, NULL), X = make(WGML_F32, 16, 2, NULL), O = make(WGML_F32, 8, 2, NULL);
    step(0, 2);
    wgml_op_matmul(be, &(wgml_matmul_args){.x = &X.t, .n_w = 1, .w = {&W.t}, .out = {&O.t}});
    wgml_error err;
    assert_int_equal(be->end(be, &err), WGML_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "matmul"));
    /* a view past the end of its buffer */
    wgml_tensor past = wgml_tensor_rows(&O.t, 1, 2);
    step(0, 2);
    wgml_op_add(be, &(wgml_add_args){&past, &O.t, &O.t});
    assert_int_equal(be->end(be, &err), WGML_ERR_INVALID_ARGUMENT);
    drop(&W), drop(&X), drop(&O);
}

/* ---- the encoders' ops (cpu_ops_nn.c) against double-precision math ---- */

/* A vector of n f32 values as a weight (weight_create) or an activation. */
static tbuf make_vec(int as_weight, int n, const float *v) {
    return as_weight ? make_weight(WGML_F32, n, 1, (const uint8_t *)v, 0) : make(WGML_F32, n, 1, v);
}

/* (x - mean) / sqrt(var + eps) * w + b of each row, biased variance; w, b may be NULL. */
static void ref_layer_norm(const float *x, const float *w, const float *b, int n, int rows, double eps, double *out) {
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * n;
        double mean = 0, var = 0;
        for (int i = 0; i < n; i++) mean += xr[i];
        mean /= n;
        for (int i = 0; i < n; i++) var += (xr[i] - mean) * (xr[i] - mean);
        var /= n;
        for (int i = 0; i < n; i++)
            out[(size_t)r * n + i] = (xr[i] - mean) / sqrt(var + eps) * (w ? w[i] : 1.0) + (b ? b[i] : 0.0);
    }
}

/* With weights, with activations (as AdaLayerNorm computes them), without w and b, in place. */
static void test_layer_norm(void **state) {
    (void)state;
    const int n = 37, rows = 3;
    float *x = randn((size_t)n * rows, 2), *w = randn(n, 1), *b = randn(n, 1), got[111];
    double want[111];
    for (int i = 0; i < n * rows; i++) x[i] += 50; /* far from 0: the variance must not cancel */
    for (int v = 0; v < 4; v++) {
        tbuf X = make(WGML_F32, n, rows, x), O = make(WGML_F32, n, rows, NULL), W = make_vec(v == 0, n, w),
             B = make_vec(v == 0, n, b);
        int in_place = v == 3, with = v < 2 || in_place;
        step(0, rows);
        wgml_op_layer_norm(be, &(wgml_layer_norm_args){in_place ? &X.t : &O.t, &X.t, with ? &W.t : NULL,
                                                       with ? &B.t : NULL, 1e-5f});
        end_ok();
        read_f32(in_place ? &X : &O, got);
        ref_layer_norm(x, with ? w : NULL, with ? b : NULL, n, rows, 1e-5, want);
        double e = rel_err(got, want, (size_t)n * rows);
        if (e > 1e-6) fprintf(stderr, "layer_norm variant %d: err %g\n", v, e);
        assert_true(e < 1e-6);
        drop(&X), drop(&O), drop(&W), drop(&B);
    }
    /* torch.nn.LayerNorm(4) of [1, 2, 3, 4] (eps 1e-5): (x - 2.5) / sqrt(1.25 + 1e-5) */
    const float four[4] = {1, 2, 3, 4};
    tbuf X = make(WGML_F32, 4, 1, four), O = make(WGML_F32, 4, 1, NULL);
    step(0, 1);
    wgml_op_layer_norm(be, &(wgml_layer_norm_args){&O.t, &X.t, NULL, NULL, 1e-5f});
    end_ok();
    read_f32(&O, got);
    assert_float_equal(got[0], -1.3416355f, 2e-6);
    assert_float_equal(got[3], 1.3416355f, 2e-6);
    drop(&X), drop(&O);
    free(x), free(w), free(b);
}

static void test_l2_norm(void **state) {
    (void)state;
    const int n = 1000, rows = 3;
    float *x = randn((size_t)n * rows, 3), *got = malloc((size_t)n * rows * sizeof *got);
    double *want = malloc((size_t)n * rows * sizeof *want);
    for (int i = 0; i < n; i++) x[2 * n + i] = 0; /* a zero row stays zero (eps) */
    tbuf X = make(WGML_F32, n, rows, x), O = make(WGML_F32, n, rows, NULL);
    step(0, rows);
    wgml_op_l2_norm(be, &(wgml_l2_norm_args){&O.t, &X.t, 1e-12f});
    end_ok();
    read_f32(&O, got);
    for (int r = 0; r < rows; r++) {
        double ss = 0;
        for (int i = 0; i < n; i++) ss += (double)x[r * n + i] * x[r * n + i];
        for (int i = 0; i < n; i++) want[r * n + i] = x[r * n + i] / fmax(sqrt(ss), 1e-12);
    }
    assert_true(rel_err(got, want, (size_t)n * rows) < 1e-6);
    for (int i = 0; i < n; i++) assert_true(got[2 * n + i] == 0);
    /* in place */
    step(0, rows);
    wgml_op_l2_norm(be, &(wgml_l2_norm_args){&X.t, &X.t, 1e-12f});
    end_ok();
    read_f32(&X, got);
    assert_true(rel_err(got, want, (size_t)n * rows) < 1e-6);
    drop(&X), drop(&O);
    free(x), free(got), free(want);
}

/* Each kind of unary against its formula in double (erf, tanh, exp, sin from libm). */
static double ref_unary(wgml_unary_kind kind, double x, double a, double b, double v) {
    switch (kind) {
    case WGML_UNARY_GELU: return 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    case WGML_UNARY_GELU_ERF: return 0.5 * x * (1 + erf(x / sqrt(2.0)));
    case WGML_UNARY_TANH: return tanh(x);
    case WGML_UNARY_SCALE: return a * x + b;
    case WGML_UNARY_SIGMOID: return 1 / (1 + exp(-x));
    case WGML_UNARY_LEAKY_RELU: return x > 0 ? x : a * x;
    case WGML_UNARY_SIN: return sin(x);
    case WGML_UNARY_EXP: return exp(x);
    case WGML_UNARY_SNAKE: return x + pow(sin(v * x), 2) / v;
    case WGML_UNARY_GELU_QUICK: return x / (1 + exp(-1.702 * x));
    default: return NAN;
    }
}

static void test_unary(void **state) {
    (void)state;
    const int n = 37, rows = 4;
    float *x = randn((size_t)n * rows, 3), *v = randn(n, 0.3f), got[148];
    double want[148];
    x[0] = 1, x[1] = -1, x[2] = 0, x[3] = 12, x[4] = -12, x[5] = 90, x[6] = -90; /* values known, and tails */
    for (int i = 0; i < n; i++) v[i] += 1;
    tbuf X = make(WGML_F32, n, rows, x), O = make(WGML_F32, n, rows, NULL), V = make_vec(1, n, v);
    for (int kind = 0; kind < WGML_UNARY_COUNT; kind++) {
        const float a = kind == WGML_UNARY_LEAKY_RELU ? 0.2f : 1.5f, b = -0.25f;
        int snake = kind == WGML_UNARY_SNAKE;
        step(0, rows);
        wgml_op_unary(be, &(wgml_unary_args){&O.t, &X.t, (wgml_unary_kind)kind, a, b, snake ? &V.t : NULL});
        end_ok();
        read_f32(&O, got);
        for (int i = 0; i < n * rows; i++) want[i] = ref_unary((wgml_unary_kind)kind, x[i], a, b, v[i % n]);
        /* exp(90) is beyond f32: inf on both sides, and rel_err would be NaN */
        if (kind == WGML_UNARY_EXP) {
            assert_true(isinf(got[5]));
            want[5] = got[5] = 0;
        }
        for (int i = 0; i < n * rows; i++) {
            /* one f32 rounding of the double result; Snake (x + sin^2(v x) / v, a float polynomial on
             * AVX-512) a few ulp of its larger term, which the sum can cancel */
            double scale = fabs(want[i]), tol = 2e-7;
            if (snake) {
                double s = sin((double)v[i % n] * x[i]);
                scale = fabs(x[i]) + s * s / fabs(v[i % n]), tol = 4e-7;
            }
            double e = fabs(got[i] - want[i]) / fmax(1, scale);
            if (e > tol) fprintf(stderr, "unary kind %d x=%g: %.9g, want %.9g\n", kind, x[i], got[i], want[i]);
            assert_true(e <= tol);
        }
    }
    /* known values: GELU(1) exact 0.8413447460685429, tanh form 0.8411919906082768 */
    step(0, rows);
    wgml_op_unary(be, &(wgml_unary_args){.out = &O.t, .x = &X.t, .kind = WGML_UNARY_GELU_ERF});
    end_ok();
    read_f32(&O, got);
    assert_float_equal(got[0], 0.84134475f, 1e-7);
    step(0, rows);
    wgml_op_unary(be, &(wgml_unary_args){.out = &X.t, .x = &X.t, .kind = WGML_UNARY_GELU}); /* in place */
    end_ok();
    read_f32(&X, got);
    assert_float_equal(got[0], 0.84119199f, 1e-7);
    for (int i = 0; i < n * rows; i++) want[i] = ref_unary(WGML_UNARY_GELU, x[i], 0, 0, 0);
    assert_true(rel_err(got, want, (size_t)n * rows) < 1e-7);
    drop(&X), drop(&O), drop(&V);
    free(x), free(v);
}

/* add and mul: b one row (weight or activation) for every row, b of a's shape, in place. */
static void test_broadcast(void **state) {
    (void)state;
    const int n = 37, rows = 3;
    float *a = randn((size_t)n * rows, 2), *b = randn((size_t)n * rows, 2), got[111];
    double want[111];
    for (int mul = 0; mul < 2; mul++) {
        for (int v = 0; v < 4; v++) { /* b: one row as a weight, as an activation; a's shape; in place */
            int one = v < 2, in_place = v == 3;
            tbuf A = make(WGML_F32, n, rows, a), O = make(WGML_F32, n, rows, NULL),
                 B = one ? make_vec(v == 0, n, b) : make(WGML_F32, n, rows, b);
            const wgml_tensor *out = in_place ? &A.t : &O.t;
            step(0, rows);
            if (mul) wgml_op_mul(be, &(wgml_mul_args){out, &A.t, &B.t});
            else wgml_op_add(be, &(wgml_add_args){out, &A.t, &B.t});
            end_ok();
            read_f32(in_place ? &A : &O, got);
            for (int r = 0; r < rows; r++)
                for (int i = 0; i < n; i++) {
                    double y = b[(one ? 0 : r * n) + i];
                    want[r * n + i] = mul ? a[r * n + i] * y : a[r * n + i] + y;
                }
            assert_true(rel_err(got, want, (size_t)n * rows) < 1e-7);
            drop(&A), drop(&O), drop(&B);
        }
    }
    free(a), free(b);
}

static void test_pool(void **state) {
    (void)state;
    const int d = 37, rows = 9, n_seq = 3;
    const int32_t seq[4] = {0, 1, 4, 9}; /* lengths 1, 3, 5 */
    float *x = randn((size_t)d * rows, 2), got[3 * 37];
    double want[3 * 37];
    tbuf X = make(WGML_F32, d, rows, x), S = make(WGML_I32, 4, 1, seq), O = make(WGML_F32, d, n_seq, NULL);
    for (int mode = 0; mode < 3; mode++) {
        step(0, rows);
        wgml_op_pool(be, &(wgml_pool_args){&O.t, &X.t, &S.t, (wgml_pool_mode)mode});
        end_ok();
        read_f32(&O, got);
        for (int s = 0; s < n_seq; s++)
            for (int c = 0; c < d; c++) {
                double m = 0;
                for (int r = seq[s]; r < seq[s + 1]; r++) m += x[r * d + c];
                want[s * d + c] = mode == WGML_POOL_MEAN    ? m / (seq[s + 1] - seq[s])
                                  : mode == WGML_POOL_FIRST ? x[seq[s] * d + c]
                                                            : x[(seq[s + 1] - 1) * d + c];
            }
        assert_true(rel_err(got, want, (size_t)d * n_seq) < 1e-7);
    }
    /* a single row, a single sequence */
    tbuf S1 = make(WGML_I32, 2, 1, (const int32_t[]){0, 1});
    wgml_tensor x1 = wgml_tensor_rows(&X.t, 0, 1), o1 = wgml_tensor_rows(&O.t, 0, 1);
    step(0, 1);
    wgml_op_pool(be, &(wgml_pool_args){&o1, &x1, &S1.t, WGML_POOL_MEAN});
    end_ok();
    read_f32(&O, got);
    assert_memory_equal(got, x, d * sizeof(float));
    /* tables that do not start at 0, do not increase, or do not end at the rows: errors */
    const int32_t bad[3][4] = {{1, 2, 4, 9}, {0, 4, 4, 9}, {0, 1, 4, 8}};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(be->buffer_write(be, S.b, 0, bad[i], sizeof bad[i], NULL), WGML_OK);
        step(0, rows);
        wgml_op_pool(be, &(wgml_pool_args){&O.t, &X.t, &S.t, WGML_POOL_MEAN});
        wgml_error err;
        assert_int_equal(be->end(be, &err), WGML_ERR_INVALID_ARGUMENT);
        assert_non_null(strstr(err.message, "pool"));
    }
    drop(&X), drop(&S), drop(&O), drop(&S1);
    free(x);
}

/* Arguments the encoders' ops refuse: partial overlaps, vectors of the wrong length, a missing parameter. */
static void test_nn_errors(void **state) {
    (void)state;
    tbuf X = make(WGML_F32, 8, 4, NULL), W = make(WGML_F32, 7, 1, NULL), O = make(WGML_F32, 8, 4, NULL);
    wgml_tensor rows_0_2 = wgml_tensor_rows(&X.t, 0, 3), rows_1_3 = wgml_tensor_rows(&X.t, 1, 3);
    wgml_error err;
    step(0, 3);
    wgml_op_unary(be, &(wgml_unary_args){.out = &rows_1_3, .x = &rows_0_2, .kind = WGML_UNARY_TANH}); /* shifted */
    assert_int_equal(be->end(be, &err), WGML_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "overlaps"));
    step(0, 4);
    wgml_op_layer_norm(be, &(wgml_layer_norm_args){&O.t, &X.t, &W.t, NULL, 1e-5f});
    assert_int_equal(be->end(be, &err), WGML_ERR_INVALID_ARGUMENT);
    step(0, 4);
    wgml_op_unary(be, &(wgml_unary_args){.out = &O.t, .x = &X.t, .kind = WGML_UNARY_SNAKE});
    assert_int_equal(be->end(be, &err), WGML_ERR_INVALID_ARGUMENT);
    step(0, 4);
    wgml_op_add(be, &(wgml_add_args){&O.t, &X.t, &rows_0_2}); /* b: neither a's shape nor one row */
    assert_int_equal(be->end(be, &err), WGML_ERR_INVALID_ARGUMENT);
    wgml_tensor past = wgml_tensor_rows(&O.t, 2, 4); /* a view past the end of its buffer */
    step(0, 4);
    wgml_op_unary(be, &(wgml_unary_args){.out = &past, .x = &X.t, .kind = WGML_UNARY_EXP});
    assert_int_equal(be->end(be, &err), WGML_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "exceeds"));
    drop(&X), drop(&W), drop(&O);
}

/* copy with f16 on either side: f32 -> f16 rounds to nearest even (the bits of wgml_f32_to_f16; contiguous
 * rows through the SIMD conversion, strided ones element by element), f16 -> f32 and f16 -> f16 exact. */
static void test_copy_f16(void **state) {
    (void)state;
    enum { R = 5, C = 40 }; /* rows longer than a SIMD register, with a tail */
    float xv[R * C];
    const float edge[] = {1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, 65504.0f, 65520.0f, -65520.0f, 0x1p-25f,
                          0x1.8p-25f, -0.0f, 6.1e-5f, 3.0e-8f, 2049.0f, 2051.0f, INFINITY, 1.0f / 3};
    for (int i = 0; i < R * C; i++) xv[i] = i < (int)(sizeof edge / sizeof *edge) ? edge[i] : tu_normal(&rng) * 100;
    tbuf X = make(WGML_F32, C, R, xv), H = make(WGML_F16, C, R, NULL), T = make(WGML_F16, R, C, NULL),
         F = make(WGML_F32, 1, C, NULL), G = make(WGML_F16, 1, C, NULL);
    wgml_error err;
    uint16_t h[R * C], t[R * C], g[C];
    float f[C];
    step(0, R);
    wgml_op_copy(be, &(wgml_copy_args){&H.t, &X.t}); /* contiguous rows */
    wgml_tensor xt = wgml_tensor_transpose(&X.t);
    wgml_op_copy(be, &(wgml_copy_args){&T.t, &xt}); /* strided: [C][R] */
    assert_int_equal(be->end(be, &err), WGML_OK);
    assert_int_equal(be->buffer_read(be, H.b, 0, h, sizeof h, &err), WGML_OK);
    assert_int_equal(be->buffer_read(be, T.b, 0, t, sizeof t, &err), WGML_OK);
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) {
            assert_int_equal(h[r * C + c], wgml_f32_to_f16(xv[r * C + c]));
            assert_int_equal(t[c * R + r], wgml_f32_to_f16(xv[r * C + c]));
        }
    assert_int_equal(h[0], 0x3C00); /* a tie to even: 1 */
    assert_int_equal(h[1], 0x3C02);
    assert_int_equal(h[3], 0x7C00); /* past the largest f16: infinity */
    /* column 3 of the f16 rows (a 2-byte element, C * 2 bytes apart) into f32 and into f16 */
    wgml_tensor hc = wgml_tensor_transpose(&H.t);
    hc = wgml_tensor_rows(&hc, 3, 1);
    hc.ne[0] = R;
    wgml_tensor fo = {.type = WGML_F32, .ne = {R, 1, 1, 1}, .buf = F.b, .name = "f"};
    wgml_tensor go = {.type = WGML_F16, .ne = {R, 1, 1, 1}, .buf = G.b, .name = "g"};
    step(0, 1);
    wgml_op_copy(be, &(wgml_copy_args){&fo, &hc});
    wgml_op_copy(be, &(wgml_copy_args){&go, &hc});
    assert_int_equal(be->end(be, &err), WGML_OK);
    assert_int_equal(be->buffer_read(be, F.b, 0, f, R * sizeof *f, &err), WGML_OK);
    assert_int_equal(be->buffer_read(be, G.b, 0, g, R * sizeof *g, &err), WGML_OK);
    for (int r = 0; r < R; r++) {
        assert_int_equal(g[r], h[r * C + 3]);
        const float want = wgml_f16_to_f32(h[r * C + 3]);
        assert_memory_equal(&f[r], &want, sizeof want);
    }
    /* an f16 view needs strides of whole f16 elements */
    wgml_tensor odd = wgml_tensor_view(&H.t, (const int64_t[4]){3, 2, 1, 1}, (const size_t[4]){3, 2 * C, 0, 0}, 0);
    wgml_tensor o3 = {.type = WGML_F32, .ne = {3, 2, 1, 1}, .buf = F.b, .name = "f"};
    step(0, 2);
    wgml_op_copy(be, &(wgml_copy_args){&o3, &odd});
    assert_int_equal(be->end(be, &err), WGML_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "multiple of 2"));
    drop(&X), drop(&H), drop(&T), drop(&F), drop(&G);
}

/* The profile's arithmetic (2 n K M per matmul, summed per kernel name), the bf16 path named as such
 * where it is taken, and the arithmetic peak the GEMMs' share is measured against. */
static void test_profile_flop(void **state) {
    (void)state;
    enum { K = 64, M = 40, N = 48 };
    float *w = randn((size_t)K * M, 0.1f), *x = randn((size_t)K * N, 1.0f);
    tbuf W = make_weight(WGML_F32, K, M, (const uint8_t *)w, 0), X = make(WGML_F32, K, N, x), O = make(WGML_F32, M, N, NULL);
    wgml_error err;
    be->set_profiling(be, 1);
    for (int mode = 0; mode < 2; mode++) {
        step(0, N);
        wgml_op_matmul(be, &(wgml_matmul_args){.x = &X.t, .n_w = 1, .w = {&W.t}, .out = {&O.t}, .f32_act = 1,
                                               .bf16_act = mode == 1});
        assert_int_equal(be->end(be, &err), WGML_OK);
    }
    wgml_kernel_time t[16];
    const int n = be->get_kernel_times(be, t, 16);
    double flop = 0;
    int pairs = 0;
    for (int i = 0; i < n; i++) {
        flop += t[i].flop;
        if (strstr(t[i].name, "bf16 pairs")) pairs = 1, assert_true(t[i].calls == 1);
        if (!strncmp(t[i].name, "matmul", 6)) assert_true(t[i].flop > 0);
    }
    assert_true(flop == 2.0 * 2 * N * K * M);
    assert_int_equal(pairs, cpu_gemm_bf16_ok()); /* the second took bf16 pairs where they were chosen */
    be->set_profiling(be, 0);
    double f32 = 0, bf16 = 0;
    assert_non_null(be->measure_fma_peak);
    assert_int_equal(be->measure_fma_peak(be, &f32, &bf16, &err), WGML_OK);
    fprintf(stderr, "FMA peak: %.0f GFLOP/s f32, %.0f bf16 pairs (2 threads)\n", f32, bf16);
    assert_true(f32 > 0 && f32 < 1e7); /* measured, finite (the scalar loop under ASan: well below 1 GFLOP/s) */
    assert_int_equal(bf16 > 0, cpu_kernels_gemm_bf16() != NULL);
    drop(&W), drop(&X), drop(&O);
    free(w), free(x);
}

/* Strided views (tensor.h): the helpers' strides and spans, copy through them, the ops that refuse them. */
static void test_views(void **state) {
    (void)state;
    float xv[4 * 6], got[4 * 6];
    for (int i = 0; i < 24; i++) xv[i] = (float)i;
    tbuf X = make(WGML_F32, 6, 4, xv), O = make(WGML_F32, 6, 4, NULL);
    wgml_error err;
    /* a contiguous [4][6]: strides 4, 24, 96; all-zero nb reads as contiguous */
    assert_int_equal(wgml_tensor_stride(&X.t, 0), 4);
    assert_int_equal(wgml_tensor_stride(&X.t, 1), 24);
    assert_int_equal(wgml_tensor_stride(&X.t, 2), 96);
    assert_true(wgml_tensor_is_contiguous(&X.t));
    assert_int_equal(wgml_tensor_extent(&X.t), 96);
    wgml_tensor T = wgml_tensor_transpose(&X.t);
    assert_int_equal(T.ne[0], 4);
    assert_int_equal(T.ne[1], 6);
    assert_int_equal(T.nb[0], 24);
    assert_int_equal(T.nb[1], 4);
    assert_false(wgml_tensor_is_contiguous(&T));
    assert_int_equal(wgml_tensor_extent(&T), 96);
    wgml_tensor C = wgml_tensor_cols(&X.t, 2, 3); /* columns 2..4 */
    assert_int_equal(C.offset, 8);
    assert_int_equal(wgml_tensor_extent(&C), 3 * 24 + 12);
    wgml_tensor R = wgml_tensor_rows(&C, 1, 2); /* keeps the row stride */
    assert_int_equal(R.offset, 8 + 24);
    assert_int_equal(R.nb[1], 24);
    wgml_tensor one = wgml_tensor_rows(&X.t, 1, 1), B = wgml_tensor_broadcast_rows(&one, 4);
    assert_int_equal(B.nb[1], 0);
    assert_false(wgml_tensor_is_contiguous(&B));
    assert_int_equal(wgml_tensor_extent(&B), 24);
    /* a transpose of a transpose is the tensor itself, strides spelled out: contiguous */
    wgml_tensor TT = wgml_tensor_transpose(&T);
    assert_true(wgml_tensor_is_contiguous(&TT));

    /* copy: the transpose (out [6][4]) */
    wgml_tensor out = {.type = WGML_F32, .ne = {4, 6, 1, 1}, .buf = O.b, .name = "out"};
    step(0, 6);
    wgml_op_copy(be, &(wgml_copy_args){&out, &T});
    assert_int_equal(be->end(be, &err), WGML_OK);
    read_f32(&O, got);
    for (int r = 0; r < 6; r++)
        for (int c = 0; c < 4; c++) assert_float_equal(got[r * 4 + c], xv[c * 6 + r], 0);
    /* columns 2..4 of rows 1..2, and a broadcast row */
    out = (wgml_tensor){.type = WGML_F32, .ne = {3, 2, 1, 1}, .buf = O.b, .name = "out"};
    step(0, 2);
    wgml_op_copy(be, &(wgml_copy_args){&out, &R});
    assert_int_equal(be->end(be, &err), WGML_OK);
    read_f32(&O, got);
    for (int r = 0; r < 2; r++)
        for (int c = 0; c < 3; c++) assert_float_equal(got[r * 3 + c], xv[(1 + r) * 6 + 2 + c], 0);
    step(0, 4);
    wgml_op_copy(be, &(wgml_copy_args){&O.t, &B});
    assert_int_equal(be->end(be, &err), WGML_OK);
    read_f32(&O, got);
    for (int i = 0; i < 24; i++) assert_float_equal(got[i], xv[6 + i % 6], 0);

    /* a strided view anywhere but copy's input */
    wgml_tensor Ox = {.type = WGML_F32, .ne = {4, 6, 1, 1}, .buf = O.b, .name = "out"};
    step(0, 6);
    wgml_op_unary(be, &(wgml_unary_args){.out = &Ox, .x = &T, .kind = WGML_UNARY_TANH});
    assert_int_equal(be->end(be, &err), WGML_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "strided view"));
    assert_non_null(strstr(err.message, "wgml_op_copy"));
    /* copy: a stride of 2 bytes; out overlapping x; x's span past its buffer; shapes */
    wgml_tensor odd = wgml_tensor_view(&X.t, (const int64_t[4]){3, 2, 1, 1}, (const size_t[4]){2, 24, 0, 0}, 0);
    wgml_tensor o32 = {.type = WGML_F32, .ne = {3, 2, 1, 1}, .buf = O.b, .name = "out"};
    step(0, 2);
    wgml_op_copy(be, &(wgml_copy_args){&o32, &odd});
    assert_int_equal(be->end(be, &err), WGML_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "multiple of 4"));
    wgml_tensor in_x = wgml_tensor_rows(&X.t, 3, 1);
    in_x.ne[0] = 4; /* [1][4] at byte 72: column 0 of X (bytes 0, 24, 48, 72) reaches it */
    step(0, 1);
    wgml_op_copy(be, &(wgml_copy_args){&in_x, &(wgml_tensor){.type = WGML_F32, .ne = {4, 1, 1, 1}, .buf = X.b,
                                                             .nb = {24, 4, 96, 96}}});
    assert_int_equal(be->end(be, &err), WGML_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "overlaps"));
    wgml_tensor past = wgml_tensor_view(&X.t, (const int64_t[4]){6, 4, 1, 1}, (const size_t[4]){4, 28, 0, 0}, 0);
    step(0, 4);
    wgml_op_copy(be, &(wgml_copy_args){&O.t, &past});
    assert_int_equal(be->end(be, &err), WGML_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "exceeds"));
    step(0, 6);
    wgml_op_copy(be, &(wgml_copy_args){&O.t, &T}); /* [6][4] into [4][6] */
    assert_int_equal(be->end(be, &err), WGML_ERR_INVALID_ARGUMENT);

    /* get_rows from an activation table: rows 1..3 of X */
    wgml_tensor table = wgml_tensor_rows(&X.t, 1, 3);
    int32_t idv[3] = {2, 0, 2};
    tbuf I = make(WGML_I32, 3, 1, idv);
    out = (wgml_tensor){.type = WGML_F32, .ne = {6, 3, 1, 1}, .buf = O.b, .name = "out"};
    step(0, 3);
    wgml_op_get_rows(be, &(wgml_get_rows_args){&out, &table, &I.t});
    assert_int_equal(be->end(be, &err), WGML_OK);
    read_f32(&O, got);
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 6; c++) assert_float_equal(got[r * 6 + c], xv[(1 + idv[r]) * 6 + c], 0);
    drop(&X), drop(&O), drop(&I);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matmul_types),  cmocka_unit_test(test_matmul_conv), cmocka_unit_test(test_matmul_fused),
        cmocka_unit_test(test_matmul_qgemm),
        cmocka_unit_test(test_rope),          cmocka_unit_test(test_attention_f32),
        cmocka_unit_test(test_attention_f16), cmocka_unit_test(test_attention_overflow),
        cmocka_unit_test(test_attention_general_math), cmocka_unit_test(test_attention_packed),
        cmocka_unit_test(test_attention_general_errors), cmocka_unit_test(test_validation_messages),
        cmocka_unit_test(test_elementwise),   cmocka_unit_test(test_get_rows),
        cmocka_unit_test(test_weights_own_layout),
        cmocka_unit_test(test_matmul_batch_invariant),
        cmocka_unit_test(test_shape_errors),
        cmocka_unit_test(test_layer_norm),    cmocka_unit_test(test_l2_norm),
        cmocka_unit_test(test_unary),         cmocka_unit_test(test_broadcast),
        cmocka_unit_test(test_pool),          cmocka_unit_test(test_nn_errors),
        cmocka_unit_test(test_views),
        cmocka_unit_test(test_copy_f16),
        cmocka_unit_test(test_profile_flop),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
