/*
 * g2p_en.c - kokoro-js 1.2.1's text normalization, punctuation split and
 * phoneme post-processing (kokoro.js/src/phonemize.js), rewritten as
 * hand-made scanners over code points (see g2p.h).
 *
 * Every regular expression of phonemize.js is one pass here, in the same
 * order, over an array of code points; each pass reads its input and writes
 * a new array, so lookbehinds see the text as it was before the pass, as in
 * JavaScript's String.replace with /g. Where a pass mirrors a regex, the
 * regex is quoted above it and the comment says how its backtracking
 * reduces to the checks made. JavaScript details that matter:
 *   - \b and \w are ASCII ([A-Za-z0-9_]); \d is [0-9];
 *   - \s is JavaScript's white space (js_space below), not Unicode's
 *     White_Space property (it has U+FEFF, lacks U+0085);
 *   - /i only folds ASCII letters here (no non-ASCII character folds to an
 *     ASCII one in non-Unicode mode);
 *   - the whitespace squeeze `.replace(/  +/, " ")` has no /g: only the
 *     first run of spaces shrinks.
 * Code points above U+FFFF are two UTF-16 units in JavaScript, but none of
 * the patterns can match any part of one, so working on code points changes
 * nothing.
 */
#include "core/alloc.h"
#include "core/error.h"
#include "text/g2p.h"
#include "text/unicode.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- code point buffers ---- */

typedef struct {
    uint32_t *v;
    size_t n, cap;
    int oom;
} cpbuf;

static void cb_free(cpbuf *b) {
    wgml_free(b->v);
    b->v = NULL;
    b->n = b->cap = 0;
}

static int cb_reserve(cpbuf *b, size_t extra) {
    if (b->oom) return 0;
    if (b->n + extra <= b->cap) return 1;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->n + extra) {
        if (cap > SIZE_MAX / 2 / sizeof *b->v) {
            b->oom = 1;
            return 0;
        }
        cap *= 2;
    }
    uint32_t *v = wgml_realloc(b->v, cap * sizeof *v);
    if (!v) {
        b->oom = 1;
        return 0;
    }
    b->v = v;
    b->cap = cap;
    return 1;
}

static void cb_push(cpbuf *b, uint32_t c) {
    if (cb_reserve(b, 1)) b->v[b->n++] = c;
}

static void cb_push_range(cpbuf *b, const uint32_t *s, size_t n) {
    if (n && cb_reserve(b, n)) {
        memcpy(b->v + b->n, s, n * sizeof *s);
        b->n += n;
    }
}

/* Appends a UTF-8 string literal. */
static void cb_push_str(cpbuf *b, const char *s) {
    size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        int len;
        cb_push(b, uni_decode(s + i, n - i, &len));
        i += (size_t)len;
    }
}

/* The text being rewritten: the code points and an accessor that gives 0
 * (no character; text never holds U+0000) outside it. */
typedef struct {
    const uint32_t *v;
    size_t n;
} cptext;

static uint32_t at(const cptext *t, size_t i) { return i < t->n ? t->v[i] : 0; }
static uint32_t before(const cptext *t, size_t i) { return i > 0 && i <= t->n ? t->v[i - 1] : 0; }

/* Does the UTF-8 literal lit occur at t[i]? Returns its length in code points, or 0. */
static size_t match_lit(const cptext *t, size_t i, const char *lit) {
    size_t n = strlen(lit), k = 0;
    for (size_t j = 0; j < n; k++) {
        int len;
        uint32_t c = uni_decode(lit + j, n - j, &len);
        if (at(t, i + k) != c) return 0;
        j += (size_t)len;
    }
    return k;
}

/* ---- character classes, as JavaScript's regexes see them ---- */

static int is_digit(uint32_t c) { return c >= '0' && c <= '9'; }
static int is_upper(uint32_t c) { return c >= 'A' && c <= 'Z'; }
static int is_lower(uint32_t c) { return c >= 'a' && c <= 'z'; }
static int is_alpha(uint32_t c) { return is_upper(c) || is_lower(c); }
static int is_word(uint32_t c) { return is_alpha(c) || is_digit(c) || c == '_'; }
static uint32_t ascii_lower(uint32_t c) { return is_upper(c) ? c + 32 : c; }

/* JavaScript's \s: WhiteSpace (TAB VT FF SP NBSP ZWNBSP and category Zs)
 * and LineTerminator (LF CR LS PS). */
int g2p_en_space(uint32_t c) {
    return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) ||
           c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000 || c == 0xFEFF;
}

static int js_space(uint32_t c) { return g2p_en_space(c); }

/* \b at i: a word character on exactly one side. */
static int boundary(const cptext *t, size_t i) { return is_word(before(t, i)) != is_word(at(t, i)); }

/* Case-insensitive ASCII literal at t[i] (the /i regexes); returns its length or 0. */
static size_t match_ci(const cptext *t, size_t i, const char *lit) {
    size_t k = 0;
    for (; lit[k]; k++)
        if (ascii_lower(at(t, i + k)) != ascii_lower((unsigned char)lit[k])) return 0;
    return k;
}

static void push_ascii(cpbuf *b, const char *s) {
    while (*s)
        cb_push(b, (unsigned char)*s++);
}

static void push_long(cpbuf *b, long v) {
    char num[32];
    snprintf(num, sizeof num, "%ld", v);
    push_ascii(b, num);
}

/* ---- UTF-8 in and out ---- */

wgml_status g2p_check_utf8(const char *text, wgml_error *err) {
    size_t n = strlen(text);
    for (size_t i = 0; i < n;) {
        int len;
        uint32_t c = uni_decode(text + i, n - i, &len);
        if (UNI_IS_BYTE(c))
            return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "text is not valid UTF-8 (byte 0x%02X at offset %zu)",
                             (unsigned)(c & 0xFF), i);
        i += (size_t)len;
    }
    return WGML_OK;
}

static wgml_status decode(const char *text, cpbuf *out, wgml_error *err) {
    wgml_status st = g2p_check_utf8(text, err);
    if (st) return st;
    size_t n = strlen(text);
    if (!cb_reserve(out, n + 1)) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory decoding text");
    for (size_t i = 0; i < n;) {
        int len;
        out->v[out->n++] = uni_decode(text + i, n - i, &len);
        i += (size_t)len;
    }
    return WGML_OK;
}

static wgml_status encode(const cpbuf *b, char **out, wgml_error *err) {
    size_t bytes = 1;
    for (size_t i = 0; i < b->n; i++) {
        char tmp[4];
        bytes += (size_t)uni_encode(b->v[i], tmp);
    }
    char *s = wgml_malloc(bytes), *p = s;
    if (!s) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory encoding text");
    for (size_t i = 0; i < b->n; i++)
        p += uni_encode(b->v[i], p);
    *p = '\0';
    *out = s;
    return WGML_OK;
}

/* ---- JavaScript number formatting ---- */

/* String(parseInt(digits, 10)) for a string of ASCII digits (at least one):
 * exact below 10^15; beyond, the double's shortest round-trip digits as
 * Number.prototype.toString prints them (integers up to 21 digits, then
 * exponent form, then "Infinity"). */
static void push_js_int(cpbuf *b, const uint32_t *d, size_t n) {
    while (n > 1 && d[0] == '0')
        d++, n--;
    if (n <= 15) {
        for (size_t i = 0; i < n; i++)
            cb_push(b, d[i]);
        return;
    }
    char *s = wgml_malloc(n + 1);
    if (!s) {
        b->oom = 1;
        return;
    }
    for (size_t i = 0; i < n; i++)
        s[i] = (char)d[i];
    s[n] = '\0';
    double v = strtod(s, NULL);
    wgml_free(s);
    if (isinf(v)) {
        push_ascii(b, "Infinity");
        return;
    }
    char e[40];
    for (int p = 1; p <= 17; p++) {
        snprintf(e, sizeof e, "%.*e", p - 1, v);
        if (strtod(e, NULL) == v) break;
    }
    /* e is "d[.ddd]e+XX": mantissa digits and the decimal exponent */
    char digits[24];
    int k = 0;
    const char *q = e;
    for (; *q && *q != 'e'; q++)
        if (*q >= '0' && *q <= '9') digits[k++] = *q;
    while (k > 1 && digits[k - 1] == '0')
        k--;
    digits[k] = '\0';
    int exp10 = atoi(q + 1), nd = exp10 + 1; /* value = 0.digits * 10^nd */
    char out[64];
    if (nd <= 21) {
        int m = 0;
        for (int i = 0; i < nd; i++)
            out[m++] = i < k ? digits[i] : '0';
        out[m] = '\0';
    } else if (k == 1) {
        snprintf(out, sizeof out, "%ce+%d", digits[0], nd - 1);
    } else {
        snprintf(out, sizeof out, "%c.%se+%d", digits[0], digits + 1, nd - 1);
    }
    push_ascii(b, out);
}

/* ---- normalize_text(), pass by pass ---- */

typedef void (*pass_fn)(const cptext *in, cpbuf *out);

/* 1. .replace(/[‘’]/g, "'").replace(/«/g, "“").replace(/»/g, "”")
 *    .replace(/[“”]/g, '"').replace(/\(/g, "«").replace(/\)/g, "»") */
static void pass_quotes(const cptext *in, cpbuf *out) {
    for (size_t i = 0; i < in->n; i++) {
        uint32_t c = in->v[i];
        if (c == 0x2018 || c == 0x2019)
            c = '\'';
        else if (c == 0xAB || c == 0xBB || c == 0x201C || c == 0x201D)
            c = '"';
        else if (c == '(')
            c = 0xAB;
        else if (c == ')')
            c = 0xBB;
        cb_push(out, c);
    }
}

/* 2. 、。！，：；？ -> ", " ". " "! " ", " ": " "; " "? " */
static void pass_cjk(const cptext *in, cpbuf *out) {
    for (size_t i = 0; i < in->n; i++) {
        uint32_t c = in->v[i], r = 0;
        switch (c) {
        case 0x3001: r = ','; break;
        case 0x3002: r = '.'; break;
        case 0xFF01: r = '!'; break;
        case 0xFF0C: r = ','; break;
        case 0xFF1A: r = ':'; break;
        case 0xFF1B: r = ';'; break;
        case 0xFF1F: r = '?'; break;
        }
        if (r) {
            cb_push(out, r);
            cb_push(out, ' ');
        } else {
            cb_push(out, c);
        }
    }
}

/* 3. .replace(/[^\S \n]/g, " ").replace(/  +/, " ").replace(/(?<=\n) +(?=\n)/g, "")
 * The squeeze has no /g: only the first run of two or more spaces (after
 * the first replacement) becomes one space. A run of spaces between two
 * line ends goes; any shorter span would be followed by a space, not \n. */
static void pass_space(const cptext *in, cpbuf *out) {
    cpbuf a = {0};
    for (size_t i = 0; i < in->n; i++) {
        uint32_t c = in->v[i];
        cb_push(&a, js_space(c) && c != ' ' && c != '\n' ? ' ' : c);
    }
    if (a.oom) {
        out->oom = 1;
        cb_free(&a);
        return;
    }
    cpbuf b = {0};
    int squeezed = 0;
    for (size_t i = 0; i < a.n;) {
        if (!squeezed && a.v[i] == ' ' && i + 1 < a.n && a.v[i + 1] == ' ') {
            squeezed = 1;
            while (i < a.n && a.v[i] == ' ')
                i++;
            cb_push(&b, ' ');
        } else {
            cb_push(&b, a.v[i++]);
        }
    }
    cb_free(&a);
    if (b.oom) {
        out->oom = 1;
        cb_free(&b);
        return;
    }
    for (size_t i = 0; i < b.n;) {
        if (b.v[i] == ' ' && i > 0 && b.v[i - 1] == '\n') {
            size_t j = i;
            while (j < b.n && b.v[j] == ' ')
                j++;
            if (j < b.n && b.v[j] == '\n') {
                i = j;
                continue;
            }
        }
        cb_push(out, b.v[i++]);
    }
    cb_free(&b);
}

/* 4. Titles:
 *   /\bD[Rr]\.(?= [A-Z])/g                -> "Doctor"
 *   /\b(?:Mr\.|MR\.(?= [A-Z]))/g          -> "Mister"
 *   /\b(?:Ms\.|MS\.(?= [A-Z]))/g          -> "Miss"
 *   /\b(?:Mrs\.|MRS\.(?= [A-Z]))/g        -> "Mrs"
 *   /\betc\.(?! [A-Z])/gi                 -> "etc" (/i: [A-Z] takes a-z too)
 * Each is its own pass, in this order. */
static int followed_by_space_upper(const cptext *t, size_t i) { return at(t, i) == ' ' && is_upper(at(t, i + 1)); }

static void pass_doctor(const cptext *in, cpbuf *out) {
    for (size_t i = 0; i < in->n;) {
        if (in->v[i] == 'D' && boundary(in, i) && (at(in, i + 1) == 'R' || at(in, i + 1) == 'r') &&
            at(in, i + 2) == '.' && followed_by_space_upper(in, i + 3)) {
            push_ascii(out, "Doctor");
            i += 3;
        } else {
            cb_push(out, in->v[i++]);
        }
    }
}

/* The title passes other than Doctor: `mixed` ("Mr.") always, `upper`
 * ("MR.") only before a space and a capital. */
static void pass_title(const cptext *in, cpbuf *out, const char *mixed, const char *upper, const char *with) {
    size_t len = strlen(mixed);
    for (size_t i = 0; i < in->n;) {
        if (in->v[i] == 'M' && boundary(in, i)) {
            size_t k;
            for (k = 0; k < len && at(in, i + k) == (unsigned char)mixed[k]; k++) {}
            int hit = k == len;
            if (!hit) {
                for (k = 0; k < len && at(in, i + k) == (unsigned char)upper[k]; k++) {}
                hit = k == len && followed_by_space_upper(in, i + len);
            }
            if (hit) {
                push_ascii(out, with);
                i += len;
                continue;
            }
        }
        cb_push(out, in->v[i++]);
    }
}

static void pass_mister(const cptext *in, cpbuf *out) { pass_title(in, out, "Mr.", "MR.", "Mister"); }
static void pass_miss(const cptext *in, cpbuf *out) { pass_title(in, out, "Ms.", "MS.", "Miss"); }
static void pass_mrs(const cptext *in, cpbuf *out) { pass_title(in, out, "Mrs.", "MRS.", "Mrs"); }

static void pass_etc(const cptext *in, cpbuf *out) {
    for (size_t i = 0; i < in->n;) {
        if (boundary(in, i) && match_ci(in, i, "etc.") && !(at(in, i + 4) == ' ' && is_alpha(at(in, i + 5)))) {
            push_ascii(out, "etc");
            i += 4;
        } else {
            cb_push(out, in->v[i++]);
        }
    }
}

/* 5. /\b(y)eah?\b/gi -> "$1e'a": the y keeps its case. The h is greedy:
 * "yeah" when a non-word follows it, else "yea" when a non-word follows
 * (an h there would be a word character). */
static void pass_yeah(const cptext *in, cpbuf *out) {
    for (size_t i = 0; i < in->n;) {
        size_t len = 0;
        if (boundary(in, i) && match_ci(in, i, "yea")) {
            if (ascii_lower(at(in, i + 3)) == 'h' && !is_word(at(in, i + 4)))
                len = 4;
            else if (!is_word(at(in, i + 3)))
                len = 3;
        }
        if (len) {
            cb_push(out, in->v[i]);
            push_ascii(out, "e'a");
            i += len;
        } else {
            cb_push(out, in->v[i++]);
        }
    }
}

/* 6. /\d*\.\d+|\b\d{4}s?\b|(?<!:)\b(?:[1-9]|1[0-2]):[0-5]\d\b(?!:)/g -> split_num
 * The alternatives are tried in order at each position. */

/* \d*\.\d+ at i: \d* is greedy and only a '.' may follow it, so the match
 * is the digit run, a '.', and the digit run after it. Returns its length or 0. */
static size_t match_decimal(const cptext *t, size_t i) {
    size_t j = i;
    while (is_digit(at(t, j)))
        j++;
    if (at(t, j) != '.' || !is_digit(at(t, j + 1))) return 0;
    j++;
    while (is_digit(at(t, j)))
        j++;
    return j - i;
}

static void split_num_year(const cptext *in, size_t i, size_t len, cpbuf *out) {
    const uint32_t *m = in->v + i;
    int year = (int)((m[0] - '0') * 1000 + (m[1] - '0') * 100 + (m[2] - '0') * 10 + (m[3] - '0'));
    if (year < 1100 || year % 1000 < 10) {
        cb_push_range(out, m, len);
        return;
    }
    int right = (int)((m[2] - '0') * 10 + (m[3] - '0'));
    const char *suffix = len == 5 ? "s" : "";
    cb_push_range(out, m, 2);
    if (year % 1000 >= 100 && right == 0) {
        push_ascii(out, " hundred");
    } else if (year % 1000 >= 100 && right < 10) {
        push_ascii(out, " oh ");
        push_long(out, right);
    } else {
        cb_push(out, ' ');
        push_long(out, right);
    }
    push_ascii(out, suffix);
}

static void pass_numbers(const cptext *in, cpbuf *out) {
    for (size_t i = 0; i < in->n;) {
        size_t len = match_decimal(in, i);
        if (len) { /* split_num leaves anything with a '.' as it is */
            cb_push_range(out, in->v + i, len);
            i += len;
            continue;
        }
        /* \b\d{4}s?\b: the s is greedy; without it a following s would be a word character */
        if (boundary(in, i) && is_digit(at(in, i)) && is_digit(at(in, i + 1)) && is_digit(at(in, i + 2)) &&
            is_digit(at(in, i + 3))) {
            len = at(in, i + 4) == 's' && !is_word(at(in, i + 5)) ? 5 : !is_word(at(in, i + 4)) ? 4 : 0;
            if (len) {
                split_num_year(in, i, len, out);
                i += len;
                continue;
            }
        }
        /* (?<!:)\b(?:[1-9]|1[0-2]):[0-5]\d\b(?!:): the hour is one digit when
         * a ':' follows it, else 10-12 */
        if (before(in, i) != ':' && boundary(in, i)) {
            uint32_t c0 = at(in, i), c1 = at(in, i + 1);
            size_t h = c0 >= '1' && c0 <= '9' && c1 == ':'                           ? 1
                       : c0 == '1' && c1 >= '0' && c1 <= '2' && at(in, i + 2) == ':' ? 2
                                                                                     : 0;
            if (h) {
                uint32_t m0 = at(in, i + h + 1), m1 = at(in, i + h + 2), next = at(in, i + h + 3);
                if (m0 >= '0' && m0 <= '5' && is_digit(m1) && !is_word(next) && next != ':') {
                    long hour = h == 1 ? (long)(c0 - '0') : (long)(10 + c1 - '0');
                    long minute = (long)((m0 - '0') * 10 + (m1 - '0'));
                    push_long(out, hour);
                    if (minute == 0) {
                        push_ascii(out, " o'clock");
                    } else {
                        push_ascii(out, minute < 10 ? " oh " : " ");
                        push_long(out, minute);
                    }
                    i += h + 3;
                    continue;
                }
            }
        }
        cb_push(out, in->v[i++]);
    }
}

/* 7. /(?<=\d),(?=\d)/g -> "" */
static void pass_thousands(const cptext *in, cpbuf *out) {
    for (size_t i = 0; i < in->n; i++) {
        if (in->v[i] == ',' && is_digit(before(in, i)) && is_digit(at(in, i + 1))) continue;
        cb_push(out, in->v[i]);
    }
}

/* 8. /[$£]\d+(?:\.\d+)?(?: hundred| thousand| (?:[bm]|tr)illion)*\b|[$£]\d+\.\d\d?\b/gi -> flip_money
 * Backtracking, in the order JavaScript tries it: the digit runs are only
 * ever taken whole (a shorter run leaves a digit next, where neither a
 * '.', a word nor \b can follow); with the decimals first, then without;
 * for each, the most scale words that end at \b (dropping the last word
 * leaves a space next, so one fewer always works). Without decimals after a
 * '.', \b holds, so the first alternative matches whenever the second
 * could: the second never decides anything. */
static size_t scale_word(const cptext *t, size_t i) {
    static const char *words[] = {" hundred", " thousand", " billion", " million", " trillion"};
    for (size_t w = 0; w < sizeof words / sizeof words[0]; w++) {
        size_t len = match_ci(t, i, words[w]);
        if (len) return len;
    }
    return 0;
}

/* The end of the match given where the number ends (e), or 0 if none. */
static size_t money_end(const cptext *t, size_t e) {
    size_t ends[64], n = 0, p = e;
    for (size_t len; (len = scale_word(t, p)) != 0; p += len) {
        if (n == sizeof ends / sizeof ends[0]) { /* keep the last ones: only the last two can matter */
            memmove(ends, ends + 1, (n - 1) * sizeof *ends);
            n--;
        }
        ends[n++] = p + len;
    }
    if (n && !is_word(at(t, ends[n - 1]))) return ends[n - 1];
    if (n) return n >= 2 ? ends[n - 2] : e; /* the word before the last is followed by a space */
    return !is_word(at(t, e)) ? e : 0;
}

static void flip_money(const cptext *in, size_t start, size_t int_end, size_t num_end, size_t end, cpbuf *out) {
    const int dollar = in->v[start] == '$';
    const char *bill = dollar ? "dollar" : "pound";
    const uint32_t *b = in->v + start + 1;
    size_t nb = int_end - start - 1;
    int b_is_one = nb == 1 && b[0] == '1';
    if (end > num_end) { /* scale words: Number() gives NaN */
        cb_push_range(out, b, end - start - 1);
        cb_push(out, ' ');
        push_ascii(out, bill);
        cb_push(out, 's');
        return;
    }
    if (num_end == int_end) { /* whole units */
        cb_push_range(out, b, nb);
        cb_push(out, ' ');
        push_ascii(out, bill);
        if (!b_is_one) cb_push(out, 's');
        return;
    }
    /* `${b} ${bill}${b === "1" ? "" : "s"} and ${d} ${coins}`, d = parseInt(c.padEnd(2, "0")) */
    cb_push_range(out, b, nb);
    cb_push(out, ' ');
    push_ascii(out, bill);
    if (!b_is_one) cb_push(out, 's');
    push_ascii(out, " and ");
    const uint32_t *c = in->v + int_end + 1;
    size_t nc = num_end - int_end - 1;
    uint32_t padded[2];
    if (nc == 1) {
        padded[0] = c[0];
        padded[1] = '0';
        c = padded;
        nc = 2;
    }
    size_t z = 0;
    while (z + 1 < nc && c[z] == '0')
        z++;
    int d_is_one = nc - z == 1 && c[z] == '1';
    push_js_int(out, c, nc);
    cb_push(out, ' ');
    push_ascii(out, dollar ? (d_is_one ? "cent" : "cents") : (d_is_one ? "penny" : "pence"));
}

static void pass_money(const cptext *in, cpbuf *out) {
    for (size_t i = 0; i < in->n;) {
        if ((in->v[i] == '$' || in->v[i] == 0xA3) && is_digit(at(in, i + 1))) {
            size_t p = i + 1;
            while (is_digit(at(in, p)))
                p++;
            size_t q = 0, end = 0;
            if (at(in, p) == '.' && is_digit(at(in, p + 1))) {
                q = p + 1;
                while (is_digit(at(in, q)))
                    q++;
                end = money_end(in, q);
            }
            if (end) {
                flip_money(in, i, p, q, end, out);
            } else if ((end = money_end(in, p)) != 0) {
                flip_money(in, i, p, p, end, out);
            }
            if (end) {
                i = end;
                continue;
            }
        }
        cb_push(out, in->v[i++]);
    }
}

/* 9. /\d*\.\d+/g -> point_num: `${a} point ${b.split("").join(" ")}` */
static void pass_point(const cptext *in, cpbuf *out) {
    for (size_t i = 0; i < in->n;) {
        size_t len = match_decimal(in, i);
        if (!len) {
            cb_push(out, in->v[i++]);
            continue;
        }
        size_t dot = i;
        while (in->v[dot] != '.')
            dot++;
        cb_push_range(out, in->v + i, dot - i);
        push_ascii(out, " point ");
        for (size_t k = dot + 1; k < i + len; k++) {
            if (k > dot + 1) cb_push(out, ' ');
            cb_push(out, in->v[k]);
        }
        i += len;
    }
}

/* 10. /(?<=\d)-(?=\d)/g -> " to "; 11. /(?<=\d)S/g -> " S" */
static void pass_range(const cptext *in, cpbuf *out) {
    for (size_t i = 0; i < in->n; i++) {
        if (in->v[i] == '-' && is_digit(before(in, i)) && is_digit(at(in, i + 1)))
            push_ascii(out, " to ");
        else
            cb_push(out, in->v[i]);
    }
}

static void pass_digit_s(const cptext *in, cpbuf *out) {
    for (size_t i = 0; i < in->n; i++) {
        if (in->v[i] == 'S' && is_digit(before(in, i))) cb_push(out, ' ');
        cb_push(out, in->v[i]);
    }
}

/* 12. /(?<=[BCDFGHJ-NP-TV-Z])'?s\b/g -> "'S": after a capital consonant,
 * "'s" or "s" at the end of a word. */
static int capital_consonant(uint32_t c) {
    return is_upper(c) && c != 'A' && c != 'E' && c != 'I' && c != 'O' && c != 'U';
}

static void pass_possessive(const cptext *in, cpbuf *out) {
    for (size_t i = 0; i < in->n;) {
        size_t len = 0;
        if (capital_consonant(before(in, i))) {
            if (in->v[i] == '\'' && at(in, i + 1) == 's' && !is_word(at(in, i + 2)))
                len = 2;
            else if (in->v[i] == 's' && !is_word(at(in, i + 1)))
                len = 1;
        }
        if (len) {
            push_ascii(out, "'S");
            i += len;
        } else {
            cb_push(out, in->v[i++]);
        }
    }
}

/* 13. /(?<=X')S\b/g -> "s" */
static void pass_x_possessive(const cptext *in, cpbuf *out) {
    for (size_t i = 0; i < in->n; i++) {
        uint32_t c = in->v[i];
        if (c == 'S' && i >= 2 && in->v[i - 2] == 'X' && in->v[i - 1] == '\'' && !is_word(at(in, i + 1))) c = 's';
        cb_push(out, c);
    }
}

/* 14. /(?:[A-Za-z]\.){2,} [a-z]/g -> the dots become '-': only the longest
 * run of letter-dot pairs can be followed by " [a-z]" (a shorter one has a
 * letter next). */
static void pass_initialisms(const cptext *in, cpbuf *out) {
    for (size_t i = 0; i < in->n;) {
        size_t r = 0;
        while (is_alpha(at(in, i + 2 * r)) && at(in, i + 2 * r + 1) == '.')
            r++;
        if (r >= 2 && at(in, i + 2 * r) == ' ' && is_lower(at(in, i + 2 * r + 1))) {
            for (size_t k = 0; k < 2 * r + 2; k++)
                cb_push(out, in->v[i + k] == '.' ? '-' : in->v[i + k]);
            i += 2 * r + 2;
        } else {
            cb_push(out, in->v[i++]);
        }
    }
}

/* 15. /(?<=[A-Z])\.(?=[A-Z])/gi -> "-" (/i: letters of either case) */
static void pass_letter_dots(const cptext *in, cpbuf *out) {
    for (size_t i = 0; i < in->n; i++) {
        uint32_t c = in->v[i];
        if (c == '.' && is_alpha(before(in, i)) && is_alpha(at(in, i + 1))) c = '-';
        cb_push(out, c);
    }
}

/* 16. .trim() */
static void pass_trim(const cptext *in, cpbuf *out) {
    size_t a = 0, b = in->n;
    while (a < b && js_space(in->v[a]))
        a++;
    while (b > a && js_space(in->v[b - 1]))
        b--;
    cb_push_range(out, in->v + a, b - a);
}

/* Runs the passes in order over b (replaced by the result). */
static wgml_status run_passes(cpbuf *b, const pass_fn *passes, size_t n, const char *what, wgml_error *err) {
    for (size_t k = 0; k < n; k++) {
        cptext in = {b->v, b->n};
        cpbuf out = {0};
        cb_reserve(&out, b->n + 16);
        passes[k](&in, &out);
        if (out.oom) {
            cb_free(&out);
            return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory in the %s", what);
        }
        cb_free(b);
        *b = out;
    }
    return WGML_OK;
}

wgml_status g2p_en_normalize(const char *text, char **out, wgml_error *err) {
    static const pass_fn passes[] = {
        pass_quotes,  pass_cjk,        pass_space,        pass_doctor,      pass_mister,      pass_miss,  pass_mrs,
        pass_etc,     pass_yeah,       pass_numbers,      pass_thousands,   pass_money,       pass_point, pass_range,
        pass_digit_s, pass_possessive, pass_x_possessive, pass_initialisms, pass_letter_dots, pass_trim,
    };
    *out = NULL;
    cpbuf b = {0};
    wgml_status st = decode(text, &b, err);
    if (!st) st = run_passes(&b, passes, sizeof passes / sizeof passes[0], "text normalization", err);
    if (!st) st = encode(&b, out, err);
    cb_free(&b);
    return st;
}

/* ---- the split ---- */

static int in_set(uint32_t c, const uint32_t *set, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (set[i] == c) return 1;
    return 0;
}

/* PUNCTUATION = ';:,.!?¡¿—…"«»“”(){}[]' */
int g2p_en_split_punct(uint32_t c) {
    static const uint32_t set[] = {';',  ':',  ',',    '.',    '!', '?', 0xA1, 0xBF, 0x2014, 0x2026, '"',
                                   0xAB, 0xBB, 0x201C, 0x201D, '(', ')', '{',  '}',  '[',    ']'};
    return in_set(c, set, sizeof set / sizeof set[0]);
}

/* (\s*[...]+\s*)+ from a position matches when the white space there runs
 * into punctuation; the match then takes every following white space and
 * punctuation character. Positions inside a run of white space that does
 * not reach punctuation all fail, so the scan skips the run. */
wgml_status g2p_en_split(const char *text, g2p_span **spans, size_t *n_spans, wgml_error *err) {
    *spans = NULL;
    *n_spans = 0;
    size_t len = strlen(text), n = 0, cap = 0, seg = 0;
    g2p_span *v = NULL;
    for (size_t i = 0; i <= len;) {
        size_t j = i, k = 0;
        int hit = 0;
        if (i < len) {
            int cl;
            while (j < len && js_space(uni_decode(text + j, len - j, &cl)))
                j += (size_t)cl;
            if (j < len && g2p_en_split_punct(uni_decode(text + j, len - j, &cl))) {
                hit = 1;
                k = j;
                for (uint32_t c; k < len && (c = uni_decode(text + k, len - k, &cl), js_space(c) || g2p_en_split_punct(c));)
                    k += (size_t)cl;
            }
        }
        /* at most two spans to add: the text before the match, and the match (or the tail at the end) */
        if (n + 2 > cap) {
            size_t nc = cap ? cap * 2 : 16;
            g2p_span *nv = wgml_realloc(v, nc * sizeof *nv);
            if (!nv) {
                wgml_free(v);
                return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory splitting text");
            }
            v = nv;
            cap = nc;
        }
        if (i == len) {
            if (seg < len) v[n++] = (g2p_span){seg, len - seg, 0};
            break;
        }
        if (hit) {
            if (seg < i) v[n++] = (g2p_span){seg, i - seg, 0};
            v[n++] = (g2p_span){i, k - i, 1};
            i = seg = k;
        } else if (j > i) {
            i = j;
        } else {
            i += (size_t)uni_char_len(text + i, len - i);
        }
    }
    *spans = v;
    *n_spans = n;
    return WGML_OK;
}

/* ---- post-processing ---- */

/* .replace(/kəkˈoːɹoʊ/g, "kˈoʊkəɹoʊ").replace(/kəkˈɔːɹəʊ/g, "kˈəʊkəɹəʊ") */
static void pass_kokoro(const cptext *in, cpbuf *out) {
    for (size_t i = 0; i < in->n;) {
        size_t len;
        if ((len = match_lit(in, i, "kəkˈoːɹoʊ")) != 0) {
            cb_push_str(out, "kˈoʊkəɹoʊ");
            i += len;
        } else {
            cb_push(out, in->v[i++]);
        }
    }
}

static void pass_kokoro_gb(const cptext *in, cpbuf *out) {
    for (size_t i = 0; i < in->n;) {
        size_t len;
        if ((len = match_lit(in, i, "kəkˈɔːɹəʊ")) != 0) {
            cb_push_str(out, "kˈəʊkəɹəʊ");
            i += len;
        } else {
            cb_push(out, in->v[i++]);
        }
    }
}

/* .replace(/ʲ/g, "j").replace(/r/g, "ɹ").replace(/x/g, "k").replace(/ɬ/g, "l") */
static void pass_letters(const cptext *in, cpbuf *out) {
    for (size_t i = 0; i < in->n; i++) {
        uint32_t c = in->v[i];
        if (c == 0x2B2)
            c = 'j';
        else if (c == 'r')
            c = 0x279;
        else if (c == 'x')
            c = 'k';
        else if (c == 0x26C)
            c = 'l';
        cb_push(out, c);
    }
}

/* .replace(/(?<=[a-zɹː])(?=hˈʌndɹɪd)/g, " ") */
static void pass_hundred(const cptext *in, cpbuf *out) {
    for (size_t i = 0; i < in->n; i++) {
        uint32_t p = before(in, i);
        if ((is_lower(p) || p == 0x279 || p == 0x2D0) && match_lit(in, i, "hˈʌndɹɪd")) cb_push(out, ' ');
        cb_push(out, in->v[i]);
    }
}

/* .replace(/ z(?=[;:,.!?¡¿—…"«»“” ]|$)/g, "z") */
static int z_follow(uint32_t c) {
    static const uint32_t set[] = {';',    ':',    ',', '.',  '!',  '?',    0xA1,   0xBF,
                                   0x2014, 0x2026, '"', 0xAB, 0xBB, 0x201C, 0x201D, ' '};
    return in_set(c, set, sizeof set / sizeof set[0]);
}

static void pass_z(const cptext *in, cpbuf *out) {
    for (size_t i = 0; i < in->n; i++) {
        if (in->v[i] == ' ' && at(in, i + 1) == 'z' && (i + 2 == in->n || z_follow(in->v[i + 2]))) continue;
        cb_push(out, in->v[i]);
    }
}

/* American English: .replace(/(?<=nˈaɪn)ti(?!ː)/g, "di") */
static void pass_ninety(const cptext *in, cpbuf *out) {
    for (size_t i = 0; i < in->n; i++) {
        uint32_t c = in->v[i];
        if (c == 't' && at(in, i + 1) == 'i' && at(in, i + 2) != 0x2D0 && i >= 5 && match_lit(in, i - 5, "nˈaɪn") == 5)
            c = 'd';
        cb_push(out, c);
    }
}

wgml_status g2p_en_postprocess(const char *phonemes, int american, char **out, wgml_error *err) {
    static const pass_fn common[] = {pass_kokoro, pass_kokoro_gb, pass_letters, pass_hundred, pass_z};
    static const pass_fn us[] = {pass_ninety};
    static const pass_fn trim[] = {pass_trim};
    *out = NULL;
    cpbuf b = {0};
    wgml_status st = decode(phonemes, &b, err);
    if (!st) st = run_passes(&b, common, sizeof common / sizeof common[0], "phoneme post-processing", err);
    if (!st && american) st = run_passes(&b, us, 1, "phoneme post-processing", err);
    if (!st) st = run_passes(&b, trim, 1, "phoneme post-processing", err);
    if (!st) st = encode(&b, out, err);
    cb_free(&b);
    return st;
}

int g2p_en_american(const char *lang) {
    if (!lang) return -1;
    if (!strcmp(lang, "en-us") || !strcmp(lang, "a")) return 1;
    if (!strcmp(lang, "en-gb") || !strcmp(lang, "b")) return 0;
    return -1;
}
