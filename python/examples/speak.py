#!/usr/bin/env python3
"""Speaks text with a Kokoro model and writes a 16-bit WAV, with each word's time.

    python3 python/examples/speak.py kokoro.gguf "Hello world." out.wav [voice]
    (kokoro.gguf: `wgml convert kokoro ...`, docs/kokoro.md; text needs espeak-ng)
"""
import os
import sys
import wave

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import wgml  # noqa: E402

if len(sys.argv) < 4:
    sys.exit(__doc__)
with wgml.Model(sys.argv[1]) as m:
    audio, rate, words = m.speak(sys.argv[2], voice=sys.argv[4] if len(sys.argv) > 4 else None)
for w in words:
    print("%6.2f %6.2f  %s" % (w["start"], w["end"], w["word"]))
with wave.open(sys.argv[3], "wb") as f:
    f.setnchannels(1)
    f.setsampwidth(2)
    f.setframerate(rate)
    f.writeframes((np.clip(audio, -1, 1) * 32767).astype("<i2").tobytes())
print("%s: %.2f s" % (sys.argv[3], len(audio) / rate))
