/*
 * cmd_bench_images.c - `wgml bench --images`: image embedding speed of a
 * vision tower (CLIP, SigLIP, ViT: task embed-image; wgml bench hands its
 * arguments here when --images is among them or the model embeds images).
 *
 * The images are made in memory, W x H RGB8 (640 x 480 by default), image i
 * a smooth gradient with a bright disc and 8-bit noise, each different, so
 * that the model's preprocessing (Pillow's resize, the crop, the
 * normalization) is part of the measured work, as with a photo. Batch 1
 * embeds each image alone (latency per image); batch B embeds B images in
 * one wgml_embed_images call with n_batch B, one step. The figures are
 * end to end: preprocessing, the patch unfolding on the host, the tower.
 *
 * The GEMM work of an image is 2 x the weights it multiplies (matmul_params)
 * x its rows (n_ctx_train: the patches, and the class row where there is
 * one). That counts the few weights used once per image (CLIP's projection,
 * SigLIP's pooling head) once per row, and not attention's own products
 * (scores, weighted sums): an estimate within a few percent for the base
 * towers. Each run is paired with a measurement of the backend's own matmul
 * rate taken right after it, and the share of that rate is the median of the
 * per-run ratios.
 */
#include "cli.h"

#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    cli_model_opts mo;
    int batch, n_images, width, height, repeat, json, limits, profile, images;
} bench_images_opts;

static const cli_opt options[] = {
    CLI_INCLUDE(cli_model_table, bench_images_opts, mo),
    CLI_FLAG("--images", NULL, bench_images_opts, images, NULL), /* what brought the arguments here */
    CLI_INT("--batch", NULL, bench_images_opts, batch, "B", 1, 1024,
            "images per call (and per step) for the batched figure (default 16)"),
    CLI_INT("--count", NULL, bench_images_opts, n_images, "N", 1, 4096,
            "images per run (default 32; batch 1 embeds min(N, 16) of them)"),
    CLI_INT("--width", NULL, bench_images_opts, width, "W", 1, 8192, "width of the synthetic images (default 640)"),
    CLI_INT("--height", NULL, bench_images_opts, height, "H", 1, 8192, "height of the synthetic images (default 480)"),
    CLI_INT("--repeat", NULL, bench_images_opts, repeat, "R", 1, 64, "runs; figures are medians (default 3)"),
    CLI_FLAG_SET("--no-limits", NULL, bench_images_opts, limits, 0, "skip measuring the matmul rate"),
    CLI_FLAG("--profile", NULL, bench_images_opts, profile,
             "per-kernel time table of the last run (GPU timestamps / CPU op time)"),
    CLI_FLAG("--json", NULL, bench_images_opts, json, "print one JSON object on stdout"),
    CLI_END,
};

static const cli_spec spec = {
    .usage = "usage: wgml bench --images -m MODEL [options]\n",
    .about = "Measures image embedding speed (images/s) of a vision tower (CLIP, SigLIP, ViT) for\n"
             "batches of 1 and B synthetic W x H photos, preprocessing included, and the share of\n"
             "the backend's measured matmul rate they reach.\n",
    .opts = options,
};

/* Image i: w x h RGB8, a gradient whose direction and colours depend on i, a
 * disc, and noise of +-16 (deterministic). */
static uint8_t *make_image(int i, int w, int h) {
    uint8_t *p = malloc((size_t)w * (size_t)h * 3);
    if (!p) return NULL;
    uint32_t x = 2654435761u * (uint32_t)(i + 1);
    const int cx = w / 3 + (i * 37) % (w / 3 + 1), cy = h / 3 + (i * 53) % (h / 3 + 1);
    const long long r2 = (long long)(w < h ? w : h) * (w < h ? w : h) / 16;
    for (int y = 0; y < h; y++)
        for (int c = 0; c < w; c++) {
            const long long dx = c - cx, dy = y - cy;
            const int disc = dx * dx + dy * dy < r2 ? 80 : 0;
            for (int k = 0; k < 3; k++) {
                x = x * 1664525u + 1013904223u;
                int v = (k == 0   ? 255 * c / w
                         : k == 1 ? 255 * y / h
                                  : 255 * (c + y) / (w + h)) +
                        40 * ((i + k) % 3) + disc + (int)((x >> 24) & 31) - 16;
                p[((size_t)y * (size_t)w + (size_t)c) * 3 + (size_t)k] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
            }
        }
    return p;
}

static double min_of(const double *v, int n) {
    double m = v[0];
    for (int i = 1; i < n; i++)
        m = v[i] < m ? v[i] : m;
    return m;
}

static double max_of(const double *v, int n) {
    double m = v[0];
    for (int i = 1; i < n; i++)
        m = v[i] > m ? v[i] : m;
    return m;
}

/* {"median", "min", "max"} of R runs' figures. */
static json_object *spread_json(const double *v, int n) {
    json_object *o = json_object_new_object();
    json_object_object_add(o, "median", json_object_new_double(cli_median(v, n)));
    json_object_object_add(o, "min", json_object_new_double(min_of(v, n)));
    json_object_object_add(o, "max", json_object_new_double(max_of(v, n)));
    return o;
}

int cmd_bench_images(int argc, char **argv) {
    bench_images_opts opt = {.batch = 16, .n_images = 32, .width = 640, .height = 480, .repeat = 3, .limits = 1};
    int rc = cli_parse(&spec, &opt, argc, argv, NULL);
    if (rc >= 0) return rc;
    const cli_model_opts mo = opt.mo;
    const int json = opt.json, limits = opt.limits, profile = opt.profile;
    if (!mo.model && !getenv("WGML_MODEL")) return cli_usage_error("give a vision model (CLIP, SigLIP, ViT) with -m");
    wgml_model *m = cli_load_model(&mo, NULL);
    if (!m) return CLI_FAIL;
    wgml_model_info info;
    wgml_model_get_info(m, &info);
    const int N = opt.n_images, B = opt.batch, R = opt.repeat, N1 = N < 16 ? N : 16, W = opt.width, H = opt.height;
    rc = CLI_OK;
    wgml_embed_params ep = wgml_embed_default_params();
    const int dim = (info.tasks & WGML_TASK_EMBED_IMAGE) ? wgml_embed_dim(m, &ep) : -1;
    uint8_t **pix = calloc((size_t)N, sizeof *pix);
    wgml_image *images = calloc((size_t)N, sizeof *images);
    float *out = dim > 0 ? malloc((size_t)N * (size_t)dim * sizeof *out) : NULL;
    wgml_error err;
    if (dim <= 0) {
        rc = cli_fail("a %s model (%s) does not embed images (wgml bench --images takes a CLIP, SigLIP or ViT tower)",
                      info.family, info.architecture);
        goto done;
    }
    if (!pix || !images || !out) {
        rc = cli_fail("out of memory");
        goto done;
    }
    for (int i = 0; i < N && !rc; i++) {
        if (!(pix[i] = make_image(i, W, H))) rc = cli_fail("out of memory for %d images of %d x %d", N, W, H);
        images[i] = (wgml_image){.w = W, .h = H, .stride = (size_t)W * 3, .data = pix[i]};
    }
    if (rc) goto done;
    ep.n_batch = B;
    /* warm-up: pipelines, scratch, the state for B images, page faults */
    if (wgml_embed_images(m, images, N < B ? N : B, &ep, out, dim, &err) ||
        wgml_embed_images(m, images, 1, &ep, out, dim, &err)) {
        rc = cli_fail_err(&err);
        goto done;
    }
    double b_ips[64] = {0}, one_ips[64] = {0}, one_ms[64] = {0}, mm[64] = {0}, pct[64] = {0}, pct1[64] = {0};
    const double gflop_per_image = 2.0 * (double)info.matmul_params * (double)info.n_ctx_train / 1e9;
    cli_progress bar;
    cli_progress_begin(&bar, "bench");
    wgml_kernel_stat kt[64];
    int n_kt = 0;
    for (int r = 0; r < R && !rc; r++) {
        if (profile && r == R - 1) wgml_model_set_profiling(m, 1);
        double t0 = cli_now_ms();
        for (int i = 0; i < N && !rc; i += B) {
            int k = N - i < B ? N - i : B;
            if (wgml_embed_images(m, images + i, k, &ep, out + (size_t)i * dim, dim, &err)) rc = cli_fail_err(&err);
        }
        double ms = cli_now_ms() - t0;
        b_ips[r] = N / (ms / 1e3);
        double lat[16];
        t0 = cli_now_ms();
        for (int i = 0; i < N1 && !rc; i++) {
            double t1 = cli_now_ms();
            if (wgml_embed_images(m, images + i, 1, &ep, out, dim, &err)) rc = cli_fail_err(&err);
            lat[i] = cli_now_ms() - t1;
        }
        ms = cli_now_ms() - t0;
        one_ips[r] = N1 / (ms / 1e3);
        if (profile && r == R - 1) { /* the model's work only, not the device measurement */
            n_kt = wgml_model_get_kernel_times(m, kt, 64);
            wgml_model_set_profiling(m, 0);
        }
        one_ms[r] = rc ? 0 : cli_median(lat, N1);
        if (!rc && limits) {
            double gbs;
            if (wgml_model_measure_device(m, &gbs, &mm[r], &err))
                rc = cli_fail_err(&err);
            else if (mm[r] > 0) {
                pct[r] = b_ips[r] * gflop_per_image / mm[r] * 100;
                pct1[r] = one_ips[r] * gflop_per_image / mm[r] * 100;
            }
        }
        cli_progress_update(&bar, (uint64_t)r + 1, (uint64_t)R);
    }
    cli_progress_end(&bar);
    if (rc) goto done;
    const char *path = mo.model ? mo.model : getenv("WGML_MODEL");
    if (json) {
        json_object *o = json_object_new_object();
        json_object_object_add(o, "model", json_object_new_string(path));
        json_object_object_add(o, "architecture", json_object_new_string(info.architecture));
        json_object_object_add(o, "backend", json_object_new_string(info.backend));
        json_object_object_add(o, "adapter", json_object_new_string(info.adapter));
        json_object_object_add(o, "threads", json_object_new_int(info.n_threads));
        json_object_object_add(o, "n_params", json_object_new_int64((int64_t)info.n_params));
        json_object_object_add(o, "matmul_params", json_object_new_int64((int64_t)info.matmul_params));
        json_object_object_add(o, "rows_per_image", json_object_new_int(info.n_ctx_train));
        json_object_object_add(o, "dim", json_object_new_int(dim));
        json_object_object_add(o, "images", json_object_new_int(N));
        json_object_object_add(o, "image_width", json_object_new_int(W));
        json_object_object_add(o, "image_height", json_object_new_int(H));
        json_object_object_add(o, "repeat", json_object_new_int(R));
        json_object_object_add(o, "batch", json_object_new_int(B));
        json_object_object_add(o, "batch_images_per_s", json_object_new_double(cli_median(b_ips, R)));
        json_object_object_add(o, "batch_images_per_s_spread", spread_json(b_ips, R));
        json_object_object_add(o, "batch_matmul_pct", json_object_new_double(cli_median(pct, R)));
        json_object_object_add(o, "single_images", json_object_new_int(N1));
        json_object_object_add(o, "single_images_per_s", json_object_new_double(cli_median(one_ips, R)));
        json_object_object_add(o, "single_images_per_s_spread", spread_json(one_ips, R));
        json_object_object_add(o, "single_latency_ms_p50", json_object_new_double(cli_median(one_ms, R)));
        json_object_object_add(o, "single_matmul_pct", json_object_new_double(cli_median(pct1, R)));
        json_object_object_add(o, "matmul_gflops", json_object_new_double(cli_median(mm, R)));
        json_object_object_add(o, "gemm_gflop_per_image", json_object_new_double(gflop_per_image));
        if (profile) json_object_object_add(o, "kernels", cli_kernels_json(kt, n_kt < 64 ? n_kt : 64));
        printf("%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE));
        json_object_put(o);
    } else {
        printf("model        %s (%s, %.2f M params)\n", path, info.architecture, info.n_params / 1e6);
        printf("backend      %s%s%s", info.backend, *info.adapter ? " / " : "", info.adapter);
        if (!strcmp(info.backend, "cpu")) printf(" (%d threads)", info.n_threads);
        printf("\nimages       %d of %d x %d (synthetic), %d rows each, %.2f GFLOP of GEMM each, %d runs (medians)\n",
               N, W, H, info.n_ctx_train, gflop_per_image, R);
        printf("batch %-6d %.2f images/s (%.2f..%.2f)", B, cli_median(b_ips, R), min_of(b_ips, R), max_of(b_ips, R));
        if (limits) printf(", %.0f%% of the matmul rate", cli_median(pct, R));
        printf("\nbatch 1      %.2f ms per image (p50), %.2f images/s (%.2f..%.2f)", cli_median(one_ms, R),
               cli_median(one_ips, R), min_of(one_ips, R), max_of(one_ips, R));
        if (limits) printf(", %.0f%% of the matmul rate", cli_median(pct1, R));
        if (limits) printf("\nmatmul       %.1f GFLOP/s (the backend's f32 matmul, 1024^3)", cli_median(mm, R));
        printf("\n");
        for (int i = 0; i < n_kt && i < 64; i++)
            printf("  %-40s %8llu calls %10.2f ms\n", kt[i].name, (unsigned long long)kt[i].calls, kt[i].total_ms);
    }
done:
    for (int i = 0; pix && i < N; i++)
        free(pix[i]);
    free(pix);
    free(images);
    free(out);
    wgml_model_free(m);
    return rc;
}
