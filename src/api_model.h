/*
 * api_model.h - the model object behind the public API, shared by the files
 * that implement it (api.c: models, sessions, generation; api_embed.c:
 * embeddings and reranking). Private: not installed, not for tests.
 */
#ifndef WGML_API_MODEL_H
#define WGML_API_MODEL_H

#include "backend/backend.h"
#include "chat/chat_template.h"
#include "format/gguf.h"
#include "model/family.h"
#include "model/llama/llama.h"
#include "text/tokenizer.h"
#include "wgml.h"

struct wgml_model {
    gguf_file *gguf;
    wgml_backend *be;
    wgml_tokenizer *tok;
    const wgml_family *fam; /* the model family that runs it (model/family.h) */
    void *impl;             /* the family's model */
    llama_model *llm;       /* = impl for the llama family (the generation task), else NULL */
    char name[128];
    void (*log)(void *user, const char *line); /* wgml_model_params.log: notes while in use */
    void *log_user;
    chat_model_info chat; /* the chat template and BOS/EOS texts (wgml_model_chat_template) */
};

/* A session's default context: the model's training context, capped at 4096 (llama family). */
int wgml_model_default_ctx(const wgml_model *m);
/* The KV cache's element type for a wgml_kv_type on the model's backend, or an error. */
wgml_status wgml_model_kv_dtype(const wgml_model *m, wgml_kv_type want, uint32_t *out, wgml_error *err);

#endif
