/*
 * image_file.c - image files for the CLI and the server (image_file.h): JPEG
 * through libjpeg-turbo, PNG through libpng, both from bytes in memory (a
 * path is read whole first), into packed RGB8, oriented as Pillow's
 * ImageOps.exif_transpose orients it.
 *
 * Both libraries report errors by calling a function that must not return:
 * here it records the message and longjmps back to the one function per
 * format that called setjmp (jpeg_run, png_run); everything that outlives
 * the jump lives in a context struct, so that nothing is clobbered, and the
 * caller frees it. libjpeg's warnings about corrupt entropy-coded data are
 * errors here (corrupt_warning), and so is running out of data before the
 * last row (both sources fail at the end of the bytes instead of inventing
 * an EOI or a zero row). Once the last row is decoded (for PNG with the end
 * of its deflate stream, which libpng reads in the same call), the end of the
 * data is accepted: a missing JPEG EOI, last IDAT CRC or IEND, as Pillow
 * accepts them.
 *
 * The EXIF Orientation tag is read from the TIFF structure the way Pillow
 * 9.4 reads it (tiff_orientation), and PNG's metadata chunks are found by a
 * walk of the bytes (png_walk) that also sums the compressed image data for
 * the decompression-bomb check; libpng itself is told to skip every
 * ancillary chunk (their CRCs are still checked).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jpeglib.h>

#include <jerror.h> /* after jpeglib.h: its message list depends on jconfig.h */
#include <png.h>
#include <zlib.h>

#include "image_file.h"

#define JPEG_MAX_SCANS    500                /* TurboJPEG's TJFLAG_LIMITSCANS: real files have about 10 */
#define PNG_MAX_CHUNK     ((size_t)16 << 20) /* the longest ancillary chunk libpng accepts */
#define PNG_TEXT_MAX      ((size_t)1 << 20)  /* Pillow's MAX_TEXT_CHUNK: a longer decompressed text is ignored */
#define DEFLATE_MAX_RATIO 1032               /* deflate's best: 258 bytes from 2 bits */

static int fail(char *msg, size_t msg_size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *msg, size_t msg_size, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (msg && msg_size) vsnprintf(msg, msg_size, fmt, ap);
    va_end(ap);
    return -1;
}

static uint32_t rd16(const uint8_t *p, int be) { return be ? (uint32_t)p[0] << 8 | p[1] : (uint32_t)p[1] << 8 | p[0]; }
static uint32_t rd32(const uint8_t *p, int be) {
    return be ? (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]
              : (uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[1] << 8 | p[0];
}
static uint64_t rd64(const uint8_t *p, int be) {
    return be ? (uint64_t)rd32(p, 1) << 32 | rd32(p + 4, 1) : (uint64_t)rd32(p + 4, 0) << 32 | rd32(p, 0);
}

/* ---- EXIF ----------------------------------------------------------------------------------- */

/* The bytes per value of a TIFF field type Pillow reads; 0 for the types it skips. */
static unsigned tiff_type_size(unsigned type) {
    switch (type) {
    case 1:
    case 2:
    case 6:
    case 7: return 1; /* BYTE ASCII SBYTE UNDEFINED */
    case 3:
    case 8: return 2; /* SHORT SSHORT */
    case 4:
    case 9:
    case 11:
    case 13: return 4; /* LONG SLONG FLOAT IFD */
    case 5:
    case 10:
    case 12:
    case 16: return 8; /* RATIONAL SRATIONAL DOUBLE LONG8 */
    default: return 0;
    }
}

/* The orientation an Orientation value of this type gives: Pillow takes the first value and
 * looks it up among 2..8, so any number equal to one of them (a SHORT, a LONG, a rational 12/2,
 * a float 6.0) rotates, and bytes, strings and other numbers do not (1). */
static int orientation_of(unsigned type, const uint8_t *v, int be) {
    double x;
    switch (type) {
    case 3: x = rd16(v, be); break;
    case 4:
    case 13: x = rd32(v, be); break;
    case 16: {
        uint64_t u = rd64(v, be);
        x = u <= 8 ? (double)u : 0;
        break;
    }
    case 6: x = (int8_t)v[0]; break;
    case 8: x = (int16_t)rd16(v, be); break;
    case 9: x = (int32_t)rd32(v, be); break;
    case 11: {
        uint32_t u = rd32(v, be);
        float f;
        memcpy(&f, &u, 4);
        x = f;
        break;
    }
    case 12: {
        uint64_t u = rd64(v, be);
        memcpy(&x, &u, 8);
        break;
    }
    case 5:
    case 10: {
        int64_t num = type == 5 ? (int64_t)rd32(v, be) : (int64_t)(int32_t)rd32(v, be);
        int64_t den = type == 5 ? (int64_t)rd32(v + 4, be) : (int64_t)(int32_t)rd32(v + 4, be);
        if (den == 0 || num % den != 0) return 1;
        x = (double)(num / den);
        break;
    }
    default: return 1; /* BYTE, ASCII, UNDEFINED: not a number to Pillow */
    }
    for (int k = 2; k <= 8; k++)
        if (x == k) return k;
    return 1;
}

/* The Orientation tag (0x0112) of IFD0 of a TIFF structure (EXIF without its "Exif\0\0"),
 * read as Pillow 9.4 reads it: either byte order (and the two swapped magics it also takes);
 * the entries in order until one would pass the end (those before it count); an entry of a
 * type it does not know, of no values, or whose values lie outside d is skipped; the last
 * Orientation entry that is kept wins. Returns 0 when there is none, else its orientation
 * (1 when the value is not 2..8). Every offset is checked against n. */
static int tiff_orientation(const uint8_t *d, size_t n) {
    if (n < 8) return 0;
    int be;
    if (!memcmp(d, "MM\0*", 4) || !memcmp(d, "MM*\0", 4))
        be = 1;
    else if (!memcmp(d, "II*\0", 4) || !memcmp(d, "II\0*", 4))
        be = 0;
    else
        return 0; /* not TIFF, or BigTIFF, which Pillow cannot read from EXIF either */
    const uint64_t ifd = rd32(d + 4, be);
    if (ifd > n || n - ifd < 2) return 0;
    const unsigned count = rd16(d + ifd, be);
    int found = 0;
    for (unsigned i = 0; i < count; i++) {
        const uint64_t e = ifd + 2 + 12 * (uint64_t)i;
        if (e + 12 > n) break;
        if (rd16(d + e, be) != 0x0112) continue;
        const unsigned type = rd16(d + e + 2, be), unit = tiff_type_size(type);
        const uint64_t size = (uint64_t)rd32(d + e + 4, be) * unit;
        if (size == 0) continue;
        const uint8_t *v = d + e + 8;
        if (size > 4) {
            const uint64_t off = rd32(d + e + 8, be);
            if (off > n || size > n - off) continue;
            v = d + off;
        }
        found = orientation_of(type, v, be);
    }
    return found;
}

/* Pillow's Exif.load: a leading "Exif\0\0" is dropped, the rest is TIFF. */
static int exif_orientation(const uint8_t *d, size_t n) {
    if (n >= 6 && !memcmp(d, "Exif\0\0", 6)) d += 6, n -= 6;
    return tiff_orientation(d, n);
}

/* ---- orientation ---------------------------------------------------------------------------- */

/* img's pixels turned as Image.transpose does for EXIF orientation o (2..8): 2 mirrored
 * left-right, 3 turned 180 degrees, 4 mirrored top-bottom, 5 transposed, 6 turned 90 degrees
 * clockwise, 7 transversed, 8 turned 90 degrees counter-clockwise. 0, or -1 out of memory. */
static int orient(cli_image *img, int o) {
    const size_t W = (size_t)img->w, H = (size_t)img->h;
    const int swap = o >= 5;
    const size_t ow = swap ? H : W, oh = swap ? W : H;
    uint8_t *out = malloc(W * H * 3);
    if (!out) return -1;
    for (size_t y = 0; y < oh; y++) {
        uint8_t *q = out + y * ow * 3;
        for (size_t x = 0; x < ow; x++, q += 3) {
            size_t sx, sy;
            switch (o) {
            case 2: sx = W - 1 - x, sy = y; break;
            case 3: sx = W - 1 - x, sy = H - 1 - y; break;
            case 4: sx = x, sy = H - 1 - y; break;
            case 5: sx = y, sy = x; break;
            case 6: sx = y, sy = H - 1 - x; break;
            case 7: sx = W - 1 - y, sy = H - 1 - x; break;
            default: sx = W - 1 - y, sy = x; break; /* 8 */
            }
            const uint8_t *p = img->rgb + (sy * W + sx) * 3;
            q[0] = p[0], q[1] = p[1], q[2] = p[2];
        }
    }
    free(img->rgb);
    img->rgb = out;
    img->w = (int)ow, img->h = (int)oh;
    img->orientation = o;
    return 0;
}

/* Refuses a size of 0, a side over CLI_IMAGE_MAX_SIDE and more pixels than the budget. */
static int check_size(const char *what, const char *fmt, uint64_t w, uint64_t h, size_t max_pixels, char *msg,
                      size_t msg_size) {
    if (w == 0 || h == 0)
        return fail(msg, msg_size, "%s: a %s of %llu x %llu pixels is empty", what, fmt, (unsigned long long)w,
                    (unsigned long long)h);
    if (w * h > max_pixels)
        return fail(msg, msg_size, "%s: a %s of %llu x %llu pixels is over the limit of %zu pixels", what, fmt,
                    (unsigned long long)w, (unsigned long long)h, max_pixels);
    if (w > CLI_IMAGE_MAX_SIDE || h > CLI_IMAGE_MAX_SIDE)
        return fail(msg, msg_size, "%s: a %s of %llu x %llu pixels is over the limit of %d pixels a side", what, fmt,
                    (unsigned long long)w, (unsigned long long)h, CLI_IMAGE_MAX_SIDE);
    if (w * h > SIZE_MAX / 8) return fail(msg, msg_size, "%s: a %s too large for this machine", what, fmt);
    return 0;
}

/* ---- JPEG ----------------------------------------------------------------------------------- */

typedef struct {
    struct jpeg_error_mgr pub; /* first: libjpeg's error callbacks get it as cinfo->err */
    jmp_buf jb;
    struct jpeg_decompress_struct ci;
    struct jpeg_source_mgr src;
    struct jpeg_progress_mgr progress;
    int created;   /* ci needs jpeg_destroy_decompress */
    int rows_done; /* every row was read: the end of the data is an EOI */
    const uint8_t *data;
    size_t size;
    const char *what;
    size_t max_pixels;
    char *msg;
    size_t msg_size;
    cli_image *img;
    uint8_t *row; /* one CMYK row */
} jpeg_ctx;

static jpeg_ctx *jctx(j_common_ptr ci) { return (jpeg_ctx *)ci->err; }

static void jpeg_fail_lib(j_common_ptr ci) {
    jpeg_ctx *c = jctx(ci);
    char m[JMSG_LENGTH_MAX];
    (*ci->err->format_message)(ci, m);
    fail(c->msg, c->msg_size, "%s: the JPEG cannot be decoded: %s", c->what, m);
    longjmp(c->jb, 1);
}

/* The warnings that mean the pixels are not the file's: libjpeg goes on with gray or garbage. */
static int corrupt_warning(int code) {
    switch (code) {
#if defined(D_ARITH_CODING_SUPPORTED) || defined(C_ARITH_CODING_SUPPORTED)
    case JWRN_ARITH_BAD_CODE:
#endif
    case JWRN_BOGUS_PROGRESSION:
    case JWRN_HIT_MARKER:
    case JWRN_HUFF_BAD_CODE:
    case JWRN_JPEG_EOF:
    case JWRN_MUST_RESYNC: return 1;
    default: return 0; /* extraneous bytes between markers, an unknown JFIF version or Adobe transform, ... */
    }
}

static void jpeg_message(j_common_ptr ci, int level) {
    if (level < 0 && corrupt_warning(ci->err->msg_code)) jpeg_fail_lib(ci);
}

static void jsrc_init(j_decompress_ptr ci) { (void)ci; }
static void jsrc_term(j_decompress_ptr ci) { (void)ci; }
static boolean jsrc_fill(j_decompress_ptr ci) {
    static const JOCTET eoi[2] = {0xFF, JPEG_EOI};
    jpeg_ctx *c = jctx((j_common_ptr)ci);
    if (!c->rows_done) {
        fail(c->msg, c->msg_size, "%s: the JPEG data ends early (the file is truncated)", c->what);
        longjmp(c->jb, 1);
    }
    ci->src->next_input_byte = eoi;
    ci->src->bytes_in_buffer = 2;
    return TRUE;
}
static void jsrc_skip(j_decompress_ptr ci, long n) {
    if (n <= 0) return;
    while ((size_t)n > ci->src->bytes_in_buffer) {
        n -= (long)ci->src->bytes_in_buffer;
        jsrc_fill(ci);
    }
    ci->src->next_input_byte += n;
    ci->src->bytes_in_buffer -= (size_t)n;
}

static void jpeg_progress(j_common_ptr ci) {
    if (((j_decompress_ptr)ci)->input_scan_number > JPEG_MAX_SCANS) {
        jpeg_ctx *c = jctx(ci);
        fail(c->msg, c->msg_size, "%s: the JPEG has more than %d scans", c->what, JPEG_MAX_SCANS);
        longjmp(c->jb, 1);
    }
}

/* The first APP1 segment that starts "Exif\0" is the EXIF (Pillow's choice), as TIFF after "Exif\0\0". */
static int jpeg_orientation(j_decompress_ptr ci) {
    for (jpeg_saved_marker_ptr m = ci->marker_list; m; m = m->next) {
        if (m->marker != JPEG_APP0 + 1 || m->data_length < 5 || memcmp(m->data, "Exif\0", 5)) continue;
        if (m->data_length < 6 || m->data[5] != 0) return 0;
        return tiff_orientation(m->data + 6, m->data_length - 6);
    }
    return 0;
}

/* Decodes c->data into c->img: 0, or -1 with the message written. The only function that
 * calls setjmp for libjpeg; the caller destroys ci and frees the buffers. */
static int jpeg_run(jpeg_ctx *c) {
    j_decompress_ptr ci = &c->ci;
    if (setjmp(c->jb)) return -1;
    jpeg_create_decompress(ci);
    c->created = 1;
    c->src.init_source = jsrc_init;
    c->src.fill_input_buffer = jsrc_fill;
    c->src.skip_input_data = jsrc_skip;
    c->src.resync_to_restart = jpeg_resync_to_restart;
    c->src.term_source = jsrc_term;
    c->src.next_input_byte = c->data;
    c->src.bytes_in_buffer = c->size;
    ci->src = &c->src;
    c->progress.progress_monitor = jpeg_progress;
    ci->progress = &c->progress;
    jpeg_save_markers(ci, JPEG_APP0 + 1, 0xFFFF);
    jpeg_read_header(ci, TRUE);

    const int nc = ci->num_components;
    if (nc != 1 && nc != 3 && nc != 4)
        return fail(c->msg, c->msg_size, "%s: a JPEG of %d components (1, 3 or 4 are read)", c->what, nc);
    if (check_size(c->what, "JPEG", ci->image_width, ci->image_height, c->max_pixels, c->msg, c->msg_size)) return -1;
    /* the decoder's whole-image buffers (progressive and multi-scan files): at most 2 bytes a
     * sample of 4 components, over the image padded to whole MCUs of 32 x 32 */
    const size_t pw = ((size_t)ci->image_width + 31) / 32 * 32, ph = ((size_t)ci->image_height + 31) / 32 * 32;
    const size_t mem = 8 * pw * ph + ((size_t)64 << 20);
    ci->mem->max_memory_to_use = mem > (size_t)LONG_MAX ? LONG_MAX : (long)mem;
    c->img->orientation = jpeg_orientation(ci);
    /* what Pillow asks for: "L", "RGB" (libjpeg converts YCbCr), "CMYK" (inverted below) */
    ci->out_color_space = nc == 1 ? JCS_GRAYSCALE : nc == 3 ? JCS_RGB : JCS_CMYK;
    ci->dct_method = JDCT_ISLOW;
    ci->do_fancy_upsampling = TRUE;
    ci->do_block_smoothing = TRUE;
    ci->scale_num = ci->scale_denom = 1;
    jpeg_start_decompress(ci);
    const size_t w = ci->output_width, h = ci->output_height;
    if (w != ci->image_width || h != ci->image_height || ci->output_components != nc)
        return fail(c->msg, c->msg_size, "%s: the JPEG decoder gave %zu x %zu pixels of %d components", c->what, w, h,
                    ci->output_components);
    if (!(c->img->rgb = malloc(w * h * 3)) || (nc == 4 && !(c->row = malloc(w * 4))))
        return fail(c->msg, c->msg_size, "out of memory for %s (%zu x %zu pixels)", c->what, w, h);
    c->img->w = (int)w, c->img->h = (int)h;
    while (ci->output_scanline < h) {
        uint8_t *out = c->img->rgb + (size_t)ci->output_scanline * w * 3;
        JSAMPROW r = nc == 4 ? c->row : out;
        if (jpeg_read_scanlines(ci, &r, 1) != 1)
            return fail(c->msg, c->msg_size, "%s: the JPEG decoder stopped at row %u", c->what, ci->output_scanline);
        if (nc == 1) {
            for (size_t x = w; x-- > 0;)
                out[3 * x] = out[3 * x + 1] = out[3 * x + 2] = out[x];
        } else if (nc == 4) {
            /* Pillow: CMYK;I (Adobe's inverted CMYK, c = 255 - stored), then cmyk2rgb:
             * 255 - k - c * (255 - k) / 255, the division rounded as its MULDIV255 */
            for (size_t x = 0; x < w; x++) {
                const uint8_t *p = c->row + 4 * x;
                const int nk = p[3];
                for (int k = 0; k < 3; k++) {
                    const int t = (255 - p[k]) * nk + 128;
                    out[3 * x + k] = (uint8_t)(nk - (((t >> 8) + t) >> 8));
                }
            }
        }
    }
    c->rows_done = 1;
    jpeg_finish_decompress(ci);
    return 0;
}

static int decode_jpeg(const uint8_t *data, size_t size, const char *what, size_t max_pixels, cli_image *img, char *msg,
                       size_t msg_size) {
    jpeg_ctx *c = calloc(1, sizeof *c);
    if (!c) return fail(msg, msg_size, "out of memory reading %s", what);
    c->data = data, c->size = size, c->what = what, c->max_pixels = max_pixels;
    c->msg = msg, c->msg_size = msg_size, c->img = img;
    c->ci.err = jpeg_std_error(&c->pub);
    c->pub.error_exit = jpeg_fail_lib;
    c->pub.emit_message = jpeg_message;
    int rc = jpeg_run(c);
    if (c->created) jpeg_destroy_decompress(&c->ci);
    free(c->row);
    free(c);
    return rc;
}

/* ---- PNG ------------------------------------------------------------------------------------ */

enum { META_EXIF, META_RAW_EXIF, META_XMP };

typedef struct {
    size_t off, len; /* the chunk's data */
    uint32_t type;   /* eXIf, tEXt, zTXt or iTXt */
    int kind, post;  /* META_*; after the first IDAT */
} png_meta;

/* What the walk of the chunks found. */
typedef struct {
    png_meta *meta;
    size_t n_meta, cap_meta;
    uint64_t idat; /* bytes of IDAT data present */
} png_scan;

#define PNG_TYPE(a, b, c, d) ((uint32_t)(a) << 24 | (uint32_t)(b) << 16 | (uint32_t)(c) << 8 | (uint32_t)(d))

/* Walks the chunks after the signature up to IEND or the first that does not fit: sums the IDAT
 * bytes and notes the metadata Pillow takes the orientation from. -1 out of memory. */
static int png_walk(const uint8_t *d, size_t n, png_scan *s) {
    int post = 0;
    for (size_t pos = 8; n - pos >= 12;) {
        const uint32_t len = rd32(d + pos, 1), type = rd32(d + pos + 4, 1);
        if (len > 0x7FFFFFFFu) break;
        if (len > n - pos - 12) {
            if (type == PNG_TYPE('I', 'D', 'A', 'T')) s->idat += n - pos - 8;
            break;
        }
        const uint8_t *p = d + pos + 8;
        int kind = -1;
        if (type == PNG_TYPE('I', 'D', 'A', 'T')) {
            s->idat += len;
            post = 1;
        } else if (type == PNG_TYPE('I', 'E', 'N', 'D')) {
            break;
        } else if (type == PNG_TYPE('e', 'X', 'I', 'f')) {
            kind = META_EXIF;
        } else if (type == PNG_TYPE('t', 'E', 'X', 't') || type == PNG_TYPE('z', 'T', 'X', 't') ||
                   type == PNG_TYPE('i', 'T', 'X', 't')) {
            const uint8_t *z = memchr(p, 0, len);
            const size_t klen = z ? (size_t)(z - p) : len;
            if (klen == 21 && !memcmp(p, "Raw profile type exif", 21))
                kind = META_RAW_EXIF;
            else if (klen == 17 && !memcmp(p, "XML:com.adobe.xmp", 17))
                kind = META_XMP;
        }
        if (kind >= 0) {
            if (s->n_meta == s->cap_meta) {
                size_t cap = s->cap_meta ? 2 * s->cap_meta : 8;
                png_meta *m = realloc(s->meta, cap * sizeof *m);
                if (!m) return -1;
                s->meta = m, s->cap_meta = cap;
            }
            s->meta[s->n_meta++] = (png_meta){pos + 8, len, type, kind, post};
        }
        pos += 12 + (size_t)len;
    }
    return 0;
}

/* zlib data inflated as Pillow's _safe_zlib_decompress does, into a new buffer of at most
 * PNG_TEXT_MAX bytes: 1 with *out (free it; *out_n may be 0), 0 when the data is not zlib or
 * inflates to more than PNG_TEXT_MAX (a stream that just ends early gives what it gave). */
static int inflate_text(const uint8_t *in, size_t n, uint8_t **out, size_t *out_n) {
    uint8_t *buf = malloc(PNG_TEXT_MAX + 1);
    if (!buf) return 0;
    z_stream z;
    memset(&z, 0, sizeof z);
    if (inflateInit(&z) != Z_OK) {
        free(buf);
        return 0;
    }
    z.next_in = (Bytef *)(uintptr_t)in;
    z.avail_in = n > UINT32_MAX ? UINT32_MAX : (uInt)n;
    z.next_out = buf;
    z.avail_out = PNG_TEXT_MAX + 1;
    int r = inflate(&z, Z_FINISH);
    const size_t got = PNG_TEXT_MAX + 1 - z.avail_out;
    inflateEnd(&z);
    if ((r != Z_STREAM_END && r != Z_BUF_ERROR) || got > PNG_TEXT_MAX) {
        free(buf);
        return 0;
    }
    *out = buf, *out_n = got;
    return 1;
}

/* Strict UTF-8 (Python's "utf-8" codec: no surrogates, no overlong forms, at most U+10FFFF). */
static int utf8_ok(const uint8_t *s, size_t n) {
    for (size_t i = 0; i < n;) {
        const unsigned c = s[i];
        size_t k;
        unsigned min, cp;
        if (c < 0x80) {
            i++;
            continue;
        }
        if (c >= 0xC2 && c <= 0xDF)
            k = 1, min = 0x80, cp = c & 0x1F;
        else if (c >= 0xE0 && c <= 0xEF)
            k = 2, min = 0x800, cp = c & 0x0F;
        else if (c >= 0xF0 && c <= 0xF4)
            k = 3, min = 0x10000, cp = c & 0x07;
        else
            return 0;
        if (n - i - 1 < k) return 0;
        for (size_t j = 1; j <= k; j++) {
            if ((s[i + j] & 0xC0) != 0x80) return 0;
            cp = cp << 6 | (s[i + j] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
        i += k + 1;
    }
    return 1;
}

/* The text of a tEXt, zTXt or iTXt chunk as Pillow's chunk readers take it: 1 with the text
 * in *t (*buf the allocation to free, or NULL), 0 when Pillow would not set the key (an iTXt
 * that is malformed, compressed another way, or not UTF-8). A zTXt whose data is not zlib
 * sets an empty text, as in Pillow. */
static int png_text_value(const uint8_t *p, size_t len, uint32_t type, const uint8_t **t, size_t *t_n, uint8_t **buf) {
    *buf = NULL, *t = p, *t_n = 0;
    const uint8_t *z = memchr(p, 0, len);
    if (!z) return 1; /* a keyword alone: an empty text */
    const uint8_t *v = z + 1;
    size_t vn = len - (size_t)(v - p);
    if (type == PNG_TYPE('t', 'E', 'X', 't')) {
        *t = v, *t_n = vn;
        return 1;
    }
    if (type == PNG_TYPE('z', 'T', 'X', 't')) {
        if (vn && v[0] != 0) return 0; /* Pillow raises for another method */
        if (vn && inflate_text(v + 1, vn - 1, buf, t_n))
            *t = *buf;
        else
            *t_n = 0;
        return 1;
    }
    /* iTXt: flag, method, language NUL, translated keyword NUL, text */
    if (vn < 2) return 0;
    const int compressed = v[0], method = v[1];
    const uint8_t *lang = v + 2, *end = v + vn;
    const uint8_t *z1 = memchr(lang, 0, (size_t)(end - lang));
    if (!z1) return 0;
    const uint8_t *tk = z1 + 1, *z2 = memchr(tk, 0, (size_t)(end - tk));
    if (!z2) return 0;
    const uint8_t *text = z2 + 1;
    size_t text_n = (size_t)(end - text);
    if (compressed) {
        if (method != 0 || !inflate_text(text, text_n, buf, &text_n)) return 0;
        text = *buf;
    }
    if (!utf8_ok(lang, (size_t)(z1 - lang)) || !utf8_ok(tk, (size_t)(z2 - tk)) || !utf8_ok(text, text_n)) {
        free(*buf);
        *buf = NULL;
        return 0;
    }
    *t = text, *t_n = text_n;
    return 1;
}

/* ImageMagick's "Raw profile type exif" text: after its third line, hexadecimal digits (the line
 * ends removed, other white space allowed between bytes: Python's bytes.fromhex). The orientation
 * of the EXIF it holds; 0 when it holds none or is not hexadecimal. */
static int raw_profile_orientation(const uint8_t *t, size_t n) {
    size_t i = 0;
    for (int lines = 0; lines < 3; lines++) {
        const uint8_t *nl = memchr(t + i, '\n', n - i);
        if (!nl) return 0;
        i = (size_t)(nl - t) + 1;
    }
    uint8_t *hex = malloc(n - i + 1), *bytes = malloc((n - i) / 2 + 1);
    int o = 0;
    if (hex && bytes) {
        size_t m = 0, b = 0;
        for (size_t j = i; j < n; j++)
            if (t[j] != '\n') hex[m++] = t[j];
        int ok = 1;
        for (size_t j = 0; j < m && ok;) {
            const int c = hex[j];
            if (c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f') {
                j++;
                continue;
            }
            int hv[2];
            for (int q = 0; q < 2; q++) {
                const int h = j + (size_t)q < m ? hex[j + (size_t)q] : -1;
                hv[q] = h >= '0' && h <= '9'   ? h - '0'
                        : h >= 'a' && h <= 'f' ? h - 'a' + 10
                        : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                               : -1;
                if (hv[q] < 0) ok = 0;
            }
            if (ok) bytes[b++] = (uint8_t)(hv[0] << 4 | hv[1]);
            j += 2;
        }
        if (ok) o = exif_orientation(bytes, b);
    }
    free(hex);
    free(bytes);
    return o;
}

/* Pillow's XMP fallback: the first tiff:Orientation="N" or <tiff:Orientation>N; 0 for none. */
static int xmp_orientation(const uint8_t *t, size_t n) {
    static const char key[] = "tiff:Orientation";
    const size_t k = sizeof key - 1;
    for (size_t i = 0; i + k < n; i++) {
        if (memcmp(t + i, key, k)) continue;
        const uint8_t *p = t + i + k, *end = t + n;
        if (p[0] == '=' && end - p >= 3 && p[1] == '"' && p[2] >= '0' && p[2] <= '9') return p[2] - '0';
        if (p[0] == '>' && end - p >= 2 && p[1] >= '0' && p[1] <= '9') return p[1] - '0';
    }
    return 0;
}

/* The text of the last chunk of this kind that Pillow would keep (post: after IDAT ones too),
 * or 0; the orientation it gives through fn. */
static int png_text_orientation(const uint8_t *d, const png_scan *s, int kind, int post,
                                int (*fn)(const uint8_t *, size_t), int *found) {
    for (size_t i = s->n_meta; i-- > 0;) {
        const png_meta *m = &s->meta[i];
        if (m->kind != kind || (m->post && !post)) continue;
        const uint8_t *t;
        size_t tn;
        uint8_t *buf;
        if (!png_text_value(d + m->off, m->len, m->type, &t, &tn, &buf)) continue;
        *found = 1;
        const int o = tn ? fn(t, tn) : 0;
        free(buf);
        return o;
    }
    *found = 0;
    return 0;
}

/* The orientation exif_transpose finds in a PNG (Pillow 9.4): an eXIf before the first IDAT
 * (the last one) wins alone; without one, Pillow reads the chunks after IDAT too: the last
 * eXIf, else the last "Raw profile type exif" text. With no Orientation tag in these, the
 * XMP text's tiff:Orientation (of the chunks read). */
static int png_orientation(const uint8_t *d, const png_scan *s) {
    int pre_exif = 0;
    for (size_t i = 0; i < s->n_meta; i++)
        if (s->meta[i].kind == META_EXIF && !s->meta[i].post) pre_exif = 1;
    const int post = !pre_exif;
    int o = 0, found = 0;
    for (size_t i = s->n_meta; i-- > 0;) {
        const png_meta *m = &s->meta[i];
        if (m->kind == META_EXIF && (post || !m->post)) {
            o = tiff_orientation(d + m->off, m->len);
            found = 1;
            break;
        }
    }
    if (!found) o = png_text_orientation(d, s, META_RAW_EXIF, post, raw_profile_orientation, &found);
    if (o == 0) o = png_text_orientation(d, s, META_XMP, post, xmp_orientation, &found);
    return o;
}

typedef struct {
    png_structp png;
    png_infop info;
    const uint8_t *data;
    size_t size, pos;
    int rows_done, eof; /* every row is decoded; the reader ran out of data */
    png_uint_32 height;
    int interlaced;
    int bytes;   /* per pixel as libpng gives them: 1 gray or index, 2 gray 16-bit, 3 RGB */
    int palette; /* bytes are palette indices */
    uint8_t lut[256][3];
    png_bytep *rows;
    const char *what;
    size_t max_pixels;
    char *msg;
    size_t msg_size;
    cli_image *img;
} png_ctx;

static void png_fail_lib(png_structp png, png_const_charp m) {
    png_ctx *c = png_get_error_ptr(png);
    fail(c->msg, c->msg_size, "%s: the PNG cannot be decoded: %s", c->what, m);
    png_longjmp(png, 1);
}
static void png_warn_lib(png_structp png, png_const_charp m) { (void)png, (void)m; }

static void png_read_mem(png_structp png, png_bytep out, size_t n) {
    png_ctx *c = png_get_io_ptr(png);
    if (n > c->size - c->pos) {
        c->eof = 1;
        /* libpng reads the end of the deflate stream within the call that gives the last row: the
         * pixels are all there once the last row (of the last pass) is counted */
        if (c->height &&
            (c->interlaced ? png_get_current_pass_number(png) >= 7 : png_get_current_row_number(png) >= c->height))
            c->rows_done = 1;
        fail(c->msg, c->msg_size, "%s: the PNG data ends early (the file is truncated)", c->what);
        png_longjmp(png, 1);
    }
    memcpy(out, c->data + c->pos, n);
    c->pos += n;
}

/* Decodes c->data into c->img as 1, 2 or 3 bytes a pixel (c->bytes) at the start of each RGB row:
 * 0, or -1 with the message written. The only function that calls setjmp for libpng. */
static int png_run(png_ctx *c) {
    png_structp png = c->png;
    if (setjmp(png_jmpbuf(png))) {
        if (!c->rows_done || !c->eof) return -1;
        if (c->msg && c->msg_size) c->msg[0] = 0; /* the data ends after the last row: fine, as for Pillow */
        return 0;
    }
    png_infop info = c->info;
    png_read_info(png, info);
    png_uint_32 w, h;
    int depth, type, interlace;
    png_get_IHDR(png, info, &w, &h, &depth, &type, &interlace, NULL, NULL);
    if (check_size(c->what, "PNG", w, h, c->max_pixels, c->msg, c->msg_size)) return -1;
    switch (type) {
    case PNG_COLOR_TYPE_GRAY:
        if (depth < 8) png_set_expand_gray_1_2_4_to_8(png);
        c->bytes = depth == 16 ? 2 : 1; /* 16-bit gray: Pillow's "I", clipped below */
        break;
    case PNG_COLOR_TYPE_GRAY_ALPHA:
        png_set_strip_alpha(png);
        png_set_strip_16(png); /* the high byte, as Pillow's LA;16B */
        c->bytes = 1;
        break;
    case PNG_COLOR_TYPE_RGB:
    case PNG_COLOR_TYPE_RGB_ALPHA:
        png_set_strip_alpha(png);
        png_set_strip_16(png);
        c->bytes = 3;
        break;
    case PNG_COLOR_TYPE_PALETTE: {
        png_colorp pal = NULL;
        int n = 0;
        png_get_PLTE(png, info, &pal, &n);
        for (int i = 0; i < 256; i++) {
            const int in = i < n && pal;
            c->lut[i][0] = in ? pal[i].red : (uint8_t)i;
            c->lut[i][1] = in ? pal[i].green : (uint8_t)i;
            c->lut[i][2] = in ? pal[i].blue : (uint8_t)i;
        }
        png_set_packing(png);
        c->bytes = 1, c->palette = 1;
        break;
    }
    default: return fail(c->msg, c->msg_size, "%s: a PNG of color type %d", c->what, type);
    }
    png_set_interlace_handling(png);
    png_read_update_info(png, info);
    if (png_get_rowbytes(png, info) != (size_t)w * (size_t)c->bytes)
        return fail(c->msg, c->msg_size, "%s: libpng gives rows of %zu bytes for %u pixels", c->what,
                    (size_t)png_get_rowbytes(png, info), (unsigned)w);
    if (!(c->img->rgb = malloc((size_t)w * h * 3)) || !(c->rows = malloc(h * sizeof *c->rows)))
        return fail(c->msg, c->msg_size, "out of memory for %s (%u x %u pixels)", c->what, (unsigned)w, (unsigned)h);
    c->img->w = (int)w, c->img->h = (int)h;
    c->height = h, c->interlaced = interlace != PNG_INTERLACE_NONE;
    for (size_t y = 0; y < h; y++)
        c->rows[y] = c->img->rgb + y * w * 3;
    png_read_image(png, c->rows);
    c->rows_done = 1;
    png_read_end(png, NULL); /* the chunks after IDAT, their CRCs; a missing IEND is fine */
    return 0;
}

static int decode_png(const uint8_t *data, size_t size, const char *what, size_t max_pixels, cli_image *img, char *msg,
                      size_t msg_size) {
    png_scan s;
    memset(&s, 0, sizeof s);
    if (png_walk(data, size, &s)) {
        free(s.meta);
        return fail(msg, msg_size, "out of memory reading %s", what);
    }
    /* the size from IHDR first, for a clear message before libpng (which refuses it too); and as no
     * deflate stream inflates more than 1032 times, the pixels must fit in the IDAT bytes there are */
    if (size >= 33 && rd32(data + 8, 1) == 13 && rd32(data + 12, 1) == PNG_TYPE('I', 'H', 'D', 'R')) {
        const uint64_t w = rd32(data + 16, 1), h = rd32(data + 20, 1);
        const int depth = data[24], type = data[25];
        const int ch = type == 0 || type == 3 ? 1 : type == 2 ? 3 : type == 4 ? 2 : type == 6 ? 4 : 0;
        if (check_size(what, "PNG", w, h, max_pixels, msg, msg_size)) {
            free(s.meta);
            return -1;
        }
        if (ch && depth <= 16 && w * h * (uint64_t)(ch * depth) / 8 > (s.idat + 1) * DEFLATE_MAX_RATIO) {
            free(s.meta);
            return fail(msg, msg_size,
                        "%s: the PNG is truncated or corrupt: %llu x %llu pixels cannot come from the %llu bytes of "
                        "image data it holds",
                        what, (unsigned long long)w, (unsigned long long)h, (unsigned long long)s.idat);
        }
    }
    png_ctx *c = calloc(1, sizeof *c);
    if (!c) {
        free(s.meta);
        return fail(msg, msg_size, "out of memory reading %s", what);
    }
    c->data = data, c->size = size, c->what = what, c->max_pixels = max_pixels;
    c->msg = msg, c->msg_size = msg_size, c->img = img;
    int rc = -1;
    c->png = png_create_read_struct(PNG_LIBPNG_VER_STRING, c, png_fail_lib, png_warn_lib);
    if (c->png) c->info = png_create_info_struct(c->png);
    if (!c->png || !c->info) {
        fail(msg, msg_size, "out of memory reading %s", what);
        goto done;
    }
    png_set_read_fn(c->png, c, png_read_mem);
    png_set_user_limits(c->png, CLI_IMAGE_MAX_SIDE, CLI_IMAGE_MAX_SIDE);
    png_set_chunk_malloc_max(c->png, PNG_MAX_CHUNK);
    /* every ancillary chunk skipped (the walk above reads the metadata), tRNS too: alpha is dropped */
    png_set_keep_unknown_chunks(c->png, PNG_HANDLE_CHUNK_NEVER, NULL, -1);
    png_set_keep_unknown_chunks(c->png, PNG_HANDLE_CHUNK_NEVER, (png_const_bytep) "tRNS", 1);
#ifdef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
    /* a fuzzer cannot forge checksums: without this, every mutation would stop at a CRC */
    png_set_crc_action(c->png, PNG_CRC_QUIET_USE, PNG_CRC_QUIET_USE);
#ifdef PNG_IGNORE_ADLER32
    png_set_option(c->png, PNG_IGNORE_ADLER32, PNG_OPTION_ON);
#endif
#else
    png_set_crc_action(c->png, PNG_CRC_ERROR_QUIT, PNG_CRC_ERROR_QUIT); /* a bad CRC is an error, in any chunk */
#endif
    if (png_run(c)) goto done;
    /* the rows to RGB, in place from the right: 1 or 2 bytes a pixel grow into 3 */
    const size_t w = (size_t)img->w;
    for (size_t y = 0; y < (size_t)img->h; y++) {
        uint8_t *r = c->rows[y];
        if (c->bytes == 3) continue;
        for (size_t x = w; x-- > 0;) {
            if (c->palette) {
                const uint8_t *p = c->lut[r[x]];
                r[3 * x] = p[0], r[3 * x + 1] = p[1], r[3 * x + 2] = p[2];
            } else {
                /* 16-bit gray: Pillow's I -> RGB clips to 0..255 */
                const unsigned v = c->bytes == 2 ? ((unsigned)r[2 * x] << 8 | r[2 * x + 1]) : r[x];
                r[3 * x] = r[3 * x + 1] = r[3 * x + 2] = (uint8_t)(v > 255 ? 255 : v);
            }
        }
    }
    img->orientation = png_orientation(data, &s);
    rc = 0;
done:
    png_destroy_read_struct(c->png ? &c->png : NULL, c->info ? &c->info : NULL, NULL);
    free(c->rows);
    free(c);
    free(s.meta);
    return rc;
}

/* ---- formats -------------------------------------------------------------------------------- */

/* The name of an image format this does not read, from its first bytes, or NULL. */
static const char *other_format(const uint8_t *d, size_t n) {
    if (n >= 6 && (!memcmp(d, "GIF87a", 6) || !memcmp(d, "GIF89a", 6))) return "GIF";
    if (n >= 12 && !memcmp(d, "RIFF", 4) && !memcmp(d + 8, "WEBP", 4)) return "WebP";
    if (n >= 4 &&
        (!memcmp(d, "II*\0", 4) || !memcmp(d, "MM\0*", 4) || !memcmp(d, "II+\0", 4) || !memcmp(d, "MM\0+", 4)))
        return "TIFF";
    if (n >= 12 && !memcmp(d + 4, "ftyp", 4)) {
        if (!memcmp(d + 8, "avif", 4) || !memcmp(d + 8, "avis", 4)) return "AVIF";
        if (!memcmp(d + 8, "heic", 4) || !memcmp(d + 8, "heix", 4) || !memcmp(d + 8, "mif1", 4) ||
            !memcmp(d + 8, "msf1", 4) || !memcmp(d + 8, "hevc", 4))
            return "HEIF";
    }
    if ((n >= 12 && !memcmp(d, "\0\0\0\x0cjP  \r\n\x87\n", 12)) || (n >= 4 && !memcmp(d, "\xff\x4f\xff\x51", 4)))
        return "JPEG 2000";
    if ((n >= 2 && !memcmp(d, "\xff\x0a", 2)) || (n >= 12 && !memcmp(d, "\0\0\0\x0cJXL \r\n\x87\n", 12)))
        return "JPEG XL";
    if (n >= 4 && !memcmp(d, "8BPS", 4)) return "Photoshop";
    if (n >= 4 && !memcmp(d, "\0\0\1\0", 4)) return "ICO";
    if (n >= 4 && !memcmp(d, "qoif", 4)) return "QOI";
    if (n >= 14 && d[0] == 'B' && d[1] == 'M') return "BMP";
    return NULL;
}

/* Decodes size bytes (size > 0) into img; what names the input in messages. */
static int decode(const uint8_t *d, size_t size, const char *what, size_t max_pixels, cli_image *img, char *msg,
                  size_t msg_size) {
    if (!max_pixels) max_pixels = CLI_IMAGE_MAX_PIXELS;
    int rc;
    if (size >= 3 && !memcmp(d, "\xff\xd8\xff", 3)) {
        snprintf(img->format, sizeof img->format, "JPEG");
        rc = decode_jpeg(d, size, what, max_pixels, img, msg, msg_size);
    } else if (size >= 8 && !memcmp(d, "\x89PNG\r\n\x1a\n", 8)) {
        snprintf(img->format, sizeof img->format, "PNG");
        rc = decode_png(d, size, what, max_pixels, img, msg, msg_size);
    } else {
        const char *other = other_format(d, size);
        if (other) return fail(msg, msg_size, "%s is a %s image: only JPEG and PNG are read", what, other);
        char hex[3 * 8] = "";
        size_t k = 0;
        for (size_t i = 0; i < size && i < 8; i++)
            k += (size_t)snprintf(hex + k, sizeof hex - k, i ? " %02x" : "%02x", d[i]);
        return fail(msg, msg_size, "%s is not a JPEG or PNG image (it starts with %s): only JPEG and PNG are read",
                    what, hex);
    }
    if (rc == 0 && img->orientation >= 2 && img->orientation <= 8) {
        if (orient(img, img->orientation)) rc = fail(msg, msg_size, "out of memory for %s", what);
    } else {
        img->orientation = 1;
    }
    if (rc) cli_image_free(img);
    return rc;
}

int cli_image_read_memory(const void *data, size_t size, const char *name, size_t max_pixels, cli_image *img, char *msg,
                          size_t msg_size) {
    memset(img, 0, sizeof *img);
    char what[300];
    snprintf(what, sizeof what, "%s%.200s%s", name ? "'" : "", name ? name : "the image", name ? "'" : "");
    if (!size || !data) return fail(msg, msg_size, "%s is empty", what);
    return decode(data, size, what, max_pixels, img, msg, msg_size);
}

int cli_image_read_file(const char *path, size_t max_pixels, cli_image *img, char *msg, size_t msg_size) {
    memset(img, 0, sizeof *img);
    if (!max_pixels) max_pixels = CLI_IMAGE_MAX_PIXELS;
    char what[4200];
    snprintf(what, sizeof what, "'%s'", path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return fail(msg, msg_size, "cannot open %s: %s", what, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return fail(msg, msg_size, "%s is not a regular file", what);
    }
    if (st.st_size == 0) {
        close(fd);
        return fail(msg, msg_size, "%s is empty", what);
    }
    /* no image of the budget needs more: 8 bytes a pixel (uncompressed 16-bit RGBA) and metadata */
    const uint64_t limit = (uint64_t)max_pixels * 8 + ((uint64_t)16 << 20);
    if ((uint64_t)st.st_size > limit || (uint64_t)st.st_size > SIZE_MAX) {
        close(fd);
        return fail(msg, msg_size, "%s is %lld bytes, over the limit of %llu bytes for an image of %zu pixels", what,
                    (long long)st.st_size, (unsigned long long)limit, max_pixels);
    }
    const size_t size = (size_t)st.st_size;
    uint8_t *buf = malloc(size);
    if (!buf) {
        close(fd);
        return fail(msg, msg_size, "out of memory reading %s (%zu bytes)", what, size);
    }
    size_t got = 0;
    while (got < size) {
        ssize_t r = read(fd, buf + got, size - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            int e = r < 0 ? errno : 0;
            close(fd);
            free(buf);
            return fail(msg, msg_size, "cannot read %s: %s", what, e ? strerror(e) : "it ended early");
        }
        got += (size_t)r;
    }
    close(fd);
    int rc = decode(buf, size, what, max_pixels, img, msg, msg_size);
    free(buf);
    return rc;
}

wgml_image cli_image_view(const cli_image *img) {
    wgml_image v = {img->w, img->h, (size_t)img->w * 3, img->rgb};
    return v;
}

void cli_image_free(cli_image *img) {
    if (!img) return;
    free(img->rgb);
    memset(img, 0, sizeof *img);
}
