#!/usr/bin/env python3
"""CLIP's and SigLIP's text tokenizers (`wgml tokenize -m FOLDER`) against the reference
(text_tokenizers_ref.py) on a few hundred strings.

    test_text_tokenizers.py WGML_BINARY

Writes tokenizer folders with hf_tokenizer_files.py (CLIP: tokenizer.json with merges as
strings, and a smaller one with merges as pairs; SigLIP: spiece.model, and tokenizer.json;
Gemma's SentencePiece BPE in tokenizer.json, as SigLIP 2 ships it),
tokenizes every string in one `wgml tokenize -0` run per folder, and compares ids with the
reference. Invalid UTF-8 goes through too (it must give ids, not a crash) but is not
compared. Strings not in NFC check CLIP's composition; compatibility characters (full-width,
ligatures, fractions, ...) SigLIP's nmt_nfkc. Exit 0: all equal; 1: a difference (each one printed).
"""

import os
import random
import subprocess
import sys
import tempfile
import time
import unicodedata

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_tokenizer_files as files  # noqa: E402
import text_tokenizers_ref as ref  # noqa: E402

FIXED = [
    "", " ", "   ", "\t\n", "a", "A", "a photo of a cat", "A Photo Of A CAT", "  leading and trailing  ",
    "multiple   spaces\t\tand\n\nnewlines", "Hello, World!", "hello world", "HELLO WORLD",
    "it's", "It's here", "we're they've I'm you'll he'd", "don't", "''s", "'S", "rock'n'roll",
    "The quick brown fox jumps over the lazy dog.", "a dog's toy; two cats' toys", "e-mail: a@b.c",
    "123", "3.14159", "1,000,000 dollars", "year 2024", "x1y2z3", "٣٤٥ arabic digits", "½ ⅓ Ⅻ",
    "naïve café résumé", "Straße", "ÉCOLE ÉLÉMENTAIRE", "İstanbul", "ΣΟΦΟΣ σοφός ΟΔΟΣ", "Ωmega",
    "Привет, мир!", "こんにちは世界", "你好，世界", "안녕하세요", "مرحبا بالعالم", "שלום עולם", "नमस्ते दुनिया",
    "emoji 😀😃😄 🐱‍👤 👍🏽", "🇫🇷🇩🇪", "a😀b", "tab\tseparated\tvalues", "mixed\u00a0nbsp\u2003em space",
    "<|startoftext|>", "<|endoftext|>", "a <|endoftext|> b", "<|startoftext|>hello<|endoftext|>",
    "<|ENDOFTEXT|> upper", "x<|endoftext|>y", "</s>", "a </s> b", "<unk>", "<pad>", "▁", "a▁b",
    "punctuation!!! ??? ... ,,, ;;; ::", "(parentheses) [brackets] {braces}", "$100 + 5% = #1 @home ^_^ ~/path",
    "quotes \"double\" 'single' `back`", "under_score and-hyphen", "slash/and\\backslash", "a|b&c*d",
    "pneumonoultramicroscopicsilicovolcanoconiosis", "supercalifragilisticexpialidocious" * 5,
    "x" * 500, "ab" * 300, "zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz",
    "photo" * 40, "the" * 100, " ".join(["photo"] * 200),
    "CamelCaseWordsAreHere", "snake_case_words", "UPPER lower Mixed", "ＦＵＬＬＷＩＤＴＨ ｔｅｘｔ",
    "ﬁ ligature", "Ǆ digraph ǅ", "ß ẞ", "ﬀ", "\u0301combining first", "e\u0301 decomposed",
    unicodedata.normalize("NFD", "naïve café résumé Ǖ ệ Ångström ΐ"), "a\u0323\u0302 ordering", "q\u0307\u0323",
    "\u1100\u1161\u11a8 jamo", "\uac00\u11a8", "e\u0301\u0301", "\u0958 exclusion", "\u2126 ohm \u212b",
    "\u0915\u093c", "A\u030a\u0301", "\u0345\u0301", "o\u031b\u0323", "i\u0307 dotted",
]

FRAGMENTS = ["a", "photo", "of", "the", "cat", "Dog", "CAR", "red", "123", "4", "!", ",", ".", "'s", "'ll",
             "don't", "é", "ü", "ñ", "Ж", "λ", "中", "日本", "😀", "🐶", " ", "  ", "\t", "\n", "-", "_", "#",
             "<|endoftext|>", "<|startoftext|>", "tokenizer", "unigram", "viterbi", "xqz", "zebra", "giraffe",
             "flooring", "brainstorm", "Σ", "ς", "İ", "٣", "Ⅻ", "½", "(", ")", "\"", "%", "$", "@",
             "\u0301", "\u0323", "\u0302", "\u0308", "\u0345", "\u031b", "\u1100", "\u1161", "\u11a8", "e", "o"]


def strings(n_random=int(os.environ.get("WGML_TOKENIZER_STRINGS", "260")), seed=7):
    rng = random.Random(seed)
    out = list(FIXED)
    for _ in range(n_random):
        k = rng.randint(1, 12)
        out.append("".join(rng.choice(FRAGMENTS) + (" " if rng.random() < 0.6 else "") for _ in range(k)))
    return [s for s in out if "\0" not in s]


INVALID = [b"\xff", b"abc\xc3", b"\xc3\x28 mixed", b"\xe2\x82", b"\xed\xa0\x80 surrogate", b"\xf8\x88\x80\x80\x80",
           b"\x80\x80\x80", b"ok \xc0\xaf overlong", b"\xf4\x90\x80\x80 past max", b"<|endoftext|>\xfe"]


def run_wgml(wgml, folder, texts, workdir):
    path = os.path.join(workdir, "texts.bin")
    with open(path, "wb") as f:
        for t in texts:
            f.write((t.encode("utf-8") if isinstance(t, str) else t) + b"\0")
    r = subprocess.run([wgml, "tokenize", "-m", folder, "--bos", "-0", "-f", path], capture_output=True, timeout=120)
    if r.returncode != 0:
        raise SystemExit("wgml tokenize -m %s failed (%d): %s" % (folder, r.returncode, r.stderr.decode()[-2000:]))
    lines = r.stdout.decode().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) != len(texts):
        raise SystemExit("wgml tokenize -m %s: %d lines for %d texts" % (folder, len(lines), len(texts)))
    return [[int(x) for x in line.split()] for line in lines]


def load_clip(folder):
    import json
    with open(os.path.join(folder, "tokenizer.json"), encoding="utf-8") as f:
        doc = json.load(f)
    specials = {a["content"]: a["id"] for a in doc["added_tokens"]}
    return ref.ClipBPE(doc["model"]["vocab"], doc["model"]["merges"], specials)


def load_gemma(folder):
    import json
    with open(os.path.join(folder, "tokenizer.json"), encoding="utf-8") as f:
        doc = json.load(f)
    specials = {a["content"]: a["id"] for a in doc["added_tokens"]}
    m = doc["model"]
    return ref.SpmBpe(m["vocab"], [tuple(x) for x in m["merges"]], specials, bos=2, unk=3)


def load_siglip(n_vocab, nfkc=True):
    pieces = files.siglip_pieces(n_vocab)
    specials = {p: i for i, (p, _, t) in enumerate(pieces) if t in (2, 3, 4)}
    return ref.SiglipUnigram(pieces, unk_id=2, eos_id=1, specials=specials, nfkc=nfkc)


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    wgml = sys.argv[1]
    texts = strings()
    failures = 0
    t0 = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        cases = []
        d = os.path.join(tmp, "clip")
        files.write_clip_tokenizer(d)
        cases.append(("clip tokenizer.json", d, load_clip(d)))
        d = os.path.join(tmp, "clip_pairs")
        files.write_clip_tokenizer(d, n_vocab=3000, pairs=True)
        cases.append(("clip tokenizer.json, merges as pairs, 3000 tokens", d, load_clip(d)))
        sig = load_siglip(32000)
        d = os.path.join(tmp, "siglip_spiece")
        files.write_siglip_tokenizer(d, form="spiece")
        cases.append(("siglip spiece.model", d, sig))
        d = os.path.join(tmp, "siglip_json")
        files.write_siglip_tokenizer(d, form="json")
        cases.append(("siglip tokenizer.json", d, sig))
        d = os.path.join(tmp, "siglip_json_identity")
        files.write_siglip_tokenizer(d, n_vocab=3000, form="json", nfkc=False)
        cases.append(("siglip tokenizer.json without a normalizer, 3000 pieces", d, load_siglip(3000, nfkc=False)))
        d = os.path.join(tmp, "gemma_json")
        files.write_gemma_tokenizer(d)
        cases.append(("SentencePiece BPE tokenizer.json (Gemma's, SigLIP 2's)", d, load_gemma(d)))
        for name, folder, tok in cases:
            got = run_wgml(wgml, folder, texts + INVALID, tmp)
            bad = 0
            for text, ids in zip(texts, got):
                want = tok.encode(text)
                if ids != want:
                    bad += 1
                    if bad <= 5:
                        print("%s: %r\n  wgml:      %s\n  reference: %s" % (name, text, ids, want))
            for raw, ids in zip(INVALID, got[len(texts):]):
                if not ids or (ids[-1] != tok.eos if tok.eos is not None else ids[0] != tok.bos):
                    bad += 1
                    print("%s: invalid UTF-8 %r gave %s" % (name, raw, ids))
            print("%s: %d strings, %d differ" % (name, len(texts), bad))
            failures += bad
    print("%.1f s" % (time.time() - t0))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
