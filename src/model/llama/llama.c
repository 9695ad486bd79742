/*
 * llama.c - the Llama-family forward pass, written once against backend ops.
 *
 * For each layer (x is the residual stream, one row per token):
 *   q, k, v = Wq n(x) + bq, Wk n(x) + bk, Wv n(x) + bv    n = RMSNorm with attn_norm
 *   a       = attention(rope(q), rope(k), v) over the KV cache
 *   x      += Wo a
 *   h       = silu(Wgate n(x)) * (Wup n(x))                n = RMSNorm with ffn_norm
 *   x      += Wdown h
 * then logits = Wout RMSNorm(x_last) for the step's last token.
 * Five backend ops per layer; the norms, biases, residual adds, SwiGLU, RoPE
 * and the KV-cache write ride along inside them.
 */
#include <math.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"
#include "model/llama/llama.h"

struct llama_state {
    llama_model *m;
    int n_ctx, n_batch;
    /* activations, n_batch rows each */
    wgml_tensor x, q, k, v, att, h, logits, ids, out_id;
    wgml_tensor *k_cache, *v_cache; /* per layer [n_ctx][n_head_kv*head_dim] */
    wgml_buffer **bufs;
    int n_bufs;
};

int llama_state_n_ctx(const llama_state *s) { return s->n_ctx; }
int llama_state_n_batch(const llama_state *s) { return s->n_batch; }
uint32_t llama_state_kv_type(const llama_state *s) { return s->k_cache[0].type; }

wgml_status llama_new_tensor(wgml_backend *be, wgml_buffer **bufs, int *n_bufs, wgml_tensor *t, const char *name,
                             uint32_t type, int64_t ne0, int64_t ne1, wgml_buffer_usage usage, wgml_error *err) {
    size_t size = wgml_row_size(type, ne0) * (size_t)ne1;
    wgml_buffer *b;
    wgml_status st = be->buffer_create(be, size, usage, &b, err);
    if (st) {
        wgml_error_prefix(err, "allocating '%s' (%zu bytes)", name, size);
        return st;
    }
    bufs[(*n_bufs)++] = b;
    *t = (wgml_tensor){.type = type, .ne = {ne0, ne1, 1, 1}, .buf = b, .offset = 0, .name = name};
    return WGML_OK;
}

static wgml_status new_tensor(llama_state *s, wgml_tensor *t, const char *name, uint32_t type, int64_t ne0, int64_t ne1,
                              wgml_buffer_usage usage, wgml_error *err) {
    return llama_new_tensor(s->m->be, s->bufs, &s->n_bufs, t, name, type, ne0, ne1, usage, err);
}

wgml_status llama_state_create(llama_model *m, int n_ctx, int n_batch, uint32_t kv_type, llama_state **out,
                               wgml_error *err) {
    *out = NULL;
    if (n_ctx < 1 || n_batch < 1)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "context %d and batch %d must be positive", n_ctx, n_batch);
    if (n_batch > n_ctx) n_batch = n_ctx;
    const llama_hparams *hp = &m->hp;
    llama_state *s = wgml_calloc(1, sizeof *s);
    if (!s) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory creating a session");
    s->m = m;
    s->n_ctx = n_ctx;
    s->n_batch = n_batch;
    s->k_cache = wgml_calloc((size_t)hp->n_layer * 2, sizeof *s->k_cache);
    s->bufs = wgml_calloc((size_t)hp->n_layer * 2 + 16, sizeof *s->bufs);
    if (!s->k_cache || !s->bufs) {
        llama_state_free(s);
        return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory creating a session");
    }
    s->v_cache = s->k_cache + hp->n_layer;
    int64_t qd = (int64_t)hp->n_head * hp->head_dim, kvd = (int64_t)hp->n_head_kv * hp->head_dim;
    wgml_status st;
    if ((st = new_tensor(s, &s->x, "x", WGML_F32, hp->n_embd, n_batch, WGML_BUFFER_ACTIVATIONS, err)) ||
        (st = new_tensor(s, &s->q, "q", WGML_F32, qd, n_batch, WGML_BUFFER_ACTIVATIONS, err)) ||
        (st = new_tensor(s, &s->k, "k", WGML_F32, kvd, n_batch, WGML_BUFFER_ACTIVATIONS, err)) ||
        (st = new_tensor(s, &s->v, "v", WGML_F32, kvd, n_batch, WGML_BUFFER_ACTIVATIONS, err)) ||
        (st = new_tensor(s, &s->att, "att", WGML_F32, qd, n_batch, WGML_BUFFER_ACTIVATIONS, err)) ||
        (st = new_tensor(s, &s->h, "h", WGML_F32, hp->n_ff, n_batch, WGML_BUFFER_ACTIVATIONS, err)) ||
        (st = new_tensor(s, &s->logits, "logits", WGML_F32, hp->n_vocab, 1, WGML_BUFFER_ACTIVATIONS, err)) ||
        (st = new_tensor(s, &s->ids, "ids", WGML_I32, n_batch, 1, WGML_BUFFER_ACTIVATIONS, err)) ||
        (st = new_tensor(s, &s->out_id, "out_id", WGML_I32, 1, 1, WGML_BUFFER_ACTIVATIONS, err))) {
        llama_state_free(s);
        return st;
    }
    for (int l = 0; l < hp->n_layer; l++) {
        uint32_t kv = kv_type;
        if ((st = new_tensor(s, &s->k_cache[l], "k_cache", kv, kvd, n_ctx, WGML_BUFFER_KV, err)) ||
            (st = new_tensor(s, &s->v_cache[l], "v_cache", kv, kvd, n_ctx, WGML_BUFFER_KV, err))) {
            llama_state_free(s);
            return st;
        }
    }
    *out = s;
    return WGML_OK;
}

void llama_state_free(llama_state *s) {
    if (!s) return;
    for (int i = 0; i < s->n_bufs; i++) s->m->be->buffer_free(s->m->be, s->bufs[i]);
    wgml_free(s->bufs);
    wgml_free(s->k_cache);
    wgml_free(s);
}

const wgml_tensor *llama_opt(const wgml_tensor *t) { return t->buf ? t : NULL; }

void llama_layers(llama_model *m, const llama_acts *a, int batch_invariant, llama_attend_fn attend, void *ctx) {
    const llama_hparams *hp = &m->hp;
    wgml_backend *be = m->be;
    wgml_rope rope = hp->rope;
    rope.freq_factors = llama_opt(&m->rope_freqs);
    const int bi = batch_invariant;
    wgml_op_get_rows(be, &(wgml_get_rows_args){.out = a->x, .table = &m->tok_embd, .ids = a->ids});
    for (int l = 0; l < hp->n_layer; l++) {
        const llama_layer *L = &m->layers[l];
        /* attention block */
        wgml_op_matmul(be, &(wgml_matmul_args){.x = a->x, .norm = &L->attn_norm, .eps = hp->eps, .n_w = 3,
                                               .w = {&L->wq, &L->wk, &L->wv},
                                               .bias = {llama_opt(&L->bq), llama_opt(&L->bk), llama_opt(&L->bv)},
                                               .out = {a->q, a->k, a->v}, .batch_invariant = bi});
        attend(ctx, l, &(wgml_attention_args){.q = a->q, .k = a->k, .v = a->v, .out = a->att, .n_head = hp->n_head,
                                              .n_head_kv = hp->n_head_kv, .head_dim = hp->head_dim,
                                              .scale = 1.0f / sqrtf((float)hp->head_dim), .rope = &rope});
        wgml_op_matmul(be, &(wgml_matmul_args){.x = a->att, .n_w = 1, .w = {&L->wo}, .out = {a->x},
                                               .epilogue = WGML_EPI_ADD, .batch_invariant = bi});
        /* feed-forward block: SwiGLU */
        wgml_op_matmul(be, &(wgml_matmul_args){.x = a->x, .norm = &L->ffn_norm, .eps = hp->eps, .n_w = 2,
                                               .w = {&L->w_gate, &L->w_up}, .out = {a->h},
                                               .epilogue = WGML_EPI_SWIGLU, .batch_invariant = bi});
        wgml_op_matmul(be, &(wgml_matmul_args){.x = a->h, .n_w = 1, .w = {&L->w_down}, .out = {a->x},
                                               .epilogue = WGML_EPI_ADD, .batch_invariant = bi});
    }
}

/* One session's attention: the fast causal path over its cache at the step's positions. */
static void attend_session(void *ctx, int l, wgml_attention_args *a) {
    llama_state *s = ctx;
    a->k_cache = &s->k_cache[l];
    a->v_cache = &s->v_cache[l];
    wgml_op_attention(s->m->be, a);
}

wgml_status llama_eval(llama_model *m, llama_state *s, const int32_t *tokens, int n, int pos, float *logits,
                       int32_t *argmax, wgml_error *err) {
    const llama_hparams *hp = &m->hp;
    wgml_backend *be = m->be;
    if (n < 1 || n > s->n_batch)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "%d tokens in one step (1..%d allowed)", n, s->n_batch);
    if (pos < 0 || pos + n > s->n_ctx)
        return wgml_fail(err, WGML_ERR_CONTEXT_FULL, "positions %d..%d do not fit the context of %d tokens", pos,
                         pos + n - 1, s->n_ctx);
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= hp->n_vocab)
            return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "token id %d is outside the vocabulary of %d", tokens[i],
                             hp->n_vocab);

    /* views of this step's rows */
    wgml_tensor x = wgml_tensor_rows(&s->x, 0, n), q = wgml_tensor_rows(&s->q, 0, n);
    wgml_tensor k = wgml_tensor_rows(&s->k, 0, n), v = wgml_tensor_rows(&s->v, 0, n);
    wgml_tensor att = wgml_tensor_rows(&s->att, 0, n), h = wgml_tensor_rows(&s->h, 0, n);
    wgml_tensor ids = s->ids;
    ids.ne[0] = n;

    be->begin(be, &(wgml_step){.pos = pos, .n_tokens = n});
    be->upload(be, &ids, tokens, (size_t)n * sizeof(int32_t));
    llama_layers(m, &(llama_acts){&x, &q, &k, &v, &att, &h, &ids}, 0, attend_session, s);
    wgml_tensor last = wgml_tensor_rows(&s->x, n - 1, 1);
    wgml_op_matmul(be, &(wgml_matmul_args){.x = &last, .norm = &m->out_norm, .eps = hp->eps, .n_w = 1,
                                           .w = {&m->output}, .out = {&s->logits}});
    if (argmax) {
        wgml_op_argmax(be, &(wgml_argmax_args){.out = &s->out_id, .x = &s->logits});
        be->download(be, &s->out_id, argmax, sizeof(int32_t));
    }
    if (logits) be->download(be, &s->logits, logits, (size_t)hp->n_vocab * sizeof(float));
    return be->end(be, err);
}
