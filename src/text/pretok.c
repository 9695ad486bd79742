/*
 * pretok.c - the pre-tokenizers of byte-level BPE vocabularies.
 *
 * Before BPE merges run, the text is cut into "words" by the regular
 * expressions of the model's Hugging Face tokenizer (tokenizer.ggml.pre names
 * which). We do not embed a regex engine: each expression is a hand-written
 * matcher over code points and their Unicode flags, written to give exactly
 * what a backtracking regex engine gives - at each position the alternatives
 * are tried in order and the first that matches wins (not the longest).
 *
 * A pre-tokenizer is a list of stages. A stage splits every piece made by the
 * previous one: the matches of its expression and the gaps between matches
 * all become pieces (Hugging Face's Split with the "Isolated" behaviour), and
 * anchors and look-aheads see the piece, not the whole text.
 *
 * The expressions (\s is White_Space, \p{X} a general category class):
 *   GPT2    's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 *   LLAMA3  (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}
 *           | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
 *           (the (?i:...) is ASCII-only, as in llama.cpp)
 *   QWEN2   LLAMA3 with \p{N} instead of \p{N}{1,3}
 *   CLASS   [set]{min,max}, optionally preceded by \s?
 *   TRAIL   \s+$
 * and the pre-tokenizers built from them (tokenizer.ggml.pre names):
 *   gpt-2, mpt, ...      GPT2
 *   llama3, llama-bpe    LLAMA3 (and whole-token words skip the merges)
 *   qwen2, ...           QWEN2
 *   starcoder, refact,   \p{N} | GPT2
 *   smollm, ...
 *   falcon               [\p{P}$+<=>^~|`]+ | GPT2 | [0-9][0-9][0-9]
 *   deepseek-llm         [\r\n] | \s?[cased letters]+ | \s?[ASCII/fullwidth
 *                        punctuation]+ | \s+$ | [CJK-ish]+ | \p{N}+
 *   deepseek-coder       [\r\n] | \s?\p{L}+ | \s?\p{P}+ | [CJK-ish]+ | \p{N}
 *   default              [\p{P}$+<=>^~|]+ | GPT2 | \p{N}+ | [0-9][0-9][0-9]
 * "default" is what llama.cpp runs for a BPE vocabulary that names no
 * pre-tokenizer or names "default": GPT-2's expression with punctuation runs
 * and digit runs split first. We follow it so that such files tokenize as they
 * do there.
 *
 * GPT2 as llama.cpp writes it lacks the final |\s+; the gaps give the same
 * pieces (an unmatched space is always one character followed by a match).
 */
#include "core/alloc.h"
#include "core/error.h"
#include "text/tokenizer_impl.h"
#include "text/unicode.h"

#include <string.h>

typedef enum cls_kind {
    CLS_NEWLINE,       /* [\r\n] */
    CLS_LETTER,        /* \p{L} */
    CLS_NUMBER,        /* \p{N} */
    CLS_PUNCT,         /* \p{P} */
    CLS_ASCII_DIGIT,   /* [0-9] */
    CLS_FALCON_PUNCT,  /* [\p{P}\$\+<=>\^~\|`] */
    CLS_DEFAULT_PUNCT, /* [\p{P}\$\+<=>\^~\|] */
    CLS_DS_LETTER,     /* DeepSeek LLM's list of cased letters */
    CLS_DS_PUNCT,      /* [!-/:-~！-／：-～‘-‟　-。] */
    CLS_DS_CJK,        /* [一-龥ࠀ-一가-퟿] */
} cls_kind;

typedef enum rule_kind { RULE_GPT2, RULE_LLAMA3, RULE_QWEN2, RULE_CLASS, RULE_TRAIL } rule_kind;

typedef struct rule {
    rule_kind kind;
    cls_kind cls;
    int opt_space; /* \s? in front */
    unsigned min, max;
} rule;

// clang-format off
#define ANY 0xFFFFFFFFu
#define CLASS(c, sp, lo, hi) {RULE_CLASS, c, sp, lo, hi}
#define GPT2                 {RULE_GPT2, 0, 0, 0, 0}

static const rule RULES_DEFAULT[] = {CLASS(CLS_DEFAULT_PUNCT, 0, 1, ANY), GPT2, CLASS(CLS_NUMBER, 0, 1, ANY),
                                     CLASS(CLS_ASCII_DIGIT, 0, 3, 3)};
static const rule RULES_GPT2[] = {GPT2};
static const rule RULES_LLAMA3[] = {{RULE_LLAMA3, 0, 0, 0, 0}};
static const rule RULES_QWEN2[] = {{RULE_QWEN2, 0, 0, 0, 0}};
static const rule RULES_DEEPSEEK_LLM[] = {CLASS(CLS_NEWLINE, 0, 1, 1), CLASS(CLS_DS_LETTER, 1, 1, ANY),
                                          CLASS(CLS_DS_PUNCT, 1, 1, ANY),  {RULE_TRAIL, 0, 0, 0, 0},
                                          CLASS(CLS_DS_CJK, 0, 1, ANY),    CLASS(CLS_NUMBER, 0, 1, ANY)};
static const rule RULES_DEEPSEEK_CODER[] = {CLASS(CLS_NEWLINE, 0, 1, 1), CLASS(CLS_LETTER, 1, 1, ANY),
                                            CLASS(CLS_PUNCT, 1, 1, ANY), CLASS(CLS_DS_CJK, 0, 1, ANY),
                                            CLASS(CLS_NUMBER, 0, 1, 1)};
static const rule RULES_FALCON[] = {CLASS(CLS_FALCON_PUNCT, 0, 1, ANY), GPT2, CLASS(CLS_ASCII_DIGIT, 0, 3, 3)};
static const rule RULES_STARCODER[] = {CLASS(CLS_NUMBER, 0, 1, 1), GPT2};

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

static const struct {
    const rule *rules;
    size_t n;
} PRETOKS[] = {
    [PRETOK_DEFAULT] = {RULES_DEFAULT, N_OF(RULES_DEFAULT)},
    [PRETOK_GPT2] = {RULES_GPT2, N_OF(RULES_GPT2)},
    [PRETOK_LLAMA3] = {RULES_LLAMA3, N_OF(RULES_LLAMA3)},
    [PRETOK_QWEN2] = {RULES_QWEN2, N_OF(RULES_QWEN2)},
    [PRETOK_DEEPSEEK_LLM] = {RULES_DEEPSEEK_LLM, N_OF(RULES_DEEPSEEK_LLM)},
    [PRETOK_DEEPSEEK_CODER] = {RULES_DEEPSEEK_CODER, N_OF(RULES_DEEPSEEK_CODER)},
    [PRETOK_FALCON] = {RULES_FALCON, N_OF(RULES_FALCON)},
    [PRETOK_STARCODER] = {RULES_STARCODER, N_OF(RULES_STARCODER)},
};
// clang-format on

/* tokenizer.ggml.pre values; aliases share the expressions of their model. */
static const struct {
    const char *name;
    pretok_kind kind;
    int ignore_merges, add_bos;
} NAMES[] = {
    {"default", PRETOK_DEFAULT, 0, 0},
    {"gpt-2", PRETOK_GPT2, 0, 0},
    {"mpt", PRETOK_GPT2, 0, 0},
    {"phi-2", PRETOK_GPT2, 0, 0},
    {"olmo", PRETOK_GPT2, 0, 0},
    {"llama3", PRETOK_LLAMA3, 1, 1},
    {"llama-v3", PRETOK_LLAMA3, 1, 1},
    {"llama-bpe", PRETOK_LLAMA3, 1, 1},
    {"dbrx", PRETOK_LLAMA3, 0, 0},
    {"smaug-bpe", PRETOK_LLAMA3, 0, 0},
    {"qwen2", PRETOK_QWEN2, 0, 0},
    {"stablelm2", PRETOK_QWEN2, 0, 0},
    {"deepseek-r1-qwen", PRETOK_QWEN2, 0, 0},
    {"deepseek-llm", PRETOK_DEEPSEEK_LLM, 0, 0},
    {"deepseek-coder", PRETOK_DEEPSEEK_CODER, 0, 0},
    {"falcon", PRETOK_FALCON, 0, 0},
    {"starcoder", PRETOK_STARCODER, 0, 0},
    {"refact", PRETOK_STARCODER, 0, 0},
    {"smollm", PRETOK_STARCODER, 0, 0},
    {"command-r", PRETOK_STARCODER, 0, 0},
    {"codeshell", PRETOK_STARCODER, 0, 0},
};

int pretok_from_name(const char *name, size_t len, int *ignore_merges, int *add_bos) {
    for (size_t i = 0; i < N_OF(NAMES); i++) {
        if (strlen(NAMES[i].name) == len && memcmp(NAMES[i].name, name, len) == 0) {
            *ignore_merges = NAMES[i].ignore_merges;
            *add_bos = NAMES[i].add_bos;
            return (int)NAMES[i].kind;
        }
    }
    return -1;
}

/* ---- character sets ---- */

typedef struct range {
    uint32_t lo, hi;
} range;

/* Cased letters (Lu, Ll, Lt) as DeepSeek LLM's tokenizer.json lists them. */
static const range DS_LETTERS[] = {
    {0x41, 0x5A},       {0x61, 0x7A},       {0xB5, 0xB5},       {0xC0, 0xD6},       {0xD8, 0xF6},
    {0xF8, 0x1BA},      {0x1BC, 0x1BF},     {0x1C4, 0x293},     {0x295, 0x2AF},     {0x370, 0x373},
    {0x376, 0x377},     {0x37B, 0x37D},     {0x37F, 0x37F},     {0x386, 0x386},     {0x388, 0x38A},
    {0x38C, 0x38C},     {0x38E, 0x3A1},     {0x3A3, 0x3F5},     {0x3F7, 0x481},     {0x48A, 0x52F},
    {0x531, 0x556},     {0x10A0, 0x10C5},   {0x13A0, 0x13F5},   {0x13F8, 0x13FD},   {0x1C90, 0x1CBA},
    {0x1CBD, 0x1CBF},   {0x1D00, 0x1D2B},   {0x1D6B, 0x1D77},   {0x1D79, 0x1D9A},   {0x1E00, 0x1F15},
    {0x1F18, 0x1F1D},   {0x1F20, 0x1F45},   {0x1F48, 0x1F4D},   {0x1F50, 0x1F57},   {0x1F59, 0x1F59},
    {0x1F5B, 0x1F5B},   {0x1F5D, 0x1F5D},   {0x1F5F, 0x1F7D},   {0x1F80, 0x1FB4},   {0x1FB6, 0x1FBC},
    {0x1FBE, 0x1FBE},   {0x1FC2, 0x1FC4},   {0x1FC6, 0x1FCC},   {0x1FD0, 0x1FD3},   {0x1FD6, 0x1FDB},
    {0x1FE0, 0x1FEC},   {0x1FF2, 0x1FF4},   {0x1FF6, 0x1FFC},   {0x2102, 0x2102},   {0x2107, 0x2107},
    {0x210A, 0x2113},   {0x2115, 0x2115},   {0x2119, 0x211D},   {0x2124, 0x2124},   {0x2126, 0x2126},
    {0x2128, 0x2128},   {0x212A, 0x212D},   {0x212F, 0x2134},   {0x2139, 0x2139},   {0x213C, 0x213F},
    {0x2145, 0x2149},   {0x214E, 0x214E},   {0x2183, 0x2184},   {0x2C00, 0x2C7B},   {0x2C7E, 0x2CE4},
    {0x2CEB, 0x2CEE},   {0x2CF2, 0x2CF3},   {0xA640, 0xA66D},   {0xA680, 0xA69B},   {0xA722, 0xA76F},
    {0xA771, 0xA787},   {0xA78B, 0xA78E},   {0xAB70, 0xABBF},   {0xFB00, 0xFB06},   {0xFB13, 0xFB17},
    {0xFF21, 0xFF3A},   {0xFF41, 0xFF5A},   {0x10400, 0x1044F}, {0x104B0, 0x104D3}, {0x104D8, 0x104FB},
    {0x10C80, 0x10CB2}, {0x10CC0, 0x10CF2}, {0x118A0, 0x118DF}, {0x1E900, 0x1E943},
};

static int in_ranges(const range *r, size_t n, uint32_t c) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (c < r[mid].lo)
            hi = mid;
        else if (c > r[mid].hi)
            lo = mid + 1;
        else
            return 1;
    }
    return 0;
}

static int in_class(cls_kind k, uint32_t c, unsigned f) {
    switch (k) {
    case CLS_NEWLINE: return c == '\r' || c == '\n';
    case CLS_LETTER: return (f & UNI_LETTER) != 0;
    case CLS_NUMBER: return (f & UNI_NUMBER) != 0;
    case CLS_PUNCT: return (f & UNI_PUNCT) != 0;
    case CLS_ASCII_DIGIT: return c >= '0' && c <= '9';
    case CLS_FALCON_PUNCT:
        if (c == '`') return 1;
        /* fall through */
    case CLS_DEFAULT_PUNCT:
        return (f & UNI_PUNCT) || c == '$' || c == '+' || c == '<' || c == '=' || c == '>' || c == '^' || c == '~' ||
               c == '|';
    case CLS_DS_LETTER: return in_ranges(DS_LETTERS, N_OF(DS_LETTERS), c);
    case CLS_DS_PUNCT:
        return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x7E) || (c >= 0xFF01 && c <= 0xFF0F) ||
               (c >= 0xFF1A && c <= 0xFF5E) || (c >= 0x2018 && c <= 0x201F) || (c >= 0x3000 && c <= 0x3002);
    case CLS_DS_CJK: return (c >= 0x0800 && c <= 0x9FA5) || (c >= 0xAC00 && c <= 0xD7FF);
    }
    return 0;
}

/* ---- matchers ---- */

/* The text being split: code points and their flags. */
typedef struct subject {
    const uint32_t *c;
    const uint16_t *f;
} subject;

#define IS_SPACE(s, i)  ((s)->f[i] & UNI_SPACE)
#define IS_LETTER(s, i) ((s)->f[i] & UNI_LETTER)
#define IS_NUMBER(s, i) ((s)->f[i] & UNI_NUMBER)
/* [^\s\p{L}\p{N}] */
#define IS_OTHER(s, i) (!((s)->f[i] & (UNI_SPACE | UNI_LETTER | UNI_NUMBER)))

static size_t run_of(const subject *s, size_t p, size_t e, unsigned flag) {
    size_t q = p;
    while (q < e && (s->f[q] & flag))
        q++;
    return q;
}

static size_t run_other(const subject *s, size_t p, size_t e) {
    size_t q = p;
    while (q < e && IS_OTHER(s, q))
        q++;
    return q;
}

static uint32_t ascii_lower(uint32_t c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

/* 's|'t|'re|'ve|'m|'ll|'d at p: the match length or 0. */
static size_t contraction(const subject *s, size_t p, size_t e, int any_case) {
    if (s->c[p] != '\'' || p + 1 >= e) return 0;
    uint32_t c1 = any_case ? ascii_lower(s->c[p + 1]) : s->c[p + 1];
    if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return 2;
    if (p + 2 >= e) return 0;
    uint32_t c2 = any_case ? ascii_lower(s->c[p + 2]) : s->c[p + 2];
    if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) return 3;
    return 0;
}

/* \s+(?!\S)|\s+ at p, where s->c[p] is a space. */
static size_t space_tail(const subject *s, size_t p, size_t e) {
    size_t q = run_of(s, p, e, UNI_SPACE);
    if (q == e) return q - p;         /* whitespace up to the end */
    if (q - p >= 2) return q - p - 1; /* leave the last one to prefix the next word */
    return 1;
}

static size_t match_gpt2(const subject *s, size_t p, size_t e) {
    size_t m = contraction(s, p, e, 0);
    if (m) return m;
    /* ` ?\p{L}+`, ` ?\p{N}+`, ` ?[^\s\p{L}\p{N}]+`: the space, if any, must be followed by the class */
    size_t q = (s->c[p] == ' ' && p + 1 < e) ? p + 1 : p;
    if (IS_LETTER(s, q)) return run_of(s, q, e, UNI_LETTER) - p;
    if (IS_NUMBER(s, q)) return run_of(s, q, e, UNI_NUMBER) - p;
    if (IS_OTHER(s, q)) return run_other(s, q, e) - p;
    return space_tail(s, p, e); /* s->c[p] is a space here */
}

static size_t match_llama3(const subject *s, size_t p, size_t e, size_t max_digits) {
    size_t m = contraction(s, p, e, 1);
    if (m) return m;
    uint32_t c = s->c[p];
    /* [^\r\n\p{L}\p{N}]?\p{L}+ */
    if (!IS_LETTER(s, p) && !IS_NUMBER(s, p) && c != '\r' && c != '\n' && p + 1 < e && IS_LETTER(s, p + 1))
        return run_of(s, p + 1, e, UNI_LETTER) - p;
    if (IS_LETTER(s, p)) return run_of(s, p, e, UNI_LETTER) - p;
    /* \p{N}{1,max} */
    if (IS_NUMBER(s, p)) {
        size_t q = run_of(s, p, e, UNI_NUMBER) - p;
        return q < max_digits ? q : max_digits;
    }
    /* ` ?[^\s\p{L}\p{N}]+[\r\n]*` */
    size_t q = (c == ' ' && p + 1 < e) ? p + 1 : p;
    if (IS_OTHER(s, q)) {
        q = run_other(s, q, e);
        while (q < e && (s->c[q] == '\r' || s->c[q] == '\n'))
            q++;
        return q - p;
    }
    /* \s*[\r\n]+ : up to and including the last newline of the whitespace run */
    size_t end = run_of(s, p, e, UNI_SPACE);
    for (size_t k = end; k > p; k--) {
        if (s->c[k - 1] == '\r' || s->c[k - 1] == '\n') return k - p;
    }
    return space_tail(s, p, e);
}

static size_t run_class(const subject *s, cls_kind k, size_t p, size_t e, unsigned max) {
    size_t q = p;
    while (q < e && (size_t)(q - p) < max && in_class(k, s->c[q], s->f[q]))
        q++;
    return q - p;
}

/* \s?[set]{min,max} */
static size_t match_class(const subject *s, const rule *r, size_t p, size_t e) {
    if (r->opt_space && IS_SPACE(s, p) && p + 1 < e) {
        size_t n = run_class(s, r->cls, p + 1, e, r->max);
        if (n >= r->min) return n + 1;
    }
    size_t n = run_class(s, r->cls, p, e, r->max);
    return n >= r->min ? n : 0;
}

static size_t match_at(const subject *s, const rule *r, size_t p, size_t e) {
    switch (r->kind) {
    case RULE_GPT2: return match_gpt2(s, p, e);
    case RULE_LLAMA3: return match_llama3(s, p, e, 3);
    case RULE_QWEN2: return match_llama3(s, p, e, 1);
    case RULE_CLASS: return match_class(s, r, p, e);
    case RULE_TRAIL: break;
    }
    return 0;
}

/* ---- splitting ---- */

static wgml_status emit(tok_vec *out, size_t b, size_t e, wgml_error *err) {
    wgml_status st = tok_vec_push(out, (uint32_t)b, err);
    return st == WGML_OK ? tok_vec_push(out, (uint32_t)e, err) : st;
}

static wgml_status split_piece(const subject *s, const rule *r, size_t b, size_t e, tok_vec *out, wgml_error *err) {
    wgml_status st;
    if (r->kind == RULE_TRAIL) { /* \s+$: the whitespace suffix, if any */
        size_t t = e;
        while (t > b && IS_SPACE(s, t - 1))
            t--;
        if (t > b && (st = emit(out, b, t, err)) != WGML_OK) return st;
        return t < e ? emit(out, t, e, err) : WGML_OK;
    }
    size_t gap = b, p = b;
    while (p < e) {
        size_t m = match_at(s, r, p, e);
        if (!m) {
            p++;
            continue;
        }
        if (gap < p && (st = emit(out, gap, p, err)) != WGML_OK) return st;
        if ((st = emit(out, p, p + m, err)) != WGML_OK) return st;
        p += m;
        gap = p;
    }
    return gap < e ? emit(out, gap, e, err) : WGML_OK;
}

wgml_status pretok_split(pretok_kind kind, const uint32_t *cps, size_t n, tok_vec *out, wgml_error *err) {
    if (n == 0) return WGML_OK;
    uint16_t *flags = wgml_malloc(n * sizeof *flags);
    if (!flags) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "pre-tokenizer: out of memory for %zu characters", n);
    for (size_t i = 0; i < n; i++)
        flags[i] = (uint16_t)uni_flags(cps[i]);
    subject s = {cps, flags};

    const rule *rules = PRETOKS[kind].rules;
    size_t n_rules = PRETOKS[kind].n;
    tok_vec a = {0}, b = {0};
    wgml_status st = emit(&a, 0, n, err);
    for (size_t k = 0; k < n_rules && st == WGML_OK; k++) {
        tok_vec *dst = (k + 1 == n_rules) ? out : &b;
        if (dst == &b) b.n = 0;
        for (size_t i = 0; i + 1 < a.n && st == WGML_OK; i += 2)
            st = split_piece(&s, &rules[k], a.v[i], a.v[i + 1], dst, err);
        if (dst == &b) {
            tok_vec t = a;
            a = b;
            b = t;
        }
    }
    tok_vec_free(&a);
    tok_vec_free(&b);
    wgml_free(flags);
    return st;
}
