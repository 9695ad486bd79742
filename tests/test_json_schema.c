/*
 * test_json_schema.c - JSON Schema to GBNF (src/text/json_schema.c): what the
 * grammars accept and refuse, checked against the schema's meaning (integer
 * ranges against arithmetic, integer by integer), and the errors for what
 * the converter does not do. tests/test_structured.py samples every schema of
 * tests/data/json_schemas.json through the server and validates the replies
 * with a JSON Schema validator.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/alloc.h"
#include "text/grammar.h"
#include "text/json_schema.h"

static grammar *compile(const char *schema) {
    char *gbnf;
    size_t n;
    wgml_error err;
    if (json_schema_to_gbnf(schema, schema ? strlen(schema) : 0, &gbnf, &n, &err))
        fail_msg("schema %s: %s", schema, err.message);
    grammar *g;
    if (grammar_parse(gbnf, n, &g, &err)) fail_msg("schema %s: its grammar: %s\n%s", schema, err.message, gbnf);
    wgml_free(gbnf);
    return g;
}

/* 1: the whole text is accepted */
static int accepts(const grammar *g, const char *text) {
    grammar_state *st;
    wgml_error err;
    assert_int_equal(grammar_state_create(g, &st, &err), WGML_OK);
    const int r = grammar_accept(st, text, strlen(text), &err);
    assert_true(r >= 0);
    const int ok = r == 1 && grammar_accepting(st);
    grammar_state_free(st);
    return ok;
}

static void expect(const char *schema, const char *const *yes, const char *const *no) {
    grammar *g = compile(schema);
    for (; yes && *yes; yes++)
        if (!accepts(g, *yes)) fail_msg("schema %s should accept %s", schema, *yes);
    for (; no && *no; no++)
        if (accepts(g, *no)) fail_msg("schema %s should refuse %s", schema, *no);
    grammar_free(g);
}

static void expect_error(const char *schema, const char *needle) {
    char *gbnf = NULL;
    size_t n;
    wgml_error err;
    if (json_schema_to_gbnf(schema, strlen(schema), &gbnf, &n, &err) == WGML_OK)
        fail_msg("schema %s should be refused (%s); got\n%s", schema, needle, gbnf);
    if (!strstr(err.message, needle)) fail_msg("schema %s: message '%s' lacks '%s'", schema, err.message, needle);
}

static void test_objects(void **state) {
    (void)state;
    const char *s = "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"string\"},"
                    "\"c\":{\"type\":\"boolean\"}},\"required\":[\"b\"]}";
    const char *yes[] = {"{\"b\":\"\"}", "{\"a\":1,\"b\":\"x\"}", "{ \"a\": -3, \"b\": \"y\", \"c\": true }",
                         "{\"b\":\"\\u00e9\",\"c\":false}", "{\n  \"b\": \"q\"\n}", NULL};
    const char *no[] = {"{}", "{\"a\":1}", "{\"b\":\"x\",\"a\":1}" /* schema order */, "{\"b\":\"x\",\"d\":1}",
                        "{\"b\":\"x\",}", "{\"b\":\"x\"} x", "{\"b\":1}", NULL};
    expect(s, yes, no);
    /* all optional: {} too */
    const char *yes2[] = {"{}", "{\"c\":true}", "{\"a\":0,\"c\":false}", NULL}, *no2[] = {"{,}", "{\"c\":true,}", NULL};
    expect("{\"properties\":{\"a\":{\"type\":\"integer\"},\"c\":{\"type\":\"boolean\"}}}", yes2, no2);
    /* maps */
    const char *yes3[] = {"{\"k\":1}", "{\"a\":0,\"bb\":9}", NULL}, *no3[] = {"{}", "{\"a\":0,\"b\":1,\"c\":2}", "{\"a\":10}", NULL};
    expect("{\"type\":\"object\",\"additionalProperties\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":9},"
           "\"minProperties\":1,\"maxProperties\":2}",
           yes3, no3);
    const char *yes4[] = {"{}", "{ }", NULL}, *no4[] = {"{\"a\":1}", NULL};
    expect("{\"type\":\"object\",\"additionalProperties\":false}", yes4, no4);
    /* any JSON object (response_format json_object) */
    char *gbnf;
    size_t n;
    wgml_error err;
    assert_int_equal(json_schema_to_gbnf(NULL, 0, &gbnf, &n, &err), WGML_OK);
    grammar *g;
    assert_int_equal(grammar_parse(gbnf, n, &g, &err), WGML_OK);
    assert_true(accepts(g, "{\"a\": [1, {\"b\": null}], \"c\": \"\\\"\"}"));
    assert_false(accepts(g, "[1]"));
    assert_false(accepts(g, "{\"a\": 1e5}")); /* numbers without exponents */
    grammar_free(g);
    wgml_free(gbnf);
}

static void test_arrays_and_values(void **state) {
    (void)state;
    const char *yes[] = {"[1]", "[1, 2, 3]", "[ -5 ]", NULL}, *no[] = {"[]", "[1,2,3,4]", "[1.5]", "[01]", NULL};
    expect("{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"minItems\":1,\"maxItems\":3}", yes, no);
    const char *yes2[] = {"[1,\"a\",true]", NULL}, *no2[] = {"[1,\"a\"]", "[1,\"a\",true,2]", NULL};
    expect("{\"prefixItems\":[{\"type\":\"integer\"},{\"type\":\"string\"},{\"type\":\"boolean\"}],\"items\":false}", yes2,
           no2);
    const char *yes3[] = {"\"red\"", "1", "null", "[3]", "{\"k\":\"v\"}", NULL}, *no3[] = {"\"Red\"", "2", "[3,3]", NULL};
    expect("{\"enum\":[\"red\",1,null,[3],{\"k\":\"v\"}]}", yes3, no3);
    const char *yes4[] = {"\"a \\\"b\\\"\"", NULL}, *no4[] = {"\"a \\\"b\\\" \"", NULL};
    expect("{\"const\":\"a \\\"b\\\"\"}", yes4, no4);
    const char *yes5[] = {"3", "\"ab\"", "null", NULL}, *no5[] = {"true", "\"abcd\"", "6", NULL};
    expect("{\"anyOf\":[{\"type\":\"integer\",\"minimum\":0,\"maximum\":5},{\"type\":\"string\",\"maxLength\":3},"
           "{\"type\":\"null\"}]}",
           yes5, no5);
    const char *yes6[] = {"12", "null", NULL}, *no6[] = {"9", "\"x\"", NULL};
    expect("{\"type\":[\"integer\",\"null\"],\"minimum\":10,\"maximum\":20}", yes6, no6);
    const char *yes7[] = {"\"\\u00e9\\u00e8\"", "\"ab\"", "\"\xc3\xa9\xc3\xa8\"", NULL},
               *no7[] = {"\"a\"", "\"abcd\"", "\"\\ud83d\"", NULL};
    expect("{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}", yes7, no7);
    /* $ref, recursion, allOf */
    const char *yes8[] = {"{\"v\":1}", "{\"v\":1,\"next\":{\"v\":2,\"next\":{\"v\":3}}}", NULL},
               *no8[] = {"{\"v\":1,\"next\":{}}", NULL};
    expect("{\"$defs\":{\"n\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"integer\"},\"next\":{\"$ref\":\"#/$defs/n\"}},"
           "\"required\":[\"v\"]}},\"$ref\":\"#/$defs/n\"}",
           yes8, no8);
    const char *yes9[] = {"{\"a\":1,\"b\":true}", NULL}, *no9[] = {"{\"a\":1}", "{\"b\":true}", NULL};
    expect("{\"allOf\":[{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"required\":[\"a\"]},"
           "{\"properties\":{\"b\":{\"type\":\"boolean\"}},\"required\":[\"b\"]}]}",
           yes9, no9);
}

/* every integer around the bounds and the digit-count boundaries, against arithmetic */
static void test_integer_ranges(void **state) {
    (void)state;
    static const long long ranges[][2] = {{0, 150}, {-1234, -17}, {7, 1000}, {-99, 99}, {10, 19}, {1, 1},
                                          {-5, 0}, {0, 0}, {95, 105}, {123, 4567}, {-1000, 999}, {5000, 5009}};
    int checked = 0;
    for (size_t r = 0; r < sizeof ranges / sizeof *ranges; r++) {
        const long long lo = ranges[r][0], hi = ranges[r][1];
        char schema[160];
        snprintf(schema, sizeof schema, "{\"type\":\"integer\",\"minimum\":%lld,\"maximum\":%lld}", lo, hi);
        grammar *g = compile(schema);
        for (long long x = lo - 120; x <= hi + 120; x++) {
            char text[32];
            snprintf(text, sizeof text, "%lld", x);
            if (accepts(g, text) != (x >= lo && x <= hi)) fail_msg("%s: %lld", schema, x);
            checked++;
        }
        for (long long x = 1; x < 100000000; x *= 10) { /* far outside, and leading zeros */
            char text[32];
            snprintf(text, sizeof text, "%lld", hi + x);
            assert_false(accepts(g, text));
            snprintf(text, sizeof text, "0%lld", lo > 0 ? lo : 1);
            assert_false(accepts(g, text));
        }
        grammar_free(g);
    }
    /* exclusive bounds, one side only */
    const char *yes[] = {"8", "999", NULL}, *no[] = {"7", "1000", "-8", NULL};
    expect("{\"type\":\"integer\",\"exclusiveMinimum\":7,\"exclusiveMaximum\":1000}", yes, no);
    const char *yes2[] = {"-3", "0", "999999999999999", NULL}, *no2[] = {"-4", "1000000000000000", NULL};
    expect("{\"type\":\"integer\",\"minimum\":-3}", yes2, no2);
    /* numbers with bounds: whole numbers and k.f within them */
    /* (k.f only for whole k within the bounds: 0.75 is valid but not written, a subset) */
    const char *yes3[] = {"1", "3", "1.5", "2.999", NULL}, *no3[] = {"0", "0.4", "3.5", "-1", "3.0", "1.50", NULL};
    expect("{\"type\":\"number\",\"minimum\":0.5,\"maximum\":3}", yes3, no3);
    print_message("integer ranges: %d integers checked against their bounds\n", checked);
}

static void test_strings(void **state) {
    (void)state;
    const char *yes[] = {"\"ABC-12\"", "\"XYZ-9999\"", NULL}, *no[] = {"\"AB-12\"", "\"ABC-1\"", "\"abc-12\"", "\"ABC-12345\"", NULL};
    expect("{\"type\":\"string\",\"pattern\":\"^[A-Z]{3}-[0-9]{2,4}$\"}", yes, no);
    const char *yes2[] = {"\"yes\"", "\"no!\"", "\"maybe\"", NULL}, *no2[] = {"\"yes!!\"", "\"ye\"", NULL};
    expect("{\"type\":\"string\",\"pattern\":\"^(yes|no|maybe)!?$\"}", yes2, no2);
    const char *yes3[] = {"\"12.ab_ x\"", "\"00.Z wxy\"", NULL}, *no3[] = {"\"1.ab x\"", "\"12.ab x,\"", "\"12.abcd x\"", NULL};
    expect("{\"type\":\"string\",\"pattern\":\"^\\\\d{2}\\\\.\\\\w{1,3}\\\\s[^,]{1,4}$\"}", yes3, no3);
    /* a pattern's quote and backslash come out escaped as JSON writes them */
    const char *yes4[] = {"\"a\\\"b\"", "\"a\\\\b\"", NULL}, *no4[] = {"\"a\"b\"", NULL};
    expect("{\"type\":\"string\",\"pattern\":\"^a[\\\"\\\\\\\\]b$\"}", yes4, no4);
    const char *yes5[] = {"\"a\\\"b\"", NULL}, *no5[] = {"\"a\\\\b\"", NULL};
    expect("{\"type\":\"string\",\"pattern\":\"^a\\\"b$\"}", yes5, no5);
    /* formats */
    const char *d_yes[] = {"\"2024-02-28\"", "\"1999-12-01\"", NULL}, *d_no[] = {"\"2024-13-01\"", "\"2024-02-31\"", "\"24-01-01\"", NULL};
    expect("{\"type\":\"string\",\"format\":\"date\"}", d_yes, d_no);
    const char *t_yes[] = {"\"23:59:59Z\"", "\"01:02:03.5+05:30\"", NULL}, *t_no[] = {"\"24:00:00Z\"", "\"01:02:03\"", NULL};
    expect("{\"type\":\"string\",\"format\":\"time\"}", t_yes, t_no);
    const char *dt_yes[] = {"\"2024-01-02T03:04:05Z\"", NULL}, *dt_no[] = {"\"2024-01-02 03:04:05Z\"", NULL};
    expect("{\"type\":\"string\",\"format\":\"date-time\"}", dt_yes, dt_no);
    const char *u_yes[] = {"\"123e4567-e89b-12d3-a456-426614174000\"", NULL}, *u_no[] = {"\"123e4567e89b12d3a456426614174000\"", NULL};
    expect("{\"type\":\"string\",\"format\":\"uuid\"}", u_yes, u_no);
    const char *e_yes[] = {"\"a.b+c@example.co\"", NULL}, *e_no[] = {"\"a@b\"", "\"@b.co\"", NULL};
    expect("{\"type\":\"string\",\"format\":\"email\"}", e_yes, e_no);
}

static void test_errors(void **state) {
    (void)state;
    expect_error("{\"type\":\"array\",\"uniqueItems\":true}", "'uniqueItems' is not supported");
    expect_error("{\"properties\":{\"a\":{\"if\":{}}}}", "at #/properties/a: keyword 'if' is not supported");
    expect_error("{\"not\":{}}", "'not'");
    expect_error("{\"type\":\"integer\",\"multipleOf\":3}", "'multipleOf'");
    expect_error("{\"patternProperties\":{}}", "'patternProperties'");
    expect_error("{\"$ref\":\"http://example.com/s.json\"}", "only references within the schema");
    expect_error("{\"$ref\":\"#/$defs/missing\"}", "points at nothing");
    expect_error("{\"type\":\"string\",\"format\":\"uri\"}", "format 'uri' is not supported");
    expect_error("{\"type\":\"integer\",\"minimum\":5,\"maximum\":4}", "no integer");
    expect_error("{\"type\":\"string\",\"minLength\":5,\"maxLength\":4}", "maximum is below the minimum");
    expect_error("{\"type\":\"string\",\"pattern\":\"(?=a)\"}", "lookarounds");
    expect_error("{\"type\":\"string\",\"pattern\":\"(a)\\\\1\"}", "back references");
    expect_error("{\"type\":\"string\",\"pattern\":\"a{2000}\"}", "repetition above");
    expect_error("{\"type\":\"quaternion\"}", "not a JSON Schema type");
    expect_error("false", "allows nothing");
    expect_error("{\"type\":\"object\",\"required\":[\"a\"]}", "required property 'a'");
    expect_error("{\"allOf\":[{\"type\":\"string\"},{\"type\":\"integer\"}]}", "disagree on 'type'");
    expect_error("{\"type\":", "invalid JSON");
    expect_error("[1]", "a schema must be an object or a boolean");
    expect_error("{\"exclusiveMinimum\":true,\"type\":\"integer\"}", "draft-4");
    /* deep nesting is refused, not a stack overflow */
    char deep[4096] = "";
    for (int i = 0; i < 100; i++) strcat(deep, "{\"items\":");
    strcat(deep, "{}");
    for (int i = 0; i < 100; i++) strcat(deep, "}");
    expect_error(deep, "nested deeper");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_objects),        cmocka_unit_test(test_arrays_and_values),
        cmocka_unit_test(test_integer_ranges), cmocka_unit_test(test_strings),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
