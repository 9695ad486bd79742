/*
 * api_batch.c - the public batch API (include/wgml.h): several sequences of
 * one model evaluated together, one forward pass per step.
 *
 * A wgml_batch wraps a decoder state of n_seq sequences (model/family.h's
 * decoder interface: a KV cache per sequence, activations shared; the Llama
 * family's is llama_multi.c) with what the API promises
 * per sequence: the tokens it holds, its sampler and its last logits. A step
 * lays its items out as runs of rows, asks the model for the rows whose next
 * token is wanted (the argmax on the device for greedy sequences, the logits
 * for the others), and samples on the host where needed.
 */
#include <string.h>

#include "api_model.h"
#include "core/alloc.h"
#include "core/error.h"
#include "text/sampler.h"
#include "text/tokenizer.h"
#include "wgml.h"

typedef struct {
    int32_t *tokens; /* n_ctx */
    int n_past;
    wgml_sampler_params sp;
    wgml_sampler *sampler; /* NULL: greedy */
    float *logits;         /* n_vocab */
    int has_logits;
    grammar_state *gs;     /* a grammar's state (wgml_batch_seq_grammar), or NULL */
    int32_t *bias_tok;     /* logit biases (wgml_batch_seq_logit_bias), given to each sampler made */
    float *bias;
    int n_bias;
    wgml_error gerr;       /* why a pick failed (wgml_batch_seq_error) */
} batch_seq;

struct wgml_batch {
    wgml_model *m;
    const wgml_decoder *dec;
    void *st; /* the decoder's state: n_seq sequences */
    int n_seq, n_ctx, n_batch, n_vocab;
    batch_seq *seq;
    /* per step: the tokens laid out, the runs and the outputs (n_batch, n_seq, n_seq) */
    int32_t *step_tokens;
    wgml_decoder_run *runs;
    wgml_decoder_out *outs;
    int32_t *argmax;
};

wgml_batch_params wgml_batch_default_params(void) { return (wgml_batch_params){0, 0, 0, WGML_KV_DEFAULT}; }

wgml_status wgml_batch_create(wgml_model *m, const wgml_batch_params *params, wgml_batch **out, wgml_error *err) {
    if (!m || !out) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "wgml_batch_create: NULL argument");
    *out = NULL;
    const wgml_decoder *dec = wgml_model_decoder(m, "batches", err);
    if (!dec) return WGML_ERR_UNSUPPORTED;
    wgml_batch_params p = params ? *params : wgml_batch_default_params();
    if (p.n_seq < 0 || p.n_ctx < 0 || p.n_batch < 0)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "sequences %d, context %d and batch %d must not be negative",
                         p.n_seq, p.n_ctx, p.n_batch);
    if (p.n_seq == 0) p.n_seq = 4;
    if (p.n_ctx == 0) p.n_ctx = wgml_model_default_ctx(m);
    if (p.n_batch == 0) p.n_batch = 64 + p.n_seq;
    if (p.n_seq > 256) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "%d sequences: at most 256", p.n_seq);
    if (p.n_ctx > (1 << 20)) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "context %d is too large", p.n_ctx);
    if (p.n_batch > 65536) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "batch %d is too large", p.n_batch);
    uint32_t kv = 0;
    wgml_status st = wgml_model_kv_dtype(m, p.kv_type, &kv, err);
    if (st) return st;
    wgml_batch *b = wgml_calloc(1, sizeof *b);
    if (!b) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory creating a batch");
    b->m = m;
    b->dec = dec;
    b->n_seq = p.n_seq, b->n_ctx = p.n_ctx, b->n_batch = p.n_batch, b->n_vocab = dec->n_vocab(m->impl);
    b->seq = wgml_calloc((size_t)p.n_seq, sizeof *b->seq);
    b->step_tokens = wgml_calloc((size_t)p.n_batch, sizeof *b->step_tokens);
    b->runs = wgml_calloc((size_t)p.n_seq, sizeof *b->runs);
    b->outs = wgml_calloc((size_t)p.n_seq, sizeof *b->outs);
    b->argmax = wgml_calloc((size_t)p.n_seq, sizeof *b->argmax);
    st = b->seq && b->step_tokens && b->runs && b->outs && b->argmax
             ? WGML_OK
             : wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory creating a batch");
    for (int i = 0; !st && i < p.n_seq; i++) {
        batch_seq *q = &b->seq[i];
        q->tokens = wgml_calloc((size_t)p.n_ctx, sizeof *q->tokens);
        q->logits = wgml_calloc((size_t)b->n_vocab, sizeof *q->logits);
        q->sp = wgml_sampler_default_params();
        q->sp.temperature = 0;
        if (!q->tokens || !q->logits) st = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory creating a batch");
    }
    wgml_decoder_params dp = {.n_seq = p.n_seq, .n_ctx = p.n_ctx, .n_batch = p.n_batch, .kv_type = kv};
    if (!st) st = dec->create(m->impl, &dp, &b->st, err);
    if (st) {
        wgml_batch_free(b);
        return st;
    }
    *out = b;
    return WGML_OK;
}

void wgml_batch_free(wgml_batch *b) {
    if (!b) return;
    if (b->st) b->dec->free(b->st);
    for (int i = 0; b->seq && i < b->n_seq; i++) {
        wgml_free(b->seq[i].tokens);
        wgml_free(b->seq[i].logits);
        wgml_sampler_free(b->seq[i].sampler);
        grammar_state_free(b->seq[i].gs);
        wgml_free(b->seq[i].bias_tok);
        wgml_free(b->seq[i].bias);
    }
    wgml_free(b->seq);
    wgml_free(b->step_tokens);
    wgml_free(b->runs);
    wgml_free(b->outs);
    wgml_free(b->argmax);
    wgml_free(b);
}

int wgml_batch_n_seq(const wgml_batch *b) { return b->n_seq; }
int wgml_batch_n_ctx(const wgml_batch *b) { return b->n_ctx; }
int wgml_batch_n_batch(const wgml_batch *b) { return b->n_batch; }

const int32_t *wgml_batch_seq_tokens(const wgml_batch *b, int seq, int *n) {
    if (!b || seq < 0 || seq >= b->n_seq) {
        if (n) *n = 0;
        return NULL;
    }
    if (n) *n = b->seq[seq].n_past;
    return b->seq[seq].tokens;
}

static wgml_status check_seq(const wgml_batch *b, int seq, const char *fn, wgml_error *err) {
    if (!b) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "%s: batch is NULL", fn);
    if (seq < 0 || seq >= b->n_seq)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "%s: sequence %d is not one of 0..%d", fn, seq, b->n_seq - 1);
    return WGML_OK;
}

/* a sampler for the sequence's parameters and biases (greedy without biases: NULL, the device's argmax) */
static wgml_status make_sampler(wgml_batch *b, batch_seq *q, int always, wgml_sampler **out, wgml_error *err) {
    *out = NULL;
    if (!always && !q->n_bias && wgml_sampler_is_greedy(&q->sp)) return WGML_OK;
    wgml_status st = wgml_sampler_create(&q->sp, b->n_vocab, out, err);
    if (!st && wgml_sampler_set_bias(*out, q->bias_tok, q->bias, q->n_bias)) {
        wgml_sampler_free(*out);
        *out = NULL;
        st = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory for the logit biases");
    }
    return st;
}

/* ends a sequence's grammar: its sampler goes back to what its parameters ask for */
static void drop_grammar(wgml_batch *b, batch_seq *q) {
    if (!q->gs) return;
    wgml_sampler_free(q->sampler);
    q->sampler = NULL;
    grammar_state_free(q->gs);
    q->gs = NULL;
    make_sampler(b, q, 0, &q->sampler, NULL);
}

wgml_status wgml_batch_seq_keep(wgml_batch *b, int seq, int n_keep, wgml_error *err) {
    wgml_status st = check_seq(b, seq, "wgml_batch_seq_keep", err);
    if (st) return st;
    batch_seq *q = &b->seq[seq];
    if (n_keep < 0 || n_keep > q->n_past)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "wgml_batch_seq_keep: %d tokens of the %d sequence %d holds",
                         n_keep, q->n_past, seq);
    q->n_past = n_keep;
    q->has_logits = 0;
    drop_grammar(b, q);
    return WGML_OK;
}

wgml_status wgml_batch_seq_sampler(wgml_batch *b, int seq, const wgml_sampler_params *p, wgml_error *err) {
    wgml_status st = check_seq(b, seq, "wgml_batch_seq_sampler", err);
    if (st) return st;
    if (!p) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "wgml_batch_seq_sampler: params is NULL");
    if ((st = wgml_sampler_check(p, err))) return st;
    wgml_sampler *s = NULL;
    if (!wgml_sampler_is_greedy(p) && (st = wgml_sampler_create(p, b->n_vocab, &s, err))) return st;
    batch_seq *q = &b->seq[seq];
    wgml_sampler_free(q->sampler);
    grammar_state_free(q->gs);
    q->gs = NULL;
    wgml_free(q->bias_tok), wgml_free(q->bias);
    q->bias_tok = NULL, q->bias = NULL, q->n_bias = 0;
    q->sampler = s;
    q->sp = *p;
    return WGML_OK;
}

wgml_status wgml_batch_seq_grammar(wgml_batch *b, int seq, const wgml_grammar *g, const char *prefix, size_t len,
                                   wgml_error *err) {
    wgml_status st = check_seq(b, seq, "wgml_batch_seq_grammar", err);
    if (st) return st;
    if (!prefix && len) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "wgml_batch_seq_grammar: prefix is NULL");
    batch_seq *q = &b->seq[seq];
    drop_grammar(b, q);
    if (!g) return WGML_OK;
    wgml_sampler *s;
    if ((st = make_sampler(b, q, 1, &s, err))) return st;
    grammar_state *gs;
    if ((st = wgml_grammar_bind(b->m, g, prefix, len, s, &gs, &q->gerr))) {
        if (err) *err = q->gerr;
        wgml_sampler_free(s);
        return st;
    }
    wgml_sampler_free(q->sampler);
    q->sampler = s;
    q->gs = gs;
    return WGML_OK;
}

wgml_status wgml_batch_seq_logit_bias(wgml_batch *b, int seq, const int32_t *tokens, const float *bias, int n,
                                      wgml_error *err) {
    wgml_status st = check_seq(b, seq, "wgml_batch_seq_logit_bias", err);
    if (st) return st;
    if (n < 0 || (n && (!tokens || !bias)))
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "wgml_batch_seq_logit_bias: %d biases without their arrays", n);
    for (int i = 0; i < n; i++) {
        if (tokens[i] < 0 || tokens[i] >= b->n_vocab)
            return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "logit bias: token %d is not in the vocabulary (0..%d)",
                             (int)tokens[i], b->n_vocab - 1);
        if (!(bias[i] >= -1000.0f && bias[i] <= 1000.0f))
            return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "logit bias: %g for token %d is not a number in [-1000, 1000]",
                             (double)bias[i], (int)tokens[i]);
    }
    batch_seq *q = &b->seq[seq];
    int32_t *bt = n ? wgml_malloc((size_t)n * sizeof *bt) : NULL;
    float *bv = n ? wgml_malloc((size_t)n * sizeof *bv) : NULL;
    if (n && (!bt || !bv)) {
        wgml_free(bt), wgml_free(bv);
        return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory for the logit biases");
    }
    if (n) memcpy(bt, tokens, (size_t)n * sizeof *bt), memcpy(bv, bias, (size_t)n * sizeof *bv);
    wgml_free(q->bias_tok), wgml_free(q->bias);
    q->bias_tok = bt, q->bias = bv, q->n_bias = n;
    if (q->sampler) { /* the current one (perhaps with a grammar) takes them */
        if (wgml_sampler_set_bias(q->sampler, bt, bv, n))
            return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory for the logit biases");
        return WGML_OK;
    }
    return make_sampler(b, q, 0, &q->sampler, err); /* biased picks are the host's */
}

const char *wgml_batch_seq_error(const wgml_batch *b, int seq) {
    return b && seq >= 0 && seq < b->n_seq ? b->seq[seq].gerr.message : "";
}

const float *wgml_batch_logits(const wgml_batch *b, int seq) {
    return b && seq >= 0 && seq < b->n_seq && b->seq[seq].has_logits ? b->seq[seq].logits : NULL;
}

wgml_status wgml_batch_step(wgml_batch *b, wgml_batch_item *items, int n_items, wgml_error *err) {
    if (!b || (!items && n_items)) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "wgml_batch_step: NULL argument");
    if (n_items < 1 || n_items > b->n_seq)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "wgml_batch_step: %d items (1..%d sequences)", n_items,
                         b->n_seq);
    int n = 0, n_out = 0;
    for (int i = 0; i < n_items; i++) {
        wgml_batch_item *it = &items[i];
        it->next = -1;
        wgml_status st = check_seq(b, it->seq, "wgml_batch_step", err);
        if (st) return st;
        if (!it->tokens || it->n_tokens < 1 || it->n_tokens > b->n_batch - n)
            return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                             "wgml_batch_step: item %d has %d tokens where %d of the step's %d are left", i,
                             it->n_tokens, b->n_batch - n, b->n_batch);
        const batch_seq *q = &b->seq[it->seq];
        if (it->n_tokens > b->n_ctx - q->n_past)
            return wgml_fail(err, WGML_ERR_CONTEXT_FULL,
                             "sequence %d: %d tokens do not fit: the context holds %d and %d are used", it->seq,
                             it->n_tokens, b->n_ctx, q->n_past);
        /* the decoder refuses a sequence twice */
        memcpy(b->step_tokens + n, it->tokens, (size_t)it->n_tokens * sizeof(int32_t));
        b->runs[i] = (wgml_decoder_run){it->seq, q->n_past, it->n_tokens};
        n += it->n_tokens;
        if (it->sample || it->logits) {
            int want_logits = it->logits || (it->sample && q->sampler);
            b->outs[n_out++] = (wgml_decoder_out){n - 1, want_logits ? q->logits : NULL,
                                           it->sample && !q->sampler ? &b->argmax[i] : NULL};
        }
    }
    for (int i = 0; i < n_items; i++) b->seq[items[i].seq].has_logits = 0;
    wgml_status st = b->dec->eval(b->m->impl, b->st, b->step_tokens, n, b->runs, n_items, b->outs, n_out, err);
    if (st) return st;
    for (int i = 0; i < n_items; i++) {
        wgml_batch_item *it = &items[i];
        batch_seq *q = &b->seq[it->seq];
        memcpy(q->tokens + q->n_past, it->tokens, (size_t)it->n_tokens * sizeof(int32_t));
        q->n_past += it->n_tokens;
        q->has_logits = it->logits;
        if (!it->sample) continue;
        it->next = q->sampler ? wgml_sampler_sample(q->sampler, q->logits, q->tokens, q->n_past) : b->argmax[i];
    }
    return WGML_OK;
}

/* ---- text helpers ---- */

int wgml_token_to_text(const wgml_model *m, int32_t prev, int32_t token, char *buf, int cap) {
    if (!m || !m->tok) return -1;
    int len = wgml_tokenizer_piece(m->tok, token, buf, cap);
    if (len <= 0 || prev < 0 || wgml_tokenizer_kind(m->tok) != WGML_VOCAB_SPM || prev != wgml_tokenizer_bos(m->tok))
        return len;
    if (cap > 0 && buf[0] == ' ') { /* the piece after BOS: its leading space marks a word start, not a space */
        int kept = len < cap ? len : cap;
        memmove(buf, buf + 1, (size_t)kept - 1);
        return len - 1;
    }
    return len;
}

int wgml_token_is_eog(const wgml_model *m, int32_t token) {
    return m && m->tok && wgml_tokenizer_is_eog(m->tok, token);
}
