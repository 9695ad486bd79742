/*
 * json_schema.c - a JSON Schema as GBNF (json_schema.h).
 *
 * The schema is read into values with the chat module's JSON reader (a
 * jinja_env arena: chat/jinja_impl.h) and walked once; each schema node
 * becomes a rule named after where it is (properties' names, "item", ...),
 * numbered to be unique. $ref targets are converted once and named before
 * their body is written, so a schema may refer to itself (recursion). The
 * primitives (string, number, any value, ...) are written once, at the end,
 * for the rules that used them.
 *
 * Integers with bounds become exact digit-by-digit ranges: [lo, hi] is split
 * by digit count, and each same-length range a..b by its first digit: a0
 * followed by (rest of a)..99, the digits between a0 and b0 followed by any
 * digits, b0 followed by 00..(rest of b).
 */
#include "text/json_schema.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/jinja.h"
#include "chat/jinja_impl.h"
#include "core/alloc.h"
#include "core/error.h"

#define MAX_DEPTH 64
#define MAX_DIGITS 15 /* of an integer, and of a fraction */
#define MAX_ABS 999999999999999LL /* 10^15 - 1 */
#define MAX_REPEAT 1000           /* the grammar's {m,n} limit */
#define NAME_LEN 96               /* a rule's name: a 40-byte prefix, a 39-byte hint, a number */

/* ---- a growing string ---- */

typedef struct {
    char *p;
    size_t n, cap;
    int oom;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *p = wgml_realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p, b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

static void sb_puts(sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

static void sb_printf(sbuf *b, const char *fmt, ...) WGML_PRINTF(2, 3);
static void sb_printf(sbuf *b, const char *fmt, ...) {
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) n = 0;
    sb_put(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* ---- the converter ---- */

enum { P_WS = 1, P_STRING = 2, P_NUMBER = 4, P_INTEGER = 8, P_VALUE = 16, P_CHAR = 32 };

typedef struct {
    char *ref;
    char name[NAME_LEN];
} ref_name;

typedef struct {
    jinja_env *e;
    jv root;
    sbuf out;
    int n_rules;
    unsigned prims;
    ref_name *refs;
    int n_refs, cap_refs;
    char path[512];
    size_t path_len;
    int depth;
    wgml_error *err;
    int failed;
    const char *prefix;  /* "": plain names; else every rule's name starts with it and '-' */
    char pname[7][56];   /* the primitives' names, prefixed */
} conv;

static int fail(conv *c, const char *fmt, ...) WGML_PRINTF(2, 3);
static int fail(conv *c, const char *fmt, ...) {
    if (c->failed) return -1;
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    c->failed = 1;
    wgml_fail(c->err, WGML_ERR_INVALID_ARGUMENT, "json schema: at #%s: %s", c->path, msg);
    return -1;
}

static void path_push(conv *c, const char *a, const char *b) {
    c->path_len = strlen(c->path);
    size_t room = sizeof c->path - c->path_len;
    snprintf(c->path + c->path_len, room, "/%s%s%s", a, b ? "/" : "", b ? b : "");
}

static jv *get(conv *c, jv obj, const char *key) {
    jv *out = NULL;
    if (obj.t == JV_DICT) jx_dict_gets(c->e, obj.u.d, key, strlen(key), &out);
    return out;
}

/* a new rule name from a hint: letters, digits and '-' kept, numbered */
static void new_name(conv *c, const char *hint, char name[NAME_LEN]) {
    char h[40];
    size_t k = 0;
    for (const char *s = hint; *s && k < sizeof h - 1; s++) {
        const char ch = *s;
        const int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9');
        if (ok) h[k++] = ch;
        else if (k && h[k - 1] != '-') h[k++] = '-';
    }
    while (k && h[k - 1] == '-') k--;
    h[k] = 0;
    snprintf(name, NAME_LEN, "%s%s%s-%d", c->prefix, *c->prefix ? "-" : "", k ? h : "r", ++c->n_rules);
}

static int add_rule(conv *c, const char *name, const sbuf *body) {
    if (body->oom) return fail(c, "out of memory");
    if (c->n_rules > JSON_SCHEMA_MAX_RULES) return fail(c, "the schema makes over %d rules", JSON_SCHEMA_MAX_RULES);
    sb_printf(&c->out, "%s ::= ", name);
    sb_put(&c->out, body->p ? body->p : "", body->n);
    sb_puts(&c->out, "\n");
    return 0;
}

/* bytes as a GBNF string literal (UTF-8 passes through; quotes, backslashes and controls escaped) */
static void put_literal(sbuf *b, const char *s, size_t n) {
    sb_puts(b, "\"");
    for (size_t i = 0; i < n; i++) {
        const unsigned char ch = (unsigned char)s[i];
        if (ch == '"' || ch == '\\') {
            char e[2] = {'\\', (char)ch};
            sb_put(b, e, 2);
        } else if (ch < 0x20 || ch == 0x7F) {
            sb_printf(b, "\\x%02X", ch);
        } else {
            sb_put(b, (const char *)&ch, 1);
        }
    }
    sb_puts(b, "\"");
}

/* a JSON value's compact text as a literal */
static int put_json_literal(conv *c, sbuf *b, jv v) {
    jx_buf t = {0};
    if (jx_write_json(c->e, &t, v, NULL, ",", ":", 0, 0, 0)) return fail(c, "%s", c->e->msg);
    put_literal(b, t.p ? t.p : "", t.len);
    return 0;
}

static int prim_index(unsigned p) {
    switch (p) {
    case P_WS: return 0;
    case P_STRING: return 1;
    case P_NUMBER: return 2;
    case P_INTEGER: return 3;
    case P_CHAR: return 4;
    default: return 5;
    }
}

static const char *prim(conv *c, unsigned p) {
    c->prims |= p;
    return c->pname[prim_index(p)];
}

static int visit(conv *c, jv s, const char *hint, char name[NAME_LEN]);

/* ---- numbers ---- */

static int n_digits(long long v) {
    int d = 1;
    while (v >= 10) v /= 10, d++;
    return d;
}

/* same-length digit strings a <= b */
static void digit_range(sbuf *b, const char *lo, const char *hi, int len) {
    if (len == 0) return;
    if (len == 1) {
        if (lo[0] == hi[0]) sb_printf(b, "\"%c\"", lo[0]);
        else sb_printf(b, "[%c-%c]", lo[0], hi[0]);
        return;
    }
    if (lo[0] == hi[0]) {
        sb_printf(b, "\"%c\" ", lo[0]);
        digit_range(b, lo + 1, hi + 1, len - 1);
        return;
    }
    int lo_full = 1, hi_full = 1;
    for (int i = 1; i < len; i++) lo_full &= lo[i] == '0', hi_full &= hi[i] == '9';
    const char start = lo_full ? lo[0] : (char)(lo[0] + 1), end = hi_full ? hi[0] : (char)(hi[0] - 1);
    char nines[MAX_DIGITS + 1], zeros[MAX_DIGITS + 1];
    for (int i = 0; i < len && i < MAX_DIGITS; i++) nines[i] = '9', zeros[i] = '0';
    int first = 1;
    sb_puts(b, "(");
    if (!lo_full) {
        sb_printf(b, "\"%c\" ", lo[0]);
        digit_range(b, lo + 1, nines, len - 1);
        first = 0;
    }
    if (start <= end) {
        if (!first) sb_puts(b, " | ");
        if (start == end) sb_printf(b, "\"%c\"", start);
        else sb_printf(b, "[%c-%c]", start, end);
        sb_printf(b, " [0-9]{%d}", len - 1);
        first = 0;
    }
    if (!hi_full) {
        if (!first) sb_puts(b, " | ");
        sb_printf(b, "\"%c\" ", hi[0]);
        digit_range(b, zeros, hi + 1, len - 1);
    }
    sb_puts(b, ")");
}

/* 0 <= a <= b: alternatives, each prefixed with sep (" | " after the first: *first tracks it) */
static void nonneg_range(sbuf *b, long long a, long long hi, const char *sign, int *first) {
    for (int len = n_digits(a); len <= n_digits(hi); len++) {
        long long pw = 1;
        for (int i = 1; i < len; i++) pw *= 10;
        const long long lo = a > (len == 1 ? 0 : pw) ? a : (len == 1 ? 0 : pw), top = hi < pw * 10 - 1 ? hi : pw * 10 - 1;
        if (lo > top) continue;
        char ls[24], hs[24];
        snprintf(ls, sizeof ls, "%lld", lo);
        snprintf(hs, sizeof hs, "%lld", top);
        if (!*first) sb_puts(b, " | ");
        *first = 0;
        sb_puts(b, sign);
        digit_range(b, ls, hs, len);
    }
}

/* integers lo..hi (|both| <= MAX_ABS, lo <= hi) as a group */
static void int_range(sbuf *b, long long lo, long long hi) {
    int first = 1;
    sb_puts(b, "(");
    if (lo < 0) nonneg_range(b, hi < 0 ? -hi : 1, -lo, "\"-\" ", &first);
    if (hi >= 0) nonneg_range(b, lo > 0 ? lo : 0, hi, "", &first);
    sb_puts(b, ")");
}

/* the numeric bounds of s: lo and hi, whether each is given, whether each is exclusive */
static int bounds(conv *c, jv s, double *lo, int *has_lo, int *lo_ex, double *hi, int *has_hi, int *hi_ex) {
    *has_lo = *has_hi = *lo_ex = *hi_ex = 0;
    static const char *const keys[4] = {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"};
    for (int k = 0; k < 4; k++) {
        jv *v = get(c, s, keys[k]);
        if (!v) continue;
        if (v->t != JV_INT && v->t != JV_FLOAT)
            return fail(c, "'%s' must be a number (the draft-4 boolean form is not supported)", keys[k]);
        const double x = v->t == JV_INT ? (double)v->u.i : v->u.f;
        if (!isfinite(x)) return fail(c, "'%s' must be finite", keys[k]);
        if (k < 2) {
            if (!*has_lo || x > *lo || (x == *lo && k == 1)) *lo = x, *lo_ex = k == 1;
            *has_lo = 1;
        } else {
            if (!*has_hi || x < *hi || (x == *hi && k == 3)) *hi = x, *hi_ex = k == 3;
            *has_hi = 1;
        }
    }
    return 0;
}

static int integer_body(conv *c, jv s, sbuf *b) {
    double lo, hi;
    int has_lo, has_hi, lo_ex, hi_ex;
    if (bounds(c, s, &lo, &has_lo, &lo_ex, &hi, &has_hi, &hi_ex)) return -1;
    if (!has_lo && !has_hi) {
        sb_puts(b, prim(c, P_INTEGER));
        return 0;
    }
    double a = has_lo ? (lo_ex ? floor(lo) + 1 : ceil(lo)) : -(double)MAX_ABS;
    double z = has_hi ? (hi_ex ? ceil(hi) - 1 : floor(hi)) : (double)MAX_ABS;
    if (a < -(double)MAX_ABS) a = -(double)MAX_ABS;
    if (z > (double)MAX_ABS) z = (double)MAX_ABS;
    if (a > z) return fail(c, "no integer of at most %d digits lies within the bounds", MAX_DIGITS);
    int_range(b, (long long)a, (long long)z);
    return 0;
}

static int number_body(conv *c, jv s, sbuf *b) {
    double lo, hi;
    int has_lo, has_hi, lo_ex, hi_ex;
    if (bounds(c, s, &lo, &has_lo, &lo_ex, &hi, &has_hi, &hi_ex)) return -1;
    if (!has_lo && !has_hi) {
        sb_puts(b, prim(c, P_NUMBER));
        return 0;
    }
    /* whole numbers within the bounds, and k.f (f ending in a nonzero digit, so k < k.f < k + 1) for
     * each k >= 0 with lo <= k and k + 1 <= hi */
    double a = has_lo ? (lo_ex ? floor(lo) + 1 : ceil(lo)) : -(double)MAX_ABS;
    double z = has_hi ? (hi_ex ? ceil(hi) - 1 : floor(hi)) : (double)MAX_ABS;
    if (a < -(double)MAX_ABS) a = -(double)MAX_ABS;
    if (z > (double)MAX_ABS) z = (double)MAX_ABS;
    double fa = has_lo ? ceil(lo) : 0, fz = has_hi ? floor(hi) - 1 : (double)MAX_ABS;
    if (fa < 0) fa = 0;
    if (fz > (double)MAX_ABS) fz = (double)MAX_ABS;
    const int whole = a <= z, frac = fa <= fz;
    if (!whole && !frac) return fail(c, "no number this converter writes lies within the bounds");
    sb_puts(b, "(");
    if (whole) int_range(b, (long long)a, (long long)z);
    if (whole && frac) sb_puts(b, " | ");
    if (frac) {
        int_range(b, (long long)fa, (long long)fz);
        sb_printf(b, " \".\" [0-9]{0,%d} [1-9]", MAX_DIGITS - 1);
    }
    sb_puts(b, ")");
    return 0;
}

/* ---- strings: lengths, formats, patterns ---- */

static int get_count(conv *c, jv s, const char *key, long long *out, int *has) {
    jv *v = get(c, s, key);
    *has = 0;
    if (!v) return 0;
    if (v->t == JV_FLOAT && v->u.f == floor(v->u.f) && fabs(v->u.f) < 1e15) *out = (long long)v->u.f;
    else if (v->t == JV_INT) *out = v->u.i;
    else return fail(c, "'%s' must be a non-negative integer", key);
    if (*out < 0) return fail(c, "'%s' must be a non-negative integer", key);
    *has = 1;
    return 0;
}

/* x{lo,hi} of an element, with hi < 0 for no upper bound; lo, hi <= MAX_REPEAT */
static int put_repeat(conv *c, sbuf *b, const char *x, long long lo, long long hi, const char *what) {
    if (lo > MAX_REPEAT || hi > MAX_REPEAT)
        return fail(c, "%s above %d is not supported", what, MAX_REPEAT);
    if (hi >= 0 && hi < lo) return fail(c, "%s: the maximum is below the minimum", what);
    if (hi == 0) return 0;
    if (hi < 0) sb_printf(b, "%s{%lld,}", x, lo);
    else if (hi == lo) sb_printf(b, "%s{%lld}", x, lo);
    else sb_printf(b, "%s{%lld,%lld}", x, lo, hi);
    return 0;
}

/* the GBNF of a format's string contents, or 0 for a format not known */
static int format_body(const char *f, sbuf *b) {
    static const char *const date = "[0-9]{4} \"-\" (\"0\" [1-9] | \"1\" [0-2]) \"-\" (\"0\" [1-9] | \"1\" [0-9] | \"2\" [0-8])";
    static const char *const time =
        "([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9] \":\" [0-5] [0-9] (\".\" [0-9]{1,6})? (\"Z\" | [+-] ([01] [0-9] | "
        "\"2\" [0-3]) \":\" [0-5] [0-9])";
    if (!strcmp(f, "date")) sb_puts(b, date);
    else if (!strcmp(f, "time")) sb_puts(b, time);
    else if (!strcmp(f, "date-time")) sb_printf(b, "%s \"T\" ", date), sb_puts(b, time);
    else if (!strcmp(f, "uuid"))
        sb_puts(b, "[0-9a-f]{8} \"-\" [0-9a-f]{4} \"-\" [0-9a-f]{4} \"-\" [0-9a-f]{4} \"-\" [0-9a-f]{12}");
    else if (!strcmp(f, "email"))
        sb_puts(b, "[a-zA-Z0-9_+-]{1,32} (\".\" [a-zA-Z0-9_+-]{1,32}){0,3} \"@\" [a-z0-9]{1,32} (\"-\" [a-z0-9]{1,16})? "
                   "(\".\" [a-z0-9]{1,32}){0,3} \".\" [a-z]{2,8}");
    else return 0;
    return 1;
}

/* a regular expression (the practical subset of ECMA-262 that schemas use) as the GBNF of the
 * JSON string contents it matches, whole */
typedef struct {
    conv *c;
    const char *s;
    size_t n, i;
    int depth;
} rx;

static int rx_alt(rx *r, sbuf *b);

/* a code point range list of a class: at most 64 ranges */
typedef struct {
    uint32_t lo[64], hi[64];
    int n;
} ranges;

static int rg_add(rx *r, ranges *g, uint32_t lo, uint32_t hi) {
    if (g->n >= 64) return fail(r->c, "pattern: a character class with over 64 ranges");
    g->lo[g->n] = lo, g->hi[g->n] = hi, g->n++;
    return 0;
}

static void put_cp(sbuf *b, uint32_t cp) {
    if (cp < 0x20 || cp == '"' || cp == '\\' || cp == ']' || cp == '[' || cp == '-' || cp == '^' || cp == 0x7F) {
        if (cp <= 0xFF) sb_printf(b, "\\x%02X", cp);
        else sb_printf(b, "\\u%04X", cp);
    } else if (cp < 0x80) {
        char ch = (char)cp;
        sb_put(b, &ch, 1);
    } else {
        sb_printf(b, cp <= 0xFFFF ? "\\u%04X" : "\\U%08X", cp);
    }
}

static void put_char(sbuf *b, uint32_t cp);

static int rg_has(const ranges *g, uint32_t cp) {
    for (int i = 0; i < g->n; i++)
        if (g->lo[i] <= cp && cp <= g->hi[i]) return 1;
    return 0;
}

/* emits a class. Characters JSON writes escaped: in a positive class '"', '\', newline, tab and
 * carriage return become alternatives spelled as JSON escapes, other controls are left out; a negated
 * class leaves them all out (a subset of the strings the pattern allows, every one valid) */
static int put_class(rx *r, sbuf *b, const ranges *g, int negated) {
    if (negated) {
        sb_puts(b, "[^");
        for (int i = 0; i < g->n; i++) {
            put_cp(b, g->lo[i]);
            if (g->hi[i] != g->lo[i]) sb_puts(b, "-"), put_cp(b, g->hi[i]);
        }
        sb_puts(b, "\\x00-\\x1F\\x22\\x5C\\x7F]");
        return 0;
    }
    static const uint32_t cut[][2] = {{0, 0x1F}, {0x22, 0x22}, {0x5C, 0x5C}, {0x7F, 0x7F}};
    static const uint32_t spelled[] = {'"', '\\', '\n', '\t', '\r'};
    ranges o = {.n = 0};
    for (int i = 0; i < g->n; i++) {
        uint32_t lo = g->lo[i];
        const uint32_t hi = g->hi[i];
        for (int k = 0; k < 4 && lo <= hi; k++) {
            if (cut[k][1] < lo || cut[k][0] > hi) continue;
            if (cut[k][0] > lo && rg_add(r, &o, lo, cut[k][0] - 1)) return -1;
            lo = cut[k][1] + 1;
        }
        if (lo <= hi && rg_add(r, &o, lo, hi)) return -1;
    }
    int n_alt = 0;
    sb_puts(b, "(");
    if (o.n) {
        sb_puts(b, "[");
        for (int i = 0; i < o.n; i++) {
            put_cp(b, o.lo[i]);
            if (o.hi[i] != o.lo[i]) sb_puts(b, "-"), put_cp(b, o.hi[i]);
        }
        sb_puts(b, "]");
        n_alt++;
    }
    for (size_t k = 0; k < sizeof spelled / sizeof *spelled; k++) {
        if (!rg_has(g, spelled[k])) continue;
        if (n_alt++) sb_puts(b, " | ");
        put_char(b, spelled[k]);
    }
    sb_puts(b, ")");
    if (!n_alt) return fail(r->c, "pattern: a character class of only control characters");
    return 0;
}

/* one UTF-8 code point of the pattern */
static uint32_t rx_cp(rx *r) {
    const unsigned char ch = (unsigned char)r->s[r->i++];
    if (ch < 0x80) return ch;
    int need = ch >= 0xF0 ? 3 : ch >= 0xE0 ? 2 : 1;
    uint32_t cp = ch & (0x3F >> need);
    while (need-- && r->i < r->n) cp = cp << 6 | ((unsigned char)r->s[r->i++] & 0x3F);
    return cp;
}

/* \d \w \s and their negations into g (negated: *neg set); other escapes: the character */
static int rx_escape(rx *r, ranges *g, int *neg, uint32_t *single) {
    if (r->i >= r->n) return fail(r->c, "pattern: a trailing backslash");
    const char e = r->s[r->i++];
    *single = (uint32_t)-1;
    switch (e) {
    case 'd': case 'D': *neg = e == 'D'; return rg_add(r, g, '0', '9');
    case 'w': case 'W':
        *neg = e == 'W';
        return rg_add(r, g, '0', '9') || rg_add(r, g, 'a', 'z') || rg_add(r, g, 'A', 'Z') || rg_add(r, g, '_', '_');
    case 's': case 'S': *neg = e == 'S'; return rg_add(r, g, ' ', ' ') || rg_add(r, g, '\t', '\r');
    case 'n': *single = '\n'; return 0;
    case 't': *single = '\t'; return 0;
    case 'r': *single = '\r'; return 0;
    case 'b': case 'B': return fail(r->c, "pattern: word boundaries are not supported");
    default:
        if (e >= '1' && e <= '9') return fail(r->c, "pattern: back references are not supported");
        if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z'))
            return fail(r->c, "pattern: the escape \\%c is not supported", e);
        r->i--;
        *single = rx_cp(r);
        return 0;
    }
}

/* a character that JSON writes escaped, as the literal of its escape; others as a literal */
static void put_char(sbuf *b, uint32_t cp) {
    if (cp == '"') sb_puts(b, "\"\\\\\\\"\"");
    else if (cp == '\\') sb_puts(b, "\"\\\\\\\\\"");
    else if (cp == '\n') sb_puts(b, "\"\\\\n\"");
    else if (cp == '\t') sb_puts(b, "\"\\\\t\"");
    else if (cp == '\r') sb_puts(b, "\"\\\\r\"");
    else if (cp < 0x20) sb_printf(b, "\"\\\\u%04X\"", cp);
    else {
        sb_puts(b, "\"");
        put_cp(b, cp);
        sb_puts(b, "\"");
    }
}

static int rx_atom(rx *r, sbuf *b) {
    const char ch = r->s[r->i];
    if (ch == '(') {
        r->i++;
        if (r->i < r->n && r->s[r->i] == '?') {
            if (r->i + 1 < r->n && r->s[r->i + 1] == ':') r->i += 2;
            else return fail(r->c, "pattern: lookarounds and named groups are not supported");
        }
        if (++r->depth > 32) return fail(r->c, "pattern: groups nested too deep");
        sb_puts(b, "(");
        if (rx_alt(r, b)) return -1;
        sb_puts(b, ")");
        r->depth--;
        if (r->i >= r->n || r->s[r->i] != ')') return fail(r->c, "pattern: an unclosed group");
        r->i++;
        return 0;
    }
    if (ch == '[') {
        r->i++;
        int negated = 0;
        if (r->i < r->n && r->s[r->i] == '^') negated = 1, r->i++;
        ranges g = {.n = 0};
        int first = 1;
        while (r->i < r->n && (r->s[r->i] != ']' || first)) {
            first = 0;
            uint32_t lo;
            if (r->s[r->i] == '\\') {
                r->i++;
                int neg = 0;
                if (rx_escape(r, &g, &neg, &lo)) return -1;
                if (neg) return fail(r->c, "pattern: \\D, \\W and \\S inside a class are not supported");
                if (lo == (uint32_t)-1) continue;
            } else {
                lo = rx_cp(r);
            }
            uint32_t hi = lo;
            if (r->i + 1 < r->n && r->s[r->i] == '-' && r->s[r->i + 1] != ']') {
                r->i++;
                if (r->s[r->i] == '\\') {
                    r->i++;
                    int neg = 0;
                    ranges tmp = {.n = 0};
                    if (rx_escape(r, &tmp, &neg, &hi)) return -1;
                    if (hi == (uint32_t)-1) return fail(r->c, "pattern: a class range ending in a class");
                } else {
                    hi = rx_cp(r);
                }
                if (hi < lo) return fail(r->c, "pattern: a class range out of order");
            }
            if (rg_add(r, &g, lo, hi)) return -1;
        }
        if (r->i >= r->n) return fail(r->c, "pattern: an unclosed character class");
        r->i++;
        return put_class(r, b, &g, negated);
    }
    if (ch == '.') {
        r->i++;
        ranges g = {.n = 0};
        rg_add(r, &g, '\n', '\n');
        return put_class(r, b, &g, 1);
    }
    if (ch == '\\') {
        r->i++;
        ranges g = {.n = 0};
        int neg = 0;
        uint32_t single;
        if (rx_escape(r, &g, &neg, &single)) return -1;
        if (single != (uint32_t)-1) put_char(b, single);
        else if (put_class(r, b, &g, neg)) return -1;
        return 0;
    }
    if (ch == '*' || ch == '+' || ch == '?' || ch == '{') return fail(r->c, "pattern: a quantifier with nothing before it");
    if (ch == '^' || ch == '$') return fail(r->c, "pattern: '%c' is only supported at the pattern's ends", ch);
    put_char(b, rx_cp(r));
    return 0;
}

static int rx_seq(rx *r, sbuf *b) {
    int any = 0;
    while (r->i < r->n && r->s[r->i] != '|' && r->s[r->i] != ')') {
        if (r->s[r->i] == '$' && r->i + 1 == r->n) {
            r->i++;
            break;
        }
        sbuf atom = {0};
        if (rx_atom(r, &atom)) {
            wgml_free(atom.p);
            return -1;
        }
        sb_puts(b, any ? " (" : "(");
        sb_put(b, atom.p ? atom.p : "", atom.n);
        sb_puts(b, ")");
        wgml_free(atom.p);
        any = 1;
        if (r->i >= r->n) break;
        const char q = r->s[r->i];
        if (q == '*' || q == '+' || q == '?') {
            sb_put(b, &q, 1);
            r->i++;
        } else if (q == '{') {
            long long lo = 0, hi = -1;
            size_t j = r->i + 1;
            int digits = 0;
            while (j < r->n && r->s[j] >= '0' && r->s[j] <= '9' && lo <= MAX_REPEAT) lo = lo * 10 + (r->s[j++] - '0'), digits++;
            if (!digits) return fail(r->c, "pattern: a '{' that is not a repetition");
            if (j < r->n && r->s[j] == ',') {
                j++;
                if (j < r->n && r->s[j] >= '0' && r->s[j] <= '9') {
                    hi = 0;
                    while (j < r->n && r->s[j] >= '0' && r->s[j] <= '9' && hi <= MAX_REPEAT) hi = hi * 10 + (r->s[j++] - '0');
                }
            } else {
                hi = lo;
            }
            if (j >= r->n || r->s[j] != '}') return fail(r->c, "pattern: an unclosed repetition");
            r->i = j + 1;
            if (lo > MAX_REPEAT || hi > MAX_REPEAT) return fail(r->c, "pattern: a repetition above %d", MAX_REPEAT);
            if (hi >= 0 && hi < lo) return fail(r->c, "pattern: a repetition {m,n} with n < m");
            if (hi < 0) sb_printf(b, "{%lld,}", lo);
            else sb_printf(b, "{%lld,%lld}", lo, hi);
        } else {
            continue;
        }
        if (r->i < r->n && (r->s[r->i] == '?' || r->s[r->i] == '+')) r->i++; /* lazy or possessive: the same strings */
    }
    if (!any) sb_puts(b, "\"\"");
    return 0;
}

static int rx_alt(rx *r, sbuf *b) {
    if (rx_seq(r, b)) return -1;
    while (r->i < r->n && r->s[r->i] == '|') {
        r->i++;
        sb_puts(b, " | ");
        if (rx_seq(r, b)) return -1;
    }
    return 0;
}

static int pattern_body(conv *c, const char *p, size_t n, sbuf *b) {
    rx r = {c, p, n, 0, 0};
    if (r.n && r.s[0] == '^') r.i++;
    sb_puts(b, "(");
    if (rx_alt(&r, b)) return -1;
    sb_puts(b, ")");
    if (r.i < r.n) return fail(c, "pattern: an unmatched ')'");
    return 0;
}

static int string_body(conv *c, jv s, sbuf *b) {
    jv *fmt = get(c, s, "format"), *pat = get(c, s, "pattern");
    long long lo = 0, hi = -1;
    int has_lo, has_hi;
    if (get_count(c, s, "minLength", &lo, &has_lo) || get_count(c, s, "maxLength", &hi, &has_hi)) return -1;
    if (!has_lo) lo = 0;
    if (!has_hi) hi = -1;
    if ((fmt || pat) && (has_lo || has_hi)) return fail(c, "minLength/maxLength together with a format or pattern is not supported");
    if (fmt && pat) return fail(c, "format together with pattern is not supported");
    if (fmt) {
        if (fmt->t != JV_STR) return fail(c, "'format' must be a string");
        sb_puts(b, "\"\\\"\" (");
        if (!format_body(fmt->u.s->s, b))
            return fail(c, "format '%s' is not supported (date, time, date-time, uuid, email are)", fmt->u.s->s);
        sb_puts(b, ") \"\\\"\"");
        return 0;
    }
    if (pat) {
        if (pat->t != JV_STR) return fail(c, "'pattern' must be a string");
        sb_puts(b, "\"\\\"\" ");
        if (pattern_body(c, pat->u.s->s, pat->u.s->len, b)) return -1;
        sb_puts(b, " \"\\\"\"");
        return 0;
    }
    if (!has_lo && !has_hi) {
        sb_puts(b, prim(c, P_STRING));
        return 0;
    }
    sb_puts(b, "\"\\\"\" ");
    if (put_repeat(c, b, prim(c, P_CHAR), lo, hi, "a string length")) return -1;
    sb_puts(b, " \"\\\"\"");
    return 0;
}

/* ---- arrays and objects ---- */

static int array_body(conv *c, jv s, sbuf *b) {
    jv *items = get(c, s, "items"), *prefix = get(c, s, "prefixItems");
    if (get(c, s, "uniqueItems")) {
        jv *u = get(c, s, "uniqueItems");
        if (!(u->t == JV_BOOL && !u->u.i)) return fail(c, "'uniqueItems' is not supported");
    }
    if (get(c, s, "contains")) return fail(c, "'contains' is not supported");
    long long lo = 0, hi = -1;
    int has_lo, has_hi;
    if (get_count(c, s, "minItems", &lo, &has_lo) || get_count(c, s, "maxItems", &hi, &has_hi)) return -1;
    if (!has_lo) lo = 0;
    if (!has_hi) hi = -1;
    if (hi >= 0 && hi < lo) return fail(c, "maxItems is below minItems");
    if (prefix && prefix->t != JV_LIST) return fail(c, "'prefixItems' must be an array");
    const long long n_prefix = prefix ? (long long)prefix->u.l->n : 0;
    /* the prefix items, as many as maxItems allows (all of them: a subset of what the schema allows) */
    const long long k = hi >= 0 && hi < n_prefix ? hi : n_prefix;
    int extra_ok = 1; /* items beyond the prefix */
    char item[NAME_LEN] = "";
    if (items && items->t == JV_BOOL) extra_ok = (int)items->u.i;
    else if (prefix && !items) extra_ok = 0; /* any item is allowed: none is written */
    if (extra_ok) {
        if (!items || items->t == JV_BOOL) {
            snprintf(item, sizeof item, "%s", prim(c, P_VALUE));
        } else {
            path_push(c, "items", NULL);
            const size_t keep = c->path_len;
            int r = visit(c, *items, "item", item);
            c->path[keep] = 0;
            if (r) return -1;
        }
    }
    const char *ws = prim(c, P_WS);
    sb_printf(b, "\"[\" %s ", ws);
    for (long long i = 0; i < k; i++) {
        char pn[NAME_LEN], key[24];
        snprintf(key, sizeof key, "%lld", i);
        path_push(c, "prefixItems", key);
        const size_t keep = c->path_len;
        int r = visit(c, prefix->u.l->v[i], "item", pn);
        c->path[keep] = 0;
        if (r) return -1;
        if (i) sb_printf(b, "%s \",\" %s ", ws, ws);
        sb_printf(b, "%s ", pn);
    }
    long long more_lo = lo > k ? lo - k : 0, more_hi = hi < 0 ? -1 : hi - k;
    if (!extra_ok || more_hi == 0) {
        if (more_lo > 0) return fail(c, "minItems asks for more items than prefixItems and items allow");
        sb_printf(b, "%s\"]\"", k ? "ws " : "");
        return 0;
    }
    char one[300];
    if (k) { /* each further item after a comma */
        snprintf(one, sizeof one, "(%s \",\" %s %s)", ws, ws, item);
        if (put_repeat(c, b, one, more_lo, more_hi, "minItems/maxItems")) return -1;
        sb_printf(b, " %s \"]\"", ws);
        return 0;
    }
    snprintf(one, sizeof one, "(%s \",\" %s %s)", ws, ws, item);
    if (more_lo == 0) sb_puts(b, "(");
    sb_printf(b, "%s ", item);
    if (put_repeat(c, b, one, more_lo ? more_lo - 1 : 0, more_hi < 0 ? -1 : more_hi - 1, "minItems/maxItems")) return -1;
    sb_printf(b, " %s", ws);
    if (more_lo == 0) sb_puts(b, ")?");
    sb_puts(b, " \"]\"");
    return 0;
}

static int object_body(conv *c, jv s, sbuf *b, const char *hint) {
    jv *props = get(c, s, "properties"), *req = get(c, s, "required"), *addl = get(c, s, "additionalProperties");
    static const char *const refused[] = {"patternProperties", "dependentRequired",
                                          "dependentSchemas", "dependencies", "unevaluatedProperties"};
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++)
        if (get(c, s, refused[i])) return fail(c, "'%s' is not supported", refused[i]);
    if (props && props->t != JV_DICT) return fail(c, "'properties' must be an object");
    if (req && req->t != JV_LIST) return fail(c, "'required' must be an array");
    const char *ws = prim(c, P_WS);
    const size_t np = props ? props->u.d->n : 0;
    long long lo = 0, hi = -1;
    int has_lo, has_hi;
    if (get_count(c, s, "minProperties", &lo, &has_lo) || get_count(c, s, "maxProperties", &hi, &has_hi)) return -1;
    if (!has_lo) lo = 0;
    if (!has_hi) hi = -1;
    for (size_t i = 0; req && i < req->u.l->n; i++) {
        jv r = req->u.l->v[i];
        if (r.t != JV_STR) return fail(c, "'required' must list strings");
        jv *found = NULL;
        if (props) jx_dict_gets(c->e, props->u.d, r.u.s->s, r.u.s->len, &found);
        if (!found) return fail(c, "required property '%s' is not among the properties", r.u.s->s);
    }
    if (!np) {
        /* no properties: a map of any keys when additionalProperties allows them, else {} */
        const int none = addl && addl->t == JV_BOOL && !addl->u.i;
        if (none || hi == 0) {
            if (lo > 0) return fail(c, "minProperties above 0 with no properties allowed");
            sb_printf(b, "\"{\" %s \"}\"", ws);
            return 0;
        }
        char val[NAME_LEN];
        if (!addl || addl->t == JV_BOOL) {
            snprintf(val, sizeof val, "%s", prim(c, P_VALUE));
        } else {
            path_push(c, "additionalProperties", NULL);
            const size_t keep = c->path_len;
            int r = visit(c, *addl, "value", val);
            c->path[keep] = 0;
            if (r) return -1;
        }
        char key[NAME_LEN]; /* propertyNames: a string schema the keys follow */
        jv *names = get(c, s, "propertyNames");
        if (!names) {
            snprintf(key, sizeof key, "%s", prim(c, P_STRING));
        } else {
            path_push(c, "propertyNames", NULL);
            const size_t keep = c->path_len;
            int r = visit(c, *names, "key", key);
            c->path[keep] = 0;
            if (r) return -1;
        }
        char kv[400], more[520];
        snprintf(kv, sizeof kv, "%s %s \":\" %s %s", key, ws, ws, val);
        snprintf(more, sizeof more, "(%s \",\" %s %s)", ws, ws, kv);
        sb_printf(b, "\"{\" %s ", ws);
        if (lo == 0) sb_puts(b, "(");
        sb_printf(b, "%s ", kv);
        if (put_repeat(c, b, more, lo ? lo - 1 : 0, hi < 0 ? -1 : hi - 1, "minProperties/maxProperties")) return -1;
        sb_printf(b, " %s", ws);
        if (lo == 0) sb_puts(b, ")?");
        sb_puts(b, " \"}\"");
        return 0;
    }
    /* each property's key and value, then head_i / tail_i rules (see below) */
    char (*kv)[NAME_LEN] = wgml_calloc(np, sizeof *kv);
    int *is_req = wgml_calloc(np, sizeof *is_req);
    if (!kv || !is_req) {
        wgml_free(kv), wgml_free(is_req);
        return fail(c, "out of memory");
    }
    int rc = 0;
    size_t n_req = 0;
    for (size_t i = 0; i < np && !rc; i++) {
        jv key = props->u.d->k[i];
        for (size_t j = 0; req && j < req->u.l->n; j++)
            if (req->u.l->v[j].t == JV_STR && req->u.l->v[j].u.s->len == key.u.s->len &&
                !memcmp(req->u.l->v[j].u.s->s, key.u.s->s, key.u.s->len))
                is_req[i] = 1;
        n_req += (size_t)is_req[i];
        char val[NAME_LEN];
        path_push(c, "properties", key.u.s->s);
        const size_t keep = c->path_len;
        rc = visit(c, props->u.d->v[i], key.u.s->s, val);
        c->path[keep] = 0;
        if (rc) break;
        sbuf body = {0};
        if (put_json_literal(c, &body, key)) rc = -1;
        sb_printf(&body, " %s \":\" %s %s", ws, ws, val);
        char kvname[NAME_LEN + 8];
        snprintf(kvname, sizeof kvname, "%s-kv", val);
        snprintf(kv[i], sizeof kv[i], "%.95s", kvname);
        if (!rc) rc = add_rule(c, kv[i], &body);
        wgml_free(body.p);
    }
    if (!rc && (has_lo || has_hi) && ((long long)n_req < lo || (hi >= 0 && (long long)np > hi)))
        rc = fail(c, "minProperties/maxProperties beyond what the properties give is not supported");
    /* head_i: properties i.. with none before (the first present one, then tail); tail_i: properties
     * i.. after one was written (each with its comma): a required property is always there, an
     * optional one may be left out */
    char base[NAME_LEN];
    new_name(c, hint, base);
    for (size_t i = np; i-- > 0 && !rc;) {
        sbuf t = {0}, h = {0};
        char tn[NAME_LEN + 24], tnext[NAME_LEN + 24] = "", hn[NAME_LEN + 24], hnext[NAME_LEN + 24] = "";
        snprintf(tn, sizeof tn, "%s-t%zu", base, i);
        snprintf(hn, sizeof hn, "%s-h%zu", base, i);
        if (i + 1 < np) {
            snprintf(tnext, sizeof tnext, " %s-t%zu", base, i + 1);
            snprintf(hnext, sizeof hnext, "%s-h%zu", base, i + 1);
        }
        if (is_req[i]) sb_printf(&t, "%s \",\" %s %s%s", ws, ws, kv[i], tnext);
        else sb_printf(&t, "(%s \",\" %s %s)?%s", ws, ws, kv[i], tnext);
        if (is_req[i] || !hnext[0]) sb_printf(&h, "%s%s", kv[i], tnext);
        else sb_printf(&h, "%s%s | %s", kv[i], tnext, hnext);
        if (i > 0) rc = add_rule(c, tn, &t); /* tail_0 follows nothing */
        if (!rc) rc = add_rule(c, hn, &h);
        wgml_free(t.p), wgml_free(h.p);
    }
    if (!rc) {
        if (n_req) sb_printf(b, "\"{\" %s %s-h0 %s \"}\"", ws, base, ws);
        else sb_printf(b, "\"{\" %s (%s-h0 %s)? \"}\"", ws, base, ws);
    }
    wgml_free(kv), wgml_free(is_req);
    return rc;
}

/* ---- the walk ---- */

static const char *const annotations[] = {"title", "description", "default", "examples", "$schema", "$id",
                                          "$comment", "deprecated", "readOnly", "writeOnly"};
static const char *const handled[] = {
    "type",          "properties",    "required",         "additionalProperties", "items",      "prefixItems",
    "minItems",      "maxItems",      "enum",             "const",                "anyOf",      "oneOf",
    "allOf",         "$ref",          "$defs",            "definitions",          "minLength",  "maxLength",
    "pattern",       "format",        "minimum",          "maximum",              "exclusiveMinimum",
    "exclusiveMaximum", "minProperties", "maxProperties", "uniqueItems",    "propertyNames"};

static int check_keywords(conv *c, jv s) {
    for (size_t i = 0; i < s.u.d->n; i++) {
        jv k = s.u.d->k[i];
        if (k.t != JV_STR) continue;
        int known = 0;
        for (size_t j = 0; j < sizeof annotations / sizeof *annotations && !known; j++) known = !strcmp(k.u.s->s, annotations[j]);
        for (size_t j = 0; j < sizeof handled / sizeof *handled && !known; j++) known = !strcmp(k.u.s->s, handled[j]);
        if (!known) return fail(c, "keyword '%s' is not supported", k.u.s->s);
    }
    return 0;
}

/* "#", "#/$defs/x", any JSON pointer into the schema */
static int resolve(conv *c, const jstr *ref, jv *out) {
    if (ref->len == 0 || ref->s[0] != '#') return fail(c, "$ref '%s': only references within the schema (#...) are supported", ref->s);
    jv v = c->root;
    size_t i = 1;
    while (i < ref->len) {
        if (ref->s[i] != '/') return fail(c, "$ref '%s' is not a JSON pointer", ref->s);
        i++;
        char key[256];
        size_t k = 0;
        while (i < ref->len && ref->s[i] != '/' && k < sizeof key - 1) {
            char ch = ref->s[i++];
            if (ch == '~' && i < ref->len) ch = ref->s[i++] == '1' ? '/' : '~';
            key[k++] = ch;
        }
        key[k] = 0;
        jv *next = NULL;
        if (v.t == JV_DICT) jx_dict_gets(c->e, v.u.d, key, k, &next);
        else if (v.t == JV_LIST) {
            char *end;
            unsigned long idx = strtoul(key, &end, 10);
            if (*key && !*end && idx < v.u.l->n) next = &v.u.l->v[idx];
        }
        if (!next) return fail(c, "$ref '%s' points at nothing", ref->s);
        v = *next;
    }
    *out = v;
    return 0;
}

/* allOf: the object schemas merged (properties and required joined), other keywords equal */
static int merge_into(conv *c, jdict *m, jv s, int depth) {
    if (depth > 16) return fail(c, "allOf nested too deep");
    if (s.t == JV_BOOL && s.u.i) return 0;
    if (s.t != JV_DICT) return fail(c, "allOf: each schema must be an object");
    jv *ref = get(c, s, "$ref");
    if (ref) {
        if (ref->t != JV_STR) return fail(c, "'$ref' must be a string");
        jv target;
        if (resolve(c, ref->u.s, &target) || merge_into(c, m, target, depth + 1)) return -1;
    }
    jv *all = get(c, s, "allOf");
    if (all) {
        if (all->t != JV_LIST) return fail(c, "'allOf' must be an array");
        for (size_t i = 0; i < all->u.l->n; i++)
            if (merge_into(c, m, all->u.l->v[i], depth + 1)) return -1;
    }
    for (size_t i = 0; i < s.u.d->n; i++) {
        jv k = s.u.d->k[i], v = s.u.d->v[i];
        if (k.t != JV_STR || !strcmp(k.u.s->s, "$ref") || !strcmp(k.u.s->s, "allOf") || !strcmp(k.u.s->s, "$defs") ||
            !strcmp(k.u.s->s, "definitions"))
            continue;
        int annotation = 0;
        for (size_t j = 0; j < sizeof annotations / sizeof *annotations; j++) annotation |= !strcmp(k.u.s->s, annotations[j]);
        if (annotation) continue;
        jv *have = NULL;
        jx_dict_get(c->e, m, k, &have);
        if (!have) {
            if (jx_dict_set(c->e, m, k, v)) return fail(c, "%s", c->e->msg);
            continue;
        }
        if (!strcmp(k.u.s->s, "properties") && have->t == JV_DICT && v.t == JV_DICT) {
            jdict *p = jx_dict(c->e, have->u.d->n + v.u.d->n);
            if (!p) return fail(c, "%s", c->e->msg);
            for (size_t j = 0; j < have->u.d->n; j++) jx_dict_set(c->e, p, have->u.d->k[j], have->u.d->v[j]);
            for (size_t j = 0; j < v.u.d->n; j++) {
                jv *dup = NULL;
                jx_dict_get(c->e, p, v.u.d->k[j], &dup);
                if (dup) return fail(c, "allOf: property '%s' is defined twice", v.u.d->k[j].u.s->s);
                jx_dict_set(c->e, p, v.u.d->k[j], v.u.d->v[j]);
            }
            if (jx_dict_set(c->e, m, k, jv_dictv(p))) return fail(c, "%s", c->e->msg);
        } else if (!strcmp(k.u.s->s, "required") && have->t == JV_LIST && v.t == JV_LIST) {
            jlist *l = jx_list(c->e, have->u.l->n + v.u.l->n);
            if (!l) return fail(c, "%s", c->e->msg);
            for (size_t j = 0; j < have->u.l->n; j++) jx_list_push(c->e, l, have->u.l->v[j]);
            for (size_t j = 0; j < v.u.l->n; j++) jx_list_push(c->e, l, v.u.l->v[j]);
            if (jx_dict_set(c->e, m, k, jv_listv(l))) return fail(c, "%s", c->e->msg);
        } else {
            int eq = 0;
            if (jx_equal(c->e, *have, v, &eq)) return fail(c, "%s", c->e->msg);
            if (!eq) return fail(c, "allOf: the schemas disagree on '%s'", k.u.s->s);
        }
    }
    return 0;
}

/* the body of one type's alternative of s */
static int type_body(conv *c, jv s, const char *type, sbuf *b, const char *hint) {
    if (!strcmp(type, "string")) return string_body(c, s, b);
    if (!strcmp(type, "integer")) return integer_body(c, s, b);
    if (!strcmp(type, "number")) return number_body(c, s, b);
    if (!strcmp(type, "boolean")) return sb_puts(b, "(\"true\" | \"false\")"), 0;
    if (!strcmp(type, "null")) return sb_puts(b, "\"null\""), 0;
    if (!strcmp(type, "array")) return array_body(c, s, b);
    if (!strcmp(type, "object")) return object_body(c, s, b, hint);
    return fail(c, "type '%s' is not a JSON Schema type", type);
}

static int body_of(conv *c, jv s, sbuf *b, const char *hint) {
    if (s.t == JV_BOOL) {
        if (!s.u.i) return fail(c, "the schema false allows nothing");
        sb_puts(b, prim(c, P_VALUE));
        return 0;
    }
    if (s.t != JV_DICT) return fail(c, "a schema must be an object or a boolean, not %s", jx_type_name(s));
    if (check_keywords(c, s)) return -1;
    jv *ref = get(c, s, "$ref"), *all = get(c, s, "allOf"), *any = get(c, s, "anyOf"), *one = get(c, s, "oneOf");
    jv *en = get(c, s, "enum"), *cn = get(c, s, "const"), *type = get(c, s, "type");
    if (all || (ref && s.u.d->n > 1 && (type || get(c, s, "properties")))) {
        /* allOf, or a $ref with sibling constraints: merged into one schema */
        jdict *m = jx_dict(c->e, 8);
        if (!m) return fail(c, "%s", c->e->msg);
        if (merge_into(c, m, s, 0)) return -1;
        return body_of(c, jv_dictv(m), b, hint);
    }
    if (ref) {
        if (ref->t != JV_STR) return fail(c, "'$ref' must be a string");
        for (int i = 0; i < c->n_refs; i++)
            if (!strcmp(c->refs[i].ref, ref->u.s->s)) return sb_puts(b, c->refs[i].name), 0;
        jv target;
        if (resolve(c, ref->u.s, &target)) return -1;
        if (c->n_refs == c->cap_refs) {
            const int cap = c->cap_refs ? 2 * c->cap_refs : 16;
            ref_name *r = wgml_realloc(c->refs, (size_t)cap * sizeof *r);
            if (!r) return fail(c, "out of memory");
            c->refs = r, c->cap_refs = cap;
        }
        ref_name *rn = &c->refs[c->n_refs];
        const char *slash = strrchr(ref->u.s->s, '/');
        new_name(c, slash && slash[1] ? slash + 1 : "root", rn->name);
        if (!(rn->ref = wgml_malloc(ref->u.s->len + 1))) return fail(c, "out of memory");
        memcpy(rn->ref, ref->u.s->s, ref->u.s->len + 1);
        c->n_refs++;
        char name[NAME_LEN];
        snprintf(name, sizeof name, "%s", rn->name);
        sbuf body = {0};
        int r = body_of(c, target, &body, name);
        if (!r) r = add_rule(c, name, &body);
        wgml_free(body.p);
        if (r) return -1;
        sb_puts(b, name);
        return 0;
    }
    if (any || one) {
        jv *alts = any ? any : one;
        if (any && one) return fail(c, "anyOf together with oneOf is not supported");
        if (alts->t != JV_LIST || !alts->u.l->n) return fail(c, "'%s' must be a non-empty array", any ? "anyOf" : "oneOf");
        if (type || en || cn) return fail(c, "'%s' together with type, enum or const is not supported", any ? "anyOf" : "oneOf");
        sb_puts(b, "(");
        for (size_t i = 0; i < alts->u.l->n; i++) {
            char key[24], an[NAME_LEN];
            snprintf(key, sizeof key, "%zu", i);
            path_push(c, any ? "anyOf" : "oneOf", key);
            const size_t keep = c->path_len;
            int r = visit(c, alts->u.l->v[i], hint, an);
            c->path[keep] = 0;
            if (r) return -1;
            sb_printf(b, "%s%s", i ? " | " : "", an);
        }
        sb_puts(b, ")");
        return 0;
    }
    if (cn) return put_json_literal(c, b, *cn);
    if (en) {
        if (en->t != JV_LIST || !en->u.l->n) return fail(c, "'enum' must be a non-empty array");
        sb_puts(b, "(");
        for (size_t i = 0; i < en->u.l->n; i++) {
            if (i) sb_puts(b, " | ");
            if (put_json_literal(c, b, en->u.l->v[i])) return -1;
        }
        sb_puts(b, ")");
        return 0;
    }
    if (type) {
        if (type->t == JV_STR) return type_body(c, s, type->u.s->s, b, hint);
        if (type->t != JV_LIST || !type->u.l->n) return fail(c, "'type' must be a string or a non-empty array");
        sb_puts(b, "(");
        for (size_t i = 0; i < type->u.l->n; i++) {
            if (type->u.l->v[i].t != JV_STR) return fail(c, "'type' must list strings");
            if (i) sb_puts(b, " | ");
            if (type_body(c, s, type->u.l->v[i].u.s->s, b, hint)) return -1;
        }
        sb_puts(b, ")");
        return 0;
    }
    /* no type: what the keywords say */
    if (get(c, s, "properties") || get(c, s, "required") || get(c, s, "additionalProperties"))
        return object_body(c, s, b, hint);
    if (get(c, s, "items") || get(c, s, "prefixItems")) return array_body(c, s, b);
    if (get(c, s, "pattern") || get(c, s, "format") || get(c, s, "minLength") || get(c, s, "maxLength"))
        return string_body(c, s, b);
    if (get(c, s, "minimum") || get(c, s, "maximum") || get(c, s, "exclusiveMinimum") || get(c, s, "exclusiveMaximum"))
        return number_body(c, s, b);
    sb_puts(b, prim(c, P_VALUE));
    return 0;
}

/* a rule for schema s; name receives it */
static int visit(conv *c, jv s, const char *hint, char name[NAME_LEN]) {
    if (++c->depth > MAX_DEPTH) return fail(c, "the schema is nested deeper than %d", MAX_DEPTH);
    sbuf body = {0};
    int r = body_of(c, s, &body, hint);
    if (!r) {
        new_name(c, hint, name);
        r = add_rule(c, name, &body);
    }
    wgml_free(body.p);
    c->depth--;
    return r;
}

static void write_prims(conv *c) {
    unsigned p = c->prims;
    if (p & P_VALUE) p |= P_STRING | P_NUMBER | P_WS;
    if (p & P_STRING) p |= P_CHAR;
    const char *ws = c->pname[0], *str = c->pname[1], *num = c->pname[2], *in = c->pname[3], *ch = c->pname[4],
               *val = c->pname[5], *obj = c->pname[6];
    sbuf *o = &c->out;
    if (p & P_WS) sb_printf(o, "%s ::= (\" \" | \"\\n\" [ \\t]{0,12})?\n", ws);
    if (p & P_CHAR)
        sb_printf(o, "%s ::= [^\"\\\\\\x00-\\x1F\\x7F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" ([0-9a-cA-C] [0-9a-fA-F] | "
                     "[dD] [0-7] | [eEfF] [0-9a-fA-F]) [0-9a-fA-F]{2})\n", ch);
    if (p & P_STRING) sb_printf(o, "%s ::= \"\\\"\" %s* \"\\\"\"\n", str, ch);
    if (p & P_INTEGER) sb_printf(o, "%s ::= \"-\"? (\"0\" | [1-9] [0-9]{0,14})\n", in);
    if (p & P_NUMBER) sb_printf(o, "%s ::= \"-\"? (\"0\" | [1-9] [0-9]{0,14}) (\".\" [0-9]{1,15})?\n", num);
    if (p & P_VALUE) {
        sb_printf(o, "%s ::= %s | %s-array | %s | %s | \"true\" | \"false\" | \"null\"\n", val, obj, val, str, num);
        sb_printf(o, "%s ::= \"{\" %s (%s %s \":\" %s %s (%s \",\" %s %s %s \":\" %s %s)* %s)? \"}\"\n", obj, ws, str, ws, ws,
                  val, ws, ws, str, ws, ws, val, ws);
        sb_printf(o, "%s-array ::= \"[\" %s (%s (%s \",\" %s %s)* %s)? \"]\"\n", val, ws, val, ws, ws, val, ws);
    }
}

/* the offset of the first byte that is not strict UTF-8 (overlong forms, surrogates and values past
 * U+10FFFF included), or n */
static size_t utf8_invalid_at(const char *s, size_t n) {
    static const uint32_t least[5] = {0, 0, 0x80, 0x800, 0x10000};
    for (size_t i = 0; i < n;) {
        const unsigned char c = (unsigned char)s[i];
        const int l = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        if (!l || (size_t)l > n - i) return i;
        uint32_t cp = l == 1 ? c : c & (0x7Fu >> l);
        for (int k = 1; k < l; k++) {
            if (((unsigned char)s[i + k] & 0xC0) != 0x80) return i;
            cp = cp << 6 | ((unsigned char)s[i + k] & 0x3F);
        }
        if (cp < least[l] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
        i += (size_t)l;
    }
    return n;
}

wgml_status json_schema_to_gbnf(const char *schema, size_t len, char **gbnf, size_t *gbnf_len, wgml_error *err) {
    return json_schema_to_gbnf_named(schema, len, NULL, gbnf, gbnf_len, err);
}

wgml_status json_schema_to_gbnf_named(const char *schema, size_t len, const char *name, char **gbnf, size_t *gbnf_len,
                                      wgml_error *err) {
    *gbnf = NULL;
    if (gbnf_len) *gbnf_len = 0;
    conv c = {.err = err, .prefix = name ? name : ""};
    if (name) {
        size_t k = 0;
        for (; name[k]; k++)
            if (!((name[k] >= 'a' && name[k] <= 'z') || (name[k] >= 'A' && name[k] <= 'Z') || (name[k] >= '0' && name[k] <= '9') ||
                  name[k] == '-'))
                break;
        if (name[k] || k == 0 || k > 40)
            return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "json schema: the rule name '%s' is not 1-40 letters, digits or '-'", name);
    }
    static const char *const base[7] = {"ws", "string", "number", "integer", "char", "value", "object"};
    for (int k = 0; k < 7; k++) snprintf(c.pname[k], sizeof c.pname[k], "%s%s%s", c.prefix, *c.prefix ? "-" : "", base[k]);
    const char *root = name ? name : "root";
    if (!schema) { /* any JSON object */
        c.prims = P_VALUE;
        sb_printf(&c.out, "%s ::= %s\n", root, c.pname[6]);
    } else {
        jinja_limits lim = jinja_default_limits();
        lim.max_memory = (size_t)64 << 20;
        lim.max_depth = 128;
        const size_t bad = utf8_invalid_at(schema, len); /* strings become grammar literals: UTF-8 only */
        if (bad < len) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "json schema: invalid UTF-8 at byte %zu", bad);
        wgml_status st = jinja_env_create(&lim, &c.e, err);
        if (st) return st;
        if (jx_json_parse(c.e, schema, len, "json schema", &c.root)) {
            wgml_status code = c.e->status == WGML_ERR_OUT_OF_MEMORY ? WGML_ERR_OUT_OF_MEMORY : WGML_ERR_INVALID_ARGUMENT;
            const char *m = c.e->msg;
            if (!strncmp(m, "chat template: ", 15)) m += 15;
            wgml_fail(err, code, "%s", m);
            jinja_env_free(c.e);
            return code;
        }
        char top[NAME_LEN];
        if (!visit(&c, c.root, "root", top)) sb_printf(&c.out, "%s ::= %s\n", root, top);
    }
    if (!c.failed) write_prims(&c);
    for (int i = 0; i < c.n_refs; i++) wgml_free(c.refs[i].ref);
    wgml_free(c.refs);
    if (c.e) jinja_env_free(c.e);
    if (!c.failed && c.out.oom) c.failed = 1, wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "json schema: out of memory");
    if (c.failed) {
        wgml_free(c.out.p);
        return err ? err->code : WGML_ERR_INVALID_ARGUMENT;
    }
    *gbnf = c.out.p;
    if (gbnf_len) *gbnf_len = c.out.n;
    return WGML_OK;
}
