/*
 * whisper_vocab.h - Whisper's vocabulary: the byte-level BPE tokens of the
 * file (their raw bytes, in rank order) and the special tokens that follow
 * them, whose ids depend on the vocabulary's size (multilingual 51865, v3
 * 51866, English-only 51864: ../shared/whisper/README.md, "Special tokens").
 *
 * GGUF schema of a Whisper model (what the .bin reader writes, what synth
 * and `wgml convert whisper` write, what the family loads):
 *   general.architecture          "whisper"
 *   whisper.vocab_size            u32  n_vocab
 *   whisper.audio.context_length  u32  n_audio_ctx (1500)
 *   whisper.audio.embedding_length, .head_count, .block_count   u32
 *   whisper.text.context_length   u32  n_text_ctx (448)
 *   whisper.text.embedding_length, .head_count, .block_count    u32
 *   whisper.n_mels                u32  80 or 128
 *   whisper.tokens                array of strings: each BPE token's raw
 *                                 bytes (any bytes, partial UTF-8 too), rank order
 *   tensor "mel_filters"          F32 ne = {n_fft/2 + 1 = 201, n_mels}
 *   every weight under its official name (encoder.conv1.weight,
 *   decoder.blocks.0.cross_attn.query.weight, ...), its stored type
 *   (F32, F16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0) and shape (ne[0] = PyTorch's
 *   last dimension), except the convolutions: encoder.conv1.weight and
 *   encoder.conv2.weight are stored taps-major, [S][3][C_in] (ne = {3 C_in,
 *   S}: element j C_in + c of row o is PyTorch's w[o][c][j], the layout of
 *   matmul's conv, ops.h), and their biases are 1-D {S}.
 */
#ifndef WGML_MODEL_WHISPER_VOCAB_H
#define WGML_MODEL_WHISPER_VOCAB_H

#include <stddef.h>
#include <stdint.h>

#include "wgml.h"

#define WHISPER_N_LANG_MAX 100 /* v3 adds "yue" to the 99 of the others */

/* The special tokens' ids for a vocabulary of n_vocab ids. */
typedef struct whisper_specials {
    int n_vocab;
    int n_text;         /* BPE tokens (ids 0 .. n_text-1): 50257, or 50256 English-only */
    int multilingual;   /* 0: an .en model (SOT alone starts a transcript) */
    int eot, sot;
    int lang0, n_lang;  /* <|en|> and how many languages follow it */
    int translate, transcribe, sot_lm, sot_prev, no_speech, no_timestamps;
    int ts_begin;       /* <|0.00|>; the last id is <|30.00|> = ts_begin + 1500 */
} whisper_specials;

/* Fills s for n_vocab (51864, 51865 or 51866; another size is an error). */
wgml_status whisper_specials_init(whisper_specials *s, int n_vocab, wgml_error *err);

/* The code of language i (0 = "en", ..., 99 = "yue"), NULL past the end;
 * the id of a code ("en"), or -1 when the vocabulary has no such language. */
const char *whisper_lang_code(int i);
int whisper_lang_token(const whisper_specials *s, const char *code);

/* The official name of special id (>= s->eot, < s->n_vocab): "<|endoftext|>",
 * "<|startoftranscript|>", "<|en|>", "<|translate|>", "<|transcribe|>",
 * "<|startoflm|>", "<|startofprev|>", "<|nospeech|>", "<|notimestamps|>",
 * "<|0.00|>".."<|30.00|>" (what tiktoken decodes each to). Writes at most
 * cap bytes, NUL-terminated when cap > 0, and returns the name's length; -1
 * for an id that is not a special token. */
int whisper_special_name(const whisper_specials *s, int id, char *buf, size_t cap);

#endif
