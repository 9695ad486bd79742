/*
 * g2p_lang.c - the languages Kokoro speaks through espeak-ng, and the
 * official G2P of the non-English ones.
 *
 * Kokoro v1.0's pipeline (hexgrad/kokoro, KPipeline) speaks Spanish, French,
 * Hindi, Italian and Brazilian Portuguese through misaki's EspeakG2P over the
 * `phonemizer` package's espeak backend (preserve_punctuation, with_stress,
 * tie '^', language switches' flags removed). That chain is reimplemented
 * here from its published rules (only the letters-to-sounds step runs
 * outside, the same espeak-ng program the English G2P runs):
 *
 *   1. misaki: « » to curly quotes, then ( ) to « ».
 *   2. phonemizer's punctuation: the text is cut at runs of
 *      (\s*[;:,.!?¡¿—…"«»“”(){}[]]+\s*)+ (marks, kept verbatim, each
 *      remembered as at the Beginning, at the End, Inside, or the whole
 *      text Alone); the chunks between them (empty ones dropped) go to
 *      espeak-ng (`-q --ipa --tie=^ -v VOICE`: a '^' between the letters of
 *      one phoneme, as the library's tie mode writes them).
 *   3. phonemizer's line clean-up of each chunk's phonemes: clause lines
 *      joined with a space, "  " -> " ", runs of '_' -> '_', "_ " -> " ",
 *      the (xx) flags of a language switch removed, then every word
 *      followed by one space.
 *   4. phonemizer's restore: a Beginning mark before the first chunk, an
 *      Inside one between its two chunks (the first's trailing space
 *      dropped), an End one after the last (with a space unless it ends in
 *      one), an Alone one with a space; chunks left after the marks end
 *      with a space.
 *   5. misaki: trimmed; the ties of a few phonemes turned into Kokoro's
 *      single symbols (a^ɪ I, a^ʊ W, d^z ʣ, d^ʒ ʤ, e^ɪ A, o^ʊ O, s^s S,
 *      t^s ʦ, t^ʃ ʧ, ɔ^ɪ Y, ə^ʊ Q, in that order), every other '^' and '-'
 *      deleted, « » back to ( ).
 */
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"
#include "text/g2p.h"
#include "text/unicode.h"

static const g2p_lang langs[] = {
    {"en-us", "a", "en-us", 1},  {"en-gb", "b", "en", 0}, {"es", "e", "es", -1}, {"fr-fr", "f", "fr-fr", -1},
    {"hi", "h", "hi", -1},       {"it", "i", "it", -1},   {"pt-br", "p", "pt-br", -1},
};

const g2p_lang *g2p_lang_find(const char *code) {
    if (!code) return NULL;
    for (size_t i = 0; i < sizeof langs / sizeof langs[0]; i++)
        if (!strcmp(code, langs[i].code) || !strcmp(code, langs[i].alias)) return &langs[i];
    if (!strcmp(code, "fr")) return &langs[3]; /* French: France's (the only one Kokoro has) */
    return NULL;
}

const char *g2p_lang_list(void) { return "en-us, en-gb, es, fr-fr, hi, it, pt-br"; }

/* ---- a growing string ---- */

typedef struct {
    char *s;
    size_t n, cap;
    int oom;
} sbuf;

static void put(sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->n + n + 1) cap *= 2;
        char *g = wgml_realloc(b->s, cap);
        if (!g) {
            b->oom = 1;
            return;
        }
        b->s = g, b->cap = cap;
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = '\0';
}

static void puts_(sbuf *b, const char *s) { put(b, s, strlen(s)); }

/* every occurrence of `from` in s replaced by `to` (left to right, not overlapping), into a new string */
static char *replace_all(const char *s, const char *from, const char *to) {
    sbuf b = {0};
    const size_t fl = strlen(from);
    for (const char *p = s;;) {
        const char *q = strstr(p, from);
        if (!q) {
            puts_(&b, p);
            break;
        }
        put(&b, p, (size_t)(q - p));
        puts_(&b, to);
        p = q + fl;
    }
    if (!b.s && !b.oom) puts_(&b, "");
    if (b.oom) {
        wgml_free(b.s);
        return NULL;
    }
    return b.s;
}

/* ---- phonemizer's punctuation ---- */

static const char *const mark_chars[] = {";", ":", ",", ".", "!", "?", "\xc2\xa1", "\xc2\xbf", "\xe2\x80\x94",
                                         "\xe2\x80\xa6", "\"", "\xc2\xab", "\xc2\xbb", "\xe2\x80\x9c", "\xe2\x80\x9d",
                                         "(", ")", "{", "}", "[", "]", NULL};

/* the length of the mark character at s, 0 when none */
static size_t mark_at(const char *s) {
    for (int i = 0; mark_chars[i]; i++) {
        const size_t l = strlen(mark_chars[i]);
        if (!strncmp(s, mark_chars[i], l)) return l;
    }
    return 0;
}

/* Python's \s on UTF-8 at s: its length, 0 when not white space */
static size_t space_at(const char *s) {
    if (!*s) return 0;
    int l = 0;
    const uint32_t c = uni_decode(s, strlen(s), &l);
    if (l <= 0) return 0;
    return g2p_en_space(c) || c == 0x1c || c == 0x1d || c == 0x1e || c == 0x1f || c == 0x85 ? (size_t)l : 0;
}

/* the end of a match of (\s*[marks]+\s*)+ starting at p, p when none */
static const char *match_marks(const char *p) {
    const char *end = p;
    for (;;) { /* one repetition: spaces, at least one mark, spaces (greedy, backtracking not needed) */
        const char *q = end;
        size_t l;
        while ((l = space_at(q))) q += l;
        if (!(l = mark_at(q))) break;
        while ((l = mark_at(q))) q += l;
        while ((l = space_at(q))) q += l;
        end = q;
    }
    return end;
}

typedef struct {
    size_t off, len;
    char pos; /* 'B', 'I', 'E', 'A' */
} mark;

/* ---- the pipeline ---- */

/* Step 3 on one chunk's espeak-ng output (its lines joined with a space). */
static char *clean_line(const char *raw) {
    sbuf b = {0};
    /* strip, then the doubled spaces once over (Python's replace('  ', ' ')) */
    size_t a = 0, z = strlen(raw);
    while (a < z && space_at(raw + a)) a += space_at(raw + a);
    while (z > a && (raw[z - 1] == ' ' || raw[z - 1] == '\n' || raw[z - 1] == '\t' || raw[z - 1] == '\r')) z--;
    for (size_t i = a; i < z;) {
        if (raw[i] == '\n') {
            put(&b, " ", 1);
            i++;
        } else {
            put(&b, raw + i, 1);
            i++;
        }
    }
    if (!b.s && !b.oom) puts_(&b, "");
    if (b.oom) return NULL;
    char *s1 = replace_all(b.s, "  ", " ");
    wgml_free(b.s);
    if (!s1) return NULL;
    /* runs of '_' -> '_', "_ " -> " " */
    sbuf c = {0};
    for (size_t i = 0; s1[i];) {
        if (s1[i] == '_') {
            while (s1[i] == '_') i++;
            put(&c, s1[i] == ' ' ? " " : "_", 1);
            if (s1[i] == ' ') i++;
            continue;
        }
        put(&c, s1 + i, 1);
        i++;
    }
    wgml_free(s1);
    if (!c.s && !c.oom) puts_(&c, "");
    if (c.oom) return NULL;
    /* language switches' flags: \(.+?\) removed */
    sbuf d = {0};
    for (size_t i = 0; c.s[i];) {
        if (c.s[i] == '(' && c.s[i + 1]) {
            const char *close = strchr(c.s + i + 2, ')');
            if (close) {
                i = (size_t)(close - c.s) + 1;
                continue;
            }
        }
        put(&d, c.s + i, 1);
        i++;
    }
    wgml_free(c.s);
    if (!d.s && !d.oom) puts_(&d, "");
    if (d.oom) return NULL;
    if (!*d.s) return d.s; /* said as nothing */
    /* every word (split at ' ', stripped) followed by one space */
    sbuf e = {0};
    for (const char *p = d.s;;) {
        const char *sp = strchr(p, ' ');
        const size_t n = sp ? (size_t)(sp - p) : strlen(p);
        size_t x = 0, y = n;
        while (x < y && space_at(p + x)) x += space_at(p + x);
        while (y > x && (p[y - 1] == '\t' || p[y - 1] == '\r' || p[y - 1] == '\n')) y--;
        put(&e, p + x, y - x);
        put(&e, " ", 1);
        if (!sp) break;
        p = sp + 1;
    }
    wgml_free(d.s);
    if (e.oom) {
        wgml_free(e.s);
        return NULL;
    }
    return e.s;
}

static int ends_with_space(const sbuf *b) { return b->n && b->s[b->n - 1] == ' '; }

wgml_status g2p_espeak_official(const g2p_lang *lang, const char *text, g2p_pieces_fn phonemize, void *user,
                                char **out, wgml_error *err) {
    *out = NULL;
    wgml_status st = WGML_OK;
    char *t = NULL, *t1 = NULL, *t2 = NULL, *t3 = NULL, *buf = NULL, *joined = NULL;
    const char **pieces = NULL;
    char **results = NULL;
    mark *marks = NULL;
    size_t n_marks = 0, n_pieces = 0;
    /* 1: the quotes and parentheses */
    if (!(t1 = replace_all(text, "\xc2\xab", "\xe2\x80\x9c")) || !(t2 = replace_all(t1, "\xc2\xbb", "\xe2\x80\x9d")) ||
        !(t3 = replace_all(t2, "(", "\xc2\xab")) || !(t = replace_all(t3, ")", "\xc2\xbb")))
        goto oom;
    /* 2: the marks and the chunks between them */
    const size_t len = strlen(t);
    marks = wgml_malloc((len + 1) * sizeof *marks);
    buf = wgml_malloc(len + 1 + len + 1);
    pieces = wgml_malloc((len + 1) * sizeof *pieces);
    if (!marks || !buf || !pieces) goto oom;
    for (size_t i = 0; i < len;) {
        const char *e = match_marks(t + i);
        if (e == t + i) {
            i += (size_t)uni_char_len(t + i, len - i);
            continue;
        }
        const size_t ml = (size_t)(e - (t + i));
        marks[n_marks++] = (mark){i, ml, 'I'};
        i += ml;
    }
    char *bp = buf;
    if (n_marks == 1 && marks[0].off == 0 && marks[0].len == len) {
        marks[0].pos = 'A';
    } else {
        for (size_t k = 0; k < n_marks; k++) {
            /* as the Python compares: the first match's text against the line's start, the last's against its end */
            if (k == 0 && !strncmp(t, t + marks[k].off, marks[k].len)) marks[k].pos = 'B';
            else if (k == n_marks - 1 && marks[k].len <= len && !strncmp(t + len - marks[k].len, t + marks[k].off, marks[k].len))
                marks[k].pos = 'E';
        }
        size_t at = 0;
        for (size_t k = 0; k <= n_marks; k++) { /* the chunk before mark k (after the last: the rest) */
            const size_t end = k < n_marks ? marks[k].off : len;
            if (end > at) {
                memcpy(bp, t + at, end - at);
                bp[end - at] = '\0';
                pieces[n_pieces++] = bp;
                bp += end - at + 1;
            }
            if (k < n_marks) at = marks[k].off + marks[k].len;
        }
    }
    results = wgml_calloc(n_pieces ? n_pieces : 1, sizeof *results);
    if (!results) goto oom;
    if (n_pieces && (st = phonemize(user, lang->code, pieces, n_pieces, results, err))) goto done;
    /* 3 */
    for (size_t k = 0; k < n_pieces; k++) {
        char *c = results[k] ? clean_line(results[k]) : NULL;
        if (!results[k]) {
            st = wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "espeak-ng gave no phonemes for '%s'", pieces[k]);
            goto done;
        }
        if (!c) goto oom;
        wgml_free(results[k]);
        results[k] = c;
    }
    /* 4: restore, one line */
    sbuf o = {0};
    size_t next = 0; /* the chunk in hand */
    sbuf cur = {0};
    int have_cur = 0;
    if (n_pieces) puts_(&cur, results[next++]), have_cur = 1;
    int line_done = 0;
    for (size_t k = 0; k < n_marks; k++) {
        const mark *m = &marks[k];
        char *ms = wgml_malloc(m->len + 1);
        if (!ms) goto oom_o;
        memcpy(ms, t + m->off, m->len);
        ms[m->len] = '\0';
        if (line_done) { /* the Python leaves marks of a finished line to the next one; a line has no more */
            wgml_free(ms);
            break;
        }
        if (m->pos == 'A') {
            puts_(&o, ms);
            if (!(m->len && ms[m->len - 1] == ' ')) puts_(&o, " ");
            line_done = 1;
        } else if (!have_cur) { /* a mark with no chunk left: as Python's "not text" branch, every mark joined */
            puts_(&o, ms);
        } else {
            if (ends_with_space(&cur)) cur.s[--cur.n] = '\0';
            if (m->pos == 'B') {
                sbuf nb = {0};
                puts_(&nb, ms);
                puts_(&nb, cur.s);
                wgml_free(cur.s);
                cur = nb;
                if (cur.oom) {
                    wgml_free(ms);
                    goto oom_o;
                }
            } else if (m->pos == 'E') {
                puts_(&o, cur.s);
                puts_(&o, ms);
                if (!(m->len && ms[m->len - 1] == ' ')) puts_(&o, " ");
                wgml_free(cur.s);
                cur = (sbuf){0};
                have_cur = next < n_pieces;
                if (have_cur) puts_(&cur, results[next++]);
                line_done = 1;
            } else { /* Inside: the next chunk joins */
                if (next < n_pieces) {
                    puts_(&cur, ms);
                    puts_(&cur, results[next++]);
                } else {
                    puts_(&cur, ms);
                }
            }
        }
        wgml_free(ms);
    }
    if (have_cur) {
        puts_(&o, cur.s);
        if (!ends_with_space(&cur)) puts_(&o, " ");
    }
    while (next < n_pieces) { /* chunks after the marks */
        puts_(&o, results[next]);
        if (!(*results[next] && results[next][strlen(results[next]) - 1] == ' ')) puts_(&o, " ");
        next++;
    }
    wgml_free(cur.s);
    if (o.oom) {
        wgml_free(o.s);
        goto oom;
    }
    joined = o.s ? o.s : wgml_strdup("");
    if (!joined) goto oom;
    /* 5: strip, ties to Kokoro's symbols, the rest of the ties and hyphens, « » back to ( ) */
    {
        static const char *const e2m[][2] = {
            {"a^\xc9\xaa", "I"},          {"a^\xca\x8a", "W"},     {"d^z", "\xca\xa3"},      {"d^\xca\x92", "\xca\xa4"},
            {"e^\xc9\xaa", "A"},          {"o^\xca\x8a", "O"},     {"s^s", "S"},             {"t^s", "\xca\xa6"},
            {"t^\xca\x83", "\xca\xa7"},   {"\xc9\x94^\xc9\xaa", "Y"}, {"\xc9\x99^\xca\x8a", "Q"},
        };
        size_t a = 0, z = strlen(joined);
        while (a < z && space_at(joined + a)) a += space_at(joined + a);
        while (z > a && (joined[z - 1] == ' ' || joined[z - 1] == '\n' || joined[z - 1] == '\t' || joined[z - 1] == '\r'))
            z--;
        memmove(joined, joined + a, z - a);
        joined[z - a] = '\0';
        char *s = joined;
        joined = NULL;
        for (size_t i = 0; i < sizeof e2m / sizeof e2m[0]; i++) {
            char *r = replace_all(s, e2m[i][0], e2m[i][1]);
            wgml_free(s);
            if (!(s = r)) goto oom;
        }
        const char *const last[][2] = {{"^", ""}, {"-", ""}, {"\xc2\xab", "("}, {"\xc2\xbb", ")"}};
        for (size_t i = 0; i < sizeof last / sizeof last[0]; i++) {
            char *r = replace_all(s, last[i][0], last[i][1]);
            wgml_free(s);
            if (!(s = r)) goto oom;
        }
        *out = s;
    }
    goto done;
oom_o:
    wgml_free(o.s);
    wgml_free(cur.s);
oom:
    st = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory phonemizing text");
done:
    if (results)
        for (size_t k = 0; k < n_pieces; k++)
            wgml_free(results[k]);
    wgml_free(results);
    wgml_free(pieces);
    wgml_free(buf);
    wgml_free(marks);
    wgml_free(joined);
    wgml_free(t), wgml_free(t1), wgml_free(t2), wgml_free(t3);
    return st;
}
