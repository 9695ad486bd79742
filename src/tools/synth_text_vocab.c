/*
 * synth_text_vocab.c - made-up CLIP and SigLIP vocabularies (synth_vocab.h).
 *
 * Both are built from the same words: a built-in list of common English
 * words (written for this file), then made-up words of two to four
 * syllables from a fixed linear congruential sequence, as many as the size
 * asks. Everything is deterministic: the same n_vocab gives the same file.
 */
#include "core/alloc.h"
#include "core/error.h"
#include "text/tokenizer_impl.h"
#include "text/unicode.h"
#include "tools/synth_vocab.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const char *const WORDS[] = {
    "the",       "a",       "of",        "and",     "in",        "on",      "with",     "photo",    "picture",
    "image",     "cat",     "dog",       "man",     "woman",     "person",  "people",   "child",    "children",
    "car",       "bus",     "train",     "plane",   "boat",      "bird",    "horse",    "cow",      "sheep",
    "tree",      "flower",  "house",     "street",  "city",      "road",    "water",    "sea",      "beach",
    "mountain",  "sky",     "cloud",     "sun",     "snow",      "rain",    "table",    "chair",    "room",
    "kitchen",   "food",    "pizza",     "cake",    "apple",     "banana",  "orange",   "red",      "blue",
    "green",     "yellow",  "black",     "white",   "brown",     "small",   "large",    "big",      "little",
    "old",       "young",   "new",       "two",     "three",     "four",    "one",      "is",       "are",
    "was",       "sitting", "standing",  "walking", "running",   "playing", "eating",   "holding",  "looking",
    "riding",    "flying",  "next",      "to",      "at",        "by",      "from",     "near",     "under",
    "over",      "front",   "back",      "top",     "side",      "group",   "field",    "grass",    "park",
    "window",    "door",    "wall",      "floor",   "bed",       "sofa",    "computer", "phone",    "book",
    "paper",     "ball",    "game",      "team",    "player",    "shirt",   "hat",      "bag",      "glass",
    "cup",       "plate",   "bowl",      "knife",   "fork",      "spoon",   "bottle",   "wine",     "coffee",
    "tea",       "milk",    "bread",     "cheese",  "meat",      "fish",    "chicken",  "rice",     "soup",
    "salad",     "fruit",   "vegetable", "night",   "day",       "morning", "evening",  "light",    "dark",
    "bright",    "happy",   "sad",       "smiling", "looking",   "this",    "that",     "there",    "here",
    "it",        "its",     "his",       "her",     "their",     "our",     "my",       "your",     "what",
    "who",       "where",   "when",      "why",     "how",       "not",     "no",       "yes",      "very",
    "much",      "many",    "some",      "all",     "every",     "each",    "other",    "another",  "same",
    "different", "first",   "last",      "long",    "short",     "high",    "low",      "good",     "bad",
    "best",      "better",  "great",     "nice",    "beautiful", "pretty",  "drawing",  "painting", "art",
    "sketch",    "diagram", "map",       "chart",   "logo",      "text",    "sign",     "letter",   "word",
    "number",    "time",    "year",      "world",   "life",      "hand",    "head",     "face",     "eye",
    "eyes",      "hair",    "body",      "arm",     "leg",       "foot",    "feet",     "animal",   "animals",
    "pet",       "toy",     "teddy",     "bear",    "elephant",  "zebra",   "giraffe",  "lion",     "tiger",
    "monkey",    "mouse",   "rabbit",    "duck",    "frog",      "snake",   "turtle",   "spider",   "butterfly",
    "bee",       "ant",     "forest",    "river",   "lake",      "island",  "desert",   "bridge",   "tower",
    "castle",    "church",  "school",    "office",  "shop",      "market",  "station",  "airport",  "garden",
    "farm",      "village", "country",   "north",   "south",     "east",    "west",     "left",     "right",
    "up",        "down",    "in",        "out",     "off",       "open",    "closed",   "empty",    "full",
    "hot",       "cold",    "warm",      "cool",    "wet",       "dry",     "clean",    "dirty",    "soft",
    "hard",      "fast",    "slow",      "quick",   "lazy",      "jumps",   "fox",      "brown",    "over",
    "dogs",      "cats",    "be",        "have",    "do",        "say",     "get",      "make",     "go",
    "know",      "take",    "see",       "come",    "think",     "give",    "find",     "tell",     "ask",
    "work",      "seem",    "feel",      "try",     "leave",     "call",    "we",       "you",      "they",
    "he",        "she",     "i",         "me",      "him",       "them",    "us",       "as",       "for",
    "but",       "or",      "if",        "so",      "because",   "than",    "then",     "about",    "into",
    "through",   "after",   "before",    "between", "while",     "during",  "without",  "again",
};
#define N_WORDS (sizeof WORDS / sizeof WORDS[0])

/* ---- a set of strings in one growing blob ---- */

typedef struct strs {
    char *blob;
    size_t used, cap;
    uint32_t *off; /* each string's offset */
    uint32_t *len;
    int n, cap_n;
    int32_t *slot; /* hash index: string number or -1 */
    size_t mask;
} strs;

static uint32_t hash(const char *s, size_t n) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)s[i]) * 16777619u;
    return h;
}

static int strs_init(strs *t, int cap_n) {
    memset(t, 0, sizeof *t);
    size_t slots = 16;
    while (slots < 2 * (size_t)cap_n)
        slots *= 2;
    t->cap = (size_t)cap_n * 16 + 64;
    t->blob = wgml_malloc(t->cap);
    t->off = wgml_malloc((size_t)cap_n * sizeof *t->off);
    t->len = wgml_malloc((size_t)cap_n * sizeof *t->len);
    t->slot = wgml_malloc(slots * sizeof *t->slot);
    t->cap_n = cap_n;
    t->mask = slots - 1;
    if (!t->blob || !t->off || !t->len || !t->slot) return 0;
    for (size_t i = 0; i < slots; i++)
        t->slot[i] = -1;
    return 1;
}

static void strs_free(strs *t) {
    wgml_free(t->blob);
    wgml_free(t->off);
    wgml_free(t->len);
    wgml_free(t->slot);
}

static const char *strs_at(const strs *t, int i) { return t->blob + t->off[i]; }

/* Index of s[0..n), or -1. */
static int strs_find(const strs *t, const char *s, size_t n) {
    for (size_t j = hash(s, n) & t->mask; t->slot[j] >= 0; j = (j + 1) & t->mask) {
        int k = t->slot[j];
        if (t->len[k] == n && memcmp(strs_at(t, k), s, n) == 0) return k;
    }
    return -1;
}

/* Adds s[0..n) (the caller checked it is new): its index, -1 when out of memory or full. */
static int strs_add(strs *t, const char *s, size_t n) {
    if (t->n == t->cap_n) return -1;
    if (t->used + n + 1 > t->cap) {
        size_t cap = 2 * t->cap + n + 1;
        char *b = wgml_realloc(t->blob, cap);
        if (!b) return -1;
        t->blob = b, t->cap = cap;
    }
    memcpy(t->blob + t->used, s, n);
    t->blob[t->used + n] = '\0';
    int k = t->n++;
    t->off[k] = (uint32_t)t->used, t->len[k] = (uint32_t)n;
    t->used += n + 1;
    size_t j = hash(s, n) & t->mask;
    while (t->slot[j] >= 0)
        j = (j + 1) & t->mask;
    t->slot[j] = k;
    return k;
}

/* ---- words ---- */

typedef struct wordgen {
    size_t i;
    uint64_t state;
    char buf[32];
} wordgen;

/* The next word: the built-in list, then made-up ones. */
static const char *next_word(wordgen *g) {
    if (g->i < N_WORDS) return WORDS[g->i++];
    static const char *const onset[] = {"b",  "c",  "d",  "f",  "g",  "h",  "j",  "k",  "l",  "m",
                                        "n",  "p",  "r",  "s",  "t",  "v",  "w",  "z",  "br", "ch",
                                        "cl", "dr", "fl", "gr", "pl", "sh", "st", "th", "tr", ""};
    static const char *const vowel[] = {"a", "e", "i", "o", "u", "ai", "ea", "oo", "ou", "y"};
    static const char *const coda[] = {"", "", "", "n", "r", "s", "t", "l", "m", "nd", "st", "ng"};
    size_t k = 0;
    g->state = g->state * 6364136223846793005ull + 1442695040888963407ull;
    uint64_t r = g->state >> 16;
    int syl = 2 + (int)(r % 3);
    r /= 3;
    for (int s = 0; s < syl; s++) {
        const char *p[3] = {onset[r % 30], vowel[(r / 30) % 10], coda[(r / 300) % 12]};
        r /= 3600;
        if (r < 3600) {
            g->state = g->state * 6364136223846793005ull + 1442695040888963407ull;
            r ^= g->state >> 11;
        }
        for (int q = 0; q < 3; q++) {
            size_t n = strlen(p[q]);
            if (k + n < sizeof g->buf) memcpy(g->buf + k, p[q], n), k += n;
        }
    }
    g->buf[k] = '\0';
    return g->buf;
}

/* ---- writing ---- */

static wgml_status write_keys(gguf_writer *w, const strs *tok, const int32_t *type, const float *score,
                              const strs *merges, wgml_error *err) {
    const char **ptr = wgml_malloc((size_t)tok->n * sizeof *ptr);
    uint64_t *len = wgml_malloc((size_t)tok->n * sizeof *len);
    wgml_status st = ptr && len ? WGML_OK : wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "synth: out of memory");
    for (int i = 0; st == WGML_OK && i < tok->n; i++)
        ptr[i] = strs_at(tok, i), len[i] = tok->len[i];
    if (st == WGML_OK) st = gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", ptr, len, (uint64_t)tok->n, err);
    if (st == WGML_OK)
        st = gguf_writer_set_arr(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, type, (uint64_t)tok->n, err);
    if (st == WGML_OK && score)
        st = gguf_writer_set_arr(w, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, score, (uint64_t)tok->n, err);
    if (st == WGML_OK && merges) {
        for (int i = 0; i < merges->n; i++)
            ptr[i] = strs_at(merges, i), len[i] = merges->len[i];
        st = gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", ptr, len, (uint64_t)merges->n, err);
    }
    wgml_free(ptr);
    wgml_free(len);
    return st;
}

#define EOW "</w>"

wgml_status synth_vocab_clip(gguf_writer *w, int n_vocab, wgml_error *err) {
    if (n_vocab < 514 || n_vocab > (1 << 24))
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "synth: a CLIP vocabulary of %d tokens (514 .. 2^24)",
                         n_vocab);
    strs tok, mer;
    int32_t *type = wgml_malloc((size_t)n_vocab * sizeof *type);
    int ok = strs_init(&tok, n_vocab) & strs_init(&mer, n_vocab) && type;
    wgml_status st = ok ? WGML_OK : wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "synth: out of memory");
    /* the byte symbols in CLIP's order: those that stand for themselves, then the others */
    int order[256], k = 0;
    for (int b = 0; b < 256; b++)
        if (bpe_byte_to_cp((uint8_t)b) == (uint32_t)b) order[k++] = b;
    for (int b = 0; b < 256; b++)
        if (bpe_byte_to_cp((uint8_t)b) != (uint32_t)b) order[k++] = b;
    char sym[256][8];
    int sym_len[256];
    for (int i = 0; i < 256; i++)
        sym_len[order[i]] = uni_encode(bpe_byte_to_cp((uint8_t)order[i]), sym[order[i]]);
    for (int pass = 0; st == WGML_OK && pass < 2; pass++)
        for (int i = 0; i < 256; i++) {
            char s[16];
            int b = order[i], n = sym_len[b];
            memcpy(s, sym[b], (size_t)n);
            if (pass) memcpy(s + n, EOW, 4), n += 4;
            if (strs_add(&tok, s, (size_t)n) < 0) st = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "synth: out of memory");
        }
    /* merges: each word's symbols joined left to right */
    const int target = n_vocab - 2;
    wordgen g = {0, 0x5eed, {0}};
    char cur[96], cand[96], mline[200];
    for (int tries = 0; st == WGML_OK && tok.n < target && tries < 50 * n_vocab; tries++) {
        const char *word = next_word(&g);
        size_t wl = strlen(word);
        if (wl < 2 || wl > 20) continue;
        size_t cl = (size_t)sym_len[(uint8_t)word[0]];
        memcpy(cur, sym[(uint8_t)word[0]], cl);
        for (size_t j = 1; j < wl && tok.n < target && st == WGML_OK; j++) {
            char next[16];
            size_t nl = (size_t)sym_len[(uint8_t)word[j]];
            memcpy(next, sym[(uint8_t)word[j]], nl);
            if (j + 1 == wl) memcpy(next + nl, EOW, 4), nl += 4;
            memcpy(cand, cur, cl);
            memcpy(cand + cl, next, nl);
            if (strs_find(&tok, cand, cl + nl) < 0) {
                memcpy(mline, cur, cl);
                mline[cl] = ' ';
                memcpy(mline + cl + 1, next, nl);
                if (strs_add(&mer, mline, cl + 1 + nl) < 0 || strs_add(&tok, cand, cl + nl) < 0)
                    st = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "synth: out of memory");
            }
            memcpy(cur, cand, cl + nl);
            cl += nl;
        }
    }
    /* what the words did not fill: tokens no merge makes (never output) */
    for (int i = 0; st == WGML_OK && tok.n < target; i++) {
        char s[32];
        int n = snprintf(s, sizeof s, "<|unused_%d|>", i);
        if (strs_find(&tok, s, (size_t)n) < 0 && strs_add(&tok, s, (size_t)n) < 0)
            st = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "synth: out of memory");
    }
    if (st == WGML_OK && (strs_add(&tok, "<|startoftext|>", 15) < 0 || strs_add(&tok, "<|endoftext|>", 13) < 0))
        st = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "synth: out of memory");
    if (st == WGML_OK) {
        for (int i = 0; i < n_vocab; i++)
            type[i] = i >= n_vocab - 2 ? TOK_CONTROL : TOK_NORMAL;
        st = gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2", err);
    }
    if (st == WGML_OK) st = gguf_writer_set_str(w, "tokenizer.ggml.pre", "clip", err);
    if (st == WGML_OK) st = write_keys(w, &tok, type, NULL, &mer, err);
    if (st == WGML_OK) st = gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)n_vocab - 2, err);
    if (st == WGML_OK) st = gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)n_vocab - 1, err);
    if (st == WGML_OK) st = gguf_writer_set_u32(w, "tokenizer.ggml.unknown_token_id", (uint32_t)n_vocab - 1, err);
    if (st == WGML_OK) st = gguf_writer_set_u32(w, "tokenizer.ggml.padding_token_id", (uint32_t)n_vocab - 1, err);
    if (st == WGML_OK) st = gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", 1, err);
    if (st == WGML_OK) st = gguf_writer_set_bool(w, "tokenizer.ggml.add_eos_token", 1, err);
    strs_free(&tok);
    strs_free(&mer);
    wgml_free(type);
    return st;
}

wgml_status synth_vocab_unigram(gguf_writer *w, int n_vocab, wgml_error *err) {
    if (n_vocab < 64 || n_vocab > (1 << 24))
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "synth: a unigram vocabulary of %d pieces (64 .. 2^24)",
                         n_vocab);
    static const char SP[] = "\xE2\x96\x81"; /* U+2581 */
    static const char CHARS[] = "etaoinshrdlcumwfgypbvkjxqz0123456789";
    const int n_chars = (int)sizeof CHARS - 1;
    strs tok;
    int32_t *type = wgml_malloc((size_t)n_vocab * sizeof *type);
    float *score = wgml_malloc((size_t)n_vocab * sizeof *score);
    int ok = strs_init(&tok, n_vocab) && type && score;
    wgml_status st = ok ? WGML_OK : wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "synth: out of memory");
    static const char *const head[] = {"<pad>", "</s>", "<unk>", "\xE2\x96\x81"};
    for (int i = 0; st == WGML_OK && i < 4; i++)
        if (strs_add(&tok, head[i], strlen(head[i])) < 0)
            st = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "synth: out of memory");
    /* words, with and without the space mark, then their halves; the single characters last */
    const int words_end = n_vocab - n_chars;
    wordgen g = {0, 0x5eed, {0}};
    char s[64];
    for (int tries = 0; st == WGML_OK && tok.n < words_end && tries < 50 * n_vocab; tries++) {
        const char *word = next_word(&g);
        size_t wl = strlen(word);
        if (wl < 2 || wl > 24) continue;
        const size_t half = wl / 2;
        const char *form[3][2] = {{SP, word}, {"", word}, {"", word + half}};
        for (int f = 0; f < 3 && tok.n < words_end && st == WGML_OK; f++) {
            size_t a = strlen(form[f][0]), b = strlen(form[f][1]);
            memcpy(s, form[f][0], a);
            memcpy(s + a, form[f][1], b);
            if (a + b < 2 || strs_find(&tok, s, a + b) >= 0) continue;
            if (strs_add(&tok, s, a + b) < 0) st = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "synth: out of memory");
        }
    }
    for (int i = 0; st == WGML_OK && tok.n < words_end; i++) { /* the words ran out: more made-up pieces */
        int n = snprintf(s, sizeof s, "%sq%dx", SP, i);
        if (strs_find(&tok, s, (size_t)n) < 0 && strs_add(&tok, s, (size_t)n) < 0)
            st = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "synth: out of memory");
    }
    for (int i = 0; st == WGML_OK && i < n_chars; i++)
        if (strs_add(&tok, CHARS + i, 1) < 0) st = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "synth: out of memory");
    if (st == WGML_OK) {
        for (int i = 0; i < n_vocab; i++) {
            type[i] = i == 2 ? TOK_UNKNOWN : i < 2 ? TOK_CONTROL : TOK_NORMAL;
            score[i] = i < 3 ? 0.0f : -logf((float)(i - 1)); /* a Zipf-like log-probability, falling with the id */
        }
        st = gguf_writer_set_str(w, "tokenizer.ggml.model", "t5", err);
    }
    if (st == WGML_OK) st = gguf_writer_set_str(w, "tokenizer.ggml.pre", "siglip", err);
    if (st == WGML_OK) st = write_keys(w, &tok, type, score, NULL, err);
    if (st == WGML_OK) st = gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 1, err);
    if (st == WGML_OK) st = gguf_writer_set_u32(w, "tokenizer.ggml.unknown_token_id", 2, err);
    if (st == WGML_OK) st = gguf_writer_set_u32(w, "tokenizer.ggml.padding_token_id", 1, err);
    if (st == WGML_OK) st = gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", 0, err);
    if (st == WGML_OK) st = gguf_writer_set_bool(w, "tokenizer.ggml.add_eos_token", 1, err);
    if (st == WGML_OK) st = gguf_writer_set_bool(w, "tokenizer.ggml.add_space_prefix", 1, err);
    if (st == WGML_OK) st = gguf_writer_set_bool(w, "tokenizer.ggml.remove_extra_whitespaces", 1, err);
    /* SigLIP's spiece.model normalizes with nmt_nfkc, as the converted real one says */
    if (st == WGML_OK) st = gguf_writer_set_str(w, "tokenizer.ggml.normalizer", "nmt_nfkc", err);
    strs_free(&tok);
    wgml_free(type);
    wgml_free(score);
    return st;
}
