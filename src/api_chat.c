/*
 * api_chat.c - the public chat-template API (include/wgml.h): a model's
 * template and its name, and wgml_chat_render, which fills in the model's
 * template and BOS/EOS texts where the caller gives none and renders
 * through chat/chat_template.h.
 */
#include <string.h>

#include "api_model.h"
#include "chat/chat_template.h"
#include "core/error.h"

const char *wgml_model_chat_template(const wgml_model *model, int *is_fallback) {
    if (is_fallback) *is_fallback = 0;
    return model ? chat_model_info_template(&model->chat, is_fallback) : NULL;
}

const char *wgml_model_chat_template_name(const wgml_model *model) { return model ? model->chat.name : NULL; }

wgml_chat_params wgml_chat_default_params(void) {
    wgml_chat_params p;
    memset(&p, 0, sizeof p);
    p.add_generation_prompt = 1;
    return p;
}

wgml_status wgml_chat_render(const char *tmpl, const char *messages_json, const wgml_chat_params *params, char **prompt,
                             wgml_error *err) {
    if (!prompt) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "wgml_chat_render: prompt is NULL");
    *prompt = NULL;
    wgml_chat_params defaults = wgml_chat_default_params();
    const wgml_chat_params *p = params ? params : &defaults;
    if (!tmpl && p->model) tmpl = wgml_model_chat_template(p->model, NULL);
    if (!tmpl) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "wgml_chat_render: no chat template");
    if (!messages_json) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "wgml_chat_render: messages_json is NULL");
    const char *j = messages_json;
    while (*j == ' ' || *j == '\t' || *j == '\n' || *j == '\r')
        j++;
    if (*j != '[') return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "messages: expected a JSON array of messages");
    int clock[6];
    if (p->now && !chat_parse_now(p->now, clock))
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "wgml_chat_render: now '%.40s' is not \"YYYY-MM-DD HH:MM:SS\"",
                         p->now);
    chat_render_vars v = {.add_generation_prompt = p->add_generation_prompt,
                          .bos = p->bos_token ? p->bos_token : p->model ? p->model->chat.bos : NULL,
                          .eos = p->eos_token ? p->eos_token : p->model ? p->model->chat.eos : NULL,
                          .clock = p->now ? clock : NULL,
                          .extra_json = p->extra_json};
    return chat_render(tmpl, messages_json, &v, prompt, err);
}
