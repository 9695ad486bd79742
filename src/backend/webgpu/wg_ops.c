/*
 * wg_ops.c - the ops of backend.h as dispatches of the kernels in kernels/.
 *
 * Every op validates its arguments (validate.c), then fills a kernel's
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
#define ATTN_CHUNK 256 /* cache rows per split in decode attention */

static wg_backend *WB(wgml_backend *be) { return (wg_backend *)be; }

static int valid(wg_backend *wb, wgml_status st, const wgml_error *e) {
    if (st) wg_error(wb, st, "%s", e->message);
    return st == WGML_OK;
}

/* An activation/KV tensor: inside its buffer, 4-byte aligned; returns its element offset. */
static int act(wg_backend *wb, const char *op, const wgml_tensor *t, uint32_t *elem_off) {
    if (!t || !t->buf || t->buf->is_weight) {
        wg_error(wb, WGML_ERR_INVALID_ARGUMENT, "%s: tensor '%s' must be an activation", op, t && t->name ? t->name : "?");
        return 0;
    }
    size_t n = wgml_tensor_nbytes(t);
    if (t->offset > t->buf->size || n > t->buf->size - t->offset || (t->offset & 3)) {
        wg_error(wb, WGML_ERR_INVALID_ARGUMENT, "%s: tensor '%s' at offset %zu exceeds its buffer of %zu bytes", op,
                 t->name ? t->name : "?", t->offset, t->buf->size);
        return 0;
    }
    if (elem_off) *elem_off = (uint32_t)(t->offset / (t->type == WGML_F16 ? 2 : 4));
    return 1;
}

/* A weight tensor: whole, uploaded by weight_create. */
static int weight(wg_backend *wb, const char *op, const wgml_tensor *t) {
    if (!t || !t->buf || !t->buf->is_weight || t->offset != 0 || t->ne[0] != t->buf->ne0 ||
        wgml_tensor_nrows(t) != t->buf->ne1) {
        wg_error(wb, WGML_ERR_INVALID_ARGUMENT, "%s: '%s' must be a whole weight tensor", op, t && t->name ? t->name : "?");
        return 0;
    }
    return 1;
}

static wgml_gpu_binding bind(uint32_t binding, const wgml_tensor *t) {
    return (wgml_gpu_binding){binding, t->buf->gpu, 0, 0};
}

/* Host values of a small f32 weight (the upload source stays valid). */
static uint32_t elem_off_of_weight(const wgml_tensor *t) { return (uint32_t)(t->offset / 4); }

static void dispatch(wg_backend *wb, wgml_gpu_kernel *k, const void *params, size_t psize, const wgml_gpu_binding *b,
                     int nb, uint32_t gx, uint32_t gy, uint32_t gz) {
    wg_dispatch d = {.kernel = k, .params = params, .params_size = psize, .n_bind = nb, .grid = {gx, gy, gz}};
    memcpy(d.bind, b, (size_t)nb * sizeof *b);
    wg_record(wb, &d);
}

static wgml_gpu_kernel *kernel(wg_backend *wb, wg_kind kind, uint32_t wtype, uint32_t flags) {
    if (wb->status) return NULL;
    wgml_error e;
    wgml_gpu_kernel *k = wg_kernel(wb, kind, wtype, flags, &e);
    if (!k) wg_error(wb, e.code, "%s", e.message);
    return k;
}

static uint32_t div_up(uint64_t a, uint64_t b) { return (uint32_t)((a + b - 1) / b); }

/* ---- matrix products ---- */

typedef struct {
    uint32_t K, n, x_off, x_stride, norm_off;
    float eps;
    uint32_t bpr, ngroups;
    uint32_t m[4], sb[4], wo[4], oo[4], os[4], bo[4], row0[4];
} mm_params;
_Static_assert(sizeof(mm_params) == 144, "mm_params must match MMParams in mm_common.wgsl");

static uint32_t groups_per_row(uint32_t type, int64_t K) {
    const wgml_dtype_traits *tr = wgml_dtype_get(type);
    return tr->block_size == 1 ? div_up((uint64_t)K, 4) : (uint32_t)(K / 32);
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
static int distinct(wg_backend *wb, const char *op, const wgml_tensor *out, const wgml_tensor *in);

static void mm_dispatch(wg_backend *wb, const wgml_matmul *mm, const mm_group *g, wgml_epilogue epi) {
    int64_t K = mm->x->ne[0], n = wgml_tensor_nrows(mm->x);
    uint32_t type = g->w[0]->type;
    uint32_t flags = (uint32_t)g->nw << WGF_NW_SHIFT;
    if (mm->norm) flags |= WGF_NORM;
    if (epi == WGML_EPI_ADD) flags |= WGF_ADD;
    if (epi == WGML_EPI_SWIGLU) flags |= WGF_SWIGLU;
    for (int k = 0; k < g->nw; k++)
        if (g->bias[k]) flags |= WGF_BIAS0 << k;
    wg_kind kind = n <= MATVEC_MAX_TOKENS ? WGK_MATVEC : WGK_MATMUL;
    wgml_gpu_kernel *kr = kernel(wb, kind, type, flags);
    if (!kr) return;

    mm_params p = {.K = (uint32_t)K, .n = (uint32_t)n, .x_stride = (uint32_t)K, .eps = mm->eps,
                   .bpr = (uint32_t)(K / wgml_dtype_get(type)->block_size), .ngroups = groups_per_row(type, K)};
    wgml_gpu_binding b[WG_MAX_BINDINGS];
    int nb = 0;
    if (!act(wb, "matmul", mm->x, &p.x_off)) return;
    for (int k = 0; k < n_out_of(g, epi); k++)
        if (!distinct(wb, "matmul", g->out[k], mm->x)) return;
    b[nb++] = bind(2, mm->x);
    if (mm->norm) {
        p.norm_off = elem_off_of_weight(mm->norm);
        b[nb++] = (wgml_gpu_binding){3, mm->norm->buf->win[0].gpu, 0, 0};
    }
    uint32_t max_m = 0;
    int n_out = epi == WGML_EPI_SWIGLU ? 1 : g->nw;
    for (int k = 0; k < g->nw; k++) {
        const wg_window *w = &g->w[k]->buf->win[g->win];
        p.m[k] = (uint32_t)w->rows;
        p.sb[k] = w->sb_word;
        p.row0[k] = (uint32_t)w->row0;
        if (p.m[k] > max_m) max_m = p.m[k];
        b[nb++] = (wgml_gpu_binding){4 + (uint32_t)k, w->gpu, 0, 0};
        if (g->bias[k]) {
            p.bo[k] = elem_off_of_weight(g->bias[k]);
            b[nb++] = (wgml_gpu_binding){7 + (uint32_t)k, g->bias[k]->buf->win[0].gpu, 0, 0};
        }
    }
    for (int k = 0; k < n_out; k++) {
        if (!act(wb, "matmul", g->out[k], &p.oo[k])) return;
        p.os[k] = (uint32_t)g->out[k]->ne[0];
        b[nb++] = bind(10 + (uint32_t)k, g->out[k]);
    }
    if (epi == WGML_EPI_SWIGLU) p.row0[1] = p.row0[0];
    int nz = epi == WGML_EPI_SWIGLU ? 1 : g->nw;
    /* rows per matvec workgroup: R, or R per lane in lane rows */
    uint64_t mv_rows = (uint64_t)wg_matvec_rows(wb, flags) * (wb->mv_lane_rows ? (uint64_t)wb->mv_lane_wg : 1);
    if (kind == WGK_MATVEC)
        dispatch(wb, kr, &p, sizeof p, b, nb, div_up(max_m, mv_rows), (uint32_t)n, (uint32_t)nz);
    else
        dispatch(wb, kr, &p, sizeof p, b, nb, div_up(max_m, 32), div_up((uint64_t)n, 32), (uint32_t)nz);
}

static int storage_bindings(const wgml_matmul *mm, int nw, int nbias, int nout) {
    return 1 + (mm->norm ? 1 : 0) + nw + nbias + nout;
}

static void elementwise(wg_backend *wb, wg_kind kind, const char *op, const wgml_tensor *out, const wgml_tensor *a,
                        const wgml_tensor *b);

/* SwiGLU whose weights cannot share one dispatch (different types, or split
 * into windows): gate and up products into backend scratch, then silu(g) * u. */
static void swiglu_unfused(wg_backend *wb, const wgml_matmul *mm) {
    int64_t M = wgml_tensor_nrows(mm->w[0]), n = wgml_tensor_nrows(mm->x);
    size_t need = (size_t)(M * n) * sizeof(float);
    for (int i = 0; i < 2; i++) {
        if (wb->tmp[i] && wb->tmp[i]->size >= need) continue;
        if (wb->tmp[i]) wb->base.buffer_free(&wb->base, wb->tmp[i]);
        wb->tmp[i] = NULL;
        wgml_error e;
        if (wb->base.buffer_create(&wb->base, need, WGML_BUFFER_ACTIVATIONS, &wb->tmp[i], &e)) {
            wg_error(wb, e.code, "%s", e.message);
            return;
        }
    }
    wgml_tensor t[2];
    for (int i = 0; i < 2; i++) {
        t[i] = (wgml_tensor){.type = WGML_F32, .ne = {M, n, 1, 1}, .buf = wb->tmp[i], .name = i ? "swiglu.up" : "swiglu.gate"};
        for (int w = 0; w < mm->w[i]->buf->n_windows; w++) {
            mm_group g = {.nw = 1, .w = {mm->w[i]}, .bias = {mm->bias[i]}, .out = {&t[i]}, .win = w};
            mm_dispatch(wb, mm, &g, WGML_EPI_STORE);
        }
    }
    elementwise(wb, WGK_SWIGLU, "matmul", mm->out[0], &t[0], &t[1]);
}

void wg_op_matmul(wgml_backend *be, const wgml_matmul *mm) {
    wg_backend *wb = WB(be);
    wgml_error e;
    if (!valid(wb, wgml_validate_matmul(mm, &e), &e)) return;
    int swiglu = mm->epilogue == WGML_EPI_SWIGLU;
    int same_type = 1, single = 1, nbias = 0;
    for (int i = 0; i < mm->n_w; i++) {
        if (!weight(wb, "matmul", mm->w[i])) return;
        if (!be->supports_type(be, mm->w[i]->type)) {
            wg_error(wb, WGML_ERR_UNSUPPORTED, "matmul: weight '%s' has type %s, which the WebGPU backend cannot use",
                     mm->w[i]->name ? mm->w[i]->name : "?", wgml_dtype_name(mm->w[i]->type));
            return;
        }
        if (mm->bias[i] && !weight(wb, "matmul", mm->bias[i])) return;
        same_type &= mm->w[i]->type == mm->w[0]->type;
        single &= mm->w[i]->buf->n_windows == 1;
        nbias += mm->bias[i] != NULL;
    }
    if (mm->norm && !weight(wb, "matmul", mm->norm)) return;
    int n_out = swiglu ? 1 : mm->n_w;
    int fused = mm->n_w == 1 ||
                (same_type && single &&
                 storage_bindings(mm, mm->n_w, nbias, n_out) <= (int)wb->info->max_storage_buffers_per_stage);
    if (fused && mm->w[0]->buf->n_windows == 1) {
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
        for (int w = 0; w < mm->w[i]->buf->n_windows; w++) {
            mm_group g = {.nw = 1, .w = {mm->w[i]}, .bias = {mm->bias[i]}, .out = {mm->out[i]}, .win = w};
            mm_dispatch(wb, mm, &g, mm->epilogue);
        }
    }
}

/* ---- embedding lookup ---- */

void wg_op_get_rows(wgml_backend *be, const wgml_tensor *out, const wgml_tensor *table, const wgml_tensor *ids) {
    wg_backend *wb = WB(be);
    wgml_error e;
    mm_params p = {0};
    if (!valid(wb, wgml_validate_get_rows(out, table, ids, &e), &e) || !weight(wb, "get_rows", table) ||
        !act(wb, "get_rows", out, &p.oo[0]) || !act(wb, "get_rows", ids, &p.x_off))
        return;
    wgml_gpu_kernel *k = kernel(wb, WGK_GET_ROWS, table->type, 1u << WGF_NW_SHIFT);
    if (!k) return;
    int64_t K = table->ne[0], n = wgml_tensor_nrows(out);
    p.K = (uint32_t)K;
    p.n = (uint32_t)n;
    p.os[0] = (uint32_t)K;
    p.bpr = (uint32_t)(K / wgml_dtype_get(table->type)->block_size);
    p.ngroups = groups_per_row(table->type, K);
    for (int w = 0; w < table->buf->n_windows; w++) {
        const wg_window *win = &table->buf->win[w];
        p.m[0] = (uint32_t)win->rows;
        p.row0[0] = (uint32_t)win->row0;
        p.sb[0] = win->sb_word;
        wgml_gpu_binding b[3] = {{13, ids->buf->gpu, 0, 0}, {4, win->gpu, 0, 0}, bind(10, out)};
        dispatch(wb, k, &p, sizeof p, b, 3, div_up(div_up((uint64_t)K, 4), 64), (uint32_t)n, 1);
    }
}

/* ---- RoPE table, attention ---- */

typedef struct {
    uint32_t n, n_head, n_kv, hd, n_rot, neox, q_off, q_stride, k_off, k_stride, v_off, v_stride;
} rope_params;

/* The (cos, sin) table for positions [0, rows), rebuilt when the parameters change or more rows are needed. */
static wgml_gpu_buffer *rope_table(wg_backend *wb, const wgml_rope *r, int rows) {
    const float *ff = r->freq_factors ? (const float *)r->freq_factors->buf->host : NULL; /* upload source, still valid */
    uint64_t key = 0xcbf29ce484222325ull;
    float fields[3] = {(float)r->n_rot, r->freq_base, r->freq_scale};
    const uint8_t *bytes = (const uint8_t *)fields;
    for (size_t i = 0; i < sizeof fields; i++) key = (key ^ bytes[i]) * 0x100000001b3ull;
    for (int i = 0; ff && i < r->n_rot / 2; i++) {
        bytes = (const uint8_t *)&ff[i];
        for (int j = 0; j < 4; j++) key = (key ^ bytes[j]) * 0x100000001b3ull;
    }
    if (wb->rope && wb->rope_key == key && wb->rope_rows >= rows) return wb->rope;
    int half = r->n_rot / 2 > 0 ? r->n_rot / 2 : 1;
    size_t size = (size_t)rows * (size_t)half * 2 * sizeof(float);
    float *tab = wgml_malloc(size);
    if (!tab) {
        wg_error(wb, WGML_ERR_OUT_OF_MEMORY, "webgpu: out of memory for a RoPE table of %d positions", rows);
        return NULL;
    }
    for (int pos = 0; pos < rows; pos++) wgml_rope_angles(r, ff, pos, tab + (size_t)pos * half * 2);
    wgml_error e;
    wgml_gpu_buffer *buf;
    if (wgml_gpu_buffer_create(wb->gpu, size, WGML_GPU_STORAGE, "wgml rope table", &buf, &e)) {
        wgml_free(tab);
        wg_error(wb, e.code, "%s", e.message);
        return NULL;
    }
    wgml_gpu_write(wb->gpu, buf, 0, tab, size);
    wgml_free(tab);
    if (wb->rope) {
        wg_record_forget(wb, wb->rope);
        wgml_gpu_buffer_destroy(wb->rope);
    }
    wb->rope = buf;
    wb->rope_key = key;
    wb->rope_rows = rows;
    return buf;
}

static void rope_dispatch(wg_backend *wb, const wgml_tensor *q, const wgml_tensor *k, const wgml_tensor *v,
                          const wgml_tensor *kc, const wgml_tensor *vc, int n_head, int n_kv, int hd,
                          const wgml_rope *r, int table_rows) {
    int store = kc != NULL;
    rope_params p = {.n = (uint32_t)wgml_tensor_nrows(q), .n_head = (uint32_t)n_head, .n_kv = store ? (uint32_t)n_kv : 0,
                     .hd = (uint32_t)hd, .n_rot = r ? (uint32_t)r->n_rot : 0, .neox = r ? (uint32_t)r->neox : 0,
                     .q_stride = (uint32_t)q->ne[0]};
    if (!act(wb, "rope", q, &p.q_off)) return;
    wgml_gpu_buffer *tab = r && r->n_rot > 0 ? rope_table(wb, r, table_rows) : wb->dummy;
    if (!tab) return;
    wgml_gpu_binding b[6] = {bind(2, q), {3, tab, 0, 0}};
    int nb = 2;
    if (store) {
        uint32_t kc_off, vc_off;
        if (!act(wb, "attention", k, &p.k_off) || !act(wb, "attention", v, &p.v_off) ||
            !act(wb, "attention", kc, &kc_off) || !act(wb, "attention", vc, &vc_off))
            return;
        if (kc_off || vc_off) { /* the kernel addresses cache rows from element 0 */
            wg_error(wb, WGML_ERR_INVALID_ARGUMENT, "attention: KV caches must start at the start of their buffers");
            return;
        }
        p.k_stride = (uint32_t)k->ne[0];
        p.v_stride = (uint32_t)v->ne[0];
        b[nb++] = bind(4, k);
        b[nb++] = bind(5, v);
        b[nb++] = bind(6, kc);
        b[nb++] = bind(7, vc);
    }
    wgml_gpu_kernel *kr = kernel(wb, store ? WGK_ROPE_STORE : WGK_ROPE, 0, 0);
    if (!kr) return;
    uint64_t threads = (uint64_t)p.n * (p.n_head + p.n_kv) * (p.hd / 2);
    dispatch(wb, kr, &p, sizeof p, b, nb, div_up(threads, 64), 1, 1);
}

void wg_op_rope(wgml_backend *be, const wgml_tensor *x, int n_head, int head_dim, const wgml_rope *r) {
    wg_backend *wb = WB(be);
    wgml_error e;
    if (!valid(wb, wgml_validate_rope(x, n_head, head_dim, r, &e), &e)) return;
    if (r->freq_factors && !weight(wb, "rope", r->freq_factors)) return;
    rope_dispatch(wb, x, NULL, NULL, NULL, NULL, n_head, 0, head_dim, r, wb->step.pos + (int)wgml_tensor_nrows(x));
}

typedef struct {
    uint32_t n_head, n_kv, hd, n_splits, q_off, q_stride, o_off, o_stride, chunk;
    float scale;
    uint32_t pad0, pad1;
} attn_params;

void wg_op_attention(wgml_backend *be, const wgml_attention *a) {
    wg_backend *wb = WB(be);
    wgml_error e;
    if (!valid(wb, wgml_validate_attention(a, wb->step.pos, &e), &e)) return;
    if (a->k_cache->type != be->kv_type) {
        wg_error(wb, WGML_ERR_INVALID_ARGUMENT, "attention: this device's KV cache must be %s", wgml_dtype_name(be->kv_type));
        return;
    }
    if (a->head_dim > 256 || (a->head_dim & 1)) {
        wg_error(wb, WGML_ERR_UNSUPPORTED, "attention: head size %d (even, at most 256 on WebGPU)", a->head_dim);
        return;
    }
    if (a->rope && a->rope->freq_factors && !weight(wb, "attention", a->rope->freq_factors)) return;
    int n = (int)wgml_tensor_nrows(a->q), n_ctx = (int)wgml_tensor_nrows(a->k_cache);
    rope_dispatch(wb, a->q, a->k, a->v, a->k_cache, a->v_cache, a->n_head, a->n_head_kv, a->head_dim, a->rope, n_ctx);

    int kv_len = wb->step.pos + n;
    uint32_t splits = n == 1 ? div_up((uint64_t)kv_len, ATTN_CHUNK) : 1;
    attn_params p = {.n_head = (uint32_t)a->n_head, .n_kv = (uint32_t)a->n_head_kv, .hd = (uint32_t)a->head_dim,
                     .n_splits = splits, .q_stride = (uint32_t)a->q->ne[0], .o_stride = (uint32_t)a->out->ne[0],
                     .chunk = splits > 1 ? ATTN_CHUNK : (uint32_t)n_ctx, .scale = a->scale};
    if (!act(wb, "attention", a->q, &p.q_off) || !act(wb, "attention", a->out, &p.o_off)) return;
    wgml_gpu_buffer *part = wb->dummy;
    if (splits > 1) {
        /* room for the most splits this cache can need, so it is allocated once */
        uint64_t need = (uint64_t)a->n_head * div_up((uint64_t)n_ctx, ATTN_CHUNK) * (uint64_t)(a->head_dim + 2) * 4;
        if (!wb->part || wb->part_size < need) {
            if (wb->part) {
                wg_record_forget(wb, wb->part);
                wgml_gpu_buffer_destroy(wb->part);
                wb->part = NULL;
            }
            if (wgml_gpu_buffer_create(wb->gpu, need, WGML_GPU_STORAGE, "wgml attention partials", &wb->part, &e)) {
                wg_error(wb, e.code, "%s", e.message);
                return;
            }
            wb->part_size = need;
        }
        part = wb->part;
    }
    wgml_gpu_kernel *k = kernel(wb, WGK_ATTENTION, 0, 0);
    if (!k) return;
    wgml_gpu_binding b[5] = {bind(2, a->q), bind(3, a->k_cache), bind(4, a->v_cache), bind(5, a->out), {6, part, 0, 0}};
    dispatch(wb, k, &p, sizeof p, b, 5, (uint32_t)a->n_head, (uint32_t)n, splits);
    if (splits > 1) {
        wgml_gpu_kernel *c = kernel(wb, WGK_ATTN_COMBINE, 0, 0);
        if (!c) return;
        wgml_gpu_binding cb[2] = {bind(5, a->out), {6, part, 0, 0}};
        dispatch(wb, c, &p, sizeof p, cb, 2, (uint32_t)a->n_head, (uint32_t)n, 1);
    }
}

/* ---- row and elementwise ops ---- */

typedef struct {
    uint32_t n, x_off, o_off, w_off;
    float eps, scale;
    uint32_t pad0, pad1;
} row_params;

static void row_op(wg_backend *wb, wg_kind kind, const char *op, const wgml_tensor *out, const wgml_tensor *x,
                   const wgml_tensor *w, float eps, float scale) {
    wgml_error e;
    if (!valid(wb, wgml_check_type(op, x, WGML_F32, &e), &e)) return;
    if (!distinct(wb, op, out, x)) return;
    row_params p = {.n = (uint32_t)x->ne[0], .eps = eps, .scale = scale};
    if (!act(wb, op, x, &p.x_off) || !act(wb, op, out, &p.o_off)) return;
    int64_t rows = wgml_tensor_nrows(x);
    if (kind == WGK_ARGMAX) {
        if (out->type != WGML_I32 || wgml_tensor_nelements(out) < rows) {
            wg_error(wb, WGML_ERR_INVALID_ARGUMENT, "argmax: output must be I32 with %lld elements", (long long)rows);
            return;
        }
    } else if (!valid(wb, wgml_check_type(op, out, WGML_F32, &e), &e) ||
               !valid(wb, wgml_check_same_shape(op, out, x, &e), &e)) {
        return;
    }
    wgml_gpu_binding b[3] = {bind(2, x), bind(3, out)};
    int nb = 2;
    if (w) {
        if (!valid(wb, wgml_check_type(op, w, WGML_F32, &e), &e) || !weight(wb, op, w)) return;
        if (w->ne[0] != x->ne[0]) {
            wg_error(wb, WGML_ERR_INVALID_ARGUMENT, "%s: weight has %lld elements, rows have %lld", op,
                     (long long)w->ne[0], (long long)x->ne[0]);
            return;
        }
        b[nb++] = (wgml_gpu_binding){4, w->buf->win[0].gpu, 0, 0};
    }
    wgml_gpu_kernel *k = kernel(wb, kind, 0, 0);
    if (k) dispatch(wb, k, &p, sizeof p, b, nb, (uint32_t)rows, 1, 1);
}

void wg_op_rms_norm(wgml_backend *be, const wgml_tensor *out, const wgml_tensor *x, const wgml_tensor *w, float eps) {
    row_op(WB(be), WGK_RMS_NORM, "rms_norm", out, x, w, eps, 1);
}

void wg_op_softmax(wgml_backend *be, const wgml_tensor *out, const wgml_tensor *x, float scale) {
    row_op(WB(be), WGK_SOFTMAX, "softmax", out, x, NULL, 0, scale);
}

void wg_op_argmax(wgml_backend *be, const wgml_tensor *out, const wgml_tensor *x) {
    row_op(WB(be), WGK_ARGMAX, "argmax", out, x, NULL, 0, 1);
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

static void elementwise(wg_backend *wb, wg_kind kind, const char *op, const wgml_tensor *out, const wgml_tensor *a,
                        const wgml_tensor *b) {
    wgml_error e;
    if (!distinct(wb, op, out, a) || !distinct(wb, op, out, b)) return;
    if (!valid(wb, wgml_check_type(op, out, WGML_F32, &e), &e) || !valid(wb, wgml_check_type(op, a, WGML_F32, &e), &e) ||
        !valid(wb, wgml_check_type(op, b, WGML_F32, &e), &e) || !valid(wb, wgml_check_same_shape(op, out, a, &e), &e) ||
        !valid(wb, wgml_check_same_shape(op, out, b, &e), &e))
        return;
    int64_t n = wgml_tensor_nelements(out);
    ew_params p = {.n = (uint32_t)n, .row_len = 64u * 32768u};
    if (!act(wb, op, a, &p.a_off) || !act(wb, op, b, &p.b_off) || !act(wb, op, out, &p.o_off)) return;
    wgml_gpu_kernel *k = kernel(wb, kind, 0, 0);
    if (!k) return;
    wgml_gpu_binding bd[3] = {bind(2, a), bind(3, b), bind(4, out)};
    uint64_t first = (uint64_t)n < p.row_len ? (uint64_t)n : p.row_len;
    dispatch(wb, k, &p, sizeof p, bd, 3, div_up(first, 64), div_up((uint64_t)n, p.row_len), 1);
}

void wg_op_add(wgml_backend *be, const wgml_tensor *out, const wgml_tensor *a, const wgml_tensor *b) {
    elementwise(WB(be), WGK_ADD, "add", out, a, b);
}

void wg_op_swiglu(wgml_backend *be, const wgml_tensor *out, const wgml_tensor *gate, const wgml_tensor *up) {
    elementwise(WB(be), WGK_SWIGLU, "swiglu", out, gate, up);
}
