/*
 * api_model.h - the model object behind the public API, shared by the files
 * that implement it (api.c: models, sessions, generation; api_batch.c:
 * batches; api_embed.c: embeddings and reranking; api_speech.c: speech;
 * api_chat.c: chat templates; api_grammar.c: grammars). Each task runs the model through its
 * family's interface (model/family.h: decoder, encoder, speaker), never
 * through a family's own functions. Private: not installed, not for tests.
 */
#ifndef WGML_API_MODEL_H
#define WGML_API_MODEL_H

#include "backend/backend.h"
#include "chat/chat_template.h"
#include "format/gguf.h"
#include "model/family.h"
#include "text/grammar.h"
#include "text/sampler.h"
#include "text/tokenizer.h"
#include "wgml.h"

#include <stdatomic.h>

#define WGML_MODEL_TASK_STATES 4

struct wgml_model {
    gguf_file *gguf;
    wgml_backend *be;
    wgml_tokenizer *tok;
    const wgml_family *fam; /* the model family that runs it (model/family.h) */
    void *impl;             /* the family's model: the API runs it through the family's task interfaces */
    char name[128];
    void (*log)(void *user, const char *line); /* wgml_model_params.log: notes while in use */
    void *log_user;
    chat_model_info chat; /* the chat template and BOS/EOS texts (wgml_model_chat_template) */
    /* A state per request: the last one of each task waits here for the next
     * request (its device memory made once), taken and given back atomically
     * so that two requests never share one (wgml_model_take_state). */
    _Atomic(void *) idle[WGML_MODEL_TASK_STATES];
    /* the vocabulary as grammars see it (api_grammar.c), made at the first grammar's use */
    _Atomic(struct wgml_grammar_vocab *) gvocab;
};

/* The tasks whose states wait on the model between requests. */
enum { WGML_STATE_ENCODER, WGML_STATE_SPEAKER, WGML_STATE_TRANSCRIBER, WGML_STATE_VISION };

/* The idle state of `task` (NULL: none waiting; the caller makes one). */
void *wgml_model_take_state(wgml_model *m, int task);
/* Gives a request's state back: it waits for the next request, or is freed
 * (free_fn) when one already waits. */
void wgml_model_give_state(wgml_model *m, int task, void *state, void (*free_fn)(void *));

/* The model's decoder (model/family.h), or NULL with an error naming the
 * family when it does not generate text (`what`: "sessions", "batches"). */
const wgml_decoder *wgml_model_decoder(const wgml_model *m, const char *what, wgml_error *err);
/* A decoder state's default context: the model's training context, capped at 4096. */
int wgml_model_default_ctx(const wgml_model *m);
/* The KV cache's element type for a wgml_kv_type on the model's backend, or an error. */
wgml_status wgml_model_kv_dtype(const wgml_model *m, wgml_kv_type want, uint32_t *out, wgml_error *err);

/* Ties grammar gr to sampler s for one generation on m: a fresh state of the
 * grammar (*state, the caller frees it after the sampler) that has taken
 * `prefix` (len bytes, perhaps 0), and the model's vocabulary as the token
 * filter sees it (made at the first call, kept until the model is freed). */
wgml_status wgml_grammar_bind(wgml_model *m, const wgml_grammar *gr, const char *prefix, size_t len,
                              wgml_sampler *s, grammar_state **state, wgml_error *err);
void wgml_model_grammar_vocab_free(wgml_model *m);

#endif
