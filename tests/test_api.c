/*
 * test_api.c - the public API's contract: limits, stop reasons, streaming,
 * sessions that continue, seeds, parameter validation. CPU backend.
 */
#include "api_internal.h"
#include "backend/backend.h"
#include "core/dtype.h"
#include "testutil.h"
#include "wgml.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static wgml_model *model; /* NULL when the shared data is missing: every test is skipped */
#define NEED_MODEL()                                                                                                   \
    do {                                                                                                               \
        if (!model) skip();                                                                                            \
    } while (0)

static int setup(void **state) {
    (void)state;
    wgml_model_params mp = wgml_model_default_params();
    mp.backend = WGML_BACKEND_CPU;
    wgml_error err;
    if (!tu_shared_present()) return 0;
    return wgml_model_load(tu_shared("models/stories260K.gguf"), &mp, &model, &err) == WGML_OK ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    wgml_model_free(model);
    return 0;
}

static wgml_session *session(int n_ctx) {
    wgml_session_params sp = wgml_session_default_params();
    sp.n_ctx = n_ctx;
    wgml_session *s;
    wgml_error err;
    assert_int_equal(wgml_session_create(model, &sp, &s, &err), WGML_OK);
    return s;
}

static wgml_status gen(wgml_session *s, const char *prompt, int n, float temp, uint64_t seed, tu_sink *out,
                       wgml_generate_result *res, wgml_error *err) {
    wgml_generate_params gp = wgml_generate_default_params();
    gp.n_predict = n;
    gp.sampler.temperature = temp;
    gp.sampler.seed = seed;
    gp.on_token = tu_collect;
    gp.user = out;
    return wgml_generate(s, prompt, &gp, res, err);
}

static void test_info(void **state) {
    (void)state;
    NEED_MODEL();
    wgml_model_info info;
    wgml_model_get_info(model, &info);
    assert_string_equal(info.architecture, "llama");
    assert_string_equal(info.family, "llama");
    assert_int_equal(info.tasks, WGML_TASK_GENERATE);
    assert_string_equal(info.backend, "cpu");
    assert_int_equal(info.n_vocab, 512);
    assert_int_equal(info.n_layer, 5);
    assert_int_equal(info.n_head, 8);
    assert_int_equal(info.n_head_kv, 4);
    assert_int_equal(info.bos, 1);
    assert_int_equal(info.eos, 2);
}

static void test_prompt_too_long(void **state) {
    (void)state;
    NEED_MODEL();
    wgml_session *s = session(8);
    tu_sink out = {0};
    wgml_error err;
    wgml_generate_result res;
    wgml_status st =
        gen(s, "Once upon a time there was a little girl named Lily who loved to play", 4, 0, 0, &out, &res, &err);
    assert_int_equal(st, WGML_ERR_CONTEXT_FULL);
    assert_non_null(strstr(err.message, "context"));
    assert_int_equal(out.calls, 0);
    /* the session is still usable */
    assert_int_equal(wgml_session_n_past(s), 0);
    assert_int_equal(gen(s, "Once", 2, 0, 0, &out, &res, &err), WGML_OK);
    assert_int_equal(res.n_generated, 2);
    wgml_session_free(s);
}

static void test_context_end(void **state) {
    (void)state;
    NEED_MODEL();
    wgml_session *s = session(16);
    tu_sink out = {0};
    wgml_error err;
    wgml_generate_result res;
    assert_int_equal(gen(s, "Once upon a time", -1, 0, 0, &out, &res, &err), WGML_OK);
    assert_int_equal(res.stop, WGML_STOP_CONTEXT_FULL);
    assert_int_equal(res.n_prompt, 5);
    assert_int_equal(res.n_generated, 16 - 5 + 1); /* the last token is sampled but never needs a slot */
    /* a further call has no room */
    assert_int_equal(gen(s, " more", 1, 0, 0, &out, &res, &err), WGML_ERR_CONTEXT_FULL);
    wgml_session_reset(s);
    assert_int_equal(gen(s, "Once", 1, 0, 0, &out, &res, &err), WGML_OK);
    wgml_session_free(s);
}

static void test_zero_tokens(void **state) {
    (void)state;
    NEED_MODEL();
    wgml_session *s = session(64);
    tu_sink out = {0};
    wgml_error err;
    wgml_generate_result res;
    assert_int_equal(gen(s, "Once upon a time", 0, 0, 0, &out, &res, &err), WGML_OK);
    assert_int_equal(res.n_generated, 0);
    assert_int_equal(res.stop, WGML_STOP_MAX_TOKENS);
    assert_int_equal(out.calls, 0);
    assert_int_equal(wgml_session_n_past(s), 5);
    wgml_session_free(s);
}

static void test_empty_prompt(void **state) {
    (void)state;
    NEED_MODEL();
    wgml_session *s = session(64);
    tu_sink out = {0};
    wgml_error err;
    wgml_generate_result res;
    assert_int_equal(gen(s, "", 8, 0, 0, &out, &res, &err), WGML_OK);
    assert_int_equal(res.n_prompt, 1); /* BOS */
    assert_int_equal(strncmp(out.text, "Once upon", 9), 0);
    wgml_session_free(s);
    /* without BOS there is nothing to start from */
    s = session(64);
    wgml_generate_params gp = wgml_generate_default_params();
    gp.add_bos = 0;
    assert_int_equal(wgml_generate(s, "", &gp, &res, &err), WGML_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "empty prompt"));
    wgml_session_free(s);
}

static void test_continuation(void **state) {
    (void)state;
    NEED_MODEL();
    /* 10 + 10 tokens in two calls equal 20 in one */
    wgml_session *a = session(128), *b = session(128);
    tu_sink one = {0}, two = {0};
    wgml_error err;
    wgml_generate_result res;
    assert_int_equal(gen(a, "Once upon a time", 20, 0, 0, &one, &res, &err), WGML_OK);
    assert_int_equal(gen(b, "Once upon a time", 10, 0, 0, &two, &res, &err), WGML_OK);
    assert_int_equal(gen(b, "", 10, 0, 0, &two, &res, &err), WGML_OK);
    assert_string_equal(one.text, two.text);
    wgml_session_free(a);
    wgml_session_free(b);
}

static void test_callback_stop(void **state) {
    (void)state;
    NEED_MODEL();
    wgml_session *s = session(128);
    tu_sink out = {.stop_after = 3};
    wgml_error err;
    wgml_generate_result res;
    assert_int_equal(gen(s, "Once upon a time", 50, 0, 0, &out, &res, &err), WGML_OK);
    assert_int_equal(res.stop, WGML_STOP_CALLBACK);
    assert_int_equal(res.n_generated, 3);
    wgml_session_free(s);
}

static void test_seed(void **state) {
    (void)state;
    NEED_MODEL();
    tu_sink a = {0}, b = {0}, c = {0};
    wgml_error err;
    wgml_generate_result res;
    wgml_session *s = session(256);
    assert_int_equal(gen(s, "Once upon a time", 60, 1.0f, 42, &a, &res, &err), WGML_OK);
    wgml_session_reset(s);
    assert_int_equal(gen(s, "Once upon a time", 60, 1.0f, 42, &b, &res, &err), WGML_OK);
    wgml_session_reset(s);
    assert_int_equal(gen(s, "Once upon a time", 60, 1.0f, 43, &c, &res, &err), WGML_OK);
    assert_string_equal(a.text, b.text);
    assert_string_not_equal(a.text, c.text);
    wgml_session_free(s);
}

static void test_bad_sampling(void **state) {
    (void)state;
    NEED_MODEL();
    wgml_session *s = session(64);
    wgml_error err;
    wgml_generate_result res;
    struct {
        const char *field;
        wgml_sampler_params p;
    } cases[9];
    for (int i = 0; i < 9; i++)
        cases[i].p = wgml_sampler_default_params();
    cases[0].field = "temperature", cases[0].p.temperature = -1;
    cases[1].field = "top-p", cases[1].p.top_p = 0;
    cases[2].field = "top-p", cases[2].p.top_p = 1.5f;
    cases[3].field = "min-p", cases[3].p.min_p = -0.1f;
    cases[4].field = "top-k", cases[4].p.top_k = -3;
    cases[5].field = "temperature", cases[5].p.temperature = NAN;
    cases[6].field = "repeat penalty", cases[6].p.repeat_penalty = 0;
    cases[7].field = "repeat-last-n", cases[7].p.repeat_last_n = -1;
    cases[8].field = "min-p", cases[8].p.min_p = 2;
    for (int i = 0; i < 9; i++) {
        wgml_generate_params gp = wgml_generate_default_params();
        gp.sampler = cases[i].p;
        assert_int_equal(wgml_generate(s, "Once", &gp, &res, &err), WGML_ERR_INVALID_ARGUMENT);
        assert_non_null(strstr(err.message, cases[i].field));
    }
    wgml_session_free(s);
}

static void test_invalid_utf8(void **state) {
    (void)state;
    NEED_MODEL();
    wgml_session *s = session(128);
    tu_sink out = {0};
    wgml_error err;
    wgml_generate_result res;
    const char bad[] = "Once \xff\xfe upon \xc3 a \xe2\x82 time \x80";
    wgml_status st = gen(s, bad, 5, 0, 0, &out, &res, &err);
    assert_int_equal(st, WGML_OK); /* byte fallback tokens carry the bytes */
    assert_true(res.n_prompt > 5);
    wgml_session_free(s);
}

/* Both KV cache types on the CPU: the same greedy text from either (the
 * reference run of stories260K is not sensitive to f16 keys and values), and
 * the default is f16. */
static void test_kv_types(void **state) {
    (void)state;
    NEED_MODEL();
    const wgml_kv_type types[] = {WGML_KV_F16, WGML_KV_F32};
    static char text[2][sizeof(((tu_sink *)0)->text)];
    for (int i = 0; i < 2; i++) {
        wgml_session_params sp = {.n_ctx = 96, .kv_type = types[i]};
        wgml_session *s;
        wgml_error err;
        assert_int_equal(wgml_session_create(model, &sp, &s, &err), WGML_OK);
        static tu_sink out;
        memset(&out, 0, sizeof out);
        assert_int_equal(gen(s, "Once upon a time", 40, 0, 1, &out, NULL, &err), WGML_OK);
        memcpy(text[i], out.text, sizeof out.text);
        wgml_session_free(s);
    }
    assert_true(strlen(text[0]) > 40);
    assert_string_equal(text[0], text[1]);
    assert_int_equal(wgml_model_backend(model)->kv_type, WGML_F16);
}

static void test_bad_arguments(void **state) {
    (void)state;
    NEED_MODEL();
    wgml_error err;
    wgml_model *m = NULL;
    assert_int_equal(wgml_model_load(NULL, NULL, &m, &err), WGML_ERR_INVALID_ARGUMENT);
    assert_int_equal(wgml_model_load("/nonexistent/model.gguf", NULL, &m, &err), WGML_ERR_IO);
    assert_non_null(strstr(err.message, "/nonexistent/model.gguf"));
    assert_null(m);
    wgml_session_params sp = {.n_ctx = -5};
    wgml_session *s = NULL;
    assert_int_equal(wgml_session_create(model, &sp, &s, &err), WGML_ERR_INVALID_ARGUMENT);
    sp = (wgml_session_params){.n_ctx = 32, .kv_type = (wgml_kv_type)7};
    assert_int_equal(wgml_session_create(model, &sp, &s, &err), WGML_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "KV cache type 7"));
    assert_null(s);
    s = session(32);
    int32_t bad_id = 100000;
    assert_int_equal(wgml_session_eval(s, &bad_id, 1, &err), WGML_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "100000"));
    assert_int_equal(wgml_generate(NULL, "x", NULL, NULL, &err), WGML_ERR_INVALID_ARGUMENT);
    char buf[8];
    assert_true(wgml_token_to_piece(model, -1, buf, 8) < 0);
    assert_true(wgml_token_to_piece(model, 512, buf, 8) < 0);
    wgml_session_free(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_info),          cmocka_unit_test(test_prompt_too_long),
        cmocka_unit_test(test_context_end),   cmocka_unit_test(test_zero_tokens),
        cmocka_unit_test(test_empty_prompt),  cmocka_unit_test(test_continuation),
        cmocka_unit_test(test_callback_stop), cmocka_unit_test(test_seed),
        cmocka_unit_test(test_bad_sampling),  cmocka_unit_test(test_invalid_utf8),
        cmocka_unit_test(test_bad_arguments), cmocka_unit_test(test_kv_types),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
