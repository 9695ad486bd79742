/*
 * test_attn_decode.c - the CPU's decode mode of general attention (a few
 * query rows over long keys: cpu_attention.c att_decode, the kernel
 * cpu_attn_dec_job) against the exact reference backend (plain C in double),
 * over the shapes a decoder meets: 1..5 query rows, 1..1600 key rows, f32
 * and f16 key rows (cross-attention) and f16 or f32 caches (a window stored in a
 * cache, seen through kv_range), grouped heads, head sizes off the SIMD
 * width, sequence ids (beams), masks, causal steps without a cache, and
 * the split-K merge (few heads, many threads); with the SIMD kernel and the
 * scalar one.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cpu/kernels.h"
#include "core/dtype.h"
#include "core/quant.h"
#include "testutil.h"

static tu_rng rng = {4242};

typedef struct {
    int n_head, n_kv, hd, n, n_k;
    uint32_t cache; /* 0: none (k, v are the key rows); else the cache type (a window of n_k rows) */
    int causal;     /* no cache: causal over the step's rows (n_k == n) */
    int seq;        /* sequence ids: row r is sequence r, key row j sequence j % n */
    int mask;       /* 1: random additive mask with hidden entries; 2: and row 0 all hidden */
    int range;      /* 1: a window of key rows per query row */
    int threads;
    int kv16;       /* no cache: k and v in f16 (cross-attention keys kept in f16) */
} dcase;

typedef struct {
    float *q, *k, *v, *mask;
    uint8_t *kc, *vc;
    int32_t *pos, *range, *seq, *kv_seq;
    int n_keys, n_ctx;
} inputs;

static float rnd(void) { return tu_normal(&rng); }

static void make_inputs(const dcase *c, inputs *in) {
    const int qd = c->n_head * c->hd, kvd = c->n_kv * c->hd, n = c->n;
    memset(in, 0, sizeof *in);
    in->n_ctx = c->cache ? c->n_k + 1 : 0;
    in->n_keys = c->cache ? in->n_ctx : c->n_k;
    const int rows_k = c->cache ? n : c->n_k;
    in->q = malloc(sizeof(float) * (size_t)qd * n);
    in->k = malloc(sizeof(float) * (size_t)kvd * rows_k);
    in->v = malloc(sizeof(float) * (size_t)kvd * rows_k);
    for (int i = 0; i < qd * n; i++) in->q[i] = 2 * rnd();
    for (int i = 0; i < kvd * rows_k; i++) in->k[i] = rnd(), in->v[i] = rnd();
    if (c->cache) {
        const size_t crow = wgml_row_size(c->cache, kvd);
        float *tmp = malloc(sizeof(float) * (size_t)kvd);
        in->kc = malloc(crow * (size_t)in->n_ctx);
        in->vc = malloc(crow * (size_t)in->n_ctx);
        for (int j = 0; j < in->n_ctx; j++) {
            for (int i = 0; i < kvd; i++) tmp[i] = rnd();
            wgml_quantize_row(c->cache, tmp, in->kc + (size_t)j * crow, kvd);
            for (int i = 0; i < kvd; i++) tmp[i] = rnd();
            wgml_quantize_row(c->cache, tmp, in->vc + (size_t)j * crow, kvd);
        }
        free(tmp);
        /* every row at position n_k (its k and v go to the spare row n_k), looking at rows < n_k */
        in->pos = malloc(sizeof(int32_t) * (size_t)n);
        for (int r = 0; r < n; r++) in->pos[r] = c->n_k;
    }
    if (c->range || c->cache) {
        in->range = malloc(sizeof(int32_t) * 2 * (size_t)n);
        for (int r = 0; r < n; r++) {
            in->range[2 * r] = c->range ? r * c->n_k / 7 : 0;
            in->range[2 * r + 1] = c->range ? c->n_k - r * c->n_k / 5 : c->n_k;
        }
    }
    if (c->seq) {
        in->seq = malloc(sizeof(int32_t) * (size_t)n);
        in->kv_seq = malloc(sizeof(int32_t) * (size_t)in->n_keys);
        for (int r = 0; r < n; r++) in->seq[r] = r;
        for (int j = 0; j < in->n_keys; j++) in->kv_seq[j] = j % n;
    }
    if (c->mask) {
        in->mask = malloc(sizeof(float) * (size_t)n * in->n_keys);
        for (int i = 0; i < n * in->n_keys; i++) {
            in->mask[i] = rnd();
            if (i % 7 == 3) in->mask[i] = -INFINITY;
            if (i % 11 == 5) in->mask[i] = -3.4028235e38f;
            if (c->mask == 2 && i < in->n_keys) in->mask[i] = -INFINITY;
        }
    }
}

static void free_inputs(inputs *in) {
    free(in->q), free(in->k), free(in->v), free(in->mask), free(in->kc), free(in->vc);
    free(in->pos), free(in->range), free(in->seq), free(in->kv_seq);
}

typedef struct {
    wgml_tensor t;
    wgml_buffer *b;
} tbuf;

static tbuf make(wgml_backend *be, uint32_t type, int64_t ne0, int64_t ne1, const void *data) {
    tbuf r = {0};
    const size_t size = wgml_row_size(type, ne0) * (size_t)ne1;
    wgml_error err;
    assert_int_equal(be->buffer_create(be, size, WGML_BUFFER_ACTIVATIONS, &r.b, &err), WGML_OK);
    if (data) assert_int_equal(be->buffer_write(be, r.b, 0, data, size, &err), WGML_OK);
    r.t = (wgml_tensor){.type = type, .ne = {ne0, ne1, 1, 1}, .buf = r.b, .name = "t"};
    return r;
}

/* the case on be; out: n x n_head*hd floats */
static void run(wgml_backend *be, const dcase *c, const inputs *in, float *out) {
    const int qd = c->n_head * c->hd, kvd = c->n_kv * c->hd, n = c->n, rows_k = c->cache ? n : c->n_k;
    tbuf Q = make(be, WGML_F32, qd, n, in->q), K, V, O = make(be, WGML_F32, qd, n, NULL);
    if (c->kv16) { /* the key rows rounded to f16 */
        uint16_t *k16 = malloc(sizeof(uint16_t) * (size_t)kvd * rows_k), *v16 = malloc(sizeof(uint16_t) * (size_t)kvd * rows_k);
        wgml_quantize_row(WGML_F16, in->k, k16, (int64_t)kvd * rows_k);
        wgml_quantize_row(WGML_F16, in->v, v16, (int64_t)kvd * rows_k);
        K = make(be, WGML_F16, kvd, rows_k, k16), V = make(be, WGML_F16, kvd, rows_k, v16);
        free(k16), free(v16);
    } else {
        K = make(be, WGML_F32, kvd, rows_k, in->k), V = make(be, WGML_F32, kvd, rows_k, in->v);
    }
    tbuf KC = {0}, VC = {0}, P = {0}, R = {0}, S = {0}, KS = {0}, M = {0};
    if (c->cache) {
        KC = make(be, c->cache, kvd, in->n_ctx, in->kc);
        VC = make(be, c->cache, kvd, in->n_ctx, in->vc);
        P = make(be, WGML_I32, n, 1, in->pos);
    }
    if (in->range) R = make(be, WGML_I32, 2, n, in->range);
    if (in->seq) S = make(be, WGML_I32, n, 1, in->seq), KS = make(be, WGML_I32, in->n_keys, 1, in->kv_seq);
    if (in->mask) M = make(be, WGML_F32, in->n_keys, n, in->mask);
    be->begin(be, &(wgml_step){.pos = c->causal ? 3 : 0, .n_tokens = n});
    wgml_op_attention(be, &(wgml_attention_args){.q = &Q.t, .k = &K.t, .v = &V.t,
                                                 .k_cache = c->cache ? &KC.t : NULL,
                                                 .v_cache = c->cache ? &VC.t : NULL, .out = &O.t,
                                                 .n_head = c->n_head, .n_head_kv = c->n_kv, .head_dim = c->hd,
                                                 .scale = 1.0f / sqrtf((float)c->hd),
                                                 .bidirectional = !c->cache && !c->causal,
                                                 .seq = in->seq ? &S.t : NULL, .kv_seq = in->seq ? &KS.t : NULL,
                                                 .pos = c->cache ? &P.t : NULL, .mask = in->mask ? &M.t : NULL,
                                                 .kv_range = in->range ? &R.t : NULL});
    wgml_error err;
    wgml_status st = be->end(be, &err);
    if (st) fprintf(stderr, "step failed: %s\n", err.message);
    assert_int_equal(st, WGML_OK);
    assert_int_equal(be->buffer_read(be, O.b, 0, out, sizeof(float) * (size_t)qd * n, &err), WGML_OK);
    tbuf *all[] = {&Q, &K, &V, &O, &KC, &VC, &P, &R, &S, &KS, &M};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (all[i]->b) be->buffer_free(be, all[i]->b);
}

static wgml_backend *exact;
static double worst;

static void check(const dcase *c) {
    inputs in;
    make_inputs(c, &in);
    const size_t m = (size_t)c->n * c->n_head * c->hd;
    float *got = malloc(m * sizeof(float)), *want = malloc(m * sizeof(float));
    wgml_backend *be;
    wgml_error err;
    assert_int_equal(wgml_backend_cpu_create(c->threads, &be, &err), WGML_OK);
    run(be, c, &in, got);
    run(exact, c, &in, want);
    be->free(be);
    double e = 0, mx = 0;
    for (size_t i = 0; i < m; i++) {
        assert_true(isfinite(got[i]));
        e = fmax(e, fabs((double)got[i] - want[i]));
        mx = fmax(mx, fabs((double)want[i]));
    }
    e /= 1 + mx;
    worst = fmax(worst, e);
    const double tol = 5e-6;
    if (e > tol || getenv("SHOWERR"))
        fprintf(stderr, "heads %d/%d hd %d rows %d keys %d %s%s%s%s%s %d threads: err %g\n", c->n_head, c->n_kv, c->hd,
                c->n, c->n_k, c->cache ? wgml_dtype_name(c->cache) : "no cache", c->causal ? " causal" : "",
                c->seq ? " seq" : "", c->mask ? " mask" : "", c->range ? " range" : "", c->threads, e);
    assert_true(e <= tol);
    free(got), free(want);
    free_inputs(&in);
}

static void check_all(void) {
    static const int keys[] = {1, 2, 5, 15, 16, 17, 63, 64, 65, 200, 1500, 1600};
    static const int heads[][3] = {{8, 8, 64}, {6, 6, 64}, {8, 2, 64}, {4, 1, 32}, {2, 2, 48},
                                   {3, 3, 80}, {4, 2, 20}, {2, 1, 7},  {2, 2, 128}};
    const int nh = sizeof heads / sizeof heads[0], nk = sizeof keys / sizeof keys[0];
    int i = 0;
    for (int h = 0; h < nh; h++)
        for (int k = 0; k < nk; k++)
            for (int n = 1; n <= 5; n++, i++) {
                const int *hh = heads[h];
                const int big = keys[k] >= 1500;
                if (big && (i % 3 != 0)) continue; /* the long windows on a third of the shapes */
                const int threads = 1 + i % 3;
                /* cross-attention: f32 and f16 key rows, every row sees every key */
                check(&(dcase){hh[0], hh[1], hh[2], n, keys[k], 0, 0, 0, 0, 0, threads, 0});
                check(&(dcase){hh[0], hh[1], hh[2], n, keys[k], 0, 0, 0, 0, 0, threads, 1});
                /* the window in a cache (f16 and f32), through kv_range */
                check(&(dcase){hh[0], hh[1], hh[2], n, keys[k], i % 2 ? WGML_F32 : WGML_F16, 0, 0, 0, i % 4 == 1,
                               threads, 0});
                if (big) continue;
                /* beams' rows over their own sequences' key rows, windows, masks */
                check(&(dcase){hh[0], hh[1], hh[2], n, keys[k], 0, 0, 1, 0, i % 2, threads, i % 2});
                check(&(dcase){hh[0], hh[1], hh[2], n, keys[k], 0, 0, 0, 1 + (i % 5 == 0), i % 3 == 0, threads, 0});
                if (keys[k] == n) /* causal without a cache */
                    check(&(dcase){hh[0], hh[1], hh[2], n, n, 0, 1, 0, i % 2, 0, threads, 0});
            }
    /* more rows than decode mode takes (a prompt over f16 cross keys: the block kernel) */
    check(&(dcase){8, 8, 64, 12, 1500, 0, 0, 0, 0, 0, 2, 1});
    check(&(dcase){6, 2, 64, 20, 300, 0, 0, 1, 1, 1, 3, 1});
    /* split-K: one KV head of one head, eight threads; with and without windows */
    for (int n = 1; n <= 5; n++) {
        check(&(dcase){1, 1, 64, n, 1500, WGML_F16, 0, 0, 0, n % 2, 8, 0});
        check(&(dcase){2, 1, 64, n, 700, 0, 0, 1, 1, 0, 8, 0});
        check(&(dcase){1, 1, 7, n, 300, 0, 0, 0, 2, 1, 5, 0});
    }
}

/* The kernel itself, f16 and f32 rows: the SIMD one against the scalar one
 * (m, l and o / l), with biases that hide keys and one vector that sees none. */
static void test_kernel(void **state) {
    (void)state;
    const cpu_attn_dec_fn fn = cpu_kernels_attn_dec();
    if (!fn) skip();
    static const int lens[] = {1, 5, 16, 17, 300, 1600}, hds[] = {16, 48, 64, 80, 128, 7};
    double worst_k = 0;
    for (int f16 = 0; f16 < 2; f16++)
        for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++)
            for (size_t hi = 0; hi < sizeof hds / sizeof hds[0]; hi++)
                for (int nr = 1; nr <= CPU_ATTN_DEC_ROWS; nr++)
                    for (int biased = 0; biased < 2; biased++) {
                        const int len = lens[li], hd = hds[hi], kvd = 3 * hd; /* the head's slice in wider rows */
                        const size_t es = f16 ? 2 : 4, stride = (size_t)kvd * es;
                        uint8_t *k = malloc(stride * len), *v = malloc(stride * len);
                        float *row = malloc(sizeof(float) * kvd);
                        for (int j = 0; j < len; j++)
                            for (int which = 0; which < 2; which++) {
                                for (int i = 0; i < kvd; i++) row[i] = rnd();
                                wgml_quantize_row(f16 ? WGML_F16 : WGML_F32, row,
                                                  (which ? v : k) + (size_t)j * stride, kvd);
                            }
                        float q[CPU_ATTN_DEC_ROWS][128], bias[CPU_ATTN_DEC_ROWS][1600];
                        float o[2][CPU_ATTN_DEC_ROWS][128], m[2][CPU_ATTN_DEC_ROWS], l[2][CPU_ATTN_DEC_ROWS];
                        float *s = malloc(sizeof(float) * cpu_attn_dec_scratch(len, hd));
                        cpu_attn_dec_job job = {.hd = hd, .nr = nr, .len = len, .f16 = f16, .k = k + es * hd,
                                                .v = v + es * hd, .stride = stride, .scale = 0.2f, .s = s};
                        for (int r = 0; r < nr; r++) {
                            for (int d = 0; d < hd; d++) q[r][d] = 2 * rnd();
                            for (int j = 0; j < len; j++)
                                bias[r][j] = (j + r) % 3 == 1 ? -INFINITY : (r == 2 && nr > 2) ? -INFINITY : rnd();
                            job.q[r] = q[r];
                            job.bias[r] = biased && r != 1 ? bias[r] : NULL;
                        }
                        for (int pass = 0; pass < 2; pass++) {
                            job.m = m[pass], job.l = l[pass];
                            for (int r = 0; r < nr; r++) job.o[r] = o[pass][r];
                            (pass ? cpu_attn_dec_scalar : fn)(&job);
                        }
                        for (int r = 0; r < nr; r++) {
                            const int none = biased && r == 2 && nr > 2;
                            if (none) {
                                assert_true(m[0][r] == -INFINITY && l[0][r] == 0);
                                for (int d = 0; d < hd; d++) assert_true(o[0][r][d] == 0);
                                continue;
                            }
                            assert_true(fabs(m[0][r] - m[1][r]) <= 1e-5 * (1 + fabs(m[1][r])));
                            assert_true(fabs(l[0][r] - l[1][r]) <= 1e-5 * l[1][r]);
                            for (int d = 0; d < hd; d++) {
                                const double e = fabs(o[0][r][d] / l[0][r] - o[1][r][d] / l[1][r]);
                                worst_k = fmax(worst_k, e);
                                if (e > 1e-5) fprintf(stderr, "f16 %d len %d hd %d nr %d bias %d: err %g\n", f16, len, hd, nr, biased, e);
                                assert_true(e <= 1e-5);
                            }
                        }
                        free(k), free(v), free(row), free(s);
                    }
    fprintf(stderr, "decode kernel (%s) against the scalar one: worst error %g\n", cpu_kernels_isa(), worst_k);
}

static void test_decode_simd(void **state) {
    (void)state;
    cpu_kernels_force_scalar(0);
    worst = 0;
    check_all();
    fprintf(stderr, "decode attention (%s): worst error %g\n", cpu_kernels_isa(), worst);
}

static void test_decode_scalar(void **state) {
    (void)state;
    cpu_kernels_force_scalar(1);
    worst = 0;
    check_all();
    cpu_kernels_force_scalar(0);
    fprintf(stderr, "decode attention (scalar): worst error %g\n", worst);
}

static int setup(void **state) {
    (void)state;
    wgml_error err;
    return wgml_backend_cpu_create_exact(2, &exact, &err) == WGML_OK ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    exact->free(exact);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kernel),
        cmocka_unit_test(test_decode_simd),
        cmocka_unit_test(test_decode_scalar),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
