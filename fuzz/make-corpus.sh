#!/usr/bin/env bash
# make-corpus.sh - fills fuzz/corpus-run/<target>/ (gitignored) with seed inputs.
#
#   fuzz/make-corpus.sh            (after building with -DWGML_FUZZ=ON into build-fuzz)
#
# The seeds are written by wgml_fuzz_seeds (fuzz/make_seeds.c) from ../shared:
# small synthetic GGUFs and models, the shared vocabularies cut down, tiny
# llama2.c checkpoint + tokenizer pairs, the tokenizer test strings, small
# PyTorch checkpoints and bare pickles (fuzz_pth), small whisper.cpp ggml
# .bin files (fuzz_whisper_bin), small safetensors files and shard indexes
# (fuzz_safetensors), small JPEGs and PNGs (fuzz_image, written here with Pillow). Inputs the
# fuzzers found earlier stay: the corpus only grows.
# Environment: WGML_FUZZ_BUILD (default build-fuzz), WGML_SHARED (default ../shared).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${WGML_FUZZ_BUILD:-$root/build-fuzz}
shared=${WGML_SHARED:-$root/../shared}
seeds=$build/fuzz/wgml_fuzz_seeds
if [ ! -x "$seeds" ]; then
  echo "make-corpus.sh: $seeds not found; build first:" >&2
  echo "  cmake -S . -B build-fuzz -G Ninja -DCMAKE_C_COMPILER=clang -DWGML_FUZZ=ON && ninja -C build-fuzz" >&2
  exit 1
fi
mkdir -p "$root/fuzz/corpus-run"
"$seeds" "$shared" "$root/fuzz/corpus-run"
# fuzz_cli: command lines (arguments one per line, then NUL and a file's bytes;
# see fuzz/fuzz_cli.c), some with a small model or prompt as the file.
cli=$root/fuzz/corpus-run/cli
mkdir -p "$cli"
seed() { printf '%b' "$1" > "$cli/seed-$2"; }
seed 'run\n-m\n@model\n-p\nOnce upon a time\n-n\n8' run-prompt
seed 'run\n-m\n@model\n-f\n@file\n-n\n4\n--temp\n0.8\n--top-k\n40\n--seed\n7\0Once upon a time, there was' run-file
seed 'run\n-m\n@file\n-n\n2\0GGUF\x03\0\0\0' run-bad-model
seed 'run\n-m\n@model\n-p\n\xff\xfe bad utf8\n-n\n2\n--no-bos' run-utf8
seed 'info\n@model' info
seed 'info\n@file\n--tensors\0GGUF\x03\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0' info-file
seed 'tokenize\n-m\n@vocab\n--bos\nHello world' tokenize
seed 'tokenize\n-m\n@model\n-f\n@file\0text from a file' tokenize-file
seed 'convert\nllama2c\n@ckpt\n@tok\n-o\n@out' convert
seed 'convert\nllama2c\n@file\n@tok\n-o\n@out\0\x08\0\0\0' convert-bad
seed 'quantize\n@model\n@out\nq8_0' quantize
seed 'quantize\n@file\n@out\nQ4_K_M\0GGUF' quantize-bad
# fuzz_chat_template: the shared chat templates, each followed by a NUL and a
# conversation (see fuzz/fuzz_chat_template.c), and a few small language samples.
ct=$root/fuzz/corpus-run/chat_template
mkdir -p "$ct"
conv='[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "Bye"}]'
for f in "$shared"/chat/templates/*.jinja; do
  [ -f "$f" ] || continue
  { cat "$f"; printf '\0%s' "$conv"; } > "$ct/seed-$(basename "$f" .jinja)"
done
printf '%s' "{% for m in messages %}{{ loop.index }}{{ m.role | upper }}{% if not loop.last %}, {% endif %}{% endfor %}" > "$ct/seed-loop"
printf '%s' "{% set ns = namespace(a=[]) %}{% macro f(x) %}{{ x | tojson(indent=2) }}{% endmacro %}{{ f(messages[1:]) }}{{ 'a b'.split() }}" > "$ct/seed-macro"
printf '%s' "{%- raw -%} {{ x }} {%- endraw %}{# c #}{{ (1, 2)[::-1] ~ 2 ** 3 // 2 }}{{ 'x' if true else y }}" > "$ct/seed-misc"
# values that contain themselves or nest past the depth limit: plain, and in the values mode (a leading
# 0x01 byte: fuzz_chat_template.c's prelude defines l, d, m, t, ns and big)
printf '%s' "{% set l = [] %}{% set _ = l.append(l) %}{% if l == l %}{{ l }}{{ [l, l] | sort }}{{ l in l }}{% endif %}{{ l | tojson }}" > "$ct/seed-selfref"
printf '%s' "{% set ns = namespace(l=[], m=[]) %}{% for i in range(300) %}{% set ns.l = [ns.l] %}{% set ns.m = [ns.m] %}{% endfor %}{{ ns.l == ns.m }}{{ ns.l | string }}" > "$ct/seed-deep"
printf '\001%s' "{{ l == l }}{{ l < l }}{{ l }}{{ d }}{{ ns }}{{ [l, m, l] | unique | list }}{{ big[1.0] }}{{ big | length }}{{ m == l }}{{ ns.l == ns.m }}{{ d | tojson }}" > "$ct/seed-values"
printf '\001%s' "{{ [l, l] | max }}{{ l.count(d) }}{{ [m] | select('equalto', m) | list }}{{ big[l] is defined }}{{ ns.d | tojson(indent=1) }}{{ t }}" > "$ct/seed-values-2"
printf '%s' "{{ '{2147483648}'.format('a') }}{{ [1, 2, 3][1::9223372036854775807] }}{{ range(9223372036854775802, 9223372036854775807) | list }}{{ '' * 1000000000000000000 }}{{ '99999999999999999999' | int }}" > "$ct/seed-ints"
# fuzz_g2p: byte 0 picks the stand-in phonemizer's ways (see fuzz/fuzz_g2p.c),
# the rest is English text: the shared G2P sentences, with words alone or not,
# American or British, the words-alone answer refused.
gp=$root/fuzz/corpus-run/g2p
mkdir -p "$gp"
k=0
if [ -f "$shared/kokoro/g2p-en-us.tsv" ]; then
  while IFS=$'\t' read -r text _; do
    k=$((k + 1))
    for w in 0 1 3 5; do { printf "\\x0$w"; printf '%s' "$text"; } > "$gp/seed-$k-$w"; done
  done < "$shared/kokoro/g2p-en-us.tsv"
fi
# fuzz_grammar: GBNF text, a 0x00 byte, text to follow through it (see fuzz/fuzz_grammar.c).
gr=$root/fuzz/corpus-run/grammar
mkdir -p "$gr"
printf 'root ::= object\nvalue ::= object | array | string | number | ("true" | "false" | "null") ws\nobject ::= "{" ws ( string ":" ws value ("," ws string ":" ws value)* )? "}" ws\narray ::= "[" ws ( value ("," ws value)* )? "]" ws\nstring ::= "\\"" ( [^"\\\\] | "\\\\" ["\\\\/bfnrt] )* "\\"" ws\nnumber ::= "-"? [0-9]{1,16} ("." [0-9]+)? ws\nws ::= | " " | "\\n" [ \\t]{0,20}\n\000{"a": [1, "x", {"b": null}]}' > "$gr/seed-json"
printf 'root ::= "ab" [0-9]+ ("x" | "yz")? [^\\n] . "\\u00e9"{1,3} # c\n\000ab12yz!\303\251\303\251' > "$gr/seed-constructs"
printf 'root ::= p\np ::= "(" p* ")"\n\000(()(()))' > "$gr/seed-recursion"
printf 'root ::= ("a" | "a" "a"){0,40} b\nb ::= "b"?\000aaaaaaaaaaaaaaaaaaaab' > "$gr/seed-ambiguous"
# fuzz_json_schema: each schema of tests/data/json_schemas.json, alone.
js=$root/fuzz/corpus-run/json_schema
mkdir -p "$js"
python3 - "$root/tests/data/json_schemas.json" "$js" <<'PY'
import json, sys
for i, e in enumerate(json.load(open(sys.argv[1], encoding="utf-8"))):
    open(f"{sys.argv[2]}/seed-{i:02d}", "w", encoding="utf-8").write(json.dumps(e["schema"], ensure_ascii=False))
PY
# fuzz_hf: config.json (NUL, preprocessor_config.json) of each architecture fuzz/fuzz_hf.c's
# tiny model.safetensors holds (width 4, 1 layer, 4 x 4 images of 2 x 2 patches, 3 labels).
hf=$root/fuzz/corpus-run/hf
mkdir -p "$hf"
tower='"hidden_size": 4, "intermediate_size": 8, "num_hidden_layers": 1, "num_attention_heads": 1, "image_size": 4, "patch_size": 2'
printf '%s' "{\"model_type\": \"clip\", \"projection_dim\": 4, \"vision_config\": {$tower, \"hidden_act\": \"quick_gelu\"}}" > "$hf/seed-clip"
printf '%s\000%s' "{\"model_type\": \"clip\", \"projection_dim\": 4, \"vision_config\": {$tower}}" \
  '{"crop_size": 4, "do_center_crop": true, "do_normalize": true, "do_resize": true, "feature_extractor_type": "CLIPFeatureExtractor", "image_mean": [0.48145466, 0.4578275, 0.40821073], "image_std": [0.26862954, 0.26130258, 0.27577711], "resample": 3, "size": 4}' > "$hf/seed-clip-prep"
printf '%s\000%s' "{\"model_type\": \"siglip\", \"vision_config\": {$tower, \"hidden_act\": \"gelu_pytorch_tanh\"}}" \
  '{"do_normalize": true, "do_rescale": true, "do_resize": true, "image_mean": [0.5, 0.5, 0.5], "image_processor_type": "SiglipImageProcessor", "image_std": [0.5, 0.5, 0.5], "resample": 3, "rescale_factor": 0.00392156862745098, "size": {"height": 4, "width": 4}}' > "$hf/seed-siglip"
printf '%s' "{\"model_type\": \"vit\", $tower, \"id2label\": {\"0\": \"a\", \"1\": \"b\", \"2\": \"c\"}}" > "$hf/seed-vit"
printf '%s' "{\"model_type\": \"siglip_vision_model\", $tower, \"layer_norm_eps\": 1e-6}" > "$hf/seed-siglip-vision"
# fuzz_hf_tokenizer: small tokenizer.json files (CLIP's BPE with merges as strings and as pairs,
# a unigram model; flag byte 0) and spiece.model files written by tests/reference/hf_tokenizer_files.py
# (flag byte 1: alone, 3: with a SiglipTokenizer config); any python3 will do (standard library).
ht=$root/fuzz/corpus-run/hf_tokenizer
mkdir -p "$ht"
clipv='"h": 0, "i": 1, "i</w>": 2, "hi</w>": 3, "a</w>": 4, "<|startoftext|>": 5, "<|endoftext|>": 6'
clipa='[{"id": 5, "content": "<|startoftext|>", "special": true}, {"id": 6, "content": "<|endoftext|>", "special": true}]'
printf '\000%s' "{\"added_tokens\": $clipa, \"post_processor\": {\"type\": \"RobertaProcessing\", \"sep\": [\"<|endoftext|>\", 6], \"cls\": [\"<|startoftext|>\", 5]}, \"model\": {\"type\": \"BPE\", \"end_of_word_suffix\": \"</w>\", \"vocab\": {$clipv}, \"merges\": [\"h i</w>\"]}}" > "$ht/seed-clip"
printf '\000%s\000%s' "{\"added_tokens\": $clipa, \"model\": {\"type\": \"BPE\", \"end_of_word_suffix\": \"</w>\", \"unk_token\": \"<|endoftext|>\", \"vocab\": {$clipv}, \"merges\": [[\"h\", \"i</w>\"]]}}" \
  '{"tokenizer_class": "CLIPTokenizer", "bos_token": {"content": "<|startoftext|>"}, "eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>"}' > "$ht/seed-clip-pairs"
printf '\000%s\000%s' '{"added_tokens": [{"id": 1, "content": "</s>", "special": true}], "pre_tokenizer": {"type": "Metaspace", "prepend_scheme": "always"}, "post_processor": {"type": "TemplateProcessing", "single": [{"Sequence": {"id": "A"}}, {"SpecialToken": {"id": "</s>"}}], "special_tokens": {"</s>": {"id": "</s>", "ids": [1]}}}, "model": {"type": "Unigram", "unk_id": 2, "byte_fallback": true, "vocab": [["<pad>", 0], ["</s>", 0], ["<unk>", 0], ["\u2581", -1], ["\u2581a", -2], ["a", -3], ["b", -4], ["<0x41>", -9]]}}' \
  '{"tokenizer_class": "SiglipTokenizer", "pad_token": "</s>", "unk_token": {"content": "<unk>"}}' > "$ht/seed-unigram"
printf '\000%s\000%s' '{"added_tokens": [{"id": 0, "content": "<pad>", "special": true}, {"id": 1, "content": "<eos>", "special": true}, {"id": 2, "content": "<bos>", "special": true}], "normalizer": {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}, "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<bos>"}}, {"Sequence": {"id": "A"}}], "special_tokens": {"<bos>": {"id": "<bos>", "ids": [2]}}}, "model": {"type": "BPE", "byte_fallback": true, "unk_token": "<unk>", "vocab": {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3, "<0x41>": 4, "\u2581": 5, "a": 6, "b": 7, "\u2581a": 8, "ab": 9, "\u2581ab": 10}, "merges": [["\u2581", "a"], ["a", "b"], ["\u2581a", "b"], ["\u2581", "ab"]]}}' \
  '{"tokenizer_class": "GemmaTokenizer", "add_bos_token": true}' > "$ht/seed-spm-bpe"
for py in python3 /usr/bin/python3; do
  if "$py" -c 'import struct' 2>/dev/null; then
    "$py" - "$root/tests/reference" "$ht" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
import hf_tokenizer_files as h
pieces = h.siglip_pieces(64)
with open(sys.argv[2] + "/seed-spiece", "wb") as f:
    f.write(b"\x03" + h.spiece_model_bytes(pieces))
with open(sys.argv[2] + "/seed-spiece-bpe", "wb") as f:
    f.write(b"\x01" + h.spiece_model_bytes(pieces[:40], model_type=2, bos_id=-1))
PY
    break
  fi
done
# fuzz_image: small JPEGs and PNGs of every kind (tools/wgml/image_file.c), written by Pillow
# (Debian's python3-pil) and, for what Pillow cannot write (interlaced and 16-bit RGB PNGs, eXIf
# after IDAT), by a few lines of PNG writer; EXIF orientations in both byte orders.
im=$root/fuzz/corpus-run/image
mkdir -p "$im"
pil=
for py in python3 /usr/bin/python3; do
  if "$py" -c 'import PIL.Image' 2>/dev/null; then pil=$py; break; fi
done
if [ -z "$pil" ]; then
  echo "make-corpus.sh: no python3 with Pillow (apt install python3-pil): fuzz_image starts without seeds" >&2
else
  "$pil" - "$im" <<'PY'
import io, struct, sys, zlib
from PIL import Image
out = sys.argv[1]
w, h = 24, 16
base = Image.new("RGB", (w, h))
base.putdata([(x * 10 % 256, y * 16 % 256, (x * y * 7) % 256) for y in range(h) for x in range(w)])
def save(name, im, fmt, **kw):
    b = io.BytesIO()
    im.save(b, fmt, **kw)
    open(f"{out}/seed-{name}", "wb").write(b.getvalue())
    return b.getvalue()
def exif(o, be=False):
    e = ">" if be else "<"
    return (b"MM\0*" if be else b"II*\0") + struct.pack(e + "IHHHIHHI", 8, 1, 0x0112, 3, 1, o, 0, 0)
save("baseline-420.jpg", base, "JPEG", quality=80)
save("baseline-444.jpg", base, "JPEG", quality=80, subsampling=0)
save("progressive.jpg", base, "JPEG", quality=80, progressive=True)
save("optimized.jpg", base, "JPEG", quality=50, optimize=True)
save("gray.jpg", base.convert("L"), "JPEG")
save("cmyk.jpg", base.convert("CMYK"), "JPEG")
save("exif-6.jpg", base, "JPEG", exif=b"Exif\0\0" + exif(6))
save("exif-3-mm.jpg", base, "JPEG", exif=b"Exif\0\0" + exif(3, True))
for mode in ("RGB", "RGBA", "L", "LA", "P", "1", "I"):
    save(f"{mode}.png", base.convert(mode), "PNG")
save("P-trns.png", base.convert("P"), "PNG", transparency=2)
save("exif-8.png", base, "PNG", exif=exif(8))
def chunk(t, d):
    return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xFFFFFFFF)
def png(name, depth, ctype, ch, interlace=False, post=b""):
    passes = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)]
    raw = b""
    for x0, y0, dx, dy in passes if interlace else [(0, 0, 1, 1)]:
        for y in range(y0, h, dy) if x0 < w else []:
            vals = [(x * 37 + y * 11 + c * 5) % (1 << depth) for x in range(x0, w, dx) for c in range(ch)]
            row = b"".join(struct.pack(">H", v) for v in vals) if depth == 16 else bytes(vals)
            raw += b"\0" + row
    data = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, depth, ctype, 0, 0, int(interlace)))
            + chunk(b"IDAT", zlib.compress(raw)) + post + chunk(b"IEND", b""))
    open(f"{out}/seed-{name}", "wb").write(data)
png("rgb16.png", 16, 2, 3)
png("rgba16-interlaced.png", 16, 6, 4, True)
png("gray-interlaced.png", 8, 0, 1, True)
png("exif-after-idat.png", 8, 2, 3, post=chunk(b"eXIf", exif(5, True)))
PY
fi
# fuzz_kokoro_config: the shared v1.0 and kokoro-tiny config.json files.
kc=$root/fuzz/corpus-run/kokoro_config
mkdir -p "$kc"
for f in "$shared"/kokoro/config-*.json; do
  [ -f "$f" ] && cp "$f" "$kc/seed-$(basename "$f")"
done
# fuzz_serve: byte 0 picks the mode (see fuzz/fuzz_serve.c): c and p a body for
# POST /v1/chat/completions and /v1/completions, r a raw request, g a path to
# GET, m a body sent on several connections at once, d a client that leaves.
sv=$root/fuzz/corpus-run/serve
mkdir -p "$sv"
sseed() { printf '%s' "$2" > "$sv/seed-$1"; }          # mode letter and text, as is
rseed() { { printf r; printf '%s' "$2" | sed -z 's/\n/\r\n/g'; } > "$sv/seed-$1"; }  # raw: lines end in CRLF
# $1: name, $2: bytes as printf %b (mode byte and binary fields)
bseed() { printf '%b' "$2" > "$sv/seed-$1"; }
user='{"role": "user", "content": "Tell me a story"}'
conv='[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello! Once upon a time"}, {"role": "user", "content": "More"}]'
sseed chat "c{\"messages\": [$user], \"max_tokens\": 8}"
sseed chat-conv "c{\"model\": \"stories260K\", \"messages\": $conv, \"max_tokens\": 12, \"temperature\": 0.7, \"top_p\": 0.9, \"seed\": 42}"
sseed chat-stream "c{\"messages\": $conv, \"stream\": true, \"stream_options\": {\"include_usage\": true}, \"max_tokens\": 16, \"stop\": [\".\", \"The end\"]}"
sseed chat-stream-plain "c{\"messages\": [$user], \"stream\": true, \"stream_options\": {\"include_usage\": false}, \"stop\": \" \", \"seed\": 7}"
sseed chat-schema "c{\"messages\": [$user], \"max_tokens\": 24, \"response_format\": {\"type\": \"json_schema\", \"json_schema\": {\"name\": \"x\", \"schema\": {\"type\": \"object\", \"properties\": {\"n\": {\"type\": \"integer\", \"minimum\": 0, \"maximum\": 99}, \"s\": {\"type\": \"string\", \"maxLength\": 4}}, \"required\": [\"n\"]}}}}"
sseed chat-json-object "c{\"messages\": [$user], \"max_tokens\": 16, \"stream\": true, \"response_format\": {\"type\": \"json_object\"}}"
sseed chat-grammar "c{\"messages\": [$user], \"max_tokens\": 8, \"grammar\": \"root ::= [a-z]{1,5} \\\".\\\"\"}"
sseed chat-tools "c{\"messages\": [$user], \"max_tokens\": 40, \"tool_choice\": \"required\", \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"integer\"}}, \"required\": [\"a\"]}}}]}"
sseed chat-tools-auto "c{\"messages\": [$user, {\"role\": \"assistant\", \"content\": null, \"tool_calls\": [{\"id\": \"c1\", \"type\": \"function\", \"function\": {\"name\": \"f\", \"arguments\": \"{\\\"a\\\": 1}\"}}]}, {\"role\": \"tool\", \"tool_call_id\": \"c1\", \"content\": \"2\"}], \"max_tokens\": 8, \"stream\": true, \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\"}}]}"
sseed chat-logit-bias "c{\"messages\": [$user], \"max_tokens\": 8, \"logit_bias\": {\"5\": 100, \"17\": -100}, \"tool_choice\": \"auto\", \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"g\"}}]}"
sseed chat-greedy "c{\"messages\": [$user], \"temperature\": 0, \"max_completion_tokens\": 4, \"n\": 1, \"stream\": false}"
sseed chat-full "c{\"messages\": [$user]}"
sseed chat-parts "c{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"Hi\"}]}, {\"role\": \"tool\", \"content\": null}]}"
sseed chat-empty "c{\"messages\": []}"
sseed chat-no-role "c{\"messages\": [{\"content\": \"Hi\"}, 3]}"
sseed chat-not-array "c{\"messages\": {\"role\": \"user\"}}"
sseed chat-types "c{\"messages\": [$user], \"stream\": \"yes\", \"max_tokens\": \"8\", \"temperature\": 3, \"top_p\": 0, \"seed\": 1.5}"
sseed chat-types2 "c{\"messages\": [$user], \"n\": 2, \"stop\": [1], \"stream_options\": [], \"model\": 5}"
sseed chat-stops "c{\"messages\": [$user], \"stop\": [\"a\", \"b\", \"c\", \"d\", \"e\"]}"
sseed chat-stop-empty "c{\"messages\": [$user], \"stop\": \"\"}"
sseed chat-stop-nul "c{\"messages\": [$user], \"stop\": [\"\\u0000\", \"x\\u0000y\"], \"max_tokens\": 8}"
sseed chat-huge "c{\"messages\": [$user], \"max_tokens\": 99999999999999999999, \"temperature\": 1e400, \"seed\": -1, \"top_p\": -0.0}"
sseed chat-negative "c{\"messages\": [$user], \"max_tokens\": -5, \"max_completion_tokens\": 0}"
sseed chat-unicode "c{\"messages\": [{\"role\": \"user\", \"content\": \"\\u00e9\\ud83d\\ude00 \\ud800 \\u0000 caf\\u00e9\"}], \"max_tokens\": 4}"
sseed chat-bad-json "c{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}"
sseed chat-trailing "c{\"messages\": [$user]} {}"
sseed chat-array "c[{\"messages\": []}]"
sseed chat-deep "c$(printf '%0.s[' $(seq 100))$(printf '%0.s]' $(seq 100))"
printf 'c{"messages": [{"role": "user", "content": "\xff\xfe\xc0\x80"}]}' > "$sv/seed-chat-bad-utf8"
long=$(head -c 9000 /dev/zero | tr '\0' a)
sseed chat-over-limit "c{\"messages\": [{\"role\": \"user\", \"content\": \"$long\"}]}"
words=$(printf 'once upon a time %.0s' $(seq 40))
sseed chat-over-context "c{\"messages\": [{\"role\": \"user\", \"content\": \"$words\"}]}"
sseed comp "p{\"prompt\": \"Once upon a time\", \"max_tokens\": 8}"
sseed comp-array "p{\"prompt\": [\"Once upon a time\"], \"stream\": true, \"stream_options\": {\"include_usage\": true}, \"stop\": \".\"}"
sseed comp-default "p{\"prompt\": \"The cat\", \"temperature\": 0, \"seed\": 3}"
sseed comp-empty "p{\"prompt\": \"\"}"
sseed comp-types "p{\"prompt\": 123}"
sseed comp-two "p{\"prompt\": [\"a\", \"b\"]}"
sseed comp-tokens "p{\"prompt\": [1, 2, 3]}"
sseed comp-over-context "p{\"prompt\": \"$words\"}"
sseed comp-nul "p{\"prompt\": \"a\\u0000b\", \"max_tokens\": 2}"
sseed comp-whitespace "p  {\"prompt\": \"x\", \"max_tokens\": 1}  "
body='{"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4}'
cbody='{"prompt": "Once upon a time", "max_tokens": 4, "stream": true}'
rseed raw-post "POST /v1/chat/completions HTTP/1.1
Content-Type: application/json
Content-Length: ${#body}

$body"
rseed raw-keepalive "POST /v1/completions HTTP/1.1
Content-Type: application/json
Content-Length: ${#cbody}

${cbody}GET /health HTTP/1.1
Host: x

GET /v1/models HTTP/1.1

"
rseed raw-preflight "OPTIONS /v1/chat/completions HTTP/1.1
Origin: https://page.example
Access-Control-Request-Method: POST

OPTIONS /v1/models HTTP/1.1

POST /v1/completions HTTP/1.1
Content-Type: text/plain
Content-Length: ${#cbody}

${cbody}"
rseed raw-http10-stream "POST /v1/completions HTTP/1.0
Content-Type: application/json
Content-Length: ${#cbody}

${cbody}"
rseed raw-chunked "POST /v1/completions HTTP/1.1
Content-Type: application/json
Transfer-Encoding: chunked

10
{\"prompt\": \"Once
$(printf '%x' $((${#cbody} - 16)))
${cbody:16}
0

"
rseed raw-chunked-bad "POST /v1/chat/completions HTTP/1.1
Content-Type: application/json
Transfer-Encoding: chunked

zz
{}
fffffffffffffffff
"
rseed raw-chunked-big "POST /v1/completions HTTP/1.1
Content-Type: application/json
Transfer-Encoding: chunked

$(printf '%x' 8994)
{\"prompt\": \"${long:0:8980}\"}
0

"
rseed raw-te-gzip "POST /v1/completions HTTP/1.1
Content-Type: application/json
Transfer-Encoding: gzip
Content-Length: 2

{}"
rseed raw-no-length "POST /v1/completions HTTP/1.1
Content-Type: application/json
Host: x

$cbody"
rseed raw-length-short "POST /v1/completions HTTP/1.1
Content-Type: application/json
Content-Length: 500

$cbody"
rseed raw-length-bad "POST /v1/completions HTTP/1.1
Content-Type: application/json
Content-Length: -1

{}"
rseed raw-length-huge "POST /v1/completions HTTP/1.1
Content-Type: application/json
Content-Length: 99999999999999999999999

{}"
rseed raw-length-text "POST /v1/completions HTTP/1.1
Content-Type: application/json
Content-Length: abc

{}"
rseed raw-length-two "POST /v1/completions HTTP/1.1
Content-Type: application/json
Content-Length: 2
Content-Length: 9000

{}"
rseed raw-over-limit "POST /v1/chat/completions HTTP/1.1
Content-Type: application/json
Content-Length: 9000

{\"messages\": \"${long:0:8980}\"}"
rseed raw-methods "BREW /health HTTP/1.1

PUT /v1/models HTTP/1.1
Content-Length: 0

DELETE /health HTTP/1.1

"
rseed raw-head "HEAD /health HTTP/1.1

HEAD /metrics HTTP/1.1

"
rseed raw-options "OPTIONS * HTTP/1.1

"
rseed raw-options-path "OPTIONS /v1/chat/completions HTTP/1.1
Origin: http://x
Access-Control-Request-Method: POST

"
rseed raw-get-chat "GET /v1/chat/completions HTTP/1.1

"
rseed raw-http10 "POST /v1/completions HTTP/1.0
Content-Type: application/json
Content-Length: ${#cbody}

$cbody"
rseed raw-http2 "GET /health HTTP/2.0

"
rseed raw-http-bad "GET /health HTTP/9.x

GET /health FTP/1.1

"
rseed raw-http09 "GET /health
"
rseed raw-absolute "GET http://127.0.0.1/health HTTP/1.1

GET http://elsewhere:80/v1/models HTTP/1.1

"
rseed raw-websocket "GET /health HTTP/1.1
Connection: Upgrade
Upgrade: websocket
Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==
Sec-WebSocket-Version: 13

"
rseed raw-h2c "GET /health HTTP/1.1
Connection: Upgrade, HTTP2-Settings
Upgrade: h2c

"
rseed raw-expect "POST /v1/completions HTTP/1.1
Content-Type: application/json
Expect: 100-continue
Content-Length: ${#cbody}

$cbody"
rseed raw-auth "GET /v1/models HTTP/1.1
Authorization: Bearer nothing

"
rseed raw-dots "GET /v1/../health HTTP/1.1

GET /health%00x HTTP/1.1

GET /v1//models?x=1#y HTTP/1.1

"
rseed raw-header-junk "GET /health HTTP/1.1
no colon here
: empty name
X:
 folded

"
{ printf 'rGET /health HTTP/1.1\r\n'; for i in $(seq 70); do printf 'X-H%d: %d\r\n' "$i" "$i"; done; printf '\r\n'; } > "$sv/seed-raw-many-headers"
{ printf 'rGET /health HTTP/1.1\r\nX-Long: '; head -c 17000 /dev/zero | tr '\0' b; printf '\r\n\r\n'; } > "$sv/seed-raw-long-header"
printf 'rGET /h\x00ealth HTTP/1.1\r\n\r\n' > "$sv/seed-raw-nul"
printf 'r\r\n\r\nGET /health HTTP/1.1\n\n' > "$sv/seed-raw-bare-lf"
sseed get-models "g/v1/models"
sseed get-health "g/health"
sseed get-metrics "g/metrics"
sseed get-chat "g/v1/chat/completions"
sseed get-unknown "g/v2/nothing"
sseed get-dots "g/v1/./../metrics?format=json"
sseed get-encoded "g/%68ealth%00%zz"
sseed get-root "g"
bseed multi-chat "m\\x04{\"messages\": [$user], \"stream\": true, \"max_tokens\": 8}"
bseed multi-comp "m\\x0a{\"prompt\": \"Once upon a time\", \"max_tokens\": 6}"
bseed multi-bad "m\\x01{\"prompt\": 1}"
bseed leave-now "d\\x00{\"messages\": [$user], \"stream\": true}"
bseed leave-stream "d\\x20{\"messages\": [$user], \"stream\": true}"
bseed leave-comp "d\\x48{\"prompt\": \"Once upon a time\", \"stream\": true, \"max_tokens\": 30}"
bseed leave-plain "d\\x10{\"prompt\": \"Once upon a time\"}"
# Regression inputs (crashes found earlier, now fixed) seed their targets too; tiktoken's
# seeds (rank files and whisper checkpoints' dims pickles) live there only.
mkdir -p "$root/fuzz/corpus-run/tiktoken"
for t in gguf llama2c model_load pth tokenizer chat_template kokoro_config cli serve whisper_bin tiktoken safetensors hf image; do
  if [ -d "$root/tests/data/fuzz/$t" ]; then
    cp "$root/tests/data/fuzz/$t"/* "$root/fuzz/corpus-run/$t/" 2>/dev/null || true
  fi
done
for t in gguf llama2c model_load pth tokenizer chat_template kokoro_config cli serve whisper_bin tiktoken safetensors hf image; do
  printf '%-12s %5d inputs\n' "$t" "$(find "$root/fuzz/corpus-run/$t" -type f | wc -l)"
done
# fuzz_hub: model names, a NUL, then a repository's file list (Hugging Face's tree JSON).
hb=$root/fuzz/corpus-run/hub
mkdir -p "$hb"
tree='[{"type":"file","oid":"0","size":10,"path":"README.md"},{"type":"directory","path":"sub"},{"type":"file","size":100,"path":"m-Q4_K_M.gguf","lfs":{"oid":"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef","size":100}},{"type":"file","size":9,"path":"sub/m-Q8_0.gguf"},{"type":"file","size":5,"path":"mmproj-f16.gguf"},{"type":"file","size":5,"path":"m-00001-of-00002.gguf"}]'
folder='[{"type":"file","size":2,"path":"config.json"},{"type":"file","size":9,"path":"model.safetensors","lfs":{"oid":"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}},{"type":"file","size":2,"path":"tokenizer.json"}]'
printf 'Q4_K_M\000%s' "$tree" > "$hb/seed-tree"
printf '\000%s' "$folder" > "$hb/seed-folder"
printf 'hf://owner/repo:Q8_0' > "$hb/seed-hf-tag"
printf 'hf://owner/repo/sub/file.gguf' > "$hb/seed-hf-file"
printf 'owner/repo:Q4_K_M' > "$hb/seed-short"
printf 'https://user:pw@host:8080/a/../b/model.gguf?x=1#f' > "$hb/seed-url"
printf 'base.en\000[{"type":"file","size":1,"path":"ggml-base.en.bin"},{"type":"file","size":1,"path":"ggml-base.bin"}]' > "$hb/seed-bins"
