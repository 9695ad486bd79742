/*
 * jinja_value.c - the values a template computes with, as Python has them:
 * the arena they live in (one per render, under the memory budget), the
 * budgets and error recording, and Python's semantics for truth, equality,
 * ordering, str(), repr() and json.dumps (HF's tojson filter).
 *
 * Printing follows Python exactly where templates show it: 1.0 prints "1.0",
 * 1e16 "1e+16", True "True", None "None", a list "['a', 1]" with strings in
 * repr's quotes, a dict "{'k': 'v'}" in insertion order.
 */
#include "chat/jinja_impl.h"
#include "core/alloc.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- errors and budgets --------------------------------------------------- */

static int verror(jinja_env *e, int line, int col, const char *fmt, va_list ap) {
    if (e->status != WGML_OK) return -1; /* the first error is the one to report */
    char m[WGML_ERROR_MESSAGE_MAX];
    vsnprintf(m, sizeof m, fmt, ap);
    if (line > 0)
        snprintf(e->msg, sizeof e->msg, "chat template line %d, column %d: %.440s", line, col, m);
    else
        snprintf(e->msg, sizeof e->msg, "chat template: %.480s", m);
    e->status = WGML_ERR_TEMPLATE;
    return -1;
}

int jx_error(jinja_env *e, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    verror(e, e->line, e->col, fmt, ap);
    va_end(ap);
    return -1;
}

int jx_error_at(jinja_env *e, int line, int col, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    verror(e, line, col, fmt, ap);
    va_end(ap);
    return -1;
}

int jx_step(jinja_env *e, uint64_t n) {
    /* an error is final: whatever ran on past one (a NULL from a failed allocation taken as "absent") stops here */
    if (e->status != WGML_OK) return -1;
    e->steps += n;
    if (e->steps > e->lim.max_steps)
        return jx_error(e, "the template ran past its step budget (%" PRIu64 " steps): an endless loop?",
                        e->lim.max_steps);
    return 0;
}

/* ---- the arena ------------------------------------------------------------- */

void *jx_alloc(jinja_env *e, size_t size) {
    if (e->status != WGML_OK) return NULL;
    size = (size + 15) & ~(size_t)15;
    if (size == 0) size = 16;
    jx_chunk *c = e->chunks;
    if (!c || c->size - c->used < size) {
        size_t want = c ? c->size * 2 : 64u << 10;
        if (want > (4u << 20)) want = 4u << 20;
        if (want < size) want = size;
        if (size > e->lim.max_memory || e->mem_used > e->lim.max_memory - size) {
            jx_error(e, "the template needs more than its memory budget (%zu MiB)", e->lim.max_memory >> 20);
            return NULL;
        }
        if (want > e->lim.max_memory - e->mem_used) want = e->lim.max_memory - e->mem_used;
        jx_chunk *n = wgml_malloc(sizeof *n + want);
        if (!n) {
            if (e->status == WGML_OK) {
                snprintf(e->msg, sizeof e->msg, "out of memory rendering a chat template");
                e->status = WGML_ERR_OUT_OF_MEMORY;
            }
            return NULL;
        }
        n->size = want;
        n->used = 0;
        e->mem_used += want;
        if (c && size > want / 2 && c->size - c->used > 4096) {
            /* a big block: keep filling the current chunk afterwards */
            n->next = c->next;
            c->next = n;
            n->used = size;
            return n->data;
        }
        n->next = c;
        e->chunks = c = n;
    }
    void *p = c->data + c->used;
    c->used += size;
    return p;
}

void *jx_grow(jinja_env *e, void *p, size_t old_size, size_t new_size) {
    jx_chunk *c = e->chunks;
    size_t olda = (old_size + 15) & ~(size_t)15, newa = (new_size + 15) & ~(size_t)15;
    /* the last block of the current chunk grows in place */
    if (p && c && (unsigned char *)p + olda == c->data + c->used && c->size - c->used >= newa - olda) {
        c->used += newa - olda;
        return p;
    }
    void *n = jx_alloc(e, new_size);
    if (n && p && old_size) memcpy(n, p, old_size);
    return n;
}

/* ---- strings, lists, dicts ------------------------------------------------ */

jstr *jx_str(jinja_env *e, const char *s, size_t len) {
    if (len > e->lim.max_output) {
        jx_error(e, "a string of %zu bytes is over the limit of %zu", len, e->lim.max_output);
        return NULL;
    }
    jstr *r = jx_alloc(e, sizeof *r + len + 1);
    if (!r) return NULL;
    r->len = len;
    if (len) memcpy(r->s, s, len);
    r->s[len] = '\0';
    return r;
}

jstr *jx_cstr(jinja_env *e, const char *s) { return jx_str(e, s, strlen(s)); }

jstr *jx_strf(jinja_env *e, const char *fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n < 0) n = 0;
    return jx_str(e, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
}

int jx_make_str(jinja_env *e, const char *s, size_t len, jv *out) {
    jstr *r = jx_str(e, s, len);
    if (!r) return -1;
    *out = jv_strv(r);
    return 0;
}

jlist *jx_list(jinja_env *e, size_t cap) {
    jlist *l = jx_alloc(e, sizeof *l);
    if (!l) return NULL;
    l->n = 0;
    l->tuple = 0;
    l->view = JL_LIST;
    l->busy = 0;
    l->cap = cap ? cap : 4;
    if (l->cap > e->lim.max_memory / sizeof(jv)) {
        jx_error(e, "a list of %zu items is over the memory budget", cap);
        return NULL;
    }
    l->v = jx_alloc(e, l->cap * sizeof(jv));
    return l->v ? l : NULL;
}

int jx_list_push(jinja_env *e, jlist *l, jv v) {
    if (l->n == l->cap) {
        size_t nc = l->cap * 2;
        jv *nv = jx_grow(e, l->v, l->cap * sizeof(jv), nc * sizeof(jv));
        if (!nv) return -1;
        l->v = nv;
        l->cap = nc;
    }
    l->v[l->n++] = v;
    return 0;
}

jdict *jx_dict(jinja_env *e, size_t cap) {
    jdict *d = jx_alloc(e, sizeof *d);
    if (!d) return NULL;
    memset(d, 0, sizeof *d);
    d->cap = cap ? cap : 4;
    if (d->cap > e->lim.max_memory / (2 * sizeof(jv)) || d->cap >= UINT32_MAX) {
        jx_error(e, "a dict of %zu keys is over the memory budget", cap);
        return NULL;
    }
    d->k = jx_alloc(e, d->cap * sizeof(jv));
    d->v = jx_alloc(e, d->cap * sizeof(jv));
    return d->k && d->v ? d : NULL;
}

static int find_key(jinja_env *e, const jdict *d, jv key, int depth, size_t *at, uint32_t *hash);

/* Probing past the first slot costs a step each: keys made to collide run into the step budget, not into a hang. */
static int charge_probes(jinja_env *e, uint64_t probes) { return probes > 1 ? jx_step(e, probes - 1) : 0; }

static void index_put(jdict *d, size_t i) {
    size_t mask = d->nslot - 1, s = d->hash[i] & mask;
    while (d->slot[s])
        s = (s + 1) & mask;
    d->slot[s] = (uint32_t)(i + 1);
}

/* (Re)builds the index for the keys' stored hashes, at least twice as many slots as d->cap. */
static int index_build(jinja_env *e, jdict *d) {
    size_t ns = 16;
    while (ns < 2 * d->cap)
        ns *= 2;
    uint32_t *slot = jx_alloc(e, ns * sizeof *slot);
    if (!slot) return -1;
    memset(slot, 0, ns * sizeof *slot);
    d->slot = slot;
    d->nslot = ns;
    for (size_t i = 0; i < d->n; i++)
        index_put(d, i);
    return 0;
}

int jx_dict_get(jinja_env *e, const jdict *d, jv key, jv **out) {
    size_t at;
    uint32_t h;
    *out = NULL;
    if (find_key(e, d, key, 0, &at, &h)) return -1;
    if (at != SIZE_MAX) *out = &d->v[at];
    return 0;
}

static uint32_t hash_str(const char *s, size_t len);

int jx_dict_gets(jinja_env *e, const jdict *d, const char *key, size_t len, jv **out) {
    *out = NULL;
    if (len >= 64 && jx_step(e, len / 64)) return -1;
    if (!d->slot) {
        for (size_t i = 0; i < d->n; i++)
            if (d->k[i].t == JV_STR && d->k[i].u.s->len == len && memcmp(d->k[i].u.s->s, key, len) == 0) {
                *out = &d->v[i];
                return 0;
            }
        return 0;
    }
    uint32_t h = hash_str(key, len);
    size_t mask = d->nslot - 1;
    uint64_t probes = 0;
    for (size_t s = h & mask; d->slot[s]; s = (s + 1) & mask) {
        size_t i = d->slot[s] - 1;
        probes++;
        if (d->hash[i] == h && d->k[i].t == JV_STR && d->k[i].u.s->len == len &&
            memcmp(d->k[i].u.s->s, key, len) == 0) {
            *out = &d->v[i];
            break;
        }
    }
    return charge_probes(e, probes);
}

int jx_dict_set(jinja_env *e, jdict *d, jv key, jv val) {
    size_t at;
    uint32_t h = 0;
    if (jx_step(e, 1) || find_key(e, d, key, 0, &at, &h)) return -1;
    if (at != SIZE_MAX) {
        d->v[at] = val;
        return 0;
    }
    if (d->n == d->cap) {
        size_t nc = d->cap * 2;
        /* the index holds positions + 1 in 32 bits */
        if (nc >= UINT32_MAX) return jx_error(e, "a dict of %zu keys is over the limit", d->n);
        jv *nk = jx_grow(e, d->k, d->cap * sizeof(jv), nc * sizeof(jv));
        jv *nv = nk ? jx_grow(e, d->v, d->cap * sizeof(jv), nc * sizeof(jv)) : NULL;
        uint32_t *nh = nv && d->hash ? jx_grow(e, d->hash, d->cap * sizeof *nh, nc * sizeof *nh) : NULL;
        if (!nv || (d->hash && !nh)) return -1;
        d->k = nk;
        d->v = nv;
        d->hash = nh;
        d->cap = nc;
        if (d->slot && index_build(e, d)) return -1;
    }
    size_t i = d->n++;
    d->k[i] = key;
    d->v[i] = val;
    if (d->slot) {
        d->hash[i] = h;
        index_put(d, i);
    } else if (d->n > JX_DICT_INDEX_MIN) {
        /* big enough to be worth an index: hash the keys so far */
        if (!(d->hash = jx_alloc(e, d->cap * sizeof *d->hash))) return -1;
        for (size_t k = 0; k < d->n; k++)
            if (jx_hash(e, d->k[k], &d->hash[k])) return -1;
        if (index_build(e, d)) return -1;
    }
    return 0;
}

int jx_dict_sets(jinja_env *e, jdict *d, const char *key, jv val) {
    jstr *k = jx_cstr(e, key);
    return k ? jx_dict_set(e, d, jv_strv(k), val) : -1;
}

void jx_dict_clear(jdict *d) {
    d->n = 0;
    if (d->slot) memset(d->slot, 0, d->nslot * sizeof *d->slot);
}

jv jx_undef_name(jinja_env *e, const char *name, size_t len) {
    return jv_undef(jx_strf(e, "'%.*s' is undefined", (int)(len > 200 ? 200 : len), name));
}

int jx_undef_error(jinja_env *e, jv u) {
    return jx_error(e, "%s", u.t == JV_UNDEF && u.u.s ? u.u.s->s : "a value is undefined");
}

/* ---- Python's semantics ---------------------------------------------------- */

const char *jx_type_name(jv v) {
    switch (v.t) {
    case JV_UNDEF: return "Undefined";
    case JV_NONE: return "NoneType";
    case JV_BOOL: return "bool";
    case JV_INT: return "int";
    case JV_FLOAT: return "float";
    case JV_STR: return "str";
    case JV_LIST: return v.u.l->tuple ? "tuple" : "list";
    case JV_DICT: return v.u.d->ns ? "Namespace" : "dict";
    case JV_FUNC: return "function";
    case JV_LOOP: return "LoopContext";
    }
    return "object";
}

int jx_truthy(jv v) {
    switch (v.t) {
    case JV_UNDEF:
    case JV_NONE: return 0;
    case JV_BOOL:
    case JV_INT: return v.u.i != 0;
    case JV_FLOAT: return v.u.f != 0.0;
    case JV_STR: return v.u.s->len != 0;
    case JV_LIST: return v.u.l->n != 0;
    case JV_DICT: return v.u.d->ns || v.u.d->n != 0;
    default: return 1;
    }
}

int jx_is_number(jv v) { return v.t == JV_INT || v.t == JV_FLOAT || v.t == JV_BOOL; }

double jx_num(jv v) { return v.t == JV_FLOAT ? v.u.f : (double)v.u.i; }

/* ---- walks over values: equality, order, hashing -------------------------- */

static int too_deep(jinja_env *e) {
    return jx_error(e, "a value nests too deeply (limit %d): a list or dict that contains itself?", e->lim.max_depth);
}

/* An int against a float, exactly (as Python: 2**53 + 1 != 2.0**53); f is not NaN. */
static int cmp_int_float(int64_t i, double f) {
    if (f >= 9223372036854775808.0) return -1;
    if (f < -9223372036854775808.0) return 1;
    double t = trunc(f); /* in range: exactly an int64 */
    int64_t ti = (int64_t)t;
    if (i != ti) return i < ti ? -1 : 1;
    return f > t ? -1 : f < t; /* the same integer part: the fraction decides */
}

/* Numbers: *cmp < 0, 0, > 0; 1 when unordered (a NaN). */
static int cmp_num(jv a, jv b, int *cmp) {
    if (a.t != JV_FLOAT && b.t != JV_FLOAT) {
        *cmp = a.u.i < b.u.i ? -1 : a.u.i > b.u.i;
        return 0;
    }
    *cmp = 0;
    if ((a.t == JV_FLOAT && isnan(a.u.f)) || (b.t == JV_FLOAT && isnan(b.u.f))) return 1;
    if (a.t == JV_FLOAT && b.t == JV_FLOAT)
        *cmp = a.u.f < b.u.f ? -1 : a.u.f > b.u.f;
    else if (a.t == JV_FLOAT)
        *cmp = -cmp_int_float(b.u.i, a.u.f);
    else
        *cmp = cmp_int_float(a.u.i, b.u.f);
    return 0;
}

static int str_equal(jinja_env *e, const jstr *a, const jstr *b, int *eq) {
    *eq = 0;
    if (a->len != b->len) return 0;
    if (a->len >= 64 && jx_step(e, a->len / 64)) return -1;
    *eq = a == b || memcmp(a->s, b->s, a->len) == 0;
    return 0;
}

static int equal_at(jinja_env *e, jv a, jv b, int depth, int *eq) {
    int c;
    *eq = 0;
    if (jx_is_number(a) && jx_is_number(b)) {
        *eq = !cmp_num(a, b, &c) && c == 0;
        return 0;
    }
    if (a.t != b.t) return 0;
    switch (a.t) {
    case JV_UNDEF:
    case JV_NONE: *eq = 1; return 0;
    case JV_STR: return str_equal(e, a.u.s, b.u.s, eq);
    case JV_LIST: {
        const jlist *x = a.u.l, *y = b.u.l;
        /* Python compares items by identity first: a list equals itself, even one that contains itself */
        if (x == y) return *eq = 1, 0;
        if (x->tuple != y->tuple || x->n != y->n) return 0;
        if (depth >= e->lim.max_depth) return too_deep(e);
        for (size_t i = 0; i < x->n; i++) {
            if (jx_step(e, 1) || equal_at(e, x->v[i], y->v[i], depth + 1, eq)) return -1;
            if (!*eq) return 0;
        }
        *eq = 1;
        return 0;
    }
    case JV_DICT: {
        const jdict *x = a.u.d, *y = b.u.d;
        if (x == y) return *eq = 1, 0;
        if (x->ns || y->ns || x->n != y->n) return 0;
        if (depth >= e->lim.max_depth) return too_deep(e);
        for (size_t i = 0; i < x->n; i++) {
            size_t at;
            uint32_t h;
            if (jx_step(e, 1) || find_key(e, y, x->k[i], depth + 1, &at, &h)) return -1;
            if (at == SIZE_MAX) return *eq = 0, 0;
            if (equal_at(e, x->v[i], y->v[at], depth + 1, eq)) return -1;
            if (!*eq) return 0;
        }
        *eq = 1;
        return 0;
    }
    case JV_FUNC: *eq = a.u.fn == b.u.fn; return 0;
    case JV_LOOP: *eq = a.u.lp == b.u.lp; return 0;
    default: return 0;
    }
}

int jx_equal(jinja_env *e, jv a, jv b, int *eq) { return equal_at(e, a, b, 0, eq); }

static int compare_at(jinja_env *e, jv a, jv b, int depth, int *cmp) {
    if (a.t == JV_UNDEF) return jx_undef_error(e, a);
    if (b.t == JV_UNDEF) return jx_undef_error(e, b);
    if (jx_is_number(a) && jx_is_number(b)) {
        cmp_num(a, b, cmp); /* a NaN compares as equal: a sort keeps it where it is */
        return 0;
    }
    if (a.t == JV_STR && b.t == JV_STR) {
        size_t n = a.u.s->len < b.u.s->len ? a.u.s->len : b.u.s->len;
        if (n >= 64 && jx_step(e, n / 64)) return -1;
        int c = memcmp(a.u.s->s, b.u.s->s, n);
        *cmp = c ? (c < 0 ? -1 : 1) : (a.u.s->len < b.u.s->len ? -1 : a.u.s->len > b.u.s->len);
        return 0;
    }
    if (a.t == JV_LIST && b.t == JV_LIST && a.u.l->tuple == b.u.l->tuple) {
        const jlist *x = a.u.l, *y = b.u.l;
        *cmp = 0;
        if (x == y) return 0; /* every item is itself */
        if (depth >= e->lim.max_depth) return too_deep(e);
        size_t n = x->n < y->n ? x->n : y->n;
        for (size_t i = 0; i < n; i++) {
            int eq;
            if (jx_step(e, 1) || equal_at(e, x->v[i], y->v[i], depth + 1, &eq)) return -1;
            if (eq) continue;
            return compare_at(e, x->v[i], y->v[i], depth + 1, cmp);
        }
        *cmp = x->n < y->n ? -1 : x->n > y->n;
        return 0;
    }
    return jx_error(e, "'<' not supported between instances of '%s' and '%s'", jx_type_name(a), jx_type_name(b));
}

int jx_compare(jinja_env *e, jv a, jv b, int *cmp) { return compare_at(e, a, b, 0, cmp); }

static uint64_t mix64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

static uint32_t fold32(uint64_t h) { return (uint32_t)(h ^ (h >> 32)); }

static uint32_t hash_str(const char *s, size_t len) {
    uint64_t h = 0x9e3779b97f4a7c15ull ^ len;
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        h = (h ^ mix64(w)) * 0x9e3779b97f4a7c15ull;
    }
    uint64_t w = 0;
    memcpy(&w, s + i, len - i);
    return fold32(mix64(h ^ w));
}

/* Equal values must hash alike: an integral float hashes as its int (1.0 as 1, True as 1). */
static uint64_t hash_int(int64_t i) { return mix64((uint64_t)i ^ 0x5851f42d4c957f2dull); }

static int hash_at(jinja_env *e, jv v, int depth, uint64_t *out) {
    switch (v.t) {
    case JV_UNDEF: *out = 0x2545f4914f6cdd1dull; return 0;
    case JV_NONE: *out = 0x27bb2ee687b0b0fdull; return 0;
    case JV_BOOL:
    case JV_INT: *out = hash_int(v.u.i); return 0;
    case JV_FLOAT:
        if (v.u.f >= -9223372036854775808.0 && v.u.f < 9223372036854775808.0 && v.u.f == trunc(v.u.f)) {
            *out = hash_int((int64_t)v.u.f);
        } else {
            uint64_t bits;
            memcpy(&bits, &v.u.f, sizeof bits);
            *out = mix64(bits ^ 0x94d049bb133111ebull);
        }
        return 0;
    case JV_STR:
        if (v.u.s->len >= 64 && jx_step(e, v.u.s->len / 64)) return -1;
        *out = hash_str(v.u.s->s, v.u.s->len);
        return 0;
    case JV_LIST: {
        const jlist *l = v.u.l;
        uint64_t h = l->tuple ? 0x9e3779b97f4a7c15ull : 0xbf58476d1ce4e5b9ull, x;
        if (depth >= e->lim.max_depth) return too_deep(e);
        for (size_t i = 0; i < l->n; i++) {
            if (jx_step(e, 1) || hash_at(e, l->v[i], depth + 1, &x)) return -1;
            h = (h ^ x) * 0x100000001b3ull + i;
        }
        *out = mix64(h ^ l->n);
        return 0;
    }
    case JV_DICT: {
        const jdict *d = v.u.d;
        if (d->ns) break; /* equal only to itself */
        if (depth >= e->lim.max_depth) return too_deep(e);
        /* dicts are equal in any order of their keys: a sum of the entries' hashes */
        uint64_t h = 0, hk, hv;
        for (size_t i = 0; i < d->n; i++) {
            if (jx_step(e, 1) || hash_at(e, d->k[i], depth + 1, &hk) || hash_at(e, d->v[i], depth + 1, &hv)) return -1;
            h += mix64(hk ^ (hv * 0x9e3779b97f4a7c15ull));
        }
        *out = mix64(h ^ d->n ^ 0xd6e8feb86659fd93ull);
        return 0;
    }
    default: break;
    }
    /* functions, loops, namespaces: equal only to themselves */
    *out = mix64((uint64_t)(uintptr_t)v.u.d ^ v.t);
    return 0;
}

int jx_hash(jinja_env *e, jv v, uint32_t *out) {
    if (v.t == JV_STR) { /* as jx_dict_gets hashes its bytes */
        if (v.u.s->len >= 64 && jx_step(e, v.u.s->len / 64)) return -1;
        *out = hash_str(v.u.s->s, v.u.s->len);
        return 0;
    }
    uint64_t h;
    if (hash_at(e, v, 0, &h)) return -1;
    *out = fold32(h);
    return 0;
}

/* Where key is in d (depth: how deep the walk that asks already is): *at its position or SIZE_MAX;
 * *hash its hash when d has an index (jx_dict_set stores it). */
static int find_key(jinja_env *e, const jdict *d, jv key, int depth, size_t *at, uint32_t *hash) {
    int eq;
    *at = SIZE_MAX;
    if (!d->slot) {
        for (size_t i = 0; i < d->n; i++) {
            if (equal_at(e, d->k[i], key, depth, &eq)) return -1;
            if (eq) {
                *at = i;
                return 0;
            }
        }
        return 0;
    }
    uint32_t h;
    if (key.t == JV_STR) {
        if (key.u.s->len >= 64 && jx_step(e, key.u.s->len / 64)) return -1;
        h = hash_str(key.u.s->s, key.u.s->len);
    } else {
        uint64_t h64;
        if (hash_at(e, key, depth, &h64)) return -1;
        h = fold32(h64);
    }
    *hash = h;
    size_t mask = d->nslot - 1;
    uint64_t probes = 0;
    for (size_t s = h & mask; d->slot[s]; s = (s + 1) & mask) {
        size_t i = d->slot[s] - 1;
        probes++;
        if (d->hash[i] != h) continue;
        if (equal_at(e, d->k[i], key, depth, &eq)) return -1;
        if (eq) {
            *at = i;
            break;
        }
    }
    return charge_probes(e, probes);
}

static int merge_sort(jinja_env *e, const jv *keys, size_t *a, size_t *tmp, size_t n, int reverse) {
    if (n < 2) return 0;
    size_t h = n / 2;
    if (merge_sort(e, keys, a, tmp, h, reverse) || merge_sort(e, keys, a + h, tmp, n - h, reverse)) return -1;
    size_t i = 0, j = h, k = 0;
    while (i < h && j < n) {
        int c;
        if (jx_step(e, 1) || jx_compare(e, keys[a[j]], keys[a[i]], &c)) return -1;
        /* take from the right only when strictly before: stable (reverse keeps equal items in order too) */
        if (reverse ? c > 0 : c < 0)
            tmp[k++] = a[j++];
        else
            tmp[k++] = a[i++];
    }
    while (i < h)
        tmp[k++] = a[i++];
    while (j < n)
        tmp[k++] = a[j++];
    memcpy(a, tmp, n * sizeof *a);
    return 0;
}

int jx_sort_index(jinja_env *e, const jv *keys, size_t *idx, size_t n, int reverse) {
    size_t *tmp = jx_alloc(e, (n ? n : 1) * sizeof *tmp);
    return tmp ? merge_sort(e, keys, idx, tmp, n, reverse) : -1;
}

/* ---- text ------------------------------------------------------------------ */

int jx_buf_put(jinja_env *e, jx_buf *b, const char *s, size_t n) {
    if (n == 0) return 0;
    if (n > e->lim.max_output || b->len > e->lim.max_output - n)
        return jx_error(e, "the output is over its limit of %zu bytes", e->lim.max_output);
    if (b->len + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap * 2 : 256;
        while (nc < b->len + n + 1)
            nc *= 2;
        char *np = jx_grow(e, b->p, b->cap, nc);
        if (!np) return -1;
        b->p = np;
        b->cap = nc;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
    return 0;
}

int jx_buf_puts(jinja_env *e, jx_buf *b, const char *s) { return jx_buf_put(e, b, s, strlen(s)); }

jstr *jx_buf_take(jinja_env *e, jx_buf *b) { return jx_str(e, b->p ? b->p : "", b->len); }

void jx_format_float(double f, char *out, size_t cap) {
    if (isnan(f)) {
        snprintf(out, cap, "nan");
        return;
    }
    if (isinf(f)) {
        snprintf(out, cap, f < 0 ? "-inf" : "inf");
        return;
    }
    if (f == 0) {
        snprintf(out, cap, signbit(f) ? "-0.0" : "0.0");
        return;
    }
    /* the shortest digits that read back as f */
    char buf[40];
    for (int p = 1; p <= 17; p++) {
        snprintf(buf, sizeof buf, "%.*e", p - 1, f);
        if (strtod(buf, NULL) == f) break;
    }
    /* buf: [-]d[.ddd]e[+-]xx */
    char digits[24];
    int nd = 0, neg = 0;
    const char *q = buf;
    if (*q == '-') neg = 1, q++;
    for (; *q && *q != 'e'; q++)
        if (*q >= '0' && *q <= '9' && nd < 20) digits[nd++] = *q;
    int exp10 = *q == 'e' ? atoi(q + 1) : 0;
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    digits[nd] = '\0';
    char r[64];
    size_t k = 0;
    if (neg) r[k++] = '-';
    if (exp10 >= -4 && exp10 < 16) {
        if (exp10 >= 0) {
            for (int i = 0; i <= exp10; i++)
                r[k++] = i < nd ? digits[i] : '0';
            r[k++] = '.';
            if (nd > exp10 + 1)
                for (int i = exp10 + 1; i < nd; i++)
                    r[k++] = digits[i];
            else
                r[k++] = '0';
        } else {
            r[k++] = '0';
            r[k++] = '.';
            for (int i = 0; i < -exp10 - 1; i++)
                r[k++] = '0';
            for (int i = 0; i < nd; i++)
                r[k++] = digits[i];
        }
        r[k] = '\0';
    } else {
        r[k++] = digits[0];
        if (nd > 1) {
            r[k++] = '.';
            for (int i = 1; i < nd; i++)
                r[k++] = digits[i];
        }
        r[k] = '\0';
        snprintf(r + k, sizeof r - k, "e%c%02d", exp10 < 0 ? '-' : '+', abs(exp10));
    }
    snprintf(out, cap, "%s", r);
}

/* Python's str.isprintable for a code point past ASCII (the common cases). */
static int cp_printable(int32_t cp) {
    if (cp < 0xa1 || cp == 0xad) return 0;
    if ((cp >= 0x2000 && cp <= 0x200f) || (cp >= 0x2028 && cp <= 0x202f) || (cp >= 0x205f && cp <= 0x206f)) return 0;
    if (cp == 0x3000 || cp == 0xfeff || (cp >= 0xd800 && cp <= 0xdfff) || (cp >= 0xe000 && cp <= 0xf8ff)) return 0;
    if (cp >= 0xfff0 && cp <= 0xfffb) return 0;
    return 1;
}

static int write_str_repr(jinja_env *e, jx_buf *b, const jstr *s) {
    int has_sq = memchr(s->s, '\'', s->len) != NULL, has_dq = memchr(s->s, '"', s->len) != NULL;
    char q = has_sq && !has_dq ? '"' : '\'';
    if (jx_buf_put(e, b, &q, 1)) return -1;
    const unsigned char *p = (const unsigned char *)s->s;
    size_t i = 0;
    while (i < s->len) {
        size_t start = i;
        /* a run of plain bytes */
        while (i < s->len && p[i] >= 0x20 && p[i] < 0x7f && p[i] != '\\' && p[i] != (unsigned char)q)
            i++;
        if (jx_buf_put(e, b, (const char *)p + start, i - start)) return -1;
        if (i >= s->len) break;
        char esc[16];
        unsigned c = p[i];
        if (c == '\\' || c == (unsigned char)q) {
            esc[0] = '\\', esc[1] = (char)c, esc[2] = 0;
            i++;
        } else if (c == '\n' || c == '\r' || c == '\t') {
            snprintf(esc, sizeof esc, "\\%c", c == '\n' ? 'n' : c == '\r' ? 'r' : 't');
            i++;
        } else if (c < 0x80) {
            snprintf(esc, sizeof esc, "\\x%02x", c);
            i++;
        } else {
            int l;
            int32_t cp = jx_utf8_next((const char *)p + i, s->len - i, &l);
            if (cp >= 0 && cp_printable(cp)) {
                if (jx_buf_put(e, b, (const char *)p + i, (size_t)l)) return -1;
                i += (size_t)l;
                continue;
            }
            if (cp < 0) cp = c; /* an invalid byte: shown as its value */
            if (cp <= 0xff)
                snprintf(esc, sizeof esc, "\\x%02x", (unsigned)cp);
            else if (cp <= 0xffff)
                snprintf(esc, sizeof esc, "\\u%04x", (unsigned)cp);
            else
                snprintf(esc, sizeof esc, "\\U%08x", (unsigned)cp);
            i += (size_t)l;
        }
        if (jx_buf_puts(e, b, esc)) return -1;
    }
    return jx_buf_put(e, b, &q, 1);
}

static int write_value(jinja_env *e, jx_buf *b, jv v, int repr, int depth) {
    char num[64];
    if (jx_step(e, 1)) return -1;
    switch (v.t) {
    case JV_UNDEF: return repr ? jx_buf_puts(e, b, "Undefined") : 0;
    case JV_NONE: return jx_buf_puts(e, b, "None");
    case JV_BOOL: return jx_buf_puts(e, b, v.u.i ? "True" : "False");
    case JV_INT: snprintf(num, sizeof num, "%" PRId64, v.u.i); return jx_buf_puts(e, b, num);
    case JV_FLOAT: jx_format_float(v.u.f, num, sizeof num); return jx_buf_puts(e, b, num);
    case JV_STR: return repr ? write_str_repr(e, b, v.u.s) : jx_buf_put(e, b, v.u.s->s, v.u.s->len);
    case JV_LIST: {
        jlist *l = v.u.l;
        /* a list met again inside itself prints as [...], as Python's repr (a tuple is never one of its own
         * items there; here one can be, through append, and then it nests too deeply) */
        if (l->busy) return jx_buf_puts(e, b, "[...]");
        if (depth >= e->lim.max_depth) return too_deep(e);
        static const char *const views[] = {"", "dict_items(", "dict_keys(", "dict_values("};
        if (jx_buf_puts(e, b, views[l->view & 3]) || jx_buf_puts(e, b, l->tuple ? "(" : "[")) return -1;
        l->busy = !l->tuple;
        for (size_t i = 0; i < l->n; i++) /* on an error the render is over: busy marks need no undoing */
            if ((i && jx_buf_puts(e, b, ", ")) || write_value(e, b, l->v[i], 1, depth + 1)) return -1;
        l->busy = 0;
        if (jx_buf_puts(e, b, l->tuple ? (l->n == 1 ? ",)" : ")") : "]")) return -1;
        return l->view ? jx_buf_puts(e, b, ")") : 0;
    }
    case JV_DICT: {
        jdict *d = v.u.d;
        if (d->busy) return jx_buf_puts(e, b, d->ns ? "<Namespace {...}>" : "{...}");
        if (depth >= e->lim.max_depth) return too_deep(e);
        if (jx_buf_puts(e, b, d->ns ? "<Namespace {" : "{")) return -1;
        d->busy = 1;
        for (size_t i = 0; i < d->n; i++) {
            if ((i && jx_buf_puts(e, b, ", ")) || write_value(e, b, d->k[i], 1, depth + 1) || jx_buf_puts(e, b, ": ") ||
                write_value(e, b, d->v[i], 1, depth + 1))
                return -1;
        }
        d->busy = 0;
        return jx_buf_puts(e, b, d->ns ? "}>" : "}");
    }
    case JV_FUNC:
        if (v.u.fn->kind == JF_MACRO || v.u.fn->kind == JF_CALLER) {
            snprintf(num, sizeof num, "<Macro '%.40s'>", v.u.fn->kind == JF_CALLER ? "caller" : v.u.fn->name);
            return jx_buf_puts(e, b, num);
        }
        snprintf(num, sizeof num, "<built-in method %.40s>", v.u.fn->name ? v.u.fn->name : "?");
        return jx_buf_puts(e, b, num);
    case JV_LOOP:
        snprintf(num, sizeof num, "<LoopContext %" PRId64 "/%" PRId64 ">", v.u.lp->index0 + 1, v.u.lp->length);
        return jx_buf_puts(e, b, num);
    }
    return 0;
}

int jx_write_str(jinja_env *e, jx_buf *b, jv v) { return write_value(e, b, v, 0, 0); }
int jx_write_repr(jinja_env *e, jx_buf *b, jv v) { return write_value(e, b, v, 1, 0); }

int jx_to_str(jinja_env *e, jv v, jstr **out) {
    if (v.t == JV_STR) {
        *out = v.u.s;
        return 0;
    }
    jx_buf b = {0};
    if (jx_write_str(e, &b, v)) return -1;
    *out = jx_buf_take(e, &b);
    return *out ? 0 : -1;
}

/* ---- JSON (Python's json.dumps) ------------------------------------------ */

static int json_string(jinja_env *e, jx_buf *b, const char *s, size_t n, int ensure_ascii) {
    if (jx_buf_put(e, b, "\"", 1)) return -1;
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        size_t start = i;
        while (i < n && p[i] >= 0x20 && p[i] != '"' && p[i] != '\\' && (p[i] < 0x80 || !ensure_ascii))
            i++;
        if (jx_buf_put(e, b, s + start, i - start)) return -1;
        if (i >= n) break;
        char esc[16];
        unsigned c = p[i];
        if (c == '"' || c == '\\') {
            esc[0] = '\\', esc[1] = (char)c, esc[2] = 0;
            i++;
        } else if (c < 0x20) {
            const char *named = c == '\n'   ? "\\n"
                                : c == '\r' ? "\\r"
                                : c == '\t' ? "\\t"
                                : c == '\b' ? "\\b"
                                : c == '\f' ? "\\f"
                                            : NULL;
            if (named)
                snprintf(esc, sizeof esc, "%s", named);
            else
                snprintf(esc, sizeof esc, "\\u%04x", c);
            i++;
        } else {
            int l;
            int32_t cp = jx_utf8_next((const char *)p + i, n - i, &l);
            if (cp < 0) cp = 0xfffd;
            if (cp > 0xffff)
                snprintf(esc, sizeof esc, "\\u%04x\\u%04x", 0xd800 + ((cp - 0x10000) >> 10),
                         0xdc00 + ((cp - 0x10000) & 0x3ff));
            else
                snprintf(esc, sizeof esc, "\\u%04x", (unsigned)cp);
            i += (size_t)l;
        }
        if (jx_buf_puts(e, b, esc)) return -1;
    }
    return jx_buf_put(e, b, "\"", 1);
}

static int json_newline(jinja_env *e, jx_buf *b, const char *indent, int level) {
    if (jx_buf_put(e, b, "\n", 1)) return -1;
    for (int i = 0; i < level; i++)
        if (jx_buf_puts(e, b, indent)) return -1;
    return 0;
}

static int json_key(jinja_env *e, jx_buf *b, jv k, int ensure_ascii) {
    char num[64];
    switch (k.t) {
    case JV_STR: return json_string(e, b, k.u.s->s, k.u.s->len, ensure_ascii);
    case JV_INT: snprintf(num, sizeof num, "\"%" PRId64 "\"", k.u.i); return jx_buf_puts(e, b, num);
    case JV_BOOL: return jx_buf_puts(e, b, k.u.i ? "\"true\"" : "\"false\"");
    case JV_NONE: return jx_buf_puts(e, b, "\"null\"");
    case JV_FLOAT:
        jx_format_float(k.u.f, num + 1, sizeof num - 2);
        num[0] = '"';
        strcat(num, "\"");
        return jx_buf_puts(e, b, num);
    default: return jx_error(e, "keys must be str, int, float, bool or None, not %s", jx_type_name(k));
    }
}

int jx_write_json(jinja_env *e, jx_buf *b, jv v, const char *indent, const char *item_sep, const char *key_sep,
                  int sort_keys, int ensure_ascii, int level) {
    char num[64];
    if (jx_step(e, 1)) return -1;
    if ((v.t == JV_LIST && v.u.l->busy) || (v.t == JV_DICT && v.u.d->busy))
        return jx_error(e, "tojson: Circular reference detected"); /* Python's json.dumps */
    if ((v.t == JV_LIST || v.t == JV_DICT) && level >= e->lim.max_depth) return too_deep(e);
    if (!item_sep) item_sep = indent ? "," : ", ";
    if (!key_sep) key_sep = ": ";
    switch (v.t) {
    case JV_NONE: return jx_buf_puts(e, b, "null");
    case JV_BOOL: return jx_buf_puts(e, b, v.u.i ? "true" : "false");
    case JV_INT: snprintf(num, sizeof num, "%" PRId64, v.u.i); return jx_buf_puts(e, b, num);
    case JV_FLOAT:
        if (isnan(v.u.f)) return jx_buf_puts(e, b, "NaN");
        if (isinf(v.u.f)) return jx_buf_puts(e, b, v.u.f < 0 ? "-Infinity" : "Infinity");
        jx_format_float(v.u.f, num, sizeof num);
        return jx_buf_puts(e, b, num);
    case JV_STR: return json_string(e, b, v.u.s->s, v.u.s->len, ensure_ascii);
    case JV_LIST: {
        jlist *l = v.u.l;
        if (l->n == 0) return jx_buf_puts(e, b, "[]");
        if (jx_buf_puts(e, b, "[")) return -1;
        l->busy = 1; /* left set on an error: the render is over */
        for (size_t i = 0; i < l->n; i++) {
            if (i && jx_buf_puts(e, b, item_sep)) return -1;
            if (indent && json_newline(e, b, indent, level + 1)) return -1;
            if (jx_write_json(e, b, l->v[i], indent, item_sep, key_sep, sort_keys, ensure_ascii, level + 1)) return -1;
        }
        l->busy = 0;
        if (indent && json_newline(e, b, indent, level)) return -1;
        return jx_buf_puts(e, b, "]");
    }
    case JV_DICT: {
        jdict *d = v.u.d;
        if (d->ns) break;
        if (d->n == 0) return jx_buf_puts(e, b, "{}");
        size_t *order = jx_alloc(e, d->n * sizeof *order);
        if (!order) return -1;
        for (size_t i = 0; i < d->n; i++)
            order[i] = i;
        if (sort_keys && jx_sort_index(e, d->k, order, d->n, 0)) return -1;
        if (jx_buf_puts(e, b, "{")) return -1;
        d->busy = 1;
        for (size_t i = 0; i < d->n; i++) {
            if (i && jx_buf_puts(e, b, item_sep)) return -1;
            if (indent && json_newline(e, b, indent, level + 1)) return -1;
            if (json_key(e, b, d->k[order[i]], ensure_ascii) || jx_buf_puts(e, b, key_sep) ||
                jx_write_json(e, b, d->v[order[i]], indent, item_sep, key_sep, sort_keys, ensure_ascii, level + 1))
                return -1;
        }
        d->busy = 0;
        if (indent && json_newline(e, b, indent, level)) return -1;
        return jx_buf_puts(e, b, "}");
    }
    default: break;
    }
    return jx_error(e, "Object of type %s is not JSON serializable", jx_type_name(v));
}
