/*
 * test_whisper_timing.c - word timestamps (model/whisper/whisper_timing.h)
 * against the official timing.py / tokenizer.py rules (openai/whisper
 * v20250625), worked out by hand on small inputs:
 *
 *   - alignment heads: each official preset by its shapes (the base85 masks
 *     of whisper/__init__.py decoded; whisper.cpp's g_aheads_* are the
 *     same), large-v1/v2's shared shapes, the default for other shapes;
 *   - dtw_cpu: the minimum-cost monotonic path of small random matrices
 *     (brute force over every path), and its tie rules on matrices of ties;
 *   - median_filter (reflect padding, NaN last) against a direct
 *     implementation; the z-score over tokens (population std);
 *   - split_to_word_tokens on English (spaces) and Chinese (unicode, with
 *     characters split across tokens) in the real multilingual vocabulary
 *     (../shared/whisper/whisper-micro-random.bin), merge_punctuations;
 *   - find_alignment + add_word_timestamps end to end on synthetic
 *     attention (tokens evenly spread over the frames), scores and
 *     probabilities, one and two segments, allocation failures;
 *   - the post-processing rules: long words at sentence ends, the first word
 *     after a pause, the segment's start and end against long first and last
 *     words, round(t, 2).
 */
#include "check_err.h"
#include "core/alloc.h"
#include "format/gguf.h"
#include "format/model_file.h"
#include "model/whisper/whisper_timing.h"
#include "model/whisper/whisper_tokenizer.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static whisper_tokenizer *multilingual(void) {
    wgml_error err;
    gguf_file *g;
    if (wgml_model_file_open(tu_shared("whisper/whisper-micro-random.bin"), &g, &err)) fail_msg("%s", err.message);
    whisper_tokenizer *t;
    if (whisper_tokenizer_load(g, &t, &err)) fail_msg("%s", err.message);
    gguf_close(g);
    return t;
}

static int32_t *encode(const whisper_tokenizer *t, const char *text, int *n) {
    wgml_error err;
    static int32_t ids[256];
    *n = whisper_text_encode(t, text, strlen(text), ids, 256, &err);
    if (*n < 0 || *n > 255) fail_msg("encode '%s': %d", text, *n);
    return ids;
}

static void expect_word(const whisper_words *ws, int i, const char *text, int begin, int n_tokens) {
    if (i >= ws->n) fail_msg("word %d of %d ('%s' expected)", i, ws->n, text);
    const whisper_word *w = &ws->w[i];
    if (strcmp(w->text, text) || w->token_begin != begin || w->n_tokens != n_tokens)
        fail_msg("word %d: '%s' tokens %d+%d, expected '%s' %d+%d", i, w->text, w->token_begin, w->n_tokens, text,
                 begin, n_tokens);
}

static void expect_time(const char *what, double got, double want) {
    if (!(fabs(got - want) <= 1e-9)) fail_msg("%s: %.17g, expected %.17g", what, got, want);
}

/* A hand-made list of words: texts, token counts (consecutive tokens), times. */
static void make_words(whisper_words *ws, const char *const *text, const int *n_tokens, const double (*t)[2], int n) {
    int tok = 0;
    for (int i = 0; i < n; i++) {
        if (ws->n == ws->cap) {
            ws->cap = ws->cap ? ws->cap * 2 : 8;
            ws->w = wgml_realloc(ws->w, (size_t)ws->cap * sizeof *ws->w);
            assert_non_null(ws->w);
        }
        whisper_word *w = &ws->w[ws->n++];
        w->text = wgml_strdup(text[i]);
        w->token_begin = tok;
        w->n_tokens = n_tokens ? n_tokens[i] : 1;
        tok += w->n_tokens;
        w->start = t ? t[i][0] : 0;
        w->end = t ? t[i][1] : 0;
        w->probability = 0.5;
    }
}

/* ---- alignment heads ---- */

static void test_alignment_heads(void **state) {
    (void)state;
    /* {n_mels, n_vocab, n_audio_layer, n_text_layer, n_text_state, n_text_head}, the preset, its head count */
    static const struct {
        int d[6];
        const char *name;
        int n;
        int first[2], last[2];
    } C[] = {
        {{80, 51864, 4, 4, 384, 6}, "tiny.en", 8, {1, 0}, {3, 4}},
        {{80, 51865, 4, 4, 384, 6}, "tiny", 6, {2, 2}, {3, 5}},
        {{80, 51864, 6, 6, 512, 8}, "base.en", 5, {3, 3}, {5, 7}},
        {{80, 51865, 6, 6, 512, 8}, "base", 8, {3, 1}, {5, 6}},
        {{80, 51864, 12, 12, 768, 12}, "small.en", 19, {6, 6}, {11, 4}},
        {{80, 51865, 12, 12, 768, 12}, "small", 10, {5, 3}, {10, 5}},
        {{80, 51864, 24, 24, 1024, 16}, "medium.en", 18, {11, 4}, {21, 12}},
        {{80, 51865, 24, 24, 1024, 16}, "medium", 6, {13, 15}, {23, 4}},
        {{80, 51865, 32, 32, 1280, 20}, "large-v2", 23, {10, 12}, {27, 15}}, /* large-v1's shapes too */
        {{128, 51866, 32, 32, 1280, 20}, "large-v3", 10, {7, 0}, {25, 6}},
        {{128, 51866, 32, 4, 1280, 20}, "large-v3-turbo", 6, {2, 4}, {3, 14}},
    };
    int heads[400][2];
    for (size_t i = 0; i < sizeof C / sizeof C[0]; i++) {
        const char *name;
        int n = whisper_alignment_heads(C[i].d[0], C[i].d[1], C[i].d[2], C[i].d[3], C[i].d[4], C[i].d[5], heads, 400,
                                        &name);
        if (n != C[i].n || !name || strcmp(name, C[i].name))
            fail_msg("case %zu: %d heads, preset %s; expected %d, %s", i, n, name ? name : "(default)", C[i].n,
                     C[i].name);
        assert_int_equal(heads[0][0], C[i].first[0]);
        assert_int_equal(heads[0][1], C[i].first[1]);
        assert_int_equal(heads[n - 1][0], C[i].last[0]);
        assert_int_equal(heads[n - 1][1], C[i].last[1]);
        for (int k = 0; k < n; k++) { /* in (layer, head) order, inside the model */
            assert_true(heads[k][0] < C[i].d[3] && heads[k][1] < C[i].d[5]);
            if (k) assert_true(heads[k][0] * 100 + heads[k][1] > heads[k - 1][0] * 100 + heads[k - 1][1]);
        }
        int by_name[400][2];
        assert_int_equal(whisper_alignment_heads_preset(C[i].name, by_name, 400), n);
        assert_memory_equal(by_name, heads, (size_t)n * sizeof heads[0]);
    }
    /* the whole small.en table */
    static const int SMALL_EN[19][2] = {{6, 6},  {7, 0},  {7, 3},   {7, 8},  {8, 2},  {8, 5},  {8, 7},
                                        {9, 0},  {9, 4},  {9, 8},   {9, 10}, {10, 0}, {10, 1}, {10, 2},
                                        {10, 3}, {10, 6}, {10, 11}, {11, 2}, {11, 4}};
    assert_int_equal(whisper_alignment_heads_preset("small.en", heads, 400), 19);
    assert_memory_equal(heads, SMALL_EN, sizeof SMALL_EN);
    /* large-v1 by name only; the aliases */
    assert_int_equal(whisper_alignment_heads_preset("large-v1", heads, 400), 9);
    assert_int_equal(heads[0][0], 9);
    assert_int_equal(heads[0][1], 19);
    assert_int_equal(whisper_alignment_heads_preset("large", heads, 400), 10);
    assert_int_equal(whisper_alignment_heads_preset("turbo", heads, 400), 6);
    assert_int_equal(whisper_alignment_heads_preset("huge", heads, 400), -1);
    /* other shapes: every head of layers n_text_layer / 2 .. (the micro model: 3 layers of 2 heads) */
    const char *name = "x";
    int n = whisper_alignment_heads(80, 51865, 2, 3, 128, 2, heads, 400, &name);
    assert_int_equal(n, 4);
    assert_null(name);
    static const int MICRO[4][2] = {{1, 0}, {1, 1}, {2, 0}, {2, 1}};
    assert_memory_equal(heads, MICRO, sizeof MICRO);
    /* a vocabulary that is not tiny's: the default (layers 2, 3 of 6 heads) */
    assert_int_equal(whisper_alignment_heads(80, 51866, 4, 4, 384, 6, heads, 400, NULL), 12);
    assert_int_equal(heads[0][0], 2);
    /* cap: the count, what fits written */
    int one[1][2] = {{-1, -1}};
    assert_int_equal(whisper_alignment_heads(80, 51865, 32, 32, 1280, 20, one, 1, NULL), 23);
    assert_int_equal(one[0][0], 10);
    assert_int_equal(whisper_alignment_heads(80, 51865, 4, 0, 384, 6, heads, 400, NULL), -1);
}

static void test_model_inputs(void **state) {
    (void)state;
    whisper_specials sp;
    wgml_error err;
    assert_int_equal(whisper_specials_init(&sp, 51865, &err), WGML_OK);
    /* [SOT, <|en|>, <|transcribe|>] + <|notimestamps|> + text + EOT */
    int32_t sot[3] = {sp.sot, sp.lang0, sp.transcribe}, text[2] = {2425, 1002}, out[8];
    assert_int_equal(whisper_alignment_tokens(&sp, sot, 3, text, 2, out, 8), 7);
    const int32_t want[7] = {sp.sot, sp.lang0, sp.transcribe, sp.no_timestamps, 2425, 1002, sp.eot};
    assert_memory_equal(out, want, sizeof want);
    int32_t small[2] = {-1, -1};
    assert_int_equal(whisper_alignment_tokens(&sp, sot, 1, text, 2, small, 2), 5); /* English-only: [SOT] */
    assert_true(small[0] == sp.sot && small[1] == sp.no_timestamps);
    /* softmax over the ids below EOT only: e^0, e^ln 3, e^0, e^0 -> 1/6, 1/2; the 100 at EOT does not count */
    float logits[5] = {0, logf(3), 0, 0, 100};
    assert_true(fabsf(whisper_text_token_prob(logits, 4, 1) - 0.5f) < 1e-7f);
    assert_true(fabsf(whisper_text_token_prob(logits, 4, 0) - 1.0f / 6) < 1e-7f);
}

/* ---- DTW ---- */

typedef struct {
    const float *x;
    int n, m;
    double best, second;
    int path[16][2], best_path[16][2], len, best_len;
} brute;

/* every monotonic path from (0, 0) by steps (1, 1), (1, 0), (0, 1) */
static void brute_walk(brute *b, int i, int j, double cost) {
    cost += b->x[i * b->m + j];
    b->path[b->len][0] = i;
    b->path[b->len][1] = j;
    b->len++;
    if (i == b->n - 1 && j == b->m - 1) {
        if (cost < b->best) {
            b->second = b->best;
            b->best = cost;
            memcpy(b->best_path, b->path, sizeof b->path);
            b->best_len = b->len;
        } else if (cost < b->second) {
            b->second = cost;
        }
    } else {
        if (i + 1 < b->n && j + 1 < b->m) brute_walk(b, i + 1, j + 1, cost);
        if (i + 1 < b->n) brute_walk(b, i + 1, j, cost);
        if (j + 1 < b->m) brute_walk(b, i, j + 1, cost);
    }
    b->len--;
}

static void test_dtw_brute_force(void **state) {
    (void)state;
    tu_rng rng = {20261207};
    int checked = 0;
    for (int trial = 0; trial < 400; trial++) {
        int n = 1 + (int)(tu_next(&rng) % 4), m = 1 + (int)(tu_next(&rng) % 6);
        float x[24];
        for (int i = 0; i < n * m; i++) /* negative and positive costs, as -matrix has */
            x[i] = tu_normal(&rng);
        int ti[16], tj[16], len;
        wgml_error err;
        assert_int_equal(whisper_dtw(x, n, m, ti, tj, &len, &err), WGML_OK);
        /* a path from (0, 0) to (n - 1, m - 1) by unit steps */
        assert_true(len >= (n > m ? n : m) && len <= n + m - 1);
        assert_true(ti[0] == 0 && tj[0] == 0 && ti[len - 1] == n - 1 && tj[len - 1] == m - 1);
        double cost = x[0];
        for (int k = 1; k < len; k++) {
            int di = ti[k] - ti[k - 1], dj = tj[k] - tj[k - 1];
            assert_true((di == 1 || di == 0) && (dj == 1 || dj == 0) && di + dj > 0);
            cost += x[ti[k] * m + tj[k]];
        }
        brute b = {.x = x, .n = n, .m = m, .best = INFINITY, .second = INFINITY};
        brute_walk(&b, 0, 0, 0);
        if (fabs(cost - b.best) > 1e-5)
            fail_msg("trial %d (%dx%d): cost %.9g, minimum %.9g", trial, n, m, cost, b.best);
        if (b.second - b.best > 1e-4) { /* a clear minimum: the same path */
            assert_int_equal(len, b.best_len);
            for (int k = 0; k < len; k++)
                if (ti[k] != b.best_path[k][0] || tj[k] != b.best_path[k][1])
                    fail_msg("trial %d: path step %d (%d, %d), expected (%d, %d)", trial, k, ti[k], tj[k],
                             b.best_path[k][0], b.best_path[k][1]);
            checked++;
        }
    }
    assert_true(checked > 350);
}

static void test_dtw_ties(void **state) {
    (void)state;
    int ti[8], tj[8], len;
    wgml_error err;
    /* All zeros, 3 x 3. dtw_cpu's table (cost[i][j] over the padded (n+1) x (m+1) table, cost[0][0] = 0, the
     * rest inf): row 1 at j = 1: c0 = 0 < c1 = c2 = inf -> diagonal (t 0); row 1 at j > 1: c0 = c1 = inf,
     * c2 = 0: neither strictly least -> t 2 (left); column 1 at i > 1: c1 = 0 < c0 = c2 = inf -> t 1 (up);
     * inside, c0 = c1 = c2 = 0: no strict minimum -> t 2. The backtrace from (3, 3): left, left to (3, 1),
     * up, up to (1, 1), diagonal to (0, 0); as matrix cells, reversed: (0,0) (1,0) (2,0) (2,1) (2,2): every
     * token on frame 0, then the last token holds the other frames. */
    float z[9] = {0};
    assert_int_equal(whisper_dtw(z, 3, 3, ti, tj, &len, &err), WGML_OK);
    static const int W3[5][2] = {{0, 0}, {1, 0}, {2, 0}, {2, 1}, {2, 2}};
    assert_int_equal(len, 5);
    for (int k = 0; k < 5; k++) {
        assert_int_equal(ti[k], W3[k][0]);
        assert_int_equal(tj[k], W3[k][1]);
    }
    /* x = [[0, 0], [1, 0]]: cost[1][1] = 0, cost[2][1] = 1 (up), cost[1][2] = 0 (left); at (2, 2)
     * c0 = cost[1][1] = 0, c1 = cost[1][2] = 0, c2 = cost[2][1] = 1: c0 and c1 tie below c2, neither is
     * strictly least, so dtw_cpu takes c2 (t 2) and cost[2][2] = 1, though the diagonal path costs 0. The path:
     * (2,2) left -> (2,1) up -> (1,1) diagonal: cells (0,0) (1,0) (1,1), cost 1. */
    float q[4] = {0, 0, 1, 0};
    assert_int_equal(whisper_dtw(q, 2, 2, ti, tj, &len, &err), WGML_OK);
    static const int WQ[3][2] = {{0, 0}, {1, 0}, {1, 1}};
    assert_int_equal(len, 3);
    for (int k = 0; k < 3; k++) {
        assert_int_equal(ti[k], WQ[k][0]);
        assert_int_equal(tj[k], WQ[k][1]);
    }
    /* one row, one column */
    float r[4] = {1, 2, 3, 4};
    assert_int_equal(whisper_dtw(r, 1, 4, ti, tj, &len, &err), WGML_OK);
    assert_int_equal(len, 4);
    for (int k = 0; k < 4; k++)
        assert_true(ti[k] == 0 && tj[k] == k);
    assert_int_equal(whisper_dtw(r, 4, 1, ti, tj, &len, &err), WGML_OK);
    assert_int_equal(len, 4);
    for (int k = 0; k < 4; k++)
        assert_true(ti[k] == k && tj[k] == 0);
    /* no frames (num_frames // 2 = 0): the official backtrace walks column 0 upwards, frames -1 */
    assert_int_equal(whisper_dtw(r, 3, 0, ti, tj, &len, &err), WGML_OK);
    assert_int_equal(len, 3);
    for (int k = 0; k < 3; k++)
        assert_true(ti[k] == k && tj[k] == -1);
}

/* ---- median filter, z-score ---- */

static int cmp_nan_last(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    if (isnan(x) || isnan(y)) return isnan(x) - isnan(y);
    return (x > y) - (x < y);
}

/* F.pad(mode="reflect") then unfold + sort + the middle, as median_filter writes it */
static void median_direct(const float *x, int n, int width, float *out) {
    int pad = width / 2;
    if (n <= pad) {
        memcpy(out, x, (size_t)n * sizeof *x);
        return;
    }
    float padded[64 + 16], win[16];
    for (int i = 0; i < pad; i++)
        padded[i] = x[pad - i]; /* x[pad], ..., x[1] */
    memcpy(padded + pad, x, (size_t)n * sizeof *x);
    for (int i = 0; i < pad; i++)
        padded[pad + n + i] = x[n - 2 - i]; /* x[n-2], ..., x[n-1-pad] */
    for (int i = 0; i < n; i++) {
        memcpy(win, padded + i, (size_t)width * sizeof *win);
        qsort(win, (size_t)width, sizeof *win, cmp_nan_last);
        out[i] = win[pad];
    }
}

static void test_median_filter(void **state) {
    (void)state;
    tu_rng rng = {7};
    static const int widths[] = {1, 3, 5, 7, 9};
    for (int trial = 0; trial < 300; trial++) {
        int n = 1 + (int)(tu_next(&rng) % 40), width = widths[tu_next(&rng) % 5];
        float x[64], got[64], want[64];
        for (int i = 0; i < n; i++)
            x[i] = (float)(tu_next(&rng) % 5) + (trial % 3 ? tu_uniform(&rng) : 0); /* with ties, and without */
        if (trial % 10 == 0) x[tu_next(&rng) % n] = NAN;
        whisper_median_filter(x, n, width, got);
        median_direct(x, n, width, want);
        for (int i = 0; i < n; i++)
            if (!(got[i] == want[i] || (isnan(got[i]) && isnan(want[i]))))
                fail_msg("trial %d (n %d, width %d) [%d]: %g, expected %g", trial, n, width, i, got[i], want[i]);
    }
    /* by hand, width 7: [5 1 4 2 8] padded to [2 4 1 | 5 1 4 2 8 | 2 4 1]; windows [2 4 1 5 1 4 2] -> 2,
     * [4 1 5 1 4 2 8] -> 4, [1 5 1 4 2 8 2] -> 2, [5 1 4 2 8 2 4] -> 4, [1 4 2 8 2 4 1] -> 2 */
    float x[5] = {5, 1, 4, 2, 8}, y[5];
    whisper_median_filter(x, 5, 7, y);
    static const float W[5] = {2, 4, 2, 4, 2};
    assert_memory_equal(y, W, sizeof W);
    /* three frames or fewer: unfiltered (x.shape[-1] <= pad_width) */
    float s[3] = {3, 1, 2}, t[3];
    whisper_median_filter(s, 3, 7, t);
    assert_memory_equal(s, t, sizeof s);
}

static void test_zscore(void **state) {
    (void)state;
    /* one column 1, 2, 3, 4: mean 2.5, population std sqrt(1.25) (torch.std_mean(unbiased=False)); the
     * unbiased std sqrt(5/3) would give -1.1619 for the first */
    float w[4] = {1, 2, 3, 4};
    whisper_zscore_tokens(w, 4, 1);
    float sd = (float)sqrt(1.25);
    assert_true(w[0] == (1 - 2.5f) / sd && w[3] == (4 - 2.5f) / sd);
    assert_true(fabsf(w[0] + 1.3416408f) < 1e-6f && fabsf(w[1] + 0.4472136f) < 1e-6f);
    /* random [7][5]: each column of mean 0 and population std 1 */
    tu_rng rng = {11};
    float m[35];
    for (int i = 0; i < 35; i++)
        m[i] = tu_uniform(&rng);
    whisper_zscore_tokens(m, 7, 5);
    for (int f = 0; f < 5; f++) {
        double s = 0, ss = 0;
        for (int r = 0; r < 7; r++) {
            s += m[r * 5 + f];
            ss += (double)m[r * 5 + f] * m[r * 5 + f];
        }
        assert_true(fabs(s / 7) < 1e-6 && fabs(ss / 7 - 1) < 1e-5);
    }
}

/* ---- words ---- */

static void test_split_english(void **state) {
    (void)state;
    whisper_tokenizer *t = multilingual();
    int eot = whisper_tokenizer_specials(t)->eot, n;
    wgml_error err;
    whisper_words ws = {0};
    /* " Hello" "," " world" "." (4 tokens) + EOT: punctuation is a word of its own, EOT too */
    int32_t *ids = encode(t, " Hello, world.", &n);
    assert_int_equal(n, 4);
    ids[n] = eot;
    assert_int_equal(whisper_split_words(t, "en", ids, n + 1, &ws, &err), WGML_OK);
    assert_int_equal(ws.n, 5);
    expect_word(&ws, 0, " Hello", 0, 1);
    expect_word(&ws, 1, ",", 1, 1);
    expect_word(&ws, 2, " world", 2, 1);
    expect_word(&ws, 3, ".", 3, 1);
    expect_word(&ws, 4, "<|endoftext|>", 4, 1);
    /* merge_punctuations: "," and "." into the word before */
    ws.n--; /* find_alignment drops the EOT word */
    wgml_free(ws.w[ws.n].text);
    assert_int_equal(whisper_merge_punctuations(&ws, NULL, NULL, &err), WGML_OK);
    expect_word(&ws, 0, " Hello,", 0, 2);
    expect_word(&ws, 1, "", 1, 0);
    expect_word(&ws, 2, " world.", 2, 2);
    expect_word(&ws, 3, "", 3, 0);
    whisper_words_free(&ws);

    /* ' He' ' said' ' "' 'don' "'t" '"' ' (' 'tw' 'ice' ').': pieces without a space join the word before
     * ("'t".strip() is not in string.punctuation), '"' is punctuation (a word), ').' is not a substring of
     * string.punctuation (')' is followed by '*' there), so it joins ' (twice' */
    ids = encode(t, " He said \"don't\" (twice).", &n);
    assert_int_equal(n, 10);
    ids[n] = eot;
    assert_int_equal(whisper_split_words(t, NULL, ids, n + 1, &ws, &err), WGML_OK);
    assert_int_equal(ws.n, 6);
    expect_word(&ws, 0, " He", 0, 1);
    expect_word(&ws, 1, " said", 1, 1);
    expect_word(&ws, 2, " \"don't", 2, 3);
    expect_word(&ws, 3, "\"", 5, 1);
    expect_word(&ws, 4, " (twice).", 6, 4);
    ws.n--;
    wgml_free(ws.w[ws.n].text);
    assert_int_equal(whisper_merge_punctuations(&ws, NULL, NULL, &err), WGML_OK);
    expect_word(&ws, 2, " \"don't\"", 2, 4);
    expect_word(&ws, 3, "", 5, 0);
    expect_word(&ws, 4, " (twice).", 6, 4);
    whisper_words_free(&ws);
    whisper_tokenizer_free(t);
}

static void test_merge_punctuations(void **state) {
    (void)state;
    wgml_error err;
    whisper_words ws = {0};
    /* prepended: ' "' (starts with a space, strips to '"') moves into ' hi'; appended: '"' then '.' join it,
     * skipping the emptied words (an empty word is "in" every string: merging it changes nothing) */
    static const char *const A[] = {" He", " said", " \"", " hi", "\"", "."};
    static const double TA[6][2] = {{0, 1}, {1, 2}, {2, 3}, {3, 4}, {4, 5}, {5, 6}};
    make_words(&ws, A, NULL, TA, 6);
    assert_int_equal(whisper_merge_punctuations(&ws, NULL, NULL, &err), WGML_OK);
    expect_word(&ws, 0, " He", 0, 1);
    expect_word(&ws, 1, " said", 1, 1);
    expect_word(&ws, 2, "", 2, 0);
    expect_word(&ws, 3, " \" hi\".", 2, 4);
    expect_word(&ws, 4, "", 4, 0);
    expect_word(&ws, 5, "", 5, 0);
    expect_time("the receiving word keeps its start", ws.w[3].start, 3);
    expect_time("and its end", ws.w[3].end, 4);
    whisper_words_free(&ws);
    /* a word ending with a space takes nothing; a word " " strips to "", which is in every string: it is
     * prepended to the next; "¿" with a space too; two prepended in a row both reach ' Qué' */
    static const char *const B[] = {"Hi ", ".", " ", " \xC2\xBF", " (", " Qu\xC3\xA9", "?"};
    make_words(&ws, B, NULL, NULL, 7);
    assert_int_equal(whisper_merge_punctuations(&ws, NULL, NULL, &err), WGML_OK);
    expect_word(&ws, 0, "Hi ", 0, 1);
    expect_word(&ws, 1, ".", 1, 1);
    expect_word(&ws, 2, "", 2, 0);
    expect_word(&ws, 5, "  \xC2\xBF ( Qu\xC3\xA9?", 2, 5);
    whisper_words_free(&ws);
    /* custom sets */
    static const char *const C[] = {" a", "-", " b"};
    make_words(&ws, C, NULL, NULL, 3);
    assert_int_equal(whisper_merge_punctuations(&ws, "", "-", &err), WGML_OK);
    expect_word(&ws, 0, " a-", 0, 2);
    expect_word(&ws, 2, " b", 2, 1);
    whisper_words_free(&ws);
}

/* A word boundary after each token where the bytes since the last boundary are complete UTF-8: the
 * official rule when the whole text decodes without U+FFFD. */
static int complete_utf8(const unsigned char *s, int n) {
    for (int i = 0; i < n;) {
        int l = s[i] < 0x80 ? 1 : s[i] >= 0xF0 ? 4 : s[i] >= 0xE0 ? 3 : s[i] >= 0xC0 ? 2 : 0;
        if (!l || i + l > n) return 0;
        i += l;
    }
    return 1;
}

static void test_split_chinese(void **state) {
    (void)state;
    whisper_tokenizer *t = multilingual();
    int eot = whisper_tokenizer_specials(t)->eot;
    wgml_error err;
    static const char *const S[] = {"我们今天去公园散步。", "鼹鼠在龘龘的夜里挖洞。"};
    for (int s = 0; s < 2; s++) {
        int n;
        int32_t *ids = encode(t, S[s], &n);
        ids[n] = eot;
        whisper_words ws = {0};
        assert_int_equal(whisper_split_words(t, s ? "yue" : "zh", ids, n + 1, &ws, &err), WGML_OK);
        /* the expected words from the tokens' bytes */
        unsigned char acc[64];
        int len = 0, begin = 0, k = 0, multi = 0;
        char text[256] = "";
        for (int i = 0; i < n; i++) {
            len += whisper_token_bytes(t, ids[i], (char *)acc + len, 64 - len);
            if (complete_utf8(acc, len)) {
                if (k >= ws.n) fail_msg("'%s': only %d words", S[s], ws.n);
                acc[len] = 0;
                expect_word(&ws, k, (const char *)acc, begin, i + 1 - begin);
                multi += i > begin;
                strcat(text, (const char *)acc);
                k++, len = 0, begin = i + 1;
            }
        }
        expect_word(&ws, k, "<|endoftext|>", n, 1);
        assert_int_equal(ws.n, k + 1);
        assert_string_equal(text, S[s]);
        assert_true(multi >= 2); /* characters split across tokens were joined */
        whisper_words_free(&ws);
    }
    /* "我们今天去公园散步。": 园 and 散 are two tokens each (e5 9b + ad, e6 95 + a3) */
    int n;
    int32_t *ids = encode(t, S[0], &n);
    assert_int_equal(n, 10);
    ids[n] = eot;
    whisper_words ws = {0};
    assert_int_equal(whisper_split_words(t, "ja", ids, n + 1, &ws, &err), WGML_OK);
    expect_word(&ws, 4, "园", 4, 2);
    expect_word(&ws, 5, "散", 6, 2);
    expect_word(&ws, 7, "。", 9, 1);
    whisper_words_free(&ws);
    /* the same tokens in a language of spaces: one word, then EOT */
    assert_int_equal(whisper_split_words(t, "en", ids, n + 1, &ws, &err), WGML_OK);
    assert_int_equal(ws.n, 2);
    expect_word(&ws, 0, S[0], 0, 10);
    whisper_words_free(&ws);
    /* a partial character before EOT: "公" e5 9b EOT decodes whole to "公\ufffd<|endoftext|>"; e5 9b alone
     * decodes to "\ufffd", and decoded_full has U+FFFD at that offset too, so the official loop makes the
     * lone U+FFFD a word (it does not wait for a complete character) */
    int32_t part[3] = {ids[3], ids[4], eot};
    assert_int_equal(whisper_split_words(t, "zh", part, 3, &ws, &err), WGML_OK);
    assert_int_equal(ws.n, 3);
    expect_word(&ws, 0, "公", 0, 1);
    expect_word(&ws, 1, "\xEF\xBF\xBD", 1, 1);
    expect_word(&ws, 2, "<|endoftext|>", 2, 1);
    whisper_words_free(&ws);
    /* a partial character followed by text: e5 9b then "去" (e5 8e bb): the first two bytes are one invalid
     * sequence in the whole text too ("\ufffd去"), so again a word of its own */
    int32_t part2[3] = {ids[4], ids[2], eot};
    assert_int_equal(whisper_split_words(t, "zh", part2, 3, &ws, &err), WGML_OK);
    assert_int_equal(ws.n, 3);
    expect_word(&ws, 0, "\xEF\xBF\xBD", 0, 1);
    expect_word(&ws, 1, "去", 1, 1);
    whisper_words_free(&ws);
    assert_true(whisper_splits_on_unicode("th") && whisper_splits_on_unicode("lo") && whisper_splits_on_unicode("my"));
    assert_false(whisper_splits_on_unicode("ko") || whisper_splits_on_unicode(NULL));
    int32_t bad[1] = {-3};
    CHECK_ERR("bad token", whisper_split_words(t, "en", bad, 1, &ws, &err), &err, WGML_ERR_INVALID_ARGUMENT, "outside");
    whisper_tokenizer_free(t);
}

/* ---- end to end ---- */

#define BLOCK 8 /* frames per token: tokens 8 / 50 = 0.16 s apart */

/* Synthetic cross-attention for n_text tokens: n_rows = 3 + 1 + n_text + 1 rows; matrix row k (row 3 + k, the
 * row that predicts text token k, or EOT for k = n_text) attends to frames [8k, 8k + 8): score `peak` there,
 * 0 elsewhere; the SOT rows and the EOT row attend uniformly. Scores, or softmax over `stride` positions (the
 * frames past n_frames get score 3). */
static float *synthetic(int n_text, int n_heads, int stride, int probabilities) {
    int R = 3 + n_text + 2, F = BLOCK * (n_text + 1);
    float *w = malloc((size_t)n_heads * R * stride * sizeof *w);
    assert_non_null(w);
    for (int h = 0; h < n_heads; h++)
        for (int r = 0; r < R; r++) {
            float *x = w + ((size_t)h * R + r) * stride;
            int k = r - 3;
            for (int f = 0; f < stride; f++)
                x[f] = f >= F ? 3.0f : (k >= 0 && k <= n_text && f / BLOCK == k) ? (h ? 6.0f : 8.0f) : 0.0f;
            if (probabilities) {
                double s = 0;
                for (int f = 0; f < stride; f++)
                    s += exp(x[f]);
                for (int f = 0; f < stride; f++)
                    x[f] = (float)(exp(x[f]) / s);
            }
        }
    return w;
}

static whisper_alignment synthetic_alignment(const whisper_tokenizer *t, const int32_t *ids, int n, const float *w,
                                             int n_heads, int stride, int probabilities, const float *probs) {
    return (whisper_alignment){.tok = t,
                               .language = "en",
                               .n_sot = 3,
                               .text_tokens = ids,
                               .n_text = n,
                               .text_token_probs = probs,
                               .weights = w,
                               .n_heads = n_heads,
                               .n_rows = 3 + n + 2,
                               .n_frames = BLOCK * (n + 1),
                               .row_stride = stride,
                               .probabilities = probabilities};
}

static void test_alignment_diagonal(void **state) {
    (void)state;
    whisper_tokenizer *t = multilingual();
    const whisper_specials *sp = whisper_tokenizer_specials(t);
    wgml_error err;
    int n;
    int32_t ids[16];
    memcpy(ids, encode(t, " Hello world, this is a test.", &n), sizeof ids);
    assert_int_equal(n, 8); /* " Hello" " world" "," " this" " is" " a" " test" "." */
    float probs[8];
    for (int i = 0; i < 8; i++)
        probs[i] = 0.5f + 0.0625f * (float)i;

    /* find_alignment: word k starts at its first token's block, ends where the next word's first token starts */
    float *w = synthetic(n, 2, BLOCK * 9, 0);
    whisper_alignment a = synthetic_alignment(t, ids, n, w, 2, BLOCK * 9, 0, probs);
    whisper_words ws = {0};
    assert_int_equal(whisper_find_alignment(&a, &ws, &err), WGML_OK);
    static const char *const RAW[8] = {" Hello", " world", ",", " this", " is", " a", " test", "."};
    assert_int_equal(ws.n, 8);
    for (int k = 0; k < 8; k++) {
        expect_word(&ws, k, RAW[k], k, 1);
        expect_time("start", ws.w[k].start, (double)(BLOCK * k) / 50);
        expect_time("end", ws.w[k].end, (double)(BLOCK * (k + 1)) / 50);
        expect_time("probability", ws.w[k].probability, probs[k]);
    }
    whisper_words_free(&ws);

    /* add_word_timestamps, one segment <|0.00|> text <|1.50|> at time_offset 30: "," and "." merged into the
     * words before, which keep their times; times round(30 + t, 2); the segment starts at its first word
     * (30.0 < 30.16 but 29.5 is not after 30.0) and ends at its last word's end (31.5 + 0.5 is not before 31.12) */
    int32_t seg_tokens[10] = {sp->ts_begin};
    memcpy(seg_tokens + 1, ids, 8 * sizeof *ids);
    seg_tokens[9] = sp->ts_begin + 75;
    whisper_word_segment seg = {.tokens = seg_tokens, .n_tokens = 10, .start = 30.0, .end = 31.5};
    static const char *const WORDS[6] = {" Hello", " world,", " this", " is", " a", " test."};
    static const double T[6][2] = {{30.0, 30.16}, {30.16, 30.32}, {30.48, 30.64},
                                   {30.64, 30.8}, {30.8, 30.96},  {30.96, 31.12}};
    static const int BEGIN[6] = {0, 1, 3, 4, 5, 6}, NTOK[6] = {1, 2, 1, 1, 1, 2}, PROB[6] = {0, 1, 3, 4, 5, 6};
    for (int mode = 0; mode < 2; mode++) { /* scores; softmax over 1500 positions */
        int stride = mode ? 1500 : BLOCK * 9;
        float *wm = synthetic(n, 2, stride, mode);
        a = synthetic_alignment(t, ids, n, wm, 2, stride, mode, probs);
        seg.start = 30.0, seg.end = 31.5;
        assert_int_equal(whisper_add_word_timestamps(&a, &seg, 1, 30.0, 0.0, &ws, &err), WGML_OK);
        assert_int_equal(seg.word_begin, 0);
        assert_int_equal(seg.n_words, 6);
        assert_int_equal(ws.n, 6);
        for (int k = 0; k < 6; k++) {
            expect_word(&ws, k, WORDS[k], BEGIN[k], NTOK[k]);
            assert_true(ws.w[k].start == T[k][0] && ws.w[k].end == T[k][1]); /* round(., 2): the same doubles */
            expect_time("probability", ws.w[k].probability, probs[PROB[k]]);
        }
        assert_true(seg.start == 30.0 && seg.end == 31.12);
        whisper_words_free(&ws);
        free(wm);
    }

    /* two segments, " Hello world, this" and " is a test.": the first takes words until it has its 4 text
     * tokens; its end becomes its last word's (30.7 + 0.5 is not before 30.64), the second's start its first
     * word's (30.7 - 0.5 is not after 30.64) */
    int32_t s1[6] = {sp->ts_begin, ids[0], ids[1], ids[2], ids[3], sp->ts_begin + 35};
    int32_t s2[6] = {sp->ts_begin + 35, ids[4], ids[5], ids[6], ids[7], sp->ts_begin + 65};
    whisper_word_segment segs[2] = {{.tokens = s1, .n_tokens = 6, .start = 30.0, .end = 30.7},
                                    {.tokens = s2, .n_tokens = 6, .start = 30.7, .end = 31.3}};
    a = synthetic_alignment(t, ids, n, w, 2, BLOCK * 9, 0, probs);
    assert_int_equal(whisper_add_word_timestamps(&a, segs, 2, 30.0, 0.0, &ws, &err), WGML_OK);
    assert_int_equal(ws.n, 6);
    assert_true(segs[0].word_begin == 0 && segs[0].n_words == 3);
    assert_true(segs[1].word_begin == 3 && segs[1].n_words == 3);
    for (int k = 0; k < 6; k++)
        expect_word(&ws, k, WORDS[k], BEGIN[k], NTOK[k]);
    assert_true(segs[0].start == 30.0 && segs[0].end == 30.64);
    assert_true(segs[1].start == 30.64 && segs[1].end == 31.12);
    whisper_words_free(&ws);

    /* every allocation failing in turn: out of memory, nothing leaked, then success */
    long live = wgml_alloc_live();
    int ok = 0;
    for (long k = 0; k < 200 && !ok; k++) {
        wgml_alloc_fail_after(k);
        wgml_status st = whisper_add_word_timestamps(&a, segs, 2, 30.0, 0.0, &ws, &err);
        wgml_alloc_fail_after(-1);
        if (st == WGML_OK)
            ok = 1;
        else
            assert_int_equal(st, WGML_ERR_OUT_OF_MEMORY);
        whisper_words_free(&ws);
        assert_int_equal(wgml_alloc_live(), live);
    }
    assert_true(ok);

    /* errors: rows that do not match the tokens, segments that are not the alignment's tokens */
    a.n_rows--;
    CHECK_ERR("rows", whisper_add_word_timestamps(&a, segs, 2, 30.0, 0.0, &ws, &err), &err, WGML_ERR_INVALID_ARGUMENT,
              "weight rows");
    a.n_rows++;
    s2[2] = ids[0];
    CHECK_ERR("segments", whisper_add_word_timestamps(&a, segs, 2, 30.0, 0.0, &ws, &err), &err,
              WGML_ERR_INVALID_ARGUMENT, "segment 1");
    s2[2] = ids[5];
    a.medfilt_width = 4;
    CHECK_ERR("width", whisper_add_word_timestamps(&a, segs, 2, 30.0, 0.0, &ws, &err), &err, WGML_ERR_INVALID_ARGUMENT,
              "odd");
    a.medfilt_width = 0;
    /* no text tokens: no words */
    a.n_text = 0;
    assert_int_equal(whisper_find_alignment(&a, &ws, &err), WGML_OK);
    assert_int_equal(ws.n, 0);
    free(w);

    /* Chinese: words are characters (园 and 散 two tokens each), "。" joins "步" */
    int32_t zh[16];
    memcpy(zh, encode(t, "我们今天去公园散步。", &n), sizeof zh);
    assert_int_equal(n, 10);
    float pz[10];
    for (int i = 0; i < 10; i++)
        pz[i] = 0.25f * (float)(i % 4 + 1);
    w = synthetic(n, 1, BLOCK * 11, 0);
    a = synthetic_alignment(t, zh, n, w, 1, BLOCK * 11, 0, pz);
    a.language = "zh";
    int32_t zseg[12] = {sp->ts_begin};
    memcpy(zseg + 1, zh, 10 * sizeof *zh);
    zseg[11] = sp->ts_begin + 90;
    seg = (whisper_word_segment){.tokens = zseg, .n_tokens = 12, .start = 0.0, .end = 1.8};
    assert_int_equal(whisper_add_word_timestamps(&a, &seg, 1, 0.0, 0.0, &ws, &err), WGML_OK);
    static const char *const ZW[7] = {"我们", "今天", "去", "公", "园", "散", "步。"};
    static const double ZT[7][2] = {{0, 0.16},    {0.16, 0.32}, {0.32, 0.48}, {0.48, 0.64},
                                    {0.64, 0.96}, {0.96, 1.28}, {1.28, 1.44}};
    static const int ZB[7] = {0, 1, 2, 3, 4, 6, 8}, ZN[7] = {1, 1, 1, 1, 2, 2, 2};
    assert_int_equal(ws.n, 7);
    for (int k = 0; k < 7; k++) {
        expect_word(&ws, k, ZW[k], ZB[k], ZN[k]);
        assert_true(ws.w[k].start == ZT[k][0] && ws.w[k].end == ZT[k][1]);
    }
    expect_time("园's probability: the mean of its two tokens'", ws.w[4].probability, (pz[4] + pz[5]) / 2.0);
    assert_true(seg.start == 0.0 && seg.end == 1.44);
    whisper_words_free(&ws);
    free(w);
    whisper_tokenizer_free(t);
}

/* ---- add_word_timestamps' rules on hand-made alignments ---- */

static void run_rules(whisper_words *ws, whisper_word_segment *seg, double time_offset, double last_speech) {
    int32_t tok[16];
    int n = 0;
    for (int i = 0; i < ws->n; i++)
        n += ws->w[i].n_tokens;
    for (int i = 0; i < n; i++)
        tok[i] = i;
    seg->tokens = tok;
    seg->n_tokens = n;
    wgml_error err;
    assert_int_equal(whisper_words_to_segments(ws, 50257, seg, 1, time_offset, last_speech, NULL, NULL, &err), WGML_OK);
    seg->tokens = NULL;
}

static void expect_times(const whisper_words *ws, int i, const char *text, double start, double end) {
    if (i >= ws->n) fail_msg("word %d of %d", i, ws->n);
    if (strcmp(ws->w[i].text, text)) fail_msg("word %d: '%s', expected '%s'", i, ws->w[i].text, text);
    char what[64];
    snprintf(what, sizeof what, "'%s' start", text);
    expect_time(what, ws->w[i].start, start);
    snprintf(what, sizeof what, "'%s' end", text);
    expect_time(what, ws->w[i].end, end);
}

static void test_long_words(void **state) {
    (void)state;
    whisper_words ws = {0};
    whisper_word_segment seg;

    /* Sentence ends. Durations .25 .25 1.5 2 .25 .25: the non-zero ones' median (.25 + .25) / 2 = .25, so
     * max_duration .5. i = 2 ".": longer, a sentence mark: end = .5 + .5 = 1.0 (then merged into " B", whose
     * times stay); i = 3 " C": longer, after a mark: start = 4.0 - .5 = 3.5. Merged: " B." and " D.". The
     * segment [0, 4.5]: its start stays 0 = " A"'s, its end becomes " D."'s 4.25 (5.0 is not before 4.25). */
    static const char *const A[] = {" A", " B", ".", " C", " D", "."};
    static const double TA[6][2] = {{0, .25}, {.25, .5}, {.5, 2.0}, {2.0, 4.0}, {4.0, 4.25}, {4.25, 4.5}};
    make_words(&ws, A, NULL, TA, 6);
    seg = (whisper_word_segment){.start = 0, .end = 4.5};
    run_rules(&ws, &seg, 0.0, 0.0);
    assert_int_equal(ws.n, 4);
    expect_times(&ws, 0, " A", 0, .25);
    expect_times(&ws, 1, " B.", .25, .5);
    expect_times(&ws, 2, " C", 3.5, 4.0);
    expect_times(&ws, 3, " D.", 4.0, 4.25);
    assert_true(seg.start == 0 && seg.end == 4.25);
    whisper_words_free(&ws);

    /* A mark that stays a word (the word before ends with a space): its own end truncated to .25 + .5 */
    static const char *const B[] = {" one ", ".", " two", " three"};
    static const double TB[4][2] = {{0, .25}, {.25, 2.0}, {2.0, 2.25}, {2.25, 2.5}};
    make_words(&ws, B, NULL, TB, 4);
    seg = (whisper_word_segment){.start = 0, .end = 2.5};
    run_rules(&ws, &seg, 0.0, 0.0);
    assert_int_equal(ws.n, 4);
    expect_times(&ws, 1, ".", .25, .75);
    expect_times(&ws, 2, " two", 2.0, 2.25);
    whisper_words_free(&ws);

    /* The first word after a pause. Durations 3 .25 .25 .25: median .25, max .5; " So" ends 3.0 > 4 x .25
     * after the last speech (0) and lasts more than .5: " we" is short, so only start = max(0, 3.0 - .5) =
     * 2.5; the segment's start becomes 2.5 (0 - .5 is not after 2.5). */
    static const char *const C[] = {" So", " we", " go", " now"};
    static const double TC[4][2] = {{0, 3.0}, {3.0, 3.25}, {3.25, 3.5}, {3.5, 3.75}};
    make_words(&ws, C, NULL, TC, 4);
    seg = (whisper_word_segment){.start = 0, .end = 3.75};
    run_rules(&ws, &seg, 0.0, 0.0);
    expect_times(&ws, 0, " So", 2.5, 3.0);
    expect_times(&ws, 1, " we", 3.0, 3.25);
    assert_true(seg.start == 2.5 && seg.end == 3.75);
    whisper_words_free(&ws);
    /* the same after speech at 2.9: 3.0 - 2.9 is not more than 1.0, nothing moves; the segment's start is
     * preferred instead (0 < 3.0 but 0 - .5 is not after 0: no) -> the segment starts at " So"'s 0 */
    make_words(&ws, C, NULL, TC, 4);
    seg = (whisper_word_segment){.start = 0, .end = 3.75};
    run_rules(&ws, &seg, 0.0, 2.9);
    expect_times(&ws, 0, " So", 0, 3.0);
    whisper_words_free(&ws);

    /* The second word long too. Durations 3 2 .25 .25 .25: median .25, max .5; boundary = max(5.0 / 2,
     * 5.0 - .5) = 4.5: " So" ends and " well" starts there, " So" starts at 4.5 - .5 = 4.0. */
    static const char *const D[] = {" So", " well", " we", " go", " on"};
    static const double TD[5][2] = {{0, 3.0}, {3.0, 5.0}, {5.0, 5.25}, {5.25, 5.5}, {5.5, 5.75}};
    make_words(&ws, D, NULL, TD, 5);
    seg = (whisper_word_segment){.start = 0, .end = 5.75};
    run_rules(&ws, &seg, 0.0, 0.0);
    expect_times(&ws, 0, " So", 4.0, 4.5);
    expect_times(&ws, 1, " well", 4.5, 5.0);
    assert_true(seg.start == 4.0);
    whisper_words_free(&ws);

    /* The segment's own times against long first and last words (no pause: last speech 2.9). Durations 2.5
     * .25 .25 .25 2.25: median .25. Start: 2.0 < 3.0 and 2.0 - .5 = 1.5 > .5 -> " Hi" starts at
     * max(0, min(3.0 - .25, 2.0)) = 2.0; end: 4.0 > 3.75 and 4.5 < 6.0 -> " ok" ends at max(3.75 + .25, 4.0)
     * = 4.0. The segment keeps [2, 4]. */
    static const char *const E[] = {" Hi", " there", " you", " all", " ok"};
    static const double TE[5][2] = {{0.5, 3.0}, {3.0, 3.25}, {3.25, 3.5}, {3.5, 3.75}, {3.75, 6.0}};
    make_words(&ws, E, NULL, TE, 5);
    seg = (whisper_word_segment){.start = 2.0, .end = 4.0};
    run_rules(&ws, &seg, 0.0, 2.9);
    expect_times(&ws, 0, " Hi", 2.0, 3.0);
    expect_times(&ws, 4, " ok", 3.75, 4.0);
    assert_true(seg.start == 2.0 && seg.end == 4.0);
    whisper_words_free(&ws);

    /* round(time_offset + t, 2), half to even on the exact double: 10.125 -> 10.12, 10.375 -> 10.38,
     * 11.375 -> 11.38. Durations .25 and 1: median .625, max 1.25, nothing truncated; the first word after
     * speech at 10.0 ends .38 later, not more than 4 x .625 */
    static const char *const F[] = {" x", " y"};
    static const double TF[2][2] = {{0.125, 0.375}, {0.375, 1.375}};
    make_words(&ws, F, NULL, TF, 2);
    seg = (whisper_word_segment){.start = 10.0, .end = 11.375};
    run_rules(&ws, &seg, 10.0, 10.0);
    expect_times(&ws, 0, " x", 10.12, 10.38);
    /* " y" [10.38, 11.38]: 11.375 > 10.38 but 11.875 is not before 11.38: the segment ends at 11.38 */
    expect_times(&ws, 1, " y", 10.38, 11.38);
    assert_true(seg.start == 10.12 && seg.end == 11.38);
    whisper_words_free(&ws);
    /* the median is at most 0.7: durations 1 2 1 -> median 1 -> 0.7, max 1.4: "." (not merged: the word
     * before ends with a space) is truncated to 1 + 1.4 = 2.4 (with max 2 it would keep its 3) */
    static const char *const H[] = {" one ", ".", " two"};
    static const double TH[3][2] = {{0, 1}, {1, 3}, {3, 4}};
    make_words(&ws, H, NULL, TH, 3);
    seg = (whisper_word_segment){.start = 0.0, .end = 4.0};
    run_rules(&ws, &seg, 0.0, 0.0);
    expect_times(&ws, 1, ".", 1, 2.4);
    expect_times(&ws, 2, " two", 3, 4);
    whisper_words_free(&ws);
    /* all durations zero: median 0, the loop skipped; words of zero length come through */
    static const double TG[2][2] = {{1.0, 1.0}, {1.0, 1.0}};
    make_words(&ws, F, NULL, TG, 2);
    seg = (whisper_word_segment){.start = 0.0, .end = 2.0};
    run_rules(&ws, &seg, 0.0, 0.0);
    assert_int_equal(ws.n, 2);
    /* first word: 1.0 - 0 > 0 and (0 > 0 or 1.0 - 1.0 > 0): no; segment start 0 < 1.0 and -0.5 > 1.0: no
     * -> 1.0; end: 2.0 > 1.0 and 2.5 < 1.0: no -> 1.0 */
    assert_true(seg.start == 1.0 && seg.end == 1.0);
    whisper_words_free(&ws);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_alignment_heads), cmocka_unit_test(test_model_inputs),
        cmocka_unit_test(test_dtw_brute_force), cmocka_unit_test(test_dtw_ties),
        cmocka_unit_test(test_median_filter),   cmocka_unit_test(test_zscore),
        cmocka_unit_test(test_split_english),   cmocka_unit_test(test_merge_punctuations),
        cmocka_unit_test(test_split_chinese),   cmocka_unit_test(test_alignment_diagonal),
        cmocka_unit_test(test_long_words),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
