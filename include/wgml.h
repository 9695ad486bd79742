/*
 * wgml.h - the public C API of wgml, a portable inference engine for
 * neural-network models on WebGPU (and on the CPU as reference and fallback).
 *
 * The whole API in four steps:
 *
 *   wgml_model *model;  wgml_error err;
 *   wgml_model_params mp = wgml_model_default_params();
 *   if (wgml_model_load("model.gguf", &mp, &model, &err) != WGML_OK) puts(err.message);
 *
 *   wgml_session *s;
 *   wgml_session_params sp = wgml_session_default_params();
 *   wgml_session_create(model, &sp, &s, &err);
 *
 *   wgml_generate_params gp = wgml_generate_default_params();
 *   gp.on_token = print_piece;            // streaming callback
 *   wgml_generate(s, "Once upon a time", &gp, &result, &err);
 *
 *   wgml_session_free(s);  wgml_model_free(model);
 *
 * Ownership: every object a wgml_*_create / _load returns is owned by the
 * caller and freed with the matching _free. A session borrows its model: free
 * sessions before the model. Strings the API returns are owned by the object
 * they came from and live as long as it does.
 *
 * Errors: every fallible call returns a wgml_status and, when `err` is not
 * NULL, fills it with the same code and a message that names the problem
 * (file, tensor, offset, ...). The library never aborts or exits on bad input.
 *
 * Threads: a model and its sessions are used by one thread at a time;
 * different models are independent. There is no global state. The exception:
 * the calls that only read a model's vocabulary and template (wgml_tokenize,
 * wgml_token_to_piece, wgml_token_to_text, wgml_token_is_eog,
 * wgml_model_chat_template and wgml_chat_render with a model) may run on any
 * thread at any time, also while another thread generates with the model; a
 * server renders and tokenizes requests beside its decode loop this way.
 * wgml_speak may also run on several threads at once on one model: each call
 * has its own state, and their steps take turns on the model's device.
 */
#ifndef WGML_H
#define WGML_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define WGML_VERSION_MAJOR 0
#define WGML_VERSION_MINOR 1
#define WGML_VERSION_PATCH 0

/* ---- errors -------------------------------------------------------------- */

typedef enum wgml_status {
    WGML_OK = 0,
    WGML_ERR_INVALID_ARGUMENT, /* a parameter out of range, NULL where not allowed */
    WGML_ERR_IO,               /* a file could not be opened, read or written */
    WGML_ERR_FORMAT,           /* a file is corrupt or not what it claims to be */
    WGML_ERR_UNSUPPORTED,      /* valid input we do not handle (architecture, type) */
    WGML_ERR_OUT_OF_MEMORY,    /* host allocation failed */
    WGML_ERR_CONTEXT_FULL,     /* the tokens do not fit in the session's context */
    WGML_ERR_GPU,              /* a WebGPU call failed (validation, shader, OOM) */
    WGML_ERR_DEVICE_LOST,      /* the GPU device was lost; free the model */
    WGML_ERR_NO_ADAPTER,       /* no usable GPU adapter */
    WGML_ERR_TOKENIZER,        /* text cannot be tokenized with this vocabulary */
    WGML_ERR_TEMPLATE,         /* a chat template failed or refused the messages (raise_exception) */
    WGML_ERR_NETWORK,          /* a download failed: no connection, an HTTP error, a file failing its check */
} wgml_status;

#define WGML_ERROR_MESSAGE_MAX 512

typedef struct wgml_error {
    wgml_status code;
    char message[WGML_ERROR_MESSAGE_MAX];
} wgml_error;

/* A short constant name for a status code ("out of memory", ...). */
const char *wgml_status_name(wgml_status status);

/* ---- models -------------------------------------------------------------- */

typedef enum wgml_backend_kind {
    WGML_BACKEND_AUTO = 0, /* a hardware WebGPU adapter if there is one, else CPU */
    WGML_BACKEND_CPU,
    WGML_BACKEND_WEBGPU,
} wgml_backend_kind;

/* Called during long work with done in [0, total]. Return non-zero to cancel. */
typedef int (*wgml_progress_fn)(void *user, const char *stage, uint64_t done, uint64_t total);

/* WebGPU capability overrides: run a lower tier than the adapter offers. */
#define WGML_WEBGPU_NO_F16 1u        /* keep to the f32 tier even with shader-f16 */
#define WGML_WEBGPU_NO_SUBGROUPS 2u  /* workgroup-memory reductions even with subgroups */

typedef struct wgml_model_params {
    wgml_backend_kind backend;
    const char *adapter;        /* WebGPU: substring of the adapter name, or NULL */
    unsigned webgpu_flags;      /* WGML_WEBGPU_* capability overrides (testing, debugging) */
    int n_threads;              /* CPU threads; 0 = one per core */
    wgml_progress_fn progress;  /* optional */
    void *progress_user;
    void (*log)(void *user, const char *line); /* optional notes (e.g. fallback) */
    void *log_user;
} wgml_model_params;

typedef struct wgml_model wgml_model;

wgml_model_params wgml_model_default_params(void);

/* Loads a model file and prepares it on the chosen backend: a GGUF
 * (memory-mapped), or whisper.cpp's ggml .bin (converted to a GGUF in memory). */
wgml_status wgml_model_load(const char *path, const wgml_model_params *params,
                            wgml_model **out, wgml_error *err);

/* Same, from bytes in memory (a GGUF, or a whisper.cpp .bin) that stay valid and
 * unchanged until the model is freed. */
wgml_status wgml_model_load_memory(const void *data, size_t size, const wgml_model_params *params,
                                   wgml_model **out, wgml_error *err);

/* Reads up to `len` bytes at `offset` of the model file into buf; returns the
 * count read (fewer only at the end of the file), or -1 on error. */
typedef int64_t (*wgml_read_fn)(void *user, uint64_t offset, void *buf, size_t len);

/* Loads a GGUF model of `size` bytes by pulling it through `read` in file
 * order and in bounded chunks: the header first, then each tensor's data
 * straight to the backend (on a GPU, into its buffers), so the whole file is
 * never in memory at once - for the browser, or any non-file source. */
wgml_status wgml_model_load_stream(wgml_read_fn read, void *user, uint64_t size, const wgml_model_params *params,
                                   wgml_model **out, wgml_error *err);

void wgml_model_free(wgml_model *model);

/* ---- models by URL --------------------------------------------------------
 * wgml_model_load (and every command that takes a model) also takes a model
 * by name, downloaded once into a cache (docs/models-by-url.md):
 *   https://host/path/model.gguf       a file at a URL (or http://)
 *   hf://owner/repo/path/file.gguf     a file of a Hugging Face repository
 *   hf://owner/repo:Q4_K_M             the repository's GGUF of that quantization
 *   owner/repo:Q4_K_M                  the same, when no such local path exists
 *   hf://owner/repo                    its Q4_K_M GGUF, else Q8_0, else the first;
 *                                      or a folder of config.json + safetensors
 * Downloads resume after a dropped connection or an interrupted run, and are
 * checked against the size and SHA-256 the server gives before they are used.
 * The cache: $WGML_CACHE_DIR/models, else $XDG_CACHE_HOME/wgml/models, else
 * ~/.cache/wgml/models. $HF_TOKEN goes to Hugging Face ($HF_ENDPOINT) only.
 * WGML_OFFLINE=1 (or HF_HUB_OFFLINE=1) keeps to the cache. wgml_model_load
 * reports the download through wgml_model_params.progress (stage "download"). */

typedef struct wgml_fetch_params {
    int offline;               /* 1: the cache only, never the network (or WGML_OFFLINE=1) */
    const char *cache_dir;     /* the folder to keep models in; NULL: as above */
    const char *hf_token;      /* NULL: $HF_TOKEN */
    wgml_progress_fn progress; /* stages "download" (bytes) and "verify"; may cancel */
    void *progress_user;
    void (*log)(void *user, const char *line); /* retries, the cache used without a connection */
    void *log_user;
} wgml_fetch_params;

wgml_fetch_params wgml_fetch_default_params(void);

/* 1 when `model` is one of the forms above (and not an existing local path). */
int wgml_model_is_remote(const char *model);

/* The local path of `model` into path (cap bytes): a local path as it is, a
 * remote one after finding it in the cache or downloading it there. A
 * download that fails leaves what it got for the next try to resume. */
wgml_status wgml_model_fetch(const char *model, const wgml_fetch_params *params, char *path, size_t cap,
                             wgml_error *err);

/* What a model can be used for: a family's tasks, as bits. GENERATE has
 * sessions and wgml_generate (the llama family), EMBED wgml_embed and RERANK
 * wgml_rerank (the bert family), SPEECH wgml_speak (the kokoro family),
 * TRANSCRIBE wgml_transcribe (the whisper family), EMBED_IMAGE
 * wgml_embed_images and CLASSIFY wgml_classify_images / wgml_zero_shot_classify
 * (the clip family; with a text tower also EMBED: texts into the images' space). */
typedef enum wgml_task {
    WGML_TASK_GENERATE = 1u << 0,   /* text generation: sessions, wgml_generate (the LLM family) */
    WGML_TASK_EMBED = 1u << 1,      /* text to an embedding vector */
    WGML_TASK_RERANK = 1u << 2,     /* a relevance score for a query and a document */
    WGML_TASK_SPEECH = 1u << 3,     /* text to speech */
    WGML_TASK_TRANSCRIBE = 1u << 4, /* speech to text */
    WGML_TASK_EMBED_IMAGE = 1u << 5, /* an image to an embedding vector (CLIP, SigLIP, ViT) */
    WGML_TASK_CLASSIFY = 1u << 6,    /* an image's scores over labels (a ViT classifier) */
} wgml_task;

typedef struct wgml_model_info {
    /* every model */
    const char *family;       /* the model family that runs it: "llama" */
    uint32_t tasks;           /* what it can do: wgml_task bits (llama: WGML_TASK_GENERATE) */
    const char *architecture; /* general.architecture: "llama", "qwen2" */
    const char *name;         /* general.name or "" */
    const char *backend;      /* "cpu" or "webgpu" */
    const char *adapter;      /* adapter name; on the CPU the instruction set ("avx2", ...) */
    int n_threads;            /* CPU threads (CPU backend) */
    uint64_t n_params;
    uint64_t weights_bytes; /* bytes of all weight tensors as stored */
    const char *matmul_type; /* the type most of its matrices are stored in, by bytes: "Q4_K" */
    int32_t bos, eos;       /* -1 when the vocabulary has none (BERT: [CLS] and [SEP]) */
    /* transformers (families "llama" and "bert"; zero for others) */
    int n_vocab, n_ctx_train, n_embd, n_layer, n_head, n_head_kv, n_ff, head_dim;
    uint64_t matmul_params; /* weights used in matrix products per token (all but embeddings and output) */
    /* the LLM family's section (family "llama") */
    int tied_embeddings;    /* the output projection reuses the token embedding */
    /* the encoder family's section (family "bert") */
    int pooling;            /* the file's pooling (wgml_pooling; WGML_POOLING_NONE: none given) */
    int causal;             /* attention is causal (bert.attention.causal) */
    /* the speech family's section (family "kokoro") */
    int sample_rate;        /* of the audio it makes */
    int n_voices;           /* voices in the file */
} wgml_model_info;

void wgml_model_get_info(const wgml_model *model, wgml_model_info *info);

/* ---- text ---------------------------------------------------------------- */

/* Tokenizes UTF-8 text. Returns the number of tokens, which may exceed `cap`
 * (then only the first `cap` were written); negative on error. */
int wgml_tokenize(const wgml_model *model, const char *text, size_t len, int add_bos,
                  int32_t *tokens, int cap, wgml_error *err);

/* The bytes of one token (special tokens render as their text). Returns the
 * length, which may exceed `cap`; negative when the id is out of range. */
int wgml_token_to_piece(const wgml_model *model, int32_t token, char *buf, int cap);

/* ---- sessions -------------------------------------------------------------- */

/* How the KV cache stores keys and values. */
typedef enum wgml_kv_type {
    WGML_KV_DEFAULT = 0, /* the backend's choice: f16 on the CPU and on WebGPU devices with
                            shader-f16, f32 on the others */
    WGML_KV_F16 = 1,     /* half the memory and half the bytes read per token at long context */
    WGML_KV_F32 = 2,     /* exact f32 attention inputs (the CPU backend only, and WebGPU
                            devices without shader-f16) */
} wgml_kv_type;

typedef struct wgml_session_params {
    int n_ctx;            /* context length in tokens; 0 = the model's training context, capped at 4096 */
    int n_batch;          /* most tokens evaluated in one step during prompt processing; 0 = 64 */
    wgml_kv_type kv_type; /* WGML_KV_DEFAULT; a type the backend cannot use is an error */
} wgml_session_params;

typedef struct wgml_session wgml_session;

wgml_session_params wgml_session_default_params(void);
wgml_status wgml_session_create(wgml_model *model, const wgml_session_params *params,
                                wgml_session **out, wgml_error *err);
void wgml_session_free(wgml_session *session);
/* Forgets all tokens (the KV cache is reused). */
void wgml_session_reset(wgml_session *session);
int wgml_session_n_ctx(const wgml_session *session);
int wgml_session_n_past(const wgml_session *session);

/* Low level: appends tokens to the context and computes the logits of the last
 * one, readable with wgml_session_logits until the next call. */
wgml_status wgml_session_eval(wgml_session *session, const int32_t *tokens, int n,
                              wgml_error *err);
const float *wgml_session_logits(const wgml_session *session);

/* ---- generation -------------------------------------------------------------- */

typedef struct wgml_sampler_params {
    float temperature;    /* 0 = greedy */
    int top_k;            /* 0 = off */
    float top_p;          /* 1 = off */
    float min_p;          /* 0 = off */
    float repeat_penalty; /* 1 = off */
    int repeat_last_n;    /* tokens the penalty looks back over */
    uint64_t seed;
} wgml_sampler_params;

typedef enum wgml_stop_reason {
    WGML_STOP_NONE = 0,
    WGML_STOP_EOS,         /* the model produced end-of-sequence */
    WGML_STOP_MAX_TOKENS,  /* n_predict tokens were generated */
    WGML_STOP_CONTEXT_FULL,/* the context has no room for another token */
    WGML_STOP_CALLBACK,    /* the token callback asked to stop */
} wgml_stop_reason;

const char *wgml_stop_reason_name(wgml_stop_reason reason);

/* Receives each generated token and its text as it is produced. The text is
 * whole UTF-8 characters: bytes of a character split across tokens are held
 * back until it is complete (a final call with token -1 flushes bytes still
 * held when generation ends). Return non-zero to stop. */
typedef int (*wgml_token_fn)(void *user, int32_t token, const char *text, size_t len);

/* ---- grammars: constrained generation ---------------------------------------- */

/* A compiled grammar that the generated text must follow: GBNF as llama.cpp
 * defines it (docs/grammar.md), or made from a JSON Schema. It holds no state
 * of a generation, so one grammar may constrain any number of generations at
 * once, on any models; it must outlive them. With a grammar, only tokens that
 * keep the text a prefix of something the grammar accepts can be picked, and
 * end of sequence only where the grammar may end (when nothing else can
 * follow, only end of sequence). Sampling options apply within that set. */
typedef struct wgml_grammar wgml_grammar;

/* GBNF text (len bytes; root is the start rule). Errors name the line and column. */
wgml_status wgml_grammar_create(const char *gbnf, size_t len, wgml_grammar **out, wgml_error *err);
/* A JSON Schema (JSON text, len bytes) as a grammar for the JSON documents it
 * allows (docs/grammar.md lists the keywords; an unsupported one is an error
 * naming it, never ignored). NULL schema: any JSON object (OpenAI's
 * response_format json_object). */
wgml_status wgml_grammar_from_json_schema(const char *schema, size_t len, wgml_grammar **out, wgml_error *err);
/* A JSON Schema's GBNF text (what wgml_grammar_from_json_schema compiles), with its start rule
 * called `name` and every other rule's name beginning with it (NULL: "root"; else 1-40 letters,
 * digits or '-'), so that several schemas can be parts of one grammar (a tool call's arguments).
 * *gbnf is malloc'ed, NUL-terminated (the caller frees it). */
wgml_status wgml_json_schema_to_gbnf(const char *schema, size_t len, const char *name, char **gbnf, wgml_error *err);
/* The grammar's GBNF text (for a schema: the grammar made from it). */
const char *wgml_grammar_text(const wgml_grammar *grammar);
void wgml_grammar_free(wgml_grammar *grammar);

/* ---- tool calls ---------------------------------------------------------------- */

/* How a chat template's model writes tool calls (docs/grammar.md, *Tool calls*). */
typedef enum wgml_tool_format {
    WGML_TOOLS_GENERIC = 0, /* {"tool_calls": [{"name", "arguments"}, ...]}: a template with none of its own */
    WGML_TOOLS_HERMES,      /* <tool_call>\n{"name", "arguments"}\n</tool_call> (Hermes, Qwen2.5, Qwen3) */
    WGML_TOOLS_LLAMA3,      /* {"name", "parameters"} (Llama 3.1, 3.2) */
    WGML_TOOLS_MISTRAL,     /* [TOOL_CALLS] [{"name", "arguments"}, ...] */
} wgml_tool_format;

typedef enum wgml_tool_choice {
    WGML_TOOL_CHOICE_AUTO = 0, /* text, or calls from where the format's call begins (wgml_tools_trigger) */
    WGML_TOOL_CHOICE_NONE,     /* no calls */
    WGML_TOOL_CHOICE_REQUIRED, /* calls from the first token */
    WGML_TOOL_CHOICE_NAMED,    /* one call of the named function */
} wgml_tool_choice;

/* The format of a template's text (NULL: generic). */
wgml_tool_format wgml_tool_format_of(const char *chat_template);
const char *wgml_tool_format_name(wgml_tool_format format);

/* A request's tools: OpenAI's `tools` array (JSON text, len bytes), checked (each a function with
 * a valid, unique name and a JSON Schema object as parameters), and the grammar the calls follow
 * (not for NONE; `name`: the function of NAMED; parallel 0: exactly one call). Errors name the
 * place: "tools[1] (add): parameters: json schema: at #/properties/a: ...", "tool_choice names
 * 'x', which is not among the tools". Give the same tools JSON to the template (wgml_chat_params
 * extra_json {"tools": [...]}). */
typedef struct wgml_tools wgml_tools;
wgml_status wgml_tools_create(const char *tools_json, size_t len, wgml_tool_format format, wgml_tool_choice choice,
                              const char *name, int parallel, wgml_tools **out, wgml_error *err);
void wgml_tools_free(wgml_tools *tools);
/* The calls' grammar (owned by tools; NULL for NONE): from the first token for REQUIRED and
 * NAMED; for AUTO from the trigger on (wgml_batch_seq_grammar with the text from the trigger as
 * its prefix). */
const wgml_grammar *wgml_tools_grammar(const wgml_tools *tools);
/* AUTO: the text where calls begin ("<tool_call>" anywhere; "{" or "[" only as the reply's first
 * character other than white space: *at_start 1); otherwise NULL. */
const char *wgml_tools_trigger(const wgml_tools *tools, int *at_start);
/* The calls in a reply's text (from the trigger on, or the whole reply) as OpenAI's tool_calls
 * JSON array ([{"id", "type": "function", "function": {"name", "arguments" (JSON text)}}]; ids
 * from id_seed), malloc'ed (the caller frees it); *calls_json NULL when the text is not calls of
 * these tools (then it is text). */
wgml_status wgml_tools_parse(const wgml_tools *tools, const char *text, size_t len, uint64_t id_seed, char **calls_json,
                             wgml_error *err);

typedef struct wgml_generate_params {
    int n_predict;      /* tokens to generate at most; <0 = until EOS or the context is full */
    int add_bos;        /* prepend BOS when the vocabulary wants it (default 1) */
    int ignore_eos;     /* keep generating past end-of-sequence (benchmarks) */
    wgml_sampler_params sampler;
    wgml_token_fn on_token;
    void *user;
    const wgml_grammar *grammar; /* NULL: none; else the generated text follows it */
} wgml_generate_params;

typedef struct wgml_generate_result {
    int n_prompt;       /* tokens in the prompt, BOS included */
    int n_generated;
    wgml_stop_reason stop;
    double prompt_ms;   /* prompt processing */
    double generate_ms; /* generation after the first token */
    double ttft_ms;     /* from the call to the first generated token */
} wgml_generate_result;

wgml_sampler_params wgml_sampler_default_params(void);
wgml_generate_params wgml_generate_default_params(void);

/* Tokenizes the prompt, evaluates it after what the session already holds, and
 * samples up to n_predict tokens, streaming each through on_token. */
wgml_status wgml_generate(wgml_session *session, const char *prompt,
                          const wgml_generate_params *params, wgml_generate_result *result,
                          wgml_error *err);

/* ---- several sequences decoded together (a server's slots) ------------------ */

/* A batch holds n_seq independent sequences of one model, each with its own
 * KV cache and positions. One wgml_batch_step evaluates the next tokens of
 * several of them in one forward pass, which reads each weight once for all
 * (decode is bandwidth-bound: N streams cost little more than one), e.g. every
 * running stream's next token plus a chunk of a new prompt. A sequence's
 * greedy tokens are the same whether it ran alone or beside others. */
typedef struct wgml_batch wgml_batch;

typedef struct wgml_batch_params {
    int n_seq;            /* sequences; 0 = 4 */
    int n_ctx;            /* context of each sequence; 0 = as a session's default */
    int n_batch;          /* most tokens in one step, all sequences together; 0 = 64 + n_seq */
    wgml_kv_type kv_type; /* as wgml_session_params */
} wgml_batch_params;

wgml_batch_params wgml_batch_default_params(void);
wgml_status wgml_batch_create(wgml_model *model, const wgml_batch_params *params, wgml_batch **out,
                              wgml_error *err);
void wgml_batch_free(wgml_batch *batch);
int wgml_batch_n_seq(const wgml_batch *batch);
int wgml_batch_n_ctx(const wgml_batch *batch);
int wgml_batch_n_batch(const wgml_batch *batch);

/* The tokens sequence seq holds (in its KV cache): *n of them; NULL when seq is out of range. */
const int32_t *wgml_batch_seq_tokens(const wgml_batch *batch, int seq, int *n);
/* Keeps the first n_keep tokens of sequence seq and forgets the rest (0: all), so that a
 * follow-up sharing a prefix with what it holds evaluates only the rest. */
wgml_status wgml_batch_seq_keep(wgml_batch *batch, int seq, int n_keep, wgml_error *err);
/* How the tokens wgml_batch_step picks for sequence seq are chosen (default: greedy);
 * restarts its random stream from params->seed, and ends a grammar (set it after). */
wgml_status wgml_batch_seq_sampler(wgml_batch *batch, int seq, const wgml_sampler_params *params,
                                   wgml_error *err);

/* Constrains the tokens picked for sequence seq, from its next pick on, to
 * what grammar accepts after `prefix` (len bytes taken as already generated:
 * a constraint that starts once a trigger appeared in free text; NULL: none).
 * grammar NULL: no constraint. The grammar must outlive its use; it ends with
 * the next wgml_batch_seq_grammar or wgml_batch_seq_keep of seq. An error when
 * the prefix is not one the grammar allows. */
wgml_status wgml_batch_seq_grammar(wgml_batch *batch, int seq, const wgml_grammar *grammar, const char *prefix,
                                   size_t len, wgml_error *err);

/* Adds bias[i] to the logit of tokens[i] before sequence seq's picks (OpenAI's logit_bias: -100
 * or less bans a token, +100 all but forces it), until the next wgml_batch_seq_sampler; n 0 clears.
 * Ids out of the vocabulary are an error. */
wgml_status wgml_batch_seq_logit_bias(wgml_batch *batch, int seq, const int32_t *tokens, const float *bias, int n,
                                      wgml_error *err);

/* Why the last pick of sequence seq failed (its item's next is -1), or "". */
const char *wgml_batch_seq_error(const wgml_batch *batch, int seq);

/* One sequence's part of a step. */
typedef struct wgml_batch_item {
    int seq;               /* 0 .. n_seq-1, once per step */
    const int32_t *tokens; /* appended to what the sequence holds */
    int n_tokens;          /* at least 1 */
    int sample;            /* 1: pick the token after the last one, with the sequence's sampler */
    int logits;            /* 1: keep the last token's logits (wgml_batch_logits) */
    int32_t next;          /* out: the token picked, or -1 (with sample: a grammar no token can
                              continue; wgml_batch_seq_error says why) */
} wgml_batch_item;

/* Evaluates one step: each item's tokens after what its sequence holds, all
 * in one forward pass (n_tokens summing to at most n_batch). A picked token
 * is not appended: pass it as the sequence's token in the next step. On an
 * error no sequence takes the step's tokens. */
wgml_status wgml_batch_step(wgml_batch *batch, wgml_batch_item *items, int n_items, wgml_error *err);
/* The logits (n_vocab floats) of sequence seq's last token in the last step whose item asked
 * for them and until its next step; otherwise NULL. */
const float *wgml_batch_logits(const wgml_batch *batch, int seq);

/* Text helpers for a caller's own generation loop. The bytes of `token` as
 * they follow `prev` in a sequence (-1: none): wgml_token_to_piece, except that
 * a SentencePiece vocabulary drops the leading space of the piece right after
 * BOS (as wgml_generate does). Returns the length (may exceed cap); negative
 * for an id out of range. */
int wgml_token_to_text(const wgml_model *model, int32_t prev, int32_t token, char *buf, int cap);
/* 1 when the token ends a generation (EOS, or an end-of-turn token such as <|im_end|>). */
int wgml_token_is_eog(const wgml_model *model, int32_t token);

/* An RGB image as 8-bit pixels: h rows of w pixels, 3 bytes each (R, G, B),
 * row y starting at data + y * stride (stride >= 3 * w). The vision models
 * (CLIP, SigLIP, ViT) resize, crop and normalize it themselves, as the
 * model's Hugging Face image processor does. */
typedef struct wgml_image {
    int w, h;
    size_t stride;
    const uint8_t *data;
} wgml_image;

/* ---- embeddings and reranking (task EMBED / RERANK: the bert family) ------- */

/* How the token vectors of a text become one vector. */
typedef enum wgml_pooling {
    WGML_POOLING_MODEL = 0, /* the model file's (bert.pooling_type); mean when the file names none */
    WGML_POOLING_MEAN,      /* the mean of every token's vector, [CLS] and [SEP] included */
    WGML_POOLING_CLS,       /* the first token's ([CLS]) */
    WGML_POOLING_LAST,      /* the last token's */
    WGML_POOLING_NONE,      /* (wgml_model_info.pooling only: the file names none) */
} wgml_pooling;

typedef enum wgml_normalize {
    WGML_NORMALIZE_L2 = 0, /* unit length (cosine similarity is then a dot product) */
    WGML_NORMALIZE_NONE,   /* the pooled vector as it is */
} wgml_normalize;

typedef struct wgml_embed_params {
    wgml_pooling pooling;     /* WGML_POOLING_MODEL */
    wgml_normalize normalize; /* WGML_NORMALIZE_L2 */
    int dimensions;           /* 0: the model's n_embd; else keep the first N values (Matryoshka
                                 models), then normalize */
    int truncate;             /* 1: a text longer than the model's context is cut to fit (a note
                                 through the model's log); 0: it is an error */
    int n_batch;              /* most tokens evaluated in one step, texts packed together; 0: 512 on
                                 the CPU (steps that stay in its caches), 2048 on a GPU */
} wgml_embed_params;

wgml_embed_params wgml_embed_default_params(void);

/* The length of one vector wgml_embed writes under these params (NULL:
 * defaults); -1 when the model has no EMBED task or dimensions is out of range. */
int wgml_embed_dim(const wgml_model *model, const wgml_embed_params *params);

/* Embeds n UTF-8 texts: each becomes [CLS] text [SEP] (or the vocabulary's
 * own special tokens: CLIP's <|startoftext|> text <|endoftext|>, SigLIP's
 * text </s> padded to its context of 64), texts are packed into
 * steps of up to n_batch tokens (each attends to itself only), and vector i
 * goes to out[i * dim .. (i+1) * dim). dim must be wgml_embed_dim(model,
 * params). The same text gives the same vector alone or in any batch, to
 * float rounding: how a step's rows fall into the matmul kernels' tiles
 * depends on its size, and so does the order of some sums (float weights:
 * differences of an ulp or so; tests/test_embed.c allows 1e-5). */
wgml_status wgml_embed(wgml_model *model, const char *const *texts, int n, const wgml_embed_params *params,
                       float *out, int dim, wgml_error *err);

/* Scores n documents against a query with a reranker (task RERANK: a
 * cross-encoder, pooling "rank"): each pair is [CLS] query [SEP] doc [SEP]
 * (the document's tokens of token type 1), and scores[i] is the model's
 * relevance logit for docs[i] (higher: more relevant; no sigmoid). A pair
 * longer than the context keeps the query and cuts the document, with a
 * note through the model's log. */
wgml_status wgml_rerank(wgml_model *model, const char *query, const char *const *docs, int n, float *scores,
                        wgml_error *err);

/* ---- images (tasks EMBED_IMAGE and CLASSIFY: the clip family) ------------- */

/* Embeds n images (task EMBED_IMAGE: CLIP, SigLIP and ViT vision towers).
 * Each image is preprocessed as the model's Hugging Face image processor
 * does (resize with Pillow's filters, center crop, rescale, normalize: the
 * parameters the file holds), the images are packed into steps of up to
 * params->n_batch images (0: 16 on the CPU, 64 on a GPU; each attends to its
 * own rows only), and vector i goes to out[i * dim .. (i+1) * dim). dim must
 * be wgml_embed_dim(model, params): the projection's size (CLIP), else the
 * width. params->normalize as for texts (L2 by default); pooling, truncate
 * and dimensions are not used (0). An image of 0 or more than 65535 pixels a
 * side is an error naming it. */
wgml_status wgml_embed_images(wgml_model *model, const wgml_image *images, int n, const wgml_embed_params *params,
                              float *out, int dim, wgml_error *err);

/* The labels of a classifier (task CLASSIFY: a ViT with its head): how many,
 * and label i's name (NULL out of range or without a classifier). */
int wgml_model_n_labels(const wgml_model *model);
const char *wgml_model_label(const wgml_model *model, int i);

/* Classifies n images over the model's labels: probs[i * n_labels + j] is
 * image i's softmax probability of label j (n_labels = wgml_model_n_labels). */
wgml_status wgml_classify_images(wgml_model *model, const wgml_image *images, int n, float *probs, int n_labels,
                                 wgml_error *err);

/* Zero-shot classification by a model with an image and a text tower (CLIP,
 * SigLIP): n images scored against n_labels label texts ("a photo of a
 * cat"); logit = exp(logit_scale) cos(image, text) (+ logit_bias: SigLIP),
 * and probs[i * n_labels + j] is CLIP's softmax over the labels, SigLIP's
 * sigmoid of each label on its own (its labels need not sum to 1). Labels
 * longer than the text context are cut (keeping the end token). */
wgml_status wgml_zero_shot_classify(wgml_model *model, const wgml_image *images, int n, const char *const *labels,
                                    int n_labels, float *probs, wgml_error *err);

/* ---- speech (task SPEECH: the kokoro family) ------------------------------- */

/* A word of a chunk and when it is spoken. */
typedef struct wgml_word_time {
    const char *word;        /* as the input has it: for text, the text's word (punctuation around it
                                stripped; where the normalization rewrote it, e.g. "$4.99" said "four
                                dollars and ninety-nine cents", all it became); for phonemes, a run of
                                them between spaces (punctuation stripped) */
    const char *phonemes;    /* what is said for it */
    double start, end;       /* seconds from the start of the whole utterance */
    int64_t offset, length;  /* where word is in the input string, bytes */
} wgml_word_time;

/* One piece of speech (a sentence, or part of a long one), valid during the
 * callback only. */
typedef struct wgml_audio_chunk {
    const float *samples;      /* mono float32, nominally in [-1, 1] */
    int64_t n_samples;
    int sample_rate;           /* 24000 for Kokoro */
    double start;              /* seconds: where the chunk begins in the utterance */
    const char *phonemes;      /* what it says */
    const wgml_word_time *words;
    int n_words;
    int index;                 /* 0, 1, ... */
} wgml_audio_chunk;

/* Receives each chunk as soon as it is made; return non-zero to stop. */
typedef int (*wgml_audio_fn)(void *user, const wgml_audio_chunk *chunk);

/* How a long input is cut into the pieces the model speaks one at a time. */
typedef enum wgml_speak_split {
    WGML_SPLIT_SENTENCES = 0, /* at sentence ends and line ends (and within 510 phonemes): each sentence's
                                 audio streams as soon as it is made (the default) */
    WGML_SPLIT_NONE = 1,      /* one pass over up to 510 phonemes, as the official KPipeline speaks such
                                 input (its audio for a multi-sentence string); longer input is cut only
                                 where it must be (at 510 phonemes: clause punctuation, else a space) */
} wgml_speak_split;

typedef struct wgml_speak_params {
    float speed;        /* 1 = the voice's pace; 1.3 speaks 30% faster */
    const char *lang;   /* text input: "en-us" (default) or "en-gb" */
    int phonemes;       /* 1: the input is phonemes (the model's symbols), not text */
    uint64_t seed;      /* the vocoder's noise: the same seed gives the same audio on one backend */
    const char *espeak; /* text input: the espeak-ng program; NULL: $WGML_ESPEAK, else espeak-ng on PATH */
    int full_precision; /* 1: every matrix product in f32 on the CPU too. 0 (default): the decoder's and
                           vocoder's as bf16 pairs where the CPU has them (AVX512_BF16) and they
                           measured faster than f32 on it (about 1.5x on AMD Zen), the audio measured
                           unchanged (docs/kokoro.md); the prosody is f32 */
    wgml_speak_split split; /* WGML_SPLIT_SENTENCES (default) or WGML_SPLIT_NONE */
} wgml_speak_params;

typedef struct wgml_speak_result {
    int64_t n_samples;      /* audio made, all chunks */
    int n_chunks;
    double first_audio_ms;  /* from the call to the first chunk */
    double total_ms;
} wgml_speak_result;

wgml_speak_params wgml_speak_default_params(void);

/* Speaks text (or phonemes): text goes through the G2P (English, espeak-ng
 * as a separate program), then the phonemes are cut at sentence ends (and
 * long sentences at clauses, so that no piece exceeds 510 phonemes) and each
 * piece is synthesized and handed to on_audio in order. voice: a voice of the
 * model by name ("af_heart", wgml_speech_voice), a voice file (kokoro-js
 * .bin or the official .pt), or a blend ("af_heart:0.6,am_adam:0.4").
 * result may be NULL. */
wgml_status wgml_speak(wgml_model *model, const char *input, const char *voice, const wgml_speak_params *params,
                       wgml_audio_fn on_audio, void *user, wgml_speak_result *result, wgml_error *err);

/* The name of the model's voice i (0 ..), NULL past the last. */
const char *wgml_speech_voice(const wgml_model *model, int i);

/* ---- speech recognition (the whisper family) -------------------------------- */

/* A word of a segment with its time (word_timestamps). */
typedef struct wgml_transcript_word {
    const char *text;  /* as in the segment's text, with its leading space */
    double start, end; /* seconds from the start of the audio */
    float probability;
} wgml_transcript_word;

/* A piece of the transcript, valid during the callback only. */
typedef struct wgml_transcript_segment {
    int index;                /* 0, 1, ... */
    double start, end;        /* seconds from the start of the audio */
    const char *text;         /* UTF-8 (invalid bytes of a token as U+FFFD) */
    const int32_t *tokens;    /* its ids: text and timestamps */
    int n_tokens;
    float temperature;        /* of the decoding that gave it (fallback raises it) */
    float avg_logprob;        /* of its window's tokens */
    float compression_ratio;  /* of its window's text (0 when not computed) */
    float no_speech_prob;     /* of its window */
    const wgml_transcript_word *words; /* word_timestamps: its words, else NULL */
    int n_words;
    int seek; /* its window's first mel frame (10 ms each: seek / 100.0 seconds) */
} wgml_transcript_segment;

/* Receives each segment as soon as its window is decoded; non-zero stops. */
typedef int (*wgml_segment_fn)(void *user, const wgml_transcript_segment *segment);

typedef struct wgml_transcribe_params {
    const char *language;     /* "en", "de", ...; NULL or "auto": detected on the first window */
    int translate;            /* 1: translate into English (multilingual models) */
    int without_timestamps;   /* 1: no timestamp tokens: a segment per 30 s window */
    int beam_size;            /* 0 or 1: greedy; 5: the official beam search (at temperature 0) */
    float patience;           /* beam search: finished hypotheses wanted = beam_size * patience (1) */
    float temperature;        /* the first try's; 0: greedy or beam */
    int no_fallback;          /* 1: keep the first try (no temperature fallback) */
    float temperature_increment; /* fallback ladder step: 0.2 (0, 0.2, ..., 1.0) */
    float compression_ratio_threshold; /* 2.4 (0: off) */
    float logprob_threshold;  /* -1.0 (0: off) */
    float no_speech_threshold; /* 0.6 (0: off) */
    int condition_on_previous_text; /* 1: each window sees the text before it */
    const char *prompt;       /* text before the first window (names, spelling, style) or NULL */
    int word_timestamps;      /* 1: each segment's words with times */
    int max_tokens;           /* per window: 0 = 224 (the official sample_len) */
    uint64_t seed;            /* sampling at temperature > 0 */
    wgml_kv_type kv_type;     /* how a window's cross-attention keys and values are kept (what every
                                 decoder step reads): default f16 where the backend can (the CPU: half
                                 the bytes; logits move by ~1e-3), f32 on WebGPU; F32: exact f32 */
} wgml_transcribe_params;

typedef struct wgml_transcribe_result {
    char language[8];   /* the language decoded ("en") */
    double duration;    /* seconds of audio */
    int n_segments, n_windows, n_tokens;
    double encode_ms, decode_ms, total_ms;
} wgml_transcribe_result;

wgml_transcribe_params wgml_transcribe_default_params(void);

/* Transcribes (or translates) mono audio: pcm holds n samples at
 * sample_rate Hz (resampled to the model's 16 kHz), in [-1, 1]. The audio is
 * decoded window by window as the official transcribe() does, and each
 * segment is handed to on_segment in order. Two requests on one model may
 * run from two threads. result may be NULL. */
wgml_status wgml_transcribe(wgml_model *model, const float *pcm, size_t n, int sample_rate,
                            const wgml_transcribe_params *params, wgml_segment_fn on_segment, void *user,
                            wgml_transcribe_result *result, wgml_error *err);

/* ---- performance monitor ---------------------------------------------------- */

/* Counters of the model's backend since it was created. */
typedef struct wgml_counters {
    uint64_t steps;               /* forward passes (one per decode token, one per prompt batch) */
    uint64_t submits;             /* GPU queue submissions (CPU: = steps) */
    uint64_t dispatches;          /* GPU kernel dispatches */
    uint64_t buffers_created, bind_groups_created, pipelines_created;
    uint64_t upload_bytes;        /* host -> device during steps */
    uint64_t readback_bytes;      /* device -> host during steps */
    uint64_t device_memory_bytes; /* currently allocated by the backend (GPU buffers / CPU scratch) */
    double pipeline_compile_ms;   /* time spent compiling GPU kernels so far */
} wgml_counters;

void wgml_model_get_counters(const wgml_model *model, wgml_counters *c);

/* Per-kernel timing: GPU timestamps on WebGPU (when the adapter has them),
 * wall time per op on the CPU. Turning it on clears the table. Timing can
 * slow the work it measures (the GPU then runs one pass per kernel). */
void wgml_model_set_profiling(wgml_model *model, int on);

typedef struct wgml_kernel_stat {
    const char *name;
    uint64_t calls;
    double total_ms;
    double flop; /* arithmetic of those calls (2 per multiply-add: the CPU's matmuls), 0 where not counted */
} wgml_kernel_stat;

/* Fills up to cap entries; returns how many kernels have times. */
int wgml_model_get_kernel_times(const wgml_model *model, wgml_kernel_stat *out, int cap);

/* Bytes one decode step of this session reads with kv_len tokens in the
 * context: every weight once (one row of the embedding table) plus the K and
 * V caches in the session's cache type. */
uint64_t wgml_session_decode_bytes(const wgml_session *session, int kv_len);

/* Measures the model's device: memory read bandwidth (GB/s) and, when
 * matmul_gflops is not NULL, the f32 matmul rate of the backend's own matmul
 * on a 1024 x 1024 x 1024 problem (GFLOP/s). Takes a few seconds. */
wgml_status wgml_model_measure_device(wgml_model *model, double *read_gbs, double *matmul_gflops, wgml_error *err);

/* The CPU backend's arithmetic peak (GFLOP/s, all its threads), measured now by a
 * register-only loop: f32 FMA and bf16 pairs (*bf16_gflops 0 where the CPU has none).
 * Takes a few ms. WGML_ERR_UNSUPPORTED on other backends. */
wgml_status wgml_model_measure_fma_peak(wgml_model *model, double *f32_gflops, double *bf16_gflops, wgml_error *err);

/* The rate (GFLOP/s, 2 per multiply-add) of the backend's own matmul with a
 * 1024 x 1024 weight of `type` (a GGUF type name such as "Q4_0", "Q4_K",
 * "F16"; info.matmul_type is the model's) over n_rows token rows (1..4096):
 * what a prompt of that many tokens can reach in its matrix products on this
 * device, measured now. Takes about a second. */
wgml_status wgml_model_measure_matmul(wgml_model *model, const char *type, int n_rows, double *gflops,
                                      wgml_error *err);

/* ---- chat templates ------------------------------------------------------ */

/* A chat template is the Jinja2 program (tokenizer.chat_template in a GGUF)
 * that turns a conversation into the prompt text an instruction-tuned model
 * was trained on. wgml renders it exactly as Hugging Face's
 * apply_chat_template does, in a sandbox: no I/O, bounded time, memory and
 * output; a hostile template gets an error, never a hang or a crash
 * (docs/chat.md). */
typedef struct wgml_chat_params {
    int add_generation_prompt;          /* default 1: end with the assistant's header */
    const char *bos_token, *eos_token;  /* NULL: the model's, or "" without a model */
    const char *now;                    /* "YYYY-MM-DD HH:MM:SS" fixes strftime_now's clock; NULL: the real local time */
    const char *extra_json;             /* optional JSON object whose keys become extra variables (e.g. "tools") */
    const wgml_model *model;            /* optional: supplies bos/eos (above) and, with tmpl NULL, the template */
} wgml_chat_params;

wgml_chat_params wgml_chat_default_params(void);

/* Renders messages (a JSON array of {"role","content",...} objects, as OpenAI's API) through a Jinja
 * chat template (NUL-terminated; NULL: params->model's, wgml_model_chat_template). *prompt is
 * malloc'ed (caller frees). A template's raise_exception gives WGML_ERR_TEMPLATE with its message
 * as the message; other template errors WGML_ERR_TEMPLATE naming the line and column; bad JSON
 * WGML_ERR_INVALID_ARGUMENT. params NULL: the defaults. */
wgml_status wgml_chat_render(const char *tmpl, const char *messages_json, const wgml_chat_params *params,
                             char **prompt, wgml_error *err);

/* The model's chat template: tokenizer.chat_template from the GGUF, else a built-in fallback by
 * architecture/vocabulary (ChatML, Llama 2, Llama 3, Zephyr, Mistral) with *is_fallback set (may
 * be NULL); NULL if none (a model that does not generate text). Owned by the model. */
const char *wgml_model_chat_template(const wgml_model *model, int *is_fallback);

/* The name of the template wgml_model_chat_template returns: "gguf" for the file's own, else the
 * fallback's ("chatml", "llama2", "llama3", "zephyr", "mistral"); NULL if none. */
const char *wgml_model_chat_template_name(const wgml_model *model);

#ifdef __cplusplus
}
#endif
#endif /* WGML_H */
