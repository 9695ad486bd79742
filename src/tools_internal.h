/*
 * tools_internal.h - the one way wgml's own tools reach behind the public API.
 *
 * The command line (tools/wgml), the fuzzers and the benchmark harnesses use
 * include/wgml.h for everything it offers. What it does not offer (reading a
 * GGUF header without loading the weights, converters and writers of model
 * files, the backends and their op checks, the GPU adapter list) they take
 * from the library's internal modules, and only through this header, so that
 * what the tools depend on is listed in one place.
 *
 * NOT INSTALLED, NOT STABLE: nothing here is part of the library's interface.
 * Any of it may change with any commit; code outside this repository must use
 * include/wgml.h only. When a need below gets a public function, the tool
 * moves to it and the include goes.
 */
#ifndef WGML_TOOLS_INTERNAL_H
#define WGML_TOOLS_INTERNAL_H

#include "wgml.h"

/* Models behind the API: the backend a loaded model runs on (wgml_model_backend:
 * its name, KV type and statistics such as the pipeline cache's hits, for
 * `wgml bench`), loads with options the API does not take (the exact CPU
 * reference and a planted fault, for `wgml verify`), whether a model has
 * quantized matrix products. */
#include "api_internal.h"

/* The backend interface (wgml_backend: create the CPU and WebGPU backends
 * directly, their statistics) and op-by-op comparison of two backends
 * (wgml_opcheck_run: `wgml verify`'s op grid). */
#include "backend/backend.h"
#include "backend/opcheck.h"

/* The CPU kernels this machine runs (cpu_kernels_features: `wgml --version`), and
 * the paths chosen by measurement (cpu_gemm_choice_describe: `--version`, `bench`). */
#include "backend/cpu/cpu_tune.h"
#include "backend/cpu/kernels.h"

/* Tensor types by name and number (wgml_dtype_name, wgml_dtype_from_name,
 * WGML_F32 ...): `info`, `convert`, `quantize`, `synth`, `verify`. */
#include "core/dtype.h"

/* The library's allocator (wgml_free): to free what internal modules return,
 * such as the phonemes of text/g2p.h. */
#include "core/alloc.h"

/* Model files read without loading a model (wgml_model_file_open: a GGUF,
 * or whisper.cpp's .bin as one; keys, tensors) and the family registry that
 * names a file's family and tasks (wgml_family_of): `info`, `tokenize`,
 * `template`, and `bench` choosing its benchmark. */
#include "format/gguf.h"
#include "format/model_file.h"
#include "model/family.h"

/* Tokenizers straight from GGUF metadata, vocabulary-only files included
 * (`wgml tokenize`, `wgml template`). */
#include "text/tokenizer.h"

/* A model's chat template, BOS and EOS texts from its metadata alone, and the
 * built-in fallbacks (chat_model_info_load: `wgml template -m`). */
#include "chat/chat_template.h"

/* English text to Kokoro's phonemes through espeak-ng (`wgml phonemize`). */
#include "text/g2p.h"

/* Whisper's transcript writers (txt, srt, vtt, tsv, as the official ones) for
 * `wgml transcribe` and the server's /v1/audio/transcriptions. */
#include "model/whisper/whisper_decode.h"

/* Writers of model files: llama2.c checkpoints and the Kokoro checkpoint to
 * GGUF (`wgml convert`), quantization recipes (`wgml quantize`), models with
 * random weights of real architectures (`wgml synth`, Kokoro's through
 * kokoro_synth). */
#include "format/llama2c.h"
#include "model/kokoro/kokoro.h"
#include "model/whisper/whisper_convert.h"
#include "tools/quantize.h"
#include "tools/synth.h"

/* Whisper's two forward passes one at a time (src/api_transcribe_bench.c),
 * for `wgml bench` on a transcription model: a state of n_seq sequences
 * (1 .. 16) on a Whisper model (another family: WGML_ERR_UNSUPPORTED), its
 * cross keys and values kept as kv says (wgml_transcribe_params.kv_type);
 * _encode: one 30 s window of a fixed log-mel through the encoder and every
 * decoder layer's cross keys and values, *ms its wall time; _decode (after
 * an encode): n_steps steps of one token per sequence at positions 0 ..
 * n_steps - 1 (SOT first, then each sequence's argmax of the logits read
 * back, as a greedy transcription), ms[i] each step's wall time (may be
 * NULL); n_steps <= _max_steps (the decoder's positions). */
typedef struct wgml_whisper_bench wgml_whisper_bench;
wgml_status wgml_whisper_bench_create(wgml_model *model, int n_seq, wgml_kv_type kv, wgml_whisper_bench **out,
                                      wgml_error *err);
void wgml_whisper_bench_free(wgml_whisper_bench *b);
/* What kv resolves to on this model's backend: *f16 = 1 for f16 cross keys
 * and values (an error where f16 is asked and the backend cannot). */
wgml_status wgml_whisper_kv_f16(wgml_model *model, wgml_kv_type kv, int *f16, wgml_error *err);
wgml_status wgml_whisper_bench_encode(wgml_whisper_bench *b, double *ms, wgml_error *err);
wgml_status wgml_whisper_bench_decode(wgml_whisper_bench *b, int n_steps, double *ms, wgml_error *err);
int wgml_whisper_bench_max_steps(const wgml_whisper_bench *b);
/* For `wgml verify` (two models of one file, one per backend, in lock step):
 * the sizes of what the two calls below read back; _encode_read: the encode
 * above with the encoder's output xa [n_audio_ctx][n_audio_state] read back;
 * _step (after an encode, a one-sequence bench): token at position pos (0 ..
 * max_steps - 1, each position after the ones before it), logits [n_vocab]
 * read back. */
void wgml_whisper_bench_sizes(const wgml_whisper_bench *b, int *n_vocab, int *n_audio_ctx, int *n_audio_state,
                              int *n_layers, int *n_ff, int *sot);
wgml_status wgml_whisper_bench_encode_read(wgml_whisper_bench *b, float *xa, wgml_error *err);
wgml_status wgml_whisper_bench_step(wgml_whisper_bench *b, int32_t token, int pos, float *logits, wgml_error *err);

/* The GPU layer's adapter list (wgml_gpu_list_adapters: `wgml devices`). */
#include "gpu/gpu.h"

/* Where the WebGPU pipeline cache lives (wgml_pipeline_cache_default_dir:
 * `wgml bench`'s first-token report); only in builds with Dawn's blob cache. */
#if defined(WGML_HAVE_WEBGPU) && defined(WGML_DAWN_BLOB_CACHE)
#include "gpu/pipeline_cache.h"
#endif

#endif
