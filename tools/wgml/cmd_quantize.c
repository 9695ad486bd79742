/*
 * cmd_quantize.c - `wgml quantize IN.gguf OUT.gguf TYPE [--threads N]`.
 */
#include "cli.h"
#include "tools_internal.h"

#include <string.h>

typedef struct {
    int threads;
} quantize_opts;

static const cli_opt options[] = {
    CLI_INT("--threads", "-t", quantize_opts, threads, "N", 1, 512, "threads (default: one per core)"),
    CLI_END,
};

static const cli_spec spec = {
    .usage = "usage: wgml quantize IN.gguf OUT.gguf TYPE [--threads N]\n",
    .about = "Converts the weights of a GGUF model (F32, F16 or BF16) to TYPE, spelled as llama.cpp spells it\n"
             "(case-insensitive):\n"
             "  Q4_K_M Q5_K_M Q4_K_S Q5_K_S Q3_K_S Q3_K_M Q3_K_L Q2_K Q6_K Q8_0 Q4_0 Q4_1 Q5_0 Q5_1\n"
             "                 llama.cpp's mixes: e.g. Q4_K_M is Q4_K with attn_v and ffn_down in Q6_K in\n"
             "                 the layers llama.cpp picks, and the output matrix in Q6_K\n"
             "  F32 F16 BF16   plain floats\n"
             "  Q3_K Q4_K Q5_K every matrix in that type\n"
             "Norms and biases stay F32. A matrix whose rows fit no block of its type falls back as\n"
             "llama.cpp does (Q4_K -> Q5_0, Q6_K -> Q8_0, ..., finally F16), with a note on stderr.\n"
             "general.file_type names what was written. Tensors already in their target type are copied.\n"
             "OUT is written under a temporary name and appears only when complete.\n",
    .opts = options,
    .max_args = 3,
};

static void log_line(void *user, const char *line) {
    cli_progress_end(user); /* keep the note off the progress bar's line */
    cli_log_cb(NULL, line);
}

int cmd_quantize(int argc, char **argv) {
    quantize_opts opt = {0};
    int n_pos, rc = cli_parse(&spec, &opt, argc, argv, &n_pos);
    if (rc >= 0) return rc;
    char **pos = argv;
    if (n_pos != 3) return cli_usage_error("give IN.gguf, OUT.gguf and TYPE");
    if (!quantize_recipe_find(pos[2]))
        return cli_usage_error("unknown type '%s' (known: %s)", pos[2], quantize_recipe_list());
    cli_progress bar;
    cli_progress_begin(&bar, "quantizing");
    quantize_params qp = {.n_threads = opt.threads,
                          .progress = cli_progress_cb,
                          .progress_user = &bar,
                          .log = log_line,
                          .log_user = &bar};
    quantize_result r;
    wgml_error err;
    double t0 = cli_now_ms();
    wgml_status st = quantize_file(pos[0], pos[1], pos[2], &qp, &r, &err);
    cli_progress_end(&bar);
    if (st) return cli_fail_err(&err);
    double s = (cli_now_ms() - t0) / 1e3;
    fprintf(stderr, "wgml quantize: wrote %s: %d tensors, %.2f MiB -> %.2f MiB, file type %u (%s), %.1f s\n", pos[1],
            r.n_tensors, r.bytes_in / 1048576.0, r.bytes_out / 1048576.0, r.file_type, quantize_ftype_name(r.file_type),
            s);
    fprintf(stderr, "  types:");
    for (int t = 0; t < WGML_DTYPE_COUNT; t++)
        if (r.per_type[t]) fprintf(stderr, " %s x%d", wgml_dtype_name((uint32_t)t), r.per_type[t]);
    fputc('\n', stderr);
    return CLI_OK;
}
