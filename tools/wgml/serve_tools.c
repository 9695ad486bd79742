/*
 * serve_tools.c - tool calls in /v1/chat/completions: the request's `tools`,
 * `tool_choice` and `parallel_tool_calls` read into the library's wgml_tools
 * (the format of the template, the calls' grammar, the calls parsed back:
 * src/chat/tools.c), and the calls as json-c objects for the reply.
 *
 * With tool_choice `required` or a named function the reply is calls from
 * its first token; with `auto` it may be text, and the grammar starts where
 * the format's call begins (serve_sched.c watches for the trigger). The tools
 * are given to the template as `tools`, as Hugging Face's
 * apply_chat_template does.
 */
#include <json-c/json.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "serve.h"

static int fail(serve_tools *t, const char *param, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(serve_tools *t, const char *param, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->err, sizeof t->err, fmt, ap);
    va_end(ap);
    t->bad_param = param;
    return -1;
}

int serve_tools_parse(serve_server *s, json_object *req, serve_tools *t) {
    memset(t, 0, sizeof *t);
    json_object *tools = NULL, *choice = NULL, *par = NULL;
    json_object_object_get_ex(req, "tools", &tools);
    json_object_object_get_ex(req, "tool_choice", &choice);
    json_object_object_get_ex(req, "parallel_tool_calls", &par);
    int parallel = 1;
    if (par && !json_object_is_type(par, json_type_null)) {
        if (!json_object_is_type(par, json_type_boolean))
            return fail(t, "parallel_tool_calls", "'parallel_tool_calls' must be a boolean");
        parallel = json_object_get_boolean(par);
    }
    if (!tools || json_object_is_type(tools, json_type_null)) {
        if (choice && !json_object_is_type(choice, json_type_null) &&
            !(json_object_is_type(choice, json_type_string) && !strcmp(json_object_get_string(choice), "none")))
            return fail(t, "tool_choice", "'tool_choice' needs 'tools'");
        return 0;
    }
    if (!json_object_is_type(tools, json_type_array)) return fail(t, "tools", "'tools' must be an array");
    wgml_tool_choice c = WGML_TOOL_CHOICE_AUTO;
    const char *named = NULL;
    if (choice && !json_object_is_type(choice, json_type_null)) {
        json_object *fn, *name;
        if (json_object_is_type(choice, json_type_string)) {
            const char *v = json_object_get_string(choice);
            if (!strcmp(v, "none")) c = WGML_TOOL_CHOICE_NONE;
            else if (!strcmp(v, "auto")) c = WGML_TOOL_CHOICE_AUTO;
            else if (!strcmp(v, "required")) c = WGML_TOOL_CHOICE_REQUIRED;
            else return fail(t, "tool_choice", "'tool_choice' must be none, auto, required or {\"type\": \"function\", ...}");
        } else if (json_object_is_type(choice, json_type_object) && json_object_object_get_ex(choice, "function", &fn) &&
                   json_object_object_get_ex(fn, "name", &name) && json_object_is_type(name, json_type_string)) {
            c = WGML_TOOL_CHOICE_NAMED;
            named = json_object_get_string(name);
        } else {
            return fail(t, "tool_choice", "'tool_choice' must be none, auto, required or {\"type\": \"function\", ...}");
        }
    }
    const char *text = json_object_to_json_string_ext(tools, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
    wgml_error err;
    if (wgml_tools_create(text, strlen(text), s->tool_format, c, named, parallel, &t->tools, &err))
        return fail(t, !strncmp(err.message, "tool_choice", 11) ? "tool_choice" : "tools", "%s", err.message);
    t->json = tools;
    t->choice = c;
    return 0;
}

void serve_tools_free(serve_tools *t) {
    wgml_tools_free(t->tools);
    t->tools = NULL;
}

char *serve_tools_extra_json(const serve_tools *t) {
    if (!t->json) return NULL;
    json_object *o = json_object_new_object();
    json_object_object_add(o, "tools", json_object_get(t->json));
    char *out = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
    json_object_put(o);
    return out;
}

json_object *serve_tools_calls(const wgml_tools *tools, const char *text, size_t len) {
    char *calls = NULL;
    if (!tools || !text || wgml_tools_parse(tools, text, len, (uint64_t)rand() << 16 ^ (uint64_t)rand(), &calls, NULL) || !calls)
        return NULL;
    json_object *o = json_tokener_parse(calls);
    free(calls);
    if (o && !json_object_is_type(o, json_type_array)) {
        json_object_put(o);
        o = NULL;
    }
    return o;
}
