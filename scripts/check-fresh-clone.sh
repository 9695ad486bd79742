#!/usr/bin/env bash
# check-fresh-clone.sh - what a new user meets: the committed tree cloned into a
# temporary folder with no ../shared beside it, then the README's first command
# (setup, build, generate with the default model) run there as written, then
# the other defaults that must work without ../shared: `wgml synth` for every
# architecture (one layer each), `wgml verify` with its end-to-end case, and
# the browser demo's server giving the page and its default model URL.
#
#   scripts/check-fresh-clone.sh             the clone of HEAD (what CI runs)
#   WGML_FRESH_VERIFY_ADAPTER=NAME ...       verify on NAME (default llvmpipe; "none" skips it)
#
# The temporary folder is removed at the end, also on failure.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/wgml-fresh-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
say() { echo "fresh-clone: $*"; }
die() { echo "fresh-clone: FAILED: $*" >&2; exit 1; }

git clone -q "$root" "$tmp/wgml"
cd "$tmp/wgml"
[ ! -e ../shared ] || die "$tmp/shared exists"

# The README's first command: the first line of its first ```sh block that is not a comment.
cmd=$(awk '/^```sh/{inb=1; next} /^```/{if (inb) exit} inb && !/^[[:space:]]*(#|$)/{print; exit}' README.md)
[ -n "$cmd" ] || die "no command found in README.md"
say "README: $cmd"
out=$(bash -c "$cmd" 2>"$tmp/stderr") || { cat "$tmp/stderr" >&2; die "the README's first command failed"; }
# setup's own lines come first; the text starts with the prompt
text=$(printf '%s\n' "$out" | sed -n '/^Once upon a time/,$p')
printf '%s\n' "$text" | head -n 3
[ -n "$text" ] || die "the default model did not continue the prompt: $out"
[ "${#text}" -gt 40 ] || die "too little text: $text"

wgml=./build/wgml
# one second of a tone, for the transcribers
python3 -c 'import math, struct, wave, sys
w = wave.open(sys.argv[1], "wb"); w.setnchannels(1); w.setsampwidth(2); w.setframerate(16000)
w.writeframes(b"".join(struct.pack("<h", int(3000 * math.sin(i * 0.05))) for i in range(16000)))' "$tmp/tone.wav"
# a 40 x 30 PNG (Python's zlib and struct), for the vision towers
python3 -c 'import struct, sys, zlib
w, h = 40, 30
raw = b"".join(b"\0" + bytes(v for x in range(w) for v in (x * 6 % 256, y * 8 % 256, (x + y) * 3 % 256)) for y in range(h))
def chunk(t, d): return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
open(sys.argv[1], "wb").write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
                              + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))' "$tmp/image.png"
# every table of `synth --list`: its rows, without the header lines
for arch in $($wgml synth --list | awk 'NF > 0 && $1 != "name" {print $1}'); do
    $wgml synth --arch "$arch" --type Q8_0 --layers 1 -o "$tmp/$arch.gguf" 2>"$tmp/stderr" ||
        { cat "$tmp/stderr" >&2; die "synth --arch $arch"; }
    # each with its task: generate, embed, rerank, transcribe or embed-image (wgml info names it)
    task=$($wgml info "$tmp/$arch.gguf" | awk '$1 == "tasks:" {print $2}')
    case ${task%,} in
    embed-image) cmd=(embed -m "$tmp/$arch.gguf" --backend cpu --image "$tmp/image.png") ;;
    embed) cmd=(embed -m "$tmp/$arch.gguf" --backend cpu "Hello" "world") ;;
    rerank) cmd=(rerank -m "$tmp/$arch.gguf" --backend cpu -q "Hello" "world") ;;
    transcribe) cmd=(transcribe -m "$tmp/$arch.gguf" --backend cpu -l en --max-tokens 4 --no-fallback "$tmp/tone.wav") ;;
    *) cmd=(run -m "$tmp/$arch.gguf" --backend cpu -n 4 --temp 0 -p "Hello") ;;
    esac
    $wgml "${cmd[@]}" >/dev/null 2>"$tmp/stderr" ||
        { cat "$tmp/stderr" >&2; die "${cmd[0]} on synth $arch"; }
    rm -f "$tmp/$arch.gguf"
    say "synth --arch $arch: written, ${cmd[0]} ran"
done

adapter=${WGML_FRESH_VERIFY_ADAPTER:-llvmpipe}
if [ "$adapter" != none ]; then
    $wgml verify --adapter "$adapter" --quick >"$tmp/verify" 2>&1 || { cat "$tmp/verify" >&2; die "verify --adapter $adapter"; }
    grep -q '^e2e .*stories260K.gguf.*PASS$' "$tmp/verify" || { cat "$tmp/verify" >&2; die "verify ran no end-to-end case"; }
    tail -n 2 "$tmp/verify"
fi
# The demo server (scripts/serve-web.sh runs it): the page and its default model URL.
node scripts/serve-web.mjs --port 0 --quiet >"$tmp/serve.log" 2>&1 &
server=$!
url=""
for _ in $(seq 50); do
    url=$(sed -n 's/^open \(http.*\)web\/$/\1/p' "$tmp/serve.log")
    [ -n "$url" ] && break
    sleep 0.1
done
[ -n "$url" ] || { kill $server; cat "$tmp/serve.log" >&2; die "the demo server did not start"; }
default=$(sed -n 's/.*id="model-url"[^>]*value="\.\.\/\([^"]*\)".*/\1/p' web/index.html)
ok=1
node -e '
const [page, model, file] = process.argv.slice(1);
const want = require("fs").readFileSync(file);
(async () => {
  const p = await fetch(page), m = await fetch(model);
  const got = Buffer.from(await m.arrayBuffer());
  process.exit(p.ok && m.ok && got.equals(want) ? 0 : 1);
})().catch(() => process.exit(1));' "${url}web/" "${url}${default}" models/stories260K.gguf || ok=0
kill $server
[ $ok = 1 ] || die "the demo server does not give ${url}web/ and its default model ${url}${default}"
say "demo server: ${url}web/ and ${url}${default}"
say "ok"
