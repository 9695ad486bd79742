/*
 * cpu_ops.c - the CPU backend's ops (all but attention, see cpu_attention.c),
 * and its one entry point, cpu_run, over the op list (ops.h).
 *
 * cpu_run checks an op's arguments (wgml_op_validate), times it when
 * profiling, and calls cpu_op_<name>; each of those checks that its views lie
 * in their buffers, then runs on the thread pool. matmul is the one
 * that matters for speed: it converts the activations once into the weight
 * type's activation format (e.g. Q8_0 blocks for Q4_0 weights, see
 * kernels.h), then shares the weight rows out across threads; every weight row is
 * read once per step and dotted with all of the step's token rows while it
 * is hot in cache.
 */
#include <float.h>
#include <math.h>
#include <string.h>

#include "backend/cpu/cpu_internal.h"
#include "backend/cpu/cpu_gemm.h"
#include "backend/cpu/cpu_qgemm.h"
#include "backend/cpu/kernels.h"

/* Each view of an op lies in its buffer (cpu_check records the error). */
static int views_ok(cpu_backend *cb, const char *op, int n, const wgml_tensor *const *t) {
    for (int i = 0; i < n; i++)
        if (!cpu_check(cb, op, t[i])) return 0;
    return 1;
}
#define VIEWS_OK(cb, op, ...)                                                                                          \
    views_ok(cb, op, (int)(sizeof((const wgml_tensor *const[]){__VA_ARGS__}) / sizeof(const wgml_tensor *)),          \
             (const wgml_tensor *const[]){__VA_ARGS__})

static void split(int64_t n, int ith, int nth, int64_t *lo, int64_t *hi) {
    int64_t per = (n + nth - 1) / nth;
    *lo = per * ith;
    *hi = *lo + per < n ? *lo + per : n;
    if (*lo > n) *lo = n;
}

/* ---- get_rows ---- */

typedef struct {
    float *out;
    const uint8_t *table;
    size_t row_bytes;
    const int32_t *ids;
    int64_t n, cols;
    const cpu_type_kernels *k;
} rows_task;

static void rows_run(void *p, int ith, int nth) {
    rows_task *t = p;
    int64_t lo, hi;
    split(t->n, ith, nth, &lo, &hi);
    for (int64_t i = lo; i < hi; i++)
        t->k->to_float(t->table + (size_t)t->ids[i] * t->row_bytes, t->out + i * t->cols, t->cols);
}

const cpu_type_kernels *cpu_weight_kernels(const wgml_tensor *w) {
    return w->buf && w->buf->packed ? w->buf->packed : cpu_kernels_get(w->type);
}

void cpu_op_get_rows(cpu_backend *cb, const wgml_get_rows_args *a) {
    const wgml_tensor *out = a->out, *table = a->table, *ids = a->ids;
    if (!VIEWS_OK(cb, "get_rows", out, table, ids)) return;
    const cpu_type_kernels *k = cpu_weight_kernels(table);
    int64_t n = wgml_tensor_nrows(out), n_rows = wgml_tensor_nrows(table);
    if (!k) {
        cpu_error(cb, WGML_ERR_UNSUPPORTED, "get_rows: table '%s' has type %s, which the CPU backend cannot use",
                  table->name ? table->name : "?", wgml_dtype_name(table->type));
        return;
    }
    const int32_t *id = cpu_ptr(ids);
    for (int64_t i = 0; i < n; i++) {
        if (id[i] < 0 || id[i] >= n_rows) {
            cpu_error(cb, WGML_ERR_INVALID_ARGUMENT, "get_rows: id %d out of range [0, %lld)", id[i], (long long)n_rows);
            return;
        }
    }
    rows_task t = {cpu_ptr(out), cpu_ptr(table), wgml_row_size(table->type, table->ne[0]), id, n, out->ne[0], k};
    wgml_threadpool_run(cb->pool, rows_run, &t);
}

/* ---- rms_norm ---- */

float cpu_rms_scale(const float *x, int64_t n, float eps) {
    double ss = 0;
    for (int64_t i = 0; i < n; i++) ss += (double)x[i] * x[i];
    return (float)(1.0 / sqrt(ss / (double)n + eps));
}

/* out[r] = x[r] / rms(x[r]) * g for rows of n (rms_norm, and matmul's norm prologue). */
static void rms_norm_rows(float *out, const float *x, const float *g, int64_t n, int64_t rows, float eps) {
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * n;
        float *o = out + r * n;
        const float s = cpu_rms_scale(xr, n, eps);
        for (int64_t i = 0; i < n; i++) o[i] = xr[i] * s * g[i];
    }
}

void cpu_op_rms_norm(cpu_backend *cb, const wgml_rms_norm_args *a) {
    const wgml_tensor *out = a->out, *x = a->x, *w = a->w;
    float eps = a->eps;
    if (!VIEWS_OK(cb, "rms_norm", out, x, w)) return;
    int64_t n = x->ne[0], rows = wgml_tensor_nrows(x);
    rms_norm_rows(cpu_ptr(out), cpu_ptr(x), cpu_ptr(w), n, rows, eps);
}

/* ---- matmul ---- */

typedef struct {
    const cpu_type_kernels *k;
    const uint8_t *w;
    size_t w_row;
    const uint8_t *act; /* prepared activations, n rows */
    size_t act_row;
    const float *bias;
    float *out;
    int64_t M;
} mm_part;

/* Exact mode: the weight row is dequantized to f32 and dotted with f32 x in
 * double precision; `k` is then only used for to_float. */
static float exact_dot(const cpu_type_kernels *k, int64_t n, const void *w, const float *x, float *tmp) {
    k->to_float(w, tmp, n);
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += (double)tmp[i] * x[i];
    return (float)s;
}

typedef struct {
    int n_parts;
    mm_part part[WGML_MATMUL_MAX];
    int64_t K, n, total_rows;
    wgml_epilogue epi;
    float *exact_tmp; /* exact mode: n_threads x K floats, else NULL */
    float *swiglu_up; /* tiled SwiGLU: the up products [n][M], else NULL */
    int no_tiles;     /* batch_invariant: never dot4x4 (its sums run in another order than dot's) */
} mm_task;

static float part_dot(const mm_task *t, const mm_part *p, const uint8_t *w, int64_t i, int ith) {
    if (t->exact_tmp)
        return exact_dot(p->k, t->K, w, (const float *)(p->act + (size_t)i * p->act_row), t->exact_tmp + ith * t->K);
    return p->k->dot(t->K, w, p->act + (size_t)i * p->act_row);
}

/* Token rows per part_dots call (its callers' buffers). */
#define MM_DOT_ROWS 16

/* o[j] = weight row w . token row i0 + j for j < cnt (<= MM_DOT_ROWS): the
 * type's dot_rows where it has one, which reads and decodes each weight
 * block once for several rows and gives each row the bits `dot` gives it
 * (kernels.h), so a row's result never depends on the rows beside it. */
static void part_dots(const mm_task *t, const mm_part *p, const uint8_t *w, int64_t i0, int64_t cnt, int ith,
                      float *o) {
    if (cnt > 1 && p->k->dot_rows && !t->exact_tmp) {
        p->k->dot_rows(t->K, w, p->act + (size_t)i0 * p->act_row, p->act_row, (int)cnt, o);
        return;
    }
    for (int64_t j = 0; j < cnt; j++) o[j] = part_dot(t, p, w, i0 + j, ith);
}

static float silu(float x) { return x / (1.0f + expf(-x)); }

/* Weight rows per chunk of work: a multiple of 4 (the prompt tiles), and
 * small enough (16 rows of a 2048-wide Q4_0 matrix are 18 KiB) that a thread
 * left idle by a slower one finds work until the end of the matmul. */
#define MM_CHUNK_ROWS 16

/* Output rows [lo, hi) of part pt for all tokens into res [n][M] (adding to
 * what is there with `add`, plus bias[r] if given): 4 x 4 tiles with the
 * type's dot4x4 kernel where it has one (prompts, unless batch-invariant),
 * elsewhere each weight row with up to MM_DOT_ROWS token rows at a time. */
static void part_rows(const mm_task *t, const mm_part *pt, int64_t lo, int64_t hi, int ith, float *res, int add,
                      const float *bias) {
    int tiled = pt->k->dot4x4 && !t->exact_tmp && !t->no_tiles && t->n >= 4;
    int64_t r = lo;
#define PUT(i, row, v)                                                              \
    do {                                                                            \
        float *o_ = &res[(i) * pt->M + (row)];                                      \
        float v_ = (v) + (bias ? bias[row] : 0.0f);                                 \
        *o_ = add ? *o_ + v_ : v_;                                                  \
    } while (0)
    if (tiled) {
        for (; r + 4 <= hi; r += 4) {
            const uint8_t *w = pt->w + (size_t)r * pt->w_row;
            int64_t i = 0;
            for (; i + 4 <= t->n; i += 4) {
                float o[16];
                pt->k->dot4x4(t->K, w, pt->w_row, pt->act + (size_t)i * pt->act_row, pt->act_row, o);
                for (int a = 0; a < 4; a++)
                    for (int b = 0; b < 4; b++) PUT(i + b, r + a, o[4 * a + b]);
            }
            if (i < t->n)
                for (int a = 0; a < 4; a++) {
                    float o[4];
                    part_dots(t, pt, w + (size_t)a * pt->w_row, i, t->n - i, ith, o);
                    for (int64_t j = i; j < t->n; j++) PUT(j, r + a, o[j - i]);
                }
        }
    }
    if (t->n == 1) /* decode of one sequence */
        for (; r < hi; r++) PUT(0, r, part_dot(t, pt, pt->w + (size_t)r * pt->w_row, 0, ith));
    for (; r < hi; r++)
        for (int64_t i = 0; i < t->n; i += MM_DOT_ROWS) {
            const int64_t cnt = t->n - i < MM_DOT_ROWS ? t->n - i : MM_DOT_ROWS;
            float o[MM_DOT_ROWS];
            part_dots(t, pt, pt->w + (size_t)r * pt->w_row, i, cnt, ith, o);
            for (int64_t j = 0; j < cnt; j++) PUT(i + j, r, o[j]);
        }
#undef PUT
}

/* Weight rows [lo, hi) of the matmul (a chunk of wgml_threadpool_run_range,
 * see MM_CHUNK_ROWS), on thread ith. SwiGLU: rows of the gate and up
 * weights, combined into the gate's output; otherwise the rows of all parts
 * form one range [0, total_rows). */
static void mm_rows(void *p, int64_t lo, int64_t hi, int ith) {
    mm_task *t = p;
    if (t->epi == WGML_EPI_SWIGLU) {
        const mm_part *g = &t->part[0], *u = &t->part[1];
        if (t->swiglu_up) { /* tiled: both products into scratch, then combine */
            part_rows(t, g, lo, hi, ith, g->out, 0, NULL);
            part_rows(t, u, lo, hi, ith, t->swiglu_up, 0, NULL);
            const cpu_swiglu_fn fn = cpu_kernels_swiglu();
            for (int64_t i = 0; i < t->n; i++)
                fn(g->out + i * g->M + lo, t->swiglu_up + i * g->M + lo, g->bias ? g->bias + lo : NULL,
                   u->bias ? u->bias + lo : NULL, hi - lo);
            return;
        }
        for (int64_t r = lo; r < hi; r++) {
            const uint8_t *wg = g->w + (size_t)r * g->w_row, *wu = u->w + (size_t)r * u->w_row;
            for (int64_t i = 0; i < t->n; i += MM_DOT_ROWS) {
                const int64_t cnt = t->n - i < MM_DOT_ROWS ? t->n - i : MM_DOT_ROWS;
                float a[MM_DOT_ROWS], b[MM_DOT_ROWS];
                part_dots(t, g, wg, i, cnt, ith, a);
                part_dots(t, u, wu, i, cnt, ith, b);
                for (int64_t j = 0; j < cnt; j++) {
                    if (g->bias) a[j] += g->bias[r];
                    if (u->bias) b[j] += u->bias[r];
                    g->out[(i + j) * g->M + r] = silu(a[j]) * b[j];
                }
            }
        }
        return;
    }
    int64_t base = 0;
    for (int p_i = 0; p_i < t->n_parts; p_i++) {
        const mm_part *pt = &t->part[p_i];
        int64_t a = lo > base ? lo - base : 0, b = hi - base < pt->M ? hi - base : pt->M;
        if (a < b) part_rows(t, pt, a, b, ith, pt->out, t->epi == WGML_EPI_ADD, pt->bias);
        base += pt->M;
    }
}

typedef struct {
    const cpu_type_kernels *k;
    const float *x;
    uint8_t *dst;
    size_t dst_row;
    int64_t K, pieces; /* pieces of CPU_ACT_PIECE elements per row */
} prep_task;

/* Activation pieces [lo, hi) (piece j of row i is item i * pieces + j), so
 * that a single token's row, as in decode, is prepared by all threads. */
static void prep_pieces(void *p, int64_t lo, int64_t hi, int ith) {
    (void)ith;
    prep_task *t = p;
    for (int64_t it = lo; it < hi; it++) {
        int64_t i = it / t->pieces, a = it % t->pieces * CPU_ACT_PIECE;
        int64_t len = t->K - a < CPU_ACT_PIECE ? t->K - a : CPU_ACT_PIECE;
        t->k->prepare(t->x + i * t->K + a, t->dst + (size_t)i * t->dst_row + cpu_act_row_size(t->k->act_type, a), len);
    }
}

static int mm_check(cpu_backend *cb, const wgml_matmul_args *mm) {
    if (!cpu_check(cb, "matmul", mm->x) || (mm->norm && !cpu_check(cb, "matmul", mm->norm)))
        return 0;
    for (int i = 0; i < mm->n_w; i++) {
        if (!cpu_check(cb, "matmul", mm->w[i]) || !cpu_check(cb, "matmul", mm->out[mm->epilogue == WGML_EPI_SWIGLU ? 0 : i]) ||
            (mm->bias[i] && !cpu_check(cb, "matmul", mm->bias[i])))
            return 0;
        if (!cpu_weight_kernels(mm->w[i])) {
            cpu_error(cb, WGML_ERR_UNSUPPORTED, "matmul: weight '%s' has type %s, which the CPU backend cannot use",
                      mm->w[i]->name ? mm->w[i]->name : "?", wgml_dtype_name(mm->w[i]->type));
            return 0;
        }
    }
    return 1;
}

static int mm_bf16(const wgml_matmul_args *mm, uint32_t type);
static int mm_use_gemm(const cpu_backend *cb, const wgml_matmul_args *mm, int64_t n);

/* 2 x rows x K x (the weights' rows): a matmul's arithmetic (a convolution's rows are its outputs'). */
static double mm_flop(const wgml_matmul_args *mm) {
    const int64_t rows = mm->conv.kernel ? wgml_conv1d_rows(&mm->conv, wgml_tensor_nrows(mm->x)) : wgml_tensor_nrows(mm->x);
    double m = 0;
    for (int i = 0; i < mm->n_w; i++) m += (double)wgml_tensor_nrows(mm->w[i]);
    return 2.0 * (double)rows * (double)mm->w[0]->ne[0] * m;
}

/* The profile's name for a matmul: by weight type, and "gemv" for one token
 * row (decode) or "gemm" for several (prompts, batches), "gemm bf16 pairs"
 * for the blocked GEMM's bf16 path, so that a table shows which kernels the
 * time went to. */
static const char *mm_profile_name(const cpu_backend *cb, const wgml_matmul_args *mm) {
#define MM_NAMES(t) {"matmul " t " gemv", "matmul " t " gemm", "matmul " t " gemm bf16 pairs"}
    static const char *const names[][3] = {MM_NAMES("f32"),  MM_NAMES("f16"),  MM_NAMES("bf16"), MM_NAMES("q4_0"),
                                           MM_NAMES("q4_1"), MM_NAMES("q5_0"), MM_NAMES("q5_1"), MM_NAMES("q8_0"),
                                           MM_NAMES("q2_k"), MM_NAMES("q3_k"), MM_NAMES("q4_k"), MM_NAMES("q5_k"),
                                           MM_NAMES("q6_k"), MM_NAMES("mixed"), MM_NAMES("other")};
#undef MM_NAMES
    static const uint32_t types[] = {WGML_F32,  WGML_F16,  WGML_BF16, WGML_Q4_0, WGML_Q4_1, WGML_Q5_0, WGML_Q5_1,
                                     WGML_Q8_0, WGML_Q2_K, WGML_Q3_K, WGML_Q4_K, WGML_Q5_K, WGML_Q6_K};
    const int64_t rows = mm->conv.kernel ? wgml_conv1d_rows(&mm->conv, wgml_tensor_nrows(mm->x)) : wgml_tensor_nrows(mm->x);
    const int many = rows > 1;
    const size_t nt = sizeof types / sizeof types[0];
    size_t i = 0;
    while (i < nt && types[i] != mm->w[0]->type) i++;
    if (i == nt) i = nt + 1; /* other */
    for (int j = 1; j < mm->n_w; j++)
        if (mm->w[j]->type != mm->w[0]->type) i = nt; /* mixed */
    const int pairs = many && !cb->exact && mm_use_gemm(cb, mm, rows) && mm_bf16(mm, mm->w[0]->type);
    return names[i][many + pairs];
}

/* Rows from which a matmul of float weights is a blocked GEMM (cpu_gemm.c):
 * below, the weight is read fewer times than the GEMM's packing costs. */
#define MM_GEMM_MIN_ROWS 32

/* Whether the matmul goes through cpu_gemm: many rows, weights whose
 * activations stay f32 (F32, F16, BF16), or any type when the caller asks
 * for f32 activations (f32_act: dequantized into the panels, at any row
 * count), no SwiGLU pairing, a SIMD micro-kernel, and not the
 * double-precision reference mode. */
static int mm_use_gemm(const cpu_backend *cb, const wgml_matmul_args *mm, int64_t n) {
    if (cb->exact || mm->epilogue == WGML_EPI_SWIGLU) return 0;
    if (mm->batch_invariant && !mm->f32_act) return 0;
    int quantized = 0;
    for (int i = 0; i < mm->n_w; i++) {
        if (cpu_weight_kernels(mm->w[i])->act_type == WGML_F32) continue;
        if (!mm->f32_act && !mm->bf16_act) return 0;
        quantized = 1;
    }
    /* Without a SIMD micro-kernel (WebAssembly, non-x86, WGML_CPU_ISA=scalar)
     * the GEMM is slower than the dot products, but those round the
     * activations to 8 bits: f32_act of quantized weights still needs it. */
    if (!cpu_kernels_gemm_fast()) return quantized && mm->f32_act;
    return n >= MM_GEMM_MIN_ROWS || quantized;
}

/* Whether a GEMM goes as bf16 pairs: where the CPU has them, for BF16
 * weights whose caller did not ask for f32 activations, and for any weight
 * whose caller accepts bf16 (bf16_act). */
static int mm_bf16(const wgml_matmul_args *mm, uint32_t type) {
    /* the caller's leave first: only products that may round ask for the (measured) choice */
    return ((type == WGML_BF16 && !mm->f32_act) || mm->bf16_act) && cpu_gemm_bf16_ok();
}

/* n rows of K by the blocked GEMM. sig: a convolution's padded signal
 * (mm->conv; K is then the weight's row), else NULL. */
static void mm_gemm(cpu_backend *cb, const wgml_matmul_args *mm, int64_t n, int64_t K, const float *sig) {
    size_t norm_bytes = mm->norm ? ((size_t)(n * K) * sizeof(float) + 63) & ~(size_t)63 : 0, pack = 0;
    for (int i = 0; i < mm->n_w; i++) {
        size_t b = cpu_gemm_scratch(wgml_tensor_nrows(mm->w[i]), K);
        pack = b > pack ? b : pack;
    }
    pack = (pack + 63) & ~(size_t)63;
    uint8_t *scratch = cpu_scratch(cb, norm_bytes + pack + (size_t)cb->n_threads * cpu_gemm_tmp_floats(K) * sizeof(float));
    if (!scratch) return;
    const float *x = sig ? sig : cpu_ptr(mm->x);
    if (mm->norm) {
        rms_norm_rows((float *)scratch, x, cpu_ptr(mm->norm), K, n, mm->eps);
        x = (const float *)scratch;
    }
    for (int i = 0; i < mm->n_w; i++) {
        cpu_gemm_args a = {.x = x, .n = n, .K = K, .M = wgml_tensor_nrows(mm->w[i]), .w = cpu_ptr(mm->w[i]),
                           .w_row = wgml_row_size(mm->w[i]->type, K), .k = cpu_weight_kernels(mm->w[i]),
                           .type = mm->w[i]->type, .bf16 = mm_bf16(mm, mm->w[i]->type),
                           .conv_kernel = sig ? mm->conv.kernel : 0, .conv_stride = mm->conv.stride,
                           .conv_dilation = mm->conv.dilation, .conv_c = mm->x->ne[0],
                           .bias = mm->bias[i] ? cpu_ptr(mm->bias[i]) : NULL, .out = cpu_ptr(mm->out[i]),
                           .add = mm->epilogue == WGML_EPI_ADD};
        cpu_gemm(cb->pool, cb->n_threads, &a, scratch + norm_bytes, (float *)(scratch + norm_bytes + pack));
    }
}

/* Rows from which a matmul of quantized weights is an int8 GEMM (cpu_qgemm.c).
 * Its results differ from the dot products' in f32 summation order, so a row
 * must get the same path alone as in any batch: a text embedded alone (two
 * tokens at least) or with others, a prompt in one step or several. Only one
 * row (decode) takes the dot products. (From 2 to 7 rows the GEMM's unpacking
 * costs more than the dot products' tiles would: 2-2.5x of a few ms.) */
#define MM_QGEMM_MIN_ROWS 2

/* Whether the matmul goes through cpu_qgemm: many rows, every weight of a
 * type it takes, activations the caller lets us round to 8 bits (not f32_act
 * or bf16_act, not batch-invariant: a row's result would then depend on the
 * rows beside it only through which path the call takes, which
 * batch_invariant forbids), and not the reference mode. */
static int mm_use_qgemm(const cpu_backend *cb, const wgml_matmul_args *mm, int64_t n) {
    if (cb->exact || mm->batch_invariant || mm->f32_act || mm->bf16_act || mm->conv.kernel || n < MM_QGEMM_MIN_ROWS)
        return 0;
    for (int i = 0; i < mm->n_w; i++)
        if (!cpu_qgemm_ok(mm->w[i]->type)) return 0;
    return 1;
}

typedef struct {
    float *g;
    const float *u, *bg, *bu;
    int64_t M;
} swiglu_task;

static void swiglu_rows(void *p, int64_t lo, int64_t hi, int ith) {
    (void)ith;
    const swiglu_task *t = p;
    const cpu_swiglu_fn fn = cpu_kernels_swiglu();
    for (int64_t i = lo; i < hi; i++) fn(t->g + i * t->M, t->u + i * t->M, t->bg, t->bu, t->M);
}

/* n rows of K by the int8 GEMM: the activations quantized once for every
 * weight; SwiGLU's up product into scratch, then combined with the gate's. */
static void mm_qgemm(cpu_backend *cb, const wgml_matmul_args *mm, int64_t n, int64_t K) {
    const int swiglu = mm->epilogue == WGML_EPI_SWIGLU;
    const size_t norm_bytes = mm->norm ? ((size_t)(n * K) * sizeof(float) + 63) & ~(size_t)63 : 0;
    const size_t act_bytes = (cpu_qgemm_act_bytes(n, K) + 63) & ~(size_t)63;
    int kinds[2] = {0, 0}; /* which activation kinds the weights want */
    for (int i = 0; i < mm->n_w; i++) kinds[cpu_qgemm_act_kind(mm->w[i]->type)] = 1;
    const size_t up_bytes = swiglu ? ((size_t)(n * wgml_tensor_nrows(mm->w[1])) * sizeof(float) + 63) & ~(size_t)63 : 0;
    uint8_t *scratch = cpu_scratch(cb, norm_bytes + 2 * act_bytes + up_bytes + cpu_qgemm_scratch(K, cb->n_threads));
    if (!scratch) return;
    const float *x = cpu_ptr(mm->x);
    if (mm->norm) {
        rms_norm_rows((float *)scratch, x, cpu_ptr(mm->norm), K, n, mm->eps);
        x = (const float *)scratch;
    }
    uint8_t *act[2] = {scratch + norm_bytes, scratch + norm_bytes + act_bytes};
    float *up = (float *)(act[1] + act_bytes);
    for (int kind = 0; kind < 2; kind++)
        if (kinds[kind]) cpu_qgemm_prepare(cb->pool, x, n, K, kind, act[kind]);
    for (int i = 0; i < mm->n_w; i++) {
        cpu_gemm_args a = {.n = n, .K = K, .M = wgml_tensor_nrows(mm->w[i]), .w = cpu_ptr(mm->w[i]),
                           .w_row = wgml_row_size(mm->w[i]->type, K), .k = cpu_weight_kernels(mm->w[i]),
                           .type = mm->w[i]->type, .bias = swiglu || !mm->bias[i] ? NULL : cpu_ptr(mm->bias[i]),
                           .out = swiglu && i == 1 ? up : cpu_ptr(mm->out[swiglu ? 0 : i]),
                           .add = mm->epilogue == WGML_EPI_ADD};
        cpu_qgemm(cb->pool, cb->n_threads, &a, act[cpu_qgemm_act_kind(mm->w[i]->type)],
                  (uint8_t *)up + up_bytes);
    }
    if (swiglu) {
        swiglu_task st = {cpu_ptr(mm->out[0]), up, mm->bias[0] ? cpu_ptr(mm->bias[0]) : NULL,
                          mm->bias[1] ? cpu_ptr(mm->bias[1]) : NULL, wgml_tensor_nrows(mm->w[0])};
        wgml_threadpool_run_range(cb->pool, swiglu_rows, &st, n, 1);
    }
}

/* A convolution (mm->conv). The blocked GEMM reads each tap's rows straight
 * from the signal, copied with its zero pads into the unfold scratch when it
 * has pads: no unfolding is stored (for Kokoro's vocoder it would be up to
 * 11x the signal). Elsewhere (the exact mode, CPUs without the GEMM's
 * micro-kernels) the unfolding is written there, as im2col does, and
 * multiplied as any input. */
static void mm_conv(cpu_backend *cb, const wgml_matmul_args *mm) {
    const wgml_conv1d *c = &mm->conv;
    const int64_t T = wgml_tensor_nrows(mm->x), C = mm->x->ne[0], W = mm->w[0]->ne[0], Ct = W / c->kernel;
    const int64_t n = wgml_conv1d_rows(c, T);
    if (mm_use_gemm(cb, mm, n)) {
        const float *sig = cpu_ptr(mm->x);
        if (c->pad_l || c->pad_r) {
            float *p = cpu_scratch_unfold(cb, (size_t)((T + c->pad_l + c->pad_r) * C) * sizeof(float));
            if (!p) return;
            memset(p, 0, (size_t)(c->pad_l * C) * sizeof(float));
            memcpy(p + c->pad_l * C, sig, (size_t)(T * C) * sizeof(float));
            memset(p + (c->pad_l + T) * C, 0, (size_t)(c->pad_r * C) * sizeof(float));
            sig = p;
        }
        mm_gemm(cb, mm, n, W, sig);
        return;
    }
    float *col = cpu_scratch_unfold(cb, (size_t)(n * W) * sizeof(float));
    if (!col) return;
    wgml_buffer b = {.data = (uint8_t *)col, .size = (size_t)(n * W) * sizeof(float)};
    wgml_tensor u = {.type = WGML_F32, .ne = {W, n, 1, 1}, .buf = &b, .name = "unfolding"};
    cpu_op_im2col(cb, &(wgml_im2col_args){.out = &u, .x = mm->x, .kernel = c->kernel, .stride = c->stride,
                                          .dilation = c->dilation, .pad_l = c->pad_l, .pad_r = c->pad_r});
    if (Ct > C)
        cpu_op_im2col(cb, &(wgml_im2col_args){.out = &u, .kernel = c->kernel, .c0 = (int)C, .zero_c = (int)(Ct - C)});
    wgml_matmul_args plain = *mm;
    plain.x = &u, plain.conv = (wgml_conv1d){0};
    cpu_op_matmul(cb, &plain);
}

void cpu_op_matmul(cpu_backend *cb, const wgml_matmul_args *mm) {
    if (!mm_check(cb, mm)) return;
    if (mm->conv.kernel) {
        mm_conv(cb, mm);
        return;
    }
    int64_t K = mm->x->ne[0], n = wgml_tensor_nrows(mm->x);
    if (mm_use_gemm(cb, mm, n)) {
        mm_gemm(cb, mm, n, K, NULL);
        return;
    }
    if (mm_use_qgemm(cb, mm, n)) {
        mm_qgemm(cb, mm, n, K);
        return;
    }

    /* scratch: [normalized x][prepared activations per weight] */
    size_t norm_bytes = mm->norm ? (size_t)(n * K) * sizeof(float) : 0;
    size_t act_bytes[WGML_MATMUL_MAX] = {0};
    size_t total = (norm_bytes + 63) & ~(size_t)63;
    const cpu_type_kernels *k[WGML_MATMUL_MAX];
    for (int i = 0; i < mm->n_w; i++) {
        k[i] = cpu_weight_kernels(mm->w[i]);
        if (k[i]->act_type != WGML_F32 && !cb->exact)
            act_bytes[i] = ((cpu_act_row_size(k[i]->act_type, K) * (size_t)n) + 63) & ~(size_t)63;
        total += act_bytes[i];
    }
    size_t exact_off = total;
    if (cb->exact) total += (size_t)cb->n_threads * (size_t)K * sizeof(float);
    int swiglu_tiled = mm->epilogue == WGML_EPI_SWIGLU && !cb->exact && !mm->batch_invariant && n >= 4 &&
                       k[0]->dot4x4 && k[1]->dot4x4;
    size_t up_off = total;
    if (swiglu_tiled) total += (size_t)(n * wgml_tensor_nrows(mm->w[1])) * sizeof(float);
    uint8_t *scratch = cpu_scratch(cb, total);
    if (!scratch) return;

    const float *x = cpu_ptr(mm->x);
    if (mm->norm) {
        rms_norm_rows((float *)scratch, x, cpu_ptr(mm->norm), K, n, mm->eps);
        x = (const float *)scratch;
    }

    mm_task t = {.n_parts = mm->n_w, .K = K, .n = n, .epi = mm->epilogue,
                 .exact_tmp = cb->exact ? (float *)(scratch + exact_off) : NULL,
                 .swiglu_up = swiglu_tiled ? (float *)(scratch + up_off) : NULL,
                 .no_tiles = mm->batch_invariant};
    uint8_t *act = scratch + ((norm_bytes + 63) & ~(size_t)63);
    for (int i = 0; i < mm->n_w; i++) {
        mm_part *p = &t.part[i];
        p->k = k[i];
        p->w = cpu_ptr(mm->w[i]);
        p->w_row = wgml_row_size(mm->w[i]->type, K);
        p->M = wgml_tensor_nrows(mm->w[i]);
        p->bias = mm->bias[i] ? cpu_ptr(mm->bias[i]) : NULL;
        p->out = cpu_ptr(mm->out[mm->epilogue == WGML_EPI_SWIGLU ? 0 : i]);
        if (k[i]->act_type == WGML_F32 || cb->exact) {
            p->act = (const uint8_t *)x;
            p->act_row = (size_t)K * sizeof(float);
            continue;
        }
        /* reuse an earlier part's activations of the same format */
        int shared = -1;
        for (int j = 0; j < i; j++)
            if (k[j]->act_type == k[i]->act_type) shared = j;
        p->act_row = cpu_act_row_size(k[i]->act_type, K);
        if (shared >= 0) {
            p->act = t.part[shared].act;
        } else {
            prep_task pt = {k[i], x, act, p->act_row, K, (K + CPU_ACT_PIECE - 1) / CPU_ACT_PIECE};
            wgml_threadpool_run_range(cb->pool, prep_pieces, &pt, n * pt.pieces, 1);
            p->act = act;
            act += act_bytes[i];
        }
    }
    for (int i = 0; i < mm->n_w; i++) t.total_rows += t.part[i].M;
    int64_t rows = mm->epilogue == WGML_EPI_SWIGLU ? t.part[0].M : t.total_rows;
    wgml_threadpool_run_range(cb->pool, mm_rows, &t, rows, MM_CHUNK_ROWS);
}

/* ---- rope ---- */

/* Rotates the n_head heads of x by the angles cs (wgml_rope_angles). */
static void rope_apply(float *x, int n_head, int head_dim, const wgml_rope *r, const float *cs) {
    int half = r->n_rot / 2;
    for (int i = 0; i < half; i++) {
        float c = cs[2 * i], s = cs[2 * i + 1];
        for (int h = 0; h < n_head; h++) {
            float *v = x + (size_t)h * head_dim;
            int a = r->neox ? i : 2 * i, b = r->neox ? i + half : 2 * i + 1;
            float x0 = v[a], x1 = v[b];
            v[a] = x0 * c - x1 * s;
            v[b] = x0 * s + x1 * c;
        }
    }
}

void cpu_rope_row(float *x, int n_head, int head_dim, int pos, const wgml_rope *r, const float *ff) {
    float cs[2 * 512];
    wgml_rope_angles(r, ff, pos, cs);
    rope_apply(x, n_head, head_dim, r, cs);
}

typedef struct {
    float *x, *x2; /* x2: a second tensor rotated by the same angles (attention's k), or NULL */
    int64_t row, row2;
    int n_head, n_head2, head_dim, pos;
    const wgml_rope *r;
    const float *ff;
} rope_task;

/* Rows [lo, hi), at positions pos + t: the angles once per row for both tensors. */
static void rope_rows(void *p, int64_t lo, int64_t hi, int ith) {
    (void)ith;
    const rope_task *t = p;
    float cs[2 * 512];
    for (int64_t i = lo; i < hi; i++) {
        wgml_rope_angles(t->r, t->ff, t->pos + (int)i, cs);
        rope_apply(t->x + i * t->row, t->n_head, t->head_dim, t->r, cs);
        if (t->x2) rope_apply(t->x2 + i * t->row2, t->n_head2, t->head_dim, t->r, cs);
    }
}

/* RoPE of the step's rows of x (n_head heads) and, when given, of x2 (n_head2
 * heads, the same rows and positions), shared by the pool; the bits of
 * cpu_rope_row. 0 after an error (recorded). */
int cpu_rope_pair(cpu_backend *cb, const wgml_tensor *x, int n_head, const wgml_tensor *x2, int n_head2, int head_dim,
                  const wgml_rope *r) {
    if (!cpu_check(cb, "rope", x) || (x2 && !cpu_check(cb, "rope", x2))) return 0;
    if (r->n_rot > 1024) {
        cpu_error(cb, WGML_ERR_UNSUPPORTED, "rope: %d rotated dims (at most 1024)", r->n_rot);
        return 0;
    }
    const float *ff = NULL;
    if (r->freq_factors) {
        if (!cpu_check(cb, "rope", r->freq_factors)) return 0;
        ff = cpu_ptr(r->freq_factors);
    }
    rope_task t = {cpu_ptr(x), x2 ? cpu_ptr(x2) : NULL, x->ne[0], x2 ? x2->ne[0] : 0, n_head, n_head2, head_dim,
                   cb->step.pos, r, ff};
    const int64_t rows = wgml_tensor_nrows(x);
    if (rows == 1)
        rope_rows(&t, 0, 1, 0);
    else
        wgml_threadpool_run_range(cb->pool, rope_rows, &t, rows, 1);
    return 1;
}

void cpu_op_rope(cpu_backend *cb, const wgml_rope_args *a) {
    cpu_rope_pair(cb, a->x, a->n_head, NULL, 0, a->head_dim, a->rope);
}

void cpu_op_softmax(cpu_backend *cb, const wgml_softmax_args *args) {
    const wgml_tensor *out = args->out, *x = args->x;
    float scale = args->scale;
    if (!VIEWS_OK(cb, "softmax", out, x)) return;
    int64_t n = x->ne[0], rows = wgml_tensor_nrows(x);
    for (int64_t r = 0; r < rows; r++) {
        const float *a = (const float *)cpu_ptr(x) + r * n;
        float *o = (float *)cpu_ptr(out) + r * n;
        float mx = -INFINITY;
        for (int64_t i = 0; i < n; i++) mx = fmaxf(mx, a[i] * scale);
        double sum = 0;
        for (int64_t i = 0; i < n; i++) {
            o[i] = expf(a[i] * scale - mx);
            sum += o[i];
        }
        float inv = (float)(1.0 / sum);
        for (int64_t i = 0; i < n; i++) o[i] *= inv;
    }
}

void cpu_op_swiglu(cpu_backend *cb, const wgml_swiglu_args *a) {
    const wgml_tensor *out = a->out, *gate = a->gate, *up = a->up;
    if (!VIEWS_OK(cb, "swiglu", out, gate, up)) return;
    int64_t n = wgml_tensor_nelements(out);
    float *o = cpu_ptr(out);
    const float *g = cpu_ptr(gate), *u = cpu_ptr(up);
    for (int64_t i = 0; i < n; i++) o[i] = silu(g[i]) * u[i];
}

void cpu_op_add(cpu_backend *cb, const wgml_add_args *a) {
    if (!VIEWS_OK(cb, "add", a->out, a->a, a->b)) return;
    int64_t n = wgml_tensor_nelements(a->out);
    float *o = cpu_ptr(a->out);
    const float *x = cpu_ptr(a->a), *y = cpu_ptr(a->b);
    if (wgml_tensor_nrows(a->b) != wgml_tensor_nrows(a->a)) { /* b: one row, added to every row (cpu_ops_nn.c) */
        cpu_binary_rows(o, x, y, a->a->ne[0], wgml_tensor_nrows(a->a), 1, 0);
        return;
    }
    for (int64_t i = 0; i < n; i++) o[i] = x[i] + y[i];
}

void cpu_op_argmax(cpu_backend *cb, const wgml_argmax_args *args) {
    const wgml_tensor *out = args->out, *x = args->x;
    if (!VIEWS_OK(cb, "argmax", out, x)) return;
    int64_t n = x->ne[0], rows = wgml_tensor_nrows(x);
    for (int64_t r = 0; r < rows; r++) {
        const float *a = (const float *)cpu_ptr(x) + r * n;
        int64_t best = -1;
        for (int64_t i = 0; i < n; i++)
            if (!isnan(a[i]) && (best < 0 || a[i] > a[best])) best = i;
        ((int32_t *)cpu_ptr(out))[r] = (int32_t)(best < 0 ? 0 : best);
    }
}

/* ---- the entry point ---- */

#define OP_TABLE_CTX        cpu_backend
#define OP_TABLE_IMPL(name) cpu_op_##name
#include "backend/op_table.inc"

void cpu_run(wgml_backend *be, wgml_op op, const void *args) {
    cpu_backend *cb = (cpu_backend *)be;
    wgml_error e;
    wgml_status st = wgml_op_validate(op, args, cb->step.pos, &e);
    if (st) {
        cpu_error(cb, st, "%s", e.message);
        return;
    }
    if (!cb->profiling) {
        op_table[op](cb, args);
        return;
    }
    double t0 = cpu_now_ms();
    op_table[op](cb, args);
    /* matmuls by weight type and path, so that a table shows which kernels the time went to,
     * with their arithmetic for the rate */
    cpu_profile_add(cb, op == WGML_OP_MATMUL ? mm_profile_name(cb, args) : wgml_op_names[op], cpu_now_ms() - t0,
                    op == WGML_OP_MATMUL ? mm_flop(args) : 0);
}

int cpu_supports(wgml_backend *be, wgml_op op, const void *args) { return wgml_op_weight_types_supported(be, op, args); }
