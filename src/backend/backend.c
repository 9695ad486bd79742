/*
 * backend.c - tensor view helpers shared by all backends (see backend.h).
 */
#include "backend/backend.h"
#include "gpu/gpu.h"

#include "core/dtype.h"
#include "core/error.h"

int64_t wgml_tensor_nelements(const wgml_tensor *t) { return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]; }

int64_t wgml_tensor_nrows(const wgml_tensor *t) { return t->ne[1] * t->ne[2] * t->ne[3]; }

size_t wgml_tensor_nbytes(const wgml_tensor *t) {
    return wgml_row_size(t->type, t->ne[0]) * (size_t)wgml_tensor_nrows(t);
}

wgml_tensor wgml_tensor_rows(const wgml_tensor *t, int64_t first, int64_t n) {
    wgml_tensor v = *t;
    v.offset += (size_t)first * wgml_tensor_stride(t, 1);
    v.ne[1] = n;
    v.ne[2] = v.ne[3] = 1;
    return v;
}

static int has_strides(const wgml_tensor *t) { return t->nb[0] | t->nb[1] | t->nb[2] | t->nb[3]; }

/* The stride of dimension d were t laid out contiguously. */
static size_t contiguous_stride(const wgml_tensor *t, int d) {
    const wgml_dtype_traits *tr = wgml_dtype_get(t->type);
    if (d == 0) return tr && tr->block_size == 1 ? (size_t)tr->type_size : 0;
    size_t s = wgml_row_size(t->type, t->ne[0]);
    for (int i = 1; i < d; i++) s *= (size_t)t->ne[i];
    return s;
}

size_t wgml_tensor_stride(const wgml_tensor *t, int d) {
    if (d < 0 || d > 3) return 0;
    return has_strides(t) ? t->nb[d] : contiguous_stride(t, d);
}

int wgml_tensor_is_contiguous(const wgml_tensor *t) {
    if (!has_strides(t)) return 1;
    /* the stride of a dimension of one element addresses nothing */
    for (int d = 0; d < 4; d++)
        if (t->ne[d] > 1 && t->nb[d] != contiguous_stride(t, d)) return 0;
    return 1;
}

size_t wgml_tensor_extent(const wgml_tensor *t) {
    if (wgml_tensor_nelements(t) <= 0) return 0;
    if (wgml_tensor_is_contiguous(t)) return wgml_tensor_nbytes(t);
    /* the last element's start, plus its size (a whole row where dim 0 is
     * contiguous: the block types' rows) */
    size_t end = 0;
    for (int d = 1; d < 4; d++) end += (size_t)(t->ne[d] - 1) * t->nb[d];
    if (t->ne[0] <= 1 || t->nb[0] == contiguous_stride(t, 0)) return end + wgml_row_size(t->type, t->ne[0]);
    return end + (size_t)(t->ne[0] - 1) * t->nb[0] + contiguous_stride(t, 0);
}

wgml_tensor wgml_tensor_view(const wgml_tensor *t, const int64_t ne[4], const size_t nb[4], size_t offset) {
    wgml_tensor v = *t;
    v.offset += offset;
    for (int d = 0; d < 4; d++) v.ne[d] = ne[d];
    for (int d = 0; d < 4; d++) v.nb[d] = nb[d];
    /* A dimension of one element gets its contiguous stride (it addresses
     * nothing), so that a broadcast view (strides 0) does not read as "all
     * zero: contiguous". Only a view that broadcasts one element along every
     * dimension still would: it cannot be expressed. */
    for (int d = 0; d < 4; d++)
        if (v.ne[d] == 1) v.nb[d] = contiguous_stride(&v, d);
    return v;
}

/* t's strides, spelled out (for the helpers that rearrange them). */
static void strides_of(const wgml_tensor *t, size_t nb[4]) {
    for (int d = 0; d < 4; d++) nb[d] = wgml_tensor_stride(t, d);
}

wgml_tensor wgml_tensor_transpose(const wgml_tensor *t) { return wgml_tensor_permute(t, (const int[4]){1, 0, 2, 3}); }

wgml_tensor wgml_tensor_permute(const wgml_tensor *t, const int perm[4]) {
    size_t nb[4], pnb[4];
    int64_t ne[4];
    strides_of(t, nb);
    for (int d = 0; d < 4; d++) {
        int p = perm[d] >= 0 && perm[d] < 4 ? perm[d] : d;
        ne[d] = t->ne[p];
        pnb[d] = nb[p];
    }
    return wgml_tensor_view(t, ne, pnb, 0);
}

wgml_tensor wgml_tensor_cols(const wgml_tensor *t, int64_t first, int64_t n) {
    size_t nb[4];
    strides_of(t, nb);
    return wgml_tensor_view(t, (const int64_t[4]){n, t->ne[1], t->ne[2], t->ne[3]}, nb, (size_t)first * nb[0]);
}

wgml_tensor wgml_tensor_broadcast_rows(const wgml_tensor *t, int64_t rows) {
    return wgml_tensor_view(t, (const int64_t[4]){t->ne[0], rows, 1, 1},
                            (const size_t[4]){wgml_tensor_stride(t, 0), 0, 0, 0}, 0);
}

#ifndef WGML_HAVE_WEBGPU
wgml_status wgml_backend_webgpu_create(const wgml_webgpu_options *opt, wgml_backend **out, wgml_error *err) {
    (void)opt;
    *out = NULL;
    return wgml_fail(err, WGML_ERR_UNSUPPORTED, "this build of wgml has no WebGPU backend (configure with Dawn)");
}

void wgml_backend_webgpu_lose_device(wgml_backend *be) { (void)be; }

/* No GPU layer: no adapters (wgml devices lists none). */
int wgml_gpu_list_adapters(wgml_gpu_adapter_info *out, int cap, wgml_error *err) {
    (void)out;
    (void)cap;
    (void)err;
    return 0;
}
#endif
