/*
 * image_prep.c - the image processors' pipeline (image_prep.h): defaults,
 * checks, the output size, and resize -> center crop -> rescale -> normalize
 * into float32 channels first. The resampler is resample.c, the config
 * reader image_prep_config.c.
 */
#include "image/image_prep.h"

#include "core/alloc.h"
#include "core/error.h"

#include <math.h>
#include <string.h>

/* transformers' image_utils constants */
static const double OPENAI_CLIP_MEAN[3] = {0.48145466, 0.4578275, 0.40821073};
static const double OPENAI_CLIP_STD[3] = {0.26862954, 0.26130258, 0.27577711};
static const double IMAGENET_STANDARD_MEAN[3] = {0.5, 0.5, 0.5};
static const double IMAGENET_STANDARD_STD[3] = {0.5, 0.5, 0.5};

void wgml_image_prep_defaults(wgml_image_processor processor, wgml_image_prep *p) {
    memset(p, 0, sizeof *p);
    p->processor = processor;
    p->shortest_edge = 224;
    p->height = p->width = 224;
    p->crop_height = p->crop_width = 224;
    p->resample = WGML_IMAGE_BICUBIC;
    p->rescale_factor = 1.0 / 255.0; /* Python's 1 / 255 */
    for (int c = 0; c < 3; c++)
        p->image_mean[c] = 0.0, p->image_std[c] = 1.0;
    switch (processor) {
    case WGML_IMAGE_PROCESSOR_CLIP:
        p->do_resize = p->do_center_crop = p->do_rescale = p->do_normalize = 1;
        p->resize_shortest = 1;
        memcpy(p->image_mean, OPENAI_CLIP_MEAN, sizeof p->image_mean);
        memcpy(p->image_std, OPENAI_CLIP_STD, sizeof p->image_std);
        break;
    case WGML_IMAGE_PROCESSOR_SIGLIP:
    case WGML_IMAGE_PROCESSOR_VIT:
        p->do_resize = p->do_rescale = p->do_normalize = 1;
        if (processor == WGML_IMAGE_PROCESSOR_VIT) p->resample = WGML_IMAGE_BILINEAR;
        memcpy(p->image_mean, IMAGENET_STANDARD_MEAN, sizeof p->image_mean);
        memcpy(p->image_std, IMAGENET_STANDARD_STD, sizeof p->image_std);
        break;
    case WGML_IMAGE_PROCESSOR_NONE: break;
    }
}

wgml_image_processor wgml_image_processor_from_name(const char *name) {
    static const struct {
        const char *name;
        wgml_image_processor p;
    } names[] = {
        {"CLIPImageProcessor", WGML_IMAGE_PROCESSOR_CLIP},
        {"CLIPImageProcessorFast", WGML_IMAGE_PROCESSOR_CLIP},
        {"CLIPFeatureExtractor", WGML_IMAGE_PROCESSOR_CLIP},
        {"CLIPProcessor", WGML_IMAGE_PROCESSOR_CLIP},
        {"SiglipImageProcessor", WGML_IMAGE_PROCESSOR_SIGLIP},
        {"SiglipImageProcessorFast", WGML_IMAGE_PROCESSOR_SIGLIP},
        {"SiglipProcessor", WGML_IMAGE_PROCESSOR_SIGLIP},
        {"ViTImageProcessor", WGML_IMAGE_PROCESSOR_VIT},
        {"ViTImageProcessorFast", WGML_IMAGE_PROCESSOR_VIT},
        {"ViTFeatureExtractor", WGML_IMAGE_PROCESSOR_VIT},
    };
    if (!name) return WGML_IMAGE_PROCESSOR_NONE;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(name, names[i].name)) return names[i].p;
    return WGML_IMAGE_PROCESSOR_NONE;
}

static int size_ok(int v) { return v >= 1 && v <= WGML_IMAGE_PREP_MAX_SIZE; }

wgml_status wgml_image_prep_check(const wgml_image_prep *p, wgml_error *err) {
    if (!p) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "image preprocessing: no parameters");
    if (p->do_resize) {
        if (p->resize_shortest && !size_ok(p->shortest_edge))
            return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "image preprocessing: size: shortest_edge %d (1..%d)",
                             p->shortest_edge, WGML_IMAGE_PREP_MAX_SIZE);
        if (!p->resize_shortest && (!size_ok(p->height) || !size_ok(p->width)))
            return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "image preprocessing: size: %d x %d (1..%d each way)",
                             p->height, p->width, WGML_IMAGE_PREP_MAX_SIZE);
        if ((int)p->resample < 0 || (int)p->resample > 5)
            return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "image preprocessing: resample %d (PIL's filters 0..5)",
                             (int)p->resample);
    }
    if (p->do_center_crop && (!size_ok(p->crop_height) || !size_ok(p->crop_width)))
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "image preprocessing: crop_size: %d x %d (1..%d each way)",
                         p->crop_height, p->crop_width, WGML_IMAGE_PREP_MAX_SIZE);
    if (p->do_rescale && !(isfinite(p->rescale_factor) && p->rescale_factor > 0))
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                         "image preprocessing: rescale_factor %g (a finite number above 0)", p->rescale_factor);
    if (p->do_normalize)
        for (int c = 0; c < 3; c++) {
            /* used as float32, as numpy does: what counts is the rounded value */
            float m = (float)p->image_mean[c], s = (float)p->image_std[c];
            if (!isfinite(m))
                return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                                 "image preprocessing: image_mean[%d] %g is not a finite float32", c, p->image_mean[c]);
            if (!isfinite(s) || s == 0.0f)
                return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                                 "image preprocessing: image_std[%d] %g (a finite float32, not 0)", c, p->image_std[c]);
        }
    return WGML_OK;
}

wgml_status wgml_image_check(const wgml_image *img, wgml_error *err) {
    if (!img) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "image: none given");
    if (img->w < 1 || img->h < 1 || img->w > WGML_IMAGE_MAX_EDGE || img->h > WGML_IMAGE_MAX_EDGE)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "image: %d x %d pixels (1..%d each way)", img->w, img->h,
                         WGML_IMAGE_MAX_EDGE);
    if (img->stride < 3 * (size_t)img->w)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "image: a stride of %zu bytes is below 3 * width (%zu)",
                         img->stride, 3 * (size_t)img->w);
    if (!img->data) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "image: no pixels (data is NULL)");
    return WGML_OK;
}

/* The size after the resize step (the input's without it). */
static void resized_size(const wgml_image_prep *p, int w, int h, int *rh, int *rw) {
    if (!p->do_resize) {
        *rh = h, *rw = w;
    } else if (p->resize_shortest) {
        /* get_resize_output_image_size(default_to_square=False): new_long = int(S * long / short),
         * S * long exact in a double, the quotient rounded once, as Python's true division */
        const int s = p->shortest_edge;
        if (w <= h) {
            *rw = s;
            *rh = (int)((double)s * (double)h / (double)w);
        } else {
            *rh = s;
            *rw = (int)((double)s * (double)w / (double)h);
        }
    } else {
        *rh = p->height, *rw = p->width;
    }
}

wgml_status wgml_image_prep_output_size(const wgml_image_prep *p, int w, int h, int *out_h, int *out_w,
                                        wgml_error *err) {
    wgml_status st = wgml_image_prep_check(p, err);
    if (st) return st;
    if (w < 1 || h < 1 || w > WGML_IMAGE_MAX_EDGE || h > WGML_IMAGE_MAX_EDGE)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "image: %d x %d pixels (1..%d each way)", w, h,
                         WGML_IMAGE_MAX_EDGE);
    int rh, rw;
    resized_size(p, w, h, &rh, &rw); /* at most 4096 * 65535 each way */
    int oh = p->do_center_crop ? p->crop_height : rh, ow = p->do_center_crop ? p->crop_width : rw;
    if ((int64_t)oh * ow > WGML_IMAGE_PREP_MAX_OUTPUT)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                         "image preprocessing: the %d x %d image would give %d x %d pixel values, more than the %d "
                         "pixels allowed",
                         w, h, ow, oh, WGML_IMAGE_PREP_MAX_OUTPUT);
    if (out_h) *out_h = oh;
    if (out_w) *out_w = ow;
    return WGML_OK;
}

/* Python's n // 2 (floor, also for negative n). */
static int floor_half(int n) { return n >= 0 ? n / 2 : -((-n + 1) / 2); }

wgml_status wgml_image_prep_run(const wgml_image_prep *p, const wgml_image *img, float *out, size_t cap,
                                wgml_error *err) {
    wgml_status st = wgml_image_check(img, err);
    if (st) return st;
    int oh, ow;
    st = wgml_image_prep_output_size(p, img->w, img->h, &oh, &ow, err);
    if (st) return st;
    const size_t plane = (size_t)oh * (size_t)ow;
    if (!out || cap < 3 * plane)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                         "image preprocessing: the output needs 3 x %d x %d = %zu floats, the buffer holds %zu", oh, ow,
                         3 * plane, out ? cap : (size_t)0);

    /* rescale and normalize, per channel and 8-bit value, in numpy's precisions */
    float lut[3][256];
    for (int c = 0; c < 3; c++) {
        const float mean = (float)p->image_mean[c], std = (float)p->image_std[c];
        for (int v = 0; v < 256; v++) {
            float x = (float)v;                                            /* normalize's astype(float32) */
            if (p->do_rescale) x = (float)((double)v * p->rescale_factor); /* float64 product, then float32 */
            if (p->do_normalize) {
                float d = x - mean; /* float32 - float32, rounded */
                x = d / std;
            }
            lut[c][v] = x;
        }
    }

    /* The crop in resized coordinates: output (r, c) is resized pixel (r + oy, c + ox), zero outside
     * (transformers' center_crop: offsets (H - h) // 2, zero padding when the image is smaller). */
    int rh, rw;
    resized_size(p, img->w, img->h, &rh, &rw);
    const int oy = p->do_center_crop ? floor_half(rh - oh) : 0, ox = p->do_center_crop ? floor_half(rw - ow) : 0;
    int y0 = oy < 0 ? 0 : oy, y1 = oy + oh < rh ? oy + oh : rh;
    int x0 = ox < 0 ? 0 : ox, x1 = ox + ow < rw ? ox + ow : rw;
    if (y1 < y0) y1 = y0;
    if (x1 < x0) x1 = x0;

    const uint8_t *src = NULL; /* resized pixel (y0, x0) */
    size_t stride = 0;
    uint8_t *tmp = NULL;
    if (y1 > y0 && x1 > x0) {
        if (p->do_resize) {
            stride = 3 * (size_t)(x1 - x0);
            tmp = wgml_malloc(stride * (size_t)(y1 - y0));
            if (!tmp)
                return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "image preprocessing: out of memory for %d x %d pixels",
                                 x1 - x0, y1 - y0);
            st = wgml_image_resize_window(img, rw, rh, p->resample, x0, y0, x1 - x0, y1 - y0, tmp, stride, err);
            if (st) {
                wgml_free(tmp);
                return st;
            }
            src = tmp;
        } else {
            src = img->data + (size_t)y0 * img->stride + 3 * (size_t)x0;
            stride = img->stride;
        }
    }
    for (int r = 0; r < oh; r++) {
        const int y = r + oy;
        const uint8_t *row = y >= y0 && y < y1 ? src + (size_t)(y - y0) * stride : NULL;
        for (int c = 0; c < 3; c++) {
            float *o = out + (size_t)c * plane + (size_t)r * (size_t)ow;
            const float zero = lut[c][0];
            for (int x = 0; x < ow; x++) {
                const int xx = x + ox;
                o[x] = row && xx >= x0 && xx < x1 ? lut[c][row[3 * (size_t)(xx - x0) + (size_t)c]] : zero;
            }
        }
    }
    wgml_free(tmp);
    return WGML_OK;
}
