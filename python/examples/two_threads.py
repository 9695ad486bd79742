#!/usr/bin/env python3
"""Two models on two threads at once: the library releases the GIL while it computes.

    python3 python/examples/two_threads.py llm.gguf embedder.gguf
"""
import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import wgml  # noqa: E402

if len(sys.argv) < 3:
    sys.exit(__doc__)
llm, emb = wgml.Model(sys.argv[1], backend="cpu", threads=1), wgml.Model(sys.argv[2], backend="cpu", threads=1)
out = {}
t0 = time.monotonic()
a = threading.Thread(target=lambda: out.__setitem__("text", llm.generate("Once upon a time", max_tokens=200)))
b = threading.Thread(target=lambda: out.__setitem__("vectors", emb.embed(["some text"] * 64)))
a.start(), b.start(), a.join(), b.join()
print("%.2f s: %d characters, vectors %s" % (time.monotonic() - t0, len(out["text"]), out["vectors"].shape))
llm.close()
emb.close()
