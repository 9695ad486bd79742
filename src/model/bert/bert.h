/*
 * bert.h - BERT-family text encoders (architectures "bert" and "nomic-bert"):
 * embeddings (BERT, MiniLM, BGE, E5, GTE, nomic-embed) and cross-encoder
 * rerankers, from GGUF files as llama.cpp's converter writes them.
 *
 * bert_model holds the hyper-parameters and the weights as backend tensors
 * (read-only once loaded); a bert_state holds one request's activations
 * (the family's encoder state, model/family.h). bert_encode runs one step:
 * several texts packed one after another in the rows, each attending to its
 * own rows only.
 */
#ifndef WGML_MODEL_BERT_H
#define WGML_MODEL_BERT_H

#include "backend/backend.h"
#include "format/gguf.h"
#include "model/family.h"
#include "model/weights.h"

/* The family's registry entry (model/family.h): "bert" and "nomic-bert", tasks embed and rerank. */
extern const wgml_family wgml_family_bert;

/* bert.pooling_type, as llama.cpp numbers it */
typedef enum bert_pooling {
    BERT_POOL_NONE = 0,
    BERT_POOL_MEAN = 1,
    BERT_POOL_CLS = 2,
    BERT_POOL_LAST = 3,
    BERT_POOL_RANK = 4, /* a cross-encoder: [CLS] row -> cls (tanh) -> cls.output, one score */
} bert_pooling;

typedef struct bert_hparams {
    char arch[32];
    int nomic; /* nomic-bert: fused QKV, rotary positions, SwiGLU, no biases, no position table */
    int n_vocab, n_ctx_train, n_embd, n_layer, n_head, head_dim, n_ff, n_types;
    float eps;      /* layer norm */
    int causal;     /* bert.attention.causal */
    int pooling;    /* bert_pooling; BERT_POOL_NONE when the file names none */
    wgml_rope rope; /* nomic-bert: NeoX rotation of every head dimension */
} bert_hparams;

typedef struct bert_layer {
    wgml_tensor wq, wk, wv, bq, bk, bv; /* nomic-bert: wq, wk, wv are row parts of attn_qkv */
    wgml_tensor wo, bo, attn_norm_w, attn_norm_b;
    wgml_tensor up, b_up, gate, down, b_down, out_norm_w, out_norm_b; /* gate: nomic-bert only */
} bert_layer;

typedef struct bert_state bert_state;

typedef struct bert_model {
    bert_hparams hp;
    wgml_backend *be; /* borrowed */
    wgml_tensor tok_embd, types, pos_embd, embd_norm_w, embd_norm_b;
    wgml_tensor cls_w, cls_b, cls_out_w, cls_out_b; /* rerankers; absent: buf NULL */
    bert_layer *layers;
    wgml_weights w;
} bert_model;

/* Reads and checks the hyper-parameters from f's metadata (no tensors). */
wgml_status bert_read_hparams(const gguf_file *f, bert_hparams *hp, wgml_error *err);

wgml_status bert_model_load(const gguf_file *f, wgml_backend *be, const wgml_weight_fault *fault,
                            wgml_load_progress_fn progress, void *user, bert_model **out, wgml_error *err);
void bert_model_free(bert_model *m);

/* 1 when the model scores pairs (pooling rank with a classifier head). */
int bert_is_reranker(const bert_model *m);

/* A request's activations for steps of up to `rows` rows (bert_encode grows
 * it, between steps, for a longer one). */
wgml_status bert_state_create(bert_model *m, int rows, bert_state **out, wgml_error *err);
void bert_state_free(bert_state *s);

/* Encodes one step of packed texts (wgml_encoder_batch, model/family.h) and
 * writes n_seq results to out (n_embd or 1 floats each). mode: pooling for
 * the POOLED and L2 outputs. */
wgml_status bert_encode(bert_model *m, bert_state *s, const wgml_encoder_batch *b, wgml_pool_mode mode,
                        wgml_encoder_output what, float *out, wgml_error *err);

#endif
