/*
 * cli.h - helpers shared by the wgml subcommands: strict argument parsing,
 * error reporting, the default model path, and a progress bar for TTYs.
 *
 * Exit codes: 0 success, 1 the work failed (bad model, I/O, GPU, ...),
 * 2 the command line is wrong. Messages go to stderr as "wgml <cmd>: ...".
 */
#ifndef WGML_CLI_H
#define WGML_CLI_H

#include <stdint.h>
#include <stdio.h>

#include "wgml.h"

#define CLI_OK 0
#define CLI_FAIL 1
#define CLI_USAGE 2

/* Each subcommand: argc/argv start at the subcommand's own arguments. */
typedef int (*cli_cmd_fn)(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_convert(int argc, char **argv);
int cmd_devices(int argc, char **argv);
int cmd_verify(int argc, char **argv);
int cmd_quantize(int argc, char **argv);
int cmd_synth(int argc, char **argv);
int cmd_embed(int argc, char **argv);
int cmd_bench_embed(int argc, char **argv); /* wgml bench --embed */
int cmd_bench_speech(int argc, char **argv); /* wgml bench on a speech model, or --speech */
int cmd_bench_parallel(int argc, char **argv); /* wgml bench --parallel N */
int cmd_serve(int argc, char **argv);
int cmd_chat(int argc, char **argv);
int cmd_rerank(int argc, char **argv);
int cmd_phonemize(int argc, char **argv);
int cmd_speak(int argc, char **argv);
int cmd_template(int argc, char **argv);

extern const char *cli_cmd; /* the subcommand name, for messages */
extern const char *cli_argv0;

/* Prints "wgml <cmd>: message" to stderr; returns CLI_USAGE / CLI_FAIL. */
int cli_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int cli_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prints the error from the library; returns CLI_FAIL. */
int cli_fail_err(const wgml_error *err);

/* Strict number parsing: the whole string must be a number in [lo, hi].
 * On failure prints a usage error naming the option and returns 0. */
int cli_parse_int(const char *opt, const char *s, long long lo, long long hi, long long *out);
int cli_parse_float(const char *opt, const char *s, double lo, double hi, double *out);
/* Returns the option's value (argv[i+1]) and advances i, or NULL with an error. */
const char *cli_value(int argc, char **argv, int *i);

/* Files that ship with wgml (the repository's models/ folder, installed as
 * <prefix>/share/wgml/) are looked up in: $WGML_DATA_DIR, the data folder
 * of the install prefix the CLI was built for (WGML_INSTALL_DATADIR), then
 * ../share/wgml and ../models beside the executable (a moved install, and
 * the source tree's build/wgml). Returns the first readable path, or NULL
 * after printing an error that lists the folders searched. */
const char *cli_data_file(const char *name);

/* The default model: $WGML_MODEL if set, else the shipped stories260K.gguf
 * (cli_data_file). NULL after printing an error when there is none. */
#define WGML_DEFAULT_MODEL "stories260K.gguf"
const char *cli_default_model(void);

int cli_parse_backend(const char *s, wgml_backend_kind *out);
/* --kv-type: "auto", "f16" or "f32"; 0 after printing a usage error */
int cli_parse_kv_type(const char *s, wgml_kv_type *out);

/* A progress bar on stderr when it is a terminal; silent otherwise. */
typedef struct cli_progress {
    const char *label;
    int active;
    int last_permille;
    double t0;
} cli_progress;
void cli_progress_begin(cli_progress *p, const char *label);
void cli_progress_update(cli_progress *p, uint64_t done, uint64_t total);
void cli_progress_end(cli_progress *p);
/* Adapter for wgml_model_params.progress (user = cli_progress *). */
int cli_progress_cb(void *user, const char *stage, uint64_t done, uint64_t total);
/* Adapter for wgml_model_params.log: prints "wgml: line" to stderr. */
void cli_log_cb(void *user, const char *line);

double cli_now_ms(void);
/* The median of v[0..n) (n <= 64; the upper one of an even count), v left as it is; 0 for none. */
double cli_median(const double *v, int n);

/* Generated text goes to stdout through cli_out, which remembers whether it
 * ended a line. cli_line_start() is called before a status line on stderr:
 * when stdout and stderr are the same terminal and the text did not end a
 * line, it ends it, so that the status line starts on a line of its own. */
void cli_out(const char *text, size_t len);
void cli_line_start(void);

/* Options every model-loading command shares: -m, --backend, --adapter, --threads. */
typedef struct cli_model_opts {
    const char *model;
    wgml_backend_kind backend;
    const char *adapter;
    int threads;
} cli_model_opts;
#define CLI_MODEL_OPTS_HELP                                                                      \
    "  -m, --model FILE      GGUF model (default: $WGML_MODEL, else the shipped stories260K.gguf)\n" \
    "  --backend B           auto (hardware GPU, else CPU), cpu or webgpu (default auto)\n"     \
    "  --adapter NAME        WebGPU adapter whose name contains NAME (e.g. llvmpipe, swiftshader)\n" \
    "  -t, --threads N       CPU threads (default: one per core)\n"
/* Consumes argv[*i] (and its value) if it is one of these options: returns 1
 * when consumed, 0 when not ours, -1 after printing a usage error. */
int cli_model_option(int argc, char **argv, int *i, cli_model_opts *o);
/* The lines of a text file (without their line ends; a final empty line is
 * dropped) into *lines, which points into one allocation: free(*lines[0]...)
 * through cli_lines_free. Returns the count, or -1 after printing an error
 * (unreadable file, a NUL byte). */
int cli_read_lines(const char *path, char ***lines);
void cli_lines_free(char **lines);

/* The items of a command that takes them as arguments or as the lines of -f
 * FILE (one of the two; `what` names them in the error): *items points at
 * args or at *lines (free with cli_lines_free). Returns the count, or
 * -CLI_USAGE / -CLI_FAIL after printing the error. */
int cli_items(const char **args, int n_args, const char *file, const char *what, const char *const **items,
              char ***lines);

/* A RIFF WAVE header for n mono samples (PCM 16-bit, or IEEE float 32-bit with its fact
 * chunk) into h (58 bytes); returns its length. n < 0: a stream of unknown length (sizes
 * 0xFFFFFFFF, as players of piped WAV expect). */
size_t cli_wav_header(unsigned char *h, int64_t n, int rate, int f32);
/* n samples as little-endian 16-bit PCM (clipped to [-1, 1], NaN as 0) or 32-bit float
 * into out (2 or 4 bytes each). */
void cli_audio_bytes(const float *x, int64_t n, int f32, unsigned char *out);

/* A per-kernel time table as a JSON array of {name, calls, total_ms} (bench --json). */
struct json_object;
struct json_object *cli_kernels_json(const wgml_kernel_stat *kt, int n);
/* OpenAI's embeddings response for n vectors of dim floats: {"object": "list", "data":
 * [{"object": "embedding", "index", "embedding"}], "model", "usage"}; each embedding an
 * array of numbers, or with base64 its float32 bytes in base64 (encoding_format). */
struct json_object *cli_embeddings_json(const float *vec, int n, int dim, const char *model, long long tokens,
                                        int base64);

/* Loads the model with a progress bar; prints the error and returns NULL on failure. */
wgml_model *cli_load_model(const cli_model_opts *o, double *load_ms);

#endif
