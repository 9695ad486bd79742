/*
 * resample.h - band-limited resampling of mono float audio, any rate to any
 * rate (Whisper wants 16 kHz; files come at 8, 11.025, 22.05, 24, 32, 44.1,
 * 48, 96 kHz...).
 *
 * The filter: a windowed sinc (Kaiser window, beta 10.06: 100 dB
 * stopband), its pass band up to 0.9 of the lower of the two Nyquist
 * frequencies and its stop band from that Nyquist frequency on, so that
 * nothing above the new Nyquist frequency folds back (attenuated by 100 dB
 * by design; the tests check >= 80 dB), and the pass band is flat to about
 * 1e-5. It is zero-phase (symmetric): no delay, output sample j lies at
 * input time j * rate_in / rate_out exactly. Its half-width is 66 samples
 * of the lower rate (about 4 ms at 16 kHz).
 *
 * The ratio rate_out / rate_in is reduced to L / M; the filter is tabulated
 * for each of the L phases (44.1 -> 16 kHz: 160 phases of 366 taps). With
 * more phases than 1024 (an odd ratio such as 44100 -> 16001), 1024 phases
 * are tabulated and the two nearest are interpolated linearly (an error
 * below 1e-6 of the signal). Each tabulated phase is scaled to sum to 1:
 * a constant input gives the same constant out (but near the ends).
 *
 * Length: input sample i lies at time i, output sample j at j * M / L; the
 * output has a sample for every time inside [0, n): n_out = ceil(n * L / M)
 * = ceil(n * rate_out / rate_in) (1 s at any rate -> exactly rate_out
 * samples). Beyond the input the signal is taken as zero, so the first and
 * last ~66 output samples of the lower rate see a truncated signal (an
 * abrupt start or end, as the input has).
 *
 * Rates must lie in [1, 1000000]. Equal rates copy.
 */
#ifndef WGML_AUDIO_RESAMPLE_H
#define WGML_AUDIO_RESAMPLE_H

#include "wgml.h"

#include <stddef.h>
#include <stdint.h>

#define WGML_RESAMPLE_MAX_RATE 1000000

/* Samples that n input samples give: ceil(n * rate_out / rate_in); 0 when a
 * rate is out of range or the count would not fit in size_t (with the bytes
 * of the floats). */
size_t wgml_resample_length(size_t n, int rate_in, int rate_out);

/* One shot: in[0..n) at rate_in -> *out (wgml_malloc'ed, free with
 * wgml_free; NULL when *n_out is 0), *n_out = wgml_resample_length(n, ...).
 * Errors: a rate <= 0 or > 1e6 (WGML_ERR_INVALID_ARGUMENT), an output too
 * large to count or allocate (WGML_ERR_INVALID_ARGUMENT / OUT_OF_MEMORY). */
wgml_status wgml_resample(const float *in, size_t n, int rate_in, int rate_out, float **out, size_t *n_out,
                          wgml_error *err);

/* Streaming: the same output as the one-shot call on the concatenated
 * input, bit for bit, delivered as soon as the input reaches far enough
 * (66 samples of the lower rate behind). */
typedef struct wgml_resampler wgml_resampler;

wgml_status wgml_resampler_create(int rate_in, int rate_out, wgml_resampler **out, wgml_error *err);
void wgml_resampler_free(wgml_resampler *r);
/* How many samples the next wgml_resampler_push of n samples (or, with
 * flush, its final call with those n samples) may write at most. */
size_t wgml_resampler_max_output(const wgml_resampler *r, size_t n, int flush);
/* Takes in[0..n) (n may be 0); writes the outputs it can complete to
 * out[0..*n_out) (cap: room in out; too little is an error and consumes
 * nothing). With flush set the input ends here: the rest of the output is
 * written (zeros beyond the end) and the resampler starts over. */
wgml_status wgml_resampler_push(wgml_resampler *r, const float *in, size_t n, int flush, float *out, size_t cap,
                                size_t *n_out, wgml_error *err);

#endif
