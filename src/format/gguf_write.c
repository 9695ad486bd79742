/*
 * gguf_write.c - the GGUF writer (see gguf.h).
 *
 * Metadata is serialized into a byte buffer as it is set; tensor infos are
 * kept in a list and their offsets laid out in begin(), once the alignment
 * (`general.alignment`, default 32) is final. begin() writes
 * header, metadata and tensor table; write_tensor() appends each tensor's
 * bytes plus alignment padding; finish() renames "<path>.tmp" to <path>.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/dtype.h"
#include "core/error.h"
#include "format/gguf.h"

typedef struct wtensor {
    char *name;
    uint32_t type;
    int n_dims;
    int64_t ne[GGUF_MAX_DIMS];
    uint64_t offset;
    size_t size;
} wtensor;

struct gguf_writer {
    uint8_t *kv;  /* serialized metadata */
    size_t kv_len, kv_cap;
    uint64_t n_kv;
    char **keys;
    size_t n_keys_cap;
    wtensor *tensors;
    size_t n_tensors, cap_tensors;
    uint64_t data_size;
    size_t alignment;
    FILE *fp;
    char *path, *tmp_path;
    char *mem;      /* gguf_writer_begin_memory: the file's bytes, malloc'ed at their final size (fmemopen) */
    size_t mem_size;
    int to_memory;
    size_t mem_pos;  /* memory: the bytes written so far */
    int begun;       /* begin or begin_memory was called, finish not yet */
    size_t next_tensor;
    uint64_t written;
};

gguf_writer *gguf_writer_create(void) {
    gguf_writer *w = wgml_calloc(1, sizeof *w);
    if (w) w->alignment = GGUF_DEFAULT_ALIGNMENT;
    return w;
}

void gguf_writer_free(gguf_writer *w) {
    if (!w) return;
    if (w->fp) {
        fclose(w->fp);
        if (!w->to_memory) remove(w->tmp_path);
    }
    free(w->mem); /* from malloc, as take_memory's callers free it */
    for (uint64_t i = 0; i < w->n_kv; i++) wgml_free(w->keys[i]);
    wgml_free(w->keys);
    for (size_t i = 0; i < w->n_tensors; i++) wgml_free(w->tensors[i].name);
    wgml_free(w->tensors);
    wgml_free(w->kv);
    wgml_free(w->path);
    wgml_free(w->tmp_path);
    wgml_free(w);
}

static wgml_status oom(wgml_error *err) { return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory writing GGUF"); }

static wgml_status put(gguf_writer *w, const void *p, size_t n, wgml_error *err) {
    if (n > SIZE_MAX / 2 - w->kv_len) return oom(err); /* the doubling below would overflow */
    if (w->kv_len + n > w->kv_cap) {
        size_t cap = w->kv_cap ? w->kv_cap : 4096;
        while (cap < w->kv_len + n) cap *= 2;
        uint8_t *b = wgml_realloc(w->kv, cap);
        if (!b) return oom(err);
        w->kv = b;
        w->kv_cap = cap;
    }
    if (n) memcpy(w->kv + w->kv_len, p, n); /* p may be NULL for an empty array */
    w->kv_len += n;
    return WGML_OK;
}

static wgml_status put_u32(gguf_writer *w, uint32_t v, wgml_error *err) { return put(w, &v, 4, err); }
static wgml_status put_u64(gguf_writer *w, uint64_t v, wgml_error *err) { return put(w, &v, 8, err); }
static wgml_status put_str(gguf_writer *w, const char *s, uint64_t n, wgml_error *err) {
    wgml_status st = put_u64(w, n, err);
    return st ? st : put(w, s, (size_t)n, err);
}

int gguf_writer_has_key(const gguf_writer *w, const char *key) {
    for (uint64_t i = 0; i < w->n_kv; i++)
        if (strcmp(w->keys[i], key) == 0) return 1;
    return 0;
}

/* Starts a key/value: checks for duplicates, records the key, writes key + type. */
static wgml_status begin_kv(gguf_writer *w, const char *key, gguf_type type, wgml_error *err) {
    if (w->begun) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "GGUF writer: metadata '%s' set after begin", key);
    if (gguf_writer_has_key(w, key))
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "GGUF writer: duplicate metadata key '%s'", key);
    /* the writer pads with this value, so it must be one the reader accepts */
    if (strcmp(key, "general.alignment") == 0 && type != GGUF_TYPE_UINT32)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "GGUF writer: general.alignment must be a u32, not %s",
                         gguf_type_name(type));
    if (w->n_kv == w->n_keys_cap) {
        size_t cap = w->n_keys_cap ? w->n_keys_cap * 2 : 32;
        char **k = wgml_realloc(w->keys, cap * sizeof *k);
        if (!k) return oom(err);
        w->keys = k;
        w->n_keys_cap = cap;
    }
    char *copy = wgml_strdup(key);
    if (!copy) return oom(err);
    w->keys[w->n_kv++] = copy;
    wgml_status st = put_str(w, key, strlen(key), err);
    return st ? st : put_u32(w, (uint32_t)type, err);
}

/* general.alignment decides the padding of the data section and of every
 * tensor, so the writer pads with the value it is given, checked as the
 * reader will check it. */
static int is_alignment_key(const char *key) { return strcmp(key, "general.alignment") == 0; }

static wgml_status check_alignment(uint64_t v, wgml_error *err) {
    if (v == 0 || (v & (v - 1)) || v > (1u << 20))
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                         "GGUF writer: general.alignment %llu is not a power of two up to 1 MiB",
                         (unsigned long long)v);
    return WGML_OK;
}

wgml_status gguf_writer_set_u32(gguf_writer *w, const char *key, uint32_t v, wgml_error *err) {
    wgml_status st = is_alignment_key(key) ? check_alignment(v, err) : WGML_OK;
    if (!st) st = begin_kv(w, key, GGUF_TYPE_UINT32, err);
    if (!st && is_alignment_key(key)) w->alignment = v;
    return st ? st : put(w, &v, sizeof v, err);
}

#define SETTER(fn, ctype, gtype)                                                             \
    wgml_status fn(gguf_writer *w, const char *key, ctype v, wgml_error *err) {              \
        wgml_status st = begin_kv(w, key, gtype, err);                                       \
        return st ? st : put(w, &v, sizeof v, err);                                          \
    }
SETTER(gguf_writer_set_i32, int32_t, GGUF_TYPE_INT32)
SETTER(gguf_writer_set_u64, uint64_t, GGUF_TYPE_UINT64)
SETTER(gguf_writer_set_f32, float, GGUF_TYPE_FLOAT32)
#undef SETTER

wgml_status gguf_writer_set_bool(gguf_writer *w, const char *key, int v, wgml_error *err) {
    uint8_t b = v ? 1 : 0;
    wgml_status st = begin_kv(w, key, GGUF_TYPE_BOOL, err);
    return st ? st : put(w, &b, 1, err);
}

wgml_status gguf_writer_set_str(gguf_writer *w, const char *key, const char *v, wgml_error *err) {
    wgml_status st = begin_kv(w, key, GGUF_TYPE_STRING, err);
    return st ? st : put_str(w, v, strlen(v), err);
}

static size_t elem_size(gguf_type t) {
    switch (t) {
    case GGUF_TYPE_UINT8: case GGUF_TYPE_INT8: case GGUF_TYPE_BOOL: return 1;
    case GGUF_TYPE_UINT16: case GGUF_TYPE_INT16: return 2;
    case GGUF_TYPE_UINT32: case GGUF_TYPE_INT32: case GGUF_TYPE_FLOAT32: return 4;
    case GGUF_TYPE_UINT64: case GGUF_TYPE_INT64: case GGUF_TYPE_FLOAT64: return 8;
    default: return 0;
    }
}

wgml_status gguf_writer_set_arr(gguf_writer *w, const char *key, gguf_type elem_type, const void *data, uint64_t n,
                                wgml_error *err) {
    size_t es = elem_size(elem_type);
    if (!es) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "GGUF writer: '%s': arrays of %s need their own setter",
                              key, gguf_type_name(elem_type));
    if (n > SIZE_MAX / es) return oom(err);
    wgml_status st;
    if ((st = begin_kv(w, key, GGUF_TYPE_ARRAY, err)) || (st = put_u32(w, (uint32_t)elem_type, err)) ||
        (st = put_u64(w, n, err)))
        return st;
    return put(w, data, (size_t)n * es, err);
}

wgml_status gguf_writer_set_arr_str(gguf_writer *w, const char *key, const char *const *strs, const uint64_t *lens,
                                    uint64_t n, wgml_error *err) {
    wgml_status st;
    if ((st = begin_kv(w, key, GGUF_TYPE_ARRAY, err)) || (st = put_u32(w, GGUF_TYPE_STRING, err)) ||
        (st = put_u64(w, n, err)))
        return st;
    for (uint64_t i = 0; i < n; i++)
        if ((st = put_str(w, strs[i], lens ? lens[i] : strlen(strs[i]), err))) return st;
    return WGML_OK;
}

wgml_status gguf_writer_copy_kv(gguf_writer *w, const gguf_kv *kv, wgml_error *err) {
    int alignment = is_alignment_key(kv->key) && kv->value.type == GGUF_TYPE_UINT32;
    wgml_status st = alignment ? check_alignment(kv->value.v.u64, err) : WGML_OK;
    if (!st) st = begin_kv(w, kv->key, kv->value.type, err);
    if (!st && alignment) w->alignment = (size_t)kv->value.v.u64;
    return st ? st : put(w, kv->raw, kv->raw_size, err);
}

wgml_status gguf_writer_add_tensor(gguf_writer *w, const char *name, uint32_t type, int n_dims, const int64_t *ne,
                                   wgml_error *err) {
    if (w->begun) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "GGUF writer: tensor '%s' added after begin", name);
    if (n_dims < 1 || n_dims > GGUF_MAX_DIMS)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "GGUF writer: tensor '%s' has %d dims", name, n_dims);
    for (size_t i = 0; i < w->n_tensors; i++)
        if (strcmp(w->tensors[i].name, name) == 0)
            return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "GGUF writer: duplicate tensor '%s'", name);
    int64_t rows = 1;
    for (int d = 1; d < n_dims; d++) {
        if (ne[d] <= 0 || rows > INT64_MAX / ne[d])
            return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "GGUF writer: tensor '%s' has a bad shape", name);
        rows *= ne[d];
    }
    size_t row = ne[0] > 0 ? wgml_row_size(type, ne[0]) : 0;
    if (!row || (uint64_t)rows > SIZE_MAX / row)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                         "GGUF writer: tensor '%s': row of %lld elements does not fit type %s", name, (long long)ne[0],
                         wgml_dtype_name(type));
    if (w->n_tensors == w->cap_tensors) {
        size_t cap = w->cap_tensors ? w->cap_tensors * 2 : 64;
        wtensor *t = wgml_realloc(w->tensors, cap * sizeof *t);
        if (!t) return oom(err);
        w->tensors = t;
        w->cap_tensors = cap;
    }
    wtensor *t = &w->tensors[w->n_tensors];
    memset(t, 0, sizeof *t);
    t->name = wgml_strdup(name);
    if (!t->name) return oom(err);
    t->type = type;
    t->n_dims = n_dims;
    for (int d = 0; d < GGUF_MAX_DIMS; d++) t->ne[d] = d < n_dims ? ne[d] : 1;
    t->size = row * (size_t)rows;
    w->n_tensors++;
    return WGML_OK;
}

static wgml_status io_fail(gguf_writer *w, wgml_error *err) {
    return wgml_fail(err, WGML_ERR_IO, "%s: write failed: %s", w->path, strerror(errno));
}

/* n bytes to the file, or into the memory buffer (never past its laid-out size): the bytes written. */
static size_t emit(gguf_writer *w, const void *p, size_t n) {
    if (!w->to_memory) return fwrite(p, 1, n, w->fp);
    if (n > w->mem_size - w->mem_pos) return 0;
    if (n) memcpy(w->mem + w->mem_pos, p, n);
    w->mem_pos += n;
    return n;
}

static wgml_status pad(gguf_writer *w, uint64_t pos, wgml_error *err) {
    static const uint8_t zeros[64];
    size_t n = (size_t)((w->alignment - pos % w->alignment) % w->alignment);
    while (n) {
        size_t k = n < sizeof zeros ? n : sizeof zeros;
        if (emit(w, zeros, k) != k) return io_fail(w, err);
        n -= k;
    }
    return WGML_OK;
}

static wgml_status write_header(gguf_writer *w, wgml_error *err);

wgml_status gguf_writer_begin(gguf_writer *w, const char *path, wgml_error *err) {
    if (w->begun) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "GGUF writer: begin called twice");
    size_t n = strlen(path);
    wgml_free(w->path); /* from an earlier begin that failed */
    wgml_free(w->tmp_path);
    w->tmp_path = NULL;
    w->path = wgml_strdup(path);
    w->tmp_path = wgml_malloc(n + 5);
    if (!w->path || !w->tmp_path) return oom(err);
    memcpy(w->tmp_path, path, n);
    memcpy(w->tmp_path + n, ".tmp", 5);
    w->fp = fopen(w->tmp_path, "wb");
    if (!w->fp) return wgml_fail(err, WGML_ERR_IO, "%s: cannot create: %s", w->tmp_path, strerror(errno));
    w->begun = 1;
    return write_header(w, err);
}

wgml_status gguf_writer_begin_memory(gguf_writer *w, wgml_error *err) {
    if (w->begun) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "GGUF writer: begin called twice");
    wgml_free(w->path);
    w->path = wgml_strdup("(memory)");
    if (!w->path) return oom(err);
    /* the whole file's size is known now: one buffer of that size, written in place (a growing stream
     * would copy and clear it over and over) */
    uint64_t head = 4 + 4 + 8 + 8 + (uint64_t)w->kv_len, data = 0;
    for (size_t i = 0; i < w->n_tensors; i++) {
        head += 8 + strlen(w->tensors[i].name) + 4 + 8 * (uint64_t)w->tensors[i].n_dims + 4 + 8;
        data += (w->tensors[i].size + w->alignment - 1) / w->alignment * w->alignment;
    }
    const uint64_t total = (head + w->alignment - 1) / w->alignment * w->alignment + data;
    if (total > SIZE_MAX / 2 || !(w->mem = malloc(total ? (size_t)total : 1))) return oom(err);
    w->mem_size = (size_t)total;
    w->mem_pos = 0;
    w->to_memory = 1;
    w->begun = 1;
    return write_header(w, err);
}

static wgml_status write_header(gguf_writer *w, wgml_error *err) {
    /* offsets are laid out now that general.alignment is final */
    w->data_size = 0;
    for (size_t i = 0; i < w->n_tensors; i++) {
        w->tensors[i].offset = w->data_size;
        w->data_size += (w->tensors[i].size + w->alignment - 1) / w->alignment * w->alignment;
    }
    uint32_t magic = 0x46554747u, version = 3;
    uint64_t nt = w->n_tensors;
    uint64_t pos = 0;
#define W(p, sz)                                                          \
    do {                                                                  \
        if (emit(w, (p), (sz)) != (size_t)(sz)) return io_fail(w, err);        \
        pos += (sz);                                                      \
    } while (0)
    W(&magic, 4);
    W(&version, 4);
    W(&nt, 8);
    W(&w->n_kv, 8);
    if (w->kv_len) W(w->kv, w->kv_len);
    for (size_t i = 0; i < w->n_tensors; i++) {
        const wtensor *t = &w->tensors[i];
        uint64_t len = strlen(t->name);
        uint32_t nd = (uint32_t)t->n_dims;
        W(&len, 8);
        W(t->name, len);
        W(&nd, 4);
        for (int d = 0; d < t->n_dims; d++) {
            uint64_t ne = (uint64_t)t->ne[d];
            W(&ne, 8);
        }
        W(&t->type, 4);
        W(&t->offset, 8);
    }
#undef W
    return pad(w, pos, err);
}

wgml_status gguf_writer_write_tensor(gguf_writer *w, const void *data, size_t size, wgml_error *err) {
    if (!w->begun) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "GGUF writer: write_tensor before begin");
    if (w->next_tensor >= w->n_tensors)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "GGUF writer: more tensor data than tensors declared");
    const wtensor *t = &w->tensors[w->next_tensor];
    if (size != t->size)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "GGUF writer: tensor '%s' needs %zu bytes, got %zu", t->name,
                         t->size, size);
    if (emit(w, data, size) != size) return io_fail(w, err);
    w->next_tensor++;
    return pad(w, size, err);
}

wgml_status gguf_writer_finish(gguf_writer *w, wgml_error *err) {
    if (!w->begun) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "GGUF writer: finish before begin");
    if (w->next_tensor != w->n_tensors)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "GGUF writer: %zu of %zu tensors written", w->next_tensor,
                         w->n_tensors);
    w->begun = 0;
    if (w->to_memory) { /* every byte laid out was written */
        if (w->mem_pos != w->mem_size) return wgml_fail(err, WGML_ERR_IO, "%s: write failed", w->path);
        return WGML_OK;
    }
    int bad = fflush(w->fp) != 0 || ferror(w->fp);
    bad |= fclose(w->fp) != 0;
    w->fp = NULL;
    if (bad) {
        if (!w->to_memory) remove(w->tmp_path);
        return wgml_fail(err, WGML_ERR_IO, "%s: write failed", w->path);
    }
    if (w->to_memory) return WGML_OK;
    if (rename(w->tmp_path, w->path) != 0) {
        wgml_status st = wgml_fail(err, WGML_ERR_IO, "%s: cannot rename into place: %s", w->path, strerror(errno));
        remove(w->tmp_path);
        return st;
    }
    return WGML_OK;
}

wgml_status gguf_writer_take_memory(gguf_writer *w, void **data, size_t *size, wgml_error *err) {
    if (!w->to_memory || w->begun || !w->mem)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "GGUF writer: no finished file in memory");
    *data = w->mem;
    *size = w->mem_size;
    w->mem = NULL;
    w->mem_size = 0;
    return WGML_OK;
}
