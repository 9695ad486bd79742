/*
 * opcheck.c - op-by-op comparison of two backends (see opcheck.h).
 *
 * Each case builds its tensors twice ("twins": the same bytes on the device
 * and on the reference), runs the op on each in its own step, reads the
 * outputs back and compares them. Tolerances are relative to the output's
 * scale: 2e-4 where both sides compute in f32 (this catches a wrong block,
 * scale, nibble or offset by orders of magnitude), looser where the device
 * legitimately rounds (an f16 KV cache).
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

/* Reads the f32 output of both sides and compares; reports the case. */
static void finish(ctx *c, const char *op, const char *cfg, twin *out, double tol) {
    size_t n = (size_t)(out->t[0].ne[0] * out->t[0].ne[1]);
    float *a = wgml_malloc(n * 4 + 4), *b = wgml_malloc(n * 4 + 4);
    wgml_error err;
    wgml_status st = !a || !b ? WGML_ERR_OUT_OF_MEMORY : WGML_OK;
    if (!st) st = c->be[0]->buffer_read(c->be[0], out->buf[0], 0, a, n * 4, &err);
    if (!st) st = c->be[1]->buffer_read(c->be[1], out->buf[1], 0, b, n * 4, &err);
    report(c, op, cfg, st ? INFINITY : compare(a, b, n), tol, st, st ? err.message : NULL);
    wgml_free(a);
    wgml_free(b);
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

static int skip(const ctx *c, const char *op) { return c->opt->filter && !strstr(op, c->opt->filter); }
/* a weight type left out by the options' type list */
static int skip_type(const ctx *c, uint32_t t) {
    if (!c->opt->type) return 0;
    const char *name = wgml_dtype_name(t);
    size_t n = strlen(name);
    for (const char *p = c->opt->type; *p;) {
        size_t len = strcspn(p, ",");
        if (len == n && memcmp(p, name, n) == 0) return 0;
        p += len + (p[len] == ',');
    }
    return 1;
}

/* ---- matmul ---- */

typedef struct {
    twin x, norm, w[3], bias[3], out[3];
    int nw;
    wgml_epilogue epi;
    int has_norm, has_bias;
} mm_case;

static void mm_side(wgml_backend *be, int s, void *arg) {
    mm_case *m = arg;
    wgml_matmul mm = {.x = &m->x.t[s], .norm = m->has_norm ? &m->norm.t[s] : NULL, .eps = 1e-5f, .n_w = m->nw,
                      .epilogue = m->epi};
    for (int k = 0; k < m->nw; k++) {
        mm.w[k] = &m->w[k].t[s];
        mm.bias[k] = m->has_bias ? &m->bias[k].t[s] : NULL;
        mm.out[k] = &m->out[m->epi == WGML_EPI_SWIGLU ? 0 : k].t[s];
    }
    be->matmul(be, &mm);
}

static void check_matmul(ctx *c, const uint32_t *types, int nw, int64_t K, const int64_t *M, int64_t n,
                         wgml_epilogue epi, int has_norm, int has_bias) {
    char cfg[160];
    int k = snprintf(cfg, sizeof cfg, "%s", wgml_dtype_name(types[0]));
    for (int i = 1; i < nw; i++) k += snprintf(cfg + k, sizeof cfg - (size_t)k, "+%s", wgml_dtype_name(types[i]));
    snprintf(cfg + k, sizeof cfg - (size_t)k, " K=%lld M=%lld n=%lld%s%s%s%s", (long long)K, (long long)M[0],
             (long long)n, has_norm ? " norm" : "", has_bias ? " bias" : "",
             epi == WGML_EPI_ADD ? " add" : epi == WGML_EPI_SWIGLU ? " swiglu" : "", nw == 3 ? " qkv" : "");
    mm_case m = {.nw = nw, .epi = epi, .has_norm = has_norm, .has_bias = has_bias};
    wgml_error err;
    wgml_status st = WGML_OK;
    float *xv = randv(c, (size_t)(K * n), 1.0f), *nv = randv(c, (size_t)K, 1.0f);
    if (!xv || !nv) st = wgml_fail(&err, WGML_ERR_OUT_OF_MEMORY, "out of memory");
    if (!st) st = twin_act(c, &m.x, WGML_F32, K, n, xv, &err);
    if (!st && has_norm) {
        for (int64_t i = 0; i < K; i++) nv[i] = 1.0f + 0.5f * nv[i];
        st = twin_weight(c, &m.norm, WGML_F32, K, 1, 1, &err);
    }
    for (int i = 0; i < nw && !st; i++) {
        st = twin_weight(c, &m.w[i], types[i], K, M[i], 0.5f, &err);
        if (!st && has_bias) st = twin_weight(c, &m.bias[i], WGML_F32, M[i], 1, 1, &err);
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
        for (int i = 0; i < (epi == WGML_EPI_SWIGLU ? 1 : nw); i++) finish(c, "matmul", cfg, &m.out[i], 2e-4);
    }
    twin *all[] = {&m.x, &m.norm, &m.w[0], &m.w[1], &m.w[2], &m.bias[0], &m.bias[1], &m.bias[2],
                   &m.out[0], &m.out[1], &m.out[2]};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) twin_free(c, all[i]);
    wgml_free(xv);
    wgml_free(nv);
}

static const uint32_t weight_types[] = {WGML_F32, WGML_F16, WGML_BF16, WGML_Q8_0, WGML_Q4_0, WGML_Q4_1, WGML_Q5_0,
                                        WGML_Q5_1, WGML_Q2_K, WGML_Q3_K, WGML_Q4_K, WGML_Q5_K, WGML_Q6_K};

static void matmul_grid(ctx *c) {
    if (skip(c, "matmul")) return;
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
                    check_matmul(c, &t, 1, Ks[ki], M, ns[ni], WGML_EPI_STORE, 0, 0);
                }
            }
        }
        /* fused variants on one shape per type */
        int64_t K = bs == 256 ? 256 : 96, M3[3] = {40, 24, 24};
        uint32_t tt[3] = {t, t, t};
        for (int n = 1; n <= 9; n += 8) {
            check_matmul(c, tt, 1, K, M3, n, WGML_EPI_ADD, 1, 1);
            check_matmul(c, tt, 2, K, M3 + 1, n, WGML_EPI_SWIGLU, 1, 0);
            check_matmul(c, tt, 3, K, M3, n, WGML_EPI_STORE, 1, 0);
            check_matmul(c, tt, 3, K, M3, n, WGML_EPI_STORE, 1, 1);
        }
    }
    /* mixed types in one call (as Q4_K_M's attention) */
    uint32_t mix[3] = {WGML_F16, WGML_Q8_0, WGML_F32};
    int64_t M3[3] = {33, 17, 17};
    if (!skip_type(c, mix[0]) && !skip_type(c, mix[1]) && !skip_type(c, mix[2]) && dev->supports_type(dev, WGML_Q8_0))
        check_matmul(c, mix, 3, 64, M3, 3, WGML_EPI_STORE, 1, 0);
}

/* ---- get_rows ---- */

typedef struct {
    twin table, ids, out;
} gr_case;

static void gr_side(wgml_backend *be, int s, void *arg) {
    gr_case *g = arg;
    be->get_rows(be, &g->out.t[s], &g->table.t[s], &g->ids.t[s]);
}

static void get_rows_grid(ctx *c) {
    if (skip(c, "get_rows")) return;
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
}

/* ---- attention ---- */

typedef struct {
    twin q, k, v, kc, vc, out, ff;
    wgml_rope rope;
    int use_rope;
    int n_head, n_kv, hd;
} att_case;

static void att_side(wgml_backend *be, int s, void *arg) {
    att_case *a = arg;
    wgml_rope r = a->rope;
    if (r.freq_factors) r.freq_factors = &a->ff.t[s];
    be->attention(be, &(wgml_attention){.q = &a->q.t[s], .k = &a->k.t[s], .v = &a->v.t[s], .k_cache = &a->kc.t[s],
                                        .v_cache = &a->vc.t[s], .out = &a->out.t[s], .n_head = a->n_head,
                                        .n_head_kv = a->n_kv, .head_dim = a->hd,
                                        .scale = 1.0f / sqrtf((float)a->hd), .rope = a->use_rope ? &r : NULL});
}

static void check_attention(ctx *c, int n_head, int n_kv, int hd, int pos, int n, int rope_kind) {
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

static void attention_grid(ctx *c) {
    if (skip(c, "attention")) return;
    const int heads[][3] = {{8, 4, 8}, {4, 1, 64}, {2, 2, 128}};
    const int steps[][2] = {{0, 1}, {0, 7}, {9, 1}, {300, 1}, {700, 3}};
    for (int h = 0; h < 3; h++)
        for (int s = 0; s < 5; s++) {
            if (c->opt->quick && (h + s) % 2) continue;
            check_attention(c, heads[h][0], heads[h][1], heads[h][2], steps[s][0], steps[s][1], (h + s) % 4);
        }
}

/* ---- row and elementwise ops ---- */

typedef struct {
    const char *op;
    twin a, b, w, out;
    float param;
    int n_head, hd;
    wgml_rope rope;
} simple_case;

static void simple_side(wgml_backend *be, int s, void *arg) {
    simple_case *k = arg;
    const char *op = k->op;
    if (!strcmp(op, "rms_norm")) be->rms_norm(be, &k->out.t[s], &k->a.t[s], &k->w.t[s], k->param);
    else if (!strcmp(op, "softmax")) be->softmax(be, &k->out.t[s], &k->a.t[s], k->param);
    else if (!strcmp(op, "add")) be->add(be, &k->out.t[s], &k->a.t[s], &k->b.t[s]);
    else if (!strcmp(op, "swiglu")) be->swiglu(be, &k->out.t[s], &k->a.t[s], &k->b.t[s]);
    else if (!strcmp(op, "argmax")) be->argmax(be, &k->out.t[s], &k->a.t[s]);
    else if (!strcmp(op, "rope")) be->rope(be, &k->a.t[s], k->n_head, k->hd, &k->rope);
}

static void check_simple(ctx *c, const char *op, int64_t n, int64_t rows) {
    if (skip(c, op)) return;
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
    if (!st) st = twin_act(c, &k.a, WGML_F32, n, rows, av, &err);
    if (!st && !rope) st = twin_act(c, &k.b, WGML_F32, n, rows, bv, &err);
    if (!st && !strcmp(op, "rms_norm")) st = twin_weight(c, &k.w, WGML_F32, n, 1, 1, &err);
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
        finish(c, op, cfg, rope ? &k.a : &k.out, 2e-5);
    }
    twin_free(c, &k.a), twin_free(c, &k.b), twin_free(c, &k.w), twin_free(c, &k.out);
    wgml_free(av), wgml_free(bv);
}

int wgml_opcheck_run(wgml_backend *dev, wgml_backend *ref, const wgml_opcheck_options *opt, wgml_opcheck_fn fn,
                     void *user) {
    wgml_opcheck_options o = opt ? *opt : (wgml_opcheck_options){0};
    ctx c = {.be = {dev, ref}, .opt = &o, .fn = fn, .user = user, .rng = o.seed ? o.seed : 0x2545f4914f6cdd1dull};
    matmul_grid(&c);
    get_rows_grid(&c);
    attention_grid(&c);
    const int64_t sizes[][2] = {{1, 1}, {37, 3}, {1000, 2}, {4099, 1}};
    const char *ops[] = {"rms_norm", "softmax", "add", "swiglu", "argmax"};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        for (int s = 0; s < 4; s++) check_simple(&c, ops[i], sizes[s][0], sizes[s][1]);
    check_simple(&c, "rope", 48, 3);
    check_simple(&c, "rope", 64, 2);
    return c.failures;
}
