/*
 * sampler.h - choosing the next token from logits.
 *
 * Order of the steps (as llama.cpp users expect): repetition penalty over the
 * last repeat_last_n tokens, then greedy if temperature is 0; otherwise top-k,
 * temperature, softmax, top-p (nucleus), min-p, and a draw from the remaining
 * distribution with a seeded generator (same seed, same tokens).
 */
#ifndef WGML_TEXT_SAMPLER_H
#define WGML_TEXT_SAMPLER_H

#include <stdint.h>

#include "wgml.h"

typedef struct wgml_sampler wgml_sampler;

/* Validates the parameters (a clear error for each one out of range). */
wgml_status wgml_sampler_check(const wgml_sampler_params *p, wgml_error *err);
wgml_status wgml_sampler_create(const wgml_sampler_params *p, int n_vocab, wgml_sampler **out, wgml_error *err);
void wgml_sampler_free(wgml_sampler *s);
/* Whether sampling is plain argmax of the raw logits (so a GPU can do it). */
int wgml_sampler_is_greedy(const wgml_sampler_params *p);
/* Picks a token. history: the tokens so far (for the repetition penalty). */
int32_t wgml_sampler_sample(wgml_sampler *s, const float *logits, const int32_t *history, int n_history);

#endif
