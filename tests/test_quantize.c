/*
 * test_quantize.c - quantization recipes and `wgml quantize`: which type each
 * tensor gets in each recipe (llama.cpp's rules), stories260K quantized by us
 * to Q8_0 reproducing the reference text and matching the shared Q8_0 file
 * byte for byte, metadata carried over, and bad inputs failing cleanly with
 * no output left behind.
 */
#include "core/alloc.h"
#include "core/dtype.h"
#include "format/gguf.h"
#include "tools/quantize.h"
#include "testutil.h"
#include "wgml.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- recipe decisions ---- */

/* The type a tensor gets under a recipe; shape [ne0, ne1]. */
static uint32_t type_of(const char *recipe, const quantize_model_info *mi, const char *name, int64_t ne0, int64_t ne1) {
    const quantize_recipe *r = quantize_recipe_find(recipe);
    assert_non_null(r);
    int64_t ne[2] = {ne0, ne1};
    return quantize_tensor_type(r, mi, name, ne1 > 1 ? 2 : 1, ne, NULL);
}

#define EXPECT(recipe, mi, name, ne0, ne1, want)                                                                       \
    do {                                                                                                               \
        uint32_t got_ = type_of(recipe, mi, name, ne0, ne1);                                                           \
        if (got_ != (uint32_t)(want))                                                                                  \
            fail_msg("%s %s: got %s, want %s", recipe, name, wgml_dtype_name(got_), wgml_dtype_name(want));            \
    } while (0)

/* TinyLlama-1.1B's shapes: 22 layers, 32 heads / 4 KV heads, untied output. */
static const quantize_model_info tinyllama = {22, 8, 1};

static void test_recipe_lookup(void **state) {
    (void)state;
    assert_non_null(quantize_recipe_find("q4_k_m"));
    assert_string_equal(quantize_recipe_find("q4_k_m")->name, "Q4_K_M");
    assert_int_equal(quantize_recipe_find("Q4_K_M")->ftype, 15);
    assert_int_equal(quantize_recipe_find("Q5_K_M")->ftype, 17);
    assert_int_equal(quantize_recipe_find("Q6_K")->ftype, 18);
    assert_int_equal(quantize_recipe_find("q8_0")->ftype, 7);
    assert_int_equal(quantize_recipe_find("Q4_0")->ftype, 2);
    assert_int_equal(quantize_recipe_find("F16")->ftype, 1);
    assert_int_equal(quantize_recipe_find("bf16")->ftype, 32);
    assert_int_equal(quantize_recipe_find("F32")->ftype, 0);
    assert_null(quantize_recipe_find("Q9"));
    assert_null(quantize_recipe_find("Q4_K_X"));
    assert_null(quantize_recipe_find(""));
    for (int i = 0; i < quantize_recipe_count(); i++) /* every base type can be produced */
        assert_true(wgml_dtype_get(quantize_recipe_at(i)->base) != NULL);
}

static void test_recipe_q4_k_m(void **state) {
    (void)state;
    const quantize_model_info *mi = &tinyllama;
    EXPECT("Q4_K_M", mi, "token_embd.weight", 2048, 32000, WGML_Q4_K);
    EXPECT("Q4_K_M", mi, "output.weight", 2048, 32000, WGML_Q6_K);
    EXPECT("Q4_K_M", mi, "output_norm.weight", 2048, 1, WGML_F32);
    EXPECT("Q4_K_M", mi, "blk.0.attn_norm.weight", 2048, 1, WGML_F32);
    EXPECT("Q4_K_M", mi, "blk.0.ffn_norm.weight", 2048, 1, WGML_F32);
    EXPECT("Q4_K_M", mi, "blk.3.attn_q.weight", 2048, 2048, WGML_Q4_K);
    EXPECT("Q4_K_M", mi, "blk.3.attn_k.weight", 2048, 256, WGML_Q4_K);
    EXPECT("Q4_K_M", mi, "blk.3.attn_output.weight", 2048, 2048, WGML_Q4_K);
    EXPECT("Q4_K_M", mi, "blk.3.ffn_gate.weight", 2048, 5632, WGML_Q4_K);
    EXPECT("Q4_K_M", mi, "blk.3.ffn_up.weight", 2048, 5632, WGML_Q4_K);
    /* use_more_bits for 22 layers: 0, 1 (first eighth), 19-21 (last), 4, 7, 10, 13, 16 (every third) */
    const int more[] = {0, 1, 4, 7, 10, 13, 16, 19, 20, 21};
    for (int l = 0; l < 22; l++) {
        int m = 0;
        for (size_t k = 0; k < sizeof more / sizeof more[0]; k++)
            m |= more[k] == l;
        char v[64], d[64];
        snprintf(v, sizeof v, "blk.%d.attn_v.weight", l);
        snprintf(d, sizeof d, "blk.%d.ffn_down.weight", l);
        EXPECT("Q4_K_M", mi, v, 2048, 256, m ? WGML_Q6_K : WGML_Q4_K);
        EXPECT("Q4_K_M", mi, d, 5632, 2048, m ? WGML_Q6_K : WGML_Q4_K);
        EXPECT("Q5_K_M", mi, v, 2048, 256, m ? WGML_Q6_K : WGML_Q5_K);
        EXPECT("Q5_K_M", mi, d, 5632, 2048, m ? WGML_Q6_K : WGML_Q5_K);
    }
    /* Llama 3.2 1B: 16 layers, tied: the embedding is the output and gets Q6_K */
    const quantize_model_info l32 = {16, 4, 0};
    EXPECT("Q4_K_M", &l32, "token_embd.weight", 2048, 128256, WGML_Q6_K);
    EXPECT("Q4_K_M", &l32, "rope_freqs.weight", 32, 1, WGML_F32);
    EXPECT("Q4_K_M", &l32, "blk.2.attn_v.weight", 2048, 512, WGML_Q4_K);
    EXPECT("Q4_K_M", &l32, "blk.4.attn_v.weight", 2048, 512, WGML_Q6_K);
    EXPECT("Q4_K_M", &l32, "blk.14.ffn_down.weight", 8192, 2048, WGML_Q6_K);
}

static void test_recipe_others(void **state) {
    (void)state;
    const quantize_model_info *mi = &tinyllama, tied = {22, 8, 0};
    /* Q6_K, Q8_0: one type everywhere (the output keeps Q8_0 in Q8_0) */
    EXPECT("Q6_K", mi, "output.weight", 2048, 32000, WGML_Q6_K);
    EXPECT("Q6_K", mi, "blk.0.attn_v.weight", 2048, 256, WGML_Q6_K);
    EXPECT("Q6_K", mi, "blk.5.ffn_down.weight", 5632, 2048, WGML_Q6_K);
    EXPECT("Q8_0", mi, "output.weight", 2048, 32000, WGML_Q8_0);
    EXPECT("Q8_0", mi, "token_embd.weight", 2048, 32000, WGML_Q8_0);
    EXPECT("Q8_0", mi, "blk.0.attn_v.weight", 2048, 256, WGML_Q8_0);
    EXPECT("Q8_0", mi, "blk.0.attn_norm.weight", 2048, 1, WGML_F32);
    /* Q4_0: the output (or tied embedding) in Q6_K */
    EXPECT("Q4_0", mi, "output.weight", 2048, 32000, WGML_Q6_K);
    EXPECT("Q4_0", mi, "token_embd.weight", 2048, 32000, WGML_Q4_0);
    EXPECT("Q4_0", &tied, "token_embd.weight", 2048, 32000, WGML_Q6_K);
    EXPECT("Q4_0", mi, "blk.0.ffn_down.weight", 5632, 2048, WGML_Q4_0);
    /* Q4_K_S: Q5_K for attn_v in layers 0-3 and ffn_down in the first eighth */
    EXPECT("Q4_K_S", mi, "blk.3.attn_v.weight", 2048, 256, WGML_Q5_K);
    EXPECT("Q4_K_S", mi, "blk.4.attn_v.weight", 2048, 256, WGML_Q4_K);
    EXPECT("Q4_K_S", mi, "blk.1.ffn_down.weight", 5632, 2048, WGML_Q5_K);
    EXPECT("Q4_K_S", mi, "blk.2.ffn_down.weight", 5632, 2048, WGML_Q4_K);
    /* Q3_K_M: attn_v Q5_K in layers 0-1 then Q4_K; ffn_down Q5_K in the first 1/16 then Q4_K; attn_output Q4_K */
    EXPECT("Q3_K_M", mi, "blk.1.attn_v.weight", 2048, 256, WGML_Q5_K);
    EXPECT("Q3_K_M", mi, "blk.2.attn_v.weight", 2048, 256, WGML_Q4_K);
    EXPECT("Q3_K_M", mi, "blk.0.ffn_down.weight", 5632, 2048, WGML_Q5_K);
    EXPECT("Q3_K_M", mi, "blk.1.ffn_down.weight", 5632, 2048, WGML_Q4_K);
    EXPECT("Q3_K_M", mi, "blk.1.attn_output.weight", 2048, 2048, WGML_Q4_K);
    EXPECT("Q3_K_M", mi, "blk.1.attn_q.weight", 2048, 2048, WGML_Q3_K);
    /* Q2_K: attn_v depends on the grouping */
    const quantize_model_info mha = {22, 1, 1};
    EXPECT("Q2_K", mi, "blk.9.attn_v.weight", 2048, 256, WGML_Q4_K);
    EXPECT("Q2_K", &mha, "blk.9.attn_v.weight", 2048, 2048, WGML_Q3_K);
    EXPECT("Q2_K", mi, "blk.9.ffn_down.weight", 5632, 2048, WGML_Q3_K);
    EXPECT("Q2_K", mi, "blk.9.attn_output.weight", 2048, 2048, WGML_Q3_K);
    EXPECT("Q2_K", mi, "blk.9.ffn_up.weight", 2048, 5632, WGML_Q2_K);
    /* plain floats and uniform K types */
    EXPECT("F16", mi, "output.weight", 2048, 32000, WGML_F16);
    EXPECT("F16", mi, "blk.0.attn_norm.weight", 2048, 1, WGML_F32);
    EXPECT("BF16", mi, "blk.0.attn_q.weight", 2048, 2048, WGML_BF16);
    EXPECT("F32", mi, "blk.0.attn_q.weight", 2048, 2048, WGML_F32);
    EXPECT("Q4_K", mi, "output.weight", 2048, 32000, WGML_Q4_K);
    EXPECT("Q4_K", mi, "blk.0.attn_v.weight", 2048, 256, WGML_Q4_K);
    /* biases stay F32 */
    EXPECT("Q4_K_M", mi, "blk.0.attn_q.bias", 896, 1, WGML_F32);
}

/* Rows that fit no block: llama.cpp's fallbacks, then F16. */
static void test_recipe_fallback(void **state) {
    (void)state;
    /* stories260K: dim 64, hidden 172, 5 layers */
    const quantize_model_info s260 = {5, 2, 1};
    uint32_t wanted;
    int64_t ne[2] = {172, 64};
    const quantize_recipe *q8 = quantize_recipe_find("Q8_0");
    assert_int_equal(quantize_tensor_type(q8, &s260, "blk.0.ffn_down.weight", 2, ne, &wanted), WGML_F16);
    assert_int_equal(wanted, WGML_Q8_0);
    EXPECT("Q8_0", &s260, "blk.0.ffn_up.weight", 64, 172, WGML_Q8_0);
    EXPECT("Q8_0", &s260, "output.weight", 64, 512, WGML_Q8_0);
    EXPECT("Q4_0", &s260, "blk.0.ffn_down.weight", 172, 64, WGML_F16);
    EXPECT("Q4_K_M", &s260, "blk.0.ffn_down.weight", 172, 64, WGML_F16);
    EXPECT("Q4_K_M", &s260, "blk.1.attn_q.weight", 64, 64, WGML_Q5_0); /* Q4_K -> Q5_0 */
    EXPECT("Q4_K_M", &s260, "blk.2.attn_v.weight", 64, 32, WGML_Q8_0); /* Q6_K -> Q8_0 (layers 2, 4 of 5) */
    EXPECT("Q4_K_M", &s260, "blk.0.attn_v.weight", 64, 32, WGML_Q5_0);
    EXPECT("Q4_K_M", &s260, "output.weight", 64, 512, WGML_Q8_0);      /* output: Q8_0 */
    EXPECT("Q5_K_M", &s260, "blk.1.attn_q.weight", 64, 64, WGML_Q5_1); /* Q5_K -> Q5_1 */
    EXPECT("Q3_K_S", &s260, "blk.1.attn_q.weight", 64, 64, WGML_Q4_0); /* Q3_K -> Q4_0 */
    EXPECT("Q2_K", &s260, "blk.1.attn_q.weight", 64, 64, WGML_Q4_0);
    EXPECT("Q6_K", &s260, "blk.1.attn_q.weight", 64, 64, WGML_Q8_0);
    EXPECT("Q6_K", &s260, "blk.1.ffn_down.weight", 172, 64, WGML_F16);
    /* SmolLM2: 576 fits Q5_0 but no K block */
    const quantize_model_info smol = {30, 3, 0};
    EXPECT("Q4_K_M", &smol, "token_embd.weight", 576, 49152, WGML_Q8_0);
    EXPECT("Q4_K_M", &smol, "blk.5.ffn_gate.weight", 576, 1536, WGML_Q5_0);
    EXPECT("Q4_K_M", &smol, "blk.6.ffn_down.weight", 1536, 576, WGML_Q4_K);
    EXPECT("Q4_K_M", &smol, "blk.5.ffn_down.weight", 1536, 576, WGML_Q6_K);
}

static void test_file_type(void **state) {
    (void)state;
    uint64_t el[WGML_DTYPE_COUNT] = {0};
    el[WGML_Q4_K] = 1000, el[WGML_Q6_K] = 400;
    assert_int_equal(quantize_file_type(quantize_recipe_find("Q4_K_M"), el), 15);
    el[WGML_Q5_0] = 5000; /* most weights fell back */
    assert_int_equal(quantize_file_type(quantize_recipe_find("Q4_K_M"), el), 8);
    memset(el, 0, sizeof el);
    el[WGML_F16] = 10;
    assert_int_equal(quantize_file_type(quantize_recipe_find("F16"), el), 1);
    assert_string_equal(quantize_ftype_name(15), "MOSTLY_Q4_K_M");
}

/* ---- the file quantizer ---- */

static int exists(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0;
}

/* Neither the file nor its temporary exists. */
static void assert_no_output(const char *out) {
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.tmp", out);
    assert_false(exists(out));
    assert_false(exists(tmp));
}

static char *text_buf;
static int append_text(void *user, int32_t token, const char *piece, size_t n) {
    (void)token;
    size_t *len = user;
    if (*len + n < 8192) {
        memcpy(text_buf + *len, piece, n);
        *len += n;
        text_buf[*len] = 0;
    }
    return 0;
}

static void test_stories_q8_0_text(void **state) {
    (void)state;
    const char *out = tu_tmp_path("s260-q8_0.gguf");
    quantize_params qp = {.n_threads = 2};
    quantize_result r;
    wgml_error err;
    wgml_status st = quantize_file(tu_shared("models/stories260K.gguf"), out, "Q8_0", &qp, &r, &err);
    if (st) fprintf(stderr, "%s\n", err.message);
    assert_int_equal(st, WGML_OK);
    assert_int_equal(r.n_tensors, 48);
    assert_int_equal(r.per_type[WGML_Q8_0], 32);
    assert_int_equal(r.per_type[WGML_F16], 5);
    assert_int_equal(r.per_type[WGML_F32], 11);
    assert_int_equal(r.n_fallback, 5);
    assert_int_equal(r.file_type, 7);

    /* greedy 60 tokens after the prompt (64 positions) equal llama2.c's run.c on the F32 model */
    wgml_model_params mp = wgml_model_default_params();
    mp.backend = WGML_BACKEND_CPU;
    mp.n_threads = 2;
    wgml_model *m;
    assert_int_equal(wgml_model_load(out, &mp, &m, &err), WGML_OK);
    wgml_session *s;
    assert_int_equal(wgml_session_create(m, NULL, &s, &err), WGML_OK);
    static char text[8192];
    size_t len = (size_t)snprintf(text, sizeof text, "Once upon a time");
    wgml_generate_params gp = wgml_generate_default_params();
    gp.n_predict = 60;
    gp.sampler.temperature = 0;
    gp.on_token = append_text;
    gp.user = &len;
    text_buf = text;
    wgml_generate_result res;
    assert_int_equal(wgml_generate(s, "Once upon a time", &gp, &res, &err), WGML_OK);
    assert_int_equal(res.n_generated, 60);
    size_t rn;
    char *ref = (char *)tu_read_file(tu_shared("models/reference/stories260K.llama2c-run.t0.n64.once.txt"), &rn);
    assert_non_null(ref);
    while (rn && ref[rn - 1] == '\n')
        ref[--rn] = 0;
    if (strcmp(text, ref)) fprintf(stderr, " got: %s\nwant: %s\n", text, ref);
    assert_string_equal(text, ref);
    free(ref);
    wgml_session_free(s);
    wgml_model_free(m);

    /* the tensors equal llama.cpp's stories260K-Q8_0mix.gguf byte for byte where the types agree (all of them) */
    gguf_file *a, *b;
    assert_int_equal(gguf_open(out, &a, &err), WGML_OK);
    assert_int_equal(gguf_open(tu_shared("models/stories260K-Q8_0mix.gguf"), &b, &err), WGML_OK);
    int same_q8 = 0, same = 0;
    for (int64_t i = 0; i < gguf_n_tensors(a); i++) {
        const gguf_tensor *ta = gguf_tensor_at(a, i), *tb = gguf_find_tensor(b, ta->name);
        assert_non_null(tb);
        if (ta->type != tb->type) continue;
        assert_int_equal(ta->size, tb->size);
        if (memcmp(ta->data, tb->data, ta->size)) fail_msg("tensor %s differs from llama.cpp's", ta->name);
        same++;
        same_q8 += ta->type == WGML_Q8_0;
    }
    assert_int_equal(same_q8, 32);
    assert_int_equal(same, 48);

    /* metadata: everything copied, file type and quantization version set */
    gguf_file *in;
    assert_int_equal(gguf_open(tu_shared("models/stories260K.gguf"), &in, &err), WGML_OK);
    for (int64_t i = 0; i < gguf_n_kv(in); i++) {
        const gguf_kv *kv = gguf_kv_at(in, i), *ko = gguf_find_kv(a, kv->key);
        assert_non_null(ko);
        assert_int_equal(kv->raw_size, ko->raw_size);
        assert_memory_equal(kv->raw, ko->raw, kv->raw_size);
    }
    int64_t v;
    assert_int_equal(gguf_get_int(a, "general.file_type", 0, 100, &v, &err), 1);
    assert_int_equal(v, 7);
    assert_int_equal(gguf_get_int(a, "general.quantization_version", 0, 100, &v, &err), 1);
    assert_int_equal(v, 2);
    gguf_close(in);
    gguf_close(a);
    gguf_close(b);
    remove(out);
}

/* Same bytes with 1 and 3 threads; F16 input works too; a tensor already in its type is copied. */
static void test_threads_and_inputs(void **state) {
    (void)state;
    const char *o1 = tu_tmp_path("t1.gguf"), *o3 = tu_tmp_path("t3.gguf"), *o16 = tu_tmp_path("f16.gguf");
    quantize_params p1 = {.n_threads = 1}, p3 = {.n_threads = 3};
    wgml_error err;
    assert_int_equal(quantize_file(tu_shared("models/stories260K.gguf"), o1, "q4_k_m", &p1, NULL, &err), WGML_OK);
    assert_int_equal(quantize_file(tu_shared("models/stories260K.gguf"), o3, "Q4_K_M", &p3, NULL, &err), WGML_OK);
    size_t n1, n3;
    unsigned char *b1 = tu_read_file(o1, &n1), *b3 = tu_read_file(o3, &n3);
    assert_non_null(b1);
    assert_non_null(b3);
    assert_int_equal(n1, n3);
    assert_memory_equal(b1, b3, n1);
    free(b1);
    free(b3);

    quantize_result r;
    assert_int_equal(quantize_file(tu_shared("models/stories260K-F16.gguf"), o16, "Q8_0", &p3, &r, &err), WGML_OK);
    assert_int_equal(r.per_type[WGML_Q8_0], 32);
    /* the already-quantized file to its own type: copied as is */
    assert_int_equal(quantize_file(tu_shared("models/stories260K-Q8_0mix.gguf"), o1, "Q8_0", &p3, &r, &err), WGML_OK);
    gguf_file *a, *b;
    assert_int_equal(gguf_open(o1, &a, &err), WGML_OK);
    assert_int_equal(gguf_open(tu_shared("models/stories260K-Q8_0mix.gguf"), &b, &err), WGML_OK);
    for (int64_t i = 0; i < gguf_n_tensors(a); i++) {
        const gguf_tensor *ta = gguf_tensor_at(a, i), *tb = gguf_find_tensor(b, ta->name);
        assert_int_equal(ta->type, tb->type);
        assert_memory_equal(ta->data, tb->data, ta->size);
    }
    gguf_close(a);
    gguf_close(b);
    remove(o1);
    remove(o3);
    remove(o16);
}

static int cancel_at_half(void *user, const char *stage, uint64_t done, uint64_t total) {
    (void)user, (void)stage;
    return done * 2 >= total;
}

static void test_bad_inputs(void **state) {
    (void)state;
    const char *out = tu_tmp_path("bad.gguf");
    wgml_error err;
    quantize_params qp = {.n_threads = 2};
    /* unknown type */
    assert_int_equal(quantize_file(tu_shared("models/stories260K.gguf"), out, "Q4_K_X", &qp, NULL, &err),
                     WGML_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "unknown type 'Q4_K_X'"));
    assert_non_null(strstr(err.message, "Q4_K_M"));
    assert_no_output(out);
    /* quantized input */
    assert_int_equal(quantize_file(tu_shared("models/stories260K-Q8_0mix.gguf"), out, "Q4_0", &qp, NULL, &err),
                     WGML_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.message, "token_embd.weight"));
    assert_non_null(strstr(err.message, "requantizing is not supported"));
    assert_no_output(out);
    /* missing input */
    assert_int_equal(quantize_file("/no/such/model.gguf", out, "Q8_0", &qp, NULL, &err), WGML_ERR_IO);
    assert_non_null(strstr(err.message, "/no/such/model.gguf"));
    assert_no_output(out);
    /* not a GGUF */
    const char *junk = tu_tmp_path("junk.gguf");
    assert_int_equal(tu_write_file(junk, "not a model", 11), 0);
    assert_int_equal(quantize_file(junk, out, "Q8_0", &qp, NULL, &err), WGML_ERR_FORMAT);
    assert_no_output(out);
    /* unwritable output */
    const char *nowhere = "/no/such/dir/out.gguf";
    assert_int_equal(quantize_file(tu_shared("models/stories260K.gguf"), nowhere, "Q8_0", &qp, NULL, &err),
                     WGML_ERR_IO);
    assert_non_null(strstr(err.message, "/no/such/dir/out.gguf"));
    assert_no_output(nowhere);
    /* cancelled half way: the temporary is removed */
    quantize_params qc = {.n_threads = 2, .progress = cancel_at_half};
    assert_int_equal(quantize_file(tu_shared("models/stories260K.gguf"), out, "Q8_0", &qc, NULL, &err),
                     WGML_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "cancelled"));
    assert_no_output(out);
    remove(junk);
}

/* Every allocation failing in turn: out of memory reported, nothing leaked (ASan), no file left. */
static void test_out_of_memory(void **state) {
    (void)state;
    const char *out = tu_tmp_path("oom.gguf");
    quantize_params qp = {.n_threads = 2};
    wgml_error err;
    int n;
    for (n = 0; n < 1000; n++) {
        wgml_alloc_fail_after(n);
        wgml_status st = quantize_file(tu_shared("models/stories260K.gguf"), out, "Q4_K_M", &qp, NULL, &err);
        wgml_alloc_fail_after(-1);
        if (st == WGML_OK) break;
        if (st != WGML_ERR_OUT_OF_MEMORY) fail_msg("allocation %d failing: %s", n, err.message);
        assert_no_output(out);
    }
    assert_true(n > 5 && n < 1000);
    remove(out);
}

/* ---- the command ---- */

static int run_cli(const char *args, char *errbuf, size_t cap) {
    const char *cli = getenv("WGML_CLI");
    if (!cli || !*cli) return -1;
    const char *errp = tu_tmp_path("cli.err");
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' %s >/dev/null 2>'%s' </dev/null", cli, args, errp);
    int st = system(cmd);
    size_t n;
    unsigned char *b = tu_read_file(errp, &n);
    snprintf(errbuf, cap, "%s", b ? (char *)b : "");
    free(b);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_cli(void **state) {
    (void)state;
    if (!getenv("WGML_CLI") || !*getenv("WGML_CLI")) skip();
    static char e[65536];
    char args[2048];
    const char *out = tu_tmp_path("cli-q.gguf"), *in = tu_shared("models/stories260K.gguf");
    snprintf(args, sizeof args, "quantize '%s' '%s' q8_0 --threads 2", in, out);
    assert_int_equal(run_cli(args, e, sizeof e), 0);
    assert_non_null(strstr(e, "using F16")); /* the fallback note */
    assert_non_null(strstr(e, "file type 7"));
    assert_true(exists(out));
    remove(out);
    snprintf(args, sizeof args, "quantize '%s' '%s' Q9", in, out);
    assert_int_equal(run_cli(args, e, sizeof e), 2);
    assert_non_null(strstr(e, "unknown type 'Q9'"));
    snprintf(args, sizeof args, "quantize '%s' '%s'", in, out);
    assert_int_equal(run_cli(args, e, sizeof e), 2);
    snprintf(args, sizeof args, "quantize '%s' '%s' Q8_0 --threads zero", in, out);
    assert_int_equal(run_cli(args, e, sizeof e), 2);
    snprintf(args, sizeof args, "quantize /no/such.gguf '%s' Q8_0", out);
    assert_int_equal(run_cli(args, e, sizeof e), 1);
    assert_non_null(strstr(e, "/no/such.gguf"));
    assert_no_output(out);
    assert_int_equal(run_cli("quantize --help", e, sizeof e), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_recipe_lookup),      cmocka_unit_test(test_recipe_q4_k_m),
        cmocka_unit_test(test_recipe_others),      cmocka_unit_test(test_recipe_fallback),
        cmocka_unit_test(test_file_type),          cmocka_unit_test(test_stories_q8_0_text),
        cmocka_unit_test(test_threads_and_inputs), cmocka_unit_test(test_bad_inputs),
        cmocka_unit_test(test_out_of_memory),      cmocka_unit_test(test_cli),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
