/*
 * quant_impl.h - small helpers shared by the reference conversions (quant.c,
 * quant_k.c) and the CPU kernels: unaligned field reads, ggml's rounding,
 * and the unpacking of the packed K-quant sub-block scales.
 *
 * Blocks are read through byte pointers and memcpy, never through a block
 * struct pointer: a GGUF row is only as aligned as its tensor, and a block
 * of an odd-sized type can start anywhere.
 */
#ifndef WGML_CORE_QUANT_IMPL_H
#define WGML_CORE_QUANT_IMPL_H

#include "core/dtype.h"
#include "core/fp16.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline uint16_t quant_rd16(const uint8_t *p) {
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}

static inline uint32_t quant_rd32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static inline float quant_rd_f16(const uint8_t *p) { return wgml_f16_to_f32(quant_rd16(p)); }

static inline float quant_rd_f32(const uint8_t *p) {
    float v;
    memcpy(&v, p, 4);
    return v;
}

static inline void quant_wr16(uint8_t *p, uint16_t v) { memcpy(p, &v, 2); }

/*
 * Round to nearest, ties to even, as ggml's K-quant code does: adding
 * 1.5 * 2^23 leaves the integer part in the low mantissa bits. Exact for
 * |v| < 2^22; anything else (including NaN from hostile input) yields some
 * integer, never undefined behaviour.
 */
static inline int quant_nearest_int(float v) {
    float t = v + 12582912.f;
    uint32_t bits;
    memcpy(&bits, &t, 4);
    return (int)(bits & 0x007fffffu) - 0x00400000;
}

/*
 * Q4_K / Q5_K keep 8 pairs (scale, min) of 6 bits each in 12 bytes:
 *   bytes 0..3 : scale j (low 6 bits) for j = 0..3; top 2 bits = scale j+4 bits 4..5
 *   bytes 4..7 : min j   (low 6 bits) for j = 0..3; top 2 bits = min j+4 bits 4..5
 *   bytes 8..11: low nibble = scale j+4 bits 0..3, high nibble = min j+4 bits 0..3
 */
static inline void quant_k4_scale_min(const uint8_t *s, int j, int *scale, int *min) {
    if (j < 4) {
        *scale = s[j] & 63;
        *min = s[j + 4] & 63;
    } else {
        *scale = (s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4);
        *min = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

/* All 8 (scale, min) pairs of a Q4_K / Q5_K block at once, as bytes. */
static inline void quant_k4_unpack(const uint8_t *s, uint8_t sc[8], uint8_t mn[8]) {
    const uint32_t u0 = quant_rd32(s), u1 = quant_rd32(s + 4), u2 = quant_rd32(s + 8);
    const uint32_t w[4] = {
        u0 & 0x3f3f3f3fu,                                             /* scales 0..3 */
        (u2 & 0x0f0f0f0fu) | (((u0 >> 6) & 0x03030303u) << 4),        /* scales 4..7 */
        u1 & 0x3f3f3f3fu,                                             /* mins 0..3 */
        ((u2 >> 4) & 0x0f0f0f0fu) | (((u1 >> 6) & 0x03030303u) << 4), /* mins 4..7 */
    };
    memcpy(sc, w, 8);
    memcpy(mn, w + 2, 8);
}

/*
 * Q3_K keeps 16 signed 6-bit scales (stored + 32) in 12 bytes:
 *   bytes 0..7 : low nibble = bits 0..3 of scale j (j < 8), high nibble = of scale j+8
 *   bytes 8..11: 2-bit fields; scale j's bits 4..5 are in byte 8 + j%4, at bit 2*(j/4)
 * Writes the 16 scales with the +32 bias removed.
 */
static inline void quant_q3k_scales(const uint8_t *s, int8_t out[16]) {
    for (int j = 0; j < 16; j++) {
        int lo = j < 8 ? (s[j] & 0x0f) : (s[j - 8] >> 4);
        int hi = (s[8 + (j & 3)] >> (2 * (j >> 2))) & 3;
        out[j] = (int8_t)((lo | (hi << 4)) - 32);
    }
}

/* Row converters of the K-quant types (quant_k.c), over `nb` whole blocks. */
void quant_dequant_q2_k(const uint8_t *src, float *dst, int64_t nb);
void quant_dequant_q3_k(const uint8_t *src, float *dst, int64_t nb);
void quant_dequant_q4_k(const uint8_t *src, float *dst, int64_t nb);
void quant_dequant_q5_k(const uint8_t *src, float *dst, int64_t nb);
void quant_dequant_q6_k(const uint8_t *src, float *dst, int64_t nb);
void quant_dequant_q8_k(const uint8_t *src, float *dst, int64_t nb);
void quant_quant_q2_k(const float *src, uint8_t *dst, int64_t nb);
void quant_quant_q3_k(const float *src, uint8_t *dst, int64_t nb);
void quant_quant_q4_k(const float *src, uint8_t *dst, int64_t nb);
void quant_quant_q5_k(const float *src, uint8_t *dst, int64_t nb);
void quant_quant_q6_k(const float *src, uint8_t *dst, int64_t nb);
void quant_quant_q8_k(const float *src, uint8_t *dst, int64_t nb);

#endif
