/*
 * acts.c - a state's activation buffers (acts.h).
 */
#include "model/acts.h"

#include "core/dtype.h"
#include "core/error.h"

wgml_status wgml_acts_tensor(wgml_acts *a, wgml_tensor *t, const char *name, uint32_t type, int64_t ne0, int64_t ne1,
                             wgml_error *err) {
    if (a->n >= WGML_ACTS_MAX)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "a state of more than %d buffers ('%s')", WGML_ACTS_MAX, name);
    const size_t size = wgml_row_size(type, ne0) * (size_t)ne1;
    wgml_buffer *b;
    wgml_status st = a->be->buffer_create(a->be, size, WGML_BUFFER_ACTIVATIONS, &b, err);
    if (st) {
        wgml_error_prefix(err, "allocating '%s' (%zu bytes)", name, size);
        return st;
    }
    a->bufs[a->n++] = b;
    *t = (wgml_tensor){.type = type, .ne = {ne0, ne1, 1, 1}, .buf = b, .offset = 0, .name = name};
    return WGML_OK;
}

void wgml_acts_release(wgml_acts *a) {
    for (int i = 0; i < a->n; i++) a->be->buffer_free(a->be, a->bufs[i]);
    a->n = 0;
}
