/*
 * npy.h - reading the reference tensors of ../shared (NumPy .npy files,
 * version 1/2, little-endian '<f4', '<f8' or '<i8', C order) in tests.
 * Header-only: a test includes it when it needs it.
 */
#ifndef WGML_TEST_NPY_H
#define WGML_TEST_NPY_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

typedef struct {
    int ndim;
    int64_t shape[8];
    int64_t n;   /* elements */
    double *v;   /* the values as doubles (free with npy_free) */
} npy_array;

/* Reads path into a (C order; a Fortran-order file is reordered); 0 on success, -1 on anything unexpected (a test then fails). */
static inline int npy_read(const char *path, npy_array *a) {
    memset(a, 0, sizeof *a);
    size_t size;
    unsigned char *b = tu_read_file(path, &size);
    if (!b || size < 10 || memcmp(b, "\x93NUMPY", 6)) {
        free(b);
        return -1;
    }
    size_t hlen = b[6] == 1 ? (size_t)(b[8] | b[9] << 8) : (size_t)(b[8] | b[9] << 8 | b[10] << 16 | (size_t)b[11] << 24);
    size_t hoff = b[6] == 1 ? 10 : 12;
    if (hoff + hlen > size) {
        free(b);
        return -1;
    }
    char *h = malloc(hlen + 1);
    memcpy(h, b + hoff, hlen);
    h[hlen] = '\0';
    int es = strstr(h, "'<f4'") ? 4 : strstr(h, "'<f8'") ? 8 : strstr(h, "'<i8'") ? -8 : 0;
    const char *sh = strstr(h, "'shape': (");
    const int fortran = strstr(h, "'fortran_order': True") != NULL;
    if (!es || !sh) {
        free(h);
        free(b);
        return -1;
    }
    a->n = 1;
    for (const char *c = sh + 10; *c && *c != ')' && a->ndim < 8;) {
        char *e;
        long long d = strtoll(c, &e, 10);
        if (e == c) {
            c++;
            continue;
        }
        a->shape[a->ndim++] = d;
        a->n *= d;
        c = e;
    }
    free(h);
    size_t bytes = (size_t)a->n * (size_t)(es < 0 ? -es : es);
    if (hoff + hlen + bytes > size) {
        free(b);
        return -1;
    }
    const unsigned char *d = b + hoff + hlen;
    a->v = malloc((size_t)(a->n ? a->n : 1) * sizeof *a->v);
    for (int64_t i = 0; i < a->n; i++) {
        if (es == 4) {
            float f;
            memcpy(&f, d + 4 * i, 4);
            a->v[i] = f;
        } else if (es == 8) {
            memcpy(&a->v[i], d + 8 * i, 8);
        } else {
            int64_t x;
            memcpy(&x, d + 8 * i, 8);
            a->v[i] = (double)x;
        }
    }
    free(b);
    if (fortran && a->ndim > 1) { /* column-major on disk: to C order */
        double *c = malloc((size_t)a->n * sizeof *c);
        for (int64_t i = 0; i < a->n; i++) { /* i: the C-order index; j: where it lies on disk */
            int64_t rem = i, j = 0, stride_f = 1, idx[8];
            for (int k = a->ndim - 1; k >= 0; k--) idx[k] = rem % a->shape[k], rem /= a->shape[k];
            for (int k = 0; k < a->ndim; k++) j += idx[k] * stride_f, stride_f *= a->shape[k];
            c[i] = a->v[j];
        }
        free(a->v);
        a->v = c;
    }
    return 0;
}

static inline void npy_free(npy_array *a) {
    free(a->v);
    memset(a, 0, sizeof *a);
}

#endif
