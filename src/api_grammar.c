/*
 * api_grammar.c - the public grammar API (include/wgml.h): a compiled GBNF
 * grammar (text/grammar.h), made from GBNF text or a JSON Schema
 * (text/json_schema.h), and what ties one to a generation: the model's
 * vocabulary as the grammar's token filter sees it, made once per model.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "api_model.h"
#include "core/alloc.h"
#include "core/error.h"
#include "text/grammar.h"
#include "text/json_schema.h"
#include "text/tokenizer.h"
#include "wgml.h"

struct wgml_grammar {
    grammar *g;
    char *text; /* the GBNF */
};

static wgml_status make(char *text, size_t len, wgml_grammar **out, wgml_error *err) {
    wgml_grammar *gr = wgml_calloc(1, sizeof *gr);
    if (!gr) {
        wgml_free(text);
        return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory for a grammar");
    }
    gr->text = text;
    wgml_status st = grammar_parse(text, len, &gr->g, err);
    if (st) {
        wgml_grammar_free(gr);
        return st;
    }
    *out = gr;
    return WGML_OK;
}

wgml_status wgml_grammar_create(const char *gbnf, size_t len, wgml_grammar **out, wgml_error *err) {
    if (!out) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "wgml_grammar_create: out is NULL");
    *out = NULL;
    if (!gbnf && len) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "wgml_grammar_create: gbnf is NULL");
    if (len > GRAMMAR_MAX_TEXT)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "grammar: %zu bytes, at most %u", len, GRAMMAR_MAX_TEXT);
    char *text = wgml_malloc(len + 1);
    if (!text) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory for a grammar");
    if (len) memcpy(text, gbnf, len);
    text[len] = 0;
    return make(text, len, out, err);
}

wgml_status wgml_grammar_from_json_schema(const char *schema, size_t len, wgml_grammar **out, wgml_error *err) {
    if (!out) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "wgml_grammar_from_json_schema: out is NULL");
    *out = NULL;
    char *text;
    size_t n;
    wgml_status st = json_schema_to_gbnf(schema, schema ? len : 0, &text, &n, err);
    if (st) return st;
    return make(text, n, out, err);
}

wgml_status wgml_json_schema_to_gbnf(const char *schema, size_t len, const char *name, char **gbnf, wgml_error *err) {
    if (!gbnf) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "wgml_json_schema_to_gbnf: gbnf is NULL");
    *gbnf = NULL;
    char *text;
    size_t n;
    wgml_status st = json_schema_to_gbnf_named(schema, schema ? len : 0, name, &text, &n, err);
    if (st) return st;
    *gbnf = malloc(n + 1); /* the caller's free() */
    if (*gbnf) memcpy(*gbnf, text, n + 1);
    wgml_free(text);
    return *gbnf ? WGML_OK : wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory for a grammar");
}

const char *wgml_grammar_text(const wgml_grammar *gr) { return gr ? gr->text : NULL; }

void wgml_grammar_free(wgml_grammar *gr) {
    if (!gr) return;
    grammar_free(gr->g);
    wgml_free(gr->text);
    wgml_free(gr);
}

/* ---- the model's side ---- */

typedef struct wgml_grammar_vocab {
    grammar_vocab *v;
    int32_t *eog; /* the tokens that end a generation */
    int n_eog;
} wgml_grammar_vocab;

static void gvocab_free(wgml_grammar_vocab *gv) {
    if (!gv) return;
    grammar_vocab_free(gv->v);
    wgml_free(gv->eog);
    wgml_free(gv);
}

void wgml_model_grammar_vocab_free(wgml_model *m) {
    gvocab_free(atomic_exchange(&m->gvocab, NULL));
}

/* Each token's bytes as they follow other text (wgml_tokenizer_piece: control tokens are empty). */
static wgml_status gvocab_build(const wgml_model *m, wgml_grammar_vocab **out, wgml_error *err) {
    const int n = wgml_tokenizer_n_vocab(m->tok);
    wgml_grammar_vocab *gv = wgml_calloc(1, sizeof *gv);
    char **pieces = wgml_calloc(n ? (size_t)n : 1, sizeof *pieces);
    size_t *lens = wgml_calloc(n ? (size_t)n : 1, sizeof *lens);
    wgml_status st = WGML_OK;
    if (!gv || !pieces || !lens || !(gv->eog = wgml_calloc(n ? (size_t)n : 1, sizeof *gv->eog)))
        st = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory for the grammar's vocabulary");
    char buf[256];
    for (int t = 0; t < n && !st; t++) {
        if (wgml_tokenizer_is_eog(m->tok, t)) gv->eog[gv->n_eog++] = t;
        int len = wgml_tokenizer_piece(m->tok, t, buf, (int)sizeof buf);
        if (len <= 0) continue;
        if (len > (int)sizeof buf) { /* a long piece: render it whole */
            pieces[t] = wgml_malloc((size_t)len);
            if (!pieces[t]) {
                st = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory for the grammar's vocabulary");
                break;
            }
            wgml_tokenizer_piece(m->tok, t, pieces[t], len);
        } else if ((pieces[t] = wgml_malloc((size_t)len))) {
            memcpy(pieces[t], buf, (size_t)len);
        } else {
            st = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory for the grammar's vocabulary");
            break;
        }
        lens[t] = (size_t)len;
    }
    if (!st) st = grammar_vocab_create((const char *const *)pieces, lens, n, &gv->v, err);
    for (int t = 0; pieces && t < n; t++) wgml_free(pieces[t]);
    wgml_free(pieces);
    wgml_free(lens);
    if (st) {
        gvocab_free(gv);
        return st;
    }
    *out = gv;
    return WGML_OK;
}

wgml_status wgml_grammar_bind(wgml_model *m, const wgml_grammar *gr, const char *prefix, size_t len,
                              wgml_sampler *s, grammar_state **state, wgml_error *err) {
    *state = NULL;
    if (!m->tok) return wgml_fail(err, WGML_ERR_UNSUPPORTED, "a grammar needs a model with a vocabulary");
    wgml_grammar_vocab *gv = atomic_load(&m->gvocab);
    if (!gv) { /* made once; two threads at once: one keeps its copy */
        wgml_status st = gvocab_build(m, &gv, err);
        if (st) return st;
        wgml_grammar_vocab *expected = NULL;
        if (!atomic_compare_exchange_strong(&m->gvocab, &expected, gv)) {
            gvocab_free(gv);
            gv = expected;
        }
    }
    grammar_state *gs;
    wgml_status st = grammar_state_create(gr->g, &gs, err);
    if (st) return st;
    if (len) {
        const int r = grammar_accept(gs, prefix, len, err);
        if (r != 1) {
            grammar_state_free(gs);
            return r < 0 ? (err ? err->code : WGML_ERR_INVALID_ARGUMENT)
                         : wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "the grammar does not allow the text before it");
        }
    }
    wgml_sampler_set_grammar(s, gs, gv->v, gv->eog, gv->n_eog, err);
    *state = gs;
    return WGML_OK;
}
