/*
 * fuzz_cli.c - libFuzzer target: the command line where it touches files.
 *
 * The input is a command line and, optionally, the bytes of a file:
 *
 *     ARG \n ARG \n ... [\0 FILE BYTES]
 *
 * The first argument is the subcommand: run, info, tokenize, convert or
 * quantize (the others drive a GPU or write large files and are left out).
 * Arguments that name files can use placeholders: @file (a temporary file
 * holding FILE BYTES: a model, a prompt file, a checkpoint), @out (an output
 * path in a temporary folder), @model, @vocab, @ckpt, @tok (stories260K.gguf,
 * the llama-spm vocabulary, the llama2.c checkpoint and tokenizer from
 * ../shared or $WGML_SHARED). `run` always gets `--backend cpu -t 1` first and
 * inputs that ask for another backend, thread count or context size are
 * skipped, so every execution is quick and stays on the CPU.
 *
 * The process works inside its own temporary folder, and an argument with a
 * '/' that is not a placeholder is skipped, so whatever paths the fuzzer
 * invents, files are only ever written there; the folder is emptied after
 * every input.
 *
 * Checked: no crash, leak or undefined behaviour (the sanitizers), the exit
 * status is 0, 1 or 2, and a failed convert or quantize leaves no output
 * (neither @out nor @out.tmp).
 */
#include "../tools/wgml/cli.h"

#include <dirent.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_ARGS 24
#define MAX_ARG  512

#define CHECK(c)                                                                                                       \
    do {                                                                                                               \
        if (!(c)) {                                                                                                    \
            fprintf(stderr, "fuzz_cli: check failed: %s (line %d)\n", #c, __LINE__);                                   \
            abort();                                                                                                   \
        }                                                                                                              \
    } while (0)

static char dir[256], file_path[300], out_path[300], out_tmp[310];
static char model_path[4200], vocab_path[4200], ckpt_path[4200], tok_path[4200];

/* Removes every file the command wrote into the temporary folder. */
static void empty_dir(void) {
    DIR *d = opendir(dir);
    if (!d) abort();
    struct dirent *e;
    char p[600];
    while ((e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        unlink(p);
    }
    closedir(d);
}

static void remove_dir(void) {
    empty_dir();
    rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    static char shared[PATH_MAX];
    if (!realpath(getenv("WGML_SHARED") ? getenv("WGML_SHARED") : "../shared", shared)) {
        perror("fuzz_cli: the shared folder (WGML_SHARED)");
        abort();
    }
    snprintf(model_path, sizeof model_path, "%s/models/stories260K.gguf", shared);
    snprintf(vocab_path, sizeof vocab_path, "%s/vocab/ggml-vocab-llama-spm.gguf", shared);
    snprintf(ckpt_path, sizeof ckpt_path, "%s/models/llama2c/stories260K.bin", shared);
    snprintf(tok_path, sizeof tok_path, "%s/models/llama2c/tok512.bin", shared);
    snprintf(dir, sizeof dir, "/tmp/wgml-fuzz-cli-XXXXXX");
    if (!mkdtemp(dir)) {
        perror("fuzz_cli: mkdtemp");
        abort();
    }
    snprintf(file_path, sizeof file_path, "%s/in.bin", dir);
    snprintf(out_path, sizeof out_path, "%s/out.gguf", dir);
    snprintf(out_tmp, sizeof out_tmp, "%s.tmp", out_path);
    if (chdir(dir) != 0) abort();
    atexit(remove_dir);
    /* generated text is not the point; diagnostics stay on stderr */
    if (!freopen("/dev/null", "w", stdout)) abort();
    return 0;
}

static int allowed_command(const char *c) {
    return !strcmp(c, "run") || !strcmp(c, "info") || !strcmp(c, "tokenize") || !strcmp(c, "convert") ||
           !strcmp(c, "quantize");
}

/* Options that would leave the CPU, start many threads or allocate a huge context. */
static int refused(const char *a) {
    return !strcmp(a, "--backend") || !strcmp(a, "--adapter") || !strcmp(a, "-t") || !strcmp(a, "--threads") ||
           !strcmp(a, "-c") || !strcmp(a, "--ctx");
}

static const char *placeholder(const char *a) {
    if (!strcmp(a, "@file")) return file_path;
    if (!strcmp(a, "@out")) return out_path;
    if (!strcmp(a, "@model")) return model_path;
    if (!strcmp(a, "@vocab")) return vocab_path;
    if (!strcmp(a, "@ckpt")) return ckpt_path;
    if (!strcmp(a, "@tok")) return tok_path;
    return a;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *nul = memchr(data, 0, size);
    size_t args_len = nul ? (size_t)(nul - data) : size;
    static char store[MAX_ARGS][MAX_ARG];
    char *argv[MAX_ARGS + 4];
    int argc = 0;
    size_t i = 0;
    while (i <= args_len && argc < MAX_ARGS) {
        size_t j = i;
        while (j < args_len && data[j] != '\n')
            j++;
        if (j - i >= MAX_ARG) return 0;
        memcpy(store[argc], data + i, j - i);
        store[argc][j - i] = '\0';
        argc++;
        i = j + 1;
    }
    if (i <= args_len || argc == 0 || !allowed_command(store[0])) return 0;

    int n = 0;
    int is_run = !strcmp(store[0], "run");
    if (is_run) {
        static char b0[] = "--backend", b1[] = "cpu", t0[] = "-t", t1[] = "1";
        argv[n++] = b0, argv[n++] = b1, argv[n++] = t0, argv[n++] = t1;
    }
    for (int a = 1; a < argc; a++) {
        if (refused(store[a])) return 0;
        const char *v = placeholder(store[a]);
        if (v == store[a] && strchr(v, '/')) return 0; /* paths stay inside the folder */
        argv[n++] = (char *)v;
    }
    argv[n] = NULL;

    FILE *f = fopen(file_path, "wb");
    CHECK(f != NULL);
    if (nul) CHECK(fwrite(nul + 1, 1, size - args_len - 1, f) == size - args_len - 1);
    CHECK(fclose(f) == 0);

    static const cli_cmd_fn fns[] = {cmd_run, cmd_info, cmd_tokenize, cmd_convert, cmd_quantize};
    static const char *names[] = {"run", "info", "tokenize", "convert", "quantize"};
    int rc = -1;
    for (int c = 0; c < 5; c++)
        if (!strcmp(store[0], names[c])) {
            cli_cmd = names[c];
            cli_argv0 = "wgml";
            rc = fns[c](n, argv);
        }
    fflush(stdout);
    CHECK(rc == CLI_OK || rc == CLI_FAIL || rc == CLI_USAGE);
    if (rc != CLI_OK && (!strcmp(store[0], "convert") || !strcmp(store[0], "quantize")))
        CHECK(access(out_path, F_OK) != 0 && access(out_tmp, F_OK) != 0);
    empty_dir();
    return 0;
}
