#!/usr/bin/env python3
"""kokoro_quality.py - how close Kokoro GGUF files speak to the float64 oracle (numpy only).

    python3 scripts/kokoro_quality.py [--wgml ./build/wgml] [--backend cpu] [--full-precision]
                                      NAME=FILE.gguf [NAME=FILE.gguf ...]

For every reference case of ../shared/kokoro/reference/kokoro-tiny (or $WGML_SHARED), each
file speaks the case's phonemes with its voice, speed and kit noise seed (`wgml speak
--wav-format f32`), and the audio is compared with the case's `audio_kit` (the official
decoder run in float64 on the official float32 prosody): waveform SNR in dB and the log-mel
distance of scripts/audio_distance.py. The last column is the official float32 decoder's
own SNR against that oracle (manifest.json, fp64_divergence), the yardstick a quantized
file is held to. A `*` marks audio of another length than the reference's: other
durations, or phonemes `wgml speak` splits at punctuation into pieces spoken one by one,
unlike the one-pass reference (the punct cases).

Used for docs/kokoro.md's table: the files come from
    wgml convert kokoro kokoro-tiny.pth --config config-kokoro-tiny.json --voices voices
         --type T [--prosody-type P] -o FILE
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from audio_distance import mel_power, read_wav  # noqa: E402


def log_mel_db(ref, x, rate):
    pa, pb = mel_power(ref, rate), mel_power(x, rate)
    n = min(pa.shape[0], pb.shape[0])
    floor = 1e-10 * max(pa.max(), 1e-30)
    d = np.abs(10 * np.log10(np.maximum(pa[:n], floor)) - 10 * np.log10(np.maximum(pb[:n], floor)))
    return d.mean()


def snr_db(ref, x):
    n = min(ref.size, x.size)
    noise = np.sum((ref[:n] - x[:n]) ** 2)
    return float("inf") if noise == 0 else 10 * np.log10(np.sum(ref[:n] ** 2) / noise)


def main():
    args = sys.argv[1:]
    wgml, backend, full = "./build/wgml", "cpu", False
    files = []
    while args:
        a = args.pop(0)
        if a == "--wgml":
            wgml = args.pop(0)
        elif a == "--backend":
            backend = args.pop(0)
        elif a == "--full-precision":
            full = True
        elif "=" in a:
            files.append(a.split("=", 1))
        else:
            sys.exit(__doc__)
    if not files:
        sys.exit(__doc__)
    shared = os.environ.get("WGML_SHARED", os.path.join(os.path.dirname(__file__), "..", "..", "shared"))
    ref_dir = os.path.join(shared, "kokoro", "reference", "kokoro-tiny")
    manifest = json.load(open(os.path.join(ref_dir, "manifest.json")))
    out = os.path.join(tempfile.mkdtemp(), "a.wav")
    print("case".ljust(26) + "".join(f"{name:>19}" for name, _ in files) + "  official f32")
    for case, c in manifest["cases"].items():
        ref = np.load(os.path.join(ref_dir, case, "audio_kit.npy")).astype(np.float64)
        row = case.ljust(26)
        for _, path in files:
            cmd = [wgml, "speak", "-m", path, "--phonemes", c["phonemes"], "-v", c["voice"], "--speed",
                   str(c["speed"]), "--seed", str(c["kit_noise_seed"]), "--wav-format", "f32", "-o", out,
                   "--backend", backend] + (["--full-precision"] if full else [])
            subprocess.run(cmd, check=True, capture_output=True)
            x, rate = read_wav(out)
            mark = "*" if x.size != ref.size else " "
            row += f"{snr_db(ref, x):8.1f} dB {log_mel_db(ref, x, rate):6.3f}{mark}"
        yard = manifest["fp64_divergence"][case]["decoder_fp32_vs_oracle"]["audio"]["snr_db"]
        print(row + f"{yard:10.1f} dB")


if __name__ == "__main__":
    main()
