/*
 * cpu_ops_nn.c - the CPU backend's ops for encoders (ops.h): layer_norm,
 * l2_norm, unary, mul (and add's one-row case), pool.
 *
 * These are the reference every GPU backend is compared with, so they are
 * plain C that computes in double where rounding matters (sums, the
 * transcendental functions of unary; Snake alone has a SIMD float kernel,
 * kernels.h, outside the exact mode); the row ops and unary share their
 * rows out over the thread pool. Each op may run in place (out the very view
 * of its input; validate.c allows nothing else to overlap): every element is
 * read before it is written.
 */
#include <math.h>

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

typedef struct {
    float *out;
    const float *x, *v;
    int64_t n;
    wgml_unary_kind kind;
    double a, b;
    cpu_snake_fn snake; /* Snake's SIMD kernel (float); NULL: the double code below */
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
    case WGML_UNARY_GELU: EACH(0.5 * y * (1.0 + tanh(0.79788456080286535588 * (y + 0.044715 * y * y * y))));
    case WGML_UNARY_GELU_ERF: EACH(0.5 * y * (1.0 + erf(y * 0.70710678118654752440)));
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
    case WGML_UNARY_COUNT: break;
    }
#undef EACH
}

void cpu_op_unary(cpu_backend *cb, const wgml_unary_args *a) {
    if (!cpu_check(cb, "unary", a->out) || !cpu_check(cb, "unary", a->x) || (a->v && !cpu_check(cb, "unary", a->v)))
        return;
    /* Snake, a hundred million sines an utterance in Kokoro, in SIMD float unless exact */
    cpu_snake_fn snake = cb->exact ? NULL : cpu_kernels_snake();
    unary_task t = {cpu_ptr(a->out), cpu_ptr(a->x), vec(a->v), a->x->ne[0], a->kind, a->a, a->b,
                    snake == cpu_snake_scalar ? NULL : snake};
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
