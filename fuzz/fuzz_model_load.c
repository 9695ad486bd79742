/*
 * fuzz_model_load.c - libFuzzer target: a GGUF from memory as a model.
 *
 * The input is loaded with wgml_model_load_memory on the CPU backend (one
 * thread). A model that loads must run: a generator gets a session of 8
 * positions and one step of two tokens, an encoder embeds (or reranks) two
 * short texts packed in one step; its info must be consistent. Every weight
 * the forward pass reads was validated at load, so nothing here may read out
 * of bounds.
 * Inputs are small (run.sh caps them at 64 KiB), which bounds every tensor
 * and so every activation and cache buffer.
 */
#include "wgml.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(c)                                                                                                       \
    do {                                                                                                               \
        if (!(c)) {                                                                                                    \
            fprintf(stderr, "fuzz_model_load: check failed: %s (line %d)\n", #c, __LINE__);                            \
            abort();                                                                                                   \
        }                                                                                                              \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    wgml_model_params p = wgml_model_default_params();
    p.backend = WGML_BACKEND_CPU;
    p.n_threads = 1;
    wgml_model *m = NULL;
    wgml_error err;
    wgml_status st = wgml_model_load_memory(data, size, &p, &m, &err);
    if (st) {
        CHECK(m == NULL && err.code == st && err.message[0]);
        return 0;
    }
    wgml_model_info info;
    wgml_model_get_info(m, &info);
    CHECK(info.n_vocab > 0 && info.n_layer > 0 && info.n_embd > 0 && info.n_head > 0 && info.n_head_kv > 0);
    CHECK(info.n_head % info.n_head_kv == 0);
    CHECK(info.tasks != 0);
    /* validation at load promises a model that runs: a failing session or step is a finding */
    wgml_session_params sp = {.n_ctx = 8, .n_batch = 2};
    wgml_session *s = NULL;
    static const char *const texts[] = {"ab ba", "a"};
    if (info.tasks & WGML_TASK_RERANK) {
        float sc[2];
        st = wgml_rerank(m, "ab", texts, 2, sc, &err);
    } else if (info.tasks & WGML_TASK_EMBED) {
        float *v = malloc(2 * (size_t)info.n_embd * sizeof *v);
        st = v ? wgml_embed(m, texts, 2, NULL, v, info.n_embd, &err) : WGML_ERR_OUT_OF_MEMORY;
        free(v);
    } else if ((st = wgml_session_create(m, &sp, &s, &err)) == WGML_OK) {
        int32_t toks[2] = {info.n_vocab > 1 ? 1 : 0, 0};
        st = wgml_session_eval(s, toks, 2, &err);
        if (st == WGML_OK) CHECK(wgml_session_logits(s) != NULL);
        wgml_session_free(s);
    }
    /* an encoder goes through its tokenizer: a vocabulary that cannot spell the
       texts, or a context too short for them, is the input's fault */
    int encoder = (info.tasks & (WGML_TASK_EMBED | WGML_TASK_RERANK)) != 0;
    if (encoder && (st == WGML_ERR_TOKENIZER || st == WGML_ERR_CONTEXT_FULL)) st = WGML_OK;
    if (st != WGML_OK && st != WGML_ERR_OUT_OF_MEMORY) {
        fprintf(stderr, "fuzz_model_load: the model loaded but does not run: %s\n", err.message);
        abort();
    }
    wgml_model_free(m);
    return 0;
}
