/*
 * kernels_wasm.c - the CPU dot products with WebAssembly SIMD128 (the browser
 * build, compiled with -msimd128); kernels.c installs them over the scalar
 * ones. Every kernel computes the scalar reference's math (kernels.c), only
 * the float summation order differs.
 *
 * Integer kernels. WASM SIMD128 has no byte dot product, so 16 int8 weights
 * times 16 int8 activations become int16 products (i16x8.extmul), summed in
 * pairs and widened to int32 (dot_i8x16 below). Weight quants are made signed
 * first (Q4_0: nibble - 8, Q5_0: q - 16, Q6_K: q - 32, Q3_K: q - 4 where the
 * high bit is clear), which fits int8 and keeps every product exact. Sub-block
 * scales multiply the int32 lanes (i32x4.mul), the minimum terms of Q4_1/Q5_1
 * and the K-quants come from the activation sums (Q8_1's s, Q8_K's bsums) as
 * in the scalar code, and the float scale is applied once per block into a
 * f32x4 accumulator (32-element types) or per super-block (K-quants).
 *
 * F16 weights: no half-precision instructions, so the exact branch-free
 * conversion of kernels.c's f16_fast runs on four lanes at a time.
 */
#include "backend/cpu/kernels_impl.h"

#if defined(__wasm_simd128__)
#include "core/quant.h"
#include "core/quant_impl.h"

#include <wasm_simd128.h>

/* ---- helpers ---- */

static inline v128_t ld(const void *p) { return wasm_v128_load(p); }

static inline float hsum_f32(v128_t v) {
    return wasm_f32x4_extract_lane(v, 0) + wasm_f32x4_extract_lane(v, 1) + wasm_f32x4_extract_lane(v, 2) +
           wasm_f32x4_extract_lane(v, 3);
}

static inline int hsum_i32(v128_t v) {
    return wasm_i32x4_extract_lane(v, 0) + wasm_i32x4_extract_lane(v, 1) + wasm_i32x4_extract_lane(v, 2) +
           wasm_i32x4_extract_lane(v, 3);
}

/* Four int32 partial sums of the 16 products a[i] * b[i] (int8 lanes): the
 * products as int16 (extmul), two added per lane, then pairs widened to int32.
 * The int16 sum cannot overflow: one operand is always within -127..127 (Q8_0
 * activations) or the weights are small (K-quants: |q| <= 32 against Q8_K's
 * -128..127), so a lane holds at most 2 * 128 * 127. */
static inline v128_t dot_i8x16(v128_t a, v128_t b) {
    v128_t p = wasm_i16x8_add(wasm_i16x8_extmul_low_i8x16(a, b), wasm_i16x8_extmul_high_i8x16(a, b));
    return wasm_i32x4_extadd_pairwise_i16x8(p);
}

static inline float f16(const uint8_t *p) { return wgml_f16_to_f32(quant_rd16(p)); }

/* Four fp16 values -> f32, exactly (subnormals, inf and NaN included): the
 * exponent and mantissa moved into f32 position and scaled by 2^112. */
static inline v128_t f16x4(const uint8_t *p) {
    const v128_t h = wasm_u32x4_load16x4(p);
    const v128_t em = wasm_v128_and(h, wasm_i32x4_splat(0x7fff));
    const v128_t v = wasm_f32x4_mul(wasm_i32x4_shl(em, 13), wasm_f32x4_splat(0x1p112f));
    const v128_t special = wasm_i32x4_ge(em, wasm_i32x4_splat(0x7c00));
    const v128_t infnan =
        wasm_v128_or(wasm_i32x4_splat(0x7f800000), wasm_i32x4_shl(wasm_v128_and(em, wasm_i32x4_splat(0x3ff)), 13));
    const v128_t sign = wasm_i32x4_shl(wasm_v128_and(h, wasm_i32x4_splat(0x8000)), 16);
    return wasm_v128_or(wasm_v128_bitselect(infnan, v, special), sign);
}

/* 16 bytes of nibbles -> low nibbles, high nibbles. */
static inline void nibbles(const uint8_t *p, v128_t *lo, v128_t *hi) {
    const v128_t v = ld(p);
    *lo = wasm_v128_and(v, wasm_i8x16_splat(0x0f));
    *hi = wasm_u8x16_shr(v, 4);
}

/* Byte j of the result = 0x10 where bit j of the 16 bits at `bits` is set. */
static inline v128_t bits_to_0x10(uint32_t bits16) {
    const v128_t v = wasm_i8x16_swizzle(wasm_i32x4_splat((int32_t)bits16),
                                        wasm_i8x16_make(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1));
    const v128_t sel = wasm_i8x16_make(1, 2, 4, 8, 16, 32, 64, -128, 1, 2, 4, 8, 16, 32, 64, -128);
    return wasm_v128_and(wasm_i8x16_eq(wasm_v128_and(v, sel), sel), wasm_i8x16_splat(0x10));
}

/* ---- float weights ---- */

static float dot_f32(int64_t n, const void *wv, const void *xv) {
    const float *w = wv, *x = xv;
    v128_t a0 = wasm_f32x4_splat(0), a1 = a0, a2 = a0, a3 = a0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        a0 = wasm_f32x4_add(a0, wasm_f32x4_mul(ld(w + i), ld(x + i)));
        a1 = wasm_f32x4_add(a1, wasm_f32x4_mul(ld(w + i + 4), ld(x + i + 4)));
        a2 = wasm_f32x4_add(a2, wasm_f32x4_mul(ld(w + i + 8), ld(x + i + 8)));
        a3 = wasm_f32x4_add(a3, wasm_f32x4_mul(ld(w + i + 12), ld(x + i + 12)));
    }
    for (; i + 4 <= n; i += 4)
        a0 = wasm_f32x4_add(a0, wasm_f32x4_mul(ld(w + i), ld(x + i)));
    float sum = hsum_f32(wasm_f32x4_add(wasm_f32x4_add(a0, a1), wasm_f32x4_add(a2, a3)));
    for (; i < n; i++)
        sum += w[i] * x[i];
    return sum;
}

static float dot_f16(int64_t n, const void *wv, const void *xv) {
    const uint8_t *w = wv;
    const float *x = xv;
    v128_t a0 = wasm_f32x4_splat(0), a1 = a0;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        a0 = wasm_f32x4_add(a0, wasm_f32x4_mul(f16x4(w + 2 * i), ld(x + i)));
        a1 = wasm_f32x4_add(a1, wasm_f32x4_mul(f16x4(w + 2 * i + 8), ld(x + i + 4)));
    }
    float sum = hsum_f32(wasm_f32x4_add(a0, a1));
    for (; i < n; i++)
        sum += f16(w + 2 * i) * x[i];
    return sum;
}

static float dot_bf16(int64_t n, const void *wv, const void *xv) {
    const uint8_t *w = wv;
    const float *x = xv;
    v128_t a0 = wasm_f32x4_splat(0);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        a0 = wasm_f32x4_add(a0, wasm_f32x4_mul(wasm_i32x4_shl(wasm_u32x4_load16x4(w + 2 * i), 16), ld(x + i)));
    float sum = hsum_f32(a0);
    for (; i < n; i++)
        sum += wgml_bf16_to_f32(quant_rd16(w + 2 * i)) * x[i];
    return sum;
}

static void to_float_f16(const void *src, float *dst, int64_t n) {
    const uint8_t *s = src;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        wasm_v128_store(dst + i, f16x4(s + 2 * i));
    for (; i < n; i++)
        dst[i] = f16(s + 2 * i);
}

/* 4 weight rows x 4 f32 activation rows (prompts): each loaded vector serves 4 products. */
#define DOT4X4(name, LOADW, WBYTES)                                                                                    \
    static void name(int64_t n, const void *wv, size_t ws, const void *xv, size_t xs, float *out) {                    \
        const uint8_t *w = wv, *x = xv;                                                                                \
        v128_t acc[16];                                                                                                \
        for (int k = 0; k < 16; k++)                                                                                   \
            acc[k] = wasm_f32x4_splat(0);                                                                              \
        int64_t i = 0;                                                                                                 \
        for (; i + 4 <= n; i += 4) {                                                                                   \
            v128_t wr[4], xr[4];                                                                                       \
            for (int r = 0; r < 4; r++)                                                                                \
                wr[r] = LOADW(w + r * ws + (size_t)i * WBYTES);                                                        \
            for (int t = 0; t < 4; t++)                                                                                \
                xr[t] = ld(x + t * xs + (size_t)i * 4);                                                                \
            for (int r = 0; r < 4; r++)                                                                                \
                for (int t = 0; t < 4; t++)                                                                            \
                    acc[4 * r + t] = wasm_f32x4_add(acc[4 * r + t], wasm_f32x4_mul(wr[r], xr[t]));                     \
        }                                                                                                              \
        for (int r = 0; r < 4; r++)                                                                                    \
            for (int t = 0; t < 4; t++) {                                                                              \
                float s = hsum_f32(acc[4 * r + t]);                                                                    \
                for (int64_t j = i; j < n; j++)                                                                        \
                    s += (WBYTES == 4 ? quant_rd_f32(w + r * ws + (size_t)j * 4) : f16(w + r * ws + (size_t)j * 2)) *  \
                         quant_rd_f32(x + t * xs + (size_t)j * 4);                                                     \
                out[4 * r + t] = s;                                                                                    \
            }                                                                                                          \
    }
#define LOAD_F32(p) ld(p)
#define LOAD_F16(p) f16x4(p)
DOT4X4(dot4x4_f32, LOAD_F32, 4)
DOT4X4(dot4x4_f16, LOAD_F16, 2)

/* ---- 32-element blocks ---- */

static float dot_q8_0(int64_t n, const void *wv, const void *xv) {
    const uint8_t *w = wv, *x = xv;
    v128_t acc = wasm_f32x4_splat(0);
    for (int64_t b = 0; b < n / 32; b++, w += sizeof(block_q8_0), x += sizeof(block_q8_0)) {
        const uint8_t *q = w + offsetof(block_q8_0, qs), *y = x + offsetof(block_q8_0, qs);
        v128_t s = wasm_i32x4_add(dot_i8x16(ld(q), ld(y)), dot_i8x16(ld(q + 16), ld(y + 16)));
        acc = wasm_f32x4_add(acc, wasm_f32x4_mul(wasm_f32x4_convert_i32x4(s), wasm_f32x4_splat(f16(w) * f16(x))));
    }
    return hsum_f32(acc);
}

static float dot_q4_0(int64_t n, const void *wv, const void *xv) {
    const uint8_t *w = wv, *x = xv;
    v128_t acc = wasm_f32x4_splat(0);
    const v128_t eight = wasm_i8x16_splat(8);
    for (int64_t b = 0; b < n / 32; b++, w += sizeof(block_q4_0), x += sizeof(block_q8_0)) {
        const uint8_t *y = x + offsetof(block_q8_0, qs);
        v128_t lo, hi;
        nibbles(w + offsetof(block_q4_0, qs), &lo, &hi);
        v128_t s = wasm_i32x4_add(dot_i8x16(wasm_i8x16_sub(lo, eight), ld(y)),
                                  dot_i8x16(wasm_i8x16_sub(hi, eight), ld(y + 16)));
        acc = wasm_f32x4_add(acc, wasm_f32x4_mul(wasm_f32x4_convert_i32x4(s), wasm_f32x4_splat(f16(w) * f16(x))));
    }
    return hsum_f32(acc);
}

/* sum((q d + m) y dy) = d dy sum(q y) + m s */
static float dot_q4_1(int64_t n, const void *wv, const void *xv) {
    const uint8_t *w = wv, *x = xv;
    v128_t acc = wasm_f32x4_splat(0);
    float mins = 0;
    for (int64_t b = 0; b < n / 32; b++, w += sizeof(block_q4_1), x += sizeof(block_q8_1)) {
        const uint8_t *y = x + offsetof(block_q8_1, qs);
        v128_t lo, hi;
        nibbles(w + offsetof(block_q4_1, qs), &lo, &hi);
        v128_t s = wasm_i32x4_add(dot_i8x16(lo, ld(y)), dot_i8x16(hi, ld(y + 16)));
        acc = wasm_f32x4_add(acc, wasm_f32x4_mul(wasm_f32x4_convert_i32x4(s), wasm_f32x4_splat(f16(w) * f16(x))));
        mins += f16(w + offsetof(block_q4_1, m)) * f16(x + offsetof(block_q8_1, s));
    }
    return hsum_f32(acc) + mins;
}

/* The 5-bit quants of a Q5 block: nibbles | bit j of qh as 0x10. */
static inline void q5_bytes(const uint8_t *qh_p, const uint8_t *qs, v128_t *lo, v128_t *hi) {
    const uint32_t qh = quant_rd32(qh_p);
    nibbles(qs, lo, hi);
    *lo = wasm_v128_or(*lo, bits_to_0x10(qh & 0xffff));
    *hi = wasm_v128_or(*hi, bits_to_0x10(qh >> 16));
}

static float dot_q5_0(int64_t n, const void *wv, const void *xv) {
    const uint8_t *w = wv, *x = xv;
    v128_t acc = wasm_f32x4_splat(0);
    const v128_t sixteen = wasm_i8x16_splat(16);
    for (int64_t b = 0; b < n / 32; b++, w += sizeof(block_q5_0), x += sizeof(block_q8_0)) {
        const uint8_t *y = x + offsetof(block_q8_0, qs);
        v128_t lo, hi;
        q5_bytes(w + offsetof(block_q5_0, qh), w + offsetof(block_q5_0, qs), &lo, &hi);
        v128_t s = wasm_i32x4_add(dot_i8x16(wasm_i8x16_sub(lo, sixteen), ld(y)),
                                  dot_i8x16(wasm_i8x16_sub(hi, sixteen), ld(y + 16)));
        acc = wasm_f32x4_add(acc, wasm_f32x4_mul(wasm_f32x4_convert_i32x4(s), wasm_f32x4_splat(f16(w) * f16(x))));
    }
    return hsum_f32(acc);
}

static float dot_q5_1(int64_t n, const void *wv, const void *xv) {
    const uint8_t *w = wv, *x = xv;
    v128_t acc = wasm_f32x4_splat(0);
    float mins = 0;
    for (int64_t b = 0; b < n / 32; b++, w += sizeof(block_q5_1), x += sizeof(block_q8_1)) {
        const uint8_t *y = x + offsetof(block_q8_1, qs);
        v128_t lo, hi;
        q5_bytes(w + offsetof(block_q5_1, qh), w + offsetof(block_q5_1, qs), &lo, &hi);
        v128_t s = wasm_i32x4_add(dot_i8x16(lo, ld(y)), dot_i8x16(hi, ld(y + 16)));
        acc = wasm_f32x4_add(acc, wasm_f32x4_mul(wasm_f32x4_convert_i32x4(s), wasm_f32x4_splat(f16(w) * f16(x))));
        mins += f16(w + offsetof(block_q5_1, m)) * f16(x + offsetof(block_q8_1, s));
    }
    return hsum_f32(acc) + mins;
}

/* ---- K-quants against Q8_K ---- */

static inline const uint8_t *q8k_qs(const uint8_t *x) { return x + offsetof(block_q8_K, qs); }
static inline int q8k_bsum(const uint8_t *x, int j) {
    return (int16_t)quant_rd16(x + offsetof(block_q8_K, bsums) + 2 * j);
}

/* Q2_K, Q3_K and Q6_K share one walk (see kernels.c): element
 * e = 128 h + 32 p + 16 half + l belongs to sub-block 8 h + 2 p + half. */
static float dot_q2_k(int64_t n, const void *wv, const void *xv) {
    const uint8_t *w = wv, *x = xv;
    float sum = 0;
    const v128_t three = wasm_i8x16_splat(3);
    for (int64_t b = 0; b < n / QK_K; b++, w += sizeof(block_q2_K), x += sizeof(block_q8_K)) {
        const uint8_t *sc = w + offsetof(block_q2_K, scales), *qs = w + offsetof(block_q2_K, qs), *y = q8k_qs(x);
        int msum = 0;
        for (int j = 0; j < 16; j++)
            msum += (sc[j] >> 4) * q8k_bsum(x, j);
        v128_t isum = wasm_i32x4_splat(0);
        for (int h = 0; h < 2; h++)
            for (int half = 0; half < 2; half++) {
                const v128_t q = ld(qs + 32 * h + 16 * half);
                for (int p = 0; p < 4; p++) {
                    v128_t v = wasm_v128_and(wasm_u8x16_shr(q, 2 * p), three);
                    v128_t d = dot_i8x16(v, ld(y + 128 * h + 32 * p + 16 * half));
                    isum = wasm_i32x4_add(isum, wasm_i32x4_mul(d, wasm_i32x4_splat(sc[8 * h + 2 * p + half] & 0x0f)));
                }
            }
        sum += quant_rd_f32(x) * (f16(w + offsetof(block_q2_K, d)) * (float)hsum_i32(isum) -
                                  f16(w + offsetof(block_q2_K, dmin)) * (float)msum);
    }
    return sum;
}

static float dot_q3_k(int64_t n, const void *wv, const void *xv) {
    const uint8_t *w = wv, *x = xv;
    float sum = 0;
    int8_t sc[16];
    const v128_t three = wasm_i8x16_splat(3), four = wasm_i8x16_splat(4), zero = wasm_i8x16_splat(0);
    for (int64_t b = 0; b < n / QK_K; b++, w += sizeof(block_q3_K), x += sizeof(block_q8_K)) {
        const uint8_t *hm = w + offsetof(block_q3_K, hmask), *qs = w + offsetof(block_q3_K, qs), *y = q8k_qs(x);
        quant_q3k_scales(w + offsetof(block_q3_K, scales), sc);
        v128_t isum = wasm_i32x4_splat(0);
        for (int h = 0; h < 2; h++)
            for (int half = 0; half < 2; half++) {
                const v128_t q = ld(qs + 32 * h + 16 * half), m = ld(hm + 16 * half);
                for (int p = 0; p < 4; p++) {
                    /* the third bit is bit 4 h + p of hmask; clear means -4 */
                    v128_t clear = wasm_i8x16_eq(wasm_v128_and(m, wasm_i8x16_splat((int8_t)(1 << (4 * h + p)))), zero);
                    v128_t v =
                        wasm_i8x16_sub(wasm_v128_and(wasm_u8x16_shr(q, 2 * p), three), wasm_v128_and(clear, four));
                    v128_t d = dot_i8x16(v, ld(y + 128 * h + 32 * p + 16 * half));
                    isum = wasm_i32x4_add(isum, wasm_i32x4_mul(d, wasm_i32x4_splat(sc[8 * h + 2 * p + half])));
                }
            }
        sum += quant_rd_f32(x) * f16(w + offsetof(block_q3_K, d)) * (float)hsum_i32(isum);
    }
    return sum;
}

/* Q4_K and Q5_K: sub-block j of 32 is nibble j % 2 of the byte run j / 2,
 * and for Q5_K bit j of qh[l] its fifth bit. */
static float dot_q45_k(int64_t n, const uint8_t *w, const uint8_t *x, int five) {
    const size_t bsize = five ? sizeof(block_q5_K) : sizeof(block_q4_K);
    const size_t qs_off = five ? offsetof(block_q5_K, qs) : offsetof(block_q4_K, qs);
    const v128_t zero = wasm_i8x16_splat(0), bit4 = wasm_i8x16_splat(0x10);
    float sum = 0;
    for (int64_t b = 0; b < n / QK_K; b++, w += bsize, x += sizeof(block_q8_K)) {
        uint8_t sc[8], mn[8];
        quant_k4_unpack(w + offsetof(block_q4_K, scales), sc, mn);
        const uint8_t *qs = w + qs_off, *qh = w + offsetof(block_q5_K, qh), *y = q8k_qs(x);
        v128_t isum = wasm_i32x4_splat(0);
        int msum = 0;
        for (int j = 0; j < 8; j++) {
            v128_t d = wasm_i32x4_splat(0);
            for (int k = 0; k < 2; k++) {
                v128_t v = ld(qs + 32 * (j / 2) + 16 * k);
                v = (j & 1) ? wasm_u8x16_shr(v, 4) : wasm_v128_and(v, wasm_i8x16_splat(0x0f));
                if (five) {
                    v128_t hb = wasm_v128_and(ld(qh + 16 * k), wasm_i8x16_splat((int8_t)(1 << j)));
                    v = wasm_v128_or(v, wasm_v128_andnot(bit4, wasm_i8x16_eq(hb, zero)));
                }
                d = wasm_i32x4_add(d, dot_i8x16(v, ld(y + 32 * j + 16 * k)));
            }
            isum = wasm_i32x4_add(isum, wasm_i32x4_mul(d, wasm_i32x4_splat(sc[j])));
            msum += mn[j] * (q8k_bsum(x, 2 * j) + q8k_bsum(x, 2 * j + 1));
        }
        sum += quant_rd_f32(x) * (f16(w + offsetof(block_q4_K, d)) * (float)hsum_i32(isum) -
                                  f16(w + offsetof(block_q4_K, dmin)) * (float)msum);
    }
    return sum;
}

static float dot_q4_k(int64_t n, const void *w, const void *x) { return dot_q45_k(n, w, x, 0); }
static float dot_q5_k(int64_t n, const void *w, const void *x) { return dot_q45_k(n, w, x, 1); }

static float dot_q6_k(int64_t n, const void *wv, const void *xv) {
    const uint8_t *w = wv, *x = xv;
    float sum = 0;
    const v128_t m4 = wasm_i8x16_splat(0x0f), three = wasm_i8x16_splat(3), k32 = wasm_i8x16_splat(32);
    for (int64_t b = 0; b < n / QK_K; b++, w += sizeof(block_q6_K), x += sizeof(block_q8_K)) {
        const uint8_t *ql = w + offsetof(block_q6_K, ql), *qh = w + offsetof(block_q6_K, qh), *y = q8k_qs(x);
        const int8_t *sc = (const int8_t *)(w + offsetof(block_q6_K, scales));
        v128_t isum = wasm_i32x4_splat(0);
        /* group p of half h: nibble p / 2 of ql[64 h + 32 (p % 2) + r], pair p of qh[32 h + r] */
        for (int h = 0; h < 2; h++)
            for (int half = 0; half < 2; half++) {
                const v128_t hi = ld(qh + 32 * h + 16 * half);
                for (int p = 0; p < 4; p++) {
                    v128_t lo = ld(ql + 64 * h + 32 * (p % 2) + 16 * half);
                    lo = p / 2 ? wasm_u8x16_shr(lo, 4) : wasm_v128_and(lo, m4);
                    v128_t v = wasm_v128_or(lo, wasm_i8x16_shl(wasm_v128_and(wasm_u8x16_shr(hi, 2 * p), three), 4));
                    v128_t d = dot_i8x16(wasm_i8x16_sub(v, k32), ld(y + 128 * h + 32 * p + 16 * half));
                    isum = wasm_i32x4_add(isum, wasm_i32x4_mul(d, wasm_i32x4_splat(sc[8 * h + 2 * p + half])));
                }
            }
        sum += quant_rd_f32(x) * f16(w + offsetof(block_q6_K, d)) * (float)hsum_i32(isum);
    }
    return sum;
}

/* ---- the f32 GEMM micro-kernel (cpu_gemm_fn, kernels.h) ----
 * Columns in groups of 8 (two v128): MR x 2 accumulators, the panel's k row
 * loaded once per group and each token's x broadcast. Multiply then add, in
 * k order per lane (wasm has no fused multiply-add): the scalar kernel's
 * arithmetic, so the results are its bits. */
static inline void gemm_group(const int MR, int64_t kc, const float *x, size_t ldx, const float *wp, float *c,
                              size_t ldc, int nc, int add) {
    v128_t a0[CPU_GEMM_MR], a1[CPU_GEMM_MR];
    for (int r = 0; r < MR; r++) a0[r] = a1[r] = wasm_f32x4_splat(0.0f);
    for (int64_t k = 0; k < kc; k++) {
        const v128_t w0 = ld(wp + k * CPU_GEMM_NR), w1 = ld(wp + k * CPU_GEMM_NR + 4);
        for (int r = 0; r < MR; r++) {
            const v128_t xb = wasm_f32x4_splat(x[(size_t)r * ldx + k]);
            a0[r] = wasm_f32x4_add(a0[r], wasm_f32x4_mul(xb, w0));
            a1[r] = wasm_f32x4_add(a1[r], wasm_f32x4_mul(xb, w1));
        }
    }
    for (int r = 0; r < MR; r++) {
        float t[8], *o = c + (size_t)r * ldc;
        wasm_v128_store(t, a0[r]);
        wasm_v128_store(t + 4, a1[r]);
        for (int j = 0; j < nc; j++) o[j] = add ? o[j] + t[j] : t[j];
    }
}

void cpu_gemm_wasm(int64_t kc, const float *x, size_t ldx, const float *wp, float *c, size_t ldc, int mr, int nc,
                   int add) {
    for (int h = 0; h < nc; h += 8) {
        const int n = nc - h < 8 ? nc - h : 8;
        switch (mr) {
        case 6: gemm_group(6, kc, x, ldx, wp + h, c + h, ldc, n, add); break;
        case 5: gemm_group(5, kc, x, ldx, wp + h, c + h, ldc, n, add); break;
        case 4: gemm_group(4, kc, x, ldx, wp + h, c + h, ldc, n, add); break;
        case 3: gemm_group(3, kc, x, ldx, wp + h, c + h, ldc, n, add); break;
        case 2: gemm_group(2, kc, x, ldx, wp + h, c + h, ldc, n, add); break;
        default: gemm_group(1, kc, x, ldx, wp + h, c + h, ldc, n, add); break;
        }
    }
}

void cpu_kernels_fill_wasm(cpu_type_kernels t[WGML_DTYPE_COUNT]) {
    t[WGML_F32].dot = dot_f32;
    t[WGML_F32].dot4x4 = dot4x4_f32;
    t[WGML_F16].dot = dot_f16;
    t[WGML_F16].dot4x4 = dot4x4_f16;
    t[WGML_F16].to_float = to_float_f16;
    t[WGML_BF16].dot = dot_bf16;
    t[WGML_Q4_0].dot = dot_q4_0;
    t[WGML_Q4_1].dot = dot_q4_1;
    t[WGML_Q5_0].dot = dot_q5_0;
    t[WGML_Q5_1].dot = dot_q5_1;
    t[WGML_Q8_0].dot = dot_q8_0;
    t[WGML_Q2_K].dot = dot_q2_k;
    t[WGML_Q3_K].dot = dot_q3_k;
    t[WGML_Q4_K].dot = dot_q4_k;
    t[WGML_Q5_K].dot = dot_q5_k;
    t[WGML_Q6_K].dot = dot_q6_k;
}
#else
typedef int cpu_kernels_wasm_unused; /* not wasm with SIMD128: nothing to build */
#endif
