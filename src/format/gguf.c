/*
 * gguf.c - the GGUF reader (see gguf.h for the format and the guarantees).
 *
 * Parsing walks a bounds-checked cursor over the bytes. Any count read from
 * the file is checked against the bytes that remain before anything is
 * allocated for it, so a hostile header cannot make us allocate more than a
 * small multiple of the file's size.
 */
#include "format/gguf.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#if !defined(__wasm__)
#include <sys/mman.h>
#endif

#include "core/alloc.h"
#include "core/dtype.h"
#include "core/error.h"
#include "format/file_bytes.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "wgml reads GGUF in place and needs a little-endian host"
#endif

#define GGUF_MAGIC 0x46554747u /* "GGUF" read as little-endian u32 */
#define GGUF_MAX_ARRAY_DEPTH 8
#define GGUF_MAX_STRING (1u << 30)

struct gguf_file {
    char *name;
    const uint8_t *base;
    size_t size;
    int mapped; /* WGML_BYTES_*: base borrowed (0), mapped (1) or an owned heap copy (2) */
    int malloced; /* gguf_own_bytes: base came from malloc and is free()d at close */
    size_t avail; /* bytes present at base (< size for a header-only file) */
    int hit_end;  /* parsing ran into the end of the available bytes */
    uint32_t version;
    size_t alignment;
    size_t data_offset;
    int64_t n_kv;
    gguf_kv *kv;
    int64_t n_tensors;
    gguf_tensor *tensors;
    /* keys and tensor names in sorted order: duplicates are found by sorting
     * and lookups are binary searches, so a hostile file with millions of
     * entries costs n log n, not n^2 (both set once the header is parsed) */
    const gguf_kv **kv_by_key;
    const gguf_tensor **tensor_by_name;
    /* allocations owned for arrays of strings/arrays, chained for freeing */
    void **owned;
    size_t n_owned, cap_owned;
};

typedef struct cursor {
    const gguf_file *f;
    const uint8_t *p, *end;
    wgml_error *err;
} cursor;

static uint64_t cur_offset(const cursor *c) { return (uint64_t)(c->p - c->f->base); }
static uint64_t cur_left(const cursor *c) { return (uint64_t)(c->end - c->p); }

static wgml_status truncated(cursor *c, const char *what) {
    ((gguf_file *)c->f)->hit_end = 1;
    return wgml_fail(c->err, WGML_ERR_FORMAT, "%s: file truncated at offset %llu while reading %s",
                     c->f->name, (unsigned long long)cur_offset(c), what);
}

static wgml_status rd_bytes(cursor *c, void *dst, size_t n, const char *what) {
    if (cur_left(c) < n) return truncated(c, what);
    memcpy(dst, c->p, n);
    c->p += n;
    return WGML_OK;
}

static wgml_status rd_u32(cursor *c, uint32_t *v, const char *what) { return rd_bytes(c, v, 4, what); }
static wgml_status rd_u64(cursor *c, uint64_t *v, const char *what) { return rd_bytes(c, v, 8, what); }

static wgml_status rd_str(cursor *c, gguf_str *s, const char *what) {
    uint64_t len = 0;
    wgml_status st = rd_u64(c, &len, what);
    if (st) return st;
    if (len > cur_left(c)) {
        ((gguf_file *)c->f)->hit_end = 1;
        return wgml_fail(c->err, WGML_ERR_FORMAT,
                         "%s: %s at offset %llu has length %llu, past the end of the file", c->f->name,
                         what, (unsigned long long)(cur_offset(c) - 8), (unsigned long long)len);
    }
    if (len > GGUF_MAX_STRING)
        return wgml_fail(c->err, WGML_ERR_FORMAT, "%s: %s at offset %llu is too long (%llu bytes)",
                         c->f->name, what, (unsigned long long)(cur_offset(c) - 8), (unsigned long long)len);
    s->ptr = (const char *)c->p;
    s->len = len;
    c->p += len;
    return WGML_OK;
}

static int fixed_size(gguf_type t) {
    switch (t) {
    case GGUF_TYPE_UINT8: case GGUF_TYPE_INT8: case GGUF_TYPE_BOOL: return 1;
    case GGUF_TYPE_UINT16: case GGUF_TYPE_INT16: return 2;
    case GGUF_TYPE_UINT32: case GGUF_TYPE_INT32: case GGUF_TYPE_FLOAT32: return 4;
    case GGUF_TYPE_UINT64: case GGUF_TYPE_INT64: case GGUF_TYPE_FLOAT64: return 8;
    default: return 0;
    }
}

const char *gguf_type_name(gguf_type t) {
    static const char *names[GGUF_TYPE_COUNT] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32",
                                                 "bool", "string", "array", "u64", "i64", "f64"};
    return (unsigned)t < GGUF_TYPE_COUNT ? names[t] : "invalid";
}

static wgml_status own(gguf_file *f, void *p, wgml_error *err) {
    if (f->n_owned == f->cap_owned) {
        size_t cap = f->cap_owned ? f->cap_owned * 2 : 16;
        void **o = wgml_realloc(f->owned, cap * sizeof *o);
        if (!o) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "%s: out of memory", f->name);
        f->owned = o;
        f->cap_owned = cap;
    }
    f->owned[f->n_owned++] = p;
    return WGML_OK;
}

static wgml_status rd_value(cursor *c, gguf_file *f, gguf_type type, gguf_value *out, int depth,
                            const char *key);

static wgml_status rd_scalar(cursor *c, gguf_type type, gguf_value *out, const char *key) {
    uint8_t b[8] = {0};
    int n = fixed_size(type);
    wgml_status st = rd_bytes(c, b, (size_t)n, key);
    if (st) return st;
    out->type = type;
    switch (type) {
    case GGUF_TYPE_UINT8: out->v.u64 = b[0]; break;
    case GGUF_TYPE_INT8: out->v.i64 = (int8_t)b[0]; break;
    case GGUF_TYPE_UINT16: { uint16_t x; memcpy(&x, b, 2); out->v.u64 = x; break; }
    case GGUF_TYPE_INT16: { int16_t x; memcpy(&x, b, 2); out->v.i64 = x; break; }
    case GGUF_TYPE_UINT32: { uint32_t x; memcpy(&x, b, 4); out->v.u64 = x; break; }
    case GGUF_TYPE_INT32: { int32_t x; memcpy(&x, b, 4); out->v.i64 = x; break; }
    case GGUF_TYPE_FLOAT32: { float x; memcpy(&x, b, 4); out->v.f64 = x; break; }
    case GGUF_TYPE_UINT64: { uint64_t x; memcpy(&x, b, 8); out->v.u64 = x; break; }
    case GGUF_TYPE_INT64: { int64_t x; memcpy(&x, b, 8); out->v.i64 = x; break; }
    case GGUF_TYPE_FLOAT64: { double x; memcpy(&x, b, 8); out->v.f64 = x; break; }
    case GGUF_TYPE_BOOL:
        if (b[0] > 1)
            return wgml_fail(c->err, WGML_ERR_FORMAT, "%s: key '%s': bool value %u at offset %llu",
                             c->f->name, key, b[0], (unsigned long long)(cur_offset(c) - 1));
        out->v.b = b[0];
        break;
    default: break;
    }
    return WGML_OK;
}

static wgml_status rd_array(cursor *c, gguf_file *f, gguf_value *out, int depth, const char *key) {
    uint32_t et = 0;
    uint64_t n = 0;
    wgml_status st;
    if ((st = rd_u32(c, &et, key)) || (st = rd_u64(c, &n, key))) return st;
    if (et >= GGUF_TYPE_COUNT)
        return wgml_fail(c->err, WGML_ERR_FORMAT, "%s: key '%s': array of unknown type %u at offset %llu",
                         f->name, key, et, (unsigned long long)(cur_offset(c) - 12));
    if (depth >= GGUF_MAX_ARRAY_DEPTH)
        return wgml_fail(c->err, WGML_ERR_FORMAT, "%s: key '%s': arrays nested deeper than %d",
                         f->name, key, GGUF_MAX_ARRAY_DEPTH);
    out->type = GGUF_TYPE_ARRAY;
    out->v.arr.elem_type = (gguf_type)et;
    out->v.arr.n = n;
    out->v.arr.raw = c->p;
    out->v.arr.items = NULL;
    int es = fixed_size((gguf_type)et);
    if (es) {
        if (n > cur_left(c) / (uint64_t)es) {
            ((gguf_file *)c->f)->hit_end = 1;
            return wgml_fail(c->err, WGML_ERR_FORMAT,
                             "%s: key '%s': array of %llu %s elements at offset %llu runs past the end of the file",
                             f->name, key, (unsigned long long)n, gguf_type_name((gguf_type)et),
                             (unsigned long long)(cur_offset(c) - 12));
        }
        if (et == GGUF_TYPE_BOOL) {
            for (uint64_t i = 0; i < n; i++)
                if (c->p[i] > 1)
                    return wgml_fail(c->err, WGML_ERR_FORMAT, "%s: key '%s': bool element %llu is %u",
                                     f->name, key, (unsigned long long)i, c->p[i]);
        }
        c->p += n * (uint64_t)es;
        return WGML_OK;
    }
    /* strings need >= 8 bytes each, arrays >= 12: bound n before allocating */
    uint64_t min_size = et == GGUF_TYPE_STRING ? 8 : 12;
    if (n > cur_left(c) / min_size) {
        ((gguf_file *)c->f)->hit_end = 1;
        return wgml_fail(c->err, WGML_ERR_FORMAT,
                         "%s: key '%s': array of %llu %s elements at offset %llu cannot fit in the file",
                         f->name, key, (unsigned long long)n, gguf_type_name((gguf_type)et),
                         (unsigned long long)(cur_offset(c) - 12));
    }
    gguf_value *items = wgml_calloc(n ? n : 1, sizeof *items);
    if (!items) return wgml_fail(c->err, WGML_ERR_OUT_OF_MEMORY, "%s: out of memory reading key '%s'", f->name, key);
    if ((st = own(f, items, c->err))) {
        wgml_free(items);
        return st;
    }
    out->v.arr.items = items;
    for (uint64_t i = 0; i < n; i++)
        if ((st = rd_value(c, f, (gguf_type)et, &items[i], depth + 1, key))) return st;
    return WGML_OK;
}

static wgml_status rd_value(cursor *c, gguf_file *f, gguf_type type, gguf_value *out, int depth,
                            const char *key) {
    if (type == GGUF_TYPE_STRING) {
        out->type = type;
        return rd_str(c, &out->v.str, key);
    }
    if (type == GGUF_TYPE_ARRAY) return rd_array(c, f, out, depth, key);
    if (fixed_size(type)) return rd_scalar(c, type, out, key);
    return wgml_fail(c->err, WGML_ERR_FORMAT, "%s: key '%s': unknown value type %u at offset %llu",
                     f->name, key, (unsigned)type, (unsigned long long)(cur_offset(c) - 4));
}

static int has_nul(gguf_str s) { return memchr(s.ptr, 0, s.len) != NULL; }

static wgml_status parse_kv(cursor *c, gguf_file *f) {
    wgml_status st;
    for (int64_t i = 0; i < f->n_kv; i++) {
        gguf_kv *kv = &f->kv[i];
        kv->offset = cur_offset(c);
        gguf_str k;
        if ((st = rd_str(c, &k, "a metadata key"))) return st;
        if (k.len == 0 || has_nul(k))
            return wgml_fail(c->err, WGML_ERR_FORMAT, "%s: metadata key %lld at offset %llu is empty or has a NUL byte",
                             f->name, (long long)i, (unsigned long long)kv->offset);
        char *key = wgml_strndup(k.ptr, (size_t)k.len);
        if (!key) return wgml_fail(c->err, WGML_ERR_OUT_OF_MEMORY, "%s: out of memory", f->name);
        kv->key = key;
        uint32_t type = 0;
        if ((st = rd_u32(c, &type, key))) return st;
        kv->raw = c->p;
        if ((st = rd_value(c, f, (gguf_type)type, &kv->value, 0, key))) return st;
        kv->raw_size = (size_t)(c->p - kv->raw);
    }
    return WGML_OK;
}

static const char *ggml_type_label(uint32_t t) {
    /* names of ggml types we do not compute with, for a clearer message */
    static const char *names[] = {[4] = "Q4_2 (removed)", [5] = "Q4_3 (removed)", [16] = "IQ2_XXS",
                                  [17] = "IQ2_XS", [18] = "IQ3_XXS", [19] = "IQ1_S", [20] = "IQ4_NL",
                                  [21] = "IQ3_S", [22] = "IQ2_S", [23] = "IQ4_XS", [29] = "IQ1_M",
                                  [31] = "Q4_0_4_4", [32] = "Q4_0_4_8", [33] = "Q4_0_8_8",
                                  [34] = "TQ1_0", [35] = "TQ2_0", [39] = "MXFP4"};
    if (t < sizeof names / sizeof names[0] && names[t]) return names[t];
    return NULL;
}

static wgml_status parse_tensor_info(cursor *c, gguf_file *f, int64_t i) {
    gguf_tensor *t = &f->tensors[i];
    wgml_status st;
    uint64_t at = cur_offset(c);
    gguf_str name;
    if ((st = rd_str(c, &name, "a tensor name"))) return st;
    if (name.len == 0 || has_nul(name))
        return wgml_fail(c->err, WGML_ERR_FORMAT, "%s: tensor %lld at offset %llu has an empty name or a NUL byte",
                         f->name, (long long)i, (unsigned long long)at);
    char *nm = wgml_strndup(name.ptr, (size_t)name.len);
    if (!nm) return wgml_fail(c->err, WGML_ERR_OUT_OF_MEMORY, "%s: out of memory", f->name);
    t->name = nm;
    uint32_t n_dims = 0;
    if ((st = rd_u32(c, &n_dims, nm))) return st;
    if (n_dims < 1 || n_dims > GGUF_MAX_DIMS)
        return wgml_fail(c->err, WGML_ERR_FORMAT, "%s: tensor '%s' has %u dimensions (1..%d allowed)",
                         f->name, nm, n_dims, GGUF_MAX_DIMS);
    t->n_dims = (int)n_dims;
    uint64_t n_el = 1;
    for (int d = 0; d < GGUF_MAX_DIMS; d++) t->ne[d] = 1;
    for (uint32_t d = 0; d < n_dims; d++) {
        uint64_t ne = 0;
        if ((st = rd_u64(c, &ne, nm))) return st;
        if (ne == 0 || ne > (uint64_t)INT64_MAX)
            return wgml_fail(c->err, WGML_ERR_FORMAT, "%s: tensor '%s' has dimension %u = %llu",
                             f->name, nm, d, (unsigned long long)ne);
        if (n_el > (uint64_t)INT64_MAX / ne)
            return wgml_fail(c->err, WGML_ERR_FORMAT, "%s: tensor '%s': element count overflows", f->name, nm);
        n_el *= ne;
        t->ne[d] = (int64_t)ne;
    }
    t->n_elements = (int64_t)n_el;
    if ((st = rd_u32(c, &t->type, nm))) return st;
    const wgml_dtype_traits *tr = wgml_dtype_get(t->type);
    if (!tr) {
        const char *label = ggml_type_label(t->type);
        if (label)
            return wgml_fail(c->err, WGML_ERR_UNSUPPORTED, "%s: tensor '%s' has type %s (%u), which wgml does not support",
                             f->name, nm, label, t->type);
        return wgml_fail(c->err, WGML_ERR_FORMAT, "%s: tensor '%s' has unknown type %u", f->name, nm, t->type);
    }
    if (t->ne[0] % tr->block_size)
        return wgml_fail(c->err, WGML_ERR_FORMAT, "%s: tensor '%s': row length %lld is not a multiple of the %s block size %d",
                         f->name, nm, (long long)t->ne[0], tr->name, tr->block_size);
    size_t row = wgml_row_size(t->type, t->ne[0]);
    uint64_t rows = n_el / (uint64_t)t->ne[0];
    if (row == 0 || rows > SIZE_MAX / row)
        return wgml_fail(c->err, WGML_ERR_FORMAT, "%s: tensor '%s': size overflows", f->name, nm);
    t->size = row * (size_t)rows;
    return rd_u64(c, &t->offset, nm);
}

static int cmp_kv_key(const void *a, const void *b) {
    return strcmp((*(const gguf_kv *const *)a)->key, (*(const gguf_kv *const *)b)->key);
}

static int cmp_tensor_name(const void *a, const void *b) {
    return strcmp((*(const gguf_tensor *const *)a)->name, (*(const gguf_tensor *const *)b)->name);
}

/* Sorts the keys, rejects duplicates (naming the later one) and keeps the order for lookups. */
static wgml_status index_kv(gguf_file *f, wgml_error *err) {
    const gguf_kv **idx = wgml_calloc(f->n_kv ? (size_t)f->n_kv : 1, sizeof *idx);
    if (!idx) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "%s: out of memory", f->name);
    for (int64_t i = 0; i < f->n_kv; i++) idx[i] = &f->kv[i];
    qsort(idx, (size_t)f->n_kv, sizeof *idx, cmp_kv_key);
    for (int64_t i = 1; i < f->n_kv; i++)
        if (strcmp(idx[i - 1]->key, idx[i]->key) == 0) {
            const gguf_kv *later = idx[i - 1]->offset > idx[i]->offset ? idx[i - 1] : idx[i];
            wgml_status st = wgml_fail(err, WGML_ERR_FORMAT, "%s: duplicate metadata key '%s' at offset %llu",
                                       f->name, later->key, (unsigned long long)later->offset);
            wgml_free(idx);
            return st;
        }
    f->kv_by_key = idx;
    return WGML_OK;
}

static wgml_status index_tensors(gguf_file *f, wgml_error *err) {
    const gguf_tensor **idx = wgml_calloc(f->n_tensors ? (size_t)f->n_tensors : 1, sizeof *idx);
    if (!idx) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "%s: out of memory", f->name);
    for (int64_t i = 0; i < f->n_tensors; i++) idx[i] = &f->tensors[i];
    qsort(idx, (size_t)f->n_tensors, sizeof *idx, cmp_tensor_name);
    for (int64_t i = 1; i < f->n_tensors; i++)
        if (strcmp(idx[i - 1]->name, idx[i]->name) == 0) {
            wgml_status st = wgml_fail(err, WGML_ERR_FORMAT, "%s: duplicate tensor name '%s'", f->name, idx[i]->name);
            wgml_free(idx);
            return st;
        }
    f->tensor_by_name = idx;
    return WGML_OK;
}

static int cmp_by_offset(const void *a, const void *b) {
    const gguf_tensor *x = *(const gguf_tensor *const *)a, *y = *(const gguf_tensor *const *)b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

static wgml_status place_tensors(gguf_file *f, wgml_error *err) {
    size_t data_size = f->size - f->data_offset;
    for (int64_t i = 0; i < f->n_tensors; i++) {
        gguf_tensor *t = &f->tensors[i];
        if (t->offset % f->alignment)
            return wgml_fail(err, WGML_ERR_FORMAT, "%s: tensor '%s': data offset %llu is not aligned to %zu",
                             f->name, t->name, (unsigned long long)t->offset, f->alignment);
        if (t->offset > data_size || t->size > data_size - t->offset)
            return wgml_fail(err, WGML_ERR_FORMAT,
                             "%s: tensor '%s': data [%llu, +%zu) lies outside the file's data section of %zu bytes",
                             f->name, t->name, (unsigned long long)t->offset, t->size, data_size);
        uint64_t end = (uint64_t)f->data_offset + t->offset + t->size;
        t->data = end <= f->avail ? f->base + f->data_offset + t->offset : NULL;
    }
    if (f->n_tensors < 2) return WGML_OK;
    gguf_tensor **order = wgml_calloc((size_t)f->n_tensors, sizeof *order);
    if (!order) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "%s: out of memory", f->name);
    for (int64_t i = 0; i < f->n_tensors; i++) order[i] = &f->tensors[i];
    qsort(order, (size_t)f->n_tensors, sizeof *order, cmp_by_offset);
    wgml_status st = WGML_OK;
    for (int64_t i = 1; i < f->n_tensors; i++) {
        const gguf_tensor *a = order[i - 1], *b = order[i];
        if (a->offset + a->size > b->offset) {
            st = wgml_fail(err, WGML_ERR_FORMAT, "%s: tensors '%s' and '%s' overlap in the data section",
                           f->name, a->name, b->name);
            break;
        }
    }
    wgml_free(order);
    return st;
}

static wgml_status parse(gguf_file *f, wgml_error *err) {
    cursor c = {f, f->base, f->base + f->avail, err};
    wgml_status st;
    uint32_t magic = 0;
    if ((st = rd_u32(&c, &magic, "the magic number"))) return st;
    if (magic != GGUF_MAGIC)
        return wgml_fail(err, WGML_ERR_FORMAT, "%s: not a GGUF file (magic %02x %02x %02x %02x)", f->name,
                         f->base[0], f->base[1], f->base[2], f->base[3]);
    if ((st = rd_u32(&c, &f->version, "the version"))) return st;
    if (f->version == 1)
        return wgml_fail(err, WGML_ERR_UNSUPPORTED, "%s: GGUF version 1 is obsolete; convert the file again", f->name);
    if (f->version == 0x02000000u || f->version == 0x03000000u)
        return wgml_fail(err, WGML_ERR_UNSUPPORTED, "%s: big-endian GGUF files are not supported", f->name);
    if (f->version != 2 && f->version != 3)
        return wgml_fail(err, WGML_ERR_UNSUPPORTED, "%s: GGUF version %u is not supported (2 and 3 are)", f->name,
                         f->version);
    uint64_t n_tensors = 0, n_kv = 0;
    if ((st = rd_u64(&c, &n_tensors, "the tensor count")) || (st = rd_u64(&c, &n_kv, "the metadata count")))
        return st;
    /* a key/value takes >= 13 bytes (8 length + 1 char + 4 type) and a tensor >= 29 */
    uint64_t file_left = (uint64_t)(f->size - 24);
    if (n_kv > file_left / 13)
        return wgml_fail(err, WGML_ERR_FORMAT, "%s: metadata count %llu cannot fit in a file of %zu bytes",
                         f->name, (unsigned long long)n_kv, f->size);
    if (n_tensors > file_left / 29)
        return wgml_fail(err, WGML_ERR_FORMAT, "%s: tensor count %llu cannot fit in a file of %zu bytes",
                         f->name, (unsigned long long)n_tensors, f->size);
    f->kv = wgml_calloc(n_kv ? (size_t)n_kv : 1, sizeof *f->kv);
    f->tensors = wgml_calloc(n_tensors ? (size_t)n_tensors : 1, sizeof *f->tensors);
    if (!f->kv || !f->tensors) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "%s: out of memory", f->name);
    f->n_kv = (int64_t)n_kv;
    if ((st = parse_kv(&c, f)) || (st = index_kv(f, err))) return st;

    f->alignment = GGUF_DEFAULT_ALIGNMENT;
    const gguf_kv *al = gguf_find_kv(f, "general.alignment");
    if (al) {
        if (al->value.type != GGUF_TYPE_UINT32 || al->value.v.u64 == 0 || (al->value.v.u64 & (al->value.v.u64 - 1)) ||
            al->value.v.u64 > (1u << 20))
            return wgml_fail(err, WGML_ERR_FORMAT, "%s: general.alignment must be a u32 power of two up to 1 MiB",
                             f->name);
        f->alignment = (size_t)al->value.v.u64;
    }

    f->n_tensors = (int64_t)n_tensors;
    for (int64_t i = 0; i < f->n_tensors; i++)
        if ((st = parse_tensor_info(&c, f, i))) return st;
    if ((st = index_tensors(f, err))) return st;

    uint64_t off = cur_offset(&c);
    uint64_t aligned = (off + f->alignment - 1) / f->alignment * f->alignment;
    if (f->n_tensors > 0 && aligned > f->size)
        return wgml_fail(err, WGML_ERR_FORMAT, "%s: file truncated before the tensor data (offset %llu)", f->name,
                         (unsigned long long)aligned);
    f->data_offset = aligned > f->size ? f->size : (size_t)aligned;
    return place_tensors(f, err);
}

static wgml_status finish_open(gguf_file *f, gguf_file **out, wgml_error *err) {
    wgml_status st = parse(f, err);
    if (st) {
        gguf_close(f);
        return st;
    }
    *out = f;
    return WGML_OK;
}

wgml_status gguf_open_memory(const void *data, size_t size, const char *name, gguf_file **out, wgml_error *err) {
    *out = NULL;
    gguf_file *f = wgml_calloc(1, sizeof *f);
    if (!f) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory opening %s", name ? name : "GGUF");
    f->name = wgml_strdup(name ? name : "<memory>");
    if (!f->name) {
        wgml_free(f);
        return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory opening %s", name ? name : "GGUF");
    }
    static const uint8_t no_bytes[1];
    f->base = data ? data : no_bytes; /* NULL + 0 would be undefined in the cursor arithmetic */
    f->size = f->avail = size;
    if (!data && size) {
        gguf_close(f);
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "NULL data for GGUF in memory");
    }
    return finish_open(f, out, err);
}

void gguf_own_bytes(gguf_file *f) {
    if (f && f->mapped == WGML_BYTES_BORROWED && f->size) f->malloced = 1;
}

wgml_status gguf_open(const char *path, gguf_file **out, wgml_error *err) {
    *out = NULL;
    const uint8_t *base;
    size_t size;
    int kind;
    wgml_status st = wgml_file_bytes(path, 24, "GGUF", &base, &size, &kind, err);
    if (st) return st;
    gguf_file *f = wgml_calloc(1, sizeof *f);
    char *name = wgml_strdup(path);
    if (!f || !name) {
        wgml_free(f);
        wgml_free(name);
        wgml_file_bytes_release(base, size, kind);
        return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory opening %s", path);
    }
    f->name = name;
    f->mapped = kind;
    f->base = base;
    f->size = f->avail = size;
    return finish_open(f, out, err);
}

wgml_status gguf_open_header(void *prefix, size_t avail, uint64_t file_size, const char *name, gguf_file **out,
                             int *need_more, wgml_error *err) {
    *out = NULL;
    *need_more = 0;
    gguf_file *f = wgml_calloc(1, sizeof *f);
    char *nm = wgml_strdup(name ? name : "<stream>");
    if (!f || !nm) {
        wgml_free(f);
        wgml_free(nm);
        wgml_free(prefix);
        return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory opening %s", name ? name : "GGUF");
    }
    f->name = nm;
    f->base = prefix;
    f->mapped = WGML_BYTES_OWNED;
    f->avail = avail < file_size ? avail : (size_t)file_size;
    f->size = (size_t)file_size;
    if (file_size < 24 || file_size > SIZE_MAX) {
        gguf_close(f);
        return wgml_fail(err, WGML_ERR_FORMAT, "%s: %llu bytes is not a GGUF file", name ? name : "stream",
                         (unsigned long long)file_size);
    }
    wgml_status st = parse(f, err);
    if (st) {
        *need_more = f->hit_end && f->avail < f->size;
        gguf_close(f);
        return st;
    }
    *out = f;
    return WGML_OK;
}

void gguf_release(const gguf_file *f, const void *p, size_t n) {
#if !defined(__wasm__)
    if (!f || f->mapped != WGML_BYTES_MAPPED || !p || !n) return;
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), base = (uintptr_t)f->base;
    uintptr_t lo = (uintptr_t)p, hi = lo + n;
    if (lo < base || hi > base + f->size) return;
    lo = (lo + page - 1) & ~(page - 1); /* whole pages only: the neighbours' bytes stay */
    hi &= ~(page - 1);
    /* a private read-only mapping never written: its pages are the file's, read again on use */
    if (hi > lo) madvise((void *)lo, hi - lo, MADV_DONTNEED);
#else
    (void)f, (void)p, (void)n;
#endif
}

void gguf_close(gguf_file *f) {
    if (!f) return;
    for (int64_t i = 0; i < f->n_kv; i++) wgml_free((void *)f->kv[i].key);
    for (int64_t i = 0; i < f->n_tensors; i++) wgml_free((void *)f->tensors[i].name);
    for (size_t i = 0; i < f->n_owned; i++) wgml_free(f->owned[i]);
    wgml_free(f->owned);
    wgml_free((void *)f->kv_by_key);
    wgml_free((void *)f->tensor_by_name);
    wgml_free(f->kv);
    wgml_free(f->tensors);
    wgml_file_bytes_release(f->base, f->size, f->mapped);
    if (f->malloced) free((void *)f->base);
    wgml_free(f->name);
    wgml_free(f);
}

const char *gguf_name(const gguf_file *f) { return f->name; }
uint32_t gguf_version(const gguf_file *f) { return f->version; }
size_t gguf_file_size(const gguf_file *f) { return f->size; }
size_t gguf_alignment(const gguf_file *f) { return f->alignment; }
size_t gguf_data_offset(const gguf_file *f) { return f->data_offset; }
int64_t gguf_n_kv(const gguf_file *f) { return f->n_kv; }
int64_t gguf_n_tensors(const gguf_file *f) { return f->n_tensors; }

const gguf_kv *gguf_kv_at(const gguf_file *f, int64_t i) {
    return i >= 0 && i < f->n_kv ? &f->kv[i] : NULL;
}

static int cmp_key_to_kv(const void *key, const void *elem) {
    return strcmp((const char *)key, (*(const gguf_kv *const *)elem)->key);
}

static int cmp_name_to_tensor(const void *name, const void *elem) {
    return strcmp((const char *)name, (*(const gguf_tensor *const *)elem)->name);
}

const gguf_kv *gguf_find_kv(const gguf_file *f, const char *key) {
    if (!f->kv_by_key) return NULL; /* not opened */
    const gguf_kv *const *hit = bsearch(key, f->kv_by_key, (size_t)f->n_kv, sizeof *f->kv_by_key, cmp_key_to_kv);
    return hit ? *hit : NULL;
}

const gguf_tensor *gguf_tensor_at(const gguf_file *f, int64_t i) {
    return i >= 0 && i < f->n_tensors ? &f->tensors[i] : NULL;
}

const gguf_tensor *gguf_find_tensor(const gguf_file *f, const char *name) {
    if (!f->tensor_by_name) return NULL;
    const gguf_tensor *const *hit =
        bsearch(name, f->tensor_by_name, (size_t)f->n_tensors, sizeof *f->tensor_by_name, cmp_name_to_tensor);
    return hit ? *hit : NULL;
}

static int wrong_type(const gguf_file *f, const char *key, const char *want, const gguf_value *v, wgml_error *err) {
    wgml_fail(err, WGML_ERR_FORMAT, "%s: metadata '%s' should be %s but is %s", f->name, key, want,
              gguf_type_name(v->type));
    return -1;
}

static int is_signed(gguf_type t) {
    return t == GGUF_TYPE_INT8 || t == GGUF_TYPE_INT16 || t == GGUF_TYPE_INT32 || t == GGUF_TYPE_INT64;
}
static int is_unsigned(gguf_type t) {
    return t == GGUF_TYPE_UINT8 || t == GGUF_TYPE_UINT16 || t == GGUF_TYPE_UINT32 || t == GGUF_TYPE_UINT64;
}

int gguf_get_int(const gguf_file *f, const char *key, int64_t min, int64_t max, int64_t *out, wgml_error *err) {
    const gguf_kv *kv = gguf_find_kv(f, key);
    if (!kv) return 0;
    const gguf_value *v = &kv->value;
    if (is_signed(v->type)) {
        if (v->v.i64 < min || v->v.i64 > max) goto range;
        *out = v->v.i64;
        return 1;
    }
    if (is_unsigned(v->type)) {
        if (v->v.u64 > (uint64_t)INT64_MAX || (int64_t)v->v.u64 < min || (int64_t)v->v.u64 > max) goto range;
        *out = (int64_t)v->v.u64;
        return 1;
    }
    return wrong_type(f, key, "an integer", v, err);
range:
    if (is_signed(v->type))
        wgml_fail(err, WGML_ERR_FORMAT, "%s: metadata '%s' = %" PRId64 " is out of range [%" PRId64 ", %" PRId64 "]",
                  f->name, key, v->v.i64, min, max);
    else
        wgml_fail(err, WGML_ERR_FORMAT, "%s: metadata '%s' = %" PRIu64 " is out of range [%" PRId64 ", %" PRId64 "]",
                  f->name, key, v->v.u64, min, max);
    return -1;
}

int gguf_get_float(const gguf_file *f, const char *key, double *out, wgml_error *err) {
    const gguf_kv *kv = gguf_find_kv(f, key);
    if (!kv) return 0;
    if (kv->value.type == GGUF_TYPE_FLOAT32 || kv->value.type == GGUF_TYPE_FLOAT64) {
        *out = kv->value.v.f64;
        return 1;
    }
    if (is_unsigned(kv->value.type)) { *out = (double)kv->value.v.u64; return 1; }
    if (is_signed(kv->value.type)) { *out = (double)kv->value.v.i64; return 1; }
    return wrong_type(f, key, "a number", &kv->value, err);
}

int gguf_get_bool(const gguf_file *f, const char *key, int *out, wgml_error *err) {
    const gguf_kv *kv = gguf_find_kv(f, key);
    if (!kv) return 0;
    if (kv->value.type != GGUF_TYPE_BOOL) return wrong_type(f, key, "a bool", &kv->value, err);
    *out = kv->value.v.b;
    return 1;
}

int gguf_get_str(const gguf_file *f, const char *key, gguf_str *out, wgml_error *err) {
    const gguf_kv *kv = gguf_find_kv(f, key);
    if (!kv) return 0;
    if (kv->value.type != GGUF_TYPE_STRING) return wrong_type(f, key, "a string", &kv->value, err);
    *out = kv->value.v.str;
    return 1;
}

int gguf_get_arr(const gguf_file *f, const char *key, gguf_type elem_type, const gguf_value **out, wgml_error *err) {
    const gguf_kv *kv = gguf_find_kv(f, key);
    if (!kv) return 0;
    if (kv->value.type != GGUF_TYPE_ARRAY) return wrong_type(f, key, "an array", &kv->value, err);
    if (kv->value.v.arr.elem_type != elem_type) {
        wgml_fail(err, WGML_ERR_FORMAT, "%s: metadata '%s' should be an array of %s but holds %s", f->name, key,
                  gguf_type_name(elem_type), gguf_type_name(kv->value.v.arr.elem_type));
        return -1;
    }
    *out = &kv->value;
    return 1;
}

float gguf_arr_f32(const gguf_value *a, uint64_t i) {
    float x;
    memcpy(&x, a->v.arr.raw + i * 4, 4);
    return x;
}

int32_t gguf_arr_i32(const gguf_value *a, uint64_t i) {
    int32_t x;
    memcpy(&x, a->v.arr.raw + i * 4, 4);
    return x;
}

uint32_t gguf_arr_u32(const gguf_value *a, uint64_t i) {
    uint32_t x;
    memcpy(&x, a->v.arr.raw + i * 4, 4);
    return x;
}

int gguf_str_eq(gguf_str s, const char *c) {
    size_t n = strlen(c);
    return s.len == n && memcmp(s.ptr, c, n) == 0;
}
