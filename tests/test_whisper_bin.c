/*
 * test_whisper_bin.c - whisper.cpp's ggml .bin read as wgml's Whisper GGUF
 * (format/ggml_whisper.h, format/model_file.h).
 *
 * The shared micro model (../shared/whisper/whisper-micro-random.bin) loads:
 * its hyper-parameters and vocabulary become the whisper.* keys, its 128
 * tensors keep their bytes (compared with an independent walk of the file,
 * F16 values decoded), the convolutions are permuted taps-major (every
 * element checked by index), the filters equal mel_filters_80.npy. A small
 * synthetic file covers every tensor type. Hostile files - every prefix of
 * the synthetic one, sampled prefixes of the real one, huge counts, negative
 * lengths, bad types, shapes and names, duplicates, out of memory at every
 * allocation - are each a clear error naming the file, never a crash (the
 * ASan build runs this too).
 */
#include "check_err.h"
#include "core/alloc.h"
#include "core/fp16.h"
#include "format/ggml_whisper.h"
#include "format/model_file.h"
#include "gguf_bytes.h"
#include "npy.h"
#include "testutil.h"

#include "../fuzz/whisper_bin_build.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MICRO "whisper/whisper-micro-random.bin"
#define NAME "t.bin"

/* ---- an independent walk of a .bin ---- */

typedef struct {
    char name[128];
    int32_t type, n_dims, ne[4];
    size_t data, size; /* offset in the file, bytes */
} walk_tensor;

typedef struct {
    int32_t hp[10], ftype, n_mel, n_fft, n_tokens;
    size_t filters, tokens; /* offsets */
    walk_tensor t[256];
    int n;
    size_t header_end; /* where the first tensor starts */
} walk;

static int32_t rd32(const uint8_t *p, size_t at) {
    int32_t v;
    memcpy(&v, p + at, 4);
    return v;
}

static void walk_file(const uint8_t *p, size_t size, walk *w) {
    memset(w, 0, sizeof *w);
    size_t o = 4;
    for (int i = 0; i < 10; i++, o += 4)
        w->hp[i] = rd32(p, o);
    w->ftype = rd32(p, o), o += 4;
    w->n_mel = rd32(p, o), w->n_fft = rd32(p, o + 4), o += 8;
    w->filters = o;
    o += (size_t)w->n_mel * (size_t)w->n_fft * 4;
    w->n_tokens = rd32(p, o), o += 4;
    w->tokens = o;
    for (int32_t i = 0; i < w->n_tokens; i++)
        o += 4 + (size_t)rd32(p, o);
    w->header_end = o;
    while (o < size) {
        assert_true(w->n < 256);
        walk_tensor *t = &w->t[w->n++];
        t->n_dims = rd32(p, o);
        int32_t len = rd32(p, o + 4);
        t->type = rd32(p, o + 8);
        o += 12;
        size_t n_el = 1;
        for (int d = 0; d < 4; d++)
            t->ne[d] = 1;
        for (int d = 0; d < t->n_dims; d++, o += 4)
            t->ne[d] = rd32(p, o), n_el *= (size_t)t->ne[d];
        memcpy(t->name, p + o, (size_t)len);
        o += (size_t)len;
        t->data = o;
        t->size = wb_row_bytes(t->type, t->ne[0]) * (n_el / (size_t)t->ne[0]);
        o += t->size;
    }
    assert_int_equal(o, size);
}

static int64_t key_int(const gguf_file *f, const char *key) {
    int64_t v = -1;
    wgml_error err;
    assert_int_equal(gguf_get_int(f, key, 0, INT32_MAX, &v, &err), 1);
    return v;
}

/* Every tensor of the walk is in g with its bytes (convolutions permuted). */
static void check_tensors(const gguf_file *g, const uint8_t *p, const walk *w) {
    assert_int_equal(gguf_n_tensors(g), w->n + 1);
    const gguf_tensor *mf = gguf_tensor_at(g, 0);
    assert_string_equal(mf->name, "mel_filters");
    assert_int_equal(mf->type, 0);
    assert_int_equal(mf->n_dims, 2);
    assert_int_equal(mf->ne[0], w->n_fft);
    assert_int_equal(mf->ne[1], w->n_mel);
    assert_memory_equal(mf->data, p + w->filters, (size_t)w->n_mel * (size_t)w->n_fft * 4);
    for (int i = 0; i < w->n; i++) {
        const walk_tensor *t = &w->t[i];
        const gguf_tensor *x = gguf_find_tensor(g, t->name);
        if (!x) fail_msg("tensor '%s' missing", t->name);
        assert_ptr_equal(x, gguf_tensor_at(g, i + 1)); /* in file order, after the filters */
        assert_int_equal(x->type, t->type);
        assert_int_equal(x->size, t->size);
        const uint8_t *src = p + t->data, *dst = x->data;
        int conv_w = !strcmp(t->name, "encoder.conv1.weight") || !strcmp(t->name, "encoder.conv2.weight");
        int conv_b = !strcmp(t->name, "encoder.conv1.bias") || !strcmp(t->name, "encoder.conv2.bias");
        if (conv_w) {
            /* PyTorch w[o][c][k] (ne {3, C, S}) is element k C + c of row o (ne {3 C, S}) */
            const int64_t C = t->ne[1], S = t->ne[2];
            const size_t es = t->type == 0 ? 4 : 2;
            assert_int_equal(x->n_dims, 2);
            assert_int_equal(x->ne[0], 3 * C);
            assert_int_equal(x->ne[1], S);
            for (int64_t o = 0; o < S; o++)
                for (int64_t c = 0; c < C; c++)
                    for (int64_t k = 0; k < 3; k++)
                        if (memcmp(dst + (size_t)(o * 3 * C + k * C + c) * es, src + (size_t)((o * C + c) * 3 + k) * es,
                                   es))
                            fail_msg("%s: w[%lld][%lld][%lld] misplaced", t->name, (long long)o, (long long)c,
                                     (long long)k);
            continue;
        }
        if (conv_b && t->n_dims == 2) {
            assert_int_equal(x->n_dims, 1);
            assert_int_equal(x->ne[0], t->ne[1]);
        } else {
            assert_int_equal(x->n_dims, t->n_dims);
            for (int d = 0; d < 4; d++)
                assert_int_equal(x->ne[d], t->ne[d]);
        }
        assert_memory_equal(dst, src, t->size);
    }
}

/* ---- the micro model ---- */

static void test_micro(void **state) {
    (void)state;
    const char *path = tu_shared(MICRO);
    size_t size;
    uint8_t *p = tu_read_file(path, &size);
    assert_non_null(p);
    assert_int_equal(size, 17813421);
    walk w;
    walk_file(p, size, &w);
    assert_int_equal(w.n, 128);
    assert_int_equal(w.n_tokens, 50257);

    wgml_error err;
    gguf_file *g = NULL;
    wgml_model_format fmt = WGML_MODEL_FORMAT_UNKNOWN;
    if (wgml_model_file_open_format(path, &g, &fmt, &err)) fail_msg("%s", err.message);
    assert_int_equal(fmt, WGML_MODEL_FORMAT_WHISPER_BIN);
    assert_string_equal(gguf_name(g), path);

    gguf_str arch;
    assert_int_equal(gguf_get_str(g, "general.architecture", &arch, &err), 1);
    assert_true(gguf_str_eq(arch, "whisper"));
    assert_int_equal(key_int(g, "general.file_type"), 1);
    static const char *const keys[10] = {"whisper.vocab_size",
                                         "whisper.audio.context_length",
                                         "whisper.audio.embedding_length",
                                         "whisper.audio.head_count",
                                         "whisper.audio.block_count",
                                         "whisper.text.context_length",
                                         "whisper.text.embedding_length",
                                         "whisper.text.head_count",
                                         "whisper.text.block_count",
                                         "whisper.n_mels"};
    static const int32_t want[10] = {51865, 1500, 128, 2, 3, 448, 128, 2, 3, 80};
    for (int i = 0; i < 10; i++) {
        assert_int_equal(w.hp[i], want[i]);
        assert_int_equal(key_int(g, keys[i]), want[i]);
    }
    const gguf_value *toks;
    assert_int_equal(gguf_get_arr(g, "whisper.tokens", GGUF_TYPE_STRING, &toks, &err), 1);
    assert_int_equal(toks->v.arr.n, 50257);
    size_t o = w.tokens;
    for (int i = 0; i < 50257; i++) {
        int32_t len = rd32(p, o);
        assert_int_equal(toks->v.arr.items[i].v.str.len, len);
        assert_memory_equal(toks->v.arr.items[i].v.str.ptr, p + o + 4, (size_t)len);
        o += 4 + (size_t)len;
    }
    assert_int_equal(gguf_n_kv(g), 13);
    check_tensors(g, p, &w);

    /* the filters are the official bank */
    npy_array mf;
    assert_int_equal(npy_read(tu_shared("whisper/mel_filters_80.npy"), &mf), 0);
    assert_int_equal(mf.ndim, 2);
    assert_int_equal(mf.shape[0], 80);
    assert_int_equal(mf.shape[1], 201);
    const float *f = gguf_find_tensor(g, "mel_filters")->data;
    for (int64_t i = 0; i < mf.n; i++)
        if (f[i] != (float)mf.v[i]) fail_msg("mel_filters[%lld] = %g, expected %g", (long long)i, f[i], mf.v[i]);
    npy_free(&mf);

    /* F16 values as decoded: a few spot checks against the file's bytes */
    const gguf_tensor *q = gguf_find_tensor(g, "decoder.blocks.2.cross_attn.value.weight");
    assert_non_null(q);
    assert_int_equal(q->type, 1);
    assert_int_equal(q->ne[0], 128);
    assert_int_equal(q->ne[1], 128);
    for (int i = 0; i < 128 * 128; i += 997) {
        uint16_t h;
        const walk_tensor *wt = NULL;
        for (int k = 0; k < w.n; k++)
            if (!strcmp(w.t[k].name, q->name)) wt = &w.t[k];
        memcpy(&h, p + wt->data + 2 * (size_t)i, 2);
        assert_true(wgml_f16_to_f32(((const uint16_t *)q->data)[i]) == wgml_f16_to_f32(h));
        assert_true(fabsf(wgml_f16_to_f32(h)) < 2 / sqrtf(128.0f) * 1.001f); /* the README's half-width */
    }
    /* the conv1 weight: element [o][c][k] by index math, in value */
    const gguf_tensor *c1 = gguf_find_tensor(g, "encoder.conv1.weight");
    assert_int_equal(c1->ne[0], 240);
    assert_int_equal(c1->ne[1], 128);
    {
        const int o1 = 77, c = 41, k = 2;
        uint16_t h;
        memcpy(&h, p + w.t[1].data + 2 * (size_t)((o1 * 80 + c) * 3 + k), 2);
        assert_string_equal(w.t[1].name, "encoder.conv1.weight");
        assert_true(wgml_f16_to_f32(((const uint16_t *)c1->data)[o1 * 240 + k * 80 + c]) == wgml_f16_to_f32(h));
    }
    const gguf_tensor *b1 = gguf_find_tensor(g, "encoder.conv2.bias");
    assert_int_equal(b1->n_dims, 1);
    assert_int_equal(b1->ne[0], 128);
    assert_int_equal(b1->type, 0);
    gguf_close(g);

    /* from memory: the result owns its bytes (the input may go at once) */
    uint8_t *copy = malloc(size);
    memcpy(copy, p, size);
    if (wgml_model_file_open_memory(copy, size, "micro.bin", &g, &err)) fail_msg("%s", err.message);
    free(copy);
    assert_string_equal(gguf_name(g), "micro.bin");
    check_tensors(g, p, &w);
    gguf_close(g);
    free(p);
}

/* Prefixes of the real file: every length over the header's first bytes and
 * the first tokens, then sampled offsets (every tensor boundary and the bytes
 * around it, and a spread over the data): an error naming the file, or a
 * file with the tensors that fit when the cut falls between two. */
static void test_micro_prefixes(void **state) {
    (void)state;
    size_t size;
    uint8_t *p = tu_read_file(tu_shared(MICRO), &size);
    assert_non_null(p);
    walk w;
    walk_file(p, size, &w);
    size_t cuts[4096];
    int n = 0;
    for (size_t c = 0; c < w.filters + 64; c++)
        cuts[n++] = c;
    for (size_t c = w.tokens - 8; c < w.tokens + 300; c++)
        cuts[n++] = c;
    for (size_t c = w.header_end - 40; c < w.header_end + 80; c++)
        cuts[n++] = c;
    /* tensor boundaries (each a valid file of fewer tensors, converted whole: every 4th) */
    int n_boundary = 0;
    for (int i = 1; i < w.n; i++) {
        size_t b = w.t[i].data - 12 - 4 * (size_t)w.t[i].n_dims - strlen(w.t[i].name); /* tensor i's header */
        for (int d = -2; d <= 2; d++)
            if (d || i % 4 == 0 || i == w.n - 1) cuts[n++] = (size_t)((long long)b + d);
        n_boundary += i % 4 == 0 || i == w.n - 1;
    }
    for (int i = 0; i < 200; i++)
        cuts[n++] = w.header_end + (size - w.header_end) / 200 * (size_t)i + 13;
    cuts[n++] = size - 1;
    assert_true(n <= 4096);
    int ok = 0;
    for (int i = 0; i < n; i++) {
        size_t cut = cuts[i];
        wgml_error err;
        gguf_file *g = NULL;
        wgml_status st = ggml_whisper_open_memory(p, cut, NAME, &g, &err);
        int boundary = cut == w.header_end;
        for (int k = 1; k < w.n; k++)
            boundary |= cut == w.t[k].data - 12 - 4 * (size_t)w.t[k].n_dims - strlen(w.t[k].name);
        if (st == WGML_OK) {
            if (!boundary || cut == w.header_end) fail_msg("a prefix of %zu bytes was accepted", cut);
            ok++;
            gguf_close(g);
            continue;
        }
        if (boundary && cut != w.header_end) fail_msg("a prefix of %zu bytes (a tensor boundary): %s", cut, err.message);
        assert_null(g);
        assert_int_equal(st, WGML_ERR_FORMAT);
        if (strncmp(err.message, NAME ": ", strlen(NAME) + 2)) fail_msg("cut %zu: %s", cut, err.message);
    }
    assert_int_equal(ok, n_boundary);
    free(p);
}

/* ---- the synthetic model ---- */

static void check_ok(const uint8_t *p, size_t n) {
    wgml_error err;
    gguf_file *g = NULL;
    if (ggml_whisper_open_memory(p, n, NAME, &g, &err)) fail_msg("rejected: %s", err.message);
    walk w;
    walk_file(p, n, &w);
    check_tensors(g, p, &w);
    gguf_close(g);
}

static void check_bad(const char *what, const uint8_t *p, size_t n, wgml_status want, const char *s1, const char *s2) {
    wgml_error err;
    gguf_file *g = (gguf_file *)&err;
    wgml_status st = ggml_whisper_open_memory(p, n, NAME, &g, &err);
    if (st == WGML_OK) gguf_close(g);
    assert_null(g);
    CHECK_ERR(what, st, &err, want, NAME ": ", s1, s2);
}

static void test_small(void **state) {
    (void)state;
    gb b = {0};
    int nt = wb_small_model(&b);
    assert_int_equal(nt, 11);
    check_ok(b.p, b.n);
    wgml_error err;
    gguf_file *g;
    assert_int_equal(ggml_whisper_open_memory(b.p, b.n, NULL, &g, &err), WGML_OK);
    assert_string_equal(gguf_name(g), "<memory>");
    assert_int_equal(key_int(g, "whisper.vocab_size"), 300);
    assert_int_equal(key_int(g, "general.file_type"), 1);
    const gguf_tensor *c = gguf_find_tensor(g, "encoder.conv1.bias");
    assert_int_equal(c->n_dims, 1);
    assert_int_equal(c->ne[0], 8);
    gguf_close(g);

    /* through a file, and written out as a GGUF file */
    const char *path = tu_tmp_path("small.bin"), *out = tu_tmp_path("small.gguf");
    assert_int_equal(tu_write_file(path, b.p, b.n), 0);
    wgml_model_format fmt;
    assert_int_equal(wgml_model_file_open_format(path, &g, &fmt, &err), WGML_OK);
    assert_int_equal(fmt, WGML_MODEL_FORMAT_WHISPER_BIN);
    gguf_close(g);
    assert_int_equal(ggml_whisper_convert(b.p, b.n, "small.bin", out, &err), WGML_OK);
    assert_int_equal(wgml_model_file_open_format(out, &g, &fmt, &err), WGML_OK);
    assert_int_equal(fmt, WGML_MODEL_FORMAT_GGUF);
    walk w;
    walk_file(b.p, b.n, &w);
    check_tensors(g, b.p, &w);
    gguf_close(g);
    remove(out);

    /* every prefix: an error naming the file, or (between two tensors) fewer tensors */
    size_t bounds[16];
    for (int i = 0; i < w.n; i++)
        bounds[i] = w.t[i].data - 12 - 4 * (size_t)w.t[i].n_dims - strlen(w.t[i].name);
    for (size_t cut = 0; cut < b.n; cut++) {
        gguf_file *h = NULL;
        wgml_status st = ggml_whisper_open_memory(b.p, cut, NAME, &h, &err);
        int boundary = 0;
        for (int i = 1; i < w.n; i++)
            boundary |= cut == bounds[i];
        if (boundary) {
            if (st) fail_msg("cut %zu: %s", cut, err.message);
            gguf_close(h);
            continue;
        }
        if (st == WGML_OK) fail_msg("a prefix of %zu bytes was accepted", cut);
        assert_int_equal(st, WGML_ERR_FORMAT);
        if (strncmp(err.message, NAME ": ", strlen(NAME) + 2)) fail_msg("cut %zu: %s", cut, err.message);
        if (cut < w.header_end && cut > 0 && !strstr(err.message, "truncated") && !strstr(err.message, "left") &&
            !strstr(err.message, "fit"))
            fail_msg("cut %zu: %s", cut, err.message);
    }
    check_bad("empty", b.p, 0, WGML_ERR_FORMAT, "truncated", NULL);
    check_bad("no tensors", b.p, bounds[0], WGML_ERR_FORMAT, "no tensors", NULL);
    gb_free(&b);

    /* a trailing partial tensor header */
    b = (gb){0};
    wb_small_model(&b);
    gb_u32(&b, 1);
    check_bad("partial header", b.p, b.n, WGML_ERR_FORMAT, "truncated", "tensor header");
    gb_free(&b);
}

/* The small model with field `off` (an i32) overwritten by v. */
static void check_field(const char *what, size_t off, int32_t v, wgml_status want, const char *s1, const char *s2) {
    gb b = {0};
    wb_small_model(&b);
    put_u32_at(b.p, off, (uint32_t)v);
    check_bad(what, b.p, b.n, want, s1, s2);
    gb_free(&b);
}

static void test_hostile(void **state) {
    (void)state;
    gb b = {0};
    wb_small_model(&b);
    walk w;
    walk_file(b.p, b.n, &w);
    const size_t tok0 = w.tokens, t0 = w.header_end; /* token 0's length; tensor 0's header */
    const size_t t4 = w.t[4].data - 12 - 4 * 2 - strlen(w.t[4].name); /* the F16 matrix */
    gb_free(&b);

    check_field("magic", 0, 0x46554747, WGML_ERR_FORMAT, "not a whisper.cpp ggml file", "0x46554747");
    check_field("n_vocab", 4, 0, WGML_ERR_FORMAT, "n_vocab is 0", NULL);
    check_field("n_text_head", 4 + 4 * 7, -3, WGML_ERR_FORMAT, "n_text_head is -3", NULL);
    check_field("ftype", 44, -1, WGML_ERR_UNSUPPORTED, "file type -1", NULL);
    check_field("ftype 5", 44, 5, WGML_ERR_UNSUPPORTED, "file type 5", NULL);
    check_field("ftype K", 44, 2012, WGML_ERR_UNSUPPORTED, "file type 2012", NULL);
    check_field("n_mel", 48, 5, WGML_ERR_FORMAT, "filters for 5 bands", "n_mels is 4");
    check_field("n_fft 0", 52, 0, WGML_ERR_FORMAT, "0 frequencies", NULL);
    check_field("n_fft huge", 52, 0x7fffffff, WGML_ERR_FORMAT, "mel filters [4][2147483647]", "bytes");
    check_field("token count huge", tok0 - 4, 0x7fffffff, WGML_ERR_FORMAT, "2147483647 tokens", NULL);
    check_field("token count over n_vocab", tok0 - 4, 301, WGML_ERR_FORMAT, "301 tokens for a vocabulary of 300",
                NULL);
    check_field("token count negative", tok0 - 4, -1, WGML_ERR_FORMAT, "-1 tokens", NULL);
    check_field("token length negative", tok0, -5, WGML_ERR_FORMAT, "token 0", "length -5");
    check_field("token length huge", tok0 + 5, 0x7ffffff0, WGML_ERR_FORMAT, "token 1", "length 2147483632");
    check_field("n_dims 0", t0, 0, WGML_ERR_FORMAT, "0 dimensions", NULL);
    check_field("n_dims 5", t0, 5, WGML_ERR_FORMAT, "5 dimensions", NULL);
    check_field("name length 0", t0 + 4, 0, WGML_ERR_FORMAT, "name of length 0", NULL);
    check_field("name length negative", t0 + 4, -1, WGML_ERR_FORMAT, "name of length -1", NULL);
    check_field("name length huge", t0 + 4, 1000000, WGML_ERR_FORMAT, "name of length 1000000", NULL);
    check_field("type 4", t4 + 8, 4, WGML_ERR_UNSUPPORTED, "'encoder.blocks.0.attn.query.weight' has type 4", NULL);
    check_field("type 12", t4 + 8, 12, WGML_ERR_UNSUPPORTED, "has type 12", NULL);
    check_field("type -1", t4 + 8, -1, WGML_ERR_UNSUPPORTED, "has type -1", NULL);
    check_field("dim 0", t4 + 12, 0, WGML_ERR_FORMAT, "size 0 in dimension 0", NULL);
    check_field("dim negative", t4 + 16, -8, WGML_ERR_FORMAT, "size -8 in dimension 1", NULL);
    check_field("dim huge", t4 + 16, 0x7fffffff, WGML_ERR_FORMAT, "'encoder.blocks.0.attn.query.weight'", "needs more");
    check_field("conv weight quantized", t0 + 8, 8, WGML_ERR_FORMAT, "row length 3", "block size 32");
    check_field("conv weight dims", t0 + 12, 4, WGML_ERR_FORMAT, NULL, NULL); /* sizes then disagree with the data */

    /* whole files built for a case */
    static const int32_t hp[10] = {300, 1500, 8, 2, 1, 448, 8, 2, 1, 4};
    struct {
        const char *what, *name;
        int32_t type, n_dims, ne[4], ftype;
        wgml_status want;
        const char *s1, *s2;
    } cases[] = {
        {"quantized conv", "encoder.conv2.weight", 8, 3, {96, 8, 8}, 2001, WGML_ERR_UNSUPPORTED, "'encoder.conv2.weight' is Q8_0",
         "F16 or F32"},
        {"conv 2-D", "encoder.conv1.weight", 1, 2, {12, 8}, 1, WGML_ERR_FORMAT, "'encoder.conv1.weight' has 2 dimensions",
         NULL},
        {"conv kernel 5", "encoder.conv1.weight", 1, 3, {5, 4, 8}, 1, WGML_ERR_FORMAT, "ne[0] = 5", NULL},
        {"bias [8][2]", "encoder.conv2.bias", 0, 2, {2, 8}, 1, WGML_ERR_FORMAT, "'encoder.conv2.bias' has 2 dimensions",
         NULL},
        {"old quantization", "w", 8, 1, {32}, 1, WGML_ERR_UNSUPPORTED, "'w' is Q8_0 of quantization version 0", NULL},
        {"row not a block", "w", 2, 1, {48}, 2001, WGML_ERR_FORMAT, "row length 48", "Q4_0 block size 32"},
        {"mel_filters", "mel_filters", 0, 2, {5, 4}, 1, WGML_ERR_FORMAT, "named 'mel_filters'", NULL},
        {"overflow", "w", 0, 4, {0x7fffffff, 0x7fffffff, 0x7fffffff, 0x7fffffff}, 1, WGML_ERR_FORMAT, "'w'",
         "overflows"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        b = (gb){0};
        wb_header(&b, hp, cases[i].ftype, 5, 4);
        gb_u32(&b, (uint32_t)cases[i].n_dims);
        gb_u32(&b, (uint32_t)strlen(cases[i].name));
        gb_u32(&b, (uint32_t)cases[i].type);
        for (int d = 0; d < cases[i].n_dims; d++)
            gb_u32(&b, (uint32_t)cases[i].ne[d]);
        gb_put(&b, cases[i].name, strlen(cases[i].name));
        size_t size = wb_row_bytes(cases[i].type, cases[i].ne[0]);
        for (int d = 1; d < cases[i].n_dims && size < 100000; d++)
            size *= (size_t)cases[i].ne[d];
        gb_zeros(&b, size < 100000 ? size : 64);
        check_bad(cases[i].what, b.p, b.n, cases[i].want, cases[i].s1, cases[i].s2);
        gb_free(&b);
    }

    /* a duplicate name, a NUL in a name, a huge tensor count */
    b = (gb){0};
    wb_small_model(&b);
    wb_tensor(&b, "q4_1", 0, 1, (const int32_t[]){4}, 1);
    check_bad("duplicate", b.p, b.n, WGML_ERR_FORMAT, "'q4_1' appears twice", NULL);
    gb_free(&b);
    b = (gb){0};
    wb_small_model(&b);
    wb_tensor(&b, "a\0b", 0, 1, (const int32_t[]){4}, 1); /* strlen: "a" */
    b.p[b.n - 16 - 1] = 0;                                /* the name "a" -> "\0" */
    check_bad("NUL in a name", b.p, b.n, WGML_ERR_FORMAT, "NUL byte", NULL);
    gb_free(&b);
    b = (gb){0};
    wb_header(&b, hp, 1, 5, 0);
    for (int i = 0; i < 65537; i++)
        wb_tensor(&b, "x", 0, 1, (const int32_t[]){1}, 0);
    check_bad("tensor count", b.p, b.n, WGML_ERR_FORMAT, "more than 65536 tensors", NULL);
    gb_free(&b);
    /* quantized tensors of version 2 are fine; ftype 4 (Q4_1, some F16) too */
    b = (gb){0};
    wb_header(&b, hp, 4 + 2000, 5, 4);
    wb_tensor(&b, "q", 3, 2, (const int32_t[]){64, 2}, 3);
    check_ok(b.p, b.n);
    gb_free(&b);
}

/* Out of memory at every allocation: an error, nothing leaked. */
static void test_out_of_memory(void **state) {
    (void)state;
    gb b = {0};
    wb_small_model(&b);
    int failed = 0;
    for (long k = 0; k < 1000; k++) {
        long live = wgml_alloc_live();
        wgml_error err;
        gguf_file *g = NULL;
        wgml_alloc_fail_after(k);
        wgml_status st = ggml_whisper_open_memory(b.p, b.n, NAME, &g, &err);
        wgml_alloc_fail_after(-1);
        if (st == WGML_OK) {
            gguf_close(g);
            assert_int_equal(wgml_alloc_live(), live);
            break;
        }
        failed++;
        assert_int_equal(st, WGML_ERR_OUT_OF_MEMORY);
        assert_int_equal(wgml_alloc_live(), live);
    }
    assert_true(failed > 10);
    gb_free(&b);
}

/* ---- opening any model file ---- */

static void test_model_file(void **state) {
    (void)state;
    assert_int_equal(wgml_model_format_detect("GGUF", 4), WGML_MODEL_FORMAT_GGUF);
    assert_int_equal(wgml_model_format_detect("lmgg", 4), WGML_MODEL_FORMAT_WHISPER_BIN);
    assert_int_equal(wgml_model_format_detect("lmg", 3), WGML_MODEL_FORMAT_UNKNOWN);
    assert_int_equal(wgml_model_format_detect(NULL, 0), WGML_MODEL_FORMAT_UNKNOWN);
    assert_string_equal(wgml_model_format_name(WGML_MODEL_FORMAT_WHISPER_BIN), "whisper.cpp ggml");

    wgml_error err;
    gguf_file *g;
    wgml_model_format fmt;
    const char *gpt2 = tu_shared("vocab/ggml-vocab-gpt-2.gguf");
    assert_int_equal(wgml_model_file_open_format(gpt2, &g, &fmt, &err), WGML_OK);
    assert_int_equal(fmt, WGML_MODEL_FORMAT_GGUF);
    gguf_close(g);
    size_t n;
    uint8_t *p = tu_read_file(gpt2, &n);
    assert_int_equal(wgml_model_file_open_memory(p, n, "v.gguf", &g, &err), WGML_OK);
    gguf_close(g);
    free(p);

    const char *junk = tu_tmp_path("junk.bin");
    assert_int_equal(tu_write_file(junk, "junk data that is no model at all", 33), 0);
    CHECK_ERR("junk", wgml_model_file_open_format(junk, &g, &fmt, &err), &err, WGML_ERR_FORMAT, junk, "not a GGUF file");
    assert_int_equal(fmt, WGML_MODEL_FORMAT_UNKNOWN);
    CHECK_ERR("missing", wgml_model_file_open("/nonexistent/model.bin", &g, &err), &err, WGML_ERR_IO, "cannot open");
    assert_int_equal(tu_write_file(junk, "lmg", 3), 0);
    CHECK_ERR("3 bytes", wgml_model_file_open(junk, &g, &err), &err, WGML_ERR_FORMAT, junk, NULL);
    assert_int_equal(tu_write_file(junk, "lmgg", 4), 0);
    CHECK_ERR("magic only", wgml_model_file_open(junk, &g, &err), &err, WGML_ERR_FORMAT, junk, "truncated");
    CHECK_ERR("memory", wgml_model_file_open_memory("lmgg\1\0\0\0", 8, NULL, &g, &err), &err, WGML_ERR_FORMAT,
              "<memory>: ", "truncated");

    /* the API: a .bin loads by path and from memory through the same reader; not as a stream */
    gb b = {0};
    wb_small_model(&b);
    wgml_model_params mp = wgml_model_default_params();
    mp.backend = WGML_BACKEND_CPU;
    wgml_model *m = NULL;
    wgml_status st = wgml_model_load_memory(b.p, b.n, &mp, &m, &err);
    assert_int_not_equal(st, WGML_OK); /* the synthetic model is not a runnable Whisper */
    assert_null(m);
    assert_null(strstr(err.message, "not a GGUF"));
    FILE *fp = fopen(tu_tmp_path("small.bin"), "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(b.p, 1, b.n, fp), b.n);
    fclose(fp);
    fp = fopen(tu_tmp_path("small.bin"), "rb");
    CHECK_ERR("stream", wgml_model_load_stream(tu_file_read, fp, b.n, &mp, &m, &err), &err, WGML_ERR_UNSUPPORTED,
              "cannot be streamed", NULL);
    fclose(fp);
    gb_free(&b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_micro),        cmocka_unit_test(test_micro_prefixes), cmocka_unit_test(test_small),
        cmocka_unit_test(test_hostile),      cmocka_unit_test(test_out_of_memory),  cmocka_unit_test(test_model_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
