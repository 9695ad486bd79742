"""wgml's image embeddings and classifications against the float64 reference (clip_ref.py).

    python3 test_clip_reference.py [--devices cpu,llvmpipe,swiftshader] [--models "LABEL,..."] WGML_BINARY

Writes random-weight vision towers with `wgml synth --layers 2` into a
temporary folder (clip-vit-b32 F32 and Q8_0, siglip-base F16, vit-base F32
with its 1000-label head), draws PNG images of several sizes and aspect
ratios with Pillow (noise, gradients, edges; one grayscale, one with alpha),
and for every device (the CPU, llvmpipe: the shader-f16 tier, SwiftShader:
the f32 tier, where only a few images of clip-vit-b32 and siglip-base run)
compares:

- `wgml embed --image` of every image in one call (one step) with the
  reference's L2-normalized vectors: max |diff| <= 1e-4, cosine >= 0.99999;
  the reference preprocesses with Pillow as HF's image processors do;
- `--normalize none`: the raw vectors, the tolerance scaled by the largest norm;
- the first image embedded alone vs in the batch (1e-5);
- vit-base: `wgml classify --json --top 5`: the reference's five most probable
  labels, in order, with probabilities within 1e-4;
- the text towers (CLIP, SigLIP): `wgml embed --text` of texts of every kind
  (the ids from `wgml tokenize --bos`, whose tokenizers test_text_tokenizers.py
  checks) against the reference's (clip_ref.py TextReference), a text over the
  context refused and cut with --truncate, and `wgml classify --labels`
  (zero-shot: CLIP's softmax, SigLIP's sigmoids of wgml's own vectors, whose accuracy
  the other checks hold) within 1e-4;
- another size than trained (CPU and llvmpipe): a CLIP folder whose preprocessor makes
  288 x 288 and a SigLIP one 256 x 256, the positions interpolated bicubically as HF's
  interpolate_pos_encoding does, against the reference run at that size;
- Hugging Face folders (CPU and llvmpipe): each float model written as the folder
  transformers saves (hf_folder.py: CLIPModel sharded in two with an index and a text
  tower to skip, SiglipModel, ViTForImageClassification with id2label), then
  `wgml embed -m DIR --image` against the same reference, `wgml convert hf DIR` giving
  a GGUF whose vectors are the folder's (bit for bit), `-m DIR/model.safetensors`, and
  `wgml convert hf --type Q8_0` within cosine 0.999 of the reference.

Exit status: 0 pass, 1 fail, 77 skipped (no Python with numpy and PIL, and
WGML_REQUIRE_SHARED unset). A missing adapter is skipped with a message,
unless WGML_REQUIRE_ADAPTERS names it.
"""

import os
import subprocess
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
CANDIDATES = ["/usr/bin/python3", "/usr/local/bin/python3", "/usr/bin/python"]


def _need_numpy_pil():
    """numpy and PIL, or re-run under an interpreter that has them, or skip (77) / fail."""
    try:
        import numpy  # noqa: F401
        import PIL  # noqa: F401
        return
    except ImportError:
        pass
    if not os.environ.get("WGML_REFERENCE_REEXEC"):
        for py in CANDIDATES:
            if os.path.exists(py) and os.path.realpath(py) != os.path.realpath(sys.executable):
                ok = subprocess.run([py, "-c", "import numpy, PIL"], stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL).returncode == 0
                if ok:
                    env = dict(os.environ, WGML_REFERENCE_REEXEC="1")
                    os.execve(py, [py] + sys.argv, env)
    msg = "test_clip_reference: no Python interpreter with numpy and PIL (tried %s and %s)" % (
        sys.executable, ", ".join(CANDIDATES))
    if os.environ.get("WGML_REQUIRE_SHARED") or os.environ.get("CI"):
        print(msg + "; failing, WGML_REQUIRE_SHARED or CI is set", file=sys.stderr)
        sys.exit(1)
    print(msg + "; skipped", file=sys.stderr)
    sys.exit(77)


_need_numpy_pil()

import json  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
from PIL import Image  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from clip_ref import TextReference, VisionReference  # noqa: E402
from hf_folder import write_hf_folder  # noqa: E402

# Tolerances (do not loosen without a reason written here).
TOL_MAX_DIFF = 1e-4   # max |wgml - reference| over every value of every unit vector
TOL_COSINE = 0.99999  # min cosine(wgml, reference)
TOL_ALONE = 1e-5      # an image embedded alone vs. in a batch with others
TOL_PROB = 1e-4       # a classifier's probability

# Wider tolerances, (factor on the max |diff| tolerance, min cosine), for configurations
# whose label starts with a key, each with its reason. "clip-vit-b32 Q8_0 cpu": the fast
# CPU backend rounds the activations to 8 bits before the integer products of Q8_0
# weights (as llama.cpp's CPU does); the GPUs multiply Q8_0 weights in f32.
# Measured: max |diff| 1.2e-3, min cosine 0.99997 (the same 8-bit rounding of every
# product's input, patches included, that llama.cpp's CPU does).
TOL_OVERRIDES = {"clip-vit-b32 Q8_0 cpu": (20, 0.9999)}

# (label, synth arch, type, images on the CPU and llvmpipe, images on SwiftShader). The
# float64 reference runs at ~1.5 GFLOP/s (Debian's numpy on its reference BLAS): 1 s an
# image of clip-vit-b32 (50 rows), 3 s of the 197-row towers. SwiftShader runs the towers
# at ~0.3 GFLOP/s (6 s an image of clip-vit-b32, 25 s of the others): a few images there.
MODELS = [
    ("clip-vit-b32 F32", "clip-vit-b32", "F32", 6, 3),
    ("clip-vit-b32 Q8_0", "clip-vit-b32", "Q8_0", 6, 0),
    ("siglip-base F16", "siglip-base", "F16", 3, 1),
    ("vit-base F32", "vit-base", "F32", 3, 0),
]

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


def compare(label, got, want, tol=TOL_MAX_DIFF, cos_min=TOL_COSINE):
    """Compares lists of vectors; prints and records the measured error."""
    for key, (t, c) in TOL_OVERRIDES.items():
        if label.startswith(key):
            tol, cos_min = tol * t, min(cos_min, c)
    if len(got) != len(want):
        fail("%s: %d vectors, expected %d" % (label, len(got), len(want)))
        return
    max_diff, min_cos = 0.0, 1.0
    for i, (g, w) in enumerate(zip(got, want)):
        if g.shape != w.shape or not np.all(np.isfinite(g)):
            fail("%s: image %d: %d values (expected %d) or non-finite ones" % (label, i, g.size, w.size))
            return
        max_diff = max(max_diff, float(np.abs(g - w).max()))
        min_cos = min(min_cos, float(g @ w / (np.linalg.norm(g) * np.linalg.norm(w))))
    ok = max_diff <= tol and min_cos >= cos_min
    print("%s %-52s max |diff| %.3e  min cosine %.9f" % ("ok  " if ok else "FAIL", label, max_diff, min_cos),
          flush=True)
    if not ok:
        failures.append("%s: max |diff| %.3e (tolerance %.0e), min cosine %.9f (tolerance %.5f)" %
                        (label, max_diff, tol, min_cos, cos_min))


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


def make_images(d):
    """PNG files of several sizes and kinds: (path, PIL RGB image as the decoder gives it)."""
    rng = np.random.default_rng(20261129)
    out = []

    def save(name, img):
        p = os.path.join(d, name)
        img.save(p)
        out.append((p, Image.open(p).convert("RGB")))

    # a photo-like mix: smooth gradients, a sharp-edged square and noise, 320 x 240 (landscape)
    y, x = np.mgrid[0:240, 0:320]
    a = np.stack([x * 255 / 319, y * 255 / 239, (x + y) * 255 / 558], axis=2)
    a[60:140, 100:200] = [250, 30, 40]
    a = np.clip(a + rng.normal(0, 12, a.shape), 0, 255).astype(np.uint8)
    save("landscape.png", Image.fromarray(a, "RGB"))
    # portrait noise, 150 x 333 (upscaled along one side, downscaled along the other)
    save("portrait.png", Image.fromarray(rng.integers(0, 256, (333, 150, 3), dtype=np.uint8), "RGB"))
    # exactly the model's size, and a small one (upscaled)
    save("square.png", Image.fromarray(rng.integers(0, 256, (224, 224, 3), dtype=np.uint8), "RGB"))
    save("small.png", Image.fromarray(rng.integers(0, 256, (37, 53, 3), dtype=np.uint8), "RGB"))
    # grayscale and RGBA (the alpha dropped, as convert("RGB") does)
    save("gray.png", Image.fromarray((x[:200, :300] * 255 / 299).astype(np.uint8), "L"))
    rgba = np.concatenate([rng.integers(0, 256, (256, 192, 3)), rng.integers(0, 256, (256, 192, 1))], axis=2)
    save("alpha.png", Image.fromarray(rgba.astype(np.uint8), "RGBA"))
    return out


def check_hf_folder(label, model, tmp, paths, want, opts, cfg, dev, tref=None):
    """The model as a Hugging Face folder: -m DIR against the reference, and `wgml convert hf`;
    with a text tower its texts through the folder's own tokenizer files."""
    d = os.path.join(tmp, "hf-" + os.path.basename(model)[:-5])
    if not os.path.isdir(d):
        write_hf_folder(model, d, shards=2 if label.startswith("clip") else 1)
    out = run(["embed", "-m", d, "--image"] + paths + opts, cfg)
    if out is None:
        return
    folder = parse_vectors(out)
    compare(cfg + " HF folder", folder, want)
    if tref is not None:
        ids = [token_ids(d, t, cfg) for t in TEXTS]
        out = run(["embed", "-m", d, "--text"] + TEXTS + opts, cfg)
        if out is not None and all(i is not None for i in ids):
            with open(os.path.join(d, "tokenizer_config.json")) as f:  # the folder's eos / pad
                tc = json.load(f)
            eos_txt = tc.get("eos_token", "</s>")
            eos_txt = eos_txt["content"] if isinstance(eos_txt, dict) else eos_txt
            saved = (tref.eos, tref.pad)
            tref.eos = tref.pad = ids[0][-1]  # every text ends with the end token (and SigLIP pads with it)
            compare(cfg + " HF folder --text (%s)" % eos_txt, parse_vectors(out),
                    [unit(tref.embed_ids(i)) for i in ids])
            tref.eos, tref.pad = saved
    if dev != "cpu":
        return
    conv = os.path.join(tmp, "conv-" + os.path.basename(model))
    if run(["convert", "hf", d, "-o", conv], cfg) is None:
        return
    out = run(["embed", "-m", conv, "--image"] + paths + opts, cfg)
    if out is not None:
        same = parse_vectors(out) == [] or all(np.array_equal(a, b) for a, b in zip(parse_vectors(out), folder))
        print("%s %-52s" % ("ok  " if same else "FAIL", cfg + " convert hf = the folder, bit for bit"))
        if not same:
            failures.append("%s: convert hf's GGUF gives other vectors than the folder" % cfg)
    if not label.startswith("clip"):
        out = run(["embed", "-m", os.path.join(d, "model.safetensors"), "--image", paths[0]] + opts, cfg)
        if out is not None:
            compare(cfg + " -m DIR/model.safetensors", parse_vectors(out), want[:1])
    q8 = os.path.join(tmp, "q8-" + os.path.basename(model))
    if run(["convert", "hf", d, "--type", "Q8_0", "-o", q8], cfg) is not None:
        out = run(["embed", "-m", q8, "--image"] + paths + opts, cfg)
        if out is not None:
            compare(cfg + " convert hf --type Q8_0", parse_vectors(out), want, tol=1e-1, cos_min=0.999)


def unit(v):
    return v / max(np.linalg.norm(v), 1e-12)


# Another size than trained (HF's interpolate_pos_encoding): a folder whose preprocessor makes these.
OTHER_SIZE = {"clip": 288, "siglip": 256}


def check_other_size(model, ref, tmp, images, opts, cfg):
    """The model's folder with a preprocessor_config.json that makes another size: the positions
    bicubically interpolated, against the reference run at that size."""
    S2 = OTHER_SIZE[ref.arch]
    d = os.path.join(tmp, "hf%d-%s" % (S2, os.path.basename(model)[:-5]))
    if not os.path.isdir(d):
        write_hf_folder(model, d)
        with open(os.path.join(d, "preprocessor_config.json")) as f:
            prep = json.load(f)
        if ref.arch == "clip":
            prep["size"], prep["crop_size"] = S2, S2
        else:
            prep["size"] = {"height": S2, "width": S2}
        with open(os.path.join(d, "preprocessor_config.json"), "w") as f:
            json.dump(prep, f)
    info = run(["info", "-m", d], cfg) or ""
    if "interpolated" not in info:
        fail("%s: `wgml info` of a folder at %d pixels does not say the positions are interpolated" % (cfg, S2))
    S = ref.S
    ref.S = S2
    try:
        want = [unit(ref.embed(ref.preprocess(img))[0]) for _, img in images]
    finally:
        ref.S = S
    out = run(["embed", "-m", d, "--image"] + [p for p, _ in images] + opts, cfg)
    if out is not None:
        compare(cfg + " at %d x %d (interpolated positions)" % (S2, S2), parse_vectors(out), want)


# Texts for the text towers: cased, punctuated, contractions, digits, accents, CJK, emoji,
# whitespace runs, a special token written in the text (CLIP pools at the first EOS), an empty
# one; and one longer than CLIP's 77 tokens (an error without --truncate).
TEXTS = ["a photo of a cat", "A DOG, running on the beach!", "it's 3 o'clock: don't be late",
         "caf\u00e9 na\u00efve \u00fcber", "\u732b\u3068\u72ac \U0001F431", "  spaced   out\ttext  ",
         "before <|endoftext|> after", ""]
LONG_TEXT = " ".join("word%d" % i for i in range(120))


def token_ids(model, text, cfg):
    """The ids `wgml tokenize --bos` gives (its tokenizers are tested against their own reference)."""
    out = run(["tokenize", "-m", model, "--bos", text], cfg + " tokenize")
    return None if out is None else [int(t) for t in out.split()]


def check_text_tower(model, tref, paths, img_vecs, opts, cfg, light):
    """`wgml embed --text` and `wgml classify --labels` (zero-shot) against the text reference;
    img_vecs: wgml's unit vectors of the images at paths. light (SwiftShader, ~0.3 GFLOP/s):
    three texts, no truncation, one image."""
    texts = TEXTS[:3] if light else TEXTS
    ids = [token_ids(model, t, cfg) for t in texts]
    if any(i is None for i in ids):
        return
    want = [tref.embed_ids(i) for i in ids]
    out = run(["embed", "-m", model, "--text"] + texts + opts, cfg)
    got_text = parse_vectors(out) if out is not None else None
    if out is not None:
        compare(cfg + " embed --text", got_text, [unit(w) for w in want])
    if not light:
        # too long: an error naming the context, then --truncate keeps the first tokens and the end token
        p = subprocess.run([WGML, "embed", "-m", model, "--text", LONG_TEXT] + opts, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE)
        if p.returncode == 0 or b"context" not in p.stderr:
            fail("%s: a text of %d words: exit %d, %r (expected an error naming the context)" %
                 (cfg, 120, p.returncode, p.stderr[-300:]))
        long_ids = token_ids(model, LONG_TEXT, cfg)
        out = run(["embed", "-m", model, "--truncate", "--text", LONG_TEXT] + opts, cfg)
        if out is not None and long_ids is not None:
            cut = long_ids[:tref.ctx - 1] + long_ids[-1:]
            compare(cfg + " embed --text --truncate", parse_vectors(out), [unit(tref.embed_ids(cut))])
    # zero-shot: the scores of wgml's own vectors (their accuracy is checked above), so that the
    # check holds the scoring to 1e-4 whatever the weights' type (the logit scale, 100, turns a
    # Q8_0 model's 3e-5 in the cosines into 1e-2 in the probabilities)
    labels = texts[:4]
    k = 1 if light else min(2, len(paths))
    out = run(["classify", "-m", model, "--json", "--top", str(len(labels)), "--image"] + paths[:k] +
              ["--labels"] + labels + opts, cfg)
    if out is None or img_vecs is None or got_text is None:
        return
    probs = tref.zero_shot(img_vecs[:k], got_text[:len(labels)])
    worst = 0.0
    for i, e in enumerate(json.loads(out)["data"]):
        for g in e["labels"]:
            if g["label"] != labels[g["index"]]:
                fail("%s zero-shot: label %d named %r" % (cfg, g["index"], g["label"]))
            worst = max(worst, abs(g["score"] - probs[i][g["index"]]))
        if len(e["labels"]) != len(labels):
            fail("%s zero-shot: image %d has %d labels, expected %d" % (cfg, i, len(e["labels"]), len(labels)))
    ok = worst <= TOL_PROB
    print("%s %-52s max |prob diff| %.3e" % ("ok  " if ok else "FAIL", cfg + " zero-shot classify", worst))
    if not ok:
        failures.append("%s zero-shot: probability off by %.3e" % (cfg, worst))


def main():
    global WGML
    args = sys.argv[1:]
    only, models = None, None
    while len(args) >= 2 and args[0] in ("--devices", "--models"):
        if args[0] == "--devices":
            only = args[1].split(",")
        else:
            models = args[1].split(",")
        args = args[2:]
    if not args:
        print(__doc__)
        return 2
    WGML = os.path.abspath(args[0])
    tmp = tempfile.mkdtemp(prefix="wgml-clip-ref-")
    t0 = time.time()
    try:
        all_images = make_images(tmp)
        devs = available_devices(only)
        for label, arch, typ, n_img, n_swift in MODELS:
            if models is not None and label not in models:
                continue
            n = max(n_swift if dev == "swiftshader" else n_img for dev, _ in devs) if devs else 0
            if n == 0:
                continue
            # the landscape photo first, then the kinds (alpha, gray) before the rest
            images = [all_images[i] for i in (0, 5, 4, 1, 2, 3)][:n]
            model = os.path.join(tmp, "%s-%s.gguf" % (arch, typ))
            if run(["synth", "--arch", arch, "--type", typ, "--layers", "2", "-o", model], "synth") is None:
                continue
            ref = VisionReference(model)
            tref = TextReference(model) if ref.g.get(ref.arch + ".text.block_count") else None
            raw, logits = [], []
            for _, img in images:
                e, lg = ref.embed(ref.preprocess(img))
                raw.append(e)
                logits.append(lg)
            for dev, opts in devs:
                cfg = "%s %s" % (label, dev)
                k = n_swift if dev == "swiftshader" else n_img
                if k == 0:
                    continue
                paths = [p for p, _ in images[:k]]
                want = [unit(e) for e in raw[:k]]
                out = run(["embed", "-m", model, "--image"] + paths + opts, cfg)
                img_vecs = parse_vectors(out) if out is not None else None
                if out is not None:
                    compare(cfg + " embed", img_vecs, want)
                if dev == "cpu" or (dev == "llvmpipe" and label.startswith("clip-vit-b32 F32")):
                    out = run(["embed", "-m", model, "--image", "--normalize", "none"] + paths + opts, cfg)
                    if out is not None:
                        scale = max(float(np.linalg.norm(r)) for r in raw[:k])  # the unit vectors' tolerance
                        compare(cfg + " --normalize none", parse_vectors(out), raw[:k],
                                tol=TOL_MAX_DIFF * max(1, scale))
                    out = run(["embed", "-m", model, "--image", paths[0], "--json"] + opts, cfg)
                    if out is not None and img_vecs is not None:  # vs the batch's vector above
                        j = json.loads(out)
                        alone = np.array(j["data"][0]["embedding"], dtype=np.float64)
                        d = float(np.abs(alone - img_vecs[0]).max())
                        ok = d <= TOL_ALONE and j["object"] == "list" and len(j["data"]) == 1
                        print("%s %-52s max |diff| %.3e" % ("ok  " if ok else "FAIL", cfg + " alone vs batch", d))
                        if not ok:
                            failures.append("%s alone vs batch: %.3e (or a bad JSON shape)" % (cfg, d))
                # SwiftShader (~0.3 GFLOP/s): CLIP's text tower lightly; SigLIP's (64 padded rows a text)
                # is llvmpipe's and the CPU's
                if tref is not None and not (dev == "swiftshader" and ref.arch == "siglip"):
                    check_text_tower(model, tref, paths, img_vecs, opts, cfg, dev == "swiftshader")
                if typ != "Q8_0" and dev in ("cpu", "llvmpipe"):
                    # the folder's texts through its own tokenizer files: on the CPU (the tokenizer is the
                    # host's; the towers' devices are checked above)
                    check_hf_folder(label, model, tmp, paths, want, opts, cfg, dev, tref if dev == "cpu" else None)
                    if ref.arch in OTHER_SIZE:
                        check_other_size(model, ref, tmp, images[:1], opts, cfg)
                if logits[0] is not None and dev != "swiftshader":
                    out = run(["classify", "-m", model, "--image", "--json", "--top", "5"] + paths + opts, cfg)
                    if out is None:
                        continue
                    j = json.loads(out)
                    worst = 0.0
                    for i, lg in enumerate(logits[:k]):
                        p = np.exp(lg - lg.max())
                        p /= p.sum()
                        top = list(np.argsort(-p, kind="stable")[:5])
                        got = j["data"][i]["labels"]
                        if [g["index"] for g in got] != top or [g["label"] for g in got] != \
                                [ref.labels[k] for k in top]:
                            # equal probabilities may come in either order: compare as sets then
                            if sorted(g["index"] for g in got) != sorted(top):
                                fail("%s classify: image %d: labels %s, expected %s" %
                                     (cfg, i, [g["index"] for g in got], top))
                        for g in got:
                            worst = max(worst, abs(g["score"] - p[g["index"]]))
                    ok = worst <= TOL_PROB
                    print("%s %-52s max |prob diff| %.3e" % ("ok  " if ok else "FAIL", cfg + " classify", worst))
                    if not ok:
                        failures.append("%s classify: probability off by %.3e" % (cfg, worst))
        # a file that is not an image: a clear error, non-zero exit
        bad = os.path.join(tmp, "bad.png")
        with open(bad, "wb") as f:
            f.write(b"\x89PNG\r\n\x1a\n" + b"\0" * 20)
        p = subprocess.run([WGML, "embed", "-m", os.path.join(tmp, "clip-vit-b32-F32.gguf"), "--image", bad,
                            "--backend", "cpu"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        msg = p.stderr.decode(errors="replace")
        if p.returncode == 0 or "bad.png" not in msg:
            fail("a truncated PNG: exit %d, message %r (expected a failure naming the file)" % (p.returncode, msg))
        else:
            print("ok   a truncated PNG is refused: %s" % msg.strip().splitlines()[-1])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("test_clip_reference: %d failure(s) in %.0f s" % (len(failures), time.time() - t0))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
