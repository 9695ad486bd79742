/*
 * cpu_ops_nn.c - the CPU backend's ops for encoders (ops.h): layer_norm,
 * l2_norm, unary, mul (and add's one-row case), pool.
 *
 * These are the reference every GPU backend is compared with, so they are
 * plain C that computes in double where rounding matters (sums, the
 * transcendental functions of unary; Snake and the GELUs (erf, tanh, quick)
 * alone have float kernels, SIMD where the CPU has it, and GELU (erf) a
 * portable float one too, kernels.h and kernels_impl.h, outside the exact
 * mode); the row ops and unary share their rows out over the thread pool.
 * Each op may run in place (out the very view of its input; validate.c
 * allows nothing else to overlap): every element is read before it is
 * written.
 */
#include <math.h>
#include <string.h>

#include "backend/cpu/cpu_internal.h"
#include "backend/cpu/kernels_impl.h"

#define ROWS_PER_CHUNK_ELEMS 16384 /* elements per chunk of rows handed to a thread */

static int64_t chunk_rows(int64_t n) { return n >= ROWS_PER_CHUNK_ELEMS ? 1 : ROWS_PER_CHUNK_ELEMS / (n > 0 ? n : 1); }

/* The f32 values of an optional vector argument (weight or activation). */
static const float *vec(const wgml_tensor *t) { return t ? (const float *)cpu_ptr(t) : NULL; }

/* ---- layer_norm, l2_norm ---- */

typedef struct {
    float *out;
    const float *x, *w, *b;
    int64_t n;
    float eps;
    int l2;
} norm_task;

static void norm_rows(void *p, int64_t lo, int64_t hi, int ith) {
    (void)ith;
    const norm_task *t = p;
    const int64_t n = t->n;
    for (int64_t r = lo; r < hi; r++) {
        const float *x = t->x + r * n;
        float *o = t->out + r * n;
        if (t->l2) {
            double ss = 0;
            for (int64_t i = 0; i < n; i++) ss += (double)x[i] * x[i];
            double inv = 1.0 / fmax(sqrt(ss), (double)t->eps);
            for (int64_t i = 0; i < n; i++) o[i] = (float)(x[i] * inv);
            continue;
        }
        double mean = 0, var = 0;
        for (int64_t i = 0; i < n; i++) mean += x[i];
        mean /= (double)n;
        for (int64_t i = 0; i < n; i++) var += ((double)x[i] - mean) * ((double)x[i] - mean);
        double inv = 1.0 / sqrt(var / (double)n + t->eps);
        for (int64_t i = 0; i < n; i++) {
            double v = ((double)x[i] - mean) * inv;
            if (t->w) v *= t->w[i];
            if (t->b) v += t->b[i];
            o[i] = (float)v;
        }
    }
}

void cpu_op_layer_norm(cpu_backend *cb, const wgml_layer_norm_args *a) {
    if (!cpu_check(cb, "layer_norm", a->out) || !cpu_check(cb, "layer_norm", a->x) ||
        (a->w && !cpu_check(cb, "layer_norm", a->w)) || (a->b && !cpu_check(cb, "layer_norm", a->b)))
        return;
    norm_task t = {cpu_ptr(a->out), cpu_ptr(a->x), vec(a->w), vec(a->b), a->x->ne[0], a->eps, 0};
    wgml_threadpool_run_range(cb->pool, norm_rows, &t, wgml_tensor_nrows(a->x), chunk_rows(t.n));
}

void cpu_op_l2_norm(cpu_backend *cb, const wgml_l2_norm_args *a) {
    if (!cpu_check(cb, "l2_norm", a->out) || !cpu_check(cb, "l2_norm", a->x)) return;
    norm_task t = {cpu_ptr(a->out), cpu_ptr(a->x), NULL, NULL, a->x->ne[0], a->eps, 1};
    wgml_threadpool_run_range(cb->pool, norm_rows, &t, wgml_tensor_nrows(a->x), chunk_rows(t.n));
}

/* ---- unary ---- */

/* GELU (erf) in float (kernels_impl.h): Q(t) = erfc(t / sqrt 2) / 2, the
 * Chebyshev fit of degree 7 on each [0.75 k, 0.75 (k + 1)), k < 8, in
 * u = t - (0.75 k + 0.375), coefficients rounded to float (mpmath): at most
 * 2e-8 from Q, most of it the rounding of the constant terms. */
const float cpu_gelu_q[CPU_GELU_Q_DEGREE + 1][8] = {
    {3.538302481e-01f, 1.302945167e-01f, 3.039636090e-02f, 4.332448356e-03f, 3.690785088e-04f, 1.853672438e-05f,
     5.440381869e-07f, 9.275066937e-09f},
    {-3.718550801e-01f, -2.118766457e-01f, -6.878627837e-02f, -1.272418164e-02f, -1.341118943e-03f,
     -8.054044883e-05f, -2.755941296e-06f, -5.373217959e-08f},
    {6.972261518e-02f, 1.191805974e-01f, 6.448724121e-02f, 1.670045964e-02f, 2.263125731e-03f, 1.661176211e-04f,
     6.718540135e-06f, 1.511977104e-07f},
    {5.326046050e-02f, -9.379898198e-03f, -2.884010039e-02f, -1.249223761e-02f, -2.322505461e-03f,
     -2.149841894e-04f, -1.045706631e-05f, -2.744317555e-07f},
    {-1.660607755e-02f, -1.722473279e-02f, 2.767182887e-03f, 5.415624939e-03f, 1.582866418e-03f, 1.939118374e-04f,
     1.159159547e-05f, 3.580099417e-07f},
    {-6.741804071e-03f, 5.280645099e-03f, 3.287638770e-03f, -9.685932891e-04f, -7.199415122e-04f,
     -1.278190612e-04f, -9.755734027e-06f, -3.634386303e-07f},
    {2.550020115e-03f, 1.299620722e-03f, -1.353831380e-03f, -3.097186564e-04f, 1.889097912e-04f, 6.320544344e-05f,
     6.758946711e-06f, 3.238952218e-07f},
    {6.472555106e-04f, -8.154382813e-04f, -2.553228478e-05f, 2.243635972e-04f, -5.750131550e-06f,
     -2.129195673e-05f, -3.394677606e-06f, -2.058990987e-07f},
};

/* The portable version (other CPUs, wasm): the SIMD ones' steps, one lane at a time. */
void cpu_gelu_erf_scalar(float *out, const float *in, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        const float x = in[i], t = fabsf(x), tc = t < 6.0f ? t : 6.0f; /* NaN: 6 */
        int k = (int)(tc * (4.0f / 3.0f));
        k = k < 7 ? k : 7;
        const float u = tc - ((float)k * 0.75f + 0.375f);
        float q = cpu_gelu_q[CPU_GELU_Q_DEGREE][k];
        for (int j = CPU_GELU_Q_DEGREE - 1; j >= 0; j--) q = q * u + cpu_gelu_q[j][k];
        if (!(t < 6.0f)) q = 0.0f; /* Q(6) < 1e-9; +-inf, NaN */
        out[i] = x > 0.0f ? x - tc * q : x * q;
    }
}

cpu_gelu_erf_fn cpu_kernels_gelu_erf_isa(const char *isa) {
    if (strcmp(isa, "scalar") == 0) return cpu_gelu_erf_scalar;
#if defined(WGML_CPU_X86)
    /* the ISAs this CPU has kernels for (also under WGML_CPU_ISA's cap) */
    if (!cpu_kernels_get_isa(isa, WGML_F32)) return NULL;
    if (strcmp(isa, "avx512") == 0) return cpu_gelu_erf_avx512;
    if (strcmp(isa, "avx2") == 0) return cpu_gelu_erf_avx2;
#endif
    return NULL;
}

cpu_gelu_erf_fn cpu_kernels_gelu_erf(void) {
    cpu_gelu_erf_fn f = cpu_kernels_gelu_erf_isa(cpu_kernels_isa());
    return f ? f : cpu_gelu_erf_scalar;
}

/* GELU's sigmoid forms (kernels_impl.h): the scalar kernel is the double
 * formula of unary_rows below, so the exact backend, other CPUs and wasm
 * get the same bits from either. */
static double gelu_sig_ref(double y, int kind) {
    return kind == CPU_GELU_TANH ? 0.5 * y * (1.0 + tanh(0.79788456080286535588 * (y + 0.044715 * y * y * y)))
                                 : y / (1.0 + exp(-1.702 * y));
}

void cpu_gelu_sig_scalar(float *out, const float *in, int64_t n, int kind) {
    for (int64_t i = 0; i < n; i++) out[i] = (float)gelu_sig_ref(in[i], kind);
}

cpu_gelu_sig_fn cpu_kernels_gelu_sig_isa(const char *isa) {
    if (strcmp(isa, "scalar") == 0) return cpu_gelu_sig_scalar;
#if defined(WGML_CPU_X86)
    if (!cpu_kernels_get_isa(isa, WGML_F32)) return NULL;
    if (strcmp(isa, "avx512") == 0) return cpu_gelu_sig_avx512;
    if (strcmp(isa, "avx2") == 0) return cpu_gelu_sig_avx2;
#endif
    return NULL;
}

cpu_gelu_sig_fn cpu_kernels_gelu_sig(void) {
    cpu_gelu_sig_fn f = cpu_kernels_gelu_sig_isa(cpu_kernels_isa());
    return f ? f : cpu_gelu_sig_scalar;
}

typedef struct {
    float *out;
    const float *x, *v;
    int64_t n;
    wgml_unary_kind kind;
    double a, b;
    cpu_snake_fn snake; /* Snake's SIMD kernel (float); NULL: the double code below */
    cpu_gelu_erf_fn gelu_erf; /* GELU_ERF in float; NULL (exact mode): libm's erf in double */
    cpu_gelu_sig_fn gelu_sig; /* GELU and GELU_QUICK in float SIMD; NULL (exact mode, or no SIMD): double */
} unary_task;

/* Rows [lo, hi): one switch per chunk, a plain loop per kind. */
static void unary_rows(void *p, int64_t lo, int64_t hi, int ith) {
    (void)ith;
    const unary_task *t = p;
    const int64_t n = t->n;
    const float *v = t->v;
    const double a = t->a, b = t->b;
    /* y: x[r][c] in double; v[c]: the column's parameter */
#define EACH(expr)                                                                                                     \
    for (int64_t r = lo; r < hi; r++) {                                                                                \
        const float *x = t->x + r * n;                                                                                 \
        float *o = t->out + r * n;                                                                                     \
        for (int64_t c = 0; c < n; c++) {                                                                              \
            const double y = x[c];                                                                                     \
            o[c] = (float)(expr);                                                                                      \
        }                                                                                                              \
    }                                                                                                                  \
    break
    switch (t->kind) {
    case WGML_UNARY_GELU:
        if (t->gelu_sig) {
            t->gelu_sig(t->out + lo * n, t->x + lo * n, (hi - lo) * n, CPU_GELU_TANH);
            break;
        }
        EACH(gelu_sig_ref(y, CPU_GELU_TANH));
    case WGML_UNARY_GELU_ERF:
        if (t->gelu_erf) {
            t->gelu_erf(t->out + lo * n, t->x + lo * n, (hi - lo) * n);
            break;
        }
        EACH(0.5 * y * (1.0 + erf(y * 0.70710678118654752440)));
    case WGML_UNARY_TANH: EACH(tanh(y));
    case WGML_UNARY_SCALE: EACH(a * y + b);
    case WGML_UNARY_SIGMOID: EACH(1.0 / (1.0 + exp(-y)));
    case WGML_UNARY_LEAKY_RELU: EACH(y > 0 ? y : a * y);
    case WGML_UNARY_SIN: EACH(sin(y));
    case WGML_UNARY_EXP: EACH(exp(y));
    case WGML_UNARY_SNAKE:
        if (t->snake) {
            t->snake(t->out + lo * n, t->x + lo * n, v, n, hi - lo);
            break;
        }
        EACH(y + sin(v[c] * y) * sin(v[c] * y) / v[c]);
    case WGML_UNARY_GELU_QUICK:
        if (t->gelu_sig) {
            t->gelu_sig(t->out + lo * n, t->x + lo * n, (hi - lo) * n, CPU_GELU_QUICK);
            break;
        }
        EACH(gelu_sig_ref(y, CPU_GELU_QUICK));
    case WGML_UNARY_COUNT: break;
    }
#undef EACH
}

void cpu_op_unary(cpu_backend *cb, const wgml_unary_args *a) {
    if (!cpu_check(cb, "unary", a->out) || !cpu_check(cb, "unary", a->x) || (a->v && !cpu_check(cb, "unary", a->v)))
        return;
    /* Snake, a hundred million sines an utterance in Kokoro, in SIMD float unless exact; GELU (erf),
     * a fifth of Whisper's encoder in libm's double erf, in float unless exact; QuickGELU and tanh
     * GELU (CLIP's and SigLIP's MLPs) in SIMD float unless exact */
    cpu_snake_fn snake = cb->exact ? NULL : cpu_kernels_snake();
    cpu_gelu_sig_fn gelu_sig = cb->exact ? NULL : cpu_kernels_gelu_sig();
    unary_task t = {cpu_ptr(a->out), cpu_ptr(a->x), vec(a->v), a->x->ne[0], a->kind, a->a, a->b,
                    snake == cpu_snake_scalar ? NULL : snake, cb->exact ? NULL : cpu_kernels_gelu_erf(),
                    gelu_sig == cpu_gelu_sig_scalar ? NULL : gelu_sig};
    wgml_threadpool_run_range(cb->pool, unary_rows, &t, wgml_tensor_nrows(a->x), chunk_rows(t.n));
}

/* ---- add's and mul's rows ---- */

void cpu_binary_rows(float *out, const float *a, const float *b, int64_t n, int64_t rows, int64_t b_rows, int mul) {
    for (int64_t r = 0; r < rows; r++) {
        const float *x = a + r * n, *y = b + (b_rows == 1 ? 0 : r * n);
        float *o = out + r * n;
        if (mul)
            for (int64_t i = 0; i < n; i++) o[i] = x[i] * y[i];
        else
            for (int64_t i = 0; i < n; i++) o[i] = x[i] + y[i];
    }
}

void cpu_op_mul(cpu_backend *cb, const wgml_mul_args *a) {
    if (!cpu_check(cb, "mul", a->out) || !cpu_check(cb, "mul", a->a) || !cpu_check(cb, "mul", a->b)) return;
    cpu_binary_rows(cpu_ptr(a->out), cpu_ptr(a->a), cpu_ptr(a->b), a->a->ne[0], wgml_tensor_nrows(a->a),
                    wgml_tensor_nrows(a->b), 1);
}

/* ---- pool ---- */

void cpu_op_pool(cpu_backend *cb, const wgml_pool_args *a) {
    if (!cpu_check(cb, "pool", a->out) || !cpu_check(cb, "pool", a->x) || !cpu_check(cb, "pool", a->seq)) return;
    const int32_t *seq = cpu_ptr(a->seq);
    const int64_t n_seq = wgml_tensor_nrows(a->out), d = a->x->ne[0], rows = wgml_tensor_nrows(a->x);
    for (int64_t s = 0; s <= n_seq; s++) {
        if ((s == 0 && seq[0] != 0) || (s > 0 && seq[s] <= seq[s - 1]) || (s == n_seq && seq[s] != rows)) {
            cpu_error(cb, WGML_ERR_INVALID_ARGUMENT,
                      "pool: sequence table entry %lld is %d (offsets start at 0, increase and end at %lld rows)",
                      (long long)s, seq[s], (long long)rows);
            return;
        }
    }
    const float *x = cpu_ptr(a->x);
    float *out = cpu_ptr(a->out);
    for (int64_t s = 0; s < n_seq; s++) {
        const int64_t r0 = seq[s], r1 = seq[s + 1];
        float *o = out + s * d;
        if (a->mode != WGML_POOL_MEAN) {
            const float *src = x + (a->mode == WGML_POOL_FIRST ? r0 : r1 - 1) * d;
            for (int64_t c = 0; c < d; c++) o[c] = src[c];
            continue;
        }
        for (int64_t c = 0; c < d; c++) {
            double sum = 0;
            for (int64_t r = r0; r < r1; r++) sum += x[r * d + c];
            o[c] = (float)(sum / (double)(r1 - r0));
        }
    }
}
