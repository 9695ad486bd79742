/*
 * fuzz_grammar.c - libFuzzer target: GBNF (src/text/grammar.c), the parser
 * and a bounded run of the matcher.
 *
 * Input: the grammar text, then optionally a 0x00 byte and text to follow
 * through it (at most 256 bytes, fed in pieces of 1-3 bytes so that code
 * points are split). Checks: a refused grammar has a message; a compiled one
 * gives a state; a state that died stays dead and is never accepting; a
 * clone follows the same text to the same answers; the token filter at the
 * end agrees with trying each token alone (tokens: the text's pieces), and so
 * does the memo's walk (grammar_allowed_memo), twice. Seeds:
 * fuzz/make-corpus.sh (a JSON grammar and small ones for every construct).
 */
#include "core/error.h"
#include "text/grammar.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(c)                                                                                                       \
    do {                                                                                                               \
        if (!(c)) {                                                                                                    \
            fprintf(stderr, "fuzz_grammar: check failed: %s (line %d)\n", #c, __LINE__);                               \
            abort();                                                                                                   \
        }                                                                                                              \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *z = memchr(data, 0, size);
    const size_t glen = z ? (size_t)(z - data) : size;
    const char *text = z ? (const char *)z + 1 : NULL;
    size_t tlen = z ? size - glen - 1 : 0;
    if (tlen > 256) tlen = 256;
    grammar *g = NULL;
    wgml_error err;
    err.message[0] = '\0';
    if (grammar_parse((const char *)data, glen, &g, &err)) {
        CHECK(!g && err.message[0]);
        return 0;
    }
    grammar_state *s = NULL, *c = NULL;
    if (grammar_state_create(g, &s, &err)) {
        CHECK(err.message[0]);
        grammar_free(g);
        return 0;
    }
    if (grammar_state_clone(s, &c, &err)) c = NULL;
    int alive = 1;
    for (size_t i = 0; i < tlen;) {
        const size_t n = 1 + (i % 3) < tlen - i ? 1 + (i % 3) : tlen - i;
        const int r = grammar_accept(s, text + i, n, &err);
        if (r < 0) break; /* too ambiguous: an error, not a crash */
        if (!alive) CHECK(r == 0);
        alive = r;
        if (!r) CHECK(!grammar_accepting(s));
        if (c) {
            const int rc = grammar_accept(c, text + i, n, &err);
            CHECK(rc == r || rc < 0);
            if (rc == r) CHECK(grammar_accepting(c) == grammar_accepting(s));
            else {
                grammar_state_free(c);
                c = NULL;
            }
        }
        i += n;
    }
    /* the token filter against each token alone, at the end: tokens are the text's pieces of 1-3 bytes */
    if (tlen) {
        enum { NT = 48 };
        const char *piece[NT];
        size_t plen[NT];
        int nt = 0;
        for (size_t i = 0; i < tlen && nt < NT; i++)
            for (size_t l = 1; l <= 3 && i + l <= tlen && nt < NT; l++) piece[nt] = text + i, plen[nt++] = l;
        grammar_vocab *v = NULL;
        uint8_t allowed[NT];
        if (!grammar_vocab_create(piece, plen, nt, &v, &err)) {
            const int n = grammar_allowed(s, v, allowed, &err);
            int brute = 0, ok = n >= 0;
            for (int t = 0; t < nt && ok; t++) {
                grammar_state *one = NULL;
                if (grammar_state_clone(s, &one, &err)) break;
                const int r = grammar_accept(one, piece[t], plen[t], &err);
                grammar_state_free(one);
                if (r < 0) {
                    ok = 0;
                    break;
                }
                CHECK(allowed[t] == (r == 1));
                brute += r == 1;
            }
            if (ok) CHECK(n == brute);
            /* the memo's walk agrees, twice (the second from what the first remembered) */
            grammar_memo *memo = NULL;
            uint8_t memoed[NT];
            if (ok && !grammar_memo_create(g, &memo, &err)) {
                for (int twice = 0; twice < 2; twice++) {
                    const int m = grammar_allowed_memo(memo, s, v, memoed, &err);
                    if (m < 0) break;
                    CHECK(m == n && !memcmp(memoed, allowed, (size_t)nt));
                }
                grammar_memo_free(memo);
            }
            grammar_vocab_free(v);
        }
    }
    grammar_state_free(c);
    grammar_state_free(s);
    grammar_free(g);
    return 0;
}
