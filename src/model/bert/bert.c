/*
 * bert.c - the BERT-family forward pass (Hugging Face's BertModel math,
 * post-norm), written once against backend ops. Rows are the tokens of
 * several texts packed one after another; each attends to its own rows.
 *
 *   x = tok_embd[id] + token_types[type] + position_embd[pos]   (nomic-bert: no position table)
 *   x = LayerNorm(x)
 *   each layer:
 *     q, k, v = Wq x + bq, Wk x + bk, Wv x + bv        (nomic-bert: RoPE on q and k)
 *     x = LayerNorm(x + Wo attention(q, k, v) + bo)      bidirectional, within the text
 *     h = GELU(Wup x + bup)                              (nomic-bert: silu(Wgate x) * Wup x)
 *     x = LayerNorm(x + Wdown h + bdown)
 *   pooled = mean / first / last row of each text;  L2-normalized on request
 *   reranker: score = Wout tanh(Wcls pooled_first + bcls) + bout
 */
#include <math.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"
#include "model/bert/bert.h"
#include "model/acts.h"
#include "model/blocks.h"

/* Activations for up to `rows` token rows (and as many texts). */
struct bert_state {
    bert_model *m;
    int rows;
    wgml_tensor x, q, k, v, att, h, pooled, cls, score;
    wgml_tensor ids, types, pos, seq, range, start; /* i32 tables uploaded per step */
    wgml_acts acts;
    int32_t *host; /* staging for the tables: pos, seq, range */
};

/* Frees the buffers (the state struct stays). */
static void state_release(bert_state *s) {
    wgml_acts_release(&s->acts);
    s->rows = 0;
    wgml_free(s->host);
    s->host = NULL;
}

void bert_state_free(bert_state *s) {
    if (!s) return;
    state_release(s);
    wgml_free(s);
}

void bert_model_free(bert_model *m) {
    if (!m) return;
    wgml_weights_free(&m->w);
    wgml_free(m->layers);
    wgml_free(m);
}

/* Makes s's buffers for `rows` rows (s holds none). */
static wgml_status state_reserve(bert_state *s, int rows, wgml_error *err) {
    const bert_model *m = s->m;
    const bert_hparams *hp = &m->hp;
    const int64_t E = hp->n_embd, R = rows;
    if (!(s->host = wgml_malloc((size_t)R * 5 * sizeof(int32_t))))
        return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory for the encoder's activations");
    s->rows = rows;
    wgml_acts *a = &s->acts;
    wgml_status st;
    if ((st = wgml_acts_tensor(a, &s->x, "x", WGML_F32, E, R, err)) ||
        (st = wgml_acts_tensor(a, &s->q, "q", WGML_F32, E, R, err)) ||
        (st = wgml_acts_tensor(a, &s->k, "k", WGML_F32, E, R, err)) ||
        (st = wgml_acts_tensor(a, &s->v, "v", WGML_F32, E, R, err)) ||
        (st = wgml_acts_tensor(a, &s->att, "att", WGML_F32, E, R, err)) ||
        (st = wgml_acts_tensor(a, &s->h, "h", WGML_F32, hp->n_ff, R, err)) ||
        (st = wgml_acts_tensor(a, &s->pooled, "pooled", WGML_F32, E, R, err)) ||
        (st = wgml_acts_tensor(a, &s->cls, "cls", WGML_F32, E, R, err)) ||
        (st = wgml_acts_tensor(a, &s->score, "score", WGML_F32, 1, R, err)) ||
        (st = wgml_acts_tensor(a, &s->ids, "ids", WGML_I32, R, 1, err)) ||
        (st = wgml_acts_tensor(a, &s->types, "types", WGML_I32, R, 1, err)) ||
        (st = wgml_acts_tensor(a, &s->pos, "pos", WGML_I32, R, 1, err)) ||
        (st = wgml_acts_tensor(a, &s->seq, "seq", WGML_I32, R, 1, err)) ||
        (st = wgml_acts_tensor(a, &s->range, "range", WGML_I32, 2, R, err)) ||
        (st = wgml_acts_tensor(a, &s->start, "start", WGML_I32, R + 1, 1, err))) {
        state_release(s);
        return st;
    }
    return WGML_OK;
}

wgml_status bert_state_create(bert_model *m, int rows, bert_state **out, wgml_error *err) {
    *out = NULL;
    if (rows < 1) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "encoder state: %d rows", rows);
    bert_state *s = wgml_calloc(1, sizeof *s);
    if (!s) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory for the encoder's activations");
    s->m = m;
    s->acts.be = m->be;
    wgml_status st = state_reserve(s, rows, err);
    if (st) {
        wgml_free(s);
        return st;
    }
    *out = s;
    return WGML_OK;
}

static wgml_status check_batch(const bert_model *m, const wgml_encoder_batch *b, wgml_error *err) {
    const bert_hparams *hp = &m->hp;
    if (b->n_seq < 1 || b->n_tokens < b->n_seq || !b->tokens || !b->start)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "encoder: a step of %d texts and %d tokens", b->n_seq,
                         b->n_tokens);
    if (b->start[0] != 0 || b->start[b->n_seq] != b->n_tokens)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "encoder: the texts do not cover the %d rows", b->n_tokens);
    for (int s = 0; s < b->n_seq; s++) {
        int len = b->start[s + 1] - b->start[s];
        if (len < 1 || len > hp->n_ctx_train)
            return wgml_fail(err, len < 1 ? WGML_ERR_INVALID_ARGUMENT : WGML_ERR_CONTEXT_FULL,
                             "encoder: text %d is %d tokens (1..%d allowed)", s, len, hp->n_ctx_train);
    }
    for (int i = 0; i < b->n_tokens; i++) {
        if (b->tokens[i] < 0 || b->tokens[i] >= hp->n_vocab)
            return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "token id %d is outside the vocabulary of %d",
                             b->tokens[i], hp->n_vocab);
        if (b->types && (b->types[i] < 0 || b->types[i] >= (m->types.buf ? hp->n_types : 1)))
            return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "token type %d is outside the model's %d", b->types[i],
                             m->types.buf ? hp->n_types : 1);
    }
    return WGML_OK;
}

wgml_status bert_encode(bert_model *m, bert_state *s, const wgml_encoder_batch *b, wgml_pool_mode mode,
                        wgml_encoder_output what, float *out, wgml_error *err) {
    const bert_hparams *hp = &m->hp;
    wgml_backend *be = m->be;
    wgml_status st = check_batch(m, b, err);
    if (st) return st;
    if (what == WGML_ENCODE_SCORE && !bert_is_reranker(m))
        return wgml_fail(err, WGML_ERR_UNSUPPORTED, "this model has no reranking head (pooling rank, cls.output)");
    if (s->m != m) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "encoder: the state belongs to another model");
    if (b->n_tokens > s->rows) { /* between steps: the state grows for this one */
        state_release(s);
        if ((st = state_reserve(s, b->n_tokens, err))) return st;
    }
    const int n = b->n_tokens, n_seq = b->n_seq;

    /* per row: its position in its text, its text, and its text's rows (the attention window) */
    int32_t *pos = s->host, *seq = pos + n, *range = seq + n, *types = range + 2 * n;
    for (int t = 0; t < n_seq; t++)
        for (int r = b->start[t]; r < b->start[t + 1]; r++) {
            pos[r] = r - b->start[t];
            seq[r] = t;
            range[2 * r] = b->start[t];
            range[2 * r + 1] = b->start[t + 1];
        }
    if (!b->types) memset(types, 0, (size_t)n * sizeof *types);
    wgml_tensor x = wgml_tensor_rows(&s->x, 0, n), q = wgml_tensor_rows(&s->q, 0, n);
    wgml_tensor k = wgml_tensor_rows(&s->k, 0, n), v = wgml_tensor_rows(&s->v, 0, n);
    wgml_tensor att = wgml_tensor_rows(&s->att, 0, n), h = wgml_tensor_rows(&s->h, 0, n);
    wgml_tensor ids = wgml_acts_head(&s->ids, n), typ = wgml_acts_head(&s->types, n), tpos = wgml_acts_head(&s->pos, n), tseq = wgml_acts_head(&s->seq, n);
    wgml_tensor trange = wgml_tensor_rows(&s->range, 0, n), tstart = wgml_acts_head(&s->start, n_seq + 1);
    wgml_tensor pooled = wgml_tensor_rows(&s->pooled, 0, n_seq);

    be->begin(be, &(wgml_step){.pos = 0, .n_tokens = n});
    be->upload(be, &ids, b->tokens, (size_t)n * sizeof(int32_t));
    be->upload(be, &typ, b->types ? b->types : types, (size_t)n * sizeof(int32_t));
    be->upload(be, &tpos, pos, (size_t)n * sizeof(int32_t));
    be->upload(be, &tseq, seq, (size_t)n * sizeof(int32_t));
    be->upload(be, &trange, range, (size_t)n * 2 * sizeof(int32_t));
    be->upload(be, &tstart, b->start, (size_t)(n_seq + 1) * sizeof(int32_t));

    /* embeddings: token + token type + position, then LayerNorm */
    wgml_op_get_rows(be, &(wgml_get_rows_args){.out = &x, .table = &m->tok_embd, .ids = &ids});
    if (m->types.buf) {
        wgml_op_get_rows(be, &(wgml_get_rows_args){.out = &att, .table = &m->types, .ids = &typ});
        wgml_op_add(be, &(wgml_add_args){.out = &x, .a = &x, .b = &att});
    }
    if (m->pos_embd.buf) {
        wgml_op_get_rows(be, &(wgml_get_rows_args){.out = &att, .table = &m->pos_embd, .ids = &tpos});
        wgml_op_add(be, &(wgml_add_args){.out = &x, .a = &x, .b = &att});
    }
    wgml_op_layer_norm(be, &(wgml_layer_norm_args){.out = &x, .x = &x, .w = &m->embd_norm_w,
                                                   .b = wgml_opt(&m->embd_norm_b), .eps = hp->eps});
    wgml_rope rope = hp->rope;
    const wgml_encoder_layer_cfg cfg = {.n_head = hp->n_head, .head_dim = hp->head_dim, .eps = hp->eps,
                                        .act = WGML_UNARY_GELU_ERF, .causal = hp->causal,
                                        .rope = hp->nomic ? &rope : NULL, .seq = &tseq,
                                        .pos = hp->nomic || hp->causal ? &tpos : NULL, .kv_range = &trange};
    const wgml_encoder_acts acts = {&x, &q, &k, &v, &att, &h};
    for (int l = 0; l < hp->n_layer; l++) {
        const bert_layer *L = &m->layers[l];
        const wgml_encoder_layer w = {.wq = &L->wq, .wk = &L->wk, .wv = &L->wv, .bq = wgml_opt(&L->bq), .bk = wgml_opt(&L->bk),
                                      .bv = wgml_opt(&L->bv), .wo = &L->wo, .bo = wgml_opt(&L->bo), .attn_norm_w = &L->attn_norm_w,
                                      .attn_norm_b = wgml_opt(&L->attn_norm_b), .up = &L->up, .b_up = wgml_opt(&L->b_up),
                                      .gate = wgml_opt(&L->gate), .down = &L->down, .b_down = wgml_opt(&L->b_down),
                                      .ffn_norm_w = &L->out_norm_w, .ffn_norm_b = wgml_opt(&L->out_norm_b)};
        wgml_block_encoder_layer(be, &w, &cfg, &acts); /* post-norm (model/blocks.h) */
    }
    if (what == WGML_ENCODE_SCORE) {
        wgml_tensor cls = wgml_tensor_rows(&s->cls, 0, n_seq), score = wgml_tensor_rows(&s->score, 0, n_seq);
        wgml_op_pool(be, &(wgml_pool_args){.out = &pooled, .x = &x, .seq = &tstart, .mode = WGML_POOL_FIRST});
        const wgml_tensor *c = &pooled;
        if (m->cls_w.buf) { /* BERT's pooler: tanh(W [CLS] + b) */
            wgml_op_matmul(be, &(wgml_matmul_args){.x = &pooled, .n_w = 1, .w = {&m->cls_w},
                                                   .bias = {wgml_opt(&m->cls_b)}, .out = {&cls}});
            wgml_op_unary(be, &(wgml_unary_args){.out = &cls, .x = &cls, .kind = WGML_UNARY_TANH});
            c = &cls;
        }
        wgml_op_matmul(be, &(wgml_matmul_args){.x = c, .n_w = 1, .w = {&m->cls_out_w}, .bias = {wgml_opt(&m->cls_out_b)},
                                               .out = {&score}});
        be->download(be, &score, out, (size_t)n_seq * sizeof(float));
    } else {
        wgml_op_pool(be, &(wgml_pool_args){.out = &pooled, .x = &x, .seq = &tstart, .mode = mode});
        if (what == WGML_ENCODE_L2) wgml_op_l2_norm(be, &(wgml_l2_norm_args){.out = &pooled, .x = &pooled, .eps = 1e-12f});
        be->download(be, &pooled, out, (size_t)n_seq * (size_t)hp->n_embd * sizeof(float));
    }
    return be->end(be, err);
}
