/*
 * weights.c - the shared weight loader (weights.h): find, check, create,
 * count; and streaming the bytes of a header-only load.
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/fp16.h"
#include "model/weights.h"

void wgml_weights_begin(wgml_weights_loader *L, const gguf_file *f, wgml_backend *be, wgml_weights *w,
                        const wgml_weight_fault *fault, wgml_load_progress_fn progress, void *user, wgml_error *err) {
    memset(w, 0, sizeof *w);
    w->be = be;
    *L = (wgml_weights_loader){.f = f, .w = w, .err = err, .progress = progress, .user = user, .fault = fault};
    for (int64_t i = 0; i < gguf_n_tensors(f); i++) L->total += gguf_tensor_at(f, i)->size;
}

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

/* A copy of g's bytes with the planted fault (wgml_weight_fault) in it, kept by the model. */
static wgml_status plant_fault(wgml_weights_loader *L, const gguf_tensor *g, const void **data) {
    const wgml_weight_fault *f = L->fault;
    const wgml_dtype_traits *tr = wgml_dtype_get(g->type);
    int64_t blocks = tr ? g->n_elements / tr->block_size : 0;
    long off = tr && tr->quantized ? scale_offset(g->type) : 0;
    if (L->w->fault_copy && L->fault_src == g) { /* another part of the same tensor */
        *data = L->w->fault_copy;
        return WGML_OK;
    }
    if (!tr || off < 0 || f->block < 0 || f->block >= blocks || L->w->fault_copy)
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
    L->w->fault_copy = copy;
    L->fault_src = g;
    L->fault_planted = 1;
    *data = copy;
    return WGML_OK;
}

/* Finds `name`, checks it is [ne0, ne1] and of a type it may have. */
static wgml_status find_checked(wgml_weights_loader *L, const char *name, int64_t ne0, int64_t ne1, int required,
                                const gguf_tensor **out) {
    *out = NULL;
    const gguf_tensor *g = gguf_find_tensor(L->f, name);
    if (!g) {
        if (!required) return WGML_OK;
        return wgml_fail(L->err, WGML_ERR_FORMAT, "%s: missing tensor '%s'", gguf_name(L->f), name);
    }
    if (g->ne[0] != ne0 || g->ne[1] * g->ne[2] * g->ne[3] != ne1)
        return wgml_fail(L->err, WGML_ERR_FORMAT, "%s: tensor '%s' has shape [%lld, %lld, %lld, %lld], expected [%lld, %lld]",
                         gguf_name(L->f), name, (long long)g->ne[0], (long long)g->ne[1], (long long)g->ne[2],
                         (long long)g->ne[3], (long long)ne0, (long long)ne1);
    if (ne1 == 1 && g->type != WGML_F32)
        return wgml_fail(L->err, WGML_ERR_UNSUPPORTED, "%s: tensor '%s' has type %s; norms and biases must be F32",
                         gguf_name(L->f), name, wgml_dtype_name(g->type));
    if (ne1 != 1 && !L->w->be->supports_type(L->w->be, g->type))
        return wgml_fail(L->err, WGML_ERR_UNSUPPORTED, "%s: tensor '%s' has type %s, which the %s backend cannot use",
                         gguf_name(L->f), name, wgml_dtype_name(g->type), L->w->be->name);
    *out = g;
    return WGML_OK;
}

/* Creates rows [first, first + rows) of g as one backend weight into t. */
static wgml_status create(wgml_weights_loader *L, wgml_tensor *t, const gguf_tensor *g, const char *name, int64_t first,
                          int64_t rows) {
    wgml_weights *w = L->w;
    if (w->n == w->cap) {
        int cap = w->cap ? w->cap * 2 : 64;
        wgml_buffer **b = wgml_realloc(w->bufs, (size_t)cap * sizeof *b);
        if (b) w->bufs = b;
        const gguf_tensor **src = b ? wgml_realloc(w->src, (size_t)cap * sizeof *src) : NULL;
        if (src) w->src = src;
        int64_t *r0 = src ? wgml_realloc(w->first_row, (size_t)cap * sizeof *r0) : NULL;
        if (r0) w->first_row = r0;
        int64_t *nr = r0 ? wgml_realloc(w->n_rows, (size_t)cap * sizeof *nr) : NULL;
        if (nr) w->n_rows = nr;
        if (!nr) return wgml_fail(L->err, WGML_ERR_OUT_OF_MEMORY, "out of memory loading '%s'", name);
        w->cap = cap;
    }
    const int64_t ne0 = g->ne[0], all_rows = g->n_elements / ne0;
    const size_t row_bytes = g->size / (size_t)all_rows, bytes = row_bytes * (size_t)rows;
    const uint8_t *data = g->data;
    wgml_status st = WGML_OK;
    if (L->fault && L->fault->tensor && data && !strcmp(name, L->fault->tensor) &&
        (st = plant_fault(L, g, (const void **)&data)))
        return st;
    if (data) data += row_bytes * (size_t)first;
    wgml_buffer *buf;
    st = w->be->weight_create(w->be, g->type, ne0, rows, data, name, &buf, L->err);
    if (st) {
        wgml_error_prefix(L->err, "loading tensor '%s' (%zu bytes)", name, bytes);
        return st;
    }
    /* a backend that copied the bytes (into its own layout) does not need the mapping's pages
       (a part's pages stay: the other parts read them too) */
    if (g->data && rows == all_rows && w->be->weight_in_place && !w->be->weight_in_place(w->be, buf))
        gguf_release(L->f, g->data, g->size);
    w->src[w->n] = g;
    w->first_row[w->n] = first;
    w->n_rows[w->n] = rows;
    w->bufs[w->n++] = buf;
    *t = (wgml_tensor){.type = g->type, .ne = {ne0, rows, 1, 1}, .buf = buf, .name = g->name};
    w->n_params += (uint64_t)(ne0 * rows);
    w->bytes += bytes;
    if (g->data) { /* streamed tensors count when their bytes arrive */
        L->done += bytes;
        if (L->progress && L->progress(L->user, L->done, L->total))
            return wgml_fail(L->err, WGML_ERR_INVALID_ARGUMENT, "loading cancelled");
    }
    return WGML_OK;
}

wgml_status wgml_weights_load(wgml_weights_loader *L, wgml_tensor *t, const char *name, int64_t ne0, int64_t ne1, int required) {
    memset(t, 0, sizeof *t);
    const gguf_tensor *g;
    wgml_status st = find_checked(L, name, ne0, ne1, required, &g);
    if (st || !g) return st;
    return create(L, t, g, name, 0, ne1);
}

wgml_status wgml_weights_load_part(wgml_weights_loader *L, wgml_tensor *t, const char *name, int64_t ne0, int64_t ne1,
                                   int64_t first, int64_t rows) {
    memset(t, 0, sizeof *t);
    if (first < 0 || rows < 1 || first + rows > ne1)
        return wgml_fail(L->err, WGML_ERR_INVALID_ARGUMENT, "rows %lld..%lld of '%s' are outside its %lld rows",
                         (long long)first, (long long)(first + rows - 1), name, (long long)ne1);
    const gguf_tensor *g;
    wgml_status st = find_checked(L, name, ne0, ne1, 1, &g);
    if (st) return st;
    return create(L, t, g, name, first, rows);
}

wgml_status wgml_weights_end(wgml_weights_loader *L) {
    if (L->fault && L->fault->tensor && !L->fault_planted)
        return wgml_fail(L->err, WGML_ERR_INVALID_ARGUMENT, "fault: the model has no weight '%s' to plant it in",
                         L->fault->tensor);
    if (L->progress && L->done == L->total) L->progress(L->user, L->total, L->total);
    return WGML_OK;
}

void wgml_weights_free(wgml_weights *w) {
    if (!w) return;
    for (int i = 0; i < w->n; i++) w->be->buffer_free(w->be, w->bufs[i]);
    wgml_free(w->bufs);
    wgml_free(w->src);
    wgml_free(w->first_row);
    wgml_free(w->n_rows);
    wgml_free(w->fault_copy);
    for (int h = 0; h < w->n_host; h++)
        wgml_free(w->host_data[h]);
    wgml_free(w->host_src);
    wgml_free(w->host_data);
    memset(w, 0, sizeof *w);
}

#define STREAM_CHUNK (4u << 20)


/* A tensor streamed in: weight i (>= 0) or host tensor -(i + 1). */
static const gguf_tensor *stream_src(const wgml_weights *w, int i) { return i >= 0 ? w->src[i] : w->host_src[-i - 1]; }
static int64_t stream_first(const wgml_weights *w, int i) { return i >= 0 ? w->first_row[i] : 0; }

/* Collects the tensors of f that no weight holds (and that have no bytes) into w->host_src. */
static wgml_status find_host_tensors(wgml_weights *w, const gguf_file *f, wgml_error *err) {
    const int64_t n = gguf_n_tensors(f);
    for (int64_t k = 0; k < n; k++) {
        const gguf_tensor *t = gguf_tensor_at(f, k);
        int held = t->data != NULL;
        for (int i = 0; i < w->n && !held; i++) held = w->src[i] == t;
        if (held) continue;
        if (!w->host_src) {
            w->host_src = wgml_calloc((size_t)n, sizeof *w->host_src);
            w->host_data = wgml_calloc((size_t)n, sizeof *w->host_data);
            if (!w->host_src || !w->host_data)
                return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory streaming the model");
        }
        w->host_src[w->n_host++] = t;
    }
    return WGML_OK;
}

wgml_status wgml_weights_stream(wgml_weights *w, const gguf_file *f, wgml_weights_read_fn read, void *read_user,
                                wgml_load_progress_fn progress, void *user, wgml_error *err) {
    wgml_status st = w->n_host ? WGML_OK : find_host_tensors(w, f, err);
    int *order = st ? NULL : wgml_calloc((size_t)(w->n + w->n_host > 0 ? w->n + w->n_host : 1), sizeof *order);
    uint8_t *chunk = st ? NULL : wgml_malloc(STREAM_CHUNK);
    if (st) goto done;
    if (!order || !chunk) {
        st = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory streaming the model");
        goto done;
    }
    int n = 0;
    uint64_t total = 0, done_bytes = 0;
    for (int i = 0; i < w->n; i++) {
        /* a tensor used twice (tied output) is one buffer; skip duplicates */
        int dup = 0;
        for (int j = 0; j < n; j++) dup |= w->src[order[j]] == w->src[i] && w->first_row[order[j]] == w->first_row[i];
        if (!dup && !w->src[i]->data) {
            order[n++] = i;
            total += w->src[i]->size / (uint64_t)(w->src[i]->n_elements / w->src[i]->ne[0]) * (uint64_t)w->n_rows[i];
        }
    }
    for (int h = 0; h < w->n_host; h++)
        if (!w->host_data[h]) {
            order[n++] = -h - 1;
            total += w->host_src[h]->size;
        }
    for (int i = 1; i < n; i++) /* file order (insertion sort: a few hundred tensors) */
        for (int j = i; j > 0; j--) {
            const gguf_tensor *a = stream_src(w, order[j]), *b = stream_src(w, order[j - 1]);
            if (!(a->offset < b->offset || (a == b && stream_first(w, order[j]) < stream_first(w, order[j - 1]))))
                break;
            int t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    for (int k = 0; k < n && !st; k++) {
        const gguf_tensor *t = stream_src(w, order[k]);
        if (order[k] < 0) { /* a tensor the family reads on the host: whole, into memory of its own */
            uint8_t *dst = wgml_malloc(t->size ? t->size : 1);
            if (!dst) {
                st = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory streaming '%s' (%zu bytes)", t->name,
                               t->size);
                break;
            }
            w->host_data[-order[k] - 1] = dst;
            for (size_t at = 0; at < t->size && !st; at += STREAM_CHUNK) {
                size_t len = t->size - at < STREAM_CHUNK ? t->size - at : STREAM_CHUNK;
                uint64_t off = gguf_data_offset(f) + t->offset + at;
                int64_t got = read(read_user, off, dst + at, len);
                if (got != (int64_t)len)
                    st = wgml_fail(err, WGML_ERR_IO, "%s: reading tensor '%s' at offset %llu failed (%lld of %zu bytes)",
                                   gguf_name(f), t->name, (unsigned long long)off, (long long)got, len);
                done_bytes += len;
                if (!st && progress && progress(user, done_bytes, total))
                    st = wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "loading cancelled");
            }
            continue;
        }
        size_t row = t->size / (size_t)(t->n_elements / t->ne[0]);
        int64_t rows = w->n_rows[order[k]], first = w->first_row[order[k]];
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
            uint64_t off = gguf_data_offset(f) + t->offset + (uint64_t)(first + r) * row;
            int64_t got = read(read_user, off, buf, len);
            if (got != (int64_t)len) {
                st = wgml_fail(err, WGML_ERR_IO, "%s: reading tensor '%s' at offset %llu failed (%lld of %zu bytes)",
                               gguf_name(f), t->name, (unsigned long long)off, (long long)got, len);
                break;
            }
            st = w->be->weight_write(w->be, w->bufs[order[k]], r, nr, buf, err);
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

const void *wgml_weights_host_data(const wgml_weights *w, const gguf_tensor *t) {
    if (!t || t->data) return t ? t->data : NULL;
    for (int h = 0; w && h < w->n_host; h++)
        if (w->host_src[h] == t) return w->host_data[h];
    return NULL;
}

const char *wgml_weights_main_type(const wgml_weights *w) {
    uint64_t by_type[WGML_DTYPE_COUNT] = {0};
    for (int i = 0; i < w->n; i++) {
        const gguf_tensor *g = w->src[i];
        const int64_t all_rows = g->n_elements / g->ne[0];
        if (w->n_rows[i] > 1 && g->type < WGML_DTYPE_COUNT)
            by_type[g->type] += g->size / (size_t)all_rows * (size_t)w->n_rows[i];
    }
    int best = -1;
    for (int t = 0; t < WGML_DTYPE_COUNT; t++)
        if (by_type[t] && (best < 0 || by_type[t] > by_type[best])) best = t;
    return best < 0 ? "" : wgml_dtype_name((uint32_t)best);
}
