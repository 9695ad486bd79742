/*
 * test_sampler.c - sampling: greedy, the distribution a temperature draw
 * follows, top-k / top-p / min-p truncation, repetition penalty, seeds.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "text/sampler.h"

#define V 8

static wgml_sampler *make(wgml_sampler_params p) {
    wgml_sampler *s;
    wgml_error err;
    assert_int_equal(wgml_sampler_create(&p, V, &s, &err), WGML_OK);
    return s;
}

static wgml_sampler_params plain(float temp) {
    wgml_sampler_params p = wgml_sampler_default_params();
    p.temperature = temp;
    p.top_k = 0;
    p.top_p = 1;
    p.min_p = 0;
    p.repeat_penalty = 1;
    p.seed = 7;
    return p;
}

static const float logits[V] = {1.0f, 3.0f, 2.0f, 0.5f, 2.9f, -1.0f, 0.0f, 1.5f};

static void counts(wgml_sampler *s, int n, int *c, const int32_t *hist, int n_hist) {
    memset(c, 0, V * sizeof *c);
    for (int i = 0; i < n; i++) c[wgml_sampler_sample(s, logits, hist, n_hist)]++;
}

static void test_greedy(void **state) {
    (void)state;
    wgml_sampler *s = make(plain(0));
    assert_int_equal(wgml_sampler_sample(s, logits, NULL, 0), 1);
    float nan_l[V];
    memcpy(nan_l, logits, sizeof nan_l);
    nan_l[0] = NAN;
    assert_int_equal(wgml_sampler_sample(s, nan_l, NULL, 0), 1);
    wgml_sampler_free(s);
    wgml_sampler_params p = plain(0);
    assert_true(wgml_sampler_is_greedy(&p));
    p.repeat_penalty = 1.3f;
    assert_false(wgml_sampler_is_greedy(&p));
}

/* A temperature-1 draw follows softmax(logits): frequencies within 4 sigma. */
static void test_distribution(void **state) {
    (void)state;
    wgml_sampler *s = make(plain(1));
    int c[V], n = 40000;
    counts(s, n, c, NULL, 0);
    double z = 0;
    for (int i = 0; i < V; i++) z += exp(logits[i]);
    for (int i = 0; i < V; i++) {
        double p = exp(logits[i]) / z, sd = sqrt(n * p * (1 - p));
        assert_true(fabs(c[i] - n * p) <= 4 * sd + 1);
    }
    wgml_sampler_free(s);
}

static void test_truncation(void **state) {
    (void)state;
    int c[V];
    wgml_sampler_params p = plain(1);
    p.top_k = 2; /* only tokens 1 and 4 */
    wgml_sampler *s = make(p);
    counts(s, 2000, c, NULL, 0);
    assert_int_equal(c[1] + c[4], 2000);
    assert_true(c[1] > 0 && c[4] > 0);
    wgml_sampler_free(s);

    p = plain(1);
    p.top_p = 0.5f; /* token 1 alone has ~34%, 1+4 ~65%: the nucleus is {1, 4} */
    s = make(p);
    counts(s, 2000, c, NULL, 0);
    assert_int_equal(c[1] + c[4], 2000);
    wgml_sampler_free(s);

    p = plain(1);
    p.min_p = 0.3f; /* keeps p >= 0.3 p(1), i.e. logit >= 3 + ln 0.3 = 1.80: tokens 1, 4, 2 (not 7 at 1.5) */
    s = make(p);
    counts(s, 3000, c, NULL, 0);
    assert_int_equal(c[1] + c[4] + c[2], 3000);
    assert_true(c[2] > 0);
    wgml_sampler_free(s);
}

static void test_repeat_penalty(void **state) {
    (void)state;
    wgml_sampler_params p = plain(0);
    p.repeat_penalty = 2.0f;
    p.repeat_last_n = 4;
    wgml_sampler *s = make(p);
    int32_t hist[] = {1, 1, 1}; /* 3/2 = 1.5 < 2.9: token 4 wins, and 1 is penalized once, not thrice */
    assert_int_equal(wgml_sampler_sample(s, logits, hist, 3), 4);
    int32_t old[] = {1, 6, 6, 6, 6}; /* 1 is outside the last 4 */
    assert_int_equal(wgml_sampler_sample(s, logits, old, 5), 1);
    wgml_sampler_free(s);
}

static void test_seed(void **state) {
    (void)state;
    int32_t a[50], b[50], c[50];
    wgml_sampler_params p = plain(1.5f);
    wgml_sampler *s1 = make(p), *s2 = make(p);
    p.seed = 8;
    wgml_sampler *s3 = make(p);
    for (int i = 0; i < 50; i++) {
        a[i] = wgml_sampler_sample(s1, logits, NULL, 0);
        b[i] = wgml_sampler_sample(s2, logits, NULL, 0);
        c[i] = wgml_sampler_sample(s3, logits, NULL, 0);
    }
    assert_memory_equal(a, b, sizeof a);
    assert_memory_not_equal(a, c, sizeof a);
    wgml_sampler_free(s1), wgml_sampler_free(s2), wgml_sampler_free(s3);
}

static void test_bad_params(void **state) {
    (void)state;
    wgml_error err;
    wgml_sampler *s = NULL;
    wgml_sampler_params p = plain(-0.5f);
    assert_int_equal(wgml_sampler_create(&p, V, &s, &err), WGML_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "temperature"));
    p = plain(1);
    p.repeat_penalty = 0;
    assert_int_equal(wgml_sampler_create(&p, V, &s, &err), WGML_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "repeat penalty"));
    p = plain(1);
    assert_int_equal(wgml_sampler_create(&p, 0, &s, &err), WGML_ERR_INVALID_ARGUMENT);
    assert_null(s);
}

/* With a grammar, whatever the logits: every token sampled keeps the text a prefix of the
 * grammar's, end of sequence comes only where it may end, and sampling options still apply
 * within the allowed set (greedy picks the best allowed token). */
static void test_grammar(void **state) {
    (void)state;
    static const char *const pieces[] = {"", "a", "b", "ab", "ba", "{", "}", "\"", "x", "aab", "bb", "c"};
    enum { NV = 12, EOS = 0 };
    static const int32_t eog[] = {EOS};
    size_t lens[NV];
    for (int t = 0; t < NV; t++) lens[t] = strlen(pieces[t]);
    const char *gbnf = "root ::= \"{\" (\"a\" | \"b\"){1,6} \"}\"";
    grammar *g;
    grammar_vocab *v;
    wgml_error err;
    assert_int_equal(grammar_parse(gbnf, strlen(gbnf), &g, &err), WGML_OK);
    assert_int_equal(grammar_vocab_create(pieces, lens, NV, &v, &err), WGML_OK);
    int ended = 0;
    for (int trial = 0; trial < 200; trial++) {
        wgml_sampler_params p = wgml_sampler_default_params();
        p.temperature = trial % 4 == 0 ? 0.0f : 1.5f;
        p.seed = (uint64_t)trial;
        p.top_k = trial % 3 == 0 ? 3 : 0;
        wgml_sampler *s;
        assert_int_equal(wgml_sampler_create(&p, NV, &s, &err), WGML_OK);
        grammar_state *gs;
        assert_int_equal(grammar_state_create(g, &gs, &err), WGML_OK);
        wgml_sampler_set_grammar(s, gs, v, eog, 1, &err);
        char text[256] = "";
        uint32_t r = (uint32_t)trial * 2654435761u + 1;
        int done = 0;
        for (int step = 0; step < 40 && !done; step++) {
            float lg[NV];
            for (int t = 0; t < NV; t++) r = r * 1664525u + 1013904223u, lg[t] = (float)(r >> 8) / 1677721.6f - 5.0f;
            lg[8] += 20; /* "x" is the model's favourite: never allowed */
            const int32_t t = wgml_sampler_sample(s, lg, NULL, 0);
            assert_true(t >= 0 && t < NV);
            if (p.temperature == 0.0f) { /* greedy: the best logit among the allowed (and eos where it may end) */
                for (int u = 0; u < NV; u++) {
                    grammar_state *c;
                    int ok = 0;
                    if (u == EOS) ok = 0; /* checked below */
                    else if (grammar_state_create(g, &c, &err) == WGML_OK) {
                        ok = grammar_accept(c, text, strlen(text), &err) == 1 && grammar_accept(c, pieces[u], lens[u], &err) == 1;
                        grammar_state_free(c);
                    }
                    if (ok) assert_true(lg[u] <= lg[t] || t == EOS);
                }
            }
            if (t == EOS) {
                grammar_state *c;
                assert_int_equal(grammar_state_create(g, &c, &err), WGML_OK);
                assert_int_equal(grammar_accept(c, text, strlen(text), &err), 1);
                assert_true(grammar_accepting(c)); /* eos only at an end */
                grammar_state_free(c);
                done = 1;
                ended++;
            } else {
                strcat(text, pieces[t]);
                assert_true(t != 8 && t != 11);
            }
        }
        /* the text is a prefix of the grammar's whatever happened */
        grammar_state *c;
        assert_int_equal(grammar_state_create(g, &c, &err), WGML_OK);
        assert_int_equal(grammar_accept(c, text, strlen(text), &err), 1);
        grammar_state_free(c);
        grammar_state_free(gs);
        wgml_sampler_free(s);
    }
    print_message("grammar: %d of 200 samplings ended with eos, every text in the grammar\n", ended);
    assert_true(ended == 200); /* at most 8 tokens before "}" closes it, then only eos */
    /* a grammar no token can continue: an error, not a token */
    const char *need_z = "root ::= \"z\"";
    grammar *gz;
    assert_int_equal(grammar_parse(need_z, strlen(need_z), &gz, &err), WGML_OK);
    wgml_sampler_params p = wgml_sampler_default_params();
    wgml_sampler *s;
    grammar_state *gs;
    assert_int_equal(wgml_sampler_create(&p, NV, &s, &err), WGML_OK);
    assert_int_equal(grammar_state_create(gz, &gs, &err), WGML_OK);
    wgml_sampler_set_grammar(s, gs, v, eog, 1, &err);
    float lg[NV] = {0};
    assert_int_equal(wgml_sampler_sample(s, lg, NULL, 0), -1);
    assert_non_null(strstr(err.message, "no token"));
    grammar_state_free(gs);
    wgml_sampler_free(s);
    grammar_free(gz);
    grammar_vocab_free(v);
    grammar_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_greedy),         cmocka_unit_test(test_distribution), cmocka_unit_test(test_truncation),
        cmocka_unit_test(test_repeat_penalty), cmocka_unit_test(test_seed),         cmocka_unit_test(test_bad_params),
        cmocka_unit_test(test_grammar),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
