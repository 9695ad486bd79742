/*
 * test_quant.c - the reference conversions of core/quant.h.
 *
 *  - round trips on normal data: RMSE per type under a stated bound, and for
 *    the 32-element types a per-element bound that a wrong scale or a quant
 *    off by one would break;
 *  - an independent decoder written here bit by bit from the format
 *    descriptions (a generic LSB-first bit reader, element by element) that
 *    must agree exactly with wgml_dequantize_row on blocks of random bytes;
 *  - fp16 / bf16 conversion edge cases against exact expectations;
 *  - the activation types' side fields (Q8_1 s, Q8_K bsums);
 *  - real data: the stories260K GGUF files quantized by llama.cpp decode
 *    close to the F32 original, and re-quantizing the original reproduces
 *    llama.cpp's bytes.
 */
#include "core/dtype.h"
#include "core/fp16.h"
#include "core/quant.h"
#include "format/gguf.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const uint32_t k_types[] = {WGML_F32,  WGML_F16,  WGML_BF16, WGML_Q4_0, WGML_Q4_1,
                                   WGML_Q5_0, WGML_Q5_1, WGML_Q8_0, WGML_Q8_1, WGML_Q2_K,
                                   WGML_Q3_K, WGML_Q4_K, WGML_Q5_K, WGML_Q6_K, WGML_Q8_K};
#define N_TYPES (sizeof k_types / sizeof k_types[0])

static int block_of(uint32_t t) { return wgml_dtype_get(t)->block_size; }

/* ---- API edges ---- */

static void test_api_edges(void **state) {
    (void)state;
    float x[256] = {0}, y[256];
    uint8_t buf[2048];
    for (size_t i = 0; i < N_TYPES; i++) {
        const uint32_t t = k_types[i];
        assert_true(wgml_can_quantize(t));
        assert_int_equal(wgml_quantize_row(t, x, buf, 256), wgml_row_size(t, 256));
        assert_int_equal(wgml_dequantize_row(t, buf, y, 256), 0);
        if (block_of(t) > 1) {
            assert_int_equal(wgml_quantize_row(t, x, buf, block_of(t) + 1), 0);
            assert_int_equal(wgml_dequantize_row(t, buf, y, block_of(t) + 1), -1);
        }
    }
    const uint32_t unknown[] = {4, 5, 16, 23, WGML_I8, WGML_I32, WGML_F64, 39, 40, 1000};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        assert_false(wgml_can_quantize(unknown[i]));
        assert_int_equal(wgml_quantize_row(unknown[i], x, buf, 32), 0);
        assert_int_equal(wgml_dequantize_row(unknown[i], buf, y, 32), -1);
    }
    /* all-zero input stays exactly zero */
    for (size_t i = 0; i < N_TYPES; i++) {
        wgml_quantize_row(k_types[i], x, buf, 256);
        memset(y, 0x7f, sizeof y);
        wgml_dequantize_row(k_types[i], buf, y, 256);
        for (int j = 0; j < 256; j++)
            assert_true(y[j] == 0.0f);
    }
}

/* Hostile input: NaN, infinities, huge and subnormal values give some bytes,
 * never a crash or undefined behaviour (the sanitizer build checks). */
static void test_hostile_input(void **state) {
    (void)state;
    const float specials[] = {NAN, -NAN, INFINITY, -INFINITY, 3e38f, -3e38f, 1e-40f, -1e-45f, 0.0f, -0.0f, 1.0f};
    const int ns = (int)(sizeof specials / sizeof specials[0]);
    tu_rng rng = {666};
    float x[512], y[512];
    uint8_t buf[4096];
    for (int round = 0; round < 40; round++) {
        for (int i = 0; i < 512; i++) {
            const uint64_t r = tu_next(&rng) % 4;
            x[i] = r == 0 ? specials[tu_next(&rng) % ns] : r == 1 ? tu_normal(&rng) * 1e30f : tu_normal(&rng);
        }
        if (round % 4 == 0) /* some rows entirely special */
            for (int i = 0; i < 512; i++)
                x[i] = specials[round / 4 % ns];
        for (size_t ti = 0; ti < N_TYPES; ti++) {
            assert_int_equal(wgml_quantize_row(k_types[ti], x, buf, 512), wgml_row_size(k_types[ti], 512));
            assert_int_equal(wgml_dequantize_row(k_types[ti], buf, y, 512), 0);
        }
    }
}

/* ---- round trips ---- */

/*
 * RMSE bounds for N(0, 1) data (std 1), each ~8% above what ggml's reference
 * algorithms give (which these reproduce operation for operation): a format
 * with b effective bits per element spreads uniform error d / sqrt(12) with
 * d ~ range / 2^b. Q4_0 0.086, Q4_1 0.078, Q5_0 0.043, Q5_1 0.038,
 * Q8_0 0.0054, Q2_K 0.296, Q3_K 0.151, Q4_K 0.071, Q5_K 0.036, Q6_K 0.0178,
 * Q8_K 0.0070 (measured on 2^18 samples). A scale off by one step, a swapped
 * nibble half or a lost high bit each multiply the error several times.
 * F16 / BF16 keep 11 / 8 significant bits: 2^-11 / 2^-8 relative.
 */
static double rmse_bound(uint32_t t) {
    switch (t) {
    case WGML_F32: return 0;
    case WGML_F16: return 2.5e-4;
    case WGML_BF16: return 1.9e-3;
    case WGML_Q4_0: return 0.093;
    case WGML_Q4_1: return 0.085;
    case WGML_Q5_0: return 0.047;
    case WGML_Q5_1: return 0.041;
    case WGML_Q8_0: return 0.0058;
    case WGML_Q8_1: return 0.0058;
    case WGML_Q2_K: return 0.32;
    case WGML_Q3_K: return 0.163;
    case WGML_Q4_K: return 0.077;
    case WGML_Q5_K: return 0.039;
    case WGML_Q6_K: return 0.0192;
    case WGML_Q8_K: return 0.0076;
    default: return 0;
    }
}

/* Float types round to nearest: half an ulp, 2^-11 (F16) or 2^-8 (BF16)
 * relative, and half the smallest F16 subnormal. */
static double float_bound(uint32_t t, float x) {
    if (t == WGML_F32) return 0;
    return fabs(x) * (t == WGML_F16 ? ldexp(1, -11) : ldexp(1, -8)) + ldexp(1, -25);
}

/*
 * Per-element bound for the 32-element types, from how they round:
 *  Q8_0/Q8_1: |err| <= d/2 plus the fp16 rounding of d seen through |q| <= 127:
 *             d (1/2 + 127 * 2^-11) < 0.563 d, d = absmax / 127.
 *  Q4_0/Q5_0: d = extreme / -8 (-16); values round half up to within |d|/2,
 *             except the far side is clamped at 7 (15), costing up to |d|;
 *             plus 8 (16) * 2^-11 |d| for the fp16 d.
 *  Q4_1/Q5_1: d = (max - min) / 15 (31), |err| <= d/2 + 15 (31) d 2^-11 +
 *             |min| 2^-11 (m is fp16 too).
 * Returns the bound for element j of block x[0..31].
 */
static double elem_bound(uint32_t t, const float *x, int j) {
    float amax = 0, ext = 0, mn = x[0], mx = x[0];
    for (int i = 0; i < 32; i++) {
        if (fabsf(x[i]) > amax) {
            amax = fabsf(x[i]);
            ext = x[i];
        }
        mn = fminf(mn, x[i]);
        mx = fmaxf(mx, x[i]);
    }
    const double u = 1.0 / 2048, tiny = 1e-7;
    switch (t) {
    case WGML_Q8_0:
    case WGML_Q8_1: return amax / 127.0 * (0.5 + 127 * u) + tiny;
    case WGML_Q4_0:
    case WGML_Q5_0: {
        const double lv = t == WGML_Q4_0 ? 8 : 16, d = amax / lv;
        /* x[j] / d on the scale where the extreme is -lv: the top step is lv - 1 */
        const double v = -(double)x[j] * lv / (double)ext;
        return (v > lv - 0.5 ? d : d / 2) + lv * d * u + tiny;
    }
    case WGML_Q4_1:
    case WGML_Q5_1: {
        const double lv = t == WGML_Q4_1 ? 15 : 31, d = (mx - mn) / lv;
        return d / 2 + lv * d * u + fabs(mn) * u + tiny;
    }
    default: return INFINITY;
    }
}

static void test_round_trip(void **state) {
    (void)state;
    tu_rng rng = {0x5eed1234};
    const int64_t lengths[] = {256, 512, 768, 4096, 65536};
    const int64_t nmax = 65536;
    float *x = malloc(nmax * sizeof(float)), *y = malloc(nmax * sizeof(float));
    uint8_t *q = malloc(wgml_row_size(WGML_F32, nmax));
    assert_non_null(x);
    assert_non_null(y);
    assert_non_null(q);
    for (size_t ti = 0; ti < N_TYPES; ti++) {
        const uint32_t t = k_types[ti];
        for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; li++) {
            const int64_t n = lengths[li];
            for (int64_t i = 0; i < n; i++)
                x[i] = tu_normal(&rng);
            assert_int_equal(wgml_quantize_row(t, x, q, n), wgml_row_size(t, n));
            assert_int_equal(wgml_dequantize_row(t, q, y, n), 0);
            double se = 0;
            for (int64_t i = 0; i < n; i++) {
                const double e = (double)y[i] - x[i];
                se += e * e;
                if (block_of(t) <= 32) {
                    const int64_t b0 = i / 32 * 32;
                    const double bound = block_of(t) == 1 ? float_bound(t, x[i]) : elem_bound(t, x + b0, (int)(i - b0));
                    if (fabs(e) > bound)
                        fail_msg("%s n=%lld element %lld: x=%g got %g, |err| %g > %g", wgml_dtype_name(t), (long long)n,
                                 (long long)i, x[i], y[i], fabs(e), bound);
                }
            }
            const double rmse = sqrt(se / n);
            /* short rows sample few values: allow their RMSE 15% more noise */
            const double bound = rmse_bound(t) * (n >= 4096 ? 1.0 : 1.15);
            if (rmse > bound) fail_msg("%s n=%lld: rmse %.5f > %.5f", wgml_dtype_name(t), (long long)n, rmse, bound);
            if (t == WGML_F32) assert_memory_equal(x, y, n * sizeof(float));
        }
    }
    /* lengths that are not multiples of 256 for the small-block types */
    const int64_t odd[] = {32, 96, 160, 1000 - 1000 % 32};
    for (size_t ti = 0; ti < N_TYPES; ti++) {
        const uint32_t t = k_types[ti];
        if (block_of(t) > 32) continue;
        for (size_t li = 0; li < sizeof odd / sizeof odd[0]; li++) {
            const int64_t n = odd[li];
            for (int64_t i = 0; i < n; i++)
                x[i] = 3.0f * tu_normal(&rng);
            assert_int_equal(wgml_quantize_row(t, x, q, n), wgml_row_size(t, n));
            assert_int_equal(wgml_dequantize_row(t, q, y, n), 0);
            for (int64_t i = 0; i < n; i++) {
                const double bound =
                    block_of(t) == 32 ? elem_bound(t, x + i / 32 * 32, (int)(i % 32)) : float_bound(t, x[i]);
                if (fabs((double)y[i] - x[i]) > bound)
                    fail_msg("%s n=%lld element %lld: x=%g got %g", wgml_dtype_name(t), (long long)n, (long long)i,
                             x[i], y[i]);
            }
        }
    }
    free(x);
    free(y);
    free(q);
}

/* ---- an independent decoder ---- */

/* n (<= 24) bits of the little-endian bit stream p starting at bit `pos`. */
static unsigned bits(const uint8_t *p, int pos, int n) {
    unsigned v = 0;
    for (int i = 0; i < n; i++)
        v |= (unsigned)((p[(pos + i) / 8] >> ((pos + i) % 8)) & 1) << i;
    return v;
}

static int sext(unsigned v, int nbits) { return (int)(v ^ (1u << (nbits - 1))) - (1 << (nbits - 1)); }

/* fp16 -> f32 by the formula: (-1)^s 2^(e-15) (1 + m/1024), subnormal 2^-14 (m/1024). */
static float ref_f16(unsigned h) {
    const int s = (int)bits((const uint8_t *)&h, 15, 1), e = (int)bits((const uint8_t *)&h, 10, 5);
    const int m = (int)bits((const uint8_t *)&h, 0, 10);
    double v;
    if (e == 31)
        v = m ? NAN : INFINITY;
    else if (e == 0)
        v = ldexp(m / 1024.0, -14);
    else
        v = ldexp(1.0 + m / 1024.0, e - 15);
    return (float)(s ? -v : v);
}
static float f16_at(const uint8_t *p, int byte) { return ref_f16(bits(p, 8 * byte, 16)); }

/*
 * Element e of one block of type t, straight from the format: offsets of
 * the block fields are written out as numbers, not taken from dtype.h.
 */
static float ref_elem(uint32_t t, const uint8_t *b, int e) {
    switch (t) {
    case WGML_F16: return f16_at(b, 2 * e);
    case WGML_BF16: {
        const uint32_t u = bits(b, 16 * e, 16) << 16;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    case WGML_Q4_0: /* d | 16 bytes: element e < 16 low nibble of byte e, else high of e - 16 */
        return (float)((int)bits(b + 2, 8 * (e % 16) + 4 * (e / 16), 4) - 8) * f16_at(b, 0);
    case WGML_Q4_1: /* d m | nibbles */
        return (float)bits(b + 4, 8 * (e % 16) + 4 * (e / 16), 4) * f16_at(b, 0) + f16_at(b, 2);
    case WGML_Q5_0: { /* d | qh (32 bits) | nibbles */
        const int v = (int)(bits(b + 6, 8 * (e % 16) + 4 * (e / 16), 4) | bits(b + 2, e, 1) << 4);
        return (float)(v - 16) * f16_at(b, 0);
    }
    case WGML_Q5_1: { /* d m | qh | nibbles */
        const int v = (int)(bits(b + 8, 8 * (e % 16) + 4 * (e / 16), 4) | bits(b + 4, e, 1) << 4);
        return (float)v * f16_at(b, 0) + f16_at(b, 2);
    }
    case WGML_Q8_0: return (float)sext(bits(b + 2, 8 * e, 8), 8) * f16_at(b, 0);
    case WGML_Q8_1: return (float)sext(bits(b + 4, 8 * e, 8), 8) * f16_at(b, 0);
    case WGML_Q2_K: { /* scales[16] | qs[64] | d | dmin; e = 128 h + 32 p + r */
        const int h = e / 128, p = (e / 32) % 4, r = e % 32, j = e / 16;
        const int q = (int)bits(b + 16, 8 * (32 * h + r) + 2 * p, 2);
        const int sc = (int)bits(b, 8 * j, 4), m = (int)bits(b, 8 * j + 4, 4);
        return f16_at(b, 80) * (float)sc * (float)q - f16_at(b, 82) * (float)m;
    }
    case WGML_Q3_K: { /* hmask[32] | qs[64] | scales[12] | d */
        const int h = e / 128, p = (e / 32) % 4, r = e % 32, j = e / 16;
        const int lo = (int)bits(b + 32, 8 * (32 * h + r) + 2 * p, 2);
        const int hi = (int)bits(b, 8 * r + e / 32, 1);
        const int s_lo = (int)bits(b + 96, j < 8 ? 8 * j : 8 * (j - 8) + 4, 4);
        const int s_hi = (int)bits(b + 96, 8 * (8 + j % 4) + 2 * (j / 4), 2);
        const int sc = (s_lo | s_hi << 4) - 32;
        return f16_at(b, 108) * (float)sc * (float)(lo - (hi ? 0 : 4));
    }
    case WGML_Q4_K:
    case WGML_Q5_K: { /* d dmin | scales[12] | (Q5_K: qh[32]) | qs[128] */
        const int j = e / 32, r = e % 32;
        int sc, m;
        if (j < 4) {
            sc = (int)bits(b + 4, 8 * j, 6);
            m = (int)bits(b + 4, 8 * (j + 4), 6);
        } else {
            sc = (int)(bits(b + 4, 8 * (j + 4), 4) | bits(b + 4, 8 * (j - 4) + 6, 2) << 4);
            m = (int)(bits(b + 4, 8 * (j + 4) + 4, 4) | bits(b + 4, 8 * j + 6, 2) << 4);
        }
        const int qs_at = t == WGML_Q4_K ? 16 : 48;
        int q = (int)bits(b + qs_at, 8 * (32 * (j / 2) + r) + 4 * (j % 2), 4);
        if (t == WGML_Q5_K) q |= (int)bits(b + 16, 8 * r + j, 1) << 4;
        return f16_at(b, 0) * (float)sc * (float)q - f16_at(b, 2) * (float)m;
    }
    case WGML_Q6_K: { /* ql[128] | qh[64] | scales[16] | d */
        const int h = e / 128, p = (e / 32) % 4, r = e % 32;
        const int lo = (int)bits(b, 8 * (64 * h + 32 * (p % 2) + r) + 4 * (p / 2), 4);
        const int hi = (int)bits(b + 128, 8 * (32 * h + r) + 2 * p, 2);
        const int sc = sext(bits(b + 192, 8 * (e / 16), 8), 8);
        return f16_at(b, 208) * (float)sc * (float)((lo | hi << 4) - 32);
    }
    case WGML_Q8_K: { /* f32 d | qs[256] | bsums */
        const uint32_t u = bits(b, 0, 16) | bits(b, 16, 16) << 16;
        float d;
        memcpy(&d, &u, 4);
        return d * (float)sext(bits(b + 4, 8 * e, 8), 8);
    }
    default: return NAN;
    }
}

/* A random finite fp16 of moderate size (|v| in [2^-12, 4)), either sign. */
static uint16_t sane_f16(tu_rng *r) {
    const float v = ldexpf(1.0f + tu_uniform(r), -12 + (int)(tu_next(r) % 13));
    return wgml_f32_to_f16(tu_next(r) & 1 ? -v : v);
}

static void test_independent_decoder(void **state) {
    (void)state;
    tu_rng rng = {77};
    const int nblocks = 64;
    for (size_t ti = 0; ti < N_TYPES; ti++) {
        const uint32_t t = k_types[ti];
        if (t == WGML_F32) continue;
        const wgml_dtype_traits *tr = wgml_dtype_get(t);
        const int per = tr->block_size == 1 ? 256 : tr->block_size; /* float types: rows of 256 */
        const size_t bsize = wgml_row_size(t, per);
        uint8_t *buf = malloc(bsize * nblocks);
        float *out = malloc(sizeof(float) * per * nblocks);
        for (size_t i = 0; i < bsize * nblocks; i++)
            buf[i] = (uint8_t)tu_next(&rng);
        for (int k = 0; k < nblocks; k++) {
            uint8_t *b = buf + k * bsize;
            uint16_t h;
            switch (t) {
            case WGML_F16: /* random bits, but no NaN (NaN != NaN) */
                for (int e = 0; e < per; e++)
                    if (((b[2 * e + 1] >> 2) & 0x1f) == 0x1f) b[2 * e + 1] &= 0xbf;
                break;
            case WGML_BF16:
                for (int e = 0; e < per; e++)
                    if ((b[2 * e + 1] & 0x7f) == 0x7f && (b[2 * e] & 0x80)) b[2 * e + 1] &= 0xbf;
                break;
            case WGML_Q4_1:
            case WGML_Q5_1:
            case WGML_Q8_1: /* d and m / s */
                h = sane_f16(&rng), memcpy(b, &h, 2);
                h = sane_f16(&rng), memcpy(b + 2, &h, 2);
                break;
            case WGML_Q2_K:
                h = sane_f16(&rng), memcpy(b + 80, &h, 2);
                h = sane_f16(&rng), memcpy(b + 82, &h, 2);
                break;
            case WGML_Q3_K: h = sane_f16(&rng), memcpy(b + 108, &h, 2); break;
            case WGML_Q4_K:
            case WGML_Q5_K:
                h = sane_f16(&rng), memcpy(b, &h, 2);
                h = sane_f16(&rng), memcpy(b + 2, &h, 2);
                break;
            case WGML_Q6_K: h = sane_f16(&rng), memcpy(b + 208, &h, 2); break;
            case WGML_Q8_K: {
                const float d = ldexpf(tu_uniform(&rng) + 0.5f, -8);
                memcpy(b, &d, 4);
                break;
            }
            default: h = sane_f16(&rng), memcpy(b, &h, 2); break; /* d first */
            }
        }
        assert_int_equal(wgml_dequantize_row(t, buf, out, (int64_t)per * nblocks), 0);
        for (int k = 0; k < nblocks; k++)
            for (int e = 0; e < per; e++) {
                const float want = ref_elem(t, buf + k * bsize, e), got = out[k * per + e];
                if (!(want == got))
                    fail_msg("%s block %d element %d: decoder %.9g, wgml_dequantize_row %.9g", wgml_dtype_name(t), k, e,
                             want, got);
            }
        free(buf);
        free(out);
    }
}

/* ---- fp16 / bf16 ---- */

static uint16_t to_f16(float f) {
    uint16_t h;
    wgml_quantize_row(WGML_F16, &f, &h, 1);
    return h;
}
static float from_f16(uint16_t h) {
    float f;
    wgml_dequantize_row(WGML_F16, &h, &f, 1);
    return f;
}
static uint16_t to_bf16(float f) {
    uint16_t h;
    wgml_quantize_row(WGML_BF16, &f, &h, 1);
    return h;
}
static float bitsf(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static void test_half_edges(void **state) {
    (void)state;
    /* exact values */
    assert_int_equal(to_f16(1.0f), 0x3c00);
    assert_int_equal(to_f16(-2.0f), 0xc000);
    assert_int_equal(to_f16(0.0f), 0x0000);
    assert_int_equal(to_f16(-0.0f), 0x8000);
    assert_int_equal(to_f16(65504.0f), 0x7bff);          /* largest finite */
    assert_int_equal(to_f16(ldexpf(1, -14)), 0x0400);    /* smallest normal */
    assert_int_equal(to_f16(ldexpf(1, -24)), 0x0001);    /* smallest subnormal */
    assert_int_equal(to_f16(ldexpf(1023, -24)), 0x03ff); /* largest subnormal */
    /* rounding: ties to even */
    assert_int_equal(to_f16(1.0f + ldexpf(1, -11)), 0x3c00);                  /* half way, even stays */
    assert_int_equal(to_f16(1.0f + 3 * ldexpf(1, -11)), 0x3c02);              /* half way, odd rounds up */
    assert_int_equal(to_f16(1.0f + ldexpf(1, -11) + ldexpf(1, -20)), 0x3c01); /* above half */
    assert_int_equal(to_f16(ldexpf(1, -25)), 0x0000);                         /* half the smallest subnormal: to 0 */
    assert_int_equal(to_f16(ldexpf(3, -25)), 0x0002);                         /* 1.5 ulp: to even 2 */
    assert_int_equal(to_f16(ldexpf(1, -25) * 1.0000001f), 0x0001);            /* just above half: up */
    assert_int_equal(to_f16(ldexpf(1, -14) - ldexpf(1, -25)), 0x0400);        /* rounds up into the normals */
    /* overflow */
    assert_int_equal(to_f16(65519.0f), 0x7bff); /* below the halfway point 65520 */
    assert_int_equal(to_f16(65520.0f), 0x7c00); /* halfway, odd mantissa: up to inf */
    assert_int_equal(to_f16(1e10f), 0x7c00);
    assert_int_equal(to_f16(-1e10f), 0xfc00);
    assert_int_equal(to_f16(INFINITY), 0x7c00);
    assert_int_equal(to_f16(-INFINITY), 0xfc00);
    /* NaN stays NaN (quiet), with its sign */
    const uint16_t hn = to_f16(NAN);
    assert_int_equal(hn & 0x7c00, 0x7c00);
    assert_true((hn & 0x03ff) != 0);
    assert_true(isnan(from_f16(0x7e00)) && isnan(from_f16(0xfd01)));
    /* decoding */
    assert_true(from_f16(0x0001) == ldexpf(1, -24));
    assert_true(from_f16(0x03ff) == ldexpf(1023, -24));
    assert_true(from_f16(0x8001) == -ldexpf(1, -24));
    assert_true(from_f16(0x7bff) == 65504.0f);
    assert_true(from_f16(0x7c00) == INFINITY && from_f16(0xfc00) == -INFINITY);
    assert_true(signbit(from_f16(0x8000)) && from_f16(0x8000) == 0.0f);
    /* every half survives a round trip through f32 */
    for (uint32_t h = 0; h < 0x10000; h++) {
        const float f = from_f16((uint16_t)h);
        if (isnan(f)) continue;
        if (to_f16(f) != h) fail_msg("f16 %04x -> %g -> %04x", h, f, to_f16(f));
        if (!(f == ref_f16(h))) fail_msg("f16 %04x decodes to %g, formula says %g", h, f, ref_f16(h));
    }
    /* bf16 */
    assert_int_equal(to_bf16(1.0f), 0x3f80);
    assert_int_equal(to_bf16(bitsf(0x3f808000)), 0x3f80); /* tie, even stays */
    assert_int_equal(to_bf16(bitsf(0x3f818000)), 0x3f82); /* tie, odd rounds up */
    assert_int_equal(to_bf16(bitsf(0x3f808001)), 0x3f81); /* above half */
    assert_int_equal(to_bf16(bitsf(0x7f7fffff)), 0x7f80); /* max finite rounds to inf */
    assert_int_equal(to_bf16(INFINITY), 0x7f80);
    assert_int_equal(to_bf16(-0.0f), 0x8000);
    assert_int_equal(to_bf16(bitsf(0x00000001)), 0x0000); /* tiny subnormal, tie-free: down */
    assert_int_equal(to_bf16(bitsf(0x00018000)), 0x0002); /* subnormal tie, odd: up */
    const uint16_t bn = to_bf16(NAN);
    assert_true((bn & 0x7f80) == 0x7f80 && (bn & 0x7f) != 0);
    assert_true(isnan(wgml_bf16_to_f32(to_bf16(bitsf(0x7f800001))))); /* signalling NaN stays NaN */
}

/* ---- activation types: the side fields ---- */

static void test_activation_fields(void **state) {
    (void)state;
    tu_rng rng = {9};
    float x[1024];
    for (int i = 0; i < 1024; i++)
        x[i] = tu_normal(&rng) * (i % 97 == 0 ? 10.0f : 1.0f);
    block_q8_K k[4];
    wgml_quantize_row(WGML_Q8_K, x, k, 1024);
    for (int b = 0; b < 4; b++) {
        int amax = 0;
        for (int j = 0; j < 16; j++) {
            int s = 0;
            for (int l = 0; l < 16; l++)
                s += k[b].qs[16 * j + l];
            assert_int_equal(k[b].bsums[j], s);
        }
        for (int e = 0; e < 256; e++)
            amax = abs(k[b].qs[e]) > amax ? abs(k[b].qs[e]) : amax;
        assert_int_equal(amax, 127); /* the extreme maps to -127 exactly */
    }
    block_q8_1 q[32];
    wgml_quantize_row(WGML_Q8_1, x, q, 1024);
    for (int b = 0; b < 32; b++) {
        int s = 0;
        for (int l = 0; l < 32; l++)
            s += q[b].qs[l];
        /* s is d * sum(q) rounded to fp16, d the unrounded scale */
        float amax = 0;
        for (int l = 0; l < 32; l++)
            amax = fmaxf(amax, fabsf(x[32 * b + l]));
        assert_int_equal(q[b].s, wgml_f32_to_f16((float)s * (amax / 127)));
    }
}

/* ---- real data: stories260K quantized by llama.cpp ---- */

typedef struct {
    long blocks, same;
} match_count;

static void check_file(const char *name, gguf_file *orig, match_count counts[WGML_DTYPE_COUNT]) {
    gguf_file *f = NULL;
    wgml_error err;
    if (gguf_open(tu_shared(name), &f, &err) != WGML_OK) fail_msg("%s: %s", name, err.message);
    int checked = 0;
    for (int64_t i = 0; i < gguf_n_tensors(f); i++) {
        const gguf_tensor *t = gguf_tensor_at(f, i);
        const gguf_tensor *o = gguf_find_tensor(orig, t->name);
        assert_non_null(o);
        assert_int_equal(o->type, WGML_F32);
        assert_int_equal(o->n_elements, t->n_elements);
        if (t->type == WGML_F32) {
            assert_memory_equal(t->data, o->data, o->n_elements * sizeof(float));
            continue;
        }
        const wgml_dtype_traits *tr = wgml_dtype_get(t->type);
        const int64_t n = t->n_elements, bs = tr->block_size;
        float *y = malloc(n * sizeof(float));
        uint8_t *re = malloc(t->size);
        const float *x = o->data;
        assert_int_equal(wgml_dequantize_row(t->type, t->data, y, n), 0);
        /* decoded values lie within the format's error bound of the original */
        for (int64_t e = 0; e < n; e++) {
            double bound;
            if (t->type == WGML_F16)
                bound = float_bound(t->type, x[e]);
            else
                bound = elem_bound(t->type, x + e / bs * bs, (int)(e % bs));
            if (fabs((double)y[e] - x[e]) > bound)
                fail_msg("%s %s element %lld: original %g decoded %g", name, t->name, (long long)e, x[e], y[e]);
        }
        /* the reference quantizer reproduces llama.cpp's bytes, row by row */
        const int64_t row = t->ne[0], rows = n / row;
        const size_t rsize = wgml_row_size(t->type, row);
        for (int64_t r = 0; r < rows; r++)
            assert_int_equal(wgml_quantize_row(t->type, x + r * row, re + r * rsize, row), rsize);
        for (int64_t b = 0; b < n / bs; b++) {
            counts[t->type].blocks++;
            counts[t->type].same +=
                !memcmp(re + b * tr->type_size, (const uint8_t *)t->data + b * tr->type_size, (size_t)tr->type_size);
        }
        free(y);
        free(re);
        checked++;
    }
    assert_true(checked > 0);
    gguf_close(f);
}

static void test_real_files(void **state) {
    (void)state;
    gguf_file *orig = NULL;
    wgml_error err;
    if (gguf_open(tu_shared("models/stories260K.gguf"), &orig, &err) != WGML_OK) {
        print_message("skipped: %s\n", err.message);
        skip();
    }
    match_count counts[WGML_DTYPE_COUNT] = {{0, 0}};
    check_file("models/stories260K-Q8_0mix.gguf", orig, counts);
    check_file("models/stories260K-Q4_0mix.gguf", orig, counts);
    check_file("models/stories260K-F16.gguf", orig, counts);
    gguf_close(orig);
    const uint32_t expect[] = {WGML_F16, WGML_Q4_0, WGML_Q5_0, WGML_Q8_0};
    for (size_t i = 0; i < sizeof expect / sizeof expect[0]; i++) {
        const match_count c = counts[expect[i]];
        print_message("%-5s identical to llama.cpp: %ld / %ld blocks (%.2f%%)\n", wgml_dtype_name(expect[i]), c.same,
                      c.blocks, c.blocks ? 100.0 * c.same / c.blocks : 0);
        assert_true(c.blocks > 0);
        /* ggml's reference quantizers are deterministic: every block must match */
        assert_int_equal(c.same, c.blocks);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_api_edges),  cmocka_unit_test(test_hostile_input),
        cmocka_unit_test(test_round_trip), cmocka_unit_test(test_independent_decoder),
        cmocka_unit_test(test_half_edges), cmocka_unit_test(test_activation_fields),
        cmocka_unit_test(test_real_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
