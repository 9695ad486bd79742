/*
 * test_kokoro_stream.c - a Kokoro model streamed in (wgml_model_load_stream,
 * as the browser loads it: only the header is parsed from memory, every
 * tensor comes through the read function) speaks with the voices of its
 * file, alone and blended, exactly as the same model loaded from memory.
 * The reader here is as strict as web/worker.js's fetch-body reader: after
 * the header it never goes back, so the voices (read on the host, not
 * weights) must arrive in file order with the weights.
 */
#include "format/gguf.h"
#include "model/kokoro/kokoro.h"
#include "testutil.h"
#include "wgml.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const unsigned char *data;
    uint64_t size;
    uint64_t pos;       /* where the last read past the header ended */
    int backwards;      /* reads that went back (after leaving offset 0) */
    uint64_t prefix;    /* the longest read at 0: the header's prefix (tensors inside it come with it) */
    uint64_t off[4096]; /* the reads past the header */
    size_t len[4096];
    int n;
} forward_reader;

static int64_t forward_read(void *user, uint64_t offset, void *buf, size_t len) {
    forward_reader *r = user;
    if (offset + len > r->size) return -1;
    if (offset == 0) { /* the header is read again from 0 as its prefix grows; then only forward */
        if (len > r->prefix) r->prefix = len;
    } else {
        if (offset < r->pos) r->backwards++;
        r->pos = offset + len;
        if (r->n < 4096) {
            r->off[r->n] = offset;
            r->len[r->n++] = len;
        }
    }
    memcpy(buf, r->data + offset, len);
    return (int64_t)len;
}

/* The bytes of [a, a + n) that reads past the header covered (each read counted). */
static uint64_t covered(const forward_reader *r, uint64_t a, uint64_t n) {
    uint64_t c = 0;
    for (int i = 0; i < r->n; i++) {
        uint64_t lo = r->off[i] > a ? r->off[i] : a, hi = r->off[i] + r->len[i] < a + n ? r->off[i] + r->len[i] : a + n;
        c += hi > lo ? hi - lo : 0;
    }
    return c;
}

typedef struct {
    float *audio;
    int64_t n;
    int chunks;
} speech;

static int collect(void *user, const wgml_audio_chunk *c) {
    speech *s = user;
    s->audio = realloc(s->audio, (size_t)(s->n + c->n_samples) * sizeof *s->audio);
    memcpy(s->audio + s->n, c->samples, (size_t)c->n_samples * sizeof *s->audio);
    s->n += c->n_samples;
    s->chunks++;
    return 0;
}

static speech say(wgml_model *m, const char *voice) {
    wgml_speak_params sp = wgml_speak_default_params();
    sp.phonemes = 1;
    sp.seed = 11;
    speech s = {0};
    wgml_error err;
    /* "həlˈoʊ wˈɜːld. hˌaʊ ɑːɹ juː?": two sentences, two chunks */
    if (wgml_speak(m,
                   "h\xc9\x99l\xcb\x88o\xca\x8a w\xcb\x88\xc9\x9c\xcb\x90ld. h\xcb\x8c\x61\xca\x8a "
                   "\xc9\x91\xcb\x90\xc9\xb9 ju\xcb\x90?",
                   voice, &sp, collect, &s, NULL, &err))
        fail_msg("speak (%s): %s", voice, err.message);
    return s;
}

static void test_stream_voices(void **state) {
    (void)state;
    if (!tu_shared_present()) skip();
    wgml_error err;
    char v[3][4096], pth[4096];
    snprintf(v[0], sizeof v[0], "%s", tu_shared("kokoro/voices/af_heart.bin"));
    snprintf(v[1], sizeof v[1], "%s", tu_shared("kokoro/voices/am_adam.bin"));
    snprintf(v[2], sizeof v[2], "%s", tu_shared("kokoro/voices/bf_emma.bin"));
    snprintf(pth, sizeof pth, "%s", tu_shared("kokoro/kokoro-tiny.pth"));
    const char *voices[3] = {v[0], v[1], v[2]};
    size_t cfg_len;
    char *json = (char *)tu_read_file(tu_shared("kokoro/config-kokoro-tiny.json"), &cfg_len);
    assert_non_null(json);
    kokoro_config cfg;
    if (kokoro_config_parse(json, cfg_len, &cfg, &err)) fail_msg("config: %s", err.message);
    free(json);
    kokoro_convert_options opt = {.config = &cfg, .type = WGML_F32, .voices = voices, .n_voices = 3};
    void *mem;
    size_t size;
    if (kokoro_convert(pth, &opt, NULL, &mem, &size, &err)) fail_msg("convert: %s", err.message);

    wgml_model_params mp = wgml_model_default_params();
    mp.backend = WGML_BACKEND_CPU;
    mp.n_threads = 1;
    wgml_model *file_m, *stream_m;
    if (wgml_model_load_memory(mem, size, &mp, &file_m, &err)) fail_msg("load: %s", err.message);
    forward_reader *r = calloc(1, sizeof *r);
    *r = (forward_reader){.data = mem, .size = size};
    if (wgml_model_load_stream(forward_read, r, size, &mp, &stream_m, &err)) fail_msg("stream: %s", err.message);
    assert_int_equal(r->backwards, 0);
    /* every tensor read once (the voices too), unless the header's prefix held it */
    gguf_file *g;
    if (gguf_open_memory(mem, size, "k.gguf", &g, &err)) fail_msg("gguf: %s", err.message);
    int n_voices = 0;
    for (int64_t i = 0; i < gguf_n_tensors(g); i++) {
        const gguf_tensor *t = gguf_tensor_at(g, i);
        const uint64_t at = gguf_data_offset(g) + t->offset, got = covered(r, at, t->size);
        if (at + t->size > r->prefix && got != t->size)
            fail_msg("tensor %s: %llu of its %zu bytes were read", t->name, (unsigned long long)got, t->size);
        n_voices += !strncmp(t->name, "voice.", 6) && got == t->size;
    }
    assert_int_equal(n_voices, 3);
    gguf_close(g);
    wgml_model_info info;
    wgml_model_get_info(stream_m, &info);
    assert_int_equal(info.n_voices, 3);
    assert_string_equal(wgml_speech_voice(stream_m, 2), "bf_emma");

    static const char *const specs[] = {"af_heart", "bf_emma", "af_heart:0.6,am_adam:0.4"};
    for (size_t k = 0; k < sizeof specs / sizeof specs[0]; k++) {
        speech a = say(file_m, specs[k]), b = say(stream_m, specs[k]);
        assert_int_equal(a.chunks, 2);
        assert_int_equal(b.chunks, 2);
        assert_int_equal(a.n, b.n);
        assert_true(a.n > 0);
        assert_memory_equal(a.audio, b.audio, (size_t)a.n * sizeof *a.audio);
        free(a.audio);
        free(b.audio);
    }
    /* different voices are different sounds (the comparison above can fail) */
    speech a = say(stream_m, "af_heart"), b = say(stream_m, "am_adam");
    int same = a.n == b.n && !memcmp(a.audio, b.audio, (size_t)a.n * sizeof *a.audio);
    assert_false(same);
    free(a.audio);
    free(b.audio);
    /* a voice the file does not have is still named as such */
    wgml_speak_params sp = wgml_speak_default_params();
    sp.phonemes = 1;
    assert_int_equal(wgml_speak(stream_m, "h\xcb\x88\x61\xc9\xaa", "nobody", &sp, NULL, NULL, NULL, &err),
                     WGML_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "af_heart, am_adam, bf_emma"));

    /* a stream that fails inside the voices: an I/O error naming the voice's tensor */
    wgml_model *bad = NULL;
    *r = (forward_reader){.data = mem, .size = size - 1000}; /* the last voice ends the file */
    assert_int_equal(wgml_model_load_stream(forward_read, r, size, &mp, &bad, &err), WGML_ERR_IO);
    assert_null(bad);
    assert_non_null(strstr(err.message, "voice."));

    free(r);
    wgml_model_free(stream_m);
    wgml_model_free(file_m);
    free(mem);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_stream_voices)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
