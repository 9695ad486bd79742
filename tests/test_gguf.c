/*
 * test_gguf.c - the GGUF reader and writer on valid files.
 *
 * Round trips of every metadata value type (all scalars, bool, strings, empty
 * and nested arrays), tensors of several types and shapes read back
 * byte-exact, alignments other than 32, v2 and v3 headers, copying keys with
 * gguf_writer_copy_kv (a real model copied this way comes out byte-identical),
 * and the writer's own errors. Corrupt files are test_gguf_corrupt.c.
 */
#include "check_err.h"
#include "core/alloc.h"
#include "core/dtype.h"
#include "core/error.h"
#include "format/gguf.h"
#include "gguf_bytes.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static gguf_file *open_mem(const gb *b) {
    gguf_file *f = NULL;
    wgml_error err;
    wgml_status st = gguf_open_memory(b->p, b->n, "built.gguf", &f, &err);
    if (st) fail_msg("gguf_open_memory: %s", err.message);
    return f;
}

static gguf_file *open_path(const char *path) {
    gguf_file *f = NULL;
    wgml_error err;
    wgml_status st = gguf_open(path, &f, &err);
    if (st) fail_msg("gguf_open %s: %s", path, err.message);
    return f;
}

static const gguf_value *val(const gguf_file *f, const char *key) {
    const gguf_kv *kv = gguf_find_kv(f, key);
    if (!kv) fail_msg("key '%s' missing", key);
    return &kv->value;
}

/* ---- every value type, written field by field ---- */

/* A file with one key of each scalar type, strings, and arrays: empty, of each
 * fixed type, of strings, of arrays of strings, of arrays of arrays of u8. */
static void build_all_types(gb *b, uint32_t version) {
    gb_header(b, version, 0, 27);
    gb_key(b, "t.u8", GGUF_TYPE_UINT8), gb_u8(b, 200);
    gb_key(b, "t.i8", GGUF_TYPE_INT8), gb_u8(b, (uint8_t)-5);
    gb_key(b, "t.u16", GGUF_TYPE_UINT16), gb_u8(b, 0x34), gb_u8(b, 0xf2);
    gb_key(b, "t.i16", GGUF_TYPE_INT16), gb_u8(b, 0x00), gb_u8(b, 0x80);
    gb_key(b, "t.u32", GGUF_TYPE_UINT32), gb_u32(b, 4000000000u);
    gb_key(b, "t.i32", GGUF_TYPE_INT32), gb_u32(b, (uint32_t)INT32_MIN);
    gb_key(b, "t.f32", GGUF_TYPE_FLOAT32), gb_f32(b, -1.5f);
    gb_key(b, "t.bool1", GGUF_TYPE_BOOL), gb_u8(b, 1);
    gb_key(b, "t.bool0", GGUF_TYPE_BOOL), gb_u8(b, 0);
    gb_key(b, "t.str", GGUF_TYPE_STRING), gb_str(b, "h\xc3\xa9llo\n");
    gb_key(b, "t.empty_str", GGUF_TYPE_STRING), gb_str(b, "");
    gb_key(b, "t.u64", GGUF_TYPE_UINT64), gb_u64(b, UINT64_MAX);
    gb_key(b, "t.i64", GGUF_TYPE_INT64), gb_u64(b, (uint64_t)INT64_MIN);
    double d = 1e300;
    gb_key(b, "t.f64", GGUF_TYPE_FLOAT64), gb_put(b, &d, 8);
    /* arrays */
    gb_key(b, "a.empty_u32", GGUF_TYPE_ARRAY), gb_u32(b, GGUF_TYPE_UINT32), gb_u64(b, 0);
    gb_key(b, "a.empty_str", GGUF_TYPE_ARRAY), gb_u32(b, GGUF_TYPE_STRING), gb_u64(b, 0);
    gb_key(b, "a.empty_arr", GGUF_TYPE_ARRAY), gb_u32(b, GGUF_TYPE_ARRAY), gb_u64(b, 0);
    gb_key(b, "a.i32", GGUF_TYPE_ARRAY), gb_u32(b, GGUF_TYPE_INT32), gb_u64(b, 3);
    gb_u32(b, 7), gb_u32(b, (uint32_t)-8), gb_u32(b, 9);
    gb_key(b, "a.f32", GGUF_TYPE_ARRAY), gb_u32(b, GGUF_TYPE_FLOAT32), gb_u64(b, 2);
    gb_f32(b, 0.25f), gb_f32(b, -3.0f);
    gb_key(b, "a.bool", GGUF_TYPE_ARRAY), gb_u32(b, GGUF_TYPE_BOOL), gb_u64(b, 3);
    gb_u8(b, 1), gb_u8(b, 0), gb_u8(b, 1);
    gb_key(b, "a.f64", GGUF_TYPE_ARRAY), gb_u32(b, GGUF_TYPE_FLOAT64), gb_u64(b, 1), gb_put(b, &d, 8);
    gb_key(b, "a.str", GGUF_TYPE_ARRAY), gb_u32(b, GGUF_TYPE_STRING), gb_u64(b, 3);
    gb_str(b, "a"), gb_str(b, ""), gb_str(b, "ccc");
    /* [["x", "yy"], [], ["zzz"]] */
    gb_key(b, "a.arr_str", GGUF_TYPE_ARRAY), gb_u32(b, GGUF_TYPE_ARRAY), gb_u64(b, 3);
    gb_u32(b, GGUF_TYPE_STRING), gb_u64(b, 2), gb_str(b, "x"), gb_str(b, "yy");
    gb_u32(b, GGUF_TYPE_STRING), gb_u64(b, 0);
    gb_u32(b, GGUF_TYPE_STRING), gb_u64(b, 1), gb_str(b, "zzz");
    /* [[[1, 2]], [[3], []]] */
    gb_key(b, "a.arr_arr_u8", GGUF_TYPE_ARRAY), gb_u32(b, GGUF_TYPE_ARRAY), gb_u64(b, 2);
    gb_u32(b, GGUF_TYPE_ARRAY), gb_u64(b, 1);
    gb_u32(b, GGUF_TYPE_UINT8), gb_u64(b, 2), gb_u8(b, 1), gb_u8(b, 2);
    gb_u32(b, GGUF_TYPE_ARRAY), gb_u64(b, 2);
    gb_u32(b, GGUF_TYPE_UINT8), gb_u64(b, 1), gb_u8(b, 3);
    gb_u32(b, GGUF_TYPE_UINT8), gb_u64(b, 0);
    /* arrays of the remaining element types */
    gb_key(b, "a.u16", GGUF_TYPE_ARRAY), gb_u32(b, GGUF_TYPE_UINT16), gb_u64(b, 2), gb_u32(b, 0x00020001);
    gb_key(b, "a.i64", GGUF_TYPE_ARRAY), gb_u32(b, GGUF_TYPE_INT64), gb_u64(b, 1), gb_u64(b, (uint64_t)-1);
    gb_key(b, "z.last", GGUF_TYPE_UINT32), gb_u32(b, 42);
}

static void check_all_types(const gguf_file *f) {
    assert_int_equal(gguf_n_kv(f), 27);
    assert_int_equal(gguf_n_tensors(f), 0);
    assert_int_equal(val(f, "t.u8")->v.u64, 200);
    assert_int_equal(val(f, "t.i8")->v.i64, -5);
    assert_int_equal(val(f, "t.u16")->v.u64, 0xf234);
    assert_int_equal(val(f, "t.i16")->v.i64, -32768);
    assert_int_equal(val(f, "t.u32")->v.u64, 4000000000u);
    assert_int_equal(val(f, "t.i32")->v.i64, INT32_MIN);
    assert_true(val(f, "t.f32")->v.f64 == -1.5);
    assert_int_equal(val(f, "t.bool1")->v.b, 1);
    assert_int_equal(val(f, "t.bool0")->v.b, 0);
    assert_true(val(f, "t.u64")->v.u64 == UINT64_MAX);
    assert_true(val(f, "t.i64")->v.i64 == INT64_MIN);
    assert_true(val(f, "t.f64")->v.f64 == 1e300);
    for (int i = 0; i < (int)gguf_n_kv(f); i++)
        assert_int_equal(gguf_kv_at(f, i)->key[0] != 0, 1);
    assert_string_equal(gguf_kv_at(f, 26)->key, "z.last");
    assert_null(gguf_kv_at(f, 27));
    assert_null(gguf_kv_at(f, -1));

    gguf_str s;
    wgml_error err;
    assert_int_equal(gguf_get_str(f, "t.str", &s, &err), 1);
    assert_true(s.len == 7 && memcmp(s.ptr, "h\xc3\xa9llo\n", 7) == 0);
    assert_int_equal(gguf_get_str(f, "t.empty_str", &s, &err), 1);
    assert_int_equal(s.len, 0);
    assert_int_equal(gguf_get_str(f, "no.such.key", &s, &err), 0);

    /* typed getters: ranges and wrong types name the key */
    int64_t iv;
    assert_int_equal(gguf_get_int(f, "t.u8", 0, 255, &iv, &err), 1);
    assert_int_equal(iv, 200);
    assert_int_equal(gguf_get_int(f, "t.i16", -40000, 0, &iv, &err), 1);
    assert_int_equal(gguf_get_int(f, "t.u8", 0, 100, &iv, &err), -1);
    CHECK_ERR("u8 range", err.code, &err, WGML_ERR_FORMAT, "'t.u8'", "out of range");
    assert_int_equal(gguf_get_int(f, "t.u64", 0, INT64_MAX, &iv, &err), -1);
    CHECK_ERR("u64 range", err.code, &err, WGML_ERR_FORMAT, "'t.u64'", "18446744073709551615");
    assert_int_equal(gguf_get_int(f, "t.i64", 0, 10, &iv, &err), -1);
    CHECK_ERR("i64 range", err.code, &err, WGML_ERR_FORMAT, "'t.i64'", "-9223372036854775808");
    assert_int_equal(gguf_get_int(f, "t.str", 0, 10, &iv, &err), -1);
    CHECK_ERR("str as int", err.code, &err, WGML_ERR_FORMAT, "'t.str'", "should be an integer but is string");
    double dv;
    assert_int_equal(gguf_get_float(f, "t.i32", &dv, &err), 1);
    assert_true(dv == (double)INT32_MIN);
    assert_int_equal(gguf_get_float(f, "t.u32", &dv, &err), 1);
    assert_int_equal(gguf_get_float(f, "t.bool1", &dv, &err), -1);
    CHECK_ERR("bool as float", err.code, &err, WGML_ERR_FORMAT, "'t.bool1'", "a number");
    int bv;
    assert_int_equal(gguf_get_bool(f, "t.bool1", &bv, &err), 1);
    assert_int_equal(bv, 1);
    assert_int_equal(gguf_get_bool(f, "t.u8", &bv, &err), -1);
    CHECK_ERR("u8 as bool", err.code, &err, WGML_ERR_FORMAT, "'t.u8'", "a bool");
    assert_int_equal(gguf_get_str(f, "t.u32", &s, &err), -1);
    CHECK_ERR("u32 as str", err.code, &err, WGML_ERR_FORMAT, "'t.u32'", "should be a string but is u32");

    /* arrays */
    const gguf_value *a;
    assert_int_equal(gguf_get_arr(f, "a.empty_u32", GGUF_TYPE_UINT32, &a, &err), 1);
    assert_int_equal(a->v.arr.n, 0);
    assert_int_equal(gguf_get_arr(f, "a.empty_str", GGUF_TYPE_STRING, &a, &err), 1);
    assert_int_equal(a->v.arr.n, 0);
    assert_int_equal(gguf_get_arr(f, "a.empty_arr", GGUF_TYPE_ARRAY, &a, &err), 1);
    assert_int_equal(a->v.arr.n, 0);
    assert_int_equal(gguf_get_arr(f, "a.i32", GGUF_TYPE_INT32, &a, &err), 1);
    assert_int_equal(a->v.arr.n, 3);
    assert_int_equal(gguf_arr_i32(a, 0), 7);
    assert_int_equal(gguf_arr_i32(a, 1), -8);
    assert_int_equal(gguf_arr_u32(a, 2), 9);
    assert_int_equal(gguf_get_arr(f, "a.i32", GGUF_TYPE_FLOAT32, &a, &err), -1);
    CHECK_ERR("arr elem type", err.code, &err, WGML_ERR_FORMAT, "'a.i32'", "array of f32 but holds i32");
    assert_int_equal(gguf_get_arr(f, "t.u32", GGUF_TYPE_UINT32, &a, &err), -1);
    CHECK_ERR("scalar as arr", err.code, &err, WGML_ERR_FORMAT, "'t.u32'", "an array");
    assert_int_equal(gguf_get_arr(f, "a.f32", GGUF_TYPE_FLOAT32, &a, &err), 1);
    assert_true(gguf_arr_f32(a, 0) == 0.25f && gguf_arr_f32(a, 1) == -3.0f);
    assert_int_equal(gguf_get_arr(f, "a.bool", GGUF_TYPE_BOOL, &a, &err), 1);
    assert_true(a->v.arr.n == 3 && a->v.arr.raw[0] == 1 && a->v.arr.raw[1] == 0 && a->v.arr.raw[2] == 1);
    assert_int_equal(gguf_get_arr(f, "a.str", GGUF_TYPE_STRING, &a, &err), 1);
    assert_int_equal(a->v.arr.n, 3);
    assert_true(gguf_str_eq(a->v.arr.items[0].v.str, "a"));
    assert_true(gguf_str_eq(a->v.arr.items[1].v.str, ""));
    assert_true(gguf_str_eq(a->v.arr.items[2].v.str, "ccc"));
    assert_int_equal(gguf_get_arr(f, "a.arr_str", GGUF_TYPE_ARRAY, &a, &err), 1);
    assert_int_equal(a->v.arr.n, 3);
    const gguf_value *in = a->v.arr.items;
    assert_true(in[0].type == GGUF_TYPE_ARRAY && in[0].v.arr.elem_type == GGUF_TYPE_STRING && in[0].v.arr.n == 2);
    assert_true(gguf_str_eq(in[0].v.arr.items[0].v.str, "x") && gguf_str_eq(in[0].v.arr.items[1].v.str, "yy"));
    assert_int_equal(in[1].v.arr.n, 0);
    assert_true(in[2].v.arr.n == 1 && gguf_str_eq(in[2].v.arr.items[0].v.str, "zzz"));
    assert_int_equal(gguf_get_arr(f, "a.arr_arr_u8", GGUF_TYPE_ARRAY, &a, &err), 1);
    in = a->v.arr.items;
    assert_true(a->v.arr.n == 2 && in[0].v.arr.n == 1 && in[1].v.arr.n == 2);
    const gguf_value *u8s = &in[0].v.arr.items[0];
    assert_true(u8s->v.arr.elem_type == GGUF_TYPE_UINT8 && u8s->v.arr.n == 2);
    assert_true(u8s->v.arr.raw[0] == 1 && u8s->v.arr.raw[1] == 2);
    assert_true(in[1].v.arr.items[0].v.arr.n == 1 && in[1].v.arr.items[0].v.arr.raw[0] == 3);
    assert_int_equal(in[1].v.arr.items[1].v.arr.n, 0);
    assert_int_equal(gguf_get_arr(f, "a.i64", GGUF_TYPE_INT64, &a, &err), 1);
    assert_int_equal(gguf_get_arr(f, "a.u16", GGUF_TYPE_UINT16, &a, &err), 1);
    assert_true(a->v.arr.raw[0] == 1 && a->v.arr.raw[2] == 2);
    assert_int_equal(val(f, "z.last")->v.u64, 42);
    assert_string_equal(gguf_type_name(GGUF_TYPE_FLOAT64), "f64");
    assert_string_equal(gguf_type_name((gguf_type)99), "invalid");
}

static void test_all_value_types(void **state) {
    (void)state;
    gb b = {0};
    build_all_types(&b, 3);
    gguf_file *f = open_mem(&b);
    assert_int_equal(gguf_version(f), 3);
    assert_int_equal(gguf_alignment(f), 32);
    check_all_types(f);
    gguf_close(f);
    gb_free(&b);
}

/* Every key copied with gguf_writer_copy_kv comes out with the same bytes. */
static void copy_all(const gguf_file *src, const char *path, const char *skip_key) {
    wgml_error err;
    gguf_writer *w = gguf_writer_create();
    assert_non_null(w);
    for (int64_t i = 0; i < gguf_n_kv(src); i++) {
        const gguf_kv *kv = gguf_kv_at(src, i);
        if (skip_key && strcmp(kv->key, skip_key) == 0) continue;
        if (gguf_writer_copy_kv(w, kv, &err)) fail_msg("copy_kv %s: %s", kv->key, err.message);
        assert_true(gguf_writer_has_key(w, kv->key));
    }
    for (int64_t i = 0; i < gguf_n_tensors(src); i++) {
        const gguf_tensor *t = gguf_tensor_at(src, i);
        if (gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, &err)) fail_msg("%s", err.message);
    }
    if (gguf_writer_begin(w, path, &err)) fail_msg("%s", err.message);
    for (int64_t i = 0; i < gguf_n_tensors(src); i++) {
        const gguf_tensor *t = gguf_tensor_at(src, i);
        if (gguf_writer_write_tensor(w, t->data, t->size, &err)) fail_msg("%s", err.message);
    }
    if (gguf_writer_finish(w, &err)) fail_msg("%s", err.message);
    gguf_writer_free(w);
}

static void assert_same_kv(const gguf_file *a, const gguf_file *b) {
    assert_int_equal(gguf_n_kv(a), gguf_n_kv(b));
    for (int64_t i = 0; i < gguf_n_kv(a); i++) {
        const gguf_kv *x = gguf_kv_at(a, i), *y = gguf_kv_at(b, i);
        assert_string_equal(x->key, y->key);
        assert_int_equal(x->value.type, y->value.type);
        assert_int_equal(x->raw_size, y->raw_size);
        assert_memory_equal(x->raw, y->raw, x->raw_size);
    }
}

static void assert_same_tensors(const gguf_file *a, const gguf_file *b) {
    assert_int_equal(gguf_n_tensors(a), gguf_n_tensors(b));
    for (int64_t i = 0; i < gguf_n_tensors(a); i++) {
        const gguf_tensor *x = gguf_tensor_at(a, i), *y = gguf_tensor_at(b, i);
        assert_string_equal(x->name, y->name);
        assert_int_equal(x->type, y->type);
        assert_int_equal(x->n_dims, y->n_dims);
        assert_memory_equal(x->ne, y->ne, sizeof x->ne);
        assert_int_equal(x->size, y->size);
        assert_memory_equal(x->data, y->data, x->size);
    }
}

static void test_copy_kv_round_trip(void **state) {
    (void)state;
    gb b = {0};
    build_all_types(&b, 3);
    gguf_file *f = open_mem(&b);
    const char *out = tu_tmp_path("copy_kv.gguf");
    copy_all(f, out, NULL);
    gguf_file *g = open_path(out);
    assert_same_kv(f, g);
    check_all_types(g);
    gguf_close(g);
    gguf_close(f);
    gb_free(&b);
    remove(out);
}

/* ---- the writer's setters and tensors ---- */

typedef struct {
    const char *name;
    uint32_t type;
    int n_dims;
    int64_t ne[4];
} tspec;

static const tspec k_tensors[] = {
    {"f32.vec", WGML_F32, 1, {7, 1, 1, 1}},     {"f16.mat", WGML_F16, 2, {5, 3, 1, 1}},
    {"q8_0.mat", WGML_Q8_0, 2, {64, 3, 1, 1}},  {"q4_0.3d", WGML_Q4_0, 3, {32, 3, 2, 1}},
    {"q4_k.mat", WGML_Q4_K, 2, {256, 2, 1, 1}}, {"i32.4d", WGML_I32, 4, {3, 2, 2, 2}},
    {"bf16.one", WGML_BF16, 1, {1, 1, 1, 1}},   {"i8.odd", WGML_I8, 2, {3, 3, 1, 1}},
    {"f64.vec", WGML_F64, 1, {5, 1, 1, 1}},
};
#define N_TENSORS (sizeof k_tensors / sizeof k_tensors[0])

static size_t spec_size(const tspec *t) {
    return wgml_row_size(t->type, t->ne[0]) * (size_t)(t->ne[1] * t->ne[2] * t->ne[3]);
}

/* Deterministic bytes for tensor i. */
static uint8_t *tensor_bytes(size_t i, size_t size) {
    uint8_t *p = malloc(size);
    tu_rng r = {0x1234 + i};
    for (size_t k = 0; k < size; k++)
        p[k] = (uint8_t)tu_next(&r);
    return p;
}

/* Writes the tensors of k_tensors (and some metadata) with the given
 * alignment (0 = leave general.alignment unset); when late, the alignment is
 * set after the tensors are declared. */
static void write_tensor_file(const char *path, uint32_t alignment, int late) {
    wgml_error err;
    gguf_writer *w = gguf_writer_create();
    assert_non_null(w);
    assert_int_equal(gguf_writer_set_str(w, "general.architecture", "test", &err), WGML_OK);
    if (alignment && !late) assert_int_equal(gguf_writer_set_u32(w, "general.alignment", alignment, &err), WGML_OK);
    assert_int_equal(gguf_writer_set_u32(w, "w.u32", 123456789u, &err), WGML_OK);
    assert_int_equal(gguf_writer_set_i32(w, "w.i32", -42, &err), WGML_OK);
    assert_int_equal(gguf_writer_set_u64(w, "w.u64", 1ull << 40, &err), WGML_OK);
    assert_int_equal(gguf_writer_set_f32(w, "w.f32", 3.25f, &err), WGML_OK);
    assert_int_equal(gguf_writer_set_bool(w, "w.bool", 7, &err), WGML_OK); /* stored as 1 */
    assert_int_equal(gguf_writer_set_str(w, "w.str", "", &err), WGML_OK);
    const float fs[3] = {1.0f, -2.0f, 0.5f};
    assert_int_equal(gguf_writer_set_arr(w, "w.arr_f32", GGUF_TYPE_FLOAT32, fs, 3, &err), WGML_OK);
    assert_int_equal(gguf_writer_set_arr(w, "w.arr_empty", GGUF_TYPE_INT64, NULL, 0, &err), WGML_OK);
    const char *strs[3] = {"one", "", "thr\0ee"};
    const uint64_t lens[3] = {3, 0, 6};
    assert_int_equal(gguf_writer_set_arr_str(w, "w.arr_str", strs, lens, 3, &err), WGML_OK);
    assert_int_equal(gguf_writer_set_arr_str(w, "w.arr_str0", strs, NULL, 2, &err), WGML_OK);
    for (size_t i = 0; i < N_TENSORS; i++)
        if (gguf_writer_add_tensor(w, k_tensors[i].name, k_tensors[i].type, k_tensors[i].n_dims, k_tensors[i].ne, &err))
            fail_msg("%s", err.message);
    if (alignment && late) assert_int_equal(gguf_writer_set_u32(w, "general.alignment", alignment, &err), WGML_OK);
    if (gguf_writer_begin(w, path, &err)) fail_msg("%s", err.message);
    for (size_t i = 0; i < N_TENSORS; i++) {
        size_t size = spec_size(&k_tensors[i]);
        uint8_t *p = tensor_bytes(i, size);
        if (gguf_writer_write_tensor(w, p, size, &err)) fail_msg("%s", err.message);
        free(p);
    }
    if (gguf_writer_finish(w, &err)) fail_msg("%s", err.message);
    gguf_writer_free(w);
}

static void check_tensor_file(const gguf_file *f, size_t alignment) {
    wgml_error err;
    assert_int_equal(gguf_alignment(f), alignment);
    assert_int_equal(gguf_data_offset(f) % alignment, 0);
    int64_t iv;
    assert_int_equal(gguf_get_int(f, "w.u32", 0, INT64_MAX, &iv, &err), 1);
    assert_int_equal(iv, 123456789);
    assert_int_equal(gguf_get_int(f, "w.i32", INT64_MIN, 0, &iv, &err), 1);
    assert_int_equal(iv, -42);
    assert_int_equal(val(f, "w.u64")->v.u64, 1ull << 40);
    assert_true(val(f, "w.f32")->v.f64 == 3.25);
    assert_int_equal(val(f, "w.bool")->v.b, 1);
    assert_int_equal(val(f, "w.str")->v.str.len, 0);
    const gguf_value *a = val(f, "w.arr_f32");
    assert_true(a->v.arr.n == 3 && gguf_arr_f32(a, 1) == -2.0f);
    a = val(f, "w.arr_empty");
    assert_true(a->v.arr.elem_type == GGUF_TYPE_INT64 && a->v.arr.n == 0);
    a = val(f, "w.arr_str");
    assert_true(a->v.arr.n == 3 && a->v.arr.items[2].v.str.len == 6);
    assert_memory_equal(a->v.arr.items[2].v.str.ptr, "thr\0ee", 6);
    assert_true(gguf_str_eq(val(f, "w.arr_str0")->v.arr.items[0].v.str, "one"));

    assert_int_equal(gguf_n_tensors(f), N_TENSORS);
    for (size_t i = 0; i < N_TENSORS; i++) {
        const tspec *s = &k_tensors[i];
        const gguf_tensor *t = gguf_find_tensor(f, s->name);
        assert_non_null(t);
        assert_ptr_equal(t, gguf_tensor_at(f, (int64_t)i));
        assert_int_equal(t->type, s->type);
        assert_int_equal(t->n_dims, s->n_dims);
        assert_memory_equal(t->ne, s->ne, sizeof t->ne);
        assert_int_equal(t->n_elements, s->ne[0] * s->ne[1] * s->ne[2] * s->ne[3]);
        size_t size = spec_size(s);
        assert_int_equal(t->size, size);
        assert_int_equal(t->offset % alignment, 0);
        assert_int_equal((gguf_data_offset(f) + t->offset) % alignment, 0);
        uint8_t *p = tensor_bytes(i, size);
        assert_memory_equal(t->data, p, size);
        free(p);
    }
    assert_null(gguf_find_tensor(f, "nope"));
    assert_null(gguf_tensor_at(f, (int64_t)N_TENSORS));
}

static void test_writer_round_trip(void **state) {
    (void)state;
    const char *path = tu_tmp_path("tensors.gguf");
    write_tensor_file(path, 0, 0);
    gguf_file *f = open_path(path);
    assert_int_equal(gguf_version(f), 3);
    assert_string_equal(gguf_name(f), path);
    check_tensor_file(f, 32);
    /* the same bytes from memory */
    size_t n;
    uint8_t *bytes = tu_read_file(path, &n);
    assert_int_equal(gguf_file_size(f), n);
    gguf_file *g = NULL;
    wgml_error err;
    assert_int_equal(gguf_open_memory(bytes, n, NULL, &g, &err), WGML_OK);
    assert_string_equal(gguf_name(g), "<memory>");
    check_tensor_file(g, 32);
    gguf_close(g);
    gguf_close(f);
    free(bytes);
    assert_int_not_equal(access(path, F_OK), -1);
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    assert_int_equal(access(tmp, F_OK), -1);
    remove(path);
}

static void test_alignments(void **state) {
    (void)state;
    static const uint32_t aligns[] = {1, 2, 8, 64, 4096};
    for (size_t i = 0; i < sizeof aligns / sizeof aligns[0]; i++)
        for (int late = 0; late < 2; late++) {
            const char *path = tu_tmp_path("aligned.gguf");
            write_tensor_file(path, aligns[i], late);
            gguf_file *f = open_path(path);
            assert_int_equal(val(f, "general.alignment")->v.u64, aligns[i]);
            check_tensor_file(f, aligns[i]);
            /* copy_kv carries the alignment into the copy */
            const char *copy = tu_tmp_path("aligned-copy.gguf");
            copy_all(f, copy, NULL);
            gguf_file *g = open_path(copy);
            check_tensor_file(g, aligns[i]);
            assert_same_kv(f, g);
            assert_same_tensors(f, g);
            gguf_close(g);
            /* and dropping it goes back to 32 */
            copy_all(f, copy, "general.alignment");
            g = open_path(copy);
            check_tensor_file(g, 32);
            gguf_close(g);
            gguf_close(f);
            remove(copy);
            remove(path);
        }
}

/* Version 2 has the same layout as 3 (64-bit counts and lengths). */
static void test_version2(void **state) {
    (void)state;
    const char *path = tu_tmp_path("v2.gguf");
    write_tensor_file(path, 64, 0);
    size_t n;
    uint8_t *bytes = tu_read_file(path, &n);
    assert_non_null(bytes);
    assert_int_equal(get_u32_at(bytes, 4), 3);
    put_u32_at(bytes, 4, 2);
    assert_int_equal(tu_write_file(path, bytes, n), 0);
    gguf_file *f = open_path(path);
    assert_int_equal(gguf_version(f), 2);
    check_tensor_file(f, 64);
    gguf_close(f);
    gb b = {0};
    build_all_types(&b, 2);
    f = open_mem(&b);
    assert_int_equal(gguf_version(f), 2);
    check_all_types(f);
    gguf_close(f);
    gb_free(&b);
    free(bytes);
    remove(path);
}

/* A real model copied key by key and tensor by tensor is byte-identical. */
static void test_real_model_copy(void **state) {
    (void)state;
    static const char *models[] = {"models/stories260K.gguf", "models/stories260K-Q8_0mix.gguf",
                                   "models/stories260K-Q4_0mix.gguf", "vocab/ggml-vocab-llama-spm.gguf"};
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        const char *src = tu_shared(models[i]);
        gguf_file *f = open_path(src);
        const char *out = tu_tmp_path("model-copy.gguf");
        copy_all(f, out, NULL);
        gguf_file *g = open_path(out);
        assert_same_kv(f, g);
        assert_same_tensors(f, g);
        gguf_close(g);
        gguf_close(f);
        size_t na, nb;
        uint8_t *a = tu_read_file(src, &na), *b = tu_read_file(out, &nb);
        assert_non_null(a);
        assert_non_null(b);
        /* a file without tensors may end unpadded (gguf-py does); ours pads to 32 */
        size_t pad = nb > na && nb - na < 32 && nb % 32 == 0 ? nb - na : 0;
        for (size_t k = na; k < nb && pad; k++)
            assert_int_equal(b[k], 0);
        if (na + pad != nb || memcmp(a, b, na) != 0) fail_msg("%s: the copy differs from the original", models[i]);
        free(a);
        free(b);
        remove(out);
    }
}

/* ---- writer errors ---- */

static int exists(const char *path) { return access(path, F_OK) == 0; }
static int mkdir_for_test(const char *path) { return mkdir(path, 0700); }

static void test_writer_errors(void **state) {
    (void)state;
    wgml_error err;
    const char *path = tu_tmp_path("writer-err.gguf");
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    gguf_writer *w = gguf_writer_create();
    assert_non_null(w);
    assert_int_equal(gguf_writer_set_u32(w, "k.a", 1, &err), WGML_OK);
    CHECK_ERR("duplicate key", gguf_writer_set_str(w, "k.a", "x", &err), &err, WGML_ERR_INVALID_ARGUMENT,
              "duplicate metadata key 'k.a'");
    CHECK_ERR("duplicate key (u32)", gguf_writer_set_u32(w, "k.a", 2, &err), &err, WGML_ERR_INVALID_ARGUMENT, "'k.a'");
    CHECK_ERR("alignment not u32", gguf_writer_set_u64(w, "general.alignment", 64, &err), &err,
              WGML_ERR_INVALID_ARGUMENT, "general.alignment must be a u32");
    CHECK_ERR("alignment 48", gguf_writer_set_u32(w, "general.alignment", 48, &err), &err, WGML_ERR_INVALID_ARGUMENT,
              "48 is not a power of two");
    CHECK_ERR("alignment 0", gguf_writer_set_u32(w, "general.alignment", 0, &err), &err, WGML_ERR_INVALID_ARGUMENT,
              "general.alignment 0");
    CHECK_ERR("array of strings via set_arr", gguf_writer_set_arr(w, "k.s", GGUF_TYPE_STRING, "", 0, &err), &err,
              WGML_ERR_INVALID_ARGUMENT, "'k.s'");
    assert_false(gguf_writer_has_key(w, "general.alignment"));
    assert_false(gguf_writer_has_key(w, "k.s"));

    int64_t ne[2] = {64, 2};
    assert_int_equal(gguf_writer_add_tensor(w, "t.a", WGML_F32, 2, ne, &err), WGML_OK);
    CHECK_ERR("duplicate tensor", gguf_writer_add_tensor(w, "t.a", WGML_F16, 1, ne, &err), &err,
              WGML_ERR_INVALID_ARGUMENT, "duplicate tensor 't.a'");
    CHECK_ERR("n_dims 0", gguf_writer_add_tensor(w, "t.b", WGML_F32, 0, ne, &err), &err, WGML_ERR_INVALID_ARGUMENT,
              "'t.b' has 0 dims");
    CHECK_ERR("n_dims 5", gguf_writer_add_tensor(w, "t.b", WGML_F32, 5, ne, &err), &err, WGML_ERR_INVALID_ARGUMENT,
              "'t.b' has 5 dims");
    int64_t bad[2] = {33, 2};
    CHECK_ERR("row not a block multiple", gguf_writer_add_tensor(w, "t.b", WGML_Q8_0, 2, bad, &err), &err,
              WGML_ERR_INVALID_ARGUMENT, "'t.b'", "Q8_0");
    int64_t zero[2] = {4, 0};
    CHECK_ERR("zero dim", gguf_writer_add_tensor(w, "t.b", WGML_F32, 2, zero, &err), &err, WGML_ERR_INVALID_ARGUMENT,
              "'t.b' has a bad shape");
    int64_t neg[1] = {-4};
    CHECK_ERR("negative row", gguf_writer_add_tensor(w, "t.b", WGML_F32, 1, neg, &err), &err, WGML_ERR_INVALID_ARGUMENT,
              "'t.b'");
    CHECK_ERR("unknown type", gguf_writer_add_tensor(w, "t.b", 99, 1, ne, &err), &err, WGML_ERR_INVALID_ARGUMENT,
              "'t.b'");
    int64_t ne2[1] = {16};
    assert_int_equal(gguf_writer_add_tensor(w, "t.b", WGML_F16, 1, ne2, &err), WGML_OK);

    float data[128] = {0};
    CHECK_ERR("write before begin", gguf_writer_write_tensor(w, data, 512, &err), &err, WGML_ERR_INVALID_ARGUMENT,
              "before begin");
    CHECK_ERR("finish before begin", gguf_writer_finish(w, &err), &err, WGML_ERR_INVALID_ARGUMENT, "before begin");
    CHECK_ERR("begin into a missing folder", gguf_writer_begin(w, "/nonexistent-dir/x.gguf", &err), &err, WGML_ERR_IO,
              "/nonexistent-dir/x.gguf.tmp", "cannot create");
    assert_int_equal(gguf_writer_begin(w, path, &err), WGML_OK);
    assert_true(exists(tmp));
    assert_false(exists(path));
    CHECK_ERR("begin twice", gguf_writer_begin(w, path, &err), &err, WGML_ERR_INVALID_ARGUMENT, "twice");
    CHECK_ERR("set after begin", gguf_writer_set_u32(w, "k.late", 1, &err), &err, WGML_ERR_INVALID_ARGUMENT,
              "'k.late' set after begin");
    CHECK_ERR("add after begin", gguf_writer_add_tensor(w, "t.late", WGML_F32, 1, ne, &err), &err,
              WGML_ERR_INVALID_ARGUMENT, "'t.late' added after begin");
    CHECK_ERR("wrong size", gguf_writer_write_tensor(w, data, 511, &err), &err, WGML_ERR_INVALID_ARGUMENT,
              "'t.a' needs 512 bytes, got 511");
    assert_int_equal(gguf_writer_write_tensor(w, data, 512, &err), WGML_OK);
    CHECK_ERR("finish early", gguf_writer_finish(w, &err), &err, WGML_ERR_INVALID_ARGUMENT, "1 of 2 tensors written");
    CHECK_ERR("wrong size 2", gguf_writer_write_tensor(w, data, 512, &err), &err, WGML_ERR_INVALID_ARGUMENT,
              "'t.b' needs 32 bytes, got 512");
    assert_int_equal(gguf_writer_write_tensor(w, data, 32, &err), WGML_OK);
    CHECK_ERR("too many", gguf_writer_write_tensor(w, data, 32, &err), &err, WGML_ERR_INVALID_ARGUMENT,
              "more tensor data than tensors declared");
    /* an unfinished writer removes its temporary file */
    gguf_writer_free(w);
    assert_false(exists(tmp));
    assert_false(exists(path));
    gguf_writer_free(NULL);

    /* finishing into a folder that vanished: the rename fails, nothing is left */
    w = gguf_writer_create();
    const char *dir = tu_tmp_path("vanishing");
    assert_int_equal(mkdir_for_test(dir), 0);
    char inner[700], inner_tmp[710];
    snprintf(inner, sizeof inner, "%s/out.gguf", dir);
    snprintf(inner_tmp, sizeof inner_tmp, "%s.tmp", inner);
    assert_int_equal(gguf_writer_begin(w, inner, &err), WGML_OK);
    /* replacing the target by a non-empty folder makes rename() fail */
    char blocker[720];
    snprintf(blocker, sizeof blocker, "%s/x", inner);
    assert_int_equal(mkdir_for_test(inner), 0);
    assert_int_equal(mkdir_for_test(blocker), 0);
    CHECK_ERR("rename fails", gguf_writer_finish(w, &err), &err, WGML_ERR_IO, inner, "rename");
    assert_false(exists(inner_tmp));
    gguf_writer_free(w);
    rmdir(blocker);
    rmdir(inner);
    rmdir(dir);
}

/* Writer allocation failures: every one is reported, nothing leaks. */
static void test_writer_out_of_memory(void **state) {
    (void)state;
    const char *path = tu_tmp_path("writer-oom.gguf");
    int ok = 0;
    for (long n = 0; n < 10000 && !ok; n++) {
        wgml_error err;
        wgml_alloc_fail_after(n);
        gguf_writer *w = gguf_writer_create();
        wgml_status st = w ? WGML_OK : WGML_ERR_OUT_OF_MEMORY;
        const char *strs[2] = {"a", "b"};
        int64_t ne[1] = {8};
        float data[8] = {0};
        if (!st) st = gguf_writer_set_str(w, "general.architecture", "x", &err);
        if (!st) st = gguf_writer_set_arr_str(w, "a.s", strs, NULL, 2, &err);
        for (int i = 0; i < 40 && !st; i++) { /* enough keys and tensors to grow every list */
            char k[32];
            snprintf(k, sizeof k, "k.%d", i);
            st = gguf_writer_set_u32(w, k, (uint32_t)i, &err);
            if (!st) st = gguf_writer_add_tensor(w, k, WGML_F32, 1, ne, &err);
        }
        if (!st) st = gguf_writer_begin(w, path, &err);
        for (int i = 0; i < 40 && !st; i++)
            st = gguf_writer_write_tensor(w, data, sizeof data, &err);
        if (!st) st = gguf_writer_finish(w, &err);
        wgml_alloc_fail_after(-1);
        gguf_writer_free(w);
        if (st == WGML_OK) {
            ok = 1;
            assert_true(n > 5);
        } else {
            if (st != WGML_ERR_OUT_OF_MEMORY) fail_msg("n=%ld: status %d: %s", n, (int)st, err.message);
            assert_false(exists(path));
        }
    }
    assert_true(ok);
    remove(path);
}

/* ---- opening files ---- */

static void test_open_errors(void **state) {
    (void)state;
    wgml_error err;
    gguf_file *f = (gguf_file *)1;
    CHECK_ERR("missing file", gguf_open("/nonexistent/model.gguf", &f, &err), &err, WGML_ERR_IO,
              "/nonexistent/model.gguf", "cannot open");
    assert_null(f);
    CHECK_ERR("directory", gguf_open("/", &f, &err), &err, WGML_ERR_IO, "not a regular file");
    const char *small = tu_tmp_path("small.gguf");
    assert_int_equal(tu_write_file(small, "GGUF\3\0\0\0", 8), 0);
    CHECK_ERR("tiny file", gguf_open(small, &f, &err), &err, WGML_ERR_FORMAT, small, "too small");
    assert_int_equal(tu_write_file(small, "", 0), 0);
    CHECK_ERR("empty file", gguf_open(small, &f, &err), &err, WGML_ERR_FORMAT, small, "0 bytes");
    remove(small);
    CHECK_ERR("NULL data", gguf_open_memory(NULL, 10, "m", &f, &err), &err, WGML_ERR_INVALID_ARGUMENT, "NULL");
    CHECK_ERR("no bytes", gguf_open_memory(NULL, 0, "empty", &f, &err), &err, WGML_ERR_FORMAT, "empty",
              "truncated at offset 0");
    gguf_close(NULL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_all_value_types),   cmocka_unit_test(test_copy_kv_round_trip),
        cmocka_unit_test(test_writer_round_trip), cmocka_unit_test(test_alignments),
        cmocka_unit_test(test_version2),          cmocka_unit_test(test_real_model_copy),
        cmocka_unit_test(test_writer_errors),     cmocka_unit_test(test_writer_out_of_memory),
        cmocka_unit_test(test_open_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
