/*
 * test_kit_rng.c - the `kit` random stream (core/kit_rng.h) against the first
 * values of each draw that the official Kokoro code consumed in every
 * reference case (../shared/kokoro/reference/kokoro-tiny/manifest.json):
 * bit for bit, and counter-based (output n computed alone equals the n-th of
 * a sequential splitmix64).
 */
#include "core/kit_rng.h"
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The numbers of the JSON array after `key` at or after p (at most cap); the count, or -1. */
static int read_array(const char *p, const char *key, double *out, int cap) {
    const char *k = strstr(p, key);
    if (!k) return -1;
    const char *c = strchr(k + strlen(key), '[');
    if (!c) return -1;
    int n = 0;
    for (c++; *c && *c != ']' && n < cap;) {
        char *end;
        double v = strtod(c, &end);
        if (end == c) {
            c++;
            continue;
        }
        out[n++] = v;
        c = end;
    }
    return n;
}

/* splitmix64 as the README writes it: sequential state */
static uint64_t seq_next(uint64_t *st) {
    uint64_t z = (*st += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static void test_counter_based(void **state) {
    (void)state;
    uint64_t st = 12345;
    for (uint64_t n = 0; n < 1000; n++) assert_true(seq_next(&st) == wgml_kit_u64(12345, n));
    for (uint64_t n = 0; n < 1000; n++) {
        double u = wgml_kit_uniform(99, n);
        assert_true(u >= 0 && u < 1);
    }
}

static void test_reference_cases(void **state) {
    (void)state;
    size_t size;
    unsigned char *m = tu_read_file(tu_shared("kokoro/reference/kokoro-tiny/manifest.json"), &size);
    assert_non_null(m);
    int cases = 0;
    for (const char *p = strstr((char *)m, "\"kit_noise_seed\""); p; p = strstr(p + 1, "\"kit_noise_seed\"")) {
        /* this case's "samples" comes before its seed; its first values after */
        const char *case_start = p;
        while (case_start > (char *)m && strncmp(case_start, "\"samples\"", 9)) case_start--;
        assert_true(case_start > (char *)m);
        unsigned long long seed = strtoull(p + strlen("\"kit_noise_seed\":"), NULL, 10);
        unsigned long long L = strtoull(case_start + strlen("\"samples\":"), NULL, 10);
        assert_true(seed > 0 && L > 0);
        double ini[9], sine[8], src[4];
        assert_int_equal(read_array(p, "\"rand_ini_raw\"", ini, 9), 9);
        assert_int_equal(read_array(p, "\"sine_randn[:8]\"", sine, 8), 8);
        assert_int_equal(read_array(p, "\"source_randn[:4]\"", src, 4), 4);
        for (int i = 0; i < 9; i++) assert_true((float)wgml_kit_uniform(seed, (uint64_t)i) == (float)ini[i]);
        for (int i = 0; i < 8; i++) assert_true(wgml_kit_normal(seed, wgml_kit_sine_noise_at((uint64_t)i)) == (float)sine[i]);
        for (int i = 0; i < 4; i++)
            assert_true(wgml_kit_normal(seed, wgml_kit_source_noise_at(L, (uint64_t)i)) == (float)src[i]);
        cases++;
    }
    assert_int_equal(cases, 9);
    free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_counter_based), cmocka_unit_test(test_reference_cases)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
