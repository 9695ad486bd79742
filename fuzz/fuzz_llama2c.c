/*
 * fuzz_llama2c.c - libFuzzer target: llama2.c checkpoint + tokenizer import.
 *
 * Input layout: u32 little-endian n, then the checkpoint (n mod what is left
 * bytes), then the tokenizer (the rest). Both are written to temporary files
 * and converted to a temporary GGUF. A conversion that fails must leave
 * neither the output nor its ".tmp"; one that succeeds must produce a GGUF
 * that the reader accepts, with the tensors the checkpoint's header implies.
 */
#include "format/gguf.h"
#include "format/llama2c.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHECK(c)                                                                                                       \
    do {                                                                                                               \
        if (!(c)) {                                                                                                    \
            fprintf(stderr, "fuzz_llama2c: check failed: %s (line %d)\n", #c, __LINE__);                               \
            abort();                                                                                                   \
        }                                                                                                              \
    } while (0)

static char ck_path[256], tok_path[256], out_path[256], tmp_path[270];

static void init_paths(void) {
    if (ck_path[0]) return;
    const char *dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    int pid = (int)getpid();
    snprintf(ck_path, sizeof ck_path, "%s/wgml-fuzz-%d.bin", dir, pid);
    snprintf(tok_path, sizeof tok_path, "%s/wgml-fuzz-%d.tok", dir, pid);
    snprintf(out_path, sizeof out_path, "%s/wgml-fuzz-%d.gguf", dir, pid);
    snprintf(tmp_path, sizeof tmp_path, "%s.tmp", out_path);
}

static int write_file(const char *path, const uint8_t *p, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = n ? fwrite(p, 1, n, f) : 0;
    return (fclose(f) == 0 && w == n) ? 0 : -1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 4) return 0;
    init_paths();
    uint32_t split;
    memcpy(&split, data, 4);
    data += 4;
    size -= 4;
    size_t n_ck = split % (size + 1);
    if (write_file(ck_path, data, n_ck) || write_file(tok_path, data + n_ck, size - n_ck)) return 0;
    wgml_error err;
    wgml_status st = llama2c_convert(ck_path, tok_path, out_path, NULL, NULL, &err);
    if (st) {
        CHECK(err.code == st && err.message[0]);
        CHECK(access(out_path, F_OK) != 0 && access(tmp_path, F_OK) != 0);
    } else {
        gguf_file *f = NULL;
        st = gguf_open(out_path, &f, &err);
        if (st) fprintf(stderr, "fuzz_llama2c: the output does not read back: %s\n", err.message);
        CHECK(st == WGML_OK);
        int64_t layers = 0, vocab_n = 0;
        CHECK(gguf_get_int(f, "llama.block_count", 1, 1024, &layers, &err) == 1);
        /* per layer 9 tensors, plus embedding, final norm, optional classifier */
        CHECK(gguf_n_tensors(f) == 9 * layers + 2 || gguf_n_tensors(f) == 9 * layers + 3);
        const gguf_value *tokens;
        CHECK(gguf_get_arr(f, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &tokens, &err) == 1);
        const gguf_tensor *emb = gguf_find_tensor(f, "token_embd.weight");
        CHECK(emb != NULL);
        vocab_n = emb->ne[1];
        CHECK((int64_t)tokens->v.arr.n == vocab_n);
        gguf_close(f);
        remove(out_path);
    }
    remove(ck_path);
    remove(tok_path);
    return 0;
}
