/*
 * fuzz_chat_template.c - libFuzzer target: a chat template and its messages,
 * as a downloaded GGUF and a client would hand them to wgml.
 *
 * Input: the template's text, then (after the first NUL byte, if any) the
 * messages as JSON text; without a NUL, or when that JSON is not an array,
 * a fixed two-turn conversation is used. The template runs through the
 * interpreter (src/chat/jinja.h) with small budgets, so that endless loops
 * and blow-ups end in milliseconds, and through wgml_chat_render when its
 * input is short. Every failure must be a clean status with a message; a
 * success's text must be within the output cap and NUL-terminated.
 *
 * Values mode: an input whose first byte is 0x01 runs the rest after a
 * prelude that builds hostile values - lists and dicts that contain
 * themselves, a namespace that holds itself, lists nested past the depth
 * limit, a dict big enough to be hashed with keys 1, 1.0 and True - so that
 * every mutation compares, sorts, hashes, prints and serializes them (the
 * walks over values must end in a result or a clean error).
 */
#include "chat/jinja.h"
#include "wgml.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(c)                                                                                                       \
    do {                                                                                                               \
        if (!(c)) {                                                                                                    \
            fprintf(stderr, "fuzz_chat_template: check failed: %s (line %d)\n", #c, __LINE__);                         \
            abort();                                                                                                   \
        }                                                                                                              \
    } while (0)

static const char k_default_messages[] =
    "[{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": \"Hi \\u00e9\"}, "
    "{\"role\": \"assistant\", \"content\": \"Hello!\", \"tool_calls\": [{\"type\": \"function\", \"function\": "
    "{\"name\": \"f\", \"arguments\": {\"a\": 1}}}]}, {\"role\": \"user\", \"content\": \"Bye\"}]";

static const char k_values_prelude[] =
    "{% set l = [1, 'a', none] %}{% set _ = l.append(l) %}{% set d = {'k': l, 1: 2.0, (1, 'x'): [l]} %}"
    "{% set _ = l.append(d) %}{% set m = [] %}{% set _ = m.append(m) %}{% set t = (1,) %}{% set _ = t.append(t) %}"
    "{% set ns = namespace(l=[], m=[], d={}, s=l) %}{% set ns.self = ns %}"
    "{% for i in range(250) %}{% set ns.l = [ns.l, i] %}{% set ns.m = [ns.m] %}{% set ns.d = {'k': ns.d} %}"
    "{% endfor %}{% set big = {1: 'one', 2.0: 'two', true: 'T', 'k': l, none: d, 3: m, 4: 4, 5: 5, 6: 6, 7: 7} %}";

static void check_status(wgml_status st, const wgml_error *err) {
    CHECK(st == WGML_ERR_TEMPLATE || st == WGML_ERR_INVALID_ARGUMENT || st == WGML_ERR_OUT_OF_MEMORY);
    CHECK(err->code == st);
    CHECK(err->message[0] != '\0');
    CHECK(memchr(err->message, '\0', sizeof err->message) != NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *with_prelude = NULL;
    if (size && data[0] == 1) { /* values mode */
        size_t np = sizeof k_values_prelude - 1;
        with_prelude = malloc(np + size - 1);
        CHECK(with_prelude);
        memcpy(with_prelude, k_values_prelude, np);
        memcpy(with_prelude + np, data + 1, size - 1);
        data = (const uint8_t *)with_prelude;
        size = np + size - 1;
    }
    const char *tmpl = (const char *)data;
    const uint8_t *nul = memchr(data, 0, size);
    size_t tmpl_len = nul ? (size_t)(nul - data) : size;
    const char *json = nul ? (const char *)nul + 1 : k_default_messages;
    size_t json_len = nul ? size - tmpl_len - 1 : strlen(k_default_messages);

    jinja_limits lim = jinja_default_limits();
    lim.max_steps = 200000;
    lim.max_memory = 32u << 20;
    lim.max_output = 1u << 20;
    lim.max_depth = 200;
    jinja_env *e;
    wgml_error err;
    CHECK(jinja_env_create(&lim, &e, &err) == WGML_OK);
    jinja_env_set_clock(e, 2026, 11, 24, 9, 30, 0);
    wgml_status st = jinja_env_set_json(e, "messages", json, json_len, &err);
    if (st) {
        check_status(st, &err);
        jinja_env_free(e);
        CHECK(jinja_env_create(&lim, &e, &err) == WGML_OK);
        CHECK(jinja_env_set_json(e, "messages", k_default_messages, strlen(k_default_messages), &err) == WGML_OK);
    }
    CHECK(jinja_env_set_bool(e, "add_generation_prompt", 1, &err) == WGML_OK);
    CHECK(jinja_env_set_str(e, "bos_token", "<s>", &err) == WGML_OK);
    CHECK(jinja_env_set_str(e, "eos_token", "</s>", &err) == WGML_OK);
    static const char tools[] = "{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"g\"}}]}";
    CHECK(jinja_env_set_json_object(e, tools, strlen(tools), &err) == WGML_OK);
    char *out = NULL;
    size_t out_len = 0;
    st = jinja_render(e, tmpl, tmpl_len, &out, &out_len, &err);
    if (st == WGML_OK) {
        CHECK(out != NULL);
        CHECK(out_len <= lim.max_output);
        CHECK(out[out_len] == '\0');
    } else {
        CHECK(out == NULL);
        check_status(st, &err);
        if (jinja_env_raised(e)) CHECK(st == WGML_ERR_TEMPLATE);
    }
    free(out);
    jinja_env_free(e);

    /* the public entry (default budgets) for short, loop-free inputs: its own checks of the arguments */
    if (size < 256 && !memmem(data, size, "for", 3) && !memmem(data, size, "macro", 5) &&
        !memmem(data, size, "range", 5) && !memchr(data, '*', size)) {
        char *t = malloc(tmpl_len + 1), *j = malloc(json_len + 1);
        CHECK(t && j);
        memcpy(t, tmpl, tmpl_len);
        t[tmpl_len] = '\0';
        memcpy(j, json, json_len);
        j[json_len] = '\0';
        wgml_chat_params p = wgml_chat_default_params();
        p.now = "2026-11-24 09:30:00";
        st = wgml_chat_render(t, j, &p, &out, &err);
        if (st == WGML_OK)
            free(out);
        else
            check_status(st, &err);
        free(t);
        free(j);
    }
    free(with_prelude);
    return 0;
}
