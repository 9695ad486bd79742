/*
 * kernels_act_x86.c - elementwise activations with AVX-512 (cpu_snake_fn,
 * kernels.h; GELU's erf form also with AVX2, cpu_gelu_erf_fn, kernels_impl.h): Snake1d, x + sin(v x)^2 / v, the activation of Kokoro's
 * generator, which runs over every sample of every channel (a hundred
 * million sines an utterance), where libm's scalar sin took longer than the
 * convolutions around it.
 *
 * sin(a)^2 in float: a = n pi/2 + r with |r| <= pi/4 (pi/2 in three parts,
 * Cody-Waite, exact products for |n| < 2^12), then sin(r)^2 for even n and
 * cos(r)^2 for odd n, each from its minimax polynomial on [-pi/4, pi/4]
 * (the classic single-precision coefficients); a few ulp. A block with an
 * argument beyond CPU_SNAKE_MAX_ARG goes through libm in double instead.
 */
#include "backend/cpu/kernels_impl.h"

#if defined(WGML_CPU_X86)
#include <immintrin.h>
#include <math.h>

#include "backend/cpu/kernels_x86_exp.h"

#define KS512 __attribute__((target("avx512f,avx512vl,avx512dq,avx2,fma")))

KS512 void cpu_swiglu_avx512(float *g, const float *u, const float *bg, const float *bu, int64_t M) {
    for (int64_t m = 0; m < M; m += 16) {
        const __mmask16 k = M - m >= 16 ? 0xffff : (__mmask16)((1u << (M - m)) - 1);
        __m512 a = _mm512_maskz_loadu_ps(k, g + m), b = _mm512_maskz_loadu_ps(k, u + m);
        if (bg) a = _mm512_add_ps(a, _mm512_maskz_loadu_ps(k, bg + m));
        if (bu) b = _mm512_add_ps(b, _mm512_maskz_loadu_ps(k, bu + m));
        const __m512 s = _mm512_div_ps(a, _mm512_add_ps(_mm512_set1_ps(1.0f), kx_exp16(_mm512_sub_ps(_mm512_setzero_ps(), a))));
        _mm512_mask_storeu_ps(g + m, k, _mm512_mul_ps(s, b));
    }
}

static void snake_scalar_cols(float *o, const float *x, const float *v, int64_t n) {
    for (int64_t c = 0; c < n; c++) {
        const double y = x[c], s = sin(v[c] * y);
        o[c] = (float)(y + s * s / v[c]);
    }
}

KS512 void cpu_snake_avx512(float *out, const float *x, const float *v, int64_t n, int64_t rows) {
    const __m512 two_pi = _mm512_set1_ps(0.63661977236758134f); /* 2/pi */
    const __m512 p1 = _mm512_set1_ps(1.5703125f), p2 = _mm512_set1_ps(4.837512969970703125e-4f),
                 p3 = _mm512_set1_ps(7.54978995489188216e-8f);
    const __m512 s1 = _mm512_set1_ps(-1.6666654611e-1f), s2 = _mm512_set1_ps(8.3321608736e-3f),
                 s3 = _mm512_set1_ps(-1.9515295891e-4f);
    const __m512 c1 = _mm512_set1_ps(4.166664568298827e-2f), c2 = _mm512_set1_ps(-1.388731625493765e-3f),
                 c3 = _mm512_set1_ps(2.443315711809948e-5f);
    const __m512 half = _mm512_set1_ps(0.5f), one = _mm512_set1_ps(1.0f);
    const __m512 lim = _mm512_set1_ps(CPU_SNAKE_MAX_ARG);
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * n;
        float *o = out + r * n;
        for (int64_t c = 0; c < n; c += 16) {
            const __mmask16 m = n - c >= 16 ? 0xffff : (__mmask16)((1u << (n - c)) - 1);
            const __m512 y = _mm512_maskz_loadu_ps(m, xr + c);
            const __m512 vv = _mm512_mask_loadu_ps(one, m, v + c);
            const __m512 a = _mm512_mul_ps(vv, y);
            if (_mm512_mask_cmp_ps_mask(m, _mm512_abs_ps(a), lim, _CMP_GT_OQ)) {
                snake_scalar_cols(o + c, xr + c, v + c, n - c < 16 ? n - c : 16);
                continue;
            }
            const __m512 q = _mm512_roundscale_ps(_mm512_mul_ps(a, two_pi), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            __m512 t = _mm512_fnmadd_ps(q, p1, a);
            t = _mm512_fnmadd_ps(q, p2, t);
            t = _mm512_fnmadd_ps(q, p3, t);
            const __m512 z = _mm512_mul_ps(t, t);
            /* sin t = t + t z (s1 + z (s2 + z s3)) */
            __m512 ps = _mm512_fmadd_ps(_mm512_fmadd_ps(s3, z, s2), z, s1);
            ps = _mm512_fmadd_ps(_mm512_mul_ps(ps, z), t, t);
            /* cos t = 1 - z/2 + z^2 (c1 + z (c2 + z c3)) */
            __m512 pc = _mm512_fmadd_ps(_mm512_fmadd_ps(c3, z, c2), z, c1);
            pc = _mm512_fmadd_ps(_mm512_mul_ps(pc, z), z, _mm512_fnmadd_ps(half, z, one));
            const __mmask16 odd = _mm512_test_epi32_mask(_mm512_cvtps_epi32(q), _mm512_set1_epi32(1));
            const __m512 s = _mm512_mask_blend_ps(odd, ps, pc);
            const __m512 res = _mm512_add_ps(y, _mm512_div_ps(_mm512_mul_ps(s, s), vv));
            _mm512_mask_storeu_ps(o + c, m, res);
        }
    }
}
/*
 * GELU (erf) over n floats (kernels_impl.h): per lane, t = min(|x|, 6)
 * (NaN: 6), the interval k = min(floor(4 t / 3), 7) picks each coefficient
 * of Q's polynomial from its 8-entry row with vpermps, Horner in
 * u = t - (0.75 k + 0.375), Q = 0 for |x| >= 6 or NaN, then x - t Q for
 * x > 0 (t = x below 6, Q = 0 above: +inf stays inf) and x Q otherwise
 * (-0 stays -0; NaN and -inf give NaN). Two registers an iteration, to
 * overlap the two Horner chains.
 */
#define GELU_STEP(V, PERM, FMA, MUL, SUB, I, K, T, X)                                                                \
    do {                                                                                                             \
        V q_ = PERM(K, c[CPU_GELU_Q_DEGREE]);                                                                        \
        const V u_ = SUB(T, FMA(I, w, h));                                                                           \
        for (int j_ = CPU_GELU_Q_DEGREE - 1; j_ >= 0; j_--) q_ = FMA(q_, u_, PERM(K, c[j_]));                        \
        (X) = q_;                                                                                                    \
    } while (0)

KS512 static inline __m512 gelu16(__m512 x, const __m512 *c) {
    const __m512 six = _mm512_set1_ps(6.0f), w = _mm512_set1_ps(0.75f), h = _mm512_set1_ps(0.375f);
    const __m512 t = _mm512_abs_ps(x), tc = _mm512_min_ps(t, six); /* NaN: the second operand, 6 */
    const __m512i k = _mm512_min_epi32(_mm512_cvttps_epi32(_mm512_mul_ps(tc, _mm512_set1_ps(4.0f / 3.0f))),
                                       _mm512_set1_epi32(7));
    __m512 q;
    GELU_STEP(__m512, _mm512_permutexvar_ps, _mm512_fmadd_ps, _mm512_mul_ps, _mm512_sub_ps, _mm512_cvtepi32_ps(k), k,
              tc, q);
    q = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(t, six, _CMP_LT_OQ), q);
    const __mmask16 pos = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_GT_OQ);
    return _mm512_mask_mov_ps(_mm512_mul_ps(x, q), pos, _mm512_fnmadd_ps(tc, q, x));
}

KS512 void cpu_gelu_erf_avx512(float *out, const float *in, int64_t n) {
    __m512 c[CPU_GELU_Q_DEGREE + 1];
    for (int j = 0; j <= CPU_GELU_Q_DEGREE; j++) c[j] = _mm512_castps256_ps512(_mm256_loadu_ps(cpu_gelu_q[j]));
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        const __m512 a = gelu16(_mm512_loadu_ps(in + i), c), b = gelu16(_mm512_loadu_ps(in + i + 16), c);
        _mm512_storeu_ps(out + i, a);
        _mm512_storeu_ps(out + i + 16, b);
    }
    for (; i < n; i += 16) {
        const __mmask16 m = n - i >= 16 ? 0xffff : (__mmask16)((1u << (n - i)) - 1);
        _mm512_mask_storeu_ps(out + i, m, gelu16(_mm512_maskz_loadu_ps(m, in + i), c));
    }
}

#define KS2 __attribute__((target("avx2,fma")))

KS2 static inline __m256 gelu8(__m256 x, const __m256 *c) {
    const __m256 six = _mm256_set1_ps(6.0f), w = _mm256_set1_ps(0.75f), h = _mm256_set1_ps(0.375f);
    const __m256 t = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x), tc = _mm256_min_ps(t, six); /* NaN: 6 */
    const __m256i k = _mm256_min_epi32(_mm256_cvttps_epi32(_mm256_mul_ps(tc, _mm256_set1_ps(4.0f / 3.0f))),
                                       _mm256_set1_epi32(7));
    __m256 q;
#define PERM8(K, C) _mm256_permutevar8x32_ps(C, K)
    GELU_STEP(__m256, PERM8, _mm256_fmadd_ps, _mm256_mul_ps, _mm256_sub_ps, _mm256_cvtepi32_ps(k), k, tc, q);
#undef PERM8
    q = _mm256_and_ps(q, _mm256_cmp_ps(t, six, _CMP_LT_OQ));
    const __m256 pos = _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_GT_OQ);
    return _mm256_blendv_ps(_mm256_mul_ps(x, q), _mm256_fnmadd_ps(tc, q, x), pos);
}

KS2 void cpu_gelu_erf_avx2(float *out, const float *in, int64_t n) {
    __m256 c[CPU_GELU_Q_DEGREE + 1];
    for (int j = 0; j <= CPU_GELU_Q_DEGREE; j++) c[j] = _mm256_loadu_ps(cpu_gelu_q[j]);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256 a = gelu8(_mm256_loadu_ps(in + i), c), b = gelu8(_mm256_loadu_ps(in + i + 8), c);
        _mm256_storeu_ps(out + i, a);
        _mm256_storeu_ps(out + i + 8, b);
    }
    if (i + 8 <= n) {
        _mm256_storeu_ps(out + i, gelu8(_mm256_loadu_ps(in + i), c));
        i += 8;
    }
    if (i < n) { /* the last 1-7 through a register: the same lanes as the full ones */
        float buf[8] = {0};
        for (int64_t j = i; j < n; j++) buf[j - i] = in[j];
        _mm256_storeu_ps(buf, gelu8(_mm256_loadu_ps(buf), c));
        for (int64_t j = i; j < n; j++) out[j] = buf[j - i];
    }
}
#undef GELU_STEP
#else
typedef int cpu_kernels_act_x86_unused; /* not x86: nothing to build */
#endif
