/*
 * llama.h - Llama-family decoder models (architectures "llama" and "qwen2").
 *
 * llama_model holds the hyper-parameters and the weights as backend tensors;
 * llama_state holds one session's KV cache and activation buffers. The forward
 * pass (llama_eval) is written once against the backend op interface.
 */
#ifndef WGML_MODEL_LLAMA_H
#define WGML_MODEL_LLAMA_H

#include "backend/backend.h"
#include "format/gguf.h"
#include "model/family.h"
#include "model/weights.h"

/* The family's registry entry (model/family.h): architectures "llama" and "qwen2", task generate. */
extern const wgml_family wgml_family_llama;

typedef struct llama_hparams {
    char arch[32];
    int n_vocab, n_ctx_train, n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff;
    float eps;
    wgml_rope rope; /* n_rot, layout, base, scale (freq_factors set at load when present) */
} llama_hparams;

typedef struct llama_layer {
    wgml_tensor attn_norm, wq, wk, wv, wo;
    wgml_tensor bq, bk, bv; /* type 0 with buf NULL when absent */
    wgml_tensor ffn_norm, w_gate, w_up, w_down;
} llama_layer;

typedef struct llama_model {
    llama_hparams hp;
    wgml_backend *be; /* borrowed */
    wgml_tensor tok_embd, out_norm, output, rope_freqs;
    llama_layer *layers;
    wgml_weights w; /* the buffers, parameter and byte counts (model/weights.h) */
} llama_model;

typedef struct llama_state llama_state;

/* Progress callback during loading (bytes done of total); non-zero cancels. */
typedef wgml_load_progress_fn llama_progress_fn;

/* Reads hyper-parameters from f's metadata (no tensors); errors name the missing
 * key. An architecture no family knows is refused by the registry's message. */
wgml_status llama_read_hparams(const gguf_file *f, llama_hparams *hp, wgml_error *err);

/* Creates every weight on the backend. When the file's tensor data is present
 * (mapped or in memory) it is uploaded; for a header-only gguf_file
 * (gguf_open_header) the weights are created empty, and llama_model_stream
 * fills them afterwards. */
wgml_status llama_model_load(const gguf_file *f, wgml_backend *be, llama_progress_fn progress, void *user,
                             llama_model **out, wgml_error *err);

/* A planted fault, for testing `wgml verify` (wgml_weight_fault in model/weights.h). */
typedef wgml_weight_fault llama_fault;
/* llama_model_load with an optional fault (NULL: none). A fault naming a
 * tensor the model does not have, or a block past its end, is an error. */
wgml_status llama_model_load_fault(const gguf_file *f, wgml_backend *be, const llama_fault *fault,
                                   llama_progress_fn progress, void *user, llama_model **out, wgml_error *err);

/* Reads the bytes of file_size bytes through read(offset, buf, len) and fills the weights
 * of a model loaded from a header-only file, tensor by tensor in file order,
 * in chunks of at most a few MiB. */
typedef wgml_weights_read_fn llama_read_fn;
wgml_status llama_model_stream(llama_model *m, const gguf_file *f, llama_read_fn read, void *read_user,
                               llama_progress_fn progress, void *user, wgml_error *err);
void llama_model_free(llama_model *m);

/* kv_type: the cache's element type, one the backend lists in kv_types */
wgml_status llama_state_create(llama_model *m, int n_ctx, int n_batch, uint32_t kv_type, llama_state **out,
                               wgml_error *err);
void llama_state_free(llama_state *s);
int llama_state_n_ctx(const llama_state *s);
int llama_state_n_batch(const llama_state *s);
uint32_t llama_state_kv_type(const llama_state *s); /* the KV cache's element type */

/* Evaluates tokens[0..n) at positions pos..pos+n-1 (n <= n_batch). Afterwards
 * `logits` (n_vocab floats, may be NULL) holds the last token's logits and
 * `argmax` (may be NULL) the index of their maximum, computed on the device
 * (so a greedy step reads back 4 bytes). */
wgml_status llama_eval(llama_model *m, llama_state *s, const int32_t *tokens, int n, int pos, float *logits,
                       int32_t *argmax, wgml_error *err);

/* ---- the forward pass's parts, shared by llama_eval and llama_eval_multi ---- */

/* A step's activations: views of n rows each (ids: i32 [n], the tokens). */
typedef struct llama_acts {
    const wgml_tensor *x, *q, *k, *v, *att, *h, *ids;
} llama_acts;

/* Runs a layer's attention: `a` holds q, k, v, out, heads, scale and RoPE;
 * the callback adds the caches (and positions) and records the op(s). */
typedef void (*llama_attend_fn)(void *ctx, int layer, wgml_attention_args *a);

/* The embedding lookup and every layer, into a->x (no output head).
 * batch_invariant: the matmuls' flag of that name (ops.h). */
void llama_layers(llama_model *m, const llama_acts *a, int batch_invariant, llama_attend_fn attend, void *ctx);
/* t, or NULL for an absent optional tensor (buf NULL) */
const wgml_tensor *llama_opt(const wgml_tensor *t);
/* A tensor [ne1][ne0] of `type` in a buffer of its own, which is appended to
 * bufs[*n_bufs] (the caller's list, freed with it); the error names it. */
wgml_status llama_new_tensor(wgml_backend *be, wgml_buffer **bufs, int *n_bufs, wgml_tensor *t, const char *name,
                             uint32_t type, int64_t ne0, int64_t ne1, wgml_buffer_usage usage, wgml_error *err);

/* ---- several sequences in one step (llama_multi.c) ----
 * n_seq sequences, each with a KV cache of n_ctx rows, share activations for
 * n_batch rows. A step holds runs of rows, each run the next tokens of one
 * sequence at its positions; every matmul reads each weight once for all
 * rows, and attention runs per run over that sequence's cache (the general
 * path with explicit positions). A row's result does not depend on the other
 * runs of its step (batch_invariant matmuls), so a sequence gets the same
 * tokens alone or beside others. */
typedef struct llama_multi llama_multi;

/* A run of rows of one sequence, and a row whose scores a step computes
 * (model/family.h's decoder interface). */
typedef wgml_decoder_run llama_run;
typedef wgml_decoder_out llama_out;

wgml_status llama_multi_create(llama_model *m, int n_seq, int n_ctx, int n_batch, uint32_t kv_type,
                               llama_multi **out, wgml_error *err);
void llama_multi_free(llama_multi *s);
int llama_multi_n_ctx(const llama_multi *s);
int llama_multi_n_batch(const llama_multi *s);
uint32_t llama_multi_kv_type(const llama_multi *s);

/* Evaluates tokens[0..n) laid out as runs[0..n_runs) (their n summing to n
 * <= n_batch) and computes the logits of outs[0..n_out). */
wgml_status llama_eval_multi(llama_model *m, llama_multi *s, const int32_t *tokens, int n, const llama_run *runs,
                             int n_runs, const llama_out *outs, int n_out, wgml_error *err);

#endif
