/*
 * fp16.h - IEEE half and bfloat16 conversions, portable and exact.
 *
 * f16 -> f32 is exact. f32 -> f16 rounds to nearest even, overflows to
 * infinity and keeps NaN a NaN, matching the hardware F16C conversion.
 * bf16 is the top 16 bits of an f32; f32 -> bf16 rounds to nearest even.
 */
#ifndef WGML_CORE_FP16_H
#define WGML_CORE_FP16_H

#include <stdint.h>
#include <string.h>

static inline float wgml_bits_to_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline uint32_t wgml_f32_to_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static inline float wgml_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t mant = h & 0x3ff;
    if (exp == 0x1f) return wgml_bits_to_f32(sign | 0x7f800000u | (mant << 13)); /* inf/nan */
    if (exp == 0) {
        if (mant == 0) return wgml_bits_to_f32(sign);
        /* subnormal: mant * 2^-24 */
        float v = (float)mant * (1.0f / 16777216.0f);
        return sign ? -v : v;
    }
    return wgml_bits_to_f32(sign | ((exp + 112) << 23) | (mant << 13));
}

static inline uint16_t wgml_f32_to_f16(float f) {
    uint32_t x = wgml_f32_to_bits(f);
    uint32_t sign = (x >> 16) & 0x8000;
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return (uint16_t)(sign | 0x7e00 | ((ax >> 13) & 0x3ff)); /* NaN stays NaN */
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00); /* rounds to >= 65520: inf */
    if (ax < 0x38800000u) {
        /* result is subnormal or zero: value / 2^-24, rounded to nearest even */
        if (ax < 0x33000000u) return (uint16_t)sign; /* below half the smallest subnormal */
        uint32_t mant = (ax & 0x7fffff) | 0x800000;
        int shift = 126 - (int)(ax >> 23); /* 14..24 */
        uint32_t q = mant >> shift;
        uint32_t rem = mant & ((1u << shift) - 1);
        uint32_t half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1))) q++;
        return (uint16_t)(sign | q);
    }
    /* normal: rebias exponent and round the mantissa to 10 bits */
    uint32_t r = ax - 0x38000000u; /* exponent - 112 */
    uint32_t q = r >> 13;
    uint32_t rem = r & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (q & 1))) q++;
    return (uint16_t)(sign | q);
}

static inline float wgml_bf16_to_f32(uint16_t b) { return wgml_bits_to_f32((uint32_t)b << 16); }

static inline uint16_t wgml_f32_to_bf16(float f) {
    uint32_t x = wgml_f32_to_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40); /* quiet NaN */
    x += 0x7fff + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

#endif
