/*
 * cpu_internal.h - state shared by the CPU backend's files.
 *
 * cpu_backend.c owns the backend object (buffers, steps, counters, timing);
 * cpu_ops.c holds the op implementations (cpu_ops_nn.c those for encoders,
 * cpu_attention.c attention), which run immediately on the thread pool when
 * the model calls them.
 */
#ifndef WGML_CPU_INTERNAL_H
#define WGML_CPU_INTERNAL_H

#include "backend/backend.h"
#include "core/error.h"
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

/* every op, and matmul once per weight type (mm_profile_name), as names in the profile */
#define CPU_MAX_PROFILE (WGML_OP_COUNT + 32)

typedef struct cpu_backend {
    wgml_backend base;
    wgml_threadpool *pool;
    int n_threads;
    int exact; /* f32 activations for every weight type (reference mode) */
    wgml_step step;
    int in_step;
    wgml_sticky sticky; /* first error of the current step */
    /* scratch reused by every op; grows on demand, never shrinks */
    uint8_t *scratch;
    size_t scratch_size;
    /* a convolution's padded signal or unfolding (matmul's conv), beside the scratch */
    uint8_t *unfold;
    size_t unfold_size;
    wgml_backend_stats stats;
    int profiling;
    wgml_kernel_time prof[CPU_MAX_PROFILE];
    int n_prof;
} cpu_backend;

static inline void *cpu_ptr(const wgml_tensor *t) { return t->buf->data + t->offset; }

/* Records the first error of a step (later ones are dropped): wgml_sticky_fail on cb->sticky. */
#define cpu_error(cb, code, ...) wgml_sticky_fail(&(cb)->sticky, (code), __VA_ARGS__)
/* Scratch of at least `size` bytes, 64-byte aligned; NULL (with error recorded) if out of memory. */
void *cpu_scratch(cpu_backend *cb, size_t size);
/* The same for a convolution's signal (cpu_op_matmul's conv), kept apart from the scratch. */
void *cpu_scratch_unfold(cpu_backend *cb, size_t size);
/* Checks that a tensor view lies within its buffer; records an error if not. */
int cpu_check(cpu_backend *cb, const char *op, const wgml_tensor *t);
/* Profiling: wall time of one op call. */
double cpu_now_ms(void);
void cpu_profile_add(cpu_backend *cb, const char *name, double ms, double flop); /* flop: 0 where not counted */

/* The ops: cpu_run is the backend's entry point (be->run); it validates the
 * arguments and calls cpu_op_<name> (cpu_ops.c; attention in cpu_attention.c;
 * the encoders' ops in cpu_ops_nn.c; copy in cpu_ops_copy.c; the audio ops
 * in cpu_ops_audio.c), one per line of ops.h. */
void cpu_run(wgml_backend *be, wgml_op op, const void *args);
int cpu_supports(wgml_backend *be, wgml_op op, const void *args);
#define CPU_OP_DECL(name, NAME, args) void cpu_op_##name(cpu_backend *cb, const args *a);
WGML_OPS(CPU_OP_DECL)
#undef CPU_OP_DECL

wgml_status cpu_measure_bandwidth(wgml_backend *be, double *gbs, wgml_error *err);
wgml_status cpu_measure_fma_peak(wgml_backend *be, double *f32_gflops, double *bf16_gflops, wgml_error *err);

/* Math shared by the ops and by other CPU code (reference implementations). */
void cpu_rope_row(float *x, int n_head, int head_dim, int pos, const wgml_rope *rope, const float *freq_factors);
/* RoPE of the step's rows of x and, when x2 is not NULL, of x2 by the same
 * angles (computed once per row), rows shared by the pool; 0 after an error. */
int cpu_rope_pair(cpu_backend *cb, const wgml_tensor *x, int n_head, const wgml_tensor *x2, int n_head2, int head_dim,
                  const wgml_rope *rope);
float cpu_rms_scale(const float *x, int64_t n, float eps);
/* out[r] = a[r] + b[r] (or *, with mul) for rows r < rows of n values; b has b_rows rows: rows or 1 (broadcast). */
void cpu_binary_rows(float *out, const float *a, const float *b, int64_t n, int64_t rows, int64_t b_rows, int mul);
/* nsf_source's rate of harmonic m of f0: frac(f0 m / sr) in 2^-63 cycles (cpu_ops_audio.c). */
uint64_t cpu_nsf_rate(float f0, int m, int sr);

#endif
