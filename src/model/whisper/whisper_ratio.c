/*
 * whisper_ratio.c - the compression ratio of a window's text, as the
 * official transcribe() measures repetition for its temperature fallback:
 * len(text bytes) / len(zlib.compress(text bytes)), zlib's default level.
 * It needs zlib's own deflate (the ratio is compared with 2.4, so another
 * compressor would move the decisions): native builds link zlib (the
 * zlib licence); a build without it (the browser's) reports NAN, which
 * whisper_needs_fallback reads as "unknown" (whisper_decode.h).
 */
#include <math.h>

#include "core/alloc.h"
#include "model/whisper/whisper_run.h"

#ifdef WGML_HAVE_ZLIB
#include <zlib.h>

double whisper_compression_ratio(const char *text, size_t len) {
    if (!len) return 0.0; /* Python: 0 / len(compress(b"")) */
    uLongf cap = compressBound((uLong)len);
    unsigned char *buf = wgml_malloc(cap);
    if (!buf) return NAN;
    int rc = compress2(buf, &cap, (const Bytef *)text, (uLong)len, Z_DEFAULT_COMPRESSION);
    wgml_free(buf);
    return rc == Z_OK && cap > 0 ? (double)len / (double)cap : NAN;
}
#else
double whisper_compression_ratio(const char *text, size_t len) {
    (void)text;
    (void)len;
    return NAN;
}
#endif
