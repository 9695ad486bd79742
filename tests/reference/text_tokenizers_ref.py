"""Reference text tokenizers of CLIP and SigLIP, written from the published algorithms
(standard library + numpy; no `regex` module: \\p{L} / \\p{N} come from unicodedata).

CLIP (openai's simple_tokenizer and Hugging Face's CLIPTokenizerFast, without ftfy and
HTML unescaping):
  - special tokens written in the text (the added tokens) are cut out first, longest
    first at each position, scanning left to right;
  - each stretch between them: NFC, lower case (str.lower), then the words of
      <|startoftext|>|<|endoftext|>|'s|'t|'re|'ve|'m|'ll|'d|[\\p{L}]+|[\\p{N}]|[^\\s\\p{L}\\p{N}]+
    found left to right (alternatives in order, the first that matches wins; what no
    alternative matches, whitespace, is dropped). The two special words are their tokens;
  - every other word: its UTF-8 bytes as GPT-2 byte symbols, "</w>" on the last, then
    the BPE of the simple tokenizer: while some adjacent pair is a merge, join every
    occurrence of the lowest-ranked pair;
  - encode(add_special=True) puts <|startoftext|> in front and <|endoftext|> after.

SigLIP (Hugging Face's SiglipTokenizer canonicalization + SentencePiece's unigram model):
  - lower case, delete the characters of string.punctuation, \\s+ -> " ", strip;
  - the model's normalizer, nmt_nfkc: unicodedata's NFKC, with TAB, LF, FF, CR, U+1680,
    U+200B, U+200E, U+200F, U+2028, U+2029, U+2581, U+FEFF, U+FFFD made spaces first and
    U+FF5E (full-width tilde) kept (as SentencePiece's rule builder defines it);
  - SentencePiece's remove_extra_whitespaces (whitespace runs -> one space, both ends
    stripped), then special tokens cut out as for CLIP;
  - each stretch: " " -> "▁", "▁" in front of the stretch that starts the text; the
    Viterbi segmentation over normal (and user-defined) pieces maximizing the float32
    sum of scores; where no one-character piece starts, that character may be an
    unknown piece scored min(normal scores) - 10; ties keep the first candidate (starts
    in text order, shorter pieces first, the unknown last); consecutive unknowns are one
    unknown token;
  - encode(add_special=True) appends </s> (no BOS).
"""

import heapq
import string
import unicodedata

import numpy as np

# White_Space (regex \s in the Unicode sense): str.isspace without U+001C..U+001F
_WS = {chr(c) for c in range(0x110000) if chr(c).isspace()} - {"\x1c", "\x1d", "\x1e", "\x1f"}


def _is_letter(ch):
    return unicodedata.category(ch).startswith("L")


def _is_number(ch):
    return unicodedata.category(ch).startswith("N")


def _split_specials(text, specials):
    """[(is_special, str)]: the text cut at special tokens, longest match first."""
    out, frag, i = [], 0, 0
    by_len = sorted(specials, key=len, reverse=True)
    while i < len(text):
        hit = next((s for s in by_len if text.startswith(s, i)), None)
        if hit is None:
            i += 1
            continue
        if i > frag:
            out.append((False, text[frag:i]))
        out.append((True, hit))
        i += len(hit)
        frag = i
    if frag < len(text):
        out.append((False, text[frag:]))
    return out


def gpt2_byte_table():
    """byte -> the printable character GPT-2's byte-level BPE spells it with."""
    keep = set(range(ord("!"), ord("~") + 1)) | set(range(0xA1, 0xAD)) | set(range(0xAE, 0x100))
    table, n = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + n)
            n += 1
    return table


class ClipBPE:
    SPECIAL_WORDS = ("<|startoftext|>", "<|endoftext|>")

    def __init__(self, vocab, merges, specials):
        """vocab: {token: id}; merges: ["a b", ...] or [[a, b], ...] in rank order;
        specials: {text: id} of the tokens matched literally."""
        self.vocab = vocab
        self.rank = {}
        for r, m in enumerate(merges):
            a, b = m.split(" ") if isinstance(m, str) else m
            self.rank.setdefault((a, b), r)
        self.specials = specials
        self.bytes = gpt2_byte_table()
        self.bos = vocab["<|startoftext|>"]
        self.eos = vocab["<|endoftext|>"]

    @staticmethod
    def words(text):
        out, i, n = [], 0, len(text)
        while i < n:
            c = text[i]
            m = 0
            for lit in ClipBPE.SPECIAL_WORDS:
                if text.startswith(lit, i):
                    m = len(lit)
                    break
            if not m and c == "'" and i + 1 < n:
                if text[i + 1] in "stmd":
                    m = 2
                elif text[i + 1:i + 3] in ("re", "ve", "ll"):
                    m = 3
            if not m:
                if _is_letter(c):
                    j = i
                    while j < n and _is_letter(text[j]):
                        j += 1
                    m = j - i
                elif _is_number(c):
                    m = 1
                elif c not in _WS:
                    j = i
                    while j < n and not (text[j] in _WS or _is_letter(text[j]) or _is_number(text[j])):
                        j += 1
                    m = j - i
            if m:
                out.append(text[i:i + m])
                i += m
            else:
                i += 1
        return out

    def bpe(self, word):
        sym = [self.bytes[b] for b in word.encode("utf-8")]
        sym[-1] += "</w>"
        while len(sym) > 1:
            pairs = [(self.rank.get((sym[k], sym[k + 1]), None), k) for k in range(len(sym) - 1)]
            ranked = [p for p in pairs if p[0] is not None]
            if not ranked:
                break
            best = min(ranked)[0]
            a, b = next((sym[k], sym[k + 1]) for r, k in ranked if r == best)
            out, k = [], 0
            while k < len(sym):
                if k + 1 < len(sym) and sym[k] == a and sym[k + 1] == b:
                    out.append(a + b)
                    k += 2
                else:
                    out.append(sym[k])
                    k += 1
            sym = out
        return sym

    def encode(self, text, add_special=True):
        ids = [self.bos] if add_special else []
        for special, frag in _split_specials(text, self.specials):
            if special:
                ids.append(self.specials[frag])
                continue
            frag = unicodedata.normalize("NFC", frag).lower()
            for w in self.words(frag):
                if w in self.SPECIAL_WORDS:
                    ids.append(self.vocab[w])
                    continue
                for s in self.bpe(w):
                    ids.append(self.vocab[s])  # consistent vocabularies have every symbol
        if add_special:
            ids.append(self.eos)
        return ids


# SentencePiece's nmt_nfkc: NFKC, these code points made spaces, and U+FF5E left as it is
NMT_SPACES = {0x9, 0xA, 0xC, 0xD, 0x1680, 0x200B, 0x200E, 0x200F, 0x2028, 0x2029, 0x2581, 0xFEFF, 0xFFFD}


def nmt_nfkc(text):
    text = "".join(" " if ord(c) in NMT_SPACES else c for c in text)
    return "\uff5e".join(unicodedata.normalize("NFKC", part) for part in text.split("\uff5e"))


class SiglipUnigram:
    def __init__(self, pieces, unk_id, eos_id, specials, nfkc=True):
        """pieces: [(piece, score, type)] (type 1 normal, 2 unknown, 3 control, 4 user-defined,
        5 unused, 6 byte); specials: {text: id} matched literally; nfkc: the model's
        normalizer is nmt_nfkc (SigLIP's), applied after the canonicalization."""
        self.nfkc = nfkc
        self.score = {}
        lowest = None
        for i, (p, s, t) in enumerate(pieces):
            s32 = np.float32(s)
            if t in (1, 4):
                self.score.setdefault(p.encode("utf-8"), (i, s32))
            if t == 1:
                lowest = s32 if lowest is None else min(lowest, s32)
        self.unk_score = np.float32((lowest if lowest is not None else np.float32(0)) - np.float32(10))
        self.max_len = max(len(k) for k in self.score)
        self.unk, self.eos, self.specials = unk_id, eos_id, specials

    @staticmethod
    def canonicalize(text):
        import re
        text = text.lower()
        text = text.translate(str.maketrans("", "", string.punctuation))
        text = re.sub(r"\s+", " ", text)
        return text.strip()

    @staticmethod
    def squeeze(text):
        out, pend = [], False
        for c in text:
            if c in _WS:
                pend = True
                continue
            if pend and out:
                out.append(" ")
            pend = False
            out.append(c)
        return "".join(out)

    def viterbi(self, frag, prefix):
        buf = (("\u2581" if prefix else "") + frag.replace(" ", "\u2581")).encode("utf-8")
        n = len(buf)
        best = [None] * (n + 1)  # (score, start, id)
        best[0] = (np.float32(0), 0, -1)
        for i in range(n):
            if best[i] is None:
                continue
            base = best[i][0]
            clen = len(buf[i:].decode("utf-8", "ignore")[:1].encode("utf-8")) or 1
            single = False
            for j in range(i + 1, min(n, i + self.max_len) + 1):
                hit = self.score.get(buf[i:j])
                if hit is None:
                    continue
                if j - i == clen:
                    single = True
                sc = np.float32(base + hit[1])
                if best[j] is None or sc > best[j][0]:
                    best[j] = (sc, i, hit[0])
            if not single:
                sc = np.float32(base + self.unk_score)
                j = i + clen
                if best[j] is None or sc > best[j][0]:
                    best[j] = (sc, i, -1)
        path, j = [], n
        while j > 0:
            path.append(best[j][2])
            j = best[j][1]
        ids, prev_unk = [], False
        for t in reversed(path):
            if t < 0:
                if not prev_unk:
                    ids.append(self.unk)
                prev_unk = True
            else:
                ids.append(t)
                prev_unk = False
        return ids

    def encode(self, text, add_special=True):
        text = self.canonicalize(text)
        if self.nfkc:
            text = nmt_nfkc(text)
        text = self.squeeze(text)
        ids, pos = [], 0
        for special, frag in _split_specials(text, self.specials):
            if special:
                ids.append(self.specials[frag])
            elif frag:
                ids += self.viterbi(frag, pos == 0)
            pos += len(frag)
        if add_special:
            ids.append(self.eos)
        return ids


class SpmBpe:
    """SentencePiece's BPE as Hugging Face's tokenizers runs it from tokenizer.json (Gemma's):
    special tokens cut out as for CLIP; each stretch: " " -> "\u2581" (no prefix), then BPE over
    its characters: the adjacent pair of lowest merge rank joins first (the leftmost of equal
    rank), until no pair is a merge; a final symbol not in the vocabulary becomes the
    <0xXX> tokens of its UTF-8 bytes (byte fallback), else <unk>. encode(add_special=True)
    puts <bos> in front."""

    def __init__(self, vocab, merges, specials, bos, unk):
        self.vocab = vocab
        self.rank = {(a, b): i for i, (a, b) in enumerate(merges)}
        self.specials = specials
        self.bos, self.unk, self.eos = bos, unk, None

    def bpe(self, text):
        syms = list(text)
        while len(syms) > 1:
            best = None
            for i in range(len(syms) - 1):
                r = self.rank.get((syms[i], syms[i + 1]))
                if r is not None and (best is None or r < best[0]):
                    best = (r, i)
            if best is None:
                break
            i = best[1]
            syms[i:i + 2] = [syms[i] + syms[i + 1]]
        return syms

    def encode(self, text, add_special=True):
        ids = [self.bos] if add_special else []
        for special, frag in _split_specials(text, self.specials):
            if special:
                ids.append(self.specials[frag])
                continue
            for s in self.bpe(frag.replace(" ", "\u2581")):
                if s in self.vocab:
                    ids.append(self.vocab[s])
                    continue
                byte_ids = [self.vocab.get("<0x%02X>" % b) for b in s.encode("utf-8")]
                ids += byte_ids if all(x is not None for x in byte_ids) else [self.unk]
        return ids
