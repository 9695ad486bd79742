#!/usr/bin/env python3
"""test_python.py - the Python package (python/wgml) over libwgml.so, against the CLI.

    test_python.py CLI LIBWGML_SO

Imports the package from python/ (no installation) with WGML_LIBRARY pointing at the library
built beside the CLI, and checks each task's results against the CLI's for the same model and
parameters: greedy text (`wgml run`), streamed pieces, stop strings, chat (`wgml template`),
embeddings (`wgml embed`, 1e-5), rerank scores, Kokoro speech (`wgml speak`, f32 WAV and word
times), Whisper transcription (`wgml transcribe -f json`), CLIP image vectors (`wgml embed
--image`), zero-shot CLIP and ViT classification (`wgml classify --json`); errors as wgml.Error
subclasses carrying the library's message; two threads with two models at once; one model
shared by two threads; and Ctrl-C (SIGINT) during a streamed and a plain generation in a child
process, which must stop cleanly and leave the model usable. Models are synthesized with
`wgml synth --layers 1` (and kokoro-tiny converted from ../shared/kokoro), CPU backend, one
thread (the library's and the CLI's: quick on a loaded machine).

Exit: 0 passed, 1 failed, 77 skipped (no numpy, outside CI and without WGML_REQUIRE_SHARED).
"""
import json
import shutil
import os
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import wave
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
REQUIRED = bool(os.environ.get("CI") or os.environ.get("WGML_REQUIRE_SHARED"))


def skip_or_fail(why):
    if REQUIRED:
        print("test_python: FAILED: %s" % why)
        sys.exit(1)
    print("test_python: skipped: %s" % why)
    sys.exit(77)


try:
    import numpy as np
except ImportError:
    skip_or_fail("numpy is missing (Debian: python3-numpy)")

if len(sys.argv) != 3:
    sys.exit("usage: test_python.py CLI LIBWGML_SO")
CLI, LIB = sys.argv[1], sys.argv[2]
os.environ["WGML_LIBRARY"] = LIB
sys.path.insert(0, os.path.join(ROOT, "python"))
import wgml  # noqa: E402

SHARED = os.environ.get("WGML_SHARED", os.path.join(ROOT, "..", "shared"))
STORIES = os.path.join(SHARED, "models", "stories260K.gguf")
if not os.path.exists(STORIES):
    skip_or_fail("no shared test data at %s" % SHARED)

failures = []


def check(cond, what):
    if cond:
        print("  ok   %s" % what)
    else:
        print("  FAIL %s" % what)
        failures.append(what)


def cli(*args, stdin=None):
    p = subprocess.run([CLI] + list(args), input=stdin, capture_output=True, timeout=120)
    if p.returncode != 0:
        raise RuntimeError("wgml %s: exit %d: %s" % (" ".join(args), p.returncode, p.stderr.decode(errors="replace")))
    return p.stdout


def png(path, img):
    """Writes an H x W x 3 uint8 array as an RGB PNG (zlib, filter 0 on every row)."""
    h, w, _ = img.shape
    raw = b"".join(b"\0" + img[y].tobytes() for y in range(h))

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) +
                chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


PROMPT = "Once upon a time"


def test_header():
    """The package's ctypes structures (python/wgml/_lib.py) mirror include/wgml.h's structs field by
    field, names and kinds of types in order: a change to the header fails here, not in a caller."""
    print("ctypes structures = include/wgml.h")
    import ctypes
    import re
    from wgml import _lib
    h = open(os.path.join(ROOT, "include", "wgml.h"), encoding="utf-8").read()
    h = re.sub(r"//[^\n]*", "", re.sub(r"/\*.*?\*/", "", h, flags=re.S))
    scalars = {"int": ctypes.c_int, "unsigned": ctypes.c_uint, "float": ctypes.c_float, "double": ctypes.c_double,
               "int32_t": ctypes.c_int32, "uint32_t": ctypes.c_uint32, "int64_t": ctypes.c_int64,
               "uint64_t": ctypes.c_uint64, "size_t": ctypes.c_size_t}

    def c_fields(name):
        m = re.search(r"typedef struct %s \{(.*?)\} %s;" % (name, name), h, re.S)
        if not m:
            return None
        out = []
        for decl in m.group(1).split(";"):
            decl = " ".join(decl.split())
            if not decl:
                continue
            fn = re.match(r".*\(\s*\*\s*(\w+)\s*\)\s*\(.*\)$", decl)
            if fn:
                out.append((fn.group(1), "fn"))
                continue
            parts = decl.split(",")
            words = parts[0].split()
            ctype = " ".join(w for w in words[:-1] if w != "const")
            for i, d in enumerate([words[-1]] + [x.strip() for x in parts[1:]]):
                arr = "[" in d
                ptr = d.startswith("*") or ctype.endswith("*")
                out.append((re.sub(r"\[.*\]", "", d).lstrip("*"), "ptr" if ptr else "arr" if arr else ctype))
        return out

    def kind(t):
        if issubclass(t, (ctypes._Pointer, ctypes.c_char_p, ctypes.c_void_p)):
            return "ptr"
        if issubclass(t, ctypes._CFuncPtr):
            return "fn"
        if issubclass(t, ctypes.Array):
            return "arr"
        if issubclass(t, ctypes.Structure):
            return t.__name__
        return t

    def c_kind(k):
        if k in ("ptr", "fn", "arr"):
            return k
        if k.endswith("_fn"):  # typedef'd function pointers: wgml_token_fn, wgml_progress_fn
            return "fn"
        if k in scalars:
            return scalars[k]
        if hasattr(_lib, k):  # a nested struct
            return k
        return ctypes.c_int  # an enum (wgml_backend_kind, wgml_kv_type, ...)

    n = 0
    for name in dir(_lib):
        cls = getattr(_lib, name)
        if not (isinstance(cls, type) and issubclass(cls, ctypes.Structure) and name.startswith("wgml_")):
            continue
        want = c_fields(name)
        got = [(f, kind(t)) for f, t in cls._fields_]
        want_k = None if want is None else [(f, c_kind(k)) for f, k in want]
        check(want_k == got, "%s: %d fields as in the header%s" % (name, len(got), "" if want_k == got else
                                                                  ": header %s, package %s" % (want, got)))
        n += 1
    check(n >= 15, "%d structures compared" % n)
    bad = []
    for fname, (_res, args) in _lib._SIGNATURES.items():
        m = re.search(r"\b%s\s*\(([^;{]*?)\)\s*;" % fname, h)
        params = [] if not m or m.group(1).strip() in ("", "void") else m.group(1).split(",")
        if not m or len(params) != len(args):
            bad.append("%s: header %s, package %d arguments" % (fname, len(params) if m else "none", len(args)))
    check(not bad, "%d functions: argument counts as in the header %s" % (len(_lib._SIGNATURES), bad))


def test_generate():
    print("generate")
    want = cli("run", "-m", STORIES, "--backend", "cpu", "--threads", "1", "-p", PROMPT, "-n", "60", "--temp", "0").decode()
    with wgml.Model(STORIES, backend="cpu", threads=1) as m:
        check(m.tasks == ("generate",) and m.info.family == "llama" and m.info.backend == "cpu",
              "info: %s %s %s" % (m.tasks, m.info.family, m.info.backend))
        text = m.generate(PROMPT, max_tokens=60, temperature=0)
        check(PROMPT + text + "\n" == want, "greedy text equals `wgml run --temp 0`'s: %r" % text[:50])
        st = m.last_stats
        check(st["completion_tokens"] == 60 and st["finish_reason"] == "length", "stats: %s" % st)
        pieces = list(m.generate(PROMPT, max_tokens=60, temperature=0, stream=True))
        check(len(pieces) > 10 and "".join(pieces) == text, "stream: %d pieces, joined = the text" % len(pieces))
        # leaving a stream early stops it; the model goes on
        it = m.generate(PROMPT, max_tokens=60, temperature=0, stream=True)
        first = next(it)
        it.close()
        check(first == pieces[0] and m.generate(PROMPT, max_tokens=60, temperature=0) == text,
              "a stream closed early, then the same greedy text")
        # stop strings: the text up to the first, not included; streamed the same
        cut = text.index("Lily") if "Lily" in text else len(text) // 2
        stop = text[cut:cut + 4]
        s1 = m.generate(PROMPT, max_tokens=60, temperature=0, stop=[stop, "\0never"])
        s2 = "".join(m.generate(PROMPT, max_tokens=60, temperature=0, stop=stop, stream=True))
        check(s1 == text[:text.index(stop)] == s2 and m.last_stats["finish_reason"] == "stop",
              "stop %r: %r" % (stop, s1))
        # sampling with a seed repeats; another seed differs
        a = m.generate(PROMPT, max_tokens=40, temperature=0.9, seed=7)
        b = m.generate(PROMPT, max_tokens=40, temperature=0.9, seed=7)
        c = m.generate(PROMPT, max_tokens=40, temperature=0.9, seed=8)
        want7 = cli("run", "-m", STORIES, "--backend", "cpu", "--threads", "1", "-p", PROMPT, "-n", "40", "--temp", "0.9",
                    "--seed", "7").decode()
        check(a == b != c and PROMPT + a + "\n" == want7, "seeded sampling = `wgml run --seed 7`")
        # chat: the template's prompt, as `wgml template` renders it, then greedy generation
        msgs = [{"role": "system", "content": "Tell a story."}, {"role": "user", "content": "A cat"}]
        rendered = cli("template", "-m", STORIES, stdin=json.dumps({"messages": msgs}).encode()).decode()
        check(m.render_chat(msgs) == rendered, "render_chat = `wgml template`: %r" % rendered)
        r = m.chat(msgs, max_tokens=30, temperature=0)
        content = r["choices"][0]["message"]["content"]
        check(r["object"] == "chat.completion" and r["choices"][0]["message"]["role"] == "assistant" and
              content == m.generate(rendered, max_tokens=30, temperature=0, add_bos=False) and
              r["usage"]["completion_tokens"] == 30 and r["choices"][0]["finish_reason"] == "length",
              "chat: %r %s" % (content[:40], r["usage"]))
        chunks = list(m.chat(msgs, max_tokens=30, temperature=0, stream=True))
        check(chunks[0]["choices"][0]["delta"]["role"] == "assistant" and
              "".join(c["choices"][0]["delta"].get("content", "") for c in chunks) == content and
              chunks[-1]["choices"][0]["finish_reason"] == "length", "chat stream: %d chunks" % len(chunks))
        toks = m.tokenize(PROMPT, add_bos=True)
        check(len(toks) == st["prompt_tokens"] and toks[0] == m.info.bos, "tokenize: %s" % toks)
        # a grammar constrains the text
        g = m.generate(PROMPT, max_tokens=20, temperature=0, grammar='root ::= " yes" | " no"')
        check(g in (" yes", " no"), "grammar: %r" % g)
        try:
            m.embed("x")
            check(False, "embed on an LLM raises")
        except wgml.Unsupported as e:
            check("embed" in e.message, "embed on an LLM: Unsupported: %s" % e)
    return text


def test_errors():
    print("errors")
    missing = os.path.join(tempfile.gettempdir(), "wgml-no-such-model.gguf")
    try:
        wgml.Model(missing, backend="cpu", threads=1)
        check(False, "a missing file raises")
    except wgml.FileError as e:
        p = subprocess.run([CLI, "info", missing], capture_output=True, text=True)
        check(isinstance(e, wgml.Error) and e.code == 2 and missing in e.message and e.message in p.stderr,
              "missing file: FileError with the library's message (as the CLI prints it): %s" % e)
    with tempfile.NamedTemporaryFile(suffix=".gguf") as f:
        f.write(b"GGUF" + struct.pack("<IQQ", 3, 1, 1) + b"\xff" * 20)  # a truncated GGUF v3
        f.flush()
        try:
            wgml.Model(f.name, backend="cpu", threads=1)
            check(False, "a corrupt file raises")
        except wgml.FormatError as e:
            check(e.code == 3 and f.name in e.message, "corrupt file: FormatError: %s" % e)
    with tempfile.NamedTemporaryFile(suffix=".gguf") as f:
        f.write(b"GGUF" + struct.pack("<IQQ", 9, 0, 0))
        f.flush()
        try:
            wgml.Model(f.name, backend="cpu", threads=1)
            check(False, "a GGUF of an unknown version raises")
        except wgml.Unsupported as e:
            check(e.code == 4 and "version 9" in e.message, "GGUF version 9: Unsupported: %s" % e)
    for bad, cls in [(dict(backend="tpu"), wgml.InvalidArgument)]:
        try:
            wgml.Model(STORIES, **bad)
            check(False, "%s raises" % bad)
        except cls as e:
            check(True, "%s: %s: %s" % (bad, cls.__name__, e))
    with tempfile.TemporaryDirectory() as cache:
        try:  # nothing listens on port 1: a connection error, as NetworkError (a ConnectionError too)
            wgml.Model("http://127.0.0.1:1/y.gguf", cache_dir=cache)
            check(False, "a URL with no server raises")
        except wgml.NetworkError as e:
            check(isinstance(e, ConnectionError) and "127.0.0.1:1" in e.message, "no server: NetworkError: %s" % e)
        try:
            wgml.fetch("hf://owner/repo:Q4_K_M", offline=True, cache_dir=cache)
            check(False, "offline, a model not in the cache raises")
        except wgml.NetworkError as e:
            check("offline" in e.message, "offline: NetworkError: %s" % e)
    m = wgml.Model(STORIES, backend="cpu", threads=1)
    try:
        m.generate("a\0b")
        check(False, "a NUL in the prompt raises")
    except wgml.InvalidArgument as e:
        check(isinstance(e, ValueError), "NUL in the prompt: InvalidArgument (a ValueError too): %s" % e)
    try:
        m.generate(PROMPT, max_tokens=10, grammar="root ::= (")
        check(False, "a bad grammar raises")
    except wgml.Error as e:
        check(type(e) is not wgml.Error and "line" in e.message, "bad grammar: %s: %s" % (type(e).__name__, e))
    m.close()
    m.close()
    try:
        m.generate(PROMPT)
        check(False, "a closed model raises")
    except wgml.InvalidArgument as e:
        check("closed" in str(e), "closed model: %s" % e)


def test_embed(d):
    print("embed, rerank")
    emb = os.path.join(d, "minilm.gguf")
    rr = os.path.join(d, "rerank.gguf")
    cli("synth", "--arch", "all-minilm-l6", "--type", "F32", "--layers", "1", "-o", emb)
    cli("synth", "--arch", "ms-marco-minilm-l6", "--type", "F32", "--layers", "1", "-o", rr)
    texts = ["hello world", "The quick brown fox jumps over the lazy dog.", "wgml"]
    want = np.array([[float(x) for x in line.split()] for line in
                     cli("embed", "-m", emb, "--backend", "cpu", "--threads", "1", *texts).decode().splitlines()], dtype=np.float32)
    with wgml.Model(emb, backend="cpu", threads=1) as m:
        v = m.embed(texts)
        check(v.dtype == np.float32 and v.shape == want.shape and np.abs(v - want).max() <= 1e-5,
              "embed = `wgml embed` within 1e-5: %s, max diff %.2g" % (v.shape, np.abs(v - want).max()))
        check(np.allclose(np.linalg.norm(v, axis=1), 1, atol=1e-5), "unit vectors")
        one = m.embed(texts[1])
        check(one.shape == (want.shape[1],) and np.abs(one - want[1]).max() <= 1e-5, "one text: a vector")
        raw = m.embed(texts, normalize=False)
        check(np.allclose(raw / np.linalg.norm(raw, axis=1, keepdims=True), v, atol=1e-5) and
              not np.allclose(np.linalg.norm(raw, axis=1), 1), "normalize=False")
        check(m.embed(texts, dimensions=64).shape == (3, 64), "dimensions=64")
        check(m.embed([]).shape == (0, want.shape[1]), "no texts: an empty array")
    q, docs = "what is a fox", ["a fox is an animal", "the weather today", "foxes and dogs"]
    want = [float(line.split("\t")[0]) for line in
            cli("rerank", "-m", rr, "--backend", "cpu", "--threads", "1", "-q", q, *docs).decode().splitlines()]
    with wgml.Model(rr, backend="cpu", threads=1) as m:
        s = m.rerank(q, docs)
        check(s.dtype == np.float32 and s.shape == (3,) and np.allclose(s, want, atol=1e-5),
              "rerank = `wgml rerank`: %s vs %s" % (s, want))
    return emb


def test_speak(d):
    print("speak")
    kdir = os.path.join(SHARED, "kokoro")
    if not os.path.exists(os.path.join(kdir, "kokoro-tiny.pth")):
        check(not REQUIRED, "the shared Kokoro checkpoint is there")
        return
    model = os.path.join(d, "kokoro.gguf")
    cli("convert", "kokoro", os.path.join(kdir, "kokoro-tiny.pth"), "--config",
        os.path.join(kdir, "config-kokoro-tiny.json"), "--voices", os.path.join(kdir, "voices"), "-o", model)
    ph, voice = "həlˈoʊ wˈɜːld. hˌaʊ ɑːɹ juː?", "af_heart:0.6,am_adam:0.4"
    wav, words = os.path.join(d, "k.wav"), os.path.join(d, "w.tsv")
    cli("speak", "-m", model, "--backend", "cpu", "--threads", "1", "--phonemes", ph, "-v", voice, "--seed", "5",
        "-o", wav, "--wav-format", "f32", "--words", words)
    data = open(wav, "rb").read()
    want = np.frombuffer(data[data.index(b"data") + 8:], dtype="<f4")
    with wgml.Model(model, backend="cpu", threads=1) as m:
        check(m.voices == ["af_heart", "am_adam", "bf_emma"] and m.tasks == ("speech",), "voices: %s" % m.voices)
        seen = []
        audio, rate, ws = m.speak(ph, voice=voice, phonemes=True, seed=5,
                                  on_chunk=lambda a, info: seen.append((len(a), info["index"])))
        check(audio.dtype == np.float32 and rate == 24000 and audio.shape == want.shape and
              np.array_equal(audio, want), "speak = `wgml speak --wav-format f32`: %d samples" % len(audio))
        check(len(seen) == 2 and sum(n for n, _ in seen) == len(audio), "on_chunk: %s" % seen)
        wl = [line.split("\t") for line in open(words, encoding="utf-8").read().splitlines()]
        check([w["word"] for w in ws] == [x[2] for x in wl] and
              all(abs(w["start"] - float(x[0])) < 6e-4 and abs(w["end"] - float(x[1])) < 6e-4 for w, x in zip(ws, wl)),
              "words and times = `--words`: %s" % [(w["word"], w["start"]) for w in ws])
        try:
            m.speak(ph, voice="nobody", phonemes=True)
            check(False, "an unknown voice raises")
        except wgml.Error as e:
            check("nobody" in e.message, "unknown voice: %s: %s" % (type(e).__name__, e))
    return model, ph, voice, audio


def test_remote(d, greedy, emb, speech):
    """Models by URL and Hugging Face name from the test tree's HTTP server (tests/net): the
    same text, vectors and audio as from the local files."""
    print("models by URL (tests/net/http_server.py)")
    sys.path.insert(0, os.path.join(HERE, "net"))
    from http_server import Server
    root = tempfile.mkdtemp(dir=d)
    os.symlink(d, os.path.join(root, "files"))
    os.makedirs(os.path.join(root, "hf", "wgml", "stories-GGUF"))
    shutil.copy(STORIES, os.path.join(root, "hf", "wgml", "stories-GGUF", "stories260K-Q8_0.gguf"))
    srv = Server(root)
    cache = os.path.join(d, "cache")
    old = os.environ.get("HF_ENDPOINT")
    os.environ["HF_ENDPOINT"] = srv.url
    try:
        check(wgml.is_remote(srv.url + "/files/x.gguf") and wgml.is_remote("wgml/stories-GGUF:Q8_0") and
              not wgml.is_remote(STORIES), "is_remote")
        stages = []
        path = wgml.fetch("wgml/stories-GGUF:Q8_0", cache_dir=cache, progress=lambda s, a, b: stages.append((s, a, b)))
        check(path.endswith("/stories260K-Q8_0.gguf") and os.path.getsize(path) == os.path.getsize(STORIES) and
              stages and stages[-1][0] == "verify" and any(s == "download" and a == b > 0 for s, a, b in stages),
              "fetch owner/repo:TAG, with progress: %s, %s" % (path, sorted(set(s for s, _, _ in stages))))
        with wgml.Model("hf://wgml/stories-GGUF:Q8_0", backend="cpu", threads=1, cache_dir=cache) as m:
            text = m.generate(PROMPT, max_tokens=60, temperature=0)
            check(text == greedy, "generate from hf://wgml/stories-GGUF:Q8_0: %r" % text[:40])
        with wgml.Model(srv.url + "/files/" + os.path.basename(emb), backend="cpu", threads=1, cache_dir=cache) as m, \
                wgml.Model(emb, backend="cpu", threads=1) as local:
            texts = ["hello world", "models by URL"]
            check(np.array_equal(m.embed(texts), local.embed(texts)), "embed from a URL = from the file")
        if speech:
            model, ph, voice, audio = speech
            with wgml.Model(srv.url + "/files/" + os.path.basename(model), backend="cpu", threads=1,
                            cache_dir=cache) as m:
                a, rate, _ = m.speak(ph, voice=voice, phonemes=True, seed=5)
                check(rate == 24000 and np.array_equal(a, audio), "speak from a URL = from the file: %d samples" % len(a))
        try:
            wgml.Model(srv.url + "/files/no-such.gguf", cache_dir=cache)
            check(False, "a 404 raises")
        except wgml.NetworkError as e:
            check("404" in e.message, "a 404: NetworkError: %s" % e)
        n = len(srv.log())
        with wgml.Model("wgml/stories-GGUF:Q8_0", backend="cpu", threads=1, cache_dir=cache, offline=True) as m:
            check(m.generate(PROMPT, max_tokens=60, temperature=0) == greedy and len(srv.log()) == n,
                  "offline=True: from the cache, no request")
    finally:
        srv.close()
        if old is None:
            os.environ.pop("HF_ENDPOINT", None)
        else:
            os.environ["HF_ENDPOINT"] = old


def test_transcribe(d):
    print("transcribe")
    model = os.path.join(d, "whisper.gguf")
    cli("synth", "--arch", "whisper-micro", "--type", "F32", "-o", model)
    rate = 16000
    t = np.arange(int(2.5 * rate)) / rate
    rng = np.random.default_rng(3)
    pcm = (0.3 * np.sin(2 * np.pi * 220 * t) * np.sin(2 * np.pi * 1.5 * t) + 0.05 * rng.standard_normal(len(t)))
    pcm16 = np.clip(pcm * 32767, -32768, 32767).astype("<i2")
    wav = os.path.join(d, "a.wav")
    with wave.open(wav, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(pcm16.tobytes())
    # random weights: --no-fallback and few tokens (the fallback ladder would retry each window 6 times)
    want = json.loads(cli("transcribe", "-m", model, "--backend", "cpu", "--threads", "1", "-f", "json", "-l", "en", "--no-fallback",
                          "--max-tokens", "40", wav))
    with wgml.Model(model, backend="cpu", threads=1) as m:
        segs = []
        r = m.transcribe(pcm16, rate, language="en", fallback=False, max_tokens=40, on_segment=segs.append)
        check(r["text"].strip() == want["text"].strip() and r["language"] == "en" and len(segs) == len(r["segments"]) and r["duration"] > 2.4,
              "transcribe = `wgml transcribe -f json`: %r (%d segments)" % (r["text"][:40], len(segs)))
        r2 = m.transcribe(pcm16.astype(np.float32) / 32768.0, rate, language="en", fallback=False, max_tokens=40)
        check(r2["text"] == r["text"], "float32 audio = int16 audio")
        try:
            m.transcribe(np.zeros((2, 100), np.float32))
            check(False, "stereo audio raises")
        except wgml.InvalidArgument as e:
            check(True, "two channels: %s" % e)


def test_vision(d):
    print("embed_images, classify")
    clip, vit = os.path.join(d, "clip.gguf"), os.path.join(d, "vit.gguf")
    cli("synth", "--arch", "clip-vit-b32", "--type", "F16", "--layers", "1", "-o", clip)
    cli("synth", "--arch", "vit-base", "--type", "F16", "--layers", "1", "-o", vit)
    rng = np.random.default_rng(5)
    imgs = [rng.integers(0, 256, (240, 320, 3), dtype=np.uint8),
            np.repeat(np.repeat(rng.integers(0, 256, (9, 7, 3), dtype=np.uint8), 20, 0), 30, 1)]
    files = []
    for i, img in enumerate(imgs):
        files.append(os.path.join(d, "img%d.png" % i))
        png(files[-1], img)
    want = np.array([[float(x) for x in line.split()] for line in
                     cli("embed", "-m", clip, "--backend", "cpu", "--threads", "1", "--image", *files).decode().splitlines()],
                    dtype=np.float32)
    labels = ["a photo of a cat", "a photo of a dog", "noise"]
    with wgml.Model(clip, backend="cpu", threads=1) as m:
        check("embed_image" in m.tasks, "clip tasks: %s" % (m.tasks,))
        v = m.embed_images(imgs)
        check(v.shape == want.shape and np.abs(v - want).max() <= 1e-5,
              "embed_images = `wgml embed --image` within 1e-5: %s, max diff %.2g" % (v.shape, np.abs(v - want).max()))
        # a view with a row stride (a crop) is an image too
        big = np.zeros((260, 340, 3), np.uint8)
        big[10:250, 10:330] = imgs[0]
        check(np.abs(m.embed_images(big[10:250, 10:330]) - want[0]).max() <= 1e-5, "a cropped view")
        got = m.classify(imgs, labels=labels, top=None)
        js = json.loads(cli("classify", "-m", clip, "--backend", "cpu", "--threads", "1", "--json", "--top", "3", "--image", *files,
                            "--labels", *labels))
        ok = all([(x["label"], round(x["score"], 5)) for x in js["data"][i]["labels"]] ==
                 [(lab, round(p, 5)) for lab, p in got[i]] for i in range(2))
        check(ok, "zero-shot classify = `wgml classify --labels`: %s" % got[0])
        check(abs(sum(p for _, p in got[0]) - 1) < 1e-5, "CLIP: a softmax over the labels")
    with wgml.Model(vit, backend="cpu", threads=1) as m:
        check("classify" in m.tasks and len(m.labels) > 0, "vit: %s, %d labels" % (m.tasks, len(m.labels)))
        got = m.classify(imgs[1], top=3)
        js = json.loads(cli("classify", "-m", vit, "--backend", "cpu", "--threads", "1", "--json", "--top", "3", "--image", files[1]))
        check([(x["label"], round(x["score"], 5)) for x in js["data"][0]["labels"]] ==
              [(lab, round(p, 5)) for lab, p in got], "classify = `wgml classify`: %s" % got)
        p = m.classify(imgs, probs=True)
        check(p.shape == (2, len(m.labels)) and np.allclose(p.sum(1), 1, atol=1e-4), "probs: %s" % (p.shape,))
        try:
            m.embed_images([np.zeros((4, 4), np.uint8)])
            check(False, "a grey image raises")
        except wgml.InvalidArgument as e:
            check(True, "H x W image: %s" % e)


def test_threads(emb, greedy):
    print("threads")
    want_v = None
    with wgml.Model(emb, backend="cpu", threads=1) as e:
        want_v = e.embed(["a text to embed", "another"])
    results, errors = {}, []
    spans = {}

    def gen():
        try:
            with wgml.Model(STORIES, backend="cpu", threads=1) as m:
                t0 = time.monotonic()
                out = [m.generate(PROMPT, max_tokens=60, temperature=0) for _ in range(30)]
                spans["gen"] = (t0, time.monotonic())
                results["gen"] = out
        except BaseException as ex:
            errors.append(ex)

    def emb_():
        try:
            with wgml.Model(emb, backend="cpu", threads=1) as m:
                t0 = time.monotonic()
                out = [m.embed(["a text to embed", "another"]) for _ in range(30)]
                spans["emb"] = (t0, time.monotonic())
                results["emb"] = out
        except BaseException as ex:
            errors.append(ex)

    ts = [threading.Thread(target=gen), threading.Thread(target=emb_)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(120)
    check(not errors and not any(t.is_alive() for t in ts), "two threads, two models: both finished %s" % errors)
    check(all(x == greedy for x in results.get("gen", [None])), "thread 1: 30 greedy texts, all correct")
    check(all(np.abs(x - want_v).max() <= 1e-5 for x in results.get("emb", [want_v + 1])),
          "thread 2: 30 embeddings, all correct")
    # one model from two threads: its lock makes them take turns
    with wgml.Model(STORIES, backend="cpu", threads=1) as m:
        outs, errs = [], []

        def use():
            try:
                for _ in range(10):
                    outs.append(m.generate(PROMPT, max_tokens=60, temperature=0))
                    outs.append("".join(m.generate(PROMPT, max_tokens=60, temperature=0, stream=True)))
            except BaseException as ex:
                errs.append(ex)
        ts = [threading.Thread(target=use) for _ in range(2)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(120)
        check(not errs and len(outs) == 40 and all(o == greedy for o in outs),
              "one model, two threads: 40 results, all correct %s" % errs)


def test_pip(greedy):
    """`pip install ./python` offline (a copy of python/, so that the build leaves nothing in the tree),
    into a target folder; the installed package runs."""
    print("pip install")
    import shutil
    if subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True).returncode != 0:
        check(not REQUIRED, "pip is there (Debian: python3-pip; scripts/setup.sh installs it)")
        return
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "python")
        shutil.copytree(os.path.join(ROOT, "python"), src,
                        ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__", "libwgml.so*"))
        target = os.path.join(d, "site")
        p = subprocess.run([sys.executable, "-m", "pip", "install", "--no-index", "--no-deps", "--no-cache-dir",
                            "--disable-pip-version-check", "--target", target, src], capture_output=True, text=True,
                           timeout=120)
        check(p.returncode == 0 and os.path.exists(os.path.join(target, "wgml", "__init__.py")),
              "pip install --no-index ./python: exit %d %s" % (p.returncode, p.stderr.strip()[-300:]))
        code = ("import sys; sys.path.insert(0, sys.argv[1]); import wgml; "
                "m = wgml.Model(sys.argv[2], backend='cpu', threads=1); "
                "print(wgml.__file__); print(m.generate('Once upon a time', max_tokens=60, temperature=0), end='')")
        r = subprocess.run([sys.executable, "-c", code, target, STORIES], capture_output=True, text=True, timeout=60)
        check(r.returncode == 0 and r.stdout.startswith(target) and r.stdout.split("\n", 1)[1] == greedy,
              "the installed package generates the greedy text %s" % r.stderr.strip()[-300:])


CHILD = r"""
import sys, time
sys.path.insert(0, sys.argv[1])
import wgml
m = wgml.Model(sys.argv[2], backend="cpu", threads=1, n_ctx=2048)
greedy = sys.argv[3]
mode = sys.argv[4]
n = 0
try:
    if mode == "stream":
        for piece in m.generate("Once upon a time", max_tokens=None, ignore_eos=True, temperature=0.8, seed=1,
                                stream=True):
            n += 1
            if n == 5:
                print("started", flush=True)
            time.sleep(0.005)  # a slow reader: the generation waits for it
        print("finished without an interrupt", flush=True)
        sys.exit(3)
    else:
        print("started", flush=True)
        while True:
            m.generate("Once upon a time", max_tokens=None, ignore_eos=True, temperature=0.8)
            n += 1
except KeyboardInterrupt:
    print("interrupted after %d" % n, flush=True)
ok = m.generate("Once upon a time", max_tokens=60, temperature=0) == greedy
print("usable" if ok else "wrong text after the interrupt", flush=True)
m.close()
sys.exit(0 if ok else 4)
"""


def test_interrupt(greedy):
    print("Ctrl-C")
    for mode in ("stream", "plain"):
        p = subprocess.Popen([sys.executable, "-c", CHILD, os.path.join(ROOT, "python"), STORIES, greedy, mode],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            line = p.stdout.readline()
            time.sleep(0.3)
            p.send_signal(signal.SIGINT)
            out, err = p.communicate(timeout=30)
            rc = p.returncode
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
            rc = "hung (killed)"
        check(line == "started\n" and rc == 0 and "interrupted" in out and "usable" in out and
              "Traceback" not in err and "Exception ignored" not in err,
              "SIGINT during a %s generation: exit %s, %r %r" % (mode, rc, (line + out).strip(), err.strip()[-300:]))


def main():
    t0 = time.monotonic()
    print("test_python: %s, wgml %s" % (wgml.library_path(), wgml.version()))
    def timed(fn, *args):
        t = time.monotonic()
        r = fn(*args)
        print("  (%.1f s)" % (time.monotonic() - t))
        return r
    timed(test_header)
    greedy = timed(test_generate)
    timed(test_errors)
    with tempfile.TemporaryDirectory() as d:
        emb = timed(test_embed, d)
        speech = timed(test_speak, d)
        timed(test_remote, d, greedy, emb, speech)
        timed(test_transcribe, d)
        timed(test_vision, d)
        timed(test_threads, emb, greedy)
    timed(test_interrupt, greedy)
    timed(test_pip, greedy)
    print("test_python: %s in %.1f s" % ("FAILED: %d checks" % len(failures) if failures else "passed",
                                         time.monotonic() - t0))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
