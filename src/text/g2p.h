/*
 * g2p.h - English text to phonemes for Kokoro, as kokoro-js 1.2.1's
 * phonemize(text, lang) makes them.
 *
 * kokoro-js normalizes the text (quotes, parentheses, CJK punctuation,
 * whitespace, titles, numbers, money, possessives, initialisms), splits it
 * on runs of punctuation (kept verbatim), gives every other piece to
 * espeak-ng, joins the result and post-processes it. All of that is
 * reimplemented here in C (g2p_en.c); only the letters-to-sounds step runs
 * outside, behind a small backend interface. The backend that ships runs
 * the espeak-ng program (GPL) as a separate process, one per piece, so the
 * library itself stays MIT: `espeak-ng -q --ipa -v en-us|en --stdin`, the
 * piece on its standard input, its output lines (empty ones dropped) joined
 * with a space, as kokoro-js's `phonemizer` package returns them. Debian's
 * espeak-ng 1.51 gives kokoro-js's strings exactly on the shared test data
 * (tests/test_g2p.c).
 *
 * Texts are UTF-8; invalid UTF-8 is refused (WGML_ERR_INVALID_ARGUMENT).
 * Languages: "en-us" (kokoro's 'a', espeak voice en-us) and "en-gb" ('b',
 * voice en); "a" and "b" are accepted as aliases. The other languages of
 * Kokoro v1.0 (es, fr-fr, hi, it, pt-br; aliases e f h i p) take the official
 * pipeline's G2P instead (g2p_lang.c: misaki's EspeakG2P over phonemizer),
 * espeak-ng run with '^' ties (`--ipa --tie=^`); their words are not timed.
 */
#ifndef WGML_TEXT_G2P_H
#define WGML_TEXT_G2P_H

#include "wgml.h"

#include <stddef.h>
#include <stdint.h>

typedef struct wgml_g2p wgml_g2p;

/* What turns pieces of normalized text into phonemes. */
typedef struct wgml_g2p_backend {
    const char *name; /* for messages, e.g. "espeak-ng"; copied by wgml_g2p_open */
    /* Phonemizes n pieces for lang ("en-us" or "en-gb"). Each piece is
     * non-empty normalized text without the punctuation kokoro-js splits on.
     * out[i] gets a wgml_malloc'ed string: the phonemes as kokoro-js's
     * phonemizer gives them (its output lines joined with a space, no line
     * ends). On failure: the status, err filled, and every out[i] NULL. */
    wgml_status (*phonemize_pieces)(void *user, const char *lang, const char *const *pieces, size_t n, char **out,
                                    wgml_error *err);
    void (*free_user)(void *user); /* called by wgml_g2p_free (and on a failed open); may be NULL */
    void *user;
    /* Optional, for word timing: phonemizes each of n words said alone
     * (out[i]: its phonemes, "" when it has none), in the same form as
     * phonemize_pieces. NULL, or a failure, is not an error: the words are
     * then placed in the phonemes by their letters (wgml_g2p_phonemize_words). */
    wgml_status (*phonemize_words)(void *user, const char *lang, const char *const *words, size_t n, char **out,
                                   wgml_error *err);
} wgml_g2p_backend;

/* A G2P over any backend. On failure the backend's user data is freed. */
wgml_status wgml_g2p_open(const wgml_g2p_backend *backend, wgml_g2p **out, wgml_error *err);

/* A G2P over the espeak-ng program: `program` (a path, or a name looked up
 * on PATH), else $WGML_ESPEAK when set and not empty, else "espeak-ng" on
 * PATH. A program that cannot be found fails here (WGML_ERR_UNSUPPORTED,
 * saying text input needs espeak-ng); one that fails when run fails in
 * wgml_g2p_phonemize with its exit status and error output. The
 * WebAssembly build has no processes: WGML_ERR_UNSUPPORTED.
 * Each run of espeak-ng has a time limit, WGML_G2P_ESPEAK_LIMIT_BASE_MS plus
 * WGML_G2P_ESPEAK_LIMIT_PER_KB_MS per 1000 bytes of text written to it:
 * past it the process and its process group are killed (SIGKILL) and
 * reaped, and the call fails with WGML_ERR_IO ("espeak-ng gave no answer
 * within 6.0 s (killed)"). The process gets a clean environment, only PATH,
 * ESPEAK_DATA_PATH, LANG, LC_ALL and LC_CTYPE (those set when the G2P is
 * opened): secrets in the host's environment (WGML_API_KEY) stay there. */
wgml_status wgml_g2p_open_espeak(const char *program, wgml_g2p **out, wgml_error *err);

/* The limit is generous: espeak-ng starts in a few milliseconds and reads
 * about 18 KB of English a second on one core (1.51, x86-64); the base
 * covers a cold start on a loaded machine. */
#define WGML_G2P_ESPEAK_LIMIT_BASE_MS   5000
#define WGML_G2P_ESPEAK_LIMIT_PER_KB_MS 1000

/* wgml_g2p_open_espeak with another time limit: base_ms plus per_kb_ms per
 * 1000 bytes written to each process. For tests, which need a short one. */
wgml_status wgml_g2p_open_espeak_limit(const char *program, unsigned base_ms, unsigned per_kb_ms, wgml_g2p **out,
                                       wgml_error *err);

/* kokoro-js's phonemize(text, lang): *out gets a wgml_malloc'ed string
 * (free with wgml_free); it may contain « » and, for multi-line text,
 * line ends that sat next to punctuation. */
wgml_status wgml_g2p_phonemize(wgml_g2p *g2p, const char *lang, const char *text, char **out, wgml_error *err);

/* Where a word of the text is said in the phonemes. */
typedef struct wgml_g2p_word {
    size_t text_off, text_len; /* the word in the text, bytes: white space and the punctuation kokoro-js splits
                                  on stripped from its ends */
    size_t ph_off, ph_len;     /* its phonemes in *out, bytes; not empty */
} wgml_g2p_word;

/* wgml_g2p_phonemize, and where each word of the text is said: *words gets
 * *n_words entries (wgml_malloc'ed, NULL when none), in order, their phoneme
 * ranges disjoint. A word is a run of the text between white space; the
 * normalization may turn one into several ("$4.99": "4 dollars and 99
 * cents"), which are then timed as one. espeak-ng runs words together ("of
 * the": "ʌvðə"), so each word is also phonemized alone (the backend's
 * phonemize_words) and the two aligned, code point by code point, to find
 * where one word ends in the other (g2p_words.c). Words said as nothing
 * (a lone "-") are left out. */
wgml_status wgml_g2p_phonemize_words(wgml_g2p *g2p, const char *lang, const char *text, char **out,
                                     wgml_g2p_word **words, size_t *n_words, wgml_error *err);

void wgml_g2p_free(wgml_g2p *g2p);

/* ---- the languages (g2p_lang.c) ---- */

/* A language Kokoro speaks: its code, one-letter alias (KPipeline's lang_code),
 * espeak-ng voice, and whether it is English (1 American, 0 British; -1: the
 * official espeak G2P below instead of kokoro-js's English one). */
typedef struct g2p_lang {
    const char *code, *alias, *voice;
    int english;
} g2p_lang;

/* The language of a code ("es", "fr-fr" or "fr", "pt-br", ...) or alias ("e"); NULL when unknown. */
const g2p_lang *g2p_lang_find(const char *code);
/* "en-us, en-gb, es, fr-fr, hi, it, pt-br": for messages. */
const char *g2p_lang_list(void);

typedef wgml_status (*g2p_pieces_fn)(void *user, const char *lang, const char *const *pieces, size_t n, char **out,
                                     wgml_error *err);
/* Kokoro's G2P for a non-English language (g2p_lang.c says every step):
 * misaki's EspeakG2P over phonemizer's espeak backend, the pieces phonemized
 * by `phonemize` (a backend's phonemize_pieces: espeak-ng with '^' ties). */
wgml_status g2p_espeak_official(const g2p_lang *lang, const char *text, g2p_pieces_fn phonemize, void *user,
                                char **out, wgml_error *err);

/* ---- kokoro-js's steps (g2p_en.c), for the G2P and its tests ---- */

/* Language codes: 1 for American English ("en-us", "a"), 0 for British
 * ("en-gb", "b"), -1 for anything else. */
int g2p_en_american(const char *lang);

/* normalize_text(): the whole normalization, trim included. */
wgml_status g2p_en_normalize(const char *text, char **out, wgml_error *err);

/* The split on PUNCTUATION_PATTERN, /(\s*[;:,.!?¡¿—…"«»“”(){}[\]]+\s*)+/g:
 * byte spans of text, in order, covering it; punct marks the matches
 * (kept verbatim), the others are phonemized. *spans is wgml_malloc'ed
 * (NULL when *n is 0). */
typedef struct g2p_span {
    size_t off, len;
    int punct;
} g2p_span;
wgml_status g2p_en_split(const char *text, g2p_span **spans, size_t *n, wgml_error *err);

/* The post-processing of the joined phonemes (kokoro's own spelling, ʲ r x ɬ,
 * "hundred", " z", and for American English "nine-ty" -> "nine-dy"), trim
 * included. */
wgml_status g2p_en_postprocess(const char *phonemes, int american, char **out, wgml_error *err);

/* JavaScript's \s, and the punctuation the split cuts at. */
int g2p_en_space(uint32_t c);
int g2p_en_split_punct(uint32_t c);

/* ---- word timing (g2p_words.c) ---- */

/* The words espeak-ng is asked to say alone: the phonemized spans of the
 * normalized text (spans from g2p_en_split) cut at white space, as byte
 * spans of norm (punct 0). */
wgml_status g2p_en_words(const char *norm, const g2p_span *spans, size_t n_spans, g2p_span **words, size_t *n_words,
                         wgml_error *err);

/* Which word each code point of a piece's phonemes belongs to: the piece's
 * phonemes (white space included) aligned with the words' phonemes said
 * alone (word_ph[0..n), in order, with a space between them), by an edit
 * distance where stress and length marks and spaces are cheap to skip.
 * labels[i] gets the word (0 .. n-1) of the i-th non-space code point of
 * phonemes, in order (non-decreasing); n_labels must be that count. n >= 1.
 * A piece too long to align in 64 MiB is cut in proportion to the words'
 * lengths. */
wgml_status g2p_align_piece(const char *phonemes, const char *const *word_ph, size_t n, int *labels, size_t n_labels,
                            wgml_error *err);

/* Groups the normalized words by the words of the text they were made from:
 * text cut at white space (runs of punctuation kokoro-js splits on stripped
 * from each end; a run of only those is no word) and the normalized words
 * matched by their spelling (ASCII case ignored); what normalization changed
 * in between is one group. group[i] gets the text word of normalized word i
 * (an index into *text_words, non-decreasing). */
wgml_status g2p_text_groups(const char *text, const char *norm, const g2p_span *norm_words, size_t n_norm,
                            g2p_span **text_words, size_t *n_text_words, int *group, wgml_error *err);

/* Checks that text is well-formed UTF-8; the error names the byte offset. */
wgml_status g2p_check_utf8(const char *text, wgml_error *err);

#endif
