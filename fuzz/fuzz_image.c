/*
 * fuzz_image.c - libFuzzer target: the CLI's image reader (tools/wgml/image_file.c, JPEG
 * through libjpeg-turbo and PNG through libpng, neither instrumented) decoding from memory,
 * as the server decodes an uploaded or base64 image.
 *
 * Input: the file's bytes. The pixel budget is 2^16 (a 256 x 256 image), so that no input
 * can make the decoders take much memory or time; the PNG CRCs and Adler-32 are not checked
 * in this build (FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION), so mutations get past them.
 * Checked: a refusal has a message and leaves the image zeroed; an accepted image has a
 * format matching the input's first bytes, an orientation 1..8, 1..budget pixels, every
 * byte of its pixels readable (ASan checks the buffer's extent), and decoding the same
 * bytes again gives the same pixels. Seeds: small JPEGs and PNGs of every kind Pillow writes, with and
 * without EXIF orientation (fuzz/make-corpus.sh).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "image_file.h"

#define FUZZ_MAX_PIXELS ((size_t)1 << 16)

#define CHECK(c)                                                                                                       \
    do {                                                                                                               \
        if (!(c)) {                                                                                                    \
            fprintf(stderr, "fuzz_image: check failed: %s (line %d)\n", #c, __LINE__);                                 \
            abort();                                                                                                   \
        }                                                                                                              \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    cli_image img, again;
    char msg[512];
    msg[0] = 0;
    if (cli_image_read_memory(data, size, "fuzz.img", FUZZ_MAX_PIXELS, &img, msg, sizeof msg)) {
        CHECK(msg[0] != 0);
        CHECK(strstr(msg, "fuzz.img") || strstr(msg, "out of memory"));
        CHECK(!img.rgb && !img.w && !img.h);
        return 0;
    }
    CHECK(img.rgb && img.w > 0 && img.h > 0);
    CHECK((size_t)img.w * (size_t)img.h <= FUZZ_MAX_PIXELS);
    CHECK(img.orientation >= 1 && img.orientation <= 8);
    CHECK(!strcmp(img.format, size >= 3 && data[0] == 0xFF && data[1] == 0xD8 ? "JPEG" : "PNG"));
    wgml_image v = cli_image_view(&img);
    CHECK(v.w == img.w && v.h == img.h && v.stride == (size_t)img.w * 3 && v.data == img.rgb);
    uint64_t sum = 0; /* every byte read: ASan checks the extent */
    for (size_t i = 0; i < v.stride * (size_t)v.h; i++)
        sum += v.data[i];
    CHECK(sum <= 255 * (uint64_t)v.stride * (uint64_t)v.h);
    CHECK(cli_image_read_memory(data, size, NULL, FUZZ_MAX_PIXELS, &again, msg, sizeof msg) == 0);
    CHECK(again.w == img.w && again.h == img.h && again.orientation == img.orientation);
    CHECK(!memcmp(again.rgb, img.rgb, v.stride * (size_t)v.h));
    cli_image_free(&again);
    cli_image_free(&img);
    CHECK(!img.rgb);
    return 0;
}
