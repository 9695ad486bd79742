/*
 * cpu_qgemm.c - matmul of many token rows with quantized weights as an int8
 * GEMM: the prompt rows of an LLM, a BERT batch.
 *
 *   out[i][m] = (add ? out[i][m] : 0) + sum_k w[m][k] * x[i][k] + bias[m]
 *
 * The dot products (cpu_ops.c) decode each weight block again for every
 * 4 token rows; here a block is decoded once per call, for all of them:
 *
 * 1. The activations are quantized as the dot products quantize them (Q8_0
 *    for the 32-element types, Q8_K for the K-quants: the same int8 values
 *    and scales), laid out per chunk of 32 with the sums of q that the
 *    weights' offsets need (kernels.h), once for every weight of the call.
 * 2. Work items are groups of panels (CPU_QGEMM_NC weight rows each, as many
 *    as keep the group's unpacked codes within GROUP_BYTES, an L2's share) x
 *    blocks of token rows. An item unpacks its panels' rows into the
 *    micro-kernel's layout (unsigned codes u, 4 k per column in a dword, and
 *    per sub-block the scale and offset with w = s1 u - s2) in the thread's
 *    scratch, then runs every token tile over every panel: the weights come
 *    from L2, a tile's activations from L1, and every vpdpbusd makes 64
 *    products. The unpacked copy is per item and never kept.
 *
 * Every weight type is a set of codes with a scale and offset per 16 or 32
 * elements, so one micro-kernel serves all of them; the unpackers below are
 * the only per-type code. Integer sums are those of the dot products, so
 * results equal theirs up to f32 summation order (a text embedded alone or
 * in a batch agrees to ~1e-6), and never depend on the other rows.
 */
#include "backend/cpu/cpu_qgemm.h"

#include <stdlib.h>
#include <string.h>

#include "backend/cpu/kernels.h"
#include "core/dtype.h"
#include "core/quant.h"
#include "core/quant_impl.h"

#define GROUP_BYTES (256 * 1024) /* unpacked panels per work item, at most (unless one panel is more) */

/* One weight row of K elements (its type's GGUF layout) -> codes u[K] and,
 * per 16 elements, s1 and s2 with w[k] = s1[16 (k / 16)] * u[k] - s2[16 (k / 16)]:
 * the scales of 16 rows side by side, as a panel keeps them. */
typedef void (*unpack_fn)(const uint8_t *restrict row, int64_t K, uint8_t *restrict u, float *restrict s1,
                          float *restrict s2);

static void unpack_q4_0(const uint8_t *restrict r, int64_t K, uint8_t *restrict u, float *restrict s1, float *restrict s2) {
    for (int64_t b = 0; b < K / 32; b++, r += sizeof(block_q4_0), u += 32) {
        const float d = quant_rd_f16(r);
        for (int j = 0; j < 16; j++) {
            u[j] = r[2 + j] & 15;
            u[j + 16] = r[2 + j] >> 4;
        }
        s1[16 * (2 * b)] = s1[16 * (2 * b + 1)] = d;
        s2[16 * (2 * b)] = s2[16 * (2 * b + 1)] = 8.0f * d;
    }
}

/* CPU_W_Q4_0_X8 (kernels.h): groups of 8 blocks (8 scales, then 8 x 16 bytes of nibbles), a tail of GGUF blocks. */
static void unpack_q4_0_x8(const uint8_t *restrict r, int64_t K, uint8_t *restrict u, float *restrict s1, float *restrict s2) {
    const int64_t ng = K / 256;
    for (int64_t g = 0; g < ng; g++, r += 8 * sizeof(block_q4_0))
        for (int k = 0; k < 8; k++, u += 32) {
            const uint8_t *qs = r + 16 + 16 * k;
            const float d = quant_rd_f16(r + 2 * k);
            for (int j = 0; j < 16; j++) {
                u[j] = qs[j] & 15;
                u[j + 16] = qs[j] >> 4;
            }
            const int64_t b = 8 * g + k;
            s1[16 * (2 * b)] = s1[16 * (2 * b + 1)] = d;
            s2[16 * (2 * b)] = s2[16 * (2 * b + 1)] = 8.0f * d;
        }
    unpack_q4_0(r, K % 256, u, s1 + 16 * 16 * ng, s2 + 16 * 16 * ng);
}

static void unpack_q4_1(const uint8_t *restrict r, int64_t K, uint8_t *restrict u, float *restrict s1, float *restrict s2) {
    for (int64_t b = 0; b < K / 32; b++, r += sizeof(block_q4_1), u += 32) {
        const float d = quant_rd_f16(r), m = quant_rd_f16(r + 2);
        for (int j = 0; j < 16; j++) {
            u[j] = r[4 + j] & 15;
            u[j + 16] = r[4 + j] >> 4;
        }
        s1[16 * (2 * b)] = s1[16 * (2 * b + 1)] = d;
        s2[16 * (2 * b)] = s2[16 * (2 * b + 1)] = -m;
    }
}

static void unpack_q5(const uint8_t *restrict qh_p, const uint8_t *restrict qs, uint8_t *restrict u) {
    const uint32_t qh = quant_rd32(qh_p);
    for (int j = 0; j < 16; j++) {
        u[j] = (uint8_t)((qs[j] & 15) | ((qh >> j) & 1) << 4);
        u[j + 16] = (uint8_t)((qs[j] >> 4) | ((qh >> (j + 16)) & 1) << 4);
    }
}

static void unpack_q5_0(const uint8_t *restrict r, int64_t K, uint8_t *restrict u, float *restrict s1, float *restrict s2) {
    for (int64_t b = 0; b < K / 32; b++, r += sizeof(block_q5_0), u += 32) {
        const float d = quant_rd_f16(r);
        unpack_q5(r + 2, r + 6, u);
        s1[16 * (2 * b)] = s1[16 * (2 * b + 1)] = d;
        s2[16 * (2 * b)] = s2[16 * (2 * b + 1)] = 16.0f * d;
    }
}

static void unpack_q5_1(const uint8_t *restrict r, int64_t K, uint8_t *restrict u, float *restrict s1, float *restrict s2) {
    for (int64_t b = 0; b < K / 32; b++, r += sizeof(block_q5_1), u += 32) {
        const float d = quant_rd_f16(r), m = quant_rd_f16(r + 2);
        unpack_q5(r + 4, r + 8, u);
        s1[16 * (2 * b)] = s1[16 * (2 * b + 1)] = d;
        s2[16 * (2 * b)] = s2[16 * (2 * b + 1)] = -m;
    }
}

static void unpack_q8_0(const uint8_t *restrict r, int64_t K, uint8_t *restrict u, float *restrict s1, float *restrict s2) {
    for (int64_t b = 0; b < K / 32; b++, r += sizeof(block_q8_0), u += 32) {
        const float d = quant_rd_f16(r);
        for (int j = 0; j < 32; j++) u[j] = (uint8_t)(r[2 + j] ^ 0x80); /* q + 128 */
        s1[16 * (2 * b)] = s1[16 * (2 * b + 1)] = d;
        s2[16 * (2 * b)] = s2[16 * (2 * b + 1)] = 128.0f * d;
    }
}

static void unpack_q2_k(const uint8_t *restrict r, int64_t K, uint8_t *restrict u, float *restrict s1, float *restrict s2) {
    for (int64_t b = 0; b < K / QK_K; b++, r += sizeof(block_q2_K)) {
        const float d = quant_rd_f16(r + offsetof(block_q2_K, d)), dmin = quant_rd_f16(r + offsetof(block_q2_K, dmin));
        const uint8_t *sc = r + offsetof(block_q2_K, scales), *q = r + offsetof(block_q2_K, qs);
        for (int j = 0; j < 16; j++, u += 16) {
            const uint8_t *qq = q + 32 * (j / 8) + 16 * (j % 2);
            const int shift = 2 * ((j / 2) % 4);
            for (int l = 0; l < 16; l++) u[l] = (qq[l] >> shift) & 3;
            s1[16 * (16 * b + j)] = d * (float)(sc[j] & 15);
            s2[16 * (16 * b + j)] = dmin * (float)(sc[j] >> 4);
        }
    }
}

static void unpack_q3_k(const uint8_t *restrict r, int64_t K, uint8_t *restrict u, float *restrict s1, float *restrict s2) {
    int8_t sc[16];
    for (int64_t b = 0; b < K / QK_K; b++, r += sizeof(block_q3_K)) {
        const float d = quant_rd_f16(r + offsetof(block_q3_K, d));
        const uint8_t *hm = r + offsetof(block_q3_K, hmask), *q = r + offsetof(block_q3_K, qs);
        quant_q3k_scales(r + offsetof(block_q3_K, scales), sc);
        for (int j = 0; j < 16; j++, u += 16) {
            const int h = j / 8, p = (j / 2) % 4, r0 = 16 * (j % 2);
            for (int l = 0; l < 16; l++) { /* v + 4, v = 2-bit value minus 4 where the hmask bit is clear */
                const int rr = r0 + l;
                u[l] = (uint8_t)(((q[32 * h + rr] >> (2 * p)) & 3) + ((hm[rr] >> (4 * h + p)) & 1) * 4);
            }
            s1[16 * (16 * b + j)] = d * (float)sc[j];
            s2[16 * (16 * b + j)] = 4.0f * d * (float)sc[j];
        }
    }
}

static void unpack_q45_k(const uint8_t *restrict r, int64_t K, uint8_t *restrict u, float *restrict s1, float *restrict s2, int five) {
    const size_t bs = five ? sizeof(block_q5_K) : sizeof(block_q4_K);
    for (int64_t b = 0; b < K / QK_K; b++, r += bs) {
        const float d = quant_rd_f16(r), dmin = quant_rd_f16(r + 2);
        const uint8_t *s = r + 4, *qh = r + 4 + K_SCALE_SIZE, *q = five ? qh + QK_K / 8 : qh;
        for (int j = 0; j < 8; j++, u += 32) {
            int sc, m;
            quant_k4_scale_min(s, j, &sc, &m);
            const uint8_t *qq = q + 32 * (j / 2);
            const int shift = 4 * (j % 2);
            for (int l = 0; l < 32; l++) u[l] = (qq[l] >> shift) & 15;
            if (five)
                for (int l = 0; l < 32; l++) u[l] |= (uint8_t)(((qh[l] >> j) & 1) << 4);
            s1[16 * (16 * b + 2 * j)] = s1[16 * (16 * b + 2 * j + 1)] = d * (float)sc;
            s2[16 * (16 * b + 2 * j)] = s2[16 * (16 * b + 2 * j + 1)] = dmin * (float)m;
        }
    }
}

static void unpack_q4_k(const uint8_t *restrict r, int64_t K, uint8_t *restrict u, float *restrict s1, float *restrict s2) { unpack_q45_k(r, K, u, s1, s2, 0); }
static void unpack_q5_k(const uint8_t *restrict r, int64_t K, uint8_t *restrict u, float *restrict s1, float *restrict s2) { unpack_q45_k(r, K, u, s1, s2, 1); }

static void unpack_q6_k(const uint8_t *restrict r, int64_t K, uint8_t *restrict u, float *restrict s1, float *restrict s2) {
    for (int64_t b = 0; b < K / QK_K; b++, r += sizeof(block_q6_K), u += QK_K) {
        const float d = quant_rd_f16(r + offsetof(block_q6_K, d));
        const uint8_t *ql = r + offsetof(block_q6_K, ql), *qh = r + offsetof(block_q6_K, qh);
        const int8_t *sc = (const int8_t *)(r + offsetof(block_q6_K, scales));
        for (int h = 0; h < 2; h++)
            for (int p = 0; p < 4; p++)
                for (int l = 0; l < 32; l++)
                    u[128 * h + 32 * p + l] = (uint8_t)(((ql[64 * h + 32 * (p % 2) + l] >> (4 * (p / 2))) & 15) |
                                                        ((qh[32 * h + l] >> (2 * p)) & 3) << 4);
        for (int j = 0; j < 16; j++) {
            s1[16 * (16 * b + j)] = d * (float)sc[j];
            s2[16 * (16 * b + j)] = 32.0f * d * (float)sc[j];
        }
    }
}

typedef struct {
    unpack_fn unpack;
    int sub; /* elements per scale: 32, or 16 where two halves of a chunk differ */
    int zp;  /* the offset in steps of s1 where it is fixed (s2 = zp s1), else 0 */
} qg_type;

static const qg_type *qg_get(uint32_t type) {
    static const qg_type t[] = {
        [WGML_Q4_0] = {unpack_q4_0, 32, 8},  [WGML_Q4_1] = {unpack_q4_1, 32, 0}, [WGML_Q5_0] = {unpack_q5_0, 32, 16},
        [WGML_Q5_1] = {unpack_q5_1, 32, 0},  [WGML_Q8_0] = {unpack_q8_0, 32, 128}, [WGML_Q2_K] = {unpack_q2_k, 16, 0},
        [WGML_Q3_K] = {unpack_q3_k, 16, 4},  [WGML_Q4_K] = {unpack_q4_k, 32, 0}, [WGML_Q5_K] = {unpack_q5_k, 32, 0},
        [WGML_Q6_K] = {unpack_q6_k, 16, 32},
    };
    return type < sizeof t / sizeof t[0] && t[type].unpack ? &t[type] : NULL;
}

int cpu_qgemm_ok(uint32_t type) { return cpu_kernels_qgemm() != NULL && qg_get(type) != NULL; }

size_t cpu_qgemm_act_bytes(int64_t n, int64_t K) { return (size_t)n * (size_t)(K / 32) * CPU_QGEMM_ACT; }

int cpu_qgemm_act_kind(uint32_t type) {
    return type == WGML_Q2_K || type == WGML_Q3_K || type == WGML_Q4_K || type == WGML_Q5_K || type == WGML_Q6_K;
}

typedef struct {
    const float *x;
    int64_t K;
    int kind;
    uint8_t *act;
    cpu_qgemm_prep_fn simd; /* the instruction set's encoder, or NULL */
} prep_task;

/* A chunk's int8 values and scale into its place, with the sums of q. */
static void put_chunk(uint8_t *a, const int8_t *q, float d) {
    int32_t s[3] = {0, 0, 0};
    for (int k = 0; k < 32; k++) s[k / 16] += q[k];
    s[2] = s[0] + s[1];
    const float m[3] = {-d * (float)s[0], -d * (float)s[1], -d * (float)s[2]};
    memcpy(a, q, 32);
    memcpy(a + 32, &d, 4);
    memcpy(a + 36, m, sizeof m);
    memcpy(a + 48, s, sizeof s);
    memset(a + 60, 0, CPU_QGEMM_ACT - 60);
}

void cpu_qgemm_prepare_row_ref(const float *x, int64_t K, int kind, uint8_t *a) {
    if (kind) {
        for (int64_t b = 0; b < K / QK_K; b++) {
            uint8_t blk[sizeof(block_q8_K)];
            wgml_quantize_row(WGML_Q8_K, x + QK_K * b, blk, QK_K);
            const float d = quant_rd_f32(blk + offsetof(block_q8_K, d));
            for (int c = 0; c < QK_K / 32; c++)
                put_chunk(a + (size_t)(8 * b + c) * CPU_QGEMM_ACT, (const int8_t *)(blk + offsetof(block_q8_K, qs)) + 32 * c,
                          d);
        }
        return;
    }
    for (int64_t c = 0; c < K / 32; c++) {
        uint8_t blk[sizeof(block_q8_0)];
        wgml_quantize_row(WGML_Q8_0, x + 32 * c, blk, 32);
        put_chunk(a + (size_t)c * CPU_QGEMM_ACT, (const int8_t *)(blk + offsetof(block_q8_0, qs)),
                  quant_rd_f16(blk + offsetof(block_q8_0, d)));
    }
}

/* Rows [lo, hi): by the instruction set's encoder, else the library's own. */
static void prep_rows(void *p, int64_t lo, int64_t hi, int ith) {
    (void)ith;
    const prep_task *t = p;
    const size_t row = (size_t)(t->K / 32) * CPU_QGEMM_ACT;
    for (int64_t i = lo; i < hi; i++) {
        const float *x = t->x + (size_t)i * (size_t)t->K;
        uint8_t *a = t->act + (size_t)i * row;
        if (t->simd)
            t->simd(x, t->K, t->kind, a);
        else
            cpu_qgemm_prepare_row_ref(x, t->K, t->kind, a);
    }
}

void cpu_qgemm_prepare(wgml_threadpool *pool, const float *x, int64_t n, int64_t K, int kind, uint8_t *act) {
    prep_task t = {x, K, kind, act, cpu_kernels_qgemm() ? cpu_kernels_qgemm_prep_isa(cpu_kernels_isa()) : NULL};
    wgml_threadpool_run_range(pool, prep_rows, &t, n, 1);
}

/* Unpacked panels a work item holds (at least one). */
static int64_t group_panels(int64_t K, int sub) {
    const size_t panel = (size_t)(K / 32) * cpu_qgemm_chunk_bytes(sub);
    const int64_t g = (int64_t)(GROUP_BYTES / panel);
    return g > 0 ? g : 1;
}

/* Per thread: the group's panels, 16 rows' scales (s1, s2) and codes, alignment. */
static size_t thread_bytes(int64_t K, int sub) {
    return (size_t)group_panels(K, sub) * (size_t)(K / 32) * cpu_qgemm_chunk_bytes(sub) +
           2 * (size_t)K * sizeof(float) + 16 * (size_t)K + 128;
}

size_t cpu_qgemm_scratch(int64_t K, int n_threads) {
    const size_t a = thread_bytes(K, 16), b = thread_bytes(K, 32);
    return (size_t)n_threads * (a > b ? a : b) + 64;
}

typedef struct {
    const cpu_gemm_args *a;
    const qg_type *qt;
    const uint8_t *act;
    cpu_qgemm_fn fn;
    cpu_qgemm_pack_fn pack;
    unpack_fn unpack; /* the type's, or CPU_W_Q4_0_X8's for Q4_0 rows regrouped so (kernels.h) */
    cpu_qgemm_direct_fn direct; /* whole panels straight from the rows (layout), else NULL */
    int layout;
    uint8_t *scratch;
    size_t per_thread;
    int64_t panels, per_group, groups, rows_per_block;
} qg_task;

/* Panel pn (weight rows 16 pn ..) into the micro-kernel's layout at dst, through
 * u (16 rows of codes) and s1, s2 (their scales side by side). */
static void pack_panel(const qg_task *t, int64_t pn, uint8_t *dst, uint8_t *u, float *s1, float *s2) {
    const cpu_gemm_args *a = t->a;
    const int64_t K = a->K;
    if (t->direct && (pn + 1) * CPU_QGEMM_NC <= a->M) {
        t->direct(t->layout, a->w + (size_t)(pn * CPU_QGEMM_NC) * a->w_row, a->w_row, K, dst);
        return;
    }
    for (int j = 0; j < CPU_QGEMM_NC; j++) {
        const int64_t m = pn * CPU_QGEMM_NC + j;
        if (m < a->M) {
            t->unpack(a->w + (size_t)m * a->w_row, K, u + (size_t)j * (size_t)K, s1 + j, s2 + j);
        } else {
            memset(u + (size_t)j * (size_t)K, 0, (size_t)K);
            for (int64_t b = 0; b < K / 16; b++) s1[16 * b + j] = s2[16 * b + j] = 0.0f;
        }
    }
    t->pack(u, K, s1, s2, t->qt->sub, dst);
}

int cpu_qgemm_pack_ref(uint32_t type, int x8, const uint8_t *w, size_t w_row, int64_t K, uint8_t *dst) {
    const qg_type *qt = qg_get(type);
    uint8_t *u = malloc(16 * (size_t)K);
    float *s1 = malloc(sizeof(float) * (size_t)K), *s2 = malloc(sizeof(float) * (size_t)K);
    if (!qt || !u || !s1 || !s2) {
        free(u), free(s1), free(s2);
        return -1;
    }
    for (int j = 0; j < CPU_QGEMM_NC; j++)
        (x8 ? unpack_q4_0_x8 : qt->unpack)(w + (size_t)j * w_row, K, u + (size_t)j * (size_t)K, s1 + j, s2 + j);
    cpu_kernels_qgemm_pack_isa("scalar")(u, K, s1, s2, qt->sub, dst);
    free(u), free(s1), free(s2);
    return 0;
}

/* Items [lo, hi): item = token block * groups + panel group. */
static void qg_items(void *p, int64_t lo, int64_t hi, int ith) {
    const qg_task *t = p;
    const cpu_gemm_args *a = t->a;
    const int64_t K = a->K, M = a->M, nch = K / 32;
    const int sub = t->qt->sub;
    const size_t panel_bytes = (size_t)nch * cpu_qgemm_chunk_bytes(sub), act_row = (size_t)nch * CPU_QGEMM_ACT;
    uint8_t *base = (uint8_t *)(((uintptr_t)(t->scratch + (size_t)ith * t->per_thread) + 63) & ~(uintptr_t)63);
    uint8_t *panels = base;
    float *s1 = (float *)(panels + (size_t)t->per_group * panel_bytes), *s2 = s1 + K;
    uint8_t *u = (uint8_t *)(s2 + K);
    for (int64_t it = lo; it < hi; it++) {
        const int64_t tb = it / t->groups, g = it % t->groups;
        const int64_t p0 = g * t->per_group, p1 = p0 + t->per_group < t->panels ? p0 + t->per_group : t->panels;
        const int64_t i0 = tb * t->rows_per_block, i1 = i0 + t->rows_per_block < a->n ? i0 + t->rows_per_block : a->n;
        for (int64_t pn = p0; pn < p1; pn++)
            pack_panel(t, pn, panels + (size_t)(pn - p0) * panel_bytes, u, s1, s2);
        for (int64_t i = i0; i < i1; i += CPU_QGEMM_NT) {
            const int nt = (int)(i1 - i < CPU_QGEMM_NT ? i1 - i : CPU_QGEMM_NT);
            for (int64_t pn = p0; pn < p1; pn++) {
                const int64_t m0 = pn * CPU_QGEMM_NC;
                const int nc = (int)(M - m0 < CPU_QGEMM_NC ? M - m0 : CPU_QGEMM_NC);
                t->fn(nch, sub, t->qt->zp, t->act + (size_t)i * act_row, act_row, panels + (size_t)(pn - p0) * panel_bytes,
                      a->out + (size_t)i * (size_t)M + m0, (size_t)M, nt, nc, a->add, a->bias ? a->bias + m0 : NULL);
            }
        }
    }
}

void cpu_qgemm(wgml_threadpool *pool, int n_threads, const cpu_gemm_args *a, const uint8_t *act, void *scratch) {
    qg_task t = {.a = a, .qt = qg_get(a->type), .act = act, .fn = cpu_kernels_qgemm()};
    t.pack = cpu_kernels_qgemm_pack_isa(cpu_kernels_isa());
    const int x8 = a->type == WGML_Q4_0 && a->k && a->k->repack == cpu_w_q4_0_x8_repack;
    t.unpack = x8 ? unpack_q4_0_x8 : t.qt->unpack;
    t.layout = a->type == WGML_Q4_0   ? (x8 ? CPU_QGEMM_DIRECT_Q4_0_X8 : CPU_QGEMM_DIRECT_Q4_0)
               : a->type == WGML_Q8_0 ? CPU_QGEMM_DIRECT_Q8_0
               : a->type == WGML_Q4_K ? CPU_QGEMM_DIRECT_Q4_K
               : a->type == WGML_Q6_K ? CPU_QGEMM_DIRECT_Q6_K
                                      : -1;
    if (t.layout >= 0) t.direct = cpu_kernels_qgemm_direct_isa(cpu_kernels_isa());
    t.scratch = (uint8_t *)scratch;
    t.per_thread = thread_bytes(a->K, t.qt->sub);
    t.panels = (a->M + CPU_QGEMM_NC - 1) / CPU_QGEMM_NC;
    t.per_group = group_panels(a->K, t.qt->sub);
    if (t.per_group > t.panels) t.per_group = t.panels;
    t.groups = (t.panels + t.per_group - 1) / t.per_group;
    /* a few items per thread: smaller groups first, then blocks of token rows */
    while (t.groups < 4 * (int64_t)n_threads && t.per_group > 1) {
        t.per_group = (t.per_group + 1) / 2;
        t.groups = (t.panels + t.per_group - 1) / t.per_group;
    }
    int64_t blocks = 1;
    while (t.groups * blocks < 4 * (int64_t)n_threads && a->n / (blocks + 1) >= 2 * CPU_QGEMM_NT) blocks++;
    t.rows_per_block = (a->n + blocks - 1) / blocks;
    t.rows_per_block = (t.rows_per_block + CPU_QGEMM_NT - 1) / CPU_QGEMM_NT * CPU_QGEMM_NT;
    blocks = (a->n + t.rows_per_block - 1) / t.rows_per_block;
    wgml_threadpool_run_range(pool, qg_items, &t, blocks * t.groups, 1);
}
