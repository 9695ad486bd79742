/*
 * error.c - status names and the wgml_error helpers (see error.h).
 */
#include "core/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *wgml_status_name(wgml_status status) {
    switch (status) {
    case WGML_OK: return "ok";
    case WGML_ERR_INVALID_ARGUMENT: return "invalid argument";
    case WGML_ERR_IO: return "i/o error";
    case WGML_ERR_FORMAT: return "bad file format";
    case WGML_ERR_UNSUPPORTED: return "unsupported";
    case WGML_ERR_OUT_OF_MEMORY: return "out of memory";
    case WGML_ERR_CONTEXT_FULL: return "context full";
    case WGML_ERR_GPU: return "gpu error";
    case WGML_ERR_DEVICE_LOST: return "device lost";
    case WGML_ERR_NO_ADAPTER: return "no adapter";
    case WGML_ERR_TOKENIZER: return "tokenizer error";
    case WGML_ERR_TEMPLATE: return "template error";
    case WGML_ERR_NETWORK: return "network error";
    }
    return "unknown error";
}

wgml_status wgml_fail(wgml_error *err, wgml_status code, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        va_end(ap);
        err->code = code;
    }
    return code;
}

void wgml_note(void (*log)(void *user, const char *line), void *user, const char *fmt, ...) {
    if (!log) return;
    char line[WGML_ERROR_MESSAGE_MAX + 768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    log(user, line);
}

void wgml_error_clear(wgml_error *err) {
    if (err) {
        err->code = WGML_OK;
        err->message[0] = '\0';
    }
}

void wgml_error_prefix(wgml_error *err, const char *fmt, ...) {
    if (!err) return;
    char prefix[WGML_ERROR_MESSAGE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    char old[WGML_ERROR_MESSAGE_MAX];
    memcpy(old, err->message, sizeof old);
    size_t n = strlen(prefix);
    if (n > sizeof err->message - 3) n = sizeof err->message - 3;
    memcpy(err->message, prefix, n);
    memcpy(err->message + n, ": ", 2);
    size_t room = sizeof err->message - n - 2;
    size_t m = strnlen(old, room - 1);
    memcpy(err->message + n + 2, old, m);
    err->message[n + 2 + m] = '\0';
}

void wgml_sticky_fail(wgml_sticky *s, wgml_status code, const char *fmt, ...) {
    if (s->status != WGML_OK) return;
    s->status = s->error.code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->error.message, sizeof s->error.message, fmt, ap);
    va_end(ap);
}

void wgml_sticky_set(wgml_sticky *s, const wgml_error *e) {
    if (s->status != WGML_OK || !e || e->code == WGML_OK) return;
    s->status = e->code;
    s->error = *e;
}

wgml_status wgml_sticky_report(const wgml_sticky *s, wgml_error *err) {
    if (s->status != WGML_OK && err) *err = s->error;
    return s->status;
}

void wgml_sticky_clear(wgml_sticky *s) {
    s->status = WGML_OK;
    s->error.code = WGML_OK;
    s->error.message[0] = '\0';
}
