/*
 * test_cpu_gelu.c - GELU in its erf form in float (cpu_gelu_erf_fn,
 * backend/cpu/kernels_impl.h) against the double formula
 * 0.5 x (1 + erf(x / sqrt 2)) that the exact backend keeps: every
 * instruction set this CPU has (and the portable one), over a dense grid of
 * [-8, 8], the boundaries of the polynomial's intervals, a stride through all
 * 2^32 bit patterns (every magnitude, subnormals, both signs, NaNs) and
 * random values; the special values as the double formula gives them
 * (-0, +-inf, NaN); ragged, unaligned and in-place calls; and the unary op
 * of the CPU backend, which uses the dispatched kernel (the exact backend
 * libm's erf in double).
 *
 * The same for GELU's two sigmoid forms (cpu_gelu_sig_fn): QuickGELU,
 * x / (1 + exp(-1.702 x)), and the tanh form, against their double formulas
 * (every 2^-16 of [-20, 20], the bit-pattern stride, random values and
 * specials), also in ulp of the exact value; the scalar kernel is the double
 * formula itself, the one the exact backend gives.
 *
 * WGML_KERNEL_BENCH=1 also prints ns per element of each kernel and of
 * libm's erf in double (one thread); for the sigmoid forms "scalar" is the
 * double formula with libm.
 */
#define _POSIX_C_SOURCE 200809L
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/backend.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/kernels_impl.h"
#include "testutil.h"

static const char *const k_isas[] = {"scalar", "avx2", "avx512"};
#define N_ISAS (sizeof k_isas / sizeof k_isas[0])

/* The bound the kernels are held to: absolute where |GELU| <= 1, relative above
 * (the brief: 1e-6; measured 7e-8, about the f32 rounding of the result, 6e-8). */
#define GELU_TOL 1e-7
/* QuickGELU's and tanh GELU's kernels, also in ulp of the exact value where
 * |out| >= SIG_ULP_FLOOR (below it, where exp(-z) passes e^88, the kernels give
 * -0 and the double formula values under 3e-37; measured: 2.2 ulp) */
#define SIG_MAX_ULP 3.0
#define SIG_ULP_FLOOR 1e-36

static double ref_gelu(float x) {
    const double y = x;
    return 0.5 * y * (1.0 + erf(y * 0.70710678118654752440));
}

static float f32_bits(uint32_t b) {
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}

/* Error of got against the double formula at x, in units of GELU_TOL; the
 * special values (NaN, +-inf, -0) must match exactly. */
static double err_units(float x, float got) {
    const double want = ref_gelu(x);
    if (isnan(want)) return isnan(got) ? 0 : INFINITY;
    if (isinf(want)) return got == want ? 0 : INFINITY;
    if (want == 0) return got == 0 && signbit(got) == signbit(want) ? 0 : fabs(got) / GELU_TOL;
    return fabs(got - want) / (GELU_TOL * fmax(1.0, fabs(want)));
}

/* Runs fn over xs (n values) and returns the worst error in units; *at: its x. */
static double worst_over(cpu_gelu_erf_fn fn, const float *xs, size_t n, float *out, float *at) {
    fn(out, xs, (int64_t)n);
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        const double e = err_units(xs[i], out[i]);
        if (e > worst || isnan(e)) worst = e, *at = xs[i];
    }
    return worst;
}

/* The inputs: a grid, the intervals' ends, a stride through the bit patterns, random values, specials. */
static float *inputs(size_t *n_out) {
    const size_t grid = 1600001, bounds = 17 * 9, stride_n = (1ull << 32) / 2039 + 1, rnd = 200000, spec = 16;
    float *x = malloc(sizeof(float) * (grid + bounds + stride_n + rnd + spec));
    size_t n = 0;
    for (size_t i = 0; i < grid; i++) x[n++] = (float)(-8.0 + 16.0 * (double)i / (double)(grid - 1));
    for (int k = -8; k <= 8; k++) { /* 0.75 k and its neighbours, where the interval changes; 6 the cut-off */
        const float b = 0.75f * (float)k;
        float v = b;
        for (int s = 0; s < 4; s++) v = nextafterf(v, -INFINITY);
        for (int s = 0; s < 9; s++, v = nextafterf(v, INFINITY)) x[n++] = v;
    }
    for (uint64_t b = 0; b < (1ull << 32); b += 2039) x[n++] = f32_bits((uint32_t)b);
    tu_rng rng = {2024};
    for (size_t i = 0; i < rnd; i++)
        x[n++] = i % 2 ? tu_normal(&rng) * 3.0f : (tu_uniform(&rng) - 0.5f) * (i % 4 ? 14.0f : 2e4f);
    const float specials[16] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, FLT_MAX, -FLT_MAX, FLT_MIN, -FLT_MIN,
                                FLT_TRUE_MIN, -FLT_TRUE_MIN, 6.0f, -6.0f, 1.0f, -1.0f};
    for (size_t i = 0; i < spec; i++) x[n++] = specials[i];
    *n_out = n;
    return x;
}

static void test_accuracy(void **state) {
    (void)state;
    size_t n;
    float *x = inputs(&n), *o = malloc(sizeof(float) * n);
    int ran = 0;
    for (size_t ii = 0; ii < N_ISAS; ii++) {
        cpu_gelu_erf_fn fn = cpu_kernels_gelu_erf_isa(k_isas[ii]);
        if (!fn) continue;
        ran++;
        float at = 0;
        const double worst = worst_over(fn, x, n, o, &at);
        printf("gelu_erf %-6s: worst error %.3g x %.1e (at x = %.9g, %zu values)\n", k_isas[ii], worst, GELU_TOL,
               (double)at, n);
        if (!(worst <= 1)) fail_msg("gelu_erf %s: error %.3g x %.1e at x = %.9g", k_isas[ii], worst, GELU_TOL, (double)at);
    }
    assert_true(ran >= 1);
    free(x), free(o);
}

/* The special values bit for bit, as the double formula gives them. */
static void test_specials(void **state) {
    (void)state;
    const float x[6] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1.0f};
    for (size_t ii = 0; ii < N_ISAS; ii++) {
        cpu_gelu_erf_fn fn = cpu_kernels_gelu_erf_isa(k_isas[ii]);
        if (!fn) continue;
        float o[6];
        fn(o, x, 6);
        assert_true(o[0] == 0 && !signbit(o[0]));
        assert_true(o[1] == 0 && signbit(o[1])); /* -0 * (1 + erf(-0)) / 2 = -0 */
        assert_true(isinf(o[2]) && o[2] > 0);
        assert_true(isnan(o[3])); /* -inf * (1 + -1) / 2 */
        assert_true(isnan(o[4]));
        assert_float_equal(o[5], 0.84134475f, 1e-7); /* GELU(1) = 0.8413447460685429 */
    }
}

/* Every length 0..70 at every offset 0..3, out of place and in place: each value the
 * bits of a one-element call (tails take the same lanes as full registers),
 * nothing written past the end. */
static void test_ragged(void **state) {
    (void)state;
    enum { N = 80 };
    tu_rng rng = {7};
    float x[N + 4], one[N + 4];
    for (int i = 0; i < N + 4; i++) x[i] = tu_normal(&rng) * 4.0f;
    for (size_t ii = 0; ii < N_ISAS; ii++) {
        cpu_gelu_erf_fn fn = cpu_kernels_gelu_erf_isa(k_isas[ii]);
        if (!fn) continue;
        for (int i = 0; i < N + 4; i++) fn(&one[i], &x[i], 1);
        for (int off = 0; off < 4; off++)
            for (int len = 0; len <= 70; len++) {
                float o[N + 4], io[N + 4];
                for (int i = 0; i < N + 4; i++) o[i] = -1234.0f;
                memcpy(io, x, sizeof io);
                fn(o + off, x + off, len);
                fn(io + off, io + off, len);
                for (int i = 0; i < N + 4; i++) {
                    const int in = i >= off && i < off + len;
                    if (in) {
                        assert_memory_equal(&o[i], &one[i], sizeof(float));
                        assert_memory_equal(&io[i], &one[i], sizeof(float));
                    } else {
                        assert_true(o[i] == -1234.0f);
                        assert_memory_equal(&io[i], &x[i], sizeof(float));
                    }
                }
            }
    }
}

/* The dispatch: the best kernel of this CPU, the portable one when forced scalar. */
static void test_dispatch(void **state) {
    (void)state;
    const char *isa = cpu_kernels_isa();
    cpu_gelu_erf_fn best = cpu_kernels_gelu_erf();
    cpu_gelu_erf_fn of_isa = cpu_kernels_gelu_erf_isa(isa);
    assert_ptr_equal(best, of_isa ? of_isa : cpu_gelu_erf_scalar);
#if defined(__x86_64__) || defined(__i386__)
    if (!strcmp(isa, "avx512")) assert_ptr_equal(best, cpu_gelu_erf_avx512);
    if (!strcmp(isa, "avx2")) assert_ptr_equal(best, cpu_gelu_erf_avx2);
#endif
    assert_null(cpu_kernels_gelu_erf_isa("neon"));
    cpu_kernels_force_scalar(1);
    assert_ptr_equal(cpu_kernels_gelu_erf(), cpu_gelu_erf_scalar);
    cpu_kernels_force_scalar(0);
    assert_ptr_equal(cpu_kernels_gelu_erf(), best);
}

/* The unary op: the CPU backend gives the dispatched kernel's bits (rows of a
 * ragged width, in chunks over 2 threads, and in place); the exact backend
 * the double formula rounded once. */
static void run_unary_kind(wgml_backend *be, const float *x, float *got, int64_t n, int64_t rows, int in_place,
                           wgml_unary_kind kind) {
    wgml_error err;
    wgml_buffer *bx, *bo = NULL;
    const size_t size = sizeof(float) * (size_t)(n * rows);
    assert_int_equal(be->buffer_create(be, size, WGML_BUFFER_ACTIVATIONS, &bx, &err), WGML_OK);
    assert_int_equal(be->buffer_write(be, bx, 0, x, size, &err), WGML_OK);
    if (!in_place) assert_int_equal(be->buffer_create(be, size, WGML_BUFFER_ACTIVATIONS, &bo, &err), WGML_OK);
    wgml_tensor tx = {.type = WGML_F32, .ne = {n, rows, 1, 1}, .buf = bx, .name = "x"};
    wgml_tensor to = tx;
    to.buf = in_place ? bx : bo;
    to.name = "out";
    be->begin(be, &(wgml_step){0, 1});
    wgml_op_unary(be, &(wgml_unary_args){.out = &to, .x = &tx, .kind = kind});
    assert_int_equal(be->end(be, &err), WGML_OK);
    assert_int_equal(be->buffer_read(be, to.buf, 0, got, size, &err), WGML_OK);
    be->buffer_free(be, bx);
    if (bo) be->buffer_free(be, bo);
}

static void run_unary(wgml_backend *be, const float *x, float *got, int64_t n, int64_t rows, int in_place) {
    run_unary_kind(be, x, got, n, rows, in_place, WGML_UNARY_GELU_ERF);
}

static void test_op(void **state) {
    (void)state;
    const int64_t n = 1537, rows = 41; /* several chunks of 16384 elements */
    tu_rng rng = {99};
    float *x = malloc(sizeof(float) * (size_t)(n * rows)), *got = malloc(sizeof(float) * (size_t)(n * rows)),
          *want = malloc(sizeof(float) * (size_t)(n * rows));
    for (int64_t i = 0; i < n * rows; i++) x[i] = tu_normal(&rng) * 3.0f;
    x[0] = -0.0f, x[1] = INFINITY, x[2] = NAN, x[3] = 7.5f, x[4] = -7.5f;
    wgml_error err;
    wgml_backend *be;
    assert_int_equal(wgml_backend_cpu_create(2, &be, &err), WGML_OK);
    cpu_kernels_gelu_erf()(want, x, n * rows);
    for (int in_place = 0; in_place < 2; in_place++) {
        run_unary(be, x, got, n, rows, in_place);
        assert_memory_equal(got, want, sizeof(float) * (size_t)(n * rows));
    }
    be->free(be);
    assert_int_equal(wgml_backend_cpu_create_exact(2, &be, &err), WGML_OK);
    run_unary(be, x, got, n, rows, 0);
    for (int64_t i = 0; i < n * rows; i++) {
        const float w = (float)ref_gelu(x[i]);
        if (memcmp(&got[i], &w, sizeof w) && !(isnan(got[i]) && isnan(w)))
            fail_msg("exact backend x=%.9g: %.9g, want %.9g", (double)x[i], (double)got[i], (double)w);
    }
    be->free(be);
    free(x), free(got), free(want);
}

/* ---- GELU's sigmoid forms: QuickGELU and tanh GELU (cpu_gelu_sig_fn) ---- */

static const char *const k_sig_names[2] = {"gelu_quick", "gelu_tanh"};

/* The double formulas of the exact backend, written out here again. */
static double ref_sig(float x, int kind) {
    const double y = x;
    return kind == CPU_GELU_TANH ? 0.5 * y * (1.0 + tanh(0.79788456080286535588 * (y + 0.044715 * y * y * y)))
                                 : y / (1.0 + exp(-1.702 * y));
}

/* Both as x sigmoid(z) in double, y / (1 + exp(-z)): the same function, but
 * tanh GELU's 1 + tanh(u) cancels for x below -5 (all of it below -7.3), so
 * there the formula above keeps few of its digits (its values are below
 * 1e-6); this one keeps them, for the error in ulp. */
static double sigmoid_form(float x, int kind) {
    const double y = x, z = kind == CPU_GELU_TANH ? 2 * 0.79788456080286535588 * (y + 0.044715 * y * y * y) : 1.702 * y;
    return y / (1.0 + exp(-z));
}

/* As err_units, for kind (against the exact backend's formula); *ulps: the
 * error in units of the f32 spacing at sigmoid_form's value where that is
 * at least SIG_ULP_FLOOR in magnitude (else 0). */
static double sig_err_units(float x, float got, int kind, double *ulps) {
    const double want = ref_sig(x, kind), acc = sigmoid_form(x, kind);
    *ulps = 0;
    if (isnan(want)) return isnan(got) ? 0 : INFINITY;
    if (isinf(want)) return got == want ? 0 : INFINITY;
    if (isnan(got) || isinf(got)) return INFINITY;
    if (fabs(acc) >= SIG_ULP_FLOOR) {
        int e;
        frexp(fabs(acc), &e);
        *ulps = fabs(got - acc) / ldexp(1.0, e - 24);
    }
    if (want == 0) return got == 0 && signbit(got) == signbit(want) ? 0 : fabs(got) / GELU_TOL;
    return fabs(got - want) / (GELU_TOL * fmax(1.0, fabs(want)));
}

/* The inputs: every 2^-16 of [-20, 20] (2.6 million), a stride through the bit
 * patterns, random values, the specials. */
static float *sig_inputs(size_t *n_out) {
    const size_t grid = 40 * 65536 + 1, stride_n = (1ull << 32) / 2039 + 1, rnd = 200000, spec = 20;
    float *x = malloc(sizeof(float) * (grid + stride_n + rnd + spec));
    size_t n = 0;
    for (size_t i = 0; i < grid; i++) x[n++] = (float)(-20.0 + (double)i / 65536.0);
    for (uint64_t b = 0; b < (1ull << 32); b += 2039) x[n++] = f32_bits((uint32_t)b);
    tu_rng rng = {2025};
    for (size_t i = 0; i < rnd; i++)
        x[n++] = i % 2 ? tu_normal(&rng) * 3.0f : (tu_uniform(&rng) - 0.5f) * (i % 4 ? 120.0f : 2e4f);
    const float specials[20] = {0.0f,    -0.0f,    INFINITY,     -INFINITY,     NAN,   -NAN,  FLT_MAX,
                                -FLT_MAX, FLT_MIN, -FLT_MIN,     FLT_TRUE_MIN,  -FLT_TRUE_MIN, 1.0f, -1.0f,
                                -51.7f,   -52.0f,  -60.0f,       -88.0f,        9.2f,  -9.2f};
    for (size_t i = 0; i < spec; i++) x[n++] = specials[i];
    *n_out = n;
    return x;
}

static void test_sig_accuracy(void **state) {
    (void)state;
    size_t n;
    float *x = sig_inputs(&n), *o = malloc(sizeof(float) * n);
    int ran = 0;
    for (size_t ii = 0; ii < N_ISAS; ii++) {
        cpu_gelu_sig_fn fn = cpu_kernels_gelu_sig_isa(k_isas[ii]);
        if (!fn) continue;
        ran++;
        for (int kind = 0; kind < 2; kind++) {
            fn(o, x, (int64_t)n, kind);
            double worst = 0, worst_ulp = 0, ulps;
            float at = 0, at_ulp = 0;
            for (size_t i = 0; i < n; i++) {
                const double e = sig_err_units(x[i], o[i], kind, &ulps);
                if (e > worst || isnan(e)) worst = e, at = x[i];
                if (ulps > worst_ulp) worst_ulp = ulps, at_ulp = x[i];
            }
            printf("%-10s %-6s: worst error %.3g x %.1e (at x = %.9g); %.2f ulp where |out| >= %.0e (at x = %.9g); "
                   "%zu values\n",
                   k_sig_names[kind], k_isas[ii], worst, GELU_TOL, (double)at, worst_ulp, SIG_ULP_FLOOR,
                   (double)at_ulp, n);
            if (!(worst <= 1))
                fail_msg("%s %s: error %.3g x %.1e at x = %.9g", k_sig_names[kind], k_isas[ii], worst, GELU_TOL,
                         (double)at);
            /* the scalar kernel is the formula with tanh, exact only in the absolute sense below -5 */
            if (strcmp(k_isas[ii], "scalar") && !(worst_ulp <= SIG_MAX_ULP))
                fail_msg("%s %s: %.2f ulp at x = %.9g", k_sig_names[kind], k_isas[ii], worst_ulp, (double)at_ulp);
        }
    }
    assert_true(ran >= 1);
    free(x), free(o);
}

/* The special values bit for bit, as the double formulas give them. */
static void test_sig_specials(void **state) {
    (void)state;
    const float x[8] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1.0f, -FLT_MAX, FLT_MAX};
    for (size_t ii = 0; ii < N_ISAS; ii++) {
        cpu_gelu_sig_fn fn = cpu_kernels_gelu_sig_isa(k_isas[ii]);
        if (!fn) continue;
        for (int kind = 0; kind < 2; kind++) {
            float o[8];
            fn(o, x, 8, kind);
            assert_true(o[0] == 0 && !signbit(o[0]));
            assert_true(o[1] == 0 && signbit(o[1])); /* -0 / 2 */
            assert_true(isinf(o[2]) && o[2] > 0);    /* inf * 1 */
            assert_true(isnan(o[3]));                /* -inf / inf, -inf * 0 */
            assert_true(isnan(o[4]));
            /* QuickGELU(1) = 1 / (1 + exp(-1.702)) = 0.845934...; tanh GELU(1) = 0.841191... */
            assert_float_equal(o[5], kind == CPU_GELU_TANH ? 0.84119199f : 0.84579577f, 2e-7);
            assert_true(o[6] == 0 && signbit(o[6])); /* a finite x far below: -0 */
            assert_true(o[7] == FLT_MAX);
        }
    }
}

/* Every length 0..70 at every offset 0..3, out of place and in place, as
 * test_ragged. */
static void test_sig_ragged(void **state) {
    (void)state;
    enum { N = 80 };
    tu_rng rng = {8};
    float x[N + 4], one[N + 4];
    for (int i = 0; i < N + 4; i++) x[i] = tu_normal(&rng) * 4.0f;
    for (size_t ii = 0; ii < N_ISAS; ii++) {
        cpu_gelu_sig_fn fn = cpu_kernels_gelu_sig_isa(k_isas[ii]);
        if (!fn) continue;
        for (int kind = 0; kind < 2; kind++) {
            for (int i = 0; i < N + 4; i++) fn(&one[i], &x[i], 1, kind);
            for (int off = 0; off < 4; off++)
                for (int len = 0; len <= 70; len++) {
                    float o[N + 4], io[N + 4];
                    for (int i = 0; i < N + 4; i++) o[i] = -1234.0f;
                    memcpy(io, x, sizeof io);
                    fn(o + off, x + off, len, kind);
                    fn(io + off, io + off, len, kind);
                    for (int i = 0; i < N + 4; i++) {
                        if (i >= off && i < off + len) {
                            assert_memory_equal(&o[i], &one[i], sizeof(float));
                            assert_memory_equal(&io[i], &one[i], sizeof(float));
                        } else {
                            assert_true(o[i] == -1234.0f);
                            assert_memory_equal(&io[i], &x[i], sizeof(float));
                        }
                    }
                }
        }
    }
}

static void test_sig_dispatch(void **state) {
    (void)state;
    const char *isa = cpu_kernels_isa();
    cpu_gelu_sig_fn best = cpu_kernels_gelu_sig();
    cpu_gelu_sig_fn of_isa = cpu_kernels_gelu_sig_isa(isa);
    assert_ptr_equal(best, of_isa ? of_isa : cpu_gelu_sig_scalar);
#if defined(__x86_64__) || defined(__i386__)
    if (!strcmp(isa, "avx512")) assert_ptr_equal(best, cpu_gelu_sig_avx512);
    if (!strcmp(isa, "avx2")) assert_ptr_equal(best, cpu_gelu_sig_avx2);
#endif
    assert_null(cpu_kernels_gelu_sig_isa("neon"));
    cpu_kernels_force_scalar(1);
    assert_ptr_equal(cpu_kernels_gelu_sig(), cpu_gelu_sig_scalar);
    cpu_kernels_force_scalar(0);
    assert_ptr_equal(cpu_kernels_gelu_sig(), best);
}

/* The unary op for both kinds: the CPU backend gives the dispatched kernel's
 * bits (2 threads, in place too), the exact backend the double formula
 * rounded once, which is also the scalar kernel. */
static void test_sig_op(void **state) {
    (void)state;
    const int64_t n = 1537, rows = 41;
    const size_t size = sizeof(float) * (size_t)(n * rows);
    tu_rng rng = {98};
    float *x = malloc(size), *got = malloc(size), *want = malloc(size);
    for (int64_t i = 0; i < n * rows; i++) x[i] = tu_normal(&rng) * 3.0f;
    x[0] = -0.0f, x[1] = INFINITY, x[2] = NAN, x[3] = -INFINITY, x[4] = -30.0f, x[5] = 30.0f;
    const wgml_unary_kind kinds[2] = {WGML_UNARY_GELU_QUICK, WGML_UNARY_GELU};
    wgml_error err;
    for (int exact = 0; exact < 2; exact++) {
        wgml_backend *be;
        assert_int_equal((exact ? wgml_backend_cpu_create_exact : wgml_backend_cpu_create)(2, &be, &err), WGML_OK);
        for (int kind = 0; kind < 2; kind++) {
            (exact ? cpu_gelu_sig_scalar : cpu_kernels_gelu_sig())(want, x, n * rows, kind);
            for (int in_place = 0; in_place < 2 - exact; in_place++) {
                run_unary_kind(be, x, got, n, rows, in_place, kinds[kind]);
                for (int64_t i = 0; i < n * rows; i++)
                    if (memcmp(&got[i], &want[i], sizeof(float)) && !(isnan(got[i]) && isnan(want[i])))
                        fail_msg("%s exact=%d x=%.9g: %.9g, want %.9g", k_sig_names[kind], exact, (double)x[i],
                                 (double)got[i], (double)want[i]);
            }
            if (exact)
                for (int64_t i = 0; i < n * rows; i++) {
                    const float w = (float)ref_sig(x[i], kind);
                    if (memcmp(&got[i], &w, sizeof w) && !(isnan(got[i]) && isnan(w)))
                        fail_msg("%s exact x=%.9g: %.9g, want %.9g", k_sig_names[kind], (double)x[i],
                                 (double)got[i], (double)w);
                }
        }
        be->free(be);
    }
    free(x), free(got), free(want);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void libm_gelu(float *out, const float *in, int64_t n) {
    for (int64_t i = 0; i < n; i++) out[i] = (float)ref_gelu(in[i]);
}

static void test_bench(void **state) {
    (void)state;
    const char *b = getenv("WGML_KERNEL_BENCH");
    if (!b || !*b || !strcmp(b, "0")) skip();
    enum { N = 1 << 16 }; /* 256 KB: in L2, as a [1500][S] activation's chunk is */
    float *x = malloc(sizeof(float) * N), *o = malloc(sizeof(float) * N);
    tu_rng rng = {5};
    for (int i = 0; i < N; i++) x[i] = tu_normal(&rng) * 2.0f;
    for (size_t ii = 0; ii <= N_ISAS; ii++) {
        cpu_gelu_erf_fn fn = ii == N_ISAS ? libm_gelu : cpu_kernels_gelu_erf_isa(k_isas[ii]);
        if (!fn) continue;
        int reps = ii == N_ISAS ? 20 : 200;
        double best = 1e9;
        for (int r = 0; r < 5; r++) {
            double t0 = now_s();
            for (int k = 0; k < reps; k++) fn(o, x, N);
            double dt = (now_s() - t0) / reps / N * 1e9;
            best = dt < best ? dt : best;
        }
        printf("gelu_erf %-6s %.3f ns/element\n", ii == N_ISAS ? "libm" : k_isas[ii], best);
    }
    for (int kind = 0; kind < 2; kind++)
        for (size_t ii = 0; ii < N_ISAS; ii++) { /* "scalar": the double formula with libm */
            cpu_gelu_sig_fn fn = cpu_kernels_gelu_sig_isa(k_isas[ii]);
            if (!fn) continue;
            int reps = ii == 0 ? 20 : 200;
            double best = 1e9;
            for (int r = 0; r < 5; r++) {
                double t0 = now_s();
                for (int k = 0; k < reps; k++) fn(o, x, N, kind);
                double dt = (now_s() - t0) / reps / N * 1e9;
                best = dt < best ? dt : best;
            }
            printf("%-10s %-6s %.3f ns/element\n", k_sig_names[kind], k_isas[ii], best);
        }
    free(x), free(o);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_accuracy), cmocka_unit_test(test_specials), cmocka_unit_test(test_ragged),
        cmocka_unit_test(test_dispatch), cmocka_unit_test(test_op),       cmocka_unit_test(test_sig_accuracy),
        cmocka_unit_test(test_sig_specials), cmocka_unit_test(test_sig_ragged), cmocka_unit_test(test_sig_dispatch),
        cmocka_unit_test(test_sig_op),     cmocka_unit_test(test_bench),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
