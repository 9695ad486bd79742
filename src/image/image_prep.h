/*
 * image_prep.h - an RGB8 image to a vision model's pixel_values, exactly as
 * the model's Hugging Face image processor makes them (transformers'
 * CLIPImageProcessor, SiglipImageProcessor, ViTImageProcessor: the numpy ones,
 * not the torchvision "Fast" ones, whose resize differs).
 *
 * The steps, in HF's order, each with its flag:
 *   resize       Pillow's Image.resize of the RGB8 image (what HF calls, through
 *                to_pil_image), reproduced bit for bit (resample.c): to an exact
 *                height x width, or so that the shorter edge is S and the other
 *                int(S * long / short) (transformers' get_resize_output_image_size
 *                with default_to_square=False: truncated)
 *   center crop  to crop_h x crop_w at offsets floor((H - crop_h) / 2) and
 *                floor((W - crop_w) / 2), with zeros where the image is smaller
 *                than the crop (transformers' center_crop pads with zeros, before
 *                rescaling: a padded pixel becomes (0 - mean) / std)
 *   rescale      float32(double(v) * rescale_factor), as numpy's
 *                image.astype(float64) * scale, then .astype(float32)
 *   normalize    (x - mean) / std in float32, mean and std rounded to float32
 *                first, as numpy does with arrays of the image's dtype
 * and the result channels first: float32 [3][H][W].
 *
 * Each output value depends only on its 8-bit pixel value and its channel, so
 * the float steps are a table of 256 values per channel, computed with the
 * same float32 / float64 operations as numpy: the output equals HF's bit for
 * bit (tests/test_image_prep.py measures it).
 *
 * The pipeline never holds the whole resized image when it is cropped: the
 * resampler computes only the resized pixels the crop keeps, which are the
 * same pixels, bit for bit (each output pixel of Pillow's separable passes
 * depends only on its own row's and column's coefficients).
 *
 * Limits: an input of 1..65535 pixels per edge with stride >= 3 w; sizes in a
 * config of 1..WGML_IMAGE_PREP_MAX_SIZE; an output of at most
 * WGML_IMAGE_PREP_MAX_OUTPUT pixels (with no crop, a shortest-edge resize of a
 * long thin image can ask for more).
 */
#ifndef WGML_IMAGE_IMAGE_PREP_H
#define WGML_IMAGE_IMAGE_PREP_H

#include "wgml.h"

#include <stddef.h>
#include <stdint.h>

#define WGML_IMAGE_MAX_EDGE        65535         /* input width and height */
#define WGML_IMAGE_PREP_MAX_SIZE   4096          /* size, shortest_edge, crop_size in a config */
#define WGML_IMAGE_PREP_MAX_OUTPUT (4096 * 4096) /* pixels of the output (and of a resize) */

/* Pillow's resampling filters, with PIL's numbers: what preprocessor_config.json's "resample" holds. */
typedef enum wgml_image_filter {
    WGML_IMAGE_NEAREST = 0,
    WGML_IMAGE_LANCZOS = 1, /* Lanczos, a = 3 */
    WGML_IMAGE_BILINEAR = 2,
    WGML_IMAGE_BICUBIC = 3, /* Keys' cubic, a = -0.5 */
    WGML_IMAGE_BOX = 4,
    WGML_IMAGE_HAMMING = 5,
} wgml_image_filter;

/* The image processor a config names, for the defaults of the fields it leaves out. */
typedef enum wgml_image_processor {
    WGML_IMAGE_PROCESSOR_NONE = 0, /* none known */
    WGML_IMAGE_PROCESSOR_CLIP,     /* CLIPImageProcessor (CLIPFeatureExtractor, CLIPProcessor) */
    WGML_IMAGE_PROCESSOR_SIGLIP,   /* SiglipImageProcessor (SiglipProcessor) */
    WGML_IMAGE_PROCESSOR_VIT,      /* ViTImageProcessor (ViTFeatureExtractor) */
} wgml_image_processor;

/* How to make pixel_values from an image. */
typedef struct wgml_image_prep {
    wgml_image_processor processor; /* whose defaults filled the fields the config left out */
    char processor_name[64];        /* the class the config named ("" when none), truncated */
    int do_resize;
    int resize_shortest; /* 1: the shorter edge becomes shortest_edge; 0: height x width */
    int shortest_edge;
    int height, width; /* the exact size when resize_shortest is 0 */
    wgml_image_filter resample;
    int do_center_crop;
    int crop_height, crop_width;
    int do_rescale;
    double rescale_factor; /* a Python float: 1/255 is 0.00392156862745098 */
    int do_normalize;
    double image_mean[3], image_std[3]; /* as the config has them; rounded to float32 when used */
} wgml_image_prep;

/* The processor's own defaults (transformers' __init__ arguments):
 *   CLIP    shortest edge 224, bicubic, center crop 224 x 224, 1/255, OpenAI's mean
 *           [0.48145466, 0.4578275, 0.40821073] and std [0.26862954, 0.26130258, 0.27577711]
 *   SigLIP  224 x 224, bicubic, no crop, 1/255, mean and std 0.5
 *   ViT     224 x 224, bilinear, no crop, 1/255, mean and std 0.5
 *   NONE    every step off (an identity: the pixels as floats), 224 x 224 bicubic when turned on */
void wgml_image_prep_defaults(wgml_image_processor processor, wgml_image_prep *p);

/* The processor a class name means: "CLIPImageProcessor", "CLIPImageProcessorFast",
 * "CLIPFeatureExtractor", "CLIPProcessor", the Siglip and ViT ones likewise
 * ("ViTFeatureExtractor", not "ViTProcessor", which is none); NONE for any other. */
wgml_image_processor wgml_image_processor_from_name(const char *name);

/* Checks the parameters (sizes 1..WGML_IMAGE_PREP_MAX_SIZE where the step is on,
 * resample 0..5, a finite positive rescale factor, finite means, finite nonzero
 * stds). WGML_ERR_INVALID_ARGUMENT naming the field. */
wgml_status wgml_image_prep_check(const wgml_image_prep *p, wgml_error *err);

/*
 * preprocessor_config.json (JSON text, len bytes) -> *out. The processor is
 * the one "image_processor_type" names, else "feature_extractor_type", else
 * "processor_class"; when none of them names a known one, `fallback` (NONE: an
 * error). Its defaults fill the fields the file leaves out; then the fields:
 *   do_resize, do_center_crop, do_rescale, do_normalize   true / false (null: false, as HF's None)
 *   size         an int (CLIP: the shortest edge; SigLIP, ViT: a square), {"shortest_edge": S}
 *                or {"height": H, "width": W}; null: the default
 *   resample     0..5 (null: bilinear, HF's resize default)
 *   crop_size    an int (a square) or {"height": H, "width": W}; null: the default.
 *                SigLIP and ViT have no crop step: do_center_crop and crop_size are
 *                checked but not applied, as those processors ignore them
 *   rescale_factor  a number (null: an error when do_rescale is set, as HF's)
 *   image_mean, image_std   3 numbers, or one for all three; null: the default
 *   do_convert_rgb  ignored (the input is RGB already)
 *   image_processor_type, feature_extractor_type, processor_class   strings (or null)
 * Unknown fields are ignored. A wrong type or a value out of range is
 * WGML_ERR_INVALID_ARGUMENT naming the field; bad JSON likewise, with its byte offset.
 */
wgml_status wgml_image_prep_parse(const char *json, size_t len, wgml_image_processor fallback, wgml_image_prep *out,
                                  wgml_error *err);

/* Checks an input image: 1..WGML_IMAGE_MAX_EDGE pixels each way, stride >= 3 w, data
 * not NULL (WGML_ERR_INVALID_ARGUMENT saying which). */
wgml_status wgml_image_check(const wgml_image *img, wgml_error *err);

/* The size (height, width) of the pixel_values p makes from a w x h image: the
 * crop when there is one, else the resize, else w x h. Errors: bad parameters,
 * a bad size, an output over WGML_IMAGE_PREP_MAX_OUTPUT pixels. */
wgml_status wgml_image_prep_output_size(const wgml_image_prep *p, int w, int h, int *out_h, int *out_w,
                                        wgml_error *err);

/* pixel_values of img: float32 [3][out_h][out_w] (wgml_image_prep_output_size) into
 * out, which holds cap floats (too few is an error, nothing written). */
wgml_status wgml_image_prep_run(const wgml_image_prep *p, const wgml_image *img, float *out, size_t cap,
                                wgml_error *err);

/*
 * Pillow's Image.resize(size, resample) of an 8-bit RGB image (Pillow 9.4 and
 * since: the same algorithm), bit for bit: the whole out_w x out_h result into
 * out (rows of out_stride >= 3 out_w bytes). The same size copies, as Pillow
 * does. out_w, out_h: 1..WGML_IMAGE_MAX_EDGE, and at most
 * WGML_IMAGE_PREP_MAX_OUTPUT pixels.
 */
wgml_status wgml_image_resize(const wgml_image *img, int out_w, int out_h, wgml_image_filter filter, uint8_t *out,
                              size_t out_stride, wgml_error *err);

/* The same resize, but only the window of its result with columns x0..x0+wn-1
 * and rows y0..y0+hn-1 (inside out_w x out_h, which may be large: up to
 * INT_MAX / 4 each way), bit for bit those pixels of the whole result; out
 * holds hn rows of out_stride >= 3 wn bytes. */
wgml_status wgml_image_resize_window(const wgml_image *img, int out_w, int out_h, wgml_image_filter filter, int x0,
                                     int y0, int wn, int hn, uint8_t *out, size_t out_stride, wgml_error *err);

#endif
