/*
 * whisper.h - OpenAI Whisper speech recognition (../shared/whisper/README.md
 * describes the model exactly): the hyper-parameters, the weights, and the
 * forward pass written once against backend ops (whisper.c):
 *
 *   encoder  log-mel [n_mels][3000] -> two convolutions with GELU, the stored
 *            positions, pre-norm blocks, ln_post -> xa [1500][S]; then each
 *            decoder layer's cross-attention keys and values from xa, once
 *            per 30 s window;
 *   decoder  tokens -> embeddings + learned positions, pre-norm blocks
 *            (causal self-attention over the state's cache, cross-attention
 *            over the window's keys), ln, logits = x . token_embedding^T.
 *
 * whisper_model is read-only once loaded; a whisper_state (one request: a
 * transcription) holds the encoder's activations, the window's cross keys
 * and values, and n_seq sequences (the hypotheses of a beam search, or one)
 * each with its own self-attention cache. The GGUF layout is in
 * whisper_vocab.h.
 */
#ifndef WGML_MODEL_WHISPER_H
#define WGML_MODEL_WHISPER_H

#include "backend/backend.h"
#include "core/lock.h"
#include "format/gguf.h"
#include "model/family.h"
#include "model/weights.h"
#include "model/whisper/whisper_tokenizer.h"
#include "model/whisper/whisper_vocab.h"

/* The family's registry entry (model/family.h): architecture "whisper", task transcribe. */
extern const wgml_family wgml_family_whisper;

#define WHISPER_SAMPLE_RATE 16000
#define WHISPER_N_FFT 400
#define WHISPER_HOP 160
#define WHISPER_WINDOW_FRAMES 3000 /* mel frames of a 30 s window */

typedef struct whisper_hparams {
    int n_vocab, n_mels;
    int n_audio_ctx, n_audio_state, n_audio_head, n_audio_layer;
    int n_text_ctx, n_text_state, n_text_head, n_text_layer;
    int head_dim; /* S / heads, the same for both stacks */
    int n_tokens; /* BPE tokens in the file's vocabulary (whisper.tokens) */
} whisper_hparams;

/* One block's weights; the cross-attention ones only in the decoder. */
typedef struct whisper_layer {
    wgml_tensor wq, bq, wk, wv, bv, wo, bo, attn_ln_w, attn_ln_b;
    wgml_tensor cwq, cbq, cwk, cwv, cbv, cwo, cbo, cross_ln_w, cross_ln_b;
    wgml_tensor up, b_up, down, b_down, mlp_ln_w, mlp_ln_b;
} whisper_layer;

typedef struct whisper_model {
    whisper_hparams hp;
    whisper_specials sp;
    wgml_backend *be; /* borrowed */
    wgml_tensor conv1_w, conv1_b, conv2_w, conv2_b, enc_pos, ln_post_w, ln_post_b;
    wgml_tensor tok_embd, dec_pos, ln_w, ln_b;
    whisper_layer *enc, *dec;
    const gguf_tensor *mel_src; /* mel_filters: read on the host (whisper_mel_filters) */
    whisper_tokenizer *tok;     /* the file's vocabulary */
    wgml_mutex step_mu;   /* one step at a time on the backend (any state's) */
    wgml_weights w;
} whisper_model;

typedef struct whisper_state whisper_state;

/* The file's mel filter bank, f32 [n_mels][201] (NULL until a streamed
 * file's bytes are in). */
const float *whisper_mel_filters(const whisper_model *m);

/* Reads and checks the hyper-parameters from f's metadata (no tensors). */
wgml_status whisper_read_hparams(const gguf_file *f, whisper_hparams *hp, wgml_error *err);

wgml_status whisper_model_load(const gguf_file *f, wgml_backend *be, const wgml_family_load_params *p,
                               whisper_model **out, wgml_error *err);
void whisper_model_free(whisper_model *m);

/* How kv (the transcription's kv_type) stores a window's cross-attention keys
 * and values on m's backend: *f16 = 1 for f16 (auto: where the backend can,
 * the CPU), 0 for f32; f16 asked of a backend that cannot is an error. */
wgml_status whisper_kv_f16(whisper_model *m, wgml_kv_type kv, int *f16, wgml_error *err);

/* A request's state: n_seq sequences (1 .. 64) decoded together, each with a
 * cache of n_text_ctx f32 rows, steps of up to n_batch rows in all (n_batch
 * >= n_seq; the initial tokens of every sequence in one step need their
 * count times n_seq); the window's cross keys and values stored as kv says
 * (whisper_kv_f16). */
wgml_status whisper_state_create(whisper_model *m, int n_seq, int n_batch, wgml_kv_type kv, whisper_state **out,
                                 wgml_error *err);
void whisper_state_free(whisper_state *s);
int whisper_state_n_seq(const whisper_state *s);
wgml_kv_type whisper_state_kv(const whisper_state *s); /* as created */

/* Encodes one window: mel is [n_mels][frames] (frames <= 3000; the rest of
 * the window is zero columns, as transcribe() pads a window), and the
 * decoder's cross-attention keys and values are computed from the result.
 * xa_out: when not NULL, the encoder output [n_audio_ctx][S] is read back. */
wgml_status whisper_encode(whisper_model *m, whisper_state *s, const float *mel, int frames, float *xa_out,
                           wgml_error *err);

/* Takes xa [n_audio_ctx][S] as the window's encoder output (instead of
 * encoding audio) and computes the cross-attention keys and values. */
wgml_status whisper_set_audio_features(whisper_model *m, whisper_state *s, const float *xa, wgml_error *err);

/* One decoder step of every sequence together: tokens[i n_seq + q] is
 * sequence q's token at position pos + i (i < n; n n_seq <= n_batch; pos +
 * n <= n_text_ctx). For each sequence's last position: logits [n_seq][n_vocab]
 * and argmax [n_seq] (on the device), where not NULL. The window's keys and
 * values must have been set. */
wgml_status whisper_decode(whisper_model *m, whisper_state *s, const int32_t *tokens, int pos, int n,
                           float *logits, int32_t *argmax, wgml_error *err);

/* The cross-attention weights of the alignment heads (heads[i] = {text
 * layer, head}) for tokens[0..n) decoded from position 0 (the window's
 * keys set; a one-sequence state, whose cache this step overwrites):
 * softmax(q k^T / sqrt(head size)) over the n_audio_ctx positions, f32
 * out[n_heads][n][n_audio_ctx]. For word timestamps. */
wgml_status whisper_cross_weights(whisper_model *m, whisper_state *s, const int32_t *tokens, int n,
                                  const int (*heads)[2], int n_heads, float *out, wgml_error *err);

/* The logits [n][n_vocab] of rows row0 .. row0 + n of the last decoder
 * step (whisper_decode or whisper_cross_weights) of a one-sequence state:
 * their final activations normalized and projected again (a step returns the
 * last row's only). For word timestamps' token probabilities. */
wgml_status whisper_row_logits(whisper_model *m, whisper_state *s, int row0, int n, float *out, wgml_error *err);
/* Beam search: sequence i's cache rows of positions [0, len) become those
 * of sequence src[i] (every i < n_seq at once; src[i] == i keeps it). */
wgml_status whisper_reorder(whisper_model *m, whisper_state *s, const int *src, int len, wgml_error *err);

#endif
