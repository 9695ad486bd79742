#!/usr/bin/env python3
"""src/image (image_prep.h) against Pillow and Hugging Face's image processors.

    test_image_prep.py IMAGE_PREP_TOOL

1. The resampler: for images of noise, smooth gradients and sharp edges (a
   checkerboard, stripes, a disc: saturated pixels, where BICUBIC and LANCZOS
   overshoot and clip), of sizes from 1x1 and 2x3 through tall, wide and odd
   ones to 1000x750, resized up, down, on one axis only, to the same size and
   to 1x1 with each of PIL's six filters, the driver's uint8 result must equal
   PIL.Image.resize's bit for bit (some with padded rows: the stride is
   honoured).
2. The pipelines: the preprocessor_config.json of openai/clip-vit-base-patch32,
   google/siglip-base-patch16-224 and google/vit-base-patch16-224, and variants
   (a crop larger than the image: zero padding; no resize; no rescale; no
   normalize; other filters), on the same images, against HF's steps redone
   here in numpy from Pillow's resize (transformers' get_resize_output_image_size,
   center_crop, rescale, normalize, as their code reads; transformers itself is
   not needed). The brief allows one 8-bit step (1/255/std); what this test
   measures and requires is 0: the same float32 bits.
3. Sizes and errors: the output size for many input sizes against the
   formula, and the driver's errors for bad sizes and configs.

Exit status: 0 pass, 1 fail, 77 skipped (no Python with numpy and PIL, and
neither CI nor WGML_REQUIRE_SHARED set).
"""
import os
import subprocess
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
CANDIDATES = ["/usr/bin/python3", "/usr/local/bin/python3", "/usr/bin/python"]


def _need_modules():
    """numpy and PIL, or re-run under an interpreter that has them, or skip (77) / fail."""
    try:
        import numpy  # noqa: F401
        import PIL.Image  # noqa: F401
        return
    except ImportError:
        pass
    if not os.environ.get("WGML_IMAGE_PREP_REEXEC"):
        for py in CANDIDATES:
            if os.path.exists(py) and os.path.realpath(py) != os.path.realpath(sys.executable):
                ok = subprocess.run([py, "-c", "import numpy, PIL.Image"], stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL).returncode == 0
                if ok:
                    env = dict(os.environ, WGML_IMAGE_PREP_REEXEC="1")
                    os.execve(py, [py] + sys.argv, env)
    msg = "test_image_prep: no Python interpreter with numpy and PIL (tried %s and %s)" % (
        sys.executable, ", ".join(CANDIDATES))
    if os.environ.get("CI") or os.environ.get("WGML_REQUIRE_SHARED"):
        print(msg + "; failing, CI needs it (scripts/setup.sh installs python3-pil)", file=sys.stderr)
        sys.exit(1)
    print(msg + "; skipped", file=sys.stderr)
    sys.exit(77)


_need_modules()

import json  # noqa: E402
import math  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402

import numpy as np  # noqa: E402
import PIL  # noqa: E402
from PIL import Image  # noqa: E402

FILTERS = {0: "NEAREST", 1: "LANCZOS", 2: "BILINEAR", 3: "BICUBIC", 4: "BOX", 5: "HAMMING"}

# The hub files as published (openai's predates image_processor_type: a feature extractor
# with int sizes), then the form transformers writes today (save_pretrained).
CLIP_HUB = {
    "crop_size": 224,
    "do_center_crop": True,
    "do_normalize": True,
    "do_resize": True,
    "feature_extractor_type": "CLIPFeatureExtractor",
    "image_mean": [0.48145466, 0.4578275, 0.40821073],
    "image_std": [0.26862954, 0.26130258, 0.27577711],
    "resample": 3,
    "size": 224,
}
CLIP_SAVED = {
    "crop_size": {"height": 224, "width": 224},
    "do_center_crop": True,
    "do_convert_rgb": True,
    "do_normalize": True,
    "do_rescale": True,
    "do_resize": True,
    "feature_extractor_type": "CLIPFeatureExtractor",
    "image_mean": [0.48145466, 0.4578275, 0.40821073],
    "image_processor_type": "CLIPImageProcessor",
    "image_std": [0.26862954, 0.26130258, 0.27577711],
    "resample": 3,
    "rescale_factor": 0.00392156862745098,
    "size": {"shortest_edge": 224},
}
SIGLIP_HUB = {
    "do_normalize": True,
    "do_rescale": True,
    "do_resize": True,
    "image_mean": [0.5, 0.5, 0.5],
    "image_processor_type": "SiglipImageProcessor",
    "image_std": [0.5, 0.5, 0.5],
    "processor_class": "SiglipProcessor",
    "resample": 3,
    "rescale_factor": 0.00392156862745098,
    "size": {"height": 224, "width": 224},
}
VIT_HUB = {
    "do_normalize": True,
    "do_resize": True,
    "feature_extractor_type": "ViTFeatureExtractor",
    "image_mean": [0.5, 0.5, 0.5],
    "image_std": [0.5, 0.5, 0.5],
    "resample": 2,
    "size": 224,
}

OPENAI_CLIP_MEAN = [0.48145466, 0.4578275, 0.40821073]
OPENAI_CLIP_STD = [0.26862954, 0.26130258, 0.27577711]


def pipelines():
    """(name, config, fallback) for the driver's prep mode."""
    out = [("clip-hub", CLIP_HUB, "none"), ("clip-saved", CLIP_SAVED, "none"),
           ("siglip-hub", SIGLIP_HUB, "none"), ("vit-hub", VIT_HUB, "none")]
    # a crop larger than the resized image: transformers pads with zeros before rescaling
    out.append(("clip-crop-pad", dict(CLIP_SAVED, crop_size={"height": 300, "width": 250}), "none"))
    # no resize: the crop pads a small image, cuts a large one
    out.append(("clip-no-resize", dict(CLIP_SAVED, do_resize=False, crop_size={"height": 97, "width": 160}), "none"))
    out.append(("clip-lanczos-no-rescale", dict(CLIP_SAVED, resample=1, do_rescale=False), "none"))
    out.append(("clip-odd", dict(CLIP_SAVED, size={"shortest_edge": 37}, crop_size=31, resample=5), "none"))
    out.append(("siglip-no-normalize", dict(SIGLIP_HUB, do_normalize=False, size={"height": 61, "width": 43}), "none"))
    out.append(("vit-raw", dict(VIT_HUB, do_rescale=False, do_normalize=False, resample=0), "none"))
    out.append(("vit-box-mean", dict(VIT_HUB, resample=4, image_mean=0.25, image_std=[0.2, 0.3, 0.7],
                                     rescale_factor=0.0037), "none"))
    # no class named: the fields with the caller's default processor (CLIP's crop, mean, std)
    out.append(("fallback-clip", {"size": {"shortest_edge": 64}}, "clip"))
    return out


def resolve(cfg, fallback):
    """HF's processor arguments from a config: the class's defaults, then the file's fields."""
    kind = None
    for key in ("image_processor_type", "feature_extractor_type", "processor_class"):
        name = cfg.get(key) or ""
        for k in ("CLIP", "Siglip", "ViT"):
            if name.startswith(k) and kind is None:
                kind = k
    kind = kind or {"clip": "CLIP", "siglip": "Siglip", "vit": "ViT"}[fallback]
    p = {"do_resize": True, "do_rescale": True, "do_normalize": True, "rescale_factor": 1 / 255,
         "do_center_crop": kind == "CLIP"}
    if kind == "CLIP":
        p.update(size={"shortest_edge": 224}, crop_size={"height": 224, "width": 224}, resample=3,
                 image_mean=OPENAI_CLIP_MEAN, image_std=OPENAI_CLIP_STD)
    else:
        p.update(size={"height": 224, "width": 224}, resample=3 if kind == "Siglip" else 2,
                 image_mean=[0.5] * 3, image_std=[0.5] * 3)
    for key in ("do_resize", "do_rescale", "do_normalize", "rescale_factor", "resample", "image_mean", "image_std"):
        if key in cfg:
            p[key] = cfg[key]
    if kind == "CLIP" and "do_center_crop" in cfg:
        p["do_center_crop"] = cfg["do_center_crop"]
    # get_size_dict: an int size is CLIP's shortest edge (default_to_square=False), ViT's square
    if "size" in cfg:
        s = cfg["size"]
        p["size"] = s if isinstance(s, dict) else ({"shortest_edge": s} if kind == "CLIP" else {"height": s, "width": s})
    if "crop_size" in cfg:
        c = cfg["crop_size"]
        p["crop_size"] = c if isinstance(c, dict) else {"height": c, "width": c}
    return p


# ---- HF's steps, as transformers' image_transforms.py does them ---------------------------------

def get_resize_output_image_size(height, width, size):
    """default_to_square=False with an int: the shorter edge becomes size, the other int(size * long / short)."""
    short, long = (width, height) if width <= height else (height, width)
    new_short, new_long = size, int(size * long / short)
    return (new_long, new_short) if width <= height else (new_short, new_long)


def center_crop(image, crop_height, crop_width):
    """transformers' center_crop on a channels-last image: offsets (H - h) // 2, zero padding."""
    orig_height, orig_width = image.shape[:2]
    top = (orig_height - crop_height) // 2
    bottom = top + crop_height
    left = (orig_width - crop_width) // 2
    right = left + crop_width
    if top >= 0 and bottom <= orig_height and left >= 0 and right <= orig_width:
        return image[top:bottom, left:right]
    new_height = max(crop_height, orig_height)
    new_width = max(crop_width, orig_width)
    new_image = np.zeros_like(image, shape=(new_height, new_width) + image.shape[2:])
    top_pad = math.ceil((new_height - orig_height) / 2)
    bottom_pad = top_pad + orig_height
    left_pad = math.ceil((new_width - orig_width) / 2)
    right_pad = left_pad + orig_width
    new_image[top_pad:bottom_pad, left_pad:right_pad] = image
    top += top_pad
    bottom += top_pad
    left += left_pad
    right += left_pad
    return new_image[max(0, top):min(new_height, bottom), max(0, left):min(new_width, right)]


def hf_pixel_values(arr, p):
    """pixel_values [3][H][W] as CLIP/Siglip/ViTImageProcessor.preprocess makes them from an RGB8 array."""
    image = arr
    if p["do_resize"]:
        h, w = image.shape[:2]
        size = p["size"]
        if "shortest_edge" in size:
            oh, ow = get_resize_output_image_size(h, w, size["shortest_edge"])
        else:
            oh, ow = size["height"], size["width"]
        # image_transforms.resize: to_pil_image, PIL resize((width, height)), back to numpy
        image = np.array(Image.fromarray(image, "RGB").resize((ow, oh), resample=p["resample"]))
    if p["do_center_crop"]:
        image = center_crop(image, p["crop_size"]["height"], p["crop_size"]["width"])
    if p["do_rescale"]:
        image = (image.astype(np.float64) * p["rescale_factor"]).astype(np.float32)
    if p["do_normalize"]:
        if not np.issubdtype(image.dtype, np.floating):
            image = image.astype(np.float32)
        mean = np.array(p["image_mean"] if isinstance(p["image_mean"], list) else [p["image_mean"]] * 3,
                        dtype=image.dtype)
        std = np.array(p["image_std"] if isinstance(p["image_std"], list) else [p["image_std"]] * 3,
                       dtype=image.dtype)
        image = (image - mean) / std
    return np.ascontiguousarray(image.transpose(2, 0, 1)).astype(np.float32)


# ---- test images -----------------------------------------------------------------------------------

def make_image(kind, w, h, seed):
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    if kind == "noise":
        return rng.integers(0, 256, size=(h, w, 3), dtype=np.uint8)
    if kind == "gradient":
        r = 255 * x / max(w - 1, 1)
        g = 255 * y / max(h - 1, 1)
        b = 127.5 + 127.5 * np.sin(x / max(w, 1) * 6.0 + y / max(h, 1) * 4.0)
        return np.clip(np.stack([r, g, b], axis=-1) + 0.5, 0, 255).astype(np.uint8)
    # sharp edges: a checkerboard, stripes, a disc, all at full contrast
    cell = max(1, min(w, h) // 8)
    checker = (((x // cell) + (y // cell)) % 2) * 255
    stripes = ((x + 2 * y) % 7 < 3) * 255
    disc = (((x - w / 2) ** 2 + (y - h / 2) ** 2) < (min(w, h) / 3) ** 2) * 255
    return np.stack([checker, stripes, disc], axis=-1).astype(np.uint8)


IMAGES = [  # (kind, w, h)
    ("noise", 1, 1), ("edges", 2, 3), ("gradient", 3, 2), ("noise", 1, 7), ("edges", 7, 1),
    ("noise", 5, 5), ("edges", 17, 9), ("gradient", 64, 64), ("noise", 100, 37), ("edges", 37, 100),
    ("gradient", 224, 224), ("edges", 300, 200), ("noise", 333, 777), ("edges", 1000, 750),
    ("gradient", 750, 1000), ("noise", 1, 300), ("edges", 641, 479),
]


def targets(w, h):
    """Sizes (W, H) to resize a w x h image to: down, up, one axis, the same, odd, 1x1, HF's."""
    hh, ww = get_resize_output_image_size(h, w, 224)
    t = [(224, 224), (ww, hh), (w, h), (1, 1), (max(1, w // 3), max(1, h // 5)), (w + 1, h), (w, 2 * h + 3),
         (13, 29), (3 * w + 1, 2 * h + 1) if w * h < 40000 else (w // 2 + 1, h // 7 + 1)]
    seen, out = set(), []
    for s in t:
        if s not in seen and s[0] * s[1] <= 2000000:  # (a 1 x 300 image's 224 x 67200: time)
            seen.add(s)
            out.append(s)
    return out


class Runner:
    def __init__(self, tool, tmp):
        self.tool = tool
        self.tmp = tmp
        self.failures = 0

    def run(self, args, expect_ok=True):
        r = subprocess.run([self.tool] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if expect_ok and r.returncode != 0:
            raise RuntimeError("image_prep_tool %s: exit %d: %s" % (" ".join(args), r.returncode, r.stderr.strip()))
        return r

    def fail(self, msg):
        print("FAIL: " + msg)
        self.failures += 1


def test_resize(t, images):
    worst = {f: 0 for f in FILTERS}
    count = {f: 0 for f in FILTERS}
    for n, ((kind, w, h), arr, path) in enumerate(images):
        pil = Image.fromarray(arr, "RGB")
        cases, args = [], []
        for tw, th in targets(w, h):
            for f in FILTERS:
                out = os.path.join(t.tmp, "out%d.rgb" % len(cases))
                cases.append((tw, th, f, out))
                args += [str(tw), str(th), str(f), out]
        pad = ["--pad", str(n % 4 * 3)] if n % 2 else []
        t.run(pad + ["resize", path, str(w), str(h)] + args)
        for tw, th, f, out in cases:
            got = np.fromfile(out, dtype=np.uint8).reshape(th, tw, 3)
            want = np.array(pil.resize((tw, th), resample=f))
            d = int(np.abs(got.astype(np.int16) - want.astype(np.int16)).max())
            worst[f] = max(worst[f], d)
            count[f] += 1
            if d:
                bad = int((got != want).sum())
                t.fail("resize %s %dx%d -> %dx%d %s: %d values differ, by up to %d"
                       % (kind, w, h, tw, th, FILTERS[f], bad, d))
    for f in FILTERS:
        print("resize %-8s %3d cases: max |C - Pillow| = %d" % (FILTERS[f], count[f], worst[f]))


def ulp_diff(a, b):
    ia = a.view(np.int32).astype(np.int64)
    ib = b.view(np.int32).astype(np.int64)
    ia = np.where(ia < 0, -(ia & 0x7FFFFFFF), ia)
    ib = np.where(ib < 0, -(ib & 0x7FFFFFFF), ib)
    return int(np.abs(ia - ib).max()) if a.size else 0


def test_pipelines(t, images):
    for k, (name, cfg, fallback) in enumerate(pipelines()):
        cfg_path = os.path.join(t.tmp, name + ".json")
        with open(cfg_path, "w") as f:
            json.dump(cfg, f, indent=2)
        p = resolve(cfg, fallback)
        std = p["image_std"] if isinstance(p["image_std"], list) else [p["image_std"]] * 3
        step = (p["rescale_factor"] if p["do_rescale"] else 1.0) / (min(abs(s) for s in std) if p["do_normalize"]
                                                                    else 1.0)
        worst_abs, worst_ulp, cases = 0.0, 0, 0
        todo, args = [], []
        for n, ((kind, w, h), arr, path) in enumerate(images):
            if w * h > 300000 and (n + k) % 2:  # each of the two largest images on every other pipeline: time
                continue
            out = os.path.join(t.tmp, "out%d.f32" % len(todo))
            todo.append(((kind, w, h), arr, out))
            args += [path, str(w), str(h), out]
        pad = ["--pad", "5"] if k % 2 else []
        r = t.run(pad + ["--fallback", fallback, "prep", cfg_path] + args)
        for ((kind, w, h), arr, out), line in zip(todo, r.stdout.splitlines()):
            want = hf_pixel_values(arr, p)
            oh, ow = (int(v) for v in line.split())
            if (3, oh, ow) != want.shape:
                t.fail("%s %s %dx%d: output %dx%d, HF's %s" % (name, kind, w, h, ow, oh, want.shape[1:]))
                continue
            got = np.fromfile(out, dtype=np.float32).reshape(3, oh, ow)
            d = float(np.abs(got.astype(np.float64) - want.astype(np.float64)).max())
            u = ulp_diff(got, want)
            worst_abs, worst_ulp = max(worst_abs, d), max(worst_ulp, u)
            cases += 1
            if d > step:
                t.fail("%s %s %dx%d: max |C - HF| = %g, more than one 8-bit step %g" % (name, kind, w, h, d, step))
            elif u:
                t.fail("%s %s %dx%d: max |C - HF| = %g (%d ulp): not the same bits" % (name, kind, w, h, d, u))
        if cases != len(todo):
            t.fail("%s: %d of %d images compared" % (name, cases, len(todo)))
        print("pipeline %-24s %2d images: max |C - HF| = %g (%d ulp; one 8-bit step is %.4g)"
              % (name, cases, worst_abs, worst_ulp, step))


def test_sizes(t):
    cfg_path = os.path.join(t.tmp, "clip-sizes.json")
    with open(cfg_path, "w") as f:
        json.dump(CLIP_HUB, f)
    nocrop = os.path.join(t.tmp, "clip-nocrop.json")
    with open(nocrop, "w") as f:
        json.dump(dict(CLIP_SAVED, do_center_crop=False, size={"shortest_edge": 4096}), f)
    rng = np.random.default_rng(7)
    sizes = [(int(a), int(b)) for a, b in rng.integers(1, 5000, size=(12, 2))] + [(1, 1), (3, 7), (4096, 1)]
    for w, h in sizes:
        r = t.run(["size", cfg_path, str(w), str(h)])
        if r.stdout.split() != ["224", "224"]:
            t.fail("size clip %dx%d: %s" % (w, h, r.stdout.strip()))
        r = t.run(["size", nocrop, str(w), str(h)], expect_ok=False)
        oh, ow = get_resize_output_image_size(h, w, 4096)
        if oh * ow <= 4096 * 4096:
            if r.returncode or r.stdout.split() != [str(oh), str(ow)]:
                t.fail("size shortest 4096 %dx%d: %s %s, want %d %d" % (w, h, r.stdout.strip(), r.stderr.strip(),
                                                                       oh, ow))
        elif r.returncode != 1 or "pixels allowed" not in r.stderr:
            t.fail("size shortest 4096 %dx%d: no error for %dx%d (%s)" % (w, h, ow, oh, r.stdout.strip()))
    print("sizes: %d input sizes" % len(sizes))


def test_errors(t, images):
    (_, w, h), _, path = images[5]
    errs = [
        (["resize", path, str(w), str(h), "0", "5", "3", "/dev/null"], "1..65535"),
        (["resize", path, str(w), str(h), "5", "5", "6", "/dev/null"], "filter 6"),
        (["resize", path, str(w), str(h), "70000", "5", "3", "/dev/null"], "1..65535"),
    ]
    bad = os.path.join(t.tmp, "bad.json")
    for cfg, want in [({"image_processor_type": "CLIPImageProcessor", "size": 0}, '"size"'),
                      ({"image_processor_type": "CLIPImageProcessor", "resample": 7}, '"resample"'),
                      ({"image_processor_type": "ViTImageProcessor", "image_std": [0.5, 0, 0.5]}, '"image_std"'),
                      ({"image_processor_type": "DonutImageProcessor"}, "DonutImageProcessor"),
                      ([1, 2], "object")]:
        name = os.path.join(t.tmp, "bad%d.json" % len(errs))
        with open(name, "w") as f:
            json.dump(cfg, f)
        errs.append((["prep", name, path, str(w), str(h), "/dev/null"], want))
    with open(bad, "w") as f:
        f.write('{"size": 224,}')
    errs.append((["--fallback", "clip", "prep", bad, path, str(w), str(h), "/dev/null"], "byte 13"))
    wide = os.path.join(t.tmp, "wide.rgb")
    np.zeros((1, 65536, 3), dtype=np.uint8).tofile(wide)
    errs.append((["resize", wide, "65536", "1", "5", "5", "3", "/dev/null"], "65536 x 1"))
    for args, want in errs:
        r = t.run(args, expect_ok=False)
        if r.returncode != 1 or want not in r.stderr:
            t.fail("%s: exit %d, message %r lacks %r" % (" ".join(args), r.returncode, r.stderr.strip(), want))
    print("errors: %d cases" % len(errs))


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    print("Pillow %s, numpy %s" % (PIL.__version__, np.__version__))
    tmp = tempfile.mkdtemp(prefix="wgml-image-prep-")
    try:
        t = Runner(os.path.abspath(sys.argv[1]), tmp)
        images = []
        for n, (kind, w, h) in enumerate(IMAGES):
            arr = make_image(kind, w, h, n)
            path = os.path.join(tmp, "in%d.rgb" % n)
            arr.tofile(path)
            images.append(((kind, w, h), arr, path))
        test_resize(t, images)
        test_pipelines(t, images)
        test_sizes(t)
        test_errors(t, images)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if t.failures:
        print("%d failures" % t.failures)
        return 1
    print("all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
