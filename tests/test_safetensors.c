/*
 * test_safetensors.c - the safetensors reader (format/safetensors.h) and the
 * text-file helpers beside it (format/file_bytes.h).
 *
 * Files are written here byte by byte - a small writer of our own that lays
 * out what Hugging Face's writer does (u64 header length, JSON header padded
 * with spaces to a multiple of 8, tensors back to back), and a raw mode for
 * any header text - independent of the code under test. They are read back:
 * every dtype's element size and wgml type, F32/F16/BF16 values, 0-d and
 * 0-element tensors, metadata (escapes, surrogate pairs, a NUL in a value),
 * header padding, unaligned data, tensors listed out of offset order. Then
 * one hostile case per check, each expected to fail with its status and a
 * message naming the file and the tensor: truncation at every length, header
 * lengths that lie, invalid UTF-8 and JSON, malformed entries, unknown
 * dtypes, overlaps, holes, ranges out of the data section, wrong byte
 * counts, shapes whose products overflow, duplicates, too many tensors.
 * Sharded sets (an index and two shards) and folders are opened from disk,
 * with every failure of a set: missing shard, a tensor in the wrong shard or
 * in two, shard names that leave the folder, a weight map that disagrees
 * with the shards. Out of memory at every allocation, and random byte flips.
 */
#include "check_err.h"
#include "core/alloc.h"
#include "core/dtype.h"
#include "core/fp16.h"
#include "format/file_bytes.h"
#include "format/safetensors.h"
#include "gguf_bytes.h"
#include "testutil.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define NAME "t.safetensors" /* label of in-memory files in messages */

/* ---- a writer of our own ---- */

static void gb_text(gb *b, const char *s) { gb_put(b, s, strlen(s)); }

static void gb_textf(gb *b, const char *fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    assert_true(n >= 0 && (size_t)n < sizeof buf);
    gb_put(b, buf, (size_t)n);
}

/* Header text (single quotes stand for double quotes: less escaping here),
 * then data_len bytes of data (i * 7 + 1 when data is NULL). */
static void raw(gb *out, const char *header, const void *data, size_t data_len) {
    size_t hn = strlen(header);
    gb_u64(out, hn);
    for (size_t i = 0; i < hn; i++)
        gb_u8(out, header[i] == '\'' ? '"' : (uint8_t)header[i]);
    if (data) {
        gb_put(out, data, data_len);
    } else {
        for (size_t i = 0; i < data_len; i++)
            gb_u8(out, (uint8_t)(i * 7 + 1));
    }
}

typedef struct wt {
    const char *name; /* as written in the JSON (escapes allowed) */
    const char *dtype;
    int rank;
    int64_t shape[ST_MAX_DIMS];
    const void *data; /* size bytes; NULL: a pattern */
    size_t size;
} wt;

/* A file as the reference writer lays it out: entries in order with
 * consecutive offsets, `meta` (JSON text, NULL for none) as __metadata__,
 * the header padded with spaces to a multiple of 8. */
static void write_st(gb *out, const wt *ts, int n, const char *meta) {
    gb h = {0}, d = {0};
    gb_text(&h, "{");
    if (meta) {
        gb_text(&h, "\"__metadata__\":");
        gb_text(&h, meta);
    }
    for (int i = 0; i < n; i++) {
        const wt *t = &ts[i];
        gb_textf(&h, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[", (i || meta) ? "," : "", t->name, t->dtype);
        for (int k = 0; k < t->rank; k++)
            gb_textf(&h, "%s%lld", k ? "," : "", (long long)t->shape[k]);
        gb_textf(&h, "],\"data_offsets\":[%zu,%zu]}", d.n, d.n + t->size);
        if (t->data) {
            gb_put(&d, t->data, t->size);
        } else {
            for (size_t k = 0; k < t->size; k++)
                gb_u8(&d, (uint8_t)(k * 13 + (size_t)i));
        }
    }
    gb_text(&h, "}");
    while (h.n % 8)
        gb_u8(&h, ' ');
    gb_u64(out, h.n);
    gb_put(out, h.p, h.n);
    gb_put(out, d.p, d.n);
    gb_free(&h);
    gb_free(&d);
}

/* Opens bytes from an exact-size heap copy (so that ASan sees any over-read);
 * *copy keeps them for a file that opened. */
static wgml_status open_bytes(const uint8_t *p, size_t n, const char *name, st_file **f, uint8_t **copy,
                              wgml_error *err) {
    uint8_t *c = malloc(n ? n : 1);
    assert_non_null(c);
    if (n) memcpy(c, p, n);
    wgml_status st = st_open_memory(c, n, name, f, err);
    if (st) {
        assert_null(*f);
        free(c);
        c = NULL;
    }
    *copy = c;
    return st;
}

/* A header (single quotes for double) over data_len bytes must be refused with
 * `want` and a message naming the file and s1, s2. */
static void bad_data(const char *what, const char *header, const void *data, size_t data_len, wgml_status want,
                     const char *s1, const char *s2) {
    gb b = {0};
    raw(&b, header, data, data_len);
    st_file *f = NULL;
    uint8_t *copy;
    wgml_error err;
    wgml_status st = open_bytes(b.p, b.n, NAME, &f, &copy, &err);
    CHECK_ERR(what, st, &err, want, NAME, s1, s2);
    gb_free(&b);
}
static void bad(const char *what, const char *header, size_t data_len, wgml_status want, const char *s1,
                const char *s2) {
    bad_data(what, header, NULL, data_len, want, s1, s2);
}

/* Must open; returns the file (close it and free *copy). */
static st_file *good(const char *header, size_t data_len, uint8_t **copy) {
    gb b = {0};
    raw(&b, header, NULL, data_len);
    st_file *f = NULL;
    wgml_error err;
    wgml_status st = open_bytes(b.p, b.n, NAME, &f, copy, &err);
    if (st) fail_msg("header %s: %s", header, err.message);
    gb_free(&b);
    return f;
}
static void good_close(const char *header, size_t data_len) {
    uint8_t *copy;
    st_file *f = good(header, data_len, &copy);
    st_close(f);
    free(copy);
}

/* ---- reading ---- */

static void test_dtypes(void **state) {
    (void)state;
    static const struct {
        const char *name;
        st_dtype t;
        size_t size;
        int wgml;
    } want[] = {
        {"BOOL", ST_BOOL, 1, -1},        {"U8", ST_U8, 1, -1},           {"I8", ST_I8, 1, WGML_I8},
        {"I16", ST_I16, 2, WGML_I16},    {"U16", ST_U16, 2, -1},         {"F16", ST_F16, 2, WGML_F16},
        {"BF16", ST_BF16, 2, WGML_BF16}, {"I32", ST_I32, 4, WGML_I32},   {"U32", ST_U32, 4, -1},
        {"F32", ST_F32, 4, WGML_F32},    {"F64", ST_F64, 8, WGML_F64},   {"I64", ST_I64, 8, WGML_I64},
        {"U64", ST_U64, 8, -1},          {"F8_E4M3", ST_F8_E4M3, 1, -1}, {"F8_E5M2", ST_F8_E5M2, 1, -1},
        {"F8_E8M0", ST_F8_E8M0, 1, -1},  {"C64", ST_C64, 8, -1},
    };
    enum { N = sizeof want / sizeof want[0] };
    assert_int_equal(N, ST_DTYPE_COUNT);
    wt ts[N];
    char names[N][16];
    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof names[i], "t_%s", want[i].name);
        ts[i] = (wt){names[i], want[i].name, 2, {3, 1}, NULL, 3 * want[i].size};
        assert_string_equal(st_dtype_name(want[i].t), want[i].name);
        assert_int_equal(st_dtype_size(want[i].t), want[i].size);
        assert_int_equal(st_dtype_to_wgml(want[i].t), want[i].wgml);
    }
    assert_string_equal(st_dtype_name(ST_DTYPE_COUNT), "invalid");
    assert_int_equal(st_dtype_size(ST_DTYPE_COUNT), 0);
    assert_int_equal(st_dtype_to_wgml(ST_DTYPE_COUNT), -1);
    gb b = {0};
    write_st(&b, ts, N, NULL);
    st_file *f = NULL;
    uint8_t *copy;
    wgml_error err;
    if (open_bytes(b.p, b.n, NAME, &f, &copy, &err)) fail_msg("%s", err.message);
    assert_int_equal(st_n_tensors(f), N);
    assert_string_equal(st_name(f), NAME);
    assert_int_equal(st_n_files(f), 1);
    assert_string_equal(st_file_path(f, 0), NAME);
    assert_null(st_file_path(f, 1));
    uint64_t header;
    memcpy(&header, copy, 8);
    const uint8_t *data = copy + 8 + header;
    size_t at = 0;
    for (int i = 0; i < N; i++) {
        const st_tensor *t = st_tensor_at(f, i);
        assert_non_null(t);
        assert_ptr_equal(st_find(f, names[i]), t);
        assert_string_equal(t->name, names[i]);
        assert_int_equal(t->dtype, want[i].t);
        assert_string_equal(t->dtype_name, want[i].name);
        assert_int_equal(t->elem_size, want[i].size);
        assert_int_equal(t->rank, 2);
        assert_int_equal(t->shape[0], 3);
        assert_int_equal(t->shape[1], 1);
        assert_int_equal(t->n_elements, 3);
        assert_int_equal(t->size, 3 * want[i].size);
        assert_int_equal(t->offset, at);
        assert_ptr_equal(t->data, data + at);
        assert_int_equal(t->shard, 0);
        assert_string_equal(t->file, NAME);
        assert_string_equal(st_tensor_file(f, t), NAME);
        for (size_t k = 0; k < t->size; k++)
            assert_int_equal(((const uint8_t *)t->data)[k], (uint8_t)(k * 13 + (size_t)i));
        at += t->size;
    }
    assert_null(st_tensor_at(f, N));
    assert_null(st_tensor_at(f, -1));
    assert_null(st_find(f, "t_F128"));
    assert_null(st_find(f, ""));
    assert_null(st_metadata(f, "format", NULL));
    assert_int_equal(st_n_metadata(f, 0), 0);
    st_close(f);
    free(copy);
    gb_free(&b);
    st_close(NULL);
}

static void test_values(void **state) {
    (void)state;
    const float f32[6] = {1.5f, -2.0f, 3.25f, 1e-3f, 65504.0f, -0.0f};
    const uint16_t f16[4] = {0x3c00, 0xc000, 0x3555, 0x7bff};  /* 1, -2, 0.33325, 65504 */
    const uint16_t bf16[4] = {0x3f80, 0x4049, 0xbf00, 0x7f80}; /* 1, 3.140625, -0.5, inf */
    const int64_t i64[2] = {-5, INT64_MAX};
    const uint8_t u8[3] = {1, 2, 255}; /* 3 bytes: the next tensor starts unaligned */
    const wt ts[] = {
        {"f32", "F32", 2, {2, 3}, f32, sizeof f32}, {"u8", "U8", 1, {3}, u8, sizeof u8},
        {"f16", "F16", 2, {2, 2}, f16, sizeof f16}, {"bf16", "BF16", 3, {1, 2, 2}, bf16, sizeof bf16},
        {"pos", "I64", 2, {1, 2}, i64, sizeof i64},
    };
    gb b = {0};
    write_st(&b, ts, 5, NULL);
    st_file *f = NULL;
    uint8_t *copy;
    wgml_error err;
    if (open_bytes(b.p, b.n, NAME, &f, &copy, &err)) fail_msg("%s", err.message);
    const st_tensor *t = st_find(f, "f32");
    assert_int_equal(t->n_elements, 6);
    for (int i = 0; i < 6; i++) {
        float v;
        memcpy(&v, (const uint8_t *)t->data + 4 * i, 4);
        assert_memory_equal(&v, &f32[i], 4);
    }
    t = st_find(f, "f16");
    assert_int_equal(t->offset, 27); /* 24 + 3: unaligned, read with memcpy */
    const float f16_want[4] = {1.0f, -2.0f, 0.333251953125f, 65504.0f};
    for (int i = 0; i < 4; i++) {
        uint16_t h;
        memcpy(&h, (const uint8_t *)t->data + 2 * i, 2);
        assert_true(wgml_f16_to_f32(h) == f16_want[i]);
    }
    t = st_find(f, "bf16");
    assert_int_equal(t->rank, 3);
    const float bf16_want[3] = {1.0f, 3.140625f, -0.5f};
    for (int i = 0; i < 4; i++) {
        uint16_t h;
        memcpy(&h, (const uint8_t *)t->data + 2 * i, 2);
        if (i < 3)
            assert_true(wgml_bf16_to_f32(h) == bf16_want[i]);
        else
            assert_true(wgml_bf16_to_f32(h) > 3e38f);
    }
    t = st_find(f, "pos");
    int64_t v;
    memcpy(&v, (const uint8_t *)t->data + 8, 8);
    assert_true(v == INT64_MAX);
    assert_int_equal(st_dtype_to_wgml(t->dtype), WGML_I64);
    st_close(f);
    free(copy);
    gb_free(&b);
}

static void test_scalar_empty_padding(void **state) {
    (void)state;
    uint8_t *copy;
    /* a 0-d tensor: shape [], 1 element */
    st_file *f = good("{'s':{'dtype':'F32','shape':[],'data_offsets':[0,4]}}", 4, &copy);
    const st_tensor *t = st_find(f, "s");
    assert_int_equal(t->rank, 0);
    assert_int_equal(t->n_elements, 1);
    assert_int_equal(t->size, 4);
    st_close(f);
    free(copy);
    /* 0-element tensors (begin == end) at the start, between, at the end, and alone */
    f = good("{'e0':{'dtype':'F16','shape':[0,5],'data_offsets':[0,0]},"
             "'a':{'dtype':'U8','shape':[2],'data_offsets':[0,2]},"
             "'e1':{'dtype':'F32','shape':[3,0],'data_offsets':[2,2]},"
             "'b':{'dtype':'U8','shape':[1],'data_offsets':[2,3]},"
             "'e2':{'dtype':'I64','shape':[0],'data_offsets':[3,3]}}",
             3, &copy);
    assert_int_equal(st_n_tensors(f), 5);
    t = st_find(f, "e0");
    assert_int_equal(t->n_elements, 0);
    assert_int_equal(t->size, 0);
    assert_int_equal(t->rank, 2);
    assert_non_null(t->data);
    assert_int_equal(st_find(f, "e2")->offset, 3);
    st_close(f);
    free(copy);
    good_close("{'e':{'dtype':'F32','shape':[0],'data_offsets':[0,0]}}", 0);
    good_close("{'e':{'dtype':'F32','shape':[1,0,1000000000000],'data_offsets':[0,0]}}", 0); /* 0 wins */
    /* no tensors at all */
    f = good("{}", 0, &copy);
    assert_int_equal(st_n_tensors(f), 0);
    assert_null(st_find(f, "x"));
    assert_null(st_tensor_at(f, 0));
    st_close(f);
    free(copy);
    good_close("{'__metadata__':{'a':'b'}}", 0);
    good_close("{'__metadata__':null}", 0);
    /* padding: spaces (as the writer pads), other whitespace around anything */
    good_close("{'x':{'dtype':'U8','shape':[1],'data_offsets':[0,1]}}                       ", 1);
    good_close(" \t\r\n{ 'x' : { 'dtype' : 'U8' , 'shape' : [ 1 ] , 'data_offsets' : [ 0 , 1 ] } }\n", 1);
    /* fields in any order; one the format does not define is skipped, whatever its value */
    good_close("{'x':{'data_offsets':[0,2],'shape':[2],'dtype':'I8'}}", 2);
    good_close("{'x':{'dtype':'I8','extra':{'a':[1,2.5e-3,-0,true,false,null,'s\\u00e9']},'shape':[2],"
               "'data_offsets':[0,2]}}",
               2);
    /* names with escapes and non-ASCII */
    f = good("{'a\\\"b\\\\c\\u00e9\\ud83d\\ude00':{'dtype':'U8','shape':[1],'data_offsets':[0,1]},"
             "'\xc3\xa9t\xc3\xa9':{'dtype':'U8','shape':[1],'data_offsets':[1,2]},"
             "'':{'dtype':'U8','shape':[],'data_offsets':[2,3]}}",
             3, &copy);
    assert_non_null(st_find(f, "a\"b\\c\xc3\xa9\xf0\x9f\x98\x80"));
    assert_non_null(st_find(f, "\xc3\xa9t\xc3\xa9"));
    assert_non_null(st_find(f, ""));
    st_close(f);
    free(copy);
    /* big offsets and dims near the limits that still add up */
    good_close("{'x':{'dtype':'U8','shape':[1,1,1,1,1,1,1,2],'data_offsets':[0,2]}}", 2);
}

static void test_metadata(void **state) {
    (void)state;
    uint8_t *copy;
    st_file *f = good("{'__metadata__':{'format':'pt','note':'a \\\"q\\\" \\u00e9\\ud83d\\ude00\\n',"
                      "'nul':'x\\u0000y','empty':''},"
                      "'w':{'dtype':'F32','shape':[1],'data_offsets':[0,4]}}",
                      4, &copy);
    size_t len = 99;
    assert_string_equal(st_metadata(f, "format", &len), "pt");
    assert_int_equal(len, 2);
    assert_string_equal(st_metadata(f, "note", NULL), "a \"q\" \xc3\xa9\xf0\x9f\x98\x80\n");
    const char *v = st_metadata(f, "nul", &len);
    assert_int_equal(len, 3);
    assert_memory_equal(v, "x\0y", 3);
    assert_string_equal(st_metadata(f, "empty", &len), "");
    assert_int_equal(len, 0);
    assert_null(st_metadata(f, "absent", &len));
    assert_int_equal(len, 0);
    assert_null(st_metadata(f, NULL, NULL));
    assert_int_equal(st_n_metadata(f, 0), 4);
    assert_int_equal(st_n_metadata(f, 1), 0);
    const char *value;
    assert_string_equal(st_metadata_at(f, 0, 0, &value, &len), "format");
    assert_string_equal(value, "pt");
    assert_string_equal(st_metadata_at(f, 0, 3, &value, &len), "empty");
    assert_null(st_metadata_at(f, 0, 4, &value, &len));
    assert_null(st_metadata_at(f, 1, 0, &value, &len));
    assert_int_equal(st_n_tensors(f), 1);
    st_close(f);
    free(copy);
    /* __metadata__ after the tensors, and with the writer's layout */
    f = good("{'w':{'dtype':'F32','shape':[1],'data_offsets':[0,4]},'__metadata__':{'k':'v'}}", 4, &copy);
    assert_string_equal(st_metadata(f, "k", NULL), "v");
    assert_null(st_find(f, "__metadata__"));
    st_close(f);
    free(copy);
    const wt ts[] = {{"a", "F32", 1, {2}, NULL, 8}};
    gb b = {0};
    write_st(&b, ts, 1, "{\"format\":\"pt\"}");
    st_file *g = NULL;
    wgml_error err;
    if (open_bytes(b.p, b.n, NAME, &g, &copy, &err)) fail_msg("%s", err.message);
    assert_string_equal(st_metadata(g, "format", NULL), "pt");
    st_close(g);
    free(copy);
    gb_free(&b);
}

/* 20,000 tensors listed in an order other than their offsets' */
static void test_many(void **state) {
    (void)state;
    enum { N = 20000 };
    size_t *size = malloc(N * sizeof *size), *off = malloc(N * sizeof *off);
    int *perm = malloc(N * sizeof *perm);
    assert_true(size && off && perm);
    tu_rng r = {7};
    size_t total = 0;
    for (int i = 0; i < N; i++) {
        size[i] = (size_t)(tu_next(&r) % 5);
        off[i] = total;
        total += size[i] * 2;
        perm[i] = i;
    }
    for (int i = N - 1; i > 0; i--) {
        int j = (int)(tu_next(&r) % (uint64_t)(i + 1)), x = perm[i];
        perm[i] = perm[j];
        perm[j] = x;
    }
    gb h = {0};
    gb_text(&h, "{");
    for (int k = 0; k < N; k++) {
        int i = perm[k];
        gb_textf(&h, "%s'n%05d':{'dtype':'BF16','shape':[%zu],'data_offsets':[%zu,%zu]}", k ? "," : "", i, size[i],
                 off[i], off[i] + 2 * size[i]);
    }
    gb_text(&h, "}");
    gb_u8(&h, 0);
    uint8_t *copy;
    st_file *f = good((const char *)h.p, total, &copy);
    assert_int_equal(st_n_tensors(f), N);
    for (int k = 0; k < N; k++) {
        const st_tensor *t = st_tensor_at(f, k);
        char nm[16];
        snprintf(nm, sizeof nm, "n%05d", perm[k]);
        assert_string_equal(t->name, nm);
        assert_ptr_equal(st_find(f, nm), t);
        assert_int_equal(t->offset, off[perm[k]]);
        assert_int_equal(t->n_elements, size[perm[k]]);
    }
    st_close(f);
    free(copy);
    gb_free(&h);
    free(size);
    free(off);
    free(perm);
}

/* ---- hostile files ---- */

static void test_truncated(void **state) {
    (void)state;
    const wt ts[] = {{"a", "F32", 2, {2, 2}, NULL, 16}, {"b", "F16", 1, {3}, NULL, 6}, {"c", "U8", 0, {0}, NULL, 1}};
    gb b = {0};
    write_st(&b, ts, 3, "{\"format\":\"pt\"}");
    for (size_t cut = 0; cut < b.n; cut++) {
        st_file *f = NULL;
        uint8_t *copy;
        wgml_error err;
        char what[32];
        snprintf(what, sizeof what, "cut at %zu", cut);
        wgml_status st = open_bytes(b.p, cut, NAME, &f, &copy, &err);
        CHECK_ERR(what, st, &err, WGML_ERR_FORMAT, NAME, NULL, NULL);
        uint64_t hn;
        memcpy(&hn, b.p, 8);
        if (cut < 8)
            assert_non_null(strstr(err.message, "too small"));
        else if (cut < 8 + hn)
            assert_non_null(strstr(err.message, "runs past the end of the file"));
        else
            assert_non_null(strstr(err.message, "tensor"));
    }
    /* one byte too many */
    gb_u8(&b, 0);
    st_file *f = NULL;
    uint8_t *copy;
    wgml_error err;
    wgml_status st = open_bytes(b.p, b.n, NAME, &f, &copy, &err);
    CHECK_ERR("one byte more", st, &err, WGML_ERR_FORMAT, NAME, "bytes [23, 24) at the end of the data section", NULL);
    gb_free(&b);
}

static void test_header_length(void **state) {
    (void)state;
    const char *hdr = "{'x':{'dtype':'U8','shape':[1],'data_offsets':[0,1]}}";
    const uint64_t hn = strlen(hdr);
    gb b = {0};
    raw(&b, hdr, NULL, 1); /* 8 + hn + 1 bytes */
    const struct {
        uint64_t n;
        const char *want;
    } lies[] = {
        {0, "the header length is 0"},
        {100000001, "the header length 100000001 is over the limit of 100000000 bytes"},
        {UINT64_MAX, "is over the limit"},
        {hn + 2, "runs past the end of the file"},
        {1000, "runs past the end of the file"},
        {hn + 1, "run past the data section (0 bytes)"}, /* the data byte read as header */
        {hn - 1, "the header is not valid JSON"},        /* the last '}' left out */
        {1, "the header is not valid JSON"},
    };
    for (size_t i = 0; i < sizeof lies / sizeof lies[0]; i++) {
        put_u64_at(b.p, 0, lies[i].n);
        st_file *f = NULL;
        uint8_t *copy;
        wgml_error err;
        char what[48];
        snprintf(what, sizeof what, "header length %llu", (unsigned long long)lies[i].n);
        wgml_status st = open_bytes(b.p, b.n, NAME, &f, &copy, &err);
        CHECK_ERR(what, st, &err, WGML_ERR_FORMAT, NAME, lies[i].want, NULL);
    }
    put_u64_at(b.p, 0, hn);
    st_file *f = NULL;
    uint8_t *copy;
    wgml_error err;
    assert_int_equal(open_bytes(b.p, b.n, NAME, &f, &copy, &err), WGML_OK);
    st_close(f);
    free(copy);
    gb_free(&b);
    /* the JSON itself is whitespace only */
    bad("blank header", "        ", 0, WGML_ERR_FORMAT, "the header is not a JSON object", NULL);
}

static void test_bad_json(void **state) {
    (void)state;
    static const struct {
        const char *h;
        const char *want;
    } cases[] = {
        {"[]", "not a JSON object"},
        {"'x'", "not a JSON object"},
        {"1", "not a JSON object"},
        {"{", "a string expected"},
        {"{'x'", "':' expected"},
        {"{'x':", "tensor 'x': its entry is not an object"},
        {"{}{}", "text after the object"},
        {"{} x", "text after the object"},
        {"{}\x01", "text after the object"},
        {"{,}", "a string expected"},
        {"{'x':{'dtype':'U8','shape':[1],'data_offsets':[0,1]},}", "a string expected"},
        {"{'x':{'dtype':'U8','shape':[1],'data_offsets':[0,1]}", "',' or '}' expected"},
        {"{'x':{'dtype':'U8','shape':[1],'data_offsets':[0,1]} 'y'", "',' or '}' expected"},
        {"{'x':{'dtype':'U8' 'shape':[1],'data_offsets':[0,1]}}", "',' or '}' expected"},
        {"{'x':{'dtype':'U8','shape':[1 2],'data_offsets':[0,1]}}", "',' or ']' expected"},
        {"{'x\x01':{}}", "a control character in a string"},
        {"{'x\\q':{}}", "an unknown escape"},
        {"{'x\\u12':{}}", "a bad \\u escape"},
        {"{'x\\u12G4':{}}", "a bad \\u escape"},
        {"{'\\udc00':{}}", "a lone low surrogate"},
        {"{'\\ud800':{}}", "a lone high surrogate"},
        {"{'\\ud800\\u0041':{}}", "a high surrogate without its low half"},
        {"{'x", "an unterminated string"},
        {"{'x\\", "an unterminated escape"},
        {"{'x':{'dtype':'U8','shape':[1],'data_offsets':[0,1],'y':tru}}", "a value expected"},
        {"{'x':{'dtype':'U8','shape':[1],'data_offsets':[0,1],'y':-}}", "a bad number"},
        {"{'x':{'dtype':'U8','shape':[1],'data_offsets':[0,1],'y':1.}}", "a bad number"},
        {"{'x':{'dtype':'U8','shape':[1],'data_offsets':[0,1],'y':1e}}", "a bad number"},
        {"{'x':{'dtype':'U8','shape':[1],'data_offsets':[0,1],'y':[1,]}}", "a value expected"},
        {"{'x':{'dtype':'U8','shape':[1],'data_offsets':[0,1],'y':{'a'}}}", "':' expected"},
        {"{'x':{'dtype':'U8','shape':[1],'data_offsets':[0,1],'y':", "the text ends where a value should be"},
        {"{'__metadata__':{'a':'b',}}", "a string expected"},
        {"{'__metadata__':{'a' 'b'}}", "':' expected"},
        {"{'__metadata__':{'a':'b' 'c':'d'}}", "',' or '}' expected"},
        /* invalid UTF-8: a stray continuation, an overlong form, a surrogate, past U+10FFFF, cut short */
        {"{'\x80':{}}", "not valid UTF-8 (at byte 2)"},
        {"{'\xc0\x80':{}}", "not valid UTF-8"},
        {"{'\xe0\x80\x80':{}}", "not valid UTF-8"},
        {"{'\xed\xa0\x80':{}}", "not valid UTF-8"},
        {"{'\xf4\x90\x80\x80':{}}", "not valid UTF-8"},
        {"{'\xf0\x9f\x98':{}}", "not valid UTF-8"},
        {"{}\xc3", "not valid UTF-8"},
        {"{'\xff':{}}", "not valid UTF-8"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char what[32];
        snprintf(what, sizeof what, "json case %zu", i);
        bad(what, cases[i].h, 1, WGML_ERR_FORMAT, cases[i].want, NULL);
    }
    /* nesting in a skipped field: 64 levels refused, 60 fine */
    gb h = {0};
    for (int depth = 60; depth <= 70; depth += 10) {
        h.n = 0;
        gb_text(&h, "{'x':{'dtype':'U8','shape':[1],'data_offsets':[0,1],'y':");
        for (int k = 0; k < depth; k++)
            gb_text(&h, k % 2 ? "[" : "{'a':");
        gb_text(&h, "0");
        for (int k = depth - 1; k >= 0; k--)
            gb_text(&h, k % 2 ? "]" : "}");
        gb_text(&h, "}}");
        gb_u8(&h, 0);
        if (depth == 60)
            good_close((const char *)h.p, 1);
        else
            bad("deep", (const char *)h.p, 1, WGML_ERR_FORMAT, "nested too deeply", NULL);
    }
    gb_free(&h);
}

static void test_bad_entries(void **state) {
    (void)state;
    static const struct {
        const char *h;
        wgml_status code;
        const char *want;
    } cases[] = {
        {"{'x':[]}", WGML_ERR_FORMAT, "tensor 'x': its entry is not an object"},
        {"{'x':'F32'}", WGML_ERR_FORMAT, "tensor 'x': its entry is not an object"},
        {"{'x':null}", WGML_ERR_FORMAT, "tensor 'x': its entry is not an object"},
        {"{'x':{}}", WGML_ERR_FORMAT, "tensor 'x': no dtype"},
        {"{'x':{'dtype':'U8','data_offsets':[0,1]}}", WGML_ERR_FORMAT, "tensor 'x': no shape"},
        {"{'x':{'dtype':'U8','shape':[1]}}", WGML_ERR_FORMAT, "tensor 'x': no data_offsets"},
        {"{'x':{'dtype':8,'shape':[1],'data_offsets':[0,1]}}", WGML_ERR_FORMAT, "tensor 'x': dtype is not a string"},
        {"{'x':{'dtype':'F33','shape':[1],'data_offsets':[0,1]}}", WGML_ERR_FORMAT, "tensor 'x': unknown dtype 'F33'"},
        {"{'x':{'dtype':'f32','shape':[1],'data_offsets':[0,1]}}", WGML_ERR_FORMAT, "unknown dtype 'f32'"},
        {"{'x':{'dtype':'float32','shape':[1],'data_offsets':[0,1]}}", WGML_ERR_FORMAT, "unknown dtype"},
        {"{'x':{'dtype':'Q4_K','shape':[1],'data_offsets':[0,1]}}", WGML_ERR_FORMAT, "unknown dtype 'Q4_K'"},
        {"{'x':{'dtype':'F4','shape':[2],'data_offsets':[0,1]}}", WGML_ERR_UNSUPPORTED, "tensor 'x': dtype F4"},
        {"{'x':{'dtype':'U8','shape':1,'data_offsets':[0,1]}}", WGML_ERR_FORMAT, "tensor 'x': shape is not a list"},
        {"{'x':{'dtype':'U8','shape':{},'data_offsets':[0,1]}}", WGML_ERR_FORMAT, "shape is not a list"},
        {"{'x':{'dtype':'U8','shape':[-1],'data_offsets':[0,1]}}", WGML_ERR_FORMAT, "tensor 'x': shape[0] is negative"},
        {"{'x':{'dtype':'U8','shape':[1,1.0],'data_offsets':[0,1]}}", WGML_ERR_FORMAT, "shape[1] is not an integer"},
        {"{'x':{'dtype':'U8','shape':[1e0],'data_offsets':[0,1]}}", WGML_ERR_FORMAT, "shape[0] is not an integer"},
        {"{'x':{'dtype':'U8','shape':['1'],'data_offsets':[0,1]}}", WGML_ERR_FORMAT, "shape[0] is not an integer"},
        {"{'x':{'dtype':'U8','shape':[null],'data_offsets':[0,1]}}", WGML_ERR_FORMAT, "shape[0] is not an integer"},
        {"{'x':{'dtype':'U8','shape':[01],'data_offsets':[0,1]}}", WGML_ERR_FORMAT, "shape[0] is not an integer"},
        {"{'x':{'dtype':'U8','shape':[1,1,1,1,1,1,1,1,1],'data_offsets':[0,1]}}", WGML_ERR_FORMAT,
         "shape has more than 8 dimensions"},
        {"{'x':{'dtype':'U8','shape':[9223372036854775808],'data_offsets':[0,1]}}", WGML_ERR_FORMAT,
         "shape[0] is too large"},
        {"{'x':{'dtype':'U8','shape':[18446744073709551616],'data_offsets':[0,1]}}", WGML_ERR_FORMAT,
         "shape[0] is too large"},
        {"{'x':{'dtype':'U8','shape':[1],'data_offsets':0}}", WGML_ERR_FORMAT,
         "data_offsets is not a list of two integers"},
        {"{'x':{'dtype':'U8','shape':[1],'data_offsets':[]}}", WGML_ERR_FORMAT, "data_offsets[0] is not an integer"},
        {"{'x':{'dtype':'U8','shape':[1],'data_offsets':[1]}}", WGML_ERR_FORMAT, "data_offsets is not a list of two"},
        {"{'x':{'dtype':'U8','shape':[1],'data_offsets':[0,1,2]}}", WGML_ERR_FORMAT,
         "data_offsets is not a list of two"},
        {"{'x':{'dtype':'U8','shape':[1],'data_offsets':[-1,1]}}", WGML_ERR_FORMAT, "data_offsets[0] is negative"},
        {"{'x':{'dtype':'U8','shape':[1],'data_offsets':[0,1.5]}}", WGML_ERR_FORMAT,
         "data_offsets[1] is not an integer"},
        {"{'x':{'dtype':'U8','shape':[1],'data_offsets':[0,'1']}}", WGML_ERR_FORMAT,
         "data_offsets[1] is not an integer"},
        {"{'x':{'dtype':'U8','shape':[1],'data_offsets':[1,0]}}", WGML_ERR_FORMAT,
         "tensor 'x': data_offsets [1, 0) begin after they end"},
        {"{'x':{'dtype':'U8','shape':[1],'data_offsets':[0,18446744073709551616]}}", WGML_ERR_FORMAT,
         "data_offsets[1] is too large"},
        {"{'x':{'dtype':'U8','dtype':'U8','shape':[1],'data_offsets':[0,1]}}", WGML_ERR_FORMAT, "two dtype fields"},
        {"{'x':{'dtype':'U8','shape':[1],'shape':[1],'data_offsets':[0,1]}}", WGML_ERR_FORMAT, "two shape fields"},
        {"{'x':{'dtype':'U8','shape':[1],'data_offsets':[0,1],'data_offsets':[0,1]}}", WGML_ERR_FORMAT,
         "two data_offsets fields"},
        /* duplicates and NULs */
        {"{'x':{'dtype':'U8','shape':[1],'data_offsets':[0,1]},'x':{'dtype':'U8','shape':[0],'data_offsets':[1,1]}}",
         WGML_ERR_FORMAT, "duplicate tensor name 'x'"},
        {"{'a\\u0000b':{'dtype':'U8','shape':[1],'data_offsets':[0,1]}}", WGML_ERR_FORMAT, "tensor name holds a NUL"},
        {"{'__metadata__':{},'__metadata__':{},'x':{'dtype':'U8','shape':[1],'data_offsets':[0,1]}}", WGML_ERR_FORMAT,
         "two __metadata__ entries"},
        {"{'__metadata__':{'k':'1','k':'2'},'x':{'dtype':'U8','shape':[1],'data_offsets':[0,1]}}", WGML_ERR_FORMAT,
         "duplicate __metadata__ key 'k'"},
        {"{'__metadata__':{'k':1},'x':{'dtype':'U8','shape':[1],'data_offsets':[0,1]}}", WGML_ERR_FORMAT,
         "__metadata__ key 'k': the value is not a string"},
        {"{'__metadata__':{'k':null},'x':{'dtype':'U8','shape':[1],'data_offsets':[0,1]}}", WGML_ERR_FORMAT,
         "the value is not a string"},
        {"{'__metadata__':['k'],'x':{'dtype':'U8','shape':[1],'data_offsets':[0,1]}}", WGML_ERR_FORMAT,
         "__metadata__ is not an object of strings"},
        {"{'__metadata__':'pt','x':{'dtype':'U8','shape':[1],'data_offsets':[0,1]}}", WGML_ERR_FORMAT,
         "__metadata__ is not an object"},
        {"{'__metadata__':{'k\\u0000':'v'},'x':{'dtype':'U8','shape':[1],'data_offsets':[0,1]}}", WGML_ERR_FORMAT,
         "__metadata__ key holds a NUL"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char what[32];
        snprintf(what, sizeof what, "entry case %zu", i);
        bad(what, cases[i].h, 1, cases[i].code, cases[i].want, NULL);
    }
}

static void test_sizes_and_ranges(void **state) {
    (void)state;
    /* wrong byte counts */
    bad("short", "{'w':{'dtype':'F32','shape':[2,2],'data_offsets':[0,12]}}", 12, WGML_ERR_FORMAT,
        "tensor 'w': shape [2, 2] of F32 is 16 bytes, but data_offsets [0, 12) hold 12", NULL);
    bad("long", "{'w':{'dtype':'F16','shape':[3],'data_offsets':[0,8]}}", 8, WGML_ERR_FORMAT,
        "shape [3] of F16 is 6 bytes, but data_offsets [0, 8) hold 8", NULL);
    bad("scalar", "{'w':{'dtype':'I64','shape':[],'data_offsets':[0,4]}}", 4, WGML_ERR_FORMAT,
        "shape [] of I64 is 8 bytes", NULL);
    bad("empty with bytes", "{'w':{'dtype':'F32','shape':[0],'data_offsets':[0,4]}}", 4, WGML_ERR_FORMAT,
        "is 0 bytes, but data_offsets [0, 4) hold 4", NULL);
    /* shapes whose products overflow: elements past 2^63, bytes past 2^64, and one that wraps to the right count */
    bad("elements overflow", "{'w':{'dtype':'U8','shape':[4294967296,4294967296],'data_offsets':[0,0]}}", 0,
        WGML_ERR_FORMAT, "tensor 'w': shape [4294967296, 4294967296] has more than 2^63 elements", NULL);
    bad("bytes overflow", "{'w':{'dtype':'F64','shape':[4611686018427387904],'data_offsets':[0,0]}}", 0,
        WGML_ERR_FORMAT, "shape [4611686018427387904] of F64 takes more than 2^64 bytes", NULL);
    /* 2^62 * 4 bytes = 2^64: wraps to 0 in 64 bits, must not match [0, 0) */
    bad("wraps to 0", "{'w':{'dtype':'F32','shape':[4611686018427387904],'data_offsets':[0,0]}}", 0, WGML_ERR_FORMAT,
        "takes more than 2^64 bytes", NULL);
    /* 2^61 + 1 F64 elements = 2^64 + 8 bytes: wraps to 8 */
    bad("wraps to 8", "{'w':{'dtype':'F64','shape':[2305843009213693953],'data_offsets':[0,8]}}", 8, WGML_ERR_FORMAT,
        "takes more than 2^64 bytes", NULL);
    bad("overflow beside a 0", "{'w':{'dtype':'U8','shape':[4294967296,0,4294967296],'data_offsets':[0,0]}}", 0,
        WGML_ERR_FORMAT, "shape [4294967296, 0, 4294967296] has more than 2^63 elements", NULL);
    bad("dims overflow", "{'w':{'dtype':'U8','shape':[3,3,3,3,3,3,3,9223372036854775807],'data_offsets':[0,0]}}", 0,
        WGML_ERR_FORMAT, "more than 2^63 elements", NULL);
    /* ranges beyond the data section */
    bad("past end", "{'w':{'dtype':'U8','shape':[4],'data_offsets':[0,4]}}", 3, WGML_ERR_FORMAT,
        "tensor 'w': data_offsets [0, 4) run past the data section (3 bytes)", NULL);
    bad("far past end", "{'w':{'dtype':'U8','shape':[1],'data_offsets':[18446744073709551614,18446744073709551615]}}",
        3, WGML_ERR_FORMAT, "run past the data section", NULL);
    bad("empty past end", "{'w':{'dtype':'U8','shape':[0],'data_offsets':[5,5]}}", 3, WGML_ERR_FORMAT,
        "data_offsets [5, 5) run past the data section", NULL);
}

static void test_tiling(void **state) {
    (void)state;
    bad("overlap",
        "{'a':{'dtype':'U8','shape':[8],'data_offsets':[0,8]},'b':{'dtype':'U8','shape':[8],'data_offsets':[4,12]}}",
        12, WGML_ERR_FORMAT, "tensor 'b': data_offsets [4, 12) overlap tensor 'a' [0, 8)", NULL);
    bad("overlap listed first",
        "{'b':{'dtype':'U8','shape':[8],'data_offsets':[4,12]},'a':{'dtype':'U8','shape':[8],'data_offsets':[0,8]}}",
        12, WGML_ERR_FORMAT, "tensor 'b': data_offsets [4, 12) overlap tensor 'a' [0, 8)", NULL);
    bad("same range",
        "{'a':{'dtype':'U8','shape':[4],'data_offsets':[0,4]},'b':{'dtype':'I32','shape':[1],'data_offsets':[0,4]}}", 4,
        WGML_ERR_FORMAT, "tensor 'b': data_offsets [0, 4) overlap tensor 'a' [0, 4)", NULL);
    bad("inside",
        "{'a':{'dtype':'U8','shape':[8],'data_offsets':[0,8]},'b':{'dtype':'U8','shape':[2],'data_offsets':[2,4]}}", 8,
        WGML_ERR_FORMAT, "tensor 'b': data_offsets [2, 4) overlap tensor 'a' [0, 8)", NULL);
    bad("empty inside",
        "{'a':{'dtype':'U8','shape':[8],'data_offsets':[0,8]},'e':{'dtype':'U8','shape':[0],'data_offsets':[3,3]}}", 8,
        WGML_ERR_FORMAT, "tensor 'e': data_offsets [3, 3) overlap tensor 'a' [0, 8)", NULL);
    bad("hole",
        "{'a':{'dtype':'U8','shape':[4],'data_offsets':[0,4]},'b':{'dtype':'U8','shape':[4],'data_offsets':[6,10]}}",
        10, WGML_ERR_FORMAT, "bytes [4, 6) of the data section belong to no tensor (a hole before tensor 'b')", NULL);
    bad("hole at start", "{'a':{'dtype':'U8','shape':[4],'data_offsets':[2,6]}}", 6, WGML_ERR_FORMAT,
        "bytes [0, 2) of the data section belong to no tensor", NULL);
    bad("bytes after", "{'a':{'dtype':'U8','shape':[4],'data_offsets':[0,4]}}", 9, WGML_ERR_FORMAT,
        "bytes [4, 9) at the end of the data section belong to no tensor", NULL);
    bad("no tensors, bytes", "{}", 3, WGML_ERR_FORMAT, "bytes [0, 3) at the end of the data section", NULL);
    bad("metadata only, bytes", "{'__metadata__':{}}", 1, WGML_ERR_FORMAT, "bytes [0, 1) at the end", NULL);
    /* equal empty ranges share an offset without overlapping */
    good_close(
        "{'e':{'dtype':'U8','shape':[0],'data_offsets':[4,4]},'a':{'dtype':'U8','shape':[4],'data_offsets':[0,4]},"
        "'f':{'dtype':'F32','shape':[0,2],'data_offsets':[4,4]},'b':{'dtype':'U8','shape':[1],'data_offsets':[4,5]}}",
        5);
}

/* More tensors than ST_MAX_TENSORS, all empty (the header alone is ~60 MB). */
static void test_too_many(void **state) {
    (void)state;
    gb h = {0};
    gb_text(&h, "{");
    for (int i = 0; i <= ST_MAX_TENSORS; i++)
        gb_textf(&h, "%s\"%d\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0]}", i ? "," : "", i);
    gb_text(&h, "}");
    gb b = {0};
    gb_u64(&b, h.n);
    gb_put(&b, h.p, h.n);
    gb_free(&h);
    st_file *f = NULL;
    wgml_error err;
    wgml_status st = st_open_memory(b.p, b.n, NAME, &f, &err);
    CHECK_ERR("too many", st, &err, WGML_ERR_FORMAT, NAME, "more than 1048576 tensors", NULL);
    gb_free(&b);
}

/* Random byte flips in a valid file: refused with a named message or accepted, never a crash. */
static void test_flips(void **state) {
    (void)state;
    const wt ts[] = {
        {"a.weight", "F32", 2, {2, 2}, NULL, 16}, {"a.bias", "F16", 1, {3}, NULL, 6}, {"c", "U8", 0, {0}, NULL, 1}};
    gb b = {0};
    write_st(&b, ts, 3, "{\"format\":\"pt\",\"k\":\"\\u00e9\"}");
    uint64_t hn;
    memcpy(&hn, b.p, 8);
    tu_rng r = {42};
    uint8_t *m = malloc(b.n);
    assert_non_null(m);
    int accepted = 0;
    for (int it = 0; it < 3000; it++) {
        memcpy(m, b.p, b.n);
        int flips = 1 + (int)(tu_next(&r) % 3);
        for (int k = 0; k < flips; k++) {
            size_t at = 8 + (size_t)(tu_next(&r) % hn);
            m[at] = (uint8_t)(tu_next(&r) & 0xff);
        }
        st_file *f = NULL;
        uint8_t *copy;
        wgml_error err;
        wgml_status st = open_bytes(m, b.n, NAME, &f, &copy, &err);
        if (st) {
            assert_true(st == WGML_ERR_FORMAT || st == WGML_ERR_UNSUPPORTED);
            assert_non_null(strstr(err.message, NAME));
            continue;
        }
        accepted++;
        for (int64_t i = 0; i < st_n_tensors(f); i++) {
            const st_tensor *t = st_tensor_at(f, i);
            assert_ptr_equal(st_find(f, t->name), t);
            assert_true((const uint8_t *)t->data >= copy + 8 + hn && (const uint8_t *)t->data + t->size <= copy + b.n);
        }
        st_close(f);
        free(copy);
    }
    assert_true(accepted > 0); /* flips in padding and names keep it valid */
    free(m);
    gb_free(&b);
}

static void test_alloc_fail(void **state) {
    (void)state;
    const wt ts[] = {{"a", "F32", 2, {2, 2}, NULL, 16}, {"b", "F16", 1, {3}, NULL, 6}, {"c", "U8", 0, {0}, NULL, 1}};
    gb b = {0};
    write_st(&b, ts, 3, "{\"format\":\"pt\",\"x\":\"y\"}");
    long live = wgml_alloc_live();
    for (long k = 0;; k++) {
        st_file *f = NULL;
        wgml_error err;
        wgml_alloc_fail_after(k);
        wgml_status st = st_open_memory(b.p, b.n, NAME, &f, &err);
        wgml_alloc_fail_after(-1);
        if (st == WGML_OK) {
            assert_int_equal(st_n_tensors(f), 3);
            st_close(f);
            assert_int_equal(wgml_alloc_live(), live);
            break;
        }
        CHECK_ERR("out of memory", st, &err, WGML_ERR_OUT_OF_MEMORY, NAME, NULL, NULL);
        assert_null(f);
        assert_int_equal(wgml_alloc_live(), live);
        assert_true(k < 100);
    }
    gb_free(&b);
}

/* ---- files, sets, folders ---- */

static void put_file(const char *dir, const char *name, const void *p, size_t n) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    assert_int_equal(tu_write_file(path, p, n), 0);
}
static void put_text(const char *dir, const char *name, const char *text) {
    char buf[4096];
    size_t n = strlen(text);
    assert_true(n < sizeof buf);
    for (size_t i = 0; i <= n; i++)
        buf[i] = text[i] == '\'' ? '"' : text[i];
    put_file(dir, name, buf, n);
}
static const char *new_dir(const char *name) {
    const char *d = tu_tmp_path(name);
    assert_true(mkdir(d, 0700) == 0 || errno == EEXIST);
    return d;
}

static void test_open_files(void **state) {
    (void)state;
    const char *dir = new_dir("single");
    const wt ts[] = {{"w", "F32", 1, {2}, NULL, 8}};
    gb b = {0};
    write_st(&b, ts, 1, "{\"format\":\"pt\"}");
    put_file(dir, "x.safetensors", b.p, b.n);
    char path[1024];
    snprintf(path, sizeof path, "%s/x.safetensors", dir);
    st_file *f = NULL;
    wgml_error err;
    if (st_open(path, &f, &err)) fail_msg("%s", err.message);
    assert_string_equal(st_name(f), path);
    assert_int_equal(st_n_files(f), 1);
    assert_string_equal(st_file_path(f, 0), path);
    const st_tensor *t = st_find(f, "w");
    assert_string_equal(t->file, path);
    assert_memory_equal(t->data, b.p + b.n - 8, 8);
    st_release(f, t->data, t->size); /* pages come back from the file */
    assert_memory_equal(t->data, b.p + b.n - 8, 8);
    st_release(f, NULL, 0);
    assert_string_equal(st_metadata(f, "format", NULL), "pt");
    st_close(f);
    /* missing, too small, a damaged file on disk */
    snprintf(path, sizeof path, "%s/none.safetensors", dir);
    wgml_status st = st_open(path, &f, &err);
    CHECK_ERR("missing", st, &err, WGML_ERR_IO, path, "cannot open", NULL);
    put_file(dir, "small.safetensors", "abc", 3);
    snprintf(path, sizeof path, "%s/small.safetensors", dir);
    st = st_open(path, &f, &err);
    CHECK_ERR("small", st, &err, WGML_ERR_FORMAT, path, "file of 3 bytes is too small to be a safetensors file", NULL);
    put_file(dir, "cut.safetensors", b.p, b.n - 1);
    snprintf(path, sizeof path, "%s/cut.safetensors", dir);
    st = st_open(path, &f, &err);
    CHECK_ERR("cut", st, &err, WGML_ERR_FORMAT, path, "tensor 'w'", NULL);
    assert_null(f);
    gb_free(&b);
}

static void test_folder(void **state) {
    (void)state;
    const wt ts[] = {{"w", "F32", 1, {2}, NULL, 8}};
    gb b = {0};
    write_st(&b, ts, 1, NULL);
    const char *dir = new_dir("folder1");
    put_file(dir, "model.safetensors", b.p, b.n);
    st_file *f = NULL;
    wgml_error err;
    if (st_open(dir, &f, &err)) fail_msg("%s", err.message);
    char want[1024];
    snprintf(want, sizeof want, "%s/model.safetensors", dir);
    assert_string_equal(st_name(f), want);
    assert_non_null(st_find(f, "w"));
    st_close(f);
    /* a trailing slash */
    char slashed[1024];
    snprintf(slashed, sizeof slashed, "%s/", dir);
    if (st_open(slashed, &f, &err)) fail_msg("%s", err.message);
    assert_string_equal(st_name(f), want);
    st_close(f);
    /* an empty folder: both names listed */
    const char *empty = new_dir("folder-empty");
    wgml_status st = st_open(empty, &f, &err);
    CHECK_ERR("empty folder", st, &err, WGML_ERR_IO, empty, "model.safetensors.index.json", "or model.safetensors");
    /* model.safetensors a folder itself: not a file, not taken */
    const char *odd = new_dir("folder-odd");
    char sub[1024];
    snprintf(sub, sizeof sub, "%s/model.safetensors", odd);
    assert_int_equal(mkdir(sub, 0700), 0);
    st = st_open(odd, &f, &err);
    CHECK_ERR("odd folder", st, &err, WGML_ERR_IO, odd, "folder without", NULL);
    /* the index wins over model.safetensors */
    const char *both = new_dir("folder-both");
    put_file(both, "model.safetensors", b.p, b.n);
    put_file(both, "model-00001-of-00001.safetensors", b.p, b.n);
    put_text(both, "model.safetensors.index.json", "{'weight_map':{'w':'model-00001-of-00001.safetensors'}}");
    if (st_open(both, &f, &err)) fail_msg("%s", err.message);
    snprintf(want, sizeof want, "%s/model.safetensors.index.json", both);
    assert_string_equal(st_name(f), want);
    snprintf(want, sizeof want, "%s/model-00001-of-00001.safetensors", both);
    assert_string_equal(st_find(f, "w")->file, want);
    st_close(f);
    gb_free(&b);
}

#define SHARD1 "model-00001-of-00002.safetensors"
#define SHARD2 "model-00002-of-00002.safetensors"

/* A folder with two shards: x, y in SHARD1 (metadata format=pt), z, w in SHARD2. */
static const char *make_set(const char *name, gb *s1, gb *s2) {
    const char *dir = new_dir(name);
    const float x[2] = {1, 2};
    const uint16_t y[3] = {0x3c00, 0x4000, 0x4200};
    const uint16_t z[4] = {0x3f80, 0x4000, 0x4040, 0x4080};
    const int64_t w[1] = {7};
    const wt t1[] = {{"x", "F32", 1, {2}, x, sizeof x}, {"y", "F16", 1, {3}, y, sizeof y}};
    const wt t2[] = {{"z", "BF16", 2, {2, 2}, z, sizeof z}, {"w", "I64", 1, {1}, w, sizeof w}};
    s1->n = s2->n = 0;
    write_st(s1, t1, 2, "{\"format\":\"pt\"}");
    write_st(s2, t2, 2, "{\"format\":\"pt\",\"only\":\"two\"}");
    put_file(dir, SHARD1, s1->p, s1->n);
    put_file(dir, SHARD2, s2->p, s2->n);
    return dir;
}

static void index_bad(const char *dir, const char *index, wgml_status want, const char *s1, const char *s2) {
    put_text(dir, "model.safetensors.index.json", index);
    char path[1024];
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    st_file *f = NULL;
    wgml_error err;
    wgml_status st = st_open(path, &f, &err);
    CHECK_ERR(index, st, &err, want, path, s1, s2);
    assert_null(f);
}

static void test_sharded(void **state) {
    (void)state;
    gb s1 = {0}, s2 = {0};
    const char *dir = make_set("set", &s1, &s2);
    put_text(dir, "model.safetensors.index.json",
             "{'metadata':{'total_size':38,'note':['any',{'json':null}]},'weight_map':{"
             "'z':'" SHARD2 "','x':'" SHARD1 "','w':'" SHARD2 "','y':'" SHARD1 "'}}");
    char path[1024], p1[1024], p2[1024];
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    snprintf(p1, sizeof p1, "%s/" SHARD1, dir);
    snprintf(p2, sizeof p2, "%s/" SHARD2, dir);
    for (int how = 0; how < 2; how++) {
        st_file *f = NULL;
        wgml_error err;
        if (st_open(how ? dir : path, &f, &err)) fail_msg("%s", err.message);
        assert_string_equal(st_name(f), path);
        assert_int_equal(st_n_files(f), 2);
        assert_string_equal(st_file_path(f, 0), p1);
        assert_string_equal(st_file_path(f, 1), p2);
        assert_int_equal(st_n_tensors(f), 4);
        static const char *order[] = {"x", "y", "z", "w"};
        for (int i = 0; i < 4; i++) {
            const st_tensor *t = st_tensor_at(f, i);
            assert_string_equal(t->name, order[i]);
            assert_ptr_equal(st_find(f, order[i]), t);
            assert_int_equal(t->shard, i / 2);
            assert_string_equal(t->file, i < 2 ? p1 : p2);
            assert_string_equal(st_tensor_file(f, t), i < 2 ? p1 : p2);
        }
        const st_tensor *z = st_find(f, "z");
        uint16_t h;
        memcpy(&h, (const uint8_t *)z->data + 6, 2);
        assert_true(wgml_bf16_to_f32(h) == 4.0f);
        const st_tensor *w = st_find(f, "w");
        int64_t v;
        memcpy(&v, w->data, 8);
        assert_int_equal(v, 7);
        assert_memory_equal(st_find(f, "x")->data, s1.p + s1.n - 14, 8);
        assert_string_equal(st_metadata(f, "format", NULL), "pt");
        assert_string_equal(st_metadata(f, "only", NULL), "two");
        assert_int_equal(st_n_metadata(f, 0), 1);
        assert_int_equal(st_n_metadata(f, 1), 2);
        st_release(f, w->data, w->size);
        st_close(f);
    }

    /* every failure of a set */
    index_bad(dir,
              "{'weight_map':{'x':'" SHARD1 "','y':'" SHARD1 "','z':'" SHARD2
              "','w':'model-00003-of-00003.safetensors'}}",
              WGML_ERR_IO, "model-00003-of-00003.safetensors: cannot open", NULL);
    index_bad(dir, "{'weight_map':{'x':'" SHARD2 "','y':'" SHARD1 "','z':'" SHARD2 "','w':'" SHARD2 "'}}",
              WGML_ERR_FORMAT, "weight_map puts tensor 'x' in", "but it is in");
    index_bad(dir, "{'weight_map':{'x':'" SHARD1 "','y':'" SHARD1 "','z':'" SHARD2 "'}}", WGML_ERR_FORMAT,
              "tensor 'w' of", "is not in weight_map");
    index_bad(dir,
              "{'weight_map':{'x':'" SHARD1 "','y':'" SHARD1 "','z':'" SHARD2 "','w':'" SHARD2 "','q':'" SHARD1 "'}}",
              WGML_ERR_FORMAT, "weight_map puts tensor 'q' in", "which does not have it");
    index_bad(dir,
              "{'weight_map':{'x':'" SHARD1 "','y':'" SHARD1 "','z':'" SHARD2 "','w':'" SHARD2 "','x':'" SHARD1 "'}}",
              WGML_ERR_FORMAT, "weight_map lists tensor 'x' twice", NULL);
    static const char *const traversal[] = {"../" SHARD1, "sub/" SHARD1, "/etc/passwd", "a\\\\b.safetensors", "..",
                                            "",           "a..b",        "\\u0000"};
    for (size_t i = 0; i < sizeof traversal / sizeof *traversal; i++) {
        char idx[512];
        snprintf(idx, sizeof idx, "{'weight_map':{'x':'" SHARD1 "','y':'%s'}}", traversal[i]);
        index_bad(dir, idx, WGML_ERR_FORMAT, "weight_map: tensor 'y':", "is not a plain file name");
    }
    index_bad(dir, "{'metadata':{}}", WGML_ERR_FORMAT, "no weight_map object", NULL);
    index_bad(dir, "{'weight_map':{}}", WGML_ERR_FORMAT, "weight_map is empty", NULL);
    index_bad(dir, "{'weight_map':[]}", WGML_ERR_FORMAT, "weight_map is not an object", NULL);
    index_bad(dir, "{'weight_map':{'x':1}}", WGML_ERR_FORMAT, "weight_map: tensor 'x': the file is not a string", NULL);
    index_bad(dir, "{'weight_map':{'x':'" SHARD1 "'},'weight_map':{'x':'" SHARD1 "'}}", WGML_ERR_FORMAT,
              "two weight_map entries", NULL);
    index_bad(dir, "{'weight_map':{'x':'" SHARD1 "'}", WGML_ERR_FORMAT, "the index is not valid JSON", NULL);
    index_bad(dir, "{'weight_map':{'x':'" SHARD1 "'}} []", WGML_ERR_FORMAT, "text after the object", NULL);
    index_bad(dir, "[]", WGML_ERR_FORMAT, "the index is not a JSON object", NULL);
    index_bad(dir, "{'weight_map':{'\xff':'" SHARD1 "'}}", WGML_ERR_FORMAT, "the index is not valid UTF-8", NULL);
    index_bad(dir, "{'weight_map':{'a\\u0000':'" SHARD1 "'}}", WGML_ERR_FORMAT, "tensor name holds a NUL", NULL);

    /* a tensor in two shards */
    const wt t3[] = {{"x", "F32", 1, {2}, NULL, 8}, {"v", "U8", 1, {1}, NULL, 1}};
    gb s3 = {0};
    write_st(&s3, t3, 2, NULL);
    put_file(dir, "extra.safetensors", s3.p, s3.n);
    index_bad(dir, "{'weight_map':{'x':'" SHARD1 "','y':'" SHARD1 "','v':'extra.safetensors'}}", WGML_ERR_FORMAT,
              "tensor 'x' is in two shards", SHARD1);
    /* a damaged shard: named with the index */
    put_file(dir, "cut.safetensors", s3.p, s3.n - 1);
    index_bad(dir, "{'weight_map':{'x':'" SHARD1 "','y':'" SHARD1 "','v':'cut.safetensors'}}", WGML_ERR_FORMAT,
              "cut.safetensors: tensor", NULL);
    /* a duplicate inside one shard is a duplicate, not a two-shard case */
    gb s4 = {0};
    raw(&s4,
        "{'v':{'dtype':'U8','shape':[1],'data_offsets':[0,1]},'v':{'dtype':'U8','shape':[0],'data_offsets':[1,1]}}",
        NULL, 1);
    put_file(dir, "dup.safetensors", s4.p, s4.n);
    index_bad(dir, "{'weight_map':{'v':'dup.safetensors'}}", WGML_ERR_FORMAT,
              "dup.safetensors: duplicate tensor name 'v'", NULL);
    /* an index too large to be one */
    put_file(dir, "huge.index.json", "{}", 2);
    char huge[1024];
    snprintf(huge, sizeof huge, "%s/huge.index.json", dir);
    assert_int_equal(truncate(huge, (off_t)ST_MAX_INDEX + 1), 0);
    st_file *f = NULL;
    wgml_error err;
    wgml_status st = st_open(huge, &f, &err);
    CHECK_ERR("huge index", st, &err, WGML_ERR_FORMAT, huge, "over the limit", NULL);
    gb_free(&s1);
    gb_free(&s2);
    gb_free(&s3);
    gb_free(&s4);
}

static void test_sharded_alloc_fail(void **state) {
    (void)state;
    gb s1 = {0}, s2 = {0};
    const char *dir = make_set("set-oom", &s1, &s2);
    put_text(dir, "model.safetensors.index.json",
             "{'metadata':{'total_size':38},'weight_map':{'z':'" SHARD2 "','x':'" SHARD1 "','w':'" SHARD2
             "','y':'" SHARD1 "'}}");
    long live = wgml_alloc_live();
    for (long k = 0;; k++) {
        st_file *f = NULL;
        wgml_error err;
        wgml_alloc_fail_after(k);
        wgml_status st = st_open(dir, &f, &err);
        wgml_alloc_fail_after(-1);
        if (st == WGML_OK) {
            assert_int_equal(st_n_tensors(f), 4);
            st_close(f);
            assert_int_equal(wgml_alloc_live(), live);
            break;
        }
        CHECK_ERR("out of memory", st, &err, WGML_ERR_OUT_OF_MEMORY, NULL, NULL, NULL);
        assert_null(f);
        assert_int_equal(wgml_alloc_live(), live);
        assert_true(k < 200);
    }
    gb_free(&s1);
    gb_free(&s2);
}

static void test_read_text_file(void **state) {
    (void)state;
    const char *dir = new_dir("text");
    put_file(dir, "config.json", "{\"a\": 1}\n", 9);
    char *text = NULL;
    size_t len = 0;
    wgml_error err;
    if (wgml_read_text_file(dir, "config.json", 1024, 0, &text, &len, &err)) fail_msg("%s", err.message);
    assert_int_equal(len, 9);
    assert_string_equal(text, "{\"a\": 1}\n");
    wgml_free(text);
    char path[1024];
    snprintf(path, sizeof path, "%s/config.json", dir);
    if (wgml_read_text_file(NULL, path, 9, 0, &text, NULL, &err)) fail_msg("%s", err.message); /* exactly the limit */
    wgml_free(text);
    wgml_status st = wgml_read_text_file(dir, "config.json", 8, 0, &text, &len, &err);
    CHECK_ERR("over the limit", st, &err, WGML_ERR_FORMAT, path, "file of 9 bytes is over the limit of 8 bytes", NULL);
    assert_null(text);
    /* absent: an error, or nothing when optional */
    snprintf(path, sizeof path, "%s/preprocessor_config.json", dir);
    st = wgml_read_text_file(dir, "preprocessor_config.json", 1024, 0, &text, &len, &err);
    CHECK_ERR("absent", st, &err, WGML_ERR_IO, path, "cannot open", NULL);
    text = (char *)"x";
    assert_int_equal(wgml_read_text_file(dir, "preprocessor_config.json", 1024, 1, &text, &len, &err), WGML_OK);
    assert_null(text);
    assert_int_equal(len, 0);
    /* a folder is not a text file, optional or not */
    st = wgml_read_text_file(NULL, dir, 1024, 1, &text, &len, &err);
    CHECK_ERR("folder", st, &err, WGML_ERR_IO, dir, "not a regular file", NULL);
    /* empty file */
    put_file(dir, "empty.json", "", 0);
    if (wgml_read_text_file(dir, "empty.json", 1024, 0, &text, &len, &err)) fail_msg("%s", err.message);
    assert_int_equal(len, 0);
    assert_string_equal(text, "");
    wgml_free(text);
    /* joins */
    char *j = wgml_path_join("a", "b");
    assert_string_equal(j, "a/b");
    wgml_free(j);
    j = wgml_path_join("a/", "b");
    assert_string_equal(j, "a/b");
    wgml_free(j);
    j = wgml_path_join(NULL, "b");
    assert_string_equal(j, "b");
    wgml_free(j);
    j = wgml_path_join("", "b");
    assert_string_equal(j, "b");
    wgml_free(j);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dtypes),
        cmocka_unit_test(test_values),
        cmocka_unit_test(test_scalar_empty_padding),
        cmocka_unit_test(test_metadata),
        cmocka_unit_test(test_many),
        cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_header_length),
        cmocka_unit_test(test_bad_json),
        cmocka_unit_test(test_bad_entries),
        cmocka_unit_test(test_sizes_and_ranges),
        cmocka_unit_test(test_tiling),
        cmocka_unit_test(test_too_many),
        cmocka_unit_test(test_flips),
        cmocka_unit_test(test_alloc_fail),
        cmocka_unit_test(test_open_files),
        cmocka_unit_test(test_folder),
        cmocka_unit_test(test_sharded),
        cmocka_unit_test(test_sharded_alloc_fail),
        cmocka_unit_test(test_read_text_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
