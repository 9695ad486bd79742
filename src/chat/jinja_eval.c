/*
 * jinja_eval.c - running a parsed template: statements write into a buffer,
 * expressions compute values, with Jinja's scoping:
 *
 *   - the template's top level is one scope over the variables given;
 *   - each turn of a for loop has a fresh scope (a set inside a loop is gone
 *     after it: that is why templates use namespace()); if has none;
 *   - a macro runs in a scope of its own over the scope it was defined in
 *     (so it sees top-level variables as they are when it is called, not the
 *     caller's loop variables); a call block's caller() runs over the scope
 *     of the call block.
 *
 * Budgets: every node evaluated is a step, every nesting a level of depth;
 * break/continue travel up as a flag (e->loop_ctl) to their loop.
 */
#include "chat/jinja_impl.h"

#include <math.h>
#include <string.h>

static jscope *scope_new(jinja_env *e, jscope *parent) {
    jscope *s = jx_alloc(e, sizeof *s);
    if (!s) return NULL;
    s->parent = parent;
    s->vars = jx_dict(e, 2);
    return s->vars ? s : NULL;
}

/* A name in the scope chain: *out its slot, NULL when unset. */
static int lookup(jinja_env *e, jscope *s, const char *name, size_t len, jv **out) {
    *out = NULL;
    for (; s && !*out; s = s->parent)
        if (jx_dict_gets(e, s->vars, name, len, out)) return -1;
    return 0;
}

static int set_name(jinja_env *e, jscope *s, jstr *name, jv v) { return jx_dict_set(e, s->vars, jv_strv(name), v); }

/* ---- arithmetic ------------------------------------------------------------ */

static int type_error(jinja_env *e, const char *op, jv a, jv b) {
    if (a.t == JV_UNDEF) return jx_undef_error(e, a);
    if (b.t == JV_UNDEF) return jx_undef_error(e, b);
    return jx_error(e, "unsupported operand type(s) for %s: '%s' and '%s'", op, jx_type_name(a), jx_type_name(b));
}

static int repeat(jinja_env *e, jv seq, int64_t times, jv *out) {
    /* nothing to repeat makes nothing, however many times (and takes no time: '' * 10**18) */
    if (times < 0 || (seq.t == JV_STR ? seq.u.s->len : seq.u.l->n) == 0) times = 0;
    if (seq.t == JV_STR) {
        size_t n = seq.u.s->len;
        if (n && (uint64_t)times > e->lim.max_output / n)
            return jx_error(e, "a string of %zu x %lld bytes is over the limit of %zu", n, (long long)times,
                            e->lim.max_output);
        jx_buf b = {0};
        for (int64_t i = 0; i < times; i++)
            if (jx_buf_put(e, &b, seq.u.s->s, n)) return -1;
        if (jx_step(e, (uint64_t)times * n / 256)) return -1;
        jstr *s = jx_buf_take(e, &b);
        if (!s) return -1;
        *out = jv_strv(s);
        out->safe = seq.safe;
        return 0;
    }
    size_t n = seq.u.l->n;
    if (n && (uint64_t)times > e->lim.max_memory / sizeof(jv) / n)
        return jx_error(e, "a list of %zu x %lld items is over the memory budget", n, (long long)times);
    jlist *l = jx_list(e, n * (size_t)times);
    if (!l) return -1;
    if (jx_step(e, (uint64_t)times * n)) return -1;
    for (int64_t i = 0; i < times; i++)
        for (size_t k = 0; k < n; k++)
            l->v[l->n++] = seq.u.l->v[k];
    l->tuple = seq.u.l->tuple;
    *out = jv_listv(l);
    return 0;
}

static int arith(jinja_env *e, int op, jv a, jv b, jv *out) {
    static const char *names[] = {"+", "-", "*", "/", "//", "%", "**"};
    if (jx_is_number(a) && jx_is_number(b)) {
        int ints = a.t != JV_FLOAT && b.t != JV_FLOAT;
        int64_t x = a.u.i, y = b.u.i, r;
        double fx = jx_num(a), fy = jx_num(b);
        switch (op) {
        case OP_ADD:
            if (ints) {
                if (__builtin_add_overflow(x, y, &r)) break;
                *out = jv_int(r);
                return 0;
            }
            *out = jv_float(fx + fy);
            return 0;
        case OP_SUB:
            if (ints) {
                if (__builtin_sub_overflow(x, y, &r)) break;
                *out = jv_int(r);
                return 0;
            }
            *out = jv_float(fx - fy);
            return 0;
        case OP_MUL:
            if (ints) {
                if (__builtin_mul_overflow(x, y, &r)) break;
                *out = jv_int(r);
                return 0;
            }
            *out = jv_float(fx * fy);
            return 0;
        case OP_DIV:
            if (fy == 0) return jx_error(e, "division by zero");
            *out = jv_float(fx / fy);
            return 0;
        case OP_FLOORDIV:
        case OP_MOD:
            if (ints) {
                if (y == 0) return jx_error(e, "integer division or modulo by zero");
                if (x == INT64_MIN && y == -1) break;
                int64_t q = x / y, m = x % y;
                if (m != 0 && ((m < 0) != (y < 0))) q--, m += y;
                *out = jv_int(op == OP_FLOORDIV ? q : m);
                return 0;
            }
            if (fy == 0) return jx_error(e, "float division by zero");
            {
                double m = fmod(fx, fy);
                if (m != 0 && ((m < 0) != (fy < 0))) m += fy;
                *out = jv_float(op == OP_MOD ? m : floor(fx / fy));
            }
            return 0;
        case OP_POW:
            if (ints && y >= 0) {
                int64_t acc = 1, base = x;
                int64_t k = y;
                int over = 0;
                while (k > 0 && !over) {
                    if (k & 1) over |= __builtin_mul_overflow(acc, base, &acc);
                    k >>= 1;
                    if (k) over |= __builtin_mul_overflow(base, base, &base);
                }
                if (over) break;
                *out = jv_int(acc);
                return 0;
            }
            if (fx == 0 && fy < 0) return jx_error(e, "0.0 cannot be raised to a negative power");
            *out = jv_float(pow(fx, fy));
            return 0;
        }
        return jx_error(e, "integer overflow in '%s'", names[op]);
    }
    if (op == OP_ADD) {
        if (a.t == JV_STR && b.t == JV_STR) {
            /* Markup + str escapes the str (HF's templates meet this through "..."|safe + text) */
            int safe = a.safe || b.safe;
            if (safe && (jx_escape(e, a, &a) || jx_escape(e, b, &b))) return -1;
            jx_buf buf = {0};
            if (jx_buf_put(e, &buf, a.u.s->s, a.u.s->len) || jx_buf_put(e, &buf, b.u.s->s, b.u.s->len)) return -1;
            if (jx_step(e, (a.u.s->len + b.u.s->len) / 256)) return -1;
            jstr *s = jx_buf_take(e, &buf);
            if (!s) return -1;
            *out = jv_strv(s);
            out->safe = (uint8_t)safe;
            return 0;
        }
        if (a.t == JV_LIST && b.t == JV_LIST && a.u.l->tuple == b.u.l->tuple) {
            jlist *l = jx_list(e, a.u.l->n + b.u.l->n);
            if (!l || jx_step(e, l->cap)) return -1;
            memcpy(l->v, a.u.l->v, a.u.l->n * sizeof(jv));
            memcpy(l->v + a.u.l->n, b.u.l->v, b.u.l->n * sizeof(jv));
            l->n = a.u.l->n + b.u.l->n;
            l->tuple = a.u.l->tuple;
            *out = jv_listv(l);
            return 0;
        }
    }
    if (op == OP_MUL) {
        if ((a.t == JV_STR || a.t == JV_LIST) && (b.t == JV_INT || b.t == JV_BOOL)) return repeat(e, a, b.u.i, out);
        if ((b.t == JV_STR || b.t == JV_LIST) && (a.t == JV_INT || a.t == JV_BOOL)) return repeat(e, b, a.u.i, out);
    }
    return type_error(e, names[op], a, b);
}

/* ---- membership and comparison ------------------------------------------- */

static int contains(jinja_env *e, jv hay, jv needle, int *out) {
    switch (hay.t) {
    case JV_STR:
        if (needle.t != JV_STR) {
            if (needle.t == JV_UNDEF) return jx_undef_error(e, needle);
            return jx_error(e, "'in <string>' requires string as left operand, not %s", jx_type_name(needle));
        }
        if (jx_step(e, hay.u.s->len / 64)) return -1;
        *out = needle.u.s->len == 0 || memmem(hay.u.s->s, hay.u.s->len, needle.u.s->s, needle.u.s->len) != NULL;
        return 0;
    case JV_LIST:
        *out = 0;
        for (size_t i = 0; i < hay.u.l->n && !*out; i++)
            if (jx_step(e, 1) || jx_equal(e, hay.u.l->v[i], needle, out)) return -1;
        return 0;
    case JV_DICT: {
        jv *v;
        if (jx_dict_get(e, hay.u.d, needle, &v)) return -1;
        *out = v != NULL;
        return 0;
    }
    case JV_UNDEF: *out = 0; return 0;
    default: return jx_error(e, "argument of type '%s' is not iterable", jx_type_name(hay));
    }
}

static int compare(jinja_env *e, int op, jv a, jv b, int *out) {
    int c;
    switch (op) {
    case OP_EQ: return jx_equal(e, a, b, out);
    case OP_NE:
        if (jx_equal(e, a, b, out)) return -1;
        *out = !*out;
        return 0;
    case OP_IN:
    case OP_NOTIN:
        if (contains(e, b, a, out)) return -1;
        if (op == OP_NOTIN) *out = !*out;
        return 0;
    default:
        if (jx_compare(e, a, b, &c)) return -1;
        *out = op == OP_LT ? c < 0 : op == OP_LE ? c <= 0 : op == OP_GT ? c > 0 : c >= 0;
        return 0;
    }
}

/* ---- calls ------------------------------------------------------------------ */

jv jx_arg(const jargs *a, int pos, const char *name, jv def) {
    if (name)
        for (int i = 0; i < a->n_kw; i++)
            if (!strcmp(a->kw_names[i]->s, name)) return a->kw[i];
    if (pos >= 0 && pos < a->n_pos) return a->pos[pos];
    return def;
}

int jx_check_args(jinja_env *e, const jargs *a, const char *what, int max_pos, const char *const *kw_names) {
    if (a->n_pos > max_pos)
        return jx_error(e, "%s takes at most %d positional argument(s), %d given", what, max_pos, a->n_pos);
    for (int i = 0; i < a->n_kw; i++) {
        int ok = 0;
        for (int k = 0; kw_names && kw_names[k] && !ok; k++)
            ok = !strcmp(kw_names[k], a->kw_names[i]->s);
        if (!ok) return jx_error(e, "%s got an unexpected keyword argument '%.60s'", what, a->kw_names[i]->s);
    }
    return 0;
}

static int eval_args(jinja_env *e, const jnode *n, jscope *s, jargs *a) {
    memset(a, 0, sizeof *a);
    a->n_pos = n->items.n;
    a->n_kw = n->items2.n;
    if (a->n_pos && !(a->pos = jx_alloc(e, (size_t)a->n_pos * sizeof(jv)))) return -1;
    if (a->n_kw && !(a->kw = jx_alloc(e, (size_t)a->n_kw * sizeof(jv)))) return -1;
    a->kw_names = n->names;
    for (int i = 0; i < a->n_pos; i++)
        if (jx_eval(e, n->items.v[i], s, &a->pos[i])) return -1;
    for (int i = 0; i < a->n_kw; i++)
        if (jx_eval(e, n->items2.v[i], s, &a->kw[i])) return -1;
    return 0;
}

/* Runs a macro (or a call block's caller) with its arguments; caller: the caller() to bind, or NULL. */
static int call_macro(jinja_env *e, const jfunc *fn, const jargs *args, jfunc *caller, jv *out) {
    const jnode *m = fn->node;
    jscope *s = scope_new(e, fn->scope);
    if (!s) return -1;
    int np = m->n_names;
    jlist *varargs = jx_list(e, 0);
    jdict *kwargs = jx_dict(e, 0);
    if (!varargs || !kwargs) return -1;
    varargs->tuple = 1;
    jv *bound = np ? jx_alloc(e, (size_t)np * sizeof(jv)) : NULL;
    if (np && !bound) return -1;
    for (int i = 0; i < np; i++)
        bound[i].t = 0xff; /* not given */
    for (int i = 0; i < args->n_pos; i++) {
        if (i < np)
            bound[i] = args->pos[i];
        else if (jx_list_push(e, varargs, args->pos[i]))
            return -1;
    }
    /* keywords matched to parameters by name: both lists as long as the template makes them */
    if (jx_step(e, (uint64_t)args->n_kw * (uint64_t)np / 16)) return -1;
    for (int k = 0; k < args->n_kw; k++) {
        int found = 0;
        for (int i = 0; i < np && !found; i++)
            if (!strcmp(m->names[i]->s, args->kw_names[k]->s)) {
                bound[i] = args->kw[k];
                found = 1;
            }
        if (!found && jx_dict_set(e, kwargs, jv_strv(args->kw_names[k]), args->kw[k])) return -1;
    }
    for (int i = 0; i < np; i++) {
        jv v = bound[i];
        if (v.t == 0xff) {
            if (m->items2.v && m->items2.v[i]) {
                if (jx_eval(e, m->items2.v[i], s, &v)) return -1;
            } else {
                v = jx_undef_name(e, m->names[i]->s, m->names[i]->len);
            }
        }
        if (set_name(e, s, m->names[i], v)) return -1;
    }
    if (jx_dict_sets(e, s->vars, "varargs", jv_listv(varargs)) || jx_dict_sets(e, s->vars, "kwargs", jv_dictv(kwargs)))
        return -1;
    if (caller) {
        jv c = {.t = JV_FUNC, .u = {.fn = caller}};
        if (jx_dict_sets(e, s->vars, "caller", c)) return -1;
    }
    jx_buf b = {0};
    int saved_ctl = e->loop_ctl;
    if (jx_exec(e, &m->body, s, &b)) return -1;
    e->loop_ctl = saved_ctl;
    jstr *r = jx_buf_take(e, &b);
    if (!r) return -1;
    *out = jv_strv(r);
    return 0;
}

int jx_call(jinja_env *e, jv fn, const jargs *args, jscope *s, jv *out) {
    (void)s;
    if (fn.t == JV_UNDEF) return jx_undef_error(e, fn);
    if (fn.t != JV_FUNC) return jx_error(e, "'%s' object is not callable", jx_type_name(fn));
    const jfunc *f = fn.u.fn;
    switch (f->kind) {
    case JF_MACRO:
    case JF_CALLER: return call_macro(e, f, args, NULL, out);
    case JF_BUILTIN: return jx_call_builtin(e, f->name, args, out);
    case JF_METHOD: return jx_call_method(e, f->self, f->name, args, out);
    case JF_CYCLE:
        if (args->n_pos == 0) return jx_error(e, "no items for cycling given");
        *out = args->pos[f->self.u.lp->index0 % args->n_pos];
        return 0;
    }
    return jx_error(e, "not callable");
}

/* ---- expressions ------------------------------------------------------------- */

static int eval_node(jinja_env *e, const jnode *n, jscope *s, jv *out) {
    jv a, b;
    switch (n->kind) {
    case N_CONST: *out = n->value; return 0;
    case N_NAME: {
        jv *v;
        if (lookup(e, s, n->name->s, n->name->len, &v)) return -1;
        if (v)
            *out = *v;
        else if (!jx_builtin(n->name->s, n->name->len, out))
            *out = jx_undef_name(e, n->name->s, n->name->len);
        return 0;
    }
    case N_LIST:
    case N_TUPLE: {
        jlist *l = jx_list(e, (size_t)n->items.n);
        if (!l) return -1;
        l->tuple = n->kind == N_TUPLE;
        for (int i = 0; i < n->items.n; i++)
            if (jx_eval(e, n->items.v[i], s, &l->v[i])) return -1;
        l->n = (size_t)n->items.n;
        *out = jv_listv(l);
        return 0;
    }
    case N_DICT: {
        jdict *d = jx_dict(e, (size_t)n->items.n);
        if (!d) return -1;
        for (int i = 0; i < n->items.n; i++)
            if (jx_eval(e, n->items.v[i], s, &a) || jx_eval(e, n->items2.v[i], s, &b) || jx_dict_set(e, d, a, b))
                return -1;
        *out = jv_dictv(d);
        return 0;
    }
    case N_ATTR:
        if (jx_eval(e, n->a, s, &a)) return -1;
        return jx_getattr(e, a, n->name->s, n->name->len, out);
    case N_ITEM:
        if (jx_eval(e, n->a, s, &a) || jx_eval(e, n->b, s, &b)) return -1;
        return jx_getitem(e, a, b, out);
    case N_SLICE: {
        jv p[3] = {jv_none(), jv_none(), jv_none()};
        const jnode *parts[3] = {n->b, n->c, n->d};
        if (jx_eval(e, n->a, s, &a)) return -1;
        for (int i = 0; i < 3; i++)
            if (parts[i] && jx_eval(e, parts[i], s, &p[i])) return -1;
        return jx_slice(e, a, p[0], p[1], p[2], out);
    }
    case N_CALL: {
        jargs args;
        if (n->a->kind == N_ATTR) {
            /* obj.method(...): no bound-method object for the common case */
            if (jx_eval(e, n->a->a, s, &a)) return -1;
            if (a.t == JV_STR || a.t == JV_LIST || (a.t == JV_DICT && !a.u.d->ns)) {
                if (eval_args(e, n, s, &args)) return -1;
                return jx_call_method(e, a, n->a->name->s, &args, out);
            }
            if (jx_getattr(e, a, n->a->name->s, n->a->name->len, &b)) return -1;
        } else if (jx_eval(e, n->a, s, &b)) {
            return -1;
        }
        if (eval_args(e, n, s, &args)) return -1;
        return jx_call(e, b, &args, s, out);
    }
    case N_FILTER: {
        jargs args;
        if (jx_eval(e, n->a, s, &a) || eval_args(e, n, s, &args)) return -1;
        return jx_filter(e, n->name->s, a, &args, s, out);
    }
    case N_TEST: {
        jargs args;
        int r;
        if (jx_eval(e, n->a, s, &a) || eval_args(e, n, s, &args)) return -1;
        if (jx_test(e, n->name->s, a, &args, s, &r)) return -1;
        *out = jv_bool(n->flag ? !r : r);
        return 0;
    }
    case N_NEG:
    case N_POS:
        if (jx_eval(e, n->a, s, &a)) return -1;
        if (a.t == JV_FLOAT) {
            *out = jv_float(n->kind == N_NEG ? -a.u.f : a.u.f);
            return 0;
        }
        if (a.t == JV_INT || a.t == JV_BOOL) {
            if (n->kind == N_NEG && a.u.i == INT64_MIN) return jx_error(e, "integer overflow in '-'");
            *out = jv_int(n->kind == N_NEG ? -a.u.i : a.u.i);
            return 0;
        }
        if (a.t == JV_UNDEF) return jx_undef_error(e, a);
        return jx_error(e, "bad operand type for unary %c: '%s'", n->kind == N_NEG ? '-' : '+', jx_type_name(a));
    case N_NOT:
        if (jx_eval(e, n->a, s, &a)) return -1;
        *out = jv_bool(!jx_truthy(a));
        return 0;
    case N_AND:
    case N_OR:
        if (jx_eval(e, n->a, s, &a)) return -1;
        if (jx_truthy(a) == (n->kind == N_OR)) {
            *out = a;
            return 0;
        }
        return jx_eval(e, n->b, s, out);
    case N_BIN:
        if (jx_eval(e, n->a, s, &a) || jx_eval(e, n->b, s, &b)) return -1;
        return arith(e, n->op, a, b, out);
    case N_CONCAT: {
        jx_buf buf = {0};
        for (int i = 0; i < n->items.n; i++)
            if (jx_eval(e, n->items.v[i], s, &a) || jx_write_str(e, &buf, a)) return -1;
        jstr *r = jx_buf_take(e, &buf);
        if (!r) return -1;
        *out = jv_strv(r);
        return 0;
    }
    case N_COMPARE: {
        int r = 1;
        if (jx_eval(e, n->items.v[0], s, &a)) return -1;
        for (int i = 1; i < n->items.n && r; i++) {
            if (jx_eval(e, n->items.v[i], s, &b) || compare(e, n->ops[i - 1], a, b, &r)) return -1;
            a = b;
        }
        *out = jv_bool(r);
        return 0;
    }
    case N_COND:
        if (jx_eval(e, n->a, s, &a)) return -1;
        if (jx_truthy(a)) return jx_eval(e, n->b, s, out);
        if (n->c) return jx_eval(e, n->c, s, out);
        *out = jv_undef(jx_cstr(e, "the conditional expression's else part is undefined"));
        return 0;
    default: return jx_error(e, "a statement where an expression should be");
    }
}

int jx_eval(jinja_env *e, const jnode *n, jscope *s, jv *out) {
    if (++e->depth > e->lim.max_depth)
        return jx_error_at(e, n->line, n->col, "the template nests too deeply (limit %d): runaway recursion?",
                           e->lim.max_depth);
    int line = e->line, col = e->col;
    e->line = n->line;
    e->col = n->col;
    int r = jx_step(e, 1) ? -1 : eval_node(e, n, s, out);
    if (r == 0) e->line = line, e->col = col;
    e->depth--;
    return r;
}

/* ---- statements -------------------------------------------------------------- */

static int assign(jinja_env *e, const jnode *target, jscope *s, jv v) {
    if (target->kind == N_NAME) return set_name(e, s, target->name, v);
    if (target->kind == N_ATTR) {
        jv *ns;
        if (lookup(e, s, target->a->name->s, target->a->name->len, &ns)) return -1;
        if (!ns || ns->t != JV_DICT || !ns->u.d->ns)
            return jx_error(e, "cannot assign attribute on non-namespace object");
        return jx_dict_set(e, ns->u.d, jv_strv(target->name), v);
    }
    /* a, b = v */
    jlist *l;
    if (jx_iter_list(e, v, &l)) return -1;
    if (l->n != (size_t)target->n_names)
        return jx_error(e, "%s values to unpack (expected %d, got %zu)",
                        l->n > (size_t)target->n_names ? "too many" : "not enough", target->n_names, l->n);
    for (int i = 0; i < target->n_names; i++)
        if (set_name(e, s, target->names[i], l->v[i])) return -1;
    return 0;
}

static int bind_targets(jinja_env *e, const jnode *n, jscope *s, jv item) {
    if (n->n_names == 1) return set_name(e, s, n->names[0], item);
    jlist *l;
    if (jx_iter_list(e, item, &l)) return -1;
    if (l->n != (size_t)n->n_names)
        return jx_error(e, "%s values to unpack (expected %d, got %zu)",
                        l->n > (size_t)n->n_names ? "too many" : "not enough", n->n_names, l->n);
    for (int i = 0; i < n->n_names; i++)
        if (set_name(e, s, n->names[i], l->v[i])) return -1;
    return 0;
}

static int exec_for(jinja_env *e, const jnode *n, jscope *s, jx_buf *b) {
    jv it;
    jlist *items;
    if (jx_eval(e, n->a, s, &it) || jx_iter_list(e, it, &items)) return -1;
    jscope *turn = scope_new(e, s);
    if (!turn) return -1;
    if (n->b) { /* the loop's "if": items are filtered first, so loop.length counts what is left */
        jlist *kept = jx_list(e, items->n);
        if (!kept) return -1;
        /* the items there at the start, as below: the condition may append to the list (or pop from it) */
        size_t n0 = items->n;
        for (size_t i = 0; i < n0 && i < items->n; i++) {
            jv ok;
            jx_dict_clear(turn->vars);
            if (bind_targets(e, n, turn, items->v[i]) || jx_eval(e, n->b, turn, &ok)) return -1;
            if (jx_truthy(ok) && jx_list_push(e, kept, items->v[i])) return -1;
        }
        items = kept;
    }
    if (items->n == 0) {
        jx_dict_clear(turn->vars);
        return jx_exec(e, &n->body2, turn, b);
    }
    jloop *lp = jx_alloc(e, sizeof *lp);
    if (!lp) return -1;
    lp->items = jv_listv(items);
    lp->length = (int64_t)items->n;
    jv loopv = {.t = JV_LOOP, .u = {.lp = lp}};
    jstr *loop_name = jx_cstr(e, "loop");
    if (!loop_name) return -1;
    /* the items there at the start (the body may append to or pop from the list it walks) */
    size_t n0 = items->n;
    for (size_t i = 0; i < n0 && i < items->n; i++) {
        if (jx_step(e, 1)) return -1;
        jx_dict_clear(turn->vars);
        lp->index0 = (int64_t)i;
        if (jx_dict_set(e, turn->vars, jv_strv(loop_name), loopv) || bind_targets(e, n, turn, items->v[i])) return -1;
        if (jx_exec(e, &n->body, turn, b)) return -1;
        if (e->loop_ctl) {
            int ctl = e->loop_ctl;
            e->loop_ctl = 0;
            if (ctl == 1) break;
        }
    }
    return 0;
}

static int exec_node(jinja_env *e, const jnode *n, jscope *s, jx_buf *b) {
    jv v;
    switch (n->kind) {
    case N_TEXT: return jx_buf_put(e, b, n->value.u.s->s, n->value.u.s->len);
    case N_OUTPUT: return jx_eval(e, n->a, s, &v) || jx_write_str(e, b, v) ? -1 : 0;
    case N_IF:
        if (jx_eval(e, n->a, s, &v)) return -1;
        return jx_exec(e, jx_truthy(v) ? &n->body : &n->body2, s, b);
    case N_FOR: return exec_for(e, n, s, b);
    case N_SET: return jx_eval(e, n->b, s, &v) || assign(e, n->a, s, v) ? -1 : 0;
    case N_SETBLOCK:
    case N_FILTERBLOCK: {
        jx_buf inner = {0};
        if (jx_exec(e, &n->body, s, &inner)) return -1;
        jstr *text = jx_buf_take(e, &inner);
        if (!text) return -1;
        v = jv_strv(text);
        /* the filter chain, innermost (the first written) first */
        const jnode *chain[64];
        int k = 0;
        for (const jnode *f = n->b; f; f = f->a) {
            if (k == 64) return jx_error(e, "too many filters on a block");
            chain[k++] = f;
        }
        while (k-- > 0) {
            jargs args;
            if (eval_args(e, chain[k], s, &args) || jx_filter(e, chain[k]->name->s, v, &args, s, &v)) return -1;
        }
        if (n->kind == N_FILTERBLOCK) return jx_write_str(e, b, v);
        return assign(e, n->a, s, v);
    }
    case N_MACRO: {
        jfunc *f = jx_alloc(e, sizeof *f);
        if (!f) return -1;
        memset(f, 0, sizeof *f);
        f->kind = JF_MACRO;
        f->node = n;
        f->scope = s;
        f->name = n->name->s;
        jv fv = {.t = JV_FUNC, .u = {.fn = f}};
        return set_name(e, s, n->name, fv);
    }
    case N_CALLBLOCK: {
        jfunc *caller = jx_alloc(e, sizeof *caller);
        if (!caller) return -1;
        memset(caller, 0, sizeof *caller);
        caller->kind = JF_CALLER;
        caller->node = n;
        caller->scope = s;
        caller->name = "caller";
        jv fn;
        jargs args;
        if (jx_eval(e, n->a->a, s, &fn) || eval_args(e, n->a, s, &args)) return -1;
        if (fn.t != JV_FUNC || fn.u.fn->kind != JF_MACRO) return jx_error(e, "a call block must call a macro");
        return call_macro(e, fn.u.fn, &args, caller, &v) || jx_write_str(e, b, v) ? -1 : 0;
    }
    case N_WITH: {
        jscope *w = scope_new(e, s);
        if (!w) return -1;
        for (int i = 0; i < n->items.n; i++)
            if (jx_eval(e, n->items.v[i], s, &v) || set_name(e, w, n->names[i], v)) return -1;
        return jx_exec(e, &n->body, w, b);
    }
    case N_BREAK: e->loop_ctl = 1; return 0;
    case N_CONTINUE: e->loop_ctl = 2; return 0;
    default: return jx_error(e, "an expression where a statement should be");
    }
}

int jx_exec(jinja_env *e, const jnodes *body, jscope *s, jx_buf *b) {
    if (++e->depth > e->lim.max_depth) {
        const jnode *n = body->n ? body->v[0] : NULL;
        return jx_error_at(e, n ? n->line : e->line, n ? n->col : e->col,
                           "the template nests too deeply (limit %d): runaway recursion?", e->lim.max_depth);
    }
    for (int i = 0; i < body->n; i++) {
        const jnode *n = body->v[i];
        int line = e->line, col = e->col;
        e->line = n->line;
        e->col = n->col;
        if (jx_step(e, 1) || exec_node(e, n, s, b)) return -1;
        e->line = line, e->col = col;
        if (e->loop_ctl) break;
    }
    e->depth--;
    return 0;
}
