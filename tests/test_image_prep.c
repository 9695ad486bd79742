/*
 * test_image_prep.c - src/image (image_prep.h) without Python: the
 * preprocessor_config.json reader on the real configs of
 * openai/clip-vit-base-patch32 (as published, and as transformers re-saves
 * it), google/siglip-base-patch16-224 and google/vit-base-patch16-224, the
 * processors' defaults for absent fields, null fields, errors naming the
 * field; output sizes (HF's truncation, the crop, the output limit); the
 * image limits; the float steps on a constant image (the exact float32 of
 * HF's numpy); a window of a resize equals that part of the whole resize for
 * every filter; and out of memory at every allocation (an error, no leak).
 * Bit-exactness against Pillow and HF is tests/test_image_prep.py's.
 */
#include "check_err.h"
#include "core/alloc.h"
#include "image/image_prep.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* openai/clip-vit-base-patch32's preprocessor_config.json as published (a feature extractor, int sizes) */
static const char CLIP_HUB[] = "{\n"
                               "  \"crop_size\": 224,\n"
                               "  \"do_center_crop\": true,\n"
                               "  \"do_normalize\": true,\n"
                               "  \"do_resize\": true,\n"
                               "  \"feature_extractor_type\": \"CLIPFeatureExtractor\",\n"
                               "  \"image_mean\": [\n    0.48145466,\n    0.4578275,\n    0.40821073\n  ],\n"
                               "  \"image_std\": [\n    0.26862954,\n    0.26130258,\n    0.27577711\n  ],\n"
                               "  \"resample\": 3,\n"
                               "  \"size\": 224\n"
                               "}\n";

/* the same processor as transformers' save_pretrained writes it today */
static const char CLIP_SAVED[] = "{\n"
                                 "  \"crop_size\": {\"height\": 224, \"width\": 224},\n"
                                 "  \"do_center_crop\": true,\n"
                                 "  \"do_convert_rgb\": true,\n"
                                 "  \"do_normalize\": true,\n"
                                 "  \"do_rescale\": true,\n"
                                 "  \"do_resize\": true,\n"
                                 "  \"feature_extractor_type\": \"CLIPFeatureExtractor\",\n"
                                 "  \"image_mean\": [0.48145466, 0.4578275, 0.40821073],\n"
                                 "  \"image_processor_type\": \"CLIPImageProcessor\",\n"
                                 "  \"image_std\": [0.26862954, 0.26130258, 0.27577711],\n"
                                 "  \"resample\": 3,\n"
                                 "  \"rescale_factor\": 0.00392156862745098,\n"
                                 "  \"size\": {\"shortest_edge\": 224}\n"
                                 "}\n";

/* google/siglip-base-patch16-224 */
static const char SIGLIP_HUB[] = "{\n"
                                 "  \"do_normalize\": true,\n"
                                 "  \"do_rescale\": true,\n"
                                 "  \"do_resize\": true,\n"
                                 "  \"image_mean\": [\n    0.5,\n    0.5,\n    0.5\n  ],\n"
                                 "  \"image_processor_type\": \"SiglipImageProcessor\",\n"
                                 "  \"image_std\": [\n    0.5,\n    0.5,\n    0.5\n  ],\n"
                                 "  \"processor_class\": \"SiglipProcessor\",\n"
                                 "  \"resample\": 3,\n"
                                 "  \"rescale_factor\": 0.00392156862745098,\n"
                                 "  \"size\": {\n    \"height\": 224,\n    \"width\": 224\n  }\n"
                                 "}\n";

/* google/vit-base-patch16-224 (a feature extractor: no do_rescale, rescale_factor: ViT's defaults) */
static const char VIT_HUB[] = "{\n"
                              "  \"do_normalize\": true,\n"
                              "  \"do_resize\": true,\n"
                              "  \"feature_extractor_type\": \"ViTFeatureExtractor\",\n"
                              "  \"image_mean\": [\n    0.5,\n    0.5,\n    0.5\n  ],\n"
                              "  \"image_std\": [\n    0.5,\n    0.5,\n    0.5\n  ],\n"
                              "  \"resample\": 2,\n"
                              "  \"size\": 224\n"
                              "}\n";

static wgml_image_prep parse_ok(const char *json, wgml_image_processor fallback) {
    wgml_image_prep p;
    wgml_error err;
    wgml_status st = wgml_image_prep_parse(json, strlen(json), fallback, &p, &err);
    if (st) fail_msg("parse %s: %s", json, err.message);
    return p;
}

static void assert_openai_norm(const wgml_image_prep *p) {
    const double mean[3] = {0.48145466, 0.4578275, 0.40821073}, std[3] = {0.26862954, 0.26130258, 0.27577711};
    for (int c = 0; c < 3; c++) {
        assert_true(p->image_mean[c] == mean[c]);
        assert_true(p->image_std[c] == std[c]);
    }
}

static void assert_half_norm(const wgml_image_prep *p) {
    for (int c = 0; c < 3; c++) {
        assert_true(p->image_mean[c] == 0.5);
        assert_true(p->image_std[c] == 0.5);
    }
}

static void assert_clip(const wgml_image_prep *p) {
    assert_int_equal(p->processor, WGML_IMAGE_PROCESSOR_CLIP);
    assert_true(p->do_resize && p->resize_shortest && p->do_center_crop && p->do_rescale && p->do_normalize);
    assert_int_equal(p->shortest_edge, 224);
    assert_int_equal(p->crop_height, 224);
    assert_int_equal(p->crop_width, 224);
    assert_int_equal(p->resample, WGML_IMAGE_BICUBIC);
    assert_true(p->rescale_factor == 1.0 / 255.0); /* Python's 1 / 255 is 0.00392156862745098 */
    assert_openai_norm(p);
}

static void test_real_configs(void **state) {
    (void)state;
    wgml_image_prep p = parse_ok(CLIP_HUB, WGML_IMAGE_PROCESSOR_NONE);
    assert_clip(&p);
    assert_string_equal(p.processor_name, "CLIPFeatureExtractor");

    p = parse_ok(CLIP_SAVED, WGML_IMAGE_PROCESSOR_NONE);
    assert_clip(&p);
    assert_string_equal(p.processor_name, "CLIPImageProcessor"); /* image_processor_type first */

    p = parse_ok(SIGLIP_HUB, WGML_IMAGE_PROCESSOR_VIT); /* the file's class wins over the fallback */
    assert_int_equal(p.processor, WGML_IMAGE_PROCESSOR_SIGLIP);
    assert_string_equal(p.processor_name, "SiglipImageProcessor");
    assert_true(p.do_resize && !p.resize_shortest && !p.do_center_crop && p.do_rescale && p.do_normalize);
    assert_int_equal(p.height, 224);
    assert_int_equal(p.width, 224);
    assert_int_equal(p.resample, WGML_IMAGE_BICUBIC);
    assert_true(p.rescale_factor == 1.0 / 255.0);
    assert_half_norm(&p);

    p = parse_ok(VIT_HUB, WGML_IMAGE_PROCESSOR_NONE);
    assert_int_equal(p.processor, WGML_IMAGE_PROCESSOR_VIT);
    assert_string_equal(p.processor_name, "ViTFeatureExtractor");
    assert_true(p.do_resize && !p.resize_shortest && !p.do_center_crop && p.do_rescale && p.do_normalize);
    assert_int_equal(p.height, 224); /* an int size is a square for ViT (get_size_dict's default_to_square) */
    assert_int_equal(p.width, 224);
    assert_int_equal(p.resample, WGML_IMAGE_BILINEAR);
    assert_true(p.rescale_factor == 1.0 / 255.0);
    assert_half_norm(&p);

    /* a processor_class alone names it too; and the names' priority */
    p = parse_ok("{\"processor_class\": \"SiglipProcessor\"}", WGML_IMAGE_PROCESSOR_NONE);
    assert_int_equal(p.processor, WGML_IMAGE_PROCESSOR_SIGLIP);
    p = parse_ok("{\"image_processor_type\": \"Foo\", \"feature_extractor_type\": \"ViTFeatureExtractor\"}",
                 WGML_IMAGE_PROCESSOR_NONE);
    assert_int_equal(p.processor, WGML_IMAGE_PROCESSOR_VIT);
    assert_string_equal(p.processor_name, "ViTFeatureExtractor");
    p = parse_ok("{\"processor_class\": \"LlavaProcessor\", \"image_processor_type\": \"SiglipImageProcessor\"}",
                 WGML_IMAGE_PROCESSOR_NONE);
    assert_int_equal(p.processor, WGML_IMAGE_PROCESSOR_SIGLIP);
    assert_int_equal(wgml_image_processor_from_name("CLIPImageProcessorFast"), WGML_IMAGE_PROCESSOR_CLIP);
    assert_int_equal(wgml_image_processor_from_name("Siglip2ImageProcessor"), WGML_IMAGE_PROCESSOR_NONE);
    assert_int_equal(wgml_image_processor_from_name(NULL), WGML_IMAGE_PROCESSOR_NONE);
}

static void test_defaults(void **state) {
    (void)state;
    /* every field absent: the processor's own defaults */
    wgml_image_prep p = parse_ok("{}", WGML_IMAGE_PROCESSOR_CLIP);
    assert_clip(&p);
    assert_string_equal(p.processor_name, "");
    p = parse_ok("{\"image_processor_type\": \"CLIPImageProcessor\"}", WGML_IMAGE_PROCESSOR_NONE);
    assert_clip(&p);
    p = parse_ok("{\"image_processor_type\": \"SiglipImageProcessor\"}", WGML_IMAGE_PROCESSOR_NONE);
    assert_true(p.do_resize && !p.resize_shortest && p.height == 224 && p.width == 224 && !p.do_center_crop);
    assert_int_equal(p.resample, WGML_IMAGE_BICUBIC);
    assert_half_norm(&p);
    p = parse_ok("{\"image_processor_type\": \"ViTImageProcessor\"}", WGML_IMAGE_PROCESSOR_NONE);
    assert_true(p.do_resize && !p.resize_shortest && p.height == 224 && p.width == 224 && !p.do_center_crop);
    assert_int_equal(p.resample, WGML_IMAGE_BILINEAR);
    assert_half_norm(&p);
    /* an unknown class with a fallback: the fallback's defaults, the name kept */
    p = parse_ok("{\"image_processor_type\": \"MyImageProcessor\", \"size\": 100}", WGML_IMAGE_PROCESSOR_VIT);
    assert_int_equal(p.processor, WGML_IMAGE_PROCESSOR_VIT);
    assert_string_equal(p.processor_name, "MyImageProcessor");
    assert_true(p.height == 100 && p.width == 100);

    /* fields: CLIP's int size is the shortest edge, a dict of height/width an exact size; one mean for all */
    p = parse_ok("{\"size\": {\"height\": 336, \"width\": 320}, \"crop_size\": [300, 310], \"image_mean\": 0.25, "
                 "\"image_std\": 2, \"rescale_factor\": 0.5, \"resample\": 0}",
                 WGML_IMAGE_PROCESSOR_CLIP);
    assert_true(!p.resize_shortest && p.height == 336 && p.width == 320);
    assert_true(p.crop_height == 300 && p.crop_width == 310);
    for (int c = 0; c < 3; c++)
        assert_true(p.image_mean[c] == 0.25 && p.image_std[c] == 2.0);
    assert_true(p.rescale_factor == 0.5);
    assert_int_equal(p.resample, WGML_IMAGE_NEAREST);

    /* SigLIP and ViT have no crop step: their crop fields are read, not used */
    p = parse_ok("{\"image_processor_type\": \"SiglipImageProcessor\", \"do_center_crop\": true, \"crop_size\": 100}",
                 WGML_IMAGE_PROCESSOR_NONE);
    assert_false(p.do_center_crop);

    /* null: a flag is off (HF's None), a size, mean or std keeps its default, resample is bilinear;
     * do_convert_rgb and unknown fields are ignored */
    p = parse_ok("{\"do_resize\": null, \"do_center_crop\": false, \"size\": null, \"crop_size\": null, "
                 "\"image_mean\": null, \"image_std\": null, \"resample\": null, \"do_convert_rgb\": null, "
                 "\"crop_pct\": 0.875, \"image_grid_pinpoints\": [[336, 672]], \"x\": {\"y\": [1, {}]}}",
                 WGML_IMAGE_PROCESSOR_CLIP);
    assert_false(p.do_resize);
    assert_false(p.do_center_crop);
    assert_true(p.resize_shortest && p.shortest_edge == 224);
    assert_int_equal(p.resample, WGML_IMAGE_BILINEAR);
    assert_openai_norm(&p);
    p = parse_ok("{\"do_rescale\": false, \"rescale_factor\": null}", WGML_IMAGE_PROCESSOR_VIT);
    assert_false(p.do_rescale);

    /* the defaults without a file */
    wgml_image_prep_defaults(WGML_IMAGE_PROCESSOR_NONE, &p);
    assert_true(!p.do_resize && !p.do_center_crop && !p.do_rescale && !p.do_normalize);
    wgml_error err;
    assert_int_equal(wgml_image_prep_check(&p, &err), WGML_OK);
}

static void test_parse_errors(void **state) {
    (void)state;
    static const struct {
        const char *json;
        wgml_status code;
        const char *s1, *s2;
    } cases[] = {
        {"{}", WGML_ERR_INVALID_ARGUMENT, "names no image processor", NULL},
        {"{\"image_processor_type\": \"DonutImageProcessor\"}", WGML_ERR_UNSUPPORTED, "DonutImageProcessor", NULL},
        {"{\"image_processor_type\": 3}", WGML_ERR_INVALID_ARGUMENT, "\"image_processor_type\"", "string"},
        {"[1, 2]", WGML_ERR_INVALID_ARGUMENT, "a JSON object", "list"},
        {"{\"size\": 224,}", WGML_ERR_INVALID_ARGUMENT, "invalid JSON", "byte"},
        {"{\"size\": 224", WGML_ERR_INVALID_ARGUMENT, "invalid JSON", NULL},
        {"", WGML_ERR_INVALID_ARGUMENT, "invalid JSON", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        wgml_image_prep p;
        wgml_error err;
        wgml_status st =
            wgml_image_prep_parse(cases[i].json, strlen(cases[i].json), WGML_IMAGE_PROCESSOR_NONE, &p, &err);
        CHECK_ERR(cases[i].json, st, &err, cases[i].code, cases[i].s1, cases[i].s2);
    }
    /* bad fields, with a processor given: each names its field */
    static const struct {
        const char *json, *s1, *s2;
    } fields[] = {
        {"{\"size\": 0}", "\"size\"", "1..4096"},
        {"{\"size\": 4097}", "\"size\"", "4097"},
        {"{\"size\": -3}", "\"size\"", "1..4096"},
        {"{\"size\": 224.0}", "\"size\"", "float"},
        {"{\"size\": \"224\"}", "\"size\"", "str"},
        {"{\"size\": true}", "\"size\"", "bool"},
        {"{\"size\": {\"longest_edge\": 224}}", "\"size\"", "longest_edge"},
        {"{\"size\": {\"shortest_edge\": 224, \"longest_edge\": 500}}", "\"size\"", "not supported"},
        {"{\"size\": {\"height\": 224}}", "\"size\"", "height"},
        {"{\"size\": {\"height\": 224, \"width\": 0}}", "\"size\"", "width"},
        {"{\"size\": {\"shortest_edge\": \"a\"}}", "\"size\"", "shortest_edge"},
        {"{\"size\": [224]}", "\"size\"", "[height, width]"},
        {"{\"crop_size\": {\"shortest_edge\": 224}}", "\"crop_size\"", "height"},
        {"{\"crop_size\": 5000}", "\"crop_size\"", "1..4096"},
        {"{\"crop_size\": [224, \"x\"]}", "\"crop_size\"", "[1]"},
        {"{\"resample\": 6}", "\"resample\"", "0 (nearest)"},
        {"{\"resample\": -1}", "\"resample\"", "-1"},
        {"{\"resample\": \"bicubic\"}", "\"resample\"", "integer"},
        {"{\"resample\": 3.0}", "\"resample\"", "float"},
        {"{\"do_resize\": 1}", "\"do_resize\"", "true or false"},
        {"{\"do_center_crop\": \"yes\"}", "\"do_center_crop\"", "true or false"},
        {"{\"do_rescale\": []}", "\"do_rescale\"", "list"},
        {"{\"do_normalize\": {}}", "\"do_normalize\"", "dict"},
        {"{\"rescale_factor\": \"1/255\"}", "\"rescale_factor\"", "number"},
        {"{\"rescale_factor\": 0}", "\"rescale_factor\"", "above 0"},
        {"{\"rescale_factor\": -0.5}", "\"rescale_factor\"", "above 0"},
        {"{\"rescale_factor\": 1e999}", "\"rescale_factor\"", "above 0"},
        {"{\"rescale_factor\": null}", "\"rescale_factor\"", "null"},
        {"{\"image_mean\": [0.5, 0.5]}", "\"image_mean\"", "3 numbers"},
        {"{\"image_mean\": [0.5, \"a\", 0.5]}", "\"image_mean\"", "[1]"},
        {"{\"image_mean\": \"imagenet\"}", "\"image_mean\"", "str"},
        {"{\"image_mean\": [0.5, 0.5, 1e300]}", "\"image_mean\"", "finite"},
        {"{\"image_std\": [0.5, 0, 0.5]}", "\"image_std\"", "cannot be 0"},
        {"{\"image_std\": 0}", "\"image_std\"", "cannot be 0"},
        {"{\"image_std\": [0.5, 0.5, 1e-50]}", "\"image_std\"", "cannot be 0"},
        {"{\"image_std\": [0.5, 0.5, 0.5, 0.5]}", "\"image_std\"", "not 4"},
        {"{\"processor_class\": []}", "\"processor_class\"", "string"},
    };
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        wgml_image_prep p;
        wgml_error err;
        wgml_status st =
            wgml_image_prep_parse(fields[i].json, strlen(fields[i].json), WGML_IMAGE_PROCESSOR_CLIP, &p, &err);
        CHECK_ERR(fields[i].json, st, &err, WGML_ERR_INVALID_ARGUMENT, fields[i].s1, fields[i].s2);
    }
    wgml_image_prep p;
    wgml_error err;
    CHECK_ERR("null text", wgml_image_prep_parse(NULL, 0, WGML_IMAGE_PROCESSOR_CLIP, &p, &err), &err,
              WGML_ERR_INVALID_ARGUMENT, "no text", NULL);
    CHECK_ERR("bad fallback", wgml_image_prep_parse("{}", 2, (wgml_image_processor)9, &p, &err), &err,
              WGML_ERR_INVALID_ARGUMENT, "9", NULL);

    /* the parameters' own check */
    wgml_image_prep_defaults(WGML_IMAGE_PROCESSOR_SIGLIP, &p);
    p.width = 0;
    CHECK_ERR("check size", wgml_image_prep_check(&p, &err), &err, WGML_ERR_INVALID_ARGUMENT, "size", "224 x 0");
    wgml_image_prep_defaults(WGML_IMAGE_PROCESSOR_SIGLIP, &p);
    p.resample = (wgml_image_filter)7;
    CHECK_ERR("check resample", wgml_image_prep_check(&p, &err), &err, WGML_ERR_INVALID_ARGUMENT, "resample 7", NULL);
    wgml_image_prep_defaults(WGML_IMAGE_PROCESSOR_CLIP, &p);
    p.crop_width = 5000;
    CHECK_ERR("check crop", wgml_image_prep_check(&p, &err), &err, WGML_ERR_INVALID_ARGUMENT, "crop_size", NULL);
    wgml_image_prep_defaults(WGML_IMAGE_PROCESSOR_CLIP, &p);
    p.image_std[1] = 0;
    CHECK_ERR("check std", wgml_image_prep_check(&p, &err), &err, WGML_ERR_INVALID_ARGUMENT, "image_std[1]", NULL);
    p.do_normalize = 0; /* not used: not checked */
    assert_int_equal(wgml_image_prep_check(&p, &err), WGML_OK);
    p.rescale_factor = NAN;
    CHECK_ERR("check rescale", wgml_image_prep_check(&p, &err), &err, WGML_ERR_INVALID_ARGUMENT, "rescale_factor",
              NULL);
}

static void size_is(const wgml_image_prep *p, int w, int h, int want_h, int want_w) {
    int oh = -1, ow = -1;
    wgml_error err;
    wgml_status st = wgml_image_prep_output_size(p, w, h, &oh, &ow, &err);
    if (st) fail_msg("size of %d x %d: %s", w, h, err.message);
    if (oh != want_h || ow != want_w) fail_msg("size of %d x %d: %d x %d, want %d x %d", w, h, ow, oh, want_w, want_h);
}

static void test_output_size(void **state) {
    (void)state;
    wgml_image_prep p = parse_ok(CLIP_HUB, WGML_IMAGE_PROCESSOR_NONE);
    size_is(&p, 640, 480, 224, 224);
    size_is(&p, 1, 1, 224, 224);
    p.do_center_crop = 0;
    size_is(&p, 640, 480, 224, 298); /* int(224 * 640 / 480) = int(298.67) */
    size_is(&p, 480, 640, 298, 224);
    size_is(&p, 300, 300, 224, 224);
    size_is(&p, 3, 1000, 74666, 224); /* int(74666.67) */
    size_is(&p, 1000, 750, 224, 298);
    size_is(&p, 641, 479, 224, 299); /* 299.76 */
    size_is(&p, 7, 5, 224, 313);     /* 313.6 */
    /* 224 * 65535 / 1 pixels tall: over the output limit, with no crop to cut it */
    int oh = -1, ow = -1;
    wgml_error err;
    CHECK_ERR("too large", wgml_image_prep_output_size(&p, 1, 65535, &oh, &ow, &err), &err, WGML_ERR_INVALID_ARGUMENT,
              "224 x 14679840", "pixels allowed");
    p.do_center_crop = 1; /* the crop keeps only 224 x 224 of it: fine */
    size_is(&p, 1, 65535, 224, 224);
    p.do_resize = 0;
    size_is(&p, 10, 20, 224, 224);
    p.do_center_crop = 0;
    size_is(&p, 10, 20, 20, 10);
    CHECK_ERR("bad input", wgml_image_prep_output_size(&p, 0, 20, &oh, &ow, &err), &err, WGML_ERR_INVALID_ARGUMENT,
              "0 x 20", NULL);
    p = parse_ok(SIGLIP_HUB, WGML_IMAGE_PROCESSOR_NONE);
    size_is(&p, 640, 480, 224, 224);
    p = parse_ok("{\"size\": {\"height\": 32, \"width\": 128}}", WGML_IMAGE_PROCESSOR_VIT);
    size_is(&p, 5, 9, 32, 128);
}

static void test_limits(void **state) {
    (void)state;
    uint8_t px[3 * 4 * 4] = {0};
    wgml_error err;
    wgml_image img = {4, 4, 12, px};
    assert_int_equal(wgml_image_check(&img, &err), WGML_OK);
    img.w = 0;
    CHECK_ERR("w 0", wgml_image_check(&img, &err), &err, WGML_ERR_INVALID_ARGUMENT, "0 x 4", "1..65535");
    img.w = 65536;
    CHECK_ERR("w 65536", wgml_image_check(&img, &err), &err, WGML_ERR_INVALID_ARGUMENT, "65536 x 4", NULL);
    img.w = 4, img.h = -1;
    CHECK_ERR("h -1", wgml_image_check(&img, &err), &err, WGML_ERR_INVALID_ARGUMENT, "4 x -1", NULL);
    img.h = 4, img.stride = 11;
    CHECK_ERR("stride", wgml_image_check(&img, &err), &err, WGML_ERR_INVALID_ARGUMENT, "stride of 11",
              "3 * width (12)");
    img.stride = 12, img.data = NULL;
    CHECK_ERR("data", wgml_image_check(&img, &err), &err, WGML_ERR_INVALID_ARGUMENT, "NULL", NULL);
    CHECK_ERR("no image", wgml_image_check(NULL, &err), &err, WGML_ERR_INVALID_ARGUMENT, "none", NULL);
    img.data = px;

    /* the pipeline's and the resampler's checks */
    wgml_image_prep p = parse_ok(SIGLIP_HUB, WGML_IMAGE_PROCESSOR_NONE);
    float *out = malloc(3 * 224 * 224 * sizeof *out);
    assert_non_null(out);
    CHECK_ERR("cap", wgml_image_prep_run(&p, &img, out, 3 * 224 * 224 - 1, &err), &err, WGML_ERR_INVALID_ARGUMENT,
              "150528 floats", "150527");
    CHECK_ERR("no out", wgml_image_prep_run(&p, &img, NULL, 0, &err), &err, WGML_ERR_INVALID_ARGUMENT, "buffer", NULL);
    img.stride = 2;
    CHECK_ERR("run stride", wgml_image_prep_run(&p, &img, out, 3 * 224 * 224, &err), &err, WGML_ERR_INVALID_ARGUMENT,
              "stride", NULL);
    img.stride = 12;
    free(out);
    uint8_t o[3 * 8 * 8];
    CHECK_ERR("resize 0", wgml_image_resize(&img, 0, 8, WGML_IMAGE_BICUBIC, o, 24, &err), &err,
              WGML_ERR_INVALID_ARGUMENT, "0 x 8", NULL);
    CHECK_ERR("resize big", wgml_image_resize(&img, 4097, 4097, WGML_IMAGE_BICUBIC, o, 24, &err), &err,
              WGML_ERR_INVALID_ARGUMENT, "at most 16777216 pixels", NULL);
    CHECK_ERR("filter", wgml_image_resize(&img, 8, 8, (wgml_image_filter)6, o, 24, &err), &err,
              WGML_ERR_INVALID_ARGUMENT, "filter 6", NULL);
    CHECK_ERR("out stride", wgml_image_resize(&img, 8, 8, WGML_IMAGE_BICUBIC, o, 23, &err), &err,
              WGML_ERR_INVALID_ARGUMENT, "stride", NULL);
    CHECK_ERR("window", wgml_image_resize_window(&img, 8, 8, WGML_IMAGE_BICUBIC, 4, 0, 5, 8, o, 24, &err), &err,
              WGML_ERR_INVALID_ARGUMENT, "window 5 x 8 at (4, 0)", NULL);
    img.h = 0;
    CHECK_ERR("resize image", wgml_image_resize(&img, 8, 8, WGML_IMAGE_BICUBIC, o, 24, &err), &err,
              WGML_ERR_INVALID_ARGUMENT, "image resize", "4 x 0");
}

/* A constant image stays constant under every filter (the weights sum to one), so every output
 * value is HF's float32 arithmetic on that one byte. */
static void test_constant(void **state) {
    (void)state;
    const int w = 37, h = 23;
    uint8_t *px = malloc(3 * (size_t)w * h);
    assert_non_null(px);
    for (int i = 0; i < w * h; i++)
        px[3 * i] = 255, px[3 * i + 1] = 0, px[3 * i + 2] = 131;
    wgml_image img = {w, h, 3 * (size_t)w, px};
    const char *configs[] = {CLIP_HUB, SIGLIP_HUB, VIT_HUB};
    for (int k = 0; k < 3; k++) {
        for (int f = 0; f <= 5; f++) {
            wgml_image_prep p = parse_ok(configs[k], WGML_IMAGE_PROCESSOR_NONE);
            p.resample = (wgml_image_filter)f;
            float *out = malloc(3 * 224 * 224 * sizeof *out);
            assert_non_null(out);
            wgml_error err;
            if (wgml_image_prep_run(&p, &img, out, 3 * 224 * 224, &err)) fail_msg("%s", err.message);
            for (int c = 0; c < 3; c++) {
                const uint8_t v = px[c];
                float x = (float)((double)v * p.rescale_factor);
                float d = x - (float)p.image_mean[c];
                float want = d / (float)p.image_std[c];
                for (int i = 0; i < 224 * 224; i++)
                    if (memcmp(&out[c * 224 * 224 + i], &want, sizeof want))
                        fail_msg("config %d filter %d channel %d pixel %d: %.9g, want %.9g", k, f, c, i,
                                 out[c * 224 * 224 + i], want);
            }
            free(out);
        }
    }
    /* no resize, a crop larger than the image: zeros around it, (0 - mean) / std after the float steps */
    wgml_image_prep p = parse_ok(CLIP_SAVED, WGML_IMAGE_PROCESSOR_NONE);
    p.do_resize = 0;
    p.crop_height = 30, p.crop_width = 40;
    float out[3 * 30 * 40];
    wgml_error err;
    if (wgml_image_prep_run(&p, &img, out, sizeof out / sizeof out[0], &err)) fail_msg("%s", err.message);
    for (int r = 0; r < 30; r++)
        for (int x = 0; x < 40; x++) {
            /* transformers pads by ceil((30 - 23) / 2) = 4 rows above and ceil((40 - 37) / 2) = 2 columns on
             * the left: image rows 0..22 land at 4..26, columns 0..36 at 2..38 */
            int inside = r >= 4 && r < 27 && x >= 2 && x < 39;
            float x0 = (float)((double)(inside ? px[0] : 0) * p.rescale_factor);
            float d = x0 - (float)p.image_mean[0];
            float want = d / (float)p.image_std[0];
            if (memcmp(&out[r * 40 + x], &want, sizeof want))
                fail_msg("padded crop (%d, %d): %.9g, want %.9g", r, x, out[r * 40 + x], want);
        }
    free(px);
}

static uint32_t rng_state = 12345;
static uint8_t rnd8(void) {
    rng_state = rng_state * 1664525u + 1013904223u;
    return (uint8_t)(rng_state >> 24);
}

/* Any window of a resize is those pixels of the whole resize, bit for bit, with any stride. */
static void test_windows(void **state) {
    (void)state;
    static const int sizes[][4] = {{31, 17, 9, 40}, {64, 48, 64, 31}, {5, 7, 23, 7}, {100, 3, 33, 2}, {9, 9, 9, 9}};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        const int w = sizes[s][0], h = sizes[s][1], ow = sizes[s][2], oh = sizes[s][3];
        const size_t stride = 3 * (size_t)w + 5;
        uint8_t *px = malloc(stride * h), *full = malloc(3 * (size_t)ow * oh), *win = malloc(3 * (size_t)ow * oh);
        assert_true(px && full && win);
        for (size_t i = 0; i < stride * h; i++)
            px[i] = rnd8();
        wgml_image img = {w, h, stride, px};
        for (int f = 0; f <= 5; f++) {
            wgml_error err;
            if (wgml_image_resize(&img, ow, oh, (wgml_image_filter)f, full, 3 * (size_t)ow, &err))
                fail_msg("%s", err.message);
            for (int t = 0; t < 6; t++) {
                int x0 = rnd8() % ow, y0 = rnd8() % oh;
                int wn = 1 + rnd8() % (ow - x0), hn = 1 + rnd8() % (oh - y0);
                const size_t ws = 3 * (size_t)wn + 2;
                if (wgml_image_resize_window(&img, ow, oh, (wgml_image_filter)f, x0, y0, wn, hn, win, ws, &err))
                    fail_msg("%s", err.message);
                for (int y = 0; y < hn; y++)
                    if (memcmp(win + y * ws, full + ((size_t)(y0 + y) * ow + x0) * 3, 3 * (size_t)wn))
                        fail_msg("%dx%d -> %dx%d filter %d: window %dx%d at (%d, %d) differs in row %d", w, h, ow, oh,
                                 f, wn, hn, x0, y0, y);
            }
        }
        /* the same size copies, whichever the filter */
        uint8_t *copy = malloc(3 * (size_t)w * h);
        assert_non_null(copy);
        for (int f = 0; f <= 5; f++) {
            wgml_error err;
            if (wgml_image_resize(&img, w, h, (wgml_image_filter)f, copy, 3 * (size_t)w, &err))
                fail_msg("%s", err.message);
            for (int y = 0; y < h; y++)
                assert_memory_equal(copy + 3 * (size_t)w * y, px + stride * y, 3 * (size_t)w);
        }
        free(copy);
        free(px);
        free(full);
        free(win);
    }
}

static void test_out_of_memory(void **state) {
    (void)state;
    const int w = 50, h = 30;
    uint8_t *px = malloc(3 * (size_t)w * h);
    float *out = malloc(3 * 224 * 224 * sizeof *out);
    assert_true(px && out);
    for (int i = 0; i < 3 * w * h; i++)
        px[i] = rnd8();
    wgml_image img = {w, h, 3 * (size_t)w, px};
    int ok_parse = 0, ok_run = 0;
    for (long fail = 0; fail < 40 && !(ok_parse && ok_run); fail++) {
        long live = wgml_alloc_live();
        wgml_image_prep p;
        wgml_error err;
        wgml_alloc_fail_after(fail);
        wgml_status st = wgml_image_prep_parse(CLIP_SAVED, strlen(CLIP_SAVED), WGML_IMAGE_PROCESSOR_NONE, &p, &err);
        wgml_alloc_fail_after(-1);
        if (st)
            CHECK_ERR("parse oom", st, &err, WGML_ERR_OUT_OF_MEMORY, "memory", NULL);
        else
            ok_parse = 1;
        assert_int_equal(wgml_alloc_live(), live);
        p = parse_ok(CLIP_SAVED, WGML_IMAGE_PROCESSOR_NONE);
        wgml_alloc_fail_after(fail);
        st = wgml_image_prep_run(&p, &img, out, 3 * 224 * 224, &err);
        wgml_alloc_fail_after(-1);
        if (st)
            CHECK_ERR("run oom", st, &err, WGML_ERR_OUT_OF_MEMORY, "out of memory", NULL);
        else
            ok_run = 1;
        assert_int_equal(wgml_alloc_live(), live);
    }
    assert_true(ok_parse && ok_run);
    free(px);
    free(out);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_real_configs), cmocka_unit_test(test_defaults),      cmocka_unit_test(test_parse_errors),
        cmocka_unit_test(test_output_size),  cmocka_unit_test(test_limits),        cmocka_unit_test(test_constant),
        cmocka_unit_test(test_windows),      cmocka_unit_test(test_out_of_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
