/*
 * wg_ops_attention.c - RoPE and attention (ops.h) as dispatches:
 *
 *   rope_store.wgsl          RoPE in place, and with the KV-cache write (STORE); positions
 *                            from the step, or from a tensor (POS: general attention)
 *   attention.wgsl           today's causal attention over the KV cache (decode and prompts),
 *   attention_combine.wgsl   split over the cache rows at decode and merged
 *   attention_general.wgsl   general attention: no cache, bidirectional, sequence ids,
 *                            explicit positions, a mask, cross-attention (one workgroup
 *                            per query head and row)
 *
 * wg_op_attention takes the general path only when one of the general
 * fields is set (wgml_attention_is_general), so the LLMs' steps record the
 * same dispatches as before.
 */
#include "backend/webgpu/wg_internal.h"
#include "core/alloc.h"
#include "core/dtype.h"
#include "core/error.h"

#include <string.h>

#define ATTN_CHUNK 256 /* cache rows per split in decode attention */

typedef struct {
    uint32_t n, n_head, n_kv, hd, n_rot, neox, q_off, q_stride, k_off, k_stride, v_off, v_stride;
} rope_params;

/* A hash of the RoPE parameters a table was built for. */
static uint64_t rope_key(const wgml_rope *r, const float *ff) {
    uint64_t key = 0xcbf29ce484222325ull;
    float fields[3] = {(float)r->n_rot, r->freq_base, r->freq_scale};
    const uint8_t *bytes = (const uint8_t *)fields;
    for (size_t i = 0; i < sizeof fields; i++)
        key = (key ^ bytes[i]) * 0x100000001b3ull;
    for (int i = 0; ff && i < r->n_rot / 2; i++) {
        bytes = (const uint8_t *)&ff[i];
        for (int j = 0; j < 4; j++)
            key = (key ^ bytes[j]) * 0x100000001b3ull;
    }
    return key;
}

/* A GPU buffer of `rows` rows of (cos, sin) pairs: row i < split holds position i, row i >= split
 * position (i - split) * stride. */
static wgml_gpu_buffer *rope_build(wg_backend *wb, const wgml_rope *r, const float *ff, int rows, int stride,
                                   int split) {
    int half = r->n_rot / 2 > 0 ? r->n_rot / 2 : 1;
    size_t size = (size_t)rows * (size_t)half * 2 * sizeof(float);
    float *tab = wgml_malloc(size);
    if (!tab) {
        wg_error(wb, WGML_ERR_OUT_OF_MEMORY, "webgpu: out of memory for a RoPE table of %d positions", rows);
        return NULL;
    }
    for (int i = 0; i < rows; i++)
        wgml_rope_angles(r, ff, i < split ? i : (i - split) * stride, tab + (size_t)i * half * 2);
    wgml_error e;
    wgml_gpu_buffer *buf;
    if (wgml_gpu_buffer_create(wb->gpu, size, WGML_GPU_STORAGE, "wgml rope table", &buf, &e)) {
        wgml_free(tab);
        wgml_sticky_set(&wb->sticky, &e);
        return NULL;
    }
    wgml_gpu_write(wb->gpu, buf, 0, tab, size);
    wgml_free(tab);
    return buf;
}

/* Puts buf in a table's slot, destroying the table it replaces (and the bind groups that use it). */
static void replace_table(wg_backend *wb, wgml_gpu_buffer **slot, wgml_gpu_buffer *buf) {
    if (*slot) {
        wg_record_forget(wb, *slot);
        wgml_gpu_buffer_destroy(*slot);
    }
    *slot = buf;
}

/* The (cos, sin) table for positions [0, rows), rebuilt when the parameters change or more rows are needed. */
static wgml_gpu_buffer *rope_table(wg_backend *wb, const wgml_rope *r, int rows) {
    const float *ff =
        r->freq_factors ? (const float *)r->freq_factors->buf->host : NULL; /* upload source, still valid */
    uint64_t key = rope_key(r, ff);
    if (wb->rope && wb->rope_key == key && wb->rope_rows >= rows) return wb->rope;
    wgml_gpu_buffer *buf = rope_build(wb, r, ff, rows, 1, rows);
    if (!buf) return NULL;
    replace_table(wb, &wb->rope, buf);
    wb->rope_key = key;
    wb->rope_rows = rows;
    return buf;
}

/* The table for explicit positions p in [0, ROPE_LO^2) (rope_store.wgsl, POS): the angles of
 * p % ROPE_LO in rows [0, ROPE_LO), of (p / ROPE_LO) * ROPE_LO in rows [ROPE_LO, 2 ROPE_LO). */
#define ROPE_LO 1024
_Static_assert(ROPE_LO *(int64_t)ROPE_LO >= WGML_ATTN_MAX_POS, "the positions table must cover WGML_ATTN_MAX_POS");
static wgml_gpu_buffer *rope_pos_table(wg_backend *wb, const wgml_rope *r) {
    const float *ff = r->freq_factors ? (const float *)r->freq_factors->buf->host : NULL;
    uint64_t key = rope_key(r, ff);
    if (wb->rope_pos && wb->rope_pos_key == key) return wb->rope_pos;
    wgml_gpu_buffer *buf = rope_build(wb, r, ff, 2 * ROPE_LO, ROPE_LO, ROPE_LO);
    if (!buf) return NULL;
    replace_table(wb, &wb->rope_pos, buf);
    wb->rope_pos_key = key;
    return buf;
}

/* rope_store.wgsl's parameters with explicit positions (POS) */
typedef struct {
    rope_params r;
    uint32_t pos_off, lo_rows, n_ctx, pad0;
} rope_pos_params;

/* RoPE of q in place (kc NULL) or of q and k with the KV-cache write; positions step.pos + t (table of
 * table_rows rows), or pos[t] when pos is given (then the cache row is pos[t]). */
static void rope_dispatch(wg_backend *wb, const wgml_tensor *q, const wgml_tensor *k, const wgml_tensor *v,
                          const wgml_tensor *kc, const wgml_tensor *vc, int n_head, int n_kv, int hd,
                          const wgml_rope *r, int table_rows, const wgml_tensor *pos) {
    int store = kc != NULL;
    rope_pos_params pp = {.r = {.n = (uint32_t)wgml_tensor_nrows(q),
                                .n_head = (uint32_t)n_head,
                                .n_kv = store ? (uint32_t)n_kv : 0,
                                .hd = (uint32_t)hd,
                                .n_rot = r ? (uint32_t)r->n_rot : 0,
                                .neox = r ? (uint32_t)r->neox : 0,
                                .q_stride = (uint32_t)q->ne[0]},
                          .lo_rows = ROPE_LO,
                          .n_ctx = store ? (uint32_t)wgml_tensor_nrows(kc) : 0};
    rope_params *p = &pp.r;
    if (!wg_act(wb, "rope", q, &p->q_off)) return;
    if (pos && !wg_act(wb, "attention", pos, &pp.pos_off)) return;
    wgml_gpu_buffer *tab = !r || r->n_rot <= 0 ? wb->dummy
                           : pos               ? rope_pos_table(wb, r)
                                               : rope_table(wb, r, table_rows);
    if (!tab) return;
    wgml_gpu_binding b[7] = {wg_bind(2, q), {3, tab, 0, 0}};
    int nb = 2;
    if (store) {
        uint32_t kc_off, vc_off;
        if (!wg_act(wb, "attention", k, &p->k_off) || !wg_act(wb, "attention", v, &p->v_off) ||
            !wg_act(wb, "attention", kc, &kc_off) || !wg_act(wb, "attention", vc, &vc_off))
            return;
        if (kc_off || vc_off) { /* the kernel addresses cache rows from element 0 */
            wg_error(wb, WGML_ERR_INVALID_ARGUMENT,
                     "attention: k_cache '%s' starts at element %u of its buffer and v_cache '%s' at %u; on WebGPU "
                     "both need to start at element 0",
                     kc->name ? kc->name : "?", kc_off, vc->name ? vc->name : "?", vc_off);
            return;
        }
        p->k_stride = (uint32_t)k->ne[0];
        p->v_stride = (uint32_t)v->ne[0];
        b[nb++] = wg_bind(4, k);
        b[nb++] = wg_bind(5, v);
        b[nb++] = wg_bind(6, kc);
        b[nb++] = wg_bind(7, vc);
    }
    if (pos) b[nb++] = wg_bind(8, pos);
    wgml_gpu_kernel *kr = wg_get_kernel(wb, store ? WGK_ROPE_STORE : WGK_ROPE, 0, pos ? WGF_ROPE_POS : 0);
    if (!kr) return;
    uint64_t threads = (uint64_t)p->n * (p->n_head + p->n_kv) * (p->hd / 2);
    if (pos)
        wg_dispatch_kernel(wb, kr, &pp, sizeof pp, b, nb, wg_div_up(threads, 64), 1, 1);
    else
        wg_dispatch_kernel(wb, kr, p, sizeof *p, b, nb, wg_div_up(threads, 64), 1, 1);
}

void wg_op_rope(wg_backend *wb, const wgml_rope_args *a) {
    const wgml_rope *r = a->rope;
    if (r->freq_factors && !wg_weight(wb, "rope", r->freq_factors)) return;
    rope_dispatch(wb, a->x, NULL, NULL, NULL, NULL, a->n_head, 0, a->head_dim, r,
                  wb->step.pos + (int)wgml_tensor_nrows(a->x), NULL);
}

typedef struct {
    uint32_t n_head, n_kv, hd, n_splits, q_off, q_stride, o_off, o_stride, chunk;
    float scale;
    uint32_t pad0, pad1;
} attn_params;

/* ---- general attention (attention_general.wgsl) ---- */

typedef struct {
    uint32_t n_head, n_kv, hd, n_keys, q_off, q_stride, o_off, o_stride, k_off, v_off, kv_stride, seq_off, kseq_off,
        pos_off, mask_off, mask_stride;
    float scale;
    uint32_t range_off, pad1, pad2;
} gen_params;

/* The general case (wgml_attention_is_general), after wg_op_attention's checks. */
static void attention_general(wg_backend *wb, const wgml_attention_args *a) {
    const int cache = a->k_cache != NULL, causal = !a->bidirectional;
    /* WebGPU forbids binding the buffer a dispatch writes a second time */
    const wgml_tensor *in[] = {a->q, a->k, a->v, a->k_cache, a->v_cache, a->seq, a->kv_seq, a->pos, a->mask, a->kv_range};
    for (size_t i = 0; i < sizeof in / sizeof in[0]; i++)
        if (in[i] && in[i]->buf == a->out->buf) {
            wg_error(wb, WGML_ERR_UNSUPPORTED,
                     "attention: on WebGPU the output '%s' must not share a buffer with input '%s'",
                     a->out->name ? a->out->name : "?", in[i]->name ? in[i]->name : "?");
            return;
        }
    if (a->rope && a->rope->freq_factors && !wg_weight(wb, "attention", a->rope->freq_factors)) return;
    const int n = (int)wgml_tensor_nrows(a->q), n_keys = (int)wgml_tensor_nrows(cache ? a->k_cache : a->k);
    /* positions: RoPE of q and k (in place, or on the way into the cache) and the cache write */
    if (cache) {
        rope_dispatch(wb, a->q, a->k, a->v, a->k_cache, a->v_cache, a->n_head, a->n_head_kv, a->head_dim, a->rope,
                      n_keys, a->pos);
    } else if (a->rope) {
        rope_dispatch(wb, a->q, NULL, NULL, NULL, NULL, a->n_head, 0, a->head_dim, a->rope, wb->step.pos + n, a->pos);
        rope_dispatch(wb, a->k, NULL, NULL, NULL, NULL, a->n_head_kv, 0, a->head_dim, a->rope, wb->step.pos + n,
                      a->pos);
    }
    gen_params p = {.n_head = (uint32_t)a->n_head,
                    .n_kv = (uint32_t)a->n_head_kv,
                    .hd = (uint32_t)a->head_dim,
                    .n_keys = (uint32_t)n_keys,
                    .q_stride = (uint32_t)a->q->ne[0],
                    .o_stride = (uint32_t)a->out->ne[0],
                    .kv_stride = (uint32_t)a->k->ne[0],
                    .scale = a->scale};
    const wgml_tensor *kr = cache ? a->k_cache : a->k, *vr = cache ? a->v_cache : a->v;
    if (!wg_act(wb, "attention", a->q, &p.q_off) || !wg_act(wb, "attention", a->out, &p.o_off) ||
        !wg_act(wb, "attention", kr, &p.k_off) || !wg_act(wb, "attention", vr, &p.v_off))
        return;
    wgml_gpu_binding b[9] = {wg_bind(2, a->q), wg_bind(3, kr), wg_bind(4, vr), wg_bind(5, a->out)};
    int nb = 4;
    uint32_t flags = (cache ? WGF_ATT_CACHE : 0) | (causal ? WGF_ATT_CAUSAL : 0);
    if (a->seq) {
        if (!wg_act(wb, "attention", a->seq, &p.seq_off)) return;
        b[nb++] = wg_bind(6, a->seq);
        flags |= WGF_ATT_SEQ;
    }
    if (a->kv_seq) {
        if (!wg_act(wb, "attention", a->kv_seq, &p.kseq_off)) return;
        b[nb++] = wg_bind(7, a->kv_seq);
        flags |= WGF_ATT_KV_SEQ;
    }
    if (a->pos && causal) { /* bidirectional attention uses positions for RoPE only */
        if (!wg_act(wb, "attention", a->pos, &p.pos_off)) return;
        b[nb++] = wg_bind(8, a->pos);
        flags |= WGF_ATT_POS;
    }
    if (a->mask) {
        if (!wg_act(wb, "attention", a->mask, &p.mask_off)) return;
        p.mask_stride = (uint32_t)a->mask->ne[0];
        b[nb++] = wg_bind(9, a->mask);
        flags |= WGF_ATT_MASK;
    }
    if (a->kv_range) {
        if (!wg_act(wb, "attention", a->kv_range, &p.range_off)) return;
        b[nb++] = wg_bind(10, a->kv_range);
        flags |= WGF_ATT_RANGE;
    }
    if (nb > (int)wb->info->max_storage_buffers_per_stage) {
        wg_error(wb, WGML_ERR_UNSUPPORTED, "attention: %d storage buffers, the device allows %u per stage", nb,
                 wb->info->max_storage_buffers_per_stage);
        return;
    }
    wgml_gpu_kernel *k = wg_get_kernel(wb, WGK_ATTN_GENERAL, 0, flags);
    if (k) wg_dispatch_kernel(wb, k, &p, sizeof p, b, nb, (uint32_t)a->n_head, (uint32_t)n, 1);
}

/* ---- attention ---- */

void wg_op_attention(wg_backend *wb, const wgml_attention_args *a) {
    wgml_backend *be = &wb->base;
    if (a->k_cache && a->k_cache->type != be->kv_type) {
        wg_error(wb, WGML_ERR_INVALID_ARGUMENT, "attention: this device's KV cache must be %s",
                 wgml_dtype_name(be->kv_type));
        return;
    }
    if (a->head_dim > 256 || (a->head_dim & 1)) {
        wg_error(wb, WGML_ERR_UNSUPPORTED, "attention: head size %d (even, at most 256 on WebGPU)", a->head_dim);
        return;
    }
    if (a->k->type != WGML_F32) { /* f16 cross-attention keys (wg_supports says so too) */
        wg_error(wb, WGML_ERR_UNSUPPORTED, "attention: k and v must be f32 on WebGPU, '%s' is %s",
                 a->k->name ? a->k->name : "?", wgml_dtype_name(a->k->type));
        return;
    }
    if (wgml_attention_is_general(a)) {
        attention_general(wb, a);
        return;
    }
    wgml_error e;
    if (a->rope && a->rope->freq_factors && !wg_weight(wb, "attention", a->rope->freq_factors)) return;
    int n = (int)wgml_tensor_nrows(a->q), n_ctx = (int)wgml_tensor_nrows(a->k_cache);
    rope_dispatch(wb, a->q, a->k, a->v, a->k_cache, a->v_cache, a->n_head, a->n_head_kv, a->head_dim, a->rope, n_ctx,
                  NULL);

    int kv_len = wb->step.pos + n;
    uint32_t splits = n == 1 ? wg_div_up((uint64_t)kv_len, ATTN_CHUNK) : 1;
    attn_params p = {.n_head = (uint32_t)a->n_head,
                     .n_kv = (uint32_t)a->n_head_kv,
                     .hd = (uint32_t)a->head_dim,
                     .n_splits = splits,
                     .q_stride = (uint32_t)a->q->ne[0],
                     .o_stride = (uint32_t)a->out->ne[0],
                     .chunk = splits > 1 ? ATTN_CHUNK : (uint32_t)n_ctx,
                     .scale = a->scale};
    if (!wg_act(wb, "attention", a->q, &p.q_off) || !wg_act(wb, "attention", a->out, &p.o_off)) return;
    wgml_gpu_buffer *part = wb->dummy;
    if (splits > 1) {
        /* room for the most splits this cache can need, so it is allocated once */
        uint64_t need = (uint64_t)a->n_head * wg_div_up((uint64_t)n_ctx, ATTN_CHUNK) * (uint64_t)(a->head_dim + 2) * 4;
        if (!wb->part || wb->part_size < need) {
            if (wb->part) {
                wg_record_forget(wb, wb->part);
                wgml_gpu_buffer_destroy(wb->part);
                wb->part = NULL;
            }
            if (wgml_gpu_buffer_create(wb->gpu, need, WGML_GPU_STORAGE, "wgml attention partials", &wb->part, &e)) {
                wgml_sticky_set(&wb->sticky, &e);
                return;
            }
            wb->part_size = need;
        }
        part = wb->part;
    }
    wgml_gpu_kernel *k = wg_get_kernel(wb, WGK_ATTENTION, 0, 0);
    if (!k) return;
    wgml_gpu_binding b[5] = {
        wg_bind(2, a->q), wg_bind(3, a->k_cache), wg_bind(4, a->v_cache), wg_bind(5, a->out), {6, part, 0, 0}};
    wg_dispatch_kernel(wb, k, &p, sizeof p, b, 5, (uint32_t)a->n_head, (uint32_t)n, splits);
    if (splits > 1) {
        wgml_gpu_kernel *c = wg_get_kernel(wb, WGK_ATTN_COMBINE, 0, 0);
        if (!c) return;
        wgml_gpu_binding cb[2] = {wg_bind(5, a->out), {6, part, 0, 0}};
        wg_dispatch_kernel(wb, c, &p, sizeof p, cb, 2, (uint32_t)a->n_head, (uint32_t)n, 1);
    }
}
