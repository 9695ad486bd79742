/*
 * image_prep_tool.c - a command-line driver of src/image (image_prep.h) for
 * tests/test_image_prep.py, which compares it with Pillow and with HF's
 * preprocessing steps redone in numpy.
 *
 *   image_prep_tool [--pad N] resize IN W H  OUT_W OUT_H FILTER OUT  [OUT_W OUT_H FILTER OUT ...]
 *       IN: W x H RGB8 pixels, rows packed; each OUT: the resized RGB8 pixels,
 *       rows packed (wgml_image_resize with PIL's filter number FILTER)
 *   image_prep_tool [--pad N] [--fallback clip|siglip|vit|none] prep CONFIG  IN W H OUT  [IN W H OUT ...]
 *       CONFIG: a preprocessor_config.json; each OUT: float32 [3][H'][W'] in
 *       the machine's byte order, and "H' W'" on a line of stdout
 *   image_prep_tool [--fallback ...] size CONFIG W H
 *       prints the output "H' W'" of a W x H image
 *
 * (Several outputs per run: the test makes hundreds, and a process start
 * under the sanitizers costs more than a resize.)
 *
 * --pad N: the input rows are given to the library N bytes longer than 3 W
 * (filled with junk), to check the stride is honoured. Errors: the library's
 * message on stderr, exit status 1 (2 for bad usage).
 */
#include "image/image_prep.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int usage(void) {
    fprintf(stderr, "usage: image_prep_tool [--pad N] [--fallback clip|siglip|vit|none] resize IN W H OUT_W OUT_H "
                    "FILTER OUT [...] | prep CONFIG IN W H OUT [...] | size CONFIG W H\n");
    return 2;
}

static unsigned char *read_all(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, len = 0;
    unsigned char *buf = malloc(cap);
    while (buf) {
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (len < cap) break;
        unsigned char *nb = realloc(buf, cap * 2);
        if (!nb) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = nb, cap *= 2;
    }
    fclose(f);
    *n = len;
    return buf;
}

static int write_all(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t put = fwrite(data, 1, n, f);
    return fclose(f) == 0 && put == n ? 0 : -1;
}

static int to_int(const char *s, int *out) {
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v < -2147483647L || v > 2147483647L) return -1;
    *out = (int)v;
    return 0;
}

/* The raw image IN (w x h, packed) in rows of 3 w + pad bytes; NULL after a message. */
static unsigned char *load_image(const char *path, int w, int h, int pad, wgml_image *img) {
    size_t n;
    unsigned char *raw = read_all(path, &n);
    if (!raw) {
        fprintf(stderr, "image_prep_tool: cannot read %s\n", path);
        return NULL;
    }
    /* sizes the library refuses go through as given, with whatever pixels there are (none checked here) */
    size_t row = w > 0 ? 3 * (size_t)w : 0, stride = row + (size_t)pad;
    size_t rows = h > 0 ? (size_t)h : 0;
    if (n != row * rows) {
        fprintf(stderr, "image_prep_tool: %s has %zu bytes, not 3 x %d x %d\n", path, n, w, h);
        free(raw);
        return NULL;
    }
    unsigned char *buf = malloc(stride * rows + 1);
    if (!buf) {
        free(raw);
        return NULL;
    }
    memset(buf, 0xA5, stride * rows + 1);
    for (size_t y = 0; y < rows; y++)
        memcpy(buf + y * stride, raw + y * row, row);
    free(raw);
    img->w = w, img->h = h, img->stride = stride, img->data = buf;
    return buf;
}

static int read_config(const char *path, wgml_image_processor fallback, wgml_image_prep *p) {
    size_t n;
    unsigned char *text = read_all(path, &n);
    if (!text) {
        fprintf(stderr, "image_prep_tool: cannot read %s\n", path);
        return -1;
    }
    wgml_error err;
    wgml_status st = wgml_image_prep_parse((const char *)text, n, fallback, p, &err);
    free(text);
    if (st) {
        fprintf(stderr, "%s\n", err.message);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv) {
    int pad = 0, a = 1;
    wgml_image_processor fallback = WGML_IMAGE_PROCESSOR_NONE;
    while (a + 1 < argc && !strncmp(argv[a], "--", 2)) {
        if (!strcmp(argv[a], "--pad")) {
            if (to_int(argv[a + 1], &pad) || pad < 0 || pad > 4096) return usage();
        } else if (!strcmp(argv[a], "--fallback")) {
            const char *f = argv[a + 1];
            fallback = !strcmp(f, "clip")     ? WGML_IMAGE_PROCESSOR_CLIP
                       : !strcmp(f, "siglip") ? WGML_IMAGE_PROCESSOR_SIGLIP
                       : !strcmp(f, "vit")    ? WGML_IMAGE_PROCESSOR_VIT
                                              : WGML_IMAGE_PROCESSOR_NONE;
        } else {
            return usage();
        }
        a += 2;
    }
    if (a >= argc) return usage();
    const char *mode = argv[a++];
    int n = argc - a;
    char **v = argv + a;
    wgml_error err;
    wgml_image img;
    int w, h;

    if (!strcmp(mode, "size") && n == 3) {
        wgml_image_prep p;
        int oh, ow;
        if (to_int(v[1], &w) || to_int(v[2], &h)) return usage();
        if (read_config(v[0], fallback, &p)) return 1;
        if (wgml_image_prep_output_size(&p, w, h, &oh, &ow, &err)) {
            fprintf(stderr, "%s\n", err.message);
            return 1;
        }
        printf("%d %d\n", oh, ow);
        return 0;
    }
    if (!strcmp(mode, "resize") && n >= 7 && (n - 3) % 4 == 0) {
        if (to_int(v[1], &w) || to_int(v[2], &h)) return usage();
        unsigned char *buf = load_image(v[0], w, h, pad, &img);
        if (!buf) return 1;
        int rc = 0;
        for (int k = 3; k < n && !rc; k += 4) {
            int ow, oh, filter;
            if (to_int(v[k], &ow) || to_int(v[k + 1], &oh) || to_int(v[k + 2], &filter)) {
                free(buf);
                return usage();
            }
            size_t bytes = ow > 0 && oh > 0 ? 3 * (size_t)ow * (size_t)oh : 1;
            uint8_t *out = malloc(bytes);
            rc = 1;
            if (!out) {
                fprintf(stderr, "image_prep_tool: out of memory\n");
            } else if (wgml_image_resize(&img, ow, oh, (wgml_image_filter)filter, out, 3 * (size_t)(ow > 0 ? ow : 0),
                                         &err)) {
                fprintf(stderr, "%s\n", err.message);
            } else if (write_all(v[k + 3], out, bytes)) {
                fprintf(stderr, "image_prep_tool: cannot write %s\n", v[k + 3]);
            } else {
                rc = 0;
            }
            free(out);
        }
        free(buf);
        return rc;
    }
    if (!strcmp(mode, "prep") && n >= 5 && (n - 1) % 4 == 0) {
        wgml_image_prep p;
        if (read_config(v[0], fallback, &p)) return 1;
        for (int k = 1; k < n; k += 4) {
            int oh, ow;
            if (to_int(v[k + 1], &w) || to_int(v[k + 2], &h)) return usage();
            unsigned char *buf = load_image(v[k], w, h, pad, &img);
            if (!buf) return 1;
            int rc = 1;
            float *out = NULL;
            size_t count = 0;
            if (wgml_image_prep_output_size(&p, w, h, &oh, &ow, &err)) {
                fprintf(stderr, "%s\n", err.message);
            } else if (!(out = malloc((count = 3 * (size_t)oh * (size_t)ow) * sizeof *out))) {
                fprintf(stderr, "image_prep_tool: out of memory\n");
            } else if (wgml_image_prep_run(&p, &img, out, count, &err)) {
                fprintf(stderr, "%s\n", err.message);
            } else if (write_all(v[k + 3], out, count * sizeof *out)) {
                fprintf(stderr, "image_prep_tool: cannot write %s\n", v[k + 3]);
            } else {
                printf("%d %d\n", oh, ow);
                rc = 0;
            }
            free(out);
            free(buf);
            if (rc) return rc;
        }
        return 0;
    }
    return usage();
}
