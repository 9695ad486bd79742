/*
 * llama_load.c - hyper-parameters and weights of a Llama-family GGUF.
 *
 * Every tensor the forward pass uses is looked up by its GGUF name, checked
 * against the shape the hyper-parameters imply and against the types the
 * backend can compute with, then handed to the backend (the CPU backend uses
 * it in place in the mapping; a GPU backend uploads it once).
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/fp16.h"
#include "model/llama.h"

int llama_arch_supported(const char *arch) { return strcmp(arch, "llama") == 0 || strcmp(arch, "qwen2") == 0; }

static wgml_status req_int(const gguf_file *f, const char *arch, const char *suffix, int64_t lo, int64_t hi, int *out,
                           int required, wgml_error *err) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    int64_t v;
    int r = gguf_get_int(f, key, lo, hi, &v, err);
    if (r < 0) return WGML_ERR_FORMAT;
    if (r == 0) {
        if (required) return wgml_fail(err, WGML_ERR_FORMAT, "%s: missing required metadata '%s'", gguf_name(f), key);
        return WGML_OK;
    }
    *out = (int)v;
    return WGML_OK;
}

static wgml_status opt_float(const gguf_file *f, const char *arch, const char *suffix, float *out, wgml_error *err) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    double v;
    int r = gguf_get_float(f, key, &v, err);
    if (r < 0) return WGML_ERR_FORMAT;
    if (r > 0) *out = (float)v;
    return WGML_OK;
}

wgml_status llama_read_hparams(const gguf_file *f, llama_hparams *hp, wgml_error *err) {
    memset(hp, 0, sizeof *hp);
    gguf_str a;
    int r = gguf_get_str(f, "general.architecture", &a, err);
    if (r < 0) return WGML_ERR_FORMAT;
    if (r == 0) return wgml_fail(err, WGML_ERR_FORMAT, "%s: missing required metadata 'general.architecture'", gguf_name(f));
    if (memchr(a.ptr, 0, (size_t)a.len)) /* "llama\0..." must not pass for "llama" */
        return wgml_fail(err, WGML_ERR_FORMAT, "%s: 'general.architecture' contains a NUL byte", gguf_name(f));
    if (a.len >= sizeof hp->arch) a.len = sizeof hp->arch - 1;
    memcpy(hp->arch, a.ptr, a.len);
    hp->arch[a.len] = '\0';
    if (!llama_arch_supported(hp->arch))
        return wgml_fail(err, WGML_ERR_UNSUPPORTED, "%s: architecture '%s' is not supported (llama and qwen2 are)",
                         gguf_name(f), hp->arch);
    const char *arch = hp->arch;
    const int64_t big = 1 << 24;
    wgml_status st;
    if ((st = req_int(f, arch, "embedding_length", 1, big, &hp->n_embd, 1, err)) ||
        (st = req_int(f, arch, "block_count", 1, 4096, &hp->n_layer, 1, err)) ||
        (st = req_int(f, arch, "feed_forward_length", 1, big, &hp->n_ff, 1, err)) ||
        (st = req_int(f, arch, "attention.head_count", 1, 4096, &hp->n_head, 1, err)))
        return st;
    hp->n_head_kv = hp->n_head;
    hp->n_ctx_train = 2048;
    if ((st = req_int(f, arch, "attention.head_count_kv", 1, 4096, &hp->n_head_kv, 0, err)) ||
        (st = req_int(f, arch, "context_length", 1, 1 << 24, &hp->n_ctx_train, 0, err)))
        return st;
    if (hp->n_head % hp->n_head_kv)
        return wgml_fail(err, WGML_ERR_FORMAT, "%s: %d attention heads are not a multiple of %d KV heads", gguf_name(f),
                         hp->n_head, hp->n_head_kv);
    char kl[128];
    snprintf(kl, sizeof kl, "%s.attention.key_length", arch);
    if (!gguf_find_kv(f, kl) && hp->n_embd % hp->n_head)
        return wgml_fail(err, WGML_ERR_FORMAT, "%s: embedding %d is not divisible by %d heads", gguf_name(f),
                         hp->n_embd, hp->n_head);
    hp->head_dim = hp->n_embd / hp->n_head;
    if ((st = req_int(f, arch, "attention.key_length", 1, 65536, &hp->head_dim, 0, err))) return st;
    int v_len = hp->head_dim;
    if ((st = req_int(f, arch, "attention.value_length", 1, 65536, &v_len, 0, err))) return st;
    if (v_len != hp->head_dim)
        return wgml_fail(err, WGML_ERR_UNSUPPORTED, "%s: key length %d differs from value length %d", gguf_name(f),
                         hp->head_dim, v_len);
    hp->eps = 1e-5f;
    if ((st = opt_float(f, arch, "attention.layer_norm_rms_epsilon", &hp->eps, err))) return st;
    if (!(hp->eps > 0 && hp->eps < 1))
        return wgml_fail(err, WGML_ERR_FORMAT, "%s: RMS norm epsilon %g is out of range", gguf_name(f), hp->eps);

    wgml_rope *rp = &hp->rope;
    rp->n_rot = hp->head_dim;
    if ((st = req_int(f, arch, "rope.dimension_count", 2, 65536, &rp->n_rot, 0, err))) return st;
    if (rp->n_rot > hp->head_dim || (rp->n_rot & 1))
        return wgml_fail(err, WGML_ERR_FORMAT, "%s: rope dimension %d does not fit head size %d", gguf_name(f),
                         rp->n_rot, hp->head_dim);
    rp->neox = strcmp(arch, "qwen2") == 0; /* Qwen2 rotates halves; Llama adjacent pairs */
    rp->freq_base = 10000.0f;
    rp->freq_scale = 1.0f;
    if ((st = opt_float(f, arch, "rope.freq_base", &rp->freq_base, err))) return st;
    if (!(rp->freq_base > 1.0f))
        return wgml_fail(err, WGML_ERR_FORMAT, "%s: rope frequency base %g is out of range", gguf_name(f), rp->freq_base);
    char key[128];
    snprintf(key, sizeof key, "%s.rope.scaling.type", arch);
    gguf_str stype;
    r = gguf_get_str(f, key, &stype, err);
    if (r < 0) return WGML_ERR_FORMAT;
    float factor = 0;
    if ((st = opt_float(f, arch, "rope.scaling.factor", &factor, err))) return st;
    if (r > 0 && !gguf_str_eq(stype, "none") && !gguf_str_eq(stype, "linear"))
        return wgml_fail(err, WGML_ERR_UNSUPPORTED, "%s: rope scaling '%.*s' is not supported (none and linear are)",
                         gguf_name(f), (int)stype.len, stype.ptr);
    if (r == 0) { /* older files: rope.scale_linear */
        if ((st = opt_float(f, arch, "rope.scale_linear", &factor, err))) return st;
    }
    if ((r == 0 || gguf_str_eq(stype, "linear")) && factor > 0) {
        if (!(factor >= 1e-3f && factor <= 1e3f))
            return wgml_fail(err, WGML_ERR_FORMAT, "%s: rope scaling factor %g is out of range", gguf_name(f), factor);
        rp->freq_scale = 1.0f / factor;
    }
    return WGML_OK;
}

typedef struct loader {
    const gguf_file *f;
    llama_model *m;
    wgml_error *err;
    llama_progress_fn progress;
    void *user;
    uint64_t done, total;
    int cap_bufs;
    const llama_fault *fault;
    int fault_planted;
} loader;

/* Byte offset of the f16 scale d in a block of a quantized type; -1 for none. */
static long scale_offset(uint32_t type) {
    switch (type) {
    case WGML_Q4_0: return (long)offsetof(block_q4_0, d);
    case WGML_Q4_1: return (long)offsetof(block_q4_1, d);
    case WGML_Q5_0: return (long)offsetof(block_q5_0, d);
    case WGML_Q5_1: return (long)offsetof(block_q5_1, d);
    case WGML_Q8_0: return (long)offsetof(block_q8_0, d);
    case WGML_Q2_K: return (long)offsetof(block_q2_K, d);
    case WGML_Q3_K: return (long)offsetof(block_q3_K, d);
    case WGML_Q4_K: return (long)offsetof(block_q4_K, d);
    case WGML_Q5_K: return (long)offsetof(block_q5_K, d);
    case WGML_Q6_K: return (long)offsetof(block_q6_K, d);
    default: return -1;
    }
}

/* A copy of g's bytes with the planted fault (llama_fault) in it, kept by the model. */
static wgml_status plant_fault(loader *L, const gguf_tensor *g, const void **data) {
    const llama_fault *f = L->fault;
    const wgml_dtype_traits *tr = wgml_dtype_get(g->type);
    int64_t blocks = tr ? g->n_elements / tr->block_size : 0;
    long off = tr && tr->quantized ? scale_offset(g->type) : 0;
    if (!tr || off < 0 || f->block < 0 || f->block >= blocks || L->m->fault_copy)
        return wgml_fail(L->err, WGML_ERR_INVALID_ARGUMENT, "fault: tensor '%s' (%s) has no block %lld", g->name,
                         wgml_dtype_name(g->type), (long long)f->block);
    uint8_t *copy = wgml_malloc(g->size);
    if (!copy) return wgml_fail(L->err, WGML_ERR_OUT_OF_MEMORY, "out of memory copying '%s'", g->name);
    memcpy(copy, g->data, g->size);
    uint8_t *p = copy + (size_t)f->block * (size_t)tr->type_size + (size_t)off;
    if (g->type == WGML_F32) {
        float v;
        memcpy(&v, p, 4);
        v *= f->factor;
        memcpy(p, &v, 4);
    } else {
        uint16_t h;
        memcpy(&h, p, 2);
        h = g->type == WGML_BF16 ? wgml_f32_to_bf16(wgml_bf16_to_f32(h) * f->factor)
                                 : wgml_f32_to_f16(wgml_f16_to_f32(h) * f->factor);
        memcpy(p, &h, 2);
    }
    L->m->fault_copy = copy;
    L->fault_planted = 1;
    *data = copy;
    return WGML_OK;
}

/* Looks up a weight, checks its shape [ne0, ne1] (ne1 = 1 for vectors) and
 * type, and creates its backend buffer. required = 0 leaves t zeroed if absent. */
static wgml_status load_tensor(loader *L, wgml_tensor *t, const char *name, int64_t ne0, int64_t ne1, int required) {
    memset(t, 0, sizeof *t);
    const gguf_tensor *g = gguf_find_tensor(L->f, name);
    if (!g) {
        if (!required) return WGML_OK;
        return wgml_fail(L->err, WGML_ERR_FORMAT, "%s: missing tensor '%s'", gguf_name(L->f), name);
    }
    int64_t want_rows = ne1;
    int ok = g->ne[0] == ne0 && g->ne[1] * g->ne[2] * g->ne[3] == want_rows;
    if (!ok)
        return wgml_fail(L->err, WGML_ERR_FORMAT, "%s: tensor '%s' has shape [%lld, %lld, %lld, %lld], expected [%lld, %lld]",
                         gguf_name(L->f), name, (long long)g->ne[0], (long long)g->ne[1], (long long)g->ne[2],
                         (long long)g->ne[3], (long long)ne0, (long long)ne1);
    int is_vector = ne1 == 1;
    if (is_vector && g->type != WGML_F32)
        return wgml_fail(L->err, WGML_ERR_UNSUPPORTED, "%s: tensor '%s' has type %s; norms and biases must be F32",
                         gguf_name(L->f), name, wgml_dtype_name(g->type));
    if (!is_vector && !L->m->be->supports_type(L->m->be, g->type))
        return wgml_fail(L->err, WGML_ERR_UNSUPPORTED, "%s: tensor '%s' has type %s, which the %s backend cannot use",
                         gguf_name(L->f), name, wgml_dtype_name(g->type), L->m->be->name);
    if (L->m->n_bufs == L->cap_bufs) {
        int cap = L->cap_bufs ? L->cap_bufs * 2 : 64;
        wgml_buffer **b = wgml_realloc(L->m->bufs, (size_t)cap * sizeof *b);
        if (b) L->m->bufs = b;
        const gguf_tensor **src = b ? wgml_realloc(L->m->buf_src, (size_t)cap * sizeof *src) : NULL;
        if (!b || !src) return wgml_fail(L->err, WGML_ERR_OUT_OF_MEMORY, "out of memory loading '%s'", name);
        L->m->buf_src = src;
        L->cap_bufs = cap;
    }
    const void *data = g->data;
    wgml_status st = WGML_OK;
    if (L->fault && L->fault->tensor && data && !strcmp(name, L->fault->tensor) && (st = plant_fault(L, g, &data)))
        return st;
    wgml_buffer *buf;
    st = L->m->be->weight_create(L->m->be, g->type, ne0, ne1, data, name, &buf, L->err);
    if (st) {
        wgml_error_prefix(L->err, "loading tensor '%s' (%zu bytes)", name, g->size);
        return st;
    }
    /* a backend that copied the bytes (into its own layout) does not need the mapping's pages */
    if (g->data && L->m->be->weight_in_place && !L->m->be->weight_in_place(L->m->be, buf))
        gguf_release(L->f, g->data, g->size);
    L->m->buf_src[L->m->n_bufs] = g;
    L->m->bufs[L->m->n_bufs++] = buf;
    t->type = g->type;
    t->ne[0] = ne0;
    t->ne[1] = ne1;
    t->ne[2] = t->ne[3] = 1;
    t->buf = buf;
    t->name = g->name;
    L->m->n_params += (uint64_t)g->n_elements;
    L->m->weights_bytes += g->size;
    if (g->data) { /* streamed tensors count when their bytes arrive */
        L->done += g->size;
        if (L->progress && L->progress(L->user, L->done, L->total))
            return wgml_fail(L->err, WGML_ERR_INVALID_ARGUMENT, "loading cancelled");
    }
    return WGML_OK;
}

static wgml_status load_layer(loader *L, int i) {
    const llama_hparams *hp = &L->m->hp;
    llama_layer *l = &L->m->layers[i];
    int64_t q = (int64_t)hp->n_head * hp->head_dim, kv = (int64_t)hp->n_head_kv * hp->head_dim;
    char n[96];
    wgml_status st;
#define T(field, suffix, a, b, req)                            \
    snprintf(n, sizeof n, "blk.%d.%s", i, suffix);             \
    if ((st = load_tensor(L, &l->field, n, a, b, req))) return st;
    T(attn_norm, "attn_norm.weight", hp->n_embd, 1, 1)
    T(wq, "attn_q.weight", hp->n_embd, q, 1)
    T(wk, "attn_k.weight", hp->n_embd, kv, 1)
    T(wv, "attn_v.weight", hp->n_embd, kv, 1)
    T(bq, "attn_q.bias", q, 1, 0)
    T(bk, "attn_k.bias", kv, 1, 0)
    T(bv, "attn_v.bias", kv, 1, 0)
    T(wo, "attn_output.weight", q, hp->n_embd, 1)
    T(ffn_norm, "ffn_norm.weight", hp->n_embd, 1, 1)
    T(w_gate, "ffn_gate.weight", hp->n_embd, hp->n_ff, 1)
    T(w_up, "ffn_up.weight", hp->n_embd, hp->n_ff, 1)
    T(w_down, "ffn_down.weight", hp->n_ff, hp->n_embd, 1)
#undef T
    return WGML_OK;
}

wgml_status llama_model_load(const gguf_file *f, wgml_backend *be, llama_progress_fn progress, void *user,
                             llama_model **out, wgml_error *err) {
    return llama_model_load_fault(f, be, NULL, progress, user, out, err);
}

wgml_status llama_model_load_fault(const gguf_file *f, wgml_backend *be, const llama_fault *fault,
                                   llama_progress_fn progress, void *user, llama_model **out, wgml_error *err) {
    *out = NULL;
    llama_model *m = wgml_calloc(1, sizeof *m);
    if (!m) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory loading the model");
    m->be = be;
    wgml_status st = llama_read_hparams(f, &m->hp, err);
    if (st) goto fail;
    const gguf_tensor *te = gguf_find_tensor(f, "token_embd.weight");
    if (!te) {
        st = wgml_fail(err, WGML_ERR_FORMAT, "%s: missing tensor 'token_embd.weight'", gguf_name(f));
        goto fail;
    }
    if (te->ne[1] < 1 || te->ne[1] > (1 << 24) || te->n_dims != 2) {
        st = wgml_fail(err, WGML_ERR_FORMAT, "%s: token_embd.weight has a bad shape", gguf_name(f));
        goto fail;
    }
    m->hp.n_vocab = (int)te->ne[1];
    m->layers = wgml_calloc((size_t)m->hp.n_layer, sizeof *m->layers);
    if (!m->layers) {
        st = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory loading the model");
        goto fail;
    }
    loader L = {f, m, err, progress, user, 0, 0, 0, fault, 0};
    for (int64_t i = 0; i < gguf_n_tensors(f); i++) L.total += gguf_tensor_at(f, i)->size;
    const llama_hparams *hp = &m->hp;
    if ((st = load_tensor(&L, &m->tok_embd, "token_embd.weight", hp->n_embd, hp->n_vocab, 1))) goto fail;
    if ((st = load_tensor(&L, &m->out_norm, "output_norm.weight", hp->n_embd, 1, 1))) goto fail;
    if ((st = load_tensor(&L, &m->output, "output.weight", hp->n_embd, hp->n_vocab, 0))) goto fail;
    if (!m->output.buf) m->output = m->tok_embd; /* tied embeddings */
    if ((st = load_tensor(&L, &m->rope_freqs, "rope_freqs.weight", hp->rope.n_rot / 2, 1, 0))) goto fail;
    for (int i = 0; i < hp->n_layer; i++)
        if ((st = load_layer(&L, i))) goto fail;
    if (fault && fault->tensor && !L.fault_planted) {
        st = wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "fault: the model has no weight '%s' to plant it in",
                       fault->tensor);
        goto fail;
    }
    if (progress && L.done == L.total) progress(user, L.total, L.total);
    *out = m;
    return WGML_OK;
fail:
    llama_model_free(m);
    return st;
}

void llama_model_free(llama_model *m) {
    if (!m) return;
    for (int i = 0; i < m->n_bufs; i++) m->be->buffer_free(m->be, m->bufs[i]);
    wgml_free(m->bufs);
    wgml_free(m->buf_src);
    wgml_free(m->layers);
    wgml_free(m->fault_copy);
    wgml_free(m);
}

#define STREAM_CHUNK (4u << 20)


wgml_status llama_model_stream(llama_model *m, const gguf_file *f, llama_read_fn read, void *read_user,
                               llama_progress_fn progress, void *user, wgml_error *err) {
    int *order = wgml_calloc((size_t)(m->n_bufs > 0 ? m->n_bufs : 1), sizeof *order);
    uint8_t *chunk = wgml_malloc(STREAM_CHUNK);
    wgml_status st = WGML_OK;
    if (!order || !chunk) {
        st = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory streaming the model");
        goto done;
    }
    int n = 0;
    uint64_t total = 0, done_bytes = 0;
    for (int i = 0; i < m->n_bufs; i++) {
        /* a tensor used twice (tied output) is one buffer; skip duplicates */
        int dup = 0;
        for (int j = 0; j < n; j++) dup |= m->buf_src[order[j]] == m->buf_src[i];
        if (!dup && !m->buf_src[i]->data) {
            order[n++] = i;
            total += m->buf_src[i]->size;
        }
    }
    for (int i = 1; i < n; i++) /* file order (insertion sort: a few hundred tensors) */
        for (int j = i; j > 0 && m->buf_src[order[j]]->offset < m->buf_src[order[j - 1]]->offset; j--) {
            int t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    for (int k = 0; k < n && !st; k++) {
        const gguf_tensor *t = m->buf_src[order[k]];
        size_t row = t->size / (size_t)(t->n_elements / t->ne[0]);
        int64_t rows = (int64_t)(t->size / row);
        /* an even number of rows per chunk (backends need even row starts), at least 2 */
        int64_t per = (int64_t)(STREAM_CHUNK / row) & ~(int64_t)1;
        if (per < 2) per = 2;
        uint8_t *buf = chunk;
        uint8_t *big = NULL;
        if ((size_t)per * row > STREAM_CHUNK) { /* rows larger than a chunk */
            big = wgml_malloc((size_t)per * row);
            if (!big) {
                st = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory streaming '%s'", t->name);
                break;
            }
            buf = big;
        }
        for (int64_t r = 0; r < rows && !st; r += per) {
            int64_t nr = rows - r < per ? rows - r : per;
            size_t len = (size_t)nr * row;
            uint64_t off = gguf_data_offset(f) + t->offset + (uint64_t)r * row;
            int64_t got = read(read_user, off, buf, len);
            if (got != (int64_t)len) {
                st = wgml_fail(err, WGML_ERR_IO, "%s: reading tensor '%s' at offset %llu failed (%lld of %zu bytes)",
                               gguf_name(f), t->name, (unsigned long long)off, (long long)got, len);
                break;
            }
            st = m->be->weight_write(m->be, m->bufs[order[k]], r, nr, buf, err);
            if (st) wgml_error_prefix(err, "streaming '%s'", t->name);
            done_bytes += len;
            if (!st && progress && progress(user, done_bytes, total))
                st = wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "loading cancelled");
        }
        wgml_free(big);
    }
done:
    wgml_free(order);
    wgml_free(chunk);
    return st;
}
