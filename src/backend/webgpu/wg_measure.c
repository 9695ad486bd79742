/*
 * wg_measure.c - the GPU's memory read bandwidth (kernels/bench_read.wgsl).
 *
 * 256 MiB in buffers of at most one binding each (128 MiB on lavapipe),
 * filled with non-constant words, read by two kernels (a coalesced grid-stride
 * loop, and contiguous per-invocation chunks that CPU adapters load best); the
 * best of a few timed submits (each waits for completion) of either counts.
 */
#include "backend/webgpu/wg_internal.h"
#include "core/alloc.h"
#include "core/error.h"

#include <string.h>
#include <time.h>

#define BENCH_BYTES  (256ull << 20)
#define BENCH_GROUPS 2048u
#define BENCH_PASSES 5

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

wgml_status wg_measure_bandwidth(wgml_backend *be, double *gbs, wgml_error *err) {
    wg_backend *wb = (wg_backend *)be;
    *gbs = 0;
    uint64_t per = wb->info->max_storage_binding_size < wb->info->max_buffer_size ? wb->info->max_storage_binding_size
                                                                                  : wb->info->max_buffer_size;
    per = per > BENCH_BYTES ? BENCH_BYTES : per & ~(uint64_t)255;
    int nbuf = (int)((BENCH_BYTES + per - 1) / per);
    if (nbuf > 16) return wgml_fail(err, WGML_ERR_UNSUPPORTED, "webgpu: bindings too small for a bandwidth test");
    wgml_gpu_buffer *src[16] = {0}, *dst = NULL;
    uint32_t *fill = wgml_malloc(8u << 20);
    wgml_status st = fill ? WGML_OK : wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory");
    uint32_t threads = BENCH_GROUPS * 64u;
    if (!st) st = wgml_gpu_buffer_create(wb->gpu, (uint64_t)threads * 4, WGML_GPU_STORAGE, "bench dst", &dst, err);
    for (int i = 0; i < nbuf && !st; i++) {
        st = wgml_gpu_buffer_create(wb->gpu, per, WGML_GPU_STORAGE, "bench src", &src[i], err);
        for (uint64_t off = 0; !st && off < per; off += 8u << 20) {
            size_t n = per - off < (8u << 20) ? (size_t)(per - off) : (8u << 20);
            for (size_t w = 0; w < n / 4; w++)
                fill[w] = (uint32_t)((off / 4 + w) * 2654435761u) ^ (uint32_t)i;
            wgml_gpu_write(wb->gpu, src[i], off, fill, n);
        }
    }
    double best = 1e30;
    for (int pass = 0; !st && pass < 2 * (BENCH_PASSES + 1); pass++) {
        int variant = pass / (BENCH_PASSES + 1);
        wgml_gpu_kernel *k = wg_kernel(wb, WGK_BENCH_READ, 0, variant ? WGF_CHUNKED : 0, err);
        if (!k) {
            st = err ? err->code : WGML_ERR_GPU;
            break;
        }
        be->begin(be, &(wgml_step){0, 1});
        for (int i = 0; i < nbuf; i++) {
            uint32_t p[4] = {(uint32_t)(per / 4), threads, 0, 0};
            wg_dispatch d = {.kernel = k,
                             .params = p,
                             .params_size = sizeof p,
                             .n_bind = 2,
                             .bind = {{2, src[i], 0, 0}, {3, dst, 0, 0}},
                             .grid = {BENCH_GROUPS, 1, 1}};
            wg_record(wb, &d);
        }
        double t0 = now_ms();
        st = be->end(be, err);
        double ms = now_ms() - t0;
        if (pass % (BENCH_PASSES + 1) > 0 && ms < best) best = ms; /* the first pass of each warms up */
    }
    for (int i = 0; i < nbuf; i++) {
        wg_record_forget(wb, src[i]);
        wgml_gpu_buffer_destroy(src[i]);
    }
    wg_record_forget(wb, dst);
    wgml_gpu_buffer_destroy(dst);
    wgml_free(fill);
    if (!st) *gbs = (double)(per * (uint64_t)nbuf) / (best / 1e3) / 1e9;
    return st;
}
