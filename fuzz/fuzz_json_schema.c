/*
 * fuzz_json_schema.c - libFuzzer target: JSON Schema to GBNF
 * (src/text/json_schema.c).
 *
 * Input: a JSON Schema (any bytes). Checks: a refused schema has a message
 * naming where ("json schema: ..."); an accepted one gives GBNF that the
 * grammar parser compiles and whose start state can be made (or is refused
 * as too ambiguous with a message), never a crash, hang or leak. Seeds:
 * tests/data/json_schemas.json's schemas (fuzz/make-corpus.sh).
 */
#include "core/alloc.h"
#include "core/error.h"
#include "text/grammar.h"
#include "text/json_schema.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(c)                                                                                                       \
    do {                                                                                                               \
        if (!(c)) {                                                                                                    \
            fprintf(stderr, "fuzz_json_schema: check failed: %s (line %d)\n", #c, __LINE__);                           \
            abort();                                                                                                   \
        }                                                                                                              \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *gbnf = NULL;
    size_t n = 0;
    wgml_error err;
    err.message[0] = '\0';
    if (json_schema_to_gbnf((const char *)data, size, &gbnf, &n, &err)) {
        CHECK(!gbnf && err.message[0]);
        return 0;
    }
    CHECK(gbnf && strlen(gbnf) == n);
    grammar *g = NULL;
    if (grammar_parse(gbnf, n, &g, &err)) {
        /* only the grammar's own limits may refuse what the converter wrote */
        CHECK(strstr(err.message, "too") || strstr(err.message, "over") || strstr(err.message, "out of memory") ||
              strstr(err.message, "left-recursive"));
        wgml_free(gbnf);
        return 0;
    }
    grammar_state *s = NULL;
    if (grammar_state_create(g, &s, &err)) CHECK(err.message[0]);
    grammar_state_free(s);
    grammar_free(g);
    wgml_free(gbnf);
    return 0;
}
