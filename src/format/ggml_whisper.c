/*
 * ggml_whisper.c - whisper.cpp's ggml .bin to wgml's Whisper GGUF (see
 * ggml_whisper.h for the layout and what is written).
 *
 * Two steps: parse() walks a bounds-checked cursor over the whole file and
 * records where the filters, the tokens and every tensor lie (nothing is
 * copied, nothing is allocated for a count before the bytes it needs are
 * known to be there); write() then declares the GGUF and streams the data
 * through the GGUF writer, permuting the two convolution weights.
 */
#include "format/ggml_whisper.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/dtype.h"
#include "core/error.h"
#include "format/file_bytes.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "wgml reads ggml files in place and needs a little-endian host"
#endif

#define MAX_TENSORS 65536 /* the largest real model (large-v3) has 1,258 */
#define MAX_NAME 1024

enum { PLAIN, CONV_WEIGHT, CONV_BIAS };

typedef struct bin_tensor {
    char *name; /* NUL-terminated copy */
    uint32_t type;
    int n_dims;
    int64_t ne[4];
    const uint8_t *data;
    size_t size;
    size_t offset; /* of its header, for messages */
    int kind;
} bin_tensor;

static const char *const HPARAMS[10] = {"n_vocab",     "n_audio_ctx", "n_audio_state", "n_audio_head", "n_audio_layer",
                                        "n_text_ctx",  "n_text_state", "n_text_head",  "n_text_layer", "n_mels"};
/* the GGUF keys of the hyper-parameters, in the same order */
static const char *const KEYS[10] = {
    "whisper.vocab_size",          "whisper.audio.context_length", "whisper.audio.embedding_length",
    "whisper.audio.head_count",    "whisper.audio.block_count",    "whisper.text.context_length",
    "whisper.text.embedding_length", "whisper.text.head_count",    "whisper.text.block_count",
    "whisper.n_mels"};

typedef struct bin {
    const char *name;
    const uint8_t *base, *p, *end;
    wgml_error *err;
    int32_t hp[10];
    int32_t ftype, qnt_version;
    int32_t n_mel, n_fft;
    const uint8_t *filters;
    int32_t n_tokens;
    const char **tok;
    uint64_t *tok_len;
    bin_tensor *t;
    size_t n_t, cap_t;
} bin;

static size_t at(const bin *b) { return (size_t)(b->p - b->base); }
static size_t left(const bin *b) { return (size_t)(b->end - b->p); }

static wgml_status truncated(bin *b, const char *what) {
    return wgml_fail(b->err, WGML_ERR_FORMAT, "%s: file truncated at offset %zu reading %s (%zu bytes left)", b->name,
                     at(b), what, left(b));
}

static wgml_status rd_i32(bin *b, int32_t *v, const char *what) {
    if (left(b) < 4) return truncated(b, what);
    memcpy(v, b->p, 4);
    b->p += 4;
    return WGML_OK;
}

static void bin_free(bin *b) {
    for (size_t i = 0; i < b->n_t; i++)
        wgml_free(b->t[i].name);
    wgml_free(b->t);
    wgml_free((void *)b->tok);
    wgml_free(b->tok_len);
}

/* ggml's file types (ftype % 1000) whose tensors wgml can hold: F32, F16,
 * Q4_0, Q4_1, Q4_1 with some F16, Q8_0, Q5_0, Q5_1 */
static int known_ftype(int32_t t) { return (t >= 0 && t <= 4) || (t >= 7 && t <= 9); }

static int known_type(uint32_t t) {
    return t == WGML_F32 || t == WGML_F16 || t == WGML_Q4_0 || t == WGML_Q4_1 || t == WGML_Q5_0 || t == WGML_Q5_1 ||
           t == WGML_Q8_0;
}

static wgml_status parse_header(bin *b) {
    wgml_status st;
    int32_t magic = 0;
    if ((st = rd_i32(b, &magic, "the magic number"))) return st;
    if ((uint32_t)magic != GGML_WHISPER_MAGIC)
        return wgml_fail(b->err, WGML_ERR_FORMAT, "%s: not a whisper.cpp ggml file (magic 0x%08x, expected 0x%08x)",
                         b->name, (unsigned)magic, GGML_WHISPER_MAGIC);
    for (int i = 0; i < 10; i++) {
        if ((st = rd_i32(b, &b->hp[i], HPARAMS[i]))) return st;
        if (b->hp[i] <= 0)
            return wgml_fail(b->err, WGML_ERR_FORMAT, "%s: hyper-parameter %s is %" PRId32 " (must be positive)",
                             b->name, HPARAMS[i], b->hp[i]);
    }
    int32_t ftype = 0;
    if ((st = rd_i32(b, &ftype, "the file type"))) return st;
    if (ftype < 0 || !known_ftype(ftype % 1000))
        return wgml_fail(b->err, WGML_ERR_UNSUPPORTED,
                         "%s: file type %" PRId32 " is not one wgml reads (ggml's F32, F16, Q4_0, Q4_1, Q5_0, Q5_1 or "
                         "Q8_0)",
                         b->name, ftype);
    b->ftype = ftype % 1000;
    b->qnt_version = ftype / 1000;

    if ((st = rd_i32(b, &b->n_mel, "the mel filters' band count")) ||
        (st = rd_i32(b, &b->n_fft, "the mel filters' frequency count")))
        return st;
    if (b->n_mel != b->hp[9])
        return wgml_fail(b->err, WGML_ERR_FORMAT, "%s: mel filters for %" PRId32 " bands, but n_mels is %" PRId32,
                         b->name, b->n_mel, b->hp[9]);
    if (b->n_fft <= 0)
        return wgml_fail(b->err, WGML_ERR_FORMAT, "%s: mel filters with %" PRId32 " frequencies", b->name, b->n_fft);
    uint64_t fbytes = (uint64_t)b->n_mel * (uint64_t)b->n_fft * 4; /* < 2^64: both < 2^31 */
    if (fbytes > left(b))
        return wgml_fail(b->err, WGML_ERR_FORMAT,
                         "%s: mel filters [%" PRId32 "][%" PRId32 "] at offset %zu need %" PRIu64
                         " bytes; the file has %zu left",
                         b->name, b->n_mel, b->n_fft, at(b), fbytes, left(b));
    b->filters = b->p;
    b->p += fbytes;

    if ((st = rd_i32(b, &b->n_tokens, "the token count"))) return st;
    if (b->n_tokens < 0 || b->n_tokens > b->hp[0])
        return wgml_fail(b->err, WGML_ERR_FORMAT, "%s: %" PRId32 " tokens for a vocabulary of %" PRId32, b->name,
                         b->n_tokens, b->hp[0]);
    if ((uint64_t)b->n_tokens > left(b) / 4) /* a length each, at least */
        return wgml_fail(b->err, WGML_ERR_FORMAT, "%s: %" PRId32 " tokens at offset %zu cannot fit in the %zu bytes left",
                         b->name, b->n_tokens, at(b) - 4, left(b));
    size_t n = b->n_tokens ? (size_t)b->n_tokens : 1;
    b->tok = wgml_calloc(n, sizeof *b->tok);
    b->tok_len = wgml_calloc(n, sizeof *b->tok_len);
    if (!b->tok || !b->tok_len)
        return wgml_fail(b->err, WGML_ERR_OUT_OF_MEMORY, "%s: out of memory for %" PRId32 " tokens", b->name,
                         b->n_tokens);
    for (int32_t i = 0; i < b->n_tokens; i++) {
        int32_t len = 0;
        if ((st = rd_i32(b, &len, "a token's length"))) return st;
        if (len < 0 || (size_t)len > left(b))
            return wgml_fail(b->err, WGML_ERR_FORMAT,
                             "%s: token %" PRId32 " at offset %zu has length %" PRId32 " (%zu bytes left)", b->name, i,
                             at(b) - 4, len, left(b));
        b->tok[i] = (const char *)b->p;
        b->tok_len[i] = (uint64_t)len;
        b->p += len;
    }
    return WGML_OK;
}

static wgml_status parse_tensor(bin *b, bin_tensor *t) {
    t->offset = at(b);
    int32_t n_dims = 0, name_len = 0, type = 0;
    if (left(b) < 12) return truncated(b, "a tensor header");
    rd_i32(b, &n_dims, "");
    rd_i32(b, &name_len, "");
    rd_i32(b, &type, "");
    if (n_dims < 1 || n_dims > 4)
        return wgml_fail(b->err, WGML_ERR_FORMAT, "%s: tensor %zu at offset %zu has %" PRId32 " dimensions (1..4)",
                         b->name, b->n_t - 1, t->offset, n_dims);
    if (name_len < 1 || name_len > MAX_NAME)
        return wgml_fail(b->err, WGML_ERR_FORMAT, "%s: tensor %zu at offset %zu has a name of length %" PRId32 " (1..%d)",
                         b->name, b->n_t - 1, t->offset, name_len, MAX_NAME);
    /* the name first (for the messages below): it follows the sizes */
    size_t dims_bytes = 4 * (size_t)n_dims;
    if (left(b) < dims_bytes + (size_t)name_len) return truncated(b, "a tensor's sizes and name");
    const char *nm = (const char *)b->p + dims_bytes;
    if (memchr(nm, 0, (size_t)name_len))
        return wgml_fail(b->err, WGML_ERR_FORMAT, "%s: tensor %zu at offset %zu has a NUL byte in its name", b->name,
                         b->n_t - 1, t->offset);
    if (!(t->name = wgml_strndup(nm, (size_t)name_len)))
        return wgml_fail(b->err, WGML_ERR_OUT_OF_MEMORY, "%s: out of memory", b->name);
    if (!known_type((uint32_t)type))
        return wgml_fail(b->err, WGML_ERR_UNSUPPORTED,
                         "%s: tensor '%s' has type %" PRId32 " (wgml reads F32, F16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0)",
                         b->name, t->name, type);
    t->type = (uint32_t)type;
    t->n_dims = n_dims;
    uint64_t n_el = 1;
    for (int d = 0; d < 4; d++)
        t->ne[d] = 1;
    for (int d = 0; d < n_dims; d++) {
        int32_t ne = 0;
        rd_i32(b, &ne, "");
        if (ne <= 0)
            return wgml_fail(b->err, WGML_ERR_FORMAT, "%s: tensor '%s' has size %" PRId32 " in dimension %d", b->name,
                             t->name, ne, d);
        t->ne[d] = ne;
        if (n_el > (uint64_t)INT64_MAX / (uint64_t)ne)
            return wgml_fail(b->err, WGML_ERR_FORMAT, "%s: tensor '%s': element count overflows", b->name, t->name);
        n_el *= (uint64_t)ne;
    }
    b->p += (size_t)name_len;
    const wgml_dtype_traits *tr = wgml_dtype_get(t->type);
    if (t->ne[0] % tr->block_size)
        return wgml_fail(b->err, WGML_ERR_FORMAT, "%s: tensor '%s': row length %" PRId64 " is not a multiple of the %s block size %d",
                         b->name, t->name, t->ne[0], tr->name, tr->block_size);
    if (tr->quantized && b->qnt_version < 2)
        return wgml_fail(b->err, WGML_ERR_UNSUPPORTED,
                         "%s: tensor '%s' is %s of quantization version %" PRId32
                         ", older than ggml's current block layouts (2): quantize the model again",
                         b->name, t->name, tr->name, b->qnt_version);
    uint64_t rows = n_el / (uint64_t)t->ne[0], row = wgml_row_size(t->type, t->ne[0]);
    if (row == 0 || rows > left(b) / row)
        return wgml_fail(b->err, WGML_ERR_FORMAT,
                         "%s: tensor '%s' (%s, %" PRIu64 " elements) at offset %zu needs more bytes than the %zu left",
                         b->name, t->name, tr->name, n_el, at(b), left(b));
    t->size = (size_t)(rows * row);
    t->data = b->p;
    b->p += t->size;
    return WGML_OK;
}

static int cmp_name(const void *a, const void *b) {
    return strcmp((*(const bin_tensor *const *)a)->name, (*(const bin_tensor *const *)b)->name);
}

/* Rejects duplicate names (and a tensor named like the filters we add). */
static wgml_status check_names(bin *b) {
    const bin_tensor **idx = wgml_calloc(b->n_t, sizeof *idx);
    if (!idx) return wgml_fail(b->err, WGML_ERR_OUT_OF_MEMORY, "%s: out of memory", b->name);
    for (size_t i = 0; i < b->n_t; i++)
        idx[i] = &b->t[i];
    qsort(idx, b->n_t, sizeof *idx, cmp_name);
    wgml_status st = WGML_OK;
    for (size_t i = 0; i < b->n_t && !st; i++) {
        if (i && strcmp(idx[i - 1]->name, idx[i]->name) == 0) {
            const bin_tensor *later = idx[i - 1]->offset > idx[i]->offset ? idx[i - 1] : idx[i];
            st = wgml_fail(b->err, WGML_ERR_FORMAT, "%s: tensor '%s' appears twice (again at offset %zu)", b->name,
                           later->name, later->offset);
        } else if (strcmp(idx[i]->name, "mel_filters") == 0) {
            st = wgml_fail(b->err, WGML_ERR_FORMAT,
                           "%s: a tensor at offset %zu is named 'mel_filters', the name of the file's filter bank",
                           b->name, idx[i]->offset);
        }
    }
    wgml_free(idx);
    return st;
}

/* The convolutions: weights [S][C_in][3] become taps-major {3 C_in, S}, biases [S][1] become {S}. */
static wgml_status reshape_convs(bin *b) {
    for (size_t i = 0; i < b->n_t; i++) {
        bin_tensor *t = &b->t[i];
        int weight = !strcmp(t->name, "encoder.conv1.weight") || !strcmp(t->name, "encoder.conv2.weight");
        int bias = !strcmp(t->name, "encoder.conv1.bias") || !strcmp(t->name, "encoder.conv2.bias");
        if (weight) {
            if (t->type != WGML_F32 && t->type != WGML_F16)
                return wgml_fail(b->err, WGML_ERR_UNSUPPORTED,
                                 "%s: tensor '%s' is %s; wgml reads the convolution weights in F16 or F32 only "
                                 "(whisper.cpp's quantizer keeps them F16)",
                                 b->name, t->name, wgml_dtype_name(t->type));
            if (t->n_dims != 3 || t->ne[0] != 3)
                return wgml_fail(b->err, WGML_ERR_FORMAT,
                                 "%s: tensor '%s' has %d dimensions, ne[0] = %" PRId64
                                 " (a kernel-3 convolution is [out][in][3]: 3 dimensions, ne[0] = 3)",
                                 b->name, t->name, t->n_dims, t->ne[0]);
            t->kind = CONV_WEIGHT;
        } else if (bias) {
            if (t->n_dims == 2 && t->ne[0] == 1) {
                t->kind = CONV_BIAS;
            } else if (t->n_dims != 1) {
                return wgml_fail(b->err, WGML_ERR_FORMAT,
                                 "%s: tensor '%s' has %d dimensions, ne = {%" PRId64 ", %" PRId64
                                 "} (a convolution bias is [out][1] or [out])",
                                 b->name, t->name, t->n_dims, t->ne[0], t->ne[1]);
            }
        }
    }
    return WGML_OK;
}

static wgml_status parse(bin *b) {
    wgml_status st = parse_header(b);
    while (!st && b->p < b->end) {
        if (b->n_t == MAX_TENSORS)
            return wgml_fail(b->err, WGML_ERR_FORMAT, "%s: more than %d tensors (at offset %zu)", b->name, MAX_TENSORS,
                             at(b));
        if (b->n_t == b->cap_t) {
            size_t cap = b->cap_t ? 2 * b->cap_t : 64;
            bin_tensor *t = wgml_realloc(b->t, cap * sizeof *t);
            if (!t) return wgml_fail(b->err, WGML_ERR_OUT_OF_MEMORY, "%s: out of memory", b->name);
            b->t = t;
            b->cap_t = cap;
        }
        bin_tensor *t = &b->t[b->n_t];
        memset(t, 0, sizeof *t);
        b->n_t++; /* counted now so that bin_free frees its name */
        st = parse_tensor(b, t);
    }
    if (st) return st;
    if (b->n_t == 0)
        return wgml_fail(b->err, WGML_ERR_FORMAT, "%s: no tensors after the vocabulary (file of %zu bytes; truncated?)",
                         b->name, (size_t)(b->end - b->base));
    if ((st = check_names(b))) return st;
    return reshape_convs(b);
}

/* ---- writing ---- */

static wgml_status declare(const bin *b, gguf_writer *w, wgml_error *err) {
    wgml_status st;
    if ((st = gguf_writer_set_str(w, "general.architecture", "whisper", err)) ||
        (st = gguf_writer_set_u32(w, "general.file_type", (uint32_t)b->ftype, err)))
        return st;
    for (int i = 0; i < 10; i++)
        if ((st = gguf_writer_set_u32(w, KEYS[i], (uint32_t)b->hp[i], err))) return st;
    if ((st = gguf_writer_set_arr_str(w, "whisper.tokens", b->tok, b->tok_len, (uint64_t)b->n_tokens, err))) return st;
    int64_t fne[2] = {b->n_fft, b->n_mel};
    if ((st = gguf_writer_add_tensor(w, "mel_filters", WGML_F32, 2, fne, err))) return st;
    for (size_t i = 0; i < b->n_t; i++) {
        const bin_tensor *t = &b->t[i];
        int64_t ne[4] = {t->ne[0], t->ne[1], t->ne[2], t->ne[3]};
        int n_dims = t->n_dims;
        if (t->kind == CONV_WEIGHT) {
            ne[0] = 3 * t->ne[1];
            ne[1] = t->ne[2];
            n_dims = 2;
        } else if (t->kind == CONV_BIAS) {
            ne[0] = t->ne[1];
            n_dims = 1;
        }
        if ((st = gguf_writer_add_tensor(w, t->name, t->type, n_dims, ne, err))) return st;
    }
    return WGML_OK;
}

/* w[o][c][j] (PyTorch [out][in][3]) to dst[o][j][c]. */
static void permute_conv(const bin_tensor *t, uint8_t *dst) {
    const size_t es = t->type == WGML_F32 ? 4 : 2;
    const int64_t C = t->ne[1], S = t->ne[2];
    for (int64_t o = 0; o < S; o++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t j = 0; j < 3; j++)
                memcpy(dst + (size_t)((o * 3 + j) * C + c) * es, t->data + (size_t)((o * C + c) * 3 + j) * es, es);
}

static wgml_status write_data(const bin *b, gguf_writer *w, wgml_error *err) {
    wgml_status st = gguf_writer_write_tensor(w, b->filters, (size_t)b->n_mel * (size_t)b->n_fft * 4, err);
    for (size_t i = 0; i < b->n_t && !st; i++) {
        const bin_tensor *t = &b->t[i];
        if (t->kind != CONV_WEIGHT) {
            st = gguf_writer_write_tensor(w, t->data, t->size, err);
            continue;
        }
        uint8_t *p = wgml_malloc(t->size);
        if (!p)
            return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "%s: out of memory permuting '%s' (%zu bytes)", b->name,
                             t->name, t->size);
        permute_conv(t, p);
        st = gguf_writer_write_tensor(w, p, t->size, err);
        wgml_free(p);
    }
    return st;
}

/* Parses data and writes the GGUF to out_path, or (out_path NULL) into
 * memory handed over in *mem / *mem_size (malloc'ed: free()). */
static wgml_status convert(const void *data, size_t size, const char *name, const char *out_path, void **mem,
                           size_t *mem_size, wgml_error *err) {
    if (!data && size) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "%s: NULL data", name);
    static const uint8_t none[1];
    bin b = {.name = name, .base = data ? data : none, .err = err};
    b.p = b.base;
    b.end = b.base + size;
    wgml_status st = parse(&b);
    gguf_writer *w = NULL;
    if (!st && !(w = gguf_writer_create())) st = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "%s: out of memory", name);
    if (!st) {
        st = declare(&b, w, err);
        if (!st) st = out_path ? gguf_writer_begin(w, out_path, err) : gguf_writer_begin_memory(w, err);
        if (!st) st = write_data(&b, w, err);
        if (!st) st = gguf_writer_finish(w, err);
        if (!st && !out_path) st = gguf_writer_take_memory(w, mem, mem_size, err);
        if (st && strncmp(err ? err->message : "", name, strlen(name)) != 0) wgml_error_prefix(err, "%s", name);
    }
    gguf_writer_free(w);
    bin_free(&b);
    return st;
}

int ggml_whisper_detect(const void *data, size_t size) {
    uint32_t magic;
    if (!data || size < 4) return 0;
    memcpy(&magic, data, 4);
    return magic == GGML_WHISPER_MAGIC;
}

wgml_status ggml_whisper_open_memory(const void *data, size_t size, const char *name, gguf_file **out,
                                     wgml_error *err) {
    *out = NULL;
    if (!name) name = "<memory>";
    void *mem = NULL;
    size_t n = 0;
    wgml_status st = convert(data, size, name, NULL, &mem, &n, err);
    if (st) return st;
    if ((st = gguf_open_memory(mem, n, name, out, err))) {
        free(mem);
        wgml_error_prefix(err, "%s: the GGUF converted from it", name);
        return st;
    }
    gguf_own_bytes(*out);
    return WGML_OK;
}

wgml_status ggml_whisper_open(const char *path, gguf_file **out, wgml_error *err) {
    *out = NULL;
    const uint8_t *base;
    size_t size;
    int kind;
    wgml_status st = wgml_file_bytes(path, 4, "a whisper.cpp ggml file", &base, &size, &kind, err);
    if (st) return st;
    st = ggml_whisper_open_memory(base, size, path, out, err);
    wgml_file_bytes_release(base, size, kind);
    return st;
}

wgml_status ggml_whisper_convert(const void *data, size_t size, const char *name, const char *out_path,
                                 wgml_error *err) {
    if (!out_path) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "ggml_whisper_convert: no output path");
    return convert(data, size, name ? name : "<memory>", out_path, NULL, NULL, err);
}
