/*
 * fuzz_pth.c - libFuzzer target: the PyTorch checkpoint reader (format/pth.h)
 * and the ZIP reader under it (format/zip.h).
 *
 * Two kinds of input:
 *   - a whole checkpoint (a ZIP archive, "PK..."), opened as is;
 *   - a bare pickle (starting with PROTO, 0x80), which is first wrapped in a
 *     valid archive "f/" with data.pkl = the input and storages "0" (96
 *     bytes), "1" (4096 bytes) and "2" (empty), so that mutations reach the
 *     pickle machine without breaking the archive's offsets.
 * (Fuzzing builds skip the pickle's CRC check: see pth.c.)
 * When a checkpoint is accepted, every tensor is checked: found by name, its
 * extent inside the storage entry, and - when it has at most 64 Ki elements -
 * read with pth_tensor_read_f32 and compared, element by element, with a
 * direct computation from its offset and strides. Anything else (a crash, a
 * sanitizer report, a failed check, an error message without the file's name)
 * is a finding.
 */
#include "core/dtype.h"
#include "core/fp16.h"
#include "format/pth.h"
#include "format/zip.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(c)                                                                                                       \
    do {                                                                                                               \
        if (!(c)) {                                                                                                    \
            fprintf(stderr, "fuzz_pth: check failed: %s (line %d)\n", #c, __LINE__);                                   \
            abort();                                                                                                   \
        }                                                                                                              \
    } while (0)

#define MAX_READ (1 << 16)

typedef struct buf {
    uint8_t *p;
    size_t n, cap;
} buf;

static void put(buf *b, const void *src, size_t n) {
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 1024;
        while (cap < b->n + n) cap *= 2;
        b->p = realloc(b->p, cap);
        CHECK(b->p);
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, src, n);
    b->n += n;
}
static void put16(buf *b, uint16_t v) { put(b, &v, 2); }
static void put32(buf *b, uint32_t v) { put(b, &v, 4); }

/* A stored entry: local header + data, and its directory entry into cd. */
static void add_entry(buf *z, buf *cd, const char *name, const void *data, size_t n) {
    uint16_t nlen = (uint16_t)strlen(name);
    uint32_t lho = (uint32_t)z->n, crc = zip_crc32(0, data, n);
    put32(z, 0x04034b50u);
    put16(z, 20);
    put16(z, 0);
    put16(z, 0);
    put32(z, 0);
    put32(z, crc);
    put32(z, (uint32_t)n);
    put32(z, (uint32_t)n);
    put16(z, nlen);
    put16(z, 0);
    put(z, name, nlen);
    put(z, data, n);
    put32(cd, 0x02014b50u);
    put16(cd, 20);
    put16(cd, 20);
    put16(cd, 0);
    put16(cd, 0);
    put32(cd, 0);
    put32(cd, crc);
    put32(cd, (uint32_t)n);
    put32(cd, (uint32_t)n);
    put16(cd, nlen);
    put16(cd, 0);
    put16(cd, 0);
    put16(cd, 0);
    put16(cd, 0);
    put32(cd, 0);
    put32(cd, lho);
    put(cd, name, nlen);
}

/* The archive around a bare pickle. */
static void wrap(const uint8_t *pkl, size_t n, buf *z) {
    static uint8_t s0[96], s1[4096];
    static int init;
    if (!init) {
        for (size_t i = 0; i < sizeof s0; i++) s0[i] = (uint8_t)(i * 37 + 11);
        for (size_t i = 0; i < sizeof s1; i++) s1[i] = (uint8_t)(i * 101 + 7);
        init = 1;
    }
    buf cd = {0};
    add_entry(z, &cd, "f/data.pkl", pkl, n);
    add_entry(z, &cd, "f/data/0", s0, sizeof s0);
    add_entry(z, &cd, "f/data/1", s1, sizeof s1);
    add_entry(z, &cd, "f/data/2", "", 0);
    uint32_t cd_at = (uint32_t)z->n;
    put(z, cd.p, cd.n);
    put32(z, 0x06054b50u);
    put16(z, 0);
    put16(z, 0);
    put16(z, 4);
    put16(z, 4);
    put32(z, (uint32_t)cd.n);
    put32(z, cd_at);
    put16(z, 0);
    free(cd.p);
}

/* Element i (row-major) of t, computed directly from its strides. */
static float element(const pth_tensor *t, int64_t i) {
    int64_t at = t->storage_offset;
    for (int d = t->ndim - 1; d >= 0; d--) {
        at += (i % t->size[d]) * t->stride[d];
        i /= t->size[d];
    }
    const uint8_t *p = t->storage + (size_t)at * t->elem_size;
    switch (t->dtype) {
    case WGML_F32: { float v; memcpy(&v, p, 4); return v; }
    case WGML_F16: { uint16_t h; memcpy(&h, p, 2); return wgml_f16_to_f32(h); }
    case WGML_BF16: { uint16_t h; memcpy(&h, p, 2); return wgml_bits_to_f32((uint32_t)h << 16); }
    case WGML_F64: { double v; memcpy(&v, p, 8); return (float)v; }
    case WGML_I64: { int64_t v; memcpy(&v, p, 8); return (float)v; }
    case WGML_I32: { int32_t v; memcpy(&v, p, 4); return (float)v; }
    case WGML_I16: { int16_t v; memcpy(&v, p, 2); return (float)v; }
    case WGML_I8: return (float)(int8_t)p[0];
    default: CHECK(0); return 0;
    }
}

static int same(float a, float b) { return memcmp(&a, &b, 4) == 0 || (a != a && b != b); }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static float out[MAX_READ];
    buf z = {0};
    const uint8_t *bytes = data;
    size_t n = size;
    if (size > 0 && data[0] == 0x80) {
        wrap(data, size, &z);
        bytes = z.p;
        n = z.n;
    }
    pth_file *p = NULL;
    wgml_error err;
    wgml_status st = pth_open_memory(bytes, n, "fuzz.pth", &p, &err);
    if (st) {
        CHECK(p == NULL && err.code == st && err.message[0]);
        CHECK(strstr(err.message, "fuzz.pth") != NULL);
        free(z.p);
        return 0;
    }
    CHECK(pth_is_pth(bytes, n));
    for (int64_t i = 0; i < pth_n_tensors(p); i++) {
        const pth_tensor *t = pth_tensor_at(p, i);
        CHECK(t && t->name && t->storage_key);
        CHECK(pth_find(p, t->name) == t);
        CHECK(t->ndim >= 0 && t->ndim <= PTH_MAX_DIMS && t->numel >= 0 && t->storage_offset >= 0);
        CHECK(t->storage >= bytes && t->storage <= bytes + n);
        CHECK((uint64_t)t->storage_numel * t->elem_size <= (uint64_t)(bytes + n - t->storage));
        int64_t numel = 1, last = t->storage_offset;
        for (int d = 0; d < t->ndim; d++) {
            CHECK(t->size[d] >= 0 && t->stride[d] >= 0);
            numel *= t->size[d];
        }
        CHECK(numel == t->numel);
        for (int d = 0; d < t->ndim && numel; d++) last += (t->size[d] - 1) * t->stride[d];
        CHECK(numel == 0 ? t->storage_offset <= t->storage_numel : last < t->storage_numel);
        if (numel <= MAX_READ) {
            st = pth_tensor_read_f32(p, t, out, (size_t)numel, &err);
            CHECK(st == WGML_OK);
            for (int64_t k = 0; k < numel; k++) CHECK(same(out[k], element(t, k)));
            if (numel < MAX_READ) CHECK(pth_tensor_read_f32(p, t, out, (size_t)numel + 1, &err) == WGML_ERR_INVALID_ARGUMENT);
        }
    }
    st = pth_verify(p, &err);
    CHECK(st == WGML_OK || (st == WGML_ERR_FORMAT && strstr(err.message, "fuzz.pth")));
    pth_close(p);
    free(z.p);
    return 0;
}
