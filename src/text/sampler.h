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

#include "text/grammar.h"
#include "wgml.h"

typedef struct wgml_sampler wgml_sampler;

/* Validates the parameters (a clear error for each one out of range). */
wgml_status wgml_sampler_check(const wgml_sampler_params *p, wgml_error *err);
wgml_status wgml_sampler_create(const wgml_sampler_params *p, int n_vocab, wgml_sampler **out, wgml_error *err);
void wgml_sampler_free(wgml_sampler *s);
/* Whether sampling is plain argmax of the raw logits (so a GPU can do it). */
int wgml_sampler_is_greedy(const wgml_sampler_params *p);
/* Picks a token. history: the tokens so far (for the repetition penalty).
 * With a grammar (wgml_sampler_set_grammar): only a token the grammar lets
 * follow (grammar_allowed), or eos where the grammar may end, every other
 * step (penalty, top-k, temperature, top-p, min-p, the seeded draw) within
 * that set; the token's bytes are then fed to the grammar's state. Returns
 * -1 when nothing may follow (err says why; the grammar needs text no token
 * gives, or it is too ambiguous), never otherwise. */
int32_t wgml_sampler_sample(wgml_sampler *s, const float *logits, const int32_t *history, int n_history);

/* Adds bias[i] to the logit of tokens[i] before every other step (OpenAI's logit_bias; a bias of
 * -100 or less bans the token, as there). Copied; n 0 clears. Returns -1 out of memory. */
int wgml_sampler_set_bias(wgml_sampler *s, const int32_t *tokens, const float *bias, int n);

/* Constrains the sampler with a grammar's state (advanced by each token
 * sampled) and the vocabulary's strings; eog[0..n_eog): the tokens that end a
 * generation (allowed only where the grammar may end). Not owned; NULL state:
 * no constraint. err receives the messages of wgml_sampler_sample's -1.
 *
 * The set of tokens allowed in a state is remembered (a few recent states,
 * compared stack by stack), so text that stays in one state - a string's
 * characters, a number's digits - pays for the vocabulary walk once. Greedy
 * sampling first tries the best token alone and walks the vocabulary only
 * when the grammar refuses it. */
void wgml_sampler_set_grammar(wgml_sampler *s, grammar_state *state, const grammar_vocab *vocab, const int32_t *eog,
                              int n_eog, wgml_error *err);

#endif
