/*
 * backend.h - the op interface: the only thing a model sees of a backend.
 *
 * A model writes its forward pass once, as a sequence of ops (ops.h, the one
 * list); the CPU backend executes each op as it is called, the WebGPU backend
 * records it into the step's command buffer. Ops are deliberately a little
 * coarser than textbook primitives: each carries the optional
 * prologue/epilogue that a transformer layer wants fused (RMS-norm of the
 * input, bias, residual add, SwiGLU, RoPE + KV-cache write), so a backend can
 * run a layer in a handful of kernels. The plain primitives are there too
 * (rms_norm, rope, softmax, add, swiglu) for other models and for op-by-op
 * testing.
 *
 * Execution model
 *   be->begin(be, &step)          step = {pos, n_tokens}: positions pos..pos+n-1
 *   be->upload(...)               small host->device copies (token ids)
 *   wgml_op_matmul(be, &args) ... one typed call per op (below), each going
 *                                 through be->run(be, WGML_OP_..., &args):
 *                                 executed or recorded
 *   be->download(...)             device->host copies, valid after end()
 *   be->end(be, err)              runs/submits everything and waits; the first
 *                                 error of any op in the step is returned here
 * Ops return nothing: an op with bad arguments records a sticky error that
 * end() reports (the GPU reports its errors asynchronously anyway). Tensors
 * are views (tensor.h).
 */
#ifndef WGML_BACKEND_H
#define WGML_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "backend/ops.h"
#include "backend/tensor.h"
#include "core/dtype.h"
#include "wgml.h"

/* Counters for tests and benchmarks. */
typedef struct wgml_backend_stats {
    uint64_t steps;
    uint64_t submits;
    uint64_t dispatches;
    uint64_t buffers_created;
    uint64_t bind_groups_created;
    uint64_t pipelines_created;
    uint64_t upload_bytes;   /* host->device during steps */
    uint64_t readback_bytes; /* device->host during steps */
    uint64_t device_memory_bytes; /* currently allocated */
    double pipeline_compile_ms;   /* total time spent compiling kernels */
    /* WebGPU's on-disk pipeline cache (src/gpu/pipeline_cache.h): blobs of
     * compiled pipelines found, looked for in vain, and written (0 when off) */
    uint64_t pipeline_cache_hits, pipeline_cache_misses, pipeline_cache_stores;
} wgml_backend_stats;

/* Per-kernel time (GPU timestamps or CPU wall time), accumulated while
 * profiling is on. */
typedef struct wgml_kernel_time {
    const char *name;
    uint64_t calls;
    double total_ms;
    double flop; /* arithmetic of those calls (2 per multiply-add; the CPU's matmuls), 0 where not counted */
} wgml_kernel_time;

struct wgml_backend {
    const char *name; /* "cpu", "webgpu" */
    const char *device_name;
    int n_threads; /* host threads the backend computes with (CPU) */
    uint32_t kv_type;  /* the KV-cache type this backend prefers (WGML_F32 or WGML_F16) */
    uint32_t kv_types; /* every KV-cache type it can use, as bits 1u << type */
    uint64_t max_buffer_size; /* the largest buffer buffer_create makes (WebGPU: one storage binding); 0: no limit */

    void (*free)(wgml_backend *be);

    /* ---- memory ---- */
    wgml_status (*buffer_create)(wgml_backend *be, size_t size, wgml_buffer_usage usage, wgml_buffer **out,
                                 wgml_error *err);
    /* A weight tensor [ne1 rows][ne0] of `type` from host memory in GGUF
     * layout that stays valid while the buffer lives. The CPU backend uses it
     * in place, or copies it into its kernels' own layout; a GPU backend
     * uploads it once (in its own layout: weight buffers can only be used
     * whole, as weights, by ops). */
    wgml_status (*weight_create)(wgml_backend *be, uint32_t type, int64_t ne0, int64_t ne1, const void *data,
                                 const char *name, wgml_buffer **out, wgml_error *err);
    /* 1 when weight buf reads the memory given to weight_create while it
     * lives; 0 when the backend keeps a copy of its own, so that the caller
     * may let the pages go (a loader drops them from its file mapping).
     * Optional: NULL means 1. */
    int (*weight_in_place)(wgml_backend *be, const wgml_buffer *buf);
    /* Fills rows [row0, row0 + rows) of a weight created with data == NULL
     * from GGUF-layout bytes (streamed loading). row0 must be even. */
    wgml_status (*weight_write)(wgml_backend *be, wgml_buffer *buf, int64_t row0, int64_t rows, const void *data,
                                wgml_error *err);
    void (*buffer_free)(wgml_backend *be, wgml_buffer *buf);
    /* Synchronous copies outside steps (loading, tests). */
    wgml_status (*buffer_write)(wgml_backend *be, wgml_buffer *buf, size_t offset, const void *data,
                                size_t size, wgml_error *err);
    wgml_status (*buffer_read)(wgml_backend *be, wgml_buffer *buf, size_t offset, void *data, size_t size,
                               wgml_error *err);

    /* ---- steps ---- */
    void (*begin)(wgml_backend *be, const wgml_step *step);
    wgml_status (*end)(wgml_backend *be, wgml_error *err);
    void (*upload)(wgml_backend *be, const wgml_tensor *dst, const void *src, size_t size);
    void (*download)(wgml_backend *be, const wgml_tensor *src, void *dst, size_t size);

    /* ---- ops ---- */
    /* Runs (or records) op with its arguments struct (ops.h). Every backend
     * first checks them with wgml_op_validate; an op it cannot run records
     * WGML_ERR_UNSUPPORTED. Models call the typed wrappers below. */
    void (*run)(wgml_backend *be, wgml_op op, const void *args);
    /* 1 when the backend implements op (args NULL), or can run op with these
     * arguments (their weight types, sizes). */
    int (*supports)(wgml_backend *be, wgml_op op, const void *args);

    /* ---- introspection ---- */
    void (*get_stats)(wgml_backend *be, wgml_backend_stats *stats);
    /* Turns per-kernel timing on or off (clears the table). */
    void (*set_profiling)(wgml_backend *be, int on);
    /* Fills up to cap entries; returns how many kernels have times. */
    int (*get_kernel_times)(wgml_backend *be, wgml_kernel_time *times, int cap);
    /* Whether this backend can compute with weights of this type. */
    int (*supports_type)(wgml_backend *be, uint32_t type);
    /* The device's memory read bandwidth in GB/s, measured now: a streaming
     * read of a buffer far larger than any cache (CPU: all threads over
     * 512 MiB; GPU: a read/reduce kernel over 256 MiB). Takes about a second. */
    wgml_status (*measure_bandwidth)(wgml_backend *be, double *gbs, wgml_error *err);
    /* The arithmetic peak in GFLOP/s on all the backend's threads, measured now by a
     * register-only loop (no memory traffic): f32 FMA and bf16 pairs (0 where the CPU has
     * none), what the GEMMs' share is measured against. NULL: not measured (WebGPU). */
    wgml_status (*measure_fma_peak)(wgml_backend *be, double *f32_gflops, double *bf16_gflops, wgml_error *err);

    /* ---- kernels compiled at load (optional: NULL where nothing compiles) ---- */
    /* Starts compiling, in the background, the kernels that a model of this
     * structure (model_key: its architecture and tensor table) used on this
     * device before; the backend remembers what it used when it is freed. */
    void (*kernels_prepare)(wgml_backend *be, const char *model_key);
    /* Waits for every kernel still compiling, calling progress(user, done, total). */
    wgml_status (*kernels_wait)(wgml_backend *be, void (*progress)(void *user, int done, int total), void *user,
                                wgml_error *err);
};

/* The part of supports() every backend shares: op is one of the list and the
 * weights it would read (matmul's, get_rows' table) have types the backend
 * computes with (be->supports_type). args may be NULL (the op alone). */
int wgml_op_weight_types_supported(wgml_backend *be, wgml_op op, const void *args);

/* ---- the typed call of each op: wgml_op_<name>(be, &args) ---- */
#define WGML_OP_WRAPPER(name, NAME, args)                                                                              \
    static inline void wgml_op_##name(wgml_backend *be, const args *a) { be->run(be, WGML_OP_##NAME, a); }
WGML_OPS(WGML_OP_WRAPPER)
#undef WGML_OP_WRAPPER

/* ---- construction ---- */
wgml_status wgml_backend_cpu_create(int n_threads, wgml_backend **out, wgml_error *err);
/* The CPU backend as an exact reference: quantized weights are dequantized
 * and dotted with f32 activations (no 8-bit activation rounding). Slow; for
 * checking other backends op by op. */
wgml_status wgml_backend_cpu_create_exact(int n_threads, wgml_backend **out, wgml_error *err);

typedef struct wgml_webgpu_options {
    const char *adapter;   /* substring of the adapter name; NULL = best hardware adapter */
    int allow_software;    /* accept CPU adapters (SwiftShader, lavapipe) */
    int force_f32;         /* ignore shader-f16 even when present */
    int no_subgroups;      /* ignore subgroups even when present */
    uint64_t max_binding;  /* tests: split weights into windows of at most this many bytes (0 = device limit) */
    int gpu_layout;        /* tests: the GPUs' matvec layout (reductions) even on a CPU adapter */
} wgml_webgpu_options;

/* Available when built with WebGPU; otherwise returns WGML_ERR_UNSUPPORTED. */
wgml_status wgml_backend_webgpu_create(const wgml_webgpu_options *opt, wgml_backend **out, wgml_error *err);
/* Tests: destroys the device under a live WebGPU backend, as a driver reset would. */
void wgml_backend_webgpu_lose_device(wgml_backend *be);

#endif
