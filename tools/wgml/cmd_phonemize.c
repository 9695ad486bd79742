/*
 * cmd_phonemize.c - `wgml phonemize [--lang L] [--words] (TEXT... | -f FILE)`:
 * the phonemes Kokoro reads for English text (kokoro-js's G2P over the
 * espeak-ng program: src/text/g2p.h), one line per line of input; with
 * --words, where each word of the text is in them (the word timing of
 * `wgml speak --words`).
 */
#include "cli.h"
#include "tools_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *lang, *file, *espeak;
    int words;
} phonemize_opts;

static const cli_choice langs[] = {{"en-us", 0}, {"en-gb", 0}, {"es", 0}, {"fr-fr", 0}, {"fr", 0}, {"hi", 0},
                                   {"it", 0}, {"pt-br", 0}, {NULL, 0}};

static const cli_opt options[] = {
    CLI_WORD("--lang", NULL, phonemize_opts, lang, "L", langs,
             "en-us (American English, the default), en-gb (British English), es, fr-fr,\n"
             "hi, it or pt-br (the official pipeline's espeak G2P; --words: English only)"),
    CLI_STRING("--file", "-f", phonemize_opts, file, "FILE", "the text, read line by line"),
    CLI_FLAG("--words", NULL, phonemize_opts, words,
             "after each line of phonemes, a line per word of the text:\n"
             "the word<TAB>its phonemes (those `wgml speak --words` times)"),
    CLI_STRING("--espeak", NULL, phonemize_opts, espeak, "PROGRAM",
               "the espeak-ng to run (default: $WGML_ESPEAK, else espeak-ng on PATH)"),
    CLI_END,
};

static const cli_spec spec = {
    .usage = "usage: wgml phonemize [--lang en-us|en-gb|es|fr-fr|hi|it|pt-br] [--words] [--espeak PROGRAM] (TEXT... | -f FILE)\n",
    .about = "Prints the phonemes of English text as Kokoro's G2P makes them (kokoro-js 1.2.1's\n"
             "normalization and punctuation handling around espeak-ng), one line per line of\n"
             "input; the TEXT arguments are joined with spaces. Needs the espeak-ng program\n"
             "(apt-get install espeak-ng).\n",
    .opts = options,
    .more = "  --                the arguments after it are text, even those starting with '-'\n",
    .max_args = -1,
    .dashdash = 1,
};

/* Phonemizes each line and prints it; returns a CLI exit code. */
static int print_lines(wgml_g2p *g2p, const char *lang, int words, char *const *lines, int n) {
    for (int i = 0; i < n; i++) {
        char *ph = NULL;
        wgml_g2p_word *w = NULL;
        size_t n_w = 0;
        wgml_error err;
        if (words ? wgml_g2p_phonemize_words(g2p, lang, lines[i], &ph, &w, &n_w, &err)
                  : wgml_g2p_phonemize(g2p, lang, lines[i], &ph, &err)) {
            return n > 1 ? cli_fail_errf(&err, "line %d", i + 1) : cli_fail_err(&err);
        }
        fputs(ph, stdout);
        fputc('\n', stdout);
        for (size_t k = 0; k < n_w; k++)
            printf("%.*s\t%.*s\n", (int)w[k].text_len, lines[i] + w[k].text_off, (int)w[k].ph_len, ph + w[k].ph_off);
        wgml_free(w);
        wgml_free(ph);
    }
    if (fflush(stdout) != 0 || ferror(stdout)) return cli_fail("cannot write the phonemes to standard output");
    return CLI_OK;
}

int cmd_phonemize(int argc, char **argv) {
    phonemize_opts opt = {.lang = "en-us"};
    int n_args, rc = cli_parse(&spec, &opt, argc, argv, &n_args);
    if (rc >= 0) return rc;
    const char *lang = opt.lang, *file = opt.file, *const *args = (const char *const *)argv;
    const int words = opt.words;
    if (!!file == !!n_args) return cli_usage_error("give the text as arguments or -f FILE (one of them)");
    size_t text_len = 0;
    for (int i = 0; i < n_args; i++) text_len += strlen(args[i]) + 1;

    char **lines = NULL;
    int n_lines;
    if (file) {
        if ((n_lines = cli_read_lines(file, &lines)) < 0) return CLI_FAIL;
    } else {
        /* the arguments joined with spaces, then cut at line ends, as cli_read_lines does */
        char *text = malloc(text_len + 1);
        size_t count = 1;
        if (!text) return cli_fail("out of memory");
        char *p = text;
        for (int i = 0; i < n_args; i++) {
            if (i) *p++ = ' ';
            size_t len = strlen(args[i]);
            memcpy(p, args[i], len);
            p += len;
        }
        *p = '\0';
        for (p = text; *p; p++)
            count += *p == '\n';
        lines = malloc((count + 1) * sizeof *lines);
        if (!lines) {
            free(text);
            return cli_fail("out of memory");
        }
        n_lines = 0;
        for (p = text;;) {
            char *e = strchr(p, '\n');
            if (e) *e = '\0';
            size_t len = strlen(p);
            if (len && p[len - 1] == '\r') p[len - 1] = '\0';
            lines[n_lines++] = p;
            if (!e) break;
            p = e + 1;
        }
        lines[n_lines] = NULL;
    }

    wgml_g2p *g2p = NULL;
    wgml_error err;
    if (wgml_g2p_open_espeak(opt.espeak, &g2p, &err))
        rc = cli_fail_err(&err);
    else
        rc = print_lines(g2p, lang, words, lines, n_lines);
    wgml_g2p_free(g2p);
    if (file) {
        cli_lines_free(lines);
    } else {
        free(lines[0]);
        free(lines);
    }
    return rc;
}
