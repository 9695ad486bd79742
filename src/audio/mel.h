/*
 * mel.h - Whisper's audio front end on the CPU: the Slaney mel filter bank
 * and the log-mel spectrogram, exactly as openai/whisper's audio.py computes
 * them (../shared/whisper/README.md, "Log-mel" and "30 s windows").
 *
 * The log-mel of 16 kHz mono audio x (n samples) followed by `pad` zeros
 * (Whisper's transcriber pads 480000, 30 s):
 *   frames    the padded signal (L = n + pad samples) is reflected by 200
 *             samples at each end (x[200] ... x[1] before; the edge sample not
 *             repeated); frame t is its 400 samples centred on sample 160 t,
 *             times the periodic Hann window 0.5 - 0.5 cos(2 pi i / 400);
 *             the STFT's last frame is dropped: L / 160 frames
 *   power     |X_k|^2, k = 0..200 (a real FFT of 400 points of our own,
 *             mixed radix 2^3 5^2, in double)
 *   mel       filters [n_mels][201] @ power (only each filter's non-zero
 *             span), then y = log10(max(mel, 1e-10)) in float
 *   floor     y = max(y, max(y) - 8), the maximum over all bands and frames
 *             (the padding's frames included), then (y + 4) / 4
 * Digital silence gives -1.5 everywhere. The result matches the official
 * float32 code within about 4e-5 (its own float32 rounding: the README's
 * float32-vs-float64 figure is 3.5e-5).
 *
 * Frames whose 400 samples are all zero (the padding, digital silence) are
 * not transformed: their mel is 0. A 30 s clip (3000 frames, and 3000 of
 * padding) takes a few milliseconds on one core; a thread pool splits the
 * frames.
 *
 * Windows (whisper.transcribe): with content = n / 160 frames, windows start
 * at seek = 0, 3000, 6000, ... while seek < content; each is the columns
 * [seek, seek + min(3000, content - seek)) of the log-mel, right-padded with
 * zero columns (0.0, not the floor) to 3000: wgml_log_mel_window.
 */
#ifndef WGML_AUDIO_MEL_H
#define WGML_AUDIO_MEL_H

#include "wgml.h"

#include <stddef.h>
#include <stdint.h>

#define WGML_MEL_SAMPLE_RATE   16000
#define WGML_MEL_N_FFT         400
#define WGML_MEL_HOP           160
#define WGML_MEL_N_BINS        (WGML_MEL_N_FFT / 2 + 1) /* 201 */
#define WGML_MEL_WINDOW_FRAMES 3000                     /* one 30 s window */
#define WGML_MEL_PAD_SAMPLES   480000                   /* the transcriber's padding: 30 s of zeros */

struct wgml_threadpool;

/* librosa.filters.mel(sr=sample_rate, n_fft=n_fft, n_mels=n_mels, fmin=0,
 * fmax=sample_rate/2, htk=False, norm="slaney"), dtype float32, computed in
 * double: out[n_mels][n_fft/2 + 1]. The official mel_filters.npz (80 and 128
 * bands, 16 kHz, n_fft 400) within 1e-8. WGML_ERR_INVALID_ARGUMENT for
 * n_mels < 1, sample_rate < 1, n_fft < 2, or out NULL. */
wgml_status wgml_mel_filters_slaney(int n_mels, int sample_rate, int n_fft, float *out);

/* Frames of n samples followed by pad zeros: (n + pad) / 160 (0 on overflow). */
size_t wgml_log_mel_frames(size_t n, size_t pad);
/* Frames of content: n / 160, the transcriber's content_frames. */
size_t wgml_log_mel_content_frames(size_t n);

/* The whole log-mel (above) of pcm[0..n) followed by pad zeros:
 * out[m * frames + t] for m < n_mels, t < frames = wgml_log_mel_frames(n,
 * pad). filters: [n_mels][201] (the model's mel_filters, or
 * wgml_mel_filters_slaney's). pool may be NULL (the calling thread). *max
 * (may be NULL) receives the final maximum, (max log10 + 4) / 4 (the
 * manifest's mel_max; the floor is *max - 2). Errors: n_mels < 1, NULL
 * filters or out (with frames > 0), sizes that overflow, out of memory. */
wgml_status wgml_log_mel(const float *pcm, size_t n, size_t pad, const float *filters, int n_mels,
                         struct wgml_threadpool *pool, float *out, float *max, wgml_error *err);

/* The two halves of wgml_log_mel, for a caller that wants less than the
 * whole tensor in memory (compute the maximum over all frames first, then
 * each window again):
 *   raw        frames [f0, f1) of log10(max(mel, 1e-10)) into out[m * ld +
 *              (t - f0)] (ld >= f1 - f0), their maximum into *max (-inf
 *              when f0 == f1);
 *   normalize  y = (max(y, max - 8) + 4) / 4 over [n_mels][frames] (row
 *              stride ld), max the raw maximum over all frames. */
wgml_status wgml_log_mel_raw(const float *pcm, size_t n, size_t pad, const float *filters, int n_mels, size_t f0,
                             size_t f1, struct wgml_threadpool *pool, float *out, size_t ld, float *max,
                             wgml_error *err);
void wgml_log_mel_normalize(float *mel, int n_mels, size_t frames, size_t ld, float max);

/* Whisper's window at frame `seek` of a log-mel [n_mels][frames]: columns
 * [seek, seek + size) with size = min(3000, content - seek, frames - seek)
 * (0 when seek >= content), then zero columns: out[n_mels][3000]. Returns
 * size (the transcriber's segment_size). */
size_t wgml_log_mel_window(const float *mel, int n_mels, size_t frames, size_t content, size_t seek, float *out);

#endif
