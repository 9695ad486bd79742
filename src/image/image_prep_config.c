/*
 * image_prep_config.c - preprocessor_config.json -> wgml_image_prep
 * (image_prep.h), with the library's own JSON reader (chat/jinja_json_read.c:
 * libwgml has no json-c, the browser build has only wasi-libc).
 *
 * The processor class the file names picks the defaults (transformers' class
 * __init__ arguments); each field present replaces its default. The types
 * are Python's as json.loads gives them: a bool is not an int here (HF's
 * configs never write 1 for true), an int is not a float for a size.
 */
#include "chat/jinja_impl.h"
#include "core/error.h"
#include "image/image_prep.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define WHAT "preprocessor config"

typedef struct {
    jinja_env *e;
    wgml_error *err;
    jdict *root;
} reader;

static wgml_status field_fail(reader *r, const char *field, const char *fmt, ...) WGML_PRINTF(3, 4);
static wgml_status field_fail(reader *r, const char *field, const char *fmt, ...) {
    char msg[WGML_ERROR_MESSAGE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return wgml_fail(r->err, WGML_ERR_INVALID_ARGUMENT, WHAT ": \"%s\" %s", field, msg);
}

/* The field's value, NULL when absent. */
static const jv *get(reader *r, const char *field) {
    jv *v = NULL;
    jx_dict_gets(r->e, r->root, field, strlen(field), &v);
    return v;
}

static int is_number(const jv *v) { return v->t == JV_INT || v->t == JV_FLOAT; }
static double number(const jv *v) { return v->t == JV_INT ? (double)v->u.i : v->u.f; }

/* do_*: true or false; null is false (HF keeps None, which is falsy). */
static wgml_status read_flag(reader *r, const char *field, int *dst) {
    const jv *v = get(r, field);
    if (!v) return WGML_OK;
    if (v->t == JV_NONE) {
        *dst = 0;
        return WGML_OK;
    }
    if (v->t != JV_BOOL) return field_fail(r, field, "must be true or false, not %s", jx_type_name(*v));
    *dst = v->u.i != 0;
    return WGML_OK;
}

/* One edge length: an int in 1..WGML_IMAGE_PREP_MAX_SIZE. */
static wgml_status read_edge(reader *r, const char *field, const char *key, const jv *v, int *dst) {
    const char *sep = key ? "." : "";
    key = key ? key : "";
    if (v->t != JV_INT) return field_fail(r, field, "%s%s must be an integer, not %s", sep, key, jx_type_name(*v));
    if (v->u.i < 1 || v->u.i > WGML_IMAGE_PREP_MAX_SIZE)
        return field_fail(r, field, "%s%s is %lld: a size must be 1..%d", sep, key, (long long)v->u.i,
                          WGML_IMAGE_PREP_MAX_SIZE);
    *dst = (int)v->u.i;
    return WGML_OK;
}

/* The keys of dict d are exactly the n given. */
static int keys_are(reader *r, const jdict *d, const char *const *keys, size_t n) {
    if (d->n != n) return 0;
    for (size_t i = 0; i < n; i++) {
        jv *v = NULL;
        if (jx_dict_gets(r->e, d, keys[i], strlen(keys[i]), &v) || !v) return 0;
    }
    return 1;
}

/*
 * size / crop_size: an int (int_shortest: the shortest edge, else a square),
 * {"shortest_edge": S} (when shortest_ok), {"height": H, "width": W}, or
 * [H, W] (HF's get_size_dict reads a list as height, width); null keeps the
 * default. *shortest is set to 1 or 0 by the form.
 */
static wgml_status read_size(reader *r, const char *field, int int_shortest, int shortest_ok, int *shortest, int *s,
                             int *h, int *w) {
    static const char *const HW[2] = {"height", "width"}, *const SE[1] = {"shortest_edge"};
    const jv *v = get(r, field);
    if (!v || v->t == JV_NONE) return WGML_OK;
    wgml_status st;
    if (v->t == JV_INT) {
        int e = 0;
        if ((st = read_edge(r, field, NULL, v, &e))) return st;
        if (int_shortest) {
            *shortest = 1, *s = e;
        } else {
            *shortest = 0, *h = *w = e;
        }
        return WGML_OK;
    }
    if (v->t == JV_LIST) {
        const jlist *l = v->u.l;
        if (l->n != 2) return field_fail(r, field, "as a list must be [height, width], not %zu items", l->n);
        if ((st = read_edge(r, field, "[0]", &l->v[0], h)) || (st = read_edge(r, field, "[1]", &l->v[1], w))) return st;
        *shortest = 0;
        return WGML_OK;
    }
    if (v->t == JV_DICT) {
        const jdict *d = v->u.d;
        if (keys_are(r, d, HW, 2)) {
            jv *hv = NULL, *wv = NULL;
            jx_dict_gets(r->e, d, "height", 6, &hv);
            jx_dict_gets(r->e, d, "width", 5, &wv);
            if ((st = read_edge(r, field, "height", hv, h)) || (st = read_edge(r, field, "width", wv, w))) return st;
            *shortest = 0;
            return WGML_OK;
        }
        if (shortest_ok && keys_are(r, d, SE, 1)) {
            jv *sv = NULL;
            jx_dict_gets(r->e, d, "shortest_edge", 13, &sv);
            if ((st = read_edge(r, field, "shortest_edge", sv, s))) return st;
            *shortest = 1;
            return WGML_OK;
        }
        return field_fail(r, field,
                          "must be {\"height\": H, \"width\": W}%s (other keys, such as longest_edge, are not "
                          "supported)",
                          shortest_ok ? " or {\"shortest_edge\": S}" : "");
    }
    return field_fail(r, field, "must be an integer or an object, not %s", jx_type_name(*v));
}

/* image_mean / image_std: 3 numbers, or one number for the three channels; null keeps the default. */
static wgml_status read_triple(reader *r, const char *field, int nonzero, double dst[3]) {
    const jv *v = get(r, field);
    if (!v || v->t == JV_NONE) return WGML_OK;
    double t[3];
    if (is_number(v)) {
        t[0] = t[1] = t[2] = number(v);
    } else if (v->t == JV_LIST) {
        const jlist *l = v->u.l;
        if (l->n != 3) return field_fail(r, field, "must have 3 numbers (R, G, B), not %zu", l->n);
        for (int c = 0; c < 3; c++) {
            if (!is_number(&l->v[c]))
                return field_fail(r, field, "[%d] must be a number, not %s", c, jx_type_name(l->v[c]));
            t[c] = number(&l->v[c]);
        }
    } else {
        return field_fail(r, field, "must be a list of 3 numbers or a number, not %s", jx_type_name(*v));
    }
    for (int c = 0; c < 3; c++) {
        float f = (float)t[c]; /* HF normalizes in float32 */
        if (!isfinite(f)) return field_fail(r, field, "[%d] is %g: not a finite float32", c, t[c]);
        if (nonzero && f == 0.0f) return field_fail(r, field, "[%d] is %g: a standard deviation cannot be 0", c, t[c]);
        dst[c] = t[c];
    }
    return WGML_OK;
}

/* image_processor_type, feature_extractor_type, processor_class: a string or null. */
static wgml_status read_name(reader *r, const char *field, const char **out) {
    const jv *v = get(r, field);
    *out = NULL;
    if (!v || v->t == JV_NONE) return WGML_OK;
    if (v->t != JV_STR) return field_fail(r, field, "must be a string (a class name), not %s", jx_type_name(*v));
    *out = v->u.s->s;
    return WGML_OK;
}

static wgml_status read_config(reader *r, wgml_image_processor fallback, wgml_image_prep *p) {
    static const char *const NAME_FIELDS[3] = {"image_processor_type", "feature_extractor_type", "processor_class"};
    const char *names[3];
    wgml_status st;
    for (int i = 0; i < 3; i++)
        if ((st = read_name(r, NAME_FIELDS[i], &names[i]))) return st;
    wgml_image_processor kind = WGML_IMAGE_PROCESSOR_NONE;
    const char *named = NULL;
    for (int i = 0; i < 3 && !kind; i++) {
        if (names[i] && !named) named = names[i];
        if ((kind = wgml_image_processor_from_name(names[i]))) named = names[i];
    }
    if (!kind) kind = fallback;
    if (!kind) {
        if (named)
            return wgml_fail(r->err, WGML_ERR_UNSUPPORTED,
                             WHAT ": the image processor \"%.200s\" is not one this library reproduces (CLIP, SigLIP, "
                                  "ViT)",
                             named);
        return wgml_fail(r->err, WGML_ERR_INVALID_ARGUMENT,
                         WHAT ": names no image processor (image_processor_type, feature_extractor_type, "
                              "processor_class) and no default was given");
    }
    wgml_image_prep_defaults(kind, p);
    if (named) snprintf(p->processor_name, sizeof p->processor_name, "%s", named);

    if ((st = read_flag(r, "do_resize", &p->do_resize)) || (st = read_flag(r, "do_center_crop", &p->do_center_crop)) ||
        (st = read_flag(r, "do_rescale", &p->do_rescale)) || (st = read_flag(r, "do_normalize", &p->do_normalize)))
        return st;
    if ((st = read_size(r, "size", kind == WGML_IMAGE_PROCESSOR_CLIP, 1, &p->resize_shortest, &p->shortest_edge,
                        &p->height, &p->width)))
        return st;
    int crop_shortest = 0, crop_s = 0;
    if ((st = read_size(r, "crop_size", 0, 0, &crop_shortest, &crop_s, &p->crop_height, &p->crop_width))) return st;

    const jv *v = get(r, "resample");
    if (v) {
        if (v->t == JV_NONE) {
            p->resample = WGML_IMAGE_BILINEAR; /* HF's resize(resample=None) */
        } else if (v->t != JV_INT) {
            return field_fail(r, "resample", "must be an integer (PIL's filter 0..5), not %s", jx_type_name(*v));
        } else if (v->u.i < 0 || v->u.i > 5) {
            return field_fail(r, "resample",
                              "is %lld: PIL's filters are 0 (nearest), 1 (lanczos), 2 (bilinear), 3 "
                              "(bicubic), 4 (box), 5 (hamming)",
                              (long long)v->u.i);
        } else {
            p->resample = (wgml_image_filter)v->u.i;
        }
    }
    int rescale_null = 0;
    if ((v = get(r, "rescale_factor"))) {
        if (v->t == JV_NONE) {
            rescale_null = 1;
        } else if (!is_number(v)) {
            return field_fail(r, "rescale_factor", "must be a number, not %s", jx_type_name(*v));
        } else {
            double f = number(v);
            if (!isfinite(f) || f <= 0) return field_fail(r, "rescale_factor", "is %g: it must be above 0", f);
            p->rescale_factor = f;
        }
    }
    if ((st = read_triple(r, "image_mean", 0, p->image_mean)) || (st = read_triple(r, "image_std", 1, p->image_std)))
        return st;

    if (kind != WGML_IMAGE_PROCESSOR_CLIP) p->do_center_crop = 0; /* SigLIP and ViT have no crop step */
    if (rescale_null && p->do_rescale)
        return field_fail(r, "rescale_factor", "is null while do_rescale is true (HF refuses it too)");
    return wgml_image_prep_check(p, r->err);
}

wgml_status wgml_image_prep_parse(const char *json, size_t len, wgml_image_processor fallback, wgml_image_prep *out,
                                  wgml_error *err) {
    if (!json || !out) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, WHAT ": no text or no output given");
    if ((int)fallback < WGML_IMAGE_PROCESSOR_NONE || (int)fallback > WGML_IMAGE_PROCESSOR_VIT)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, WHAT ": unknown default processor %d", (int)fallback);
    jinja_limits lim = jinja_default_limits();
    lim.max_memory = (size_t)16 << 20;
    lim.max_depth = 64;
    reader r = {.err = err};
    wgml_status st = jinja_env_create(&lim, &r.e, err);
    if (st) return st;
    jv root;
    if (jx_json_parse(r.e, json, len, WHAT, &root)) {
        const char *m = r.e->msg;
        if (!strncmp(m, "chat template: ", 15)) m += 15;
        st = wgml_fail(err, r.e->status == WGML_ERR_OUT_OF_MEMORY ? WGML_ERR_OUT_OF_MEMORY : WGML_ERR_INVALID_ARGUMENT,
                       "%s", m);
    } else if (root.t != JV_DICT) {
        st = wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, WHAT ": must be a JSON object, not %s", jx_type_name(root));
    } else {
        r.root = root.u.d;
        wgml_image_prep p;
        st = read_config(&r, fallback, &p);
        if (!st) *out = p;
    }
    jinja_env_free(r.e);
    return st;
}
