/*
 * test_tokenizer.c - the tokenizers against reference token ids and the
 * tokenizer API's contract.
 *
 * Reference vectors: ../shared/vocab/ggml-vocab-*.gguf with .inp (strings
 * separated by "\n__ggml_vocab_test__\n") and .out (the expected ids, one
 * line per string, no BOS); every string of every vocabulary must match
 * exactly. Also: the stories260K prompt, round trips, byte fallback, pieces
 * that split a UTF-8 character, invalid UTF-8, special tokens, the regex
 * pre-tokenizers against splits computed with Python's `regex` module, bad
 * files, allocation failure at every allocation, and 1 MB of text.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include "core/alloc.h"
#include "format/gguf.h"
#include "testutil.h"
#include "text/tokenizer.h"
#include "text/tokenizer_impl.h"
#include "text/unicode.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- helpers ---- */

typedef struct vocab {
    gguf_file *f;
    wgml_tokenizer *tok;
} vocab;

static vocab open_vocab(const char *rel) {
    vocab v = {0};
    wgml_error err;
    if (gguf_open(tu_shared(rel), &v.f, &err) != WGML_OK) fail_msg("%s", err.message);
    if (wgml_tokenizer_load(v.f, &v.tok, &err) != WGML_OK) fail_msg("%s: %s", rel, err.message);
    return v;
}

static void close_vocab(vocab *v) {
    wgml_tokenizer_free(v->tok);
    gguf_close(v->f);
}

/* Encodes into a malloc'ed array (checks the count-then-fill contract on the way). */
static int32_t *encode(const wgml_tokenizer *tok, const char *s, size_t len, int add_bos, int *n) {
    wgml_error err;
    int total = wgml_tokenizer_encode(tok, s, len, add_bos, NULL, 0, &err);
    if (total < 0) fail_msg("encode: %s", err.message);
    int32_t *ids = malloc(((size_t)total + 1) * sizeof *ids);
    assert_non_null(ids);
    assert_int_equal(wgml_tokenizer_encode(tok, s, len, add_bos, ids, total, &err), total);
    *n = total;
    return ids;
}

static char *decode(const wgml_tokenizer *tok, const int32_t *ids, int n, int *len) {
    int total = wgml_tokenizer_decode(tok, ids, n, NULL, 0);
    assert_true(total >= 0);
    char *buf = malloc((size_t)total + 1);
    assert_non_null(buf);
    assert_int_equal(wgml_tokenizer_decode(tok, ids, n, buf, total), total);
    buf[total] = '\0';
    *len = total;
    return buf;
}

static void expect_ids(const wgml_tokenizer *tok, const char *s, int add_bos, const int32_t *want, int n_want) {
    int n;
    int32_t *ids = encode(tok, s, strlen(s), add_bos, &n);
    if (n != n_want || memcmp(ids, want, (size_t)n * sizeof *ids) != 0) {
        fprintf(stderr, "encoding [%s]: got", s);
        for (int i = 0; i < n; i++)
            fprintf(stderr, " %d", ids[i]);
        fprintf(stderr, "\n");
        free(ids);
        fail_msg("wrong tokens for [%s]", s);
    }
    free(ids);
}

/* ---- reference vectors ---- */

enum { ROUND_TRIP = 1 };

static void check_vectors(const char *name, int flags) {
    char rel[256];
    snprintf(rel, sizeof rel, "vocab/ggml-vocab-%s.gguf", name);
    vocab v = open_vocab(rel);
    size_t n_inp, n_out;
    char inp_path[300], out_path[300];
    snprintf(inp_path, sizeof inp_path, "%s.inp", tu_shared(rel));
    snprintf(out_path, sizeof out_path, "%s.out", tu_shared(rel));
    char *inp = (char *)tu_read_file(inp_path, &n_inp);
    char *out = (char *)tu_read_file(out_path, &n_out);
    assert_non_null(inp);
    assert_non_null(out);

    static const char SEP[] = "\n__ggml_vocab_test__\n";
    const size_t sep_len = sizeof SEP - 1;
    char *s = inp, *line = out;
    int total = 0, passed = 0, round_trips = 0;
    for (char *e; (e = strstr(s, SEP)) != NULL; s = e + sep_len) {
        char *eol = strchr(line, '\n');
        assert_non_null(eol);
        *eol = '\0';
        int n;
        int32_t *ids = encode(v.tok, s, (size_t)(e - s), 0, &n);
        int ok = 1, k = 0;
        for (char *p = line, *q;; p = q) {
            long want = strtol(p, &q, 10);
            if (q == p) break;
            if (k >= n || ids[k] != want) ok = 0;
            k++;
        }
        ok = ok && k == n;
        total++;
        passed += ok;
        if (!ok) {
            fprintf(stderr, "%s #%d [%.*s]\n  want:%s\n  got: ", name, total, (int)(e - s), s, line);
            for (int i = 0; i < n; i++)
                fprintf(stderr, " %d", ids[i]);
            fprintf(stderr, "\n");
        }
        if (flags & ROUND_TRIP) {
            int len;
            char *text = decode(v.tok, ids, n, &len);
            if ((size_t)len == (size_t)(e - s) && memcmp(text, s, (size_t)len) == 0)
                round_trips++;
            else
                fprintf(stderr, "%s #%d: decode gives [%s] for [%.*s]\n", name, total, text, (int)(e - s), s);
            free(text);
        }
        free(ids);
        line = eol + 1;
    }
    printf("%s: %d/%d vectors pass", name, passed, total);
    if (flags & ROUND_TRIP) printf(", %d/%d round trips", round_trips, total);
    printf("\n");
    assert_true(total > 0);
    assert_int_equal(passed, total);
    if (flags & ROUND_TRIP) assert_int_equal(round_trips, total);
    assert_true(*line == '\0'); /* as many lines of ids as strings */
    free(inp);
    free(out);
    close_vocab(&v);
}

/* SentencePiece round trips hold because decoding drops the dummy-prefix space. */
static void test_vectors_llama_spm(void **state) { check_vectors("llama-spm", ROUND_TRIP); }
static void test_vectors_phi3(void **state) { check_vectors("phi-3", ROUND_TRIP); }
static void test_vectors_gpt2(void **state) { check_vectors("gpt-2", ROUND_TRIP); }
static void test_vectors_bert_bge(void **state) { check_vectors("bert-bge", 0); }

/* ---- properties of loaded vocabularies ---- */

static void test_stories_prompt(void **state) {
    vocab v = open_vocab("models/stories260K.gguf");
    assert_int_equal(wgml_tokenizer_kind(v.tok), WGML_VOCAB_SPM);
    assert_int_equal(wgml_tokenizer_n_vocab(v.tok), 512);
    assert_int_equal(wgml_tokenizer_bos(v.tok), 1);
    assert_int_equal(wgml_tokenizer_eos(v.tok), 2);
    assert_true(wgml_tokenizer_wants_bos(v.tok));
    assert_true(wgml_tokenizer_is_eog(v.tok, 2));
    assert_false(wgml_tokenizer_is_eog(v.tok, 1));
    const int32_t want[] = {1, 403, 407, 261, 378};
    expect_ids(v.tok, "Once upon a time", 1, want, 5);
    expect_ids(v.tok, "Once upon a time", 0, want + 1, 4);
    int len;
    char *text = decode(v.tok, want, 5, &len);
    assert_string_equal(text, "Once upon a time");
    free(text);
    /* the output buffer is never overrun; the count is the full count */
    int32_t two[2] = {-7, -7};
    wgml_error err;
    assert_int_equal(wgml_tokenizer_encode(v.tok, "Once upon a time", 16, 1, two, 1, &err), 5);
    assert_int_equal(two[0], 1);
    assert_int_equal(two[1], -7);
    /* empty text: nothing, or just BOS */
    assert_int_equal(wgml_tokenizer_encode(v.tok, "", 0, 0, NULL, 0, &err), 0);
    assert_int_equal(wgml_tokenizer_encode(v.tok, NULL, 0, 1, two, 2, &err), 1);
    close_vocab(&v);
}

static void test_meta(void **state) {
    vocab g = open_vocab("vocab/ggml-vocab-gpt-2.gguf");
    assert_int_equal(wgml_tokenizer_kind(g.tok), WGML_VOCAB_BPE);
    assert_int_equal(wgml_tokenizer_n_vocab(g.tok), 50257);
    assert_false(wgml_tokenizer_wants_bos(g.tok));
    assert_true(wgml_tokenizer_is_eog(g.tok, 50256));
    assert_false(wgml_tokenizer_is_eog(g.tok, 50255));
    assert_false(wgml_tokenizer_is_eog(g.tok, 50257));
    assert_false(wgml_tokenizer_is_eog(g.tok, -1));
    close_vocab(&g);
    vocab p = open_vocab("vocab/ggml-vocab-phi-3.gguf");
    assert_true(wgml_tokenizer_wants_bos(p.tok));
    assert_true(wgml_tokenizer_is_eog(p.tok, 32000));  /* <|endoftext|> */
    assert_true(wgml_tokenizer_is_eog(p.tok, 32007));  /* <|end|> */
    assert_false(wgml_tokenizer_is_eog(p.tok, 32010)); /* <|user|> */
    assert_string_equal(wgml_tokenizer_token_text(p.tok, 32010), "<|user|>");
    assert_null(wgml_tokenizer_token_text(p.tok, 32064));
    assert_null(wgml_tokenizer_token_text(p.tok, -1));
    close_vocab(&p);
    vocab b = open_vocab("vocab/ggml-vocab-bert-bge.gguf");
    assert_int_equal(wgml_tokenizer_kind(b.tok), WGML_VOCAB_WPM);
    assert_int_equal(wgml_tokenizer_bos(b.tok), 101);
    assert_true(wgml_tokenizer_wants_bos(b.tok));
    close_vocab(&b);
}

/* ---- pieces ---- */

static int piece(const wgml_tokenizer *tok, int32_t id, char *buf, int cap) {
    int n = wgml_tokenizer_piece(tok, id, buf, cap);
    if (n >= 0 && n < cap) buf[n] = '\0';
    return n;
}

static void test_pieces(void **state) {
    vocab v = open_vocab("vocab/ggml-vocab-llama-spm.gguf");
    char buf[64];
    assert_int_equal(piece(v.tok, 15043, buf, sizeof buf), 6);
    assert_string_equal(buf, " Hello");
    assert_string_equal(wgml_tokenizer_token_text(v.tok, 15043), "\xe2\x96\x81Hello");
    assert_int_equal(piece(v.tok, 1, buf, sizeof buf), 0);  /* <s>: control, renders as nothing */
    assert_int_equal(piece(v.tok, 13, buf, sizeof buf), 1); /* <0x0A> */
    assert_string_equal(buf, "\n");
    assert_int_equal(wgml_tokenizer_piece(v.tok, -1, buf, sizeof buf), -1);
    assert_int_equal(wgml_tokenizer_piece(v.tok, 32000, buf, sizeof buf), -1);
    /* a short buffer: full length returned, only cap bytes written */
    memset(buf, '#', sizeof buf);
    assert_int_equal(wgml_tokenizer_piece(v.tok, 15043, buf, 3), 6);
    assert_memory_equal(buf, " He#", 4);
    assert_int_equal(wgml_tokenizer_piece(v.tok, 15043, NULL, 0), 6);
    int32_t bad[] = {15043, 99999};
    assert_int_equal(wgml_tokenizer_decode(v.tok, bad, 2, buf, sizeof buf), -1);
    close_vocab(&v);

    vocab g = open_vocab("vocab/ggml-vocab-gpt-2.gguf");
    assert_int_equal(piece(g.tok, 220, buf, sizeof buf), 1); /* "Ġ" is a space */
    assert_string_equal(buf, " ");
    assert_int_equal(piece(g.tok, 50256, buf, sizeof buf), 0); /* <|endoftext|> */
    close_vocab(&g);

    /* WordPiece: "▁word" renders " word", a continuation renders bare; decoding drops the first space */
    vocab b = open_vocab("vocab/ggml-vocab-bert-bge.gguf");
    const int32_t fuhrer[] = {11865, 17875};
    expect_ids(b.tok, "F\xc3\xbchrer", 0, fuhrer, 2);
    const int32_t with_cls[] = {101, 11865, 17875, 102};
    expect_ids(b.tok, "F\xc3\xbchrer", 1, with_cls, 4);
    assert_int_equal(piece(b.tok, 11865, buf, sizeof buf), 3);
    assert_string_equal(buf, " fu");
    assert_int_equal(piece(b.tok, 17875, buf, sizeof buf), 4);
    assert_string_equal(buf, "hrer");
    int len;
    char *text = decode(b.tok, with_cls, 4, &len);
    assert_string_equal(text, "fuhrer");
    free(text);
    int n;
    int32_t *ids = encode(b.tok, "Hello, World!", 13, 0, &n);
    text = decode(b.tok, ids, n, &len);
    assert_string_equal(text, "hello , world !");
    free(text);
    free(ids);
    close_vocab(&b);
}

/* Byte fallback: characters the SentencePiece vocabulary lacks become <0xXX> tokens. */
static void test_byte_fallback(void **state) {
    vocab v = open_vocab("vocab/ggml-vocab-llama-spm.gguf");
    const int32_t llama[] = {29871, 243, 162, 169, 156}; /* "▁", then the 4 bytes of U+1F999 */
    expect_ids(v.tok, "\xf0\x9f\xa6\x99", 0, llama, 5);
    char buf[8];
    for (int i = 1; i < 5; i++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", (unsigned)"\xf0\x9f\xa6\x99"[i - 1] & 0xFF);
        assert_string_equal(wgml_tokenizer_token_text(v.tok, llama[i]), name);
        assert_int_equal(wgml_tokenizer_piece(v.tok, llama[i], buf, sizeof buf), 1);
        assert_int_equal((unsigned char)buf[0], (unsigned char)"\xf0\x9f\xa6\x99"[i - 1]);
    }
    close_vocab(&v);
}

static int valid_utf8(const char *s, int n) {
    for (int i = 0; i < n;) {
        int len;
        if (UNI_IS_BYTE(uni_decode(s + i, (size_t)(n - i), &len))) return 0;
        i += len;
    }
    return 1;
}

/* A character split over several tokens: each piece alone is not valid
 * UTF-8, the pieces together are the character's bytes. */
static void test_utf8_split_pieces(void **state) {
    const char *vocabs[] = {"vocab/ggml-vocab-gpt-2.gguf", "vocab/ggml-vocab-llama-spm.gguf"};
    const char *text = "\xf0\x9f\xa6\x99\xe2\x9c\x85 \xe1\x9e\x80\xe1\x9e\xb6";
    for (int k = 0; k < 2; k++) {
        vocab v = open_vocab(vocabs[k]);
        int n;
        int32_t *ids = encode(v.tok, text, strlen(text), 0, &n);
        char joined[256];
        int len = 0, partial = 0;
        for (int i = 0; i < n; i++) {
            char buf[64];
            int m = wgml_tokenizer_piece(v.tok, ids[i], buf, sizeof buf);
            assert_true(m >= 0 && m < 64);
            partial += !valid_utf8(buf, m);
            memcpy(joined + len, buf, (size_t)m);
            len += m;
        }
        joined[len] = '\0';
        assert_true(partial > 0);
        /* SentencePiece's pieces carry the dummy-prefix space */
        assert_string_equal(joined + (k == 1 ? 1 : 0), text);
        free(ids);
        close_vocab(&v);
    }
}

/* Invalid UTF-8: never a failure; SentencePiece and BPE keep every byte
 * (byte tokens), WordPiece drops invalid bytes like control characters. */
static void test_invalid_utf8(void **state) {
    static const char *const inputs[] = {
        "abc\200def\377",           /* stray continuation byte, 0xFF */
        "\xe2\x82",                 /* truncated at the end */
        "x\xf0\x9f\xa6y z",         /* truncated in the middle */
        "\xc0\xaf\xed\xa0\x80 ok",  /* overlong '/', a surrogate */
        "\xf4\x90\x80\x80\xfe\xfe", /* beyond U+10FFFF */
        "\x80",
    };
    const char *vocabs[] = {"vocab/ggml-vocab-llama-spm.gguf", "vocab/ggml-vocab-gpt-2.gguf",
                            "vocab/ggml-vocab-phi-3.gguf", "vocab/ggml-vocab-bert-bge.gguf"};
    for (int k = 0; k < 4; k++) {
        vocab v = open_vocab(vocabs[k]);
        for (size_t i = 0; i < sizeof inputs / sizeof inputs[0]; i++) {
            const char *s = inputs[i];
            int n, len;
            int32_t *ids = encode(v.tok, s, strlen(s), 1, &n);
            char *text = decode(v.tok, ids, n, &len);
            if (k < 3) {
                assert_int_equal(len, (int)strlen(s));
                assert_memory_equal(text, s, strlen(s));
            } else {
                /* the same ids as the text without its invalid bytes */
                char clean[64];
                size_t c = 0;
                for (size_t j = 0; s[j];) {
                    int l;
                    uint32_t cp = uni_decode(s + j, strlen(s + j), &l);
                    if (!UNI_IS_BYTE(cp)) memcpy(clean + c, s + j, (size_t)l), c += (size_t)l;
                    j += (size_t)l;
                }
                clean[c] = '\0';
                int m;
                int32_t *want = encode(v.tok, clean, c, 1, &m);
                assert_int_equal(m, n);
                assert_memory_equal(want, ids, (size_t)n * sizeof *ids);
                free(want);
            }
            free(text);
            free(ids);
        }
        close_vocab(&v);
    }
    /* SentencePiece: an invalid byte is its byte token */
    vocab v = open_vocab("vocab/ggml-vocab-llama-spm.gguf");
    const int32_t want[] = {29871, 0x80 + 3};
    expect_ids(v.tok, "\x80", 0, want, 2);
    close_vocab(&v);
}

static void test_special_tokens(void **state) {
    vocab p = open_vocab("vocab/ggml-vocab-phi-3.gguf");
    /* Phi-3's special tokens swallow the newline after them; text after a special token gets the dummy prefix */
    const int32_t chat[] = {1, 32010, 15043, 32007, 32001};
    expect_ids(p.tok, "<|user|>\nHello<|end|>\n<|assistant|>", 1, chat, 5);
    int len;
    char *text = decode(p.tok, chat, 5, &len);
    assert_string_equal(text, "Hello");
    free(text);
    close_vocab(&p);

    vocab l = open_vocab("vocab/ggml-vocab-llama-spm.gguf");
    const int32_t llama[] = {1, 15043, 2, 29871, 13};
    expect_ids(l.tok, "<s>Hello</s>\n", 0, llama, 5);
    close_vocab(&l);

    vocab g = open_vocab("vocab/ggml-vocab-gpt-2.gguf");
    const int32_t gpt[] = {15496, 50256, 15496, 50256};
    expect_ids(g.tok, "Hello<|endoftext|>Hello<|endoftext|>", 0, gpt, 4);
    const int32_t near[] = {27, 91, 437, 1659, 5239, 91}; /* not quite the special token: ordinary text */
    expect_ids(g.tok, "<|endoftext|", 0, near, 6);
    close_vocab(&g);

    vocab b = open_vocab("vocab/ggml-vocab-bert-bge.gguf");
    const int32_t bert[] = {101, 7592, 102, 2088, 102};
    expect_ids(b.tok, "hello[SEP]world", 1, bert, 5);
    close_vocab(&b);
}

/* ---- pre-tokenizers: expected splits computed with Python's `regex` module ---- */

static const struct {
    pretok_kind kind;
    const char *text;
    const char *pieces; /* separated by \x1f */
} SPLITS[] = {
    // clang-format off
    {PRETOK_DEFAULT, "Hello, y'all! How're you \xf0\x9f\x98\x81 ?\xe6\x88\x91\xe6\x83\xb3\xe5\x9c\xa8" "apple\xe5\xb7\xa5\xe4\xbd\x9c" "1314151\xe5\xa4\xa9\xef\xbd\x9e", "Hello\x1f,\x1f y\x1f'\x1f" "all\x1f!\x1f How\x1f'\x1fre\x1f you\x1f \xf0\x9f\x98\x81\x1f \x1f?\x1f\xe6\x88\x91\xe6\x83\xb3\xe5\x9c\xa8" "apple\xe5\xb7\xa5\xe4\xbd\x9c\x1f" "131\x1f" "415\x1f" "1\x1f\xe5\xa4\xa9\x1f\xef\xbd\x9e"},
    {PRETOK_DEFAULT, "  3..3 ---=== \x09\x0a\x0a  x  ", " \x1f \x1f" "3\x1f..\x1f" "3\x1f \x1f---===\x1f \x09\x0a\x0a \x1f x\x1f  "},
    {PRETOK_DEFAULT, "I'VE 'Ll don't ''s 123456789 $+<=>^`|~", "I\x1f'\x1fVE\x1f \x1f'\x1fLl\x1f don\x1f'\x1ft\x1f \x1f''\x1fs\x1f \x1f" "123\x1f" "456\x1f" "789\x1f \x1f$+<=>^\x1f`\x1f|~"},
    {PRETOK_DEFAULT, "\xce\x91\xce\x92\xce\x93 abc \xce\xa9mega \xef\xbc\xa1\xef\xbc\xa2\xef\xbc\xa3\xef\xbc\x91\xef\xbc\x92\xef\xbc\x93\xef\xbc\x81 \xed\x95\x9c\xea\xb5\xad\xec\x96\xb4 \xd9\xa3\xd9\xa4", "\xce\x91\xce\x92\xce\x93\x1f abc\x1f \xce\xa9mega\x1f \xef\xbc\xa1\xef\xbc\xa2\xef\xbc\xa3\x1f\xef\xbc\x91\xef\xbc\x92\xef\xbc\x93\x1f\xef\xbc\x81\x1f \xed\x95\x9c\xea\xb5\xad\xec\x96\xb4\x1f \x1f\xd9\xa3\xd9\xa4"},
    {PRETOK_DEFAULT, "a\x0d\x0a\x0d\x0a  b\xe3\x80\x80" "c   ", "a\x1f\x0d\x0a\x0d\x0a \x1f b\x1f\xe3\x80\x80\x1f" "c\x1f   "},
    {PRETOK_GPT2, "Hello, y'all! How're you \xf0\x9f\x98\x81 ?\xe6\x88\x91\xe6\x83\xb3\xe5\x9c\xa8" "apple\xe5\xb7\xa5\xe4\xbd\x9c" "1314151\xe5\xa4\xa9\xef\xbd\x9e", "Hello\x1f,\x1f y\x1f'\x1f" "all\x1f!\x1f How\x1f're\x1f you\x1f \xf0\x9f\x98\x81\x1f ?\x1f\xe6\x88\x91\xe6\x83\xb3\xe5\x9c\xa8" "apple\xe5\xb7\xa5\xe4\xbd\x9c\x1f" "1314151\x1f\xe5\xa4\xa9\x1f\xef\xbd\x9e"},
    {PRETOK_GPT2, "  3..3 ---=== \x09\x0a\x0a  x  ", " \x1f 3\x1f..\x1f" "3\x1f ---===\x1f \x09\x0a\x0a \x1f x\x1f  "},
    {PRETOK_GPT2, "I'VE 'Ll don't ''s 123456789 $+<=>^`|~", "I\x1f'\x1fVE\x1f '\x1fLl\x1f don\x1f't\x1f ''\x1fs\x1f 123456789\x1f $+<=>^`|~"},
    {PRETOK_GPT2, "\xce\x91\xce\x92\xce\x93 abc \xce\xa9mega \xef\xbc\xa1\xef\xbc\xa2\xef\xbc\xa3\xef\xbc\x91\xef\xbc\x92\xef\xbc\x93\xef\xbc\x81 \xed\x95\x9c\xea\xb5\xad\xec\x96\xb4 \xd9\xa3\xd9\xa4", "\xce\x91\xce\x92\xce\x93\x1f abc\x1f \xce\xa9mega\x1f \xef\xbc\xa1\xef\xbc\xa2\xef\xbc\xa3\x1f\xef\xbc\x91\xef\xbc\x92\xef\xbc\x93\x1f\xef\xbc\x81\x1f \xed\x95\x9c\xea\xb5\xad\xec\x96\xb4\x1f \xd9\xa3\xd9\xa4"},
    {PRETOK_GPT2, "a\x0d\x0a\x0d\x0a  b\xe3\x80\x80" "c   ", "a\x1f\x0d\x0a\x0d\x0a \x1f b\x1f\xe3\x80\x80\x1f" "c\x1f   "},
    {PRETOK_LLAMA3, "Hello, y'all! How're you \xf0\x9f\x98\x81 ?\xe6\x88\x91\xe6\x83\xb3\xe5\x9c\xa8" "apple\xe5\xb7\xa5\xe4\xbd\x9c" "1314151\xe5\xa4\xa9\xef\xbd\x9e", "Hello\x1f,\x1f y\x1f'all\x1f!\x1f How\x1f're\x1f you\x1f \xf0\x9f\x98\x81\x1f ?\x1f\xe6\x88\x91\xe6\x83\xb3\xe5\x9c\xa8" "apple\xe5\xb7\xa5\xe4\xbd\x9c\x1f" "131\x1f" "415\x1f" "1\x1f\xe5\xa4\xa9\x1f\xef\xbd\x9e"},
    {PRETOK_LLAMA3, "  3..3 ---=== \x09\x0a\x0a  x  ", " \x1f \x1f" "3\x1f..\x1f" "3\x1f ---===\x1f \x09\x0a\x0a\x1f \x1f x\x1f  "},
    {PRETOK_LLAMA3, "I'VE 'Ll don't ''s 123456789 $+<=>^`|~", "I\x1f'VE\x1f '\x1fLl\x1f don\x1f't\x1f ''\x1fs\x1f \x1f" "123\x1f" "456\x1f" "789\x1f $+<=>^`|~"},
    {PRETOK_LLAMA3, "\xce\x91\xce\x92\xce\x93 abc \xce\xa9mega \xef\xbc\xa1\xef\xbc\xa2\xef\xbc\xa3\xef\xbc\x91\xef\xbc\x92\xef\xbc\x93\xef\xbc\x81 \xed\x95\x9c\xea\xb5\xad\xec\x96\xb4 \xd9\xa3\xd9\xa4", "\xce\x91\xce\x92\xce\x93\x1f abc\x1f \xce\xa9mega\x1f \xef\xbc\xa1\xef\xbc\xa2\xef\xbc\xa3\x1f\xef\xbc\x91\xef\xbc\x92\xef\xbc\x93\x1f\xef\xbc\x81\x1f \xed\x95\x9c\xea\xb5\xad\xec\x96\xb4\x1f \x1f\xd9\xa3\xd9\xa4"},
    {PRETOK_LLAMA3, "a\x0d\x0a\x0d\x0a  b\xe3\x80\x80" "c   ", "a\x1f\x0d\x0a\x0d\x0a\x1f \x1f b\x1f\xe3\x80\x80" "c\x1f   "},
    {PRETOK_QWEN2, "Hello, y'all! How're you \xf0\x9f\x98\x81 ?\xe6\x88\x91\xe6\x83\xb3\xe5\x9c\xa8" "apple\xe5\xb7\xa5\xe4\xbd\x9c" "1314151\xe5\xa4\xa9\xef\xbd\x9e", "Hello\x1f,\x1f y\x1f'all\x1f!\x1f How\x1f're\x1f you\x1f \xf0\x9f\x98\x81\x1f ?\x1f\xe6\x88\x91\xe6\x83\xb3\xe5\x9c\xa8" "apple\xe5\xb7\xa5\xe4\xbd\x9c\x1f" "1\x1f" "3\x1f" "1\x1f" "4\x1f" "1\x1f" "5\x1f" "1\x1f\xe5\xa4\xa9\x1f\xef\xbd\x9e"},
    {PRETOK_QWEN2, "  3..3 ---=== \x09\x0a\x0a  x  ", " \x1f \x1f" "3\x1f..\x1f" "3\x1f ---===\x1f \x09\x0a\x0a\x1f \x1f x\x1f  "},
    {PRETOK_QWEN2, "I'VE 'Ll don't ''s 123456789 $+<=>^`|~", "I\x1f'VE\x1f '\x1fLl\x1f don\x1f't\x1f ''\x1fs\x1f \x1f" "1\x1f" "2\x1f" "3\x1f" "4\x1f" "5\x1f" "6\x1f" "7\x1f" "8\x1f" "9\x1f $+<=>^`|~"},
    {PRETOK_QWEN2, "\xce\x91\xce\x92\xce\x93 abc \xce\xa9mega \xef\xbc\xa1\xef\xbc\xa2\xef\xbc\xa3\xef\xbc\x91\xef\xbc\x92\xef\xbc\x93\xef\xbc\x81 \xed\x95\x9c\xea\xb5\xad\xec\x96\xb4 \xd9\xa3\xd9\xa4", "\xce\x91\xce\x92\xce\x93\x1f abc\x1f \xce\xa9mega\x1f \xef\xbc\xa1\xef\xbc\xa2\xef\xbc\xa3\x1f\xef\xbc\x91\x1f\xef\xbc\x92\x1f\xef\xbc\x93\x1f\xef\xbc\x81\x1f \xed\x95\x9c\xea\xb5\xad\xec\x96\xb4\x1f \x1f\xd9\xa3\x1f\xd9\xa4"},
    {PRETOK_QWEN2, "a\x0d\x0a\x0d\x0a  b\xe3\x80\x80" "c   ", "a\x1f\x0d\x0a\x0d\x0a\x1f \x1f b\x1f\xe3\x80\x80" "c\x1f   "},
    {PRETOK_DEEPSEEK_LLM, "Hello, y'all! How're you \xf0\x9f\x98\x81 ?\xe6\x88\x91\xe6\x83\xb3\xe5\x9c\xa8" "apple\xe5\xb7\xa5\xe4\xbd\x9c" "1314151\xe5\xa4\xa9\xef\xbd\x9e", "Hello\x1f,\x1f y\x1f'\x1f" "all\x1f!\x1f How\x1f'\x1fre\x1f you\x1f \xf0\x9f\x98\x81\x1f ?\x1f\xe6\x88\x91\xe6\x83\xb3\xe5\x9c\xa8\x1f" "apple\x1f\xe5\xb7\xa5\xe4\xbd\x9c\x1f" "1314151\x1f\xe5\xa4\xa9\x1f\xef\xbd\x9e"},
    {PRETOK_DEEPSEEK_LLM, "  3..3 ---=== \x09\x0a\x0a  x  ", "  \x1f" "3\x1f..\x1f" "3\x1f ---===\x1f \x09\x1f\x0a\x1f\x0a\x1f \x1f x\x1f  "},
    {PRETOK_DEEPSEEK_LLM, "I'VE 'Ll don't ''s 123456789 $+<=>^`|~", "I\x1f'\x1fVE\x1f '\x1fLl\x1f don\x1f'\x1ft\x1f ''\x1fs\x1f \x1f" "123456789\x1f $+<=>^`|~"},
    {PRETOK_DEEPSEEK_LLM, "\xce\x91\xce\x92\xce\x93 abc \xce\xa9mega \xef\xbc\xa1\xef\xbc\xa2\xef\xbc\xa3\xef\xbc\x91\xef\xbc\x92\xef\xbc\x93\xef\xbc\x81 \xed\x95\x9c\xea\xb5\xad\xec\x96\xb4 \xd9\xa3\xd9\xa4", "\xce\x91\xce\x92\xce\x93\x1f abc\x1f \xce\xa9\x1fmega\x1f \xef\xbc\xa1\xef\xbc\xa2\xef\xbc\xa3\x1f\xef\xbc\x91\xef\xbc\x92\xef\xbc\x93\x1f\xef\xbc\x81\x1f \x1f\xed\x95\x9c\xea\xb5\xad\xec\x96\xb4\x1f \x1f\xd9\xa3\xd9\xa4"},
    {PRETOK_DEEPSEEK_LLM, "a\x0d\x0a\x0d\x0a  b\xe3\x80\x80" "c   ", "a\x1f\x0d\x1f\x0a\x1f\x0d\x1f\x0a\x1f \x1f b\x1f\xe3\x80\x80\x1f" "c\x1f   "},
    {PRETOK_DEEPSEEK_CODER, "Hello, y'all! How're you \xf0\x9f\x98\x81 ?\xe6\x88\x91\xe6\x83\xb3\xe5\x9c\xa8" "apple\xe5\xb7\xa5\xe4\xbd\x9c" "1314151\xe5\xa4\xa9\xef\xbd\x9e", "Hello\x1f,\x1f y\x1f'\x1f" "all\x1f!\x1f How\x1f'\x1fre\x1f you\x1f \xf0\x9f\x98\x81\x1f ?\x1f\xe6\x88\x91\xe6\x83\xb3\xe5\x9c\xa8\x1f" "apple\x1f\xe5\xb7\xa5\xe4\xbd\x9c\x1f" "1\x1f" "3\x1f" "1\x1f" "4\x1f" "1\x1f" "5\x1f" "1\x1f\xe5\xa4\xa9\x1f\xef\xbd\x9e"},
    {PRETOK_DEEPSEEK_CODER, "  3..3 ---=== \x09\x0a\x0a  x  ", "  \x1f" "3\x1f..\x1f" "3\x1f ---\x1f=== \x09\x1f\x0a\x1f\x0a\x1f \x1f x\x1f  "},
    {PRETOK_DEEPSEEK_CODER, "I'VE 'Ll don't ''s 123456789 $+<=>^`|~", "I\x1f'\x1fVE\x1f '\x1fLl\x1f don\x1f'\x1ft\x1f ''\x1fs\x1f \x1f" "1\x1f" "2\x1f" "3\x1f" "4\x1f" "5\x1f" "6\x1f" "7\x1f" "8\x1f" "9\x1f $+<=>^`|~"},
    {PRETOK_DEEPSEEK_CODER, "\xce\x91\xce\x92\xce\x93 abc \xce\xa9mega \xef\xbc\xa1\xef\xbc\xa2\xef\xbc\xa3\xef\xbc\x91\xef\xbc\x92\xef\xbc\x93\xef\xbc\x81 \xed\x95\x9c\xea\xb5\xad\xec\x96\xb4 \xd9\xa3\xd9\xa4", "\xce\x91\xce\x92\xce\x93\x1f abc\x1f \xce\xa9mega\x1f \xef\xbc\xa1\xef\xbc\xa2\xef\xbc\xa3\x1f\xef\xbc\x91\x1f\xef\xbc\x92\x1f\xef\xbc\x93\x1f\xef\xbc\x81\x1f \x1f\xed\x95\x9c\xea\xb5\xad\xec\x96\xb4\x1f \x1f\xd9\xa3\x1f\xd9\xa4"},
    {PRETOK_DEEPSEEK_CODER, "a\x0d\x0a\x0d\x0a  b\xe3\x80\x80" "c   ", "a\x1f\x0d\x1f\x0a\x1f\x0d\x1f\x0a\x1f \x1f b\x1f\xe3\x80\x80\x1f" "c\x1f   "},
    {PRETOK_FALCON, "Hello, y'all! How're you \xf0\x9f\x98\x81 ?\xe6\x88\x91\xe6\x83\xb3\xe5\x9c\xa8" "apple\xe5\xb7\xa5\xe4\xbd\x9c" "1314151\xe5\xa4\xa9\xef\xbd\x9e", "Hello\x1f,\x1f y\x1f'\x1f" "all\x1f!\x1f How\x1f'\x1fre\x1f you\x1f \xf0\x9f\x98\x81\x1f \x1f?\x1f\xe6\x88\x91\xe6\x83\xb3\xe5\x9c\xa8" "apple\xe5\xb7\xa5\xe4\xbd\x9c\x1f" "131\x1f" "415\x1f" "1\x1f\xe5\xa4\xa9\x1f\xef\xbd\x9e"},
    {PRETOK_FALCON, "  3..3 ---=== \x09\x0a\x0a  x  ", " \x1f 3\x1f..\x1f" "3\x1f \x1f---===\x1f \x09\x0a\x0a \x1f x\x1f  "},
    {PRETOK_FALCON, "I'VE 'Ll don't ''s 123456789 $+<=>^`|~", "I\x1f'\x1fVE\x1f \x1f'\x1fLl\x1f don\x1f'\x1ft\x1f \x1f''\x1fs\x1f \x1f" "123\x1f" "456\x1f" "789\x1f \x1f$+<=>^`|~"},
    {PRETOK_FALCON, "\xce\x91\xce\x92\xce\x93 abc \xce\xa9mega \xef\xbc\xa1\xef\xbc\xa2\xef\xbc\xa3\xef\xbc\x91\xef\xbc\x92\xef\xbc\x93\xef\xbc\x81 \xed\x95\x9c\xea\xb5\xad\xec\x96\xb4 \xd9\xa3\xd9\xa4", "\xce\x91\xce\x92\xce\x93\x1f abc\x1f \xce\xa9mega\x1f \xef\xbc\xa1\xef\xbc\xa2\xef\xbc\xa3\x1f\xef\xbc\x91\xef\xbc\x92\xef\xbc\x93\x1f\xef\xbc\x81\x1f \xed\x95\x9c\xea\xb5\xad\xec\x96\xb4\x1f \xd9\xa3\xd9\xa4"},
    {PRETOK_FALCON, "a\x0d\x0a\x0d\x0a  b\xe3\x80\x80" "c   ", "a\x1f\x0d\x0a\x0d\x0a \x1f b\x1f\xe3\x80\x80\x1f" "c\x1f   "},
    {PRETOK_STARCODER, "Hello, y'all! How're you \xf0\x9f\x98\x81 ?\xe6\x88\x91\xe6\x83\xb3\xe5\x9c\xa8" "apple\xe5\xb7\xa5\xe4\xbd\x9c" "1314151\xe5\xa4\xa9\xef\xbd\x9e", "Hello\x1f,\x1f y\x1f'\x1f" "all\x1f!\x1f How\x1f're\x1f you\x1f \xf0\x9f\x98\x81\x1f ?\x1f\xe6\x88\x91\xe6\x83\xb3\xe5\x9c\xa8" "apple\xe5\xb7\xa5\xe4\xbd\x9c\x1f" "1\x1f" "3\x1f" "1\x1f" "4\x1f" "1\x1f" "5\x1f" "1\x1f\xe5\xa4\xa9\x1f\xef\xbd\x9e"},
    {PRETOK_STARCODER, "  3..3 ---=== \x09\x0a\x0a  x  ", "  \x1f" "3\x1f..\x1f" "3\x1f ---===\x1f \x09\x0a\x0a \x1f x\x1f  "},
    {PRETOK_STARCODER, "I'VE 'Ll don't ''s 123456789 $+<=>^`|~", "I\x1f'\x1fVE\x1f '\x1fLl\x1f don\x1f't\x1f ''\x1fs\x1f \x1f" "1\x1f" "2\x1f" "3\x1f" "4\x1f" "5\x1f" "6\x1f" "7\x1f" "8\x1f" "9\x1f $+<=>^`|~"},
    {PRETOK_STARCODER, "\xce\x91\xce\x92\xce\x93 abc \xce\xa9mega \xef\xbc\xa1\xef\xbc\xa2\xef\xbc\xa3\xef\xbc\x91\xef\xbc\x92\xef\xbc\x93\xef\xbc\x81 \xed\x95\x9c\xea\xb5\xad\xec\x96\xb4 \xd9\xa3\xd9\xa4", "\xce\x91\xce\x92\xce\x93\x1f abc\x1f \xce\xa9mega\x1f \xef\xbc\xa1\xef\xbc\xa2\xef\xbc\xa3\x1f\xef\xbc\x91\x1f\xef\xbc\x92\x1f\xef\xbc\x93\x1f\xef\xbc\x81\x1f \xed\x95\x9c\xea\xb5\xad\xec\x96\xb4\x1f \x1f\xd9\xa3\x1f\xd9\xa4"},
    {PRETOK_STARCODER, "a\x0d\x0a\x0d\x0a  b\xe3\x80\x80" "c   ", "a\x1f\x0d\x0a\x0d\x0a \x1f b\x1f\xe3\x80\x80\x1f" "c\x1f   "},
    // clang-format on
};

static void test_pretokenizers(void **state) {
    for (size_t t = 0; t < sizeof SPLITS / sizeof SPLITS[0]; t++) {
        const char *s = SPLITS[t].text;
        size_t len = strlen(s);
        uint32_t cps[256];
        uint32_t offs[257];
        size_t n = 0;
        for (size_t i = 0; i < len;) {
            int l;
            offs[n] = (uint32_t)i;
            cps[n++] = uni_decode(s + i, len - i, &l);
            i += (size_t)l;
        }
        offs[n] = (uint32_t)len;
        tok_vec out = {0};
        wgml_error err;
        assert_int_equal(pretok_split(SPLITS[t].kind, cps, n, &out, &err), WGML_OK);
        char got[1024];
        size_t g = 0;
        for (size_t i = 0; i + 1 < out.n; i += 2) {
            if (i) got[g++] = '\x1f';
            memcpy(got + g, s + offs[out.v[i]], offs[out.v[i + 1]] - offs[out.v[i]]);
            g += offs[out.v[i + 1]] - offs[out.v[i]];
        }
        got[g] = '\0';
        if (strcmp(got, SPLITS[t].pieces) != 0) {
            for (char *c = got; *c; c++)
                if (*c == '\x1f') *c = '|';
            fail_msg("pre-tokenizer %d on [%s]: got [%s]", SPLITS[t].kind, s, got);
        }
        tok_vec_free(&out);
    }
}

/* ---- files built here ---- */

typedef struct spec {
    const char *model, *pre;
    const char *const *tokens;
    int n_tokens;
    const char *const *merges;
    int n_merges;
    int tokens_as_ints; /* write tokenizer.ggml.tokens with the wrong type */
    int unk;            /* tokenizer.ggml.unknown_token_id when > 0 */
} spec;

static gguf_file *build(const char *name, const spec *sp) {
    wgml_error err;
    gguf_writer *w = gguf_writer_create();
    assert_non_null(w);
    if (sp->model) assert_int_equal(gguf_writer_set_str(w, "tokenizer.ggml.model", sp->model, &err), WGML_OK);
    if (sp->pre) assert_int_equal(gguf_writer_set_str(w, "tokenizer.ggml.pre", sp->pre, &err), WGML_OK);
    if (sp->tokens_as_ints) {
        int32_t v[2] = {1, 2};
        assert_int_equal(gguf_writer_set_arr(w, "tokenizer.ggml.tokens", GGUF_TYPE_INT32, v, 2, &err), WGML_OK);
    } else if (sp->tokens) {
        assert_int_equal(
            gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", sp->tokens, NULL, (uint64_t)sp->n_tokens, &err),
            WGML_OK);
    }
    if (sp->merges)
        assert_int_equal(
            gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", sp->merges, NULL, (uint64_t)sp->n_merges, &err),
            WGML_OK);
    if (sp->unk > 0)
        assert_int_equal(gguf_writer_set_u32(w, "tokenizer.ggml.unknown_token_id", (uint32_t)sp->unk, &err), WGML_OK);
    const char *path = tu_tmp_path(name);
    assert_int_equal(gguf_writer_begin(w, path, &err), WGML_OK);
    assert_int_equal(gguf_writer_finish(w, &err), WGML_OK);
    gguf_writer_free(w);
    gguf_file *f;
    if (gguf_open(path, &f, &err) != WGML_OK) fail_msg("%s", err.message);
    return f;
}

/* "Ġ" (U+0120, \304\240) is the byte-level symbol of a space */
static const char *const TINY_TOKENS[] = {"a", "b", "ab", "\304\240", "\304\240ab"};
static const char *const TINY_MERGES[] = {"a b", "\304\240 ab"};

static void expect_load_error(const spec *sp, wgml_status code, const char *needle) {
    gguf_file *f = build("bad.gguf", sp);
    wgml_tokenizer *tok = (wgml_tokenizer *)1;
    wgml_error err;
    assert_int_equal(wgml_tokenizer_load(f, &tok, &err), code);
    assert_int_equal(err.code, code);
    assert_null(tok);
    if (!strstr(err.message, needle)) fail_msg("message [%s] does not name [%s]", err.message, needle);
    gguf_close(f);
}

static void test_bad_files(void **state) {
    spec sp = {"gpt2", "no-such-pretokenizer", TINY_TOKENS, 5, TINY_MERGES, 2, 0, 0};
    expect_load_error(&sp, WGML_ERR_UNSUPPORTED, "no-such-pretokenizer");
    sp = (spec){"sentencepiece-unigram", NULL, TINY_TOKENS, 5, NULL, 0, 0, 0};
    expect_load_error(&sp, WGML_ERR_UNSUPPORTED, "sentencepiece-unigram");
    sp = (spec){"llama", NULL, NULL, 0, NULL, 0, 0, 0};
    expect_load_error(&sp, WGML_ERR_FORMAT, "tokenizer.ggml.tokens");
    sp = (spec){"llama", NULL, NULL, 0, NULL, 0, 1, 0};
    expect_load_error(&sp, WGML_ERR_FORMAT, "tokenizer.ggml.tokens");
    sp = (spec){"gpt2", "gpt-2", TINY_TOKENS, 5, NULL, 0, 0, 0};
    expect_load_error(&sp, WGML_ERR_FORMAT, "tokenizer.ggml.merges");
    sp = (spec){NULL, NULL, TINY_TOKENS, 5, NULL, 0, 0, 0};
    expect_load_error(&sp, WGML_ERR_FORMAT, "tokenizer.ggml.model");

    wgml_tokenizer *tok;
    wgml_error err;
    assert_int_equal(wgml_tokenizer_load(NULL, &tok, &err), WGML_ERR_INVALID_ARGUMENT);
}

/* Every pre-tokenizer name loads; a tiny byte-level vocabulary tokenizes with each. */
static void test_pretokenizer_names(void **state) {
    static const char *const names[] = {"default",   "gpt-2",          "llama-bpe", "llama3", "qwen2",  "falcon",
                                        "starcoder", "deepseek-coder", "refact",    "mpt",    "smollm", "deepseek-llm"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        spec sp = {"gpt2", names[i], TINY_TOKENS, 5, TINY_MERGES, 2, 0, 0};
        gguf_file *f = build("tiny.gguf", &sp);
        wgml_tokenizer *tok;
        wgml_error err;
        if (wgml_tokenizer_load(f, &tok, &err) != WGML_OK) fail_msg("%s: %s", names[i], err.message);
        const int32_t want[] = {2, 4, 0}; /* "ab", " ab", "a" */
        expect_ids(tok, "ab aba", 0, want, 3);
        wgml_tokenizer_free(tok);
        gguf_close(f);
    }
    /* no tokenizer.ggml.pre: llama.cpp's default expressions */
    spec sp = {"gpt2", NULL, TINY_TOKENS, 5, TINY_MERGES, 2, 0, 0};
    gguf_file *f = build("tiny.gguf", &sp);
    wgml_tokenizer *tok;
    wgml_error err;
    assert_int_equal(wgml_tokenizer_load(f, &tok, &err), WGML_OK);
    wgml_tokenizer_free(tok);
    gguf_close(f);
}

/* WordPiece vocabularies in BERT's own spelling ("##" continuations) work too. */
static void test_wordpiece_hash_spelling(void **state) {
    static const char *const tokens[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "hello", "##ing", "play", "##s", "!"};
    spec sp = {"bert", NULL, tokens, 9, NULL, 0, 0, 1};
    gguf_file *f = build("wp.gguf", &sp);
    wgml_tokenizer *tok;
    wgml_error err;
    if (wgml_tokenizer_load(f, &tok, &err) != WGML_OK) fail_msg("%s", err.message);
    const int32_t want[] = {6, 5, 6, 7, 8, 1};
    expect_ids(tok, "Playing PLAYS! ings", 0, want, 6);
    int len;
    char *text = decode(tok, want, 5, &len);
    assert_string_equal(text, "playing plays !");
    free(text);
    wgml_tokenizer_free(tok);
    gguf_close(f);
}

/* SentencePiece: an "unused" piece takes part in merging but is never output;
 * it is split back into the pieces it was merged from. */
static void test_spm_unused_pieces(void **state) {
    static const char *const tokens[] = {"<unk>", "<s>", "</s>", "a", "b", "c", "ab", "abc", "x"};
    static const float scores[] = {0, 0, 0, -5, -5, -5, -1, -0.5f, -5};
    static const int32_t types[] = {2, 3, 3, 1, 1, 1, 1, 5, 1};
    wgml_error err;
    gguf_writer *w = gguf_writer_create();
    assert_non_null(w);
    assert_int_equal(gguf_writer_set_str(w, "tokenizer.ggml.model", "llama", &err), WGML_OK);
    assert_int_equal(gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", tokens, NULL, 9, &err), WGML_OK);
    assert_int_equal(gguf_writer_set_arr(w, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, scores, 9, &err), WGML_OK);
    assert_int_equal(gguf_writer_set_arr(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types, 9, &err), WGML_OK);
    assert_int_equal(gguf_writer_set_bool(w, "tokenizer.ggml.add_space_prefix", 0, &err), WGML_OK);
    const char *path = tu_tmp_path("unused.gguf");
    assert_int_equal(gguf_writer_begin(w, path, &err), WGML_OK);
    assert_int_equal(gguf_writer_finish(w, &err), WGML_OK);
    gguf_writer_free(w);
    gguf_file *f;
    assert_int_equal(gguf_open(path, &f, &err), WGML_OK);
    wgml_tokenizer *tok;
    assert_int_equal(wgml_tokenizer_load(f, &tok, &err), WGML_OK);
    const int32_t want[] = {6, 5, 8, 0,
                            3}; /* "ab" "c" (not the unused "abc"), "x", "?" unknown (no byte tokens), "a" */
    expect_ids(tok, "abcx?a", 0, want, 5);
    wgml_tokenizer_free(tok);
    gguf_close(f);
}

/* ---- allocation failure at every allocation of load + encode ---- */

static void alloc_loop(const char *rel, const char *text) {
    vocab v = open_vocab(rel);
    int n_ref;
    int32_t *ref = encode(v.tok, text, strlen(text), 1, &n_ref);
    close_vocab(&v);
    gguf_file *f;
    wgml_error err;
    assert_int_equal(gguf_open(tu_shared(rel), &f, &err), WGML_OK);
    int done = 0;
    long fails = 0;
    for (long n = 0; n < 100000 && !done; n++) {
        wgml_tokenizer *tok = NULL;
        int32_t ids[256];
        int cnt = -1;
        wgml_alloc_fail_after(n);
        wgml_status st = wgml_tokenizer_load(f, &tok, &err);
        if (st == WGML_OK) cnt = wgml_tokenizer_encode(tok, text, strlen(text), 1, ids, 256, &err);
        wgml_alloc_fail_after(-1);
        if (st != WGML_OK) {
            assert_int_equal(st, WGML_ERR_OUT_OF_MEMORY);
            assert_null(tok);
            fails++;
        } else if (cnt < 0) {
            assert_int_equal(err.code, WGML_ERR_OUT_OF_MEMORY);
            fails++;
        } else {
            assert_int_equal(cnt, n_ref);
            assert_memory_equal(ids, ref, (size_t)cnt * sizeof *ids);
            done = 1;
        }
        wgml_tokenizer_free(tok);
    }
    assert_true(done);
    assert_true(fails > 5);
    gguf_close(f);
    free(ref);
}

static void test_alloc_failure(void **state) {
    alloc_loop("models/stories260K.gguf", "Once upon a time");
    alloc_loop("vocab/ggml-vocab-phi-3.gguf", "<|user|>\nHello w\xc3\xb6rld \xf0\x9f\xa6\x99<|end|>");
    alloc_loop("vocab/ggml-vocab-gpt-2.gguf", "Hello world<|endoftext|> 123 \xff");
    alloc_loop("vocab/ggml-vocab-bert-bge.gguf", "Hello, F\xc3\xbchrer! \xe6\x88\x91\xe6\x83\xb3");
}

/* ---- 1 MB of text: linear time ---- */

static double seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void test_large_text(void **state) {
    size_t n_seed;
    char *seed = (char *)tu_read_file(tu_shared("vocab/ggml-vocab-gpt-2.gguf.inp"), &n_seed);
    assert_non_null(seed);
    const size_t n = 1 << 20;
    char *mixed = malloc(n), *word = malloc(n);
    assert_non_null(mixed);
    assert_non_null(word);
    for (size_t i = 0; i < n; i++)
        mixed[i] = seed[i % n_seed], word[i] = "ab"[i % 7 == 0];
    const char *vocabs[] = {"vocab/ggml-vocab-llama-spm.gguf", "vocab/ggml-vocab-gpt-2.gguf",
                            "vocab/ggml-vocab-bert-bge.gguf"};
    for (int k = 0; k < 3; k++) {
        vocab v = open_vocab(vocabs[k]);
        wgml_error err;
        double t0 = seconds();
        int a = wgml_tokenizer_encode(v.tok, mixed, n, 0, NULL, 0, &err);
        int b = wgml_tokenizer_encode(v.tok, word, n, 0, NULL, 0, &err); /* one 1 MB word */
        double dt = seconds() - t0;
        printf("%s: 1 MB mixed -> %d tokens, 1 MB word -> %d tokens, %.2f s\n", vocabs[k], a, b, dt);
        assert_true(a > 100000);
        assert_true(b > 0);
        assert_true(dt < 60.0); /* quadratic behaviour would take hours */
        close_vocab(&v);
    }
    free(mixed);
    free(word);
    free(seed);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vectors_llama_spm),
        cmocka_unit_test(test_vectors_phi3),
        cmocka_unit_test(test_vectors_gpt2),
        cmocka_unit_test(test_vectors_bert_bge),
        cmocka_unit_test(test_stories_prompt),
        cmocka_unit_test(test_meta),
        cmocka_unit_test(test_pieces),
        cmocka_unit_test(test_byte_fallback),
        cmocka_unit_test(test_utf8_split_pieces),
        cmocka_unit_test(test_invalid_utf8),
        cmocka_unit_test(test_special_tokens),
        cmocka_unit_test(test_pretokenizers),
        cmocka_unit_test(test_bad_files),
        cmocka_unit_test(test_pretokenizer_names),
        cmocka_unit_test(test_wordpiece_hash_spelling),
        cmocka_unit_test(test_spm_unused_pieces),
        cmocka_unit_test(test_alloc_failure),
        cmocka_unit_test(test_large_text),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
