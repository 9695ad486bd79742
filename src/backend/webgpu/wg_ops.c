/*
 * wg_ops.c - the ops of ops.h as dispatches of the kernels in kernels/, and
 * the backend's one entry point, wg_run.
 *
 * wg_run checks an op's arguments (wgml_op_validate) and calls wg_op_<name>
 * (those of the encoders' ops are in wg_ops_nn.c, rope and attention in
 * wg_ops_attention.c);
 * each checks what only this backend needs (weights whole, activations
 * 4-byte aligned in their buffers, inputs and outputs in distinct buffers),
 * then fills a kernel's
 * parameter struct (laid out as the WGSL struct: 4-byte fields, vec4s at
 * 16-byte offsets) and records the dispatch. Activation and KV tensors bind
 * their whole GPU buffer and pass their offset as a parameter, so the bind
 * group of a slot stays the same from step to step.
 *
 * Matrix products choose between matvec.wgsl (decode: one or two tokens,
 * memory-bound) and matmul.wgsl (prompts: register-blocked tiles). Weights
 * sharing an input are fused into one dispatch when they have the same type,
 * fit one binding each, and the kernel stays within the device's storage
 * bindings per stage; otherwise each weight (window) gets its own dispatch.
 */
#include <math.h>
#include <string.h>

#include "backend/webgpu/wg_internal.h"
#include "backend/webgpu/wgsl_sources.h"
#include "core/alloc.h"
#include "core/dtype.h"
#include "core/error.h"

#define MATVEC_MAX_TOKENS 2

static wg_backend *WB(wgml_backend *be) { return (wg_backend *)be; }

/* Matrix-product operands may be weights or activations (computed in the
 * step): a weight is bound through its windows (wg_window: repacked rows), an
 * activation is one window of plain f32 rows at its element offset. */
static int n_windows(const wgml_tensor *t) { return t->buf->is_weight ? t->buf->n_windows : 1; }

/* A vector operand (norm, bias): its buffer and element offset. */
static wgml_gpu_binding vec_binding(uint32_t binding, const wgml_tensor *t, uint32_t *elem_off) {
    *elem_off = (uint32_t)(t->offset / 4);
    return (wgml_gpu_binding){binding, t->buf->is_weight ? t->buf->win[0].gpu : t->buf->gpu, 0, 0};
}

static int distinct(wg_backend *wb, const char *op, const wgml_tensor *out, const wgml_tensor *in);

/* Checks a matmul operand that may be a weight or an f32 activation (not in out's buffer). */
static int operand(wg_backend *wb, const wgml_tensor *t, const wgml_matmul_args *mm) {
    if (t->buf && t->buf->is_weight) return wg_weight(wb, "matmul", t);
    if (!wg_act(wb, "matmul", t, NULL)) return 0;
    if (t->type != WGML_F32) {
        wg_error(wb, WGML_ERR_UNSUPPORTED, "matmul: activation operand '%s' must be f32, is %s",
                 t->name ? t->name : "?", wgml_dtype_name(t->type));
        return 0;
    }
    for (int k = 0; k < WGML_MATMUL_MAX; k++) /* WebGPU forbids binding the written buffer twice */
        if (mm->out[k] && !distinct(wb, "matmul", mm->out[k], t)) return 0;
    return 1;
}

/* A vector operand (bias, norm): a piece of an f32 weight, or an activation as operand() takes it. */
static int vec_operand(wg_backend *wb, const wgml_tensor *t, const wgml_matmul_args *mm) {
    if (t->buf && t->buf->is_weight) return wg_weight_vec(wb, "matmul", t);
    return operand(wb, t, mm);
}

/* ---- matrix products ---- */

typedef struct {
    uint32_t K, n, x_off, x_stride, norm_off;
    float eps;
    uint32_t bpr, ngroups;
    uint32_t m[4], sb[4], wo[4], oo[4], os[4], bo[4], row0[4], roff[4];
} mm_params;
_Static_assert(sizeof(mm_params) == 160, "mm_params must match MMParams in mm_common.wgsl");

/* The part of window w of weight t's buffer a view of its rows covers: *m
 * rows from window row *roff, the view's rows from *row0 (*m = 0: none). */
static void window_part(const wgml_tensor *t, const wg_window *w, uint32_t *m, uint32_t *roff, uint32_t *row0) {
    int64_t first = (int64_t)(t->offset / wgml_row_size(t->buf->wtype, t->buf->ne0)), n = wgml_tensor_nrows(t);
    int64_t lo = first > w->row0 ? first : w->row0;
    int64_t hi = first + n < w->row0 + w->rows ? first + n : w->row0 + w->rows;
    *m = hi > lo ? (uint32_t)(hi - lo) : 0;
    *roff = hi > lo ? (uint32_t)(lo - w->row0) : 0;
    *row0 = hi > lo ? (uint32_t)(lo - first) : 0;
}

static uint32_t groups_per_row(uint32_t type, int64_t K) {
    const wgml_dtype_traits *tr = wgml_dtype_get(type);
    return tr->block_size == 1 ? wg_div_up((uint64_t)K, 4) : (uint32_t)(K / 32);
}

/* One dispatch: weights w[0..nw) (window `win` of each), sharing x and the norm. */
typedef struct {
    int nw;
    const wgml_tensor *w[WGML_MATMUL_MAX];
    const wgml_tensor *bias[WGML_MATMUL_MAX];
    const wgml_tensor *out[WGML_MATMUL_MAX];
    int win; /* window index (all weights use the same one when nw > 1: then each has one window) */
} mm_group;

static int n_out_of(const mm_group *g, wgml_epilogue epi) { return epi == WGML_EPI_SWIGLU ? 1 : g->nw; }

static void mm_dispatch(wg_backend *wb, const wgml_matmul_args *mm, const mm_group *g, wgml_epilogue epi) {
    int64_t K = mm->x->ne[0], n = wgml_tensor_nrows(mm->x);
    uint32_t type = g->w[0]->type;
    uint32_t flags = (uint32_t)g->nw << WGF_NW_SHIFT;
    if (mm->norm) flags |= WGF_NORM;
    if (epi == WGML_EPI_ADD) flags |= WGF_ADD;
    if (epi == WGML_EPI_SWIGLU) flags |= WGF_SWIGLU;
    for (int k = 0; k < g->nw; k++) {
        if (g->bias[k]) flags |= WGF_BIAS0 << k;
        if (g->w[k]->buf->is_weight && g->w[k]->offset) flags |= WGF_ROW_VIEW;
    }
    wg_kind kind = n <= MATVEC_MAX_TOKENS && !mm->batch_invariant ? WGK_MATVEC : WGK_MATMUL;
    wgml_gpu_kernel *kr = wg_get_kernel(wb, kind, type, flags);
    if (!kr) return;

    mm_params p = {.K = (uint32_t)K, .n = (uint32_t)n, .x_stride = (uint32_t)K, .eps = mm->eps,
                   .bpr = (uint32_t)(K / wgml_dtype_get(type)->block_size), .ngroups = groups_per_row(type, K)};
    wgml_gpu_binding b[WG_MAX_BINDINGS];
    int nb = 0;
    if (!wg_act(wb, "matmul", mm->x, &p.x_off)) return;
    for (int k = 0; k < n_out_of(g, epi); k++)
        if (!distinct(wb, "matmul", g->out[k], mm->x)) return;
    b[nb++] = wg_bind(2, mm->x);
    if (mm->norm) b[nb++] = vec_binding(3, mm->norm, &p.norm_off);
    uint32_t max_m = 0;
    int n_out = epi == WGML_EPI_SWIGLU ? 1 : g->nw;
    for (int k = 0; k < g->nw; k++) {
        const wgml_tensor *wt = g->w[k];
        if (wt->buf->is_weight) {
            const wg_window *w = &wt->buf->win[g->win];
            window_part(wt, w, &p.m[k], &p.roff[k], &p.row0[k]);
            p.sb[k] = w->sb_word;
            b[nb++] = (wgml_gpu_binding){4 + (uint32_t)k, w->gpu, 0, 0};
        } else { /* f32 rows of an activation, at its offset */
            p.m[k] = (uint32_t)wgml_tensor_nrows(wt);
            p.wo[k] = (uint32_t)(wt->offset / 4);
            b[nb++] = wg_bind(4 + (uint32_t)k, wt);
        }
        if (p.m[k] > max_m) max_m = p.m[k];
        if (g->bias[k]) b[nb++] = vec_binding(7 + (uint32_t)k, g->bias[k], &p.bo[k]);
    }
    for (int k = 0; k < n_out; k++) {
        if (!wg_act(wb, "matmul", g->out[k], &p.oo[k])) return;
        p.os[k] = (uint32_t)g->out[k]->ne[0];
        b[nb++] = wg_bind(10 + (uint32_t)k, g->out[k]);
    }
    if (epi == WGML_EPI_SWIGLU) p.row0[1] = p.row0[0];
    int nz = epi == WGML_EPI_SWIGLU ? 1 : g->nw;
    /* rows per matvec workgroup: R, or R per lane in lane rows */
    uint64_t mv_rows = (uint64_t)wg_matvec_rows(wb, flags) * (wb->mv_lane_rows ? (uint64_t)wb->mv_lane_wg : 1);
    if (kind == WGK_MATVEC)
        wg_dispatch_kernel(wb, kr, &p, sizeof p, b, nb, wg_div_up(max_m, mv_rows), (uint32_t)n, (uint32_t)nz);
    else
        wg_dispatch_kernel(wb, kr, &p, sizeof p, b, nb, wg_div_up(max_m, 32), wg_div_up((uint64_t)n, 32), (uint32_t)nz);
}

static int storage_bindings(const wgml_matmul_args *mm, int nw, int nbias, int nout) {
    return 1 + (mm->norm ? 1 : 0) + nw + nbias + nout;
}

static void elementwise(wg_backend *wb, wg_kind kind, const char *op, const wgml_tensor *out, const wgml_tensor *a,
                        const wgml_tensor *b);

/* SwiGLU whose weights cannot share one dispatch (different types, or split
 * into windows): gate and up products into backend scratch, then silu(g) * u. */
static void swiglu_unfused(wg_backend *wb, const wgml_matmul_args *mm) {
    int64_t M = wgml_tensor_nrows(mm->w[0]), n = wgml_tensor_nrows(mm->x);
    size_t need = (size_t)(M * n) * sizeof(float);
    for (int i = 0; i < 2; i++) {
        if (wb->tmp[i] && wb->tmp[i]->size >= need) continue;
        if (wb->tmp[i]) wb->base.buffer_free(&wb->base, wb->tmp[i]);
        wb->tmp[i] = NULL;
        wgml_error e;
        if (wb->base.buffer_create(&wb->base, need, WGML_BUFFER_ACTIVATIONS, &wb->tmp[i], &e)) {
            wgml_sticky_set(&wb->sticky, &e);
            return;
        }
    }
    wgml_tensor t[2];
    for (int i = 0; i < 2; i++) {
        t[i] = (wgml_tensor){.type = WGML_F32, .ne = {M, n, 1, 1}, .buf = wb->tmp[i], .name = i ? "swiglu.up" : "swiglu.gate"};
        for (int w = 0; w < n_windows(mm->w[i]); w++) {
            mm_group g = {.nw = 1, .w = {mm->w[i]}, .bias = {mm->bias[i]}, .out = {&t[i]}, .win = w};
            mm_dispatch(wb, mm, &g, WGML_EPI_STORE);
        }
    }
    elementwise(wb, WGK_SWIGLU, "matmul", mm->out[0], &t[0], &t[1]);
}

/* A convolution (mm->conv): im2col into the backend's scratch, then the
 * product of that unfolding. */
static void mm_conv(wg_backend *wb, const wgml_matmul_args *mm) {
    const wgml_conv1d *c = &mm->conv;
    const int64_t T = wgml_tensor_nrows(mm->x), C = mm->x->ne[0], W = mm->w[0]->ne[0], Ct = W / c->kernel;
    const int64_t n = wgml_conv1d_rows(c, T);
    const uint64_t bytes = (uint64_t)(n * W) * sizeof(float);
    wgml_gpu_buffer *g = wg_scratch(wb, "matmul (convolution)", bytes);
    if (!g) return;
    wgml_buffer b = {.gpu = g, .size = (size_t)bytes};
    wgml_tensor u = {.type = WGML_F32, .ne = {W, n, 1, 1}, .buf = &b, .name = "unfolding"};
    wg_op_im2col(wb, &(wgml_im2col_args){.out = &u, .x = mm->x, .kernel = c->kernel, .stride = c->stride,
                                         .dilation = c->dilation, .pad_l = c->pad_l, .pad_r = c->pad_r});
    if (Ct > C)
        wg_op_im2col(wb, &(wgml_im2col_args){.out = &u, .kernel = c->kernel, .c0 = (int)C, .zero_c = (int)(Ct - C)});
    wgml_matmul_args plain = *mm;
    plain.x = &u, plain.conv = (wgml_conv1d){0};
    wg_op_matmul(wb, &plain);
}

void wg_op_matmul(wg_backend *wb, const wgml_matmul_args *mm) {
    wgml_backend *be = &wb->base;
    if (mm->conv.kernel) {
        mm_conv(wb, mm);
        return;
    }
    int swiglu = mm->epilogue == WGML_EPI_SWIGLU;
    int same_type = 1, single = 1, nbias = 0;
    for (int i = 0; i < mm->n_w; i++) {
        if (!operand(wb, mm->w[i], mm)) return;
        if (!be->supports_type(be, mm->w[i]->type)) {
            wg_error(wb, WGML_ERR_UNSUPPORTED, "matmul: weight '%s' has type %s, which the WebGPU backend cannot use",
                     mm->w[i]->name ? mm->w[i]->name : "?", wgml_dtype_name(mm->w[i]->type));
            return;
        }
        if (mm->bias[i] && !vec_operand(wb, mm->bias[i], mm)) return;
        same_type &= mm->w[i]->type == mm->w[0]->type;
        single &= n_windows(mm->w[i]) == 1;
        nbias += mm->bias[i] != NULL;
    }
    if (mm->norm && !vec_operand(wb, mm->norm, mm)) return;
    int n_out = swiglu ? 1 : mm->n_w;
    int fused = mm->n_w == 1 ||
                (same_type && single &&
                 storage_bindings(mm, mm->n_w, nbias, n_out) <= (int)wb->info->max_storage_buffers_per_stage);
    if (fused && n_windows(mm->w[0]) == 1) {
        mm_group g = {.nw = mm->n_w};
        for (int i = 0; i < mm->n_w; i++) g.w[i] = mm->w[i], g.bias[i] = mm->bias[i], g.out[i] = mm->out[i];
        mm_dispatch(wb, mm, &g, mm->epilogue);
        return;
    }
    if (swiglu) {
        swiglu_unfused(wb, mm);
        return;
    }
    /* one dispatch per weight and window */
    for (int i = 0; i < mm->n_w; i++) {
        for (int w = 0; w < n_windows(mm->w[i]); w++) {
            mm_group g = {.nw = 1, .w = {mm->w[i]}, .bias = {mm->bias[i]}, .out = {mm->out[i]}, .win = w};
            mm_dispatch(wb, mm, &g, mm->epilogue);
        }
    }
}

/* ---- embedding lookup ---- */

void wg_op_get_rows(wg_backend *wb, const wgml_get_rows_args *a) {
    if (!a->table->buf->is_weight) { wg_get_rows_act(wb, a); return; } /* an activation table: wg_ops_copy.c */
    const wgml_tensor *out = a->out, *table = a->table, *ids = a->ids;
    mm_params p = {0};
    if (!wg_weight(wb, "get_rows", table) || !wg_act(wb, "get_rows", out, &p.oo[0]) ||
        !wg_act(wb, "get_rows", ids, &p.x_off))
        return;
    wgml_gpu_kernel *k =
        wg_get_kernel(wb, WGK_GET_ROWS, table->type, (1u << WGF_NW_SHIFT) | (table->offset ? WGF_ROW_VIEW : 0));
    if (!k) return;
    int64_t K = table->ne[0], n = wgml_tensor_nrows(out);
    p.K = (uint32_t)K;
    p.n = (uint32_t)n;
    p.os[0] = (uint32_t)K;
    p.bpr = (uint32_t)(K / wgml_dtype_get(table->type)->block_size);
    p.ngroups = groups_per_row(table->type, K);
    for (int w = 0; w < table->buf->n_windows; w++) {
        const wg_window *win = &table->buf->win[w];
        window_part(table, win, &p.m[0], &p.roff[0], &p.row0[0]);
        if (!p.m[0]) continue;
        p.sb[0] = win->sb_word;
        wgml_gpu_binding b[3] = {{13, ids->buf->gpu, 0, 0}, {4, win->gpu, 0, 0}, wg_bind(10, out)};
        wg_dispatch_kernel(wb, k, &p, sizeof p, b, 3, wg_div_up(wg_div_up((uint64_t)K, 4), 64), (uint32_t)n, 1);
    }
}

/* ---- row and elementwise ops ---- */

typedef struct {
    uint32_t n, x_off, o_off, w_off;
    float eps, scale;
    uint32_t pad0, pad1;
} row_params;

/* One workgroup per row of x (shapes and types were validated). */
static void row_op(wg_backend *wb, wg_kind kind, const char *op, const wgml_tensor *out, const wgml_tensor *x,
                   const wgml_tensor *w, float eps, float scale) {
    /* rms_norm and softmax may run in place (out the very view of x, validated): x is then read through out */
    int in_place = kind != WGK_ARGMAX && x->buf == out->buf;
    if (kind == WGK_ARGMAX && !distinct(wb, op, out, x)) return;
    row_params p = {.n = (uint32_t)x->ne[0], .eps = eps, .scale = scale};
    if (!wg_act(wb, op, x, &p.x_off) || !wg_act(wb, op, out, &p.o_off)) return;
    int64_t rows = wgml_tensor_nrows(x);
    wgml_gpu_binding b[3] = {wg_bind(3, out)};
    int nb = 1;
    if (!in_place) b[nb++] = wg_bind(2, x);
    if (w) { /* a weight, or an f32 activation apart from out */
        if (w->buf && w->buf->is_weight ? !wg_weight(wb, op, w) : !wg_act(wb, op, w, NULL) || !distinct(wb, op, out, w))
            return;
        b[nb++] = vec_binding(4, w, &p.w_off);
    }
    wgml_gpu_kernel *k = wg_get_kernel(wb, kind, 0, in_place ? WGF_IN0_IS_OUT : 0);
    if (k) wg_dispatch_kernel(wb, k, &p, sizeof p, b, nb, (uint32_t)rows, 1, 1);
}

void wg_op_rms_norm(wg_backend *wb, const wgml_rms_norm_args *a) {
    row_op(wb, WGK_RMS_NORM, "rms_norm", a->out, a->x, a->w, a->eps, 1);
}

void wg_op_softmax(wg_backend *wb, const wgml_softmax_args *a) {
    row_op(wb, WGK_SOFTMAX, "softmax", a->out, a->x, NULL, 0, a->scale);
}

void wg_op_argmax(wg_backend *wb, const wgml_argmax_args *a) {
    row_op(wb, WGK_ARGMAX, "argmax", a->out, a->x, NULL, 0, 1);
}

typedef struct {
    uint32_t n, a_off, b_off, o_off, row_len, pad0, pad1, pad2;
} ew_params;

/* WebGPU forbids binding one buffer as both input and output of a dispatch. */
static int distinct(wg_backend *wb, const char *op, const wgml_tensor *out, const wgml_tensor *in) {
    if (in && out && in->buf && in->buf == out->buf) {
        wg_error(wb, WGML_ERR_UNSUPPORTED, "%s: on WebGPU the output '%s' must not share a buffer with input '%s'", op,
                 out->name ? out->name : "?", in->name ? in->name : "?");
        return 0;
    }
    return 1;
}

/* out = a (op) b over f32 tensors of one shape (validated, or made so by the caller). */
static void elementwise(wg_backend *wb, wg_kind kind, const char *op, const wgml_tensor *out, const wgml_tensor *a,
                        const wgml_tensor *b) {
    if (!distinct(wb, op, out, a) || !distinct(wb, op, out, b)) return;
    int64_t n = wgml_tensor_nelements(out);
    ew_params p = {.n = (uint32_t)n, .row_len = 64u * 32768u};
    if (!wg_act(wb, op, a, &p.a_off) || !wg_act(wb, op, b, &p.b_off) || !wg_act(wb, op, out, &p.o_off)) return;
    wgml_gpu_kernel *k = wg_get_kernel(wb, kind, 0, 0);
    if (!k) return;
    wgml_gpu_binding bd[3] = {wg_bind(2, a), wg_bind(3, b), wg_bind(4, out)};
    uint64_t first = (uint64_t)n < p.row_len ? (uint64_t)n : p.row_len;
    wg_dispatch_kernel(wb, k, &p, sizeof p, bd, 3, wg_div_up(first, 64), wg_div_up((uint64_t)n, p.row_len), 1);
}

void wg_op_add(wg_backend *wb, const wgml_add_args *a) {
    /* b of a's shape, and three activations in buffers of their own (decode's adds): the plain kernel */
    if (wgml_tensor_nrows(a->b) == wgml_tensor_nrows(a->a) && !a->b->buf->is_weight && a->out->buf != a->a->buf &&
        a->out->buf != a->b->buf)
        elementwise(wb, WGK_ADD, "add", a->out, a->a, a->b);
    else /* one row of b for all rows of a, a weight b, or in place (wg_ops_nn.c) */
        wg_binary_rows(wb, WGK_ADD, "add", a->out, a->a, a->b);
}

void wg_op_swiglu(wg_backend *wb, const wgml_swiglu_args *a) {
    elementwise(wb, WGK_SWIGLU, "swiglu", a->out, a->gate, a->up);
}

/* ---- the entry point ---- */

#define OP_TABLE_CTX        wg_backend
#define OP_TABLE_IMPL(name) wg_op_##name
#include "backend/op_table.inc"

void wg_run(wgml_backend *be, wgml_op op, const void *args) {
    wg_backend *wb = WB(be);
    wgml_error e;
    wgml_status st = wgml_op_validate(op, args, wb->step.pos, &e);
    if (st) {
        wg_error(wb, st, "%s", e.message);
        return;
    }
    op_table[op](wb, args);
}

int wg_supports(wgml_backend *be, wgml_op op, const void *args) {
    if (!wgml_op_weight_types_supported(be, op, args)) return 0;
    if (op == WGML_OP_ATTENTION && args) {
        const wgml_attention_args *a = args;
        if (a->head_dim > 256 || (a->head_dim & 1) || (a->k_cache && a->k_cache->type != be->kv_type) ||
            (a->k && a->k->type != WGML_F32))
            return 0;
    }
    if (op == WGML_OP_COPY && args) { /* f32 -> f32 only: no f16 conversions */
        const wgml_copy_args *a = args;
        if ((a->out && a->out->type != WGML_F32) || (a->x && a->x->type != WGML_F32)) return 0;
    }
    return 1;
}
