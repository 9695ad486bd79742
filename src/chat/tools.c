/*
 * tools.c - tool calls (include/wgml.h, *tool calls*): the format a chat
 * template's model writes calls in, the grammar a call must follow (each
 * function's parameters through the JSON Schema converter, text/json_schema.h)
 * and the calls parsed back out of a reply, as OpenAI's tool_calls.
 *
 * Formats (chosen from the template's text):
 *   hermes   <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>, one per call
 *            (Hermes 2/3, Qwen2.5, Qwen3 and templates like theirs)
 *   llama3   {"name": ..., "parameters": {...}} (Llama 3.1/3.2's JSON tool calls)
 *   mistral  [{"name": ..., "arguments": {...}}, ...] after the [TOOL_CALLS] token
 *   generic  {"tool_calls": [{"name": ..., "arguments": {...}}, ...]} for a template
 *            with no format of its own
 * JSON is read with the chat module's reader (jinja_json_read.c): the
 * browser build has no json-c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/jinja.h"
#include "chat/jinja_impl.h"
#include "core/alloc.h"
#include "core/error.h"
#include "text/json_schema.h"
#include "wgml.h"

#define MAX_TOOLS 128

struct wgml_tools {
    wgml_tool_format format;
    wgml_tool_choice choice;
    int parallel;
    int n;
    char (*names)[72];
    wgml_grammar *grammar;
};

wgml_tool_format wgml_tool_format_of(const char *tmpl) {
    if (!tmpl) return WGML_TOOLS_GENERIC;
    if (strstr(tmpl, "<tool_call>")) return WGML_TOOLS_HERMES;
    if (strstr(tmpl, "[TOOL_CALLS]")) return WGML_TOOLS_MISTRAL;
    if (strstr(tmpl, "<|python_tag|>") || (strstr(tmpl, "ipython") && strstr(tmpl, "parameters"))) return WGML_TOOLS_LLAMA3;
    return WGML_TOOLS_GENERIC;
}

const char *wgml_tool_format_name(wgml_tool_format f) {
    switch (f) {
    case WGML_TOOLS_HERMES: return "hermes";
    case WGML_TOOLS_LLAMA3: return "llama3";
    case WGML_TOOLS_MISTRAL: return "mistral";
    default: return "generic";
    }
}

/* a growing string */
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
        char *p = wgml_realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p, b->cap = cap;
    }
    memcpy(b->p + b->n, s, n + 1);
    b->n += n;
}

static int valid_name(const char *s, size_t n) {
    if (n < 1 || n > 64) return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_' ||
              s[i] == '-' || s[i] == '.'))
            return 0;
    return 1;
}

static jv *get(jinja_env *e, jv obj, const char *key) {
    jv *out = NULL;
    if (obj.t == JV_DICT) jx_dict_gets(e, obj.u.d, key, strlen(key), &out);
    return out;
}

static wgml_status env_error(jinja_env *e, wgml_error *err) {
    const char *m = e->msg;
    if (!strncmp(m, "chat template: ", 15)) m += 15;
    return wgml_fail(err, e->status == WGML_ERR_OUT_OF_MEMORY ? WGML_ERR_OUT_OF_MEMORY : WGML_ERR_INVALID_ARGUMENT, "%s", m);
}

static jinja_env *new_env(wgml_error *err) {
    jinja_limits lim = jinja_default_limits();
    lim.max_memory = (size_t)64 << 20;
    lim.max_depth = 128;
    jinja_env *e = NULL;
    if (jinja_env_create(&lim, &e, err)) return NULL;
    return e;
}

wgml_status wgml_tools_create(const char *tools_json, size_t len, wgml_tool_format format, wgml_tool_choice choice,
                              const char *name, int parallel, wgml_tools **out, wgml_error *err) {
    if (!out) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "wgml_tools_create: out is NULL");
    *out = NULL;
    if (!tools_json) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "tools: missing");
    jinja_env *e = new_env(err);
    if (!e) return err ? err->code : WGML_ERR_OUT_OF_MEMORY;
    wgml_tools *t = wgml_calloc(1, sizeof *t);
    wgml_status st = t ? WGML_OK : wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory");
    jv list;
    if (!st && jx_json_parse(e, tools_json, len, "tools", &list)) st = env_error(e, err);
    if (!st && (list.t != JV_LIST || !list.u.l->n))
        st = wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "tools: must be a non-empty array");
    if (!st && list.u.l->n > MAX_TOOLS) st = wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "tools: at most %d", MAX_TOOLS);
    if (!st) {
        t->format = format, t->choice = choice, t->parallel = parallel && choice != WGML_TOOL_CHOICE_NAMED;
        t->n = (int)list.u.l->n;
        if (!(t->names = wgml_calloc((size_t)t->n, sizeof *t->names)))
            st = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory");
    }
    jv **params = st ? NULL : wgml_calloc((size_t)t->n, sizeof *params);
    if (!st && !params) st = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory");
    for (int i = 0; !st && i < t->n; i++) {
        jv tool = list.u.l->v[i], *type = get(e, tool, "type"), *fn = get(e, tool, "function");
        jv *nm = fn ? get(e, *fn, "name") : NULL;
        if (!type || type->t != JV_STR || strcmp(type->u.s->s, "function") || !fn || fn->t != JV_DICT)
            st = wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "tools[%d] must be {\"type\": \"function\", \"function\": {...}}", i);
        else if (!nm || nm->t != JV_STR || !valid_name(nm->u.s->s, nm->u.s->len))
            st = wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "tools[%d].function.name must be 1-64 letters, digits, '_', '-' or '.'", i);
        if (st) break;
        memcpy(t->names[i], nm->u.s->s, nm->u.s->len + 1);
        for (int k = 0; k < i && !st; k++)
            if (!strcmp(t->names[k], t->names[i]))
                st = wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "tools[%d]: the function '%s' is defined twice", i, t->names[i]);
        params[i] = get(e, *fn, "parameters");
        if (!st && params[i] && params[i]->t != JV_DICT)
            st = wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "tools[%d].function.parameters must be a JSON Schema object", i);
    }
    int named_at = -1;
    if (!st && choice == WGML_TOOL_CHOICE_NAMED) {
        for (int i = 0; i < t->n && named_at < 0; i++)
            if (name && !strcmp(t->names[i], name)) named_at = i;
        if (named_at < 0)
            st = wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "tool_choice names '%.64s', which is not among the tools",
                           name ? name : "");
    }
    if (!st && choice != WGML_TOOL_CHOICE_NONE) { /* the calls' grammar */
        tbuf g = {0}, rules = {0};
        put(&g, "call-json ::= \"{\" sp \"\\\"name\\\"\" sp \":\" sp (");
        int any = 0;
        for (int i = 0; i < t->n && !st; i++) {
            if (named_at >= 0 && i != named_at) continue;
            char rule[24];
            snprintf(rule, sizeof rule, "args%d", i);
            jx_buf schema = {0};
            if (params[i] && jx_write_json(e, &schema, *params[i], NULL, ",", ":", 0, 0, 0)) {
                st = env_error(e, err);
                break;
            }
            char *gbnf = NULL;
            size_t n;
            wgml_error e2;
            if (json_schema_to_gbnf_named(params[i] ? schema.p : NULL, params[i] ? schema.len : 0, rule, &gbnf, &n, &e2)) {
                st = wgml_fail(err, e2.code, "tools[%d] (%s): parameters: %s", i, t->names[i], e2.message);
                break;
            }
            put(&rules, gbnf);
            wgml_free(gbnf);
            char alt[256];
            snprintf(alt, sizeof alt, "%s\"\\\"%s\\\"\" sp \",\" sp \"\\\"%s\\\"\" sp \":\" sp %s", any ? " | " : "", t->names[i],
                     format == WGML_TOOLS_LLAMA3 ? "parameters" : "arguments", rule);
            put(&g, alt);
            any = 1;
        }
        put(&g, ") sp \"}\"\nsp ::= \" \"?\n");
        const int many = t->parallel;
        switch (format) {
        case WGML_TOOLS_HERMES:
            put(&g, "call ::= \"<tool_call>\" \"\\n\" call-json \"\\n\" \"</tool_call>\"\n");
            put(&g, many ? "root ::= call (\"\\n\" call)*\n" : "root ::= call\n");
            break;
        case WGML_TOOLS_LLAMA3: put(&g, "root ::= call-json\n"); break;
        case WGML_TOOLS_MISTRAL:
            put(&g, many ? "root ::= \"[\" sp call-json (sp \",\" sp call-json)* sp \"]\"\n" : "root ::= \"[\" sp call-json sp \"]\"\n");
            break;
        default:
            put(&g, many ? "root ::= \"{\" sp \"\\\"tool_calls\\\"\" sp \":\" sp \"[\" sp call-json (sp \",\" sp call-json)* sp \"]\" sp \"}\"\n"
                         : "root ::= \"{\" sp \"\\\"tool_calls\\\"\" sp \":\" sp \"[\" sp call-json sp \"]\" sp \"}\"\n");
        }
        put(&g, rules.p ? rules.p : "");
        if (!st && (g.oom || rules.oom)) st = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory");
        if (!st) {
            wgml_error e2;
            if (wgml_grammar_create(g.p, g.n, &t->grammar, &e2))
                st = wgml_fail(err, e2.code, "tools: the calls' grammar: %s", e2.message);
        }
        wgml_free(g.p), wgml_free(rules.p);
    }
    wgml_free(params);
    jinja_env_free(e);
    if (st) {
        wgml_tools_free(t);
        return st;
    }
    *out = t;
    return WGML_OK;
}

void wgml_tools_free(wgml_tools *t) {
    if (!t) return;
    wgml_grammar_free(t->grammar);
    wgml_free(t->names);
    wgml_free(t);
}

const wgml_grammar *wgml_tools_grammar(const wgml_tools *t) { return t ? t->grammar : NULL; }

const char *wgml_tools_trigger(const wgml_tools *t, int *at_start) {
    if (at_start) *at_start = 0;
    if (!t || t->choice != WGML_TOOL_CHOICE_AUTO) return NULL;
    if (at_start) *at_start = t->format != WGML_TOOLS_HERMES;
    return t->format == WGML_TOOLS_HERMES ? "<tool_call>" : t->format == WGML_TOOLS_MISTRAL ? "[" : "{";
}

/* ---- the calls in a reply ---- */

static void trim(const char **s, size_t *n) {
    while (*n && strchr(" \t\r\n", **s)) (*s)++, (*n)--;
    while (*n && strchr(" \t\r\n", (*s)[*n - 1])) (*n)--;
}

/* appends one call {"name", "arguments"|"parameters"} as OpenAI's {id, type, function}; -1 if it is not one */
static int one_call(jinja_env *e, const wgml_tools *t, jv c, jlist *calls, uint64_t id_seed) {
    jv *nm = get(e, c, "name"), *args = get(e, c, "arguments");
    if (!args) args = get(e, c, "parameters");
    if (c.t != JV_DICT || !nm || nm->t != JV_STR) return -1;
    int known = 0;
    for (int i = 0; i < t->n && !known; i++) known = !strcmp(t->names[i], nm->u.s->s);
    if (!known || (args && args->t != JV_DICT)) return -1;
    jx_buf a = {0};
    if (args && jx_write_json(e, &a, *args, NULL, ",", ":", 0, 0, 0)) return -1;
    jdict *fn = jx_dict(e, 2), *call = jx_dict(e, 3);
    char id[48];
    snprintf(id, sizeof id, "call_%08llx%04zu", (unsigned long long)(id_seed & 0xFFFFFFFFu), calls->n);
    jstr *ids = jx_cstr(e, id), *fns = jx_cstr(e, "function"), *as = args ? jx_str(e, a.p, a.len) : jx_cstr(e, "{}");
    if (!fn || !call || !ids || !fns || !as || jx_dict_sets(e, fn, "name", *nm) || jx_dict_sets(e, fn, "arguments", jv_strv(as)) ||
        jx_dict_sets(e, call, "id", jv_strv(ids)) || jx_dict_sets(e, call, "type", jv_strv(fns)) ||
        jx_dict_sets(e, call, "function", jv_dictv(fn)) || jx_list_push(e, calls, jv_dictv(call)))
        return -1;
    return 0;
}

wgml_status wgml_tools_parse(const wgml_tools *t, const char *text, size_t len, uint64_t id_seed, char **calls_json,
                             wgml_error *err) {
    if (!calls_json) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "wgml_tools_parse: calls_json is NULL");
    *calls_json = NULL;
    if (!t || !text) return WGML_OK;
    jinja_env *e = new_env(err);
    if (!e) return err ? err->code : WGML_ERR_OUT_OF_MEMORY;
    jlist *calls = jx_list(e, 4);
    int ok = calls != NULL;
    trim(&text, &len);
    if (t->format == WGML_TOOLS_HERMES) {
        static const char open[] = "<tool_call>", close[] = "</tool_call>";
        while (ok && len) {
            if (len < sizeof open - 1 || memcmp(text, open, sizeof open - 1)) {
                ok = 0;
                break;
            }
            const char *body = text + sizeof open - 1, *end = NULL;
            for (const char *p = body; p + sizeof close - 1 <= text + len && !end; p++)
                if (!memcmp(p, close, sizeof close - 1)) end = p;
            jv o;
            if (!end || jx_json_parse(e, body, (size_t)(end - body), "a tool call", &o) || one_call(e, t, o, calls, id_seed)) {
                ok = 0;
                break;
            }
            len -= (size_t)(end + sizeof close - 1 - text);
            text = end + sizeof close - 1;
            trim(&text, &len);
        }
    } else if (ok) {
        static const char tag[] = "<|python_tag|>", tc[] = "[TOOL_CALLS]";
        if (len >= sizeof tag - 1 && !memcmp(text, tag, sizeof tag - 1)) text += sizeof tag - 1, len -= sizeof tag - 1;
        if (len >= sizeof tc - 1 && !memcmp(text, tc, sizeof tc - 1)) text += sizeof tc - 1, len -= sizeof tc - 1;
        jv o, *list = NULL;
        if (jx_json_parse(e, text, len, "tool calls", &o)) {
            ok = 0;
        } else {
            list = &o;
            if (t->format == WGML_TOOLS_GENERIC && o.t == JV_DICT) list = get(e, o, "tool_calls");
            if (list && list->t == JV_LIST) {
                for (size_t i = 0; i < list->u.l->n && ok; i++) ok = !one_call(e, t, list->u.l->v[i], calls, id_seed);
            } else if (list && t->format == WGML_TOOLS_LLAMA3) {
                ok = !one_call(e, t, *list, calls, id_seed);
            } else {
                ok = 0;
            }
        }
    }
    wgml_status st = WGML_OK;
    if (ok && calls->n) {
        jx_buf b = {0};
        if (jx_write_json(e, &b, jv_listv(calls), NULL, ",", ":", 0, 0, 0)) {
            st = env_error(e, err);
        } else if (!(*calls_json = malloc(b.len + 1))) {
            st = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory");
        } else {
            memcpy(*calls_json, b.p, b.len);
            (*calls_json)[b.len] = 0;
        }
    }
    jinja_env_free(e);
    return st;
}
