/*
 * jinja_parse.c - tokens -> a tree of nodes, by recursive descent with
 * Jinja 3.1's grammar and precedence (loosest first):
 *
 *   cond      or ["if" or ["else" cond]]
 *   or/and    not ("or"|"and" ...)
 *   not       "not" not | compare
 *   compare   math1 (("=="|"!="|"<"|"<="|">"|">="|"in"|"not in") math1)*
 *   math1     concat (("+"|"-") concat)*
 *   concat    math2 ("~" math2)*
 *   math2     pow (("*"|"/"|"//"|"%") pow)*
 *   pow       unary ("**" unary)*
 *   unary     ("-"|"+") unary | primary postfix* (filter | test | call)*
 *
 * so filters and tests bind tighter than arithmetic ("a + b|length" filters
 * b) and "not x is defined" negates the test. Statements: if/elif/else,
 * for/else (with an "if" filter), set (=, block form, namespace attributes,
 * tuples), macro, call, filter, with, break, continue, and HF's generation
 * block (rendered as its body). include/import/extends/block, which would
 * read other templates, are refused.
 *
 * Nesting (brackets, blocks) is limited by the env's depth limit, so a
 * hostile template cannot exhaust the C stack.
 */
#include "chat/jinja_impl.h"

#include <stdio.h>
#include <string.h>

typedef struct {
    jinja_env *e;
    jtok *t;
    size_t i, n;
} parser;

static jtok *cur(parser *P) { return &P->t[P->i < P->n ? P->i : P->n - 1]; }
static jtok *peek(parser *P, size_t k) { return &P->t[P->i + k < P->n ? P->i + k : P->n - 1]; }

static int is_op(parser *P, const char *op) { return cur(P)->kind == T_OP && strcmp(cur(P)->op, op) == 0; }
static int is_name(parser *P, const char *name) {
    jtok *t = cur(P);
    return t->kind == T_NAME && strcmp(t->str->s, name) == 0;
}

static const char *tok_desc(jtok *t, char *buf, size_t cap) {
    switch (t->kind) {
    case T_EOF: return "end of template";
    case T_TEXT: return "template text";
    case T_VAR_BEGIN: return "'{{'";
    case T_VAR_END: return "'}}'";
    case T_BLOCK_BEGIN: return "'{%'";
    case T_BLOCK_END: return "'%}'";
    case T_STRING: return "a string";
    case T_INT: return "an integer";
    case T_FLOAT: return "a number";
    case T_NAME: snprintf(buf, cap, "'%.60s'", t->str->s); return buf;
    default: snprintf(buf, cap, "'%s'", t->op); return buf;
    }
}

static int fail_tok(parser *P, const char *what) {
    char b[80];
    jtok *t = cur(P);
    return jx_error_at(P->e, t->line, t->col, "%s, got %s", what, tok_desc(t, b, sizeof b));
}

static int expect_op(parser *P, const char *op) {
    if (!is_op(P, op)) {
        char w[32];
        snprintf(w, sizeof w, "expected '%s'", op);
        return fail_tok(P, w);
    }
    P->i++;
    return 0;
}

static int expect_end(parser *P) {
    if (cur(P)->kind != T_BLOCK_END) return fail_tok(P, "expected the end of the statement '%}'");
    P->i++;
    return 0;
}

static jnode *node(parser *P, int kind, jtok *at) {
    jnode *n = jx_alloc(P->e, sizeof *n);
    if (!n) return NULL;
    memset(n, 0, sizeof *n);
    n->kind = (uint8_t)kind;
    n->line = at->line;
    n->col = at->col;
    return n;
}

static int push(parser *P, jnodes *l, jnode *n, int *cap) {
    if (l->n == *cap) {
        int nc = *cap ? *cap * 2 : 4;
        jnode **nv = jx_grow(P->e, l->v, (size_t)*cap * sizeof *nv, (size_t)nc * sizeof *nv);
        if (!nv) return -1;
        l->v = nv;
        *cap = nc;
    }
    l->v[l->n++] = n;
    return 0;
}

static int enter(parser *P) {
    if (++P->e->depth > P->e->lim.max_depth) {
        jtok *t = cur(P);
        return jx_error_at(P->e, t->line, t->col, "the template nests too deeply (limit %d)", P->e->lim.max_depth);
    }
    return 0;
}
static void leave(parser *P) { P->e->depth--; }

static jnode *parse_expr(parser *P);
static jnode *parse_or(parser *P);
static jnode *parse_unary(parser *P, int with_filter);
static jnode *parse_primary(parser *P);

/* (args) after a callee or filter: positional items, keyword names/items2 */
static int parse_call_args(parser *P, jnode *n) {
    int cap1 = 0, cap2 = 0, capn = 0;
    if (expect_op(P, "(")) return -1;
    while (!is_op(P, ")")) {
        if (n->items.n + n->items2.n > 0 && expect_op(P, ",")) return -1;
        if (is_op(P, ")")) break; /* a trailing comma */
        if (is_op(P, "*") || is_op(P, "**")) return fail_tok(P, "*args and **kwargs in calls are not supported");
        if (cur(P)->kind == T_NAME && peek(P, 1)->kind == T_OP && strcmp(peek(P, 1)->op, "=") == 0) {
            jstr *name = cur(P)->str;
            P->i += 2;
            jnode *v = parse_expr(P);
            if (!v || push(P, &n->items2, v, &cap2)) return -1;
            if (n->n_names == capn) {
                int nc = capn ? capn * 2 : 4;
                jstr **nv = jx_grow(P->e, n->names, (size_t)capn * sizeof *nv, (size_t)nc * sizeof *nv);
                if (!nv) return -1;
                n->names = nv;
                capn = nc;
            }
            n->names[n->n_names++] = name;
        } else {
            if (n->items2.n) return fail_tok(P, "a positional argument after a keyword argument");
            jnode *v = parse_expr(P);
            if (!v || push(P, &n->items, v, &cap1)) return -1;
        }
    }
    P->i++;
    return 0;
}

static jnode *parse_filter(parser *P, jnode *operand) {
    jtok *at = cur(P);
    if (at->kind != T_NAME) return fail_tok(P, "expected a filter name"), NULL;
    jnode *n = node(P, N_FILTER, at);
    if (!n) return NULL;
    n->a = operand;
    n->name = at->str;
    P->i++;
    while (is_op(P, ".") && peek(P, 1)->kind == T_NAME) { /* dotted filter names */
        n->name = jx_strf(P->e, "%s.%s", n->name->s, peek(P, 1)->str->s);
        if (!n->name) return NULL;
        P->i += 2;
    }
    if (is_op(P, "(") && parse_call_args(P, n)) return NULL;
    return n;
}

static jnode *parse_test(parser *P, jnode *operand) {
    jtok *at = cur(P);
    jnode *n = node(P, N_TEST, at);
    if (!n) return NULL;
    n->a = operand;
    if (is_name(P, "not")) {
        n->flag = 1;
        P->i++;
    }
    jtok *t = cur(P);
    if (t->kind != T_NAME) return fail_tok(P, "expected a test name"), NULL;
    n->name = t->str;
    P->i++;
    if (is_op(P, ".") && peek(P, 1)->kind == T_NAME) {
        n->name = jx_strf(P->e, "%s.%s", n->name->s, peek(P, 1)->str->s);
        if (!n->name) return NULL;
        P->i += 2;
    }
    t = cur(P);
    if (is_op(P, "(")) {
        if (parse_call_args(P, n)) return NULL;
    } else if ((t->kind == T_NAME || t->kind == T_STRING || t->kind == T_INT || t->kind == T_FLOAT || is_op(P, "[") ||
                is_op(P, "{")) &&
               !is_name(P, "else") && !is_name(P, "or") && !is_name(P, "and") && !is_name(P, "if") &&
               !is_name(P, "in") && !is_name(P, "is") && !is_name(P, "not")) {
        /* one argument without parentheses: "is divisibleby 3", "is sameas none" */
        jnode *arg = parse_primary(P);
        if (!arg) return NULL;
        int cap = 0;
        if (push(P, &n->items, arg, &cap)) return NULL;
    }
    return n;
}

static jnode *parse_subscript(parser *P, jnode *obj, jtok *at) {
    /* obj[ ... ]: an index, or a slice start:stop:step */
    jnode *parts[3] = {NULL, NULL, NULL};
    int k = 0, is_slice = 0;
    for (;;) {
        if (is_op(P, ":")) {
            if (++k > 2) return fail_tok(P, "a slice has at most two ':'"), NULL;
            is_slice = 1;
            P->i++;
            continue;
        }
        if (is_op(P, "]")) break;
        if (parts[k]) return fail_tok(P, "expected ']'"), NULL;
        if (!(parts[k] = parse_expr(P))) return NULL;
    }
    P->i++;
    jnode *n = node(P, is_slice ? N_SLICE : N_ITEM, at);
    if (!n) return NULL;
    n->a = obj;
    if (is_slice) {
        n->b = parts[0], n->c = parts[1], n->d = parts[2];
    } else {
        if (!parts[0]) return jx_error_at(P->e, at->line, at->col, "an empty subscript"), NULL;
        n->b = parts[0];
    }
    return n;
}

static jnode *parse_postfix(parser *P, jnode *n) {
    for (;;) {
        jtok *at = cur(P);
        if (is_op(P, ".")) {
            P->i++;
            jtok *t = cur(P);
            jnode *a;
            if (t->kind == T_NAME) {
                if (!(a = node(P, N_ATTR, at))) return NULL;
                a->name = t->str;
            } else if (t->kind == T_INT) { /* x.0 is x[0] */
                if (!(a = node(P, N_ITEM, at))) return NULL;
                if (!(a->b = node(P, N_CONST, t))) return NULL;
                a->b->value = jv_int(t->i);
            } else {
                return fail_tok(P, "expected an attribute name after '.'"), NULL;
            }
            a->a = n;
            P->i++;
            n = a;
        } else if (is_op(P, "[")) {
            P->i++;
            if (!(n = parse_subscript(P, n, at))) return NULL;
        } else if (is_op(P, "(")) {
            jnode *c = node(P, N_CALL, at);
            if (!c) return NULL;
            c->a = n;
            if (parse_call_args(P, c)) return NULL;
            n = c;
        } else {
            return n;
        }
    }
}

static jnode *parse_filter_expr(parser *P, jnode *n) {
    for (;;) {
        if (is_op(P, "|")) {
            P->i++;
            if (!(n = parse_filter(P, n))) return NULL;
        } else if (is_name(P, "is")) {
            P->i++;
            if (!(n = parse_test(P, n))) return NULL;
        } else if (is_op(P, "(")) {
            jnode *c = node(P, N_CALL, cur(P));
            if (!c) return NULL;
            c->a = n;
            if (parse_call_args(P, c)) return NULL;
            n = c;
        } else {
            return n;
        }
    }
}

/* items of a [list], (tuple) or {dict} up to the closing bracket */
static jnode *parse_collection(parser *P, jtok *at, int kind, const char *close) {
    jnode *n = node(P, kind, at);
    if (!n) return NULL;
    int cap1 = 0, cap2 = 0;
    while (!is_op(P, close)) {
        if (n->items.n && expect_op(P, ",")) return NULL;
        if (is_op(P, close)) break;
        jnode *v = parse_expr(P);
        if (!v || push(P, &n->items, v, &cap1)) return NULL;
        if (kind == N_DICT) {
            if (expect_op(P, ":")) return NULL;
            if (!(v = parse_expr(P)) || push(P, &n->items2, v, &cap2)) return NULL;
        }
    }
    P->i++;
    return n;
}

static jnode *parse_primary(parser *P) {
    jtok *t = cur(P);
    jnode *n;
    if (enter(P)) return NULL;
    switch (t->kind) {
    case T_NAME: {
        const char *s = t->str->s;
        if (!(n = node(P, N_CONST, t))) return NULL;
        if (!strcmp(s, "true") || !strcmp(s, "True"))
            n->value = jv_bool(1);
        else if (!strcmp(s, "false") || !strcmp(s, "False"))
            n->value = jv_bool(0);
        else if (!strcmp(s, "none") || !strcmp(s, "None"))
            n->value = jv_none();
        else
            n->kind = N_NAME, n->name = t->str;
        P->i++;
        break;
    }
    case T_STRING: {
        /* adjacent strings join: "a" "b" */
        jx_buf b = {0};
        while (cur(P)->kind == T_STRING) {
            if (jx_buf_put(P->e, &b, cur(P)->str->s, cur(P)->str->len)) return NULL;
            P->i++;
        }
        if (!(n = node(P, N_CONST, t))) return NULL;
        jstr *s = jx_buf_take(P->e, &b);
        if (!s) return NULL;
        n->value = jv_strv(s);
        break;
    }
    case T_INT:
    case T_FLOAT:
        if (!(n = node(P, N_CONST, t))) return NULL;
        n->value = t->kind == T_INT ? jv_int(t->i) : jv_float(t->f);
        P->i++;
        break;
    case T_OP:
        if (is_op(P, "(")) {
            P->i++;
            if (is_op(P, ")")) { /* the empty tuple */
                P->i++;
                if (!(n = node(P, N_TUPLE, t))) return NULL;
                break;
            }
            jnode *first = parse_expr(P);
            if (!first) return NULL;
            if (is_op(P, ")")) {
                P->i++;
                n = first;
                break;
            }
            /* a tuple: (a, b, ...) */
            if (!(n = node(P, N_TUPLE, t))) return NULL;
            int cap = 0;
            if (push(P, &n->items, first, &cap)) return NULL;
            while (!is_op(P, ")")) {
                if (expect_op(P, ",")) return NULL;
                if (is_op(P, ")")) break;
                jnode *v = parse_expr(P);
                if (!v || push(P, &n->items, v, &cap)) return NULL;
            }
            P->i++;
            break;
        }
        if (is_op(P, "[")) {
            P->i++;
            if (!(n = parse_collection(P, t, N_LIST, "]"))) return NULL;
            break;
        }
        if (is_op(P, "{")) {
            P->i++;
            if (!(n = parse_collection(P, t, N_DICT, "}"))) return NULL;
            break;
        }
        return fail_tok(P, "unexpected token"), NULL;
    default: return fail_tok(P, "expected an expression"), NULL;
    }
    n = parse_postfix(P, n);
    leave(P);
    return n;
}

static jnode *parse_unary(parser *P, int with_filter) {
    jtok *t = cur(P);
    jnode *n;
    if (enter(P)) return NULL;
    if (is_op(P, "-") || is_op(P, "+")) {
        P->i++;
        if (!(n = node(P, t->op[0] == '-' ? N_NEG : N_POS, t))) return NULL;
        if (!(n->a = parse_unary(P, 0))) return NULL;
    } else {
        if (!(n = parse_primary(P))) return NULL;
    }
    if (with_filter) n = parse_filter_expr(P, n);
    leave(P);
    return n;
}

static jnode *binary(parser *P, jtok *at, int op, jnode *a, jnode *b) {
    if (!a || !b) return NULL;
    jnode *n = node(P, N_BIN, at);
    if (!n) return NULL;
    n->op = (uint8_t)op;
    n->a = a;
    n->b = b;
    return n;
}

static jnode *parse_pow(parser *P) {
    jnode *n = parse_unary(P, 1);
    while (n && is_op(P, "**")) {
        jtok *at = cur(P);
        P->i++;
        n = binary(P, at, OP_POW, n, parse_unary(P, 1));
    }
    return n;
}

static jnode *parse_math2(parser *P) {
    jnode *n = parse_pow(P);
    for (;;) {
        int op = is_op(P, "*")    ? OP_MUL
                 : is_op(P, "/")  ? OP_DIV
                 : is_op(P, "//") ? OP_FLOORDIV
                 : is_op(P, "%")  ? OP_MOD
                                  : -1;
        if (!n || op < 0) return n;
        jtok *at = cur(P);
        P->i++;
        n = binary(P, at, op, n, parse_pow(P));
    }
}

static jnode *parse_concat(parser *P) {
    jnode *n = parse_math2(P);
    if (!n || !is_op(P, "~")) return n;
    jnode *c = node(P, N_CONCAT, cur(P));
    if (!c) return NULL;
    int cap = 0;
    if (push(P, &c->items, n, &cap)) return NULL;
    while (is_op(P, "~")) {
        P->i++;
        jnode *v = parse_math2(P);
        if (!v || push(P, &c->items, v, &cap)) return NULL;
    }
    return c;
}

static jnode *parse_math1(parser *P) {
    jnode *n = parse_concat(P);
    for (;;) {
        int op = is_op(P, "+") ? OP_ADD : is_op(P, "-") ? OP_SUB : -1;
        if (!n || op < 0) return n;
        jtok *at = cur(P);
        P->i++;
        n = binary(P, at, op, n, parse_concat(P));
    }
}

static jnode *parse_compare(parser *P) {
    jnode *first = parse_math1(P);
    if (!first) return NULL;
    jnode *c = NULL;
    int cap = 0;
    size_t ops_cap = 0;
    for (;;) {
        int op;
        jtok *at = cur(P);
        if (is_op(P, "=="))
            op = OP_EQ;
        else if (is_op(P, "!="))
            op = OP_NE;
        else if (is_op(P, "<"))
            op = OP_LT;
        else if (is_op(P, "<="))
            op = OP_LE;
        else if (is_op(P, ">"))
            op = OP_GT;
        else if (is_op(P, ">="))
            op = OP_GE;
        else if (is_name(P, "in"))
            op = OP_IN;
        else if (is_name(P, "not") && peek(P, 1)->kind == T_NAME && !strcmp(peek(P, 1)->str->s, "in"))
            op = OP_NOTIN;
        else
            break;
        P->i += op == OP_NOTIN ? 2 : 1;
        if (!c) {
            if (!(c = node(P, N_COMPARE, at)) || push(P, &c->items, first, &cap)) return NULL;
        }
        jnode *v = parse_math1(P);
        if (!v || push(P, &c->items, v, &cap)) return NULL;
        if ((size_t)c->items.n - 1 > ops_cap) {
            size_t nc = ops_cap ? ops_cap * 2 : 4;
            uint8_t *no = jx_grow(P->e, c->ops, ops_cap, nc);
            if (!no) return NULL;
            c->ops = no;
            ops_cap = nc;
        }
        c->ops[c->items.n - 2] = (uint8_t)op;
    }
    return c ? c : first;
}

static jnode *parse_not(parser *P) {
    if (is_name(P, "not")) {
        jtok *at = cur(P);
        P->i++;
        if (enter(P)) return NULL;
        jnode *n = node(P, N_NOT, at);
        if (!n || !(n->a = parse_not(P))) return NULL;
        leave(P);
        return n;
    }
    return parse_compare(P);
}

static jnode *parse_and(parser *P) {
    jnode *n = parse_not(P);
    while (n && is_name(P, "and")) {
        jnode *a = node(P, N_AND, cur(P));
        P->i++;
        if (!a) return NULL;
        a->a = n;
        if (!(a->b = parse_not(P))) return NULL;
        n = a;
    }
    return n;
}

static jnode *parse_or(parser *P) {
    jnode *n = parse_and(P);
    while (n && is_name(P, "or")) {
        jnode *o = node(P, N_OR, cur(P));
        P->i++;
        if (!o) return NULL;
        o->a = n;
        if (!(o->b = parse_and(P))) return NULL;
        n = o;
    }
    return n;
}

/* a full expression: "x if cond else y" included */
static jnode *parse_expr(parser *P) {
    if (enter(P)) return NULL;
    jnode *n = parse_or(P);
    while (n && is_name(P, "if")) {
        jnode *c = node(P, N_COND, cur(P));
        P->i++;
        if (!c) return NULL;
        c->b = n;
        if (!(c->a = parse_or(P))) return NULL;
        if (is_name(P, "else")) {
            P->i++;
            if (!(c->c = parse_expr(P))) return NULL;
        }
        n = c;
    }
    leave(P);
    return n;
}

/* an expression that may be a tuple without parentheses: "a, b" */
static jnode *parse_tuple_expr(parser *P, int with_cond) {
    jtok *at = cur(P);
    jnode *n = with_cond ? parse_expr(P) : parse_or(P);
    if (!n || !is_op(P, ",")) return n;
    jnode *t = node(P, N_TUPLE, at);
    if (!t) return NULL;
    int cap = 0;
    if (push(P, &t->items, n, &cap)) return NULL;
    while (is_op(P, ",")) {
        P->i++;
        if (cur(P)->kind == T_BLOCK_END || cur(P)->kind == T_VAR_END || is_name(P, "in")) break;
        jnode *v = with_cond ? parse_expr(P) : parse_or(P);
        if (!v || push(P, &t->items, v, &cap)) return NULL;
    }
    return t;
}

/* ---- statements ------------------------------------------------------------ */

static int parse_body(parser *P, jnodes *body, const char *const *ends, const char **which);

/* names of a for target or a set target tuple: a[, b ...] */
static int parse_names(parser *P, jnode *n) {
    int cap = 0;
    for (;;) {
        if (cur(P)->kind != T_NAME) return fail_tok(P, "expected a name");
        if (n->n_names == cap) {
            int nc = cap ? cap * 2 : 2;
            jstr **nv = jx_grow(P->e, n->names, (size_t)cap * sizeof *nv, (size_t)nc * sizeof *nv);
            if (!nv) return -1;
            n->names = nv;
            cap = nc;
        }
        n->names[n->n_names++] = cur(P)->str;
        P->i++;
        if (!is_op(P, ",")) return 0;
        P->i++;
    }
}

static jnode *parse_if(parser *P, jtok *at) {
    jnode *n = node(P, N_IF, at);
    if (!n || !(n->a = parse_tuple_expr(P, 0)) || expect_end(P)) return NULL;
    static const char *const ends[] = {"elif", "else", "endif", NULL};
    const char *which;
    if (parse_body(P, &n->body, ends, &which)) return NULL;
    if (!strcmp(which, "elif")) {
        jtok *et = cur(P);
        P->i++;
        jnode *e = parse_if(P, et);
        int cap = 0;
        if (!e || push(P, &n->body2, e, &cap)) return NULL;
        return n; /* the nested if consumed endif */
    }
    P->i++;
    if (!strcmp(which, "else")) {
        if (expect_end(P)) return NULL;
        static const char *const ends2[] = {"endif", NULL};
        if (parse_body(P, &n->body2, ends2, &which)) return NULL;
        P->i++;
    }
    return expect_end(P) ? NULL : n;
}

static jnode *parse_for(parser *P, jtok *at) {
    jnode *n = node(P, N_FOR, at);
    if (!n || parse_names(P, n)) return NULL;
    if (!is_name(P, "in")) return fail_tok(P, "expected 'in' in a for loop"), NULL;
    P->i++;
    if (!(n->a = parse_tuple_expr(P, 0))) return NULL;
    if (is_name(P, "if")) {
        P->i++;
        if (!(n->b = parse_expr(P))) return NULL;
    }
    if (is_name(P, "recursive")) return fail_tok(P, "recursive for loops are not supported"), NULL;
    if (expect_end(P)) return NULL;
    static const char *const ends[] = {"else", "endfor", NULL};
    const char *which;
    if (parse_body(P, &n->body, ends, &which)) return NULL;
    P->i++;
    if (!strcmp(which, "else")) {
        if (expect_end(P)) return NULL;
        static const char *const ends2[] = {"endfor", NULL};
        if (parse_body(P, &n->body2, ends2, &which)) return NULL;
        P->i++;
    }
    return expect_end(P) ? NULL : n;
}

/* a chain of filters applied to the block's text: "| trim | upper" (the first '|' already consumed or not) */
static jnode *parse_filter_chain(parser *P) {
    jnode *f = NULL;
    do {
        if (is_op(P, "|")) P->i++;
        if (!(f = parse_filter(P, f))) return NULL;
    } while (is_op(P, "|"));
    return f;
}

static jnode *parse_set(parser *P, jtok *at) {
    jnode *n = node(P, N_SET, at);
    if (!n) return NULL;
    jtok *t = cur(P);
    if (t->kind != T_NAME) return fail_tok(P, "expected a name after 'set'"), NULL;
    if (peek(P, 1)->kind == T_OP && !strcmp(peek(P, 1)->op, ".")) {
        /* ns.attr = value */
        if (!(n->a = node(P, N_ATTR, t)) || !(n->a->a = node(P, N_NAME, t))) return NULL;
        n->a->a->name = t->str;
        P->i += 2;
        if (cur(P)->kind != T_NAME) return fail_tok(P, "expected an attribute name"), NULL;
        n->a->name = cur(P)->str;
        P->i++;
    } else {
        if (!(n->a = node(P, N_NAME, t)) || parse_names(P, n->a)) return NULL;
        if (n->a->n_names > 1)
            n->a->kind = N_TUPLE;
        else
            n->a->name = n->a->names[0];
    }
    if (is_op(P, "=")) {
        P->i++;
        if (!(n->b = parse_tuple_expr(P, 1)) || expect_end(P)) return NULL;
        return n;
    }
    /* {% set x %}...{% endset %}, perhaps filtered */
    n->kind = N_SETBLOCK;
    if (n->a->kind == N_TUPLE) return fail_tok(P, "a block set assigns one name"), NULL;
    if (is_op(P, "|") && !(n->b = parse_filter_chain(P))) return NULL;
    if (expect_end(P)) return NULL;
    static const char *const ends[] = {"endset", NULL};
    const char *which;
    if (parse_body(P, &n->body, ends, &which)) return NULL;
    P->i++;
    return expect_end(P) ? NULL : n;
}

/* (a, b=default, ...) of a macro or a call block's caller */
static int parse_params(parser *P, jnode *n) {
    if (expect_op(P, "(")) return -1;
    int cap = 0, capn = 0;
    while (!is_op(P, ")")) {
        if (n->n_names && expect_op(P, ",")) return -1;
        if (is_op(P, ")")) break;
        if (cur(P)->kind != T_NAME) return fail_tok(P, "expected a parameter name");
        if (n->n_names == capn) {
            int nc = capn ? capn * 2 : 4;
            jstr **nv = jx_grow(P->e, n->names, (size_t)capn * sizeof *nv, (size_t)nc * sizeof *nv);
            if (!nv) return -1;
            n->names = nv;
            capn = nc;
        }
        n->names[n->n_names++] = cur(P)->str;
        P->i++;
        jnode *def = NULL;
        if (is_op(P, "=")) {
            P->i++;
            if (!(def = parse_expr(P))) return -1;
        } else if (n->items2.n && n->items2.v[n->items2.n - 1]) {
            return fail_tok(P, "a parameter without a default after one with a default");
        }
        if (push(P, &n->items2, def, &cap)) return -1;
    }
    P->i++;
    return 0;
}

static jnode *parse_macro(parser *P, jtok *at) {
    jnode *n = node(P, N_MACRO, at);
    if (!n) return NULL;
    if (cur(P)->kind != T_NAME) return fail_tok(P, "expected a macro name"), NULL;
    n->name = cur(P)->str;
    P->i++;
    if (parse_params(P, n) || expect_end(P)) return NULL;
    static const char *const ends[] = {"endmacro", NULL};
    const char *which;
    if (parse_body(P, &n->body, ends, &which)) return NULL;
    P->i++;
    if (cur(P)->kind == T_NAME) P->i++; /* {% endmacro name %} */
    return expect_end(P) ? NULL : n;
}

static jnode *parse_callblock(parser *P, jtok *at) {
    jnode *n = node(P, N_CALLBLOCK, at);
    if (!n) return NULL;
    if (is_op(P, "(") && parse_params(P, n)) return NULL;
    if (!(n->a = parse_expr(P))) return NULL;
    if (n->a->kind != N_CALL) return jx_error_at(P->e, at->line, at->col, "a call block needs a call"), NULL;
    if (expect_end(P)) return NULL;
    static const char *const ends[] = {"endcall", NULL};
    const char *which;
    if (parse_body(P, &n->body, ends, &which)) return NULL;
    P->i++;
    return expect_end(P) ? NULL : n;
}

static jnode *parse_statement(parser *P) {
    jtok *at = cur(P); /* the '{%' */
    P->i++;
    jtok *t = cur(P);
    if (t->kind != T_NAME) return fail_tok(P, "expected a statement name"), NULL;
    const char *s = t->str->s;
    P->i++;
    if (!strcmp(s, "if")) return parse_if(P, at);
    if (!strcmp(s, "for")) return parse_for(P, at);
    if (!strcmp(s, "set")) return parse_set(P, at);
    if (!strcmp(s, "macro")) return parse_macro(P, at);
    if (!strcmp(s, "call")) return parse_callblock(P, at);
    if (!strcmp(s, "break") || !strcmp(s, "continue")) {
        jnode *n = node(P, s[0] == 'b' ? N_BREAK : N_CONTINUE, at);
        return n && !expect_end(P) ? n : NULL;
    }
    const char *which;
    if (!strcmp(s, "filter")) {
        jnode *n = node(P, N_FILTERBLOCK, at);
        if (!n || !(n->b = parse_filter_chain(P)) || expect_end(P)) return NULL;
        static const char *const ends[] = {"endfilter", NULL};
        if (parse_body(P, &n->body, ends, &which)) return NULL;
        P->i++;
        return expect_end(P) ? NULL : n;
    }
    if (!strcmp(s, "with")) {
        jnode *n = node(P, N_WITH, at);
        if (!n) return NULL;
        int cap = 0, capn = 0;
        while (cur(P)->kind != T_BLOCK_END) {
            if (n->n_names && expect_op(P, ",")) return NULL;
            if (cur(P)->kind != T_NAME) return fail_tok(P, "expected a name"), NULL;
            if (n->n_names == capn) {
                int nc = capn ? capn * 2 : 4;
                jstr **nv = jx_grow(P->e, n->names, (size_t)capn * sizeof *nv, (size_t)nc * sizeof *nv);
                if (!nv) return NULL;
                n->names = nv;
                capn = nc;
            }
            n->names[n->n_names++] = cur(P)->str;
            P->i++;
            jnode *v;
            if (expect_op(P, "=") || !(v = parse_expr(P)) || push(P, &n->items, v, &cap)) return NULL;
        }
        P->i++;
        static const char *const ends[] = {"endwith", NULL};
        if (parse_body(P, &n->body, ends, &which)) return NULL;
        P->i++;
        return expect_end(P) ? NULL : n;
    }
    if (!strcmp(s, "generation")) { /* HF's marker of the assistant's text: its body */
        jnode *n = node(P, N_WITH, at);
        if (!n || expect_end(P)) return NULL;
        static const char *const ends[] = {"endgeneration", NULL};
        if (parse_body(P, &n->body, ends, &which)) return NULL;
        P->i++;
        return expect_end(P) ? NULL : n;
    }
    if (!strcmp(s, "include") || !strcmp(s, "import") || !strcmp(s, "from") || !strcmp(s, "extends") ||
        !strcmp(s, "block"))
        return jx_error_at(P->e, t->line, t->col, "'%s' is not supported: a chat template cannot load other templates",
                           s),
               NULL;
    return jx_error_at(P->e, t->line, t->col, "unknown or misplaced tag '%.60s'", s), NULL;
}

/* Statements until a block tag named in ends (left at its name, *which set) or, with ends NULL, the end. */
static int parse_body(parser *P, jnodes *body, const char *const *ends, const char **which) {
    int cap = 0;
    jtok *start = cur(P);
    if (enter(P)) return -1;
    for (;;) {
        jtok *t = cur(P);
        jnode *n = NULL;
        if (t->kind == T_EOF) {
            if (!ends) break;
            int last = 0;
            while (ends[last + 1])
                last++;
            return jx_error_at(P->e, start->line, start->col, "unexpected end of template: '%s' expected", ends[last]);
        }
        if (t->kind == T_TEXT) {
            if (!(n = node(P, N_TEXT, t))) return -1;
            n->value = jv_strv(t->str);
            P->i++;
        } else if (t->kind == T_VAR_BEGIN) {
            P->i++;
            if (!(n = node(P, N_OUTPUT, t)) || !(n->a = parse_tuple_expr(P, 1))) return -1;
            if (cur(P)->kind != T_VAR_END) return fail_tok(P, "expected '}}'");
            P->i++;
        } else if (t->kind == T_BLOCK_BEGIN) {
            jtok *name = peek(P, 1);
            if (ends && name->kind == T_NAME) {
                for (int k = 0; ends[k]; k++)
                    if (!strcmp(name->str->s, ends[k])) {
                        P->i++;
                        *which = ends[k];
                        leave(P);
                        return 0;
                    }
            }
            if (!(n = parse_statement(P))) return -1;
        } else {
            return fail_tok(P, "unexpected token");
        }
        if (push(P, body, n, &cap)) return -1;
        if (jx_step(P->e, 1)) return -1;
    }
    leave(P);
    return 0;
}

int jx_parse(jinja_env *e, const char *src, size_t len, jnodes *out) {
    jtoks toks = {0};
    if (jx_lex(e, src, len, &toks)) return -1;
    parser P = {e, toks.v, 0, toks.n};
    memset(out, 0, sizeof *out);
    int depth0 = e->depth;
    int r = parse_body(&P, out, NULL, NULL);
    e->depth = depth0;
    return r;
}
