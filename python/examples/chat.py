#!/usr/bin/env python3
"""A chat loop over a model's chat template, the replies streamed (OpenAI-shaped chunks).

    python3 python/examples/chat.py model.gguf
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import wgml  # noqa: E402

if len(sys.argv) < 2:
    sys.exit(__doc__)
messages = [{"role": "system", "content": "You are a helpful assistant."}]
with wgml.Model(sys.argv[1]) as m:
    while True:
        try:
            line = input("> ")
        except (EOFError, KeyboardInterrupt):
            print()
            break
        messages.append({"role": "user", "content": line})
        reply = ""
        try:
            for chunk in m.chat(messages, max_tokens=512, stream=True):
                piece = chunk["choices"][0]["delta"].get("content") or ""
                reply += piece
                print(piece, end="", flush=True)
        except KeyboardInterrupt:
            pass
        print()
        messages.append({"role": "assistant", "content": reply})
