/*
 * kernels_x86.h - the 256-bit x86 SIMD dot products, written once and compiled
 * twice: by kernels_avx2.c (AVX2 + FMA + F16C) and by kernels_avx512.c (with
 * AVX-512 VNNI's fused byte/word dot instructions, 512-bit float kernels,
 * and 512-bit versions of the hottest integer kernels defined there; the
 * 256-bit ones still serve their tails and the other types). The including
 * file defines
 *   KX_TARGET   the function attribute naming the instruction sets,
 *   KX_VNNI     1 to use vpdpbusd / vpdpwssd,
 *   KX_AVX512   1 for 512-bit float kernels.
 * Everything here is static, private to that translation unit; kx_fill()
 * installs the kernels and the including file adds its own on top.
 *
 * How the integer kernels work. Weight quants are unpacked to bytes that are
 * unsigned (nibbles 0..15, Q5 0..31, Q6_K 0..63, Q2/Q3_K 0..3 / 0..7) and
 * multiplied with the signed int8 activations by vpmaddubsw (or vpdpbusd),
 * so the weight's zero point is not subtracted per element but once per
 * block from the activation sum: sum((q - z) y) = sum(q y) - z sum(y). For
 * the K-quants, sum(y) per 16 is Q8_K's bsums, so that correction, and the
 * min term, cost one vpmaddwd per super-block. Sub-block scales multiply the
 * 16-bit pair sums through vpmaddwd before everything is added as int32;
 * the float multiply by the block scales happens once per block (32-element
 * types, with the scales of 8 blocks converted at once) or super-block.
 * Weights stream from memory once per matmul, so each loop prefetches
 * KX_PREFETCH bytes ahead: the hardware prefetcher alone leaves the core
 * waiting on DRAM for part of every row.
 * Products stay in range: 63 * 127 * 2 < 32767 for vpmaddubsw's saturating
 * pairs; Q8_0 weights go through |w| and sign(y, w) (|-128| is 128 unsigned).
 * Every dot product is one always-inlined loop over NR activation rows
 * (KX_ROWS_ENTRY): `dot` is its NR = 1 instance and `dot_rows` runs the
 * NR = 1..4 ones, so row t of a dot_rows pass gets `dot`'s bits (kernels.h).
 */
#include "backend/cpu/kernels_impl.h"
#include "core/dtype.h"
#include "core/quant.h"
#include "core/quant_impl.h"

#include <immintrin.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* ---- helpers ---- */

static KX_TARGET inline __m256i kx_load(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }

static KX_TARGET inline float kx_hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static KX_TARGET inline float kx_f16(const uint8_t *p) { return _cvtsh_ss(quant_rd16(p)); }

/* sum over groups of 4 bytes of u * s (u unsigned, s signed): 8 x int32 */
static KX_TARGET inline __m256i kx_dot_us(__m256i u, __m256i s) {
#if KX_VNNI
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
#else
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
#endif
}

/* acc + pairwise a * b of int16 lanes, as int32 */
static KX_TARGET inline __m256i kx_madd_acc(__m256i acc, __m256i a, __m256i b) {
#if KX_VNNI
    return _mm256_dpwssd_epi32(acc, a, b);
#else
    return _mm256_add_epi32(acc, _mm256_madd_epi16(a, b));
#endif
}

/* 16 bytes of nibbles -> 32 bytes: low nibbles then high nibbles. */
static KX_TARGET inline __m256i kx_nibbles(const uint8_t *p) {
    const __m256i v = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)p));
    return _mm256_and_si256(_mm256_srlv_epi64(v, _mm256_setr_epi64x(0, 0, 4, 4)), _mm256_set1_epi8(0x0f));
}

/* 32 bits -> 32 bytes, byte j = 0xff where bit j is set. */
static KX_TARGET inline __m256i kx_bits_to_bytes(uint32_t bits) {
    const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3,
                                            3, 3, 3, 3, 3, 3, 3);
    const __m256i sel = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)bits), spread);
    return _mm256_cmpeq_epi8(_mm256_and_si256(v, sel), sel);
}

/* 8 fp16 values at byte stride s, as 8 floats (the scales of 8 blocks). */
static KX_TARGET inline __m256 kx_f16x8(const uint8_t *p, int s) {
    return _mm256_cvtph_ps(_mm_setr_epi16((short)quant_rd16(p), (short)quant_rd16(p + s), (short)quant_rd16(p + 2 * s),
                                          (short)quant_rd16(p + 3 * s), (short)quant_rd16(p + 4 * s),
                                          (short)quant_rd16(p + 5 * s), (short)quant_rd16(p + 6 * s),
                                          (short)quant_rd16(p + 7 * s)));
}

#ifndef KX_PREFETCH
#define KX_PREFETCH 2048
#endif
/* Prefetches the `bytes` bytes at p + KX_PREFETCH (a prefetch never faults). */
#define KX_PREFETCH_RANGE(p, bytes)                                                                                    \
    for (int pf_ = 0; pf_ < (int)(bytes); pf_ += 64)                                                                   \
    _mm_prefetch((const char *)(p) + KX_PREFETCH + pf_, _MM_HINT_T0)

/* Q4_K / Q5_K packed scales (12 bytes at s, 16 read) -> bytes [8 scales | 8 mins],
 * the SIMD form of quant_k4_unpack. */
static KX_TARGET inline __m128i kx_k4_unpack(const uint8_t *s) {
    const __m128i v = _mm_loadu_si128((const __m128i *)s);    /* dwords u0 u1 u2 (u3 unused) */
    const __m128i lo = _mm_and_si128(v, _mm_set1_epi8(0x3f)); /* [sc 0..3, mn 0..3] */
    const __m128i u2 = _mm_srlv_epi32(_mm_shuffle_epi32(v, 0x0a), _mm_setr_epi32(0, 4, 0, 0));
    const __m128i top = _mm_slli_epi32(_mm_and_si128(_mm_srli_epi32(v, 6), _mm_set1_epi8(0x03)), 4);
    const __m128i hi = _mm_or_si128(_mm_and_si128(u2, _mm_set1_epi8(0x0f)), top); /* [sc 4..7, mn 4..7] */
    return _mm_unpacklo_epi32(lo, hi);
}

/* The 16 Q3_K scales (12 bytes at s, see quant_q3k_scales) as int8, bias removed. */
static KX_TARGET inline __m128i kx_q3k_scales(const uint8_t *s) {
    const __m128i v = _mm_loadl_epi64((const __m128i *)s);
    const __m128i m4 = _mm_set1_epi8(0x0f);
    /* bits 0..3: low nibbles of bytes 0..7 for scales 0..7, high nibbles for 8..15 */
    const __m128i lo = _mm_unpacklo_epi64(_mm_and_si128(v, m4), _mm_and_si128(_mm_srli_epi16(v, 4), m4));
    /* bits 4..5 of scale j: byte 8 + j % 4 of s, shifted by 2 (j / 4) */
    const __m128i u2 = _mm_set1_epi32((int)quant_rd32(s + 8));
    const __m128i hi = _mm_and_si128(_mm_srlv_epi32(u2, _mm_setr_epi32(0, 2, 4, 6)), _mm_set1_epi8(3));
    return _mm_sub_epi8(_mm_or_si128(lo, _mm_slli_epi16(hi, 4)), _mm_set1_epi8(32));
}

/* Lane k of v in all lanes. */
static KX_TARGET inline __m256 kx_lane(__m256 v, int k) { return _mm256_permutevar8x32_ps(v, _mm256_set1_epi32(k)); }

/* ---- float weights ----
 * Each dot product is written once as kx_rows_<type>(..., NR, out): `dot`'s
 * loop over the weight row with NR sets of accumulators, each loaded weight
 * vector meeting the NR activation rows in turn. NR is a constant where it
 * is inlined (KX_ROWS_ENTRY), so the NR = 1 instance is the plain `dot`, and
 * row t of any instance does the same float operations in the same order as
 * that one: the bit-for-bit identity dot_rows promises (kernels.h). */

#define KX_INLINE static KX_TARGET inline __attribute__((always_inline))

/* The `dot` (NAME) and `dot_rows` (NAME##_rows) entries of kx_rows-style ROWS:
 * passes of up to CPU_DOT_ROWS rows, each an instance with a constant NR. */
#define KX_ROWS_ENTRY(NAME, ROWS)                                                                                      \
    static KX_TARGET float NAME(int64_t n, const void *w, const void *x) {                                             \
        float o;                                                                                                       \
        ROWS(n, w, x, 0, 1, &o);                                                                                       \
        return o;                                                                                                      \
    }                                                                                                                  \
    static KX_TARGET void NAME##_rows(int64_t n, const void *w, const void *xv, size_t xs, int nr, float *out) {      \
        const uint8_t *x = xv;                                                                                         \
        for (; nr > 0; nr -= CPU_DOT_ROWS, x += CPU_DOT_ROWS * xs, out += CPU_DOT_ROWS) {                             \
            switch (nr) {                                                                                              \
            case 1: ROWS(n, w, x, xs, 1, out); break;                                                                  \
            case 2: ROWS(n, w, x, xs, 2, out); break;                                                                  \
            case 3: ROWS(n, w, x, xs, 3, out); break;                                                                  \
            default: ROWS(n, w, x, xs, 4, out); break;                                                                 \
            }                                                                                                          \
        }                                                                                                              \
    }

/* Activation row t of a dot_rows call. */
#define KX_XROW(x, xs, t) ((const uint8_t *)(x) + (size_t)(t) * (xs))

#if KX_AVX512
KX_INLINE void kx_rows_f32(int64_t n, const void *wv, const void *xv, size_t xs, const int NR, float *out) {
    const float *w = wv;
    __m512 a0[CPU_DOT_ROWS], a1[CPU_DOT_ROWS], a2[CPU_DOT_ROWS], a3[CPU_DOT_ROWS];
    for (int t = 0; t < NR; t++) a0[t] = a1[t] = a2[t] = a3[t] = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        KX_PREFETCH_RANGE(w + i, 64 * 4);
        const __m512 w0 = _mm512_loadu_ps(w + i), w1 = _mm512_loadu_ps(w + i + 16);
        const __m512 w2 = _mm512_loadu_ps(w + i + 32), w3 = _mm512_loadu_ps(w + i + 48);
        for (int t = 0; t < NR; t++) {
            const float *x = (const float *)KX_XROW(xv, xs, t);
            a0[t] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x + i), a0[t]);
            a1[t] = _mm512_fmadd_ps(w1, _mm512_loadu_ps(x + i + 16), a1[t]);
            a2[t] = _mm512_fmadd_ps(w2, _mm512_loadu_ps(x + i + 32), a2[t]);
            a3[t] = _mm512_fmadd_ps(w3, _mm512_loadu_ps(x + i + 48), a3[t]);
        }
    }
    for (; i + 16 <= n; i += 16) {
        const __m512 w0 = _mm512_loadu_ps(w + i);
        for (int t = 0; t < NR; t++)
            a0[t] = _mm512_fmadd_ps(w0, _mm512_loadu_ps((const float *)KX_XROW(xv, xs, t) + i), a0[t]);
    }
    for (int t = 0; t < NR; t++) {
        const float *x = (const float *)KX_XROW(xv, xs, t);
        float sum = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0[t], a1[t]), _mm512_add_ps(a2[t], a3[t])));
        for (int64_t j = i; j < n; j++)
            sum += w[j] * x[j];
        out[t] = sum;
    }
}

KX_INLINE void kx_rows_f16(int64_t n, const void *wv, const void *xv, size_t xs, const int NR, float *out) {
    const uint8_t *w = wv;
    __m512 a0[CPU_DOT_ROWS], a1[CPU_DOT_ROWS], a2[CPU_DOT_ROWS], a3[CPU_DOT_ROWS];
    for (int t = 0; t < NR; t++) a0[t] = a1[t] = a2[t] = a3[t] = _mm512_setzero_ps();
    int64_t i = 0;
#define KX_H(k) _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(w + 2 * (i + (k)))))
    for (; i + 64 <= n; i += 64) {
        KX_PREFETCH_RANGE(w + 2 * i, 64 * 2);
        const __m512 w0 = KX_H(0), w1 = KX_H(16), w2 = KX_H(32), w3 = KX_H(48);
        for (int t = 0; t < NR; t++) {
            const float *x = (const float *)KX_XROW(xv, xs, t);
            a0[t] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x + i), a0[t]);
            a1[t] = _mm512_fmadd_ps(w1, _mm512_loadu_ps(x + i + 16), a1[t]);
            a2[t] = _mm512_fmadd_ps(w2, _mm512_loadu_ps(x + i + 32), a2[t]);
            a3[t] = _mm512_fmadd_ps(w3, _mm512_loadu_ps(x + i + 48), a3[t]);
        }
    }
    for (; i + 16 <= n; i += 16) {
        const __m512 w0 = KX_H(0);
        for (int t = 0; t < NR; t++)
            a0[t] = _mm512_fmadd_ps(w0, _mm512_loadu_ps((const float *)KX_XROW(xv, xs, t) + i), a0[t]);
    }
#undef KX_H
    for (int t = 0; t < NR; t++) {
        const float *x = (const float *)KX_XROW(xv, xs, t);
        float sum = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0[t], a1[t]), _mm512_add_ps(a2[t], a3[t])));
        for (int64_t j = i; j < n; j++)
            sum += kx_f16(w + 2 * j) * x[j];
        out[t] = sum;
    }
}

KX_INLINE void kx_rows_bf16(int64_t n, const void *wv, const void *xv, size_t xs, const int NR, float *out) {
    const uint8_t *w = wv;
    __m512 a0[CPU_DOT_ROWS], a1[CPU_DOT_ROWS];
    for (int t = 0; t < NR; t++) a0[t] = a1[t] = _mm512_setzero_ps();
    int64_t i = 0;
#define KX_B(k)                                                                                                        \
    _mm512_castsi512_ps(                                                                                               \
        _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(w + 2 * (i + (k))))), 16))
    for (; i + 32 <= n; i += 32) {
        KX_PREFETCH_RANGE(w + 2 * i, 32 * 2);
        const __m512 w0 = KX_B(0), w1 = KX_B(16);
        for (int t = 0; t < NR; t++) {
            const float *x = (const float *)KX_XROW(xv, xs, t);
            a0[t] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x + i), a0[t]);
            a1[t] = _mm512_fmadd_ps(w1, _mm512_loadu_ps(x + i + 16), a1[t]);
        }
    }
    for (; i + 16 <= n; i += 16) {
        const __m512 w0 = KX_B(0);
        for (int t = 0; t < NR; t++)
            a0[t] = _mm512_fmadd_ps(w0, _mm512_loadu_ps((const float *)KX_XROW(xv, xs, t) + i), a0[t]);
    }
#undef KX_B
    for (int t = 0; t < NR; t++) {
        const float *x = (const float *)KX_XROW(xv, xs, t);
        float sum = _mm512_reduce_add_ps(_mm512_add_ps(a0[t], a1[t]));
        for (int64_t j = i; j < n; j++)
            sum += wgml_bf16_to_f32(quant_rd16(w + 2 * j)) * x[j];
        out[t] = sum;
    }
}
#else
KX_INLINE void kx_rows_f32(int64_t n, const void *wv, const void *xv, size_t xs, const int NR, float *out) {
    const float *w = wv;
    __m256 a0[CPU_DOT_ROWS], a1[CPU_DOT_ROWS], a2[CPU_DOT_ROWS], a3[CPU_DOT_ROWS];
    for (int t = 0; t < NR; t++) a0[t] = a1[t] = a2[t] = a3[t] = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        KX_PREFETCH_RANGE(w + i, 32 * 4);
        const __m256 w0 = _mm256_loadu_ps(w + i), w1 = _mm256_loadu_ps(w + i + 8);
        const __m256 w2 = _mm256_loadu_ps(w + i + 16), w3 = _mm256_loadu_ps(w + i + 24);
        for (int t = 0; t < NR; t++) {
            const float *x = (const float *)KX_XROW(xv, xs, t);
            a0[t] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + i), a0[t]);
            a1[t] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x + i + 8), a1[t]);
            a2[t] = _mm256_fmadd_ps(w2, _mm256_loadu_ps(x + i + 16), a2[t]);
            a3[t] = _mm256_fmadd_ps(w3, _mm256_loadu_ps(x + i + 24), a3[t]);
        }
    }
    for (; i + 8 <= n; i += 8) {
        const __m256 w0 = _mm256_loadu_ps(w + i);
        for (int t = 0; t < NR; t++)
            a0[t] = _mm256_fmadd_ps(w0, _mm256_loadu_ps((const float *)KX_XROW(xv, xs, t) + i), a0[t]);
    }
    for (int t = 0; t < NR; t++) {
        const float *x = (const float *)KX_XROW(xv, xs, t);
        float sum = kx_hsum(_mm256_add_ps(_mm256_add_ps(a0[t], a1[t]), _mm256_add_ps(a2[t], a3[t])));
        for (int64_t j = i; j < n; j++)
            sum += w[j] * x[j];
        out[t] = sum;
    }
}

KX_INLINE void kx_rows_f16(int64_t n, const void *wv, const void *xv, size_t xs, const int NR, float *out) {
    const uint8_t *w = wv;
    __m256 a0[CPU_DOT_ROWS], a1[CPU_DOT_ROWS], a2[CPU_DOT_ROWS], a3[CPU_DOT_ROWS];
    for (int t = 0; t < NR; t++) a0[t] = a1[t] = a2[t] = a3[t] = _mm256_setzero_ps();
    int64_t i = 0;
#define KX_H(k) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w + 2 * (i + (k)))))
    for (; i + 32 <= n; i += 32) {
        KX_PREFETCH_RANGE(w + 2 * i, 32 * 2);
        const __m256 w0 = KX_H(0), w1 = KX_H(8), w2 = KX_H(16), w3 = KX_H(24);
        for (int t = 0; t < NR; t++) {
            const float *x = (const float *)KX_XROW(xv, xs, t);
            a0[t] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + i), a0[t]);
            a1[t] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x + i + 8), a1[t]);
            a2[t] = _mm256_fmadd_ps(w2, _mm256_loadu_ps(x + i + 16), a2[t]);
            a3[t] = _mm256_fmadd_ps(w3, _mm256_loadu_ps(x + i + 24), a3[t]);
        }
    }
    for (; i + 8 <= n; i += 8) {
        const __m256 w0 = KX_H(0);
        for (int t = 0; t < NR; t++)
            a0[t] = _mm256_fmadd_ps(w0, _mm256_loadu_ps((const float *)KX_XROW(xv, xs, t) + i), a0[t]);
    }
#undef KX_H
    for (int t = 0; t < NR; t++) {
        const float *x = (const float *)KX_XROW(xv, xs, t);
        float sum = kx_hsum(_mm256_add_ps(_mm256_add_ps(a0[t], a1[t]), _mm256_add_ps(a2[t], a3[t])));
        for (int64_t j = i; j < n; j++)
            sum += kx_f16(w + 2 * j) * x[j];
        out[t] = sum;
    }
}

KX_INLINE void kx_rows_bf16(int64_t n, const void *wv, const void *xv, size_t xs, const int NR, float *out) {
    const uint8_t *w = wv;
    __m256 a0[CPU_DOT_ROWS], a1[CPU_DOT_ROWS];
    for (int t = 0; t < NR; t++) a0[t] = a1[t] = _mm256_setzero_ps();
    int64_t i = 0;
#define KX_B(k)                                                                                                        \
    _mm256_castsi256_ps(                                                                                               \
        _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(w + 2 * (i + (k))))), 16))
    for (; i + 16 <= n; i += 16) {
        KX_PREFETCH_RANGE(w + 2 * i, 16 * 2);
        const __m256 w0 = KX_B(0), w1 = KX_B(8);
        for (int t = 0; t < NR; t++) {
            const float *x = (const float *)KX_XROW(xv, xs, t);
            a0[t] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + i), a0[t]);
            a1[t] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x + i + 8), a1[t]);
        }
    }
    for (; i + 8 <= n; i += 8) {
        const __m256 w0 = KX_B(0);
        for (int t = 0; t < NR; t++)
            a0[t] = _mm256_fmadd_ps(w0, _mm256_loadu_ps((const float *)KX_XROW(xv, xs, t) + i), a0[t]);
    }
#undef KX_B
    for (int t = 0; t < NR; t++) {
        const float *x = (const float *)KX_XROW(xv, xs, t);
        float sum = kx_hsum(_mm256_add_ps(a0[t], a1[t]));
        for (int64_t j = i; j < n; j++)
            sum += wgml_bf16_to_f32(quant_rd16(w + 2 * j)) * x[j];
        out[t] = sum;
    }
}
#endif
KX_ROWS_ENTRY(kx_dot_f32, kx_rows_f32)
KX_ROWS_ENTRY(kx_dot_f16, kx_rows_f16)
KX_ROWS_ENTRY(kx_dot_bf16, kx_rows_bf16)

/* F16C conversion is exact, so this equals the reference decoder. */
static KX_TARGET void kx_to_float_f16(const void *src, float *dst, int64_t n) {
    const uint8_t *s = src;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + 2 * i))));
    for (; i < n; i++)
        dst[i] = kx_f16(s + 2 * i);
}

/* ---- 32-element blocks: groups of 8 blocks share one scale conversion ----
 * Per type: kx_<t>_w, a weight block's quants as 32 bytes (decoded once for
 * all rows of a dot_rows call), and kx_<t>_p, their 8 int32 partial sums
 * against one activation block; kx_<t>_block is the two together. */

/* Q4_0: nibbles 0..15, zero point 8: sum((q - 8) y). */
static KX_TARGET inline __m256i kx_q4_0_w(const uint8_t *w) { return kx_nibbles(w + offsetof(block_q4_0, qs)); }
static KX_TARGET inline __m256i kx_q4_0_p(__m256i q, const uint8_t *x) {
    const __m256i y = kx_load(x + offsetof(block_q8_0, qs));
#if KX_VNNI
    return _mm256_sub_epi32(kx_dot_us(q, y), kx_dot_us(_mm256_set1_epi8(8), y));
#else
    const __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(q, y), _mm256_maddubs_epi16(_mm256_set1_epi8(8), y));
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
#endif
}

/* The 5-bit quants of a Q5 block as 32 bytes. */
static KX_TARGET inline __m256i kx_q5_bytes(const uint8_t *qh, const uint8_t *qs) {
    const __m256i hi = _mm256_and_si256(kx_bits_to_bytes(quant_rd32(qh)), _mm256_set1_epi8(0x10));
    return _mm256_or_si256(kx_nibbles(qs), hi);
}

static KX_TARGET inline __m256i kx_q5_0_w(const uint8_t *w) {
    return kx_q5_bytes(w + offsetof(block_q5_0, qh), w + offsetof(block_q5_0, qs));
}
static KX_TARGET inline __m256i kx_q5_0_p(__m256i q, const uint8_t *x) {
    const __m256i y = kx_load(x + offsetof(block_q8_0, qs));
#if KX_VNNI
    return _mm256_sub_epi32(kx_dot_us(q, y), kx_dot_us(_mm256_set1_epi8(16), y));
#else
    const __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(q, y), _mm256_maddubs_epi16(_mm256_set1_epi8(16), y));
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
#endif
}

static KX_TARGET inline __m256i kx_q8_0_w(const uint8_t *w) { return kx_load(w + offsetof(block_q8_0, qs)); }
static KX_TARGET inline __m256i kx_q8_0_p(__m256i q, const uint8_t *x) {
    const __m256i y = kx_load(x + offsetof(block_q8_0, qs));
    return kx_dot_us(_mm256_abs_epi8(q), _mm256_sign_epi8(y, q));
}

static KX_TARGET inline __m256i kx_q4_1_w(const uint8_t *w) { return kx_nibbles(w + offsetof(block_q4_1, qs)); }
static KX_TARGET inline __m256i kx_q4_1_p(__m256i q, const uint8_t *x) {
    return kx_dot_us(q, kx_load(x + offsetof(block_q8_1, qs)));
}

static KX_TARGET inline __m256i kx_q5_1_w(const uint8_t *w) {
    return kx_q5_bytes(w + offsetof(block_q5_1, qh), w + offsetof(block_q5_1, qs));
}
static KX_TARGET inline __m256i kx_q5_1_p(__m256i q, const uint8_t *x) { return kx_q4_1_p(q, x); }

static KX_TARGET inline __m256i kx_q4_0_block(const uint8_t *w, const uint8_t *x) { return kx_q4_0_p(kx_q4_0_w(w), x); }
static KX_TARGET inline __m256i kx_q5_0_block(const uint8_t *w, const uint8_t *x) { return kx_q5_0_p(kx_q5_0_w(w), x); }
static KX_TARGET inline __m256i kx_q8_0_block(const uint8_t *w, const uint8_t *x) { return kx_q8_0_p(kx_q8_0_w(w), x); }
static KX_TARGET inline __m256i kx_q4_1_block(const uint8_t *w, const uint8_t *x) { return kx_q4_1_p(kx_q4_1_w(w), x); }
static KX_TARGET inline __m256i kx_q5_1_block(const uint8_t *w, const uint8_t *x) { return kx_q5_1_p(kx_q5_1_w(w), x); }

/*
 * One loop for all 32-element types: WSZ/XSZ are the block sizes, T the
 * type's kx_<T>_w / kx_<T>_p pair. Eight blocks per step: their 16 fp16
 * scales are converted together, then lane k of the products scales block
 * k. With MINS (the Q8_1 pairing) m_w * s_x is added per block (both fp16
 * at byte offset 2). Rows of a dot_rows call each keep their own acc, accm
 * and tail.
 */
#define KX_DOT32(name, WSZ, XSZ, T, MINS)                                                                              \
    KX_INLINE void name##_r(int64_t n, const void *wv, const void *xv, size_t xst, const int NR, float *out) {         \
        const uint8_t *w = wv;                                                                                         \
        const int64_t nb = n / 32;                                                                                     \
        const int ws = (int)(WSZ), xs = (int)(XSZ);                                                                    \
        __m256 acc[CPU_DOT_ROWS][4], accm[CPU_DOT_ROWS];                                                               \
        float tail[CPU_DOT_ROWS];                                                                                      \
        for (int t = 0; t < NR; t++) {                                                                                 \
            for (int k = 0; k < 4; k++) acc[t][k] = _mm256_setzero_ps();                                               \
            accm[t] = _mm256_setzero_ps();                                                                             \
            tail[t] = 0;                                                                                               \
        }                                                                                                              \
        int64_t b = 0;                                                                                                 \
        for (; b + 8 <= nb; b += 8) {                                                                                  \
            const uint8_t *wb = w + b * ws;                                                                            \
            KX_PREFETCH_RANGE(wb, 8 * (WSZ));                                                                          \
            const __m256 dw = kx_f16x8(wb, ws);                                                                        \
            __m256 d[CPU_DOT_ROWS];                                                                                    \
            for (int t = 0; t < NR; t++) d[t] = _mm256_mul_ps(dw, kx_f16x8(KX_XROW(xv, xst, t) + b * xs, xs));         \
            for (int k = 0; k < 8; k++) {                                                                              \
                const __m256i q = kx_##T##_w(wb + k * ws);                                                             \
                for (int t = 0; t < NR; t++) {                                                                         \
                    const __m256i p = kx_##T##_p(q, KX_XROW(xv, xst, t) + (b + k) * xs);                               \
                    acc[t][k % 4] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), kx_lane(d[t], k), acc[t][k % 4]);           \
                }                                                                                                      \
            }                                                                                                          \
            if (MINS) {                                                                                                \
                const __m256 mw = kx_f16x8(wb + 2, ws);                                                                \
                for (int t = 0; t < NR; t++)                                                                           \
                    accm[t] = _mm256_fmadd_ps(mw, kx_f16x8(KX_XROW(xv, xst, t) + b * xs + 2, xs), accm[t]);            \
            }                                                                                                          \
        }                                                                                                              \
        for (; b < nb; b++) {                                                                                          \
            const uint8_t *wb = w + b * ws;                                                                            \
            const __m256i q = kx_##T##_w(wb);                                                                          \
            for (int t = 0; t < NR; t++) {                                                                             \
                const uint8_t *xb = KX_XROW(xv, xst, t) + b * xs;                                                      \
                const __m256 d = _mm256_set1_ps(kx_f16(wb) * kx_f16(xb));                                              \
                acc[t][0] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(kx_##T##_p(q, xb)), d, acc[t][0]);                      \
                if (MINS) tail[t] += kx_f16(wb + 2) * kx_f16(xb + 2);                                                  \
            }                                                                                                          \
        }                                                                                                              \
        for (int t = 0; t < NR; t++) {                                                                                 \
            const __m256 all = _mm256_add_ps(_mm256_add_ps(acc[t][0], acc[t][1]), _mm256_add_ps(acc[t][2], acc[t][3])); \
            out[t] = kx_hsum(_mm256_add_ps(all, accm[t])) + tail[t];                                                   \
        }                                                                                                              \
    }                                                                                                                  \
    KX_ROWS_ENTRY(name, name##_r)

KX_DOT32(kx_dot_q4_0, sizeof(block_q4_0), sizeof(block_q8_0), q4_0, 0)
KX_DOT32(kx_dot_q5_0, sizeof(block_q5_0), sizeof(block_q8_0), q5_0, 0)
KX_DOT32(kx_dot_q8_0, sizeof(block_q8_0), sizeof(block_q8_0), q8_0, 0)
KX_DOT32(kx_dot_q4_1, sizeof(block_q4_1), sizeof(block_q8_1), q4_1, 1)
KX_DOT32(kx_dot_q5_1, sizeof(block_q5_1), sizeof(block_q8_1), q5_1, 1)

/* ---- K-quants against Q8_K ---- */

#define KX_Y(x)     ((x) + offsetof(block_q8_K, qs))
#define KX_BSUMS(x) kx_load((x) + offsetof(block_q8_K, bsums))

/* int16 lanes of v all equal to int16 lane j of v's 128-bit half. */
static KX_TARGET inline __m256i kx_bcast16(__m256i v, int j) {
    return _mm256_shuffle_epi8(v, _mm256_set1_epi16((short)(((2 * j + 1) << 8) | (2 * j))));
}

/* 16 per-sub-block int8 scales as int16 arranged for the 2-plane layouts
 * (Q2_K, Q3_K, Q6_K): a group of 32 elements covers sub-blocks 2m (its int16
 * pair sums 0..7, the low half) and 2m + 1 (the high half), so the low half
 * holds the even scales and the high half the odd ones; lane m of each half
 * is the pair for group m. */
static KX_TARGET inline __m256i kx_scales_even_odd(__m128i s8, int is_signed) {
    const __m128i eo = _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
    const __m128i v = _mm_shuffle_epi8(s8, eo);
    return is_signed ? _mm256_cvtepi8_epi16(v) : _mm256_cvtepu8_epi16(v);
}

static KX_TARGET inline __m256 kx_fma_i32(__m256i v, float s, __m256 acc) {
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(v), _mm256_set1_ps(s), acc);
}

/* The K-quant kernels, each `dot`'s loop with per-row accumulators (see the
 * float kernels): a super-block's scales and quants are unpacked once, then
 * meet the NR activation blocks in turn. */

/* Activation block b of row t (Q8_K). */
#define KX_XBLK(t, b) (KX_XROW(xv, xst, t) + (b) * sizeof(block_q8_K))

KX_INLINE void kx_rows_q2_k(int64_t n, const void *wv, const void *xv, size_t xst, const int NR, float *out) {
    const uint8_t *w = wv;
    const __m256i m3 = _mm256_set1_epi8(3);
    __m256 acc[CPU_DOT_ROWS], accm[CPU_DOT_ROWS];
    for (int t = 0; t < NR; t++) acc[t] = accm[t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / QK_K; b++, w += sizeof(block_q2_K)) {
        KX_PREFETCH_RANGE(w, sizeof(block_q2_K));
        const __m128i sc8 = _mm_loadu_si128((const __m128i *)(w + offsetof(block_q2_K, scales)));
        const __m256i mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sc8, 4), _mm_set1_epi8(0x0f)));
        const __m256i sc = kx_scales_even_odd(_mm_and_si128(sc8, _mm_set1_epi8(0x0f)), 0);
        const uint8_t *qs = w + offsetof(block_q2_K, qs);
        __m256i isum[CPU_DOT_ROWS];
        for (int t = 0; t < NR; t++) isum[t] = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++) {
            const __m256i q = kx_load(qs + 32 * h);
            for (int p = 0; p < 4; p++) {
                const __m256i u = _mm256_and_si256(_mm256_srli_epi16(q, 2 * p), m3);
                const __m256i s = kx_bcast16(sc, 4 * h + p);
                for (int t = 0; t < NR; t++)
                    isum[t] = kx_madd_acc(isum[t], _mm256_maddubs_epi16(u, kx_load(KX_Y(KX_XBLK(t, b)) + 128 * h + 32 * p)), s);
            }
        }
        const float dw = kx_f16(w + offsetof(block_q2_K, d)), dmw = kx_f16(w + offsetof(block_q2_K, dmin));
        for (int t = 0; t < NR; t++) {
            const uint8_t *x = KX_XBLK(t, b);
            const float dy = quant_rd_f32(x);
            const __m256i msum = _mm256_madd_epi16(KX_BSUMS(x), mins);
            acc[t] = kx_fma_i32(isum[t], dy * dw, acc[t]);
            accm[t] = kx_fma_i32(msum, dy * dmw, accm[t]);
        }
    }
    for (int t = 0; t < NR; t++) out[t] = kx_hsum(_mm256_sub_ps(acc[t], accm[t]));
}

KX_INLINE void kx_rows_q3_k(int64_t n, const void *wv, const void *xv, size_t xst, const int NR, float *out) {
    const uint8_t *w = wv;
    const __m256i m3 = _mm256_set1_epi8(3), four = _mm256_set1_epi8(4);
    __m256 acc[CPU_DOT_ROWS];
    for (int t = 0; t < NR; t++) acc[t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / QK_K; b++, w += sizeof(block_q3_K)) {
        KX_PREFETCH_RANGE(w, sizeof(block_q3_K));
        const __m128i sc8 = kx_q3k_scales(w + offsetof(block_q3_K, scales));
        const __m256i sc = kx_scales_even_odd(sc8, 1), sc16 = _mm256_cvtepi8_epi16(sc8);
        const __m256i hm = kx_load(w + offsetof(block_q3_K, hmask));
        const uint8_t *qs = w + offsetof(block_q3_K, qs);
        __m256i isum[CPU_DOT_ROWS];
        for (int t = 0; t < NR; t++) isum[t] = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++) {
            const __m256i q = kx_load(qs + 32 * h);
            for (int p = 0; p < 4; p++) {
                /* quants are u - 4 with u = 2 low bits | hmask bit << 2 */
                const __m256i bit = _mm256_set1_epi8((char)(1 << (4 * h + p)));
                const __m256i hb = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hm, bit), bit), four);
                const __m256i u = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 2 * p), m3), hb);
                const __m256i s = kx_bcast16(sc, 4 * h + p);
                for (int t = 0; t < NR; t++)
                    isum[t] = kx_madd_acc(isum[t], _mm256_maddubs_epi16(u, kx_load(KX_Y(KX_XBLK(t, b)) + 128 * h + 32 * p)), s);
            }
        }
        const float dw = kx_f16(w + offsetof(block_q3_K, d));
        for (int t = 0; t < NR; t++) {
            const uint8_t *x = KX_XBLK(t, b);
            const __m256i off = _mm256_madd_epi16(KX_BSUMS(x), sc16);
            acc[t] = kx_fma_i32(_mm256_sub_epi32(isum[t], _mm256_slli_epi32(off, 2)), quant_rd_f32(x) * dw, acc[t]);
        }
    }
    for (int t = 0; t < NR; t++) out[t] = kx_hsum(acc[t]);
}

/* Q4_K / Q5_K: the 8 sub-block scales as int16 in both halves, and the 8 mins
 * as int16 pairs (m_j twice, for bsums 2j and 2j + 1). */
static KX_TARGET inline __m256i kx_k4_scales(const uint8_t *s, __m256i *mins) {
    const __m128i scm = kx_k4_unpack(s);
    const __m128i mn = _mm_unpackhi_epi64(scm, scm);
    *mins = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(mn, mn));
    return _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(scm));
}

/* Q4_K, and Q5_K with `five` (its fifth bits in qh). */
KX_INLINE void kx_rows_q45_k(int64_t n, const uint8_t *w, const void *xv, size_t xst, int five, const int NR,
                             float *out) {
    const size_t bs = five ? sizeof(block_q5_K) : sizeof(block_q4_K);
    const size_t qs_off = five ? offsetof(block_q5_K, qs) : offsetof(block_q4_K, qs);
    const __m256i m4 = _mm256_set1_epi8(0x0f), b4 = _mm256_set1_epi8(0x10);
    __m256 acc[CPU_DOT_ROWS], accm[CPU_DOT_ROWS];
    for (int t = 0; t < NR; t++) acc[t] = accm[t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / QK_K; b++, w += bs) {
        KX_PREFETCH_RANGE(w, bs);
        __m256i mins;
        const __m256i sc = kx_k4_scales(w + offsetof(block_q4_K, scales), &mins);
        const uint8_t *qs = w + qs_off;
        const __m256i qh = five ? kx_load(w + offsetof(block_q5_K, qh)) : _mm256_setzero_si256();
        __m256i isum[CPU_DOT_ROWS];
        for (int t = 0; t < NR; t++) isum[t] = _mm256_setzero_si256();
        for (int k = 0; k < 4; k++) {
            const __m256i q = kx_load(qs + 32 * k);
            __m256i lo = _mm256_and_si256(q, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
            if (five) { /* fifth bits of sub-blocks 2k and 2k+1 moved to bit 4 */
                const __m256i h = _mm256_srli_epi16(qh, 2 * k);
                lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_slli_epi16(h, 4), b4));
                hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_slli_epi16(h, 3), b4));
            }
            const __m256i s0 = kx_bcast16(sc, 2 * k), s1 = kx_bcast16(sc, 2 * k + 1);
            for (int t = 0; t < NR; t++) {
                const uint8_t *y = KX_Y(KX_XBLK(t, b));
                isum[t] = kx_madd_acc(isum[t], _mm256_maddubs_epi16(lo, kx_load(y + 64 * k)), s0);
                isum[t] = kx_madd_acc(isum[t], _mm256_maddubs_epi16(hi, kx_load(y + 64 * k + 32)), s1);
            }
        }
        const float dw = kx_f16(w + offsetof(block_q4_K, d)), dmw = kx_f16(w + offsetof(block_q4_K, dmin));
        for (int t = 0; t < NR; t++) {
            const uint8_t *x = KX_XBLK(t, b);
            const float dy = quant_rd_f32(x);
            acc[t] = kx_fma_i32(isum[t], dy * dw, acc[t]);
            accm[t] = kx_fma_i32(_mm256_madd_epi16(KX_BSUMS(x), mins), dy * dmw, accm[t]);
        }
    }
    for (int t = 0; t < NR; t++) out[t] = kx_hsum(_mm256_sub_ps(acc[t], accm[t]));
}

KX_INLINE void kx_rows_q4_k(int64_t n, const void *w, const void *xv, size_t xst, const int NR, float *out) {
    kx_rows_q45_k(n, w, xv, xst, 0, NR, out);
}
KX_INLINE void kx_rows_q5_k(int64_t n, const void *w, const void *xv, size_t xst, const int NR, float *out) {
    kx_rows_q45_k(n, w, xv, xst, 1, NR, out);
}

KX_INLINE void kx_rows_q6_k(int64_t n, const void *wv, const void *xv, size_t xst, const int NR, float *out) {
    const uint8_t *w = wv;
    const __m256i m4 = _mm256_set1_epi8(0x0f), m30 = _mm256_set1_epi8(0x30);
    __m256 acc[CPU_DOT_ROWS];
    for (int t = 0; t < NR; t++) acc[t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / QK_K; b++, w += sizeof(block_q6_K)) {
        KX_PREFETCH_RANGE(w, sizeof(block_q6_K));
        const __m128i sc8 = _mm_loadu_si128((const __m128i *)(w + offsetof(block_q6_K, scales)));
        const __m256i sc = kx_scales_even_odd(sc8, 1), sc16 = _mm256_cvtepi8_epi16(sc8);
        const uint8_t *ql = w + offsetof(block_q6_K, ql);
        const uint8_t *qh = w + offsetof(block_q6_K, qh);
        __m256i isum[CPU_DOT_ROWS];
        for (int t = 0; t < NR; t++) isum[t] = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++) {
            const __m256i l0 = kx_load(ql + 64 * h), l1 = kx_load(ql + 64 * h + 32);
            const __m256i hb = kx_load(qh + 32 * h);
            __m256i u[4];
            u[0] = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_and_si256(_mm256_slli_epi16(hb, 4), m30));
            u[1] = _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_and_si256(_mm256_slli_epi16(hb, 2), m30));
            u[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_and_si256(hb, m30));
            u[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                   _mm256_and_si256(_mm256_srli_epi16(hb, 2), m30));
            for (int p = 0; p < 4; p++) {
                const __m256i s = kx_bcast16(sc, 4 * h + p);
                for (int t = 0; t < NR; t++)
                    isum[t] = kx_madd_acc(isum[t], _mm256_maddubs_epi16(u[p], kx_load(KX_Y(KX_XBLK(t, b)) + 128 * h + 32 * p)), s);
            }
        }
        const float dw = kx_f16(w + offsetof(block_q6_K, d));
        for (int t = 0; t < NR; t++) {
            /* quants are u - 32: subtract 32 * sum_j sc_j * bsums_j */
            const uint8_t *x = KX_XBLK(t, b);
            const __m256i off = _mm256_madd_epi16(KX_BSUMS(x), sc16);
            acc[t] = kx_fma_i32(_mm256_sub_epi32(isum[t], _mm256_slli_epi32(off, 5)), quant_rd_f32(x) * dw, acc[t]);
        }
    }
    for (int t = 0; t < NR; t++) out[t] = kx_hsum(acc[t]);
}

KX_ROWS_ENTRY(kx_dot_q2_k, kx_rows_q2_k)
KX_ROWS_ENTRY(kx_dot_q3_k, kx_rows_q3_k)
KX_ROWS_ENTRY(kx_dot_q4_k, kx_rows_q4_k)
KX_ROWS_ENTRY(kx_dot_q5_k, kx_rows_q5_k)
KX_ROWS_ENTRY(kx_dot_q6_k, kx_rows_q6_k)
#undef KX_XBLK

#undef KX_Y
#undef KX_BSUMS

/* 4 weight rows x 4 activation rows, 8 floats per step: 16 accumulators fed
 * by 4 row loads and 4 column loads (each loaded vector serves 4 FMAs). */
#define KX_DOT4X4(NAME, LOADW, SCALARW)                                                                    \
    static KX_TARGET void NAME(int64_t n, const void *wv, size_t ws, const void *xv, size_t xs, float *out) { \
        const uint8_t *w = wv, *x = xv;                                                                    \
        __m256 acc[16];                                                                                    \
        for (int i = 0; i < 16; i++) acc[i] = _mm256_setzero_ps();                                         \
        int64_t k = 0;                                                                                     \
        for (; k + 8 <= n; k += 8) {                                                                       \
            __m256 xc[4];                                                                                  \
            for (int t = 0; t < 4; t++) xc[t] = _mm256_loadu_ps((const float *)(x + t * xs) + k);          \
            for (int r = 0; r < 4; r++) {                                                                  \
                const __m256 wr = LOADW(w + r * ws, k);                                                    \
                for (int t = 0; t < 4; t++) acc[4 * r + t] = _mm256_fmadd_ps(wr, xc[t], acc[4 * r + t]);    \
            }                                                                                              \
        }                                                                                                  \
        for (int i = 0; i < 16; i++) out[i] = kx_hsum(acc[i]);                                             \
        for (; k < n; k++)                                                                                 \
            for (int r = 0; r < 4; r++)                                                                    \
                for (int t = 0; t < 4; t++)                                                                \
                    out[4 * r + t] += SCALARW(w + r * ws, k) * ((const float *)(x + t * xs))[k];           \
    }

static KX_TARGET inline __m256 kx_ld_f32(const uint8_t *row, int64_t k) { return _mm256_loadu_ps((const float *)row + k); }
static KX_TARGET inline __m256 kx_ld_f16(const uint8_t *row, int64_t k) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(row + 2 * k)));
}
static inline float kx_sc_f32(const uint8_t *row, int64_t k) { return quant_rd_f32(row + 4 * k); }
static inline float kx_sc_f16(const uint8_t *row, int64_t k) { return wgml_f16_to_f32(quant_rd16(row + 2 * k)); }
KX_DOT4X4(kx_dot4x4_f32, kx_ld_f32, kx_sc_f32)
KX_DOT4X4(kx_dot4x4_f16, kx_ld_f16, kx_sc_f16)

/* ---- prepare: activations to Q8_0 / Q8_K ----
 * The same numbers as core/quant.c's scalar code, bit for bit (test_cpu_kernels
 * compares them): decode prepares every activation row once per matmul, and
 * on the scalar path that was 3% of a 1B model's decode step. */

/* Horizontal max of 8 floats (none NaN). */
static KX_TARGET inline float kx_hmax(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    return _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
}

/* 4 x 8 int32 -> 32 int8 in order, saturating. */
static KX_TARGET inline __m256i kx_pack_i8(__m256i a, __m256i b, __m256i c, __m256i d) {
    const __m256i v = _mm256_packs_epi16(_mm256_packs_epi32(a, b), _mm256_packs_epi32(c, d));
    return _mm256_permutevar8x32_epi32(v, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

/* One Q8_0 block: 32 floats at x -> 32 int8 (d = amax / 127, q = roundf(x / d)
 * clamped to int8, NaN to 0) and d as fp16 in *d16. */
static KX_TARGET inline __m256i kx_quant_q8_block(const float *x, uint16_t *d16) {
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 v[4], mx = _mm256_setzero_ps();
    for (int i = 0; i < 4; i++) {
        v[i] = _mm256_loadu_ps(x + 8 * i);
        mx = _mm256_max_ps(_mm256_and_ps(v[i], abs_mask), mx); /* a NaN lane keeps mx */
    }
    const float d = kx_hmax(mx) / 127;
    const __m256 id = _mm256_set1_ps(d ? 1.0f / d : 0.0f);
    *d16 = wgml_f32_to_f16(d);
    __m256i q[4];
    for (int i = 0; i < 4; i++) {
        const __m256 s = _mm256_mul_ps(v[i], id);
        /* roundf: truncate, then one step away from zero where the exact remainder is >= 1/2 */
        __m256 t = _mm256_round_ps(s, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
        const __m256 half_up = _mm256_cmp_ps(_mm256_and_ps(_mm256_sub_ps(s, t), abs_mask), _mm256_set1_ps(0.5f), _CMP_GE_OQ);
        const __m256 step = _mm256_or_ps(_mm256_set1_ps(1.0f), _mm256_andnot_ps(abs_mask, s));
        t = _mm256_add_ps(t, _mm256_and_ps(half_up, step));
        t = _mm256_and_ps(t, _mm256_cmp_ps(s, s, _CMP_ORD_Q)); /* NaN -> 0 */
        t = _mm256_min_ps(_mm256_max_ps(t, _mm256_set1_ps(-128.f)), _mm256_set1_ps(127.f));
        q[i] = _mm256_cvtps_epi32(t);
    }
    return kx_pack_i8(q[0], q[1], q[2], q[3]);
}

static KX_TARGET void kx_prep_q8_0(const float *x, void *dst, int64_t n) {
    uint8_t *o = dst;
    for (int64_t b = 0; b < n / 32; b++, x += 32, o += sizeof(block_q8_0)) {
        uint16_t d16;
        const __m256i q = kx_quant_q8_block(x, &d16);
        quant_wr16(o + offsetof(block_q8_0, d), d16);
        _mm256_storeu_si256((__m256i *)(o + offsetof(block_q8_0, qs)), q);
    }
}

/* Q8_K: per 256, the value of largest magnitude maps to -127; q rounded to
 * nearest even, clamped to -127..127 (NaN to 0); d = 1 / iscale; bsums. */
static KX_TARGET void kx_prep_q8_k(const float *x, void *dst, int64_t n) {
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    uint8_t *o = dst;
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K, o += sizeof(block_q8_K)) {
        __m256 mx = _mm256_setzero_ps();
        for (int i = 0; i < QK_K; i += 8)
            mx = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(x + i), abs_mask), mx);
        const float amax = kx_hmax(mx);
        int8_t *q = (int8_t *)(o + offsetof(block_q8_K, qs));
        int16_t bsums[QK_K / 16];
        float d = 0, max = 0; /* max: the first element of largest magnitude, with its sign */
        for (int e = 0; amax != 0 && e < QK_K; e++)
            if (fabsf(x[e]) == amax) {
                max = x[e];
                break;
            }
        const float iscale = amax == 0 ? 0 : -127.f / max;
        if (amax == 0 || isinf(iscale)) { /* zeros, as in quant_k.c */
            memset(q, 0, QK_K);
            memset(bsums, 0, sizeof bsums);
        } else {
            const __m256 is = _mm256_set1_ps(iscale);
            for (int j = 0; j < QK_K; j += 32) {
                __m256i qi[4];
                for (int i = 0; i < 4; i++) {
                    const __m256 s = _mm256_mul_ps(_mm256_loadu_ps(x + j + 8 * i), is);
                    __m256 t = _mm256_round_ps(s, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
                    t = _mm256_and_ps(t, _mm256_cmp_ps(s, s, _CMP_ORD_Q)); /* NaN -> 0 */
                    t = _mm256_min_ps(_mm256_max_ps(t, _mm256_set1_ps(-127.f)), _mm256_set1_ps(127.f));
                    qi[i] = _mm256_cvtps_epi32(t);
                }
                const __m256i v = kx_pack_i8(qi[0], qi[1], qi[2], qi[3]);
                _mm256_storeu_si256((__m256i *)(q + j), v);
                /* sums of 16: int32 per 4 bytes, then 4 of those */
                int32_t w[8];
                _mm256_storeu_si256((__m256i *)w, kx_dot_us(_mm256_set1_epi8(1), v));
                bsums[j / 16] = (int16_t)(w[0] + w[1] + w[2] + w[3]);
                bsums[j / 16 + 1] = (int16_t)(w[4] + w[5] + w[6] + w[7]);
            }
            d = 1 / iscale;
        }
        memcpy(o + offsetof(block_q8_K, d), &d, 4);
        memcpy(o + offsetof(block_q8_K, bsums), bsums, sizeof bsums);
    }
}

/* Sets a type's dot and dot_rows, always together (kernels.h: the same math, bit for bit). */
#define KX_SET_DOT(entry, NAME) ((entry).dot = NAME, (entry).dot_rows = NAME##_rows)

static void kx_fill(cpu_type_kernels t[WGML_DTYPE_COUNT]) {
    KX_SET_DOT(t[WGML_F32], kx_dot_f32);
    t[WGML_F32].dot4x4 = kx_dot4x4_f32;
    t[WGML_F16].dot4x4 = kx_dot4x4_f16;
    KX_SET_DOT(t[WGML_F16], kx_dot_f16);
    t[WGML_F16].to_float = kx_to_float_f16;
    KX_SET_DOT(t[WGML_BF16], kx_dot_bf16);
    KX_SET_DOT(t[WGML_Q4_0], kx_dot_q4_0);
    KX_SET_DOT(t[WGML_Q4_1], kx_dot_q4_1);
    KX_SET_DOT(t[WGML_Q5_0], kx_dot_q5_0);
    KX_SET_DOT(t[WGML_Q5_1], kx_dot_q5_1);
    KX_SET_DOT(t[WGML_Q8_0], kx_dot_q8_0);
    KX_SET_DOT(t[WGML_Q2_K], kx_dot_q2_k);
    KX_SET_DOT(t[WGML_Q3_K], kx_dot_q3_k);
    KX_SET_DOT(t[WGML_Q4_K], kx_dot_q4_k);
    KX_SET_DOT(t[WGML_Q5_K], kx_dot_q5_k);
    KX_SET_DOT(t[WGML_Q6_K], kx_dot_q6_k);
    t[WGML_Q4_0].prepare = kx_prep_q8_0;
    t[WGML_Q5_0].prepare = kx_prep_q8_0;
    t[WGML_Q8_0].prepare = kx_prep_q8_0;
    for (uint32_t k = WGML_Q2_K; k <= WGML_Q6_K; k++) t[k].prepare = kx_prep_q8_k;
}
