/*
 * test_whisper_vocab.c - Whisper's vocabulary and tokenizer
 * (model/whisper/whisper_vocab.h, whisper_tokenizer.h) against the official
 * code's numbers.
 *
 *   - the special ids and language codes of the three layouts (multilingual,
 *     v3, English-only) equal ../shared/whisper/tokens.json;
 *   - non_speech_tokens and the default suppress_tokens equal tokens.json:
 *     multilingual from the micro model's vocabulary (read through the .bin
 *     reader), English-only from GPT-2's ranks (the shared GPT-2 vocabulary,
 *     which is gpt2.tiktoken);
 *   - decode of every token list of the reference manifests (micro and tiny)
 *     equals its text and text_with_timestamps byte for byte (random weights
 *     pick many partial UTF-8 tokens: U+FFFD replacement is exercised);
 *   - UTF-8 replacement by maximal subparts, byte by byte;
 *   - encode: GPT-2's reference vectors (llama.cpp's, with the English-only
 *     ranks), openai/whisper's own tokenizer tests, round trips.
 */
#include "check_err.h"
#include "format/gguf.h"
#include "format/model_file.h"
#include "model/whisper/whisper_tokenizer.h"
#include "model/whisper/whisper_vocab.h"
#include "npy.h"
#include "testutil.h"
#include "text/tokenizer_impl.h" /* bpe_cp_to_byte: GPT-2's spelling back to bytes */
#include "text/unicode.h"

#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static json_object *load_json(const char *rel) {
    json_object *j = json_object_from_file(tu_shared(rel));
    if (!j) fail_msg("cannot parse %s", rel);
    return j;
}

static json_object *get(json_object *o, const char *key) {
    json_object *v;
    if (!json_object_object_get_ex(o, key, &v)) fail_msg("no key '%s'", key);
    return v;
}

static int get_int(json_object *o, const char *key) { return json_object_get_int(get(o, key)); }

/* The layout of tokens.json whose name starts with prefix. */
static json_object *layout(json_object *root, const char *prefix) {
    json_object_object_foreach(get(root, "layouts"), k, v) {
        if (!strncmp(k, prefix, strlen(prefix))) return v;
    }
    fail_msg("no layout '%s'", prefix);
    return NULL;
}

static void expect_list(const char *what, const int32_t *got, int n, json_object *want) {
    int nw = (int)json_object_array_length(want);
    for (int i = 0; i < n && i < nw; i++)
        if (got[i] != json_object_get_int(json_object_array_get_idx(want, (size_t)i)))
            fail_msg("%s[%d] = %d, expected %d", what, i, got[i], json_object_get_int(json_object_array_get_idx(want, (size_t)i)));
    if (n != nw) fail_msg("%s: %d ids, expected %d", what, n, nw);
}

/* ---- tokenizers ---- */

static whisper_tokenizer *multilingual(void) {
    wgml_error err;
    gguf_file *g;
    if (wgml_model_file_open(tu_shared("whisper/whisper-micro-random.bin"), &g, &err)) fail_msg("%s", err.message);
    whisper_tokenizer *t;
    if (whisper_tokenizer_load(g, &t, &err)) fail_msg("%s", err.message);
    gguf_close(g); /* the tokenizer keeps its own copy */
    return t;
}

/* English-only: GPT-2's 50256 ranks, from the shared GPT-2 vocabulary
 * (tokens spelled in byte-level symbols; its last token is <|endoftext|>). */
static whisper_tokenizer *english(void) {
    wgml_error err;
    gguf_file *g;
    if (gguf_open(tu_shared("vocab/ggml-vocab-gpt-2.gguf"), &g, &err)) fail_msg("%s", err.message);
    const gguf_value *toks;
    assert_int_equal(gguf_get_arr(g, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &toks, &err), 1);
    assert_int_equal(toks->v.arr.n, 50257);
    assert_true(gguf_str_eq(toks->v.arr.items[50256].v.str, "<|endoftext|>"));
    char **raw = calloc(50256, sizeof *raw);
    uint64_t *lens = calloc(50256, sizeof *lens);
    for (int i = 0; i < 50256; i++) {
        gguf_str s = toks->v.arr.items[i].v.str;
        raw[i] = malloc(s.len + 1);
        size_t k = 0;
        for (size_t j = 0; j < s.len;) {
            int n;
            int b = bpe_cp_to_byte(uni_decode(s.ptr + j, s.len - j, &n));
            assert_true(b >= 0);
            raw[i][k++] = (char)b;
            j += (size_t)n;
        }
        lens[i] = k;
    }
    whisper_tokenizer *t;
    if (whisper_tokenizer_create((const char *const *)raw, lens, 50256, 51864, "gpt2", &t, &err))
        fail_msg("%s", err.message);
    for (int i = 0; i < 50256; i++)
        free(raw[i]);
    free(raw);
    free(lens);
    gguf_close(g);
    return t;
}

static int32_t *encode(const whisper_tokenizer *t, const char *s, size_t len, int *n) {
    wgml_error err;
    int total = whisper_text_encode(t, s, len, NULL, 0, &err);
    if (total < 0) fail_msg("encode: %s", err.message);
    int32_t *ids = malloc(((size_t)total + 1) * sizeof *ids);
    assert_int_equal(whisper_text_encode(t, s, len, ids, total, &err), total);
    *n = total;
    return ids;
}

static char *decode(const whisper_tokenizer *t, const int32_t *ids, int n, int timestamps) {
    int len = timestamps ? whisper_text_decode_with_timestamps(t, ids, n, NULL, 0) : whisper_text_decode(t, ids, n, NULL, 0);
    assert_true(len >= 0);
    char *s = malloc((size_t)len + 1);
    int again = timestamps ? whisper_text_decode_with_timestamps(t, ids, n, s, len + 1) : whisper_text_decode(t, ids, n, s, len + 1);
    assert_int_equal(again, len);
    assert_int_equal(s[len], '\0');
    return s;
}

/* ---- special tokens ---- */

static void check_layout(json_object *L, int english_only) {
    whisper_specials s;
    wgml_error err;
    const int n_vocab = get_int(L, "n_vocab");
    assert_int_equal(whisper_specials_init(&s, n_vocab, &err), WGML_OK);
    assert_int_equal(s.n_vocab, n_vocab);
    assert_int_equal(s.n_text, get_int(L, "bpe_ranks"));
    assert_int_equal(s.multilingual, !english_only);
    assert_int_equal(s.eot, get_int(L, "eot"));
    assert_int_equal(s.sot, get_int(L, "sot"));
    assert_int_equal(s.translate, get_int(L, "translate"));
    assert_int_equal(s.transcribe, get_int(L, "transcribe"));
    assert_int_equal(s.sot_lm, get_int(L, "sot_lm"));
    assert_int_equal(s.sot_prev, get_int(L, "sot_prev"));
    assert_int_equal(s.no_speech, get_int(L, "no_speech"));
    assert_int_equal(s.no_timestamps, get_int(L, "no_timestamps"));
    assert_int_equal(s.ts_begin, get_int(L, "timestamp_begin"));
    assert_int_equal(s.ts_begin + 1500, get_int(L, "timestamp_end"));
    assert_int_equal(s.ts_begin + 1500, n_vocab - 1);
    json_object *langs = get(L, "languages");
    if (english_only) { /* "ids 50258..50356 exist (<|en|>..) but .en models never use them" */
        assert_int_equal(s.lang0, 50258);
        assert_int_equal(s.lang0 + s.n_lang - 1, 50356);
    } else {
        int i = 0;
        json_object_object_foreach(langs, code, id) { /* in the official order */
            assert_string_equal(whisper_lang_code(i), code);
            assert_int_equal(s.lang0 + i, json_object_get_int(id));
            assert_int_equal(whisper_lang_token(&s, code), json_object_get_int(id));
            i++;
        }
        assert_int_equal(s.n_lang, i);
        int32_t seq[4] = {s.sot, whisper_lang_token(&s, "en"), s.transcribe, s.no_timestamps};
        expect_list("sot_sequence_en_transcribe", seq, 3, get(L, "sot_sequence_en_transcribe"));
        expect_list("notimestamps", seq, 4, get(L, "sot_sequence_en_transcribe_notimestamps"));
        seq[2] = s.translate;
        expect_list("sot_sequence_en_translate", seq, 3, get(L, "sot_sequence_en_translate"));
    }
}

static void test_specials(void **state) {
    (void)state;
    json_object *root = load_json("whisper/tokens.json");
    check_layout(layout(root, "multilingual"), 0);
    check_layout(layout(root, "v3"), 0);
    check_layout(layout(root, "english-only"), 1);
    json_object_put(root);

    whisper_specials s;
    wgml_error err;
    CHECK_ERR("n_vocab", whisper_specials_init(&s, 51867, &err), &err, WGML_ERR_FORMAT, "51867", NULL);
    CHECK_ERR("n_vocab 0", whisper_specials_init(&s, 0, &err), &err, WGML_ERR_FORMAT, "0 ids", NULL);
    assert_string_equal(whisper_lang_code(0), "en");
    assert_string_equal(whisper_lang_code(99), "yue");
    assert_null(whisper_lang_code(100));
    assert_null(whisper_lang_code(-1));
    assert_int_equal(whisper_specials_init(&s, 51865, &err), WGML_OK);
    assert_int_equal(whisper_lang_token(&s, "yue"), -1); /* not before v3 */
    assert_int_equal(whisper_lang_token(&s, "xx"), -1);
    assert_int_equal(whisper_lang_token(&s, NULL), -1);
    assert_int_equal(whisper_lang_token(&s, "su"), 50357);

    /* the names tiktoken decodes the specials to */
    static const struct {
        int id;
        const char *name;
    } names[] = {{50257, "<|endoftext|>"},   {50258, "<|startoftranscript|>"},
                 {50259, "<|en|>"},          {50357, "<|su|>"},
                 {50358, "<|translate|>"},   {50359, "<|transcribe|>"},
                 {50360, "<|startoflm|>"},   {50361, "<|startofprev|>"},
                 {50362, "<|nospeech|>"},    {50363, "<|notimestamps|>"},
                 {50364, "<|0.00|>"},        {50365, "<|0.02|>"},
                 {50364 + 54, "<|1.08|>"},   {50364 + 1499, "<|29.98|>"},
                 {51864, "<|30.00|>"}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char buf[32];
        assert_int_equal(whisper_special_name(&s, names[i].id, buf, sizeof buf), (int)strlen(names[i].name));
        assert_string_equal(buf, names[i].name);
    }
    char small[4];
    assert_int_equal(whisper_special_name(&s, 50258, small, sizeof small), 21);
    assert_string_equal(small, "<|s");
    assert_int_equal(whisper_special_name(&s, 50256, small, sizeof small), -1);
    assert_int_equal(whisper_special_name(&s, 51865, small, sizeof small), -1);
    /* every timestamp name is Python's f"<|{i * 0.02:.2f}|>" */
    for (int i = 0; i <= 1500; i++) {
        char buf[32], want[32];
        snprintf(want, sizeof want, "<|%d.%02d|>", i * 2 / 100, i * 2 % 100);
        whisper_special_name(&s, s.ts_begin + i, buf, sizeof buf);
        assert_string_equal(buf, want);
    }
    assert_int_equal(whisper_specials_init(&s, 51866, &err), WGML_OK);
    assert_int_equal(whisper_lang_token(&s, "yue"), 50358);
    char buf[32];
    whisper_special_name(&s, 50358, buf, sizeof buf);
    assert_string_equal(buf, "<|yue|>");
}

/* ---- suppression lists ---- */

static void check_lists(const whisper_tokenizer *t, json_object *L) {
    const int32_t *ids;
    int n = whisper_non_speech_tokens(t, &ids);
    expect_list("non_speech_tokens", ids, n, get(L, "non_speech_tokens"));
    n = whisper_suppress_tokens_default(t, &ids);
    expect_list("suppress_tokens_default", ids, n, get(L, "suppress_tokens_default"));
    int blank_n;
    int32_t *blank = encode(t, " ", 1, &blank_n);
    expect_list("blank_token", blank, blank_n, get(L, "blank_token"));
    free(blank);
}

static void test_suppress_lists(void **state) {
    (void)state;
    json_object *root = load_json("whisper/tokens.json");
    whisper_tokenizer *t = multilingual();
    check_lists(t, layout(root, "multilingual"));
    const whisper_specials *s = whisper_tokenizer_specials(t);
    assert_int_equal(s->n_vocab, 51865);
    whisper_tokenizer_free(t);
    t = english();
    check_lists(t, layout(root, "english-only"));
    whisper_tokenizer_free(t);
    json_object_put(root);

    /* the manifest's own tokenizer section says the same */
    root = load_json("whisper/reference/whisper-micro-random/manifest.json");
    json_object *tk = get(root, "tokenizer");
    t = multilingual();
    const int32_t *ids;
    int n = whisper_non_speech_tokens(t, &ids);
    expect_list("manifest non_speech_tokens", ids, n, get(tk, "non_speech_tokens"));
    n = whisper_suppress_tokens_default(t, &ids);
    expect_list("manifest suppress_tokens_default", ids, n, get(tk, "suppress_tokens_default"));
    whisper_tokenizer_free(t);
    json_object_put(root);
}

/* ---- decoding ---- */

/* Returns how many texts hold a U+FFFD. */
static int check_manifest(const whisper_tokenizer *t, const char *dir) {
    char rel[256];
    snprintf(rel, sizeof rel, "%s/manifest.json", dir);
    json_object *root = load_json(rel);
    json_object *cases = get(root, "cases");
    const int eot = whisper_tokenizer_specials(t)->eot;
    int checked = 0, replaced = 0;
    for (size_t c = 0; c < json_object_array_length(cases); c++) {
        json_object *cs = json_object_array_get_idx(cases, c);
        const char *name = json_object_get_string(get(cs, "name"));
        json_object *windows = get(cs, "windows");
        for (size_t w = 0; w < json_object_array_length(windows); w++) {
            json_object *win = json_object_array_get_idx(windows, w);
            static const char *const kinds[] = {"plain", "rules", "rules_nots"};
            for (int k = 0; k < 3; k++) {
                json_object *list = get(win, kinds[k]), *toks = get(list, "tokens");
                int n = (int)json_object_array_length(toks);
                int32_t *ids = malloc((size_t)n * sizeof *ids + 1);
                for (int i = 0; i < n; i++)
                    ids[i] = json_object_get_int(json_object_array_get_idx(toks, (size_t)i));
                /* the .npy holds the same list */
                snprintf(rel, sizeof rel, "%s/%s/w%d_tokens_%s.npy", dir, name, get_int(win, "index"), kinds[k]);
                npy_array a;
                if (npy_read(tu_shared(rel), &a)) fail_msg("cannot read %s", rel);
                assert_int_equal(a.n, n);
                for (int i = 0; i < n; i++)
                    assert_int_equal((int32_t)a.v[i], ids[i]);
                npy_free(&a);
                /* Tokenizer.decode of the ids before EOT */
                int m = 0;
                while (m < n && ids[m] != eot)
                    m++;
                assert_int_equal(m < n, json_object_get_boolean(get(list, "ended_with_eot")));
                char *text = decode(t, ids, m, 0), *with_ts = decode(t, ids, m, 1);
                const char *want = json_object_get_string(get(list, "text"));
                const char *want_ts = json_object_get_string(get(list, "text_with_timestamps"));
                if (strcmp(text, want)) fail_msg("%s w%zu %s: text\n  got  [%s]\n  want [%s]", rel, w, kinds[k], text, want);
                if (strcmp(with_ts, want_ts))
                    fail_msg("%s w%zu %s: text_with_timestamps\n  got  [%s]\n  want [%s]", rel, w, kinds[k], with_ts,
                             want_ts);
                replaced += strstr(text, "\xEF\xBF\xBD") != NULL;
                checked++;
                free(text);
                free(with_ts);
                free(ids);
            }
        }
    }
    assert_true(checked >= 12); /* micro: 21 lists, tiny: 12 */
    json_object_put(root);
    return replaced;
}

static void test_decode_manifests(void **state) {
    (void)state;
    whisper_tokenizer *t = multilingual();
    assert_true(check_manifest(t, "whisper/reference/whisper-micro-random") > 0);
    check_manifest(t, "whisper/reference/whisper-tiny-random");
    whisper_tokenizer_free(t);
}

/* The id of the single-byte token b. */
static int32_t byte_id(const whisper_tokenizer *t, uint8_t b) {
    for (int32_t id = 0; id < 50257; id++) {
        char c;
        if (whisper_token_bytes(t, id, &c, 1) == 1 && (uint8_t)c == b) return id;
    }
    fail_msg("no token for byte %02x", b);
    return -1;
}

static void test_decode_utf8(void **state) {
    (void)state;
    whisper_tokenizer *t = multilingual();
    /* bytes -> Python's bytes.decode("utf-8", "replace") */
    static const struct {
        const char *in, *out;
    } cases[] = {
        {"A", "A"},
        {"\xC3\xA9", "\xC3\xA9"},
        {"\xE2\x82\x41", "\xEF\xBF\xBD" "A"},                                 /* truncated 3-byte: one U+FFFD */
        {"\xF0\x9F\x98", "\xEF\xBF\xBD"},                                     /* truncated 4-byte at the end */
        {"\xF0\x9F\x98\x80", "\xF0\x9F\x98\x80"},                             /* U+1F600 */
        {"\xF0\x80\x80", "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"},             /* F0 needs 90..BF */
        {"\xED\xA0\x80", "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"},             /* a surrogate */
        {"\xED\x9F\xBF", "\xED\x9F\xBF"},                                     /* U+D7FF */
        {"\xC0\xAF", "\xEF\xBF\xBD\xEF\xBF\xBD"},                             /* overlong */
        {"\xE0\x80\xAF", "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"},             /* overlong */
        {"\xF4\x90\x80\x80", "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"}, /* past U+10FFFF */
        {"\xF4\x8F\xBF\xBF", "\xF4\x8F\xBF\xBF"},                             /* U+10FFFF */
        {"\xFF\xFE", "\xEF\xBF\xBD\xEF\xBF\xBD"},
        {"\x80\xBF", "\xEF\xBF\xBD\xEF\xBF\xBD"},                             /* stray continuations */
        {"\xE1\x80\xE1\x80\x80", "\xEF\xBF\xBD\xE1\x80\x80"},                 /* a subpart, then a whole one */
        {"\xF1\x80\x80\xC3\xA9", "\xEF\xBF\xBD\xC3\xA9"},
        {"\xC2", "\xEF\xBF\xBD"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int32_t ids[8];
        int n = 0;
        for (const char *c = cases[i].in; *c; c++)
            ids[n++] = byte_id(t, (uint8_t)*c);
        char *s = decode(t, ids, n, 0);
        if (strcmp(s, cases[i].out)) fail_msg("case %zu: [%s]", i, s);
        free(s);
    }
    /* openai/whisper's test_split_on_unicode: token 246 alone is an invalid byte */
    const int32_t fr[] = {8404, 871, 287, 6, 246, 526, 3210, 20378};
    char *s = decode(t, fr, 8, 0);
    assert_string_equal(s, " elle est l'\xEF\xBF\xBD\xC3\xA9ritoire"); /* words " elle" ... "\ufffd", "é", "rit", "oire" */
    free(s);
    /* timestamps: dropped by decode (ids past the vocabulary too), kept by decode_with_timestamps */
    const int32_t ts[] = {50364, 8404, 50364 + 54, 50257, 50259, 50363, 51864};
    s = decode(t, ts, 7, 0);
    assert_string_equal(s, " elle<|endoftext|><|en|><|notimestamps|>");
    free(s);
    s = decode(t, ts, 7, 1);
    assert_string_equal(s, "<|0.00|> elle<|1.08|><|endoftext|><|en|><|notimestamps|><|30.00|>");
    free(s);
    const int32_t past[] = {8404, 51865, 99999};
    s = decode(t, past, 3, 0);
    assert_string_equal(s, " elle");
    free(s);
    assert_int_equal(whisper_text_decode_with_timestamps(t, past, 3, NULL, 0), -1);
    const int32_t neg[] = {8404, -1};
    assert_int_equal(whisper_text_decode(t, neg, 2, NULL, 0), -1);
    /* a short buffer: the length, cap bytes written, no NUL when it does not fit */
    char buf[4] = {'x', 'x', 'x', 'x'};
    assert_int_equal(whisper_text_decode(t, fr, 2, buf, 3), 9);
    assert_memory_equal(buf, " el", 3);
    assert_int_equal(buf[3], 'x');
    assert_int_equal(whisper_text_decode(t, fr, 0, buf, 4), 0);
    assert_int_equal(buf[0], '\0');
    /* token bytes */
    assert_int_equal(whisper_token_bytes(t, 50258, buf, 4), 21);
    assert_memory_equal(buf, "<|st", 4);
    assert_int_equal(whisper_token_bytes(t, 51865, buf, 4), -1);
    assert_int_equal(whisper_token_bytes(t, -3, buf, 4), -1);
    whisper_tokenizer_free(t);
}

/* ---- encoding ---- */

/* llama.cpp's GPT-2 vectors with GPT-2's ranks (what the English-only models use). */
static void test_encode_gpt2_vectors(void **state) {
    (void)state;
    whisper_tokenizer *t = english();
    size_t n_inp, n_out;
    char path[512];
    snprintf(path, sizeof path, "%s.inp", tu_shared("vocab/ggml-vocab-gpt-2.gguf"));
    char *inp = (char *)tu_read_file(path, &n_inp);
    snprintf(path, sizeof path, "%s.out", tu_shared("vocab/ggml-vocab-gpt-2.gguf"));
    char *out = (char *)tu_read_file(path, &n_out);
    assert_non_null(inp);
    assert_non_null(out);
    static const char SEP[] = "\n__ggml_vocab_test__\n";
    const size_t sep_len = sizeof SEP - 1;
    char *s = inp, *line = out;
    int total = 0;
    for (char *e; (e = strstr(s, SEP)) != NULL; s = e + sep_len) {
        char *eol = strchr(line, '\n');
        assert_non_null(eol);
        *eol = '\0';
        int n;
        int32_t *ids = encode(t, s, (size_t)(e - s), &n);
        int k = 0, ok = 1;
        for (char *p = line, *q;; p = q) {
            long want = strtol(p, &q, 10);
            if (q == p) break;
            ok &= k < n && ids[k] == want;
            k++;
        }
        if (!ok || k != n) fail_msg("vector %d [%.*s]: wrong ids (%d of %d)", total, (int)(e - s), s, n, k);
        /* and back */
        char *back = decode(t, ids, n, 0);
        assert_int_equal(strlen(back), (size_t)(e - s));
        assert_memory_equal(back, s, (size_t)(e - s));
        free(back);
        free(ids);
        line = eol + 1;
        total++;
    }
    assert_true(total >= 40);
    free(inp);
    free(out);
    whisper_tokenizer_free(t);
}

static void test_encode(void **state) {
    (void)state;
    whisper_tokenizer *t = multilingual(), *en = english();
    static const char *const sentences[] = {
        "Hello world",
        " Speech recognition turns the sound of a voice into written words.",
        "The train to Leeds leaves at half past seven on Tuesday, from platform nine.",
        "And so, my fellow Americans: ask not what your country can do for you -- ask what you can do for your "
        "country.",
        "It's 3.14159 o'clock; we'll see   you\n\nthere\t(maybe)!",
        " \xC3\xA9t\xC3\xA9 \xE4\xBD\xA0\xE5\xA5\xBD \xF0\x9F\x98\x80 \xE2\x99\xAA",
        "<|endoftext|> is plain text here",
        "",
    };
    for (size_t i = 0; i < sizeof sentences / sizeof sentences[0]; i++) {
        for (int v = 0; v < 2; v++) {
            int n;
            int32_t *ids = encode(v ? en : t, sentences[i], strlen(sentences[i]), &n);
            for (int k = 0; k < n; k++)
                assert_true(ids[k] >= 0 && ids[k] < whisper_tokenizer_specials(v ? en : t)->eot);
            char *back = decode(v ? en : t, ids, n, 0);
            assert_string_equal(back, sentences[i]);
            free(back);
            free(ids);
        }
    }
    /* ids the official tokenizer gives */
    int n;
    int32_t *ids = encode(t, " elle est l'", strlen(" elle est l'"), &n);
    const int32_t want_fr[] = {8404, 871, 287, 6};
    assert_int_equal(n, 4);
    assert_memory_equal(ids, want_fr, sizeof want_fr);
    free(ids);
    ids = encode(en, "Hello world", 11, &n);
    const int32_t want_hw[] = {15496, 995}; /* GPT-2 */
    assert_int_equal(n, 2);
    assert_memory_equal(ids, want_hw, sizeof want_hw);
    free(ids);
    /* openai/whisper's test_multilingual_tokenizer: a round trip, and fewer multilingual tokens */
    const char *ko = "\xEB\x8B\xA4\xEB\x9E\x8C\xEC\xA5\x90 \xED\x97\x8C \xEC\xB3\x87\xEB\xB0\x94\xED\x80\xB4\xEC\x97\x90 "
                     "\xED\x83\x80\xEA\xB3\xA0\xED\x8C\x8C";
    int n_ml, n_en;
    int32_t *a = encode(t, ko, strlen(ko), &n_ml), *b = encode(en, ko, strlen(ko), &n_en);
    char *back = decode(t, a, n_ml, 0);
    assert_string_equal(back, ko);
    free(back);
    back = decode(en, b, n_en, 0);
    assert_string_equal(back, ko);
    free(back);
    assert_true(n_en > n_ml);
    free(a);
    free(b);
    /* invalid UTF-8 goes byte for byte; the count-then-fill contract */
    const char bad[] = "a\xFF\xC3(\xED\xA0\x80z";
    wgml_error err;
    ids = encode(t, bad, sizeof bad - 1, &n);
    char raw[32];
    int k = 0;
    for (int i = 0; i < n; i++)
        k += whisper_token_bytes(t, ids[i], raw + k, (int)sizeof raw - k);
    assert_int_equal(k, (int)sizeof bad - 1);
    assert_memory_equal(raw, bad, sizeof bad - 1);
    int32_t two[2] = {-7, -7};
    assert_int_equal(whisper_text_encode(t, bad, sizeof bad - 1, two, 1, &err), n);
    assert_int_equal(two[0], ids[0]);
    assert_int_equal(two[1], -7);
    free(ids);
    assert_int_equal(whisper_text_encode(t, NULL, 3, NULL, 0, &err), -1);
    whisper_tokenizer_free(t);
    whisper_tokenizer_free(en);
}

static void test_create_errors(void **state) {
    (void)state;
    static char bytes[256];
    const char *toks[300];
    uint64_t lens[300];
    for (int i = 0; i < 256; i++)
        bytes[i] = (char)i, toks[i] = &bytes[i], lens[i] = 1;
    whisper_tokenizer *t = NULL;
    wgml_error err;
    CHECK_ERR("count", whisper_tokenizer_create(toks, lens, 256, 51865, "v", &t, &err), &err, WGML_ERR_FORMAT,
              "v: 256 BPE tokens", "50257 expected");
    CHECK_ERR("n_vocab", whisper_tokenizer_create(toks, lens, 256, 1000, "v", &t, &err), &err, WGML_ERR_FORMAT, "v: ",
              "1000 ids");
    assert_null(t);
    /* a full-size vocabulary missing a byte */
    const char **many = calloc(50257, sizeof *many);
    uint64_t *ml = calloc(50257, sizeof *ml);
    char (*store)[4] = calloc(50257, 4);
    for (int i = 0; i < 50257; i++) {
        if (i < 256) {
            many[i] = &bytes[i], ml[i] = 1;
        } else {
            store[i][0] = (char)('a' + i % 26), store[i][1] = (char)('a' + i / 26 % 26), store[i][2] = (char)('a' + i / 676 % 26);
            many[i] = store[i], ml[i] = 3;
        }
    }
    many[65] = &bytes[66]; /* 'A' missing: 'B' twice */
    CHECK_ERR("byte", whisper_tokenizer_create(many, ml, 50257, 51865, "v", &t, &err), &err, WGML_ERR_FORMAT,
              "single byte 0x41", NULL);
    many[65] = &bytes[65];
    assert_int_equal(whisper_tokenizer_create(many, ml, 50257, 51865, "v", &t, &err), WGML_OK);
    int n;
    int32_t *ids = encode(t, "abc xyz", 7, &n);
    char *back = decode(t, ids, n, 0);
    assert_string_equal(back, "abc xyz");
    free(back);
    free(ids);
    whisper_tokenizer_free(t);
    free(many);
    free(ml);
    free(store);

    /* a GGUF without the vocabulary */
    gguf_writer *w = gguf_writer_create();
    assert_int_equal(gguf_writer_set_u32(w, "whisper.vocab_size", 51865, &err), WGML_OK);
    assert_int_equal(gguf_writer_begin_memory(w, &err), WGML_OK);
    assert_int_equal(gguf_writer_finish(w, &err), WGML_OK);
    void *mem;
    size_t size;
    assert_int_equal(gguf_writer_take_memory(w, &mem, &size, &err), WGML_OK);
    gguf_writer_free(w);
    gguf_file *g;
    assert_int_equal(gguf_open_memory(mem, size, "nv.gguf", &g, &err), WGML_OK);
    gguf_own_bytes(g);
    CHECK_ERR("no tokens", whisper_tokenizer_load(g, &t, &err), &err, WGML_ERR_FORMAT, "nv.gguf", "whisper.tokens");
    gguf_close(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_specials),         cmocka_unit_test(test_suppress_lists),
        cmocka_unit_test(test_decode_manifests), cmocka_unit_test(test_decode_utf8),
        cmocka_unit_test(test_encode_gpt2_vectors), cmocka_unit_test(test_encode),
        cmocka_unit_test(test_create_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
