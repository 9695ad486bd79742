/*
 * cpu_attention.c - causal grouped-query attention over the KV cache.
 *
 * For the step's tokens t = 0..n-1 at positions p = pos + t:
 *   rotate q_t and k_t (RoPE), store k_t, v_t into cache row p,
 *   out_t[h] = sum_j softmax_j(scale * q_t[h] . K[j][g]) V[j][g],  j = 0..p,
 * where g = h / (n_head / n_head_kv) is the KV head that query head h shares.
 * Work is split over (token, head) pairs; each thread keeps its own score row.
 */
#include <math.h>
#include <string.h>

#include "backend/cpu/cpu_internal.h"
#include "backend/cpu/kernels.h"
#include "core/fp16.h"

typedef struct {
    const float *q;
    float *out;
    const uint8_t *kc, *vc;
    const cpu_type_kernels *kk; /* dot and to_float for the cache type */
    size_t row_bytes;           /* bytes of one head's slice of a cache row */
    int n, pos, n_head, n_kv, hd, n_ctx;
    float scale;
    float *scores; /* n_threads x (n_ctx + hd) */
} att_task;

static void att_run(void *p, int ith, int nth) {
    att_task *t = p;
    float *sc = t->scores + (size_t)ith * (size_t)(t->n_ctx + t->hd), *vrow = sc + t->n_ctx;
    int group = t->n_head / t->n_kv;
    size_t cache_row = t->row_bytes * (size_t)t->n_kv; /* bytes per cache row (all KV heads) */
    int f32 = t->kk->act_type == WGML_F32 && t->row_bytes == (size_t)t->hd * sizeof(float);
    int total = t->n * t->n_head;
    for (int job = ith; job < total; job += nth) {
        int tok = job / t->n_head, h = job % t->n_head, g = h / group;
        int len = t->pos + tok + 1;
        const float *q = t->q + (size_t)tok * t->n_head * t->hd + (size_t)h * t->hd;
        const uint8_t *kb = t->kc + (size_t)g * t->row_bytes, *vb = t->vc + (size_t)g * t->row_bytes;
        float mx = -INFINITY;
        for (int j = 0; j < len; j++) {
            float s = t->kk->dot(t->hd, kb + (size_t)j * cache_row, q) * t->scale;
            sc[j] = s;
            if (s > mx) mx = s;
        }
        double sum = 0;
        for (int j = 0; j < len; j++) {
            sc[j] = expf(sc[j] - mx);
            sum += sc[j];
        }
        float inv = (float)(1.0 / sum);
        float *o = t->out + (size_t)tok * t->n_head * t->hd + (size_t)h * t->hd;
        memset(o, 0, (size_t)t->hd * sizeof(float));
        for (int j = 0; j < len; j++) {
            float a = sc[j] * inv;
            const float *v = (const float *)(vb + (size_t)j * cache_row);
            if (!f32) {
                t->kk->to_float(vb + (size_t)j * cache_row, vrow, t->hd);
                v = vrow;
            }
            for (int d = 0; d < t->hd; d++) o[d] += a * v[d]; /* elementwise: vectorizes */
        }
    }
}

static void store_rows(uint8_t *cache, int f16, size_t row_elems, int first, const float *src, int n) {
    for (int t = 0; t < n; t++) {
        const float *s = src + (size_t)t * row_elems;
        if (f16) {
            uint16_t *d = (uint16_t *)cache + (size_t)(first + t) * row_elems;
            for (size_t i = 0; i < row_elems; i++) d[i] = wgml_f32_to_f16(s[i]);
        } else {
            memcpy((float *)cache + (size_t)(first + t) * row_elems, s, row_elems * sizeof(float));
        }
    }
}

void cpu_attention(wgml_backend *be, const wgml_attention *a) {
    cpu_backend *cb = (cpu_backend *)be;
    double t0 = cb->profiling ? cpu_now_ms() : 0;
    if (!a || !cpu_check(cb, "attention", a->q) || !cpu_check(cb, "attention", a->k) ||
        !cpu_check(cb, "attention", a->v) || !cpu_check(cb, "attention", a->out) ||
        !cpu_check(cb, "attention", a->k_cache) || !cpu_check(cb, "attention", a->v_cache))
        return;
    wgml_error e;
    wgml_status st = wgml_validate_attention(a, cb->step.pos, &e);
    if (st) {
        cpu_error(cb, st, "%s", e.message);
        return;
    }
    int n = (int)wgml_tensor_nrows(a->q), pos = cb->step.pos;
    int64_t kv_row = (int64_t)a->n_head_kv * a->head_dim;
    int n_ctx = (int)wgml_tensor_nrows(a->k_cache);
    int f16 = a->k_cache->type == WGML_F16;
    if (a->rope) {
        cpu_rope(be, a->q, a->n_head, a->head_dim, a->rope);
        cpu_rope(be, a->k, a->n_head_kv, a->head_dim, a->rope);
        if (cb->status) return;
    }
    store_rows(cpu_ptr(a->k_cache), f16, (size_t)kv_row, pos, cpu_ptr(a->k), n);
    store_rows(cpu_ptr(a->v_cache), f16, (size_t)kv_row, pos, cpu_ptr(a->v), n);

    float *scores = cpu_scratch(cb, (size_t)cb->n_threads * (size_t)(n_ctx + a->head_dim) * sizeof(float));
    if (!scores) return;
    const cpu_type_kernels *kk = cpu_kernels_get(a->k_cache->type);
    att_task t = {cpu_ptr(a->q), cpu_ptr(a->out), cpu_ptr(a->k_cache), cpu_ptr(a->v_cache), kk,
                  wgml_row_size(a->k_cache->type, a->head_dim), n, pos, a->n_head, a->n_head_kv, a->head_dim,
                  n_ctx, a->scale, scores};
    wgml_threadpool_run(cb->pool, att_run, &t);
    if (cb->profiling) cpu_profile_add(cb, "attention", cpu_now_ms() - t0);
}
