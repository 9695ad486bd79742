"""Float64 reference forward pass of BERT-family encoders (tests/reference/README.md).

The math of Hugging Face's BertModel (post-norm encoder) for GGUF files with
general.architecture "bert" and "nomic-bert", with the tensor names and layout
that llama.cpp's converter writes. Everything runs in float64 numpy, one text at
a time, straight from the definitions: no fused or approximate kernels, so that
it can serve as the ground truth for wgml's embeddings and reranking scores.

    m = BertReference("model.gguf")
    h = m.hidden(ids)                       # (n_tokens, E) last hidden states
    v = m.embed(ids)                        # pooled and L2-normalized vector
    s = m.rerank(query_ids, doc_ids)        # relevance score (pooling type 4)

Usable as a script too:
    python3 bert_ref.py MODEL.gguf embed ID ID ...
    python3 bert_ref.py MODEL.gguf rerank "Q_IDS" "DOC_IDS"
"""

import math
import sys

import numpy as np

sys.dont_write_bytecode = True  # run as a script: no __pycache__ in the source tree
from gguf_reader import GGUFFile  # noqa: E402

POOLING_NONE, POOLING_MEAN, POOLING_CLS, POOLING_LAST, POOLING_RANK = 0, 1, 2, 3, 4
POOLING_NAMES = {"none": POOLING_NONE, "mean": POOLING_MEAN, "cls": POOLING_CLS,
                 "last": POOLING_LAST, "rank": POOLING_RANK}

_erf = np.vectorize(math.erf, otypes=[np.float64])


def layer_norm(x, w, b, eps):
    """LayerNorm over the last axis with the biased variance, as torch.nn.LayerNorm."""
    mu = x.mean(axis=-1, keepdims=True)
    d = x - mu
    var = (d * d).mean(axis=-1, keepdims=True)
    y = d / np.sqrt(var + eps) * w
    return y + b if b is not None else y


def gelu_erf(x):
    """Exact GELU: 0.5 x (1 + erf(x / sqrt 2))."""
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def silu(x):
    return x / (1.0 + np.exp(-x))


def softmax_rows(s):
    s = s - s.max(axis=-1, keepdims=True)
    e = np.exp(s)
    return e / e.sum(axis=-1, keepdims=True)


def rope_neox(x, base):
    """Rotary embedding, NeoX style, of x (n_head, n, hd) at positions 0..n-1: pairs
    (x[i], x[i + hd/2]) rotated by pos * base^(-2i/hd), all hd dimensions."""
    n_head, n, hd = x.shape
    half = hd // 2
    i = np.arange(half, dtype=np.float64)
    inv_freq = base ** (-2.0 * i / hd)
    ang = np.arange(n, dtype=np.float64)[:, None] * inv_freq[None, :]   # (n, half)
    c, s = np.cos(ang), np.sin(ang)
    x0, x1 = x[..., :half], x[..., half:]
    return np.concatenate([x0 * c - x1 * s, x0 * s + x1 * c], axis=-1)


class BertReference:
    def __init__(self, path):
        self.gguf = g = GGUFFile(path)
        self.arch = arch = g.get("general.architecture")
        if arch not in ("bert", "nomic-bert"):
            raise ValueError("%s: architecture %r, the reference knows bert and nomic-bert" % (path, arch))
        self.n_embd = int(g.get(arch + ".embedding_length"))
        self.n_layer = int(g.get(arch + ".block_count"))
        self.n_head = int(g.get(arch + ".attention.head_count"))
        self.eps = float(g.get(arch + ".attention.layer_norm_epsilon", 1e-12))
        self.pooling = int(g.get(arch + ".pooling_type", POOLING_NONE))
        self.causal = bool(g.get(arch + ".attention.causal", False))
        self.rope_base = float(g.get(arch + ".rope.freq_base", 10000.0))
        self.head_dim = self.n_embd // self.n_head
        self._cache = {}

    # -- weights (dequantized once, on first use)
    def w(self, name):
        if name not in self._cache:
            self._cache[name] = self.gguf.tensor(name)
        return self._cache[name]

    def w_opt(self, name):
        return self.w(name) if name in self.gguf.tensors else None

    def linear(self, x, name):
        """x W^T (+ b): W has GGUF shape [in, out], numpy (out, in)."""
        y = x @ self.w(name + ".weight").T
        b = self.w_opt(name + ".bias")
        return y + b if b is not None else y

    def norm(self, x, name):
        return layer_norm(x, self.w(name + ".weight"), self.w_opt(name + ".bias"), self.eps)

    # -- forward
    def hidden(self, ids, type_ids=None):
        """The last hidden states (n, E) of one text, token ids `ids`."""
        ids = np.asarray(ids, dtype=np.int64)
        n, E, H, hd = len(ids), self.n_embd, self.n_head, self.head_dim
        type_ids = np.zeros(n, dtype=np.int64) if type_ids is None else np.asarray(type_ids, dtype=np.int64)
        x = self.gguf.rows("token_embd.weight", ids)
        if "token_types.weight" in self.gguf.tensors:
            x = x + self.w("token_types.weight")[type_ids]
        if self.arch == "bert":
            x = x + self.w("position_embd.weight")[:n]
        x = self.norm(x, "token_embd_norm")

        mask = np.zeros((n, n))
        if self.causal:
            mask[np.triu_indices(n, 1)] = -np.inf

        for l in range(self.n_layer):
            p = "blk.%d." % l
            if self.arch == "nomic-bert":
                qkv = self.linear(x, p + "attn_qkv")            # (n, 3E): q, then k, then v
                q, k, v = qkv[:, :E], qkv[:, E:2 * E], qkv[:, 2 * E:]
            else:
                q = self.linear(x, p + "attn_q")
                k = self.linear(x, p + "attn_k")
                v = self.linear(x, p + "attn_v")
            # (n, E) -> (H, n, hd)
            q = q.reshape(n, H, hd).transpose(1, 0, 2)
            k = k.reshape(n, H, hd).transpose(1, 0, 2)
            v = v.reshape(n, H, hd).transpose(1, 0, 2)
            if self.arch == "nomic-bert":
                q = rope_neox(q, self.rope_base)
                k = rope_neox(k, self.rope_base)
            s = q @ k.transpose(0, 2, 1) / math.sqrt(hd) + mask
            att = (softmax_rows(s) @ v).transpose(1, 0, 2).reshape(n, E)
            x = self.norm(x + self.linear(att, p + "attn_output"), p + "attn_output_norm")

            if self.arch == "nomic-bert":
                h = silu(self.linear(x, p + "ffn_gate")) * self.linear(x, p + "ffn_up")
            else:
                h = gelu_erf(self.linear(x, p + "ffn_up"))
            x = self.norm(x + self.linear(h, p + "ffn_down"), p + "layer_output_norm")
        return x

    # -- embeddings
    def pool(self, h, pooling=None):
        pooling = self.pooling if pooling is None else pooling
        if pooling == POOLING_MEAN:
            return h.mean(axis=0)
        if pooling in (POOLING_CLS, POOLING_RANK):
            return h[0]
        if pooling == POOLING_LAST:
            return h[-1]
        raise ValueError("pooling type %d has no single vector" % pooling)

    def embed(self, ids, pooling=None, normalize="l2", dimensions=None):
        """Pooled vector of one text; `dimensions` N keeps the first N values (matryoshka)
        before normalizing."""
        v = self.pool(self.hidden(ids), pooling)
        if dimensions:
            v = v[:dimensions]
        if normalize == "l2":
            v = v / max(np.linalg.norm(v), 1e-300)
        elif normalize not in (None, "none"):
            raise ValueError("normalize %r" % normalize)
        return v

    # -- reranking
    def rerank_ids(self, query_ids, doc_ids):
        """[CLS] query [SEP] doc [SEP] and its token types from the ids of
        [CLS] query [SEP] and [CLS] doc [SEP] (the doc's [CLS] is dropped)."""
        ids = list(query_ids) + list(doc_ids[1:])
        types = [0] * len(query_ids) + [1] * (len(doc_ids) - 1)
        return ids, types

    def rerank(self, query_ids, doc_ids):
        ids, types = self.rerank_ids(query_ids, doc_ids)
        cls_row = self.hidden(ids, types)[0]
        c = np.tanh(self.linear(cls_row, "cls"))
        return float(self.linear(c, "cls.output").reshape(-1)[0])


def _main(argv):
    if len(argv) < 3 or argv[2] not in ("embed", "rerank", "hidden"):
        print(__doc__, file=sys.stderr)
        return 2
    m = BertReference(argv[1])
    np.set_printoptions(precision=9, linewidth=200)
    if argv[2] == "rerank":
        q = [int(t) for t in argv[3].split()]
        d = [int(t) for t in argv[4].split()]
        print("%.9g" % m.rerank(q, d))
    else:
        ids = [int(t) for t in argv[3:]]
        out = m.hidden(ids) if argv[2] == "hidden" else m.embed(ids)
        print(out)
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv))
