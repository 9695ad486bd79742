/*
 * spm.c - SentencePiece tokenization (tokenizer.ggml.model = "llama").
 *
 * The SentencePiece BPE algorithm as its reference implementation runs it:
 *   1. spaces become U+2581 ("▁"), and a "▁" goes in front of the text
 *      (the dummy prefix; tokenizer.ggml.add_space_prefix, default on);
 *   2. starting from single characters, the adjacent pair whose concatenation
 *      is a vocabulary piece with the highest score merges first (leftmost on
 *      ties), until no pair is a piece. Normal, user-defined and unused pieces
 *      take part; control, unknown and byte pieces never form from text;
 *   3. each final symbol is output as its piece. An "unused" piece may not be
 *      output, so it is split back into the two symbols it was merged from.
 *      A symbol that is no piece (a character the vocabulary lacks, or an
 *      invalid UTF-8 byte) falls back to its bytes as <0xXX> tokens, or to the
 *      unknown token when the vocabulary has no byte tokens.
 */
#include "core/alloc.h"
#include "core/error.h"
#include "text/tokenizer_impl.h"
#include "text/unicode.h"

#include <stdio.h>
#include <string.h>

static int mergeable(uint8_t type) { return type == TOK_NORMAL || type == TOK_USER_DEFINED || type == TOK_UNUSED; }

static int spm_pair(const wgml_tokenizer *tok, const char *a, size_t na, const char *b, size_t nb, double *score) {
    (void)b; /* b follows a in the same buffer */
    if (na + nb > tok->text.max_len) return 0;
    int32_t id = tok_find(tok, a, na + nb);
    if (id < 0 || !mergeable(tok->type[id])) return 0;
    *score = tok->score[id];
    return 1;
}

wgml_status spm_load(wgml_tokenizer *tok, const gguf_file *f, wgml_error *err) {
    tok->add_space_prefix = 1;
    if (gguf_get_bool(f, "tokenizer.ggml.add_space_prefix", &tok->add_space_prefix, err) < 0) return WGML_ERR_FORMAT;
    for (int b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        int32_t id = tok_find(tok, name, 6);
        if (id < 0) continue;
        if (!tok->has_types) tok->type[id] = TOK_BYTE; /* no token types: <0xXX> pieces are still bytes */
        if (tok->type[id] != TOK_BYTE) continue;
        tok->byte_token[b] = id;
        tok->has_byte_tokens = 1;
    }
    for (int32_t i = 0; i < tok->n_vocab && !tok->has_unused; i++)
        tok->has_unused = tok->type[i] == TOK_UNUSED;
    return WGML_OK;
}

/* The <0xXX> tokens of bytes s[0..n) (unknown where one is missing), for SentencePiece's byte
 * fallback (spm.c, unigram.c). */
wgml_status tok_push_bytes(const wgml_tokenizer *tok, const char *s, size_t n, tok_vec *out, wgml_error *err) {
    for (size_t i = 0; i < n; i++) {
        int32_t id = tok->byte_token[(uint8_t)s[i]];
        if (id < 0) id = tok->unk;
        if (id < 0)
            return wgml_fail(err, WGML_ERR_TOKENIZER, "tokenizer: no token <0x%02X> and no unknown token",
                             (unsigned)(uint8_t)s[i]);
        wgml_status st = tok_vec_push(out, (uint32_t)id, err);
        if (st != WGML_OK) return st;
    }
    return WGML_OK;
}

/* Output for a symbol that is no usable piece: its bytes, or unknown. */
static wgml_status fallback(const wgml_tokenizer *tok, const char *s, size_t n, tok_vec *out, wgml_error *err) {
    if (!tok->has_byte_tokens) {
        if (tok->unk < 0) {
            int len;
            uint32_t cp = uni_decode(s, n, &len);
            return wgml_fail(err, WGML_ERR_TOKENIZER,
                             "tokenizer: no piece for U+%04X and the vocabulary has no unknown or byte tokens", cp);
        }
        return tok_vec_push(out, (uint32_t)tok->unk, err);
    }
    return tok_push_bytes(tok, s, n, out, err);
}

static int outputable(uint8_t type) { return type == TOK_NORMAL || type == TOK_USER_DEFINED; }

/* Outputs a merge tree node, splitting unused pieces (explicit stack). */
static wgml_status emit_node(const wgml_tokenizer *tok, const tok_merge *m, const char *text, int32_t root,
                             tok_vec *stack, tok_vec *out, wgml_error *err) {
    stack->n = 0;
    wgml_status st = tok_vec_push(stack, (uint32_t)root, err);
    while (st == WGML_OK && stack->n > 0) {
        const tok_node *nd = &m->node[stack->v[--stack->n]];
        int32_t id = tok_find(tok, text + nd->start, nd->len);
        if (id >= 0 && outputable(tok->type[id])) {
            st = tok_vec_push(out, (uint32_t)id, err);
        } else if (nd->left >= 0) {
            st = tok_vec_push(stack, (uint32_t)nd->right, err);
            if (st == WGML_OK) st = tok_vec_push(stack, (uint32_t)nd->left, err);
        } else {
            st = fallback(tok, text + nd->start, nd->len, out, err);
        }
    }
    return st;
}

wgml_status spm_encode(const wgml_tokenizer *tok, const char *text, size_t len, int space_prefix, tok_vec *out,
                       wgml_error *err) {
    static const char SPACE[] = "\xE2\x96\x81"; /* U+2581 */
    if (len > (SIZE_MAX - 3) / 3) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "tokenizer: text too long");
    char *buf = wgml_malloc(len * 3 + 3);
    if (!buf) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "tokenizer: out of memory for %zu bytes of text", len);
    size_t n = 0;
    if (space_prefix) memcpy(buf, SPACE, 3), n = 3;
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ')
            memcpy(buf + n, SPACE, 3), n += 3;
        else
            buf[n++] = text[i];
    }

    tok_merge m = {0};
    tok_vec stack = {0};
    wgml_status st = tok_merge_run(&m, tok, buf, n, spm_pair, tok->has_unused, err);
    for (int32_t i = m.n_sym ? 0 : -1; i >= 0 && st == WGML_OK; i = m.sym[i].next) {
        const tok_sym *s = &m.sym[i];
        if (tok->has_unused) {
            st = emit_node(tok, &m, buf, s->node, &stack, out, err);
            continue;
        }
        int32_t id = tok_find(tok, buf + s->start, s->len);
        if (id >= 0 && outputable(tok->type[id]))
            st = tok_vec_push(out, (uint32_t)id, err);
        else
            st = fallback(tok, buf + s->start, s->len, out, err);
    }
    tok_vec_free(&stack);
    tok_merge_free(&m);
    wgml_free(buf);
    return st;
}
