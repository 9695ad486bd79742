/*
 * jinja.c - the interpreter's entry points (jinja.h): an env per render, its
 * variables, and jinja_render, which parses the template, runs it in the
 * top-level scope and hands the text out of the arena as a malloc'ed copy.
 */
#include "chat/jinja_impl.h"
#include "core/alloc.h"

#include <stdlib.h>
#include <string.h>

jinja_limits jinja_default_limits(void) {
    jinja_limits l = {50u * 1000 * 1000, (size_t)256 << 20, (size_t)64 << 20, 400};
    return l;
}

wgml_status jinja_env_create(const jinja_limits *limits, jinja_env **out, wgml_error *err) {
    if (!out) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "jinja_env_create: out is NULL");
    *out = NULL;
    jinja_env *e = wgml_calloc(1, sizeof *e);
    if (!e) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory creating a template renderer");
    e->lim = limits ? *limits : jinja_default_limits();
    if (e->lim.max_depth < 8) e->lim.max_depth = 8;
    if (e->lim.max_memory < (1u << 20)) e->lim.max_memory = 1u << 20;
    if (!(e->vars = jx_dict(e, 8))) {
        wgml_status st = wgml_fail(err, e->status, "%s", e->msg);
        jinja_env_free(e);
        return st;
    }
    *out = e;
    return WGML_OK;
}

void jinja_env_free(jinja_env *e) {
    if (!e) return;
    for (jx_chunk *c = e->chunks, *next; c; c = next) {
        next = c->next;
        wgml_free(c);
    }
    wgml_free(e);
}

static wgml_status report(jinja_env *e, wgml_error *err) {
    return wgml_fail(err, e->status ? e->status : WGML_ERR_TEMPLATE, "%s", e->msg);
}

static wgml_status set_var(jinja_env *e, const char *name, jv v, wgml_error *err) {
    if (e->status || jx_dict_sets(e, e->vars, name, v)) return report(e, err);
    return WGML_OK;
}

wgml_status jinja_env_set_str(jinja_env *e, const char *name, const char *value, wgml_error *err) {
    jstr *s = jx_cstr(e, value ? value : "");
    return s ? set_var(e, name, jv_strv(s), err) : report(e, err);
}

wgml_status jinja_env_set_bool(jinja_env *e, const char *name, int value, wgml_error *err) {
    return set_var(e, name, jv_bool(value), err);
}

/* JSON errors are the caller's input, not the template's */
static wgml_status json_error(jinja_env *e, wgml_error *err) {
    wgml_status st = e->status == WGML_ERR_TEMPLATE ? WGML_ERR_INVALID_ARGUMENT : e->status;
    const char *m = e->msg;
    if (!strncmp(m, "chat template: ", 15)) m += 15;
    return wgml_fail(err, st, "%s", m);
}

wgml_status jinja_env_set_json(jinja_env *e, const char *name, const char *json, size_t len, wgml_error *err) {
    jv v;
    if (e->status) return report(e, err);
    if (jx_json_parse(e, json, len, name, &v)) return json_error(e, err);
    return set_var(e, name, v, err);
}

wgml_status jinja_env_set_json_object(jinja_env *e, const char *json, size_t len, wgml_error *err) {
    jv v;
    if (e->status) return report(e, err);
    if (jx_json_parse(e, json, len, "extra variables", &v)) return json_error(e, err);
    if (v.t != JV_DICT)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "extra variables: expected a JSON object, got %s",
                         jx_type_name(v));
    for (size_t i = 0; i < v.u.d->n; i++)
        if (jx_dict_set(e, e->vars, v.u.d->k[i], v.u.d->v[i])) return report(e, err);
    return WGML_OK;
}

void jinja_env_set_clock(jinja_env *e, int year, int month, int day, int hour, int minute, int second) {
    e->have_clock = 1;
    e->clock[0] = year, e->clock[1] = month, e->clock[2] = day;
    e->clock[3] = hour, e->clock[4] = minute, e->clock[5] = second;
}

int jinja_env_raised(const jinja_env *e) { return e && e->raised; }

wgml_status jinja_render(jinja_env *e, const char *tmpl, size_t len, char **out, size_t *out_len, wgml_error *err) {
    if (!out) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "jinja_render: out is NULL");
    *out = NULL;
    if (out_len) *out_len = 0;
    if (!tmpl) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "jinja_render: no template");
    if (e->used) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "jinja_render: an env renders once");
    e->used = 1;
    if (e->status) return report(e, err);
    jnodes body;
    jx_buf b = {0};
    jscope *top = jx_alloc(e, sizeof *top);
    if (!top) return report(e, err);
    top->parent = NULL;
    top->vars = e->vars;
    e->depth = 0;
    if (jx_parse(e, tmpl, len, &body)) return report(e, err);
    e->depth = 0;
    e->line = e->col = 0;
    /* an error recorded is the answer, even one a caller took for "not found" and went on from */
    if (jx_exec(e, &body, top, &b) || e->status) return report(e, err);
    char *r = malloc(b.len + 1);
    if (!r) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory for a rendered prompt of %zu bytes", b.len);
    if (b.len) memcpy(r, b.p, b.len);
    r[b.len] = '\0';
    *out = r;
    if (out_len) *out_len = b.len;
    return WGML_OK;
}
