/*
 * gpu.h - the thin GPU layer: the few verbs the WebGPU backend needs.
 *
 * Two implementations: dawn.c over Dawn's native webgpu.h, and (for the
 * browser) web.c, whose functions are wasm imports implemented in JS over
 * navigator.gpu. Keep this interface small and free of webgpu.h types so that
 * the browser bridge stays a short JS file.
 *
 * Model of use:
 *   wgml_gpu_create            pick an adapter, create the device
 *   wgml_gpu_buffer_create     storage/uniform buffers (weights, KV, scratch)
 *   wgml_gpu_kernel_create     compile WGSL into a compute pipeline (or _async:
 *                              in the background, waited for at the next submit)
 *   wgml_gpu_bindgroup_create  bind buffers (ranges) to a kernel's bindings
 *   wgml_gpu_write             queue a host->device copy (before the next submit)
 *   wgml_gpu_dispatch ...      record dispatches and copies into the open command buffer
 *   wgml_gpu_submit            submit it, then copy the requested readbacks to host memory
 *
 * Errors (validation, out-of-memory, device loss) are caught by the layer and
 * kept as a sticky status: calls that return wgml_status report it; recording
 * calls return nothing and the next submit reports it. Nothing aborts.
 */
#ifndef WGML_GPU_H
#define WGML_GPU_H

#include <stddef.h>
#include <stdint.h>

#include "wgml.h"

typedef struct wgml_gpu wgml_gpu;
typedef struct wgml_gpu_buffer wgml_gpu_buffer;
typedef struct wgml_gpu_kernel wgml_gpu_kernel;
typedef struct wgml_gpu_bindgroup wgml_gpu_bindgroup;

typedef enum wgml_gpu_adapter_type {
    WGML_GPU_UNKNOWN = 0,
    WGML_GPU_DISCRETE,
    WGML_GPU_INTEGRATED,
    WGML_GPU_CPU, /* software rasterizers: SwiftShader, lavapipe, llvmpipe */
} wgml_gpu_adapter_type;

typedef struct wgml_gpu_adapter_info {
    char name[256];        /* "llvmpipe (LLVM 15.0.6, 256 bits)", "SwiftShader Device (Subzero)", ... */
    char vendor[128];
    char architecture[128];
    char driver[256];      /* driver description */
    char backend[16];      /* "vulkan", "metal", "d3d12", "opengles", "browser" */
    char source[512];      /* how it was found: the Vulkan ICD json, or "default" */
    wgml_gpu_adapter_type type;
    uint32_t vendor_id, device_id;
    int has_f16, has_subgroups, has_timestamps;
    uint32_t subgroup_min_size, subgroup_max_size;
    uint64_t max_buffer_size;
    uint64_t max_storage_binding_size;
    uint64_t max_uniform_binding_size;
    uint32_t max_storage_buffers_per_stage;
    uint32_t max_workgroup_invocations;
    uint32_t max_workgroup_size_x, max_workgroup_size_y, max_workgroup_size_z;
    uint32_t max_workgroup_storage;
    uint32_t max_workgroups_per_dimension;
    uint32_t min_storage_offset_alignment, min_uniform_offset_alignment;
} wgml_gpu_adapter_info;

/* Lists every adapter this machine offers (one per Vulkan driver found, plus
 * others the platform reports). Dawn's Null adapter is never listed. Returns
 * the count (which may exceed cap), or -1 with err filled. */
int wgml_gpu_list_adapters(wgml_gpu_adapter_info *out, int cap, wgml_error *err);

typedef struct wgml_gpu_options {
    const char *adapter;  /* case-insensitive substring of the name; NULL = best hardware adapter */
    int allow_software;   /* accept WGML_GPU_CPU adapters (always true when `adapter` names one) */
    int want_f16;         /* enable shader-f16 if the adapter has it */
    int want_subgroups;   /* enable subgroups if the adapter has it */
    int want_timestamps;  /* enable timestamp queries if the adapter has it */
    const char *cache_key; /* joins the adapter and driver in the isolation key of the on-disk
                              pipeline cache (pipeline_cache.h): the backend passes a hash of its
                              kernel sources; NULL = none. Dawn only; the browser has its own cache. */
} wgml_gpu_options;

/* Features actually enabled on the device (a subset of what the adapter has). */
typedef struct wgml_gpu_features {
    int f16, subgroups, timestamps;
} wgml_gpu_features;

wgml_status wgml_gpu_create(const wgml_gpu_options *opt, wgml_gpu **out, wgml_error *err);
void wgml_gpu_destroy(wgml_gpu *gpu);
const wgml_gpu_adapter_info *wgml_gpu_info(const wgml_gpu *gpu);
/* The limits the device was created with (the adapter's maxima). */
wgml_gpu_features wgml_gpu_enabled(const wgml_gpu *gpu);

/* The sticky status: WGML_OK, WGML_ERR_GPU or WGML_ERR_DEVICE_LOST, with message. */
wgml_status wgml_gpu_status(wgml_gpu *gpu, wgml_error *err);
/* For tests: destroys the device now, as a driver reset would. */
void wgml_gpu_lose_device(wgml_gpu *gpu);

/* ---- buffers ---- */
enum {
    WGML_GPU_STORAGE = 1,  /* read/write storage binding */
    WGML_GPU_UNIFORM = 2,  /* uniform binding */
};

/* A buffer usable as `usage`, also as copy source and destination. Fails with
 * WGML_ERR_GPU when the device cannot allocate it (size over the limits, OOM). */
wgml_status wgml_gpu_buffer_create(wgml_gpu *gpu, uint64_t size, int usage, const char *label,
                                   wgml_gpu_buffer **out, wgml_error *err);
void wgml_gpu_buffer_destroy(wgml_gpu_buffer *buf);
uint64_t wgml_gpu_buffer_size(const wgml_gpu_buffer *buf);

/* Queues a host->device copy; it happens before the commands of the next
 * submit. offset and size must be multiples of 4. */
void wgml_gpu_write(wgml_gpu *gpu, wgml_gpu_buffer *buf, uint64_t offset, const void *data, size_t size);

/* Synchronous read of a buffer range (submits what is recorded so far first). */
wgml_status wgml_gpu_read(wgml_gpu *gpu, wgml_gpu_buffer *buf, uint64_t offset, void *dst, size_t size,
                          wgml_error *err);

/* ---- kernels ---- */

/* Compiles WGSL and creates a compute pipeline for `entry` with an automatic
 * layout (bind group 0). Compilation errors come back with the compiler's
 * messages. `label` names the kernel in errors and timings. */
wgml_status wgml_gpu_kernel_create(wgml_gpu *gpu, const char *wgsl, const char *entry, const char *label,
                                   wgml_gpu_kernel **out, wgml_error *err);
void wgml_gpu_kernel_destroy(wgml_gpu_kernel *k);
const char *wgml_gpu_kernel_label(const wgml_gpu_kernel *k);

/* The same, but the pipeline compiles in the background and the call returns
 * once the WGSL is parsed and validated (its errors come back here, as above).
 * The kernel can be bound and dispatched at once: commands recorded with it
 * (and every command after them) wait, in order, until the next submit, which
 * then waits for every pipeline still compiling before encoding them. So the kernels a step needs, created as it is recorded,
 * compile side by side (Dawn's worker threads) instead of one after another.
 * A pipeline that fails sets the sticky status, naming the kernel. The browser
 * (web.c) creates it synchronously. */
wgml_status wgml_gpu_kernel_create_async(wgml_gpu *gpu, const char *wgsl, const char *entry, const char *label,
                                         wgml_gpu_kernel **out, wgml_error *err);
/* Waits for every pipeline still compiling, calling progress(user, done,
 * total) after each (may be NULL). Returns the sticky status. */
typedef void (*wgml_gpu_progress_fn)(void *user, int done, int total);
wgml_status wgml_gpu_kernels_wait(wgml_gpu *gpu, wgml_gpu_progress_fn progress, void *user, wgml_error *err);
/* How many pipelines are still compiling, and the time spent waiting for them. */
int wgml_gpu_kernels_pending(const wgml_gpu *gpu);
double wgml_gpu_kernel_wait_ms(const wgml_gpu *gpu);

typedef struct wgml_gpu_binding {
    uint32_t binding;
    wgml_gpu_buffer *buffer;
    uint64_t offset; /* multiple of the adapter's offset alignment */
    uint64_t size;   /* 0 = to the end of the buffer */
} wgml_gpu_binding;

wgml_status wgml_gpu_bindgroup_create(wgml_gpu *gpu, wgml_gpu_kernel *k, const wgml_gpu_binding *b, int n,
                                      wgml_gpu_bindgroup **out, wgml_error *err);
void wgml_gpu_bindgroup_destroy(wgml_gpu_bindgroup *bg);

/* Small entries of wgml's own kept beside the compiled pipelines, under the
 * same isolation key (adapter, driver, features, kernel sources) and with the
 * same safety (pipeline_cache.h): the kernels a model used, for its next load.
 * get returns the value's size with *value a new allocation (wgml_free it),
 * or 0 and NULL (a miss, the cache off, the browser); put writes one. */
size_t wgml_gpu_cache_get(wgml_gpu *gpu, const char *key, void **value);
void wgml_gpu_cache_put(wgml_gpu *gpu, const char *key, const void *value, size_t size);

/* ---- recording and submitting ---- */

/* Records a dispatch of k with bind group bg into the open command buffer
 * (opening one if none). */
void wgml_gpu_dispatch(wgml_gpu *gpu, wgml_gpu_kernel *k, wgml_gpu_bindgroup *bg, uint32_t x, uint32_t y,
                       uint32_t z);
/* Records a buffer-to-buffer copy (sizes and offsets multiples of 4). */
void wgml_gpu_copy(wgml_gpu *gpu, wgml_gpu_buffer *src, uint64_t src_offset, wgml_gpu_buffer *dst,
                   uint64_t dst_offset, uint64_t size);

typedef struct wgml_gpu_readback {
    wgml_gpu_buffer *src;
    uint64_t offset;
    size_t size; /* multiple of 4 */
    void *dst;   /* host memory */
} wgml_gpu_readback;

/* Submits the recorded commands as one queue submission (with copies of the
 * readback ranges into a staging buffer appended), waits for completion, and
 * copies the readbacks to host memory. Returns the sticky status. */
wgml_status wgml_gpu_submit(wgml_gpu *gpu, const wgml_gpu_readback *reads, int n_reads, wgml_error *err);

/* ---- counters and timing ---- */
typedef struct wgml_gpu_counters {
    uint64_t submits, dispatches;
    uint64_t buffers_created, bindgroups_created, kernels_created;
    uint64_t write_bytes, read_bytes;
    uint64_t memory_bytes; /* live buffer bytes */
    /* the on-disk pipeline cache (pipeline_cache.h; all 0 when it is off):
     * entries Dawn found there, looked for in vain, and wrote */
    uint64_t cache_hits, cache_misses, cache_stores;
} wgml_gpu_counters;

void wgml_gpu_get_counters(const wgml_gpu *gpu, wgml_gpu_counters *c);

/* With profiling on (and timestamps enabled), each dispatch is timed on the
 * GPU and times accumulate per kernel label. */
void wgml_gpu_set_profiling(wgml_gpu *gpu, int on);
typedef struct wgml_gpu_kernel_time {
    const char *label;
    uint64_t calls;
    double total_ms;
} wgml_gpu_kernel_time;
int wgml_gpu_kernel_times(const wgml_gpu *gpu, wgml_gpu_kernel_time *out, int cap);

#endif
