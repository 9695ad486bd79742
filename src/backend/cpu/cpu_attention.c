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
#include "core/fp16.h"

typedef struct {
    const float *q;
    float *out;
    const uint8_t *kc, *vc;
    int f16; /* caches hold f16 */
    int n, pos, n_head, n_kv, hd, n_ctx;
    float scale;
    float *scores; /* n_threads x n_ctx */
} att_task;

static float cache_at(const uint8_t *c, int f16, size_t i) {
    if (f16) {
        uint16_t h;
        memcpy(&h, c + i * 2, 2);
        return wgml_f16_to_f32(h);
    }
    float f;
    memcpy(&f, c + i * 4, 4);
    return f;
}

static void att_run(void *p, int ith, int nth) {
    att_task *t = p;
    float *sc = t->scores + (size_t)ith * t->n_ctx;
    int group = t->n_head / t->n_kv;
    size_t kv_row = (size_t)t->n_kv * t->hd;
    int total = t->n * t->n_head;
    for (int job = ith; job < total; job += nth) {
        int tok = job / t->n_head, h = job % t->n_head, g = h / group;
        int len = t->pos + tok + 1;
        const float *q = t->q + (size_t)tok * t->n_head * t->hd + (size_t)h * t->hd;
        float mx = -INFINITY;
        for (int j = 0; j < len; j++) {
            size_t base = (size_t)j * kv_row + (size_t)g * t->hd;
            float s = 0;
            if (t->f16) {
                for (int d = 0; d < t->hd; d++) s += q[d] * cache_at(t->kc, 1, base + d);
            } else {
                const float *k = (const float *)t->kc + base;
                for (int d = 0; d < t->hd; d++) s += q[d] * k[d];
            }
            s *= t->scale;
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
            size_t base = (size_t)j * kv_row + (size_t)g * t->hd;
            if (t->f16) {
                for (int d = 0; d < t->hd; d++) o[d] += a * cache_at(t->vc, 1, base + d);
            } else {
                const float *v = (const float *)t->vc + base;
                for (int d = 0; d < t->hd; d++) o[d] += a * v[d];
            }
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

    float *scores = cpu_scratch(cb, (size_t)cb->n_threads * (size_t)n_ctx * sizeof(float));
    if (!scores) return;
    att_task t = {cpu_ptr(a->q), cpu_ptr(a->out), cpu_ptr(a->k_cache), cpu_ptr(a->v_cache), f16, n, pos,
                  a->n_head, a->n_head_kv, a->head_dim, n_ctx, a->scale, scores};
    wgml_threadpool_run(cb->pool, att_run, &t);
    if (cb->profiling) cpu_profile_add(cb, "attention", cpu_now_ms() - t0);
}
