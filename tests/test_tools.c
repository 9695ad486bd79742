/*
 * test_tools.c - tool calls (src/chat/tools.c, include/wgml.h): the format of
 * real chat templates (../shared/chat/templates), the checks of a request's
 * tools, the calls' grammar (what it accepts per format and choice), and the
 * calls parsed back as OpenAI's tool_calls. tests/test_structured.py drives
 * them through `wgml serve` with the official client.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "testutil.h"
#include "wgml.h"

static const char *TOOLS =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":{\"type\":\"object\",\"properties\":"
    "{\"city\":{\"type\":\"string\"},\"unit\":{\"enum\":[\"c\",\"f\"]}},\"required\":[\"city\",\"unit\"]}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"add\",\"parameters\":{\"type\":\"object\",\"properties\":"
    "{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"integer\"}},\"required\":[\"a\",\"b\"]}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"now\"}}]";

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) n = 0;
    if (s) s[n] = 0;
    fclose(f);
    return s;
}

static void test_formats(void **state) {
    (void)state;
    static const struct {
        const char *file;
        wgml_tool_format want;
    } cases[] = {
        {"Qwen-Qwen2.5-7B-Instruct.jinja", WGML_TOOLS_HERMES},
        {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", WGML_TOOLS_HERMES},
        {"meta-llama-Llama-3.1-8B-Instruct.jinja", WGML_TOOLS_LLAMA3},
        {"meta-llama-Llama-3.2-3B-Instruct.jinja", WGML_TOOLS_LLAMA3},
        {"mistralai-Mistral-Nemo-Instruct-2407.jinja", WGML_TOOLS_MISTRAL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char path[512];
        snprintf(path, sizeof path, "chat/templates/%s", cases[i].file);
        char *t = slurp(tu_shared(path));
        if (!t) fail_msg("cannot read %s", tu_shared(path));
        if (wgml_tool_format_of(t) != cases[i].want)
            fail_msg("%s: %s, want %s", cases[i].file, wgml_tool_format_name(wgml_tool_format_of(t)),
                     wgml_tool_format_name(cases[i].want));
        free(t);
    }
    assert_int_equal(wgml_tool_format_of("{{ messages }}"), WGML_TOOLS_GENERIC);
}

static void test_errors(void **state) {
    (void)state;
    static const struct {
        const char *tools, *needle;
    } bad[] = {
        {"[]", "non-empty"},
        {"{}", "non-empty array"},
        {"[{\"type\":\"code\"}]", "tools[0] must be"},
        {"[{\"type\":\"function\",\"function\":{\"name\":\"a b\"}}]", "function.name"},
        {"[{\"type\":\"function\",\"function\":{\"name\":\"f\"}},{\"type\":\"function\",\"function\":{\"name\":\"f\"}}]", "twice"},
        {"[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":[1]}}]", "JSON Schema object"},
        {"[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\",\"properties\":{\"x\":{\"not\":{}}}}}}]",
         "tools[0] (f): parameters: json schema: at #/properties/x: keyword 'not'"},
        {"[{", "invalid JSON"},
    };
    wgml_tools *t;
    wgml_error err;
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        if (wgml_tools_create(bad[i].tools, strlen(bad[i].tools), WGML_TOOLS_HERMES, WGML_TOOL_CHOICE_AUTO, NULL, 1, &t, &err) ==
            WGML_OK)
            fail_msg("tools %s accepted", bad[i].tools);
        if (!strstr(err.message, bad[i].needle)) fail_msg("tools %s: '%s' lacks '%s'", bad[i].tools, err.message, bad[i].needle);
    }
    assert_int_not_equal(wgml_tools_create(TOOLS, strlen(TOOLS), WGML_TOOLS_HERMES, WGML_TOOL_CHOICE_NAMED, "nope", 1, &t, &err),
                         WGML_OK);
    assert_non_null(strstr(err.message, "tool_choice names 'nope'"));
    /* none: checked, no grammar, no trigger */
    assert_int_equal(wgml_tools_create(TOOLS, strlen(TOOLS), WGML_TOOLS_HERMES, WGML_TOOL_CHOICE_NONE, NULL, 1, &t, &err), WGML_OK);
    assert_null(wgml_tools_grammar(t));
    assert_null(wgml_tools_trigger(t, NULL));
    wgml_tools_free(t);
}

/* what the calls' grammar accepts: a generation constrained by it on a model whose vocabulary spells
 * anything (byte tokens), greedy and sampled, must parse back into calls */
static int on_text(void *user, int32_t token, const char *text, size_t len) {
    (void)token;
    char *out = user;
    if (strlen(out) + len < 4096) strncat(out, text, len);
    return 0;
}

static void test_generate_and_parse(void **state) {
    (void)state;
    wgml_model_params mp = wgml_model_default_params();
    mp.backend = WGML_BACKEND_CPU;
    wgml_model *m;
    wgml_error err;
    assert_int_equal(wgml_model_load(tu_shared("models/stories260K.gguf"), &mp, &m, &err), WGML_OK);
    wgml_session *s;
    assert_int_equal(wgml_session_create(m, NULL, &s, &err), WGML_OK);
    static const wgml_tool_format formats[] = {WGML_TOOLS_HERMES, WGML_TOOLS_LLAMA3, WGML_TOOLS_MISTRAL, WGML_TOOLS_GENERIC};
    int n_calls = 0;
    for (int f = 0; f < 4; f++) {
        for (int k = 0; k < 3; k++) {
            const wgml_tool_choice choice = k == 2 ? WGML_TOOL_CHOICE_NAMED : WGML_TOOL_CHOICE_REQUIRED;
            wgml_tools *t;
            /* one call each (parallel calls of a small model can go on to the token limit; test_parse
             * and test_structured.py cover several) */
            assert_int_equal(wgml_tools_create(TOOLS, strlen(TOOLS), formats[f], choice, "add", 0, &t, &err), WGML_OK);
            char text[4096] = "";
            wgml_generate_params gp = wgml_generate_default_params();
            gp.grammar = wgml_tools_grammar(t);
            gp.sampler.temperature = k == 0 ? 0.0f : 1.0f;
            gp.sampler.seed = (uint64_t)(f * 3 + k);
            gp.n_predict = 400;
            gp.on_token = on_text;
            gp.user = text;
            wgml_generate_result r;
            wgml_session_reset(s);
            assert_int_equal(wgml_generate(s, "Once upon a time", &gp, &r, &err), WGML_OK);
            if (r.stop != WGML_STOP_EOS) fail_msg("%s: did not end: %s", wgml_tool_format_name(formats[f]), text);
            char *calls = NULL;
            assert_int_equal(wgml_tools_parse(t, text, strlen(text), 7, &calls, &err), WGML_OK);
            if (!calls) fail_msg("%s, choice %d: not calls: %s", wgml_tool_format_name(formats[f]), k, text);
            assert_non_null(strstr(calls, "\"type\":\"function\""));
            if (k == 2) assert_non_null(strstr(calls, "\"name\":\"add\""));
            int here = 0;
            for (const char *p = calls; (p = strstr(p, "\"id\":\"call_")); p++) here++;
            assert_int_equal(here, 1); /* parallel off, or a named function: one call */
            n_calls += here;
            free(calls);
            wgml_tools_free(t);
        }
    }
    print_message("tool calls: %d generated and parsed back over 4 formats\n", n_calls);
    wgml_session_free(s);
    wgml_model_free(m);
}

static void test_parse(void **state) {
    (void)state;
    wgml_tools *t;
    wgml_error err;
    char *calls;
    /* hermes, two calls; arguments written back as JSON text */
    assert_int_equal(wgml_tools_create(TOOLS, strlen(TOOLS), WGML_TOOLS_HERMES, WGML_TOOL_CHOICE_AUTO, NULL, 1, &t, &err), WGML_OK);
    int at_start;
    assert_string_equal(wgml_tools_trigger(t, &at_start), "<tool_call>");
    assert_int_equal(at_start, 0);
    const char *h = "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}\n</tool_call>\n"
                    "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>";
    assert_int_equal(wgml_tools_parse(t, h, strlen(h), 1, &calls, &err), WGML_OK);
    assert_non_null(calls);
    assert_non_null(strstr(calls, "{\"name\":\"add\",\"arguments\":\"{\\\"a\\\":1,\\\"b\\\":2}\"}"));
    assert_non_null(strstr(calls, "\"name\":\"now\""));
    free(calls);
    static const char *const not_calls[] = {"Hello", "<tool_call>{\"name\": \"nope\", \"arguments\": {}}</tool_call>",
                                            "<tool_call>{\"name\": \"add\"", "<tool_call>{\"name\": \"add\", \"arguments\": 3}</tool_call>"};
    for (int i = 0; i < 4; i++) {
        assert_int_equal(wgml_tools_parse(t, not_calls[i], strlen(not_calls[i]), 1, &calls, &err), WGML_OK);
        assert_null(calls);
    }
    wgml_tools_free(t);
    /* llama3: one object, perhaps after <|python_tag|> */
    assert_int_equal(wgml_tools_create(TOOLS, strlen(TOOLS), WGML_TOOLS_LLAMA3, WGML_TOOL_CHOICE_AUTO, NULL, 1, &t, &err), WGML_OK);
    assert_string_equal(wgml_tools_trigger(t, &at_start), "{");
    assert_int_equal(at_start, 1);
    const char *l = "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\", \"unit\": \"c\"}}";
    assert_int_equal(wgml_tools_parse(t, l, strlen(l), 1, &calls, &err), WGML_OK);
    assert_non_null(calls);
    assert_non_null(strstr(calls, "\"name\":\"get_weather\""));
    free(calls);
    wgml_tools_free(t);
    /* mistral: an array after [TOOL_CALLS]; generic: {"tool_calls": [...]} */
    assert_int_equal(wgml_tools_create(TOOLS, strlen(TOOLS), WGML_TOOLS_MISTRAL, WGML_TOOL_CHOICE_AUTO, NULL, 1, &t, &err), WGML_OK);
    const char *mi = "[TOOL_CALLS] [{\"name\": \"add\", \"arguments\": {\"a\": 5, \"b\": 6}}, {\"name\": \"now\", \"arguments\": {}}]";
    assert_int_equal(wgml_tools_parse(t, mi, strlen(mi), 1, &calls, &err), WGML_OK);
    assert_non_null(calls);
    assert_non_null(strstr(calls, "call_00000001"));
    free(calls);
    wgml_tools_free(t);
    assert_int_equal(wgml_tools_create(TOOLS, strlen(TOOLS), WGML_TOOLS_GENERIC, WGML_TOOL_CHOICE_AUTO, NULL, 1, &t, &err), WGML_OK);
    const char *g = "{\"tool_calls\": [{\"name\": \"now\", \"arguments\": {}}]}";
    assert_int_equal(wgml_tools_parse(t, g, strlen(g), 1, &calls, &err), WGML_OK);
    assert_non_null(calls);
    free(calls);
    wgml_tools_free(t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_formats),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_generate_and_parse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
