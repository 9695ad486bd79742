/*
 * serve_tools.c - tool calls in /v1/chat/completions: the request's `tools`,
 * `tool_choice` and `parallel_tool_calls`; the grammar a call must follow
 * (each function's parameters through the JSON Schema converter); where an
 * `auto` call begins (the lazy grammar's trigger); and the calls parsed back
 * out of the reply.
 *
 * The format is the chat template's (serve_tool_format):
 *   hermes   <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>, one
 *            per call (Hermes 2/3, Qwen2.5, Qwen3 and templates like theirs)
 *   llama3   {"name": ..., "parameters": {...}} (Llama 3.1/3.2's JSON tool calls)
 *   mistral  [{"name": ..., "arguments": {...}}, ...] after the [TOOL_CALLS] token
 *   generic  {"tool_calls": [{"name": ..., "arguments": {...}}, ...]} for a
 *            template with no format of its own
 * With tool_choice `required` or a named function the reply is a call from
 * its first token; with `auto` it may be text, and the grammar starts where
 * the format's call begins (hermes: "<tool_call>" anywhere; the others: the
 * reply's first character). The tools are given to the template as `tools`,
 * as Hugging Face's apply_chat_template does.
 */
#include <json-c/json.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "serve.h"

int serve_tool_format(const char *tmpl) {
    if (!tmpl) return SERVE_TOOLS_GENERIC;
    if (strstr(tmpl, "<tool_call>")) return SERVE_TOOLS_HERMES;
    if (strstr(tmpl, "[TOOL_CALLS]")) return SERVE_TOOLS_MISTRAL;
    if (strstr(tmpl, "<|python_tag|>") || (strstr(tmpl, "ipython") && strstr(tmpl, "parameters")))
        return SERVE_TOOLS_LLAMA3;
    return SERVE_TOOLS_GENERIC;
}

const char *serve_tool_format_name(int f) {
    return f == SERVE_TOOLS_HERMES ? "hermes" : f == SERVE_TOOLS_LLAMA3 ? "llama3" : f == SERVE_TOOLS_MISTRAL ? "mistral" : "generic";
}

static int fail(serve_tools *t, const char *param, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(serve_tools *t, const char *param, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->err, sizeof t->err, fmt, ap);
    va_end(ap);
    t->bad_param = param;
    return -1;
}

/* a growing string, NULL after running out of memory */
typedef struct {
    char *p;
    size_t n, cap;
    int oom;
} tbuf;

static void put(tbuf *b, const char *s) {
    const size_t n = strlen(s);
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 1024;
        while (cap < b->n + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p, b->cap = cap;
    }
    memcpy(b->p + b->n, s, n + 1);
    b->n += n;
}

static int valid_name(const char *s) {
    size_t n = 0;
    for (; s[n]; n++)
        if (!((s[n] >= 'a' && s[n] <= 'z') || (s[n] >= 'A' && s[n] <= 'Z') || (s[n] >= '0' && s[n] <= '9') || s[n] == '_' ||
              s[n] == '-' || s[n] == '.'))
            return 0;
    return n >= 1 && n <= 64;
}

/* the grammar of the calls: each function's name, then its parameters' grammar */
static int build_grammar(serve_tools *t, int format) {
    const size_t n = json_object_array_length(t->tools);
    tbuf g = {0};
    put(&g, "call-json ::= \"{\" sp \"\\\"name\\\"\" sp \":\" sp (");
    int any = 0;
    tbuf rules = {0};
    for (size_t i = 0; i < n; i++) {
        json_object *fn, *name, *params = NULL;
        json_object_object_get_ex(json_object_array_get_idx(t->tools, i), "function", &fn);
        json_object_object_get_ex(fn, "name", &name);
        if (t->choice == SERVE_TOOL_NAMED && strcmp(json_object_get_string(name), t->named)) continue;
        json_object_object_get_ex(fn, "parameters", &params);
        char rule[32];
        snprintf(rule, sizeof rule, "args%zu", i);
        const char *schema = params ? json_object_to_json_string_ext(params, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE)
                                    : NULL;
        char *gbnf = NULL;
        wgml_error err;
        if (wgml_json_schema_to_gbnf(schema, schema ? strlen(schema) : 0, rule, &gbnf, &err)) {
            free(g.p), free(rules.p);
            return fail(t, "tools", "tools[%zu] (%s): parameters: %s", i, json_object_get_string(name), err.message);
        }
        put(&rules, gbnf);
        free(gbnf);
        char alt[256];
        snprintf(alt, sizeof alt, "%s\"\\\"%s\\\"\" sp \",\" sp \"\\\"%s\\\"\" sp \":\" sp %s", any ? " | " : "",
                 json_object_get_string(name), format == SERVE_TOOLS_LLAMA3 ? "parameters" : "arguments", rule);
        put(&g, alt);
        any = 1;
    }
    put(&g, ") sp \"}\"\nsp ::= \" \"?\n");
    const int many = t->parallel && t->choice != SERVE_TOOL_NAMED;
    switch (format) {
    case SERVE_TOOLS_HERMES:
        put(&g, "call ::= \"<tool_call>\" \"\\n\" call-json \"\\n\" \"</tool_call>\"\n");
        put(&g, many ? "root ::= call (\"\\n\" call)*\n" : "root ::= call\n");
        break;
    case SERVE_TOOLS_LLAMA3: put(&g, "root ::= call-json\n"); break;
    case SERVE_TOOLS_MISTRAL:
        put(&g, many ? "root ::= \"[\" sp call-json (sp \",\" sp call-json)* sp \"]\"\n" : "root ::= \"[\" sp call-json sp \"]\"\n");
        break;
    default:
        put(&g, many ? "root ::= \"{\" sp \"\\\"tool_calls\\\"\" sp \":\" sp \"[\" sp call-json (sp \",\" sp call-json)* sp \"]\" sp \"}\"\n"
                     : "root ::= \"{\" sp \"\\\"tool_calls\\\"\" sp \":\" sp \"[\" sp call-json sp \"]\" sp \"}\"\n");
    }
    put(&g, rules.p ? rules.p : "");
    free(rules.p);
    if (g.oom || rules.oom) {
        free(g.p);
        return fail(t, NULL, "out of memory");
    }
    wgml_error err;
    int rc = wgml_grammar_create(g.p, g.n, &t->grammar, &err) ? fail(t, "tools", "the tools' grammar: %s", err.message) : 0;
    free(g.p);
    return rc;
}

int serve_tools_parse(serve_server *s, json_object *req, serve_tools *t) {
    memset(t, 0, sizeof *t);
    t->parallel = 1;
    json_object *tools = NULL, *choice = NULL, *par = NULL;
    json_object_object_get_ex(req, "tools", &tools);
    json_object_object_get_ex(req, "tool_choice", &choice);
    json_object_object_get_ex(req, "parallel_tool_calls", &par);
    if (par) {
        if (!json_object_is_type(par, json_type_boolean))
            return fail(t, "parallel_tool_calls", "'parallel_tool_calls' must be a boolean");
        t->parallel = json_object_get_boolean(par);
    }
    if (!tools || json_object_is_type(tools, json_type_null)) {
        if (choice && !json_object_is_type(choice, json_type_null) &&
            !(json_object_is_type(choice, json_type_string) && !strcmp(json_object_get_string(choice), "none")))
            return fail(t, "tool_choice", "'tool_choice' needs 'tools'");
        return 0;
    }
    if (!json_object_is_type(tools, json_type_array)) return fail(t, "tools", "'tools' must be an array");
    const size_t n = json_object_array_length(tools);
    if (n == 0) return fail(t, "tools", "'tools' must not be empty");
    if (n > 128) return fail(t, "tools", "at most 128 tools");
    for (size_t i = 0; i < n; i++) {
        json_object *tool = json_object_array_get_idx(tools, i), *type, *fn, *name, *params;
        if (!json_object_is_type(tool, json_type_object) || !json_object_object_get_ex(tool, "type", &type) ||
            !json_object_is_type(type, json_type_string) || strcmp(json_object_get_string(type), "function"))
            return fail(t, "tools", "tools[%zu] must be {\"type\": \"function\", \"function\": {...}}", i);
        if (!json_object_object_get_ex(tool, "function", &fn) || !json_object_is_type(fn, json_type_object) ||
            !json_object_object_get_ex(fn, "name", &name) || !json_object_is_type(name, json_type_string) ||
            !valid_name(json_object_get_string(name)))
            return fail(t, "tools", "tools[%zu].function.name must be 1-64 letters, digits, '_', '-' or '.'", i);
        for (size_t k = 0; k < i; k++) {
            json_object *f2, *n2;
            json_object_object_get_ex(json_object_array_get_idx(tools, k), "function", &f2);
            json_object_object_get_ex(f2, "name", &n2);
            if (!strcmp(json_object_get_string(n2), json_object_get_string(name)))
                return fail(t, "tools", "tools[%zu]: the function '%s' is defined twice", i, json_object_get_string(name));
        }
        if (json_object_object_get_ex(fn, "parameters", &params) && !json_object_is_type(params, json_type_object))
            return fail(t, "tools", "tools[%zu].function.parameters must be a JSON Schema object", i);
    }
    t->tools = tools;
    t->choice = SERVE_TOOL_AUTO;
    if (choice && !json_object_is_type(choice, json_type_null)) {
        json_object *fn, *name;
        if (json_object_is_type(choice, json_type_string)) {
            const char *c = json_object_get_string(choice);
            if (!strcmp(c, "none")) t->choice = SERVE_TOOL_NONE;
            else if (!strcmp(c, "auto")) t->choice = SERVE_TOOL_AUTO;
            else if (!strcmp(c, "required")) t->choice = SERVE_TOOL_REQUIRED;
            else return fail(t, "tool_choice", "'tool_choice' must be none, auto, required or {\"type\": \"function\", ...}");
        } else if (json_object_is_type(choice, json_type_object) && json_object_object_get_ex(choice, "function", &fn) &&
                   json_object_object_get_ex(fn, "name", &name) && json_object_is_type(name, json_type_string)) {
            t->choice = SERVE_TOOL_NAMED;
            snprintf(t->named, sizeof t->named, "%s", json_object_get_string(name));
            int found = 0;
            for (size_t i = 0; i < n && !found; i++) {
                json_object *f2, *n2;
                json_object_object_get_ex(json_object_array_get_idx(tools, i), "function", &f2);
                json_object_object_get_ex(f2, "name", &n2);
                found = !strcmp(json_object_get_string(n2), t->named);
            }
            if (!found) return fail(t, "tool_choice", "tool_choice names '%s', which is not among the tools", t->named);
        } else {
            return fail(t, "tool_choice", "'tool_choice' must be none, auto, required or {\"type\": \"function\", ...}");
        }
    }
    t->format = s->tool_format;
    if (t->choice == SERVE_TOOL_NONE) return 0;
    if (build_grammar(t, t->format)) return -1;
    if (t->choice == SERVE_TOOL_AUTO) {
        t->trigger = t->format == SERVE_TOOLS_HERMES ? "<tool_call>" : t->format == SERVE_TOOLS_MISTRAL ? "[" : "{";
        t->trigger_at_start = t->format != SERVE_TOOLS_HERMES;
    }
    return 0;
}

void serve_tools_free(serve_tools *t) {
    wgml_grammar_free(t->grammar);
    t->grammar = NULL;
}

char *serve_tools_extra_json(const serve_tools *t) {
    if (!t->tools) return NULL;
    json_object *o = json_object_new_object();
    json_object_object_add(o, "tools", json_object_get(t->tools));
    char *out = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
    json_object_put(o);
    return out;
}

/* one call object {"name", "arguments"|"parameters"} into OpenAI's shape; NULL if it is not one */
static json_object *one_call(json_object *c, json_object *tools, int k) {
    json_object *name, *args = NULL;
    if (!json_object_is_type(c, json_type_object) || !json_object_object_get_ex(c, "name", &name) ||
        !json_object_is_type(name, json_type_string))
        return NULL;
    if (!json_object_object_get_ex(c, "arguments", &args)) json_object_object_get_ex(c, "parameters", &args);
    int known = 0;
    for (size_t i = 0; i < json_object_array_length(tools) && !known; i++) {
        json_object *fn, *n2;
        json_object_object_get_ex(json_object_array_get_idx(tools, i), "function", &fn);
        json_object_object_get_ex(fn, "name", &n2);
        known = !strcmp(json_object_get_string(n2), json_object_get_string(name));
    }
    if (!known) return NULL;
    json_object *call = json_object_new_object(), *f = json_object_new_object();
    char id[40];
    snprintf(id, sizeof id, "call_%08x%04d", (unsigned)rand(), k);
    json_object_object_add(call, "id", json_object_new_string(id));
    json_object_object_add(call, "type", json_object_new_string("function"));
    json_object_object_add(f, "name", json_object_get(name));
    const char *a = args ? json_object_to_json_string_ext(args, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE) : "{}";
    json_object_object_add(f, "arguments", json_object_new_string(a));
    json_object_object_add(call, "function", f);
    return call;
}

/* JSON text (len bytes, not NUL-terminated) */
static json_object *parse_json(const char *text, size_t len) {
    json_tokener *tk = json_tokener_new();
    if (!tk) return NULL;
    json_object *o = json_tokener_parse_ex(tk, text, (int)len);
    const int ok = o && json_tokener_get_error(tk) == json_tokener_success && (size_t)json_tokener_get_parse_end(tk) == len;
    json_tokener_free(tk);
    if (!ok) {
        json_object_put(o);
        return NULL;
    }
    return o;
}

static void trim(const char **s, size_t *n) {
    while (*n && (**s == ' ' || **s == '\n' || **s == '\t' || **s == '\r')) (*s)++, (*n)--;
    while (*n && ((*s)[*n - 1] == ' ' || (*s)[*n - 1] == '\n' || (*s)[*n - 1] == '\t' || (*s)[*n - 1] == '\r')) (*n)--;
}

json_object *serve_tools_calls(const serve_tools *t, const char *text, size_t len) {
    if (!t->tools || !text) return NULL;
    json_object *calls = json_object_new_array();
    trim(&text, &len);
    int ok = 1;
    if (t->format == SERVE_TOOLS_HERMES) {
        static const char open[] = "<tool_call>", close[] = "</tool_call>";
        while (ok && len) {
            if (len < sizeof open - 1 || memcmp(text, open, sizeof open - 1)) {
                ok = 0;
                break;
            }
            const char *body = text + sizeof open - 1, *end = NULL;
            for (const char *p = body; p + sizeof close - 1 <= text + len && !end; p++)
                if (!memcmp(p, close, sizeof close - 1)) end = p;
            if (!end) {
                ok = 0;
                break;
            }
            json_object *o = parse_json(body, (size_t)(end - body));
            json_object *c = o ? one_call(o, t->tools, (int)json_object_array_length(calls)) : NULL;
            json_object_put(o);
            if (!c) ok = 0;
            else json_object_array_add(calls, c);
            len -= (size_t)(end + sizeof close - 1 - text);
            text = end + sizeof close - 1;
            trim(&text, &len);
        }
    } else {
        static const char tag[] = "<|python_tag|>", tc[] = "[TOOL_CALLS]";
        if (len >= sizeof tag - 1 && !memcmp(text, tag, sizeof tag - 1)) text += sizeof tag - 1, len -= sizeof tag - 1;
        if (len >= sizeof tc - 1 && !memcmp(text, tc, sizeof tc - 1)) text += sizeof tc - 1, len -= sizeof tc - 1;
        json_object *o = parse_json(text, len), *list = o;
        if (o && t->format == SERVE_TOOLS_GENERIC && json_object_is_type(o, json_type_object))
            json_object_object_get_ex(o, "tool_calls", &list);
        if (list && json_object_is_type(list, json_type_array)) {
            for (size_t i = 0; i < json_object_array_length(list) && ok; i++) {
                json_object *c = one_call(json_object_array_get_idx(list, i), t->tools, (int)i);
                if (!c) ok = 0;
                else json_object_array_add(calls, c);
            }
        } else if (list && t->format == SERVE_TOOLS_LLAMA3) {
            json_object *c = one_call(list, t->tools, 0);
            if (!c) ok = 0;
            else json_object_array_add(calls, c);
        } else {
            ok = 0;
        }
        json_object_put(o);
    }
    if (!ok || json_object_array_length(calls) == 0) {
        json_object_put(calls);
        return NULL;
    }
    return calls;
}
