/*
 * test_kokoro_voice.c - Kokoro voices (model/kokoro/voice.h): the real
 * voices read from their .bin files give each reference case's style vector
 * (ref_s.npy, taken by the official pipeline) bit for bit by the row rule;
 * blends; and bad files and specs refused by name.
 */
#include "model/kokoro/voice.h"
#include "npy.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static kokoro_voice *load(const char *name) {
    char rel[128];
    snprintf(rel, sizeof rel, "kokoro/voices/%s.bin", name);
    size_t size;
    unsigned char *b = tu_read_file(tu_shared(rel), &size);
    assert_non_null(b);
    kokoro_voice *v = malloc(sizeof *v);
    wgml_error err;
    assert_int_equal(kokoro_voice_from_bin(b, size, rel, v, &err), WGML_OK);
    free(b);
    return v;
}

/* Each case: voice name, phoneme count (code points), and its ref_s. */
static void test_reference_rows(void **state) {
    (void)state;
    static const struct {
        const char *dir, *voice, *phonemes;
    } cases[] = {
        {"hello_af_heart_s1.0", "af_heart", "h\xc9\x99l\xcb\x88o\xca\x8a w\xcb\x88\xc9\x9c\xcb\x90ld."},
        {"hello_am_adam_s1.0", "am_adam", "h\xc9\x99l\xcb\x88o\xca\x8a w\xcb\x88\xc9\x9c\xcb\x90ld."},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        kokoro_voice *v = load(cases[k].voice);
        int n = 0; /* code points */
        for (const unsigned char *p = (const unsigned char *)cases[k].phonemes; *p; p++) n += (*p & 0xc0) != 0x80;
        char rel[160];
        snprintf(rel, sizeof rel, "kokoro/reference/kokoro-tiny/%s/ref_s.npy", cases[k].dir);
        npy_array ref;
        assert_int_equal(npy_read(tu_shared(rel), &ref), 0);
        assert_int_equal(ref.n, KOKORO_VOICE_DIM);
        const float *row = kokoro_voice_row(v, n);
        for (int i = 0; i < KOKORO_VOICE_DIM; i++) assert_true(row[i] == (float)ref.v[i]);
        /* one row off would not match */
        const float *other = kokoro_voice_row(v, n + 1);
        int same = 1;
        for (int i = 0; i < KOKORO_VOICE_DIM; i++) same &= other[i] == (float)ref.v[i];
        assert_false(same);
        npy_free(&ref);
        free(v);
    }
}

static void test_rows_clamped(void **state) {
    (void)state;
    kokoro_voice *v = load("bf_emma");
    assert_ptr_equal(kokoro_voice_row(v, 0), v->rows[0]);
    assert_ptr_equal(kokoro_voice_row(v, 1), v->rows[0]);
    assert_ptr_equal(kokoro_voice_row(v, 510), v->rows[509]);
    assert_ptr_equal(kokoro_voice_row(v, 9999), v->rows[509]);
    free(v);
}

static void test_blend(void **state) {
    (void)state;
    kokoro_blend b;
    wgml_error err;
    assert_int_equal(kokoro_blend_parse("af_heart", &b, &err), WGML_OK);
    assert_int_equal(b.n, 1);
    assert_string_equal(b.name[0], "af_heart");
    assert_true(b.weight[0] == 1.0f);
    assert_int_equal(kokoro_blend_parse("af_heart:0.6,am_adam:0.4", &b, &err), WGML_OK);
    assert_int_equal(b.n, 2);
    assert_string_equal(b.name[1], "am_adam");
    assert_true(fabsf(b.weight[0] - 0.6f) < 1e-7f && fabsf(b.weight[1] - 0.4f) < 1e-7f);
    assert_int_equal(kokoro_blend_parse("a:3,b", &b, &err), WGML_OK); /* 3:1 */
    assert_true(fabsf(b.weight[0] - 0.75f) < 1e-7f);
    const char *bad[] = {"", ":0.5", "a:", "a:-1", "a:0", "a:x", "a,", "a,,b", "a:1e999", "1,2,3,4,5,6,7,8,9"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(kokoro_blend_parse(bad[i], &b, &err), WGML_ERR_INVALID_ARGUMENT);
        assert_true(err.message[0] != 0);
    }
    kokoro_voice *h = load("af_heart"), *a = load("am_adam"), *m = malloc(sizeof *m);
    assert_int_equal(kokoro_blend_parse("af_heart:0.6,am_adam:0.4", &b, &err), WGML_OK);
    const kokoro_voice *vs[2] = {h, a};
    kokoro_voice_mix(&b, vs, m);
    for (int r = 0; r < KOKORO_VOICE_ROWS; r += 97)
        for (int c = 0; c < KOKORO_VOICE_DIM; c++)
            assert_true(fabs(m->rows[r][c] - (0.6 * h->rows[r][c] + 0.4 * a->rows[r][c])) < 1e-6);
    free(h), free(a), free(m);
}

static void test_bad_files(void **state) {
    (void)state;
    kokoro_voice *v = malloc(sizeof *v);
    wgml_error err;
    float *f = calloc(KOKORO_VOICE_ROWS * KOKORO_VOICE_DIM, sizeof *f);
    assert_int_equal(kokoro_voice_from_bin(f, sizeof v->rows - 4, "short.bin", v, &err), WGML_ERR_FORMAT);
    assert_non_null(strstr(err.message, "short.bin"));
    assert_int_equal(kokoro_voice_from_bin(NULL, 0, "none.bin", v, &err), WGML_ERR_FORMAT);
    f[1000] = NAN;
    assert_int_equal(kokoro_voice_from_bin(f, sizeof v->rows, "nan.bin", v, &err), WGML_ERR_FORMAT);
    assert_non_null(strstr(err.message, "row 3"));
    free(f);
    free(v);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_reference_rows), cmocka_unit_test(test_rows_clamped),
                                       cmocka_unit_test(test_blend), cmocka_unit_test(test_bad_files)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
