/*
 * whisper_tokenizer.c - Whisper's tokenizer (whisper_tokenizer.h).
 *
 * Encoding reuses the text module's pieces (text/tokenizer_impl.h): GPT-2's
 * pre-tokenizer (pretok.c), the GPT-2 byte <-> symbol mapping and the bigram
 * merge engine (merge.c). The merge engine works on characters, so each
 * piece is spelled in GPT-2's byte-level symbols (one character per byte)
 * and the vocabulary is kept in that spelling too (a string table and hash
 * map, as the text tokenizer keeps its own): a pair merges when the
 * spelling of its concatenation is a token, lowest id (= rank) first - what
 * tiktoken's byte-pair merge does over the raw bytes.
 */
#include "model/whisper/whisper_tokenizer.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"
#include "text/tokenizer_impl.h"
#include "text/unicode.h"

struct whisper_tokenizer {
    whisper_specials sp;
    tok_strtab raw; /* each token's bytes, index = id */
    /* the merge engine's view: tokens spelled in byte-level symbols, with their
     * map (only text and text_map are set) */
    wgml_tokenizer spelled;
    int32_t *non_speech, *suppress;
    int n_non_speech, n_suppress;
};

/* ---- tables ---- */

/* A string table of the n tokens, raw or spelled. */
static wgml_status table(tok_strtab *t, const char *const *tokens, const uint64_t *lens, int n, int spelled,
                         const char *name, wgml_error *err) {
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        uint64_t len = lens[i] * (spelled ? 2 : 1);
        if (lens[i] >= UINT32_MAX / 2 || total + len + 1 >= UINT32_MAX)
            return wgml_fail(err, WGML_ERR_FORMAT, "%s: token %d makes the vocabulary larger than 4 GiB", name, i);
        total += (size_t)len + 1;
    }
    t->blob = wgml_malloc(total ? total : 1);
    t->off = wgml_calloc(n ? (size_t)n : 1, sizeof *t->off);
    t->len = wgml_calloc(n ? (size_t)n : 1, sizeof *t->len);
    if (!t->blob || !t->off || !t->len)
        return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "%s: out of memory for %d tokens", name, n);
    size_t pos = 0;
    for (int i = 0; i < n; i++) {
        size_t len = (size_t)lens[i];
        if (spelled)
            len = bpe_spell(tokens[i], len, t->blob + pos);
        else if (len)
            memcpy(t->blob + pos, tokens[i], len);
        t->blob[pos + len] = '\0';
        t->off[i] = (uint32_t)pos;
        t->len[i] = (uint32_t)len;
        if (len > t->max_len) t->max_len = len;
        pos += len + 1;
    }
    t->n = n;
    return WGML_OK;
}

/* ---- encoding ---- */

/* Two adjacent symbols (a's bytes run on into b's) merge when their
 * concatenation is a token; the lower its id, the sooner. */
static int rank_pair(const wgml_tokenizer *tok, const char *a, size_t na, const char *b, size_t nb, double *score) {
    if (na + nb > tok->text.max_len || b != a + na) return 0;
    int32_t id = tok_find(tok, a, na + nb);
    if (id < 0) return 0;
    *score = -(double)id;
    return 1;
}

static wgml_status encode_vec(const whisper_tokenizer *t, const char *text, size_t len, tok_vec *out,
                              wgml_error *err) {
    tok_vec cps = {0}, offs = {0}, pieces = {0};
    tok_merge m = {0};
    char *word = NULL;
    wgml_status st = WGML_OK;
    if (len >= INT32_MAX / 2) st = wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "whisper tokenizer: text of %zu bytes", len);
    if (!st) st = bpe_words(PRETOK_GPT2, text, len, &cps, &offs, &pieces, err);
    if (!st && !(word = wgml_malloc(len * 2 + 1)))
        st = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "whisper tokenizer: out of memory for %zu bytes of text", len);
    const wgml_tokenizer *sp = &t->spelled;
    for (size_t p = 0; !st && p + 1 < pieces.n; p += 2) {
        size_t b = offs.v[pieces.v[p]], e = offs.v[pieces.v[p + 1]];
        size_t n = bpe_spell(text + b, e - b, word);
        int32_t id = tok_find(sp, word, n);
        if (id >= 0) { /* a piece that is a token is that token */
            st = tok_vec_push(out, (uint32_t)id, err);
            continue;
        }
        st = tok_merge_run(&m, sp, word, n, rank_pair, 0, err);
        for (int32_t i = m.n_sym ? 0 : -1; i >= 0 && !st; i = m.sym[i].next) {
            id = tok_find(sp, word + m.sym[i].start, m.sym[i].len);
            /* every byte is a token (checked at load) and merges make tokens */
            st = id >= 0 ? tok_vec_push(out, (uint32_t)id, err)
                         : wgml_fail(err, WGML_ERR_TOKENIZER, "whisper tokenizer: a piece with no token");
        }
    }
    wgml_free(word);
    tok_merge_free(&m);
    tok_vec_free(&pieces);
    tok_vec_free(&offs);
    tok_vec_free(&cps);
    return st;
}

int whisper_text_encode(const whisper_tokenizer *t, const char *text, size_t len, int32_t *out, int cap, wgml_error *err) {
    if (!t || (!text && len)) {
        wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "whisper_text_encode: NULL argument");
        return -1;
    }
    tok_vec v = {0};
    wgml_status st = encode_vec(t, text ? text : "", len, &v, err);
    if (!st && v.n > INT32_MAX) st = wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "whisper_text_encode: too many tokens");
    int n = st ? -1 : (int)v.n;
    for (int i = 0; i < n && i < cap; i++)
        out[i] = (int32_t)v.v[i];
    tok_vec_free(&v);
    return n;
}

/* ---- decoding ---- */

int whisper_token_bytes(const whisper_tokenizer *t, int32_t id, char *buf, int cap) {
    if (id < 0 || id >= t->sp.n_vocab) return -1;
    if (id < t->raw.n) {
        int n = (int)t->raw.len[id];
        if (cap > 0) memcpy(buf, t->raw.blob + t->raw.off[id], (size_t)(n < cap ? n : cap));
        return n;
    }
    char name[24];
    int n = whisper_special_name(&t->sp, id, name, sizeof name);
    if (n < 0) return -1; /* ids between the BPE tokens and EOT: none in a real vocabulary */
    if (cap > 0) memcpy(buf, name, (size_t)(n < cap ? n : cap));
    return n;
}

/* The length of the well-formed UTF-8 sequence at s[0..n), or (negated) of
 * its maximal subpart when it is not one: the longest prefix that starts a
 * well-formed sequence, at least 1 byte (Unicode's "U+FFFD substitution of
 * maximal subparts", which Python's "replace" follows). */
static int utf8_seq(const uint8_t *s, size_t n) {
    uint8_t c = s[0];
    int need;
    uint8_t lo = 0x80, hi = 0xBF; /* the range of the second byte */
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF)
        need = 1;
    else if (c >= 0xE0 && c <= 0xEF) {
        need = 2;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 3;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else {
        return -1;
    }
    for (int k = 1; k <= need; k++) {
        if ((size_t)k >= n) return -k;
        uint8_t x = s[k];
        if (k == 1 ? (x < lo || x > hi) : (x < 0x80 || x > 0xBF)) return -k;
    }
    return need + 1;
}

/* Python's bytes.decode("utf-8", "replace") of s[0..n) into buf (cap);
 * returns the text's length. */
static size_t utf8_replace(const uint8_t *s, size_t n, char *buf, size_t cap) {
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        int m = utf8_seq(s + i, n - i);
        const uint8_t *src = s + i;
        size_t len = (size_t)(m > 0 ? m : -m);
        i += len;
        if (m < 0) src = (const uint8_t *)"\xEF\xBF\xBD", len = 3;
        for (size_t j = 0; j < len; j++, k++)
            if (k < cap) buf[k] = (char)src[j];
    }
    if (k < cap) buf[k] = '\0';
    return k;
}

static int decode(const whisper_tokenizer *t, const int32_t *ids, int n, char *buf, int cap, int timestamps) {
    if (n < 0 || (!ids && n)) return -1;
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        if (ids[i] < 0) return -1;
        if (!timestamps && ids[i] >= t->sp.ts_begin) continue; /* Tokenizer.decode drops them first */
        int k = whisper_token_bytes(t, ids[i], NULL, 0);
        if (k < 0) return -1;
        total += (size_t)k;
    }
    if (total > INT32_MAX / 3) return -1; /* the text (3 bytes per byte at most) must fit an int */
    uint8_t *bytes = wgml_malloc(total ? total : 1);
    if (!bytes) return -1;
    size_t pos = 0;
    for (int i = 0; i < n; i++) {
        if (!timestamps && ids[i] >= t->sp.ts_begin) continue;
        pos += (size_t)whisper_token_bytes(t, ids[i], (char *)bytes + pos, (int)(total - pos));
    }
    size_t len = utf8_replace(bytes, total, buf, cap > 0 ? (size_t)cap : 0);
    wgml_free(bytes);
    return len > INT32_MAX ? -1 : (int)len;
}

int whisper_text_decode(const whisper_tokenizer *t, const int32_t *ids, int n, char *buf, int cap) {
    return decode(t, ids, n, buf, cap, 0);
}

int whisper_text_decode_with_timestamps(const whisper_tokenizer *t, const int32_t *ids, int n, char *buf, int cap) {
    return decode(t, ids, n, buf, cap, 1);
}

/* ---- suppression lists ---- */

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* Sorts v and drops repeats; returns the new count. */
static int sort_unique(int32_t *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_i32);
    int k = 0;
    for (int i = 0; i < n; i++)
        if (k == 0 || v[k - 1] != v[i]) v[k++] = v[i];
    return k;
}

/* tokenizer.py's non_speech_tokens, then decoding.py's suppress_tokens "-1". */
static wgml_status suppression(whisper_tokenizer *t, const char *name, wgml_error *err) {
    /* list('"#()*+/:;<=>@[\\]^_`{|}~「」『』'), then the multi-character symbols */
    static const char *const SYMBOLS[] = {
        "\"", "#", "(", ")", "*", "+", "/", ":", ";", "<", "=", ">", "@", "[", "\\", "]", "^", "_", "`", "{", "|",
        "}", "~", "\xE3\x80\x8C", "\xE3\x80\x8D", "\xE3\x80\x8E", "\xE3\x80\x8F", "<<", ">>", "<<<", ">>>", "--",
        "---", "-(", "-[", "('", "(\"", "((", "))", "(((", ")))", "[[", "]]", "{{", "}}",
        "\xE2\x99\xAA\xE2\x99\xAA", "\xE2\x99\xAA\xE2\x99\xAA\xE2\x99\xAA"};
    /* "miscellaneous": ♩♪♫♬♭♮♯ (U+2669..U+266F), their first token whatever their length */
    static const char *const MISC[] = {"\xE2\x99\xA9", "\xE2\x99\xAA", "\xE2\x99\xAB", "\xE2\x99\xAC",
                                       "\xE2\x99\xAD", "\xE2\x99\xAE", "\xE2\x99\xAF"};
    const int n_sym = (int)(sizeof SYMBOLS / sizeof SYMBOLS[0]), n_misc = (int)(sizeof MISC / sizeof MISC[0]);
    const int max = 2 + 2 * (n_sym + n_misc) + 6;
    int32_t *v = wgml_malloc((size_t)max * sizeof *v);
    if (!v) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "%s: out of memory", name);
    int n = 0;
    wgml_status st = WGML_OK;
    for (int s = -2; s < n_sym + n_misc && !st; s++) {
        const char *sym = s == -2 ? "-" : s == -1 ? "'" : s < n_sym ? SYMBOLS[s] : MISC[s - n_sym];
        char text[24] = " ";
        size_t len = strlen(sym);
        memcpy(text + 1, sym, len);
        for (int spaced = (s < 0); spaced < 2 && !st; spaced++) { /* " -" and " '": with the space only */
            tok_vec ids = {0};
            st = encode_vec(t, spaced ? text : text + 1, len + (size_t)spaced, &ids, err);
            if (!st && ids.n && (s < 0 || ids.n == 1 || s >= n_sym)) v[n++] = (int32_t)ids.v[0];
            tok_vec_free(&ids);
        }
    }
    if (st) {
        wgml_free(v);
        return st;
    }
    n = sort_unique(v, n);
    t->non_speech = wgml_malloc((size_t)n * sizeof *v + 1);
    if (!t->non_speech) {
        wgml_free(v);
        return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "%s: out of memory", name);
    }
    memcpy(t->non_speech, v, (size_t)n * sizeof *v);
    t->n_non_speech = n;
    const whisper_specials *sp = &t->sp;
    const int32_t more[6] = {sp->translate, sp->transcribe, sp->sot, sp->sot_prev, sp->sot_lm, sp->no_speech};
    memcpy(v + n, more, sizeof more);
    t->n_suppress = sort_unique(v, n + 6);
    t->suppress = v;
    return WGML_OK;
}

int whisper_non_speech_tokens(const whisper_tokenizer *t, const int32_t **ids) {
    *ids = t->non_speech;
    return t->n_non_speech;
}

int whisper_suppress_tokens_default(const whisper_tokenizer *t, const int32_t **ids) {
    *ids = t->suppress;
    return t->n_suppress;
}

/* ---- loading ---- */

const whisper_specials *whisper_tokenizer_specials(const whisper_tokenizer *t) { return &t->sp; }

void whisper_tokenizer_free(whisper_tokenizer *t) {
    if (!t) return;
    tok_strtab_free(&t->raw);
    tok_strtab_free(&t->spelled.text);
    tok_map_free(&t->spelled.text_map);
    wgml_free(t->non_speech);
    wgml_free(t->suppress);
    wgml_free(t);
}

wgml_status whisper_tokenizer_create(const char *const *tokens, const uint64_t *lens, int n_tokens, int n_vocab,
                                     const char *name, whisper_tokenizer **out, wgml_error *err) {
    *out = NULL;
    if (!name) name = "whisper tokenizer";
    whisper_tokenizer *t = wgml_calloc(1, sizeof *t);
    if (!t) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "%s: out of memory", name);
    wgml_status st = whisper_specials_init(&t->sp, n_vocab, err);
    if (st)
        wgml_error_prefix(err, "%s", name);
    else if (n_tokens != t->sp.n_text)
        st = wgml_fail(err, WGML_ERR_FORMAT, "%s: %d BPE tokens for a vocabulary of %d ids (%d expected)", name,
                       n_tokens, n_vocab, t->sp.n_text);
    if (!st) st = table(&t->raw, tokens, lens, n_tokens, 0, name, err);
    if (!st) st = table(&t->spelled.text, tokens, lens, n_tokens, 1, name, err);
    if (!st) st = tok_map_build(&t->spelled.text_map, &t->spelled.text, err);
    for (int b = 0; b < 256 && !st; b++) {
        char sym[4];
        int n = uni_encode(bpe_byte_to_cp((uint8_t)b), sym);
        if (tok_find(&t->spelled, sym, (size_t)n) < 0)
            st = wgml_fail(err, WGML_ERR_FORMAT, "%s: no token is the single byte 0x%02x (every byte must be one)",
                           name, b);
    }
    if (!st) st = suppression(t, name, err);
    if (st) {
        whisper_tokenizer_free(t);
        return st;
    }
    *out = t;
    return WGML_OK;
}

wgml_status whisper_tokenizer_load(const gguf_file *f, whisper_tokenizer **out, wgml_error *err) {
    *out = NULL;
    const char *name = gguf_name(f);
    int64_t n_vocab;
    const gguf_value *arr;
    int r = gguf_get_int(f, "whisper.vocab_size", 0, INT32_MAX, &n_vocab, err);
    if (r < 0) return WGML_ERR_FORMAT;
    if (r == 0) return wgml_fail(err, WGML_ERR_FORMAT, "%s: no whisper.vocab_size", name);
    r = gguf_get_arr(f, "whisper.tokens", GGUF_TYPE_STRING, &arr, err);
    if (r < 0) return WGML_ERR_FORMAT;
    if (r == 0) return wgml_fail(err, WGML_ERR_FORMAT, "%s: no whisper.tokens (the BPE vocabulary)", name);
    uint64_t n = arr->v.arr.n;
    if (n > INT32_MAX) return wgml_fail(err, WGML_ERR_FORMAT, "%s: %" PRIu64 " tokens", name, n);
    const char **toks = wgml_calloc(n ? (size_t)n : 1, sizeof *toks);
    uint64_t *lens = wgml_calloc(n ? (size_t)n : 1, sizeof *lens);
    wgml_status st;
    if (!toks || !lens) {
        st = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "%s: out of memory for %" PRIu64 " tokens", name, n);
    } else {
        for (uint64_t i = 0; i < n; i++) {
            toks[i] = arr->v.arr.items[i].v.str.ptr;
            lens[i] = arr->v.arr.items[i].v.str.len;
        }
        st = whisper_tokenizer_create(toks, lens, (int)n, (int)n_vocab, name, out, err);
    }
    wgml_free(toks);
    wgml_free(lens);
    return st;
}
