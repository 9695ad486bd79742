/*
 * chat_template.h - a model's chat template: the GGUF's tokenizer.chat_template,
 * or a built-in fallback chosen by architecture and vocabulary, plus the
 * BOS/EOS texts a template reads. Used by the public API (wgml_model_*,
 * wgml_chat_render) and by `wgml template -m`, which reads only the metadata.
 */
#ifndef WGML_CHAT_TEMPLATE_H
#define WGML_CHAT_TEMPLATE_H

#include "format/gguf.h"
#include "model/family.h"
#include "text/tokenizer.h"
#include "wgml.h"

typedef struct chat_model_info {
    char *gguf_template;   /* malloc'ed copy of tokenizer.chat_template, or NULL */
    const char *fallback;  /* the built-in template used without one, or NULL */
    const char *name;      /* "gguf", or the fallback's name ("chatml", ...); NULL: no template */
    const char *bos, *eos; /* token texts owned by the tokenizer, or NULL */
} chat_model_info;

/* Fills info from a GGUF's metadata and tokenizer (tok may be NULL) for a
 * model of family fam (a family that does not generate text gets no
 * fallback). Fails only when out of memory. */
wgml_status chat_model_info_load(const gguf_file *g, const wgml_tokenizer *tok, const wgml_family *fam,
                                 chat_model_info *info, wgml_error *err);
void chat_model_info_free(chat_model_info *info);

/* The template to use (NULL: none); *is_fallback when it is built in. */
const char *chat_model_info_template(const chat_model_info *info, int *is_fallback);

/* The built-in template of that name ("chatml", "llama2", "llama3", "zephyr", "mistral"), or NULL. */
const char *chat_builtin_template(const char *name);

#endif
