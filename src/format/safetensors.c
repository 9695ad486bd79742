/*
 * safetensors.c - the safetensors reader (see safetensors.h for the format
 * and the guarantees): single files, sharded sets through their index, and
 * model folders.
 *
 * The JSON of a header (and of an index) is read by a small strict scanner
 * of this file rather than the library's general reader (jx_json_parse,
 * chat/jinja_json_read.c), for four reasons: that reader keeps the last of
 * duplicate keys without a word, and a duplicate tensor name or field must be
 * an error here; it accepts any bytes in strings, and the header must be
 * valid UTF-8 with no lone surrogates; it turns integers past 2^63 into
 * floats, and offsets are unsigned 64-bit values whose loss of precision
 * would be silent; and it builds a value tree in an arena whose budget suits
 * a chat's messages, not a 100 MB header. The scanner knows the one shape
 * this format has - an object of objects with a string, a list of integers,
 * a list of two integers, and a string-to-string metadata object - checks
 * it as it goes, and stores only what it keeps: the tensors' fields, and the
 * decoded strings (names, metadata) in one buffer of the header's size (a
 * decoded string plus its NUL is never longer than its quoted JSON form, so
 * the buffer cannot overflow). Values of unknown fields are checked as JSON
 * and skipped, nested at most ST_MAX_JSON_DEPTH deep.
 *
 * Bounds: the header is at most ST_MAX_HEADER bytes, the tensors at most
 * ST_MAX_TENSORS (in a file and in a set), the shards of a set at most
 * ST_MAX_SHARDS, an index at most ST_MAX_INDEX bytes; memory is linear in
 * the header. Every size is computed in 64 bits with overflow checks.
 * Duplicates (tensor names, metadata keys) are found by sorting, and lookups
 * are binary searches: n log n for a hostile header, never n^2.
 */
#include "format/safetensors.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#if !defined(__wasm__)
#include <sys/mman.h>
#endif

#include "core/alloc.h"
#include "core/dtype.h"
#include "core/error.h"
#include "format/file_bytes.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "wgml reads safetensors in place and needs a little-endian host"
#endif

static const struct {
    const char *name;
    size_t size;
    int wgml; /* wgml_dtype, or -1 */
} dtypes[ST_DTYPE_COUNT] = {
    [ST_BOOL] = {"BOOL", 1, -1},        [ST_U8] = {"U8", 1, -1},           [ST_I8] = {"I8", 1, WGML_I8},
    [ST_I16] = {"I16", 2, WGML_I16},    [ST_U16] = {"U16", 2, -1},         [ST_F16] = {"F16", 2, WGML_F16},
    [ST_BF16] = {"BF16", 2, WGML_BF16}, [ST_I32] = {"I32", 4, WGML_I32},   [ST_U32] = {"U32", 4, -1},
    [ST_F32] = {"F32", 4, WGML_F32},    [ST_F64] = {"F64", 8, WGML_F64},   [ST_I64] = {"I64", 8, WGML_I64},
    [ST_U64] = {"U64", 8, -1},          [ST_F8_E4M3] = {"F8_E4M3", 1, -1}, [ST_F8_E5M2] = {"F8_E5M2", 1, -1},
    [ST_F8_E8M0] = {"F8_E8M0", 1, -1},  [ST_C64] = {"C64", 8, -1},
};

/* types the format defines whose elements are not whole bytes: known, refused as unsupported */
static const char *const sub_byte_dtypes[] = {"F4", "F6_E2M3", "F6_E3M2"};

const char *st_dtype_name(st_dtype t) { return (unsigned)t < ST_DTYPE_COUNT ? dtypes[t].name : "invalid"; }
size_t st_dtype_size(st_dtype t) { return (unsigned)t < ST_DTYPE_COUNT ? dtypes[t].size : 0; }
int st_dtype_to_wgml(st_dtype t) { return (unsigned)t < ST_DTYPE_COUNT ? dtypes[t].wgml : -1; }

typedef struct st_meta {
    const char *key;
    const char *value;
    size_t len;
} st_meta;

/* One file's bytes and what its header says. */
typedef struct shard {
    char *path;          /* for messages (a copy) */
    const uint8_t *base; /* the whole file */
    size_t size;
    int kind;           /* WGML_BYTES_*: borrowed, mapped or owned */
    char *strings;      /* decoded names, metadata keys and values, back to back */
    st_tensor *tensors; /* header order (NULL once moved into a set's array) */
    int64_t n_tensors;
    st_meta *meta; /* __metadata__ in header order */
    int64_t n_meta;
    const st_meta **meta_by_key; /* sorted by key */
} shard;

struct st_file {
    char *name;
    shard *shards;
    int n_shards;
    st_tensor *tensors; /* a set's own array; a single file's is its shard's */
    int own_tensors;
    int64_t n_tensors;
    const st_tensor **by_name; /* sorted by name */
};

/* ---- UTF-8 ---- */

/* 1 when p[0..n) is valid UTF-8 (shortest forms, no surrogates, <= U+10FFFF);
 * else 0 with *bad the offset of the first bad sequence. */
static int utf8_valid(const uint8_t *p, size_t n, size_t *bad) {
    size_t i = 0;
    while (i < n) {
        uint8_t c = p[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t k;
        uint32_t cp, min;
        if (c >= 0xc2 && c <= 0xdf)
            k = 1, cp = c & 0x1f, min = 0x80;
        else if (c >= 0xe0 && c <= 0xef)
            k = 2, cp = c & 0x0f, min = 0x800;
        else if (c >= 0xf0 && c <= 0xf4)
            k = 3, cp = c & 0x07, min = 0x10000;
        else {
            *bad = i;
            return 0;
        }
        if (n - i <= k) {
            *bad = i;
            return 0;
        }
        for (size_t j = 1; j <= k; j++) {
            if ((p[i + j] & 0xc0) != 0x80) {
                *bad = i;
                return 0;
            }
            cp = (cp << 6) | (p[i + j] & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp < 0xe000)) {
            *bad = i;
            return 0;
        }
        i += k + 1;
    }
    return 1;
}

/* ---- the JSON scanner ---- */

typedef struct jr {
    const char *file; /* for messages */
    const char *what; /* "header", "index" */
    const uint8_t *s;
    size_t n, i;
    char *out; /* decoded strings: n + 1 bytes, enough for all of them */
    size_t used;
    wgml_error *err;
} jr;

static wgml_status jfail(jr *r, const char *msg) {
    return wgml_fail(r->err, WGML_ERR_FORMAT, "%s: the %s is not valid JSON at byte %zu: %s", r->file, r->what, r->i,
                     msg);
}

static void ws(jr *r) {
    while (r->i < r->n && (r->s[r->i] == ' ' || r->s[r->i] == '\t' || r->s[r->i] == '\n' || r->s[r->i] == '\r'))
        r->i++;
}

static int peek(jr *r) {
    ws(r);
    return r->i < r->n ? r->s[r->i] : -1;
}

/* Consumes c (after whitespace) or fails with msg. */
static wgml_status expect(jr *r, char c, const char *msg) {
    if (peek(r) != c) return jfail(r, msg);
    r->i++;
    return WGML_OK;
}

static int hex4(jr *r, unsigned *out) {
    if (r->n - r->i < 4) return -1;
    unsigned v = 0;
    for (int k = 0; k < 4; k++) {
        uint8_t c = r->s[r->i++];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= (unsigned)(c - 'A' + 10);
        else
            return -1;
    }
    *out = v;
    return 0;
}

static size_t put_utf8(char *o, unsigned cp) {
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xc0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xe0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        o[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    o[0] = (char)(0xf0 | (cp >> 18));
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
    o[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

/* A string (after whitespace), decoded into r->out: *str NUL-terminated,
 * *len its bytes (it may hold a NUL: *has_nul). With keep == 0 its bytes are
 * given back (a skipped value). The text was checked to be UTF-8 already. */
static wgml_status jstring(jr *r, int keep, const char **str, size_t *len, int *has_nul) {
    if (peek(r) != '"') return jfail(r, "a string expected");
    r->i++;
    char *o = r->out + r->used;
    size_t k = 0;
    int nul = 0;
    for (;;) {
        if (r->i >= r->n) return jfail(r, "an unterminated string");
        uint8_t c = r->s[r->i];
        if (c == '"') {
            r->i++;
            break;
        }
        if (c < 0x20) return jfail(r, "a control character in a string");
        if (c != '\\') {
            o[k++] = (char)c;
            r->i++;
            continue;
        }
        if (r->n - r->i < 2) return jfail(r, "an unterminated escape");
        c = r->s[r->i + 1];
        r->i += 2;
        char simple = 0;
        switch (c) {
        case '"': simple = '"'; break;
        case '\\': simple = '\\'; break;
        case '/': simple = '/'; break;
        case 'b': simple = '\b'; break;
        case 'f': simple = '\f'; break;
        case 'n': simple = '\n'; break;
        case 'r': simple = '\r'; break;
        case 't': simple = '\t'; break;
        case 'u': {
            unsigned cp, lo;
            if (hex4(r, &cp)) return jfail(r, "a bad \\u escape");
            if (cp >= 0xdc00 && cp < 0xe000) return jfail(r, "a lone low surrogate");
            if (cp >= 0xd800 && cp < 0xdc00) {
                if (r->n - r->i < 6 || r->s[r->i] != '\\' || r->s[r->i + 1] != 'u')
                    return jfail(r, "a lone high surrogate");
                r->i += 2;
                if (hex4(r, &lo)) return jfail(r, "a bad \\u escape");
                if (lo < 0xdc00 || lo >= 0xe000) return jfail(r, "a high surrogate without its low half");
                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
            }
            if (cp == 0) nul = 1;
            k += put_utf8(o + k, cp);
            continue;
        }
        default: r->i -= 1; return jfail(r, "an unknown escape");
        }
        o[k++] = simple;
    }
    o[k] = '\0';
    if (keep) r->used += k + 1;
    if (str) *str = o;
    if (len) *len = k;
    if (has_nul) *has_nul = nul;
    return WGML_OK;
}

static int is_digit(int c) { return c >= '0' && c <= '9'; }

/* Any JSON value (after whitespace), checked and skipped. */
static wgml_status jskip(jr *r, int depth) {
    int c = peek(r);
    if (c == '{' || c == '[') {
        if (depth >= ST_MAX_JSON_DEPTH) return jfail(r, "values nested too deeply");
        char close = c == '{' ? '}' : ']';
        r->i++;
        if (peek(r) == close) {
            r->i++;
            return WGML_OK;
        }
        for (;;) {
            wgml_status st;
            if (c == '{' &&
                ((st = jstring(r, 0, NULL, NULL, NULL)) || (st = expect(r, ':', "':' expected after a key"))))
                return st;
            if ((st = jskip(r, depth + 1))) return st;
            int d = peek(r);
            r->i++;
            if (d == ',') continue;
            if (d == close) return WGML_OK;
            r->i--;
            return jfail(r, c == '{' ? "',' or '}' expected" : "',' or ']' expected");
        }
    }
    if (c == '"') return jstring(r, 0, NULL, NULL, NULL);
    if (c == '-' || is_digit(c)) {
        if (c == '-') r->i++;
        if (r->i >= r->n || !is_digit(r->s[r->i])) return jfail(r, "a bad number");
        if (r->s[r->i] == '0')
            r->i++;
        else
            while (r->i < r->n && is_digit(r->s[r->i]))
                r->i++;
        if (r->i < r->n && r->s[r->i] == '.') {
            r->i++;
            if (r->i >= r->n || !is_digit(r->s[r->i])) return jfail(r, "a bad number");
            while (r->i < r->n && is_digit(r->s[r->i]))
                r->i++;
        }
        if (r->i < r->n && (r->s[r->i] == 'e' || r->s[r->i] == 'E')) {
            r->i++;
            if (r->i < r->n && (r->s[r->i] == '+' || r->s[r->i] == '-')) r->i++;
            if (r->i >= r->n || !is_digit(r->s[r->i])) return jfail(r, "a bad number");
            while (r->i < r->n && is_digit(r->s[r->i]))
                r->i++;
        }
        return WGML_OK;
    }
    static const char *const words[] = {"true", "false", "null"};
    for (int k = 0; k < 3; k++) {
        size_t wn = strlen(words[k]);
        if (r->n - r->i >= wn && memcmp(r->s + r->i, words[k], wn) == 0) {
            r->i += wn;
            return WGML_OK;
        }
    }
    return jfail(r, c < 0 ? "the text ends where a value should be" : "a value expected");
}

/* A non-negative integer that fits 64 bits (after whitespace). NULL when
 * read, else what is wrong with the value, for the caller's message. */
static const char *juint(jr *r, uint64_t *out) {
    int c = peek(r);
    if (c == '-') return "is negative";
    if (!is_digit(c)) return "is not an integer";
    uint64_t v = 0;
    if (c == '0') {
        r->i++;
        if (r->i < r->n && is_digit(r->s[r->i])) return "is not an integer (a leading zero)";
    } else {
        while (r->i < r->n && is_digit(r->s[r->i])) {
            unsigned d = (unsigned)(r->s[r->i] - '0');
            if (v > (UINT64_MAX - d) / 10) return "is too large";
            v = v * 10 + d;
            r->i++;
        }
    }
    if (r->i < r->n && (r->s[r->i] == '.' || r->s[r->i] == 'e' || r->s[r->i] == 'E')) return "is not an integer";
    *out = v;
    return NULL;
}

static int key_is(const char *k, size_t len, const char *want) { return len == strlen(want) && !memcmp(k, want, len); }

/* ---- one file ---- */

/* "[2, 3, 4]" into buf. */
static const char *shape_str(const st_tensor *t, char *buf, size_t cap) {
    size_t at = 0;
    at += (size_t)snprintf(buf, cap, "[");
    for (int d = 0; d < t->rank && at < cap; d++)
        at += (size_t)snprintf(buf + at, cap - at, "%s%lld", d ? ", " : "", (long long)t->shape[d]);
    if (at < cap) snprintf(buf + at, cap - at, "]");
    return buf;
}

static wgml_status oom(const char *name, wgml_error *err) {
    return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "%s: out of memory", name);
}

/* {"dtype": ..., "shape": [...], "data_offsets": [b, e]} of tensor t (its name set). */
static wgml_status parse_entry(jr *r, st_tensor *t, uint64_t *end) {
    const char *file = r->file, *name = t->name;
    if (peek(r) != '{')
        return wgml_fail(r->err, WGML_ERR_FORMAT, "%s: tensor '%s': its entry is not an object", file, name);
    r->i++;
    int have_dtype = 0, have_shape = 0, have_offsets = 0;
    wgml_status st;
    if (peek(r) == '}') {
        r->i++;
    } else {
        for (;;) {
            const char *k;
            size_t kn;
            if ((st = jstring(r, 0, &k, &kn, NULL)) || (st = expect(r, ':', "':' expected after a key"))) return st;
            if (key_is(k, kn, "dtype")) {
                if (have_dtype++)
                    return wgml_fail(r->err, WGML_ERR_FORMAT, "%s: tensor '%s': two dtype fields", file, name);
                if (peek(r) != '"')
                    return wgml_fail(r->err, WGML_ERR_FORMAT, "%s: tensor '%s': dtype is not a string", file, name);
                const char *d;
                size_t dn;
                if ((st = jstring(r, 0, &d, &dn, NULL))) return st;
                int found = -1;
                for (int i = 0; i < ST_DTYPE_COUNT && found < 0; i++)
                    if (key_is(d, dn, dtypes[i].name)) found = i;
                if (found < 0) {
                    for (size_t i = 0; i < sizeof sub_byte_dtypes / sizeof *sub_byte_dtypes; i++)
                        if (key_is(d, dn, sub_byte_dtypes[i]))
                            return wgml_fail(
                                r->err, WGML_ERR_UNSUPPORTED,
                                "%s: tensor '%s': dtype %s (elements smaller than a byte) is not supported", file, name,
                                sub_byte_dtypes[i]);
                    return wgml_fail(r->err, WGML_ERR_FORMAT, "%s: tensor '%s': unknown dtype '%.32s'", file, name, d);
                }
                t->dtype = (st_dtype)found;
                t->dtype_name = dtypes[found].name;
                t->elem_size = dtypes[found].size;
            } else if (key_is(k, kn, "shape")) {
                if (have_shape++)
                    return wgml_fail(r->err, WGML_ERR_FORMAT, "%s: tensor '%s': two shape fields", file, name);
                if (peek(r) != '[')
                    return wgml_fail(r->err, WGML_ERR_FORMAT, "%s: tensor '%s': shape is not a list", file, name);
                r->i++;
                if (peek(r) == ']') {
                    r->i++;
                } else {
                    for (;;) {
                        if (t->rank == ST_MAX_DIMS)
                            return wgml_fail(r->err, WGML_ERR_FORMAT,
                                             "%s: tensor '%s': shape has more than %d dimensions", file, name,
                                             ST_MAX_DIMS);
                        uint64_t v = 0;
                        const char *bad = juint(r, &v);
                        if (!bad && v > (uint64_t)INT64_MAX) bad = "is too large";
                        if (bad)
                            return wgml_fail(r->err, WGML_ERR_FORMAT, "%s: tensor '%s': shape[%d] %s", file, name,
                                             t->rank, bad);
                        t->shape[t->rank++] = (int64_t)v;
                        int c = peek(r);
                        r->i++;
                        if (c == ',') continue;
                        if (c == ']') break;
                        r->i--;
                        return jfail(r, "',' or ']' expected");
                    }
                }
            } else if (key_is(k, kn, "data_offsets")) {
                if (have_offsets++)
                    return wgml_fail(r->err, WGML_ERR_FORMAT, "%s: tensor '%s': two data_offsets fields", file, name);
                uint64_t v[2] = {0, 0};
                for (int j = 0; j < 2; j++) {
                    if (peek(r) != (j ? ',' : '['))
                        return wgml_fail(r->err, WGML_ERR_FORMAT,
                                         "%s: tensor '%s': data_offsets is not a list of two integers", file, name);
                    r->i++;
                    const char *bad = juint(r, &v[j]);
                    if (bad)
                        return wgml_fail(r->err, WGML_ERR_FORMAT, "%s: tensor '%s': data_offsets[%d] %s", file, name, j,
                                         bad);
                }
                if (peek(r) != ']')
                    return wgml_fail(r->err, WGML_ERR_FORMAT,
                                     "%s: tensor '%s': data_offsets is not a list of two integers", file, name);
                r->i++;
                if (v[0] > v[1])
                    return wgml_fail(r->err, WGML_ERR_FORMAT,
                                     "%s: tensor '%s': data_offsets [%llu, %llu) begin after they end", file, name,
                                     (unsigned long long)v[0], (unsigned long long)v[1]);
                t->offset = v[0];
                *end = v[1];
            } else {
                if ((st = jskip(r, 1)))
                    return st; /* a field the format does not define: ignored, as the reference does */
            }
            int c = peek(r);
            r->i++;
            if (c == ',') continue;
            if (c == '}') break;
            r->i--;
            return jfail(r, "',' or '}' expected");
        }
    }
    const char *missing = !have_dtype ? "dtype" : !have_shape ? "shape" : !have_offsets ? "data_offsets" : NULL;
    if (missing) return wgml_fail(r->err, WGML_ERR_FORMAT, "%s: tensor '%s': no %s", file, name, missing);
    return WGML_OK;
}

/* "__metadata__": {"key": "value", ...} (or null). */
static wgml_status parse_metadata(jr *r, shard *s) {
    if (peek(r) == 'n') return jskip(r, 0);
    if (peek(r) != '{')
        return wgml_fail(r->err, WGML_ERR_FORMAT, "%s: __metadata__ is not an object of strings", r->file);
    r->i++;
    if (peek(r) == '}') {
        r->i++;
        return WGML_OK;
    }
    int64_t cap = 0;
    for (;;) {
        const char *k, *v;
        size_t kn, vn;
        int nul;
        wgml_status st;
        if ((st = jstring(r, 1, &k, &kn, &nul)) || (st = expect(r, ':', "':' expected after a key"))) return st;
        if (nul) return wgml_fail(r->err, WGML_ERR_FORMAT, "%s: a __metadata__ key holds a NUL character", r->file);
        if (peek(r) != '"')
            return wgml_fail(r->err, WGML_ERR_FORMAT, "%s: __metadata__ key '%s': the value is not a string", r->file,
                             k);
        if ((st = jstring(r, 1, &v, &vn, NULL))) return st;
        if (s->n_meta == cap) {
            int64_t nc = cap ? cap * 2 : 8;
            st_meta *m = wgml_realloc(s->meta, (size_t)nc * sizeof *m);
            if (!m) return oom(r->file, r->err);
            s->meta = m;
            cap = nc;
        }
        s->meta[s->n_meta++] = (st_meta){k, v, vn};
        int c = peek(r);
        r->i++;
        if (c == ',') continue;
        if (c == '}') break;
        r->i--;
        return jfail(r, "',' or '}' expected");
    }
    return WGML_OK;
}

static int cmp_meta(const void *a, const void *b) {
    return strcmp((*(const st_meta *const *)a)->key, (*(const st_meta *const *)b)->key);
}

static int cmp_tensor_name(const void *a, const void *b) {
    return strcmp((*(const st_tensor *const *)a)->name, (*(const st_tensor *const *)b)->name);
}

/* By data_offsets, then end, then header order. */
static int cmp_tensor_offset(const void *a, const void *b) {
    const st_tensor *x = *(const st_tensor *const *)a, *y = *(const st_tensor *const *)b;
    if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
    if (x->size != y->size) return x->size < y->size ? -1 : 1;
    return x < y ? -1 : x > y;
}

/* Checks that the tensors tile [0, data_size) exactly. */
static wgml_status check_tiling(const shard *s, uint64_t data_size, wgml_error *err) {
    const st_tensor **order = NULL;
    if (s->n_tensors) {
        order = wgml_malloc((size_t)s->n_tensors * sizeof *order);
        if (!order) return oom(s->path, err);
        for (int64_t i = 0; i < s->n_tensors; i++)
            order[i] = &s->tensors[i];
        qsort(order, (size_t)s->n_tensors, sizeof *order, cmp_tensor_offset);
    }
    uint64_t pos = 0;
    const st_tensor *last = NULL; /* the last tensor of non-zero size, which ends at pos */
    wgml_status st = WGML_OK;
    for (int64_t i = 0; i < s->n_tensors && !st; i++) {
        const st_tensor *t = order[i];
        if (t->offset > pos)
            st = wgml_fail(err, WGML_ERR_FORMAT,
                           "%s: bytes [%llu, %llu) of the data section belong to no tensor (a hole before tensor '%s')",
                           s->path, (unsigned long long)pos, (unsigned long long)t->offset, t->name);
        else if (t->offset < pos)
            st = wgml_fail(
                err, WGML_ERR_FORMAT, "%s: tensor '%s': data_offsets [%llu, %llu) overlap tensor '%s' [%llu, %llu)",
                s->path, t->name, (unsigned long long)t->offset, (unsigned long long)(t->offset + t->size), last->name,
                (unsigned long long)last->offset, (unsigned long long)(last->offset + last->size));
        else if (t->size) {
            pos += t->size;
            last = t;
        }
    }
    if (!st && pos != data_size)
        st =
            wgml_fail(err, WGML_ERR_FORMAT, "%s: bytes [%llu, %llu) at the end of the data section belong to no tensor",
                      s->path, (unsigned long long)pos, (unsigned long long)data_size);
    wgml_free(order);
    return st;
}

/* Parses and validates the file in s (path, base and size set). */
static wgml_status parse_shard(shard *s, int index, wgml_error *err) {
    const char *file = s->path;
    if (s->size < 8)
        return wgml_fail(err, WGML_ERR_FORMAT, "%s: file of %zu bytes is too small to be a safetensors file", file,
                         s->size);
    uint64_t n;
    memcpy(&n, s->base, 8);
    if (n == 0) return wgml_fail(err, WGML_ERR_FORMAT, "%s: the header length is 0", file);
    if (n > ST_MAX_HEADER)
        return wgml_fail(err, WGML_ERR_FORMAT, "%s: the header length %llu is over the limit of %u bytes", file,
                         (unsigned long long)n, ST_MAX_HEADER);
    if (n > s->size - 8)
        return wgml_fail(err, WGML_ERR_FORMAT, "%s: the header length %llu runs past the end of the file (%zu bytes)",
                         file, (unsigned long long)n, s->size);
    const uint8_t *h = s->base + 8;
    size_t bad;
    if (!utf8_valid(h, (size_t)n, &bad))
        return wgml_fail(err, WGML_ERR_FORMAT, "%s: the header is not valid UTF-8 (at byte %zu)", file, bad);
    s->strings = wgml_malloc((size_t)n + 1);
    if (!s->strings) return oom(file, err);
    jr r = {file, "header", h, (size_t)n, 0, s->strings, 0, err};
    const uint8_t *data = h + n;
    uint64_t data_size = (uint64_t)(s->size - 8 - (size_t)n);
    wgml_status st;
    if (peek(&r) != '{') return wgml_fail(err, WGML_ERR_FORMAT, "%s: the header is not a JSON object", file);
    r.i++;
    int64_t cap = 0;
    int have_meta = 0;
    if (peek(&r) == '}') {
        r.i++;
    } else {
        for (;;) {
            const char *k;
            size_t kn;
            int nul;
            size_t mark = r.used;
            if ((st = jstring(&r, 1, &k, &kn, &nul)) || (st = expect(&r, ':', "':' expected after a key"))) return st;
            if (key_is(k, kn, "__metadata__")) {
                r.used = mark; /* the key itself is not kept */
                if (have_meta++) return wgml_fail(err, WGML_ERR_FORMAT, "%s: two __metadata__ entries", file);
                if ((st = parse_metadata(&r, s))) return st;
            } else {
                if (nul) return wgml_fail(err, WGML_ERR_FORMAT, "%s: a tensor name holds a NUL character", file);
                if (s->n_tensors == cap) {
                    if (cap >= ST_MAX_TENSORS)
                        return wgml_fail(err, WGML_ERR_FORMAT, "%s: more than %d tensors", file, ST_MAX_TENSORS);
                    int64_t nc = cap ? cap * 2 : 16;
                    st_tensor *t = wgml_realloc(s->tensors, (size_t)nc * sizeof *t);
                    if (!t) return oom(file, err);
                    s->tensors = t;
                    cap = nc;
                }
                st_tensor *t = &s->tensors[s->n_tensors++];
                memset(t, 0, sizeof *t);
                t->name = k;
                t->shard = index;
                t->file = s->path;
                uint64_t end = 0;
                if ((st = parse_entry(&r, t, &end))) return st;
                /* the byte count the shape needs: 64-bit, overflow-checked. The product of the
                 * non-zero dimensions must fit int64 even when a zero one makes the count 0 (as
                 * the reference requires), so that no product of dimensions a caller forms overflows. */
                char sh[8 * 22 + 4];
                uint64_t count = 1;
                int zero = 0;
                for (int d = 0; d < t->rank; d++) {
                    uint64_t dim = (uint64_t)t->shape[d];
                    if (!dim) {
                        zero = 1;
                        continue;
                    }
                    if (count > (uint64_t)INT64_MAX / dim)
                        return wgml_fail(err, WGML_ERR_FORMAT, "%s: tensor '%s': shape %s has more than 2^63 elements",
                                         file, t->name, shape_str(t, sh, sizeof sh));
                    count *= dim;
                }
                if (zero) count = 0;
                if (count > UINT64_MAX / t->elem_size)
                    return wgml_fail(err, WGML_ERR_FORMAT, "%s: tensor '%s': shape %s of %s takes more than 2^64 bytes",
                                     file, t->name, shape_str(t, sh, sizeof sh), t->dtype_name);
                if (end > data_size)
                    return wgml_fail(
                        err, WGML_ERR_FORMAT,
                        "%s: tensor '%s': data_offsets [%llu, %llu) run past the data section (%llu bytes)", file,
                        t->name, (unsigned long long)t->offset, (unsigned long long)end, (unsigned long long)data_size);
                if (end - t->offset != count * t->elem_size)
                    return wgml_fail(
                        err, WGML_ERR_FORMAT,
                        "%s: tensor '%s': shape %s of %s is %llu bytes, but data_offsets [%llu, %llu) hold %llu", file,
                        t->name, shape_str(t, sh, sizeof sh), t->dtype_name, (unsigned long long)(count * t->elem_size),
                        (unsigned long long)t->offset, (unsigned long long)end, (unsigned long long)(end - t->offset));
                t->n_elements = (int64_t)count;
                t->size = (size_t)(end - t->offset);
                t->data = data + t->offset;
            }
            int c = peek(&r);
            r.i++;
            if (c == ',') continue;
            if (c == '}') break;
            r.i--;
            return jfail(&r, "',' or '}' expected");
        }
    }
    ws(&r);
    if (r.i != r.n) return jfail(&r, "text after the object (only spaces may pad it)");

    if (s->n_meta) {
        s->meta_by_key = wgml_malloc((size_t)s->n_meta * sizeof *s->meta_by_key);
        if (!s->meta_by_key) return oom(file, err);
        for (int64_t i = 0; i < s->n_meta; i++)
            s->meta_by_key[i] = &s->meta[i];
        qsort(s->meta_by_key, (size_t)s->n_meta, sizeof *s->meta_by_key, cmp_meta);
        for (int64_t i = 1; i < s->n_meta; i++)
            if (!strcmp(s->meta_by_key[i - 1]->key, s->meta_by_key[i]->key))
                return wgml_fail(err, WGML_ERR_FORMAT, "%s: duplicate __metadata__ key '%s'", file,
                                 s->meta_by_key[i]->key);
    }
    return check_tiling(s, data_size, err);
}

static void shard_free(shard *s) {
    wgml_free(s->tensors);
    wgml_free(s->meta);
    wgml_free((void *)s->meta_by_key);
    wgml_free(s->strings);
    wgml_file_bytes_release(s->base, s->size, s->kind);
    wgml_free(s->path);
}

void st_close(st_file *f) {
    if (!f) return;
    for (int i = 0; i < f->n_shards; i++)
        shard_free(&f->shards[i]);
    if (f->own_tensors) wgml_free(f->tensors);
    wgml_free((void *)f->by_name);
    wgml_free(f->shards);
    wgml_free(f->name);
    wgml_free(f);
}

/* A st_file with n_shards zeroed shards. */
static st_file *new_file(const char *name, int n_shards) {
    st_file *f = wgml_calloc(1, sizeof *f);
    if (!f) return NULL;
    f->name = wgml_strdup(name);
    f->shards = wgml_calloc((size_t)n_shards, sizeof *f->shards);
    if (!f->name || !f->shards) {
        st_close(f);
        return NULL;
    }
    f->n_shards = n_shards;
    return f;
}

/* Sorts the tensors by name into f->by_name; a duplicate is an error that
 * names its files (the same one for a single file). */
static wgml_status index_names(st_file *f, wgml_error *err) {
    if (!f->n_tensors) return WGML_OK;
    f->by_name = wgml_malloc((size_t)f->n_tensors * sizeof *f->by_name);
    if (!f->by_name) return oom(f->name, err);
    for (int64_t i = 0; i < f->n_tensors; i++)
        f->by_name[i] = &f->tensors[i];
    qsort(f->by_name, (size_t)f->n_tensors, sizeof *f->by_name, cmp_tensor_name);
    for (int64_t i = 1; i < f->n_tensors; i++) {
        const st_tensor *a = f->by_name[i - 1], *b = f->by_name[i];
        if (strcmp(a->name, b->name)) continue;
        if (a->shard == b->shard) {
            wgml_fail(err, WGML_ERR_FORMAT, "%s: duplicate tensor name '%s'", a->file, a->name);
            if (f->own_tensors) wgml_error_prefix(err, "%s", f->name); /* a set: the index too */
            return WGML_ERR_FORMAT;
        }
        if (a->shard > b->shard) {
            const st_tensor *x = a;
            a = b;
            b = x;
        }
        return wgml_fail(err, WGML_ERR_FORMAT, "%s: tensor '%s' is in two shards, %s and %s", f->name, a->name, a->file,
                         b->file);
    }
    return WGML_OK;
}

/* Makes f (one shard, its bytes set) a single file. */
static wgml_status finish_single(st_file *f, wgml_error *err) {
    shard *s = &f->shards[0];
    wgml_status st = parse_shard(s, 0, err);
    if (st) return st;
    f->tensors = s->tensors;
    f->n_tensors = s->n_tensors;
    return index_names(f, err);
}

wgml_status st_open_memory(const void *data, size_t size, const char *name, st_file **out, wgml_error *err) {
    *out = NULL;
    if (!name) name = "safetensors";
    if (!data && size) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "%s: no bytes", name);
    st_file *f = new_file(name, 1);
    if (!f || !(f->shards[0].path = wgml_strdup(name))) {
        st_close(f);
        return oom(name, err);
    }
    f->shards[0].base = data;
    f->shards[0].size = size;
    f->shards[0].kind = WGML_BYTES_BORROWED;
    wgml_status st = finish_single(f, err);
    if (st) {
        st_close(f);
        return st;
    }
    *out = f;
    return WGML_OK;
}

/* Maps the file at s->path (set) into s. */
static wgml_status map_shard(shard *s, wgml_error *err) {
    return wgml_file_bytes(s->path, 8, "a safetensors file", &s->base, &s->size, &s->kind, err);
}

static wgml_status open_single(const char *path, st_file **out, wgml_error *err) {
    st_file *f = new_file(path, 1);
    if (!f || !(f->shards[0].path = wgml_strdup(path))) {
        st_close(f);
        return oom(path, err);
    }
    wgml_status st = map_shard(&f->shards[0], err);
    if (!st) st = finish_single(f, err);
    if (st) {
        st_close(f);
        return st;
    }
    *out = f;
    return WGML_OK;
}

/* ---- sharded sets ---- */

typedef struct wm_entry {
    const char *tensor;
    const char *shard_name;
    int shard; /* index into the sorted unique shard names */
} wm_entry;

static int cmp_wm_tensor(const void *a, const void *b) {
    return strcmp(((const wm_entry *)a)->tensor, ((const wm_entry *)b)->tensor);
}
static int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }
static int cmp_name_to_wm(const void *key, const void *elem) {
    return strcmp((const char *)key, ((const wm_entry *)elem)->tensor);
}

/* A file name alone: not empty, no '/', '\\' or "..". */
static int plain_file_name(const char *s) { return *s && !strchr(s, '/') && !strchr(s, '\\') && !strstr(s, ".."); }

/* The parsed index: its weight map. */
typedef struct index_doc {
    wm_entry *e;
    int64_t n;
} index_doc;

static wgml_status parse_index(jr *r, index_doc *doc) {
    const char *file = r->file;
    if (peek(r) != '{') return wgml_fail(r->err, WGML_ERR_FORMAT, "%s: the index is not a JSON object", file);
    r->i++;
    int have_map = 0;
    wgml_status st;
    int64_t cap = 0;
    if (peek(r) == '}') {
        r->i++;
    } else {
        for (;;) {
            const char *k;
            size_t kn;
            if ((st = jstring(r, 0, &k, &kn, NULL)) || (st = expect(r, ':', "':' expected after a key"))) return st;
            if (key_is(k, kn, "weight_map")) {
                if (have_map++) return wgml_fail(r->err, WGML_ERR_FORMAT, "%s: two weight_map entries", file);
                if (peek(r) != '{') return wgml_fail(r->err, WGML_ERR_FORMAT, "%s: weight_map is not an object", file);
                r->i++;
                if (peek(r) == '}') {
                    r->i++;
                } else {
                    for (;;) {
                        const char *t, *sn;
                        int nul, snul;
                        if ((st = jstring(r, 1, &t, NULL, &nul)) || (st = expect(r, ':', "':' expected after a key")))
                            return st;
                        if (nul)
                            return wgml_fail(r->err, WGML_ERR_FORMAT, "%s: a weight_map tensor name holds a NUL", file);
                        if (peek(r) != '"')
                            return wgml_fail(r->err, WGML_ERR_FORMAT,
                                             "%s: weight_map: tensor '%s': the file is not a string", file, t);
                        if ((st = jstring(r, 1, &sn, NULL, &snul))) return st;
                        if (snul || !plain_file_name(sn))
                            return wgml_fail(
                                r->err, WGML_ERR_FORMAT,
                                "%s: weight_map: tensor '%s': '%s' is not a plain file name (no '/', '\\' or '..')",
                                file, t, sn);
                        if (doc->n == cap) {
                            if (cap >= ST_MAX_TENSORS)
                                return wgml_fail(r->err, WGML_ERR_FORMAT, "%s: weight_map has more than %d tensors",
                                                 file, ST_MAX_TENSORS);
                            int64_t nc = cap ? cap * 2 : 64;
                            wm_entry *e = wgml_realloc(doc->e, (size_t)nc * sizeof *e);
                            if (!e) return oom(file, r->err);
                            doc->e = e;
                            cap = nc;
                        }
                        doc->e[doc->n++] = (wm_entry){t, sn, -1};
                        int c = peek(r);
                        r->i++;
                        if (c == ',') continue;
                        if (c == '}') break;
                        r->i--;
                        return jfail(r, "',' or '}' expected");
                    }
                }
            } else {
                if ((st = jskip(r, 1))) return st; /* "metadata" ({"total_size": ...}) and anything else */
            }
            int c = peek(r);
            r->i++;
            if (c == ',') continue;
            if (c == '}') break;
            r->i--;
            return jfail(r, "',' or '}' expected");
        }
    }
    ws(r);
    if (r->i != r->n) return jfail(r, "text after the object");
    if (!have_map) return wgml_fail(r->err, WGML_ERR_FORMAT, "%s: no weight_map object", file);
    if (!doc->n) return wgml_fail(r->err, WGML_ERR_FORMAT, "%s: weight_map is empty", file);
    return WGML_OK;
}

/* Opens the shards an index names, with its checks. */
static wgml_status open_index(const char *path, st_file **out, wgml_error *err) {
    char *text = NULL, *strings = NULL, *dir = NULL;
    const char **names = NULL;
    index_doc doc = {0};
    st_file *f = NULL;
    size_t len = 0, bad;
    wgml_status st = wgml_read_text_file(NULL, path, ST_MAX_INDEX, 0, &text, &len, err);
    if (st) return st;
    if (!utf8_valid((const uint8_t *)text, len, &bad)) {
        st = wgml_fail(err, WGML_ERR_FORMAT, "%s: the index is not valid UTF-8 (at byte %zu)", path, bad);
        goto done;
    }
    strings = wgml_malloc(len + 1);
    if (!strings) {
        st = oom(path, err);
        goto done;
    }
    jr r = {path, "index", (const uint8_t *)text, len, 0, strings, 0, err};
    if ((st = parse_index(&r, &doc))) goto done;

    /* duplicate tensors in the map, then the shards: sorted, unique */
    qsort(doc.e, (size_t)doc.n, sizeof *doc.e, cmp_wm_tensor);
    for (int64_t i = 1; i < doc.n; i++)
        if (!strcmp(doc.e[i - 1].tensor, doc.e[i].tensor)) {
            st = wgml_fail(err, WGML_ERR_FORMAT, "%s: weight_map lists tensor '%s' twice", path, doc.e[i].tensor);
            goto done;
        }
    names = wgml_malloc((size_t)doc.n * sizeof *names);
    if (!names) {
        st = oom(path, err);
        goto done;
    }
    for (int64_t i = 0; i < doc.n; i++)
        names[i] = doc.e[i].shard_name;
    qsort(names, (size_t)doc.n, sizeof *names, cmp_str);
    int64_t n_shards = 0;
    for (int64_t i = 0; i < doc.n; i++)
        if (!n_shards || strcmp(names[n_shards - 1], names[i])) names[n_shards++] = names[i];
    if (n_shards > ST_MAX_SHARDS) {
        st = wgml_fail(err, WGML_ERR_FORMAT, "%s: weight_map names %lld files, more than %d", path, (long long)n_shards,
                       ST_MAX_SHARDS);
        goto done;
    }
    for (int64_t i = 0; i < doc.n; i++) {
        const char **hit = bsearch(&doc.e[i].shard_name, names, (size_t)n_shards, sizeof *names, cmp_str);
        doc.e[i].shard = (int)(hit - names);
    }

    /* the folder of the index */
    const char *slash = strrchr(path, '/');
    if (slash) {
        dir = wgml_strndup(path, slash == path ? 1 : (size_t)(slash - path));
        if (!dir) {
            st = oom(path, err);
            goto done;
        }
    }
    f = new_file(path, (int)n_shards);
    if (!f) {
        st = oom(path, err);
        goto done;
    }
    int64_t total = 0;
    for (int i = 0; i < f->n_shards; i++) {
        shard *s = &f->shards[i];
        if (!(s->path = wgml_path_join(dir, names[i]))) {
            st = oom(path, err);
            goto done;
        }
        if ((st = map_shard(s, err)) || (st = parse_shard(s, i, err))) {
            wgml_error_prefix(err, "%s", path);
            goto done;
        }
        total += s->n_tensors;
        if (total > ST_MAX_TENSORS) {
            st = wgml_fail(err, WGML_ERR_FORMAT, "%s: the shards hold more than %d tensors", path, ST_MAX_TENSORS);
            goto done;
        }
    }

    /* one array of all the tensors, shard by shard */
    if (total) {
        f->tensors = wgml_malloc((size_t)total * sizeof *f->tensors);
        if (!f->tensors) {
            st = oom(path, err);
            goto done;
        }
    }
    f->own_tensors = 1;
    for (int i = 0; i < f->n_shards; i++) {
        shard *s = &f->shards[i];
        if (s->n_tensors) memcpy(f->tensors + f->n_tensors, s->tensors, (size_t)s->n_tensors * sizeof *s->tensors);
        f->n_tensors += s->n_tensors;
        wgml_free(s->tensors);
        s->tensors = NULL;
    }
    if ((st = index_names(f, err))) goto done;

    /* the weight map against the shards, both ways */
    for (int64_t i = 0; i < doc.n; i++) {
        const wm_entry *e = &doc.e[i];
        const st_tensor *t = st_find(f, e->tensor);
        if (!t) {
            st = wgml_fail(err, WGML_ERR_FORMAT, "%s: weight_map puts tensor '%s' in %s, which does not have it", path,
                           e->tensor, f->shards[e->shard].path);
            goto done;
        }
        if (t->shard != e->shard) {
            st = wgml_fail(err, WGML_ERR_FORMAT, "%s: weight_map puts tensor '%s' in %s, but it is in %s", path,
                           e->tensor, f->shards[e->shard].path, t->file);
            goto done;
        }
    }
    if (f->n_tensors != doc.n) { /* every map entry was found: some tensor is not in the map */
        for (int64_t i = 0; i < f->n_tensors; i++)
            if (!bsearch(f->tensors[i].name, doc.e, (size_t)doc.n, sizeof *doc.e, cmp_name_to_wm)) {
                st = wgml_fail(err, WGML_ERR_FORMAT, "%s: tensor '%s' of %s is not in weight_map", path,
                               f->tensors[i].name, f->tensors[i].file);
                goto done;
            }
    }
done:
    wgml_free(text);
    wgml_free(strings);
    wgml_free(doc.e);
    wgml_free((void *)names);
    wgml_free(dir);
    if (st) {
        st_close(f);
        return st;
    }
    *out = f;
    return WGML_OK;
}

/* ---- opening by path ---- */

static int is_regular(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

static int ends_with(const char *s, const char *tail) {
    size_t n = strlen(s), t = strlen(tail);
    return n >= t && !strcmp(s + n - t, tail);
}

wgml_status st_open(const char *path, st_file **out, wgml_error *err) {
    *out = NULL;
    if (!path) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "st_open: no path");
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        static const char *const tries[] = {"model.safetensors.index.json", "model.safetensors"};
        for (int i = 0; i < 2; i++) {
            char *p = wgml_path_join(path, tries[i]);
            if (!p) return oom(path, err);
            if (is_regular(p)) {
                wgml_status st = i == 0 ? open_index(p, out, err) : open_single(p, out, err);
                wgml_free(p);
                return st;
            }
            wgml_free(p);
        }
        return wgml_fail(err, WGML_ERR_IO, "%s: a folder without %s or %s", path, tries[0], tries[1]);
    }
    if (ends_with(path, ".json")) return open_index(path, out, err);
    return open_single(path, out, err);
}

/* ---- queries ---- */

const char *st_name(const st_file *f) { return f->name; }
int64_t st_n_tensors(const st_file *f) { return f->n_tensors; }

const st_tensor *st_tensor_at(const st_file *f, int64_t i) {
    return i >= 0 && i < f->n_tensors ? &f->tensors[i] : NULL;
}

static int cmp_name_to_tensor(const void *name, const void *elem) {
    return strcmp((const char *)name, (*(const st_tensor *const *)elem)->name);
}

const st_tensor *st_find(const st_file *f, const char *name) {
    if (!f->n_tensors || !name) return NULL;
    const st_tensor *const *hit =
        bsearch(name, f->by_name, (size_t)f->n_tensors, sizeof *f->by_name, cmp_name_to_tensor);
    return hit ? *hit : NULL;
}

int st_n_files(const st_file *f) { return f->n_shards; }
const char *st_file_path(const st_file *f, int i) { return i >= 0 && i < f->n_shards ? f->shards[i].path : NULL; }
const char *st_tensor_file(const st_file *f, const st_tensor *t) {
    return t && t->shard >= 0 && t->shard < f->n_shards ? f->shards[t->shard].path : NULL;
}

static int cmp_key_to_meta(const void *key, const void *elem) {
    return strcmp((const char *)key, (*(const st_meta *const *)elem)->key);
}

const char *st_metadata(const st_file *f, const char *key, size_t *len) {
    if (len) *len = 0;
    if (!key) return NULL;
    for (int i = 0; i < f->n_shards; i++) {
        const shard *s = &f->shards[i];
        if (!s->n_meta) continue;
        const st_meta *const *hit =
            bsearch(key, s->meta_by_key, (size_t)s->n_meta, sizeof *s->meta_by_key, cmp_key_to_meta);
        if (hit) {
            if (len) *len = (*hit)->len;
            return (*hit)->value;
        }
    }
    return NULL;
}

int64_t st_n_metadata(const st_file *f, int file) {
    return file >= 0 && file < f->n_shards ? f->shards[file].n_meta : 0;
}

const char *st_metadata_at(const st_file *f, int file, int64_t i, const char **value, size_t *len) {
    if (file < 0 || file >= f->n_shards || i < 0 || i >= f->shards[file].n_meta) return NULL;
    const st_meta *m = &f->shards[file].meta[i];
    if (value) *value = m->value;
    if (len) *len = m->len;
    return m->key;
}

void st_release(const st_file *f, const void *p, size_t n) {
#if !defined(__wasm__)
    if (!f || !p || !n) return;
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    for (int i = 0; i < f->n_shards; i++) {
        const shard *s = &f->shards[i];
        uintptr_t base = (uintptr_t)s->base, lo = (uintptr_t)p, hi = lo + n;
        if (s->kind != WGML_BYTES_MAPPED || lo < base || hi > base + s->size) continue;
        lo = (lo + page - 1) & ~(page - 1); /* whole pages only: the neighbours' bytes stay */
        hi &= ~(page - 1);
        /* a private read-only mapping never written: its pages are the file's, read again on use */
        if (hi > lo) madvise((void *)lo, hi - lo, MADV_DONTNEED);
        return;
    }
#else
    (void)f, (void)p, (void)n;
#endif
}
