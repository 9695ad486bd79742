/*
 * test_tokenizer_vision.c - the text tokenizers of the vision family's text
 * towers: CLIP's BPE and SigLIP's unigram vocabularies as `wgml synth`
 * makes them (tools/synth_vocab.h), and Hugging Face tokenizer files read
 * into GGUF metadata (model/hf_tokenizer.h), hostile ones included.
 * (Token ids against an independent reference: tests/reference/test_text_tokenizers.py.)
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, mkdtemp */
#include "core/alloc.h"
#include "format/gguf.h"
#include "model/hf_tokenizer.h"
#include "testutil.h"
#include "text/tokenizer.h"
#include "tools/synth_vocab.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A synthetic vocabulary as a GGUF in memory, and its tokenizer. */
typedef struct vocab {
    gguf_file *f;
    wgml_tokenizer *tok;
} vocab;

static void make(vocab *v, int clip, int n_vocab) {
    wgml_error err;
    gguf_writer *w = gguf_writer_create();
    assert_non_null(w);
    double t0 = now();
    wgml_status st = clip ? synth_vocab_clip(w, n_vocab, &err) : synth_vocab_unigram(w, n_vocab, &err);
    if (st) fail_msg("%s", err.message);
    double t1 = now();
    void *data = NULL;
    size_t size = 0;
    assert_int_equal(gguf_writer_begin_memory(w, &err), WGML_OK);
    assert_int_equal(gguf_writer_finish(w, &err), WGML_OK);
    assert_int_equal(gguf_writer_take_memory(w, &data, &size, &err), WGML_OK);
    gguf_writer_free(w);
    assert_int_equal(gguf_open_memory(data, size, "synth", &v->f, &err), WGML_OK);
    gguf_own_bytes(v->f);
    if (wgml_tokenizer_load(v->f, &v->tok, &err)) fail_msg("%s", err.message);
    printf("%s vocabulary of %d: made in %.0f ms\n", clip ? "CLIP" : "SigLIP", n_vocab, 1e3 * (t1 - t0));
    assert_true(t1 - t0 < 5.0);
}

static void drop(vocab *v) {
    wgml_tokenizer_free(v->tok);
    gguf_close(v->f);
}

/* Encodes text (add_bos), checks every id is in range, returns the count. */
static int encode(const vocab *v, const char *text, int add_bos, int32_t *ids, int cap) {
    wgml_error err;
    int n = wgml_tokenizer_encode(v->tok, text, strlen(text), add_bos, ids, cap, &err);
    if (n < 0) fail_msg("%s", err.message);
    assert_true(n <= cap);
    for (int i = 0; i < n; i++)
        assert_true(ids[i] >= 0 && ids[i] < wgml_tokenizer_n_vocab(v->tok));
    return n;
}

static void expect_decode(const vocab *v, const int32_t *ids, int n, const char *want) {
    char buf[4096];
    int k = wgml_tokenizer_decode(v->tok, ids, n, buf, sizeof buf);
    assert_true(k >= 0 && k < (int)sizeof buf);
    buf[k] = '\0';
    assert_string_equal(buf, want);
}

static void test_clip_synth(void **state) {
    (void)state;
    vocab v;
    make(&v, 1, 49408);
    assert_int_equal(wgml_tokenizer_n_vocab(v.tok), 49408);
    assert_int_equal(wgml_tokenizer_kind(v.tok), WGML_VOCAB_BPE);
    assert_int_equal(wgml_tokenizer_bos(v.tok), 49406);
    assert_int_equal(wgml_tokenizer_eos(v.tok), 49407);
    assert_string_equal(wgml_tokenizer_token_text(v.tok, 49406), "<|startoftext|>");
    assert_string_equal(wgml_tokenizer_token_text(v.tok, 256), "!</w>");

    int32_t ids[512];
    int n = encode(&v, "A Photo of a CAT", 1, ids, 512);
    assert_int_equal(n, 7); /* BOS a photo of a cat EOS: each word a token of the built-in list */
    assert_int_equal(ids[0], 49406);
    assert_int_equal(ids[n - 1], 49407);
    assert_string_equal(wgml_tokenizer_token_text(v.tok, ids[2]), "photo</w>");
    expect_decode(&v, ids, n, "a photo of a cat");
    /* without add_bos: no BOS, no EOS */
    assert_int_equal(encode(&v, "a photo of a cat", 0, ids, 512), 5);
    /* punctuation and contractions are words; decoding spaces every word */
    n = encode(&v, "It's a dog's   toy!!", 0, ids, 512);
    expect_decode(&v, ids, n, "it 's a dog 's toy !!");
    /* made-up and non-Latin words round-trip through their bytes */
    n = encode(&v, "zorblax café 東京 😀", 0, ids, 512);
    expect_decode(&v, ids, n, "zorblax café 東京 😀");
    /* special tokens written in the text; an empty text is BOS EOS */
    n = encode(&v, "<|startoftext|>x<|endoftext|>", 0, ids, 512);
    assert_int_equal(ids[0], 49406);
    assert_int_equal(ids[n - 1], 49407);
    assert_int_equal(encode(&v, "", 1, ids, 512), 2);
    /* invalid UTF-8: ids, no crash */
    n = encode(&v, "ab\xff\xc3(\xed\xa0\x80", 1, ids, 512);
    assert_true(n >= 4);
    drop(&v);
}

static void test_unigram_synth(void **state) {
    (void)state;
    vocab v;
    make(&v, 0, 32000);
    assert_int_equal(wgml_tokenizer_n_vocab(v.tok), 32000);
    assert_int_equal(wgml_tokenizer_kind(v.tok), WGML_VOCAB_UGM);
    assert_int_equal(wgml_tokenizer_bos(v.tok), -1);
    assert_int_equal(wgml_tokenizer_eos(v.tok), 1);
    assert_false(wgml_tokenizer_wants_bos(v.tok));

    int32_t ids[512];
    int n = encode(&v, "  The PHOTO, of the   cat!  ", 1, ids, 512);
    assert_int_equal(n, 6); /* ▁the ▁photo ▁of ▁the ▁cat </s> */
    assert_int_equal(ids[n - 1], 1);
    expect_decode(&v, ids, n, "the photo of the cat"); /* lower case, no punctuation, spaces squeezed */
    assert_int_equal(encode(&v, "the photo", 0, ids, 512), 2);
    /* characters the vocabulary lacks: one unknown per run */
    n = encode(&v, "cat ÆØÅ dog", 0, ids, 512);
    int unknowns = 0;
    for (int i = 0; i < n; i++)
        unknowns += ids[i] == 2;
    assert_int_equal(unknowns, 1);
    /* empty, and only punctuation: just EOS */
    assert_int_equal(encode(&v, "", 1, ids, 512), 1);
    assert_int_equal(encode(&v, "?!.,;", 1, ids, 512), 1);
    assert_int_equal(ids[0], 1);
    n = encode(&v, "\xff\xfe ab\xc3", 1, ids, 512);
    assert_true(n >= 2);
    drop(&v);
}

/* A few thousand characters tokenize in milliseconds. */
static void test_speed(void **state) {
    (void)state;
    static const char *const words[] = {"photo ", "of ", "a ", "zorblax ", "Cat, ", "東京 ", "dogs' ", "123 "};
    char *text = wgml_malloc(20001);
    assert_non_null(text);
    size_t n = 0;
    for (int i = 0; n < 19980; i++) {
        size_t k = strlen(words[i * 7 % 8]);
        memcpy(text + n, words[i * 7 % 8], k);
        n += k;
    }
    text[n] = '\0';
    int32_t *ids = wgml_malloc(20000 * sizeof *ids);
    assert_non_null(ids);
    for (int clip = 1; clip >= 0; clip--) {
        vocab v;
        make(&v, clip, clip ? 49408 : 32000);
        double t0 = now();
        int k = encode(&v, text, 1, ids, 20000);
        double dt = now() - t0;
        printf("%s: %zu bytes -> %d tokens in %.2f ms\n", clip ? "CLIP" : "SigLIP", n, k, 1e3 * dt);
        assert_true(dt < 2.0); /* milliseconds in a release build; generous for sanitizers */
        drop(&v);
    }
    wgml_free(ids);
    wgml_free(text);
}

/* ---- Hugging Face files ---- */

static char dir[256];

static void put(const char *name, const void *data, size_t n) {
    char p[400];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    assert_int_equal(tu_write_file(p, data, n), 0);
}

static void put_str(const char *name, const char *s) { put(name, s, strlen(s)); }

static void clear(void) {
    static const char *const names[] = {"tokenizer.json", "spiece.model", "tokenizer_config.json",
                                        "special_tokens_map.json", "config.json"};
    char p[400];
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        unlink(p);
    }
}

static void setup_dir(void) {
    if (*dir) return;
    snprintf(dir, sizeof dir, "%s", tu_tmp_path("hf-tok-XXXXXX"));
    assert_non_null(mkdtemp(dir));
}

static void expect_error(const char *want) {
    gguf_file *f = NULL;
    wgml_error err;
    wgml_status st = wgml_hf_tokenizer_open(dir, &f, &err);
    if (st == WGML_OK) {
        gguf_close(f);
        fail_msg("expected an error with '%s'", want);
    }
    if (!strstr(err.message, want)) fail_msg("error '%s' does not name '%s'", err.message, want);
}

static wgml_tokenizer *open_ok(gguf_file **f) {
    wgml_error err;
    wgml_tokenizer *tok = NULL;
    if (wgml_hf_tokenizer_open(dir, f, &err)) fail_msg("%s", err.message);
    if (wgml_tokenizer_load(*f, &tok, &err)) fail_msg("%s", err.message);
    return tok;
}

#define CLIP_JSON(vocab, merges, added)                                                                                \
    "{\"added_tokens\": [" added "], \"model\": {\"type\": \"BPE\", \"end_of_word_suffix\": \"</w>\", "                \
    "\"vocab\": {" vocab "}, \"merges\": [" merges "]}}"

static void test_hf_clip_json(void **state) {
    (void)state;
    setup_dir();
    clear();
    put_str("tokenizer.json",
            CLIP_JSON("\"h\": 0, \"i\": 1, \"i</w>\": 2, \"hi</w>\": 3, \"<|startoftext|>\": 4, \"<|endoftext|>\": 5",
                      "[\"h\", \"i</w>\"]",
                      "{\"id\": 4, \"content\": \"<|startoftext|>\", \"special\": true},"
                      "{\"id\": 5, \"content\": \"<|endoftext|>\", \"special\": true}"));
    gguf_file *f;
    wgml_tokenizer *tok = open_ok(&f);
    int32_t ids[8];
    wgml_error err;
    int n = wgml_tokenizer_encode(tok, "HI hi", 5, 1, ids, 8, &err);
    assert_int_equal(n, 4);
    assert_int_equal(ids[0], 4);
    assert_int_equal(ids[1], 3);
    assert_int_equal(ids[2], 3);
    assert_int_equal(ids[3], 5);
    wgml_tokenizer_free(tok);
    gguf_close(f);

    /* hostile: each names the file and the field */
    put_str("tokenizer.json", CLIP_JSON("\"h\": 0, \"i</w>\": 2", "", ""));
    expect_error("no token has id 1");
    put_str("tokenizer.json", CLIP_JSON("\"h\": 0, \"i</w>\": -1", "", ""));
    expect_error("model.vocab");
    put_str("tokenizer.json", CLIP_JSON("\"h\": 0, \"i</w>\": 1", "", "{\"id\": 1, \"content\": \"x\"}"));
    expect_error("id 1 given twice");
    put_str("tokenizer.json", CLIP_JSON("\"h\": 0, \"i</w>\": 1", "\"h\"", ""));
    expect_error("model.merges[0]");
    put_str("tokenizer.json", CLIP_JSON("\"h\": 0, \"i</w>\": 1", "[\"h\", 3]", ""));
    expect_error("model.merges[0]");
    put_str("tokenizer.json", CLIP_JSON("\"h\": 0, \"i</w>\": 99999999", "", ""));
    expect_error("model.vocab");
    put_str("tokenizer.json", "{\"model\": {\"type\": \"BPE\", \"vocab\": {}}}");
    expect_error("byte-level BPE");
    /* SentencePiece's BPE (byte_fallback, no "</w>"): its vocabulary and merges checked as CLIP's */
    put_str("tokenizer.json", "{\"model\": {\"type\": \"BPE\", \"byte_fallback\": true, \"vocab\": []}}");
    expect_error("model.vocab");
    put_str("tokenizer.json",
            "{\"model\": {\"type\": \"BPE\", \"byte_fallback\": true, \"vocab\": {\"a\": 0, \"b\": 1}, \"merges\": 7}}");
    expect_error("model.merges");
    put_str("tokenizer.json", "{\"model\": {\"type\": \"BPE\", \"byte_fallback\": true, \"vocab\": {\"a\": 0, "
                              "\"b\": 2}, \"merges\": []}}");
    expect_error("no token has id 1");
    put_str("tokenizer.json", "{\"model\": {\"type\": \"WordLevel\"}}");
    expect_error("WordLevel");
    put_str("tokenizer.json", "{\"model\": [1, 2");
    expect_error("tokenizer.json");
    put_str("tokenizer.json", "[]");
    expect_error("tokenizer.json");
    clear();
    expect_error("no tokenizer.json or spiece.model");
}

static void test_hf_unigram_json(void **state) {
    (void)state;
    setup_dir();
    clear();
    put_str("tokenizer.json",
            "{\"added_tokens\": [{\"id\": 1, \"content\": \"</s>\", \"special\": true}],"
            " \"model\": {\"type\": \"Unigram\", \"unk_id\": 2, \"vocab\": [[\"<pad>\", 0], [\"</s>\", 0], "
            "[\"<unk>\", 0], [\"\\u2581\", -1.5], [\"\\u2581ab\", -2], [\"a\", -3], [\"b\", -3.5], [\"ab\", -8]]}}");
    put_str("tokenizer_config.json", "{\"tokenizer_class\": \"SiglipTokenizer\", \"pad_token\": \"</s>\"}");
    gguf_file *f;
    wgml_tokenizer *tok = open_ok(&f);
    int32_t ids[8];
    wgml_error err;
    int n = wgml_tokenizer_encode(tok, "AB, ab", 6, 1, ids, 8, &err); /* siglip: "ab ab" */
    assert_int_equal(n, 3);
    assert_int_equal(ids[0], 4); /* ▁ab */
    assert_int_equal(ids[1], 4);
    assert_int_equal(ids[2], 1); /* </s> */
    int64_t pad = -1;
    assert_int_equal(gguf_get_int(f, "tokenizer.ggml.padding_token_id", 0, 100, &pad, &err), 1);
    assert_int_equal(pad, 1);
    wgml_tokenizer_free(tok);
    gguf_close(f);

    put_str("tokenizer.json", "{\"model\": {\"type\": \"Unigram\", \"vocab\": [[\"a\", \"x\"]]}}");
    expect_error("model.vocab[0]");
    put_str("tokenizer.json", "{\"model\": {\"type\": \"Unigram\", \"unk_id\": 5, \"vocab\": [[\"a\", 0]]}}");
    expect_error("unk_id");
    put_str("tokenizer.json", "{\"model\": {\"type\": \"Unigram\", \"vocab\": [[\"a\", 1e400]]}}");
    expect_error("tokenizer.json");
    clear();
}

/* protobuf pieces: field 1 {1: piece, 2: score, 3: type} */
static size_t pb_piece(uint8_t *out, const char *piece, float score, int type) {
    size_t n = strlen(piece), k = 0;
    uint8_t msg[64];
    msg[k++] = 0x0A, msg[k++] = (uint8_t)n;
    memcpy(msg + k, piece, n), k += n;
    msg[k++] = 0x15, memcpy(msg + k, &score, 4), k += 4;
    if (type != 1) msg[k++] = 0x18, msg[k++] = (uint8_t)type;
    out[0] = 0x0A, out[1] = (uint8_t)k;
    memcpy(out + 2, msg, k);
    return k + 2;
}

static void test_hf_spiece(void **state) {
    (void)state;
    setup_dir();
    clear();
    uint8_t buf[512];
    size_t n = 0;
    n += pb_piece(buf + n, "<pad>", 0, 3);
    n += pb_piece(buf + n, "</s>", 0, 3);
    n += pb_piece(buf + n, "<unk>", 0, 2);
    n += pb_piece(buf + n,
                  "\xE2\x96\x81"
                  "cat",
                  -1, 1);
    n += pb_piece(buf + n, "c", -5, 1);
    n += pb_piece(buf + n, "a", -5, 1);
    n += pb_piece(buf + n, "t", -5, 1);
    /* trainer_spec {3: 1 (unigram), 40: 2, 41: -1, 42: 1, 43: 0} */
    static const uint8_t trainer[] = {0x12, 20,   0x18, 1,    0xC0, 0x02, 2,    0xC8, 0x02, 0xFF, 0xFF,
                                      0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01, 0xD0, 0x02, 1};
    memcpy(buf + n, trainer, sizeof trainer);
    size_t good = n + sizeof trainer;
    put("spiece.model", buf, good);
    put_str("tokenizer_config.json", "{\"tokenizer_class\": \"SiglipTokenizer\"}");
    gguf_file *f;
    wgml_tokenizer *tok = open_ok(&f);
    int32_t ids[8];
    wgml_error err;
    int k = wgml_tokenizer_encode(tok, "Cat!", 4, 1, ids, 8, &err);
    assert_int_equal(k, 2);
    assert_int_equal(ids[0], 3);
    assert_int_equal(ids[1], 1);
    assert_int_equal(wgml_tokenizer_bos(tok), -1);
    wgml_tokenizer_free(tok);
    gguf_close(f);

    /* allocation failures in the converter: an error with a message, nothing leaked */
    for (long at = 0, done = 0; at < 100000 && !done; at++) {
        gguf_file *g = NULL;
        long live = wgml_alloc_live();
        wgml_alloc_fail_after(at);
        wgml_status s2 = wgml_hf_tokenizer_open(dir, &g, &err);
        wgml_alloc_fail_after(-1);
        if (s2 == WGML_OK) {
            gguf_close(g);
            done = 1;
        } else {
            assert_true(err.message[0] != '\0');
        }
        assert_int_equal(wgml_alloc_live(), live);
    }
    /* truncations at every byte: an error or a smaller vocabulary, never a crash */
    for (size_t cut = 1; cut < good; cut++) {
        put("spiece.model", buf, cut);
        gguf_file *g = NULL;
        if (wgml_hf_tokenizer_open(dir, &g, &err) == WGML_OK)
            gguf_close(g);
        else
            assert_true(err.message[0] != '\0');
    }
    buf[1] = 200; /* a piece longer than the file */
    put("spiece.model", buf, good);
    expect_error("spiece.model");
    clear();
    rmdir(dir);
}

/* Allocation failure at every allocation: loading and encoding give WGML_ERR_OUT_OF_MEMORY and leak nothing;
 * so do the converter's paths (any error with a message). */
static void test_alloc_failure(void **state) {
    (void)state;
    static const char text[] = "A Photo, of the CAT's \xff toy 123 <|endoftext|> \xe6\x9d\xb1 zzz";
    for (int clip = 1; clip >= 0; clip--) {
        vocab v;
        make(&v, clip, clip ? 700 : 100);
        int32_t ref[256], ids[256];
        int n_ref = encode(&v, text, 1, ref, 256);
        wgml_tokenizer_free(v.tok);
        int done = 0;
        for (long n = 0; n < 100000 && !done; n++) {
            wgml_tokenizer *tok = NULL;
            wgml_error err;
            long live = wgml_alloc_live();
            int cnt = -1;
            wgml_alloc_fail_after(n);
            wgml_status st = wgml_tokenizer_load(v.f, &tok, &err);
            if (st == WGML_OK) cnt = wgml_tokenizer_encode(tok, text, strlen(text), 1, ids, 256, &err);
            wgml_alloc_fail_after(-1);
            if (st != WGML_OK) {
                assert_int_equal(st, WGML_ERR_OUT_OF_MEMORY);
            } else if (cnt < 0) {
                assert_int_equal(err.code, WGML_ERR_OUT_OF_MEMORY);
            } else {
                assert_int_equal(cnt, n_ref);
                assert_memory_equal(ids, ref, (size_t)cnt * sizeof *ids);
                done = 1;
            }
            wgml_tokenizer_free(tok);
            assert_int_equal(wgml_alloc_live(), live);
        }
        assert_true(done);
        gguf_close(v.f);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_clip_synth),    cmocka_unit_test(test_unigram_synth),   cmocka_unit_test(test_speed),
        cmocka_unit_test(test_hf_clip_json),  cmocka_unit_test(test_hf_unigram_json), cmocka_unit_test(test_hf_spiece),
        cmocka_unit_test(test_alloc_failure),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
