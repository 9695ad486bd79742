/*
 * whisper_timing.c - word timestamps (see whisper_timing.h), written from
 * the rules of the official timing.py and tokenizer.py (openai/whisper
 * v20250625) and whisper.cpp's alignment-head table.
 */
#include "model/whisper/whisper_timing.h"

#include "core/alloc.h"
#include "core/error.h"
#include "model/whisper/whisper_decode.h" /* whisper_strip */
#include "text/unicode.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- alignment heads ---- */

typedef struct ahead_preset {
    const char *name;
    int n_mels, n_vocab, n_audio_layer, n_text_layer, n_text_state, n_text_head;
    int n;                 /* heads */
    const int (*heads)[2]; /* {text layer, head} */
} ahead_preset;

/* _ALIGNMENT_HEADS of whisper/__init__.py (base85 + gzip boolean masks
 * [n_text_layer][n_text_head]) decoded, in (layer, head) order: equal to
 * whisper.cpp's g_aheads_* tables. */
static const int H_TINY_EN[][2] = {{1, 0}, {2, 0}, {2, 5}, {3, 0}, {3, 1}, {3, 2}, {3, 3}, {3, 4}};
static const int H_TINY[][2] = {{2, 2}, {3, 0}, {3, 2}, {3, 3}, {3, 4}, {3, 5}};
static const int H_BASE_EN[][2] = {{3, 3}, {4, 7}, {5, 1}, {5, 5}, {5, 7}};
static const int H_BASE[][2] = {{3, 1}, {4, 2}, {4, 3}, {4, 7}, {5, 1}, {5, 2}, {5, 4}, {5, 6}};
static const int H_SMALL_EN[][2] = {{6, 6},  {7, 0},  {7, 3},   {7, 8},  {8, 2},  {8, 5},  {8, 7},
                                    {9, 0},  {9, 4},  {9, 8},   {9, 10}, {10, 0}, {10, 1}, {10, 2},
                                    {10, 3}, {10, 6}, {10, 11}, {11, 2}, {11, 4}};
static const int H_SMALL[][2] = {{5, 3}, {5, 9}, {8, 0}, {8, 4}, {8, 7}, {8, 8}, {9, 0}, {9, 7}, {9, 9}, {10, 5}};
static const int H_MEDIUM_EN[][2] = {{11, 4},  {14, 1}, {14, 12}, {14, 14}, {15, 4},  {16, 0},
                                     {16, 4},  {16, 9}, {17, 12}, {17, 14}, {18, 7},  {18, 10},
                                     {18, 15}, {20, 0}, {20, 3},  {20, 9},  {20, 14}, {21, 12}};
static const int H_MEDIUM[][2] = {{13, 15}, {15, 4}, {15, 15}, {16, 1}, {20, 0}, {23, 4}};
static const int H_LARGE_V1[][2] = {{9, 19},  {11, 2},  {11, 4}, {11, 17}, {22, 7},
                                    {22, 11}, {22, 17}, {23, 2}, {23, 15}};
static const int H_LARGE_V2[][2] = {{10, 12}, {13, 17}, {16, 11}, {16, 12}, {16, 13}, {17, 15}, {17, 16}, {18, 4},
                                    {18, 11}, {18, 19}, {19, 11}, {21, 2},  {21, 3},  {22, 3},  {22, 9},  {22, 12},
                                    {23, 5},  {23, 7},  {23, 13}, {25, 5},  {26, 1},  {26, 12}, {27, 15}};
static const int H_LARGE_V3[][2] = {{7, 0},   {10, 17}, {12, 18}, {13, 12}, {16, 1},
                                    {17, 14}, {19, 11}, {21, 4},  {24, 1},  {25, 6}};
static const int H_TURBO[][2] = {{2, 4}, {2, 11}, {3, 3}, {3, 6}, {3, 11}, {3, 14}};

#define PRESET(name, mels, vocab, al, tl, st, hd, h)                                                                   \
    { name, mels, vocab, al, tl, st, hd, (int)(sizeof h / sizeof h[0]), h }

/* By shapes, the first match wins: large-v2 comes before large-v1 (same shapes). */
static const ahead_preset PRESETS[] = {
    PRESET("tiny.en", 80, 51864, 4, 4, 384, 6, H_TINY_EN),
    PRESET("tiny", 80, 51865, 4, 4, 384, 6, H_TINY),
    PRESET("base.en", 80, 51864, 6, 6, 512, 8, H_BASE_EN),
    PRESET("base", 80, 51865, 6, 6, 512, 8, H_BASE),
    PRESET("small.en", 80, 51864, 12, 12, 768, 12, H_SMALL_EN),
    PRESET("small", 80, 51865, 12, 12, 768, 12, H_SMALL),
    PRESET("medium.en", 80, 51864, 24, 24, 1024, 16, H_MEDIUM_EN),
    PRESET("medium", 80, 51865, 24, 24, 1024, 16, H_MEDIUM),
    PRESET("large-v2", 80, 51865, 32, 32, 1280, 20, H_LARGE_V2),
    PRESET("large-v1", 80, 51865, 32, 32, 1280, 20, H_LARGE_V1),
    PRESET("large-v3", 128, 51866, 32, 32, 1280, 20, H_LARGE_V3),
    PRESET("large-v3-turbo", 128, 51866, 32, 4, 1280, 20, H_TURBO),
};
#define N_PRESETS ((int)(sizeof PRESETS / sizeof PRESETS[0]))

static int copy_heads(const ahead_preset *p, int (*heads)[2], int cap) {
    for (int i = 0; i < p->n && i < cap; i++) {
        heads[i][0] = p->heads[i][0];
        heads[i][1] = p->heads[i][1];
    }
    return p->n;
}

int whisper_alignment_heads(int n_mels, int n_vocab, int n_audio_layer, int n_text_layer, int n_text_state,
                            int n_text_head, int (*heads)[2], int cap, const char **preset) {
    if (preset) *preset = NULL;
    if (n_text_layer <= 0 || n_text_head <= 0) return -1;
    for (int i = 0; i < N_PRESETS; i++) {
        const ahead_preset *p = &PRESETS[i];
        if (p->n_mels == n_mels && p->n_vocab == n_vocab && p->n_audio_layer == n_audio_layer &&
            p->n_text_layer == n_text_layer && p->n_text_state == n_text_state && p->n_text_head == n_text_head) {
            if (preset) *preset = p->name;
            return copy_heads(p, heads, cap);
        }
    }
    /* model.py: all_heads[n_text_layer // 2:] = True */
    long total = (long)(n_text_layer - n_text_layer / 2) * n_text_head;
    if (total > 1L << 30) return -1;
    int k = 0;
    for (int l = n_text_layer / 2; l < n_text_layer; l++)
        for (int h = 0; h < n_text_head; h++, k++)
            if (k < cap) {
                heads[k][0] = l;
                heads[k][1] = h;
            }
    return k;
}

int whisper_alignment_heads_preset(const char *name, int (*heads)[2], int cap) {
    if (!name) return -1;
    if (!strcmp(name, "large")) name = "large-v3"; /* the official aliases */
    if (!strcmp(name, "turbo")) name = "large-v3-turbo";
    for (int i = 0; i < N_PRESETS; i++)
        if (!strcmp(PRESETS[i].name, name)) return copy_heads(&PRESETS[i], heads, cap);
    return -1;
}

/* ---- the model side's inputs ---- */

int whisper_alignment_tokens(const whisper_specials *sp, const int32_t *sot, int n_sot, const int32_t *text, int n_text,
                             int32_t *out, int cap) {
    int k = 0;
#define PUT(id)                                                                                                        \
    do {                                                                                                               \
        if (k < cap) out[k] = (id);                                                                                    \
        k++;                                                                                                           \
    } while (0)
    for (int i = 0; i < n_sot; i++)
        PUT(sot[i]);
    PUT(sp->no_timestamps);
    for (int i = 0; i < n_text; i++)
        PUT(text[i]);
    PUT(sp->eot);
#undef PUT
    return k;
}

float whisper_text_token_prob(const float *logits, int eot, int32_t token) {
    if (token < 0 || token >= eot) return 0.0f;
    float mx = -INFINITY;
    for (int i = 0; i < eot; i++)
        if (logits[i] > mx) mx = logits[i];
    double s = 0;
    for (int i = 0; i < eot; i++)
        s += exp((double)logits[i] - (double)mx);
    return (float)(exp((double)logits[token] - (double)mx) / s);
}

/* ---- the steps ---- */

void whisper_zscore_tokens(float *w, int n_rows, int n_frames) {
    if (n_rows <= 0) return;
    for (int f = 0; f < n_frames; f++) {
        double s = 0;
        for (int r = 0; r < n_rows; r++)
            s += w[(size_t)r * n_frames + f];
        double mean = s / n_rows, v = 0;
        for (int r = 0; r < n_rows; r++) {
            double d = w[(size_t)r * n_frames + f] - mean;
            v += d * d;
        }
        float m = (float)mean, sd = (float)sqrt(v / n_rows);
        for (int r = 0; r < n_rows; r++) {
            float *p = &w[(size_t)r * n_frames + f];
            *p = (*p - m) / sd;
        }
    }
}

/* torch.sort's order: NaN above everything. */
static int sorts_after(float a, float b) { return a > b || (isnan(a) && !isnan(b)); }

void whisper_median_filter(const float *x, int n, int width, float *out) {
    int pad = width / 2;
    if (n <= pad || width < 1 || width > 63 || width % 2 == 0) { /* (the official code asserts an odd width) */
        for (int i = 0; i < n; i++)
            out[i] = x[i];
        return;
    }
    int has_nan = 0;
    for (int i = 0; i < n; i++)
        has_nan |= isnan(x[i]);
    float v[63];
    for (int i = 0; i < n; i++) {
        for (int k = 0; k < width; k++) {
            int p = i + k - pad;
            if (p < 0)
                p = -p; /* reflect: x[-k] = x[k] */
            else if (p > n - 1)
                p = 2 * (n - 1) - p; /* x[n - 1 + k] = x[n - 1 - k] */
            float val = x[p];
            int j = k; /* insertion sort (without NaN, plain comparisons: the same order) */
            if (has_nan)
                for (; j > 0 && sorts_after(v[j - 1], val); j--)
                    v[j] = v[j - 1];
            else
                for (; j > 0 && v[j - 1] > val; j--)
                    v[j] = v[j - 1];
            v[j] = val;
        }
        out[i] = v[pad];
    }
}

wgml_status whisper_dtw(const float *x, int n, int m, int *text_idx, int *time_idx, int *len, wgml_error *err) {
    *len = 0;
    if (n < 0 || m < 0 || (long long)(n + 1) * (m + 1) > (1LL << 31))
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "whisper dtw: bad size %d x %d", n, m);
    size_t w = (size_t)m + 1, cells = ((size_t)n + 1) * w;
    float *cost = wgml_malloc(cells * sizeof *cost);
    unsigned char *trace = wgml_malloc(cells);
    if (!cost || !trace) {
        wgml_free(cost);
        wgml_free(trace);
        return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "whisper dtw: out of memory (%d x %d)", n, m);
    }
    for (size_t i = 0; i < cells; i++)
        cost[i] = INFINITY;
    cost[0] = 0;
    for (int j = 1; j <= m; j++)
        for (int i = 1; i <= n; i++) {
            float c0 = cost[(size_t)(i - 1) * w + j - 1], c1 = cost[(size_t)(i - 1) * w + j],
                  c2 = cost[(size_t)i * w + j - 1], c;
            unsigned char t;
            if (c0 < c1 && c0 < c2)
                c = c0, t = 0;
            else if (c1 < c0 && c1 < c2)
                c = c1, t = 1;
            else
                c = c2, t = 2;
            /* numba: float64 x + float32 c, stored in the float32 table */
            cost[(size_t)i * w + j] = (float)((double)x[(size_t)(i - 1) * m + j - 1] + (double)c);
            trace[(size_t)i * w + j] = t;
        }
    int i = n, j = m, k = 0;
    while (i > 0 || j > 0) {
        text_idx[k] = i - 1;
        time_idx[k] = j - 1;
        k++;
        /* the backtrace's trace[0, :] = 2 then trace[:, 0] = 1 */
        int t = i == 0 ? 2 : j == 0 ? 1 : trace[(size_t)i * w + j];
        if (t == 0)
            i--, j--;
        else if (t == 1)
            i--;
        else
            j--;
    }
    for (int a = 0, b = k - 1; a < b; a++, b--) {
        int ti = text_idx[a], tj = time_idx[a];
        text_idx[a] = text_idx[b], time_idx[a] = time_idx[b];
        text_idx[b] = ti, time_idx[b] = tj;
    }
    *len = k;
    wgml_free(cost);
    wgml_free(trace);
    return WGML_OK;
}

/* ---- words ---- */

void whisper_words_free(whisper_words *ws) {
    if (!ws) return;
    for (int i = 0; i < ws->n; i++)
        wgml_free(ws->w[i].text);
    wgml_free(ws->w);
    ws->w = NULL;
    ws->n = ws->cap = 0;
}

static wgml_status oom(wgml_error *err) {
    return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "whisper word timestamps: out of memory");
}

/* Appends a word of text[0 .. len) (copied). */
static wgml_status push_word(whisper_words *ws, const char *text, size_t len, int begin, int n_tokens,
                             wgml_error *err) {
    if (ws->n == ws->cap) {
        int cap = ws->cap ? ws->cap * 2 : 16;
        whisper_word *w = wgml_realloc(ws->w, (size_t)cap * sizeof *w);
        if (!w) return oom(err);
        ws->w = w;
        ws->cap = cap;
    }
    char *s = wgml_strndup(text, len);
    if (!s) return oom(err);
    ws->w[ws->n++] = (whisper_word){.text = s, .token_begin = begin, .n_tokens = n_tokens};
    return WGML_OK;
}

/* *dst = a + b (either may be *dst); frees the old *dst. */
static int concat(char **dst, const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    char *s = wgml_malloc(la + lb + 1);
    if (!s) return -1;
    memcpy(s, a, la);
    memcpy(s + la, b, lb);
    s[la + lb] = 0;
    wgml_free(*dst);
    *dst = s;
    return 0;
}

/* Python's `needle in haystack` for strings (the empty string is in every string). */
static int py_in(const char *needle, size_t n, const char *hay) {
    if (n == 0) return 1;
    for (const char *p = hay; *p; p++)
        if (!strncmp(p, needle, n)) return 1;
    return 0;
}

/* s.strip() in hay */
static int stripped_in(const char *s, const char *hay) {
    size_t b, e;
    whisper_strip(s, &b, &e);
    return py_in(s + b, e - b, hay);
}

static int ends_with_space(const char *s) {
    size_t n = strlen(s);
    return n > 0 && s[n - 1] == ' ';
}

int whisper_splits_on_unicode(const char *language) {
    static const char *const L[] = {"zh", "ja", "th", "lo", "my", "yue"};
    if (!language) return 0;
    for (size_t i = 0; i < sizeof L / sizeof L[0]; i++)
        if (!strcmp(language, L[i])) return 1;
    return 0;
}

/* decode_with_timestamps of ids[0 .. n) into *buf (grown as needed); returns the length, -1 on failure. */
static int decode_into(const whisper_tokenizer *t, const int32_t *ids, int n, char **buf, int *cap) {
    for (;;) {
        int len = whisper_text_decode_with_timestamps(t, ids, n, *buf, *cap);
        if (len < 0) return -1;
        if (len < *cap) return len;
        int nc = len + 64 > 2 * *cap ? len + 64 : 2 * *cap;
        char *b = wgml_realloc(*buf, (size_t)nc);
        if (!b) return -1;
        *buf = b;
        *cap = nc;
    }
}

#define REPLACEMENT "\xEF\xBF\xBD" /* U+FFFD */

/* split_tokens_on_unicode */
static wgml_status split_on_unicode(const whisper_tokenizer *t, const int32_t *tokens, int n, whisper_words *out,
                                    wgml_error *err) {
    wgml_status st = WGML_OK;
    char *buf = NULL;
    int cap = 0;
    uint32_t *full = NULL;
    int len = decode_into(t, tokens, n, &buf, &cap);
    if (len < 0) goto fail_oom;
    /* the whole text's code points (the decoder's output is valid UTF-8) */
    full = wgml_malloc(((size_t)len + 1) * sizeof *full);
    if (!full) goto fail_oom;
    int n_full = 0;
    for (int i = 0; i < len;) {
        int l;
        full[n_full++] = uni_decode(buf + i, (size_t)(len - i), &l);
        i += l;
    }
    int offset = 0, begin = 0; /* code points consumed, first token of the current word */
    for (int i = 0; i < n; i++) {
        len = decode_into(t, tokens + begin, i + 1 - begin, &buf, &cap);
        if (len < 0) goto fail_oom;
        int cps = 0, first = -1; /* code points, index of the first U+FFFD */
        for (int b = 0; b < len; b++) {
            if (((unsigned char)buf[b] & 0xC0) == 0x80) continue;
            if (first < 0 && b + 3 <= len && !memcmp(buf + b, REPLACEMENT, 3)) first = cps;
            cps++;
        }
        /* decoded_full[unicode_offset + index] (past the end: no boundary, where Python raises IndexError) */
        if (first < 0 || (offset + first < n_full && full[offset + first] == 0xFFFD)) {
            st = push_word(out, buf, (size_t)len, begin, i + 1 - begin, err);
            if (st) goto done;
            offset += cps;
            begin = i + 1;
        }
    }
    goto done;
fail_oom:
    st = oom(err);
done:
    wgml_free(buf);
    wgml_free(full);
    return st;
}

wgml_status whisper_split_words(const whisper_tokenizer *t, const char *language, const int32_t *tokens, int n,
                                whisper_words *out, wgml_error *err) {
    if (!t || n < 0 || (n > 0 && !tokens) || !out)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "whisper words: bad arguments");
    const whisper_specials *sp = whisper_tokenizer_specials(t);
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= sp->n_vocab)
            return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "whisper words: token %d (%d) is outside the %d ids", i,
                             (int)tokens[i], sp->n_vocab);
    if (whisper_splits_on_unicode(language)) return split_on_unicode(t, tokens, n, out, err);

    /* split_tokens_on_spaces: the unicode pieces, joined */
    whisper_words sub = {0};
    wgml_status st = split_on_unicode(t, tokens, n, &sub, err);
    static const char PUNCTUATION[] = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"; /* string.punctuation */
    int first = out->n;
    for (int i = 0; i < sub.n && !st; i++) {
        whisper_word *s = &sub.w[i];
        int special = tokens[s->token_begin] >= sp->eot;
        int with_space = s->text[0] == ' ';
        int punctuation = stripped_in(s->text, PUNCTUATION);
        if (special || with_space || punctuation || out->n == first) {
            st = push_word(out, s->text, strlen(s->text), s->token_begin, s->n_tokens, err);
        } else {
            whisper_word *last = &out->w[out->n - 1];
            if (concat(&last->text, last->text, s->text))
                st = oom(err);
            else
                last->n_tokens += s->n_tokens;
        }
    }
    whisper_words_free(&sub);
    return st;
}

/* following takes previous's text and tokens (previous first when `before`) */
static int move_into(whisper_word *to, whisper_word *from, int before) {
    if (before ? concat(&to->text, from->text, to->text) : concat(&to->text, to->text, from->text)) return -1;
    if (from->n_tokens > 0) {
        if (before || to->n_tokens == 0) to->token_begin = from->token_begin;
        to->n_tokens += from->n_tokens;
    }
    from->text[0] = 0;
    from->n_tokens = 0;
    return 0;
}

wgml_status whisper_merge_punctuations(whisper_words *ws, const char *prepended, const char *appended,
                                       wgml_error *err) {
    if (!prepended) prepended = WHISPER_PREPEND_PUNCTUATIONS;
    if (!appended) appended = WHISPER_APPEND_PUNCTUATIONS;
    /* prepended: from the end, into the next word that was not moved */
    for (int i = ws->n - 2, j = ws->n - 1; i >= 0; i--) {
        whisper_word *prev = &ws->w[i], *next = &ws->w[j];
        if (prev->text[0] == ' ' && stripped_in(prev->text, prepended)) {
            if (move_into(next, prev, 1)) return oom(err);
        } else {
            j = i;
        }
    }
    /* appended: from the start, into the last word that kept its text */
    for (int i = 0, j = 1; j < ws->n; j++) {
        whisper_word *prev = &ws->w[i], *next = &ws->w[j];
        if (!ends_with_space(prev->text) && py_in(next->text, strlen(next->text), appended)) {
            if (move_into(prev, next, 0)) return oom(err);
        } else {
            i = j;
        }
    }
    return WGML_OK;
}

/* ---- find_alignment ---- */

static wgml_status check_alignment(const whisper_alignment *a, wgml_error *err) {
    if (!a || !a->tok) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "whisper alignment: no tokenizer");
    if (a->n_text < 0 || (a->n_text > 0 && (!a->text_tokens || !a->text_token_probs)))
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "whisper alignment: no text tokens or probabilities");
    if (a->n_text == 0) return WGML_OK;
    const whisper_specials *sp = whisper_tokenizer_specials(a->tok);
    for (int i = 0; i < a->n_text; i++)
        if (a->text_tokens[i] < 0 || a->text_tokens[i] >= sp->eot)
            return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                             "whisper alignment: text token %d is %d, not a text token (< %d)", i,
                             (int)a->text_tokens[i], sp->eot);
    if (a->n_sot < 1 || a->n_rows != a->n_sot + a->n_text + 2)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                         "whisper alignment: %d weight rows for %d SOT and %d text tokens (expected %d)", a->n_rows,
                         a->n_sot, a->n_text, a->n_sot + a->n_text + 2);
    if (!a->weights || a->n_heads < 1 || a->n_frames < 0 || a->row_stride < a->n_frames)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                         "whisper alignment: bad weights (%d heads, %d frames, row stride %d)", a->n_heads, a->n_frames,
                         a->row_stride);
    if (a->medfilt_width < 0 || (a->medfilt_width > 0 && (a->medfilt_width % 2 == 0 || a->medfilt_width > 63)))
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                         "whisper alignment: median filter width %d is not an odd number below 64", a->medfilt_width);
    return WGML_OK;
}

/* One head's rows, softmaxed over the kept frames, into w[n_rows][n_frames]; e: n_frames of scratch. */
static void head_softmax(const whisper_alignment *a, int h, float *w, double *e) {
    int R = a->n_rows, F = a->n_frames;
    float scale = a->qk_scale != 0.0f ? a->qk_scale : 1.0f;
    for (int r = 0; r < R; r++) {
        const float *x = a->weights + ((size_t)h * R + r) * (size_t)a->row_stride;
        float *o = w + (size_t)r * F;
        if (a->probabilities) {
            double s = 0;
            for (int f = 0; f < F; f++)
                s += x[f];
            for (int f = 0; f < F; f++)
                o[f] = (float)(x[f] / s);
        } else {
            float mx = -INFINITY;
            for (int f = 0; f < F; f++) {
                o[f] = x[f] * scale; /* (weights * qk_scale) in float32 */
                if (o[f] > mx) mx = o[f];
            }
            double s = 0;
            for (int f = 0; f < F; f++)
                s += e[f] = exp((double)o[f] - mx);
            for (int f = 0; f < F; f++)
                o[f] = (float)(e[f] / s);
        }
    }
}

wgml_status whisper_find_alignment(const whisper_alignment *a, whisper_words *out, wgml_error *err) {
    wgml_status st = check_alignment(a, err);
    if (st || a->n_text == 0) return st;
    const whisper_specials *sp = whisper_tokenizer_specials(a->tok);
    int R = a->n_rows, F = a->n_frames, N = a->n_text + 1, r0 = a->n_sot;
    int width = a->medfilt_width ? a->medfilt_width : WHISPER_MEDFILT_WIDTH;

    float *w = wgml_malloc(((size_t)R * F + 1) * sizeof *w);
    float *row = wgml_malloc(((size_t)F + 1) * sizeof *row);
    double *acc = wgml_calloc((size_t)N * F + 1, sizeof *acc), *e = wgml_malloc(((size_t)F + 1) * sizeof *e);
    float *matrix = wgml_malloc(((size_t)N * F + 1) * sizeof *matrix);
    int *ti = wgml_malloc(((size_t)N + F + 1) * sizeof *ti), *tj = wgml_malloc(((size_t)N + F + 1) * sizeof *tj);
    double *jump = wgml_malloc(((size_t)N + F + 1) * sizeof *jump);
    int32_t *tokens = wgml_malloc(((size_t)N) * sizeof *tokens);
    whisper_words words = {0};
    if (!w || !row || !acc || !e || !matrix || !ti || !tj || !jump || !tokens) {
        st = oom(err);
        goto done;
    }

    /* per head: softmax, z-score over the tokens, median filter of the rows kept; the mean over heads */
    for (int h = 0; h < a->n_heads; h++) {
        head_softmax(a, h, w, e);
        whisper_zscore_tokens(w, R, F);
        for (int r = 0; r < N; r++) {
            whisper_median_filter(w + (size_t)(r0 + r) * F, F, width, row);
            for (int f = 0; f < F; f++)
                acc[(size_t)r * F + f] += row[f];
        }
    }
    for (size_t i = 0; i < (size_t)N * F; i++)
        matrix[i] = -(float)(acc[i] / a->n_heads);

    int len;
    st = whisper_dtw(matrix, N, F, ti, tj, &len, err);
    if (st) goto done;
    /* jumps: the path's first entry and every change of row; their frames / TOKENS_PER_SECOND */
    int n_jump = 0;
    for (int k = 0; k < len; k++)
        if (k == 0 || ti[k] != ti[k - 1]) jump[n_jump++] = (double)tj[k] / WHISPER_TOKENS_PER_SECOND;

    memcpy(tokens, a->text_tokens, (size_t)a->n_text * sizeof *tokens);
    tokens[a->n_text] = sp->eot;
    st = whisper_split_words(a->tok, a->language, tokens, N, &words, err);
    if (st || words.n <= 1) goto done;

    int boundary = 0; /* word_boundaries: 0, then the cumulative token counts */
    for (int k = 0; k + 1 < words.n; k++) {
        int b0 = boundary, b1 = boundary + words.w[k].n_tokens;
        boundary = b1;
        if (b0 >= n_jump || b1 >= n_jump) {
            st = wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                           "whisper alignment: the path has %d token jumps, word %d needs %d (non-finite weights?)",
                           n_jump, k, b1 + 1);
            goto done;
        }
        double s = 0;
        for (int i = b0; i < b1 && i < a->n_text; i++)
            s += a->text_token_probs[i];
        int cnt = (b1 < a->n_text ? b1 : a->n_text) - b0;
        whisper_word *wd = &words.w[k];
        wd->start = jump[b0];
        wd->end = jump[b1];
        wd->probability = cnt > 0 ? s / cnt : NAN;
    }
    /* the words but the last (the EOT's) move to out */
    for (int k = 0; k + 1 < words.n; k++) {
        st = push_word(out, words.w[k].text, strlen(words.w[k].text), words.w[k].token_begin, words.w[k].n_tokens, err);
        if (st) goto done;
        whisper_word *o = &out->w[out->n - 1];
        o->start = words.w[k].start;
        o->end = words.w[k].end;
        o->probability = words.w[k].probability;
    }
done:
    whisper_words_free(&words);
    wgml_free(w);
    wgml_free(row);
    wgml_free(acc);
    wgml_free(e);
    wgml_free(matrix);
    wgml_free(ti);
    wgml_free(tj);
    wgml_free(jump);
    wgml_free(tokens);
    return st;
}

/* ---- add_word_timestamps ---- */

/* Python's round(x, 2): the double nearest to the exact value rounded to
 * two decimals, half to even (glibc's printf rounds the exact binary value,
 * as Python's dtoa does). */
static double round2(double x) {
    if (!isfinite(x)) return x;
    char buf[512];
    snprintf(buf, sizeof buf, "%.2f", x);
    return strtod(buf, NULL);
}

static double py_max(double a, double b) { return b > a ? b : a; }
static double py_min(double a, double b) { return b < a ? b : a; }

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

wgml_status whisper_words_to_segments(whisper_words *ws, int eot, whisper_word_segment *segs, int n_segs,
                                      double time_offset, double last_speech_timestamp, const char *prepended,
                                      const char *appended, wgml_error *err) {
    if (!ws || n_segs < 0 || (n_segs > 0 && !segs))
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "whisper word timestamps: bad arguments");
    /* the median of the non-zero durations (np.median: NaN when there is one), at most 0.7 */
    double median = 0.0;
    int n_dur = 0;
    double *dur = wgml_malloc(((size_t)ws->n + 1) * sizeof *dur);
    if (!dur) return oom(err);
    int has_nan = 0;
    for (int i = 0; i < ws->n; i++) {
        double d = ws->w[i].end - ws->w[i].start;
        if (d != 0) {
            dur[n_dur++] = d;
            has_nan |= isnan(d);
        }
    }
    if (n_dur > 0) {
        if (has_nan) {
            median = NAN;
        } else {
            qsort(dur, (size_t)n_dur, sizeof *dur, cmp_double);
            median = n_dur % 2 ? dur[n_dur / 2] : (dur[n_dur / 2 - 1] + dur[n_dur / 2]) / 2;
        }
    }
    wgml_free(dur);
    median = py_min(0.7, median);
    double max_duration = median * 2;

    /* long words at sentence boundaries */
    if (n_dur > 0) {
        static const char MARKS[] = ".\xE3\x80\x82!\xEF\xBC\x81?\xEF\xBC\x9F"; /* ".。!！?？" */
        for (int i = 1; i < ws->n; i++) {
            whisper_word *w = &ws->w[i];
            if (w->end - w->start > max_duration) {
                if (py_in(w->text, strlen(w->text), MARKS))
                    w->end = w->start + max_duration;
                else if (py_in(ws->w[i - 1].text, strlen(ws->w[i - 1].text), MARKS))
                    w->start = w->end - max_duration;
            }
        }
    }

    wgml_status st = whisper_merge_punctuations(ws, prepended, appended, err);
    if (st) return st;

    int word_index = 0, n_out = 0;
    for (int s = 0; s < n_segs; s++) {
        whisper_word_segment *seg = &segs[s];
        int n_text = 0;
        for (int i = 0; i < seg->n_tokens; i++)
            if (seg->tokens[i] < eot) n_text++;
        int saved = 0;
        seg->word_begin = n_out;
        while (word_index < ws->n && saved < n_text) {
            whisper_word *t = &ws->w[word_index++];
            saved += t->n_tokens;
            if (t->text[0]) {
                t->start = round2(time_offset + t->start);
                t->end = round2(time_offset + t->end);
                whisper_word *o = &ws->w[n_out++];
                if (o != t) {
                    wgml_free(o->text); /* an emptied word's */
                    *o = *t;
                    t->text = NULL;
                }
            } else {
                wgml_free(t->text);
                t->text = NULL;
            }
        }
        seg->n_words = n_out - seg->word_begin;
        if (seg->n_words == 0) continue;

        whisper_word *w0 = &ws->w[seg->word_begin], *wl = &ws->w[n_out - 1];
        whisper_word *w1 = seg->n_words > 1 ? w0 + 1 : NULL;
        /* the first and second word after a pause at most twice the median duration */
        if (w0->end - last_speech_timestamp > median * 4 &&
            (w0->end - w0->start > max_duration || (w1 && w1->end - w0->start > max_duration * 2))) {
            if (w1 && w1->end - w1->start > max_duration) {
                double boundary = py_max(w1->end / 2, w1->end - max_duration);
                w0->end = w1->start = boundary;
            }
            w0->start = py_max(0, w0->end - max_duration);
        }
        /* the segment's start when the first word is too long */
        if (seg->start < w0->end && seg->start - 0.5 > w0->start)
            w0->start = py_max(0, py_min(w0->end - median, seg->start));
        else
            seg->start = w0->start;
        /* the segment's end when the last word is too long */
        if (seg->end > wl->start && seg->end + 0.5 < wl->end)
            wl->end = py_max(wl->start + median, seg->end);
        else
            seg->end = wl->end;
        last_speech_timestamp = seg->end;
    }
    /* the words no segment took */
    for (int i = n_out; i < ws->n; i++)
        wgml_free(ws->w[i].text);
    ws->n = n_out;
    return WGML_OK;
}

wgml_status whisper_add_word_timestamps(const whisper_alignment *a, whisper_word_segment *segs, int n_segs,
                                        double time_offset, double last_speech_timestamp, whisper_words *out,
                                        wgml_error *err) {
    if (!out) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "whisper word timestamps: no output");
    whisper_words_free(out);
    wgml_status st = check_alignment(a, err);
    if (st) return st;
    if (n_segs < 0 || (n_segs > 0 && !segs))
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "whisper word timestamps: bad segments");
    if (n_segs == 0) return WGML_OK;
    /* the segments' text tokens must be the alignment's */
    int eot = whisper_tokenizer_specials(a->tok)->eot, k = 0;
    for (int s = 0; s < n_segs; s++) {
        if (segs[s].n_tokens < 0 || (segs[s].n_tokens > 0 && !segs[s].tokens))
            return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "whisper word timestamps: segment %d has no tokens", s);
        for (int i = 0; i < segs[s].n_tokens; i++) {
            if (segs[s].tokens[i] >= eot) continue;
            if (k >= a->n_text || segs[s].tokens[i] != a->text_tokens[k])
                return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                                 "whisper word timestamps: segment %d's text tokens are not the alignment's (at %d)", s,
                                 k);
            k++;
        }
    }
    if (k != a->n_text)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                         "whisper word timestamps: the segments hold %d text tokens, the alignment %d", k, a->n_text);
    st = whisper_find_alignment(a, out, err);
    if (!st)
        st = whisper_words_to_segments(out, eot, segs, n_segs, time_offset, last_speech_timestamp,
                                       a->prepend_punctuations, a->append_punctuations, err);
    if (st) whisper_words_free(out);
    return st;
}
