/*
 * acts.h - the device buffers of a request's state (model/family.h: "one
 * state idiom"): each activation tensor in a buffer of its own, made when the
 * state is made or grown between steps, freed together.
 *
 *   wgml_acts a = {.be = be};
 *   if ((st = wgml_acts_tensor(&a, &s->x, "x", WGML_F32, E, rows, err))) ...
 *   wgml_acts_release(&a);   // every buffer; the tensors are stale after it
 */
#ifndef WGML_MODEL_ACTS_H
#define WGML_MODEL_ACTS_H

#include "backend/backend.h"

#define WGML_ACTS_MAX 24 /* buffers a state holds at most */

typedef struct wgml_acts {
    wgml_backend *be;
    wgml_buffer *bufs[WGML_ACTS_MAX];
    int n;
} wgml_acts;

/* A new ne0 x ne1 tensor of type in a buffer of its own (WGML_BUFFER_ACTIVATIONS);
 * an error names it and its size. */
wgml_status wgml_acts_tensor(wgml_acts *a, wgml_tensor *t, const char *name, uint32_t type, int64_t ne0, int64_t ne1,
                             wgml_error *err);
/* Frees every buffer (a stays usable for new tensors). */
void wgml_acts_release(wgml_acts *a);

/* A view of the first n elements of a one-row i32 table (the per-step tables' used part). */
static inline wgml_tensor wgml_acts_head(const wgml_tensor *t, int64_t n) {
    wgml_tensor v = *t;
    v.ne[0] = n;
    return v;
}

/* t, or NULL when it was not loaded (an optional weight: a bias). */
static inline const wgml_tensor *wgml_opt(const wgml_tensor *t) { return t->buf ? t : NULL; }

#endif
