/*
 * kokoro.h - Kokoro-82M text-to-speech (StyleTTS 2 with an iSTFTNet vocoder;
 * ../shared/kokoro/README.md describes the model exactly): the GGUF layout
 * wgml converts the official checkpoint to, the hyper-parameters, and the
 * forward pass from phoneme ids to 24 kHz audio, written once against backend
 * ops (kokoro.c).
 *
 * GGUF layout (architecture "kokoro", written by kokoro_convert):
 *   kokoro.* keys: the config's numbers (kokoro_hparams below), the phoneme
 *   vocabulary (kokoro.vocab: the symbol of each id, "" for unused ids), the
 *   voices' names (kokoro.voices; tensor voice.<name>, f32 [510][256]).
 *   Tensors keep the official names, component first and "module." dropped
 *   ("decoder.generator.ups.0.weight"), in the layouts the ops want:
 *     - weight norm folded: w = g v / ||v|| (one `weight`, no weight_g/_v);
 *     - Conv1d weights [C_out][K][C_in] (rows of K*C_in taps-major: im2col's
 *       columns; in a quantized type whose blocks K*C_in does not fill, each
 *       tap's C_in columns followed by zeros up to the least width that does,
 *       the model reading zero channels against them), ConvTranspose1d
 *       weights [K][C_out][C_in] (a matmul, then col2im), the depthwise
 *       `pool` one row [K][C];
 *     - LSTMs: weight_ih [2*4H][in] (both directions), weight_hh [2*4H][H],
 *       bias = b_ih + b_hh [2*4H]; where the input is cat(x, style) (the
 *       predictor's), weight_ih holds x's columns and weight_ih_s the style's;
 *     - AdaIN / AdaLayerNorm `fc`: the bias of the scale half holds 1 + b, so
 *       the product gives (1 + gamma) directly;
 *     - Snake's alpha [C]; everything else as in the checkpoint.
 */
#ifndef WGML_MODEL_KOKORO_H
#define WGML_MODEL_KOKORO_H

#include <stdint.h>

#include "backend/backend.h"
#include "format/gguf.h"
#include "model/family.h"
#include "model/weights.h"

#define KOKORO_N_VOCAB_MAX 512 /* ids in the vocabulary (178 in v1.0) */
#define KOKORO_MAX_UPS 4       /* upsampling stages of the generator (2) */
#define KOKORO_MAX_RB 4        /* residual blocks per stage (3) */
#define KOKORO_MAX_PHONEMES 510
#define KOKORO_SAMPLE_RATE 24000

extern const wgml_family wgml_family_kokoro; /* kokoro_family.c */

typedef struct kokoro_hparams {
    int n_token;     /* embedding rows (ids 0 .. n_token-1; 0 is the pad) */
    int hidden;      /* D: hidden_dim */
    int style;       /* S: style_dim, each half of a voice row */
    int n_layer;     /* DurationEncoder LSTMs and TextEncoder CNN blocks */
    int max_dur;     /* M: duration classes */
    int text_kernel; /* TextEncoder conv kernel */
    /* ALBERT (plbert) */
    int bert_embd, bert_hidden, bert_heads, bert_ff, bert_layers, bert_ctx;
    /* decoder and generator (istftnet) */
    int dec_dim;     /* Dd (1024 in v1.0) */
    int asr_res_dim; /* R (64) */
    int up_initial;  /* U: upsample_initial_channel */
    int n_ups, up_rates[KOKORO_MAX_UPS], up_kernels[KOKORO_MAX_UPS];
    int n_rb, rb_kernels[KOKORO_MAX_RB], rb_dil[KOKORO_MAX_RB][3];
    int n_fft, hop;
    int sample_rate;
    int n_harmonics; /* SineGen's harmonics (9: harmonic_num 8 plus the fundamental) */
} kokoro_hparams;

/* The config a checkpoint needs: hyper-parameters and the phoneme vocabulary
 * (vocab[id]: the symbol's UTF-8, "" for an unused id). */
typedef struct kokoro_config {
    kokoro_hparams hp;
    char vocab[KOKORO_N_VOCAB_MAX][8];
} kokoro_config;

/* The real v1.0 config (hexgrad/Kokoro-82M config.json), used when none is given. */
void kokoro_config_default(kokoro_config *c);
/* kokoro-tiny: the reduced widths of ../shared/kokoro/kokoro-tiny.pth (v1.0's structure and vocabulary). */
void kokoro_config_tiny(kokoro_config *c);
/* Reads a config.json (the official format; the widths the official code
 * hard-codes, decoder_dim and asr_res_dim, taken from the checkpoint's shapes
 * when absent). Unknown keys are ignored; wrong types and values are errors. */
wgml_status kokoro_config_parse(const char *json, size_t len, kokoro_config *c, wgml_error *err);

/* Converts the official checkpoint (a torch.save .pth: bert, bert_encoder,
 * predictor, text_encoder, decoder) and voices (kokoro-js .bin or official
 * .pt, named after their files) into a GGUF, at `path`, or into memory when
 * path is NULL (*mem and *mem_size: free() it). type: WGML_F32, WGML_F16 or
 * WGML_Q8_0 for the matrices that keep the reference tolerances (the rest
 * stay F32; kokoro_convert.c says which). */
typedef struct kokoro_convert_options {
    const kokoro_config *config; /* NULL: kokoro_config_default */
    const char *const *voices;   /* voice files */
    int n_voices;
    uint32_t type;         /* F32, F16, BF16 or Q8_0: the matrices of the text encoder, the duration
                              head, the decoder and the vocoder */
    uint32_t prosody_type; /* 0 = F32, or F16, BF16, Q8_0 (at most `type`'s size): the matrices that
                              make F0 and N (ALBERT, the duration encoder, the shared LSTM, the
                              F0/N blocks); kokoro_convert.c says why they stay F32 by default */
    wgml_load_progress_fn progress;
    void *user;
} kokoro_convert_options;
wgml_status kokoro_convert(const char *pth_path, const kokoro_convert_options *opt, const char *path, void **mem,
                           size_t *mem_size, wgml_error *err);

/* A tensor of the official checkpoint: its key ("decoder/module.encode.conv1.weight_v") and torch shape. */
typedef struct kokoro_key {
    char name[128];
    int ndim;
    int64_t size[3];
} kokoro_key;
/* The official checkpoint's tensors for hp (kokoro_keys.c); returns how many
 * (out holds the first cap). */
int kokoro_official_keys(const kokoro_hparams *hp, kokoro_key *out, int cap);

/* A random-weight model of config cfg (wgml synth --arch kokoro-82m): the
 * official checkpoint's tensors with random values (seeded; kokoro_convert.c
 * says how they are drawn) through the converter, and one random voice
 * named "synth". opt: type, progress (config and voices unused). */
wgml_status kokoro_synth(const kokoro_config *cfg, const kokoro_convert_options *opt, uint64_t seed, const char *path,
                         void **mem, size_t *mem_size, wgml_error *err);

#endif
