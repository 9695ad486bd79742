/*
 * kernels_act_x86.c - elementwise activations with AVX-512 (cpu_snake_fn,
 * kernels.h; SwiGLU; GELU's erf form and its two sigmoid forms, QuickGELU and
 * tanh GELU, also with AVX2: cpu_gelu_erf_fn, cpu_gelu_sig_fn, kernels_impl.h;
 * each described above its code). Snake1d, x + sin(v x)^2 / v, the activation of Kokoro's
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

/*
 * GELU's sigmoid forms over n floats (cpu_gelu_sig_fn, kernels_impl.h),
 * out = x / (1 + e), e = exp(w), w = -x k, k = a + b x^2 (QuickGELU: k = a,
 * no square, so +-inf stays finite times inf). Within 2.2 ulp of the exact
 * value wherever |out| >= 1e-36 (test_cpu_gelu.c), from three corrections:
 * - w's rounding: wl = the rest of -x (k + kl) (an FMA), where kl is k's:
 *   the constants' low parts, and for tanh GELU x^2's and b x^2's product
 *   errors (FMA) and the sum's (Fast2Sum: both terms >= 0, the larger first
 *   by max/min); exp's relative error would otherwise be |w| ulp, 40 ulp at
 *   w = 80 (out 1e-34).
 * - exp: w clamped to [-87.33, 88], w = n ln2 + r (ln2 in two parts), r += wl,
 *   exp(r) from its degree-7 Taylor polynomial on |r| <= ln2 / 2 (truncation
 *   6e-10; kx_exp16's degree 6 leaves 1e-7, most of the error here), times
 *   2^n.
 * - the quotient: d = 1 + e is rounded, dl = (1 - d) + e its rest (exact for
 *   e < 2^24, Sterbenz), q = x / d, and out = q + (x - q d - q dl) / d, the
 *   remainder from two FMAs over an approximate reciprocal: within about
 *   half an ulp of x / (1 + e).
 * The ends, as the double formulas give them: w < -87.33 (x large, or +inf)
 * gives x; w > 88 (x very negative) gives x * 0: -0, or NaN for -inf (the
 * double formula's -inf / inf; where 88 < w < 88.72 the exact value is
 * below 3e-37). out takes x's sign bit (-0 stays -0); NaN stays NaN. Two
 * registers an iteration.
 */
KS512 static inline __attribute__((always_inline)) __m512 gsig16(__m512 x, int tanh_form) {
    const __m512 a = _mm512_set1_ps(tanh_form ? CPU_GELU_TANH_A : CPU_GELU_QUICK_A);
    const __m512i sign = _mm512_set1_epi32((int)0x80000000u); /* AVX-512 F's integer logic: DQ is not asked for */
    const __m512 nx = _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(x), sign));
    __m512 k = a, kl = _mm512_set1_ps(tanh_form ? CPU_GELU_TANH_A_LO : CPU_GELU_QUICK_A_LO);
    if (tanh_form) {
        const __m512 b = _mm512_set1_ps(CPU_GELU_TANH_B), sh = _mm512_mul_ps(x, x), sl = _mm512_fmsub_ps(x, x, sh);
        const __m512 th = _mm512_mul_ps(sh, b), tl = _mm512_fmsub_ps(sh, b, th);
        k = _mm512_add_ps(a, th);
        kl = _mm512_add_ps(kl, _mm512_sub_ps(_mm512_min_ps(a, th), _mm512_sub_ps(k, _mm512_max_ps(a, th))));
        kl = _mm512_fmadd_ps(sl, b, _mm512_fmadd_ps(sh, _mm512_set1_ps(CPU_GELU_TANH_B_LO), _mm512_add_ps(kl, tl)));
    }
    const __m512 w = _mm512_mul_ps(nx, k), wl = _mm512_fmadd_ps(nx, kl, _mm512_fmsub_ps(nx, k, w));
    const __m512 wc = _mm512_min_ps(_mm512_max_ps(w, _mm512_set1_ps(-87.33f)), _mm512_set1_ps(88.0f)); /* NaN: -87.33 */
    const __m512 nf = _mm512_roundscale_ps(_mm512_mul_ps(wc, _mm512_set1_ps(1.44269504f)),
                                           _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(nf, _mm512_set1_ps(0.693145751953125f), wc);
    r = _mm512_add_ps(_mm512_fnmadd_ps(nf, _mm512_set1_ps(1.428606765330187e-06f), r), wl);
    __m512 p = _mm512_set1_ps(1.0f / 5040);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    const __m512 e = _mm512_scalef_ps(p, nf);
    const __m512 one = _mm512_set1_ps(1.0f), d = _mm512_add_ps(one, e);
    const __m512 dl = _mm512_add_ps(_mm512_sub_ps(one, d), e);
    const __m512 q = _mm512_div_ps(x, d);
    const __m512 rem = _mm512_fnmadd_ps(q, dl, _mm512_fnmadd_ps(q, d, x)); /* x - q (d + dl) */
    __m512 o = _mm512_fmadd_ps(rem, _mm512_rcp14_ps(d), q);
    o = _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(o), /* x's sign: -0 stays -0 */
                                            _mm512_and_si512(_mm512_castps_si512(x), sign)));
    o = _mm512_mask_mov_ps(o, _mm512_cmp_ps_mask(w, _mm512_set1_ps(-87.33f), _CMP_LT_OQ), x);
    return _mm512_mask_mul_ps(o, _mm512_cmp_ps_mask(w, _mm512_set1_ps(88.0f), _CMP_GT_OQ), x, _mm512_setzero_ps());
}

KS512 static inline __attribute__((always_inline)) void gsig_avx512(float *out, const float *in, int64_t n,
                                                                    int tanh_form) {
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        const __m512 p = gsig16(_mm512_loadu_ps(in + i), tanh_form);
        const __m512 q = gsig16(_mm512_loadu_ps(in + i + 16), tanh_form);
        _mm512_storeu_ps(out + i, p);
        _mm512_storeu_ps(out + i + 16, q);
    }
    for (; i < n; i += 16) {
        const __mmask16 m = n - i >= 16 ? 0xffff : (__mmask16)((1u << (n - i)) - 1);
        _mm512_mask_storeu_ps(out + i, m, gsig16(_mm512_maskz_loadu_ps(m, in + i), tanh_form));
    }
}

KS512 void cpu_gelu_sig_avx512(float *out, const float *in, int64_t n, int kind) {
    if (kind == CPU_GELU_TANH) gsig_avx512(out, in, n, 1);
    else gsig_avx512(out, in, n, 0);
}

KS2 static inline __attribute__((always_inline)) __m256 gsig8(__m256 x, int tanh_form) {
    const __m256 a = _mm256_set1_ps(tanh_form ? CPU_GELU_TANH_A : CPU_GELU_QUICK_A);
    const __m256 nx = _mm256_xor_ps(x, _mm256_set1_ps(-0.0f));
    __m256 k = a, kl = _mm256_set1_ps(tanh_form ? CPU_GELU_TANH_A_LO : CPU_GELU_QUICK_A_LO);
    if (tanh_form) {
        const __m256 b = _mm256_set1_ps(CPU_GELU_TANH_B), sh = _mm256_mul_ps(x, x), sl = _mm256_fmsub_ps(x, x, sh);
        const __m256 th = _mm256_mul_ps(sh, b), tl = _mm256_fmsub_ps(sh, b, th);
        k = _mm256_add_ps(a, th);
        kl = _mm256_add_ps(kl, _mm256_sub_ps(_mm256_min_ps(a, th), _mm256_sub_ps(k, _mm256_max_ps(a, th))));
        kl = _mm256_fmadd_ps(sl, b, _mm256_fmadd_ps(sh, _mm256_set1_ps(CPU_GELU_TANH_B_LO), _mm256_add_ps(kl, tl)));
    }
    const __m256 w = _mm256_mul_ps(nx, k), wl = _mm256_fmadd_ps(nx, kl, _mm256_fmsub_ps(nx, k, w));
    const __m256 wc = _mm256_min_ps(_mm256_max_ps(w, _mm256_set1_ps(-87.33f)), _mm256_set1_ps(88.0f)); /* NaN: -87.33 */
    const __m256 nf =
        _mm256_round_ps(_mm256_mul_ps(wc, _mm256_set1_ps(1.44269504f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(nf, _mm256_set1_ps(0.693145751953125f), wc);
    r = _mm256_add_ps(_mm256_fnmadd_ps(nf, _mm256_set1_ps(1.428606765330187e-06f), r), wl);
    __m256 p = _mm256_set1_ps(1.0f / 5040);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    /* 2^n: n in [-126, 127], a normal number's exponent bits */
    const __m256i en = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(nf), _mm256_set1_epi32(127)), 23);
    const __m256 e = _mm256_mul_ps(p, _mm256_castsi256_ps(en));
    const __m256 one = _mm256_set1_ps(1.0f), d = _mm256_add_ps(one, e);
    const __m256 dl = _mm256_add_ps(_mm256_sub_ps(one, d), e);
    const __m256 q = _mm256_div_ps(x, d);
    const __m256 rem = _mm256_fnmadd_ps(q, dl, _mm256_fnmadd_ps(q, d, x)); /* x - q (d + dl) */
    __m256 o = _mm256_fmadd_ps(rem, _mm256_rcp_ps(d), q);
    o = _mm256_or_ps(o, _mm256_and_ps(x, _mm256_set1_ps(-0.0f))); /* x's sign: -0 stays -0 */
    o = _mm256_blendv_ps(o, x, _mm256_cmp_ps(w, _mm256_set1_ps(-87.33f), _CMP_LT_OQ));
    return _mm256_blendv_ps(o, _mm256_mul_ps(x, _mm256_setzero_ps()),
                            _mm256_cmp_ps(w, _mm256_set1_ps(88.0f), _CMP_GT_OQ));
}

KS2 static inline __attribute__((always_inline)) void gsig_avx2(float *out, const float *in, int64_t n,
                                                                int tanh_form) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256 p = gsig8(_mm256_loadu_ps(in + i), tanh_form);
        const __m256 q = gsig8(_mm256_loadu_ps(in + i + 8), tanh_form);
        _mm256_storeu_ps(out + i, p);
        _mm256_storeu_ps(out + i + 8, q);
    }
    if (i + 8 <= n) {
        _mm256_storeu_ps(out + i, gsig8(_mm256_loadu_ps(in + i), tanh_form));
        i += 8;
    }
    if (i < n) { /* the last 1-7 through a register: the same lanes as the full ones */
        float buf[8] = {0};
        for (int64_t j = i; j < n; j++) buf[j - i] = in[j];
        _mm256_storeu_ps(buf, gsig8(_mm256_loadu_ps(buf), tanh_form));
        for (int64_t j = i; j < n; j++) out[j] = buf[j - i];
    }
}

KS2 void cpu_gelu_sig_avx2(float *out, const float *in, int64_t n, int kind) {
    if (kind == CPU_GELU_TANH) gsig_avx2(out, in, n, 1);
    else gsig_avx2(out, in, n, 0);
}
#else
typedef int cpu_kernels_act_x86_unused; /* not x86: nothing to build */
#endif
