/*
 * synth_vocab.c - resizing a vocabulary for a synthetic model (see synth_vocab.h).
 *
 * Token strings point into the vocabulary file's mapping; only the padding
 * tokens are allocated. A small open-addressing hash set of token strings
 * answers "is this still a token?" for the merge filter and keeps padding
 * names unique.
 */
#include "tools/synth_vocab.h"

#include "core/alloc.h"
#include "core/error.h"
#include "format/model_file.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define TOKEN_TYPE_UNUSED 5
#define PAD_SCORE         -1000.0f

typedef struct strset {
    const char **ptr;
    uint64_t *len;
    size_t mask; /* capacity - 1 (a power of two) */
} strset;

static uint64_t hash_bytes(const char *p, uint64_t n) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (uint64_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)p[i]) * 1099511628211ull;
    return h;
}

static int strset_init(strset *s, size_t n) {
    size_t cap = 16;
    while (cap < 2 * n)
        cap *= 2;
    s->ptr = wgml_calloc(cap, sizeof *s->ptr);
    s->len = wgml_calloc(cap, sizeof *s->len);
    s->mask = cap - 1;
    return s->ptr && s->len;
}

static void strset_free(strset *s) {
    wgml_free(s->ptr);
    wgml_free(s->len);
}

/* Returns 1 if present; with add, inserts it when absent. */
static int strset_find(strset *s, const char *p, uint64_t n, int add) {
    for (size_t i = hash_bytes(p, n) & s->mask;; i = (i + 1) & s->mask) {
        if (!s->ptr[i]) {
            if (add) {
                s->ptr[i] = p;
                s->len[i] = n;
            }
            return 0;
        }
        if (s->len[i] == n && memcmp(s->ptr[i], p, n) == 0) return 1;
    }
}

/* The resized token arrays. */
typedef struct vocab {
    int64_t n;
    const char **text;
    uint64_t *len;
    float *score;   /* NULL when the file has no scores */
    int32_t *type;  /* NULL when the file has no token types */
    char *pad_text; /* storage of the padding names */
    const char **merge;
    uint64_t *merge_len;
    int64_t n_merges;
    /* special ids moved into range: old -> new */
    int64_t moved_from[16], moved_to[16];
    int n_moved;
} vocab;

static void vocab_free(vocab *v) {
    wgml_free(v->text);
    wgml_free(v->len);
    wgml_free(v->score);
    wgml_free(v->type);
    wgml_free(v->pad_text);
    wgml_free(v->merge);
    wgml_free(v->merge_len);
}

static int is_special_id_key(const gguf_kv *kv) {
    size_t n = strlen(kv->key);
    const char *suffix = "_token_id";
    size_t ns = strlen(suffix);
    gguf_type t = kv->value.type;
    int integer = t == GGUF_TYPE_UINT32 || t == GGUF_TYPE_INT32 || t == GGUF_TYPE_UINT64 || t == GGUF_TYPE_INT64 ||
                  t == GGUF_TYPE_UINT16 || t == GGUF_TYPE_INT16 || t == GGUF_TYPE_UINT8 || t == GGUF_TYPE_INT8;
    return integer && strncmp(kv->key, "tokenizer.ggml.", 15) == 0 && n > ns && strcmp(kv->key + n - ns, suffix) == 0;
}

static int64_t special_id(const gguf_kv *kv) {
    gguf_type t = kv->value.type;
    if (t == GGUF_TYPE_INT32 || t == GGUF_TYPE_INT64 || t == GGUF_TYPE_INT16 || t == GGUF_TYPE_INT8)
        return kv->value.v.i64;
    return kv->value.v.u64 > INT64_MAX ? -1 : (int64_t)kv->value.v.u64;
}

/* Moves special tokens that lie beyond n into the last free slots. */
static wgml_status move_specials(const gguf_file *f, vocab *v, int64_t n_file, const gguf_value *tok,
                                 const gguf_value *scores, const gguf_value *types, wgml_error *err) {
    for (int64_t i = 0; i < gguf_n_kv(f); i++) {
        const gguf_kv *kv = gguf_kv_at(f, i);
        if (!is_special_id_key(kv)) continue;
        int64_t id = special_id(kv);
        if (id < v->n || id >= n_file) continue; /* in range, or "none" (e.g. 0xffffffff) */
        int seen = 0;
        for (int k = 0; k < v->n_moved; k++)
            seen |= v->moved_from[k] == id;
        if (seen) continue;
        if (v->n_moved == 16)
            return wgml_fail(err, WGML_ERR_UNSUPPORTED, "%s: too many special tokens beyond %" PRId64, gguf_name(f),
                             v->n);
        v->moved_from[v->n_moved++] = id;
    }
    int64_t slot = v->n - 1;
    for (int k = 0; k < v->n_moved; k++) {
        /* skip slots that hold a special token already in range */
        for (;; slot--) {
            int taken = 0;
            for (int64_t i = 0; slot >= 0 && i < gguf_n_kv(f); i++) {
                const gguf_kv *kv = gguf_kv_at(f, i);
                taken |= is_special_id_key(kv) && special_id(kv) == slot;
            }
            if (slot < 0 || !taken) break;
        }
        if (slot < 0)
            return wgml_fail(err, WGML_ERR_UNSUPPORTED, "%s: no room for the special tokens in %" PRId64 " tokens",
                             gguf_name(f), v->n);
        int64_t id = v->moved_from[k];
        v->text[slot] = tok->v.arr.items[id].v.str.ptr;
        v->len[slot] = tok->v.arr.items[id].v.str.len;
        if (v->score) v->score[slot] = gguf_arr_f32(scores, (uint64_t)id);
        if (v->type) v->type[slot] = gguf_arr_i32(types, (uint64_t)id);
        v->moved_to[k] = slot--;
    }
    return WGML_OK;
}

/* Keeps the merges "a b" whose a, b and ab are all tokens of the new list. */
static wgml_status filter_merges(const gguf_value *merges, strset *set, vocab *v, wgml_error *err) {
    uint64_t n = merges->v.arr.n;
    v->merge = wgml_calloc(n ? n : 1, sizeof *v->merge);
    v->merge_len = wgml_calloc(n ? n : 1, sizeof *v->merge_len);
    char *cat = NULL;
    uint64_t cat_cap = 0;
    if (!v->merge || !v->merge_len) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory filtering merges");
    for (uint64_t i = 0; i < n; i++) {
        gguf_str m = merges->v.arr.items[i].v.str;
        const char *sp = memchr(m.ptr, ' ', m.len);
        if (!sp) continue;
        uint64_t la = (uint64_t)(sp - m.ptr), lb = m.len - la - 1;
        if (!la || !lb) continue; /* not a merge of two tokens */
        if (la + lb > cat_cap) {
            wgml_free(cat);
            cat_cap = (la + lb) * 2;
            if (!(cat = wgml_malloc(cat_cap))) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory");
        }
        memcpy(cat, m.ptr, la);
        memcpy(cat + la, sp + 1, lb);
        if (strset_find(set, m.ptr, la, 0) && strset_find(set, sp + 1, lb, 0) && strset_find(set, cat, la + lb, 0)) {
            v->merge[v->n_merges] = m.ptr;
            v->merge_len[v->n_merges++] = m.len;
        }
    }
    wgml_free(cat);
    return WGML_OK;
}

static void say(void (*log)(void *, const char *), void *user, const char *line) {
    if (log) log(user, line);
}

static wgml_status resize(const gguf_file *f, vocab *v, const gguf_value *tok, const gguf_value *scores,
                          const gguf_value *types, const gguf_value *merges, void (*log)(void *, const char *),
                          void *log_user, wgml_error *err) {
    const int64_t n = v->n, n_file = (int64_t)tok->v.arr.n, keep = n < n_file ? n : n_file;
    v->text = wgml_calloc((size_t)n, sizeof *v->text);
    v->len = wgml_calloc((size_t)n, sizeof *v->len);
    if (scores) v->score = wgml_calloc((size_t)n, sizeof *v->score);
    if (types) v->type = wgml_calloc((size_t)n, sizeof *v->type);
    if (!v->text || !v->len || (scores && !v->score) || (types && !v->type))
        return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory resizing the vocabulary");
    for (int64_t i = 0; i < keep; i++) {
        v->text[i] = tok->v.arr.items[i].v.str.ptr;
        v->len[i] = tok->v.arr.items[i].v.str.len;
        if (scores) v->score[i] = gguf_arr_f32(scores, (uint64_t)i);
        if (types) v->type[i] = gguf_arr_i32(types, (uint64_t)i);
    }
    wgml_status st = WGML_OK;
    if (n < n_file && (st = move_specials(f, v, n_file, tok, scores, types, err))) return st;
    strset set;
    if (!strset_init(&set, (size_t)(n > n_file ? n : n_file)))
        st = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory resizing the vocabulary");
    for (int64_t i = 0; !st && i < keep; i++)
        strset_find(&set, v->text[i], v->len[i], 1);
    char line[256];
    if (!st && n > n_file) {
        /* "[PAD<i>]" names, made unique by trailing '_' if the vocabulary has one already */
        size_t cap = (size_t)(n - n_file) * 40;
        char *p = v->pad_text = wgml_malloc(cap);
        if (!p) st = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory padding the vocabulary");
        for (int64_t i = n_file; !st && i < n; i++) {
            int len = snprintf(p, 32, "[PAD%" PRId64 "]", i);
            while (strset_find(&set, p, (uint64_t)len, 0) && len < 38)
                p[len++] = '_';
            strset_find(&set, p, (uint64_t)len, 1);
            v->text[i] = p;
            v->len[i] = (uint64_t)len;
            if (v->score) v->score[i] = PAD_SCORE;
            if (v->type) v->type[i] = TOKEN_TYPE_UNUSED;
            p += len;
        }
        snprintf(line, sizeof line, "vocabulary: %s has %" PRId64 " tokens; padded to %" PRId64 " with [PAD<i>] tokens",
                 gguf_name(f), n_file, n);
        if (!st) say(log, log_user, line);
    }
    if (!st && n < n_file) {
        for (int k = 0; k < v->n_moved; k++)
            strset_find(&set, v->text[v->moved_to[k]], v->len[v->moved_to[k]], 1);
        if (merges) st = filter_merges(merges, &set, v, err);
        snprintf(line, sizeof line,
                 "vocabulary: %s has %" PRId64 " tokens; kept the first %" PRId64 ", moved %d special token(s) to the "
                 "end, kept %" PRId64 " of %" PRIu64 " merges",
                 gguf_name(f), n_file, n, v->n_moved, v->n_merges, merges ? merges->v.arr.n : 0);
        if (!st) say(log, log_user, line);
    }
    strset_free(&set);
    return st;
}

/* Writes one special-id key, rewritten when its token moved. */
static wgml_status write_special(gguf_writer *w, const gguf_kv *kv, const vocab *v, wgml_error *err) {
    int64_t id = special_id(kv);
    for (int k = 0; k < v->n_moved; k++) {
        if (v->moved_from[k] != id) continue;
        if (kv->value.type == GGUF_TYPE_INT32) return gguf_writer_set_i32(w, kv->key, (int32_t)v->moved_to[k], err);
        return gguf_writer_set_u32(w, kv->key, (uint32_t)v->moved_to[k], err);
    }
    return gguf_writer_copy_kv(w, kv, err);
}

wgml_status synth_vocab_copy(gguf_writer *w, const gguf_file *f, int64_t n_vocab,
                             void (*log)(void *user, const char *line), void *log_user, wgml_error *err) {
    const gguf_value *tok = NULL, *scores = NULL, *types = NULL, *merges = NULL;
    int r = gguf_get_arr(f, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &tok, err);
    if (r < 0) return WGML_ERR_FORMAT;
    if (r == 0) return wgml_fail(err, WGML_ERR_FORMAT, "%s: no tokenizer.ggml.tokens: not a vocabulary", gguf_name(f));
    const int64_t n_file = (int64_t)tok->v.arr.n;
    if (n_file < 1 || n_vocab < 1) return wgml_fail(err, WGML_ERR_FORMAT, "%s: empty vocabulary", gguf_name(f));
    if (gguf_get_arr(f, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, &scores, err) < 0 ||
        gguf_get_arr(f, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, &types, err) < 0 ||
        gguf_get_arr(f, "tokenizer.ggml.merges", GGUF_TYPE_STRING, &merges, err) < 0)
        return WGML_ERR_FORMAT;
    if ((scores && (int64_t)scores->v.arr.n != n_file) || (types && (int64_t)types->v.arr.n != n_file))
        return wgml_fail(err, WGML_ERR_FORMAT, "%s: token scores/types do not match the %" PRId64 " tokens",
                         gguf_name(f), n_file);
    vocab v;
    memset(&v, 0, sizeof v);
    v.n = n_vocab;
    wgml_status st = WGML_OK;
    int resized = n_vocab != n_file;
    if (resized) st = resize(f, &v, tok, scores, types, merges, log, log_user, err);
    for (int64_t i = 0; !st && i < gguf_n_kv(f); i++) {
        const gguf_kv *kv = gguf_kv_at(f, i);
        /* keys the model wrote itself (an encoder's token_type_count) are its own */
        if (strncmp(kv->key, "tokenizer.", 10) != 0 || gguf_writer_has_key(w, kv->key)) continue;
        if (!resized)
            st = gguf_writer_copy_kv(w, kv, err);
        else if (!strcmp(kv->key, "tokenizer.ggml.tokens"))
            st = gguf_writer_set_arr_str(w, kv->key, v.text, v.len, (uint64_t)v.n, err);
        else if (!strcmp(kv->key, "tokenizer.ggml.scores"))
            st = gguf_writer_set_arr(w, kv->key, GGUF_TYPE_FLOAT32, v.score, (uint64_t)v.n, err);
        else if (!strcmp(kv->key, "tokenizer.ggml.token_type"))
            st = gguf_writer_set_arr(w, kv->key, GGUF_TYPE_INT32, v.type, (uint64_t)v.n, err);
        else if (!strcmp(kv->key, "tokenizer.ggml.merges") && n_vocab < n_file)
            st = gguf_writer_set_arr_str(w, kv->key, v.merge, v.merge_len, (uint64_t)v.n_merges, err);
        else if (is_special_id_key(kv))
            st = write_special(w, kv, &v, err);
        else
            st = gguf_writer_copy_kv(w, kv, err);
    }
    vocab_free(&v);
    return st;
}

/* ---- Whisper ---- */

/* Token k >= 256 of the synthesized vocabulary: j = k - 256; bit 0 of j says
 * whether a space leads, the rest (plus one) is written in bijective base 95,
 * one consonant-vowel syllable per digit: distinct j, distinct strings. */
static size_t whisper_synth_token(int k, char *out) {
    static const char cons[] = "bcdfghjklmnprstvwyz", vow[] = "aeiou";
    const int nc = (int)sizeof cons - 1, nv = (int)sizeof vow - 1;
    unsigned j = (unsigned)(k - 256), v = (j >> 1) + 1;
    size_t n = 0;
    if (j & 1) out[n++] = ' ';
    while (v) {
        unsigned d = (v - 1) % (unsigned)(nc * nv);
        out[n++] = cons[d / (unsigned)nv];
        out[n++] = vow[d % (unsigned)nv];
        v = (v - 1) / (unsigned)(nc * nv);
    }
    return n;
}

wgml_status synth_whisper_tokens(gguf_writer *w, const char *donor, int n_text,
                                 void (*log)(void *user, const char *line), void *log_user, wgml_error *err) {
    wgml_status st;
    if (n_text < 256) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "whisper vocabulary of %d tokens", n_text);
    if (donor) {
        gguf_file *f;
        if ((st = wgml_model_file_open(donor, &f, err))) return st;
        const gguf_value *toks;
        int r = gguf_get_arr(f, "whisper.tokens", GGUF_TYPE_STRING, &toks, err);
        if (r != 1) {
            gguf_close(f);
            if (r < 0) return err ? err->code : WGML_ERR_FORMAT;
            return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                             "%s: no whisper.tokens: the vocabulary must come from a Whisper model (GGUF or "
                             "whisper.cpp .bin)",
                             donor);
        }
        if (toks->v.arr.n != (uint64_t)n_text) {
            st = wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "%s: %" PRIu64 " Whisper tokens; this model needs %d (%s)",
                           donor, toks->v.arr.n, n_text,
                           n_text == 50257 ? "a multilingual vocabulary" : "an English-only vocabulary");
            gguf_close(f);
            return st;
        }
        const char **p = wgml_malloc((size_t)n_text * sizeof *p);
        uint64_t *len = wgml_malloc((size_t)n_text * sizeof *len);
        if (!p || !len) {
            st = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory");
        } else {
            for (int i = 0; i < n_text; i++) {
                p[i] = toks->v.arr.items[i].v.str.ptr;
                len[i] = toks->v.arr.items[i].v.str.len;
            }
            st = gguf_writer_set_arr_str(w, "whisper.tokens", p, len, (uint64_t)n_text, err);
        }
        wgml_free(p);
        wgml_free(len);
        gguf_close(f);
        if (!st && log) {
            char line[600];
            snprintf(line, sizeof line, "vocabulary: the %d tokens of %s", n_text, donor);
            log(log_user, line);
        }
        return st;
    }
    /* synthesized: 2 bytes per syllable, at most 4 syllables and a space */
    char *text = wgml_malloc((size_t)n_text * 16);
    const char **p = wgml_malloc((size_t)n_text * sizeof *p);
    uint64_t *len = wgml_malloc((size_t)n_text * sizeof *len);
    if (!text || !p || !len) {
        st = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory");
    } else {
        for (int i = 0; i < n_text; i++) {
            char *t = text + (size_t)i * 16;
            if (i < 256) {
                t[0] = (char)i;
                len[i] = 1;
            } else {
                len[i] = whisper_synth_token(i, t);
            }
            p[i] = t;
        }
        st = gguf_writer_set_arr_str(w, "whisper.tokens", p, len, (uint64_t)n_text, err);
        if (!st && log) {
            char line[200];
            snprintf(line, sizeof line,
                     "vocabulary: %d synthesized tokens (bytes, then made-up syllables: decoded text is not words; "
                     "--vocab takes a Whisper model's)",
                     n_text);
            log(log_user, line);
        }
    }
    wgml_free(text);
    wgml_free(p);
    wgml_free(len);
    return st;
}
