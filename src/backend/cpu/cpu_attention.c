/*
 * cpu_attention.c - causal grouped-query attention over the KV cache.
 *
 * For the step's tokens t = 0..n-1 at positions p = pos + t:
 *   rotate q_t and k_t (RoPE), store k_t, v_t into cache row p,
 *   out_t[h] = sum_j softmax_j(scale * q_t[h] . K[j][g]) V[j][g],  j = 0..p,
 * where g = h / (n_head / n_head_kv) is the KV head that query head h shares.
 * Work is split over (token, head) pairs; each thread keeps its own score row.
 *
 * General attention (ops.h: no cache, bidirectional, sequence ids, explicit
 * positions, a mask, cross-attention, key windows) takes att_general. The
 * exact backend runs it as plain C in double, one (query row, KV head) per
 * job: the reference every GPU is compared with. The fast backend runs it in
 * f32 on blocks of query rows that share their key rows (gf_run, with the
 * SIMD kernel cpu_attn_rows_job): encoders' packed batches are its main use.
 * Cross-attention of a few query rows over long keys (a decoder step's rows
 * over an encoder's output) takes its decode mode instead (att_decode).
 * Today's arguments never reach either.
 */
#include "backend/cpu/cpu_internal.h"
#include "backend/cpu/kernels.h"
#include "core/fp16.h"

#include <math.h>
#include <string.h>

/* Fewest cache rows a split-K chunk gets: below this the merge costs more
 * than the balance gains. */
#define ATT_MIN_CHUNK 64

/* Tokens from which a causal step over the cache goes by blocks of query
 * rows (the general path's fast mode) rather than token by token. */
#define ATT_BLOCK_MIN_ROWS 8

typedef struct {
    const float *q;
    float *out;
    const uint8_t *kc, *vc;
    cpu_attn_fn fn;
    int f16;
    size_t head_bytes; /* bytes of one KV head's slice of a cache row */
    size_t row_bytes;  /* bytes of a cache row (all KV heads) */
    int n, pos, n_head, n_kv, hd, group;
    int nchunk, clen; /* split-K: each (token, KV head) in nchunk chunks of clen rows */
    float scale;
    float *work;     /* per thread: group * clen + hd scores and row, 2 * group m and l */
    size_t work_len; /* floats per thread */
    float *part;     /* nchunk > 1: per (token, KV head, chunk) group m, group l, group x hd o */
} att_task;

static size_t part_len(const att_task *t) { return (size_t)t->group * (size_t)(t->hd + 2); }

/* one (token, KV head, chunk) job per step: the kernel over that chunk's rows */
static void att_run(void *p, int ith, int nth) {
    const att_task *t = p;
    float *w = t->work + (size_t)ith * t->work_len;
    const int total = t->n * t->n_kv * t->nchunk;
    for (int job = ith; job < total; job += nth) {
        const int c = job % t->nchunk, g = job / t->nchunk % t->n_kv, tok = job / t->nchunk / t->n_kv;
        const int len_all = t->pos + tok + 1, j0 = c * t->clen;
        const int len = len_all - j0 < t->clen ? len_all - j0 : t->clen;
        const size_t qo = ((size_t)tok * t->n_head + (size_t)g * t->group) * t->hd;
        float *m, *l, *o;
        if (t->nchunk == 1) {
            m = w + (size_t)t->group * t->clen + t->hd, l = m + t->group, o = t->out + qo;
        } else {
            m = t->part + ((size_t)(tok * t->n_kv + g) * t->nchunk + c) * part_len(t);
            l = m + t->group, o = l + t->group;
        }
        if (len <= 0) { /* a chunk past this token's causal end */
            for (int h = 0; h < t->group; h++)
                m[h] = -INFINITY, l[h] = 0;
            memset(o, 0, (size_t)t->group * t->hd * sizeof(float));
            continue;
        }
        const cpu_attn_job job_args = {
            .hd = t->hd,
            .ng = t->group,
            .len = len,
            .f16 = t->f16,
            .k = t->kc + (size_t)j0 * t->row_bytes + (size_t)g * t->head_bytes,
            .v = t->vc + (size_t)j0 * t->row_bytes + (size_t)g * t->head_bytes,
            .stride = t->row_bytes,
            .q = t->q + qo,
            .scale = t->scale,
            .s = w,
            .m = m,
            .l = l,
            .o = o,
        };
        t->fn(&job_args);
        if (t->nchunk == 1)
            for (int h = 0; h < t->group; h++) {
                const float inv = 1.0f / l[h];
                for (int d = 0; d < t->hd; d++)
                    o[(size_t)h * t->hd + d] *= inv;
            }
    }
}

/* split-K: out = sum_c o_c e^(m_c - M) / sum_c l_c e^(m_c - M), M = max_c m_c */
static void att_merge(void *p, int ith, int nth) {
    const att_task *t = p;
    for (int job = ith; job < t->n * t->n_kv; job += nth) {
        const float *base = t->part + (size_t)job * t->nchunk * part_len(t);
        for (int h = 0; h < t->group; h++) {
            float mx = -INFINITY, sum = 0;
            for (int c = 0; c < t->nchunk; c++)
                mx = fmaxf(mx, base[c * part_len(t) + h]);
            float *out = t->out + ((size_t)job * t->group + h) * t->hd; /* job = tok * n_kv + g */
            memset(out, 0, (size_t)t->hd * sizeof(float));
            for (int c = 0; c < t->nchunk; c++) {
                const float *pc = base + c * part_len(t);
                if (pc[t->group + h] == 0) continue; /* empty chunk */
                const float f = expf(pc[h] - mx);
                sum += pc[t->group + h] * f;
                const float *o = pc + 2 * t->group + (size_t)h * t->hd;
                for (int d = 0; d < t->hd; d++)
                    out[d] += f * o[d];
            }
            const float inv = 1.0f / sum;
            for (int d = 0; d < t->hd; d++)
                out[d] *= inv;
        }
    }
}

typedef struct {
    uint8_t *cache;
    int f16, first;
    size_t row_elems;
    const float *src;
    cpu_to_f16_fn to_f16;
} store_task;

static void store_range(void *p, int64_t lo, int64_t hi, int ith) {
    (void)ith;
    const store_task *t = p;
    for (int64_t r = lo; r < hi; r++) {
        const float *s = t->src + (size_t)r * t->row_elems;
        if (t->f16)
            t->to_f16(s, (uint16_t *)t->cache + (size_t)(t->first + r) * t->row_elems, (int64_t)t->row_elems);
        else
            memcpy((float *)t->cache + (size_t)(t->first + r) * t->row_elems, s, t->row_elems * sizeof(float));
    }
}

/* n rows of src into cache rows first.. (f16: rounded to nearest even, the
 * bits of wgml_f32_to_f16 on every instruction set), rows shared by the pool. */
static void store_rows(cpu_backend *cb, uint8_t *cache, int f16, size_t row_elems, int first, const float *src, int n) {
    store_task t = {cache, f16, first, row_elems, src, cpu_kernels_to_f16()};
    if (n == 1)
        store_range(&t, 0, 1, 0);
    else
        wgml_threadpool_run_range(cb->pool, store_range, &t, n, 1);
}

/* ---- general attention (ops.h): the exact reference, plain C ---- */

typedef struct {
    const float *q;
    float *out;
    const uint8_t *kb, *vb; /* key row 0 of K and V: the caches' or k's and v's */
    size_t krow;            /* bytes from one key row to the next */
    int f16;                /* key rows in fp16 (an f16 cache, or f16 cross-attention keys) */
    int n, n_keys, n_head, n_kv, hd, group, causal, cache;
    const int32_t *qpos;         /* position of each query row */
    const int32_t *seq, *kv_seq; /* NULL: no sequence ids */
    const float *mask;           /* NULL: none; else [n][n_keys] */
    const int32_t *range;        /* NULL: all key rows; else [n][2] windows */
    float scale;
    double *work;    /* per thread: group * n_keys scores, group * hd sums, hd floats of a row */
    size_t work_len; /* doubles per thread */
} gen_task;

/* key row j as floats (into tmp when the cache holds fp16) */
static const float *gen_row(const gen_task *t, const uint8_t *base, int j, int g, float *tmp) {
    const uint8_t *row = base + (size_t)j * t->krow;
    if (!t->f16) return (const float *)row + (size_t)g * t->hd;
    const uint16_t *h = (const uint16_t *)row + (size_t)g * t->hd;
    for (int d = 0; d < t->hd; d++)
        tmp[d] = wgml_f16_to_f32(h[d]);
    return tmp;
}

/* one (query row, KV head) job per step: scores in double for the group's heads over the visible key rows */
static void gen_run(void *p, int ith, int nth) {
    const gen_task *t = p;
    double *s = t->work + (size_t)ith * t->work_len, *acc = s + (size_t)t->group * t->n_keys;
    float *tmp = (float *)(acc + (size_t)t->group * t->hd);
    for (int job = ith; job < t->n * t->n_kv; job += nth) {
        const int r = job / t->n_kv, g = job % t->n_kv, qp = t->qpos[r];
        /* with a cache key row j is at position j; without, causal keys are q's rows (positions qpos) */
        int end = t->n_keys;
        if (t->causal && t->cache && qp + 1 < end) end = qp + 1;
        int lo = 0;
        if (t->range) {
            int64_t a = t->range[2 * r], b = t->range[2 * r + 1];
            lo = a < 0 ? 0 : a > end ? end : (int)a;
            if (b < end) end = b < lo ? lo : (int)b;
        }
        const float *qh = t->q + ((size_t)r * t->n_head + (size_t)g * t->group) * t->hd;
        int any = 0;
        for (int j = lo; j < end; j++) {
            double *sj = s + j; /* head h's score at s[h * n_keys + j] */
            int vis = 1;
            if (t->seq && t->kv_seq[j] != t->seq[r]) vis = 0;
            if (vis && t->causal && !t->cache && t->qpos[j] > qp) vis = 0;
            const float mk = t->mask ? t->mask[(size_t)r * t->n_keys + j] : 0.0f;
            if (mk < WGML_ATTN_MASK_HIDE) vis = 0;
            if (!vis) {
                for (int h = 0; h < t->group; h++)
                    sj[(size_t)h * t->n_keys] = -INFINITY;
                continue;
            }
            any = 1;
            const float *k = gen_row(t, t->kb, j, g, tmp);
            for (int h = 0; h < t->group; h++) {
                const float *qq = qh + (size_t)h * t->hd;
                double dot = 0;
                for (int d = 0; d < t->hd; d++)
                    dot += (double)qq[d] * k[d];
                sj[(size_t)h * t->n_keys] = dot * t->scale + mk;
            }
        }
        float *o = t->out + ((size_t)r * t->n_head + (size_t)g * t->group) * t->hd;
        if (!any) { /* no key row visible: zeros */
            memset(o, 0, (size_t)t->group * t->hd * sizeof(float));
            continue;
        }
        for (int h = 0; h < t->group; h++) {
            double *sh = s + (size_t)h * t->n_keys, mx = -INFINITY, sum = 0;
            for (int j = lo; j < end; j++)
                mx = sh[j] > mx ? sh[j] : mx;
            for (int j = lo; j < end; j++)
                sum += sh[j] = sh[j] == -INFINITY ? 0 : exp(sh[j] - mx);
            for (int j = lo; j < end; j++)
                sh[j] /= sum;
        }
        memset(acc, 0, (size_t)t->group * t->hd * sizeof(double));
        for (int j = lo; j < end; j++) {
            int used = 0; /* not hidden (nor underflowed) for some head of the group */
            for (int h = 0; h < t->group; h++)
                used |= s[(size_t)h * t->n_keys + j] != 0;
            if (!used) continue;
            const float *v = gen_row(t, t->vb, j, g, tmp);
            for (int h = 0; h < t->group; h++) {
                const double pj = s[(size_t)h * t->n_keys + j];
                double *ah = acc + (size_t)h * t->hd;
                for (int d = 0; d < t->hd; d++)
                    ah[d] += pj * v[d];
            }
        }
        for (int i = 0; i < t->group * t->hd; i++)
            o[i] = (float)acc[i];
    }
}

/* ---- general attention, fast mode: f32 in blocks of query rows ----
 *
 * Consecutive query rows whose windows of key rows nearly coincide (the rows
 * of one packed sequence, a causal step's rows over a cache) form a block of
 * up to CPU_ATTN_ROWS rows over the union of their windows, so that each K
 * and V row is loaded once for the whole block (cpu_attn_rows_job). What a
 * row may not see inside that span (another row's window, another sequence,
 * a later position, the mask) becomes a per-(key, row) bias, built once per
 * job for all of its heads, and skipped when it hides nothing. The work is
 * then ~ the sum of the blocks' spans times their rows, not n * n_keys. */

typedef struct {
    int r0, nr;  /* query rows r0..r0+nr-1 */
    int lo, end; /* the union of their windows (lo == end: none sees a key) */
    int uniform; /* every row's window is the union */
} gf_block;

typedef struct {
    const float *q;
    float *out;
    const uint8_t *kb, *vb; /* key row 0 of K and V: the caches' or k's and v's */
    size_t krow;            /* bytes from one key row to the next */
    int f16;
    int n_keys, n_head, hd, group, causal, cache;
    const int32_t *qpos, *seq, *kv_seq, *range;
    const float *mask;
    float scale;
    cpu_attn_rows_fn fn;
    const gf_block *blk;
    int nblk, hpc, nhc;    /* jobs: nblk blocks x nhc chunks of hpc heads */
    float *work;           /* per thread: bias, scores and Q^T; with an f16 cache, K and V rows as f32 */
    size_t work_len, span; /* floats per thread; the widest block's key rows */
} gf_task;

/* query row r's window of key rows [*lo, *end), as gen_run computes it */
static void gf_window(const gf_task *t, int r, int *lo, int *end) {
    int e = t->n_keys, l = 0;
    if (t->causal && t->cache && t->qpos[r] + 1 < e) e = t->qpos[r] + 1;
    if (t->range) {
        int64_t a = t->range[2 * r], b = t->range[2 * r + 1];
        l = a < 0 ? 0 : a > e ? e : (int)a;
        if (b < e) e = b < l ? l : (int)b;
    }
    *lo = l, *end = e;
}

/* Splits the query rows into blocks; returns their count. A row joins the
 * block before it when the union of windows stays within CPU_ATTN_ROWS keys
 * of the widest one (rows of one sequence, causal rows one key apart), so a
 * block never spends much on keys most of its rows do not see. */
static int gf_blocks(const gf_task *t, int n, gf_block *blk, int *span) {
    int nb = 0, widest = 0;
    *span = 0;
    for (int r = 0; r < n; r++) {
        int lo, end;
        gf_window(t, r, &lo, &end);
        gf_block *b = nb ? &blk[nb - 1] : NULL;
        if (b && b->nr < CPU_ATTN_ROWS) {
            if (lo >= end) { /* sees nothing: fits any block (its lane comes out zeros) */
                b->nr++, b->uniform &= b->lo == b->end;
                continue;
            }
            if (b->lo == b->end) { /* the block so far sees nothing: its rows' lanes are hidden */
                b->nr++, b->lo = lo, b->end = end, b->uniform = 0, widest = end - lo;
                if (widest > *span) *span = widest;
                continue;
            }
            const int ulo = lo < b->lo ? lo : b->lo, uend = end > b->end ? end : b->end;
            const int w = end - lo > widest ? end - lo : widest;
            if (uend - ulo <= w + CPU_ATTN_ROWS) {
                b->uniform &= lo == b->lo && end == b->end;
                b->nr++, b->lo = ulo, b->end = uend, widest = w;
                if (uend - ulo > *span) *span = uend - ulo;
                continue;
            }
        }
        blk[nb++] = (gf_block){r, 1, lo < end ? lo : 0, lo < end ? end : 0, 1};
        widest = lo < end ? end - lo : 0;
        if (widest > *span) *span = widest;
    }
    return nb;
}

/* The block's bias [span][CPU_ATTN_ROWS] into w: the mask, or -inf for a key
 * a row does not see; NULL when it would be all zeros. */
static const float *gf_bias(const gf_task *t, const gf_block *b, float *w) {
    const int R = CPU_ATTN_ROWS, len = b->end - b->lo;
    int seq_hides = 0;
    if (t->seq) { /* one id for every row and key (a packed sequence's block): nothing to hide */
        const int32_t id = t->seq[b->r0];
        for (int i = 1; i < b->nr; i++)
            seq_hides |= t->seq[b->r0 + i] != id;
        for (int j = b->lo; j < b->end && !seq_hides; j++)
            seq_hides |= t->kv_seq[j] != id;
    }
    if (b->uniform && !seq_hides && !t->mask && !(t->causal && !t->cache)) return NULL;
    for (int i = 0; i < R; i++) {
        const int r = b->r0 + i;
        if (i >= b->nr) { /* unused lane: finite */
            for (int j = 0; j < len; j++)
                w[(size_t)j * R + i] = 0;
            continue;
        }
        int lo, end;
        gf_window(t, r, &lo, &end);
        const int qp = t->qpos[r];
        for (int j = b->lo; j < b->end; j++) {
            int vis = j >= lo && j < end;
            if (vis && seq_hides && t->kv_seq[j] != t->seq[r]) vis = 0;
            if (vis && t->causal && !t->cache && t->qpos[j] > qp) vis = 0;
            const float mk = t->mask ? t->mask[(size_t)r * t->n_keys + j] : 0.0f;
            if (mk < WGML_ATTN_MASK_HIDE) vis = 0;
            w[(size_t)(j - b->lo) * R + i] = vis ? mk : -INFINITY;
        }
    }
    return w;
}

/* No block spans more keys than this (gf_blocks: the widest window plus
 * CPU_ATTN_ROWS); known before the positions, so that the scratch is sized once. */
static size_t gf_span_bound(const int32_t *range, int n, int n_keys) {
    if (!range) return (size_t)n_keys;
    int64_t w = 0;
    for (int r = 0; r < n; r++) {
        int64_t a = range[2 * r] < 0 ? 0 : range[2 * r], b = range[2 * r + 1] > n_keys ? n_keys : range[2 * r + 1];
        if (b - a > w) w = b - a;
    }
    w += CPU_ATTN_ROWS;
    return (size_t)(w < n_keys ? w : n_keys);
}

/* floats of one thread's work: bias and scores (span rows of CPU_ATTN_ROWS), Q^T, f16 rows as f32 */
static size_t gf_work_len(size_t span, int hd, int f16) {
    const size_t R = CPU_ATTN_ROWS;
    return (2 * R * span + R * (size_t)hd + (f16 ? 2 * span * (size_t)hd : 0) + 15) / 16 * 16;
}

/* rows [from, from + cnt) of an f16 cache's KV head g as f32, hd apart */
static void gf_rows_f32(const gf_task *t, const uint8_t *base, int from, int cnt, int g, float *dst) {
    /* the F16 kernels' to_float: SIMD, and exact (f16 -> f32 loses nothing), so the bits are
     * those of the scalar conversion */
    void (*to_float)(const void *, float *, int64_t) = cpu_kernels_get(WGML_F16)->to_float;
    for (int j = 0; j < cnt; j++) {
        const uint16_t *h = (const uint16_t *)(base + (size_t)(from + j) * t->krow) + (size_t)g * t->hd;
        to_float(h, dst + (size_t)j * t->hd, t->hd);
    }
}

static void gf_run(void *p, int ith, int nth) {
    const gf_task *t = p;
    const int R = CPU_ATTN_ROWS, hd = t->hd;
    float *bias = t->work + (size_t)ith * t->work_len, *s = bias + (size_t)R * t->span;
    float *kf = s + (size_t)R * (t->span + hd), *vf = kf + (size_t)t->span * hd;
    const size_t row = (size_t)t->n_head * hd; /* floats per row of q and out */
    for (int job = ith; job < t->nblk * t->nhc; job += nth) {
        const gf_block *b = &t->blk[job / t->nhc];
        const int h0 = job % t->nhc * t->hpc, h1 = h0 + t->hpc < t->n_head ? h0 + t->hpc : t->n_head;
        const int len = b->end - b->lo;
        if (len <= 0) { /* no row of the block sees a key: zeros */
            for (int i = 0; i < b->nr; i++)
                memset(t->out + (size_t)(b->r0 + i) * row + (size_t)h0 * hd, 0, (size_t)(h1 - h0) * hd * sizeof(float));
            continue;
        }
        cpu_attn_rows_job j = {
            .hd = hd,
            .nr = b->nr,
            .len = len,
            .q_stride = row,
            .bias = gf_bias(t, b, bias),
            .scale = t->scale,
            .s = s,
            .o_stride = row,
        };
        int conv = -1; /* the KV head whose rows kf and vf hold */
        for (int h = h0; h < h1; h++) {
            const int g = h / t->group;
            if (t->f16) {
                if (conv != g) {
                    gf_rows_f32(t, t->kb, b->lo, len, g, kf);
                    gf_rows_f32(t, t->vb, b->lo, len, g, vf);
                    conv = g;
                }
                j.k = kf, j.v = vf, j.kv_stride = (size_t)hd;
            } else {
                j.k = (const float *)(t->kb + (size_t)b->lo * t->krow) + (size_t)g * hd;
                j.v = (const float *)(t->vb + (size_t)b->lo * t->krow) + (size_t)g * hd;
                j.kv_stride = t->krow / sizeof(float);
            }
            j.q = t->q + (size_t)b->r0 * row + (size_t)h * hd;
            j.o = t->out + (size_t)b->r0 * row + (size_t)h * hd;
            t->fn(&j);
        }
    }
}

/* ---- general attention, decode mode: a few query rows over long keys ----
 *
 * Cross-attention of up to DEC_MAX_ROWS query rows (a decoder step's row, a
 * beam's rows) over
 * the union [lo, end) of their windows: per KV head, the (row, head of the
 * group) pairs go by CPU_ATTN_DEC_ROWS through the decode kernel, which
 * reads each K and V row once for all of them. What a row may not see inside
 * the union (its own window, another sequence, a later position, the mask)
 * is a bias per (row, key), built once; none when nothing is hidden. Jobs
 * are (KV head, batch of pairs, key chunk); too few for the threads split
 * the keys into chunks whose (m, l, o) are merged afterwards. */

#define DEC_MAX_ROWS 8

typedef struct {
    const float *q;
    float *out;
    const uint8_t *kb, *vb;
    size_t krow;
    int f16, n, n_head, n_kv, hd, group;
    int lo, end;       /* the union of the rows' windows */
    const float *bias; /* NULL or [n][end - lo] */
    float scale;
    cpu_attn_dec_fn fn;
    int nbat, nchunk, clen; /* batches of pairs per KV head; key chunks of clen */
    float *work;            /* per thread: the kernel's scratch and 2 CPU_ATTN_DEC_ROWS m, l */
    size_t work_len;
    float *part; /* nchunk > 1: per (KV head, batch, chunk): m, l, then o of each pair */
} dec_task;

static size_t dec_part_len(const dec_task *t) { return (size_t)CPU_ATTN_DEC_ROWS * (size_t)(t->hd + 2); }

/* pair p of KV head g: query row p / group, head g * group + p % group; its q and out offset */
static size_t dec_off(const dec_task *t, int g, int p) {
    return ((size_t)(p / t->group) * t->n_head + (size_t)g * t->group + (size_t)(p % t->group)) * t->hd;
}

static void dec_run(void *p, int ith, int nth) {
    const dec_task *t = p;
    float *w = t->work + (size_t)ith * t->work_len;
    const int total = t->n_kv * t->nbat * t->nchunk, npair = t->n * t->group, span = t->end - t->lo;
    const size_t es = t->f16 ? 2 : 4;
    for (int job = ith; job < total; job += nth) {
        const int c = job % t->nchunk, b = job / t->nchunk % t->nbat, g = job / t->nchunk / t->nbat;
        const int j0 = c * t->clen, len = span - j0 < t->clen ? span - j0 : t->clen;
        const int p0 = b * CPU_ATTN_DEC_ROWS, nr = npair - p0 < CPU_ATTN_DEC_ROWS ? npair - p0 : CPU_ATTN_DEC_ROWS;
        float *pm = t->nchunk > 1 ? t->part + ((size_t)(g * t->nbat + b) * t->nchunk + c) * dec_part_len(t)
                                  : w + t->work_len - 2 * CPU_ATTN_DEC_ROWS;
        cpu_attn_dec_job j = {
            .hd = t->hd,
            .nr = nr,
            .len = len,
            .f16 = t->f16,
            .k = t->kb + (size_t)(t->lo + j0) * t->krow + (size_t)g * t->hd * es,
            .v = t->vb + (size_t)(t->lo + j0) * t->krow + (size_t)g * t->hd * es,
            .stride = t->krow,
            .scale = t->scale,
            .s = w,
            .m = pm,
            .l = pm + CPU_ATTN_DEC_ROWS,
        };
        for (int i = 0; i < nr; i++) {
            const size_t off = dec_off(t, g, p0 + i);
            j.q[i] = t->q + off;
            j.bias[i] = t->bias ? t->bias + (size_t)((p0 + i) / t->group) * span + j0 : NULL;
            j.o[i] = t->nchunk > 1 ? pm + 2 * CPU_ATTN_DEC_ROWS + (size_t)i * t->hd : t->out + off;
        }
        if (len <= 0) { /* a chunk past the keys (none today: chunks cover the span) */
            for (int i = 0; i < nr; i++) {
                j.m[i] = -INFINITY, j.l[i] = 0;
                memset(j.o[i], 0, (size_t)t->hd * sizeof(float));
            }
            continue;
        }
        t->fn(&j);
        if (t->nchunk == 1)
            for (int i = 0; i < nr; i++) {
                const float inv = j.l[i] > 0 ? 1.0f / j.l[i] : 0.0f; /* every key hidden: zeros */
                for (int d = 0; d < t->hd; d++)
                    j.o[i][d] *= inv;
            }
    }
}

/* split-K: each pair's out = sum_c o_c e^(m_c - M) / sum_c l_c e^(m_c - M), M = max_c m_c */
static void dec_merge(void *p, int ith, int nth) {
    const dec_task *t = p;
    const int npair = t->n * t->group;
    for (int job = ith; job < t->n_kv * t->nbat; job += nth) {
        const int g = job / t->nbat, b = job % t->nbat, p0 = b * CPU_ATTN_DEC_ROWS;
        const float *base = t->part + (size_t)job * t->nchunk * dec_part_len(t);
        for (int i = 0; i < CPU_ATTN_DEC_ROWS && p0 + i < npair; i++) {
            float mx = -INFINITY, sum = 0;
            for (int c = 0; c < t->nchunk; c++)
                mx = fmaxf(mx, base[c * dec_part_len(t) + i]);
            float *out = t->out + dec_off(t, g, p0 + i);
            memset(out, 0, (size_t)t->hd * sizeof(float));
            if (mx == -INFINITY) continue; /* every key hidden: zeros */
            for (int c = 0; c < t->nchunk; c++) {
                const float *pc = base + c * dec_part_len(t);
                if (pc[CPU_ATTN_DEC_ROWS + i] == 0) continue; /* nothing visible in the chunk */
                const float f = expf(pc[i] - mx);
                sum += pc[CPU_ATTN_DEC_ROWS + i] * f;
                const float *o = pc + 2 * CPU_ATTN_DEC_ROWS + (size_t)i * t->hd;
                for (int d = 0; d < t->hd; d++)
                    out[d] += f * o[d];
            }
            const float inv = 1.0f / sum;
            for (int d = 0; d < t->hd; d++)
                out[d] *= inv;
        }
    }
}

/* query row r's window of key rows [*lo, *end), as gen_run computes it */
static void gen_window(const gen_task *t, int r, int *lo, int *end) {
    int e = t->n_keys, l = 0;
    if (t->causal && t->cache && t->qpos[r] + 1 < e) e = t->qpos[r] + 1;
    if (t->range) {
        int64_t a = t->range[2 * r], b = t->range[2 * r + 1];
        l = a < 0 ? 0 : a > e ? e : (int)a;
        if (b < e) e = b < l ? l : (int)b;
    }
    *lo = l, *end = e;
}

/* The decode mode's jobs for g's rows; d has nbat, nchunk (at most), work and
 * work_len set, bias_mem room for [n][n_keys] floats. */
static void att_decode(cpu_backend *cb, const gen_task *g, dec_task *d, float *bias_mem) {
    int wl[DEC_MAX_ROWS], we[DEC_MAX_ROWS], lo = g->n_keys, end = 0;
    for (int r = 0; r < g->n; r++) {
        gen_window(g, r, &wl[r], &we[r]);
        if (wl[r] < we[r]) {
            lo = wl[r] < lo ? wl[r] : lo;
            end = we[r] > end ? we[r] : end;
        }
    }
    if (lo >= end) { /* no row sees a key: zeros */
        memset(g->out, 0, (size_t)g->n * g->n_head * g->hd * sizeof(float));
        return;
    }
    const int span = end - lo;
    int hides = (g->causal && !g->cache) || g->mask;
    for (int r = 0; r < g->n && !hides; r++) {
        hides |= wl[r] != lo || we[r] != end;
        for (int j = lo; j < end && g->seq && !hides; j++)
            hides |= g->kv_seq[j] != g->seq[r];
    }
    d->bias = NULL;
    if (hides) { /* as gen_run decides what a row sees */
        for (int r = 0; r < g->n; r++) {
            float *b = bias_mem + (size_t)r * span;
            for (int j = lo; j < end; j++) {
                int vis = j >= wl[r] && j < we[r];
                if (vis && g->seq && g->kv_seq[j] != g->seq[r]) vis = 0;
                if (vis && g->causal && !g->cache && g->qpos[j] > g->qpos[r]) vis = 0;
                const float mk = g->mask ? g->mask[(size_t)r * g->n_keys + j] : 0.0f;
                if (mk < WGML_ATTN_MASK_HIDE) vis = 0;
                b[j - lo] = vis ? mk : -INFINITY;
            }
        }
        d->bias = bias_mem;
    }
    d->lo = lo, d->end = end;
    if (d->nchunk > 1) {
        const int most = (span + ATT_MIN_CHUNK - 1) / ATT_MIN_CHUNK;
        if (d->nchunk > most) d->nchunk = most;
    }
    d->clen = (span + d->nchunk - 1) / d->nchunk;
    d->nchunk = (span + d->clen - 1) / d->clen; /* no empty chunk */
    wgml_threadpool_run(cb->pool, dec_run, d);
    if (d->nchunk > 1) wgml_threadpool_run(cb->pool, dec_merge, d);
}

/* prepared: the caller has rotated q and k and stored this step's rows in the
 * cache already (a causal prompt over the cache, cpu_op_attention). */
static void att_general(cpu_backend *cb, const wgml_attention_args *a, int prepared) {
    const wgml_tensor *opt[] = {a->k_cache, a->v_cache, a->seq, a->kv_seq, a->pos, a->mask, a->kv_range};
    for (size_t i = 0; i < sizeof opt / sizeof opt[0]; i++)
        if (opt[i] && !cpu_check(cb, "attention", opt[i])) return;
    const int n = (int)wgml_tensor_nrows(a->q), n_k = (int)wgml_tensor_nrows(a->k), cache = a->k_cache != NULL;
    const int n_ctx = cache ? (int)wgml_tensor_nrows(a->k_cache) : 0, n_keys = cache ? n_ctx : n_k;
    const int hd = a->head_dim, group = a->n_head / a->n_head_kv, nth = cb->n_threads;
    const int64_t kv_row = (int64_t)a->n_head_kv * hd;
    if (a->rope && a->rope->n_rot > 1024) {
        cpu_error(cb, WGML_ERR_UNSUPPORTED, "attention: %d rotated dims (at most 1024)", a->rope->n_rot);
        return;
    }
    gen_task t = {
        .q = cpu_ptr(a->q),
        .out = cpu_ptr(a->out),
        .f16 = (cache ? a->k_cache : a->k)->type == WGML_F16, /* an f16 cache, or f16 cross-attention keys */
        .n = n,
        .n_keys = n_keys,
        .n_head = a->n_head,
        .n_kv = a->n_head_kv,
        .hd = hd,
        .group = group,
        .causal = !a->bidirectional,
        .cache = cache,
        .seq = a->seq ? cpu_ptr(a->seq) : NULL,
        .kv_seq = a->kv_seq ? cpu_ptr(a->kv_seq)
                  : a->seq  ? cpu_ptr(a->seq)
                            : NULL,
        .mask = a->mask ? cpu_ptr(a->mask) : NULL,
        .range = a->kv_range ? cpu_ptr(a->kv_range) : NULL,
        .scale = a->scale,
        .work_len = (size_t)group * ((size_t)n_keys + (size_t)hd) + (size_t)hd / 2 + 9,
    };
    /* fast mode: the per-thread work and the blocks' table (at most n); decode
     * mode (few rows): the kernel's work, the split-K partials, the bias */
    /* decode mode only for cross-attention (key rows that are not the query rows': no cache,
     * n_k != n): elsewhere a row's bits do not depend on the rows beside it in the step (a
     * sequence packed with others gets what it gets alone, gf_run lane by lane), which a
     * mode chosen by the row count would break */
    const cpu_attn_dec_fn dfn = cb->exact || n > DEC_MAX_ROWS || cache || n_k == n ? NULL : cpu_kernels_attn_dec();
    dec_task d = {.fn = dfn, .hd = hd, .group = group, .n = n, .n_head = a->n_head, .n_kv = a->n_head_kv};
    size_t span = 0, fwork = 0, dec_parts = 0;
    if (dfn) {
        d.nbat = (n * group + CPU_ATTN_DEC_ROWS - 1) / CPU_ATTN_DEC_ROWS;
        const int jobs = a->n_head_kv * d.nbat;
        d.nchunk = 1;
        if (jobs < 2 * nth) { /* at most: att_decode lowers it for short spans */
            d.nchunk = (2 * nth + jobs - 1) / jobs;
            const int most = (n_keys + ATT_MIN_CHUNK - 1) / ATT_MIN_CHUNK;
            if (d.nchunk > most) d.nchunk = most;
            if (d.nchunk < 1) d.nchunk = 1;
        }
        d.work_len = (cpu_attn_dec_scratch(n_keys, hd) + 2 * CPU_ATTN_DEC_ROWS + 15) / 16 * 16;
        dec_parts = d.nchunk > 1 ? (size_t)jobs * (size_t)d.nchunk * dec_part_len(&d) : 0;
    } else if (!cb->exact) {
        span = gf_span_bound(t.range, n, n_keys);
        fwork = gf_work_len(span, hd, t.f16);
    }
    const size_t gen_bytes = dfn        ? ((size_t)nth * d.work_len + dec_parts + (size_t)n * n_keys) * sizeof(float)
                             : cb->exact ? (size_t)nth * t.work_len * sizeof(double)
                                        : (size_t)nth * fwork * sizeof(float) + (size_t)n * sizeof(gf_block);
    double *scratch = cpu_scratch(cb, gen_bytes + (size_t)n * sizeof(int32_t));
    if (!scratch) return;
    t.work = scratch;
    int32_t *qpos = (int32_t *)((uint8_t *)scratch + gen_bytes);
    for (int r = 0; r < n; r++) {
        const int32_t p = a->pos ? ((const int32_t *)cpu_ptr(a->pos))[r] : cb->step.pos + r;
        if (p < 0 || p >= WGML_ATTN_MAX_POS || (cache && p >= n_ctx)) {
            cpu_error(cb, cache && p >= n_ctx ? WGML_ERR_CONTEXT_FULL : WGML_ERR_INVALID_ARGUMENT,
                      "attention: position %d of row %d is outside [0, %d)", (int)p, r,
                      cache && n_ctx < WGML_ATTN_MAX_POS ? n_ctx : WGML_ATTN_MAX_POS);
            return;
        }
        qpos[r] = p;
    }
    t.qpos = qpos;
    if (a->rope && !prepared) {
        if (a->rope->freq_factors && !cpu_check(cb, "attention", a->rope->freq_factors)) return;
        const float *ff = a->rope->freq_factors ? cpu_ptr(a->rope->freq_factors) : NULL;
        for (int r = 0; r < n; r++) { /* n_k == n: validated */
            cpu_rope_row((float *)cpu_ptr(a->q) + (size_t)r * a->q->ne[0], a->n_head, hd, qpos[r], a->rope, ff);
            cpu_rope_row((float *)cpu_ptr(a->k) + (size_t)r * a->k->ne[0], a->n_head_kv, hd, qpos[r], a->rope, ff);
        }
    }
    if (cache) {
        for (int r = 0; r < n && !prepared; r++) {
            store_rows(cb, cpu_ptr(a->k_cache), t.f16, (size_t)kv_row, qpos[r],
                       (const float *)cpu_ptr(a->k) + r * kv_row, 1);
            store_rows(cb, cpu_ptr(a->v_cache), t.f16, (size_t)kv_row, qpos[r],
                       (const float *)cpu_ptr(a->v) + r * kv_row, 1);
        }
        t.kb = cpu_ptr(a->k_cache), t.vb = cpu_ptr(a->v_cache);
        t.krow = wgml_row_size(a->k_cache->type, kv_row);
    } else {
        t.kb = cpu_ptr(a->k), t.vb = cpu_ptr(a->v);
        t.krow = wgml_row_size(a->k->type, kv_row);
    }
    if (cb->exact) {
        wgml_threadpool_run(cb->pool, gen_run, &t);
        return;
    }
    if (dfn) {
        d.q = t.q, d.out = t.out, d.kb = t.kb, d.vb = t.vb, d.krow = t.krow, d.f16 = t.f16, d.scale = a->scale;
        d.work = (float *)scratch;
        d.part = d.work + (size_t)nth * d.work_len;
        att_decode(cb, &t, &d, d.part + dec_parts);
        return;
    }
    gf_task f = {
        .q = t.q,
        .out = t.out,
        .kb = t.kb,
        .vb = t.vb,
        .krow = t.krow,
        .f16 = t.f16,
        .n_keys = n_keys,
        .n_head = a->n_head,
        .hd = hd,
        .group = group,
        .causal = t.causal,
        .cache = cache,
        .qpos = qpos,
        .seq = t.seq,
        .kv_seq = t.kv_seq,
        .range = t.range,
        .mask = t.mask,
        .scale = a->scale,
        .fn = cpu_kernels_attn_rows(),
    };
    int widest;
    gf_block *blk = (gf_block *)((float *)scratch + (size_t)nth * fwork);
    f.nblk = gf_blocks(&f, n, blk, &widest);
    f.blk = blk;
    f.span = span; /* >= widest: the work is laid out for the bound */
    f.work_len = fwork;
    f.work = (float *)scratch;
    /* enough jobs for every thread to have several (balance), in chunks of
     * whole heads so that a block's bias serves as many heads as it can */
    f.nhc = f.nblk >= 4 * nth ? 1 : (4 * nth + f.nblk - 1) / f.nblk;
    if (f.nhc > a->n_head) f.nhc = a->n_head;
    f.hpc = (a->n_head + f.nhc - 1) / f.nhc;
    f.nhc = (a->n_head + f.hpc - 1) / f.hpc;
    wgml_threadpool_run(cb->pool, gf_run, &f);
}

void cpu_op_attention(cpu_backend *cb, const wgml_attention_args *a) {
    if (wgml_attention_is_general(a)) {
        if (cpu_check(cb, "attention", a->q) && cpu_check(cb, "attention", a->k) && cpu_check(cb, "attention", a->v) &&
            cpu_check(cb, "attention", a->out))
            att_general(cb, a, 0);
        return;
    }
    if (!cpu_check(cb, "attention", a->q) || !cpu_check(cb, "attention", a->k) || !cpu_check(cb, "attention", a->v) ||
        !cpu_check(cb, "attention", a->out) || !cpu_check(cb, "attention", a->k_cache) ||
        !cpu_check(cb, "attention", a->v_cache))
        return;
    int n = (int)wgml_tensor_nrows(a->q), pos = cb->step.pos;
    const int blocks = !cb->exact && n >= ATT_BLOCK_MIN_ROWS;
    int64_t kv_row = (int64_t)a->n_head_kv * a->head_dim;
    int n_ctx = (int)wgml_tensor_nrows(a->k_cache);
    int f16 = a->k_cache->type == WGML_F16;
    if (a->rope && !cpu_rope_pair(cb, a->q, a->n_head, a->k, a->n_head_kv, a->head_dim, a->rope)) return;
    store_rows(cb, cpu_ptr(a->k_cache), f16, (size_t)kv_row, pos, cpu_ptr(a->k), n);
    store_rows(cb, cpu_ptr(a->v_cache), f16, (size_t)kv_row, pos, cpu_ptr(a->v), n);
    /* a prompt: blocks of query rows over the cache (gf_run), each K and V row
     * converted and loaded once per block instead of once per token */
    if (blocks) {
        att_general(cb, a, 1);
        return;
    }

    /* Jobs are (token, KV head) pairs; when there are too few to keep every
     * thread busy (decode of a model with few KV heads on many threads) the
     * cache rows are split into chunks merged afterwards. */
    const int nth = cb->n_threads, jobs = n * a->n_head_kv, max_len = pos + n;
    int nchunk = 1;
    if (jobs < 2 * nth) {
        nchunk = (2 * nth + jobs - 1) / jobs;
        const int most = (max_len + ATT_MIN_CHUNK - 1) / ATT_MIN_CHUNK;
        if (nchunk > most) nchunk = most;
        if (nchunk < 1) nchunk = 1;
    }
    att_task t = {
        .q = cpu_ptr(a->q),
        .out = cpu_ptr(a->out),
        .kc = cpu_ptr(a->k_cache),
        .vc = cpu_ptr(a->v_cache),
        .fn = cpu_kernels_attn(),
        .f16 = f16,
        .head_bytes = wgml_row_size(a->k_cache->type, a->head_dim),
        .row_bytes = wgml_row_size(a->k_cache->type, kv_row),
        .n = n,
        .pos = pos,
        .n_head = a->n_head,
        .n_kv = a->n_head_kv,
        .hd = a->head_dim,
        .group = a->n_head / a->n_head_kv,
        .nchunk = nchunk,
        .clen = (max_len + nchunk - 1) / nchunk,
        .scale = a->scale,
    };
    /* sized for the whole context, not this step, so decode does not grow it
     * token by token; the split-K partials take fewer than 4 * nth jobs */
    t.work_len = (size_t)t.group * (size_t)n_ctx + (size_t)t.hd + 2 * (size_t)t.group + 16;
    size_t parts = nchunk > 1 ? (size_t)jobs * (size_t)nchunk * part_len(&t) : 0;
    float *scratch = cpu_scratch(cb, ((size_t)nth * t.work_len + parts) * sizeof(float));
    if (!scratch) return;
    t.work = scratch;
    t.part = scratch + (size_t)nth * t.work_len;
    wgml_threadpool_run(cb->pool, att_run, &t);
    if (nchunk > 1) wgml_threadpool_run(cb->pool, att_merge, &t);
}
