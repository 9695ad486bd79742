/*
 * image_file.h - image files for the CLI and the server: a path or bytes in
 * memory (an upload, a base64 data URL) decoded into 8-bit RGB, the pixels
 * the vision models take (wgml_image). Linked by the CLI only, never by
 * libwgml: JPEG through libjpeg-turbo (IJG/BSD licences), PNG through libpng
 * (libpng licence).
 *
 * The pixels are what Hugging Face's transformers.image_utils.load_image
 * gives: PIL.Image.open, PIL.ImageOps.exif_transpose, convert("RGB") (Pillow
 * 9.4), byte for byte:
 *
 *   JPEG  grayscale, YCbCr, RGB (Adobe transform 0), CMYK and YCCK (4
 *         components are taken as Adobe's inverted CMYK, as Pillow takes
 *         them, and made RGB with Pillow's formula); baseline, progressive,
 *         arithmetic-coded; the decoder settings are Pillow's (libjpeg's
 *         defaults: the slow integer DCT, fancy upsampling), from the same
 *         library. The orientation is the Orientation tag of the first APP1
 *         "Exif" segment (its TIFF structure read here, either byte order,
 *         every offset checked against the segment).
 *   PNG   gray 1-16 bits, gray + alpha, RGB, RGBA, palette (an index past
 *         the palette is the gray (i, i, i), as Pillow's palette holds),
 *         tRNS, interlaced; alpha and tRNS are dropped, not composited (as
 *         convert("RGB") does); 16-bit samples keep their high byte, except
 *         16-bit gray, which Pillow opens as 32-bit integers and convert("RGB")
 *         clips to 0..255: values above 255 are 255 (a nearly white image),
 *         and so it is here. The orientation is what Pillow reads: an eXIf
 *         chunk (a text chunk "Raw profile type exif" when there is none),
 *         else tiff:Orientation in the XMP text chunk "XML:com.adobe.xmp".
 *
 * Only JPEG and PNG are read: GIF, WebP, BMP, TIFF, HEIF/AVIF and the rest
 * are refused with a message naming the format (the format is found from
 * the first bytes, never from the file name). No colour management (Pillow's
 * load_image applies none either): ICC profiles, gAMA and cHRM are ignored.
 *
 * Hostile input: a file is refused, with a message that names it, when it
 * is empty, truncated (the data ends before the last row of pixels; for a
 * PNG, before the end of its compressed data, Adler-32 included), has a bad
 * CRC (PNG) or corrupt entropy-coded data (JPEG: what libjpeg only warns
 * about, premature end of a data segment, a bad Huffman code, a lost restart
 * marker, an inconsistent progression, is an error here; Pillow would fill
 * gray), a width or height of 0 or above CLI_IMAGE_MAX_SIDE, more pixels
 * than max_pixels (checked from the header, before any pixel memory is
 * taken: a decompression bomb costs nothing), a PNG whose compressed data is
 * too short to hold its pixels even at deflate's best ratio (1032:1), a JPEG
 * of more than 500 scans, or a JPEG that is not 1, 3 or 4 components of 8
 * bits. Malformed EXIF/XMP is ignored as Pillow ignores it (no rotation), an
 * offset outside the segment included. See docs/hardening.md, "Image files".
 */
#ifndef WGML_IMAGE_FILE_H
#define WGML_IMAGE_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "wgml.h"

/* The default budget of pixels (width x height, before any rotation): 2^27, about 134 million,
 * 400 MiB as RGB; Pillow refuses twice its MAX_IMAGE_PIXELS, 178956970. */
#define CLI_IMAGE_MAX_PIXELS ((size_t)1 << 27)
/* The most pixels a side may have (JPEG allows 65500 at most). */
#define CLI_IMAGE_MAX_SIDE 65535

typedef struct cli_image {
    uint8_t *rgb;    /* h rows of w pixels, R G B, rows packed (stride 3 * w); malloc'ed */
    int w, h;        /* after the orientation is applied */
    int orientation; /* the EXIF orientation applied: 1 (none) .. 8 */
    char format[8];  /* "JPEG" or "PNG" */
} cli_image;

/* Decodes the image file at path into img (see the top of this file). max_pixels: the most
 * pixels taken, 0 for CLI_IMAGE_MAX_PIXELS. Files are read whole, up to 8 bytes a pixel of
 * the budget plus 16 MiB. Returns 0, or -1 with img zeroed and a message in msg that names
 * the file ("'cat.png': a PNG of 60000 x 60000 pixels is over the limit of 134217728 pixels"). */
int cli_image_read_file(const char *path, size_t max_pixels, cli_image *img, char *msg, size_t msg_size);

/* The same for size bytes at data. name: how messages call the input (an upload's file
 * name), or NULL ("the image"). */
int cli_image_read_memory(const void *data, size_t size, const char *name, size_t max_pixels, cli_image *img, char *msg,
                          size_t msg_size);

/* The decoded pixels as the library takes them (no copy: valid while img is). */
wgml_image cli_image_view(const cli_image *img);

/* Frees the pixels and zeroes img; NULL is fine. */
void cli_image_free(cli_image *img);

#endif
