#!/usr/bin/env python3
"""Transcribes a 16-bit mono WAV with a Whisper model (whisper.cpp's .bin or a GGUF), segment by segment.

    python3 python/examples/transcribe.py ggml-base.en.bin speech.wav
"""
import os
import sys
import wave

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import wgml  # noqa: E402

if len(sys.argv) < 3:
    sys.exit(__doc__)
with wave.open(sys.argv[2]) as f:
    if f.getsampwidth() != 2:
        sys.exit("a 16-bit WAV, please")
    pcm = np.frombuffer(f.readframes(f.getnframes()), dtype="<i2").reshape(-1, f.getnchannels()).mean(axis=1)
    rate = f.getframerate()
with wgml.Model(sys.argv[1]) as m:
    r = m.transcribe(pcm.astype(np.float32) / 32768, rate,
                     on_segment=lambda s: print("[%6.2f -> %6.2f]%s" % (s["start"], s["end"], s["text"]), flush=True))
print("language %s, %.1f s" % (r["language"], r["duration"]))
