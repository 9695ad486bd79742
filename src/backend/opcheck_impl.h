/*
 * opcheck_impl.h - what the files of the op-by-op comparison share (opcheck.h).
 *
 *   opcheck.c            the driver (wgml_opcheck_run, one grid per op) and the helpers below
 *   opcheck_matmul.c     the ops that read weights of every type: matmul (and its
 *                        convolutions), get_rows (and its activation tables)
 *   opcheck_attention.c  attention: causal over the KV cache, and general
 *   opcheck_rows.c       row and elementwise ops: rms_norm, softmax, swiglu, argmax, rope,
 *                        and the encoders' layer_norm, l2_norm, unary, add, mul, pool
 *   opcheck_copy.c       copy: strided views made contiguous
 *   opcheck_audio.c      the audio models' ops: im2col, col2im, instance_norm, lstm, stft,
 *                        istft, nsf_source
 */
#ifndef WGML_BACKEND_OPCHECK_IMPL_H
#define WGML_BACKEND_OPCHECK_IMPL_H

#include "backend/opcheck.h"

typedef struct {
    wgml_backend *be[2]; /* 0: device, 1: reference */
    const wgml_opcheck_options *opt;
    wgml_opcheck_fn fn;
    void *user;
    int failures;
    uint64_t rng;
} ctx;

typedef struct {
    wgml_buffer *buf[2];
    wgml_tensor t[2];
    void *host; /* weights: the bytes both sides were made from */
} twin;

/* One grid per op of ops.h (oc_check_<name>, in the file of its family): an op
 * without its grid does not link. */
#define OC_CHECK_DECL(name, NAME, args) void oc_check_##name(ctx *c);
WGML_OPS(OC_CHECK_DECL)
#undef OC_CHECK_DECL

/* Uniform in [-1, 1), from the run's seed. */
float oc_rnd(ctx *c);
/* n values uniform in [-scale, scale) (caller frees with wgml_free; NULL: out of memory). */
float *oc_randv(ctx *c, size_t n, float scale);
/* Reports one case to the caller's function; counts it as failed unless it ran and err <= tol. */
void oc_report(ctx *c, const char *op, const char *config, double err, double tol, wgml_status st, const char *msg);

/* Frees both sides' buffers and the host bytes; zeroes t. */
void oc_twin_free(ctx *c, twin *t);
/* An activation [ne1][ne0] of `type` on both sides, filled with data (or zeros). */
wgml_status oc_twin_act(ctx *c, twin *t, uint32_t type, int64_t ne0, int64_t ne1, const void *data,
                        wgml_error *err);
/* An activation [ne1][ne0] at byte offset `pad` of a larger buffer whose padding holds garbage. */
wgml_status oc_twin_act_at(ctx *c, twin *t, uint32_t type, int64_t ne0, int64_t ne1, const void *data, size_t pad,
                           wgml_error *err);
/* A weight [ne1][ne0] of `type` quantized from random values (owned bytes). */
wgml_status oc_twin_weight(ctx *c, twin *t, uint32_t type, int64_t ne0, int64_t ne1, float scale,
                           wgml_error *err);

/* max |d - r| / (1 + max |r|); a NaN on one side only is an infinite error. */
double oc_compare(const float *d, const float *r, size_t n);
/* Reads the f32 output of both sides, compares and reports the case (tol_abs > 0: an absolute tolerance). */
void oc_finish_abs(ctx *c, const char *op, const char *cfg, twin *out, double tol, double tol_abs);
void oc_finish(ctx *c, const char *op, const char *cfg, twin *out, double tol);

/* Runs `body` on both sides, each in one step at (pos, n). Returns the first error. */
typedef void (*side_fn)(wgml_backend *be, int side, void *arg);
wgml_status oc_run_both(ctx *c, int pos, int n, side_fn body, void *arg, wgml_error *err);

/* an op left out by the options' op list */
int oc_skip(const ctx *c, const char *op);
/* a weight type left out by the options' type list */
int oc_skip_type(const ctx *c, uint32_t t);

/* Where a case puts an input vector (or b of add and mul), and its name in the case's config. */
enum { IN_NONE, IN_WEIGHT, IN_ACT, IN_OUT_BUF /* an activation in the output's buffer, past its rows */ };
extern const char *const oc_in_names[4];

#endif
