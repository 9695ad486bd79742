/*
 * opcheck.c - op-by-op comparison of two backends (see opcheck.h): the driver
 * (one grid per op, each in the file of its op's family: opcheck_impl.h) and
 * the helpers the grids share.
 *
 * Each case builds its tensors twice ("twins": the same bytes on the device
 * and on the reference), runs the op on each in its own step, reads the
 * outputs back and compares them. Tolerances are relative to the output's
 * scale: 2e-4 where both sides compute in f32 (this catches a wrong block,
 * scale, nibble or offset by orders of magnitude), looser where the device
 * legitimately rounds (an f16 KV cache; 8-bit activations: act8_sigma in
 * opcheck_matmul.c).
 */
#include "backend/opcheck_impl.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/quant.h"

float oc_rnd(ctx *c) { /* uniform in [-1, 1) */
    c->rng ^= c->rng << 13;
    c->rng ^= c->rng >> 7;
    c->rng ^= c->rng << 17;
    return (float)((c->rng >> 40) & 0xffffff) / 8388608.0f - 1.0f;
}

float *oc_randv(ctx *c, size_t n, float scale) {
    float *v = wgml_malloc(n * sizeof *v + 4);
    for (size_t i = 0; v && i < n; i++) v[i] = oc_rnd(c) * scale;
    return v;
}

void oc_report(ctx *c, const char *op, const char *config, double err, double tol, wgml_status st, const char *msg) {
    wgml_opcheck_result r = {.op = op, .err = err, .tol = tol, .status = st};
    snprintf(r.config, sizeof r.config, "%s", config);
    r.pass = st == WGML_OK && err <= tol;
    if (msg) snprintf(r.message, sizeof r.message, "%s", msg);
    if (!r.pass) c->failures++;
    if (c->fn) c->fn(c->user, &r);
}

void oc_twin_free(ctx *c, twin *t) {
    for (int s = 0; s < 2; s++)
        if (t->buf[s]) c->be[s]->buffer_free(c->be[s], t->buf[s]);
    wgml_free(t->host);
    memset(t, 0, sizeof *t);
}

/* An activation [ne1][ne0] of `type` on both sides, filled with data (or zeros). */
wgml_status oc_twin_act(ctx *c, twin *t, uint32_t type, int64_t ne0, int64_t ne1, const void *data,
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
wgml_status oc_twin_act_at(ctx *c, twin *t, uint32_t type, int64_t ne0, int64_t ne1, const void *data, size_t pad,
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
wgml_status oc_twin_weight(ctx *c, twin *t, uint32_t type, int64_t ne0, int64_t ne1, float scale,
                           wgml_error *err) {
    memset(t, 0, sizeof *t);
    size_t row = wgml_row_size(type, ne0);
    t->host = wgml_malloc(row * (size_t)ne1 + 4);
    float *f = oc_randv(c, (size_t)ne0, scale);
    if (!t->host || !f) {
        wgml_free(f);
        return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory");
    }
    for (int64_t r = 0; r < ne1; r++) {
        for (int64_t i = 0; i < ne0; i++) f[i] = oc_rnd(c) * scale;
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

double oc_compare(const float *d, const float *r, size_t n) {
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
 * tol_abs > 0 the tolerance is that absolute error in oc_compare()'s units:
 * tol_abs / (1 + max |ref|). */
void oc_finish_abs(ctx *c, const char *op, const char *cfg, twin *out, double tol, double tol_abs) {
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
    oc_report(c, op, cfg, st ? INFINITY : oc_compare(a, b, n), tol, st, st ? err.message : NULL);
    wgml_free(a);
    wgml_free(b);
}

void oc_finish(ctx *c, const char *op, const char *cfg, twin *out, double tol) {
    oc_finish_abs(c, op, cfg, out, tol, 0);
}

/* Runs `body` on both sides, each in one step at (pos, n). Returns the first error. */
wgml_status oc_run_both(ctx *c, int pos, int n, side_fn body, void *arg, wgml_error *err) {
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
int oc_skip(const ctx *c, const char *op) { return c->opt->filter && !in_list(c->opt->filter, op); }
/* a weight type left out by the options' type list */
int oc_skip_type(const ctx *c, uint32_t t) { return c->opt->type && !in_list(c->opt->type, wgml_dtype_name(t)); }

/* The names of IN_NONE, IN_WEIGHT, IN_ACT, IN_OUT_BUF in the cases' configs. */
const char *const oc_in_names[4] = {"none", "weight", "activation", "in out's buffer"};

/* One grid per op of ops.h: an op without its oc_check_<name> does not link. */
static void (*const grids[WGML_OP_COUNT])(ctx *c) = {
#define OPCHECK_GRID(name, NAME, args) [WGML_OP_##NAME] = oc_check_##name,
    WGML_OPS(OPCHECK_GRID)
#undef OPCHECK_GRID
};

int wgml_opcheck_run(wgml_backend *dev, wgml_backend *ref, const wgml_opcheck_options *opt, wgml_opcheck_fn fn,
                     void *user) {
    wgml_opcheck_options o = opt ? *opt : (wgml_opcheck_options){0};
    ctx c = {.be = {dev, ref}, .opt = &o, .fn = fn, .user = user, .rng = o.seed ? o.seed : 0x2545f4914f6cdd1dull};
    for (int op = 0; op < WGML_OP_COUNT; op++) {
        const char *name = wgml_op_names[op];
        if (oc_skip(&c, name)) continue;
        if (!dev->supports(dev, (wgml_op)op, NULL) || !ref->supports(ref, (wgml_op)op, NULL)) {
            oc_report(&c, name, "(all cases)", INFINITY, 0, WGML_ERR_UNSUPPORTED, "the backend does not implement it");
            continue;
        }
        grids[op](&c);
    }
    return c.failures;
}
