/*
 * kernels.c - the CPU kernel table (kernels.h): portable scalar kernels, and
 * the choice, once, of the best variant this CPU runs.
 *
 * The scalar kernels are the reference the SIMD ones are tested against and
 * the fallback everywhere else (other architectures, wasm32). Each quantized
 * dot product works block by block: an exact integer sum of weight quants
 * times activation quants, then one float multiply-add with the two block
 * scales. Weight mins (Q4_1/Q5_1, Q2_K/Q4_K/Q5_K) are folded in through the
 * activation block sums: Q8_1's s = d * sum(q) and Q8_K's bsums.
 *
 * WASM SIMD128 (the browser build): kernels_wasm.c, installed by
 * select_table() over the scalar entries.
 *
 * Also here: the private activation layouts of kernels.h (their sizes, and
 * the way back to floats for tests).
 */
#include "backend/cpu/kernels.h"

#include "backend/cpu/kernels_impl.h"
#include "core/dtype.h"
#include "core/fp16.h"
#include "core/quant.h"
#include "core/quant_impl.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#if defined(WGML_CPU_X86)
#include <cpuid.h>
#endif

/*
 * fp16 -> f32 without branches, so loops over F16 weights vectorize: moving
 * the exponent and mantissa into f32 position and multiplying by 2^112
 * rebiases the exponent exactly (subnormals included); only inf / NaN need
 * the top exponent. Equal to wgml_f16_to_f32 for every input.
 */
static inline float f16_fast(const uint8_t *p) {
    const uint32_t h = quant_rd16(p), em = h & 0x7fff;
    const float v = wgml_bits_to_f32(em << 13) * 0x1p112f;
    const uint32_t bits = em >= 0x7c00 ? 0x7f800000u | (em & 0x3ff) << 13 : wgml_f32_to_bits(v);
    return wgml_bits_to_f32(bits | (h & 0x8000) << 16);
}

/* ---- prepare / to_float ---- */

static void prep_f32(const float *x, void *dst, int64_t n) { memcpy(dst, x, (size_t)n * sizeof(float)); }
static void prep_q8_0(const float *x, void *dst, int64_t n) { wgml_quantize_row(WGML_Q8_0, x, dst, n); }
static void prep_q8_1(const float *x, void *dst, int64_t n) { wgml_quantize_row(WGML_Q8_1, x, dst, n); }
static void prep_q8_k(const float *x, void *dst, int64_t n) { wgml_quantize_row(WGML_Q8_K, x, dst, n); }

#define TO_FLOAT(name, type)                                                                                           \
    static void name(const void *src, float *dst, int64_t n) { wgml_dequantize_row(type, src, dst, n); }
TO_FLOAT(tof_f32, WGML_F32)
TO_FLOAT(tof_f16, WGML_F16)
TO_FLOAT(tof_bf16, WGML_BF16)
TO_FLOAT(tof_q4_0, WGML_Q4_0)
TO_FLOAT(tof_q4_1, WGML_Q4_1)
TO_FLOAT(tof_q5_0, WGML_Q5_0)
TO_FLOAT(tof_q5_1, WGML_Q5_1)
TO_FLOAT(tof_q8_0, WGML_Q8_0)
TO_FLOAT(tof_q2_k, WGML_Q2_K)
TO_FLOAT(tof_q3_k, WGML_Q3_K)
TO_FLOAT(tof_q4_k, WGML_Q4_K)
TO_FLOAT(tof_q5_k, WGML_Q5_K)
TO_FLOAT(tof_q6_k, WGML_Q6_K)

/* ---- float weights, f32 activations ---- */

/* Eight partial sums: the loop vectorizes and rounding error grows slower. */
#define FLOAT_DOT(name, load_w)                                                                                        \
    static float name(int64_t n, const void *wv, const void *xv) {                                                     \
        const uint8_t *w = wv, *x = xv;                                                                                \
        float acc[8] = {0};                                                                                            \
        int64_t i = 0;                                                                                                 \
        for (; i + 8 <= n; i += 8)                                                                                     \
            for (int k = 0; k < 8; k++)                                                                                \
                acc[k] += load_w(w, i + k) * quant_rd_f32(x + 4 * (i + k));                                            \
        float sum = 0;                                                                                                 \
        for (; i < n; i++)                                                                                             \
            sum += load_w(w, i) * quant_rd_f32(x + 4 * i);                                                             \
        for (int k = 0; k < 8; k++)                                                                                    \
            sum += acc[k];                                                                                             \
        return sum;                                                                                                    \
    }
static inline float ld_f32(const uint8_t *w, int64_t i) { return quant_rd_f32(w + 4 * i); }
static inline float ld_f16(const uint8_t *w, int64_t i) { return f16_fast(w + 2 * i); }
static inline float ld_bf16(const uint8_t *w, int64_t i) { return wgml_bf16_to_f32(quant_rd16(w + 2 * i)); }
FLOAT_DOT(dot_f32, ld_f32)
FLOAT_DOT(dot_f16, ld_f16)
FLOAT_DOT(dot_bf16, ld_bf16)

/* ---- 32-element blocks ---- */

static float dot_q4_0(int64_t n, const void *wv, const void *xv) {
    const uint8_t *w = wv, *x = xv;
    float sum = 0;
    for (int64_t b = 0; b < n / 32; b++, w += sizeof(block_q4_0), x += sizeof(block_q8_0)) {
        const uint8_t *q = w + offsetof(block_q4_0, qs);
        const int8_t *y = (const int8_t *)(x + offsetof(block_q8_0, qs));
        int isum = 0;
        for (int j = 0; j < 16; j++)
            isum += ((q[j] & 0x0f) - 8) * y[j] + ((q[j] >> 4) - 8) * y[j + 16];
        sum += f16_fast(w) * f16_fast(x) * (float)isum;
    }
    return sum;
}

static float dot_q4_1(int64_t n, const void *wv, const void *xv) {
    const uint8_t *w = wv, *x = xv;
    float sum = 0;
    for (int64_t b = 0; b < n / 32; b++, w += sizeof(block_q4_1), x += sizeof(block_q8_1)) {
        const uint8_t *q = w + offsetof(block_q4_1, qs);
        const int8_t *y = (const int8_t *)(x + offsetof(block_q8_1, qs));
        int isum = 0;
        for (int j = 0; j < 16; j++)
            isum += (q[j] & 0x0f) * y[j] + (q[j] >> 4) * y[j + 16];
        /* sum((q d + m) y dy) = d dy sum(q y) + m s */
        sum += f16_fast(w) * f16_fast(x) * (float)isum +
               f16_fast(w + offsetof(block_q4_1, m)) * f16_fast(x + offsetof(block_q8_1, s));
    }
    return sum;
}

/* The 5-bit quants of a Q5 block: nibbles plus bit j of qh as bit 4. */
static inline void q5_values(const uint8_t *qh_p, const uint8_t *qs, int v[32]) {
    const uint32_t qh = quant_rd32(qh_p);
    for (int j = 0; j < 16; j++) {
        v[j] = (qs[j] & 0x0f) | (int)(((qh >> j) & 1) << 4);
        v[j + 16] = (qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4);
    }
}

static float dot_q5_0(int64_t n, const void *wv, const void *xv) {
    const uint8_t *w = wv, *x = xv;
    float sum = 0;
    int v[32];
    for (int64_t b = 0; b < n / 32; b++, w += sizeof(block_q5_0), x += sizeof(block_q8_0)) {
        q5_values(w + offsetof(block_q5_0, qh), w + offsetof(block_q5_0, qs), v);
        const int8_t *y = (const int8_t *)(x + offsetof(block_q8_0, qs));
        int isum = 0;
        for (int j = 0; j < 32; j++)
            isum += (v[j] - 16) * y[j];
        sum += f16_fast(w) * f16_fast(x) * (float)isum;
    }
    return sum;
}

static float dot_q5_1(int64_t n, const void *wv, const void *xv) {
    const uint8_t *w = wv, *x = xv;
    float sum = 0;
    int v[32];
    for (int64_t b = 0; b < n / 32; b++, w += sizeof(block_q5_1), x += sizeof(block_q8_1)) {
        q5_values(w + offsetof(block_q5_1, qh), w + offsetof(block_q5_1, qs), v);
        const int8_t *y = (const int8_t *)(x + offsetof(block_q8_1, qs));
        int isum = 0;
        for (int j = 0; j < 32; j++)
            isum += v[j] * y[j];
        sum += f16_fast(w) * f16_fast(x) * (float)isum +
               f16_fast(w + offsetof(block_q5_1, m)) * f16_fast(x + offsetof(block_q8_1, s));
    }
    return sum;
}

static float dot_q8_0(int64_t n, const void *wv, const void *xv) {
    const uint8_t *w = wv, *x = xv;
    float sum = 0;
    for (int64_t b = 0; b < n / 32; b++, w += sizeof(block_q8_0), x += sizeof(block_q8_0)) {
        const int8_t *q = (const int8_t *)(w + offsetof(block_q8_0, qs));
        const int8_t *y = (const int8_t *)(x + offsetof(block_q8_0, qs));
        int isum = 0;
        for (int j = 0; j < 32; j++)
            isum += q[j] * y[j];
        sum += f16_fast(w) * f16_fast(x) * (float)isum;
    }
    return sum;
}

/* ---- K-quants against Q8_K ---- */

static inline const int8_t *q8k_qs(const uint8_t *x) { return (const int8_t *)(x + offsetof(block_q8_K, qs)); }
static inline int q8k_bsum(const uint8_t *x, int j) {
    return (int16_t)quant_rd16(x + offsetof(block_q8_K, bsums) + 2 * j);
}

/*
 * Q2_K, Q3_K and Q6_K share one walk: element e = 128 h + 32 p + r, with
 * r = 16 half + l, belongs to the 16-element sub-block j = 8 h + 2 p + half;
 * its low bits are 2-bit plane p of byte 32 h + r (Q2_K, Q3_K).
 */
static float dot_q2_k(int64_t n, const void *wv, const void *xv) {
    const uint8_t *w = wv, *x = xv;
    float sum = 0;
    for (int64_t b = 0; b < n / QK_K; b++, w += sizeof(block_q2_K), x += sizeof(block_q8_K)) {
        const uint8_t *sc = w + offsetof(block_q2_K, scales);
        const uint8_t *qs = w + offsetof(block_q2_K, qs);
        const int8_t *y = q8k_qs(x);
        int isum = 0, msum = 0;
        for (int j = 0; j < 16; j++)
            msum += (sc[j] >> 4) * q8k_bsum(x, j);
        for (int h = 0; h < 2; h++)
            for (int p = 0; p < 4; p++)
                for (int half = 0; half < 2; half++) {
                    const uint8_t *q = qs + 32 * h + 16 * half;
                    const int8_t *yy = y + 128 * h + 32 * p + 16 * half;
                    int s = 0;
                    for (int l = 0; l < 16; l++)
                        s += ((q[l] >> (2 * p)) & 3) * yy[l];
                    isum += (sc[8 * h + 2 * p + half] & 0x0f) * s;
                }
        const float dy = quant_rd_f32(x);
        sum += dy * (f16_fast(w + offsetof(block_q2_K, d)) * (float)isum -
                     f16_fast(w + offsetof(block_q2_K, dmin)) * (float)msum);
    }
    return sum;
}

static float dot_q3_k(int64_t n, const void *wv, const void *xv) {
    const uint8_t *w = wv, *x = xv;
    float sum = 0;
    int8_t sc[16];
    for (int64_t b = 0; b < n / QK_K; b++, w += sizeof(block_q3_K), x += sizeof(block_q8_K)) {
        const uint8_t *hm = w + offsetof(block_q3_K, hmask);
        const uint8_t *qs = w + offsetof(block_q3_K, qs);
        const int8_t *y = q8k_qs(x);
        quant_q3k_scales(w + offsetof(block_q3_K, scales), sc);
        int isum = 0;
        for (int h = 0; h < 2; h++)
            for (int p = 0; p < 4; p++)
                for (int half = 0; half < 2; half++) {
                    const uint8_t *q = qs + 32 * h + 16 * half, *m = hm + 16 * half;
                    const int8_t *yy = y + 128 * h + 32 * p + 16 * half;
                    int s = 0;
                    /* the third bit of element e is bit e / 32 = 4 h + p of hmask[r]; clear means -4 */
                    for (int l = 0; l < 16; l++)
                        s += (((q[l] >> (2 * p)) & 3) - (((m[l] >> (4 * h + p)) & 1) ? 0 : 4)) * yy[l];
                    isum += sc[8 * h + 2 * p + half] * s;
                }
        sum += quant_rd_f32(x) * f16_fast(w + offsetof(block_q3_K, d)) * (float)isum;
    }
    return sum;
}

/* Q4_K and Q5_K: sub-block j of 32 takes nibble j % 2 of byte run j / 2,
 * and for Q5_K bit j of qh[l] as its fifth bit. */
static float dot_q45_k(int64_t n, const uint8_t *w, const uint8_t *x, int five) {
    const size_t bsize = five ? sizeof(block_q5_K) : sizeof(block_q4_K);
    const size_t qs_off = five ? offsetof(block_q5_K, qs) : offsetof(block_q4_K, qs);
    float sum = 0;
    for (int64_t b = 0; b < n / QK_K; b++, w += bsize, x += sizeof(block_q8_K)) {
        uint8_t sc[8], mn[8];
        quant_k4_unpack(w + offsetof(block_q4_K, scales), sc, mn);
        const uint8_t *qs = w + qs_off;
        const uint8_t *qh = w + offsetof(block_q5_K, qh);
        const int8_t *y = q8k_qs(x);
        int isum = 0, msum = 0;
        for (int j = 0; j < 8; j++) {
            int s = 0;
            for (int l = 0; l < 32; l++) {
                int v = (qs[32 * (j / 2) + l] >> (4 * (j % 2))) & 0x0f;
                if (five) v |= ((qh[l] >> j) & 1) << 4;
                s += v * y[32 * j + l];
            }
            isum += sc[j] * s;
            msum += mn[j] * (q8k_bsum(x, 2 * j) + q8k_bsum(x, 2 * j + 1));
        }
        const float dy = quant_rd_f32(x);
        sum += dy * (f16_fast(w + offsetof(block_q4_K, d)) * (float)isum -
                     f16_fast(w + offsetof(block_q4_K, dmin)) * (float)msum);
    }
    return sum;
}

static float dot_q4_k(int64_t n, const void *w, const void *x) { return dot_q45_k(n, w, x, 0); }
static float dot_q5_k(int64_t n, const void *w, const void *x) { return dot_q45_k(n, w, x, 1); }

static float dot_q6_k(int64_t n, const void *wv, const void *xv) {
    const uint8_t *w = wv, *x = xv;
    float sum = 0;
    for (int64_t b = 0; b < n / QK_K; b++, w += sizeof(block_q6_K), x += sizeof(block_q8_K)) {
        const uint8_t *ql = w + offsetof(block_q6_K, ql);
        const uint8_t *qh = w + offsetof(block_q6_K, qh);
        const int8_t *sc = (const int8_t *)(w + offsetof(block_q6_K, scales));
        const int8_t *y = q8k_qs(x);
        int isum = 0;
        /* group p of half h: low nibble p / 2 of ql[64 h + 32 (p % 2) + r], high pair p of qh[32 h + r] */
        for (int h = 0; h < 2; h++)
            for (int p = 0; p < 4; p++)
                for (int half = 0; half < 2; half++) {
                    const uint8_t *lo = ql + 64 * h + 32 * (p % 2) + 16 * half, *hi = qh + 32 * h + 16 * half;
                    const int8_t *yy = y + 128 * h + 32 * p + 16 * half;
                    int s = 0;
                    for (int l = 0; l < 16; l++)
                        s += ((((lo[l] >> (4 * (p / 2))) & 0x0f) | (((hi[l] >> (2 * p)) & 3) << 4)) - 32) * yy[l];
                    isum += sc[8 * h + 2 * p + half] * s;
                }
        sum += quant_rd_f32(x) * f16_fast(w + offsetof(block_q6_K, d)) * (float)isum;
    }
    return sum;
}

/* ---- attention ---- */

/* n elements of a cache row as f32, into tmp unless they already are */
static const float *attn_row(const uint8_t *row, int f16, int n, float *tmp) {
    if (!f16) return (const float *)row;
    for (int i = 0; i < n; i++)
        tmp[i] = f16_fast(row + 2 * i);
    return tmp;
}

void cpu_attn_scalar(const cpu_attn_job *a) {
    const int hd = a->hd, len = a->len;
    float *tmp = a->s + (size_t)a->ng * len;
    for (int h = 0; h < a->ng; h++) {
        const float *q = a->q + (size_t)h * hd;
        float *s = a->s + (size_t)h * len, mx = -INFINITY;
        for (int j = 0; j < len; j++) {
            const float *k = attn_row(a->k + (size_t)j * a->stride, a->f16, hd, tmp);
            float acc = 0;
            for (int d = 0; d < hd; d++)
                acc += q[d] * k[d];
            s[j] = acc * a->scale;
            mx = s[j] > mx ? s[j] : mx;
        }
        float sum = 0;
        for (int j = 0; j < len; j++)
            sum += s[j] = expf(s[j] - mx);
        a->m[h] = mx;
        a->l[h] = sum;
    }
    /* rows outer, heads inner: each V row is converted once for the group */
    memset(a->o, 0, (size_t)a->ng * hd * sizeof(float));
    for (int j = 0; j < len; j++) {
        const float *v = attn_row(a->v + (size_t)j * a->stride, a->f16, hd, tmp);
        for (int h = 0; h < a->ng; h++) {
            const float p = a->s[(size_t)h * len + j];
            float *o = a->o + (size_t)h * hd;
            for (int d = 0; d < hd; d++)
                o[d] += p * v[d];
        }
    }
}

/* Rows one at a time, in float: the reference for the SIMD kernel, which
 * computes the same sums in another order. */
void cpu_attn_rows_scalar(const cpu_attn_rows_job *a) {
    const int hd = a->hd, len = a->len, R = CPU_ATTN_ROWS;
    for (int r = 0; r < a->nr; r++) {
        const float *q = a->q + (size_t)r * a->q_stride;
        float *s = a->s, *o = a->o + (size_t)r * a->o_stride, mx = -INFINITY;
        for (int j = 0; j < len; j++) {
            const float *k = a->k + (size_t)j * a->kv_stride;
            float acc = 0;
            for (int d = 0; d < hd; d++)
                acc += q[d] * k[d];
            s[j] = acc * a->scale + (a->bias ? a->bias[(size_t)j * R + r] : 0.0f);
            mx = s[j] > mx ? s[j] : mx;
        }
        memset(o, 0, (size_t)hd * sizeof(float));
        if (mx == -INFINITY) continue; /* every key hidden: zeros */
        float sum = 0;
        for (int j = 0; j < len; j++)
            sum += s[j] = s[j] == -INFINITY ? 0 : expf(s[j] - mx);
        for (int j = 0; j < len; j++) {
            if (s[j] == 0) continue;
            const float *v = a->v + (size_t)j * a->kv_stride;
            for (int d = 0; d < hd; d++)
                o[d] += s[j] * v[d];
        }
        const float inv = 1.0f / sum;
        for (int d = 0; d < hd; d++)
            o[d] *= inv;
    }
}

/* The decode kernel (cpu_attn_dec_job), vector by vector in float: the
 * reference for the SIMD one and the one used for head sizes it lacks. */
void cpu_attn_dec_scalar(const cpu_attn_dec_job *a) {
    const int hd = a->hd, len = a->len;
    float *tmp = a->s + (size_t)len;
    for (int r = 0; r < a->nr; r++) {
        const float *q = a->q[r], *b = a->bias[r];
        float *s = a->s, *o = a->o[r], mx = -INFINITY;
        for (int j = 0; j < len; j++) {
            const float *k = attn_row(a->k + (size_t)j * a->stride, a->f16, hd, tmp);
            float acc = 0;
            for (int d = 0; d < hd; d++)
                acc += q[d] * k[d];
            s[j] = acc * a->scale + (b ? b[j] : 0.0f);
            if (b && b[j] == -INFINITY) s[j] = -INFINITY;
            mx = s[j] > mx ? s[j] : mx;
        }
        memset(o, 0, (size_t)hd * sizeof(float));
        a->m[r] = mx, a->l[r] = 0;
        if (mx == -INFINITY) continue; /* every key hidden */
        float sum = 0;
        for (int j = 0; j < len; j++)
            sum += s[j] = s[j] == -INFINITY ? 0 : expf(s[j] - mx);
        a->l[r] = sum;
        for (int j = 0; j < len; j++) {
            if (s[j] == 0) continue;
            const float *v = attn_row(a->v + (size_t)j * a->stride, a->f16, hd, tmp);
            for (int d = 0; d < hd; d++)
                o[d] += s[j] * v[d];
        }
    }
}

/* ---- the table ---- */

static void fill_scalar(cpu_type_kernels t[WGML_DTYPE_COUNT]) {
    memset(t, 0, sizeof(cpu_type_kernels) * WGML_DTYPE_COUNT);
    t[WGML_F32] = (cpu_type_kernels){.act_type = WGML_F32, .prepare = prep_f32, .dot = dot_f32, .to_float = tof_f32};
    t[WGML_F16] = (cpu_type_kernels){.act_type = WGML_F32, .prepare = prep_f32, .dot = dot_f16, .to_float = tof_f16};
    t[WGML_BF16] = (cpu_type_kernels){.act_type = WGML_F32, .prepare = prep_f32, .dot = dot_bf16, .to_float = tof_bf16};
    t[WGML_Q4_0] = (cpu_type_kernels){.act_type = WGML_Q8_0, .prepare = prep_q8_0, .dot = dot_q4_0, .to_float = tof_q4_0};
    t[WGML_Q4_1] = (cpu_type_kernels){.act_type = WGML_Q8_1, .prepare = prep_q8_1, .dot = dot_q4_1, .to_float = tof_q4_1};
    t[WGML_Q5_0] = (cpu_type_kernels){.act_type = WGML_Q8_0, .prepare = prep_q8_0, .dot = dot_q5_0, .to_float = tof_q5_0};
    t[WGML_Q5_1] = (cpu_type_kernels){.act_type = WGML_Q8_1, .prepare = prep_q8_1, .dot = dot_q5_1, .to_float = tof_q5_1};
    t[WGML_Q8_0] = (cpu_type_kernels){.act_type = WGML_Q8_0, .prepare = prep_q8_0, .dot = dot_q8_0, .to_float = tof_q8_0};
    t[WGML_Q2_K] = (cpu_type_kernels){.act_type = WGML_Q8_K, .prepare = prep_q8_k, .dot = dot_q2_k, .to_float = tof_q2_k};
    t[WGML_Q3_K] = (cpu_type_kernels){.act_type = WGML_Q8_K, .prepare = prep_q8_k, .dot = dot_q3_k, .to_float = tof_q3_k};
    t[WGML_Q4_K] = (cpu_type_kernels){.act_type = WGML_Q8_K, .prepare = prep_q8_k, .dot = dot_q4_k, .to_float = tof_q4_k};
    t[WGML_Q5_K] = (cpu_type_kernels){.act_type = WGML_Q8_K, .prepare = prep_q8_k, .dot = dot_q5_k, .to_float = tof_q5_k};
    t[WGML_Q6_K] = (cpu_type_kernels){.act_type = WGML_Q8_K, .prepare = prep_q8_k, .dot = dot_q6_k, .to_float = tof_q6_k};
}

/* ---- private activation layouts (kernels.h) ---- */

size_t cpu_act_row_size(uint32_t act, int64_t n) {
    if (act == CPU_ACT_Q8_K_R) return n < 0 || n % 256 ? 0 : (size_t)(n / 256) * CPU_ACT_Q8_K_R_BLOCK;
    if (act != CPU_ACT_Q8_0_G8 && act != CPU_ACT_Q8_0_Z128) return wgml_row_size(act, n);
    if (n < 0 || n % 32) return 0;
    const size_t group = act == CPU_ACT_Q8_0_G8 ? CPU_ACT_Q8_0_G8_GROUP : CPU_ACT_Q8_0_Z128_GROUP;
    return (size_t)(n / 256) * group + (size_t)(n % 256 / 32) * sizeof(block_q8_0);
}

/*
 * The two Q8_0 layouts in groups of 8 blocks (CPU_ACT_Q8_0_G8, _Z128): the 8
 * fp16 d first, then the quants and, per block, an int32 -zp * sum(q)
 * followed by zeros. The offsets are those kernels_avx512.c's
 * kz_prep_q8_0_g8 and kz_prep_q8_0_z128 write.
 */
typedef struct {
    size_t group;   /* bytes per group */
    int zp;         /* the zero point the int32 takes off */
    int words;      /* int32s per block: the sum, then zeros */
    size_t (*q_offset)(int k, int i); /* element i (0..31) of block k (0..7) */
    size_t (*sum_offset)(int k);      /* block k's int32s */
} q8_0_groups;

static size_t g8_q_offset(int k, int i) {
    return 16 + 192 * (size_t)(k / 4) + 64 + 64 * (size_t)(i / 16) + 16 * (size_t)(k % 4) + (size_t)(i % 16);
}
static size_t g8_sum_offset(int k) { return 16 + 192 * (size_t)(k / 4) + 16 * (size_t)(k % 4); }
static size_t z128_q_offset(int k, int i) { return 16 + 128 * (size_t)(k / 2) + 64 + 32 * (size_t)(k % 2) + (size_t)i; }
static size_t z128_sum_offset(int k) { return 16 + 128 * (size_t)(k / 2) + 32 * (size_t)(k % 2); }

static const q8_0_groups k_g8 = {CPU_ACT_Q8_0_G8_GROUP, 8, 4, g8_q_offset, g8_sum_offset};
static const q8_0_groups k_z128 = {CPU_ACT_Q8_0_Z128_GROUP, 128, 8, z128_q_offset, z128_sum_offset};

/* Back to floats; -1 where the int32s are not -zp * sum(q) and zeros. */
static int q8_0_groups_to_float(const q8_0_groups *L, const uint8_t *p, float *dst, int64_t n) {
    if (n < 0 || n % 32) return -1;
    for (int64_t g = 0; g < n / 256; g++, p += L->group, dst += 256)
        for (int k = 0; k < 8; k++) {
            const float d = wgml_f16_to_f32(quant_rd16(p + 2 * k));
            int32_t sum = 0, z[8];
            for (int i = 0; i < 32; i++) {
                const int8_t q = (int8_t)p[L->q_offset(k, i)];
                dst[32 * k + i] = (float)q * d;
                sum += q;
            }
            memcpy(z, p + L->sum_offset(k), (size_t)L->words * sizeof z[0]);
            if (z[0] != -L->zp * sum) return -1;
            for (int i = 1; i < L->words; i++)
                if (z[i]) return -1;
        }
    return wgml_dequantize_row(WGML_Q8_0, p, dst, n % 256);
}

/* CPU_ACT_Q8_K_R back to floats; -1 where the sums, the second d or the zero
 * bytes are not what kernels_avx512.c's kz_prep_q8_k_r writes. */
static int q8_k_r_to_float(const uint8_t *p, float *dst, int64_t n) {
    if (n < 0 || n % 256) return -1;
    for (int64_t b = 0; b < n / 256; b++, p += CPU_ACT_Q8_K_R_BLOCK, dst += 256) {
        const float d = quant_rd_f32(p + 288);
        if (quant_rd32(p + 288) != quant_rd32(p + 292)) return -1;
        for (int i = 0; i < 8; i++) {
            const int j = cpu_act_q8_k_r_run(i);
            int sum = 0;
            for (int e = 0; e < 32; e++) {
                const int q = (int8_t)p[32 * i + e];
                dst[32 * j + e] = (float)q * d;
                sum += q;
            }
            if (quant_rd16(p + 256 + 2 * i) != 0 || (int16_t)quant_rd16(p + 272 + 2 * j) != sum) return -1;
        }
        for (int i = 296; i < CPU_ACT_Q8_K_R_BLOCK; i++)
            if (p[i]) return -1;
    }
    return 0;
}

/* ---- private weight layouts (kernels.h) ---- */

void cpu_w_q4_0_x8_repack(const void *src, void *dst, int64_t n) {
    const uint8_t *s = src;
    uint8_t *o = dst;
    const size_t bs = sizeof(block_q4_0);
    for (int64_t g = 0; g < n / 256; g++, s += 8 * bs, o += 8 * bs)
        for (int k = 0; k < 8; k++) {
            memcpy(o + 2 * k, s + k * bs + offsetof(block_q4_0, d), 2);
            memcpy(o + 16 + 16 * k, s + k * bs + offsetof(block_q4_0, qs), 16);
        }
    memcpy(o, s, (size_t)(n % 256 / 32) * bs); /* the tail: plain blocks */
}

void cpu_w_q4_0_x8_to_float(const void *src, float *dst, int64_t n) {
    const uint8_t *s = src;
    const size_t bs = sizeof(block_q4_0);
    for (int64_t g = 0; g < n / 256; g++, s += 8 * bs, dst += 256) {
        uint8_t blocks[8 * sizeof(block_q4_0)]; /* the group back in GGUF's order */
        for (int k = 0; k < 8; k++) {
            memcpy(blocks + k * bs + offsetof(block_q4_0, d), s + 2 * k, 2);
            memcpy(blocks + k * bs + offsetof(block_q4_0, qs), s + 16 + 16 * k, 16);
        }
        wgml_dequantize_row(WGML_Q4_0, blocks, dst, 256);
    }
    wgml_dequantize_row(WGML_Q4_0, s, dst, n % 256);
}

int cpu_act_to_float(uint32_t act, const void *src, float *dst, int64_t n) {
    if (act == CPU_ACT_Q8_K_R) return q8_k_r_to_float(src, dst, n);
    if (act == CPU_ACT_Q8_0_Z128) return q8_0_groups_to_float(&k_z128, src, dst, n);
    if (act == CPU_ACT_Q8_0_G8) return q8_0_groups_to_float(&k_g8, src, dst, n);
    return wgml_dequantize_row(act, src, dst, n);
}

void cpu_gemm_scalar(int64_t kc, const float *x, size_t ldx, const float *wp, float *c, size_t ldc, int mr, int nc,
                     int add) {
    for (int r = 0; r < mr; r++)
        for (int j = 0; j < nc; j++) {
            float s = 0;
            for (int64_t k = 0; k < kc; k++) s += x[(size_t)r * ldx + k] * wp[k * CPU_GEMM_NR + j];
            float *o = &c[(size_t)r * ldc + j];
            *o = add ? *o + s : s;
        }
}

void cpu_snake_scalar(float *out, const float *x, const float *v, int64_t n, int64_t rows) {
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < n; c++) {
            const double y = x[r * n + c], s = sin(v[c] * y);
            out[r * n + c] = (float)(y + s * s / v[c]);
        }
}

void cpu_gemm_bf16_scalar(int64_t kp, const uint32_t *x, size_t ldx, const uint32_t *wp, float *c, size_t ldc, int mr,
                          int nc, int add) {
    for (int r = 0; r < mr; r++)
        for (int j = 0; j < nc; j++) {
            float s = 0;
            for (int64_t k = 0; k < kp; k++) {
                const uint32_t xv = x[(size_t)r * ldx + k], wv = wp[k * CPU_GEMM_NR + j];
                s += wgml_bf16_to_f32((uint16_t)xv) * wgml_bf16_to_f32((uint16_t)wv) +
                     wgml_bf16_to_f32((uint16_t)(xv >> 16)) * wgml_bf16_to_f32((uint16_t)(wv >> 16));
            }
            float *o = &c[(size_t)r * ldc + j];
            *o = add ? *o + s : s;
        }
}

void cpu_qgemm_scalar(int64_t nch, int sub, int zp, const uint8_t *act, size_t act_stride, const uint8_t *wp,
                      float *c, size_t ldc, int nt, int nc, int add, const float *bias) {
    const int ns = 32 / sub;
    const size_t cb = cpu_qgemm_chunk_bytes(sub);
    for (int t = 0; t < nt; t++)
        for (int j = 0; j < nc; j++) {
            float acc = 0.0f;
            for (int64_t ch = 0; ch < nch; ch++) {
                const uint8_t *w = wp + (size_t)ch * cb, *a = act + (size_t)t * act_stride + (size_t)ch * CPU_QGEMM_ACT;
                float d, m;
                int32_t sq;
                memcpy(&d, a + 32, 4);
                for (int h = 0; h < ns; h++) {
                    int32_t s = 0;
                    for (int k = h * sub; k < (h + 1) * sub; k++)
                        s += (int32_t)w[(k / 4) * 64 + 4 * j + k % 4] * (int8_t)a[k];
                    float s1, s2;
                    memcpy(&s1, w + 512 + (size_t)h * 128 + 4 * (size_t)j, 4);
                    memcpy(&s2, w + 512 + (size_t)h * 128 + 64 + 4 * (size_t)j, 4);
                    memcpy(&m, a + (ns == 1 ? 44 : 36 + 4 * h), 4);
                    memcpy(&sq, a + (ns == 1 ? 56 : 48 + 4 * h), 4);
                    if (zp) {
                        acc += (float)(s - zp * sq) * (s1 * d);
                    } else {
                        acc += (float)s * (s1 * d);
                        acc += s2 * m;
                    }
                }
            }
            float *o = c + (size_t)t * ldc + j;
            const float v = acc + (bias ? bias[j] : 0.0f);
            *o = add ? *o + v : v;
        }
}

void cpu_qgemm_pack_scalar(const uint8_t *u, int64_t K, const float *s1, const float *s2, int sub, uint8_t *dst) {
    const int ns = 32 / sub;
    const size_t cb = cpu_qgemm_chunk_bytes(sub);
    for (int64_t c = 0; c < K / 32; c++) {
        uint8_t *o = dst + (size_t)c * cb;
        for (int j = 0; j < CPU_QGEMM_NC; j++)
            for (int g = 0; g < 8; g++) memcpy(o + 64 * g + 4 * j, u + (size_t)j * (size_t)K + 32 * c + 4 * g, 4);
        for (int h = 0; h < ns; h++) {
            memcpy(o + 512 + 128 * h, s1 + 16 * (2 * c + h), 64);
            memcpy(o + 512 + 128 * h + 64, s2 + 16 * (2 * c + h), 64);
        }
    }
}

void cpu_swiglu_scalar(float *g, const float *u, const float *bg, const float *bu, int64_t M) {
    for (int64_t m = 0; m < M; m++) {
        const float a = g[m] + (bg ? bg[m] : 0.0f), b = u[m] + (bu ? bu[m] : 0.0f);
        g[m] = a / (1.0f + expf(-a)) * b;
    }
}

void cpu_to_f16_scalar(const float *x, uint16_t *dst, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] = wgml_f32_to_f16(x[i]);
}

void cpu_to_bf16_scalar(const float *x, uint16_t *dst, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] = wgml_f32_to_bf16(x[i]);
}

static cpu_type_kernels scalar_table[WGML_DTYPE_COUNT];
static cpu_to_bf16_fn best_to_bf16 = cpu_to_bf16_scalar;
static cpu_to_f16_fn best_to_f16 = cpu_to_f16_scalar;
static cpu_snake_fn best_snake = cpu_snake_scalar;
static cpu_swiglu_fn best_swiglu = cpu_swiglu_scalar;
static cpu_gemm_fn best_gemm = cpu_gemm_scalar;
static cpu_gemm_bf16_fn best_gemm_bf16; /* NULL: none (BF16 weights take the f32 GEMM) */
static cpu_qgemm_fn best_qgemm;         /* NULL: none (quantized prompts take the dot products) */
static cpu_attn_fn best_attn = cpu_attn_scalar;
static cpu_attn_rows_fn best_attn_rows = cpu_attn_rows_scalar;
static cpu_attn_dec_fn best_attn_dec; /* NULL: none (decode takes the block kernel) */
static cpu_type_kernels best_table[WGML_DTYPE_COUNT];
static const char *best_isa = "scalar";
#if defined(WGML_CPU_X86)
static cpu_type_kernels avx2_table[WGML_DTYPE_COUNT]; /* filled when the CPU has AVX-512 too */
static int have_avx2_table;
#endif
static atomic_int init_state; /* 0 not started, 1 in progress, 2 ready */
static atomic_int force_scalar;

#if defined(WGML_CPU_X86)
/*
 * What the CPU and the OS support, from CPUID and XGETBV directly (compilers
 * disagree on the names __builtin_cpu_supports knows): the instructions must
 * exist and the OS must save the ymm (XCR0 bits 1-2) and zmm / mask state
 * (bits 5-7) on context switches. Returns 2 for AVX-512 F/BW/VL + VNNI with
 * AVX2/FMA/F16C, 1 for AVX2 + FMA + F16C, 0 otherwise.
 */
static int x86_level(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    const int osxsave = (c >> 27) & 1, fma = (c >> 12) & 1, avx = (c >> 28) & 1, f16c = (c >> 29) & 1;
    if (!osxsave || !avx) return 0;
    unsigned xlo, xhi;
    __asm__ volatile("xgetbv" : "=a"(xlo), "=d"(xhi) : "c"(0));
    (void)xhi;
    if ((xlo & 0x6) != 0x6) return 0;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
    const int avx2 = (b >> 5) & 1;
    if (!(avx2 && fma && f16c)) return 0;
    const int avx512 = ((b >> 16) & 1) && ((b >> 30) & 1) && ((b >> 31) & 1) && ((c >> 11) & 1); /* F BW VL VNNI */
    return avx512 && (xlo & 0xe6) == 0xe6 ? 2 : 1;
}

/* AVX512_BF16 (vdpbf16ps): CPUID leaf 7 subleaf 1, EAX bit 5 (on top of level 2). */
static int x86_bf16(void) {
    unsigned a, b, c, d;
    return __get_cpuid_count(7, 1, &a, &b, &c, &d) && ((a >> 5) & 1);
}
#endif

#if defined(WGML_CPU_X86)
static int cpu_level; /* x86_level(), capped by WGML_CPU_ISA */
#endif

static void select_table(void) {
    fill_scalar(scalar_table);
    fill_scalar(best_table);
#if defined(WGML_CPU_X86)
    int level = x86_level();
    /* WGML_CPU_ISA=scalar|avx2 caps the kernels chosen, to run and measure here
     * what a CPU without AVX-512 (or without AVX2) gets */
    const char *cap = getenv("WGML_CPU_ISA");
    if (cap && strcmp(cap, "scalar") == 0) level = 0;
    else if (cap && strcmp(cap, "avx2") == 0 && level > 1) level = 1;
    cpu_level = level;
    if (level >= 1) {
        cpu_kernels_fill_avx2(best_table);
        best_attn = cpu_attn_avx2;
        best_attn_rows = cpu_attn_rows_avx2;
        best_gemm = cpu_gemm_avx2;
        best_to_f16 = cpu_to_f16_f16c;
        best_qgemm = cpu_qgemm_avx2;
        best_isa = "avx2";
        if (level >= 2) {
            memcpy(avx2_table, best_table, sizeof avx2_table);
            have_avx2_table = 1;
            cpu_kernels_fill_avx512(best_table);
            best_gemm = cpu_gemm_avx512;
            best_qgemm = cpu_qgemm_avx512;
            best_attn_rows = cpu_attn_rows_avx512;
            best_attn_dec = cpu_attn_dec_avx512;
            best_snake = cpu_snake_avx512;
            best_swiglu = cpu_swiglu_avx512;
            if (x86_bf16()) {
                best_gemm_bf16 = cpu_gemm_bf16_avx512;
                best_to_bf16 = cpu_to_bf16_avx512;
            }
            best_isa = "avx512";
        }
    }
#elif defined(__wasm_simd128__)
    cpu_kernels_fill_wasm(best_table);
    best_gemm = cpu_gemm_wasm;
    best_isa = "wasm-simd128";
#endif
}

static void ensure_init(void) {
    if (atomic_load_explicit(&init_state, memory_order_acquire) == 2) return;
    int expected = 0;
    if (atomic_compare_exchange_strong(&init_state, &expected, 1)) {
        select_table();
        atomic_store_explicit(&init_state, 2, memory_order_release);
    } else {
        while (atomic_load_explicit(&init_state, memory_order_acquire) != 2) {}
    }
}

const cpu_type_kernels *cpu_kernels_get(uint32_t type) {
    ensure_init();
    if (type >= WGML_DTYPE_COUNT) return NULL;
    const cpu_type_kernels *t = atomic_load(&force_scalar) ? &scalar_table[type] : &best_table[type];
    return t->dot ? t : NULL;
}

const cpu_type_kernels *cpu_kernels_get_isa(const char *isa, uint32_t type) {
    ensure_init();
    if (type >= WGML_DTYPE_COUNT) return NULL;
    const cpu_type_kernels *t = NULL;
    if (strcmp(isa, "scalar") == 0)
        t = &scalar_table[type];
    else if (strcmp(isa, best_isa) == 0)
        t = &best_table[type];
#if defined(WGML_CPU_X86)
    else if (strcmp(isa, "avx2") == 0 && have_avx2_table)
        t = &avx2_table[type];
#endif
    return t && t->dot ? t : NULL;
}

const char *cpu_kernels_isa(void) {
    ensure_init();
    return atomic_load(&force_scalar) ? "scalar" : best_isa;
}

#if defined(__x86_64__)
#define CPU_ARCH_NAME "x86-64"
#elif defined(__i386__)
#define CPU_ARCH_NAME "x86"
#elif defined(__aarch64__)
#define CPU_ARCH_NAME "aarch64"
#elif defined(__arm__)
#define CPU_ARCH_NAME "arm"
#elif defined(__wasm32__)
#define CPU_ARCH_NAME "wasm32"
#elif defined(__riscv)
#define CPU_ARCH_NAME "riscv"
#else
#define CPU_ARCH_NAME "cpu"
#endif

const char *cpu_kernels_features(void) {
    ensure_init();
    if (strcmp(best_isa, "avx512") == 0) return CPU_ARCH_NAME " AVX2 AVX-512 VNNI";
    if (strcmp(best_isa, "avx2") == 0) return CPU_ARCH_NAME " AVX2";
    if (strcmp(best_isa, "wasm-simd128") == 0) return CPU_ARCH_NAME " SIMD128";
    return CPU_ARCH_NAME " scalar";
}

cpu_attn_fn cpu_kernels_attn(void) {
    ensure_init();
    return atomic_load(&force_scalar) ? cpu_attn_scalar : best_attn;
}

cpu_attn_rows_fn cpu_kernels_attn_rows(void) {
    ensure_init();
    return atomic_load(&force_scalar) ? cpu_attn_rows_scalar : best_attn_rows;
}

cpu_attn_dec_fn cpu_kernels_attn_dec(void) {
    ensure_init();
    return atomic_load(&force_scalar) ? cpu_attn_dec_scalar : best_attn_dec;
}

cpu_gemm_fn cpu_kernels_gemm(void) {
    ensure_init();
    return atomic_load(&force_scalar) ? cpu_gemm_scalar : best_gemm;
}

cpu_swiglu_fn cpu_kernels_swiglu(void) {
    ensure_init();
    return atomic_load(&force_scalar) ? cpu_swiglu_scalar : best_swiglu;
}

cpu_swiglu_fn cpu_kernels_swiglu_isa(const char *isa) {
    ensure_init();
    if (strcmp(isa, "scalar") == 0) return cpu_swiglu_scalar;
    return strcmp(isa, best_isa) == 0 ? best_swiglu : NULL;
}

cpu_snake_fn cpu_kernels_snake(void) {
    ensure_init();
    return atomic_load(&force_scalar) ? cpu_snake_scalar : best_snake;
}

cpu_gemm_bf16_fn cpu_kernels_gemm_bf16(void) {
    ensure_init();
    return atomic_load(&force_scalar) ? NULL : best_gemm_bf16;
}

cpu_to_bf16_fn cpu_kernels_to_bf16(void) {
    ensure_init();
    return atomic_load(&force_scalar) ? cpu_to_bf16_scalar : best_to_bf16;
}

cpu_gemm_bf16_fn cpu_kernels_gemm_bf16_isa(const char *isa) {
    ensure_init();
    if (strcmp(isa, "scalar") == 0) return cpu_gemm_bf16_scalar;
    return strcmp(isa, best_isa) == 0 ? best_gemm_bf16 : NULL;
}

cpu_to_f16_fn cpu_kernels_to_f16(void) {
    ensure_init();
    return atomic_load(&force_scalar) ? cpu_to_f16_scalar : best_to_f16;
}

cpu_to_f16_fn cpu_kernels_to_f16_isa(const char *isa) {
    ensure_init();
    if (strcmp(isa, "scalar") == 0) return cpu_to_f16_scalar;
#if defined(WGML_CPU_X86)
    if ((strcmp(isa, "avx2") == 0 && (have_avx2_table || strcmp(best_isa, "avx2") == 0)) || strcmp(isa, best_isa) == 0)
        return best_to_f16;
#endif
    return NULL;
}

cpu_qgemm_fn cpu_kernels_qgemm(void) {
    ensure_init();
    return atomic_load(&force_scalar) ? NULL : best_qgemm;
}

cpu_qgemm_fn cpu_kernels_qgemm_isa(const char *isa) {
    ensure_init();
    if (strcmp(isa, "scalar") == 0) return cpu_qgemm_scalar;
#if defined(WGML_CPU_X86)
    if (strcmp(isa, "avx2") == 0) return cpu_level >= 1 ? cpu_qgemm_avx2 : NULL;
#endif
    return strcmp(isa, best_isa) == 0 ? best_qgemm : NULL;
}

cpu_qgemm_pack_fn cpu_kernels_qgemm_pack_isa(const char *isa) {
    ensure_init();
    if (strcmp(isa, "scalar") == 0) return cpu_qgemm_pack_scalar;
#if defined(WGML_CPU_X86)
    if (strcmp(isa, best_isa) == 0 && best_qgemm == cpu_qgemm_avx512) return cpu_qgemm_pack_avx512;
    if (strcmp(isa, "avx2") == 0 && cpu_level >= 1) return cpu_qgemm_pack_scalar; /* the same panels; no AVX2 packer */
#endif
    return NULL;
}

cpu_qgemm_prep_fn cpu_kernels_qgemm_prep_isa(const char *isa) {
    ensure_init();
#if defined(WGML_CPU_X86)
    if (strcmp(isa, best_isa) == 0 && best_qgemm == cpu_qgemm_avx512) return cpu_qgemm_prep_avx512;
#endif
    (void)isa;
    return NULL;
}

cpu_qgemm_direct_fn cpu_kernels_qgemm_direct_isa(const char *isa) {
    ensure_init();
#if defined(WGML_CPU_X86)
    if (strcmp(isa, best_isa) == 0 && best_qgemm == cpu_qgemm_avx512) return cpu_qgemm_direct_avx512;
#endif
    (void)isa;
    return NULL;
}

int cpu_kernels_gemm_fast(void) { return cpu_kernels_gemm() != cpu_gemm_scalar; }

cpu_gemm_fn cpu_kernels_gemm_isa(const char *isa) {
    ensure_init();
    if (strcmp(isa, "scalar") == 0) return cpu_gemm_scalar;
    if (strcmp(isa, best_isa) == 0) return best_gemm;
#if defined(WGML_CPU_X86)
    if (strcmp(isa, "avx2") == 0 && have_avx2_table) return cpu_gemm_avx2;
#endif
    return NULL;
}

void cpu_kernels_force_scalar(int on) { atomic_store(&force_scalar, on ? 1 : 0); }
