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

/* A note for a caller's log callback (wgml_model_params.log and the like):
 * formats the line and passes it to log(user, line); nothing when log is NULL. */
void wgml_note(void (*log)(void *user, const char *line), void *user, const char *fmt, ...) WGML_PRINTF(3, 4);

/* Clears err to WGML_OK with an empty message. */
void wgml_error_clear(wgml_error *err);

/* Prepends "prefix: " to the message already in err (for adding context). */
void wgml_error_prefix(wgml_error *err, const char *fmt, ...) WGML_PRINTF(2, 3);

/* A sticky error, for a sequence of calls that return nothing (a backend
 * step's ops, a model's graph as it is built): the first failure is kept
 * with its message, later ones are dropped, and whoever ends the sequence
 * reports it. A zeroed wgml_sticky is clear.
 *     if (bad) wgml_sticky_fail(&s, WGML_ERR_INVALID_ARGUMENT, "matmul: x has %lld columns ...", ...);
 *     ...
 *     return wgml_sticky_report(&s, err);  (WGML_OK when nothing failed) */
typedef struct wgml_sticky {
    wgml_status status;
    wgml_error error;
} wgml_sticky;

/* Records the failure unless one is already kept. */
void wgml_sticky_fail(wgml_sticky *s, wgml_status code, const char *fmt, ...) WGML_PRINTF(3, 4);
/* Records a failure whose message is already in e (a callee's), unless one is kept. */
void wgml_sticky_set(wgml_sticky *s, const wgml_error *e);
/* The kept status (WGML_OK when none), its message copied to err. */
wgml_status wgml_sticky_report(const wgml_sticky *s, wgml_error *err);
/* Forgets the kept failure. */
void wgml_sticky_clear(wgml_sticky *s);

#endif
