/*
 * validate.c - argument checks shared by every backend's ops, so that a bad
 * shape or type is reported the same way (and caught before any kernel runs)
 * on the CPU and on the GPU. Each returns WGML_OK or fills err.
 * Whether a view fits its buffer is checked by the backend (wgml_buffer is
 * backend-specific).
 */
#include <math.h>

#include "backend/backend.h"
#include "core/error.h"

static const char *nm(const wgml_tensor *t) { return t && t->name ? t->name : "?"; }

wgml_status wgml_check_type(const char *op, const wgml_tensor *t, uint32_t type, wgml_error *err) {
    if (!t || !t->buf) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "%s: missing tensor", op);
    if (t->type != type)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "%s: tensor '%s' must be %s, is %s", op, nm(t),
                         wgml_dtype_name(type), wgml_dtype_name(t->type));
    return WGML_OK;
}

wgml_status wgml_check_same_shape(const char *op, const wgml_tensor *a, const wgml_tensor *b, wgml_error *err) {
    if (a->ne[0] != b->ne[0] || wgml_tensor_nrows(a) != wgml_tensor_nrows(b))
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "%s: shapes differ: '%s' [%lld x %lld] vs '%s' [%lld x %lld]",
                         op, nm(a), (long long)a->ne[0], (long long)wgml_tensor_nrows(a), nm(b), (long long)b->ne[0],
                         (long long)wgml_tensor_nrows(b));
    return WGML_OK;
}

wgml_status wgml_validate_matmul(const wgml_matmul *mm, wgml_error *err) {
    wgml_status st;
    if (!mm) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "matmul: no arguments");
    if ((st = wgml_check_type("matmul", mm->x, WGML_F32, err))) return st;
    int64_t K = mm->x->ne[0], n = wgml_tensor_nrows(mm->x);
    if (mm->n_w < 1 || mm->n_w > WGML_MATMUL_MAX || (mm->epilogue == WGML_EPI_SWIGLU && mm->n_w != 2))
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "matmul: %d weights with epilogue %d", mm->n_w,
                         (int)mm->epilogue);
    if (mm->norm) {
        if ((st = wgml_check_type("matmul", mm->norm, WGML_F32, err))) return st;
        if (mm->norm->ne[0] != K)
            return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "matmul: norm weight '%s' has %lld elements, input rows %lld",
                             nm(mm->norm), (long long)mm->norm->ne[0], (long long)K);
    }
    for (int i = 0; i < mm->n_w; i++) {
        const wgml_tensor *w = mm->w[i], *o = mm->out[mm->epilogue == WGML_EPI_SWIGLU ? 0 : i];
        if (!w || !w->buf) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "matmul: weight %d missing", i);
        if ((st = wgml_check_type("matmul", o, WGML_F32, err))) return st;
        int64_t M = wgml_tensor_nrows(w);
        if (w->ne[0] != K || o->ne[0] != (mm->epilogue == WGML_EPI_SWIGLU ? wgml_tensor_nrows(mm->w[0]) : M) ||
            wgml_tensor_nrows(o) != n)
            return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                             "matmul: weight '%s' [%lld x %lld], input [%lld x %lld], output [%lld x %lld] do not fit",
                             nm(w), (long long)M, (long long)w->ne[0], (long long)n, (long long)K,
                             (long long)wgml_tensor_nrows(o), (long long)o->ne[0]);
        if (mm->bias[i]) {
            if ((st = wgml_check_type("matmul", mm->bias[i], WGML_F32, err))) return st;
            if (mm->bias[i]->ne[0] != M)
                return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "matmul: bias of '%s' does not have %lld elements",
                                 nm(w), (long long)M);
        }
    }
    if (mm->epilogue == WGML_EPI_SWIGLU && wgml_tensor_nrows(mm->w[0]) != wgml_tensor_nrows(mm->w[1]))
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "matmul: SwiGLU weights have different row counts");
    return WGML_OK;
}

wgml_status wgml_validate_rope(const wgml_tensor *x, int n_head, int head_dim, const wgml_rope *r, wgml_error *err) {
    wgml_status st = wgml_check_type("rope", x, WGML_F32, err);
    if (st) return st;
    if (!r || n_head <= 0 || head_dim <= 0 || (head_dim & 1) || r->n_rot < 0 || r->n_rot > head_dim || (r->n_rot & 1) ||
        x->ne[0] != (int64_t)n_head * head_dim || !(r->freq_base > 0) || !(r->freq_scale > 0))
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "rope: bad parameters (n_rot %d, head_dim %d, n_head %d, row %lld)",
                         r ? r->n_rot : 0, head_dim, n_head, (long long)x->ne[0]);
    if (r->freq_factors) {
        if ((st = wgml_check_type("rope", r->freq_factors, WGML_F32, err))) return st;
        if (r->freq_factors->ne[0] < r->n_rot / 2)
            return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "rope: %lld frequency factors for %d rotated dims",
                             (long long)r->freq_factors->ne[0], r->n_rot);
    }
    return WGML_OK;
}

wgml_status wgml_validate_attention(const wgml_attention *a, int pos, wgml_error *err) {
    wgml_status st;
    if (!a) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "attention: no arguments");
    if ((st = wgml_check_type("attention", a->q, WGML_F32, err)) || (st = wgml_check_type("attention", a->k, WGML_F32, err)) ||
        (st = wgml_check_type("attention", a->v, WGML_F32, err)) ||
        (st = wgml_check_type("attention", a->out, WGML_F32, err)))
        return st;
    if (!a->k_cache || !a->v_cache || !a->k_cache->buf || !a->v_cache->buf)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "attention: missing KV cache");
    int64_t n = wgml_tensor_nrows(a->q), qd = (int64_t)a->n_head * a->head_dim, kvd = (int64_t)a->n_head_kv * a->head_dim;
    int64_t n_ctx = wgml_tensor_nrows(a->k_cache);
    if (a->n_head <= 0 || a->n_head_kv <= 0 || a->n_head % a->n_head_kv || a->head_dim <= 0 || a->q->ne[0] != qd ||
        a->out->ne[0] != qd || a->k->ne[0] != kvd || a->v->ne[0] != kvd || a->k_cache->ne[0] != kvd ||
        a->v_cache->ne[0] != kvd || a->k_cache->type != a->v_cache->type ||
        (a->k_cache->type != WGML_F32 && a->k_cache->type != WGML_F16) || wgml_tensor_nrows(a->k) != n ||
        wgml_tensor_nrows(a->v) != n || wgml_tensor_nrows(a->out) != n || wgml_tensor_nrows(a->v_cache) != n_ctx ||
        !(a->scale > 0) || !isfinite(a->scale))
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "attention: inconsistent shapes or types");
    if (a->rope && (st = wgml_validate_rope(a->q, a->n_head, a->head_dim, a->rope, err))) return st;
    if (pos < 0 || pos + n > n_ctx)
        return wgml_fail(err, WGML_ERR_CONTEXT_FULL, "attention: positions %d..%lld exceed the cache of %lld", pos,
                         (long long)(pos + n - 1), (long long)n_ctx);
    return WGML_OK;
}

wgml_status wgml_validate_get_rows(const wgml_tensor *out, const wgml_tensor *table, const wgml_tensor *ids,
                                   wgml_error *err) {
    wgml_status st;
    if ((st = wgml_check_type("get_rows", out, WGML_F32, err)) || (st = wgml_check_type("get_rows", ids, WGML_I32, err)))
        return st;
    if (!table || !table->buf) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "get_rows: missing table");
    if (out->ne[0] != table->ne[0] || wgml_tensor_nelements(ids) < wgml_tensor_nrows(out))
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "get_rows: table '%s' rows of %lld, output rows of %lld, %lld ids",
                         nm(table), (long long)table->ne[0], (long long)out->ne[0], (long long)wgml_tensor_nelements(ids));
    return WGML_OK;
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
