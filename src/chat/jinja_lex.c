/*
 * jinja_lex.c - template text -> tokens, with Jinja 3.1's whitespace rules
 * as Hugging Face configures them (trim_blocks and lstrip_blocks on,
 * keep_trailing_newline off):
 *
 *   - line ends \r\n and \r become \n, and one final \n of the template goes;
 *   - "{%-", "{{-", "{#-" strip all whitespace before the tag, "-%}", "-}}",
 *     "-#}" all whitespace after it;
 *   - trim_blocks: a block or comment end "%}" / "#}" eats one "\n" after it;
 *   - lstrip_blocks: spaces and tabs between a line's start and a block or
 *     comment tag go, where the text before the tag starts a line ("{%+"
 *     keeps them, "+%}" keeps the newline);
 *   - {% raw %}...{% endraw %} is text, comments are dropped;
 *   - inside a tag, "%}" and "}}" end it only outside brackets.
 *
 * Expression tokens: names, strings (Python's escapes decoded), integers and
 * floats (with _ separators), operators. Each token has its line and column.
 */
#include "chat/jinja_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    jinja_env *e;
    const char *s;
    size_t n, pos;
    size_t lc_pos; /* line/column are known up to here */
    int line, col;
    jtoks *out;
} lexer;

static void where(lexer *L, size_t at, int *line, int *col) {
    while (L->lc_pos < at) {
        if (L->s[L->lc_pos++] == '\n')
            L->line++, L->col = 1;
        else if (((unsigned char)L->s[L->lc_pos - 1] & 0xc0) != 0x80)
            L->col++;
    }
    *line = L->line;
    *col = L->col;
}

static jtok *push(lexer *L, int kind, size_t at) {
    jtoks *t = L->out;
    if (t->n == t->cap) {
        size_t nc = t->cap ? t->cap * 2 : 256;
        jtok *nv = jx_grow(L->e, t->v, t->cap * sizeof *t->v, nc * sizeof *t->v);
        if (!nv) return NULL;
        t->v = nv;
        t->cap = nc;
    }
    jtok *k = &t->v[t->n++];
    memset(k, 0, sizeof *k);
    k->kind = (uint8_t)kind;
    where(L, at, &k->line, &k->col);
    return k;
}

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

static int starts(const lexer *L, size_t at, const char *w) {
    size_t n = strlen(w);
    return at <= L->n && L->n - at >= n && memcmp(L->s + at, w, n) == 0;
}

static int fail(lexer *L, size_t at, const char *msg) {
    int line, col;
    where(L, at, &line, &col);
    return jx_error_at(L->e, line, col, "%s", msg);
}

/* Emits text [a, b) after the whitespace rules for the tag that follows. */
static int emit_text(lexer *L, size_t a, size_t b, char sign, int lstrip_ok, int line_starting) {
    if (sign == '-') {
        while (b > a && is_space(L->s[b - 1]))
            b--;
    } else if (sign != '+' && lstrip_ok) {
        size_t l = b;
        while (l > a && L->s[l - 1] != '\n')
            l--;
        if (l > a || line_starting) {
            size_t k = l;
            while (k < b &&
                   (L->s[k] == ' ' || L->s[k] == '\t' || L->s[k] == '\r' || L->s[k] == '\f' || L->s[k] == '\v'))
                k++;
            if (k == b) b = l;
        }
    }
    if (b <= a) return 0;
    jtok *t = push(L, T_TEXT, a);
    if (!t || !(t->str = jx_str(L->e, L->s + a, b - a))) return -1;
    return 0;
}

/* After a tag's end at `at` (past the closing characters), applies "-" and trim_blocks; returns the new position. */
static size_t after_end(lexer *L, size_t at, char sign, int trim) {
    if (sign == '-') {
        while (at < L->n && is_space(L->s[at]))
            at++;
    } else if (sign != '+' && trim && at < L->n && L->s[at] == '\n') {
        at++;
    }
    return at;
}

static int hexval(char c) {
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

/* A string literal at L->pos: Python's unicode-escape decoding of its body. */
static int lex_string(lexer *L) {
    size_t start = L->pos;
    char q = L->s[L->pos++];
    jx_buf b = {0};
    for (;;) {
        if (L->pos >= L->n) return fail(L, start, "unterminated string");
        char c = L->s[L->pos];
        if (c == q) {
            L->pos++;
            break;
        }
        if (c != '\\') {
            size_t a = L->pos;
            while (L->pos < L->n && L->s[L->pos] != q && L->s[L->pos] != '\\')
                L->pos++;
            if (jx_buf_put(L->e, &b, L->s + a, L->pos - a)) return -1;
            continue;
        }
        if (L->pos + 1 >= L->n) return fail(L, start, "unterminated string");
        char x = L->s[L->pos + 1];
        L->pos += 2;
        const char *simple = NULL;
        switch (x) {
        case '\n': continue; /* a line continuation */
        case '\\': simple = "\\"; break;
        case '\'': simple = "'"; break;
        case '"': simple = "\""; break;
        case 'a': simple = "\a"; break;
        case 'b': simple = "\b"; break;
        case 'f': simple = "\f"; break;
        case 'n': simple = "\n"; break;
        case 'r': simple = "\r"; break;
        case 't': simple = "\t"; break;
        case 'v': simple = "\v"; break;
        default: break;
        }
        if (simple) {
            if (jx_buf_put(L->e, &b, simple, 1)) return -1;
            continue;
        }
        if (x >= '0' && x <= '7') {
            uint32_t v = (uint32_t)(x - '0');
            for (int k = 0; k < 2 && L->pos < L->n && L->s[L->pos] >= '0' && L->s[L->pos] <= '7'; k++)
                v = v * 8 + (uint32_t)(L->s[L->pos++] - '0');
            if (jx_put_cp(L->e, &b, (int32_t)v)) return -1;
            continue;
        }
        int digits = x == 'x' ? 2 : x == 'u' ? 4 : x == 'U' ? 8 : 0;
        if (digits) {
            uint32_t v = 0;
            for (int k = 0; k < digits; k++) {
                int h = L->pos < L->n ? hexval(L->s[L->pos]) : -1;
                if (h < 0) return fail(L, start, "truncated \\x, \\u or \\U escape in a string");
                v = v * 16 + (uint32_t)h;
                L->pos++;
            }
            if (v > 0x10ffff) return fail(L, start, "illegal Unicode character in a string");
            if (jx_put_cp(L->e, &b, (int32_t)v)) return -1;
            continue;
        }
        /* an unknown escape stays as written */
        char two[2] = {'\\', x};
        if (jx_buf_put(L->e, &b, two, 2)) return -1;
    }
    jtok *t = push(L, T_STRING, start);
    if (!t || !(t->str = jx_buf_take(L->e, &b))) return -1;
    return 0;
}

static int is_digit(char c) { return c >= '0' && c <= '9'; }

/* digits with single underscores between them, at p; returns the end */
static size_t digits_end(const lexer *L, size_t p) {
    if (p >= L->n || !is_digit(L->s[p])) return p;
    while (p < L->n) {
        if (is_digit(L->s[p]))
            p++;
        else if (L->s[p] == '_' && p + 1 < L->n && is_digit(L->s[p + 1]))
            p++;
        else
            break;
    }
    return p;
}

static int lex_number(lexer *L) {
    size_t start = L->pos, p = digits_end(L, L->pos);
    int is_float = 0;
    if (p + 1 < L->n && L->s[p] == '.' && is_digit(L->s[p + 1])) {
        is_float = 1;
        p = digits_end(L, p + 1);
    }
    if (p < L->n && (L->s[p] == 'e' || L->s[p] == 'E')) {
        size_t q = p + 1;
        if (q < L->n && (L->s[q] == '+' || L->s[q] == '-')) q++;
        if (q < L->n && is_digit(L->s[q])) {
            is_float = 1;
            p = digits_end(L, q);
        }
    }
    /* the digits without underscores, all of them (a float literal may be long: 1000...0.5) */
    char small[128], *buf = p - start < sizeof small ? small : jx_alloc(L->e, p - start + 1);
    if (!buf) return -1;
    size_t k = 0;
    for (size_t i = start; i < p; i++)
        if (L->s[i] != '_') buf[k++] = L->s[i];
    buf[k] = '\0';
    jtok *t = push(L, is_float ? T_FLOAT : T_INT, start);
    if (!t) return -1;
    if (is_float) {
        t->f = strtod(buf, NULL);
    } else {
        int64_t v = 0;
        for (size_t i = 0; i < k; i++) {
            int d = buf[i] - '0';
            if (v > (INT64_MAX - d) / 10) return fail(L, start, "integer literal too large");
            v = v * 10 + d;
        }
        t->i = v;
    }
    L->pos = p;
    return 0;
}

/* The tokens inside a {{ }} or {% %} tag, from L->pos to its end marker; sets *end_sign. */
static int lex_tag(lexer *L, int block, char *end_sign) {
    static const char *two[] = {"//", "**", "==", "!=", "<=", ">="};
    char stack[64];
    int depth = 0;
    for (;;) {
        while (L->pos < L->n && is_space(L->s[L->pos]))
            L->pos++;
        if (L->pos >= L->n)
            return fail(L, L->pos,
                        block ? "unexpected end of template: '%}' expected"
                              : "unexpected end of template: '}}' expected");
        const char *close = block ? "%}" : "}}";
        if (depth == 0) {
            char sign = 0;
            size_t at = L->pos;
            if ((L->s[at] == '-' || L->s[at] == '+') && starts(L, at + 1, close)) sign = L->s[at++];
            if (starts(L, at, close)) {
                jtok *t = push(L, block ? T_BLOCK_END : T_VAR_END, L->pos);
                if (!t) return -1;
                L->pos = at + 2;
                *end_sign = sign;
                return 0;
            }
        }
        if (jx_step(L->e, 1)) return -1;
        char c = L->s[L->pos];
        if (c == '\'' || c == '"') {
            if (lex_string(L)) return -1;
            continue;
        }
        if (is_digit(c)) {
            if (lex_number(L)) return -1;
            continue;
        }
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_') {
            size_t a = L->pos;
            while (L->pos < L->n &&
                   ((L->s[L->pos] >= 'a' && L->s[L->pos] <= 'z') || (L->s[L->pos] >= 'A' && L->s[L->pos] <= 'Z') ||
                    L->s[L->pos] == '_' || is_digit(L->s[L->pos])))
                L->pos++;
            jtok *t = push(L, T_NAME, a);
            if (!t || !(t->str = jx_str(L->e, L->s + a, L->pos - a))) return -1;
            continue;
        }
        jtok *t = push(L, T_OP, L->pos);
        if (!t) return -1;
        int len = 0;
        for (size_t k = 0; k < sizeof two / sizeof two[0]; k++)
            if (starts(L, L->pos, two[k])) len = 2;
        if (!len) {
            if (!strchr("+-/*%~[](){}<>=.:|,;", c) || c == '\0')
                return fail(L, L->pos, "unexpected character in a tag");
            len = 1;
        }
        memcpy(t->op, L->s + L->pos, (size_t)len);
        t->op[len] = '\0';
        L->pos += (size_t)len;
        if (len == 1 && (c == '(' || c == '[' || c == '{')) {
            if (depth == (int)sizeof stack) return fail(L, L->pos - 1, "brackets nested too deeply");
            stack[depth++] = c == '(' ? ')' : c == '[' ? ']' : '}';
        } else if (len == 1 && (c == ')' || c == ']' || c == '}')) {
            if (depth == 0 || stack[depth - 1] != c) return fail(L, L->pos - 1, "unbalanced bracket");
            depth--;
        }
    }
}

/* At a "{%" at `at`: is it "{% raw %}" (with optional - / +)? Sets *content (past the tag) and *close_sign. */
static int raw_begin(const lexer *L, size_t at, size_t *content, char *close_sign) {
    size_t p = at + 2;
    if (p < L->n && (L->s[p] == '-' || L->s[p] == '+')) p++;
    while (p < L->n && is_space(L->s[p]))
        p++;
    if (!starts(L, p, "raw")) return 0;
    p += 3;
    while (p < L->n && is_space(L->s[p]))
        p++;
    *close_sign = 0;
    if (p < L->n && L->s[p] == '-') *close_sign = '-', p++;
    if (!starts(L, p, "%}")) return 0;
    *content = p + 2;
    return 1;
}

/* Finds "{% endraw %}" from p: its start, its opening sign, its closing sign and its end. */
static int raw_end(const lexer *L, size_t p, size_t *tag, char *open_sign, char *close_sign, size_t *end) {
    for (; p + 1 < L->n; p++) {
        if (L->s[p] != '{' || L->s[p + 1] != '%') continue;
        size_t q = p + 2;
        *open_sign = 0;
        if (q < L->n && (L->s[q] == '-' || L->s[q] == '+')) *open_sign = L->s[q++];
        while (q < L->n && is_space(L->s[q]))
            q++;
        if (!starts(L, q, "endraw")) continue;
        q += 6;
        while (q < L->n && is_space(L->s[q]))
            q++;
        *close_sign = 0;
        if (q < L->n && (L->s[q] == '-' || L->s[q] == '+')) *close_sign = L->s[q++];
        if (!starts(L, q, "%}")) continue;
        *tag = p;
        *end = q + 2;
        return 1;
    }
    return 0;
}

int jx_lex(jinja_env *e, const char *src, size_t len, jtoks *out) {
    /* newlines normalized, the final one dropped */
    char *s = jx_alloc(e, len + 1);
    if (!s) return -1;
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '\r') {
            s[n++] = '\n';
            if (i + 1 < len && src[i + 1] == '\n') i++;
        } else {
            s[n++] = src[i];
        }
    }
    if (n && s[n - 1] == '\n') n--;
    s[n] = '\0';
    lexer L = {e, s, n, 0, 0, 1, 1, out};
    int line_starting = 1;
    while (L.pos < L.n) {
        /* the next tag */
        size_t t = L.pos;
        while (t + 1 < L.n && !(L.s[t] == '{' && (L.s[t + 1] == '{' || L.s[t + 1] == '%' || L.s[t + 1] == '#')))
            t++;
        if (t + 1 >= L.n) {
            if (emit_text(&L, L.pos, L.n, 0, 0, 0)) return -1;
            break;
        }
        char kind = L.s[t + 1];
        char sign = t + 2 < L.n && (L.s[t + 2] == '-' || L.s[t + 2] == '+') ? L.s[t + 2] : 0;
        if (emit_text(&L, L.pos, t, sign, kind != '{', line_starting)) return -1;
        size_t content;
        char csign;
        if (kind == '#') {
            size_t p = t + 2 + (sign ? 1 : 0), endp = 0;
            char esign = 0;
            for (; p + 1 < L.n; p++) {
                if (L.s[p] == '#' && L.s[p + 1] == '}') {
                    endp = p + 2;
                    if (p > t + 2 && (L.s[p - 1] == '-' || L.s[p - 1] == '+')) esign = L.s[p - 1];
                    break;
                }
            }
            if (!endp) return fail(&L, t, "unterminated comment: '#}' expected");
            L.pos = after_end(&L, endp, esign, 1);
        } else if (kind == '%' && raw_begin(&L, t, &content, &csign)) {
            size_t tag, end;
            char osign, esign;
            if (!raw_end(&L, content, &tag, &osign, &esign, &end))
                return fail(&L, t, "unexpected end of template: '{% endraw %}' expected");
            if (csign == '-')
                while (content < tag && is_space(L.s[content]))
                    content++;
            if (emit_text(&L, content, tag, osign, 1, 0)) return -1;
            L.pos = after_end(&L, end, esign, 1);
        } else {
            int block = kind == '%';
            jtok *bt = push(&L, block ? T_BLOCK_BEGIN : T_VAR_BEGIN, t);
            if (!bt) return -1;
            L.pos = t + 2 + (sign ? 1 : 0);
            char esign = 0;
            if (lex_tag(&L, block, &esign)) return -1;
            L.pos = after_end(&L, L.pos, esign, block);
        }
        line_starting = L.pos > 0 && L.s[L.pos - 1] == '\n';
    }
    return push(&L, T_EOF, L.n) ? 0 : -1;
}
