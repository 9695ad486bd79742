"""Self-check of the float64 reference, without wgml (tests/reference/README.md).

Writes small GGUF files with known random weights (a bert embedder, a bert
reranker and a nomic-bert embedder; F32, F16, BF16 and Q8_0 tensors) with a GGUF
writer of its own, then checks that
  - gguf_reader reads back the metadata of every value type and the tensors
    (F32 exactly, F16/BF16 exactly as rounded here, Q8_0 within half a step);
  - bert_ref's vectorized forward pass equals a plain loop-per-token, loop-per-head
    version written here from the same definitions (to 1e-12).
Exit 0 when all pass.
"""

import math
import os
import struct
import sys
import tempfile

import numpy as np

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bert_ref  # noqa: E402
import gguf_reader as gr  # noqa: E402


# ---- a small GGUF v3 writer

def _str(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def _kv(key, value):
    if isinstance(value, bool):
        return _str(key) + struct.pack("<I?", gr.T_BOOL, value)
    if isinstance(value, int):
        return _str(key) + struct.pack("<Ii", gr.T_INT32, value) if value < 0 else \
            _str(key) + struct.pack("<II", gr.T_UINT32, value)
    if isinstance(value, float):
        return _str(key) + struct.pack("<If", gr.T_FLOAT32, value)
    if isinstance(value, str):
        return _str(key) + struct.pack("<I", gr.T_STRING) + _str(value)
    if isinstance(value, tuple):  # (type, python value): explicit type
        t, v = value
        if t == gr.T_ARRAY:
            et, items = v
            body = struct.pack("<IQ", et, len(items))
            for it in items:
                body += _str(it) if et == gr.T_STRING else struct.pack(gr._SCALAR[et], it)
            return _str(key) + struct.pack("<I", gr.T_ARRAY) + body
        return _str(key) + struct.pack("<I", t) + struct.pack(gr._SCALAR[t], v)
    raise TypeError(value)


def _encode(a, ggml_type):
    """Bytes of float64 array a (numpy shape, rows last) in ggml_type, and the values
    they decode to."""
    flat = a.reshape(-1)
    if ggml_type == gr.GGML_F32:
        b = flat.astype("<f4")
        return b.tobytes(), b.astype(np.float64)
    if ggml_type == gr.GGML_F16:
        b = flat.astype("<f2")
        return b.tobytes(), b.astype(np.float64)
    if ggml_type == gr.GGML_BF16:
        bits = flat.astype(np.float32).view(np.uint32)
        bits = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype("<u2")  # round to nearest even
        return bits.tobytes(), (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    if ggml_type == gr.GGML_Q8_0:
        blocks = flat.reshape(-1, 32)
        amax = np.abs(blocks).max(axis=1)
        d = (amax / 127.0).astype("<f2")
        dd = d.astype(np.float64)
        inv = np.where(dd > 0, 1.0 / np.where(dd > 0, dd, 1), 0)
        q = np.clip(np.round(blocks * inv[:, None]), -127, 127).astype(np.int8)
        out = b"".join(d[i:i + 1].tobytes() + q[i].tobytes() for i in range(len(d)))
        return out, (dd[:, None] * q.astype(np.float64)).reshape(-1)
    raise ValueError(ggml_type)


def write_gguf(path, metadata, tensors, alignment=32):
    """tensors: list of (name, float64 numpy array, ggml type). Returns {name: decoded
    float64 array of the numpy shape}."""
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(metadata) + 1)
    head += _kv("general.alignment", alignment)
    for k, v in metadata.items():
        head += _kv(k, v)
    data, decoded, infos = b"", {}, b""
    for name, a, t in tensors:
        raw, dec = _encode(a, t)
        decoded[name] = dec.reshape(a.shape)
        data += b"\0" * (-len(data) % alignment)
        shape = list(reversed(a.shape))
        infos += _str(name) + struct.pack("<I", len(shape)) + struct.pack("<%dQ" % len(shape), *shape)
        infos += struct.pack("<IQ", t, len(data))
        data += raw
    out = head + infos
    out += b"\0" * (-len(out) % alignment)
    with open(path, "wb") as f:
        f.write(out + data)
    return decoded


# ---- toy models

def toy_model(arch, wtype, rerank=False, E=64, H=4, F=96, V=50, L=2, seed=1):
    rng = np.random.default_rng(seed)

    def r(*shape, s=0.2):
        return rng.normal(0, s, size=shape)

    md = {"general.architecture": arch,
          arch + ".embedding_length": E, arch + ".block_count": L,
          arch + ".attention.head_count": H,
          arch + ".attention.layer_norm_epsilon": 1e-12,
          arch + ".pooling_type": 4 if rerank else (1 if arch == "nomic-bert" else 2),
          arch + ".attention.causal": False,
          # all the other value types, for the reader
          "test.u8": (gr.T_UINT8, 200), "test.i8": (gr.T_INT8, -5), "test.u16": (gr.T_UINT16, 60000),
          "test.i16": (gr.T_INT16, -30000), "test.i32": -7, "test.u64": (gr.T_UINT64, 1 << 40),
          "test.i64": (gr.T_INT64, -(1 << 40)), "test.f64": (gr.T_FLOAT64, 0.1),
          "test.strs": (gr.T_ARRAY, (gr.T_STRING, ["[CLS]", "héllo", ""])),
          "test.ints": (gr.T_ARRAY, (gr.T_INT32, [1, -2, 3])),
          "test.bools": (gr.T_ARRAY, (gr.T_BOOL, [True, False]))}
    if arch == "nomic-bert":
        md[arch + ".rope.freq_base"] = 1000.0
    f32 = gr.GGML_F32
    t = [("token_embd.weight", r(V, E), wtype), ("token_types.weight", r(2, E), f32),
         ("token_embd_norm.weight", 1 + r(E), f32), ("token_embd_norm.bias", r(E), f32)]
    if arch == "bert":
        t.append(("position_embd.weight", r(64, E), wtype))
    for l in range(L):
        p = "blk.%d." % l
        if arch == "bert":
            for n in ("attn_q", "attn_k", "attn_v"):
                t += [(p + n + ".weight", r(E, E), wtype), (p + n + ".bias", r(E), f32)]
            t += [(p + "attn_output.weight", r(E, E), wtype), (p + "attn_output.bias", r(E), f32),
                  (p + "ffn_up.weight", r(F, E), wtype), (p + "ffn_up.bias", r(F), f32),
                  (p + "ffn_down.weight", r(E, F), wtype), (p + "ffn_down.bias", r(E), f32)]
        else:
            t += [(p + "attn_qkv.weight", r(3 * E, E), wtype), (p + "attn_output.weight", r(E, E), wtype),
                  (p + "ffn_up.weight", r(F, E), wtype), (p + "ffn_gate.weight", r(F, E), wtype),
                  (p + "ffn_down.weight", r(E, F), wtype)]
        for n in ("attn_output_norm", "layer_output_norm"):
            t += [(p + n + ".weight", 1 + r(E), f32), (p + n + ".bias", r(E), f32)]
    if rerank:
        t += [("cls.weight", r(E, E), wtype), ("cls.bias", r(E), f32),
              ("cls.output.weight", r(1, E), f32), ("cls.output.bias", r(1), f32)]
    return md, t


# ---- the same forward pass as plain loops

def naive_hidden(W, md, arch, ids, types):
    E = md[arch + ".embedding_length"]
    H = md[arch + ".attention.head_count"]
    L = md[arch + ".block_count"]
    eps = md[arch + ".attention.layer_norm_epsilon"]
    base = md.get(arch + ".rope.freq_base", 10000.0)
    hd = E // H
    n = len(ids)

    def ln(vec, name):
        mu = sum(vec) / len(vec)
        var = sum((a - mu) ** 2 for a in vec) / len(vec)
        return [(a - mu) / math.sqrt(var + eps) * W[name + ".weight"][j] + W[name + ".bias"][j]
                for j, a in enumerate(vec)]

    def lin(vec, name):
        m = W[name + ".weight"]
        b = W.get(name + ".bias")
        return [sum(m[o][i] * vec[i] for i in range(len(vec))) + (b[o] if b is not None else 0.0)
                for o in range(m.shape[0])]

    def rot(vec, pos):
        out = list(vec)
        for i in range(hd // 2):
            th = pos * base ** (-2.0 * i / hd)
            a, b = vec[i], vec[i + hd // 2]
            out[i] = a * math.cos(th) - b * math.sin(th)
            out[i + hd // 2] = a * math.sin(th) + b * math.cos(th)
        return out

    xs = []
    for p, (tok, ty) in enumerate(zip(ids, types)):
        v = [W["token_embd.weight"][tok][j] + W["token_types.weight"][ty][j] for j in range(E)]
        if arch == "bert":
            v = [v[j] + W["position_embd.weight"][p][j] for j in range(E)]
        xs.append(ln(v, "token_embd_norm"))
    for l in range(L):
        pre = "blk.%d." % l
        if arch == "bert":
            Q = [lin(x, pre + "attn_q") for x in xs]
            K = [lin(x, pre + "attn_k") for x in xs]
            Vv = [lin(x, pre + "attn_v") for x in xs]
        else:
            qkv = [lin(x, pre + "attn_qkv") for x in xs]
            Q = [r[:E] for r in qkv]
            K = [r[E:2 * E] for r in qkv]
            Vv = [r[2 * E:] for r in qkv]
        att = [[0.0] * E for _ in range(n)]
        for h in range(H):
            sl = slice(h * hd, (h + 1) * hd)
            qh = [Q[i][sl] for i in range(n)]
            kh = [K[i][sl] for i in range(n)]
            if arch == "nomic-bert":
                qh = [rot(qh[i], i) for i in range(n)]
                kh = [rot(kh[i], i) for i in range(n)]
            for i in range(n):
                sc = [sum(qh[i][d] * kh[j][d] for d in range(hd)) / math.sqrt(hd) for j in range(n)]
                mx = max(sc)
                e = [math.exp(s - mx) for s in sc]
                z = sum(e)
                for d in range(hd):
                    att[i][h * hd + d] = sum(e[j] / z * Vv[j][h * hd + d] for j in range(n))
        xs = [ln([a + b for a, b in zip(xs[i], lin(att[i], pre + "attn_output"))], pre + "attn_output_norm")
              for i in range(n)]
        new = []
        for x in xs:
            if arch == "bert":
                u = lin(x, pre + "ffn_up")
                hv = [0.5 * a * (1 + math.erf(a / math.sqrt(2))) for a in u]
            else:
                g = lin(x, pre + "ffn_gate")
                u = lin(x, pre + "ffn_up")
                hv = [a / (1 + math.exp(-a)) * b for a, b in zip(g, u)]
            new.append(ln([a + b for a, b in zip(x, lin(hv, pre + "ffn_down"))], pre + "layer_output_norm"))
        xs = new
    return np.array(xs)


def main():
    failures = 0

    def check(ok, what):
        nonlocal failures
        print(("ok   " if ok else "FAIL ") + what)
        failures += 0 if ok else 1

    with tempfile.TemporaryDirectory() as tmp:
        cases = [("bert", gr.GGML_F32, False), ("bert", gr.GGML_Q8_0, False), ("bert", gr.GGML_F16, True),
                 ("nomic-bert", gr.GGML_BF16, False), ("nomic-bert", gr.GGML_Q8_0, False)]
        for arch, wtype, rerank in cases:
            name = "%s %s%s" % (arch, gr.type_name(wtype), " rerank" if rerank else "")
            path = os.path.join(tmp, "toy.gguf")
            md, tensors = toy_model(arch, wtype, rerank)
            dec = write_gguf(path, md, tensors)
            f = gr.GGUFFile(path)
            meta_ok = (f.get("test.u8") == 200 and f.get("test.i8") == -5 and f.get("test.u16") == 60000 and
                       f.get("test.i16") == -30000 and f.get("test.i32") == -7 and f.get("test.u64") == 1 << 40 and
                       f.get("test.i64") == -(1 << 40) and f.get("test.f64") == 0.1 and
                       f.get("test.strs") == ["[CLS]", "héllo", ""] and f.get("test.ints") == [1, -2, 3] and
                       f.get("test.bools") == [True, False] and f.get(arch + ".block_count") == 2)
            check(meta_ok, "%s: metadata of every type reads back" % name)
            exact = all(np.array_equal(f.tensor(n), dec[n]) for n, _, _ in tensors)
            check(exact, "%s: tensors read back as written" % name)
            if wtype == gr.GGML_Q8_0:
                a = dict((n, a) for n, a, _ in tensors)["token_embd.weight"]
                step = np.abs(a.reshape(-1, 32)).max(axis=1, keepdims=True) / 127.0
                err = np.abs(f.tensor("token_embd.weight").reshape(-1, 32) - a.reshape(-1, 32))
                check(bool((err <= 0.5 * step * 1.01 + 1e-6).all()), "%s: Q8_0 within half a step" % name)

            ref = bert_ref.BertReference(path)
            ids = [1, 7, 3, 42, 9, 2]
            types = [0, 0, 0, 1, 1, 1] if rerank else [0] * 6
            got = ref.hidden(ids, types)
            want = naive_hidden(dec, md, arch, ids, types)
            diff = float(np.abs(got - want).max())
            check(diff < 1e-12, "%s: forward pass equals the loop version (max diff %.3g)" % (name, diff))
            if rerank:
                c = [math.tanh(v) for v in (dec["cls.weight"] @ want[0] + dec["cls.bias"])]
                s = float(dec["cls.output.weight"][0] @ np.array(c) + dec["cls.output.bias"][0])
                got_s = ref.rerank([1, 7, 3], [1, 42, 9, 2])
                check(abs(got_s - s) < 1e-12, "%s: rerank score %.9g (loop version %.9g)" % (name, got_s, s))
            else:
                v = ref.embed(ids)
                pooled = want.mean(axis=0) if ref.pooling == 1 else want[0]
                check(np.abs(v - pooled / np.linalg.norm(pooled)).max() < 1e-12, "%s: pooled and normalized" % name)
                v8 = ref.embed(ids, normalize="l2", dimensions=8)
                check(abs(np.linalg.norm(v8) - 1) < 1e-12 and np.allclose(v8, pooled[:8] / np.linalg.norm(pooled[:8])),
                      "%s: --dimensions 8" % name)

        # a type the reader does not dequantize is refused with a message
        path = os.path.join(tmp, "q4.gguf")
        write_gguf(path, {"general.architecture": "x"}, [("t", np.zeros((1, 32)), gr.GGML_F32)])
        f = gr.GGUFFile(path)
        f.tensors["t"].type = 2  # Q4_0
        try:
            f.tensor("t")
            check(False, "Q4_0 refused")
        except gr.GGUFError as e:
            check("Q4_0" in str(e) and "not supported" in str(e), "Q4_0 refused: %s" % e)

    print("%d failure(s)" % failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
