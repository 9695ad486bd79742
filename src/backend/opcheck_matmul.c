/*
 * opcheck_matmul.c - the grids of the ops that read weights of every type:
 * matmul (fused norm, bias, epilogues, several weights, binding windows,
 * activations as weights, convolutions) and get_rows (weight tables of every
 * type, and activation tables). See opcheck.c.
 */
#include "backend/opcheck_impl.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/quant.h"

/* ---- matmul ---- */

typedef struct {
    twin x, norm, w[3], bias[3], out[3];
    int nw;
    wgml_epilogue epi;
    int has_norm, has_bias;
    wgml_conv1d conv; /* conv_case */
} mm_case;

/* The standard deviation of the error that rounding a matmul's activations
 * to 8 bits makes in its outputs (opcheck_options.act8): each element is off
 * by up to half a step of its block's scale, largest |x| / 127, uniformly
 * (an RMS of 1 / sqrt 12 step); over K products with weights of RMS w that
 * is w sqrt(K) largest|x| / (127 sqrt 12), with the largest |x| of all the
 * case's inputs (after the norm). *rms gets the products' own RMS,
 * w sqrt(sum x^2) for the largest row. */
static double act8_sigma(const mm_case *m, const float *x, int64_t K, int64_t n, const twin *w, int64_t M,
                         double *rms) {
    const float *nw = m->has_norm ? (const float *)m->norm.host : NULL;
    double amax = 0, ss_max = 0;
    for (int64_t t = 0; t < n; t++) {
        const float *r = x + t * K;
        double ss = 0;
        for (int64_t i = 0; i < K; i++) ss += (double)r[i] * r[i];
        double scale = nw ? 1 / sqrt(ss / (double)K + 1e-5) : 1;
        double ss2 = 0;
        for (int64_t i = 0; i < K; i++) {
            double v = r[i] * scale * (nw ? nw[i] : 1);
            amax = fmax(amax, fabs(v));
            ss2 += v * v;
        }
        ss_max = fmax(ss_max, ss2);
    }
    float *row = wgml_malloc((size_t)K * sizeof *row);
    double ww = 0;
    size_t rb = wgml_row_size(w->t[0].type, K);
    for (int64_t r = 0; row && r < M; r++) {
        wgml_dequantize_row(w->t[0].type, (const uint8_t *)w->host + w->t[0].offset + (size_t)r * rb, row, K);
        for (int64_t i = 0; i < K; i++) ww += (double)row[i] * row[i];
    }
    wgml_free(row);
    double w_rms = sqrt(ww / (double)(K * M));
    *rms = w_rms * sqrt(ss_max);
    return w_rms * sqrt((double)K) * amax / (127 * sqrt(12.0));
}

static void mm_side(wgml_backend *be, int s, void *arg) {
    mm_case *m = arg;
    wgml_matmul_args mm = {.x = &m->x.t[s], .norm = m->has_norm ? &m->norm.t[s] : NULL, .eps = 1e-5f,
                           .n_w = m->nw, .epilogue = m->epi, .conv = m->conv, .f32_act = m->conv.kernel > 0};
    for (int k = 0; k < m->nw; k++) {
        mm.w[k] = &m->w[k].t[s];
        mm.bias[k] = m->has_bias ? &m->bias[k].t[s] : NULL;
        mm.out[k] = &m->out[m->epi == WGML_EPI_SWIGLU ? 0 : k].t[s];
    }
    wgml_op_matmul(be, &mm);
}

/* act: 1: the f32 weights, norm and biases are activations (at byte offsets in
 * larger buffers) instead of weights: products of two computed operands;
 * 2: each weight is a view of rows 5.. of a larger weight (wgml_tensor_rows). */
static void matmul_case(ctx *c, const uint32_t *types, int nw, int64_t K, const int64_t *M, int64_t n,
                        wgml_epilogue epi, int has_norm, int has_bias, int act) {
    char cfg[160];
    int k = snprintf(cfg, sizeof cfg, "%s", wgml_dtype_name(types[0]));
    for (int i = 1; i < nw; i++) k += snprintf(cfg + k, sizeof cfg - (size_t)k, "+%s", wgml_dtype_name(types[i]));
    snprintf(cfg + k, sizeof cfg - (size_t)k, " K=%lld M=%lld n=%lld%s%s%s%s", (long long)K, (long long)M[0],
             (long long)n, has_norm ? " norm" : "", has_bias ? " bias" : "",
             epi == WGML_EPI_ADD ? " add" : epi == WGML_EPI_SWIGLU ? " swiglu" : "", nw == 3 ? " qkv" : "");
    if (act) snprintf(cfg + strlen(cfg), sizeof cfg - strlen(cfg), act == 1 ? " activations" : " row view");
    mm_case m = {.nw = nw, .epi = epi, .has_norm = has_norm, .has_bias = has_bias};
    wgml_error err;
    wgml_status st = WGML_OK;
    float *xv = oc_randv(c, (size_t)(K * n), 1.0f), *nv = oc_randv(c, (size_t)K, 1.0f);
    if (!xv || !nv) st = wgml_fail(&err, WGML_ERR_OUT_OF_MEMORY, "out of memory");
    if (!st) st = oc_twin_act(c, &m.x, WGML_F32, K, n, xv, &err);
    if (!st && has_norm) {
        for (int64_t i = 0; i < K; i++) nv[i] = 1.0f + 0.5f * nv[i];
        st = act == 1 ? oc_twin_act_at(c, &m.norm, WGML_F32, K, 1, nv, 20, &err)
                      : oc_twin_weight(c, &m.norm, WGML_F32, K, 1, 1, &err);
    }
    for (int i = 0; i < nw && !st; i++) {
        if (act == 2) { /* rows [5, 5 + M) of a weight of M + 9 rows */
            st = oc_twin_weight(c, &m.w[i], types[i], K, M[i] + 9, 0.5f, &err);
            for (int s2 = 0; !st && s2 < 2; s2++) m.w[i].t[s2] = wgml_tensor_rows(&m.w[i].t[s2], 5, M[i]);
            if (!st && has_bias) st = oc_twin_weight(c, &m.bias[i], WGML_F32, M[i], 1, 1, &err);
        } else if (act) { /* the host copy act8_sigma and the comparison read, as a weight's */
            float *wv = oc_randv(c, (size_t)(K * M[i]), 0.5f), *bv = oc_randv(c, (size_t)M[i], 1);
            st = wv && bv ? oc_twin_act_at(c, &m.w[i], WGML_F32, K, M[i], wv, 4 * (size_t)(i + 1), &err)
                          : wgml_fail(&err, WGML_ERR_OUT_OF_MEMORY, "out of memory");
            if (!st && has_bias) st = oc_twin_act_at(c, &m.bias[i], WGML_F32, M[i], 1, bv, 36, &err);
            if (!st) m.w[i].host = wv;
            else wgml_free(wv);
            wgml_free(bv);
        } else {
            st = oc_twin_weight(c, &m.w[i], types[i], K, M[i], 0.5f, &err);
            if (!st && has_bias) st = oc_twin_weight(c, &m.bias[i], WGML_F32, M[i], 1, 1, &err);
        }
        if (!st && (i == 0 || epi != WGML_EPI_SWIGLU)) {
            float *init = oc_randv(c, (size_t)(M[i] * n), 1.0f); /* ADD adds to what is there */
            st = init ? oc_twin_act(c, &m.out[i], WGML_F32, M[i], n, init, &err) : WGML_ERR_OUT_OF_MEMORY;
            wgml_free(init);
        }
    }
    if (!st) st = oc_run_both(c, 0, (int)n, mm_side, &m, &err);
    if (st) {
        oc_report(c, "matmul", cfg, INFINITY, 0, st, err.message);
    } else {
        /* 8-bit activations (opt->act8): 7 sigma of their error (the largest of the grid's
         * 1e5 or so outputs reaches about 5), no less than the f32 tolerance. SwiGLU's
         * silu(g) u is off by about silu'(g) u dg + silu(g) du, with |silu'| <= 1.1,
         * |silu(g)| <= |g|, and |g|, |u| within 4.5 RMS over a case's outputs. */
        double sig[3] = {0, 0, 0}, rms[3] = {0, 0, 0};
        for (int i = 0; i < nw && c->opt->act8; i++)
            if (wgml_dtype_get(types[i])->quantized || types[i] == WGML_BF16) /* bf16's step <= 8 bits' */
                sig[i] = act8_sigma(&m, xv, K, n, &m.w[i], M[i], &rms[i]);
        for (int i = 0; i < (epi == WGML_EPI_SWIGLU ? 1 : nw); i++) {
            double s = epi == WGML_EPI_SWIGLU ? 1.1 * 4.5 * rms[1] * sig[0] + 4.5 * rms[0] * sig[1] : sig[i];
            oc_finish_abs(c, "matmul", cfg, &m.out[i], 2e-4, s > 0 ? fmax(7 * s, 2e-4) : 0);
        }
    }
    twin *all[] = {&m.x, &m.norm, &m.w[0], &m.w[1], &m.w[2], &m.bias[0], &m.bias[1], &m.bias[2],
                   &m.out[0], &m.out[1], &m.out[2]};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) oc_twin_free(c, all[i]);
    wgml_free(xv);
    wgml_free(nv);
}

/* A convolution (matmul's conv, f32 activations as Kokoro asks): a signal
 * [T][C] by a weight of kernel taps of Ct >= C columns each, the columns
 * past C random (the op must read them as zero), optional bias, ADD. */
static void conv_case(ctx *c, uint32_t type, int64_t C, int64_t Ct, int64_t T, int64_t M, wgml_conv1d cv, int bias,
                      wgml_epilogue epi, int nw) {
    char cfg[160];
    snprintf(cfg, sizeof cfg, "%s conv C=%lld/%lld T=%lld M=%lld k%d s%d d%d pad %d,%d%s%s%s", wgml_dtype_name(type),
             (long long)C, (long long)Ct, (long long)T, (long long)M, cv.kernel, cv.stride, cv.dilation, cv.pad_l,
             cv.pad_r, bias ? " bias" : "", epi == WGML_EPI_ADD ? " add" : "", nw > 1 ? " 2 weights" : "");
    const int64_t n = wgml_conv1d_rows(&cv, T);
    mm_case m = {.nw = nw, .epi = epi, .has_bias = bias, .conv = cv};
    wgml_error err;
    float *xv = oc_randv(c, (size_t)(C * T), 1.0f), *init = oc_randv(c, (size_t)(M * n), 1.0f);
    wgml_status st = xv && init ? WGML_OK : wgml_fail(&err, WGML_ERR_OUT_OF_MEMORY, "out of memory");
    if (!st) st = oc_twin_act(c, &m.x, WGML_F32, C, T, xv, &err);
    for (int i = 0; i < nw && !st; i++) {
        st = oc_twin_weight(c, &m.w[i], type, cv.kernel * Ct, M, 0.5f, &err);
        if (!st && bias) st = oc_twin_weight(c, &m.bias[i], WGML_F32, M, 1, 1, &err);
        if (!st) st = oc_twin_act(c, &m.out[i], WGML_F32, M, n, init, &err);
    }
    if (!st) st = oc_run_both(c, 0, (int)n, mm_side, &m, &err);
    if (st) oc_report(c, "matmul", cfg, INFINITY, 0, st, err.message);
    for (int i = 0; i < nw && !st; i++) oc_finish(c, "matmul", cfg, &m.out[i], 2e-4);
    twin *all[] = {&m.x, &m.w[0], &m.w[1], &m.bias[0], &m.bias[1], &m.out[0], &m.out[1]};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) oc_twin_free(c, all[i]);
    wgml_free(xv);
    wgml_free(init);
}

/* Kokoro's shapes in small: taps and dilations of its residual blocks, the
 * strided noise convolutions, taps padded to whole blocks for Q8_0, rows
 * enough for the CPU's GEMM and too few. */
static void check_conv(ctx *c) {
    static const struct {
        uint32_t type;
        int64_t C, Ct, T, M;
        wgml_conv1d cv;
        int bias;
        wgml_epilogue epi;
        int nw;
    } cases[] = {
        {WGML_F32, 24, 24, 50, 20, {3, 1, 1, 1, 1}, 1, WGML_EPI_STORE, 1},
        {WGML_F32, 16, 16, 70, 33, {7, 1, 3, 9, 9}, 1, WGML_EPI_ADD, 1},
        {WGML_F32, 22, 22, 41, 12, {4, 2, 1, 1, 1}, 1, WGML_EPI_STORE, 1},
        {WGML_F32, 9, 9, 10, 5, {11, 1, 5, 25, 25}, 0, WGML_EPI_STORE, 1},
        {WGML_F32, 12, 12, 48, 11, {7, 1, 1, 3, 3}, 1, WGML_EPI_STORE, 2}, /* conv_post: magnitude and phase */
        {WGML_F16, 40, 40, 66, 36, {3, 1, 1, 1, 1}, 1, WGML_EPI_STORE, 1},
        {WGML_F16, 1, 1, 60, 1, {3, 2, 1, 1, 1}, 1, WGML_EPI_STORE, 1},
        {WGML_Q8_0, 66, 96, 45, 40, {3, 1, 1, 1, 1}, 1, WGML_EPI_STORE, 1},
        {WGML_Q8_0, 22, 32, 37, 17, {12, 6, 1, 3, 3}, 1, WGML_EPI_ADD, 1},
        {WGML_Q8_0, 64, 64, 5, 8, {5, 1, 2, 4, 4}, 0, WGML_EPI_STORE, 1},
    };
    wgml_backend *dev = c->be[0];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const uint32_t t = cases[i].type;
        if (oc_skip_type(c, t) || !dev->supports_type(dev, t) || !c->be[1]->supports_type(c->be[1], t)) continue;
        if (c->opt->quick && i % 2) continue;
        conv_case(c, t, cases[i].C, cases[i].Ct, cases[i].T, cases[i].M, cases[i].cv, cases[i].bias, cases[i].epi,
                  cases[i].nw);
    }
}

static const uint32_t weight_types[] = {WGML_F32, WGML_F16, WGML_BF16, WGML_Q8_0, WGML_Q4_0, WGML_Q4_1, WGML_Q5_0,
                                        WGML_Q5_1, WGML_Q2_K, WGML_Q3_K, WGML_Q4_K, WGML_Q5_K, WGML_Q6_K};

void oc_check_matmul(ctx *c) {
    wgml_backend *dev = c->be[0];
    for (size_t ti = 0; ti < sizeof weight_types / sizeof weight_types[0]; ti++) {
        uint32_t t = weight_types[ti];
        if (oc_skip_type(c, t) || !dev->supports_type(dev, t) || !c->be[1]->supports_type(c->be[1], t)) continue;
        int bs = wgml_dtype_get(t)->block_size;
        int64_t Ks_float[] = {7, 64, 172}, Ks_block[] = {32, 96, 320}, Ks_k[] = {256, 512};
        const int64_t *Ks = bs == 1 ? Ks_float : bs == 32 ? Ks_block : Ks_k;
        int nK = bs == 256 ? 2 : 3;
        const int64_t Ms[] = {1, 67, 130}, ns[] = {1, 2, 35};
        for (int ki = 0; ki < nK; ki++) {
            for (int mi = 0; mi < 3; mi++) {
                for (int ni = 0; ni < 3; ni++) {
                    if (c->opt->quick && (mi + ni + ki) % 3) continue;
                    int64_t M[1] = {Ms[mi]};
                    matmul_case(c, &t, 1, Ks[ki], M, ns[ni], WGML_EPI_STORE, 0, 0, 0);
                }
            }
        }
        /* fused variants on one shape per type */
        int64_t K = bs == 256 ? 256 : 96, M3[3] = {40, 24, 24};
        uint32_t tt[3] = {t, t, t};
        for (int n = 1; n <= 9; n += 8) {
            matmul_case(c, tt, 1, K, M3, n, WGML_EPI_ADD, 1, 1, 0);
            matmul_case(c, tt, 2, K, M3 + 1, n, WGML_EPI_SWIGLU, 1, 0, 0);
            matmul_case(c, tt, 3, K, M3, n, WGML_EPI_STORE, 1, 0, 0);
            matmul_case(c, tt, 3, K, M3, n, WGML_EPI_STORE, 1, 1, 0);
        }
    }
    /* views of weight rows (a slice of a fused or larger matrix), every weight type */
    for (size_t ti = 0; ti < sizeof weight_types / sizeof weight_types[0]; ti++) {
        uint32_t t = weight_types[ti], t3[3] = {t, t, t};
        if (oc_skip_type(c, t) || !dev->supports_type(dev, t) || !c->be[1]->supports_type(c->be[1], t)) continue;
        if (c->opt->quick && ti % 3) continue;
        int64_t K = wgml_dtype_get(t)->block_size == 256 ? 256 : 64, Mv[3] = {40, 24, 24};
        matmul_case(c, t3, 1, K, Mv, 1, WGML_EPI_STORE, 0, 1, 2);
        matmul_case(c, t3, 3, K, Mv, 9, WGML_EPI_STORE, 1, 0, 2);
        matmul_case(c, t3, 2, K, Mv + 1, 2, WGML_EPI_SWIGLU, 0, 0, 2);
    }
    /* both operands computed: f32 activations as the weights, the norm and the biases */
    if (!oc_skip_type(c, WGML_F32)) {
        uint32_t f3[3] = {WGML_F32, WGML_F32, WGML_F32};
        int64_t Ma[3] = {37, 24, 24}, M1[1] = {70};
        matmul_case(c, f3, 1, 7, M1, 1, WGML_EPI_STORE, 0, 0, 1);
        matmul_case(c, f3, 1, 64, M1, 35, WGML_EPI_STORE, 0, 1, 1);
        for (int n = 2; n <= 33; n += 31) {
            matmul_case(c, f3, 1, 96, Ma, n, WGML_EPI_ADD, 1, 1, 1);
            matmul_case(c, f3, 2, 96, Ma + 1, n, WGML_EPI_SWIGLU, 1, 0, 1);
            matmul_case(c, f3, 3, 96, Ma, n, WGML_EPI_STORE, 1, 1, 1);
        }
    }
    check_conv(c);
    /* mixed types in one call (as Q4_K_M's attention) */
    uint32_t mix[3] = {WGML_F16, WGML_Q8_0, WGML_F32};
    int64_t M3[3] = {33, 17, 17};
    if (!oc_skip_type(c, mix[0]) && !oc_skip_type(c, mix[1]) && !oc_skip_type(c, mix[2]) &&
        dev->supports_type(dev, WGML_Q8_0))
        matmul_case(c, mix, 3, 64, M3, 3, WGML_EPI_STORE, 1, 0, 0);
}

/* ---- get_rows ---- */

typedef struct {
    twin table, ids, out;
} gr_case;

static void gr_side(wgml_backend *be, int s, void *arg) {
    gr_case *g = arg;
    wgml_op_get_rows(be, &(wgml_get_rows_args){&g->out.t[s], &g->table.t[s], &g->ids.t[s]});
}

/* get_rows from an f32 activation table (computed at run time): the whole
 * buffer, a row range at an offset, or rows of out's own buffer after out. */
typedef struct {
    twin buf, ids, out;    /* buf: the table's buffer (unused when in out's) */
    int64_t K, rows, first; /* the table: rows [first, first+rows) of its buffer */
    int64_t n;             /* ids and out rows */
    int in_out;            /* the table in out's buffer, from row n */
} gra_case;

static void gra_side(wgml_backend *be, int s, void *arg) {
    gra_case *g = arg;
    wgml_tensor whole = g->in_out ? g->out.t[s] : g->buf.t[s];
    whole.ne[0] = g->K, whole.ne[1] = g->first + g->rows; /* the buffers are made as one long row */
    wgml_tensor table = wgml_tensor_rows(&whole, g->first, g->rows), out = wgml_tensor_rows(&whole, 0, g->n);
    if (!g->in_out) out = (wgml_tensor){.type = WGML_F32, .ne = {g->K, g->n, 1, 1}, .buf = g->out.buf[s]};
    wgml_op_get_rows(be, &(wgml_get_rows_args){&out, &table, &g->ids.t[s]});
}

static void get_rows_act_case(ctx *c, int64_t K, int64_t rows, int64_t first, int64_t n, int in_out) {
    char cfg[96];
    snprintf(cfg, sizeof cfg, "f32 activation K=%lld rows=%lld n=%lld%s%s", (long long)K, (long long)rows,
             (long long)n, first ? " (a row range at an offset)" : "", in_out ? " in out's buffer" : "");
    gra_case g = {.K = K, .rows = rows, .first = in_out ? n : first, .n = n, .in_out = in_out};
    size_t out_n = (size_t)(K * n), buf_n = (size_t)(K * (g.first + rows));
    float *tv = oc_randv(c, buf_n, 1), *nan = wgml_malloc(out_n * 4 + 4);
    int32_t *ids = wgml_malloc((size_t)n * 4 + 4);
    wgml_error err;
    wgml_status st = tv && nan && ids ? WGML_OK : wgml_fail(&err, WGML_ERR_OUT_OF_MEMORY, "out of memory");
    for (int64_t i = 0; !st && i < n; i++) /* both ends of the table, repeats */
        ids[i] = i % 5 == 0   ? (int32_t)(rows - 1)
                 : i % 7 == 0 ? 0
                              : (int32_t)((oc_rnd(c) + 1) * 0.5f * (float)(rows - 1));
    if (!st) st = oc_twin_act(c, &g.ids, WGML_I32, n, 1, ids, &err);
    /* one row of every buffer's elements: the views are made in gra_side */
    if (!st && !in_out) st = oc_twin_act(c, &g.buf, WGML_F32, (int64_t)buf_n, 1, tv, &err);
    if (!st) st = oc_twin_act(c, &g.out, WGML_F32, (int64_t)(in_out ? buf_n : out_n), 1, in_out ? tv : NULL, &err);
    /* NaN where the device writes: an element it skips shows */
    for (size_t i = 0; !st && i < out_n; i++) nan[i] = NAN;
    if (!st) st = c->be[0]->buffer_write(c->be[0], g.out.buf[0], 0, nan, out_n * 4, &err);
    if (!st) st = oc_run_both(c, 0, (int)n, gra_side, &g, &err);
    if (st) oc_report(c, "get_rows", cfg, INFINITY, 0, st, err.message);
    else oc_finish(c, "get_rows", cfg, &g.out, 0);
    oc_twin_free(c, &g.buf), oc_twin_free(c, &g.ids), oc_twin_free(c, &g.out);
    wgml_free(tv), wgml_free(nan), wgml_free(ids);
}

static void check_get_rows_act(ctx *c) {
    if (oc_skip_type(c, WGML_F32)) return;
    get_rows_act_case(c, 70, 37, 0, 6, 0);
    get_rows_act_case(c, 70, 37, 7, 6, 0);  /* a row range at a non-zero offset */
    get_rows_act_case(c, 37, 20, 0, 9, 1);  /* in out's buffer, after out */
    get_rows_act_case(c, 1024, 50, 3, 2100, 0); /* 2.15M elements: two rows of the flat grid */
    get_rows_act_case(c, 3, 1000, 0, 70000, 0);
}

void oc_check_get_rows(ctx *c) {
    for (size_t ti = 0; ti < sizeof weight_types / sizeof weight_types[0]; ti++) {
        uint32_t t = weight_types[ti];
        if (oc_skip_type(c, t) || !c->be[0]->supports_type(c->be[0], t) || !c->be[1]->supports_type(c->be[1], t))
            continue;
        int bs = wgml_dtype_get(t)->block_size;
        int64_t K = bs == 1 ? 70 : bs == 32 ? 96 : 256, rows = 37;
        int32_t ids[6] = {36, 0, 5, 5, 17, 36};
        gr_case g;
        memset(&g, 0, sizeof g);
        wgml_error err;
        char cfg[64];
        snprintf(cfg, sizeof cfg, "%s K=%lld rows=%lld n=6", wgml_dtype_name(t), (long long)K, (long long)rows);
        wgml_status st = oc_twin_weight(c, &g.table, t, K, rows, 1, &err);
        if (!st) st = oc_twin_act(c, &g.ids, WGML_I32, 6, 1, ids, &err);
        if (!st) st = oc_twin_act(c, &g.out, WGML_F32, K, 6, NULL, &err);
        if (!st) st = oc_run_both(c, 0, 6, gr_side, &g, &err);
        if (st) oc_report(c, "get_rows", cfg, INFINITY, 0, st, err.message);
        else oc_finish(c, "get_rows", cfg, &g.out, 0);
        oc_twin_free(c, &g.table);
        oc_twin_free(c, &g.ids);
        oc_twin_free(c, &g.out);
    }
    check_get_rows_act(c);
}
