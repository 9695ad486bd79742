#!/usr/bin/env python3
"""A model by URL or Hugging Face name: downloaded once into the cache (with a progress line),
resumed if it stopped, checked against the size and SHA-256 the server gives; then used.

    python3 python/examples/from_url.py MODEL [PROMPT]
    MODEL: https://host/path/model.gguf, hf://owner/repo/file.gguf, owner/repo:Q4_K_M, ...
    (no network here? serve a folder: python3 tests/net/http_server.py --root DIR --port 8000,
     with the model in DIR/files/, and give http://127.0.0.1:8000/files/model.gguf)
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import wgml  # noqa: E402

if len(sys.argv) < 2:
    sys.exit(__doc__)


def progress(stage, done, total):
    if stage == "download" and total:
        print("\r%s %5.1f%% of %.1f MiB" % (stage, 100.0 * done / total, total / 1048576), end="", file=sys.stderr)


path = wgml.fetch(sys.argv[1], progress=progress)
print("\nin the cache: %s" % path, file=sys.stderr)
with wgml.Model(path) as m:
    if "generate" in m.tasks:
        print(m.generate(sys.argv[2] if len(sys.argv) > 2 else "Once upon a time", max_tokens=40))
    else:
        print("tasks: %s" % ", ".join(m.tasks))
