/*
 * fuzz_tiktoken.c - libFuzzer target: the two parsers of `wgml convert
 * whisper` that go beyond the pth reader (model/whisper/whisper_convert.h):
 * official tiktoken rank files (--vocab multilingual.tiktoken) and the dims
 * dict at the head of a Whisper checkpoint's pickle.
 *
 * Every input goes to both. A rejected input must come back as a format error
 * naming the input, with nothing allocated. An accepted rank file is written
 * out again canonically (standard base64, "=" for the empty token, "\n" line
 * ends) and must parse to the same tokens; no two of its tokens are equal.
 * Accepted dims are all in [1, 2^31). A crash, a sanitizer report or a check
 * that fails is a finding.
 *
 * Seeds: tests/data/fuzz/tiktoken/ (the first 300 ranks of the real
 * vocabulary, CRLF and no final newline, the empty token, refused files, the
 * micro checkpoint's pickle head).
 */
#include "model/whisper/whisper_convert.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(c)                                                                                                       \
    do {                                                                                                               \
        if (!(c)) {                                                                                                    \
            fprintf(stderr, "fuzz_tiktoken: check failed: %s (line %d)\n", #c, __LINE__);                              \
            abort();                                                                                                   \
        }                                                                                                              \
    } while (0)

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* The list as a canonical rank file (malloc'd; *n its size). */
static char *canonical(const whisper_token_list *l, size_t *n) {
    size_t cap = 16;
    for (int64_t i = 0; i < l->n; i++) cap += ((size_t)l->len[i] + 2) / 3 * 4 + 24;
    char *s = malloc(cap);
    CHECK(s);
    size_t o = 0;
    for (int64_t i = 0; i < l->n; i++) {
        const uint8_t *p = (const uint8_t *)l->tok[i];
        const size_t m = (size_t)l->len[i];
        if (!m) s[o++] = '=';
        for (size_t j = 0; j < m; j += 3) {
            const uint32_t w = (uint32_t)p[j] << 16 | (j + 1 < m ? (uint32_t)p[j + 1] << 8 : 0) | (j + 2 < m ? p[j + 2] : 0);
            s[o++] = B64[w >> 18 & 63];
            s[o++] = B64[w >> 12 & 63];
            s[o++] = j + 1 < m ? B64[w >> 6 & 63] : '=';
            s[o++] = j + 2 < m ? B64[w & 63] : '=';
        }
        o += (size_t)snprintf(s + o, cap - o, " %lld\n", (long long)i);
    }
    *n = o;
    return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    wgml_error err;
    whisper_token_list l;
    wgml_status st = whisper_tiktoken_parse(data, size, "fuzz.tiktoken", &l, &err);
    if (st) {
        CHECK(st == WGML_ERR_FORMAT || st == WGML_ERR_OUT_OF_MEMORY);
        CHECK(strstr(err.message, "fuzz.tiktoken"));
        CHECK(!l.tok && !l.len && !l.bytes && l.n == 0);
    } else {
        CHECK(l.n >= 1);
        size_t n = 0;
        char *text = canonical(&l, &n);
        whisper_token_list again;
        CHECK(whisper_tiktoken_parse(text, n, "canonical", &again, &err) == WGML_OK);
        CHECK(again.n == l.n);
        for (int64_t i = 0; i < l.n; i++) {
            CHECK(again.len[i] == l.len[i]);
            CHECK(!memcmp(again.tok[i], l.tok[i], (size_t)l.len[i]));
        }
        whisper_token_list_free(&again);
        free(text);
        whisper_token_list_free(&l);
    }

    int32_t dims[WHISPER_N_DIMS];
    st = whisper_pt_dims(data, size, "fuzz.pt", dims, &err);
    if (st) {
        CHECK(st == WGML_ERR_FORMAT);
        CHECK(strstr(err.message, "fuzz.pt"));
    } else {
        for (int i = 0; i < WHISPER_N_DIMS; i++) CHECK(dims[i] >= 1);
    }
    return 0;
}
