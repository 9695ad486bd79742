/*
 * fuzz_tokenizer.c - libFuzzer target: text -> token ids -> text.
 *
 * The vocabularies in ../shared/vocab (or $WGML_SHARED/vocab) are loaded once,
 * with the CLIP BPE and SigLIP unigram vocabularies `wgml synth` makes
 * (tools/synth_vocab.h).
 * Input: byte 0 selects the vocabulary, byte 1 bit 0 asks for BOS, the rest is
 * the text (any bytes: invalid UTF-8 included). The text is encoded (with a
 * small buffer first, to exercise the "count exceeds cap" contract), every id
 * must be in the vocabulary, and every id is turned back into its piece and
 * the whole sequence decoded. Written against src/text/tokenizer.h only.
 */
#include "format/gguf.h"
#include "text/tokenizer.h"
#include "tools/synth_vocab.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(c)                                                                                                       \
    do {                                                                                                               \
        if (!(c)) {                                                                                                    \
            fprintf(stderr, "fuzz_tokenizer: check failed: %s (line %d)\n", #c, __LINE__);                             \
            abort();                                                                                                   \
        }                                                                                                              \
    } while (0)

static const char *k_vocabs[] = {"ggml-vocab-llama-spm.gguf", "ggml-vocab-gpt-2.gguf", "ggml-vocab-phi-3.gguf",
                                 "ggml-vocab-bert-bge.gguf"};
#define N_VOCABS (int)(sizeof k_vocabs / sizeof k_vocabs[0])

static gguf_file *g_files[N_VOCABS + 2];
static wgml_tokenizer *g_tok[N_VOCABS + 2];
static int g_n;

/* A synthetic vocabulary (clip: CLIP's BPE, else SigLIP's unigram) as a GGUF in memory. */
static void add_synth(int clip) {
    wgml_error err;
    gguf_writer *w = gguf_writer_create();
    void *data = NULL;
    size_t size = 0;
    gguf_file *f = NULL;
    wgml_tokenizer *t = NULL;
    wgml_status st = w ? WGML_OK : WGML_ERR_OUT_OF_MEMORY;
    if (!st) st = clip ? synth_vocab_clip(w, 2048, &err) : synth_vocab_unigram(w, 2048, &err);
    if (!st) st = gguf_writer_begin_memory(w, &err);
    if (!st) st = gguf_writer_finish(w, &err);
    if (!st) st = gguf_writer_take_memory(w, &data, &size, &err);
    gguf_writer_free(w);
    if (!st && (st = gguf_open_memory(data, size, "synth", &f, &err))) free(data);
    if (!st) gguf_own_bytes(f);
    if (!st) st = wgml_tokenizer_load(f, &t, &err);
    if (st) {
        fprintf(stderr, "fuzz_tokenizer: synthetic vocabulary: %s\n", err.message);
        abort();
    }
    g_files[g_n] = f;
    g_tok[g_n++] = t;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    const char *root = getenv("WGML_SHARED");
    if (!root || !*root) root = "../shared";
    for (int i = 0; i < N_VOCABS; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/vocab/%s", root, k_vocabs[i]);
        wgml_error err;
        gguf_file *f = NULL;
        if (gguf_open(path, &f, &err) != WGML_OK) {
            fprintf(stderr, "fuzz_tokenizer: %s (set WGML_SHARED)\n", err.message);
            continue;
        }
        wgml_tokenizer *t = NULL;
        if (wgml_tokenizer_load(f, &t, &err) != WGML_OK) {
            fprintf(stderr, "fuzz_tokenizer: %s: %s\n", path, err.message);
            gguf_close(f);
            continue;
        }
        g_files[g_n] = f;
        g_tok[g_n++] = t;
    }
    if (g_n == 0) {
        fprintf(stderr, "fuzz_tokenizer: no vocabulary loaded\n");
        exit(1);
    }
    add_synth(1);
    add_synth(0);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    const wgml_tokenizer *tok = g_tok[data[0] % g_n];
    int add_bos = data[1] & 1;
    const char *text = (const char *)data + 2;
    size_t len = size - 2;
    int n_vocab = wgml_tokenizer_n_vocab(tok);
    CHECK(n_vocab > 0);

    wgml_error err;
    int32_t small[4];
    int n = wgml_tokenizer_encode(tok, text, len, add_bos, small, 4, &err);
    if (n < 0) {
        CHECK(err.message[0]);
        return 0;
    }
    int32_t *ids = malloc(((size_t)n + 1) * sizeof *ids);
    CHECK(ids);
    int n2 = wgml_tokenizer_encode(tok, text, len, add_bos, ids, n, &err);
    CHECK(n2 == n);
    for (int i = 0; i < n && i < 4; i++)
        CHECK(ids[i] == small[i]);
    char piece[64];
    for (int i = 0; i < n; i++) {
        CHECK(ids[i] >= 0 && ids[i] < n_vocab);
        int k = wgml_tokenizer_piece(tok, ids[i], piece, (int)sizeof piece);
        CHECK(k >= 0);
        if (k > (int)sizeof piece) {
            char *big = malloc((size_t)k);
            CHECK(big);
            CHECK(wgml_tokenizer_piece(tok, ids[i], big, k) == k);
            free(big);
        }
        CHECK(wgml_tokenizer_token_text(tok, ids[i]) != NULL);
    }
    CHECK(wgml_tokenizer_piece(tok, -1, piece, (int)sizeof piece) < 0);
    CHECK(wgml_tokenizer_piece(tok, n_vocab, piece, (int)sizeof piece) < 0);
    char none[1];
    int total = wgml_tokenizer_decode(tok, ids, n, none, 0);
    CHECK(total >= 0);
    char *out = malloc((size_t)total + 1);
    CHECK(out);
    CHECK(wgml_tokenizer_decode(tok, ids, n, out, total) == total);
    free(out);
    free(ids);
    return 0;
}
