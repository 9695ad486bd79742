/*
 * opcheck.c - op-by-op comparison of two backends (see opcheck.h).
 *
 * Each case builds its tensors twice ("twins": the same bytes on the device
 * and on the reference), runs the op on each in its own step, reads the
 * outputs back and compares them. Tolerances are relative to the output's
 * scale: 2e-4 where both sides compute in f32 (this catches a wrong block,
 * scale, nibble or offset by orders of magnitude), looser where the device
 * legitimately rounds (an f16 KV cache; 8-bit activations: act8_sigma).
 */
#include "backend/opcheck.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/quant.h"

typedef struct {
    wgml_backend *be[2]; /* 0: device, 1: reference */
    const wgml_opcheck_options *opt;
    wgml_opcheck_fn fn;
    void *user;
    int failures;
    uint64_t rng;
} ctx;

typedef struct {
    wgml_buffer *buf[2];
    wgml_tensor t[2];
    void *host; /* weights: the bytes both sides were made from */
} twin;

static float rnd(ctx *c) { /* uniform in [-1, 1) */
    c->rng ^= c->rng << 13;
    c->rng ^= c->rng >> 7;
    c->rng ^= c->rng << 17;
    return (float)((c->rng >> 40) & 0xffffff) / 8388608.0f - 1.0f;
}

static float *randv(ctx *c, size_t n, float scale) {
    float *v = wgml_malloc(n * sizeof *v + 4);
    for (size_t i = 0; v && i < n; i++) v[i] = rnd(c) * scale;
    return v;
}

static void report(ctx *c, const char *op, const char *config, double err, double tol, wgml_status st,
                   const char *msg) {
    wgml_opcheck_result r = {.op = op, .err = err, .tol = tol, .status = st};
    snprintf(r.config, sizeof r.config, "%s", config);
    r.pass = st == WGML_OK && err <= tol;
    if (msg) snprintf(r.message, sizeof r.message, "%s", msg);
    if (!r.pass) c->failures++;
    if (c->fn) c->fn(c->user, &r);
}

static void twin_free(ctx *c, twin *t) {
    for (int s = 0; s < 2; s++)
        if (t->buf[s]) c->be[s]->buffer_free(c->be[s], t->buf[s]);
    wgml_free(t->host);
    memset(t, 0, sizeof *t);
}

/* An activation [ne1][ne0] of `type` on both sides, filled with data (or zeros). */
static wgml_status twin_act(ctx *c, twin *t, uint32_t type, int64_t ne0, int64_t ne1, const void *data,
                            wgml_error *err) {
    memset(t, 0, sizeof *t);
    size_t size = wgml_row_size(type, ne0) * (size_t)ne1;
    for (int s = 0; s < 2; s++) {
        wgml_status st = c->be[s]->buffer_create(c->be[s], size, WGML_BUFFER_ACTIVATIONS, &t->buf[s], err);
        if (!st && data) st = c->be[s]->buffer_write(c->be[s], t->buf[s], 0, data, size, err);
        if (!st && !data) {
            void *z = wgml_calloc(1, size);
            st = z ? c->be[s]->buffer_write(c->be[s], t->buf[s], 0, z, size, err) : WGML_ERR_OUT_OF_MEMORY;
            wgml_free(z);
        }
        if (st) return st;
        t->t[s] = (wgml_tensor){.type = type, .ne = {ne0, ne1, 1, 1}, .buf = t->buf[s], .name = "opcheck"};
    }
    return WGML_OK;
}

/* An activation [ne1][ne0] at byte offset `pad` of a larger buffer (data
 * there; the padding holds garbage that must not be read): the operands a
 * step computes, used where weights usually are. */
static wgml_status twin_act_at(ctx *c, twin *t, uint32_t type, int64_t ne0, int64_t ne1, const void *data, size_t pad,
                               wgml_error *err) {
    memset(t, 0, sizeof *t);
    size_t size = wgml_row_size(type, ne0) * (size_t)ne1;
    uint8_t *junk = wgml_malloc(pad + 4);
    if (!junk) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory");
    for (size_t i = 0; i < pad; i++) junk[i] = (uint8_t)(0x7f - i); /* NaN-ish f32 bit patterns */
    for (int s = 0; s < 2; s++) {
        wgml_status st = c->be[s]->buffer_create(c->be[s], pad + size, WGML_BUFFER_ACTIVATIONS, &t->buf[s], err);
        if (!st && pad) st = c->be[s]->buffer_write(c->be[s], t->buf[s], 0, junk, pad, err);
        if (!st) st = c->be[s]->buffer_write(c->be[s], t->buf[s], pad, data, size, err);
        if (st) {
            wgml_free(junk);
            return st;
        }
        t->t[s] = (wgml_tensor){.type = type, .ne = {ne0, ne1, 1, 1}, .buf = t->buf[s], .offset = pad,
                                .name = "opcheck.act"};
    }
    wgml_free(junk);
    return WGML_OK;
}

/* A weight [ne1][ne0] of `type` quantized from random values (owned bytes). */
static wgml_status twin_weight(ctx *c, twin *t, uint32_t type, int64_t ne0, int64_t ne1, float scale,
                               wgml_error *err) {
    memset(t, 0, sizeof *t);
    size_t row = wgml_row_size(type, ne0);
    t->host = wgml_malloc(row * (size_t)ne1 + 4);
    float *f = randv(c, (size_t)ne0, scale);
    if (!t->host || !f) {
        wgml_free(f);
        return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory");
    }
    for (int64_t r = 0; r < ne1; r++) {
        for (int64_t i = 0; i < ne0; i++) f[i] = rnd(c) * scale;
        wgml_quantize_row(type, f, (uint8_t *)t->host + (size_t)r * row, ne0);
    }
    wgml_free(f);
    for (int s = 0; s < 2; s++) {
        wgml_status st = c->be[s]->weight_create(c->be[s], type, ne0, ne1, t->host, "opcheck.weight", &t->buf[s], err);
        if (st) return st;
        t->t[s] = (wgml_tensor){.type = type, .ne = {ne0, ne1, 1, 1}, .buf = t->buf[s], .name = "opcheck.weight"};
    }
    return WGML_OK;
}

static double compare(const float *d, const float *r, size_t n) {
    double mx = 0, e = 0;
    for (size_t i = 0; i < n; i++) mx = fmax(mx, fabs(r[i]));
    for (size_t i = 0; i < n; i++) {
        double x = fabs((double)d[i] - r[i]);
        if (isnan(d[i]) != isnan(r[i])) x = INFINITY;
        e = fmax(e, x);
    }
    return e / (1 + mx);
}

/* Reads the f32 output of both sides and compares; reports the case. With
 * tol_abs > 0 the tolerance is that absolute error in compare()'s units:
 * tol_abs / (1 + max |ref|). */
static void finish_abs(ctx *c, const char *op, const char *cfg, twin *out, double tol, double tol_abs) {
    size_t n = (size_t)(out->t[0].ne[0] * out->t[0].ne[1]);
    float *a = wgml_malloc(n * 4 + 4), *b = wgml_malloc(n * 4 + 4);
    wgml_error err;
    wgml_status st = !a || !b ? WGML_ERR_OUT_OF_MEMORY : WGML_OK;
    if (!st) st = c->be[0]->buffer_read(c->be[0], out->buf[0], 0, a, n * 4, &err);
    if (!st) st = c->be[1]->buffer_read(c->be[1], out->buf[1], 0, b, n * 4, &err);
    if (!st && tol_abs > 0) {
        double mx = 0;
        for (size_t i = 0; i < n; i++) mx = fmax(mx, fabs(b[i]));
        tol = tol_abs / (1 + mx);
    }
    report(c, op, cfg, st ? INFINITY : compare(a, b, n), tol, st, st ? err.message : NULL);
    wgml_free(a);
    wgml_free(b);
}

static void finish(ctx *c, const char *op, const char *cfg, twin *out, double tol) {
    finish_abs(c, op, cfg, out, tol, 0);
}

/* Runs `body` on both sides, each in one step at (pos, n). Returns the first error. */
typedef void (*side_fn)(wgml_backend *be, int side, void *arg);

static wgml_status run_both(ctx *c, int pos, int n, side_fn body, void *arg, wgml_error *err) {
    for (int s = 0; s < 2; s++) {
        wgml_backend *be = c->be[s];
        be->begin(be, &(wgml_step){pos, n});
        body(be, s, arg);
        wgml_status st = be->end(be, err);
        if (st) {
            if (s == 1) wgml_error_prefix(err, "reference");
            return st;
        }
    }
    return WGML_OK;
}

/* 1 when `name` is one of the comma-separated names in `list` */
static int in_list(const char *list, const char *name) {
    size_t n = strlen(name);
    for (const char *p = list; *p;) {
        size_t len = strcspn(p, ",");
        if (len == n && memcmp(p, name, n) == 0) return 1;
        p += len + (p[len] == ',');
    }
    return 0;
}

/* an op left out by the options' op list */
static int skip(const ctx *c, const char *op) { return c->opt->filter && !in_list(c->opt->filter, op); }
/* a weight type left out by the options' type list */
static int skip_type(const ctx *c, uint32_t t) { return c->opt->type && !in_list(c->opt->type, wgml_dtype_name(t)); }

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
    float *xv = randv(c, (size_t)(K * n), 1.0f), *nv = randv(c, (size_t)K, 1.0f);
    if (!xv || !nv) st = wgml_fail(&err, WGML_ERR_OUT_OF_MEMORY, "out of memory");
    if (!st) st = twin_act(c, &m.x, WGML_F32, K, n, xv, &err);
    if (!st && has_norm) {
        for (int64_t i = 0; i < K; i++) nv[i] = 1.0f + 0.5f * nv[i];
        st = act == 1 ? twin_act_at(c, &m.norm, WGML_F32, K, 1, nv, 20, &err)
                 : twin_weight(c, &m.norm, WGML_F32, K, 1, 1, &err);
    }
    for (int i = 0; i < nw && !st; i++) {
        if (act == 2) { /* rows [5, 5 + M) of a weight of M + 9 rows */
            st = twin_weight(c, &m.w[i], types[i], K, M[i] + 9, 0.5f, &err);
            for (int s2 = 0; !st && s2 < 2; s2++) m.w[i].t[s2] = wgml_tensor_rows(&m.w[i].t[s2], 5, M[i]);
            if (!st && has_bias) st = twin_weight(c, &m.bias[i], WGML_F32, M[i], 1, 1, &err);
        } else if (act) { /* the host copy act8_sigma and the comparison read, as a weight's */
            float *wv = randv(c, (size_t)(K * M[i]), 0.5f), *bv = randv(c, (size_t)M[i], 1);
            st = wv && bv ? twin_act_at(c, &m.w[i], WGML_F32, K, M[i], wv, 4 * (size_t)(i + 1), &err)
                          : wgml_fail(&err, WGML_ERR_OUT_OF_MEMORY, "out of memory");
            if (!st && has_bias) st = twin_act_at(c, &m.bias[i], WGML_F32, M[i], 1, bv, 36, &err);
            if (!st) m.w[i].host = wv;
            else wgml_free(wv);
            wgml_free(bv);
        } else {
            st = twin_weight(c, &m.w[i], types[i], K, M[i], 0.5f, &err);
            if (!st && has_bias) st = twin_weight(c, &m.bias[i], WGML_F32, M[i], 1, 1, &err);
        }
        if (!st && (i == 0 || epi != WGML_EPI_SWIGLU)) {
            float *init = randv(c, (size_t)(M[i] * n), 1.0f); /* ADD adds to what is there */
            st = init ? twin_act(c, &m.out[i], WGML_F32, M[i], n, init, &err) : WGML_ERR_OUT_OF_MEMORY;
            wgml_free(init);
        }
    }
    if (!st) st = run_both(c, 0, (int)n, mm_side, &m, &err);
    if (st) {
        report(c, "matmul", cfg, INFINITY, 0, st, err.message);
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
            finish_abs(c, "matmul", cfg, &m.out[i], 2e-4, s > 0 ? fmax(7 * s, 2e-4) : 0);
        }
    }
    twin *all[] = {&m.x, &m.norm, &m.w[0], &m.w[1], &m.w[2], &m.bias[0], &m.bias[1], &m.bias[2],
                   &m.out[0], &m.out[1], &m.out[2]};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) twin_free(c, all[i]);
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
    float *xv = randv(c, (size_t)(C * T), 1.0f), *init = randv(c, (size_t)(M * n), 1.0f);
    wgml_status st = xv && init ? WGML_OK : wgml_fail(&err, WGML_ERR_OUT_OF_MEMORY, "out of memory");
    if (!st) st = twin_act(c, &m.x, WGML_F32, C, T, xv, &err);
    for (int i = 0; i < nw && !st; i++) {
        st = twin_weight(c, &m.w[i], type, cv.kernel * Ct, M, 0.5f, &err);
        if (!st && bias) st = twin_weight(c, &m.bias[i], WGML_F32, M, 1, 1, &err);
        if (!st) st = twin_act(c, &m.out[i], WGML_F32, M, n, init, &err);
    }
    if (!st) st = run_both(c, 0, (int)n, mm_side, &m, &err);
    if (st) report(c, "matmul", cfg, INFINITY, 0, st, err.message);
    for (int i = 0; i < nw && !st; i++) finish(c, "matmul", cfg, &m.out[i], 2e-4);
    twin *all[] = {&m.x, &m.w[0], &m.w[1], &m.bias[0], &m.bias[1], &m.out[0], &m.out[1]};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) twin_free(c, all[i]);
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
        if (skip_type(c, t) || !dev->supports_type(dev, t) || !c->be[1]->supports_type(c->be[1], t)) continue;
        if (c->opt->quick && i % 2) continue;
        conv_case(c, t, cases[i].C, cases[i].Ct, cases[i].T, cases[i].M, cases[i].cv, cases[i].bias, cases[i].epi,
                  cases[i].nw);
    }
}

static const uint32_t weight_types[] = {WGML_F32, WGML_F16, WGML_BF16, WGML_Q8_0, WGML_Q4_0, WGML_Q4_1, WGML_Q5_0,
                                        WGML_Q5_1, WGML_Q2_K, WGML_Q3_K, WGML_Q4_K, WGML_Q5_K, WGML_Q6_K};

static void check_matmul(ctx *c) {
    wgml_backend *dev = c->be[0];
    for (size_t ti = 0; ti < sizeof weight_types / sizeof weight_types[0]; ti++) {
        uint32_t t = weight_types[ti];
        if (skip_type(c, t) || !dev->supports_type(dev, t) || !c->be[1]->supports_type(c->be[1], t)) continue;
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
        if (skip_type(c, t) || !dev->supports_type(dev, t) || !c->be[1]->supports_type(c->be[1], t)) continue;
        if (c->opt->quick && ti % 3) continue;
        int64_t K = wgml_dtype_get(t)->block_size == 256 ? 256 : 64, Mv[3] = {40, 24, 24};
        matmul_case(c, t3, 1, K, Mv, 1, WGML_EPI_STORE, 0, 1, 2);
        matmul_case(c, t3, 3, K, Mv, 9, WGML_EPI_STORE, 1, 0, 2);
        matmul_case(c, t3, 2, K, Mv + 1, 2, WGML_EPI_SWIGLU, 0, 0, 2);
    }
    /* both operands computed: f32 activations as the weights, the norm and the biases */
    if (!skip_type(c, WGML_F32)) {
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
    if (!skip_type(c, mix[0]) && !skip_type(c, mix[1]) && !skip_type(c, mix[2]) && dev->supports_type(dev, WGML_Q8_0))
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
    float *tv = randv(c, buf_n, 1), *nan = wgml_malloc(out_n * 4 + 4);
    int32_t *ids = wgml_malloc((size_t)n * 4 + 4);
    wgml_error err;
    wgml_status st = tv && nan && ids ? WGML_OK : wgml_fail(&err, WGML_ERR_OUT_OF_MEMORY, "out of memory");
    for (int64_t i = 0; !st && i < n; i++) /* both ends of the table, repeats */
        ids[i] = i % 5 == 0 ? (int32_t)(rows - 1) : i % 7 == 0 ? 0 : (int32_t)((rnd(c) + 1) * 0.5f * (float)(rows - 1));
    if (!st) st = twin_act(c, &g.ids, WGML_I32, n, 1, ids, &err);
    /* one row of every buffer's elements: the views are made in gra_side */
    if (!st && !in_out) st = twin_act(c, &g.buf, WGML_F32, (int64_t)buf_n, 1, tv, &err);
    if (!st) st = twin_act(c, &g.out, WGML_F32, (int64_t)(in_out ? buf_n : out_n), 1, in_out ? tv : NULL, &err);
    /* NaN where the device writes: an element it skips shows */
    for (size_t i = 0; !st && i < out_n; i++) nan[i] = NAN;
    if (!st) st = c->be[0]->buffer_write(c->be[0], g.out.buf[0], 0, nan, out_n * 4, &err);
    if (!st) st = run_both(c, 0, (int)n, gra_side, &g, &err);
    if (st) report(c, "get_rows", cfg, INFINITY, 0, st, err.message);
    else finish(c, "get_rows", cfg, &g.out, 0);
    twin_free(c, &g.buf), twin_free(c, &g.ids), twin_free(c, &g.out);
    wgml_free(tv), wgml_free(nan), wgml_free(ids);
}

static void check_get_rows_act(ctx *c) {
    if (skip_type(c, WGML_F32)) return;
    get_rows_act_case(c, 70, 37, 0, 6, 0);
    get_rows_act_case(c, 70, 37, 7, 6, 0);  /* a row range at a non-zero offset */
    get_rows_act_case(c, 37, 20, 0, 9, 1);  /* in out's buffer, after out */
    get_rows_act_case(c, 1024, 50, 3, 2100, 0); /* 2.15M elements: two rows of the flat grid */
    get_rows_act_case(c, 3, 1000, 0, 70000, 0);
}

static void check_get_rows(ctx *c) {
    for (size_t ti = 0; ti < sizeof weight_types / sizeof weight_types[0]; ti++) {
        uint32_t t = weight_types[ti];
        if (skip_type(c, t) || !c->be[0]->supports_type(c->be[0], t) || !c->be[1]->supports_type(c->be[1], t))
            continue;
        int bs = wgml_dtype_get(t)->block_size;
        int64_t K = bs == 1 ? 70 : bs == 32 ? 96 : 256, rows = 37;
        int32_t ids[6] = {36, 0, 5, 5, 17, 36};
        gr_case g;
        memset(&g, 0, sizeof g);
        wgml_error err;
        char cfg[64];
        snprintf(cfg, sizeof cfg, "%s K=%lld rows=%lld n=6", wgml_dtype_name(t), (long long)K, (long long)rows);
        wgml_status st = twin_weight(c, &g.table, t, K, rows, 1, &err);
        if (!st) st = twin_act(c, &g.ids, WGML_I32, 6, 1, ids, &err);
        if (!st) st = twin_act(c, &g.out, WGML_F32, K, 6, NULL, &err);
        if (!st) st = run_both(c, 0, 6, gr_side, &g, &err);
        if (st) report(c, "get_rows", cfg, INFINITY, 0, st, err.message);
        else finish(c, "get_rows", cfg, &g.out, 0);
        twin_free(c, &g.table);
        twin_free(c, &g.ids);
        twin_free(c, &g.out);
    }
    check_get_rows_act(c);
}

/* ---- attention ---- */

typedef struct {
    twin q, k, v, kc, vc, out, ff;
    wgml_rope rope;
    int use_rope;
    int n_head, n_kv, hd;
    /* general attention (zero: today's causal attention over the cache) */
    twin seq, kv_seq, pos, mask, range;
    int no_cache, bidirectional;
} att_case;

static const wgml_tensor *att_opt(const twin *t, int s) { return t->buf[s] ? &t->t[s] : NULL; }

static void att_side(wgml_backend *be, int s, void *arg) {
    att_case *a = arg;
    wgml_rope r = a->rope;
    if (r.freq_factors) r.freq_factors = &a->ff.t[s];
    wgml_op_attention(be, &(wgml_attention_args){.q = &a->q.t[s], .k = &a->k.t[s], .v = &a->v.t[s],
                                                 .k_cache = a->no_cache ? NULL : &a->kc.t[s],
                                                 .v_cache = a->no_cache ? NULL : &a->vc.t[s], .out = &a->out.t[s],
                                                 .n_head = a->n_head, .n_head_kv = a->n_kv, .head_dim = a->hd,
                                                 .scale = 1.0f / sqrtf((float)a->hd),
                                                 .rope = a->use_rope ? &r : NULL, .bidirectional = a->bidirectional,
                                                 .seq = att_opt(&a->seq, s), .kv_seq = att_opt(&a->kv_seq, s),
                                                 .pos = att_opt(&a->pos, s), .mask = att_opt(&a->mask, s),
                                                 .kv_range = att_opt(&a->range, s)});
}

static void attention_case(ctx *c, int n_head, int n_kv, int hd, int pos, int n, int rope_kind) {
    uint32_t kvt = c->be[0]->kv_type;
    int n_ctx = pos + n + 3;
    char cfg[160];
    static const char *rk[] = {"no rope", "rope", "rope neox n_rot=hd/2", "rope factors"};
    snprintf(cfg, sizeof cfg, "heads=%d kv=%d hd=%d pos=%d n=%d %s, %s cache", n_head, n_kv, hd, pos, n, rk[rope_kind],
             wgml_dtype_name(kvt));
    att_case a;
    memset(&a, 0, sizeof a);
    a.n_head = n_head, a.n_kv = n_kv, a.hd = hd, a.use_rope = rope_kind != 0;
    a.rope = (wgml_rope){.n_rot = rope_kind == 2 ? hd / 2 : hd, .neox = rope_kind == 2, .freq_base = 10000,
                         .freq_scale = rope_kind == 3 ? 0.5f : 1.0f};
    int qd = n_head * hd, kvd = n_kv * hd;
    wgml_error err;
    float *qv = randv(c, (size_t)qd * n, 1), *kv = randv(c, (size_t)kvd * n, 1), *vv = randv(c, (size_t)kvd * n, 1);
    /* earlier cache rows, in the cache type */
    size_t crow = wgml_row_size(kvt, kvd);
    uint8_t *kc = wgml_calloc((size_t)n_ctx, crow), *vc = wgml_calloc((size_t)n_ctx, crow);
    float *tmp = randv(c, (size_t)kvd, 1);
    wgml_status st = qv && kv && vv && kc && vc && tmp ? WGML_OK : WGML_ERR_OUT_OF_MEMORY;
    for (int j = 0; !st && j < pos; j++) {
        for (int i = 0; i < kvd; i++) tmp[i] = rnd(c);
        wgml_quantize_row(kvt, tmp, kc + (size_t)j * crow, kvd);
        for (int i = 0; i < kvd; i++) tmp[i] = rnd(c);
        wgml_quantize_row(kvt, tmp, vc + (size_t)j * crow, kvd);
    }
    if (!st) st = twin_act(c, &a.q, WGML_F32, qd, n, qv, &err);
    if (!st) st = twin_act(c, &a.k, WGML_F32, kvd, n, kv, &err);
    if (!st) st = twin_act(c, &a.v, WGML_F32, kvd, n, vv, &err);
    if (!st) st = twin_act(c, &a.kc, kvt, kvd, n_ctx, kc, &err);
    if (!st) st = twin_act(c, &a.vc, kvt, kvd, n_ctx, vc, &err);
    if (!st) st = twin_act(c, &a.out, WGML_F32, qd, n, NULL, &err);
    if (!st && rope_kind == 3) {
        st = twin_weight(c, &a.ff, WGML_F32, a.rope.n_rot / 2, 1, 1, &err);
        a.rope.freq_factors = &a.ff.t[0];
    }
    if (!st) st = run_both(c, pos, n, att_side, &a, &err);
    double tol = kvt == WGML_F16 ? 2e-3 : 2e-4;
    if (st) {
        report(c, "attention", cfg, INFINITY, 0, st, err.message);
    } else {
        finish(c, "attention", cfg, &a.out, tol);
        /* the rows written into the caches (f32 caches compare exactly to 2e-4; f16 both round alike) */
        size_t bytes = crow * (size_t)n_ctx;
        uint8_t *d = wgml_malloc(bytes + 4), *r = wgml_malloc(bytes + 4);
        float *fd = wgml_malloc((size_t)kvd * n * 4), *fr = wgml_malloc((size_t)kvd * n * 4);
        char cc[180];
        snprintf(cc, sizeof cc, "%s: K cache rows", cfg);
        if (d && r && fd && fr && !c->be[0]->buffer_read(c->be[0], a.kc.buf[0], 0, d, bytes, &err) &&
            !c->be[1]->buffer_read(c->be[1], a.kc.buf[1], 0, r, bytes, &err)) {
            for (int t = 0; t < n; t++) {
                wgml_dequantize_row(kvt, d + (size_t)(pos + t) * crow, fd + (size_t)t * kvd, kvd);
                wgml_dequantize_row(kvt, r + (size_t)(pos + t) * crow, fr + (size_t)t * kvd, kvd);
            }
            report(c, "attention", cc, compare(fd, fr, (size_t)kvd * n), tol, WGML_OK, NULL);
        } else {
            report(c, "attention", cc, INFINITY, 0, WGML_ERR_GPU, "reading the cache back failed");
        }
        wgml_free(d), wgml_free(r), wgml_free(fd), wgml_free(fr);
    }
    twin *all[] = {&a.q, &a.k, &a.v, &a.kc, &a.vc, &a.out, &a.ff};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) twin_free(c, all[i]);
    wgml_free(qv), wgml_free(kv), wgml_free(vv), wgml_free(kc), wgml_free(vc), wgml_free(tmp);
}

/* One case of general attention (ops.h): n query rows, n_k key rows (k and v), a cache of
 * n_ctx rows (0: none) holding random earlier rows, and the optional tables. */
typedef struct {
    const char *what;
    int n_head, n_kv, hd, n, n_k, n_ctx, step_pos, bidirectional, rope_kind;
    const int32_t *seq, *kv_seq, *pos; /* NULL: not given */
    int mask;                          /* 1: random, some entries hidden (-inf, -FLT_MAX); 2: and row 0 all hidden */
    const int32_t *range;              /* NULL: not given; else [n][2] key windows */
} gen_desc;

static void general_case(ctx *c, const gen_desc *g) {
    uint32_t kvt = c->be[0]->kv_type;
    const int n = g->n, n_k = g->n_k, n_ctx = g->n_ctx, n_keys = n_ctx ? n_ctx : n_k;
    static const char *rk[] = {"", " rope", " rope neox n_rot=hd/2", " rope factors"};
    char cfg[160];
    snprintf(cfg, sizeof cfg, "%s: heads=%d kv=%d hd=%d n=%d keys=%d%s%s%s%s%s%s%s", g->what, g->n_head, g->n_kv, g->hd,
             n, n_keys, n_ctx ? (kvt == WGML_F16 ? " F16 cache" : " F32 cache") : "",
             g->bidirectional ? " bidirectional" : " causal", rk[g->rope_kind], g->seq ? " seq" : "",
             g->pos ? " pos" : "", g->mask ? " mask" : "", g->range ? " range" : "");
    att_case a;
    memset(&a, 0, sizeof a);
    a.n_head = g->n_head, a.n_kv = g->n_kv, a.hd = g->hd, a.use_rope = g->rope_kind != 0;
    a.no_cache = n_ctx == 0, a.bidirectional = g->bidirectional;
    a.rope = (wgml_rope){.n_rot = g->rope_kind == 2 ? g->hd / 2 : g->hd, .neox = g->rope_kind == 2,
                         .freq_base = 10000, .freq_scale = g->rope_kind == 3 ? 0.5f : 1.0f};
    const int qd = g->n_head * g->hd, kvd = g->n_kv * g->hd;
    wgml_error err;
    size_t crow = wgml_row_size(kvt, kvd);
    float *qv = randv(c, (size_t)qd * n, 1), *kv = randv(c, (size_t)kvd * n_k, 1), *vv = randv(c, (size_t)kvd * n_k, 1);
    float *mv = g->mask ? randv(c, (size_t)n * n_keys, 2) : NULL, *tmp = randv(c, (size_t)kvd, 1);
    uint8_t *kc = n_ctx ? wgml_calloc((size_t)n_ctx, crow) : NULL;
    uint8_t *vc = n_ctx ? wgml_calloc((size_t)n_ctx, crow) : NULL;
    wgml_status st =
        qv && kv && vv && tmp && (!g->mask || mv) && (!n_ctx || (kc && vc)) ? WGML_OK : WGML_ERR_OUT_OF_MEMORY;
    if (st) wgml_fail(&err, st, "out of memory");
    for (int j = 0; !st && j < n_ctx; j++) {
        for (int i = 0; i < kvd; i++) tmp[i] = rnd(c);
        wgml_quantize_row(kvt, tmp, kc + (size_t)j * crow, kvd);
        for (int i = 0; i < kvd; i++) tmp[i] = rnd(c);
        wgml_quantize_row(kvt, tmp, vc + (size_t)j * crow, kvd);
    }
    for (int i = 0; mv && i < n * n_keys; i++) {
        if (i % 7 == 3) mv[i] = -INFINITY;
        if (i % 11 == 5) mv[i] = -3.4028235e38f; /* torch's finfo(float32).min */
        if (g->mask == 2 && i < n_keys) mv[i] = -INFINITY;
    }
    if (!st) st = twin_act(c, &a.q, WGML_F32, qd, n, qv, &err);
    if (!st) st = twin_act(c, &a.k, WGML_F32, kvd, n_k, kv, &err);
    if (!st) st = twin_act(c, &a.v, WGML_F32, kvd, n_k, vv, &err);
    if (!st && n_ctx) st = twin_act(c, &a.kc, kvt, kvd, n_ctx, kc, &err);
    if (!st && n_ctx) st = twin_act(c, &a.vc, kvt, kvd, n_ctx, vc, &err);
    if (!st) st = twin_act(c, &a.out, WGML_F32, qd, n, NULL, &err);
    if (!st && g->seq) st = twin_act(c, &a.seq, WGML_I32, n, 1, g->seq, &err);
    if (!st && g->kv_seq) st = twin_act(c, &a.kv_seq, WGML_I32, n_keys, 1, g->kv_seq, &err);
    if (!st && g->pos) st = twin_act(c, &a.pos, WGML_I32, n, 1, g->pos, &err);
    if (!st && mv) st = twin_act(c, &a.mask, WGML_F32, n_keys, n, mv, &err);
    if (!st && g->range) st = twin_act(c, &a.range, WGML_I32, 2, n, g->range, &err);
    if (!st && g->rope_kind == 3) {
        st = twin_weight(c, &a.ff, WGML_F32, a.rope.n_rot / 2, 1, 1, &err);
        a.rope.freq_factors = &a.ff.t[0];
    }
    if (!st) st = run_both(c, g->step_pos, n, att_side, &a, &err);
    double tol = n_ctx && kvt == WGML_F16 ? 2e-3 : 2e-4;
    if (st) {
        report(c, "attention", cfg, INFINITY, 0, st, err.message);
    } else {
        finish(c, "attention", cfg, &a.out, tol);
        if (n_ctx) { /* the whole caches: rows written at the positions, the others as they were */
            size_t bytes = crow * (size_t)n_ctx;
            uint8_t *d = wgml_malloc(bytes + 4), *r = wgml_malloc(bytes + 4);
            float *fd = wgml_malloc((size_t)kvd * n_ctx * 4), *fr = wgml_malloc((size_t)kvd * n_ctx * 4);
            char cc[192];
            for (int which = 0; which < 2; which++) {
                const twin *tw = which ? &a.vc : &a.kc;
                snprintf(cc, sizeof cc, "%s: %s cache", cfg, which ? "V" : "K");
                if (d && r && fd && fr && !c->be[0]->buffer_read(c->be[0], tw->buf[0], 0, d, bytes, &err) &&
                    !c->be[1]->buffer_read(c->be[1], tw->buf[1], 0, r, bytes, &err)) {
                    for (int j = 0; j < n_ctx; j++) {
                        wgml_dequantize_row(kvt, d + (size_t)j * crow, fd + (size_t)j * kvd, kvd);
                        wgml_dequantize_row(kvt, r + (size_t)j * crow, fr + (size_t)j * kvd, kvd);
                    }
                    report(c, "attention", cc, compare(fd, fr, (size_t)kvd * n_ctx), tol, WGML_OK, NULL);
                } else {
                    report(c, "attention", cc, INFINITY, 0, WGML_ERR_GPU, "reading the cache back failed");
                }
            }
            wgml_free(d), wgml_free(r), wgml_free(fd), wgml_free(fr);
        }
    }
    twin *all[] = {&a.q, &a.k, &a.v, &a.kc, &a.vc, &a.out, &a.ff, &a.seq, &a.kv_seq, &a.pos, &a.mask, &a.range};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) twin_free(c, all[i]);
    wgml_free(qv), wgml_free(kv), wgml_free(vv), wgml_free(mv), wgml_free(tmp), wgml_free(kc), wgml_free(vc);
}

/* General attention: encoders (bidirectional, no cache), packed sequences, explicit
 * positions (with and without a cache: several sessions in one step), cross-attention,
 * additive masks. */
static void check_attention_general(ctx *c) {
    const int heads[][3] = {{8, 4, 8}, {4, 1, 64}, {2, 2, 128}};
    for (int h = 0; h < 3; h++) /* BERT-like encoders */
        for (int n = 1; n <= 7; n += 6)
            general_case(c, &(gen_desc){"encoder", heads[h][0], heads[h][1], heads[h][2], n, n, 0, 0, 1,
                                        n == 7 ? h % 4 : 0, NULL, NULL, NULL, 0, NULL});
    /* 3 sequences of 1, 5 and 9 rows packed in one step */
    static const int32_t seq3[15] = {0, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2};
    static const int32_t pos3[15] = {0, 0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 5, 6, 7, 8};
    int32_t rng3[30];
    for (int r = 0; r < 15; r++) {
        rng3[2 * r] = r == 0 ? 0 : r < 6 ? 1 : 6;
        rng3[2 * r + 1] = r == 0 ? 1 : r < 6 ? 6 : 15;
    }
    for (int h = 0; h < 3; h++) {
        if (c->opt->quick && h == 2) continue;
        const int *hh = heads[h];
        general_case(c, &(gen_desc){"packed", hh[0], hh[1], hh[2], 15, 15, 0, 0, 1, 0, seq3, NULL, NULL, 0, NULL});
        general_case(c, &(gen_desc){"packed", hh[0], hh[1], hh[2], 15, 15, 0, 0, 1, 1, seq3, NULL, pos3, 0, NULL});
        general_case(c, &(gen_desc){"packed", hh[0], hh[1], hh[2], 15, 15, 0, 0, 0, 0, seq3, NULL, NULL, 0, NULL});
        general_case(c, &(gen_desc){"packed", hh[0], hh[1], hh[2], 15, 15, 0, 0, 0, 2, seq3, NULL, pos3, 0, NULL});
        /* the same with each row's window of key rows: its sequence's */
        general_case(c, &(gen_desc){"packed", hh[0], hh[1], hh[2], 15, 15, 0, 0, 1, 0, seq3, NULL, NULL, 0, rng3});
        general_case(c, &(gen_desc){"packed", hh[0], hh[1], hh[2], 15, 15, 0, 0, 0, 2, seq3, NULL, pos3, 0, rng3});
    }
    /* windows alone: clamped at both ends, empty (zeros), with a mask and a cache */
    static const int32_t rngx[18] = {-3, 4, 5, 99, 7, 2, 0, 9, 3, 3, 2, 6, 8, 9, 1, 8, -5, -1};
    general_case(c, &(gen_desc){"range", 4, 2, 64, 9, 9, 0, 0, 1, 0, NULL, NULL, NULL, 1, rngx});
    general_case(c, &(gen_desc){"range", 8, 4, 8, 9, 9, 20, 4, 0, 1, NULL, NULL, NULL, 0, rngx});
    /* explicit positions: no cache (large ones: the positions table's upper rows), causal over them */
    static const int32_t posf[5] = {70000, 5, 2000, 1048575, 100};
    general_case(c, &(gen_desc){"positions", 4, 2, 64, 5, 5, 0, 0, 0, 1, NULL, NULL, posf, 0, NULL});
    general_case(c, &(gen_desc){"positions", 4, 2, 64, 5, 5, 0, 0, 1, 3, NULL, NULL, posf, 0, NULL});
    /* into a cache out of order, and two sessions in one step (cache rows [0, 24) and [24, 48)) */
    static const int32_t posc[3] = {7, 1, 4};
    general_case(c, &(gen_desc){"cache positions", 8, 4, 8, 3, 3, 12, 0, 0, 1, NULL, NULL, posc, 0, NULL});
    static const int32_t seqs[4] = {0, 1, 1, 1}, poss[4] = {10, 27, 28, 29};
    int32_t kvseq[48];
    for (int j = 0; j < 48; j++) kvseq[j] = j < 24 ? 0 : 1;
    general_case(c, &(gen_desc){"sessions", 4, 1, 64, 4, 4, 48, 0, 0, 2, seqs, kvseq, poss, 0, NULL});
    general_case(c, &(gen_desc){"sessions", 2, 2, 128, 4, 4, 48, 0, 0, 0, seqs, kvseq, poss, 0, NULL});
    /* cross-attention: 5 query rows over 11 key rows, and two pairs of sequences packed */
    general_case(c, &(gen_desc){"cross", 4, 2, 64, 5, 11, 0, 0, 1, 0, NULL, NULL, NULL, 0, NULL});
    general_case(c, &(gen_desc){"cross", 8, 4, 8, 5, 11, 0, 0, 1, 0, NULL, NULL, NULL, 1, NULL});
    static const int32_t qs2[5] = {0, 0, 1, 1, 1}, ks2[11] = {0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1};
    general_case(c, &(gen_desc){"cross", 2, 2, 128, 5, 11, 0, 0, 1, 0, qs2, ks2, NULL, 0, NULL});
    /* additive masks: an encoder's, causal without a cache, and over a cache (row 0 all hidden: zeros) */
    general_case(c, &(gen_desc){"mask", 4, 1, 64, 9, 9, 0, 0, 1, 0, NULL, NULL, NULL, 1, NULL});
    general_case(c, &(gen_desc){"mask", 8, 4, 8, 9, 9, 0, 3, 0, 1, NULL, NULL, NULL, 1, NULL});
    general_case(c, &(gen_desc){"mask", 2, 2, 128, 2, 2, 24, 20, 0, 1, NULL, NULL, NULL, 2, NULL});
    general_case(c, &(gen_desc){"mask", 4, 2, 64, 9, 9, 0, 0, 1, 0, seq3 + 1, NULL, NULL, 2, NULL});
    /* a causal step without a cache: today's math over the step's rows only */
    general_case(c, &(gen_desc){"no cache", 4, 2, 64, 7, 7, 0, 5, 0, 1, NULL, NULL, NULL, 0, NULL});
}

static void check_attention(ctx *c) {
    const int heads[][3] = {{8, 4, 8}, {4, 1, 64}, {2, 2, 128}};
    const int steps[][2] = {{0, 1}, {0, 7}, {9, 1}, {300, 1}, {700, 3}};
    for (int h = 0; h < 3; h++)
        for (int s = 0; s < 5; s++) {
            if (c->opt->quick && (h + s) % 2) continue;
            attention_case(c, heads[h][0], heads[h][1], heads[h][2], steps[s][0], steps[s][1], (h + s) % 4);
        }
    check_attention_general(c);
}

/* ---- row and elementwise ops ---- */

typedef struct {
    const char *op;
    twin a, b, w, out;
    float param;
    int n_head, hd;
    wgml_rope rope;
    int in_place; /* out is a itself */
} simple_case;

static void simple_side(wgml_backend *be, int s, void *arg) {
    simple_case *k = arg;
    const char *op = k->op;
    const wgml_tensor *out = k->in_place ? &k->a.t[s] : &k->out.t[s], *a = &k->a.t[s], *b = &k->b.t[s];
    if (!strcmp(op, "rms_norm")) wgml_op_rms_norm(be, &(wgml_rms_norm_args){out, a, &k->w.t[s], k->param});
    else if (!strcmp(op, "softmax")) wgml_op_softmax(be, &(wgml_softmax_args){out, a, k->param});
    else if (!strcmp(op, "add")) wgml_op_add(be, &(wgml_add_args){out, a, b});
    else if (!strcmp(op, "swiglu")) wgml_op_swiglu(be, &(wgml_swiglu_args){out, a, b});
    else if (!strcmp(op, "argmax")) wgml_op_argmax(be, &(wgml_argmax_args){out, a});
    else if (!strcmp(op, "rope")) wgml_op_rope(be, &(wgml_rope_args){a, k->n_head, k->hd, &k->rope});
}

static void simple_case_run(ctx *c, const char *op, int64_t n, int64_t rows) {
    simple_case k;
    memset(&k, 0, sizeof k);
    k.op = op;
    k.param = !strcmp(op, "rms_norm") ? 1e-5f : 0.7f;
    char cfg[64];
    snprintf(cfg, sizeof cfg, "n=%lld rows=%lld", (long long)n, (long long)rows);
    wgml_error err;
    float *av = randv(c, (size_t)(n * rows), 3), *bv = randv(c, (size_t)(n * rows), 3);
    wgml_status st = av && bv ? WGML_OK : WGML_ERR_OUT_OF_MEMORY;
    if (!strcmp(op, "argmax") && av) av[n / 2] = av[n - 1] = 100; /* a tie: the first index wins */
    int argmax = !strcmp(op, "argmax"), rope = !strcmp(op, "rope");
    k.in_place = rows == 2 && (!strcmp(op, "rms_norm") || !strcmp(op, "softmax"));
    if (k.in_place) snprintf(cfg + strlen(cfg), sizeof cfg - strlen(cfg), " in place");
    if (!st) st = twin_act(c, &k.a, WGML_F32, n, rows, av, &err);
    if (!st && !rope) st = twin_act(c, &k.b, WGML_F32, n, rows, bv, &err);
    if (!st && !strcmp(op, "rms_norm")) {
        if (rows == 3) { /* the scale computed in the step: an activation at an offset */
            float *wv = randv(c, (size_t)n, 1);
            st = wv ? twin_act_at(c, &k.w, WGML_F32, n, 1, wv, 12, &err) : WGML_ERR_OUT_OF_MEMORY;
            wgml_free(wv);
            snprintf(cfg + strlen(cfg), sizeof cfg - strlen(cfg), " w activation");
        } else {
            st = twin_weight(c, &k.w, WGML_F32, n, 1, 1, &err);
        }
    }
    if (!st && !rope) st = twin_act(c, &k.out, argmax ? WGML_I32 : WGML_F32, argmax ? rows : n, argmax ? 1 : rows, NULL, &err);
    if (rope) {
        k.hd = 16;
        k.n_head = (int)(n / 16);
        k.rope = (wgml_rope){.n_rot = 12, .neox = (int)(rows & 1), .freq_base = 500000, .freq_scale = 1};
        snprintf(cfg, sizeof cfg, "heads=%d hd=16 n_rot=12 pos=41 rows=%lld%s", k.n_head, (long long)rows,
                 k.rope.neox ? " neox" : "");
    }
    if (!st) st = run_both(c, rope ? 41 : 0, (int)rows, simple_side, &k, &err);
    if (st) {
        report(c, op, cfg, INFINITY, 0, st, err.message);
    } else if (argmax) {
        int32_t d[64], r[64];
        st = c->be[0]->buffer_read(c->be[0], k.out.buf[0], 0, d, (size_t)rows * 4, &err);
        if (!st) st = c->be[1]->buffer_read(c->be[1], k.out.buf[1], 0, r, (size_t)rows * 4, &err);
        report(c, op, cfg, st ? INFINITY : memcmp(d, r, (size_t)rows * 4) ? 1.0 : 0.0, 0, st, st ? err.message : NULL);
    } else {
        finish(c, op, cfg, rope || k.in_place ? &k.a : &k.out, 2e-5);
    }
    twin_free(c, &k.a), twin_free(c, &k.b), twin_free(c, &k.w), twin_free(c, &k.out);
    wgml_free(av), wgml_free(bv);
}

/* The row and elementwise ops over ragged sizes. */
static void simple_grid(ctx *c, const char *op) {
    const int64_t sizes[][2] = {{1, 1}, {37, 3}, {1000, 2}, {4099, 1}};
    for (int s = 0; s < 4; s++) simple_case_run(c, op, sizes[s][0], sizes[s][1]);
}
static void check_rms_norm(ctx *c) { simple_grid(c, "rms_norm"); }
static void check_softmax(ctx *c) { simple_grid(c, "softmax"); }
static void check_swiglu(ctx *c) { simple_grid(c, "swiglu"); }
static void check_argmax(ctx *c) { simple_grid(c, "argmax"); }
static void check_rope(ctx *c) {
    simple_case_run(c, "rope", 48, 3);
    simple_case_run(c, "rope", 64, 2);
}

/* ---- the encoders' ops: layer_norm, l2_norm, unary, mul, pool, and add's other cases ---- */

/* Where a case puts an input vector (or b of add and mul). */
enum { IN_NONE, IN_WEIGHT, IN_ACT, IN_OUT_BUF /* an activation in the output's buffer, past its rows */ };
static const char *const in_names[] = {"none", "weight", "activation", "in out's buffer"};

/* An input of n f32 values as a weight or an activation of one row. */
static wgml_status twin_vec(ctx *c, twin *t, int where, const float *v, int64_t n, wgml_error *err) {
    if (where != IN_WEIGHT) return twin_act(c, t, WGML_F32, n, 1, v, err);
    memset(t, 0, sizeof *t);
    t->host = wgml_malloc((size_t)n * 4 + 4);
    if (!t->host) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory");
    memcpy(t->host, v, (size_t)n * 4);
    for (int s = 0; s < 2; s++) {
        wgml_status st = c->be[s]->weight_create(c->be[s], WGML_F32, n, 1, t->host, "opcheck.vector", &t->buf[s], err);
        if (st) return st;
        t->t[s] = (wgml_tensor){.type = WGML_F32, .ne = {n, 1, 1, 1}, .buf = t->buf[s], .name = "opcheck.vector"};
    }
    return WGML_OK;
}

/* One case of an encoder op: x [rows][n] and up to two vectors; out is x itself
 * (in place), or rows [0, out_rows) of a buffer whose later rows hold the
 * vectors placed IN_OUT_BUF (vector i at row out_rows + i). */
typedef struct {
    const char *op;
    twin x, v[2], out, seq;
    int64_t n, rows, out_rows;
    int where[2]; /* IN_* of each vector */
    int in_place;
    int b_rows; /* add, mul: rows of b */
    float eps, pa, pb;
    wgml_unary_kind kind;
    wgml_pool_mode mode;
} nn_case;

static void nn_side(wgml_backend *be, int s, void *arg) {
    nn_case *k = arg;
    wgml_tensor x = k->x.t[s], out = k->in_place ? x : wgml_tensor_rows(&k->out.t[s], 0, k->out_rows), v[2];
    const wgml_tensor *vp[2] = {NULL, NULL};
    for (int i = 0; i < 2; i++) {
        if (k->where[i] == IN_NONE) continue;
        v[i] = k->where[i] == IN_OUT_BUF ? wgml_tensor_rows(&k->out.t[s], k->out_rows + i, k->b_rows ? k->b_rows : 1)
                                         : k->v[i].t[s];
        vp[i] = &v[i];
    }
    const char *op = k->op;
    if (!strcmp(op, "layer_norm")) wgml_op_layer_norm(be, &(wgml_layer_norm_args){&out, &x, vp[0], vp[1], k->eps});
    else if (!strcmp(op, "l2_norm")) wgml_op_l2_norm(be, &(wgml_l2_norm_args){&out, &x, k->eps});
    else if (!strcmp(op, "unary"))
        wgml_op_unary(be, &(wgml_unary_args){&out, &x, k->kind, k->pa, k->pb, vp[0]});
    else if (!strcmp(op, "add")) wgml_op_add(be, &(wgml_add_args){&out, &x, vp[0]});
    else if (!strcmp(op, "mul")) wgml_op_mul(be, &(wgml_mul_args){&out, &x, vp[0]});
    else if (!strcmp(op, "pool")) /* x in out's buffer: the vector slot's rows */
        wgml_op_pool(be, &(wgml_pool_args){&out, vp[0] ? vp[0] : &x, &k->seq.t[s], k->mode});
}

/* Fills in k's tensors (x from xv; vector i from vv[i]), runs the op on both sides and compares out. */
static void nn_run(ctx *c, nn_case *k, const char *cfg, const float *xv, const float *const vv[2], double tol) {
    wgml_error err;
    wgml_status st = twin_act(c, &k->x, WGML_F32, k->n, k->rows, xv, &err);
    int64_t vrows = k->b_rows ? k->b_rows : 1, extra = 0;
    for (int i = 0; i < 2 && !st; i++) {
        if (k->where[i] == IN_WEIGHT || k->where[i] == IN_ACT)
            st = k->where[i] == IN_ACT && vrows > 1 ? twin_act(c, &k->v[i], WGML_F32, k->n, vrows, vv[i], &err)
                                                    : twin_vec(c, &k->v[i], k->where[i], vv[i], k->n, &err);
        if (k->where[i] == IN_OUT_BUF) extra = i + vrows;
    }
    if (!st && !k->in_place) {
        /* out's rows (garbage: the op writes them), then the vectors in its buffer */
        size_t total = (size_t)(k->n * (k->out_rows + extra));
        float *init = randv(c, total, 1);
        for (int i = 0; init && i < 2; i++)
            if (k->where[i] == IN_OUT_BUF)
                memcpy(init + (size_t)(k->n * (k->out_rows + i)), vv[i], (size_t)(k->n * vrows) * 4);
        st = init ? twin_act(c, &k->out, WGML_F32, k->n, k->out_rows + extra, init, &err) : WGML_ERR_OUT_OF_MEMORY;
        wgml_free(init);
    }
    if (!st) st = run_both(c, 0, (int)k->rows, nn_side, k, &err);
    if (st) report(c, k->op, cfg, INFINITY, 0, st, err.message);
    else finish(c, k->op, cfg, k->in_place ? &k->x : &k->out, tol);
    twin *all[] = {&k->x, &k->v[0], &k->v[1], &k->out, &k->seq};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) twin_free(c, all[i]);
}

/* The shapes of the grids: ragged row lengths (no multiple of a workgroup), several rows. */
static const int64_t nn_sizes[][2] = {{1, 1}, {37, 3}, {1000, 2}, {4099, 1}};

static void norm_case(ctx *c, const char *op, int64_t n, int64_t rows, int w, int b, int in_place, float offset) {
    nn_case k = {.op = op, .n = n, .rows = rows, .out_rows = rows, .where = {w, b}, .in_place = in_place,
                 .eps = !strcmp(op, "layer_norm") ? 1e-5f : 1e-12f};
    char cfg[160];
    snprintf(cfg, sizeof cfg, "n=%lld rows=%lld%s%s%s%s%s", (long long)n, (long long)rows,
             w ? " w " : "", w ? in_names[w] : "", b ? " b " : "", b ? in_names[b] : "", in_place ? " in place" : "");
    if (offset != 0) snprintf(cfg + strlen(cfg), sizeof cfg - strlen(cfg), " x+%g", (double)offset);
    float *xv = randv(c, (size_t)(n * rows), 3), *wv = randv(c, (size_t)n, 1), *bv = randv(c, (size_t)n, 1);
    for (int64_t i = 0; xv && i < n * rows; i++) xv[i] += offset;
    for (int64_t i = 0; wv && i < n; i++) wv[i] += 1.0f; /* scales around 1 */
    if (xv && wv && bv) nn_run(c, &k, cfg, xv, (const float *const[]){wv, bv}, 2e-5);
    else report(c, op, cfg, INFINITY, 0, WGML_ERR_OUT_OF_MEMORY, "out of memory");
    wgml_free(xv), wgml_free(wv), wgml_free(bv);
}

static void check_layer_norm(ctx *c) {
    for (int s = 0; s < 4; s++) {
        int64_t n = nn_sizes[s][0], rows = nn_sizes[s][1];
        norm_case(c, "layer_norm", n, rows, IN_WEIGHT, IN_WEIGHT, 0, 0);
        norm_case(c, "layer_norm", n, rows, IN_ACT, IN_ACT, 0, 0);
        norm_case(c, "layer_norm", n, rows, IN_NONE, IN_NONE, 0, 0);
    }
    norm_case(c, "layer_norm", 37, 3, IN_WEIGHT, IN_NONE, 1, 0);
    norm_case(c, "layer_norm", 1000, 2, IN_NONE, IN_ACT, 1, 0);
    norm_case(c, "layer_norm", 300, 5, IN_OUT_BUF, IN_OUT_BUF, 0, 0);
    norm_case(c, "layer_norm", 1000, 2, IN_ACT, IN_WEIGHT, 0, 100); /* far from 0: the variance must not cancel */
    norm_case(c, "layer_norm", 2, 70000, IN_ACT, IN_ACT, 0, 0);     /* rows beyond one grid dimension */
}

static void check_l2_norm(ctx *c) {
    for (int s = 0; s < 4; s++) norm_case(c, "l2_norm", nn_sizes[s][0], nn_sizes[s][1], IN_NONE, IN_NONE, 0, 0);
    norm_case(c, "l2_norm", 37, 3, IN_NONE, IN_NONE, 1, 0);
    norm_case(c, "l2_norm", 1000, 2, IN_NONE, IN_NONE, 0, 100);
}

static void unary_case(ctx *c, wgml_unary_kind kind, int64_t n, int64_t rows, int v, int in_place, double tol) {
    static const char *const names[WGML_UNARY_COUNT] = {"gelu", "gelu_erf", "tanh", "scale", "sigmoid",
                                                        "leaky_relu", "sin", "exp", "snake"};
    nn_case k = {.op = "unary", .n = n, .rows = rows, .out_rows = rows, .where = {v, IN_NONE}, .in_place = in_place,
                 .kind = kind, .pa = kind == WGML_UNARY_LEAKY_RELU ? 0.1f : -0.75f, .pb = 0.5f};
    char cfg[160];
    snprintf(cfg, sizeof cfg, "%s n=%lld rows=%lld%s%s%s", names[kind], (long long)n, (long long)rows,
             v ? " v " : "", v ? in_names[v] : "", in_place ? " in place" : "");
    /* inputs over [-5, 5]: erf's two pieces and its clamp at 4 (x / sqrt 2), exp up to 148 */
    float *xv = randv(c, (size_t)(n * rows), 5), *vv = randv(c, (size_t)n, 0.5f);
    for (int64_t i = 0; vv && i < n; i++) vv[i] += 1.0f; /* snake's alpha in [0.5, 1.5) */
    if (xv && vv) nn_run(c, &k, cfg, xv, (const float *const[]){vv, NULL}, tol);
    else report(c, "unary", cfg, INFINITY, 0, WGML_ERR_OUT_OF_MEMORY, "out of memory");
    wgml_free(xv), wgml_free(vv);
}

static void check_unary(ctx *c) {
    for (int kind = 0; kind < WGML_UNARY_COUNT; kind++) {
        /* erf's approximation is within 1.5e-7 (unary.wgsl); SCALE and LEAKY_RELU round once */
        double tol =
            kind == WGML_UNARY_GELU_ERF || kind == WGML_UNARY_SCALE || kind == WGML_UNARY_LEAKY_RELU ? 1e-6 : 2e-5;
        int v = kind == WGML_UNARY_SNAKE ? IN_WEIGHT : IN_NONE;
        for (int s = 0; s < 4; s++) unary_case(c, (wgml_unary_kind)kind, nn_sizes[s][0], nn_sizes[s][1], v, 0, tol);
    }
    unary_case(c, WGML_UNARY_GELU_ERF, 1000, 2, IN_NONE, 1, 1e-6);
    unary_case(c, WGML_UNARY_SCALE, 37, 3, IN_NONE, 1, 1e-6);
    unary_case(c, WGML_UNARY_SNAKE, 37, 3, IN_ACT, 0, 2e-5);
    unary_case(c, WGML_UNARY_SNAKE, 300, 4, IN_OUT_BUF, 0, 2e-5);
    unary_case(c, WGML_UNARY_SNAKE, 1000, 2, IN_WEIGHT, 1, 2e-5);
    unary_case(c, WGML_UNARY_SNAKE, 2, 70000, IN_ACT, 0, 2e-5); /* rows beyond one grid dimension */
}

/* add and mul: b of a's shape or one row (weight or activation), in place, in out's buffer. */
static void binary_case(ctx *c, const char *op, int64_t n, int64_t rows, int64_t b_rows, int b, int in_place) {
    nn_case k = {.op = op, .n = n, .rows = rows, .out_rows = rows, .where = {b, IN_NONE}, .in_place = in_place,
                 .b_rows = (int)b_rows};
    char cfg[160];
    snprintf(cfg, sizeof cfg, "n=%lld rows=%lld b %s%s%s", (long long)n, (long long)rows,
             b_rows == rows ? "same shape " : "one row ", in_names[b], in_place ? " in place" : "");
    float *xv = randv(c, (size_t)(n * rows), 3), *bv = randv(c, (size_t)(n * b_rows), 3);
    if (xv && bv) nn_run(c, &k, cfg, xv, (const float *const[]){bv, NULL}, 2e-5);
    else report(c, op, cfg, INFINITY, 0, WGML_ERR_OUT_OF_MEMORY, "out of memory");
    wgml_free(xv), wgml_free(bv);
}

static void binary_grid(ctx *c, const char *op) {
    for (int s = 0; s < 4; s++) {
        int64_t n = nn_sizes[s][0], rows = nn_sizes[s][1];
        if (strcmp(op, "add")) binary_case(c, op, n, rows, rows, IN_ACT, 0); /* add's plain case: simple_grid */
        binary_case(c, op, n, rows + 2, 1, IN_ACT, 0);
        binary_case(c, op, n, rows + 2, 1, IN_WEIGHT, 0);
    }
    binary_case(c, op, 37, 1, 1, IN_WEIGHT, 0); /* one row: a weight b of a's shape */
    binary_case(c, op, 1000, 2, 2, IN_ACT, 1);
    binary_case(c, op, 37, 5, 1, IN_WEIGHT, 1);
    binary_case(c, op, 300, 4, 1, IN_OUT_BUF, 0);
    binary_case(c, op, 300, 4, 4, IN_OUT_BUF, 0);
    binary_case(c, op, 3, 70000, 1, IN_ACT, 0); /* rows beyond one grid dimension */
}

static void check_add(ctx *c) {
    simple_grid(c, "add");
    binary_grid(c, "add");
}
static void check_mul(ctx *c) { binary_grid(c, "mul"); }

static void pool_case(ctx *c, wgml_pool_mode mode, int64_t d, const int32_t *seq, int n_seq, int x_in_out) {
    static const char *const modes[] = {"mean", "first", "last"};
    int64_t rows = seq[n_seq];
    /* x in out's buffer: out's rows, then x's */
    nn_case k = {.op = "pool", .n = d, .rows = rows, .out_rows = n_seq, .mode = mode};
    char cfg[160];
    int len = snprintf(cfg, sizeof cfg, "%s d=%lld rows=%lld seq lengths", modes[mode], (long long)d, (long long)rows);
    for (int s = 0; s < n_seq && len < 120; s++)
        len += snprintf(cfg + len, sizeof cfg - (size_t)len, " %d", seq[s + 1] - seq[s]);
    if (x_in_out) snprintf(cfg + len, sizeof cfg - (size_t)len, ", x in out's buffer");
    wgml_error err;
    float *xv = randv(c, (size_t)(d * rows), 3);
    wgml_status st = xv ? twin_act(c, &k.seq, WGML_I32, n_seq + 1, 1, seq, &err) : WGML_ERR_OUT_OF_MEMORY;
    if (st) {
        report(c, "pool", cfg, INFINITY, 0, st, err.message);
        twin_free(c, &k.seq);
    } else if (!x_in_out) {
        nn_run(c, &k, cfg, xv, (const float *const[]){NULL, NULL}, 2e-5);
    } else {
        /* out and x as views of one buffer: pool's x is the vector slot's rows */
        k.where[0] = IN_OUT_BUF;
        k.b_rows = (int)rows;
        nn_run(c, &k, cfg, xv, (const float *const[]){xv, NULL}, 2e-5);
    }
    wgml_free(xv);
}

static void check_pool(ctx *c) {
    static const int32_t one[] = {0, 1}, mixed[] = {0, 1, 4, 5, 12}, longer[] = {0, 40, 41, 300};
    for (int mode = 0; mode < 3; mode++) {
        for (int s = 0; s < 4; s++) {
            int64_t d = nn_sizes[s][0];
            pool_case(c, (wgml_pool_mode)mode, d, one, 1, 0);   /* a single row */
            pool_case(c, (wgml_pool_mode)mode, d, mixed, 4, 0); /* lengths 1 and more */
        }
        pool_case(c, (wgml_pool_mode)mode, 37, longer, 3, 0);
    }
    pool_case(c, WGML_POOL_MEAN, 37, mixed, 4, 1);
}

/* ---- copy: strided views made contiguous, exactly ---- */

enum { CP_TRANSPOSE, CP_COLS, CP_PERMUTE, CP_BROADCAST, CP_VIEW };

typedef struct {
    const char *what;
    int kind;
    int64_t ne[4];        /* the source: a contiguous tensor of this shape */
    int64_t first, n;     /* CP_COLS: columns [first, first+n); CP_BROADCAST: n rows of the first */
    int perm[4];          /* CP_PERMUTE */
    int64_t vne[4];       /* CP_VIEW: shape, strides and offset in elements */
    size_t vnb[4], voff;
    int in_out;           /* the source in out's buffer, after out */
} cp_desc;

typedef struct {
    const cp_desc *d;
    twin src, out; /* each made as one row of all its buffer's elements */
    int64_t out_n; /* elements copied */
} cp_case;

/* The view the case copies, on side s. */
static wgml_tensor cp_view(const cp_case *k, int s) {
    const cp_desc *d = k->d;
    wgml_tensor src = d->in_out ? k->out.t[s] : k->src.t[s];
    src.type = WGML_F32;
    src.offset = d->in_out ? (size_t)k->out_n * 4 : 0;
    for (int i = 0; i < 4; i++) src.ne[i] = d->ne[i] ? d->ne[i] : 1;
    switch (d->kind) {
    case CP_TRANSPOSE: return wgml_tensor_transpose(&src);
    case CP_COLS: return wgml_tensor_cols(&src, d->first, d->n);
    case CP_PERMUTE: return wgml_tensor_permute(&src, d->perm);
    case CP_BROADCAST: return wgml_tensor_broadcast_rows(&src, d->n);
    default: {
        int64_t ne[4];
        size_t nb[4];
        for (int i = 0; i < 4; i++) ne[i] = d->vne[i] ? d->vne[i] : 1, nb[i] = d->vnb[i] * 4;
        return wgml_tensor_view(&src, ne, nb, d->voff * 4);
    }
    }
}

static void cp_side(wgml_backend *be, int s, void *arg) {
    cp_case *k = arg;
    wgml_tensor x = cp_view(k, s);
    wgml_tensor out = {.type = WGML_F32, .ne = {x.ne[0], wgml_tensor_nrows(&x), 1, 1}, .buf = k->out.buf[s],
                       .name = "opcheck.out"};
    wgml_op_copy(be, &(wgml_copy_args){&out, &x});
}

static void copy_case(ctx *c, const cp_desc *d) {
    cp_case k = {.d = d};
    wgml_tensor v = cp_view(&k, 0); /* its shape: no buffer yet */
    k.out_n = wgml_tensor_nelements(&v);
    int64_t sne[4], src_n = 1;
    for (int i = 0; i < 4; i++) src_n *= sne[i] = d->ne[i] ? d->ne[i] : 1;
    char cfg[160];
    int len = snprintf(cfg, sizeof cfg, "%s of [%lld x %lld x %lld x %lld] -> [%lld x %lld x %lld x %lld]", d->what,
                       (long long)sne[3], (long long)sne[2], (long long)sne[1], (long long)sne[0],
                       (long long)v.ne[3], (long long)v.ne[2], (long long)v.ne[1], (long long)v.ne[0]);
    if (d->kind == CP_COLS)
        len += snprintf(cfg + len, sizeof cfg - (size_t)len, " (columns [%lld, %lld))", (long long)d->first,
                        (long long)(d->first + d->n));
    if (d->in_out) snprintf(cfg + len, sizeof cfg - (size_t)len, ", in out's buffer");
    size_t total = (size_t)(k.out_n + (d->in_out ? src_n : 0));
    float *sv = randv(c, (size_t)src_n, 1), *init = wgml_calloc(total + 1, 4),
          *nan = wgml_malloc((size_t)k.out_n * 4 + 4);
    wgml_error err;
    wgml_status st = sv && init && nan ? WGML_OK : wgml_fail(&err, WGML_ERR_OUT_OF_MEMORY, "out of memory");
    if (!st && d->in_out) memcpy(init + k.out_n, sv, (size_t)src_n * 4);
    if (!st && !d->in_out) st = twin_act(c, &k.src, WGML_F32, src_n, 1, sv, &err);
    if (!st) st = twin_act(c, &k.out, WGML_F32, (int64_t)total, 1, init, &err);
    /* NaN where the device writes: an element it skips shows */
    for (int64_t i = 0; !st && i < k.out_n; i++) nan[i] = NAN;
    if (!st) st = c->be[0]->buffer_write(c->be[0], k.out.buf[0], 0, nan, (size_t)k.out_n * 4, &err);
    if (!st) st = run_both(c, 0, 1, cp_side, &k, &err);
    if (st) report(c, "copy", cfg, INFINITY, 0, st, err.message);
    else finish(c, "copy", cfg, &k.out, 0); /* a copy: exact */
    twin_free(c, &k.src), twin_free(c, &k.out);
    wgml_free(sv), wgml_free(init), wgml_free(nan);
}

static void check_copy(ctx *c) {
    /* T, C, P, B, V: a transpose, columns, a permutation, a broadcast row, a general view */
#define T(x0, x1, ...) {.what = "transpose", .kind = CP_TRANSPOSE, .ne = {x0, x1}, __VA_ARGS__}
#define C(x0, x1, f, cols, ...) {.what = "columns", .kind = CP_COLS, .ne = {x0, x1}, .first = f, .n = cols, __VA_ARGS__}
#define P(name, x0, x1, x2, x3, ...) {.what = name, .kind = CP_PERMUTE, .ne = {x0, x1, x2, x3}, .perm = {__VA_ARGS__}}
#define B(x0, rows) {.what = "broadcast of a row", .kind = CP_BROADCAST, .ne = {x0, 1}, .n = rows}
    static const cp_desc cases[] = {
        T(13, 7, .in_out = 0),
        T(33, 64, .in_out = 0),
        T(1, 40, .in_out = 0), /* a column into a row */
        C(120, 5, 40, 40, .in_out = 0), /* q, k, v of a fused [n][3E]: the middle third */
        C(120, 5, 80, 40, .in_out = 0),
        C(37, 1, 3, 30, .in_out = 0),
        P("permute (0 2 1 3): heads and tokens", 8, 3, 5, 1, 0, 2, 1, 3),
        P("permute (2 0 1 3)", 8, 3, 5, 1, 2, 0, 1, 3),
        P("permute (3 1 0 2)", 4, 3, 5, 2, 3, 1, 0, 2),
        P("permute (1 3 2 0)", 7, 2, 3, 4, 1, 3, 2, 0),
        B(37, 9),
        {.what = "broadcast of a column (stride 0 in dim 0)", .kind = CP_VIEW, .ne = {6, 1}, .vne = {5, 6},
         .vnb = {0, 1}},
        {.what = "every second row", .kind = CP_VIEW, .ne = {20, 10}, .vne = {20, 5}, .vnb = {1, 40}},
        {.what = "every second row, columns from 3", .kind = CP_VIEW, .ne = {20, 10}, .vne = {17, 4},
         .vnb = {1, 40}, .voff = 23},
        T(13, 7, .in_out = 1),
        C(120, 5, 40, 40, .in_out = 1),
        /* large: 384k elements, 300k broadcast, and 2.25M (two rows of the flat grid) */
        P("permute (2 0 3 1)", 64, 50, 30, 4, 2, 0, 3, 1),
        B(3, 100000),
        T(1501, 1500, .in_out = 0),
#undef T
#undef C
#undef P
#undef B
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) copy_case(c, &cases[i]);
}

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
    float *r = v ? NULL : randv(c, (size_t)(n * rows), scale);
    if (!v && !r) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory");
    wgml_status st = twin_act(c, &k->t[i], WGML_F32, n, rows, v ? v : r, err);
    wgml_free(r);
    k->used[i] = 1;
    return st;
}

static wgml_status au_weight(ctx *c, au_case *k, int i, uint32_t type, int64_t n, int64_t rows, float scale,
                             wgml_error *err) {
    k->used[i] = 1;
    return twin_weight(c, &k->t[i], type, n, rows, scale, err);
}

/* Runs the case built so far (st: the building's status) and compares slot 0 (or 1 in place). */
static void au_finish(ctx *c, au_case *k, const char *cfg, wgml_status st, wgml_error *err, double tol) {
    const char *op = wgml_op_names[k->op];
    if (!st) st = run_both(c, 0, 1, au_side, k, err);
    if (st) report(c, op, cfg, INFINITY, 0, st, err->message);
    else finish(c, op, cfg, k->in_place ? &k->t[1] : &k->t[0], tol);
    for (int i = 0; i < 5; i++) twin_free(c, &k->t[i]);
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

static void check_im2col(ctx *c) {
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
             (long long)C, K, stride, pad, (long long)T_out, in_names[bias]);
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

static void check_col2im(ctx *c) {
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
    snprintf(cfg, sizeof cfg, "T=%lld C=%lld w %s b %s%s%s", (long long)T, (long long)C, in_names[w], in_names[b],
             in_place ? " in place" : "", offset != 0 ? " far from 0" : "");
    wgml_error err;
    float *x = randv(c, (size_t)(T * C), 3);
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

static void check_instance_norm(ctx *c) {
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

static void check_lstm(ctx *c) {
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

static void check_stft(ctx *c) {
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
    float *w = hann(n_fft), *mag = randv(c, (size_t)(F * B), 1), *ph = randv(c, (size_t)(F * B), (float)M_PI);
    for (int64_t i = 0; mag && i < F * B; i++) mag[i] = expf(2 * mag[i]); /* as exp(conv_post) */
    wgml_status st = w && mag && ph ? au_act(c, &k, 0, hop * (F - 1), 1, NULL, 1, &err)
                                    : wgml_fail(&err, WGML_ERR_OUT_OF_MEMORY, "out of memory");
    if (!st) st = au_act(c, &k, 1, B, F, mag, 0, &err);
    if (!st) st = au_act(c, &k, 2, B, F, ph, 0, &err);
    if (!st) st = au_act(c, &k, 3, n_fft, 1, w, 0, &err);
    wgml_free(w), wgml_free(mag), wgml_free(ph);
    au_finish(c, &k, cfg, st, &err, 2e-5);
}

static void check_istft(ctx *c) {
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
    float *f0 = randv(c, (size_t)N, 1);
    for (int64_t i = 0; f0 && i < N; i++) f0[i] = f0_lo + (f0[i] + 1) * 0.5f * (f0_hi - f0_lo);
    wgml_status st = f0 ? au_act(c, &k, 0, N * upp, 1, NULL, 1, &err)
                        : wgml_fail(&err, WGML_ERR_OUT_OF_MEMORY, "out of memory");
    if (!st) st = au_act(c, &k, 1, N, 1, f0, 0, &err);
    if (!st) st = au_weight(c, &k, 2, WGML_F32, H, 1, 0.5f, &err);
    if (!st) st = au_act(c, &k, 3, 1, 1, NULL, 0.1f, &err);
    wgml_free(f0);
    au_finish(c, &k, cfg, st, &err, 2e-5);
}

static void check_nsf_source(ctx *c) {
    nsf_case(c, 20, 300, 9, -300, 500, 1);   /* Kokoro's: voiced and unvoiced frames */
    nsf_case(c, 1, 300, 9, 100, 100, 2);     /* one frame */
    nsf_case(c, 700, 300, 9, 50, 450, 3);    /* 210000 samples: the phase over a long utterance */
    nsf_case(c, 33, 7, 3, 1000, 5000, 4);    /* other shapes, high pitch */
    nsf_case(c, 16, 300, 9, 0, 20, 5);       /* around the voicing threshold */
    nsf_case(c, 40, 1, 64, -30000, 30000, 0xfedcba9876543210ull); /* upp 1, 64 harmonics, beyond Nyquist */
    nsf_case(c, 5, 4099, 2, 100, 200, 6);    /* long frames */
}

/* One grid per op of ops.h: an op without its check_<name> does not compile. */
static void (*const grids[WGML_OP_COUNT])(ctx *c) = {
#define OPCHECK_GRID(name, NAME, args) [WGML_OP_##NAME] = check_##name,
    WGML_OPS(OPCHECK_GRID)
#undef OPCHECK_GRID
};

int wgml_opcheck_run(wgml_backend *dev, wgml_backend *ref, const wgml_opcheck_options *opt, wgml_opcheck_fn fn,
                     void *user) {
    wgml_opcheck_options o = opt ? *opt : (wgml_opcheck_options){0};
    ctx c = {.be = {dev, ref}, .opt = &o, .fn = fn, .user = user, .rng = o.seed ? o.seed : 0x2545f4914f6cdd1dull};
    for (int op = 0; op < WGML_OP_COUNT; op++) {
        const char *name = wgml_op_names[op];
        if (skip(&c, name)) continue;
        if (!dev->supports(dev, (wgml_op)op, NULL) || !ref->supports(ref, (wgml_op)op, NULL)) {
            report(&c, name, "(all cases)", INFINITY, 0, WGML_ERR_UNSUPPORTED, "the backend does not implement it");
            continue;
        }
        grids[op](&c);
    }
    return c.failures;
}
