/*
 * test_cpu_kernels.c - the CPU dot-product kernels (backend/cpu/kernels.h).
 *
 * Every weight type, every instruction set this CPU has (and the forced
 * scalar path), ragged and large lengths: `dot` against a double-precision
 * sum over the dequantized weights times the dequantized prepared
 * activations; `prepare` decodes back close to x, to the same values on
 * every instruction set (whatever layout it writes them in); `to_float`
 * equals wgml_dequantize_row; unaligned rows give the same result as
 * aligned ones; `dot_rows` over 1..8 activation rows gives each row the
 * bits `dot` gives it.
 *
 * WGML_KERNEL_BENCH=1 also prints the single-thread throughput of `dot` per
 * type and instruction set, in GB/s of weights, over a 64 MB weight matrix
 * (so the weights stream from DRAM as in decoding).
 */
#define _POSIX_C_SOURCE 200809L
#include "backend/cpu/cpu_qgemm.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/kernels_impl.h"
#include "core/dtype.h"
#include "core/fp16.h"
#include "core/quant.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const uint32_t k_weights[] = {WGML_F32,  WGML_F16,  WGML_BF16, WGML_Q4_0, WGML_Q4_1, WGML_Q5_0, WGML_Q5_1,
                                     WGML_Q8_0, WGML_Q2_K, WGML_Q3_K, WGML_Q4_K, WGML_Q5_K, WGML_Q6_K};
#define N_WEIGHTS (sizeof k_weights / sizeof k_weights[0])
static const char *const k_isas[] = {"scalar", "avx2", "avx512"};

static int block_of(uint32_t t) { return wgml_dtype_get(t)->block_size; }

/* The activation format of weight type t's kernels on instruction set isa. */
static uint32_t expected_act(const char *isa, uint32_t t) {
    if (t == WGML_Q4_0 && !strcmp(isa, "avx512")) return CPU_ACT_Q8_0_G8;
    if ((t == WGML_Q4_K || t == WGML_Q5_K) && !strcmp(isa, "avx512")) return CPU_ACT_Q8_K_R;
    if (t == WGML_Q8_0 && !strcmp(isa, "avx512")) return CPU_ACT_Q8_0_Z128;
    switch (t) {
    case WGML_Q4_0:
    case WGML_Q5_0:
    case WGML_Q8_0: return WGML_Q8_0;
    case WGML_Q4_1:
    case WGML_Q5_1: return WGML_Q8_1;
    case WGML_Q2_K:
    case WGML_Q3_K:
    case WGML_Q4_K:
    case WGML_Q5_K:
    case WGML_Q6_K: return WGML_Q8_K;
    default: return WGML_F32;
    }
}

/* ---- the table ---- */

static void test_table(void **state) {
    (void)state;
    const char *isa = cpu_kernels_isa();
    assert_true(!strcmp(isa, "scalar") || !strcmp(isa, "avx2") || !strcmp(isa, "avx512"));
    print_message("best instruction set here: %s\n", isa);
    for (size_t i = 0; i < N_WEIGHTS; i++) {
        const cpu_type_kernels *k = cpu_kernels_get(k_weights[i]);
        assert_non_null(k);
        assert_non_null(k->prepare);
        assert_non_null(k->dot);
        assert_non_null(k->to_float);
        assert_int_equal(k->act_type, expected_act(isa, k_weights[i]));
        assert_ptr_equal(cpu_kernels_get_isa(isa, k_weights[i]), k);
        /* weights in a layout of their own: Q4_0 on AVX-512 */
        const int packs = k_weights[i] == WGML_Q4_0 && !strcmp(isa, "avx512");
        assert_int_equal(k->packed != NULL, packs);
        assert_null(k->repack);
        if (packs) {
            assert_ptr_equal(k->packed->repack, cpu_w_q4_0_x8_repack);
            assert_non_null(k->packed->dot);
            assert_non_null(k->packed->to_float);
            assert_null(k->packed->packed);
        }
    }
    const uint32_t none[] = {WGML_Q8_1, WGML_Q8_K, WGML_I8, WGML_I32, 4, 16, 39, 40, 12345};
    for (size_t i = 0; i < sizeof none / sizeof none[0]; i++)
        assert_null(cpu_kernels_get(none[i]));
    assert_null(cpu_kernels_get_isa("neon", WGML_F32));

    cpu_kernels_force_scalar(1);
    assert_string_equal(cpu_kernels_isa(), "scalar");
    for (size_t i = 0; i < N_WEIGHTS; i++)
        assert_ptr_equal(cpu_kernels_get(k_weights[i]), cpu_kernels_get_isa("scalar", k_weights[i]));
    cpu_kernels_force_scalar(0);
    assert_string_equal(cpu_kernels_isa(), isa);
}

/* ---- test data ---- */

/* A random finite fp16 with |v| in [2^-12, 2^-1), either sign. */
static uint16_t sane_f16(tu_rng *r) {
    const float v = ldexpf(1.0f + tu_uniform(r), -12 + (int)(tu_next(r) % 11));
    return wgml_f32_to_f16(tu_next(r) & 1 ? -v : v);
}

/* Byte offsets of the fp16 scale fields in a block (-1 ends the list). */
static const int *scale_fields(uint32_t t) {
    static const int d0[] = {0, -1}, d0m2[] = {0, 2, -1}, q2k[] = {80, 82, -1}, q3k[] = {108, -1}, q6k[] = {208, -1};
    switch (t) {
    case WGML_Q4_1:
    case WGML_Q5_1:
    case WGML_Q4_K:
    case WGML_Q5_K: return d0m2;
    case WGML_Q2_K: return q2k;
    case WGML_Q3_K: return q3k;
    case WGML_Q6_K: return q6k;
    default: return d0;
    }
}

/* n weights of type t: quantized normal data (mode 0) or, for quantized types,
 * random bytes (mode 1: every bit pattern of the quants) or all-ones bytes
 * (mode 2: the largest quants, for the sums' integer range), with sane scales. */
static void make_weights(uint32_t t, int mode, int64_t n, uint8_t *dst, tu_rng *rng) {
    const size_t size = wgml_row_size(t, n);
    if (mode == 0) {
        float *f = malloc(n * sizeof(float));
        const float scale = 0.02f * (1.0f + 4.0f * tu_uniform(rng));
        for (int64_t i = 0; i < n; i++)
            f[i] = scale * tu_normal(rng) + (i % 64 == 5 ? 0.1f : 0.0f);
        assert_int_equal(wgml_quantize_row(t, f, dst, n), size);
        free(f);
        return;
    }
    for (size_t i = 0; i < size; i++)
        dst[i] = mode == 2 ? 0xff : (uint8_t)tu_next(rng);
    const size_t bsize = (size_t)wgml_dtype_get(t)->type_size;
    for (size_t b = 0; b < size / bsize; b++)
        for (const int *off = scale_fields(t); *off >= 0; off++) {
            const uint16_t h = sane_f16(rng);
            memcpy(dst + b * bsize + *off, &h, 2);
        }
}

static void make_x(int64_t n, float *x, tu_rng *rng) {
    for (int64_t i = 0; i < n; i++)
        x[i] = tu_normal(rng) * (i % 37 == 0 ? 6.0f : 1.0f);
}

/*
 * The exact value dot should approximate, in double, and the magnitude its
 * float rounding scales with. For the Q8_1 pairing the kernels use the
 * block's stored s (fp16 of d * sum(q)) for the weight-min term, as the
 * format intends, so the reference does too.
 */
static double reference_dot(uint32_t t, const cpu_type_kernels *k, int64_t n, const uint8_t *w, const void *xp,
                            double *mag) {
    float *wd = malloc(n * sizeof(float)), *xd = malloc(n * sizeof(float));
    assert_int_equal(wgml_dequantize_row(t, w, wd, n), 0);
    assert_int_equal(cpu_act_to_float(k->act_type, xp, xd, n), 0);
    double sum = 0, m = 0;
    for (int64_t i = 0; i < n; i++) {
        sum += (double)wd[i] * xd[i];
        m += fabs((double)wd[i] * xd[i]);
    }
    if (k->act_type == WGML_Q8_1) {
        const size_t wsz = (size_t)wgml_dtype_get(t)->type_size;
        for (int64_t b = 0; b < n / 32; b++) {
            uint16_t m16;
            memcpy(&m16, w + b * wsz + 2, 2);
            const float mw = wgml_f16_to_f32(m16);
            const block_q8_1 *xb = (const block_q8_1 *)xp + b;
            double xs = 0;
            for (int i = 0; i < 32; i++)
                xs += xd[32 * b + i];
            sum += mw * (wgml_f16_to_f32(xb->s) - xs);
            m += fabs(mw * wgml_f16_to_f32(xb->s));
        }
    }
    /* the min / zero-point terms cancel against the rest: count them in the magnitude */
    double amax_w = 0;
    for (int64_t i = 0; i < n; i++)
        amax_w = fmax(amax_w, fabs(wd[i]));
    for (int64_t i = 0; i < n; i++)
        m += amax_w * fabs(xd[i]) * (block_of(t) > 1 ? 1 : 0);
    *mag = m;
    free(wd);
    free(xd);
    return sum;
}

static int64_t lengths_for(uint32_t t, const int64_t **out) {
    static const int64_t f[] = {1, 3, 7, 8, 15, 16, 17, 31, 33, 63, 64, 65, 100, 255, 1000, 4097};
    static const int64_t b32[] = {32, 64, 96, 224, 256, 288, 480, 1024, 4064, 4096};
    static const int64_t bk[] = {256, 512, 768, 2304, 4096, 8192};
    const int bs = block_of(t);
    *out = bs == 1 ? f : bs == 32 ? b32 : bk;
    return bs == 1    ? (int64_t)(sizeof f / sizeof f[0])
           : bs == 32 ? (int64_t)(sizeof b32 / sizeof b32[0])
                      : (int64_t)(sizeof bk / sizeof bk[0]);
}

/* ---- dot ---- */

/* k->dot of weights w_k (in k's layout; GGUF's, w, for the reference) with
 * x, against the reference, and the same from a copy one byte (or more) off
 * alignment (wu_k, and the activations copied into xpu). */
static void check_dot(uint32_t t, const cpu_type_kernels *k, const char *isa, int64_t n, int mode, const uint8_t *w,
                      const uint8_t *w_k, const uint8_t *wu_k, const float *x, uint8_t *xp, uint8_t *xpu) {
    k->prepare(x, xp, n);
    const size_t xsize = cpu_act_row_size(k->act_type, n);
    const size_t xshift = k->act_type == WGML_F32 ? 0 : 1; /* f32 rows are our own, aligned */
    memcpy(xpu + xshift, xp, xsize);
    double mag;
    const double ref = reference_dot(t, k, n, w, xp, &mag);
    const float got = k->dot(n, w_k, xp);
    /* float rounding of per-block products and their sum; a wrong block
     * or sub-block scale moves the result by ~1/nblocks of mag */
    const double tol = 1e-5 * mag + 1e-30;
    const char *layout = k->repack ? " (own layout)" : "";
    if (!(fabs(got - ref) <= tol))
        fail_msg("%s/%s%s n=%lld mode %d: dot %.9g, reference %.9g (|diff| %.3g > tol %.3g)", wgml_dtype_name(t), isa,
                 layout, (long long)n, mode, got, ref, fabs(got - ref), tol);
    const float got_u = k->dot(n, wu_k, xpu + xshift);
    if (memcmp(&got, &got_u, sizeof got))
        fail_msg("%s/%s%s n=%lld: unaligned rows give %.9g, aligned %.9g", wgml_dtype_name(t), isa, layout,
                 (long long)n, got_u, got);
}

static void test_dot(void **state) {
    (void)state;
    tu_rng rng = {0xd07};
    const int64_t nmax = 8192;
    uint8_t *w = malloc(wgml_row_size(WGML_F32, nmax) + 64);
    uint8_t *wu = malloc(wgml_row_size(WGML_F32, nmax) + 64);
    uint8_t *wp = malloc(wgml_row_size(WGML_F32, nmax) + 64);
    uint8_t *xp = malloc(wgml_row_size(WGML_F32, nmax) + 64);
    uint8_t *xpu = malloc(wgml_row_size(WGML_F32, nmax) + 64);
    float *x = malloc(nmax * sizeof(float));
    int checked = 0;
    for (size_t ti = 0; ti < N_WEIGHTS; ti++) {
        const uint32_t t = k_weights[ti];
        const int64_t *lens;
        const int64_t nlen = lengths_for(t, &lens);
        for (int64_t li = 0; li < nlen; li++) {
            const int64_t n = lens[li];
            for (int mode = 0; mode < (block_of(t) > 1 ? 3 : 1); mode++) {
                make_weights(t, mode, n, w, &rng);
                make_x(n, x, &rng);
                if (mode == 2) /* all equal: every activation quant at -127 */
                    for (int64_t i = 0; i < n; i++) x[i] = 1.0f;
                /* the same weights one byte (two for F16/BF16, four for F32) off alignment */
                const size_t shift = t == WGML_F32 ? 4 : block_of(t) == 1 ? 2 : 1;
                memcpy(wu + shift, w, wgml_row_size(t, n));
                for (size_t ii = 0; ii < sizeof k_isas / sizeof k_isas[0]; ii++) {
                    const cpu_type_kernels *k = cpu_kernels_get_isa(k_isas[ii], t);
                    if (!k) continue;
                    check_dot(t, k, k_isas[ii], n, mode, w, w, wu + shift, x, xp, xpu);
                    checked++;
                    if (!k->packed) continue;
                    /* the weights in the kernels' own layout (the backend repacks them at load) */
                    k->packed->repack(w, wp, n);
                    memcpy(wu + shift, wp, wgml_row_size(t, n));
                    check_dot(t, k->packed, k_isas[ii], n, mode, w, wp, wu + shift, x, xp, xpu);
                    checked++;
                }
            }
        }
    }
    print_message("%d dot products checked\n", checked);
    free(w);
    free(wu);
    free(wp);
    free(xp);
    free(xpu);
    free(x);
}

/* ---- dot_rows ---- */

/* Row t of a dot_rows call's activations: prepared from its own x, `stride`
 * bytes apart (more than a row, and not a multiple of 4 for the quantized
 * formats, so that no row is aligned as the first one is). */
#define ROWS_MAX 8

/* k->dot_rows of one weight row with nr prepared rows equals k->dot of each
 * row, bit for bit, for every nr <= ROWS_MAX; so does a call that starts at
 * any of the rows (a row's result does not depend on where in a pass it is). */
static void check_dot_rows(uint32_t t, const cpu_type_kernels *k, const char *isa, int64_t n, const uint8_t *w,
                           const uint8_t *xp, size_t stride) {
    float single[ROWS_MAX], got[ROWS_MAX + 1];
    for (int r = 0; r < ROWS_MAX; r++) single[r] = k->dot(n, w, xp + r * stride);
    for (int nr = 1; nr <= ROWS_MAX; nr++)
        for (int first = 0; first + nr <= ROWS_MAX; first += nr > 2 ? ROWS_MAX : 1) {
            got[nr] = 12345.0f; /* past the last row: never written */
            k->dot_rows(n, w, xp + first * stride, stride, nr, got);
            for (int r = 0; r < nr; r++)
                if (memcmp(&got[r], &single[first + r], sizeof(float)))
                    fail_msg("%s/%s%s n=%lld: dot_rows of %d rows from row %d gives row %d %.9g, dot %.9g",
                             wgml_dtype_name(t), isa, k->repack ? " (own layout)" : "", (long long)n, nr, first, r,
                             got[r], single[first + r]);
            assert_true(got[nr] == 12345.0f);
        }
}

static void test_dot_rows(void **state) {
    (void)state;
    tu_rng rng = {0x5eed};
    const int64_t nmax = 8192;
    uint8_t *w = malloc(wgml_row_size(WGML_F32, nmax));
    uint8_t *wp = malloc(wgml_row_size(WGML_F32, nmax));
    const size_t stride_max = wgml_row_size(WGML_F32, nmax) + 68;
    uint8_t *xp = malloc(stride_max * ROWS_MAX);
    float *x = malloc(nmax * sizeof(float));
    int checked = 0;
    for (size_t ti = 0; ti < N_WEIGHTS; ti++) {
        const uint32_t t = k_weights[ti];
        const int64_t *lens;
        const int64_t nlen = lengths_for(t, &lens);
        for (int64_t li = 0; li < nlen; li++) {
            const int64_t n = lens[li];
            for (int mode = 0; mode < (block_of(t) > 1 ? 3 : 1); mode++) {
                make_weights(t, mode, n, w, &rng);
                for (size_t ii = 0; ii < sizeof k_isas / sizeof k_isas[0]; ii++) {
                    const cpu_type_kernels *k = cpu_kernels_get_isa(k_isas[ii], t);
                    if (!k) continue;
                    /* every SIMD table has it, for every type and its own layouts */
                    if (strcmp(k_isas[ii], "scalar") != 0) assert_non_null(k->dot_rows);
                    if (k->packed) assert_non_null(k->packed->dot_rows);
                    if (!k->dot_rows) continue;
                    const size_t row = cpu_act_row_size(k->act_type, n);
                    const size_t stride = row + (k->act_type == WGML_F32 ? 4 : 3) + 64 * (size_t)(li % 2);
                    for (int r = 0; r < ROWS_MAX; r++) {
                        make_x(n, x, &rng);
                        if (mode == 2 && r % 2) /* all equal: every activation quant at -127 */
                            for (int64_t i = 0; i < n; i++) x[i] = 1.0f;
                        if (r == 3) /* a row of zeros: zero scales */
                            memset(x, 0, n * sizeof(float));
                        k->prepare(x, xp + r * stride, n);
                    }
                    check_dot_rows(t, k, k_isas[ii], n, w, xp, stride);
                    checked++;
                    if (!k->packed) continue;
                    k->packed->repack(w, wp, n);
                    check_dot_rows(t, k->packed, k_isas[ii], n, wp, xp, stride);
                    checked++;
                }
            }
        }
    }
    print_message("%d weight rows checked against 1..%d activation rows\n", checked, ROWS_MAX);
    free(w);
    free(wp);
    free(xp);
    free(x);
}

/* ---- prepare ---- */

static void test_prepare(void **state) {
    (void)state;
    tu_rng rng = {31337};
    const int64_t n = 4096;
    float *x = malloc(n * sizeof(float)), *back = malloc(n * sizeof(float));
    uint8_t *p = malloc(n * sizeof(float)), *p2 = malloc(n * sizeof(float));
    make_x(n, x, &rng);
    for (size_t ti = 0; ti < N_WEIGHTS; ti++) {
        const uint32_t t = k_weights[ti];
        const cpu_type_kernels *ks = cpu_kernels_get_isa("scalar", t);
        ks->prepare(x, p, n);
        assert_int_equal(wgml_dequantize_row(ks->act_type, p, back, n), 0);
        const int bs = block_of(ks->act_type);
        for (int64_t b0 = 0; b0 < n; b0 += bs) {
            float amax = 0;
            for (int i = 0; i < bs; i++)
                amax = fmaxf(amax, fabsf(x[b0 + i]));
            /* F32: a copy. Q8_0/Q8_1: d = amax / 127 stored as fp16, so |err| <= d (1/2 + 127 * 2^-11).
             * Q8_K: d is f32, |err| <= d/2 up to float rounding. */
            const double d = amax / 127.0;
            const double bound = ks->act_type == WGML_F32 ? 0 : ks->act_type == WGML_Q8_K ? d * 0.50001 : d * 0.563;
            for (int i = 0; i < bs; i++)
                if (fabs((double)back[b0 + i] - x[b0 + i]) > bound + 1e-12)
                    fail_msg("%s prepare: element %lld %g -> %g", wgml_dtype_name(t), (long long)(b0 + i), x[b0 + i],
                             back[b0 + i]);
        }
        /* every instruction set prepares the same values; in the same layout, the same bytes */
        for (size_t ii = 1; ii < sizeof k_isas / sizeof k_isas[0]; ii++) {
            const cpu_type_kernels *k = cpu_kernels_get_isa(k_isas[ii], t);
            if (!k) continue;
            assert_int_equal(k->act_type, expected_act(k_isas[ii], t));
            k->prepare(x, p2, n);
            if (k->act_type == ks->act_type) {
                assert_memory_equal(p, p2, wgml_row_size(k->act_type, n));
                continue;
            }
            const int64_t step = block_of(ks->act_type); /* ragged groups and tails where blocks are 32 */
            for (int64_t len = step; len <= n; len += step == 256 ? 768 : len < 1024 ? 224 : 1504) {
                float *back2 = malloc(len * sizeof(float));
                ks->prepare(x, p, len);
                assert_int_equal(wgml_dequantize_row(ks->act_type, p, back, len), 0);
                k->prepare(x, p2, len);
                assert_int_equal(cpu_act_to_float(k->act_type, p2, back2, len), 0);
                assert_memory_equal(back, back2, len * sizeof(float));
                free(back2);
            }
        }
    }
    free(x);
    free(back);
    free(p);
    free(p2);
}

/* Inputs where a SIMD quantizer most easily parts from the scalar one: exact
 * halves (d = 1, so x / d lands on .5: ties round away from zero in Q8_0,
 * to even in Q8_K), an all-zero block, NaN and infinity, subnormal and huge
 * magnitudes, the extreme at the start, the end or twice with both signs. */
static void make_edge_x(int64_t n, float *x, tu_rng *rng) {
    make_x(n, x, rng);
    for (int64_t i = 0; i < 256; i++) x[i] = (float)(i % 255) - 127.0f + (i ? 0.5f : 0.0f); /* -127, then ties */
    for (int64_t i = 256; i < 512; i++) x[i] = 0.0f;
    x[512 + 5] = NAN;
    x[768 + 40] = INFINITY;
    for (int64_t i = 1024; i < 1280; i++) x[i] *= 1e-41f;
    for (int64_t i = 1280; i < 1536; i++) x[i] *= 1e30f;
    x[1536 + 255] = 50.0f;
    x[1792 + 3] = -40.0f;
    x[1792 + 200] = 40.0f;
}

/* Equal prepared rows: the same bytes in the same layout, else the same values. */
static void assert_same_act(uint32_t act_a, const void *a, uint32_t act_b, const void *b, int64_t n) {
    if (act_a == act_b) {
        assert_memory_equal(a, b, cpu_act_row_size(act_a, n));
        return;
    }
    float *fa = malloc(n * sizeof(float)), *fb = malloc(n * sizeof(float));
    assert_int_equal(cpu_act_to_float(act_a, a, fa, n), 0);
    assert_int_equal(cpu_act_to_float(act_b, b, fb, n), 0);
    assert_memory_equal(fa, fb, n * sizeof(float));
    free(fa);
    free(fb);
}

static void test_prepare_edges(void **state) {
    (void)state;
    tu_rng rng = {4242};
    const int64_t n = 2048 + 96; /* 8 full groups of 256 and a ragged tail */
    float *x = malloc(n * sizeof(float));
    uint8_t *ref = malloc(n * sizeof(float)), *p = malloc(n * sizeof(float)), *pieces = malloc(n * sizeof(float));
    make_edge_x(n, x, &rng);
    for (size_t ti = 0; ti < N_WEIGHTS; ti++) {
        const uint32_t t = k_weights[ti];
        if (wgml_dtype_get(t)->block_size == 1) continue; /* float weights: a copy */
        const int64_t len = wgml_dtype_get(t)->block_size == 256 ? 2048 : n;
        const cpu_type_kernels *ks = cpu_kernels_get_isa("scalar", t);
        ks->prepare(x, ref, len);
        for (size_t ii = 0; ii < sizeof k_isas / sizeof k_isas[0]; ii++) {
            const cpu_type_kernels *k = cpu_kernels_get_isa(k_isas[ii], t);
            if (!k) continue;
            k->prepare(x, p, len);
            assert_same_act(ks->act_type, ref, k->act_type, p, len);
            /* piecewise (kernels.h, CPU_ACT_PIECE): as matmul splits a token's row across threads */
            memset(pieces, 0xa5, n * sizeof(float));
            for (int64_t a = 0; a < len; a += CPU_ACT_PIECE) {
                const int64_t m = len - a < CPU_ACT_PIECE ? len - a : CPU_ACT_PIECE;
                k->prepare(x + a, pieces + cpu_act_row_size(k->act_type, a), m);
            }
            assert_memory_equal(p, pieces, cpu_act_row_size(k->act_type, len));
        }
    }
    free(x);
    free(ref);
    free(p);
    free(pieces);
}

/* ---- to_float ---- */

/* The private layouts' redundant fields (kernels.h) are checked on the way back
 * to floats: a row with one of them changed is refused. */
static void test_act_layout_checks(void **state) {
    (void)state;
    tu_rng rng = {777};
    const int64_t n = 512;
    float *x = malloc(n * sizeof(float)), *back = malloc(n * sizeof(float));
    uint8_t *p = malloc(n * sizeof(float));
    make_x(n, x, &rng);
    const struct {
        uint32_t weights, act;
        size_t offsets[4]; /* bytes of the first block or group that only repeat what the rest says */
    } cases[] = {
        {WGML_Q4_0, CPU_ACT_Q8_0_G8, {16, 20, 16 + 192, 16 + 48}},
        {WGML_Q8_0, CPU_ACT_Q8_0_Z128, {16, 20, 16 + 32, 144 + 60}},
        {WGML_Q4_K, CPU_ACT_Q8_K_R, {256, 272, 292, 300}},
        {WGML_Q5_K, CPU_ACT_Q8_K_R, {270, 286, 295, 319}},
    };
    int checked = 0;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const cpu_type_kernels *k = cpu_kernels_get_isa("avx512", cases[c].weights);
        if (!k) continue; /* not an AVX-512 machine */
        assert_int_equal(k->act_type, cases[c].act);
        k->prepare(x, p, n);
        assert_int_equal(cpu_act_to_float(k->act_type, p, back, n), 0);
        for (int i = 0; i < 4; i++) {
            p[cases[c].offsets[i]] ^= 0x10;
            assert_int_equal(cpu_act_to_float(k->act_type, p, back, n), -1);
            p[cases[c].offsets[i]] ^= 0x10;
            checked++;
        }
        assert_int_equal(cpu_act_to_float(k->act_type, p, back, n), 0);
    }
    assert_int_equal(cpu_act_row_size(CPU_ACT_Q8_0_Z128, 256 + 96), CPU_ACT_Q8_0_Z128_GROUP + 3 * sizeof(block_q8_0));
    assert_int_equal(cpu_act_row_size(CPU_ACT_Q8_K_R, 768), 3 * CPU_ACT_Q8_K_R_BLOCK);
    assert_int_equal(cpu_act_row_size(CPU_ACT_Q8_K_R, 300), 0);
    assert_int_equal(cpu_act_to_float(CPU_ACT_Q8_K_R, p, back, 300), -1);
    print_message("%d altered fields refused\n", checked);
    free(x);
    free(back);
    free(p);
}

static void test_to_float(void **state) {
    (void)state;
    tu_rng rng = {4242};
    const int64_t n = 4096 + 256;
    uint8_t *w = malloc(wgml_row_size(WGML_F32, n)), *wp = malloc(wgml_row_size(WGML_F32, n));
    float *a = malloc(n * sizeof(float)), *b = malloc(n * sizeof(float));
    for (size_t ti = 0; ti < N_WEIGHTS; ti++) {
        const uint32_t t = k_weights[ti];
        /* ragged for the float types; a tail past the last group of 8 blocks for the 32-element ones */
        const int64_t len = n - (block_of(t) == 1 ? 3 : block_of(t) == 32 ? 96 : 0);
        for (int mode = 0; mode < 2; mode++) {
            if (mode == 0) {
                make_weights(t, 0, len, w, &rng);
            } else { /* any bytes at all, NaN and infinity included */
                for (size_t i = 0; i < wgml_row_size(t, len); i++)
                    w[i] = (uint8_t)tu_next(&rng);
            }
            assert_int_equal(wgml_dequantize_row(t, w, a, len), 0);
            for (size_t ii = 0; ii < sizeof k_isas / sizeof k_isas[0]; ii++) {
                const cpu_type_kernels *k = cpu_kernels_get_isa(k_isas[ii], t);
                if (!k) continue;
                for (int packed = 0; packed < (k->packed ? 2 : 1); packed++) {
                    memset(b, 0xff, len * sizeof(float));
                    if (packed) { /* the kernels' own layout, back to the same floats */
                        k->packed->repack(w, wp, len);
                        k->packed->to_float(wp, b, len);
                    } else {
                        k->to_float(w, b, len);
                    }
                    for (int64_t i = 0; i < len; i++) {
                        /* F16C quiets signalling NaNs: any NaN matches any NaN */
                        if (isnan(a[i]) && isnan(b[i])) continue;
                        if (memcmp(&a[i], &b[i], sizeof(float)))
                            fail_msg("%s/%s%s to_float element %lld: %.9g vs %.9g", wgml_dtype_name(t), k_isas[ii],
                                     packed ? " (own layout)" : "", (long long)i, b[i], a[i]);
                    }
                }
            }
        }
    }
    free(w);
    free(wp);
    free(a);
    free(b);
}

/* ---- throughput (WGML_KERNEL_BENCH=1) ---- */

/* CPU time of this thread: on a shared machine, time slices given to other
 * processes do not count against the kernel. */
/* The GEMM micro-kernel of every instruction set: every tile height, ragged
 * column counts, k runs of 1 to past a block, with and without `add`,
 * against a double sum within f32 rounding of sum |x w|; nothing written
 * past the tile's rows and columns. */
static void test_gemm(void **state) {
    (void)state;
    enum { LDX = 613, LDC = 45 };
    tu_rng rng = {7};
    float *x = malloc(sizeof(float) * CPU_GEMM_MR * LDX), *c = malloc(sizeof(float) * (CPU_GEMM_MR + 1) * LDC);
    float *init = malloc(sizeof(float) * (CPU_GEMM_MR + 1) * LDC);
    float *wp = aligned_alloc(64, sizeof(float) * 608 * CPU_GEMM_NR);
    make_x(CPU_GEMM_MR * LDX, x, &rng);
    for (int i = 0; i < (CPU_GEMM_MR + 1) * LDC; i++) init[i] = tu_normal(&rng);
    const int64_t kcs[] = {1, 2, 7, 64, 129, 608};
    const int ncs[] = {1, 8, 15, 16, 17, 31, 32};
    for (size_t ii = 0; ii < sizeof k_isas / sizeof k_isas[0]; ii++) {
        cpu_gemm_fn fn = cpu_kernels_gemm_isa(k_isas[ii]);
        if (!fn) continue;
        for (size_t ki = 0; ki < sizeof kcs / sizeof kcs[0]; ki++)
            for (size_t ni = 0; ni < sizeof ncs / sizeof ncs[0]; ni++)
                for (int mr = 1; mr <= CPU_GEMM_MR; mr++)
                    for (int add = 0; add < 2; add++) {
                        const int64_t kc = kcs[ki];
                        const int nc = ncs[ni];
                        for (int64_t k = 0; k < kc; k++)
                            for (int j = 0; j < CPU_GEMM_NR; j++)
                                wp[k * CPU_GEMM_NR + j] = j < nc ? tu_normal(&rng) : 0;
                        memcpy(c, init, sizeof(float) * (CPU_GEMM_MR + 1) * LDC);
                        fn(kc, x, LDX, wp, c, LDC, mr, nc, add);
                        for (int r = 0; r <= CPU_GEMM_MR; r++)
                            for (int j = 0; j < LDC; j++) {
                                const float got = c[r * LDC + j], was = init[r * LDC + j];
                                if (r >= mr || j >= nc) {
                                    assert_true(got == was); /* outside the tile: untouched */
                                    continue;
                                }
                                double want = add ? was : 0, mag = add ? fabs(was) : 0;
                                for (int64_t k = 0; k < kc; k++) {
                                    want += (double)x[r * LDX + k] * wp[k * CPU_GEMM_NR + j];
                                    mag += fabs((double)x[r * LDX + k] * wp[k * CPU_GEMM_NR + j]);
                                }
                                if (fabs(got - want) > 2e-6 * mag + 1e-30)
                                    fail_msg("gemm %s kc=%lld nc=%d mr=%d add=%d [%d][%d]: %.9g, want %.9g",
                                             k_isas[ii], (long long)kc, nc, mr, add, r, j, got, want);
                            }
                    }
    }
    free(x), free(c), free(init), free(wp);
}

/* The int8 GEMM (kernels.h, cpu_qgemm_fn) of every instruction set that has
 * one: its panel packer writes the scalar packer's bytes, and the kernel
 * gives the double sum of its definition (integer sums exact, f32 for the
 * scales) on ragged tiles, both sub-block sizes, offsets as floats and as
 * steps taken off the integer sums, with bias and ADD; outputs
 * outside the tile are left alone. Activations -127..127 (the encoders'
 * range); codes 0..255, and for the AVX2 kernel (int16 pair sums) 0..63
 * except with zp 128 (Q8_0), as every type has them; the largest cases
 * (all codes 63 or 255 against +-127) are in each set, where vpmaddubsw
 * would saturate if the kernel got its bounds wrong. */
static void test_qgemm(void **state) {
    (void)state;
    enum { K = 160, NCH = K / 32, LDC = 21 };
    tu_rng rng = {17};
    uint8_t *u = malloc(16 * K), *act = malloc(CPU_QGEMM_NT * NCH * CPU_QGEMM_ACT);
    float *s1 = malloc(sizeof(float) * K), *s2 = malloc(sizeof(float) * K), bias[16];
    uint8_t *want_p = aligned_alloc(64, NCH * 768), *got_p = aligned_alloc(64, NCH * 768);
    float c[(CPU_QGEMM_NT + 1) * LDC], init[(CPU_QGEMM_NT + 1) * LDC];
    uint8_t *u_full = u, *u_small = malloc(16 * K);
    for (int i = 0; i < 16 * K; i++) {
        u_full[i] = (uint8_t)(tu_next(&rng) & 0xff);
        u_small[i] = (uint8_t)(u_full[i] & 63);
    }
    for (int i = 0; i < 32; i++) u_full[i] = 255, u_small[i] = 63; /* column 0, chunk 0: the extremes */
    for (int i = 0; i < K; i++) s1[i] = tu_normal(&rng) * 0.01f, s2[i] = tu_normal(&rng);
    for (int i = 0; i < 16; i++) bias[i] = tu_normal(&rng);
    for (int i = 0; i < (CPU_QGEMM_NT + 1) * LDC; i++) init[i] = tu_normal(&rng);
    for (int t = 0; t < CPU_QGEMM_NT; t++)
        for (int ch = 0; ch < NCH; ch++) {
            uint8_t *a = act + ((size_t)t * NCH + ch) * CPU_QGEMM_ACT;
            memset(a, 0, CPU_QGEMM_ACT);
            for (int k = 0; k < 32; k++) {
                const int v = (int)(tu_next(&rng) % 255) - 127;
                a[k] = (uint8_t)(int8_t)(t == 0 && ch == 0 ? (k % 2 ? -127 : 127) : t == 1 && ch == 0 ? 127 : v);
            }
            const float d = fabsf(tu_normal(&rng)) * 0.02f, m0 = tu_normal(&rng), m1 = tu_normal(&rng), m = m0 + m1;
            memcpy(a + 32, &d, 4), memcpy(a + 36, &m0, 4), memcpy(a + 40, &m1, 4), memcpy(a + 44, &m, 4);
            int32_t sq[3] = {0, 0, 0};
            for (int k = 0; k < 32; k++) sq[k / 16] += (int8_t)a[k], sq[2] += (int8_t)a[k];
            memcpy(a + 48, sq, sizeof sq);
        }
    int ran = 0;
    for (size_t ii = 0; ii < sizeof k_isas / sizeof k_isas[0]; ii++) {
        cpu_qgemm_fn fn = cpu_kernels_qgemm_isa(k_isas[ii]);
        cpu_qgemm_pack_fn pack = cpu_kernels_qgemm_pack_isa(k_isas[ii]);
        if (!fn) continue;
        assert_non_null(pack);
        ran++;
        for (int cs = 0; cs < 2; cs++)
        for (int sub = 16; sub <= 32; sub += 16) {
            u = cs ? u_small : u_full;
            memset(want_p, 0xa5, NCH * 768), memset(got_p, 0xa5, NCH * 768);
            cpu_kernels_qgemm_pack_isa("scalar")(u, K, s1, s2, sub, want_p);
            pack(u, K, s1, s2, sub, got_p);
            assert_memory_equal(got_p, want_p, NCH * 768);
            for (int nt = 1; nt <= CPU_QGEMM_NT; nt++)
                for (int nc = 1; nc <= 16; nc += nc < 3 ? 1 : 6)
                    for (int mode = 0; mode < 9; mode++) { /* plain, + bias, ADD; offsets as floats, 8, 128 steps */
                        const int add = mode % 3 == 2, zp = mode / 3 == 0 ? 0 : mode / 3 == 1 ? 8 : 128;
                        if (!cs && zp < 128 && !strcmp(k_isas[ii], "avx2")) continue; /* outside its domain */
                        memcpy(c, init, sizeof c);
                        fn(NCH, sub, zp, act, NCH * CPU_QGEMM_ACT, got_p, c, LDC, nt, nc, add, mode % 3 == 1 ? bias : NULL);
                        for (int t = 0; t <= CPU_QGEMM_NT; t++)
                            for (int j = 0; j < LDC; j++) {
                                const float got = c[t * LDC + j], was = init[t * LDC + j];
                                if (t >= nt || j >= nc) {
                                    assert_true(got == was);
                                    continue;
                                }
                                double want = (add ? was : 0) + (mode % 3 == 1 ? bias[j] : 0), mag = fabs(want);
                                for (int ch = 0; ch < NCH; ch++) {
                                    const uint8_t *a = act + ((size_t)t * NCH + ch) * CPU_QGEMM_ACT;
                                    float d, m[3];
                                    int32_t sq[3];
                                    memcpy(&d, a + 32, 4), memcpy(m, a + 36, 12), memcpy(sq, a + 48, 12);
                                    for (int h = 0; h < 32 / sub; h++) {
                                        /* sub-block 2 ch + h of 16 (sub 32: the chunk's first half's scales) */
                                        const double sc = s1[16 * (2 * ch + h) + j], w2 = s2[16 * (2 * ch + h) + j];
                                        long isum = 0;
                                        for (int k = h * sub; k < (h + 1) * sub; k++)
                                            isum += (long)u[(size_t)j * K + 32 * ch + k] * (int8_t)a[k];
                                        const double p = sc * d * (double)(isum - (long)zp * sq[sub == 32 ? 2 : h]),
                                                     q = zp ? 0 : w2 * (sub == 32 ? m[2] : m[h]);
                                        want += p + q, mag += fabs(p) + fabs(q);
                                    }
                                }
                                if (fabs(got - want) > 2e-6 * mag + 1e-30)
                                    fail_msg("qgemm %s sub=%d zp=%d nt=%d nc=%d mode=%d: %.9g, want %.9g", k_isas[ii], sub,
                                             zp, nt, nc, mode, got, want);
                            }
                    }
        }
    }
    assert_true(ran >= 1); /* the scalar reference at least */
    free(u_full), free(u_small), free(act), free(s1), free(s2), free(want_p), free(got_p);
}

/* The direct panel packers (Q4_0 from GGUF blocks and from CPU_W_Q4_0_X8,
 * Q8_0, Q4_K, Q6_K) write the bytes of the unpack-and-pack path, with and
 * without a tail of Q4_0 blocks past the last group of 8, over several K-quant
 * superblocks. */
static void test_qgemm_direct(void **state) {
    (void)state;
    tu_rng rng = {31};
    const int64_t Ks[] = {768, 288};
    for (size_t ii = 0; ii < sizeof k_isas / sizeof k_isas[0]; ii++) {
        cpu_qgemm_direct_fn fn = cpu_kernels_qgemm_direct_isa(k_isas[ii]);
        if (!fn) continue;
        for (int ki = 0; ki < 2; ki++)
            for (int layout = 0; layout < 5; layout++) {
                const int64_t K = Ks[ki];
                const uint32_t type = layout == CPU_QGEMM_DIRECT_Q8_0   ? WGML_Q8_0
                                      : layout == CPU_QGEMM_DIRECT_Q4_K ? WGML_Q4_K
                                      : layout == CPU_QGEMM_DIRECT_Q6_K ? WGML_Q6_K
                                                                        : WGML_Q4_0;
                if (K % wgml_dtype_get(type)->block_size) continue;
                const size_t row = wgml_row_size(type, K);
                float *x = malloc(sizeof(float) * (size_t)K);
                uint8_t *w = malloc(16 * row), *w8 = malloc(16 * row);
                uint8_t *want = aligned_alloc(64, (size_t)K / 32 * 768), *got = aligned_alloc(64, (size_t)K / 32 * 768);
                for (int j = 0; j < 16; j++) {
                    for (int64_t k = 0; k < K; k++) x[k] = tu_normal(&rng) * (float)(1 + j);
                    wgml_quantize_row(type, x, w + j * row, K);
                    if (layout == CPU_QGEMM_DIRECT_Q4_0_X8) cpu_w_q4_0_x8_repack(w + j * row, w8 + j * row, K);
                }
                const uint8_t *src = layout == CPU_QGEMM_DIRECT_Q4_0_X8 ? w8 : w;
                assert_int_equal(cpu_qgemm_pack_ref(type, layout == CPU_QGEMM_DIRECT_Q4_0_X8, src, row, K, want), 0);
                const size_t bytes = (size_t)K / 32 * cpu_qgemm_chunk_bytes(type == WGML_Q6_K ? 16 : 32);
                memset(got, 0x77, bytes);
                fn(layout, src, row, K, got);
                if (memcmp(got, want, bytes) != 0)
                    fail_msg("qgemm direct %s layout %d K=%lld differs from unpack + pack", k_isas[ii], layout,
                             (long long)K);
                free(x), free(w), free(w8), free(want), free(got);
            }
    }
}

/* SwiGLU after a matmul (cpu_swiglu_fn) of every instruction set against
 * double math: gates from -100 to 100 (exp's clamp at both ends), with and
 * without biases, a ragged tail. */
static void test_swiglu(void **state) {
    (void)state;
    enum { M = 301 };
    tu_rng rng = {37};
    float g0[M], u[M], bg[M], bu[M], g[M];
    for (int m = 0; m < M; m++) {
        g0[m] = m < 200 ? -100.0f + (float)m : tu_normal(&rng) * 4;
        u[m] = tu_normal(&rng), bg[m] = tu_normal(&rng) * 0.1f, bu[m] = tu_normal(&rng);
    }
    int ran = 0;
    for (size_t ii = 0; ii < sizeof k_isas / sizeof k_isas[0]; ii++) {
        cpu_swiglu_fn fn = cpu_kernels_swiglu_isa(k_isas[ii]);
        if (!fn) continue;
        ran++;
        for (int bias = 0; bias < 2; bias++)
            for (int len = M; len >= M - 15; len -= 15) {
                memcpy(g, g0, sizeof g);
                fn(g, u, bias ? bg : NULL, bias ? bu : NULL, len);
                for (int m = 0; m < M; m++) {
                    if (m >= len) {
                        assert_true(g[m] == g0[m]);
                        continue;
                    }
                    const double a = (double)g0[m] + (bias ? bg[m] : 0), b = (double)u[m] + (bias ? bu[m] : 0);
                    const double want = a / (1 + exp(-a)) * b;
                    if (!(fabs(g[m] - want) <= 2e-6 * fabs(want) + 1e-30))
                        fail_msg("swiglu %s m=%d: %.9g, want %.9g", k_isas[ii], m, g[m], want);
                }
            }
    }
    assert_true(ran >= 1);
}

/* f32 -> f16 of every instruction set (the KV cache's stores) gives
 * wgml_f32_to_f16's bits: every 2^-13 step across the f16 range (ties both
 * ways, subnormals, the overflow edge), random bit patterns (NaN payloads,
 * infinities), lengths with a tail. */
static void test_to_f16(void **state) {
    (void)state;
    enum { N = 1 << 16 };
    tu_rng rng = {29};
    float *x = malloc(sizeof(float) * N);
    uint16_t *want = malloc(2 * N), *got = malloc(2 * N);
    for (int i = 0; i < N / 2; i++) x[i] = wgml_bits_to_f32(0x33000000u + (uint32_t)i * 0x1000u); /* 2^-25 .. past 65520 */
    for (int i = N / 2; i < N; i++) x[i] = wgml_bits_to_f32((uint32_t)tu_next(&rng));
    x[1] = -x[1], x[100] = -x[100];
    for (int i = 0; i < N; i++) want[i] = wgml_f32_to_f16(x[i]);
    int ran = 0;
    for (size_t ii = 0; ii < sizeof k_isas / sizeof k_isas[0]; ii++) {
        cpu_to_f16_fn fn = cpu_kernels_to_f16_isa(k_isas[ii]);
        if (!fn) continue;
        ran++;
        const int64_t lens[] = {N, N - 3, 5};
        for (int li = 0; li < 3; li++) {
            memset(got, 0, 2 * N);
            fn(x, got, lens[li]);
            for (int64_t i = 0; i < lens[li]; i++)
                if (got[i] != want[i])
                    fail_msg("to_f16 %s: %.9g (0x%08x) -> 0x%04x, want 0x%04x", k_isas[ii], x[i], wgml_f32_to_bits(x[i]),
                             got[i], want[i]);
        }
    }
    assert_true(ran >= 1);
    free(x), free(want), free(got);
}

/* The int8 GEMM's activation encoders (cpu_kernels_qgemm_prep_isa) write the
 * bytes of the library's Q8_0 and Q8_K encoders (cpu_qgemm_prepare_row_ref):
 * random rows, rows of exact halves (ties both ways), a zero row, the
 * largest magnitude twice with both signs, NaN and infinities. */
static void test_qgemm_prep(void **state) {
    (void)state;
    enum { K = 512, ROWS = 8 };
    tu_rng rng = {23};
    float *x = malloc(sizeof(float) * K * ROWS);
    uint8_t *want = malloc((K / 32) * CPU_QGEMM_ACT), *got = malloc((K / 32) * CPU_QGEMM_ACT);
    for (int i = 0; i < K * ROWS; i++) x[i] = tu_normal(&rng) * (1 + i % 7);
    for (int i = 0; i < K; i++) x[7 * K + i] = (float)((i % 255) - 127) * 0.5f; /* amax 63.5: id 2 */
    for (int i = 0; i < K; i++) x[K + i] = i % 32 == 0 ? 127.0f : (float)(i % 509 - 254) * 0.5f; /* id 1: exact halves */
    memset(x + 2 * K, 0, sizeof(float) * K);
    x[3 * K + 5] = -9.0f, x[3 * K + 9] = 9.0f, x[3 * K + 300] = 9.0f, x[3 * K + 301] = -9.0f;
    x[4 * K + 3] = NAN, x[4 * K + 40] = NAN, x[4 * K + 290] = -NAN;
    x[5 * K + 7] = INFINITY, x[5 * K + 100] = -INFINITY, x[5 * K + 333] = INFINITY;
    for (int i = 0; i < K; i++) x[6 * K + i] *= 1e-39f; /* subnormal: -127 / max overflows in places */
    int ran = 0;
    for (size_t ii = 0; ii < sizeof k_isas / sizeof k_isas[0]; ii++) {
        cpu_qgemm_prep_fn fn = cpu_kernels_qgemm_prep_isa(k_isas[ii]);
        if (!fn) continue;
        ran++;
        for (int kind = 0; kind < 2; kind++)
            for (int r = 0; r < ROWS; r++) {
                memset(want, 0x5a, (K / 32) * CPU_QGEMM_ACT), memset(got, 0xa5, (K / 32) * CPU_QGEMM_ACT);
                cpu_qgemm_prepare_row_ref(x + (size_t)r * K, K, kind, want);
                fn(x + (size_t)r * K, K, kind, got);
                if (memcmp(got, want, (K / 32) * CPU_QGEMM_ACT) != 0)
                    fail_msg("qgemm prep %s kind %d row %d differs from the library's encoder", k_isas[ii], kind, r);
            }
    }
    assert_true(ran >= (cpu_kernels_qgemm() ? 1 : 0));
    free(x), free(want), free(got);
}

/* The bf16-pair GEMM micro-kernel of every instruction set that has one, the
 * same way (products of bf16 values are exact in f32), and the activation
 * rounding: round to nearest even, the same on every instruction set. */
static void test_gemm_bf16(void **state) {
    (void)state;
    enum { LDX = 307, LDC = 45 };
    tu_rng rng = {9};
    uint32_t *x = malloc(sizeof(uint32_t) * CPU_GEMM_MR_BF16 * LDX), *wp = aligned_alloc(64, sizeof(uint32_t) * 304 * CPU_GEMM_NR);
    float *c = malloc(sizeof(float) * (CPU_GEMM_MR_BF16 + 1) * LDC), *init = malloc(sizeof(float) * (CPU_GEMM_MR_BF16 + 1) * LDC);
    for (int i = 0; i < CPU_GEMM_MR_BF16 * LDX; i++)
        x[i] = wgml_f32_to_bf16(tu_normal(&rng)) | (uint32_t)wgml_f32_to_bf16(tu_normal(&rng)) << 16;
    for (int i = 0; i < (CPU_GEMM_MR_BF16 + 1) * LDC; i++) init[i] = tu_normal(&rng);
    const int64_t kps[] = {1, 3, 32, 257, 304};
    const int ncs[] = {1, 16, 17, 32};
    int ran = 0;
    for (size_t ii = 0; ii < sizeof k_isas / sizeof k_isas[0]; ii++) {
        cpu_gemm_bf16_fn fn = cpu_kernels_gemm_bf16_isa(k_isas[ii]);
        if (!fn) continue;
        ran++;
        for (size_t ki = 0; ki < sizeof kps / sizeof kps[0]; ki++)
            for (size_t ni = 0; ni < sizeof ncs / sizeof ncs[0]; ni++)
                for (int mr = 1; mr <= CPU_GEMM_MR_BF16; mr++)
                    for (int add = 0; add < 2; add++) {
                        const int64_t kp = kps[ki];
                        const int nc = ncs[ni];
                        for (int64_t k = 0; k < kp; k++)
                            for (int j = 0; j < CPU_GEMM_NR; j++)
                                wp[k * CPU_GEMM_NR + j] = j < nc ? wgml_f32_to_bf16(tu_normal(&rng)) |
                                                                       (uint32_t)wgml_f32_to_bf16(tu_normal(&rng)) << 16
                                                                 : 0;
                        memcpy(c, init, sizeof(float) * (CPU_GEMM_MR_BF16 + 1) * LDC);
                        fn(kp, x, LDX, wp, c, LDC, mr, nc, add);
                        for (int r = 0; r <= CPU_GEMM_MR_BF16; r++)
                            for (int j = 0; j < LDC; j++) {
                                const float got = c[r * LDC + j], was = init[r * LDC + j];
                                if (r >= mr || j >= nc) {
                                    assert_true(got == was);
                                    continue;
                                }
                                double want = add ? was : 0, mag = add ? fabs(was) : 0;
                                for (int64_t k = 0; k < kp; k++)
                                    for (int h = 0; h < 2; h++) {
                                        const double p = (double)wgml_bf16_to_f32((uint16_t)(x[r * LDX + k] >> (16 * h))) *
                                                         wgml_bf16_to_f32((uint16_t)(wp[k * CPU_GEMM_NR + j] >> (16 * h)));
                                        want += p, mag += fabs(p);
                                    }
                                if (fabs(got - want) > 2e-6 * mag + 1e-30)
                                    fail_msg("gemm bf16 %s kp=%lld nc=%d mr=%d add=%d: %.9g, want %.9g", k_isas[ii],
                                             (long long)kp, nc, mr, add, got, want);
                            }
                    }
    }
    assert_true(ran >= 1); /* the scalar reference at least */
    /* rounding: ties to even, on every length (the SIMD tail) */
    float f[77];
    uint16_t a[77], b[77];
    for (int i = 0; i < 77; i++) f[i] = tu_normal(&rng) * 100;
    f[0] = wgml_bits_to_f32(0x3f808000u); /* a tie: to even, 0x3f80 */
    f[1] = wgml_bits_to_f32(0x3f818000u); /* a tie: to even, 0x3f82 */
    cpu_to_bf16_fn conv = cpu_kernels_to_bf16();
    for (int n = 1; n <= 77; n += 19) {
        memset(a, 0xab, sizeof a), memset(b, 0xab, sizeof b);
        conv(f, a, n);
        cpu_to_bf16_scalar(f, b, n);
        assert_memory_equal(a, b, sizeof a); /* equal values, nothing written past n */
    }
    assert_int_equal(b[0], 0x3f80);
    assert_int_equal(b[1], 0x3f82);
    free(x), free(wp), free(c), free(init);
}

/* Snake (x + sin(v x)^2 / v) of this CPU against the double formula: arguments
 * from tiny to past CPU_SNAKE_MAX_ARG (the double fallback), ragged rows, in place. */
static void test_snake(void **state) {
    (void)state;
    enum { N = 53, ROWS = 300 };
    tu_rng rng = {11};
    float *x = malloc(sizeof(float) * N * ROWS), *o = malloc(sizeof(float) * N * ROWS), v[N];
    for (int c = 0; c < N; c++) v[c] = c == 0 ? 1e-3f : c == 1 ? 200.0f : 0.05f + 3 * tu_uniform(&rng);
    for (int i = 0; i < N * ROWS; i++) x[i] = tu_normal(&rng) * (i % 7 == 0 ? 40.0f : 2.0f);
    x[1] = 30, x[N + 1] = -25; /* 200 x: past CPU_SNAKE_MAX_ARG */
    cpu_snake_fn fns[2] = {cpu_snake_scalar, cpu_kernels_snake()};
    for (int f = 0; f < 2; f++) {
        fns[f](o, x, v, N, ROWS);
        double worst = 0;
        for (int i = 0; i < N * ROWS; i++) {
            const double y = x[i], vc = v[i % N], s = sin(vc * y), want = y + s * s / vc;
            /* a few ulp of sin^2 / v, and the rounding of the sum */
            const double e = fabs(o[i] - want) / (fabs(want) * 1.2e-7 + 6e-7 / vc);
            worst = e > worst ? e : worst;
        }
        if (worst > 1) fail_msg("snake %d: error %.3g of the tolerance", f, worst);
    }
    /* in place gives the same */
    memcpy(o, x, sizeof(float) * N * ROWS);
    float *o2 = malloc(sizeof(float) * N * ROWS);
    fns[1](o2, x, v, N, ROWS);
    fns[1](o, o, v, N, ROWS);
    assert_memory_equal(o, o2, sizeof(float) * N * ROWS);
    free(x), free(o), free(o2);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void test_bench(void **state) {
    (void)state;
    const char *env = getenv("WGML_KERNEL_BENCH");
    if (!env || strcmp(env, "1") != 0) {
        print_message("set WGML_KERNEL_BENCH=1 for the throughput table\n");
        skip();
    }
    const int64_t n = 4096;
    const size_t total = (size_t)64 << 20;
    tu_rng rng = {1};
    float *x = malloc(n * sizeof(float));
    uint8_t *xp = malloc(n * sizeof(float));
    uint8_t *w = malloc(total);
    make_x(n, x, &rng);
    print_message("single-thread dot throughput, GB/s of weights per second of thread CPU time,\n"
                  "rows of %lld over a 64 MB matrix, best of several passes:\n",
                  (long long)n);
    print_message("%-6s %8s %8s %8s\n", "type", "scalar", "avx2", "avx512");
    for (size_t ti = 0; ti < N_WEIGHTS; ti++) {
        const uint32_t t = k_weights[ti];
        const size_t row = wgml_row_size(t, n);
        const int64_t rows = (int64_t)(total / row);
        make_weights(t, 0, n, w, &rng);
        for (int64_t r = 1; r < rows; r++)
            memcpy(w + r * row, w, row);
        double gbs[3] = {0, 0, 0};
        for (size_t ii = 0; ii < 3; ii++) {
            const cpu_type_kernels *k = cpu_kernels_get_isa(k_isas[ii], t);
            if (!k) continue;
            k->prepare(x, xp, n);
            float sink = 0;
            double best = 1e30;
            for (int rep = 0; rep < (ii == 0 ? 2 : 7); rep++) {
                const double t0 = now_s();
                for (int64_t r = 0; r < rows; r++)
                    sink += k->dot(n, w + r * row, xp);
                const double dt = now_s() - t0;
                best = dt < best ? dt : best;
            }
            gbs[ii] = (double)rows * row / best / 1e9;
            if (isnan(sink)) print_message("(NaN sum)\n"); /* keeps the dots from being optimized away */
        }
        print_message("%-6s %8.2f %8.2f %8.2f\n", wgml_dtype_name(t), gbs[0], gbs[1], gbs[2]);
    }
    free(x);
    free(xp);
    free(w);
}

/* WGML_KERNEL_BENCH=1: per weight row, one dot; CPU_DOT_ROWS dots, one per
 * activation row; and one dot_rows over those rows (which should cost
 * little more than the single dot while the weights stream from DRAM). */
static void test_bench_rows(void **state) {
    (void)state;
    const char *env = getenv("WGML_KERNEL_BENCH");
    if (!env || strcmp(env, "1") != 0) skip();
    const int64_t n = 4096, R = CPU_DOT_ROWS;
    const size_t total = (size_t)64 << 20;
    tu_rng rng = {2};
    float *x = malloc(n * sizeof(float));
    uint8_t *xp = malloc(R * n * sizeof(float) + 64);
    uint8_t *w = malloc(total);
    print_message("single-thread GB/s of weights, rows of %lld over a 64 MB matrix, best of 5:\n"
                  "one activation row (dot), %d rows by %d dots, %d rows by one dot_rows\n",
                  (long long)n, (int)R, (int)R, (int)R);
    print_message("%-6s %-7s %8s %8s %8s\n", "type", "isa", "dot", "dots", "rows");
    for (size_t ti = 0; ti < N_WEIGHTS; ti++) {
        const uint32_t t = k_weights[ti];
        const size_t row = wgml_row_size(t, n);
        const int64_t rows = (int64_t)(total / row);
        make_weights(t, 0, n, w, &rng);
        for (int64_t r = 1; r < rows; r++) memcpy(w + r * row, w, row);
        for (size_t ii = 1; ii < 3; ii++) {
            const cpu_type_kernels *k = cpu_kernels_get_isa(k_isas[ii], t);
            if (!k || !k->dot_rows) continue;
            const size_t xs = cpu_act_row_size(k->act_type, n);
            for (int64_t i = 0; i < R; i++) {
                make_x(n, x, &rng);
                k->prepare(x, xp + i * xs, n);
            }
            double best[3] = {1e30, 1e30, 1e30};
            float sink = 0, o[CPU_DOT_ROWS];
            for (int rep = 0; rep < 5; rep++)
                for (int v = 0; v < 3; v++) {
                    const double t0 = now_s();
                    for (int64_t r = 0; r < rows; r++) {
                        const uint8_t *wr = w + r * row;
                        if (v == 0) sink += k->dot(n, wr, xp);
                        else if (v == 1)
                            for (int64_t i = 0; i < R; i++) sink += k->dot(n, wr, xp + i * xs);
                        else {
                            k->dot_rows(n, wr, xp, xs, (int)R, o);
                            sink += o[0] + o[R - 1];
                        }
                    }
                    const double dt = now_s() - t0;
                    best[v] = dt < best[v] ? dt : best[v];
                }
            if (isnan(sink)) print_message("(NaN sum)\n");
            print_message("%-6s %-7s %8.2f %8.2f %8.2f\n", wgml_dtype_name(t), k_isas[ii], (double)rows * row / best[0] / 1e9,
                          (double)rows * row / best[1] / 1e9, (double)rows * row / best[2] / 1e9);
        }
    }
    free(x);
    free(xp);
    free(w);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),    cmocka_unit_test(test_dot),   cmocka_unit_test(test_dot_rows),
        cmocka_unit_test(test_prepare),
        cmocka_unit_test(test_prepare_edges),
        cmocka_unit_test(test_act_layout_checks),
        cmocka_unit_test(test_to_float), cmocka_unit_test(test_gemm),
        cmocka_unit_test(test_gemm_bf16), cmocka_unit_test(test_qgemm), cmocka_unit_test(test_qgemm_prep), cmocka_unit_test(test_qgemm_direct), cmocka_unit_test(test_swiglu), cmocka_unit_test(test_to_f16), cmocka_unit_test(test_snake), cmocka_unit_test(test_bench),
        cmocka_unit_test(test_bench_rows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
