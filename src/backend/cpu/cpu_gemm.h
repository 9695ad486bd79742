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
 * for i < n, m < M, k < K. */
typedef struct cpu_gemm_args {
    const float *x;                 /* [n][K] */
    int64_t n, K, M;
    const uint8_t *w;               /* M rows of w_row bytes */
    size_t w_row;
    const struct cpu_type_kernels *k; /* the weight's kernels: to_float reads a row */
    uint32_t type;                  /* the weight's type (BF16: pairs, cpu_gemm_bf16) */
    int f32;                        /* 1: f32 activations even for BF16 (no bf16 pairs) */
    const float *bias;              /* [M] or NULL */
    float *out;                     /* [n][M] */
    int add;
} cpu_gemm_args;

/* Scratch bytes cpu_gemm needs for M x K weights (the packed panels). */
size_t cpu_gemm_scratch(int64_t M, int64_t K);

/* Floats of tmp per thread for a K-wide matmul. */
size_t cpu_gemm_tmp_floats(int64_t K);
/* Whether weights of this type go as bf16 pairs, with the activations
 * rounded to bf16 (BF16, where the CPU has AVX512_BF16). */
int cpu_gemm_bf16(uint32_t type);

/* Runs on the pool (n_threads threads). scratch: cpu_gemm_scratch(M, K)
 * bytes; tmp: n_threads * cpu_gemm_tmp_floats(K) floats. */
void cpu_gemm(wgml_threadpool *pool, int n_threads, const cpu_gemm_args *a, void *scratch, float *tmp);

#endif
