/*
 * fuzz_hf_tokenizer.c - libFuzzer target: Hugging Face tokenizer files
 * (model/hf_tokenizer.h) read into a vocabulary GGUF, then loaded and run
 * (text/tokenizer.h: CLIP's BPE, the unigram model, SentencePiece BPE).
 *
 * The input's first byte chooses: bit 0 clear, the rest is tokenizer.json,
 * optionally followed by a NUL byte and tokenizer_config.json; bit 0 set,
 * the rest is spiece.model (bit 1 adds a tokenizer_config.json naming
 * SiglipTokenizer). The files go into a temporary folder (in $TMPDIR, else
 * /dev/shm when writable, else /tmp; removed at exit). A file that converts
 * is loaded and a few texts (special tokens, invalid UTF-8, whitespace runs)
 * are encoded with and without the special tokens and decoded. Anything but
 * a clean error is a finding.
 */
#include "format/gguf.h"
#include "model/hf_tokenizer.h"
#include "text/tokenizer.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[256];
static const char *const FILES[] = {"tokenizer.json", "spiece.model", "tokenizer_config.json"};

static void cleanup(void) {
    char p[320];
    for (size_t i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, FILES[i]);
        unlink(p);
    }
    rmdir(dir);
}

static void put(const char *name, const uint8_t *data, size_t n) {
    char p[320];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    if (!data) {
        unlink(p);
        return;
    }
    FILE *f = fopen(p, "wb");
    if (!f) abort();
    if (n) fwrite(data, 1, n, f);
    fclose(f);
}

static void run(const wgml_tokenizer *tok) {
    static const char *const texts[] = {
        "A photo of a CAT, it's 42!",
        "",
        "  \t\n  ",
        "<|startoftext|>x<|endoftext|>",
        "a </s> b <unk><pad>",
        "\xff\xfe\xc3(\xed\xa0\x80 bad",
        "naïve Σ İ 東京 😀",
        "\xE2\x96\x81\xE2\x96\x81 x",
    };
    int32_t ids[512];
    char buf[2048];
    wgml_error err;
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++)
        for (int bos = 0; bos < 2; bos++) {
            int n = wgml_tokenizer_encode(tok, texts[i], strlen(texts[i]), bos, ids, 512, &err);
            if (n < 0) {
                if (!err.message[0]) abort();
                continue;
            }
            if (n > 512) n = 512;
            for (int k = 0; k < n; k++)
                if (ids[k] < 0 || ids[k] >= wgml_tokenizer_n_vocab(tok)) abort();
            if (wgml_tokenizer_decode(tok, ids, n, buf, sizeof buf) < 0) abort();
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!*dir) {
        const char *t = getenv("TMPDIR");
        if (!t || !*t) t = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
        snprintf(dir, sizeof dir, "%s/fuzz-hf-tok-%d", t, (int)getpid());
        mkdir(dir, 0700);
        atexit(cleanup);
    }
    if (size < 1 || size > 262144) return 0;
    const uint8_t flags = data[0];
    data++, size--;
    if (flags & 1) {
        static const char cfg[] = "{\"tokenizer_class\": \"SiglipTokenizer\", \"pad_token\": \"</s>\"}";
        put("tokenizer.json", NULL, 0);
        put("spiece.model", data, size);
        put("tokenizer_config.json", flags & 2 ? (const uint8_t *)cfg : NULL, sizeof cfg - 1);
    } else {
        const uint8_t *nul = memchr(data, 0, size);
        const size_t n = nul ? (size_t)(nul - data) : size;
        put("spiece.model", NULL, 0);
        put("tokenizer.json", data, n);
        put("tokenizer_config.json", nul ? nul + 1 : NULL, nul ? size - n - 1 : 0);
    }
    gguf_file *g = NULL;
    wgml_error err;
    static int verbose = -1; /* WGML_FUZZ_VERBOSE=1: each input's outcome (to check the seeds) */
    if (verbose < 0) verbose = getenv("WGML_FUZZ_VERBOSE") != NULL;
    if (wgml_hf_tokenizer_open(dir, &g, &err) == WGML_OK) {
        wgml_tokenizer *tok = NULL;
        if (wgml_tokenizer_load(g, &tok, &err) == WGML_OK) {
            run(tok);
            wgml_tokenizer_free(tok);
            if (verbose) fprintf(stderr, "fuzz_hf_tokenizer: converted and ran\n");
        } else {
            if (!err.message[0]) abort();
            if (verbose) fprintf(stderr, "fuzz_hf_tokenizer: converted; %s\n", err.message);
        }
        gguf_close(g);
    } else {
        if (!err.message[0]) abort(); /* an error must say what it is */
        if (verbose) fprintf(stderr, "fuzz_hf_tokenizer: %s\n", err.message);
    }
    return 0;
}
