/*
 * pth.c - the PyTorch checkpoint reader (see pth.h for the format and the
 * guarantees).
 *
 * Three steps. The ZIP layer (zip.c) checks the archive and finds the
 * entries. A small pickle machine runs data.pkl: it knows the protocol-2
 * opcodes torch.save emits (the table `ops` below says which) and builds
 * plain values - ints, floats, strings, tuples, lists, dicts, the allowed
 * globals, storages and tensors - in an arena freed when parsing ends. No
 * name is ever resolved to code: GLOBAL accepts a fixed list, REDUCE applies
 * OrderedDict() and the tensor rebuilders, BUILD only sets (and we ignore)
 * the state of an OrderedDict. Then the resulting object is walked (dicts of
 * dicts, bounded depth, each dict once) to name the tensors, and each tensor
 * is checked against its storage entry.
 *
 * Bounds: every opcode pushes at most one value and every container item
 * was pushed once, so values and items are linear in the pickle's size; the
 * stack, the open MARKs, the memo (whose index must also be below the
 * pickle's size: pickle numbers memo slots from 0) and strings have fixed
 * limits (pth.h); the arena is capped at a multiple of the pickle's size; the
 * walk visits each dict at most once, and the names it makes are capped in
 * length each and in total.
 */
#include "format/pth.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/fp16.h"
#include "format/file_bytes.h"
#include "format/zip.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "wgml reads torch storages in place and needs a little-endian host"
#endif

struct pth_file {
    char *name;
    const uint8_t *base;
    size_t size;
    int mapped; /* WGML_BYTES_*: base borrowed (0), mapped (1) or an owned heap copy (2) */
    zip_archive *zip;
    char *archive;        /* the entries' top folder */
    int64_t n_tensors;
    pth_tensor *tensors;
    char *strings;        /* names and storage keys of the tensors, back to back */
    const pth_tensor **by_name;
    const zip_entry **storages; /* each storage entry a tensor uses, once */
    size_t n_storages;
};

/* ---- values ---- */

enum { V_NONE, V_BOOL, V_INT, V_FLOAT, V_STR, V_TUPLE, V_LIST, V_DICT, V_GLOBAL, V_STORAGE, V_TENSOR };
static const char *const kind_names[] = {"None", "bool", "int", "float", "str", "tuple", "list",
                                         "dict", "global", "storage", "tensor"};

enum { G_ORDERED_DICT = 1, G_REBUILD_TENSOR_V2, G_REBUILD_PARAMETER, G_STORAGE_TYPE };

typedef struct pv pv;

typedef struct tensor_rec {
    pv *storage; /* a V_STORAGE */
    int ndim;
    int64_t size[PTH_MAX_DIMS], stride[PTH_MAX_DIMS];
    int64_t offset;
    uint64_t at; /* pickle offset of the REDUCE */
} tensor_rec;

struct pv {
    uint8_t kind;
    uint8_t ordered; /* V_DICT made by OrderedDict() */
    uint8_t visited; /* V_DICT reached by the walk */
    uint8_t global;  /* V_GLOBAL: G_* */
    uint32_t dtype;  /* V_GLOBAL storage type, V_STORAGE: wgml_dtype */
    union {
        int64_t i;
        double f;
        struct {
            const char *p;
            size_t n;
        } s;
        struct {
            pv **items; /* dict: key, value, key, value, ... */
            size_t n, cap;
        } c;
        struct {
            const char *key;
            size_t key_len;
            int64_t numel;
        } st;
        tensor_rec *t;
    } u;
};

typedef struct arena_block {
    struct arena_block *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
} arena_block;

typedef struct machine {
    pth_file *f;
    wgml_error *err;
    const uint8_t *pk; /* the pickle */
    size_t pk_size, pos;
    arena_block *blocks;
    size_t arena_total, arena_max;
    pv **stack;
    size_t sp, stack_cap;
    size_t *marks;
    size_t n_marks, marks_cap;
    pv **memo;
    size_t memo_cap;
} machine;

static void *arena_alloc(machine *m, size_t n) {
    n = (n + 15) & ~(size_t)15;
    arena_block *b = m->blocks;
    if (!b || b->cap - b->used < n) {
        size_t cap = n > 65536 ? n : 65536;
        if (m->arena_total + cap > m->arena_max) return NULL;
        b = wgml_malloc(sizeof *b + cap);
        if (!b) return NULL;
        b->cap = cap;
        b->used = 0;
        m->arena_total += cap;
        /* a big block goes behind the current one, so that the current one's room stays in use */
        if (m->blocks && n > 65536) {
            b->next = m->blocks->next;
            m->blocks->next = b;
        } else {
            b->next = m->blocks;
            m->blocks = b;
        }
    }
    void *p = b->data + b->used;
    b->used += n;
    return p;
}

static void arena_free(machine *m) {
    while (m->blocks) {
        arena_block *n = m->blocks->next;
        wgml_free(m->blocks);
        m->blocks = n;
    }
}

/* ---- opcodes ---- */

enum {
    OP_MARK = '(', OP_STOP = '.', OP_BININT = 'J', OP_BININT1 = 'K', OP_BININT2 = 'M', OP_NONE = 'N',
    OP_BINPERSID = 'Q', OP_REDUCE = 'R', OP_BINUNICODE = 'X', OP_APPEND = 'a', OP_BUILD = 'b', OP_GLOBAL = 'c',
    OP_EMPTY_DICT = '}', OP_APPENDS = 'e', OP_BINGET = 'h', OP_LONG_BINGET = 'j', OP_EMPTY_LIST = ']',
    OP_BINPUT = 'q', OP_LONG_BINPUT = 'r', OP_SETITEM = 's', OP_TUPLE = 't', OP_EMPTY_TUPLE = ')',
    OP_SETITEMS = 'u', OP_BINFLOAT = 'G', OP_PROTO = 0x80, OP_TUPLE1 = 0x85, OP_TUPLE2 = 0x86, OP_TUPLE3 = 0x87,
    OP_NEWTRUE = 0x88, OP_NEWFALSE = 0x89, OP_LONG1 = 0x8a,
};

/* Every pickle opcode's name, for messages about those we do not run. */
static const char *op_name(uint8_t op) {
    switch (op) {
    case '(': return "MARK"; case '.': return "STOP"; case '0': return "POP"; case '1': return "POP_MARK";
    case '2': return "DUP"; case 'F': return "FLOAT"; case 'I': return "INT"; case 'J': return "BININT";
    case 'K': return "BININT1"; case 'L': return "LONG"; case 'M': return "BININT2"; case 'N': return "NONE";
    case 'P': return "PERSID"; case 'Q': return "BINPERSID"; case 'R': return "REDUCE"; case 'S': return "STRING";
    case 'T': return "BINSTRING"; case 'U': return "SHORT_BINSTRING"; case 'V': return "UNICODE";
    case 'X': return "BINUNICODE"; case 'a': return "APPEND"; case 'b': return "BUILD"; case 'c': return "GLOBAL";
    case 'd': return "DICT"; case '}': return "EMPTY_DICT"; case 'e': return "APPENDS"; case 'g': return "GET";
    case 'h': return "BINGET"; case 'i': return "INST"; case 'j': return "LONG_BINGET"; case 'l': return "LIST";
    case ']': return "EMPTY_LIST"; case 'o': return "OBJ"; case 'p': return "PUT"; case 'q': return "BINPUT";
    case 'r': return "LONG_BINPUT"; case 's': return "SETITEM"; case 't': return "TUPLE"; case ')': return "EMPTY_TUPLE";
    case 'u': return "SETITEMS"; case 'G': return "BINFLOAT"; case 'B': return "BINBYTES"; case 'C': return "SHORT_BINBYTES";
    case 0x80: return "PROTO"; case 0x81: return "NEWOBJ"; case 0x82: return "EXT1"; case 0x83: return "EXT2";
    case 0x84: return "EXT4"; case 0x85: return "TUPLE1"; case 0x86: return "TUPLE2"; case 0x87: return "TUPLE3";
    case 0x88: return "NEWTRUE"; case 0x89: return "NEWFALSE"; case 0x8a: return "LONG1"; case 0x8b: return "LONG4";
    case 0x8c: return "SHORT_BINUNICODE"; case 0x8d: return "BINUNICODE8"; case 0x8e: return "BINBYTES8";
    case 0x8f: return "EMPTY_SET"; case 0x90: return "ADDITEMS"; case 0x91: return "FROZENSET";
    case 0x92: return "NEWOBJ_EX"; case 0x93: return "STACK_GLOBAL"; case 0x94: return "MEMOIZE";
    case 0x95: return "FRAME"; case 0x96: return "BYTEARRAY8"; case 0x97: return "NEXT_BUFFER";
    case 0x98: return "READONLY_BUFFER";
    default: return NULL;
    }
}

/* A string from the file, made printable and bounded, for messages. */
static const char *printable(char *buf, size_t cap, const char *s, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < n && k + 4 < cap; i++) buf[k++] = s[i] >= 0x20 && s[i] < 0x7f ? s[i] : '?';
    if (k < n && k + 4 <= cap) {
        memcpy(buf + k, "...", 3);
        k += 3;
    }
    buf[k] = 0;
    return buf;
}

static wgml_status bad(machine *m, uint64_t at, const char *fmt, ...) WGML_PRINTF(3, 4);
static wgml_status bad(machine *m, uint64_t at, const char *fmt, ...) {
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return wgml_fail(m->err, WGML_ERR_FORMAT, "%s: %s/data.pkl offset %llu: %s", m->f->name, m->f->archive,
                     (unsigned long long)at, msg);
}

static wgml_status oom(machine *m) {
    return wgml_fail(m->err, WGML_ERR_OUT_OF_MEMORY, "%s: out of memory reading the pickle (%zu bytes of values)",
                     m->f->name, m->arena_total);
}

static pv *new_value(machine *m, int kind) {
    pv *v = arena_alloc(m, sizeof *v);
    if (!v) return NULL;
    memset(v, 0, sizeof *v);
    v->kind = (uint8_t)kind;
    return v;
}

static size_t stack_base(const machine *m) { return m->n_marks ? m->marks[m->n_marks - 1] : 0; }
static size_t avail(const machine *m) { return m->sp - stack_base(m); }

static wgml_status push(machine *m, pv *v, uint64_t at) {
    if (!v) return oom(m);
    if (m->sp == m->stack_cap) {
        if (m->stack_cap >= PTH_MAX_STACK) return bad(m, at, "the stack grows past its limit");
        size_t cap = m->stack_cap ? m->stack_cap * 2 : 256;
        pv **s = wgml_realloc(m->stack, cap * sizeof *s);
        if (!s) return oom(m);
        m->stack = s;
        m->stack_cap = cap;
    }
    m->stack[m->sp++] = v;
    return WGML_OK;
}

static pv *pop(machine *m) { return m->stack[--m->sp]; }

/* Appends items[0..n) to a list or dict (growing its array inside the arena). */
static wgml_status extend(machine *m, pv *c, pv *const *items, size_t n) {
    if (n == 0) return WGML_OK; /* (an empty SETITEMS/APPENDS: its container may have no array yet) */
    if (c->u.c.cap - c->u.c.n < n) {
        size_t cap = c->u.c.cap ? c->u.c.cap : 8;
        while (cap - c->u.c.n < n) {
            if (cap > SIZE_MAX / 2 / sizeof(pv *)) return oom(m);
            cap *= 2;
        }
        pv **it = arena_alloc(m, cap * sizeof *it);
        if (!it) return oom(m);
        if (c->u.c.n) memcpy(it, c->u.c.items, c->u.c.n * sizeof *it);
        c->u.c.items = it;
        c->u.c.cap = cap;
    }
    memcpy(c->u.c.items + c->u.c.n, items, n * sizeof *items);
    c->u.c.n += n;
    return WGML_OK;
}

static wgml_status need(machine *m, size_t n, uint64_t at, const char *op) {
    if (avail(m) < n) {
        return bad(m, at, "%s needs %zu values on the stack (above the last MARK)", op, n);
    }
    return WGML_OK;
}

static wgml_status rd(machine *m, size_t n, const uint8_t **p, uint64_t at, const char *op) {
    if (m->pk_size - m->pos < n) return bad(m, at, "the pickle ends inside %s", op);
    *p = m->pk + m->pos;
    m->pos += n;
    return WGML_OK;
}

static uint32_t le32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }

static const struct {
    const char *name;
    uint32_t dtype;
} storage_types[] = {
    {"FloatStorage", WGML_F32}, {"HalfStorage", WGML_F16}, {"BFloat16Storage", WGML_BF16},
    {"DoubleStorage", WGML_F64}, {"LongStorage", WGML_I64}, {"IntStorage", WGML_I32},
    {"ShortStorage", WGML_I16}, {"CharStorage", WGML_I8},
};

static size_t elem_size(uint32_t dtype) {
    switch (dtype) {
    case WGML_F64: case WGML_I64: return 8;
    case WGML_F32: case WGML_I32: return 4;
    case WGML_F16: case WGML_BF16: case WGML_I16: return 2;
    default: return 1;
    }
}

static int line_is(const uint8_t *p, size_t n, const char *s) { return strlen(s) == n && memcmp(p, s, n) == 0; }

static wgml_status op_global(machine *m, uint64_t at) {
    /* "module\nname\n", each line bounded */
    const uint8_t *lines[2];
    size_t lens[2];
    for (int k = 0; k < 2; k++) {
        size_t left = m->pk_size - m->pos, lim = left < 256 ? left : 256;
        const uint8_t *s = m->pk + m->pos, *nl = memchr(s, '\n', lim);
        if (!nl) return bad(m, at, "GLOBAL: %s line missing or longer than 255 bytes", k ? "name" : "module");
        lines[k] = s;
        lens[k] = (size_t)(nl - s);
        m->pos += lens[k] + 1;
    }
    pv *v = new_value(m, V_GLOBAL);
    if (!v) return oom(m);
    if (line_is(lines[0], lens[0], "collections") && line_is(lines[1], lens[1], "OrderedDict"))
        v->global = G_ORDERED_DICT;
    else if (line_is(lines[0], lens[0], "torch._utils") && line_is(lines[1], lens[1], "_rebuild_tensor_v2"))
        v->global = G_REBUILD_TENSOR_V2;
    else if (line_is(lines[0], lens[0], "torch._utils") && line_is(lines[1], lens[1], "_rebuild_parameter"))
        v->global = G_REBUILD_PARAMETER;
    else if (line_is(lines[0], lens[0], "torch")) {
        for (size_t i = 0; i < sizeof storage_types / sizeof storage_types[0]; i++)
            if (line_is(lines[1], lens[1], storage_types[i].name)) {
                v->global = G_STORAGE_TYPE;
                v->dtype = storage_types[i].dtype;
            }
    }
    if (!v->global) {
        char a[80], b[80];
        return wgml_fail(m->err, WGML_ERR_UNSUPPORTED,
                         "%s: %s/data.pkl offset %llu: GLOBAL '%s.%s' is not allowed (only collections.OrderedDict, "
                         "the torch._utils tensor rebuilders and torch storage types)",
                         m->f->name, m->f->archive, (unsigned long long)at,
                         printable(a, sizeof a, (const char *)lines[0], lens[0]),
                         printable(b, sizeof b, (const char *)lines[1], lens[1]));
    }
    return push(m, v, at);
}

static int is_int_tuple(const pv *v, int max_n) {
    if (v->kind != V_TUPLE || v->u.c.n > (size_t)max_n) return 0;
    for (size_t i = 0; i < v->u.c.n; i++)
        if (v->u.c.items[i]->kind != V_INT) return 0;
    return 1;
}

/* _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad, backward_hooks[, metadata]):
 * the argument types here; the numbers are checked when the tensor is named. */
static wgml_status rebuild_tensor(machine *m, const pv *args, uint64_t at, pv **out) {
    size_t n = args->u.c.n;
    pv *const *a = args->u.c.items;
    if (n != 6 && n != 7) {
        return bad(m, at, "_rebuild_tensor_v2 called with %zu arguments (6 or 7 expected)", n);
    }
    if (a[0]->kind != V_STORAGE) return bad(m, at, "_rebuild_tensor_v2: the storage is a %s", kind_names[a[0]->kind]);
    if (a[1]->kind != V_INT) return bad(m, at, "_rebuild_tensor_v2: the storage offset is a %s", kind_names[a[1]->kind]);
    if (!is_int_tuple(a[2], PTH_MAX_DIMS) || !is_int_tuple(a[3], PTH_MAX_DIMS) || a[2]->u.c.n != a[3]->u.c.n)
        return bad(m, at, "_rebuild_tensor_v2: size and stride must be tuples of as many integers (at most 8)");
    if (a[4]->kind != V_BOOL) return bad(m, at, "_rebuild_tensor_v2: requires_grad is a %s", kind_names[a[4]->kind]);
    if (a[5]->kind != V_DICT) return bad(m, at, "_rebuild_tensor_v2: backward_hooks is a %s", kind_names[a[5]->kind]);
    if (n == 7 && a[6]->kind != V_DICT && a[6]->kind != V_NONE)
        return bad(m, at, "_rebuild_tensor_v2: metadata is a %s", kind_names[a[6]->kind]);
    pv *v = new_value(m, V_TENSOR);
    tensor_rec *t = arena_alloc(m, sizeof *t);
    if (!v || !t) return oom(m);
    memset(t, 0, sizeof *t);
    t->storage = a[0];
    t->offset = a[1]->u.i;
    t->ndim = (int)a[2]->u.c.n;
    for (int d = 0; d < t->ndim; d++) {
        t->size[d] = a[2]->u.c.items[d]->u.i;
        t->stride[d] = a[3]->u.c.items[d]->u.i;
    }
    t->at = at;
    v->u.t = t;
    *out = v;
    return WGML_OK;
}

static wgml_status op_reduce(machine *m, uint64_t at) {
    wgml_status st = need(m, 2, at, "REDUCE");
    if (st) return st;
    pv *args = pop(m), *fn = pop(m), *res = NULL;
    if (fn->kind != V_GLOBAL) return bad(m, at, "REDUCE of a %s, not an allowed callable", kind_names[fn->kind]);
    if (args->kind != V_TUPLE) return bad(m, at, "REDUCE with a %s of arguments, not a tuple", kind_names[args->kind]);
    switch (fn->global) {
    case G_ORDERED_DICT:
        if (args->u.c.n != 0) return bad(m, at, "OrderedDict() with arguments is not supported");
        if (!(res = new_value(m, V_DICT))) return oom(m);
        res->ordered = 1;
        break;
    case G_REBUILD_TENSOR_V2:
        if ((st = rebuild_tensor(m, args, at, &res))) return st;
        break;
    case G_REBUILD_PARAMETER: /* (data, requires_grad, backward_hooks): the tensor itself */
        if (args->u.c.n != 3 || args->u.c.items[0]->kind != V_TENSOR || args->u.c.items[1]->kind != V_BOOL ||
            args->u.c.items[2]->kind != V_DICT)
            return bad(m, at, "_rebuild_parameter expects (tensor, bool, dict)");
        res = args->u.c.items[0];
        break;
    default: return bad(m, at, "REDUCE of a torch storage type is not supported");
    }
    return push(m, res, at);
}

/* ('storage', torch.<T>Storage, key, location, numel) */
static wgml_status op_binpersid(machine *m, uint64_t at) {
    wgml_status st = need(m, 1, at, "BINPERSID");
    if (st) return st;
    pv *id = pop(m);
    pv *const *a = id->u.c.items;
    if (id->kind != V_TUPLE || id->u.c.n != 5 || a[0]->kind != V_STR || !line_is((const uint8_t *)a[0]->u.s.p, a[0]->u.s.n, "storage") ||
        a[1]->kind != V_GLOBAL || a[1]->global != G_STORAGE_TYPE || a[2]->kind != V_STR || a[3]->kind != V_STR ||
        a[4]->kind != V_INT)
        return bad(m, at, "BINPERSID: the persistent id is not ('storage', torch.<type>Storage, key, location, numel)");
    if (a[2]->u.s.n == 0 || a[2]->u.s.n > 255 || memchr(a[2]->u.s.p, '/', a[2]->u.s.n) || memchr(a[2]->u.s.p, 0, a[2]->u.s.n))
        return bad(m, at, "BINPERSID: a storage key must be 1-255 bytes without '/' or NUL");
    if (a[4]->u.i < 0) return bad(m, at, "BINPERSID: negative storage size");
    pv *v = new_value(m, V_STORAGE);
    if (!v) return oom(m);
    v->dtype = a[1]->dtype;
    v->u.st.key = a[2]->u.s.p;
    v->u.st.key_len = a[2]->u.s.n;
    v->u.st.numel = a[4]->u.i;
    return push(m, v, at);
}

static wgml_status memo_put(machine *m, uint64_t idx, uint64_t at) {
    if (avail(m) < 1) return bad(m, at, "PUT with nothing on the stack above the last MARK");
    if (idx >= PTH_MAX_MEMO || idx >= m->pk_size) return bad(m, at, "memo index beyond the limit");
    if (idx >= m->memo_cap) {
        size_t cap = m->memo_cap ? m->memo_cap : 64;
        while (cap <= idx) cap *= 2;
        pv **mm = wgml_realloc(m->memo, cap * sizeof *mm);
        if (!mm) return oom(m);
        memset(mm + m->memo_cap, 0, (cap - m->memo_cap) * sizeof *mm);
        m->memo = mm;
        m->memo_cap = cap;
    }
    m->memo[idx] = m->stack[m->sp - 1];
    return WGML_OK;
}

static wgml_status memo_get(machine *m, uint64_t idx, uint64_t at) {
    if (idx >= m->memo_cap || !m->memo[idx]) return bad(m, at, "GET of an empty memo slot");
    return push(m, m->memo[idx], at);
}

static wgml_status pop_mark(machine *m, uint64_t at, const char *op, size_t *base) {
    if (!m->n_marks) return bad(m, at, "%s without a MARK", op);
    *base = m->marks[--m->n_marks];
    return WGML_OK;
}

static wgml_status run(machine *m, pv **root) {
    wgml_status st = WGML_OK;
    while (m->pos < m->pk_size) {
        uint64_t at = m->pos;
        uint8_t op = m->pk[m->pos++];
        const uint8_t *p = NULL;
        pv *v = NULL;
        size_t base = 0;
        switch (op) {
        case OP_PROTO:
            if ((st = rd(m, 1, &p, at, "PROTO"))) return st;
            if (p[0] != 2) {
                return bad(m, at, "pickle protocol %u (torch.save's protocol 2 is supported)", p[0]);
            }
            break;
        case OP_STOP:
            if (m->n_marks || m->sp != 1) return bad(m, at, "STOP with %s left on the stack", m->n_marks ? "a MARK" : "not exactly one value");
            *root = m->stack[0];
            return WGML_OK;
        case OP_MARK:
            if (m->n_marks == m->marks_cap) {
                if (m->marks_cap >= PTH_MAX_MARKS) return bad(m, at, "too many open MARKs");
                size_t cap = m->marks_cap ? m->marks_cap * 2 : 64;
                size_t *mk = wgml_realloc(m->marks, cap * sizeof *mk);
                if (!mk) return oom(m);
                m->marks = mk;
                m->marks_cap = cap;
            }
            m->marks[m->n_marks++] = m->sp;
            break;
        case OP_EMPTY_DICT: st = push(m, new_value(m, V_DICT), at); break;
        case OP_EMPTY_TUPLE: st = push(m, new_value(m, V_TUPLE), at); break;
        case OP_EMPTY_LIST: st = push(m, new_value(m, V_LIST), at); break;
        case OP_NONE: st = push(m, new_value(m, V_NONE), at); break;
        case OP_NEWTRUE:
        case OP_NEWFALSE:
            if (!(v = new_value(m, V_BOOL))) return oom(m);
            v->u.i = op == OP_NEWTRUE;
            st = push(m, v, at);
            break;
        case OP_BININT:
        case OP_BININT1:
        case OP_BININT2: {
            size_t n = op == OP_BININT ? 4 : op == OP_BININT1 ? 1 : 2;
            if ((st = rd(m, n, &p, at, op_name(op)))) return st;
            if (!(v = new_value(m, V_INT))) return oom(m);
            v->u.i = n == 4 ? (int64_t)(int32_t)le32(p) : n == 1 ? p[0] : (int64_t)(p[0] | p[1] << 8);
            st = push(m, v, at);
            break;
        }
        case OP_LONG1: {
            if ((st = rd(m, 1, &p, at, "LONG1"))) return st;
            size_t n = p[0];
            if (n > 8) return bad(m, at, "LONG1 of more than 8 bytes");
            if ((st = rd(m, n, &p, at, "LONG1"))) return st;
            uint64_t u = 0;
            for (size_t i = 0; i < n; i++) u |= (uint64_t)p[i] << (8 * i);
            if (n > 0 && n < 8 && (p[n - 1] & 0x80)) u |= ~(uint64_t)0 << (8 * n); /* sign-extend */
            if (!(v = new_value(m, V_INT))) return oom(m);
            memcpy(&v->u.i, &u, sizeof u);
            st = push(m, v, at);
            break;
        }
        case OP_BINFLOAT: {
            if ((st = rd(m, 8, &p, at, "BINFLOAT"))) return st;
            uint64_t u = 0;
            for (int i = 0; i < 8; i++) u = u << 8 | p[i]; /* big-endian */
            if (!(v = new_value(m, V_FLOAT))) return oom(m);
            memcpy(&v->u.f, &u, sizeof u);
            st = push(m, v, at);
            break;
        }
        case OP_BINUNICODE: {
            if ((st = rd(m, 4, &p, at, "BINUNICODE"))) return st;
            uint32_t n = le32(p);
            if (n > PTH_MAX_STRING) return bad(m, at, "BINUNICODE string longer than 1 MiB");
            if ((st = rd(m, n, &p, at, "a BINUNICODE string"))) return st;
            if (!(v = new_value(m, V_STR))) return oom(m);
            v->u.s.p = (const char *)p;
            v->u.s.n = n;
            st = push(m, v, at);
            break;
        }
        case OP_GLOBAL: st = op_global(m, at); break;
        case OP_REDUCE: st = op_reduce(m, at); break;
        case OP_BUILD:
            if ((st = need(m, 2, at, "BUILD"))) return st;
            v = pop(m);
            if (m->stack[m->sp - 1]->kind != V_DICT || !m->stack[m->sp - 1]->ordered || v->kind != V_DICT)
                return bad(m, at, "BUILD is only supported on an OrderedDict with a dict of state (got a %s and a %s)",
                           kind_names[m->stack[m->sp - 1]->kind], kind_names[v->kind]);
            break; /* the state (the state dict's _metadata) is not needed */
        case OP_BINPERSID: st = op_binpersid(m, at); break;
        case OP_TUPLE:
        case OP_TUPLE1:
        case OP_TUPLE2:
        case OP_TUPLE3: {
            size_t n;
            if (op == OP_TUPLE) {
                if ((st = pop_mark(m, at, "TUPLE", &base))) return st;
                n = m->sp - base;
            } else {
                n = (size_t)(op - OP_TUPLE1 + 1);
                if ((st = need(m, n, at, op_name(op)))) return st;
            }
            if (!(v = new_value(m, V_TUPLE))) return oom(m);
            if (n) {
                v->u.c.items = arena_alloc(m, n * sizeof *v->u.c.items);
                if (!v->u.c.items) return oom(m);
                memcpy(v->u.c.items, m->stack + m->sp - n, n * sizeof *v->u.c.items);
                v->u.c.n = v->u.c.cap = n;
            }
            m->sp -= n;
            st = push(m, v, at);
            break;
        }
        case OP_SETITEM:
        case OP_APPEND: {
            size_t n = op == OP_SETITEM ? 2 : 1;
            if ((st = need(m, n + 1, at, op_name(op)))) return st;
            pv *c = m->stack[m->sp - n - 1];
            if (c->kind != (op == OP_SETITEM ? V_DICT : V_LIST))
                return bad(m, at, "%s on a %s", op_name(op), kind_names[c->kind]);
            if ((st = extend(m, c, m->stack + m->sp - n, n))) return st;
            m->sp -= n;
            break;
        }
        case OP_SETITEMS:
        case OP_APPENDS: {
            if ((st = pop_mark(m, at, op_name(op), &base))) return st;
            size_t n = m->sp - base;
            if (avail(m) < n + 1) return bad(m, at, "%s with no container below its MARK", op_name(op));
            pv *c = m->stack[base - 1];
            if (c->kind != (op == OP_SETITEMS ? V_DICT : V_LIST))
                return bad(m, at, "%s on a %s", op_name(op), kind_names[c->kind]);
            if (op == OP_SETITEMS && n % 2) return bad(m, at, "SETITEMS with an odd number of values");
            if ((st = extend(m, c, m->stack + base, n))) return st;
            m->sp = base;
            break;
        }
        case OP_BINPUT:
        case OP_LONG_BINPUT:
            if ((st = rd(m, op == OP_BINPUT ? 1 : 4, &p, at, op_name(op)))) return st;
            st = memo_put(m, op == OP_BINPUT ? p[0] : le32(p), at);
            break;
        case OP_BINGET:
        case OP_LONG_BINGET:
            if ((st = rd(m, op == OP_BINGET ? 1 : 4, &p, at, op_name(op)))) return st;
            st = memo_get(m, op == OP_BINGET ? p[0] : le32(p), at);
            break;
        default: {
            const char *name = op_name(op);
            char buf[8];
            snprintf(buf, sizeof buf, "0x%02x", op);
            if (name)
                return wgml_fail(m->err, WGML_ERR_UNSUPPORTED,
                                 "%s: %s/data.pkl offset %llu: pickle opcode %s (%s) is not supported", m->f->name,
                                 m->f->archive, (unsigned long long)at, name, buf);
            return bad(m, at, "unknown pickle opcode %s", buf);
        }
        }
        if (st) return st;
    }
    return bad(m, m->pos, "the pickle ends without STOP");
}

/* ---- naming the tensors ---- */

typedef struct walker {
    machine *m;
    tensor_rec **recs; /* per tensor found */
    size_t *name_at;   /* offset of each name in names */
    size_t n, cap;
    char *names;
    size_t names_len, names_cap, names_max;
    char path[PTH_MAX_NAME + 1];
} walker;

static wgml_status add_tensor(walker *w, tensor_rec *t, size_t name_len) {
    machine *m = w->m;
    if (w->n == PTH_MAX_TENSORS)
        return wgml_fail(m->err, WGML_ERR_FORMAT, "%s: more than %d tensors", m->f->name, PTH_MAX_TENSORS);
    if (w->names_len + name_len + 1 > w->names_max)
        return wgml_fail(m->err, WGML_ERR_FORMAT, "%s: the tensor names take more than %zu bytes", m->f->name, w->names_max);
    if (w->n == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 64;
        tensor_rec **r = wgml_realloc(w->recs, cap * sizeof *r);
        if (r) w->recs = r;
        size_t *o = r ? wgml_realloc(w->name_at, cap * sizeof *o) : NULL;
        if (!o) return oom(m);
        w->name_at = o;
        w->cap = cap;
    }
    if (w->names_cap - w->names_len < name_len + 1) {
        size_t cap = w->names_cap ? w->names_cap : 4096;
        while (cap - w->names_len < name_len + 1) cap *= 2;
        char *s = wgml_realloc(w->names, cap);
        if (!s) return oom(m);
        w->names = s;
        w->names_cap = cap;
    }
    memcpy(w->names + w->names_len, w->path, name_len);
    w->names[w->names_len + name_len] = 0;
    w->recs[w->n] = t;
    w->name_at[w->n++] = w->names_len;
    w->names_len += name_len + 1;
    return WGML_OK;
}

/* The tensors of dict d, whose names start with path[0..len). */
static wgml_status walk_dict(walker *w, pv *d, size_t len, int depth) {
    machine *m = w->m;
    if (d->visited)
        return wgml_fail(m->err, WGML_ERR_FORMAT, "%s: the dict '%.*s' appears twice in the checkpoint", m->f->name,
                         (int)(len ? len - 1 : 0), w->path);
    if (depth > PTH_MAX_NESTING)
        return wgml_fail(m->err, WGML_ERR_FORMAT, "%s: dicts nested deeper than %d ('%.*s')", m->f->name, PTH_MAX_NESTING,
                         (int)(len ? len - 1 : 0), w->path);
    d->visited = 1;
    for (size_t i = 0; i + 1 < d->u.c.n; i += 2) {
        pv *k = d->u.c.items[i], *v = d->u.c.items[i + 1];
        if (v->kind != V_TENSOR && v->kind != V_DICT) continue;
        if (k->kind != V_STR || k->u.s.n == 0 || memchr(k->u.s.p, 0, k->u.s.n))
            return wgml_fail(m->err, WGML_ERR_FORMAT, "%s: a key in dict '%.*s' is not a non-empty string without NUL",
                             m->f->name, (int)(len ? len - 1 : 0), w->path);
        size_t n = len + k->u.s.n + (v->kind == V_DICT);
        if (n > PTH_MAX_NAME)
            return wgml_fail(m->err, WGML_ERR_FORMAT, "%s: a tensor name under '%.*s' is longer than %d bytes", m->f->name,
                             (int)(len ? len - 1 : 0), w->path, PTH_MAX_NAME);
        memcpy(w->path + len, k->u.s.p, k->u.s.n);
        wgml_status st;
        if (v->kind == V_TENSOR) {
            st = add_tensor(w, v->u.t, n);
        } else {
            w->path[n - 1] = '/';
            st = walk_dict(w, v, n, depth + 1);
        }
        if (st) return st;
    }
    return WGML_OK;
}

/* ---- checking the tensors ---- */

static int mul_ok(uint64_t a, uint64_t b, uint64_t *r) {
    if (a && b > UINT64_MAX / a) return 0;
    *r = a * b;
    return 1;
}

static wgml_status check_tensor(pth_file *f, pth_tensor *t, const tensor_rec *r, const pv *s, wgml_error *err) {
    char key[256];
    memcpy(key, s->u.st.key, s->u.st.key_len);
    key[s->u.st.key_len] = 0;
    t->dtype = s->dtype;
    t->elem_size = elem_size(s->dtype);
    t->ndim = r->ndim;
    t->storage_offset = r->offset;
    t->storage_numel = s->u.st.numel;
    /* the storage entry: exactly numel elements */
    char path[PTH_MAX_NAME + 300];
    snprintf(path, sizeof path, "%s/data/%s", f->archive, key);
    const zip_entry *e = zip_find(f->zip, path);
    if (!e)
        return wgml_fail(err, WGML_ERR_FORMAT, "%s: tensor '%s': storage '%s' has no entry '%s'", f->name, t->name, key, path);
    uint64_t bytes;
    if (!mul_ok((uint64_t)s->u.st.numel, t->elem_size, &bytes) || bytes != e->size)
        return wgml_fail(err, WGML_ERR_FORMAT,
                         "%s: tensor '%s': storage '%s' should hold %lld %s elements but its entry (offset %llu) has %llu bytes",
                         f->name, t->name, key, (long long)s->u.st.numel, wgml_dtype_name(t->dtype),
                         (unsigned long long)e->offset, (unsigned long long)e->size);
    t->storage = e->data;
    /* the shape: numel and the last element reached, overflow-checked */
    uint64_t numel = 1, last = 0;
    int ok = r->offset >= 0;
    for (int d = 0; d < r->ndim && ok; d++) {
        ok = r->size[d] >= 0 && r->stride[d] >= 0 && mul_ok(numel, (uint64_t)r->size[d], &numel) && numel <= (uint64_t)INT64_MAX;
        t->size[d] = r->size[d];
        t->stride[d] = r->stride[d];
    }
    if (!ok)
        return wgml_fail(err, WGML_ERR_FORMAT,
                         "%s: tensor '%s' (pickle offset %llu): negative size, stride or offset, or too many elements", f->name,
                         t->name, (unsigned long long)r->at);
    t->numel = (int64_t)numel;
    if (numel == 0) {
        if ((uint64_t)r->offset > (uint64_t)s->u.st.numel)
            return wgml_fail(err, WGML_ERR_FORMAT, "%s: tensor '%s': storage offset %lld is past storage '%s' of %lld elements",
                             f->name, t->name, (long long)r->offset, key, (long long)s->u.st.numel);
    } else {
        last = (uint64_t)r->offset;
        for (int d = 0; d < r->ndim && ok; d++) {
            uint64_t step = 0;
            ok = mul_ok((uint64_t)(r->size[d] - 1), (uint64_t)r->stride[d], &step) && last + step >= last;
            last += step;
        }
        if (!ok || last >= (uint64_t)s->u.st.numel)
            return wgml_fail(err, WGML_ERR_FORMAT,
                             "%s: tensor '%s': its elements (offset %lld, last at %s%llu) run past storage '%s' of %lld elements",
                             f->name, t->name, (long long)r->offset, ok ? "" : "> ", (unsigned long long)last, key,
                             (long long)s->u.st.numel);
    }
    /* row-major contiguous: strides of dims of size 1 do not matter (nor any, with no element) */
    int64_t expect = 1;
    t->contiguous = 1;
    for (int d = r->ndim - 1; d >= 0 && numel; d--) {
        if (t->size[d] != 1 && t->stride[d] != expect) t->contiguous = 0;
        expect *= t->size[d];
    }
    return WGML_OK;
}

static int cmp_by_name(const void *a, const void *b) {
    return strcmp((*(const pth_tensor *const *)a)->name, (*(const pth_tensor *const *)b)->name);
}

static int cmp_by_key(const void *a, const void *b) {
    const pth_tensor *x = *(const pth_tensor *const *)a, *y = *(const pth_tensor *const *)b;
    int c = strcmp(x->storage_key, y->storage_key);
    return c ? c : (x < y ? -1 : x > y);
}

/* The tensors from the pickle's result: named, checked, indexed. */
static wgml_status collect(pth_file *f, machine *m, pv *root, wgml_error *err) {
    walker w;
    memset(&w, 0, sizeof w);
    w.m = m;
    w.names_max = (size_t)1 << 20;
    w.names_max += m->pk_size <= (SIZE_MAX - w.names_max) / 8 ? m->pk_size * 8 : SIZE_MAX - w.names_max;
    wgml_status st;
    if (root->kind == V_TENSOR)
        st = add_tensor(&w, root->u.t, 0);
    else if (root->kind == V_DICT)
        st = walk_dict(&w, root, 0, 1);
    else
        st = wgml_fail(err, WGML_ERR_FORMAT, "%s: the checkpoint holds a %s, not a tensor or a dict of tensors", f->name,
                       kind_names[root->kind]);
    /* the storage keys go after the names, in the same block */
    size_t keys_at = w.names_len;
    for (size_t i = 0; i < w.n && !st; i++) {
        const pv *s = w.recs[i]->storage;
        size_t need_bytes = s->u.st.key_len + 1;
        if (w.names_cap - w.names_len < need_bytes) {
            size_t cap = w.names_cap ? w.names_cap : 4096;
            while (cap - w.names_len < need_bytes) cap *= 2;
            char *nb = wgml_realloc(w.names, cap);
            if (!nb) {
                st = oom(m);
                break;
            }
            w.names = nb;
            w.names_cap = cap;
        }
        memcpy(w.names + w.names_len, s->u.st.key, s->u.st.key_len);
        w.names[w.names_len + s->u.st.key_len] = 0;
        w.names_len += need_bytes;
    }
    if (!st && (!(f->tensors = wgml_calloc(w.n ? w.n : 1, sizeof *f->tensors)) ||
                !(f->storages = wgml_calloc(w.n ? w.n : 1, sizeof *f->storages))))
        st = oom(m);
    if (!st) {
        f->strings = w.names;
        w.names = NULL;
        size_t key_pos = keys_at;
        for (size_t i = 0; i < w.n && !st; i++) {
            pth_tensor *t = &f->tensors[i];
            t->name = f->strings + w.name_at[i];
            t->storage_key = f->strings + key_pos;
            key_pos += w.recs[i]->storage->u.st.key_len + 1;
            f->n_tensors = (int64_t)i + 1;
            st = check_tensor(f, t, w.recs[i], w.recs[i]->storage, err);
        }
    }
    wgml_free(w.recs);
    wgml_free(w.name_at);
    wgml_free(w.names);
    if (st) return st;
    size_t n = (size_t)f->n_tensors;
    const pth_tensor **idx = wgml_calloc(n ? n : 1, sizeof *idx);
    if (!idx) return oom(m);
    for (size_t i = 0; i < n; i++) idx[i] = &f->tensors[i];
    /* every user of a storage must agree on its type and size */
    qsort(idx, n, sizeof *idx, cmp_by_key);
    f->n_storages = 0;
    for (size_t i = 0; i < n; i++) {
        if (i == 0 || strcmp(idx[i - 1]->storage_key, idx[i]->storage_key) != 0) {
            const pth_tensor *t = idx[i];
            char path[PTH_MAX_NAME + 300];
            snprintf(path, sizeof path, "%s/data/%s", f->archive, t->storage_key);
            f->storages[f->n_storages++] = zip_find(f->zip, path); /* found before, by check_tensor */
            continue;
        }
        if (idx[i - 1]->dtype != idx[i]->dtype || idx[i - 1]->storage_numel != idx[i]->storage_numel) {
            st = wgml_fail(err, WGML_ERR_FORMAT, "%s: tensors '%s' and '%s' use storage '%s' as different types or sizes",
                           f->name, idx[i - 1]->name, idx[i]->name, idx[i]->storage_key);
            wgml_free((void *)idx);
            return st;
        }
    }
    qsort(idx, n, sizeof *idx, cmp_by_name);
    for (size_t i = 1; i < n; i++)
        if (strcmp(idx[i - 1]->name, idx[i]->name) == 0) {
            st = wgml_fail(err, WGML_ERR_FORMAT, "%s: duplicate tensor name '%s'", f->name, idx[i]->name);
            wgml_free((void *)idx);
            return st;
        }
    f->by_name = idx;
    return WGML_OK;
}

/* ---- opening ---- */

static wgml_status find_archive(pth_file *f, const zip_entry **pkl, wgml_error *err) {
    const zip_entry *found = NULL;
    static const char suffix[] = "/data.pkl";
    const size_t sl = sizeof suffix - 1;
    for (size_t i = 0; i < zip_n_entries(f->zip); i++) {
        const zip_entry *e = zip_entry_at(f->zip, i);
        if (e->name_len > sl && memcmp(e->name + e->name_len - sl, suffix, sl) == 0) {
            if (found)
                return wgml_fail(err, WGML_ERR_FORMAT, "%s: two pickles, '%s' and '%s': not a torch.save archive", f->name,
                                 found->name, e->name);
            found = e;
        }
    }
    if (!found)
        return wgml_fail(err, WGML_ERR_FORMAT, "%s: no '<archive>/data.pkl' entry: not a torch.save archive", f->name);
    if (found->name_len - sl > PTH_MAX_NAME)
        return wgml_fail(err, WGML_ERR_FORMAT, "%s: archive folder name too long", f->name);
    f->archive = wgml_strndup(found->name, found->name_len - sl);
    if (!f->archive) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "%s: out of memory", f->name);
    *pkl = found;
    return WGML_OK;
}

static wgml_status parse(pth_file *f, wgml_error *err) {
    if (!zip_is_zip(f->base, f->size))
        return wgml_fail(err, WGML_ERR_FORMAT,
                         "%s: not a torch.save ZIP archive (raw data, or the legacy format of torch < 1.6, which is not supported)",
                         f->name);
    wgml_status st = zip_open_memory(f->base, f->size, f->name, &f->zip, err);
    if (st) return st;
    const zip_entry *pkl = NULL;
    if ((st = find_archive(f, &pkl, err))) return st;
    char path[PTH_MAX_NAME + 32];
    snprintf(path, sizeof path, "%s/byteorder", f->archive);
    const zip_entry *bo = zip_find(f->zip, path);
    if (bo && !(bo->size == 6 && memcmp(bo->data, "little", 6) == 0))
        return wgml_fail(err, WGML_ERR_UNSUPPORTED, "%s: '%s' is not \"little\": only little-endian checkpoints are supported",
                         f->name, path);
#if !defined(FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION)
    /* the pickle is small and holds the structure: a damaged one is refused up front (fuzzing skips this, to get past it) */
    if ((st = zip_check_crc(f->zip, pkl, err))) return st;
#endif
    machine m;
    memset(&m, 0, sizeof m);
    m.f = f;
    m.err = err;
    m.pk = pkl->data;
    m.pk_size = (size_t)pkl->size;
    /* values and items are linear in the pickle's size (see the top of the file): 128 bytes a byte is plenty */
    m.arena_max = m.pk_size <= (SIZE_MAX >> 8) ? ((size_t)1 << 20) + m.pk_size * 128 : SIZE_MAX;
    pv *root = NULL;
    st = run(&m, &root);
    if (!st) st = collect(f, &m, root, err);
    arena_free(&m);
    wgml_free(m.stack);
    wgml_free(m.marks);
    wgml_free(m.memo);
    return st;
}

static pth_file *new_file(const char *name) {
    pth_file *f = wgml_calloc(1, sizeof *f);
    char *nm = wgml_strdup(name);
    if (!f || !nm) {
        wgml_free(f);
        wgml_free(nm);
        return NULL;
    }
    f->name = nm;
    return f;
}

static wgml_status finish_open(pth_file *f, pth_file **out, wgml_error *err) {
    wgml_status st = parse(f, err);
    if (st) {
        pth_close(f);
        return st;
    }
    *out = f;
    return WGML_OK;
}

int pth_is_pth(const void *data, size_t size) { return zip_is_zip(data, size); }

wgml_status pth_open_memory(const void *data, size_t size, const char *name, pth_file **out, wgml_error *err) {
    *out = NULL;
    if (!data && size) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "NULL data for a checkpoint in memory");
    pth_file *f = new_file(name ? name : "<memory>");
    if (!f) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory opening %s", name ? name : "a checkpoint");
    static const uint8_t no_bytes[1];
    f->base = data ? data : no_bytes;
    f->size = size;
    return finish_open(f, out, err);
}

wgml_status pth_open(const char *path, pth_file **out, wgml_error *err) {
    *out = NULL;
    const uint8_t *base;
    size_t size;
    int kind;
    wgml_status st = wgml_file_bytes(path, 22, "a torch.save archive", &base, &size, &kind, err);
    if (st) return st;
    pth_file *f = new_file(path);
    if (!f) {
        wgml_file_bytes_release(base, size, kind);
        return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory opening %s", path);
    }
    f->mapped = kind;
    f->base = base;
    f->size = size;
    return finish_open(f, out, err);
}

void pth_close(pth_file *f) {
    if (!f) return;
    zip_close(f->zip);
    wgml_free(f->tensors);
    wgml_free(f->strings);
    wgml_free((void *)f->by_name);
    wgml_free((void *)f->storages);
    wgml_free(f->archive);
    wgml_file_bytes_release(f->base, f->size, f->mapped);
    wgml_free(f->name);
    wgml_free(f);
}

const char *pth_name(const pth_file *f) { return f->name; }
const char *pth_archive(const pth_file *f) { return f->archive ? f->archive : ""; }
int64_t pth_n_tensors(const pth_file *f) { return f->n_tensors; }

const pth_tensor *pth_tensor_at(const pth_file *f, int64_t i) {
    return i >= 0 && i < f->n_tensors ? &f->tensors[i] : NULL;
}

static int cmp_name_to_tensor(const void *name, const void *elem) {
    return strcmp((const char *)name, (*(const pth_tensor *const *)elem)->name);
}

const pth_tensor *pth_find(const pth_file *f, const char *name) {
    if (!f->by_name || !name) return NULL;
    const pth_tensor *const *hit = bsearch(name, f->by_name, (size_t)f->n_tensors, sizeof *f->by_name, cmp_name_to_tensor);
    return hit ? *hit : NULL;
}

/* ---- reading ---- */

/* n elements of a storage from element index i, every `stride`, as float. */
static void load_run(const pth_tensor *t, int64_t i, int64_t stride, int64_t n, float *out) {
    const uint8_t *p = t->storage + (size_t)i * t->elem_size;
    const size_t step = (size_t)stride * t->elem_size;
    if (t->dtype == WGML_F32 && stride == 1) {
        memcpy(out, p, (size_t)n * 4);
        return;
    }
    for (int64_t k = 0; k < n; k++, p += step) {
        switch (t->dtype) {
        case WGML_F32: memcpy(&out[k], p, 4); break;
        case WGML_F16: { uint16_t h; memcpy(&h, p, 2); out[k] = wgml_f16_to_f32(h); break; }
        case WGML_BF16: { uint16_t h; memcpy(&h, p, 2); out[k] = wgml_bits_to_f32((uint32_t)h << 16); break; }
        case WGML_F64: { double d; memcpy(&d, p, 8); out[k] = (float)d; break; }
        case WGML_I64: { int64_t x; memcpy(&x, p, 8); out[k] = (float)x; break; }
        case WGML_I32: { int32_t x; memcpy(&x, p, 4); out[k] = (float)x; break; }
        case WGML_I16: { int16_t x; memcpy(&x, p, 2); out[k] = (float)x; break; }
        default: out[k] = (float)(int8_t)p[0]; break;
        }
    }
}

wgml_status pth_tensor_read_f32(const pth_file *f, const pth_tensor *t, float *out, size_t n, wgml_error *err) {
    if (!f || !t || (!out && n))
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "pth_tensor_read_f32: NULL checkpoint, tensor or output");
    if ((uint64_t)n != (uint64_t)t->numel)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "%s: tensor '%s' has %lld elements, not %zu", f->name, t->name,
                         (long long)t->numel, n);
    if (n == 0) return WGML_OK;
    if (t->ndim == 0 || t->contiguous) {
        load_run(t, t->storage_offset, 1, t->numel, out);
        return WGML_OK;
    }
    /* rows along the last dim, walked by an odometer over the others (validated at open: every index is in the storage) */
    const int last = t->ndim - 1;
    const int64_t row = t->size[last];
    int64_t idx[PTH_MAX_DIMS] = {0};
    int64_t at = t->storage_offset;
    for (int64_t done = 0; done < t->numel; done += row) {
        load_run(t, at, t->stride[last], row, out + done);
        for (int d = last - 1; d >= 0; d--) {
            if (++idx[d] < t->size[d]) {
                at += t->stride[d];
                break;
            }
            at -= (idx[d] - 1) * t->stride[d];
            idx[d] = 0;
        }
    }
    return WGML_OK;
}

wgml_status pth_verify(const pth_file *f, wgml_error *err) {
    for (size_t i = 0; i < f->n_storages; i++) {
        wgml_status st = zip_check_crc(f->zip, f->storages[i], err);
        if (st) return st;
    }
    return WGML_OK;
}
