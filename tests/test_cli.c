/*
 * test_cli.c - the wgml command line as a user meets it: exit codes, messages
 * that name the problem, stdout carrying only the generated text.
 * Runs the built binary ($WGML_CLI).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "testutil.h"

typedef struct {
    int code;
    char out[65536];
    char err[65536];
} result;

/* Runs `wgml ARGS` through the shell, capturing stdout and stderr. */
static void run(result *r, const char *args) {
    const char *cli = getenv("WGML_CLI");
    assert_non_null(cli);
    const char *out = tu_tmp_path("cli.out"), *err = tu_tmp_path("cli.err");
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' %s >'%s' 2>'%s' </dev/null", cli, args, out, err);
    int st = system(cmd);
    r->code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    size_t n;
    unsigned char *b = tu_read_file(out, &n);
    snprintf(r->out, sizeof r->out, "%s", b ? (char *)b : "");
    free(b);
    b = tu_read_file(err, &n);
    snprintf(r->err, sizeof r->err, "%s", b ? (char *)b : "");
    free(b);
}

static const char *model(void) {
    static char buf[4200];
    snprintf(buf, sizeof buf, "-m '%s'", tu_shared("models/stories260K.gguf"));
    return buf;
}

static void test_run_reference(void **state) {
    (void)state;
    result r;
    char args[4400];
    snprintf(args, sizeof args, "run %s --backend cpu --temp 0 -n 60 -p 'Once upon a time'", model());
    run(&r, args);
    assert_int_equal(r.code, 0);
    size_t n;
    char *ref = (char *)tu_read_file(tu_shared("models/reference/stories260K.llama2c-run.t0.n64.once.txt"), &n);
    assert_non_null(ref);
    assert_string_equal(r.out, ref); /* stdout: prompt + continuation + newline, nothing else */
    assert_non_null(strstr(r.err, "tok/s"));
    free(ref);
}

static void test_missing_file(void **state) {
    (void)state;
    result r;
    run(&r, "run -m /no/such/model.gguf -n 4");
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.err, "/no/such/model.gguf"));
    assert_non_null(strstr(r.err, "cannot open"));
    assert_string_equal(r.out, "");
}

static void test_bad_model(void **state) {
    (void)state;
    const char *p = tu_tmp_path("not-a-model.gguf");
    assert_int_equal(tu_write_file(p, "hello, this is not a model file at all", 38), 0);
    result r;
    char args[1024];
    snprintf(args, sizeof args, "run -m '%s' -n 4", p);
    run(&r, args);
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.err, "not a GGUF file"));
    snprintf(args, sizeof args, "info '%s'", p);
    run(&r, args);
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.err, "not a GGUF file"));
}

static void test_prompt_too_long(void **state) {
    (void)state;
    result r;
    char args[4400];
    snprintf(args, sizeof args,
             "run %s --backend cpu -c 8 -n 4 -p 'Once upon a time there was a little girl named Lily who liked to play'",
             model());
    run(&r, args);
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.err, "context"));
}

static void test_usage_errors(void **state) {
    (void)state;
    result r;
    run(&r, "run --no-such-option");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "--no-such-option"));
    run(&r, "run -n abc");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "integer"));
    run(&r, "run --temp -1");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "--temp"));
    run(&r, "run --top-p 2");
    assert_int_equal(r.code, 2);
    run(&r, "run --backend metal");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "--backend"));
    run(&r, "frobnicate");
    assert_int_equal(r.code, 2);
    run(&r, "");
    assert_int_equal(r.code, 2);
    run(&r, "run -m");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "needs a value"));
    run(&r, "--help");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "run"));
}

static void test_info(void **state) {
    (void)state;
    result r;
    char args[4400];
    snprintf(args, sizeof args, "info %s --tensors", model());
    run(&r, args);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "architecture:  llama"));
    assert_non_null(strstr(r.out, "blk.4.ffn_down.weight"));
    assert_non_null(strstr(r.out, "F32"));
}

static void test_tokenize(void **state) {
    (void)state;
    result r;
    char args[4400];
    snprintf(args, sizeof args, "tokenize %s --bos 'Once upon a time'", model());
    run(&r, args);
    assert_int_equal(r.code, 0);
    assert_string_equal(r.out, "1 403 407 261 378\n");
}

static void test_bench_json(void **state) {
    (void)state;
    result r;
    char args[4400];
    snprintf(args, sizeof args, "bench %s --backend cpu -p 16 -n 16 --json", model());
    run(&r, args);
    assert_int_equal(r.code, 0);
    const char *keys[] = {"\"pp_tokens_per_s\"", "\"tg_tokens_per_s\"", "\"load_ms\"", "\"peak_rss_mb\"",
                          "\"backend\":\"cpu\"", "\"model\""};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) assert_non_null(strstr(r.out, keys[i]));
    assert_int_equal(r.out[0], '{');
}

static void test_convert(void **state) {
    (void)state;
    result r;
    char args[8192];
    const char *out = tu_tmp_path("cli-conv.gguf");
    snprintf(args, sizeof args, "convert llama2c '%s' '%s' -o '%s'", tu_shared("models/llama2c/stories260K.bin"),
             tu_shared("models/llama2c/tok512.bin"), out);
    run(&r, args);
    assert_int_equal(r.code, 0);
    snprintf(args, sizeof args, "run -m '%s' --backend cpu --temp 0 -n 8 -p 'Once upon a time'", out);
    run(&r, args);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "Once upon a time, there was a little girl"));
    snprintf(args, sizeof args, "convert llama2c '%s' '%s' -o '%s'", tu_shared("models/llama2c/tok512.bin"),
             tu_shared("models/llama2c/tok512.bin"), tu_tmp_path("bad.gguf"));
    run(&r, args);
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.err, "tok512.bin"));
    remove(out);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_run_reference), cmocka_unit_test(test_missing_file),
        cmocka_unit_test(test_bad_model),     cmocka_unit_test(test_prompt_too_long),
        cmocka_unit_test(test_usage_errors),  cmocka_unit_test(test_info),
        cmocka_unit_test(test_tokenize),      cmocka_unit_test(test_bench_json),
        cmocka_unit_test(test_convert),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
