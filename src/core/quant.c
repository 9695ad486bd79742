/*
 * quant.c - reference conversions between f32 and every tensor type (quant.h):
 * the float types and the 32-element block types here, the 256-element
 * K-quants in quant_k.c.
 *
 * Block formats (little-endian; d, m, s are fp16 bits):
 *   Q4_0  d, 16 bytes of nibbles      x[j] = (q[j] - 8) * d
 *   Q4_1  d, m, 16 bytes of nibbles   x[j] = q[j] * d + m
 *   Q5_0  d, qh (32 bits), nibbles    x[j] = (q[j] | bit j of qh << 4) - 16) * d
 *   Q5_1  d, m, qh, nibbles           x[j] = (q[j] | bit j of qh << 4) * d + m
 *   Q8_0  d, 32 int8                  x[j] = q[j] * d
 *   Q8_1  d, s, 32 int8               x[j] = q[j] * d, s = d * sum(q)
 * Nibble byte i holds element i in its low half and element i + 16 in its
 * high half.
 *
 * The quantizers follow ggml's reference ("_ref") quantizers operation for
 * operation, so the bytes they produce match llama.cpp's for the same input:
 * Q4_0/Q5_0 take the scale from the signed value of largest magnitude (which
 * then lands exactly on -8 / -16) and round by truncating q + 0.5; Q8_0/Q8_1
 * use roundf (ties away from zero); Q4_1/Q5_1 span [min, max].
 */
#include "core/quant.h"

#include "core/dtype.h"
#include "core/fp16.h"
#include "core/quant_impl.h"

#include <float.h>
#include <math.h>
#include <string.h>

#if defined(__clang__)
/* Bit-exactness with other GGUF tools: never fuse a*b+c into one rounding. */
#pragma STDC FP_CONTRACT OFF
#endif

/* (int)(v) clamped to [lo, hi] without undefined behaviour for NaN or huge v.
 * For lo <= v < hi + 1 it is C's truncating conversion. */
static inline int trunc_clamp(float v, int lo, int hi) {
    if (!(v > (float)lo)) return lo;
    if (v >= (float)hi) return hi;
    return (int)v;
}

/* roundf clamped to the int8 range (NaN gives 0). */
static inline int8_t round_i8(float v) {
    if (!(v > -128.f)) return v != v ? 0 : -128;
    if (v > 127.f) return 127;
    return (int8_t)roundf(v);
}

/* ---- float types ---- */

static void dequant_f16(const uint8_t *src, float *dst, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        dst[i] = quant_rd_f16(src + 2 * i);
}

static void dequant_bf16(const uint8_t *src, float *dst, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        dst[i] = wgml_bf16_to_f32(quant_rd16(src + 2 * i));
}

static void quant_f16(const float *src, uint8_t *dst, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        quant_wr16(dst + 2 * i, wgml_f32_to_f16(src[i]));
}

static void quant_bf16(const float *src, uint8_t *dst, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        quant_wr16(dst + 2 * i, wgml_f32_to_bf16(src[i]));
}

/* ---- 32-element block types: decoding ---- */

static void dequant_q4_0(const uint8_t *src, float *dst, int64_t nb) {
    for (int64_t b = 0; b < nb; b++, src += sizeof(block_q4_0), dst += 32) {
        const float d = quant_rd_f16(src + offsetof(block_q4_0, d));
        const uint8_t *qs = src + offsetof(block_q4_0, qs);
        for (int j = 0; j < 16; j++) {
            dst[j] = (float)((qs[j] & 0x0f) - 8) * d;
            dst[j + 16] = (float)((qs[j] >> 4) - 8) * d;
        }
    }
}

static void dequant_q4_1(const uint8_t *src, float *dst, int64_t nb) {
    for (int64_t b = 0; b < nb; b++, src += sizeof(block_q4_1), dst += 32) {
        const float d = quant_rd_f16(src + offsetof(block_q4_1, d));
        const float m = quant_rd_f16(src + offsetof(block_q4_1, m));
        const uint8_t *qs = src + offsetof(block_q4_1, qs);
        for (int j = 0; j < 16; j++) {
            dst[j] = (float)(qs[j] & 0x0f) * d + m;
            dst[j + 16] = (float)(qs[j] >> 4) * d + m;
        }
    }
}

static void dequant_q5_0(const uint8_t *src, float *dst, int64_t nb) {
    for (int64_t b = 0; b < nb; b++, src += sizeof(block_q5_0), dst += 32) {
        const float d = quant_rd_f16(src + offsetof(block_q5_0, d));
        const uint32_t qh = quant_rd32(src + offsetof(block_q5_0, qh));
        const uint8_t *qs = src + offsetof(block_q5_0, qs);
        for (int j = 0; j < 16; j++) {
            int lo = (qs[j] & 0x0f) | (int)(((qh >> j) & 1) << 4);
            int hi = (qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4);
            dst[j] = (float)(lo - 16) * d;
            dst[j + 16] = (float)(hi - 16) * d;
        }
    }
}

static void dequant_q5_1(const uint8_t *src, float *dst, int64_t nb) {
    for (int64_t b = 0; b < nb; b++, src += sizeof(block_q5_1), dst += 32) {
        const float d = quant_rd_f16(src + offsetof(block_q5_1, d));
        const float m = quant_rd_f16(src + offsetof(block_q5_1, m));
        const uint32_t qh = quant_rd32(src + offsetof(block_q5_1, qh));
        const uint8_t *qs = src + offsetof(block_q5_1, qs);
        for (int j = 0; j < 16; j++) {
            int lo = (qs[j] & 0x0f) | (int)(((qh >> j) & 1) << 4);
            int hi = (qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4);
            dst[j] = (float)lo * d + m;
            dst[j + 16] = (float)hi * d + m;
        }
    }
}

/* Q8_0 and Q8_1 share the int8 payload; only the header size differs. */
static void dequant_q8(const uint8_t *src, float *dst, int64_t nb, size_t block, size_t qs_off) {
    for (int64_t b = 0; b < nb; b++, src += block, dst += 32) {
        const float d = quant_rd_f16(src);
        const int8_t *qs = (const int8_t *)(src + qs_off);
        for (int j = 0; j < 32; j++)
            dst[j] = (float)qs[j] * d;
    }
}

/* ---- 32-element block types: encoding ---- */

/* The element of largest magnitude, with its sign (the first one on ties). */
static float signed_absmax(const float *x, int n) {
    float amax = 0.f, max = 0.f;
    for (int j = 0; j < n; j++) {
        if (amax < fabsf(x[j])) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    }
    return max;
}

static void min_max(const float *x, int n, float *mn, float *mx) {
    float lo = FLT_MAX, hi = -FLT_MAX;
    for (int j = 0; j < n; j++) {
        if (x[j] < lo) lo = x[j];
        if (x[j] > hi) hi = x[j];
    }
    *mn = lo;
    *mx = hi;
}

static void quant_q4_0(const float *x, uint8_t *dst, int64_t nb) {
    for (int64_t b = 0; b < nb; b++, x += 32, dst += sizeof(block_q4_0)) {
        /* d < 0 when the extreme is positive: the extreme always maps to q = 0. */
        const float d = signed_absmax(x, 32) / -8;
        const float id = d ? 1.0f / d : 0.0f;
        quant_wr16(dst + offsetof(block_q4_0, d), wgml_f32_to_f16(d));
        uint8_t *qs = dst + offsetof(block_q4_0, qs);
        for (int j = 0; j < 16; j++) {
            const float v0 = x[j] * id, v1 = x[j + 16] * id;
            int q0 = trunc_clamp(v0 + 8.5f, 0, 15);
            int q1 = trunc_clamp(v1 + 8.5f, 0, 15);
            qs[j] = (uint8_t)(q0 | (q1 << 4));
        }
    }
}

static void quant_q4_1(const float *x, uint8_t *dst, int64_t nb) {
    for (int64_t b = 0; b < nb; b++, x += 32, dst += sizeof(block_q4_1)) {
        float mn, mx;
        min_max(x, 32, &mn, &mx);
        const float d = (mx - mn) / 15;
        const float id = d ? 1.0f / d : 0.0f;
        quant_wr16(dst + offsetof(block_q4_1, d), wgml_f32_to_f16(d));
        quant_wr16(dst + offsetof(block_q4_1, m), wgml_f32_to_f16(mn));
        uint8_t *qs = dst + offsetof(block_q4_1, qs);
        for (int j = 0; j < 16; j++) {
            const float v0 = (x[j] - mn) * id, v1 = (x[j + 16] - mn) * id;
            int q0 = trunc_clamp(v0 + 0.5f, 0, 15);
            int q1 = trunc_clamp(v1 + 0.5f, 0, 15);
            qs[j] = (uint8_t)(q0 | (q1 << 4));
        }
    }
}

/* Splits 32 five-bit values into nibbles (qs) and the 32 fifth bits (qh). */
static void pack_q5(const int q[32], uint8_t *qh_dst, uint8_t *qs) {
    uint32_t qh = 0;
    for (int j = 0; j < 16; j++) {
        qs[j] = (uint8_t)((q[j] & 0x0f) | ((q[j + 16] & 0x0f) << 4));
        qh |= (uint32_t)(q[j] >> 4) << j;
        qh |= (uint32_t)(q[j + 16] >> 4) << (j + 16);
    }
    memcpy(qh_dst, &qh, 4);
}

static void quant_q5_0(const float *x, uint8_t *dst, int64_t nb) {
    int q[32];
    for (int64_t b = 0; b < nb; b++, x += 32, dst += sizeof(block_q5_0)) {
        const float d = signed_absmax(x, 32) / -16;
        const float id = d ? 1.0f / d : 0.0f;
        quant_wr16(dst + offsetof(block_q5_0, d), wgml_f32_to_f16(d));
        for (int j = 0; j < 32; j++)
            q[j] = trunc_clamp(x[j] * id + 16.5f, 0, 31);
        pack_q5(q, dst + offsetof(block_q5_0, qh), dst + offsetof(block_q5_0, qs));
    }
}

static void quant_q5_1(const float *x, uint8_t *dst, int64_t nb) {
    int q[32];
    for (int64_t b = 0; b < nb; b++, x += 32, dst += sizeof(block_q5_1)) {
        float mn, mx;
        min_max(x, 32, &mn, &mx);
        const float d = (mx - mn) / 31;
        const float id = d ? 1.0f / d : 0.0f;
        quant_wr16(dst + offsetof(block_q5_1, d), wgml_f32_to_f16(d));
        quant_wr16(dst + offsetof(block_q5_1, m), wgml_f32_to_f16(mn));
        for (int j = 0; j < 32; j++)
            q[j] = trunc_clamp((x[j] - mn) * id + 0.5f, 0, 31);
        pack_q5(q, dst + offsetof(block_q5_1, qh), dst + offsetof(block_q5_1, qs));
    }
}

/* Symmetric int8 with d = absmax / 127; returns sum(q) for Q8_1's s field. */
static int quant_q8_block(const float *x, uint8_t *d_dst, int8_t *qs, float *d_out) {
    float amax = 0.f;
    for (int j = 0; j < 32; j++)
        amax = fabsf(x[j]) > amax ? fabsf(x[j]) : amax;
    const float d = amax / 127;
    const float id = d ? 1.0f / d : 0.0f;
    quant_wr16(d_dst, wgml_f32_to_f16(d));
    int sum = 0;
    for (int j = 0; j < 32; j++) {
        qs[j] = round_i8(x[j] * id);
        sum += qs[j];
    }
    *d_out = d;
    return sum;
}

static void quant_q8_0(const float *x, uint8_t *dst, int64_t nb) {
    for (int64_t b = 0; b < nb; b++, x += 32, dst += sizeof(block_q8_0)) {
        float d;
        int8_t qs[32];
        quant_q8_block(x, dst + offsetof(block_q8_0, d), qs, &d);
        memcpy(dst + offsetof(block_q8_0, qs), qs, 32);
    }
}

static void quant_q8_1(const float *x, uint8_t *dst, int64_t nb) {
    for (int64_t b = 0; b < nb; b++, x += 32, dst += sizeof(block_q8_1)) {
        float d;
        int8_t qs[32];
        int sum = quant_q8_block(x, dst + offsetof(block_q8_1, d), qs, &d);
        memcpy(dst + offsetof(block_q8_1, qs), qs, 32);
        quant_wr16(dst + offsetof(block_q8_1, s), wgml_f32_to_f16((float)sum * d));
    }
}

/* ---- dispatch ---- */

int wgml_dequantize_row(uint32_t type, const void *src_, float *dst, int64_t n) {
    const wgml_dtype_traits *t = wgml_dtype_get(type);
    if (!t || n < 0 || n % t->block_size) return -1;
    const uint8_t *src = src_;
    const int64_t nb = n / t->block_size;
    switch (type) {
    case WGML_F32: memcpy(dst, src, (size_t)n * sizeof(float)); return 0;
    case WGML_F16: dequant_f16(src, dst, n); return 0;
    case WGML_BF16: dequant_bf16(src, dst, n); return 0;
    case WGML_Q4_0: dequant_q4_0(src, dst, nb); return 0;
    case WGML_Q4_1: dequant_q4_1(src, dst, nb); return 0;
    case WGML_Q5_0: dequant_q5_0(src, dst, nb); return 0;
    case WGML_Q5_1: dequant_q5_1(src, dst, nb); return 0;
    case WGML_Q8_0: dequant_q8(src, dst, nb, sizeof(block_q8_0), offsetof(block_q8_0, qs)); return 0;
    case WGML_Q8_1: dequant_q8(src, dst, nb, sizeof(block_q8_1), offsetof(block_q8_1, qs)); return 0;
    case WGML_Q2_K: quant_dequant_q2_k(src, dst, nb); return 0;
    case WGML_Q3_K: quant_dequant_q3_k(src, dst, nb); return 0;
    case WGML_Q4_K: quant_dequant_q4_k(src, dst, nb); return 0;
    case WGML_Q5_K: quant_dequant_q5_k(src, dst, nb); return 0;
    case WGML_Q6_K: quant_dequant_q6_k(src, dst, nb); return 0;
    case WGML_Q8_K: quant_dequant_q8_k(src, dst, nb); return 0;
    default: return -1;
    }
}

int wgml_can_quantize(uint32_t type) {
    switch (type) {
    case WGML_F32:
    case WGML_F16:
    case WGML_BF16:
    case WGML_Q4_0:
    case WGML_Q4_1:
    case WGML_Q5_0:
    case WGML_Q5_1:
    case WGML_Q8_0:
    case WGML_Q8_1:
    case WGML_Q2_K:
    case WGML_Q3_K:
    case WGML_Q4_K:
    case WGML_Q5_K:
    case WGML_Q6_K:
    case WGML_Q8_K: return 1;
    default: return 0;
    }
}

size_t wgml_quantize_row(uint32_t type, const float *src, void *dst_, int64_t n) {
    if (!wgml_can_quantize(type)) return 0;
    const size_t size = wgml_row_size(type, n);
    if (size == 0) return 0;
    uint8_t *dst = dst_;
    const int64_t nb = n / wgml_dtype_get(type)->block_size;
    switch (type) {
    case WGML_F32: memcpy(dst, src, size); break;
    case WGML_F16: quant_f16(src, dst, n); break;
    case WGML_BF16: quant_bf16(src, dst, n); break;
    case WGML_Q4_0: quant_q4_0(src, dst, nb); break;
    case WGML_Q4_1: quant_q4_1(src, dst, nb); break;
    case WGML_Q5_0: quant_q5_0(src, dst, nb); break;
    case WGML_Q5_1: quant_q5_1(src, dst, nb); break;
    case WGML_Q8_0: quant_q8_0(src, dst, nb); break;
    case WGML_Q8_1: quant_q8_1(src, dst, nb); break;
    case WGML_Q2_K: quant_quant_q2_k(src, dst, nb); break;
    case WGML_Q3_K: quant_quant_q3_k(src, dst, nb); break;
    case WGML_Q4_K: quant_quant_q4_k(src, dst, nb); break;
    case WGML_Q5_K: quant_quant_q5_k(src, dst, nb); break;
    case WGML_Q6_K: quant_quant_q6_k(src, dst, nb); break;
    case WGML_Q8_K: quant_quant_q8_k(src, dst, nb); break;
    default: return 0;
    }
    return size;
}
