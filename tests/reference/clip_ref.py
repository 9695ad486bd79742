"""Float64 reference for the vision towers wgml runs (CLIP, SigLIP, ViT).

Written from the published math of Hugging Face's CLIPVisionModel (+ the
visual projection of CLIPModel.get_image_features), SiglipVisionModel and
ViTModel / ViTForImageClassification, not from wgml's code, in numpy float64,
on the GGUF schema of src/model/clip/clip.h (read with gguf_reader.py):

  patches = the image cut into P x P squares, each flattened channel, y, x
            (Conv2d(3, D, P, stride P) is patches @ W.T + b)
  x = [class_embd; patches] + position_embd            (SigLIP: no class row)
  CLIP: x = LayerNorm(x) (pre_layrnorm)
  each layer: x += attn(LN1(x)); x += fc2(act(fc1(LN2(x))))
      attention: softmax(q k^T / sqrt(head_dim)) v per head, no mask
      act: CLIP quick_gelu x sigmoid(1.702 x); SigLIP gelu_pytorch_tanh; ViT erf GELU
  CLIP:   proj(LN(x[0]))                           (post_layernorm, visual_projection)
  ViT:    LN(x[0]); logits = classifier(LN(x[0]))   (layernorm on every row; row 0 used)
  SigLIP: x = LN(x); MultiheadAttention(probe, x, x) -> a; a + mlp(LN(a))

Preprocessing (`preprocess`) is the HF image processors' on a PIL image:
Pillow's resize (shortest edge: int(S * long / short), truncated; or an exact
size), center crop at ((H - h) // 2, (W - w) // 2), x / 255 in float64 then
float32, (x - mean) / std in float32.
"""

import math

import numpy as np

from gguf_reader import GGUFFile

_erf = np.vectorize(math.erf)


def layer_norm(x, w, b, eps):
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def activation(name, x):
    if name == "quick_gelu":
        return x / (1.0 + np.exp(-1.702 * x))
    if name == "gelu_tanh":
        return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))
    if name == "gelu":
        return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))
    raise ValueError("activation %s" % name)


def attention(q, k, v, n_head, causal=False):
    """softmax(q k^T / sqrt(d)) v per head: q (n, D), k and v (m, D); causal: row i sees rows <= i."""
    n, D = q.shape
    d = D // n_head
    out = np.empty((n, D))
    for h in range(n_head):
        s = slice(h * d, (h + 1) * d)
        a = q[:, s] @ k[:, s].T / math.sqrt(d)
        if causal:
            a = np.where(np.tril(np.ones((n, k.shape[0]), dtype=bool)), a, -np.inf)
        a = np.exp(a - a.max(axis=1, keepdims=True))
        a /= a.sum(axis=1, keepdims=True)
        out[:, s] = a @ v[:, s]
    return out


def cubic_resample_matrix(m, n):
    """torch's bicubic resampling of m samples to n (align_corners=False, a = -0.75, edge samples
    repeated) as an n x m matrix: out = R @ in."""
    a = -0.75
    R = np.zeros((n, m))
    for o in range(n):
        src = m / n * (o + 0.5) - 0.5
        f = math.floor(src)
        t = src - f
        w = [((a * (t + 1) - 5 * a) * (t + 1) + 8 * a) * (t + 1) - 4 * a,
             ((a + 2) * t - (a + 3)) * t * t + 1,
             ((a + 2) * (1 - t) - (a + 3)) * (1 - t) * (1 - t) + 1,
             ((a * (2 - t) - 5 * a) * (2 - t) + 8 * a) * (2 - t) - 4 * a]
        for k in range(4):
            R[o, min(max(f - 1 + k, 0), m - 1)] += w[k]
    return R


def interpolate_positions(table, class_row, grid):
    """HF's interpolate_pos_encoding: the patch rows of the position table, a G x G image of D
    channels, resampled bicubically to grid x grid; the class row kept."""
    head, patches = table[:class_row], table[class_row:]
    G = int(round(math.sqrt(patches.shape[0])))
    R = cubic_resample_matrix(G, grid)
    img = patches.reshape(G, G, -1)
    out = np.einsum("yi,xj,ijd->yxd", R, R, img).reshape(grid * grid, -1)
    return np.vstack([head, out])


class VisionReference:
    DEFAULT_ACT = {"clip": "quick_gelu", "siglip": "gelu_tanh", "vit": "gelu"}
    DEFAULT_EPS = {"clip": 1e-5, "siglip": 1e-6, "vit": 1e-12}

    def __init__(self, path):
        self.g = GGUFFile(path)
        g = self.g
        self.arch = g.get("general.architecture")
        a = self.arch + ".vision."
        self.S = g.get(a + "image_size")
        self.P = g.get(a + "patch_size")
        self.D = g.get(a + "embedding_length")
        self.L = g.get(a + "block_count")
        self.H = g.get(a + "attention.head_count")
        self.eps = g.get(a + "attention.layer_norm_epsilon", self.DEFAULT_EPS[self.arch])
        self.act = g.get(a + "activation", self.DEFAULT_ACT[self.arch])
        self.labels = g.get(self.arch + ".classifier.output_labels")
        self._t = {}

    def t(self, name):
        if name not in self._t:
            self._t[name] = self.g.tensor(name)
        return self._t[name]

    def has(self, name):
        try:
            self.t(name)
            return True
        except Exception:
            return False

    def linear(self, x, pfx, bias=True):
        y = x @ self.t(pfx + ".weight").T
        return y + self.t(pfx + ".bias") if bias else y

    def block(self, x, pfx, attn_norm=True, causal=False):
        h = layer_norm(x, self.t(pfx + ".attn_norm.weight"), self.t(pfx + ".attn_norm.bias"), self.eps) \
            if attn_norm else x
        q, k, v = (self.linear(h, pfx + ".attn_" + n) for n in "qkv")
        x = x + self.linear(attention(q, k, v, self.H, causal), pfx + ".attn_out")
        h = layer_norm(x, self.t(pfx + ".ffn_norm.weight"), self.t(pfx + ".ffn_norm.bias"), self.eps)
        return x + self.linear(activation(self.act, self.linear(h, pfx + ".ffn_up")), pfx + ".ffn_down")

    def tower(self, pixels):
        """pixels: (3, S, S) -> the rows after the blocks."""
        P, G = self.P, self.S // self.P
        patches = pixels.reshape(3, G, P, G, P).transpose(1, 3, 0, 2, 4).reshape(G * G, 3 * P * P)
        x = self.linear(patches, "v.patch_embd", bias=self.arch != "clip")
        if self.arch != "siglip":
            x = np.vstack([self.t("v.class_embd")[None, :], x])
        pos = self.t("v.position_embd.weight")
        if pos.shape[0] != x.shape[0]:  # another size than trained: interpolated positions
            pos = interpolate_positions(pos, 0 if self.arch == "siglip" else 1, G)
        x = x + pos
        if self.arch == "clip":
            x = layer_norm(x, self.t("v.pre_norm.weight"), self.t("v.pre_norm.bias"), self.eps)
        for i in range(self.L):
            x = self.block(x, "v.blk.%d" % i)
        return x

    def embed(self, pixels):
        """The image's vector before any normalization, and the ViT classifier's logits (or None)."""
        x = self.tower(np.asarray(pixels, dtype=np.float64))
        post = (self.t("v.post_norm.weight"), self.t("v.post_norm.bias"), self.eps)
        if self.arch == "siglip":
            x = layer_norm(x, *post)
            hd = "v.head"
            q = self.linear(self.t(hd + ".probe")[None, :], hd + ".attn_q")
            k, v = self.linear(x, hd + ".attn_k"), self.linear(x, hd + ".attn_v")
            a = self.linear(attention(q, k, v, self.H), hd + ".attn_out")
            h = layer_norm(a, self.t(hd + ".ffn_norm.weight"), self.t(hd + ".ffn_norm.bias"), self.eps)
            e = a + self.linear(activation(self.act, self.linear(h, hd + ".ffn_up")), hd + ".ffn_down")
            return e[0], None
        e = layer_norm(x[0], *post)
        logits = self.linear(e, "v.classifier") if self.labels else None
        if self.arch == "clip":
            e = e @ self.t("v.proj.weight").T
        return e, logits

    def preprocess(self, img):
        """A PIL RGB image -> float32 (3, S, S) pixel_values, as the architecture's HF image processor."""
        from PIL import Image
        if self.arch == "clip":  # CLIPImageProcessor: shortest edge, bicubic, center crop
            S = self.S
            w, h = img.size
            if w <= h:
                size = (S, int(S * h / w))
            else:
                size = (int(S * w / h), S)
            img = img.resize(size, resample=Image.BICUBIC)
            a = np.asarray(img)
            top, left = (a.shape[0] - S) // 2, (a.shape[1] - S) // 2
            a = a[top:top + S, left:left + S]
            mean = np.array([0.48145466, 0.4578275, 0.40821073], dtype=np.float32)
            std = np.array([0.26862954, 0.26130258, 0.27577711], dtype=np.float32)
        else:  # SiglipImageProcessor (bicubic), ViTImageProcessor (bilinear): a square resize
            f = Image.BICUBIC if self.arch == "siglip" else Image.BILINEAR
            a = np.asarray(img.resize((self.S, self.S), resample=f))
            mean = np.full(3, 0.5, dtype=np.float32)
            std = np.full(3, 0.5, dtype=np.float32)
        x = (a.astype(np.float64) * (1 / 255)).astype(np.float32)
        x = (x - mean) / std
        return x.transpose(2, 0, 1)


class TextReference(VisionReference):
    """The text tower of the same GGUF (HF's CLIPTextModel + text_projection, SiglipTextModel with
    its head), on token ids as the tokenizer gives them (CLIP: <|startoftext|> .. <|endoftext|>,
    SigLIP: .. </s>):

      x = token_embd[ids] + position_embd[0 .. n)       (SigLIP: the ids padded to the context)
      each layer as the vision tower's (CLIP: causal attention)
      CLIP:   text_projection(LN(x[first EOS]))        (final_layer_norm)
      SigLIP: head(LN(x[-1]))                          (weight and bias)
      zero-shot logits: exp(logit_scale) cos(image, text) (+ logit_bias: SigLIP)
    """

    def __init__(self, path):
        super().__init__(path)
        g = self.g
        a = self.arch + ".text."
        self.L = g.get(a + "block_count")
        self.H = g.get(a + "attention.head_count")
        self.ctx = g.get(a + "context_length")
        self.eps = g.get(a + "attention.layer_norm_epsilon", self.DEFAULT_EPS[self.arch])
        self.act = g.get(a + "activation", self.DEFAULT_ACT[self.arch])
        self.eos = g.get("tokenizer.ggml.eos_token_id")
        pad = g.get("tokenizer.ggml.padding_token_id")
        self.pad = self.eos if pad is None else pad
        self.logit_scale = g.get(self.arch + ".logit_scale", math.log(100.0))
        self.logit_bias = g.get(self.arch + ".logit_bias", 0.0)

    def embed_ids(self, ids):
        """The text's vector before any normalization."""
        ids = list(ids)
        siglip = self.arch == "siglip"
        if siglip:
            ids = ids + [self.pad] * (self.ctx - len(ids))
        x = self.t("t.token_embd.weight")[ids] + self.t("t.position_embd.weight")[:len(ids)]
        for i in range(self.L):
            x = self.block(x, "t.blk.%d" % i, causal=not siglip)
        row = len(ids) - 1 if siglip or self.eos not in ids else ids.index(self.eos)
        e = layer_norm(x[row], self.t("t.post_norm.weight"), self.t("t.post_norm.bias"), self.eps)
        return self.linear(e, "t.proj", bias=siglip)

    def zero_shot(self, image_vecs, text_vecs):
        """Probabilities [image][label] from raw vectors: CLIP's softmax, SigLIP's sigmoids."""
        u = lambda v: v / np.linalg.norm(v)  # noqa: E731
        logits = np.array([[math.exp(self.logit_scale) * (u(a) @ u(b)) for b in text_vecs] for a in image_vecs])
        if self.arch == "siglip":
            return 1 / (1 + np.exp(-(logits + self.logit_bias)))
        p = np.exp(logits - logits.max(axis=1, keepdims=True))
        return p / p.sum(axis=1, keepdims=True)
