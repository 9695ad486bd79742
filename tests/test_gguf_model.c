/*
 * test_gguf_model.c - a GGUF that parses but does not make a Llama model.
 *
 * Variants of stories260K.gguf, rewritten with one thing wrong (a required key
 * missing or of the wrong type, an unsupported architecture, inconsistent head
 * counts, a tensor missing, misshapen or of a type the backend cannot use),
 * are loaded through the public API on the CPU backend; each must fail with a
 * message that names the file and the key or tensor. Then out-of-memory at
 * every allocation of open + backend + model load + session + one step.
 *
 * NaN/Inf in weights: loading succeeds. Weights are data; checking them would
 * read every byte of the file at load (the CPU backend uses the mapping in
 * place and touches weights lazily), so wgml does not. test_nan_weights pins
 * this down: the load succeeds and the non-finite values show in the logits.
 */
#include "backend/backend.h"
#include "check_err.h"
#include "core/alloc.h"
#include "core/dtype.h"
#include "format/gguf.h"
#include "model/llama/llama.h"
#include "testutil.h"
#include "wgml.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MODEL "models/stories260K.gguf"

/* What to change when rewriting the model. Keys named in an override are
 * dropped from the copy and written with the new value. */
typedef struct variant {
    const char *drop_key[3];
    const char *str_key, *str_val;
    const char *u32_key[2];
    uint32_t u32_val[2];
    const char *f32_key;
    float f32_val;
    const char *drop_tensor;
    const char *reshape; /* F32, new shape (n_dims 1 when ne1 == 0), zero data */
    int64_t ne[3];
    int n_dims;
    const char *retype; /* new type, same shape, zero data */
    uint32_t type;
    const char *poison; /* first element set to poison_val */
    float poison_val;
} variant;

static int overridden(const variant *v, const char *key) {
    for (int i = 0; i < 3; i++)
        if (v->drop_key[i] && strcmp(v->drop_key[i], key) == 0) return 1;
    if (v->str_key && strcmp(v->str_key, key) == 0) return 1;
    for (int i = 0; i < 2; i++)
        if (v->u32_key[i] && strcmp(v->u32_key[i], key) == 0) return 1;
    return v->f32_key && strcmp(v->f32_key, key) == 0;
}

static void write_variant(const variant *v, const char *out) {
    wgml_error err;
    gguf_file *f = NULL;
    if (gguf_open(tu_shared(MODEL), &f, &err)) fail_msg("%s", err.message);
    gguf_writer *w = gguf_writer_create();
    for (int64_t i = 0; i < gguf_n_kv(f); i++) {
        const gguf_kv *kv = gguf_kv_at(f, i);
        if (!overridden(v, kv->key) && gguf_writer_copy_kv(w, kv, &err)) fail_msg("%s", err.message);
    }
    if (v->str_key) assert_int_equal(gguf_writer_set_str(w, v->str_key, v->str_val, &err), WGML_OK);
    for (int i = 0; i < 2; i++)
        if (v->u32_key[i]) assert_int_equal(gguf_writer_set_u32(w, v->u32_key[i], v->u32_val[i], &err), WGML_OK);
    if (v->f32_key) assert_int_equal(gguf_writer_set_f32(w, v->f32_key, v->f32_val, &err), WGML_OK);
    for (int64_t i = 0; i < gguf_n_tensors(f); i++) {
        const gguf_tensor *t = gguf_tensor_at(f, i);
        if (v->drop_tensor && strcmp(t->name, v->drop_tensor) == 0) continue;
        wgml_status st;
        if (v->reshape && strcmp(t->name, v->reshape) == 0)
            st = gguf_writer_add_tensor(w, t->name, WGML_F32, v->n_dims, v->ne, &err);
        else if (v->retype && strcmp(t->name, v->retype) == 0)
            st = gguf_writer_add_tensor(w, t->name, v->type, t->n_dims, t->ne, &err);
        else
            st = gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, &err);
        if (st) fail_msg("%s", err.message);
    }
    if (gguf_writer_begin(w, out, &err)) fail_msg("%s", err.message);
    for (int64_t i = 0; i < gguf_n_tensors(f); i++) {
        const gguf_tensor *t = gguf_tensor_at(f, i);
        if (v->drop_tensor && strcmp(t->name, v->drop_tensor) == 0) continue;
        size_t size = t->size;
        if (v->reshape && strcmp(t->name, v->reshape) == 0)
            size = (size_t)(v->ne[0] * (v->n_dims > 1 ? v->ne[1] : 1) * (v->n_dims > 2 ? v->ne[2] : 1)) * 4;
        else if (v->retype && strcmp(t->name, v->retype) == 0)
            size = wgml_row_size(v->type, t->ne[0]) * (size_t)(t->n_elements / t->ne[0]);
        uint8_t *data = calloc(1, size);
        assert_non_null(data);
        if (size == t->size) memcpy(data, t->data, size);
        if (v->poison && strcmp(t->name, v->poison) == 0) memcpy(data, &v->poison_val, 4);
        if (gguf_writer_write_tensor(w, data, size, &err)) fail_msg("%s", err.message);
        free(data);
    }
    if (gguf_writer_finish(w, &err)) fail_msg("%s", err.message);
    gguf_writer_free(w);
    gguf_close(f);
}

static wgml_model_params cpu_params(void) {
    wgml_model_params p = wgml_model_default_params();
    p.backend = WGML_BACKEND_CPU;
    p.n_threads = 1;
    return p;
}

static int n_cases;

/* Writes the variant, loads it, expects `want` with s1 and s2 in the message
 * (and the path, for errors found in the file). */
static void expect_load(const char *what, const variant *v, wgml_status want, const char *s1, const char *s2) {
    const char *path = tu_tmp_path("variant.gguf");
    write_variant(v, path);
    wgml_model_params p = cpu_params();
    wgml_model *m = (wgml_model *)&n_cases;
    wgml_error err;
    n_cases++;
    wgml_status st = wgml_model_load(path, &p, &m, &err);
    if (want == WGML_OK) {
        if (st) fail_msg("%s: %s", what, err.message);
        wgml_model_free(m);
    } else {
        assert_null(m);
        CHECK_ERR(what, st, &err, want, path, s1, s2);
    }
    remove(path);
}

#define V(...) (&(variant){__VA_ARGS__})

static void test_baseline(void **state) {
    (void)state;
    const char *path = tu_tmp_path("variant.gguf");
    write_variant(V(0), path);
    wgml_model_params p = cpu_params();
    wgml_model *m = NULL;
    wgml_error err;
    if (wgml_model_load(path, &p, &m, &err)) fail_msg("%s", err.message);
    wgml_model_info info;
    wgml_model_get_info(m, &info);
    assert_string_equal(info.architecture, "llama");
    assert_string_equal(info.backend, "cpu");
    assert_int_equal(info.n_vocab, 512);
    assert_int_equal(info.n_layer, 5);
    assert_int_equal(info.n_head, 8);
    assert_int_equal(info.n_head_kv, 4);
    assert_int_equal(info.n_embd, 64);
    assert_int_equal(info.n_ff, 172);
    wgml_model_free(m);
    remove(path);
}

static void test_missing_keys(void **state) {
    (void)state;
    static const char *required[] = {"general.architecture", "llama.embedding_length", "llama.block_count",
                                     "llama.feed_forward_length", "llama.attention.head_count"};
    for (size_t i = 0; i < sizeof required / sizeof required[0]; i++) {
        char s[128];
        snprintf(s, sizeof s, "missing required metadata '%s'", required[i]);
        expect_load(required[i], V(.drop_key = {required[i]}), WGML_ERR_FORMAT, s, NULL);
    }
    /* optional keys have defaults: without head_count_kv every head has its own
     * KV head, and then the K weights have the wrong shape */
    expect_load("no head_count_kv", V(.drop_key = {"llama.attention.head_count_kv"}), WGML_ERR_FORMAT,
                "tensor 'blk.0.attn_k.weight' has shape [64, 32, 1, 1], expected [64, 64]", NULL);
    expect_load(
        "no optional keys",
        V(.drop_key = {"llama.context_length", "llama.rope.dimension_count", "llama.attention.layer_norm_rms_epsilon"}),
        WGML_OK, NULL, NULL);
}

static void test_architecture(void **state) {
    (void)state;
    expect_load("gpt2", V(.str_key = "general.architecture", .str_val = "gpt2"), WGML_ERR_UNSUPPORTED,
                "architecture 'gpt2' is not supported", NULL);
    /* the family registry (model/family.h) refuses an architecture by name, listing the known ones */
    expect_load("foo", V(.str_key = "general.architecture", .str_val = "foo"), WGML_ERR_UNSUPPORTED,
                "architecture 'foo' is not supported", "known: llama, qwen2");
    expect_load("mamba", V(.str_key = "general.architecture", .str_val = "mamba"), WGML_ERR_UNSUPPORTED,
                "architecture 'mamba'", NULL);
    expect_load("empty", V(.str_key = "general.architecture", .str_val = ""), WGML_ERR_UNSUPPORTED, "architecture ''",
                NULL);
    expect_load("long", V(.str_key = "general.architecture", .str_val = "llama-but-a-very-long-architecture-name"),
                WGML_ERR_UNSUPPORTED, "is not supported", NULL);
    expect_load("qwen2 keys", V(.str_key = "general.architecture", .str_val = "qwen2"), WGML_ERR_FORMAT,
                "missing required metadata 'qwen2.embedding_length'", NULL);
    expect_load("arch u32", V(.u32_key = {"general.architecture"}, .u32_val = {1}), WGML_ERR_FORMAT,
                "metadata 'general.architecture' should be a string but is u32", NULL);
}

/* "llama\0x" must not pass for "llama": the file is patched after writing. */
static void test_architecture_nul(void **state) {
    (void)state;
    const char *path = tu_tmp_path("variant.gguf");
    write_variant(V(.str_key = "general.architecture", .str_val = "llama#x"), path);
    size_t n;
    uint8_t *p = tu_read_file(path, &n);
    assert_non_null(p);
    uint8_t *hit = memmem(p, n, "llama#x", 7);
    assert_non_null(hit);
    hit[5] = 0;
    assert_int_equal(tu_write_file(path, p, n), 0);
    free(p);
    wgml_model_params mp = cpu_params();
    wgml_model *m = NULL;
    wgml_error err;
    CHECK_ERR("NUL in architecture", wgml_model_load(path, &mp, &m, &err), &err, WGML_ERR_FORMAT, path,
              "'general.architecture' contains a NUL byte");
    n_cases++;
    remove(path);
}

static void test_wrong_values(void **state) {
    (void)state;
    expect_load("block_count string", V(.str_key = "llama.block_count", .str_val = "5"), WGML_ERR_FORMAT,
                "metadata 'llama.block_count' should be an integer but is string", NULL);
    expect_load("block_count 0", V(.u32_key = {"llama.block_count"}, .u32_val = {0}), WGML_ERR_FORMAT,
                "'llama.block_count' = 0 is out of range", NULL);
    expect_load("block_count huge", V(.u32_key = {"llama.block_count"}, .u32_val = {UINT32_MAX}), WGML_ERR_FORMAT,
                "'llama.block_count' = 4294967295 is out of range", NULL);
    expect_load("block_count 6", V(.u32_key = {"llama.block_count"}, .u32_val = {6}), WGML_ERR_FORMAT,
                "missing tensor 'blk.5.attn_norm.weight'", NULL);
    /* fewer layers than the file holds: the extra tensors are not read (accepted, as llama.cpp's
     * loader would not: it counts tensors) */
    expect_load("block_count 4", V(.u32_key = {"llama.block_count"}, .u32_val = {4}), WGML_OK, NULL, NULL);
    expect_load("embedding 32",
                V(.u32_key = {"llama.embedding_length"}, .u32_val = {32}, .drop_key = {"llama.rope.dimension_count"}),
                WGML_ERR_FORMAT, "tensor 'token_embd.weight' has shape [64, 512, 1, 1], expected [32, 512]", NULL);
    expect_load("embedding huge", V(.u32_key = {"llama.embedding_length"}, .u32_val = {1u << 30}), WGML_ERR_FORMAT,
                "'llama.embedding_length' = 1073741824 is out of range", NULL);
    expect_load("ffn 100", V(.u32_key = {"llama.feed_forward_length"}, .u32_val = {100}), WGML_ERR_FORMAT,
                "tensor 'blk.0.ffn_gate.weight' has shape [64, 172, 1, 1], expected [64, 100]", NULL);
    expect_load("context 0", V(.u32_key = {"llama.context_length"}, .u32_val = {0}), WGML_ERR_FORMAT,
                "'llama.context_length' = 0 is out of range", NULL);
    expect_load("eps NaN", V(.f32_key = "llama.attention.layer_norm_rms_epsilon", .f32_val = NAN), WGML_ERR_FORMAT,
                "RMS norm epsilon nan is out of range", NULL);
    expect_load("eps 0", V(.f32_key = "llama.attention.layer_norm_rms_epsilon", .f32_val = 0), WGML_ERR_FORMAT,
                "RMS norm epsilon 0 is out of range", NULL);
    expect_load("eps string", V(.str_key = "llama.attention.layer_norm_rms_epsilon", .str_val = "1e-5"),
                WGML_ERR_FORMAT, "'llama.attention.layer_norm_rms_epsilon' should be a number but is string", NULL);
    expect_load("rope base", V(.f32_key = "llama.rope.freq_base", .f32_val = 0.5f), WGML_ERR_FORMAT,
                "rope frequency base 0.5 is out of range", NULL);
    expect_load("rope base inf", V(.f32_key = "llama.rope.freq_base", .f32_val = INFINITY), WGML_OK, NULL, NULL);
    expect_load("rope scaling", V(.str_key = "llama.rope.scaling.type", .str_val = "yarn"), WGML_ERR_UNSUPPORTED,
                "rope scaling 'yarn' is not supported", NULL);
    expect_load("rope factor",
                V(.str_key = "llama.rope.scaling.type", .str_val = "linear", .f32_key = "llama.rope.scaling.factor",
                  .f32_val = 1e9f),
                WGML_ERR_FORMAT, "rope scaling factor 1e+09 is out of range", NULL);
    expect_load("rope dims odd", V(.u32_key = {"llama.rope.dimension_count"}, .u32_val = {7}), WGML_ERR_FORMAT,
                "rope dimension 7 does not fit head size 8", NULL);
    expect_load("rope dims > head", V(.u32_key = {"llama.rope.dimension_count"}, .u32_val = {16}), WGML_ERR_FORMAT,
                "rope dimension 16 does not fit head size 8", NULL);
    expect_load("key != value length",
                V(.u32_key = {"llama.attention.key_length", "llama.attention.value_length"}, .u32_val = {8, 16}),
                WGML_ERR_UNSUPPORTED, "key length 8 differs from value length 16", NULL);
}

static void test_head_counts(void **state) {
    (void)state;
    expect_load("heads 7", V(.u32_key = {"llama.attention.head_count"}, .u32_val = {7}), WGML_ERR_FORMAT,
                "7 attention heads are not a multiple of 4 KV heads", NULL);
    expect_load("kv heads 3", V(.u32_key = {"llama.attention.head_count_kv"}, .u32_val = {3}), WGML_ERR_FORMAT,
                "8 attention heads are not a multiple of 3 KV heads", NULL);
    expect_load("kv heads 16", V(.u32_key = {"llama.attention.head_count_kv"}, .u32_val = {16}), WGML_ERR_FORMAT,
                "8 attention heads are not a multiple of 16 KV heads", NULL);
    expect_load("kv heads 0", V(.u32_key = {"llama.attention.head_count_kv"}, .u32_val = {0}), WGML_ERR_FORMAT,
                "'llama.attention.head_count_kv' = 0 is out of range", NULL);
    expect_load("heads 0", V(.u32_key = {"llama.attention.head_count"}, .u32_val = {0}), WGML_ERR_FORMAT,
                "'llama.attention.head_count' = 0 is out of range", NULL);
    expect_load("heads 6",
                V(.u32_key = {"llama.attention.head_count", "llama.attention.head_count_kv"}, .u32_val = {6, 3}),
                WGML_ERR_FORMAT, "embedding 64 is not divisible by 6 heads", NULL);
    /* consistent counts that do not match the weights: the first misfit is named */
    expect_load(
        "heads 16",
        V(.u32_key = {"llama.attention.head_count"}, .u32_val = {16}, .drop_key = {"llama.rope.dimension_count"}),
        WGML_ERR_FORMAT, "tensor 'blk.0.attn_k.weight' has shape [64, 32, 1, 1], expected [64, 16]", NULL);
    expect_load("kv heads 8", V(.u32_key = {"llama.attention.head_count_kv"}, .u32_val = {8}), WGML_ERR_FORMAT,
                "tensor 'blk.0.attn_k.weight' has shape [64, 32, 1, 1], expected [64, 64]", NULL);
}

static void test_tensors(void **state) {
    (void)state;
    static const char *needed[] = {"token_embd.weight",   "output_norm.weight",       "blk.0.attn_norm.weight",
                                   "blk.2.ffn_up.weight", "blk.4.attn_output.weight", "blk.3.attn_v.weight"};
    for (size_t i = 0; i < sizeof needed / sizeof needed[0]; i++) {
        char s[128];
        snprintf(s, sizeof s, "missing tensor '%s'", needed[i]);
        expect_load(needed[i], V(.drop_tensor = needed[i]), WGML_ERR_FORMAT, s, NULL);
    }
    expect_load("no output.weight (tied)", V(.drop_tensor = "output.weight"), WGML_OK, NULL, NULL);
    expect_load("attn_q [64, 32]", V(.reshape = "blk.1.attn_q.weight", .ne = {64, 32}, .n_dims = 2), WGML_ERR_FORMAT,
                "tensor 'blk.1.attn_q.weight' has shape [64, 32, 1, 1], expected [64, 64]", NULL);
    expect_load("attn_q transposed", V(.reshape = "blk.0.ffn_down.weight", .ne = {64, 172}, .n_dims = 2),
                WGML_ERR_FORMAT, "tensor 'blk.0.ffn_down.weight' has shape [64, 172, 1, 1], expected [172, 64]", NULL);
    expect_load("norm [32]", V(.reshape = "blk.3.attn_norm.weight", .ne = {32}, .n_dims = 1), WGML_ERR_FORMAT,
                "tensor 'blk.3.attn_norm.weight' has shape [32, 1, 1, 1], expected [64, 1]", NULL);
    expect_load("output [64, 500]", V(.reshape = "output.weight", .ne = {64, 500}, .n_dims = 2), WGML_ERR_FORMAT,
                "tensor 'output.weight' has shape [64, 500, 1, 1], expected [64, 512]", NULL);
    expect_load("token_embd 3-D", V(.reshape = "token_embd.weight", .ne = {64, 256, 2}, .n_dims = 3), WGML_ERR_FORMAT,
                "token_embd.weight has a bad shape", NULL);
    expect_load("token_embd 1-D", V(.reshape = "token_embd.weight", .ne = {64 * 512}, .n_dims = 1), WGML_ERR_FORMAT,
                "token_embd.weight has a bad shape", NULL);
    expect_load("norm F16", V(.retype = "blk.0.attn_norm.weight", .type = WGML_F16), WGML_ERR_UNSUPPORTED,
                "tensor 'blk.0.attn_norm.weight' has type F16; norms and biases must be F32", NULL);
    expect_load("weight I32", V(.retype = "blk.0.attn_q.weight", .type = WGML_I32), WGML_ERR_UNSUPPORTED,
                "tensor 'blk.0.attn_q.weight' has type I32, which the cpu backend cannot use", NULL);
}

/* Decision: non-finite weights load (they are data); they surface in the output. */
static void test_nan_weights(void **state) {
    (void)state;
    static const float bad[] = {NAN, INFINITY, -INFINITY};
    for (int i = 0; i < 3; i++) {
        const char *path = tu_tmp_path("nan.gguf");
        write_variant(V(.poison = "blk.0.attn_q.weight", .poison_val = bad[i]), path);
        wgml_model_params p = cpu_params();
        wgml_model *m = NULL;
        wgml_error err;
        if (wgml_model_load(path, &p, &m, &err)) fail_msg("%s", err.message);
        wgml_session_params sp = {.n_ctx = 8, .n_batch = 2};
        wgml_session *s = NULL;
        assert_int_equal(wgml_session_create(m, &sp, &s, &err), WGML_OK);
        const int32_t toks[2] = {1, 403};
        assert_int_equal(wgml_session_eval(s, toks, 2, &err), WGML_OK);
        const float *logits = wgml_session_logits(s);
        assert_non_null(logits);
        int non_finite = 0;
        for (int k = 0; k < 512; k++)
            non_finite += !isfinite(logits[k]);
        assert_true(non_finite > 0);
        wgml_session_free(s);
        wgml_model_free(m);
        remove(path);
    }
}

static void test_api_errors(void **state) {
    (void)state;
    wgml_model_params p = cpu_params();
    wgml_model *m = NULL;
    wgml_error err;
    CHECK_ERR("no file", wgml_model_load("/nonexistent/m.gguf", &p, &m, &err), &err, WGML_ERR_IO, "/nonexistent/m.gguf",
              "cannot open");
    assert_null(m);
    CHECK_ERR("directory", wgml_model_load("/", &p, &m, &err), &err, WGML_ERR_IO, "not a regular file");
    CHECK_ERR("NULL out", wgml_model_load(tu_shared(MODEL), &p, NULL, &err), &err, WGML_ERR_INVALID_ARGUMENT, "out");
    CHECK_ERR("NULL path", wgml_model_load(NULL, &p, &m, &err), &err, WGML_ERR_INVALID_ARGUMENT, "path");
    /* a vocabulary-only GGUF is no model */
    CHECK_ERR("vocab only", wgml_model_load(tu_shared("vocab/ggml-vocab-gpt-2.gguf"), &p, &m, &err), &err,
              WGML_ERR_UNSUPPORTED, "architecture 'gpt2'");
    CHECK_ERR("vocab only (llama)", wgml_model_load(tu_shared("vocab/ggml-vocab-llama-spm.gguf"), &p, &m, &err), &err,
              WGML_ERR_FORMAT, "missing tensor 'token_embd.weight'");
    /* from memory: damaged bytes */
    size_t n;
    uint8_t *bytes = tu_read_file(tu_shared(MODEL), &n);
    assert_non_null(bytes);
    bytes[0] = 'X';
    CHECK_ERR("memory", wgml_model_load_memory(bytes, n, &p, &m, &err), &err, WGML_ERR_FORMAT, "<memory>",
              "not a GGUF file");
    bytes[0] = 'G';
    assert_int_equal(wgml_model_load_memory(bytes, n, &p, &m, &err), WGML_OK);
    wgml_model_free(m);
    CHECK_ERR("memory cut", wgml_model_load_memory(bytes, n - 1, &p, &m, &err), &err, WGML_ERR_FORMAT, "<memory>",
              "'blk.4.ffn_norm.weight'");
    free(bytes);
}

/* Out of memory at every allocation from opening the file to one evaluated
 * step. (Through llama.h rather than wgml_model_load: the temporary tokenizer
 * shim in this snapshot does not check its allocations.) */
static void test_out_of_memory(void **state) {
    (void)state;
    size_t n;
    uint8_t *bytes = tu_read_file(tu_shared(MODEL), &n);
    assert_non_null(bytes);
    long fails = 0;
    for (long k = 0;; k++) {
        wgml_error err;
        gguf_file *f = NULL;
        wgml_backend *be = NULL;
        llama_model *m = NULL;
        llama_state *s = NULL;
        float logits[512];
        wgml_alloc_fail_after(k);
        wgml_status st = gguf_open_memory(bytes, n, "oom.gguf", &f, &err);
        if (!st) st = wgml_backend_cpu_create(1, &be, &err);
        if (!st) st = llama_model_load(f, be, NULL, NULL, &m, &err);
        if (!st) st = llama_state_create(m, 16, 4, be->kv_type, &s, &err);
        const int32_t toks[2] = {1, 403};
        if (!st) st = llama_eval(m, s, toks, 2, 0, logits, NULL, &err);
        wgml_alloc_fail_after(-1);
        llama_state_free(s);
        llama_model_free(m);
        if (be) be->free(be);
        gguf_close(f);
        if (st == WGML_OK) break;
        /* the CPU backend words it "cannot allocate ..." */
        CHECK_ERR("oom", st, &err, WGML_ERR_OUT_OF_MEMORY, NULL);
        assert_true(err.message[0] != 0);
        fails++;
        if (k > 100000) fail_msg("never succeeds");
    }
    assert_true(fails > 10);
    n_cases += (int)fails;
    free(bytes);
}

static int report(void **state) {
    (void)state;
    printf("model variants and failing loads checked: %d\n", n_cases);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_baseline),     cmocka_unit_test(test_missing_keys),
        cmocka_unit_test(test_architecture), cmocka_unit_test(test_architecture_nul),
        cmocka_unit_test(test_wrong_values), cmocka_unit_test(test_head_counts),
        cmocka_unit_test(test_tensors),      cmocka_unit_test(test_nan_weights),
        cmocka_unit_test(test_api_errors),   cmocka_unit_test(test_out_of_memory),
    };
    return cmocka_run_group_tests(tests, NULL, report);
}
