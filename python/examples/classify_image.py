#!/usr/bin/env python3
"""Classifies an image: zero-shot with CLIP or SigLIP and label texts, or with a ViT classifier's own labels.
Images are H x W x 3 uint8 numpy arrays (here read with Pillow, Debian's python3-pil).

    python3 python/examples/classify_image.py clip.gguf cat.jpg "a photo of a cat" "a photo of a dog"
    python3 python/examples/classify_image.py vit.gguf cat.jpg
"""
import os
import sys

import numpy as np
from PIL import Image

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import wgml  # noqa: E402

if len(sys.argv) < 3:
    sys.exit(__doc__)
img = np.asarray(Image.open(sys.argv[2]).convert("RGB"))
with wgml.Model(sys.argv[1]) as m:
    labels = sys.argv[3:] or None
    for label, p in m.classify(img, labels=labels, top=5):
        print("%.4f  %s" % (p, label))
    if "embed_image" in m.tasks:
        v = m.embed_images([img])
        print("image vector: %s, |v| = %.3f" % (v.shape, float(np.linalg.norm(v[0]))))
