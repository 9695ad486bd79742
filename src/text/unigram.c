/*
 * unigram.c - SentencePiece's unigram model (tokenizer.ggml.model = "t5").
 *
 * Normalization (ugm_normalize, on the whole text before special tokens are
 * looked for):
 *   - tokenizer.ggml.pre = "siglip": SigLIP's canonicalization as Hugging
 *     Face's SiglipTokenizer does it: lower-case (Python's str.lower(): full
 *     lower case with the final-sigma rule),
 *     remove the ASCII punctuation of Python's string.punctuation, collapse
 *     runs of whitespace (Python's \s: White_Space and U+001C..U+001F) to
 *     one space, strip both ends;
 *   - tokenizer.ggml.normalizer "nmt_nfkc" (SentencePiece's default, what its
 *     precompiled charsmap holds) or "nfkc": NFKC from our Unicode tables
 *     (text/unicode.h), nmt_nfkc's extra spaces and kept full-width tilde;
 *     absent or "identity": none;
 *   - remove_extra_whitespaces (tokenizer.ggml.remove_extra_whitespaces,
 *     default on): leading and trailing whitespace dropped, inner runs one
 *     space. Whitespace is Unicode White_Space; without the option, only
 *     ' ' counts as a space.
 * Encoding (ugm_encode, per fragment between special tokens): spaces become
 * "▁" (U+2581), a "▁" goes in front of the fragment that starts the text
 * (tokenizer.ggml.add_space_prefix, default on), then the Viterbi
 * segmentation: the pieces the text can be cut into (normal and user-defined
 * pieces; control, unknown, unused and byte pieces never form from text)
 * with the highest sum of scores, in float as SentencePiece sums them. At a
 * position where no piece of exactly one character starts, that character
 * may also be an unknown piece scored the lowest normal score - 10. Ties keep
 * the first candidate met: starts in text order, shorter pieces first, the
 * unknown last. Consecutive unknown characters become one unknown token;
 * with byte pieces (<0xXX>) in the vocabulary, an unknown character is its
 * bytes instead (byte fallback).
 *
 * The pieces are found through a byte trie: from each reachable position the
 * walk follows the text's bytes and stops where no piece continues, so a
 * text of n characters costs n times the longest match.
 */
#include "core/alloc.h"
#include "core/error.h"
#include "text/tokenizer_impl.h"
#include "text/unicode.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef struct ugm_node {
    int32_t child;   /* first child, -1 for none */
    int32_t sibling; /* next child of the same parent, -1 for none */
    int32_t token;   /* the piece ending here, -1 for none */
    uint8_t byte;
} ugm_node;

struct ugm_trie {
    ugm_node *node;
    size_t n, cap;
    int32_t root[256]; /* node of each first byte, -1 for none */
};

static int formable(uint8_t type) { return type == TOK_NORMAL || type == TOK_USER_DEFINED; }

static wgml_status trie_add(struct ugm_trie *t, const char *s, size_t n, int32_t token, wgml_error *err) {
    int32_t parent = -1; /* -1: the root */
    for (size_t i = 0;; i++) {
        uint8_t b = (uint8_t)s[i];
        int32_t first = parent < 0 ? t->root[b] : t->node[parent].child, k = first;
        while (k >= 0 && t->node[k].byte != b)
            k = t->node[k].sibling;
        if (k < 0) {
            if (t->n == t->cap) {
                size_t cap = t->cap ? 2 * t->cap : 1024;
                if (cap > INT32_MAX) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "tokenizer: too many piece bytes");
                ugm_node *p = wgml_realloc(t->node, cap * sizeof *p);
                if (!p) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "tokenizer: out of memory for the piece trie");
                t->node = p, t->cap = cap;
            }
            k = (int32_t)t->n++;
            t->node[k] = (ugm_node){-1, parent < 0 ? -1 : first, -1, b};
            if (parent < 0)
                t->root[b] = k;
            else
                t->node[parent].child = k;
        }
        if (i + 1 == n) {
            if (t->node[k].token < 0) t->node[k].token = token; /* duplicates: the first one wins */
            return WGML_OK;
        }
        parent = k;
    }
}

wgml_status ugm_load(wgml_tokenizer *tok, const gguf_file *f, const char *pre, size_t pre_len, wgml_error *err) {
    const char *name = gguf_name(f);
    if (pre_len == 6 && memcmp(pre, "siglip", 6) == 0)
        tok->siglip = 1;
    else if (pre_len && !(pre_len == 7 && memcmp(pre, "default", 7) == 0))
        return wgml_fail(err, WGML_ERR_UNSUPPORTED,
                         "%s: unsupported pre-tokenizer '%.*s' for a unigram vocabulary "
                         "(tokenizer.ggml.pre)",
                         name, (int)(pre_len > 64 ? 64 : pre_len), pre);
    tok->add_space_prefix = 1;
    tok->remove_extra_ws = 1;
    /* the normalizer: "nmt_nfkc" (SentencePiece's default), "nfkc", or none ("identity", absent) */
    gguf_str norm = {0};
    int has_norm = gguf_get_str(f, "tokenizer.ggml.normalizer", &norm, err);
    if (has_norm < 0) return WGML_ERR_FORMAT;
    if (has_norm == 1) {
        if (norm.len == 8 && !memcmp(norm.ptr, "nmt_nfkc", 8))
            tok->nfkc = 2;
        else if (norm.len == 4 && !memcmp(norm.ptr, "nfkc", 4))
            tok->nfkc = 1;
        else if (!(norm.len == 8 && !memcmp(norm.ptr, "identity", 8)))
            return wgml_fail(err, WGML_ERR_UNSUPPORTED,
                             "%s: tokenizer.ggml.normalizer '%.*s' is not supported (nmt_nfkc, nfkc, identity are)",
                             name, (int)(norm.len > 64 ? 64 : norm.len), norm.ptr);
    }
    if (gguf_get_bool(f, "tokenizer.ggml.add_space_prefix", &tok->add_space_prefix, err) < 0 ||
        gguf_get_bool(f, "tokenizer.ggml.remove_extra_whitespaces", &tok->remove_extra_ws, err) < 0)
        return WGML_ERR_FORMAT;
    if (!gguf_find_kv(f, "tokenizer.ggml.scores"))
        return wgml_fail(err, WGML_ERR_FORMAT, "%s: a unigram vocabulary without tokenizer.ggml.scores", name);

    struct ugm_trie *t = wgml_calloc(1, sizeof *t);
    if (!t) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "%s: out of memory", name);
    tok->trie = t;
    for (int b = 0; b < 256; b++)
        t->root[b] = -1;
    float lowest = FLT_MAX;
    for (int32_t i = 0; i < tok->n_vocab; i++) {
        if (!isfinite(tok->score[i]))
            return wgml_fail(err, WGML_ERR_FORMAT, "%s: token %d has a score that is not finite", name, i);
        if (tok->type[i] == TOK_NORMAL && tok->score[i] < lowest) lowest = tok->score[i];
        if (!formable(tok->type[i]) || tok->text.len[i] == 0) continue;
        wgml_status st = trie_add(t, tok->text.blob + tok->text.off[i], tok->text.len[i], i, err);
        if (st != WGML_OK) return st;
    }
    tok->unk_score = (lowest == FLT_MAX ? 0.0f : lowest) - 10.0f;
    for (int b = 0; b < 256; b++) {
        char piece[8];
        snprintf(piece, sizeof piece, "<0x%02X>", b);
        int32_t id = tok_find(tok, piece, 6);
        if (id < 0 || tok->type[id] != TOK_BYTE) continue;
        tok->byte_token[b] = id;
        tok->has_byte_tokens = 1;
    }
    return WGML_OK;
}

void ugm_free(wgml_tokenizer *tok) {
    if (!tok->trie) return;
    wgml_free(tok->trie->node);
    wgml_free(tok->trie);
    tok->trie = NULL;
}

/* ---- normalization ---- */

static int ascii_punct(uint32_t c) {
    return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) || (c >= 0x7B && c <= 0x7E);
}

wgml_status ugm_normalize(const wgml_tokenizer *tok, const char *text, size_t len, char **out, size_t *out_len,
                          wgml_error *err) {
    tok_vec cps = {0}, a = {0}, b = {0};
    char *buf = NULL;
    wgml_status st = tok_vec_reserve(&cps, len + 1, err);
    for (size_t i = 0; !st && i < len;) {
        int k;
        cps.v[cps.n++] = uni_decode(text + i, len - i, &k);
        i += (size_t)k;
    }
    /* 1. SigLIP's canonicalization (lower case, no ASCII punctuation, \s+ -> one space, stripped) */
    const tok_vec *cur = &cps;
    if (!st && tok->siglip) {
        /* full lower-casing can make two code points of one (U+0130 -> "i" U+0307) */
        if ((st = tok_vec_reserve(&a, 2 * cps.n + 1, err))) goto done;
        int pending_space = 0;
        for (size_t i = 0; i < cps.n; i++) {
            uint32_t c = cps.v[i];
            if (uni_is_space(c) || (c >= 0x1C && c <= 0x1F)) {
                pending_space = 1;
                continue;
            }
            if (ascii_punct(c)) continue; /* removed: the spaces around it still join */
            if (pending_space && a.n > 0) a.v[a.n++] = ' ';
            pending_space = 0;
            uint32_t lc[2] = {c, 0};
            int m = c == 0x3A3 && uni_final_sigma(cps.v, i, cps.n) ? (lc[0] = 0x3C2, 1) : uni_lower_full(c, lc);
            for (int j = 0; j < m; j++) a.v[a.n++] = lc[j];
        }
        cur = &a;
    }
    /* 2. NFKC, as the SentencePiece model's normalizer (tokenizer.ggml.normalizer) */
    if (!st && tok->nfkc) {
        if ((st = tok_vec_reserve(&b, cur->n * UNI_NFKD_MAX + 1, err))) goto done;
        b.n = uni_nfkc(cur->v, cur->n, b.v, tok->nfkc == 2);
        cur = &b;
    }
    /* 3. remove_extra_whitespaces: strip, one space for each run; then UTF-8 */
    if (!st && !(buf = wgml_malloc(4 * cur->n + 1)))
        st = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "tokenizer: out of memory for %zu bytes of text", len);
    if (!st) {
        size_t n = 0;
        int pending_space = 0; /* whitespace seen since the last character written */
        const int collapse = tok->remove_extra_ws || tok->siglip;
        for (size_t i = 0; i < cur->n; i++) {
            uint32_t c = cur->v[i];
            if (collapse && uni_is_space(c)) {
                pending_space = 1;
                continue;
            }
            if (pending_space && n > 0) buf[n++] = ' ';
            pending_space = 0;
            n += (size_t)uni_encode(c, buf + n);
        }
        buf[n] = '\0';
        *out = buf;
        *out_len = n;
    }
done:
    tok_vec_free(&cps);
    tok_vec_free(&a);
    tok_vec_free(&b);
    return st;
}

/* ---- encoding ---- */

typedef struct lattice {
    float *best;   /* best score of a path to each byte position */
    int32_t *from; /* its last piece's start, -1 unreachable */
    int32_t *id;   /* its last piece, -1 for an unknown character */
} lattice;

static wgml_status push_unknown(const wgml_tokenizer *tok, const char *s, size_t n, int prev_unk, tok_vec *out,
                                wgml_error *err) {
    if (tok->has_byte_tokens) return tok_push_bytes(tok, s, n, out, err);
    if (tok->unk < 0) {
        int len;
        return wgml_fail(err, WGML_ERR_TOKENIZER,
                         "tokenizer: no piece for U+%04X and the vocabulary has no unknown token",
                         uni_decode(s, n, &len));
    }
    if (prev_unk) return WGML_OK; /* joins the unknown before it */
    return tok_vec_push(out, (uint32_t)tok->unk, err);
}

wgml_status ugm_encode(const wgml_tokenizer *tok, const char *text, size_t len, int space_prefix, tok_vec *out,
                       wgml_error *err) {
    static const char SPACE[] = "\xE2\x96\x81"; /* U+2581 */
    if (len > (SIZE_MAX - 3) / 3 || len * 3 + 3 >= INT32_MAX)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "tokenizer: text too long");
    char *buf = wgml_malloc(len * 3 + 4);
    if (!buf) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "tokenizer: out of memory for %zu bytes of text", len);
    size_t n = 0;
    if (space_prefix && len > 0) memcpy(buf, SPACE, 3), n = 3;
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ')
            memcpy(buf + n, SPACE, 3), n += 3;
        else
            buf[n++] = text[i];
    }

    lattice L = {wgml_malloc((n + 1) * sizeof(float)), wgml_malloc((n + 1) * sizeof(int32_t)),
                 wgml_malloc((n + 1) * sizeof(int32_t))};
    tok_vec path = {0};
    wgml_status st = WGML_OK;
    if (!L.best || !L.from || !L.id)
        st = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "tokenizer: out of memory for %zu bytes of text", len);
    const struct ugm_trie *t = tok->trie;
    if (st == WGML_OK) {
        for (size_t i = 0; i <= n; i++)
            L.from[i] = -1, L.best[i] = 0.0f, L.id[i] = -1;
        L.from[0] = 0;
    }
    for (size_t i = 0; st == WGML_OK && i < n; i++) {
        if (L.from[i] < 0) continue; /* unreachable: inside a character */
        const float base = L.best[i];
        const size_t clen = (size_t)uni_char_len(buf + i, n - i);
        int single = 0;
        int32_t k = t->root[(uint8_t)buf[i]];
        for (size_t j = i; k >= 0;) {
            const ugm_node *nd = &t->node[k];
            j++;
            if (nd->token >= 0) {
                if (j - i == clen) single = 1;
                float sc = base + tok->score[nd->token];
                if (L.from[j] < 0 || sc > L.best[j]) L.best[j] = sc, L.from[j] = (int32_t)i, L.id[j] = nd->token;
            }
            if (j >= n) break;
            uint8_t b = (uint8_t)buf[j];
            for (k = nd->child; k >= 0 && t->node[k].byte != b; k = t->node[k].sibling) {}
        }
        if (!single) {
            float sc = base + tok->unk_score;
            size_t j = i + clen;
            if (L.from[j] < 0 || sc > L.best[j]) L.best[j] = sc, L.from[j] = (int32_t)i, L.id[j] = -1;
        }
    }
    /* back from the end, then forwards */
    for (size_t j = n; st == WGML_OK && j > 0; j = (size_t)L.from[j])
        st = tok_vec_push(&path, (uint32_t)j, err);
    int prev_unk = 0;
    for (size_t p = path.n; st == WGML_OK && p > 0; p--) {
        size_t e = path.v[p - 1], b = (size_t)L.from[e];
        if (L.id[e] >= 0) {
            st = tok_vec_push(out, (uint32_t)L.id[e], err);
            prev_unk = 0;
        } else {
            st = push_unknown(tok, buf + b, e - b, prev_unk, out, err);
            prev_unk = 1;
        }
    }
    tok_vec_free(&path);
    wgml_free(L.best);
    wgml_free(L.from);
    wgml_free(L.id);
    wgml_free(buf);
    return st;
}
