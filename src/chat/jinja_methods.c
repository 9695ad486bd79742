/*
 * jinja_methods.c - what a template reaches through "." and "[]" and calls:
 *
 *   - attribute and item access with Jinja's fallbacks (x.name tries the
 *     Python attribute - a method - then the key; x[key] the key, then the
 *     attribute), negative indices, Python slices on strings and lists;
 *   - the methods of str (strip, split, startswith, replace, format, ...),
 *     dict (get, items, keys, values) and list (append, pop, index, count)
 *     and the loop object's fields;
 *   - UTF-8 helpers: Python counts and slices strings by code point, and its
 *     strip()/split() know Unicode spaces.
 *
 * Hugging Face's environment is Jinja's ImmutableSandboxedEnvironment, which
 * refuses list.append and list.pop; templates that use them (Kimi's tool
 * call queue) would fail there, so here they work, as in llama.cpp.
 */
#include "chat/jinja_impl.h"
#include "text/unicode.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- UTF-8 ------------------------------------------------------------------ */

int32_t jx_utf8_next(const char *s, size_t n, int *len) {
    const unsigned char *p = (const unsigned char *)s;
    unsigned c = p[0];
    int l = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (l == 0 || (size_t)l > n) {
        *len = 1;
        return -1;
    }
    int32_t cp = l == 1 ? (int32_t)c : l == 2 ? (int32_t)(c & 0x1f) : l == 3 ? (int32_t)(c & 0x0f) : (int32_t)(c & 7);
    for (int i = 1; i < l; i++) {
        if ((p[i] & 0xc0) != 0x80) {
            *len = 1;
            return -1;
        }
        cp = (cp << 6) | (p[i] & 0x3f);
    }
    *len = l;
    return cp;
}

size_t jx_utf8_count(const char *s, size_t n) {
    size_t count = 0;
    for (size_t i = 0; i < n;) {
        if (n - i >= 8) { /* eight ASCII bytes at once: the common case, counted without decoding */
            uint64_t w;
            memcpy(&w, s + i, 8);
            if (!(w & 0x8080808080808080ull)) {
                i += 8;
                count += 8;
                continue;
            }
        }
        int l;
        jx_utf8_next(s + i, n - i, &l);
        i += (size_t)l;
        count++;
    }
    return count;
}

int jx_is_space_cp(int32_t cp) {
    return (cp >= 9 && cp <= 13) || (cp >= 0x1c && cp <= 0x20) || cp == 0x85 || cp == 0xa0 || cp == 0x1680 ||
           (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 || cp == 0x202f || cp == 0x205f ||
           cp == 0x3000;
}

/* Case mapping for ASCII, Latin-1, Latin Extended-A, Greek and Cyrillic. */
int32_t jx_upper_cp(int32_t c) {
    if (c >= 'a' && c <= 'z') return c - 32;
    if (c < 0x80) return c;
    if ((c >= 0xe0 && c <= 0xfe && c != 0xf7)) return c - 32;
    if (c == 0xff) return 0x178;
    if (c >= 0x100 && c <= 0x17f && c != 0x130 && c != 0x131 && c != 0x138 && c != 0x149 && c != 0x17f) {
        int odd_lower = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17e);
        if (odd_lower ? (c % 2 == 0) : (c % 2 == 1)) return c - 1;
        return c;
    }
    if (c >= 0x3b1 && c <= 0x3c9 && c != 0x3c2) return c - 32;
    if (c == 0x3c2) return 0x3a3;
    if (c >= 0x430 && c <= 0x44f) return c - 32;
    if (c >= 0x450 && c <= 0x45f) return c - 80;
    return c;
}

int32_t jx_lower_cp(int32_t c) {
    if (c >= 'A' && c <= 'Z') return c + 32;
    if (c < 0x80) return c;
    if (c >= 0xc0 && c <= 0xde && c != 0xd7) return c + 32;
    if (c == 0x178) return 0xff;
    if (c >= 0x100 && c <= 0x17f && c != 0x130 && c != 0x131 && c != 0x138 && c != 0x149 && c != 0x17f) {
        int odd_lower = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17e);
        if (odd_lower ? (c % 2 == 1) : (c % 2 == 0)) return c + 1;
        return c;
    }
    if (c >= 0x391 && c <= 0x3a9 && c != 0x3a2) return c + 32;
    if (c >= 0x410 && c <= 0x42f) return c + 32;
    if (c >= 0x400 && c <= 0x40f) return c + 80;
    return c;
}

int jx_put_cp(jinja_env *e, jx_buf *b, int32_t cp) {
    char u[4];
    /* uni_encode writes surrogates as U+FFFD; past U+10FFFF it would take its byte pseudo code points */
    const int n = uni_encode(cp < 0 || cp > 0x10ffff ? 0xfffd : (uint32_t)cp, u);
    return jx_buf_put(e, b, u, (size_t)n);
}

/* mode: 'u' upper, 'l' lower, 'c' capitalize, 't' Python's str.title, 'T' Jinja's title filter */
int jx_case_map(jinja_env *e, const jstr *s, int mode, jv *out) {
    jx_buf b = {0};
    int word_start = 1;
    if (jx_step(e, s->len / 64)) return -1;
    for (size_t i = 0; i < s->len;) {
        int l;
        int32_t cp = jx_utf8_next(s->s + i, s->len - i, &l);
        if (cp < 0) {
            if (jx_buf_put(e, &b, s->s + i, 1)) return -1;
            i++;
            continue;
        }
        int32_t r = cp;
        switch (mode) {
        case 'u': r = jx_upper_cp(cp); break;
        case 'l': r = jx_lower_cp(cp); break;
        case 'c': r = i == 0 ? jx_upper_cp(cp) : jx_lower_cp(cp); break;
        case 't': /* Python: a cased character after an uncased one starts a word */
            r = word_start ? jx_upper_cp(cp) : jx_lower_cp(cp);
            word_start = jx_lower_cp(cp) == jx_upper_cp(cp);
            break;
        case 'T':
            r = word_start ? jx_upper_cp(cp) : jx_lower_cp(cp);
            word_start = jx_is_space_cp(cp) || cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<';
            break;
        }
        if (jx_put_cp(e, &b, r)) return -1;
        i += (size_t)l;
    }
    jstr *r = jx_buf_take(e, &b);
    if (!r) return -1;
    *out = jv_strv(r);
    return 0;
}

/* ---- iteration, attributes, items, slices --------------------------------- */

int jx_iter_list(jinja_env *e, jv v, jlist **out) {
    switch (v.t) {
    case JV_LIST: *out = v.u.l; return 0;
    case JV_UNDEF: return (*out = jx_list(e, 1)) ? 0 : -1;
    case JV_DICT: {
        jlist *l = jx_list(e, v.u.d->n);
        if (!l) return -1;
        memcpy(l->v, v.u.d->k, v.u.d->n * sizeof(jv));
        l->n = v.u.d->n;
        *out = l;
        return 0;
    }
    case JV_STR: {
        jlist *l = jx_list(e, v.u.s->len);
        if (!l) return -1;
        for (size_t i = 0; i < v.u.s->len;) {
            int len;
            jx_utf8_next(v.u.s->s + i, v.u.s->len - i, &len);
            if (jx_make_str(e, v.u.s->s + i, (size_t)len, &l->v[l->n++])) return -1;
            i += (size_t)len;
        }
        *out = l;
        return 0;
    }
    default: return jx_error(e, "'%s' object is not iterable", jx_type_name(v));
    }
}

static int is_method(jv obj, const char *name) {
    static const char *const str_m[] = {
        "strip",   "lstrip",  "rstrip",  "split",      "rsplit",       "startswith",   "endswith",
        "replace", "upper",   "lower",   "title",      "capitalize",   "find",         "rfind",
        "index",   "count",   "format",  "join",       "isdigit",      "isalpha",      "isalnum",
        "isspace", "isupper", "islower", "splitlines", "removeprefix", "removesuffix", NULL};
    static const char *const dict_m[] = {"get",    "items",      "keys",  "values",  "copy", "pop",
                                         "update", "setdefault", "clear", "popitem", NULL};
    static const char *const list_m[] = {"append", "pop",    "index",   "count", "copy",  "extend",
                                         "insert", "remove", "reverse", "sort",  "clear", NULL};
    const char *const *m = obj.t == JV_STR                    ? str_m
                           : obj.t == JV_DICT && !obj.u.d->ns ? dict_m
                           : obj.t == JV_LIST                 ? list_m
                                                              : NULL;
    for (; m && *m; m++)
        if (!strcmp(*m, name)) return 1;
    return 0;
}

static int bound(jinja_env *e, jv obj, const char *name, jv *out) {
    jfunc *f = jx_alloc(e, sizeof *f);
    if (!f) return -1;
    memset(f, 0, sizeof *f);
    f->kind = JF_METHOD;
    f->self = obj;
    f->name = name;
    memset(out, 0, sizeof *out);
    out->t = JV_FUNC;
    out->u.fn = f;
    return 0;
}

static int loop_attr(jinja_env *e, jv obj, const char *name, jv *out) {
    const jloop *lp = obj.u.lp;
    int64_t i = lp->index0, n = lp->length;
    const jlist *items = lp->items.u.l;
    if (n > (int64_t)items->n) n = (int64_t)items->n; /* popped while looping */
    if (!strcmp(name, "index"))
        *out = jv_int(i + 1);
    else if (!strcmp(name, "index0"))
        *out = jv_int(i);
    else if (!strcmp(name, "revindex"))
        *out = jv_int(n - i);
    else if (!strcmp(name, "revindex0"))
        *out = jv_int(n - i - 1);
    else if (!strcmp(name, "first"))
        *out = jv_bool(i == 0);
    else if (!strcmp(name, "last"))
        *out = jv_bool(i == n - 1);
    else if (!strcmp(name, "length"))
        *out = jv_int(n);
    else if (!strcmp(name, "depth"))
        *out = jv_int(1);
    else if (!strcmp(name, "depth0"))
        *out = jv_int(0);
    else if (!strcmp(name, "previtem"))
        *out = i > 0 && i - 1 < n ? items->v[i - 1] : jv_undef(jx_cstr(e, "there is no previous item"));
    else if (!strcmp(name, "nextitem"))
        *out = i + 1 < n ? items->v[i + 1] : jv_undef(jx_cstr(e, "there is no next item"));
    else if (!strcmp(name, "cycle")) {
        jfunc *f = jx_alloc(e, sizeof *f);
        if (!f) return -1;
        memset(f, 0, sizeof *f);
        f->kind = JF_CYCLE;
        f->self = obj;
        f->name = "cycle";
        memset(out, 0, sizeof *out);
        out->t = JV_FUNC;
        out->u.fn = f;
    } else
        *out = jv_undef(jx_strf(e, "'LoopContext' object has no attribute '%.60s'", name));
    return 0;
}

static jv no_attr(jinja_env *e, jv obj, const char *name) {
    if (obj.t == JV_NONE) return jv_undef(jx_strf(e, "'None' has no attribute '%.60s'", name));
    return jv_undef(jx_strf(e, "'%s object' has no attribute '%.60s'", jx_type_name(obj), name));
}

int jx_getattr(jinja_env *e, jv obj, const char *name, size_t len, jv *out) {
    if (obj.t == JV_UNDEF) return jx_undef_error(e, obj);
    if (len >= 64 && jx_step(e, len / 64)) return -1; /* a name may be a long string: l[s] */
    if (strlen(name) != len) return jx_error(e, "a bad attribute name");
    if (obj.t == JV_LOOP) return loop_attr(e, obj, name, out);
    if (is_method(obj, name)) return bound(e, obj, name, out);
    if (obj.t == JV_DICT) {
        jv *v;
        if (jx_dict_gets(e, obj.u.d, name, len, &v)) return -1;
        if (v) {
            *out = *v;
            return 0;
        }
    }
    *out = no_attr(e, obj, name);
    return 0;
}

int jx_getitem(jinja_env *e, jv obj, jv key, jv *out) {
    if (obj.t == JV_UNDEF) return jx_undef_error(e, obj);
    if (obj.t == JV_DICT) { /* an undefined key is a key like any other (found nowhere) */
        jv *v;
        if (jx_dict_get(e, obj.u.d, key, &v)) return -1;
        if (v) {
            *out = *v;
            return 0;
        }
    } else if ((obj.t == JV_LIST || obj.t == JV_STR) && (key.t == JV_INT || key.t == JV_BOOL)) {
        int64_t i = key.u.i;
        if (obj.t == JV_LIST) {
            int64_t n = (int64_t)obj.u.l->n;
            if (i < 0) i += n;
            if (i >= 0 && i < n) {
                *out = obj.u.l->v[i];
                return 0;
            }
        } else {
            /* code points are counted from the start: work proportional to the string */
            if (jx_step(e, obj.u.s->len / 16)) return -1;
            int64_t n = (int64_t)jx_utf8_count(obj.u.s->s, obj.u.s->len);
            if (i < 0) i += n;
            if (i >= 0 && i < n) {
                size_t p = (size_t)i;
                int l = 1;
                if ((size_t)n != obj.u.s->len) { /* not one byte a code point: walk to it, again as much work */
                    if (jx_step(e, obj.u.s->len / 16)) return -1;
                    for (int64_t k = 0, q = 0; k <= i; k++) {
                        if (k) q += l;
                        jx_utf8_next(obj.u.s->s + q, obj.u.s->len - (size_t)q, &l);
                        p = (size_t)q;
                    }
                }
                return jx_make_str(e, obj.u.s->s + p, (size_t)l, out);
            }
        }
        *out = jv_undef(jx_strf(e, "'%s object' has no element %lld", jx_type_name(obj), (long long)key.u.i));
        return 0;
    }
    if (key.t == JV_STR) return jx_getattr(e, obj, key.u.s->s, key.u.s->len, out);
    *out = jv_undef(jx_cstr(e, "no such element"));
    return 0;
}

static int slice_index(jinja_env *e, jv v, int64_t *out) {
    if (v.t == JV_NONE || v.t == JV_UNDEF) return 1;
    if (v.t != JV_INT && v.t != JV_BOOL) return jx_error(e, "slice indices must be integers or None");
    *out = v.u.i;
    return 0;
}

int jx_slice(jinja_env *e, jv v, jv start, jv stop, jv step, jv *out) {
    if (v.t == JV_UNDEF) return jx_undef_error(e, v);
    if (v.t != JV_STR && v.t != JV_LIST) return jx_error(e, "'%s' object is not subscriptable", jx_type_name(v));
    int64_t st = 1, a = 0, b = 0;
    int r;
    if ((r = slice_index(e, step, &st)) < 0) return -1;
    if (r) st = 1;
    if (st == 0) return jx_error(e, "slice step cannot be zero");
    /* the elements: code points of a string (their byte offsets), items of a list */
    int64_t n;
    size_t *offs = NULL;
    if (v.t == JV_STR) {
        n = (int64_t)jx_utf8_count(v.u.s->s, v.u.s->len);
        if (!(offs = jx_alloc(e, ((size_t)n + 1) * sizeof *offs))) return -1;
        size_t p = 0;
        for (int64_t k = 0; k < n; k++) {
            int l;
            offs[k] = p;
            jx_utf8_next(v.u.s->s + p, v.u.s->len - p, &l);
            p += (size_t)l;
        }
        offs[n] = p;
    } else {
        n = (int64_t)v.u.l->n;
    }
    /* Python's PySlice_AdjustIndices */
    if ((r = slice_index(e, start, &a)) < 0) return -1;
    if (r)
        a = st < 0 ? n - 1 : 0;
    else if (a < 0)
        a = a + n < 0 ? (st < 0 ? -1 : 0) : a + n;
    else if (a >= n)
        a = st < 0 ? n - 1 : n;
    if ((r = slice_index(e, stop, &b)) < 0) return -1;
    if (r)
        b = st < 0 ? -1 : n;
    else if (b < 0)
        b = b + n < 0 ? (st < 0 ? -1 : 0) : b + n;
    else if (b >= n)
        b = st < 0 ? n - 1 : n;
    if (jx_step(e, (uint64_t)n / 16)) return -1;
    /* how many: Python's PySlice_AdjustIndices; then item i is a + i * st, which stays between a and b
     * (no overflow, whatever the step: l[1::2**63-1]) */
    uint64_t count = 0;
    if (st > 0 && a < b) count = ((uint64_t)(b - a) - 1) / (uint64_t)st + 1;
    if (st < 0 && b < a) count = ((uint64_t)(a - b) - 1) / (0 - (uint64_t)st) + 1;
    if (v.t == JV_STR) {
        jx_buf buf = {0};
        if (st == 1) {
            if (a < b && jx_buf_put(e, &buf, v.u.s->s + offs[a], offs[b] - offs[a])) return -1;
        } else {
            for (uint64_t i = 0; i < count; i++) {
                int64_t k = a + (int64_t)i * st;
                if (jx_buf_put(e, &buf, v.u.s->s + offs[k], offs[k + 1] - offs[k])) return -1;
            }
        }
        jstr *s = jx_buf_take(e, &buf);
        if (!s) return -1;
        *out = jv_strv(s);
        return 0;
    }
    jlist *l = jx_list(e, (size_t)count);
    if (!l) return -1;
    l->tuple = v.u.l->tuple;
    for (uint64_t i = 0; i < count; i++)
        l->v[l->n++] = v.u.l->v[a + (int64_t)i * st];
    *out = jv_listv(l);
    return 0;
}

/* ---- str methods ------------------------------------------------------------ */

/* Python's strip family: chars NULL strips whitespace (Unicode's). */
int jx_strip(jinja_env *e, const jstr *s, const jstr *chars, int left, int right, jv *out) {
    size_t a = 0, b = s->len;
    /* a string of spaces strips to nothing: the scan is the work (with chars, a search of chars per code point) */
    if (jx_step(e, chars ? s->len / 8 * (1 + chars->len / 16) : s->len / 16)) return -1;
    while (left && a < b) {
        int l;
        int32_t cp = jx_utf8_next(s->s + a, b - a, &l);
        int hit = chars ? (memmem(chars->s, chars->len, s->s + a, (size_t)l) != NULL) : jx_is_space_cp(cp);
        if (!hit) break;
        a += (size_t)l;
    }
    while (right && b > a) {
        size_t p = b - 1;
        while (p > a && ((unsigned char)s->s[p] & 0xc0) == 0x80)
            p--;
        int l;
        int32_t cp = jx_utf8_next(s->s + p, b - p, &l);
        if ((size_t)l != b - p) p = b - 1, cp = -1, l = 1;
        int hit = chars ? (memmem(chars->s, chars->len, s->s + p, (size_t)l) != NULL) : jx_is_space_cp(cp);
        if (!hit) break;
        b = p;
    }
    return jx_make_str(e, s->s + a, b - a, out);
}

/* The last x in s[0..n): *at its offset, or SIZE_MAX. A backward scan: each place whose first byte matches
 * is compared in full and costs a step per 64 bytes of x, so a pattern that nearly matches everywhere
 * ('a' * 10**6).rfind('a' * 10**5 + 'b') runs into the step budget instead of a quadratic hang. */
static int rfind_bytes(jinja_env *e, const char *s, size_t n, const char *x, size_t m, size_t *at) {
    *at = SIZE_MAX;
    if (m > n) return 0;
    if (m == 0) {
        *at = n;
        return 0;
    }
    for (size_t p = n - m + 1; p-- > 0;) {
        if (s[p] != x[0]) continue;
        if (m >= 64 && jx_step(e, m / 64)) return -1;
        if (!memcmp(s + p, x, m)) {
            *at = p;
            return 0;
        }
    }
    return 0;
}

/* Python's str.split / rsplit (from the right: rev); sep NULL splits on runs of whitespace. */
static int split(jinja_env *e, const jstr *s, const jstr *sep, int64_t maxsplit, int rev, jv *out) {
    jlist *l = jx_list(e, 0);
    if (!l) return -1;
    if (jx_step(e, s->len / 32)) return -1;
    if (sep && sep->len == 0) return jx_error(e, "empty separator");
    if (!rev) {
        size_t i = 0;
        if (!sep) {
            for (;;) {
                while (i < s->len) { /* skip whitespace */
                    int l2;
                    int32_t cp = jx_utf8_next(s->s + i, s->len - i, &l2);
                    if (!jx_is_space_cp(cp)) break;
                    i += (size_t)l2;
                }
                if (i >= s->len) break;
                size_t a = i;
                if (maxsplit >= 0 && (int64_t)l->n >= maxsplit) { /* the rest, as it is */
                    jv piece;
                    if (jx_make_str(e, s->s + a, s->len - a, &piece) || jx_list_push(e, l, piece)) return -1;
                    break;
                }
                while (i < s->len) {
                    int l2;
                    int32_t cp = jx_utf8_next(s->s + i, s->len - i, &l2);
                    if (jx_is_space_cp(cp)) break;
                    i += (size_t)l2;
                }
                jv piece;
                if (jx_make_str(e, s->s + a, i - a, &piece) || jx_list_push(e, l, piece)) return -1;
            }
        } else {
            for (;;) {
                const char *hit =
                    maxsplit >= 0 && (int64_t)l->n >= maxsplit ? NULL : memmem(s->s + i, s->len - i, sep->s, sep->len);
                size_t end = hit ? (size_t)(hit - s->s) : s->len;
                jv piece;
                if (jx_make_str(e, s->s + i, end - i, &piece) || jx_list_push(e, l, piece)) return -1;
                if (!hit) break;
                i = end + sep->len;
            }
        }
        *out = jv_listv(l);
        return 0;
    }
    /* rsplit: pieces from the right, then reversed */
    size_t end = s->len;
    if (!sep) {
        for (;;) {
            while (end > 0 && jx_is_space_cp((unsigned char)s->s[end - 1]))
                end--;
            if (end == 0) break;
            size_t a = end;
            if (maxsplit >= 0 && (int64_t)l->n >= maxsplit) { /* the rest, as it is */
                jv piece;
                if (jx_make_str(e, s->s, end, &piece) || jx_list_push(e, l, piece)) return -1;
                break;
            }
            while (a > 0 && !jx_is_space_cp((unsigned char)s->s[a - 1]))
                a--;
            jv piece;
            if (jx_make_str(e, s->s + a, end - a, &piece) || jx_list_push(e, l, piece)) return -1;
            end = a;
        }
    } else {
        for (;;) {
            size_t found = (size_t)-1;
            if (!(maxsplit >= 0 && (int64_t)l->n >= maxsplit) && rfind_bytes(e, s->s, end, sep->s, sep->len, &found))
                return -1;
            size_t a = found == (size_t)-1 ? 0 : found + sep->len;
            jv piece;
            if (jx_make_str(e, s->s + a, end - a, &piece) || jx_list_push(e, l, piece)) return -1;
            if (found == (size_t)-1) break;
            end = found;
        }
    }
    for (size_t i = 0; i < l->n / 2; i++) {
        jv t = l->v[i];
        l->v[i] = l->v[l->n - 1 - i];
        l->v[l->n - 1 - i] = t;
    }
    *out = jv_listv(l);
    return 0;
}

int jx_replace(jinja_env *e, const jstr *s, const jstr *old, const jstr *new_, int64_t count, jv *out) {
    jx_buf b = {0};
    size_t i = 0;
    int64_t done = 0;
    if (jx_step(e, s->len / 32)) return -1;
    if (old->len == 0) {
        /* Python inserts new between every character (and at both ends) */
        for (;;) {
            if (count >= 0 && done >= count) break;
            if (jx_buf_put(e, &b, new_->s, new_->len)) return -1;
            done++;
            if (i >= s->len) break;
            int l;
            jx_utf8_next(s->s + i, s->len - i, &l);
            if (jx_buf_put(e, &b, s->s + i, (size_t)l)) return -1;
            i += (size_t)l;
        }
        if (jx_buf_put(e, &b, s->s + i, s->len - i)) return -1;
    } else {
        for (;;) {
            const char *hit = count >= 0 && done >= count ? NULL : memmem(s->s + i, s->len - i, old->s, old->len);
            if (!hit) break;
            size_t at = (size_t)(hit - s->s);
            if (jx_buf_put(e, &b, s->s + i, at - i) || jx_buf_put(e, &b, new_->s, new_->len)) return -1;
            i = at + old->len;
            done++;
        }
        if (jx_buf_put(e, &b, s->s + i, s->len - i)) return -1;
    }
    jstr *r = jx_buf_take(e, &b);
    if (!r) return -1;
    *out = jv_strv(r);
    return 0;
}

int jx_want_str(jinja_env *e, jv v, const char *what, jstr **out) {
    *out = NULL;
    if (v.t != JV_STR) {
        if (v.t == JV_UNDEF) return jx_undef_error(e, v);
        return jx_error(e, "%s: expected a string, got %s", what, jx_type_name(v));
    }
    *out = v.u.s;
    return 0;
}

int jx_want_int(jinja_env *e, jv v, const char *what, int64_t *out) {
    *out = 0;
    if (v.t != JV_INT && v.t != JV_BOOL) {
        if (v.t == JV_UNDEF) return jx_undef_error(e, v);
        return jx_error(e, "%s: expected an integer, got %s", what, jx_type_name(v));
    }
    *out = v.u.i;
    return 0;
}

/* "...{}...{0}...{name}...".format(...): fields with no format spec or conversion */
static int str_format(jinja_env *e, const jstr *f, const jargs *a, jv *out) {
    jx_buf b = {0};
    int auto_idx = 0, manual = 0;
    for (size_t i = 0; i < f->len; i++) {
        char c = f->s[i];
        if ((c == '{' || c == '}') && i + 1 < f->len && f->s[i + 1] == c) {
            if (jx_buf_put(e, &b, &c, 1)) return -1;
            i++;
            continue;
        }
        if (c == '}') return jx_error(e, "format: single '}' encountered in format string");
        if (c != '{') {
            if (jx_buf_put(e, &b, &c, 1)) return -1;
            continue;
        }
        size_t end = i + 1;
        while (end < f->len && f->s[end] != '}')
            end++;
        if (end >= f->len) return jx_error(e, "format: single '{' encountered in format string");
        const char *name = f->s + i + 1;
        size_t nlen = end - i - 1;
        if (memchr(name, ':', nlen) || memchr(name, '!', nlen) || memchr(name, '{', nlen))
            return jx_error(e, "format: conversions and format specs are not supported");
        if (memchr(name, '.', nlen) || memchr(name, '[', nlen))
            return jx_error(e, "format: attribute and item access in a field is not supported");
        size_t digits = 0;
        while (digits < nlen && name[digits] >= '0' && name[digits] <= '9')
            digits++;
        jv v;
        if (nlen == 0) {
            if (manual)
                return jx_error(e,
                                "format: cannot switch from manual field specification to automatic field numbering");
            if (auto_idx >= a->n_pos) return jx_error(e, "format: replacement index %d out of range", auto_idx);
            v = a->pos[auto_idx++];
        } else if (digits == nlen) { /* an index (Python: a name that is all digits; "0x" is a keyword) */
            if (auto_idx)
                return jx_error(e,
                                "format: cannot switch from automatic field numbering to manual field specification");
            manual = 1;
            /* read with a bound: no int overflow however many digits ({2147483648}, {4294967295}) */
            uint64_t idx = 0;
            for (size_t k = 0; k < nlen && idx <= (uint64_t)a->n_pos; k++)
                idx = idx * 10 + (uint64_t)(name[k] - '0');
            if (idx >= (uint64_t)a->n_pos)
                return jx_error(e, "format: replacement index %.*s out of range", (int)(nlen > 40 ? 40 : nlen), name);
            v = a->pos[idx];
        } else {
            int found = 0;
            for (int k = 0; k < a->n_kw && !found; k++)
                if (a->kw_names[k]->len == nlen && !memcmp(a->kw_names[k]->s, name, nlen)) v = a->kw[k], found = 1;
            if (!found) return jx_error(e, "format: no argument named '%.*s'", (int)(nlen > 60 ? 60 : nlen), name);
        }
        if (jx_write_str(e, &b, v)) return -1;
        i = end;
    }
    jstr *r = jx_buf_take(e, &b);
    if (!r) return -1;
    *out = jv_strv(r);
    return 0;
}

static int affix(jinja_env *e, const jstr *s, jv arg, int ends, const char *what, jv *out) {
    jlist one = {1, 1, &arg, 0, JL_LIST, 0};
    const jlist *cands = arg.t == JV_LIST ? arg.u.l : &one;
    for (size_t i = 0; i < cands->n; i++) {
        jstr *p;
        if (jx_want_str(e, cands->v[i], what, &p) || jx_step(e, 1 + p->len / 64)) return -1;
        if (p->len <= s->len && !memcmp(ends ? s->s + s->len - p->len : s->s, p->s, p->len)) {
            *out = jv_bool(1);
            return 0;
        }
    }
    *out = jv_bool(0);
    return 0;
}

static int str_method_impl(jinja_env *e, jstr *s, const char *m, const jargs *a, jv *out);

/* A method of a Markup string: the case and strip methods keep it Markup, replace escapes its arguments. */
static int str_method(jinja_env *e, jv self, const char *m, const jargs *a, jv *out) {
    if (!self.safe) return str_method_impl(e, self.u.s, m, a, out);
    int keep = !strcmp(m, "strip") || !strcmp(m, "lstrip") || !strcmp(m, "rstrip") || !strcmp(m, "upper") ||
               !strcmp(m, "lower") || !strcmp(m, "title") || !strcmp(m, "capitalize") || !strcmp(m, "replace");
    jargs esc = *a;
    if (!strcmp(m, "replace") && a->n_pos >= 2) {
        jv *pos = jx_alloc(e, (size_t)a->n_pos * sizeof *pos);
        if (!pos) return -1;
        memcpy(pos, a->pos, (size_t)a->n_pos * sizeof *pos);
        for (int i = 0; i < 2; i++)
            if (pos[i].t == JV_STR && jx_escape(e, pos[i], &pos[i])) return -1;
        esc.pos = pos;
    }
    if (str_method_impl(e, self.u.s, m, &esc, out)) return -1;
    if (keep && out->t == JV_STR) out->safe = 1;
    return 0;
}

static int str_method_impl(jinja_env *e, jstr *s, const char *m, const jargs *a, jv *out) {
    jstr *x = NULL, *y = NULL;
    jv none = jv_none();
    if (!strcmp(m, "strip") || !strcmp(m, "lstrip") || !strcmp(m, "rstrip")) {
        jv c = jx_arg(a, 0, "chars", none);
        if (c.t != JV_NONE && jx_want_str(e, c, m, &x)) return -1;
        return jx_strip(e, s, x, m[0] != 'r', m[0] != 'l', out);
    }
    if (!strcmp(m, "split") || !strcmp(m, "rsplit")) {
        jv sep = jx_arg(a, 0, "sep", none), ms = jx_arg(a, 1, "maxsplit", jv_int(-1));
        int64_t maxsplit;
        if ((sep.t != JV_NONE && jx_want_str(e, sep, m, &x)) || jx_want_int(e, ms, m, &maxsplit)) return -1;
        return split(e, s, x, maxsplit, m[0] == 'r', out);
    }
    if (!strcmp(m, "startswith") || !strcmp(m, "endswith"))
        return affix(e, s, jx_arg(a, 0, "prefix", none), m[0] == 'e', m, out);
    if (!strcmp(m, "replace")) {
        int64_t count;
        if (jx_want_str(e, jx_arg(a, 0, "old", none), m, &x) || jx_want_str(e, jx_arg(a, 1, "new", none), m, &y) ||
            jx_want_int(e, jx_arg(a, 2, "count", jv_int(-1)), m, &count))
            return -1;
        return jx_replace(e, s, x, y, count, out);
    }
    if (!strcmp(m, "upper")) return jx_case_map(e, s, 'u', out);
    if (!strcmp(m, "lower")) return jx_case_map(e, s, 'l', out);
    if (!strcmp(m, "title")) return jx_case_map(e, s, 't', out);
    if (!strcmp(m, "capitalize")) return jx_case_map(e, s, 'c', out);
    if (!strcmp(m, "find") || !strcmp(m, "rfind") || !strcmp(m, "index") || !strcmp(m, "count")) {
        if (jx_want_str(e, jx_arg(a, 0, "sub", none), m, &x)) return -1;
        if (jx_step(e, s->len / 32)) return -1;
        if (!strcmp(m, "count")) {
            int64_t c = 0;
            if (x->len == 0) {
                c = (int64_t)jx_utf8_count(s->s, s->len) + 1;
            } else {
                for (const char *p = s->s; (p = memmem(p, s->len - (size_t)(p - s->s), x->s, x->len)); p += x->len)
                    c++;
            }
            *out = jv_int(c);
            return 0;
        }
        int64_t at = -1;
        if (m[0] == 'r') {
            size_t p;
            if (rfind_bytes(e, s->s, s->len, x->s, x->len, &p)) return -1;
            at = p == SIZE_MAX ? -1 : (int64_t)p;
        } else {
            const char *p = memmem(s->s, s->len, x->s, x->len);
            if (x->len == 0) p = s->s;
            at = p ? p - s->s : -1;
        }
        if (at >= 0) at = (int64_t)jx_utf8_count(s->s, (size_t)at); /* in code points */
        if (at < 0 && m[0] == 'i') return jx_error(e, "substring not found");
        *out = jv_int(at);
        return 0;
    }
    if (!strcmp(m, "format")) return str_format(e, s, a, out);
    if (!strcmp(m, "join")) {
        jlist *l;
        if (jx_iter_list(e, jx_arg(a, 0, "iterable", none), &l)) return -1;
        jx_buf b = {0};
        for (size_t i = 0; i < l->n; i++) {
            if (jx_want_str(e, l->v[i], "join", &x) || (i && jx_buf_put(e, &b, s->s, s->len)) ||
                jx_buf_put(e, &b, x->s, x->len))
                return -1;
        }
        jstr *r = jx_buf_take(e, &b);
        if (!r) return -1;
        *out = jv_strv(r);
        return 0;
    }
    if (!strcmp(m, "removeprefix") || !strcmp(m, "removesuffix")) {
        if (jx_want_str(e, jx_arg(a, 0, NULL, none), m, &x) || jx_step(e, x->len / 64)) return -1;
        int suf = m[6] == 's';
        if (x->len <= s->len && !memcmp(suf ? s->s + s->len - x->len : s->s, x->s, x->len))
            return jx_make_str(e, suf ? s->s : s->s + x->len, s->len - x->len, out);
        *out = jv_strv(s);
        return 0;
    }
    if (!strcmp(m, "splitlines")) {
        jlist *l = jx_list(e, 0);
        if (!l) return -1;
        size_t i = 0, a0 = 0;
        while (i < s->len) {
            char c = s->s[i];
            if (c == '\n' || c == '\r') {
                jv piece;
                if (jx_make_str(e, s->s + a0, i - a0, &piece) || jx_list_push(e, l, piece)) return -1;
                i += c == '\r' && i + 1 < s->len && s->s[i + 1] == '\n' ? 2 : 1;
                a0 = i;
            } else {
                i++;
            }
        }
        if (a0 < s->len) {
            jv piece;
            if (jx_make_str(e, s->s + a0, s->len - a0, &piece) || jx_list_push(e, l, piece)) return -1;
        }
        *out = jv_listv(l);
        return 0;
    }
    if (!strncmp(m, "is", 2)) {
        int any = 0, all = 1, cased_up = 0, cased_low = 0;
        /* which test: 'd'igit, 'a'lpha, alnu'm', 's'pace, else upper/lower (the case flags) */
        char kind = !strcmp(m, "isdigit")   ? 'd'
                    : !strcmp(m, "isalpha") ? 'a'
                    : !strcmp(m, "isalnum") ? 'm'
                    : !strcmp(m, "isspace") ? 's'
                                            : 0;
        if (jx_step(e, s->len / 4)) return -1; /* each code point decoded and classified */
        for (size_t i = 0; i < s->len;) {
            int l;
            int32_t cp = jx_utf8_next(s->s + i, s->len - i, &l);
            int digit = cp >= '0' && cp <= '9';
            int alpha = jx_lower_cp(cp) != jx_upper_cp(cp) || (cp >= 0x80 && !jx_is_space_cp(cp));
            int ok = kind == 'd'   ? digit
                     : kind == 'a' ? alpha
                     : kind == 'm' ? alpha || digit
                     : kind == 's' ? jx_is_space_cp(cp)
                                   : 1;
            if (jx_upper_cp(cp) != cp) cased_low = 1;
            if (jx_lower_cp(cp) != cp) cased_up = 1;
            all &= ok;
            any = 1;
            i += (size_t)l;
        }
        if (!strcmp(m, "isupper"))
            *out = jv_bool(cased_up && !cased_low);
        else if (!strcmp(m, "islower"))
            *out = jv_bool(cased_low && !cased_up);
        else
            *out = jv_bool(any && all);
        return 0;
    }
    return jx_error(e, "'str' object has no attribute '%.60s'", m);
}

static int dict_method(jinja_env *e, jdict *d, const char *m, const jargs *a, jv *out) {
    if (!strcmp(m, "get")) {
        jv *v;
        if (jx_dict_get(e, d, jx_arg(a, 0, "key", jv_none()), &v)) return -1;
        *out = v ? *v : jx_arg(a, 1, "default", jv_none());
        return 0;
    }
    if (!strcmp(m, "items") || !strcmp(m, "keys") || !strcmp(m, "values")) {
        jlist *l = jx_list(e, d->n);
        if (!l || jx_step(e, d->n)) return -1;
        for (size_t i = 0; i < d->n; i++) {
            if (m[0] == 'i') {
                jlist *pair = jx_list(e, 2);
                if (!pair) return -1;
                pair->tuple = 1;
                pair->v[0] = d->k[i];
                pair->v[1] = d->v[i];
                pair->n = 2;
                l->v[i] = jv_listv(pair);
            } else {
                l->v[i] = m[0] == 'k' ? d->k[i] : d->v[i];
            }
        }
        l->n = d->n;
        l->view = m[0] == 'i' ? JL_ITEMS : m[0] == 'k' ? JL_KEYS : JL_VALUES;
        *out = jv_listv(l);
        return 0;
    }
    if (!strcmp(m, "copy")) {
        jdict *c = jx_dict(e, d->n);
        if (!c) return -1;
        for (size_t i = 0; i < d->n; i++)
            if (jx_dict_set(e, c, d->k[i], d->v[i])) return -1;
        *out = jv_dictv(c);
        return 0;
    }
    return jx_error(e, "access to attribute '%.60s' of 'dict' object is unsafe", m);
}

static int list_method(jinja_env *e, jlist *l, const char *m, const jargs *a, jv *out) {
    if (!strcmp(m, "append")) {
        if (a->n_pos != 1) return jx_error(e, "append takes exactly one argument");
        if (jx_list_push(e, l, a->pos[0])) return -1;
        *out = jv_none();
        return 0;
    }
    if (!strcmp(m, "pop")) {
        int64_t i;
        if (jx_want_int(e, jx_arg(a, 0, "index", jv_int(-1)), "pop", &i)) return -1;
        if (i < 0) i += (int64_t)l->n;
        if (i < 0 || i >= (int64_t)l->n) return jx_error(e, l->n ? "pop index out of range" : "pop from empty list");
        *out = l->v[i];
        memmove(l->v + i, l->v + i + 1, (l->n - (size_t)i - 1) * sizeof(jv));
        l->n--;
        return 0;
    }
    if (!strcmp(m, "index") || !strcmp(m, "count")) {
        jv x = jx_arg(a, 0, "value", jv_none());
        int64_t c = 0, at = -1;
        for (size_t i = 0; i < l->n; i++) {
            int eq;
            if (jx_step(e, 1) || jx_equal(e, l->v[i], x, &eq)) return -1;
            if (!eq) continue;
            if (at < 0) at = (int64_t)i;
            c++;
            if (m[0] == 'i') break; /* index: the first is the answer */
        }
        if (m[0] == 'i' && at < 0) return jx_error(e, "list.index(x): x not in list");
        *out = jv_int(m[0] == 'i' ? at : c);
        return 0;
    }
    if (!strcmp(m, "copy")) return jx_slice(e, jv_listv(l), jv_none(), jv_none(), jv_none(), out);
    return jx_error(e, "access to attribute '%.60s' of 'list' object is unsafe", m);
}

int jx_call_method(jinja_env *e, jv self, const char *name, const jargs *args, jv *out) {
    if (!is_method(self, name)) {
        jv f;
        if (jx_getattr(e, self, name, strlen(name), &f)) return -1;
        if (f.t == JV_UNDEF) return jx_undef_error(e, f);
        return jx_call(e, f, args, NULL, out);
    }
    if (jx_step(e, 1)) return -1;
    switch (self.t) {
    case JV_STR: return str_method(e, self, name, args, out);
    case JV_DICT: return dict_method(e, self.u.d, name, args, out);
    case JV_LIST: return list_method(e, self.u.l, name, args, out);
    default: return jx_error(e, "'%s' object has no attribute '%.60s'", jx_type_name(self), name);
    }
}
