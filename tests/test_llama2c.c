/*
 * test_llama2c.c - llama2.c checkpoint + tokenizer to GGUF.
 *
 * The legacy stories260K.bin + tok512.bin must convert to the tensors and
 * vocabulary of stories260K.gguf byte for byte (output.weight is absent from
 * ours: the classifier is tied). A v1 ("ak42") checkpoint assembled here from
 * the legacy one converts to the same tensors; unshared classifiers (legacy:
 * negative vocab, v1: flag 0) come out as a separate output.weight. Damaged
 * checkpoints and tokenizers must fail with a message naming the file and the
 * problem, and a failed conversion - also when out of memory at any
 * allocation, or cancelled - leaves neither the output nor its ".tmp".
 */
#include "check_err.h"
#include "core/alloc.h"
#include "format/gguf.h"
#include "format/llama2c.h"
#include "gguf_bytes.h"
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CKPT "models/llama2c/stories260K.bin"
#define TOK  "models/llama2c/tok512.bin"
#define REF  "models/stories260K.gguf"

static int n_cases;

static int exists(const char *p) { return access(p, F_OK) == 0; }

/* tu_tmp_path() hands out a ring of 8 buffers: paths kept across calls are copied. */
typedef struct {
    char s[512];
} path_buf;

static const char *tmp_path(path_buf *b, const char *name) {
    snprintf(b->s, sizeof b->s, "%s", tu_tmp_path(name));
    return b->s;
}

static const char *write_tmp(path_buf *b, const char *name, const void *p, size_t n) {
    tmp_path(b, name);
    assert_int_equal(tu_write_file(b->s, p, n), 0);
    return b->s;
}

static void assert_no_output(const char *out, const char *what) {
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.tmp", out);
    if (exists(out)) fail_msg("%s: a failed conversion left %s", what, out);
    if (exists(tmp)) fail_msg("%s: a failed conversion left %s", what, tmp);
}

static gguf_file *open_or_fail(const char *path) {
    gguf_file *f = NULL;
    wgml_error err;
    if (gguf_open(path, &f, &err)) fail_msg("%s", err.message);
    return f;
}

/* Converts and expects failure with s1/s2 in the message and no output left. */
static void expect_fail(const char *what, const char *ck, const char *tok, wgml_status want, const char *s1,
                        const char *s2) {
    path_buf pout;
    const char *out = tmp_path(&pout, "fail.gguf");
    remove(out);
    wgml_error err;
    n_cases++;
    wgml_status st = llama2c_convert(ck, tok, out, NULL, NULL, &err);
    CHECK_ERR(what, st, &err, want, s1, s2);
    assert_no_output(out, what);
}

static void convert_ok(const char *ck, const char *tok, const char *out) {
    wgml_error err;
    remove(out);
    if (llama2c_convert(ck, tok, out, NULL, NULL, &err)) fail_msg("%s", err.message);
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.tmp", out);
    assert_false(exists(tmp));
}

/* ---- the checkpoint's layout, computed here independently of the library ---- */

typedef struct {
    int32_t dim, hidden, layers, heads, kv_heads, vocab, seq;
} hdr;

/* Sections of a legacy checkpoint in file order (floats; all layers together). */
enum { S_EMB, S_ATTN_NORM, S_WQ, S_WK, S_WV, S_WO, S_FFN_NORM, S_W1, S_W2, S_W3, S_NORM, S_ROPE, S_N };

static void sections(const hdr *h, size_t n[S_N]) {
    size_t L = (size_t)h->layers, d = (size_t)h->dim, f = (size_t)h->hidden, hd = d / (size_t)h->heads;
    size_t kv = hd * (size_t)h->kv_heads, v = (size_t)(h->vocab < 0 ? -h->vocab : h->vocab);
    size_t s[S_N] = {v * d, L * d,     L * d * d, L * d * kv, L * d * kv, L * d * d,
                     L * d, L * d * f, L * f * d, L * d * f,  d,          (size_t)h->seq * hd};
    memcpy(n, s, sizeof s);
}

typedef struct {
    uint8_t *p;
    size_t n;
    hdr h;
    size_t off[S_N], len[S_N]; /* bytes */
} ckpt;

static void load_legacy(ckpt *c) {
    c->p = tu_read_file(tu_shared(CKPT), &c->n);
    assert_non_null(c->p);
    memcpy(&c->h, c->p, sizeof c->h);
    size_t nf[S_N];
    sections(&c->h, nf);
    size_t o = 28;
    for (int i = 0; i < S_N; i++) {
        c->off[i] = o;
        c->len[i] = nf[i] * 4;
        o += c->len[i];
    }
    assert_int_equal(o, c->n); /* shared classifier: nothing after the RoPE tables */
}

/* Deterministic classifier weights. */
static void put_classifier(gb *b, const hdr *h) {
    tu_rng r = {7};
    for (int i = 0; i < h->dim * 512; i++)
        gb_f32(b, tu_normal(&r) * 0.02f);
}

/* The legacy checkpoint with a negative vocab and a classifier after the RoPE tables. */
static void build_legacy_unshared(const ckpt *c, gb *b) {
    hdr h = c->h;
    h.vocab = -h.vocab;
    gb_put(b, &h, sizeof h);
    gb_put(b, c->p + 28, c->n - 28);
    put_classifier(b, &c->h);
}

/* The same weights in the v1 layout: 256-byte header, norms first, no RoPE tables. */
static void build_v1(const ckpt *c, gb *b, int shared, int32_t version) {
    gb_u32(b, 0x616b3432u);
    gb_put(b, &version, 4);
    gb_put(b, &c->h, sizeof c->h);
    gb_u8(b, (uint8_t)shared);
    gb_zeros(b, 256 - b->n);
    static const int order[] = {S_ATTN_NORM, S_FFN_NORM, S_NORM, S_EMB, S_WQ, S_WK, S_WV, S_WO, S_W1, S_W2, S_W3};
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++)
        gb_put(b, c->p + c->off[order[i]], c->len[order[i]]);
    if (!shared) put_classifier(b, &c->h);
}

/* ---- comparisons ---- */

/* Every tensor of `ref` is in `ours` with the same type, shape and bytes; ours
 * has no others. output.weight may be absent from ours when `tied`. */
static void assert_tensors_match(const gguf_file *ours, const gguf_file *ref, int tied) {
    int64_t matched = 0;
    for (int64_t i = 0; i < gguf_n_tensors(ref); i++) {
        const gguf_tensor *r = gguf_tensor_at(ref, i);
        const gguf_tensor *t = gguf_find_tensor(ours, r->name);
        if (!t) {
            if (tied && strcmp(r->name, "output.weight") == 0) continue;
            fail_msg("tensor '%s' missing from the conversion", r->name);
        }
        if (t->type != r->type || t->n_dims != r->n_dims || memcmp(t->ne, r->ne, sizeof t->ne) != 0)
            fail_msg("tensor '%s': type or shape differs", r->name);
        if (t->size != r->size || memcmp(t->data, r->data, r->size) != 0)
            fail_msg("tensor '%s': data differs", r->name);
        matched++;
    }
    assert_int_equal(matched, gguf_n_tensors(ours));
}

static void assert_same_array(const gguf_file *a, const gguf_file *b, const char *key) {
    const gguf_kv *x = gguf_find_kv(a, key), *y = gguf_find_kv(b, key);
    if (!x || !y) fail_msg("'%s' missing", key);
    assert_int_equal(x->value.type, GGUF_TYPE_ARRAY);
    assert_int_equal(x->value.v.arr.elem_type, y->value.v.arr.elem_type);
    assert_int_equal(x->value.v.arr.n, y->value.v.arr.n);
    if (x->raw_size != y->raw_size || memcmp(x->raw, y->raw, x->raw_size) != 0) fail_msg("'%s' differs", key);
}

static void assert_same_int(const gguf_file *a, const gguf_file *b, const char *key) {
    int64_t x = -1, y = -2;
    wgml_error err;
    assert_int_equal(gguf_get_int(a, key, 0, INT64_MAX, &x, &err), 1);
    assert_int_equal(gguf_get_int(b, key, 0, INT64_MAX, &y, &err), 1);
    if (x != y) fail_msg("'%s': %lld vs %lld", key, (long long)x, (long long)y);
}

static void assert_matches_reference(const char *path, int tied) {
    gguf_file *ours = open_or_fail(path), *ref = open_or_fail(tu_shared(REF));
    assert_tensors_match(ours, ref, tied);
    assert_same_array(ours, ref, "tokenizer.ggml.tokens");
    assert_same_array(ours, ref, "tokenizer.ggml.scores");
    assert_same_array(ours, ref, "tokenizer.ggml.token_type");
    static const char *ints[] = {
        "llama.embedding_length",      "llama.feed_forward_length",     "llama.block_count",
        "llama.attention.head_count",  "llama.attention.head_count_kv", "llama.rope.dimension_count",
        "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",   "tokenizer.ggml.unknown_token_id"};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        assert_same_int(ours, ref, ints[i]);
    /* the context length is the checkpoint's seq_len (the reference file says 2048) */
    int64_t ctx = 0;
    wgml_error e;
    assert_int_equal(gguf_get_int(ours, "llama.context_length", 0, INT64_MAX, &ctx, &e), 1);
    assert_int_equal(ctx, 512);
    gguf_str s;
    wgml_error err;
    assert_int_equal(gguf_get_str(ours, "general.architecture", &s, &err), 1);
    assert_true(gguf_str_eq(s, "llama"));
    assert_int_equal(gguf_get_str(ours, "tokenizer.ggml.model", &s, &err), 1);
    assert_true(gguf_str_eq(s, "llama"));
    gguf_close(ref);
    gguf_close(ours);
}

/* ---- conversions that work ---- */

static void test_legacy_matches_reference(void **state) {
    (void)state;
    path_buf pout;
    const char *out = tmp_path(&pout, "legacy.gguf");
    convert_ok(tu_shared(CKPT), tu_shared(TOK), out);
    assert_matches_reference(out, 1);
    gguf_file *f = open_or_fail(out);
    assert_null(gguf_find_tensor(f, "output.weight"));
    gguf_close(f);
    remove(out);
}

static void test_v1_matches_reference(void **state) {
    (void)state;
    ckpt c;
    load_legacy(&c);
    gb b = {0};
    build_v1(&c, &b, 1, 1);
    path_buf pck, pout;
    const char *ck = write_tmp(&pck, "v1.bin", b.p, b.n);
    const char *out = tmp_path(&pout, "v1.gguf");
    convert_ok(ck, tu_shared(TOK), out);
    assert_matches_reference(out, 1);
    remove(out);
    remove(ck);
    gb_free(&b);
    free(c.p);
}

/* The classifier lands in output.weight; everything else matches the reference. */
static void check_unshared(const char *ck, const ckpt *c) {
    path_buf pout;
    const char *out = tmp_path(&pout, "unshared.gguf");
    convert_ok(ck, tu_shared(TOK), out);
    gguf_file *f = open_or_fail(out), *ref = open_or_fail(tu_shared(REF));
    const gguf_tensor *o = gguf_find_tensor(f, "output.weight");
    assert_non_null(o);
    assert_int_equal(o->ne[0], 64);
    assert_int_equal(o->ne[1], 512);
    gb cls = {0};
    put_classifier(&cls, &c->h);
    assert_int_equal(o->size, cls.n);
    assert_memory_equal(o->data, cls.p, cls.n);
    gb_free(&cls);
    for (int64_t i = 0; i < gguf_n_tensors(ref); i++) {
        const gguf_tensor *r = gguf_tensor_at(ref, i);
        if (strcmp(r->name, "output.weight") == 0) continue;
        const gguf_tensor *t = gguf_find_tensor(f, r->name);
        assert_non_null(t);
        assert_int_equal(t->size, r->size);
        assert_memory_equal(t->data, r->data, r->size);
    }
    assert_int_equal(gguf_n_tensors(f), gguf_n_tensors(ref));
    gguf_close(ref);
    gguf_close(f);
    remove(out);
}

static void test_unshared_classifier(void **state) {
    (void)state;
    ckpt c;
    load_legacy(&c);
    gb b = {0};
    build_legacy_unshared(&c, &b);
    path_buf pck;
    const char *ck = write_tmp(&pck, "legacy-unshared.bin", b.p, b.n);
    check_unshared(ck, &c);
    remove(ck);
    gb_free(&b);
    build_v1(&c, &b, 0, 1);
    ck = write_tmp(&pck, "v1-unshared.bin", b.p, b.n);
    check_unshared(ck, &c);
    remove(ck);
    gb_free(&b);
    free(c.p);
}

/* ---- damaged checkpoints ---- */

static void test_checkpoint_size(void **state) {
    (void)state;
    ckpt c;
    load_legacy(&c);
    const char *tok = tu_shared(TOK);
    path_buf pck;
    const char *ck = tmp_path(&pck, "ck.bin");
    char s[160];
    static const long deltas[] = {-1, -4, -(long)(64 * 4), +1, +4, +4096};
    for (size_t i = 0; i < sizeof deltas / sizeof deltas[0]; i++) {
        size_t n = (size_t)((long)c.n + deltas[i]);
        uint8_t *p = calloc(1, n);
        memcpy(p, c.p, n < c.n ? n : c.n);
        assert_int_equal(tu_write_file(ck, p, n), 0);
        snprintf(s, sizeof s, "implies %zu bytes but the file has %zu", c.n, n);
        expect_fail("size", ck, tok, WGML_ERR_FORMAT, ck, s);
        free(p);
    }
    /* cut at every section boundary */
    for (int i = 0; i < S_N; i++) {
        assert_int_equal(tu_write_file(ck, c.p, c.off[i]), 0);
        snprintf(s, sizeof s, "but the file has %zu", c.off[i]);
        expect_fail("section cut", ck, tok, WGML_ERR_FORMAT, ck, s);
    }
    assert_int_equal(tu_write_file(ck, c.p, 27), 0);
    expect_fail("27 bytes", ck, tok, WGML_ERR_FORMAT, ck, "27 bytes is too small for a llama2.c checkpoint");
    assert_int_equal(tu_write_file(ck, c.p, 4), 0);
    expect_fail("4 bytes", ck, tok, WGML_ERR_FORMAT, ck, "too small");
    assert_int_equal(tu_write_file(ck, "", 0), 0);
    expect_fail("empty", ck, tok, WGML_ERR_IO, ck, "not a regular, non-empty file");
    expect_fail("missing", "/nonexistent/ck.bin", tok, WGML_ERR_IO, "/nonexistent/ck.bin", "cannot open");
    expect_fail("directory", "/", tok, WGML_ERR_IO, "/: ", "not a regular");
    remove(ck);
    free(c.p);
}

static void header_case(const ckpt *c, const char *what, int field, int32_t v, wgml_status want, const char *s) {
    uint8_t *p = malloc(c->n);
    memcpy(p, c->p, c->n);
    memcpy(p + 4 * field, &v, 4);
    path_buf pck;
    const char *ck = write_tmp(&pck, "hdr.bin", p, c->n);
    expect_fail(what, ck, tu_shared(TOK), want, ck, s);
    remove(ck);
    free(p);
}

enum { H_DIM, H_HIDDEN, H_LAYERS, H_HEADS, H_KV, H_VOCAB, H_SEQ };

static void test_checkpoint_header(void **state) {
    (void)state;
    ckpt c;
    load_legacy(&c);
    const wgml_status F = WGML_ERR_FORMAT;
    header_case(&c, "dim 0", H_DIM, 0, F,
                "header dim=0 hidden=172 layers=5 heads=8 kv_heads=4 vocab=512 seq_len=512 is out of range");
    header_case(&c, "dim -64", H_DIM, -64, F, "dim=-64");
    header_case(&c, "dim huge", H_DIM, 1 << 20, F, "dim=1048576");
    header_case(&c, "dim max", H_DIM, INT32_MAX, F, "out of range");
    header_case(&c, "hidden 0", H_HIDDEN, 0, F, "hidden=0");
    header_case(&c, "hidden -1", H_HIDDEN, -1, F, "hidden=-1");
    header_case(&c, "layers 0", H_LAYERS, 0, F, "layers=0");
    header_case(&c, "layers huge", H_LAYERS, 100000, F, "layers=100000");
    header_case(&c, "heads 0", H_HEADS, 0, F, "heads=0");
    header_case(&c, "heads negative", H_HEADS, -8, F, "heads=-8");
    header_case(&c, "kv heads 0", H_KV, 0, F, "kv_heads=0");
    header_case(&c, "vocab INT32_MIN", H_VOCAB, INT32_MIN, F, "vocab=-2147483648");
    header_case(&c, "vocab huge", H_VOCAB, 1 << 24, F, "vocab=16777216");
    header_case(&c, "seq 0", H_SEQ, 0, F, "seq_len=0");
    header_case(&c, "seq negative", H_SEQ, -1, F, "seq_len=-1");
    /* in range but inconsistent */
    header_case(&c, "heads 7", H_HEADS, 7, F, "dim 64, 7 heads and 4 KV heads are inconsistent");
    header_case(&c, "kv heads 3", H_KV, 3, F, "dim 64, 8 heads and 3 KV heads are inconsistent");
    header_case(&c, "kv heads 16", H_KV, 16, F, "8 heads and 16 KV heads are inconsistent");
    header_case(&c, "odd head size", H_HEADS, 64, F, "dim 64, 64 heads"); /* head size 1 */
    /* consistent but not this file */
    header_case(&c, "layers 4", H_LAYERS, 4, F, "implies");
    header_case(&c, "dim 32", H_DIM, 32, F, "implies");
    header_case(&c, "vocab 511", H_VOCAB, 511, F, "implies");
    header_case(&c, "vocab -512 without classifier", H_VOCAB, -512, F, "separate classifier) implies");
    header_case(&c, "seq 1", H_SEQ, 1, F, "implies");
    free(c.p);
}

static void test_checkpoint_v1(void **state) {
    (void)state;
    ckpt c;
    load_legacy(&c);
    const char *tok = tu_shared(TOK);
    gb b = {0};
    build_v1(&c, &b, 1, 2);
    path_buf pck;
    const char *ck = write_tmp(&pck, "v1.bin", b.p, b.n);
    expect_fail("v1 version 2", ck, tok, WGML_ERR_UNSUPPORTED, ck, "llama2.c format version 2 is not supported");
    put_u32_at(b.p, 4, 0);
    ck = write_tmp(&pck, "v1.bin", b.p, b.n);
    expect_fail("v1 version 0", ck, tok, WGML_ERR_UNSUPPORTED, ck, "version 0");
    put_u32_at(b.p, 4, 1);
    b.p[36] = 2;
    ck = write_tmp(&pck, "v1.bin", b.p, b.n);
    expect_fail("v1 shared flag 2", ck, tok, WGML_ERR_FORMAT, ck, "shared_classifier flag is 2");
    b.p[36] = 1;
    int32_t neg = -512;
    memcpy(b.p + 8 + 4 * H_VOCAB, &neg, 4);
    ck = write_tmp(&pck, "v1.bin", b.p, b.n);
    expect_fail("v1 negative vocab", ck, tok, WGML_ERR_FORMAT, ck, "vocab=-512");
    ck = write_tmp(&pck, "v1.bin", b.p, 255);
    expect_fail("v1 header cut", ck, tok, WGML_ERR_FORMAT, ck, "truncated v1 header");
    ck = write_tmp(&pck, "v1.bin", b.p, 100);
    expect_fail("v1 header cut 100", ck, tok, WGML_ERR_FORMAT, ck, "truncated v1 header");
    int32_t v = 512;
    memcpy(b.p + 8 + 4 * H_VOCAB, &v, 4);
    ck = write_tmp(&pck, "v1.bin", b.p, b.n - 4);
    expect_fail("v1 data cut", ck, tok, WGML_ERR_FORMAT, ck, "but the file has");
    ck = write_tmp(&pck, "v1.bin", b.p, 256);
    expect_fail("v1 header only", ck, tok, WGML_ERR_FORMAT, ck, "but the file has 256");
    b.p[36] = 0; /* says unshared but has no classifier */
    ck = write_tmp(&pck, "v1.bin", b.p, b.n);
    expect_fail("v1 unshared without classifier", ck, tok, WGML_ERR_FORMAT, ck, "separate classifier");
    remove(ck);
    gb_free(&b);
    free(c.p);
}

/* ---- damaged tokenizers ---- */

typedef struct {
    int32_t max_len;
    int n;
    uint8_t *p; /* the original file */
    size_t size;
    size_t off[520]; /* each token's record */
} tokfile;

static void load_tok(tokfile *t) {
    t->p = tu_read_file(tu_shared(TOK), &t->size);
    assert_non_null(t->p);
    memcpy(&t->max_len, t->p, 4);
    size_t o = 4;
    t->n = 0;
    while (o < t->size) {
        assert_true(t->n < 520);
        t->off[t->n++] = o;
        int32_t len;
        memcpy(&len, t->p + o + 4, 4);
        o += 8 + (size_t)len;
    }
    assert_int_equal(o, t->size);
    assert_int_equal(t->n, 512);
    t->off[t->n] = t->size;
}

static void tok_case(const char *what, const uint8_t *p, size_t n, wgml_status want, const char *s) {
    path_buf ptok;
    const char *tok = write_tmp(&ptok, "tok.bin", p, n);
    expect_fail(what, tu_shared(CKPT), tok, want, tok, s);
    remove(tok);
}

static void test_tokenizer(void **state) {
    (void)state;
    tokfile t;
    load_tok(&t);
    uint8_t *m = malloc(t.size + 16);
    char s[160];
    /* cut at every record and inside a few */
    for (int i = 0; i < t.n; i += (i < 8 || i > 500) ? 1 : 37) {
        snprintf(s, sizeof s, "ends after %d tokens; the checkpoint has 512", i);
        tok_case("cut at record", t.p, t.off[i], WGML_ERR_FORMAT, s);
        snprintf(s, sizeof s, "ends after %d tokens", i);
        tok_case("cut in record header", t.p, t.off[i] + 5, WGML_ERR_FORMAT, s);
        snprintf(s, sizeof s, "token %d has length", i);
        if (t.off[i + 1] - t.off[i] > 9) tok_case("cut in token text", t.p, t.off[i + 1] - 1, WGML_ERR_FORMAT, s);
    }
    tok_case("max len only", t.p, 4, WGML_ERR_FORMAT, "ends after 0 tokens");
    tok_case("3 bytes", t.p, 3, WGML_ERR_FORMAT, "too small for a llama2.c tokenizer");
    tok_case("empty", t.p, 0, WGML_ERR_IO, "not a regular, non-empty file");
    /* trailing bytes */
    memcpy(m, t.p, t.size);
    m[t.size] = 0;
    tok_case("1 trailing byte", m, t.size + 1, WGML_ERR_FORMAT, "1 unexpected bytes after 512 tokens");
    memset(m + t.size, 0xab, 16);
    tok_case("16 trailing bytes", m, t.size + 16, WGML_ERR_FORMAT, "16 unexpected bytes after 512 tokens");
    /* lengths */
    static const struct {
        int32_t len;
        const char *msg;
    } lens[] = {{-1, "token 5 has length -1 (max 7"},
                {-6, "token 5 has length -6"},
                {INT32_MIN, "token 5 has length -2147483648"},
                {8, "token 5 has length 8 (max 7"},
                {INT32_MAX, "token 5 has length 2147483647"}};
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        memcpy(m, t.p, t.size);
        memcpy(m + t.off[5] + 4, &lens[i].len, 4);
        tok_case("token length", m, t.size, WGML_ERR_FORMAT, lens[i].msg);
    }
    /* a length within max_len but one byte longer than the token: the rest shifts */
    memcpy(m, t.p, t.size);
    int32_t len7 = 7;
    memcpy(m + t.off[5] + 4, &len7, 4);
    tok_case("token 1 byte longer", m, t.size, WGML_ERR_FORMAT, NULL);
    /* the last token reaching past the end */
    memcpy(m, t.p, t.size);
    int32_t last_len;
    memcpy(&last_len, m + t.off[511] + 4, 4);
    last_len += 1;
    memcpy(m + t.off[511] + 4, &last_len, 4);
    snprintf(s, sizeof s, "token 511 has length %d", last_len);
    tok_case("last token past EOF", m, t.size, WGML_ERR_FORMAT, s);
    /* max token length */
    static const int32_t maxes[] = {0, -1, 4097, INT32_MIN};
    for (size_t i = 0; i < sizeof maxes / sizeof maxes[0]; i++) {
        memcpy(m, t.p, t.size);
        memcpy(m, &maxes[i], 4);
        snprintf(s, sizeof s, "max token length %d is out of range", maxes[i]);
        tok_case("max len", m, t.size, WGML_ERR_FORMAT, s);
    }
    /* fewer tokens than the vocabulary: a 511-token file */
    tok_case("511 tokens", t.p, t.off[511], WGML_ERR_FORMAT, "ends after 511 tokens; the checkpoint has 512");
    expect_fail("missing tokenizer", tu_shared(CKPT), "/nonexistent/tok.bin", WGML_ERR_IO, "/nonexistent/tok.bin",
                "cannot open");
    free(m);
    free(t.p);
}

/* ---- output, cancelling, out of memory ---- */

static int cancel_after(void *user, uint64_t done, uint64_t total) {
    int *calls = user;
    assert_true(done <= total);
    return ++*calls >= 3;
}

static void test_output_and_cancel(void **state) {
    (void)state;
    wgml_error err;
    CHECK_ERR("output folder missing",
              llama2c_convert(tu_shared(CKPT), tu_shared(TOK), "/nonexistent-dir/out.gguf", NULL, NULL, &err), &err,
              WGML_ERR_IO, "/nonexistent-dir/out.gguf.tmp", "cannot create");
    path_buf pout;
    const char *out = tmp_path(&pout, "cancel.gguf");
    int calls = 0;
    CHECK_ERR("cancelled", llama2c_convert(tu_shared(CKPT), tu_shared(TOK), out, cancel_after, &calls, &err), &err,
              WGML_ERR_INVALID_ARGUMENT, "cancelled");
    assert_int_equal(calls, 3);
    assert_no_output(out, "cancelled");
    /* a failed conversion does not touch an existing file of the same name either */
    assert_int_equal(tu_write_file(out, "keep", 4), 0);
    tokfile t;
    load_tok(&t);
    path_buf ptok;
    const char *tok = write_tmp(&ptok, "tok-short.bin", t.p, t.off[100]);
    assert_int_not_equal(llama2c_convert(tu_shared(CKPT), tok, out, NULL, NULL, &err), WGML_OK);
    size_t n;
    unsigned char *kept = tu_read_file(out, &n);
    assert_true(kept && n == 4 && memcmp(kept, "keep", 4) == 0);
    free(kept);
    free(t.p);
    remove(tok);
    remove(out);
}

static void test_out_of_memory(void **state) {
    (void)state;
    path_buf pout;
    const char *out = tmp_path(&pout, "oom.gguf");
    remove(out);
    long fails = 0;
    for (long k = 0;; k++) {
        wgml_error err;
        wgml_alloc_fail_after(k);
        wgml_status st = llama2c_convert(tu_shared(CKPT), tu_shared(TOK), out, NULL, NULL, &err);
        wgml_alloc_fail_after(-1);
        if (st == WGML_OK) break;
        CHECK_ERR("oom", st, &err, WGML_ERR_OUT_OF_MEMORY, "out of memory");
        assert_no_output(out, "oom");
        fails++;
        if (k > 100000) fail_msg("never succeeds");
    }
    assert_true(fails > 500); /* one allocation per token at least */
    n_cases += (int)fails;
    assert_true(exists(out));
    remove(out);
}

static int report(void **state) {
    (void)state;
    printf("failing conversions checked: %d\n", n_cases);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_legacy_matches_reference),
        cmocka_unit_test(test_v1_matches_reference),
        cmocka_unit_test(test_unshared_classifier),
        cmocka_unit_test(test_checkpoint_size),
        cmocka_unit_test(test_checkpoint_header),
        cmocka_unit_test(test_checkpoint_v1),
        cmocka_unit_test(test_tokenizer),
        cmocka_unit_test(test_output_and_cancel),
        cmocka_unit_test(test_out_of_memory),
    };
    return cmocka_run_group_tests(tests, NULL, report);
}
