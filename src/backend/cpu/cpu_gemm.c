/*
 * cpu_gemm.c - matmul of many token rows as a blocked GEMM (the prompt rows
 * of an LLM, a BERT batch, Kokoro's convolutions as im2col x weight).
 *
 *   out[i][m] = (add ? out[i][m] : 0) + sum_k x[i][k] * w[m][k] + bias[m]
 *
 * The weight rows are first converted to f32 and packed into panels of
 * CPU_GEMM_NR rows laid out k-major (panel p, row k: the CPU_GEMM_NR
 * weights of output columns 32p .. 32p+31), in the caller's scratch (a
 * copy made per call, never kept: it costs one pass over the weight, small
 * beside n passes of arithmetic). The micro-kernel (kernels.h) then holds a
 * tile of CPU_GEMM_MR rows x CPU_GEMM_NR columns in registers.
 *
 * Where the CPU has AVX512_BF16 and the caller allows it (bf16: BF16
 * weights without f32_act, or any weight with bf16_act, cpu_ops.c), the
 * product goes as bf16 pairs instead (panel p, pair k: 32 words of
 * (w[m][2k], w[m][2k+1]), BF16 weights as stored, others rounded to
 * nearest even), against the activations rounded to bf16 tile by tile
 * (cpu_gemm_bf16_fn): twice the f32 FMA rate, at bf16's 8-bit mantissa.
 *
 * Blocking: k in blocks of GEMM_KC, so that one block of every panel (at
 * most a few hundred KiB) stays in L2 while the tiles of a row block go
 * over it, and a tile's rows of the block (CPU_GEMM_MR x GEMM_KC floats)
 * stay in L1 while every panel goes over them. Work items are row blocks
 * x groups of panels, shared out by the thread pool; a matmul of few rows
 * splits its panels so that every thread gets work.
 */
#include "backend/cpu/cpu_gemm.h"

#include <string.h>

#include "backend/cpu/cpu_tune.h"
#include "backend/cpu/kernels.h"
#include "core/dtype.h"

#define GEMM_KC 512                  /* k per block */
#define GEMM_ROWS (CPU_GEMM_MR * 8)  /* token rows per work item (4 tiles of bf16 pairs) */

size_t cpu_gemm_scratch(int64_t M, int64_t K) {
    int64_t panels = (M + CPU_GEMM_NR - 1) / CPU_GEMM_NR;
    return (size_t)panels * (size_t)K * CPU_GEMM_NR * sizeof(float) + 64;
}

/* a weight row as floats, then as bf16 (pack_panels_bf16); or a tile's
 * activations as bf16 (gemm_items) */
size_t cpu_gemm_tmp_floats(int64_t K) {
    size_t row = (size_t)K + ((size_t)K + 1) / 2, tile = CPU_GEMM_MR_BF16 * (GEMM_KC / 2);
    return (row > tile ? row : tile) + 16;
}

/* the kernel exists and was measured faster here (or WGML_CPU_GEMM=bf16): cpu_tune.h */
int cpu_gemm_bf16_ok(void) { return cpu_kernels_gemm_bf16() != NULL && cpu_gemm_choice_get()->bf16; }

typedef struct {
    const cpu_gemm_args *a;
    float *wp; /* packed panels */
    cpu_gemm_fn fn;
    cpu_gemm_bf16_fn bf16;   /* bf16 pairs (BF16 weights), else NULL */
    cpu_to_bf16_fn to_bf16;
    int64_t panels, row_blocks, groups, per_group;
    float *tmp; /* per thread (cpu_gemm_tmp_floats): a weight row as floats, or a tile's activations as bf16 */
    size_t tmp_stride;
} gemm_task;

/* bf16 pair panels [lo, hi): BF16 rows copied as pairs into their column,
 * other types' rows converted to floats and rounded to bf16 first. */
static void pack_panels_bf16(void *p, int64_t lo, int64_t hi, int ith) {
    gemm_task *t = p;
    const cpu_gemm_args *a = t->a;
    const int64_t K = a->K, kp = (K + 1) / 2;
    uint32_t *wp = (uint32_t *)t->wp;
    float *tmp = t->tmp + (size_t)ith * t->tmp_stride;
    uint16_t *conv = (uint16_t *)(tmp + K);
    for (int64_t pn = lo; pn < hi; pn++) {
        uint32_t *dst = wp + (size_t)pn * (size_t)kp * CPU_GEMM_NR;
        for (int j = 0; j < CPU_GEMM_NR; j++) {
            const int64_t m = pn * CPU_GEMM_NR + j;
            if (m >= a->M) {
                for (int64_t k = 0; k < kp; k++) dst[k * CPU_GEMM_NR + j] = 0;
                continue;
            }
            const uint8_t *row = a->w + (size_t)m * a->w_row;
            if (a->type != WGML_BF16) {
                a->k->to_float(row, tmp, K);
                t->to_bf16(tmp, conv, K);
                row = (const uint8_t *)conv;
            }
            for (int64_t k = 0; k < kp; k++) {
                uint16_t e0, e1 = 0;
                memcpy(&e0, row + 4 * k, 2);
                if (2 * k + 1 < K) memcpy(&e1, row + 4 * k + 2, 2);
                dst[k * CPU_GEMM_NR + j] = (uint32_t)e0 | (uint32_t)e1 << 16;
            }
        }
    }
}

/* Panels [lo, hi): each weight row to floats, scattered to its column. */
static void pack_panels(void *p, int64_t lo, int64_t hi, int ith) {
    gemm_task *t = p;
    const cpu_gemm_args *a = t->a;
    const int64_t K = a->K;
    float *row = t->tmp + (size_t)ith * t->tmp_stride;
    for (int64_t pn = lo; pn < hi; pn++) {
        float *dst = t->wp + (size_t)pn * (size_t)K * CPU_GEMM_NR;
        for (int j = 0; j < CPU_GEMM_NR; j++) {
            int64_t m = pn * CPU_GEMM_NR + j;
            if (m < a->M) {
                a->k->to_float(a->w + (size_t)m * a->w_row, row, K);
                for (int64_t k = 0; k < K; k++) dst[k * CPU_GEMM_NR + j] = row[k];
            } else {
                for (int64_t k = 0; k < K; k++) dst[k * CPU_GEMM_NR + j] = 0;
            }
        }
    }
}

/* The product's k blocks: block b covers weight columns [wk, wk + kc),
 * which input row i reads at x + i * ldx + xoff. Plain: blocks of GEMM_KC.
 * A convolution: each tap's real channels in blocks of GEMM_KC, read from
 * the signal's rows (a tap's padding columns, zero, are never visited). */
typedef struct {
    int64_t wk, kc;
    size_t xoff;
} kblock;

static int64_t kblock_count(const cpu_gemm_args *a) {
    if (!a->conv_kernel) return (a->K + GEMM_KC - 1) / GEMM_KC;
    return (int64_t)a->conv_kernel * ((a->conv_c + GEMM_KC - 1) / GEMM_KC);
}

static kblock kblock_at(const cpu_gemm_args *a, int64_t b) {
    if (!a->conv_kernel) {
        const int64_t k0 = b * GEMM_KC;
        return (kblock){k0, a->K - k0 < GEMM_KC ? a->K - k0 : GEMM_KC, (size_t)k0};
    }
    const int64_t C = a->conv_c, per = (C + GEMM_KC - 1) / GEMM_KC, j = b / per, c0 = (b % per) * GEMM_KC;
    return (kblock){j * (a->K / a->conv_kernel) + c0, C - c0 < GEMM_KC ? C - c0 : GEMM_KC,
                    (size_t)(j * a->conv_dilation * C + c0)};
}

/* Work items [lo, hi): item = row block * groups + panel group. With bf16
 * pairs each tile's rows of a k block are first rounded to bf16, once for
 * all the panels, into the thread's tmp. */
static void gemm_items(void *p, int64_t lo, int64_t hi, int ith) {
    gemm_task *t = p;
    const cpu_gemm_args *a = t->a;
    const int64_t K = a->K, M = a->M, kp_all = (K + 1) / 2, nb = kblock_count(a);
    const size_t ldx = a->conv_kernel ? (size_t)a->conv_stride * (size_t)a->conv_c : (size_t)K;
    uint16_t *xb = (uint16_t *)(((uintptr_t)(t->tmp + (size_t)ith * t->tmp_stride) + 63) & ~(uintptr_t)63);
    for (int64_t it = lo; it < hi; it++) {
        const int64_t rb = it / t->groups, g = it % t->groups;
        const int64_t i0 = rb * GEMM_ROWS, i1 = i0 + GEMM_ROWS < a->n ? i0 + GEMM_ROWS : a->n;
        const int64_t p0 = g * t->per_group, p1 = p0 + t->per_group < t->panels ? p0 + t->per_group : t->panels;
        for (int64_t b = 0; b < nb; b++) {
            const kblock kb = kblock_at(a, b); /* wk is even with bf16 pairs (cpu_gemm) */
            const int64_t kc = kb.kc, kp = (kc + 1) / 2;
            const int add = b > 0 || a->add;
            const int64_t MR = t->bf16 ? CPU_GEMM_MR_BF16 : CPU_GEMM_MR;
            for (int64_t i = i0; i < i1; i += MR) {
                const int mr = (int)(i1 - i < MR ? i1 - i : MR);
                const float *x = a->x + (size_t)i * ldx + kb.xoff;
                if (t->bf16)
                    for (int r = 0; r < mr; r++) {
                        t->to_bf16(x + (size_t)r * ldx, xb + (size_t)r * 2 * (size_t)kp, kc);
                        if (kc & 1) xb[(size_t)r * 2 * (size_t)kp + (size_t)kc] = 0;
                    }
                for (int64_t pn = p0; pn < p1; pn++) {
                    const int64_t m0 = pn * CPU_GEMM_NR;
                    const int nc = (int)(M - m0 < CPU_GEMM_NR ? M - m0 : CPU_GEMM_NR);
                    float *c = a->out + (size_t)i * (size_t)M + m0;
                    if (t->bf16)
                        t->bf16(kp, (const uint32_t *)xb, (size_t)kp,
                                (const uint32_t *)t->wp + ((size_t)pn * (size_t)kp_all + (size_t)(kb.wk / 2)) * CPU_GEMM_NR,
                                c, (size_t)M, mr, nc, add);
                    else
                        t->fn(kc, x, ldx, t->wp + ((size_t)pn * (size_t)K + (size_t)kb.wk) * CPU_GEMM_NR, c, (size_t)M,
                              mr, nc, add);
                }
            }
        }
        if (a->bias)
            for (int64_t i = i0; i < i1; i++)
                for (int64_t m = p0 * CPU_GEMM_NR; m < M && m < p1 * CPU_GEMM_NR; m++)
                    a->out[(size_t)i * (size_t)M + m] += a->bias[m];
    }
}

void cpu_gemm(wgml_threadpool *pool, int n_threads, const cpu_gemm_args *a, void *scratch, float *tmp) {
    gemm_task t = {.a = a, .fn = cpu_kernels_gemm(), .tmp = tmp, .tmp_stride = cpu_gemm_tmp_floats(a->K)};
    t.wp = (float *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    t.panels = (a->M + CPU_GEMM_NR - 1) / CPU_GEMM_NR;
    /* bf16 pairs start at even columns: a convolution's taps must be of even width */
    if (a->bf16 && (!a->conv_kernel || (a->K / a->conv_kernel) % 2 == 0)) {
        t.bf16 = cpu_kernels_gemm_bf16();
        t.to_bf16 = cpu_kernels_to_bf16();
        wgml_threadpool_run_range(pool, pack_panels_bf16, &t, t.panels, 1);
    } else {
        wgml_threadpool_run_range(pool, pack_panels, &t, t.panels, 1);
    }
    t.row_blocks = (a->n + GEMM_ROWS - 1) / GEMM_ROWS;
    /* enough items that every thread has several: split the panels when the rows are few */
    t.groups = 1;
    while (t.row_blocks * t.groups < 4 * (int64_t)n_threads && t.groups < t.panels) t.groups++;
    t.per_group = (t.panels + t.groups - 1) / t.groups;
    t.groups = (t.panels + t.per_group - 1) / t.per_group;
    wgml_threadpool_run_range(pool, gemm_items, &t, t.row_blocks * t.groups, 1);
}
