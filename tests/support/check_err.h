/*
 * check_err.h - asserting on a wgml_status and the message that comes with it.
 *
 * Every error the library reports must say what was wrong and where, so tests
 * check the code and a specific piece of the message (a key, a tensor name,
 * an offset, "truncated"). Include after testutil.h (cmocka).
 */
#ifndef WGML_TEST_CHECK_ERR_H
#define WGML_TEST_CHECK_ERR_H

#include "testutil.h"
#include "wgml.h"

#include <string.h>

/* Fails the test unless st == want, err->code == want and the message contains
 * every non-NULL substring given (up to three). `what` labels the case. */
#define CHECK_ERR(what, st, err, want, ...) check_err_((what), (st), (err), (want), __VA_ARGS__, NULL, NULL, NULL)

static inline void check_err_(const char *what, wgml_status st, const wgml_error *err, wgml_status want, const char *s1,
                              const char *s2, const char *s3, ...) {
    const char *subs[3] = {s1, s2, s3};
    if (st != want || err->code != want)
        fail_msg("%s: status %d (%s), expected %d (%s); message: %s", what, (int)st, wgml_status_name(st), (int)want,
                 wgml_status_name(want), err->message);
    for (int i = 0; i < 3; i++)
        if (subs[i] && !strstr(err->message, subs[i]))
            fail_msg("%s: message \"%s\" lacks \"%s\"", what, err->message, subs[i]);
}

#endif
