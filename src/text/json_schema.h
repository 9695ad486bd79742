/*
 * json_schema.h - a JSON Schema as a GBNF grammar (text/grammar.h) for the
 * documents it allows: what structured output (OpenAI's response_format
 * json_schema, function parameters of tool calls) constrains decoding with.
 *
 * The grammar may allow fewer documents than the schema, never more: every
 * text it accepts is valid under the schema. Where the two differ on purpose
 * (docs/grammar.md has the list): properties come in the schema's order, each
 * required one always, each optional one or not; no properties beyond those
 * listed (additionalProperties is false unless an object lists none, as in
 * OpenAI's strict mode); numbers have at most 15 digits before the point and
 * 15 after, no exponent; whitespace between tokens is bounded; a pattern is
 * matched whole (as if anchored); a date's day is 01-28. A keyword the
 * converter does not implement is an error naming it and where it is, never
 * ignored; annotations (title, description, default, examples, $schema, $id,
 * $comment, deprecated, readOnly, writeOnly) are.
 */
#ifndef WGML_TEXT_JSON_SCHEMA_H
#define WGML_TEXT_JSON_SCHEMA_H

#include <stddef.h>

#include "wgml.h"

#define JSON_SCHEMA_MAX_RULES 4096 /* rules one schema may make */

/* schema: JSON text (len bytes), or NULL for "any JSON object". *gbnf is
 * malloc'ed (wgml_free), NUL-terminated, *len its length. */
wgml_status json_schema_to_gbnf(const char *schema, size_t len, char **gbnf, size_t *gbnf_len, wgml_error *err);
/* The same with the start rule called `name` (1-40 letters, digits, '-'; NULL: root) and every
 * other rule's name beginning with it, so that several schemas' rules share one grammar. */
wgml_status json_schema_to_gbnf_named(const char *schema, size_t len, const char *name, char **gbnf, size_t *gbnf_len,
                                      wgml_error *err);

#endif
