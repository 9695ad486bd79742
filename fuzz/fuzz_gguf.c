/*
 * fuzz_gguf.c - libFuzzer target: the GGUF reader, and the writer behind it.
 *
 * The input is opened as a GGUF from memory. When it is accepted, every
 * key/value (nested arrays included) and every byte of every tensor is read,
 * every typed getter is tried on every key, and - for inputs up to 64 KiB -
 * the file is copied through the writer (gguf_writer_copy_kv + tensors) and
 * read back: the copy must hold the same keys, bytes and tensors. Anything
 * else (a crash, a sanitizer report, a copy that differs) is a finding.
 */
#include "core/dtype.h"
#include "format/gguf.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile uint64_t sink;

#define CHECK(c)                                                                                                       \
    do {                                                                                                               \
        if (!(c)) {                                                                                                    \
            fprintf(stderr, "fuzz_gguf: check failed: %s (line %d)\n", #c, __LINE__);                                  \
            abort();                                                                                                   \
        }                                                                                                              \
    } while (0)

static uint64_t bytes_sum(const void *p, uint64_t n) {
    const uint8_t *b = p;
    uint64_t s = 0;
    for (uint64_t i = 0; i < n; i++)
        s = s * 31 + b[i];
    return s;
}

static uint64_t walk_value(const gguf_value *v) {
    switch (v->type) {
    case GGUF_TYPE_STRING: return bytes_sum(v->v.str.ptr, v->v.str.len);
    case GGUF_TYPE_ARRAY: {
        uint64_t s = v->v.arr.n;
        if (v->v.arr.items) {
            for (uint64_t i = 0; i < v->v.arr.n; i++) {
                CHECK(v->v.arr.items[i].type == v->v.arr.elem_type);
                s += walk_value(&v->v.arr.items[i]);
            }
        } else {
            CHECK(v->v.arr.elem_type != GGUF_TYPE_STRING && v->v.arr.elem_type != GGUF_TYPE_ARRAY);
            static const int size[GGUF_TYPE_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
            s += bytes_sum(v->v.arr.raw, v->v.arr.n * (uint64_t)size[v->v.arr.elem_type]);
            if (v->v.arr.n && size[v->v.arr.elem_type] == 4)
                s += (uint64_t)gguf_arr_u32(v, v->v.arr.n - 1) + (uint64_t)gguf_arr_i32(v, 0) +
                     (uint64_t)(gguf_arr_f32(v, 0) != 0);
        }
        return s;
    }
    case GGUF_TYPE_BOOL: CHECK(v->v.b == 0 || v->v.b == 1); return (uint64_t)v->v.b;
    default: return v->v.u64;
    }
}

static void try_getters(const gguf_file *f, const char *key) {
    wgml_error err;
    int64_t i;
    double d;
    int b;
    gguf_str s;
    const gguf_value *a;
    CHECK(gguf_find_kv(f, key) != NULL);
    sink += (uint64_t)gguf_get_int(f, key, -100, 100, &i, &err);
    sink += (uint64_t)gguf_get_float(f, key, &d, &err);
    sink += (uint64_t)gguf_get_bool(f, key, &b, &err);
    sink += (uint64_t)gguf_get_str(f, key, &s, &err);
    for (int t = 0; t < GGUF_TYPE_COUNT; t += 4)
        sink += (uint64_t)gguf_get_arr(f, key, (gguf_type)t, &a, &err);
}

/* Copies f through the writer and checks the copy reads back the same. */
static void round_trip(const gguf_file *f) {
    static char path[256];
    if (!path[0]) {
        const char *dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
        snprintf(path, sizeof path, "%s/wgml-fuzz-gguf-%d.gguf", dir, (int)getpid());
    }
    wgml_error err;
    gguf_writer *w = gguf_writer_create();
    CHECK(w);
    for (int64_t i = 0; i < gguf_n_kv(f); i++)
        CHECK(gguf_writer_copy_kv(w, gguf_kv_at(f, i), &err) == WGML_OK);
    for (int64_t i = 0; i < gguf_n_tensors(f); i++) {
        const gguf_tensor *t = gguf_tensor_at(f, i);
        CHECK(gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, &err) == WGML_OK);
    }
    wgml_status st = gguf_writer_begin(w, path, &err);
    for (int64_t i = 0; i < gguf_n_tensors(f) && !st; i++) {
        const gguf_tensor *t = gguf_tensor_at(f, i);
        st = gguf_writer_write_tensor(w, t->data, t->size, &err);
    }
    if (!st) st = gguf_writer_finish(w, &err);
    gguf_writer_free(w);
    if (st == WGML_ERR_IO) return; /* disk full and the like: not the code's fault */
    if (st) fprintf(stderr, "fuzz_gguf: writer: %s\n", err.message);
    CHECK(st == WGML_OK);
    gguf_file *g = NULL;
    st = gguf_open(path, &g, &err);
    if (st) fprintf(stderr, "fuzz_gguf: reading the copy: %s\n", err.message);
    CHECK(st == WGML_OK);
    CHECK(gguf_n_kv(g) == gguf_n_kv(f) && gguf_n_tensors(g) == gguf_n_tensors(f));
    CHECK(gguf_alignment(g) == gguf_alignment(f));
    for (int64_t i = 0; i < gguf_n_kv(f); i++) {
        const gguf_kv *a = gguf_kv_at(f, i), *b = gguf_kv_at(g, i);
        CHECK(strcmp(a->key, b->key) == 0 && a->value.type == b->value.type && a->raw_size == b->raw_size);
        CHECK(memcmp(a->raw, b->raw, a->raw_size) == 0);
    }
    for (int64_t i = 0; i < gguf_n_tensors(f); i++) {
        const gguf_tensor *a = gguf_tensor_at(f, i), *b = gguf_tensor_at(g, i);
        CHECK(strcmp(a->name, b->name) == 0 && a->type == b->type && a->n_dims == b->n_dims);
        CHECK(memcmp(a->ne, b->ne, sizeof a->ne) == 0 && a->size == b->size);
        CHECK(memcmp(a->data, b->data, a->size) == 0);
    }
    gguf_close(g);
    remove(path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    gguf_file *f = NULL;
    wgml_error err;
    wgml_status st = gguf_open_memory(data, size, "fuzz.gguf", &f, &err);
    if (st) {
        CHECK(f == NULL && err.code == st && err.message[0]);
        CHECK(strstr(err.message, "fuzz.gguf") != NULL);
        return 0;
    }
    CHECK(gguf_version(f) == 2 || gguf_version(f) == 3);
    CHECK(gguf_data_offset(f) <= size && gguf_file_size(f) == size);
    uint64_t s = 0;
    for (int64_t i = 0; i < gguf_n_kv(f); i++) {
        const gguf_kv *kv = gguf_kv_at(f, i);
        CHECK(kv->key[0] && kv->raw >= data && kv->raw + kv->raw_size <= data + size);
        s += walk_value(&kv->value) + bytes_sum(kv->key, strlen(kv->key));
        try_getters(f, kv->key);
    }
    for (int64_t i = 0; i < gguf_n_tensors(f); i++) {
        const gguf_tensor *t = gguf_tensor_at(f, i);
        const uint8_t *d = t->data;
        CHECK(d >= data + gguf_data_offset(f) && t->size <= (size_t)(data + size - d));
        CHECK(t->offset % gguf_alignment(f) == 0 && t->size > 0);
        CHECK(t->size == wgml_row_size(t->type, t->ne[0]) * (size_t)(t->n_elements / t->ne[0]));
        CHECK(gguf_find_tensor(f, t->name) == t);
        s += bytes_sum(t->data, t->size);
    }
    sink += s;
    if (size <= 65536) round_trip(f);
    gguf_close(f);
    return 0;
}
