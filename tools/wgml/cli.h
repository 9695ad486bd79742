/*
 * cli.h - helpers shared by the wgml subcommands: strict argument parsing,
 * error reporting, the default model path, and a progress bar for TTYs.
 *
 * Exit codes: 0 success, 1 the work failed (bad model, I/O, GPU, ...),
 * 2 the command line is wrong. Messages go to stderr as "wgml <cmd>: ...".
 */
#ifndef WGML_CLI_H
#define WGML_CLI_H

#include <stddef.h>
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
int cmd_pull(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_convert(int argc, char **argv);
int cmd_devices(int argc, char **argv);
int cmd_verify(int argc, char **argv);
int cmd_quantize(int argc, char **argv);
int cmd_synth(int argc, char **argv);
int cmd_embed(int argc, char **argv);
int cmd_classify(int argc, char **argv);
int cmd_bench_embed(int argc, char **argv); /* wgml bench --embed */
int cmd_bench_images(int argc, char **argv); /* wgml bench on a vision model, or --images */
int cmd_bench_speech(int argc, char **argv); /* wgml bench on a speech model, or --speech */
int cmd_bench_parallel(int argc, char **argv); /* wgml bench --parallel N */
int cmd_serve(int argc, char **argv);
int cmd_chat(int argc, char **argv);
int cmd_rerank(int argc, char **argv);
int cmd_phonemize(int argc, char **argv);
int cmd_speak(int argc, char **argv);
int cmd_template(int argc, char **argv);
int cmd_transcribe(int argc, char **argv);

extern const char *cli_cmd; /* the subcommand name, for messages */
extern const char *cli_argv0;

/* Prints "wgml <cmd>: message" to stderr; returns CLI_USAGE / CLI_FAIL. */
int cli_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int cli_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prints the error from the library; returns CLI_FAIL. */
int cli_fail_err(const wgml_error *err);
/* The same after a prefix: "wgml <cmd>: PREFIX: message (status)". */
int cli_fail_errf(const wgml_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Strict number parsing: the whole string must be a number in [lo, hi].
 * On failure prints a usage error naming the option ("-n needs an integer
 * 0..65536, got 'x'") and returns 0. */
int cli_parse_int(const char *opt, const char *s, long long lo, long long hi, long long *out);
int cli_parse_float(const char *opt, const char *s, double lo, double hi, double *out);

/* ---- options ----------------------------------------------------------------
 *
 * A command declares its options once, as a table (cli_opt entries ended by
 * CLI_END), and cli_parse reads argv against it and prints --help from it.
 * Each entry says where its value goes as an offset into the command's own
 * options struct (the CLI_* macros below take the struct type and the field,
 * and refuse at compile time a field of the wrong type), so the tables are
 * static const and a command can run any number of times in one process.
 * Options that many commands share are tables of their own (cli_model_table,
 * cli_sampling_table, ...) that a command includes at the offset of the
 * struct they fill (CLI_INCLUDE).
 *
 * Parsing: "--name VALUE" (the value is the next argument, even one that starts
 * with '-'), flags without one; later options override earlier ones; -h and
 * --help print the help and end the command; an argument that does not start
 * with '-' (or is "-") is a positional one; with dashdash, "--" makes every
 * argument after it positional. Errors name the option as it was spelled:
 * "wgml run: -c needs an integer 1..1048576, got '0'". */
typedef enum cli_opt_kind {
    CLI_OPT_END = 0,
    CLI_OPT_FLAG,      /* no value: stores lo (an int) */
    CLI_OPT_INT,       /* an int in [lo, hi] */
    CLI_OPT_U64,       /* a uint64_t: any non-negative integer */
    CLI_OPT_FLOAT,     /* a float in [flo, fhi] */
    CLI_OPT_STRING,    /* a const char * (the argument itself) */
    CLI_OPT_CHOICE,    /* one of choices: stores its value (an int or an enum) */
    CLI_OPT_WORD,      /* one of choices: stores the argument (a const char *) */
    CLI_OPT_LIST,      /* repeatable: each value appended to a const char *[hi], the count in an int
                          (count); fn, when set, checks each value first */
    CLI_OPT_FN,        /* fn parses the value (checks, several fields) */
    CLI_OPT_GROUP,     /* a heading in --help */
    CLI_OPT_INCLUDE,   /* the entries of table, their offsets relative to off */
} cli_opt_kind;

typedef struct cli_choice {
    const char *name;
    int value;
} cli_choice; /* a list of them ends with {NULL, 0} */

typedef struct cli_opt cli_opt;
struct cli_opt {
    cli_opt_kind kind;
    const char *name;    /* "--threads" (or a short one alone: "-p") */
    const char *alt;     /* another spelling, listed first in --help: "-t", "-np"; or NULL */
    size_t off;          /* where the value goes, from the start of the options struct */
    size_t given;        /* 1 + the offset of an int set to 1 when the option is given; 0: none */
    size_t count;        /* CLI_OPT_LIST: the offset of the int that counts its values */
    const char *metavar; /* "N", "FILE"; NULL for a flag */
    const char *help;    /* its lines in --help, '\n' between them; NULL: not listed */
    long long lo, hi;
    double flo, fhi;
    const cli_choice *choices;
    /* CLI_OPT_FN, CLI_OPT_LIST: base is the options struct (of the including
     * table); returns 1, or 0 after printing a usage error */
    int (*fn)(void *base, const char *opt, const char *value);
    const cli_opt *table; /* CLI_OPT_INCLUDE */
};

typedef struct cli_spec {
    const char *usage;    /* the first line(s) of --help: "usage: wgml run [options]\n" */
    const char *about;    /* what the command does, printed after usage (may be NULL) */
    const cli_opt *opts;
    const char *more;     /* printed after the options (may be NULL) */
    int max_args;         /* positional arguments it takes: 0 none, -1 any number */
    const char *too_many; /* the error for one more (default "too many arguments") */
    int dashdash;         /* "--" ends the options */
} cli_spec;

/* Parses argv[0..argc) into opts (the fields not given keep their values).
 * The positional arguments are moved to argv[0..*n_args), in order (n_args
 * may be NULL when max_args is 0). Returns -1 for the command to go on, else
 * the exit status it is to return: CLI_OK after --help (printed on stdout),
 * CLI_USAGE after an error message. */
int cli_parse(const cli_spec *spec, void *opts, int argc, char **argv, int *n_args);
/* The --help text of a command. */
void cli_help(const cli_spec *spec, FILE *f);

/* Compile-time checks that a field has the type an entry stores. */
#define CLI_OFF_(T, f, type) _Generic(((T *)0)->f, type: offsetof(T, f))
#define CLI_OFF_INT_(T, f) (offsetof(T, f) + 0 * sizeof(char[sizeof(((T *)0)->f) == sizeof(int) ? 1 : -1]))

#define CLI_END {.kind = CLI_OPT_END}
#define CLI_GROUP(t_) {.kind = CLI_OPT_GROUP, .help = (t_)}
#define CLI_INCLUDE(tb_, T, f) {.kind = CLI_OPT_INCLUDE, .table = (tb_), .off = offsetof(T, f)}
/* a flag that sets an int field to 1, or to v */
#define CLI_FLAG(n_, a_, T, f, h_) CLI_FLAG_SET(n_, a_, T, f, 1, h_)
#define CLI_FLAG_SET(n_, a_, T, f, v, h_)                                                                 \
    {.kind = CLI_OPT_FLAG, .name = (n_), .alt = (a_), .off = CLI_OFF_(T, f, int), .lo = (v), .help = (h_)}
#define CLI_INT(n_, a_, T, f, mv_, lo_, hi_, h_)                                                            \
    {.kind = CLI_OPT_INT, .name = (n_), .alt = (a_), .off = CLI_OFF_(T, f, int), .metavar = (mv_), .lo = (lo_), \
     .hi = (hi_), .help = (h_)}
#define CLI_U64(n_, a_, T, f, mv_, h_)                                                                     \
    {.kind = CLI_OPT_U64, .name = (n_), .alt = (a_), .off = CLI_OFF_(T, f, uint64_t), .metavar = (mv_),         \
     .help = (h_)}
#define CLI_FLOAT(n_, a_, T, f, mv_, lo_, hi_, h_)                                                          \
    {.kind = CLI_OPT_FLOAT, .name = (n_), .alt = (a_), .off = CLI_OFF_(T, f, float), .metavar = (mv_),          \
     .flo = (lo_), .fhi = (hi_), .help = (h_)}
#define CLI_STRING(n_, a_, T, f, mv_, h_)                                                                  \
    {.kind = CLI_OPT_STRING, .name = (n_), .alt = (a_), .off = CLI_OFF_(T, f, const char *), .metavar = (mv_),  \
     .help = (h_)}
#define CLI_CHOICE(n_, a_, T, f, mv_, l_, h_)                                                            \
    {.kind = CLI_OPT_CHOICE, .name = (n_), .alt = (a_), .off = CLI_OFF_INT_(T, f), .metavar = (mv_),            \
     .choices = (l_), .help = (h_)}
#define CLI_WORD(n_, a_, T, f, mv_, l_, h_)                                                              \
    {.kind = CLI_OPT_WORD, .name = (n_), .alt = (a_), .off = CLI_OFF_(T, f, const char *), .metavar = (mv_),    \
     .choices = (l_), .help = (h_)}
/* a repeatable option: its values into the array field f, their count into the int field cnt; check may be NULL */
#define CLI_LIST(n_, a_, T, f, cnt, mv_, check, h_)                                                        \
    {.kind = CLI_OPT_LIST, .name = (n_), .alt = (a_), .off = CLI_OFF_(T, f[0], const char *),                  \
     .count = CLI_OFF_(T, cnt, int), .hi = sizeof(((T *)0)->f) / sizeof(((T *)0)->f[0]), .metavar = (mv_),      \
     .fn = (check), .help = (h_)}
#define CLI_FN(n_, a_, mv_, fn_, h_)                                                                      \
    {.kind = CLI_OPT_FN, .name = (n_), .alt = (a_), .metavar = (mv_), .fn = (fn_), .help = (h_)}

/* Options every model-loading command shares: -m, --backend, --adapter, -t. */
typedef struct cli_model_opts {
    const char *model;
    wgml_backend_kind backend;
    const char *adapter;
    int threads;
} cli_model_opts;
extern const cli_opt cli_model_table[];   /* -m, --model FILE and cli_device_table */
extern const cli_opt cli_device_table[];  /* cli_backend_table and -t, --threads N */
extern const cli_opt cli_backend_table[]; /* --backend B, --adapter NAME (which makes auto webgpu) */
extern const cli_choice cli_kv_types[];   /* auto, f16, f32 (wgml_kv_type) */
#define CLI_KV_TYPE(T, f)                                                                                      \
    CLI_CHOICE("--kv-type", NULL, T, f, "T", cli_kv_types, "KV cache: auto, f16 or f32 (default auto: f16 where supported)")

/* The sampling options of run and chat: --temp, --top-k, --top-p, --min-p,
 * --repeat-penalty, --repeat-last-n, --seed. */
typedef struct cli_sampling_opts {
    wgml_sampler_params sp; /* from wgml_sampler_default_params() */
    int seed_set;           /* --seed was given */
    const char *grammar;    /* --grammar FILE (GBNF) */
    const char *schema;     /* --json-schema FILE */
} cli_sampling_opts;
extern const cli_opt cli_sampling_table[];
/* Without --seed, a seed from the clock: returns 1 then, 0 when --seed was given. */
int cli_sampling_seed(cli_sampling_opts *s);
/* The grammar of --grammar or --json-schema in *out (NULL when neither was
 * given); -1 after printing why a file cannot be read or compiled. */
int cli_sampling_grammar(const cli_sampling_opts *s, wgml_grammar **out);

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

/* A progress bar on stderr when it is a terminal; silent otherwise. */
typedef struct cli_progress {
    const char *label;
    int active;
    int last_permille;
    double t0;
    int bytes;               /* done/total are bytes (a download): shown in MiB with the rate */
    uint64_t bytes_at_start; /* bytes there when this stage began (a resumed download) */
    int stage;               /* which of cli_progress_cb's stages is shown, -1 before the first */
} cli_progress;
void cli_progress_begin(cli_progress *p, const char *label);
void cli_progress_update(cli_progress *p, uint64_t done, uint64_t total);
void cli_progress_end(cli_progress *p);
/* Adapter for wgml_model_params.progress (user = cli_progress *). */
int cli_progress_cb(void *user, const char *stage, uint64_t done, uint64_t total);
/* The local path of a model given by URL or Hugging Face name (wgml_model_fetch), downloaded
 * with a progress bar into buf when it is not in the cache; any other model as it is. NULL
 * after printing why it could not be fetched. For the commands that read a model file without
 * loading it (info, tokenize, template, bench); cli_load_model's loading fetches too. */
const char *cli_fetch_model(const char *model, char *buf, size_t cap);
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

/* ---- audio files (audio_file.c: libsndfile, linked by the CLI only) ----
 *
 * A file (by path) or bytes in memory (an upload) decoded by libsndfile into mono
 * float32 (the channels averaged) at the file's own rate: WAV, AIFF, FLAC, OGG
 * Vorbis/Opus, MP3 and the rest libsndfile reads. Each returns 0, or -1 with a message
 * in msg that names the input and the problem: it cannot be opened or is not a regular
 * file, no format libsndfile knows, a WAV that ends before the length its header gives,
 * no frames, more than CLI_AUDIO_MAX_CHANNELS channels, a rate outside
 * 1 .. CLI_AUDIO_MAX_RATE, a sample that is not finite, longer than max_seconds. */
#define CLI_AUDIO_MAX_CHANNELS 64
#define CLI_AUDIO_MAX_RATE 1000000
#define CLI_AUDIO_MAX_SECONDS (24.0 * 3600.0) /* what wgml_transcribe takes at most */
typedef struct cli_audio {
    float *pcm;      /* n mono samples, malloc'ed */
    size_t n;
    int sample_rate; /* Hz */
    int channels;    /* the file's, before averaging */
    char format[64]; /* the container's name, as libsndfile gives it ("WAV (Microsoft)") */
} cli_audio;
int cli_audio_read_file(const char *path, double max_seconds, cli_audio *a, char *msg, size_t msg_size);
/* name: how messages call the input (the upload's file name), or NULL ("the audio") */
int cli_audio_read_memory(const void *data, size_t size, const char *name, double max_seconds, cli_audio *a, char *msg,
                          size_t msg_size);
void cli_audio_free(cli_audio *a);

/* ---- transcripts (cli_transcript.c): what wgml transcribe and the server write ----
 *
 * Segments as wgml_transcribe hands them out, copied, then written in a format:
 * Whisper's own files (txt, srt, vtt, tsv: model/whisper/whisper_decode.h's writers)
 * or OpenAI's responses (json {"text", "usage"}; verbose_json {"task", "language",
 * "duration", "text", "segments" (each with OpenAI's "seek"), "words", "usage"}; text: the text and a newline). With word
 * timestamps, verbose_json's segments carry their "words" as the official result does ({"word",
 * "start", "end", "probability"}) and the top level every word as OpenAI's "words" ({"word",
 * "start", "end"}). */
typedef struct cli_word {
    char *word;
    double start, end;
    float probability;
} cli_word;
typedef struct cli_segment {
    double start, end;
    char *text;
    int32_t *tokens;
    int n_tokens;
    float temperature, avg_logprob, compression_ratio, no_speech_prob;
    cli_word *words;
    int n_words;
    int seek;
} cli_segment;
typedef struct cli_transcript {
    cli_segment *seg;
    int n, cap;
    int with_words;  /* word timestamps were asked for: verbose_json has "words" (perhaps empty) */
    int no_segments; /* verbose_json without "segments" (OpenAI's timestamp_granularities[]=word alone) */
} cli_transcript;
typedef enum cli_transcript_format {
    CLI_TRANSCRIPT_TXT,
    CLI_TRANSCRIPT_SRT,
    CLI_TRANSCRIPT_VTT,
    CLI_TRANSCRIPT_TSV,
    CLI_TRANSCRIPT_JSON,
    CLI_TRANSCRIPT_VERBOSE_JSON,
    CLI_TRANSCRIPT_TEXT,
} cli_transcript_format;
/* Appends a copy of a segment: 0, or -1 when memory runs out. */
int cli_transcript_add(cli_transcript *t, const wgml_transcript_segment *s);
void cli_transcript_free(cli_transcript *t);
/* The segments' texts joined, whitespace at both ends stripped (malloc'ed; NULL: out of memory). */
char *cli_transcript_text(const cli_transcript *t);
/* The whole transcript in fmt into *out (malloc'ed, NUL-terminated, *len bytes). task: "transcribe" or
 * "translate"; language: the code decoded ("en"; verbose_json names it, "english", as OpenAI does);
 * duration: seconds of audio. 0, or -1 with msg (out of memory, a time a writer refuses). */
int cli_transcript_render(const cli_transcript *t, cli_transcript_format fmt, const char *task, const char *language,
                          double duration, char **out, size_t *len, char *msg, size_t msg_size);
/* One segment as Whisper's txt writer has it (its text stripped, a newline) into *out (malloc'ed). */
int cli_transcript_txt_line(const wgml_transcript_segment *s, char **out, size_t *len);
/* Whisper's languages: "en" -> "english" (NULL if none); a code or an English name in any case
 * ("de", "German") -> the code (NULL if none). */
const char *cli_language_name(const char *code);
const char *cli_language_code(const char *code_or_name);

/* Loads the model with a progress bar; prints the error and returns NULL on failure. */
wgml_model *cli_load_model(const cli_model_opts *o, double *load_ms);

#endif
