/*
 * grammar.c - GBNF: the parser and compiler, and the matcher (grammar.h).
 *
 * Compiled form: every rule is a run of elements in one flat array,
 *   alternative 1 ... E_ALT alternative 2 ... E_END
 * where an element is a character set (E_CHARS: ranges, maybe negated) or a
 * rule reference (E_REF). Groups, repetitions and optionals become rules of
 * their own as they are parsed:
 *   (a b)   -> R ::= a b
 *   x*      -> R ::= x R | (empty)
 *   x+      -> x R, R as for x*
 *   x?      -> R ::= x | (empty)
 *   x{m,n}  -> x ... x (m times) then n - m nested optionals; x{m,} -> m times, then x*
 *
 * The matcher's state is a set of stacks of positions (indices into the flat
 * array). A position is "what to match next" in some rule; the top of every
 * stack is kept at a character set, or the stack is empty (the text may end
 * there), by expanding: a reference is replaced by the place after it and
 * each alternative of the rule it names is pushed; the end of an alternative
 * pops. A reference that is the last element of its alternative is not kept
 * under the rule it calls (a tail call), so x* and other right recursion
 * keep stacks short. Left recursion would expand forever: it is refused when
 * the grammar is compiled.
 */
#include "text/grammar.h"

#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"
#include "core/hash.h"

enum { E_END = 0, E_ALT, E_REF, E_CHARS };

typedef struct {
    uint32_t type : 2, value : 30; /* E_REF: the rule; E_CHARS: the set */
} elem;

typedef struct {
    uint32_t lo, hi;
} crange;

typedef struct {
    uint32_t first, n; /* ranges[first .. first + n) */
    int negated;
} cset;

typedef struct {
    elem *e; /* this rule's elements while parsing (alternatives split by E_ALT, no E_END) */
    size_t n, cap;
    char *name;      /* NULL: made for a group or a repetition */
    int defined;     /* its ::= was seen */
    size_t used_at;  /* where it was first referred to (for "undefined rule") */
} prule;

struct grammar {
    elem *e;
    size_t n_e;
    uint32_t *start; /* per rule: its first element in e */
    int n_rules, root;
    crange *ranges;
    size_t n_ranges;
    cset *sets;
    size_t n_sets;
};

/* ---- the parser ---- */

typedef struct {
    const char *s;
    size_t n, i;
    prule *rules;
    int n_rules, cap_rules;
    crange *ranges;
    size_t n_ranges, cap_ranges;
    cset *sets;
    size_t n_sets, cap_sets;
    size_t total; /* elements in all rules */
    int depth;
    wgml_error *err;
    wgml_status st;
} parser;

static wgml_status perr(parser *p, size_t at, const char *fmt, const char *arg) {
    if (p->st) return p->st;
    size_t line = 1, col = 1;
    for (size_t k = 0; k < at && k < p->n; k++) {
        if (p->s[k] == '\n') line++, col = 1;
        else if (((unsigned char)p->s[k] & 0xC0) != 0x80) col++;
    }
    char msg[200];
    snprintf(msg, sizeof msg, fmt, arg ? arg : "");
    p->st = wgml_fail(p->err, WGML_ERR_INVALID_ARGUMENT, "grammar: line %zu, column %zu: %s", line, col, msg);
    return p->st;
}

static wgml_status oom(parser *p) {
    if (!p->st) p->st = wgml_fail(p->err, WGML_ERR_OUT_OF_MEMORY, "grammar: out of memory");
    return p->st;
}

static int grow(void **ptr, size_t *cap, size_t need, size_t size) {
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : 16;
    while (c < need) c *= 2;
    void *g = wgml_realloc(*ptr, c * size);
    if (!g) return -1;
    *ptr = g, *cap = c;
    return 0;
}

static int push_elem(parser *p, int r, elem x) {
    if (p->st) return -1;
    if (p->total >= GRAMMAR_MAX_ELEMENTS) {
        perr(p, p->i, "the grammar is too large (over %s elements once expanded)", "1048576");
        return -1;
    }
    prule *R = &p->rules[r];
    if (grow((void **)&R->e, &R->cap, R->n + 1, sizeof *R->e)) return oom(p), -1;
    R->e[R->n++] = x;
    p->total++;
    return 0;
}

static int new_rule(parser *p, const char *name, size_t nlen) {
    if (p->n_rules >= GRAMMAR_MAX_RULES) {
        perr(p, p->i, "too many rules (over %s)", "65536");
        return -1;
    }
    if (p->n_rules == p->cap_rules) {
        int c = p->cap_rules ? 2 * p->cap_rules : 16;
        prule *g = wgml_realloc(p->rules, (size_t)c * sizeof *g);
        if (!g) return oom(p), -1;
        p->rules = g, p->cap_rules = c;
    }
    prule *R = &p->rules[p->n_rules];
    memset(R, 0, sizeof *R);
    if (name) {
        R->name = wgml_malloc(nlen + 1);
        if (!R->name) return oom(p), -1;
        memcpy(R->name, name, nlen);
        R->name[nlen] = '\0';
    }
    return p->n_rules++;
}

static int rule_by_name(parser *p, const char *name, size_t nlen, size_t at) {
    for (int r = 0; r < p->n_rules; r++)
        if (p->rules[r].name && strlen(p->rules[r].name) == nlen && !memcmp(p->rules[r].name, name, nlen)) return r;
    int r = new_rule(p, name, nlen);
    if (r >= 0) p->rules[r].used_at = at;
    return r;
}

static int add_set(parser *p, const crange *rg, size_t n, int negated) {
    if (p->st) return -1;
    if (grow((void **)&p->ranges, &p->cap_ranges, p->n_ranges + n, sizeof *p->ranges) ||
        grow((void **)&p->sets, &p->cap_sets, p->n_sets + 1, sizeof *p->sets))
        return oom(p), -1;
    if (n) memcpy(p->ranges + p->n_ranges, rg, n * sizeof *rg);
    p->sets[p->n_sets] = (cset){(uint32_t)p->n_ranges, (uint32_t)n, negated};
    p->n_ranges += n;
    return (int)p->n_sets++;
}

static int is_name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

/* white space and comments; newlines only when newline_ok */
static void skip_space(parser *p, int newline_ok) {
    while (p->i < p->n) {
        const char c = p->s[p->i];
        if (c == '#') {
            while (p->i < p->n && p->s[p->i] != '\n') p->i++;
        } else if (c == ' ' || c == '\t' || c == '\r' || (newline_ok && c == '\n')) {
            p->i++;
        } else {
            break;
        }
    }
}

/* one UTF-8 code point at p->i into *cp; 0 on invalid bytes */
static int next_cp(parser *p, uint32_t *cp) {
    const unsigned char *s = (const unsigned char *)p->s + p->i;
    const size_t left = p->n - p->i;
    if (!left) return 0;
    int len = s[0] < 0x80 ? 1 : (s[0] >> 5) == 6 ? 2 : (s[0] >> 4) == 14 ? 3 : (s[0] >> 3) == 30 ? 4 : 0;
    if (!len || (size_t)len > left) return 0;
    uint32_t c = len == 1 ? s[0] : len == 2 ? s[0] & 0x1F : len == 3 ? s[0] & 0x0F : s[0] & 0x07;
    for (int k = 1; k < len; k++) {
        if ((s[k] >> 6) != 2) return 0;
        c = c << 6 | (s[k] & 0x3F);
    }
    static const uint32_t min[] = {0, 0, 0x80, 0x800, 0x10000};
    if (c < min[len] || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return 0;
    *cp = c;
    p->i += (size_t)len;
    return 1;
}

static int hexval(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* a character of a literal or a class, escapes read; 0 on an error */
static int parse_char(parser *p, uint32_t *cp) {
    const size_t at = p->i;
    if (p->i < p->n && p->s[p->i] == '\\') {
        p->i++;
        if (p->i >= p->n) return perr(p, at, "an escape at the end of the grammar%s", NULL), 0;
        const char c = p->s[p->i++];
        int digits = c == 'x' ? 2 : c == 'u' ? 4 : c == 'U' ? 8 : 0;
        if (digits) {
            uint32_t v = 0;
            for (int k = 0; k < digits; k++) {
                const int h = p->i < p->n ? hexval(p->s[p->i]) : -1;
                if (h < 0) return perr(p, at, "\\%s needs hexadecimal digits", c == 'x' ? "x" : c == 'u' ? "u" : "U"), 0;
                v = v << 4 | (uint32_t)h;
                p->i++;
            }
            if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return perr(p, at, "the escape names no character%s", NULL), 0;
            *cp = v;
            return 1;
        }
        switch (c) {
        case 'n': *cp = '\n'; return 1;
        case 'r': *cp = '\r'; return 1;
        case 't': *cp = '\t'; return 1;
        case '\\': case '"': case '\'': case '[': case ']': case '-': case '^': *cp = (uint32_t)c; return 1;
        default: {
            char bad[2] = {c, 0};
            return perr(p, at, "unknown escape \\%s", bad), 0;
        }
        }
    }
    if (!next_cp(p, cp)) return perr(p, at, "invalid UTF-8%s", NULL), 0;
    return 1;
}

static void parse_alternates(parser *p, int r, int nested);

/* the repetition of elements [from, n) of rule r (one item) */
static void repeat(parser *p, int r, size_t from, long min, long max /* -1: unbounded */) {
    prule *R = &p->rules[r];
    const size_t len = R->n - from;
    elem *item = wgml_malloc((len ? len : 1) * sizeof *item);
    if (!item) {
        oom(p);
        return;
    }
    if (len) memcpy(item, R->e + from, len * sizeof *item);
    p->total -= len;
    R->n = from;
    /* min copies */
    for (long k = 0; k < min && !p->st; k++)
        for (size_t j = 0; j < len && !p->st; j++) push_elem(p, r, item[j]);
    if (max < 0) { /* then R2 ::= item R2 | () */
        const int r2 = new_rule(p, NULL, 0);
        if (r2 >= 0) {
            for (size_t j = 0; j < len; j++) push_elem(p, r2, item[j]);
            push_elem(p, r2, (elem){E_REF, (uint32_t)r2});
            push_elem(p, r2, (elem){E_ALT, 0});
            push_elem(p, r, (elem){E_REF, (uint32_t)r2});
        }
    } else if (max > min) { /* nested optionals: R1 ::= item R2 | (), ..., Rk ::= item | () */
        int prev = -1;
        for (long k = 0; k < max - min && !p->st; k++) {
            const int rk = new_rule(p, NULL, 0);
            if (rk < 0) break;
            for (size_t j = 0; j < len; j++) push_elem(p, rk, item[j]);
            if (k + 1 < max - min) push_elem(p, rk, (elem){E_REF, (uint32_t)(rk + 1)}); /* the next one made */
            push_elem(p, rk, (elem){E_ALT, 0});
            if (prev < 0) push_elem(p, r, (elem){E_REF, (uint32_t)rk});
            prev = rk;
        }
    }
    wgml_free(item);
}

static void parse_sequence(parser *p, int r, int nested) {
    for (;;) {
        skip_space(p, nested);
        if (p->st || p->i >= p->n) return;
        const size_t at = p->i, from = p->rules[r].n;
        const char c = p->s[p->i];
        if (c == '|' || c == ')' || c == '\n') return;
        if (c == '"') {
            p->i++;
            while (!p->st && p->i < p->n && p->s[p->i] != '"') {
                uint32_t cp;
                if (!parse_char(p, &cp)) return;
                const crange rg = {cp, cp};
                const int set = add_set(p, &rg, 1, 0);
                if (set >= 0) push_elem(p, r, (elem){E_CHARS, (uint32_t)set});
            }
            if (p->i >= p->n) {
                perr(p, at, "unterminated string literal%s", NULL);
                return;
            }
            p->i++;
        } else if (c == '[') {
            p->i++;
            int negated = 0;
            if (p->i < p->n && p->s[p->i] == '^') negated = 1, p->i++;
            crange *rg = NULL;
            size_t n = 0, cap = 0;
            while (!p->st && p->i < p->n && p->s[p->i] != ']') {
                uint32_t lo, hi;
                if (!parse_char(p, &lo)) break;
                hi = lo;
                if (p->i + 1 < p->n && p->s[p->i] == '-' && p->s[p->i + 1] != ']') {
                    p->i++;
                    if (!parse_char(p, &hi)) break;
                    if (hi < lo) {
                        perr(p, at, "a character range runs backwards%s", NULL);
                        break;
                    }
                }
                if (grow((void **)&rg, &cap, n + 1, sizeof *rg)) {
                    oom(p);
                    break;
                }
                rg[n++] = (crange){lo, hi};
            }
            if (!p->st && p->i >= p->n) perr(p, at, "unterminated character class%s", NULL);
            if (!p->st) {
                p->i++;
                const int set = add_set(p, rg, n, negated);
                if (set >= 0) push_elem(p, r, (elem){E_CHARS, (uint32_t)set});
            }
            wgml_free(rg);
            if (p->st) return;
        } else if (c == '.') {
            p->i++;
            const int set = add_set(p, NULL, 0, 1); /* [^] : any character */
            if (set >= 0) push_elem(p, r, (elem){E_CHARS, (uint32_t)set});
        } else if (is_name_char(c)) {
            size_t e = p->i;
            while (e < p->n && is_name_char(p->s[e])) e++;
            const int ref = rule_by_name(p, p->s + p->i, e - p->i, p->i);
            p->i = e;
            if (ref >= 0) push_elem(p, r, (elem){E_REF, (uint32_t)ref});
        } else if (c == '(') {
            p->i++;
            if (++p->depth > GRAMMAR_MAX_DEPTH) {
                perr(p, at, "groups nested too deeply (over %s)", "128");
                return;
            }
            const int g = new_rule(p, NULL, 0);
            if (g < 0) return;
            parse_alternates(p, g, 1);
            p->depth--;
            if (p->st) return;
            skip_space(p, 1);
            if (p->i >= p->n || p->s[p->i] != ')') {
                perr(p, at, "a group without its ')'%s", NULL);
                return;
            }
            p->i++;
            push_elem(p, r, (elem){E_REF, (uint32_t)g});
        } else {
            char bad[8] = {0};
            memcpy(bad, p->s + p->i, 1);
            perr(p, at, "unexpected '%s'", bad);
            return;
        }
        if (p->st) return;
        /* a repetition of that item */
        skip_space(p, nested);
        if (p->i >= p->n) return;
        const char op = p->s[p->i];
        if (op == '*' || op == '+' || op == '?') {
            p->i++;
            repeat(p, r, from, op == '+' ? 1 : 0, op == '?' ? 1 : -1);
        } else if (op == '{') {
            const size_t bat = p->i++;
            long m = 0, n = -1;
            int digits = 0;
            skip_space(p, nested);
            while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9' && m <= GRAMMAR_MAX_REPEAT)
                m = m * 10 + (p->s[p->i++] - '0'), digits++;
            skip_space(p, nested);
            if (!digits) {
                perr(p, bat, "a repetition {m,n} needs its m%s", NULL);
                return;
            }
            if (p->i < p->n && p->s[p->i] == ',') {
                p->i++;
                skip_space(p, nested);
                if (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') {
                    n = 0;
                    while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9' && n <= GRAMMAR_MAX_REPEAT)
                        n = n * 10 + (p->s[p->i++] - '0');
                }
            } else {
                n = m;
            }
            skip_space(p, nested);
            if (p->i >= p->n || p->s[p->i] != '}') {
                perr(p, bat, "a repetition {m,n} without its '}'%s", NULL);
                return;
            }
            p->i++;
            if (m > GRAMMAR_MAX_REPEAT || n > GRAMMAR_MAX_REPEAT) {
                perr(p, bat, "a repetition count over %s", "1000");
                return;
            }
            if (n >= 0 && n < m) {
                perr(p, bat, "a repetition {m,n} with n below m%s", NULL);
                return;
            }
            repeat(p, r, from, m, n);
        }
        if (p->st) return;
    }
}

static void parse_alternates(parser *p, int r, int nested) {
    parse_sequence(p, r, nested);
    while (!p->st && p->i < p->n && p->s[p->i] == '|') {
        p->i++;
        push_elem(p, r, (elem){E_ALT, 0});
        skip_space(p, 1);
        parse_sequence(p, r, nested);
    }
}

/* ---- checks: every rule defined, root, no left recursion ---- */

/* rules that can match the empty text */
static void find_nullable(const parser *p, unsigned char *nullable) {
    memset(nullable, 0, (size_t)p->n_rules);
    for (int changed = 1; changed;) {
        changed = 0;
        for (int r = 0; r < p->n_rules; r++) {
            if (nullable[r]) continue;
            const prule *R = &p->rules[r];
            int all = 1; /* the alternative so far is nullable */
            for (size_t k = 0; k <= R->n; k++) {
                if (k == R->n || R->e[k].type == E_ALT) {
                    if (all) {
                        nullable[r] = 1, changed = 1;
                        break;
                    }
                    all = 1;
                    continue;
                }
                if (R->e[k].type == E_CHARS || (R->e[k].type == E_REF && !nullable[R->e[k].value])) all = 0;
            }
        }
    }
}

/* DFS over "r may start with rule q" edges: 1 when a cycle is reached from r */
static int left_cycle(const parser *p, const unsigned char *nullable, int r, unsigned char *mark, int *which) {
    if (mark[r] == 1) {
        *which = r;
        return 1;
    }
    if (mark[r] == 2) return 0;
    mark[r] = 1;
    const prule *R = &p->rules[r];
    int at_start = 1;
    for (size_t k = 0; k < R->n; k++) {
        const elem x = R->e[k];
        if (x.type == E_ALT) {
            at_start = 1;
            continue;
        }
        if (!at_start) continue;
        if (x.type == E_CHARS) {
            at_start = 0;
            continue;
        }
        if (left_cycle(p, nullable, (int)x.value, mark, which)) return 1;
        if (!nullable[x.value]) at_start = 0;
    }
    mark[r] = 2;
    return 0;
}

static const char *rule_label(const parser *p, int r) {
    return p->rules[r].name ? p->rules[r].name : "(a group or repetition)";
}

wgml_status grammar_parse(const char *text, size_t len, grammar **out, wgml_error *err) {
    *out = NULL;
    if (!text) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "grammar: no text");
    if (len > GRAMMAR_MAX_TEXT) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "grammar: over 1 MiB of text");
    parser p = {.s = text, .n = len, .err = err};
    grammar *g = NULL;
    skip_space(&p, 1);
    while (!p.st && p.i < p.n) {
        const size_t at = p.i;
        size_t e = p.i;
        while (e < p.n && is_name_char(p.s[e])) e++;
        if (e == p.i) {
            perr(&p, at, "a rule name was expected%s", NULL);
            break;
        }
        const int r = rule_by_name(&p, p.s + p.i, e - p.i, at);
        if (r < 0) break;
        if (p.rules[r].defined) {
            perr(&p, at, "rule '%s' is defined twice", p.rules[r].name);
            break;
        }
        p.rules[r].defined = 1;
        p.i = e;
        skip_space(&p, 0);
        if (p.i + 3 > p.n || memcmp(p.s + p.i, "::=", 3)) {
            perr(&p, p.i, "'::=' was expected after the rule name%s", NULL);
            break;
        }
        p.i += 3;
        skip_space(&p, 1);
        parse_alternates(&p, r, 0);
        if (p.st) break;
        if (p.i < p.n && p.s[p.i] == ')') {
            perr(&p, p.i, "a ')' without its group%s", NULL);
            break;
        }
        skip_space(&p, 1);
    }
    int root = -1;
    for (int r = 0; !p.st && r < p.n_rules; r++) {
        if (p.rules[r].name && !p.rules[r].defined) perr(&p, p.rules[r].used_at, "undefined rule '%s'", p.rules[r].name);
        if (p.rules[r].name && !strcmp(p.rules[r].name, "root")) root = r;
    }
    if (!p.st && root < 0) p.st = wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "grammar: no rule 'root'");
    unsigned char *nullable = NULL, *mark = NULL;
    if (!p.st) {
        nullable = wgml_malloc((size_t)p.n_rules);
        mark = wgml_calloc((size_t)p.n_rules, 1);
        if (!nullable || !mark) oom(&p);
    }
    if (!p.st) {
        find_nullable(&p, nullable);
        int which = -1;
        for (int r = 0; r < p.n_rules && !p.st; r++)
            if (left_cycle(&p, nullable, r, mark, &which))
                p.st = wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                                 "grammar: rule '%s' is left-recursive (it can reach itself before any character)",
                                 rule_label(&p, which));
    }
    if (!p.st) { /* flatten */
        g = wgml_calloc(1, sizeof *g);
        if (!g) oom(&p);
    }
    if (!p.st) {
        g->n_e = p.total + (size_t)p.n_rules;
        g->e = wgml_malloc(g->n_e * sizeof *g->e);
        g->start = wgml_malloc((size_t)p.n_rules * sizeof *g->start);
        if (!g->e || !g->start) oom(&p);
    }
    if (!p.st) {
        size_t k = 0;
        for (int r = 0; r < p.n_rules; r++) {
            g->start[r] = (uint32_t)k;
            if (p.rules[r].n) memcpy(g->e + k, p.rules[r].e, p.rules[r].n * sizeof *g->e);
            k += p.rules[r].n;
            g->e[k++] = (elem){E_END, 0};
        }
        g->n_e = k;
        g->n_rules = p.n_rules;
        g->root = root;
        g->ranges = p.ranges, g->n_ranges = p.n_ranges, p.ranges = NULL;
        g->sets = p.sets, g->n_sets = p.n_sets, p.sets = NULL;
    }
    wgml_free(nullable);
    wgml_free(mark);
    for (int r = 0; r < p.n_rules; r++) {
        wgml_free(p.rules[r].e);
        wgml_free(p.rules[r].name);
    }
    wgml_free(p.rules);
    wgml_free(p.ranges);
    wgml_free(p.sets);
    if (p.st) {
        grammar_free(g);
        return p.st;
    }
    *out = g;
    return WGML_OK;
}

void grammar_free(grammar *g) {
    if (!g) return;
    wgml_free(g->e);
    wgml_free(g->start);
    wgml_free(g->ranges);
    wgml_free(g->sets);
    wgml_free(g);
}

int grammar_n_rules(const grammar *g) { return g ? g->n_rules : 0; }

/* ---- the matcher ---- */

struct grammar_state {
    const grammar *g;
    uint32_t *pool; /* the stacks' positions, one after another */
    size_t n_pool, cap_pool;
    size_t *off, *len; /* stack i: pool[off[i] .. off[i] + len[i]) */
    size_t n, cap;
    uint32_t partial; /* a code point being read */
    int need;         /* its continuation bytes still to come */
    int cp_len;       /* its length in bytes */
    int dead;
};

/* a set of stacks being built: the target state, and a hash of its stacks */
typedef struct {
    grammar_state *s;
    uint64_t *hash;
    size_t *slot; /* hash table: stack index + 1, 0 empty */
    size_t n_slots;
    /* the stacks expanded in this step whose top is a reference or an alternative's end: each
     * expanded once (nullable rules reach one stack by many paths: without this, x{0,40} of a
     * nullable x takes 3^40 steps) */
    grammar_state seen;
    size_t *seen_slot, n_seen_slots;
    size_t work; /* expansions in this step, against GRAMMAR_MAX_WORK */
    wgml_error *err;
    int failed; /* 1 out of memory, 2 too many stacks */
} builder;

#define GRAMMAR_MAX_WORK (1u << 22) /* expansions in one step, a guard behind the visited set */

/* Adds v[0..n) to the set (state t, table *slot of *n_slots): 1 added, 0 present, -1 out of memory. */
static int set_add(grammar_state *t, size_t **slot, size_t *n_slots, const uint32_t *v, size_t n);

static void builder_free(builder *b) {
    wgml_free(b->slot);
    wgml_free(b->seen.pool), wgml_free(b->seen.off), wgml_free(b->seen.len);
    wgml_free(b->seen_slot);
}

static uint64_t hash_stack(const uint32_t *v, size_t n) { return wgml_fnv64(WGML_FNV64_BASIS, v, n * sizeof *v); }

static int set_add(grammar_state *t, size_t **slot, size_t *n_slots, const uint32_t *v, size_t n) {
    if (!*n_slots || 2 * (t->n + 1) > *n_slots) { /* (re)build the table */
        const size_t ns = *n_slots ? 2 * *n_slots : 64;
        size_t *sl = wgml_calloc(ns, sizeof *sl);
        if (!sl) return -1;
        for (size_t i = 0; i < t->n; i++) {
            size_t h = (size_t)(hash_stack(t->pool + t->off[i], t->len[i]) % ns);
            while (sl[h]) h = (h + 1) % ns;
            sl[h] = i + 1;
        }
        wgml_free(*slot);
        *slot = sl, *n_slots = ns;
    }
    size_t h = (size_t)(hash_stack(v, n) % *n_slots);
    for (; (*slot)[h]; h = (h + 1) % *n_slots) {
        const size_t i = (*slot)[h] - 1;
        if (t->len[i] == n && (!n || !memcmp(t->pool + t->off[i], v, n * sizeof *v))) return 0; /* present */
    }
    const size_t old_cap = t->cap;
    if (grow((void **)&t->pool, &t->cap_pool, t->n_pool + n, sizeof *t->pool) ||
        grow((void **)&t->off, &t->cap, t->n + 1, sizeof *t->off))
        return -1;
    if (t->cap != old_cap || !t->len) { /* len grows with off */
        size_t *l = wgml_realloc(t->len, t->cap * sizeof *l);
        if (!l) return -1;
        t->len = l;
    }
    if (n) memcpy(t->pool + t->n_pool, v, n * sizeof *v);
    t->off[t->n] = t->n_pool, t->len[t->n] = n;
    t->n_pool += n;
    (*slot)[h] = ++t->n;
    return 1;
}

/* adds stack v[0..n) (its top a character set, or empty) unless present */
static void add_stack(builder *b, const uint32_t *v, size_t n) {
    if (b->failed) return;
    if (b->s->n >= GRAMMAR_MAX_STACKS) {
        b->failed = 2;
        return;
    }
    if (set_add(b->s, &b->slot, &b->n_slots, v, n) < 0) b->failed = 1;
}

/* Expands stack v[0..n) (capacity GRAMMAR_MAX_STACK, modified and restored)
 * until every resulting stack's top is a character set or it is empty. */
static void expand(builder *b, uint32_t *v, size_t n) {
    if (b->failed) return;
    const grammar *g = b->s->g;
    if (!n) {
        add_stack(b, v, 0);
        return;
    }
    const uint32_t pos = v[n - 1];
    const elem x = g->e[pos];
    if (x.type == E_CHARS) {
        add_stack(b, v, n);
        return;
    }
    if (++b->work > GRAMMAR_MAX_WORK || b->seen.n >= 16u * GRAMMAR_MAX_STACKS) {
        b->failed = 2;
        return;
    }
    const int fresh = set_add(&b->seen, &b->seen_slot, &b->n_seen_slots, v, n);
    if (fresh < 0) {
        b->failed = 1;
        return;
    }
    if (!fresh) return; /* expanded already in this step */
    if (x.type == E_END || x.type == E_ALT) { /* this alternative is done: back to its caller */
        expand(b, v, n - 1);
        v[n - 1] = pos;
        return;
    }
    /* a reference: the place after it (unless a tail call), then each alternative of the rule */
    const elem after = g->e[pos + 1];
    const int tail = after.type == E_END || after.type == E_ALT;
    const size_t base = tail ? n - 1 : n;
    if (!tail) v[n - 1] = pos + 1;
    if (base + 1 > GRAMMAR_MAX_STACK) {
        b->failed = 2;
        v[n - 1] = pos;
        return;
    }
    const uint32_t saved = v[base]; /* v[base] is beyond the stack (or its top when a tail call) */
    for (uint32_t a = g->start[x.value];;) {
        v[base] = a;
        expand(b, v, base + 1);
        while (g->e[a].type != E_ALT && g->e[a].type != E_END) a++;
        if (g->e[a].type == E_END) break;
        a++;
    }
    v[base] = saved;
    v[n - 1] = pos;
}

static int set_has(const grammar *g, uint32_t set, uint32_t cp) {
    const cset *c = &g->sets[set];
    int in = 0;
    for (uint32_t k = 0; k < c->n && !in; k++) in = cp >= g->ranges[c->first + k].lo && cp <= g->ranges[c->first + k].hi;
    return in != c->negated;
}

static wgml_status build_fail(builder *b) {
    if (b->failed == 1) return wgml_fail(b->err, WGML_ERR_OUT_OF_MEMORY, "grammar: out of memory");
    return wgml_fail(b->err, WGML_ERR_INVALID_ARGUMENT,
                     "grammar: too ambiguous here (over %d ways to go on, or a stack deeper than %d)",
                     GRAMMAR_MAX_STACKS, GRAMMAR_MAX_STACK);
}

wgml_status grammar_state_create(const grammar *g, grammar_state **out, wgml_error *err) {
    *out = NULL;
    grammar_state *s = wgml_calloc(1, sizeof *s);
    uint32_t *v = wgml_malloc(GRAMMAR_MAX_STACK * sizeof *v);
    if (!s || !v) {
        wgml_free(s), wgml_free(v);
        return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "grammar: out of memory");
    }
    s->g = g;
    builder b = {.s = s, .err = err};
    for (uint32_t a = g->start[g->root];;) { /* each alternative of root */
        v[0] = a;
        expand(&b, v, 1);
        while (g->e[a].type != E_ALT && g->e[a].type != E_END) a++;
        if (g->e[a].type == E_END) break;
        a++;
    }
    wgml_free(v);
    wgml_status st = b.failed ? build_fail(&b) : WGML_OK;
    builder_free(&b);
    if (st) {
        grammar_state_free(s);
        return st;
    }
    *out = s;
    return WGML_OK;
}

void grammar_state_free(grammar_state *s) {
    if (!s) return;
    wgml_free(s->pool);
    wgml_free(s->off);
    wgml_free(s->len);
    wgml_free(s);
}

wgml_status grammar_state_clone(const grammar_state *s, grammar_state **out, wgml_error *err) {
    *out = NULL;
    grammar_state *c = wgml_calloc(1, sizeof *c);
    if (!c) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "grammar: out of memory");
    *c = *s;
    c->pool = NULL, c->off = NULL, c->len = NULL;
    c->cap_pool = s->n_pool, c->cap = s->n;
    if (s->n_pool) c->pool = wgml_malloc(s->n_pool * sizeof *c->pool);
    if (s->n) c->off = wgml_malloc(s->n * sizeof *c->off), c->len = wgml_malloc(s->n * sizeof *c->len);
    if ((s->n_pool && !c->pool) || (s->n && (!c->off || !c->len))) {
        grammar_state_free(c);
        return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "grammar: out of memory");
    }
    if (s->n_pool) memcpy(c->pool, s->pool, s->n_pool * sizeof *c->pool);
    if (s->n) memcpy(c->off, s->off, s->n * sizeof *c->off), memcpy(c->len, s->len, s->n * sizeof *c->len);
    *out = c;
    return WGML_OK;
}

uint64_t grammar_state_hash(const grammar_state *s) {
    uint64_t h = wgml_fnv64(WGML_FNV64_BASIS, &s->n, sizeof s->n);
    const uint32_t tail[4] = {s->partial, (uint32_t)s->need, (uint32_t)s->cp_len, (uint32_t)s->dead};
    h = wgml_fnv64(h, tail, sizeof tail);
    for (size_t i = 0; i < s->n; i++) {
        h = wgml_fnv64(h, &s->len[i], sizeof s->len[i]);
        if (s->len[i]) h = wgml_fnv64(h, s->pool + s->off[i], s->len[i] * sizeof *s->pool);
    }
    return h;
}

int grammar_state_equal(const grammar_state *a, const grammar_state *b) {
    if (a->g != b->g || a->n != b->n || a->partial != b->partial || a->need != b->need ||
        a->cp_len != b->cp_len || a->dead != b->dead)
        return 0;
    for (size_t i = 0; i < a->n; i++)
        if (a->len[i] != b->len[i] ||
            (a->len[i] && memcmp(a->pool + a->off[i], b->pool + b->off[i], a->len[i] * sizeof *a->pool)))
            return 0;
    return 1;
}

/* one code point: 1 alive, 0 dead, -1 error */
static int accept_cp(grammar_state *s, uint32_t cp, wgml_error *err) {
    const grammar *g = s->g;
    int any = 0; /* no stack takes cp: dead, without building anything */
    for (size_t i = 0; i < s->n && !any; i++)
        any = s->len[i] && set_has(g, g->e[s->pool[s->off[i] + s->len[i] - 1]].value, cp);
    if (!any) {
        s->dead = 1;
        return 0;
    }
    grammar_state next = {.g = g};
    builder b = {.s = &next, .err = err};
    uint32_t v[GRAMMAR_MAX_STACK];
    for (size_t i = 0; i < s->n && !b.failed; i++) {
        const size_t n = s->len[i];
        if (!n) continue; /* the text could have ended here: nothing follows on this stack */
        const uint32_t *st = s->pool + s->off[i], top = st[n - 1];
        if (!set_has(g, g->e[top].value, cp)) continue;
        memcpy(v, st, n * sizeof *v);
        v[n - 1] = top + 1; /* past the set */
        expand(&b, v, n);
    }
    const int failed = b.failed;
    if (failed) build_fail(&b);
    builder_free(&b);
    if (failed) {
        wgml_free(next.pool), wgml_free(next.off), wgml_free(next.len);
        return -1;
    }
    wgml_free(s->pool), wgml_free(s->off), wgml_free(s->len);
    s->pool = next.pool, s->n_pool = next.n_pool, s->cap_pool = next.cap_pool;
    s->off = next.off, s->len = next.len, s->n = next.n, s->cap = next.cap;
    if (!s->n) s->dead = 1;
    return s->dead ? 0 : 1;
}

/* whether set `set` holds a code point in [lo, hi] */
static int set_meets(const grammar *g, uint32_t set, uint32_t lo, uint32_t hi) {
    const cset *c = &g->sets[set];
    if (!c->negated) {
        for (uint32_t k = 0; k < c->n; k++)
            if (g->ranges[c->first + k].lo <= hi && g->ranges[c->first + k].hi >= lo) return 1;
        return 0;
    }
    /* negated: some point of [lo, hi] is outside every range */
    uint32_t cur = lo;
    for (;;) {
        int moved = 0;
        for (uint32_t k = 0; k < c->n; k++) {
            const crange r = g->ranges[c->first + k];
            if (r.lo <= cur && r.hi >= cur) {
                if (r.hi >= hi) return 0;
                cur = r.hi + 1, moved = 1;
            }
        }
        if (!moved) return 1;
    }
}

/* a code point begun (s->partial, s->need bytes to come): whether some stack can take one that starts so */
static int partial_possible(const grammar_state *s) {
    static const uint32_t least[5] = {0, 0, 0x80, 0x800, 0x10000}; /* below: overlong */
    uint32_t lo = s->partial << (6 * s->need);
    const uint32_t hi = lo | ((1u << (6 * s->need)) - 1);
    if (lo < least[s->cp_len]) lo = least[s->cp_len];
    if (lo > hi || lo > 0x10FFFF) return 0;
    for (size_t i = 0; i < s->n; i++)
        if (s->len[i] && set_meets(s->g, s->g->e[s->pool[s->off[i] + s->len[i] - 1]].value, lo, hi)) return 1;
    return 0;
}

int grammar_accept(grammar_state *s, const char *bytes, size_t n, wgml_error *err) {
    for (size_t i = 0; i < n && !s->dead; i++) {
        const unsigned char c = (unsigned char)bytes[i];
        if (s->need) {
            if ((c >> 6) != 2) {
                s->dead = 1;
                break;
            }
            s->partial = s->partial << 6 | (c & 0x3F);
            if (--s->need) {
                if (!partial_possible(s)) s->dead = 1;
                continue;
            }
            const uint32_t cp = s->partial;
            static const uint32_t least[5] = {0, 0, 0x80, 0x800, 0x10000}; /* shorter would be overlong */
            if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF) || cp < least[s->cp_len]) {
                s->dead = 1;
                break;
            }
            const int r = accept_cp(s, cp, err);
            if (r < 0) return -1;
            continue;
        }
        if (c < 0x80) {
            const int r = accept_cp(s, c, err);
            if (r < 0) return -1;
        } else if ((c >> 5) == 6 && c >= 0xC2) {
            s->partial = c & 0x1F, s->need = 1, s->cp_len = 2;
        } else if ((c >> 4) == 14) {
            s->partial = c & 0x0F, s->need = 2, s->cp_len = 3;
        } else if ((c >> 3) == 30 && c <= 0xF4) {
            s->partial = c & 0x07, s->need = 3, s->cp_len = 4;
        } else {
            s->dead = 1;
        }
        if (s->need && !s->dead && !partial_possible(s)) s->dead = 1;
    }
    return s->dead ? 0 : 1;
}

int grammar_accepting(const grammar_state *s) {
    if (s->dead || s->need) return 0;
    for (size_t i = 0; i < s->n; i++)
        if (!s->len[i]) return 1;
    return 0;
}

int grammar_finished(const grammar_state *s) { return grammar_accepting(s) && s->n == 1; }

/* ---- the token filter ---- */

struct grammar_vocab {
    int n;
    const uint8_t **bytes; /* copies, one block */
    size_t *len;
    int *order; /* token ids sorted by their bytes, a prefix before what extends it */
    uint8_t *block;
};

static int cmp_tokens(const grammar_vocab *v, int x, int y) {
    const size_t lx = v->len[x], ly = v->len[y], m = lx < ly ? lx : ly;
    const int c = m ? memcmp(v->bytes[x], v->bytes[y], m) : 0;
    if (c) return c;
    return lx < ly ? -1 : lx > ly ? 1 : (x > y) - (x < y);
}

/* merge sort of a[0..n) by cmp_tokens (qsort has no context argument in C11); tmp: n ints */
static void sort_tokens(const grammar_vocab *v, int *a, int *tmp, int n) {
    for (int w = 1; w < n; w *= 2) {
        for (int lo = 0; lo < n; lo += 2 * w) {
            const int mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            int i = lo, j = mid, k = lo;
            while (i < mid && j < hi) tmp[k++] = cmp_tokens(v, a[i], a[j]) <= 0 ? a[i++] : a[j++];
            while (i < mid) tmp[k++] = a[i++];
            while (j < hi) tmp[k++] = a[j++];
        }
        memcpy(a, tmp, (size_t)n * sizeof *a);
    }
}

wgml_status grammar_vocab_create(const char *const *pieces, const size_t *lens, int n, grammar_vocab **out,
                                 wgml_error *err) {
    *out = NULL;
    if (n < 0 || (n && (!pieces || !lens))) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "grammar: no vocabulary");
    size_t total = 0;
    for (int t = 0; t < n; t++) total += lens[t];
    grammar_vocab *v = wgml_calloc(1, sizeof *v);
    if (!v) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "grammar: out of memory");
    v->n = n;
    v->bytes = wgml_malloc((n ? (size_t)n : 1) * sizeof *v->bytes);
    v->len = wgml_malloc((n ? (size_t)n : 1) * sizeof *v->len);
    v->order = wgml_malloc((n ? (size_t)n : 1) * sizeof *v->order);
    v->block = wgml_malloc(total ? total : 1);
    if (!v->bytes || !v->len || !v->order || !v->block) {
        grammar_vocab_free(v);
        return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "grammar: out of memory");
    }
    size_t at = 0;
    for (int t = 0; t < n; t++) {
        if (lens[t]) memcpy(v->block + at, pieces[t], lens[t]);
        v->bytes[t] = v->block + at;
        v->len[t] = lens[t];
        v->order[t] = t;
        at += lens[t];
    }
    int *tmp = wgml_malloc((n ? (size_t)n : 1) * sizeof *tmp);
    if (!tmp) {
        grammar_vocab_free(v);
        return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "grammar: out of memory");
    }
    sort_tokens(v, v->order, tmp, n);
    wgml_free(tmp);
    *out = v;
    return WGML_OK;
}

int grammar_vocab_size(const grammar_vocab *v) { return v ? v->n : 0; }
const char *grammar_vocab_bytes(const grammar_vocab *v, int t) { return (const char *)v->bytes[t]; }
size_t grammar_vocab_len(const grammar_vocab *v, int t) { return v->len[t]; }

void grammar_vocab_free(grammar_vocab *v) {
    if (!v) return;
    wgml_free(v->bytes);
    wgml_free(v->len);
    wgml_free(v->order);
    wgml_free(v->block);
    wgml_free(v);
}

/* tokens order[lo .. hi), which share their first d bytes, which s has followed */
static int allowed_range(const grammar_state *s, const grammar_vocab *v, int lo, int hi, size_t d, uint8_t *allowed,
                         wgml_error *err) {
    int count = 0, i = lo;
    for (; i < hi && v->len[v->order[i]] == d; i++) /* ends here */
        if (d) allowed[v->order[i]] = 1, count++;
    while (i < hi) {
        const uint8_t b = v->bytes[v->order[i]][d];
        int j = i;
        while (j < hi && v->bytes[v->order[j]][d] == b) j++;
        grammar_state *c = NULL;
        if (grammar_state_clone(s, &c, err)) return -1;
        const int r = grammar_accept(c, (const char *)&b, 1, err);
        int k = 0;
        if (r > 0) k = allowed_range(c, v, i, j, d + 1, allowed, err);
        grammar_state_free(c);
        if (r < 0 || k < 0) return -1;
        count += k;
        i = j;
    }
    return count;
}

int grammar_allowed(const grammar_state *s, const grammar_vocab *v, uint8_t *allowed, wgml_error *err) {
    memset(allowed, 0, (size_t)v->n);
    if (s->dead) return 0;
    return allowed_range(s, v, 0, v->n, 0, allowed, err);
}

/* ---- the memo ---- */

typedef struct {
    uint64_t key; /* state id << 8 | byte, + 1 (0: empty slot) */
    int32_t next; /* the state id after the byte, or -1: dead */
} memo_edge;

struct grammar_memo {
    const grammar *g;
    grammar_state **states; /* by id */
    uint64_t *hash;         /* each state's hash */
    int n, cap;
    int32_t *slot; /* states by hash: id + 1, 0 empty (n_slot a power of two) */
    size_t n_slot;
    memo_edge *edge; /* transitions (n_edge a power of two, at most half full) */
    size_t n_edge, used_edge;
    size_t bytes; /* held by the states */
};

#define GRAMMAR_MEMO_MAX_BYTES ((size_t)256 << 20)

static size_t state_bytes(const grammar_state *s) { return sizeof *s + s->n_pool * 4 + s->n * 2 * sizeof(size_t); }

const grammar *grammar_state_grammar(const grammar_state *s) { return s->g; }

static void memo_clear(grammar_memo *m) {
    for (int i = 0; i < m->n; i++) grammar_state_free(m->states[i]);
    m->n = 0;
    m->bytes = 0;
    if (m->slot) memset(m->slot, 0, m->n_slot * sizeof *m->slot);
    if (m->edge) memset(m->edge, 0, m->n_edge * sizeof *m->edge);
    m->used_edge = 0;
}

wgml_status grammar_memo_create(const grammar *g, grammar_memo **out, wgml_error *err) {
    *out = NULL;
    grammar_memo *m = wgml_calloc(1, sizeof *m);
    if (m) {
        m->g = g;
        m->cap = 256, m->n_slot = 512, m->n_edge = 4096;
        m->states = wgml_calloc((size_t)m->cap, sizeof *m->states);
        m->hash = wgml_calloc((size_t)m->cap, sizeof *m->hash);
        m->slot = wgml_calloc(m->n_slot, sizeof *m->slot);
        m->edge = wgml_calloc(m->n_edge, sizeof *m->edge);
    }
    if (!m || !m->states || !m->hash || !m->slot || !m->edge) {
        grammar_memo_free(m);
        return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "grammar: out of memory");
    }
    *out = m;
    return WGML_OK;
}

void grammar_memo_free(grammar_memo *m) {
    if (!m) return;
    memo_clear(m);
    wgml_free(m->states), wgml_free(m->hash), wgml_free(m->slot), wgml_free(m->edge);
    wgml_free(m);
}

/* the id of state s (taken over when new: *taken set; else the caller keeps s), or -1 out of memory */
static int32_t memo_intern(grammar_memo *m, grammar_state *s, int *taken) {
    *taken = 0;
    const uint64_t h = grammar_state_hash(s);
    size_t i = (size_t)h & (m->n_slot - 1);
    for (; m->slot[i]; i = (i + 1) & (m->n_slot - 1)) {
        const int32_t id = m->slot[i] - 1;
        if (m->hash[id] == h && grammar_state_equal(m->states[id], s)) return id;
    }
    if (m->n == m->cap) {
        const int cap = 2 * m->cap;
        grammar_state **st = wgml_realloc(m->states, (size_t)cap * sizeof *st);
        if (!st) return -1;
        m->states = st;
        uint64_t *hs = wgml_realloc(m->hash, (size_t)cap * sizeof *hs);
        if (!hs) return -1;
        m->hash = hs, m->cap = cap;
    }
    if (2 * (size_t)(m->n + 1) > m->n_slot) { /* grow the table */
        const size_t ns = 2 * m->n_slot;
        int32_t *sl = wgml_calloc(ns, sizeof *sl);
        if (!sl) return -1;
        for (int k = 0; k < m->n; k++) {
            size_t j = (size_t)m->hash[k] & (ns - 1);
            while (sl[j]) j = (j + 1) & (ns - 1);
            sl[j] = k + 1;
        }
        wgml_free(m->slot);
        m->slot = sl, m->n_slot = ns;
        i = (size_t)h & (ns - 1);
        while (m->slot[i]) i = (i + 1) & (ns - 1);
    }
    const int32_t id = m->n++;
    m->states[id] = s, m->hash[id] = h;
    m->bytes += state_bytes(s);
    m->slot[i] = id + 1;
    *taken = 1;
    return id;
}

/* the state after byte b from state id: its id, -1 dead, -2 error */
static int32_t memo_step(grammar_memo *m, int32_t id, uint8_t b, wgml_error *err) {
    const uint64_t key = ((uint64_t)id << 8 | b) + 1;
    size_t i = (size_t)(key * 0x9E3779B97F4A7C15ull >> 20) & (m->n_edge - 1);
    for (; m->edge[i].key; i = (i + 1) & (m->n_edge - 1))
        if (m->edge[i].key == key) return m->edge[i].next;
    if (m->bytes > GRAMMAR_MEMO_MAX_BYTES) {
        wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "grammar: too complex (its states need over %zu MiB)",
                  GRAMMAR_MEMO_MAX_BYTES >> 20);
        return -2;
    }
    grammar_state *c;
    if (grammar_state_clone(m->states[id], &c, err)) return -2;
    const int r = grammar_accept(c, (const char *)&b, 1, err);
    int32_t next = -1;
    if (r < 0) {
        grammar_state_free(c);
        return -2;
    }
    if (r > 0) {
        int taken;
        next = memo_intern(m, c, &taken);
        if (!taken) grammar_state_free(c);
        if (next < 0) {
            wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "grammar: out of memory");
            return -2;
        }
    } else {
        grammar_state_free(c);
    }
    if (2 * (m->used_edge + 1) > m->n_edge) { /* grow the edges */
        const size_t ne = 2 * m->n_edge;
        memo_edge *e = wgml_calloc(ne, sizeof *e);
        if (!e) {
            wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "grammar: out of memory");
            return -2;
        }
        for (size_t k = 0; k < m->n_edge; k++) {
            if (!m->edge[k].key) continue;
            size_t j = (size_t)(m->edge[k].key * 0x9E3779B97F4A7C15ull >> 20) & (ne - 1);
            while (e[j].key) j = (j + 1) & (ne - 1);
            e[j] = m->edge[k];
        }
        wgml_free(m->edge);
        m->edge = e, m->n_edge = ne;
        i = (size_t)(key * 0x9E3779B97F4A7C15ull >> 20) & (ne - 1);
        while (m->edge[i].key) i = (i + 1) & (ne - 1);
    }
    m->edge[i] = (memo_edge){key, next};
    m->used_edge++;
    return next;
}

static int allowed_memo_range(grammar_memo *m, int32_t id, const grammar_vocab *v, int lo, int hi, size_t d,
                              uint8_t *allowed, wgml_error *err) {
    int count = 0, i = lo;
    for (; i < hi && v->len[v->order[i]] == d; i++) /* ends here */
        if (d) allowed[v->order[i]] = 1, count++;
    while (i < hi) {
        const uint8_t b = v->bytes[v->order[i]][d];
        int j = i;
        while (j < hi && v->bytes[v->order[j]][d] == b) j++;
        const int32_t next = memo_step(m, id, b, err);
        if (next == -2) return -1;
        if (next >= 0) {
            const int k = allowed_memo_range(m, next, v, i, j, d + 1, allowed, err);
            if (k < 0) return -1;
            count += k;
        }
        i = j;
    }
    return count;
}

int grammar_allowed_memo(grammar_memo *m, const grammar_state *s, const grammar_vocab *v, uint8_t *allowed,
                         wgml_error *err) {
    memset(allowed, 0, (size_t)v->n);
    if (s->dead) return 0;
    if (m->n >= GRAMMAR_MEMO_MAX_STATES || m->bytes > GRAMMAR_MEMO_MAX_BYTES / 2) memo_clear(m);
    grammar_state *c;
    if (grammar_state_clone(s, &c, err)) return -1;
    int taken;
    const int32_t id = memo_intern(m, c, &taken);
    if (!taken) grammar_state_free(c);
    if (id < 0) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "grammar: out of memory"), -1;
    return allowed_memo_range(m, id, v, 0, v->n, 0, allowed, err);
}
