/*
 * cmd_verify.c - `wgml verify`: proves a device computes what the exact CPU
 * reference computes.
 *
 * The device is a WebGPU adapter, or with --backend cpu the fast CPU backend
 * itself. The reference is the CPU backend in its exact mode
 * (wgml_backend_cpu_create_exact): quantized weights dequantized and dotted
 * with f32 activations. Comparing against the fast CPU backend instead would
 * compare two approximations: it rounds activations to 8 bits for quantized
 * weights, which a GPU does not, and their difference on a real quantized
 * model is larger than any tolerance that still catches a bug.
 *
 * 1. Every op over a grid of shapes and weight types (opcheck.c).
 * 2. End to end: a model (stories260K by default) runs on both, in lock
 *    step: the prompt in one batch, then tokens decoded one by one, each the
 *    reference's greedy choice, to 64 positions (-n). At every position the device's
 *    logits must stay within a tolerance of the reference's, and its top-1
 *    token must agree wherever the reference's top-2 margin exceeds that
 *    tolerance (closer calls are genuine near-ties). The reference's KV cache
 *    has the device's type, so that the comparison measures the device's
 *    arithmetic (an f16 cache is a tier's choice; the op grid checks the
 *    rows it writes). The tolerance is what a correct device can differ by
 *    (e2e_tolerance below), not what happens to pass.
 * Prints a PASS/FAIL table and exits 1 on any failure.
 *
 * WGML_VERIFY_FAULT=TENSOR[:FACTOR[:BLOCK]] plants a bug on the device only:
 * the weight TENSOR reaches it with the f16 scale of one block (default the
 * first) multiplied by FACTOR (default 1.25), so that tests can show that
 * verify fails a wrong device.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "tools_internal.h"

typedef struct {
    const char *adapter, *model, *filter, *type;
    char types[256]; /* --type's names in their canonical spelling: type points here */
    int quick, e2e, ops, f32, no_sg, verbose, cpu, n_tokens;
} verify_opts;

/* --op: each name must be an op */
static int set_ops(void *base, const char *opt, const char *list) {
    for (const char *p = list; *p;) {
        size_t n = strcspn(p, ",");
        int known = 0;
        for (int op = 0; op < WGML_OP_COUNT; op++)
            known |= strlen(wgml_op_names[op]) == n && !strncmp(p, wgml_op_names[op], n);
        if (!known) {
            char names[512];
            size_t len = 0;
            for (int op = 0; op < WGML_OP_COUNT && len < sizeof names; op++)
                len += (size_t)snprintf(names + len, sizeof names - len, "%s%s", op ? ", " : "", wgml_op_names[op]);
            return cli_usage_error("%s: unknown op '%.*s' (ops: %s)", opt, (int)n, p, names), 0;
        }
        p += n + (p[n] == ',');
    }
    ((verify_opts *)base)->filter = list;
    return 1;
}

/* --type: each name checked, and rewritten in its canonical spelling */
static int set_types(void *base, const char *opt, const char *list) {
    verify_opts *o = base;
    size_t len = 0;
    for (const char *p = list; *p;) {
        char name[32];
        size_t n = strcspn(p, ",");
        snprintf(name, sizeof name, "%.*s", (int)(n < sizeof name ? n : sizeof name - 1), p);
        int t = wgml_dtype_from_name(name);
        if (t < 0 || n >= sizeof name) return cli_usage_error("unknown tensor type '%.*s'", (int)n, p), 0;
        len += (size_t)snprintf(o->types + len, sizeof o->types - len, "%s%s", len ? "," : "",
                                wgml_dtype_name((uint32_t)t));
        if (len >= sizeof o->types) return cli_usage_error("%s: too many types", opt), 0;
        p += n + (p[n] == ',');
    }
    if (!len) return cli_usage_error("%s needs a type name", opt), 0;
    o->type = o->types;
    return 1;
}

static const cli_choice backends[] = {{"webgpu", 0}, {"cpu", 1}, {NULL, 0}};

static const cli_opt options[] = {
    CLI_STRING("--adapter", NULL, verify_opts, adapter, "NAME",
               "adapter whose name contains NAME (default: the best hardware adapter)"),
    CLI_CHOICE("--backend", NULL, verify_opts, cpu, "B", backends, "webgpu (default) or cpu"),
    CLI_STRING("--model", "-m", verify_opts, model, "FILE",
               "model for the end-to-end check (default: $WGML_MODEL, else the shipped\n"
               "stories260K.gguf)"),
    CLI_INT("--tokens", "-n", verify_opts, n_tokens, "N", 2, 4096,
            "positions in the end-to-end check, prompt included (default 64)"),
    CLI_FLAG("--quick", NULL, verify_opts, quick, "a smaller op grid"),
    CLI_FN("--op", NULL, "NAME[,NAME...]", set_ops,
           "only these ops (e.g. matmul, attention; the list is in src/backend/ops.h);\nno e2e"),
    CLI_FN("--type", NULL, "T[,T...]", set_types,
           "only matmul and get_rows cases with weights of these types (e.g. Q4_K);\nno e2e"),
    CLI_FLAG_SET("--no-ops", NULL, verify_opts, ops, 0, "skip the op grid (only the end-to-end check)"),
    CLI_FLAG_SET("--no-e2e", NULL, verify_opts, e2e, 0, "skip the end-to-end check"),
    CLI_FLAG("--f32", NULL, verify_opts, f32, "use the f32 tier even if the adapter has shader-f16"),
    CLI_FLAG("--no-subgroups", NULL, verify_opts, no_sg,
             "use workgroup-memory reductions even if the adapter has subgroups"),
    CLI_FLAG("--verbose", NULL, verify_opts, verbose, "print passing cases too (default: failures and a summary per op)"),
    CLI_END,
};

static const cli_spec spec = {
    .usage = "usage: wgml verify [--adapter NAME | --backend cpu] [options]\n",
    .about = "Checks a device op by op and end to end against the exact CPU reference (quantized\n"
             "weights dequantized, f32 activations). The device is a WebGPU adapter, or with\n"
             "--backend cpu the fast CPU backend, whose 8-bit activations get wider tolerances.\n",
    .opts = options,
    .more = "\nEnd to end, the prompt runs in one batch, then each token is the reference's greedy\n"
            "choice; the reference keeps its KV cache in the device's type. The error is the largest\n"
            "|device - reference| logit over the largest |reference| logit (+1) of its position;\n"
            "top-1 tokens must agree wherever the reference's top-2 margin exceeds the tolerance.\n"
            "The tolerance is what a correct device can differ by: f32 sums in another order, on the\n"
            "shader-f16 tier KV values rounding to the other neighbouring f16, with --backend cpu and\n"
            "quantized weights the 8-bit activations; each run prints its formula and value.\n"
            "Environment: WGML_VERIFY_FAULT=TENSOR[:FACTOR[:BLOCK]] multiplies the scale of one block\n"
            "(default 0) of weight TENSOR by FACTOR (default 1.25) on the device only: a planted bug,\n"
            "to see verify fail.\n",
};

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

/* What the device is and how it was asked to run. */
typedef struct {
    int cpu;           /* the fast CPU backend */
    const char *adapter;
    unsigned flags;    /* WGML_WEBGPU_* */
    int n_tokens;
    wgml_model_load_options fault; /* WGML_VERIFY_FAULT, for the device only */
} device_opts;

/* The end-to-end tolerance, on max |device - reference| / (1 + max |reference|)
 * per position (the error relative to the logits' scale), from what a
 * correct device can differ by:
 *  - f32 sums in another order. A sum of K f32 terms rounds to within about
 *    u sqrt(K) of its scale (u = 2^-24, random-walk growth of sequential
 *    sums; less for the tree sums of GPUs), with K at most max(n_embd, n_ff).
 *    A layer chains 8 reductions (norm, QKV, scores, values, output, norm,
 *    gate/up, down), the head 2 more; their errors add in quadrature and both
 *    sides make them: 2 u sqrt(K) sqrt(8 L + 2). That is an upper bound (the
 *    residual stream damps each layer's share); floored at 1e-5, 170 u, for
 *    the transcendentals (exp, inverse sqrt) that WGSL allows a few ulp.
 *  - An f16 KV cache (the shader-f16 tier). The reference stores the same f16
 *    values, but an element whose f32 value differs by a rounding error can
 *    round to the neighbouring f16 on one side: a flip of one f16 step, up to
 *    2^-10 of the element, or 2^-10 / sqrt(n_kv head_dim) of its K or V row.
 *    The bound is 10 such flips adding up.
 *  - 8-bit activations (the fast CPU backend with quantized weights): each
 *    such matmul is off by 1/(127 sqrt 12) of its blocks' largest |x| in RMS,
 *    0.7% of its output's RMS for a largest |x| of 3 RMS; 4 L + 1 of them
 *    in quadrature, times 5 for the worst logit of a vocabulary and for
 *    outliers: 3.4e-2 sqrt(4 L + 1), at most 0.5. It still catches a wrong
 *    layer, position, head or table, which moves logits by their own size.
 * Measured on correct devices (lavapipe in both tiers, SwiftShader; Q4_K_M,
 * Q5_0, Q8_0 and float models of 1 to 30 layers) the errors stay 10x or
 * more below these bounds; the fast CPU backend's 3x to 25x. A planted bug
 * of 5% in the scale of one block of 256 weights of one matrix
 * (WGML_VERIFY_FAULT) exceeds the f32 bound 10 to 70 times; on the f16 tier,
 * where the flips dominate the bound, one of 25% exceeds it 3 to 15 times. */
static double e2e_tolerance(int act8, uint32_t kv_type, const wgml_model_info *m, char *why, size_t cap) {
    const int L = m->n_layer, K = m->n_ff > m->n_embd ? m->n_ff : m->n_embd, kv_dim = m->n_head_kv * m->head_dim;
    if (act8) {
        snprintf(why, cap, "the device's 8-bit activations in %d matmuls of quantized weights, 3.4e-2 sqrt(4 L + 1)",
                 4 * L + 1);
        return fmin(0.5, 3.4e-2 * sqrt(4.0 * L + 1));
    }
    double t32 = fmax(1e-5, 2 * 0x1p-24 * sqrt((double)K) * sqrt(8.0 * L + 2));
    double t16 = kv_type == WGML_F16 ? 10 * 0x1p-10 / sqrt((double)kv_dim) : 0;
    int n = snprintf(why, cap, "f32 sums in another order, 2 u sqrt(K = %d) sqrt(8 L + 2) = %.1e", K, t32);
    if (t16 > 0 && n > 0 && (size_t)n < cap)
        snprintf(why + n, cap - (size_t)n, ", + f16 KV rounding flips, 10 x 2^-10 / sqrt(%d) = %.1e", kv_dim, t16);
    return t32 + t16;
}

/* Comparison of one position's logits. */
typedef struct {
    int positions, agree, decisive, decisive_agree;
    double worst_rel, worst_abs, tol;
    int worst_pos;
} e2e_stats;

static void compare_logits(e2e_stats *s, const float *ref, const float *dev, int n, int pos) {
    int r1 = 0, r2 = -1, d1 = 0;
    double diff = 0, scale = 0;
    for (int v = 0; v < n; v++) {
        double d = fabs((double)dev[v] - ref[v]);
        if (isnan(d) || isnan(dev[v]) != isnan(ref[v])) d = INFINITY;
        diff = fmax(diff, d);
        scale = fmax(scale, fabs((double)ref[v]));
        if (dev[v] > dev[d1]) d1 = v;
        if (v == 0) continue;
        if (ref[v] > ref[r1]) {
            r2 = r1;
            r1 = v;
        } else if (r2 < 0 || ref[v] > ref[r2]) {
            r2 = v;
        }
    }
    double rel = diff / (1 + scale), margin = r2 < 0 ? INFINITY : (double)ref[r1] - ref[r2];
    s->positions++;
    s->agree += d1 == r1;
    if (margin > s->tol * (1 + scale)) {
        s->decisive++;
        s->decisive_agree += d1 == r1;
    }
    if (rel > s->worst_rel || s->positions == 1) {
        s->worst_rel = rel;
        s->worst_pos = pos;
    }
    s->worst_abs = fmax(s->worst_abs, diff);
}

static int argmax(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

static void e2e_error(const char *cfg, const wgml_error *err) {
    printf("%-10s %-58s %9s %8s FAIL\n           error: %s\n", "e2e", cfg, "-", "", err->message);
}

/* An encoder (task embed or rerank): texts of 3 to ~60 tokens packed in one
 * step, their unnormalized pooled vectors (a reranker: its scores) compared
 * as the logits are, the error relative to 1 + the largest value. */
static int end_to_end_encoder(wgml_model *rm, wgml_model *dm, const char *base, const device_opts *o, table *t) {
    static const char *const texts[] = {
        "Hello world",
        "The quick brown fox jumps over the lazy dog.",
        ("Embeddings map text to vectors; similar meanings land near each other, and a device that computes "
         "them wrongly moves every vector, however slightly."), /* one text: parenthesized for clang */
        "a",
        "GPUs, WebGPU and the CPU reference: one engine, many model families.",
    };
    const int n = (int)(sizeof texts / sizeof texts[0]);
    wgml_model_info info;
    wgml_model_get_info(rm, &info);
    const int rerank = (info.tasks & WGML_TASK_RERANK) != 0, dim = rerank ? 1 : info.n_embd;
    char cfg[300], why[200];
    snprintf(cfg, sizeof cfg, "%s: %d texts in one step, %s", base, n, rerank ? "rerank scores" : "pooled vectors");
    float *r = malloc((size_t)n * (size_t)dim * sizeof *r), *d = malloc((size_t)n * (size_t)dim * sizeof *d);
    wgml_error err;
    wgml_embed_params ep = wgml_embed_default_params();
    ep.normalize = WGML_NORMALIZE_NONE;
    int ok = 0;
    if (!r || !d) {
        snprintf(err.message, sizeof err.message, "out of memory");
        e2e_error(cfg, &err);
    } else if (rerank ? wgml_rerank(rm, texts[0], texts, n, r, &err) || wgml_rerank(dm, texts[0], texts, n, d, &err)
                      : wgml_embed(rm, texts, n, &ep, r, dim, &err) || wgml_embed(dm, texts, n, &ep, d, dim, &err)) {
        e2e_error(cfg, &err);
    } else {
        double diff = 0, scale = 0;
        for (size_t i = 0; i < (size_t)n * (size_t)dim; i++) {
            double e = fabs((double)d[i] - r[i]);
            diff = isnan(e) ? INFINITY : fmax(diff, e);
            scale = fmax(scale, fabs((double)r[i]));
        }
        double rel = diff / (1 + scale);
        double tol = e2e_tolerance(o->cpu && wgml_model_quantized_matmuls(dm), WGML_F32, &info, why, sizeof why);
        ok = rel <= tol;
        printf("           tolerance %.1e: %s\n", tol, why);
        printf("           max |diff| %.2e, largest value %.2e\n", diff, scale);
        printf("%-10s %-58s %9.2e %8.0e %s\n", "e2e", cfg, rel, tol, ok ? "PASS" : "FAIL");
    }
    ok ? t->passed++ : t->failed++;
    free(r);
    free(d);
    return ok;
}

/* A transcriber (Whisper): one 30 s window of a fixed log-mel through the
 * encoder on both (its output compared as the logits are), then n_tokens
 * decoder steps over it from <|startoftranscript|>, the device following the
 * reference's greedy tokens, logits compared at every step. The tolerance is
 * e2e_tolerance's over both stacks' layers (the encoder's f32 products and
 * attention over 1500 positions are sums of at most 4 S terms as well). */
static int end_to_end_transcriber(wgml_model *rm, wgml_model *dm, const char *base, const device_opts *o, table *t) {
    wgml_whisper_bench *rb = NULL, *db = NULL;
    wgml_error err;
    char cfg[300], why[200];
    float *rx = NULL, *dx = NULL, *rl = NULL, *dl = NULL;
    int ok = 0, V = 0, A = 0, S = 0, L = 0, FF = 0, sot = 0;
    snprintf(cfg, sizeof cfg, "%s: a 30 s window encoded", base);
    /* f32 cross keys on both: the device's kernels against the reference, not f16 storage */
    if (wgml_whisper_bench_create(rm, 1, WGML_KV_F32, &rb, &err) ||
        wgml_whisper_bench_create(dm, 1, WGML_KV_F32, &db, &err)) {
        e2e_error(cfg, &err);
        t->failed++;
        goto done;
    }
    wgml_whisper_bench_sizes(rb, &V, &A, &S, &L, &FF, &sot);
    wgml_model_info info = {.n_layer = L, .n_ff = FF, .n_embd = S};
    const double tol = e2e_tolerance(o->cpu && wgml_model_quantized_matmuls(dm), WGML_F32, &info, why, sizeof why);
    rx = malloc((size_t)A * S * sizeof *rx);
    dx = malloc((size_t)A * S * sizeof *dx);
    rl = malloc((size_t)V * sizeof *rl);
    dl = malloc((size_t)V * sizeof *dl);
    if (!rx || !dx || !rl || !dl) {
        snprintf(err.message, sizeof err.message, "out of memory");
        e2e_error(cfg, &err);
        t->failed++;
        goto done;
    }
    /* the encoder */
    if (wgml_whisper_bench_encode_read(rb, rx, &err) || wgml_whisper_bench_encode_read(db, dx, &err)) {
        e2e_error(cfg, &err);
        t->failed++;
        goto done;
    }
    double diff = 0, scale = 0;
    for (size_t i = 0; i < (size_t)A * S; i++) {
        double e = fabs((double)dx[i] - rx[i]);
        diff = isnan(e) ? INFINITY : fmax(diff, e);
        scale = fmax(scale, fabs((double)rx[i]));
    }
    const double rel = diff / (1 + scale);
    const int enc_ok = rel <= tol;
    printf("           tolerance %.1e: %s\n", tol, why);
    printf("           encoder output [%d][%d]: max |diff| %.2e, largest value %.2e\n", A, S, diff, scale);
    printf("%-10s %-58s %9.2e %8.0e %s\n", "e2e", cfg, rel, tol, enc_ok ? "PASS" : "FAIL");
    enc_ok ? t->passed++ : t->failed++;
    /* the decoder, teacher-forced by the reference */
    const int steps = o->n_tokens < wgml_whisper_bench_max_steps(rb) ? o->n_tokens : wgml_whisper_bench_max_steps(rb);
    snprintf(cfg, sizeof cfg, "%s: %d decoder steps over the window", base, steps);
    e2e_stats s = {.tol = tol};
    int32_t tok = sot;
    for (int pos = 0; pos < steps; pos++) {
        if (wgml_whisper_bench_step(rb, tok, pos, rl, &err) || wgml_whisper_bench_step(db, tok, pos, dl, &err)) {
            e2e_error(cfg, &err);
            t->failed++;
            goto done;
        }
        compare_logits(&s, rl, dl, V, pos);
        tok = argmax(rl, V);
    }
    ok = enc_ok && s.worst_rel <= s.tol && s.decisive_agree == s.decisive;
    const int dec_ok = s.worst_rel <= s.tol && s.decisive_agree == s.decisive;
    printf("           top-1 %d/%d, %d/%d where the reference's margin > tol; max |logit diff| %.2e "
           "(worst at position %d)\n",
           s.agree, s.positions, s.decisive_agree, s.decisive, s.worst_abs, s.worst_pos);
    printf("%-10s %-58s %9.2e %8.0e %s\n", "e2e", cfg, s.worst_rel, s.tol, dec_ok ? "PASS" : "FAIL");
    dec_ok ? t->passed++ : t->failed++;
done:
    free(rx);
    free(dx);
    free(rl);
    free(dl);
    wgml_whisper_bench_free(rb);
    wgml_whisper_bench_free(db);
    return ok;
}

/* The prompt in one batch, then greedy decoding on the reference with the
 * device following token by token; logits compared at every step. */
static int end_to_end(const char *model_path, const device_opts *o, table *t) {
    wgml_model_params rp = wgml_model_default_params(), dp = rp;
    rp.backend = WGML_BACKEND_CPU;
    dp.backend = o->cpu ? WGML_BACKEND_CPU : WGML_BACKEND_WEBGPU;
    dp.adapter = o->adapter;
    dp.webgpu_flags = o->flags;
    wgml_model_load_options exact = {.exact = 1};
    wgml_model *rm = NULL, *dm = NULL;
    wgml_session *rs = NULL, *ds = NULL;
    wgml_error err;
    int ok = 0;
    char cfg[300];
    const char *base = strrchr(model_path, '/');
    base = base ? base + 1 : model_path;
    snprintf(cfg, sizeof cfg, "%s, %d positions", base, o->n_tokens);
    float *rl = NULL;
    if (wgml_model_load_with(model_path, &dp, o->fault.fault_tensor ? &o->fault : NULL, &dm, &err) ||
        wgml_model_load_with(model_path, &rp, &exact, &rm, &err)) {
        e2e_error(cfg, &err);
        goto done;
    }
    wgml_model_info mi;
    wgml_model_get_info(rm, &mi);
    if (mi.tasks & WGML_TASK_TRANSCRIBE) {
        ok = end_to_end_transcriber(rm, dm, base, o, t);
        wgml_model_free(rm);
        wgml_model_free(dm);
        return ok;
    }
    if (!(mi.tasks & WGML_TASK_GENERATE)) {
        ok = end_to_end_encoder(rm, dm, base, o, t);
        wgml_model_free(rm);
        wgml_model_free(dm);
        return ok;
    }
    /* the reference keeps its cache in the device's type: only the arithmetic differs */
    uint32_t kv = wgml_model_backend(dm)->kv_type;
    wgml_session_params sp = wgml_session_default_params();
    sp.n_ctx = o->n_tokens;
    sp.n_batch = o->n_tokens;
    sp.kv_type = kv == WGML_F16 ? WGML_KV_F16 : WGML_KV_F32;
    if (wgml_session_create(dm, &sp, &ds, &err) || wgml_session_create(rm, &sp, &rs, &err)) {
        e2e_error(cfg, &err);
        goto done;
    }
    wgml_model_info info;
    wgml_model_get_info(rm, &info);
    int32_t seq[32]; /* BOS and at most one token per byte */
    const char *prompt = "Once upon a time";
    int np = wgml_tokenize(rm, prompt, strlen(prompt), 1, seq, 32, &err);
    if (np <= 0 || np > 32) {
        if (np >= 0) snprintf(err.message, sizeof err.message, "the prompt has %d tokens", np);
        e2e_error(cfg, &err);
        goto done;
    }
    if (np > o->n_tokens) np = o->n_tokens;
    e2e_stats s = {0};
    char why[200];
    s.tol = e2e_tolerance(o->cpu && wgml_model_quantized_matmuls(dm), kv, &info, why, sizeof why);
    rl = malloc((size_t)info.n_vocab * sizeof *rl);
    if (!rl) {
        snprintf(err.message, sizeof err.message, "out of memory");
        e2e_error(cfg, &err);
        goto done;
    }
    const int32_t *next = seq;
    int n = np;
    for (int pos = 0; pos < o->n_tokens; pos += n, n = 1) {
        if (wgml_session_eval(rs, next, n, &err) || wgml_session_eval(ds, next, n, &err)) {
            e2e_error(cfg, &err);
            goto done;
        }
        memcpy(rl, wgml_session_logits(rs), (size_t)info.n_vocab * sizeof *rl);
        compare_logits(&s, rl, wgml_session_logits(ds), info.n_vocab, pos + n - 1);
        seq[0] = argmax(rl, info.n_vocab);
        next = seq;
    }
    ok = s.worst_rel <= s.tol && s.decisive_agree == s.decisive;
    snprintf(cfg, sizeof cfg, "%s: prompt of %d in a batch + %d decoded, KV %s", base, np, o->n_tokens - np,
             wgml_dtype_name(kv));
    printf("           tolerance %.1e: %s\n", s.tol, why);
    printf("           top-1 %d/%d, %d/%d where the reference's margin > tol; max |logit diff| %.2e "
           "(worst at position %d)\n",
           s.agree, s.positions, s.decisive_agree, s.decisive, s.worst_abs, s.worst_pos);
    printf("%-10s %-58s %9.2e %8.0e %s\n", "e2e", cfg, s.worst_rel, s.tol, ok ? "PASS" : "FAIL");
done:
    ok ? t->passed++ : t->failed++;
    free(rl);
    wgml_session_free(rs);
    wgml_session_free(ds);
    wgml_model_free(rm);
    wgml_model_free(dm);
    return ok;
}

/* WGML_VERIFY_FAULT=TENSOR[:FACTOR[:BLOCK]]; 0 after an error message. */
static int parse_fault(const char *s, char *name, size_t cap, wgml_model_load_options *o) {
    size_t n = strcspn(s, ":");
    if (!n || n >= cap) return cli_usage_error("WGML_VERIFY_FAULT: expected TENSOR[:FACTOR[:BLOCK]], got '%s'", s), 0;
    memcpy(name, s, n);
    name[n] = '\0';
    *o = (wgml_model_load_options){.fault_tensor = name, .fault_factor = 1.25f};
    if (s[n] == ':') {
        char *end;
        o->fault_factor = strtof(s + n + 1, &end);
        if (end == s + n + 1 || (*end && *end != ':') || !isfinite(o->fault_factor))
            return cli_usage_error("WGML_VERIFY_FAULT: bad factor in '%s'", s), 0;
        if (*end == ':') {
            long long b;
            if (!cli_parse_int("WGML_VERIFY_FAULT block", end + 1, 0, INT64_MAX, &b)) return 0;
            o->fault_block = b;
        }
    }
    return 1;
}

int cmd_verify(int argc, char **argv) {
    verify_opts opt = {.e2e = 1, .ops = 1, .n_tokens = 64};
    int rc = cli_parse(&spec, &opt, argc, argv, NULL);
    if (rc >= 0) return rc;
    const char *adapter = opt.adapter, *model = opt.model, *filter = opt.filter, *type = opt.type;
    const int quick = opt.quick, e2e = opt.e2e, ops = opt.ops, f32 = opt.f32, no_sg = opt.no_sg, cpu = opt.cpu;
    const long long n_tokens = opt.n_tokens;
    if (cpu && (adapter || f32 || no_sg))
        return cli_usage_error("--adapter, --f32 and --no-subgroups are for --backend webgpu");
    if (!ops && !e2e) return cli_usage_error("--no-ops and --no-e2e leave nothing to check");
    device_opts d = {.cpu = cpu, .adapter = adapter, .n_tokens = (int)n_tokens,
                     .flags = (f32 ? WGML_WEBGPU_NO_F16 : 0) | (no_sg ? WGML_WEBGPU_NO_SUBGROUPS : 0)};
    char fault_name[256];
    const char *fault = getenv("WGML_VERIFY_FAULT");
    if (fault && *fault && !parse_fault(fault, fault_name, sizeof fault_name, &d.fault)) return CLI_USAGE;
    wgml_webgpu_options wo = {.adapter = adapter, .allow_software = adapter != NULL, .force_f32 = f32,
                              .no_subgroups = no_sg};
    wgml_backend *dev = NULL, *ref = NULL;
    wgml_error err;
    if (cpu ? wgml_backend_cpu_create(0, &dev, &err) : wgml_backend_webgpu_create(&wo, &dev, &err))
        return cli_fail_err(&err);
    if (wgml_backend_cpu_create_exact(0, &ref, &err)) {
        dev->free(dev);
        return cli_fail_err(&err);
    }
    if (cpu)
        printf("device: the fast CPU backend, %s (8-bit activations for quantized weights, KV cache %s)\n",
               dev->device_name, wgml_dtype_name(dev->kv_type));
    else
        printf("device: %s (KV cache %s%s)\n", dev->device_name,
               dev->kv_type == WGML_F16 ? "f16, shader-f16 tier" : "f32, f32 tier", no_sg ? ", no subgroups" : "");
    if (fault && *fault)
        printf("planted fault: %s, block %lld scaled by %g on the device only\n", d.fault.fault_tensor,
               (long long)d.fault.fault_block, (double)d.fault.fault_factor);
    if (cpu && ops)
        printf("matmuls of quantized weights: the device rounds their activations to 8 bits, so each case is held\n"
               "to 7 sigma of the error that makes (from its inputs and weights); the other cases to f32's 2e-4\n");
    printf("%-10s %-58s %9s %8s %s\n", "op", "case", "error", "tol", "result");
    table t = {.verbose = opt.verbose};
    if (ops) {
        wgml_opcheck_options oo = {.quick = quick, .filter = filter, .type = type, .act8 = cpu};
        wgml_opcheck_run(dev, ref, &oo, row, &t);
        flush_op(&t);
    }
    dev->free(dev);
    ref->free(ref);
    if (e2e && (!ops || (!filter && !type))) {
        if (!model && !(model = cli_default_model())) t.failed++;
        else end_to_end(model, &d, &t);
    }
    printf("verify: %d passed, %d failed\n", t.passed, t.failed);
    return t.failed ? CLI_FAIL : CLI_OK;
}
