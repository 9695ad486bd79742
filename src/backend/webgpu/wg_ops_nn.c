/*
 * wg_ops_nn.c - the encoders' ops (ops.h: layer_norm, l2_norm, unary, mul,
 * pool, and add beyond its plain case) as dispatches of norm.wgsl,
 * unary.wgsl, elementwise.wgsl (its ROWS variant) and pool.wgsl.
 *
 * A vector argument (layer_norm's w and b, unary's v, add's and mul's b) may
 * be a weight, bound as its one window (offset 0), or an activation, bound
 * whole with its element offset in the parameters. An input in the output's
 * buffer - out itself (in place) or apart from it: validate.c rejects a
 * partial overlap - is read through the output's read_write binding, in the
 * kernel's variant for it (WGF_IN<i>_IS_OUT), since WebGPU forbids binding a
 * buffer that a dispatch writes a second time.
 */
#include "backend/webgpu/wg_internal.h"

#define MAX_GROUPS 65535u         /* workgroups per grid dimension (WebGPU's default limit) */
#define FLAT_COLS  (64u * 32768u) /* a flat tensor as rows of this many elements */
#define WG_SIZE    64u            /* WG of these kernels (wg_compose.c) */

/* Input i of a dispatch writing out, at `binding`: a weight (if allowed) or an
 * activation, bound or read through out (flag); *off: its element offset. */
static int input(wg_backend *wb, const char *op, const wgml_tensor *t, const wgml_tensor *out, int i, uint32_t binding,
                 int weight_ok, uint32_t *off, uint32_t *flags, wgml_gpu_binding *b, int *nb) {
    if (weight_ok && t && t->buf && t->buf->is_weight) {
        if (!wg_weight_vec(wb, op, t)) return 0;
        *off = (uint32_t)(t->offset / 4); /* the piece's first element */
        b[(*nb)++] = (wgml_gpu_binding){binding, t->buf->win[0].gpu, 0, 0};
        return 1;
    }
    if (!wg_act(wb, op, t, off)) return 0;
    if (t->buf == out->buf)
        *flags |= WGF_IN0_IS_OUT << i;
    else
        b[(*nb)++] = wg_bind(binding, t);
    return 1;
}

/* Grid dimensions for `rows` rows spread over two dimensions of at most MAX_GROUPS (row = hi * MAX_GROUPS + lo). */
static void grid_rows(uint64_t rows, uint32_t *lo, uint32_t *hi) {
    *lo = rows < MAX_GROUPS ? (uint32_t)rows : MAX_GROUPS;
    *hi = wg_div_up(rows, MAX_GROUPS);
}

/* Columns as the x dimension of a grid (WG_SIZE per workgroup). */
static int cols_fit(wg_backend *wb, const char *op, int64_t cols) {
    if ((uint64_t)cols <= (uint64_t)MAX_GROUPS * WG_SIZE) return 1;
    wg_error(wb, WGML_ERR_UNSUPPORTED, "%s: rows of %lld values (at most %u on WebGPU)", op, (long long)cols,
             MAX_GROUPS * WG_SIZE);
    return 0;
}

/* ---- layer_norm, l2_norm (norm.wgsl) ---- */

typedef struct {
    uint32_t n, rows, x_off, o_off, w_off, b_off, flags, pad0;
    float eps;
    uint32_t pad1, pad2, pad3;
} norm_params;
_Static_assert(sizeof(norm_params) == 48, "norm_params must match NormParams in norm.wgsl");

static void norm(wg_backend *wb, wg_kind kind, const char *op, const wgml_tensor *out, const wgml_tensor *x,
                 const wgml_tensor *w, const wgml_tensor *bias, float eps) {
    int64_t rows = wgml_tensor_nrows(x);
    norm_params p = {.n = (uint32_t)x->ne[0], .rows = (uint32_t)rows, .eps = eps};
    uint32_t flags = 0;
    wgml_gpu_binding b[4];
    int nb = 0;
    if (!wg_act(wb, op, out, &p.o_off)) return;
    b[nb++] = wg_bind(3, out);
    if (!input(wb, op, x, out, 0, 2, 0, &p.x_off, &flags, b, &nb)) return;
    if (kind == WGK_LAYER_NORM) {
        const wgml_tensor *v[2] = {w, bias};
        uint32_t *off[2] = {&p.w_off, &p.b_off};
        for (int i = 0; i < 2; i++) {
            if (!v[i]) { /* the kernel reads it only with its flag: any buffer will do */
                b[nb++] = (wgml_gpu_binding){4 + (uint32_t)i, wb->dummy, 0, 0};
                continue;
            }
            if (!input(wb, op, v[i], out, 1 + i, 4 + (uint32_t)i, 1, off[i], &flags, b, &nb)) return;
            p.flags |= 1u << i;
        }
    }
    wgml_gpu_kernel *k = wg_get_kernel(wb, kind, 0, flags);
    if (!k || rows == 0) return;
    uint32_t gx, gy;
    grid_rows((uint64_t)rows, &gx, &gy);
    wg_dispatch_kernel(wb, k, &p, sizeof p, b, nb, gx, gy, 1);
}

void wg_op_layer_norm(wg_backend *wb, const wgml_layer_norm_args *a) {
    norm(wb, WGK_LAYER_NORM, "layer_norm", a->out, a->x, a->w, a->b, a->eps);
}

void wg_op_l2_norm(wg_backend *wb, const wgml_l2_norm_args *a) {
    norm(wb, WGK_L2_NORM, "l2_norm", a->out, a->x, NULL, NULL, a->eps);
}

/* ---- unary (unary.wgsl) ---- */

typedef struct {
    uint32_t n, x_off, o_off, v_off, cols, rows, kind, pad0;
    float a, b;
    uint32_t pad1, pad2;
} unary_params;
_Static_assert(sizeof(unary_params) == 48, "unary_params must match UnaryParams in unary.wgsl");

void wg_op_unary(wg_backend *wb, const wgml_unary_args *a) {
    int64_t n = wgml_tensor_nelements(a->x);
    unary_params p = {.n = (uint32_t)n, .kind = (uint32_t)a->kind, .a = a->a, .b = a->b};
    uint32_t flags = 0;
    wgml_gpu_binding b[3];
    int nb = 0;
    if (!wg_act(wb, "unary", a->out, &p.o_off)) return;
    b[nb++] = wg_bind(3, a->out);
    if (!input(wb, "unary", a->x, a->out, 0, 2, 0, &p.x_off, &flags, b, &nb)) return;
    if (a->v) { /* per-column parameters: the grid's rows are the tensor's */
        if (!cols_fit(wb, "unary", a->x->ne[0]) || !input(wb, "unary", a->v, a->out, 1, 4, 1, &p.v_off, &flags, b, &nb))
            return;
        p.cols = (uint32_t)a->x->ne[0];
        p.rows = (uint32_t)wgml_tensor_nrows(a->x);
    } else { /* flat */
        b[nb++] = (wgml_gpu_binding){4, wb->dummy, 0, 0};
        p.cols = (uint64_t)n < FLAT_COLS ? (uint32_t)n : FLAT_COLS;
        p.rows = n ? wg_div_up((uint64_t)n, p.cols) : 0;
    }
    wgml_gpu_kernel *k = wg_get_kernel(wb, WGK_UNARY, 0, flags);
    if (!k || n == 0) return;
    uint32_t gy, gz;
    grid_rows(p.rows, &gy, &gz);
    wg_dispatch_kernel(wb, k, &p, sizeof p, b, nb, wg_div_up(p.cols, WG_SIZE), gy, gz);
}

/* ---- add and mul: elementwise.wgsl's ROWS variant ---- */

typedef struct {
    uint32_t n, a_off, b_off, o_off, row_len, rows, b_stride, pad0;
} ew_rows_params;
_Static_assert(sizeof(ew_rows_params) == 32, "ew_rows_params must match EwParams in elementwise.wgsl");

void wg_binary_rows(wg_backend *wb, wg_kind kind, const char *op, const wgml_tensor *out, const wgml_tensor *a,
                    const wgml_tensor *b) {
    int64_t n = wgml_tensor_nelements(a), rows = wgml_tensor_nrows(a);
    ew_rows_params p = {.n = (uint32_t)n};
    uint32_t flags = WGF_EW_ROWS;
    wgml_gpu_binding bd[3];
    int nb = 0;
    if (!wg_act(wb, op, out, &p.o_off)) return;
    bd[nb++] = wg_bind(4, out);
    if (!input(wb, op, a, out, 0, 2, 0, &p.a_off, &flags, bd, &nb) ||
        !input(wb, op, b, out, 1, 3, 1, &p.b_off, &flags, bd, &nb))
        return;
    if (wgml_tensor_nrows(b) != rows) { /* b: one row for every row of a */
        if (!cols_fit(wb, op, a->ne[0])) return;
        p.row_len = (uint32_t)a->ne[0];
        p.rows = (uint32_t)rows;
        p.b_stride = 0;
    } else { /* b of a's shape: flat */
        p.row_len = (uint64_t)n < FLAT_COLS ? (uint32_t)n : FLAT_COLS;
        p.rows = n ? wg_div_up((uint64_t)n, p.row_len) : 0;
        p.b_stride = p.row_len;
    }
    wgml_gpu_kernel *k = wg_get_kernel(wb, kind, 0, flags);
    if (!k || n == 0) return;
    uint32_t gy, gz;
    grid_rows(p.rows, &gy, &gz);
    wg_dispatch_kernel(wb, k, &p, sizeof p, bd, nb, wg_div_up(p.row_len, WG_SIZE), gy, gz);
}

void wg_op_mul(wg_backend *wb, const wgml_mul_args *a) { wg_binary_rows(wb, WGK_MUL, "mul", a->out, a->a, a->b); }

/* ---- pool (pool.wgsl) ---- */

typedef struct {
    uint32_t d, n_seq, rows, mode, x_off, o_off, s_off, pad0;
} pool_params;
_Static_assert(sizeof(pool_params) == 32, "pool_params must match PoolParams in pool.wgsl");

void wg_op_pool(wg_backend *wb, const wgml_pool_args *a) {
    int64_t n_seq = wgml_tensor_nrows(a->out);
    pool_params p = {.d = (uint32_t)a->x->ne[0],
                     .n_seq = (uint32_t)n_seq,
                     .rows = (uint32_t)wgml_tensor_nrows(a->x),
                     .mode = (uint32_t)a->mode};
    uint32_t flags = 0;
    wgml_gpu_binding b[3];
    int nb = 0;
    if (!wg_act(wb, "pool", a->out, &p.o_off) || !wg_act(wb, "pool", a->seq, &p.s_off) ||
        !cols_fit(wb, "pool", a->x->ne[0]))
        return;
    if (a->seq->buf == a->out->buf) {
        wg_error(wb, WGML_ERR_UNSUPPORTED, "pool: on WebGPU the sequence table must not share the output's buffer");
        return;
    }
    b[nb++] = wg_bind(3, a->out);
    b[nb++] = wg_bind(4, a->seq);
    if (!input(wb, "pool", a->x, a->out, 0, 2, 0, &p.x_off, &flags, b, &nb)) return;
    wgml_gpu_kernel *k = wg_get_kernel(wb, WGK_POOL, 0, flags);
    if (!k || n_seq == 0 || p.d == 0) return;
    uint32_t gy, gz;
    grid_rows((uint64_t)n_seq, &gy, &gz);
    wg_dispatch_kernel(wb, k, &p, sizeof p, b, nb, wg_div_up(p.d, WG_SIZE), gy, gz);
}
