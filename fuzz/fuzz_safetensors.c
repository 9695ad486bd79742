/*
 * fuzz_safetensors.c - libFuzzer target: the safetensors reader
 * (format/safetensors.h).
 *
 * Two kinds of input:
 *   - a safetensors file (anything not starting with '{'), opened with
 *     st_open_memory;
 *   - a shard index (starting with '{', as model.safetensors.index.json
 *     does), written into a temporary folder that holds three valid shards -
 *     SHARD_1 (x, y), SHARD_2 (z, w) and SHARD_O (x, v: x again) - and
 *     opened as a folder with st_open, so that mutations reach the weight
 *     map's checks (names, traversal, shards, both-ways agreement). The
 *     folder is in $TMPDIR, else /dev/shm when writable, else /tmp, and
 *     removed at exit.
 * When a file is accepted, every tensor is checked: found by name, its
 * bytes (all read) inside the data section, its size the product of its
 * shape times its element size, and the tensors together exactly the data
 * section; every metadata entry is found by its key. A set's tensors come
 * from its shards. Anything else (a crash, a sanitizer report, a failed
 * check, an error message without the file's name) is a finding.
 */
#include "format/safetensors.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CHECK(c)                                                                                                       \
    do {                                                                                                               \
        if (!(c)) {                                                                                                    \
            fprintf(stderr, "fuzz_safetensors: check failed: %s (line %d)\n", #c, __LINE__);                           \
            abort();                                                                                                   \
        }                                                                                                              \
    } while (0)

#define NAME "fuzz.safetensors"
/* the shards of index mode (fuzz/make_seeds.c writes index seeds that name them) */
#define SHARD_1 "model-00001-of-00002.safetensors"
#define SHARD_2 "model-00002-of-00002.safetensors"
#define SHARD_O "other.safetensors"

static volatile uint8_t sink;

/* Checks an accepted file; data/size are its bytes for a single file (NULL for a set). */
static void walk(const st_file *f, const uint8_t *data, size_t size) {
    int64_t n = st_n_tensors(f);
    CHECK(n >= 0 && n <= ST_MAX_TENSORS);
    const uint8_t *lo = NULL, *hi = NULL;
    if (data) {
        uint64_t hn;
        memcpy(&hn, data, 8);
        CHECK(size >= 8 && hn >= 1 && hn <= size - 8);
        lo = data + 8 + hn;
        hi = data + size;
    }
    uint64_t total = 0;
    for (int64_t i = 0; i < n; i++) {
        const st_tensor *t = st_tensor_at(f, i);
        CHECK(t && t->name && t->data && t->file);
        CHECK(st_find(f, t->name) == t);
        CHECK(t->shard >= 0 && t->shard < st_n_files(f));
        CHECK(st_tensor_file(f, t) == t->file && !strcmp(st_file_path(f, t->shard), t->file));
        CHECK((unsigned)t->dtype < ST_DTYPE_COUNT && t->elem_size == st_dtype_size(t->dtype));
        CHECK(!strcmp(t->dtype_name, st_dtype_name(t->dtype)));
        CHECK(t->rank >= 0 && t->rank <= ST_MAX_DIMS);
        uint64_t count = 1;
        for (int d = 0; d < t->rank; d++) {
            CHECK(t->shape[d] >= 0);
            count *= (uint64_t)t->shape[d]; /* cannot wrap: checked at open, or a 0 ends it */
            if (!count) break;
        }
        CHECK((int64_t)count == t->n_elements);
        CHECK(count * t->elem_size == t->size);
        if (data) {
            CHECK((const uint8_t *)t->data >= lo && t->size <= (size_t)(hi - (const uint8_t *)t->data));
            CHECK((const uint8_t *)t->data == lo + t->offset);
        }
        uint8_t x = 0;
        for (size_t k = 0; k < t->size; k++)
            x ^= ((const uint8_t *)t->data)[k];
        sink ^= x;
        total += t->size;
    }
    if (data) CHECK(total == (uint64_t)(hi - lo)); /* the tensors tile the data section */
    CHECK(st_tensor_at(f, n) == NULL && st_tensor_at(f, -1) == NULL);
    for (int s = 0; s < st_n_files(f); s++) {
        int64_t m = st_n_metadata(f, s);
        for (int64_t i = 0; i < m; i++) {
            const char *v;
            size_t len;
            const char *k = st_metadata_at(f, s, i, &v, &len);
            CHECK(k && v && v[len] == '\0');
            size_t len2;
            const char *w = st_metadata(f, k, &len2);
            CHECK(w && (s > 0 || (w == v && len2 == len))); /* a set answers from its first shard with the key */
        }
    }
    CHECK(st_metadata(f, "\x01no such key", NULL) == NULL);
}

/* ---- index mode ---- */

static char g_dir[256];
static char g_index[300];

static void put(const char *name, const char *header, size_t data_len) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    FILE *fp = fopen(path, "wb");
    CHECK(fp);
    uint64_t hn = strlen(header);
    CHECK(fwrite(&hn, 8, 1, fp) == 1 && fwrite(header, 1, hn, fp) == hn);
    for (size_t i = 0; i < data_len; i++)
        fputc((int)(i * 31 + 7) & 0xff, fp);
    CHECK(fclose(fp) == 0);
}

static void cleanup(void) {
    static const char *const names[] = {SHARD_1, SHARD_2, SHARD_O, "model.safetensors.index.json"};
    char path[512];
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        snprintf(path, sizeof path, "%s/%s", g_dir, names[i]);
        unlink(path);
    }
    rmdir(g_dir);
}

static void setup(void) {
    /* every input is written there: memory (/dev/shm) runs ten times faster than a disk */
    const char *t = getenv("TMPDIR");
    if (!t || !*t) t = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(g_dir, sizeof g_dir, "%s/fuzz-safetensors-XXXXXX", t);
    CHECK(mkdtemp(g_dir));
    snprintf(g_index, sizeof g_index, "%s/model.safetensors.index.json", g_dir);
    put(SHARD_1,
        "{\"__metadata__\":{\"format\":\"pt\"},\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
        "\"y\":{\"dtype\":\"F16\",\"shape\":[3],\"data_offsets\":[8,14]}}  ",
        14);
    put(SHARD_2,
        "{\"z\":{\"dtype\":\"BF16\",\"shape\":[2,2],\"data_offsets\":[0,8]},"
        "\"w\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[8,16]}}",
        16);
    put(SHARD_O,
        "{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
        "\"v\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[8,8]}}",
        8);
    atexit(cleanup);
}

static void index_mode(const uint8_t *data, size_t size) {
    if (!g_dir[0]) setup();
    FILE *fp = fopen(g_index, "wb");
    CHECK(fp);
    CHECK(fwrite(data, 1, size, fp) == size && fclose(fp) == 0);
    st_file *f = NULL;
    wgml_error err;
    wgml_status st = st_open(g_dir, &f, &err);
    if (st) {
        CHECK(f == NULL && err.code == st && err.message[0]);
        CHECK(strstr(err.message, g_index) != NULL);
        return;
    }
    CHECK(!strcmp(st_name(f), g_index));
    CHECK(st_n_tensors(f) >= 1 && st_n_tensors(f) <= 4 && st_n_files(f) >= 1 && st_n_files(f) <= 2);
    walk(f, NULL, 0);
    st_close(f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 0 && data[0] == '{') {
        index_mode(data, size);
        return 0;
    }
    st_file *f = NULL;
    wgml_error err;
    wgml_status st = st_open_memory(data, size, NAME, &f, &err);
    if (st) {
        CHECK(f == NULL && err.code == st && err.message[0]);
        CHECK(st == WGML_ERR_FORMAT || st == WGML_ERR_UNSUPPORTED);
        CHECK(strstr(err.message, NAME) != NULL);
        return 0;
    }
    CHECK(st_n_files(f) == 1 && !strcmp(st_name(f), NAME));
    walk(f, data, size);
    st_close(f);
    return 0;
}
