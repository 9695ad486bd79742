/*
 * dtype.c - the table of element types (see dtype.h).
 */
#include "core/dtype.h"

#include <stdint.h>
#include <strings.h>

_Static_assert(sizeof(block_q4_0) == 18, "q4_0 layout");
_Static_assert(sizeof(block_q4_1) == 20, "q4_1 layout");
_Static_assert(sizeof(block_q5_0) == 22, "q5_0 layout");
_Static_assert(sizeof(block_q5_1) == 24, "q5_1 layout");
_Static_assert(sizeof(block_q8_0) == 34, "q8_0 layout");
_Static_assert(sizeof(block_q8_1) == 36, "q8_1 layout");
_Static_assert(sizeof(block_q2_K) == 84, "q2_K layout");
_Static_assert(sizeof(block_q3_K) == 110, "q3_K layout");
_Static_assert(sizeof(block_q4_K) == 144, "q4_K layout");
_Static_assert(sizeof(block_q5_K) == 176, "q5_K layout");
_Static_assert(sizeof(block_q6_K) == 210, "q6_K layout");
_Static_assert(sizeof(block_q8_K) == 292, "q8_K layout");

static const wgml_dtype_traits traits[WGML_DTYPE_COUNT] = {
    [WGML_F32] = {"F32", 1, 4, 0, 1},
    [WGML_F16] = {"F16", 1, 2, 0, 1},
    [WGML_BF16] = {"BF16", 1, 2, 0, 1},
    [WGML_Q4_0] = {"Q4_0", QK4_0, sizeof(block_q4_0), 1, 1},
    [WGML_Q4_1] = {"Q4_1", QK4_1, sizeof(block_q4_1), 1, 1},
    [WGML_Q5_0] = {"Q5_0", QK5_0, sizeof(block_q5_0), 1, 1},
    [WGML_Q5_1] = {"Q5_1", QK5_1, sizeof(block_q5_1), 1, 1},
    [WGML_Q8_0] = {"Q8_0", QK8_0, sizeof(block_q8_0), 1, 1},
    [WGML_Q8_1] = {"Q8_1", QK8_1, sizeof(block_q8_1), 1, 0},
    [WGML_Q2_K] = {"Q2_K", QK_K, sizeof(block_q2_K), 1, 1},
    [WGML_Q3_K] = {"Q3_K", QK_K, sizeof(block_q3_K), 1, 1},
    [WGML_Q4_K] = {"Q4_K", QK_K, sizeof(block_q4_K), 1, 1},
    [WGML_Q5_K] = {"Q5_K", QK_K, sizeof(block_q5_K), 1, 1},
    [WGML_Q6_K] = {"Q6_K", QK_K, sizeof(block_q6_K), 1, 1},
    [WGML_Q8_K] = {"Q8_K", QK_K, sizeof(block_q8_K), 1, 0},
    [WGML_I8] = {"I8", 1, 1, 0, 0},
    [WGML_I16] = {"I16", 1, 2, 0, 0},
    [WGML_I32] = {"I32", 1, 4, 0, 0},
    [WGML_I64] = {"I64", 1, 8, 0, 0},
    [WGML_F64] = {"F64", 1, 8, 0, 0},
};

const wgml_dtype_traits *wgml_dtype_get(uint32_t type) {
    if (type >= WGML_DTYPE_COUNT || !traits[type].name) return NULL;
    return &traits[type];
}

const char *wgml_dtype_name(uint32_t type) {
    const wgml_dtype_traits *t = wgml_dtype_get(type);
    return t ? t->name : "unknown";
}

int wgml_dtype_from_name(const char *name) {
    for (int i = 0; i < WGML_DTYPE_COUNT; i++)
        if (traits[i].name && strcasecmp(traits[i].name, name) == 0) return i;
    return -1;
}

size_t wgml_row_size(uint32_t type, int64_t n) {
    const wgml_dtype_traits *t = wgml_dtype_get(type);
    if (!t || n < 0 || n % t->block_size) return 0;
    uint64_t blocks = (uint64_t)n / (uint64_t)t->block_size;
    if (blocks > SIZE_MAX / (uint64_t)t->type_size) return 0;
    return (size_t)(blocks * (uint64_t)t->type_size);
}
