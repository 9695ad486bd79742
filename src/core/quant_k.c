/*
 * quant_k.c - reference conversions for the K-quants: super-blocks of 256
 * elements split into 16 or 8 sub-blocks, each with its own small integer
 * scale (and min), themselves scaled by fp16 super-block factors d (and dmin).
 *
 *   Q2_K  16 x 16: x = d * sc * q - dmin * m,  q in 0..3,   sc, m 4 bits
 *   Q3_K  16 x 16: x = d * sc * q,             q in -4..3,  sc 6 bits signed
 *   Q4_K   8 x 32: x = d * sc * q - dmin * m,  q in 0..15,  sc, m 6 bits
 *   Q5_K   8 x 32: x = d * sc * q - dmin * m,  q in 0..31,  sc, m 6 bits
 *   Q6_K  16 x 16: x = d * sc * q,             q in -32..31, sc int8
 *   Q8_K  f32 d, 256 int8, and bsums = the sum of each 16 quants (activations)
 *
 * Quant bit placement: the 2-bit planes of Q2_K/Q3_K, the nibbles of
 * Q4_K/Q5_K and the low nibbles / high pairs of Q6_K interleave groups of 32
 * elements: within each 128 (Q2/Q3/Q6) or 64 (Q4/Q5) elements, byte l of a
 * 32-byte run holds element l of each successive group of 32.
 *
 * The quantizers follow ggml's reference quantizers (no importance matrix):
 * per sub-block, a search over a few candidate scales, refining scale and min
 * by weighted least squares (Q2_K/Q4_K/Q5_K) or maximising the projection
 * sum(w x l)^2 / sum(w l^2) (Q3_K/Q6_K); then the sub-block scales are
 * quantized against the super-block factor and the values re-quantized with
 * the scales actually stored.
 */
#include "core/dtype.h"
#include "core/fp16.h"
#include "core/quant_impl.h"

#include <math.h>
#include <string.h>

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

#define GROUP_EPS 1e-15f /* below this a group counts as all zero */

static inline int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* Writes 256 values of `bits` (2) bits into 64 bytes, 4 groups of 32 per byte
 * run of 32 as described in the header (Q2_K and Q3_K low bits). */
static void pack_2bit_planes(const uint8_t L[QK_K], uint8_t *qs) {
    for (int n = 0; n < QK_K; n += 128)
        for (int l = 0; l < 32; l++)
            qs[n / 4 + l] = (uint8_t)(L[n + l] | (L[n + l + 32] << 2) | (L[n + l + 64] << 4) | (L[n + l + 96] << 6));
}

/*
 * Asymmetric fit of n values to x ~ scale * l - mn, l in 0..nmax, minimising
 * sum(w * err^2) (or sum(w * |err|) with use_mad). Starts from the plain
 * [min, max] grid, then for nstep+1 candidate grid densities
 * (nmax + rmin + rdelta * k) / (max - min) re-rounds and solves the 2x2
 * weighted least-squares system for (scale, min), keeping the best. The min
 * is never positive (a positive offset is dropped and the scale refit).
 * Returns the scale, stores -min in *neg_min.
 */
static float fit_scale_min(int n, int nmax, const float *x, const float *w, uint8_t *L, float *neg_min, float rmin,
                           float rdelta, int nstep, int use_mad) {
    uint8_t Laux[32];
    float mn = x[0], mx = x[0];
    float sum_w = w[0], sum_x = w[0] * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < mn) mn = x[i];
        if (x[i] > mx) mx = x[i];
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if (mn > 0) mn = 0;
    if (mx == mn) {
        memset(L, 0, (size_t)n);
        *neg_min = -mn;
        return 0.f;
    }
    float iscale = nmax / (mx - mn);
    float scale = 1 / iscale;
    float best = 0;
    for (int i = 0; i < n; i++) {
        L[i] = (uint8_t)clampi(quant_nearest_int(iscale * (x[i] - mn)), 0, nmax);
        float diff = scale * L[i] + mn - x[i];
        best += w[i] * (use_mad ? fabsf(diff) : diff * diff);
    }
    for (int k = 0; k <= nstep; k++) {
        iscale = (rmin + rdelta * k + nmax) / (mx - mn);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; i++) {
            int l = clampi(quant_nearest_int(iscale * (x[i] - mn)), 0, nmax);
            Laux[i] = (uint8_t)l;
            sum_l += w[i] * l;
            sum_l2 += w[i] * l * l;
            sum_xl += w[i] * l * x[i];
        }
        float det = sum_w * sum_l2 - sum_l * sum_l;
        if (!(det > 0)) continue;
        float s = (sum_w * sum_xl - sum_x * sum_l) / det;
        float m = (sum_l2 * sum_x - sum_l * sum_xl) / det;
        if (m > 0) {
            m = 0;
            s = sum_xl / sum_l2;
        }
        float err = 0;
        for (int i = 0; i < n; i++) {
            float diff = s * Laux[i] + m - x[i];
            err += w[i] * (use_mad ? fabsf(diff) : diff * diff);
        }
        if (err < best) {
            memcpy(L, Laux, (size_t)n);
            best = err;
            scale = s;
            mn = m;
        }
    }
    *neg_min = -mn;
    return scale;
}

/*
 * Symmetric fit x ~ scale * l, l in -nmax..nmax-1 (stored + nmax), weights
 * x^2: tries 19 grids around nmax / max and keeps the one maximising
 * sum(w x l)^2 / sum(w l^2), the error reduction of the optimal scale.
 */
static float fit_scale_sym(int n, int nmax, const float *x, int8_t *L) {
    float amax = 0, max = 0;
    for (int i = 0; i < n; i++) {
        if (fabsf(x[i]) > amax) {
            amax = fabsf(x[i]);
            max = x[i];
        }
    }
    if (amax < GROUP_EPS) {
        memset(L, 0, (size_t)n);
        return 0.f;
    }
    float iscale = -nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = clampi(quant_nearest_int(iscale * x[i]), -nmax, nmax - 1);
        L[i] = (int8_t)(l + nmax);
        float w = x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    float scale = suml2 ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int k = -9; k <= 9; k++) {
        if (k == 0) continue;
        iscale = -(nmax + 0.1f * k) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; i++) {
            int l = clampi(quant_nearest_int(iscale * x[i]), -nmax, nmax - 1);
            float w = x[i] * x[i];
            sumlx += w * x[i] * l;
            suml2 += w * l * l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; i++)
                L[i] = (int8_t)(nmax + clampi(quant_nearest_int(iscale * x[i]), -nmax, nmax - 1));
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/*
 * Q3_K's sub-block fit: start from the max-based grid, then coordinate
 * descent: move one l at a time to the value the optimal scale of the
 * others suggests, when that increases sum(w x l)^2 / sum(w l^2); up to 5
 * sweeps. Weights x^2. L gets l + nmax.
 */
static float fit_scale_q3(int n, int nmax, const float *x, int8_t *L) {
    float amax = 0, max = 0;
    for (int i = 0; i < n; i++) {
        if (fabsf(x[i]) > amax) {
            amax = fabsf(x[i]);
            max = x[i];
        }
    }
    if (amax < GROUP_EPS) {
        memset(L, 0, (size_t)n);
        return 0.f;
    }
    const float iscale = -nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = clampi(quant_nearest_int(iscale * x[i]), -nmax, nmax - 1);
        L[i] = (int8_t)l;
        float w = x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    for (int sweep = 0; sweep < 5; sweep++) {
        int changed = 0;
        for (int i = 0; i < n; i++) {
            float w = x[i] * x[i];
            float slx = sumlx - w * x[i] * L[i];
            if (!(slx > 0)) continue;
            float sl2 = suml2 - w * L[i] * L[i];
            int l = clampi(quant_nearest_int(x[i] * sl2 / slx), -nmax, nmax - 1);
            if (l == L[i]) continue;
            slx += w * x[i] * l;
            sl2 += w * l * l;
            if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                L[i] = (int8_t)l;
                sumlx = slx;
                suml2 = sl2;
                changed++;
            }
        }
        if (!changed) break;
    }
    for (int i = 0; i < n; i++)
        L[i] = (int8_t)(L[i] + nmax);
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

/* ---- Q2_K ---- */

void quant_dequant_q2_k(const uint8_t *src, float *y, int64_t nb) {
    for (int64_t b = 0; b < nb; b++, src += sizeof(block_q2_K)) {
        const float d = quant_rd_f16(src + offsetof(block_q2_K, d));
        const float dmin = quant_rd_f16(src + offsetof(block_q2_K, dmin));
        const uint8_t *sc = src + offsetof(block_q2_K, scales);
        const uint8_t *q = src + offsetof(block_q2_K, qs);
        /* sub-block j (16 elements) = 2-bit plane (j/2)%4 of byte run j/8, half j%2 */
        for (int j = 0; j < 16; j++) {
            const float dl = d * (float)(sc[j] & 0x0f), ml = dmin * (float)(sc[j] >> 4);
            const uint8_t *qq = q + 32 * (j / 8) + 16 * (j % 2);
            const int shift = 2 * ((j / 2) % 4);
            for (int l = 0; l < 16; l++)
                *y++ = dl * (float)((qq[l] >> shift) & 3) - ml;
        }
    }
}

void quant_quant_q2_k(const float *x, uint8_t *dst, int64_t nb) {
    uint8_t L[QK_K];
    float w[16], scales[16], mins[16];
    for (int64_t b = 0; b < nb; b++, x += QK_K, dst += sizeof(block_q2_K)) {
        float max_scale = 0, max_min = 0;
        for (int j = 0; j < 16; j++) {
            for (int l = 0; l < 16; l++)
                w[l] = fabsf(x[16 * j + l]);
            scales[j] = fit_scale_min(16, 3, x + 16 * j, w, L + 16 * j, &mins[j], -0.5f, 0.1f, 15, 1);
            if (scales[j] > max_scale) max_scale = scales[j];
            if (mins[j] > max_min) max_min = mins[j];
        }
        uint8_t *sc = dst + offsetof(block_q2_K, scales);
        uint16_t d16 = 0, dmin16 = 0;
        memset(sc, 0, 16);
        if (max_scale > 0) {
            const float iscale = 15.f / max_scale;
            for (int j = 0; j < 16; j++)
                sc[j] = (uint8_t)quant_nearest_int(iscale * scales[j]);
            d16 = wgml_f32_to_f16(max_scale / 15.f);
        }
        if (max_min > 0) {
            const float iscale = 15.f / max_min;
            for (int j = 0; j < 16; j++)
                sc[j] |= (uint8_t)((unsigned)quant_nearest_int(iscale * mins[j]) << 4);
            dmin16 = wgml_f32_to_f16(max_min / 15.f);
        }
        quant_wr16(dst + offsetof(block_q2_K, d), d16);
        quant_wr16(dst + offsetof(block_q2_K, dmin), dmin16);
        /* re-quantize against the scales as stored */
        for (int j = 0; j < 16; j++) {
            const float d = wgml_f16_to_f32(d16) * (float)(sc[j] & 0x0f);
            if (!d) continue;
            const float dm = wgml_f16_to_f32(dmin16) * (float)(sc[j] >> 4);
            for (int l = 0; l < 16; l++)
                L[16 * j + l] = (uint8_t)clampi(quant_nearest_int((x[16 * j + l] + dm) / d), 0, 3);
        }
        pack_2bit_planes(L, dst + offsetof(block_q2_K, qs));
    }
}

/* ---- Q3_K ---- */

void quant_dequant_q3_k(const uint8_t *src, float *y, int64_t nb) {
    int8_t sc[16];
    for (int64_t b = 0; b < nb; b++, src += sizeof(block_q3_K)) {
        const float d = quant_rd_f16(src + offsetof(block_q3_K, d));
        const uint8_t *hm = src + offsetof(block_q3_K, hmask);
        const uint8_t *q = src + offsetof(block_q3_K, qs);
        quant_q3k_scales(src + offsetof(block_q3_K, scales), sc);
        /* element e = 128 * h + 32 * p + r uses 2-bit plane p of q[32 * h + r]
         * and bit (4 * h + p) of hmask[r]; a clear bit means "minus 4". */
        for (int j = 0; j < 16; j++) {
            const float dl = d * (float)sc[j];
            const int h = j / 8, p = (j / 2) % 4, r0 = 16 * (j % 2);
            for (int l = 0; l < 16; l++) {
                const int r = r0 + l;
                int v = (q[32 * h + r] >> (2 * p)) & 3;
                if (!(hm[r] & (1 << (4 * h + p)))) v -= 4;
                *y++ = dl * (float)v;
            }
        }
    }
}

void quant_quant_q3_k(const float *x, uint8_t *dst, int64_t nb) {
    int8_t L[QK_K];
    float scales[16];
    for (int64_t b = 0; b < nb; b++, x += QK_K, dst += sizeof(block_q3_K)) {
        float max_scale = 0, amax = 0;
        for (int j = 0; j < 16; j++) {
            scales[j] = fit_scale_q3(16, 4, x + 16 * j, L + 16 * j);
            if (fabsf(scales[j]) > amax) {
                amax = fabsf(scales[j]);
                max_scale = scales[j];
            }
        }
        uint8_t *s = dst + offsetof(block_q3_K, scales);
        memset(s, 0, 12);
        uint16_t d16 = 0;
        if (max_scale) {
            const float iscale = -32.f / max_scale;
            for (int j = 0; j < 16; j++) {
                int l = clampi((int8_t)quant_nearest_int(iscale * scales[j]), -32, 31) + 32;
                if (j < 8)
                    s[j] = (uint8_t)(l & 0x0f);
                else
                    s[j - 8] |= (uint8_t)((l & 0x0f) << 4);
                s[8 + j % 4] |= (uint8_t)((l >> 4) << (2 * (j / 4)));
            }
            d16 = wgml_f32_to_f16(1 / iscale);
        }
        quant_wr16(dst + offsetof(block_q3_K, d), d16);
        int8_t sc[16];
        quant_q3k_scales(s, sc);
        for (int j = 0; j < 16; j++) {
            const float d = wgml_f16_to_f32(d16) * (float)sc[j];
            if (!d) continue;
            for (int l = 0; l < 16; l++)
                L[16 * j + l] = (int8_t)(clampi(quant_nearest_int(x[16 * j + l] / d), -4, 3) + 4);
        }
        /* the third bit of element e goes to hmask[e % 32], bit e / 32 */
        uint8_t *hm = dst + offsetof(block_q3_K, hmask);
        uint8_t low[QK_K];
        memset(hm, 0, QK_K / 8);
        for (int e = 0; e < QK_K; e++) {
            if (L[e] > 3) hm[e % 32] |= (uint8_t)(1 << (e / 32));
            low[e] = (uint8_t)(L[e] & 3);
        }
        pack_2bit_planes(low, dst + offsetof(block_q3_K, qs));
    }
}

/* ---- Q4_K / Q5_K ---- */

static void pack_k4_scales(const uint8_t ls[8], const uint8_t lm[8], uint8_t s[12]) {
    for (int j = 0; j < 8; j++) {
        if (j < 4) {
            s[j] = ls[j];
            s[j + 4] = lm[j];
        } else {
            s[j + 4] = (uint8_t)((ls[j] & 0x0f) | ((lm[j] & 0x0f) << 4));
            s[j - 4] |= (uint8_t)((ls[j] >> 4) << 6);
            s[j] |= (uint8_t)((lm[j] >> 4) << 6);
        }
    }
}

/* Shared by Q4_K (nmax 15) and Q5_K (nmax 31): fits the 8 sub-blocks, stores
 * d, dmin and the packed scales, and returns the final quants in L. */
static void quant_k_scale_min(const float *x, int nmax, float rmin, int nstep, uint8_t *d_dst, uint8_t *dmin_dst,
                              uint8_t *scales_dst, uint8_t L[QK_K]) {
    float w[32], scales[8], mins[8];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; j++) {
        const float *xs = x + 32 * j;
        float sum_x2 = 0;
        for (int l = 0; l < 32; l++)
            sum_x2 += xs[l] * xs[l];
        const float av_x = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; l++)
            w[l] = av_x + fabsf(xs[l]);
        scales[j] = fit_scale_min(32, nmax, xs, w, L + 32 * j, &mins[j], rmin, 0.1f, nstep, 0);
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    uint8_t ls[8], lm[8];
    for (int j = 0; j < 8; j++) {
        uint8_t a = (uint8_t)quant_nearest_int(inv_scale * scales[j]);
        uint8_t c = (uint8_t)quant_nearest_int(inv_min * mins[j]);
        ls[j] = a < 63 ? a : 63;
        lm[j] = c < 63 ? c : 63;
    }
    pack_k4_scales(ls, lm, scales_dst);
    const uint16_t d16 = wgml_f32_to_f16(max_scale / 63.f);
    const uint16_t dmin16 = wgml_f32_to_f16(max_min / 63.f);
    quant_wr16(d_dst, d16);
    quant_wr16(dmin_dst, dmin16);
    for (int j = 0; j < 8; j++) {
        int sc, m;
        quant_k4_scale_min(scales_dst, j, &sc, &m);
        const float d = wgml_f16_to_f32(d16) * (float)sc;
        if (!d) continue;
        const float dm = wgml_f16_to_f32(dmin16) * (float)m;
        for (int l = 0; l < 32; l++)
            L[32 * j + l] = (uint8_t)clampi(quant_nearest_int((x[32 * j + l] + dm) / d), 0, nmax);
    }
}

void quant_dequant_q4_k(const uint8_t *src, float *y, int64_t nb) {
    for (int64_t b = 0; b < nb; b++, src += sizeof(block_q4_K)) {
        const float d = quant_rd_f16(src + offsetof(block_q4_K, d));
        const float dmin = quant_rd_f16(src + offsetof(block_q4_K, dmin));
        const uint8_t *s = src + offsetof(block_q4_K, scales);
        const uint8_t *q = src + offsetof(block_q4_K, qs);
        /* sub-block j: nibble (j % 2) of the 32-byte run j / 2 */
        for (int j = 0; j < 8; j++) {
            int sc, m;
            quant_k4_scale_min(s, j, &sc, &m);
            const float dl = d * (float)sc, ml = dmin * (float)m;
            const uint8_t *qq = q + 32 * (j / 2);
            const int shift = 4 * (j % 2);
            for (int l = 0; l < 32; l++)
                *y++ = dl * (float)((qq[l] >> shift) & 0x0f) - ml;
        }
    }
}

void quant_quant_q4_k(const float *x, uint8_t *dst, int64_t nb) {
    uint8_t L[QK_K];
    for (int64_t b = 0; b < nb; b++, x += QK_K, dst += sizeof(block_q4_K)) {
        quant_k_scale_min(x, 15, -1.f, 20, dst + offsetof(block_q4_K, d), dst + offsetof(block_q4_K, dmin),
                          dst + offsetof(block_q4_K, scales), L);
        uint8_t *q = dst + offsetof(block_q4_K, qs);
        for (int n = 0; n < QK_K; n += 64, q += 32)
            for (int l = 0; l < 32; l++)
                q[l] = (uint8_t)(L[n + l] | (L[n + l + 32] << 4));
    }
}

void quant_dequant_q5_k(const uint8_t *src, float *y, int64_t nb) {
    for (int64_t b = 0; b < nb; b++, src += sizeof(block_q5_K)) {
        const float d = quant_rd_f16(src + offsetof(block_q5_K, d));
        const float dmin = quant_rd_f16(src + offsetof(block_q5_K, dmin));
        const uint8_t *s = src + offsetof(block_q5_K, scales);
        const uint8_t *qh = src + offsetof(block_q5_K, qh);
        const uint8_t *q = src + offsetof(block_q5_K, qs);
        /* as Q4_K, plus the fifth bit of sub-block j in bit j of qh[l] */
        for (int j = 0; j < 8; j++) {
            int sc, m;
            quant_k4_scale_min(s, j, &sc, &m);
            const float dl = d * (float)sc, ml = dmin * (float)m;
            const uint8_t *qq = q + 32 * (j / 2);
            const int shift = 4 * (j % 2);
            for (int l = 0; l < 32; l++) {
                int v = ((qq[l] >> shift) & 0x0f) | (((qh[l] >> j) & 1) << 4);
                *y++ = dl * (float)v - ml;
            }
        }
    }
}

void quant_quant_q5_k(const float *x, uint8_t *dst, int64_t nb) {
    uint8_t L[QK_K];
    for (int64_t b = 0; b < nb; b++, x += QK_K, dst += sizeof(block_q5_K)) {
        quant_k_scale_min(x, 31, -0.5f, 15, dst + offsetof(block_q5_K, d), dst + offsetof(block_q5_K, dmin),
                          dst + offsetof(block_q5_K, scales), L);
        uint8_t *qh = dst + offsetof(block_q5_K, qh);
        uint8_t *q = dst + offsetof(block_q5_K, qs);
        memset(qh, 0, QK_K / 8);
        for (int e = 0; e < QK_K; e++) {
            const int j = e / 32, l = e % 32;
            qh[l] |= (uint8_t)((L[e] >> 4) << j);
            if (j % 2 == 0)
                q[16 * j + l] = (uint8_t)(L[e] & 0x0f);
            else
                q[16 * (j - 1) + l] |= (uint8_t)((L[e] & 0x0f) << 4);
        }
    }
}

/* ---- Q6_K ---- */

void quant_dequant_q6_k(const uint8_t *src, float *y, int64_t nb) {
    for (int64_t b = 0; b < nb; b++, src += sizeof(block_q6_K)) {
        const float d = quant_rd_f16(src + offsetof(block_q6_K, d));
        const uint8_t *ql = src + offsetof(block_q6_K, ql);
        const uint8_t *qh = src + offsetof(block_q6_K, qh);
        const int8_t *sc = (const int8_t *)(src + offsetof(block_q6_K, scales));
        /* element e = 128 * h + 32 * p + r: low nibble (p / 2) of ql[64 h + 32 (p % 2) + r],
         * high pair p of qh[32 h + r]; value - 32 */
        for (int e = 0; e < QK_K; e++) {
            const int h = e / 128, p = (e / 32) % 4, r = e % 32;
            const int lo = (ql[64 * h + 32 * (p % 2) + r] >> (4 * (p / 2))) & 0x0f;
            const int hi = (qh[32 * h + r] >> (2 * p)) & 3;
            y[e] = d * (float)sc[e / 16] * (float)((lo | (hi << 4)) - 32);
        }
        y += QK_K;
    }
}

void quant_quant_q6_k(const float *x, uint8_t *dst, int64_t nb) {
    int8_t L[QK_K];
    float scales[16];
    for (int64_t b = 0; b < nb; b++, x += QK_K, dst += sizeof(block_q6_K)) {
        float max_scale = 0, max_abs = 0;
        for (int j = 0; j < 16; j++) {
            scales[j] = fit_scale_sym(16, 32, x + 16 * j, L + 16 * j);
            if (fabsf(scales[j]) > max_abs) {
                max_abs = fabsf(scales[j]);
                max_scale = scales[j];
            }
        }
        if (max_abs < GROUP_EPS) {
            memset(dst, 0, sizeof(block_q6_K));
            continue;
        }
        const float iscale = -128.f / max_scale;
        const uint16_t d16 = wgml_f32_to_f16(1 / iscale);
        quant_wr16(dst + offsetof(block_q6_K, d), d16);
        int8_t *sc = (int8_t *)(dst + offsetof(block_q6_K, scales));
        for (int j = 0; j < 16; j++) {
            int v = quant_nearest_int(iscale * scales[j]);
            sc[j] = (int8_t)(v < 127 ? v : 127);
        }
        for (int j = 0; j < 16; j++) {
            const float d = wgml_f16_to_f32(d16) * (float)sc[j];
            if (!d) continue;
            for (int l = 0; l < 16; l++)
                L[16 * j + l] = (int8_t)(clampi(quant_nearest_int(x[16 * j + l] / d), -32, 31) + 32);
        }
        uint8_t *ql = dst + offsetof(block_q6_K, ql);
        uint8_t *qh = dst + offsetof(block_q6_K, qh);
        memset(ql, 0, QK_K / 2);
        memset(qh, 0, QK_K / 4);
        for (int e = 0; e < QK_K; e++) {
            const int h = e / 128, p = (e / 32) % 4, r = e % 32;
            ql[64 * h + 32 * (p % 2) + r] |= (uint8_t)((L[e] & 0x0f) << (4 * (p / 2)));
            qh[32 * h + r] |= (uint8_t)((L[e] >> 4) << (2 * p));
        }
    }
}

/* ---- Q8_K (activations) ---- */

void quant_dequant_q8_k(const uint8_t *src, float *y, int64_t nb) {
    for (int64_t b = 0; b < nb; b++, src += sizeof(block_q8_K), y += QK_K) {
        const float d = quant_rd_f32(src + offsetof(block_q8_K, d));
        const int8_t *q = (const int8_t *)(src + offsetof(block_q8_K, qs));
        for (int e = 0; e < QK_K; e++)
            y[e] = d * (float)q[e];
    }
}

void quant_quant_q8_k(const float *x, uint8_t *dst, int64_t nb) {
    for (int64_t b = 0; b < nb; b++, x += QK_K, dst += sizeof(block_q8_K)) {
        float amax = 0, max = 0;
        for (int e = 0; e < QK_K; e++) {
            if (fabsf(x[e]) > amax) {
                amax = fabsf(x[e]);
                max = x[e];
            }
        }
        int8_t q[QK_K];
        int16_t bsums[16];
        float d = 0;
        /* the extreme maps to -127, so the quants stay in -127..127; a block so
         * small that this scale overflows (|max| < 127 / FLT_MAX) is stored as zeros */
        const float iscale = amax == 0 ? 0 : -127.f / max;
        if (amax == 0 || isinf(iscale)) {
            memset(q, 0, sizeof q);
        } else {
            for (int e = 0; e < QK_K; e++)
                q[e] = (int8_t)clampi(quant_nearest_int(iscale * x[e]), -127, 127);
            d = 1 / iscale;
        }
        for (int j = 0; j < 16; j++) {
            int s = 0;
            for (int l = 0; l < 16; l++)
                s += q[16 * j + l];
            bsums[j] = (int16_t)s;
        }
        memcpy(dst + offsetof(block_q8_K, d), &d, 4);
        memcpy(dst + offsetof(block_q8_K, qs), q, QK_K);
        memcpy(dst + offsetof(block_q8_K, bsums), bsums, sizeof bsums);
    }
}
