#!/usr/bin/env python3
"""bench/whisper-gguf2bin.py - a Whisper GGUF of wgml's schema (wgml synth --arch
whisper-*, docs/whisper.md) back to whisper.cpp's ggml .bin, so that both engines
read the same weights (bench/whispercpp.sh). Standard library only.

    python3 bench/whisper-gguf2bin.py tiny.gguf tiny.bin

The .bin layout is ../shared/whisper/README.md "Checkpoint formats" (and
src/format/ggml_whisper.h): the magic, the ten hyper-parameters, ftype 1, the mel
filters, the vocabulary (whisper.tokens), then every tensor in the GGUF's order
(the state dict's) with n_dims, the name's length, the type (0 F32, 1 F16), the
sizes innermost first, the name and the data. wgml's GGUF stores the two
convolution weights taps-major [S][3][C_in]: they are un-permuted back to
PyTorch's [S][C_in][3] (sizes 3, C_in, S), and their 1-D biases written as [S][1]
(sizes 1, S). F16 and F32 only: quantize the F16 .bin with whisper.cpp's
whisper-quantize. For `wgml synth --arch whisper-tiny --vocab
../shared/whisper/whisper-micro-random.bin` the result is make_random_whisper.py's
whisper-tiny-random.bin, byte for byte (sha256 99e10839...).
"""
import struct
import sys

KEYS = ["whisper.vocab_size", "whisper.audio.context_length", "whisper.audio.embedding_length",
        "whisper.audio.head_count", "whisper.audio.block_count", "whisper.text.context_length",
        "whisper.text.embedding_length", "whisper.text.head_count", "whisper.text.block_count",
        "whisper.n_mels"]
SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
TYPE_SIZE = {0: 4, 1: 2}  # F32, F16: bytes per element


class Reader:
    def __init__(self, data):
        self.d, self.p = data, 0

    def take(self, fmt):
        v = struct.unpack_from(fmt, self.d, self.p)[0]
        self.p += struct.calcsize(fmt)
        return v

    def bytes_(self):
        n = self.take("<Q")
        b = self.d[self.p:self.p + n]
        self.p += n
        return bytes(b)

    def value(self, t):
        if t in SCALAR:
            return self.take(SCALAR[t])
        if t == 8:
            return self.bytes_()
        if t == 9:
            et, n = self.take("<I"), self.take("<Q")
            return [self.value(et) for _ in range(n)]
        raise SystemExit("unknown GGUF value type %d" % t)


def main():
    if len(sys.argv) != 3:
        raise SystemExit("usage: whisper-gguf2bin.py IN.gguf OUT.bin")
    data = memoryview(open(sys.argv[1], "rb").read())
    r = Reader(data)
    if bytes(data[:4]) != b"GGUF":
        raise SystemExit("%s: not a GGUF file" % sys.argv[1])
    r.p = 4
    version, n_tensors, n_kv = r.take("<I"), r.take("<Q"), r.take("<Q")
    if version < 2:
        raise SystemExit("GGUF version %d" % version)
    kv = {}
    for _ in range(n_kv):
        key = r.bytes_().decode()
        kv[key] = r.value(r.take("<I"))
    if kv.get("general.architecture") != b"whisper":
        raise SystemExit("%s: not a Whisper model" % sys.argv[1])
    tensors = []
    for _ in range(n_tensors):
        name = r.bytes_().decode()
        nd = r.take("<I")
        ne = [r.take("<Q") for _ in range(nd)]
        tensors.append((name, ne, r.take("<I"), r.take("<Q")))
    align = kv.get("general.alignment", 32)
    base = (r.p + align - 1) // align * align
    out = bytearray()
    i32 = lambda v: out.extend(struct.pack("<i", v))
    i32(0x67676D6C)
    for k in KEYS:
        i32(kv[k])
    i32(1)  # ftype: F16
    by_name = {t[0]: t for t in tensors}
    name, ne, typ, off = by_name["mel_filters"]
    if typ != 0:
        raise SystemExit("mel_filters is not F32")
    i32(ne[1])
    i32(ne[0])
    out.extend(data[base + off:base + off + 4 * ne[0] * ne[1]])
    toks = kv["whisper.tokens"]
    i32(len(toks))
    for t in toks:
        i32(len(t))
        out.extend(t)
    for name, ne, typ, off in tensors:
        if name == "mel_filters":
            continue
        if typ not in TYPE_SIZE:
            raise SystemExit("%s: type %d; only F32 and F16 (quantize with whisper-quantize)" % (name, typ))
        es = TYPE_SIZE[typ]
        count = 1
        for n in ne:
            count *= n
        src = data[base + off:base + off + es * count]
        nb = name.encode()
        if name in ("encoder.conv1.weight", "encoder.conv2.weight"):
            C, S = ne[0] // 3, ne[1]
            i32(3), i32(len(nb)), i32(typ), i32(3), i32(C), i32(S)
            out.extend(nb)
            # GGUF row o: [3][C] (element j C + c); .bin row o: [C][3] (element 3 c + j)
            w = bytearray(es * count)
            for o in range(S):
                row = src[o * 3 * C * es:(o + 1) * 3 * C * es]
                dst = o * 3 * C * es
                for j in range(3):
                    for c in range(C):
                        a = (j * C + c) * es
                        b = dst + (3 * c + j) * es
                        w[b:b + es] = row[a:a + es]
            out.extend(w)
            continue
        if name in ("encoder.conv1.bias", "encoder.conv2.bias"):
            i32(2), i32(len(nb)), i32(typ), i32(1), i32(ne[0])
        else:
            i32(len(ne)), i32(len(nb)), i32(typ)
            for n in ne:
                i32(n)
        out.extend(nb)
        out.extend(src)
    with open(sys.argv[2], "wb") as f:
        f.write(out)


if __name__ == "__main__":
    main()
