/*
 * validate.c - the argument check of every op (ops.h), run by every backend
 * before the op itself, so that a bad shape or type is reported the same way
 * (and caught before any kernel runs) on the CPU and on the GPU. Each returns
 * WGML_OK or fills err. Whether a view fits its buffer is checked by the
 * backend (wgml_buffer is backend-specific).
 */
#include <math.h>
#include <stdio.h>

#include "backend/backend.h"
#include "core/error.h"

const char *const wgml_op_names[WGML_OP_COUNT] = {
#define WGML_OP_NAME(name, NAME, args) [WGML_OP_##NAME] = #name,
    WGML_OPS(WGML_OP_NAME)
#undef WGML_OP_NAME
};

static const char *nm(const wgml_tensor *t) { return t && t->name ? t->name : "?"; }

static long long rows_of(const wgml_tensor *t) { return (long long)wgml_tensor_nrows(t); }

/* Argument `what` of op (its field's name: "x", "out", "w[1]"): present, of
 * `type`, contiguous unless strided_ok (tensor.h: only copy's input may be a
 * strided view). The messages name the op, the argument, the tensor and what
 * it got, and what it needs: "matmul: x 'inp' is F16; needs F32". */
static wgml_status check_arg(const char *op, const char *what, const wgml_tensor *t, uint32_t type, int strided_ok,
                             wgml_error *err) {
    if (!t || !t->buf)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "%s: %s is missing%s", op, what, t ? " (no buffer)" : "");
    if (t->type != type)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "%s: %s '%s' is %s; needs %s", op, what, nm(t),
                         wgml_dtype_name(t->type), wgml_dtype_name(type));
    if (!strided_ok && !wgml_tensor_is_contiguous(t))
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                         "%s: %s '%s' is a strided view; this op needs contiguous rows: copy it first "
                         "(wgml_op_copy)",
                         op, what, nm(t));
    return WGML_OK;
}

/* Arguments wa (a) and wb (b) of one shape ([rows x row length], the rows of ne[1..3] flattened). */
static wgml_status same_shape(const char *op, const char *wa, const wgml_tensor *a, const char *wb,
                              const wgml_tensor *b, wgml_error *err) {
    if (a->ne[0] != b->ne[0] || wgml_tensor_nrows(a) != wgml_tensor_nrows(b))
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                         "%s: %s '%s' [%lld x %lld] and %s '%s' [%lld x %lld] need one shape", op, wa, nm(a),
                         rows_of(a), (long long)a->ne[0], wb, nm(b), rows_of(b), (long long)b->ne[0]);
    return WGML_OK;
}

wgml_status wgml_check_type(const char *op, const wgml_tensor *t, uint32_t type, wgml_error *err) {
    return check_arg(op, "tensor", t, type, 0, err);
}

wgml_status wgml_check_same_shape(const char *op, const wgml_tensor *a, const wgml_tensor *b, wgml_error *err) {
    return same_shape(op, "tensor", a, "tensor", b, err);
}

int wgml_tensors_overlap(const wgml_tensor *a, const wgml_tensor *b) {
    if (!a || !b || !a->buf || a->buf != b->buf) return 0;
    /* a strided view's whole span counts (conservative: views that interleave overlap) */
    size_t na = wgml_tensor_extent(a), nb = wgml_tensor_extent(b);
    return na && nb && a->offset < b->offset + nb && b->offset < a->offset + na;
}

wgml_status wgml_check_overlap(const char *op, const wgml_tensor *out, const wgml_tensor *in, int in_place,
                               wgml_error *err) {
    if (!wgml_tensors_overlap(out, in)) return WGML_OK;
    if (in_place && out->offset == in->offset && out->type == in->type && out->ne[0] == in->ne[0] &&
        wgml_tensor_nrows(out) == wgml_tensor_nrows(in))
        return WGML_OK;
    return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "%s: output '%s' overlaps input '%s'%s", op, nm(out), nm(in),
                     in_place ? " (only the same view may: in place)" : "");
}

wgml_status wgml_validate_matmul(const wgml_matmul_args *mm, int pos, wgml_error *err) {
    (void)pos;
    static const char *const epi_names[] = {"STORE", "ADD", "SWIGLU"};
    wgml_status st;
    if (!mm) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "matmul: no arguments");
    if ((st = check_arg("matmul", "x", mm->x, WGML_F32, 0, err))) return st;
    int64_t K = mm->x->ne[0], n = wgml_tensor_nrows(mm->x);
    if (mm->n_w < 1 || mm->n_w > WGML_MATMUL_MAX || (mm->epilogue == WGML_EPI_SWIGLU && mm->n_w != 2))
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                         "matmul: n_w is %d with epilogue %s; needs 1..%d weights (exactly 2 for SWIGLU)", mm->n_w,
                         (unsigned)mm->epilogue < 3 ? epi_names[mm->epilogue] : "?", WGML_MATMUL_MAX);
    const int conv = mm->conv.kernel != 0;
    if (conv) { /* the unfolding's rows and columns */
        const wgml_conv1d *c = &mm->conv;
        const wgml_tensor *w0 = mm->w[0];
        const int64_t C = K;
        if (c->kernel < 0 || c->stride < 1 || c->dilation < 1 || c->pad_l < 0 || c->pad_r < 0)
            return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                             "matmul: conv has %d taps, stride %d, dilation %d, pads %d %d; needs taps and pads >= 0, "
                             "stride and dilation >= 1",
                             c->kernel, c->stride, c->dilation, c->pad_l, c->pad_r);
        if (mm->norm || mm->epilogue == WGML_EPI_SWIGLU)
            return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                             "matmul: a convolution (conv of %d taps) takes no norm and no SWIGLU epilogue", c->kernel);
        if (!wgml_tensor_is_contiguous(mm->x))
            return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                             "matmul: x '%s' is a strided view; a convolution needs a contiguous signal", nm(mm->x));
        if (!w0 || !w0->buf) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "matmul: w[0] is missing");
        const int64_t W = w0->ne[0];
        if (W % c->kernel || W / c->kernel < C)
            return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                             "matmul: w[0] '%s' has rows of %lld; a convolution of %d taps over x '%s' [%lld x %lld] "
                             "needs rows of %d taps x at least %lld channels (x's row length)",
                             nm(w0), (long long)W, c->kernel, nm(mm->x), (long long)n, (long long)C, c->kernel,
                             (long long)C);
        if (wgml_conv1d_rows(c, n) < 1)
            return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                             "matmul: x '%s' has %lld rows; a convolution of %d taps (stride %d, dilation %d, pads %d "
                             "%d) needs enough for one output row",
                             nm(mm->x), (long long)n, c->kernel, c->stride, c->dilation, c->pad_l, c->pad_r);
        K = W, n = wgml_conv1d_rows(c, n);
    }
    if (mm->norm) {
        if ((st = check_arg("matmul", "norm", mm->norm, WGML_F32, 0, err))) return st;
        if (mm->norm->ne[0] != K)
            return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                             "matmul: norm '%s' has %lld values; needs %lld (x's row length)", nm(mm->norm),
                             (long long)mm->norm->ne[0], (long long)K);
    }
    for (int i = 0; i < mm->n_w; i++) {
        const int oi = mm->epilogue == WGML_EPI_SWIGLU ? 0 : i;
        const wgml_tensor *w = mm->w[i], *o = mm->out[oi];
        char what[24];
        if (!w || !w->buf) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "matmul: w[%d] is missing", i);
        snprintf(what, sizeof what, "out[%d]", oi);
        if ((st = check_arg("matmul", what, o, WGML_F32, 0, err))) return st;
        int64_t M = wgml_tensor_nrows(w), M_out = mm->epilogue == WGML_EPI_SWIGLU ? wgml_tensor_nrows(mm->w[0]) : M;
        if (w->ne[0] != K)
            return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                             "matmul: w[%d] '%s' is [%lld x %lld]; needs rows of %lld (%s)", i, nm(w), (long long)M,
                             (long long)w->ne[0], (long long)K,
                             conv ? "w[0]'s: the convolution's taps x channels" : "x's row length");
        if (o->ne[0] != M_out || wgml_tensor_nrows(o) != n)
            return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                             "matmul: %s '%s' is [%lld x %lld]; needs [%lld x %lld] (%s x w[%d]'s rows)", what, nm(o),
                             rows_of(o), (long long)o->ne[0], (long long)n, (long long)M_out,
                             conv ? "the convolution's output rows" : "x's rows", oi);
        if (mm->bias[i]) {
            snprintf(what, sizeof what, "bias[%d]", i);
            if ((st = check_arg("matmul", what, mm->bias[i], WGML_F32, 0, err))) return st;
            if (mm->bias[i]->ne[0] != M)
                return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                                 "matmul: %s '%s' is [%lld x %lld]; needs rows of %lld, the rows of w[%d] '%s'", what,
                                 nm(mm->bias[i]), rows_of(mm->bias[i]), (long long)mm->bias[i]->ne[0], (long long)M, i,
                                 nm(w));
        }
    }
    if (mm->epilogue == WGML_EPI_SWIGLU && wgml_tensor_nrows(mm->w[0]) != wgml_tensor_nrows(mm->w[1]))
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                         "matmul: SWIGLU's w[0] '%s' has %lld rows and w[1] '%s' %lld; needs as many", nm(mm->w[0]),
                         rows_of(mm->w[0]), nm(mm->w[1]), rows_of(mm->w[1]));
    return WGML_OK;
}

/* rope's parameters and the tensor it rotates (`what`: rope's x, attention's q). */
static wgml_status check_rope(const char *what, const wgml_tensor *x, int n_head, int head_dim, const wgml_rope *r,
                              wgml_error *err) {
    wgml_status st = check_arg("rope", what, x, WGML_F32, 0, err);
    if (st) return st;
    if (!r) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "rope: rope (the parameters) is missing");
    if (n_head <= 0 || head_dim <= 0 || (head_dim & 1))
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                         "rope: n_head %d, head_dim %d; needs both positive, head_dim even", n_head, head_dim);
    if (r->n_rot < 0 || r->n_rot > head_dim || (r->n_rot & 1))
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                         "rope: n_rot %d; needs an even number of dims in 0..%d (head_dim)", r->n_rot, head_dim);
    if (x->ne[0] != (int64_t)n_head * head_dim)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                         "rope: %s '%s' has rows of %lld; needs rows of %lld (n_head %d x head_dim %d)", what, nm(x),
                         (long long)x->ne[0], (long long)n_head * head_dim, n_head, head_dim);
    if (!(r->freq_base > 0) || !(r->freq_scale > 0))
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "rope: freq_base %g, freq_scale %g; needs both positive",
                         (double)r->freq_base, (double)r->freq_scale);
    if (r->freq_factors) {
        if ((st = check_arg("rope", "freq_factors", r->freq_factors, WGML_F32, 0, err))) return st;
        if (r->freq_factors->ne[0] < r->n_rot / 2)
            return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                             "rope: freq_factors '%s' has %lld values; needs at least %d (n_rot %d / 2)",
                             nm(r->freq_factors), (long long)r->freq_factors->ne[0], r->n_rot / 2, r->n_rot);
    }
    return WGML_OK;
}

wgml_status wgml_validate_rope(const wgml_rope_args *a, int pos, wgml_error *err) {
    (void)pos;
    if (!a) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "rope: no arguments");
    return check_rope("x", a->x, a->n_head, a->head_dim, a->rope, err);
}

/* An optional i32 (or f32) tensor of `count` elements, apart from out. */
static wgml_status check_att_table(const char *what, const wgml_tensor *t, uint32_t type, int64_t count,
                                   const wgml_tensor *out, wgml_error *err) {
    wgml_status st = check_arg("attention", what, t, type, 0, err);
    if (st) return st;
    if (wgml_tensor_nelements(t) != count)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "attention: %s '%s' has %lld elements, needs %lld", what,
                         nm(t), (long long)wgml_tensor_nelements(t), (long long)count);
    return wgml_check_overlap("attention", out, t, 0, err);
}

wgml_status wgml_validate_attention(const wgml_attention_args *a, int pos, wgml_error *err) {
    wgml_status st;
    if (!a) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "attention: no arguments");
    const int cache = a->k_cache || a->v_cache, general = wgml_attention_is_general(a);
    /* f16 keys and values: cross-attention's (no cache), both alike */
    const uint32_t kvt = !cache && a->k && a->k->type == WGML_F16 ? WGML_F16 : WGML_F32;
    if ((st = check_arg("attention", "q", a->q, WGML_F32, 0, err)) ||
        (st = check_arg("attention", "k", a->k, kvt, 0, err)) ||
        (st = check_arg("attention", "v", a->v, kvt, 0, err)) ||
        (st = check_arg("attention", "out", a->out, WGML_F32, 0, err)))
        return st;
    if (cache && (!a->k_cache || !a->v_cache || !a->k_cache->buf || !a->v_cache->buf))
        return wgml_fail(
            err, WGML_ERR_INVALID_ARGUMENT,
            "attention: missing KV cache (k_cache and v_cache go together: both, or neither for no cache)");
    int64_t n = wgml_tensor_nrows(a->q), n_k = wgml_tensor_nrows(a->k), qd = (int64_t)a->n_head * a->head_dim,
            kvd = (int64_t)a->n_head_kv * a->head_dim;
    if (a->n_head <= 0 || a->n_head_kv <= 0 || a->n_head % a->n_head_kv || a->head_dim <= 0)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                         "attention: n_head %d, n_head_kv %d, head_dim %d (all positive, n_head a multiple of n_head_kv)",
                         a->n_head, a->n_head_kv, a->head_dim);
    if (!(a->scale > 0) || !isfinite(a->scale))
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "attention: scale %g (a positive finite number)",
                         (double)a->scale);
    const struct {
        const char *what;
        const wgml_tensor *t;
        int64_t row, rows; /* rows < 0: any */
    } want[] = {{"q", a->q, qd, -1}, {"out", a->out, qd, n}, {"k", a->k, kvd, -1}, {"v", a->v, kvd, n_k}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (want[i].t->ne[0] != want[i].row || (want[i].rows >= 0 && wgml_tensor_nrows(want[i].t) != want[i].rows))
            return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                             "attention: %s '%s' has rows of %lld and %lld rows; needs rows of %lld (%s heads x %d)%s",
                             want[i].what, nm(want[i].t), (long long)want[i].t->ne[0],
                             (long long)wgml_tensor_nrows(want[i].t), (long long)want[i].row,
                             i < 2 ? "n_head" : "n_head_kv", a->head_dim,
                             want[i].rows < 0         ? ""
                             : want[i].t == a->out    ? " and q's rows"
                                                      : " and k's rows");
    int64_t n_ctx = 0;
    if (cache) {
        n_ctx = wgml_tensor_nrows(a->k_cache);
        if (a->k_cache->ne[0] != kvd || a->v_cache->ne[0] != kvd || wgml_tensor_nrows(a->v_cache) != n_ctx)
            return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                             "attention: k_cache '%s' is %lld x %lld and v_cache '%s' %lld x %lld; both need rows of %lld "
                             "(n_head_kv x head_dim) and as many rows",
                             nm(a->k_cache), (long long)n_ctx, (long long)a->k_cache->ne[0], nm(a->v_cache),
                             (long long)wgml_tensor_nrows(a->v_cache), (long long)a->v_cache->ne[0], (long long)kvd);
        if (a->k_cache->type != a->v_cache->type || (a->k_cache->type != WGML_F32 && a->k_cache->type != WGML_F16))
            return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                             "attention: k_cache is %s and v_cache %s; both need to be F32, or both F16",
                             wgml_dtype_name(a->k_cache->type), wgml_dtype_name(a->v_cache->type));
        if ((st = check_arg("attention", "k_cache", a->k_cache, a->k_cache->type, 0, err)) ||
            (st = check_arg("attention", "v_cache", a->v_cache, a->v_cache->type, 0, err)))
            return st;
        if (n_k != n)
            return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                             "attention: with a KV cache k and v need the %lld rows of q, have %lld", (long long)n,
                             (long long)n_k);
    }
    if (a->rope && (st = check_rope("q", a->q, a->n_head, a->head_dim, a->rope, err))) return st;
    if (a->bidirectional != 0 && a->bidirectional != 1)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "attention: bidirectional is %d (0: causal, 1: bidirectional)",
                         a->bidirectional);
    if (a->bidirectional && cache)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "attention: bidirectional attention takes no KV cache");
    if (n_k != n && (!a->bidirectional || a->rope || a->pos))
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                         "attention: cross-attention (k and v with %lld rows, q with %lld) must be bidirectional, "
                         "without rope and pos",
                         (long long)n_k, (long long)n);
    if (kvt == WGML_F16 && a->rope)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                         "attention: f16 k and v cannot be rotated (rope rotates k in place): f32 k with rope");
    /* the key rows: the cache's with a cache, else k's */
    const int64_t n_keys = cache ? n_ctx : n_k;
    if (a->kv_seq && !a->seq)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "attention: kv_seq needs seq (the query rows' ids)");
    if (a->seq && !a->kv_seq && (cache || n_k != n))
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "attention: seq needs kv_seq here: the sequence id of each %s",
                         cache ? "cache row" : "key row (cross-attention)");
    if ((a->seq && (st = check_att_table("seq", a->seq, WGML_I32, n, a->out, err))) ||
        (a->kv_seq && (st = check_att_table("kv_seq", a->kv_seq, WGML_I32, n_keys, a->out, err))) ||
        (a->pos && (st = check_att_table("pos", a->pos, WGML_I32, n, a->out, err))) ||
        (a->kv_range && (st = check_att_table("kv_range", a->kv_range, WGML_I32, 2 * n, a->out, err))))
        return st;
    if (a->mask) {
        if ((st = check_arg("attention", "mask", a->mask, WGML_F32, 0, err))) return st;
        if (a->mask->ne[0] != n_keys || wgml_tensor_nrows(a->mask) != n)
            return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                             "attention: mask '%s' is [%lld x %lld], needs [%lld x %lld] (query rows x %s)",
                             nm(a->mask), (long long)wgml_tensor_nrows(a->mask), (long long)a->mask->ne[0],
                             (long long)n, (long long)n_keys, cache ? "cache rows" : "key rows");
        if ((st = wgml_check_overlap("attention", a->out, a->mask, 0, err))) return st;
    }
    if (general && ((st = wgml_check_overlap("attention", a->out, a->q, 0, err)) ||
                    (st = wgml_check_overlap("attention", a->out, a->k, 0, err)) ||
                    (st = wgml_check_overlap("attention", a->out, a->v, 0, err))))
        return st;
    if (cache && !a->pos && (pos < 0 || pos + n > n_ctx))
        return wgml_fail(err, WGML_ERR_CONTEXT_FULL, "attention: positions %d..%lld exceed the cache of %lld", pos,
                         (long long)(pos + n - 1), (long long)n_ctx);
    if (pos < 0) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "attention: the step's position is %d", pos);
    if (general && !a->pos && pos + n > WGML_ATTN_MAX_POS)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "attention: positions %d..%lld beyond %d", pos,
                         (long long)(pos + n - 1), WGML_ATTN_MAX_POS - 1);
    return WGML_OK;
}

wgml_status wgml_validate_get_rows(const wgml_get_rows_args *a, int pos, wgml_error *err) {
    (void)pos;
    if (!a) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "get_rows: no arguments");
    const wgml_tensor *out = a->out, *table = a->table, *ids = a->ids;
    wgml_status st;
    if ((st = check_arg("get_rows", "out", out, WGML_F32, 0, err)) ||
        (st = check_arg("get_rows", "ids", ids, WGML_I32, 0, err)))
        return st;
    if (!table || !table->buf) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "get_rows: table is missing");
    if ((st = check_arg("get_rows", "table", table, table->type, 0, err))) return st;
    if (out->ne[0] != table->ne[0])
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                         "get_rows: out '%s' is [%lld x %lld]; needs rows of %lld, as table '%s' [%lld x %lld]",
                         nm(out), rows_of(out), (long long)out->ne[0], (long long)table->ne[0], nm(table),
                         rows_of(table), (long long)table->ne[0]);
    if (wgml_tensor_nelements(ids) < wgml_tensor_nrows(out))
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                         "get_rows: ids '%s' has %lld ids; needs at least %lld (one per row of out '%s')", nm(ids),
                         (long long)wgml_tensor_nelements(ids), rows_of(out), nm(out));
    /* the table may be an activation (a weight never shares a buffer with out) */
    if ((st = wgml_check_overlap("get_rows", out, table, 0, err))) return st;
    return wgml_check_overlap("get_rows", out, ids, 0, err);
}

wgml_status wgml_validate_copy(const wgml_copy_args *a, int pos, wgml_error *err) {
    (void)pos;
    if (!a) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "copy: no arguments");
    wgml_status st;
    /* f32 or f16 on either side (a backend says by supports() which pairs it converts) */
    const uint32_t ot = a->out && a->out->type == WGML_F16 ? WGML_F16 : WGML_F32,
                   xt = a->x && a->x->type == WGML_F16 ? WGML_F16 : WGML_F32;
    if ((st = check_arg("copy", "out", a->out, ot, 0, err)) || (st = check_arg("copy", "x", a->x, xt, 1, err)))
        return st;
    const size_t es = xt == WGML_F16 ? 2 : 4;
    for (int d = 0; d < 4; d++) {
        if (a->x->ne[d] < 0 || a->out->ne[d] < 0) {
            const wgml_tensor *t = a->x->ne[d] < 0 ? a->x : a->out;
            return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "copy: %s '%s' has dimension %d of %lld; needs >= 0",
                             t == a->x ? "x" : "out", nm(t), d, (long long)t->ne[d]);
        }
        /* the GPU addresses whole elements: strides in whole ones */
        if (wgml_tensor_stride(a->x, d) % es)
            return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                             "copy: stride %d of x '%s' is %zu bytes, not a multiple of %zu", d, nm(a->x),
                             wgml_tensor_stride(a->x, d), es);
    }
    /* out holds x's rows (ne[1..3] flattened, as same_shape compares) */
    if ((st = same_shape("copy", "out", a->out, "x", a->x, err))) return st;
    return wgml_check_overlap("copy", a->out, a->x, 0, err);
}

/* f32 arguments of one shape (out first), named what[i]. */
static wgml_status same_f32(const char *op, int n, const char *const *what, const wgml_tensor *const *t,
                            wgml_error *err) {
    wgml_status st;
    for (int i = 0; i < n; i++)
        if ((st = check_arg(op, what[i], t[i], WGML_F32, 0, err))) return st;
    for (int i = 1; i < n; i++)
        if ((st = same_shape(op, what[0], t[0], what[i], t[i], err))) return st;
    return WGML_OK;
}

/* The names of the arguments most ops check with same_f32. */
static const char *const out_x[] = {"out", "x"};

wgml_status wgml_validate_rms_norm(const wgml_rms_norm_args *a, int pos, wgml_error *err) {
    (void)pos;
    if (!a) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "rms_norm: no arguments");
    wgml_status st;
    if ((st = same_f32("rms_norm", 2, out_x, (const wgml_tensor *const[]){a->out, a->x}, err)) ||
        (st = check_arg("rms_norm", "w", a->w, WGML_F32, 0, err)))
        return st;
    if (a->w->ne[0] != a->x->ne[0])
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                         "rms_norm: w '%s' has rows of %lld; needs %lld, the row length of x '%s'", nm(a->w),
                         (long long)a->w->ne[0], (long long)a->x->ne[0], nm(a->x));
    if ((st = wgml_check_overlap("rms_norm", a->out, a->x, 1, err))) return st;
    return wgml_check_overlap("rms_norm", a->out, a->w, 0, err);
}

wgml_status wgml_validate_softmax(const wgml_softmax_args *a, int pos, wgml_error *err) {
    (void)pos;
    if (!a) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "softmax: no arguments");
    wgml_status st = same_f32("softmax", 2, out_x, (const wgml_tensor *const[]){a->out, a->x}, err);
    return st ? st : wgml_check_overlap("softmax", a->out, a->x, 1, err);
}

/* add and mul: out and a of one shape; b of that shape, or one row of a's row length. */
static wgml_status check_binary(const char *op, const wgml_tensor *out, const wgml_tensor *a, const wgml_tensor *b,
                                wgml_error *err) {
    wgml_status st;
    if ((st = same_f32(op, 2, (const char *const[]){"out", "a"}, (const wgml_tensor *const[]){out, a}, err)) ||
        (st = check_arg(op, "b", b, WGML_F32, 0, err)))
        return st;
    int64_t rows = wgml_tensor_nrows(a), b_rows = wgml_tensor_nrows(b);
    if (b->ne[0] != a->ne[0] || (b_rows != rows && b_rows != 1))
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                         "%s: b '%s' is [%lld x %lld]; needs the shape of a '%s', [%lld x %lld], or one row of it", op,
                         nm(b), (long long)b_rows, (long long)b->ne[0], nm(a), (long long)rows, (long long)a->ne[0]);
    if ((st = wgml_check_overlap(op, out, a, 1, err))) return st;
    return wgml_check_overlap(op, out, b, b_rows == rows, err);
}

wgml_status wgml_validate_add(const wgml_add_args *a, int pos, wgml_error *err) {
    (void)pos;
    if (!a) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "add: no arguments");
    return check_binary("add", a->out, a->a, a->b, err);
}

wgml_status wgml_validate_mul(const wgml_mul_args *a, int pos, wgml_error *err) {
    (void)pos;
    if (!a) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "mul: no arguments");
    return check_binary("mul", a->out, a->a, a->b, err);
}

/* An f32 row of n values (a vector argument: weight or activation) that out does not overlap. */
static wgml_status check_vector(const char *op, const char *what, const wgml_tensor *v, int64_t n,
                                const wgml_tensor *out, wgml_error *err) {
    wgml_status st = check_arg(op, what, v, WGML_F32, 0, err);
    if (st) return st;
    if (v->ne[0] != n || wgml_tensor_nrows(v) != 1)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "%s: %s '%s' is [%lld x %lld]; needs one row of %lld values",
                         op, what, nm(v), (long long)wgml_tensor_nrows(v), (long long)v->ne[0], (long long)n);
    return wgml_check_overlap(op, out, v, 0, err);
}

wgml_status wgml_validate_layer_norm(const wgml_layer_norm_args *a, int pos, wgml_error *err) {
    (void)pos;
    if (!a) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "layer_norm: no arguments");
    wgml_status st;
    if ((st = same_f32("layer_norm", 2, out_x, (const wgml_tensor *const[]){a->out, a->x}, err)) ||
        (st = wgml_check_overlap("layer_norm", a->out, a->x, 1, err)) ||
        (a->w && (st = check_vector("layer_norm", "w", a->w, a->x->ne[0], a->out, err))) ||
        (a->b && (st = check_vector("layer_norm", "b", a->b, a->x->ne[0], a->out, err))))
        return st;
    if (!(a->eps >= 0) || !isfinite(a->eps))
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "layer_norm: eps %g; needs a finite number >= 0",
                         (double)a->eps);
    return WGML_OK;
}

wgml_status wgml_validate_l2_norm(const wgml_l2_norm_args *a, int pos, wgml_error *err) {
    (void)pos;
    if (!a) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "l2_norm: no arguments");
    wgml_status st;
    if ((st = same_f32("l2_norm", 2, out_x, (const wgml_tensor *const[]){a->out, a->x}, err)) ||
        (st = wgml_check_overlap("l2_norm", a->out, a->x, 1, err)))
        return st;
    if (!(a->eps >= 0) || !isfinite(a->eps))
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "l2_norm: eps %g; needs a finite number >= 0", (double)a->eps);
    return WGML_OK;
}

wgml_status wgml_validate_unary(const wgml_unary_args *a, int pos, wgml_error *err) {
    (void)pos;
    if (!a) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "unary: no arguments");
    wgml_status st;
    if ((st = same_f32("unary", 2, out_x, (const wgml_tensor *const[]){a->out, a->x}, err)) ||
        (st = wgml_check_overlap("unary", a->out, a->x, 1, err)))
        return st;
    if ((unsigned)a->kind >= WGML_UNARY_COUNT)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "unary: unknown kind %d", (int)a->kind);
    int takes_v = a->kind == WGML_UNARY_SNAKE;
    if (takes_v != (a->v != NULL))
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "unary: kind %d %s v (a per-column tensor)%s", (int)a->kind,
                         takes_v ? "needs" : "takes no", takes_v ? ", which is missing" : "");
    return a->v ? check_vector("unary", "v", a->v, a->x->ne[0], a->out, err) : WGML_OK;
}

wgml_status wgml_validate_pool(const wgml_pool_args *a, int pos, wgml_error *err) {
    (void)pos;
    if (!a) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "pool: no arguments");
    wgml_status st;
    if ((st = check_arg("pool", "out", a->out, WGML_F32, 0, err)) ||
        (st = check_arg("pool", "x", a->x, WGML_F32, 0, err)) ||
        (st = check_arg("pool", "seq", a->seq, WGML_I32, 0, err)))
        return st;
    int64_t n_seq = wgml_tensor_nrows(a->out);
    if (a->out->ne[0] != a->x->ne[0])
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                         "pool: out '%s' is [%lld x %lld]; needs rows of %lld, as x '%s'", nm(a->out), (long long)n_seq,
                         (long long)a->out->ne[0], (long long)a->x->ne[0], nm(a->x));
    if (wgml_tensor_nelements(a->seq) != n_seq + 1)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                         "pool: seq '%s' has %lld offsets; needs %lld (one more than the %lld sequences, out's rows)",
                         nm(a->seq), (long long)wgml_tensor_nelements(a->seq), (long long)(n_seq + 1),
                         (long long)n_seq);
    if (wgml_tensor_nrows(a->x) < n_seq)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                         "pool: x '%s' is [%lld x %lld]; needs at least %lld rows (one per sequence, out's rows)",
                         nm(a->x), rows_of(a->x), (long long)a->x->ne[0], (long long)n_seq);
    if ((unsigned)a->mode > WGML_POOL_LAST)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "pool: unknown mode %d", (int)a->mode);
    if ((st = wgml_check_overlap("pool", a->out, a->x, 0, err))) return st;
    return wgml_check_overlap("pool", a->out, a->seq, 0, err);
}

wgml_status wgml_validate_swiglu(const wgml_swiglu_args *a, int pos, wgml_error *err) {
    (void)pos;
    if (!a) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "swiglu: no arguments");
    return same_f32("swiglu", 3, (const char *const[]){"out", "gate", "up"},
                    (const wgml_tensor *const[]){a->out, a->gate, a->up}, err);
}

wgml_status wgml_validate_argmax(const wgml_argmax_args *a, int pos, wgml_error *err) {
    (void)pos;
    if (!a) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "argmax: no arguments");
    wgml_status st;
    if ((st = check_arg("argmax", "x", a->x, WGML_F32, 0, err))) return st;
    int64_t rows = wgml_tensor_nrows(a->x);
    if (!a->out || !a->out->buf)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "argmax: out is missing; needs I32 with %lld elements",
                         (long long)rows);
    if (a->out->type != WGML_I32 || wgml_tensor_nelements(a->out) < rows)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                         "argmax: out '%s' is %s with %lld elements; needs I32 with %lld (one per row of x '%s')",
                         nm(a->out), wgml_dtype_name(a->out->type), (long long)wgml_tensor_nelements(a->out),
                         (long long)rows, nm(a->x));
    return check_arg("argmax", "out", a->out, WGML_I32, 0, err);
}

/* ---- audio ops ---- */

/* A positive int parameter no larger than max. */
static wgml_status check_param(const char *op, const char *what, int v, int min, int max, wgml_error *err) {
    if (v < min || v > max)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "%s: %s is %d (%d..%d allowed)", op, what, v, min, max);
    return WGML_OK;
}

/* One row of n f32 values (a whole signal): argument `what` of op. */
static wgml_status check_signal(const char *op, const char *what, const wgml_tensor *t, wgml_error *err) {
    wgml_status st = check_arg(op, what, t, WGML_F32, 0, err);
    if (st) return st;
    if (wgml_tensor_nrows(t) != 1 || t->ne[0] < 1)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "%s: %s '%s' is [%lld x %lld]; needs one row of samples", op,
                         what, nm(t), (long long)wgml_tensor_nrows(t), (long long)t->ne[0]);
    return WGML_OK;
}

#define MAX_KERNEL (1 << 16) /* taps, strides, dilations, paddings */

wgml_status wgml_validate_im2col(const wgml_im2col_args *a, int pos, wgml_error *err) {
    (void)pos;
    const char *op = "im2col";
    if (!a) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "im2col: no arguments");
    wgml_status st;
    if (!a->x) { /* zeros into channels [c0, c0 + zero_c) of each tap */
        if ((st = check_arg(op, "out", a->out, WGML_F32, 0, err)) ||
            (st = check_param(op, "kernel", a->kernel, 1, MAX_KERNEL, err)) ||
            (st = check_param(op, "c0", a->c0, 0, INT32_MAX, err)) ||
            (st = check_param(op, "zero_c (the channels of zeros, without an x)", a->zero_c, 1, INT32_MAX, err)))
            return st;
        if (a->out->ne[0] % a->kernel || a->out->ne[0] / a->kernel < (int64_t)a->c0 + a->zero_c)
            return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                             "im2col: out '%s' is [%lld x %lld]; needs rows of %d taps x (at least %lld) channels "
                             "(c0 + zero_c)",
                             nm(a->out), (long long)wgml_tensor_nrows(a->out), (long long)a->out->ne[0], a->kernel,
                             (long long)a->c0 + a->zero_c);
        return WGML_OK;
    }
    if (a->zero_c)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                         "im2col: zero_c is %d with an x (zeros are written without one)", a->zero_c);
    if ((st = check_arg(op, "out", a->out, WGML_F32, 0, err)) || (st = check_arg(op, "x", a->x, WGML_F32, 0, err)) ||
        (st = check_param(op, "kernel", a->kernel, 1, MAX_KERNEL, err)) ||
        (st = check_param(op, "stride", a->stride, 1, MAX_KERNEL, err)) ||
        (st = check_param(op, "dilation", a->dilation, 1, MAX_KERNEL, err)) ||
        (st = check_param(op, "pad_l", a->pad_l, 0, MAX_KERNEL, err)) ||
        (st = check_param(op, "pad_r", a->pad_r, 0, MAX_KERNEL, err)) ||
        (st = check_param(op, "c0", a->c0, 0, INT32_MAX, err)))
        return st;
    const int64_t T = wgml_tensor_nrows(a->x), C = a->x->ne[0];
    if (T < 1 || C < 1)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "im2col: x '%s' is [%lld x %lld]; needs a row and a channel",
                         nm(a->x), (long long)T, (long long)C);
    if (a->reflect && (a->pad_l >= T || a->pad_r >= T))
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                         "im2col: reflection padding of %d and %d rows needs more than that many rows, x '%s' has %lld",
                         a->pad_l, a->pad_r, nm(a->x), (long long)T);
    const int64_t span = (int64_t)a->dilation * (a->kernel - 1) + 1, padded = T + a->pad_l + a->pad_r;
    if (padded < span)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                         "im2col: x '%s' has %lld rows, %lld padded; needs at least the kernel's span, %lld", nm(a->x),
                         (long long)T, (long long)padded, (long long)span);
    const int64_t T_out = (padded - span) / a->stride + 1;
    if (wgml_tensor_nrows(a->out) != T_out || a->out->ne[0] % a->kernel ||
        a->out->ne[0] / a->kernel < (int64_t)a->c0 + C)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                         "im2col: out '%s' is [%lld x %lld]; needs %lld rows of %d taps x (at least %lld) channels",
                         nm(a->out), (long long)wgml_tensor_nrows(a->out), (long long)a->out->ne[0], (long long)T_out,
                         a->kernel, (long long)(a->c0 + C));
    return wgml_check_overlap(op, a->out, a->x, 0, err);
}

wgml_status wgml_validate_col2im(const wgml_col2im_args *a, int pos, wgml_error *err) {
    (void)pos;
    const char *op = "col2im";
    if (!a) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "col2im: no arguments");
    wgml_status st;
    if ((st = check_arg(op, "out", a->out, WGML_F32, 0, err)) || (st = check_arg(op, "y", a->y, WGML_F32, 0, err)) ||
        (st = check_param(op, "kernel", a->kernel, 1, MAX_KERNEL, err)) ||
        (st = check_param(op, "stride", a->stride, 1, MAX_KERNEL, err)) ||
        (st = check_param(op, "pad", a->pad, 0, MAX_KERNEL, err)))
        return st;
    const int64_t C = a->out->ne[0];
    if (C < 1 || wgml_tensor_nrows(a->out) < 1 || wgml_tensor_nrows(a->y) < 1 || a->y->ne[0] != (int64_t)a->kernel * C)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                         "col2im: y '%s' is [%lld x %lld] and out '%s' [%lld x %lld]; needs rows, and y's of %d taps x "
                         "%lld channels (out's row length)",
                         nm(a->y), rows_of(a->y), (long long)a->y->ne[0], nm(a->out), rows_of(a->out), (long long)C,
                         a->kernel, (long long)C);
    if (a->bias && (st = check_vector(op, "bias", a->bias, C, a->out, err))) return st;
    return wgml_check_overlap(op, a->out, a->y, 0, err);
}

wgml_status wgml_validate_instance_norm(const wgml_instance_norm_args *a, int pos, wgml_error *err) {
    (void)pos;
    const char *op = "instance_norm";
    if (!a) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "instance_norm: no arguments");
    wgml_status st;
    if ((st = same_f32(op, 2, out_x, (const wgml_tensor *const[]){a->out, a->x}, err)) ||
        (st = wgml_check_overlap(op, a->out, a->x, 1, err)) ||
        (a->w && (st = check_vector(op, "w", a->w, a->x->ne[0], a->out, err))) ||
        (a->b && (st = check_vector(op, "b", a->b, a->x->ne[0], a->out, err))))
        return st;
    if (wgml_tensor_nrows(a->x) < 1)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "instance_norm: x '%s' has no rows", nm(a->x));
    if (!(a->eps >= 0) || !isfinite(a->eps))
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "instance_norm: eps %g; needs a finite number >= 0",
                         (double)a->eps);
    return WGML_OK;
}

wgml_status wgml_validate_lstm(const wgml_lstm_args *a, int pos, wgml_error *err) {
    (void)pos;
    const char *op = "lstm";
    if (!a) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "lstm: no arguments");
    wgml_status st;
    if ((st = check_arg(op, "out", a->out, WGML_F32, 0, err)) || (st = check_arg(op, "gx", a->gx, WGML_F32, 0, err)) ||
        (st = check_param(op, "hidden size", a->hidden, 1, 1 << 14, err)))
        return st;
    if (!a->w_hh || !a->w_hh->buf) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "lstm: w_hh is missing");
    if ((a->w_hh->type != WGML_F32 && a->w_hh->type != WGML_F16) || !wgml_tensor_is_contiguous(a->w_hh))
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                         "lstm: w_hh '%s' (the recurrent weight) is %s%s; needs contiguous F32 or F16", nm(a->w_hh),
                         wgml_tensor_is_contiguous(a->w_hh) ? "" : "a strided view of ",
                         wgml_dtype_name(a->w_hh->type));
    const int64_t H = a->hidden, dirs = a->bidirectional ? 2 : 1, T = wgml_tensor_nrows(a->gx);
    if (a->gx->ne[0] != dirs * 4 * H || T < 1)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                         "lstm: gx '%s' is [%lld x %lld]; needs rows of %lld (%lld directions x 4 gates x hidden %lld)",
                         nm(a->gx), (long long)T, (long long)a->gx->ne[0], (long long)(dirs * 4 * H), (long long)dirs,
                         (long long)H);
    if (a->w_hh->ne[0] != H || wgml_tensor_nrows(a->w_hh) != dirs * 4 * H)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "lstm: w_hh '%s' is [%lld x %lld]; needs [%lld x %lld]",
                         nm(a->w_hh), (long long)wgml_tensor_nrows(a->w_hh), (long long)a->w_hh->ne[0],
                         (long long)(dirs * 4 * H), (long long)H);
    if (a->out->ne[0] != dirs * H || wgml_tensor_nrows(a->out) != T)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "lstm: out '%s' is [%lld x %lld]; needs [%lld x %lld]",
                         nm(a->out), (long long)wgml_tensor_nrows(a->out), (long long)a->out->ne[0], (long long)T,
                         (long long)(dirs * H));
    if ((st = wgml_check_overlap(op, a->out, a->gx, 0, err))) return st;
    return wgml_check_overlap(op, a->out, a->w_hh, 0, err);
}

/* n_fft and hop of stft/istft, and the window. */
static wgml_status check_fft(const char *op, int n_fft, int hop, const wgml_tensor *window, const wgml_tensor *out,
                             wgml_error *err) {
    wgml_status st;
    if ((st = check_param(op, "n_fft", n_fft, 2, 1 << 16, err)) || (st = check_param(op, "hop", hop, 1, 1 << 16, err)))
        return st;
    if (n_fft % 2) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "%s: n_fft %d is odd", op, n_fft);
    return check_vector(op, "window", window, n_fft, out, err);
}

wgml_status wgml_validate_stft(const wgml_stft_args *a, int pos, wgml_error *err) {
    (void)pos;
    const char *op = "stft";
    if (!a) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "stft: no arguments");
    wgml_status st;
    if ((st = check_arg(op, "out", a->out, WGML_F32, 0, err)) || (st = check_signal(op, "x", a->x, err)) ||
        (st = check_fft(op, a->n_fft, a->hop, a->window, a->out, err)))
        return st;
    const int64_t L = a->x->ne[0], F = L / a->hop + 1, B = a->n_fft / 2 + 1;
    if (a->n_fft / 2 >= L)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                         "stft: x '%s' has %lld samples; needs more than %d to reflect-pad by n_fft / 2", nm(a->x),
                         (long long)L, a->n_fft / 2);
    if (wgml_tensor_nrows(a->out) != F || a->out->ne[0] != 2 * B)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                         "stft: out '%s' is [%lld x %lld]; needs [%lld x %lld] (frames x magnitude and phase)",
                         nm(a->out), (long long)wgml_tensor_nrows(a->out), (long long)a->out->ne[0], (long long)F,
                         (long long)(2 * B));
    return wgml_check_overlap(op, a->out, a->x, 0, err);
}

wgml_status wgml_validate_istft(const wgml_istft_args *a, int pos, wgml_error *err) {
    (void)pos;
    const char *op = "istft";
    if (!a) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "istft: no arguments");
    wgml_status st;
    if ((st = same_f32(op, 2, (const char *const[]){"mag", "phase"}, (const wgml_tensor *const[]){a->mag, a->phase},
                       err)) ||
        (st = check_signal(op, "out", a->out, err)) || (st = check_fft(op, a->n_fft, a->hop, a->window, a->out, err)))
        return st;
    const int64_t F = wgml_tensor_nrows(a->mag), B = a->n_fft / 2 + 1;
    if (a->mag->ne[0] != B || F < 2)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                         "istft: mag '%s' is [%lld x %lld]; needs at least 2 frames of %lld bins", nm(a->mag),
                         (long long)F, (long long)a->mag->ne[0], (long long)B);
    if (a->out->ne[0] != (int64_t)a->hop * (F - 1))
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                         "istft: out '%s' has %lld samples; needs %lld (hop x (frames - 1))", nm(a->out),
                         (long long)a->out->ne[0], (long long)a->hop * (F - 1));
    if ((st = wgml_check_overlap(op, a->out, a->mag, 0, err))) return st;
    return wgml_check_overlap(op, a->out, a->phase, 0, err);
}

wgml_status wgml_validate_nsf_source(const wgml_nsf_source_args *a, int pos, wgml_error *err) {
    (void)pos;
    const char *op = "nsf_source";
    if (!a) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "nsf_source: no arguments");
    wgml_status st;
    if ((st = check_signal(op, "f0", a->f0, err)) || (st = check_signal(op, "out", a->out, err)) ||
        (st = check_param(op, "harmonics", a->harmonics, 1, 64, err)) ||
        (st = check_param(op, "upp", a->upp, 1, 1 << 16, err)) ||
        (st = check_param(op, "sample_rate", a->sample_rate, 1, (1 << 24) - 1, err)) ||
        (st = check_vector(op, "w", a->w, a->harmonics, a->out, err)) ||
        (st = check_vector(op, "b", a->b, 1, a->out, err)))
        return st;
    if (a->out->ne[0] != a->f0->ne[0] * a->upp)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                         "nsf_source: out '%s' has %lld samples; needs %lld (f0's x upp)", nm(a->out),
                         (long long)a->out->ne[0], (long long)(a->f0->ne[0] * a->upp));
    if (!isfinite(a->amp) || !isfinite(a->noise_std) || !isfinite(a->voiced_threshold))
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                         "nsf_source: amp %g, noise_std %g, voiced_threshold %g; needs all finite", (double)a->amp,
                         (double)a->noise_std, (double)a->voiced_threshold);
    return wgml_check_overlap(op, a->out, a->f0, 0, err);
}

wgml_status wgml_op_validate(wgml_op op, const void *args, int pos, wgml_error *err) {
    switch (op) {
#define WGML_OP_CASE(name, NAME, args_t)                                                                              \
    case WGML_OP_##NAME: return wgml_validate_##name((const args_t *)args, pos, err);
        WGML_OPS(WGML_OP_CASE)
#undef WGML_OP_CASE
    case WGML_OP_COUNT: break;
    }
    return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "unknown op %d", (int)op);
}

void wgml_rope_angles(const wgml_rope *r, const float *freq_factors, int pos, float *cs) {
    for (int i = 0; i < r->n_rot / 2; i++) {
        /* theta_i = pos * scale * base^(-2i/n_rot) / factor_i, in double: the reference values */
        double theta = (double)pos * r->freq_scale * pow((double)r->freq_base, -2.0 * i / r->n_rot);
        if (freq_factors) theta /= freq_factors[i];
        cs[2 * i] = (float)cos(theta);
        cs[2 * i + 1] = (float)sin(theta);
    }
}

int wgml_op_weight_types_supported(wgml_backend *be, wgml_op op, const void *args) {
    if ((unsigned)op >= WGML_OP_COUNT) return 0;
    if (op == WGML_OP_MATMUL && args) {
        const wgml_matmul_args *mm = args;
        for (int i = 0; i < mm->n_w && i < WGML_MATMUL_MAX; i++)
            if (!mm->w[i] || !be->supports_type(be, mm->w[i]->type)) return 0;
    }
    if (op == WGML_OP_GET_ROWS && args) {
        const wgml_get_rows_args *g = args;
        if (!g->table || !be->supports_type(be, g->table->type)) return 0;
    }
    return 1;
}
