/*
 * test_g2p.c - English G2P for Kokoro (text/g2p.h): kokoro-js 1.2.1's
 * normalization, split and post-processing on tricky inputs (expected values
 * from kokoro.js/src/phonemize.js run under node), the join over a stand-in
 * backend, allocation failures, the espeak-ng backend's errors (missing,
 * failing, killed, early exit, large input, hung past its time limit), the
 * clean environment its processes get, and, with espeak-ng, every
 * sentence of ../shared/kokoro/g2p-en-us.tsv and g2p-en-gb.tsv and every pair
 * of g2p-kokoro-js-tests.json exactly.
 *
 * Without espeak-ng those last tests are skipped, or fail where
 * WGML_REQUIRE_SHARED is set.
 */
#include "core/alloc.h"
#include "core/error.h"
#include "testutil.h"
#include "text/g2p.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Expected values: kokoro.js/src/phonemize.js's normalize_text, split and
 * post-processing, run under node. */
static const struct {
    const char *in, *out;
} normalize_cases[] = {
    {"It costs $4.99.", "It costs 4 dollars and 99 cents."},
    {"£1.5 each", "1 pound and 50 pence each"},
    {"$1 and $1.01 and £1.01 and £0.5",
     "1 dollar and 1 dollar and 1 cent and 1 pound and 1 penny and 0 pounds and 50 pence"},
    {"$5 million", "5 million dollars"},
    {"$2.5 Billion and $3 thousand hundreds", "2 point 5 Billion dollars and 3 thousand dollars hundreds"},
    {"£3.001", "3 pounds and 1 penny"},
    {"$12345678901234567890.123456789012345678901", "12345678901234567890 dollars and 123456789012345680000 cents"},
    {"$7.5x", "7 dollars point 5x"},
    {"$7_", "$7_"},
    {"$1.2.3", "1 dollar and 20 cents point 3"},
    {"1984 1905 1900s 2005 2010 1099 1100 2000s 12345 1984s 1984st",
     "19 84 19 oh 5 19 hundreds 2005 20 10 1099 11 hundred 2000s 12345 19 84s 1984st"},
    {"7:30 10:05 12:00 12:30:45 13:30 0:30 9:60 1:05pm", "7 30 10 oh 5 12 o'clock 12:30:45 13:30 0:30 9:60 1:05pm"},
    {"1,000,000 and 1,2,3", "1000000 and 123"},
    {"3.14 and .5 and v1.2.3 and 1984.5", "3 point 1 4 and  point 5 and v1 point 2 point 3 and 1984 point 5"},
    {"10-20 and 3-a", "10 to 20 and 3-a"},
    {"10S 5s", "10 S 5s"},
    {"U.S.A. is big. e.g. the A.B.C", "U-S-A- is big. e-g- the A-B-C"},
    {"JFK's CDs X's Bs NASA's MTV'S", "JFK'S CD'S X's B'S NASA's MTV'S"},
    {"Dr. Smith, dr. smith, DR. Brown, Dr.Who", "Doctor Smith, dr. smith, Doctor Brown, Dr-Who"},
    {"Mr.X MR. Anderson MR. smith Ms. Ms MS. Carter Mrs. MRS. Wilson Mrs.",
     "MisterX Mister Anderson MR. smith Miss M'S Miss Carter Mrs Mrs Wilson Mrs"},
    {"etc. and etc. The ETC. etc.", "etc. and etc. The ETC. etc"},
    {"yeah Yeah! YEAH yea yeahs Yeahh", "ye'a Ye'a! Ye'a ye'a yeahs Yeahh"},
    {"こんにちは、世界！これは：はい？「」。；，", "こんにちは, 世界! これは: はい? 「」. ; ,"},
    {"a\t\tb  c   d", "a b  c   d"},
    {"x\n  \ny  z\r\n", "x\n\ny  z"},
    {"\xc2\xa0"
     "lead\xe2\x80\x83"
     "trail\xef\xbb\xbf"
     "",
     "lead trail"},
    {"‘Hi’ «a» “b” (c) [d] {e}", "'Hi' \"a\" \"b\" «c» [d] {e}"},
    {"éDr. Smith 5éS", "éDoctor Smith 5éS"},
    {"Mr. Mr. Mr.", "Mister Mister Mister"},
    {"The 1990s' best", "The 19 90s' best"},
    {"$100 hundred", "100 hundred dollars"},
    {"$1,000", "1000 dollars"},
    {"9:05:", "9:05:"},
    {":7:30", ":7:30"},
    {"a 7:30:", "a 7:30:"},
    {"5-10-15", "5 to 10 to 15"},
    {"2.5-3.5", "2 point 5 to 3 point 5"},
    {"$1 trillion", "1 trillion dollars"},
    {"US$5", "US5 dollars"},
    {"1st 2nd 10th", "1st 2nd 10th"},
    {"e.g. a.b.c. d", "e-g- a-b-c- d"},
};

static const struct {
    const char *in, *us, *gb;
} postprocess_cases[] = {
    {" kəkˈoːɹoʊ and kəkˈɔːɹəʊ ", "kˈoʊkəɹoʊ and kˈəʊkəɹəʊ", "kˈoʊkəɹoʊ and kˈəʊkəɹəʊ"},
    {"mʲu rxɬ", "mju ɹkl", "mju ɹkl"},
    {"wˈʌnhˈʌndɹɪd twoːhˈʌndɹɪd ɹhˈʌndɹɪd Xhˈʌndɹɪd", "wˈʌn hˈʌndɹɪd twoː hˈʌndɹɪd ɹ hˈʌndɹɪd Xhˈʌndɹɪd",
     "wˈʌn hˈʌndɹɪd twoː hˈʌndɹɪd ɹ hˈʌndɹɪd Xhˈʌndɹɪd"},
    {"dˈɑːlɚ z, bˈʌ z z. ə z", "dˈɑːlɚz, bˈʌzz. əz", "dˈɑːlɚz, bˈʌzz. əz"},
    {"ə z", "əz", "əz"},
    {"a zb z«", "a zbz«", "a zbz«"},
    {"nˈaɪnti nˈaɪntiː nˈaɪntii  nˈaɪnti", "nˈaɪndi nˈaɪntiː nˈaɪndii  nˈaɪndi", "nˈaɪnti nˈaɪntiː nˈaɪntii  nˈaɪnti"},
    {"\n  tɹˈiː \xe2\x80\xa8"
     "",
     "tɹˈiː", "tɹˈiː"},
};

/* "|" marks the punctuation spans */
static const struct {
    const char *in;
    const char *spans[16];
} split_cases[] = {
    {"Hello, world!", {"Hello", "|, ", "world", "|!"}},
    {"...a", {"|...", "a"}},
    {"a — b", {"a", "| — ", "b"}},
    {"«a» (b) x", {"|«", "a", "|» (", "b", "|) ", "x"}},
    {"a ,b", {"a", "| ,", "b"}},
    {"x \n. y  z", {"x", "| \n. ", "y  z"}},
    {"no punctuation here", {"no punctuation here"}},
    {"a…b¡c¿d{e}[f];g:h", {"a", "|…", "b", "|¡", "c", "|¿", "d", "|{", "e", "|}[", "f", "|];", "g", "|:", "h"}},
    {"\xe3\x80\x80"
     ",\xe3\x80\x80"
     "x",
     {"|\xe3\x80\x80"
      ",\xe3\x80\x80"
      "",
      "x"}},
};

/* ---- kokoro-js's steps, one at a time ---- */

static void test_normalize(void **state) {
    (void)state;
    int bad = 0;
    for (size_t k = 0; k < sizeof normalize_cases / sizeof normalize_cases[0]; k++) {
        char *out = NULL;
        wgml_error err;
        assert_int_equal(g2p_en_normalize(normalize_cases[k].in, &out, &err), WGML_OK);
        if (strcmp(out, normalize_cases[k].out)) {
            print_message("normalize(\"%s\")\n   gives \"%s\"\n  wanted \"%s\"\n", normalize_cases[k].in, out,
                          normalize_cases[k].out);
            bad++;
        }
        wgml_free(out);
    }
    assert_int_equal(bad, 0);
}

static void test_postprocess(void **state) {
    (void)state;
    int bad = 0;
    for (size_t k = 0; k < sizeof postprocess_cases / sizeof postprocess_cases[0]; k++) {
        for (int us = 0; us < 2; us++) {
            const char *want = us ? postprocess_cases[k].us : postprocess_cases[k].gb;
            char *out = NULL;
            wgml_error err;
            assert_int_equal(g2p_en_postprocess(postprocess_cases[k].in, us, &out, &err), WGML_OK);
            if (strcmp(out, want)) {
                print_message("postprocess(\"%s\", %s)\n   gives \"%s\"\n  wanted \"%s\"\n", postprocess_cases[k].in,
                              us ? "a" : "b", out, want);
                bad++;
            }
            wgml_free(out);
        }
    }
    assert_int_equal(bad, 0);
}

static void test_split(void **state) {
    (void)state;
    for (size_t k = 0; k < sizeof split_cases / sizeof split_cases[0]; k++) {
        const char *in = split_cases[k].in;
        g2p_span *spans;
        size_t n;
        wgml_error err;
        assert_int_equal(g2p_en_split(in, &spans, &n, &err), WGML_OK);
        size_t want = 0;
        while (want < 16 && split_cases[k].spans[want])
            want++;
        assert_int_equal(n, want);
        size_t off = 0;
        for (size_t i = 0; i < n; i++) {
            const char *w = split_cases[k].spans[i];
            int punct = w[0] == '|';
            assert_int_equal(spans[i].punct, punct);
            assert_int_equal(spans[i].off, off);
            assert_int_equal(spans[i].len, strlen(w + punct));
            assert_memory_equal(in + spans[i].off, w + punct, spans[i].len);
            off += spans[i].len;
        }
        assert_int_equal(off, strlen(in));
        wgml_free(spans);
    }
}

static void test_bad_text(void **state) {
    (void)state;
    static const char *bad[] = {"\xff", "caf\xc3", "a\xc0\xaf", "\xed\xa0\x80 surrogate", "\xf4\x90\x80\x80"};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        char *out = (char *)"untouched";
        wgml_error err;
        assert_int_equal(g2p_en_normalize(bad[k], &out, &err), WGML_ERR_INVALID_ARGUMENT);
        assert_null(out);
        assert_non_null(strstr(err.message, "not valid UTF-8"));
    }
    assert_int_equal(g2p_en_american("en-us"), 1);
    assert_int_equal(g2p_en_american("a"), 1);
    assert_int_equal(g2p_en_american("en-gb"), 0);
    assert_int_equal(g2p_en_american("b"), 0);
    assert_int_equal(g2p_en_american("en"), -1);
    assert_int_equal(g2p_en_american(NULL), -1);
}

/* ---- the G2P over a stand-in backend: pieces upper-cased ---- */

typedef struct {
    int calls, freed, fail, bad_utf8, word_calls, fail_words;
    char lang[8];
    char seen[1024];
} fake;

static wgml_status fake_pieces(void *user, const char *lang, const char *const *pieces, size_t n, char **out,
                               wgml_error *err) {
    fake *f = user;
    f->calls++;
    snprintf(f->lang, sizeof f->lang, "%s", lang);
    if (f->fail) return wgml_fail(err, WGML_ERR_IO, "the stand-in failed");
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(pieces[i]), used = strlen(f->seen);
        snprintf(f->seen + used, sizeof f->seen - used, "[%s]", pieces[i]);
        out[i] = wgml_malloc(len + 1);
        if (!out[i]) {
            for (size_t k = 0; k < i; k++)
                wgml_free(out[k]), out[k] = NULL;
            return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "stand-in out of memory");
        }
        for (size_t c = 0; c <= len; c++) {
            char ch = pieces[i][c];
            out[i][c] = ch >= 'a' && ch <= 'z' ? (char)(ch - 32) : ch;
        }
        if (f->bad_utf8 && len) out[i][0] = (char)0xff;
    }
    return WGML_OK;
}

static void fake_free(void *user) { ((fake *)user)->freed++; }

/* Each word alone: upper-cased with a stress mark in front, as espeak-ng says a word on its own. */
static wgml_status fake_words(void *user, const char *lang, const char *const *words, size_t n, char **out,
                              wgml_error *err) {
    fake *f = user;
    (void)lang;
    f->word_calls++;
    if (f->fail_words) return wgml_fail(err, WGML_ERR_FORMAT, "the stand-in cannot say words alone");
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(words[i]);
        if (!(out[i] = wgml_malloc(len + 3))) {
            for (size_t k = 0; k < i; k++)
                wgml_free(out[k]), out[k] = NULL;
            return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "stand-in out of memory");
        }
        memcpy(out[i], "\xcb\x88", 2); /* ˈ */
        for (size_t c = 0; c <= len; c++) {
            char ch = words[i][c];
            out[i][c + 2] = ch >= 'a' && ch <= 'z' ? (char)(ch - 32) : ch;
        }
    }
    return WGML_OK;
}

/* The stand-in that runs words together as espeak-ng does ("of the":
 * "ʌvðə"): after a word of two letters or fewer its space is dropped. */
static wgml_status fake_merging(void *user, const char *lang, const char *const *pieces, size_t n, char **out,
                                wgml_error *err) {
    wgml_status st = fake_pieces(user, lang, pieces, n, out, err);
    for (size_t i = 0; !st && i < n; i++) {
        char *q = out[i];
        size_t word = 0;
        for (const char *p = out[i]; *p; p++) {
            if (*p == ' ' && word > 0 && word <= 2) {
                word = 0;
                continue;
            }
            word = *p == ' ' ? 0 : word + 1;
            *q++ = *p;
        }
        *q = '\0';
    }
    return st;
}

static wgml_g2p *open_fake(fake *f) {
    memset(f, 0, sizeof *f);
    wgml_g2p_backend be = {"stand-in", fake_pieces, fake_free, f, NULL};
    wgml_g2p *g = NULL;
    wgml_error err;
    assert_int_equal(wgml_g2p_open(&be, &g, &err), WGML_OK);
    return g;
}

static void test_join(void **state) {
    (void)state;
    fake f;
    wgml_g2p *g = open_fake(&f);
    char *out = NULL;
    wgml_error err;
    assert_int_equal(wgml_g2p_phonemize(g, "en-us", "  Hello, world! (Yes) it's $5.  ", &out, &err), WGML_OK);
    assert_string_equal(out, "HELLO, WORLD! «YES» IT'S 5 DOLLARS.");
    assert_string_equal(f.seen, "[Hello][world][Yes][it's 5 dollars]");
    assert_string_equal(f.lang, "en-us");
    wgml_free(out);

    f.seen[0] = '\0';
    assert_int_equal(wgml_g2p_phonemize(g, "en-gb", "Mr. Smith", &out, &err), WGML_OK);
    assert_string_equal(out, "MISTER SMITH");
    assert_string_equal(f.lang, "en-gb");
    wgml_free(out);

    /* nothing to phonemize: the backend is not called */
    int calls = f.calls;
    assert_int_equal(wgml_g2p_phonemize(g, "a", " ...?! ", &out, &err), WGML_OK);
    assert_string_equal(out, "...?!");
    wgml_free(out);
    assert_int_equal(wgml_g2p_phonemize(g, "b", "", &out, &err), WGML_OK);
    assert_string_equal(out, "");
    wgml_free(out);
    assert_int_equal(f.calls, calls);

    /* errors: language, UTF-8, the backend's own, its output */
    out = (char *)"untouched";
    assert_int_equal(wgml_g2p_phonemize(g, "de", "Hallo", &out, &err), WGML_ERR_INVALID_ARGUMENT);
    assert_null(out);
    assert_non_null(strstr(err.message, "'de'"));
    assert_int_equal(wgml_g2p_phonemize(g, "es", "caf\xc3", &out, &err), WGML_ERR_INVALID_ARGUMENT);
    assert_int_equal(wgml_g2p_phonemize(g, "en-us", "caf\xc3", &out, &err), WGML_ERR_INVALID_ARGUMENT);
    assert_int_equal(wgml_g2p_phonemize(NULL, "en-us", "x", &out, &err), WGML_ERR_INVALID_ARGUMENT);
    f.fail = 1;
    assert_int_equal(wgml_g2p_phonemize(g, "en-us", "Hello.", &out, &err), WGML_ERR_IO);
    assert_string_equal(err.message, "the stand-in failed");
    f.fail = 0;
    f.bad_utf8 = 1;
    assert_int_equal(wgml_g2p_phonemize(g, "en-us", "Hello.", &out, &err), WGML_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "stand-in's output for 'Hello'"));
    assert_null(out);

    assert_int_equal(f.freed, 0);
    wgml_g2p_free(g);
    assert_int_equal(f.freed, 1);
    wgml_g2p_free(NULL);
}

/* The words of text in phonemes ph, as "word=phonemes|..." for comparing. */
static char *word_list(const char *text, const char *ph, const wgml_g2p_word *w, size_t n) {
    static char buf[4096];
    size_t at = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < n; i++)
        at += (size_t)snprintf(buf + at, sizeof buf - at, "%s%.*s=%.*s", i ? "|" : "", (int)w[i].text_len,
                               text + w[i].text_off, (int)w[i].ph_len, ph + w[i].ph_off);
    return buf;
}

static void expect_words(wgml_g2p *g, const char *lang, const char *text, const char *want_ph, const char *want) {
    char *out = NULL;
    wgml_g2p_word *w = NULL;
    size_t n = 0;
    wgml_error err;
    if (wgml_g2p_phonemize_words(g, lang, text, &out, &w, &n, &err)) fail_msg("'%s': %s", text, err.message);
    if (want_ph) assert_string_equal(out, want_ph);
    assert_string_equal(word_list(text, out, w, n), want);
    wgml_free(out);
    wgml_free(w);
}

/* Word places over the stand-in: the text's words, whatever normalization
 * made of them, with their phonemes; words run together split apart; the
 * same from the letters when the phonemizer cannot say words alone. */
static void test_words(void **state) {
    (void)state;
    fake f;
    memset(&f, 0, sizeof f);
    wgml_g2p_backend be = {"stand-in", fake_pieces, fake_free, &f, fake_words};
    wgml_g2p *g = NULL;
    wgml_error err;
    assert_int_equal(wgml_g2p_open(&be, &g, &err), WGML_OK);
    const char *t = "  Hello, world! (Yes) it's $5.  ";
    expect_words(g, "en-us", t, "HELLO, WORLD! «YES» IT'S 5 DOLLARS.",
                 "Hello=HELLO|world=WORLD|Yes=YES|it's=IT'S|$5=5 DOLLARS");
    assert_int_equal(f.word_calls, 1);
    /* where they are in the text */
    char *out;
    wgml_g2p_word *w;
    size_t n;
    assert_int_equal(wgml_g2p_phonemize_words(g, "en-us", t, &out, &w, &n, &err), WGML_OK);
    assert_int_equal(n, 5);
    assert_int_equal(w[0].text_off, 2);
    assert_int_equal(w[2].text_off, 17);
    assert_int_equal(w[4].text_off, 27);
    assert_int_equal(w[4].text_len, 2);
    wgml_free(out);
    wgml_free(w);
    /* the normalization's rewrites, each with the text word it came from */
    expect_words(g, "en-gb",
                 "It costs $4.99. Dr. Smith paid \xc2\xa3"
                 "1.5 in 1984, at 7:30 (U.S.A.).",
                 NULL,
                 "It=IT|costs=COSTS|$4.99=4 DOLLARS AND 99 CENTS|Dr=DOCTOR|Smith=SMITH|paid=PAID|"
                 "\xc2\xa3"
                 "1.5=1 POUND AND 50 PENCE|in=IN|1984=19 84|at=AT|7:30=7 30|U.S.A=U-S-A");
    /* nothing to say: no words, no call */
    int calls = f.word_calls;
    expect_words(g, "en-us", " ...?! ", "...?!", "");
    expect_words(g, "en-us", "", "", "");
    assert_int_equal(f.word_calls, calls);
    wgml_g2p_free(g);

    /* words run together: each placed inside the phoneme word they share */
    memset(&f, 0, sizeof f);
    be.phonemize_pieces = fake_merging;
    assert_int_equal(wgml_g2p_open(&be, &g, &err), WGML_OK);
    expect_words(g, "en-us", "In the end of it, we go.", "INTHE END OFIT, WEGO.",
                 "In=IN|the=THE|end=END|of=OF|it=IT|we=WE|go=GO");
    /* and from their letters when the phonemizer cannot say them alone */
    f.fail_words = 1;
    expect_words(g, "en-us", "In the end of it, we go.", "INTHE END OFIT, WEGO.",
                 "In=IN|the=THE|end=END|of=OF|it=IT|we=WE|go=GO");
    wgml_g2p_free(g);
    be.phonemize_words = NULL;
    assert_int_equal(wgml_g2p_open(&be, &g, &err), WGML_OK);
    expect_words(g, "en-us", "Hello there, world.", "HELLO THERE, WORLD.", "Hello=HELLO|there=THERE|world=WORLD");
    /* the phonemizer's own failure is the call's */
    f.fail = 1;
    out = (char *)"untouched";
    w = (wgml_g2p_word *)&n;
    assert_int_equal(wgml_g2p_phonemize_words(g, "en-us", "Hello.", &out, &w, &n, &err), WGML_ERR_IO);
    assert_null(out);
    assert_null(w);
    assert_int_equal(n, 0);
    assert_int_equal(wgml_g2p_phonemize_words(g, "en-us", "Hello.", &out, NULL, &n, &err), WGML_ERR_INVALID_ARGUMENT);
    wgml_g2p_free(g);
}

/* The alignment itself: espeak-ng's "ɪnðə bɪɡˈɪnɪŋ ʌvðə jˈɪɹ" against the
 * words said alone (stressed), and its fallbacks. */
static void test_align(void **state) {
    (void)state;
    const char *alone[] = {"ˈɪn", "ðˈə", "bɪɡˈɪnɪŋ", "ˈʌv", "ðˈə", "jˈɪɹ"};
    int labels[20];
    wgml_error err;
    assert_int_equal(g2p_align_piece("ɪnðə bɪɡˈɪnɪŋ ʌvðə jˈɪɹ", alone, 6, labels, 20, &err), WGML_OK);
    const int want[20] = {0, 0, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 4, 4, 5, 5, 5, 5};
    for (int i = 0; i < 20; i++)
        assert_int_equal(labels[i], want[i]);
    /* said differently alone ("to": tˈuː, in the piece tə) */
    const char *alone2[] = {"wˈɔnt", "tˈuː", "ɡˈoʊ"};
    assert_int_equal(g2p_align_piece("wˈɔnt tə ɡˌoʊ", alone2, 3, labels, 11, &err), WGML_OK);
    const int want2[11] = {0, 0, 0, 0, 0, 1, 1, 2, 2, 2, 2};
    for (int i = 0; i < 11; i++)
        assert_int_equal(labels[i], want2[i]);
    /* nothing said alone: in proportion (equal shares) */
    const char *empty[] = {"", ""};
    assert_int_equal(g2p_align_piece("abcd", empty, 2, labels, 4, &err), WGML_OK);
    assert_int_equal(labels[0], 0);
    assert_int_equal(labels[1], 0);
    assert_int_equal(labels[2], 1);
    assert_int_equal(labels[3], 1);
    /* wrong counts */
    assert_int_equal(g2p_align_piece("abcd", empty, 2, labels, 3, &err), WGML_ERR_INVALID_ARGUMENT);
    assert_int_equal(g2p_align_piece("abcd", empty, 0, labels, 4, &err), WGML_ERR_INVALID_ARGUMENT);
}

/* Every allocation failing in turn: an out-of-memory error, nothing leaked,
 * the backend's user data freed when the open fails; then the right result. */
static void alloc_fail_loop(int espeak, const char *text, const char *want, const char *want_words) {
    int done = 0;
    for (long n = 0; !done && n < 10000; n++) {
        long live = wgml_alloc_live();
        fake f;
        memset(&f, 0, sizeof f);
        wgml_g2p *g = NULL;
        wgml_error err;
        wgml_alloc_fail_after(n);
        wgml_status st;
        if (espeak) {
            st = wgml_g2p_open_espeak(NULL, &g, &err);
        } else {
            wgml_g2p_backend be = {"stand-in", fake_pieces, fake_free, &f, fake_words};
            st = wgml_g2p_open(&be, &g, &err);
            if (st) assert_int_equal(f.freed, 1);
        }
        char *out = NULL;
        wgml_g2p_word *w = NULL;
        size_t nw = 0;
        if (!st) st = wgml_g2p_phonemize_words(g, "en-us", text, &out, &w, &nw, &err);
        wgml_alloc_fail_after(-1);
        if (st) {
            assert_int_equal(st, WGML_ERR_OUT_OF_MEMORY);
            assert_null(out);
            assert_null(w);
        } else {
            assert_string_equal(out, want);
            assert_string_equal(word_list(text, out, w, nw), want_words);
            done = 1;
        }
        wgml_free(out);
        wgml_free(w);
        wgml_g2p_free(g);
        assert_int_equal(wgml_alloc_live(), live);
    }
    assert_true(done);
}

static void test_alloc_fail(void **state) {
    (void)state;
    alloc_fail_loop(0, "It costs $4.99 (in 1984), Mr. Smith.",
                    "IT COSTS 4 DOLLARS AND 99 CENTS «IN 19 84», MISTER SMITH.",
                    "It=IT|costs=COSTS|$4.99=4 DOLLARS AND 99 CENTS|in=IN|1984=19 84|Mr=MISTER|Smith=SMITH");
}

/* ---- the espeak-ng backend ---- */

/* The G2P over espeak-ng; skips the test without it (fails where
 * WGML_REQUIRE_SHARED is set). */
static wgml_g2p *open_espeak(void) {
    wgml_g2p *g = NULL;
    wgml_error err;
    if (wgml_g2p_open_espeak(NULL, &g, &err) == WGML_OK) return g;
    const char *req = getenv("WGML_REQUIRE_SHARED");
    if (req && *req) fail_msg("espeak-ng is needed (WGML_REQUIRE_SHARED is set): %s", err.message);
    print_message("skipped: %s\n", err.message);
    skip();
    return NULL;
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* The words of a sentence of the shared vectors: one per run of the text
 * between spaces that has a letter or digit (all ASCII there; their
 * normalization never merges two runs into one word), in order, and together they hold every phoneme that
 * is not a space or punctuation. */
static int words_cover(const char *text, const char *ph, const wgml_g2p_word *w, size_t n) {
    size_t runs = 0;
    for (const char *p = text; *p;) {
        while (*p == ' ')
            p++;
        if (!*p) break;
        int word = 0;
        for (; *p && *p != ' '; p++)
            word |= (*p >= '0' && *p <= '9') || ((*p | 32) >= 'a' && (*p | 32) <= 'z');
        runs += word;
    }
    if (n != runs) return 0;
    size_t k = 0;
    for (size_t i = 0; ph[i];) {
        const unsigned char c = (unsigned char)ph[i];
        size_t len = c < 0x80 ? 1 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
        int punct = strchr(" ;:,.!?\"()", c) != NULL || (c == 0xe2 && (unsigned char)ph[i + 1] == 0x80) ||
                    (c == 0xc2 && ((unsigned char)ph[i + 1] == 0xab || (unsigned char)ph[i + 1] == 0xbb));
        while (k < n && i >= w[k].ph_off + w[k].ph_len)
            k++;
        if (!punct && (k == n || i < w[k].ph_off)) return 0;
        i += len;
    }
    for (size_t i = 1; i < n; i++)
        if (w[i].ph_off < w[i - 1].ph_off + w[i - 1].ph_len || w[i].text_off < w[i - 1].text_off + w[i - 1].text_len)
            return 0;
    return 1;
}

static void check_tsv(const char *rel, const char *lang) {
    wgml_g2p *g = open_espeak();
    size_t size;
    char *data = (char *)tu_read_file(tu_shared(rel), &size);
    assert_non_null(data);
    int total = 0, ok = 0, words_total = 0;
    double t0 = now_ms();
    for (char *line = data; *line;) {
        char *end = strchr(line, '\n');
        if (end) *end = '\0';
        char *tab = strchr(line, '\t');
        if (tab) {
            *tab = '\0';
            char *out = NULL;
            wgml_error err;
            wgml_g2p_word *w = NULL;
            size_t nw = 0;
            wgml_status st = wgml_g2p_phonemize_words(g, lang, line, &out, &w, &nw, &err);
            total++;
            if (st) {
                print_message("%s: '%s': %s\n", rel, line, err.message);
            } else if (strcmp(out, tab + 1)) {
                print_message("%s: '%s'\n   gives '%s'\n  wanted '%s'\n", rel, line, out, tab + 1);
            } else if (!words_cover(line, out, w, nw)) {
                print_message("%s: '%s'\n   words %s\n", rel, line, word_list(line, out, w, nw));
            } else {
                ok++;
            }
            words_total += (int)nw;
            wgml_free(out);
            wgml_free(w);
        }
        if (!end) break;
        line = end + 1;
    }
    double ms = now_ms() - t0;
    print_message("%s (%s): %d/%d sentences match, with %d words placed; %.0f ms, %.1f ms a sentence\n", rel, lang, ok,
                  total, words_total, ms, total ? ms / total : 0.0);
    free(data);
    wgml_g2p_free(g);
    assert_true(total >= 42);
    assert_int_equal(ok, total);
}

/* Kokoro's other languages (es, fr-fr, hi, it, pt-br): the official pipeline's phonemes, made
 * by misaki's EspeakG2P rules (as kokoro's KPipeline uses them) over phonemizer 3.3's espeak
 * backend and Debian's libespeak-ng 1.51, run outside the repository on these sentences; one
 * more sentence differs and is left out (docs/kokoro.md: a lone unstressed Hindi word, "kya?",
 * which espeak-ng's program stresses and its library call does not). */
static const struct {
    const char *lang, *text, *want;
} lang_cases[] = {
    {"es", "Hola, ¿cómo estás? Me llamo Juan.",
     "ˈola, ¿kˈomo estˈas? me ʎˈamo xwˈan."},
    {"es", "¡Qué día tan bonito! (Dijo ella, sonriendo.)",
     "¡kˈe ðˈia tˈam bonˈito! (dˈixo ˈeʎa, sˌonriˈɛndo.)"},
    {"es", "El tren sale a las 10:30 desde la estación «Atocha».",
     "el tɾˈen sˈale a las ðjˈɛθ:tɾˈAnta ðˌesðe la ˌestaθjˈon “atˈoʧa”."},
    {"es", "—No sé —respondió—, quizá mañana… o pasado.",
     "—nˈo sˈe —rˌespondjˈo—, kiθˈa maɲˈana… o pasˈaðo."},
    {"es", "Compré 3 libros, 2 cuadernos y un lápiz por 15 euros.",
     "kompɾˈe tɾˈes lˈiβɾos, dˈos kwaðˈeɾnos i ˈun lˈapiθ poɾ kˈinθe ˈeʊɾos."},
    {"es", "La pizza y el whisky son populares en Madrid; el fútbol también.",
     "la pˈiʦa i el wˈiski sˈom pˌopulˈaɾes en maðɾˈid; el fˈutβol tambjˈen."},
    {"fr-fr", "Bonjour! Je m’appelle Marie, et toi?",
     "bɔ̃ʒˈuʁ! ʒə mapˈɛl maʁˈi, e twˈa?"},
    {"fr-fr", "C'est une belle journée : le soleil brille, les oiseaux chantent.",
     "sɛt yn bˈɛl ʒuʁnˈe : lə solˈɛj bʁˈij, lez wazˈo ʃˈɑ̃t."},
    {"fr-fr", "« Où es-tu ? » demanda-t-il, inquiet.",
     "“ u ɛtˈy ? ” dəmɑ̃dˈatˈil, ɛ̃kjˈɛ."},
    {"fr-fr", "Il a acheté 25 pommes (et deux poires) au marché.",
     "il a aʃtˈe vɛ̃tsˈɛ̃k pˈɔm (e dˈø pwˈaʁ) o maʁʃˈe."},
    {"fr-fr", "Les enfants jouent dans le jardin; leurs parents les regardent...",
     "lez ɑ̃fˈɑ̃ ʒw dɑ̃ lə ʒaʁdˈɛ̃; lœʁ paʁˈɑ̃ le ʁəɡˈaʁd..."},
    {"fr-fr", "J'ai vu un week-end à New York — incroyable!",
     "ʒe vˈy œ̃ wˈiːkˈɛnd a njˈuː jˈɔːk — ɛ̃kʁwajˈabl!"},
    {"hi", "नमस्ते, आप कैसे हैं?",
     "nəmˈʌsteː, ˌaːp kˈɛːseː hɛ̃?"},
    {"hi", "मेरा नाम राम है। मैं दिल्ली में रहता हूँ।",
     "mˌeːɾaː nˈaːm ɾˈaːm hɛː mɛ̃ dˈɪlli mẽː ɾˈʌhətˌaː hũ"},
    {"hi", "आज मौसम बहुत अच्छा है, चलो बाहर चलें!",
     "ˈaːɟ mˈɔːsəm bˈʌhʊt ˈʌcʰcʰaː hɛː, cˈʌloː bˈaːhəɾ cˈʌlẽː!"},
    {"hi", "उसने कहा: \"मैं कल आऊँगा\"।",
     "ˈʊsnˌeː kˈʌhaː: \"mɛ̃ kˈʌl aːˈunɡaː\"pˈuːrnwɪɾˈaːm"},
    {"hi", "भारत की जनसंख्या 140 करोड़ से अधिक है।",
     "bʰˈaːɾət ki ɟˌənəsˈʌŋkʰjaː ˈeːksˈɔː cˈaːlis kəɾˈoːr. seː ˈʌdʰɪk hɛː"},
    {"it", "Ciao, come stai? Oggi è una bella giornata.",
     "ʧˈao, kˌome stˈaj? ˈɔʤːɪ e ˌʊna bˈɛlla ʤornˈata."},
    {"it", "Mi chiamo Giuseppe (ma tutti mi chiamano Peppe).",
     "mɪ kjˈamo ʤʊzˈɛpːe (ma tˈutːɪ mɪ kjˈamano pˈɛpːe)."},
    {"it", "«Dove vai?» chiese lei; lui non rispose...",
     "“dˈove vˈaj?” kjˈɛze lˈɛi; lˌʊi non rispˈoze..."},
    {"it", "Ho comprato 12 uova, del pane e un po' di formaggio.",
     "o komprˈato dˈodiʧɪ wˈɔva, del pˈane e ʊn pˈo dɪ formˈaʤːo."},
    {"it", "Lo sport più amato è il calcio: la Juventus vince spesso!",
     "lo spˈɔrt pjʊ amˈato e il kˈalʧo: la jʊvˈɛntʊs vˈinʧe spˈeSo!"},
    {"it", "Perché la pizza napoletana è così buona?",
     "perkˌe la pˈiʦːa napoletˈana e kozˈi bʊˈɔna?"},
    {"pt-br", "Olá, tudo bem? Eu moro em São Paulo.",
     "olˈa, tˈudʊ bˈAŋ? eʊ mˈɔɾw ˈAŋ sɐ̃ʊ̃ pˈWlʊ."},
    {"pt-br", "Você quer um café? (Eu prefiro chá.)",
     "vosˌe kˈɛɾ ũŋ kafˈɛ? (eʊ prˌefˈiɾʊ ʃˈa.)"},
    {"pt-br", "O jogo começa às 16h — não se atrase!",
     "ʊ ʒˈoɡʊ kˌomˈɛs aːs dˌezesˈAz aɡˈa — nˌɐ̃ʊ̃ sj ˌatrˈazy!"},
    {"pt-br", "Ela comprou 7 livros; ele, apenas 2...",
     "ˌɛlæ komprˈow sˈɛʧy lˈivrʊs; ˈely, ˌapˈenæs dˈoɪs..."},
    {"pt-br", "A cidade é linda: praias, montanhas e “muita” alegria.",
     "a sˌidˈaʤj ɛ lˈiŋdæ: prˈIæs, mˌoŋtˈɐ̃ɲæz ˈɛ “mwˈiŋtæ” ˌaleɡrˈiæ."},
    {"pt-br", "Não sei... talvez amanhã, ou depois de amanhã.",
     "nˌɐ̃ʊ̃ sˈA... tWvˈez ˌæmɐ̃ɲˈɐ̃, ow depˈoɪz ʤj ˌæmɐ̃ɲˈɐ̃."},
    {"es", "¿Escuchas a The Beatles o a Queen?",
     "¿eskˈuʧas a tˈe βeˈatles o a kˈeen?"},
    {"es", "...y entonces, ¡boom!",
     "...i entˈonθes, ¡bˈoom!"},
    {"es", "«¡Vamos!»",
     "“¡bˈamos!”"},
    {"es", "¿?",
     "¿?"},
    {"es", "  Hola   mundo  ",
     "ˈola mˈundo"},
    {"fr-fr", "(Bonjour.)",
     "(bɔ̃ʒˈuʁ.)"},
    {"fr-fr", "Le software et le hardware, c'est du jargon anglais.",
     "lə sˈɒftweə e lə hˈɑːdweə, sɛ dy ʒaʁɡˈɔ̃ ɑ̃ɡlˈɛ."},
    {"fr-fr", "Il est 8h15 ; on part ?",
     "il ɛ yˈit ˈaʃ kˈɛ̃z ; ɔ̃ pˈaʁ ?"},
    {"it", "Il mio computer è un MacBook, e il tuo?",
     "il mˌio kompjˈuter e ʊn mˈak bˈɔok, e il tˈuo?"},
    {"it", "[Nota: vedi sopra] {Fine}",
     "[nˈɔta: vˈedɪ sˈopra] {fˈine}"},
    {"pt-br", "Eu adoro rock and roll!",
     "eʊ ˌadˈɔɾʊ xˈɔk ˈɐ̃ŋd xˈol!"},
    {"pt-br", "\"Sim\", disse ele.",
     "\"sˈiŋ\", ʤˈisj ˈely."},
    {"hi", "मुझे क्रिकेट पसंद है, खासकर IPL.",
     "mˌʊɟʰeː kɾˈɪkɪt pəsˈʌnd hɛː, kʰˈaːsəkˌəɾ ˈI pˈiː ˈɛl."},
};

static void test_languages(void **state) {
    (void)state;
    wgml_g2p *g = open_espeak();
    int ok = 0, n = (int)(sizeof lang_cases / sizeof lang_cases[0]);
    for (int i = 0; i < n; i++) {
        char *out = NULL;
        wgml_error err;
        wgml_status st = wgml_g2p_phonemize(g, lang_cases[i].lang, lang_cases[i].text, &out, &err);
        if (st) print_message("%s '%s': %s\n", lang_cases[i].lang, lang_cases[i].text, err.message);
        else if (strcmp(out, lang_cases[i].want))
            print_message("%s '%s'\n   gives '%s'\n  wanted '%s'\n", lang_cases[i].lang, lang_cases[i].text, out,
                          lang_cases[i].want);
        else ok++;
        wgml_free(out);
    }
    print_message("%d/%d sentences in es, fr-fr, hi, it, pt-br match the official G2P\n", ok, n);
    assert_int_equal(ok, n);
    /* aliases, and a language Kokoro does not speak */
    char *a = NULL, *b = NULL;
    wgml_error err;
    assert_int_equal(wgml_g2p_phonemize(g, "e", "Hola.", &a, &err), WGML_OK);
    assert_int_equal(wgml_g2p_phonemize(g, "es", "Hola.", &b, &err), WGML_OK);
    assert_string_equal(a, b);
    wgml_free(a), wgml_free(b);
    assert_int_equal(wgml_g2p_phonemize(g, "de", "Hallo.", &a, &err), WGML_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "pt-br"));
    wgml_g2p_free(g);
}

/* The official pipeline's steps on a backend that answers with fixed espeak-ng output: the marks
 * (at the start, inside, at the end, alone), the clean-up of each piece (clause lines, doubled
 * spaces, language switch flags with their ties), the ties turned into Kokoro's symbols (within
 * a phoneme only), hyphens, and the parentheses that travel as « ». */
static wgml_status fake_lang_pieces(void *user, const char *lang, const char *const *pieces, size_t n, char **out,
                                    wgml_error *err) {
    (void)user, (void)err;
    assert_string_equal(lang, "it");
    for (size_t i = 0; i < n; i++) {
        const char *p = pieces[i];
        const char *r = !strcmp(p, "uno") ? "ˈuno"
                        : !strcmp(p, "ciao bella") ? "t^ʃˈao\nbˈɛl-la"
                        : !strcmp(p, "due") ? "d^ʒu  (^e^n)t^sˈu(^i^t)"
                        : !strcmp(p, "tre") ? "t ^ʃɾe"
                                            : "?";
        out[i] = wgml_strdup(r);
    }
    return WGML_OK;
}

static void test_lang_pipeline(void **state) {
    (void)state;
    const g2p_lang *it = g2p_lang_find("i");
    assert_non_null(it);
    assert_string_equal(it->code, "it");
    assert_int_equal(it->english, -1);
    assert_int_equal(g2p_lang_find("fr")->english, -1);
    assert_int_equal(g2p_lang_find("b")->english, 0);
    assert_null(g2p_lang_find("xx"));
    static const struct {
        const char *in, *want;
    } cases[] = {
        {"uno", "ˈuno"},
        {"¿uno?", "¿ˈuno?"},                                       /* a mark at the start and at the end */
        {"uno, ciao bella; due", "ˈuno, ʧˈao bˈɛlla; ʤu ʦˈu"},     /* inside; clause lines; flags; ties */
        {"(uno) tre", "(ˈuno) t ʃɾe"}, /* parentheses as « »; a tie after a space joins nothing */
        {"«uno»", "“ˈuno”"},                                        /* angle quotes become curly ones */
        {"...", "..."},                                            /* alone */
        {"uno , , due!!", "ˈuno , , ʤu ʦˈu!!"},                      /* a run of marks and spaces, kept as it is */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *out = NULL;
        wgml_error err;
        assert_int_equal(g2p_espeak_official(it, cases[i].in, fake_lang_pieces, NULL, &out, &err), WGML_OK);
        if (strcmp(out, cases[i].want)) print_message("'%s' gives '%s', wanted '%s'\n", cases[i].in, out, cases[i].want);
        assert_string_equal(out, cases[i].want);
        wgml_free(out);
    }
}

static void test_tsv_en_us(void **state) {
    (void)state;
    check_tsv("kokoro/g2p-en-us.tsv", "en-us");
}

static void test_tsv_en_gb(void **state) {
    (void)state;
    check_tsv("kokoro/g2p-en-gb.tsv", "en-gb");
}

/* A JSON string at *p (after optional white space), decoded to UTF-8 in a
 * malloc'ed buffer; NULL when there is none. */
static void skip_ws(const char **p) {
    while (**p == ' ' || **p == '\n' || **p == '\r' || **p == '\t')
        (*p)++;
}

static int hex4(const char *s, unsigned *v) {
    *v = 0;
    for (int i = 0; i < 4; i++) {
        char c = s[i];
        unsigned d = c >= '0' && c <= '9'   ? (unsigned)(c - '0')
                     : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
                     : c >= 'A' && c <= 'F' ? (unsigned)(c - 'A' + 10)
                                            : 16u;
        if (d > 15) return 0;
        *v = *v << 4 | d;
    }
    return 1;
}

static char *json_string(const char **p) {
    skip_ws(p);
    if (**p != '"') return NULL;
    const char *s = ++*p;
    char *out = malloc(strlen(s) * 2 + 1), *o = out;
    if (!out) return NULL;
    for (; *s && *s != '"'; s++) {
        if (*s != '\\') {
            *o++ = *s;
            continue;
        }
        s++;
        unsigned cp;
        switch (*s) {
        case 'n': *o++ = '\n'; break;
        case 't': *o++ = '\t'; break;
        case 'r': *o++ = '\r'; break;
        case 'b': *o++ = '\b'; break;
        case 'f': *o++ = '\f'; break;
        case 'u':
            if (!hex4(s + 1, &cp)) goto bad;
            s += 4;
            if (cp >= 0xD800 && cp < 0xDC00 && s[1] == '\\' && s[2] == 'u') {
                unsigned lo;
                if (!hex4(s + 3, &lo) || lo < 0xDC00 || lo > 0xDFFF) goto bad;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                s += 6;
            }
            if (cp < 0x80) {
                *o++ = (char)cp;
            } else if (cp < 0x800) {
                *o++ = (char)(0xC0 | cp >> 6), *o++ = (char)(0x80 | (cp & 0x3F));
            } else if (cp < 0x10000) {
                *o++ = (char)(0xE0 | cp >> 12), *o++ = (char)(0x80 | (cp >> 6 & 0x3F)),
                *o++ = (char)(0x80 | (cp & 0x3F));
            } else {
                *o++ = (char)(0xF0 | cp >> 18), *o++ = (char)(0x80 | (cp >> 12 & 0x3F));
                *o++ = (char)(0x80 | (cp >> 6 & 0x3F)), *o++ = (char)(0x80 | (cp & 0x3F));
            }
            break;
        case '\0': goto bad;
        default: *o++ = *s; break; /* \" \\ \/ */
        }
    }
    if (*s != '"') goto bad;
    *o = '\0';
    *p = s + 1;
    return out;
bad:
    free(out);
    return NULL;
}

/* g2p-kokoro-js-tests.json: an array of objects whose values are all
 * strings; the fields used are lang ("a"/"b"), text and expected. */
static void test_kokoro_js_pairs(void **state) {
    (void)state;
    wgml_g2p *g = open_espeak();
    size_t size;
    char *data = (char *)tu_read_file(tu_shared("kokoro/g2p-kokoro-js-tests.json"), &size);
    assert_non_null(data);
    const char *p = data;
    skip_ws(&p);
    assert_int_equal(*p++, '[');
    int total = 0, ok = 0, per_lang[2] = {0, 0};
    for (;;) {
        skip_ws(&p);
        if (*p == ']') break;
        assert_int_equal(*p++, '{');
        char *lang = NULL, *text = NULL, *expected = NULL;
        for (;;) {
            char *key = json_string(&p);
            assert_non_null(key);
            skip_ws(&p);
            assert_int_equal(*p++, ':');
            char *value = json_string(&p);
            assert_non_null(value);
            if (!strcmp(key, "lang"))
                lang = value;
            else if (!strcmp(key, "text"))
                text = value;
            else if (!strcmp(key, "expected"))
                expected = value;
            else
                free(value);
            free(key);
            skip_ws(&p);
            if (*p == ',') {
                p++;
                continue;
            }
            assert_int_equal(*p++, '}');
            break;
        }
        assert_non_null(lang);
        assert_non_null(text);
        assert_non_null(expected);
        assert_true(!strcmp(lang, "a") || !strcmp(lang, "b"));
        char *out = NULL;
        wgml_error err;
        wgml_status st = wgml_g2p_phonemize(g, lang, text, &out, &err);
        total++;
        if (st) {
            print_message("[%s] '%s': %s\n", lang, text, err.message);
        } else if (strcmp(out, expected)) {
            print_message("[%s] '%s'\n   gives '%s'\n  wanted '%s'\n", lang, text, out, expected);
        } else {
            ok++;
            per_lang[lang[0] == 'b']++;
        }
        wgml_free(out);
        free(lang);
        free(text);
        free(expected);
        skip_ws(&p);
        if (*p == ',') p++;
    }
    print_message("g2p-kokoro-js-tests.json: %d/%d pairs match (%d a, %d b)\n", ok, total, per_lang[0], per_lang[1]);
    free(data);
    wgml_g2p_free(g);
    assert_true(total >= 70);
    assert_int_equal(ok, total);
}

/* espeak-ng that is not there: a clear error naming the fix. */
static void test_espeak_missing(void **state) {
    (void)state;
    const char *old = getenv("WGML_ESPEAK");
    char *saved = old ? strdup(old) : NULL;
    wgml_g2p *g = (wgml_g2p *)&g;
    wgml_error err;
    setenv("WGML_ESPEAK", "/nonexistent", 1);
    assert_int_equal(wgml_g2p_open_espeak(NULL, &g, &err), WGML_ERR_UNSUPPORTED);
    assert_null(g);
    assert_non_null(strstr(err.message, "'/nonexistent' (from WGML_ESPEAK) is not an executable file"));
    assert_non_null(strstr(err.message, "text input needs espeak-ng (apt-get install espeak-ng)"));
    assert_non_null(strstr(err.message, "phoneme input works without it"));
    setenv("WGML_ESPEAK", "wgml-no-such-espeak", 1);
    assert_int_equal(wgml_g2p_open_espeak(NULL, &g, &err), WGML_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.message, "'wgml-no-such-espeak' (from WGML_ESPEAK) was not found on PATH"));
    /* an argument wins over the variable; a folder is no program */
    assert_int_equal(wgml_g2p_open_espeak("/", &g, &err), WGML_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.message, "'/' is not an executable file"));
    if (saved)
        setenv("WGML_ESPEAK", saved, 1);
    else
        unsetenv("WGML_ESPEAK");
    free(saved);
    assert_int_equal(wgml_g2p_open_espeak(NULL, NULL, &err), WGML_ERR_INVALID_ARGUMENT);
}

/* A stand-in espeak-ng: a shell script at a temporary path. */
static const char *script(const char *name, const char *body) {
    const char *path = tu_tmp_path(name);
    char text[2048];
    snprintf(text, sizeof text, "#!/bin/sh\n%s\n", body);
    assert_int_equal(tu_write_file(path, text, strlen(text)), 0);
    assert_int_equal(chmod(path, 0755), 0);
    return path;
}

static void test_espeak_process_errors(void **state) {
    (void)state;
    wgml_g2p *g;
    wgml_error err;
    char *out = NULL;

    assert_int_equal(wgml_g2p_open_espeak(script("fail.sh", "echo 'Error: no such voice' >&2; exit 3"), &g, &err),
                     WGML_OK);
    assert_int_equal(wgml_g2p_phonemize(g, "en-gb", "Hello there.", &out, &err), WGML_ERR_IO);
    assert_null(out);
    assert_non_null(strstr(err.message, "-v en) failed with exit status 3 on 'Hello there': Error: no such voice"));
    wgml_g2p_free(g);

    assert_int_equal(wgml_g2p_open_espeak(script("killed.sh", "kill -9 $$"), &g, &err), WGML_OK);
    assert_int_equal(wgml_g2p_phonemize(
                         g, "en-us", "One, two, three, four, five, six, seven, eight, nine, ten, eleven.", &out, &err),
                     WGML_ERR_IO);
    assert_non_null(strstr(err.message, "was killed by signal 9"));
    wgml_g2p_free(g);

    /* not executable */
    const char *plain = tu_tmp_path("plain.txt");
    assert_int_equal(tu_write_file(plain, "x", 1), 0);
    assert_int_equal(chmod(plain, 0644), 0);
    assert_int_equal(wgml_g2p_open_espeak(plain, &g, &err), WGML_ERR_UNSUPPORTED);
}

/* Large and many pieces through `cat` (phonemes = the text), and a program
 * that exits without reading its input: no deadlock, no SIGPIPE, results in
 * order. */
static void test_espeak_pipes(void **state) {
    (void)state;
    const size_t big = 3u << 20;
    char *text = malloc(big + 1);
    assert_non_null(text);
    for (size_t i = 0; i < big; i++)
        text[i] = "abc def ghi "[i % 12];
    text[big - 1] = 'j';
    text[big] = '\0';
    wgml_g2p *g;
    wgml_error err;
    char *out = NULL;
    assert_int_equal(wgml_g2p_open_espeak(script("cat.sh", "exec cat"), &g, &err), WGML_OK);
    assert_int_equal(wgml_g2p_phonemize(g, "en-us", text, &out, &err), WGML_OK);
    assert_string_equal(out, text);
    wgml_free(out);

    /* 300 pieces, several processes at a time */
    size_t len = 0;
    for (int i = 0; i < 300; i++)
        len += (size_t)snprintf(text + len, big - len, "%sp%d", i ? ", " : "", i);
    assert_int_equal(wgml_g2p_phonemize(g, "en-gb", text, &out, &err), WGML_OK);
    assert_string_equal(out, text);
    wgml_free(out);
    wgml_g2p_free(g);

    for (size_t i = 0; i < big; i++)
        text[i] = "abc def ghi "[i % 12];
    text[big - 1] = 'j';
    assert_int_equal(wgml_g2p_open_espeak(script("early.sh", "exit 0"), &g, &err), WGML_OK);
    assert_int_equal(wgml_g2p_phonemize(g, "en-us", text, &out, &err), WGML_OK);
    assert_string_equal(out, "");
    wgml_free(out);
    assert_int_equal(wgml_g2p_phonemize(g, "en-us", "Yes. No!", &out, &err), WGML_OK);
    assert_string_equal(out, ". !");
    wgml_free(out);
    wgml_g2p_free(g);
    free(text);
}

static double seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The process's open descriptors (-1 where /proc/self/fd cannot be read). */
static int open_fds(void) {
    DIR *d = opendir("/proc/self/fd");
    if (!d) return -1;
    int n = 0;
    while (readdir(d))
        n++;
    closedir(d);
    return n;
}

/* 1 when process pid is gone, or a zombie that is not ours to reap (the
 * grandchild of a killed child goes to init, which may be slow to reap it). */
static int process_gone(int pid) {
    if (kill(pid, 0) != 0 && errno == ESRCH) return 1;
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) return 1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *rp = strrchr(buf, ')');
    return rp && rp[1] == ' ' && rp[2] == 'Z';
}

/* A hung espeak-ng, one that never answers and one that closes its output
 * but never exits: the call fails with the time limit in the message within
 * about that limit (1 s here, where espeak-ng gets 5 s and more), the child
 * is killed and reaped, the grandchild it started (a shell's `sleep &`, in
 * its process group) killed too, and no descriptor is left open. */
static void test_espeak_timeout(void **state) {
    (void)state;
    static const char *const bodies[] = {
        "sleep 1000 & echo $$ $! > '%s'; wait",
        "sleep 1000 > /dev/null 2>&1 & echo $$ $! > '%s'; cat > /dev/null; exec >&- 2>&-; wait",
    };
    for (size_t b = 0; b < sizeof bodies / sizeof bodies[0]; b++) {
        char pids[512], body[1024], prog[512];
        snprintf(pids, sizeof pids, "%s", tu_tmp_path(b ? "hang-closed.pids" : "hang.pids"));
        snprintf(body, sizeof body, bodies[b], pids);
        snprintf(prog, sizeof prog, "%s", script(b ? "hang-closed.sh" : "hang.sh", body));
        const int fds = open_fds();
        wgml_g2p *g;
        wgml_error err;
        char *out = (char *)&out;
        assert_int_equal(wgml_g2p_open_espeak_limit(prog, 1000, 1000, &g, &err), WGML_OK);
        const double t0 = seconds();
        assert_int_equal(wgml_g2p_phonemize(g, "en-us", "Hello there", &out, &err), WGML_ERR_IO);
        const double dt = seconds() - t0;
        assert_null(out);
        /* 1000 ms + 12 bytes written at 1 ms a byte */
        assert_non_null(strstr(err.message, "espeak-ng gave no answer within 1.0 s (killed): "));
        assert_non_null(strstr(err.message, " -v en-us on 'Hello there'"));
        assert_true(dt >= 1.0);
        assert_true(dt < 3.0);
        wgml_g2p_free(g);
        assert_int_equal(open_fds(), fds);

        int child = 0, grandchild = 0;
        FILE *f = fopen(pids, "r");
        assert_non_null(f);
        assert_int_equal(fscanf(f, "%d %d", &child, &grandchild), 2);
        fclose(f);
        /* reaped by the call: gone at once */
        assert_int_equal(kill(child, 0), -1);
        assert_int_equal(errno, ESRCH);
        for (int i = 0; i < 200 && !process_gone(grandchild); i++)
            nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
        assert_true(process_gone(grandchild));
    }

    /* the limit grows with the text written: 0.2 s + 1 ms a byte for 299
     * bytes and a line end */
    char text[300];
    memset(text, 'a', 299);
    text[299] = '\0';
    wgml_g2p *g;
    wgml_error err;
    char *out = NULL;
    assert_int_equal(wgml_g2p_open_espeak_limit(script("hang-long.sh", "exec sleep 1000"), 200, 1000, &g, &err),
                     WGML_OK);
    const double t0 = seconds();
    assert_int_equal(wgml_g2p_phonemize(g, "en-gb", text, &out, &err), WGML_ERR_IO);
    const double dt = seconds() - t0;
    assert_non_null(strstr(err.message, "espeak-ng gave no answer within 0.5 s (killed): "));
    /* a long piece is quoted in part */
    assert_non_null(strstr(err.message, " -v en on 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa...'"));
    assert_true(dt >= 0.5);
    assert_true(dt < 1.5);
    wgml_g2p_free(g);
}

/* Sets name to value (NULL: unsets it), keeping the old value in *saved. */
static void swap_env(const char *name, const char *value, char **saved) {
    const char *old = getenv(name);
    *saved = old ? strdup(old) : NULL;
    if (value)
        setenv(name, value, 1);
    else
        unsetenv(name);
}

static void restore_env(const char *name, char *saved) {
    if (saved)
        setenv(name, saved, 1);
    else
        unsetenv(name);
    free(saved);
}

/* espeak-ng's processes get a clean environment: PATH, its data path and
 * the locale, and nothing else of the host's (no WGML_API_KEY, no HOME). */
static void test_espeak_environment(void **state) {
    (void)state;
    static const char *const vars[][2] = {
        {"WGML_API_KEY", "secret"},
        {"WGML_G2P_TEST_OTHER", "visible"},
        {"HOME", "/home/wgml-test"},
        {"LANG", "C.UTF-8"},
        {"ESPEAK_DATA_PATH", "/nonexistent/espeak-ng-data"},
    };
    enum { N_VARS = sizeof vars / sizeof vars[0] };
    char *saved[N_VARS];
    char envf[512], body[1024];
    snprintf(envf, sizeof envf, "%s", tu_tmp_path("env.txt"));
    snprintf(body, sizeof body, "env > '%s'; exec cat", envf);
    const char *prog = script("env.sh", body);
    /* set from the open to the end of the call; put back before any assert
     * can fail: the real espeak-ng of the later tests must not see them */
    for (int i = 0; i < N_VARS; i++)
        swap_env(vars[i][0], vars[i][1], &saved[i]);
    wgml_g2p *g = NULL;
    wgml_error err;
    char *out = NULL;
    wgml_status st_open = wgml_g2p_open_espeak(prog, &g, &err), st = st_open;
    if (!st_open) st = wgml_g2p_phonemize(g, "en-us", "Good day", &out, &err);
    for (int i = 0; i < N_VARS; i++)
        restore_env(vars[i][0], saved[i]);
    wgml_g2p_free(g);
    assert_int_equal(st_open, WGML_OK);
    assert_int_equal(st, WGML_OK);
    assert_string_equal(out, "Good day");
    wgml_free(out);

    size_t size;
    char *env = (char *)tu_read_file(envf, &size);
    assert_non_null(env);
    char *lines = malloc(size + 2);
    assert_non_null(lines);
    lines[0] = '\n'; /* every variable then starts after a line end */
    memcpy(lines + 1, env, size);
    lines[size + 1] = '\0';
    free(env);
    assert_non_null(strstr(lines, "\nPATH="));
    assert_non_null(strstr(lines, "\nLANG=C.UTF-8\n"));
    assert_non_null(strstr(lines, "\nESPEAK_DATA_PATH=/nonexistent/espeak-ng-data\n"));
    assert_null(strstr(lines, "WGML_API_KEY"));
    assert_null(strstr(lines, "secret"));
    assert_null(strstr(lines, "WGML_G2P_TEST_OTHER"));
    assert_null(strstr(lines, "\nHOME="));
    free(lines);
}

static void test_espeak_alloc_fail(void **state) {
    (void)state;
    wgml_g2p_free(open_espeak());
    alloc_fail_loop(1, "It costs $4.99 (in 1984), Mr. Smith.",
                    "ɪt kˈɔsts fˈoːɹ dˈɑːlɚz ænd nˈaɪndi nˈaɪn sˈɛnts «ɪn nˈaɪntiːn ˈeɪɾi fˈoːɹ», mˈɪstɚ smˈɪθ.",
                    "It=ɪt|costs=kˈɔsts|$4.99=fˈoːɹ dˈɑːlɚz ænd nˈaɪndi nˈaɪn sˈɛnts|in=ɪn|1984=nˈaɪntiːn ˈeɪɾi "
                    "fˈoːɹ|Mr=mˈɪstɚ|Smith=smˈɪθ");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_normalize),
        cmocka_unit_test(test_postprocess),
        cmocka_unit_test(test_split),
        cmocka_unit_test(test_bad_text),
        cmocka_unit_test(test_join),
        cmocka_unit_test(test_words),
        cmocka_unit_test(test_align),
        cmocka_unit_test(test_alloc_fail),
        cmocka_unit_test(test_espeak_missing),
        cmocka_unit_test(test_espeak_process_errors),
        cmocka_unit_test(test_espeak_pipes),
        cmocka_unit_test(test_espeak_timeout),
        cmocka_unit_test(test_espeak_environment),
        cmocka_unit_test(test_tsv_en_us),
        cmocka_unit_test(test_tsv_en_gb),
        cmocka_unit_test(test_kokoro_js_pairs),
        cmocka_unit_test(test_languages),
        cmocka_unit_test(test_lang_pipeline),
        cmocka_unit_test(test_espeak_alloc_fail),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
