/*
 * jinja_filters.c - Jinja's filters ("x | name(args)") and tests ("x is
 * name"), with Jinja 3.1's semantics, plus Hugging Face's tojson (no ASCII
 * escaping, keys in their order, indent/separators/sort_keys as json.dumps).
 *
 * Filters: abs, attr, batch, capitalize, count, d, default, dictsort, e,
 * escape, first, float, forceescape, indent, int, items, join, last, length,
 * list, lower, map, max, min, reject, rejectattr, replace, reverse, round,
 * safe, select, selectattr, sort, string, sum, title, tojson, trim, unique,
 * upper, wordcount.
 * Tests: boolean, callable, defined, divisibleby, eq/equalto/==, escaped,
 * even, false, filter, float, ge/>=, gt/greaterthan/>, in, integer,
 * iterable, le/<=, lower, lt/lessthan/<, mapping, ne/!=, none, number, odd,
 * sameas, sequence, string, test, true, undefined, upper.
 *
 * An unknown filter or test is an error when it is reached, as in Jinja 3.
 */
#include "chat/jinja_impl.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const jargs no_args = {0};

/* an attribute path "a.b.0" of an item, as Jinja's make_attrgetter */
static int attr_path(jinja_env *e, jv item, const jstr *path, jv *out) {
    size_t a = 0;
    *out = item;
    while (a <= path->len) {
        size_t b = a;
        while (b < path->len && path->s[b] != '.')
            b++;
        const char *part = path->s + a;
        size_t n = b - a;
        int is_int = n > 0;
        for (size_t k = 0; k < n; k++)
            is_int &= part[k] >= '0' && part[k] <= '9';
        jv key;
        if (is_int && n < 18)
            key = jv_int(strtoll(part, NULL, 10));
        else if (jx_make_str(e, part, n, &key))
            return -1;
        if (jx_getitem(e, *out, key, out)) return -1;
        a = b + 1;
    }
    return 0;
}

/* ---- sorting (stable, as Python's sorted) ---------------------------------- */

static int sort_key(jinja_env *e, jv v, int case_sensitive, jv *out) {
    if (v.t == JV_STR && !case_sensitive) return jx_case_map(e, v.u.s, 'l', out);
    *out = v;
    return 0;
}

/* The order of n sort keys (jx_sort_index: stable, a step per comparison). */
static int sorted(jinja_env *e, const jv *keys, size_t n, int reverse, size_t **order) {
    size_t *idx = jx_alloc(e, (n ? n : 1) * sizeof *idx);
    if (!idx) return -1;
    for (size_t i = 0; i < n; i++)
        idx[i] = i;
    *order = idx;
    return jx_sort_index(e, keys, idx, n, reverse);
}

/* ---- filters ------------------------------------------------------------------ */

static int f_length(jinja_env *e, jv v, jv *out) {
    switch (v.t) {
    case JV_STR: /* code points, counted */
        if (jx_step(e, v.u.s->len / 16)) return -1;
        *out = jv_int((int64_t)jx_utf8_count(v.u.s->s, v.u.s->len));
        return 0;
    case JV_LIST: *out = jv_int((int64_t)v.u.l->n); return 0;
    case JV_DICT: *out = jv_int((int64_t)v.u.d->n); return 0;
    case JV_UNDEF: *out = jv_int(0); return 0;
    default: return jx_error(e, "object of type '%s' has no len()", jx_type_name(v));
    }
}

static int f_tojson(jinja_env *e, jv v, const jargs *a, jv *out) {
    static const char *const kw[] = {"ensure_ascii", "indent", "separators", "sort_keys", NULL};
    if (jx_check_args(e, a, "tojson", 4, kw)) return -1;
    jv ea = jx_arg(a, 0, "ensure_ascii", jv_bool(0)), ind = jx_arg(a, 1, "indent", jv_none()),
       seps = jx_arg(a, 2, "separators", jv_none()), sk = jx_arg(a, 3, "sort_keys", jv_bool(0));
    const char *indent = NULL, *item_sep = NULL, *key_sep = NULL;
    if (ind.t == JV_INT) {
        if (ind.u.i < 0 || ind.u.i > 64) return jx_error(e, "tojson: indent out of range");
        char *sp = jx_alloc(e, (size_t)ind.u.i + 1);
        if (!sp) return -1;
        memset(sp, ' ', (size_t)ind.u.i);
        sp[ind.u.i] = '\0';
        indent = sp;
    } else if (ind.t == JV_STR) {
        indent = ind.u.s->s;
    } else if (ind.t != JV_NONE && ind.t != JV_UNDEF) {
        return jx_error(e, "tojson: indent must be an integer or a string");
    }
    if (seps.t == JV_LIST && seps.u.l->n == 2 && seps.u.l->v[0].t == JV_STR && seps.u.l->v[1].t == JV_STR) {
        item_sep = seps.u.l->v[0].u.s->s;
        key_sep = seps.u.l->v[1].u.s->s;
    } else if (seps.t != JV_NONE && seps.t != JV_UNDEF) {
        return jx_error(e, "tojson: separators must be a pair of strings");
    }
    jx_buf b = {0};
    if (jx_write_json(e, &b, v, indent, item_sep, key_sep, jx_truthy(sk), jx_truthy(ea), 0)) return -1;
    jstr *r = jx_buf_take(e, &b);
    if (!r) return -1;
    *out = jv_strv(r);
    return 0;
}

/* Jinja 3.1's indent: the first line stays unless first=True; blank lines stay unless blank=True. */
static int f_indent(jinja_env *e, jv v, const jargs *a, jv *out) {
    static const char *const kw[] = {"width", "first", "blank", NULL};
    if (jx_check_args(e, a, "indent", 3, kw)) return -1;
    jstr *s, *ind;
    jv w = jx_arg(a, 0, "width", jv_int(4));
    int first = jx_truthy(jx_arg(a, 1, "first", jv_bool(0))), blank = jx_truthy(jx_arg(a, 2, "blank", jv_bool(0)));
    if (jx_to_str(e, v, &s)) return -1;
    if (w.t == JV_STR) {
        ind = w.u.s;
    } else if (w.t == JV_INT && w.u.i >= 0 && w.u.i <= 256) {
        char sp[257];
        memset(sp, ' ', (size_t)w.u.i);
        if (!(ind = jx_str(e, sp, (size_t)w.u.i))) return -1;
    } else {
        return jx_error(e, "indent: width must be a string or an integer in [0, 256]");
    }
    /* the lines as str.splitlines() of s + "\n" */
    jx_buf b = {0};
    if (first && jx_buf_put(e, &b, ind->s, ind->len)) return -1;
    size_t i = 0;
    int line_no = 0;
    while (i < s->len) {
        size_t a0 = i, end;
        size_t brk = 0;
        while (i < s->len) {
            unsigned char c = (unsigned char)s->s[i];
            if (c == '\n' || c == '\r' || c == '\v' || c == '\f' || (c >= 0x1c && c <= 0x1e)) {
                brk = c == '\r' && i + 1 < s->len && s->s[i + 1] == '\n' ? 2 : 1;
                break;
            }
            if (c == 0xc2 && i + 1 < s->len && (unsigned char)s->s[i + 1] == 0x85) {
                brk = 2;
                break;
            }
            if (c == 0xe2 && i + 2 < s->len && (unsigned char)s->s[i + 1] == 0x80 &&
                ((unsigned char)s->s[i + 2] == 0xa8 || (unsigned char)s->s[i + 2] == 0xa9)) {
                brk = 3;
                break;
            }
            i++;
        }
        end = i;
        i += brk;
        if (line_no > 0) {
            if (jx_buf_put(e, &b, "\n", 1)) return -1;
            if ((blank || end > a0) && jx_buf_put(e, &b, ind->s, ind->len)) return -1;
        }
        if (jx_buf_put(e, &b, s->s + a0, end - a0)) return -1;
        line_no++;
    }
    jstr *r = jx_buf_take(e, &b);
    if (!r) return -1;
    *out = jv_strv(r);
    return 0;
}

/* A float as int(): truncated; NaN gives the default (Jinja's ValueError), infinities and values past
 * 64 bits an error (Python would raise OverflowError or grow). 1 when NaN. */
static int float_to_int(jinja_env *e, double f, int64_t *out) {
    if (isnan(f)) return 1;
    if (!(f >= -9223372036854775808.0 && f < 9223372036854775808.0))
        return jx_error(e, "int: %g is out of the 64-bit integer range", f);
    *out = (int64_t)f;
    return 0;
}

static int f_int(jinja_env *e, jv v, const jargs *a, jv *out) {
    jv def = jx_arg(a, 0, "default", jv_int(0));
    jv basev = jx_arg(a, 1, "base", jv_int(10));
    /* a base Python refuses (not 2..36) makes int(value, base) fail, and Jinja then tries float(value) */
    int base = basev.t == JV_INT && basev.u.i >= 2 && basev.u.i <= 36 ? (int)basev.u.i : 0;
    int64_t i = 0;
    int r;
    switch (v.t) {
    case JV_INT:
    case JV_BOOL: *out = jv_int(v.u.i); return 0;
    case JV_FLOAT:
        if ((r = float_to_int(e, v.u.f, &i)) < 0) return -1;
        *out = r ? def : jv_int(i);
        return 0;
    case JV_STR: {
        jv t;
        if (jx_strip(e, v.u.s, NULL, 1, 1, &t)) return -1;
        const char *p = t.u.s->s;
        char *end;
        if (!t.u.s->len || memchr(p, '\0', t.u.s->len)) break; /* strtoll would stop at a NUL */
        if (base) {
            errno = 0;
            long long x = strtoll(p, &end, base);
            if (*end == '\0') {
                if (errno == ERANGE) return jx_error(e, "int: '%.40s' is out of the 64-bit integer range", p);
                *out = jv_int(x);
                return 0;
            }
        }
        double d = strtod(p, &end);
        if (*end != '\0') break;
        if ((r = float_to_int(e, d, &i)) < 0) return -1;
        *out = r ? def : jv_int(i);
        return 0;
    }
    default: break;
    }
    *out = def;
    return 0;
}

static int f_float(jinja_env *e, jv v, const jargs *a, jv *out) {
    jv def = jx_arg(a, 0, "default", jv_float(0.0));
    if (jx_is_number(v)) {
        *out = jv_float(jx_num(v));
        return 0;
    }
    if (v.t == JV_STR) {
        jv t;
        if (jx_strip(e, v.u.s, NULL, 1, 1, &t)) return -1;
        char *end;
        double d = strtod(t.u.s->s, &end);
        if (t.u.s->len && end == t.u.s->s + t.u.s->len) { /* all of it: a NUL inside is not the end */
            *out = jv_float(d);
            return 0;
        }
    }
    *out = def;
    return 0;
}

static int f_round(jinja_env *e, jv v, const jargs *a, jv *out) {
    jv p = jx_arg(a, 0, "precision", jv_int(0));
    jv m = jx_arg(a, 1, "method", jv_none());
    if (!jx_is_number(v)) return jx_error(e, "round: expected a number, got %s", jx_type_name(v));
    if (p.t != JV_INT || p.u.i < 0 || p.u.i > 15) return jx_error(e, "round: precision must be an integer in [0, 15]");
    const char *method = m.t == JV_STR ? m.u.s->s : "common";
    double scale = pow(10.0, (double)p.u.i), x = jx_num(v) * scale, r;
    if (!strcmp(method, "common"))
        r = nearbyint(x); /* Python's round: half to even */
    else if (!strcmp(method, "ceil"))
        r = ceil(x);
    else if (!strcmp(method, "floor"))
        r = floor(x);
    else
        return jx_error(e, "round: method must be common, ceil or floor");
    *out = jv_float(r / scale);
    return 0;
}

static int f_join(jinja_env *e, jv v, const jargs *a, jv *out) {
    jlist *l;
    jstr *sep = NULL;
    jv d = jx_arg(a, 0, "d", jv_none()), attr = jx_arg(a, 1, "attribute", jv_none());
    if (d.t != JV_NONE && jx_to_str(e, d, &sep)) return -1;
    if (jx_iter_list(e, v, &l)) return -1;
    jx_buf b = {0};
    for (size_t i = 0; i < l->n; i++) {
        jv item = l->v[i];
        if (attr.t == JV_STR && attr_path(e, item, attr.u.s, &item)) return -1;
        if ((i && sep && jx_buf_put(e, &b, sep->s, sep->len)) || jx_write_str(e, &b, item)) return -1;
    }
    jstr *r = jx_buf_take(e, &b);
    if (!r) return -1;
    *out = jv_strv(r);
    return 0;
}

/* select/reject/selectattr/rejectattr: the test from args (after the attribute for *attr) */
static int f_select(jinja_env *e, jv v, const jargs *a, int by_attr, int keep, jscope *s, jv *out) {
    jlist *l;
    if (!jx_truthy(v)) v = jv_undef(NULL); /* Jinja yields nothing for a false value (None included) */
    if (jx_iter_list(e, v, &l)) return -1;
    int k = 0;
    jstr *attr = NULL;
    if (by_attr) {
        if (a->n_pos < 1 || jx_want_str(e, a->pos[0], "selectattr", &attr))
            return jx_error(e, "selectattr: an attribute is needed");
        k = 1;
    }
    const char *test = NULL;
    jargs targs = {0};
    if (a->n_pos > k) {
        jstr *t = NULL;
        if (jx_want_str(e, a->pos[k], "select", &t)) return -1;
        test = t->s;
        targs.pos = a->pos + k + 1;
        targs.n_pos = a->n_pos - k - 1;
        targs.kw = a->kw;
        targs.kw_names = a->kw_names;
        targs.n_kw = a->n_kw;
    }
    jlist *r = jx_list(e, l->n);
    if (!r) return -1;
    for (size_t i = 0; i < l->n; i++) {
        jv x = l->v[i];
        int ok;
        if (attr && attr_path(e, x, attr, &x)) return -1;
        if (test) {
            if (jx_test(e, test, x, &targs, s, &ok)) return -1;
        } else {
            ok = jx_truthy(x);
        }
        if (ok == keep) r->v[r->n++] = l->v[i];
    }
    *out = jv_listv(r);
    return 0;
}

static int f_map(jinja_env *e, jv v, const jargs *a, jscope *s, jv *out) {
    jlist *l;
    if (!jx_truthy(v)) v = jv_undef(NULL); /* as select: nothing for a false value */
    if (jx_iter_list(e, v, &l)) return -1;
    jlist *r = jx_list(e, l->n);
    if (!r) return -1;
    jv attr = jx_arg(a, -1, "attribute", jv_none());
    if (attr.t != JV_NONE) {
        jv def = jx_arg(a, -1, "default", jv_undef(NULL));
        jstr *path;
        if (jx_to_str(e, attr, &path)) return -1;
        for (size_t i = 0; i < l->n; i++) {
            if (attr_path(e, l->v[i], path, &r->v[i])) return -1;
            if (r->v[i].t == JV_UNDEF && def.t != JV_UNDEF) r->v[i] = def;
        }
    } else {
        jstr *f = NULL;
        if (a->n_pos < 1) return jx_error(e, "map: a filter name or attribute= is needed");
        if (jx_want_str(e, a->pos[0], "map", &f)) return -1;
        jargs rest = {a->pos + 1, a->n_pos - 1, a->kw_names, a->kw, a->n_kw};
        for (size_t i = 0; i < l->n; i++)
            if (jx_filter(e, f->s, l->v[i], &rest, s, &r->v[i])) return -1;
    }
    r->n = l->n;
    *out = jv_listv(r);
    return 0;
}

static int f_sort(jinja_env *e, jv v, const jargs *a, jv *out) {
    static const char *const kw[] = {"reverse", "case_sensitive", "attribute", NULL};
    if (jx_check_args(e, a, "sort", 3, kw)) return -1;
    int reverse = jx_truthy(jx_arg(a, 0, "reverse", jv_bool(0)));
    int cs = jx_truthy(jx_arg(a, 1, "case_sensitive", jv_bool(0)));
    jv attr = jx_arg(a, 2, "attribute", jv_none());
    jlist *l;
    if (jx_iter_list(e, v, &l)) return -1;
    jv *keys = jx_alloc(e, (l->n ? l->n : 1) * sizeof *keys);
    size_t *order;
    if (!keys) return -1;
    for (size_t i = 0; i < l->n; i++) {
        jv key = l->v[i];
        if (attr.t == JV_STR && attr_path(e, key, attr.u.s, &key)) return -1;
        if (sort_key(e, key, cs, &keys[i])) return -1;
    }
    if (sorted(e, keys, l->n, reverse, &order)) return -1;
    jlist *r = jx_list(e, l->n);
    if (!r) return -1;
    for (size_t i = 0; i < l->n; i++)
        r->v[i] = l->v[order[i]];
    r->n = l->n;
    *out = jv_listv(r);
    return 0;
}

static int f_dictsort(jinja_env *e, jv v, const jargs *a, jv *out) {
    static const char *const kw[] = {"case_sensitive", "by", "reverse", NULL};
    if (jx_check_args(e, a, "dictsort", 3, kw)) return -1;
    if (v.t != JV_DICT) return jx_error(e, "dictsort: expected a dict, got %s", jx_type_name(v));
    int cs = jx_truthy(jx_arg(a, 0, "case_sensitive", jv_bool(0)));
    jv by = jx_arg(a, 1, "by", jv_none());
    int by_value = by.t == JV_STR && !strcmp(by.u.s->s, "value");
    int reverse = jx_truthy(jx_arg(a, 2, "reverse", jv_bool(0)));
    const jdict *d = v.u.d;
    jv *keys = jx_alloc(e, (d->n ? d->n : 1) * sizeof *keys);
    size_t *order;
    jlist *r = jx_list(e, d->n);
    if (!keys || !r) return -1;
    for (size_t i = 0; i < d->n; i++)
        if (sort_key(e, by_value ? d->v[i] : d->k[i], cs, &keys[i])) return -1;
    if (sorted(e, keys, d->n, reverse, &order)) return -1;
    for (size_t i = 0; i < d->n; i++) {
        jlist *pair = jx_list(e, 2);
        if (!pair) return -1;
        pair->tuple = 1;
        pair->v[0] = d->k[order[i]];
        pair->v[1] = d->v[order[i]];
        pair->n = 2;
        r->v[i] = jv_listv(pair);
    }
    r->n = d->n;
    *out = jv_listv(r);
    return 0;
}

static int f_unique(jinja_env *e, jv v, const jargs *a, jv *out) {
    int cs = jx_truthy(jx_arg(a, 0, "case_sensitive", jv_bool(0)));
    jv attr = jx_arg(a, 1, "attribute", jv_none());
    jlist *l;
    if (jx_iter_list(e, v, &l)) return -1;
    jlist *r = jx_list(e, l->n);
    jdict *seen = jx_dict(e, l->n); /* a set, as Jinja's: O(1) a key (hashed by value) */
    if (!r || !seen) return -1;
    for (size_t i = 0; i < l->n; i++) {
        jv key = l->v[i];
        size_t before = seen->n;
        if (attr.t == JV_STR && attr_path(e, key, attr.u.s, &key)) return -1;
        if (sort_key(e, key, cs, &key) || jx_dict_set(e, seen, key, jv_none())) return -1;
        if (seen->n > before) r->v[r->n++] = l->v[i]; /* a new key: the first of its kind */
    }
    *out = jv_listv(r);
    return 0;
}

static int f_minmax(jinja_env *e, jv v, const jargs *a, int want_max, jv *out) {
    int cs = jx_truthy(jx_arg(a, 0, "case_sensitive", jv_bool(0)));
    jv attr = jx_arg(a, 1, "attribute", jv_none());
    jlist *l;
    if (jx_iter_list(e, v, &l)) return -1;
    if (l->n == 0) {
        *out = jv_undef(jx_cstr(e, "no first item, sequence was empty"));
        return 0;
    }
    jv best = l->v[0], best_key = jv_none();
    if (jx_step(e, l->n)) return -1;
    for (size_t i = 0; i < l->n; i++) {
        jv key = l->v[i];
        int c = 0;
        if (attr.t == JV_STR && attr_path(e, key, attr.u.s, &key)) return -1;
        if (sort_key(e, key, cs, &key)) return -1;
        if (i && jx_compare(e, key, best_key, &c)) return -1;
        if (i == 0 || (want_max ? c > 0 : c < 0)) best = l->v[i], best_key = key;
    }
    *out = best;
    return 0;
}

int jx_escape(jinja_env *e, jv v, jv *out) {
    if (v.t == JV_STR && v.safe) {
        *out = v;
        return 0;
    }
    jstr *s;
    if (jx_to_str(e, v, &s)) return -1;
    jx_buf b = {0};
    for (size_t i = 0; i < s->len; i++) {
        const char *r = NULL;
        switch (s->s[i]) {
        case '&': r = "&amp;"; break;
        case '<': r = "&lt;"; break;
        case '>': r = "&gt;"; break;
        case '"': r = "&#34;"; break;
        case '\'': r = "&#39;"; break;
        default: break;
        }
        if (r ? jx_buf_puts(e, &b, r) : jx_buf_put(e, &b, s->s + i, 1)) return -1;
    }
    jstr *r = jx_buf_take(e, &b);
    if (!r) return -1;
    *out = jv_strv(r);
    out->safe = 1;
    return 0;
}

static int f_batch(jinja_env *e, jv v, const jargs *a, jv *out) {
    jv cnt = jx_arg(a, 0, "linecount", jv_none()), fill = jx_arg(a, 1, "fill_with", jv_none());
    int has_fill = a->n_pos > 1 || a->n_kw > 0;
    if (cnt.t != JV_INT || cnt.u.i < 1) return jx_error(e, "batch: the count must be a positive integer");
    jlist *l;
    if (jx_iter_list(e, v, &l)) return -1;
    jlist *r = jx_list(e, 0), *cur = NULL;
    if (!r) return -1;
    for (size_t i = 0; i < l->n; i++) {
        if (!cur || (int64_t)cur->n == cnt.u.i) {
            if (!(cur = jx_list(e, 0)) || jx_list_push(e, r, jv_listv(cur))) return -1;
        }
        if (jx_list_push(e, cur, l->v[i])) return -1;
    }
    while (has_fill && cur && (int64_t)cur->n < cnt.u.i)
        if (jx_list_push(e, cur, fill)) return -1;
    *out = jv_listv(r);
    return 0;
}

static int f_items(jinja_env *e, jv v, jv *out) {
    if (v.t == JV_UNDEF) {
        jlist *l = jx_list(e, 1);
        if (!l) return -1;
        *out = jv_listv(l);
        return 0;
    }
    if (v.t != JV_DICT) return jx_error(e, "items: expected a mapping, got %s", jx_type_name(v));
    return jx_call_method(e, v, "items", &no_args, out);
}

int jx_filter(jinja_env *e, const char *name, jv v, const jargs *a, jscope *s, jv *out) {
    jstr *str;
    if (jx_step(e, 1)) return -1;
    if (!strcmp(name, "default") || !strcmp(name, "d")) {
        jstr *empty = jx_cstr(e, "");
        if (!empty) return -1;
        jv def = jx_arg(a, 0, "default_value", jv_strv(empty));
        int boolean = jx_truthy(jx_arg(a, 1, "boolean", jv_bool(0)));
        *out = v.t == JV_UNDEF || (boolean && !jx_truthy(v)) ? def : v;
        return 0;
    }
    if (!strcmp(name, "tojson")) return f_tojson(e, v, a, out);
    if (!strcmp(name, "length") || !strcmp(name, "count")) return f_length(e, v, out);
    if (!strcmp(name, "string")) return jx_to_str(e, v, &str) ? -1 : (*out = jv_strv(str), 0);
    if (!strcmp(name, "safe")) {
        if (jx_to_str(e, v, &str)) return -1;
        *out = jv_strv(str);
        out->safe = 1;
        return 0;
    }
    if (!strcmp(name, "trim")) {
        jv chars = jx_arg(a, 0, "chars", jv_none());
        jstr *cs = NULL;
        if (chars.t != JV_NONE && jx_want_str(e, chars, "trim", &cs)) return -1;
        if (jx_to_str(e, v, &str) || jx_strip(e, str, cs, 1, 1, out)) return -1;
        out->safe = v.t == JV_STR && v.safe; /* Markup.strip() is Markup */
        return 0;
    }
    if (!strcmp(name, "upper") || !strcmp(name, "lower") || !strcmp(name, "capitalize") || !strcmp(name, "title")) {
        if (jx_to_str(e, v, &str) || jx_case_map(e, str,
                                                 name[0] == 'u'   ? 'u'
                                                 : name[0] == 'l' ? 'l'
                                                 : name[0] == 'c' ? 'c'
                                                                  : 'T',
                                                 out))
            return -1;
        out->safe = v.t == JV_STR && v.safe;
        return 0;
    }
    if (!strcmp(name, "replace")) {
        jstr *old, *new_;
        jv cnt = jx_arg(a, 2, "count", jv_none());
        if (jx_to_str(e, v, &str) || jx_to_str(e, jx_arg(a, 0, "old", jv_none()), &old) ||
            jx_to_str(e, jx_arg(a, 1, "new", jv_none()), &new_))
            return -1;
        if (cnt.t != JV_NONE && cnt.t != JV_INT) return jx_error(e, "replace: count must be an integer");
        return jx_replace(e, str, old, new_, cnt.t == JV_INT ? cnt.u.i : -1, out);
    }
    if (!strcmp(name, "join")) return f_join(e, v, a, out);
    if (!strcmp(name, "first") || !strcmp(name, "last")) {
        jlist *l;
        if (v.t == JV_STR) {
            if (!v.u.s->len) return *out = jv_undef(jx_cstr(e, "no item, string was empty")), 0;
            return jx_getitem(e, v, jv_int(name[0] == 'f' ? 0 : -1), out);
        }
        if (jx_iter_list(e, v, &l)) return -1;
        *out = l->n ? l->v[name[0] == 'f' ? 0 : l->n - 1] : jv_undef(jx_cstr(e, "no item, sequence was empty"));
        return 0;
    }
    if (!strcmp(name, "list")) {
        jlist *l;
        if (jx_iter_list(e, v, &l)) return -1;
        return jx_slice(e, jv_listv(l), jv_none(), jv_none(), jv_none(), out) ? -1 : (out->u.l->tuple = 0, 0);
    }
    if (!strcmp(name, "items")) return f_items(e, v, out);
    if (!strcmp(name, "map")) return f_map(e, v, a, s, out);
    if (!strcmp(name, "select")) return f_select(e, v, a, 0, 1, s, out);
    if (!strcmp(name, "reject")) return f_select(e, v, a, 0, 0, s, out);
    if (!strcmp(name, "selectattr")) return f_select(e, v, a, 1, 1, s, out);
    if (!strcmp(name, "rejectattr")) return f_select(e, v, a, 1, 0, s, out);
    if (!strcmp(name, "int")) return f_int(e, v, a, out);
    if (!strcmp(name, "float")) return f_float(e, v, a, out);
    if (!strcmp(name, "abs")) {
        if (v.t == JV_FLOAT) return *out = jv_float(fabs(v.u.f)), 0;
        if (v.t == JV_INT || v.t == JV_BOOL) {
            if (v.u.i == INT64_MIN) return jx_error(e, "integer overflow in abs");
            return *out = jv_int(v.u.i < 0 ? -v.u.i : v.u.i), 0;
        }
        return jx_error(e, "bad operand type for abs(): '%s'", jx_type_name(v));
    }
    if (!strcmp(name, "round")) return f_round(e, v, a, out);
    if (!strcmp(name, "indent")) {
        if (f_indent(e, v, a, out)) return -1;
        out->safe = v.t == JV_STR && v.safe;
        return 0;
    }
    if (!strcmp(name, "sort")) return f_sort(e, v, a, out);
    if (!strcmp(name, "dictsort")) return f_dictsort(e, v, a, out);
    if (!strcmp(name, "unique")) return f_unique(e, v, a, out);
    if (!strcmp(name, "min") || !strcmp(name, "max")) return f_minmax(e, v, a, name[1] == 'a', out);
    if (!strcmp(name, "reverse")) {
        if (v.t == JV_STR) return jx_slice(e, v, jv_none(), jv_none(), jv_int(-1), out);
        jlist *l;
        if (jx_iter_list(e, v, &l)) return -1;
        return jx_slice(e, jv_listv(l), jv_none(), jv_none(), jv_int(-1), out);
    }
    if (!strcmp(name, "batch")) return f_batch(e, v, a, out);
    if (!strcmp(name, "wordcount")) {
        if (jx_to_str(e, v, &str) || jx_step(e, str->len / 4)) return -1; /* each code point decoded and classified */
        int64_t words = 0;
        int in_word = 0;
        for (size_t i = 0; i < str->len;) {
            int l;
            int32_t cp = jx_utf8_next(str->s + i, str->len - i, &l);
            int w = (cp >= '0' && cp <= '9') || cp == '_' || jx_lower_cp(cp) != jx_upper_cp(cp) ||
                    (cp >= 0x80 && !jx_is_space_cp(cp) && cp != 0xa0);
            if (w && !in_word) words++;
            in_word = w;
            i += (size_t)l;
        }
        *out = jv_int(words);
        return 0;
    }
    if (!strcmp(name, "e") || !strcmp(name, "escape")) return jx_escape(e, v, out);
    if (!strcmp(name, "forceescape")) {
        if (jx_to_str(e, v, &str)) return -1;
        return jx_escape(e, jv_strv(str), out);
    }
    if (!strcmp(name, "sum")) {
        jlist *l;
        jv attr = jx_arg(a, 0, "attribute", jv_none()), acc = jx_arg(a, 1, "start", jv_int(0));
        if (jx_iter_list(e, v, &l)) return -1;
        if (jx_step(e, l->n)) return -1;
        for (size_t i = 0; i < l->n; i++) {
            jv x = l->v[i];
            if (attr.t == JV_STR && attr_path(e, x, attr.u.s, &x)) return -1;
            if (!jx_is_number(x) || !jx_is_number(acc)) return jx_error(e, "sum: items must be numbers");
            if (acc.t == JV_FLOAT || x.t == JV_FLOAT)
                acc = jv_float(jx_num(acc) + jx_num(x));
            else if (__builtin_add_overflow(acc.u.i, x.u.i, &acc.u.i))
                return jx_error(e, "integer overflow in sum");
            else
                acc.t = JV_INT;
        }
        *out = acc;
        return 0;
    }
    if (!strcmp(name, "attr")) {
        jstr *n = NULL;
        if (jx_want_str(e, jx_arg(a, 0, "name", jv_none()), "attr", &n)) return -1;
        return jx_getattr(e, v, n->s, n->len, out);
    }
    return jx_error(e, "no filter named '%.60s'", name);
}

/* ---- tests ------------------------------------------------------------------ */

static const char *const k_tests[] = {
    "defined", "undefined", "none",        "boolean",  "false",    "true",     "integer",     "float",
    "number",  "string",    "mapping",     "iterable", "sequence", "callable", "sameas",      "escaped",
    "odd",     "even",      "divisibleby", "eq",       "equalto",  "==",       "ne",          "!=",
    "lt",      "lessthan",  "<",           "le",       "<=",       "gt",       "greaterthan", ">",
    "ge",      ">=",        "in",          "lower",    "upper",    "filter",   "test",        NULL};

int jx_has_test(const char *name) {
    for (int i = 0; k_tests[i]; i++)
        if (!strcmp(k_tests[i], name)) return 1;
    return 0;
}

int jx_test(jinja_env *e, const char *name, jv v, const jargs *a, jscope *s, int *out) {
    (void)s;
    jv x = jx_arg(a, 0, NULL, jv_undef(NULL));
    if (jx_step(e, 1)) return -1;
    if (!strcmp(name, "defined"))
        *out = v.t != JV_UNDEF;
    else if (!strcmp(name, "undefined"))
        *out = v.t == JV_UNDEF;
    else if (!strcmp(name, "none"))
        *out = v.t == JV_NONE;
    else if (!strcmp(name, "boolean"))
        *out = v.t == JV_BOOL;
    else if (!strcmp(name, "false"))
        *out = v.t == JV_BOOL && !v.u.i;
    else if (!strcmp(name, "true"))
        *out = v.t == JV_BOOL && v.u.i;
    else if (!strcmp(name, "integer"))
        *out = v.t == JV_INT;
    else if (!strcmp(name, "float"))
        *out = v.t == JV_FLOAT;
    else if (!strcmp(name, "number"))
        *out = jx_is_number(v);
    else if (!strcmp(name, "string"))
        *out = v.t == JV_STR;
    else if (!strcmp(name, "mapping"))
        *out = v.t == JV_DICT && !v.u.d->ns;
    else if (!strcmp(name, "iterable"))
        *out = v.t == JV_STR || v.t == JV_LIST || (v.t == JV_DICT && !v.u.d->ns) || v.t == JV_UNDEF;
    else if (!strcmp(name, "sequence"))
        *out = v.t == JV_STR || v.t == JV_LIST || (v.t == JV_DICT && !v.u.d->ns) || v.t == JV_UNDEF;
    else if (!strcmp(name, "callable"))
        *out = v.t == JV_FUNC;
    else if (!strcmp(name, "sameas")) {
        /* Python's "is": identity for containers, value for the singletons and small values */
        if (v.t != x.t)
            *out = 0;
        else if (v.t == JV_LIST || v.t == JV_DICT || v.t == JV_FUNC || v.t == JV_STR)
            *out = v.u.l == x.u.l;
        else if (jx_equal(e, v, x, out))
            return -1;
    } else if (!strcmp(name, "escaped"))
        *out = v.t == JV_STR && v.safe;
    else if (!strcmp(name, "odd") || !strcmp(name, "even")) {
        if (v.t != JV_INT && v.t != JV_BOOL) {
            if (v.t == JV_UNDEF) return jx_undef_error(e, v);
            if (v.t != JV_FLOAT) return jx_error(e, "%s: expected a number, got %s", name, jx_type_name(v));
            *out = fmod(v.u.f, 2.0) == (name[0] == 'o' ? 1.0 : 0.0) || (name[0] == 'o' && fmod(v.u.f, 2.0) == -1.0);
        } else {
            *out = (v.u.i % 2 != 0) == (name[0] == 'o');
        }
    } else if (!strcmp(name, "divisibleby")) {
        if (!jx_is_number(v) || !jx_is_number(x)) return jx_error(e, "divisibleby: expected numbers");
        if (jx_num(x) == 0) return jx_error(e, "integer division or modulo by zero");
        if (v.t != JV_FLOAT && x.t != JV_FLOAT)
            *out = x.u.i == -1 || v.u.i % x.u.i == 0;
        else
            *out = fmod(jx_num(v), jx_num(x)) == 0;
    } else if (!strcmp(name, "eq") || !strcmp(name, "equalto") || !strcmp(name, "==")) {
        if (jx_equal(e, v, x, out)) return -1;
    } else if (!strcmp(name, "ne") || !strcmp(name, "!=")) {
        if (jx_equal(e, v, x, out)) return -1;
        *out = !*out;
    } else if (!strcmp(name, "in")) {
        if (x.t == JV_STR) {
            if (v.t != JV_STR) return jx_error(e, "'in <string>' requires string as left operand");
            if (jx_step(e, x.u.s->len / 64)) return -1;
            *out = v.u.s->len == 0 || memmem(x.u.s->s, x.u.s->len, v.u.s->s, v.u.s->len) != NULL;
        } else if (x.t == JV_LIST) {
            *out = 0;
            for (size_t i = 0; i < x.u.l->n && !*out; i++)
                if (jx_step(e, 1) || jx_equal(e, x.u.l->v[i], v, out)) return -1;
        } else if (x.t == JV_DICT) {
            jv *found;
            if (jx_dict_get(e, x.u.d, v, &found)) return -1;
            *out = found != NULL;
        } else {
            return jx_error(e, "argument of type '%s' is not iterable", jx_type_name(x));
        }
    } else if (!strcmp(name, "lower") || !strcmp(name, "upper")) {
        jstr *str;
        jv m;
        if (jx_to_str(e, v, &str) || jx_case_map(e, str, name[0], &m) || jx_equal(e, m, jv_strv(str), out)) return -1;
    } else if (!strcmp(name, "filter") || !strcmp(name, "test")) {
        static const char *const filters[] = {
            "default",    "d",          "tojson", "length",      "count", "string",  "safe",
            "trim",       "upper",      "lower",  "capitalize",  "title", "replace", "join",
            "first",      "last",       "list",   "items",       "map",   "select",  "reject",
            "selectattr", "rejectattr", "int",    "float",       "abs",   "round",   "indent",
            "sort",       "dictsort",   "unique", "min",         "max",   "reverse", "batch",
            "wordcount",  "e",          "escape", "forceescape", "sum",   "attr",    NULL};
        if (v.t != JV_STR) return jx_error(e, "%s: expected a name", name);
        *out = 0;
        if (name[0] == 't')
            *out = jx_has_test(v.u.s->s);
        else
            for (int i = 0; filters[i] && !*out; i++)
                *out = !strcmp(filters[i], v.u.s->s);
    } else {
        int c;
        const char *op = name;
        if (!strcmp(op, "lessthan")) op = "lt";
        if (!strcmp(op, "greaterthan")) op = "gt";
        int lt = !strcmp(op, "lt") || !strcmp(op, "<"), le = !strcmp(op, "le") || !strcmp(op, "<="),
            gt = !strcmp(op, "gt") || !strcmp(op, ">"), ge = !strcmp(op, "ge") || !strcmp(op, ">=");
        if (!(lt || le || gt || ge)) return jx_error(e, "no test named '%.60s'", name);
        if (jx_compare(e, v, x, &c)) return -1;
        *out = lt ? c < 0 : le ? c <= 0 : gt ? c > 0 : c >= 0;
    }
    return 0;
}
