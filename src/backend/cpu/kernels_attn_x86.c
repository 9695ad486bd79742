/*
 * kernels_attn_x86.c - the attention kernel (cpu_attn_job, kernels.h) with
 * AVX2 + FMA + F16C, 8 floats per register. It is the one used on AVX-512
 * machines too: at decode the loop is bound by loads and FMA latency, not by
 * the register width.
 *
 * Query heads go in blocks of four sharing the KV head (grouped-query
 * attention): each K or V row is loaded and converted from fp16 once for the
 * four, and the four scores of a row land together in the scratch, laid out
 * [row][head]. Heads left over (all of them for multi-head attention) go one
 * at a time, four rows at once. Steps per block:
 *   scores   two rows at a time, eight FMA chains; the four heads' sums are
 *            folded with three vhaddps; running max per head as a vector
 *   softmax  exp over the scratch in place (kx_exp8: range reduction by ln 2 and
 *            a degree-6 polynomial, about 1 ulp), sums per head
 *   values   rows in blocks of ATT_ROWS (in L1 while every column chunk of
 *            the heads' outputs is accumulated in registers)
 * Needs hd % 8 == 0; other head sizes take the scalar kernel.
 */
#include "backend/cpu/kernels_impl.h"

#if defined(WGML_CPU_X86)
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "backend/cpu/kernels_x86_exp.h"

#define KA_TARGET __attribute__((target("avx2,fma,f16c")))
#define KA_INLINE KA_TARGET inline __attribute__((always_inline))
#define ATT_ROWS  64
#define ATT_AHEAD 16 /* rows prefetched ahead */

/* 8 consecutive cache elements from p as floats */
static KA_INLINE __m256 ka_load(const uint8_t *p, const int f16) {
    return f16 ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)) : _mm256_loadu_ps((const float *)p);
}

/* A KV head's slice of a row is a short run (128-256 bytes) at a stride of
 * the whole cache row, so the hardware prefetcher, which stops at 4 KiB page
 * boundaries, leaves most loads waiting on memory; this asks for the slice
 * ATT_AHEAD rows ahead (prefetches never fault, even past the end). */
static KA_INLINE void ka_prefetch(const uint8_t *row, int bytes) {
    for (int b = 0; b < bytes; b += 64) _mm_prefetch((const char *)(row + b), _MM_HINT_T0);
}

/* e^x; inputs below -87.3 give 2^-126 rather than 0 (harmless next to the
 * row maximum's 1), NaN stays NaN */

/* [sum(a), sum(b), sum(c), sum(d)] */
static KA_INLINE __m128 ka_hsum4(__m256 a, __m256 b, __m256 c, __m256 d) {
    const __m256 t = _mm256_hadd_ps(_mm256_hadd_ps(a, b), _mm256_hadd_ps(c, d));
    return _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
}

/* lanes 0..n-1 set (n <= 8) */
static KA_INLINE __m256i ka_mask(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* exp(s - m) in place over n floats, where m repeats with period 8 in m8;
 * returns the per-lane sums */
static KA_INLINE __m256 ka_softmax(float *s, int n, __m256 m8) {
    __m256 sum = _mm256_setzero_ps();
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 e = kx_exp8(_mm256_sub_ps(_mm256_loadu_ps(s + i), m8));
        _mm256_storeu_ps(s + i, e);
        sum = _mm256_add_ps(sum, e);
    }
    if (i < n) {
        const __m256i mk = ka_mask(n - i);
        const __m256 e =
            _mm256_and_ps(kx_exp8(_mm256_sub_ps(_mm256_maskload_ps(s + i, mk), m8)), _mm256_castsi256_ps(mk));
        _mm256_maskstore_ps(s + i, mk, e);
        sum = _mm256_add_ps(sum, e);
    }
    return sum;
}

/* four query heads q0..q3 (hd apart); scores to s[4 * j + h] */
static KA_INLINE void ka_block4(const cpu_attn_job *a, const float *q, float *s, float *m, float *l, float *o,
                                const int f16) {
    const int hd = a->hd, len = a->len, es = f16 ? 2 : 4;
    const size_t st = a->stride;
    const float *q0 = q, *q1 = q + hd, *q2 = q + 2 * hd, *q3 = q + 3 * hd;
    const __m128 scale = _mm_set1_ps(a->scale);
    __m128 mx = _mm_set1_ps(-INFINITY);
    int j = 0;
    for (; j + 2 <= len; j += 2) {
        const uint8_t *k0 = a->k + (size_t)j * st, *k1 = k0 + st;
        ka_prefetch(k0 + ATT_AHEAD * st, hd * es);
        ka_prefetch(k1 + ATT_AHEAD * st, hd * es);
        __m256 c0 = _mm256_setzero_ps(), c1 = c0, c2 = c0, c3 = c0, e0 = c0, e1 = c0, e2 = c0, e3 = c0;
        for (int d = 0; d < hd; d += 8) {
            const __m256 ka = ka_load(k0 + d * es, f16), kb = ka_load(k1 + d * es, f16);
            __m256 qv = _mm256_loadu_ps(q0 + d);
            c0 = _mm256_fmadd_ps(ka, qv, c0), e0 = _mm256_fmadd_ps(kb, qv, e0);
            qv = _mm256_loadu_ps(q1 + d);
            c1 = _mm256_fmadd_ps(ka, qv, c1), e1 = _mm256_fmadd_ps(kb, qv, e1);
            qv = _mm256_loadu_ps(q2 + d);
            c2 = _mm256_fmadd_ps(ka, qv, c2), e2 = _mm256_fmadd_ps(kb, qv, e2);
            qv = _mm256_loadu_ps(q3 + d);
            c3 = _mm256_fmadd_ps(ka, qv, c3), e3 = _mm256_fmadd_ps(kb, qv, e3);
        }
        const __m128 ra = _mm_mul_ps(ka_hsum4(c0, c1, c2, c3), scale), rb = _mm_mul_ps(ka_hsum4(e0, e1, e2, e3), scale);
        mx = _mm_max_ps(mx, _mm_max_ps(ra, rb));
        _mm_storeu_ps(s + 4 * j, ra);
        _mm_storeu_ps(s + 4 * j + 4, rb);
    }
    if (j < len) {
        const uint8_t *k0 = a->k + (size_t)j * st;
        __m256 c0 = _mm256_setzero_ps(), c1 = c0, c2 = c0, c3 = c0;
        for (int d = 0; d < hd; d += 8) {
            const __m256 ka = ka_load(k0 + d * es, f16);
            c0 = _mm256_fmadd_ps(ka, _mm256_loadu_ps(q0 + d), c0);
            c1 = _mm256_fmadd_ps(ka, _mm256_loadu_ps(q1 + d), c1);
            c2 = _mm256_fmadd_ps(ka, _mm256_loadu_ps(q2 + d), c2);
            c3 = _mm256_fmadd_ps(ka, _mm256_loadu_ps(q3 + d), c3);
        }
        const __m128 ra = _mm_mul_ps(ka_hsum4(c0, c1, c2, c3), scale);
        mx = _mm_max_ps(mx, ra);
        _mm_storeu_ps(s + 4 * j, ra);
    }
    const __m256 sum = ka_softmax(s, 4 * len, _mm256_set_m128(mx, mx));
    _mm_storeu_ps(m, mx);
    _mm_storeu_ps(l, _mm_add_ps(_mm256_castps256_ps128(sum), _mm256_extractf128_ps(sum, 1)));

    float *o0 = o, *o1 = o + hd, *o2 = o + 2 * hd, *o3 = o + 3 * hd;
    memset(o, 0, (size_t)4 * hd * sizeof(float));
    for (int j0 = 0; j0 < len; j0 += ATT_ROWS) {
        const int j1 = j0 + ATT_ROWS < len ? j0 + ATT_ROWS : len;
        int d = 0;
        for (; d + 16 <= hd; d += 16) { /* two column chunks: eight chains */
            __m256 a0 = _mm256_loadu_ps(o0 + d), a1 = _mm256_loadu_ps(o1 + d), a2 = _mm256_loadu_ps(o2 + d),
                   a3 = _mm256_loadu_ps(o3 + d), b0 = _mm256_loadu_ps(o0 + d + 8), b1 = _mm256_loadu_ps(o1 + d + 8),
                   b2 = _mm256_loadu_ps(o2 + d + 8), b3 = _mm256_loadu_ps(o3 + d + 8);
            for (int jj = j0; jj < j1; jj++) {
                const uint8_t *vr = a->v + (size_t)jj * st + (size_t)d * es;
                if (d == 0) ka_prefetch(vr + ATT_ROWS * st, hd * es); /* the next block's rows */
                const __m256 va = ka_load(vr, f16), vb = ka_load(vr + 8 * es, f16);
                const float *p = s + 4 * jj;
                __m256 pb = _mm256_broadcast_ss(p);
                a0 = _mm256_fmadd_ps(pb, va, a0), b0 = _mm256_fmadd_ps(pb, vb, b0);
                pb = _mm256_broadcast_ss(p + 1);
                a1 = _mm256_fmadd_ps(pb, va, a1), b1 = _mm256_fmadd_ps(pb, vb, b1);
                pb = _mm256_broadcast_ss(p + 2);
                a2 = _mm256_fmadd_ps(pb, va, a2), b2 = _mm256_fmadd_ps(pb, vb, b2);
                pb = _mm256_broadcast_ss(p + 3);
                a3 = _mm256_fmadd_ps(pb, va, a3), b3 = _mm256_fmadd_ps(pb, vb, b3);
            }
            _mm256_storeu_ps(o0 + d, a0), _mm256_storeu_ps(o1 + d, a1), _mm256_storeu_ps(o2 + d, a2);
            _mm256_storeu_ps(o3 + d, a3), _mm256_storeu_ps(o0 + d + 8, b0), _mm256_storeu_ps(o1 + d + 8, b1);
            _mm256_storeu_ps(o2 + d + 8, b2), _mm256_storeu_ps(o3 + d + 8, b3);
        }
        if (d < hd) {
            __m256 a0 = _mm256_loadu_ps(o0 + d), a1 = _mm256_loadu_ps(o1 + d), a2 = _mm256_loadu_ps(o2 + d),
                   a3 = _mm256_loadu_ps(o3 + d);
            for (int jj = j0; jj < j1; jj++) {
                if (d == 0) ka_prefetch(a->v + (size_t)(jj + ATT_ROWS) * st, hd * es);
                const __m256 va = ka_load(a->v + (size_t)jj * st + (size_t)d * es, f16);
                const float *p = s + 4 * jj;
                a0 = _mm256_fmadd_ps(_mm256_broadcast_ss(p), va, a0);
                a1 = _mm256_fmadd_ps(_mm256_broadcast_ss(p + 1), va, a1);
                a2 = _mm256_fmadd_ps(_mm256_broadcast_ss(p + 2), va, a2);
                a3 = _mm256_fmadd_ps(_mm256_broadcast_ss(p + 3), va, a3);
            }
            _mm256_storeu_ps(o0 + d, a0), _mm256_storeu_ps(o1 + d, a1), _mm256_storeu_ps(o2 + d, a2);
            _mm256_storeu_ps(o3 + d, a3);
        }
    }
}

/* one query head; scores to s[j] */
static KA_INLINE void ka_block1(const cpu_attn_job *a, const float *q, float *s, float *m, float *l, float *o,
                                const int f16) {
    const int hd = a->hd, len = a->len, es = f16 ? 2 : 4;
    const size_t st = a->stride;
    const __m128 scale = _mm_set1_ps(a->scale);
    __m128 mx = _mm_set1_ps(-INFINITY);
    int j = 0;
    for (; j + 4 <= len; j += 4) {
        const uint8_t *k0 = a->k + (size_t)j * st;
        for (int r = 0; r < 4; r++) ka_prefetch(k0 + (size_t)(ATT_AHEAD + r) * st, hd * es);
        __m256 c0 = _mm256_setzero_ps(), c1 = c0, c2 = c0, c3 = c0;
        for (int d = 0; d < hd; d += 8) {
            const __m256 qv = _mm256_loadu_ps(q + d);
            c0 = _mm256_fmadd_ps(ka_load(k0 + d * es, f16), qv, c0);
            c1 = _mm256_fmadd_ps(ka_load(k0 + st + d * es, f16), qv, c1);
            c2 = _mm256_fmadd_ps(ka_load(k0 + 2 * st + d * es, f16), qv, c2);
            c3 = _mm256_fmadd_ps(ka_load(k0 + 3 * st + d * es, f16), qv, c3);
        }
        const __m128 r = _mm_mul_ps(ka_hsum4(c0, c1, c2, c3), scale);
        mx = _mm_max_ps(mx, r);
        _mm_storeu_ps(s + j, r);
    }
    for (; j < len; j++) {
        const uint8_t *k0 = a->k + (size_t)j * st;
        __m256 c0 = _mm256_setzero_ps();
        for (int d = 0; d < hd; d += 8)
            c0 = _mm256_fmadd_ps(ka_load(k0 + d * es, f16), _mm256_loadu_ps(q + d), c0);
        const __m128 r = _mm_mul_ps(ka_hsum4(c0, c0, c0, c0), scale);
        mx = _mm_max_ps(mx, r);
        s[j] = _mm_cvtss_f32(r);
    }
    /* max of the four lanes, then broadcast */
    mx = _mm_max_ps(mx, _mm_movehl_ps(mx, mx));
    mx = _mm_max_ps(mx, _mm_shuffle_ps(mx, mx, 1));
    const float mf = _mm_cvtss_f32(mx);
    const __m256 sum = ka_softmax(s, len, _mm256_set1_ps(mf));
    __m128 t = _mm_add_ps(_mm256_castps256_ps128(sum), _mm256_extractf128_ps(sum, 1));
    t = _mm_add_ps(t, _mm_movehl_ps(t, t));
    t = _mm_add_ss(t, _mm_movehdup_ps(t));
    *m = mf;
    *l = _mm_cvtss_f32(t);

    memset(o, 0, (size_t)hd * sizeof(float));
    for (int j0 = 0; j0 < len; j0 += ATT_ROWS) {
        const int j1 = j0 + ATT_ROWS < len ? j0 + ATT_ROWS : len;
        int d = 0;
        for (; d + 32 <= hd; d += 32) {
            __m256 a0 = _mm256_loadu_ps(o + d), a1 = _mm256_loadu_ps(o + d + 8), a2 = _mm256_loadu_ps(o + d + 16),
                   a3 = _mm256_loadu_ps(o + d + 24);
            for (int jj = j0; jj < j1; jj++) {
                const uint8_t *vr = a->v + (size_t)jj * st + (size_t)d * es;
                if (d == 0) ka_prefetch(vr + ATT_ROWS * st, hd * es);
                const __m256 p = _mm256_broadcast_ss(s + jj);
                a0 = _mm256_fmadd_ps(p, ka_load(vr, f16), a0);
                a1 = _mm256_fmadd_ps(p, ka_load(vr + 8 * es, f16), a1);
                a2 = _mm256_fmadd_ps(p, ka_load(vr + 16 * es, f16), a2);
                a3 = _mm256_fmadd_ps(p, ka_load(vr + 24 * es, f16), a3);
            }
            _mm256_storeu_ps(o + d, a0), _mm256_storeu_ps(o + d + 8, a1);
            _mm256_storeu_ps(o + d + 16, a2), _mm256_storeu_ps(o + d + 24, a3);
        }
        for (; d < hd; d += 8) {
            __m256 a0 = _mm256_loadu_ps(o + d), a1 = _mm256_setzero_ps();
            int jj = j0;
            for (; jj + 2 <= j1; jj += 2) { /* two chains */
                const uint8_t *vr = a->v + (size_t)jj * st + (size_t)d * es;
                a0 = _mm256_fmadd_ps(_mm256_broadcast_ss(s + jj), ka_load(vr, f16), a0);
                a1 = _mm256_fmadd_ps(_mm256_broadcast_ss(s + jj + 1), ka_load(vr + st, f16), a1);
            }
            if (jj < j1)
                a0 = _mm256_fmadd_ps(_mm256_broadcast_ss(s + jj), ka_load(a->v + (size_t)jj * st + (size_t)d * es, f16),
                                     a0);
            _mm256_storeu_ps(o + d, _mm256_add_ps(a0, a1));
        }
    }
}

static KA_INLINE void ka_attn(const cpu_attn_job *a, const int f16) {
    const int hd = a->hd, len = a->len;
    int h = 0;
    for (; h + 4 <= a->ng; h += 4)
        ka_block4(a, a->q + (size_t)h * hd, a->s + (size_t)h * len, a->m + h, a->l + h, a->o + (size_t)h * hd, f16);
    for (; h < a->ng; h++)
        ka_block1(a, a->q + (size_t)h * hd, a->s + (size_t)h * len, a->m + h, a->l + h, a->o + (size_t)h * hd, f16);
}

static KA_TARGET void ka_attn_f16(const cpu_attn_job *a) { ka_attn(a, 1); }
static KA_TARGET void ka_attn_f32(const cpu_attn_job *a) { ka_attn(a, 0); }

void cpu_attn_avx2(const cpu_attn_job *a) {
    if (a->hd % 8 != 0) {
        cpu_attn_scalar(a);
        return;
    }
    if (a->f16)
        ka_attn_f16(a);
    else
        ka_attn_f32(a);
}

/* ---- blocks of query rows (cpu_attn_rows_job) ----
 *
 * The block's 8 query rows are the 8 lanes of a register: Q is transposed
 * once (qt[d] = the rows' element d, times scale), so a score vector
 * s_j = K_j . qt costs hd broadcast-FMAs with K read in its own layout, the
 * softmax of each row is lane-wise (max, exp and sum over j without any
 * horizontal step), and p_j for a row is one broadcast from s[8 j + r] in
 * the value pass, which accumulates output rows in their own layout. */

/* 8 keys' score vectors from row k0 on (kv_stride ks): c[i] = K_{k0+i} . qt */
#define KR_SCORES(NK)                                                                                                  \
    static KA_INLINE void kr_scores##NK(const float *k0, size_t ks, const float *qt, int hd, __m256 *c) {              \
        for (int i = 0; i < NK; i++)                                                                                   \
            c[i] = _mm256_setzero_ps();                                                                                \
        for (int d = 0; d < hd; d++) {                                                                                 \
            const __m256 qv = _mm256_loadu_ps(qt + 8 * d);                                                             \
            for (int i = 0; i < NK; i++)                                                                               \
                c[i] = _mm256_fmadd_ps(_mm256_broadcast_ss(k0 + i * ks + d), qv, c[i]);                                \
        }                                                                                                              \
    }
KR_SCORES(8)
KR_SCORES(4)
KR_SCORES(1)
#undef KR_SCORES

/* adds the bias of key j (if any), stores the score vector, updates the max */
static KA_INLINE void kr_put(__m256 c, const float *bias, int j, float *s, __m256 *mx) {
    if (bias) c = _mm256_add_ps(c, _mm256_loadu_ps(bias + (size_t)CPU_ATTN_ROWS * j));
    _mm256_storeu_ps(s + 8 * j, c);
    *mx = _mm256_max_ps(*mx, c);
}

/* output rows r0..r0+3 (those < nr), columns d..d+8*NC-1: sum_j s[8 j + r] V_j / l_r */
#define KR_VALUES(NC)                                                                                                  \
    static KA_INLINE void kr_values##NC(const cpu_attn_rows_job *a, const float *s, const float *inv, int r0, int d) { \
        __m256 acc[4][NC];                                                                                             \
        for (int i = 0; i < 4; i++)                                                                                    \
            for (int c = 0; c < NC; c++)                                                                               \
                acc[i][c] = _mm256_setzero_ps();                                                                       \
        const float *vr = a->v + d;                                                                                    \
        for (int j = 0; j < a->len; j++, vr += a->kv_stride) {                                                         \
            __m256 v[NC];                                                                                              \
            for (int c = 0; c < NC; c++)                                                                               \
                v[c] = _mm256_loadu_ps(vr + 8 * c);                                                                    \
            const float *p = s + 8 * j + r0;                                                                           \
            for (int i = 0; i < 4; i++) {                                                                              \
                const __m256 pb = _mm256_broadcast_ss(p + i);                                                          \
                for (int c = 0; c < NC; c++)                                                                           \
                    acc[i][c] = _mm256_fmadd_ps(pb, v[c], acc[i][c]);                                                  \
            }                                                                                                          \
        }                                                                                                              \
        for (int i = 0; i < 4 && r0 + i < a->nr; i++) {                                                                \
            float *o = a->o + (size_t)(r0 + i) * a->o_stride + d;                                                      \
            const __m256 f = _mm256_broadcast_ss(inv + r0 + i);                                                        \
            for (int c = 0; c < NC; c++)                                                                               \
                _mm256_storeu_ps(o + 8 * c, _mm256_mul_ps(acc[i][c], f));                                              \
        }                                                                                                              \
    }
KR_VALUES(2)
KR_VALUES(1)
#undef KR_VALUES

static KA_TARGET void kr_rows(const cpu_attn_rows_job *a) {
    const int hd = a->hd, len = a->len, nr = a->nr;
    const size_t ks = a->kv_stride;
    float *s = a->s, *qt = s + (size_t)8 * len;
    /* rows past nr are zeros: their lanes score 0 everywhere, finite and unused */
    for (int r = 0; r < 8; r++) {
        const float *q = a->q + (size_t)r * a->q_stride;
        for (int d = 0; d < hd; d++)
            qt[8 * d + r] = r < nr ? q[d] * a->scale : 0.0f;
    }
    __m256 mx = _mm256_set1_ps(-INFINITY), c[8];
    int j = 0;
    for (; j + 8 <= len; j += 8) { /* eight FMA chains: enough to cover their latency */
        kr_scores8(a->k + (size_t)j * ks, ks, qt, hd, c);
        for (int i = 0; i < 8; i++)
            kr_put(c[i], a->bias, j + i, s, &mx);
    }
    for (; j + 4 <= len; j += 4) {
        kr_scores4(a->k + (size_t)j * ks, ks, qt, hd, c);
        for (int i = 0; i < 4; i++)
            kr_put(c[i], a->bias, j + i, s, &mx);
    }
    for (; j < len; j++) {
        kr_scores1(a->k + (size_t)j * ks, ks, qt, hd, c);
        kr_put(c[0], a->bias, j, s, &mx);
    }
    /* lanes whose every key is hidden (max -inf) get 0 as max and, below, 0 as
     * 1/l: zeros; elsewhere the hidden keys' -inf must give exactly 0, which
     * kx_exp8 (clamped at -87.3) does not */
    const __m256 ninf = _mm256_set1_ps(-INFINITY), any = _mm256_cmp_ps(mx, ninf, _CMP_NEQ_OQ);
    const __m256 m = _mm256_and_ps(mx, any);
    __m256 l = _mm256_setzero_ps();
    for (j = 0; j < len; j++) {
        const __m256 x = _mm256_loadu_ps(s + 8 * j);
        __m256 e = kx_exp8(_mm256_sub_ps(x, m));
        if (a->bias) e = _mm256_and_ps(e, _mm256_cmp_ps(x, ninf, _CMP_NEQ_OQ));
        _mm256_storeu_ps(s + 8 * j, e);
        l = _mm256_add_ps(l, e);
    }
    float inv[8];
    _mm256_storeu_ps(inv, _mm256_and_ps(_mm256_div_ps(_mm256_set1_ps(1.0f), l), any));
    for (int r0 = 0; r0 < nr; r0 += 4) {
        int d = 0;
        for (; d + 16 <= hd; d += 16)
            kr_values2(a, s, inv, r0, d);
        if (d < hd) kr_values1(a, s, inv, r0, d);
    }
}

/* up to CPU_ATTN_ROWS rows as blocks of 8 lanes (rows r0 .. r0 + 7 read
 * their bias from column r0 of the job's [len][CPU_ATTN_ROWS]) */
void cpu_attn_rows_avx2(const cpu_attn_rows_job *a) {
    if (a->hd % 8 != 0) {
        cpu_attn_rows_scalar(a);
        return;
    }
    for (int r0 = 0; r0 < a->nr; r0 += 8) {
        cpu_attn_rows_job h = *a;
        h.nr = a->nr - r0 < 8 ? a->nr - r0 : 8;
        h.q = a->q + (size_t)r0 * a->q_stride;
        h.o = a->o + (size_t)r0 * a->o_stride;
        h.bias = a->bias ? a->bias + r0 : NULL;
        kr_rows(&h);
    }
}

/* ---- blocks of 16 query rows with AVX-512 (cpu_attn_rows_job) ----
 *
 * kr_rows with 16 lanes: Q^T [hd][16], score vectors of 16 rows per key,
 * the softmax lane-wise, and output rows accumulated 4 at a time over 64
 * columns (16 zmm). Needs hd % 16 == 0 (others take the 8-lane kernel). */

#define KZ_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")))
#define KZ_INLINE KZ_TARGET inline __attribute__((always_inline))


/* NK keys' score vectors from row k0 on: c[i] = K_{k0+i} . qt */
static KZ_INLINE void kz_scores(const int NK, const float *k0, size_t ks, const float *qt, int hd, __m512 *c) {
    for (int i = 0; i < NK; i++) c[i] = _mm512_setzero_ps();
    for (int d = 0; d < hd; d++) {
        const __m512 qv = _mm512_loadu_ps(qt + 16 * d);
        for (int i = 0; i < NK; i++) c[i] = _mm512_fmadd_ps(_mm512_set1_ps(k0[(size_t)i * ks + d]), qv, c[i]);
    }
}

static KZ_INLINE void kz_put(__m512 c, const float *bias, int j, float *s, __m512 *mx) {
    if (bias) c = _mm512_add_ps(c, _mm512_loadu_ps(bias + 16 * (size_t)j));
    _mm512_storeu_ps(s + 16 * (size_t)j, c);
    *mx = _mm512_max_ps(*mx, c);
}

/* output rows r0..r0+3 (those < nr), columns d..d+16*NC-1: sum_j s[16 j + r] V_j / l_r */
static KZ_INLINE void kz_values(const int NC, const cpu_attn_rows_job *a, const float *s, const float *inv, int r0,
                                int d) {
    __m512 acc[4][4];
    for (int i = 0; i < 4; i++)
        for (int c = 0; c < NC; c++) acc[i][c] = _mm512_setzero_ps();
    const float *vr = a->v + d;
    for (int j = 0; j < a->len; j++, vr += a->kv_stride) {
        __m512 v[4];
        for (int c = 0; c < NC; c++) v[c] = _mm512_loadu_ps(vr + 16 * c);
        const float *p = s + 16 * (size_t)j + r0;
        for (int i = 0; i < 4; i++) {
            const __m512 pb = _mm512_set1_ps(p[i]);
            for (int c = 0; c < NC; c++) acc[i][c] = _mm512_fmadd_ps(pb, v[c], acc[i][c]);
        }
    }
    for (int i = 0; i < 4 && r0 + i < a->nr; i++) {
        float *o = a->o + (size_t)(r0 + i) * a->o_stride + d;
        const __m512 f = _mm512_set1_ps(inv[r0 + i]);
        for (int c = 0; c < NC; c++) _mm512_storeu_ps(o + 16 * c, _mm512_mul_ps(acc[i][c], f));
    }
}

static KZ_TARGET void kz_rows(const cpu_attn_rows_job *a) {
    const int hd = a->hd, len = a->len, nr = a->nr;
    const size_t ks = a->kv_stride;
    float *s = a->s, *qt = s + (size_t)16 * len;
    for (int r = 0; r < 16; r++) { /* rows past nr are zeros: finite scores, unused */
        const float *q = a->q + (size_t)r * a->q_stride;
        for (int d = 0; d < hd; d++) qt[16 * d + r] = r < nr ? q[d] * a->scale : 0.0f;
    }
    __m512 mx = _mm512_set1_ps(-INFINITY), c[8];
    int j = 0;
    for (; j + 8 <= len; j += 8) {
        kz_scores(8, a->k + (size_t)j * ks, ks, qt, hd, c);
        for (int i = 0; i < 8; i++) kz_put(c[i], a->bias, j + i, s, &mx);
    }
    for (; j < len; j++) {
        kz_scores(1, a->k + (size_t)j * ks, ks, qt, hd, c);
        kz_put(c[0], a->bias, j, s, &mx);
    }
    /* as kr_rows: a lane whose keys are all hidden gets zeros, hidden keys exactly 0 */
    const __m512 ninf = _mm512_set1_ps(-INFINITY);
    const __mmask16 any = _mm512_cmp_ps_mask(mx, ninf, _CMP_NEQ_OQ);
    const __m512 m = _mm512_maskz_mov_ps(any, mx);
    __m512 l = _mm512_setzero_ps();
    for (j = 0; j < len; j++) {
        const __m512 x = _mm512_loadu_ps(s + 16 * (size_t)j);
        __m512 e = kx_exp16(_mm512_sub_ps(x, m));
        if (a->bias) e = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, ninf, _CMP_NEQ_OQ), e);
        _mm512_storeu_ps(s + 16 * (size_t)j, e);
        l = _mm512_add_ps(l, e);
    }
    float inv[16];
    _mm512_storeu_ps(inv, _mm512_maskz_mov_ps(any, _mm512_div_ps(_mm512_set1_ps(1.0f), l)));
    for (int r0 = 0; r0 < nr; r0 += 4) {
        int d = 0;
        for (; d + 64 <= hd; d += 64) kz_values(4, a, s, inv, r0, d);
        for (; d < hd; d += 16) kz_values(1, a, s, inv, r0, d);
    }
}

void cpu_attn_rows_avx512(const cpu_attn_rows_job *a) {
    if (a->hd % 16 != 0) {
        cpu_attn_rows_avx2(a);
        return;
    }
    kz_rows(a);
}

/* ---- a few query vectors over long keys (cpu_attn_dec_job) with AVX-512 ----
 *
 * Decode: each K row (hd / 16 registers, converted from fp16 once) meets the
 * NR query vectors (NR = 1, 2 or 4; 3 runs as 4 with a zero vector), and the
 * 16 / NR keys x NR vectors of a batch leave 16 accumulators, summed
 * horizontally all at once (kd_reduce16: 46 instructions for 16 dot
 * products) into one register of scores laid out s[NR j + r]. The softmax
 * runs over that layout with a period-NR vector of maxima; the values pass
 * broadcasts the NR weights of a V row into NR x (up to 4) accumulators,
 * 64 columns at a time. Needs hd % 16 == 0 (others: the scalar kernel). */

#define KD_AHEAD 32 /* key rows prefetched ahead */

/* lane t of the result = the sum of a[t]'s 16 lanes */
static KZ_INLINE __m512 kd_reduce16(__m512 *a) {
    __m512 v[8], w[4], u[2];
    for (int i = 0; i < 8; i++) /* 256-bit halves: lanes 0-7 a[2i], 8-15 a[2i+1] */
        v[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0x44),
                             _mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0xEE));
    for (int i = 0; i < 4; i++) /* quarter k of w[i]: a[4i + k] */
        w[i] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], 0x88),
                             _mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], 0xDD));
    for (int i = 0; i < 2; i++) /* quarter k: two partials of a[8i + k], two of a[8i + 4 + k] */
        u[i] = _mm512_add_ps(_mm512_shuffle_ps(w[2 * i], w[2 * i + 1], 0x44),
                             _mm512_shuffle_ps(w[2 * i], w[2 * i + 1], 0xEE));
    /* lane 4k + i: a[4i + k] */
    const __m512 f = _mm512_add_ps(_mm512_shuffle_ps(u[0], u[1], 0x88), _mm512_shuffle_ps(u[0], u[1], 0xDD));
    const __m512i idx = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    return _mm512_permutexvar_ps(idx, f);
}

/* 16 consecutive elements from p as floats */
static KZ_INLINE __m512 kd_load(const uint8_t *p, const int f16) {
    return f16 ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p)) : _mm512_loadu_ps((const float *)p);
}

/* scores s[NR j + r] for keys j0 .. j0 + nk - 1 (nk <= 16 / NR), stored as 16 floats */
static KZ_INLINE void kd_scores(const cpu_attn_dec_job *a, const float *qs, int j0, int nk, float *s, const int NR,
                                const int f16) {
    const int KB = 16 / NR, hd = a->hd, es = f16 ? 2 : 4;
    const size_t st = a->stride;
    __m512 acc[16];
    for (int i = 0; i < 16; i++) acc[i] = _mm512_setzero_ps();
    for (int i = 0; i < KB; i++) {
        if (i >= nk) break;
        const uint8_t *kr = a->k + (size_t)(j0 + i) * st;
        ka_prefetch(kr + KD_AHEAD * st, hd * es);
        for (int d = 0; d < hd; d += 16) {
            const __m512 kv = kd_load(kr + (size_t)d * es, f16);
            for (int r = 0; r < NR; r++)
                acc[i * NR + r] = _mm512_fmadd_ps(kv, _mm512_loadu_ps(qs + (size_t)r * hd + d), acc[i * NR + r]);
        }
    }
    _mm512_storeu_ps(s + (size_t)j0 * NR, kd_reduce16(acc));
}

/* o_r[d .. d + 16 DC) += sum_j p[NR j + r] V_j[d ..] for all r < nr */
static KZ_INLINE void kd_values(const cpu_attn_dec_job *a, const float *p, int d, const int DC, const int NR,
                                const int f16) {
    const int es = f16 ? 2 : 4, len = a->len;
    const size_t st = a->stride;
    __m512 acc[4][4];
    for (int r = 0; r < NR; r++)
        for (int c = 0; c < DC; c++) acc[r][c] = _mm512_setzero_ps();
    const uint8_t *vr = a->v + (size_t)d * es;
    for (int j = 0; j < len; j++, vr += st) {
        if (d == 0) ka_prefetch(vr + KD_AHEAD * st, a->hd * es);
        __m512 v[4];
        for (int c = 0; c < DC; c++) v[c] = kd_load(vr + (size_t)16 * c * es, f16);
        for (int r = 0; r < NR; r++) {
            const __m512 pb = _mm512_set1_ps(p[(size_t)NR * j + r]);
            for (int c = 0; c < DC; c++) acc[r][c] = _mm512_fmadd_ps(pb, v[c], acc[r][c]);
        }
    }
    for (int r = 0; r < NR && r < a->nr; r++)
        for (int c = 0; c < DC; c++) _mm512_storeu_ps(a->o[r] + d + 16 * c, acc[r][c]);
}

static KZ_INLINE void kd_attn(const cpu_attn_dec_job *a, const int NR, const int f16) {
    const int hd = a->hd, len = a->len, KB = 16 / NR, n = NR * len;
    float *s = a->s, *qs = s + (size_t)CPU_ATTN_DEC_ROWS * len + 32; /* scores, slack for a batch, then q */
    int biased = 0;
    for (int r = 0; r < NR; r++) {
        const int live = r < a->nr;
        biased |= live && a->bias[r];
        for (int d = 0; d < hd; d++) qs[(size_t)r * hd + d] = live ? a->q[r][d] * a->scale : 0.0f;
    }
    for (int j = 0; j < len; j += KB) kd_scores(a, qs, j, len - j < KB ? len - j : KB, s, NR, f16);
    if (biased)
        for (int r = 0; r < a->nr; r++)
            if (a->bias[r])
                for (int j = 0; j < len; j++) s[(size_t)NR * j + r] += a->bias[r][j];
    /* maxima per vector: lanes of one residue mod NR */
    __m512 mx = _mm512_set1_ps(-INFINITY);
    int i = 0;
    for (; i + 16 <= n; i += 16) mx = _mm512_max_ps(mx, _mm512_loadu_ps(s + i));
    const __mmask16 tail = (__mmask16)((1u << (n - i)) - 1);
    if (i < n) mx = _mm512_mask_max_ps(mx, tail, mx, _mm512_maskz_loadu_ps(tail, s + i));
    float lanes[16], m[CPU_ATTN_DEC_ROWS] = {0}, l[CPU_ATTN_DEC_ROWS] = {0};
    _mm512_storeu_ps(lanes, mx);
    for (int r = 0; r < NR; r++) {
        m[r] = -INFINITY;
        for (int t = r; t < 16; t += NR) m[r] = lanes[t] > m[r] ? lanes[t] : m[r];
    }
    for (int t = 0; t < 16; t++) lanes[t] = m[t % NR] == -INFINITY ? 0.0f : m[t % NR]; /* all hidden: l = 0 */
    const __m512 mv = _mm512_loadu_ps(lanes), ninf = _mm512_set1_ps(-INFINITY);
    __m512 sum = _mm512_setzero_ps();
    for (i = 0; i < n; i += 16) {
        const __mmask16 k = i + 16 <= n ? (__mmask16)0xFFFF : tail;
        const __m512 x = _mm512_maskz_loadu_ps(k, s + i);
        __m512 e = kx_exp16(_mm512_sub_ps(x, mv));
        /* a hidden key's -inf must give exactly 0, which kx_exp16 (clamped at -87.3) does not */
        e = _mm512_maskz_mov_ps(biased ? k & _mm512_cmp_ps_mask(x, ninf, _CMP_NEQ_OQ) : k, e);
        _mm512_mask_storeu_ps(s + i, k, e);
        sum = _mm512_add_ps(sum, e);
    }
    _mm512_storeu_ps(lanes, sum);
    for (int t = 0; t < 16; t++) l[t % NR] += lanes[t];
    for (int r = 0; r < a->nr && r < NR; r++) a->m[r] = m[r], a->l[r] = m[r] == -INFINITY ? 0.0f : l[r];
    int d = 0;
    for (; d + 64 <= hd; d += 64) kd_values(a, s, d, 4, NR, f16);
    if (hd - d == 48) kd_values(a, s, d, 3, NR, f16);
    else if (hd - d == 32) kd_values(a, s, d, 2, NR, f16);
    else if (hd - d == 16) kd_values(a, s, d, 1, NR, f16);
}

static KZ_TARGET void kd_attn1_f16(const cpu_attn_dec_job *a) { kd_attn(a, 1, 1); }
static KZ_TARGET void kd_attn2_f16(const cpu_attn_dec_job *a) { kd_attn(a, 2, 1); }
static KZ_TARGET void kd_attn4_f16(const cpu_attn_dec_job *a) { kd_attn(a, 4, 1); }
static KZ_TARGET void kd_attn1_f32(const cpu_attn_dec_job *a) { kd_attn(a, 1, 0); }
static KZ_TARGET void kd_attn2_f32(const cpu_attn_dec_job *a) { kd_attn(a, 2, 0); }
static KZ_TARGET void kd_attn4_f32(const cpu_attn_dec_job *a) { kd_attn(a, 4, 0); }

void cpu_attn_dec_avx512(const cpu_attn_dec_job *a) {
    if (a->hd % 16 != 0) {
        cpu_attn_dec_scalar(a);
        return;
    }
    if (a->f16) {
        if (a->nr == 1) kd_attn1_f16(a);
        else if (a->nr == 2) kd_attn2_f16(a);
        else kd_attn4_f16(a);
    } else {
        if (a->nr == 1) kd_attn1_f32(a);
        else if (a->nr == 2) kd_attn2_f32(a);
        else kd_attn4_f32(a);
    }
}
#else
typedef int cpu_kernels_attn_x86_unused; /* not x86: nothing to build */
#endif
