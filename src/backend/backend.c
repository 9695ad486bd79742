/*
 * backend.c - tensor view helpers shared by all backends (see backend.h).
 */
#include "backend/backend.h"
#include "gpu/gpu.h"

#include "core/error.h"

int64_t wgml_tensor_nelements(const wgml_tensor *t) { return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]; }

int64_t wgml_tensor_nrows(const wgml_tensor *t) { return t->ne[1] * t->ne[2] * t->ne[3]; }

size_t wgml_tensor_nbytes(const wgml_tensor *t) {
    return wgml_row_size(t->type, t->ne[0]) * (size_t)wgml_tensor_nrows(t);
}

wgml_tensor wgml_tensor_rows(const wgml_tensor *t, int64_t first, int64_t n) {
    wgml_tensor v = *t;
    v.offset += (size_t)first * wgml_row_size(t->type, t->ne[0]);
    v.ne[1] = n;
    v.ne[2] = v.ne[3] = 1;
    return v;
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
