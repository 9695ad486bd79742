/*
 * jinja_impl.h - the Jinja interpreter's insides, shared by its files:
 *
 *   jinja_value.c      the arena, values (Python's types as Jinja sees them),
 *                      truth, equality, order, str() and repr(), tojson
 *   jinja_json_read.c  JSON text -> values (the messages, extra variables)
 *   jinja_lex.c        template text -> tokens, with Jinja's whitespace rules
 *   jinja_parse.c      tokens -> a tree of nodes (statements and expressions)
 *   jinja_eval.c       running the tree: scopes, loops, macros, calls, output
 *   jinja_filters.c    filters and tests
 *   jinja_methods.c    attribute/item access, str/dict/list methods, UTF-8
 *   jinja_globals.c    range, namespace, dict, raise_exception, strftime_now
 *
 * Memory: everything a render makes lives in one arena (jx_alloc), freed at
 * once when the render ends; nothing is freed before. The arena counts its
 * bytes against the memory budget, so a template that makes garbage in a
 * loop runs into the budget, not into the machine's memory.
 *
 * Errors: a function that can fail returns int, 0 for success and -1 for an
 * error already recorded in the env (jx_error), and its result through a
 * pointer. There is no longjmp (the wasm build has none).
 */
#ifndef WGML_CHAT_JINJA_IMPL_H
#define WGML_CHAT_JINJA_IMPL_H

#include "chat/jinja.h"
#include "core/error.h"

#include <stddef.h>
#include <stdint.h>

/* ---- values -------------------------------------------------------------- */

typedef enum jv_type {
    JV_UNDEF, /* Jinja's Undefined: prints as "", false, empty when iterated */
    JV_NONE,
    JV_BOOL,
    JV_INT,
    JV_FLOAT,
    JV_STR,
    JV_LIST, /* list, or tuple (jlist.tuple) */
    JV_DICT, /* dict, or namespace() (jdict.ns) */
    JV_FUNC, /* macro, caller, built-in function, bound method */
    JV_LOOP, /* the `loop` object of a for loop */
} jv_type;

typedef struct jstr {
    size_t len;
    char s[]; /* len bytes and a NUL */
} jstr;

typedef struct jlist jlist;
typedef struct jdict jdict;
typedef struct jfunc jfunc;
typedef struct jloop jloop;

typedef struct jv {
    uint8_t t;
    uint8_t safe; /* a STR that is Markup (|safe, |escape): "+" escapes the other operand, as markupsafe does */
    union {
        int64_t i; /* INT, BOOL */
        double f;
        jstr *s; /* STR; UNDEF: what was undefined ("'x' is undefined"), or NULL */
        jlist *l;
        jdict *d;
        jfunc *fn;
        jloop *lp;
    } u;
} jv;

/* what a list prints as: dict.items() and the like are views in Python */
enum { JL_LIST, JL_ITEMS, JL_KEYS, JL_VALUES };

struct jlist {
    size_t n, cap;
    jv *v;
    int tuple;
    int view; /* JL_*: only for printing */
    int busy; /* being printed or written as JSON: met again inside itself, it is a cycle */
};

/*
 * Insertion-ordered, as Python's dict: keys and values in parallel arrays, in
 * the order of their first insertion. Past JX_DICT_INDEX_MIN keys a dict also
 * gets a hash index (open addressing with linear probing, at most half full)
 * whose slots hold an entry's position + 1, so a lookup is O(1) however big
 * the dict (a message may bring 60,000 keys). Keys hash by value with Python's
 * equality: 1, 1.0 and True are one key, strings hash by their bytes.
 * Smaller dicts (scopes, messages) are searched linearly: cheaper than hashing.
 */
#define JX_DICT_INDEX_MIN 8

struct jdict {
    size_t n, cap;
    jv *k, *v;
    uint32_t *hash; /* each key's hash (cap entries), with the index */
    uint32_t *slot; /* the index (nslot entries): 0 free, else the entry's position + 1; NULL for a small dict */
    size_t nslot;   /* a power of two, at least 2 * cap */
    int ns;         /* a namespace(): attributes may be assigned with set */
    int busy;       /* as jlist's */
};

struct jnode;
struct jscope;

typedef enum jfunc_kind {
    JF_MACRO,   /* node: the macro statement; scope: where it was defined */
    JF_CALLER,  /* node: the call block; scope: where the call block ran */
    JF_BUILTIN, /* name: a global function */
    JF_METHOD,  /* name: a method of self */
    JF_CYCLE,   /* loop.cycle of lp */
} jfunc_kind;

struct jfunc {
    jfunc_kind kind;
    const struct jnode *node;
    struct jscope *scope;
    const char *name;
    jv self;
};

struct jloop {
    jv items; /* the list iterated */
    int64_t index0, length;
};

/* ---- the env: arena, budgets, error ------------------------------------ */

typedef struct jx_chunk {
    struct jx_chunk *next;
    size_t size, used;
    _Alignas(16) unsigned char data[];
} jx_chunk;

typedef struct jx_buf {
    char *p;
    size_t len, cap;
} jx_buf;

struct jinja_env {
    jinja_limits lim;
    jx_chunk *chunks;
    size_t mem_used;
    uint64_t steps;
    int depth;
    jdict *vars; /* the variables given (the template's global scope reads them) */
    int have_clock;
    int clock[6]; /* year, month, day, hour, minute, second */
    int raised;   /* the error came from raise_exception */
    int used;     /* a render ran */
    int loop_ctl; /* set by break (1) / continue (2) until the loop sees it */
    wgml_error *err;
    wgml_status status;
    char msg[WGML_ERROR_MESSAGE_MAX];
    int line, col; /* where evaluation is, for messages */
};

/* Records an error (the first one wins) at the current line/column; returns -1. */
int jx_error(jinja_env *e, const char *fmt, ...) WGML_PRINTF(2, 3);
/* Same, at an explicit position. */
int jx_error_at(jinja_env *e, int line, int col, const char *fmt, ...) WGML_PRINTF(4, 5);
/* Counts n steps; -1 (an error) past the budget. */
int jx_step(jinja_env *e, uint64_t n);

void *jx_alloc(jinja_env *e, size_t size); /* NULL after recording an error */
void *jx_grow(jinja_env *e, void *p, size_t old_size, size_t new_size);

/* ---- value helpers (jinja_value.c) --------------------------------------- */

static inline jv jv_undef(jstr *why) {
    jv v = {.t = JV_UNDEF, .u = {.s = why}};
    return v;
}
static inline jv jv_none(void) {
    jv v = {.t = JV_NONE, .u = {.i = 0}};
    return v;
}
static inline jv jv_bool(int b) {
    jv v = {.t = JV_BOOL, .u = {.i = b != 0}};
    return v;
}
static inline jv jv_int(int64_t i) {
    jv v = {.t = JV_INT, .u = {.i = i}};
    return v;
}
static inline jv jv_float(double f) {
    jv v = {.t = JV_FLOAT, .u = {.f = f}};
    return v;
}
static inline jv jv_strv(jstr *s) {
    jv v = {.t = JV_STR, .u = {.s = s}};
    return v;
}
static inline jv jv_listv(jlist *l) {
    jv v = {.t = JV_LIST, .u = {.l = l}};
    return v;
}
static inline jv jv_dictv(jdict *d) {
    jv v = {.t = JV_DICT, .u = {.d = d}};
    return v;
}

jstr *jx_str(jinja_env *e, const char *s, size_t len);
jstr *jx_cstr(jinja_env *e, const char *s);
jstr *jx_strf(jinja_env *e, const char *fmt, ...) WGML_PRINTF(2, 3);
int jx_make_str(jinja_env *e, const char *s, size_t len, jv *out);
jlist *jx_list(jinja_env *e, size_t cap);
int jx_list_push(jinja_env *e, jlist *l, jv v);
jdict *jx_dict(jinja_env *e, size_t cap);
/* Finds key in d: *out the value's slot, NULL when absent. Comparing keys is a
 * walk over values (below), so a lookup can fail (-1) on a key nested too deeply. */
int jx_dict_get(jinja_env *e, const jdict *d, jv key, jv **out);
int jx_dict_gets(jinja_env *e, const jdict *d, const char *key, size_t len, jv **out);
int jx_dict_set(jinja_env *e, jdict *d, jv key, jv val);
int jx_dict_sets(jinja_env *e, jdict *d, const char *key, jv val);
/* Empties d (its index too), keeping the memory: a for loop's scope, reused each turn. */
void jx_dict_clear(jdict *d);

/* An undefined whose message is "'name' is undefined". */
jv jx_undef_name(jinja_env *e, const char *name, size_t len);
/* The error of using an undefined where Jinja raises. */
int jx_undef_error(jinja_env *e, jv u);

const char *jx_type_name(jv v); /* Python's: "str", "dict", "list", ... */
int jx_truthy(jv v);
int jx_is_number(jv v); /* int, float or bool */
double jx_num(jv v);
/*
 * The walks over values - equality, ordering, hashing, str()/repr(), tojson -
 * recurse into lists and dicts, which a template can make as deep as it likes
 * (a loop wrapping a list 200,000 times) or cyclic (l.append(l)). Each walk
 * counts its own nesting against lim.max_depth, apart from the evaluation's
 * depth, and charges a step for every item it visits; past either limit it is
 * an error ("a value nests too deeply"), never a C stack overflow or a hang.
 */
/* Python's ==: *eq 1 or 0. Containers that are one object are equal without a walk, as in Python. */
int jx_equal(jinja_env *e, jv a, jv b, int *eq);
/* Python's ordering: *cmp < 0, 0, > 0; an error for types Python cannot order. */
int jx_compare(jinja_env *e, jv a, jv b, int *cmp);
/* A hash consistent with jx_equal (equal values hash alike); lists and dicts hash by content. */
int jx_hash(jinja_env *e, jv v, uint32_t *out);
/* Sorts idx[0..n) by keys[idx[i]] as Python's sorted (stable; reverse keeps equal keys in their order):
 * a merge sort, O(n log n) comparisons, each a step. */
int jx_sort_index(jinja_env *e, const jv *keys, size_t *idx, size_t n, int reverse);

/* str(v) and repr(v) appended to a buffer; jx_to_str makes a string value. */
int jx_buf_put(jinja_env *e, jx_buf *b, const char *s, size_t n);
int jx_buf_puts(jinja_env *e, jx_buf *b, const char *s);
int jx_write_str(jinja_env *e, jx_buf *b, jv v);
int jx_write_repr(jinja_env *e, jx_buf *b, jv v);
int jx_to_str(jinja_env *e, jv v, jstr **out);
jstr *jx_buf_take(jinja_env *e, jx_buf *b);
/* Python's float repr (shortest round trip: 1.0, 0.1, 1e+16, 1.5e-05, inf). */
void jx_format_float(double f, char *out, size_t cap);

/* json.dumps(v, ensure_ascii, indent, separators, sort_keys) as HF's tojson.
 * indent: NULL for none; item_sep/key_sep NULL for the defaults. */
int jx_write_json(jinja_env *e, jx_buf *b, jv v, const char *indent, const char *item_sep, const char *key_sep,
                  int sort_keys, int ensure_ascii, int level);

/* JSON text -> value (jinja_json_read.c). what names the input in messages. */
int jx_json_parse(jinja_env *e, const char *s, size_t len, const char *what, jv *out);

/* ---- the tree (jinja_parse.c) -------------------------------------------- */

typedef enum jnode_kind {
    /* expressions */
    N_CONST,
    N_NAME,
    N_LIST,
    N_TUPLE,
    N_DICT,
    N_ATTR,
    N_ITEM,
    N_SLICE,
    N_CALL,
    N_FILTER,
    N_TEST,
    N_NEG,
    N_POS,
    N_NOT,
    N_AND,
    N_OR,
    N_BIN,
    N_CONCAT,
    N_COMPARE,
    N_COND,
    /* statements */
    N_TEXT,
    N_OUTPUT,
    N_IF,
    N_FOR,
    N_SET,
    N_SETBLOCK,
    N_MACRO,
    N_CALLBLOCK,
    N_FILTERBLOCK,
    N_WITH,
    N_BREAK,
    N_CONTINUE,
} jnode_kind;

typedef enum jop {
    OP_ADD,
    OP_SUB,
    OP_MUL,
    OP_DIV,
    OP_FLOORDIV,
    OP_MOD,
    OP_POW,
    OP_EQ,
    OP_NE,
    OP_LT,
    OP_LE,
    OP_GT,
    OP_GE,
    OP_IN,
    OP_NOTIN,
} jop;

typedef struct jnode jnode;
typedef struct jnodes {
    jnode **v;
    int n;
} jnodes;

/*
 * One node shape for everything; what each field holds by kind:
 *   CONST value | NAME name | LIST/TUPLE items | DICT items (keys), items2 (values)
 *   ATTR a.name | ITEM a[b] | SLICE a[b:c:d] (NULL parts left out)
 *   CALL a(items, names=items2) | FILTER a|name(items, names=items2) (a NULL in a filter block)
 *   TEST a is [not: flag] name(items) | NEG/POS/NOT a | AND/OR a, b | BIN a op b
 *   CONCAT items | COMPARE items[0] ops[0] items[1] ops[1] ... | COND b if a else c (c may be NULL)
 *   TEXT value | OUTPUT a | IF a: body else body2 | FOR targets(names) in a if b: body else body2
 *   SET target(a) = b | SETBLOCK target(a) = body, filtered by b (a FILTER chain on NULL) or NULL
 *   MACRO name(names = defaults in items2, NULL for none): body
 *   CALLBLOCK a (a CALL), caller(names = items2): body | FILTERBLOCK b (FILTER chain): body
 *   WITH names = items: body
 */
struct jnode {
    uint8_t kind, op, flag;
    int line, col;
    jnode *a, *b, *c, *d;
    jnodes items, items2;
    jnodes body, body2;
    jstr *name;
    jstr **names;
    int n_names;
    uint8_t *ops;
    jv value;
};

/* Parses a template into its statement list (nodes in the env's arena). */
int jx_parse(jinja_env *e, const char *src, size_t len, jnodes *out);

/* ---- the lexer (jinja_lex.c) --------------------------------------------- */

typedef enum jtok_kind {
    T_EOF,
    T_TEXT,      /* template data (whitespace rules applied) */
    T_VAR_BEGIN, /* {{ */
    T_VAR_END,   /* }} */
    T_BLOCK_BEGIN,
    T_BLOCK_END,
    T_NAME,
    T_STRING, /* str: the value, escapes decoded */
    T_INT,
    T_FLOAT,
    T_OP, /* op: the operator's text, e.g. "==", "(" */
} jtok_kind;

typedef struct jtok {
    uint8_t kind;
    char op[4];
    int line, col;
    jstr *str; /* TEXT, NAME, STRING */
    int64_t i;
    double f;
} jtok;

typedef struct jtoks {
    jtok *v;
    size_t n, cap;
} jtoks;

int jx_lex(jinja_env *e, const char *src, size_t len, jtoks *out);

/* ---- running (jinja_eval.c, jinja_filters.c, jinja_methods.c) ----------- */

typedef struct jscope {
    struct jscope *parent;
    jdict *vars;
} jscope;

/* Arguments of a call, already evaluated. */
typedef struct jargs {
    jv *pos;
    int n_pos;
    jstr **kw_names;
    jv *kw;
    int n_kw;
} jargs;

/* Renders nodes into b in scope s. */
int jx_exec(jinja_env *e, const jnodes *body, jscope *s, jx_buf *b);
int jx_eval(jinja_env *e, const jnode *n, jscope *s, jv *out);
/* Calls a callable value. */
int jx_call(jinja_env *e, jv fn, const jargs *args, jscope *s, jv *out);

/* v as a string / an integer, else an error naming what wanted it. */
int jx_want_str(jinja_env *e, jv v, const char *what, jstr **out);
int jx_want_int(jinja_env *e, jv v, const char *what, int64_t *out);
/* The argument `name` at position pos (or by keyword); def when absent. */
jv jx_arg(const jargs *a, int pos, const char *name, jv def);
/* Fails when more than max positional args or an unknown keyword is given. */
int jx_check_args(jinja_env *e, const jargs *a, const char *what, int max_pos, const char *const *kw_names);

int jx_filter(jinja_env *e, const char *name, jv v, const jargs *args, jscope *s, jv *out);
int jx_test(jinja_env *e, const char *name, jv v, const jargs *args, jscope *s, int *out);
int jx_has_test(const char *name);
/* markupsafe's escape: & < > " ' as entities; a safe string as it is. The result is safe. */
int jx_escape(jinja_env *e, jv v, jv *out);

/* Attribute of a value: dict keys first, then methods (bound), loop fields. */
int jx_getattr(jinja_env *e, jv obj, const char *name, size_t len, jv *out);
/* v[key] (Jinja's subscript: tries the item, then the attribute). */
int jx_getitem(jinja_env *e, jv obj, jv key, jv *out);
int jx_call_method(jinja_env *e, jv self, const char *name, const jargs *args, jv *out);
/* A global function by name (range, namespace, dict, ...): 1 when found. */
int jx_builtin(const char *name, size_t len, jv *out);
int jx_call_builtin(jinja_env *e, const char *name, const jargs *args, jv *out);

/* Iterating a value as Jinja's for does: lists, dict keys, string characters. */
int jx_iter_list(jinja_env *e, jv v, jlist **out);
/* A slice of a string or list, Python's semantics; missing parts as UNDEF/NONE. */
int jx_slice(jinja_env *e, jv v, jv start, jv stop, jv step, jv *out);

/* UTF-8 and Python's string semantics (jinja_methods.c) */
int32_t jx_utf8_next(const char *s, size_t n, int *len); /* -1 for an invalid byte (len 1) */
size_t jx_utf8_count(const char *s, size_t n);           /* code points */
int jx_is_space_cp(int32_t cp);                          /* str.isspace */
int32_t jx_upper_cp(int32_t cp);
int32_t jx_lower_cp(int32_t cp);
int jx_put_cp(jinja_env *e, jx_buf *b, int32_t cp);
/* mode: 'u' upper, 'l' lower, 'c' capitalize, 't' str.title, 'T' the title filter */
int jx_case_map(jinja_env *e, const jstr *s, int mode, jv *out);
int jx_strip(jinja_env *e, const jstr *s, const jstr *chars, int left, int right, jv *out);
int jx_replace(jinja_env *e, const jstr *s, const jstr *old, const jstr *new_, int64_t count, jv *out);

#endif
