/*
 * serve_chat.c - the chat endpoint's prompt: the request's messages through
 * the model's chat template (wgml_chat_render, the library's sandboxed Jinja
 * interpreter), with the vocabulary's BOS and EOS texts as bos_token and
 * eos_token and the assistant's header added (add_generation_prompt).
 */
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "serve.h"

int serve_chat_init(serve_server *s) {
    if (!(s->info.tasks & WGML_TASK_GENERATE)) return 0; /* an embedding model: no chat */
    s->chat_template = wgml_model_chat_template(s->model, &s->template_fallback);
    if (!s->chat_template) return cli_fail("the model has no chat template and none to fall back on");
    return 0;
}

char *serve_chat_prompt(serve_server *s, struct json_object *messages, char *msg, size_t msg_size) {
    size_t n = json_object_array_length(messages);
    for (size_t i = 0; i < n; i++) {
        json_object *m = json_object_array_get_idx(messages, i), *role;
        if (!json_object_is_type(m, json_type_object) || !json_object_object_get_ex(m, "role", &role) ||
            !json_object_is_type(role, json_type_string)) {
            snprintf(msg, msg_size, "messages[%zu] must be an object with a string 'role'", i);
            return NULL;
        }
    }
    const char *json = json_object_to_json_string_ext(messages, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
    wgml_chat_params p = wgml_chat_default_params();
    p.add_generation_prompt = 1;
    p.model = s->model; /* its BOS and EOS texts */
    char *prompt = NULL;
    wgml_error err;
    /* no lock: rendering reads the model's vocabulary only, and the scheduler goes on meanwhile */
    wgml_status st = wgml_chat_render(s->chat_template, json, &p, &prompt, &err);
    if (st) {
        snprintf(msg, msg_size, "the chat template failed: %s", err.message);
        return NULL;
    }
    return prompt;
}
