/*
 * llama2c.c - llama2.c checkpoint + tokenizer to GGUF (see llama2c.h).
 *
 * The whole checkpoint is validated before anything is written: header values
 * in range, the file exactly as long as the header implies (with or without
 * the legacy RoPE tables). Tensors are streamed from the mapping into the GGUF
 * writer; llama2.c's layout ([out][in] row-major fp32, RoPE on adjacent
 * pairs) is GGUF's "llama" layout, so weights are copied unchanged.
 */
#include "format/llama2c.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/dtype.h"
#include "core/error.h"
#include "format/gguf.h"

#define LLAMA2C_MAGIC 0x616b3432u
#define V1_HEADER 256

typedef struct {
    int32_t dim, hidden, n_layers, n_heads, n_kv, vocab, seq_len;
    int shared;
    int version; /* 0 legacy, 1 ak42 */
} l2c_config;

typedef struct {
    const uint8_t *data;
    size_t size;
} mapped;

static wgml_status map_file(const char *path, mapped *m, wgml_error *err) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) return wgml_fail(err, WGML_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_size == 0) {
        close(fd);
        return wgml_fail(err, WGML_ERR_IO, "%s: not a regular, non-empty file", path);
    }
    void *p = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (p == MAP_FAILED) return wgml_fail(err, WGML_ERR_IO, "%s: cannot map: %s", path, strerror(errno));
    m->data = p;
    m->size = (size_t)sb.st_size;
    return WGML_OK;
}

static void unmap(mapped *m) {
    if (m->data) munmap((void *)m->data, m->size);
    m->data = NULL;
}

/* One weight tensor in the checkpoint: where it is and what GGUF calls it. */
typedef struct {
    char name[48];
    int64_t ne0, ne1; /* GGUF order: ne0 = columns */
    uint64_t offset;  /* in the checkpoint */
} l2c_tensor;

static int in_range(int32_t v, int32_t lo, int32_t hi) { return v >= lo && v <= hi; }

static wgml_status read_config(const char *path, const mapped *f, l2c_config *c, size_t *data_off, wgml_error *err) {
    int32_t h[7];
    uint32_t magic;
    if (f->size < 28) return wgml_fail(err, WGML_ERR_FORMAT, "%s: %zu bytes is too small for a llama2.c checkpoint", path, f->size);
    memcpy(&magic, f->data, 4);
    if (magic == LLAMA2C_MAGIC) {
        int32_t version;
        if (f->size < V1_HEADER) return wgml_fail(err, WGML_ERR_FORMAT, "%s: truncated v1 header", path);
        memcpy(&version, f->data + 4, 4);
        if (version != 1)
            return wgml_fail(err, WGML_ERR_UNSUPPORTED, "%s: llama2.c format version %d is not supported (1 is; "
                             "version 2 holds int8 weights)", path, version);
        memcpy(h, f->data + 8, sizeof h);
        c->version = 1;
        uint8_t shared = f->data[8 + sizeof h];
        if (shared > 1) return wgml_fail(err, WGML_ERR_FORMAT, "%s: shared_classifier flag is %u", path, shared);
        c->shared = shared;
        *data_off = V1_HEADER;
    } else {
        memcpy(h, f->data, sizeof h);
        c->version = 0;
        c->shared = h[5] > 0;
        *data_off = 28;
    }
    /* a legacy negative vocab size flags an unshared classifier; the message shows the header as stored */
    int32_t vocab = h[5] < 0 && c->version == 0 ? (h[5] == INT32_MIN ? 0 : -h[5]) : h[5];
    c->dim = h[0], c->hidden = h[1], c->n_layers = h[2], c->n_heads = h[3], c->n_kv = h[4], c->vocab = vocab,
    c->seq_len = h[6];
    if (!in_range(c->dim, 1, 1 << 16) || !in_range(c->hidden, 1, 1 << 18) || !in_range(c->n_layers, 1, 1024) ||
        !in_range(c->n_heads, 1, 1024) || !in_range(c->n_kv, 1, 1024) || !in_range(c->vocab, 1, 1 << 20) ||
        !in_range(c->seq_len, 1, 1 << 20))
        return wgml_fail(err, WGML_ERR_FORMAT,
                         "%s: not a llama2.c checkpoint (header dim=%d hidden=%d layers=%d heads=%d kv_heads=%d "
                         "vocab=%d seq_len=%d is out of range)", path, h[0], h[1], h[2], h[3], h[4], h[5], h[6]);
    if (c->dim % c->n_heads || c->n_heads % c->n_kv || (c->dim / c->n_heads) % 2)
        return wgml_fail(err, WGML_ERR_FORMAT, "%s: dim %d, %d heads and %d KV heads are inconsistent", path, c->dim,
                         c->n_heads, c->n_kv);
    return WGML_OK;
}

/* Lays out the tensors in file order; returns the count and the end offset.
 * 64-bit arithmetic: the largest header in range implies ~2^47 bytes, which
 * must not wrap around on a 32-bit size_t into something matching the file. */
static int layout(const l2c_config *c, uint64_t off, l2c_tensor *t, uint64_t *end) {
    int64_t hd = c->dim / c->n_heads, kv = hd * c->n_kv, L = c->n_layers;
    int n = 0;
#define ADD(nm, a, b)                                                                  \
    do {                                                                               \
        snprintf(t[n].name, sizeof t[n].name, "%s", nm);                               \
        t[n].ne0 = (a), t[n].ne1 = (b), t[n].offset = off;                             \
        off += (uint64_t)(a) * (uint64_t)(b) * 4;                                      \
        n++;                                                                           \
    } while (0)
#define PER_LAYER(fmt, a, b)                                                           \
    for (int64_t l = 0; l < L; l++) {                                                  \
        char nm[48];                                                                   \
        snprintf(nm, sizeof nm, fmt, (int)l);                                          \
        ADD(nm, a, b);                                                                 \
    }
    if (c->version == 0) {
        ADD("token_embd.weight", c->dim, c->vocab);
        PER_LAYER("blk.%d.attn_norm.weight", c->dim, 1)
    } else {
        PER_LAYER("blk.%d.attn_norm.weight", c->dim, 1)
        PER_LAYER("blk.%d.ffn_norm.weight", c->dim, 1)
        ADD("output_norm.weight", c->dim, 1);
        ADD("token_embd.weight", c->dim, c->vocab);
    }
    PER_LAYER("blk.%d.attn_q.weight", c->dim, c->dim)
    PER_LAYER("blk.%d.attn_k.weight", c->dim, kv)
    PER_LAYER("blk.%d.attn_v.weight", c->dim, kv)
    PER_LAYER("blk.%d.attn_output.weight", c->dim, c->dim)
    if (c->version == 0) PER_LAYER("blk.%d.ffn_norm.weight", c->dim, 1)
    PER_LAYER("blk.%d.ffn_gate.weight", c->dim, c->hidden)
    PER_LAYER("blk.%d.ffn_down.weight", c->hidden, c->dim)
    PER_LAYER("blk.%d.ffn_up.weight", c->dim, c->hidden)
    if (c->version == 0) {
        ADD("output_norm.weight", c->dim, 1);
        off += (uint64_t)c->seq_len * (uint64_t)(hd / 2) * 4 * 2; /* legacy RoPE tables, unused */
    }
    if (!c->shared) ADD("output.weight", c->dim, c->vocab);
#undef PER_LAYER
#undef ADD
    *end = off;
    return n;
}

/* Reads the tokenizer into GGUF form: SentencePiece pieces with U+2581 for spaces. */
typedef struct {
    char **text;
    uint64_t *len;
    float *score;
    int32_t *type;
    int n;
} l2c_vocab;

static void vocab_free(l2c_vocab *v) {
    if (v->text)
        for (int i = 0; i < v->n; i++) wgml_free(v->text[i]);
    wgml_free(v->text);
    wgml_free(v->len);
    wgml_free(v->score);
    wgml_free(v->type);
}

static wgml_status read_vocab(const char *path, int n_vocab, l2c_vocab *v, wgml_error *err) {
    mapped f = {0};
    wgml_status st = map_file(path, &f, err);
    if (st) return st;
    v->n = n_vocab;
    v->text = wgml_calloc((size_t)n_vocab, sizeof *v->text);
    v->len = wgml_calloc((size_t)n_vocab, sizeof *v->len);
    v->score = wgml_calloc((size_t)n_vocab, sizeof *v->score);
    v->type = wgml_calloc((size_t)n_vocab, sizeof *v->type);
    if (!v->text || !v->len || !v->score || !v->type) {
        st = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory reading %s", path);
        goto done;
    }
    size_t o = 4;
    int32_t max_len;
    if (f.size < 4) {
        st = wgml_fail(err, WGML_ERR_FORMAT, "%s: too small for a llama2.c tokenizer", path);
        goto done;
    }
    memcpy(&max_len, f.data, 4);
    if (max_len < 1 || max_len > 4096) {
        st = wgml_fail(err, WGML_ERR_FORMAT, "%s: max token length %d is out of range", path, max_len);
        goto done;
    }
    for (int i = 0; i < n_vocab; i++) {
        float score;
        int32_t len;
        if (f.size - o < 8) {
            st = wgml_fail(err, WGML_ERR_FORMAT, "%s: ends after %d tokens; the checkpoint has %d", path, i, n_vocab);
            goto done;
        }
        memcpy(&score, f.data + o, 4);
        memcpy(&len, f.data + o + 4, 4);
        o += 8;
        if (len < 0 || len > max_len || (size_t)len > f.size - o) {
            st = wgml_fail(err, WGML_ERR_FORMAT, "%s: token %d has length %d (max %d, %zu bytes left)", path, i, len,
                           max_len, f.size - o);
            goto done;
        }
        const char *s = (const char *)f.data + o;
        o += (size_t)len;
        /* BOS/EOS are stored as "\n<s>\n" / "\n</s>\n" */
        if (len >= 2 && s[0] == '\n' && s[len - 1] == '\n') {
            s++;
            len -= 2;
        }
        char *t = wgml_malloc((size_t)len * 3 + 1);
        if (!t) {
            st = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory reading %s", path);
            goto done;
        }
        size_t k = 0;
        for (int32_t j = 0; j < len; j++) {
            if (s[j] == ' ') {
                memcpy(t + k, "\xe2\x96\x81", 3);
                k += 3;
            } else {
                t[k++] = s[j];
            }
        }
        t[k] = '\0';
        v->text[i] = t;
        v->len[i] = k;
        v->score[i] = score;
        int is_byte = k == 6 && memcmp(t, "<0x", 3) == 0 && t[5] == '>';
        v->type[i] = i == 0 ? 2 : (i == 1 || i == 2) ? 3 : is_byte ? 6 : 1; /* unknown, control, byte, normal */
    }
    if (o != f.size) st = wgml_fail(err, WGML_ERR_FORMAT, "%s: %zu unexpected bytes after %d tokens", path, f.size - o, n_vocab);
done:
    unmap(&f);
    return st;
}

static wgml_status write_metadata(gguf_writer *w, const l2c_config *c, const l2c_vocab *v, wgml_error *err) {
    wgml_status st;
    int32_t hd = c->dim / c->n_heads;
    if ((st = gguf_writer_set_str(w, "general.architecture", "llama", err)) ||
        (st = gguf_writer_set_str(w, "general.name", "llama2.c", err)) ||
        (st = gguf_writer_set_u32(w, "general.file_type", 0, err)) ||
        (st = gguf_writer_set_u32(w, "llama.context_length", (uint32_t)c->seq_len, err)) ||
        (st = gguf_writer_set_u32(w, "llama.embedding_length", (uint32_t)c->dim, err)) ||
        (st = gguf_writer_set_u32(w, "llama.feed_forward_length", (uint32_t)c->hidden, err)) ||
        (st = gguf_writer_set_u32(w, "llama.block_count", (uint32_t)c->n_layers, err)) ||
        (st = gguf_writer_set_u32(w, "llama.attention.head_count", (uint32_t)c->n_heads, err)) ||
        (st = gguf_writer_set_u32(w, "llama.attention.head_count_kv", (uint32_t)c->n_kv, err)) ||
        (st = gguf_writer_set_u32(w, "llama.rope.dimension_count", (uint32_t)hd, err)) ||
        (st = gguf_writer_set_f32(w, "llama.attention.layer_norm_rms_epsilon", 1e-5f, err)) ||
        (st = gguf_writer_set_str(w, "tokenizer.ggml.model", "llama", err)) ||
        (st = gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)v->text, v->len,
                                      (uint64_t)v->n, err)) ||
        (st = gguf_writer_set_arr(w, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, v->score, (uint64_t)v->n, err)) ||
        (st = gguf_writer_set_arr(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, v->type, (uint64_t)v->n, err)) ||
        (st = gguf_writer_set_u32(w, "tokenizer.ggml.unknown_token_id", 0, err)) ||
        (st = gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 1, err)) ||
        (st = gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 2, err)))
        return st;
    return WGML_OK;
}

wgml_status llama2c_convert(const char *ckpt_path, const char *tok_path, const char *out_path,
                            llama2c_progress_fn progress, void *user, wgml_error *err) {
    mapped ck = {0};
    l2c_vocab vocab = {0};
    l2c_tensor *t = NULL;
    gguf_writer *w = NULL;
    l2c_config c = {0};
    size_t data_off = 0;
    uint64_t end = 0;
    wgml_status st = map_file(ckpt_path, &ck, err);
    if (st) return st;
    if ((st = read_config(ckpt_path, &ck, &c, &data_off, err))) goto done;
    size_t max_tensors = (size_t)c.n_layers * 11 + 4;
    t = wgml_calloc(max_tensors, sizeof *t);
    if (!t) {
        st = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory converting %s", ckpt_path);
        goto done;
    }
    int n = layout(&c, data_off, t, &end);
    if (end != ck.size) {
        st = wgml_fail(err, WGML_ERR_FORMAT, "%s: the header (dim %d, %d layers, vocab %d, %s classifier) implies "
                       "%llu bytes but the file has %zu", ckpt_path, c.dim, c.n_layers, c.vocab,
                       c.shared ? "shared" : "separate", (unsigned long long)end, ck.size);
        goto done;
    }
    if ((st = read_vocab(tok_path, c.vocab, &vocab, err))) goto done;
    w = gguf_writer_create();
    if (!w) {
        st = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    if ((st = write_metadata(w, &c, &vocab, err))) goto done;
    uint64_t total = 0, done_bytes = 0;
    for (int i = 0; i < n; i++) {
        int64_t ne[2] = {t[i].ne0, t[i].ne1};
        if ((st = gguf_writer_add_tensor(w, t[i].name, WGML_F32, t[i].ne1 == 1 ? 1 : 2, ne, err))) goto done;
        total += (uint64_t)(t[i].ne0 * t[i].ne1 * 4);
    }
    if ((st = gguf_writer_begin(w, out_path, err))) goto done;
    for (int i = 0; i < n; i++) {
        size_t size = (size_t)(t[i].ne0 * t[i].ne1) * 4;
        if ((st = gguf_writer_write_tensor(w, ck.data + t[i].offset, size, err))) goto done;
        done_bytes += size;
        if (progress && progress(user, done_bytes, total)) {
            st = wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "conversion cancelled");
            goto done;
        }
    }
    st = gguf_writer_finish(w, err);
done:
    gguf_writer_free(w);
    vocab_free(&vocab);
    wgml_free(t);
    unmap(&ck);
    return st;
}
