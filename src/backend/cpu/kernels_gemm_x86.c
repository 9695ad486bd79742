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
 *
 * Also the int8 GEMM's micro-kernels (cpu_qgemm_fn): AVX-512 VNNI, and AVX2
 * without VNNI (vpmaddubsw + vpmaddwd in place of vpdpbusd).
 */
#include "backend/cpu/kernels_impl.h"
#include "core/fp16.h"

#if defined(WGML_CPU_X86)
#include <immintrin.h>
#include <math.h>
#include <string.h>

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
    __m512 a0[CPU_GEMM_MR_BF16], a1[CPU_GEMM_MR_BF16];
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
    case 12: b_tile(12, kp, x, ldx, wp, c, ldc, nc, add); break;
    case 11: b_tile(11, kp, x, ldx, wp, c, ldc, nc, add); break;
    case 10: b_tile(10, kp, x, ldx, wp, c, ldc, nc, add); break;
    case 9: b_tile(9, kp, x, ldx, wp, c, ldc, nc, add); break;
    case 8: b_tile(8, kp, x, ldx, wp, c, ldc, nc, add); break;
    case 7: b_tile(7, kp, x, ldx, wp, c, ldc, nc, add); break;
    case 6: b_tile(6, kp, x, ldx, wp, c, ldc, nc, add); break;
    case 5: b_tile(5, kp, x, ldx, wp, c, ldc, nc, add); break;
    case 4: b_tile(4, kp, x, ldx, wp, c, ldc, nc, add); break;
    case 3: b_tile(3, kp, x, ldx, wp, c, ldc, nc, add); break;
    case 2: b_tile(2, kp, x, ldx, wp, c, ldc, nc, add); break;
    default: b_tile(1, kp, x, ldx, wp, c, ldc, nc, add); break;
    }
}

/* ---- AVX-512 VNNI: the int8 GEMM (cpu_qgemm_fn) ---- */

#define KQ __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))

/* NT tokens x 16 columns; SUB-element sub-blocks (32 or 16). Per sub-block
 * the weights' SUB/4 runs stay in registers while each token's int32 sums
 * build up over them (vpdpbusd, the token's 4 bytes broadcast), then go to
 * f32 with the scales. */
static KQ KG_INLINE void q_tile(const int NT, const int SUB, const int ZP, int zp, int64_t nch, const uint8_t *act,
                                size_t as,
                                const uint8_t *wp, float *c, size_t ldc, int nc, int add, const float *bias) {
    enum { G = 8 };
    const int ng = SUB / 4, ns = 32 / SUB;
    const size_t cb = 512 + (size_t)ns * 128;
    __m512 acc[CPU_QGEMM_NT];
    for (int t = 0; t < NT; t++) acc[t] = _mm512_setzero_ps();
    for (int64_t ch = 0; ch < nch; ch++) {
        const uint8_t *w = wp + (size_t)ch * cb, *a = act + (size_t)ch * CPU_QGEMM_ACT;
        for (int h = 0; h < ns; h++) {
            __m512i wv[G];
            for (int g = 0; g < ng; g++) wv[g] = _mm512_load_si512(w + (size_t)(h * ng + g) * 64);
            const __m512 s1 = _mm512_load_ps(w + 512 + (size_t)h * 128);
            const __m512 s2 = ZP ? s1 : _mm512_load_ps(w + 512 + (size_t)h * 128 + 64);
            const int moff = ns == 1 ? 44 : 36 + 4 * h, soff = ns == 1 ? 56 : 48 + 4 * h;
            for (int t = 0; t < NT; t++) {
                const uint8_t *at = a + (size_t)t * as;
                __m512i ia = _mm512_setzero_si512();
                if (ZP) { /* the sums start at -zp sum(q): the offset taken off exactly */
                    int32_t sq;
                    memcpy(&sq, at + soff, 4);
                    ia = _mm512_set1_epi32(-zp * sq);
                }
                for (int g = 0; g < ng; g++) {
                    int32_t q4;
                    memcpy(&q4, at + h * SUB + 4 * g, 4);
                    ia = _mm512_dpbusd_epi32(ia, wv[g], _mm512_set1_epi32(q4));
                }
                float d, m;
                memcpy(&d, at + 32, 4);
                acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ia), _mm512_mul_ps(s1, _mm512_set1_ps(d)), acc[t]);
                if (!ZP) {
                    memcpy(&m, at + moff, 4);
                    acc[t] = _mm512_fmadd_ps(s2, _mm512_set1_ps(m), acc[t]);
                }
            }
        }
    }
    const __mmask16 mk = nc >= 16 ? 0xffff : (__mmask16)((1u << nc) - 1);
    const __m512 b = bias ? _mm512_maskz_loadu_ps(mk, bias) : _mm512_setzero_ps();
    for (int t = 0; t < NT; t++) {
        float *o = c + (size_t)t * ldc;
        __m512 v = _mm512_add_ps(acc[t], b);
        if (add) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mk, o));
        _mm512_mask_storeu_ps(o, mk, v);
    }
}

#define Q_TILES(SUB, ZP)                                                                                               \
    switch (nt) {                                                                                                      \
    case 8: q_tile(8, SUB, ZP, zp, nch, act, as, wp, c, ldc, nc, add, bias); break;                                    \
    case 7: q_tile(7, SUB, ZP, zp, nch, act, as, wp, c, ldc, nc, add, bias); break;                                    \
    case 6: q_tile(6, SUB, ZP, zp, nch, act, as, wp, c, ldc, nc, add, bias); break;                                    \
    case 5: q_tile(5, SUB, ZP, zp, nch, act, as, wp, c, ldc, nc, add, bias); break;                                    \
    case 4: q_tile(4, SUB, ZP, zp, nch, act, as, wp, c, ldc, nc, add, bias); break;                                    \
    case 3: q_tile(3, SUB, ZP, zp, nch, act, as, wp, c, ldc, nc, add, bias); break;                                    \
    case 2: q_tile(2, SUB, ZP, zp, nch, act, as, wp, c, ldc, nc, add, bias); break;                                    \
    default: q_tile(1, SUB, ZP, zp, nch, act, as, wp, c, ldc, nc, add, bias); break;                                   \
    }

KQ void cpu_qgemm_avx512(int64_t nch, int sub, int zp, const uint8_t *act, size_t as, const uint8_t *wp, float *c,
                         size_t ldc, int nt, int nc, int add, const float *bias) {
    if (sub == 32 && zp) {
        Q_TILES(32, 1)
    } else if (sub == 32) {
        Q_TILES(32, 0)
    } else if (zp) {
        Q_TILES(16, 1)
    } else {
        Q_TILES(16, 0)
    }
}

/* 32 bytes of row r0 and 32 of row r1 (8 rows below) as one register */
static KQ KG_INLINE __m512i q_pair(const uint8_t *r0, const uint8_t *r1) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)r0)),
                              _mm256_loadu_si256((const __m256i *)r1), 1);
}

/* a[i] = 32 codes of row i | 32 of row i + 8 -> the chunk's 8 runs: an 8 x 8 dword
 * transpose in both 256-bit halves (unpack 32, unpack 64, then 128-bit lanes paired
 * across the two halves of each result) */
static KQ KG_INLINE void q_transpose(uint8_t *o, const __m512i a[8]) {
    const __m512i lo = _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13), hi = _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15);
    __m512i t[8], q[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm512_unpacklo_epi32(a[i], a[i + 1]);
        t[i + 1] = _mm512_unpackhi_epi32(a[i], a[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {
        q[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
        q[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
        q[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
        q[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    for (int r = 0; r < 4; r++) {
        _mm512_store_si512(o + 64 * r, _mm512_permutex2var_epi64(q[r], lo, q[r + 4]));
        _mm512_store_si512(o + 64 * (r + 4), _mm512_permutex2var_epi64(q[r], hi, q[r + 4]));
    }
}

/* 16 rows' chunk of 32 codes (8 dwords each) -> 8 runs of one dword per row:
 * register i holds rows i and i + 8 (one per 256-bit half), then an 8 x 8
 * dword transpose runs in both halves at once (q_transpose). */
KQ void cpu_qgemm_pack_avx512(const uint8_t *u, int64_t K, const float *s1, const float *s2, int sub, uint8_t *dst) {
    const int ns = 32 / sub;
    const size_t cb = 512 + (size_t)ns * 128;
    for (int64_t c = 0; c < K / 32; c++) {
        __m512i a[8];
        for (int i = 0; i < 8; i++) a[i] = q_pair(u + (size_t)i * (size_t)K + 32 * c, u + (size_t)(i + 8) * (size_t)K + 32 * c);
        uint8_t *o = dst + (size_t)c * cb;
        q_transpose(o, a);
        for (int h = 0; h < ns; h++) {
            _mm512_store_ps(o + 512 + 128 * h, _mm512_loadu_ps(s1 + 16 * (2 * c + h)));
            _mm512_store_ps(o + 512 + 128 * h + 64, _mm512_loadu_ps(s2 + 16 * (2 * c + h)));
        }
    }
}

/* The chunk's scales: d of row j (fp16, d16[j]) as s1, and zp d as s2. */
static KQ KG_INLINE void q_scales(uint8_t *o, const uint16_t *d16, float zp) {
    const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)d16));
    _mm512_store_ps(o + 512, d);
    _mm512_store_ps(o + 576, _mm512_mul_ps(d, _mm512_set1_ps(zp)));
}

/* Q4_0 blocks of 16 rows (row j's 16 bytes of nibbles at qs[j]) -> the chunk's 8 runs: dword g' of
 * each row gathered by two 2-source permutes per half, then its low nibbles are run g' (k = 4 g' ..)
 * and its high nibbles run g' + 4 (k = 16 + 4 g' ..). */
static KQ KG_INLINE void q_nibbles(uint8_t *o, const uint8_t *const qs[16]) {
    __m512i r[4];
    for (int q = 0; q < 4; q++) {
        r[q] = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)qs[4 * q]));
        r[q] = _mm512_inserti32x4(r[q], _mm_loadu_si128((const __m128i *)qs[4 * q + 1]), 1);
        r[q] = _mm512_inserti32x4(r[q], _mm_loadu_si128((const __m128i *)qs[4 * q + 2]), 2);
        r[q] = _mm512_inserti32x4(r[q], _mm_loadu_si128((const __m128i *)qs[4 * q + 3]), 3);
    }
    const __m512i lo4 = _mm512_set1_epi8(0x0f);
    for (int g = 0; g < 4; g++) {
        /* lane i < 4: row i (lane 4 i + g of the first source); lane 4 + i: row 4 + i (the second) */
        const __m512i idx = _mm512_setr_epi32(g, 4 + g, 8 + g, 12 + g, 16 + g, 20 + g, 24 + g, 28 + g, 0, 0, 0, 0, 0, 0,
                                              0, 0);
        const __m512i a = _mm512_permutex2var_epi32(r[0], idx, r[1]), b = _mm512_permutex2var_epi32(r[2], idx, r[3]);
        const __m512i v = _mm512_inserti64x4(a, _mm512_castsi512_si256(b), 1);
        _mm512_store_si512(o + 64 * g, _mm512_and_si512(v, lo4));
        _mm512_store_si512(o + 64 * (g + 4), _mm512_and_si512(_mm512_srli_epi16(v, 4), lo4));
    }
}

/* K-quant superblocks of 16 rows -> their 8 chunks each. Q4_K: sub-block j's codes are
 * nibble j % 2 of the 32-byte run j / 2, with s1 = d sc_j, s2 = dmin m_j per 32. Q6_K:
 * element 128 h + 32 p + r is nibble p / 2 of ql[64 h + 32 (p % 2) + r] with bit pair p of
 * qh[32 h + r] above it, s1 = d sc per 16, s2 = 32 s1. */
static KQ void q_direct_k(int layout, const uint8_t *w, size_t w_row, int64_t K, uint8_t *dst) {
    const int q6 = layout == CPU_QGEMM_DIRECT_Q6_K;
    const size_t bs = q6 ? 210 : 144, cb = q6 ? 768 : 640;
    const __m512i m4 = _mm512_set1_epi8(0x0f), m2 = _mm512_set1_epi8(0x03);
    for (int64_t sb = 0; sb < K / 256; sb++) {
        float s1[16][16], s2[16][16]; /* [sub-block of 16][row] */
        for (int j = 0; j < 16; j++) {
            const uint8_t *blk = w + (size_t)j * w_row + (size_t)sb * bs;
            uint16_t h;
            if (q6) {
                memcpy(&h, blk + 208, 2);
                const float d = wgml_f16_to_f32(h);
                for (int e = 0; e < 16; e++) {
                    s1[e][j] = d * (float)(int8_t)blk[192 + e];
                    s2[e][j] = 32.0f * s1[e][j];
                }
            } else {
                memcpy(&h, blk, 2);
                const float d = wgml_f16_to_f32(h);
                memcpy(&h, blk + 2, 2);
                const float dmin = wgml_f16_to_f32(h);
                const uint8_t *sc = blk + 4;
                for (int e = 0; e < 8; e++) {
                    const int scl = e < 4 ? sc[e] & 63 : (sc[e + 4] & 0x0f) | ((sc[e - 4] >> 6) << 4);
                    const int mn = e < 4 ? sc[e + 4] & 63 : (sc[e + 4] >> 4) | ((sc[e] >> 6) << 4);
                    s1[2 * e][j] = s1[2 * e + 1][j] = d * (float)scl;
                    s2[2 * e][j] = s2[2 * e + 1][j] = dmin * (float)mn;
                }
            }
        }
        for (int c = 0; c < 8; c++) {
            uint8_t *o = dst + (size_t)(8 * sb + c) * cb;
            __m512i a[8];
            for (int i = 0; i < 8; i++) {
                const uint8_t *b0 = w + (size_t)i * w_row + (size_t)sb * bs, *b1 = b0 + 8 * w_row;
                if (q6) {
                    const int hh = c / 4, p = c % 4, off = 64 * hh + 32 * (p % 2);
                    const __m512i lo4 = _mm512_and_si512(_mm512_srli_epi16(q_pair(b0 + off, b1 + off), 4 * (p / 2)), m4);
                    const __m512i hi2 =
                        _mm512_and_si512(_mm512_srli_epi16(q_pair(b0 + 128 + 32 * hh, b1 + 128 + 32 * hh), 2 * p), m2);
                    a[i] = _mm512_or_si512(lo4, _mm512_slli_epi16(hi2, 4));
                } else {
                    const int off = 16 + 32 * (c / 2);
                    a[i] = _mm512_and_si512(_mm512_srli_epi16(q_pair(b0 + off, b1 + off), 4 * (c % 2)), m4);
                }
            }
            q_transpose(o, a);
            for (int hb = 0; hb < (q6 ? 2 : 1); hb++) {
                _mm512_store_ps(o + 512 + 128 * hb, _mm512_loadu_ps(s1[2 * c + hb]));
                _mm512_store_ps(o + 576 + 128 * hb, _mm512_loadu_ps(s2[2 * c + hb]));
            }
        }
    }
}

KQ void cpu_qgemm_direct_avx512(int layout, const uint8_t *w, size_t w_row, int64_t K, uint8_t *dst) {
    if (layout == CPU_QGEMM_DIRECT_Q4_K || layout == CPU_QGEMM_DIRECT_Q6_K) {
        q_direct_k(layout, w, w_row, K, dst);
        return;
    }
    const size_t cb = 640;
    const int64_t nb = K / 32, groups = layout == CPU_QGEMM_DIRECT_Q4_0_X8 ? K / 256 : 0;
    for (int64_t b = 0; b < nb; b++) {
        uint8_t *o = dst + (size_t)b * cb;
        uint16_t d16[16];
        if (layout == CPU_QGEMM_DIRECT_Q8_0) { /* codes q + 128 */
            __m512i a[8];
            const __m512i flip = _mm512_set1_epi8((char)0x80);
            for (int i = 0; i < 8; i++) {
                const uint8_t *r0 = w + (size_t)i * w_row + (size_t)b * 34, *r1 = r0 + 8 * w_row;
                a[i] = _mm512_xor_si512(q_pair(r0 + 2, r1 + 2), flip);
                memcpy(&d16[i], r0, 2);
                memcpy(&d16[i + 8], r1, 2);
            }
            q_transpose(o, a);
            q_scales(o, d16, 128.0f);
            continue;
        }
        const uint8_t *qs[16];
        for (int j = 0; j < 16; j++) {
            const uint8_t *row = w + (size_t)j * w_row, *blk;
            if (b < 8 * groups) { /* CPU_W_Q4_0_X8: the group's 8 scales, then 8 x 16 bytes of nibbles */
                const uint8_t *g = row + (size_t)(b / 8) * 144;
                memcpy(&d16[j], g + 2 * (b % 8), 2);
                qs[j] = g + 16 + 16 * (b % 8);
                continue;
            }
            blk = row + (size_t)groups * 144 + (size_t)(b - 8 * groups) * 18; /* GGUF blocks */
            memcpy(&d16[j], blk, 2);
            qs[j] = blk + 2;
        }
        q_nibbles(o, qs);
        q_scales(o, d16, 8.0f);
    }
}

/* A chunk's q (16 int32 lanes each half), d, and the sums and m that follow them (kernels.h). */
static KQ KG_INLINE void q_put(uint8_t *a, __m512i q0, __m512i q1, float d) {
    _mm_storeu_si128((__m128i *)a, _mm512_cvtepi32_epi8(q0));
    _mm_storeu_si128((__m128i *)(a + 16), _mm512_cvtepi32_epi8(q1));
    const int32_t s[3] = {_mm512_reduce_add_epi32(q0), _mm512_reduce_add_epi32(q1),
                          _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1))};
    const float m[3] = {-d * (float)s[0], -d * (float)s[1], -d * (float)s[2]};
    memcpy(a + 32, &d, 4);
    memcpy(a + 36, m, sizeof m);
    memcpy(a + 48, s, sizeof s);
    memset(a + 60, 0, CPU_QGEMM_ACT - 60);
}

/* max |x| over lanes, NaN lanes ignored (as the scalar encoders' `>` does) */
static KQ KG_INLINE float q_amax(const float *x, int n) {
    __m512 m = _mm512_setzero_ps();
    for (int i = 0; i < n; i += 16) {
        const __m512 a = _mm512_abs_ps(_mm512_loadu_ps(x + i));
        m = _mm512_mask_mov_ps(m, _mm512_cmp_ps_mask(a, m, _CMP_GT_OQ), a);
    }
    float l[16], r = 0.0f;
    _mm512_storeu_ps(l, m);
    for (int i = 0; i < 16; i++) r = l[i] > r ? l[i] : r;
    return r;
}

/* round_i8 (quant.c): NaN 0, > 127 127, <= -128 -128, else roundf (half away from zero) */
static KQ KG_INLINE __m512i q_round_away(__m512 v) {
    const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    v = _mm512_mask_mov_ps(v, nan, _mm512_setzero_ps());
    v = _mm512_min_ps(_mm512_max_ps(v, _mm512_set1_ps(-128.0f)), _mm512_set1_ps(127.0f));
    __m512 t = _mm512_roundscale_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __m512 f = _mm512_sub_ps(v, t);
    t = _mm512_mask_add_ps(t, _mm512_cmp_ps_mask(f, _mm512_set1_ps(0.5f), _CMP_GE_OQ), t, _mm512_set1_ps(1.0f));
    t = _mm512_mask_sub_ps(t, _mm512_cmp_ps_mask(f, _mm512_set1_ps(-0.5f), _CMP_LE_OQ), t, _mm512_set1_ps(1.0f));
    return _mm512_cvttps_epi32(t);
}

/* quant_nearest_int (quant_impl.h) of iscale x, clamped to -127..127 */
static KQ KG_INLINE __m512i q_nearest(__m512 v) {
    const __m512i b = _mm512_castps_si512(_mm512_add_ps(v, _mm512_set1_ps(12582912.f)));
    const __m512i q = _mm512_sub_epi32(_mm512_and_si512(b, _mm512_set1_epi32(0x007fffff)), _mm512_set1_epi32(0x00400000));
    return _mm512_min_epi32(_mm512_max_epi32(q, _mm512_set1_epi32(-127)), _mm512_set1_epi32(127));
}

KQ void cpu_qgemm_prep_avx512(const float *x, int64_t K, int kind, uint8_t *act) {
    if (!kind) {
        for (int64_t c = 0; c < K / 32; c++, x += 32, act += CPU_QGEMM_ACT) {
            const float d = q_amax(x, 32) / 127, id = d ? 1.0f / d : 0.0f;
            const __m512 vid = _mm512_set1_ps(id);
            q_put(act, q_round_away(_mm512_mul_ps(_mm512_loadu_ps(x), vid)),
                  q_round_away(_mm512_mul_ps(_mm512_loadu_ps(x + 16), vid)), wgml_f16_to_f32(wgml_f32_to_f16(d)));
        }
        return;
    }
    for (int64_t b = 0; b < K / 256; b++, x += 256) {
        const float amax = q_amax(x, 256);
        float max = 0.0f;
        if (amax > 0.0f) /* the first element of that magnitude, with its sign */
            for (int i = 0; i < 256; i += 16) {
                const __mmask16 e = _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_loadu_ps(x + i)), _mm512_set1_ps(amax), _CMP_EQ_OQ);
                if (e) {
                    max = x[i + __builtin_ctz(e)];
                    break;
                }
            }
        const float iscale = amax == 0 ? 0 : -127.f / max;
        const int zero = amax == 0 || isinf(iscale);
        const float d = zero ? 0.0f : 1 / iscale;
        const __m512 vs = _mm512_set1_ps(iscale);
        for (int c = 0; c < 8; c++, act += CPU_QGEMM_ACT) {
            const float *xc = x + 32 * c;
            const __m512i q0 = zero ? _mm512_setzero_si512() : q_nearest(_mm512_mul_ps(_mm512_loadu_ps(xc), vs));
            const __m512i q1 = zero ? _mm512_setzero_si512() : q_nearest(_mm512_mul_ps(_mm512_loadu_ps(xc + 16), vs));
            q_put(act, q0, q1, d);
        }
    }
}

/* ---- AVX2 ---- */

KG2 void cpu_to_f16_f16c(const float *x, uint16_t *dst, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(dst + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) dst[i] = wgml_f32_to_f16(x[i]);
}

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

/* ---- AVX2: the int8 GEMM without VNNI (cpu_qgemm_fn) ----
 *
 * vpdpbusd's 4-byte dot products come from vpmaddubsw (u8 x s8 products
 * added in pairs to int16) and vpmaddwd with ones (pairs of those to int32).
 * vpmaddubsw saturates a pair's sum at +-32767. Every type's codes but
 * Q8_0's are below 64, so a pair stays within 2 * 63 * 127 (the activations
 * are -127..127: both encoders' range). Q8_0's codes u = q + 128 reach 255:
 * with zp >= 128 the kernel multiplies q = u - 128 itself, |q| as the unsigned
 * operand and the activation's sign flipped to q's (a pair within 2 * 128 *
 * 127); sum(q a) is sum(u a) - 128 sum(a), so that the -zp sq term is then
 * already in. The same integer sums as the VNNI kernel, exactly.
 * Tiles of up to 4 tokens x 16 columns (2 ymm each: 8 accumulators); the
 * weights are read from L1 per token. */
static KG2 KG_INLINE void q2_tile(const int NT, const int SUB, const int MODE, int zp, int64_t nch, const uint8_t *act,
                                  size_t as, const uint8_t *wp, float *c, size_t ldc, int nc, int add,
                                  const float *bias) {
    /* MODE 0: offsets as floats (s2 m); 1: -zp sq in the integer sums; 2: Q8_0's signed codes */
    const int ng = SUB / 4, ns = 32 / SUB;
    const size_t cb = 512 + (size_t)ns * 128;
    const __m256i ones = _mm256_set1_epi16(1), flip = _mm256_set1_epi8((char)0x80);
    __m256 acc[4][2];
    for (int t = 0; t < NT; t++) acc[t][0] = acc[t][1] = _mm256_setzero_ps();
    for (int64_t ch = 0; ch < nch; ch++) {
        const uint8_t *w = wp + (size_t)ch * cb, *a = act + (size_t)ch * CPU_QGEMM_ACT;
        for (int h = 0; h < ns; h++) {
            const float *sc = (const float *)(w + 512 + (size_t)h * 128);
            const __m256 s1a = _mm256_load_ps(sc), s1b = _mm256_load_ps(sc + 8);
            const int moff = ns == 1 ? 44 : 36 + 4 * h, soff = ns == 1 ? 56 : 48 + 4 * h;
            for (int t = 0; t < NT; t++) {
                const uint8_t *at = a + (size_t)t * as;
                __m256i ia0 = _mm256_setzero_si256(), ia1 = ia0;
                if (MODE == 1) {
                    int32_t sq;
                    memcpy(&sq, at + soff, 4);
                    ia0 = ia1 = _mm256_set1_epi32(-zp * sq);
                }
                for (int g = 0; g < ng; g++) {
                    const uint8_t *wg = w + (size_t)(h * ng + g) * 64;
                    __m256i w0 = _mm256_load_si256((const __m256i *)wg), w1 = _mm256_load_si256((const __m256i *)(wg + 32));
                    int32_t q4;
                    memcpy(&q4, at + h * SUB + 4 * g, 4);
                    const __m256i av = _mm256_set1_epi32(q4);
                    __m256i p0, p1;
                    if (MODE == 2) {
                        w0 = _mm256_xor_si256(w0, flip), w1 = _mm256_xor_si256(w1, flip); /* u - 128 */
                        p0 = _mm256_maddubs_epi16(_mm256_abs_epi8(w0), _mm256_sign_epi8(av, w0));
                        p1 = _mm256_maddubs_epi16(_mm256_abs_epi8(w1), _mm256_sign_epi8(av, w1));
                    } else {
                        p0 = _mm256_maddubs_epi16(w0, av);
                        p1 = _mm256_maddubs_epi16(w1, av);
                    }
                    ia0 = _mm256_add_epi32(ia0, _mm256_madd_epi16(p0, ones));
                    ia1 = _mm256_add_epi32(ia1, _mm256_madd_epi16(p1, ones));
                }
                float d;
                memcpy(&d, at + 32, 4);
                const __m256 dv = _mm256_set1_ps(d);
                acc[t][0] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ia0), _mm256_mul_ps(s1a, dv), acc[t][0]);
                acc[t][1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ia1), _mm256_mul_ps(s1b, dv), acc[t][1]);
                if (MODE == 0) {
                    float m;
                    memcpy(&m, at + moff, 4);
                    const __m256 mv = _mm256_set1_ps(m);
                    acc[t][0] = _mm256_fmadd_ps(_mm256_load_ps(sc + 16), mv, acc[t][0]);
                    acc[t][1] = _mm256_fmadd_ps(_mm256_load_ps(sc + 24), mv, acc[t][1]);
                }
            }
        }
    }
    for (int t = 0; t < NT; t++) {
        float v[16], *o = c + (size_t)t * ldc;
        _mm256_storeu_ps(v, acc[t][0]);
        _mm256_storeu_ps(v + 8, acc[t][1]);
        for (int j = 0; j < nc; j++) {
            const float x = v[j] + (bias ? bias[j] : 0.0f);
            o[j] = add ? o[j] + x : x;
        }
    }
}

#define Q2_TILES(SUB, MODE)                                                                                            \
    switch (n) {                                                                                                       \
    case 4: q2_tile(4, SUB, MODE, zp, nch, a, as, wp, o, ldc, nc, add, bias); break;                                   \
    case 3: q2_tile(3, SUB, MODE, zp, nch, a, as, wp, o, ldc, nc, add, bias); break;                                   \
    case 2: q2_tile(2, SUB, MODE, zp, nch, a, as, wp, o, ldc, nc, add, bias); break;                                   \
    default: q2_tile(1, SUB, MODE, zp, nch, a, as, wp, o, ldc, nc, add, bias); break;                                  \
    }

KG2 void cpu_qgemm_avx2(int64_t nch, int sub, int zp, const uint8_t *act, size_t as, const uint8_t *wp, float *c,
                        size_t ldc, int nt, int nc, int add, const float *bias) {
    const int mode = zp >= 128 ? 2 : zp ? 1 : 0;
    for (int t0 = 0; t0 < nt; t0 += 4) {
        const int n = nt - t0 < 4 ? nt - t0 : 4;
        const uint8_t *a = act + (size_t)t0 * as;
        float *o = c + (size_t)t0 * ldc;
        if (sub == 32) {
            if (mode == 2) Q2_TILES(32, 2) else if (mode == 1) Q2_TILES(32, 1) else Q2_TILES(32, 0)
        } else {
            if (mode == 2) Q2_TILES(16, 2) else if (mode == 1) Q2_TILES(16, 1) else Q2_TILES(16, 0)
        }
    }
}
#else
typedef int cpu_kernels_gemm_x86_unused; /* not x86: nothing to build */
#endif
