/*
 * jinja_json_read.c - JSON text (RFC 8259) straight into template values:
 * objects become dicts in their key order, arrays lists, numbers int when
 * they have no fraction or exponent and fit 64 bits (else float), as Python's
 * json.loads gives them to a template. The library cannot use json-c (the
 * browser build has only wasi-libc), and this is all a chat template needs.
 *
 * Strict: one value, optional whitespace around it, \u escapes with surrogate
 * pairs joined (a lone surrogate becomes U+FFFD), no control bytes inside
 * strings, nesting limited by the env's depth limit. Errors name the byte
 * offset.
 */
#include "chat/jinja_impl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    jinja_env *e;
    const char *s;
    size_t n, i;
    const char *what;
    int depth;
} jr;

static int fail(jr *r, const char *msg) {
    return jx_error(r->e, "%s: invalid JSON at byte %zu: %s", r->what, r->i, msg);
}

static void skip_ws(jr *r) {
    while (r->i < r->n && (r->s[r->i] == ' ' || r->s[r->i] == '\t' || r->s[r->i] == '\n' || r->s[r->i] == '\r'))
        r->i++;
}

static int hex4(jr *r, unsigned *out) {
    if (r->n - r->i < 4) return fail(r, "a short \\u escape");
    unsigned v = 0;
    for (int k = 0; k < 4; k++) {
        char c = r->s[r->i++];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= (unsigned)(c - 'A' + 10);
        else
            return fail(r, "a bad \\u escape");
    }
    *out = v;
    return 0;
}

static int parse_string(jr *r, jstr **out) {
    r->i++; /* the opening quote */
    jx_buf b = {0};
    for (;;) {
        size_t start = r->i;
        while (r->i < r->n && r->s[r->i] != '"' && r->s[r->i] != '\\' && (unsigned char)r->s[r->i] >= 0x20)
            r->i++;
        if (jx_buf_put(r->e, &b, r->s + start, r->i - start)) return -1;
        if (r->i >= r->n) return fail(r, "an unterminated string");
        char c = r->s[r->i];
        if (c == '"') {
            r->i++;
            break;
        }
        if (c != '\\') return fail(r, "a control character in a string");
        if (++r->i >= r->n) return fail(r, "an unterminated escape");
        c = r->s[r->i++];
        const char *simple = NULL;
        switch (c) {
        case '"': simple = "\""; break;
        case '\\': simple = "\\"; break;
        case '/': simple = "/"; break;
        case 'b': simple = "\b"; break;
        case 'f': simple = "\f"; break;
        case 'n': simple = "\n"; break;
        case 'r': simple = "\r"; break;
        case 't': simple = "\t"; break;
        case 'u': {
            unsigned cp;
            if (hex4(r, &cp)) return -1;
            if (cp >= 0xd800 && cp < 0xdc00 && r->n - r->i >= 6 && r->s[r->i] == '\\' && r->s[r->i + 1] == 'u') {
                size_t save = r->i;
                unsigned lo;
                r->i += 2;
                if (hex4(r, &lo)) return -1;
                if (lo >= 0xdc00 && lo < 0xe000)
                    cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                else
                    r->i = save, cp = 0xfffd;
            } else if (cp >= 0xd800 && cp < 0xe000) {
                cp = 0xfffd;
            }
            if (jx_put_cp(r->e, &b, (int32_t)cp)) return -1;
            continue;
        }
        default: r->i--; return fail(r, "an unknown escape");
        }
        if (jx_buf_put(r->e, &b, simple, 1)) return -1;
    }
    *out = jx_buf_take(r->e, &b);
    return *out ? 0 : -1;
}

static int parse_number(jr *r, jv *out) {
    size_t start = r->i;
    int is_float = 0;
    if (r->s[r->i] == '-') r->i++;
    if (r->i >= r->n || r->s[r->i] < '0' || r->s[r->i] > '9') return fail(r, "a bad number");
    if (r->s[r->i] == '0')
        r->i++;
    else
        while (r->i < r->n && r->s[r->i] >= '0' && r->s[r->i] <= '9')
            r->i++;
    if (r->i < r->n && r->s[r->i] == '.') {
        is_float = 1;
        r->i++;
        if (r->i >= r->n || r->s[r->i] < '0' || r->s[r->i] > '9') return fail(r, "a bad number");
        while (r->i < r->n && r->s[r->i] >= '0' && r->s[r->i] <= '9')
            r->i++;
    }
    if (r->i < r->n && (r->s[r->i] == 'e' || r->s[r->i] == 'E')) {
        is_float = 1;
        r->i++;
        if (r->i < r->n && (r->s[r->i] == '+' || r->s[r->i] == '-')) r->i++;
        if (r->i >= r->n || r->s[r->i] < '0' || r->s[r->i] > '9') return fail(r, "a bad number");
        while (r->i < r->n && r->s[r->i] >= '0' && r->s[r->i] <= '9')
            r->i++;
    }
    char buf[64];
    size_t len = r->i - start;
    if (len >= sizeof buf) {
        /* very long: only as a float (digits past double precision do not matter) */
        is_float = 1;
        len = sizeof buf - 1;
    }
    memcpy(buf, r->s + start, len);
    buf[len] = '\0';
    if (!is_float) {
        errno = 0;
        long long v = strtoll(buf, NULL, 10);
        if (errno != ERANGE) {
            *out = jv_int(v);
            return 0;
        }
    }
    *out = jv_float(strtod(buf, NULL));
    return 0;
}

static int literal(jr *r, const char *word, jv v, jv *out) {
    size_t n = strlen(word);
    if (r->n - r->i < n || memcmp(r->s + r->i, word, n) != 0) return fail(r, "an unexpected character");
    r->i += n;
    *out = v;
    return 0;
}

static int parse_value(jr *r, jv *out) {
    if (jx_step(r->e, 1)) return -1;
    skip_ws(r);
    if (r->i >= r->n) return fail(r, "the text ends where a value should be");
    char c = r->s[r->i];
    if (c == '{' || c == '[') {
        if (++r->depth > r->e->lim.max_depth) return fail(r, "nested too deeply");
        r->i++;
        char close = c == '{' ? '}' : ']';
        jlist *l = c == '[' ? jx_list(r->e, 0) : NULL;
        jdict *d = c == '{' ? jx_dict(r->e, 0) : NULL;
        if (!l && !d) return -1;
        skip_ws(r);
        if (r->i < r->n && r->s[r->i] == close) {
            r->i++;
        } else {
            for (;;) {
                jv v;
                if (d) {
                    skip_ws(r);
                    if (r->i >= r->n || r->s[r->i] != '"') return fail(r, "an object key must be a string");
                    jstr *k;
                    if (parse_string(r, &k)) return -1;
                    skip_ws(r);
                    if (r->i >= r->n || r->s[r->i] != ':') return fail(r, "':' expected after a key");
                    r->i++;
                    if (parse_value(r, &v) || jx_dict_set(r->e, d, jv_strv(k), v)) return -1;
                } else {
                    if (parse_value(r, &v) || jx_list_push(r->e, l, v)) return -1;
                }
                skip_ws(r);
                if (r->i < r->n && r->s[r->i] == ',') {
                    r->i++;
                    continue;
                }
                if (r->i < r->n && r->s[r->i] == close) {
                    r->i++;
                    break;
                }
                return fail(r, d ? "',' or '}' expected" : "',' or ']' expected");
            }
        }
        r->depth--;
        *out = d ? jv_dictv(d) : jv_listv(l);
        return 0;
    }
    if (c == '"') {
        jstr *s;
        if (parse_string(r, &s)) return -1;
        *out = jv_strv(s);
        return 0;
    }
    if (c == '-' || (c >= '0' && c <= '9')) return parse_number(r, out);
    if (c == 't') return literal(r, "true", jv_bool(1), out);
    if (c == 'f') return literal(r, "false", jv_bool(0), out);
    if (c == 'n') return literal(r, "null", jv_none(), out);
    return fail(r, "an unexpected character");
}

int jx_json_parse(jinja_env *e, const char *s, size_t len, const char *what, jv *out) {
    jr r = {e, s, len, 0, what, 0};
    if (parse_value(&r, out)) return -1;
    skip_ws(&r);
    if (r.i != r.n) return fail(&r, "text after the value");
    return 0;
}
