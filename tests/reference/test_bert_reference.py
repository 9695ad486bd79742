"""wgml's embeddings and reranking scores against the float64 reference (bert_ref.py).

    python3 test_bert_reference.py [--devices cpu,llvmpipe,swiftshader] WGML_BINARY [BUILD_DIR]

Writes small random-weight models with `wgml synth --layers 2` into a temporary
folder (bge-small F16 and Q8_0, all-minilm-l6 F32, nomic-embed F16 and
ms-marco-minilm-l6 F16), embeds a handful of texts with `wgml embed` on the CPU
and on the two software WebGPU adapters (llvmpipe: the shader-f16 tier,
SwiftShader: the f32 tier), and compares every vector with the reference's, on
the token ids that `wgml tokenize --bos` gives; the same for `wgml rerank`'s
scores. Prints the measured error of every configuration, passing or not.

Exit status: 0 pass, 1 fail, 77 skipped (no Python with numpy, and
WGML_REQUIRE_SHARED unset). An adapter that is missing is skipped with a
message, unless WGML_REQUIRE_ADAPTERS names it.
"""

import os
import subprocess
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
CANDIDATES = ["/usr/bin/python3", "/usr/local/bin/python3", "/usr/bin/python"]


def _need_numpy():
    """numpy, or re-run under an interpreter that has it, or skip (77) / fail."""
    try:
        import numpy  # noqa: F401
        return
    except ImportError:
        pass
    if not os.environ.get("WGML_REFERENCE_REEXEC"):
        for py in CANDIDATES:
            if os.path.exists(py) and os.path.realpath(py) != os.path.realpath(sys.executable):
                ok = subprocess.run([py, "-c", "import numpy"], stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL).returncode == 0
                if ok:
                    env = dict(os.environ, WGML_REFERENCE_REEXEC="1")
                    os.execve(py, [py] + sys.argv, env)
    msg = "test_bert_reference: no Python interpreter with numpy (tried %s and %s)" % (
        sys.executable, ", ".join(CANDIDATES))
    if os.environ.get("WGML_REQUIRE_SHARED"):
        print(msg + "; failing, WGML_REQUIRE_SHARED is set", file=sys.stderr)
        sys.exit(1)
    print(msg + "; skipped", file=sys.stderr)
    sys.exit(77)


_need_numpy()

import json  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bert_ref import BertReference  # noqa: E402

# Tolerances (the brief of this test: do not loosen without a reason written here).
TOL_MAX_DIFF = 1e-4       # max |wgml - reference| over every value of every vector
TOL_COSINE = 0.99999      # min cosine(wgml, reference)
TOL_ALONE = 1e-5          # a text embedded alone vs. in a batch with others
TOL_RERANK_REL = 1e-3     # |score - reference| <= 1e-3 * max(1, |reference|)

# Wider tolerances, (factor on the max |diff| tolerance, min cosine), for configurations
# whose label starts with a key, each with its reason. "bge-small Q8_0 cpu": the fast CPU
# backend rounds the activations to Q8_0 (8 bits per value, 32-value blocks) before the
# integer dot products of Q8_0 weights, as llama.cpp's CPU does; measured max |diff|
# 4.0e-4, min cosine 0.9999972, and a float64 reference with Q8_0-rounded activations is
# as far from the exact one (3.5e-4). The 1e-4 bound holds for every float file on every
# device and for Q8_0 on both GPUs; the cosine bound holds everywhere.
TOL_OVERRIDES = {"bge-small Q8_0 cpu": (5, 0.99999)}

TEXTS = [
    "hello",
    "The quick brown fox jumps over the lazy dog.",
    "Café au lait, s'il vous plaît! Où est la crème brûlée?",
    "WHAT IS THE CAPITAL OF FRANCE? Paris, of course (population ~2.1 million; 2023).",
    "GPU kernels -- matmul, softmax & layer-norm: v2.0 runs 3.14x faster [citation needed]...",
    ("Embeddings map a piece of text to a vector of numbers, so that texts with similar "
     "meanings end up close to each other. A search engine can then embed every document "
     "once, store the vectors, and answer a query by embedding it and looking for the "
     "nearest stored vectors, usually by cosine similarity. Rerankers work differently: "
     "they read the query and one document together, through the whole network, and "
     "output a single relevance score. That is slower, because nothing can be computed "
     "ahead of time, but it is usually more accurate, which is why systems often retrieve "
     "a hundred candidates with embeddings and rerank only those."),
]

N_SHORT = 3  # the texts SwiftShader gets for all but the first model (40 tokens)

QUERY = "What do rerankers output?"
DOCS = [
    "A reranker reads the query and a document together and outputs one relevance score.",
    "Paris is the capital of France.",
    "Embeddings",
    "The weather tomorrow: sunny, 24 degrees, light wind from the south-west.",
]

# (label, synth arch, type); the first embedder is also the one for the option checks
EMBEDDERS = [
    ("bge-small F16", "bge-small", "F16"),
    ("bge-small Q8_0", "bge-small", "Q8_0"),
    ("all-minilm-l6 F32", "all-minilm-l6", "F32"),
    ("nomic-embed F16", "nomic-embed", "F16"),
]
RERANKER = ("ms-marco-minilm-l6 F16", "ms-marco-minilm-l6", "F16")

DEVICES = [  # (name, wgml options, adapter name in `wgml devices`)
    ("cpu", ["--backend", "cpu"], None),
    ("llvmpipe", ["--adapter", "llvmpipe"], "llvmpipe"),
    ("swiftshader", ["--adapter", "swiftshader"], "swiftshader"),
]

WGML = None
failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL " + msg, flush=True)


def run(args, what=None):
    """Runs wgml with args; stdout, or None (and a failure) on a non-zero exit."""
    p = subprocess.run([WGML] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if p.returncode != 0:
        fail("%s: wgml %s exited %d:\n%s" % (what or args[0], " ".join(args), p.returncode,
                                              p.stderr.decode(errors="replace")[-2000:]))
        return None
    return p.stdout.decode("utf-8")


def parse_vectors(out):
    return [np.array([float(t) for t in line.split()]) for line in out.splitlines() if line.strip()]


def compare(label, got, want, tol=TOL_MAX_DIFF, cos_min=TOL_COSINE, note=""):
    """Compares lists of vectors; prints and records the measured error."""
    for key, (t, c) in TOL_OVERRIDES.items():  # (factor, min cosine)
        if label.startswith(key):
            tol, cos_min = tol * t, min(cos_min, c)
    if len(got) != len(want):
        fail("%s: %d vectors, expected %d" % (label, len(got), len(want)))
        return
    max_diff, min_cos = 0.0, 1.0
    for i, (g, w) in enumerate(zip(got, want)):
        if g.shape != w.shape:
            fail("%s: text %d: %d values, expected %d" % (label, i, g.size, w.size))
            return
        if not np.all(np.isfinite(g)):
            fail("%s: text %d: non-finite values" % (label, i))
            return
        max_diff = max(max_diff, float(np.abs(g - w).max()))
        min_cos = min(min_cos, float(g @ w / (np.linalg.norm(g) * np.linalg.norm(w))))
    ok = max_diff <= tol and min_cos >= cos_min
    print("%s %-60s max |diff| %.3e  min cosine %.9f%s" % ("ok  " if ok else "FAIL", label, max_diff, min_cos,
                                                           "  " + note if note else ""), flush=True)
    if not ok:
        failures.append("%s: max |diff| %.3e (tolerance %.0e), min cosine %.9f (tolerance %.5f)" %
                        (label, max_diff, tol, min_cos, cos_min))


def tokenize(model, text):
    out = run(["tokenize", "-m", model, "--bos", text], "tokenize")
    return [int(t) for t in out.split()] if out is not None else None


def available_devices(only=None):
    out = run(["devices"], "devices") or ""
    required = os.environ.get("WGML_REQUIRE_ADAPTERS", "").lower()
    devs = []
    for name, opts, adapter in DEVICES:
        if only is not None and name not in only:
            continue
        if adapter is None or adapter in out.lower():
            devs.append((name, opts))
        elif adapter in required:
            fail("adapter %s is required (WGML_REQUIRE_ADAPTERS) but `wgml devices` does not list it" % adapter)
        else:
            print("skip %s: no such adapter in `wgml devices`" % name, flush=True)
    return devs


def check_vectors_json(cfg, out, want, n_tokens):
    """--json output: OpenAI's shape, usage = the token count; its vectors vs the reference."""
    try:
        j = json.loads(out)
        assert j["object"] == "list", "object %r" % j.get("object")
        assert [d["index"] for d in j["data"]] == list(range(len(want))), "indices"
        assert all(d["object"] == "embedding" for d in j["data"]), "data[].object"
        assert "model" in j, "no model"
        assert j["usage"]["prompt_tokens"] == n_tokens, \
            "usage.prompt_tokens %r, expected %d" % (j["usage"]["prompt_tokens"], n_tokens)
        assert j["usage"]["total_tokens"] == n_tokens, \
            "usage.total_tokens %r, expected %d" % (j["usage"]["total_tokens"], n_tokens)
        vj = [np.array(d["embedding"], dtype=np.float64) for d in j["data"]]
    except (ValueError, KeyError, TypeError, AssertionError) as e:
        fail("%s: %s: %s\n%s" % (cfg, type(e).__name__, e, out[:500]))
        return None
    compare(cfg, vj, want, note="usage %d tokens" % n_tokens)
    return vj


def check_embedder(label, path, devs, texts_file, short_file, first):
    """One embedding model on every device. `first`: the model that also gets the
    option checks and the full treatment on SwiftShader (see plan())."""
    ref = BertReference(path)
    ids = [tokenize(path, t) for t in TEXTS]
    if any(i is None for i in ids):
        return
    want = [ref.embed(i) for i in ids]
    for dev, opts in devs:
        cfg = "%s %s" % (label, dev)
        # SwiftShader runs these models at ~10 (bert) to ~40 (nomic-bert) tokens/s on
        # two cores: all the calls with all the texts only for the first model; the
        # others get one call, on the short texts.
        full = first or dev != "swiftshader"
        batch = None
        if full:
            out = run(["embed", "-m", path] + opts + ["-f", texts_file], cfg)
            if out is not None:
                batch = parse_vectors(out)
                compare(cfg, batch, want)

        # --json, and --batch (most tokens per step, whole texts packed) as small as the
        # longest text, so that the texts take several steps
        n_short = N_SHORT if dev == "swiftshader" else len(TEXTS)
        nb = str(max(len(i) for i in ids[:n_short]))
        args = ["embed", "-m", path] + opts + ["--json", "--batch", nb, "-f",
                                               short_file if n_short < len(TEXTS) else texts_file]
        what = cfg + " --json --batch " + nb + ("" if n_short == len(TEXTS) else " (%d texts)" % n_short)
        out = run(args, what)
        if out is not None:
            check_vectors_json(what, out, want[:n_short], sum(len(i) for i in ids[:n_short]))

        # texts alone give the same vectors as in the batch with the others
        if full and batch is not None and len(batch) == len(TEXTS):
            alone_idx = [0, 2]
            diff = 0.0
            for i in alone_idx:
                out = run(["embed", "-m", path] + opts + [TEXTS[i]], cfg + " alone")
                v = parse_vectors(out) if out else []
                diff = max(diff, float(np.abs(v[0] - batch[i]).max()) if len(v) == 1 else np.inf)
            ok = diff <= TOL_ALONE
            print("%s %-60s max |diff| %.3e" % ("ok  " if ok else "FAIL", cfg + " alone vs batch", diff), flush=True)
            if not ok:
                failures.append("%s: a text alone differs from the batch by %.3e (tolerance %.0e)" %
                                (cfg, diff, TOL_ALONE))

        # the options, on the short texts: every option in one of two calls
        if first:
            for extra, kw in [(["--pooling", "mean", "--normalize", "none"], dict(pooling=1, normalize="none")),
                              (["--pooling", "last", "--dimensions", "128"], dict(pooling=3, dimensions=128))]:
                w = [ref.embed(i, **kw) for i in ids[:N_SHORT]]
                out = run(["embed", "-m", path] + opts + extra + ["-f", short_file], cfg + " " + " ".join(extra))
                if out is None:
                    continue
                tol = TOL_MAX_DIFF
                if kw.get("normalize") == "none":  # values of O(1), not O(1/sqrt(E)): relative
                    tol *= max(1.0, max(float(np.abs(v).max()) for v in w))
                compare(cfg + " " + " ".join(extra), parse_vectors(out), w, tol=tol)


def check_reranker(label, path, devs, docs_file):
    ref = BertReference(path)
    q = tokenize(path, QUERY)
    docs = [tokenize(path, d) for d in DOCS]
    if q is None or any(d is None for d in docs):
        return
    want = [ref.rerank(q, d) for d in docs]
    print("     %-60s reference scores %s" % (label, " ".join("%.6f" % s for s in want)), flush=True)
    for dev, opts in devs:
        cfg = "%s %s" % (label, dev)
        out = run(["rerank", "-m", path] + opts + ["-q", QUERY, "-f", docs_file], cfg)
        if out is None:
            continue
        lines = [l for l in out.splitlines() if l.strip()]
        try:
            got = [float(l.split("\t", 1)[0]) for l in lines]
            docs_out = [l.split("\t", 1)[1] for l in lines]
        except (ValueError, IndexError):
            fail("%s: cannot parse the output:\n%s" % (cfg, out[:500]))
            continue
        if docs_out != DOCS:
            fail("%s: documents not in input order: %r" % (cfg, docs_out))
            continue
        err = max(abs(g - w) / max(1.0, abs(w)) for g, w in zip(got, want))
        ok = err <= TOL_RERANK_REL
        print("%s %-60s max |diff|/max(1,|score|) %.3e" % ("ok  " if ok else "FAIL", cfg, err), flush=True)
        if not ok:
            failures.append("%s: scores %s, reference %s" % (cfg, got, want))

        # --json: the same formatting code on every device, checked on the cheaper two
        out = None
        if dev != "swiftshader":
            out = run(["rerank", "-m", path] + opts + ["-q", QUERY, "-f", docs_file, "--json"], cfg + " --json")
        if out is not None:
            try:
                j = json.loads(out)
                assert j["object"] == "list", "object %r" % j.get("object")
                res = j["results"]
                assert sorted(r["index"] for r in res) == list(range(len(DOCS))), "indices"
                s = [r["relevance_score"] for r in res]
                assert s == sorted(s, reverse=True), "not sorted by score, descending"
                for r in res:
                    assert r["document"] == DOCS[r["index"]], "document of index %d" % r["index"]
                    assert abs(r["relevance_score"] - got[r["index"]]) <= 1e-6 * max(1, abs(got[r["index"]])), \
                        "score of index %d differs from the plain output" % r["index"]
                print("ok   %-60s" % (cfg + " --json"), flush=True)
            except (ValueError, KeyError, TypeError, AssertionError) as e:
                fail("%s --json: %s: %s\n%s" % (cfg, type(e).__name__, e, out[:500]))


def main(argv):
    global WGML
    args = argv[1:]
    only = None
    embedders = EMBEDDERS
    while len(args) >= 2 and args[0] in ("--devices", "--embedders"):
        if args[0] == "--devices":
            only = args[1].split(",")
        else:  # labels, e.g. "bge-small F16,nomic-embed F16" (the sanitizer build: fewer, slower runs)
            want = args[1].split(",")
            embedders = [e for e in EMBEDDERS if e[0] in want]
        args = args[2:]
    if not args:
        print(__doc__, file=sys.stderr)
        return 2
    WGML = os.path.abspath(args[0])
    t0 = time.time()
    # the reference checks itself first (its GGUF reader and forward pass, no wgml)
    p = subprocess.run([sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "selftest.py")],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if p.returncode != 0:
        print(p.stdout.decode(errors="replace"))
        fail("selftest.py: the reference does not pass its own checks")
        return 1
    print("ok   selftest.py (the reader and the reference, without wgml)", flush=True)
    tmp = tempfile.mkdtemp(prefix="wgml-bert-ref-")
    try:
        def write(name, lines):
            path = os.path.join(tmp, name)
            with open(path, "w", encoding="utf-8") as f:
                f.write("\n".join(lines) + "\n")
            return path
        texts_file = write("texts.txt", TEXTS)
        short_file = write("short.txt", TEXTS[:N_SHORT])
        docs_file = write("docs.txt", DOCS)
        devs = available_devices(only)
        print("python %s, numpy %s; devices: %s" % (sys.executable, np.__version__, ", ".join(d for d, _ in devs)),
              flush=True)

        def synth(arch, wtype):
            path = os.path.join(tmp, "%s-%s.gguf" % (arch, wtype))
            if run(["synth", "--arch", arch, "--type", wtype, "--layers", "2", "-o", path], "synth " + arch) is None:
                return None
            return path

        for k, (label, arch, wtype) in enumerate(embedders):
            path = synth(arch, wtype)
            if path:
                check_embedder(label, path, devs, texts_file, short_file, first=(k == 0))
        label, arch, wtype = RERANKER
        path = synth(arch, wtype)
        if path:
            check_reranker(label, path, devs, docs_file)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("%.1f s" % (time.time() - t0))
    if failures:
        print("\n%d failure(s):" % len(failures))
        for f in failures:
            print("  " + f.replace("\n", "\n    "))
        return 1
    print("all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
