/*
 * grammar.h - GBNF grammars (llama.cpp's format) for constrained decoding:
 * the parser, and a matcher that follows text through a grammar code point
 * by code point (grammar.c).
 *
 * The format: rules `name ::= expression`, `root` the start; an expression is
 * alternatives `a | b` of sequences of items; an item is a string literal
 * "..." (escapes \n \r \t \\ \" \' \[ \] \xHH \uHHHH \UHHHHHHHH), a character
 * class [a-z0-9_] or [^...] (ranges, the same escapes), `.` (any character),
 * a rule name, or a group ( ... ), each optionally repeated: * + ? {m} {m,}
 * {m,n}. Comments run from # to the end of the line. Rules may refer to rules
 * defined later and to themselves, but not left-recursively (a rule that can
 * reach itself before consuming a character never ends: refused).
 *
 * Compiled form: groups and repetitions become rules of their own, so a rule
 * is alternatives of sequences of two kinds of element, a character set or a
 * rule reference. The matcher's state is a set of stacks (pushdown positions):
 * each stack is the path of rule positions still to match, its top always a
 * character set (or nothing: the text may end there). Every limit is checked
 * (grammar size, nesting, repetition counts, stacks), so a hostile grammar or
 * text is an error, never unbounded memory or time.
 */
#ifndef WGML_TEXT_GRAMMAR_H
#define WGML_TEXT_GRAMMAR_H

#include <stddef.h>
#include <stdint.h>

#include "wgml.h"

#define GRAMMAR_MAX_TEXT     (1u << 20) /* bytes of grammar text */
#define GRAMMAR_MAX_ELEMENTS (1u << 20) /* elements after expansion */
#define GRAMMAR_MAX_RULES    65536
#define GRAMMAR_MAX_DEPTH    128        /* nesting of groups while parsing */
#define GRAMMAR_MAX_REPEAT   1000       /* m and n of {m,n} */
#define GRAMMAR_MAX_STACKS   4096       /* stacks a state may hold */
#define GRAMMAR_MAX_STACK    1024       /* depth of one stack */

typedef struct grammar grammar;

/* Parses and compiles GBNF text (len bytes, UTF-8). Errors name the line and
 * column: "grammar: line 3, column 7: undefined rule 'valu'". */
wgml_status grammar_parse(const char *text, size_t len, grammar **out, wgml_error *err);
void grammar_free(grammar *g);

/* Rules after compilation (the named ones and those made for groups and
 * repetitions) and elements: for tests and limits. */
int grammar_n_rules(const grammar *g);

/* ---- following text ---- */

typedef struct grammar_state grammar_state;

/* The state before any text: root's start. */
wgml_status grammar_state_create(const grammar *g, grammar_state **out, wgml_error *err);
void grammar_state_free(grammar_state *s);
/* A copy of s (for trying a token). */
wgml_status grammar_state_clone(const grammar_state *s, grammar_state **out, wgml_error *err);

/* A hash of s's stacks and partial code point, and whether two states of one
 * grammar are the same (the same stacks in the same order): what a cache of
 * per-state results is keyed by. */
uint64_t grammar_state_hash(const grammar_state *s);
int grammar_state_equal(const grammar_state *a, const grammar_state *b);

/* Advances s over n bytes of UTF-8 (a code point may be split across calls).
 * Returns 1 when the text so far is a prefix of something the grammar
 * accepts, 0 when it is not (s is then dead: every later call returns 0),
 * -1 on an error (too many stacks; err says). */
int grammar_accept(grammar_state *s, const char *bytes, size_t n, wgml_error *err);

/* Whether the text so far is a whole sentence of the grammar (root can end
 * here, no code point left half-read). */
int grammar_accepting(const grammar_state *s);
/* Whether nothing can follow: accepting and no stack wants more. */
int grammar_finished(const grammar_state *s);

/* ---- which tokens may come next ---- */

/* A vocabulary's token strings (bytes; special tokens as empty strings),
 * sorted once so that tokens sharing a prefix share its work. */
typedef struct grammar_vocab grammar_vocab;
wgml_status grammar_vocab_create(const char *const *pieces, const size_t *lens, int n, grammar_vocab **out,
                                 wgml_error *err);
void grammar_vocab_free(grammar_vocab *v);
int grammar_vocab_size(const grammar_vocab *v);
/* token t's bytes and their count */
const char *grammar_vocab_bytes(const grammar_vocab *v, int t);
size_t grammar_vocab_len(const grammar_vocab *v, int t);

/* allowed[t] = 1 for each token whose bytes can follow the text so far
 * (an empty token never: end of sequence is the caller's, when
 * grammar_accepting), else 0. Tokens are tried byte by byte along the
 * sorted vocabulary: a byte the grammar refuses drops every token that
 * continues it. Returns how many are allowed, or -1 on an error. */
int grammar_allowed(const grammar_state *s, const grammar_vocab *v, uint8_t *allowed, wgml_error *err);

/* ---- the same, remembered: states and their transitions ---- */

/* A memo of the states a generation has met (each kept once) and of the
 * byte transitions between them, so that walking the vocabulary from a state
 * costs a table lookup per trie node where a transition was seen before (a
 * string's characters lead from one position to the next: the walk from
 * position k has already made most of the walk from k + 1). Bounded: past
 * GRAMMAR_MEMO_MAX_STATES states it starts again empty. */
#define GRAMMAR_MEMO_MAX_STATES 16384

typedef struct grammar_memo grammar_memo;
wgml_status grammar_memo_create(const grammar *g, grammar_memo **out, wgml_error *err);
void grammar_memo_free(grammar_memo *m);
/* grammar_allowed, through the memo (the same result). */
int grammar_allowed_memo(grammar_memo *m, const grammar_state *s, const grammar_vocab *v, uint8_t *allowed,
                         wgml_error *err);
/* the grammar a state follows */
const grammar *grammar_state_grammar(const grammar_state *s);

#endif
