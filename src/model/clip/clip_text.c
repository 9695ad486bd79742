/*
 * clip_text.c - the text tower's forward pass (CLIP's CLIPTextModel with its
 * text_projection, SigLIP's SiglipTextModel with its head; clip.h has the
 * math), on the family's encoder interface (model/family.h), written once
 * against backend ops, and its per-request state.
 *
 * Rows are the tokens of several texts packed one after another, each
 * attending to its own rows (CLIP: to those before it). The pooled row of
 * each text is found on the host from its tokens: CLIP's first EOS (as
 * Hugging Face's pooled_output: the argmax of the ids for the original
 * vocabulary, whose EOS is its largest id), SigLIP's last row.
 */
#include <math.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"
#include "model/acts.h"
#include "model/blocks.h"
#include "model/clip/clip.h"

struct clip_text_state {
    clip_model *m;
    int rows; /* rows per step it holds (and as many texts) */
    wgml_tensor x, q, k, v, att, h, pooled, normed, out;
    wgml_tensor ids, pos, seq, range, start, pick; /* i32 tables uploaded per step */
    wgml_acts acts;
    int32_t *host; /* staging: pos, seq, range, pick */
};

int clip_text_dim(const clip_model *m) { return m->hp.t.n_layer ? m->hp.t.proj_dim : 0; }

static void state_release(clip_text_state *s) {
    wgml_acts_release(&s->acts);
    s->rows = 0;
    wgml_free(s->host);
    s->host = NULL;
}

void clip_text_state_free(clip_text_state *s) {
    if (!s) return;
    state_release(s);
    wgml_free(s);
}

/* Makes s's buffers for `rows` rows (s holds none). */
static wgml_status state_reserve(clip_text_state *s, int rows, wgml_error *err) {
    const clip_text_hparams *hp = &s->m->hp.t;
    const int64_t E = hp->n_embd, R = rows;
    if (!(s->host = wgml_malloc((size_t)R * 5 * sizeof(int32_t))))
        return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory for the text tower's activations");
    s->rows = rows;
    wgml_acts *a = &s->acts;
    wgml_status st;
    if ((st = wgml_acts_tensor(a, &s->x, "x", WGML_F32, E, R, err)) || (st = wgml_acts_tensor(a, &s->q, "q", WGML_F32, E, R, err)) ||
        (st = wgml_acts_tensor(a, &s->k, "k", WGML_F32, E, R, err)) || (st = wgml_acts_tensor(a, &s->v, "v", WGML_F32, E, R, err)) ||
        (st = wgml_acts_tensor(a, &s->att, "att", WGML_F32, E, R, err)) ||
        (st = wgml_acts_tensor(a, &s->h, "h", WGML_F32, hp->n_ff, R, err)) ||
        (st = wgml_acts_tensor(a, &s->pooled, "pooled", WGML_F32, E, R, err)) ||
        (st = wgml_acts_tensor(a, &s->normed, "normed", WGML_F32, E, R, err)) ||
        (st = wgml_acts_tensor(a, &s->out, "out", WGML_F32, hp->proj_dim, R, err)) ||
        (st = wgml_acts_tensor(a, &s->ids, "ids", WGML_I32, R, 1, err)) ||
        (st = wgml_acts_tensor(a, &s->pos, "pos", WGML_I32, R, 1, err)) ||
        (st = wgml_acts_tensor(a, &s->seq, "seq", WGML_I32, R, 1, err)) ||
        (st = wgml_acts_tensor(a, &s->range, "range", WGML_I32, 2, R, err)) ||
        (st = wgml_acts_tensor(a, &s->start, "start", WGML_I32, R + 1, 1, err)) ||
        (st = wgml_acts_tensor(a, &s->pick, "pick", WGML_I32, R, 1, err))) {
        state_release(s);
        return st;
    }
    return WGML_OK;
}

wgml_status clip_text_state_create(clip_model *m, int n_rows, clip_text_state **out, wgml_error *err) {
    *out = NULL;
    if (!m->hp.t.n_layer) return wgml_fail(err, WGML_ERR_UNSUPPORTED, "this %s model has no text tower", m->hp.arch);
    if (n_rows < 1) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "text state: %d rows", n_rows);
    clip_text_state *s = wgml_calloc(1, sizeof *s);
    if (!s) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory for the text tower's activations");
    s->m = m;
    s->acts.be = m->be;
    wgml_status st = state_reserve(s, n_rows, err);
    if (st) {
        wgml_free(s);
        return st;
    }
    *out = s;
    return WGML_OK;
}

static wgml_status check_batch(const clip_model *m, const wgml_encoder_batch *b, wgml_error *err) {
    const clip_text_hparams *hp = &m->hp.t;
    if (b->n_seq < 1 || b->n_tokens < b->n_seq || !b->tokens || !b->start)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "text tower: a step of %d texts and %d tokens", b->n_seq,
                         b->n_tokens);
    if (b->start[0] != 0 || b->start[b->n_seq] != b->n_tokens)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "text tower: the texts do not cover the %d rows", b->n_tokens);
    for (int s = 0; s < b->n_seq; s++) {
        int len = b->start[s + 1] - b->start[s];
        if (len < 1 || len > hp->n_ctx)
            return wgml_fail(err, len < 1 ? WGML_ERR_INVALID_ARGUMENT : WGML_ERR_CONTEXT_FULL,
                             "text tower: text %d is %d tokens (1..%d allowed)", s, len, hp->n_ctx);
    }
    for (int i = 0; i < b->n_tokens; i++)
        if (b->tokens[i] < 0 || b->tokens[i] >= hp->n_vocab)
            return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "token id %d is outside the vocabulary of %d", b->tokens[i],
                             hp->n_vocab);
    return WGML_OK;
}

wgml_status clip_text_encode(clip_model *m, clip_text_state *s, const wgml_encoder_batch *b, wgml_pool_mode mode,
                             wgml_encoder_output what, float *out, wgml_error *err) {
    const clip_text_hparams *hp = &m->hp.t;
    wgml_backend *be = m->be;
    if (!hp->n_layer) return wgml_fail(err, WGML_ERR_UNSUPPORTED, "this %s model has no text tower", m->hp.arch);
    if (what == WGML_ENCODE_SCORE) return wgml_fail(err, WGML_ERR_UNSUPPORTED, "a text tower does not rerank");
    wgml_status st = check_batch(m, b, err);
    if (st) return st;
    if (s->m != m) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "text tower: the state belongs to another model");
    if (b->n_tokens > s->rows) { /* between steps: the state grows for this one */
        state_release(s);
        if ((st = state_reserve(s, b->n_tokens, err))) return st;
    }
    const int n = b->n_tokens, n_seq = b->n_seq;
    int32_t *pos = s->host, *seq = pos + n, *range = seq + n, *pick = range + 2 * n;
    for (int t = 0; t < n_seq; t++) {
        const int r0 = b->start[t], r1 = b->start[t + 1];
        pick[t] = r1 - 1;
        for (int r = r0; r < r1; r++) {
            pos[r] = r - r0;
            seq[r] = t;
            range[2 * r] = r0;
            range[2 * r + 1] = r1;
        }
        if (hp->causal && m->eos >= 0) /* CLIP: the first EOS (the rows after it do not reach it) */
            for (int r = r0; r < r1; r++)
                if (b->tokens[r] == m->eos) {
                    pick[t] = r;
                    break;
                }
    }
    wgml_tensor x = wgml_tensor_rows(&s->x, 0, n), q = wgml_tensor_rows(&s->q, 0, n);
    wgml_tensor k = wgml_tensor_rows(&s->k, 0, n), v = wgml_tensor_rows(&s->v, 0, n);
    wgml_tensor att = wgml_tensor_rows(&s->att, 0, n), h = wgml_tensor_rows(&s->h, 0, n);
    wgml_tensor ids = wgml_acts_head(&s->ids, n), tpos = wgml_acts_head(&s->pos, n), tseq = wgml_acts_head(&s->seq, n);
    wgml_tensor trange = wgml_tensor_rows(&s->range, 0, n), tstart = wgml_acts_head(&s->start, n_seq + 1);
    wgml_tensor tpick = wgml_acts_head(&s->pick, n_seq);
    wgml_tensor pooled = wgml_tensor_rows(&s->pooled, 0, n_seq), normed = wgml_tensor_rows(&s->normed, 0, n_seq);
    wgml_tensor o = wgml_tensor_rows(&s->out, 0, n_seq);

    be->begin(be, &(wgml_step){.pos = 0, .n_tokens = n});
    be->upload(be, &ids, b->tokens, (size_t)n * sizeof(int32_t));
    be->upload(be, &tpos, pos, (size_t)n * sizeof(int32_t));
    be->upload(be, &tseq, seq, (size_t)n * sizeof(int32_t));
    be->upload(be, &trange, range, (size_t)n * 2 * sizeof(int32_t));
    be->upload(be, &tstart, b->start, (size_t)(n_seq + 1) * sizeof(int32_t));
    be->upload(be, &tpick, pick, (size_t)n_seq * sizeof(int32_t));

    /* token + position embeddings */
    wgml_op_get_rows(be, &(wgml_get_rows_args){.out = &x, .table = &m->t.tok_embd, .ids = &ids});
    wgml_op_get_rows(be, &(wgml_get_rows_args){.out = &att, .table = &m->t.pos_embd, .ids = &tpos});
    wgml_op_add(be, &(wgml_add_args){.out = &x, .a = &x, .b = &att});
    const wgml_encoder_layer_cfg cfg = {.n_head = hp->n_head, .head_dim = hp->head_dim, .eps = hp->eps,
                                        .pre_norm = 1, .act = hp->act, .causal = hp->causal, .seq = &tseq,
                                        .pos = hp->causal ? &tpos : NULL, .kv_range = &trange};
    const wgml_encoder_acts acts = {&x, &q, &k, &v, &att, &h};
    for (int l = 0; l < hp->n_layer; l++) {
        const wgml_encoder_layer w = clip_layer_of(&m->t.blocks[l]);
        wgml_block_encoder_layer(be, &w, &cfg, &acts);
    }
    /* the pooled row of each text (the model's, or the asked pooling over its rows), final LayerNorm
     * (row-wise: on the pooled rows only, unless pooling mixes rows), then the projection */
    if (mode == WGML_POOL_LAST) {
        wgml_op_get_rows(be, &(wgml_get_rows_args){.out = &pooled, .table = &x, .ids = &tpick});
        wgml_op_layer_norm(be, &(wgml_layer_norm_args){.out = &normed, .x = &pooled, .w = &m->t.post_norm_w,
                                                       .b = wgml_opt(&m->t.post_norm_b), .eps = hp->eps});
    } else {
        wgml_op_layer_norm(be, &(wgml_layer_norm_args){.out = &att, .x = &x, .w = &m->t.post_norm_w,
                                                       .b = wgml_opt(&m->t.post_norm_b), .eps = hp->eps});
        wgml_op_pool(be, &(wgml_pool_args){.out = &normed, .x = &att, .seq = &tstart, .mode = mode});
    }
    wgml_op_matmul(be, &(wgml_matmul_args){.x = &normed, .n_w = 1, .w = {&m->t.proj}, .bias = {wgml_opt(&m->t.proj_b)},
                                           .out = {&o}});
    if (what == WGML_ENCODE_L2) wgml_op_l2_norm(be, &(wgml_l2_norm_args){.out = &o, .x = &o, .eps = 1e-12f});
    be->download(be, &o, out, (size_t)n_seq * (size_t)hp->proj_dim * sizeof(float));
    return be->end(be, err);
}
