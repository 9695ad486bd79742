/*
 * wg_backend.c - the WebGPU backend object: device and capability tier,
 * buffers, the one-time weight upload, and steps (one queue submit each).
 *
 * Tiers, chosen from what the adapter offers (and the options allow):
 *   f32          everything in f32 (SwiftShader, browsers without shader-f16)
 *   shader-f16   the KV cache is stored in f16 (half the attention traffic)
 *   subgroups    reductions use subgroupAdd/Max (either tier)
 * Weights are split by rows into windows that each fit one storage binding
 * (maxStorageBufferBindingSize: 128 MiB on lavapipe), uploaded in chunks
 * through a small staging area, never whole in host memory.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/webgpu/wg_internal.h"
#include "backend/webgpu/wgsl_sources.h"
#include "core/alloc.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/hash.h"

#define UPLOAD_CHUNK (8u << 20)

static uint64_t binding_limit(const wg_backend *wb) {
    uint64_t a = wb->info->max_storage_binding_size, b = wb->info->max_buffer_size;
    uint64_t l = a < b ? a : b;
    return (l & ~(uint64_t)255);
}

/* Weight windows: the binding limit, or a smaller one tests ask for. */
static uint64_t window_limit(const wg_backend *wb) {
    uint64_t l = binding_limit(wb);
    return wb->max_window && wb->max_window < l ? wb->max_window : l;
}

void wgml_backend_webgpu_lose_device(wgml_backend *be) {
    if (be && !strcmp(be->name, "webgpu")) wgml_gpu_lose_device(((wg_backend *)be)->gpu);
}

static wgml_status buffer_create(wgml_backend *be, size_t size, wgml_buffer_usage usage, wgml_buffer **out,
                                 wgml_error *err) {
    wg_backend *wb = (wg_backend *)be;
    (void)usage;
    *out = NULL;
    uint64_t gsize = ((uint64_t)size + 3) & ~(uint64_t)3;
    if (gsize == 0) gsize = 4;
    if (gsize > binding_limit(wb))
        return wgml_fail(err, WGML_ERR_GPU, "webgpu: a buffer of %zu bytes exceeds what one binding of %s allows (%llu)",
                         size, wb->info->name, (unsigned long long)binding_limit(wb));
    wgml_buffer *b = wgml_calloc(1, sizeof *b);
    if (!b) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory");
    wgml_status st = wgml_gpu_buffer_create(wb->gpu, gsize, WGML_GPU_STORAGE, "wgml tensor", &b->gpu, err);
    if (st) {
        wgml_free(b);
        return st;
    }
    b->size = size;
    b->gpu_bytes = gsize;
    *out = b;
    return WGML_OK;
}

static void buffer_free(wgml_backend *be, wgml_buffer *b) {
    wg_backend *wb = (wg_backend *)be;
    if (!b) return;
    if (b->gpu) {
        wg_record_forget(wb, b->gpu);
        wgml_gpu_buffer_destroy(b->gpu);
    }
    for (int i = 0; i < b->n_windows; i++) {
        wg_record_forget(wb, b->win[i].gpu);
        wgml_gpu_buffer_destroy(b->win[i].gpu);
    }
    if (b->is_weight) wb->weight_bytes -= b->gpu_bytes;
    wgml_free(b->win);
    wgml_free(b);
}

/* Repacks rows [row0, row0 + rows) (GGUF layout at src) into the windows
 * they belong to, through the staging area, in chunks of an even number of
 * rows (so that 2-byte scale regions stay word-aligned). */
static wgml_status upload_rows(wg_backend *wb, wgml_buffer *b, int64_t row0, int64_t rows, const void *src,
                               wgml_error *err) {
    int mw, sbytes;
    wg_repack_layout(b->wtype, &mw, &sbytes);
    const wgml_dtype_traits *tr = wgml_dtype_get(b->wtype);
    size_t row_src = wgml_row_size(b->wtype, b->ne0);
    uint64_t bpr = (uint64_t)(b->ne0 / tr->block_size);
    uint32_t sb;
    uint64_t row_bytes = wg_repack_size(b->wtype, b->ne0, 1, &sb) + 8;
    int64_t chunk_rows = (int64_t)(UPLOAD_CHUNK / row_bytes);
    if (chunk_rows < 2) chunk_rows = 2;
    chunk_rows &= ~(int64_t)1;
    uint8_t *staging = wgml_malloc((size_t)wg_repack_size(b->wtype, b->ne0, chunk_rows, &sb) + 16);
    if (!staging) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory uploading weights");
    for (int w = 0; w < b->n_windows; w++) {
        wg_window *win = &b->win[w];
        int64_t lo = row0 > win->row0 ? row0 : win->row0;
        int64_t hi = row0 + rows < win->row0 + win->rows ? row0 + rows : win->row0 + win->rows;
        for (int64_t r = lo; r < hi; r += chunk_rows) {
            int64_t nr = hi - r < chunk_rows ? hi - r : chunk_rows;
            int64_t wr = r - win->row0; /* row within the window */
            uint32_t csb;
            uint64_t csize = wg_repack_size(b->wtype, b->ne0, nr, &csb);
            wg_repack(b->wtype, b->ne0, nr, (const uint8_t *)src + (size_t)(r - row0) * row_src, staging, csb);
            if (mw == 0) {
                wgml_gpu_write(wb->gpu, win->gpu, (uint64_t)wr * row_src, staging, (size_t)csize);
            } else {
                uint64_t main_off = (uint64_t)wr * bpr * (uint64_t)mw * 4;
                uint64_t sc_off = (uint64_t)win->sb_word * 4 + (uint64_t)wr * bpr * (uint64_t)sbytes;
                wgml_gpu_write(wb->gpu, win->gpu, main_off, staging, (size_t)csb * 4);
                wgml_gpu_write(wb->gpu, win->gpu, sc_off, staging + (size_t)csb * 4, (size_t)(csize - (uint64_t)csb * 4));
            }
        }
    }
    wgml_free(staging);
    return wgml_gpu_status(wb->gpu, err);
}

static wgml_status weight_create(wgml_backend *be, uint32_t type, int64_t ne0, int64_t ne1, const void *data,
                                 const char *name, wgml_buffer **out, wgml_error *err) {
    wg_backend *wb = (wg_backend *)be;
    *out = NULL;
    int mw, sbytes;
    const wgml_dtype_traits *tr = wgml_dtype_get(type);
    if (!tr || !wg_repack_layout(type, &mw, &sbytes) || !wg_has_decoder(type))
        return wgml_fail(err, WGML_ERR_UNSUPPORTED, "webgpu: tensor '%s' has type %s, which the WebGPU backend cannot use",
                         name ? name : "?", wgml_dtype_name(type));
    if (ne0 <= 0 || ne1 <= 0 || ne0 % tr->block_size || ne0 > (int64_t)1 << 28)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "webgpu: tensor '%s' has a bad shape", name ? name : "?");
    uint32_t sb;
    uint64_t row_bytes = wg_repack_size(type, ne0, 1, &sb) + 8, limit = window_limit(wb);
    int64_t rows_per_win = (int64_t)(limit / row_bytes);
    if (rows_per_win < 1)
        return wgml_fail(err, WGML_ERR_GPU, "webgpu: one row of tensor '%s' exceeds the binding limit of %s",
                         name ? name : "?", wb->info->name);
    /* even row counts keep 2-byte scale regions word-aligned at chunk borders */
    if (rows_per_win > 1) rows_per_win &= ~(int64_t)1;
    wgml_buffer *b = wgml_calloc(1, sizeof *b);
    int n_win = (int)((ne1 + rows_per_win - 1) / rows_per_win);
    if (b) b->win = wgml_calloc((size_t)n_win, sizeof *b->win);
    if (!b || !b->win) {
        if (b) wgml_free(b->win);
        wgml_free(b);
        return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory uploading '%s'", name ? name : "?");
    }
    b->is_weight = 1;
    b->wtype = type;
    b->ne0 = ne0;
    b->ne1 = ne1;
    b->size = wgml_row_size(type, ne0) * (size_t)ne1;
    b->host = data;
    wgml_status st = WGML_OK;
    for (int w = 0; w < n_win && !st; w++) {
        wg_window *win = &b->win[w];
        win->row0 = (int64_t)w * rows_per_win;
        win->rows = ne1 - win->row0 < rows_per_win ? ne1 - win->row0 : rows_per_win;
        uint64_t size = wg_repack_size(type, ne0, win->rows, &win->sb_word);
        st = wgml_gpu_buffer_create(wb->gpu, size, WGML_GPU_STORAGE, name, &win->gpu, err);
        if (st) {
            wgml_error_prefix(err, "uploading '%s' (%llu bytes)", name ? name : "?", (unsigned long long)size);
            break;
        }
        b->n_windows++;
        b->gpu_bytes += size;
    }
    wb->weight_bytes += b->gpu_bytes;
    if (!st && data) st = upload_rows(wb, b, 0, ne1, data, err);
    if (st) {
        buffer_free(be, b);
        return st;
    }
    *out = b;
    return WGML_OK;
}

static wgml_status weight_write(wgml_backend *be, wgml_buffer *b, int64_t row0, int64_t rows, const void *data,
                                wgml_error *err) {
    if (!b->is_weight || row0 < 0 || rows < 0 || row0 + rows > b->ne1 || (row0 & 1))
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "webgpu: weight_write of rows %lld..%lld (of %lld; start even)",
                         (long long)row0, (long long)(row0 + rows), (long long)b->ne1);
    return upload_rows((wg_backend *)be, b, row0, rows, data, err);
}

static wgml_status buffer_write(wgml_backend *be, wgml_buffer *b, size_t offset, const void *data, size_t size,
                                wgml_error *err) {
    wg_backend *wb = (wg_backend *)be;
    if (b->is_weight) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "webgpu: weight buffers are written at creation");
    if (offset > b->size || size > b->size - offset || (offset & 3))
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "webgpu: write of %zu bytes at %zu into a buffer of %zu", size,
                         offset, b->size);
    size_t whole = size & ~(size_t)3;
    if (whole) wgml_gpu_write(wb->gpu, b->gpu, offset, data, whole);
    if (size > whole) { /* a ragged tail: pad with what the buffer holds */
        uint8_t tail[4] = {0};
        memcpy(tail, (const uint8_t *)data + whole, size - whole);
        wgml_gpu_write(wb->gpu, b->gpu, offset + whole, tail, 4);
    }
    return wgml_gpu_status(wb->gpu, err);
}

static wgml_status buffer_read(wgml_backend *be, wgml_buffer *b, size_t offset, void *data, size_t size,
                               wgml_error *err) {
    wg_backend *wb = (wg_backend *)be;
    if (b->is_weight) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "webgpu: weight buffers cannot be read back");
    if (offset > b->size || size > b->size - offset || (offset & 3))
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "webgpu: read of %zu bytes at %zu from a buffer of %zu", size,
                         offset, b->size);
    size_t whole = (size + 3) & ~(size_t)3;
    if (whole == size) return wgml_gpu_read(wb->gpu, b->gpu, offset, data, size, err);
    uint8_t *tmp = wgml_malloc(whole);
    if (!tmp) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory");
    wgml_status st = wgml_gpu_read(wb->gpu, b->gpu, offset, tmp, whole, err);
    if (!st) memcpy(data, tmp, size);
    wgml_free(tmp);
    return st;
}

static void begin(wgml_backend *be, const wgml_step *step) {
    wg_backend *wb = (wg_backend *)be;
    wb->step = *step;
    wb->in_step = 1;
    wb->n_slots = 0;
    wb->n_reads = 0;
    wgml_sticky_clear(&wb->sticky);
    wb->steps++;
}

/* The scratch buffers the step outgrew (wg_scratch), after its submit. */
static void drop_retired(wg_backend *wb) {
    if (!wb->n_retired) return;
    for (int i = 0; i < wb->n_retired; i++) wgml_gpu_buffer_destroy(wb->retired[i]);
    wg_record_forget(wb, NULL);
    wb->n_retired = 0;
}

static wgml_status end(wgml_backend *be, wgml_error *err) {
    wg_backend *wb = (wg_backend *)be;
    wb->in_step = 0;
    wg_record_flush(wb);
    if (wb->sticky.status) {
        /* recorded dispatches are discarded with the failed step */
        wgml_gpu_submit(wb->gpu, NULL, 0, NULL);
        drop_retired(wb);
        return wgml_sticky_report(&wb->sticky, err);
    }
    wgml_status st = wgml_gpu_submit(wb->gpu, wb->reads, wb->n_reads, err);
    drop_retired(wb);
    return st;
}

static void upload(wgml_backend *be, const wgml_tensor *dst, const void *src, size_t size) {
    wg_backend *wb = (wg_backend *)be;
    if (!dst || !dst->buf || dst->buf->is_weight || dst->offset + size > dst->buf->size || (dst->offset & 3) ||
        (size & 3)) {
        wg_error(wb, WGML_ERR_INVALID_ARGUMENT, "upload: %zu bytes do not fit tensor '%s'", size,
                 dst && dst->name ? dst->name : "?");
        return;
    }
    wgml_gpu_write(wb->gpu, dst->buf->gpu, dst->offset, src, size);
}

static void download(wgml_backend *be, const wgml_tensor *src, void *dst, size_t size) {
    wg_backend *wb = (wg_backend *)be;
    if (!src || !src->buf || src->buf->is_weight || src->offset + size > src->buf->size || (src->offset & 3) ||
        (size & 3)) {
        wg_error(wb, WGML_ERR_INVALID_ARGUMENT, "download: %zu bytes do not fit tensor '%s'", size,
                 src && src->name ? src->name : "?");
        return;
    }
    if (wb->n_reads == wb->cap_reads) {
        int cap = wb->cap_reads ? wb->cap_reads * 2 : 16;
        wgml_gpu_readback *r = wgml_realloc(wb->reads, (size_t)cap * sizeof *r);
        if (!r) {
            wg_error(wb, WGML_ERR_OUT_OF_MEMORY, "download: out of memory for %d reads in one step", cap);
            return;
        }
        wb->reads = r;
        wb->cap_reads = cap;
    }
    wb->reads[wb->n_reads++] = (wgml_gpu_readback){src->buf->gpu, src->offset, size, dst};
}

static void get_stats(wgml_backend *be, wgml_backend_stats *s) {
    wg_backend *wb = (wg_backend *)be;
    wgml_gpu_counters c;
    wgml_gpu_get_counters(wb->gpu, &c);
    *s = (wgml_backend_stats){.steps = wb->steps,
                              .submits = c.submits,
                              .dispatches = c.dispatches,
                              .buffers_created = c.buffers_created,
                              .bind_groups_created = c.bindgroups_created,
                              .pipelines_created = c.kernels_created,
                              .upload_bytes = c.write_bytes,
                              .readback_bytes = c.read_bytes,
                              .device_memory_bytes = c.memory_bytes,
                              .pipeline_compile_ms = wb->compile_ms + wgml_gpu_kernel_wait_ms(wb->gpu),
                              .pipeline_cache_hits = c.cache_hits,
                              .pipeline_cache_misses = c.cache_misses,
                              .pipeline_cache_stores = c.cache_stores};
}

static void set_profiling(wgml_backend *be, int on) { wgml_gpu_set_profiling(((wg_backend *)be)->gpu, on); }

static int get_kernel_times(wgml_backend *be, wgml_kernel_time *t, int cap) {
    wgml_gpu_kernel_time g[64];
    int n = wgml_gpu_kernel_times(((wg_backend *)be)->gpu, g, 64);
    for (int i = 0; i < n && i < cap && i < 64; i++) t[i] = (wgml_kernel_time){g[i].label, g[i].calls, g[i].total_ms, 0};
    return n;
}

static int supports_type(wgml_backend *be, uint32_t type) {
    (void)be;
    int mw, sb;
    return wg_repack_layout(type, &mw, &sb) && wg_has_decoder(type);
}

static void wg_free(wgml_backend *be) {
    wg_backend *wb = (wg_backend *)be;
    if (!wb) return;
    for (int i = 0; i < 2; i++) buffer_free(be, wb->tmp[i]);
    wgml_free(wb->reads);
    wg_record_free(wb);
    wg_kernels_remember(wb);
    wg_pipelines_free(wb);
    wgml_gpu_buffer_destroy(wb->part);
    wgml_gpu_buffer_destroy(wb->rope);
    wgml_gpu_buffer_destroy(wb->rope_pos);
    wgml_gpu_buffer_destroy(wb->scratch);
    for (int i = 0; i < wb->n_retired; i++) wgml_gpu_buffer_destroy(wb->retired[i]);
    wgml_gpu_destroy(wb->gpu);
    wgml_free(wb);
}

/* "wgsl-" and 16 hex digits: an FNV-1a 64 hash of every embedded kernel file
 * (names and sources), which isolates the on-disk pipeline cache of one
 * build's kernels from another's (src/gpu/pipeline_cache.h). */
static void kernels_hash(char *out, size_t cap) {
    uint64_t h = WGML_FNV64_BASIS;
    for (int i = 0; i < wgml_wgsl_count(); i++) {
        const char *name = wgml_wgsl_name(i), *src = wgml_wgsl_source(name);
        h = wgml_fnv64(h, name, strlen(name) + 1);
        if (src) h = wgml_fnv64(h, src, strlen(src) + 1);
    }
    snprintf(out, cap, "wgsl-%016llx", (unsigned long long)h);
}

wgml_status wgml_backend_webgpu_create(const wgml_webgpu_options *opt, wgml_backend **out, wgml_error *err) {
    *out = NULL;
    wgml_webgpu_options o = opt ? *opt : (wgml_webgpu_options){0};
    wg_backend *wb = wgml_calloc(1, sizeof *wb);
    if (!wb) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory creating the WebGPU backend");
    char kernels[32];
    kernels_hash(kernels, sizeof kernels);
    wgml_gpu_options go = {.adapter = o.adapter,
                           .allow_software = o.allow_software || o.adapter,
                           .want_f16 = !o.force_f32,
                           .want_subgroups = !o.no_subgroups,
                           .want_timestamps = 1,
                           .cache_key = kernels};
    wgml_status st = wgml_gpu_create(&go, &wb->gpu, err);
    if (st) {
        wgml_free(wb);
        return st;
    }
    wb->info = wgml_gpu_info(wb->gpu);
    wb->max_window = o.max_binding;
    wgml_gpu_features f = wgml_gpu_enabled(wb->gpu);
    wb->tier_f16 = f.f16;
    /* subgroup reductions assume a power-of-two size that divides the workgroup of 64 */
    uint32_t sgmin = wb->info->subgroup_min_size, sgmax = wb->info->subgroup_max_size;
    wb->tier_subgroups = f.subgroups && sgmin >= 1 && sgmax <= 64 && (sgmin & (sgmin - 1)) == 0;
    /* A fixed subgroup size lets a matvec workgroup be one subgroup: no
     * barriers, which cost microseconds per workgroup on CPU adapters. */
    wb->mv_wg_subgroup = wb->tier_subgroups && sgmin == sgmax && sgmin >= 4;
    wb->mv_rows = 4;
    /* CPU adapters run a workgroup's invocations as SIMD lanes: one row per
     * lane needs no reduction at all. WGML_MATVEC_LAYOUT=reduce|lanes overrides. */
    wb->mv_lane_rows = wb->info->type == WGML_GPU_CPU && !o.gpu_layout;
    const char *layout_env = getenv("WGML_MATVEC_LAYOUT");
    if (layout_env) wb->mv_lane_rows = strcmp(layout_env, "lanes") == 0;
    /* Lane rows: a workgroup is one SIMD batch (the subgroup), whose lanes
     * share the input loads through subgroupBroadcast when the size is fixed. */
    wb->mv_lane_wg = wb->tier_subgroups && sgmax >= 4 ? (int)sgmax : 8;
    const char *wg_env = getenv("WGML_MATVEC_WG"); /* tuning experiments */
    if (wg_env && atoi(wg_env) >= 1 && atoi(wg_env) <= 256) wb->mv_lane_wg = atoi(wg_env);
    wb->mv_lane_sg = wb->mv_wg_subgroup && wb->mv_lane_wg % (int)sgmax == 0;
    const char *rows_env = getenv("WGML_MATVEC_ROWS"); /* tuning experiments */
    if (rows_env && atoi(rows_env) >= 1 && atoi(rows_env) <= 64) wb->mv_rows = atoi(rows_env);
    if ((st = wg_record_init(wb, err))) {
        wg_free(&wb->base);
        return st;
    }
    snprintf(wb->device_label, sizeof wb->device_label, "%s", wb->info->name);
    wgml_backend *b = &wb->base;
    b->name = "webgpu";
    b->device_name = wb->device_label;
    b->kv_type = wb->tier_f16 ? WGML_F16 : WGML_F32;
    b->kv_types = 1u << b->kv_type; /* the kernels are composed for the tier's KVT */
    b->max_buffer_size = binding_limit(wb);
    b->free = wg_free;
    b->buffer_create = buffer_create;
    b->weight_create = weight_create;
    b->weight_write = weight_write;
    b->buffer_free = buffer_free;
    b->buffer_write = buffer_write;
    b->buffer_read = buffer_read;
    b->begin = begin;
    b->end = end;
    b->upload = upload;
    b->download = download;
    b->run = wg_run;
    b->supports = wg_supports;
    b->get_stats = get_stats;
    b->set_profiling = set_profiling;
    b->get_kernel_times = get_kernel_times;
    b->supports_type = supports_type;
    b->measure_bandwidth = wg_measure_bandwidth;
    b->kernels_prepare = wg_kernels_prepare;
    b->kernels_wait = wg_kernels_wait;
    *out = b;
    return WGML_OK;
}
