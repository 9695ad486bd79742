/*
 * tokenizer.c - loading a vocabulary from GGUF metadata, the common encode
 * path, token pieces and decoding (API in tokenizer.h, internals in
 * tokenizer_impl.h).
 *
 * Loading copies the token strings into one blob and indexes them with an
 * open-addressing hash map (FNV-1a, linear probing), so the tokenizer does not
 * borrow the GGUF mapping. The model-specific parts (SentencePiece, BPE,
 * WordPiece) read their own keys in spm.c, bpe.c and wordpiece.c.
 *
 * Encoding first cuts the text at special tokens written literally in it
 * (control, user-defined and unknown tokens, e.g. "<|im_start|>"): at each
 * byte the longest special token starting there wins, scanning left to right.
 * Each stretch of ordinary text between them goes to the model's encoder;
 * SentencePiece adds its dummy-prefix space to each stretch that starts the
 * text or follows a special token (as llama.cpp does). Phi-3 vocabularies get
 * the "rstrip" attribute on their special tokens, as in their Hugging Face
 * configuration: whitespace after such a token is dropped.
 *
 * Unigram vocabularies ("t5") normalize the whole text first (unigram.c:
 * SigLIP's canonicalization, whitespace stripped and collapsed), then cut it
 * at special tokens; only the fragment that starts the text gets the "▁"
 * prefix, as SentencePiece sees one string. With add_bos, a vocabulary that
 * sets tokenizer.ggml.add_eos_token gets EOS after the text (CLIP, SigLIP).
 *
 * Pieces (the bytes a token stands for):
 *   SPM   normal: the text with U+2581 as ' '; byte <0xXX>: that byte
 *   BPE   normal: the GPT-2 byte-level symbols mapped back to bytes (a symbol
 *         outside that mapping is kept as its UTF-8); CLIP: "</w>" a space
 *   UGM   as SPM
 *   WPM   normal: the text with U+2581 as ' ' (GGUF WordPiece vocabularies
 *         store word-initial pieces as "▁word" and continuations as bare
 *         "ing", which is what a "##ing" continuation became in conversion);
 *         in BERT's own spelling, "##ing" renders "ing" and "word" " word"
 *   all   user-defined: the text as is; control, unknown and unused: nothing
 * Decoding concatenates pieces, dropping one leading space from the first
 * non-empty piece for SentencePiece and Unigram (the dummy prefix) and
 * WordPiece, and for CLIP the space of the last word's "</w>".
 */
#include "core/alloc.h"
#include "core/error.h"
#include "text/tokenizer_impl.h"
#include "text/unicode.h"

#include <ctype.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* ---- growable arrays ---- */

wgml_status tok_vec_reserve(tok_vec *v, size_t n, wgml_error *err) {
    if (n <= v->cap) return WGML_OK;
    size_t cap = v->cap ? v->cap : 16;
    while (cap < n) {
        if (cap > SIZE_MAX / 2 / sizeof *v->v) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "tokenizer: too large");
        cap *= 2;
    }
    uint32_t *p = wgml_realloc(v->v, cap * sizeof *p);
    if (!p) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "tokenizer: out of memory (%zu entries)", cap);
    v->v = p;
    v->cap = cap;
    return WGML_OK;
}

wgml_status tok_vec_push(tok_vec *v, uint32_t x, wgml_error *err) {
    if (v->n == v->cap) {
        wgml_status st = tok_vec_reserve(v, v->n + 1, err);
        if (st != WGML_OK) return st;
    }
    v->v[v->n++] = x;
    return WGML_OK;
}

void tok_vec_free(tok_vec *v) {
    wgml_free(v->v);
    *v = (tok_vec){0};
}

/* ---- string table and hash map ---- */

#define FNV_BASIS 2166136261u
static uint32_t fnv(uint32_t h, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)s[i]) * 16777619u;
    return h;
}

wgml_status tok_strtab_from_gguf(tok_strtab *t, const gguf_value *arr, const char *what, wgml_error *err) {
    uint64_t n = arr->v.arr.n;
    size_t total = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t len = arr->v.arr.items[i].v.str.len;
        if (len >= UINT32_MAX || total + len + 1 >= UINT32_MAX)
            return wgml_fail(err, WGML_ERR_FORMAT, "%s: string %" PRIu64 " makes the table larger than 4 GiB", what, i);
        total += len + 1;
    }
    t->blob = wgml_malloc(total ? total : 1);
    t->off = wgml_calloc(n ? n : 1, sizeof *t->off);
    t->len = wgml_calloc(n ? n : 1, sizeof *t->len);
    if (!t->blob || !t->off || !t->len)
        return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "%s: out of memory copying %" PRIu64 " strings", what, n);
    size_t pos = 0;
    for (uint64_t i = 0; i < n; i++) {
        gguf_str s = arr->v.arr.items[i].v.str;
        if (s.len) memcpy(t->blob + pos, s.ptr, s.len);
        t->blob[pos + s.len] = '\0';
        t->off[i] = (uint32_t)pos;
        t->len[i] = (uint32_t)s.len;
        if (s.len > t->max_len) t->max_len = s.len;
        pos += s.len + 1;
    }
    t->n = (int32_t)n;
    return WGML_OK;
}

void tok_strtab_free(tok_strtab *t) {
    wgml_free(t->blob);
    wgml_free(t->off);
    wgml_free(t->len);
    *t = (tok_strtab){0};
}

wgml_status tok_map_build(tok_map *m, const tok_strtab *t, wgml_error *err) {
    size_t cap = 16;
    while (cap < (size_t)t->n * 2)
        cap *= 2;
    m->slot = wgml_malloc(cap * sizeof *m->slot);
    m->hash = wgml_malloc(cap * sizeof *m->hash);
    if (!m->slot || !m->hash) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "tokenizer: out of memory for a map");
    m->mask = cap - 1;
    for (size_t i = 0; i < cap; i++)
        m->slot[i] = -1;
    for (int32_t i = 0; i < t->n; i++) {
        const char *s = t->blob + t->off[i];
        size_t n = t->len[i];
        if (n == 0) continue;
        uint32_t h = fnv(FNV_BASIS, s, n);
        size_t j = h & m->mask;
        for (; m->slot[j] >= 0; j = (j + 1) & m->mask) {
            int32_t k = m->slot[j];
            if (m->hash[j] == h && t->len[k] == n && memcmp(t->blob + t->off[k], s, n) == 0) break;
        }
        if (m->slot[j] >= 0) continue; /* duplicate: the first one wins */
        m->slot[j] = i;
        m->hash[j] = h;
    }
    return WGML_OK;
}

void tok_map_free(tok_map *m) {
    wgml_free(m->slot);
    wgml_free(m->hash);
    *m = (tok_map){0};
}

int32_t tok_map_find(const tok_map *m, const tok_strtab *t, const char *a, size_t na, int sep, const char *b,
                     size_t nb) {
    if (!m->slot) return -1;
    char sc = (char)sep;
    size_t n = na + (sep >= 0) + nb;
    uint32_t h = fnv(FNV_BASIS, a, na);
    if (sep >= 0) h = fnv(h, &sc, 1);
    h = fnv(h, b, nb);
    for (size_t j = h & m->mask; m->slot[j] >= 0; j = (j + 1) & m->mask) {
        int32_t k = m->slot[j];
        if (m->hash[j] != h || t->len[k] != n) continue;
        const char *s = t->blob + t->off[k];
        if (memcmp(s, a, na) != 0) continue;
        if (sep >= 0 && s[na] != sc) continue;
        if (nb && memcmp(s + na + (sep >= 0), b, nb) != 0) continue;
        return k;
    }
    return -1;
}

/* ---- loading ---- */

/* Reads an optional token id; absent or out of range (e.g. 0xFFFFFFFF) leaves *id. */
static wgml_status read_id(const gguf_file *f, const char *key, int32_t n_vocab, int32_t *id, wgml_error *err) {
    int64_t v;
    int r = gguf_get_int(f, key, INT64_MIN, INT64_MAX, &v, err);
    if (r < 0) return WGML_ERR_FORMAT;
    if (r > 0) *id = (v >= 0 && v < n_vocab) ? (int32_t)v : -1;
    return WGML_OK;
}

static wgml_status read_bool(const gguf_file *f, const char *key, int *out, wgml_error *err) {
    return gguf_get_bool(f, key, out, err) < 0 ? WGML_ERR_FORMAT : WGML_OK;
}

static void set_attr(wgml_tokenizer *tok, const char *text, uint8_t attr, int on) {
    int32_t id = tok_find(tok, text, strlen(text));
    if (id < 0) return;
    tok->attr[id] = (uint8_t)(on ? tok->attr[id] | attr : tok->attr[id] & ~attr);
}

/* End-of-generation tokens recognised by their text, as llama.cpp does. */
static const char *const EOG_TEXTS[] = {"<|eot_id|>",      "<|im_end|>",    "<|end|>",
                                        "<end_of_turn>",   "<|endoftext|>", "<|eom_id|>",
                                        "<|end_of_text|>", "<EOT>",         "<end_of_utterance>"};

typedef struct special_key {
    uint32_t len;
    int32_t id;
    uint8_t first;
} special_key;

static int special_cmp(const void *a, const void *b) {
    const special_key *x = a, *y = b;
    if (x->first != y->first) return x->first < y->first ? -1 : 1;
    if (x->len != y->len) return x->len > y->len ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

static wgml_status build_specials(wgml_tokenizer *tok, wgml_error *err) {
    int32_t n = 0;
    for (int32_t i = 0; i < tok->n_vocab; i++) {
        uint8_t t = tok->type[i];
        if ((t == TOK_CONTROL || t == TOK_USER_DEFINED || t == TOK_UNKNOWN) && tok->text.len[i] > 0) {
            tok->attr[i] |= TOK_ATTR_SPECIAL;
            n++;
        }
    }
    special_key *keys = wgml_calloc(n ? (size_t)n : 1, sizeof *keys);
    tok->special = wgml_calloc(n ? (size_t)n : 1, sizeof *tok->special);
    if (!keys || !tok->special) {
        wgml_free(keys);
        return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "tokenizer: out of memory for %d special tokens", n);
    }
    int32_t k = 0;
    for (int32_t i = 0; i < tok->n_vocab; i++) {
        if (tok->attr[i] & TOK_ATTR_SPECIAL)
            keys[k++] = (special_key){tok->text.len[i], i, (uint8_t)tok->text.blob[tok->text.off[i]]};
    }
    qsort(keys, (size_t)n, sizeof *keys, special_cmp);
    int32_t j = 0;
    for (int b = 0; b < 256; b++) {
        tok->special_first[b] = j;
        while (j < n && keys[j].first == b) {
            tok->special[j] = keys[j].id;
            j++;
        }
    }
    tok->special_first[256] = j;
    wgml_free(keys);
    return WGML_OK;
}

/* Token types and scores; without a type array, guesses from the special ids. */
static wgml_status load_types(wgml_tokenizer *tok, const gguf_file *f, wgml_error *err) {
    const char *name = gguf_name(f);
    int32_t n = tok->n_vocab;
    const gguf_value *types = NULL, *scores = NULL;
    int r = gguf_get_arr(f, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, &types, err);
    if (r < 0) return WGML_ERR_FORMAT;
    if (r > 0 && types->v.arr.n < (uint64_t)n)
        return wgml_fail(err, WGML_ERR_FORMAT, "%s: tokenizer.ggml.token_type has %" PRIu64 " entries for %d tokens",
                         name, types->v.arr.n, n);
    r = gguf_get_arr(f, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, &scores, err);
    if (r < 0) return WGML_ERR_FORMAT;
    if (r > 0 && scores->v.arr.n < (uint64_t)n)
        return wgml_fail(err, WGML_ERR_FORMAT, "%s: tokenizer.ggml.scores has %" PRIu64 " entries for %d tokens", name,
                         scores->v.arr.n, n);
    for (int32_t i = 0; i < n; i++) {
        int32_t t = types ? gguf_arr_i32(types, (uint64_t)i) : TOK_NORMAL;
        tok->type[i] = (uint8_t)(t >= TOK_NORMAL && t <= TOK_BYTE ? t : TOK_NORMAL);
        tok->score[i] = scores ? gguf_arr_f32(scores, (uint64_t)i) : 0.0f;
    }
    tok->has_types = types != NULL;
    if (!types) {
        int32_t ctl[] = {tok->bos, tok->eos, tok->eot, tok->eom, tok->sep};
        for (size_t i = 0; i < sizeof ctl / sizeof ctl[0]; i++)
            if (ctl[i] >= 0) tok->type[ctl[i]] = TOK_CONTROL;
        if (tok->unk >= 0) tok->type[tok->unk] = TOK_UNKNOWN;
    }
    return WGML_OK;
}

static wgml_status load_special_ids(wgml_tokenizer *tok, const gguf_file *f, wgml_error *err) {
    int32_t n = tok->n_vocab;
    /* defaults per model, as llama.cpp's */
    if (tok->kind == WGML_VOCAB_SPM) tok->bos = 1, tok->eos = 2, tok->unk = 0;
    if (tok->kind == WGML_VOCAB_WPM) tok->bos = 101, tok->unk = 100, tok->sep = 102;
    if (tok->kind == WGML_VOCAB_UGM) tok->eos = 1, tok->unk = 2; /* T5's, as llama.cpp defaults them */
    int32_t *ids[] = {&tok->bos, &tok->eos, &tok->unk, &tok->sep};
    for (size_t i = 0; i < 4; i++)
        if (*ids[i] >= n) *ids[i] = -1;
    wgml_status st = WGML_OK;
    if (tok->kind == WGML_VOCAB_WPM) st = read_id(f, "tokenizer.ggml.cls_token_id", n, &tok->bos, err);
    if (st == WGML_OK) st = read_id(f, "tokenizer.ggml.bos_token_id", n, &tok->bos, err);
    if (st == WGML_OK) st = read_id(f, "tokenizer.ggml.eos_token_id", n, &tok->eos, err);
    if (st == WGML_OK) st = read_id(f, "tokenizer.ggml.eot_token_id", n, &tok->eot, err);
    if (st == WGML_OK) st = read_id(f, "tokenizer.ggml.eom_token_id", n, &tok->eom, err);
    if (st == WGML_OK) st = read_id(f, "tokenizer.ggml.unknown_token_id", n, &tok->unk, err);
    if (st == WGML_OK) st = read_id(f, "tokenizer.ggml.seperator_token_id", n, &tok->sep, err);
    return st;
}

static void mark_attrs(wgml_tokenizer *tok, const gguf_file *f) {
    int32_t eog[] = {tok->eos, tok->eot, tok->eom};
    for (size_t i = 0; i < 3; i++)
        if (eog[i] >= 0) tok->attr[eog[i]] |= TOK_ATTR_EOG;
    for (size_t i = 0; i < sizeof EOG_TEXTS / sizeof EOG_TEXTS[0]; i++)
        set_attr(tok, EOG_TEXTS[i], TOK_ATTR_EOG, 1);

    /* Phi-3: special tokens swallow the whitespace after them (HF "rstrip"), except these */
    gguf_str model_name = {0};
    wgml_error ignored;
    if (gguf_get_str(f, "general.name", &model_name, &ignored) <= 0) return;
    char lower[64];
    size_t n = model_name.len < sizeof lower - 1 ? (size_t)model_name.len : sizeof lower - 1;
    for (size_t i = 0; i < n; i++)
        lower[i] = (char)tolower((unsigned char)model_name.ptr[i]);
    lower[n] = '\0';
    if (!strstr(lower, "phi-3") && !strstr(lower, "phi3")) return;
    for (int32_t i = 0; i < tok->n_vocab; i++)
        if (tok->attr[i] & TOK_ATTR_SPECIAL) tok->attr[i] |= TOK_ATTR_RSTRIP;
    set_attr(tok, "</s>", TOK_ATTR_RSTRIP, 1);
    set_attr(tok, "<unk>", TOK_ATTR_RSTRIP, 0);
    set_attr(tok, "<s>", TOK_ATTR_RSTRIP, 0);
    set_attr(tok, "<|endoftext|>", TOK_ATTR_RSTRIP, 0);
}

static wgml_status load(wgml_tokenizer *tok, const gguf_file *f, wgml_error *err) {
    const char *name = gguf_name(f);
    gguf_str model, pre = {"", 0};
    int r = gguf_get_str(f, "tokenizer.ggml.model", &model, err);
    if (r < 0) return WGML_ERR_FORMAT;
    if (r == 0) return wgml_fail(err, WGML_ERR_FORMAT, "%s: no tokenizer (tokenizer.ggml.model is missing)", name);
    if (gguf_str_eq(model, "llama"))
        tok->kind = WGML_VOCAB_SPM;
    else if (gguf_str_eq(model, "gpt2"))
        tok->kind = WGML_VOCAB_BPE;
    else if (gguf_str_eq(model, "bert"))
        tok->kind = WGML_VOCAB_WPM;
    else if (gguf_str_eq(model, "t5"))
        tok->kind = WGML_VOCAB_UGM;
    else
        return wgml_fail(err, WGML_ERR_UNSUPPORTED, "%s: unsupported tokenizer model '%.*s' (tokenizer.ggml.model)",
                         name, (int)(model.len > 64 ? 64 : model.len), model.ptr);
    r = gguf_get_str(f, "tokenizer.ggml.pre", &pre, err);
    if (r < 0) return WGML_ERR_FORMAT;

    const gguf_value *tokens;
    r = gguf_get_arr(f, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &tokens, err);
    if (r < 0) return WGML_ERR_FORMAT;
    if (r == 0) return wgml_fail(err, WGML_ERR_FORMAT, "%s: tokenizer.ggml.tokens is missing", name);
    if (tokens->v.arr.n == 0 || tokens->v.arr.n > INT32_MAX / 2)
        return wgml_fail(err, WGML_ERR_FORMAT, "%s: tokenizer.ggml.tokens has %" PRIu64 " tokens", name,
                         tokens->v.arr.n);
    tok->n_vocab = (int32_t)tokens->v.arr.n;
    wgml_status st = tok_strtab_from_gguf(&tok->text, tokens, name, err);
    if (st != WGML_OK) return st;
    tok->score = wgml_calloc((size_t)tok->n_vocab, sizeof *tok->score);
    tok->type = wgml_calloc((size_t)tok->n_vocab, 1);
    tok->attr = wgml_calloc((size_t)tok->n_vocab, 1);
    if (!tok->score || !tok->type || !tok->attr)
        return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "%s: out of memory for %d tokens", name, tok->n_vocab);
    if ((st = tok_map_build(&tok->text_map, &tok->text, err)) != WGML_OK) return st;
    if ((st = load_special_ids(tok, f, err)) != WGML_OK) return st;
    if ((st = load_types(tok, f, err)) != WGML_OK) return st;

    tok->add_bos = tok->kind != WGML_VOCAB_BPE && tok->kind != WGML_VOCAB_UGM;
    switch (tok->kind) {
    case WGML_VOCAB_SPM: st = spm_load(tok, f, err); break;
    case WGML_VOCAB_BPE: st = bpe_load(tok, f, pre.ptr, (size_t)pre.len, err); break;
    case WGML_VOCAB_WPM: st = wpm_load(tok, f, err); break;
    case WGML_VOCAB_UGM: st = ugm_load(tok, f, pre.ptr, (size_t)pre.len, err); break;
    }
    if (st != WGML_OK) return st;
    if ((st = read_bool(f, "tokenizer.ggml.add_bos_token", &tok->add_bos, err)) != WGML_OK) return st;
    if ((st = read_bool(f, "tokenizer.ggml.add_eos_token", &tok->add_eos, err)) != WGML_OK) return st;
    if ((st = build_specials(tok, err)) != WGML_OK) return st;
    mark_attrs(tok, f);
    return WGML_OK;
}

wgml_status wgml_tokenizer_load(const gguf_file *f, wgml_tokenizer **out, wgml_error *err) {
    wgml_error local;
    if (!err) err = &local;
    if (!out) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "wgml_tokenizer_load: out is NULL");
    *out = NULL;
    if (!f) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "wgml_tokenizer_load: file is NULL");
    wgml_tokenizer *tok = wgml_calloc(1, sizeof *tok);
    if (!tok) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "%s: out of memory for the tokenizer", gguf_name(f));
    tok->bos = tok->eos = tok->eot = tok->eom = tok->unk = tok->sep = -1;
    for (int b = 0; b < 256; b++)
        tok->byte_token[b] = -1;
    wgml_status st = load(tok, f, err);
    if (st != WGML_OK) {
        wgml_tokenizer_free(tok);
        return st;
    }
    *out = tok;
    return WGML_OK;
}

void wgml_tokenizer_free(wgml_tokenizer *tok) {
    if (!tok) return;
    tok_strtab_free(&tok->text);
    tok_map_free(&tok->text_map);
    tok_strtab_free(&tok->merges);
    tok_map_free(&tok->merge_map);
    ugm_free(tok);
    wgml_free(tok->score);
    wgml_free(tok->type);
    wgml_free(tok->attr);
    wgml_free(tok->special);
    wgml_free(tok);
}

/* ---- queries ---- */

wgml_vocab_kind wgml_tokenizer_kind(const wgml_tokenizer *tok) { return tok ? tok->kind : WGML_VOCAB_SPM; }
int wgml_tokenizer_n_vocab(const wgml_tokenizer *tok) { return tok ? tok->n_vocab : 0; }
int32_t wgml_tokenizer_bos(const wgml_tokenizer *tok) { return tok ? tok->bos : -1; }
int32_t wgml_tokenizer_eos(const wgml_tokenizer *tok) { return tok ? tok->eos : -1; }
int wgml_tokenizer_wants_bos(const wgml_tokenizer *tok) { return tok && tok->add_bos && tok->bos >= 0; }

int wgml_tokenizer_is_eog(const wgml_tokenizer *tok, int32_t id) {
    return tok && id >= 0 && id < tok->n_vocab && (tok->attr[id] & TOK_ATTR_EOG) != 0;
}

const char *wgml_tokenizer_token_text(const wgml_tokenizer *tok, int32_t id) {
    if (!tok || id < 0 || id >= tok->n_vocab) return NULL;
    return tok->text.blob + tok->text.off[id];
}

/* ---- encoding ---- */

/* The longest special token at s[0..n), or 0. */
static size_t match_special(const wgml_tokenizer *tok, const char *s, size_t n, int32_t *id) {
    uint8_t b = (uint8_t)s[0];
    for (int32_t k = tok->special_first[b]; k < tok->special_first[b + 1]; k++) {
        int32_t t = tok->special[k];
        size_t len = tok->text.len[t];
        if (len <= n && memcmp(s, tok->text.blob + tok->text.off[t], len) == 0) {
            *id = t;
            return len;
        }
    }
    return 0;
}

static wgml_status encode_fragment(const wgml_tokenizer *tok, const char *text0, const char *s, size_t n,
                                   int after_special, tok_vec *ids, wgml_error *err) {
    switch (tok->kind) {
    case WGML_VOCAB_SPM: return spm_encode(tok, s, n, tok->add_space_prefix && after_special, ids, err);
    case WGML_VOCAB_BPE: return tok->clip ? bpe_encode_clip(tok, s, n, ids, err) : bpe_encode(tok, s, n, ids, err);
    case WGML_VOCAB_WPM: return wpm_encode(tok, s, n, ids, err);
    case WGML_VOCAB_UGM: return ugm_encode(tok, s, n, tok->add_space_prefix && s == text0, ids, err);
    }
    return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "tokenizer: bad vocabulary kind");
}

static wgml_status encode_all(const wgml_tokenizer *tok, const char *text, size_t len, int add_bos, tok_vec *ids,
                              wgml_error *err) {
    wgml_status st = WGML_OK;
    if (add_bos && tok->bos >= 0) st = tok_vec_push(ids, (uint32_t)tok->bos, err);
    size_t frag = 0, i = 0;
    int after_special = 1;
    while (i < len && st == WGML_OK) {
        int32_t id;
        size_t m = match_special(tok, text + i, len - i, &id);
        if (!m) {
            i++;
            continue;
        }
        if (i > frag) st = encode_fragment(tok, text, text + frag, i - frag, after_special, ids, err);
        if (st == WGML_OK) st = tok_vec_push(ids, (uint32_t)id, err);
        after_special = 1;
        i += m;
        if (tok->attr[id] & TOK_ATTR_RSTRIP)
            while (i < len && isspace((unsigned char)text[i]))
                i++;
        frag = i;
    }
    if (st == WGML_OK && frag < len) st = encode_fragment(tok, text, text + frag, len - frag, after_special, ids, err);
    if (st == WGML_OK && add_bos && tok->kind == WGML_VOCAB_WPM && tok->sep >= 0)
        st = tok_vec_push(ids, (uint32_t)tok->sep, err);
    else if (st == WGML_OK && add_bos && tok->add_eos && tok->eos >= 0)
        st = tok_vec_push(ids, (uint32_t)tok->eos, err);
    return st;
}

int wgml_tokenizer_encode(const wgml_tokenizer *tok, const char *text, size_t len, int add_bos, int32_t *out, int cap,
                          wgml_error *err) {
    wgml_error local;
    if (!err) err = &local;
    if (!tok || (!text && len) || cap < 0 || (!out && cap > 0)) {
        wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "wgml_tokenizer_encode: invalid argument");
        return -1;
    }
    if (len >= UINT32_MAX / 4) {
        wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "wgml_tokenizer_encode: text of %zu bytes is too long", len);
        return -1;
    }
    tok_vec ids = {0};
    char *norm = NULL;
    size_t norm_len = 0;
    wgml_status st = WGML_OK;
    if (tok->kind == WGML_VOCAB_UGM) { /* the whole text first: its specials are found in the normalized text */
        st = ugm_normalize(tok, text, len, &norm, &norm_len, err);
        text = norm, len = norm_len;
    }
    if (st == WGML_OK) st = encode_all(tok, text, len, add_bos, &ids, err);
    wgml_free(norm);
    if (st == WGML_OK && ids.n > INT_MAX)
        st = wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "wgml_tokenizer_encode: %zu tokens is too many", ids.n);
    if (st != WGML_OK) {
        tok_vec_free(&ids);
        return -1;
    }
    size_t n = ids.n < (size_t)cap ? ids.n : (size_t)cap;
    for (size_t i = 0; i < n; i++)
        out[i] = (int32_t)ids.v[i];
    int total = (int)ids.n;
    tok_vec_free(&ids);
    return total;
}

/* ---- pieces and decoding ---- */

typedef struct out_buf {
    char *buf;
    size_t cap, n;
} out_buf;

static void put(out_buf *o, const char *s, size_t k) {
    if (o->n < o->cap) memcpy(o->buf + o->n, s, k < o->cap - o->n ? k : o->cap - o->n);
    o->n += k;
}

static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

/* Writes the piece of id; with strip, drops one leading ' ' (from U+2581).
 * Returns 1 when the piece ends with the space of a CLIP "</w>". */
static int render(const wgml_tokenizer *tok, int32_t id, out_buf *o, int strip) {
    const char *s = tok->text.blob + tok->text.off[id];
    size_t n = tok->text.len[id];
    int eow = 0;
    switch (tok->type[id]) {
    case TOK_USER_DEFINED: put(o, s, n); return 0;
    case TOK_BYTE:
        if (n == 6 && memcmp(s, "<0x", 3) == 0 && s[5] == '>' && hex_digit(s[3]) >= 0 && hex_digit(s[4]) >= 0) {
            char byte = (char)(hex_digit(s[3]) << 4 | hex_digit(s[4]));
            put(o, &byte, 1);
        } else {
            put(o, s, n);
        }
        return 0;
    case TOK_NORMAL: break;
    default: return 0; /* control, unknown, unused */
    }
    if (tok->clip && n >= 4 && memcmp(s + n - 4, "</w>", 4) == 0) n -= 4, eow = 1;
    if (tok->kind == WGML_VOCAB_WPM && tok->wpm_hash_prefix) { /* "##ing" -> "ing", "word" -> " word" */
        if (n >= 2 && s[0] == '#' && s[1] == '#')
            s += 2, n -= 2;
        else if (!strip)
            put(o, " ", 1);
        put(o, s, n);
        return 0;
    }
    for (size_t i = 0; i < n;) {
        int len;
        uint32_t cp = uni_decode(s + i, n - i, &len);
        if (tok->kind == WGML_VOCAB_BPE) {
            int b = bpe_cp_to_byte(cp);
            if (b >= 0) {
                char c = (char)b;
                put(o, &c, 1);
            } else {
                put(o, s + i, (size_t)len);
            }
        } else if (cp == 0x2581) {
            if (!strip) put(o, " ", 1);
        } else {
            put(o, s + i, (size_t)len);
        }
        strip = 0;
        i += (size_t)len;
    }
    if (eow) put(o, " ", 1);
    return eow;
}

static size_t piece_len(const wgml_tokenizer *tok, int32_t id) {
    out_buf o = {NULL, 0, 0};
    render(tok, id, &o, 0);
    return o.n;
}

int wgml_tokenizer_piece(const wgml_tokenizer *tok, int32_t id, char *buf, int cap) {
    if (!tok || id < 0 || id >= tok->n_vocab) return -1;
    out_buf o = {buf, buf && cap > 0 ? (size_t)cap : 0, 0};
    render(tok, id, &o, 0);
    return o.n > INT_MAX ? -1 : (int)o.n;
}

int wgml_tokenizer_decode(const wgml_tokenizer *tok, const int32_t *ids, int n, char *buf, int cap) {
    if (!tok || n < 0 || (n > 0 && !ids)) return -1;
    out_buf o = {buf, buf && cap > 0 ? (size_t)cap : 0, 0};
    int strip = ((tok->kind == WGML_VOCAB_SPM || tok->kind == WGML_VOCAB_UGM) && tok->add_space_prefix) ||
                tok->kind == WGML_VOCAB_WPM;
    int eow = 0; /* the output ends with a CLIP word's space */
    for (int i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= tok->n_vocab) return -1;
        int s = strip && tok->type[ids[i]] == TOK_NORMAL;
        if (strip && piece_len(tok, ids[i]) > 0) strip = 0;
        size_t before = o.n;
        int e = render(tok, ids[i], &o, s);
        if (o.n > before) eow = e;
    }
    if (eow) o.n--;
    return o.n > INT_MAX ? -1 : (int)o.n;
}
