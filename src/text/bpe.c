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
 *
 * CLIP (tokenizer.ggml.pre = "clip"; Hugging Face's CLIPTokenizerFast, the
 * openai simple_tokenizer without ftfy and HTML unescaping):
 *   1. the text is put in NFC (unicode.c, with the composition pairs of
 *      unicode_compose.c) and lower-cased (full Unicode lower case: U+0130
 *      gives two code points, a capital sigma at the end of a word the
 *      final form);
 *   2. words are the matches of
 *        <\|startoftext\|>|<\|endoftext\|>|'s|'t|'re|'ve|'m|'ll|'d|\p{L}+|\p{N}|[^\s\p{L}\p{N}]+
 *      scanning left to right; whatever matches nothing (whitespace) is
 *      dropped, so collapsing whitespace runs needs no separate step;
 *      the words <|startoftext|> and <|endoftext|> (written in any case) are
 *      their tokens, as in openai's tokenizer;
 *   3. each word is spelled in byte-level symbols with "</w>" glued to its
 *      last symbol ("h" "e" "l" "l" "o</w>") and merged by rank as above;
 *      a final symbol missing from the vocabulary falls back to its single
 *      symbols (the last one with "</w>"), else to the unknown token.
 * Decoding turns a token's "</w>" into a space; the space of the sequence's
 * last word is dropped (tokenizer.c).
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
    if (pre_len == 4 && memcmp(pre, "clip", 4) == 0) {
        tok->clip = 1;
        tok->pre = PRETOK_GPT2; /* not used: CLIP cuts its words itself */
    } else if (pre_len == 0) {
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

/* ---- CLIP ---- */

#define EOW     "</w>"
#define EOW_LEN 4

/* Emits one final symbol of a CLIP word; eow: it is the word's last (ends with "</w>"). */
static wgml_status emit_symbol_clip(const wgml_tokenizer *tok, const char *s, size_t n, int eow, tok_vec *out,
                                    wgml_error *err) {
    int32_t id = tok_find(tok, s, n);
    if (id >= 0) return tok_vec_push(out, (uint32_t)id, err);
    size_t body = eow && n >= EOW_LEN ? n - EOW_LEN : n;
    for (size_t i = 0; i < body;) {
        int len = uni_char_len(s + i, body - i);
        int last = i + (size_t)len == body;
        id = last && eow ? tok_map_find(&tok->text_map, &tok->text, s + i, (size_t)len, -1, EOW, EOW_LEN)
                         : tok_find(tok, s + i, (size_t)len);
        i += (size_t)len;
        if (id < 0) id = tok->unk;
        if (id < 0) continue;
        wgml_status st = tok_vec_push(out, (uint32_t)id, err);
        if (st != WGML_OK) return st;
    }
    return WGML_OK;
}

static int starts_with_ascii(const uint32_t *c, size_t p, size_t e, const char *lit) {
    size_t k = 0;
    for (; lit[k]; k++)
        if (p + k >= e || c[p + k] != (uint32_t)(uint8_t)lit[k]) return 0;
    return (int)k;
}

/* The length of the CLIP word at p (code points), 0 when nothing matches there. */
static size_t clip_match(const uint32_t *c, const uint16_t *f, size_t p, size_t e) {
    size_t m;
    if (c[p] == '<') {
        if ((m = (size_t)starts_with_ascii(c, p, e, "<|startoftext|>"))) return m;
        if ((m = (size_t)starts_with_ascii(c, p, e, "<|endoftext|>"))) return m;
    }
    if (c[p] == '\'' && p + 1 < e) {
        uint32_t a = c[p + 1], b = p + 2 < e ? c[p + 2] : 0;
        if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
        if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    }
    if (f[p] & UNI_LETTER) {
        size_t q = p;
        while (q < e && (f[q] & UNI_LETTER))
            q++;
        return q - p;
    }
    if (f[p] & UNI_NUMBER) return 1;
    if (f[p] & UNI_SPACE) return 0;
    size_t q = p;
    while (q < e && !(f[q] & (UNI_SPACE | UNI_LETTER | UNI_NUMBER)))
        q++;
    return q - p;
}

wgml_status bpe_encode_clip(const wgml_tokenizer *tok, const char *text, size_t len, tok_vec *out, wgml_error *err) {
    tok_vec raw = {0}, src = {0}, low = {0}, offs = {0};
    tok_merge m = {0};
    uint16_t *flags = NULL;
    char *buf = NULL, *word = NULL;
    wgml_status st = tok_vec_reserve(&raw, len, err);
    for (size_t i = 0; st == WGML_OK && i < len;) {
        int n;
        raw.v[raw.n++] = uni_decode(text + i, len - i, &n);
        i += (size_t)n;
    }
    /* NFC */
    if (st == WGML_OK) st = tok_vec_reserve(&src, raw.n * UNI_NFD_MAX + 1, err);
    if (st == WGML_OK) src.n = uni_nfc(raw.v, raw.n, src.v);
    /* lower case (at most 2 code points each) */
    if (st == WGML_OK) st = tok_vec_reserve(&low, 2 * src.n + 1, err);
    if (st == WGML_OK && !(flags = wgml_malloc((2 * src.n + 1) * sizeof *flags)))
        st = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "tokenizer: out of memory for %zu bytes of text", len);
    if (st == WGML_OK) {
        for (size_t i = 0; i < src.n; i++) {
            uint32_t lc[2];
            int k = src.v[i] == 0x3A3 && uni_final_sigma(src.v, i, src.n) ? (lc[0] = 0x3C2, 1)
                                                                          : uni_lower_full(src.v[i], lc);
            for (int j = 0; j < k; j++)
                low.v[low.n++] = lc[j];
        }
        for (size_t i = 0; i < low.n; i++)
            flags[i] = (uint16_t)uni_flags(low.v[i]);
    }
    /* the lower-cased text as UTF-8, with each code point's offset */
    if (st == WGML_OK) st = tok_vec_reserve(&offs, low.n + 1, err);
    if (st == WGML_OK && !(buf = wgml_malloc(4 * low.n + 1)))
        st = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "tokenizer: out of memory for %zu bytes of text", len);
    size_t blen = 0;
    if (st == WGML_OK) {
        for (size_t i = 0; i < low.n; i++) {
            offs.v[offs.n++] = (uint32_t)blen;
            blen += (size_t)uni_encode(low.v[i], buf + blen);
        }
        offs.v[offs.n++] = (uint32_t)blen;
    }
    if (st == WGML_OK && !(word = wgml_malloc(2 * blen + EOW_LEN + 1)))
        st = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "tokenizer: out of memory for %zu bytes of text", len);
    for (size_t p = 0; st == WGML_OK && p < low.n;) {
        size_t w = clip_match(low.v, flags, p, low.n);
        if (!w) {
            p++;
            continue;
        }
        size_t b = offs.v[p], e = offs.v[p + w];
        p += w;
        if (buf[b] == '<' && ((e - b == 15 && !memcmp(buf + b, "<|startoftext|>", 15)) ||
                              (e - b == 13 && !memcmp(buf + b, "<|endoftext|>", 13)))) {
            int32_t id = tok_find(tok, buf + b, e - b); /* in any case: openai's tokenizer keeps these whole */
            if (id >= 0) {
                st = tok_vec_push(out, (uint32_t)id, err);
                continue;
            }
        }
        size_t n = bpe_spell(buf + b, e - b, word);
        memcpy(word + n, EOW, EOW_LEN);
        n += EOW_LEN;
        st = tok_merge_run_tail(&m, tok, word, n, EOW_LEN, bpe_pair, 0, err);
        for (int32_t i = m.n_sym ? 0 : -1; i >= 0 && st == WGML_OK; i = m.sym[i].next)
            st = emit_symbol_clip(tok, word + m.sym[i].start, m.sym[i].len, m.sym[i].next < 0, out, err);
    }
    wgml_free(word);
    wgml_free(buf);
    wgml_free(flags);
    tok_merge_free(&m);
    tok_vec_free(&offs);
    tok_vec_free(&low);
    tok_vec_free(&src);
    tok_vec_free(&raw);
    return st;
}
