/*
 * chat_template.h - a model's chat template: the GGUF's tokenizer.chat_template,
 * or a built-in fallback chosen by architecture and vocabulary, plus the
 * BOS/EOS texts a template reads, and rendering a template over messages.
 * Below the models (it reads a GGUF's metadata and a tokenizer only): the
 * public API over it is api_chat.c (wgml_model_chat_template,
 * wgml_chat_render); `wgml template -m` reads only the metadata.
 */
#ifndef WGML_CHAT_TEMPLATE_H
#define WGML_CHAT_TEMPLATE_H

#include "format/gguf.h"
#include "text/tokenizer.h"
#include "wgml.h"

typedef struct chat_model_info {
    char *gguf_template;   /* malloc'ed copy of tokenizer.chat_template, or NULL */
    const char *fallback;  /* the built-in template used without one, or NULL */
    const char *name;      /* "gguf", or the fallback's name ("chatml", ...); NULL: no template */
    const char *bos, *eos; /* token texts owned by the tokenizer, or NULL */
} chat_model_info;

/* Fills info from a GGUF's metadata and tokenizer (tok may be NULL);
 * generates: the model generates text (one that does not gets no
 * fallback). Fails only when out of memory. */
wgml_status chat_model_info_load(const gguf_file *g, const wgml_tokenizer *tok, int generates, chat_model_info *info,
                                 wgml_error *err);
void chat_model_info_free(chat_model_info *info);

/* The template to use (NULL: none); *is_fallback when it is built in. */
const char *chat_model_info_template(const chat_model_info *info, int *is_fallback);

/* The built-in template of that name ("chatml", "llama2", "llama3", "zephyr", "mistral"), or NULL. */
const char *chat_builtin_template(const char *name);

/* What a template sees besides the messages. */
typedef struct chat_render_vars {
    int add_generation_prompt;
    const char *bos, *eos;  /* bos_token, eos_token (NULL: "") */
    const int *clock;       /* strftime_now's clock: year, month, day, hour, minute, second; NULL: the real one */
    const char *extra_json; /* a JSON object of more variables, or NULL */
} chat_render_vars;

/* Renders tmpl over messages_json (a JSON array) into *prompt (malloc'ed). */
wgml_status chat_render(const char *tmpl, const char *messages_json, const chat_render_vars *v, char **prompt,
                        wgml_error *err);

/* "YYYY-MM-DD HH:MM:SS" into six fields; 0 when it is not that. */
int chat_parse_now(const char *s, int f[6]);

#endif
