/*
 * api_internal.h - what tests and the CLI's diagnostics may reach behind the
 * public API (never installed, not part of the stable interface).
 */
#ifndef WGML_API_INTERNAL_H
#define WGML_API_INTERNAL_H

#include "backend/backend.h"
#include "wgml.h"

/* The backend a model runs on. */
wgml_backend *wgml_model_backend(const wgml_model *model);

/* What `wgml verify` and the tests ask of a load beyond wgml_model_params. */
typedef struct wgml_model_load_options {
    /* The CPU backend as exact reference (wgml_backend_cpu_create_exact):
     * weights dequantized and dotted with f32 activations, no 8-bit activation
     * rounding. Slow. Overrides params->backend. */
    int exact;
    /* A planted fault, to show that verify catches a wrong device: the weight
     * named fault_tensor reaches this model's backend with the f16 scale of
     * block fault_block (a float type: that element) multiplied by
     * fault_factor (wgml_weight_fault in model/weights.h). NULL: none. */
    const char *fault_tensor;
    float fault_factor;
    int64_t fault_block;
} wgml_model_load_options;

/* 1 when a weight the model uses in matrix products is block-quantized (the
 * fast CPU backend then rounds those products' activations to 8 bits). */
int wgml_model_quantized_matmuls(const wgml_model *model);

/* wgml_model_load with these options (NULL: none). */
wgml_status wgml_model_load_with(const char *path, const wgml_model_params *params,
                                 const wgml_model_load_options *options, wgml_model **out, wgml_error *err);

/* wgml_speak with text through this G2P (text/g2p.h; NULL: espeak-ng as
 * params->espeak says): the WebAssembly build's, whose phonemes come from JS. */
typedef struct wgml_g2p wgml_g2p;
wgml_status wgml_speak_g2p(wgml_model *model, const char *input, const char *voice, const wgml_speak_params *params,
                           wgml_g2p *g2p, wgml_audio_fn on_audio, void *user, wgml_speak_result *result,
                           wgml_error *err);

#endif
