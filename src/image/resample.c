/*
 * resample.c - Pillow's Image.resize of an 8-bit RGB image, reproduced bit for
 * bit (image_prep.h): written from a reading of Pillow's libImaging
 * (Resample.c for the filters, Geometry.c for NEAREST), not copied.
 *
 * The filters but NEAREST: a separable convolution, one pass per axis. For an
 * axis of n_in pixels resized to n_out, scale = n_in / n_out; when shrinking
 * the filter is stretched by that factor (antialiasing), never squeezed:
 * fscale = max(scale, 1), support = filter support * fscale. Output pixel i
 * has its centre at input coordinate c = (i + 0.5) * scale and reads inputs
 * first = (int)(c - support + 0.5) (at least 0) up to (int)(c + support + 0.5)
 * (at most n_in), exclusive; input j weighs f((j - c + 0.5) / fscale), and
 * the weights are divided by their sum (when it is not 0). Each weight then
 * becomes a fixed-point integer with 22 fraction bits, rounded half away from
 * zero, and a pixel is
 *     clip(255, (2^21 + sum pixel_j * weight_j) >> 22)
 * in 32-bit integers (no overflow: the positive weights of a window sum to at
 * most 1.29 for LANCZOS, 1.14 for BICUBIC, 1 for the others, so the sum stays
 * below 255 * 1.29 * 2^22 + 2^21 < 2^31): rounded to 8 bits after each pass, as Pillow
 * does for 8-bit images. The horizontal pass runs first, over the input rows
 * the vertical pass reads, then the vertical pass; a pass whose axis keeps
 * its size is skipped (Pillow's need_horizontal / need_vertical), and the
 * same size on both axes is a copy.
 *
 * The double arithmetic of the weights follows Pillow's operation for
 * operation (the order of the additions too): BOX, BILINEAR and BICUBIC use
 * only + - * /, so their weights are the same bits on every IEEE machine;
 * HAMMING and LANCZOS call sin and cos, whose last bit may differ between C
 * libraries (the browser's wasi-libc against glibc), which may change a
 * weight's rounding and, rarely, a pixel by 1.
 *
 * NEAREST is Pillow's affine scaling instead: input x = (int)xo with xo
 * starting at a / 2 and advancing by a = n_in / n_out per output pixel,
 * accumulated in doubles as Pillow does (not recomputed per pixel: the sums'
 * rounding decides ties).
 *
 * Windows: every output pixel depends only on its own column's and row's
 * coefficients, so any rectangle of the result can be computed alone, the
 * same bits (the pipeline computes only what a center crop keeps).
 */
#include "core/alloc.h"
#include "core/error.h"
#include "image/image_prep.h"

#include <limits.h>
#include <math.h>
#include <string.h>

/* No fused multiply-adds in the weights: each product and sum rounded, as Pillow's (GCC in ISO C
 * mode, -std=c11, contracts nothing already; clang would within an expression on FMA targets) */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

#define PREC_BITS   22 /* Pillow's PRECISION_BITS for 8-bit images: 32 - 8 - 2 */
#define PI_D        3.14159265358979323846
#define MAX_VIRTUAL (INT_MAX / 4) /* a window's whole result, each way */

/* ---- the filters (x in input pixels, already divided by fscale) ------------ */

static double filter_box(double x) { return x > -0.5 && x <= 0.5 ? 1.0 : 0.0; }

static double filter_bilinear(double x) {
    double t = fabs(x);
    return t < 1.0 ? 1.0 - t : 0.0;
}

/* A raised-cosine window (0.54 + 0.46 cos) on sinc, over |x| < 1. The two
 * constants are single precision in Pillow (0.54f, 0.46f) widened to double. */
static double filter_hamming(double x) {
    double t = fabs(x);
    if (t == 0.0) return 1.0;
    if (t >= 1.0) return 0.0;
    t *= PI_D;
    const double c54 = (double)0.54f, c46 = (double)0.46f;
    return sin(t) / t * (c54 + c46 * cos(t));
}

/* Keys' cubic convolution with a = -0.5: (a+2)|x|^3 - (a+3)|x|^2 + 1 inside 1,
 * a(|x|^3 - 5|x|^2 + 8|x| - 4) from 1 to 2, in Horner form as Pillow evaluates it. */
static double filter_bicubic(double x) {
    const double a = -0.5;
    double t = fabs(x);
    if (t < 1.0) return ((a + 2.0) * t - (a + 3.0)) * t * t + 1.0;
    if (t < 2.0) return (((t - 5.0) * t + 8.0) * t - 4.0) * a;
    return 0.0;
}

static double sinc(double x) {
    if (x == 0.0) return 1.0;
    double y = x * PI_D;
    return sin(y) / y;
}

/* sinc windowed by a 3 times wider sinc, on [-3, 3) (half-open, as Pillow's) */
static double filter_lanczos(double x) { return x >= -3.0 && x < 3.0 ? sinc(x) * sinc(x / 3.0) : 0.0; }

typedef struct {
    double (*f)(double);
    double support;
} filter_def;

static const filter_def FILTERS[6] = {
    [WGML_IMAGE_NEAREST] = {NULL, 0.0},
    [WGML_IMAGE_LANCZOS] = {filter_lanczos, 3.0},
    [WGML_IMAGE_BILINEAR] = {filter_bilinear, 1.0},
    [WGML_IMAGE_BICUBIC] = {filter_bicubic, 2.0},
    [WGML_IMAGE_BOX] = {filter_box, 0.5},
    [WGML_IMAGE_HAMMING] = {filter_hamming, 1.0},
};

/* ---- one axis' coefficients -------------------------------------------------- */

typedef struct {
    int ksize;  /* weights per output (the most any output uses) */
    int *first; /* per output of the window: the first input it reads */
    int *count; /* and how many */
    int32_t *w; /* per output: ksize fixed-point weights (count used) */
} axis_coeffs;

static void coeffs_free(axis_coeffs *c) {
    wgml_free(c->first);
    wgml_free(c->count);
    wgml_free(c->w);
    memset(c, 0, sizeof *c);
}

/* The coefficients of outputs o0..o0+n-1 of an axis of n_in inputs resized to n_out. */
static wgml_status coeffs_make(int n_in, int n_out, int o0, int n, const filter_def *fd, axis_coeffs *c,
                               wgml_error *err) {
    memset(c, 0, sizeof *c);
    const double scale = (double)n_in / (double)n_out;
    const double fscale = scale < 1.0 ? 1.0 : scale;
    const double support = fd->support * fscale;
    const double inv = 1.0 / fscale;
    const double ks = ceil(support) * 2 + 1; /* Pillow's room per output; no output reads more than n_in */
    c->ksize = ks > (double)n_in ? n_in : (int)ks;
    double *tmp = wgml_malloc((size_t)c->ksize * sizeof *tmp);
    c->first = wgml_malloc((size_t)n * sizeof *c->first);
    c->count = wgml_malloc((size_t)n * sizeof *c->count);
    c->w = wgml_calloc((size_t)n * (size_t)c->ksize, sizeof *c->w);
    if (!tmp || !c->first || !c->count || !c->w) {
        wgml_free(tmp);
        coeffs_free(c);
        return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "image resize: out of memory for %d x %d coefficients", n,
                         (int)ks);
    }
    for (int i = 0; i < n; i++) {
        const int o = o0 + i;
        const double center = (o + 0.5) * scale;
        int lo = (int)(center - support + 0.5);
        if (lo < 0) lo = 0;
        int hi = (int)(center + support + 0.5);
        if (hi > n_in) hi = n_in;
        int cnt = hi - lo;
        if (cnt > c->ksize) cnt = c->ksize; /* not reached: support bounds the window */
        if (cnt < 0) cnt = 0;
        double sum = 0.0;
        for (int j = 0; j < cnt; j++) {
            /* (j + lo) as an int, then the double operations in Pillow's order */
            double v = fd->f(((double)(j + lo) - center + 0.5) * inv);
            tmp[j] = v;
            sum += v;
        }
        int32_t *w = c->w + (size_t)i * (size_t)c->ksize;
        for (int j = 0; j < cnt; j++) {
            double k = sum != 0.0 ? tmp[j] / sum : tmp[j];
            double s = k * (double)(1 << PREC_BITS);
            w[j] = (int32_t)(k < 0 ? -0.5 + s : 0.5 + s); /* half away from zero, truncated */
        }
        c->first[i] = lo;
        c->count[i] = cnt;
    }
    wgml_free(tmp);
    return WGML_OK;
}

static inline uint8_t clip8(int32_t s) {
    if (s < 0) return 0;
    s >>= PREC_BITS;
    return (uint8_t)(s > 255 ? 255 : s);
}

/* Horizontal pass: rows [0, nrows) of src (stride bytes apart) -> rows of dst, the window's columns. */
static void pass_horizontal(const uint8_t *src, size_t stride, int nrows, const axis_coeffs *c, int wn, uint8_t *dst,
                            size_t dst_stride) {
    const int32_t half = 1 << (PREC_BITS - 1);
    for (int r = 0; r < nrows; r++) {
        const uint8_t *row = src + (size_t)r * stride;
        uint8_t *out = dst + (size_t)r * dst_stride;
        for (int x = 0; x < wn; x++) {
            const int32_t *w = c->w + (size_t)x * (size_t)c->ksize;
            const uint8_t *p = row + 3 * (size_t)c->first[x];
            int32_t s0 = half, s1 = half, s2 = half;
            for (int j = 0; j < c->count[x]; j++) {
                s0 += p[3 * j + 0] * w[j];
                s1 += p[3 * j + 1] * w[j];
                s2 += p[3 * j + 2] * w[j];
            }
            out[3 * x + 0] = clip8(s0);
            out[3 * x + 1] = clip8(s1);
            out[3 * x + 2] = clip8(s2);
        }
    }
}

/* Vertical pass: output row i of the window reads rows first[i] - row0 .. of src, nbytes bytes of each. */
static void pass_vertical(const uint8_t *src, size_t stride, int row0, const axis_coeffs *c, int hn, size_t nbytes,
                          int32_t *acc, uint8_t *dst, size_t dst_stride) {
    const int32_t half = 1 << (PREC_BITS - 1);
    for (int i = 0; i < hn; i++) {
        const int32_t *w = c->w + (size_t)i * (size_t)c->ksize;
        for (size_t b = 0; b < nbytes; b++)
            acc[b] = half;
        for (int j = 0; j < c->count[i]; j++) {
            const uint8_t *row = src + (size_t)(c->first[i] + j - row0) * stride;
            const int32_t wj = w[j];
            for (size_t b = 0; b < nbytes; b++)
                acc[b] += row[b] * wj;
        }
        uint8_t *out = dst + (size_t)i * dst_stride;
        for (size_t b = 0; b < nbytes; b++)
            out[b] = clip8(acc[b]);
    }
}

/* NEAREST: Pillow's ImagingScaleAffine. The input index of outputs o0..o0+n-1 (-1: outside, filled with 0). */
static void nearest_index(int n_in, int n_out, int o0, int n, int *idx) {
    const double a = (double)(float)n_in / (double)n_out; /* Pillow: (double)(box[2] - box[0]) / xsize, box in floats */
    double pos = 0.0 + a * 0.5;
    for (int o = 0; o < o0 + n; o++) {
        if (o >= o0) {
            int k = pos < 0.0 ? -1 : (int)pos;
            idx[o - o0] = k >= 0 && k < n_in ? k : -1;
        }
        pos += a;
    }
}

static wgml_status resize_nearest(const wgml_image *img, int out_w, int out_h, int x0, int y0, int wn, int hn,
                                  uint8_t *out, size_t out_stride, wgml_error *err) {
    int *xi = wgml_malloc((size_t)wn * sizeof *xi), *yi = wgml_malloc((size_t)hn * sizeof *yi);
    if (!xi || !yi) {
        wgml_free(xi);
        wgml_free(yi);
        return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "image resize: out of memory");
    }
    nearest_index(img->w, out_w, x0, wn, xi);
    nearest_index(img->h, out_h, y0, hn, yi);
    for (int y = 0; y < hn; y++) {
        uint8_t *o = out + (size_t)y * out_stride;
        if (yi[y] < 0) {
            memset(o, 0, 3 * (size_t)wn);
            continue;
        }
        const uint8_t *row = img->data + (size_t)yi[y] * img->stride;
        for (int x = 0; x < wn; x++) {
            if (xi[x] < 0) {
                o[3 * x] = o[3 * x + 1] = o[3 * x + 2] = 0;
            } else {
                memcpy(o + 3 * x, row + 3 * (size_t)xi[x], 3);
            }
        }
    }
    wgml_free(xi);
    wgml_free(yi);
    return WGML_OK;
}

static wgml_status resize_convolve(const wgml_image *img, int out_w, int out_h, const filter_def *fd, int x0, int y0,
                                   int wn, int hn, uint8_t *out, size_t out_stride, wgml_error *err) {
    const int need_h = out_w != img->w, need_v = out_h != img->h;
    axis_coeffs ch = {0}, cv = {0};
    uint8_t *tmp = NULL;
    int32_t *acc = NULL;
    wgml_status st = WGML_OK;
    if (need_h) st = coeffs_make(img->w, out_w, x0, wn, fd, &ch, err);
    if (!st && need_v) st = coeffs_make(img->h, out_h, y0, hn, fd, &cv, err);
    if (st) goto done;
    if (need_h && need_v) {
        /* the input rows the window's vertical taps read, through the horizontal pass first */
        int r0 = INT_MAX, r1 = 0;
        for (int i = 0; i < hn; i++) {
            if (cv.first[i] < r0) r0 = cv.first[i];
            if (cv.first[i] + cv.count[i] > r1) r1 = cv.first[i] + cv.count[i];
        }
        if (r1 < r0) r1 = r0;
        const size_t tstride = 3 * (size_t)wn;
        tmp = wgml_malloc((size_t)(r1 - r0) * tstride + 1);
        acc = wgml_malloc(tstride * sizeof *acc);
        if (!tmp || !acc) {
            st = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "image resize: out of memory for %d x %d pixels", wn, r1 - r0);
            goto done;
        }
        pass_horizontal(img->data + (size_t)r0 * img->stride, img->stride, r1 - r0, &ch, wn, tmp, tstride);
        pass_vertical(tmp, tstride, r0, &cv, hn, tstride, acc, out, out_stride);
    } else if (need_h) { /* the rows keep their size: the window's rows straight through */
        pass_horizontal(img->data + (size_t)y0 * img->stride, img->stride, hn, &ch, wn, out, out_stride);
    } else if (need_v) { /* the columns keep theirs: the window's columns of the input */
        acc = wgml_malloc(3 * (size_t)wn * sizeof *acc);
        if (!acc) {
            st = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "image resize: out of memory");
            goto done;
        }
        pass_vertical(img->data + 3 * (size_t)x0, img->stride, 0, &cv, hn, 3 * (size_t)wn, acc, out, out_stride);
    } else { /* the same size: a copy, whichever the filter (Pillow returns im.copy()) */
        for (int y = 0; y < hn; y++)
            memcpy(out + (size_t)y * out_stride, img->data + (size_t)(y0 + y) * img->stride + 3 * (size_t)x0,
                   3 * (size_t)wn);
    }
done:
    coeffs_free(&ch);
    coeffs_free(&cv);
    wgml_free(tmp);
    wgml_free(acc);
    return st;
}

wgml_status wgml_image_resize_window(const wgml_image *img, int out_w, int out_h, wgml_image_filter filter, int x0,
                                     int y0, int wn, int hn, uint8_t *out, size_t out_stride, wgml_error *err) {
    wgml_status st = wgml_image_check(img, err);
    if (st) {
        wgml_error_prefix(err, "image resize");
        return st;
    }
    if ((int)filter < 0 || (int)filter > 5)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "image resize: unknown filter %d (PIL's 0..5)", (int)filter);
    if (out_w < 1 || out_h < 1 || out_w > MAX_VIRTUAL || out_h > MAX_VIRTUAL)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "image resize: a size of %d x %d (1..%d each way)", out_w,
                         out_h, MAX_VIRTUAL);
    if (wn < 1 || hn < 1 || x0 < 0 || y0 < 0 || x0 > out_w - wn || y0 > out_h - hn)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                         "image resize: the window %d x %d at (%d, %d) is not inside the %d x %d result", wn, hn, x0,
                         y0, out_w, out_h);
    if (!out || out_stride < 3 * (size_t)wn)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "image resize: %s",
                         out ? "the output stride is below 3 * width" : "no output buffer");
    /* the same size copies, NEAREST too (resize_convolve with no pass to make) */
    if (filter == WGML_IMAGE_NEAREST && (out_w != img->w || out_h != img->h))
        return resize_nearest(img, out_w, out_h, x0, y0, wn, hn, out, out_stride, err);
    return resize_convolve(img, out_w, out_h, &FILTERS[filter], x0, y0, wn, hn, out, out_stride, err);
}

wgml_status wgml_image_resize(const wgml_image *img, int out_w, int out_h, wgml_image_filter filter, uint8_t *out,
                              size_t out_stride, wgml_error *err) {
    if (out_w < 1 || out_h < 1 || out_w > WGML_IMAGE_MAX_EDGE || out_h > WGML_IMAGE_MAX_EDGE ||
        (int64_t)out_w * out_h > WGML_IMAGE_PREP_MAX_OUTPUT)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                         "image resize: a result of %d x %d pixels (1..%d each way, at most %d pixels)", out_w, out_h,
                         WGML_IMAGE_MAX_EDGE, WGML_IMAGE_PREP_MAX_OUTPUT);
    return wgml_image_resize_window(img, out_w, out_h, filter, 0, 0, out_w, out_h, out, out_stride, err);
}
