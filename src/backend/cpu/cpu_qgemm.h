/*
 * cpu_qgemm.h - matmul of many token rows with quantized weights as an
 * int8 GEMM (cpu_qgemm.c): prompt processing, BERT batches.
 */
#ifndef WGML_CPU_QGEMM_H
#define WGML_CPU_QGEMM_H

#include <stddef.h>
#include <stdint.h>

#include "backend/cpu/cpu_gemm.h"
#include "core/threadpool.h"

/* Whether the int8 GEMM takes weights of this type on this CPU (it needs
 * the instruction set's micro-kernel, cpu_kernels_qgemm). */
int cpu_qgemm_ok(uint32_t type);

/* Bytes of n activation rows of K (a multiple of 32) in the GEMM's format. */
size_t cpu_qgemm_act_bytes(int64_t n, int64_t K);

/* How weights of this type want their activations quantized: 0 as Q8_0 (per
 * 32, f16 scale), 1 as Q8_K (per 256, f32 scale), as their dot products do. */
int cpu_qgemm_act_kind(uint32_t type);

/* n rows of K floats -> the GEMM's activations of that kind (act:
 * cpu_qgemm_act_bytes), on the pool; every weight of the kind reads them. */
void cpu_qgemm_prepare(wgml_threadpool *pool, const float *x, int64_t n, int64_t K, int kind, uint8_t *act);

/* One row of that kind by the library's own Q8_0 / Q8_K encoder: the
 * reference every instruction set's encoder (cpu_kernels_qgemm_prep_isa)
 * matches byte for byte. */
void cpu_qgemm_prepare_row_ref(const float *x, int64_t K, int kind, uint8_t *act);

/* A panel of 16 weight rows (w_row bytes apart; x8: Q4_0 rows as
 * CPU_W_Q4_0_X8) by the portable path, unpacking and the scalar packer: the
 * reference the direct packers (cpu_kernels_qgemm_direct_isa) match. -1 on
 * an unknown type or no memory. */
int cpu_qgemm_pack_ref(uint32_t type, int x8, const uint8_t *w, size_t w_row, int64_t K, uint8_t *dst);

/* Scratch bytes cpu_qgemm needs for a K-wide matmul on n_threads threads. */
size_t cpu_qgemm_scratch(int64_t K, int n_threads);

/* out[i][m] = (add ? out[i][m] : 0) + sum_k w[m][k] * x[i][k] (+ bias[m]), with
 * x as prepared into act. Uses a's n, K, M, w, w_row, k, type, bias, out,
 * add (no convolution). scratch: cpu_qgemm_scratch(K, n_threads) bytes. */
void cpu_qgemm(wgml_threadpool *pool, int n_threads, const cpu_gemm_args *a, const uint8_t *act, void *scratch);

#endif
