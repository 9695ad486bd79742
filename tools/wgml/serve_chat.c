/*
 * serve_chat.c - the chat endpoint's prompt: the request's messages through
 * the model's chat template (wgml_chat_render, the library's sandboxed Jinja
 * interpreter), with the vocabulary's BOS and EOS texts as bos_token and
 * eos_token and the assistant's header added (add_generation_prompt).
 */
#include <errno.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "serve.h"

int serve_chat_init(serve_server *s) {
    if (!(s->info.tasks & WGML_TASK_GENERATE)) return 0; /* an embedding model: no chat */
    if (s->template_file) {
        FILE *f = fopen(s->template_file, "rb");
        if (!f) return cli_fail("cannot open '%s': %s", s->template_file, strerror(errno));
        size_t cap = 1 << 16, n = 0, r;
        char *t = malloc(cap + 1);
        while (t && (r = fread(t + n, 1, cap - n, f)) > 0) {
            n += r;
            if (n == cap) {
                char *g = cap < ((size_t)16 << 20) ? realloc(t, (cap *= 2) + 1) : NULL;
                if (!g) free(t);
                t = g;
            }
        }
        fclose(f);
        if (!t) return cli_fail("cannot read '%s': over 16 MiB or out of memory", s->template_file);
        t[n] = 0;
        if (strlen(t) != n) {
            free(t);
            return cli_fail("'%s' contains a NUL byte: a chat template is text", s->template_file);
        }
        s->template_owned = t;
        s->chat_template = t;
    } else {
        s->chat_template = wgml_model_chat_template(s->model, &s->template_fallback);
    }
    if (!s->chat_template) return cli_fail("the model has no chat template and none to fall back on");
    s->tool_format = wgml_tool_format_of(s->chat_template);
    return 0;
}

/* An assistant message's tool_calls carry their arguments as JSON text (OpenAI's API); templates
 * read them as objects (tool_call.arguments | tojson, as Hugging Face's convention has them): a
 * copy of the messages with each arguments string parsed. NULL: no change needed (or out of
 * memory: the messages go as they are). Arguments that are not a JSON object's text: *bad set,
 * msg says which. */
static json_object *arguments_as_objects(json_object *messages, int *bad, char *msg, size_t msg_size) {
    json_object *copy = NULL;
    *bad = 0;
    const size_t n = json_object_array_length(messages);
    for (size_t i = 0; i < n; i++) {
        json_object *m = json_object_array_get_idx(messages, i), *calls;
        if (!json_object_object_get_ex(m, "tool_calls", &calls) || !json_object_is_type(calls, json_type_array)) continue;
        for (size_t k = 0; k < json_object_array_length(calls); k++) {
            json_object *fn, *args;
            if (!json_object_object_get_ex(json_object_array_get_idx(calls, k), "function", &fn) ||
                !json_object_object_get_ex(fn, "arguments", &args) || !json_object_is_type(args, json_type_string))
                continue;
            json_object *parsed = json_tokener_parse(json_object_get_string(args));
            if (!parsed || !json_object_is_type(parsed, json_type_object)) {
                json_object_put(parsed);
                json_object_put(copy);
                snprintf(msg, msg_size, "messages[%zu].tool_calls[%zu].function.arguments is not the JSON text of an object", i, k);
                *bad = 1;
                return NULL;
            }
            if (!copy && json_object_deep_copy(messages, &copy, NULL)) {
                json_object_put(parsed);
                return NULL;
            }
            json_object *cm = json_object_array_get_idx(copy, i), *ccalls, *cfn;
            json_object_object_get_ex(cm, "tool_calls", &ccalls);
            json_object_object_get_ex(json_object_array_get_idx(ccalls, k), "function", &cfn);
            json_object_object_add(cfn, "arguments", parsed);
        }
    }
    return copy;
}

char *serve_chat_prompt(serve_server *s, struct json_object *messages, const char *extra_json, char *msg,
                        size_t msg_size) {
    size_t n = json_object_array_length(messages);
    for (size_t i = 0; i < n; i++) {
        json_object *m = json_object_array_get_idx(messages, i), *role;
        if (!json_object_is_type(m, json_type_object) || !json_object_object_get_ex(m, "role", &role) ||
            !json_object_is_type(role, json_type_string)) {
            snprintf(msg, msg_size, "messages[%zu] must be an object with a string 'role'", i);
            return NULL;
        }
    }
    int bad;
    json_object *converted = arguments_as_objects(messages, &bad, msg, msg_size);
    if (bad) return NULL;
    const char *json = json_object_to_json_string_ext(converted ? converted : messages,
                                                      JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
    wgml_chat_params p = wgml_chat_default_params();
    p.add_generation_prompt = 1;
    p.model = s->model; /* its BOS and EOS texts */
    p.extra_json = extra_json;
    char *prompt = NULL;
    wgml_error err;
    /* no lock: rendering reads the model's vocabulary only, and the scheduler goes on meanwhile */
    wgml_status st = wgml_chat_render(s->chat_template, json, &p, &prompt, &err);
    json_object_put(converted);
    if (st) {
        snprintf(msg, msg_size, "the chat template failed: %s", err.message);
        return NULL;
    }
    return prompt;
}
