/*
 * synth.c - the architecture table and the synthetic model writer (see synth.h).
 *
 * Random numbers: splitmix64 streams, one per (seed, tensor name, row), so a
 * row's values do not depend on which thread makes it or on how many layers
 * the file has. Normal deviates come from a 4096-bin piecewise-linear inverse
 * CDF (bin edges at the normal quantiles i/4096, the two tail bins sized to
 * the tails' conditional means, the whole rescaled to variance exactly 1):
 * one multiply-add per value. Values lie within about +-4 sigma.
 *
 * Quantized matrices are assembled from a pool of quantized blocks: per
 * block-quantized type, 2M values are generated and quantized once (the
 * reference K-quant quantizer costs ~150 ns per value, minutes for a 1B
 * model), and each block of each row is a randomly chosen block of the pool.
 * Every weight is still a quantized N(0, 0.02) sample with its own block's
 * scales; the file is written at memory speed.
 */

#include "tools/synth.h"

#include "audio/mel.h"
#include "core/alloc.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/fp16.h"
#include "core/threadpool.h"
#include "format/gguf.h"
#include "tools/quantize.h"
#include "tools/synth_vocab.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define WEIGHT_STD 0.02f

/* From each model's config.json (llama2.c's README and model.py for the TinyStories models:
 * hidden = 2/3 * 4 * dim rounded up to 32). The TinyStories files get an output.weight, as
 * llama.cpp's llama2.c converter writes one (stories260K.gguf has it too). */
/* clang-format off */
static const synth_arch archs[] = {
    {.name = "stories15m", .arch = "llama", .source = "karpathy/tinyllamas stories15M.bin",
     .n_vocab = 32000, .n_ctx = 256, .n_embd = 288, .n_layer = 6, .n_head = 6, .n_head_kv = 6, .n_ff = 768,
     .rope_base = 10000.0f, .eps = 1e-5f},
    {.name = "stories110m", .arch = "llama", .source = "karpathy/tinyllamas stories110M.bin",
     .n_vocab = 32000, .n_ctx = 1024, .n_embd = 768, .n_layer = 12, .n_head = 12, .n_head_kv = 12, .n_ff = 2048,
     .rope_base = 10000.0f, .eps = 1e-5f},
    {.name = "tinyllama-1.1b", .arch = "llama", .source = "TinyLlama/TinyLlama-1.1B-Chat-v1.0",
     .n_vocab = 32000, .n_ctx = 2048, .n_embd = 2048, .n_layer = 22, .n_head = 32, .n_head_kv = 4, .n_ff = 5632,
     .rope_base = 10000.0f, .eps = 1e-5f},
    {.name = "llama-3.2-1b", .arch = "llama", .source = "meta-llama/Llama-3.2-1B",
     .n_vocab = 128256, .n_ctx = 131072, .n_embd = 2048, .n_layer = 16, .n_head = 32, .n_head_kv = 8, .n_ff = 8192,
     .rope_base = 500000.0f, .eps = 1e-5f, .tied = 1, .bpe = 1,
     .rope3_factor = 32.0f, .rope3_low = 1.0f, .rope3_high = 4.0f, .rope3_orig_ctx = 8192},
    {.name = "qwen2.5-0.5b", .arch = "qwen2", .source = "Qwen/Qwen2.5-0.5B",
     .n_vocab = 151936, .n_ctx = 32768, .n_embd = 896, .n_layer = 24, .n_head = 14, .n_head_kv = 2, .n_ff = 4864,
     .rope_base = 1000000.0f, .eps = 1e-6f, .tied = 1, .qkv_bias = 1, .bpe = 1},
    {.name = "smollm2-135m", .arch = "llama", .source = "HuggingFaceTB/SmolLM2-135M",
     .n_vocab = 49152, .n_ctx = 8192, .n_embd = 576, .n_layer = 30, .n_head = 9, .n_head_kv = 3, .n_ff = 1536,
     .rope_base = 100000.0f, .eps = 1e-5f, .tied = 1, .bpe = 1},
    {.name = "smollm2-360m", .arch = "llama", .source = "HuggingFaceTB/SmolLM2-360M",
     .n_vocab = 49152, .n_ctx = 8192, .n_embd = 960, .n_layer = 32, .n_head = 15, .n_head_kv = 5, .n_ff = 2560,
     .rope_base = 100000.0f, .eps = 1e-5f, .tied = 1, .bpe = 1},
    /* encoders: n_head_kv = n_head (no GQA; not written, but the quantize rules read it) */
    {.name = "bge-small", .arch = "bert", .source = "BAAI/bge-small-en-v1.5",
     .n_vocab = 30522, .n_ctx = 512, .n_embd = 384, .n_layer = 12, .n_head = 12, .n_head_kv = 12, .n_ff = 1536,
     .eps = 1e-12f, .kind = SYNTH_BERT, .pooling = SYNTH_POOL_CLS, .n_token_types = 2},
    {.name = "all-minilm-l6", .arch = "bert", .source = "sentence-transformers/all-MiniLM-L6-v2",
     .n_vocab = 30522, .n_ctx = 512, .n_embd = 384, .n_layer = 6, .n_head = 12, .n_head_kv = 12, .n_ff = 1536,
     .eps = 1e-12f, .kind = SYNTH_BERT, .pooling = SYNTH_POOL_MEAN, .n_token_types = 2},
    {.name = "ms-marco-minilm-l6", .arch = "bert", .source = "cross-encoder/ms-marco-MiniLM-L-6-v2",
     .n_vocab = 30522, .n_ctx = 512, .n_embd = 384, .n_layer = 6, .n_head = 12, .n_head_kv = 12, .n_ff = 1536,
     .eps = 1e-12f, .kind = SYNTH_BERT, .pooling = SYNTH_POOL_RANK, .n_token_types = 2, .cls_head = 1},
    {.name = "nomic-embed", .arch = "nomic-bert", .source = "nomic-ai/nomic-embed-text-v1.5",
     .n_vocab = 30528, .n_ctx = 2048, .n_embd = 768, .n_layer = 12, .n_head = 12, .n_head_kv = 12, .n_ff = 3072,
     .rope_base = 1000.0f, .eps = 1e-12f, .kind = SYNTH_NOMIC_BERT, .pooling = SYNTH_POOL_MEAN, .n_token_types = 2},
    /* Whisper: n_layer = the decoder's blocks, n_audio_layer the encoder's. Seeds and <|endoftext|> factors:
     * micro, micro-v3 and tiny are make_random_whisper.py's VARIANTS (bit for bit); base, small and
     * large-v3-turbo continue its seeds, with tiny's factor (chosen, not tuned). */
    {.name = "whisper-micro", .arch = "whisper", .source = "../shared/whisper whisper-micro-random.bin",
     .n_vocab = 51865, .n_ctx = 448, .n_embd = 128, .n_layer = 3, .n_head = 2, .n_head_kv = 2, .n_ff = 512,
     .eps = 1e-5f, .kind = SYNTH_WHISPER, .n_mels = 80, .n_audio_layer = 3, .n_audio_ctx = 1500,
     .whisper_seed = 20261201, .eot_factor = 2.0},
    {.name = "whisper-micro-v3", .arch = "whisper", .source = "make_random_whisper.py micro-v3 (v3 vocabulary, 128 mels)",
     .n_vocab = 51866, .n_ctx = 448, .n_embd = 192, .n_layer = 2, .n_head = 3, .n_head_kv = 3, .n_ff = 768,
     .eps = 1e-5f, .kind = SYNTH_WHISPER, .n_mels = 128, .n_audio_layer = 4, .n_audio_ctx = 1500,
     .whisper_seed = 20261203, .eot_factor = -2.0},
    {.name = "whisper-tiny", .arch = "whisper", .source = "openai/whisper tiny (make_random_whisper.py tiny)",
     .n_vocab = 51865, .n_ctx = 448, .n_embd = 384, .n_layer = 4, .n_head = 6, .n_head_kv = 6, .n_ff = 1536,
     .eps = 1e-5f, .kind = SYNTH_WHISPER, .n_mels = 80, .n_audio_layer = 4, .n_audio_ctx = 1500,
     .whisper_seed = 20261202, .eot_factor = 2.5},
    {.name = "whisper-base", .arch = "whisper", .source = "openai/whisper base",
     .n_vocab = 51865, .n_ctx = 448, .n_embd = 512, .n_layer = 6, .n_head = 8, .n_head_kv = 8, .n_ff = 2048,
     .eps = 1e-5f, .kind = SYNTH_WHISPER, .n_mels = 80, .n_audio_layer = 6, .n_audio_ctx = 1500,
     .whisper_seed = 20261204, .eot_factor = 2.5},
    {.name = "whisper-small", .arch = "whisper", .source = "openai/whisper small",
     .n_vocab = 51865, .n_ctx = 448, .n_embd = 768, .n_layer = 12, .n_head = 12, .n_head_kv = 12, .n_ff = 3072,
     .eps = 1e-5f, .kind = SYNTH_WHISPER, .n_mels = 80, .n_audio_layer = 12, .n_audio_ctx = 1500,
     .whisper_seed = 20261205, .eot_factor = 2.5},
    {.name = "whisper-large-v3-turbo", .arch = "whisper", .source = "openai/whisper large-v3-turbo",
     .n_vocab = 51866, .n_ctx = 448, .n_embd = 1280, .n_layer = 4, .n_head = 20, .n_head_kv = 20, .n_ff = 5120,
     .eps = 1e-5f, .kind = SYNTH_WHISPER, .n_mels = 128, .n_audio_layer = 32, .n_audio_ctx = 1500,
     .whisper_seed = 20261206, .eot_factor = 2.5},
    /* vision towers: n_ctx = rows per image (patches + the class row); n_vocab unused */
    {.name = "clip-vit-b32", .arch = "clip", .source = "openai/clip-vit-base-patch32",
     .n_ctx = 50, .n_embd = 768, .n_layer = 12, .n_head = 12, .n_head_kv = 12, .n_ff = 3072, .eps = 1e-5f,
     .kind = SYNTH_VISION, .image_size = 224, .patch_size = 32, .proj_dim = 512,
     .text_vocab = 49408, .text_ctx = 77, .text_embd = 512, .text_layer = 12, .text_head = 8, .text_ff = 2048},
    {.name = "clip-vit-b16", .arch = "clip", .source = "openai/clip-vit-base-patch16",
     .n_ctx = 197, .n_embd = 768, .n_layer = 12, .n_head = 12, .n_head_kv = 12, .n_ff = 3072, .eps = 1e-5f,
     .kind = SYNTH_VISION, .image_size = 224, .patch_size = 16, .proj_dim = 512,
     .text_vocab = 49408, .text_ctx = 77, .text_embd = 512, .text_layer = 12, .text_head = 8, .text_ff = 2048},
    {.name = "siglip-base", .arch = "siglip", .source = "google/siglip-base-patch16-224",
     .n_ctx = 196, .n_embd = 768, .n_layer = 12, .n_head = 12, .n_head_kv = 12, .n_ff = 3072, .eps = 1e-6f,
     .kind = SYNTH_VISION, .image_size = 224, .patch_size = 16,
     .text_vocab = 32000, .text_ctx = 64, .text_embd = 768, .text_layer = 12, .text_head = 12, .text_ff = 3072},
    {.name = "vit-base", .arch = "vit", .source = "google/vit-base-patch16-224",
     .n_ctx = 197, .n_embd = 768, .n_layer = 12, .n_head = 12, .n_head_kv = 12, .n_ff = 3072, .eps = 1e-12f,
     .kind = SYNTH_VISION, .image_size = 224, .patch_size = 16, .n_labels = 1000},
};
/* clang-format on */
#define N_ARCHS ((int)(sizeof archs / sizeof archs[0]))

int synth_arch_count(void) { return N_ARCHS; }
const synth_arch *synth_arch_at(int i) { return i >= 0 && i < N_ARCHS ? &archs[i] : NULL; }

const synth_arch *synth_arch_find(const char *name) {
    for (int i = 0; name && i < N_ARCHS; i++)
        if (strcasecmp(archs[i].name, name) == 0) return &archs[i];
    return NULL;
}

int synth_arch_max_layers(const synth_arch *a) {
    return a->kind == SYNTH_WHISPER && a->n_audio_layer > a->n_layer ? a->n_audio_layer : a->n_layer;
}

static int head_dim(const synth_arch *a) { return a->n_embd / a->n_head; }

/* ADD(ne0, ne1, name...): ne1 == 1 makes a 1-D tensor; MAT makes a matrix even with one row. */
#define ADD_DIMS(nd, a0, a1, ...)                                                                                      \
    do {                                                                                                               \
        if (n < cap) {                                                                                                 \
            snprintf(out[n].name, sizeof out[n].name, __VA_ARGS__);                                                    \
            out[n].ne[0] = (a0);                                                                                       \
            out[n].ne[1] = (a1);                                                                                       \
            out[n].n_dims = (nd);                                                                                      \
        }                                                                                                              \
        n++;                                                                                                           \
    } while (0)
#define ADD(a0, a1, ...) ADD_DIMS((a1) > 1 ? 2 : 1, a0, a1, __VA_ARGS__)
#define MAT(a0, a1, ...) ADD_DIMS(2, a0, a1, __VA_ARGS__)

/* llama.cpp's decoder layout (LLM_ARCH_LLAMA / QWEN2). */
static int decoder_tensors(const synth_arch *a, int n_layer, synth_tensor *out, int cap) {
    const int64_t E = a->n_embd, q = (int64_t)a->n_head * head_dim(a), kv = (int64_t)a->n_head_kv * head_dim(a);
    int n = 0;
    if (a->rope3_factor > 0) ADD(head_dim(a) / 2, 1, "rope_freqs.weight");
    ADD(E, a->n_vocab, "token_embd.weight");
    for (int i = 0; i < n_layer; i++) {
        ADD(E, 1, "blk.%d.attn_norm.weight", i);
        ADD(E, q, "blk.%d.attn_q.weight", i);
        if (a->qkv_bias) ADD(q, 1, "blk.%d.attn_q.bias", i);
        ADD(E, kv, "blk.%d.attn_k.weight", i);
        if (a->qkv_bias) ADD(kv, 1, "blk.%d.attn_k.bias", i);
        ADD(E, kv, "blk.%d.attn_v.weight", i);
        if (a->qkv_bias) ADD(kv, 1, "blk.%d.attn_v.bias", i);
        ADD(q, E, "blk.%d.attn_output.weight", i);
        ADD(E, 1, "blk.%d.ffn_norm.weight", i);
        ADD(E, a->n_ff, "blk.%d.ffn_gate.weight", i);
        ADD(E, a->n_ff, "blk.%d.ffn_up.weight", i);
        ADD(a->n_ff, E, "blk.%d.ffn_down.weight", i);
    }
    ADD(E, 1, "output_norm.weight");
    if (!a->tied) ADD(E, a->n_vocab, "output.weight");
    return n;
}

/* llama.cpp's encoder layouts (LLM_ARCH_BERT / NOMIC_BERT): post-norm layers,
 *   x = LN(x + attn(x));  x = LN(x + ffn(x))
 * with attn_output_norm and layer_output_norm as the two LayerNorms. BERT has
 * learned positions, biases on every projection and a GELU FFN; nomic-bert
 * has RoPE (no position_embd), one fused QKV matrix, a SwiGLU FFN and no
 * biases but the LayerNorms'. */
static int encoder_tensors(const synth_arch *a, int n_layer, synth_tensor *out, int cap) {
    const int64_t E = a->n_embd, F = a->n_ff;
    const int bert = a->kind == SYNTH_BERT;
    int n = 0;
    ADD(E, a->n_vocab, "token_embd.weight");
    MAT(E, a->n_token_types, "token_types.weight");
    if (bert) ADD(E, a->n_ctx, "position_embd.weight");
    ADD(E, 1, "token_embd_norm.weight");
    ADD(E, 1, "token_embd_norm.bias");
    for (int i = 0; i < n_layer; i++) {
        if (bert) {
            static const char *const qkv[3] = {"q", "k", "v"};
            for (int k = 0; k < 3; k++) {
                ADD(E, E, "blk.%d.attn_%s.weight", i, qkv[k]);
                ADD(E, 1, "blk.%d.attn_%s.bias", i, qkv[k]);
            }
        } else {
            ADD(E, 3 * E, "blk.%d.attn_qkv.weight", i);
        }
        ADD(E, E, "blk.%d.attn_output.weight", i);
        if (bert) ADD(E, 1, "blk.%d.attn_output.bias", i);
        ADD(E, 1, "blk.%d.attn_output_norm.weight", i);
        ADD(E, 1, "blk.%d.attn_output_norm.bias", i);
        ADD(E, F, "blk.%d.ffn_up.weight", i);
        if (bert) ADD(F, 1, "blk.%d.ffn_up.bias", i);
        if (!bert) ADD(E, F, "blk.%d.ffn_gate.weight", i);
        ADD(F, E, "blk.%d.ffn_down.weight", i);
        if (bert) ADD(E, 1, "blk.%d.ffn_down.bias", i);
        ADD(E, 1, "blk.%d.layer_output_norm.weight", i);
        ADD(E, 1, "blk.%d.layer_output_norm.bias", i);
    }
    if (a->cls_head) { /* score = cls.output . tanh(cls . h[CLS] + cls.bias) + cls.output.bias */
        ADD(E, E, "cls.weight");
        ADD(E, 1, "cls.bias");
        MAT(E, 1, "cls.output.weight");
        ADD(1, 1, "cls.output.bias");
    }
    return n;
}
/* Whisper's state dict (make_random_whisper.py's tensor_list) in whisper_vocab.h's GGUF shapes:
 * the convolutions taps-major {3 C_in, S} with 1-D biases. */
static int whisper_block(int n, const char *stack, int i, int64_t S, int cross, synth_tensor *out, int cap) {
    static const char *const att[2] = {"attn", "cross_attn"};
    for (int a = 0; a < 1 + cross; a++) {
        ADD(S, S, "%s.blocks.%d.%s.query.weight", stack, i, att[a]);
        ADD(S, 1, "%s.blocks.%d.%s.query.bias", stack, i, att[a]);
        ADD(S, S, "%s.blocks.%d.%s.key.weight", stack, i, att[a]);
        ADD(S, S, "%s.blocks.%d.%s.value.weight", stack, i, att[a]);
        ADD(S, 1, "%s.blocks.%d.%s.value.bias", stack, i, att[a]);
        ADD(S, S, "%s.blocks.%d.%s.out.weight", stack, i, att[a]);
        ADD(S, 1, "%s.blocks.%d.%s.out.bias", stack, i, att[a]);
        ADD(S, 1, "%s.blocks.%d.%s_ln.weight", stack, i, att[a]);
        ADD(S, 1, "%s.blocks.%d.%s_ln.bias", stack, i, att[a]);
    }
    ADD(S, 4 * S, "%s.blocks.%d.mlp.0.weight", stack, i);
    ADD(4 * S, 1, "%s.blocks.%d.mlp.0.bias", stack, i);
    ADD(4 * S, S, "%s.blocks.%d.mlp.2.weight", stack, i);
    ADD(S, 1, "%s.blocks.%d.mlp.2.bias", stack, i);
    ADD(S, 1, "%s.blocks.%d.mlp_ln.weight", stack, i);
    ADD(S, 1, "%s.blocks.%d.mlp_ln.bias", stack, i);
    return n;
}

static int whisper_tensors(const synth_arch *a, int n_layer, synth_tensor *out, int cap) {
    const int64_t S = a->n_embd;
    const int enc = n_layer < a->n_audio_layer ? n_layer : a->n_audio_layer;
    const int dec = n_layer < a->n_layer ? n_layer : a->n_layer;
    int n = 0;
    ADD(WGML_MEL_N_BINS, a->n_mels, "mel_filters");
    ADD(S, a->n_audio_ctx, "encoder.positional_embedding");
    ADD(3 * (int64_t)a->n_mels, S, "encoder.conv1.weight");
    ADD(S, 1, "encoder.conv1.bias");
    ADD(3 * S, S, "encoder.conv2.weight");
    ADD(S, 1, "encoder.conv2.bias");
    for (int i = 0; i < enc; i++)
        n = whisper_block(n, "encoder", i, S, 0, out, cap);
    ADD(S, 1, "encoder.ln_post.weight");
    ADD(S, 1, "encoder.ln_post.bias");
    ADD(S, a->n_ctx, "decoder.positional_embedding");
    ADD(S, a->n_vocab, "decoder.token_embedding.weight");
    for (int i = 0; i < dec; i++)
        n = whisper_block(n, "decoder", i, S, 1, out, cap);
    ADD(S, 1, "decoder.ln.weight");
    ADD(S, 1, "decoder.ln.bias");
    return n;
}

/* A vision tower block's tensors under pfx (model/clip/clip.h); attn_norm 0: none (SigLIP's head). */
static int vision_block(int n, const char *pfx, int64_t E, int64_t F, int attn_norm, synth_tensor *out, int cap) {
    static const char *const proj[4] = {"q", "k", "v", "out"};
    if (attn_norm) {
        ADD(E, 1, "%s.attn_norm.weight", pfx);
        ADD(E, 1, "%s.attn_norm.bias", pfx);
    }
    for (int k = 0; k < 4; k++) {
        ADD(E, E, "%s.attn_%s.weight", pfx, proj[k]);
        ADD(E, 1, "%s.attn_%s.bias", pfx, proj[k]);
    }
    ADD(E, 1, "%s.ffn_norm.weight", pfx);
    ADD(E, 1, "%s.ffn_norm.bias", pfx);
    ADD(E, F, "%s.ffn_up.weight", pfx);
    ADD(F, 1, "%s.ffn_up.bias", pfx);
    ADD(F, E, "%s.ffn_down.weight", pfx);
    ADD(E, 1, "%s.ffn_down.bias", pfx);
    return n;
}

/* A text tower's blocks when the vision tower has n_layer, and its vectors' size. */
static int text_layers(const synth_arch *a, int n_layer) { return n_layer < a->text_layer ? n_layer : a->text_layer; }
static int64_t text_proj(const synth_arch *a) { return a->proj_dim ? a->proj_dim : a->n_embd; }

static int vision_tensors(const synth_arch *a, int n_layer, synth_tensor *out, int cap) {
    const int64_t E = a->n_embd, F = a->n_ff, K = 3LL * a->patch_size * a->patch_size;
    const int clip = !strcmp(a->arch, "clip"), siglip = !strcmp(a->arch, "siglip");
    int n = 0;
    MAT(K, E, "v.patch_embd.weight");
    if (!clip) ADD(E, 1, "v.patch_embd.bias");
    if (!siglip) ADD(E, 1, "v.class_embd");
    MAT(E, a->n_ctx, "v.position_embd.weight");
    if (clip) {
        ADD(E, 1, "v.pre_norm.weight");
        ADD(E, 1, "v.pre_norm.bias");
    }
    for (int i = 0; i < n_layer; i++) {
        char pfx[24];
        snprintf(pfx, sizeof pfx, "v.blk.%d", i);
        n = vision_block(n, pfx, E, F, 1, out, cap);
    }
    ADD(E, 1, "v.post_norm.weight");
    ADD(E, 1, "v.post_norm.bias");
    if (a->proj_dim) MAT(E, a->proj_dim, "v.proj.weight");
    if (siglip) {
        ADD(E, 1, "v.head.probe");
        n = vision_block(n, "v.head", E, F, 0, out, cap);
    }
    if (a->n_labels) {
        MAT(E, a->n_labels, "v.classifier.weight");
        ADD(a->n_labels, 1, "v.classifier.bias");
    }
    if (a->text_layer) { /* the text tower: as many blocks as the vision tower's, at most its own */
        const int64_t D = a->text_embd;
        MAT(D, a->text_vocab, "t.token_embd.weight");
        MAT(D, a->text_ctx, "t.position_embd.weight");
        for (int i = 0; i < text_layers(a, n_layer); i++) {
            char pfx[24];
            snprintf(pfx, sizeof pfx, "t.blk.%d", i);
            n = vision_block(n, pfx, D, a->text_ff, 1, out, cap);
        }
        ADD(D, 1, "t.post_norm.weight");
        ADD(D, 1, "t.post_norm.bias");
        MAT(D, text_proj(a), "t.proj.weight");
        if (siglip) ADD(text_proj(a), 1, "t.proj.bias");
    }
    return n;
}

#undef ADD
#undef MAT
#undef ADD_DIMS

int synth_tensor_list(const synth_arch *a, int n_layer, synth_tensor *out, int cap) {
    if (n_layer <= 0) n_layer = synth_arch_max_layers(a);
    if (a->kind == SYNTH_WHISPER) return whisper_tensors(a, n_layer, out, cap);
    if (a->kind == SYNTH_VISION) return vision_tensors(a, n_layer, out, cap);
    return a->kind == SYNTH_DECODER ? decoder_tensors(a, n_layer, out, cap) : encoder_tensors(a, n_layer, out, cap);
}

/* llama.cpp's converter: for each rotary frequency f = base^(-2i/d) (in f32),
 * wavelength 2 pi / f; factor 1 below original_ctx / high_freq_factor, `factor`
 * above original_ctx / low_freq_factor, and between them 1 / ((1 - s) / factor + s)
 * with s = (original_ctx / wavelength - low) / (high - low). */
void synth_rope3_factors(const synth_arch *a, float *out) {
    const int d = head_dim(a);
    const double lo_wavelen = a->rope3_orig_ctx / a->rope3_low, hi_wavelen = a->rope3_orig_ctx / a->rope3_high;
    for (int i = 0; i < d / 2; i++) {
        float expo = (float)(2 * i) / (float)d;
        float freq = 1.0f / powf(a->rope_base, expo);
        double wavelen = 2 * M_PI / freq;
        double f;
        if (wavelen < hi_wavelen)
            f = 1;
        else if (wavelen > lo_wavelen)
            f = a->rope3_factor;
        else {
            double s = (a->rope3_orig_ctx / wavelen - a->rope3_low) / (a->rope3_high - a->rope3_low);
            f = 1 / ((1 - s) / a->rope3_factor + s);
        }
        out[i] = (float)f;
    }
}

/* ---- random numbers ---- */

static inline uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

#define NORMAL_BITS 12
#define NORMAL_BINS (1 << NORMAL_BITS)

typedef struct normal_table {
    float edge[NORMAL_BINS], width[NORMAL_BINS]; /* bin i is [edge, edge + width) */
} normal_table;

static double norm_cdf(double x) { return 0.5 * erfc(-x / M_SQRT2); }

static double norm_quantile(double p) {
    double lo = -12, hi = 12;
    for (int it = 0; it < 200 && hi - lo > 1e-13; it++) {
        double mid = 0.5 * (lo + hi);
        if (norm_cdf(mid) < p)
            lo = mid;
        else
            hi = mid;
    }
    return 0.5 * (lo + hi);
}

static void normal_table_init(normal_table *t) {
    double e[NORMAL_BINS + 1];
    for (int i = 1; i <= NORMAL_BINS / 2; i++)
        e[i] = norm_quantile((double)i / NORMAL_BINS);
    for (int i = 1; i < NORMAL_BINS / 2; i++)
        e[NORMAL_BINS - i] = -e[i];
    /* tail bin [e0, e1] uniform with the tail's conditional mean -pdf(e1)/cdf(e1) */
    double pdf = exp(-0.5 * e[1] * e[1]) / sqrt(2 * M_PI), mean = -pdf / norm_cdf(e[1]);
    e[0] = 2 * mean - e[1];
    e[NORMAL_BINS] = -e[0];
    double var = 0;
    for (int i = 0; i < NORMAL_BINS; i++)
        var += (e[i] * e[i] + e[i] * e[i + 1] + e[i + 1] * e[i + 1]) / 3;
    double scale = 1 / sqrt(var / NORMAL_BINS);
    for (int i = 0; i < NORMAL_BINS; i++) {
        t->edge[i] = (float)(e[i] * scale);
        t->width[i] = (float)((e[i + 1] - e[i]) * scale);
    }
}

/* ---- generation ---- */

typedef enum { KIND_MATRIX, KIND_NORM, KIND_BIAS } value_kind;

typedef struct gen_ctx {
    const normal_table *nt;
    uint64_t seed; /* of this tensor */
    value_kind kind;
} gen_ctx;

static uint64_t name_hash(const char *s) {
    uint64_t h = 1469598103934665603ull;
    while (*s)
        h = (h ^ (uint8_t)*s++) * 1099511628211ull;
    return h;
}

static void gen_row(void *arg, int64_t row, float *dst, int64_t n) {
    const gen_ctx *g = arg;
    uint64_t s = g->seed ^ ((uint64_t)row * 0xd1b54a32d192ed03ull);
    splitmix64(&s);
    const float *edge = g->nt->edge, *width = g->nt->width;
    const float offset = g->kind == KIND_NORM ? 1.0f : 0.0f;
    for (int64_t i = 0; i < n; i += 2) {
        uint64_t r = splitmix64(&s);
        for (int k = 0; k < 2 && i + k < n; k++) {
            uint32_t h = (uint32_t)(r >> (32 * k));
            uint32_t bin = h >> (32 - NORMAL_BITS);
            float frac = (float)(h & ((1u << (32 - NORMAL_BITS)) - 1)) * (1.0f / (float)(1u << (32 - NORMAL_BITS)));
            dst[i + k] = offset + WEIGHT_STD * (edge[bin] + frac * width[bin]);
        }
    }
}

/* ---- pools of quantized blocks ---- */

#define POOL_VALUES (2 << 20)

typedef struct block_pool {
    uint8_t *data;
    size_t block_bytes;
    int64_t block_elems, n_blocks;
} block_pool;

typedef struct assemble_job {
    const block_pool *pool;
    uint64_t seed;
    uint8_t *dst;
    int64_t blocks_per_row, r1;
    atomic_llong next;
} assemble_job;

static void assemble_task(void *arg, int ith, int nth) {
    (void)ith, (void)nth;
    assemble_job *j = arg;
    const block_pool *pl = j->pool;
    const size_t row_bytes = (size_t)j->blocks_per_row * pl->block_bytes;
    for (;;) {
        int64_t r = atomic_fetch_add(&j->next, 1);
        if (r >= j->r1) break;
        uint64_t s = j->seed ^ ((uint64_t)r * 0xd1b54a32d192ed03ull);
        uint8_t *d = j->dst + (size_t)r * row_bytes;
        for (int64_t b = 0; b < j->blocks_per_row; b++) {
            uint64_t idx = ((splitmix64(&s) >> 32) * (uint64_t)pl->n_blocks) >> 32; /* uniform in [0, n_blocks) */
            memcpy(d + (size_t)b * pl->block_bytes, pl->data + idx * pl->block_bytes, pl->block_bytes);
        }
    }
}

/* The pool of `type`, made on first use: POOL_VALUES normal values quantized block by block. */
static wgml_status get_pool(block_pool *pools, uint32_t type, wgml_threadpool *tp, const normal_table *nt,
                            uint64_t seed, wgml_error *err) {
    block_pool *pl = &pools[type];
    if (pl->data) return WGML_OK;
    const wgml_dtype_traits *tr = wgml_dtype_get(type);
    pl->block_elems = tr->block_size;
    pl->block_bytes = (size_t)tr->type_size;
    pl->n_blocks = POOL_VALUES / tr->block_size;
    pl->data = wgml_malloc((size_t)pl->n_blocks * pl->block_bytes);
    if (!pl->data) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory for a pool of %s blocks", tr->name);
    gen_ctx g = {nt, seed ^ name_hash(tr->name) ^ 0x706f6f6cull, KIND_MATRIX};
    return quantize_rows(tp, type, pl->block_elems, 0, pl->n_blocks, gen_row, &g, pl->data, err);
}

static wgml_status write_metadata(gguf_writer *w, const synth_arch *a, int n_layer, uint32_t file_type,
                                  const synth_params *p, const gguf_file *vocab, wgml_error *err) {
    char name[96], key[128];
    wgml_status st;
    snprintf(name, sizeof name, "synth %s", a->name);
    if ((st = gguf_writer_set_str(w, "general.architecture", a->arch, err)) ||
        (st = gguf_writer_set_str(w, "general.name", name, err)) ||
        (st = gguf_writer_set_u32(w, "general.file_type", file_type, err)) ||
        (st = gguf_writer_set_u32(w, "general.quantization_version", 2, err)) ||
        (st = gguf_writer_set_u64(w, "wgml.synth.seed", p->seed, err)))
        return st;
#define KV_U32(suffix, v)                                                                                              \
    snprintf(key, sizeof key, "%s." suffix, a->arch);                                                                  \
    if ((st = gguf_writer_set_u32(w, key, (uint32_t)(v), err))) return st;
#define KV_F32(suffix, v)                                                                                              \
    snprintf(key, sizeof key, "%s." suffix, a->arch);                                                                  \
    if ((st = gguf_writer_set_f32(w, key, (v), err))) return st;
    if (a->kind == SYNTH_VISION) {
        KV_U32("vision.image_size", a->image_size)
        KV_U32("vision.patch_size", a->patch_size)
        KV_U32("vision.embedding_length", a->n_embd)
        KV_U32("vision.feed_forward_length", a->n_ff)
        KV_U32("vision.block_count", n_layer)
        KV_U32("vision.attention.head_count", a->n_head)
        KV_F32("vision.attention.layer_norm_epsilon", a->eps)
        if (a->proj_dim) {
            KV_U32("vision.projection_dim", a->proj_dim)
        }
        if (a->n_labels) {
            char **labels = wgml_calloc((size_t)a->n_labels, sizeof *labels);
            st = labels ? WGML_OK : wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory");
            for (int i = 0; !st && i < a->n_labels; i++)
                if (!(labels[i] = wgml_malloc(24))) st = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory");
                else snprintf(labels[i], 24, "LABEL_%d", i);
            snprintf(key, sizeof key, "%s.classifier.output_labels", a->arch);
            if (!st) st = gguf_writer_set_arr_str(w, key, (const char *const *)labels, NULL, (uint64_t)a->n_labels, err);
            for (int i = 0; labels && i < a->n_labels; i++) wgml_free(labels[i]);
            wgml_free(labels);
            if (st) return st;
        }
        if (a->text_layer) { /* the text tower, its zero-shot scale (the trained CLIP's 100; SigLIP's
                              * initial 10 and -10) and its vocabulary */
            const int siglip = !strcmp(a->arch, "siglip");
            KV_U32("text.context_length", a->text_ctx)
            KV_U32("text.embedding_length", a->text_embd)
            KV_U32("text.feed_forward_length", a->text_ff)
            KV_U32("text.block_count", text_layers(a, n_layer))
            KV_U32("text.attention.head_count", a->text_head)
            KV_U32("text.projection_dim", text_proj(a))
            KV_F32("text.attention.layer_norm_epsilon", a->eps)
            KV_F32("logit_scale", logf(siglip ? 10.0f : 100.0f))
            if (siglip) {
                KV_F32("logit_bias", -10.0f)
            }
            st = siglip ? synth_vocab_unigram(w, a->text_vocab, err) : synth_vocab_clip(w, a->text_vocab, err);
            if (st) return st;
        }
        return WGML_OK;
    }
    if (a->kind == SYNTH_DECODER) {
        KV_U32("vocab_size", a->n_vocab)
        KV_U32("context_length", a->n_ctx)
        KV_U32("embedding_length", a->n_embd)
        KV_U32("block_count", n_layer)
        KV_U32("feed_forward_length", a->n_ff)
        KV_U32("attention.head_count", a->n_head)
        KV_U32("attention.head_count_kv", a->n_head_kv)
        KV_F32("rope.freq_base", a->rope_base)
        KV_F32("attention.layer_norm_rms_epsilon", a->eps)
        KV_U32("rope.dimension_count", head_dim(a))
    } else {
        /* what the converter's BertModel writes: no vocab_size, no head_count_kv (BERT
         * configs have no num_key_value_heads), LayerNorm epsilon, non-causal attention */
        KV_U32("context_length", a->n_ctx)
        KV_U32("embedding_length", a->n_embd)
        KV_U32("feed_forward_length", a->n_ff)
        KV_U32("attention.head_count", a->n_head)
        KV_F32("attention.layer_norm_epsilon", a->eps)
        KV_U32("block_count", n_layer)
        snprintf(key, sizeof key, "%s.attention.causal", a->arch);
        if ((st = gguf_writer_set_bool(w, key, 0, err))) return st;
        KV_U32("pooling_type", a->pooling)
        if (a->rope_base > 0) {
            KV_F32("rope.freq_base", a->rope_base)
        }
        if (a->cls_head) {
            /* BertForSequenceClassification's id2label: one label, the relevance score */
            static const char *const labels[] = {"LABEL_0"};
            snprintf(key, sizeof key, "%s.classifier.output_labels", a->arch);
            if ((st = gguf_writer_set_arr_str(w, key, labels, NULL, 1, err))) return st;
        }
        /* a tokenizer.* key, but the model's: the vocabulary file's own copy is skipped */
        if ((st = gguf_writer_set_u32(w, "tokenizer.ggml.token_type_count", (uint32_t)a->n_token_types, err)))
            return st;
    }
#undef KV_U32
#undef KV_F32
    return synth_vocab_copy(w, vocab, a->n_vocab, p->log, p->log_user, err);
}

static value_kind kind_of(const char *name) {
    size_t n = strlen(name);
    if (n > 5 && strcmp(name + n - 5, ".bias") == 0) return KIND_BIAS;
    if (strstr(name, "_norm.weight")) return KIND_NORM;
    return KIND_MATRIX;
}

static size_t tensor_bytes(uint32_t type, const synth_tensor *t) {
    return wgml_row_size(type, t->ne[0]) * (size_t)t->ne[1];
}

/* Rows per progress report: about 16M values. */
#define PROGRESS_ELEMENTS (16LL << 20)

typedef struct synth_state {
    wgml_threadpool *tp;
    const normal_table *nt;
    block_pool pools[WGML_DTYPE_COUNT];
    uint8_t *buf;
} synth_state;

static wgml_status write_tensor(gguf_writer *w, synth_state *S, const synth_arch *a, const synth_tensor *t,
                                uint32_t type, const synth_params *p, uint64_t *done, uint64_t total, wgml_error *err) {
    wgml_status st;
    uint8_t *buf = S->buf;
    const uint64_t seed = name_hash(t->name) ^ (p->seed * 0x9e3779b97f4a7c15ull);
    if (strcmp(t->name, "rope_freqs.weight") == 0) {
        synth_rope3_factors(a, (float *)(void *)buf); /* F32, a 1-D tensor */
        *done += (uint64_t)t->ne[0];
    } else if (wgml_dtype_get(type)->quantized) {
        if ((st = get_pool(S->pools, type, S->tp, S->nt, p->seed, err))) return st;
        assemble_job j = {.pool = &S->pools[type],
                          .seed = seed,
                          .dst = buf,
                          .blocks_per_row = t->ne[0] / S->pools[type].block_elems,
                          .r1 = t->ne[1]};
        atomic_init(&j.next, 0);
        wgml_threadpool_run(S->tp, assemble_task, &j);
        *done += (uint64_t)(t->ne[0] * t->ne[1]);
    } else {
        gen_ctx g = {S->nt, seed, kind_of(t->name)};
        int64_t step = PROGRESS_ELEMENTS / t->ne[0] > 0 ? PROGRESS_ELEMENTS / t->ne[0] : 1;
        for (int64_t r = 0; r < t->ne[1]; r += step) {
            int64_t r1 = r + step < t->ne[1] ? r + step : t->ne[1];
            if ((st = quantize_rows(S->tp, type, t->ne[0], r, r1, gen_row, &g, buf, err))) {
                wgml_error_prefix(err, "tensor '%s'", t->name);
                return st;
            }
            *done += (uint64_t)((r1 - r) * t->ne[0]);
            if (p->progress && r1 < t->ne[1] && p->progress(p->progress_user, "generating", *done, total))
                return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "cancelled");
        }
    }
    if ((st = gguf_writer_write_tensor(w, buf, tensor_bytes(type, t), err))) return st;
    if (p->progress && p->progress(p->progress_user, "generating", *done, total))
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "cancelled");
    return WGML_OK;
}

/* ---- Whisper (make_random_whisper.py, ../shared/whisper/README.md "Weights") ----
 *
 * Value i (row-major in PyTorch's shape) of a tensor: z = mix(seed ^ fnv1a64(name) + (i + 1) * golden),
 * u = (z >> 11) 2^-53, x = c + (2u - 1) b in double (times a row's factor), rounded to f32, then
 * to f16. Every operation is the script's, in the same order, so the bits are the same. */

#define WHISPER_TS_ROWS  1501 /* <|0.00|> .. <|30.00|>: the last rows of the token embedding */
#define WHISPER_TS_SCALE 1.15

typedef struct whisper_gen {
    uint64_t state0;
    double b, c;
    int64_t conv_c;   /* a convolution's input channels: rows permuted to taps-major */
    int64_t ts_first; /* the token embedding: the first timestamp row (else -1) */
    int64_t eot_row;
    double eot_factor;
    int sinus; /* encoder.positional_embedding: sinusoids, not random */
} whisper_gen;

static inline double whisper_uniform(uint64_t state0, uint64_t i) {
    uint64_t z = state0 + (i + 1) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z = z ^ (z >> 31);
    return (double)(z >> 11) * (1.0 / 9007199254740992.0); /* 2^-53 */
}

/* 64-bit FNV-1a (offset basis 0xCBF29CE484222325; name_hash above starts elsewhere, and its streams stay) */
static uint64_t fnv1a64(const char *s) {
    uint64_t h = 0xCBF29CE484222325ull;
    while (*s)
        h = (h ^ (uint8_t)*s++) * 0x100000001B3ull;
    return h;
}

static inline float whisper_round(double x) { return wgml_f16_to_f32(wgml_f32_to_f16((float)x)); }

static inline float whisper_value(const whisper_gen *g, uint64_t i, double factor) {
    double x = (2.0 * whisper_uniform(g->state0, i) - 1.0) * g->b;
    if (g->c != 0) x = g->c + x;
    if (factor != 1.0) x = x * factor;
    return whisper_round(x);
}

static void whisper_row(void *arg, int64_t row, float *dst, int64_t n) {
    const whisper_gen *g = arg;
    if (g->sinus) { /* [sin(t f_j) | cos(t f_j)], f_j = exp(-j ln(1e4) / (n/2 - 1)) */
        const int64_t h = n / 2;
        const double inc = log(10000.0) / (double)(h - 1);
        for (int64_t j = 0; j < h; j++) {
            const double st = (double)row * exp(-inc * (double)j);
            dst[j] = whisper_round(sin(st));
            dst[h + j] = whisper_round(cos(st));
        }
    } else if (g->conv_c) { /* dst[j C + c] = w[row][c][j], PyTorch index (row C + c) 3 + j */
        const int64_t C = g->conv_c;
        for (int64_t c = 0; c < C; c++)
            for (int j = 0; j < 3; j++)
                dst[j * C + c] = whisper_value(g, (uint64_t)((row * C + c) * 3 + j), 1.0);
    } else {
        double f = 1.0;
        if (g->ts_first >= 0 && row >= g->ts_first) f = WHISPER_TS_SCALE;
        if (row == g->eot_row) f = g->eot_factor;
        for (int64_t k = 0; k < n; k++)
            dst[k] = whisper_value(g, (uint64_t)(row * n + k), f);
    }
}

static int ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* The draw of tensor t (make_random_whisper.py's half_width). */
static void whisper_gen_init(whisper_gen *g, const synth_arch *a, const synth_tensor *t, uint64_t seed) {
    memset(g, 0, sizeof *g);
    g->state0 = seed ^ fnv1a64(t->name);
    g->ts_first = -1;
    g->eot_row = -1;
    const double S = a->n_embd;
    const char *name = t->name;
    if (!strcmp(name, "encoder.positional_embedding")) {
        g->sinus = 1;
    } else if (!strcmp(name, "decoder.token_embedding.weight")) {
        g->b = 7.0 / sqrt(S);
        g->ts_first = a->n_vocab - WHISPER_TS_ROWS;
        g->eot_row = a->n_vocab >= 51865 ? 50257 : 50256;
        g->eot_factor = a->eot_factor;
    } else if (!strcmp(name, "decoder.positional_embedding")) {
        g->b = 1.75;
    } else if (ends_with(name, "ln.weight") || ends_with(name, "ln_post.weight")) {
        g->b = 0.25;
        g->c = 1.0;
    } else if (ends_with(name, ".bias")) {
        g->b = 0.1;
    } else if (!strcmp(name, "encoder.conv1.weight")) {
        g->b = 4.0 / sqrt(3.0 * a->n_mels);
        g->conv_c = a->n_mels;
    } else if (!strcmp(name, "encoder.conv2.weight")) {
        g->b = 4.0 / sqrt(3.0 * S);
        g->conv_c = a->n_embd;
    } else if (ends_with(name, ".query.weight") || ends_with(name, ".key.weight")) {
        g->b = 3.5 / sqrt(S);
    } else if (ends_with(name, ".value.weight") || ends_with(name, ".out.weight")) {
        g->b = 2.0 / sqrt(S);
    } else if (ends_with(name, ".mlp.0.weight")) {
        g->b = 1.5 / sqrt(S);
    } else { /* .mlp.2.weight: fan-in 4 S */
        g->b = 1.5 / sqrt(4.0 * S);
    }
}

/* The types whisper_vocab.h allows for the matrices. */
static int whisper_type_ok(uint32_t t) {
    return t == WGML_F32 || t == WGML_F16 || t == WGML_Q8_0 || t == WGML_Q5_0 || t == WGML_Q5_1 || t == WGML_Q4_0 ||
           t == WGML_Q4_1;
}

/* F32: vectors, the positional embeddings, the mel filters; the convolutions F16 (F32 in an F32 file); every
 * other matrix (the token embedding too: it is also the output projection) the recipe's type, or F16 when
 * its rows fit no block. */
static uint32_t whisper_tensor_type(const synth_tensor *t, uint32_t base) {
    if (t->n_dims == 1 || !strcmp(t->name, "mel_filters") || ends_with(t->name, "positional_embedding"))
        return WGML_F32;
    if (!strcmp(t->name, "encoder.conv1.weight") || !strcmp(t->name, "encoder.conv2.weight"))
        return base == WGML_F32 ? WGML_F32 : WGML_F16;
    return t->ne[0] % wgml_dtype_get(base)->block_size ? WGML_F16 : base;
}

static wgml_status whisper_write(const char *out, const synth_arch *a, const quantize_recipe *rc, const synth_params *p,
                                 synth_result *result, wgml_error *err) {
    if (!whisper_type_ok(rc->base))
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT,
                         "type '%s': a Whisper model is F32, F16, Q8_0, Q5_0, Q5_1, Q4_0 or Q4_1", p->type);
    const int max_layers = synth_arch_max_layers(a);
    const int n_layer = p->n_layer ? p->n_layer : max_layers;
    if (n_layer < 1 || n_layer > max_layers)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "%s has %d layers; cannot write %d", a->name, max_layers,
                         p->n_layer);
    if (!out) return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "synth: the output path is required");
    const uint64_t seed = p->seed ? p->seed : a->whisper_seed;
    const int enc = n_layer < a->n_audio_layer ? n_layer : a->n_audio_layer;
    const int dec = n_layer < a->n_layer ? n_layer : a->n_layer;
    const int n_text = a->n_vocab >= 51865 ? 50257 : 50256;

    gguf_writer *w = gguf_writer_create();
    wgml_threadpool *pool = NULL;
    const int n = synth_tensor_list(a, n_layer, NULL, 0);
    synth_tensor *ts = wgml_calloc((size_t)n, sizeof *ts);
    uint32_t *types = wgml_calloc((size_t)n, sizeof *types);
    uint8_t *buf = NULL;
    wgml_status st = WGML_OK;
    if (!w || !ts || !types) {
        st = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    synth_tensor_list(a, n_layer, ts, n);
    uint64_t elements[WGML_DTYPE_COUNT] = {0}, total = 0, n_params = 0;
    size_t max_bytes = 0, data_bytes = 0;
    for (int i = 0; i < n; i++) {
        types[i] = whisper_tensor_type(&ts[i], rc->base);
        const uint64_t ne = (uint64_t)(ts[i].ne[0] * ts[i].ne[1]);
        const int is_filters = !strcmp(ts[i].name, "mel_filters");
        if (ts[i].n_dims == 2 && !is_filters && !ends_with(ts[i].name, "positional_embedding"))
            elements[types[i]] += ne;
        if (!is_filters) n_params += ne;
        total += ne;
        const size_t b = tensor_bytes(types[i], &ts[i]);
        data_bytes += b;
        if (b > max_bytes) max_bytes = b;
    }
    const uint32_t file_type = quantize_file_type(rc, elements);
    char name[96];
    snprintf(name, sizeof name, "synth %s", a->name);
    if ((st = gguf_writer_set_str(w, "general.architecture", "whisper", err)) ||
        (st = gguf_writer_set_str(w, "general.name", name, err)) ||
        (st = gguf_writer_set_u32(w, "general.file_type", file_type, err)) ||
        (st = gguf_writer_set_u32(w, "general.quantization_version", 2, err)) ||
        (st = gguf_writer_set_u64(w, "wgml.synth.seed", seed, err)) ||
        (st = gguf_writer_set_f32(w, "wgml.synth.eot_factor", (float)a->eot_factor, err)) ||
        (st = gguf_writer_set_u32(w, "whisper.vocab_size", (uint32_t)a->n_vocab, err)) ||
        (st = gguf_writer_set_u32(w, "whisper.audio.context_length", (uint32_t)a->n_audio_ctx, err)) ||
        (st = gguf_writer_set_u32(w, "whisper.audio.embedding_length", (uint32_t)a->n_embd, err)) ||
        (st = gguf_writer_set_u32(w, "whisper.audio.head_count", (uint32_t)a->n_head, err)) ||
        (st = gguf_writer_set_u32(w, "whisper.audio.block_count", (uint32_t)enc, err)) ||
        (st = gguf_writer_set_u32(w, "whisper.text.context_length", (uint32_t)a->n_ctx, err)) ||
        (st = gguf_writer_set_u32(w, "whisper.text.embedding_length", (uint32_t)a->n_embd, err)) ||
        (st = gguf_writer_set_u32(w, "whisper.text.head_count", (uint32_t)a->n_head, err)) ||
        (st = gguf_writer_set_u32(w, "whisper.text.block_count", (uint32_t)dec, err)) ||
        (st = gguf_writer_set_u32(w, "whisper.n_mels", (uint32_t)a->n_mels, err)) ||
        (st = synth_whisper_tokens(w, p->vocab, n_text, p->log, p->log_user, err)))
        goto done;
    for (int i = 0; i < n; i++)
        if ((st = gguf_writer_add_tensor(w, ts[i].name, types[i], ts[i].n_dims, ts[i].ne, err))) goto done;
    if (!(buf = wgml_malloc(max_bytes))) {
        st = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory: %zu bytes for one tensor", max_bytes);
        goto done;
    }
    if ((st = wgml_threadpool_create(p->n_threads, &pool, err))) goto done;
    if ((st = gguf_writer_begin(w, out, err))) goto done;
    uint64_t done_elements = 0;
    for (int i = 0; i < n; i++) {
        const synth_tensor *t = &ts[i];
        if (!strcmp(t->name, "mel_filters")) {
            if (wgml_mel_filters_slaney(a->n_mels, WGML_MEL_SAMPLE_RATE, WGML_MEL_N_FFT, (float *)(void *)buf)) {
                st = wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "mel filters for %d bands", a->n_mels);
                goto done;
            }
            done_elements += (uint64_t)(t->ne[0] * t->ne[1]);
        } else {
            whisper_gen g;
            whisper_gen_init(&g, a, t, seed);
            const int64_t step = PROGRESS_ELEMENTS / t->ne[0] > 0 ? PROGRESS_ELEMENTS / t->ne[0] : 1;
            for (int64_t r = 0; r < t->ne[1]; r += step) {
                const int64_t r1 = r + step < t->ne[1] ? r + step : t->ne[1];
                if ((st = quantize_rows(pool, types[i], t->ne[0], r, r1, whisper_row, &g, buf, err))) {
                    wgml_error_prefix(err, "tensor '%s'", t->name);
                    goto done;
                }
                done_elements += (uint64_t)((r1 - r) * t->ne[0]);
                if (p->progress && r1 < t->ne[1] && p->progress(p->progress_user, "generating", done_elements, total)) {
                    st = wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "cancelled");
                    goto done;
                }
            }
        }
        if ((st = gguf_writer_write_tensor(w, buf, tensor_bytes(types[i], t), err))) goto done;
        if (p->progress && p->progress(p->progress_user, "generating", done_elements, total)) {
            st = wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "cancelled");
            goto done;
        }
    }
    if ((st = gguf_writer_finish(w, err))) goto done;
    if (result) {
        result->n_tensors = n;
        result->n_params = n_params;
        result->data_bytes = data_bytes;
        result->file_type = file_type;
    }
done:
    gguf_writer_free(w);
    wgml_threadpool_free(pool);
    wgml_free(buf);
    wgml_free(types);
    wgml_free(ts);
    return st;
}

wgml_status synth_write(const char *out, const synth_params *p, synth_result *result, wgml_error *err) {
    if (result) memset(result, 0, sizeof *result);
    const synth_arch *a = synth_arch_find(p->arch);
    if (!a) {
        char names[512] = "";
        for (int i = 0; i < N_ARCHS; i++)
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "", archs[i].name);
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "unknown architecture '%s' (known: %s)",
                         p->arch ? p->arch : "(null)", names);
    }
    const quantize_recipe *rc = quantize_recipe_find(p->type);
    if (!rc)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "unknown type '%s' (known: %s)", p->type ? p->type : "(null)",
                         quantize_recipe_list());
    if (a->kind == SYNTH_WHISPER) return whisper_write(out, a, rc, p, result, err);
    int n_layer = p->n_layer ? p->n_layer : a->n_layer;
    if (n_layer < 1 || n_layer > a->n_layer)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "%s has %d layers; cannot write %d", a->name, a->n_layer,
                         p->n_layer);
    if (!out || (!p->vocab && a->kind != SYNTH_VISION))
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "synth: output and vocabulary paths are required");

    gguf_file *vocab = NULL;
    gguf_writer *w = NULL;
    wgml_threadpool *pool = NULL;
    synth_tensor *ts = NULL;
    uint32_t *types = NULL;
    quantize_fallback *fb = NULL;
    uint8_t *buf = NULL;
    normal_table *nt = NULL;
    synth_state S;
    memset(&S, 0, sizeof S);
    wgml_status st = p->vocab && a->kind != SYNTH_VISION ? gguf_open(p->vocab, &vocab, err) : WGML_OK;
    if (st) return st;
    int n = synth_tensor_list(a, n_layer, NULL, 0);
    ts = wgml_calloc((size_t)n, sizeof *ts);
    types = wgml_calloc((size_t)n, sizeof *types);
    fb = wgml_calloc((size_t)n, sizeof *fb);
    nt = wgml_malloc(sizeof *nt);
    w = gguf_writer_create();
    if (!ts || !types || !fb || !nt || !w) {
        st = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    synth_tensor_list(a, n_layer, ts, n);
    normal_table_init(nt);

    /* types from the quantize recipe, exactly as quantize_file decides them (an encoder has
     * no output matrix: token_embd gets the output's type, as for a tied decoder) */
    quantize_model_info mi = {n_layer, a->n_head / a->n_head_kv, a->kind == SYNTH_DECODER && !a->tied};
    uint64_t elements[WGML_DTYPE_COUNT] = {0}, total = 0, n_params = 0;
    size_t max_bytes = 0, data_bytes = 0;
    int n_fb = 0;
    for (int i = 0; i < n; i++) {
        uint32_t wanted;
        types[i] = quantize_tensor_type(rc, &mi, ts[i].name, ts[i].n_dims, ts[i].ne, &wanted);
        if (types[i] != wanted) fb[n_fb++] = (quantize_fallback){ts[i].name, wanted, types[i], ts[i].ne[0]};
        uint64_t ne = (uint64_t)(ts[i].ne[0] * ts[i].ne[1]);
        if (quantize_is_matrix(ts[i].name, ts[i].n_dims)) elements[types[i]] += ne;
        n_params += ne;
        total += ne;
        size_t b = tensor_bytes(types[i], &ts[i]);
        data_bytes += b;
        if (b > max_bytes) max_bytes = b;
    }
    quantize_note_fallbacks(fb, n_fb, p->log, p->log_user);
    uint32_t file_type = quantize_file_type(rc, elements);
    if ((st = write_metadata(w, a, n_layer, file_type, p, vocab, err))) goto done;
    for (int i = 0; i < n; i++)
        if ((st = gguf_writer_add_tensor(w, ts[i].name, types[i], ts[i].n_dims, ts[i].ne, err))) goto done;
    if (!(buf = wgml_malloc(max_bytes))) {
        st = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory: %zu bytes for one tensor", max_bytes);
        goto done;
    }
    if ((st = wgml_threadpool_create(p->n_threads, &pool, err))) goto done;
    if ((st = gguf_writer_begin(w, out, err))) goto done;
    uint64_t done_elements = 0;
    S.tp = pool;
    S.nt = nt;
    S.buf = buf;
    for (int i = 0; i < n; i++)
        if ((st = write_tensor(w, &S, a, &ts[i], types[i], p, &done_elements, total, err))) goto done;
    if ((st = gguf_writer_finish(w, err))) goto done;
    if (result) {
        result->n_tensors = n;
        result->n_params = n_params;
        result->data_bytes = data_bytes;
        result->file_type = file_type;
    }
done:
    for (int t = 0; t < WGML_DTYPE_COUNT; t++)
        wgml_free(S.pools[t].data);
    gguf_writer_free(w);
    wgml_threadpool_free(pool);
    gguf_close(vocab);
    wgml_free(buf);
    wgml_free(nt);
    wgml_free(types);
    wgml_free(fb);
    wgml_free(ts);
    return st;
}
