/*
 * kernels_x86_exp.h - exp over a register of floats, for the x86 kernels that
 * need it in a softmax or an activation (kernels_attn_x86.c, kernels_act_x86.c).
 *
 * x is clamped to [-87.33, 88], split as x = n ln2 + r (ln2 in two parts, so
 * n ln2 is exact for the n that occur), exp(r) from its degree-6 Taylor
 * polynomial on |r| <= ln2 / 2 (about 1-2 ulp), and 2^n built in the exponent
 * bits. exp8 needs AVX2 + FMA, exp16 AVX-512 F; each is compiled into the
 * functions that inline it, which must enable those instruction sets.
 */
#ifndef WGML_CPU_KERNELS_X86_EXP_H
#define WGML_CPU_KERNELS_X86_EXP_H

#include <immintrin.h>

__attribute__((target("avx2,fma"))) static inline __m256 kx_exp8(__m256 x) {
    x = _mm256_max_ps(_mm256_set1_ps(-87.33f), x);
    x = _mm256_min_ps(_mm256_set1_ps(88.0f), x);
    const __m256 n =
        _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145751953125f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.428606765330187e-06f), r);
    __m256 p = _mm256_set1_ps(1.0f / 720);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

__attribute__((target("avx512f,avx2,fma"))) static inline __m512 kx_exp16(__m512 x) {
    x = _mm512_max_ps(_mm512_set1_ps(-87.33f), x);
    x = _mm512_min_ps(_mm512_set1_ps(88.0f), x);
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.428606765330187e-06f), r);
    __m512 p = _mm512_set1_ps(1.0f / 720);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    const __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
    return _mm512_mul_ps(p, _mm512_castsi512_ps(e));
}

#endif
