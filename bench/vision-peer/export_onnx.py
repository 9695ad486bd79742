#!/usr/bin/env python3
"""Export a wgml vision GGUF (arch clip, siglip or vit) to ONNX for the peer benchmark.

    python3 bench/vision-peer/export_onnx.py MODEL.gguf OUT.onnx [--no-check]

Reads the GGUF with tests/reference/gguf_reader.py (F32, F16, BF16 and Q8_0
tensors, dequantized: the ONNX model is float32 whatever the file's type),
builds a float32 torch.nn.Module with those exact weights, written from the
Hugging Face math that tests/reference/clip_ref.py describes (not from wgml's
C code), checks it against clip_ref.VisionReference (float64) on random
pixels, and exports it with torch.onnx.export (opset 17):

    input  pixel_values [N, 3, S, S] float32 (already preprocessed), N dynamic
    output image_embeds [N, E] float32: the unnormalized image vector
           (CLIP: visual_projection(post_layernorm(class row));
            SigLIP: the MAP head's output; ViT: layernorm(class row))
"""

import argparse
import math
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "reference"))

from gguf_reader import GGUFFile  # noqa: E402
from clip_ref import VisionReference  # noqa: E402

DEFAULT_ACT = {"clip": "quick_gelu", "siglip": "gelu_tanh", "vit": "gelu"}
DEFAULT_EPS = {"clip": 1e-5, "siglip": 1e-6, "vit": 1e-12}


def act_fn(name):
    if name == "quick_gelu":
        return lambda x: x * torch.sigmoid(1.702 * x)
    if name == "gelu_tanh":
        return lambda x: F.gelu(x, approximate="tanh")
    if name == "gelu":
        return lambda x: F.gelu(x)
    raise ValueError("activation %s" % name)


class Weights:
    def __init__(self, g):
        self.g = g

    def t(self, name):
        return torch.from_numpy(np.ascontiguousarray(self.g.tensor(name), dtype=np.float32))


def linear(w, pfx, bias=True):
    W = w.t(pfx + ".weight")
    m = nn.Linear(W.shape[1], W.shape[0], bias=bias)
    with torch.no_grad():
        m.weight.copy_(W)
        if bias:
            m.bias.copy_(w.t(pfx + ".bias"))
    return m


def layernorm(w, pfx, eps):
    W = w.t(pfx + ".weight")
    m = nn.LayerNorm(W.shape[0], eps=eps)
    with torch.no_grad():
        m.weight.copy_(W)
        m.bias.copy_(w.t(pfx + ".bias"))
    return m


def mha(q, k, v, n_head, d):
    """q [N, Tq, D], k and v [N, Tk, D] -> [N, Tq, D]; softmax(q k^T / sqrt(d)) v per head.
    n_head and the head size d are Python ints, so that only the batch and row counts are traced."""
    n = q.shape[0]
    q = q.reshape(n, -1, n_head, d).transpose(1, 2)
    k = k.reshape(n, -1, n_head, d).transpose(1, 2)
    v = v.reshape(n, -1, n_head, d).transpose(1, 2)
    a = torch.softmax(torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(d)), dim=-1)
    return torch.matmul(a, v).transpose(1, 2).reshape(n, -1, n_head * d)


class Block(nn.Module):
    def __init__(self, w, pfx, eps, n_head, act):
        super().__init__()
        self.ln1 = layernorm(w, pfx + ".attn_norm", eps)
        self.q, self.k, self.v = (linear(w, pfx + ".attn_" + s) for s in "qkv")
        self.o = linear(w, pfx + ".attn_out")
        self.ln2 = layernorm(w, pfx + ".ffn_norm", eps)
        self.up = linear(w, pfx + ".ffn_up")
        self.down = linear(w, pfx + ".ffn_down")
        self.n_head, self.d, self.act = n_head, self.q.weight.shape[0] // n_head, act_fn(act)

    def forward(self, x):
        h = self.ln1(x)
        x = x + self.o(mha(self.q(h), self.k(h), self.v(h), self.n_head, self.d))
        return x + self.down(self.act(self.up(self.ln2(x))))


class VisionTower(nn.Module):
    def __init__(self, path):
        super().__init__()
        g = GGUFFile(path)
        w = Weights(g)
        arch = g.get("general.architecture")
        if arch not in DEFAULT_ACT:
            raise SystemExit("%s: architecture %r is not a vision tower" % (path, arch))
        a = arch + ".vision."
        self.arch = arch
        self.S = g.get(a + "image_size")
        self.P = P = g.get(a + "patch_size")
        D = g.get(a + "embedding_length")
        L = g.get(a + "block_count")
        self.H = g.get(a + "attention.head_count")
        self.hd = D // self.H
        eps = g.get(a + "attention.layer_norm_epsilon", DEFAULT_EPS[arch])
        act = g.get(a + "activation", DEFAULT_ACT[arch])
        has_bias = arch != "clip"
        self.patch = nn.Conv2d(3, D, P, stride=P, bias=has_bias)
        with torch.no_grad():
            self.patch.weight.copy_(w.t("v.patch_embd.weight").reshape(D, 3, P, P))
            if has_bias:
                self.patch.bias.copy_(w.t("v.patch_embd.bias"))
        self.cls = nn.Parameter(w.t("v.class_embd").reshape(1, 1, D)) if arch != "siglip" else None
        self.pos = nn.Parameter(w.t("v.position_embd.weight").unsqueeze(0))  # [1, rows, D]
        self.pre = layernorm(w, "v.pre_norm", eps) if arch == "clip" else None
        self.blocks = nn.ModuleList(Block(w, "v.blk.%d" % i, eps, self.H, act) for i in range(L))
        self.post = layernorm(w, "v.post_norm", eps)
        self.proj = linear(w, "v.proj", bias=False) if arch == "clip" else None
        if arch == "siglip":
            hd = "v.head"
            self.probe = nn.Parameter(w.t(hd + ".probe").reshape(1, 1, D))
            self.hq, self.hk, self.hv = (linear(w, hd + ".attn_" + s) for s in "qkv")
            self.ho = linear(w, hd + ".attn_out")
            self.hln = layernorm(w, hd + ".ffn_norm", eps)
            self.hup = linear(w, hd + ".ffn_up")
            self.hdown = linear(w, hd + ".ffn_down")
            self.hact = act_fn(act)

    def forward(self, pixel_values):
        x = self.patch(pixel_values)                     # [N, D, G, G]
        x = x.flatten(2).transpose(1, 2)                 # [N, G*G, D], row-major patches
        n = x.shape[0]
        if self.cls is not None:
            x = torch.cat([self.cls.expand(n, -1, -1), x], dim=1)
        x = x + self.pos
        if self.pre is not None:
            x = self.pre(x)
        for b in self.blocks:
            x = b(x)
        if self.arch == "siglip":
            x = self.post(x)
            q = self.hq(self.probe).expand(n, -1, -1)
            a = self.ho(mha(q, self.hk(x), self.hv(x), self.H, self.hd))
            e = a + self.hdown(self.hact(self.hup(self.hln(a))))
            return e[:, 0]
        e = self.post(x[:, 0])
        if self.proj is not None:
            e = self.proj(e)
        return e


def check(model, path, n_img=2, seed=0):
    ref = VisionReference(path)
    rng = np.random.default_rng(seed)
    px = rng.standard_normal((n_img, 3, model.S, model.S)).astype(np.float32)
    with torch.no_grad():
        out = model(torch.from_numpy(px)).double().numpy()
    worst, worst_cos = 0.0, 1.0
    for i in range(n_img):
        r, _ = ref.embed(px[i])
        worst = max(worst, float(np.abs(out[i] - r).max()))
        cos = float(out[i] @ r / (np.linalg.norm(out[i]) * np.linalg.norm(r)))
        worst_cos = min(worst_cos, cos)
    return worst, worst_cos


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("out")
    ap.add_argument("--no-check", action="store_true", help="skip the float64 reference check")
    ap.add_argument("--tol", type=float, default=1e-4, help="max abs diff against the reference")
    args = ap.parse_args()
    torch.manual_seed(0)
    model = VisionTower(args.model).eval()
    print("export_onnx: %s arch=%s image=%d patch=%d layers=%d torch=%s" % (
        args.model, model.arch, model.S, model.P, len(model.blocks), torch.__version__), file=sys.stderr)
    if not args.no_check:
        diff, cos = check(model, args.model)
        print("export_onnx: torch float32 vs clip_ref float64 (2 random pixel tensors): "
              "max abs diff %.3g, min cosine %.9f" % (diff, cos), file=sys.stderr)
        if not diff < args.tol:
            raise SystemExit("export_onnx: FAIL: max abs diff %.3g >= %g" % (diff, args.tol))
    dummy = torch.zeros(2, 3, model.S, model.S)
    kw = dict(input_names=["pixel_values"], output_names=["image_embeds"],
              dynamic_axes={"pixel_values": {0: "batch"}, "image_embeds": {0: "batch"}},
              opset_version=17, do_constant_folding=True)
    with torch.no_grad():
        try:
            torch.onnx.export(model, (dummy,), args.out, dynamo=False, **kw)
        except TypeError:  # torch without the dynamo argument
            torch.onnx.export(model, (dummy,), args.out, **kw)
    print("export_onnx: wrote %s (%.1f MiB)" % (args.out, os.path.getsize(args.out) / 2**20), file=sys.stderr)


if __name__ == "__main__":
    main()
