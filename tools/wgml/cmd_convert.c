/*
 * cmd_convert.c - `wgml convert llama2c CHECKPOINT TOKENIZER -o OUT.gguf`.
 */
#include <string.h>

#include "cli.h"
#include "format/llama2c.h"

static const char *help =
    "usage: wgml convert llama2c CHECKPOINT TOKENIZER -o OUT.gguf\n"
    "Converts a llama2.c checkpoint (legacy or v1 'ak42' fp32 format, shared or separate\n"
    "classifier) and its tokenizer.bin into a GGUF file that wgml and llama.cpp can run.\n";

static int progress(void *user, uint64_t done, uint64_t total) {
    cli_progress_update(user, done, total);
    return 0;
}

int cmd_convert(int argc, char **argv) {
    const char *pos[3] = {0}, *out = NULL;
    int n_pos = 0;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(help, stdout);
            return CLI_OK;
        } else if (!strcmp(argv[i], "-o") || !strcmp(argv[i], "--output")) {
            if (!(out = cli_value(argc, argv, &i))) return CLI_USAGE;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return cli_usage_error("unknown option '%s'", argv[i]);
        } else if (n_pos < 3) {
            pos[n_pos++] = argv[i];
        } else {
            return cli_usage_error("too many arguments");
        }
    }
    if (n_pos == 0) return cli_usage_error("name the source format (llama2c)");
    if (strcmp(pos[0], "llama2c") != 0) return cli_usage_error("unknown source format '%s' (llama2c is supported)", pos[0]);
    if (n_pos != 3) return cli_usage_error("give CHECKPOINT and TOKENIZER");
    if (!out) return cli_usage_error("give the output file with -o OUT.gguf");
    cli_progress bar;
    cli_progress_begin(&bar, "converting");
    wgml_error err;
    wgml_status st = llama2c_convert(pos[1], pos[2], out, progress, &bar, &err);
    cli_progress_end(&bar);
    if (st) return cli_fail_err(&err);
    fprintf(stderr, "wgml convert: wrote %s\n", out);
    return CLI_OK;
}
