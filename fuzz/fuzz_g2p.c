/*
 * fuzz_g2p.c - libFuzzer target: the English G2P around its phonemizer
 * (src/text/g2p.c, g2p_en.c, g2p_words.c): normalization, the split, the
 * join and post-processing, and where each word of the text is in the
 * phonemes (wgml_g2p_phonemize_words), over a stand-in phonemizer.
 *
 * Input: byte 0 picks the stand-in's ways (bit 0: it phonemizes words
 * alone, else the words are placed by their letters; bit 1: en-gb; bit 2:
 * its words-alone answer is refused; bit 3: Italian, the official espeak
 * G2P's steps of g2p_lang.c: marks, clean-up, flags, ties), the rest is the
 * text (any bytes).
 * The stand-in lower-cases letters, drops the space after a word of one or
 * two bytes (espeak-ng running words together) and writes a stress mark
 * before each word said alone, so the alignment has real work.
 *
 * Checks: invalid UTF-8 is refused with a message; otherwise the phonemes
 * are those of wgml_g2p_phonemize, and the words lie inside the text and
 * inside the phonemes, in order, without overlapping, none empty in the
 * phonemes. Seeds: the shared G2P sentences (fuzz/make-corpus.sh).
 */
#include "core/alloc.h"
#include "core/error.h"
#include "text/g2p.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(c)                                                                                                       \
    do {                                                                                                               \
        if (!(c)) {                                                                                                    \
            fprintf(stderr, "fuzz_g2p: check failed: %s (line %d)\n", #c, __LINE__);                                   \
            abort();                                                                                                   \
        }                                                                                                              \
    } while (0)

typedef struct {
    int refuse_words;
} stand_in;

/* Lower-cased; the space after a word of one or two bytes dropped. */
static char *say(const char *s, int alone) {
    size_t n = strlen(s);
    char *o = wgml_malloc(2 * n + 3), *q = o;
    if (!o) return NULL;
    if (alone) *q++ = '\xcb', *q++ = '\x88'; /* ˈ */
    size_t word = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == ' ' && word > 0 && word <= 2) {
            word = 0;
            continue;
        }
        word = c == ' ' ? 0 : word + 1;
        *q++ = c >= 'A' && c <= 'Z' ? (char)(c + 32) : c;
    }
    *q = '\0';
    return o;
}

static wgml_status pieces(void *user, const char *lang, const char *const *p, size_t n, char **out, wgml_error *err) {
    (void)user, (void)lang;
    for (size_t i = 0; i < n; i++)
        if (!(out[i] = say(p[i], 0))) {
            for (size_t k = 0; k < i; k++)
                wgml_free(out[k]), out[k] = NULL;
            return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory");
        }
    return WGML_OK;
}

static wgml_status words(void *user, const char *lang, const char *const *w, size_t n, char **out, wgml_error *err) {
    stand_in *s = user;
    (void)lang;
    if (s->refuse_words) return wgml_fail(err, WGML_ERR_FORMAT, "refused");
    for (size_t i = 0; i < n; i++)
        if (!(out[i] = say(w[i], 1))) {
            for (size_t k = 0; k < i; k++)
                wgml_free(out[k]), out[k] = NULL;
            return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory");
        }
    return WGML_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const int ways = data[0];
    char *text = malloc(size);
    if (!text) return 0;
    memcpy(text, data + 1, size - 1);
    text[size - 1] = '\0';
    stand_in s = {(ways & 4) != 0};
    wgml_g2p_backend be = {"stand-in", pieces, NULL, &s, (ways & 1) ? words : NULL};
    wgml_g2p *g;
    wgml_error err;
    CHECK(wgml_g2p_open(&be, &g, &err) == WGML_OK);
    const char *lang = (ways & 8) ? "it" : (ways & 2) ? "en-gb" : "en-us";
    char *ph = NULL, *ph2 = NULL;
    wgml_g2p_word *w = NULL;
    size_t n = 0;
    wgml_status st = wgml_g2p_phonemize_words(g, lang, text, &ph, &w, &n, &err);
    if (st) {
        CHECK(err.message[0] != '\0');
        CHECK(!ph && !w && n == 0);
    } else {
        CHECK(wgml_g2p_phonemize(g, lang, text, &ph2, &err) == WGML_OK);
        CHECK(!strcmp(ph, ph2));
        const size_t tl = strlen(text), pl = strlen(ph);
        CHECK((n == 0) == (w == NULL));
        CHECK(!(ways & 8) || n == 0); /* the other languages' words are not timed */
        for (size_t i = 0; i < n; i++) {
            CHECK(w[i].text_off + w[i].text_len <= tl);
            CHECK(w[i].ph_len > 0 && w[i].ph_off + w[i].ph_len <= pl);
            if (i) {
                CHECK(w[i].text_off >= w[i - 1].text_off + w[i - 1].text_len);
                CHECK(w[i].ph_off >= w[i - 1].ph_off + w[i - 1].ph_len);
            }
        }
    }
    wgml_free(ph);
    wgml_free(ph2);
    wgml_free(w);
    wgml_g2p_free(g);
    free(text);
    return 0;
}
