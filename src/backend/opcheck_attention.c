/*
 * opcheck_attention.c - the grid of attention: today's causal attention over
 * the KV cache (RoPE layouts, positions that need split-K), and general
 * attention (bidirectional, sequences, masks, windows, cross-attention).
 * See opcheck.c.
 */
#include "backend/opcheck_impl.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/quant.h"

/* ---- attention ---- */

typedef struct {
    twin q, k, v, kc, vc, out, ff;
    wgml_rope rope;
    int use_rope;
    int n_head, n_kv, hd;
    /* general attention (zero: today's causal attention over the cache) */
    twin seq, kv_seq, pos, mask, range;
    int no_cache, bidirectional;
} att_case;

static const wgml_tensor *att_opt(const twin *t, int s) { return t->buf[s] ? &t->t[s] : NULL; }

static void att_side(wgml_backend *be, int s, void *arg) {
    att_case *a = arg;
    wgml_rope r = a->rope;
    if (r.freq_factors) r.freq_factors = &a->ff.t[s];
    wgml_op_attention(be, &(wgml_attention_args){.q = &a->q.t[s], .k = &a->k.t[s], .v = &a->v.t[s],
                                                 .k_cache = a->no_cache ? NULL : &a->kc.t[s],
                                                 .v_cache = a->no_cache ? NULL : &a->vc.t[s], .out = &a->out.t[s],
                                                 .n_head = a->n_head, .n_head_kv = a->n_kv, .head_dim = a->hd,
                                                 .scale = 1.0f / sqrtf((float)a->hd),
                                                 .rope = a->use_rope ? &r : NULL, .bidirectional = a->bidirectional,
                                                 .seq = att_opt(&a->seq, s), .kv_seq = att_opt(&a->kv_seq, s),
                                                 .pos = att_opt(&a->pos, s), .mask = att_opt(&a->mask, s),
                                                 .kv_range = att_opt(&a->range, s)});
}

static void attention_case(ctx *c, int n_head, int n_kv, int hd, int pos, int n, int rope_kind) {
    uint32_t kvt = c->be[0]->kv_type;
    int n_ctx = pos + n + 3;
    char cfg[160];
    static const char *rk[] = {"no rope", "rope", "rope neox n_rot=hd/2", "rope factors"};
    snprintf(cfg, sizeof cfg, "heads=%d kv=%d hd=%d pos=%d n=%d %s, %s cache", n_head, n_kv, hd, pos, n, rk[rope_kind],
             wgml_dtype_name(kvt));
    att_case a;
    memset(&a, 0, sizeof a);
    a.n_head = n_head, a.n_kv = n_kv, a.hd = hd, a.use_rope = rope_kind != 0;
    a.rope = (wgml_rope){.n_rot = rope_kind == 2 ? hd / 2 : hd, .neox = rope_kind == 2, .freq_base = 10000,
                         .freq_scale = rope_kind == 3 ? 0.5f : 1.0f};
    int qd = n_head * hd, kvd = n_kv * hd;
    wgml_error err;
    float *qv = oc_randv(c, (size_t)qd * n, 1), *kv = oc_randv(c, (size_t)kvd * n, 1),
          *vv = oc_randv(c, (size_t)kvd * n, 1);
    /* earlier cache rows, in the cache type */
    size_t crow = wgml_row_size(kvt, kvd);
    uint8_t *kc = wgml_calloc((size_t)n_ctx, crow), *vc = wgml_calloc((size_t)n_ctx, crow);
    float *tmp = oc_randv(c, (size_t)kvd, 1);
    wgml_status st = qv && kv && vv && kc && vc && tmp ? WGML_OK : WGML_ERR_OUT_OF_MEMORY;
    for (int j = 0; !st && j < pos; j++) {
        for (int i = 0; i < kvd; i++) tmp[i] = oc_rnd(c);
        wgml_quantize_row(kvt, tmp, kc + (size_t)j * crow, kvd);
        for (int i = 0; i < kvd; i++) tmp[i] = oc_rnd(c);
        wgml_quantize_row(kvt, tmp, vc + (size_t)j * crow, kvd);
    }
    if (!st) st = oc_twin_act(c, &a.q, WGML_F32, qd, n, qv, &err);
    if (!st) st = oc_twin_act(c, &a.k, WGML_F32, kvd, n, kv, &err);
    if (!st) st = oc_twin_act(c, &a.v, WGML_F32, kvd, n, vv, &err);
    if (!st) st = oc_twin_act(c, &a.kc, kvt, kvd, n_ctx, kc, &err);
    if (!st) st = oc_twin_act(c, &a.vc, kvt, kvd, n_ctx, vc, &err);
    if (!st) st = oc_twin_act(c, &a.out, WGML_F32, qd, n, NULL, &err);
    if (!st && rope_kind == 3) {
        st = oc_twin_weight(c, &a.ff, WGML_F32, a.rope.n_rot / 2, 1, 1, &err);
        a.rope.freq_factors = &a.ff.t[0];
    }
    if (!st) st = oc_run_both(c, pos, n, att_side, &a, &err);
    double tol = kvt == WGML_F16 ? 2e-3 : 2e-4;
    if (st) {
        oc_report(c, "attention", cfg, INFINITY, 0, st, err.message);
    } else {
        oc_finish(c, "attention", cfg, &a.out, tol);
        /* the rows written into the caches (f32 caches compare exactly to 2e-4; f16 both round alike) */
        size_t bytes = crow * (size_t)n_ctx;
        uint8_t *d = wgml_malloc(bytes + 4), *r = wgml_malloc(bytes + 4);
        float *fd = wgml_malloc((size_t)kvd * n * 4), *fr = wgml_malloc((size_t)kvd * n * 4);
        char cc[180];
        snprintf(cc, sizeof cc, "%s: K cache rows", cfg);
        if (d && r && fd && fr && !c->be[0]->buffer_read(c->be[0], a.kc.buf[0], 0, d, bytes, &err) &&
            !c->be[1]->buffer_read(c->be[1], a.kc.buf[1], 0, r, bytes, &err)) {
            for (int t = 0; t < n; t++) {
                wgml_dequantize_row(kvt, d + (size_t)(pos + t) * crow, fd + (size_t)t * kvd, kvd);
                wgml_dequantize_row(kvt, r + (size_t)(pos + t) * crow, fr + (size_t)t * kvd, kvd);
            }
            oc_report(c, "attention", cc, oc_compare(fd, fr, (size_t)kvd * n), tol, WGML_OK, NULL);
        } else {
            oc_report(c, "attention", cc, INFINITY, 0, WGML_ERR_GPU, "reading the cache back failed");
        }
        wgml_free(d), wgml_free(r), wgml_free(fd), wgml_free(fr);
    }
    twin *all[] = {&a.q, &a.k, &a.v, &a.kc, &a.vc, &a.out, &a.ff};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) oc_twin_free(c, all[i]);
    wgml_free(qv), wgml_free(kv), wgml_free(vv), wgml_free(kc), wgml_free(vc), wgml_free(tmp);
}

/* One case of general attention (ops.h): n query rows, n_k key rows (k and v), a cache of
 * n_ctx rows (0: none) holding random earlier rows, and the optional tables. */
typedef struct {
    const char *what;
    int n_head, n_kv, hd, n, n_k, n_ctx, step_pos, bidirectional, rope_kind;
    const int32_t *seq, *kv_seq, *pos; /* NULL: not given */
    int mask;                          /* 1: random, some entries hidden (-inf, -FLT_MAX); 2: and row 0 all hidden */
    const int32_t *range;              /* NULL: not given; else [n][2] key windows */
} gen_desc;

static void general_case(ctx *c, const gen_desc *g) {
    uint32_t kvt = c->be[0]->kv_type;
    const int n = g->n, n_k = g->n_k, n_ctx = g->n_ctx, n_keys = n_ctx ? n_ctx : n_k;
    static const char *rk[] = {"", " rope", " rope neox n_rot=hd/2", " rope factors"};
    char cfg[160];
    snprintf(cfg, sizeof cfg, "%s: heads=%d kv=%d hd=%d n=%d keys=%d%s%s%s%s%s%s%s", g->what, g->n_head, g->n_kv, g->hd,
             n, n_keys, n_ctx ? (kvt == WGML_F16 ? " F16 cache" : " F32 cache") : "",
             g->bidirectional ? " bidirectional" : " causal", rk[g->rope_kind], g->seq ? " seq" : "",
             g->pos ? " pos" : "", g->mask ? " mask" : "", g->range ? " range" : "");
    att_case a;
    memset(&a, 0, sizeof a);
    a.n_head = g->n_head, a.n_kv = g->n_kv, a.hd = g->hd, a.use_rope = g->rope_kind != 0;
    a.no_cache = n_ctx == 0, a.bidirectional = g->bidirectional;
    a.rope = (wgml_rope){.n_rot = g->rope_kind == 2 ? g->hd / 2 : g->hd, .neox = g->rope_kind == 2,
                         .freq_base = 10000, .freq_scale = g->rope_kind == 3 ? 0.5f : 1.0f};
    const int qd = g->n_head * g->hd, kvd = g->n_kv * g->hd;
    wgml_error err;
    size_t crow = wgml_row_size(kvt, kvd);
    float *qv = oc_randv(c, (size_t)qd * n, 1), *kv = oc_randv(c, (size_t)kvd * n_k, 1),
          *vv = oc_randv(c, (size_t)kvd * n_k, 1);
    float *mv = g->mask ? oc_randv(c, (size_t)n * n_keys, 2) : NULL, *tmp = oc_randv(c, (size_t)kvd, 1);
    uint8_t *kc = n_ctx ? wgml_calloc((size_t)n_ctx, crow) : NULL;
    uint8_t *vc = n_ctx ? wgml_calloc((size_t)n_ctx, crow) : NULL;
    wgml_status st =
        qv && kv && vv && tmp && (!g->mask || mv) && (!n_ctx || (kc && vc)) ? WGML_OK : WGML_ERR_OUT_OF_MEMORY;
    if (st) wgml_fail(&err, st, "out of memory");
    for (int j = 0; !st && j < n_ctx; j++) {
        for (int i = 0; i < kvd; i++) tmp[i] = oc_rnd(c);
        wgml_quantize_row(kvt, tmp, kc + (size_t)j * crow, kvd);
        for (int i = 0; i < kvd; i++) tmp[i] = oc_rnd(c);
        wgml_quantize_row(kvt, tmp, vc + (size_t)j * crow, kvd);
    }
    for (int i = 0; mv && i < n * n_keys; i++) {
        if (i % 7 == 3) mv[i] = -INFINITY;
        if (i % 11 == 5) mv[i] = -3.4028235e38f; /* torch's finfo(float32).min */
        if (g->mask == 2 && i < n_keys) mv[i] = -INFINITY;
    }
    if (!st) st = oc_twin_act(c, &a.q, WGML_F32, qd, n, qv, &err);
    if (!st) st = oc_twin_act(c, &a.k, WGML_F32, kvd, n_k, kv, &err);
    if (!st) st = oc_twin_act(c, &a.v, WGML_F32, kvd, n_k, vv, &err);
    if (!st && n_ctx) st = oc_twin_act(c, &a.kc, kvt, kvd, n_ctx, kc, &err);
    if (!st && n_ctx) st = oc_twin_act(c, &a.vc, kvt, kvd, n_ctx, vc, &err);
    if (!st) st = oc_twin_act(c, &a.out, WGML_F32, qd, n, NULL, &err);
    if (!st && g->seq) st = oc_twin_act(c, &a.seq, WGML_I32, n, 1, g->seq, &err);
    if (!st && g->kv_seq) st = oc_twin_act(c, &a.kv_seq, WGML_I32, n_keys, 1, g->kv_seq, &err);
    if (!st && g->pos) st = oc_twin_act(c, &a.pos, WGML_I32, n, 1, g->pos, &err);
    if (!st && mv) st = oc_twin_act(c, &a.mask, WGML_F32, n_keys, n, mv, &err);
    if (!st && g->range) st = oc_twin_act(c, &a.range, WGML_I32, 2, n, g->range, &err);
    if (!st && g->rope_kind == 3) {
        st = oc_twin_weight(c, &a.ff, WGML_F32, a.rope.n_rot / 2, 1, 1, &err);
        a.rope.freq_factors = &a.ff.t[0];
    }
    if (!st) st = oc_run_both(c, g->step_pos, n, att_side, &a, &err);
    double tol = n_ctx && kvt == WGML_F16 ? 2e-3 : 2e-4;
    if (st) {
        oc_report(c, "attention", cfg, INFINITY, 0, st, err.message);
    } else {
        oc_finish(c, "attention", cfg, &a.out, tol);
        if (n_ctx) { /* the whole caches: rows written at the positions, the others as they were */
            size_t bytes = crow * (size_t)n_ctx;
            uint8_t *d = wgml_malloc(bytes + 4), *r = wgml_malloc(bytes + 4);
            float *fd = wgml_malloc((size_t)kvd * n_ctx * 4), *fr = wgml_malloc((size_t)kvd * n_ctx * 4);
            char cc[192];
            for (int which = 0; which < 2; which++) {
                const twin *tw = which ? &a.vc : &a.kc;
                snprintf(cc, sizeof cc, "%s: %s cache", cfg, which ? "V" : "K");
                if (d && r && fd && fr && !c->be[0]->buffer_read(c->be[0], tw->buf[0], 0, d, bytes, &err) &&
                    !c->be[1]->buffer_read(c->be[1], tw->buf[1], 0, r, bytes, &err)) {
                    for (int j = 0; j < n_ctx; j++) {
                        wgml_dequantize_row(kvt, d + (size_t)j * crow, fd + (size_t)j * kvd, kvd);
                        wgml_dequantize_row(kvt, r + (size_t)j * crow, fr + (size_t)j * kvd, kvd);
                    }
                    oc_report(c, "attention", cc, oc_compare(fd, fr, (size_t)kvd * n_ctx), tol, WGML_OK, NULL);
                } else {
                    oc_report(c, "attention", cc, INFINITY, 0, WGML_ERR_GPU, "reading the cache back failed");
                }
            }
            wgml_free(d), wgml_free(r), wgml_free(fd), wgml_free(fr);
        }
    }
    twin *all[] = {&a.q, &a.k, &a.v, &a.kc, &a.vc, &a.out, &a.ff, &a.seq, &a.kv_seq, &a.pos, &a.mask, &a.range};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) oc_twin_free(c, all[i]);
    wgml_free(qv), wgml_free(kv), wgml_free(vv), wgml_free(mv), wgml_free(tmp), wgml_free(kc), wgml_free(vc);
}

/* General attention: encoders (bidirectional, no cache), packed sequences, explicit
 * positions (with and without a cache: several sessions in one step), cross-attention,
 * additive masks. */
static void check_attention_general(ctx *c) {
    const int heads[][3] = {{8, 4, 8}, {4, 1, 64}, {2, 2, 128}};
    for (int h = 0; h < 3; h++) /* BERT-like encoders */
        for (int n = 1; n <= 7; n += 6)
            general_case(c, &(gen_desc){"encoder", heads[h][0], heads[h][1], heads[h][2], n, n, 0, 0, 1,
                                        n == 7 ? h % 4 : 0, NULL, NULL, NULL, 0, NULL});
    /* 3 sequences of 1, 5 and 9 rows packed in one step */
    static const int32_t seq3[15] = {0, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2};
    static const int32_t pos3[15] = {0, 0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 5, 6, 7, 8};
    int32_t rng3[30];
    for (int r = 0; r < 15; r++) {
        rng3[2 * r] = r == 0 ? 0 : r < 6 ? 1 : 6;
        rng3[2 * r + 1] = r == 0 ? 1 : r < 6 ? 6 : 15;
    }
    for (int h = 0; h < 3; h++) {
        if (c->opt->quick && h == 2) continue;
        const int *hh = heads[h];
        general_case(c, &(gen_desc){"packed", hh[0], hh[1], hh[2], 15, 15, 0, 0, 1, 0, seq3, NULL, NULL, 0, NULL});
        general_case(c, &(gen_desc){"packed", hh[0], hh[1], hh[2], 15, 15, 0, 0, 1, 1, seq3, NULL, pos3, 0, NULL});
        general_case(c, &(gen_desc){"packed", hh[0], hh[1], hh[2], 15, 15, 0, 0, 0, 0, seq3, NULL, NULL, 0, NULL});
        general_case(c, &(gen_desc){"packed", hh[0], hh[1], hh[2], 15, 15, 0, 0, 0, 2, seq3, NULL, pos3, 0, NULL});
        /* the same with each row's window of key rows: its sequence's */
        general_case(c, &(gen_desc){"packed", hh[0], hh[1], hh[2], 15, 15, 0, 0, 1, 0, seq3, NULL, NULL, 0, rng3});
        general_case(c, &(gen_desc){"packed", hh[0], hh[1], hh[2], 15, 15, 0, 0, 0, 2, seq3, NULL, pos3, 0, rng3});
    }
    /* windows alone: clamped at both ends, empty (zeros), with a mask and a cache */
    static const int32_t rngx[18] = {-3, 4, 5, 99, 7, 2, 0, 9, 3, 3, 2, 6, 8, 9, 1, 8, -5, -1};
    general_case(c, &(gen_desc){"range", 4, 2, 64, 9, 9, 0, 0, 1, 0, NULL, NULL, NULL, 1, rngx});
    general_case(c, &(gen_desc){"range", 8, 4, 8, 9, 9, 20, 4, 0, 1, NULL, NULL, NULL, 0, rngx});
    /* explicit positions: no cache (large ones: the positions table's upper rows), causal over them */
    static const int32_t posf[5] = {70000, 5, 2000, 1048575, 100};
    general_case(c, &(gen_desc){"positions", 4, 2, 64, 5, 5, 0, 0, 0, 1, NULL, NULL, posf, 0, NULL});
    general_case(c, &(gen_desc){"positions", 4, 2, 64, 5, 5, 0, 0, 1, 3, NULL, NULL, posf, 0, NULL});
    /* into a cache out of order, and two sessions in one step (cache rows [0, 24) and [24, 48)) */
    static const int32_t posc[3] = {7, 1, 4};
    general_case(c, &(gen_desc){"cache positions", 8, 4, 8, 3, 3, 12, 0, 0, 1, NULL, NULL, posc, 0, NULL});
    static const int32_t seqs[4] = {0, 1, 1, 1}, poss[4] = {10, 27, 28, 29};
    int32_t kvseq[48];
    for (int j = 0; j < 48; j++) kvseq[j] = j < 24 ? 0 : 1;
    general_case(c, &(gen_desc){"sessions", 4, 1, 64, 4, 4, 48, 0, 0, 2, seqs, kvseq, poss, 0, NULL});
    general_case(c, &(gen_desc){"sessions", 2, 2, 128, 4, 4, 48, 0, 0, 0, seqs, kvseq, poss, 0, NULL});
    /* cross-attention: 5 query rows over 11 key rows, and two pairs of sequences packed */
    general_case(c, &(gen_desc){"cross", 4, 2, 64, 5, 11, 0, 0, 1, 0, NULL, NULL, NULL, 0, NULL});
    general_case(c, &(gen_desc){"cross", 8, 4, 8, 5, 11, 0, 0, 1, 0, NULL, NULL, NULL, 1, NULL});
    static const int32_t qs2[5] = {0, 0, 1, 1, 1}, ks2[11] = {0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1};
    general_case(c, &(gen_desc){"cross", 2, 2, 128, 5, 11, 0, 0, 1, 0, qs2, ks2, NULL, 0, NULL});
    /* additive masks: an encoder's, causal without a cache, and over a cache (row 0 all hidden: zeros) */
    general_case(c, &(gen_desc){"mask", 4, 1, 64, 9, 9, 0, 0, 1, 0, NULL, NULL, NULL, 1, NULL});
    general_case(c, &(gen_desc){"mask", 8, 4, 8, 9, 9, 0, 3, 0, 1, NULL, NULL, NULL, 1, NULL});
    general_case(c, &(gen_desc){"mask", 2, 2, 128, 2, 2, 24, 20, 0, 1, NULL, NULL, NULL, 2, NULL});
    general_case(c, &(gen_desc){"mask", 4, 2, 64, 9, 9, 0, 0, 1, 0, seq3 + 1, NULL, NULL, 2, NULL});
    /* a causal step without a cache: today's math over the step's rows only */
    general_case(c, &(gen_desc){"no cache", 4, 2, 64, 7, 7, 0, 5, 0, 1, NULL, NULL, NULL, 0, NULL});
}

void oc_check_attention(ctx *c) {
    const int heads[][3] = {{8, 4, 8}, {4, 1, 64}, {2, 2, 128}};
    const int steps[][2] = {{0, 1}, {0, 7}, {9, 1}, {300, 1}, {700, 3}};
    for (int h = 0; h < 3; h++)
        for (int s = 0; s < 5; s++) {
            if (c->opt->quick && (h + s) % 2) continue;
            attention_case(c, heads[h][0], heads[h][1], heads[h][2], steps[s][0], steps[s][1], (h + s) % 4);
        }
    check_attention_general(c);
}
