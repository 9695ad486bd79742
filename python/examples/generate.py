#!/usr/bin/env python3
"""Streams a story from an LLM; Ctrl-C stops it cleanly.

    python3 python/examples/generate.py [model.gguf] ["prompt"]
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # python/, when not installed
import wgml  # noqa: E402

model = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..", "models",
                                                            "stories260K.gguf")
prompt = sys.argv[2] if len(sys.argv) > 2 else "Once upon a time"
with wgml.Model(model) as m:
    print("%s on %s (%s)" % (m.info.name or m.info.architecture, m.info.backend, m.info.adapter), file=sys.stderr)
    print(prompt, end="", flush=True)
    try:
        for piece in m.generate(prompt, max_tokens=200, temperature=0.8, stream=True):
            print(piece, end="", flush=True)
    except KeyboardInterrupt:
        print(" [stopped]", end="")
    print()
    s = m.last_stats
    print("%d tokens, stop: %s" % (s.get("completion_tokens", 0), s.get("stop", "")), file=sys.stderr)
