/* TEMPORARY minimal SPM tokenizer until the real one lands. */
#include "text/tokenizer.h"
#include "core/alloc.h"
#include "core/error.h"
#include <string.h>
struct wgml_tokenizer { int n; char **t; };
wgml_status wgml_tokenizer_load(const gguf_file *f, wgml_tokenizer **out, wgml_error *err) {
    const gguf_value *a; if (gguf_get_arr(f, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &a, err) != 1) return wgml_fail(err, WGML_ERR_FORMAT, "no tokens");
    wgml_tokenizer *t = wgml_calloc(1, sizeof *t); t->n = (int)a->v.arr.n; t->t = wgml_calloc(t->n, sizeof(char*));
    for (int i = 0; i < t->n; i++) t->t[i] = wgml_strndup(a->v.arr.items[i].v.str.ptr, a->v.arr.items[i].v.str.len);
    *out = t; return WGML_OK; }
void wgml_tokenizer_free(wgml_tokenizer *t) { if (!t) return; for (int i = 0; i < t->n; i++) wgml_free(t->t[i]); wgml_free(t->t); wgml_free(t); }
wgml_vocab_kind wgml_tokenizer_kind(const wgml_tokenizer *t) { (void)t; return WGML_VOCAB_SPM; }
int wgml_tokenizer_n_vocab(const wgml_tokenizer *t) { return t->n; }
int32_t wgml_tokenizer_bos(const wgml_tokenizer *t) { (void)t; return 1; }
int32_t wgml_tokenizer_eos(const wgml_tokenizer *t) { (void)t; return 2; }
int wgml_tokenizer_wants_bos(const wgml_tokenizer *t) { (void)t; return 1; }
int wgml_tokenizer_is_eog(const wgml_tokenizer *t, int32_t id) { (void)t; return id == 2; }
int wgml_tokenizer_encode(const wgml_tokenizer *t, const char *text, size_t len, int add_bos, int32_t *out, int cap, wgml_error *err) {
    (void)err; char buf[4096]; size_t n = 0; buf[n++] = '\xe2'; buf[n++] = '\x96'; buf[n++] = '\x81';
    for (size_t i = 0; i < len && n < 4000; i++) { if (text[i] == ' ') { buf[n++] = '\xe2'; buf[n++] = '\x96'; buf[n++] = '\x81'; } else buf[n++] = text[i]; }
    int k = 0; if (add_bos) { if (k < cap) out[k] = 1; k++; }
    size_t i = 0; while (i < n) { int best = -1; size_t bl = 0;
        for (int j = 3; j < t->n; j++) { size_t l = strlen(t->t[j]); if (l > bl && l <= n - i && memcmp(t->t[j], buf + i, l) == 0) { best = j; bl = l; } }
        if (best < 0) { i++; continue; } if (k < cap) out[k] = best; k++; i += bl; }
    return k; }
int wgml_tokenizer_piece(const wgml_tokenizer *t, int32_t id, char *buf, int cap) {
    if (id < 0 || id >= t->n) return -1;
    if (id < 3) return 0;
    const char *s = t->t[id]; int k = 0;
    if (s[0] == '<' && s[1] == '0' && s[2] == 'x') { unsigned v = 0; for (int i = 3; i < 5; i++) v = v * 16 + (unsigned)(s[i] <= '9' ? s[i] - '0' : s[i] - 'A' + 10); if (cap > 0) buf[0] = (char)v; return 1; }
    while (*s) { if ((unsigned char)s[0] == 0xe2 && (unsigned char)s[1] == 0x96 && (unsigned char)s[2] == 0x81) { if (k < cap) buf[k] = ' '; k++; s += 3; } else { if (k < cap) buf[k] = *s; k++; s++; } }
    return k; }
const char *wgml_tokenizer_token_text(const wgml_tokenizer *t, int32_t id) { return id >= 0 && id < t->n ? t->t[id] : NULL; }
int wgml_tokenizer_decode(const wgml_tokenizer *t, const int32_t *ids, int n, char *buf, int cap) { int k = 0; for (int i = 0; i < n; i++) k += wgml_tokenizer_piece(t, ids[i], buf + k, cap - k > 0 ? cap - k : 0); return k; }
