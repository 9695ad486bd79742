/*
 * cpu_gemm.h - matmul of many token rows as a blocked GEMM (cpu_gemm.c).
 */
#ifndef WGML_CPU_GEMM_H
#define WGML_CPU_GEMM_H

#include <stddef.h>
#include <stdint.h>

#include "core/threadpool.h"

struct cpu_type_kernels;

/* out[i][m] = (add ? out[i][m] : 0) + sum_k x[i][k] * w[m][k] (+ bias[m])
 * for i < n, m < M, k < K; x[i] is a row of x, or of a convolution's
 * unfolding of it (conv_kernel). */
typedef struct cpu_gemm_args {
    const float *x;                 /* [n][K] */
    int64_t n, K, M;
    const uint8_t *w;               /* M rows of w_row bytes */
    size_t w_row;
    const struct cpu_type_kernels *k; /* the weight's kernels: to_float reads a row */
    uint32_t type;                  /* the weight's type */
    int bf16;                       /* 1: as bf16 pairs (needs cpu_gemm_bf16_ok()): weights and
                                       activations rounded to bf16, f32 sums */
    /* a 1-D convolution (conv_kernel > 0): x is then a signal whose rows
     * are conv_c channels, already padded (its row 0 is the first tap of
     * output row 0), and input row i, column j * (K / conv_kernel) + c is
     * x[i * conv_stride + j * conv_dilation][c] for c < conv_c; the columns
     * from conv_c to the tap's end are zero (never read) */
    int conv_kernel, conv_stride, conv_dilation;
    int64_t conv_c;
    const float *bias;              /* [M] or NULL */
    float *out;                     /* [n][M] */
    int add;
} cpu_gemm_args;

/* Scratch bytes cpu_gemm needs for M x K weights (the packed panels). */
size_t cpu_gemm_scratch(int64_t M, int64_t K);

/* Floats of tmp per thread for a K-wide matmul. */
size_t cpu_gemm_tmp_floats(int64_t K);
/* Whether GEMMs that allow it go as bf16 pairs: the CPU has them (AVX512_BF16)
 * and they measured faster than f32 here (cpu_tune.h; WGML_CPU_GEMM overrides).
 * cpu_gemm_args.bf16 may be set only where the kernel exists. */
int cpu_gemm_bf16_ok(void);

/* Runs on the pool (n_threads threads). scratch: cpu_gemm_scratch(M, K)
 * bytes; tmp: n_threads * cpu_gemm_tmp_floats(K) floats. */
void cpu_gemm(wgml_threadpool *pool, int n_threads, const cpu_gemm_args *a, void *scratch, float *tmp);

#endif
