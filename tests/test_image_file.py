#!/usr/bin/env python3
"""test_image_file.py - the CLI's image reader (tools/wgml/image_file.c) against Pillow.

    test_image_file.py IMAGE_FILE_TOOL

Every image is decoded by tests/image_file_tool (by path, or from memory as the server
does: each in turn) and by what Hugging Face's load_image does: PIL.Image.open, ImageOps.exif_transpose,
convert("RGB"); the sizes and every byte must be equal. The images are written here:
JPEGs by Pillow (baseline and progressive, 4:4:4, 4:2:2, 4:2:0, grayscale, CMYK, every
EXIF orientation in both byte orders, odd sizes) and by the tool's libjpeg encoder (YCCK,
RGB, arithmetic coding, restart markers, 190 scans); PNGs by Pillow and by a writer of
this file's own (every colour type and bit depth, Adam7 interlacing, all five filters,
tRNS, short palettes, eXIf before and after IDAT, EXIF in a "Raw profile type exif"
text, XMP orientation). Malformed EXIF (offsets past the end, odd types, truncated IFDs)
must give Pillow's orientation.

Then hostile files, each of which must fail with exit status 1 and a clear message,
never a crash, never more than 256 MiB of memory: JPEG and PNG truncated at many
lengths, bad CRCs, corrupt deflate data, a PNG claiming 60000 x 60000 pixels, a JPEG
SOF claiming 65500 x 65500, a PNG of 10000 x 10000 with 100 bytes of data, a marker in
the middle of entropy-coded data, 568 scans, garbage, an empty file, other formats.

Exit status: 0 pass, 1 fail, 77 skipped (Pillow missing, and neither CI nor
WGML_REQUIRE_SHARED set).
"""
import io
import os
import random
import re
import struct
import subprocess
import sys
import tempfile
import warnings
import zlib

sys.dont_write_bytecode = True

try:
    from PIL import Image, ImageOps
except ImportError:
    print("test_image_file: Pillow is not installed (Debian: python3-pil)")
    sys.exit(1 if os.environ.get("CI") or os.environ.get("WGML_REQUIRE_SHARED") else 77)

warnings.simplefilter("ignore")  # Pillow's "Possibly corrupt EXIF data" and the like

TOOL = sys.argv[1] if len(sys.argv) == 2 else sys.exit("usage: test_image_file.py IMAGE_FILE_TOOL")
MAX_RSS_KIB = 256 * 1024
failures = []
counts = {"exact": 0, "refused": 0}


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL " + what)
    return cond


def run_tool(args):
    """The tool's exit status, stdout, stderr and peak resident memory (KiB, its own: wait4)."""
    with tempfile.TemporaryFile() as fo, tempfile.TemporaryFile() as fe:
        p = subprocess.Popen([TOOL] + args, stdout=fo, stderr=fe)
        _, status, usage = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        fo.seek(0)
        fe.seek(0)
        return p.returncode, fo.read().decode(), fe.read().decode(errors="replace"), usage.ru_maxrss


def pillow(path):
    """(size, RGB bytes) as load_image gives them, or the exception Pillow raised."""
    try:
        with Image.open(path) as im:
            rgb = ImageOps.exif_transpose(im).convert("RGB")
            return rgb.size, rgb.tobytes()
    except Exception as e:  # noqa: BLE001 - whatever Pillow raises is the answer
        return e


def decode(path, extra=()):
    out = path + ".rgb"
    rc, so, se, rss = run_tool(list(extra) + [path, out])
    if rc != 0:
        return rc, se.strip(), rss
    w, h, o, fmt = so.split()
    with open(out, "rb") as f:
        data = f.read()
    os.unlink(out)
    return 0, ((int(w), int(h)), data, int(o), fmt), rss


def same(name, path, expect_orientation=None):
    """The tool gives Pillow's pixels exactly: by path and from memory in turn (the same decoder
    behind both; one run a case keeps the test short under the sanitizers)."""
    ref = pillow(path)
    if not check(not isinstance(ref, Exception), "%s: Pillow cannot read the test's own file: %s" % (name, ref)):
        return
    for mode in [(), ("--memory",)][counts["exact"] % 2:][:1]:
        rc, got, _ = decode(path, mode)
        how = "memory" if mode else "path"
        if not check(rc == 0, "%s (%s): refused: %s" % (name, how, got)):
            continue
        size, data, orientation, fmt = got
        if not check(size == ref[0], "%s (%s): %s, Pillow %s" % (name, how, size, ref[0])):
            continue
        if data != ref[1]:
            diff = [i for i in range(len(data)) if data[i] != ref[1][i]]
            check(False, "%s (%s): %d of %d bytes differ from Pillow's, first at byte %d (%d, Pillow %d)"
                  % (name, how, len(diff), len(data), diff[0], data[diff[0]], ref[1][diff[0]]))
            continue
        if expect_orientation is not None:
            check(orientation == expect_orientation,
                  "%s: orientation %d, expected %d" % (name, orientation, expect_orientation))
    counts["exact"] += 1


def refused(name, path, pattern, extra=(), pillow_too=None):
    """The tool fails with status 1 and a message matching pattern, within the memory limit."""
    for mode in ((), ("--memory",)):
        rc, msg, rss = decode(path, list(extra) + list(mode))
        how = "memory" if mode else "path"
        if not check(rc == 1, "%s (%s): exit %s, expected 1 (%s)" % (name, how, rc, msg if rc else "decoded")):
            continue
        check(re.search(pattern, msg) is not None, "%s (%s): message %r does not match %r" % (name, how, msg, pattern))
        check(rss < MAX_RSS_KIB, "%s (%s): %d KiB of memory" % (name, how, rss))
    if pillow_too is not None:
        ref = pillow(path)
        check(isinstance(ref, Exception) == pillow_too, "%s: Pillow %s it too" % (
            name, "refuses" if isinstance(ref, Exception) else "decodes"))
    counts["refused"] += 1


# ---- test content ------------------------------------------------------------------------------

def content(w, h, seed=1):
    """A non-symmetric RGB image with gradients, edges and noise (something for the DCT)."""
    rnd = random.Random(seed)
    im = Image.new("RGB", (w, h))
    im.putdata([((x * 255 // max(w - 1, 1) + rnd.randrange(32)) % 256,
                 (y * 255 // max(h - 1, 1)) ^ (40 if (x // 5 + y // 3) % 2 else 0),
                 (x * y * 3 + rnd.randrange(64)) % 256) for y in range(h) for x in range(w)])
    return im


def exif_bytes(entries, be=False, ifd_offset=8, count=None, tail=b"", prefix=b"Exif\0\0", magic=None):
    """A TIFF structure with IFD0 = entries [(tag, type, count, 4 value bytes)], after prefix."""
    e = ">" if be else "<"
    head = (magic or (b"MM\0*" if be else b"II*\0")) + struct.pack(e + "I", ifd_offset)
    body = struct.pack(e + "H", len(entries) if count is None else count)
    for tag, typ, cnt, value in entries:
        body += struct.pack(e + "HHI", tag, typ, cnt) + value
    body += struct.pack(e + "I", 0)
    return prefix + head + body + tail


def short(v, be=False):
    return struct.pack(">HH" if be else "<HH", v, 0)


def with_app1(jpeg, *payloads):
    """The JPEG with APP1 segments holding payloads inserted right after SOI."""
    segs = b"".join(b"\xff\xe1" + struct.pack(">H", len(p) + 2) + p for p in payloads)
    return jpeg[:2] + segs + jpeg[2:]


def jpeg_of(im, **kw):
    b = io.BytesIO()
    im.save(b, "JPEG", **kw)
    return b.getvalue()


# ---- PNG writer ----------------------------------------------------------------------------------

ADAM7 = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)]
CHANNELS = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}


def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def pack_row(pixels, depth):
    if depth == 8:
        return bytes(v for p in pixels for v in p)
    if depth == 16:
        return b"".join(struct.pack(">H", v) for p in pixels for v in p)
    bits, n, out = 0, 0, bytearray()
    for p in pixels:
        for v in p:
            bits = bits << depth | v
            n += depth
            if n == 8:
                out.append(bits)
                bits, n = 0, 0
    if n:
        out.append(bits << (8 - n))
    return bytes(out)


def paeth(a, b, c):
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    return a if pa <= pb and pa <= pc else b if pb <= pc else c


def filtered(row, prev, bpp, ft):
    out = bytearray([ft])
    for i, x in enumerate(row):
        a = row[i - bpp] if i >= bpp else 0
        b = prev[i] if prev else 0
        c = prev[i - bpp] if prev and i >= bpp else 0
        pred = (0, a, b, (a + b) // 2, paeth(a, b, c))[ft]
        out.append((x - pred) & 0xFF)
    return bytes(out)


def png_bytes(w, h, depth, ctype, sample, interlace=False, plte=None, trns=None, pre=(), post=(),
              idat_parts=1, iend=True):
    """A PNG whose pixel (x, y) is the tuple sample(x, y); rows filtered with types 0-4 in turn."""
    bpp = max(1, CHANNELS[ctype] * depth // 8)
    raw = bytearray()
    for x0, y0, dx, dy in (ADAM7 if interlace else [(0, 0, 1, 1)]):
        xs, prev = range(x0, w, dx), None
        if not xs:
            continue
        for y in range(y0, h, dy):
            row = pack_row([sample(x, y) for x in xs], depth)
            raw += filtered(row, prev, bpp, (y + x0) % 5)
            prev = row
    z = zlib.compress(bytes(raw), 9)
    out = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, depth, ctype, 0, 0, int(interlace)))
    out += b"".join(pre)
    if plte is not None:
        out += chunk(b"PLTE", plte)
    if trns is not None:
        out += chunk(b"tRNS", trns)
    step = -(-len(z) // idat_parts)
    for i in range(idat_parts):
        out += chunk(b"IDAT", z[i * step:(i + 1) * step])
    out += b"".join(post)
    if iend:
        out += chunk(b"IEND", b"")
    return out


def sampler(ctype, depth, seed, top=None):
    rnd = random.Random(seed)
    top = (1 << depth) - 1 if top is None else top
    cache = {}

    def sample(x, y):
        if (x, y) not in cache:
            if depth == 16 and ctype in (0, 4):
                # 16-bit gray: a quarter of the values below 256 (Pillow keeps those), the rest above
                g = rnd.randrange(256) if rnd.random() < 0.25 else rnd.randrange(65536)
                cache[(x, y)] = (g,) if ctype == 0 else (g, rnd.randrange(65536))
            else:
                cache[(x, y)] = tuple((x * 37 + y * 11 * (c + 1) + rnd.randrange(top + 1)) % (top + 1)
                                      for c in range(CHANNELS[ctype]))
        return cache[(x, y)]
    return sample


# ---- the cases -----------------------------------------------------------------------------------

def good_jpegs(d):
    base = content(61, 37)
    for name, im in [("61x37", base), ("1x1", content(1, 1)), ("1x19", content(1, 19)), ("23x1", content(23, 1)),
                     ("17x9", content(17, 9)), ("130x70", content(130, 70, 2))]:
        for ss, ssname in ((0, "444"), (1, "422"), (2, "420")):
            for prog in (False, True):
                p = os.path.join(d, "j-%s-%s-%s.jpg" % (name, ssname, "prog" if prog else "base"))
                with open(p, "wb") as f:
                    f.write(jpeg_of(im, quality=90, subsampling=ss, progressive=prog))
                same("jpeg %s %s %s" % (name, ssname, "progressive" if prog else "baseline"), p, 1)
    for kind, kw in [("optimized", dict(optimize=True)), ("quality 100", dict(quality=100)),
                     ("quality 20", dict(quality=20))]:
        p = os.path.join(d, "j-%s.jpg" % kind.replace(" ", ""))
        with open(p, "wb") as f:
            f.write(jpeg_of(base, **kw))
        same("jpeg " + kind, p)
    for mode in ("L", "CMYK"):
        for prog in (False, True):
            p = os.path.join(d, "j-%s-%d.jpg" % (mode, prog))
            with open(p, "wb") as f:
                f.write(jpeg_of(base.convert(mode), quality=90, progressive=prog))
            same("jpeg %s%s" % (mode, " progressive" if prog else ""), p)
    # every orientation, both byte orders (Pillow writes little-endian; big-endian by hand)
    plain = jpeg_of(base, quality=90)
    for o in range(1, 9):
        e = Image.Exif()
        e[0x0112] = o
        p = os.path.join(d, "j-orient-%d.jpg" % o)
        with open(p, "wb") as f:
            f.write(jpeg_of(base, quality=90, exif=e.tobytes()))
        same("jpeg EXIF orientation %d (II)" % o, p, o)
        p = os.path.join(d, "j-orient-mm-%d.jpg" % o)
        with open(p, "wb") as f:
            f.write(with_app1(plain, exif_bytes([(0x0112, 3, 1, short(o, True))], be=True)))
        same("jpeg EXIF orientation %d (MM)" % o, p, o)
    # libjpeg-only variants through the tool's encoder
    cmyk = base.convert("CMYK")
    raw = {"ycc": base.tobytes(), "rgb": base.tobytes(), "cmyk": bytes(255 - v for v in cmyk.tobytes()),
           "gray": base.convert("L").tobytes()}
    raw["ycck"] = raw["cmyk"]
    for space, opts in [("ycck", []), ("ycck", ["--progressive"]), ("cmyk", []), ("rgb", []), ("rgb", ["--progressive"]),
                        ("ycc", ["--arith"]), ("ycc", ["--arith", "--progressive"]), ("ycc", ["--restart", "1"]),
                        ("ycc", ["--restart", "3", "--progressive"]), ("gray", ["--many-scans"]),
                        ("gray", ["--arith", "--restart", "2"])]:
        src = os.path.join(d, "raw-" + space)
        with open(src, "wb") as f:
            f.write(raw[space])
        p = os.path.join(d, "t-%s%s.jpg" % (space, "".join(opts).replace("-", "")))
        rc, _, err, _ = run_tool(["--encode-jpeg", space, "61", "37"] + opts + [src, p])
        if check(rc == 0, "encoding %s %s: %s" % (space, opts, err)):
            same("jpeg %s %s (libjpeg)" % (space.upper(), " ".join(opts) or "baseline"), p)


def exif_cases(d):
    """Malformed and unusual EXIF: the orientation must be Pillow's (which skips what it cannot read)."""
    base = content(61, 37)
    plain = jpeg_of(base, quality=90)
    o = 0x0112
    le = "<"
    cases = {
        "LONG 6": [exif_bytes([(o, 4, 1, struct.pack(le + "I", 6))])],
        "SSHORT 8": [exif_bytes([(o, 8, 1, short(8))])],
        "RATIONAL 12/2 (as 6)": [exif_bytes([(o, 5, 1, struct.pack(le + "I", 26))], tail=struct.pack(le + "II", 12, 2))],
        "RATIONAL 7/0": [exif_bytes([(o, 5, 1, struct.pack(le + "I", 26))], tail=struct.pack(le + "II", 7, 0))],
        "FLOAT 3.0": [exif_bytes([(o, 11, 1, struct.pack(le + "f", 3.0))])],
        "DOUBLE 5.0": [exif_bytes([(o, 12, 1, struct.pack(le + "I", 26))], tail=struct.pack(le + "d", 5.0))],
        "FLOAT 3.5": [exif_bytes([(o, 11, 1, struct.pack(le + "f", 3.5))])],
        "BYTE 6 (bytes to Pillow: none)": [exif_bytes([(o, 1, 1, b"\x06\0\0\0")])],
        "ASCII": [exif_bytes([(o, 2, 2, b"6\0\0\0")])],
        "SHORT x2 (the first)": [exif_bytes([(o, 3, 2, struct.pack(le + "HH", 7, 1))])],
        "SHORT count 0": [exif_bytes([(o, 3, 0, short(6))])],
        "value 9": [exif_bytes([(o, 3, 1, short(9))])],
        "unknown type 14": [exif_bytes([(o, 14, 1, short(6))])],
        "two entries (the last)": [exif_bytes([(o, 3, 1, short(6)), (o, 3, 1, short(3))])],
        "SHORT x3 at an offset past the end": [exif_bytes([(o, 3, 3, struct.pack(le + "I", 5000))])],
        "SHORT x3 ending past the end": [exif_bytes([(o, 3, 3, struct.pack(le + "I", 24))])],
        "count huge at an offset": [exif_bytes([(o, 4, 0x40000000, struct.pack(le + "I", 8))])],
        "IFD offset past the end": [exif_bytes([(o, 3, 1, short(6))], ifd_offset=4000)],
        "IFD offset 0xFFFFFFFF": [exif_bytes([(o, 3, 1, short(6))], ifd_offset=0xFFFFFFFF)],
        "IFD offset into the header": [exif_bytes([(o, 3, 1, short(6))], ifd_offset=2)],
        "entry count past the end (kept before it)": [exif_bytes([(o, 3, 1, short(6))], count=9)],
        "entry cut by the end (the ones before it kept)": [exif_bytes([(o, 3, 1, short(6)), (0x0100, 3, 1, short(1))])[:-10]],
        "orientation entry cut by the end": [exif_bytes([(0x0100, 3, 1, short(1)), (o, 3, 1, short(6))])[:-10]],
        "swapped magic MM*\\0": [exif_bytes([(o, 3, 1, short(8, True))], be=True, magic=b"MM*\0")],
        "BigTIFF magic": [exif_bytes([(o, 3, 1, short(6))], magic=b"II+\0")],
        "not TIFF": [b"Exif\0\0NOTATIFF" + bytes(20)],
        "4 bytes": [b"Exif\0\0II*\0"],
        "Exif\\0 alone": [b"Exif\0"],
        "first APP1 wins": [exif_bytes([(o, 3, 1, short(1))]), exif_bytes([(o, 3, 1, short(6))])],
        "first APP1 without orientation wins": [exif_bytes([(0x0100, 3, 1, short(1))]),
                                                exif_bytes([(o, 3, 1, short(6))])],
        "XMP APP1 before Exif": [b"http://ns.adobe.com/xap/1.0/\0<x tiff:Orientation=\"3\"/>",
                                 exif_bytes([(o, 3, 1, short(8))])],
    }
    for i, (name, payloads) in enumerate(cases.items()):
        p = os.path.join(d, "x-%d.jpg" % i)
        with open(p, "wb") as f:
            f.write(with_app1(plain, *payloads))
        if isinstance(pillow(p), Exception):
            # Pillow raises for some of these (when the JFIF segment has a dpi): taken as no orientation
            rc, got, _ = decode(p)
            check(rc == 0 and got[2] == 1, "jpeg EXIF %s: Pillow raises; expected orientation 1, got %s" % (name, got))
            counts["exact"] += 1
        else:
            same("jpeg EXIF " + name, p)


def good_pngs(d):
    base = content(61, 37)
    for mode in ("RGB", "RGBA", "L", "LA", "P", "1", "I"):
        p = os.path.join(d, "p-pillow-%s.png" % mode)
        base.convert(mode).save(p)
        same("png Pillow %s" % mode, p)
    p = os.path.join(d, "p-pillow-I16.png")
    Image.frombytes("I;16", base.size, bytes(random.Random(3).randrange(256) for _ in range(61 * 37 * 2))).save(p)
    same("png Pillow I;16", p)
    p = os.path.join(d, "p-pillow-P-trns.png")
    base.convert("P").save(p, transparency=3)
    same("png Pillow P with tRNS", p)
    p = os.path.join(d, "p-pillow-RGBA-q.png")
    base.convert("RGBA").quantize(16).save(p, transparency=1)
    same("png Pillow quantized P with tRNS", p)
    n = 0
    for ctype, depths in ((0, (1, 2, 4, 8, 16)), (2, (8, 16)), (3, (1, 2, 4, 8)), (4, (8, 16)), (6, (8, 16))):
        for depth in depths:
            for interlace in (False, True):
                for w, h in ((61, 37), (1, 1), (3, 11), (13, 2)):
                    n += 1
                    plte = None
                    if ctype == 3:
                        k = min(1 << depth, 200)
                        plte = bytes(random.Random(n).randrange(256) for _ in range(3 * k))
                    p = os.path.join(d, "p-%d-%d-%d-%dx%d.png" % (ctype, depth, interlace, w, h))
                    with open(p, "wb") as f:
                        f.write(png_bytes(w, h, depth, ctype, sampler(ctype, depth, n, (len(plte) // 3 - 1) if plte else None),
                                          interlace, plte=plte, idat_parts=1 + n % 3))
                    same("png type %d %d-bit%s %dx%d" % (ctype, depth, " interlaced" if interlace else "", w, h), p)
    # tRNS of every kind (dropped, not composited)
    for ctype, depth, trns in ((0, 8, b"\0\x10"), (0, 16, b"\x01\x00"), (2, 8, b"\0\x10\0\x20\0\x30"),
                               (2, 16, b"\x10\x00\x20\x00\x30\x00"), (3, 8, bytes(range(0, 250, 10))),
                               (3, 2, b"\0\x80")):
        plte = bytes(random.Random(depth).randrange(256) for _ in range(3 * min(1 << depth, 32))) if ctype == 3 else None
        p = os.path.join(d, "p-trns-%d-%d.png" % (ctype, depth))
        with open(p, "wb") as f:
            f.write(png_bytes(61, 37, depth, ctype, sampler(ctype, depth, 7, (len(plte) // 3 - 1) if plte else None),
                              plte=plte, trns=trns))
        same("png type %d %d-bit with tRNS" % (ctype, depth), p)
    # palette shorter than the indices used: Pillow's palette is a gray ramp past its end
    for depth, k in ((8, 5), (4, 3), (2, 1)):
        p = os.path.join(d, "p-shortplte-%d.png" % depth)
        with open(p, "wb") as f:
            f.write(png_bytes(61, 37, depth, 3, sampler(3, depth, 9), plte=bytes(range(40, 40 + 3 * k))))
        same("png %d-bit palette of %d entries, indices past it" % (depth, k), p)
    # many IDATs, empty IDATs, no IEND (Pillow reads the pixels without it)
    s = sampler(2, 8, 11)
    for name, kw in (("40 IDATs", dict(idat_parts=40)), ("no IEND", dict(iend=False))):
        p = os.path.join(d, "p-%s.png" % name.replace(" ", ""))
        with open(p, "wb") as f:
            f.write(png_bytes(61, 37, 8, 2, s, **kw))
        same("png " + name, p)
    # cut after the compressed image data: the last IDAT's CRC and IEND missing (Pillow decodes it)
    for interlace in (False, True):
        p = os.path.join(d, "p-no-crc-%d.png" % interlace)
        with open(p, "wb") as f:
            f.write(png_bytes(61, 37, 8, 2, s, interlace=interlace)[:-16])
        same("png%s without its last CRC and IEND" % (" interlaced" if interlace else ""), p)
    data = png_bytes(61, 37, 8, 2, s, idat_parts=2)
    i = data.index(b"IDAT") - 4
    p = os.path.join(d, "p-empty-idat.png")
    with open(p, "wb") as f:
        f.write(data[:i] + chunk(b"IDAT", b"") + data[i:])
    same("png with an empty IDAT", p)


def png_orientation_cases(d):
    s = sampler(2, 8, 21)

    def exif(o):
        return exif_bytes([(0x0112, 3, 1, short(o))], prefix=b"")

    def text(kind, key, value, compressed=False):
        if kind == b"tEXt":
            return chunk(kind, key + b"\0" + value)
        if kind == b"zTXt":
            return chunk(kind, key + b"\0\0" + zlib.compress(value))
        return chunk(kind, key + b"\0" + (b"\1\0" if compressed else b"\0\0") + b"\0\0" +
                     (zlib.compress(value) if compressed else value))

    def raw_profile(tiff):
        h = tiff.hex()
        return b"\nexif\n%8d\n" % len(tiff) + "\n".join(h[i:i + 72] for i in range(0, len(h), 72)).encode() + b"\n"

    xmp = b'<x:xmpmeta><rdf:Description tiff:Orientation="%d"/></x:xmpmeta>'
    xmp_el = b"<x:xmpmeta><tiff:Orientation>%d</tiff:Orientation></x:xmpmeta>"
    key_raw, key_xmp = b"Raw profile type exif", b"XML:com.adobe.xmp"
    cases = [
        ("eXIf %d" % o, dict(pre=[chunk(b"eXIf", exif(o))]), o) for o in range(1, 9)
    ] + [
        ("eXIf big-endian 6", dict(pre=[chunk(b"eXIf", exif_bytes([(0x0112, 3, 1, short(6, True))], be=True,
                                                                  prefix=b""))]), 6),
        ("eXIf after IDAT", dict(post=[chunk(b"eXIf", exif(3))]), 3),
        ("eXIf before IDAT wins over one after", dict(pre=[chunk(b"eXIf", exif(6))], post=[chunk(b"eXIf", exif(3))]), 6),
        ("two eXIf before IDAT: the last", dict(pre=[chunk(b"eXIf", exif(6)), chunk(b"eXIf", exif(8))]), 8),
        ("eXIf with an Exif prefix (not TIFF to Pillow)", dict(pre=[chunk(b"eXIf", b"Exif\0\0" + exif(6))]), 1),
        ("eXIf IFD offset past the end", dict(pre=[chunk(b"eXIf", exif_bytes([(0x0112, 3, 1, short(6))], prefix=b"",
                                                                            ifd_offset=999))]), 1),
        ("raw profile tEXt", dict(pre=[text(b"tEXt", key_raw, raw_profile(b"Exif\0\0" + exif(5)))]), 5),
        ("raw profile zTXt without the Exif prefix", dict(pre=[text(b"zTXt", key_raw, raw_profile(exif(7)))]), 7),
        ("raw profile after IDAT", dict(post=[text(b"zTXt", key_raw, raw_profile(exif(2)))]), 2),
        ("raw profile not hex", dict(pre=[text(b"tEXt", key_raw, b"\nexif\n 4\nzz")]), None),
        ("eXIf wins over raw profile", dict(pre=[text(b"tEXt", key_raw, raw_profile(exif(5))), chunk(b"eXIf", exif(4))]),
         4),
        ("XMP attribute", dict(pre=[text(b"iTXt", key_xmp, xmp % 6)]), 6),
        ("XMP element, compressed", dict(pre=[text(b"iTXt", key_xmp, xmp_el % 8, True)]), 8),
        ("XMP in tEXt", dict(pre=[text(b"tEXt", key_xmp, xmp % 3)]), 3),
        ("XMP after IDAT", dict(post=[text(b"iTXt", key_xmp, xmp % 5)]), 5),
        ("XMP not UTF-8 (ignored)", dict(pre=[text(b"iTXt", key_xmp, b"\xff" + xmp % 5)]), 1),
        ("XMP when eXIf has no orientation", dict(pre=[chunk(b"eXIf", exif_bytes([(0x0100, 3, 1, short(1))], prefix=b"")),
                                                       text(b"iTXt", key_xmp, xmp % 7)]), 7),
        ("eXIf orientation 1 wins over XMP", dict(pre=[chunk(b"eXIf", exif(1)), text(b"iTXt", key_xmp, xmp % 7)]), 1),
        ("eXIf before IDAT hides XMP after it", dict(pre=[chunk(b"eXIf", exif_bytes([(0x0100, 3, 1, short(1))],
                                                                                   prefix=b""))],
                                                     post=[text(b"iTXt", key_xmp, xmp % 7)]), 1),
    ]
    for i, (name, kw, o) in enumerate(cases):
        p = os.path.join(d, "po-%d.png" % i)
        with open(p, "wb") as f:
            f.write(png_bytes(61, 37, 8, 2, s, **kw))
        ref = pillow(p)
        if isinstance(ref, Exception):
            rc, got, _ = decode(p)
            check(rc == 0 and got[2] == 1, "png %s: Pillow raises (%s); expected orientation 1, got %s" % (name, ref, got))
            counts["exact"] += 1
        else:
            same("png orientation: " + name, p, o)
    # Pillow writes eXIf itself too
    for o in (3, 6):
        e = Image.Exif()
        e[0x0112] = o
        p = os.path.join(d, "po-pillow-%d.png" % o)
        content(61, 37).save(p, exif=e.tobytes())
        same("png orientation %d written by Pillow" % o, p, o)


def hostile(d):
    base = content(130, 70, 5)
    jpegs = {"baseline": jpeg_of(base, quality=90), "progressive": jpeg_of(base, quality=90, progressive=True)}
    for kind, data in jpegs.items():
        n = len(data)
        for cut in sorted({2, 3, 4, 20, 100, 200, n // 3, n // 2, n - 300, n - 40, n - 3, n - 2}):
            p = os.path.join(d, "h-j-%s-%d.jpg" % (kind, cut))
            with open(p, "wb") as f:
                f.write(data[:cut])
            refused("jpeg %s cut to %d of %d bytes" % (kind, cut, n), p,
                    r"truncated|cannot be decoded|not a JPEG", pillow_too=True if cut > 3 else None)
        # an EOI marker in the middle of the entropy-coded data: libjpeg warns and fills gray (as Pillow
        # shows it); refused here
        sos = data.index(b"\xff\xda")
        mid = sos + (n - sos) // 2
        p = os.path.join(d, "h-j-%s-marker.jpg" % kind)
        with open(p, "wb") as f:
            f.write(data[:mid] + b"\xff\xd9" + data[mid:])
        refused("jpeg %s with EOI inside the scan data" % kind, p, r"Corrupt JPEG data|truncated")
    # SOF claiming 65500 x 65500, and 0 rows
    data = jpegs["baseline"]
    sof = data.index(b"\xff\xc0")
    for h, w, pattern in ((65500, 65500, r"65500 x 65500 pixels is over the limit of 134217728 pixels"),
                          (0, 61, r"Empty JPEG|empty")):
        p = os.path.join(d, "h-j-sof-%d.jpg" % h)
        with open(p, "wb") as f:
            f.write(data[:sof + 5] + struct.pack(">HH", h, w) + data[sof + 9:])
        refused("jpeg SOF of %d x %d" % (w, h), p, pattern)
    # over a small budget
    p = os.path.join(d, "h-j-budget.jpg")
    with open(p, "wb") as f:
        f.write(data)
    refused("jpeg of 130 x 70 over a budget of 9000 pixels", p,
            r"130 x 70 pixels is over the limit of 9000 pixels", extra=("--max-pixels", "9000"))
    # too many scans (Pillow decodes it; libjpeg-turbo's own scan limit is 500 too)
    src = os.path.join(d, "raw-many")
    with open(src, "wb") as f:
        f.write(content(61, 37).tobytes())
    p = os.path.join(d, "h-j-scans.jpg")
    rc, _, err, _ = run_tool(["--encode-jpeg", "ycc", "61", "37", "--many-scans", src, p])
    if check(rc == 0, "encoding 568 scans: " + err):
        refused("jpeg of 568 scans", p, r"more than 500 scans")

    s = sampler(2, 8, 31)
    png = png_bytes(130, 70, 8, 2, s)
    n = len(png)
    for cut in sorted({8, 12, 20, 33, 40, 50, 60, n // 4, n // 2, n - 200, n - 60, n - 30}):
        p = os.path.join(d, "h-p-%d.png" % cut)
        with open(p, "wb") as f:
            f.write(png[:cut])
        refused("png cut to %d of %d bytes" % (cut, n), p, r"truncated|cannot be decoded|not a JPEG or PNG",
                pillow_too=True if cut > 8 else None)
    # cut inside the deflate stream's Adler-32 (after the pixels): refused as truncated, where
    # Pillow, which never reads the checksum, decodes it
    p = os.path.join(d, "h-p-adler.png")
    with open(p, "wb") as f:
        f.write(png[:-18])
    refused("png cut inside its Adler-32", p, r"truncated", pillow_too=False)
    ilace = png_bytes(130, 70, 8, 6, sampler(6, 8, 3), interlace=True)
    for cut in (len(ilace) // 3, len(ilace) - 100):
        p = os.path.join(d, "h-pi-%d.png" % cut)
        with open(p, "wb") as f:
            f.write(ilace[:cut])
        refused("interlaced png cut to %d of %d bytes" % (cut, len(ilace)), p, r"truncated|cannot be decoded",
                pillow_too=True)
    # bad CRCs: IHDR, IDAT, an ancillary chunk before IDAT (Pillow refuses these too) and after it
    withtext = png_bytes(130, 70, 8, 2, s, pre=[chunk(b"tEXt", b"Comment\0hello")],
                         post=[chunk(b"tEXt", b"Comment\0bye")])
    for name, kind, nth in (("IHDR", b"IHDR", 0), ("IDAT", b"IDAT", 0), ("tEXt before IDAT", b"tEXt", 0),
                            ("tEXt after IDAT", b"tEXt", 1)):
        i = -1
        for _ in range(nth + 1):
            i = withtext.index(kind, i + 1)
        length = struct.unpack(">I", withtext[i - 4:i])[0]
        crc = i + 4 + length
        bad = withtext[:crc] + bytes([withtext[crc] ^ 0x5A]) + withtext[crc + 1:]
        p = os.path.join(d, "h-crc-%s.png" % kind.decode())
        with open(p, "wb") as f:
            f.write(bad)
        # Pillow checks the CRCs of the chunks before IDAT only
        refused("png with a bad %s CRC" % name, p, r"CRC error", pillow_too=kind != b"IDAT" and nth == 0)
    # deflate data corrupted, the CRC made right again
    i = png.index(b"IDAT")
    length = struct.unpack(">I", png[i - 4:i])[0]
    z = bytearray(png[i + 4:i + 4 + length])
    for k in range(10, len(z) - 10, 7):
        z[k] ^= 0xFF
    p = os.path.join(d, "h-zlib.png")
    with open(p, "wb") as f:
        f.write(png[:i - 4] + chunk(b"IDAT", bytes(z)) + png[i + 4 + length + 4:])
    refused("png with corrupt deflate data", p, r"cannot be decoded")
    # decompression bombs: sizes from IHDR, refused before any pixel memory
    for w, h, pattern in ((60000, 60000, r"'.*': a PNG of 60000 x 60000 pixels is over the limit of 134217728 pixels"),
                          (10000, 10000, r"10000 x 10000 pixels cannot come from the 1\d\d bytes"),
                          (70000, 1, r"70000 x 1 pixels is over the limit of 65535 pixels a side"),
                          (0, 5, r"0 x 5 pixels is empty")):
        z = zlib.compress(b"\0" * 100000)[:120]
        bomb = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) +
                chunk(b"IDAT", z) + chunk(b"IEND", b""))
        p = os.path.join(d, "h-bomb-%dx%d.png" % (w, h))
        with open(p, "wb") as f:
            f.write(bomb)
        refused("png header of %d x %d" % (w, h), p, pattern)
    p = os.path.join(d, "h-p-budget.png")
    with open(p, "wb") as f:
        f.write(png)
    refused("png of 130 x 70 over a budget of 9000 pixels", p, r"130 x 70 pixels is over the limit of 9000 pixels",
            extra=("--max-pixels", "9000"))
    # not an image this reads
    rnd = random.Random(5)
    for name, data, pattern in (
            ("empty", b"", r"is empty"),
            ("garbage", bytes(rnd.randrange(256) for _ in range(4096)), r"not a JPEG or PNG image .*only JPEG and PNG"),
            ("text", b"hello, world\n", r"starts with 68 65 6c 6c 6f 2c 20 77"),
            ("GIF", b"GIF89a" + bytes(100), r"is a GIF image: only JPEG and PNG are read"),
            ("WebP", b"RIFF\x10\0\0\0WEBPVP8 " + bytes(100), r"is a WebP image"),
            ("BMP", b"BM" + bytes(100), r"is a BMP image"),
            ("TIFF", b"II*\0" + bytes(100), r"is a TIFF image"),
            ("AVIF", b"\0\0\0\x1cftypavif" + bytes(100), r"is an? AVIF image"),
            ("JPEG SOI alone", b"\xff\xd8\xff", r"truncated|cannot be decoded"),
            ("PNG signature alone", b"\x89PNG\r\n\x1a\n", r"truncated|cannot be decoded"),
            ("JPEG magic then garbage", b"\xff\xd8\xff" + bytes(rnd.randrange(256) for _ in range(2000)),
             r"cannot be decoded|truncated")):
        p = os.path.join(d, "h-%s.bin" % name.replace(" ", "-"))
        with open(p, "wb") as f:
            f.write(data)
        refused(name, p, pattern)
    # a path that is not a file
    rc, msg, _ = decode(d)
    check(rc == 1 and "not a regular file" in msg, "a directory: %s %s" % (rc, msg))
    rc, msg, _ = decode(os.path.join(d, "missing.png"))
    check(rc == 1 and "cannot open" in msg, "a missing file: %s %s" % (rc, msg))


def main():
    with tempfile.TemporaryDirectory(prefix="wgml-image-") as d:
        for part in (good_jpegs, exif_cases, good_pngs, png_orientation_cases, hostile):
            before = dict(counts), len(failures)
            part(d)
            print("%-22s %3d exact, %3d refused as they should be, %d failures" % (
                part.__name__, counts["exact"] - before[0]["exact"], counts["refused"] - before[0]["refused"],
                len(failures) - before[1]))
    if failures:
        print("test_image_file: %d failures" % len(failures))
        return 1
    print("test_image_file: %d images exactly as Pillow decodes them (by path and from memory in turn), %d hostile "
          "files refused (by both)" % (counts["exact"], counts["refused"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
