/*
 * llama_family.c - the Llama family's registry entry (model/family.h):
 * decoder-only LLMs with architectures "llama" and "qwen2", task generate,
 * through the decoder interface: a state with one sequence is a session's
 * (llama_state: the single-sequence path), one with n_seq sequences a
 * batch's (llama_multi).
 */
#include <stdio.h>

#include "core/alloc.h"
#include "core/dtype.h"
#include "core/error.h"

#include "model/llama/llama.h"

static const char *const archs[] = {"llama", "qwen2", NULL};

static wgml_status describe(const gguf_file *f, wgml_family_field_fn field, void *user, wgml_error *err) {
    llama_hparams hp;
    wgml_status st = llama_read_hparams(f, &hp, err);
    if (st || !field) return st;
    char v[128];
#define F(key, ...) (snprintf(v, sizeof v, __VA_ARGS__), field(user, key, v))
    F("layers", "%d", hp.n_layer);
    F("embedding", "%d", hp.n_embd);
    F("feed-forward", "%d", hp.n_ff);
    F("heads", "%d (KV heads %d, head size %d)", hp.n_head, hp.n_head_kv, hp.head_dim);
    F("context", "%d (training)", hp.n_ctx_train);
    F("rms norm eps", "%g", hp.eps);
    F("rope", "%s, %d dims, base %g, scale %g", hp.rope.neox ? "neox" : "normal", hp.rope.n_rot, hp.rope.freq_base,
      hp.rope.freq_scale);
#undef F
    return WGML_OK;
}

static wgml_status load(const gguf_file *f, wgml_backend *be, const wgml_family_load_params *p, void **out,
                        wgml_error *err) {
    llama_model *m = NULL;
    wgml_status st = llama_model_load_fault(f, be, p ? p->fault : NULL, p ? p->progress : NULL, p ? p->user : NULL, &m, err);
    *out = m;
    return st;
}

static void model_free(void *m) { llama_model_free(m); }

static wgml_weights *weights(void *m) { return &((llama_model *)m)->w; }

static void get_info(const void *model, wgml_model_info *info) {
    const llama_model *m = model;
    const llama_hparams *hp = &m->hp;
    info->architecture = hp->arch;
    info->n_params = m->w.n_params;
    info->weights_bytes = m->w.bytes;
    info->matmul_type = wgml_weights_main_type(&m->w);
    info->n_vocab = hp->n_vocab;
    info->n_ctx_train = hp->n_ctx_train;
    info->n_embd = hp->n_embd;
    info->n_layer = hp->n_layer;
    info->n_head = hp->n_head;
    info->n_head_kv = hp->n_head_kv;
    info->n_ff = hp->n_ff;
    info->head_dim = hp->head_dim;
    info->tied_embeddings = m->output.buf == m->tok_embd.buf;
    uint64_t table = (uint64_t)hp->n_vocab * (uint64_t)hp->n_embd;
    info->matmul_params = m->w.n_params - table * (info->tied_embeddings ? 1 : 2);
}

static int quantized_matmuls(const void *model) {
    const llama_model *l = model;
    int q = wgml_dtype_get(l->output.type)->quantized;
    for (int i = 0; i < l->hp.n_layer; i++) {
        const llama_layer *y = &l->layers[i];
        const wgml_tensor *w[] = {&y->wq, &y->wk, &y->wv, &y->wo, &y->w_gate, &y->w_up, &y->w_down};
        for (size_t k = 0; k < sizeof w / sizeof w[0]; k++) q |= wgml_dtype_get(w[k]->type)->quantized;
    }
    return q;
}

/* ---- the decoder interface ---- */

typedef struct {
    llama_state *one;   /* n_seq 0: a session's */
    llama_multi *many;  /* else: a batch's */
} dec_state;

static int n_vocab(const void *model) { return ((const llama_model *)model)->hp.n_vocab; }
static int n_ctx_train(const void *model) { return ((const llama_model *)model)->hp.n_ctx_train; }

static void dec_free(void *state) {
    dec_state *d = state;
    if (!d) return;
    llama_state_free(d->one);
    llama_multi_free(d->many);
    wgml_free(d);
}

static wgml_status dec_create(void *model, const wgml_decoder_params *p, void **out, wgml_error *err) {
    *out = NULL;
    dec_state *d = wgml_calloc(1, sizeof *d);
    if (!d) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory creating a decoder state");
    wgml_status st = p->n_seq == 0 ? llama_state_create(model, p->n_ctx, p->n_batch, p->kv_type, &d->one, err)
                                   : llama_multi_create(model, p->n_seq, p->n_ctx, p->n_batch, p->kv_type, &d->many, err);
    if (st) {
        dec_free(d);
        return st;
    }
    *out = d;
    return WGML_OK;
}

static wgml_status dec_eval(void *model, void *state, const int32_t *tokens, int n, const wgml_decoder_run *runs,
                            int n_runs, const wgml_decoder_out *outs, int n_out, wgml_error *err) {
    dec_state *d = state;
    if (d->many) return llama_eval_multi(model, d->many, tokens, n, runs, n_runs, outs, n_out, err);
    if (n_runs != 1 || runs[0].seq != 0 || runs[0].n != n || n_out > 1 || (n_out == 1 && outs[0].row != n - 1))
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                         "a one-sequence decoder state takes one run of sequence 0 (got %d runs, the first of "
                         "sequence %d) and the scores of its last row only (%d rows asked for)",
                         n_runs, n_runs > 0 ? runs[0].seq : -1, n_out);
    return llama_eval(model, d->one, tokens, n, runs[0].pos, n_out ? outs[0].logits : NULL,
                      n_out ? outs[0].argmax : NULL, err);
}

static uint64_t step_bytes(const void *model, const void *state, int kv_len) {
    const llama_model *l = model;
    const dec_state *d = state;
    const llama_hparams *hp = &l->hp;
    uint64_t embd = wgml_row_size(l->tok_embd.type, hp->n_embd);
    uint64_t weights = l->w.bytes - embd * (uint64_t)hp->n_vocab + embd;
    if (l->output.buf == l->tok_embd.buf) weights += embd * (uint64_t)(hp->n_vocab - 1); /* tied: the output reads it all */
    uint32_t kv_type = d->one ? llama_state_kv_type(d->one) : llama_multi_kv_type(d->many);
    uint64_t kv = 2ull * (uint64_t)hp->n_layer * (uint64_t)(kv_len > 0 ? kv_len : 0) *
                  wgml_row_size(kv_type, (int64_t)hp->n_head_kv * hp->head_dim);
    return weights + kv;
}

static const wgml_decoder decoder = {
    .n_vocab = n_vocab,
    .n_ctx_train = n_ctx_train,
    .create = dec_create,
    .free = dec_free,
    .eval = dec_eval,
    .step_bytes = step_bytes,
};

const wgml_family wgml_family_llama = {
    .name = "llama",
    .archs = archs,
    .tasks = WGML_TASK_GENERATE,
    .describe = describe,
    .load = load,
    .free = model_free,
    .weights = weights,
    .get_info = get_info,
    .quantized_matmuls = quantized_matmuls,
    .decoder = &decoder,
};
