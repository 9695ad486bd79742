/*
 * opcheck_copy.c - the grid of copy: strided views (transposes, column
 * slices, permutations, broadcasts) made contiguous, exactly. See opcheck.c.
 */
#include "backend/opcheck_impl.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"

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
    float *sv = oc_randv(c, (size_t)src_n, 1), *init = wgml_calloc(total + 1, 4),
          *nan = wgml_malloc((size_t)k.out_n * 4 + 4);
    wgml_error err;
    wgml_status st = sv && init && nan ? WGML_OK : wgml_fail(&err, WGML_ERR_OUT_OF_MEMORY, "out of memory");
    if (!st && d->in_out) memcpy(init + k.out_n, sv, (size_t)src_n * 4);
    if (!st && !d->in_out) st = oc_twin_act(c, &k.src, WGML_F32, src_n, 1, sv, &err);
    if (!st) st = oc_twin_act(c, &k.out, WGML_F32, (int64_t)total, 1, init, &err);
    /* NaN where the device writes: an element it skips shows */
    for (int64_t i = 0; !st && i < k.out_n; i++) nan[i] = NAN;
    if (!st) st = c->be[0]->buffer_write(c->be[0], k.out.buf[0], 0, nan, (size_t)k.out_n * 4, &err);
    if (!st) st = oc_run_both(c, 0, 1, cp_side, &k, &err);
    if (st) oc_report(c, "copy", cfg, INFINITY, 0, st, err.message);
    else oc_finish(c, "copy", cfg, &k.out, 0); /* a copy: exact */
    oc_twin_free(c, &k.src), oc_twin_free(c, &k.out);
    wgml_free(sv), wgml_free(init), wgml_free(nan);
}

void oc_check_copy(ctx *c) {
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
