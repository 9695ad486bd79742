/*
 * image_file_tool.c - the driver of tests/test_image_file.py: decodes an image file through
 * tools/wgml/image_file.c (the CLI's reader) and writes the pixels, and writes the JPEG
 * variants Pillow cannot (YCCK, RGB without YCbCr conversion, arithmetic coding, restart
 * markers) with libjpeg.
 *
 *   image_file_tool [--memory] [--max-pixels N] IN OUT
 *       decodes IN (by path, or with --memory from bytes read here, as the server has them)
 *       and writes its RGB bytes (rows packed) to OUT; prints "W H ORIENTATION FORMAT".
 *       Exit 0, or 1 with the reader's message on stderr.
 *   image_file_tool --encode-jpeg SPACE W H [--arith] [--progressive] [--many-scans] [--restart N] IN OUT
 *       compresses W x H pixels of IN (1 byte each for SPACE gray, 3 for rgb and ycc, 4
 *       (CMYK, as Pillow's CMYK;I writes them: inverted) for cmyk and ycck) into the JPEG OUT,
 *       stored in that colour space, quality 90. --many-scans: progressive, every AC
 *       coefficient of every component in 3 scans of its own (successive approximation):
 *       1 + 189 scans a component.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>

#include "image_file.h"

static unsigned char *read_all(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, len = 0;
    unsigned char *buf = malloc(cap);
    for (;;) {
        if (!buf) break;
        len += fread(buf + len, 1, cap - len, f);
        if (len < cap) break;
        unsigned char *g = realloc(buf, cap *= 2);
        if (!g) free(buf);
        buf = g;
    }
    fclose(f);
    *n = len;
    return buf;
}

static int encode_jpeg(int argc, char **argv) {
    if (argc < 5) return 2;
    const char *space = argv[0];
    const int w = atoi(argv[1]), h = atoi(argv[2]);
    int arith = 0, progressive = 0, many = 0, restart = 0, i = 3;
    for (; i < argc - 2; i++) {
        if (!strcmp(argv[i], "--arith"))
            arith = 1;
        else if (!strcmp(argv[i], "--progressive"))
            progressive = 1;
        else if (!strcmp(argv[i], "--many-scans"))
            many = 1;
        else if (!strcmp(argv[i], "--restart") && i + 1 < argc - 2)
            restart = atoi(argv[++i]);
        else
            return 2;
    }
    J_COLOR_SPACE stored;
    int comps = 3;
    if (!strcmp(space, "gray"))
        stored = JCS_GRAYSCALE, comps = 1;
    else if (!strcmp(space, "rgb"))
        stored = JCS_RGB;
    else if (!strcmp(space, "ycc"))
        stored = JCS_YCbCr;
    else if (!strcmp(space, "cmyk"))
        stored = JCS_CMYK, comps = 4;
    else if (!strcmp(space, "ycck"))
        stored = JCS_YCCK, comps = 4;
    else
        return 2;
    size_t n;
    unsigned char *px = read_all(argv[argc - 2], &n);
    if (!px || w <= 0 || h <= 0 || n != (size_t)w * h * comps) {
        fprintf(stderr, "image_file_tool: %s does not hold %d x %d pixels of %d bytes\n", argv[argc - 2], w, h, comps);
        free(px);
        return 1;
    }
    FILE *out = fopen(argv[argc - 1], "wb");
    if (!out) {
        perror(argv[argc - 1]);
        free(px);
        return 1;
    }
    struct jpeg_compress_struct ci;
    struct jpeg_error_mgr je;
    ci.err = jpeg_std_error(&je); /* exits on an error: fine for a test tool */
    jpeg_create_compress(&ci);
    jpeg_stdio_dest(&ci, out);
    ci.image_width = (JDIMENSION)w;
    ci.image_height = (JDIMENSION)h;
    ci.input_components = comps;
    ci.in_color_space = comps == 4 ? JCS_CMYK : comps == 1 ? JCS_GRAYSCALE : JCS_RGB;
    jpeg_set_defaults(&ci);
    jpeg_set_colorspace(&ci, stored);
    jpeg_set_quality(&ci, 90, TRUE);
    ci.arith_code = arith ? TRUE : FALSE;
    ci.restart_interval = (unsigned)restart;
    if (progressive) jpeg_simple_progression(&ci);
    static jpeg_scan_info scans[1 + 4 * 63 * 3];
    if (many) {
        int ns = 0;
        scans[ns].comps_in_scan = ci.num_components;
        for (int c = 0; c < ci.num_components; c++)
            scans[ns].component_index[c] = c;
        scans[ns].Ss = scans[ns].Se = scans[ns].Ah = scans[ns].Al = 0;
        ns++;
        for (int c = 0; c < ci.num_components; c++)
            for (int k = 1; k < 64; k++)
                for (int a = 0; a < 3; a++) {
                    jpeg_scan_info *sc = &scans[ns++];
                    sc->comps_in_scan = 1;
                    sc->component_index[0] = c;
                    sc->Ss = sc->Se = k;
                    sc->Ah = a == 0 ? 0 : 3 - a; /* Al 2, then 2 -> 1, then 1 -> 0 */
                    sc->Al = 2 - a;
                }
        ci.scan_info = scans;
        ci.num_scans = ns;
    }
    jpeg_start_compress(&ci, TRUE);
    while (ci.next_scanline < ci.image_height) {
        JSAMPROW row = px + (size_t)ci.next_scanline * w * comps;
        jpeg_write_scanlines(&ci, &row, 1);
    }
    jpeg_finish_compress(&ci);
    jpeg_destroy_compress(&ci);
    fclose(out);
    free(px);
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "--encode-jpeg")) {
        int rc = encode_jpeg(argc - 2, argv + 2);
        if (rc == 2)
            fprintf(stderr, "usage: image_file_tool --encode-jpeg gray|rgb|ycc|cmyk|ycck W H [--arith] "
                            "[--progressive] [--many-scans] [--restart N] IN OUT\n");
        return rc;
    }
    int memory = 0, i = 1;
    size_t max_pixels = 0;
    for (; i < argc - 2; i++) {
        if (!strcmp(argv[i], "--memory"))
            memory = 1;
        else if (!strcmp(argv[i], "--max-pixels") && i + 1 < argc - 2)
            max_pixels = strtoull(argv[++i], NULL, 10);
        else
            break;
    }
    if (argc - i != 2) {
        fprintf(stderr, "usage: image_file_tool [--memory] [--max-pixels N] IN OUT\n");
        return 2;
    }
    const char *in = argv[i], *out_path = argv[i + 1];
    cli_image img;
    char msg[1024];
    int rc;
    if (memory) {
        size_t n = 0;
        unsigned char *bytes = read_all(in, &n);
        if (!bytes) {
            fprintf(stderr, "image_file_tool: cannot read %s\n", in);
            return 1;
        }
        rc = cli_image_read_memory(bytes, n, in, max_pixels, &img, msg, sizeof msg);
        free(bytes);
    } else {
        rc = cli_image_read_file(in, max_pixels, &img, msg, sizeof msg);
    }
    if (rc) {
        if (img.rgb || img.w || img.h) {
            fprintf(stderr, "image_file_tool: a failed read left pixels behind\n");
            return 3;
        }
        fprintf(stderr, "image_file_tool: %s\n", msg);
        return 1;
    }
    wgml_image v = cli_image_view(&img);
    FILE *f = fopen(out_path, "wb");
    if (!f) {
        perror(out_path);
        cli_image_free(&img);
        return 1;
    }
    size_t bytes = v.stride * (size_t)v.h;
    if (fwrite(v.data, 1, bytes, f) != bytes || fclose(f) != 0) {
        perror(out_path);
        cli_image_free(&img);
        return 1;
    }
    printf("%d %d %d %s\n", img.w, img.h, img.orientation, img.format);
    cli_image_free(&img);
    return 0;
}
