/*
 * cmd_tokenize.c - `wgml tokenize -m MODEL [--bos] (TEXT | -f FILE)`: prints
 * the token ids of a text, space-separated, on one line. MODEL may also be a
 * folder holding only a Hugging Face tokenizer (tokenizer.json, or
 * spiece.model, with tokenizer_config.json), read as a vocabulary-only GGUF
 * (model/hf_tokenizer.h).
 */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/alloc.h"
#include "format/file_bytes.h"
#include "model/hf_tokenizer.h"

#include "cli.h"
#include "tools_internal.h"

typedef struct {
    const char *model, *file;
    int bos, pieces, nul;
} tokenize_opts;

static const cli_opt options[] = {
    CLI_STRING("--model", "-m", tokenize_opts, model, "FILE",
               "GGUF with tokenizer metadata (a vocabulary-only file works),\n"
               "or a folder with a Hugging Face tokenizer (tokenizer.json or spiece.model)"),
    CLI_STRING("--file", "-f", tokenize_opts, file, "FILE", "read the text from a file"),
    CLI_FLAG("--bos", NULL, tokenize_opts, bos,
             "prepend BOS (if the vocabulary has one); append EOS where the\n"
             "vocabulary asks for it (add_eos_token: CLIP, SigLIP)"),
    CLI_FLAG("--pieces", NULL, tokenize_opts, pieces, "print id:piece pairs instead of ids"),
    CLI_FLAG("--nul", "-0", tokenize_opts, nul,
             "the text holds several texts, each ended or separated by a NUL\n"
             "byte (-f FILE): one line of ids per text"),
    CLI_END,
};

static const cli_spec spec = {
    .usage = "usage: wgml tokenize [-m MODEL|FOLDER] [--bos] [--pieces] [-0] (TEXT | -f FILE)\n",
    .about = "Prints the token ids of TEXT on one line, space-separated.\n",
    .opts = options,
    .max_args = 1,
    .too_many = "give the text as one argument (quote it)",
};

/* A folder with tokenizer files but no checkpoint: its tokenizer alone. */
static int tokenizer_folder(const char *path) {
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode) || !wgml_hf_tokenizer_detect(path)) return 0;
    const char *weights[] = {"model.safetensors", "model.safetensors.index.json"};
    for (int i = 0; i < 2; i++) {
        char *p = wgml_path_join(path, weights[i]);
        int there = p && stat(p, &sb) == 0;
        wgml_free(p);
        if (there) return 0;
    }
    return 1;
}

int cmd_tokenize(int argc, char **argv) {
    tokenize_opts opt = {0};
    int n_args, rc = cli_parse(&spec, &opt, argc, argv, &n_args);
    if (rc >= 0) return rc;
    const char *model = opt.model, *text = n_args ? argv[0] : NULL, *file = opt.file;
    const int bos = opt.bos, pieces = opt.pieces;
    if (!!text == !!file) return cli_usage_error("give either TEXT or -f FILE");
    char *buf = NULL;
    size_t len = 0;
    if (file) {
        FILE *fp = fopen(file, "rb");
        if (!fp) return cli_fail("cannot open '%s'", file);
        size_t cap = 1 << 16;
        buf = malloc(cap);
        size_t r;
        while (buf && (r = fread(buf + len, 1, cap - len, fp)) > 0) {
            len += r;
            if (len == cap) {
                char *nb = realloc(buf, cap *= 2);
                if (!nb) free(buf);
                buf = nb;
            }
        }
        fclose(fp);
        if (!buf) return cli_fail("out of memory reading '%s'", file);
        text = buf;
    } else {
        len = strlen(text);
    }
    gguf_file *f = NULL;
    wgml_tokenizer *tok = NULL;
    wgml_error err;
    rc = CLI_OK;
    int32_t *ids = NULL;
    char fetched[4096];
    if ((!model && !(model = cli_default_model())) || !(model = cli_fetch_model(model, fetched, sizeof fetched))) {
        rc = CLI_FAIL;
        goto done;
    }
    if ((tokenizer_folder(model) ? wgml_hf_tokenizer_open(model, &f, &err) : wgml_model_file_open(model, &f, &err)) ||
        wgml_tokenizer_load(f, &tok, &err)) {
        rc = cli_fail_err(&err);
        goto done;
    }
    for (size_t at = 0; at <= len;) { /* one text, or with --nul each NUL-separated one */
        if (opt.nul && at == len && len > 0 && text[len - 1] == '\0') break; /* a last NUL ends the last text */
        const char *end = opt.nul ? memchr(text + at, 0, len - at) : NULL;
        size_t n_text = (end ? (size_t)(end - text) : len) - at;
        int n = wgml_tokenizer_encode(tok, text + at, n_text, bos, NULL, 0, &err);
        if (n < 0) {
            rc = cli_fail_err(&err);
            goto done;
        }
        free(ids);
        ids = calloc((size_t)n + 1, sizeof *ids);
        if (!ids) {
            rc = cli_fail("out of memory");
            goto done;
        }
        wgml_tokenizer_encode(tok, text + at, n_text, bos, ids, n, &err);
        for (int i = 0; i < n; i++) {
            if (pieces) {
                char p[256];
                int k = wgml_tokenizer_piece(tok, ids[i], p, sizeof p);
                printf("%s%d:'%.*s'", i ? " " : "", ids[i], k < 0 ? 0 : k > 255 ? 255 : k, p);
            } else {
                printf("%s%d", i ? " " : "", ids[i]);
            }
        }
        printf("\n");
        at += n_text + 1;
        if (!opt.nul || (end == NULL)) break;
    }
done:
    free(ids);
    wgml_tokenizer_free(tok);
    gguf_close(f);
    free(buf);
    return rc;
}
