/*
 * cli_util.c - see cli.h.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

const char *cli_cmd = "";
const char *cli_argv0 = "wgml";

static void vmsg(const char *fmt, va_list ap) {
    cli_line_start();
    fprintf(stderr, "wgml%s%s: ", *cli_cmd ? " " : "", cli_cmd);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

int cli_usage_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vmsg(fmt, ap);
    va_end(ap);
    fprintf(stderr, "run 'wgml %s --help' for usage\n", *cli_cmd ? cli_cmd : "");
    return CLI_USAGE;
}

int cli_fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vmsg(fmt, ap);
    va_end(ap);
    return CLI_FAIL;
}

int cli_fail_err(const wgml_error *err) { return cli_fail("%s (%s)", err->message, wgml_status_name(err->code)); }

int cli_fail_errf(const wgml_error *err, const char *fmt, ...) {
    char prefix[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    return cli_fail("%s: %s (%s)", prefix, err->message, wgml_status_name(err->code));
}

int cli_parse_int(const char *opt, const char *s, long long lo, long long hi, long long *out) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (!*s || *end || errno || v < lo || v > hi) {
        cli_usage_error("%s needs an integer %lld..%lld, got '%s'", opt, lo, hi, s);
        return 0;
    }
    *out = v;
    return 1;
}

int cli_parse_float(const char *opt, const char *s, double lo, double hi, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (!*s || *end || errno || isnan(v) || v < lo || v > hi) {
        cli_usage_error("%s needs a number %g..%g, got '%s'", opt, lo, hi, s);
        return 0;
    }
    *out = v;
    return 1;
}

/* The folder holding the running executable, or "" when it cannot be found. */
static const char *exe_dir(void) {
    static char dir[4096];
    if (!dir[0]) {
        ssize_t n = readlink("/proc/self/exe", dir, sizeof dir - 1);
        if (n <= 0) return "";
        dir[n] = '\0';
        char *slash = strrchr(dir, '/');
        if (slash) *slash = '\0';
    }
    return dir;
}

/* The folders searched for shipped data, in order (see cli.h). */
static int data_dirs(const char *dirs[4], char buf[2][4200]) {
    int n = 0;
    const char *env = getenv("WGML_DATA_DIR");
    if (env && *env) dirs[n++] = env;
#ifdef WGML_INSTALL_DATADIR
    dirs[n++] = WGML_INSTALL_DATADIR;
#endif
    const char *exe = exe_dir();
    if (*exe) {
#ifndef WGML_INSTALL_DATADIR_FROM_BINDIR
#define WGML_INSTALL_DATADIR_FROM_BINDIR "../share/wgml"
#endif
        /* the same data folder relative to the executable: a tree installed elsewhere, or moved */
        snprintf(buf[0], sizeof buf[0], "%s/" WGML_INSTALL_DATADIR_FROM_BINDIR, exe);
        dirs[n++] = buf[0];
        snprintf(buf[1], sizeof buf[1], "%s/../models", exe); /* the source tree: build/wgml */
        dirs[n++] = buf[1];
    }
    return n;
}

const char *cli_data_file(const char *name) {
    static char found[4][4400];
    static int slot;
    const char *dirs[4];
    char buf[2][4200];
    int n = data_dirs(dirs, buf);
    for (int i = 0; i < n; i++) {
        char *path = found[slot & 3];
        snprintf(path, sizeof found[0], "%s/%s", dirs[i], name);
        if (access(path, R_OK) == 0) {
            slot++;
            return path;
        }
    }
    char where[8192];
    size_t len = 0;
    where[0] = '\0';
    for (int i = 0; i < n && len < sizeof where; i++)
        len += (size_t)snprintf(where + len, sizeof where - len, "%s%s", i ? ", " : "", dirs[i]);
    cli_fail("%s is not in any data folder (searched %s); set WGML_DATA_DIR or name a file", name, where);
    return NULL;
}

const char *cli_default_model(void) {
    const char *env = getenv("WGML_MODEL");
    if (env && *env) return env;
    return cli_data_file(WGML_DEFAULT_MODEL);
}

static int out_mid_line;

void cli_out(const char *text, size_t len) {
    if (!len) return;
    fwrite(text, 1, len, stdout);
    fflush(stdout);
    out_mid_line = text[len - 1] != '\n';
}

/* 1 when stdout and stderr are one terminal (the same device). */
static int same_terminal(void) {
    struct stat a, b;
    return isatty(STDOUT_FILENO) && isatty(STDERR_FILENO) && fstat(STDOUT_FILENO, &a) == 0 &&
           fstat(STDERR_FILENO, &b) == 0 && a.st_rdev == b.st_rdev;
}

void cli_line_start(void) {
    if (out_mid_line && same_terminal()) {
        fputc('\n', stdout);
        fflush(stdout);
        out_mid_line = 0;
    }
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double cli_median(const double *v, int n) {
    double c[64];
    if (n <= 0) return 0;
    n = n < 64 ? n : 64;
    memcpy(c, v, (size_t)n * sizeof *c);
    qsort(c, (size_t)n, sizeof *c, cmp_double);
    return c[n / 2];
}

double cli_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

void cli_progress_begin(cli_progress *p, const char *label) {
    p->label = label;
    p->active = isatty(STDERR_FILENO);
    p->last_permille = -1;
    p->t0 = cli_now_ms();
    p->bytes = 0;
    p->bytes_at_start = 0;
    p->stage = -1;
}

void cli_progress_update(cli_progress *p, uint64_t done, uint64_t total) {
    if (!p->active || total == 0) return;
    int permille = (int)(done * 1000 / total);
    if (permille == p->last_permille) return;
    p->last_permille = permille;
    const int width = 30;
    int fill = permille * width / 1000;
    char bar[64];
    for (int i = 0; i < width; i++) bar[i] = i < fill ? '#' : '.';
    bar[width] = '\0';
    double s = (cli_now_ms() - p->t0) / 1e3;
    if (p->bytes) /* a download: how much of how much, and how fast */
        fprintf(stderr, "\r%-11s [%s] %5.1f%% %8.1f / %.1f MiB %6.1f MiB/s\033[K", p->label, bar, permille / 10.0,
                done / 1048576.0, total / 1048576.0, s > 0.05 ? (done - p->bytes_at_start) / 1048576.0 / s : 0.0);
    else
        fprintf(stderr, "\r%-10s [%s] %5.1f%% %6.1fs", p->label, bar, permille / 10.0, s);
    fflush(stderr);
}

void cli_progress_end(cli_progress *p) {
    if (p->active && p->last_permille >= 0) fprintf(stderr, "\r\033[K");
    p->last_permille = -1;
}

int cli_progress_cb(void *user, const char *stage, uint64_t done, uint64_t total) {
    cli_progress *p = user;
    /* the stages of wgml_model_params.progress, in order: a model by URL's download and check
     * (wgml_model_fetch), the weights, then the GPU kernels the model used before */
    static const char *const stages[][2] = {
        {"download", "downloading"}, {"verify", "verifying"}, {"load", "loading"}, {"compile", "compiling"}};
    for (int i = 0; stage && i < (int)(sizeof stages / sizeof *stages); i++)
        if (!strcmp(stage, stages[i][0]) && p->stage != i) {
            p->stage = i;
            cli_progress_end(p);
            p->label = stages[i][1];
            p->bytes = i == 0;
            p->bytes_at_start = p->bytes ? done : 0; /* a resumed download's bytes from before */
            p->t0 = cli_now_ms();
        }
    cli_progress_update(p, done, total);
    return 0;
}

const char *cli_fetch_model(const char *model, char *buf, size_t cap) {
    if (!model || !wgml_model_is_remote(model)) return model;
    cli_progress bar;
    cli_progress_begin(&bar, "downloading");
    wgml_fetch_params fp = wgml_fetch_default_params();
    fp.progress = cli_progress_cb, fp.progress_user = &bar, fp.log = cli_log_cb;
    wgml_error err;
    wgml_status st = wgml_model_fetch(model, &fp, buf, cap, &err);
    cli_progress_end(&bar);
    if (st) {
        cli_fail_err(&err);
        return NULL;
    }
    return buf;
}

void cli_log_cb(void *user, const char *line) {
    (void)user;
    cli_line_start();
    fprintf(stderr, "wgml: %s\n", line);
}

int cli_read_lines(const char *path, char ***lines) {
    *lines = NULL;
    FILE *fp = fopen(path, "rb");
    if (!fp) return cli_fail("cannot open '%s'", path), -1;
    size_t cap = 1 << 16, len = 0, r;
    char *buf = malloc(cap + 1);
    while (buf && (r = fread(buf + len, 1, cap - len, fp)) > 0) {
        len += r;
        if (len == cap) {
            char *nb = realloc(buf, (cap *= 2) + 1);
            if (!nb) free(buf);
            buf = nb;
        }
    }
    int bad = ferror(fp);
    fclose(fp);
    if (!buf || bad) {
        free(buf);
        return cli_fail("cannot read '%s'", path), -1;
    }
    if (memchr(buf, 0, len)) {
        free(buf);
        return cli_fail("'%s' contains a NUL byte; it must be text, one item per line", path), -1;
    }
    buf[len] = '\0';
    if (len == 0) {
        free(buf);
        *lines = calloc(1, sizeof **lines);
        return *lines ? 0 : (cli_fail("out of memory reading '%s'", path), -1);
    }
    size_t n = 1;
    for (size_t i = 0; i < len; i++) n += buf[i] == '\n';
    char **v = malloc((n + 1) * sizeof *v);
    if (!v) {
        free(buf);
        return cli_fail("out of memory reading '%s'", path), -1;
    }
    size_t k = 0;
    for (char *p = buf;;) {
        char *e = strchr(p, '\n');
        if (e) *e = '\0';
        size_t l = strlen(p);
        if (l && p[l - 1] == '\r') p[l - 1] = '\0';
        v[k++] = p;
        if (!e) break;
        p = e + 1;
        if (!*p) break; /* the final line end */
    }
    v[k] = NULL;
    *lines = v;
    return (int)k;
}

void cli_lines_free(char **lines) {
    if (!lines) return;
    free(lines[0]);
    free(lines);
}

int cli_items(const char **args, int n_args, const char *file, const char *what, const char *const **items,
              char ***lines) {
    *lines = NULL;
    *items = args;
    if (!!file == !!n_args) return -cli_usage_error("give the %s as arguments or -f FILE (one of them)", what);
    if (!file) return n_args;
    int n = cli_read_lines(file, lines);
    if (n < 0) return -CLI_FAIL;
    *items = (const char *const *)*lines;
    return n;
}

wgml_model *cli_load_model(const cli_model_opts *o, double *load_ms) {
    wgml_model_params mp = wgml_model_default_params();
    cli_progress bar;
    cli_progress_begin(&bar, "loading");
    mp.backend = o->backend;
    mp.adapter = o->adapter;
    mp.n_threads = o->threads;
    mp.progress = cli_progress_cb;
    mp.progress_user = &bar;
    mp.log = cli_log_cb;
    wgml_model *m = NULL;
    wgml_error err;
    const char *path = o->model ? o->model : cli_default_model();
    if (!path) return NULL;
    double t0 = cli_now_ms();
    wgml_status st = wgml_model_load(path, &mp, &m, &err);
    cli_progress_end(&bar);
    if (load_ms) *load_ms = cli_now_ms() - t0;
    if (st) {
        cli_fail_err(&err);
        return NULL;
    }
    return m;
}

/* ---- audio files ---- */

static void put_u32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static void put_u16(unsigned char *p, uint16_t v) { p[0] = (unsigned char)v, p[1] = (unsigned char)(v >> 8); }

size_t cli_wav_header(unsigned char *h, int64_t n, int rate, int f32) {
    const uint32_t bps = f32 ? 4 : 2, fmt_size = f32 ? 18 : 16;
    const uint32_t data = n < 0 ? 0xFFFFFFFFu : (uint32_t)n * bps;
    size_t k;
    memcpy(h, "RIFF", 4);
    put_u32(h + 4, n < 0 ? 0xFFFFFFFFu : 4 + (8 + fmt_size) + (f32 ? 12 : 0) + 8 + data);
    memcpy(h + 8, "WAVEfmt ", 8);
    put_u32(h + 16, fmt_size);
    put_u16(h + 20, f32 ? 3 : 1); /* WAVE_FORMAT_IEEE_FLOAT, WAVE_FORMAT_PCM */
    put_u16(h + 22, 1);           /* mono */
    put_u32(h + 24, (uint32_t)rate);
    put_u32(h + 28, (uint32_t)rate * bps);
    put_u16(h + 32, (uint16_t)bps);
    put_u16(h + 34, (uint16_t)(8 * bps));
    k = 36;
    if (f32) {
        put_u16(h + 36, 0); /* no extension */
        memcpy(h + 38, "fact", 4);
        put_u32(h + 42, 4);
        put_u32(h + 46, n < 0 ? 0xFFFFFFFFu : (uint32_t)n);
        k = 50;
    }
    memcpy(h + k, "data", 4);
    put_u32(h + k + 4, data);
    return k + 8;
}

void cli_audio_bytes(const float *x, int64_t n, int f32, unsigned char *out) {
    for (int64_t j = 0; j < n; j++) {
        float v = x[j];
        if (f32) {
            uint32_t u;
            memcpy(&u, &v, 4);
            put_u32(out + 4 * j, u);
        } else {
            v = v != v ? 0 : v > 1 ? 1 : v < -1 ? -1 : v;
            put_u16(out + 2 * j, (uint16_t)(int16_t)lrintf(v * 32767.0f));
        }
    }
}
