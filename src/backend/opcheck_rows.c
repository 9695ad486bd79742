/*
 * opcheck_rows.c - the grids of the row and elementwise ops (rms_norm,
 * softmax, swiglu, argmax, rope) and of the encoders' ops (layer_norm,
 * l2_norm, unary, add, mul, pool), their inputs as weights, activations or
 * in the output's buffer, in place or not. See opcheck.c.
 */
#include "backend/opcheck_impl.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"

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
    float *av = oc_randv(c, (size_t)(n * rows), 3), *bv = oc_randv(c, (size_t)(n * rows), 3);
    wgml_status st = av && bv ? WGML_OK : WGML_ERR_OUT_OF_MEMORY;
    if (!strcmp(op, "argmax") && av) av[n / 2] = av[n - 1] = 100; /* a tie: the first index wins */
    int argmax = !strcmp(op, "argmax"), rope = !strcmp(op, "rope");
    k.in_place = rows == 2 && (!strcmp(op, "rms_norm") || !strcmp(op, "softmax"));
    if (k.in_place) snprintf(cfg + strlen(cfg), sizeof cfg - strlen(cfg), " in place");
    if (!st) st = oc_twin_act(c, &k.a, WGML_F32, n, rows, av, &err);
    if (!st && !rope) st = oc_twin_act(c, &k.b, WGML_F32, n, rows, bv, &err);
    if (!st && !strcmp(op, "rms_norm")) {
        if (rows == 3) { /* the scale computed in the step: an activation at an offset */
            float *wv = oc_randv(c, (size_t)n, 1);
            st = wv ? oc_twin_act_at(c, &k.w, WGML_F32, n, 1, wv, 12, &err) : WGML_ERR_OUT_OF_MEMORY;
            wgml_free(wv);
            snprintf(cfg + strlen(cfg), sizeof cfg - strlen(cfg), " w activation");
        } else {
            st = oc_twin_weight(c, &k.w, WGML_F32, n, 1, 1, &err);
        }
    }
    if (!st && !rope)
        st = oc_twin_act(c, &k.out, argmax ? WGML_I32 : WGML_F32, argmax ? rows : n, argmax ? 1 : rows, NULL, &err);
    if (rope) {
        k.hd = 16;
        k.n_head = (int)(n / 16);
        k.rope = (wgml_rope){.n_rot = 12, .neox = (int)(rows & 1), .freq_base = 500000, .freq_scale = 1};
        snprintf(cfg, sizeof cfg, "heads=%d hd=16 n_rot=12 pos=41 rows=%lld%s", k.n_head, (long long)rows,
                 k.rope.neox ? " neox" : "");
    }
    if (!st) st = oc_run_both(c, rope ? 41 : 0, (int)rows, simple_side, &k, &err);
    if (st) {
        oc_report(c, op, cfg, INFINITY, 0, st, err.message);
    } else if (argmax) {
        int32_t d[64], r[64];
        st = c->be[0]->buffer_read(c->be[0], k.out.buf[0], 0, d, (size_t)rows * 4, &err);
        if (!st) st = c->be[1]->buffer_read(c->be[1], k.out.buf[1], 0, r, (size_t)rows * 4, &err);
        oc_report(c, op, cfg, st ? INFINITY : memcmp(d, r, (size_t)rows * 4) ? 1.0 : 0.0, 0, st,
                  st ? err.message : NULL);
    } else {
        oc_finish(c, op, cfg, rope || k.in_place ? &k.a : &k.out, 2e-5);
    }
    oc_twin_free(c, &k.a), oc_twin_free(c, &k.b), oc_twin_free(c, &k.w), oc_twin_free(c, &k.out);
    wgml_free(av), wgml_free(bv);
}

/* The row and elementwise ops over ragged sizes. */
static void simple_grid(ctx *c, const char *op) {
    const int64_t sizes[][2] = {{1, 1}, {37, 3}, {1000, 2}, {4099, 1}};
    for (int s = 0; s < 4; s++) simple_case_run(c, op, sizes[s][0], sizes[s][1]);
}
void oc_check_rms_norm(ctx *c) { simple_grid(c, "rms_norm"); }
void oc_check_softmax(ctx *c) { simple_grid(c, "softmax"); }
void oc_check_swiglu(ctx *c) { simple_grid(c, "swiglu"); }
void oc_check_argmax(ctx *c) { simple_grid(c, "argmax"); }
void oc_check_rope(ctx *c) {
    simple_case_run(c, "rope", 48, 3);
    simple_case_run(c, "rope", 64, 2);
}

/* ---- the encoders' ops: layer_norm, l2_norm, unary, mul, pool, and add's other cases ---- */

/* An input of n f32 values as a weight or an activation of one row. */
static wgml_status twin_vec(ctx *c, twin *t, int where, const float *v, int64_t n, wgml_error *err) {
    if (where != IN_WEIGHT) return oc_twin_act(c, t, WGML_F32, n, 1, v, err);
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
    wgml_status st = oc_twin_act(c, &k->x, WGML_F32, k->n, k->rows, xv, &err);
    int64_t vrows = k->b_rows ? k->b_rows : 1, extra = 0;
    for (int i = 0; i < 2 && !st; i++) {
        if (k->where[i] == IN_WEIGHT || k->where[i] == IN_ACT)
            st = k->where[i] == IN_ACT && vrows > 1 ? oc_twin_act(c, &k->v[i], WGML_F32, k->n, vrows, vv[i], &err)
                                                    : twin_vec(c, &k->v[i], k->where[i], vv[i], k->n, &err);
        if (k->where[i] == IN_OUT_BUF) extra = i + vrows;
    }
    if (!st && !k->in_place) {
        /* out's rows (garbage: the op writes them), then the vectors in its buffer */
        size_t total = (size_t)(k->n * (k->out_rows + extra));
        float *init = oc_randv(c, total, 1);
        for (int i = 0; init && i < 2; i++)
            if (k->where[i] == IN_OUT_BUF)
                memcpy(init + (size_t)(k->n * (k->out_rows + i)), vv[i], (size_t)(k->n * vrows) * 4);
        st = init ? oc_twin_act(c, &k->out, WGML_F32, k->n, k->out_rows + extra, init, &err) : WGML_ERR_OUT_OF_MEMORY;
        wgml_free(init);
    }
    if (!st) st = oc_run_both(c, 0, (int)k->rows, nn_side, k, &err);
    if (st) oc_report(c, k->op, cfg, INFINITY, 0, st, err.message);
    else oc_finish(c, k->op, cfg, k->in_place ? &k->x : &k->out, tol);
    twin *all[] = {&k->x, &k->v[0], &k->v[1], &k->out, &k->seq};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) oc_twin_free(c, all[i]);
}

/* The shapes of the grids: ragged row lengths (no multiple of a workgroup), several rows. */
static const int64_t nn_sizes[][2] = {{1, 1}, {37, 3}, {1000, 2}, {4099, 1}};

static void norm_case(ctx *c, const char *op, int64_t n, int64_t rows, int w, int b, int in_place, float offset) {
    nn_case k = {.op = op, .n = n, .rows = rows, .out_rows = rows, .where = {w, b}, .in_place = in_place,
                 .eps = !strcmp(op, "layer_norm") ? 1e-5f : 1e-12f};
    char cfg[160];
    snprintf(cfg, sizeof cfg, "n=%lld rows=%lld%s%s%s%s%s", (long long)n, (long long)rows, w ? " w " : "",
             w ? oc_in_names[w] : "", b ? " b " : "", b ? oc_in_names[b] : "", in_place ? " in place" : "");
    if (offset != 0) snprintf(cfg + strlen(cfg), sizeof cfg - strlen(cfg), " x+%g", (double)offset);
    float *xv = oc_randv(c, (size_t)(n * rows), 3), *wv = oc_randv(c, (size_t)n, 1), *bv = oc_randv(c, (size_t)n, 1);
    for (int64_t i = 0; xv && i < n * rows; i++) xv[i] += offset;
    for (int64_t i = 0; wv && i < n; i++) wv[i] += 1.0f; /* scales around 1 */
    if (xv && wv && bv) nn_run(c, &k, cfg, xv, (const float *const[]){wv, bv}, 2e-5);
    else oc_report(c, op, cfg, INFINITY, 0, WGML_ERR_OUT_OF_MEMORY, "out of memory");
    wgml_free(xv), wgml_free(wv), wgml_free(bv);
}

void oc_check_layer_norm(ctx *c) {
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

void oc_check_l2_norm(ctx *c) {
    for (int s = 0; s < 4; s++) norm_case(c, "l2_norm", nn_sizes[s][0], nn_sizes[s][1], IN_NONE, IN_NONE, 0, 0);
    norm_case(c, "l2_norm", 37, 3, IN_NONE, IN_NONE, 1, 0);
    norm_case(c, "l2_norm", 1000, 2, IN_NONE, IN_NONE, 0, 100);
}

static void unary_case(ctx *c, wgml_unary_kind kind, int64_t n, int64_t rows, int v, int in_place, double tol) {
    static const char *const names[WGML_UNARY_COUNT] = {"gelu", "gelu_erf", "tanh", "scale", "sigmoid",
                                                        "leaky_relu", "sin", "exp", "snake", "gelu_quick"};
    nn_case k = {.op = "unary", .n = n, .rows = rows, .out_rows = rows, .where = {v, IN_NONE}, .in_place = in_place,
                 .kind = kind, .pa = kind == WGML_UNARY_LEAKY_RELU ? 0.1f : -0.75f, .pb = 0.5f};
    char cfg[160];
    snprintf(cfg, sizeof cfg, "%s n=%lld rows=%lld%s%s%s", names[kind], (long long)n, (long long)rows,
             v ? " v " : "", v ? oc_in_names[v] : "", in_place ? " in place" : "");
    /* inputs over [-5, 5]: erf's two pieces and its clamp at 4 (x / sqrt 2), exp up to 148 */
    float *xv = oc_randv(c, (size_t)(n * rows), 5), *vv = oc_randv(c, (size_t)n, 0.5f);
    for (int64_t i = 0; vv && i < n; i++) vv[i] += 1.0f; /* snake's alpha in [0.5, 1.5) */
    if (xv && vv) nn_run(c, &k, cfg, xv, (const float *const[]){vv, NULL}, tol);
    else oc_report(c, "unary", cfg, INFINITY, 0, WGML_ERR_OUT_OF_MEMORY, "out of memory");
    wgml_free(xv), wgml_free(vv);
}

void oc_check_unary(ctx *c) {
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
             b_rows == rows ? "same shape " : "one row ", oc_in_names[b], in_place ? " in place" : "");
    float *xv = oc_randv(c, (size_t)(n * rows), 3), *bv = oc_randv(c, (size_t)(n * b_rows), 3);
    if (xv && bv) nn_run(c, &k, cfg, xv, (const float *const[]){bv, NULL}, 2e-5);
    else oc_report(c, op, cfg, INFINITY, 0, WGML_ERR_OUT_OF_MEMORY, "out of memory");
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

void oc_check_add(ctx *c) {
    simple_grid(c, "add");
    binary_grid(c, "add");
}
void oc_check_mul(ctx *c) { binary_grid(c, "mul"); }

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
    float *xv = oc_randv(c, (size_t)(d * rows), 3);
    wgml_status st = xv ? oc_twin_act(c, &k.seq, WGML_I32, n_seq + 1, 1, seq, &err) : WGML_ERR_OUT_OF_MEMORY;
    if (st) {
        oc_report(c, "pool", cfg, INFINITY, 0, st, err.message);
        oc_twin_free(c, &k.seq);
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

void oc_check_pool(ctx *c) {
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
