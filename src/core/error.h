/*
 * error.h - filling a wgml_error: one convention for the whole library.
 *
 * Every fallible internal function returns wgml_status and takes a
 * `wgml_error *err` (which may be NULL). wgml_fail() formats the message,
 * stores the code and returns it, so the usual shape is
 *     if (bad) return wgml_fail(err, WGML_ERR_FORMAT, "%s: tensor '%s' ...", path, name);
 */
#ifndef WGML_CORE_ERROR_H
#define WGML_CORE_ERROR_H

#include "wgml.h"

#if defined(__GNUC__)
#define WGML_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define WGML_PRINTF(a, b)
#endif

wgml_status wgml_fail(wgml_error *err, wgml_status code, const char *fmt, ...) WGML_PRINTF(3, 4);

/* Clears err to WGML_OK with an empty message. */
void wgml_error_clear(wgml_error *err);

/* Prepends "prefix: " to the message already in err (for adding context). */
void wgml_error_prefix(wgml_error *err, const char *fmt, ...) WGML_PRINTF(2, 3);

#endif
