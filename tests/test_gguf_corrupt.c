/*
 * test_gguf_corrupt.c - the GGUF reader on hostile files.
 *
 * Real files (stories260K.gguf, its Q8_0 mix, a vocabulary-only GGUF) are
 * truncated at every section boundary (magic, version, counts, each key, type
 * tag and value, each tensor-info field, before and inside the data) and at
 * random offsets, and overwritten field by field: counts, type tags, array
 * element types, string lengths, dimensions, tensor types and offsets,
 * duplicate names, bad magic and versions. Synthetic files cover what a real
 * file cannot be edited into (bool bytes, nesting depth, alignment values).
 * Each case expects a specific status and a message that names the file and
 * the key, tensor or offset; all run under ASan/UBSan/LSan in CI. Random
 * byte overwrites and out-of-memory at every allocation finish the job.
 */
#include "check_err.h"
#include "core/alloc.h"
#include "core/error.h"
#include "format/gguf.h"
#include "gguf_bytes.h"
#include "testutil.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NAME "mut.gguf" /* label of in-memory files in messages */

typedef struct {
    uint8_t *p;
    size_t n;
    gl_layout L;
} blob;

static void load(blob *b, const char *rel) {
    b->p = tu_read_file(tu_shared(rel), &b->n);
    if (!b->p) fail_msg("cannot read %s", tu_shared(rel));
    if (gl_scan(b->p, b->n, &b->L)) fail_msg("%s: layout scan failed", rel);
}

static void unload(blob *b) {
    free(b->p);
    gl_free(&b->L);
}

static uint8_t *copy_blob(const blob *b) {
    uint8_t *m = malloc(b->n);
    assert_non_null(m);
    memcpy(m, b->p, b->n);
    return m;
}

static int n_cases; /* corrupted inputs tried, reported at the end */

/* Opens bytes that must be rejected with `want`, a message naming the file and
 * containing s1 and s2 (when not NULL). Returns nothing: failures fail the test. */
static void expect(const uint8_t *p, size_t n, const char *what, wgml_status want, const char *s1, const char *s2) {
    gguf_file *f = (gguf_file *)&n_cases;
    wgml_error err;
    wgml_error_clear(&err);
    n_cases++;
    wgml_status st = gguf_open_memory(p, n, NAME, &f, &err);
    if (st == WGML_OK) {
        gguf_close(f);
        fail_msg("%s: accepted, expected %s", what, wgml_status_name(want));
    }
    if (f) fail_msg("%s: *out not NULL after failure", what);
    CHECK_ERR(what, st, &err, want, NAME ": ", s1, s2);
}

/* Opens bytes that must be accepted. */
static gguf_file *expect_ok(const uint8_t *p, size_t n, const char *what) {
    gguf_file *f = NULL;
    wgml_error err;
    n_cases++;
    if (gguf_open_memory(p, n, NAME, &f, &err)) fail_msg("%s: rejected: %s", what, err.message);
    return f;
}

/* Mutates a copy of b with `stmt` (which sees `m`, `L` and `n`) and expects a rejection. */
#define MUT(b, what, stmt, want, s1, s2)                                                                               \
    do {                                                                                                               \
        uint8_t *m = copy_blob(b);                                                                                     \
        const gl_layout *L = &(b)->L;                                                                                  \
        size_t n = (b)->n;                                                                                             \
        (void)L;                                                                                                       \
        stmt;                                                                                                          \
        expect(m, n, what, want, s1, s2);                                                                              \
        free(m);                                                                                                       \
    } while (0)

static char *fmt(char *buf, size_t cap, const char *f, unsigned long long v) {
    snprintf(buf, cap, f, v);
    return buf;
}

/* ---- truncation ---- */

/* The message a file cut to `cut` bytes must give: computed from the layout. */
static void expect_truncated(const blob *b, size_t cut) {
    const gl_layout *L = &b->L;
    char what[64], s[256];
    snprintf(what, sizeof what, "cut at %zu of %zu", cut, b->n);
    static const char *hdr[] = {"the magic number", "the version", "the tensor count", "the metadata count"};
    if (cut < 24) {
        size_t field = cut < 4 ? 0 : cut < 8 ? 1 : cut < 16 ? 2 : 3;
        static const size_t at[] = {0, 4, 8, 16};
        snprintf(s, sizeof s, "truncated at offset %zu while reading %s", at[field], hdr[field]);
        expect(b->p, cut, what, WGML_ERR_FORMAT, s, NULL);
        return;
    }
    if (L->n_kv > (cut - 24) / 13) {
        expect(b->p, cut, what, WGML_ERR_FORMAT, fmt(s, sizeof s, "metadata count %llu cannot fit", L->n_kv), NULL);
        return;
    }
    if (L->n_tensors > (cut - 24) / 29) {
        expect(b->p, cut, what, WGML_ERR_FORMAT, fmt(s, sizeof s, "tensor count %llu cannot fit", L->n_tensors), NULL);
        return;
    }
    for (uint64_t i = 0; i < L->n_kv; i++) {
        const gl_kv *k = &L->kv[i];
        if (cut >= k->end) continue;
        if (cut < k->off + 8)
            snprintf(s, sizeof s, "truncated at offset %zu while reading a metadata key", k->off);
        else if (cut < k->type_off)
            snprintf(s, sizeof s, "a metadata key at offset %zu has length", k->off);
        else if (cut < k->value_off)
            snprintf(s, sizeof s, "truncated at offset %zu while reading %s", k->type_off, k->key);
        else if (k->type == GGUF_TYPE_STRING && cut >= k->value_off + 8)
            snprintf(s, sizeof s, "%s at offset %zu has length", k->key, k->value_off);
        else if (k->type != GGUF_TYPE_ARRAY || cut < k->value_off + 4)
            snprintf(s, sizeof s, "truncated at offset %zu while reading %s", k->value_off, k->key);
        else if (cut < k->value_off + 12)
            snprintf(s, sizeof s, "truncated at offset %zu while reading %s", k->value_off + 4, k->key);
        else { /* inside an array's elements: where exactly depends on the elements */
            snprintf(s, sizeof s, "'%s'", k->key);
            gguf_file *f = NULL;
            wgml_error err;
            n_cases++;
            wgml_status st = gguf_open_memory(b->p, cut, NAME, &f, &err);
            CHECK_ERR(what, st, &err, WGML_ERR_FORMAT, NAME, k->key);
            if (!strstr(err.message, "past the end") && !strstr(err.message, "cannot fit") &&
                !strstr(err.message, "truncated"))
                fail_msg("%s: %s", what, err.message);
            return;
        }
        expect(b->p, cut, what, WGML_ERR_FORMAT, s, NULL);
        return;
    }
    for (uint64_t i = 0; i < L->n_tensors; i++) {
        const gl_tensor *t = &L->t[i];
        if (cut >= t->end) continue;
        if (cut < t->off + 8)
            snprintf(s, sizeof s, "truncated at offset %zu while reading a tensor name", t->off);
        else if (cut < t->ndims_off)
            snprintf(s, sizeof s, "a tensor name at offset %zu has length", t->off);
        else {
            size_t at = cut < t->dims_off     ? t->ndims_off
                        : cut < t->type_off   ? t->dims_off + (cut - t->dims_off) / 8 * 8
                        : cut < t->offset_off ? t->type_off
                                              : t->offset_off;
            snprintf(s, sizeof s, "truncated at offset %zu while reading %s", at, t->name);
        }
        expect(b->p, cut, what, WGML_ERR_FORMAT, s, NULL);
        return;
    }
    if (L->n_tensors == 0) { /* a vocabulary-only file ends after its metadata */
        gguf_close(expect_ok(b->p, cut, what));
        return;
    }
    if (cut < L->data_off) {
        expect(b->p, cut, what, WGML_ERR_FORMAT,
               fmt(s, sizeof s, "file truncated before the tensor data (offset %llu)", L->data_off), NULL);
        return;
    }
    /* inside the data: the first tensor in table order that no longer fits */
    uint64_t data = cut - L->data_off;
    for (uint64_t i = 0; i < L->n_tensors; i++) {
        const gl_tensor *t = &L->t[i];
        assert_true(t->size > 0);
        if (t->offset + t->size > data) {
            snprintf(s, sizeof s, "tensor '%s': data [%llu, +%llu) lies outside the file's data section of %llu bytes",
                     t->name, (unsigned long long)t->offset, (unsigned long long)t->size, (unsigned long long)data);
            expect(b->p, cut, what, WGML_ERR_FORMAT, s, NULL);
            return;
        }
    }
    gguf_close(expect_ok(b->p, cut, what)); /* only padding was cut */
}

/* Every boundary of every section, a byte either side, and random offsets. */
static void truncations(const blob *b, int n_random) {
    const gl_layout *L = &b->L;
    for (size_t cut = 0; cut <= 25; cut++)
        expect_truncated(b, cut);
    size_t marks[8];
    for (uint64_t i = 0; i < L->n_kv; i++) {
        const gl_kv *k = &L->kv[i];
        size_t ms[] = {k->off,
                       k->off + 8,
                       k->type_off,
                       k->value_off,
                       k->value_off + 4,
                       k->value_off + 12,
                       (k->value_off + k->end) / 2,
                       k->end - 1};
        memcpy(marks, ms, sizeof ms);
        for (int j = 0; j < 8; j++)
            if (marks[j] < b->n) {
                expect_truncated(b, marks[j]);
                if (marks[j] + 1 < b->n) expect_truncated(b, marks[j] + 1);
            }
    }
    for (uint64_t i = 0; i < L->n_tensors; i++) {
        const gl_tensor *t = &L->t[i];
        size_t ms[] = {t->off,          t->off + 8,  t->ndims_off,  t->dims_off,
                       t->dims_off + 8, t->type_off, t->offset_off, t->end - 1};
        for (int j = 0; j < 8; j++)
            expect_truncated(b, ms[j]);
        /* before, inside and at the end of its data */
        size_t d = L->data_off + (size_t)t->offset;
        if (t->size) {
            expect_truncated(b, d);
            expect_truncated(b, d + 1);
            expect_truncated(b, d + (size_t)t->size / 2);
            expect_truncated(b, d + (size_t)t->size - 1);
        }
    }
    if (L->n_tensors) {
        expect_truncated(b, L->info_end);
        expect_truncated(b, L->data_off - 1);
        expect_truncated(b, L->data_off);
    }
    expect_truncated(b, b->n - 1);
    tu_rng r = {b->n};
    for (int i = 0; i < n_random; i++)
        expect_truncated(b, (size_t)(tu_next(&r) % b->n));
    gguf_close(expect_ok(b->p, b->n, "whole file"));
}

static void test_truncation(void **state) {
    (void)state;
    static const char *files[] = {"models/stories260K.gguf", "models/stories260K-Q8_0mix.gguf",
                                  "vocab/ggml-vocab-llama-spm.gguf"};
    for (size_t i = 0; i < 3; i++) {
        blob b;
        load(&b, files[i]);
        truncations(&b, i == 2 ? 60 : 200);
        unload(&b);
    }
    /* and through files: the path names the problem */
    blob b;
    load(&b, "models/stories260K.gguf");
    const char *path = tu_tmp_path("truncated.gguf");
    size_t cuts[] = {30, b.L.kv[3].type_off, b.L.t[5].dims_off, b.L.data_off + 1000, b.n - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        assert_int_equal(tu_write_file(path, b.p, cuts[i]), 0);
        gguf_file *f = NULL;
        wgml_error err;
        wgml_status st = gguf_open(path, &f, &err);
        CHECK_ERR("file cut", st, &err, WGML_ERR_FORMAT, path);
        assert_null(f);
        n_cases++;
    }
    remove(path);
    unload(&b);
}

/* ---- header, counts, keys and values ---- */

static void test_header(void **state) {
    (void)state;
    blob b;
    load(&b, "models/stories260K.gguf");
    char s[256];
    MUT(&b, "magic GGUG", m[3] = 'G', WGML_ERR_FORMAT, "not a GGUF file (magic 47 47 55 47)", NULL);
    MUT(&b, "magic ggjt", memcpy(m, "tjgg", 4), WGML_ERR_FORMAT, "not a GGUF file", NULL);
    MUT(&b, "magic zero", memset(m, 0, 4), WGML_ERR_FORMAT, "not a GGUF file (magic 00 00 00 00)", NULL);
    MUT(&b, "version 1", put_u32_at(m, 4, 1), WGML_ERR_UNSUPPORTED, "version 1 is obsolete", NULL);
    MUT(&b, "version 0", put_u32_at(m, 4, 0), WGML_ERR_UNSUPPORTED, "GGUF version 0 is not supported", NULL);
    MUT(&b, "version 4", put_u32_at(m, 4, 4), WGML_ERR_UNSUPPORTED, "GGUF version 4 is not supported", NULL);
    MUT(&b, "version max", put_u32_at(m, 4, UINT32_MAX), WGML_ERR_UNSUPPORTED, "version 4294967295", NULL);
    MUT(&b, "big-endian v3", put_u32_at(m, 4, 0x03000000u), WGML_ERR_UNSUPPORTED, "big-endian", NULL);
    MUT(&b, "big-endian v2", put_u32_at(m, 4, 0x02000000u), WGML_ERR_UNSUPPORTED, "big-endian", NULL);
    MUT(&b, "n_tensors max", put_u64_at(m, 8, UINT64_MAX), WGML_ERR_FORMAT,
        "tensor count 18446744073709551615 cannot fit", NULL);
    MUT(&b, "n_tensors 2^63", put_u64_at(m, 8, 1ull << 63), WGML_ERR_FORMAT, "tensor count 9223372036854775808", NULL);
    MUT(&b, "n_kv max", put_u64_at(m, 16, UINT64_MAX), WGML_ERR_FORMAT,
        "metadata count 18446744073709551615 cannot fit", NULL);
    MUT(&b, "n_kv 2^32", put_u64_at(m, 16, 1ull << 32), WGML_ERR_FORMAT, "metadata count 4294967296", NULL);
    /* one key too few: the last key is read as a tensor (its type tag f32 = 6 as n_dims) */
    MUT(&b, "n_kv - 1", put_u64_at(m, 16, L->n_kv - 1), WGML_ERR_FORMAT,
        "tensor 'llama.attention.layer_norm_rms_epsilon' has 6 dimensions", NULL);
    /* no keys: the token array is read as a tensor (array tag 9 as n_dims) */
    MUT(&b, "n_kv 0", put_u64_at(m, 16, 0), WGML_ERR_FORMAT, "tensor 'tokenizer.ggml.tokens' has 9 dimensions", NULL);
    /* one key too many: the first tensor info is read as a key of type u16 (its n_dims 2),
     * then the next tensor's "name length" is made of dimension bytes */
    MUT(&b, "n_kv + 1", put_u64_at(m, 16, L->n_kv + 1), WGML_ERR_FORMAT,
        fmt(s, sizeof s, "a tensor name at offset %llu has length 144115188075855872, past the end",
            L->t[0].dims_off + 2),
        NULL);
    MUT(&b, "n_tensors + 1", put_u64_at(m, 8, L->n_tensors + 1), WGML_ERR_FORMAT,
        fmt(s, sizeof s, "tensor 48 at offset %llu has an empty name", L->info_end), NULL);
    /* fewer tensors than the table holds: the rest is unreferenced bytes, which GGUF allows */
    uint8_t *mm = copy_blob(&b);
    put_u64_at(mm, 8, 47);
    gguf_file *f = expect_ok(mm, b.n, "n_tensors - 1");
    assert_int_equal(gguf_n_tensors(f), 47);
    gguf_close(f);
    put_u64_at(mm, 8, 0);
    f = expect_ok(mm, b.n, "n_tensors 0");
    assert_int_equal(gguf_n_tensors(f), 0);
    gguf_close(f);
    free(mm);
    unload(&b);
}

static void test_keys_and_values(void **state) {
    (void)state;
    blob b;
    load(&b, "models/stories260K.gguf");
    const gl_kv *arch = gl_find_kv(&b.L, "general.architecture");
    const gl_kv *name = gl_find_kv(&b.L, "general.name");
    const gl_kv *eos = gl_find_kv(&b.L, "tokenizer.ggml.eos_token_id");
    const gl_kv *blocks = gl_find_kv(&b.L, "llama.block_count");
    const gl_kv *tokens = gl_find_kv(&b.L, "tokenizer.ggml.tokens");
    const gl_kv *scores = gl_find_kv(&b.L, "tokenizer.ggml.scores");
    const gl_kv *types = gl_find_kv(&b.L, "tokenizer.ggml.token_type");
    assert_true(arch && name && eos && blocks && tokens && scores && types);
    char s[256];

    /* key lengths */
    snprintf(s, sizeof s, "a metadata key at offset %zu has length", arch->off);
    MUT(&b, "key len 2^63", put_u64_at(m, arch->off, 1ull << 63), WGML_ERR_FORMAT, s, "9223372036854775808");
    MUT(&b, "key len max", put_u64_at(m, arch->off, UINT64_MAX), WGML_ERR_FORMAT, s, "past the end of the file");
    MUT(&b, "key len past EOF", put_u64_at(m, arch->off, n - arch->off - 8 + 1), WGML_ERR_FORMAT, s,
        "past the end of the file");
    snprintf(s, sizeof s, "metadata key 4 at offset %zu is empty or has a NUL byte", arch->off);
    MUT(&b, "key len 0", put_u64_at(m, arch->off, 0), WGML_ERR_FORMAT, s, NULL);
    MUT(&b, "NUL in key", m[arch->off + 8 + 3] = 0, WGML_ERR_FORMAT, s, NULL);
    MUT(&b, "duplicate key", m[eos->off + 8 + 15] = 'b', WGML_ERR_FORMAT,
        fmt(s, sizeof s, "duplicate metadata key 'tokenizer.ggml.bos_token_id' at offset %llu", eos->off), NULL);

    /* type tags */
    snprintf(s, sizeof s, "key 'general.architecture': unknown value type 13 at offset %zu", arch->type_off);
    MUT(&b, "type tag 13", put_u32_at(m, arch->type_off, 13), WGML_ERR_FORMAT, s, NULL);
    MUT(&b, "type tag max", put_u32_at(m, arch->type_off, UINT32_MAX), WGML_ERR_FORMAT,
        "'general.architecture': unknown value type 4294967295", NULL);
    /* u32 read as a string: the length takes 4 bytes of the next key's length */
    MUT(&b, "u32 as string", put_u32_at(m, blocks->type_off, GGUF_TYPE_STRING), WGML_ERR_FORMAT,
        "llama.block_count at offset", "past the end of the file");
    /* a string read as an array: element type 5 (the low half of the length), huge count */
    MUT(&b, "string as array", put_u32_at(m, arch->type_off, GGUF_TYPE_ARRAY), WGML_ERR_FORMAT,
        "key 'general.architecture': array of", "i32 elements");

    /* string values */
    snprintf(s, sizeof s, "general.name at offset %zu has length", name->value_off);
    MUT(&b, "string len 2^63", put_u64_at(m, name->value_off, 1ull << 63), WGML_ERR_FORMAT, s,
        "9223372036854775808, past the end");
    MUT(&b, "string len max", put_u64_at(m, name->value_off, UINT64_MAX), WGML_ERR_FORMAT, s, "18446744073709551615");
    MUT(&b, "string len past EOF", put_u64_at(m, name->value_off, n - name->value_off - 8 + 1), WGML_ERR_FORMAT, s,
        NULL);
    snprintf(s, sizeof s, "tokenizer.ggml.tokens at offset %zu has length", tokens->value_off + 12);
    MUT(&b, "token string len max", put_u64_at(m, tokens->value_off + 12, UINT64_MAX), WGML_ERR_FORMAT, s, NULL);

    /* arrays */
    snprintf(s, sizeof s, "key 'tokenizer.ggml.tokens': array of unknown type 13 at offset %zu", tokens->value_off);
    MUT(&b, "array elem type 13", put_u32_at(m, tokens->value_off, 13), WGML_ERR_FORMAT, s, NULL);
    MUT(&b, "array elem type max", put_u32_at(m, tokens->value_off, UINT32_MAX), WGML_ERR_FORMAT,
        "array of unknown type 4294967295", NULL);
    snprintf(s, sizeof s, "array of 18446744073709551615 string elements at offset %zu cannot fit", tokens->value_off);
    MUT(&b, "string array count max", put_u64_at(m, tokens->value_off + 4, UINT64_MAX), WGML_ERR_FORMAT,
        "'tokenizer.ggml.tokens'", s);
    MUT(&b, "string array count 2^61", put_u64_at(m, tokens->value_off + 4, 1ull << 61), WGML_ERR_FORMAT,
        "'tokenizer.ggml.tokens'", "cannot fit in the file");
    snprintf(s, sizeof s, "array of 18446744073709551615 f32 elements at offset %zu runs past the end",
             scores->value_off);
    MUT(&b, "f32 array count max", put_u64_at(m, scores->value_off + 4, UINT64_MAX), WGML_ERR_FORMAT,
        "'tokenizer.ggml.scores'", s);
    MUT(&b, "f32 array count past EOF", put_u64_at(m, scores->value_off + 4, (n - scores->value_off) / 4),
        WGML_ERR_FORMAT, "'tokenizer.ggml.scores'", "runs past the end");
    /* token types read as bools: the first byte above 1 is rejected */
    MUT(&b, "i32 array as bool", put_u32_at(m, types->value_off, GGUF_TYPE_BOOL), WGML_ERR_FORMAT,
        "key 'tokenizer.ggml.token_type': bool element 0 is 2", NULL);
    /* token types (i32) read as i64: twice the bytes, then the next key is misread */
    MUT(&b, "i32 array as i64", put_u32_at(m, types->value_off, GGUF_TYPE_INT64), WGML_ERR_FORMAT, NULL, NULL);
    /* strings read as arrays: each "array" takes its element type from a string length */
    MUT(&b, "string array as array of arrays", put_u32_at(m, tokens->value_off, GGUF_TYPE_ARRAY), WGML_ERR_FORMAT,
        "'tokenizer.ggml.tokens'", NULL);
    /* one string longer than it is: the rest of the array shifts */
    MUT(&b, "token string len + 1", put_u64_at(m, tokens->value_off + 12, get_u64_at(m, tokens->value_off + 12) + 1),
        WGML_ERR_FORMAT, NULL, NULL);
    unload(&b);
}

/* ---- tensor infos ---- */

/* A few of the cases through gguf_open: the message names the path. */
static void test_via_files(void **state) {
    (void)state;
    blob b;
    load(&b, "models/stories260K.gguf");
    const char *path = tu_tmp_path("mutated.gguf");
    const gl_tensor *q0 = gl_find_tensor(&b.L, "blk.0.attn_q.weight"),
                    *k0 = gl_find_tensor(&b.L, "blk.0.attn_k.weight");
    for (int i = 0; i < 5; i++) {
        uint8_t *m = copy_blob(&b);
        wgml_status want = WGML_ERR_FORMAT;
        const char *sub = NULL;
        switch (i) {
        case 0: m[0] = 'X', sub = "not a GGUF file"; break;
        case 1: put_u32_at(m, 4, 1), want = WGML_ERR_UNSUPPORTED, sub = "version 1 is obsolete"; break;
        case 2: put_u64_at(m, 16, UINT64_MAX), sub = "metadata count 18446744073709551615 cannot fit"; break;
        case 3: put_u64_at(m, k0->offset_off, q0->offset), sub = "'blk.0.attn_k.weight'"; break;
        default: put_u32_at(m, q0->type_off, 19), want = WGML_ERR_UNSUPPORTED, sub = "type IQ1_S (19)"; break;
        }
        assert_int_equal(tu_write_file(path, m, b.n), 0);
        gguf_file *f = NULL;
        wgml_error err;
        n_cases++;
        wgml_status st = gguf_open(path, &f, &err);
        CHECK_ERR("via file", st, &err, want, path, sub);
        assert_null(f);
        free(m);
    }
    remove(path);
    unload(&b);
}

static void test_tensor_infos(void **state) {
    (void)state;
    blob b, q;
    load(&b, "models/stories260K.gguf");
    load(&q, "models/stories260K-Q8_0mix.gguf");
    const gl_tensor *emb = gl_find_tensor(&b.L, "token_embd.weight");
    const gl_tensor *aq = gl_find_tensor(&b.L, "blk.1.attn_q.weight");
    const gl_tensor *q0 = gl_find_tensor(&b.L, "blk.0.attn_q.weight");
    const gl_tensor *k0 = gl_find_tensor(&b.L, "blk.0.attn_k.weight");
    const gl_tensor *last = &b.L.t[b.L.n_tensors - 1];
    const gl_tensor *qk = gl_find_tensor(&q.L, "blk.0.attn_k.weight");
    assert_true(emb && aq && q0 && k0 && qk && qk->type == 8);
    char s[256];

    /* n_dims */
    MUT(&b, "n_dims 0", put_u32_at(m, aq->ndims_off, 0), WGML_ERR_FORMAT,
        "tensor 'blk.1.attn_q.weight' has 0 dimensions (1..4 allowed)", NULL);
    MUT(&b, "n_dims 5", put_u32_at(m, aq->ndims_off, 5), WGML_ERR_FORMAT, "'blk.1.attn_q.weight' has 5 dimensions",
        NULL);
    MUT(&b, "n_dims max", put_u32_at(m, aq->ndims_off, UINT32_MAX), WGML_ERR_FORMAT,
        "'blk.1.attn_q.weight' has 4294967295 dimensions", NULL);
    /* one dim too many: the type and offset are read as a third dimension */
    MUT(&b, "n_dims 3", put_u32_at(m, aq->ndims_off, 3), WGML_ERR_FORMAT, "'blk.1.attn_q.weight'", NULL);
    /* one too few: the second dimension's bytes become the type (512 is no type) */
    MUT(&b, "n_dims 1", put_u32_at(m, emb->ndims_off, 1), WGML_ERR_FORMAT,
        "tensor 'token_embd.weight' has unknown type 512", NULL);

    /* dims */
    MUT(&b, "dim 0", put_u64_at(m, emb->dims_off, 0), WGML_ERR_FORMAT, "tensor 'token_embd.weight' has dimension 0 = 0",
        NULL);
    MUT(&b, "dim1 0", put_u64_at(m, emb->dims_off + 8, 0), WGML_ERR_FORMAT, "'token_embd.weight' has dimension 1 = 0",
        NULL);
    MUT(&b, "dim 2^63", put_u64_at(m, emb->dims_off + 8, 1ull << 63), WGML_ERR_FORMAT,
        "'token_embd.weight' has dimension 1 = 9223372036854775808", NULL);
    MUT(&b, "dim max", put_u64_at(m, emb->dims_off, UINT64_MAX), WGML_ERR_FORMAT, "dimension 0 = 18446744073709551615",
        NULL);
    MUT(&b, "dims product overflow",
        (put_u64_at(m, emb->dims_off, 1ull << 32), put_u64_at(m, emb->dims_off + 8, 1ull << 32)), WGML_ERR_FORMAT,
        "tensor 'token_embd.weight': element count overflows", NULL);
    MUT(&b, "bytes overflow", put_u64_at(m, emb->dims_off + 8, 1ull << 56), WGML_ERR_FORMAT,
        "tensor 'token_embd.weight': size overflows", NULL);
    MUT(&b, "huge dim", put_u64_at(m, emb->dims_off + 8, 1ull << 40), WGML_ERR_FORMAT,
        "tensor 'token_embd.weight': data [0, +281474976710656) lies outside", NULL);
    MUT(&b, "dim + 1 overlaps", put_u64_at(m, emb->dims_off + 8, 513), WGML_ERR_FORMAT,
        "tensors 'token_embd.weight' and 'output_norm.weight' overlap", NULL);
    MUT(&q, "Q8_0 row 65", put_u64_at(m, qk->dims_off, 65), WGML_ERR_FORMAT,
        "'blk.0.attn_k.weight': row length 65 is not a multiple of the Q8_0 block size 32", NULL);

    /* types */
    MUT(&b, "type 99", put_u32_at(m, aq->type_off, 99), WGML_ERR_FORMAT,
        "tensor 'blk.1.attn_q.weight' has unknown type 99", NULL);
    MUT(&b, "type max", put_u32_at(m, aq->type_off, UINT32_MAX), WGML_ERR_FORMAT, "has unknown type 4294967295", NULL);
    MUT(&b, "type 4", put_u32_at(m, aq->type_off, 4), WGML_ERR_UNSUPPORTED,
        "tensor 'blk.1.attn_q.weight' has type Q4_2 (removed) (4)", "does not support");
    MUT(&b, "type 5", put_u32_at(m, aq->type_off, 5), WGML_ERR_UNSUPPORTED, "Q4_3 (removed) (5)", NULL);
    static const struct {
        uint32_t id;
        const char *name;
    } iq[] = {{16, "IQ2_XXS"}, {17, "IQ2_XS"}, {18, "IQ3_XXS"}, {19, "IQ1_S"}, {20, "IQ4_NL"}, {21, "IQ3_S"},
              {22, "IQ2_S"},   {23, "IQ4_XS"}, {29, "IQ1_M"},   {34, "TQ1_0"}, {35, "TQ2_0"},  {39, "MXFP4"}};
    for (size_t i = 0; i < sizeof iq / sizeof iq[0]; i++) {
        snprintf(s, sizeof s, "tensor 'blk.1.attn_q.weight' has type %s (%u)", iq[i].name, iq[i].id);
        MUT(&b, iq[i].name, put_u32_at(m, aq->type_off, iq[i].id), WGML_ERR_UNSUPPORTED, s, NULL);
    }
    MUT(&b, "Q4_K row 64", put_u32_at(m, aq->type_off, 12), WGML_ERR_FORMAT,
        "row length 64 is not a multiple of the Q4_K block size 256", NULL);
    MUT(&b, "F64 overlaps", put_u32_at(m, emb->type_off, 28), WGML_ERR_FORMAT,
        "tensors 'token_embd.weight' and 'output_norm.weight' overlap", NULL);
    uint8_t *mm = copy_blob(&b); /* a smaller type leaves a gap, which is fine */
    put_u32_at(mm, emb->type_off, 1);
    gguf_file *f = expect_ok(mm, b.n, "F32 -> F16");
    assert_int_equal(gguf_find_tensor(f, "token_embd.weight")->size, 64 * 512 * 2);
    gguf_close(f);
    free(mm);

    /* offsets */
    snprintf(s, sizeof s, "tensor 'blk.0.attn_q.weight': data offset %llu is not aligned to 32",
             (unsigned long long)q0->offset + 4);
    MUT(&b, "offset + 4", put_u64_at(m, q0->offset_off, q0->offset + 4), WGML_ERR_FORMAT, s, NULL);
    MUT(&b, "offset + 1", put_u64_at(m, q0->offset_off, q0->offset + 1), WGML_ERR_FORMAT, "not aligned to 32", NULL);
    MUT(&b, "offset max aligned", put_u64_at(m, q0->offset_off, UINT64_MAX - 31), WGML_ERR_FORMAT,
        "'blk.0.attn_q.weight': data [18446744073709551584, +16384) lies outside", NULL);
    MUT(&b, "offset max", put_u64_at(m, q0->offset_off, UINT64_MAX), WGML_ERR_FORMAT, "not aligned", NULL);
    MUT(&b, "offset = data size", put_u64_at(m, q0->offset_off, (n - L->data_off + 31) / 32 * 32), WGML_ERR_FORMAT,
        "'blk.0.attn_q.weight'", "lies outside the file's data section");
    MUT(&b, "last tensor pushed out", put_u64_at(m, last->offset_off, last->offset + 32), WGML_ERR_FORMAT,
        "'blk.4.ffn_norm.weight'", "lies outside");
    MUT(&b, "same offset", put_u64_at(m, k0->offset_off, q0->offset), WGML_ERR_FORMAT, "'blk.0.attn_q.weight'",
        "'blk.0.attn_k.weight'");
    MUT(&b, "partial overlap", put_u64_at(m, k0->offset_off, q0->offset + 32), WGML_ERR_FORMAT,
        "tensors 'blk.0.attn_q.weight' and 'blk.0.attn_k.weight' overlap", NULL);
    MUT(&b, "overlap across the file", put_u64_at(m, last->offset_off, 0), WGML_ERR_FORMAT, "'token_embd.weight'",
        "'blk.4.ffn_norm.weight'");

    /* names */
    MUT(&b, "duplicate tensor", m[q0->off + 8 + 11] = 'k', WGML_ERR_FORMAT,
        "duplicate tensor name 'blk.0.attn_k.weight'", NULL);
    snprintf(s, sizeof s, "tensor 4 at offset %zu has an empty name or a NUL byte", b.L.t[4].off);
    MUT(&b, "empty name", put_u64_at(m, b.L.t[4].off, 0), WGML_ERR_FORMAT, s, NULL);
    MUT(&b, "NUL in name", m[b.L.t[4].off + 8 + 2] = 0, WGML_ERR_FORMAT, s, NULL);
    MUT(&b, "name len max", put_u64_at(m, b.L.t[4].off, UINT64_MAX), WGML_ERR_FORMAT,
        fmt(s, sizeof s, "a tensor name at offset %llu has length 18446744073709551615, past the end", b.L.t[4].off),
        NULL);
    unload(&q);
    unload(&b);
}

/* ---- synthetic files ---- */

static void one_kv(gb *b, const char *key, uint32_t type) {
    gb_header(b, 3, 0, 1);
    gb_key(b, key, type);
}

static void test_synthetic(void **state) {
    (void)state;
    gb b = {0};
    char s[128];

    gb_header(&b, 3, 0, 0);
    gguf_close(expect_ok(b.p, b.n, "empty GGUF"));
    gb_free(&b);

    one_kv(&b, "s.b", GGUF_TYPE_BOOL), gb_u8(&b, 2);
    expect(b.p, b.n, "bool 2", WGML_ERR_FORMAT, "key 's.b': bool value 2 at offset 39", NULL);
    gb_free(&b);
    one_kv(&b, "s.b", GGUF_TYPE_BOOL), gb_u8(&b, 255);
    expect(b.p, b.n, "bool 255", WGML_ERR_FORMAT, "bool value 255", NULL);
    gb_free(&b);
    one_kv(&b, "s.ab", GGUF_TYPE_ARRAY), gb_u32(&b, GGUF_TYPE_BOOL), gb_u64(&b, 3), gb_u8(&b, 1), gb_u8(&b, 2),
        gb_u8(&b, 0);
    expect(b.p, b.n, "bool element 2", WGML_ERR_FORMAT, "key 's.ab': bool element 1 is 2", NULL);
    gb_free(&b);

    /* nesting: 8 levels of arrays are fine, 9 are not */
    for (int depth = 8; depth <= 9; depth++) {
        one_kv(&b, "s.deep", GGUF_TYPE_ARRAY);
        for (int i = 0; i < depth - 1; i++)
            gb_u32(&b, GGUF_TYPE_ARRAY), gb_u64(&b, 1);
        gb_u32(&b, GGUF_TYPE_UINT8), gb_u64(&b, 1), gb_u8(&b, 7);
        if (depth == 8) {
            gguf_file *f = expect_ok(b.p, b.n, "8 levels");
            const gguf_value *v = &gguf_find_kv(f, "s.deep")->value;
            for (int i = 0; i < 7; i++)
                v = &v->v.arr.items[0];
            assert_true(v->v.arr.elem_type == GGUF_TYPE_UINT8 && v->v.arr.raw[0] == 7);
            gguf_close(f);
        } else {
            expect(b.p, b.n, "9 levels", WGML_ERR_FORMAT, "key 's.deep': arrays nested deeper than 8", NULL);
        }
        gb_free(&b);
    }
    one_kv(&b, "s.aa", GGUF_TYPE_ARRAY), gb_u32(&b, GGUF_TYPE_ARRAY), gb_u64(&b, 1ull << 40), gb_zeros(&b, 24);
    expect(b.p, b.n, "array of arrays count", WGML_ERR_FORMAT, "'s.aa': array of 1099511627776 array elements",
           "cannot fit");
    gb_free(&b);
    /* an array of arrays whose inner array is cut short */
    one_kv(&b, "s.aa", GGUF_TYPE_ARRAY), gb_u32(&b, GGUF_TYPE_ARRAY), gb_u64(&b, 2);
    gb_u32(&b, GGUF_TYPE_STRING), gb_u64(&b, 1), gb_str(&b, "ok");
    gb_u32(&b, GGUF_TYPE_STRING), gb_u64(&b, 1), gb_u64(&b, 100), gb_put(&b, "abc", 3);
    expect(b.p, b.n, "inner string cut", WGML_ERR_FORMAT, "s.aa at offset", "has length 100, past the end");
    gb_free(&b);

    /* general.alignment */
    static const struct {
        uint32_t type;
        uint64_t v;
    } bad_align[] = {{GGUF_TYPE_UINT32, 0},        {GGUF_TYPE_UINT32, 48},         {GGUF_TYPE_UINT32, 3},
                     {GGUF_TYPE_UINT32, 1u << 21}, {GGUF_TYPE_UINT32, UINT32_MAX}, {GGUF_TYPE_UINT64, 64},
                     {GGUF_TYPE_INT32, 64},        {GGUF_TYPE_UINT16, 64}};
    for (size_t i = 0; i < sizeof bad_align / sizeof bad_align[0]; i++) {
        one_kv(&b, "general.alignment", bad_align[i].type);
        uint64_t v = bad_align[i].v;
        size_t sz = bad_align[i].type == GGUF_TYPE_UINT64 ? 8 : bad_align[i].type == GGUF_TYPE_UINT16 ? 2 : 4;
        gb_put(&b, &v, sz);
        snprintf(s, sizeof s, "alignment %s %llu", gguf_type_name((gguf_type)bad_align[i].type), (unsigned long long)v);
        expect(b.p, b.n, s, WGML_ERR_FORMAT, "general.alignment must be a u32 power of two up to 1 MiB", NULL);
        gb_free(&b);
    }
    one_kv(&b, "general.alignment", GGUF_TYPE_STRING), gb_str(&b, "32");
    expect(b.p, b.n, "alignment string", WGML_ERR_FORMAT, "general.alignment must be a u32", NULL);
    gb_free(&b);

    /* a tensor aligned to 32 in a file aligned to 64 */
    gb_header(&b, 3, 2, 1);
    gb_key(&b, "general.alignment", GGUF_TYPE_UINT32), gb_u32(&b, 64);
    gb_str(&b, "a"), gb_u32(&b, 1), gb_u64(&b, 8), gb_u32(&b, 0), gb_u64(&b, 0);
    gb_str(&b, "b"), gb_u32(&b, 1), gb_u64(&b, 8), gb_u32(&b, 0), gb_u64(&b, 32);
    gb_pad(&b, 64);
    gb_zeros(&b, 128);
    expect(b.p, b.n, "offset aligned to 32 only", WGML_ERR_FORMAT, "tensor 'b': data offset 32 is not aligned to 64",
           NULL);
    gb_free(&b);

    /* tensors declared, no data at all */
    gb_header(&b, 3, 1, 0);
    gb_str(&b, "t"), gb_u32(&b, 1), gb_u64(&b, 8), gb_u32(&b, 0), gb_u64(&b, 0);
    expect(b.p, b.n, "no data section", WGML_ERR_FORMAT, "file truncated before the tensor data (offset 64)", NULL);
    gb_pad(&b, 32);
    expect(b.p, b.n, "empty data section", WGML_ERR_FORMAT, "tensor 't': data [0, +32) lies outside", "of 0 bytes");
    gb_zeros(&b, 32 + 100); /* and trailing bytes after the data are allowed */
    gguf_close(expect_ok(b.p, b.n, "trailing bytes"));
    gb_free(&b);

    /* 4 dims of 2^16: 2^64 elements */
    gb_header(&b, 3, 1, 0);
    gb_str(&b, "big"), gb_u32(&b, 4);
    for (int i = 0; i < 4; i++)
        gb_u64(&b, 1ull << 16);
    gb_u32(&b, 0), gb_u64(&b, 0), gb_pad(&b, 32);
    expect(b.p, b.n, "2^64 elements", WGML_ERR_FORMAT, "tensor 'big': element count overflows", NULL);
    gb_free(&b);
    /* 2^62 F32 elements: 2^64 bytes */
    gb_header(&b, 3, 1, 0);
    gb_str(&b, "big"), gb_u32(&b, 2), gb_u64(&b, 1ull << 31), gb_u64(&b, 1ull << 31), gb_u32(&b, 0), gb_u64(&b, 0);
    gb_pad(&b, 32);
    expect(b.p, b.n, "2^64 bytes", WGML_ERR_FORMAT, "tensor 'big': size overflows", NULL);
    gb_free(&b);
}

/* Many keys and tensors: duplicates are found by sorting and lookups are
 * binary searches, so opening costs n log n (this took minutes when every
 * name was compared with every other). Far-apart duplicates are still found. */
static void test_many_entries(void **state) {
    (void)state;
    enum { N = 200000 };
    gb b = {0};
    char name[32];
    for (int dup = 0; dup < 3; dup++) {
        gb_header(&b, 3, N, N);
        size_t last_kv = 0;
        for (int i = 0; i < N; i++) {
            snprintf(name, sizeof name, "k.%d", dup == 1 && i == N - 1 ? 0 : i);
            last_kv = b.n;
            gb_key(&b, name, GGUF_TYPE_UINT8), gb_u8(&b, 1);
        }
        for (int i = 0; i < N; i++) {
            snprintf(name, sizeof name, "t.%d", dup == 2 && i == N - 1 ? 17 : i);
            gb_str(&b, name), gb_u32(&b, 1), gb_u64(&b, 1), gb_u32(&b, 0), gb_u64(&b, (uint64_t)i * 32);
        }
        gb_pad(&b, 32);
        gb_zeros(&b, (size_t)N * 32);
        time_t t0 = time(NULL);
        if (dup == 0) {
            gguf_file *f = expect_ok(b.p, b.n, "200000 keys and tensors");
            for (int i = 0; i < N; i += 7) {
                snprintf(name, sizeof name, "t.%d", i);
                const gguf_tensor *t = gguf_find_tensor(f, name);
                assert_true(t && t == gguf_tensor_at(f, i));
                snprintf(name, sizeof name, "k.%d", i);
                assert_ptr_equal(gguf_find_kv(f, name), gguf_kv_at(f, i));
            }
            assert_null(gguf_find_kv(f, "k.-1"));
            assert_null(gguf_find_tensor(f, "t.200000"));
            gguf_close(f);
        } else if (dup == 1) {
            char s[128];
            snprintf(s, sizeof s, "duplicate metadata key 'k.0' at offset %zu", last_kv);
            expect(b.p, b.n, "first and last key equal", WGML_ERR_FORMAT, s, NULL);
        } else {
            expect(b.p, b.n, "far-apart tensor names equal", WGML_ERR_FORMAT, "duplicate tensor name 't.17'", NULL);
        }
        /* generous: n log n takes well under a second here, n^2 took minutes */
        assert_true(time(NULL) - t0 < 20);
        gb_free(&b);
    }
}

/* A string longer than the reader's 1 GiB limit, in a sparse file. */
static void test_string_too_long(void **state) {
    (void)state;
    const char *path = tu_tmp_path("long-string.gguf");
    gb b = {0};
    one_kv(&b, "s.long", GGUF_TYPE_STRING), gb_u64(&b, (1ull << 30) + 1);
    int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0600);
    assert_true(fd >= 0);
    int ok = write(fd, b.p, b.n) == (ssize_t)b.n && ftruncate(fd, (off_t)(b.n + (1u << 30) + 1)) == 0;
    close(fd);
    if (ok) {
        gguf_file *f = NULL;
        wgml_error err;
        wgml_status st = gguf_open(path, &f, &err);
        CHECK_ERR("1 GiB string", st, &err, WGML_ERR_FORMAT, path,
                  "s.long at offset 42 is too long (1073741825 bytes)");
        n_cases++;
    }
    remove(path);
    gb_free(&b);
}

/* ---- random damage: nothing may crash, every rejection names the file ---- */

static void random_damage(const blob *b, int rounds, uint64_t seed) {
    tu_rng r = {seed};
    size_t header = b->L.data_off; /* damage the header; data bytes are opaque */
    uint8_t *m = copy_blob(b);
    for (int i = 0; i < rounds; i++) {
        memcpy(m, b->p, header);
        int n_edits = 1 + (int)(tu_next(&r) % 4);
        for (int e = 0; e < n_edits; e++) {
            size_t at = (size_t)(tu_next(&r) % header);
            switch (tu_next(&r) % 4) {
            case 0: m[at] ^= (uint8_t)(1u << (tu_next(&r) % 8)); break;
            case 1: m[at] = (uint8_t)tu_next(&r); break;
            case 2: m[at] = (uint8_t)(tu_next(&r) & 1 ? 0xff : 0); break;
            default: /* a plausible-looking small or huge length */
                if (at + 8 <= header)
                    put_u64_at(m, at, tu_next(&r) & 1 ? tu_next(&r) % 64 : ~0ull >> (tu_next(&r) % 64));
            }
        }
        gguf_file *f = NULL;
        wgml_error err;
        wgml_error_clear(&err);
        n_cases++;
        wgml_status st = gguf_open_memory(m, b->n, NAME, &f, &err);
        if (st == WGML_OK) {
            /* whatever was accepted must lie inside the bytes */
            for (int64_t t = 0; t < gguf_n_tensors(f); t++) {
                const gguf_tensor *ti = gguf_tensor_at(f, t);
                const uint8_t *d = ti->data;
                assert_true(d >= m && d + ti->size <= m + b->n);
            }
            for (int64_t k = 0; k < gguf_n_kv(f); k++) {
                const gguf_kv *kv = gguf_kv_at(f, k);
                assert_true(kv->raw >= m && kv->raw + kv->raw_size <= m + b->n);
            }
            gguf_close(f);
        } else {
            if (st != WGML_ERR_FORMAT && st != WGML_ERR_UNSUPPORTED)
                fail_msg("round %d: status %d: %s", i, (int)st, err.message);
            if (strncmp(err.message, NAME ": ", strlen(NAME) + 2) != 0) fail_msg("round %d: %s", i, err.message);
        }
    }
    free(m);
}

static void test_random_damage(void **state) {
    (void)state;
    blob b;
    load(&b, "models/stories260K-Q8_0mix.gguf");
    random_damage(&b, 3000, 1);
    unload(&b);
    load(&b, "models/stories260K.gguf");
    random_damage(&b, 3000, 2);
    unload(&b);
}

/* ---- out of memory at every allocation ---- */

static void oom_loop(const uint8_t *p, size_t n, const char *what) {
    long fails = 0;
    for (long k = 0;; k++) {
        gguf_file *f = NULL;
        wgml_error err;
        wgml_alloc_fail_after(k);
        wgml_status st = gguf_open_memory(p, n, what, &f, &err);
        wgml_alloc_fail_after(-1);
        if (st == WGML_OK) {
            assert_non_null(f);
            gguf_close(f);
            break;
        }
        assert_null(f);
        CHECK_ERR(what, st, &err, WGML_ERR_OUT_OF_MEMORY, "out of memory");
        fails++;
        if (k > 100000) fail_msg("%s: never succeeds", what);
    }
    assert_true(fails > 2);
    n_cases += (int)fails;
}

static void test_out_of_memory(void **state) {
    (void)state;
    static const char *files[] = {"models/stories260K.gguf", "models/stories260K-Q8_0mix.gguf",
                                  "vocab/ggml-vocab-gpt-2.gguf"};
    for (size_t i = 0; i < 3; i++) {
        blob b;
        load(&b, files[i]);
        oom_loop(b.p, b.n, files[i]);
        unload(&b);
    }
    /* nested arrays own several allocations each */
    gb b = {0};
    one_kv(&b, "s.aa", GGUF_TYPE_ARRAY), gb_u32(&b, GGUF_TYPE_ARRAY), gb_u64(&b, 20);
    for (int i = 0; i < 20; i++)
        gb_u32(&b, GGUF_TYPE_STRING), gb_u64(&b, 2), gb_str(&b, "x"), gb_str(&b, "yz");
    oom_loop(b.p, b.n, "nested");
    gb_free(&b);
}

static int report(void **state) {
    (void)state;
    printf("corrupted or failing inputs checked: %d\n", n_cases);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_truncation),      cmocka_unit_test(test_header),
        cmocka_unit_test(test_keys_and_values), cmocka_unit_test(test_tensor_infos),
        cmocka_unit_test(test_via_files),       cmocka_unit_test(test_synthetic),
        cmocka_unit_test(test_many_entries),    cmocka_unit_test(test_string_too_long),
        cmocka_unit_test(test_random_damage),   cmocka_unit_test(test_out_of_memory),
    };
    return cmocka_run_group_tests(tests, NULL, report);
}
