/*
 * dawn_internal.h - what the Dawn implementation of gpu.h shares between its
 * files: dawn_adapter.c (finding adapters), dawn.c (device, errors, buffers,
 * kernels, bind groups, the pipeline cache's callbacks) and dawn_record.c
 * (recording, submits, readbacks, profiling). Not part of the GPU layer's API.
 */
#ifndef WGML_GPU_DAWN_INTERNAL_H
#define WGML_GPU_DAWN_INTERNAL_H

#include "core/error.h"
#include "gpu/gpu.h"
#include "gpu/pipeline_cache.h"

#include <webgpu/webgpu.h>

/* Longest wait for adapter and device requests, which never need GPU work. */
#define WGML_DAWN_REQUEST_TIMEOUT_NS (60ull * 1000 * 1000 * 1000)

/* ---- the objects (dawn.c creates them, dawn_record.c records with them) ---- */

#define WGML_DAWN_PAIRS_PER_CHUNK 256 /* timed passes per query set */

typedef struct dawn_callback_result {
    int done;
    int status;
    int type;
    char message[WGML_ERROR_MESSAGE_MAX];
} dawn_callback_result;

/* A pipeline being created asynchronously (wgml_gpu_kernel_create_async).
 * Owned by the wgml_gpu, not the kernel: Dawn may run the callback after the
 * kernel is gone (at the latest when the instance is released), so the entry
 * lives until the gpu is destroyed or the wait is over. */
typedef struct dawn_pending {
    WGPUFuture future;
    wgml_gpu_kernel *k; /* NULL once the kernel was destroyed first */
    int done;
    WGPUCreatePipelineAsyncStatus status;
    WGPUComputePipeline pipeline; /* delivered by the callback */
    char message[WGML_ERROR_MESSAGE_MAX];
} dawn_pending;

/* A command recorded while some kernel it needs is still compiling: kept in
 * order and encoded at the next submit, once every pipeline is there. */
typedef struct dawn_deferred {
    wgml_gpu_kernel *k;      /* a dispatch; NULL for a copy */
    wgml_gpu_bindgroup *bg;
    uint32_t x, y, z;
    WGPUBuffer src, dst;     /* a copy (references held) */
    uint64_t src_offset, dst_offset, size;
} dawn_deferred;

typedef struct dawn_query_chunk {
    WGPUQuerySet set;
    WGPUBuffer resolve; /* WGML_DAWN_PAIRS_PER_CHUNK * 2 timestamps */
} dawn_query_chunk;

struct wgml_gpu {
    WGPUInstance instance;
    WGPUAdapter adapter;
    WGPUDevice device;
    WGPUQueue queue;
    wgml_gpu_adapter_info info;
    wgml_gpu_features enabled;
    uint64_t timeout_ns;
    uint64_t memory_limit; /* WGML_GPU_MEMORY_LIMIT, 0 = none */
    wgml_pipeline_cache *cache; /* Dawn's blob cache on disk, or NULL (off); outlives the device */
    char cache_isolation[1024]; /* its isolation key (Dawn keeps a view of it) */

    wgml_status status; /* sticky */
    char message[WGML_ERROR_MESSAGE_MAX];
    int destroying;

    WGPUCommandEncoder encoder; /* open recording, or NULL */
    WGPUComputePassEncoder pass;

    WGPUBuffer staging; /* MapRead | CopyDst */
    uint64_t staging_size;

    int profiling;
    dawn_query_chunk *chunks;
    int n_chunks, cap_chunks;
    int *pair_slot; /* per timed pass in the open recording: index into times */
    int n_pairs, cap_pairs;
    wgml_gpu_kernel_time *times; /* labels owned */
    int n_times, cap_times;

    dawn_callback_result scope, map, done, compile;
    wgml_gpu_counters counters;

    dawn_pending **pending; /* pipelines still compiling, in request order */
    int n_pending, cap_pending;
    dawn_deferred *deferred; /* commands waiting for them */
    int n_deferred, cap_deferred;
    double kernel_wait_ms; /* time spent waiting for them */
};

struct wgml_gpu_buffer {
    wgml_gpu *gpu;
    WGPUBuffer buf;
    uint64_t size;
};

struct wgml_gpu_kernel {
    wgml_gpu *gpu;
    WGPUComputePipeline pipeline; /* NULL while pending */
    WGPUBindGroupLayout layout;
    dawn_pending *pending;        /* non-NULL while its pipeline compiles */
    char *label;
    int time_slot;
    int refs; /* the owner's, plus one per deferred command */
};

struct wgml_gpu_bindgroup {
    WGPUBindGroup group;        /* NULL until made, for a pending kernel's */
    wgml_gpu_kernel *k;         /* a bind group still to make: its kernel (referenced) */
    WGPUBindGroupEntry *entries; /* and its entries (buffers referenced) */
    int n_entries;
    int refs;
};

/* ---- dawn.c ---- */

/* Sets the sticky status: the first error wins, device loss overrides an error. */
void wgml_dawn_set_status(wgml_gpu *g, wgml_status code, const char *fmt, ...) WGML_PRINTF(3, 4);
/* Fills err from the sticky status and returns its code. */
wgml_status wgml_dawn_sticky(const wgml_gpu *g, wgml_error *err);
/* Waits for a future of this device (WGML_GPU_TIMEOUT, device loss). */
wgml_status wgml_dawn_wait(wgml_gpu *g, WGPUFuture f, const char *what, wgml_error *err);
/* Creates a device buffer inside error scopes; counts it. */
wgml_status wgml_dawn_create_buffer(wgml_gpu *g, uint64_t size, WGPUBufferUsage usage, const char *label,
                                    WGPUBuffer *out, wgml_error *err);
/* Destroys and releases a buffer (NULL-safe), uncounting its bytes. */
void wgml_dawn_release_buffer(wgml_gpu *g, WGPUBuffer *b, uint64_t size);

/* Makes a deferred bind group once its kernel's pipeline is there. */
wgml_status wgml_dawn_make_bindgroup(wgml_gpu *g, wgml_gpu_bindgroup *bg, wgml_error *err);
/* Reference counting of kernels and bind groups held by deferred commands. */
void wgml_dawn_kernel_unref(wgml_gpu_kernel *k);
void wgml_dawn_bindgroup_unref(wgml_gpu_bindgroup *bg);

/* ---- dawn_record.c ---- */

/* Drops the open recording (encoder, pass, timed passes, deferred commands). */
void wgml_dawn_discard_recording(wgml_gpu *g);

/* ---- dawn_adapter.c ---- */

/* Copies a WGPUStringView into a NUL-terminated buffer (truncating). */
void wgml_dawn_sv_copy(char *dst, size_t cap, WGPUStringView sv);
/* A WGPUStringView of a C string (NULL gives the empty view). */
WGPUStringView wgml_dawn_sv(const char *s);

/* Fills `out` from an adapter; `source` says how it was found. */
void wgml_dawn_adapter_info(WGPUAdapter adapter, const char *source, wgml_gpu_adapter_info *out);

/* Opens the adapter that `source` names (a Vulkan ICD json, or "default" for
 * Dawn's own choice) in a fresh instance. The Null adapter is refused. */
wgml_status wgml_dawn_open(const char *source, WGPUInstance *instance, WGPUAdapter *adapter, wgml_error *err);

/* Picks the adapter for `opt` (see wgml_gpu_options) and fills its info. */
wgml_status wgml_dawn_choose(const wgml_gpu_options *opt, wgml_gpu_adapter_info *chosen, wgml_error *err);

#endif
