/*
 * bert_family.c - the BERT family's registry entry (model/family.h): text
 * encoders with architectures "bert" and "nomic-bert"; task embed, or
 * rerank for a cross-encoder (pooling "rank" with a classifier head).
 */
#include <stdio.h>

#include "model/bert/bert.h"

static const char *const archs[] = {"bert", "nomic-bert", NULL};

static const char *pooling_name(int p) {
    static const char *const names[] = {"none", "mean", "cls", "last", "rank"};
    return p >= 0 && p <= BERT_POOL_RANK ? names[p] : "?";
}

static wgml_status describe(const gguf_file *f, wgml_family_field_fn field, void *user, wgml_error *err) {
    bert_hparams hp;
    wgml_status st = bert_read_hparams(f, &hp, err);
    if (st || !field) return st;
    char v[128];
#define F(key, ...) (snprintf(v, sizeof v, __VA_ARGS__), field(user, key, v))
    F("layers", "%d", hp.n_layer);
    F("embedding", "%d", hp.n_embd);
    F("feed-forward", "%d (%s)", hp.n_ff, hp.nomic ? "SwiGLU" : "GELU");
    F("heads", "%d (head size %d)", hp.n_head, hp.head_dim);
    F("context", "%d (training)", hp.n_ctx_train);
    F("attention", "%s", hp.causal ? "causal" : "bidirectional");
    F("positions", "%s", hp.nomic ? "rotary" : "learned table");
    if (hp.nomic) F("rope", "neox, %d dims, base %g", hp.rope.n_rot, hp.rope.freq_base);
    F("layer norm eps", "%g", hp.eps);
    F("pooling", "%s%s", pooling_name(hp.pooling), hp.pooling == BERT_POOL_NONE ? " (embeddings pool by mean)" : "");
    F("token types", "%d", hp.n_types);
#undef F
    return WGML_OK;
}

static wgml_status load(const gguf_file *f, wgml_backend *be, const wgml_family_load_params *p, void **out,
                        wgml_error *err) {
    bert_model *m = NULL;
    wgml_status st = bert_model_load(f, be, p ? p->fault : NULL, p ? p->progress : NULL, p ? p->user : NULL, &m, err);
    *out = m;
    return st;
}

static uint32_t file_tasks(const gguf_file *f) {
    bert_hparams hp;
    if (bert_read_hparams(f, &hp, NULL)) return 0;
    return hp.pooling == BERT_POOL_RANK && gguf_find_tensor(f, "cls.output.weight") ? WGML_TASK_RERANK
                                                                                     : WGML_TASK_EMBED;
}

static void model_free(void *m) { bert_model_free(m); }

static wgml_weights *weights(void *m) { return &((bert_model *)m)->w; }

static void get_info(const void *model, wgml_model_info *info) {
    const bert_model *m = model;
    const bert_hparams *hp = &m->hp;
    info->architecture = hp->arch;
    info->tasks = bert_is_reranker(m) ? WGML_TASK_RERANK : WGML_TASK_EMBED;
    info->n_params = m->w.n_params;
    info->weights_bytes = m->w.bytes;
    info->matmul_type = wgml_weights_main_type(&m->w);
    info->n_vocab = hp->n_vocab;
    info->n_ctx_train = hp->n_ctx_train;
    info->n_embd = hp->n_embd;
    info->n_layer = hp->n_layer;
    info->n_head = info->n_head_kv = hp->n_head;
    info->n_ff = hp->n_ff;
    info->head_dim = hp->head_dim;
    /* the tables (token, type, position) are read a row per token, not multiplied */
    uint64_t tables = (uint64_t)hp->n_embd * (uint64_t)(hp->n_vocab + (m->types.buf ? hp->n_types : 0) +
                                                        (m->pos_embd.buf ? hp->n_ctx_train : 0));
    info->matmul_params = m->w.n_params > tables ? m->w.n_params - tables : 0;
    static const int pool[] = {WGML_POOLING_NONE, WGML_POOLING_MEAN, WGML_POOLING_CLS, WGML_POOLING_LAST,
                               WGML_POOLING_CLS};
    info->pooling = pool[hp->pooling];
    info->causal = hp->causal;
}

/* ---- the encoder interface ---- */

static void enc_info(const void *model, wgml_encoder_info *out) {
    const bert_model *m = model;
    const bert_hparams *hp = &m->hp;
    out->dim = hp->n_embd;
    out->n_ctx = hp->n_ctx_train;
    out->n_types = m->types.buf ? hp->n_types : 1;
    out->pool = hp->pooling == BERT_POOL_CLS || hp->pooling == BERT_POOL_RANK ? WGML_POOL_FIRST
                : hp->pooling == BERT_POOL_LAST                               ? WGML_POOL_LAST
                                                                              : WGML_POOL_MEAN;
    out->rerank = bert_is_reranker(m);
}

static wgml_status enc_create(void *model, int n_rows, void **state, wgml_error *err) {
    bert_state *s = NULL;
    wgml_status st = bert_state_create(model, n_rows, &s, err);
    *state = s;
    return st;
}

static void enc_free(void *state) { bert_state_free(state); }

static wgml_status enc_encode(void *model, void *state, const wgml_encoder_batch *b, wgml_pool_mode pool,
                              wgml_encoder_output what, float *out, wgml_error *err) {
    return bert_encode(model, state, b, pool, what, out, err);
}

static const wgml_encoder encoder = {
    .info = enc_info,
    .create = enc_create,
    .free = enc_free,
    .encode = enc_encode,
};

const wgml_family wgml_family_bert = {
    .name = "bert",
    .archs = archs,
    .tasks = WGML_TASK_EMBED | WGML_TASK_RERANK,
    .describe = describe,
    .file_tasks = file_tasks,
    .load = load,
    .free = model_free,
    .weights = weights,
    .get_info = get_info,
    .encoder = &encoder,
};
