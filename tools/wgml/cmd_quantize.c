/*
 * cmd_quantize.c - `wgml quantize IN.gguf OUT.gguf TYPE [--threads N]`.
 */
#include "cli.h"
#include "tools/quantize.h"

#include <string.h>

static const char *help =
    "usage: wgml quantize IN.gguf OUT.gguf TYPE [--threads N]\n"
    "Converts the weights of a GGUF model (F32, F16 or BF16) to TYPE, spelled as llama.cpp spells it\n"
    "(case-insensitive):\n"
    "  Q4_K_M Q5_K_M Q4_K_S Q5_K_S Q3_K_S Q3_K_M Q3_K_L Q2_K Q6_K Q8_0 Q4_0 Q4_1 Q5_0 Q5_1\n"
    "                 llama.cpp's mixes: e.g. Q4_K_M is Q4_K with attn_v and ffn_down in Q6_K in\n"
    "                 the layers llama.cpp picks, and the output matrix in Q6_K\n"
    "  F32 F16 BF16   plain floats\n"
    "  Q3_K Q4_K Q5_K every matrix in that type\n"
    "Norms and biases stay F32. A matrix whose rows fit no block of its type falls back as\n"
    "llama.cpp does (Q4_K -> Q5_0, Q6_K -> Q8_0, ..., finally F16), with a note on stderr.\n"
    "general.file_type names what was written. Tensors already in their target type are copied.\n"
    "OUT is written under a temporary name and appears only when complete.\n"
    "  -t, --threads N   threads (default: one per core)\n";

static void log_line(void *user, const char *line) {
    cli_progress_end(user); /* keep the note off the progress bar's line */
    cli_log_cb(NULL, line);
}

int cmd_quantize(int argc, char **argv) {
    const char *pos[3] = {0};
    int n_pos = 0;
    long long threads = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(help, stdout);
            return CLI_OK;
        } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
            if (!(v = cli_value(argc, argv, &i)) || !cli_parse_int(a, v, 1, 512, &threads)) return CLI_USAGE;
        } else if (a[0] == '-' && a[1]) {
            return cli_usage_error("unknown option '%s'", a);
        } else if (n_pos < 3) {
            pos[n_pos++] = a;
        } else {
            return cli_usage_error("too many arguments");
        }
    }
    if (n_pos != 3) return cli_usage_error("give IN.gguf, OUT.gguf and TYPE");
    if (!quantize_recipe_find(pos[2]))
        return cli_usage_error("unknown type '%s' (known: %s)", pos[2], quantize_recipe_list());
    cli_progress bar;
    cli_progress_begin(&bar, "quantizing");
    quantize_params qp = {.n_threads = (int)threads,
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
