/*
 * kernels_gemm_x86.c - the GEMM micro-kernels (cpu_gemm_fn, kernels.h) for
 * AVX-512 and for AVX2 + FMA.
 *
 * A micro-kernel keeps a tile of CPU_GEMM_MR token rows x CPU_GEMM_NR output
 * columns in registers for the whole run of k: each step loads the packed
 * weights' row k (CPU_GEMM_NR floats, contiguous) and broadcasts one
 * activation per token row, so every loaded vector serves several FMAs and
 * nothing is reduced horizontally. AVX-512: 6 x 2 zmm accumulators. AVX2:
 * the 32 columns as two halves of 6 x 2 ymm each (16 registers in all).
 * The tile's row count is a compile-time constant in each copy (mr_tile
 * below, inlined per value), so the row loop unrolls.
 */
#include "backend/cpu/kernels_impl.h"

#if defined(WGML_CPU_X86)
#include <immintrin.h>

#define KG512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))
#define KG2   __attribute__((target("avx2,fma,f16c")))
#define KG_INLINE inline __attribute__((always_inline))

/* ---- AVX-512 ---- */

/* A tile's accumulators (columns 0-15 in a0, 16-31 in a1) to c: columns < nc only, added to c with add. */
static KG512 KG_INLINE void z_store(const int MR, __m512 *a0, __m512 *a1, float *c, size_t ldc, int nc, int add) {
    const __mmask16 m0 = nc >= 16 ? 0xffff : (__mmask16)((1u << nc) - 1);
    const __mmask16 m1 = nc >= 32 ? 0xffff : nc > 16 ? (__mmask16)((1u << (nc - 16)) - 1) : 0;
    for (int r = 0; r < MR; r++) {
        float *o = c + (size_t)r * ldc;
        if (add) {
            a0[r] = _mm512_add_ps(a0[r], _mm512_maskz_loadu_ps(m0, o));
            a1[r] = _mm512_add_ps(a1[r], _mm512_maskz_loadu_ps(m1, o + 16));
        }
        _mm512_mask_storeu_ps(o, m0, a0[r]);
        _mm512_mask_storeu_ps(o + 16, m1, a1[r]);
    }
}

static KG512 KG_INLINE void z_tile(const int MR, int64_t kc, const float *x, size_t ldx, const float *wp, float *c,
                                   size_t ldc, int nc, int add) {
    __m512 a0[CPU_GEMM_MR], a1[CPU_GEMM_MR];
    for (int r = 0; r < MR; r++) a0[r] = a1[r] = _mm512_setzero_ps();
#pragma GCC unroll 2
    for (int64_t k = 0; k < kc; k++) {
        const __m512 w0 = _mm512_load_ps(wp + k * CPU_GEMM_NR), w1 = _mm512_load_ps(wp + k * CPU_GEMM_NR + 16);
        for (int r = 0; r < MR; r++) {
            const __m512 xb = _mm512_set1_ps(x[(size_t)r * ldx + k]);
            a0[r] = _mm512_fmadd_ps(xb, w0, a0[r]);
            a1[r] = _mm512_fmadd_ps(xb, w1, a1[r]);
        }
    }
    z_store(MR, a0, a1, c, ldc, nc, add);
}

KG512 void cpu_gemm_avx512(int64_t kc, const float *x, size_t ldx, const float *wp, float *c, size_t ldc, int mr,
                           int nc, int add) {
    switch (mr) {
    case 6: z_tile(6, kc, x, ldx, wp, c, ldc, nc, add); break;
    case 5: z_tile(5, kc, x, ldx, wp, c, ldc, nc, add); break;
    case 4: z_tile(4, kc, x, ldx, wp, c, ldc, nc, add); break;
    case 3: z_tile(3, kc, x, ldx, wp, c, ldc, nc, add); break;
    case 2: z_tile(2, kc, x, ldx, wp, c, ldc, nc, add); break;
    default: z_tile(1, kc, x, ldx, wp, c, ldc, nc, add); break;
    }
}

/* ---- AVX512_BF16: pairs of bf16, vdpbf16ps ---- */

#define KGBF __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,avx2,fma,f16c")))

static KGBF KG_INLINE void b_tile(const int MR, int64_t kp, const uint32_t *x, size_t ldx, const uint32_t *wp, float *c,
                                  size_t ldc, int nc, int add) {
    __m512 a0[CPU_GEMM_MR], a1[CPU_GEMM_MR];
    for (int r = 0; r < MR; r++) a0[r] = a1[r] = _mm512_setzero_ps();
#pragma GCC unroll 2
    for (int64_t k = 0; k < kp; k++) {
        const __m512bh w0 = (__m512bh)_mm512_load_si512(wp + k * CPU_GEMM_NR),
                       w1 = (__m512bh)_mm512_load_si512(wp + k * CPU_GEMM_NR + 16);
        for (int r = 0; r < MR; r++) {
            const __m512bh xb = (__m512bh)_mm512_set1_epi32((int)x[(size_t)r * ldx + k]);
            a0[r] = _mm512_dpbf16_ps(a0[r], xb, w0);
            a1[r] = _mm512_dpbf16_ps(a1[r], xb, w1);
        }
    }
    z_store(MR, a0, a1, c, ldc, nc, add);
}

KGBF void cpu_to_bf16_avx512(const float *x, uint16_t *dst, int64_t n) {
    int64_t i = 0;
    for (; i + 32 <= n; i += 32)
        _mm512_storeu_si512(dst + i, (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(x + i + 16), _mm512_loadu_ps(x + i)));
    if (i < n) {
        const int64_t r = n - i;
        const __mmask16 lo = r >= 16 ? 0xffff : (__mmask16)((1u << r) - 1);
        const __mmask16 hi = r > 16 ? (__mmask16)((1u << (r - 16)) - 1) : 0;
        const __m512i v = (__m512i)_mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(hi, x + i + 16), _mm512_maskz_loadu_ps(lo, x + i));
        _mm512_mask_storeu_epi16(dst + i, (__mmask32)(((uint64_t)1 << r) - 1), v);
    }
}

KGBF void cpu_gemm_bf16_avx512(int64_t kp, const uint32_t *x, size_t ldx, const uint32_t *wp, float *c, size_t ldc,
                               int mr, int nc, int add) {
    switch (mr) {
    case 6: b_tile(6, kp, x, ldx, wp, c, ldc, nc, add); break;
    case 5: b_tile(5, kp, x, ldx, wp, c, ldc, nc, add); break;
    case 4: b_tile(4, kp, x, ldx, wp, c, ldc, nc, add); break;
    case 3: b_tile(3, kp, x, ldx, wp, c, ldc, nc, add); break;
    case 2: b_tile(2, kp, x, ldx, wp, c, ldc, nc, add); break;
    default: b_tile(1, kp, x, ldx, wp, c, ldc, nc, add); break;
    }
}

/* ---- AVX2 ---- */

/* Columns [h, h + 16) of the panel (h = 0 or 16), nc of them valid (1..16). */
static KG2 KG_INLINE void y_tile(const int MR, int64_t kc, const float *x, size_t ldx, const float *wp, float *c,
                                 size_t ldc, int nc, int add) {
    __m256 a0[CPU_GEMM_MR], a1[CPU_GEMM_MR];
    for (int r = 0; r < MR; r++) a0[r] = a1[r] = _mm256_setzero_ps();
#pragma GCC unroll 2
    for (int64_t k = 0; k < kc; k++) {
        const __m256 w0 = _mm256_load_ps(wp + k * CPU_GEMM_NR), w1 = _mm256_load_ps(wp + k * CPU_GEMM_NR + 8);
        for (int r = 0; r < MR; r++) {
            const __m256 xb = _mm256_broadcast_ss(x + (size_t)r * ldx + k);
            a0[r] = _mm256_fmadd_ps(xb, w0, a0[r]);
            a1[r] = _mm256_fmadd_ps(xb, w1, a1[r]);
        }
    }
    for (int r = 0; r < MR; r++) {
        float *o = c + (size_t)r * ldc;
        if (nc == 16) {
            if (add) {
                a0[r] = _mm256_add_ps(a0[r], _mm256_loadu_ps(o));
                a1[r] = _mm256_add_ps(a1[r], _mm256_loadu_ps(o + 8));
            }
            _mm256_storeu_ps(o, a0[r]);
            _mm256_storeu_ps(o + 8, a1[r]);
        } else {
            float t[16];
            _mm256_storeu_ps(t, a0[r]);
            _mm256_storeu_ps(t + 8, a1[r]);
            for (int j = 0; j < nc; j++) o[j] = add ? o[j] + t[j] : t[j];
        }
    }
}

static KG2 void y_half(int64_t kc, const float *x, size_t ldx, const float *wp, float *c, size_t ldc, int mr, int nc,
                       int add) {
    switch (mr) {
    case 6: y_tile(6, kc, x, ldx, wp, c, ldc, nc, add); break;
    case 5: y_tile(5, kc, x, ldx, wp, c, ldc, nc, add); break;
    case 4: y_tile(4, kc, x, ldx, wp, c, ldc, nc, add); break;
    case 3: y_tile(3, kc, x, ldx, wp, c, ldc, nc, add); break;
    case 2: y_tile(2, kc, x, ldx, wp, c, ldc, nc, add); break;
    default: y_tile(1, kc, x, ldx, wp, c, ldc, nc, add); break;
    }
}

KG2 void cpu_gemm_avx2(int64_t kc, const float *x, size_t ldx, const float *wp, float *c, size_t ldc, int mr, int nc,
                       int add) {
    y_half(kc, x, ldx, wp, c, ldc, mr, nc < 16 ? nc : 16, add);
    if (nc > 16) y_half(kc, x, ldx, wp + 16, c + 16, ldc, mr, nc - 16, add);
}
#else
typedef int cpu_kernels_gemm_x86_unused; /* not x86: nothing to build */
#endif
