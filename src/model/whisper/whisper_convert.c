/*
 * whisper_convert.c - the official Whisper checkpoint (.pt) to wgml's
 * Whisper GGUF (see whisper_convert.h for what is written and checked).
 *
 * Three steps: the dims (the pickle's first bytes, whisper_pt_dims) give the
 * list of tensors the state dict must hold with their shapes; every tensor of
 * the checkpoint is matched against it (pth reader: names, dtypes, shapes,
 * storages already validated); then the GGUF is declared (keys, mel_filters,
 * each tensor in the checkpoint's order) and written one tensor at a time
 * (only one tensor's floats in memory).
 */
#include "model/whisper/whisper_convert.h"

#include "audio/mel.h"
#include "core/alloc.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/quant.h"
#include "format/file_bytes.h"
#include "format/gguf.h"
#include "format/model_file.h"
#include "format/pth.h"
#include "format/zip.h"
#include "model/whisper/whisper_vocab.h"
#include "tools/quantize.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the dims' names in the checkpoint, in WHISPER_DIM_* order */
static const char *const DIM_NAMES[WHISPER_N_DIMS] = {"n_vocab",       "n_audio_ctx", "n_audio_state", "n_audio_head",
                                                      "n_audio_layer", "n_text_ctx",  "n_text_state",  "n_text_head",
                                                      "n_text_layer",  "n_mels"};
/* the GGUF keys of the dims, in the same order (ggml_whisper.c's) */
static const char *const DIM_KEYS[WHISPER_N_DIMS] = {"whisper.vocab_size",
                                                     "whisper.audio.context_length",
                                                     "whisper.audio.embedding_length",
                                                     "whisper.audio.head_count",
                                                     "whisper.audio.block_count",
                                                     "whisper.text.context_length",
                                                     "whisper.text.embedding_length",
                                                     "whisper.text.head_count",
                                                     "whisper.text.block_count",
                                                     "whisper.n_mels"};

#define PREFIX "model_state_dict/"

/* ---- the dims: the pickle's first bytes ---- */

typedef struct pk {
    const uint8_t *p;
    size_t n, pos;
    const char *name;
    wgml_error *err;
} pk;

static wgml_status pk_bad(pk *k, size_t at, const char *what) {
    return wgml_fail(k->err, WGML_ERR_FORMAT,
                     "%s: data.pkl offset %zu: %s (a Whisper checkpoint's pickle starts with its \"dims\" dict of "
                     "ints, as whisper's torch.save writes it)",
                     k->name, at, what);
}

static void pk_skip_memo(pk *k) {
    while (k->pos < k->n) {
        uint8_t op = k->p[k->pos];
        size_t len = op == 'q' ? 2 : op == 'r' ? 5 : op == 0x94 ? 1 : 0; /* BINPUT, LONG_BINPUT, MEMOIZE */
        if (!len || k->n - k->pos < len) return;
        k->pos += len;
    }
}

static wgml_status pk_expect(pk *k, uint8_t op, const char *what) {
    if (k->pos >= k->n) return pk_bad(k, k->pos, "the pickle ends early");
    if (k->p[k->pos] != op) {
        char msg[96];
        snprintf(msg, sizeof msg, "opcode 0x%02x where %s was expected", k->p[k->pos], what);
        return pk_bad(k, k->pos, msg);
    }
    k->pos++;
    return WGML_OK;
}

static uint64_t le(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* A string (BINUNICODE, SHORT_BINUNICODE, BINUNICODE8, SHORT_BINSTRING, BINSTRING). */
static wgml_status pk_str(pk *k, const uint8_t **s, size_t *len, const char *what) {
    const size_t at = k->pos;
    if (at >= k->n) return pk_bad(k, at, "the pickle ends early");
    const uint8_t op = k->p[at];
    const int w = op == 'X' || op == 'T' ? 4 : op == 0x8c || op == 'U' ? 1 : op == 0x8d ? 8 : 0;
    if (!w) {
        char msg[96];
        snprintf(msg, sizeof msg, "opcode 0x%02x where %s (a string) was expected", op, what);
        return pk_bad(k, at, msg);
    }
    if (k->n - at - 1 < (size_t)w) return pk_bad(k, at, "the pickle ends inside a string's length");
    uint64_t n = le(k->p + at + 1, w);
    if (op == 'T' && n > INT32_MAX) return pk_bad(k, at, "a string of negative length");
    if (n > k->n - at - 1 - (size_t)w) return pk_bad(k, at, "a string runs past the end of the pickle");
    *s = k->p + at + 1 + w;
    *len = (size_t)n;
    k->pos = at + 1 + (size_t)w + (size_t)n;
    return WGML_OK;
}

/* An int (BININT1, BININT2, BININT, LONG1). */
static wgml_status pk_int(pk *k, int64_t *v, int *in_range) {
    const size_t at = k->pos;
    if (at >= k->n) return pk_bad(k, at, "the pickle ends early");
    const uint8_t op = k->p[at];
    const size_t left = k->n - at - 1;
    *in_range = 1;
    if (op == 'K' || op == 'M' || op == 'J') {
        const int w = op == 'K' ? 1 : op == 'M' ? 2 : 4;
        if (left < (size_t)w) return pk_bad(k, at, "the pickle ends inside an int");
        uint64_t u = le(k->p + at + 1, w);
        *v = op == 'J' ? (int64_t)(int32_t)(uint32_t)u : (int64_t)u;
        k->pos = at + 1 + (size_t)w;
        return WGML_OK;
    }
    if (op == 0x8a) { /* LONG1: a length byte, then that many bytes, two's complement little-endian */
        if (left < 1 || left - 1 < k->p[at + 1]) return pk_bad(k, at, "the pickle ends inside a LONG1");
        const int n = k->p[at + 1];
        const uint8_t *b = k->p + at + 2;
        k->pos = at + 2 + (size_t)n;
        *v = 0;
        if (n == 0) return WGML_OK;
        const int m = n < 8 ? n : 8, neg = (b[n - 1] & 0x80) != 0;
        uint64_t u = le(b, m);
        if (m < 8 && neg) u |= ~(uint64_t)0 << (8 * m);
        for (int j = 8; j < n; j++) /* longer: only copies of the sign */
            if (b[j] != (neg ? 0xff : 0x00)) *in_range = 0;
        if (n > 8 && ((b[7] & 0x80) != 0) != neg) *in_range = 0;
        if (*in_range) *v = (int64_t)u;
        return WGML_OK;
    }
    char msg[96];
    snprintf(msg, sizeof msg, "opcode 0x%02x where an int was expected", op);
    return pk_bad(k, at, msg);
}

wgml_status whisper_pt_dims(const void *pickle, size_t size, const char *name, int32_t out[WHISPER_N_DIMS],
                            wgml_error *err) {
    static const uint8_t none[1];
    pk k = {.p = pickle ? pickle : none, .n = pickle ? size : 0, .name = name ? name : "<memory>", .err = err};
    int seen[WHISPER_N_DIMS] = {0};
    wgml_status st;
    for (int i = 0; i < WHISPER_N_DIMS; i++)
        out[i] = 0;
    if (k.n >= 2 && k.p[0] == 0x80) k.pos = 2;              /* PROTO */
    if (k.n - k.pos >= 9 && k.p[k.pos] == 0x95) k.pos += 9; /* FRAME (protocol 4) */
    if ((st = pk_expect(&k, '}', "the checkpoint's dict (EMPTY_DICT)"))) return st;
    pk_skip_memo(&k);
    if ((st = pk_expect(&k, '(', "the MARK of the dict's items"))) return st;
    const uint8_t *s;
    size_t len, at = k.pos;
    if ((st = pk_str(&k, &s, &len, "the key \"dims\""))) return st;
    if (len != 4 || memcmp(s, "dims", 4) != 0) return pk_bad(&k, at, "the first key is not \"dims\"");
    pk_skip_memo(&k);
    if ((st = pk_expect(&k, '}', "the dims dict (EMPTY_DICT)"))) return st;
    pk_skip_memo(&k);
    if (k.pos < k.n && k.p[k.pos] == '(') { /* its items: MARK key value ... SETITEMS */
        k.pos++;
        for (;;) {
            if (k.pos < k.n && k.p[k.pos] == 'u') {
                k.pos++;
                break;
            }
            at = k.pos;
            if ((st = pk_str(&k, &s, &len, "a key of the dims (or SETITEMS)"))) return st;
            pk_skip_memo(&k);
            const size_t vat = k.pos;
            int64_t v = 0;
            int ok = 0;
            if ((st = pk_int(&k, &v, &ok))) return st;
            pk_skip_memo(&k);
            for (int i = 0; i < WHISPER_N_DIMS; i++) {
                if (strlen(DIM_NAMES[i]) != len || memcmp(DIM_NAMES[i], s, len) != 0) continue;
                char msg[128];
                if (seen[i]) {
                    snprintf(msg, sizeof msg, "dims key '%s' appears twice", DIM_NAMES[i]);
                    return pk_bad(&k, at, msg);
                }
                if (!ok || v < 1 || v > INT32_MAX) {
                    snprintf(msg, sizeof msg, "dims '%s' is %s%" PRId64 " (must be in [1, 2^31))", DIM_NAMES[i],
                             ok ? "" : "beyond 64 bits: ", v);
                    return pk_bad(&k, vat, msg);
                }
                seen[i] = 1;
                out[i] = (int32_t)v;
            }
        }
    }
    for (int i = 0; i < WHISPER_N_DIMS; i++)
        if (!seen[i])
            return wgml_fail(err, WGML_ERR_FORMAT, "%s: the checkpoint's dims have no '%s'", k.name, DIM_NAMES[i]);
    return WGML_OK;
}

/* ---- tiktoken rank files ---- */

static int b64(uint8_t c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

/* Decodes n base64 characters (n a multiple of 4, '=' padding only at the end) into out; -1 when invalid.
 * A lone "=" is the empty token: multilingual.tiktoken's last line is "= 50256" (Python's lenient
 * b64decode reads it as b""). */
static int64_t b64_decode(const uint8_t *s, size_t n, uint8_t *out) {
    if (n == 1 && s[0] == '=') return 0;
    if (n == 0 || n % 4) return -1;
    size_t o = 0;
    for (size_t i = 0; i < n; i += 4) {
        const int last = i + 4 == n;
        int pad = 0, v[4];
        for (int j = 0; j < 4; j++) {
            if (s[i + j] == '=') {
                if (!last || j < 2) return -1;
                pad++;
                v[j] = 0;
            } else {
                if (pad) return -1; /* '=' then a character */
                if ((v[j] = b64(s[i + j])) < 0) return -1;
            }
        }
        const uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
        out[o++] = (uint8_t)(w >> 16);
        if (pad < 2) out[o++] = (uint8_t)(w >> 8);
        if (pad < 1) out[o++] = (uint8_t)w;
    }
    return (int64_t)o;
}

typedef struct tok_ref {
    const char *p;
    uint64_t len;
    int64_t i;
} tok_ref;

static int cmp_tok(const void *a, const void *b) {
    const tok_ref *x = a, *y = b;
    const uint64_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->p, y->p, (size_t)n);
    if (c) return c;
    if (x->len != y->len) return x->len < y->len ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

void whisper_token_list_free(whisper_token_list *l) {
    if (!l) return;
    wgml_free((void *)l->tok);
    wgml_free(l->len);
    wgml_free(l->bytes);
    memset(l, 0, sizeof *l);
}

wgml_status whisper_tiktoken_parse(const void *data, size_t size, const char *name, whisper_token_list *out,
                                   wgml_error *err) {
    memset(out, 0, sizeof *out);
    if (!name) name = "<memory>";
    const uint8_t *p = data;
    if (!p || size == 0) return wgml_fail(err, WGML_ERR_FORMAT, "%s: an empty tiktoken rank file", name);
    size_t lines = 0;
    for (size_t i = 0; i < size; i++)
        lines += p[i] == '\n';
    if (p[size - 1] != '\n') lines++;
    out->tok = wgml_malloc(lines * sizeof *out->tok);
    out->len = wgml_malloc(lines * sizeof *out->len);
    out->bytes = wgml_malloc(size / 4 * 3 + 1);
    if (!out->tok || !out->len || !out->bytes) {
        whisper_token_list_free(out);
        return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "%s: out of memory for %zu tokens", name, lines);
    }
    size_t used = 0;
    wgml_status st = WGML_OK;
    int64_t n = 0;
    for (size_t at = 0; at < size && !st; n++) {
        const uint8_t *nl = memchr(p + at, '\n', size - at);
        size_t end = nl ? (size_t)(nl - p) : size, next = nl ? end + 1 : size;
        if (end > at && p[end - 1] == '\r') end--;
        const uint8_t *line = p + at;
        const size_t len = end - at;
        const uint8_t *sp = memchr(line, ' ', len);
        if (len == 0) {
            st = wgml_fail(err, WGML_ERR_FORMAT,
                           "%s: line %" PRId64 " is empty (a tiktoken rank file has \"BASE64 RANK\" lines)", name,
                           n + 1);
            break;
        }
        if (!sp) {
            st = wgml_fail(err, WGML_ERR_FORMAT,
                           "%s: line %" PRId64 " is not \"BASE64 RANK\" (no space): not a tiktoken rank file", name,
                           n + 1);
            break;
        }
        const size_t tl = (size_t)(sp - line), rl = len - tl - 1;
        int64_t rank = 0;
        int ok = rl >= 1 && rl <= 10 && !(rl > 1 && sp[1] == '0');
        for (size_t j = 0; j < rl && ok; j++) {
            ok = sp[1 + j] >= '0' && sp[1 + j] <= '9';
            rank = rank * 10 + (sp[1 + j] - '0');
        }
        if (!ok) {
            st = wgml_fail(err, WGML_ERR_FORMAT, "%s: line %" PRId64 ": the rank '%.*s' is not a decimal number", name,
                           n + 1, (int)(rl < 24 ? rl : 24), (const char *)sp + 1);
            break;
        }
        if (rank != n) {
            st = wgml_fail(err, WGML_ERR_FORMAT,
                           "%s: line %" PRId64 " has rank %" PRId64 "; ranks must be 0, 1, 2, ... in order", name,
                           n + 1, rank);
            break;
        }
        const int64_t dl = b64_decode(line, tl, (uint8_t *)out->bytes + used);
        if (dl < 0) {
            st = wgml_fail(err, WGML_ERR_FORMAT,
                           "%s: line %" PRId64 ": the token '%.*s' is not base64 (or '=', the empty token)", name,
                           n + 1, (int)(tl < 40 ? tl : 40), (const char *)line);
            break;
        }
        out->tok[n] = out->bytes + used;
        out->len[n] = (uint64_t)dl;
        used += (size_t)dl;
        at = next;
    }
    out->n = n;
    if (!st) { /* no token twice */
        tok_ref *r = wgml_malloc((size_t)n * sizeof *r);
        if (!r) {
            st = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "%s: out of memory", name);
        } else {
            for (int64_t i = 0; i < n; i++)
                r[i] = (tok_ref){out->tok[i], out->len[i], i};
            qsort(r, (size_t)n, sizeof *r, cmp_tok);
            for (int64_t i = 1; i < n && !st; i++)
                if (r[i].len == r[i - 1].len && !memcmp(r[i].p, r[i - 1].p, (size_t)r[i].len))
                    st = wgml_fail(err, WGML_ERR_FORMAT, "%s: lines %" PRId64 " and %" PRId64 " hold the same token",
                                   name, r[i - 1].i + 1, r[i].i + 1);
            wgml_free(r);
        }
    }
    if (st) whisper_token_list_free(out);
    return st;
}

/* ---- the vocabulary ---- */

typedef struct vocab {
    const uint8_t *base;
    size_t size;
    int kind;
    gguf_file *gf;
    whisper_token_list list; /* a tiktoken file's, or (bytes NULL) pointers into gf's strings */
} vocab;

static void vocab_free(vocab *v) {
    whisper_token_list_free(&v->list);
    if (v->gf) gguf_close(v->gf);
    if (v->base) wgml_file_bytes_release(v->base, v->size, v->kind);
    memset(v, 0, sizeof *v);
}

static wgml_status vocab_load(const char *path, vocab *v, wgml_error *err) {
    memset(v, 0, sizeof *v);
    wgml_status st = wgml_file_bytes(path, 1, "a vocabulary", &v->base, &v->size, &v->kind, err);
    if (st) return st;
    const wgml_model_format fmt = wgml_model_format_detect(v->base, v->size);
    if (fmt == WGML_MODEL_FORMAT_UNKNOWN) {
        st = whisper_tiktoken_parse(v->base, v->size, path, &v->list, err);
        if (st == WGML_ERR_FORMAT)
            wgml_error_prefix(err, "the vocabulary is neither a Whisper model (GGUF or whisper.cpp .bin) nor a "
                                   "tiktoken rank file");
        return st;
    }
    if ((st = wgml_model_file_open_memory(v->base, v->size, path, &v->gf, err))) return st;
    const gguf_value *toks = NULL;
    int r = gguf_get_arr(v->gf, "whisper.tokens", GGUF_TYPE_STRING, &toks, err);
    if (r != 1) {
        if (r < 0) return err ? err->code : WGML_ERR_FORMAT;
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                         "%s: no whisper.tokens: the vocabulary must come from a Whisper model (whisper.cpp .bin or "
                         "Whisper GGUF) or a tiktoken rank file",
                         path);
    }
    const uint64_t n = toks->v.arr.n;
    v->list.tok = wgml_malloc((size_t)(n ? n : 1) * sizeof *v->list.tok);
    v->list.len = wgml_malloc((size_t)(n ? n : 1) * sizeof *v->list.len);
    if (!v->list.tok || !v->list.len) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
    for (uint64_t i = 0; i < n; i++) {
        v->list.tok[i] = toks->v.arr.items[i].v.str.ptr;
        v->list.len[i] = toks->v.arr.items[i].v.str.len;
    }
    v->list.n = (int64_t)n;
    return WGML_OK;
}

/* ---- the state dict ---- */

enum { K_PLAIN, K_CONV_W, K_CONV_B };

typedef struct want {
    char name[64];
    int ndim;
    int64_t size[3]; /* torch order */
    int kind;
    const pth_tensor *src;
    uint32_t type; /* in the GGUF */
    int n_dims;    /* in the GGUF */
    int64_t ne[2];
} want;

typedef struct plan {
    const char *name; /* the checkpoint's path */
    wgml_error *err;
    int32_t d[WHISPER_N_DIMS];
    want *w;
    int n, cap;
    want **order; /* the checkpoint's order */
} plan;

static wgml_status add(plan *P, int kind, int ndim, int64_t a, int64_t b, int64_t c, const char *fmt, ...)
    WGML_PRINTF(7, 8);
static wgml_status add(plan *P, int kind, int ndim, int64_t a, int64_t b, int64_t c, const char *fmt, ...) {
    if (P->n == P->cap) {
        int cap = P->cap ? 2 * P->cap : 256;
        want *w = wgml_realloc(P->w, (size_t)cap * sizeof *w);
        if (!w) return wgml_fail(P->err, WGML_ERR_OUT_OF_MEMORY, "%s: out of memory", P->name);
        P->w = w, P->cap = cap;
    }
    want *w = &P->w[P->n++];
    memset(w, 0, sizeof *w);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->name, sizeof w->name, fmt, ap); /* the longest is 41 bytes, blocks < 1024 */
    va_end(ap);
    w->kind = kind, w->ndim = ndim, w->size[0] = a, w->size[1] = b, w->size[2] = c;
    return WGML_OK;
}

static wgml_status add_block(plan *P, const char *stack, int i, int64_t S, int cross) {
    static const char *const att[2] = {"attn", "cross_attn"};
    wgml_status st = WGML_OK;
    for (int a = 0; a < 1 + cross && !st; a++) {
        const char *t = att[a];
        if ((st = add(P, K_PLAIN, 2, S, S, 0, "%s.blocks.%d.%s.query.weight", stack, i, t)) ||
            (st = add(P, K_PLAIN, 1, S, 0, 0, "%s.blocks.%d.%s.query.bias", stack, i, t)) ||
            (st = add(P, K_PLAIN, 2, S, S, 0, "%s.blocks.%d.%s.key.weight", stack, i, t)) ||
            (st = add(P, K_PLAIN, 2, S, S, 0, "%s.blocks.%d.%s.value.weight", stack, i, t)) ||
            (st = add(P, K_PLAIN, 1, S, 0, 0, "%s.blocks.%d.%s.value.bias", stack, i, t)) ||
            (st = add(P, K_PLAIN, 2, S, S, 0, "%s.blocks.%d.%s.out.weight", stack, i, t)) ||
            (st = add(P, K_PLAIN, 1, S, 0, 0, "%s.blocks.%d.%s.out.bias", stack, i, t)) ||
            (st = add(P, K_PLAIN, 1, S, 0, 0, "%s.blocks.%d.%s_ln.weight", stack, i, t)) ||
            (st = add(P, K_PLAIN, 1, S, 0, 0, "%s.blocks.%d.%s_ln.bias", stack, i, t)))
            return st;
    }
    if ((st = add(P, K_PLAIN, 2, 4 * S, S, 0, "%s.blocks.%d.mlp.0.weight", stack, i)) ||
        (st = add(P, K_PLAIN, 1, 4 * S, 0, 0, "%s.blocks.%d.mlp.0.bias", stack, i)) ||
        (st = add(P, K_PLAIN, 2, S, 4 * S, 0, "%s.blocks.%d.mlp.2.weight", stack, i)) ||
        (st = add(P, K_PLAIN, 1, S, 0, 0, "%s.blocks.%d.mlp.2.bias", stack, i)) ||
        (st = add(P, K_PLAIN, 1, S, 0, 0, "%s.blocks.%d.mlp_ln.weight", stack, i)) ||
        (st = add(P, K_PLAIN, 1, S, 0, 0, "%s.blocks.%d.mlp_ln.bias", stack, i)))
        return st;
    return WGML_OK;
}

/* The official state dict's tensors for the dims, in its order. */
static wgml_status expected(plan *P) {
    const int32_t *d = P->d;
    const int64_t Sa = d[WHISPER_DIM_N_AUDIO_STATE], St = d[WHISPER_DIM_N_TEXT_STATE];
    wgml_status st;
    if ((st = add(P, K_PLAIN, 2, d[WHISPER_DIM_N_AUDIO_CTX], Sa, 0, "encoder.positional_embedding")) ||
        (st = add(P, K_CONV_W, 3, Sa, d[WHISPER_DIM_N_MELS], 3, "encoder.conv1.weight")) ||
        (st = add(P, K_CONV_B, 1, Sa, 0, 0, "encoder.conv1.bias")) ||
        (st = add(P, K_CONV_W, 3, Sa, Sa, 3, "encoder.conv2.weight")) ||
        (st = add(P, K_CONV_B, 1, Sa, 0, 0, "encoder.conv2.bias")))
        return st;
    for (int i = 0; i < d[WHISPER_DIM_N_AUDIO_LAYER]; i++)
        if ((st = add_block(P, "encoder", i, Sa, 0))) return st;
    if ((st = add(P, K_PLAIN, 1, Sa, 0, 0, "encoder.ln_post.weight")) ||
        (st = add(P, K_PLAIN, 1, Sa, 0, 0, "encoder.ln_post.bias")) ||
        (st = add(P, K_PLAIN, 2, d[WHISPER_DIM_N_TEXT_CTX], St, 0, "decoder.positional_embedding")) ||
        (st = add(P, K_PLAIN, 2, d[WHISPER_DIM_N_VOCAB], St, 0, "decoder.token_embedding.weight")))
        return st;
    for (int i = 0; i < d[WHISPER_DIM_N_TEXT_LAYER]; i++)
        if ((st = add_block(P, "decoder", i, St, 1))) return st;
    if ((st = add(P, K_PLAIN, 1, St, 0, 0, "decoder.ln.weight")) ||
        (st = add(P, K_PLAIN, 1, St, 0, 0, "decoder.ln.bias")))
        return st;
    return WGML_OK;
}

static int cmp_want(const void *a, const void *b) { return strcmp(((const want *)a)->name, ((const want *)b)->name); }
static int cmp_key_want(const void *k, const void *b) { return strcmp(k, ((const want *)b)->name); }

static void shape_str(char *buf, size_t n, int ndim, const int64_t *size) {
    size_t o = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < ndim && o < n; i++)
        o += (size_t)snprintf(buf + o, n - o, "%s%" PRId64, i ? ", " : "", size[i]);
    if (o < n) snprintf(buf + o, n - o, "]");
}

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcmp(s + n - m, suffix);
}

/* The GGUF type of w for the asked type (src/tools/synth.c's Whisper rules). */
static uint32_t out_type(const want *w, uint32_t base) {
    if (w->n_dims == 1 || ends_with(w->name, "positional_embedding")) return WGML_F32;
    if (w->kind == K_CONV_W) return base == WGML_F32 ? WGML_F32 : WGML_F16;
    return w->ne[0] % wgml_dtype_get(base)->block_size ? WGML_F16 : base;
}

/* Matches the checkpoint's tensors with the expected ones: every one there,
 * no other, float dtypes, the dims' shapes; fills P->order. */
static wgml_status match(plan *P, const pth_file *p, uint32_t base) {
    wgml_error *err = P->err;
    char name[PTH_MAX_NAME + 32];
    for (int i = 0; i < P->n; i++) { /* missing ones first: the likeliest mistake, named plainly */
        snprintf(name, sizeof name, PREFIX "%s", P->w[i].name);
        if (!(P->w[i].src = pth_find(p, name)))
            return wgml_fail(err, WGML_ERR_FORMAT,
                             "%s: tensor '%s' is missing from model_state_dict (the dims ask for %d encoder and %d "
                             "decoder blocks)",
                             P->name, P->w[i].name, P->d[WHISPER_DIM_N_AUDIO_LAYER], P->d[WHISPER_DIM_N_TEXT_LAYER]);
    }
    const int n = P->n;
    qsort(P->w, (size_t)n, sizeof *P->w, cmp_want); /* for the lookups (src pointers travel with the entries) */
    if (!(P->order = wgml_calloc((size_t)n, sizeof *P->order)))
        return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "%s: out of memory", P->name);
    int k = 0;
    for (int64_t i = 0; i < pth_n_tensors(p); i++) {
        const pth_tensor *t = pth_tensor_at(p, i);
        const size_t pl = strlen(PREFIX);
        want *w =
            strncmp(t->name, PREFIX, pl) ? NULL : bsearch(t->name + pl, P->w, (size_t)n, sizeof *P->w, cmp_key_want);
        if (!w)
            return wgml_fail(err, WGML_ERR_FORMAT,
                             "%s: tensor '%s' is not one of the official Whisper state dict's (model_state_dict/...)",
                             P->name, t->name);
        if (k == n) /* cannot happen: names are unique and each found one is expected */
            return wgml_fail(err, WGML_ERR_FORMAT, "%s: more tensors than expected", P->name);
        P->order[k++] = w;
        const char *nm = w->name;
        if (t->dtype != WGML_F16 && t->dtype != WGML_F32 && t->dtype != WGML_BF16)
            return wgml_fail(err, WGML_ERR_UNSUPPORTED, "%s: tensor '%s' is %s (float16, float32 or bfloat16 expected)",
                             P->name, nm, wgml_dtype_name(t->dtype));
        int same = t->ndim == w->ndim;
        for (int j = 0; j < w->ndim && same; j++)
            same = t->size[j] == w->size[j];
        if (!same) {
            char have[160], exp[96];
            shape_str(have, sizeof have, t->ndim, t->size);
            shape_str(exp, sizeof exp, w->ndim, w->size);
            return wgml_fail(err, WGML_ERR_FORMAT, "%s: tensor '%s' has shape %s; the checkpoint's dims give %s",
                             P->name, nm, have, exp);
        }
        /* the GGUF shape */
        if (w->kind == K_CONV_W) {
            w->n_dims = 2, w->ne[0] = 3 * w->size[1], w->ne[1] = w->size[0];
        } else if (w->ndim == 1) {
            w->n_dims = 1, w->ne[0] = w->size[0], w->ne[1] = 1;
        } else {
            w->n_dims = 2, w->ne[0] = w->size[1], w->ne[1] = w->size[0];
        }
        w->type = out_type(w, base);
    }
    if (k != n) return wgml_fail(err, WGML_ERR_FORMAT, "%s: %d tensors where %d are expected", P->name, k, n);
    return WGML_OK;
}

/* ---- checking the dims ---- */

static wgml_status check_dims(const plan *P, whisper_specials *sp) {
    static const int32_t max[WHISPER_N_DIMS] = {51866,   1 << 16, 1 << 16, 1024, 1024,
                                                1 << 16, 1 << 16, 1024,    1024, 1024};
    const int32_t *d = P->d;
    for (int i = 0; i < WHISPER_N_DIMS; i++)
        if (d[i] < 1 || d[i] > max[i])
            return wgml_fail(P->err, WGML_ERR_FORMAT, "%s: dims '%s' is %" PRId32 " (1 .. %" PRId32 ")", P->name,
                             DIM_NAMES[i], d[i], max[i]);
    wgml_status st = whisper_specials_init(sp, d[WHISPER_DIM_N_VOCAB], P->err);
    if (st) {
        wgml_error_prefix(P->err, "%s: dims 'n_vocab'", P->name);
        return st;
    }
    if (d[WHISPER_DIM_N_AUDIO_STATE] % d[WHISPER_DIM_N_AUDIO_HEAD] ||
        d[WHISPER_DIM_N_TEXT_STATE] % d[WHISPER_DIM_N_TEXT_HEAD])
        return wgml_fail(P->err, WGML_ERR_FORMAT,
                         "%s: dims: widths %" PRId32 " and %" PRId32 " do not split into %" PRId32 " and %" PRId32
                         " heads",
                         P->name, d[WHISPER_DIM_N_AUDIO_STATE], d[WHISPER_DIM_N_TEXT_STATE],
                         d[WHISPER_DIM_N_AUDIO_HEAD], d[WHISPER_DIM_N_TEXT_HEAD]);
    return WGML_OK;
}

/* ---- writing ---- */

/* The values of checkpoint tensor w in its GGUF layout, as f32 (buf: numel floats; tmp: the same, for a permute). */
static wgml_status values(const plan *P, const pth_file *p, const want *w, float *buf, float *tmp) {
    const pth_tensor *t = w->src;
    if (w->kind != K_CONV_W) return pth_tensor_read_f32(p, t, buf, (size_t)t->numel, P->err);
    wgml_status st = pth_tensor_read_f32(p, t, tmp, (size_t)t->numel, P->err);
    if (st) return st;
    const int64_t S = t->size[0], C = t->size[1];
    for (int64_t o = 0; o < S; o++) /* w[o][c][j] -> [o][j][c] */
        for (int64_t c = 0; c < C; c++)
            for (int64_t j = 0; j < 3; j++)
                buf[(o * 3 + j) * C + c] = tmp[(o * C + c) * 3 + j];
    return WGML_OK;
}

static wgml_status write_all(plan *P, const pth_file *p, const whisper_token_list *voc, uint32_t base,
                             const whisper_convert_options *opt, const char *path, void **mem, size_t *mem_size) {
    wgml_error *err = P->err;
    const int n_mels = P->d[WHISPER_DIM_N_MELS];
    const quantize_recipe *rc = quantize_recipe_find(wgml_dtype_name(base));
    uint64_t elements[WGML_DTYPE_COUNT] = {0}, total = 0, written = 0;
    int64_t max_n = (int64_t)n_mels * WGML_MEL_N_BINS, max_conv = 1;
    size_t max_q = 0;
    for (int i = 0; i < P->n; i++) {
        const want *w = P->order[i];
        const int64_t ne = w->ne[0] * w->ne[1];
        if (w->n_dims == 2 && !ends_with(w->name, "positional_embedding")) elements[w->type] += (uint64_t)ne;
        if (ne > max_n) max_n = ne;
        if (w->kind == K_CONV_W && ne > max_conv) max_conv = ne;
        const size_t q = wgml_row_size(w->type, w->ne[0]) * (size_t)w->ne[1];
        if (q > max_q) max_q = q;
        total += (uint64_t)ne * 4;
    }
    gguf_writer *wr = gguf_writer_create();
    float *buf = wgml_malloc((size_t)max_n * sizeof *buf);
    float *tmp = wgml_malloc((size_t)max_conv * sizeof *tmp);
    void *qbuf = wgml_malloc(max_q ? max_q : 1);
    wgml_status st = WGML_OK;
    if (!wr || !buf || !tmp || !qbuf || !rc) {
        st = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "%s: out of memory (%" PRId64 " floats for the largest tensor)",
                       P->name, max_n);
        goto done;
    }
    /* the keys, in ggml_whisper.c's order */
    if ((st = gguf_writer_set_str(wr, "general.architecture", "whisper", err)) ||
        (st = gguf_writer_set_u32(wr, "general.file_type", quantize_file_type(rc, elements), err)))
        goto done;
    for (int i = 0; i < WHISPER_N_DIMS; i++)
        if ((st = gguf_writer_set_u32(wr, DIM_KEYS[i], (uint32_t)P->d[i], err))) goto done;
    if ((st = gguf_writer_set_arr_str(wr, "whisper.tokens", voc->tok, voc->len, (uint64_t)voc->n, err))) goto done;
    const int64_t fne[2] = {WGML_MEL_N_BINS, n_mels};
    if ((st = gguf_writer_add_tensor(wr, "mel_filters", WGML_F32, 2, fne, err))) goto done;
    for (int i = 0; i < P->n; i++) {
        const want *w = P->order[i];
        if ((st = gguf_writer_add_tensor(wr, w->name, w->type, w->n_dims, w->ne, err))) goto done;
    }
    if ((st = path ? gguf_writer_begin(wr, path, err) : gguf_writer_begin_memory(wr, err))) goto done;
    if (wgml_mel_filters_slaney(n_mels, WGML_MEL_SAMPLE_RATE, WGML_MEL_N_FFT, buf)) {
        st = wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "%s: no mel filters for %d bands", P->name, n_mels);
        goto done;
    }
    if ((st = gguf_writer_write_tensor(wr, buf, (size_t)fne[0] * (size_t)fne[1] * sizeof *buf, err))) goto done;
    for (int i = 0; i < P->n; i++) {
        const want *w = P->order[i];
        const pth_tensor *t = w->src;
        const size_t row = wgml_row_size(w->type, w->ne[0]), bytes = row * (size_t)w->ne[1];
        if (w->kind != K_CONV_W && t->contiguous && t->dtype == w->type) { /* as stored */
            st = gguf_writer_write_tensor(wr, t->storage + (size_t)t->storage_offset * t->elem_size, bytes, err);
        } else {
            if ((st = values(P, p, w, buf, tmp))) goto done;
            for (int64_t r = 0; r < w->ne[1]; r++)
                wgml_quantize_row(w->type, buf + r * w->ne[0], (uint8_t *)qbuf + (size_t)r * row, w->ne[0]);
            st = gguf_writer_write_tensor(wr, qbuf, bytes, err);
        }
        if (st) {
            wgml_error_prefix(err, "%s: writing '%s'", P->name, w->name);
            goto done;
        }
        written += (uint64_t)(w->ne[0] * w->ne[1]) * 4;
        if (opt->progress && opt->progress(opt->user, written, total)) {
            st = wgml_fail(err, WGML_ERR_IO, "convert whisper: cancelled");
            goto done;
        }
    }
    if ((st = gguf_writer_finish(wr, err))) goto done;
    if (!path) st = gguf_writer_take_memory(wr, mem, mem_size, err);
done:
    gguf_writer_free(wr);
    wgml_free(buf);
    wgml_free(tmp);
    wgml_free(qbuf);
    return st;
}

static int type_ok(uint32_t t) {
    return t == WGML_F32 || t == WGML_F16 || t == WGML_Q8_0 || t == WGML_Q5_0 || t == WGML_Q5_1 || t == WGML_Q4_0 ||
           t == WGML_Q4_1;
}

wgml_status whisper_convert(const char *pt_path, const whisper_convert_options *opt, const char *path, void **mem,
                            size_t *mem_size, wgml_error *err) {
    if (mem) *mem = NULL;
    if (mem_size) *mem_size = 0;
    if (!pt_path || !opt || (!path && (!mem || !mem_size)))
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "whisper_convert: no checkpoint, options or output");
    const uint32_t base = opt->type;
    if (!type_ok(base))
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                         "convert whisper: type %s; a Whisper model is F16, F32, Q8_0, Q5_0, Q5_1, Q4_0 or Q4_1",
                         wgml_dtype_name(base));
    if (!opt->vocab)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                         "%s: a Whisper checkpoint holds no vocabulary, and without one no text can be decoded: give "
                         "--vocab FILE, a whisper.cpp .bin or Whisper GGUF of the same vocabulary, or openai/whisper's "
                         "whisper/assets/multilingual.tiktoken (gpt2.tiktoken for an English-only .en model)",
                         pt_path);
    const uint8_t *bytes = NULL;
    size_t size = 0;
    int kind = 0;
    pth_file *p = NULL;
    zip_archive *z = NULL;
    vocab voc = {0};
    plan P = {.name = pt_path, .err = err};
    wgml_status st = wgml_file_bytes(pt_path, 22, "a torch.save archive", &bytes, &size, &kind, err);
    if (st) return st;
    if ((st = pth_open_memory(bytes, size, pt_path, &p, err)) || (st = zip_open_memory(bytes, size, pt_path, &z, err)))
        goto done;
    char pkl_name[PTH_MAX_NAME + 16];
    snprintf(pkl_name, sizeof pkl_name, "%s/data.pkl", pth_archive(p));
    const zip_entry *pkl = zip_find(z, pkl_name);
    if (!pkl) { /* pth found it: cannot happen */
        st = wgml_fail(err, WGML_ERR_FORMAT, "%s: no '%s'", pt_path, pkl_name);
        goto done;
    }
    if ((st = whisper_pt_dims(pkl->data, (size_t)pkl->size, pt_path, P.d, err))) goto done;
    whisper_specials sp;
    if ((st = check_dims(&P, &sp)) || (st = expected(&P)) || (st = match(&P, p, base))) goto done;
    if ((st = vocab_load(opt->vocab, &voc, err))) goto done;
    if (voc.list.n != sp.n_text) {
        st = wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                       "%s: %" PRId64 " BPE tokens; the checkpoint's n_vocab %d needs %d (%s)", opt->vocab, voc.list.n,
                       sp.n_vocab, sp.n_text,
                       sp.multilingual ? "a multilingual vocabulary: multilingual.tiktoken"
                                       : "an English-only vocabulary: gpt2.tiktoken");
        goto done;
    }
    st = write_all(&P, p, &voc.list, base, opt, path, mem, mem_size);
done:
    vocab_free(&voc);
    wgml_free(P.w);
    wgml_free(P.order);
    zip_close(z);
    pth_close(p);
    wgml_file_bytes_release(bytes, size, kind);
    return st;
}
