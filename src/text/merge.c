/*
 * merge.c - the bigram merge engine of SentencePiece and BPE.
 *
 * Both models start from single characters and repeatedly merge the best
 * adjacent pair: SentencePiece the pair whose concatenation is the vocabulary
 * piece with the highest score, BPE the pair with the lowest merge rank. Ties
 * go to the leftmost pair. The model supplies the pair score; this file does
 * the rest in O(n log n):
 *
 *   - the symbols form a doubly linked list over the text (start, length);
 *   - every candidate pair goes into a binary max-heap with the lengths the
 *     two symbols had when it was queued. A merge only ever lengthens the left
 *     symbol and empties the right one, so a popped pair whose lengths no
 *     longer match is stale and skipped (no deletion from the heap needed);
 *   - after a merge, the new symbol's pairs with both neighbours are queued.
 *
 * Optionally (SentencePiece vocabularies with "unused" pieces) every merge
 * also records a tree node, so that a piece which may not be output can be
 * split back into the two pieces it was made from.
 */
#include "core/alloc.h"
#include "core/error.h"
#include "text/tokenizer_impl.h"
#include "text/unicode.h"

static wgml_status grow(void **p, size_t *cap, size_t need, size_t elem, wgml_error *err) {
    if (need <= *cap) return WGML_OK;
    size_t n = *cap ? *cap : 64;
    while (n < need) {
        if (n > ((size_t)-1) / 2 / elem) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "tokenizer: text too long");
        n *= 2;
    }
    void *q = wgml_realloc(*p, n * elem);
    if (!q) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "tokenizer: out of memory (%zu merge entries)", n);
    *p = q;
    *cap = n;
    return WGML_OK;
}

/* a is better than b: higher score, then leftmost */
static int better(const tok_bigram *a, const tok_bigram *b) {
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

static wgml_status heap_push(tok_merge *m, const tok_bigram *x, wgml_error *err) {
    wgml_status st = grow((void **)&m->heap, &m->cap_heap, m->n_heap + 1, sizeof *m->heap, err);
    if (st != WGML_OK) return st;
    size_t i = m->n_heap++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!better(x, &m->heap[parent])) break;
        m->heap[i] = m->heap[parent];
        i = parent;
    }
    m->heap[i] = *x;
    return WGML_OK;
}

static tok_bigram heap_pop(tok_merge *m) {
    tok_bigram top = m->heap[0];
    tok_bigram last = m->heap[--m->n_heap];
    size_t n = m->n_heap, i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && better(&m->heap[c + 1], &m->heap[c])) c++;
        if (!better(&m->heap[c], &last)) break;
        m->heap[i] = m->heap[c];
        i = c;
    }
    if (n) m->heap[i] = last;
    return top;
}

static wgml_status try_pair(tok_merge *m, const wgml_tokenizer *tok, const char *text, int32_t left, int32_t right,
                            tok_pair_fn pair, wgml_error *err) {
    if (left < 0 || right < 0) return WGML_OK;
    const tok_sym *l = &m->sym[left], *r = &m->sym[right];
    tok_bigram b = {0, left, right, l->len, r->len};
    if (!pair(tok, text + l->start, l->len, text + r->start, r->len, &b.score)) return WGML_OK;
    return heap_push(m, &b, err);
}

wgml_status tok_merge_run(tok_merge *m, const wgml_tokenizer *tok, const char *text, size_t len, tok_pair_fn pair,
                          int track_nodes, wgml_error *err) {
    return tok_merge_run_tail(m, tok, text, len, 0, pair, track_nodes, err);
}

wgml_status tok_merge_run_tail(tok_merge *m, const wgml_tokenizer *tok, const char *text, size_t len, size_t tail,
                               tok_pair_fn pair, int track_nodes, wgml_error *err) {
    m->n_sym = m->n_node = m->n_heap = 0;
    if (len == 0) return WGML_OK;
    if (len >= INT32_MAX)
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "tokenizer: text of %zu bytes too long", len);
    if (tail >= len) tail = 0; /* a tail needs a character to hang on */

    const size_t body = len - tail;
    size_t n = 0;
    for (size_t i = 0; i < body; i += (size_t)uni_char_len(text + i, body - i))
        n++;
    wgml_status st = grow((void **)&m->sym, &m->cap_sym, n, sizeof *m->sym, err);
    if (st == WGML_OK && track_nodes) st = grow((void **)&m->node, &m->cap_node, 2 * n, sizeof *m->node, err);
    if (st != WGML_OK) return st;

    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t clen = (uint32_t)uni_char_len(text + off, body - off);
        if (i + 1 == n) clen += (uint32_t)tail;
        m->sym[i] = (tok_sym){(int32_t)i - 1, i + 1 < n ? (int32_t)i + 1 : -1, (uint32_t)off, clen, (int32_t)i};
        if (track_nodes) m->node[i] = (tok_node){(uint32_t)off, clen, -1, -1};
        off += clen;
    }
    m->n_sym = m->n_node = n;
    if (!track_nodes) m->n_node = 0;

    for (size_t i = 1; i < n && st == WGML_OK; i++)
        st = try_pair(m, tok, text, (int32_t)i - 1, (int32_t)i, pair, err);

    while (st == WGML_OK && m->n_heap > 0) {
        tok_bigram b = heap_pop(m);
        tok_sym *l = &m->sym[b.left], *r = &m->sym[b.right];
        if (l->len == 0 || r->len == 0 || l->len != b.left_len || r->len != b.right_len || l->next != b.right)
            continue; /* stale: one side changed since this pair was queued */
        if (track_nodes) {
            m->node[m->n_node] = (tok_node){l->start, l->len + r->len, l->node, r->node};
            l->node = (int32_t)m->n_node++;
        }
        l->len += r->len;
        r->len = 0;
        l->next = r->next;
        if (r->next >= 0) m->sym[r->next].prev = b.left;
        st = try_pair(m, tok, text, l->prev, b.left, pair, err);
        if (st == WGML_OK) st = try_pair(m, tok, text, b.left, m->sym[b.left].next, pair, err);
    }
    return st;
}

void tok_merge_free(tok_merge *m) {
    wgml_free(m->sym);
    wgml_free(m->node);
    wgml_free(m->heap);
    *m = (tok_merge){0};
}
