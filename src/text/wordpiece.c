/*
 * wordpiece.c - WordPiece tokenization (tokenizer.ggml.model = "bert").
 *
 * BERT's pipeline as Hugging Face's BertNormalizer, BertPreTokenizer and
 * WordPiece model run it:
 *   1. clean: drop NUL, U+FFFD and other control characters (category C
 *      except \t \n \r; invalid UTF-8 bytes count as such), turn whitespace
 *      into ' ';
 *   2. put spaces around CJK ideographs, so each is a word of its own;
 *   3. strip accents: canonical decomposition (NFD), then drop non-spacing
 *      marks (Mn) - tokenizer.ggml.normalizer.strip_accents, default = lowercase;
 *   4. lower-case (tokenizer.ggml.normalizer.lowercase, default on);
 *   5. split on whitespace, and make every punctuation character (Unicode P*
 *      or ASCII punctuation such as $ + < = > ^ ` | ~) a word of its own;
 *   6. each word: greedy longest match first, continuations marked. GGUF
 *      files (llama.cpp's converter) spell a word-initial piece "▁word" and a
 *      continuation bare "ing"; a vocabulary with no "▁" pieces but "##"
 *      pieces is taken to be in BERT's own spelling, "word" and "##ing".
 *      A word longer than 100 characters, or with a remainder no piece
 *      matches, is [UNK].
 */
#include "core/alloc.h"
#include "core/error.h"
#include "text/tokenizer_impl.h"
#include "text/unicode.h"

#include <string.h>

#define MAX_WORD_CHARS 100

wgml_status wpm_load(wgml_tokenizer *tok, const gguf_file *f, wgml_error *err) {
    tok->lowercase = 1;
    if (gguf_get_bool(f, "tokenizer.ggml.normalizer.lowercase", &tok->lowercase, err) < 0) return WGML_ERR_FORMAT;
    tok->strip_accents = tok->lowercase;
    if (gguf_get_bool(f, "tokenizer.ggml.normalizer.strip_accents", &tok->strip_accents, err) < 0)
        return WGML_ERR_FORMAT;
    if (tok->eos < 0) tok->eos = tok->sep;
    int n_space = 0, n_hash = 0;
    for (int32_t i = 0; i < tok->n_vocab; i++) {
        const char *s = tok->text.blob + tok->text.off[i];
        n_space += tok->text.len[i] > 3 && memcmp(s, "\xE2\x96\x81", 3) == 0;
        n_hash += tok->text.len[i] > 2 && memcmp(s, "##", 2) == 0;
    }
    tok->wpm_hash_prefix = n_space == 0 && n_hash > 0;
    return WGML_OK;
}

/* The ranges BERT treats as Chinese characters (as Hugging Face's code has them). */
static int is_cjk(uint32_t c) {
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
           (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

static int is_punct(uint32_t c) {
    if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126)) return 1;
    return (uni_flags(c) & UNI_PUNCT) != 0;
}

static int is_ws(uint32_t c) { return c == '\t' || c == '\n' || c == '\r' || uni_is_space(c); }

/* Steps 1-4: text -> normalized code points. */
static wgml_status normalize(const wgml_tokenizer *tok, const char *text, size_t len, tok_vec *out, wgml_error *err) {
    wgml_status st = tok_vec_reserve(out, len + 16, err);
    for (size_t i = 0; i < len && st == WGML_OK;) {
        int n;
        uint32_t c = uni_decode(text + i, len - i, &n);
        i += (size_t)n;
        if (c == 0 || c == 0xFFFD || ((uni_flags(c) & UNI_OTHER) && c != '\t' && c != '\n' && c != '\r')) continue;
        if (is_ws(c)) {
            st = tok_vec_push(out, ' ', err);
            continue;
        }
        int cjk = is_cjk(c);
        if (cjk) st = tok_vec_push(out, ' ', err);
        uint32_t d[UNI_NFD_MAX];
        int nd = tok->strip_accents ? uni_decompose(c, d) : (d[0] = c, 1);
        for (int k = 0; k < nd && st == WGML_OK; k++)
            st = tok_vec_push(out, d[k], err);
        if (cjk && st == WGML_OK) st = tok_vec_push(out, ' ', err);
    }
    if (st != WGML_OK) return st;
    if (tok->strip_accents) uni_canonical_order(out->v, out->n);
    size_t k = 0;
    for (size_t i = 0; i < out->n; i++) {
        uint32_t c = out->v[i];
        if (tok->strip_accents && (uni_flags(c) & UNI_MARK_NONSPACING)) continue;
        out->v[k++] = tok->lowercase ? uni_tolower(c) : c;
    }
    out->n = k;
    return WGML_OK;
}

static wgml_status push_unknown(const wgml_tokenizer *tok, tok_vec *out, wgml_error *err) {
    if (tok->unk < 0)
        return wgml_fail(err, WGML_ERR_TOKENIZER, "tokenizer: a word has no pieces and there is no [UNK]");
    return tok_vec_push(out, (uint32_t)tok->unk, err);
}

/* Step 6 for the word cps[0..n). */
static wgml_status encode_word(const wgml_tokenizer *tok, const uint32_t *cps, size_t n, char *buf, uint32_t *offs,
                               tok_vec *out, wgml_error *err) {
    if (n > MAX_WORD_CHARS) return push_unknown(tok, out, err);
    /* buf = "▁" + UTF-8 of the word; offs[i] = byte offset of character i in buf (offs[0] = 0 covers the "▁") */
    memcpy(buf, "\xE2\x96\x81", 3);
    size_t pos = 3, skip = tok->wpm_hash_prefix ? 3 : 0; /* "##" spelling: no "▁" on the first piece */
    offs[0] = 0;
    for (size_t i = 0; i < n; i++) {
        pos += (size_t)uni_encode(cps[i], buf + pos);
        offs[i + 1] = (uint32_t)pos;
    }
    size_t first = out->n, start = 0;
    while (start < n) {
        size_t end = n;
        int32_t id = -1;
        for (; end > start; end--) {
            size_t b = offs[start] + (start == 0 ? skip : 0), len = offs[end] - b;
            if (len > tok->text.max_len) continue;
            if (start > 0 && tok->wpm_hash_prefix)
                id = tok_map_find(&tok->text_map, &tok->text, "##", 2, -1, buf + b, len);
            else
                id = tok_find(tok, buf + b, len);
            if (id >= 0) break;
        }
        if (id < 0) {
            out->n = first; /* a part no piece matches: the whole word is unknown */
            return push_unknown(tok, out, err);
        }
        wgml_status st = tok_vec_push(out, (uint32_t)id, err);
        if (st != WGML_OK) return st;
        start = end;
    }
    return WGML_OK;
}

wgml_status wpm_encode(const wgml_tokenizer *tok, const char *text, size_t len, tok_vec *out, wgml_error *err) {
    tok_vec cps = {0};
    char buf[3 + 4 * MAX_WORD_CHARS];
    uint32_t offs[MAX_WORD_CHARS + 1];
    wgml_status st = normalize(tok, text, len, &cps, err);
    size_t w = 0; /* start of the current word */
    for (size_t i = 0; i <= cps.n && st == WGML_OK; i++) {
        int end = i == cps.n || is_ws(cps.v[i]);
        int punct = !end && is_punct(cps.v[i]);
        if (!end && !punct) continue;
        if (i > w) st = encode_word(tok, cps.v + w, i - w, buf, offs, out, err);
        if (punct && st == WGML_OK) st = encode_word(tok, cps.v + i, 1, buf, offs, out, err);
        w = i + 1;
    }
    tok_vec_free(&cps);
    return st;
}
