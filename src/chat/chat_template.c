/*
 * chat_template.c - a model's chat template and its rendering (the public
 * API over them is api_chat.c): tokenizer.chat_template
 * from the GGUF, else one of five built-in fallbacks chosen from the
 * vocabulary's marker tokens (<|im_start|> ChatML, <|start_header_id|>
 * Llama 3, [INST] Mistral, <|user|>/<|assistant|> Zephyr), then the
 * architecture (qwen2: ChatML), then the vocabulary type (SentencePiece:
 * Llama 2; else ChatML). The fallbacks are our own Jinja text, rendered by
 * the same interpreter as any template.
 */
#include "chat/chat_template.h"

#include "chat/jinja.h"
#include "core/alloc.h"
#include "core/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the built-in templates ------------------------------------------------ */

static const char k_chatml[] =
    "{%- for message in messages -%}\n"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' -}}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}\n";

static const char k_llama2[] = "{%- if messages and messages[0]['role'] == 'system' -%}\n"
                               "  {%- set system = messages[0]['content'] -%}{%- set rest = messages[1:] -%}\n"
                               "{%- else -%}\n"
                               "  {%- set system = none -%}{%- set rest = messages -%}\n"
                               "{%- endif -%}\n"
                               "{%- for message in rest -%}\n"
                               "  {%- if message['role'] == 'user' -%}\n"
                               "    {%- set content = message['content'] -%}\n"
                               "    {%- if loop.first and system is not none -%}\n"
                               "      {%- set content = '<<SYS>>\\n' + system + '\\n<</SYS>>\\n\\n' + content -%}\n"
                               "    {%- endif -%}\n"
                               "    {{- bos_token + '[INST] ' + content | trim + ' [/INST]' -}}\n"
                               "  {%- elif message['role'] == 'assistant' -%}\n"
                               "    {{- ' ' + message['content'] | trim + ' ' + eos_token -}}\n"
                               "  {%- endif -%}\n"
                               "{%- endfor -%}\n";

static const char k_llama3[] =
    "{{- bos_token -}}\n"
    "{%- for message in messages -%}\n"
    "{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | trim + "
    "'<|eot_id|>' -}}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' -}}{%- endif -%}\n";

static const char k_zephyr[] = "{%- for message in messages -%}\n"
                               "{{- '<|' + message['role'] + '|>\\n' + message['content'] + eos_token + '\\n' -}}\n"
                               "{%- endfor -%}\n"
                               "{%- if add_generation_prompt -%}{{- '<|assistant|>\\n' -}}{%- endif -%}\n";

static const char k_mistral[] = "{{- bos_token -}}\n"
                                "{%- set ns = namespace(system='') -%}\n"
                                "{%- for message in messages -%}\n"
                                "  {%- if message['role'] == 'system' -%}\n"
                                "    {%- set ns.system = message['content'] + '\\n\\n' -%}\n"
                                "  {%- elif message['role'] == 'user' -%}\n"
                                "    {{- '[INST] ' + ns.system + message['content'] + ' [/INST]' -}}\n"
                                "    {%- set ns.system = '' -%}\n"
                                "  {%- elif message['role'] == 'assistant' -%}\n"
                                "    {{- message['content'] + eos_token -}}\n"
                                "  {%- endif -%}\n"
                                "{%- endfor -%}\n";

static const struct {
    const char *name, *text;
} k_builtin[] = {
    {"chatml", k_chatml}, {"llama2", k_llama2}, {"llama3", k_llama3}, {"zephyr", k_zephyr}, {"mistral", k_mistral},
};

const char *chat_builtin_template(const char *name) {
    for (size_t i = 0; name && i < sizeof k_builtin / sizeof k_builtin[0]; i++)
        if (!strcmp(k_builtin[i].name, name)) return k_builtin[i].text;
    return NULL;
}

/* ---- a model's template ------------------------------------------------------- */

static int has_token(const gguf_value *tokens, const char *text) {
    size_t n = strlen(text);
    for (uint64_t i = 0; tokens && i < tokens->v.arr.n; i++) {
        gguf_str s = tokens->v.arr.items[i].v.str;
        if (s.len == n && memcmp(s.ptr, text, n) == 0) return 1;
    }
    return 0;
}

wgml_status chat_model_info_load(const gguf_file *g, const wgml_tokenizer *tok, int generates, chat_model_info *info,
                                 wgml_error *err) {
    memset(info, 0, sizeof *info);
    if (tok) {
        info->bos = wgml_tokenizer_token_text(tok, wgml_tokenizer_bos(tok));
        info->eos = wgml_tokenizer_token_text(tok, wgml_tokenizer_eos(tok));
    }
    gguf_str t;
    if (gguf_get_str(g, "tokenizer.chat_template", &t, NULL) == 1) {
        if (!(info->gguf_template = wgml_strndup(t.ptr, (size_t)t.len)))
            return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory copying the chat template");
        info->name = "gguf";
        return WGML_OK;
    }
    if (!generates) return WGML_OK;
    const gguf_value *tokens = NULL;
    if (gguf_get_arr(g, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &tokens, NULL) != 1) tokens = NULL;
    gguf_str arch = {"", 0};
    gguf_get_str(g, "general.architecture", &arch, NULL);
    if (has_token(tokens, "<|im_start|>"))
        info->name = "chatml";
    else if (has_token(tokens, "<|start_header_id|>"))
        info->name = "llama3";
    else if (has_token(tokens, "[INST]"))
        info->name = "mistral";
    else if (has_token(tokens, "<|user|>") && has_token(tokens, "<|assistant|>"))
        info->name = "zephyr";
    else if (gguf_str_eq(arch, "qwen2"))
        info->name = "chatml";
    else if (tok && wgml_tokenizer_kind(tok) == WGML_VOCAB_SPM)
        info->name = "llama2";
    else
        info->name = "chatml";
    info->fallback = chat_builtin_template(info->name);
    return WGML_OK;
}

void chat_model_info_free(chat_model_info *info) {
    if (!info) return;
    wgml_free(info->gguf_template);
    memset(info, 0, sizeof *info);
}

const char *chat_model_info_template(const chat_model_info *info, int *is_fallback) {
    if (is_fallback) *is_fallback = info->gguf_template == NULL && info->fallback != NULL;
    return info->gguf_template ? info->gguf_template : info->fallback;
}

/* ---- rendering ------------------------------------------------------------------ */

/* "YYYY-MM-DD HH:MM:SS" into six fields, checked */
int chat_parse_now(const char *s, int f[6]) {
    static const int width[6] = {4, 2, 2, 2, 2, 2};
    static const char sep[6] = {'-', '-', ' ', ':', ':', '\0'};
    static const int lo[6] = {1, 1, 1, 0, 0, 0}, hi[6] = {9999, 12, 31, 23, 59, 60};
    for (int k = 0; k < 6; k++) {
        int v = 0;
        for (int i = 0; i < width[k]; i++, s++) {
            if (*s < '0' || *s > '9') return 0;
            v = v * 10 + (*s - '0');
        }
        if (*s != sep[k] || v < lo[k] || v > hi[k]) return 0;
        if (sep[k]) s++;
        f[k] = v;
    }
    return 1;
}

wgml_status chat_render(const char *tmpl, const char *messages_json, const chat_render_vars *v, char **prompt,
                        wgml_error *err) {
    *prompt = NULL;
    const char *j = messages_json;
    while (*j == ' ' || *j == '\t' || *j == '\n' || *j == '\r')
        j++;
    if (*j != '[') return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "messages: expected a JSON array of messages");
    jinja_env *e;
    wgml_status st = jinja_env_create(NULL, &e, err);
    if (st) return st;
    if (v->clock) jinja_env_set_clock(e, v->clock[0], v->clock[1], v->clock[2], v->clock[3], v->clock[4], v->clock[5]);
    /* extra variables first: the fixed ones below win over a key of the same name */
    if (v->extra_json) st = jinja_env_set_json_object(e, v->extra_json, strlen(v->extra_json), err);
    if (!st) st = jinja_env_set_json(e, "messages", messages_json, strlen(messages_json), err);
    if (!st) st = jinja_env_set_bool(e, "add_generation_prompt", v->add_generation_prompt, err);
    if (!st) st = jinja_env_set_str(e, "bos_token", v->bos ? v->bos : "", err);
    if (!st) st = jinja_env_set_str(e, "eos_token", v->eos ? v->eos : "", err);
    if (!st) st = jinja_render(e, tmpl, strlen(tmpl), prompt, NULL, err);
    jinja_env_free(e);
    return st;
}
