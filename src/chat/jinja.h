/*
 * jinja.h - a sandboxed Jinja2 interpreter for chat templates (the module's
 * interface; its internals are in jinja_impl.h).
 *
 * One render is one jinja_env: an arena that holds every value, the parsed
 * template and the variables, under a memory budget, plus a step budget, an
 * output cap and a depth limit. Nothing in a template can read or write a
 * file, reach the clock beyond strftime_now or run longer than its budget;
 * every failure (syntax, a runtime error, a limit, raise_exception) is a
 * wgml_status with a message that names the template line and column.
 *
 * The dialect is Hugging Face's apply_chat_template environment: Jinja 3.1
 * with trim_blocks and lstrip_blocks on, the loop controls (break, continue),
 * a tojson that writes UTF-8 as is and keeps key order, and the globals
 * raise_exception(msg) and strftime_now(fmt). docs/chat.md lists the rest.
 *
 *   jinja_env *e;
 *   jinja_env_create(NULL, &e, err);
 *   jinja_env_set_json(e, "messages", json, len, err);
 *   jinja_env_set_bool(e, "add_generation_prompt", 1, err);
 *   jinja_render(e, tmpl, strlen(tmpl), &out, &out_len, err);  // out: malloc'ed
 *   jinja_env_free(e);
 */
#ifndef WGML_CHAT_JINJA_H
#define WGML_CHAT_JINJA_H

#include "wgml.h"

#include <stddef.h>
#include <stdint.h>

typedef struct jinja_limits {
    uint64_t max_steps; /* evaluation steps (nodes, loop turns, work on long strings) */
    size_t max_memory;  /* bytes the arena may hold: values, the parsed template, variables */
    size_t max_output;  /* bytes of rendered text (also of any one string built) */
    int max_depth;      /* nesting of evaluation (expressions, blocks, macro calls), and of values: lists and
                           dicts inside lists and dicts, as JSON input and as the walks over them (==, <,
                           sort, printing, tojson) go; a value that contains itself goes no deeper */
} jinja_limits;

/* The defaults: 50 M steps, 256 MiB, 64 MiB of output, depth 400. */
jinja_limits jinja_default_limits(void);

typedef struct jinja_env jinja_env;

/* limits NULL: jinja_default_limits(). */
wgml_status jinja_env_create(const jinja_limits *limits, jinja_env **out, wgml_error *err);
void jinja_env_free(jinja_env *e);

/* Variables of the render (a later one of the same name replaces an earlier one). */
wgml_status jinja_env_set_str(jinja_env *e, const char *name, const char *value, wgml_error *err);
wgml_status jinja_env_set_bool(jinja_env *e, const char *name, int value, wgml_error *err);
/* A variable from JSON text (any JSON value). */
wgml_status jinja_env_set_json(jinja_env *e, const char *name, const char *json, size_t len, wgml_error *err);
/* Each key of a JSON object becomes a variable. */
wgml_status jinja_env_set_json_object(jinja_env *e, const char *json, size_t len, wgml_error *err);
/* Fixes the clock strftime_now reads (fields as in struct tm: year e.g. 2026,
 * month 1-12); without it, the real local time. */
void jinja_env_set_clock(jinja_env *e, int year, int month, int day, int hour, int minute, int second);

/* Renders the template (len bytes, need not be NUL-terminated) with the
 * variables set so far. *out is malloc'ed and NUL-terminated (caller frees);
 * out_len may be NULL. A render uses the env up: create a fresh one for the
 * next. A template's raise_exception(msg) gives WGML_ERR_TEMPLATE with msg as
 * the message; other errors give WGML_ERR_TEMPLATE with "line L, column C:
 * ..." (or WGML_ERR_OUT_OF_MEMORY when the host has no memory). */
wgml_status jinja_render(jinja_env *e, const char *tmpl, size_t len, char **out, size_t *out_len, wgml_error *err);

/* 1 when err came from the template's raise_exception (after jinja_render). */
int jinja_env_raised(const jinja_env *e);

#endif
