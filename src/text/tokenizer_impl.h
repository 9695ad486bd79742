/*
 * tokenizer_impl.h - internals shared by the tokenizer's files (not a public API).
 *
 *   tokenizer.c  loading, special-token splitting, pieces, decoding, the string
 *                table and hash map below
 *   merge.c      the bigram merge engine SentencePiece and BPE both run
 *   spm.c        SentencePiece (tokenizer.ggml.model = "llama")
 *   bpe.c        byte-level BPE ("gpt2") and the GPT-2 byte <-> symbol mapping
 *   pretok.c     the regex pre-tokenizers BPE vocabularies name (and CLIP's
 *                words, bpe.c)
 *   unigram.c    SentencePiece's unigram model ("t5"), SigLIP's canonicalization
 *   wordpiece.c  WordPiece ("bert")
 *   unicode.c    UTF-8 and character properties
 */
#ifndef WGML_TEXT_TOKENIZER_IMPL_H
#define WGML_TEXT_TOKENIZER_IMPL_H

#include "text/tokenizer.h"

#include <stddef.h>
#include <stdint.h>

/* tokenizer.ggml.token_type values (llama.cpp's). Others load as NORMAL. */
enum {
    TOK_NORMAL = 1,
    TOK_UNKNOWN = 2,
    TOK_CONTROL = 3,
    TOK_USER_DEFINED = 4,
    TOK_UNUSED = 5,
    TOK_BYTE = 6,
};

/* Per-token attributes beyond the type. */
#define TOK_ATTR_RSTRIP  0x01 /* whitespace after the token in the text is dropped */
#define TOK_ATTR_EOG     0x02 /* ends generation */
#define TOK_ATTR_SPECIAL 0x04 /* matched literally in the text before tokenizing */

/* ---- containers ---- */

/* Strings in one blob, each followed by a NUL. */
typedef struct tok_strtab {
    char *blob;
    uint32_t *off;
    uint32_t *len;
    int32_t n;
    size_t max_len;
} tok_strtab;

/* Open-addressing hash map from a tok_strtab's strings to their index. */
typedef struct tok_map {
    int32_t *slot; /* string index or -1 */
    uint32_t *hash;
    size_t mask;
} tok_map;

/* A growable array of 32-bit values (token ids, code points, offsets). */
typedef struct tok_vec {
    uint32_t *v;
    size_t n, cap;
} tok_vec;

wgml_status tok_vec_reserve(tok_vec *v, size_t n, wgml_error *err);
wgml_status tok_vec_push(tok_vec *v, uint32_t x, wgml_error *err);
void tok_vec_free(tok_vec *v);

/* Copies the strings of a GGUF string array; `what` names it in messages. */
wgml_status tok_strtab_from_gguf(tok_strtab *t, const gguf_value *arr, const char *what, wgml_error *err);
void tok_strtab_free(tok_strtab *t);

/* Builds the map over all strings of t; for duplicates the first index wins;
 * empty strings are left out. */
wgml_status tok_map_build(tok_map *m, const tok_strtab *t, wgml_error *err);
void tok_map_free(tok_map *m);
/* Index of the string a, then the byte sep (when sep >= 0), then b; or -1. */
int32_t tok_map_find(const tok_map *m, const tok_strtab *t, const char *a, size_t na, int sep, const char *b,
                     size_t nb);

/* ---- the tokenizer ---- */

struct wgml_tokenizer {
    wgml_vocab_kind kind;
    int32_t n_vocab;
    tok_strtab text; /* token texts as stored */
    tok_map text_map;
    float *score;
    uint8_t *type;
    uint8_t *attr;
    int has_types; /* the file has tokenizer.ggml.token_type */

    int32_t bos, eos, eot, eom, unk, sep;
    int add_bos;          /* tokenizer.ggml.add_bos_token or the model default */
    int add_eos;          /* tokenizer.ggml.add_eos_token: EOS after the text when add_bos is asked */
    int add_space_prefix; /* SPM: a space in front of each text fragment */

    /* Tokens recognised literally in the text (control, user-defined,
     * unknown), grouped by first byte, longest first within a group. */
    int32_t *special;
    int32_t special_first[257];

    /* SPM: <0xXX> tokens; BPE: the token of each byte's symbol; -1 if absent. */
    int32_t byte_token[256];
    int has_byte_tokens;
    int has_unused; /* SPM: some mergeable pieces may not be output */

    /* BPE */
    int pre;           /* pretok_kind */
    int ignore_merges; /* a word that is a whole token skips the merges */
    tok_strtab merges; /* "left right", index = rank */
    tok_map merge_map;
    int clip; /* pre "clip": CLIP's normalization and words, "</w>" on each word's last symbol */

    /* Unigram (unigram.c) */
    struct ugm_trie *trie; /* the pieces that can be output, by their bytes */
    float unk_score;       /* an unknown character's score: the lowest piece score - 10 */
    int siglip;            /* pre "siglip": SigLIP's canonicalization first */
    int remove_extra_ws;   /* strip, and collapse whitespace runs (tokenizer.ggml.remove_extra_whitespaces) */
    int nfkc;              /* tokenizer.ggml.normalizer: 0 none, 1 "nfkc", 2 "nmt_nfkc" */

    /* WordPiece */
    int lowercase, strip_accents; /* normalizer */
    int wpm_hash_prefix;          /* pieces spelled "word"/"##ing" (as in BERT's vocab.txt), not "▁word"/"ing" */
};

static inline int32_t tok_find(const wgml_tokenizer *tok, const char *s, size_t n) {
    return tok_map_find(&tok->text_map, &tok->text, s, n, -1, NULL, 0);
}

/* ---- merge engine (merge.c) ---- */

/* Score of merging the adjacent symbols a and b (higher merges first); 0 when
 * they do not merge. */
typedef int (*tok_pair_fn)(const wgml_tokenizer *tok, const char *a, size_t na, const char *b, size_t nb,
                           double *score);

typedef struct tok_sym {
    int32_t prev, next;  /* neighbours in the chain, -1 at the ends */
    uint32_t start, len; /* bytes of the text; len 0 once merged away */
    int32_t node;        /* merge tree node (for SentencePiece resegmenting) */
} tok_sym;

typedef struct tok_node {
    uint32_t start, len;
    int32_t left, right; /* children, -1 for a single character */
} tok_node;

typedef struct tok_bigram {
    double score;
    int32_t left, right;
    uint32_t left_len, right_len; /* lengths when queued: a changed length means stale */
} tok_bigram;

typedef struct tok_merge {
    tok_sym *sym;
    size_t n_sym, cap_sym;
    tok_node *node;
    size_t n_node, cap_node;
    tok_bigram *heap;
    size_t n_heap, cap_heap;
} tok_merge;

/* Splits text into characters (invalid bytes alone) and merges the best
 * adjacent pair until none merges. The surviving symbols are the chain from
 * sym[0] along next; with track_nodes, each symbol's node says how it was
 * built. State is reused between calls; free with tok_merge_free. */
wgml_status tok_merge_run(tok_merge *m, const wgml_tokenizer *tok, const char *text, size_t len, tok_pair_fn pair,
                          int track_nodes, wgml_error *err);
/* The same with the last `tail` bytes of text glued to the last character
 * (CLIP's "</w>": the initial symbols of "hi</w>" are "h" and "i</w>"). */
wgml_status tok_merge_run_tail(tok_merge *m, const wgml_tokenizer *tok, const char *text, size_t len, size_t tail,
                               tok_pair_fn pair, int track_nodes, wgml_error *err);
void tok_merge_free(tok_merge *m);

/* ---- the models ---- */

wgml_status spm_load(wgml_tokenizer *tok, const gguf_file *f, wgml_error *err);
/* Encodes one fragment of raw text (no special tokens in it). */
wgml_status spm_encode(const wgml_tokenizer *tok, const char *text, size_t len, int space_prefix, tok_vec *out,
                       wgml_error *err);

wgml_status bpe_load(wgml_tokenizer *tok, const gguf_file *f, const char *pre, size_t pre_len, wgml_error *err);
wgml_status bpe_encode(const wgml_tokenizer *tok, const char *text, size_t len, tok_vec *out, wgml_error *err);
/* The GPT-2 byte-level mapping: byte -> code point, and back (-1 if none). */
uint32_t bpe_byte_to_cp(uint8_t b);
/* The bytes text[0..n) spelled as byte-level symbols (UTF-8, at most 2 bytes
 * each) into word; returns the length written. */
size_t bpe_spell(const char *text, size_t n, char *word);
int bpe_cp_to_byte(uint32_t cp);

/* CLIP: a fragment normalized (lower-cased) and cut into words, each BPE-merged with "</w>". */
wgml_status bpe_encode_clip(const wgml_tokenizer *tok, const char *text, size_t len, tok_vec *out, wgml_error *err);

/* SentencePiece's byte fallback (spm.c): the <0xXX> tokens of bytes s[0..n), unknown where one is
 * missing; shared with unigram.c. */
wgml_status tok_push_bytes(const wgml_tokenizer *tok, const char *s, size_t n, tok_vec *out, wgml_error *err);

wgml_status ugm_load(wgml_tokenizer *tok, const gguf_file *f, const char *pre, size_t pre_len, wgml_error *err);
void ugm_free(wgml_tokenizer *tok);
/* The whole text normalized before special tokens are looked for: SigLIP's
 * canonicalization (pre "siglip"), NFKC (tokenizer.ggml.normalizer), then
 * whitespace stripped and collapsed to single spaces (remove_extra_ws). *out
 * is wgml_malloc'ed. */
wgml_status ugm_normalize(const wgml_tokenizer *tok, const char *text, size_t len, char **out, size_t *out_len,
                          wgml_error *err);
/* Encodes one fragment of normalized text; space_prefix puts a "▁" in front. */
wgml_status ugm_encode(const wgml_tokenizer *tok, const char *text, size_t len, int space_prefix, tok_vec *out,
                       wgml_error *err);

wgml_status wpm_load(wgml_tokenizer *tok, const gguf_file *f, wgml_error *err);
wgml_status wpm_encode(const wgml_tokenizer *tok, const char *text, size_t len, tok_vec *out, wgml_error *err);

/* ---- pre-tokenizers (pretok.c) ---- */

typedef enum pretok_kind {
    PRETOK_DEFAULT,
    PRETOK_GPT2,
    PRETOK_LLAMA3,
    PRETOK_QWEN2,
    PRETOK_DEEPSEEK_LLM,
    PRETOK_DEEPSEEK_CODER,
    PRETOK_FALCON,
    PRETOK_STARCODER,
} pretok_kind;

/* The pre-tokenizer a tokenizer.ggml.pre value names, or -1. *ignore_merges is
 * set for vocabularies whose BPE model skips merges for whole-token words. */
int pretok_from_name(const char *name, size_t len, int *ignore_merges, int *add_bos);

/* Splits code points cps[0..n) into pieces, appended to out as pairs
 * (begin, end) of code point indexes covering the input in order. */
wgml_status pretok_split(pretok_kind kind, const uint32_t *cps, size_t n, tok_vec *out, wgml_error *err);
/* text[0..len) as a pre-tokenizer's words: its code points (cps), each one's
 * byte offset (offs, with len at the end) and the words as pairs of indices
 * into them (pieces: [start, end) code points). */
wgml_status bpe_words(pretok_kind kind, const char *text, size_t len, tok_vec *cps, tok_vec *offs, tok_vec *pieces,
                      wgml_error *err);

#endif
