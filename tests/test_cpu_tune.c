/*
 * test_cpu_tune.c - the CPU's kernel paths chosen by measurement
 * (backend/cpu/cpu_tune.h): measured once and kept in the cache directory,
 * read back by later calls; WGML_CPU_GEMM's override honoured; a corrupt
 * file, one from another CPU or version, or one whose choice its own figures
 * contradict, ignored (measured again and rewritten); a reduced-precision
 * path never chosen unless measured faster; the process's choice is what the
 * GEMM uses.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_gemm.h"
#include "backend/cpu/cpu_tune.h"
#include "backend/cpu/kernels.h"
#include "testutil.h"

static char dir[512];

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static char *read_all(const char *path) {
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    static char buf[4096];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static void check_rule(const cpu_gemm_choice *c) {
    assert_true(c->f32_gflops > 0 && c->bf16_gflops > 0);
    assert_int_equal(c->bf16, c->bf16_gflops >= CPU_TUNE_MARGIN * c->f32_gflops);
}

static void test_measure_and_cache(void **state) {
    (void)state;
    if (!cpu_kernels_gemm_bf16()) skip(); /* no second path on this CPU: test_no_kernel */
    cpu_gemm_choice a, b;
    cpu_gemm_choose(dir, NULL, NULL, &a);
    assert_int_equal(a.source, CPU_TUNE_MEASURED);
    check_rule(&a);
    assert_non_null(strstr(a.file, dir));
    fprintf(stderr, "measured: bf16 %.0f, f32 %.0f GFLOP/s a thread -> %s\n", a.bf16_gflops, a.f32_gflops,
            a.bf16 ? "bf16" : "f32");
    char id[512];
    cpu_tune_identity(id, sizeof id);
    const char *text = read_all(a.file);
    assert_non_null(strstr(text, id));
    /* read back, not measured again */
    cpu_gemm_choose(dir, "auto", NULL, &b);
    assert_int_equal(b.source, CPU_TUNE_CACHED);
    assert_int_equal(b.bf16, a.bf16);
    assert_string_equal(b.file, a.file);
    assert_true(b.f32_gflops > 0.999 * a.f32_gflops && b.f32_gflops < 1.001 * a.f32_gflops);
    /* another identity has a file of its own */
    cpu_gemm_choose(dir, NULL, "SomeVendor family 1 model 2 | another CPU", &b);
    assert_int_equal(b.source, CPU_TUNE_MEASURED);
    assert_string_not_equal(b.file, a.file);
}

static void test_ignored_files(void **state) {
    (void)state;
    if (!cpu_kernels_gemm_bf16()) skip();
    cpu_gemm_choice a, b;
    cpu_gemm_choose(dir, NULL, NULL, &a); /* measured or cached: the path */
    const char *path = a.file;
    char id[512], text[2048];
    cpu_tune_identity(id, sizeof id);
    struct {
        const char *what, *fmt;
    } bad[] = {
        {"garbage", "\x01\x02 not a cache file \xff\n"},
        {"empty", ""},
        {"another CPU", "wgml cpu-gemm %d\ncpu OtherVendor family 9 model 9\nchoice f32\nf32_gflops 100\nbf16_gflops 50\n"},
        {"another version", "wgml cpu-gemm 999\ncpu %s\nchoice f32\nf32_gflops 100\nbf16_gflops 50\n"},
        {"a choice its figures contradict", "wgml cpu-gemm %d\ncpu %s\nchoice bf16\nf32_gflops 100\nbf16_gflops 50\n"},
        {"truncated", "wgml cpu-gemm %d\ncpu %s\nchoice f32\n"},
        {"not a number", "wgml cpu-gemm %d\ncpu %s\nchoice f32\nf32_gflops nan\nbf16_gflops 50\n"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (strstr(bad[i].fmt, "999")) snprintf(text, sizeof text, bad[i].fmt, id);
        else if (strstr(bad[i].fmt, "OtherVendor")) snprintf(text, sizeof text, bad[i].fmt, CPU_TUNE_VERSION);
        else snprintf(text, sizeof text, bad[i].fmt, CPU_TUNE_VERSION, id);
        write_file(path, text);
        cpu_gemm_choose(dir, NULL, NULL, &b);
        if (b.source != CPU_TUNE_MEASURED) fprintf(stderr, "%s: not ignored\n", bad[i].what);
        assert_int_equal(b.source, CPU_TUNE_MEASURED);
        check_rule(&b);
        /* rewritten: the next call reads it */
        cpu_gemm_choose(dir, NULL, NULL, &b);
        assert_int_equal(b.source, CPU_TUNE_CACHED);
    }
    /* a well-formed file is taken as it says (f32 here, as its figures say) */
    snprintf(text, sizeof text, "wgml cpu-gemm %d\ncpu %s\nchoice f32\nf32_gflops 100\nbf16_gflops 105\n",
             CPU_TUNE_VERSION, id);
    write_file(path, text);
    cpu_gemm_choose(dir, NULL, NULL, &b);
    assert_int_equal(b.source, CPU_TUNE_CACHED);
    assert_int_equal(b.bf16, 0); /* 1.05x is not faster enough to round */
}

static void test_override(void **state) {
    (void)state;
    cpu_gemm_choice c;
    cpu_gemm_choose(NULL, "f32", NULL, &c);
    assert_int_equal(c.bf16, 0);
    cpu_gemm_choose(NULL, "bf16", NULL, &c);
    if (cpu_kernels_gemm_bf16()) {
        assert_int_equal(c.source, CPU_TUNE_OVERRIDE);
        assert_int_equal(c.bf16, 1);
    } else { /* no kernel: f32 whatever is asked */
        assert_int_equal(c.source, CPU_TUNE_NO_KERNEL);
        assert_int_equal(c.bf16, 0);
    }
    /* no cache directory: measured, nothing written */
    if (cpu_kernels_gemm_bf16()) {
        cpu_gemm_choose(NULL, NULL, NULL, &c);
        assert_int_equal(c.source, CPU_TUNE_MEASURED);
        assert_string_equal(c.file, "");
        check_rule(&c);
    }
}

static void test_no_kernel(void **state) {
    (void)state;
    cpu_kernels_force_scalar(1);
    cpu_gemm_choice c;
    cpu_gemm_choose(dir, "bf16", NULL, &c);
    assert_int_equal(c.source, CPU_TUNE_NO_KERNEL);
    assert_int_equal(c.bf16, 0);
    cpu_kernels_force_scalar(0);
}

/* The process's choice (WGML_CPU_GEMM from ctest: f32, bf16 or unset) is the GEMM's. */
static void test_process_choice(void **state) {
    (void)state;
    const cpu_gemm_choice *c = cpu_gemm_choice_get();
    const char *env = getenv("WGML_CPU_GEMM");
    assert_int_equal(cpu_gemm_bf16_ok(), cpu_kernels_gemm_bf16() != NULL && c->bf16);
    if (cpu_kernels_gemm_bf16() && env && (!strcmp(env, "f32") || !strcmp(env, "bf16"))) {
        assert_int_equal(c->source, CPU_TUNE_OVERRIDE);
        assert_int_equal(c->bf16, !strcmp(env, "bf16"));
    }
    char line[1024];
    cpu_gemm_choice_describe(line, sizeof line);
    fprintf(stderr, "this process: %s\n", line);
    assert_non_null(strstr(line, c->bf16 ? "bf16 pairs" : "f32"));
}

static int setup(void **state) {
    (void)state;
    snprintf(dir, sizeof dir, "%s", tu_tmp_path("cpu-tune-cache/sub"));
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_measure_and_cache), cmocka_unit_test(test_ignored_files),
        cmocka_unit_test(test_override),          cmocka_unit_test(test_no_kernel),
        cmocka_unit_test(test_process_choice),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
