/*
 * hf_tokenizer.c - a Hugging Face folder's tokenizer as GGUF metadata (hf_tokenizer.h).
 *
 * tokenizer.json is parsed with the JSON reader of the template engine into
 * the folder's arena (as config.json is); token strings are used in place
 * there. spiece.model is read with a small protobuf reader below: every
 * length is checked against what is left of its message, so a hostile file
 * ends in an error naming the file and the field, never a read past the end.
 */
#include "model/hf_tokenizer.h"

#include "core/alloc.h"
#include "core/error.h"
#include "core/hash.h"
#include "format/file_bytes.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_TOKENIZER_JSON (64u << 20)
#define MAX_SPIECE         (64u << 20)
#define MAX_SMALL_JSON     (16u << 20) /* tokenizer_config.json, special_tokens_map.json, config.json */
#define MAX_TOKENS         (1 << 24)

/* token types (tokenizer.ggml.token_type, SentencePiece's numbering) */
enum { T_NORMAL = 1, T_UNKNOWN = 2, T_CONTROL = 3, T_USER = 4, T_UNUSED = 5, T_BYTE = 6 };

enum { KIND_NONE, KIND_CLIP_BPE, KIND_UNIGRAM, KIND_SPM_BPE };

/* The vocabulary being assembled. */
typedef struct vb {
    const char *file; /* the file being read, for messages */
    int kind;
    int32_t n;
    const char **text;
    uint64_t *len;
    int32_t *type;
    float *score; /* unigram / SentencePiece */
    const char **merge;
    uint64_t *merge_len;
    int64_t n_merge;
    char *merge_blob; /* merges given as pairs, joined with a space */
    int32_t bos, eos, unk, pad;
    int add_bos, add_eos;    /* -1: not said */
    int add_prefix, trim_ws; /* unigram normalization */
    int byte_fallback;
    const char *normalizer; /* tokenizer.ggml.normalizer: "nmt_nfkc", "nfkc", "identity", or NULL */
} vb;

static void vb_free(vb *v) {
    wgml_free(v->text);
    wgml_free(v->len);
    wgml_free(v->type);
    wgml_free(v->score);
    wgml_free(v->merge);
    wgml_free(v->merge_len);
    wgml_free(v->merge_blob);
}

static wgml_status vb_alloc(vb *v, int64_t n, int scores, wgml_error *err) {
    if (n < 1 || n > MAX_TOKENS)
        return wgml_fail(err, WGML_ERR_FORMAT, "%s: %lld tokens (1 .. %d are read)", v->file, (long long)n, MAX_TOKENS);
    v->n = (int32_t)n;
    v->text = wgml_calloc((size_t)n, sizeof *v->text);
    v->len = wgml_calloc((size_t)n, sizeof *v->len);
    v->type = wgml_calloc((size_t)n, sizeof *v->type);
    if (scores) v->score = wgml_calloc((size_t)n, sizeof *v->score);
    if (!v->text || !v->len || !v->type || (scores && !v->score))
        return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "%s: out of memory for %lld tokens", v->file, (long long)n);
    return WGML_OK;
}

/* Token id with text s, or -1 (linear: a handful of look-ups per folder). */
static int32_t vb_find(const vb *v, const char *s, size_t n) {
    for (int32_t i = 0; i < v->n; i++)
        if (v->text[i] && v->len[i] == n && memcmp(v->text[i], s, n) == 0) return i;
    return -1;
}

/* Puts token id; an id already holding the same text is fine (an added token
 * repeating the vocabulary), another text is an error. */
static wgml_status vb_put(vb *v, int64_t id, const char *s, size_t n, const char *what, wgml_error *err) {
    if (id < 0 || id >= v->n)
        return wgml_fail(err, WGML_ERR_FORMAT, "%s: %s: id %lld out of range (0..%d)", v->file, what, (long long)id,
                         v->n - 1);
    if (v->text[id]) {
        if (v->len[id] == n && memcmp(v->text[id], s, n) == 0) return WGML_OK;
        return wgml_fail(err, WGML_ERR_FORMAT, "%s: %s: id %lld given twice ('%.40s' and '%.40s')", v->file, what,
                         (long long)id, v->text[id], s);
    }
    v->text[id] = s, v->len[id] = n;
    if (!v->type[id]) v->type[id] = T_NORMAL;
    return WGML_OK;
}

static wgml_status vb_check_holes(const vb *v, wgml_error *err) {
    for (int32_t i = 0; i < v->n; i++)
        if (!v->text[i])
            return wgml_fail(err, WGML_ERR_FORMAT, "%s: no token has id %d (ids must be 0..%d)", v->file, i, v->n - 1);
    return WGML_OK;
}

/* ---- JSON helpers ---- */

static jv *member(const wgml_hf_model *hf, jv obj, const char *key) {
    jv *v = NULL;
    if (obj.t == JV_DICT) jx_dict_gets(hf->e, obj.u.d, key, strlen(key), &v);
    return v && v->t != JV_NONE ? v : NULL;
}

static int is_int(const jv *v, int64_t lo, int64_t hi) { return v && v->t == JV_INT && v->u.i >= lo && v->u.i <= hi; }

/* A token named in a config: "text" or {"content": "text", ...}; NULL if neither. */
static const jstr *token_name(const wgml_hf_model *hf, const jv *v) {
    if (!v) return NULL;
    if (v->t == JV_STR) return v->u.s;
    const jv *c = member(hf, *v, "content");
    return c && c->t == JV_STR ? c->u.s : NULL;
}

static wgml_status parse_json(const wgml_hf_model *hf, const char *dir, const char *name, size_t cap, int optional,
                              jv *out, char **text, wgml_error *err) {
    size_t len = 0;
    *out = jv_undef(NULL);
    wgml_status st = wgml_read_text_file(dir, name, cap, optional, text, &len, err);
    if (st || !*text) return st;
    if (jx_json_parse(hf->e, *text, len, name, out)) return wgml_fail(err, WGML_ERR_FORMAT, "%s", hf->e->msg);
    return WGML_OK;
}

/* ---- tokenizer.json ---- */

static wgml_status read_added(const wgml_hf_model *hf, vb *v, jv root, int64_t *max_id, int place, wgml_error *err) {
    const jv *added = member(hf, root, "added_tokens");
    if (!added) return WGML_OK;
    if (added->t != JV_LIST) return wgml_fail(err, WGML_ERR_FORMAT, "%s: \"added_tokens\" must be a list", v->file);
    for (size_t i = 0; i < added->u.l->n; i++) {
        jv a = added->u.l->v[i];
        const jv *id = member(hf, a, "id"), *content = member(hf, a, "content"), *special = member(hf, a, "special");
        if (!is_int(id, 0, MAX_TOKENS - 1) || !content || content->t != JV_STR || (special && special->t != JV_BOOL))
            return wgml_fail(err, WGML_ERR_FORMAT,
                             "%s: added_tokens[%zu] needs an \"id\" (0..%d), a \"content\" string and a boolean "
                             "\"special\"",
                             v->file, i, MAX_TOKENS - 1);
        if (!place) {
            if (id->u.i > *max_id) *max_id = id->u.i;
            continue;
        }
        if (content->u.s->len == 0)
            return wgml_fail(err, WGML_ERR_FORMAT, "%s: added_tokens[%zu] is empty", v->file, i);
        wgml_status st = vb_put(v, id->u.i, content->u.s->s, content->u.s->len, "added_tokens", err);
        if (st) return st;
        v->type[id->u.i] = special && special->u.i ? T_CONTROL : T_USER;
    }
    return WGML_OK;
}

/* Merges as "a b" strings or ["a", "b"] pairs. */
static wgml_status read_merges(const wgml_hf_model *hf, vb *v, jv model, wgml_error *err) {
    const jv *merges = member(hf, model, "merges");
    if (!merges || merges->t != JV_LIST)
        return wgml_fail(err, WGML_ERR_FORMAT, "%s: model.merges must be a list", v->file);
    size_t n = merges->u.l->n, blob = 0;
    if (n > (size_t)MAX_TOKENS) return wgml_fail(err, WGML_ERR_FORMAT, "%s: model.merges: too many (%zu)", v->file, n);
    for (size_t i = 0; i < n; i++) {
        jv m = merges->u.l->v[i];
        if (m.t == JV_STR) {
            const char *sp = memchr(m.u.s->s, ' ', m.u.s->len);
            if (!sp || sp == m.u.s->s || sp + 1 == m.u.s->s + m.u.s->len ||
                memchr(sp + 1, ' ', (size_t)(m.u.s->s + m.u.s->len - sp - 1)))
                return wgml_fail(err, WGML_ERR_FORMAT, "%s: model.merges[%zu] is not two symbols \"a b\"", v->file, i);
        } else if (m.t == JV_LIST && m.u.l->n == 2 && m.u.l->v[0].t == JV_STR && m.u.l->v[1].t == JV_STR) {
            const jstr *a = m.u.l->v[0].u.s, *b = m.u.l->v[1].u.s;
            if (!a->len || !b->len || memchr(a->s, ' ', a->len) || memchr(b->s, ' ', b->len))
                return wgml_fail(err, WGML_ERR_FORMAT,
                                 "%s: model.merges[%zu]: symbols must be non-empty, without spaces", v->file, i);
            blob += a->len + b->len + 2;
        } else {
            return wgml_fail(err, WGML_ERR_FORMAT, "%s: model.merges[%zu] must be \"a b\" or [\"a\", \"b\"]", v->file,
                             i);
        }
    }
    v->merge = wgml_calloc(n ? n : 1, sizeof *v->merge);
    v->merge_len = wgml_calloc(n ? n : 1, sizeof *v->merge_len);
    v->merge_blob = wgml_malloc(blob ? blob : 1);
    if (!v->merge || !v->merge_len || !v->merge_blob)
        return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "%s: out of memory for %zu merges", v->file, n);
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        jv m = merges->u.l->v[i];
        if (m.t == JV_STR) {
            v->merge[i] = m.u.s->s, v->merge_len[i] = m.u.s->len;
            continue;
        }
        const jstr *a = m.u.l->v[0].u.s, *b = m.u.l->v[1].u.s;
        char *p = v->merge_blob + at;
        memcpy(p, a->s, a->len);
        p[a->len] = ' ';
        memcpy(p + a->len + 1, b->s, b->len);
        p[a->len + 1 + b->len] = '\0';
        v->merge[i] = p, v->merge_len[i] = a->len + 1 + b->len;
        at += a->len + b->len + 2;
    }
    v->n_merge = (int64_t)n;
    return WGML_OK;
}

/* BOS and EOS from the post-processor, when it says. */
static wgml_status read_post(const wgml_hf_model *hf, vb *v, jv root, wgml_error *err) {
    const jv *pp = member(hf, root, "post_processor");
    if (!pp || pp->t != JV_DICT) return WGML_OK;
    const jv *type = member(hf, *pp, "type");
    if (type && type->t == JV_STR && !strcmp(type->u.s->s, "Sequence")) { /* the first one that names tokens */
        const jv *list = member(hf, *pp, "processors");
        if (!list || list->t != JV_LIST) return WGML_OK;
        for (size_t i = 0; i < list->u.l->n; i++) {
            const jv *t = member(hf, list->u.l->v[i], "type");
            if (t && t->t == JV_STR && strcmp(t->u.s->s, "ByteLevel") != 0) {
                pp = &list->u.l->v[i];
                type = t;
                break;
            }
        }
    }
    if (!type || type->t != JV_STR) return WGML_OK;
    const char *ty = type->u.s->s;
    if (!strcmp(ty, "RobertaProcessing") || !strcmp(ty, "BertProcessing")) {
        const char *keys[2] = {"cls", "sep"};
        int32_t *ids[2] = {&v->bos, &v->eos};
        for (int k = 0; k < 2; k++) {
            const jv *pair = member(hf, *pp, keys[k]);
            if (!pair || pair->t != JV_LIST || pair->u.l->n != 2 || !is_int(&pair->u.l->v[1], 0, v->n - 1))
                return wgml_fail(err, WGML_ERR_FORMAT, "%s: post_processor.%s must be [token, id] with an id in 0..%d",
                                 v->file, keys[k], v->n - 1);
            *ids[k] = (int32_t)pair->u.l->v[1].u.i;
        }
        v->add_bos = v->add_eos = 1;
        return WGML_OK;
    }
    if (strcmp(ty, "TemplateProcessing") != 0) return WGML_OK;
    const jv *single = member(hf, *pp, "single"), *specials = member(hf, *pp, "special_tokens");
    if (!single || single->t != JV_LIST) return WGML_OK;
    int seen_a = 0, before = 0, after = 0;
    for (size_t i = 0; i < single->u.l->n; i++) {
        jv item = single->u.l->v[i];
        if (member(hf, item, "Sequence")) {
            seen_a = 1;
            continue;
        }
        const jv *sp = member(hf, item, "SpecialToken");
        const jv *name = sp ? member(hf, *sp, "id") : NULL;
        if (!name || name->t != JV_STR) continue;
        int32_t id = -1;
        const jv *entry = specials ? member(hf, *specials, name->u.s->s) : NULL;
        const jv *ids = entry ? member(hf, *entry, "ids") : NULL;
        if (ids && ids->t == JV_LIST && ids->u.l->n >= 1) {
            if (!is_int(&ids->u.l->v[0], 0, v->n - 1))
                return wgml_fail(err, WGML_ERR_FORMAT,
                                 "%s: post_processor.special_tokens['%.40s'].ids: an id out of "
                                 "0..%d",
                                 v->file, name->u.s->s, v->n - 1);
            id = (int32_t)ids->u.l->v[0].u.i;
        } else {
            id = vb_find(v, name->u.s->s, name->u.s->len);
        }
        if (id < 0) continue;
        if (!seen_a && !before) v->bos = id, before = 1;
        if (seen_a && !after) v->eos = id, after = 1;
    }
    if (seen_a) v->add_bos = before, v->add_eos = after;
    return WGML_OK;
}

/* A normalizer or pre-tokenizer of the given type: obj itself, or one of its "normalizers" /
 * "pretokenizers" (a Sequence); NULL if none. */
static const jv *step_of(const wgml_hf_model *hf, const jv *obj, const char *list, const char *type) {
    if (!obj) return NULL;
    const jv *t = member(hf, *obj, "type");
    if (t && t->t == JV_STR && !strcmp(t->u.s->s, type)) return obj;
    const jv *seq = member(hf, *obj, list);
    for (size_t i = 0; seq && seq->t == JV_LIST && i < seq->u.l->n; i++) {
        t = member(hf, seq->u.l->v[i], "type");
        if (t && t->t == JV_STR && !strcmp(t->u.s->s, type)) return &seq->u.l->v[i];
    }
    return NULL;
}

static int str_is(const jv *v, const char *s) { return v && v->t == JV_STR && !strcmp(v->u.s->s, s); }

/* SentencePiece's BPE as tokenizer.json holds it (Gemma's, SigLIP 2's, Llama 2's): merges ranked
 * first to last become scores, as the SentencePiece model had them: the piece the i-th merge makes
 * scores -i, the first merge making it; pieces no merge makes score below every merge. (The
 * engine merges the best-scoring pair, leftmost first: the same order as the ranks.) */
static wgml_status spm_scores(vb *v, wgml_error *err) {
    size_t cap = 1;
    while (cap < 2 * (size_t)v->n) cap <<= 1;
    int32_t *slot = wgml_malloc(cap * sizeof *slot);
    char *seen = wgml_calloc((size_t)v->n, 1);
    char *buf = NULL;
    size_t buf_cap = 0;
    wgml_status st = slot && seen ? WGML_OK : wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "%s: out of memory", v->file);
    if (!st) {
        for (size_t i = 0; i < cap; i++) slot[i] = -1;
        for (int32_t id = 0; id < v->n; id++) { /* first id of each text */
            size_t h = (size_t)wgml_fnv64(WGML_FNV64_BASIS, v->text[id], v->len[id]) & (cap - 1);
            while (slot[h] >= 0 && !(v->len[slot[h]] == v->len[id] && !memcmp(v->text[slot[h]], v->text[id], v->len[id])))
                h = (h + 1) & (cap - 1);
            if (slot[h] < 0) slot[h] = id;
        }
        const float floor_score = -(float)v->n_merge - 1.0f;
        for (int32_t id = 0; id < v->n; id++) v->score[id] = v->type[id] == T_NORMAL ? floor_score : 0.0f;
        for (int64_t i = 0; i < v->n_merge && !st; i++) {
            size_t n = (size_t)v->merge_len[i];
            if (n + 1 > buf_cap) {
                char *nb = wgml_realloc(buf, buf_cap = 2 * n + 16);
                if (!nb) {
                    st = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "%s: out of memory", v->file);
                    break;
                }
                buf = nb;
            }
            const char *sp = memchr(v->merge[i], ' ', n);
            size_t a = (size_t)(sp - v->merge[i]), k = n - 1; /* "a b" -> "ab" */
            memcpy(buf, v->merge[i], a);
            memcpy(buf + a, sp + 1, n - a - 1);
            size_t h = (size_t)wgml_fnv64(WGML_FNV64_BASIS, buf, k) & (cap - 1);
            while (slot[h] >= 0 && !(v->len[slot[h]] == k && !memcmp(v->text[slot[h]], buf, k))) h = (h + 1) & (cap - 1);
            int32_t id = slot[h];
            if (id >= 0 && !seen[id]) {
                seen[id] = 1;
                v->score[id] = -(float)i;
            }
        }
    }
    wgml_free(slot);
    wgml_free(seen);
    wgml_free(buf);
    return st;
}

static wgml_status read_tokenizer_json(const wgml_hf_model *hf, vb *v, jv root, const char *model_type, int strict,
                                       wgml_error *err) {
    const jv *model = member(hf, root, "model");
    const jv *type = model ? member(hf, *model, "type") : NULL;
    if (!model || model->t != JV_DICT || !type || type->t != JV_STR)
        return wgml_fail(err, WGML_ERR_FORMAT, "%s: no \"model\" object with a \"type\" string", v->file);
    const char *ty = type->u.s->s;
    const jv *vocab = member(hf, *model, "vocab");
    wgml_status st;
    int64_t max_id = -1;
    if (!strcmp(ty, "BPE")) {
        /* CLIP's ("</w>" ends words), or SentencePiece's: "\u2581" for spaces, from a Replace
         * normalizer or the Metaspace pre-tokenizer, usually with byte fallback */
        const jv *eow = member(hf, *model, "end_of_word_suffix"), *bf = member(hf, *model, "byte_fallback");
        const jv *norm = member(hf, root, "normalizer"), *pre = member(hf, root, "pre_tokenizer");
        const jv *repl = step_of(hf, norm, "normalizers", "Replace"), *meta = step_of(hf, pre, "pretokenizers", "Metaspace");
        const int clip = str_is(eow, "</w>");
        const int spm = !clip && (!eow || (eow->t == JV_STR && eow->u.s->len == 0)) &&
                        ((bf && bf->t == JV_BOOL && bf->u.i) || meta ||
                         (repl && str_is(member(hf, *repl, "content"), "\u2581")));
        if (!clip && !spm) {
            if (!strict) return WGML_OK; /* another kind of BPE: not read here, the model may not need it */
            return wgml_fail(err, WGML_ERR_UNSUPPORTED,
                             "%s: a byte-level BPE (GPT-2's kind) is not read from tokenizer.json (CLIP's BPE with "
                             "\"</w>\" and SentencePiece's BPE with \"\u2581\" are)",
                             v->file);
        }
        if (!vocab || vocab->t != JV_DICT)
            return wgml_fail(err, WGML_ERR_FORMAT, "%s: model.vocab must be an object {token: id}", v->file);
        const jdict *d = vocab->u.d;
        for (size_t i = 0; i < d->n; i++) {
            if (d->k[i].t != JV_STR || !is_int(&d->v[i], 0, MAX_TOKENS - 1))
                return wgml_fail(err, WGML_ERR_FORMAT, "%s: model.vocab: every id must be an integer in 0..%d", v->file,
                                 MAX_TOKENS - 1);
            if (d->v[i].u.i > max_id) max_id = d->v[i].u.i;
        }
        if ((st = read_added(hf, v, root, &max_id, 0, err))) return st;
        if ((st = vb_alloc(v, max_id + 1, spm, err))) return st;
        for (size_t i = 0; i < d->n; i++) {
            if (d->k[i].u.s->len == 0)
                return wgml_fail(err, WGML_ERR_FORMAT, "%s: model.vocab has an empty token", v->file);
            if ((st = vb_put(v, d->v[i].u.i, d->k[i].u.s->s, d->k[i].u.s->len, "model.vocab", err))) return st;
        }
        if ((st = read_added(hf, v, root, &max_id, 1, err)) || (st = vb_check_holes(v, err))) return st;
        if ((st = read_merges(hf, v, *model, err))) return st;
        const jstr *unk = token_name(hf, member(hf, *model, "unk_token"));
        if (unk) v->unk = vb_find(v, unk->s, unk->len);
        v->kind = KIND_CLIP_BPE;
        if (spm) {
            if ((st = spm_scores(v, err))) return st;
            wgml_free(v->merge), wgml_free(v->merge_len), wgml_free(v->merge_blob); /* the scores say it all */
            v->merge = NULL, v->merge_len = NULL, v->merge_blob = NULL, v->n_merge = 0;
            v->kind = KIND_SPM_BPE;
            v->byte_fallback = bf && bf->t == JV_BOOL && bf->u.i;
            if (v->unk >= 0) v->type[v->unk] = T_UNKNOWN;
            /* a "\u2581" before the text: a Prepend normalizer (Llama 2), or Metaspace's scheme (not Gemma) */
            const jv *prep = step_of(hf, norm, "normalizers", "Prepend");
            const jv *aps = meta ? member(hf, *meta, "add_prefix_space") : NULL,
                     *scheme = meta ? member(hf, *meta, "prepend_scheme") : NULL;
            v->add_prefix = prep && str_is(member(hf, *prep, "prepend"), "\u2581");
            if (aps && aps->t == JV_BOOL) v->add_prefix = (int)aps->u.i;
            if (scheme && scheme->t == JV_STR) v->add_prefix = strcmp(scheme->u.s->s, "never") != 0;
            v->trim_ws = 0; /* tokenizers keeps every space */
        }
    } else if (!strcmp(ty, "Unigram")) {
        if (!vocab || vocab->t != JV_LIST)
            return wgml_fail(err, WGML_ERR_FORMAT, "%s: model.vocab must be a list of [piece, score]", v->file);
        const jlist *l = vocab->u.l;
        max_id = (int64_t)l->n - 1;
        if ((st = read_added(hf, v, root, &max_id, 0, err))) return st;
        if ((st = vb_alloc(v, max_id + 1, 1, err))) return st;
        for (size_t i = 0; i < l->n; i++) {
            jv e = l->v[i];
            if (e.t != JV_LIST || e.u.l->n != 2 || e.u.l->v[0].t != JV_STR || e.u.l->v[0].u.s->len == 0 ||
                (e.u.l->v[1].t != JV_INT && e.u.l->v[1].t != JV_FLOAT))
                return wgml_fail(err, WGML_ERR_FORMAT,
                                 "%s: model.vocab[%zu] must be [piece, score] (a non-empty "
                                 "string and a number)",
                                 v->file, i);
            double sc = e.u.l->v[1].t == JV_INT ? (double)e.u.l->v[1].u.i : e.u.l->v[1].u.f;
            if (!isfinite(sc) || fabs(sc) > 1e30)
                return wgml_fail(err, WGML_ERR_FORMAT, "%s: model.vocab[%zu]: the score is not a finite number",
                                 v->file, i);
            if ((st = vb_put(v, (int64_t)i, e.u.l->v[0].u.s->s, e.u.l->v[0].u.s->len, "model.vocab", err))) return st;
            v->score[i] = (float)sc;
        }
        if ((st = read_added(hf, v, root, &max_id, 1, err)) || (st = vb_check_holes(v, err))) return st;
        const jv *unk = member(hf, *model, "unk_id");
        if (unk && !is_int(unk, 0, v->n - 1))
            return wgml_fail(err, WGML_ERR_FORMAT, "%s: model.unk_id must be an id in 0..%d", v->file, v->n - 1);
        if (unk) v->unk = (int32_t)unk->u.i, v->type[v->unk] = T_UNKNOWN;
        const jv *bf = member(hf, *model, "byte_fallback");
        v->byte_fallback = bf && bf->t == JV_BOOL && bf->u.i;
        v->kind = KIND_UNIGRAM;
        /* the normalizer: SentencePiece's precompiled charsmap (nmt_nfkc, as the converter copies it) or NFKC */
        const jv *norm = member(hf, root, "normalizer");
        if (step_of(hf, norm, "normalizers", "Precompiled")) v->normalizer = "nmt_nfkc";
        else if (step_of(hf, norm, "normalizers", "NFKC")) v->normalizer = "nfkc";
        /* the Metaspace pre-tokenizer's prefix space */
        const jv *pre = member(hf, root, "pre_tokenizer");
        const jv *pts = pre ? member(hf, *pre, "pretokenizers") : NULL;
        const jv *ms = pre;
        for (size_t i = 0; pts && pts->t == JV_LIST && i < pts->u.l->n; i++) {
            const jv *t = member(hf, pts->u.l->v[i], "type");
            if (t && t->t == JV_STR && !strcmp(t->u.s->s, "Metaspace")) ms = &pts->u.l->v[i];
        }
        const jv *aps = ms ? member(hf, *ms, "add_prefix_space") : NULL,
                 *scheme = ms ? member(hf, *ms, "prepend_scheme") : NULL;
        if (aps && aps->t == JV_BOOL) v->add_prefix = (int)aps->u.i;
        if (scheme && scheme->t == JV_STR) v->add_prefix = strcmp(scheme->u.s->s, "never") != 0;
    } else {
        if (!strict) return WGML_OK;
        return wgml_fail(err, WGML_ERR_UNSUPPORTED,
                         "%s: model.type '%.40s' is not read (BPE with \"</w>\" as CLIP's or with "
                         "\"\u2581\" as SentencePiece's, and Unigram are)",
                         v->file, ty);
    }
    (void)model_type;
    const jv *pad = member(hf, root, "padding");
    const jv *pad_id = pad ? member(hf, *pad, "pad_id") : NULL;
    if (is_int(pad_id, 0, v->n - 1)) v->pad = (int32_t)pad_id->u.i;
    return read_post(hf, v, root, err);
}

/* ---- spiece.model: SentencePiece's ModelProto ---- */

typedef struct pb {
    const uint8_t *p, *end;
} pb;

static int pb_varint(pb *r, uint64_t *out) {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (r->p >= r->end) return -1;
        uint8_t b = *r->p++;
        v |= (uint64_t)(b & 0x7F) << shift;
        if (!(b & 0x80)) {
            *out = v;
            return 0;
        }
    }
    return -1;
}

/* The next field: its number, wire type, and for wire type 2 its bytes (sub). */
static int pb_next(pb *r, uint32_t *field, int *wire, uint64_t *val, pb *sub) {
    uint64_t key;
    if (pb_varint(r, &key) || key >> 32) return -1;
    *field = (uint32_t)(key >> 3);
    *wire = (int)(key & 7);
    switch (*wire) {
    case 0: return pb_varint(r, val);
    case 1:
        if (r->end - r->p < 8) return -1;
        r->p += 8;
        return 0;
    case 2: {
        uint64_t n;
        if (pb_varint(r, &n) || n > (uint64_t)(r->end - r->p)) return -1;
        sub->p = r->p, sub->end = r->p + n;
        r->p += n;
        return 0;
    }
    case 5:
        if (r->end - r->p < 4) return -1;
        *val = (uint64_t)r->p[0] | (uint64_t)r->p[1] << 8 | (uint64_t)r->p[2] << 16 | (uint64_t)r->p[3] << 24;
        r->p += 4;
        return 0;
    }
    return -1; /* groups and unknown wire types */
}

static wgml_status pb_bad(const vb *v, const char *where, wgml_error *err) {
    return wgml_fail(err, WGML_ERR_FORMAT, "%s: malformed protobuf in %s", v->file, where);
}

static wgml_status read_spiece(const uint8_t *data, size_t size, vb *v, wgml_error *err) {
    /* pass 1: count pieces, read the trainer and normalizer specs */
    int64_t model_type = 1, unk_id = 0, bos_id = 1, eos_id = 2, pad_id = -1;
    int64_t n = 0;
    pb r = {data, data + size}, sub;
    uint32_t field;
    int wire;
    uint64_t val;
    while (r.p < r.end) {
        if (pb_next(&r, &field, &wire, &val, &sub)) return pb_bad(v, "ModelProto", err);
        if (field == 1) {
            if (wire != 2) return pb_bad(v, "ModelProto.pieces", err);
            n++;
        } else if (field == 2 && wire == 2) { /* TrainerSpec */
            pb t = sub;
            while (t.p < t.end) {
                pb s2;
                if (pb_next(&t, &field, &wire, &val, &s2)) return pb_bad(v, "ModelProto.trainer_spec", err);
                if (wire != 0) continue;
                int64_t x = (int64_t)(int32_t)(uint32_t)val; /* int32 fields: negatives are sign-extended */
                if (field == 3) model_type = (int64_t)val;
                if (field == 35) v->byte_fallback = val != 0;
                if (field == 40) unk_id = x;
                if (field == 41) bos_id = x;
                if (field == 42) eos_id = x;
                if (field == 43) pad_id = x;
            }
        } else if (field == 3 && wire == 2) { /* NormalizerSpec */
            pb t = sub;
            int named = 0, charsmap = 0;
            while (t.p < t.end) {
                pb s2;
                if (pb_next(&t, &field, &wire, &val, &s2)) return pb_bad(v, "ModelProto.normalizer_spec", err);
                if (wire == 2 && field == 1) { /* name: the rule the charsmap was built from */
                    static const char *const known[] = {"nmt_nfkc", "nfkc", "identity"};
                    size_t nl = (size_t)(s2.end - s2.p);
                    named = 1;
                    for (size_t k = 0; k < 3; k++)
                        if (nl == strlen(known[k]) && !memcmp(s2.p, known[k], nl)) v->normalizer = known[k];
                }
                if (wire == 2 && field == 2) charsmap = s2.end > s2.p; /* precompiled_charsmap */
                if (wire != 0) continue;
                if (field == 3) v->add_prefix = val != 0;
                if (field == 4) v->trim_ws = val != 0;
            }
            if (!named && charsmap) v->normalizer = "nmt_nfkc"; /* SentencePiece's default rule */
        }
    }
    if (model_type == 1)
        v->kind = KIND_UNIGRAM;
    else if (model_type == 2)
        v->kind = KIND_SPM_BPE;
    else
        return wgml_fail(err, WGML_ERR_UNSUPPORTED,
                         "%s: trainer_spec.model_type %lld is not read (1 unigram and 2 "
                         "BPE are)",
                         v->file, (long long)model_type);
    wgml_status st = vb_alloc(v, n, 1, err);
    if (st) return st;
    /* pass 2: the pieces */
    r = (pb){data, data + size};
    int64_t i = 0;
    while (r.p < r.end) {
        if (pb_next(&r, &field, &wire, &val, &sub)) return pb_bad(v, "ModelProto", err);
        if (field != 1) continue;
        const uint8_t *piece = NULL;
        size_t piece_len = 0;
        float score = 0.0f;
        uint64_t type = T_NORMAL;
        while (sub.p < sub.end) {
            pb s2;
            if (pb_next(&sub, &field, &wire, &val, &s2)) return pb_bad(v, "a SentencePiece", err);
            if (field == 1 && wire == 2) piece = s2.p, piece_len = (size_t)(s2.end - s2.p);
            if (field == 2 && wire == 5) {
                uint32_t bits = (uint32_t)val;
                memcpy(&score, &bits, 4);
            }
            if (field == 3 && wire == 0) type = val;
        }
        if (!piece || piece_len == 0)
            return wgml_fail(err, WGML_ERR_FORMAT, "%s: piece %lld has no text", v->file, (long long)i);
        if (!isfinite(score) || fabsf(score) > 1e30f)
            return wgml_fail(err, WGML_ERR_FORMAT, "%s: piece %lld: the score is not a finite number", v->file,
                             (long long)i);
        if (type < T_NORMAL || type > T_BYTE)
            return wgml_fail(err, WGML_ERR_FORMAT, "%s: piece %lld: type %llu is not a SentencePiece type (1..6)",
                             v->file, (long long)i, (unsigned long long)type);
        v->text[i] = (const char *)piece, v->len[i] = piece_len;
        v->score[i] = score;
        v->type[i] = (int32_t)type;
        if (type == T_UNKNOWN && v->unk < 0) v->unk = (int32_t)i;
        i++;
    }
    int64_t *ids[3] = {&bos_id, &eos_id, &pad_id};
    int32_t *dst[3] = {&v->bos, &v->eos, &v->pad};
    for (int k = 0; k < 3; k++)
        if (*ids[k] >= 0 && *ids[k] < v->n) *dst[k] = (int32_t)*ids[k];
    if (v->unk < 0 && unk_id >= 0 && unk_id < v->n) v->unk = (int32_t)unk_id;
    if (v->bos >= 0 && (v->type[v->bos] != T_CONTROL || v->bos == v->eos)) v->bos = -1; /* a disabled or reused id */
    if (v->kind == KIND_SPM_BPE && v->add_bos < 0) v->add_bos = 1;
    return WGML_OK;
}

/* ---- tokenizer_config.json, special_tokens_map.json ---- */

/* The special tokens a config names override what the model file said (HF's tokenizer takes
 * them from tokenizer_config.json: SiglipTokenizer pads with "</s>" where spiece.model's
 * trainer says pad_id 0); the first file to name one wins (said[k]). */
static void read_config_tokens(const wgml_hf_model *hf, vb *v, jv cfg, int said[4], int *said_bos, int *said_eos) {
    const char *keys[4] = {"bos_token", "eos_token", "unk_token", "pad_token"};
    int32_t *ids[4] = {&v->bos, &v->eos, &v->unk, &v->pad};
    for (int k = 0; k < 4; k++) {
        const jstr *name = token_name(hf, member(hf, cfg, keys[k]));
        if (!name || said[k]) continue;
        int32_t id = vb_find(v, name->s, name->len);
        if (id < 0) continue; /* a name the vocabulary lacks: the model file's id stays */
        *ids[k] = id;
        said[k] = 1;
    }
    const jv *ab = member(hf, cfg, "add_bos_token"), *ae = member(hf, cfg, "add_eos_token");
    if (ab && ab->t == JV_BOOL && !*said_bos) v->add_bos = (int)ab->u.i, *said_bos = 1;
    if (ae && ae->t == JV_BOOL && !*said_eos) v->add_eos = (int)ae->u.i, *said_eos = 1;
}

/* ---- writing ---- */

static wgml_status write_keys(const vb *v, const char *model_type, gguf_writer *w, wgml_error *err) {
    const char *model = v->kind == KIND_CLIP_BPE ? "gpt2" : v->kind == KIND_UNIGRAM ? "t5" : "llama";
    const char *pre = v->kind == KIND_CLIP_BPE                                                     ? "clip"
                      : v->kind == KIND_UNIGRAM && model_type && !strncmp(model_type, "siglip", 6) ? "siglip"
                                                                                                   : NULL;
    wgml_status st = gguf_writer_set_str(w, "tokenizer.ggml.model", model, err);
    if (!st && pre) st = gguf_writer_set_str(w, "tokenizer.ggml.pre", pre, err);
    if (!st) st = gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", v->text, v->len, (uint64_t)v->n, err);
    if (!st) st = gguf_writer_set_arr(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, v->type, (uint64_t)v->n, err);
    if (!st && v->score)
        st = gguf_writer_set_arr(w, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, v->score, (uint64_t)v->n, err);
    if (!st && v->merge)
        st = gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", v->merge, v->merge_len, (uint64_t)v->n_merge, err);
    const char *id_keys[4] = {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                              "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.padding_token_id"};
    const int32_t ids[4] = {v->bos, v->eos, v->unk, v->pad};
    for (int k = 0; k < 4 && !st; k++)
        if (ids[k] >= 0) st = gguf_writer_set_u32(w, id_keys[k], (uint32_t)ids[k], err);
    if (!st && v->add_bos >= 0) st = gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", v->add_bos, err);
    if (!st && v->add_eos >= 0) st = gguf_writer_set_bool(w, "tokenizer.ggml.add_eos_token", v->add_eos, err);
    if (!st && v->kind == KIND_UNIGRAM && v->normalizer)
        st = gguf_writer_set_str(w, "tokenizer.ggml.normalizer", v->normalizer, err);
    if (!st && v->kind != KIND_CLIP_BPE) {
        st = gguf_writer_set_bool(w, "tokenizer.ggml.add_space_prefix", v->add_prefix, err);
        if (!st) st = gguf_writer_set_bool(w, "tokenizer.ggml.remove_extra_whitespaces", v->trim_ws, err);
    }
    return st;
}

static int has_file(const char *dir, const char *name) {
    char *p = wgml_path_join(dir, name);
    struct stat sb;
    int ok = p && stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
    wgml_free(p);
    return ok;
}

int wgml_hf_tokenizer_detect(const char *dir) {
    return dir && (has_file(dir, "tokenizer.json") || has_file(dir, "spiece.model"));
}

static wgml_status write_tokenizer(const wgml_hf_model *hf, const char *model_type, int strict, gguf_writer *w,
                                   wgml_error *err) {
    if (gguf_writer_has_key(w, "tokenizer.ggml.model")) return WGML_OK; /* the family wrote one */
    const int json = has_file(hf->dir, "tokenizer.json");
    if (!json && !has_file(hf->dir, "spiece.model")) {
        if (!strict) return WGML_OK;
        return wgml_fail(err, WGML_ERR_FORMAT, "%s: no tokenizer.json or spiece.model", hf->dir);
    }
    vb v;
    memset(&v, 0, sizeof v);
    v.bos = v.eos = v.unk = v.pad = -1;
    v.add_bos = v.add_eos = -1;
    v.add_prefix = v.trim_ws = 1;
    char *text = NULL, *cfg_text = NULL, *map_text = NULL;
    char *raw = NULL;
    wgml_status st = WGML_OK;
    if (json) {
        jv root;
        v.file = "tokenizer.json";
        st = parse_json(hf, hf->dir, "tokenizer.json", MAX_TOKENIZER_JSON, 0, &root, &text, err);
        if (!st && root.t != JV_DICT) st = wgml_fail(err, WGML_ERR_FORMAT, "tokenizer.json: not a JSON object");
        if (!st) st = read_tokenizer_json(hf, &v, root, model_type, strict, err);
    } else {
        size_t len = 0;
        v.file = "spiece.model";
        st = wgml_read_text_file(hf->dir, "spiece.model", MAX_SPIECE, 0, &raw, &len, err);
        if (!st) st = read_spiece((const uint8_t *)raw, len, &v, err);
    }
    if (!st && v.kind != KIND_NONE) {
        jv cfg, map;
        int said_bos = 0, said_eos = 0, said[4] = {0};
        st = parse_json(hf, hf->dir, "tokenizer_config.json", MAX_SMALL_JSON, 1, &cfg, &cfg_text, err);
        if (!st) st = parse_json(hf, hf->dir, "special_tokens_map.json", MAX_SMALL_JSON, 1, &map, &map_text, err);
        if (!st) {
            read_config_tokens(hf, &v, cfg, said, &said_bos, &said_eos);
            read_config_tokens(hf, &v, map, said, &said_bos, &said_eos);
        }
        /* what the files did not say: CLIP's and SentencePiece's conventions */
        if (v.kind == KIND_CLIP_BPE) {
            if (v.bos < 0) v.bos = vb_find(&v, "<|startoftext|>", 15);
            if (v.eos < 0) v.eos = vb_find(&v, "<|endoftext|>", 13);
            if (v.add_bos < 0) v.add_bos = 1;
            if (v.add_eos < 0) v.add_eos = 1;
        } else if (v.kind == KIND_UNIGRAM) {
            if (v.eos < 0) v.eos = vb_find(&v, "</s>", 4);
            if (v.add_bos < 0) v.add_bos = 0;
            if (v.add_eos < 0) v.add_eos = 1;
        } else if (v.kind == KIND_SPM_BPE && json) { /* Gemma's names, then Llama's */
            if (v.bos < 0 && (v.bos = vb_find(&v, "<bos>", 5)) < 0) v.bos = vb_find(&v, "<s>", 3);
            if (v.eos < 0 && (v.eos = vb_find(&v, "<eos>", 5)) < 0) v.eos = vb_find(&v, "</s>", 4);
            if (v.add_bos < 0) v.add_bos = v.bos >= 0;
            if (v.add_eos < 0) v.add_eos = 0;
        }
        if (v.unk >= 0 && v.kind == KIND_UNIGRAM) v.type[v.unk] = T_UNKNOWN;
        if (v.byte_fallback)
            for (int32_t i = 0; i < v.n; i++)
                if (v.len[i] == 6 && !memcmp(v.text[i], "<0x", 3) && v.text[i][5] == '>' && v.type[i] == T_NORMAL)
                    v.type[i] = T_BYTE;
        if (!st) st = write_keys(&v, model_type, w, err);
    }
    vb_free(&v);
    wgml_free(text);
    wgml_free(cfg_text);
    wgml_free(map_text);
    wgml_free(raw);
    return st;
}

wgml_status wgml_hf_tokenizer_write(const wgml_hf_model *hf, const char *model_type, gguf_writer *w, wgml_error *err) {
    return write_tokenizer(hf, model_type, 0, w, err);
}

wgml_status wgml_hf_tokenizer_open(const char *dir, gguf_file **out, wgml_error *err) {
    *out = NULL;
    wgml_hf_model hf;
    memset(&hf, 0, sizeof hf);
    hf.dir = dir;
    jinja_limits lim = jinja_default_limits();
    lim.max_memory = (size_t)256 << 20;
    lim.max_depth = 64;
    gguf_writer *w = NULL;
    char *cfg_text = NULL, *tc_text = NULL;
    void *data = NULL;
    size_t size = 0;
    wgml_status st = jinja_env_create(&lim, &hf.e, err);
    jv cfg = jv_undef(NULL), tc = jv_undef(NULL);
    if (!st) st = parse_json(&hf, dir, "config.json", MAX_SMALL_JSON, 1, &cfg, &cfg_text, err);
    if (!st) st = parse_json(&hf, dir, "tokenizer_config.json", MAX_SMALL_JSON, 1, &tc, &tc_text, err);
    const char *type = NULL, *cls = NULL;
    if (!st && !wgml_hf_str(&hf, cfg, "model_type", &type) && wgml_hf_str(&hf, tc, "tokenizer_class", &cls)) {
        if (!strncmp(cls, "CLIPTokenizer", 13)) type = "clip";
        if (!strncmp(cls, "SiglipTokenizer", 15)) type = "siglip";
    }
    if (!st && !(w = gguf_writer_create())) st = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory");
    if (!st) st = write_tokenizer(&hf, type, 1, w, err);
    if (!st) st = gguf_writer_begin_memory(w, err);
    if (!st) st = gguf_writer_finish(w, err);
    if (!st) st = gguf_writer_take_memory(w, &data, &size, err);
    if (!st && (st = gguf_open_memory(data, size, dir, out, err))) free(data);
    if (!st) gguf_own_bytes(*out);
    if (st) wgml_error_prefix(err, "%s", dir);
    gguf_writer_free(w);
    if (hf.e) jinja_env_free(hf.e);
    wgml_free(cfg_text);
    wgml_free(tc_text);
    return st;
}
