/*
 * bpe.c - byte-level BPE (tokenizer.ggml.model = "gpt2").
 *
 *   1. The pre-tokenizer that tokenizer.ggml.pre names (pretok.c) cuts the
 *      text into words.
 *   2. Each word's bytes are written as GPT-2 "byte-level" symbols: every
 *      byte maps to one printable code point (the visible ASCII and Latin-1
 *      bytes to themselves, the other 68 to U+0100.. in byte order; a space
 *      becomes "Ġ"), which is how the vocabulary and merges spell bytes.
 *   3. Starting from those single symbols, the adjacent pair with the lowest
 *      rank in tokenizer.ggml.merges ("left right", rank = index) merges
 *      first, leftmost on ties (merge.c). Llama-3-style vocabularies skip
 *      the merges for a word that is a token as a whole.
 *   4. Each final symbol is its token; a symbol missing from the vocabulary
 *      (inconsistent merges) falls back to the tokens of its single bytes,
 *      else to the unknown token, else is dropped.
 * Invalid UTF-8 needs no special care: words are byte ranges and every byte
 * has a symbol.
 */
#include "core/alloc.h"
#include "core/error.h"
#include "text/tokenizer_impl.h"
#include "text/unicode.h"

#include <inttypes.h>
#include <string.h>

/* Bytes that stand for themselves: '!'..'~', 0xA1..0xAC, 0xAE..0xFF. */
static int self_mapped(unsigned b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE; }

uint32_t bpe_byte_to_cp(uint8_t b) {
    if (self_mapped(b)) return b;
    if (b <= 0x20) return 0x100 + b;          /* 0x00..0x20 -> U+0100..U+0120 */
    if (b <= 0xA0) return 0x121 + (b - 0x7F); /* 0x7F..0xA0 -> U+0121..U+0142 */
    return 0x143;                             /* 0xAD */
}

int bpe_cp_to_byte(uint32_t cp) {
    if (cp < 0x100) return self_mapped(cp) ? (int)cp : -1;
    if (cp <= 0x120) return (int)(cp - 0x100);
    if (cp <= 0x142) return (int)(cp - 0x121 + 0x7F);
    if (cp == 0x143) return 0xAD;
    return -1;
}

static int bpe_pair(const wgml_tokenizer *tok, const char *a, size_t na, const char *b, size_t nb, double *score) {
    if (na + 1 + nb > tok->merges.max_len) return 0;
    int32_t rank = tok_map_find(&tok->merge_map, &tok->merges, a, na, ' ', b, nb);
    if (rank < 0) return 0;
    *score = -(double)rank;
    return 1;
}

wgml_status bpe_load(wgml_tokenizer *tok, const gguf_file *f, const char *pre, size_t pre_len, wgml_error *err) {
    const char *name = gguf_name(f);
    if (pre_len == 0) {
        tok->pre = PRETOK_DEFAULT; /* no tokenizer.ggml.pre: what llama.cpp falls back to */
    } else {
        int ignore_merges = 0, add_bos = 0;
        int k = pretok_from_name(pre, pre_len, &ignore_merges, &add_bos);
        if (k < 0)
            return wgml_fail(err, WGML_ERR_UNSUPPORTED, "%s: unsupported pre-tokenizer '%.*s' (tokenizer.ggml.pre)",
                             name, (int)(pre_len > 64 ? 64 : pre_len), pre);
        tok->pre = k;
        tok->ignore_merges = ignore_merges;
        tok->add_bos = add_bos;
    }

    const gguf_value *merges;
    int r = gguf_get_arr(f, "tokenizer.ggml.merges", GGUF_TYPE_STRING, &merges, err);
    if (r < 0) return WGML_ERR_FORMAT;
    if (r == 0) return wgml_fail(err, WGML_ERR_FORMAT, "%s: BPE vocabulary without tokenizer.ggml.merges", name);
    if (merges->v.arr.n > INT32_MAX / 2)
        return wgml_fail(err, WGML_ERR_FORMAT, "%s: too many merges (%" PRIu64 ")", name, merges->v.arr.n);
    wgml_status st = tok_strtab_from_gguf(&tok->merges, merges, name, err);
    if (st == WGML_OK) st = tok_map_build(&tok->merge_map, &tok->merges, err);
    if (st != WGML_OK) return st;

    for (int b = 0; b < 256; b++) {
        char sym[4];
        int n = uni_encode(bpe_byte_to_cp((uint8_t)b), sym);
        tok->byte_token[b] = tok_find(tok, sym, (size_t)n);
    }
    return WGML_OK;
}

/* Emits the tokens of one final symbol of a word. */
static wgml_status emit_symbol(const wgml_tokenizer *tok, const char *s, size_t n, tok_vec *out, wgml_error *err) {
    int32_t id = tok_find(tok, s, n);
    if (id >= 0) return tok_vec_push(out, (uint32_t)id, err);
    for (size_t i = 0; i < n;) {
        int len;
        int b = bpe_cp_to_byte(uni_decode(s + i, n - i, &len));
        i += (size_t)len;
        id = b >= 0 ? tok->byte_token[b] : -1;
        if (id < 0) id = tok->unk;
        if (id < 0) continue;
        wgml_status st = tok_vec_push(out, (uint32_t)id, err);
        if (st != WGML_OK) return st;
    }
    return WGML_OK;
}

/* The byte-level spelling of text[0..n) into word (2 bytes per byte at most). */
size_t bpe_spell(const char *text, size_t n, char *word) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += (size_t)uni_encode(bpe_byte_to_cp((uint8_t)text[i]), word + k);
    return k;
}

wgml_status bpe_words(pretok_kind kind, const char *text, size_t len, tok_vec *cps, tok_vec *offs, tok_vec *pieces,
                      wgml_error *err) {
    wgml_status st = tok_vec_reserve(cps, len, err);
    if (st == WGML_OK) st = tok_vec_reserve(offs, len + 1, err);
    if (st) return st;
    for (size_t i = 0; i < len;) {
        int n;
        offs->v[offs->n++] = (uint32_t)i;
        cps->v[cps->n++] = uni_decode(text + i, len - i, &n);
        i += (size_t)n;
    }
    offs->v[offs->n++] = (uint32_t)len;
    return pretok_split(kind, cps->v, cps->n, pieces, err);
}

wgml_status bpe_encode(const wgml_tokenizer *tok, const char *text, size_t len, tok_vec *out, wgml_error *err) {
    tok_vec cps = {0}, offs = {0}, pieces = {0};
    tok_merge m = {0};
    char *word = NULL;
    wgml_status st = bpe_words((pretok_kind)tok->pre, text, len, &cps, &offs, &pieces, err);
    if (st == WGML_OK && !(word = wgml_malloc(len * 2 + 1)))
        st = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "tokenizer: out of memory for %zu bytes of text", len);
    for (size_t p = 0; st == WGML_OK && p + 1 < pieces.n; p += 2) {
        size_t b = offs.v[pieces.v[p]], e = offs.v[pieces.v[p + 1]];
        size_t n = bpe_spell(text + b, e - b, word);
        if (tok->ignore_merges) {
            int32_t id = tok_find(tok, word, n);
            if (id >= 0) {
                st = tok_vec_push(out, (uint32_t)id, err);
                continue;
            }
        }
        st = tok_merge_run(&m, tok, word, n, bpe_pair, 0, err);
        for (int32_t i = m.n_sym ? 0 : -1; i >= 0 && st == WGML_OK; i = m.sym[i].next)
            st = emit_symbol(tok, word + m.sym[i].start, m.sym[i].len, out, err);
    }
    wgml_free(word);
    tok_merge_free(&m);
    tok_vec_free(&pieces);
    tok_vec_free(&offs);
    tok_vec_free(&cps);
    return st;
}
