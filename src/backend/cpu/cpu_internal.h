/*
 * cpu_internal.h - state shared by the CPU backend's files.
 *
 * cpu_backend.c owns the backend object (buffers, steps, counters, timing);
 * cpu_ops.c holds the op implementations, which run immediately on the
 * thread pool when the model calls them.
 */
#ifndef WGML_CPU_INTERNAL_H
#define WGML_CPU_INTERNAL_H

#include "backend/backend.h"
#include "core/threadpool.h"

struct wgml_buffer {
    uint8_t *data;
    size_t size;
    int owned; /* 0: wraps caller memory (weights in the mmap) */
    size_t row_bytes; /* weights: bytes per row */
    int64_t ne0;      /* weights: elements per row */
    /* weights in a layout of their kernels' own (kernels.h, `packed`): those
     * kernels, which every op reading the weight uses; NULL: GGUF's layout */
    const struct cpu_type_kernels *packed;
};

/* The kernels for weight w: its buffer's packed ones, else those of its type (NULL if none). */
const struct cpu_type_kernels *cpu_weight_kernels(const wgml_tensor *w);

#define CPU_MAX_PROFILE 16

typedef struct cpu_backend {
    wgml_backend base;
    wgml_threadpool *pool;
    int n_threads;
    int exact; /* f32 activations for every weight type (reference mode) */
    wgml_step step;
    int in_step;
    wgml_status status; /* first error of the current step */
    wgml_error error;
    /* scratch reused by every op; grows on demand, never shrinks */
    uint8_t *scratch;
    size_t scratch_size;
    wgml_backend_stats stats;
    int profiling;
    wgml_kernel_time prof[CPU_MAX_PROFILE];
    int n_prof;
} cpu_backend;

static inline void *cpu_ptr(const wgml_tensor *t) { return t->buf->data + t->offset; }

/* Records the first error of a step (later ones are dropped). */
void cpu_error(cpu_backend *cb, wgml_status code, const char *fmt, ...);
/* Scratch of at least `size` bytes, 64-byte aligned; NULL (with error recorded) if out of memory. */
void *cpu_scratch(cpu_backend *cb, size_t size);
/* Checks that a tensor view lies within its buffer; records an error if not. */
int cpu_check(cpu_backend *cb, const char *op, const wgml_tensor *t);
/* Profiling: wall time of one op call. */
double cpu_now_ms(void);
void cpu_profile_add(cpu_backend *cb, const char *name, double ms);

/* ops (cpu_ops.c, cpu_attention.c) */
void cpu_get_rows(wgml_backend *be, const wgml_tensor *out, const wgml_tensor *table, const wgml_tensor *ids);
void cpu_matmul(wgml_backend *be, const wgml_matmul *mm);
void cpu_attention(wgml_backend *be, const wgml_attention *att);
void cpu_rms_norm(wgml_backend *be, const wgml_tensor *out, const wgml_tensor *x, const wgml_tensor *w, float eps);
void cpu_rope(wgml_backend *be, const wgml_tensor *x, int n_head, int head_dim, const wgml_rope *rope);
void cpu_softmax(wgml_backend *be, const wgml_tensor *out, const wgml_tensor *x, float scale);
void cpu_swiglu(wgml_backend *be, const wgml_tensor *out, const wgml_tensor *gate, const wgml_tensor *up);
void cpu_add(wgml_backend *be, const wgml_tensor *out, const wgml_tensor *a, const wgml_tensor *b);
void cpu_argmax(wgml_backend *be, const wgml_tensor *out, const wgml_tensor *x);

wgml_status cpu_measure_bandwidth(wgml_backend *be, double *gbs, wgml_error *err);

/* Math shared by the ops and by other CPU code (reference implementations). */
void cpu_rope_row(float *x, int n_head, int head_dim, int pos, const wgml_rope *rope, const float *freq_factors);
float cpu_rms_scale(const float *x, int64_t n, float eps);

#endif
