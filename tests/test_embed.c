/*
 * test_embed.c - the embedding and reranking API (wgml_embed, wgml_rerank)
 * on the CPU: its contract (dimensions, pooling, normalization, truncation,
 * errors), and that a text's vector does not depend on the texts packed
 * with it. The numbers themselves are checked against an independent
 * float64 reference in tests/reference/ (test_bert_reference).
 */
#include "testutil.h"
#include "tools/synth.h"
#include "wgml.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static wgml_model *bge, *reranker, *nomic, *llama; /* NULL without the shared data: tests skip */
static int notes;
static char last_note[256];

static void on_log(void *user, const char *line) {
    (void)user;
    notes++;
    snprintf(last_note, sizeof last_note, "%s", line);
}

static wgml_model *synth_load(const char *arch, const char *type) {
    char name[64];
    snprintf(name, sizeof name, "%s-%s.gguf", arch, type);
    const char *path = tu_tmp_path(name);
    synth_params p = {.arch = arch, .type = type, .vocab = tu_shared("vocab/ggml-vocab-bert-bge.gguf"), .seed = 7,
                      .n_layer = 2};
    wgml_error err;
    if (synth_write(path, &p, NULL, &err)) {
        fprintf(stderr, "synth %s: %s\n", arch, err.message);
        return NULL;
    }
    wgml_model_params mp = wgml_model_default_params();
    mp.backend = WGML_BACKEND_CPU;
    mp.log = on_log;
    wgml_model *m = NULL;
    if (wgml_model_load(path, &mp, &m, &err)) fprintf(stderr, "load %s: %s\n", arch, err.message);
    remove(path);
    return m;
}

static int setup(void **state) {
    (void)state;
    if (!tu_shared_present()) return 0;
    bge = synth_load("bge-small", "F16");
    reranker = synth_load("ms-marco-minilm-l6", "F32");
    nomic = synth_load("nomic-embed", "Q8_0");
    wgml_model_params mp = wgml_model_default_params();
    mp.backend = WGML_BACKEND_CPU;
    wgml_error err;
    if (wgml_model_load(tu_shared("models/stories260K.gguf"), &mp, &llama, &err)) return -1;
    return bge && reranker && nomic ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    wgml_model_free(bge);
    wgml_model_free(reranker);
    wgml_model_free(nomic);
    wgml_model_free(llama);
    return 0;
}

#define NEED()                                                                                                         \
    do {                                                                                                               \
        if (!bge) skip();                                                                                              \
    } while (0)

static const char *const texts[] = {
    "Hello world",
    "The quick brown fox jumps over the lazy dog.",
    "",
    "Caf\xc3\xa9 au lait, s'il vous pla\xc3\xaet! Numbers: 3.14159 and 42.",
    "a b c d e f g h i j k l m n o p q r s t u v w x y z",
};
#define N_TEXTS 5

static double norm(const float *v, int n) {
    double s = 0;
    for (int i = 0; i < n; i++) s += (double)v[i] * v[i];
    return sqrt(s);
}

static double max_diff(const float *a, const float *b, size_t n) {
    double d = 0;
    for (size_t i = 0; i < n; i++) d = fmax(d, fabs((double)a[i] - b[i]));
    return d;
}

static void test_info(void **state) {
    (void)state;
    NEED();
    wgml_model_info info;
    wgml_model_get_info(bge, &info);
    assert_string_equal(info.family, "bert");
    assert_string_equal(info.architecture, "bert");
    assert_int_equal(info.tasks, WGML_TASK_EMBED);
    assert_int_equal(info.n_embd, 384);
    assert_int_equal(info.n_layer, 2);
    assert_int_equal(info.n_ctx_train, 512);
    assert_int_equal(info.pooling, WGML_POOLING_CLS);
    assert_int_equal(info.bos, 101); /* [CLS] */
    assert_true(info.matmul_params > 0 && info.matmul_params < info.n_params);
    wgml_model_get_info(reranker, &info);
    assert_int_equal(info.tasks, WGML_TASK_RERANK);
    wgml_model_get_info(nomic, &info);
    assert_string_equal(info.architecture, "nomic-bert");
    assert_int_equal(info.n_embd, 768);
    assert_int_equal(info.pooling, WGML_POOLING_MEAN);
}

static void test_dims(void **state) {
    (void)state;
    NEED();
    wgml_embed_params p = wgml_embed_default_params();
    assert_int_equal(wgml_embed_dim(bge, NULL), 384);
    assert_int_equal(wgml_embed_dim(bge, &p), 384);
    p.dimensions = 128;
    assert_int_equal(wgml_embed_dim(bge, &p), 128);
    p.dimensions = 385;
    assert_int_equal(wgml_embed_dim(bge, &p), -1);
    p.dimensions = -1;
    assert_int_equal(wgml_embed_dim(bge, &p), -1);
    assert_int_equal(wgml_embed_dim(llama, NULL), -1);
    assert_int_equal(wgml_embed_dim(NULL, NULL), -1);
}

static void test_errors(void **state) {
    (void)state;
    NEED();
    float v[768];
    wgml_error err;
    wgml_embed_params p = wgml_embed_default_params();
    assert_int_equal(wgml_embed(bge, texts, 1, &p, v, 383, &err), WGML_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "384"));
    assert_int_equal(wgml_embed(bge, NULL, 1, &p, v, 384, &err), WGML_ERR_INVALID_ARGUMENT);
    assert_int_equal(wgml_embed(bge, texts, -1, &p, v, 384, &err), WGML_ERR_INVALID_ARGUMENT);
    assert_int_equal(wgml_embed(bge, texts, 0, &p, NULL, 384, &err), WGML_OK); /* nothing to do */
    const char *with_null[] = {"a", NULL};
    assert_int_equal(wgml_embed(bge, with_null, 2, &p, v, 384, &err), WGML_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "text 1"));
    p.pooling = (wgml_pooling)99;
    assert_int_equal(wgml_embed(bge, texts, 1, &p, v, 384, &err), WGML_ERR_INVALID_ARGUMENT);
    p = wgml_embed_default_params();
    p.normalize = (wgml_normalize)7;
    assert_int_equal(wgml_embed(bge, texts, 1, &p, v, 384, &err), WGML_ERR_INVALID_ARGUMENT);
    /* the wrong task, both ways */
    assert_int_equal(wgml_embed(llama, texts, 1, NULL, v, 384, &err), WGML_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.message, "llama"));
    wgml_session *s = NULL;
    assert_int_equal(wgml_session_create(bge, NULL, &s, &err), WGML_ERR_UNSUPPORTED);
    assert_null(s);
    float sc[2];
    assert_int_equal(wgml_rerank(bge, "q", texts, 2, sc, &err), WGML_ERR_UNSUPPORTED);
    assert_int_equal(wgml_rerank(llama, "q", texts, 2, sc, &err), WGML_ERR_UNSUPPORTED);
    assert_int_equal(wgml_rerank(reranker, NULL, texts, 2, sc, &err), WGML_ERR_INVALID_ARGUMENT);
}

/* Unit length by default, the raw pooled vector with NORMALIZE_NONE, and a
 * Matryoshka prefix re-normalized. */
static void test_normalize(void **state) {
    (void)state;
    NEED();
    float l2[384], raw[384], pre[128];
    wgml_error err;
    wgml_embed_params p = wgml_embed_default_params();
    assert_int_equal(wgml_embed(bge, texts + 1, 1, &p, l2, 384, &err), WGML_OK);
    assert_true(fabs(norm(l2, 384) - 1) < 1e-5);
    p.normalize = WGML_NORMALIZE_NONE;
    assert_int_equal(wgml_embed(bge, texts + 1, 1, &p, raw, 384, &err), WGML_OK);
    double n = norm(raw, 384);
    assert_true(fabs(n - 1) > 0.1);
    for (int i = 0; i < 384; i++) assert_true(fabs(raw[i] / n - l2[i]) < 1e-5);
    p = wgml_embed_default_params();
    p.dimensions = 128;
    assert_int_equal(wgml_embed(bge, texts + 1, 1, &p, pre, 128, &err), WGML_OK);
    double n128 = norm(raw, 128);
    for (int i = 0; i < 128; i++) assert_true(fabs(raw[i] / n128 - pre[i]) < 1e-5);
}

/* Pooling from the file (CLS for bge-small), or asked for. */
static void test_pooling(void **state) {
    (void)state;
    NEED();
    float def[384], cls[384], mean[384], last[384];
    wgml_error err;
    wgml_embed_params p = wgml_embed_default_params();
    assert_int_equal(wgml_embed(bge, texts + 1, 1, &p, def, 384, &err), WGML_OK);
    p.pooling = WGML_POOLING_CLS;
    assert_int_equal(wgml_embed(bge, texts + 1, 1, &p, cls, 384, &err), WGML_OK);
    p.pooling = WGML_POOLING_MEAN;
    assert_int_equal(wgml_embed(bge, texts + 1, 1, &p, mean, 384, &err), WGML_OK);
    p.pooling = WGML_POOLING_LAST;
    assert_int_equal(wgml_embed(bge, texts + 1, 1, &p, last, 384, &err), WGML_OK);
    assert_true(max_diff(def, cls, 384) == 0);
    assert_true(max_diff(cls, mean, 384) > 1e-3);
    assert_true(max_diff(cls, last, 384) > 1e-3);
    assert_true(max_diff(mean, last, 384) > 1e-3);
}

/* Each text's vector alone, packed with others in one step, and split over
 * several steps by a small n_batch: the same. */
static void check_packing(wgml_model *m, int dim) {
    float *all = malloc(N_TEXTS * (size_t)dim * sizeof(float)), *one = malloc((size_t)dim * sizeof(float));
    float *steps = malloc(N_TEXTS * (size_t)dim * sizeof(float));
    assert_non_null(all);
    assert_non_null(one);
    assert_non_null(steps);
    wgml_error err;
    wgml_embed_params p = wgml_embed_default_params();
    assert_int_equal(wgml_embed(m, texts, N_TEXTS, &p, all, dim, &err), WGML_OK);
    p.n_batch = 8; /* smaller than some texts: those get a step of their own */
    assert_int_equal(wgml_embed(m, texts, N_TEXTS, &p, steps, dim, &err), WGML_OK);
    p.n_batch = 0;
    for (int i = 0; i < N_TEXTS; i++) {
        assert_int_equal(wgml_embed(m, texts + i, 1, &p, one, dim, &err), WGML_OK);
        assert_true(max_diff(one, all + (size_t)i * dim, (size_t)dim) < 1e-5);
        assert_true(max_diff(one, steps + (size_t)i * dim, (size_t)dim) < 1e-5);
        assert_true(fabs(norm(one, dim) - 1) < 1e-5);
        for (int j = 0; j < i; j++) /* different texts, different vectors */
            assert_true(max_diff(all + (size_t)j * dim, all + (size_t)i * dim, (size_t)dim) > 1e-3);
    }
    free(all);
    free(one);
    free(steps);
}

static void test_packing(void **state) {
    (void)state;
    NEED();
    check_packing(bge, 384);
    check_packing(nomic, 768);
}

/* Longer than the context: an error naming it, or cut to fit with a note. */
static void test_truncate(void **state) {
    (void)state;
    NEED();
    size_t n = 600 * 4;
    char *longt = malloc(n + 1);
    assert_non_null(longt);
    for (size_t i = 0; i < n; i += 4) memcpy(longt + i, "cat ", 4);
    longt[n - 1] = '\0';
    const char *one[] = {longt};
    float v[384], w[384];
    wgml_error err;
    wgml_embed_params p = wgml_embed_default_params();
    assert_int_equal(wgml_embed(bge, one, 1, &p, v, 384, &err), WGML_ERR_CONTEXT_FULL);
    assert_non_null(strstr(err.message, "602 tokens"));
    assert_non_null(strstr(err.message, "512"));
    int before = notes;
    p.truncate = 1;
    assert_int_equal(wgml_embed(bge, one, 1, &p, v, 384, &err), WGML_OK);
    assert_int_equal(notes, before + 1);
    assert_non_null(strstr(last_note, "602 tokens cut"));
    /* the same as the text that fits exactly: 510 words between [CLS] and [SEP] */
    longt[510 * 4 - 1] = '\0';
    p.truncate = 0;
    assert_int_equal(wgml_embed(bge, one, 1, &p, w, 384, &err), WGML_OK);
    assert_true(max_diff(v, w, 384) < 1e-5);
    free(longt);
}

static void test_rerank(void **state) {
    (void)state;
    NEED();
    float s[N_TEXTS], one;
    wgml_error err;
    const char *q = "what does the fox do";
    assert_int_equal(wgml_rerank(reranker, q, texts, N_TEXTS, s, &err), WGML_OK);
    for (int i = 0; i < N_TEXTS; i++) {
        assert_true(isfinite(s[i]));
        assert_int_equal(wgml_rerank(reranker, q, texts + i, 1, &one, &err), WGML_OK);
        assert_true(fabs(one - s[i]) < 1e-5);
    }
    assert_true(fabs(s[0] - s[1]) > 1e-6);
    /* the pair depends on the query */
    assert_int_equal(wgml_rerank(reranker, "an entirely different question", texts + 1, 1, &one, &err), WGML_OK);
    assert_true(fabs(one - s[1]) > 1e-6);
    /* a reranker embeds too: its [CLS] vectors */
    float v[384];
    assert_int_equal(wgml_embed(reranker, texts, 1, NULL, v, 384, &err), WGML_OK);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_info),     cmocka_unit_test(test_dims),    cmocka_unit_test(test_errors),
        cmocka_unit_test(test_normalize), cmocka_unit_test(test_pooling), cmocka_unit_test(test_packing),
        cmocka_unit_test(test_truncate), cmocka_unit_test(test_rerank),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
