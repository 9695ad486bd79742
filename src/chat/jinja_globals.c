/*
 * jinja_globals.c - the global functions a chat template can call: range,
 * namespace (a dict whose attributes set may assign), dict, raise_exception
 * (the template refuses the conversation: its message becomes the error's,
 * and jinja_env_raised says so) and strftime_now (Python's strftime over the
 * env's fixed clock, or the local time; the C library's is not used, so the
 * locale cannot change the month names).
 */
#include "chat/jinja_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- globals ---------------------------------------------------------------- */

static jfunc g_builtins[] = {
    {JF_BUILTIN, NULL, NULL, "range", {0}},        {JF_BUILTIN, NULL, NULL, "namespace", {0}},
    {JF_BUILTIN, NULL, NULL, "dict", {0}},         {JF_BUILTIN, NULL, NULL, "raise_exception", {0}},
    {JF_BUILTIN, NULL, NULL, "strftime_now", {0}},
};

int jx_builtin(const char *name, size_t len, jv *out) {
    for (size_t i = 0; i < sizeof g_builtins / sizeof g_builtins[0]; i++)
        if (strlen(g_builtins[i].name) == len && !memcmp(g_builtins[i].name, name, len)) {
            memset(out, 0, sizeof *out);
            out->t = JV_FUNC;
            out->u.fn = &g_builtins[i];
            return 1;
        }
    return 0;
}

static int64_t days_from_civil(int64_t y, int m, int d) {
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static int strftime_now(jinja_env *e, const jstr *fmt, jv *out) {
    int Y, M, D, h, mi, sec;
    if (e->have_clock) {
        Y = e->clock[0], M = e->clock[1], D = e->clock[2], h = e->clock[3], mi = e->clock[4], sec = e->clock[5];
    } else {
        time_t t = time(NULL);
        struct tm tm;
        if (!localtime_r(&t, &tm)) return jx_error(e, "strftime_now: no clock");
        Y = tm.tm_year + 1900, M = tm.tm_mon + 1, D = tm.tm_mday, h = tm.tm_hour, mi = tm.tm_min, sec = tm.tm_sec;
    }
    /* the month names a table: a clock set through jinja_env_set_clock may be anything */
    if (M < 1 || M > 12) return jx_error(e, "strftime_now: the clock's month %d is not in 1..12", M);
    static const char *const days[] = {"Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"};
    static const char *const months[] = {"January", "February", "March",     "April",   "May",      "June",
                                         "July",    "August",   "September", "October", "November", "December"};
    int64_t z = days_from_civil(Y, M, D);
    int wday = (int)(((z % 7) + 7 + 3) % 7); /* 1970-01-01 was a Thursday: 0 = Monday */
    int yday = (int)(z - days_from_civil(Y, 1, 1)) + 1;
    jx_buf b = {0};
    for (size_t i = 0; i < fmt->len; i++) {
        char c = fmt->s[i];
        if (c != '%' || i + 1 >= fmt->len) {
            if (jx_buf_put(e, &b, &c, 1)) return -1;
            continue;
        }
        int nopad = 0;
        char k = fmt->s[++i];
        if (k == '-' && i + 1 < fmt->len) nopad = 1, k = fmt->s[++i];
        char tmp[64];
        int num = -1, width = 2;
        tmp[0] = '\0';
        switch (k) {
        case 'Y': num = Y, width = 4; break;
        case 'y': num = Y % 100; break;
        case 'm': num = M; break;
        case 'd': num = D; break;
        case 'e': snprintf(tmp, sizeof tmp, nopad ? "%d" : "%2d", D); break;
        case 'H': num = h; break;
        case 'I': num = h % 12 ? h % 12 : 12; break;
        case 'M': num = mi; break;
        case 'S': num = sec; break;
        case 'j': num = yday, width = 3; break;
        case 'p': snprintf(tmp, sizeof tmp, "%s", h < 12 ? "AM" : "PM"); break;
        case 'A': snprintf(tmp, sizeof tmp, "%s", days[wday]); break;
        case 'a': snprintf(tmp, sizeof tmp, "%.3s", days[wday]); break;
        case 'B': snprintf(tmp, sizeof tmp, "%s", months[M - 1]); break;
        case 'b':
        case 'h': snprintf(tmp, sizeof tmp, "%.3s", months[M - 1]); break;
        case 'F': snprintf(tmp, sizeof tmp, "%04d-%02d-%02d", Y, M, D); break;
        case 'T': snprintf(tmp, sizeof tmp, "%02d:%02d:%02d", h, mi, sec); break;
        case 'D': snprintf(tmp, sizeof tmp, "%02d/%02d/%02d", M, D, Y % 100); break;
        case 'u': num = wday + 1, width = 1; break;
        case 'w': num = (wday + 1) % 7, width = 1; break;
        case '%': snprintf(tmp, sizeof tmp, "%%"); break;
        default: snprintf(tmp, sizeof tmp, "%%%s%c", nopad ? "-" : "", k); break;
        }
        if (num >= 0) snprintf(tmp, sizeof tmp, "%0*d", nopad ? 1 : width, num);
        if (jx_buf_puts(e, &b, tmp)) return -1;
    }
    jstr *r = jx_buf_take(e, &b);
    if (!r) return -1;
    *out = jv_strv(r);
    return 0;
}

int jx_call_builtin(jinja_env *e, const char *name, const jargs *a, jv *out) {
    if (!strcmp(name, "range")) {
        int64_t v[3] = {0, 0, 1};
        if (a->n_kw || a->n_pos < 1 || a->n_pos > 3) return jx_error(e, "range expects 1 to 3 integer arguments");
        for (int i = 0; i < a->n_pos; i++)
            if (jx_want_int(e, a->pos[i], "range", &v[a->n_pos == 1 ? 1 : i])) return -1;
        if (v[2] == 0) return jx_error(e, "range() arg 3 must not be zero");
        /* the count, exactly, in unsigned arithmetic: no double rounding (range(2**63 - 5, 2**63 - 1) has 4
         * items) and no overflow, whatever the bounds and step */
        uint64_t n = 0, step = v[2] > 0 ? (uint64_t)v[2] : 0 - (uint64_t)v[2];
        if (v[2] > 0 && v[0] < v[1]) n = ((uint64_t)v[1] - (uint64_t)v[0] - 1) / step + 1;
        if (v[2] < 0 && v[0] > v[1]) n = ((uint64_t)v[0] - (uint64_t)v[1] - 1) / step + 1;
        if (n > e->lim.max_memory / sizeof(jv) || n > e->lim.max_steps)
            return jx_error(e, "range of %llu items is over the template's budget", (unsigned long long)n);
        if (jx_step(e, n)) return -1;
        jlist *l = jx_list(e, (size_t)n);
        if (!l) return -1;
        /* item i lies between the bounds: computed modulo 2**64, it is exact */
        for (uint64_t i = 0; i < n; i++)
            l->v[i] = jv_int((int64_t)((uint64_t)v[0] + i * (uint64_t)v[2]));
        l->n = (size_t)n;
        *out = jv_listv(l);
        return 0;
    }
    if (!strcmp(name, "namespace") || !strcmp(name, "dict")) {
        jdict *d = jx_dict(e, (size_t)a->n_kw);
        if (!d) return -1;
        d->ns = name[0] == 'n';
        for (int i = 0; i < a->n_pos; i++) { /* a dict (or pairs) to start from */
            jv p = a->pos[i];
            if (p.t == JV_DICT) {
                for (size_t k = 0; k < p.u.d->n; k++)
                    if (jx_dict_set(e, d, p.u.d->k[k], p.u.d->v[k])) return -1;
            } else if (p.t == JV_LIST) {
                for (size_t k = 0; k < p.u.l->n; k++) {
                    jv pair = p.u.l->v[k];
                    if (pair.t != JV_LIST || pair.u.l->n != 2) return jx_error(e, "%s: expected key/value pairs", name);
                    if (jx_dict_set(e, d, pair.u.l->v[0], pair.u.l->v[1])) return -1;
                }
            } else {
                return jx_error(e, "%s: expected a mapping, got %s", name, jx_type_name(p));
            }
        }
        for (int i = 0; i < a->n_kw; i++)
            if (jx_dict_set(e, d, jv_strv(a->kw_names[i]), a->kw[i])) return -1;
        *out = jv_dictv(d);
        return 0;
    }
    if (!strcmp(name, "raise_exception")) {
        jstr *msg, *empty = jx_cstr(e, "");
        if (!empty || jx_to_str(e, jx_arg(a, 0, "message", jv_strv(empty)), &msg)) return -1;
        if (e->status == WGML_OK) {
            snprintf(e->msg, sizeof e->msg, "%s", msg->s);
            e->status = WGML_ERR_TEMPLATE;
            e->raised = 1;
        }
        return -1;
    }
    if (!strcmp(name, "strftime_now")) {
        jstr *fmt;
        if (jx_want_str(e, jx_arg(a, 0, "format", jv_none()), "strftime_now", &fmt)) return -1;
        return strftime_now(e, fmt, out);
    }
    return jx_error(e, "unknown function '%.60s'", name);
}
