/*
 * g2p_words.c - where each word of a text is said in its phonemes, for word
 * timestamps (wgml_g2p_phonemize_words in g2p.h).
 *
 * espeak-ng phonemizes a piece of text as a whole and runs words together
 * ("in the" -> "ɪnðə", "that it" -> "ðˌɐɾɪt"), so its spaces do not say
 * where the text's words are. Each word is therefore also phonemized alone,
 * and the piece's phonemes are aligned with those, code point by code point
 * (an edit distance; g2p_align_piece): every code point of the piece then
 * belongs to the word it lines up with. Said alone a word is stressed and
 * sometimes said differently ("to": "tˈuː", in the piece "tə"), which the
 * alignment absorbs: stress and length marks cost little to skip, and a
 * space lines up only with a space.
 *
 * The normalization rewrites words ("$4.99" -> "4 dollars and 99 cents",
 * "Dr." -> "Doctor"), so the normalized words are matched back to the text's
 * own words by spelling (g2p_text_groups); what changed in between becomes
 * one group, timed as one word.
 */
#include "core/alloc.h"
#include "core/error.h"
#include "text/g2p.h"
#include "text/unicode.h"

#include <stdint.h>
#include <string.h>

wgml_status g2p_en_words(const char *norm, const g2p_span *spans, size_t n_spans, g2p_span **words, size_t *n_words,
                         wgml_error *err) {
    *words = NULL;
    *n_words = 0;
    size_t n = 0, cap = 0;
    g2p_span *v = NULL;
    for (size_t s = 0; s < n_spans; s++) {
        if (spans[s].punct) continue;
        const char *t = norm + spans[s].off;
        const size_t len = spans[s].len;
        for (size_t i = 0; i < len;) {
            int cl;
            if (g2p_en_space(uni_decode(t + i, len - i, &cl))) {
                i += (size_t)cl;
                continue;
            }
            size_t j = i;
            while (j < len && !g2p_en_space(uni_decode(t + j, len - j, &cl)))
                j += (size_t)cl;
            if (n == cap) {
                size_t nc = cap ? cap * 2 : 32;
                g2p_span *nv = wgml_realloc(v, nc * sizeof *nv);
                if (!nv) {
                    wgml_free(v);
                    return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory listing the words of a text");
                }
                v = nv, cap = nc;
            }
            v[n++] = (g2p_span){spans[s].off + i, j - i, 0};
            i = j;
        }
    }
    *words = v;
    *n_words = n;
    return WGML_OK;
}

/* ---- aligning a piece's phonemes with its words said alone ---- */

/* Stress and length marks: said alone a word gains or loses them. */
static int weak_mark(uint32_t c) { return c == 0x2C8 || c == 0x2CC || c == 0x2D0 || c == 0x2D1; }

enum { COST_SUB = 3, COST_GAP = 2, COST_GAP_WEAK = 1, COST_INF = 1 << 28 };

static int gap_cost(uint32_t c) { return c == ' ' || weak_mark(c) ? COST_GAP_WEAK : COST_GAP; }

/* The code points of s with every run of white space made one ' '. */
static uint32_t *decode_squeezed(const char *s, size_t *n_out) {
    const size_t len = strlen(s);
    uint32_t *v = wgml_malloc((len + 1) * sizeof *v);
    size_t n = 0;
    if (!v) return NULL;
    for (size_t i = 0; i < len;) {
        int cl;
        uint32_t c = uni_decode(s + i, len - i, &cl);
        i += (size_t)cl;
        if (g2p_en_space(c)) {
            if (n && v[n - 1] == ' ') continue;
            c = ' ';
        }
        v[n++] = c;
    }
    *n_out = n;
    return v;
}

/* Labels by length alone: the non-space code points cut in proportion to
 * each word's (at least 1). */
static void proportional(const size_t *word_len, size_t n, int *labels, size_t n_labels) {
    uint64_t total = 0;
    for (size_t w = 0; w < n; w++)
        total += word_len[w] ? word_len[w] : 1;
    uint64_t acc = 0;
    size_t w = 0;
    for (size_t k = 0; k < n_labels; k++) {
        /* the word whose share holds the middle of code point k */
        const uint64_t pos = (2 * (uint64_t)k + 1) * total;
        while (w + 1 < n && pos >= 2 * (acc + (word_len[w] ? word_len[w] : 1)) * (uint64_t)n_labels)
            acc += word_len[w] ? word_len[w] : 1, w++;
        labels[k] = (int)w;
    }
}

#define ALIGN_MAX_CELLS ((size_t)64 << 20)

wgml_status g2p_align_piece(const char *phonemes, const char *const *word_ph, size_t n, int *labels, size_t n_labels,
                            wgml_error *err) {
    if (!phonemes || !word_ph || !n || (n_labels && !labels))
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "g2p_align_piece: bad arguments");
    wgml_status st = WGML_OK;
    size_t na = 0, nb = 0;
    uint32_t *a = decode_squeezed(phonemes, &na);
    uint32_t *b = NULL;
    int *blab = NULL, *alab = NULL, *row0 = NULL, *row1 = NULL;
    size_t *word_len = wgml_calloc(n, sizeof *word_len);
    unsigned char *tb = NULL;
    if (!a || !word_len) goto oom;
    /* B: the words' code points, a space between words */
    {
        size_t cap = 0;
        for (size_t w = 0; w < n; w++)
            cap += strlen(word_ph[w] ? word_ph[w] : "") + 1;
        if (!(b = wgml_malloc(cap * sizeof *b)) || !(blab = wgml_malloc(cap * sizeof *blab))) goto oom;
        for (size_t w = 0; w < n; w++) {
            size_t m;
            uint32_t *v = decode_squeezed(word_ph[w] ? word_ph[w] : "", &m);
            if (!v) goto oom;
            if (nb && b[nb - 1] != ' ') b[nb] = ' ', blab[nb++] = -1;
            for (size_t k = 0; k < m; k++) {
                if (v[k] == ' ' && (!nb || b[nb - 1] == ' ')) continue;
                b[nb] = v[k];
                blab[nb++] = v[k] == ' ' ? -1 : (int)w;
                word_len[w] += v[k] != ' ';
            }
            wgml_free(v);
        }
    }
    size_t nonspace = 0;
    for (size_t i = 0; i < na; i++)
        nonspace += a[i] != ' ';
    if (nonspace != n_labels) {
        st = wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "g2p_align_piece: %zu labels for %zu code points", n_labels,
                       nonspace);
        goto done;
    }
    if (!n_labels) goto done;
    if ((na + 1) > ALIGN_MAX_CELLS / (nb + 1)) {
        proportional(word_len, n, labels, n_labels);
        goto done;
    }
    /* the edit distance, one row of costs at a time, every step kept for the way back */
    const size_t W = nb + 1;
    if (!(tb = wgml_malloc((na + 1) * W)) || !(row0 = wgml_malloc(W * sizeof *row0)) ||
        !(row1 = wgml_malloc(W * sizeof *row1)) || !(alab = wgml_malloc(na * sizeof *alab)))
        goto oom;
    row0[0] = 0;
    tb[0] = 0;
    for (size_t j = 1; j <= nb; j++)
        row0[j] = row0[j - 1] + gap_cost(b[j - 1]), tb[j] = 2;
    for (size_t i = 1; i <= na; i++) {
        const uint32_t ca = a[i - 1];
        row1[0] = row0[0] + gap_cost(ca);
        tb[i * W] = 1;
        for (size_t j = 1; j <= nb; j++) {
            const uint32_t cb = b[j - 1];
            int diag = COST_INF;
            if (ca == cb)
                diag = row0[j - 1];
            else if (ca != ' ' && cb != ' ')
                diag = row0[j - 1] + COST_SUB;
            const int up = row0[j] + gap_cost(ca), left = row1[j - 1] + gap_cost(cb);
            int best = diag, how = 0;
            if (up < best) best = up, how = 1;
            if (left < best) best = left, how = 2;
            row1[j] = best;
            tb[i * W + j] = (unsigned char)how;
        }
        int *t = row0;
        row0 = row1, row1 = t;
    }
    /* back: each code point of A gets the word of the one of B it lines up with */
    for (size_t i = na, j = nb; i > 0 || j > 0;) {
        const unsigned char how = tb[i * W + j];
        if (i > 0 && j > 0 && how == 0) {
            alab[i - 1] = a[i - 1] == ' ' ? -1 : blab[j - 1];
            i--, j--;
        } else if (i > 0 && (how == 1 || j == 0)) {
            alab[i - 1] = -1;
            i--;
        } else {
            j--;
        }
    }
    /* the code points that line up with nothing take the word of the
     * labelled code point before them in their phoneme word (at its start:
     * the first after them); a phoneme word with none takes the word before
     * it (at the start: the first after it) */
    {
        size_t k = 0;
        int any = 0;
        for (size_t i = 0; i < na; i++)
            any |= alab[i] >= 0;
        if (!any) {
            proportional(word_len, n, labels, n_labels);
            goto done;
        }
        int last = -1;
        for (size_t s = 0; s < na;) {
            if (a[s] == ' ') {
                s++;
                continue;
            }
            size_t e = s;
            while (e < na && a[e] != ' ')
                e++;
            int first_in = -1;
            for (size_t i = s; i < e && first_in < 0; i++)
                first_in = alab[i];
            if (first_in < 0) { /* nothing in this phoneme word lined up: with the word before (or after) */
                first_in = last;
                for (size_t i = e; i < na && first_in < 0; i++)
                    first_in = alab[i];
            }
            int cur = first_in;
            for (size_t i = s; i < e; i++) {
                if (alab[i] >= 0) cur = alab[i];
                labels[k++] = cur;
            }
            last = cur;
            s = e;
        }
    }
done:
    wgml_free(a);
    wgml_free(b);
    wgml_free(blab);
    wgml_free(alab);
    wgml_free(row0);
    wgml_free(row1);
    wgml_free(tb);
    wgml_free(word_len);
    return st;
oom:
    st = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory placing words in their phonemes");
    goto done;
}

/* ---- the normalized words back to the text's ---- */

static int same_word(const char *x, size_t nx, const char *y, size_t ny) {
    if (nx != ny) return 0;
    for (size_t i = 0; i < nx; i++) {
        unsigned char p = (unsigned char)x[i], q = (unsigned char)y[i];
        if (p >= 'A' && p <= 'Z') p += 32;
        if (q >= 'A' && q <= 'Z') q += 32;
        if (p != q) return 0;
    }
    return 1;
}

/* Quotation marks that are not the split's punctuation. */
static int quote_mark(uint32_t c) {
    return c == 0x2018 || c == 0x2019 || c == 0x201A || c == 0x201B || c == 0x201E || c == 0x201F || c == 0x2039 ||
           c == 0x203A || c == '`';
}

/* The last code point of s[from, to) starts at the returned offset. */
static size_t last_cp(const char *s, size_t from, size_t to) {
    size_t p = to - 1;
    while (p > from && ((unsigned char)s[p] & 0xC0) == 0x80)
        p--;
    return p;
}

/* A word as the text has it: [*s, *e) without the split's punctuation and
 * quotation marks at either end ("‘Hello,’" -> Hello), nor a pair of ASCII
 * quotes around it ('quoted'; an apostrophe at one end stays: dogs'). */
static void strip_edges(const char *t, size_t *s, size_t *e) {
    int cl;
    for (;;) {
        while (*s < *e &&
               (g2p_en_split_punct(uni_decode(t + *s, *e - *s, &cl)) || quote_mark(uni_decode(t + *s, *e - *s, &cl))))
            *s += (size_t)cl;
        while (*e > *s) {
            const size_t p = last_cp(t, *s, *e);
            const uint32_t c = uni_decode(t + p, *e - p, &cl);
            if (!g2p_en_split_punct(c) && !quote_mark(c)) break;
            *e = p;
        }
        if (*e - *s >= 2 && t[*s] == '\'' && t[*e - 1] == '\'') {
            (*s)++, (*e)--;
            continue;
        }
        return;
    }
}

static int same_stripped(const char *x, size_t nx, const char *y, size_t ny) {
    size_t s = 0, e = ny;
    strip_edges(y, &s, &e);
    return same_word(x, nx, y + s, e - s);
}

/* When text[from, to) normalizes to words that are the first of the n
 * normalized words nw (and fewer than all), *m gets their count; else 0. */
static wgml_status prefix_words(const char *text, size_t from, size_t to, const char *norm, const g2p_span *nw,
                                size_t n, size_t *m, wgml_error *err) {
    *m = 0;
    char *sub = wgml_malloc(to - from + 1), *sn = NULL;
    g2p_span *spans = NULL, *words = NULL;
    size_t n_spans = 0, n_words = 0;
    if (!sub) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory matching words to the text");
    memcpy(sub, text + from, to - from);
    sub[to - from] = '\0';
    wgml_status st = g2p_en_normalize(sub, &sn, err);
    if (!st) st = g2p_en_split(sn, &spans, &n_spans, err);
    if (!st) st = g2p_en_words(sn, spans, n_spans, &words, &n_words, err);
    if (!st && n_words && n_words < n) {
        size_t k = 0;
        while (k < n_words && same_word(sn + words[k].off, words[k].len, norm + nw[k].off, nw[k].len))
            k++;
        if (k == n_words) *m = n_words;
    }
    wgml_free(sub);
    wgml_free(sn);
    wgml_free(spans);
    wgml_free(words);
    return st;
}

/* How far ahead a changed stretch of text is looked past, in words. */
#define GROUP_WINDOW 16

wgml_status g2p_text_groups(const char *text, const char *norm, const g2p_span *nw, size_t n_norm,
                            g2p_span **text_words, size_t *n_text_words, int *group, wgml_error *err) {
    *text_words = NULL;
    *n_text_words = 0;
    /* the text's words: runs between white space, split punctuation stripped from the ends */
    const size_t len = strlen(text);
    size_t nt = 0, cap = 0;
    g2p_span *tw = NULL, *units = NULL;
    size_t(*pairs)[2] = NULL;
    wgml_status st = WGML_OK;
    for (size_t i = 0; i < len;) {
        int cl;
        if (g2p_en_space(uni_decode(text + i, len - i, &cl))) {
            i += (size_t)cl;
            continue;
        }
        size_t j = i;
        while (j < len && !g2p_en_space(uni_decode(text + j, len - j, &cl)))
            j += (size_t)cl;
        size_t s = i, e = j;
        strip_edges(text, &s, &e);
        if (e > s) {
            if (nt == cap) {
                size_t nc = cap ? cap * 2 : 32;
                g2p_span *nv = wgml_realloc(tw, nc * sizeof *nv);
                if (!nv) goto oom;
                tw = nv, cap = nc;
            }
            tw[nt++] = (g2p_span){s, e - s, 0};
        }
        i = j;
    }
    /* the words that match, as pairs (text word, normalized word) in order */
    if (!(pairs = wgml_malloc((n_norm + 1) * sizeof *pairs))) goto oom;
    size_t np = 0, i = 0, j = 0;
#define EQ(ti, nj) same_stripped(text + tw[ti].off, tw[ti].len, norm + nw[nj].off, nw[nj].len)
    while (i < nt && j < n_norm) {
        if (EQ(i, j)) {
            pairs[np][0] = i++, pairs[np++][1] = j++;
            continue;
        }
        /* a changed stretch: it ends at the nearest pair of words that match
         * with the pair after them too (or at both ends) */
        size_t fa = 0, fb = 0;
        int found = 0;
        for (size_t d = 1; d <= 2 * GROUP_WINDOW && !found; d++)
            for (size_t da = 0; da <= d && !found; da++) {
                const size_t db = d - da;
                if (da > GROUP_WINDOW || db > GROUP_WINDOW || i + da >= nt || j + db >= n_norm) continue;
                if (!EQ(i + da, j + db)) continue;
                const int ends = i + da + 1 == nt && j + db + 1 == n_norm;
                if (ends || (i + da + 1 < nt && j + db + 1 < n_norm && EQ(i + da + 1, j + db + 1)))
                    found = 1, fa = da, fb = db;
            }
        if (!found) { /* nothing near matches: the two words go together */
            i++, j++;
            continue;
        }
        /* inside it, single words that match, each as late as it can be: the
         * normalization writes a word out after it ("$4.99 and" -> "4 dollars
         * and 99 cents and"), so an earlier equal word belongs to that */
        size_t inner = 0, e = j + fb;
        for (size_t t = i + fa; t-- > i + 1;)
            for (size_t y = e; y-- > j + (t - i);)
                if (EQ(t, y)) {
                    pairs[np + inner][0] = t, pairs[np + inner++][1] = y;
                    e = y;
                    break;
                }
        for (size_t a = 0, b = inner; a + 1 < b; a++, b--) { /* found last to first: reverse */
            size_t t0 = pairs[np + a][0], t1 = pairs[np + a][1];
            pairs[np + a][0] = pairs[np + b - 1][0], pairs[np + a][1] = pairs[np + b - 1][1];
            pairs[np + b - 1][0] = t0, pairs[np + b - 1][1] = t1;
        }
        np += inner;
        pairs[np][0] = i + fa, pairs[np++][1] = j + fb;
        i += fa + 1, j += fb + 1;
    }
    /* groups: a text word with the normalized words matched to it, and a
     * stretch of text words with the normalized words between two matches;
     * normalized words with no text word between go with the group before
     * (at the start, the one after); text words with none are not said */
    if (!(units = wgml_malloc((nt ? nt : 1) * sizeof *units))) goto oom;
    size_t nu = 0, pt = 0, pn = 0; /* the next text and normalized word not grouped */
    for (size_t p = 0; p <= np; p++) {
        const size_t et = p < np ? pairs[p][0] : nt, en = p < np ? pairs[p][1] : n_norm;
        if (en > pn) {
            if (et > pt) {
                /* several text words: cut where the text up to one of them normalizes
                 * to the first of the normalized words ("$4.99. Dr." -> "4 dollars
                 * and 99 cents. Doctor": "$4.99" gives the first five) */
                for (size_t k = pt; k + 1 < et && pn < en; k++) {
                    size_t m;
                    if ((st = prefix_words(text, tw[pt].off, tw[k].off + tw[k].len, norm, nw + pn, en - pn, &m, err)))
                        goto fail;
                    if (!m) continue;
                    units[nu] = (g2p_span){tw[pt].off, tw[k].off + tw[k].len - tw[pt].off, 0};
                    for (size_t q = pn; q < pn + m; q++)
                        group[q] = (int)nu;
                    nu++;
                    pn += m, pt = k + 1;
                }
            }
            if (et > pt && en > pn) {
                units[nu] = (g2p_span){tw[pt].off, tw[et - 1].off + tw[et - 1].len - tw[pt].off, 0};
                for (size_t k = pn; k < en; k++)
                    group[k] = (int)nu;
                nu++;
            } else if (et > pt || en <= pn) {
                /* the rest of the text words say nothing, or every normalized word is placed */
            } else if (nu || p < np) {
                for (size_t k = pn; k < en; k++)
                    group[k] = nu ? (int)nu - 1 : 0; /* at the start: the unit made next, index 0 */
            } else {
                units[nu] = (g2p_span){0, 0, 0}; /* no text word at all */
                for (size_t k = pn; k < en; k++)
                    group[k] = (int)nu;
                nu++;
            }
        }
        if (p < np) {
            units[nu] = tw[et];
            group[en] = (int)nu++;
            pt = et + 1, pn = en + 1;
        }
    }
#undef EQ
    wgml_free(tw);
    wgml_free(pairs);
    *text_words = units;
    *n_text_words = nu;
    return WGML_OK;
oom:
    st = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory matching words to the text");
fail:
    wgml_free(tw);
    wgml_free(units);
    wgml_free(pairs);
    return st;
}
