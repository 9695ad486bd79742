/*
 * fuzz_kokoro_config.c - libFuzzer target: Kokoro's config.json reader
 * (src/model/kokoro/kokoro_config_json.c, what `wgml convert kokoro --config`
 * reads), then the checkpoint's key list for the hyper-parameters it accepts.
 *
 * Input: the JSON text (any bytes). A config that parses must have sizes the
 * rest of the converter can use: every vocabulary symbol NUL-terminated
 * within its 8 bytes, and a key list (kokoro_official_keys) whose count is
 * positive and the same on a second call, with every tensor of 1..3
 * positive sizes. Seeds: the shared v1.0 and kokoro-tiny configs
 * (fuzz/make-corpus.sh).
 */
#include "model/kokoro/kokoro.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(c)                                                                                                       \
    do {                                                                                                               \
        if (!(c)) {                                                                                                    \
            fprintf(stderr, "fuzz_kokoro_config: check failed: %s (line %d)\n", #c, __LINE__);                         \
            abort();                                                                                                   \
        }                                                                                                              \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static kokoro_config c;
    static kokoro_key keys[2048];
    wgml_error err;
    memset(&c, 0, sizeof c);
    if (kokoro_config_parse((const char *)data, size, &c, &err)) {
        CHECK(err.message[0] != '\0');
        return 0;
    }
    for (int i = 0; i < KOKORO_N_VOCAB_MAX; i++) CHECK(memchr(c.vocab[i], 0, sizeof c.vocab[i]) != NULL);
    const int n = kokoro_official_keys(&c.hp, keys, (int)(sizeof keys / sizeof keys[0]));
    CHECK(n > 0);
    CHECK(kokoro_official_keys(&c.hp, NULL, 0) == n);
    for (int i = 0; i < n && i < (int)(sizeof keys / sizeof keys[0]); i++) {
        CHECK(keys[i].ndim >= 1 && keys[i].ndim <= 3);
        CHECK(memchr(keys[i].name, 0, sizeof keys[i].name) != NULL);
        for (int d = 0; d < keys[i].ndim; d++) {
            if (keys[i].size[d] <= 0) fprintf(stderr, "key %s: size %d is %lld\n", keys[i].name, d, (long long)keys[i].size[d]);
            CHECK(keys[i].size[d] > 0);
        }
    }
    return 0;
}
