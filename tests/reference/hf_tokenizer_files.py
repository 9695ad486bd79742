"""Writers of Hugging Face tokenizer files for test folders (standard library only).

    write_clip_tokenizer(dir, n_vocab=49408, pairs=False, words=None) -> dict
        tokenizer.json (a byte-level BPE with end_of_word_suffix "</w>", as
        CLIPTokenizerFast saves it: vocab, merges, added_tokens, the
        RobertaProcessing post-processor), tokenizer_config.json and
        special_tokens_map.json into folder `dir`. Exactly n_vocab tokens
        (at least 514): ids 0..255 the byte symbols in CLIP's order, 256..511
        the same with "</w>", then one token per merge, then (when the words
        run out) tokens no merge makes, and <|startoftext|> = n_vocab - 2,
        <|endoftext|> = n_vocab - 1. pairs=True writes merges as ["a", "b"]
        pairs instead of "a b" strings. words: the words the merges are built
        from (default: a built-in list, then made-up words).
        Returns {"bos": id, "eos": id, "pad": id, "n_vocab": n, "n_merges": m}.

    write_siglip_tokenizer(dir, n_vocab=32000, form="spiece", words=None) -> dict
        A SentencePiece unigram vocabulary as SigLIP ships it: form "spiece"
        writes spiece.model (the ModelProto protobuf) + tokenizer_config.json
        (SiglipTokenizer, eos/pad "</s>", unk "<unk>"); form "json" writes
        tokenizer.json (model.type "Unigram", the Precompiled normalizer of
        nmt_nfkc; none with nfkc=False) + tokenizer_config.json.
        Ids: 0 <pad>, 1 </s>, 2 <unk>, then "▁", words with and without "▁",
        word halves, and single characters last; scores strictly decreasing.
        Returns {"eos": 1, "pad": 1, "unk": 2, "n_vocab": n}.

    write_gemma_tokenizer(dir, n_vocab=8000, words=None) -> dict
        SentencePiece's BPE as tokenizer.json holds it for Gemma (and so
        SigLIP 2): model.type "BPE" without end_of_word_suffix, byte_fallback,
        vocab and merges, the Replace(" " -> "▁") normalizer (no prefix), the
        TemplateProcessing post-processor adding <bos>; plus
        tokenizer_config.json (GemmaTokenizer). Ids: 0 <pad>, 1 <eos>, 2 <bos>,
        3 <unk>, 4..259 <0x00>..<0xFF>, then "▁", characters, and the pieces of
        words (with and without "▁") in merge order; the merges are every split
        of each piece into two pieces of the vocabulary, ranked by the piece's
        id, as Hugging Face's converter makes them from a SentencePiece model.
        Returns {"bos": 2, "eos": 1, "unk": 3, "n_vocab": n, "n_merges": m}.

All are deterministic and take well under a second for the real sizes.
"""

import json
import os
import struct

BASE_WORDS = (
    "the a of and in on with photo picture image cat dog man woman person people child car bus train plane "
    "boat bird horse tree flower house street city road water sea beach mountain sky cloud sun snow rain "
    "table chair room kitchen food pizza cake apple banana orange red blue green yellow black white brown "
    "small large big little old young new two three four one is are was sitting standing walking running "
    "playing eating holding riding flying next to at by from near under over front back top side group "
    "field grass park window door wall floor bed computer phone book paper ball game team player shirt hat "
    "bag glass cup plate bowl bottle coffee tea milk bread cheese fish chicken night day light dark happy "
    "this that there here it his her their what who where when how not very many some all every drawing "
    "painting art sketch diagram map text sign letter word number time year world hand head face eye hair "
    "animal toy bear elephant zebra giraffe lion tiger forest river lake bridge tower castle school garden "
    "quick lazy jumps fox dogs cats hello world tokenizer unigram viterbi"
).split()


def made_up_words(seed=12345):
    """An endless stream of pronounceable made-up words (a fixed LCG)."""
    onset = ["b", "c", "d", "f", "g", "h", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "z",
             "br", "ch", "dr", "fl", "gr", "pl", "sh", "st", "th", "tr", ""]
    vowel = ["a", "e", "i", "o", "u", "ai", "ea", "oo", "ou", "y"]
    coda = ["", "", "", "n", "r", "s", "t", "l", "m", "nd", "ng"]
    state = seed
    while True:
        state = (state * 6364136223846793005 + 1442695040888963407) % (1 << 64)
        r = state >> 20
        syl = 2 + r % 3
        r //= 3
        w = ""
        for _ in range(syl):
            w += onset[r % len(onset)] + vowel[(r // 28) % len(vowel)] + coda[(r // 280) % len(coda)]
            r //= 3080
            if r < 3080:
                state = (state * 6364136223846793005 + 1442695040888963407) % (1 << 64)
                r ^= state >> 13
        yield w


def word_stream(words):
    for w in words if words is not None else BASE_WORDS:
        yield w
    yield from made_up_words()


def byte_symbols():
    """CLIP's (GPT-2's) byte -> symbol table and the symbol order of its vocabulary."""
    own = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    table, extra = {}, 0
    for b in range(256):
        if b in own:
            table[b] = chr(b)
        else:
            table[b] = chr(0x100 + extra)
            extra += 1
    order = own + [b for b in range(256) if b not in own]
    return table, [table[b] for b in order]


def write_clip_tokenizer(dir, n_vocab=49408, pairs=False, words=None):
    if n_vocab < 514:
        raise ValueError("a CLIP vocabulary needs at least 514 tokens")
    os.makedirs(dir, exist_ok=True)
    table, syms = byte_symbols()
    tokens = syms + [s + "</w>" for s in syms]
    have = set(tokens)
    merges = []
    target = n_vocab - 2
    stream = word_stream(words)
    tries = 0
    while len(tokens) < target and tries < 50 * n_vocab:
        tries += 1
        word = next(stream).lower()
        sym = [table[b] for b in word.encode("utf-8")]
        if len(sym) < 2 or len(sym) > 20:
            continue
        sym[-1] += "</w>"
        cur = sym[0]
        for s in sym[1:]:
            if len(tokens) >= target:
                break
            cand = cur + s
            if cand not in have:
                merges.append((cur, s))
                tokens.append(cand)
                have.add(cand)
            cur = cand
    i = 0
    while len(tokens) < target:
        t = "<|unused_%d|>" % i
        i += 1
        if t not in have:
            tokens.append(t)
            have.add(t)
    tokens += ["<|startoftext|>", "<|endoftext|>"]
    bos, eos = n_vocab - 2, n_vocab - 1

    def added(i, t):
        return {"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
                "normalized": True, "special": True}

    doc = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [added(bos, tokens[bos]), added(eos, tokens[eos])],
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "NFC"}, {"type": "Replace", "pattern": {"Regex": "\\s+"}, "content": " "},
            {"type": "Lowercase"}]},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": "<\\|startoftext\\|>|<\\|endoftext\\|>|'s|'t|'re|'ve|'m|'ll|'d"
                                                   "|[\\p{L}]+|[\\p{N}]|[^\\s\\p{L}\\p{N}]+"},
             "behavior": "Removed", "invert": True},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]},
        "post_processor": {"type": "RobertaProcessing", "sep": [tokens[eos], eos], "cls": [tokens[bos], bos],
                           "trim_offsets": False, "add_prefix_space": False},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<|endoftext|>", "continuing_subword_prefix": "",
                  "end_of_word_suffix": "</w>", "fuse_unk": False, "byte_fallback": False,
                  "vocab": {t: i for i, t in enumerate(tokens)},
                  "merges": [[a, b] for a, b in merges] if pairs else ["%s %s" % m for m in merges]},
    }
    with open(os.path.join(dir, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False)
    cfg = {"tokenizer_class": "CLIPTokenizer", "bos_token": "<|startoftext|>", "eos_token": "<|endoftext|>",
           "unk_token": "<|endoftext|>", "pad_token": "<|endoftext|>", "model_max_length": 77,
           "do_lower_case": True}
    with open(os.path.join(dir, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(cfg, f)
    with open(os.path.join(dir, "special_tokens_map.json"), "w", encoding="utf-8") as f:
        json.dump({k: cfg[k] for k in ("bos_token", "eos_token", "unk_token", "pad_token")}, f)
    return {"bos": bos, "eos": eos, "pad": eos, "n_vocab": n_vocab, "n_merges": len(merges)}


def siglip_pieces(n_vocab=32000, words=None):
    """[(piece, score, type)] of the made-up SigLIP vocabulary (type: 1 normal, 2 unknown, 3 control)."""
    import math
    if n_vocab < 64:
        raise ValueError("a unigram vocabulary needs at least 64 pieces")
    chars = "etaoinshrdlcumwfgypbvkjxqz0123456789"
    pieces = ["<pad>", "</s>", "<unk>", "\u2581"]
    have = set(pieces)
    end = n_vocab - len(chars)
    stream = word_stream(words)
    tries = 0
    while len(pieces) < end and tries < 50 * n_vocab:
        tries += 1
        w = next(stream).lower()
        if len(w) < 2 or len(w) > 24:
            continue
        for p in ("\u2581" + w, w, w[len(w) // 2:]):
            if len(pieces) < end and len(p) >= 2 and p not in have:
                pieces.append(p)
                have.add(p)
    i = 0
    while len(pieces) < end:
        p = "\u2581q%dx" % i
        i += 1
        if p not in have:
            pieces.append(p)
            have.add(p)
    pieces += list(chars)
    out = []
    for i, p in enumerate(pieces):
        t = 3 if i < 2 else 2 if i == 2 else 1
        s = 0.0 if i < 3 else -math.log(i - 1)
        out.append((p, struct.unpack("<f", struct.pack("<f", s))[0], t))
    return out


def _varint(n):
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _field(num, wire, payload):
    key = _varint(num << 3 | wire)
    if wire == 0:
        return key + _varint(payload)
    if wire == 2:
        return key + _varint(len(payload)) + payload
    if wire == 5:
        return key + struct.pack("<f", payload)
    raise ValueError(wire)


def spiece_model_bytes(pieces, unk_id=2, bos_id=-1, eos_id=1, pad_id=0, model_type=1):
    """A SentencePiece ModelProto: pieces, a trainer spec and an nmt_nfkc normalizer spec."""
    out = bytearray()
    for p, s, t in pieces:
        msg = _field(1, 2, p.encode("utf-8")) + _field(2, 5, s)
        if t != 1:
            msg += _field(3, 0, t)
        out += _field(1, 2, msg)
    trainer = (_field(3, 0, model_type) + _field(4, 0, len(pieces)) + _field(40, 0, unk_id) +
               _field(41, 0, bos_id) + _field(42, 0, eos_id) + _field(43, 0, pad_id))
    normalizer = _field(1, 2, b"nmt_nfkc") + _field(3, 0, 1) + _field(4, 0, 1) + _field(5, 0, 1)
    out += _field(2, 2, trainer) + _field(3, 2, normalizer)
    return bytes(out)


def write_siglip_tokenizer(dir, n_vocab=32000, form="spiece", words=None, nfkc=True):
    os.makedirs(dir, exist_ok=True)
    pieces = siglip_pieces(n_vocab, words)
    if form == "spiece":
        with open(os.path.join(dir, "spiece.model"), "wb") as f:
            f.write(spiece_model_bytes(pieces))
    elif form == "json":
        doc = {
            "version": "1.0", "truncation": None, "padding": None,
            "added_tokens": [{"id": i, "content": pieces[i][0], "single_word": False, "lstrip": False,
                              "rstrip": False, "normalized": False, "special": True} for i in range(3)],
            # Hugging Face's converter copies SentencePiece's charsmap (nmt_nfkc) into a Precompiled
            # normalizer; its bytes are not read (wgml normalizes from its own Unicode tables)
            "normalizer": {"type": "Precompiled", "precompiled_charsmap": "AAAA"} if nfkc else None,
            "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always",
                              "split": True},
            "post_processor": {"type": "TemplateProcessing",
                               "single": [{"Sequence": {"id": "A", "type_id": 0}},
                                          {"SpecialToken": {"id": "</s>", "type_id": 0}}],
                               "pair": [{"Sequence": {"id": "A", "type_id": 0}},
                                        {"SpecialToken": {"id": "</s>", "type_id": 0}},
                                        {"Sequence": {"id": "B", "type_id": 0}},
                                        {"SpecialToken": {"id": "</s>", "type_id": 0}}],
                               "special_tokens": {"</s>": {"id": "</s>", "ids": [1], "tokens": ["</s>"]}}},
            "decoder": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True},
            "model": {"type": "Unigram", "unk_id": 2, "byte_fallback": False,
                      "vocab": [[p, s] for p, s, _ in pieces]},
        }
        with open(os.path.join(dir, "tokenizer.json"), "w", encoding="utf-8") as f:
            json.dump(doc, f, ensure_ascii=False)
    else:
        raise ValueError("form must be 'spiece' or 'json'")
    cfg = {"tokenizer_class": "SiglipTokenizer", "eos_token": "</s>", "pad_token": "</s>", "unk_token": "<unk>",
           "model_max_length": 64, "do_lower_case": True}
    with open(os.path.join(dir, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(cfg, f)
    return {"eos": 1, "pad": 1, "unk": 2, "n_vocab": n_vocab}


def write_gemma_tokenizer(dir, n_vocab=8000, words=None):
    os.makedirs(dir, exist_ok=True)
    pieces = ["<pad>", "<eos>", "<bos>", "<unk>"] + ["<0x%02X>" % b for b in range(256)]
    base = len(pieces)
    chars = "\u2581etaoinshrdlcumwfgypbvkjxqz0123456789.,'-!?"
    pieces += list(chars)
    have = set(pieces)
    merges = []
    stream = word_stream(words)
    tries = 0
    # each new piece is made by joining two pieces already there: a word grows one character
    # at a time (with and without the "\u2581" of a word start)
    while len(pieces) < n_vocab and tries < 50 * n_vocab:
        tries += 1
        w = next(stream).lower()
        if not (2 <= len(w) <= 16) or any(c not in chars for c in w):
            continue
        for word in ("\u2581" + w, w):
            for k in range(2, len(word) + 1):
                p = word[:k]
                if p in have or len(pieces) >= n_vocab:
                    continue
                pieces.append(p)
                have.add(p)
    vocab = {p: i for i, p in enumerate(pieces)}
    for i in range(base + len(chars), len(pieces)):
        p = pieces[i]
        for k in range(1, len(p)):
            a, b = p[:k], p[k:]
            if a in vocab and b in vocab and vocab[a] >= base and vocab[b] >= base:
                merges.append((i, vocab[a], vocab[b], a, b))
    merges.sort()
    doc = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": i, "content": pieces[i], "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True} for i in range(4)],
        "normalizer": {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"},
        "pre_tokenizer": None,
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": "<bos>", "type_id": 0}},
                                      {"Sequence": {"id": "A", "type_id": 0}}],
                           "pair": [{"SpecialToken": {"id": "<bos>", "type_id": 0}},
                                    {"Sequence": {"id": "A", "type_id": 0}},
                                    {"SpecialToken": {"id": "<bos>", "type_id": 1}},
                                    {"Sequence": {"id": "B", "type_id": 1}}],
                           "special_tokens": {"<bos>": {"id": "<bos>", "ids": [2], "tokens": ["<bos>"]}}},
        "decoder": {"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "\u2581"},
                                                       "content": " "}, {"type": "ByteFallback"}, {"type": "Fuse"}]},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                  "vocab": vocab, "merges": [[a, b] for _, _, _, a, b in merges]},
    }
    with open(os.path.join(dir, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False)
    with open(os.path.join(dir, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump({"tokenizer_class": "GemmaTokenizer", "bos_token": "<bos>", "eos_token": "<eos>",
                   "unk_token": "<unk>", "pad_token": "<pad>", "add_bos_token": True, "add_eos_token": False}, f)
    return {"bos": 2, "eos": 1, "unk": 3, "n_vocab": len(pieces), "n_merges": len(merges)}
