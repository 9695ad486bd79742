/*
 * synth.h - random-weight models with the exact tensor names, shapes and
 * metadata of real architectures, for benchmarks and tests.
 *
 * The table holds each architecture's published hyper-parameters (its
 * config.json; docs/model-tools.md lists the sources). A synthetic file has
 * the tensors llama.cpp's converter writes for that model (token_embd,
 * per-layer attn_norm, attn_q/k/v (+ biases for Qwen2), attn_output,
 * ffn_norm, ffn_gate/up/down, output_norm, output unless tied, rope_freqs for
 * Llama 3), the same metadata keys, and the tokenizer metadata of a
 * vocabulary GGUF resized to the architecture's vocabulary (synth_vocab.c).
 *
 * BERT-family encoders (kind SYNTH_BERT, SYNTH_NOMIC_BERT) get the tensors
 * and keys llama.cpp's converter writes for BertModel / NomicBertModel:
 * learned position and token-type embeddings, an embedding LayerNorm,
 * post-norm layers with LayerNorm weights and biases, a pooling type, and
 * for a cross-encoder reranker the classification head (cls, cls.output).
 * Their vocabulary is a WordPiece ("bert") one.
 *
 * Whisper (kind SYNTH_WHISPER: whisper-micro, whisper-micro-v3, whisper-tiny,
 * whisper-base, whisper-small, whisper-large-v3-turbo) is written in the
 * GGUF schema of model/whisper/whisper_vocab.h, its weights drawn exactly
 * by ../shared/whisper/make_random_whisper.py (README "Weights": one
 * splitmix64 stream per tensor from seed ^ fnv1a64(name), uniform half-widths
 * per kind of tensor, the timestamp rows of the token embedding x 1.15 and
 * its <|endoftext|> row x the variant's factor, the encoder positions as
 * sinusoids; each value rounded to f32 then f16, the f16 numbers being the
 * model). whisper-micro and whisper-tiny are bit for bit the shared
 * whisper-micro-random.bin's and make_random_whisper.py tiny's tensors;
 * synth.c's table gives the seeds and factors of the others. Its
 * vocabulary (whisper.tokens) comes from a donor Whisper model (GGUF or
 * whisper.cpp .bin, params.vocab) or is synthesized (see synth_vocab.h).
 *
 * Vision towers (kind SYNTH_VISION: clip-vit-b32, clip-vit-b16, siglip-base,
 * vit-base) get model/clip/clip.h's tensors and keys, with the
 * preprocessing of the architecture's image processor left to its defaults;
 * they have no vocabulary (the text towers are not written).
 *
 * Weights are a deterministic function of the seed and the tensor's name and
 * row (not of the thread count or of --layers): matrices ~ N(0, 0.02) like
 * the usual initialisation, norms 1 + N(0, 0.02), biases N(0, 0.02). Each
 * tensor gets the type the quantization recipe gives it (the same rules as
 * quantize.c) and is produced in parallel and streamed to the file: float
 * tensors value by value, quantized ones from a pool of quantized blocks
 * (synth.c says why).
 */
#ifndef WGML_TOOLS_SYNTH_H
#define WGML_TOOLS_SYNTH_H

#include "wgml.h"

#include <stdint.h>

/* Which tensor layout and metadata an architecture has. */
typedef enum synth_kind {
    SYNTH_DECODER = 0, /* llama / qwen2: RMSNorm, RoPE, SwiGLU, causal */
    SYNTH_BERT,        /* bert: learned positions, LayerNorm with biases, GELU, biased projections */
    SYNTH_NOMIC_BERT,  /* nomic-bert: bert's norms, RoPE, fused QKV, SwiGLU, no biases */
    SYNTH_WHISPER,     /* whisper: the official state dict's tensors (whisper_vocab.h's GGUF schema) */
    SYNTH_VISION,      /* clip / siglip / vit: a vision tower in model/clip/clip.h's GGUF schema */
} synth_kind;

/* llama.cpp's LLAMA_POOLING_TYPE_* (the ARCH.pooling_type key) */
enum { SYNTH_POOL_NONE = 0, SYNTH_POOL_MEAN = 1, SYNTH_POOL_CLS = 2, SYNTH_POOL_LAST = 3, SYNTH_POOL_RANK = 4 };

typedef struct synth_arch {
    const char *name;   /* "llama-3.2-1b" */
    const char *arch;   /* general.architecture: "llama", "qwen2", "bert", "nomic-bert" */
    const char *source; /* the model whose config.json the numbers come from */
    int n_vocab, n_ctx, n_embd, n_layer, n_head, n_head_kv, n_ff;
    /* eps: RMSNorm's for decoders, LayerNorm's for encoders; rope_base 0 = no RoPE */
    float rope_base, eps;
    int tied;     /* no output.weight: token_embd is also the output */
    int qkv_bias; /* attn_q/k/v biases (Qwen2) */
    int bpe;      /* byte-level BPE vocabulary (default: gpt-2), else SentencePiece (llama-spm);
                     encoders always default to the WordPiece one (bert-bge) */
    /* Llama 3 RoPE scaling ("rope_type": "llama3"); factor 0 = none */
    float rope3_factor, rope3_low, rope3_high;
    int rope3_orig_ctx;
    /* encoders (kind != SYNTH_DECODER) */
    synth_kind kind;
    int pooling;       /* SYNTH_POOL_*: how the embedding is made from the token states */
    int n_token_types; /* rows of token_types.weight (segments A/B) */
    int cls_head;      /* reranker: cls.weight/bias (pooler dense) and cls.output.weight/bias (score) */
    /* Whisper (kind SYNTH_WHISPER): n_embd = n_audio_state = n_text_state, n_head both stacks' heads,
     * n_layer the decoder's blocks, n_ctx n_text_ctx (448), n_ff 4 n_embd, n_vocab 51865 (51866 v3) */
    int n_mels, n_audio_layer, n_audio_ctx;
    uint64_t whisper_seed; /* the weights' seed when params.seed is 0 */
    double eot_factor;     /* on the <|endoftext|> row of decoder.token_embedding.weight */
    /* vision towers (kind SYNTH_VISION): n_embd, n_layer, n_head, n_ff and eps are the tower's */
    int image_size, patch_size;
    int proj_dim; /* CLIP's visual projection */
    int n_labels; /* ViT's classifier ("LABEL_0" ...) */
    /* their text towers (CLIP, SigLIP; text_layer 0: none), with a generated vocabulary of
     * text_vocab tokens (tools/synth_vocab.h): CLIP's byte-level BPE, SigLIP's Unigram */
    int text_vocab, text_ctx, text_embd, text_layer, text_head, text_ff;
} synth_arch;

int synth_arch_count(void);
const synth_arch *synth_arch_at(int i);
const synth_arch *synth_arch_find(const char *name); /* case-insensitive; NULL if unknown */
/* The largest n_layer synth_write takes: n_layer, or for Whisper the larger stack's blocks. */
int synth_arch_max_layers(const synth_arch *a);

typedef struct synth_tensor {
    char name[48];
    int n_dims; /* 2 for matrices even with one row (cls.output.weight is [n_embd, 1]) */
    int64_t ne[2];
} synth_tensor;

/* The tensors of `a` with n_layer layers (0 = all), in file order. Returns how
 * many there are; writes the first `cap` of them. Whisper: "mel_filters"
 * first, then the state dict in its order (make_random_whisper.py's
 * tensor_list) with whisper_vocab.h's shapes; n_layer caps each stack's
 * blocks. */
int synth_tensor_list(const synth_arch *a, int n_layer, synth_tensor *out, int cap);

/* Llama 3 RoPE frequency factors (n_rot / 2 of them), as llama.cpp's
 * converter computes them for rope_freqs.weight. */
void synth_rope3_factors(const synth_arch *a, float *out);

typedef struct synth_params {
    const char *arch;          /* a name from the table */
    const char *type;          /* a quantize recipe: "F16", "Q8_0", "Q4_K_M", ... (Whisper: F32, F16, Q8_0,
                                  Q5_0, Q5_1, Q4_0, Q4_1, whisper_vocab.h's types) */
    const char *vocab;         /* a GGUF whose tokenizer.* metadata is copied; Whisper: a Whisper model (GGUF or
                                  whisper.cpp .bin) whose whisper.tokens are copied, NULL: a synthesized vocabulary */
    uint64_t seed;             /* Whisper: 0 = the variant's own (whisper_seed) */
    int n_layer;               /* 0 = the architecture's own */
    int n_threads;             /* 0 = one per core */
    wgml_progress_fn progress; /* (user, "generating", elements done, total); non-zero cancels */
    void *progress_user;
    void (*log)(void *user, const char *line); /* notes: vocabulary resizing, type fallbacks */
    void *log_user;
} synth_params;

typedef struct synth_result {
    int n_tensors;
    uint64_t n_params;
    uint64_t data_bytes; /* tensor data written */
    uint32_t file_type;
} synth_result;

/* Writes the model to `out` (via a temporary file). result may be NULL. */
wgml_status synth_write(const char *out, const synth_params *params, synth_result *result, wgml_error *err);

#endif
