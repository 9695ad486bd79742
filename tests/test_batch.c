/*
 * test_batch.c - several sequences decoded together (wgml_batch, include/wgml.h).
 *
 * The promise under test: a sequence gets the same tokens (and the same
 * logits, bit for bit) whether it runs alone or beside others in the same
 * steps (decode rows of running sequences mixed with chunks of new prompts, in other slots), greedy and
 * seeded sampling alike, on the CPU and on the software WebGPU adapters
 * (skipped when missing, unless $WGML_REQUIRE_ADAPTERS names them). Also:
 * the batch agrees with a plain session, a kept prefix continues as a fresh
 * evaluation does, bad steps are refused without changing any sequence, and
 * grammars constrain a generation, a batch's sequence (beside a free one, as
 * alone) and a sequence whose grammar starts after a prefix.
 *
 *   test_batch [cpu|swiftshader|lavapipe ...]   (default: all)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "wgml.h"

#define N_SEQ 4
#define N_GEN 24
#define CHUNK 8

typedef struct {
    const char *name;
    wgml_backend_kind backend;
    const char *adapter;
} config;

static const config configs[] = {
    {"cpu", WGML_BACKEND_CPU, NULL},
    {"swiftshader", WGML_BACKEND_WEBGPU, "swiftshader"},
    {"lavapipe", WGML_BACKEND_WEBGPU, "llvmpipe"},
};

static const char *prompts[N_SEQ] = {
    "Once upon a time",
    "The little dog ran to the park and saw a big red ball",
    "Lily",
    "One day, a boy named Tom wanted to play with his friends in the garden, but it was raining",
};

static wgml_model *load(const config *c) {
    if (c->adapter && !tu_adapter_present(c->adapter)) {
        const char *req = getenv("WGML_REQUIRE_ADAPTERS");
        if (req && strstr(req, c->adapter)) fail_msg("adapter '%s' is required but not found", c->adapter);
        fprintf(stderr, "skipping %s: adapter not found\n", c->name);
        return NULL;
    }
    wgml_model_params mp = wgml_model_default_params();
    mp.backend = c->backend;
    mp.adapter = c->adapter;
    wgml_model *m = NULL;
    wgml_error err;
    wgml_status st = wgml_model_load(tu_shared("models/stories260K.gguf"), &mp, &m, &err);
    if (st) fprintf(stderr, "%s: %s\n", c->name, err.message);
    assert_int_equal(st, WGML_OK);
    return m;
}

static wgml_batch *new_batch(wgml_model *m) {
    wgml_batch_params bp = wgml_batch_default_params();
    bp.n_seq = N_SEQ;
    bp.n_ctx = 256;
    bp.n_batch = CHUNK * N_SEQ;
    wgml_batch *b = NULL;
    wgml_error err;
    wgml_status st = wgml_batch_create(m, &bp, &b, &err);
    if (st) fprintf(stderr, "%s\n", err.message);
    assert_int_equal(st, WGML_OK);
    return b;
}

/* One sequence's state in a schedule. */
typedef struct {
    int32_t prompt[256];
    int n_prompt, fed;   /* prompt tokens, and how many were evaluated */
    int32_t out[N_GEN];  /* generated tokens */
    int n_out, start;    /* tokens generated; the step at which it starts */
    int seq;             /* its slot */
    int32_t pending;     /* the last token picked, to evaluate next */
    uint64_t hash;       /* FNV-1a of the bits of every logits row it sampled from */
} stream;

static void setup_stream(wgml_model *m, stream *s, const char *prompt, int seq, int start) {
    memset(s, 0, sizeof *s);
    wgml_error err;
    s->n_prompt = wgml_tokenize(m, prompt, strlen(prompt), 1, s->prompt, 256, &err);
    assert_true(s->n_prompt > 0 && s->n_prompt <= 256);
    s->seq = seq;
    s->start = start;
}

/* Runs streams together: from its start step on, each stream feeds its prompt
 * in chunks of CHUNK tokens, then its picked tokens one at a time, until N_GEN. */
static void run_streams(wgml_batch *b, stream *st, int n) {
    wgml_error err;
    for (int step = 0;; step++) {
        wgml_batch_item items[N_SEQ];
        int ni = 0, left = 0;
        for (int i = 0; i < n; i++) {
            stream *s = &st[i];
            if (s->n_out >= N_GEN) continue;
            left++;
            if (step < s->start) continue;
            wgml_batch_item *it = &items[ni++];
            memset(it, 0, sizeof *it);
            it->seq = s->seq;
            if (s->fed < s->n_prompt) {
                int k = s->n_prompt - s->fed < CHUNK ? s->n_prompt - s->fed : CHUNK;
                it->tokens = s->prompt + s->fed;
                it->n_tokens = k;
                it->sample = it->logits = s->fed + k == s->n_prompt;
            } else {
                it->tokens = &s->pending;
                it->n_tokens = 1;
                it->sample = it->logits = 1;
            }
        }
        if (!left) break;
        if (!ni) continue;
        wgml_status rc = wgml_batch_step(b, items, ni, &err);
        if (rc) fprintf(stderr, "step %d: %s\n", step, err.message);
        assert_int_equal(rc, WGML_OK);
        for (int j = 0; j < ni; j++) {
            stream *s = NULL;
            for (int i = 0; i < n; i++)
                if (st[i].seq == items[j].seq) s = &st[i];
            if (s->fed < s->n_prompt) s->fed += items[j].n_tokens;
            if (items[j].sample) {
                const unsigned char *l = (const unsigned char *)wgml_batch_logits(b, items[j].seq);
                assert_non_null(l);
                if (!s->hash) s->hash = 1469598103934665603ull;
                for (size_t k = 0; k < 512 * sizeof(float); k++) s->hash = (s->hash ^ l[k]) * 1099511628211ull;
                assert_true(items[j].next >= 0);
                s->out[s->n_out++] = s->pending = items[j].next;
            } else {
                assert_int_equal(items[j].next, -1);
            }
        }
    }
}

static void set_samplers(wgml_batch *b, const stream *st, int n, float temperature) {
    wgml_error err;
    for (int i = 0; i < n; i++) {
        wgml_sampler_params sp = wgml_sampler_default_params();
        sp.temperature = temperature;
        sp.seed = 1000 + (uint64_t)i;
        assert_int_equal(wgml_batch_seq_sampler(b, st[i].seq, &sp, &err), WGML_OK);
    }
}

/* Each prompt alone in slot 0, then all four together in other slots, starting at different steps. */
static void alone_vs_together(wgml_model *m, float temperature) {
    stream alone[N_SEQ], together[N_SEQ];
    for (int i = 0; i < N_SEQ; i++) {
        wgml_batch *b = new_batch(m);
        setup_stream(m, &alone[i], prompts[i], 0, 0);
        alone[i].seq = 0;
        wgml_sampler_params sp = wgml_sampler_default_params();
        sp.temperature = temperature;
        sp.seed = 1000 + (uint64_t)i;
        wgml_error err;
        assert_int_equal(wgml_batch_seq_sampler(b, 0, &sp, &err), WGML_OK);
        run_streams(b, &alone[i], 1);
        wgml_batch_free(b);
    }
    wgml_batch *b = new_batch(m);
    for (int i = 0; i < N_SEQ; i++) setup_stream(m, &together[i], prompts[i], N_SEQ - 1 - i, 2 * i);
    set_samplers(b, together, N_SEQ, temperature);
    run_streams(b, together, N_SEQ);
    for (int i = 0; i < N_SEQ; i++) {
        assert_int_equal(together[i].n_out, N_GEN);
        for (int t = 0; t < N_GEN; t++) {
            if (alone[i].out[t] != together[i].out[t])
                fail_msg("stream %d token %d: %d alone, %d together", i, t, alone[i].out[t], together[i].out[t]);
        }
        if (alone[i].hash != together[i].hash) fail_msg("stream %d: its logits differ alone and together", i);
        int n_held;
        wgml_batch_seq_tokens(b, together[i].seq, &n_held);
        assert_int_equal(n_held, together[i].n_prompt + N_GEN - 1);
    }
    wgml_batch_free(b);
}

/* The batch's greedy tokens against a plain session's (wgml_generate), and its logits near the session's. */
static void against_session(wgml_model *m) {
    wgml_error err;
    wgml_session *s;
    wgml_session_params sp = wgml_session_default_params();
    sp.n_ctx = 256;
    assert_int_equal(wgml_session_create(m, &sp, &s, &err), WGML_OK);
    stream st;
    setup_stream(m, &st, prompts[1], 2, 0);
    assert_int_equal(wgml_session_eval(s, st.prompt, st.n_prompt, &err), WGML_OK);
    const float *ref = wgml_session_logits(s);
    int n_vocab = 512;
    wgml_batch *b = new_batch(m);
    wgml_batch_item it = {.seq = 2, .tokens = st.prompt, .n_tokens = st.n_prompt > CHUNK ? CHUNK : st.n_prompt};
    assert_int_equal(wgml_batch_step(b, &it, 1, &err), WGML_OK);
    assert_null(wgml_batch_logits(b, 2)); /* not asked for */
    it = (wgml_batch_item){.seq = 2, .tokens = st.prompt + CHUNK, .n_tokens = st.n_prompt - CHUNK, .logits = 1};
    assert_true(it.n_tokens > 0);
    assert_int_equal(wgml_batch_step(b, &it, 1, &err), WGML_OK);
    const float *got = wgml_batch_logits(b, 2);
    assert_non_null(got);
    assert_null(wgml_batch_logits(b, 1));
    double worst = 0;
    for (int i = 0; i < n_vocab; i++) worst = fmax(worst, fabs((double)got[i] - ref[i]) / (1 + fabs(ref[i])));
    if (worst > 2e-2) fail_msg("batch logits differ from the session's by %g", worst);
    wgml_session_free(s);
    wgml_batch_free(b);
}

/* Keeping a prefix and evaluating the rest gives the tokens of a fresh run. */
static void keep_prefix(wgml_model *m) {
    wgml_error err;
    stream fresh, reused;
    wgml_batch *b = new_batch(m);
    setup_stream(m, &fresh, prompts[3], 1, 0);
    run_streams(b, &fresh, 1);
    /* another conversation in slot 1, then back to the first prompt's prefix */
    int n_held;
    const int32_t *held = wgml_batch_seq_tokens(b, 1, &n_held);
    assert_non_null(held);
    assert_int_equal(memcmp(held, fresh.prompt, (size_t)fresh.n_prompt * sizeof(int32_t)), 0);
    int keep = fresh.n_prompt - 5;
    assert_int_equal(wgml_batch_seq_keep(b, 1, keep, &err), WGML_OK);
    wgml_batch_seq_tokens(b, 1, &n_held);
    assert_int_equal(n_held, keep);
    setup_stream(m, &reused, prompts[3], 1, 0);
    reused.fed = keep; /* only the rest is evaluated */
    run_streams(b, &reused, 1);
    assert_memory_equal(fresh.out, reused.out, sizeof fresh.out);
    assert_int_equal(wgml_batch_seq_keep(b, 1, 0, &err), WGML_OK);
    assert_int_equal(wgml_batch_seq_keep(b, 1, 1, &err), WGML_ERR_INVALID_ARGUMENT);
    wgml_batch_free(b);
}

/* Bad steps are refused with a message, and no sequence takes their tokens. */
static void bad_steps(wgml_model *m) {
    wgml_error err;
    wgml_batch *b = new_batch(m);
    int32_t tok[300] = {1, 2, 3};
    wgml_batch_item two[2] = {{.seq = 0, .tokens = tok, .n_tokens = 1}, {.seq = 0, .tokens = tok, .n_tokens = 1}};
    assert_int_equal(wgml_batch_step(b, two, 2, &err), WGML_ERR_INVALID_ARGUMENT); /* a sequence twice */
    assert_non_null(strstr(err.message, "twice"));
    wgml_batch_item it = {.seq = N_SEQ, .tokens = tok, .n_tokens = 1};
    assert_int_equal(wgml_batch_step(b, &it, 1, &err), WGML_ERR_INVALID_ARGUMENT);
    it = (wgml_batch_item){.seq = 0, .tokens = tok, .n_tokens = CHUNK * N_SEQ + 1};
    assert_int_equal(wgml_batch_step(b, &it, 1, &err), WGML_ERR_INVALID_ARGUMENT);
    it = (wgml_batch_item){.seq = 0, .tokens = tok, .n_tokens = 0};
    assert_int_equal(wgml_batch_step(b, &it, 1, &err), WGML_ERR_INVALID_ARGUMENT);
    tok[1] = 512; /* outside the vocabulary */
    it = (wgml_batch_item){.seq = 0, .tokens = tok, .n_tokens = 3, .sample = 1};
    assert_int_equal(wgml_batch_step(b, &it, 1, &err), WGML_ERR_INVALID_ARGUMENT);
    assert_int_equal(it.next, -1);
    assert_int_equal(wgml_batch_step(b, &it, 0, &err), WGML_ERR_INVALID_ARGUMENT);
    assert_int_equal(wgml_batch_step(NULL, &it, 1, &err), WGML_ERR_INVALID_ARGUMENT);
    int n_held = -1;
    for (int s = 0; s < N_SEQ; s++) {
        wgml_batch_seq_tokens(b, s, &n_held);
        assert_int_equal(n_held, 0);
    }
    assert_null(wgml_batch_seq_tokens(b, -1, &n_held));
    /* the context fills: 256 tokens fit, the 257th does not */
    memset(tok, 0, sizeof tok);
    for (int done = 0; done < 256; done += CHUNK) {
        it = (wgml_batch_item){.seq = 3, .tokens = tok, .n_tokens = CHUNK};
        assert_int_equal(wgml_batch_step(b, &it, 1, &err), WGML_OK);
    }
    it = (wgml_batch_item){.seq = 3, .tokens = tok, .n_tokens = 1};
    assert_int_equal(wgml_batch_step(b, &it, 1, &err), WGML_ERR_CONTEXT_FULL);
    wgml_batch_seq_tokens(b, 3, &n_held);
    assert_int_equal(n_held, 256);
    wgml_sampler_params sp = wgml_sampler_default_params();
    sp.top_p = 2;
    assert_int_equal(wgml_batch_seq_sampler(b, 0, &sp, &err), WGML_ERR_INVALID_ARGUMENT);
    wgml_batch_free(b);
    /* parameters */
    wgml_batch_params bp = wgml_batch_default_params();
    bp.n_seq = -1;
    assert_int_equal(wgml_batch_create(m, &bp, &b, &err), WGML_ERR_INVALID_ARGUMENT);
    assert_null(b);
    bp = wgml_batch_default_params();
    assert_int_equal(wgml_batch_create(m, &bp, &b, &err), WGML_OK);
    assert_int_equal(wgml_batch_n_seq(b), 4);
    assert_int_equal(wgml_batch_n_batch(b), 68);
    assert_int_equal(wgml_batch_n_ctx(b), 2048);
    wgml_batch_free(b);
}

static void text_helpers(wgml_model *m) {
    wgml_model_info info;
    wgml_model_get_info(m, &info);
    char a[64], b[64];
    wgml_error err;
    int32_t t[8];
    int n = wgml_tokenize(m, "Once", 4, 1, t, 8, &err);
    assert_int_equal(n, 2);
    int la = wgml_token_to_piece(m, t[1], a, sizeof a), lb = wgml_token_to_text(m, info.bos, t[1], b, sizeof b);
    assert_int_equal(la, lb + 1); /* " Once" after BOS is "Once" */
    assert_int_equal(memcmp(a + 1, b, (size_t)lb), 0);
    assert_int_equal(wgml_token_to_text(m, t[1], t[1], b, sizeof b), la);
    assert_true(wgml_token_is_eog(m, info.eos));
    assert_false(wgml_token_is_eog(m, t[1]));
    assert_true(wgml_token_to_text(m, -1, 100000, b, sizeof b) < 0);
}

static const config *current;

static void test_greedy_alone_vs_together(void **state) {
    (void)state;
    wgml_model *m = load(current);
    if (!m) skip();
    alone_vs_together(m, 0.0f);
    wgml_model_free(m);
}

static void test_sampled_alone_vs_together(void **state) {
    (void)state;
    wgml_model *m = load(current);
    if (!m) skip();
    alone_vs_together(m, 0.9f);
    wgml_model_free(m);
}

/* text of tokens (wgml_token_to_text after prev) */
static void append_text(wgml_model *m, int32_t prev, int32_t tok, char *text, size_t cap) {
    char piece[64];
    int n = wgml_token_to_text(m, prev, tok, piece, (int)sizeof piece - 1);
    assert_true(n >= 0 && n < (int)sizeof piece);
    piece[n] = 0;
    assert_true(strlen(text) + (size_t)n < cap);
    strcat(text, piece);
}

/* whether text is 3 to 5 lowercase words and a full stop: "[a-z]+ ( [a-z]+){2,4} ." */
static int is_sentence(const char *t) {
    int words = 0;
    for (;;) {
        int k = 0;
        while (*t >= 'a' && *t <= 'z') t++, k++;
        if (!k) return 0;
        words++;
        if (*t == '.') return t[1] == 0 && words >= 3 && words <= 5;
        if (*t++ != ' ') return 0;
    }
}

static int on_text(void *user, int32_t token, const char *text, size_t len) {
    (void)token;
    char *out = user;
    assert_true(strlen(out) + len < 512);
    strncat(out, text, len);
    return 0;
}

/* Grammars: wgml_generate's text follows the grammar and ends with end of sequence (greedy and
 * sampled); in a batch, a sequence with a grammar leaves its neighbour's tokens as they are
 * alone; a prefix starts the grammar part way (a constraint that begins at a trigger). */
static void grammar_generation(wgml_model *m) {
    const char *gbnf = "root ::= [a-z]+ (\" \" [a-z]+){2,4} \".\"";
    wgml_grammar *g;
    wgml_error err;
    assert_int_equal(wgml_grammar_create(gbnf, strlen(gbnf), &g, &err), WGML_OK);
    assert_string_equal(wgml_grammar_text(g), gbnf);
    wgml_session *s;
    assert_int_equal(wgml_session_create(m, NULL, &s, &err), WGML_OK);
    for (int t = 0; t < 3; t++) {
        char text[512] = "";
        wgml_generate_params gp = wgml_generate_default_params();
        gp.sampler.temperature = t == 0 ? 0.0f : 1.0f;
        gp.sampler.seed = (uint64_t)t;
        gp.n_predict = 200;
        gp.grammar = g;
        gp.on_token = on_text;
        gp.user = text;
        wgml_generate_result r;
        wgml_session_reset(s);
        assert_int_equal(wgml_generate(s, "Once upon a time", &gp, &r, &err), WGML_OK);
        if (!is_sentence(text) || r.stop != WGML_STOP_EOS) fail_msg("grammar, try %d: '%s' (%s)", t, text, wgml_stop_reason_name(r.stop));
    }
    /* a character no token spells whole: byte tokens, fed to the grammar split inside the code point */
    wgml_grammar *cjk_g;
    const char *cjk = "root ::= \"\\u4e2d\"";
    assert_int_equal(wgml_grammar_create(cjk, strlen(cjk), &cjk_g, &err), WGML_OK);
    char cjk_text[512] = "";
    wgml_generate_params gp = wgml_generate_default_params();
    gp.grammar = cjk_g;
    gp.on_token = on_text;
    gp.user = cjk_text;
    wgml_generate_result r;
    wgml_session_reset(s);
    assert_int_equal(wgml_generate(s, "Once", &gp, &r, &err), WGML_OK);
    assert_string_equal(cjk_text, "\xe4\xb8\xad");
    assert_int_equal(r.stop, WGML_STOP_EOS);
    wgml_grammar_free(cjk_g);
    wgml_session_free(s);

    /* batch: sequence 0 constrained, sequence 1 free; then sequence 1 alone */
    int32_t free_together[N_GEN], free_alone[N_GEN];
    for (int pass = 0; pass < 2; pass++) {
        wgml_batch *b = new_batch(m);
        stream st[2];
        setup_stream(m, &st[0], prompts[0], 0, 0);
        setup_stream(m, &st[1], prompts[1], 1, 0);
        if (pass == 0) assert_int_equal(wgml_batch_seq_grammar(b, 0, g, NULL, 0, &err), WGML_OK);
        char text[512] = "";
        int32_t prev = -1;
        int n_free = 0, done0 = pass == 1;
        for (int step = 0; step < 64 && (n_free < N_GEN || !done0); step++) {
            wgml_batch_item items[2];
            int ni = 0;
            for (int i = pass; i < 2; i++) {
                stream *q = &st[i];
                if ((i == 0 && done0) || (i == 1 && n_free >= N_GEN)) continue;
                wgml_batch_item *it = &items[ni++];
                memset(it, 0, sizeof *it);
                it->seq = i;
                it->sample = 1;
                if (!q->fed) it->tokens = q->prompt, it->n_tokens = q->n_prompt, q->fed = q->n_prompt;
                else it->tokens = &q->pending, it->n_tokens = 1;
            }
            if (!ni) break;
            assert_int_equal(wgml_batch_step(b, items, ni, &err), WGML_OK);
            for (int j = 0; j < ni; j++) {
                const int i = items[j].seq;
                const int32_t tok = items[j].next;
                if (tok < 0) fail_msg("sequence %d: %s", i, wgml_batch_seq_error(b, i));
                st[i].pending = tok;
                if (i == 1) (pass ? free_alone : free_together)[n_free++] = tok;
                else if (wgml_token_is_eog(m, tok)) done0 = 1;
                else append_text(m, prev, tok, text, sizeof text), prev = tok;
            }
        }
        if (pass == 0 && (!done0 || !is_sentence(text))) fail_msg("batch grammar: '%s'", text);
        /* a prefix: the grammar's text begins with "ab" already generated */
        if (pass == 1) {
            const char *ab = "root ::= \"ab\" [a-z]{3} \".\"";
            wgml_grammar *g2;
            assert_int_equal(wgml_grammar_create(ab, strlen(ab), &g2, &err), WGML_OK);
            assert_int_not_equal(wgml_batch_seq_grammar(b, 0, g2, "xy", 2, &err), WGML_OK); /* not a prefix */
            assert_int_equal(wgml_batch_seq_grammar(b, 0, g2, "ab", 2, &err), WGML_OK);
            assert_int_equal(wgml_batch_seq_keep(b, 0, 0, &err), WGML_OK); /* keep ends it ... */
            assert_int_equal(wgml_batch_seq_grammar(b, 0, g2, "ab", 2, &err), WGML_OK); /* ... so again */
            wgml_batch_item it = {.seq = 0, .tokens = st[0].prompt, .n_tokens = st[0].n_prompt, .sample = 1};
            char rest[512] = "";
            int32_t p = -1;
            for (int k = 0; k < 16; k++) {
                assert_int_equal(wgml_batch_step(b, &it, 1, &err), WGML_OK);
                if (it.next < 0) fail_msg("prefix: %s", wgml_batch_seq_error(b, 0));
                if (wgml_token_is_eog(m, it.next)) break;
                append_text(m, p, it.next, rest, sizeof rest);
                p = st[0].pending = it.next;
                it.tokens = &st[0].pending, it.n_tokens = 1;
            }
            assert_int_equal(strlen(rest), 4);
            assert_true(rest[3] == '.' && rest[0] >= 'a' && rest[2] <= 'z');
            wgml_grammar_free(g2);
        }
        wgml_batch_free(b);
    }
    assert_memory_equal(free_together, free_alone, sizeof free_alone);
    wgml_grammar_free(g);
}

static void test_grammar(void **state) {
    (void)state;
    wgml_model *m = load(current);
    if (!m) skip();
    grammar_generation(m);
    wgml_model_free(m);
}

static void test_against_session(void **state) {
    (void)state;
    wgml_model *m = load(current);
    if (!m) skip();
    against_session(m);
    wgml_model_free(m);
}

static void test_keep_prefix(void **state) {
    (void)state;
    wgml_model *m = load(current);
    if (!m) skip();
    keep_prefix(m);
    wgml_model_free(m);
}

static void test_bad_steps(void **state) {
    (void)state;
    wgml_model *m = load(current);
    if (!m) skip();
    bad_steps(m);
    text_helpers(m);
    wgml_model_free(m);
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_greedy_alone_vs_together), cmocka_unit_test(test_sampled_alone_vs_together),
        cmocka_unit_test(test_against_session),          cmocka_unit_test(test_keep_prefix),
        cmocka_unit_test(test_bad_steps),                cmocka_unit_test(test_grammar),
    };
    int fails = 0;
    for (size_t c = 0; c < sizeof configs / sizeof configs[0]; c++) {
        int chosen = argc < 2;
        for (int i = 1; i < argc; i++) chosen |= !strcmp(argv[i], configs[c].name);
        if (!chosen) continue;
        current = &configs[c];
        fprintf(stderr, "== %s\n", current->name);
        fails += _cmocka_run_group_tests(current->name, tests, sizeof tests / sizeof tests[0], NULL, NULL);
    }
    return fails;
}
