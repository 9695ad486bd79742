"""A minimal GGUF v3 reader for the float64 reference (tests/reference/README.md).

Reads the header, every metadata key/value (all value types, arrays included),
the tensor infos and their data, and dequantizes F32, F16, BF16 and Q8_0 tensors
to float64 numpy arrays. Written from the GGUF specification; independent of
wgml's C reader on purpose, so that the two can check each other.

Shapes: GGUF lists a tensor's dimensions fastest first (ne0 is the length of a
row), numpy slowest first, so a tensor with GGUF shape [ne0, ne1] is returned as
an array of shape (ne1, ne0).
"""

import struct

import numpy as np

GGUF_MAGIC = b"GGUF"

# metadata value types
T_UINT8, T_INT8, T_UINT16, T_INT16, T_UINT32, T_INT32, T_FLOAT32, T_BOOL = range(8)
T_STRING, T_ARRAY, T_UINT64, T_INT64, T_FLOAT64 = range(8, 13)

_SCALAR = {
    T_UINT8: "<B", T_INT8: "<b", T_UINT16: "<H", T_INT16: "<h",
    T_UINT32: "<I", T_INT32: "<i", T_FLOAT32: "<f", T_BOOL: "<?",
    T_UINT64: "<Q", T_INT64: "<q", T_FLOAT64: "<d",
}

# ggml tensor types this reader can dequantize
GGML_F32, GGML_F16, GGML_Q8_0, GGML_BF16 = 0, 1, 8, 30
_TYPE_NAMES = {
    0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 6: "Q5_0", 7: "Q5_1", 8: "Q8_0",
    9: "Q8_1", 10: "Q2_K", 11: "Q3_K", 12: "Q4_K", 13: "Q5_K", 14: "Q6_K",
    15: "Q8_K", 24: "I8", 25: "I16", 26: "I32", 27: "I64", 28: "F64", 30: "BF16",
}
QK8_0 = 32


class GGUFError(Exception):
    pass


def type_name(t):
    return _TYPE_NAMES.get(t, "type %d" % t)


class TensorInfo:
    def __init__(self, name, shape, ggml_type, offset):
        self.name = name
        self.shape = shape          # GGUF order: ne0 first
        self.type = ggml_type
        self.offset = offset        # from the start of the data section

    @property
    def n_elements(self):
        n = 1
        for d in self.shape:
            n *= d
        return n

    def nbytes(self):
        n = self.n_elements
        if self.type == GGML_F32:
            return 4 * n
        if self.type in (GGML_F16, GGML_BF16):
            return 2 * n
        if self.type == GGML_Q8_0:
            return n // QK8_0 * (2 + QK8_0)
        raise GGUFError("tensor %s: type %s is not supported by this reader "
                        "(F32, F16, BF16 and Q8_0 are)" % (self.name, type_name(self.type)))


class GGUFFile:
    """A parsed GGUF file: .version, .metadata (dict key -> value), .tensors
    (dict name -> TensorInfo, in file order), .alignment, .data_offset."""

    def __init__(self, path):
        with open(path, "rb") as f:
            self._buf = f.read()
        self._pos = 0
        self.path = path
        if self._take(4) != GGUF_MAGIC:
            raise GGUFError("%s: not a GGUF file (bad magic)" % path)
        self.version = self._scalar(T_UINT32)
        if self.version != 3:
            raise GGUFError("%s: GGUF version %d, only version 3 is supported" % (path, self.version))
        n_tensors = self._scalar(T_UINT64)
        n_kv = self._scalar(T_UINT64)
        self.metadata = {}
        for _ in range(n_kv):
            key = self._string()
            vtype = self._scalar(T_UINT32)
            self.metadata[key] = self._value(vtype)
        self.tensors = {}
        for _ in range(n_tensors):
            name = self._string()
            n_dims = self._scalar(T_UINT32)
            shape = [self._scalar(T_UINT64) for _ in range(n_dims)]
            ggml_type = self._scalar(T_UINT32)
            offset = self._scalar(T_UINT64)
            if name in self.tensors:
                raise GGUFError("%s: tensor %s appears twice" % (path, name))
            self.tensors[name] = TensorInfo(name, shape, ggml_type, offset)
        self.alignment = int(self.metadata.get("general.alignment", 32))
        if self.alignment <= 0 or self.alignment & (self.alignment - 1):
            raise GGUFError("%s: general.alignment %d is not a power of two" % (path, self.alignment))
        self.data_offset = (self._pos + self.alignment - 1) // self.alignment * self.alignment

    # -- parsing helpers
    def _take(self, n):
        if self._pos + n > len(self._buf):
            raise GGUFError("%s: truncated at byte %d" % (self.path, self._pos))
        b = self._buf[self._pos:self._pos + n]
        self._pos += n
        return b

    def _scalar(self, vtype):
        fmt = _SCALAR[vtype]
        return struct.unpack(fmt, self._take(struct.calcsize(fmt)))[0]

    def _string(self):
        n = self._scalar(T_UINT64)
        return self._take(n).decode("utf-8", errors="replace")

    def _value(self, vtype):
        if vtype in _SCALAR:
            return self._scalar(vtype)
        if vtype == T_STRING:
            return self._string()
        if vtype == T_ARRAY:
            etype = self._scalar(T_UINT32)
            count = self._scalar(T_UINT64)
            if etype in _SCALAR and etype != T_BOOL:
                # numeric arrays in one go (token scores, types, ...)
                dt = np.dtype(_SCALAR[etype])
                raw = self._take(count * dt.itemsize)
                return np.frombuffer(raw, dtype=dt).tolist()
            return [self._value(etype) for _ in range(count)]
        raise GGUFError("%s: unknown metadata value type %d" % (self.path, vtype))

    # -- tensors
    def raw(self, name):
        info = self.tensors[name]
        start = self.data_offset + info.offset
        n = info.nbytes()
        if start + n > len(self._buf):
            raise GGUFError("%s: tensor %s runs past the end of the file" % (self.path, name))
        return memoryview(self._buf)[start:start + n]

    def tensor(self, name):
        """The tensor `name` dequantized to float64, numpy shape = reversed GGUF shape."""
        if name not in self.tensors:
            raise GGUFError("%s: no tensor %s" % (self.path, name))
        info = self.tensors[name]
        raw = self.raw(name)
        n = info.n_elements
        if info.type == GGML_F32:
            v = np.frombuffer(raw, dtype="<f4").astype(np.float64)
        elif info.type == GGML_F16:
            v = np.frombuffer(raw, dtype="<f2").astype(np.float64)
        elif info.type == GGML_BF16:
            bits = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
            v = bits.view(np.float32).astype(np.float64)
        elif info.type == GGML_Q8_0:
            if info.shape[0] % QK8_0:
                raise GGUFError("tensor %s: Q8_0 row length %d is not a multiple of 32" % (name, info.shape[0]))
            blocks = np.frombuffer(raw, dtype=np.uint8).reshape(n // QK8_0, 2 + QK8_0)
            d = blocks[:, :2].copy().view("<f2").astype(np.float64)          # (nb, 1)
            q = blocks[:, 2:].copy().view(np.int8).astype(np.float64)        # (nb, 32)
            v = (d * q).reshape(n)
        else:
            info.nbytes()  # raises the "not supported" error
            raise AssertionError
        return v.reshape(tuple(reversed(info.shape)))

    def rows(self, name, idx):
        """Rows idx (GGUF ne1 indices) of a 2-D tensor, dequantized to float64: the same
        values as tensor(name)[idx], without dequantizing the whole matrix."""
        info = self.tensors[name]
        if len(info.shape) != 2:
            return self.tensor(name)[idx]
        ne0, ne1 = info.shape
        idx = np.asarray(idx, dtype=np.int64)
        if idx.size and (idx.min() < 0 or idx.max() >= ne1):
            raise GGUFError("tensor %s: row index out of range 0..%d" % (name, ne1 - 1))
        row_bytes = info.nbytes() // ne1
        raw = np.frombuffer(self.raw(name), dtype=np.uint8).reshape(ne1, row_bytes)[idx]
        sub = GGUFFile.__new__(GGUFFile)
        sub.path, sub._buf, sub.data_offset = self.path, raw.tobytes(), 0
        sub.tensors = {name: TensorInfo(name, [ne0, len(idx)], info.type, 0)}
        return sub.tensor(name)

    def get(self, key, default=None):
        return self.metadata.get(key, default)
