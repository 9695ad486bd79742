/*
 * test_grammar.c - GBNF (text/grammar.h): the parser's errors with their
 * places, and the matcher on every construct: literals and escapes, classes
 * (ranges, negation, Unicode), '.', groups, * + ? {m} {m,} {m,n},
 * alternation, recursion, a JSON grammar; text fed in pieces that split
 * UTF-8; the limits a hostile grammar meets.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "testutil.h"
#include "text/grammar.h"

static grammar *parse_ok(const char *text) {
    grammar *g = NULL;
    wgml_error err;
    wgml_status st = grammar_parse(text, strlen(text), &g, &err);
    if (st) fail_msg("grammar failed: %s\n%s", err.message, text);
    return g;
}

/* 1: the whole of s is a sentence of g; 0: s is a prefix of one; -1: neither */
static int match(const grammar *g, const char *s) {
    grammar_state *st = NULL;
    wgml_error err;
    assert_int_equal(grammar_state_create(g, &st, &err), WGML_OK);
    int r = grammar_accept(st, s, strlen(s), &err);
    assert_true(r >= 0);
    const int out = !r ? -1 : grammar_accepting(st) ? 1 : 0;
    grammar_state_free(st);
    return out;
}

static void expect_error(const char *text, const char *want) {
    grammar *g = NULL;
    wgml_error err;
    const wgml_status st = grammar_parse(text, strlen(text), &g, &err);
    if (st != WGML_ERR_INVALID_ARGUMENT) fail_msg("'%s': status %d, not an error", text, (int)st);
    assert_null(g);
    if (!strstr(err.message, want)) fail_msg("'%s': got '%s', wanted '%s'", text, err.message, want);
}

static void test_errors(void **state) {
    (void)state;
    expect_error("root ::= \"abc", "line 1, column 10: unterminated string literal");
    expect_error("root ::= [a-", "unterminated character class");
    expect_error("root ::= x\n\nx ::= y", "line 3, column 7: undefined rule 'y'");
    expect_error("a ::= \"x\"", "no rule 'root'");
    expect_error("root ::= \"a\"\nroot ::= \"b\"", "line 2, column 1: rule 'root' is defined twice");
    expect_error("root ::= [z-a]", "runs backwards");
    expect_error("root ::= \"a\"{3,2}", "n below m");
    expect_error("root ::= \"a\"{,2}", "needs its m");
    expect_error("root ::= \"a\"{2", "without its '}'");
    expect_error("root ::= (\"a\"", "without its ')'");
    expect_error("root ::= \"a\")", "without its group");
    expect_error("root ::= \"\\q\"", "unknown escape \\q");
    expect_error("root ::= \"\\x4\"", "hexadecimal digits");
    expect_error("root ::= \"\\uD800\"", "names no character");
    expect_error("root = \"a\"", "'::=' was expected");
    expect_error("root ::= @", "unexpected '@'");
    expect_error("root ::= root \"a\" | \"b\"", "left-recursive");
    expect_error("root ::= a\na ::= b? root \"x\"\nb ::= \"y\"", "left-recursive");
    expect_error("root ::= \"a\"{1001}", "over 1000");
    expect_error("root ::= \"\xff\"", "invalid UTF-8");
    /* nesting deeper than the limit */
    char deep[1024] = "root ::= ";
    for (int i = 0; i < 200; i++) strcat(deep, "(");
    strcat(deep, "\"a\"");
    for (int i = 0; i < 200; i++) strcat(deep, ")");
    expect_error(deep, "nested too deeply");
    /* expansion past the element limit: 140 rules of 8 x 1000 characters (nested repeats of a group stay
     * small: the group is one reference) */
    char *big = malloc(140 * 40 + 64), *q = big;
    q += sprintf(q, "root ::= r0\n");
    for (int i = 0; i < 140; i++) q += sprintf(q, "r%d ::= \"abcdefgh\"{1000}\n", i);
    expect_error(big, "too large");
    free(big);
}

static void test_constructs(void **state) {
    (void)state;
    grammar *g = parse_ok("# a comment\nroot ::= \"ab\" [0-9]+ (\"x\" | \"yz\")? end # trailing\nend ::= \".\" | \"!\"\n");
    assert_int_equal(match(g, "ab1."), 1);
    assert_int_equal(match(g, "ab123x!"), 1);
    assert_int_equal(match(g, "ab9yz."), 1);
    assert_int_equal(match(g, "ab9y"), 0);  /* a prefix */
    assert_int_equal(match(g, "ab."), -1);  /* + needs one digit */
    assert_int_equal(match(g, "ab1xx."), -1);
    assert_int_equal(match(g, "ab1"), 0);
    grammar_free(g);
    /* negated classes, '.', escapes, Unicode */
    g = parse_ok("root ::= [^\"\\\\] . \"\\n\\t\\x41\\u00e9\\U0001F600\" [α-ω]");
    assert_int_equal(match(g, "x\xe2\x82\xac\n\tA\xc3\xa9\xf0\x9f\x98\x80\xce\xb2"), 1); /* x € \n \t A é 😀 β */
    assert_int_equal(match(g, "\"x"), -1);
    assert_int_equal(match(g, "\\x"), -1);
    assert_int_equal(match(g, "xy\n\tA\xc3\xa9\xf0\x9f\x98\x80z"), -1); /* z is not Greek */
    grammar_free(g);
    /* repetition bounds */
    g = parse_ok("root ::= \"a\"{2} \"b\"{1,3} \"c\"{2,} \"d\"?");
    assert_int_equal(match(g, "aabcc"), 1);
    assert_int_equal(match(g, "aabbbccccd"), 1);
    assert_int_equal(match(g, "abcc"), -1);
    assert_int_equal(match(g, "aabbbbcc"), -1);
    assert_int_equal(match(g, "aabc"), 0);
    assert_int_equal(match(g, "aabccdd"), -1);
    grammar_free(g);
    g = parse_ok("root ::= (\"ab\" | \"c\"){0,2}");
    assert_int_equal(match(g, ""), 1);
    assert_int_equal(match(g, "abc"), 1);
    assert_int_equal(match(g, "cab"), 1);
    assert_int_equal(match(g, "ccc"), -1);
    grammar_free(g);
    /* recursion: balanced parentheses */
    g = parse_ok("root ::= p\np ::= \"(\" p* \")\"");
    assert_int_equal(match(g, "(()(()))"), 1);
    assert_int_equal(match(g, "(()"), 0);
    assert_int_equal(match(g, "())"), -1);
    grammar_free(g);
    /* groups over several lines, rules used before they are defined */
    g = parse_ok("root ::= (\n  item\n  | \"-\"\n)+\nitem ::= [a-c]");
    assert_int_equal(match(g, "a-bc-"), 1);
    assert_int_equal(match(g, "d"), -1);
    assert_true(grammar_n_rules(g) >= 3);
    grammar_free(g);
}

static const char *json_gbnf =
    "root   ::= object\n"
    "value  ::= object | array | string | number | (\"true\" | \"false\" | \"null\") ws\n"
    "object ::= \"{\" ws ( string \":\" ws value (\",\" ws string \":\" ws value)* )? \"}\" ws\n"
    "array  ::= \"[\" ws ( value (\",\" ws value)* )? \"]\" ws\n"
    "string ::= \"\\\"\" ( [^\"\\\\\\x7F\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4}) )* \"\\\"\" ws\n"
    "number ::= (\"-\"? ([0-9] | [1-9] [0-9]{0,15})) (\".\" [0-9]+)? ([eE] [-+]? [0-9]{1,3})? ws\n"
    "ws ::= | \" \" | \"\\n\" [ \\t]{0,20}\n";

static void test_json(void **state) {
    (void)state;
    grammar *g = parse_ok(json_gbnf);
    assert_int_equal(match(g, "{}"), 1);
    assert_int_equal(match(g, "{\"a\": [1, 2.5e3, -0.1, true, null, \"x\\u00e9\\n\"], \"b\": {\"c\": false}}"), 1);
    assert_int_equal(match(g, "{\"a\": [1, 2"), 0);
    assert_int_equal(match(g, "{\"a\": 01}"), -1);
    assert_int_equal(match(g, "{\"a\" 1}"), -1);
    assert_int_equal(match(g, "[1]"), -1); /* root is an object */
    assert_int_equal(match(g, "{\"\xc3\xa9t\xc3\xa9\": \"\xe6\x97\xa5\"}"), 1);
    /* bytes fed one at a time split every code point; a bad continuation kills the state */
    const char *doc = "{\"k\xc3\xa9y\": [\"\xf0\x9f\x98\x80\", 3]}";
    grammar_state *st;
    wgml_error err;
    assert_int_equal(grammar_state_create(g, &st, &err), WGML_OK);
    for (size_t i = 0; doc[i]; i++) {
        assert_int_equal(grammar_accept(st, doc + i, 1, &err), 1);
        if (doc[i + 1]) assert_false(grammar_accepting(st));
    }
    assert_true(grammar_accepting(st));
    grammar_state *c;
    assert_int_equal(grammar_state_clone(st, &c, &err), WGML_OK);
    assert_int_equal(grammar_accept(c, " ", 1, &err), 1); /* white space may follow */
    assert_true(grammar_accepting(c));
    assert_int_equal(grammar_accept(c, "x", 1, &err), 0);
    assert_int_equal(grammar_accept(c, " ", 1, &err), 0); /* dead stays dead */
    assert_true(grammar_accepting(st));                      /* the clone is its own */
    grammar_state_free(c);
    assert_int_equal(grammar_state_clone(st, &c, &err), WGML_OK);
    /* half a code point is judged by the characters it can begin: only ws follows a finished object */
    assert_int_equal(grammar_accept(c, "\xc3", 1, &err), 0);
    grammar_state_free(c);
    grammar_state_free(st);
    grammar_free(g);
    /* a string grammar: a split code point is not accepting until whole */
    g = parse_ok("root ::= \"\\\"\" [^\"]* \"\\\"\"");
    assert_int_equal(grammar_state_create(g, &st, &err), WGML_OK);
    assert_int_equal(grammar_accept(st, "\"\xe2\x82", 3, &err), 1);
    assert_int_equal(grammar_accept(st, "\xac\"", 2, &err), 1);
    assert_true(grammar_accepting(st) && grammar_finished(st));
    grammar_state_free(st);
    assert_int_equal(grammar_state_create(g, &st, &err), WGML_OK);
    assert_int_equal(grammar_accept(st, "\"\xe2\x28", 3, &err), 0); /* bad UTF-8 */
    grammar_state_free(st);
    /* overlong encodings (of '/', 'e') and surrogates are not characters, whatever the class */
    static const char *const not_utf8[] = {"\"\xc0\xaf", "\"\xe0\x80\xaf", "\"\xf0\x80\x81\xa5", "\"\xed\xa0\x80"};
    for (int k = 0; k < 4; k++) {
        assert_int_equal(grammar_state_create(g, &st, &err), WGML_OK);
        assert_int_equal(grammar_accept(st, not_utf8[k], strlen(not_utf8[k]), &err), 0);
        grammar_state_free(st);
    }
    grammar_free(g);
    /* a lead byte no allowed character begins with is refused at once, not at the character's end */
    g = parse_ok("root ::= [a-z\u00e0-\u00ff]*");
    assert_int_equal(grammar_state_create(g, &st, &err), WGML_OK);
    assert_int_equal(grammar_accept(st, "\xc3", 1, &err), 1);    /* U+00C0..U+00FF */
    assert_int_equal(grammar_accept(st, "\xa9", 1, &err), 1);    /* U+00E9 */
    assert_int_equal(grammar_accept(st, "\xe6", 1, &err), 0);    /* U+6000..U+6FFF: none allowed */
    grammar_state_free(st);
    grammar_free(g);
}

/* A grammar whose ways multiply with every character hits the stack limit with an error. */
static void test_limits(void **state) {
    (void)state;
    grammar *g = parse_ok("root ::= x*\nx ::= \"a\" | \"a\" \"a\" | \"a\" \"a\" \"a\" | y\ny ::= (\"a\" | \"a\")+ y?");
    grammar_state *st;
    wgml_error err;
    assert_int_equal(grammar_state_create(g, &st, &err), WGML_OK);
    int r = 1;
    for (int i = 0; i < 64 && r == 1; i++) r = grammar_accept(st, "a", 1, &err);
    if (r < 0) assert_non_null(strstr(err.message, "too ambiguous"));
    grammar_state_free(st);
    grammar_free(g);
    /* empty and garbage grammars */
    grammar *h = NULL;
    assert_int_equal(grammar_parse("", 0, &h, &err), WGML_ERR_INVALID_ARGUMENT);
    assert_int_equal(grammar_parse("\x01\x02\x03", 3, &h, &err), WGML_ERR_INVALID_ARGUMENT);
    assert_null(h);
}

/* The token filter against trying each token alone, at every point of a JSON document, on a
 * vocabulary of random strings over the document's characters (multi-byte ones and pieces of
 * them included), empty tokens and duplicates. */
static void test_token_filter(void **state) {
    (void)state;
    grammar *g = parse_ok(json_gbnf);
    static const char *const atoms[] = {"{", "}", "[", "]", "\"", ":", ",", " ", "\n", "a", "b", "1", "0", "-", ".",
                                        "e", "true", "null", "\xc3\xa9", "\xc3", "\xa9", "\\", "u", "x"};
    enum { NV = 3000 };
    char *tok[NV];
    size_t len[NV];
    uint32_t seed = 12345;
    for (int t = 0; t < NV; t++) {
        char buf[64] = "";
        seed = seed * 1103515245u + 12345u;
        const int parts = t < 40 ? 0 : 1 + (int)((seed >> 16) % 4); /* the first 40: empty (special tokens) */
        for (int k = 0; k < parts; k++) {
            seed = seed * 1103515245u + 12345u;
            strcat(buf, atoms[(seed >> 16) % (sizeof atoms / sizeof atoms[0])]);
        }
        tok[t] = strdup(buf);
        len[t] = strlen(buf);
    }
    grammar_vocab *v;
    wgml_error err;
    assert_int_equal(grammar_vocab_create((const char *const *)tok, len, NV, &v, &err), WGML_OK);
    const char *doc = "{\"a\xc3\xa9\": [1, -0.5e1, true, null], \"b\": {\"x\": \"\\u00e9\"}}";
    grammar_state *st;
    assert_int_equal(grammar_state_create(g, &st, &err), WGML_OK);
    uint8_t *allowed = malloc(NV), *memoed = malloc(NV);
    grammar_memo *memo;
    assert_int_equal(grammar_memo_create(g, &memo, &err), WGML_OK);
    int checked = 0, total_allowed = 0;
    for (size_t i = 0; i <= strlen(doc); i++) {
        const int n = grammar_allowed(st, v, allowed, &err);
        assert_true(n >= 0);
        /* the memo's walk gives the same, the second time from what the first remembered */
        for (int twice = 0; twice < 2; twice++) {
            assert_int_equal(grammar_allowed_memo(memo, st, v, memoed, &err), n);
            assert_memory_equal(memoed, allowed, NV);
        }
        int brute = 0;
        for (int t = 0; t < NV; t++) {
            int ok = 0;
            if (len[t]) {
                grammar_state *c;
                assert_int_equal(grammar_state_clone(st, &c, &err), WGML_OK);
                ok = grammar_accept(c, tok[t], len[t], &err) == 1;
                grammar_state_free(c);
            }
            if (ok != allowed[t]) fail_msg("at %zu, token '%s': filter %d, alone %d", i, tok[t], allowed[t], ok);
            brute += ok;
        }
        assert_int_equal(n, brute);
        total_allowed += n;
        checked++;
        if (doc[i]) assert_int_equal(grammar_accept(st, doc + i, 1, &err), 1);
    }
    print_message("token filter: %d points of the document, %d tokens allowed in all, as each alone\n", checked,
                  total_allowed);
    assert_true(total_allowed > checked); /* the filter lets things through */
    grammar_memo_free(memo);
    free(allowed), free(memoed);
    grammar_state_free(st);
    grammar_vocab_free(v);
    for (int t = 0; t < NV; t++) free(tok[t]);
    grammar_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_constructs),
        cmocka_unit_test(test_json),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_token_filter),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
