/*
 * cmd_verify.c - `wgml verify`: proves a WebGPU device computes what the CPU
 * reference computes.
 *
 * 1. Every op over a grid of shapes and weight types (opcheck.c), compared
 *    with the exact CPU reference.
 * 2. End to end: a model (stories260K by default) generates 64 tokens
 *    greedily on the CPU; the device then decodes the same tokens one by one
 *    and at every position its top-1 token must agree with the CPU's and its
 *    logits must stay within a tolerance.
 * Prints a PASS/FAIL table and exits non-zero on any failure.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/opcheck.h"
#include "core/dtype.h"
#include "cli.h"

static const char *help =
    "usage: wgml verify [--adapter NAME] [options]\n"
    "Checks a WebGPU device op by op and end to end against the CPU reference.\n\n"
    "  --adapter NAME   adapter whose name contains NAME (default: the best hardware adapter)\n"
    "  -m, --model FILE model for the end-to-end check (default: $WGML_MODEL, else the shipped\n"
    "                   stories260K.gguf)\n"
    "  --quick          a smaller op grid\n"
    "  --op NAME        only ops whose name contains NAME (e.g. matmul, attention)\n"
    "  --type T[,T...]  only matmul and get_rows cases with weights of these types (e.g. Q4_K)\n"
    "  --no-e2e         skip the end-to-end check\n"
    "  --f32            use the f32 tier even if the adapter has shader-f16\n"
    "  --no-subgroups   use workgroup-memory reductions even if the adapter has subgroups\n"
    "  --verbose        print passing cases too (default: failures and a summary per op)\n";

typedef struct {
    int verbose;
    int passed, failed;
    const char *last_op;
    int op_pass, op_fail;
    double op_worst;
} table;

static void flush_op(table *t) {
    if (!t->last_op) return;
    if (!t->verbose)
        printf("%-10s %-58s %9.2e %8s %s\n", t->last_op, "(all cases)", t->op_worst, "", t->op_fail ? "FAIL" : "PASS");
    t->op_pass = t->op_fail = 0;
    t->op_worst = 0;
}

static void row(void *user, const wgml_opcheck_result *r) {
    table *t = user;
    if (t->last_op && strcmp(t->last_op, r->op)) flush_op(t);
    t->last_op = r->op;
    r->pass ? (t->passed++, t->op_pass++) : (t->failed++, t->op_fail++);
    if (r->err > t->op_worst) t->op_worst = r->err;
    if (t->verbose || !r->pass) {
        printf("%-10s %-58s %9.2e %8.0e %s\n", r->op, r->config, r->err, r->tol, r->pass ? "PASS" : "FAIL");
        if (r->status) printf("           error: %s\n", r->message);
    }
    fflush(stdout);
}

static int argmax(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

typedef struct {
    int32_t ids[128];
    int n;
} tokens;

static int collect(void *user, int32_t token, const char *text, size_t len) {
    (void)text, (void)len;
    tokens *t = user;
    if (token >= 0 && t->n < 128) t->ids[t->n++] = token;
    return 0;
}

/* Greedy 64 tokens on the CPU, then a forced decode of them on the device. */
static int end_to_end(const char *model_path, const char *adapter, unsigned flags, table *t) {
    wgml_model_params cp = wgml_model_default_params(), gp = cp;
    cp.backend = WGML_BACKEND_CPU;
    gp.backend = WGML_BACKEND_WEBGPU;
    gp.adapter = adapter;
    gp.webgpu_flags = flags;
    wgml_model *cm = NULL, *gm = NULL;
    wgml_session *cs = NULL, *gs = NULL;
    wgml_error err;
    int ok = 0;
    char cfg[200];
    const char *base = strrchr(model_path, '/');
    snprintf(cfg, sizeof cfg, "%s, 64-token forced decode", base ? base + 1 : model_path);
    tokens seq = {{0}, 0};
    float *cl = NULL;
    if (wgml_model_load(model_path, &cp, &cm, &err) || wgml_model_load(model_path, &gp, &gm, &err) ||
        wgml_session_create(cm, NULL, &cs, &err) || wgml_session_create(gm, NULL, &gs, &err)) {
        printf("%-10s %-58s %9s %8s FAIL\n           error: %s\n", "e2e", cfg, "-", "", err.message);
        goto done;
    }
    wgml_model_info info;
    wgml_model_get_info(cm, &info);
    int32_t prompt[16];
    int np = wgml_tokenize(cm, "Once upon a time", 16, 1, prompt, 16, &err);
    wgml_generate_params g = wgml_generate_default_params();
    g.n_predict = 64 - (np > 0 ? np : 0);
    g.sampler.temperature = 0;
    g.on_token = collect;
    g.user = &seq;
    memcpy(seq.ids, prompt, (size_t)(np > 0 ? np : 0) * sizeof *prompt);
    seq.n = np > 0 ? np : 0;
    if (np <= 0 || wgml_generate(cs, "Once upon a time", &g, NULL, &err)) {
        printf("%-10s %-58s %9s %8s FAIL\n           error: %s\n", "e2e", cfg, "-", "", err.message);
        goto done;
    }
    wgml_session_reset(cs);
    cl = malloc((size_t)info.n_vocab * sizeof *cl);
    int agree = 0;
    double worst = 0, scale = 0;
    for (int i = 0; i < seq.n; i++) {
        if (wgml_session_eval(cs, &seq.ids[i], 1, &err) || wgml_session_eval(gs, &seq.ids[i], 1, &err)) {
            printf("%-10s %-58s %9s %8s FAIL\n           error: %s\n", "e2e", cfg, "-", "", err.message);
            goto done;
        }
        memcpy(cl, wgml_session_logits(cs), (size_t)info.n_vocab * sizeof *cl);
        const float *gl = wgml_session_logits(gs);
        agree += argmax(cl, info.n_vocab) == argmax(gl, info.n_vocab);
        for (int v = 0; v < info.n_vocab; v++) {
            worst = fmax(worst, fabs((double)cl[v] - gl[v]));
            scale = fmax(scale, fabs((double)cl[v]));
        }
    }
    double rel = worst / (1 + scale), tol = 5e-3;
    ok = agree == seq.n && rel <= tol;
    char res[300];
    snprintf(res, sizeof res, "%s: top-1 %d/%d, max |logit diff| %.2e", cfg, agree, seq.n, worst);
    printf("%-10s %-58s %9.2e %8.0e %s\n", "e2e", res, rel, tol, ok ? "PASS" : "FAIL");
done:
    ok ? t->passed++ : t->failed++;
    free(cl);
    wgml_session_free(cs);
    wgml_session_free(gs);
    wgml_model_free(cm);
    wgml_model_free(gm);
    return ok;
}

int cmd_verify(int argc, char **argv) {
    const char *adapter = NULL, *model = NULL, *filter = NULL, *type = NULL;
    char types[256];
    int quick = 0, e2e = 1, f32 = 0, no_sg = 0, verbose = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(help, stdout);
            return CLI_OK;
        } else if (!strcmp(a, "--adapter")) {
            if (!(adapter = cli_value(argc, argv, &i))) return CLI_USAGE;
        } else if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            if (!(model = cli_value(argc, argv, &i))) return CLI_USAGE;
        } else if (!strcmp(a, "--op")) {
            if (!(filter = cli_value(argc, argv, &i))) return CLI_USAGE;
        } else if (!strcmp(a, "--type")) {
            const char *list = cli_value(argc, argv, &i);
            if (!list) return CLI_USAGE;
            /* each name checked, and rewritten in its canonical spelling */
            size_t len = 0;
            for (const char *p = list; *p;) {
                char name[32];
                size_t n = strcspn(p, ",");
                snprintf(name, sizeof name, "%.*s", (int)(n < sizeof name ? n : sizeof name - 1), p);
                int t = wgml_dtype_from_name(name);
                if (t < 0 || n >= sizeof name) return cli_usage_error("unknown tensor type '%.*s'", (int)n, p);
                len += (size_t)snprintf(types + len, sizeof types - len, "%s%s", len ? "," : "",
                                        wgml_dtype_name((uint32_t)t));
                if (len >= sizeof types) return cli_usage_error("--type: too many types");
                p += n + (p[n] == ',');
            }
            if (!len) return cli_usage_error("--type needs a type name");
            type = types;
        } else if (!strcmp(a, "--quick")) {
            quick = 1;
        } else if (!strcmp(a, "--no-e2e")) {
            e2e = 0;
        } else if (!strcmp(a, "--f32")) {
            f32 = 1;
        } else if (!strcmp(a, "--no-subgroups")) {
            no_sg = 1;
        } else if (!strcmp(a, "--verbose")) {
            verbose = 1;
        } else {
            return cli_usage_error("unknown option '%s'", a);
        }
    }
    wgml_webgpu_options wo = {.adapter = adapter, .allow_software = adapter != NULL, .force_f32 = f32,
                              .no_subgroups = no_sg};
    wgml_backend *dev = NULL, *ref = NULL;
    wgml_error err;
    if (wgml_backend_webgpu_create(&wo, &dev, &err)) return cli_fail_err(&err);
    if (wgml_backend_cpu_create_exact(0, &ref, &err)) {
        dev->free(dev);
        return cli_fail_err(&err);
    }
    printf("device: %s (KV cache %s%s)\n", dev->device_name, dev->kv_type == WGML_F16 ? "f16, shader-f16 tier" : "f32, f32 tier",
           no_sg ? ", no subgroups" : "");
    printf("%-10s %-58s %9s %8s %s\n", "op", "case", "error", "tol", "result");
    table t = {.verbose = verbose};
    wgml_opcheck_options oo = {.quick = quick, .filter = filter, .type = type};
    wgml_opcheck_run(dev, ref, &oo, row, &t);
    flush_op(&t);
    dev->free(dev);
    ref->free(ref);
    if (e2e && !filter && !type) {
        if (!model && !(model = cli_default_model())) t.failed++;
        else end_to_end(model, adapter, (f32 ? WGML_WEBGPU_NO_F16 : 0) | (no_sg ? WGML_WEBGPU_NO_SUBGROUPS : 0), &t);
    }
    printf("verify: %d passed, %d failed\n", t.passed, t.failed);
    return t.failed ? CLI_FAIL : CLI_OK;
}
