#!/usr/bin/env python3
"""Semantic search: embeds documents and a query with a BERT-family model (numpy arrays), ranks the
documents by cosine similarity, and, with a reranker, rescores them.

    python3 python/examples/embed_search.py embedder.gguf [reranker.gguf]
    (try: build/wgml synth --arch all-minilm-l6 --type F16 -o minilm.gguf; random weights, real shapes)
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import wgml  # noqa: E402

if len(sys.argv) < 2:
    sys.exit(__doc__)
docs = ["The cat sat on the mat.", "GPUs run matrix products fast.", "Paris is the capital of France.",
        "Kittens are young cats."]
query = "Where is the cat?"
with wgml.Model(sys.argv[1]) as m:
    d = m.embed(docs)           # float32 [4, dim], unit vectors
    q = m.embed(query)          # float32 [dim]
    sims = d @ q
    for i in np.argsort(-sims):
        print("%.4f  %s" % (sims[i], docs[i]))
if len(sys.argv) > 2:
    with wgml.Model(sys.argv[2]) as r:
        scores = r.rerank(query, docs)
        print("reranked:")
        for i in np.argsort(-scores):
            print("%.4f  %s" % (scores[i], docs[i]))
