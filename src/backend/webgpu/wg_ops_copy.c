/*
 * wg_ops_copy.c - data movement (ops.h): copy, which makes a strided view
 * (tensor.h: transpose, column slice, permutation, broadcast) contiguous, and
 * get_rows from an f32 activation table (wg_op_get_rows keeps weight tables).
 * Both are dispatches of copy.wgsl, one invocation per output element.
 *
 * The input may lie in the output's buffer (validate.c makes sure it is apart
 * from the output): it is then read through the output's read_write binding
 * (WGF_IN0_IS_OUT), since WebGPU forbids binding a buffer that a dispatch
 * writes a second time.
 */
#include "backend/webgpu/wg_internal.h"

#include <stdint.h>

#define MAX_GROUPS 65535u         /* workgroups per grid dimension (WebGPU's default limit) */
#define FLAT_COLS  (64u * 32768u) /* the output as flat rows of this many elements */
#define WG_SIZE    64u            /* WG of copy.wgsl (wg_compose.c) */

typedef struct {
    uint32_t n, x_off, o_off, cols, rows, ne0, ne1, ne2, nb0, nb1, nb2, nb3, i_off, t_rows, pad0, pad1;
} copy_params;
_Static_assert(sizeof(copy_params) == 64, "copy_params must match CopyParams in copy.wgsl");

/* Binds out (3) and the input x (2, or read through out: *flags); fills the
 * element offsets. x's span (wgml_tensor_extent) must fit its buffer and be
 * addressable with u32 element indices. */
static int bind_out_x(wg_backend *wb, const char *op, const wgml_tensor *out, const wgml_tensor *x, copy_params *p,
                      uint32_t *flags, wgml_gpu_binding *b, int *nb) {
    if (!wg_act(wb, op, out, &p->o_off) || !wg_act(wb, op, x, &p->x_off)) return 0;
    if (((uint64_t)x->offset + wgml_tensor_extent(x)) / 4 > UINT32_MAX ||
        wgml_tensor_nelements(out) > (int64_t)UINT32_MAX) {
        wg_error(wb, WGML_ERR_UNSUPPORTED, "%s: '%s' spans more than 2^32 elements (the limit of WebGPU's indices)", op,
                 x->name ? x->name : "?");
        return 0;
    }
    b[(*nb)++] = wg_bind(3, out);
    if (x->buf == out->buf)
        *flags |= WGF_IN0_IS_OUT;
    else
        b[(*nb)++] = wg_bind(2, x);
    return 1;
}

/* Records k over the n output elements as rows of up to FLAT_COLS. */
static void dispatch_flat(wg_backend *wb, wgml_gpu_kernel *k, copy_params *p, const wgml_gpu_binding *b, int nb,
                          uint64_t n) {
    p->n = (uint32_t)n;
    p->cols = n < FLAT_COLS ? (uint32_t)n : FLAT_COLS;
    p->rows = wg_div_up(n, p->cols);
    uint32_t gy = p->rows < MAX_GROUPS ? p->rows : MAX_GROUPS, gz = wg_div_up(p->rows, MAX_GROUPS);
    wg_dispatch_kernel(wb, k, p, sizeof *p, b, nb, wg_div_up(p->cols, WG_SIZE), gy, gz);
}

void wg_op_copy(wg_backend *wb, const wgml_copy_args *a) {
    const wgml_tensor *out = a->out, *x = a->x;
    if (out->type != WGML_F32 || x->type != WGML_F32) { /* wg_supports says so too */
        wg_error(wb, WGML_ERR_UNSUPPORTED, "copy: f32 only on WebGPU ('%s' is %s, '%s' %s)",
                 out->name ? out->name : "?", wgml_dtype_name(out->type), x->name ? x->name : "?",
                 wgml_dtype_name(x->type));
        return;
    }
    copy_params p = {.ne0 = (uint32_t)x->ne[0], .ne1 = (uint32_t)x->ne[1], .ne2 = (uint32_t)x->ne[2]};
    uint32_t flags = 0;
    wgml_gpu_binding b[2];
    int nb = 0;
    if (!bind_out_x(wb, "copy", out, x, &p, &flags, b, &nb)) return;
    /* strides in elements (validated: multiples of 4 bytes); each is at most
     * x's span, which fits u32 elements (bind_out_x) unless its dimension has
     * one element, where it multiplies 0 */
    uint32_t *nbs[4] = {&p.nb0, &p.nb1, &p.nb2, &p.nb3};
    for (int d = 0; d < 4; d++)
        *nbs[d] = x->ne[d] > 1 ? (uint32_t)(wgml_tensor_stride(x, d) / 4) : 0;
    wgml_gpu_kernel *k = wg_get_kernel(wb, WGK_COPY, 0, flags);
    uint64_t n = (uint64_t)wgml_tensor_nelements(x);
    if (k && n) dispatch_flat(wb, k, &p, b, nb, n);
}

void wg_get_rows_act(wg_backend *wb, const wgml_get_rows_args *a) {
    const wgml_tensor *out = a->out, *table = a->table, *ids = a->ids;
    if (table->type != WGML_F32) {
        wg_error(wb, WGML_ERR_UNSUPPORTED, "get_rows: an activation table must be f32 on WebGPU, '%s' is %s",
                 table->name ? table->name : "?", wgml_dtype_name(table->type));
        return;
    }
    copy_params p = {.ne0 = (uint32_t)table->ne[0], .t_rows = (uint32_t)wgml_tensor_nrows(table)};
    uint32_t flags = 0;
    wgml_gpu_binding b[3];
    int nb = 0;
    if (!bind_out_x(wb, "get_rows", out, table, &p, &flags, b, &nb) || !wg_act(wb, "get_rows", ids, &p.i_off)) return;
    if (ids->buf == out->buf) {
        wg_error(wb, WGML_ERR_UNSUPPORTED, "get_rows: on WebGPU the ids must not share the output's buffer");
        return;
    }
    b[nb++] = wg_bind(4, ids);
    wgml_gpu_kernel *k = wg_get_kernel(wb, WGK_GET_ROWS_ACT, 0, flags);
    uint64_t n = (uint64_t)wgml_tensor_nelements(out);
    if (k && n) dispatch_flat(wb, k, &p, b, nb, n);
}
