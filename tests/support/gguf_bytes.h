/*
 * gguf_bytes.h - GGUF at the byte level, for tests that corrupt files.
 *
 * Two tools, independent of the library's reader so that a test never trusts
 * the code it checks:
 *   gb_*  a growable byte buffer to write GGUF (or anything) field by field,
 *         including values the library's writer refuses to produce;
 *   gl_*  a scan of a well-formed GGUF that records where every field lies
 *         (each key, type tag, value, tensor info field, the data section),
 *         so a test can truncate or overwrite exactly there.
 * Header-only (static inline) so that any test can include it.
 */
#ifndef WGML_TEST_GGUF_BYTES_H
#define WGML_TEST_GGUF_BYTES_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- byte buffer ---- */

typedef struct gb {
    uint8_t *p;
    size_t n, cap;
} gb;

static inline void gb_put(gb *b, const void *src, size_t n) {
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n)
            cap *= 2;
        uint8_t *q = realloc(b->p, cap);
        if (!q) abort(); /* test helper: out of memory is fatal */
        b->p = q;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, src, n);
    b->n += n;
}
static inline void gb_u8(gb *b, uint8_t v) { gb_put(b, &v, 1); }
static inline void gb_u32(gb *b, uint32_t v) { gb_put(b, &v, 4); }
static inline void gb_u64(gb *b, uint64_t v) { gb_put(b, &v, 8); }
static inline void gb_f32(gb *b, float v) { gb_put(b, &v, 4); }
static inline void gb_str(gb *b, const char *s) {
    gb_u64(b, strlen(s));
    gb_put(b, s, strlen(s));
}
static inline void gb_zeros(gb *b, size_t n) {
    static const uint8_t z[256];
    while (n) {
        size_t k = n < sizeof z ? n : sizeof z;
        gb_put(b, z, k);
        n -= k;
    }
}
static inline void gb_pad(gb *b, size_t align) { gb_zeros(b, (align - b->n % align) % align); }
static inline void gb_free(gb *b) {
    free(b->p);
    b->p = NULL;
    b->n = b->cap = 0;
}
/* Header of a GGUF file: magic, version, counts. */
static inline void gb_header(gb *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    gb_put(b, "GGUF", 4);
    gb_u32(b, version);
    gb_u64(b, n_tensors);
    gb_u64(b, n_kv);
}
/* A key and its type tag (the value follows). */
static inline void gb_key(gb *b, const char *key, uint32_t type) {
    gb_str(b, key);
    gb_u32(b, type);
}

/* Overwrites bytes in place. */
static inline void put_u32_at(uint8_t *p, size_t off, uint32_t v) { memcpy(p + off, &v, 4); }
static inline void put_u64_at(uint8_t *p, size_t off, uint64_t v) { memcpy(p + off, &v, 8); }
static inline uint32_t get_u32_at(const uint8_t *p, size_t off) {
    uint32_t v;
    memcpy(&v, p + off, 4);
    return v;
}
static inline uint64_t get_u64_at(const uint8_t *p, size_t off) {
    uint64_t v;
    memcpy(&v, p + off, 8);
    return v;
}

/* ---- layout scan ---- */

typedef struct gl_kv {
    char key[128];
    size_t off;       /* the key's length field */
    size_t type_off;  /* the type tag */
    size_t value_off; /* the value */
    size_t end;       /* one past the value */
    uint32_t type;
    uint32_t elem_type; /* arrays */
} gl_kv;

typedef struct gl_tensor {
    char name[128];
    size_t off;        /* the name's length field */
    size_t ndims_off;  /* n_dims */
    size_t dims_off;   /* ne[0] */
    size_t type_off;   /* type */
    size_t offset_off; /* data offset */
    size_t end;
    uint32_t n_dims, type;
    uint64_t ne[4], offset, size; /* size only for F32/F16/Q8_0 (else 0) */
} gl_tensor;

typedef struct gl_layout {
    uint32_t version;
    uint64_t n_tensors, n_kv;
    gl_kv *kv;
    gl_tensor *t;
    size_t info_end; /* after the tensor table, before the padding */
    size_t data_off; /* start of the data section */
    size_t alignment;
} gl_layout;

static inline int gl_skip_value(const uint8_t *d, size_t n, size_t *o, uint32_t type, int depth) {
    static const int fs[13] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    if (type > 12 || depth > 8) return -1;
    if (fs[type]) {
        if (n - *o < (size_t)fs[type]) return -1;
        *o += (size_t)fs[type];
        return 0;
    }
    if (type == 8) {
        if (n - *o < 8) return -1;
        uint64_t len = get_u64_at(d, *o);
        if (len > n - *o - 8) return -1;
        *o += 8 + (size_t)len;
        return 0;
    }
    if (n - *o < 12) return -1;
    uint32_t et = get_u32_at(d, *o);
    uint64_t cnt = get_u64_at(d, *o + 4);
    *o += 12;
    for (uint64_t i = 0; i < cnt; i++)
        if (gl_skip_value(d, n, o, et, depth + 1)) return -1;
    return 0;
}

static inline void gl_copy_name(char *dst, const uint8_t *src, uint64_t len) {
    size_t k = len < 127 ? (size_t)len : 127;
    memcpy(dst, src, k);
    dst[k] = '\0';
}

static inline uint64_t gl_tensor_size(uint32_t type, const uint64_t ne[4]) {
    uint64_t n = ne[0] * ne[1] * ne[2] * ne[3];
    if (type == 0) return n * 4;
    if (type == 1) return n * 2;
    if (type == 8) return n / 32 * 34;
    return 0;
}

/* Scans a valid GGUF file; returns 0, or -1 if it is not one. Free with gl_free. */
static inline int gl_scan(const uint8_t *d, size_t n, gl_layout *L) {
    memset(L, 0, sizeof *L);
    if (n < 24 || memcmp(d, "GGUF", 4) != 0) return -1;
    L->version = get_u32_at(d, 4);
    L->n_tensors = get_u64_at(d, 8);
    L->n_kv = get_u64_at(d, 16);
    if (L->n_kv > n || L->n_tensors > n) return -1;
    L->kv = calloc(L->n_kv + 1, sizeof *L->kv);
    L->t = calloc(L->n_tensors + 1, sizeof *L->t);
    if (!L->kv || !L->t) return -1;
    L->alignment = 32;
    size_t o = 24;
    for (uint64_t i = 0; i < L->n_kv; i++) {
        gl_kv *k = &L->kv[i];
        k->off = o;
        if (n - o < 8) return -1;
        uint64_t len = get_u64_at(d, o);
        if (len > n - o - 8) return -1;
        gl_copy_name(k->key, d + o + 8, len);
        o += 8 + (size_t)len;
        k->type_off = o;
        if (n - o < 4) return -1;
        k->type = get_u32_at(d, o);
        o += 4;
        k->value_off = o;
        if (k->type == 9 && n - o >= 4) k->elem_type = get_u32_at(d, o);
        if (gl_skip_value(d, n, &o, k->type, 0)) return -1;
        k->end = o;
        if (strcmp(k->key, "general.alignment") == 0 && k->type == 4) L->alignment = get_u32_at(d, k->value_off);
    }
    for (uint64_t i = 0; i < L->n_tensors; i++) {
        gl_tensor *t = &L->t[i];
        t->off = o;
        if (n - o < 8) return -1;
        uint64_t len = get_u64_at(d, o);
        if (len > n - o - 8) return -1;
        gl_copy_name(t->name, d + o + 8, len);
        o += 8 + (size_t)len;
        t->ndims_off = o;
        if (n - o < 4) return -1;
        t->n_dims = get_u32_at(d, o);
        if (t->n_dims < 1 || t->n_dims > 4) return -1;
        o += 4;
        t->dims_off = o;
        for (int k = 0; k < 4; k++)
            t->ne[k] = 1;
        for (uint32_t k = 0; k < t->n_dims; k++) {
            if (n - o < 8) return -1;
            t->ne[k] = get_u64_at(d, o);
            o += 8;
        }
        t->type_off = o;
        if (n - o < 12) return -1;
        t->type = get_u32_at(d, o);
        t->offset_off = o + 4;
        t->offset = get_u64_at(d, o + 4);
        o += 12;
        t->end = o;
        t->size = gl_tensor_size(t->type, t->ne);
    }
    L->info_end = o;
    L->data_off = (o + L->alignment - 1) / L->alignment * L->alignment;
    return 0;
}

static inline void gl_free(gl_layout *L) {
    free(L->kv);
    free(L->t);
    L->kv = NULL;
    L->t = NULL;
}

static inline const gl_kv *gl_find_kv(const gl_layout *L, const char *key) {
    for (uint64_t i = 0; i < L->n_kv; i++)
        if (strcmp(L->kv[i].key, key) == 0) return &L->kv[i];
    return NULL;
}

static inline const gl_tensor *gl_find_tensor(const gl_layout *L, const char *name) {
    for (uint64_t i = 0; i < L->n_tensors; i++)
        if (strcmp(L->t[i].name, name) == 0) return &L->t[i];
    return NULL;
}

#endif
