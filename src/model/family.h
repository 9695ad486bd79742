/*
 * family.h - the registry of model families.
 *
 * A family (src/model/<family>/) runs one kind of network: it names the GGUF
 * architectures it reads (general.architecture), the tasks it serves
 * (wgml_task bits, include/wgml.h), and the functions that read its
 * hyper-parameters, load its weights on a backend (through the shared loader,
 * model/weights.h), free them, and fill its section of wgml_model_info.
 * api.c opens every model through the registry; `wgml info` describes a file
 * through it without a backend.
 */
#ifndef WGML_MODEL_FAMILY_H
#define WGML_MODEL_FAMILY_H

#include "backend/backend.h"
#include "format/gguf.h"
#include "model/weights.h"
#include "text/g2p.h"
#include "wgml.h"

/* What a load asks beyond the file and the backend. */
typedef struct wgml_family_load_params {
    const wgml_weight_fault *fault; /* NULL: none */
    wgml_load_progress_fn progress; /* may be NULL */
    void *user;
} wgml_family_load_params;

/* Receives one described hyper-parameter: key ("layers") and its value as text. */
typedef void (*wgml_family_field_fn)(void *user, const char *key, const char *value);

/* ---- task interfaces ----
 * What the API layer (src/api*.c) and the server run a model through: a
 * family offers each task it serves as a small table of functions over its
 * model (the `void *model` its load made) and a per-request state. The layer
 * above asks for an interface, never for a family: a family that fills
 * `decoder` generates text through wgml_session, wgml_generate, wgml_batch
 * and the server's scheduler; `encoder` embeds and reranks; `speaker`
 * speaks. A family with an encoder and a decoder (Whisper: the decoder
 * attends to the encoder's output) fills both and reads the encoder's output
 * into its decoder state.
 *
 * One state idiom for every family: a state is made per request (a session,
 * a batch, one embed call, one utterance) and holds everything a request
 * writes (caches, activations, what one step leaves for the next), its
 * device memory reserved at creation (grown only between steps); the model
 * is read-only while states use it, so requests on one model are
 * independent. Steps on one backend take turns (a backend records one step
 * at a time); whoever runs two requests at once from two threads holds the
 * family's step lock where the interface says so. */

/* A decoder state: n_seq sequences, each with its own KV cache of n_ctx rows,
 * sharing activations for n_batch rows per step. n_seq 0: one sequence
 * stepped alone (a session; the family may take a faster single-sequence
 * path), which then accepts one run (seq 0) and one output row (the last). */
typedef struct wgml_decoder_params {
    int n_seq, n_ctx, n_batch;
    uint32_t kv_type; /* the cache's element type, one the backend lists (wgml_model_kv_dtype) */
} wgml_decoder_params;

/* A run of a step: the next n rows of the step's tokens are the tokens of
 * sequence seq at positions pos .. pos+n-1 (at most one run per sequence). */
typedef struct wgml_decoder_run {
    int seq, pos, n;
} wgml_decoder_run;

/* A row whose next-token scores the step computes: its logits (n_vocab
 * floats) and/or their argmax (on the device: a greedy step reads back 4
 * bytes) are written where not NULL. */
typedef struct wgml_decoder_out {
    int row; /* index into the step's tokens */
    float *logits;
    int32_t *argmax;
} wgml_decoder_out;

typedef struct wgml_decoder {
    int (*n_vocab)(const void *model);
    int (*n_ctx_train)(const void *model); /* the context it was trained for */
    wgml_status (*create)(void *model, const wgml_decoder_params *p, void **state, wgml_error *err);
    void (*free)(void *state);
    /* Evaluates tokens[0..n) laid out as runs[0..n_runs) (n <= n_batch) and
     * computes the scores of outs[0..n_out): one step, one submit. */
    wgml_status (*eval)(void *model, void *state, const int32_t *tokens, int n, const wgml_decoder_run *runs,
                        int n_runs, const wgml_decoder_out *outs, int n_out, wgml_error *err);
    /* Bytes one decode step reads with kv_len rows in the cache (weights and
     * cache), for the bandwidth figures of `wgml bench`. */
    uint64_t (*step_bytes)(const void *model, const void *state, int kv_len);
} wgml_decoder;

/* What an encoder reads per text and gives back. */
typedef struct wgml_encoder_info {
    int dim;         /* the vectors' size */
    int n_ctx;       /* tokens per text, at most */
    int n_types;     /* token types (a pair's second text is type 1 when there are 2) */
    wgml_pool_mode pool; /* the model's own pooling */
    int rerank;      /* it scores pairs (a cross-encoder) */
    int32_t pad_id;  /* -1: texts are packed as they are; else each is padded with this id to n_ctx
                      * rows (SigLIP's text tower, trained on padded texts, reads the last row) */
} wgml_encoder_info;

/* One step of texts packed in rows: text s is rows start[s] .. start[s+1]-1
 * (start[0] = 0, start[n_seq] = n_tokens, each text at most n_ctx rows), with
 * its token ids and token types (NULL: all 0). Each text attends to its own
 * rows only, so its result does not depend on its neighbours. */
typedef struct wgml_encoder_batch {
    const int32_t *tokens, *types;
    const int32_t *start;
    int n_tokens, n_seq;
} wgml_encoder_batch;

/* What a step reads back per text. */
typedef enum wgml_encoder_output {
    WGML_ENCODE_POOLED = 0, /* the pooled vector (dim floats) */
    WGML_ENCODE_L2,         /* the pooled vector, L2-normalized on the device */
    WGML_ENCODE_SCORE,      /* a cross-encoder's score (1 float; pooling ignored) */
} wgml_encoder_output;

typedef struct wgml_encoder {
    void (*info)(const void *model, wgml_encoder_info *out);
    /* A state for steps of up to n_rows rows (grown between steps when a
     * later step needs more). */
    wgml_status (*create)(void *model, int n_rows, void **state, wgml_error *err);
    void (*free)(void *state);
    /* Encodes the batch: n_seq results to out (dim or 1 floats each); pool
     * (WGML_POOL_*) for the pooled outputs. */
    wgml_status (*encode)(void *model, void *state, const wgml_encoder_batch *b, wgml_pool_mode pool, wgml_encoder_output what,
                          float *out, wgml_error *err);
} wgml_encoder;

/* The text a speaker speaks: phonemes (its vocabulary's symbols), and the
 * words of the text they were made from with where they are in them (for
 * word times; NULL: runs between spaces). */
typedef struct wgml_speaker_input {
    const char *phonemes;
    const char *text;
    const wgml_g2p_word *words;
    size_t n_words;
} wgml_speaker_input;

typedef struct wgml_speaker {
    /* The name of voice i the file holds, copied into buf (cap bytes); NULL past the last. */
    const char *(*voice)(const void *model, int i, char *buf, size_t cap);
    wgml_status (*create)(void *model, void **state, wgml_error *err);
    void (*free)(void *state);
    /* Speaks in piece by piece: on_audio gets each piece as soon as it is
     * made (non-zero stops); piece i's noise comes from seed + i. Two states
     * on one model may speak from two threads at once (their steps take
     * turns on the backend). */
    wgml_status (*speak)(void *model, void *state, const wgml_speaker_input *in, const char *voice,
                         const wgml_speak_params *p, wgml_audio_fn on_audio, void *user, int64_t *n_samples,
                         int *n_chunks, wgml_error *err);
} wgml_speaker;

/* What a transcriber hears: mono audio at its sample rate, decoded into
 * segments of text. */
typedef struct wgml_transcriber {
    int (*sample_rate)(const void *model); /* of the audio it takes (16000 for Whisper) */
    wgml_status (*create)(void *model, void **state, wgml_error *err);
    void (*free)(void *state);
    /* Transcribes pcm[0..n) (at sample_rate), handing each segment to
     * on_segment as soon as it is decoded (non-zero stops). Two states on one
     * model may run from two threads at once (their steps take turns on the
     * backend). p: the caller's parameters, already checked. */
    wgml_status (*transcribe)(void *model, void *state, const float *pcm, size_t n, const wgml_transcribe_params *p,
                              wgml_segment_fn on_segment, void *user, wgml_transcribe_result *result,
                              wgml_error *err);
} wgml_transcriber;

struct wgml_image_prep; /* image/image_prep.h */
struct wgml_hf_model;  /* model/hf.h */
struct wgml_hf_plan;

/* What an image encoder takes and gives. */
/* How a model with a text tower scores images against texts (zero-shot classification). */
typedef enum wgml_zero_shot_kind {
    WGML_ZERO_SHOT_NONE = 0, /* no text tower */
    WGML_ZERO_SHOT_SOFTMAX,  /* CLIP: softmax over the labels of exp(scale) cos */
    WGML_ZERO_SHOT_SIGMOID,  /* SigLIP: sigmoid(exp(scale) cos + bias) per label */
} wgml_zero_shot_kind;

typedef struct wgml_vision_info {
    int dim;        /* an image's vector */
    int image_size; /* the side of the square of pixels it takes (after preprocessing) */
    int n_labels;   /* a classifier's labels; 0: none */
    wgml_zero_shot_kind zero_shot;
    float logit_scale, logit_bias; /* zero-shot: logits = exp(logit_scale) cos + logit_bias */
} wgml_vision_info;

/* An image encoder: preprocessed images (n x [3][S][S] floats, S =
 * image_size) in, one vector (or a classifier's scores) per image out. The
 * images of one step attend to their own rows only. */
typedef struct wgml_vision_encoder {
    void (*info)(const void *model, wgml_vision_info *out);
    /* The model's preprocessing (image/image_prep.h's parameters) into *out. */
    void (*preprocess)(const void *model, struct wgml_image_prep *out);
    /* The name of label i (0 .. n_labels-1). */
    const char *(*label)(const void *model, int i);
    /* A state for steps of up to n_images images (grown between steps). */
    wgml_status (*create)(void *model, int n_images, void **state, wgml_error *err);
    void (*free)(void *state);
    /* WGML_ENCODE_POOLED / _L2: dim floats per image; WGML_ENCODE_SCORE: n_labels logits. */
    wgml_status (*encode)(void *model, void *state, const float *pixels, int n, wgml_encoder_output what, float *out,
                          wgml_error *err);
} wgml_vision_encoder;

typedef struct wgml_family {
    const char *name;          /* "llama" */
    const char *const *archs;  /* the architectures it reads, NULL-terminated: {"llama", "qwen2", NULL} */
    uint32_t tasks;            /* wgml_task bits */
    int no_tokenizer;          /* its files need no text tokenizer (Kokoro's phonemes, a vision tower); one is
                                  loaded when present (tokenizer.ggml.model) */
    /* Reads and checks the hyper-parameters from f's metadata only (no
     * tensors, no backend) and passes each to field (NULL: only check). */
    wgml_status (*describe)(const gguf_file *f, wgml_family_field_fn field, void *user, wgml_error *err);
    /* Reads the hyper-parameters and creates every weight on be; *out is the
     * family's model. For a header-only file the weights are created empty
     * (filled afterwards through weights()). */
    wgml_status (*load)(const gguf_file *f, wgml_backend *be, const wgml_family_load_params *p, void **out,
                        wgml_error *err);
    void (*free)(void *model);
    /* The model's weights (for streaming them in, model/weights.h). */
    wgml_weights *(*weights)(void *model);
    /* The tasks a file of this family serves, from its metadata and tensor
     * list only (a reranker among encoders); NULL: the family's tasks. */
    uint32_t (*file_tasks)(const gguf_file *f);
    /* Fills info's architecture, n_params, weights_bytes and the family's
     * section, and tasks when this model serves fewer than the family's
     * (a reranker); the caller fills the rest (family, backend, tokens). */
    void (*get_info)(const void *model, wgml_model_info *info);
    /* 1 when a weight it multiplies is block-quantized (the fast CPU backend
     * then rounds those products' activations to 8 bits); NULL: any
     * quantized weight but the tables read by row (model/weights.h). */
    int (*quantized_matmuls)(const void *model);
    /* The tasks it runs (model/family.h above), NULL where it has none. */
    const wgml_decoder *decoder;
    const wgml_encoder *encoder;
    const wgml_speaker *speaker;
    const wgml_transcriber *transcriber;
    const wgml_vision_encoder *vision;
    /* Hugging Face folders (model/hf.h): the config.json model_types it reads,
     * NULL-terminated (NULL: none), and the conversion of one to its GGUF
     * (metadata through w, tensors into plan). */
    const char *const *hf_types;
    wgml_status (*hf_convert)(const struct wgml_hf_model *hf, const char *model_type, gguf_writer *w,
                              struct wgml_hf_plan *plan, wgml_error *err);
} wgml_family;

/* The family that reads architecture arch; NULL when none does. */
const wgml_family *wgml_family_find(const char *arch);

/* Reads f's general.architecture into arch (cap bytes, truncated) and finds
 * its family. A missing key, a NUL byte or an architecture no family reads is
 * an error naming the file (the last: "architecture 'foo' is not supported;
 * known: llama, qwen2"). */
wgml_status wgml_family_of(const gguf_file *f, char *arch, size_t cap, const wgml_family **out, wgml_error *err);

/* The registered families: wgml_family_at(0 .. wgml_family_count()-1). */
int wgml_family_count(void);
const wgml_family *wgml_family_at(int i);

/* Hyper-parameters from metadata keys "<arch>.<suffix>", for every family:
 * an integer in [lo, hi] (required: a missing key is an error naming it;
 * else *out stays as it was), a float, a bool (0/1). A key of the wrong type
 * or out of range is an error naming the file and the key. */
wgml_status wgml_hparam_int(const gguf_file *f, const char *arch, const char *suffix, int64_t lo, int64_t hi, int *out,
                            int required, wgml_error *err);
wgml_status wgml_hparam_float(const gguf_file *f, const char *arch, const char *suffix, float *out, wgml_error *err);
wgml_status wgml_hparam_bool(const gguf_file *f, const char *arch, const char *suffix, int *out, wgml_error *err);

/* "generate", "embed", "rerank", "speech", "transcribe" (one bit); "unknown" otherwise. */
const char *wgml_task_name(uint32_t task);
/* tasks as "generate, embed" ("none" when 0) into buf; returns buf. */
char *wgml_tasks_format(uint32_t tasks, char *buf, size_t cap);

#endif
