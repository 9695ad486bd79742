/*
 * kernels_avx512.c - x86 kernels for AVX-512 F/BW/VL with VNNI.
 *
 * The shared 256-bit code of kernels_x86.h, compiled with vpdpbusd /
 * vpdpwssd, plus 512-bit versions of the hottest dot products below. On the
 * cores this targets the kernels are bound by instruction throughput rather
 * than by the width of the units, so handling two 32-element blocks (or 64
 * elements of a K-quant) per instruction nearly halves the work per byte.
 *
 *   32-element types: a zmm holds two blocks, [w_a | w_b] against
 *   [x_a | x_b] (Q4_0: four, against regrouped activations, see
 *   kz_dot_q4_0; Q8_0: with the zero point's term in the activations);
 *   the 16 fp16 scales of 8 blocks are picked out of masked 64-byte loads
 *   with one or two vpermt2w, and their products are broadcast to each
 *   block's lanes with vpermps.
 *   Q4_K/Q5_K: a zmm holds 64 bytes of nibbles, against activations
 *   regrouped to match (see kz_dot_q45_k).
 *   Q6_K: a zmm holds 64 elements, four sub-blocks of 16, built from 64
 *   bytes of low nibbles and the matching 2-bit pairs of qh.
 */
#include "backend/cpu/kernels_impl.h"

#if defined(WGML_CPU_X86)
#define KX_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))
#define KX_VNNI   1
#define KX_AVX512 1
#include "backend/cpu/kernels_x86.h"

static KX_TARGET inline __m512i kz_load(const void *p) { return _mm512_loadu_si512(p); }
static KX_TARGET inline __m512i kz_bcast256(const void *p) {
    return _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)p));
}
static KX_TARGET inline __m512i kz_pair256(const void *a, const void *b) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)a)),
                              _mm256_loadu_si256((const __m256i *)b), 1);
}

/* ---- 32-element blocks, two per zmm ---- */

/*
 * The 8 fp16 values at p + k * 2s bytes (k = 0..7, s <= 31 words), as
 * floats. Masked loads touch only the wanted words; with s <= 10 the
 * windows at blocks 0 and 4 hold four each, else the windows at blocks
 * 0, 2, 4, 6 hold two each.
 */
static KX_TARGET inline __m256 kz_f16x8(const uint8_t *p, int s) {
    if (s <= 10) {
        const __mmask32 m = (1u << 0) | (1u << s) | (1u << 2 * s) | (1u << 3 * s);
        const __m512i a = _mm512_maskz_loadu_epi16(m, p), b = _mm512_maskz_loadu_epi16(m, p + 8 * s);
        const __m512i idx =
            _mm512_castsi128_si512(_mm_setr_epi16(0, (short)s, (short)(2 * s), (short)(3 * s), 32, (short)(32 + s),
                                                  (short)(32 + 2 * s), (short)(32 + 3 * s)));
        return _mm256_cvtph_ps(_mm512_castsi512_si128(_mm512_permutex2var_epi16(a, idx, b)));
    }
    const __mmask32 m = (1u << 0) | (1u << s);
    const __m512i a = _mm512_maskz_loadu_epi16(m, p), b = _mm512_maskz_loadu_epi16(m, p + 4 * s);
    const __m512i c = _mm512_maskz_loadu_epi16(m, p + 8 * s), d = _mm512_maskz_loadu_epi16(m, p + 12 * s);
    const __m512i idx = _mm512_castsi128_si512(_mm_setr_epi16(0, (short)s, 32, (short)(32 + s), 0, 0, 0, 0));
    const __m128i lo = _mm512_castsi512_si128(_mm512_permutex2var_epi16(a, idx, b));
    const __m128i hi = _mm512_castsi512_si128(_mm512_permutex2var_epi16(c, idx, d));
    return _mm256_cvtph_ps(_mm_unpacklo_epi64(lo, hi));
}

/* Nibbles of two Q4 blocks (qs at a, b): [lo a | hi a | lo b | hi b]. */
static KX_TARGET inline __m512i kz_nibbles2(const uint8_t *a, const uint8_t *b) {
    const __m512i v =
        _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)a))),
                           _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)b)), 1);
    return _mm512_and_si512(_mm512_srlv_epi64(v, _mm512_setr_epi64(0, 0, 4, 4, 0, 0, 4, 4)), _mm512_set1_epi8(0x0f));
}

/* Adds 16 to the bytes whose bit is set in qh of block a (low half) / b (high half). */
static KX_TARGET inline __m512i kz_add_q5_high(__m512i q, const uint8_t *qh_a, const uint8_t *qh_b) {
    const __mmask64 k = _cvtu64_mask64((uint64_t)quant_rd32(qh_a) | ((uint64_t)quant_rd32(qh_b) << 32));
    return _mm512_mask_add_epi8(q, k, q, _mm512_set1_epi8(16));
}

/* sum(u y) - z sum(y) per 4 bytes, for unsigned quants u with zero point z (0: none). */
static KX_TARGET inline __m512i kz_dot_zp(__m512i u, __m512i y, int z) {
    const __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u, y);
    if (!z) return p;
    return _mm512_sub_epi32(p, _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8((char)z), y));
}

/* The weight quants of the two blocks at w and w + one block: the vpdpbusd operand. */
static KX_TARGET inline __m512i kz_q4_1_wq(const uint8_t *w) { return kz_nibbles2(w + 4, w + sizeof(block_q4_1) + 4); }
static KX_TARGET inline __m512i kz_q5_0_wq(const uint8_t *w) {
    const uint8_t *w2 = w + sizeof(block_q5_0);
    return kz_add_q5_high(kz_nibbles2(w + 6, w2 + 6), w + 2, w2 + 2);
}
static KX_TARGET inline __m512i kz_q5_1_wq(const uint8_t *w) {
    const uint8_t *w2 = w + sizeof(block_q5_1);
    return kz_add_q5_high(kz_nibbles2(w + 8, w2 + 8), w + 4, w2 + 4);
}

/* As KX_DOT32 with pairs of blocks: T's kz_<T>_wq against the activation
 * pair's quants at YOFF, zero point Z (kz_dot_zp); MINS as there; tail
 * blocks use the 256-bit BLOCK1. Rows of a dot_rows call each keep their
 * own accumulators and tail sum. */
#define KZ_DOT32(name, WSZ, XSZ, T, YOFF, Z, BLOCK1, MINS)                                                             \
    KX_INLINE void name##_r(int64_t n, const void *wv, const void *xv, size_t xst, const int NR, float *out) {         \
        const uint8_t *w = wv;                                                                                         \
        const int64_t nb = n / 32;                                                                                     \
        const int ws = (int)(WSZ), xs = (int)(XSZ);                                                                    \
        __m512 acc[CPU_DOT_ROWS][4];                                                                                   \
        __m256 accm[CPU_DOT_ROWS];                                                                                     \
        for (int t = 0; t < NR; t++) {                                                                                 \
            for (int k = 0; k < 4; k++) acc[t][k] = _mm512_setzero_ps();                                               \
            accm[t] = _mm256_setzero_ps();                                                                             \
        }                                                                                                              \
        const __m512i pair_idx = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);                    \
        int64_t b = 0;                                                                                                 \
        for (; b + 8 <= nb; b += 8) {                                                                                  \
            const uint8_t *wb = w + b * ws;                                                                            \
            KX_PREFETCH_RANGE(wb, 8 * (WSZ));                                                                          \
            const __m256 dw = kz_f16x8(wb, ws / 2);                                                                    \
            __m512 d[CPU_DOT_ROWS];                                                                                    \
            for (int t = 0; t < NR; t++)                                                                               \
                d[t] = _mm512_castps256_ps512(_mm256_mul_ps(dw, kz_f16x8(KX_XROW(xv, xst, t) + b * xs, xs / 2)));      \
            for (int k = 0; k < 4; k++) {                                                                              \
                const __m512i q = kz_##T##_wq(wb + 2 * k * ws);                                                        \
                const __m512i idx = _mm512_add_epi32(pair_idx, _mm512_set1_epi32(2 * k));                              \
                for (int t = 0; t < NR; t++) {                                                                         \
                    const uint8_t *xb = KX_XROW(xv, xst, t) + (b + 2 * k) * xs;                                        \
                    const __m512i p = kz_dot_zp(q, kz_pair256(xb + (YOFF), xb + xs + (YOFF)), Z);                      \
                    acc[t][k] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_permutexvar_ps(idx, d[t]), acc[t][k]);   \
                }                                                                                                      \
            }                                                                                                          \
            if (MINS) {                                                                                                \
                const __m256 mw = kz_f16x8(wb + 2, ws / 2);                                                            \
                for (int t = 0; t < NR; t++)                                                                           \
                    accm[t] = _mm256_fmadd_ps(mw, kz_f16x8(KX_XROW(xv, xst, t) + b * xs + 2, xs / 2), accm[t]);        \
            }                                                                                                          \
        }                                                                                                              \
        for (int t = 0; t < NR; t++) {                                                                                 \
            float sum = _mm512_reduce_add_ps(                                                                          \
                _mm512_add_ps(_mm512_add_ps(acc[t][0], acc[t][1]), _mm512_add_ps(acc[t][2], acc[t][3])));             \
            sum += kx_hsum(accm[t]);                                                                                   \
            for (int64_t c = b; c < nb; c++) {                                                                         \
                const uint8_t *wb = w + c * ws, *xb = KX_XROW(xv, xst, t) + c * xs;                                    \
                const __m256 p = _mm256_cvtepi32_ps(BLOCK1(wb, xb));                                                   \
                sum += kx_hsum(p) * (kx_f16(wb) * kx_f16(xb));                                                         \
                if (MINS) sum += kx_f16(wb + 2) * kx_f16(xb + 2);                                                      \
            }                                                                                                          \
            out[t] = sum;                                                                                              \
        }                                                                                                              \
    }                                                                                                                  \
    KX_ROWS_ENTRY(name, name##_r)

KZ_DOT32(kz_dot_q4_1, sizeof(block_q4_1), sizeof(block_q8_1), q4_1, offsetof(block_q8_1, qs), 0, kx_q4_1_block, 1)
KZ_DOT32(kz_dot_q5_0, sizeof(block_q5_0), sizeof(block_q8_0), q5_0, offsetof(block_q8_0, qs), 16, kx_q5_0_block, 0)
KZ_DOT32(kz_dot_q5_1, sizeof(block_q5_1), sizeof(block_q8_1), q5_1, offsetof(block_q8_1, qs), 0, kx_q5_1_block, 1)

/* Q8_0 against CPU_ACT_Q8_0_Z128 (kernels.h): as KZ_DOT32, but each pair's
 * sums start at the activations' -128 sum(q), the zero point's term of
 * reading the signed weights as w + 128 (one vpdpbusd per pair, not three
 * instructions). */
KX_INLINE void kz_rows_q8_0(int64_t n, const void *wv, const void *xv, size_t xst, const int NR, float *out) {
    const uint8_t *w = wv;
    const int64_t nb = n / 32;
    const int ws = (int)sizeof(block_q8_0);
    __m512 acc[CPU_DOT_ROWS][4];
    for (int t = 0; t < NR; t++)
        for (int k = 0; k < 4; k++) acc[t][k] = _mm512_setzero_ps();
    const __m512i pair_idx = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    int64_t b = 0;
    size_t xo = 0; /* bytes of the rows' groups so far */
    for (; b + 8 <= nb; b += 8, xo += CPU_ACT_Q8_0_Z128_GROUP) {
        const uint8_t *wb = w + b * ws;
        KX_PREFETCH_RANGE(wb, 8 * ws);
        const __m256 dw = kz_f16x8(wb, ws / 2);
        __m512 d[CPU_DOT_ROWS];
        for (int t = 0; t < NR; t++)
            d[t] = _mm512_castps256_ps512(
                _mm256_mul_ps(dw, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(KX_XROW(xv, xst, t) + xo)))));
        for (int k = 0; k < 4; k++) {
            const uint8_t *wp = wb + 2 * k * ws;
            const __m512i q = _mm512_xor_si512(kz_pair256(wp + 2, wp + ws + 2), flip);
            const __m512i idx = _mm512_add_epi32(pair_idx, _mm512_set1_epi32(2 * k));
            for (int t = 0; t < NR; t++) {
                const uint8_t *xp = KX_XROW(xv, xst, t) + xo + 16 + 128 * k;
                const __m512i p = _mm512_dpbusd_epi32(kz_load(xp), q, kz_load(xp + 64));
                acc[t][k] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_permutexvar_ps(idx, d[t]), acc[t][k]);
            }
        }
    }
    for (int t = 0; t < NR; t++) {
        float sum = _mm512_reduce_add_ps(
            _mm512_add_ps(_mm512_add_ps(acc[t][0], acc[t][1]), _mm512_add_ps(acc[t][2], acc[t][3])));
        const uint8_t *x = KX_XROW(xv, xst, t) + xo;
        for (int64_t c = b; c < nb; c++, x += sizeof(block_q8_0)) { /* past the last group: plain Q8_0 blocks */
            const uint8_t *wb = w + c * ws;
            sum += kx_hsum(_mm256_cvtepi32_ps(kx_q8_0_block(wb, x))) * (kx_f16(wb) * kx_f16(x));
        }
        out[t] = sum;
    }
}
KX_ROWS_ENTRY(kz_dot_q8_0, kz_rows_q8_0)

/* acc + dk * (the 4 blocks' sums): lo and hi, the low and high nibbles of the
 * qs of 4 Q4_0 blocks, y the matching half of a CPU_ACT_Q8_0_G8 group (the
 * -8 sum(q) starts, the low halves, the high halves). */
static KX_TARGET inline __m512 kz_q4_0_quad(__m512i lo, __m512i hi, const uint8_t *y, __m512 dk, __m512 acc) {
    __m512i p = _mm512_dpbusd_epi32(kz_load(y), lo, kz_load(y + 64));
    p = _mm512_dpbusd_epi32(p, hi, kz_load(y + 128));
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), dk, acc);
}

/* The plain Q4_0 blocks past a row's last group, against plain Q8_0 ones. */
static KX_TARGET inline float kz_q4_0_tail(int64_t nb, const uint8_t *w, const uint8_t *x) {
    float sum = 0;
    for (int64_t b = 0; b < nb; b++, w += sizeof(block_q4_0), x += sizeof(block_q8_0))
        sum += kx_hsum(_mm256_cvtepi32_ps(kx_q4_0_block(w, x))) * (kx_f16(w) * kx_f16(x));
    return sum;
}

/*
 * Q4_0 takes four blocks per zmm instead of two: W = [qs a | qs b | qs c | qs d]
 * splits into the low nibbles (elements 0..15 of each block) and the high
 * ones (16..31), so each block's 32 products end up in its own 128-bit lane.
 * The activations come prepared as CPU_ACT_Q8_0_G8 (kernels.h): the matching
 * 16-byte halves of 4 blocks already sit together, one load each and no
 * shuffles per weight row, and the sums start from -8 sum(q), the zero
 * point's term. Reading plain Q8_0 blocks and regrouping them for every
 * weight row took 23.5 cycles per 8 blocks where this takes 12.6 (llvm-mca,
 * Cascade Lake).
 */
KX_INLINE void kz_rows_q4_0_layout(int64_t n, const uint8_t *w, const void *xv, size_t xst, int x8,
                                                 const int NR, float *out) {
    const int64_t nb = n / 32;
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    __m512 acc[CPU_DOT_ROWS][2];
    for (int t = 0; t < NR; t++) acc[t][0] = acc[t][1] = _mm512_setzero_ps();
    const __m512i quad0 = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    const __m512i quad[2] = {quad0, _mm512_add_epi32(quad0, _mm512_set1_epi32(4))};
    int64_t b = 0;
    size_t xo = 0; /* bytes of the rows' groups so far */
    for (; b + 8 <= nb; b += 8, w += 8 * 18, xo += CPU_ACT_Q8_0_G8_GROUP) {
        KX_PREFETCH_RANGE(w, 8 * 18);
        const __m256 dw = x8 ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)w)) : kz_f16x8(w, 9);
        __m256 d[CPU_DOT_ROWS];
        for (int t = 0; t < NR; t++)
            d[t] = _mm256_mul_ps(dw, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(KX_XROW(xv, xst, t) + xo))));
        for (int h = 0; h < 2; h++) {
            __m512i W;
            if (x8) {
                W = kz_load(w + 16 + 64 * h);
            } else { /* the qs of 4 blocks, 18 bytes apart */
                const uint8_t *w4 = w + 72 * h + 2;
                W = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)w4));
                W = _mm512_inserti32x4(W, _mm_loadu_si128((const __m128i *)(w4 + 18)), 1);
                W = _mm512_inserti32x4(W, _mm_loadu_si128((const __m128i *)(w4 + 36)), 2);
                W = _mm512_inserti32x4(W, _mm_loadu_si128((const __m128i *)(w4 + 54)), 3);
            }
            const __m512i lo = _mm512_and_si512(W, m4), hi = _mm512_and_si512(_mm512_srli_epi16(W, 4), m4);
            for (int t = 0; t < NR; t++)
                acc[t][h] = kz_q4_0_quad(lo, hi, KX_XROW(xv, xst, t) + xo + 16 + 192 * h,
                                         _mm512_permutexvar_ps(quad[h], _mm512_castps256_ps512(d[t])), acc[t][h]);
        }
    }
    for (int t = 0; t < NR; t++)
        out[t] = _mm512_reduce_add_ps(_mm512_add_ps(acc[t][0], acc[t][1])) +
                 kz_q4_0_tail(nb - b, w, KX_XROW(xv, xst, t) + xo);
}

KX_INLINE void kz_rows_q4_0(int64_t n, const void *w, const void *xv, size_t xst, const int NR, float *out) {
    kz_rows_q4_0_layout(n, w, xv, xst, 0, NR, out);
}
KX_ROWS_ENTRY(kz_dot_q4_0, kz_rows_q4_0)

/* Q4_0 stored as CPU_W_Q4_0_X8 (kernels.h), against CPU_ACT_Q8_0_G8: as
 * kz_dot_q4_0, but a group's 8 scales and each half's four blocks of
 * nibbles are one load each. In cache on one thread: 13-15 -> 22 GB/s. */
KX_INLINE void kz_rows_q4_0_x8(int64_t n, const void *w, const void *xv, size_t xst, const int NR, float *out) {
    kz_rows_q4_0_layout(n, w, xv, xst, 1, NR, out);
}
KX_ROWS_ENTRY(kz_dot_q4_0_x8, kz_rows_q4_0_x8)

/* ---- K-quants ---- */

/*
 * Q4_K and Q5_K against CPU_ACT_Q8_K_R (kernels.h), two blocks per step.
 * The 64-byte nibble runs of a block split, with one shift, into the low
 * nibbles [sub-blocks 0 | 2] and the high ones [1 | 3] (then 4..7), which
 * is the order the activations were regrouped in: no broadcast or variable
 * shift per run. vpdpbusd sums 4 products per int32 (at most 4 * 31 * 127,
 * so an int16 holds it); vpackssdw pairs two such registers into 16-bit
 * words that one vpmaddwd/vpdpwssd weighs with the sub-block scales, two
 * scale shuffles per block instead of four. The scales of two blocks are
 * unpacked in one 256-bit pass, the mins meet the activations' sub-block
 * sums in one vpmaddwd, and the fp16 d/dmin pairs of both blocks are
 * converted and multiplied by dy at once. llvm-mca (Cascade Lake): 65
 * vector uops per two blocks, where pairing 32-byte runs with plain Q8_K
 * took 47 per block; in cache 8.5 -> 11.4 GB/s on one thread.
 */

/* kx_k4_unpack of the blocks with scales at a and b: [sc mn of a | sc mn of b]. */
static KX_TARGET inline __m256i kz_k4_unpack2(const uint8_t *a, const uint8_t *b) {
    const __m256i v = _mm256_loadu2_m128i((const __m128i *)b, (const __m128i *)a);
    const __m256i lo = _mm256_and_si256(v, _mm256_set1_epi8(0x3f));
    const __m256i u2 = _mm256_srlv_epi32(_mm256_shuffle_epi32(v, 0x0a), _mm256_setr_epi32(0, 4, 0, 0, 0, 4, 0, 0));
    const __m256i top = _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(v, 6), _mm256_set1_epi8(0x03)), 4);
    const __m256i hi = _mm256_or_si256(_mm256_and_si256(u2, _mm256_set1_epi8(0x0f)), top);
    return _mm256_unpacklo_epi32(lo, hi);
}

/* One block's nibbles (and Q5_K's fifth bits from qh, or NULL) as q[4]: q[r] holds
 * sub-blocks a | a + 2 (a = 0, 1, 4, 5), matching CPU_ACT_Q8_K_R's 64-byte runs. */
static KX_TARGET inline void kz_k45_q(const uint8_t *qs, const uint8_t *qh, __m512i q[4]) {
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    const __m512i v0 = kz_load(qs), v1 = kz_load(qs + 64);
    q[0] = _mm512_and_si512(v0, m4);
    q[1] = _mm512_and_si512(_mm512_srli_epi16(v0, 4), m4);
    q[2] = _mm512_and_si512(v1, m4);
    q[3] = _mm512_and_si512(_mm512_srli_epi16(v1, 4), m4);
    if (qh) { /* bits a and a + 2 of qh[l] */
        const __m512i h = kz_bcast256(qh), sixteen = _mm512_set1_epi8(16);
        for (int r = 0; r < 4; r++) {
            const int a = (r & 1) + 4 * (r >> 1);
            const __m512i bit = _mm512_inserti64x4(_mm512_set1_epi8((char)(1 << a)), _mm256_set1_epi8((char)(1 << (a + 2))), 1);
            q[r] = _mm512_mask_add_epi8(q[r], _mm512_test_epi8_mask(h, bit), q[r], sixteen);
        }
    }
}

/* The scale words matching kz_k45_dot's two products, from scw (the 8 scale
 * words in each 128-bit lane): 4 x sc[2a], 4 x sc[2a + 1] in lane pair a
 * (s[1]: 4 sub-blocks on). */
static KX_TARGET inline void kz_k45_s(__m512i scw, __m512i s[2]) {
    const __m512i sel0 = _mm512_setr_epi64(0x0100010001000100LL, 0x0302030203020302LL, 0x0100010001000100LL,
                                           0x0302030203020302LL, 0x0504050405040504LL, 0x0706070607060706LL,
                                           0x0504050405040504LL, 0x0706070607060706LL);
    s[0] = _mm512_shuffle_epi8(scw, sel0);
    s[1] = _mm512_shuffle_epi8(scw, _mm512_add_epi8(sel0, _mm512_set1_epi8(8)));
}

/* Sum over one block of sc_j * (q . y) for its 8 sub-blocks j, spread over 16 int32
 * lanes (q from kz_k45_q, s from kz_k45_s, y a CPU_ACT_Q8_K_R block). */
static KX_TARGET inline __m512i kz_k45_dot(const __m512i q[4], const __m512i s[2], const uint8_t *y) {
    const __m512i z = _mm512_setzero_si512();
    /* packs(q[0] . y, q[1] . y): 128-bit lanes 0, 1 hold words of sub-blocks [0 | 1], lanes 2, 3 of [2 | 3] */
    const __m512i p0 = _mm512_packs_epi32(_mm512_dpbusd_epi32(z, q[0], kz_load(y)), _mm512_dpbusd_epi32(z, q[1], kz_load(y + 64)));
    const __m512i p1 = _mm512_packs_epi32(_mm512_dpbusd_epi32(z, q[2], kz_load(y + 128)), _mm512_dpbusd_epi32(z, q[3], kz_load(y + 192)));
    return _mm512_dpwssd_epi32(_mm512_madd_epi16(p0, s[0]), p1, s[1]);
}

/* Q4_K (five = 0) and Q5_K: `dot`'s loop with per-row accumulators (kernels_x86.h). */
KX_INLINE void kz_rows_q45_k(int64_t n, const uint8_t *w, const void *xv, size_t xst, int five, const int NR,
                             float *out) {
    const size_t bs = five ? sizeof(block_q5_K) : sizeof(block_q4_K), xs = CPU_ACT_Q8_K_R_BLOCK;
    const size_t qs_off = five ? offsetof(block_q5_K, qs) : offsetof(block_q4_K, qs);
    const size_t sc_off = offsetof(block_q4_K, scales), qh_off = offsetof(block_q5_K, qh);
    const __m512i ia = _mm512_set1_epi32(0), ib = _mm512_set1_epi32(2);
    const __m512i im = _mm512_setr_epi32(1, 1, 1, 1, 1, 1, 1, 1, 3, 3, 3, 3, 3, 3, 3, 3);
    __m512 acc[CPU_DOT_ROWS], accm[CPU_DOT_ROWS];
    for (int t = 0; t < NR; t++) acc[t] = accm[t] = _mm512_setzero_ps();
    const int64_t nb = n / QK_K;
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2, w += 2 * bs) {
        KX_PREFETCH_RANGE(w, 2 * bs);
        /* words [sc mn of block a | sc mn of block b]; the mins meet [0 | sums] of each block */
        const __m512i sm = _mm512_cvtepu8_epi16(kz_k4_unpack2(w + sc_off, w + bs + sc_off));
        __m512i qa[4], qb[4], sa[2], sb[2];
        kz_k45_q(w + qs_off, five ? w + qh_off : NULL, qa);
        kz_k45_q(w + bs + qs_off, five ? w + bs + qh_off : NULL, qb);
        kz_k45_s(_mm512_shuffle_i32x4(sm, sm, 0x00), sa);
        kz_k45_s(_mm512_shuffle_i32x4(sm, sm, 0xaa), sb);
        /* [d, dmin] of block a, then of b */
        const __m128 dh = _mm_cvtph_ps(
            _mm_unpacklo_epi32(_mm_cvtsi32_si128((int)quant_rd32(w)), _mm_cvtsi32_si128((int)quant_rd32(w + bs))));
        for (int t = 0; t < NR; t++) {
            const uint8_t *x = KX_XROW(xv, xst, t) + b * xs;
            const __m512i ys = _mm512_inserti64x4(_mm512_castsi256_si512(kx_load(x + 256)), kx_load(x + xs + 256), 1);
            const __m512 msum = _mm512_cvtepi32_ps(_mm512_madd_epi16(sm, ys));
            const __m512i isa = kz_k45_dot(qa, sa, x), isb = kz_k45_dot(qb, sb, x + xs);
            const __m128 dy = _mm_castsi128_ps(_mm_unpacklo_epi64(_mm_loadl_epi64((const __m128i *)(x + 288)),
                                                                 _mm_loadl_epi64((const __m128i *)(x + xs + 288))));
            const __m512 dd = _mm512_castps128_ps512(_mm_mul_ps(dh, dy));
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isa), _mm512_permutexvar_ps(ia, dd), acc[t]);
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isb), _mm512_permutexvar_ps(ib, dd), acc[t]);
            accm[t] = _mm512_fmadd_ps(msum, _mm512_permutexvar_ps(im, dd), accm[t]);
        }
    }
    for (int t = 0; t < NR; t++) {
        float sum = _mm512_reduce_add_ps(acc[t]) - _mm512_reduce_add_ps(accm[t]);
        if (b < nb) { /* an odd last block */
            const uint8_t *x = KX_XROW(xv, xst, t) + b * xs;
            const __m256i sm = _mm256_cvtepu8_epi16(kx_k4_unpack(w + sc_off));
            const __m256 msum = _mm256_cvtepi32_ps(_mm256_madd_epi16(sm, kx_load(x + 256)));
            __m512i q[4], s[2];
            kz_k45_q(w + qs_off, five ? w + qh_off : NULL, q);
            kz_k45_s(_mm512_broadcast_i32x4(_mm256_castsi256_si128(sm)), s);
            const __m512i is = kz_k45_dot(q, s, x);
            const float dy = quant_rd_f32(x + 288);
            sum += _mm512_reduce_add_ps(_mm512_cvtepi32_ps(is)) * (kx_f16(w) * dy) - kx_hsum(msum) * (kx_f16(w + 2) * dy);
        }
        out[t] = sum;
    }
}

KX_INLINE void kz_rows_q4_k(int64_t n, const void *w, const void *xv, size_t xst, const int NR, float *out) {
    kz_rows_q45_k(n, w, xv, xst, 0, NR, out);
}
KX_INLINE void kz_rows_q5_k(int64_t n, const void *w, const void *xv, size_t xst, const int NR, float *out) {
    kz_rows_q45_k(n, w, xv, xst, 1, NR, out);
}
KX_ROWS_ENTRY(kz_dot_q4_k, kz_rows_q4_k)
KX_ROWS_ENTRY(kz_dot_q5_k, kz_rows_q5_k)

/* Q6_K: vpdpbusd sums 4 products per int32 (at most 4 * 63 * 127, within int16), so
 * each 128-bit lane holds one 16-element sub-block; vpackssdw pairs sub-blocks j and
 * j + 4 into one register of words that a single vpdpwssd weighs with their scales. */
KX_INLINE void kz_rows_q6_k(int64_t n, const void *wv, const void *xv, size_t xst, const int NR, float *out) {
    const uint8_t *w = wv;
    const __m512i m4 = _mm512_set1_epi8(0x0f), m30 = _mm512_set1_epi8(0x30), z = _mm512_setzero_si512();
    const __m512i qh_shift = _mm512_setr_epi64(0, 0, 0, 0, 2, 2, 2, 2);
    /* lane L: scale word L four times, then word L + 4 four times */
    const __m512i sel = _mm512_setr_epi64(0x0100010001000100LL, 0x0908090809080908LL, 0x0302030203020302LL,
                                          0x0b0a0b0a0b0a0b0aLL, 0x0504050405040504LL, 0x0d0c0d0c0d0c0d0cLL,
                                          0x0706070607060706LL, 0x0f0e0f0e0f0e0f0eLL);
    __m512 acc[CPU_DOT_ROWS];
    for (int t = 0; t < NR; t++) acc[t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < n / QK_K; b++, w += sizeof(block_q6_K)) {
        KX_PREFETCH_RANGE(w, sizeof(block_q6_K));
        const __m256i sc = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(w + offsetof(block_q6_K, scales))));
        const __m512i scw = _mm512_castsi256_si512(sc);
        const uint8_t *ql = w + offsetof(block_q6_K, ql);
        const uint8_t *qh = w + offsetof(block_q6_K, qh);
        __m512i isum[CPU_DOT_ROWS];
        for (int t = 0; t < NR; t++) isum[t] = z;
        for (int h = 0; h < 2; h++) {
            /* elements 0..63 of this half (low nibbles) and 64..127 (high nibbles), 2 bits each from qh */
            const __m512i lo = kz_load(ql + 64 * h);
            const __m512i hb = _mm512_srlv_epi64(kz_bcast256(qh + 32 * h), qh_shift);
            const __m512i g01 =
                _mm512_or_si512(_mm512_and_si512(lo, m4), _mm512_and_si512(_mm512_slli_epi16(hb, 4), m30));
            const __m512i g23 =
                _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(lo, 4), m4), _mm512_and_si512(hb, m30));
            const __m512i sh = h ? _mm512_shuffle_i32x4(scw, scw, 0x55) : _mm512_shuffle_i32x4(scw, scw, 0x00);
            const __m512i s = _mm512_shuffle_epi8(sh, sel);
            for (int t = 0; t < NR; t++) {
                /* lane L: words of sub-block 8h + L, then of 8h + 4 + L */
                const uint8_t *y = KX_XROW(xv, xst, t) + b * sizeof(block_q8_K) + offsetof(block_q8_K, qs);
                const __m512i p = _mm512_packs_epi32(_mm512_dpbusd_epi32(z, g01, kz_load(y + 128 * h)),
                                                     _mm512_dpbusd_epi32(z, g23, kz_load(y + 128 * h + 64)));
                isum[t] = _mm512_dpwssd_epi32(isum[t], p, s);
            }
        }
        const float dw = kx_f16(w + offsetof(block_q6_K, d));
        for (int t = 0; t < NR; t++) {
            /* quants are u - 32: subtract 32 * sum_j sc_j * bsums_j */
            const uint8_t *x = KX_XROW(xv, xst, t) + b * sizeof(block_q8_K);
            const __m256i off = _mm256_madd_epi16(kx_load(x + offsetof(block_q8_K, bsums)), sc);
            const __m512i is = _mm512_sub_epi32(isum[t], _mm512_zextsi256_si512(_mm256_slli_epi32(off, 5)));
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is), _mm512_set1_ps(quant_rd_f32(x) * dw), acc[t]);
        }
    }
    for (int t = 0; t < NR; t++) out[t] = _mm512_reduce_add_ps(acc[t]);
}
KX_ROWS_ENTRY(kz_dot_q6_k, kz_rows_q6_k)

/* sum(q) of a block's 32 int8 quants: int32 per 4 bytes, then across. */
static KX_TARGET inline int32_t kz_sum_q8(__m256i q) {
    const __m256i s32 = kx_dot_us(_mm256_set1_epi8(1), q);
    __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s32), _mm256_extracti128_si256(s32, 1));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4e));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xb1));
    return _mm_cvtsi128_si32(s4);
}

/* x -> CPU_ACT_Q8_0_G8 (kernels.h): the Q8_0 quantization of x (the SIMD
 * block quantizer, the same bits as the scalar code), regrouped. */
static KX_TARGET void kz_prep_q8_0_g8(const float *x, void *dst, int64_t n) {
    uint8_t *o = dst;
    const int64_t groups = n / 256;
    for (int64_t g = 0; g < groups; g++, x += 256, o += CPU_ACT_Q8_0_G8_GROUP) {
        for (int h = 0; h < 2; h++) { /* blocks 4h..4h+3 */
            uint8_t *half = o + 16 + 192 * h;
            for (int k = 0; k < 4; k++) {
                uint16_t d16;
                const __m256i q = kx_quant_q8_block(x + 32 * (4 * h + k), &d16);
                quant_wr16(o + 2 * (4 * h + k), d16);
                _mm_storeu_si128((__m128i *)(half + 64 + 16 * k), _mm256_castsi256_si128(q));
                _mm_storeu_si128((__m128i *)(half + 128 + 16 * k), _mm256_extracti128_si256(q, 1));
                /* then three zeros */
                _mm_storeu_si128((__m128i *)(half + 16 * k), _mm_cvtsi32_si128(-8 * kz_sum_q8(q)));
            }
        }
    }
    kx_prep_q8_0(x, o, n % 256);
}

/* x -> CPU_ACT_Q8_0_Z128 (kernels.h): the Q8_0 quantization of x (the SIMD
 * block quantizer, the same bits as the scalar code), with the sums' starts. */
static KX_TARGET void kz_prep_q8_0_z128(const float *x, void *dst, int64_t n) {
    uint8_t *o = dst;
    for (int64_t g = 0; g < n / 256; g++, x += 256, o += CPU_ACT_Q8_0_Z128_GROUP)
        for (int k = 0; k < 8; k++) {
            uint16_t d16;
            const __m256i q = kx_quant_q8_block(x + 32 * k, &d16);
            uint8_t *pair = o + 16 + 128 * (k / 2);
            quant_wr16(o + 2 * k, d16);
            _mm256_storeu_si256((__m256i *)(pair + 64 + 32 * (k % 2)), q);
            /* then seven zeros */
            _mm256_storeu_si256((__m256i *)(pair + 32 * (k % 2)), _mm256_zextsi128_si256(_mm_cvtsi32_si128(-128 * kz_sum_q8(q))));
        }
    kx_prep_q8_0(x, o, n % 256);
}

/* x -> CPU_ACT_Q8_K_R (kernels.h): each block quantized as Q8_K (the same
 * bits as the scalar code), its 32-byte runs regrouped, the sums of 16 paired. */
static KX_TARGET void kz_prep_q8_k_r(const float *x, void *dst, int64_t n) {
    uint8_t *o = dst;
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K, o += CPU_ACT_Q8_K_R_BLOCK) {
        block_q8_K q;
        kx_prep_q8_k(x, &q, QK_K);
        for (int i = 0; i < 8; i++) memcpy(o + 32 * i, q.qs + 32 * cpu_act_q8_k_r_run(i), 32);
        int16_t sums[16] = {0};
        for (int j = 0; j < 8; j++) sums[8 + j] = (int16_t)(q.bsums[2 * j] + q.bsums[2 * j + 1]);
        memcpy(o + 256, sums, sizeof sums);
        memcpy(o + 288, &q.d, 4);
        memcpy(o + 292, &q.d, 4);
        memset(o + 296, 0, CPU_ACT_Q8_K_R_BLOCK - 296);
    }
}

/* Q4_0 weights in CPU_W_Q4_0_X8 (the backend repacks them at load). */
static cpu_type_kernels kz_q4_0_x8;

void cpu_kernels_fill_avx512(cpu_type_kernels t[WGML_DTYPE_COUNT]) {
    kx_fill(t);
    t[WGML_Q4_0].act_type = CPU_ACT_Q8_0_G8;
    t[WGML_Q4_0].prepare = kz_prep_q8_0_g8;
    KX_SET_DOT(t[WGML_Q4_0], kz_dot_q4_0);
    kz_q4_0_x8 = (cpu_type_kernels){.act_type = CPU_ACT_Q8_0_G8, .prepare = kz_prep_q8_0_g8, .dot = kz_dot_q4_0_x8,
                                    .dot_rows = kz_dot_q4_0_x8_rows, .to_float = cpu_w_q4_0_x8_to_float,
                                    .repack = cpu_w_q4_0_x8_repack};
    t[WGML_Q4_0].packed = &kz_q4_0_x8;
    KX_SET_DOT(t[WGML_Q4_1], kz_dot_q4_1);
    KX_SET_DOT(t[WGML_Q5_0], kz_dot_q5_0);
    KX_SET_DOT(t[WGML_Q5_1], kz_dot_q5_1);
    t[WGML_Q8_0].act_type = CPU_ACT_Q8_0_Z128;
    t[WGML_Q8_0].prepare = kz_prep_q8_0_z128;
    KX_SET_DOT(t[WGML_Q8_0], kz_dot_q8_0);
    for (uint32_t k = WGML_Q4_K; k <= WGML_Q5_K; k++) {
        t[k].act_type = CPU_ACT_Q8_K_R;
        t[k].prepare = kz_prep_q8_k_r;
    }
    KX_SET_DOT(t[WGML_Q4_K], kz_dot_q4_k);
    KX_SET_DOT(t[WGML_Q5_K], kz_dot_q5_k);
    KX_SET_DOT(t[WGML_Q6_K], kz_dot_q6_k);
}
#else
typedef int cpu_kernels_avx512_unused; /* not x86: nothing to build */
#endif
