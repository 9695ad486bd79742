/*
 * llama_multi.c - several sequences of a Llama-family model in one step.
 *
 * A server's slots each hold a conversation; decoding them one after another
 * reads every weight once per slot and token. Here a step holds the rows of
 * several sequences (each slot's next token, perhaps a chunk of a new
 * prompt), so that every matmul streams each weight once for all of them:
 * decode is bandwidth-bound, and N streams then cost little more than one.
 *
 *   x = embed(tokens)                       all rows of the step
 *   per layer: q, k, v = W n(x)             all rows (batch_invariant matmuls)
 *              per run (one sequence's rows): attention over its own cache,
 *                at its positions (general path, explicit `pos`)
 *              x += Wo a; x += Wdown SwiGLU(n(x))        all rows
 *   logits = Wout n(x[r]) for the rows asked for (gathered with get_rows)
 *
 * Each sequence has its own K and V caches (per layer), so positions and
 * cache rows are the sequence's own, as in a session; its rows' results do
 * not depend on the other runs of the step (ops.h: batch_invariant), so a
 * sequence decodes to the same tokens alone or beside others.
 */
#include <math.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"
#include "model/llama/llama.h"

struct llama_multi {
    llama_model *m;
    int n_seq, n_ctx, n_batch;
    /* activations, n_batch rows each; pos: i32 [n_batch], outs: the gathered rows */
    wgml_tensor x, q, k, v, att, h, ids, pos, out_rows, out_x, logits, out_id;
    wgml_tensor *k_cache, *v_cache; /* [seq * n_layer + layer]: [n_ctx][n_head_kv*head_dim] */
    wgml_buffer **bufs;
    int n_bufs;
    int32_t *hpos, *hrows, *hids; /* host copies of pos, out_rows and out_id, n_batch each */
    uint8_t *seen;         /* n_seq: a step's sequences */
};

int llama_multi_n_ctx(const llama_multi *s) { return s->n_ctx; }
int llama_multi_n_batch(const llama_multi *s) { return s->n_batch; }
uint32_t llama_multi_kv_type(const llama_multi *s) { return s->k_cache[0].type; }

static wgml_status new_tensor(llama_multi *s, wgml_tensor *t, const char *name, uint32_t type, int64_t ne0,
                              int64_t ne1, wgml_buffer_usage usage, wgml_error *err) {
    return llama_new_tensor(s->m->be, s->bufs, &s->n_bufs, t, name, type, ne0, ne1, usage, err);
}

wgml_status llama_multi_create(llama_model *m, int n_seq, int n_ctx, int n_batch, uint32_t kv_type,
                               llama_multi **out, wgml_error *err) {
    *out = NULL;
    if (n_seq < 1 || n_seq > 4096 || n_ctx < 1 || n_batch < 1)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "%d sequences, context %d and batch %d must be positive",
                         n_seq, n_ctx, n_batch);
    const llama_hparams *hp = &m->hp;
    llama_multi *s = wgml_calloc(1, sizeof *s);
    if (!s) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory creating a batch");
    s->m = m;
    s->n_seq = n_seq;
    s->n_ctx = n_ctx;
    s->n_batch = n_batch;
    size_t n_caches = (size_t)n_seq * (size_t)hp->n_layer;
    s->k_cache = wgml_calloc(n_caches * 2, sizeof *s->k_cache);
    s->bufs = wgml_calloc(n_caches * 2 + 16, sizeof *s->bufs);
    s->hpos = wgml_calloc((size_t)n_batch * 3, sizeof *s->hpos);
    s->seen = wgml_calloc((size_t)n_seq, 1);
    if (!s->k_cache || !s->bufs || !s->hpos || !s->seen) {
        llama_multi_free(s);
        return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory creating a batch");
    }
    s->v_cache = s->k_cache + n_caches;
    s->hrows = s->hpos + n_batch;
    s->hids = s->hrows + n_batch;
    int64_t qd = (int64_t)hp->n_head * hp->head_dim, kvd = (int64_t)hp->n_head_kv * hp->head_dim;
    /* the logits of every row at most: a step asks for one row per sequence, or a prompt's rows */
    int n_out = n_batch;
    wgml_status st;
    if ((st = new_tensor(s, &s->x, "x", WGML_F32, hp->n_embd, n_batch, WGML_BUFFER_ACTIVATIONS, err)) ||
        (st = new_tensor(s, &s->q, "q", WGML_F32, qd, n_batch, WGML_BUFFER_ACTIVATIONS, err)) ||
        (st = new_tensor(s, &s->k, "k", WGML_F32, kvd, n_batch, WGML_BUFFER_ACTIVATIONS, err)) ||
        (st = new_tensor(s, &s->v, "v", WGML_F32, kvd, n_batch, WGML_BUFFER_ACTIVATIONS, err)) ||
        (st = new_tensor(s, &s->att, "att", WGML_F32, qd, n_batch, WGML_BUFFER_ACTIVATIONS, err)) ||
        (st = new_tensor(s, &s->h, "h", WGML_F32, hp->n_ff, n_batch, WGML_BUFFER_ACTIVATIONS, err)) ||
        (st = new_tensor(s, &s->ids, "ids", WGML_I32, n_batch, 1, WGML_BUFFER_ACTIVATIONS, err)) ||
        (st = new_tensor(s, &s->pos, "pos", WGML_I32, n_batch, 1, WGML_BUFFER_ACTIVATIONS, err)) ||
        (st = new_tensor(s, &s->out_rows, "out_rows", WGML_I32, n_out, 1, WGML_BUFFER_ACTIVATIONS, err)) ||
        (st = new_tensor(s, &s->out_x, "out_x", WGML_F32, hp->n_embd, n_out, WGML_BUFFER_ACTIVATIONS, err)) ||
        (st = new_tensor(s, &s->logits, "logits", WGML_F32, hp->n_vocab, n_out, WGML_BUFFER_ACTIVATIONS, err)) ||
        (st = new_tensor(s, &s->out_id, "out_id", WGML_I32, n_out, 1, WGML_BUFFER_ACTIVATIONS, err))) {
        llama_multi_free(s);
        return st;
    }
    for (size_t c = 0; c < n_caches; c++) {
        if ((st = new_tensor(s, &s->k_cache[c], "k_cache", kv_type, kvd, n_ctx, WGML_BUFFER_KV, err)) ||
            (st = new_tensor(s, &s->v_cache[c], "v_cache", kv_type, kvd, n_ctx, WGML_BUFFER_KV, err))) {
            llama_multi_free(s);
            return st;
        }
    }
    *out = s;
    return WGML_OK;
}

void llama_multi_free(llama_multi *s) {
    if (!s) return;
    for (int i = 0; i < s->n_bufs; i++) s->m->be->buffer_free(s->m->be, s->bufs[i]);
    wgml_free(s->bufs);
    wgml_free(s->k_cache);
    wgml_free(s->hpos);
    wgml_free(s->seen);
    wgml_free(s);
}

/* elements [first, first + n) of a 1-D i32 tensor */
static wgml_tensor i32_slice(const wgml_tensor *t, int first, int n) {
    wgml_tensor v = *t;
    v.offset += (size_t)first * sizeof(int32_t);
    v.ne[0] = n;
    return v;
}

typedef struct {
    llama_multi *s;
    const llama_run *runs;
    int n_runs;
} attend_ctx;

/* Each run attends over its own sequence's cache at its own positions. */
static void attend_runs(void *p, int l, wgml_attention_args *a) {
    const attend_ctx *c = p;
    llama_multi *s = c->s;
    const int n_layer = s->m->hp.n_layer;
    for (int r = 0, row = 0; r < c->n_runs; row += c->runs[r].n, r++) {
        const llama_run *run = &c->runs[r];
        wgml_tensor q = wgml_tensor_rows(a->q, row, run->n), k = wgml_tensor_rows(a->k, row, run->n);
        wgml_tensor v = wgml_tensor_rows(a->v, row, run->n), o = wgml_tensor_rows(a->out, row, run->n);
        wgml_tensor pos = i32_slice(&s->pos, row, run->n);
        wgml_attention_args ra = *a;
        ra.q = &q, ra.k = &k, ra.v = &v, ra.out = &o, ra.pos = &pos;
        ra.k_cache = &s->k_cache[run->seq * n_layer + l];
        ra.v_cache = &s->v_cache[run->seq * n_layer + l];
        wgml_op_attention(s->m->be, &ra);
    }
}

wgml_status llama_eval_multi(llama_model *m, llama_multi *s, const int32_t *tokens, int n, const llama_run *runs,
                             int n_runs, const llama_out *outs, int n_out, wgml_error *err) {
    const llama_hparams *hp = &m->hp;
    wgml_backend *be = m->be;
    if (n < 1 || n > s->n_batch)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "%d tokens in one step (1..%d allowed)", n, s->n_batch);
    if (n_runs < 1 || n_runs > s->n_seq || n_out < 0 || n_out > n)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "%d runs and %d outputs in a step of %d tokens", n_runs,
                         n_out, n);
    int32_t *pos = s->hpos, *out_rows = s->hrows;
    uint8_t *seen = s->seen;
    memset(seen, 0, (size_t)s->n_seq);
    int row = 0;
    for (int r = 0; r < n_runs; r++) {
        const llama_run *run = &runs[r];
        if (run->seq < 0 || run->seq >= s->n_seq || seen[run->seq])
            return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "run %d: sequence %d is not one of 0..%d or comes twice",
                             r, run->seq, s->n_seq - 1);
        seen[run->seq] = 1;
        if (run->n < 1 || run->n > n - row)
            return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "run %d: %d tokens where %d are left of the step", r,
                             run->n, n - row);
        if (run->pos < 0 || run->pos > s->n_ctx - run->n)
            return wgml_fail(err, WGML_ERR_CONTEXT_FULL,
                             "sequence %d: positions %d..%d do not fit its context of %d tokens", run->seq, run->pos,
                             run->pos + run->n - 1, s->n_ctx);
        for (int i = 0; i < run->n; i++) pos[row + i] = run->pos + i;
        row += run->n;
    }
    if (row != n)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "the runs hold %d tokens, the step %d", row, n);
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= hp->n_vocab)
            return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "token id %d is outside the vocabulary of %d", tokens[i],
                             hp->n_vocab);
    for (int i = 0; i < n_out; i++) {
        if (outs[i].row < 0 || outs[i].row >= n)
            return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "output %d: row %d is not in the step's %d", i,
                             outs[i].row, n);
        out_rows[i] = outs[i].row;
    }

    wgml_tensor x = wgml_tensor_rows(&s->x, 0, n), q = wgml_tensor_rows(&s->q, 0, n);
    wgml_tensor k = wgml_tensor_rows(&s->k, 0, n), v = wgml_tensor_rows(&s->v, 0, n);
    wgml_tensor att = wgml_tensor_rows(&s->att, 0, n), h = wgml_tensor_rows(&s->h, 0, n);
    wgml_tensor ids = i32_slice(&s->ids, 0, n), pt = i32_slice(&s->pos, 0, n);

    be->begin(be, &(wgml_step){.pos = 0, .n_tokens = n});
    be->upload(be, &ids, tokens, (size_t)n * sizeof(int32_t));
    be->upload(be, &pt, pos, (size_t)n * sizeof(int32_t));
    attend_ctx ac = {s, runs, n_runs};
    llama_layers(m, &(llama_acts){&x, &q, &k, &v, &att, &h, &ids}, 1, attend_runs, &ac);
    if (n_out > 0) {
        /* the rows asked for, gathered, through the output head */
        wgml_tensor orow = i32_slice(&s->out_rows, 0, n_out), ox = wgml_tensor_rows(&s->out_x, 0, n_out);
        wgml_tensor lg = wgml_tensor_rows(&s->logits, 0, n_out), oid = i32_slice(&s->out_id, 0, n_out);
        be->upload(be, &orow, out_rows, (size_t)n_out * sizeof(int32_t));
        wgml_op_get_rows(be, &(wgml_get_rows_args){.out = &ox, .table = &x, .ids = &orow});
        wgml_op_matmul(be, &(wgml_matmul_args){.x = &ox, .norm = &m->out_norm, .eps = hp->eps, .n_w = 1,
                                               .w = {&m->output}, .out = {&lg}, .batch_invariant = 1});
        int any_argmax = 0;
        for (int i = 0; i < n_out; i++) any_argmax |= outs[i].argmax != NULL;
        if (any_argmax) { /* one read-back of every row's argmax */
            wgml_op_argmax(be, &(wgml_argmax_args){.out = &oid, .x = &lg});
            be->download(be, &oid, s->hids, (size_t)n_out * sizeof(int32_t));
        }
        for (int i = 0; i < n_out; i++) {
            if (outs[i].logits) {
                wgml_tensor one = wgml_tensor_rows(&s->logits, i, 1);
                be->download(be, &one, outs[i].logits, (size_t)hp->n_vocab * sizeof(float));
            }
        }
    }
    wgml_status st = be->end(be, err);
    for (int i = 0; !st && i < n_out; i++)
        if (outs[i].argmax) *outs[i].argmax = s->hids[i];
    return st;
}
