/*
 * backend.h - the op interface: the only thing a model sees of a backend.
 *
 * A model writes its forward pass once, as a sequence of the ops below; the
 * CPU backend executes each op as it is called, the WebGPU backend records it
 * into the step's single command buffer. Ops are deliberately a little coarser
 * than textbook primitives: each carries the optional prologue/epilogue that a
 * transformer layer wants fused (RMS-norm of the input, bias, residual add,
 * SwiGLU, RoPE + KV-cache write), so a backend can run a layer in a handful of
 * kernels. The plain primitives are there too (rms_norm, rope, softmax, add,
 * swiglu) for other models and for op-by-op testing.
 *
 * Execution model
 *   be->begin(be, &step)   step = {pos, n_tokens}: positions pos..pos+n-1
 *   be->upload(...)        small host->device copies (token ids)
 *   be->get_rows / matmul / attention / ...   (recorded or executed)
 *   be->download(...)      device->host copies, valid after end()
 *   be->end(be, err)       runs/submits everything and waits; the first error
 *                          of any op in the step is returned here
 * Ops return nothing: an op with bad arguments records a sticky error that
 * end() reports (the GPU reports its errors asynchronously anyway).
 *
 * Tensors are views: (buffer, byte offset, type, shape). Rows are contiguous
 * (row stride = wgml_row_size(type, ne[0])). Activations are f32 [rows][cols]
 * with ne[0] = cols; a model takes views of fixed buffers (a row range, a
 * layer of the KV cache) freely, as plain structs: views cost nothing.
 * Weights W are [out][in] (ne[0] = in) in any weight dtype; matmul computes
 * out[t][r] = sum_c W[r][c] * x[t][c] (y = W x for each token row).
 *
 * Future models add ops here (conv1d, lstm, stft for Kokoro; layer norm, gelu
 * for Whisper): a new entry in the vtable, a CPU reference implementation, a
 * WGSL kernel and a line in the op-by-op test.
 */
#ifndef WGML_BACKEND_H
#define WGML_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "core/dtype.h"
#include "wgml.h"

typedef struct wgml_backend wgml_backend;
typedef struct wgml_buffer wgml_buffer; /* backend-specific */

typedef struct wgml_tensor {
    uint32_t type;    /* wgml_dtype */
    int64_t ne[4];    /* ne[0] = row length; unused dims 1 */
    wgml_buffer *buf;
    size_t offset;    /* bytes from the start of buf */
    const char *name; /* for messages; may be NULL */
} wgml_tensor;

/* Elements, rows and bytes of a tensor (rows = ne[1]*ne[2]*ne[3]). */
int64_t wgml_tensor_nelements(const wgml_tensor *t);
int64_t wgml_tensor_nrows(const wgml_tensor *t);
size_t wgml_tensor_nbytes(const wgml_tensor *t);
/* A view of rows [first, first+n) of a 2-D tensor. */
wgml_tensor wgml_tensor_rows(const wgml_tensor *t, int64_t first, int64_t n);

typedef enum wgml_buffer_usage {
    WGML_BUFFER_WEIGHTS,     /* read-only model data */
    WGML_BUFFER_ACTIVATIONS, /* per-session scratch */
    WGML_BUFFER_KV,          /* KV cache */
} wgml_buffer_usage;

typedef struct wgml_step {
    int pos;      /* position of the first token of this step */
    int n_tokens; /* tokens in this step (rows of the activations) */
} wgml_step;

/* Rotary position embedding. The rotation angle of pair i at position p is
 * p * freq_scale * freq_base^(-2i/n_rot) / freq_factors[i]. */
typedef struct wgml_rope {
    int n_rot;  /* rotated dims per head (<= head_dim, even) */
    int neox;   /* 0: pairs (x[2i], x[2i+1]) as Llama; 1: (x[i], x[i+n_rot/2]) as NeoX/Qwen2 */
    float freq_base;
    float freq_scale;
    const wgml_tensor *freq_factors; /* optional f32 [n_rot/2] (Llama 3 scaling) */
} wgml_rope;

typedef enum wgml_epilogue {
    WGML_EPI_STORE = 0, /* out = W x (+ bias) */
    WGML_EPI_ADD,       /* out += W x (+ bias): residual connection */
    WGML_EPI_SWIGLU,    /* two weights: out[0] = silu(W0 x) * (W1 x) */
} wgml_epilogue;

#define WGML_MATMUL_MAX 3

/* Up to three matrix products sharing one input. */
typedef struct wgml_matmul {
    const wgml_tensor *x;    /* f32 [n][K] */
    const wgml_tensor *norm; /* optional f32 [K]: use rmsnorm(x) * norm instead of x */
    float eps;               /* for norm */
    int n_w;                 /* 1..3 */
    const wgml_tensor *w[WGML_MATMUL_MAX];    /* [M_i][K] */
    const wgml_tensor *bias[WGML_MATMUL_MAX]; /* optional f32 [M_i] */
    const wgml_tensor *out[WGML_MATMUL_MAX];  /* f32 [n][M_i]; SWIGLU uses out[0] only */
    wgml_epilogue epilogue;
} wgml_matmul;

/* Causal self-attention over the KV cache for the step's tokens. In order:
 * q and k are rotated in place (if rope), k and v are stored into the caches
 * at rows pos..pos+n-1, then out[t] = softmax(scale * q[t] K^T) V over cache
 * rows 0..pos+t, with grouped-query heads (head h uses kv head h / (n_head/n_head_kv)). */
typedef struct wgml_attention {
    const wgml_tensor *q;       /* f32 [n][n_head*head_dim] */
    const wgml_tensor *k, *v;   /* f32 [n][n_head_kv*head_dim] */
    const wgml_tensor *k_cache; /* [n_ctx][n_head_kv*head_dim], f32 or f16 */
    const wgml_tensor *v_cache;
    const wgml_tensor *out;     /* f32 [n][n_head*head_dim] */
    int n_head, n_head_kv, head_dim;
    float scale;
    const wgml_rope *rope; /* NULL: no rotary embedding */
} wgml_attention;

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
} wgml_backend_stats;

/* Per-kernel time (GPU timestamps or CPU wall time), accumulated while
 * profiling is on. */
typedef struct wgml_kernel_time {
    const char *name;
    uint64_t calls;
    double total_ms;
} wgml_kernel_time;

struct wgml_backend {
    const char *name; /* "cpu", "webgpu" */
    const char *device_name;
    int n_threads; /* host threads the backend computes with (CPU) */
    uint32_t kv_type;  /* the KV-cache type this backend prefers (WGML_F32 or WGML_F16) */
    uint32_t kv_types; /* every KV-cache type it can use, as bits 1u << type */

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

    /* ---- ops (see the structs above for the math) ---- */
    /* out[i] = dequantize(table row ids[i]); ids: i32 [n] */
    void (*get_rows)(wgml_backend *be, const wgml_tensor *out, const wgml_tensor *table, const wgml_tensor *ids);
    void (*matmul)(wgml_backend *be, const wgml_matmul *mm);
    void (*attention)(wgml_backend *be, const wgml_attention *att);
    /* out = x / sqrt(mean(x^2) + eps) * w, per row */
    void (*rms_norm)(wgml_backend *be, const wgml_tensor *out, const wgml_tensor *x, const wgml_tensor *w, float eps);
    /* x rotated in place; rows are tokens at positions pos.., n_head heads per row */
    void (*rope)(wgml_backend *be, const wgml_tensor *x, int n_head, int head_dim, const wgml_rope *rope);
    /* out = softmax(x * scale) per row */
    void (*softmax)(wgml_backend *be, const wgml_tensor *out, const wgml_tensor *x, float scale);
    /* out = silu(gate) * up, elementwise */
    void (*swiglu)(wgml_backend *be, const wgml_tensor *out, const wgml_tensor *gate, const wgml_tensor *up);
    /* out = a + b, elementwise */
    void (*add)(wgml_backend *be, const wgml_tensor *out, const wgml_tensor *a, const wgml_tensor *b);
    /* out[r] = index of the largest x[r][:] (first on ties); out: i32 [rows] */
    void (*argmax)(wgml_backend *be, const wgml_tensor *out, const wgml_tensor *x);

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
};

/* ---- argument checks shared by the backends (validate.c) ---- */
wgml_status wgml_check_type(const char *op, const wgml_tensor *t, uint32_t type, wgml_error *err);
wgml_status wgml_check_same_shape(const char *op, const wgml_tensor *a, const wgml_tensor *b, wgml_error *err);
wgml_status wgml_validate_matmul(const wgml_matmul *mm, wgml_error *err);
wgml_status wgml_validate_rope(const wgml_tensor *x, int n_head, int head_dim, const wgml_rope *r, wgml_error *err);
wgml_status wgml_validate_attention(const wgml_attention *a, int pos, wgml_error *err);
wgml_status wgml_validate_get_rows(const wgml_tensor *out, const wgml_tensor *table, const wgml_tensor *ids,
                                   wgml_error *err);
/* (cos, sin) of the rotation angles of position pos: cs[2i], cs[2i+1] for
 * i < n_rot/2, computed in double (the values every backend uses). */
void wgml_rope_angles(const wgml_rope *r, const float *freq_factors, int pos, float *cs);

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
