#!/usr/bin/env python3
"""audio_distance.py - how far one WAV is from another (numpy only).

    python3 scripts/audio_distance.py REFERENCE.wav OTHER.wav

Prints the waveform SNR of OTHER against REFERENCE (10 log10 of the
reference's energy over the difference's; only when both have the same
length, as two runs of one model with one seed and the same durations do)
and the log-mel distance: the mean over frames and 80 mel bands (0 to
Nyquist, 1024-point frames, hop 256, Hann window) of |10 log10 P_ref - 10
log10 P_other| in dB, powers floored at 1e-10 of the reference's largest.
Used to measure what a quantized Kokoro file changes in the audio
(docs/model-tools.md).
"""
import struct
import sys

import numpy as np


def read_wav(path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        sys.exit(f"{path}: not a WAV file")
    pos, fmt, samples = 12, None, None
    while pos + 8 <= len(data):
        tag, size = data[pos:pos + 4], struct.unpack_from("<I", data, pos + 4)[0]
        body = data[pos + 8:pos + 8 + size]
        if tag == b"fmt ":
            fmt = struct.unpack_from("<HHIIHH", body)
        elif tag == b"data":
            samples = body
        pos += 8 + size + (size & 1)
    if fmt is None or samples is None:
        sys.exit(f"{path}: no fmt or data chunk")
    code, channels, rate, _, _, bits = fmt
    if channels != 1:
        sys.exit(f"{path}: {channels} channels (mono expected)")
    if code == 3 and bits == 32:
        x = np.frombuffer(samples, dtype="<f4").astype(np.float64)
    elif code == 1 and bits == 16:
        x = np.frombuffer(samples, dtype="<i2").astype(np.float64) / 32768.0
    else:
        sys.exit(f"{path}: format {code} with {bits} bits (16-bit PCM or 32-bit float expected)")
    return x, rate


def mel_filters(rate, n_fft, n_mels):
    def hz_to_mel(f):
        return 2595.0 * np.log10(1.0 + f / 700.0)

    def mel_to_hz(m):
        return 700.0 * (10.0 ** (m / 2595.0) - 1.0)

    edges = mel_to_hz(np.linspace(0.0, hz_to_mel(rate / 2), n_mels + 2))
    bins = np.fft.rfftfreq(n_fft, 1.0 / rate)
    fb = np.zeros((n_mels, bins.size))
    for i in range(n_mels):
        lo, mid, hi = edges[i], edges[i + 1], edges[i + 2]
        up = (bins - lo) / max(mid - lo, 1e-9)
        down = (hi - bins) / max(hi - mid, 1e-9)
        fb[i] = np.clip(np.minimum(up, down), 0.0, None)
    return fb


def mel_power(x, rate, n_fft=1024, hop=256, n_mels=80):
    if x.size < n_fft:
        x = np.pad(x, (0, n_fft - x.size))
    frames = 1 + (x.size - n_fft) // hop
    idx = np.arange(n_fft)[None, :] + hop * np.arange(frames)[:, None]
    spec = np.abs(np.fft.rfft(x[idx] * np.hanning(n_fft)[None, :], axis=1)) ** 2
    return spec @ mel_filters(rate, n_fft, n_mels).T


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: audio_distance.py REFERENCE.wav OTHER.wav")
    a, ra = read_wav(sys.argv[1])
    b, rb = read_wav(sys.argv[2])
    if ra != rb:
        sys.exit(f"sample rates differ: {ra} and {rb}")
    if a.size == b.size:
        noise = np.sum((a - b) ** 2)
        snr = float("inf") if noise == 0 else 10 * np.log10(np.sum(a ** 2) / noise)
        print(f"snr_db {snr:.2f}")
    else:
        print(f"snr_db n/a (lengths {a.size} and {b.size})")
    pa, pb = mel_power(a, ra), mel_power(b, rb)
    n = min(pa.shape[0], pb.shape[0])
    floor = 1e-10 * max(pa.max(), 1e-30)
    d = np.abs(10 * np.log10(np.maximum(pa[:n], floor)) - 10 * np.log10(np.maximum(pb[:n], floor)))
    print(f"log_mel_db {d.mean():.4f}")
    print(f"frames {n} of {pa.shape[0]} and {pb.shape[0]}")


if __name__ == "__main__":
    main()
