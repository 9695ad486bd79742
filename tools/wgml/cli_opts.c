/*
 * cli_opts.c - the option parser the wgml subcommands share, and the option
 * tables several of them include (see "options" in cli.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"

/* CLI_CHOICE stores an int: the enums it fills must be int-sized. */
_Static_assert(sizeof(wgml_backend_kind) == sizeof(int) && sizeof(wgml_kv_type) == sizeof(int) &&
                   sizeof(wgml_speak_split) == sizeof(int),
               "enums filled by CLI_CHOICE are int-sized");

/* ---- shared tables ---- */

static const cli_choice backends[] = {
    {"auto", WGML_BACKEND_AUTO}, {"cpu", WGML_BACKEND_CPU}, {"webgpu", WGML_BACKEND_WEBGPU}, {NULL, 0}};

const cli_choice cli_kv_types[] = {{"auto", WGML_KV_DEFAULT}, {"f16", WGML_KV_F16}, {"f32", WGML_KV_F32}, {NULL, 0}};

/* --adapter names a WebGPU adapter: the backend is webgpu unless one was chosen before it */
static int set_adapter(void *base, const char *opt, const char *value) {
    (void)opt;
    cli_model_opts *o = base;
    o->adapter = value;
    if (o->backend == WGML_BACKEND_AUTO) o->backend = WGML_BACKEND_WEBGPU;
    return 1;
}

const cli_opt cli_backend_table[] = {
    CLI_CHOICE("--backend", NULL, cli_model_opts, backend, "B", backends,
               "auto (hardware GPU, else CPU), cpu or webgpu (default auto)"),
    CLI_FN("--adapter", NULL, "NAME", set_adapter, "WebGPU adapter whose name contains NAME (e.g. llvmpipe, swiftshader)"),
    CLI_END,
};

const cli_opt cli_device_table[] = {
    {.kind = CLI_OPT_INCLUDE, .table = cli_backend_table},
    CLI_INT("--threads", "-t", cli_model_opts, threads, "N", 1, 512, "CPU threads (default: one per core)"),
    CLI_END,
};

const cli_opt cli_model_table[] = {
    CLI_STRING("--model", "-m", cli_model_opts, model, "FILE",
               "GGUF model (default: $WGML_MODEL, else the shipped stories260K.gguf)"),
    {.kind = CLI_OPT_INCLUDE, .table = cli_device_table},
    CLI_END,
};

const cli_opt cli_sampling_table[] = {
    CLI_FLOAT("--temp", NULL, cli_sampling_opts, sp.temperature, "T", 0, 100, "temperature; 0 = greedy (default 0.8)"),
    CLI_INT("--top-k", NULL, cli_sampling_opts, sp.top_k, "K", 0, 1 << 30,
            "keep the K most likely tokens; 0 = off (default 40)"),
    CLI_FLOAT("--top-p", NULL, cli_sampling_opts, sp.top_p, "P", 1e-9, 1,
              "nucleus sampling threshold; 1 = off (default 0.95)"),
    CLI_FLOAT("--min-p", NULL, cli_sampling_opts, sp.min_p, "P", 0, 1,
              "drop tokens below P x the best one's probability (default 0.05)"),
    CLI_FLOAT("--repeat-penalty", NULL, cli_sampling_opts, sp.repeat_penalty, "R", 1e-3, 100,
              "penalty for recently seen tokens; 1 = off (default 1)"),
    CLI_INT("--repeat-last-n", NULL, cli_sampling_opts, sp.repeat_last_n, "N", 0, 1 << 20,
            "how many recent tokens the penalty considers (default 64)"),
    {.kind = CLI_OPT_U64, .name = "--seed", .off = CLI_OFF_(cli_sampling_opts, sp.seed, uint64_t),
     .given = 1 + offsetof(cli_sampling_opts, seed_set), .metavar = "S",
     .help = "random seed (default: from the clock)"},
    CLI_STRING("--grammar", NULL, cli_sampling_opts, grammar, "FILE",
               "the text must follow this GBNF grammar (docs/grammar.md)"),
    CLI_STRING("--json-schema", NULL, cli_sampling_opts, schema, "FILE",
               "the text must be a JSON document valid under this JSON Schema"),
    CLI_END,
};

int cli_sampling_grammar(const cli_sampling_opts *s, wgml_grammar **out) {
    *out = NULL;
    if (!s->grammar && !s->schema) return 0;
    if (s->grammar && s->schema) {
        cli_fail("--grammar and --json-schema cannot both be given");
        return -1;
    }
    const char *path = s->grammar ? s->grammar : s->schema;
    FILE *f = fopen(path, "rb");
    if (!f) {
        cli_fail("cannot open '%s': %s", path, strerror(errno));
        return -1;
    }
    size_t cap = 1 << 16, n = 0, r;
    char *text = malloc(cap);
    while (text && (r = fread(text + n, 1, cap - n, f)) > 0) {
        n += r;
        if (n == cap) {
            if (cap >= ((size_t)64 << 20)) { /* far above what a grammar or schema can be */
                free(text);
                text = NULL;
                break;
            }
            char *t = realloc(text, cap *= 2);
            if (!t) free(text);
            text = t;
        }
    }
    const int bad = ferror(f);
    fclose(f);
    if (!text || bad) {
        free(text);
        cli_fail("cannot read '%s'%s", path, bad ? "" : ": too large or out of memory");
        return -1;
    }
    wgml_error err;
    wgml_status st = s->grammar ? wgml_grammar_create(text, n, out, &err) : wgml_grammar_from_json_schema(text, n, out, &err);
    free(text);
    if (st) {
        cli_fail("%s: %s", path, err.message);
        return -1;
    }
    return 0;
}

int cli_sampling_seed(cli_sampling_opts *s) {
    if (s->seed_set) return 0;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    s->sp.seed = (uint64_t)ts.tv_sec * 1000003u ^ (uint64_t)ts.tv_nsec;
    return 1;
}

/* ---- parsing ---- */

/* The entry spelled arg in table t (and the tables it includes), with *base
 * advanced by the offsets of the includes on the way; NULL if none. */
static const cli_opt *find(const cli_opt *t, const char *arg, size_t *base) {
    for (; t->kind != CLI_OPT_END; t++) {
        if (t->kind == CLI_OPT_INCLUDE) {
            size_t b = *base + t->off;
            const cli_opt *o = find(t->table, arg, &b);
            if (o) {
                *base = b;
                return o;
            }
        } else if (t->kind != CLI_OPT_GROUP && (!strcmp(arg, t->name) || (t->alt && !strcmp(arg, t->alt)))) {
            return t;
        }
    }
    return NULL;
}

/* "a, b or c" of a choice list into buf. */
static const char *choice_list(const cli_choice *c, char *buf, size_t cap) {
    size_t n = 0;
    buf[0] = '\0';
    for (int i = 0; c[i].name && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%s", i ? (c[i + 1].name ? ", " : " or ") : "", c[i].name);
    return buf;
}

static const cli_choice *choice_find(const cli_choice *c, const char *s) {
    for (; c->name; c++)
        if (!strcmp(c->name, s)) return c;
    return NULL;
}

/* Stores the value v of option o (spelled opt) into the struct at base: 1, or 0 after an error. */
static int store(const cli_opt *o, char *base, const char *opt, const char *v) {
    void *dst = base + o->off;
    long long n;
    double d;
    switch (o->kind) {
    case CLI_OPT_FLAG: *(int *)dst = (int)o->lo; break;
    case CLI_OPT_INT:
        if (!cli_parse_int(opt, v, o->lo, o->hi, &n)) return 0;
        *(int *)dst = (int)n;
        break;
    case CLI_OPT_U64: {
        char *end;
        errno = 0;
        unsigned long long u = strtoull(v, &end, 10);
        if (!*v || *end || strchr(v, '-') || errno)
            return cli_usage_error("%s needs a non-negative integer, got '%s'", opt, v), 0;
        *(uint64_t *)dst = u;
        break;
    }
    case CLI_OPT_FLOAT:
        if (!cli_parse_float(opt, v, o->flo, o->fhi, &d)) return 0;
        *(float *)dst = (float)d;
        break;
    case CLI_OPT_STRING: *(const char **)dst = v; break;
    case CLI_OPT_CHOICE:
    case CLI_OPT_WORD: {
        const cli_choice *c = choice_find(o->choices, v);
        char list[256];
        if (!c) return cli_usage_error("%s needs %s, got '%s'", opt, choice_list(o->choices, list, sizeof list), v), 0;
        if (o->kind == CLI_OPT_CHOICE) *(int *)dst = c->value;
        else *(const char **)dst = v;
        break;
    }
    case CLI_OPT_LIST: {
        int *n_values = (int *)(base + o->count);
        if (o->fn && !o->fn(base, opt, v)) return 0;
        if (*n_values >= o->hi) return cli_usage_error("%s may be given at most %lld times", opt, o->hi), 0;
        ((const char **)dst)[(*n_values)++] = v;
        break;
    }
    case CLI_OPT_FN:
        if (!o->fn(base, opt, v)) return 0;
        break;
    default: return 0;
    }
    if (o->given) *(int *)(base + o->given - 1) = 1;
    return 1;
}

int cli_parse(const cli_spec *spec, void *opts, int argc, char **argv, int *n_args) {
    int n = 0, options = 1;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!options || a[0] != '-' || !a[1]) {
            if (spec->max_args >= 0 && n >= spec->max_args) {
                if (spec->max_args == 0) cli_usage_error("unexpected argument '%s'", a);
                else cli_usage_error("%s", spec->too_many ? spec->too_many : "too many arguments");
                return CLI_USAGE;
            }
            argv[n++] = argv[i]; /* n <= i: a slot already read */
            continue;
        }
        if (spec->dashdash && !strcmp(a, "--")) {
            options = 0;
            continue;
        }
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            cli_help(spec, stdout);
            return CLI_OK;
        }
        size_t base = 0;
        const cli_opt *o = find(spec->opts, a, &base);
        if (!o) {
            cli_usage_error("unknown option '%s'%s", a,
                            spec->dashdash ? " (arguments that start with '-' go after --)" : "");
            return CLI_USAGE;
        }
        const char *v = NULL;
        if (o->kind != CLI_OPT_FLAG) {
            if (i + 1 >= argc) {
                cli_usage_error("option %s needs a value (%s)", a, o->metavar ? o->metavar : "");
                return CLI_USAGE;
            }
            v = argv[++i];
        }
        if (!store(o, (char *)opts + base, a, v)) return CLI_USAGE;
    }
    if (n_args) *n_args = n;
    return -1;
}

/* ---- help ---- */

/* "  -t, --threads N": the left column of an entry. */
static size_t left(const cli_opt *o, char *buf, size_t cap) {
    int k = snprintf(buf, cap, "  %s%s%s%s%s", o->alt ? o->alt : "", o->alt ? ", " : "", o->name,
                     o->metavar ? " " : "", o->metavar ? o->metavar : "");
    return k < 0 ? 0 : (size_t)k;
}

/* The widest left column of at most `most` characters. */
static size_t width(const cli_opt *t, size_t most) {
    size_t w = 0;
    char buf[256];
    for (; t->kind != CLI_OPT_END; t++) {
        size_t k = t->kind == CLI_OPT_INCLUDE ? width(t->table, most)
                   : t->kind == CLI_OPT_GROUP || !t->help ? 0
                                                          : left(t, buf, sizeof buf);
        if (k <= most && k > w) w = k;
    }
    return w;
}

/* Text whose lines after the first are indented by col. */
static void indented(FILE *f, const char *s, size_t col) {
    for (const char *nl; (nl = strchr(s, '\n')); s = nl + 1)
        fprintf(f, "%.*s\n%*s", (int)(nl - s), s, (int)col, "");
    fprintf(f, "%s\n", s);
}

static void entries(FILE *f, const cli_opt *t, size_t col) {
    char buf[256];
    for (; t->kind != CLI_OPT_END; t++) {
        if (t->kind == CLI_OPT_INCLUDE) {
            entries(f, t->table, col);
        } else if (t->kind == CLI_OPT_GROUP) {
            fprintf(f, "\n%s\n", t->help);
        } else if (t->help) {
            size_t k = left(t, buf, sizeof buf);
            if (k + 2 > col) fprintf(f, "%s\n%*s", buf, (int)col, ""); /* too wide: the help on the next line */
            else fprintf(f, "%-*s", (int)col, buf);
            indented(f, t->help, col);
        }
    }
}

void cli_help(const cli_spec *spec, FILE *f) {
    fputs(spec->usage, f);
    if (spec->about) fputs(spec->about, f);
    fputc('\n', f);
    size_t col = width(spec->opts, 26) + 2;
    if (col < 16) col = 16;
    fprintf(f, "%-*s%s\n", (int)col, "  -h, --help", "print this help");
    entries(f, spec->opts, col);
    if (spec->more) fputs(spec->more, f);
}
