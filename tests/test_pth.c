/*
 * test_pth.c - the PyTorch checkpoint reader (format/pth.h) and the ZIP layer
 * under it (format/zip.h).
 *
 * The real kokoro-tiny.pth: its 548 tensors, names, shapes and order exactly
 * as ../shared/kokoro/keys-kokoro-tiny.tsv lists them; every storage's CRC;
 * values against things known independently (the ALBERT pad row and
 * LayerNorm init, and the reference run's text-encoder embedding output,
 * which is rows of a weight gathered by the reference input ids).
 *
 * Then checkpoints built here byte by byte - a ZIP writer and a pickle writer
 * of our own that emit what torch.save does (data descriptors, 64-byte
 * aligned data, ZIP64 end records, the same opcodes), independent of the code
 * under test - to read back a `.pt` voice tensor exactly, strided views of
 * shared storages and every storage type; and to be refused, by name and
 * offset: forbidden globals and opcodes, storages too small, huge shapes,
 * compressed and duplicate entries, a missing pickle, truncations and flipped
 * bytes of the real file, and allocation failures at every step.
 */
#include "check_err.h"
#include "core/alloc.h"
#include "core/dtype.h"
#include "core/fp16.h"
#include "format/pth.h"
#include "format/zip.h"
#include "gguf_bytes.h"
#include "npy.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- an independent CRC-32 ---- */

static uint32_t crc32_ref(const uint8_t *p, size_t n) {
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1)));
    }
    return ~c;
}

static void put16(gb *b, uint16_t v) { gb_put(b, &v, 2); }

/* ---- a ZIP writer (stored entries, as torch.save writes them) ---- */

typedef struct zw {
    gb out, cd;
    int n;
    int zip64;  /* ZIP64 extra fields in the directory and ZIP64 end records */
    int method; /* method written for the next entries (0: stored) */
} zw;

static void zw_add(zw *z, const char *name, const void *data, size_t n) {
    size_t nlen = strlen(name);
    uint32_t crc = crc32_ref(data, n), lho = (uint32_t)z->out.n;
    /* local header: sizes in a data descriptor (flag 8), data aligned to 64 by an "FB" extra field */
    size_t pad = (64 - (z->out.n + 30 + nlen + 4) % 64) % 64;
    gb_u32(&z->out, 0x04034b50u);
    put16(&z->out, 20);
    put16(&z->out, 0x0808);
    put16(&z->out, (uint16_t)z->method);
    put16(&z->out, 0);
    put16(&z->out, 0);
    gb_u32(&z->out, 0);
    gb_u32(&z->out, 0);
    gb_u32(&z->out, 0);
    put16(&z->out, (uint16_t)nlen);
    put16(&z->out, (uint16_t)(pad + 4));
    gb_put(&z->out, name, nlen);
    put16(&z->out, 0x4246); /* "FB" */
    put16(&z->out, (uint16_t)pad);
    for (size_t i = 0; i < pad; i++) gb_u8(&z->out, 'Z');
    gb_put(&z->out, data, n);
    gb_u32(&z->out, 0x08074b50u);
    gb_u32(&z->out, crc);
    gb_u32(&z->out, (uint32_t)n);
    gb_u32(&z->out, (uint32_t)n);
    /* central directory entry */
    gb_u32(&z->cd, 0x02014b50u);
    put16(&z->cd, 0x031e);
    put16(&z->cd, 45);
    put16(&z->cd, 0x0808);
    put16(&z->cd, (uint16_t)z->method);
    put16(&z->cd, 0);
    put16(&z->cd, 0);
    gb_u32(&z->cd, crc);
    gb_u32(&z->cd, z->zip64 ? 0xffffffffu : (uint32_t)n);
    gb_u32(&z->cd, z->zip64 ? 0xffffffffu : (uint32_t)n);
    put16(&z->cd, (uint16_t)nlen);
    put16(&z->cd, z->zip64 ? 28 : 0);
    put16(&z->cd, 0);
    put16(&z->cd, 0);
    put16(&z->cd, 0);
    gb_u32(&z->cd, 0);
    gb_u32(&z->cd, z->zip64 ? 0xffffffffu : lho);
    gb_put(&z->cd, name, nlen);
    if (z->zip64) {
        put16(&z->cd, 1);
        put16(&z->cd, 24);
        gb_u64(&z->cd, n);
        gb_u64(&z->cd, n);
        gb_u64(&z->cd, lho);
    }
    z->n++;
}

/* Appends the directory and end records; the archive is z->out (free with gb_free). */
static void zw_finish(zw *z) {
    uint64_t cd_at = z->out.n;
    gb_put(&z->out, z->cd.p, z->cd.n);
    if (z->zip64) {
        uint64_t rec = z->out.n;
        gb_u32(&z->out, 0x06064b50u);
        gb_u64(&z->out, 44);
        put16(&z->out, 0x031e);
        put16(&z->out, 45);
        gb_u32(&z->out, 0);
        gb_u32(&z->out, 0);
        gb_u64(&z->out, (uint64_t)z->n);
        gb_u64(&z->out, (uint64_t)z->n);
        gb_u64(&z->out, z->cd.n);
        gb_u64(&z->out, cd_at);
        gb_u32(&z->out, 0x07064b50u);
        gb_u32(&z->out, 0);
        gb_u64(&z->out, rec);
        gb_u32(&z->out, 1);
    }
    gb_u32(&z->out, 0x06054b50u);
    put16(&z->out, 0);
    put16(&z->out, 0);
    put16(&z->out, z->zip64 ? 0xffff : (uint16_t)z->n);
    put16(&z->out, z->zip64 ? 0xffff : (uint16_t)z->n);
    gb_u32(&z->out, z->zip64 ? 0xffffffffu : (uint32_t)z->cd.n);
    gb_u32(&z->out, z->zip64 ? 0xffffffffu : (uint32_t)cd_at);
    put16(&z->out, 0);
    gb_free(&z->cd);
}

/* ---- a pickle writer (protocol 2, the opcodes torch.save uses) ---- */

static void pk_op(gb *b, uint8_t op) { gb_u8(b, op); }
static void pk_str(gb *b, const char *s) {
    gb_u8(b, 'X');
    gb_u32(b, (uint32_t)strlen(s));
    gb_put(b, s, strlen(s));
}
static void pk_int(gb *b, int64_t v) {
    if (v >= 0 && v < 256) {
        gb_u8(b, 'K');
        gb_u8(b, (uint8_t)v);
    } else if (v >= 0 && v < 65536) {
        gb_u8(b, 'M');
        put16(b, (uint16_t)v);
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
        gb_u8(b, 'J');
        gb_u32(b, (uint32_t)(int32_t)v);
    } else {
        gb_u8(b, 0x8a); /* LONG1, 8 bytes two's complement */
        gb_u8(b, 8);
        gb_u64(b, (uint64_t)v);
    }
}
static void pk_global(gb *b, const char *module, const char *name) {
    gb_u8(b, 'c');
    gb_put(b, module, strlen(module));
    gb_u8(b, '\n');
    gb_put(b, name, strlen(name));
    gb_u8(b, '\n');
}
static void pk_ints(gb *b, int n, const int64_t *v) {
    pk_op(b, '(');
    for (int i = 0; i < n; i++) pk_int(b, v[i]);
    pk_op(b, 't');
}

typedef struct tspec {
    const char *type; /* "FloatStorage", ... */
    const char *key;
    int64_t numel, offset;
    int ndim;
    int64_t size[9], stride[9];
} tspec;

/* _rebuild_tensor_v2(persistent storage, offset, size, stride, False, OrderedDict()) */
static void pk_tensor(gb *b, const tspec *t) {
    pk_global(b, "torch._utils", "_rebuild_tensor_v2");
    pk_op(b, '(');
    pk_op(b, '(');
    pk_str(b, "storage");
    pk_global(b, "torch", t->type);
    pk_str(b, t->key);
    pk_str(b, "cpu");
    pk_int(b, t->numel);
    pk_op(b, 't');
    pk_op(b, 'Q');
    pk_int(b, t->offset);
    pk_ints(b, t->ndim, t->size);
    pk_ints(b, t->ndim, t->stride);
    pk_op(b, 0x89);
    pk_global(b, "collections", "OrderedDict");
    pk_op(b, ')');
    pk_op(b, 'R');
    pk_op(b, 't');
    pk_op(b, 'R');
}

/* A contiguous tspec. */
static tspec contig(const char *type, const char *key, int ndim, const int64_t *size) {
    tspec t;
    memset(&t, 0, sizeof t);
    t.type = type;
    t.key = key;
    t.ndim = ndim;
    int64_t s = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        t.size[d] = size[d];
        t.stride[d] = s;
        s *= size[d];
    }
    t.numel = s;
    return t;
}

/* Archive "<arch>/data.pkl" + storages + version, torch style. */
typedef struct storage {
    const char *key;
    const void *data;
    size_t n;
} storage;

static gb make_pth(const char *arch, const gb *pkl, const storage *st, int n_st, int zip64) {
    zw z;
    memset(&z, 0, sizeof z);
    z.zip64 = zip64;
    char name[256];
    snprintf(name, sizeof name, "%s/data.pkl", arch);
    zw_add(&z, name, pkl->p, pkl->n);
    for (int i = 0; i < n_st; i++) {
        snprintf(name, sizeof name, "%s/data/%s", arch, st[i].key);
        zw_add(&z, name, st[i].data, st[i].n);
    }
    snprintf(name, sizeof name, "%s/version", arch);
    zw_add(&z, name, "3\n", 2);
    zw_finish(&z);
    return z.out;
}

/* Opens bytes, expecting success. */
static pth_file *open_ok(const gb *b, const char *name) {
    pth_file *p = NULL;
    wgml_error err;
    wgml_status st = pth_open_memory(b->p, b->n, name, &p, &err);
    if (st) fail_msg("%s: %s", name, err.message);
    return p;
}

/* Opens bytes, expecting the error `want` with the name and up to two more substrings in the message. */
static void open_fails(const gb *b, const char *name, wgml_status want, const char *s1, const char *s2) {
    pth_file *p = NULL;
    wgml_error err;
    wgml_status st = pth_open_memory(b->p, b->n, name, &p, &err);
    assert_null(p);
    CHECK_ERR(name, st, &err, want, name, s1, s2);
}

/* ---- the real file ---- */

static void test_kokoro_tiny(void **state) {
    (void)state;
    const char *path = tu_shared("kokoro/kokoro-tiny.pth");
    pth_file *p = NULL;
    wgml_error err;
    wgml_status st = pth_open(path, &p, &err);
    if (st) fail_msg("%s", err.message);
    assert_int_equal(pth_n_tensors(p), 548);
    assert_string_equal(pth_archive(p), "kokoro-tiny");
    assert_int_equal(pth_verify(p, &err), WGML_OK); /* every storage's bytes are where the writer's CRCs say */

    /* names, shapes and types in order, as the key list gives them: "component\tkey\t[a, b]\tfloat32" */
    size_t tsv_n;
    char *tsv = (char *)tu_read_file(tu_shared("kokoro/keys-kokoro-tiny.tsv"), &tsv_n);
    assert_non_null(tsv);
    tsv = realloc(tsv, tsv_n + 1);
    tsv[tsv_n] = 0;
    int64_t i = 0;
    for (char *line = strtok(tsv, "\n"); line; line = strtok(NULL, "\n"), i++) {
        char comp[64], key[256], shape[64], dtype[16];
        assert_int_equal(sscanf(line, "%63[^\t]\t%255[^\t]\t%63[^\t]\t%15s", comp, key, shape, dtype), 4);
        const pth_tensor *t = pth_tensor_at(p, i);
        assert_non_null(t);
        char name[320], got[128];
        snprintf(name, sizeof name, "%s/%s", comp, key);
        assert_string_equal(t->name, name);
        assert_ptr_equal(pth_find(p, name), t);
        int k = snprintf(got, sizeof got, "[");
        for (int d = 0; d < t->ndim; d++) k += snprintf(got + k, sizeof got - (size_t)k, "%s%lld", d ? ", " : "", (long long)t->size[d]);
        snprintf(got + k, sizeof got - (size_t)k, "]");
        assert_string_equal(got, shape);
        assert_string_equal(dtype, "float32");
        assert_int_equal(t->dtype, WGML_F32);
        assert_true(t->contiguous); /* "one storage per tensor" (reference/manifest.json) */
    }
    free(tsv);
    assert_int_equal(i, 548);
    assert_null(pth_find(p, "bert/nope"));
    assert_null(pth_find(p, "bert"));

    /* ALBERT as transformers inits it: pad row 0 of the word embeddings zero, LayerNorm 1 and 0 */
    const pth_tensor *we = pth_find(p, "bert/module.embeddings.word_embeddings.weight");
    assert_non_null(we);
    assert_int_equal(we->numel, 178 * 128);
    float *w = malloc((size_t)we->numel * sizeof *w);
    assert_int_equal(pth_tensor_read_f32(p, we, w, (size_t)we->numel, &err), WGML_OK);
    double row1 = 0;
    for (int c = 0; c < 128; c++) {
        assert_true(w[c] == 0.0f);
        row1 += fabs(w[128 + c]);
    }
    assert_true(row1 > 0.1 && row1 < 128 * 0.2); /* normal(0, 0.02) */
    free(w);
    const pth_tensor *lnw = pth_find(p, "bert/module.embeddings.LayerNorm.weight"), *lnb = pth_find(p, "bert/module.embeddings.LayerNorm.bias");
    assert_non_null(lnw);
    assert_non_null(lnb);
    float ln[2][128];
    assert_int_equal(pth_tensor_read_f32(p, lnw, ln[0], 128, &err), WGML_OK);
    assert_int_equal(pth_tensor_read_f32(p, lnb, ln[1], 128, &err), WGML_OK);
    for (int c = 0; c < 128; c++) assert_true(ln[0][c] == 1.0f && ln[1][c] == 0.0f);
    CHECK_ERR("wrong n", pth_tensor_read_f32(p, lnw, ln[0], 127, &err), &err, WGML_ERR_INVALID_ARGUMENT, "LayerNorm.weight", "128");

    /* the reference run's text-encoder embedding output is rows of the weight, by the input ids */
    npy_array ids, te;
    assert_int_equal(npy_read(tu_shared("kokoro/reference/kokoro-tiny/hello_af_heart_s1.0/input_ids.npy"), &ids), 0);
    assert_int_equal(npy_read(tu_shared("kokoro/reference/kokoro-tiny/hello_af_heart_s1.0/te_embedding.npy"), &te), 0);
    const pth_tensor *emb = pth_find(p, "text_encoder/module.embedding.weight");
    assert_non_null(emb);
    assert_int_equal(emb->ndim, 2);
    const int64_t hidden = emb->size[1];
    assert_int_equal(te.ndim, 3);
    assert_int_equal(te.shape[1], ids.n);
    assert_int_equal(te.shape[2], hidden);
    float *e = malloc((size_t)emb->numel * sizeof *e);
    assert_int_equal(pth_tensor_read_f32(p, emb, e, (size_t)emb->numel, &err), WGML_OK);
    for (int64_t t = 0; t < ids.n; t++) {
        int64_t id = (int64_t)ids.v[t];
        assert_true(id >= 0 && id < emb->size[0]);
        for (int64_t c = 0; c < hidden; c++)
            if ((double)e[id * hidden + c] != te.v[t * hidden + c])
                fail_msg("te_embedding[%lld][%lld] = %g, the weight's row %lld has %g", (long long)t, (long long)c,
                         te.v[t * hidden + c], (long long)id, (double)e[id * hidden + c]);
    }
    free(e);
    npy_free(&ids);
    npy_free(&te);

    /* a voice pack is not a checkpoint; a checkpoint is */
    size_t vn;
    unsigned char *voice = tu_read_file(tu_shared("kokoro/voices/af_heart.bin"), &vn);
    assert_non_null(voice);
    assert_false(pth_is_pth(voice, vn));
    pth_file *q = NULL;
    CHECK_ERR("voice .bin", pth_open_memory(voice, vn, "af_heart.bin", &q, &err), &err, WGML_ERR_FORMAT, "af_heart.bin",
              "not a torch.save ZIP archive");
    assert_null(q);
    free(voice);
    pth_close(p);
}

/* Truncations, flipped pickle bytes (with and without a matching CRC), and a
 * compressed entry, all in the real file's bytes. */
static void test_kokoro_tiny_damaged(void **state) {
    (void)state;
    const char *path = tu_shared("kokoro/kokoro-tiny.pth");
    size_t n;
    uint8_t *b = tu_read_file(path, &n);
    assert_non_null(b);
    pth_file *p = NULL;
    wgml_error err;
    /* truncations: dense near the end (the directory and end records), sparse elsewhere */
    for (size_t cut = 0; cut < n; cut += cut + 4096 < n - 40000 ? 65537 : 97) {
        wgml_status st = pth_open_memory(b, cut, "cut.pth", &p, &err);
        if (st == WGML_OK) fail_msg("truncated at %zu: accepted", cut);
        assert_null(p);
        assert_non_null(strstr(err.message, "cut.pth"));
    }
    /* locate the pickle through the library, then check the position independently */
    assert_int_equal(pth_open_memory(b, n, "ok.pth", &p, &err), WGML_OK);
    pth_close(p);
    zip_archive *z = NULL;
    assert_int_equal(zip_open_memory(b, n, "ok.pth", &z, &err), WGML_OK);
    const zip_entry *pe = zip_find(z, "kokoro-tiny/data.pkl");
    assert_non_null(pe);
    const size_t pk_at = (size_t)pe->offset, pk_n = (size_t)pe->size;
    assert_int_equal(pk_at % 64, 0);
    assert_int_equal(b[pk_at], 0x80);
    assert_int_equal(b[pk_at + pk_n - 1], '.');
    const zip_entry *s5 = zip_find(z, "kokoro-tiny/data/5");
    assert_non_null(s5);
    const size_t s5_header = (size_t)s5->header_offset;
    zip_close(z);
    /* the CRC field of data.pkl's directory entry: find the entry by its name */
    size_t cd_crc = 0;
    for (size_t i = n - 22; i-- > 0;)
        if (memcmp(b + i, "PK\x01\x02", 4) == 0 && memcmp(b + i + 46, "kokoro-tiny/data.pkl", 20) == 0) {
            cd_crc = i + 16;
            break;
        }
    assert_true(cd_crc > 0);
    /* a flipped byte: the CRC catches it */
    b[pk_at + 1000] ^= 0x40;
    open_fails(&(gb){b, n, n}, "flip.pth", WGML_ERR_FORMAT, "data.pkl", "CRC-32");
    b[pk_at + 1000] ^= 0x40;
    /* flipped bytes with the CRC made to match: the pickle machine must cope with any of them */
    uint32_t crc0;
    memcpy(&crc0, b + cd_crc, 4);
    int accepted = 0, refused = 0;
    tu_rng rng = {12345};
    for (int k = 0; k < 700; k++) {
        size_t at = k < 400 ? (size_t)k : (size_t)(tu_next(&rng) % pk_n);
        uint8_t x = (uint8_t)(1u << (tu_next(&rng) % 8));
        if (k % 3 == 0) x = (uint8_t)(tu_next(&rng) | 1);
        b[pk_at + at] ^= x;
        uint32_t crc = crc32_ref(b + pk_at, pk_n);
        memcpy(b + cd_crc, &crc, 4);
        wgml_status st = pth_open_memory(b, n, "flip.pth", &p, &err);
        if (st == WGML_OK) {
            accepted++;
            for (int64_t i = 0; i < pth_n_tensors(p); i++) assert_non_null(pth_tensor_at(p, i)->name);
            pth_close(p);
        } else {
            refused++;
            assert_null(p);
            assert_non_null(strstr(err.message, "flip.pth"));
        }
        b[pk_at + at] ^= x;
    }
    memcpy(b + cd_crc, &crc0, 4);
    assert_true(refused > 200); /* most flips break the structure */
    (void)accepted;
    /* storage 5 marked deflated, in the directory and its local header */
    for (size_t i = n - 22; i-- > 0;)
        if (memcmp(b + i, "PK\x01\x02", 4) == 0 && b[i + 28] == 18 && memcmp(b + i + 46, "kokoro-tiny/data/5", 18) == 0) {
            b[i + 10] = 8;
            break;
        }
    b[s5_header + 8] = 8;
    open_fails(&(gb){b, n, n}, "deflate.pth", WGML_ERR_UNSUPPORTED, "'kokoro-tiny/data/5'", "compressed (method 8, deflate)");
    free(b);
}

/* ---- built checkpoints ---- */

/* The official voices/<name>.pt layout: one [510, 1, 256] float32 tensor as the pickle's root. */
static void test_voice_pt(void **state) {
    (void)state;
    enum { N = 510 * 256 };
    float *v = malloc(N * sizeof *v);
    for (int i = 0; i < N; i++) v[i] = (float)((i % 1000) - 500) / 1024.0f;
    gb pk = {0};
    pk_op(&pk, 0x80);
    gb_u8(&pk, 2);
    tspec t = contig("FloatStorage", "0", 3, (const int64_t[]){510, 1, 256});
    pk_tensor(&pk, &t);
    pk_op(&pk, '.');
    for (int zip64 = 0; zip64 < 2; zip64++) {
        gb f = make_pth("af_heart", &pk, &(storage){"0", v, N * sizeof *v}, 1, zip64);
        assert_true(pth_is_pth(f.p, f.n));
        pth_file *p = open_ok(&f, "af_heart.pt");
        assert_int_equal(pth_n_tensors(p), 1);
        const pth_tensor *tt = pth_tensor_at(p, 0);
        assert_string_equal(tt->name, "");
        assert_ptr_equal(pth_find(p, ""), tt);
        assert_string_equal(pth_archive(p), "af_heart");
        assert_int_equal(tt->ndim, 3);
        assert_int_equal(tt->size[0], 510);
        assert_int_equal(tt->size[1], 1);
        assert_int_equal(tt->size[2], 256);
        assert_int_equal(tt->numel, N);
        assert_true(tt->contiguous);
        assert_int_equal(((uintptr_t)tt->storage - (uintptr_t)f.p) % 64, 0);
        float *r = malloc(N * sizeof *r);
        wgml_error err;
        assert_int_equal(pth_tensor_read_f32(p, tt, r, N, &err), WGML_OK);
        assert_memory_equal(r, v, N * sizeof *v);
        assert_int_equal(pth_verify(p, &err), WGML_OK);
        free(r);
        pth_close(p);
        gb_free(&f);
    }
    gb_free(&pk);
    free(v);
}

/* A state dict as torch.save writes one: OrderedDict() with SETITEMS and BUILD of {'_metadata': ...}. */
static void begin_state_dict(gb *pk) {
    pk_op(pk, 0x80);
    gb_u8(pk, 2);
    pk_global(pk, "collections", "OrderedDict");
    pk_op(pk, 'q');
    gb_u8(pk, 0);
    pk_op(pk, ')');
    pk_op(pk, 'R');
    pk_op(pk, '(');
}
static void end_state_dict(gb *pk) {
    pk_op(pk, 'u');
    pk_op(pk, '}'); /* state: {'_metadata': OrderedDict({'': {'version': 1}})} */
    pk_str(pk, "_metadata");
    pk_op(pk, 'h');
    gb_u8(pk, 0);
    pk_op(pk, ')');
    pk_op(pk, 'R');
    pk_str(pk, "");
    pk_op(pk, '}');
    pk_str(pk, "version");
    pk_int(pk, 1);
    pk_op(pk, 's');
    pk_op(pk, 's');
    pk_op(pk, 's');
    pk_op(pk, 'b');
    pk_op(pk, '.');
}

/* Views of shared storages with offsets and strides, each storage type, a scalar, an empty tensor. */
static void test_views_and_types(void **state) {
    (void)state;
    float s0[24];
    for (int i = 0; i < 24; i++) s0[i] = (float)i * 0.5f - 3.0f;
    uint16_t h[6], bf[6];
    double d[6];
    int64_t l[6];
    int32_t i32[6];
    int16_t i16[6];
    int8_t i8[6];
    for (int i = 0; i < 6; i++) {
        h[i] = wgml_f32_to_f16((float)i - 2.5f);
        bf[i] = (uint16_t)(wgml_f32_to_bits((float)i * 0.75f) >> 16);
        d[i] = i * 0.125 - 0.3;
        l[i] = (int64_t)i * 1000000007 - 3;
        i32[i] = -i * 70000;
        i16[i] = (int16_t)(i * 300 - 700);
        i8[i] = (int8_t)(i * 40 - 100);
    }
    gb pk = {0};
    begin_state_dict(&pk);
    /* a: [4, 6] contiguous over storage 0; b: its transpose [6, 4]; c: a [2, 3] slice with offset 7 and
     * strides (12, 2); e: a stride-0 broadcast [3, 2] of row 1; s: a scalar at 23; z: an empty [0, 5] */
    tspec a = contig("FloatStorage", "0", 2, (const int64_t[]){4, 6});
    tspec bt = {"FloatStorage", "0", 24, 0, 2, {6, 4}, {1, 6}};
    tspec c = {"FloatStorage", "0", 24, 7, 2, {2, 3}, {12, 2}};
    tspec e = {"FloatStorage", "0", 24, 6, 2, {3, 2}, {0, 1}};
    tspec sc = {"FloatStorage", "0", 24, 23, 0, {0}, {0}};
    tspec zz = {"FloatStorage", "0", 24, 24, 2, {0, 5}, {5, 1}};
    struct {
        const char *name;
        const tspec *t;
    } list[] = {{"a", &a}, {"b", &bt}, {"c", &c}, {"e", &e}, {"s", &sc}, {"z", &zz}};
    for (size_t k = 0; k < sizeof list / sizeof list[0]; k++) {
        pk_str(&pk, list[k].name);
        pk_tensor(&pk, list[k].t);
    }
    static const char *types[] = {"HalfStorage", "BFloat16Storage", "DoubleStorage", "LongStorage", "IntStorage", "ShortStorage", "CharStorage"};
    static const char *keys[] = {"1", "2", "3", "4", "5", "6", "7"};
    for (int k = 0; k < 7; k++) {
        tspec t = {types[k], keys[k], 6, 0, 2, {3, 2}, {1, 3}}; /* transposed too */
        pk_str(&pk, types[k]);
        pk_tensor(&pk, &t);
    }
    end_state_dict(&pk);
    storage st[] = {{"0", s0, sizeof s0}, {"1", h, sizeof h}, {"2", bf, sizeof bf}, {"3", d, sizeof d},
                    {"4", l, sizeof l},  {"5", i32, sizeof i32}, {"6", i16, sizeof i16}, {"7", i8, sizeof i8}};
    gb f = make_pth("archive", &pk, st, 8, 0);
    pth_file *p = open_ok(&f, "views.pth");
    assert_int_equal(pth_n_tensors(p), 13);
    wgml_error err;
    float out[24];
    const pth_tensor *t = pth_find(p, "a");
    assert_true(t->contiguous);
    assert_int_equal(pth_tensor_read_f32(p, t, out, 24, &err), WGML_OK);
    assert_memory_equal(out, s0, sizeof s0);
    t = pth_find(p, "b");
    assert_false(t->contiguous);
    assert_string_equal(t->storage_key, "0");
    assert_ptr_equal(t->storage, pth_find(p, "a")->storage);
    assert_int_equal(pth_tensor_read_f32(p, t, out, 24, &err), WGML_OK);
    for (int i = 0; i < 6; i++)
        for (int j = 0; j < 4; j++) assert_true(out[i * 4 + j] == s0[j * 6 + i]);
    t = pth_find(p, "c");
    assert_int_equal(pth_tensor_read_f32(p, t, out, 6, &err), WGML_OK);
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++) assert_true(out[i * 3 + j] == s0[7 + i * 12 + j * 2]);
    t = pth_find(p, "e");
    assert_int_equal(pth_tensor_read_f32(p, t, out, 6, &err), WGML_OK);
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 2; j++) assert_true(out[i * 2 + j] == s0[6 + j]);
    t = pth_find(p, "s");
    assert_int_equal(t->ndim, 0);
    assert_int_equal(t->numel, 1);
    assert_int_equal(pth_tensor_read_f32(p, t, out, 1, &err), WGML_OK);
    assert_true(out[0] == s0[23]);
    t = pth_find(p, "z");
    assert_int_equal(t->numel, 0);
    assert_int_equal(pth_tensor_read_f32(p, t, NULL, 0, &err), WGML_OK);
    for (int k = 0; k < 7; k++) {
        t = pth_find(p, types[k]);
        assert_non_null(t);
        assert_int_equal(pth_tensor_read_f32(p, t, out, 6, &err), WGML_OK);
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 2; j++) {
                int src = i + 3 * j; /* size (3, 2), stride (1, 3) */
                float want = k == 0 ? wgml_f16_to_f32(h[src]) : k == 1 ? wgml_bits_to_f32((uint32_t)bf[src] << 16)
                           : k == 2 ? (float)d[src] : k == 3 ? (float)l[src] : k == 4 ? (float)i32[src]
                           : k == 5 ? (float)i16[src] : (float)i8[src];
                if (out[i * 2 + j] != want) fail_msg("%s [%d][%d]: %g, want %g", types[k], i, j, out[i * 2 + j], want);
            }
    }
    assert_int_equal(pth_find(p, "HalfStorage")->dtype, WGML_F16);
    assert_int_equal(pth_find(p, "BFloat16Storage")->dtype, WGML_BF16);
    assert_int_equal(pth_find(p, "DoubleStorage")->elem_size, 8);
    assert_int_equal(pth_verify(p, &err), WGML_OK);
    pth_close(p);
    gb_free(&f);

    /* allocation failures at every step: a clean OUT_OF_MEMORY and nothing leaked */
    long live = wgml_alloc_live();
    for (long k = 0;; k++) {
        p = NULL;
        f = make_pth("archive", &pk, st, 8, 0);
        wgml_alloc_fail_after(k);
        wgml_status s = pth_open_memory(f.p, f.n, "oom.pth", &p, &err);
        wgml_alloc_fail_after(-1);
        gb_free(&f);
        if (s == WGML_OK) {
            assert_int_equal(pth_n_tensors(p), 13);
            pth_close(p);
            assert_true(k > 5);
            break;
        }
        CHECK_ERR("oom", s, &err, WGML_ERR_OUT_OF_MEMORY, NULL);
        assert_int_equal(wgml_alloc_live(), live);
    }
    assert_int_equal(wgml_alloc_live(), live);
    gb_free(&pk);
}

/* Kokoro's layout: a dict of state dicts, named "component/key". */
static void test_nested(void **state) {
    (void)state;
    float x[4] = {1, 2, 3, 4};
    gb pk = {0};
    pk_op(&pk, 0x80);
    gb_u8(&pk, 2);
    pk_op(&pk, '}');
    pk_op(&pk, '(');
    const char *comps[] = {"bert", "decoder"};
    for (int c = 0; c < 2; c++) {
        pk_str(&pk, comps[c]);
        pk_global(&pk, "collections", "OrderedDict");
        pk_op(&pk, ')');
        pk_op(&pk, 'R');
        pk_op(&pk, '(');
        pk_str(&pk, "module.weight");
        tspec t = contig("FloatStorage", c ? "1" : "0", 2, (const int64_t[]){2, 2});
        pk_tensor(&pk, &t);
        pk_str(&pk, "module.step"); /* not a tensor: skipped */
        pk_int(&pk, 7);
        pk_op(&pk, 'u');
    }
    pk_str(&pk, "epoch");
    pk_int(&pk, 3);
    pk_op(&pk, 'u');
    pk_op(&pk, '.');
    gb f = make_pth("kokoro", &pk, (storage[]){{"0", x, 16}, {"1", x, 16}}, 2, 0);
    pth_file *p = open_ok(&f, "nested.pth");
    assert_int_equal(pth_n_tensors(p), 2);
    assert_string_equal(pth_tensor_at(p, 0)->name, "bert/module.weight");
    assert_string_equal(pth_tensor_at(p, 1)->name, "decoder/module.weight");
    assert_non_null(pth_find(p, "decoder/module.weight"));
    pth_close(p);
    gb_free(&f);
    gb_free(&pk);
}

/* One hostile pickle: a small valid prefix, then `tail` (raw pickle bytes), in a valid archive. */
static void hostile_pickle(const char *what, const void *tail, size_t tail_n, wgml_status want, const char *s1, const char *s2) {
    float x[4] = {0};
    gb pk = {0};
    pk_op(&pk, 0x80);
    gb_u8(&pk, 2);
    gb_put(&pk, tail, tail_n);
    gb f = make_pth("h", &pk, &(storage){"0", x, 16}, 1, 0);
    open_fails(&f, what, want, s1, s2);
    gb_free(&f);
    gb_free(&pk);
}

#define HOSTILE(what, bytes, want, s1, s2) hostile_pickle(what, bytes, sizeof bytes - 1, want, s1, s2)

static void test_hostile_pickles(void **state) {
    (void)state;
    HOSTILE("os_system.pth", "cos\nsystem\nX\x02\0\0\0lsR.", WGML_ERR_UNSUPPORTED, "GLOBAL 'os.system'", "offset 2");
    HOSTILE("builtins.pth", "cbuiltins\neval\n)R.", WGML_ERR_UNSUPPORTED, "builtins.eval", NULL);
    HOSTILE("inst.pth", "(ios\nsystem\n.", WGML_ERR_UNSUPPORTED, "INST (0x69)", "offset 3");
    HOSTILE("obj.pth", "(cos\nsystem\no.", WGML_ERR_UNSUPPORTED, "GLOBAL 'os.system'", NULL);
    HOSTILE("obj2.pth", "(}o.", WGML_ERR_UNSUPPORTED, "OBJ (0x6f)", "offset 4");
    HOSTILE("stack_global.pth", "X\x02\0\0\0osX\x06\0\0\0system\x93.", WGML_ERR_UNSUPPORTED, "STACK_GLOBAL", NULL);
    HOSTILE("reduce_str.pth", "X\x01\0\0\0a)R.", WGML_ERR_FORMAT, "REDUCE of a str", "offset 9");
    HOSTILE("reduce_dict.pth", "})R.", WGML_ERR_FORMAT, "REDUCE of a dict", NULL);
    HOSTILE("reduce_storage.pth", "ctorch\nFloatStorage\n)R.", WGML_ERR_FORMAT, "storage type", NULL);
    HOSTILE("od_args.pth", "ccollections\nOrderedDict\n(]tR.", WGML_ERR_FORMAT, "OrderedDict() with arguments", NULL);
    HOSTILE("build_dict.pth", "}}b.", WGML_ERR_FORMAT, "BUILD", NULL);
    HOSTILE("proto4.pth", "\x80\x04}.", WGML_ERR_FORMAT, "protocol 4", NULL);
    HOSTILE("frame.pth", "\x95\x10\0\0\0\0\0\0\0}.", WGML_ERR_UNSUPPORTED, "FRAME", NULL);
    HOSTILE("unknown_op.pth", "\xff.", WGML_ERR_FORMAT, "unknown pickle opcode 0xff", "offset 2");
    HOSTILE("no_stop.pth", "}", WGML_ERR_FORMAT, "without STOP", NULL);
    HOSTILE("empty_stop.pth", ".", WGML_ERR_FORMAT, "STOP", NULL);
    HOSTILE("two_left.pth", "}}.", WGML_ERR_FORMAT, "STOP", NULL);
    HOSTILE("mark_left.pth", "(}.", WGML_ERR_FORMAT, "STOP with a MARK", NULL);
    HOSTILE("setitem_empty.pth", "s.", WGML_ERR_FORMAT, "SETITEM needs 3 values", NULL);
    HOSTILE("setitem_list.pth", "]K\x01K\x02s.", WGML_ERR_FORMAT, "SETITEM on a list", NULL);
    HOSTILE("setitems_odd.pth", "}(K\x01u.", WGML_ERR_FORMAT, "odd number", NULL);
    HOSTILE("setitems_nomark.pth", "}u.", WGML_ERR_FORMAT, "without a MARK", NULL);
    HOSTILE("setitems_below.pth", "(K\x01K\x02u.", WGML_ERR_FORMAT, "no container below", NULL);
    HOSTILE("get_empty.pth", "h\x05.", WGML_ERR_FORMAT, "empty memo slot", NULL);
    HOSTILE("put_huge.pth", "}r\xff\xff\xff\x7f.", WGML_ERR_FORMAT, "memo index", NULL);
    HOSTILE("put_after_mark.pth", "}(q\x01.", WGML_ERR_FORMAT, "PUT with nothing", NULL);
    HOSTILE("string_huge.pth", "X\xff\xff\xff\x7f", WGML_ERR_FORMAT, "longer than 1 MiB", NULL);
    HOSTILE("string_past.pth", "X\x10\0\0\0abc", WGML_ERR_FORMAT, "ends inside", NULL);
    HOSTILE("long1_big.pth", "\x8a\x09\0\0\0\0\0\0\0\0\x01.", WGML_ERR_FORMAT, "LONG1", NULL);
    HOSTILE("root_int.pth", "K\x05.", WGML_ERR_FORMAT, "holds a int", NULL);
    HOSTILE("global_noline.pth", "ctorch", WGML_ERR_FORMAT, "GLOBAL", NULL);
    HOSTILE("persid_bad.pth", "X\x01\0\0\0aQ.", WGML_ERR_FORMAT, "persistent id", NULL);
    HOSTILE("persid_slash.pth", "(X\x07\0\0\0storagectorch\nFloatStorage\nX\x04\0\0\0../0X\x03\0\0\0cpuK\x04tQ.", WGML_ERR_FORMAT,
            "storage key", NULL);
    HOSTILE("rebuild_args.pth", "ctorch._utils\n_rebuild_tensor_v2\n(K\x01tR.", WGML_ERR_FORMAT, "1 arguments", NULL);
    /* empty SETITEMS and APPENDS (a fuzzer's find): {'a': []}, no tensors */
    {
        float x[4] = {0};
        static const char tail[] = "}(uX\x01\0\0\0a](es.";
        gb pk = {0};
        gb_put(&pk, "\x80\x02", 2);
        gb_put(&pk, tail, sizeof tail - 1);
        gb f = make_pth("e", &pk, &(storage){"0", x, 16}, 1, 0);
        pth_file *p = open_ok(&f, "empty_items.pth");
        assert_int_equal(pth_n_tensors(p), 0);
        pth_close(p);
        gb_free(&f);
        gb_free(&pk);
    }
    /* a dict holding itself, through the memo */
    HOSTILE("cycle.pth", "}q\x00X\x01\0\0\0ah\x00s.", WGML_ERR_FORMAT, "appears twice", NULL);
    /* dicts nested deeper than allowed */
    HOSTILE("deep.pth", "}X\x01\0\0\0a}X\x01\0\0\0b}X\x01\0\0\0c}X\x01\0\0\0d}X\x01\0\0\0e}ssss" "s.", WGML_ERR_FORMAT,
            "nested deeper", "a/b/c/d");
    /* the stack and the marks are bounded */
    {
        gb t = {0};
        for (int i = 0; i < PTH_MAX_STACK + 10; i++) gb_u8(&t, ')');
        hostile_pickle("stack.pth", t.p, t.n, WGML_ERR_FORMAT, "stack grows past", NULL);
        t.n = 0;
        for (int i = 0; i < PTH_MAX_MARKS + 10; i++) gb_u8(&t, '(');
        hostile_pickle("marks.pth", t.p, t.n, WGML_ERR_FORMAT, "too many open MARKs", NULL);
        gb_free(&t);
    }
}

/* A one-tensor state dict {"w": t} over a storage of n_bytes. */
static void one_tensor(const char *what, const tspec *t, size_t n_bytes, wgml_status want, const char *s1, const char *s2) {
    uint8_t *data = calloc(n_bytes ? n_bytes : 1, 1);
    gb pk = {0};
    begin_state_dict(&pk);
    pk_str(&pk, "w");
    pk_tensor(&pk, t);
    end_state_dict(&pk);
    gb f = make_pth("t", &pk, &(storage){"0", data, n_bytes}, 1, 0);
    if (want == WGML_OK) {
        pth_close(open_ok(&f, what));
    } else {
        open_fails(&f, what, want, s1, s2);
    }
    gb_free(&f);
    gb_free(&pk);
    free(data);
}

static void test_hostile_tensors(void **state) {
    (void)state;
    tspec t = contig("FloatStorage", "0", 2, (const int64_t[]){3, 4});
    one_tensor("fits.pth", &t, 48, WGML_OK, NULL, NULL);
    one_tensor("entry_small.pth", &t, 44, WGML_ERR_FORMAT, "'w'", "44 bytes");
    t.numel = 11;
    one_tensor("numel_small.pth", &t, 44, WGML_ERR_FORMAT, "'w'", "run past storage '0' of 11");
    t = contig("FloatStorage", "0", 2, (const int64_t[]){3, 4});
    t.offset = 1;
    one_tensor("offset.pth", &t, 48, WGML_ERR_FORMAT, "'w'", "run past");
    t.offset = -1;
    one_tensor("offset_neg.pth", &t, 48, WGML_ERR_FORMAT, "'w'", "negative");
    t.offset = 0;
    t.stride[0] = -4;
    one_tensor("stride_neg.pth", &t, 48, WGML_ERR_FORMAT, "'w'", "negative");
    t.stride[0] = 5;
    one_tensor("stride_big.pth", &t, 48, WGML_ERR_FORMAT, "'w'", "run past");
    t.stride[0] = INT64_MAX / 2;
    one_tensor("stride_overflow.pth", &t, 48, WGML_ERR_FORMAT, "'w'", "run past");
    t = contig("FloatStorage", "0", 2, (const int64_t[]){3, 4});
    t.size[0] = -3;
    one_tensor("size_neg.pth", &t, 48, WGML_ERR_FORMAT, "'w'", "negative");
    t.size[0] = (int64_t)1 << 62;
    t.size[1] = 1 << 4;
    one_tensor("size_huge.pth", &t, 48, WGML_ERR_FORMAT, "'w'", "too many elements");
    t.size[1] = 0; /* an empty tensor of any shape fits */
    one_tensor("size_zero.pth", &t, 48, WGML_OK, NULL, NULL);
    t = contig("FloatStorage", "0", 9, (const int64_t[]){1, 1, 1, 1, 1, 1, 1, 1, 1});
    one_tensor("ndim9.pth", &t, 48, WGML_ERR_FORMAT, "at most 8", NULL);
    t = contig("FloatStorage", "7", 2, (const int64_t[]){3, 4});
    one_tensor("no_entry.pth", &t, 48, WGML_ERR_FORMAT, "'w'", "no entry 't/data/7'");
    t = contig("ByteStorage", "0", 1, (const int64_t[]){4});
    one_tensor("byte.pth", &t, 4, WGML_ERR_UNSUPPORTED, "torch.ByteStorage", NULL);

    /* one storage used as two types */
    float x[4] = {0};
    gb pk = {0};
    begin_state_dict(&pk);
    tspec a = contig("FloatStorage", "0", 1, (const int64_t[]){4}), b = contig("IntStorage", "0", 1, (const int64_t[]){4});
    pk_str(&pk, "a");
    pk_tensor(&pk, &a);
    pk_str(&pk, "b");
    pk_tensor(&pk, &b);
    end_state_dict(&pk);
    gb f = make_pth("t", &pk, &(storage){"0", x, 16}, 1, 0);
    open_fails(&f, "two_types.pth", WGML_ERR_FORMAT, "use storage '0' as different types", NULL);
    gb_free(&f);
    /* one name twice */
    pk.n = 0;
    begin_state_dict(&pk);
    pk_str(&pk, "a");
    pk_tensor(&pk, &a);
    pk_str(&pk, "a");
    pk_tensor(&pk, &a);
    end_state_dict(&pk);
    f = make_pth("t", &pk, &(storage){"0", x, 16}, 1, 0);
    open_fails(&f, "dup_name.pth", WGML_ERR_FORMAT, "duplicate tensor name 'a'", NULL);
    gb_free(&f);
    gb_free(&pk);
}

static void test_hostile_archives(void **state) {
    (void)state;
    float x[4] = {0};
    gb pk = {0};
    begin_state_dict(&pk);
    pk_str(&pk, "w");
    tspec t = contig("FloatStorage", "0", 1, (const int64_t[]){4});
    pk_tensor(&pk, &t);
    end_state_dict(&pk);
    zw z;
    /* a compressed entry */
    memset(&z, 0, sizeof z);
    zw_add(&z, "a/data.pkl", pk.p, pk.n);
    z.method = 8;
    zw_add(&z, "a/data/0", x, 16);
    zw_finish(&z);
    open_fails(&z.out, "deflate.pth", WGML_ERR_UNSUPPORTED, "'a/data/0'", "compressed");
    gb_free(&z.out);
    /* a duplicate entry */
    memset(&z, 0, sizeof z);
    zw_add(&z, "a/data.pkl", pk.p, pk.n);
    zw_add(&z, "a/data/0", x, 16);
    zw_add(&z, "a/data/0", x, 16);
    zw_finish(&z);
    open_fails(&z.out, "dup.pth", WGML_ERR_FORMAT, "duplicate entry 'a/data/0'", NULL);
    gb_free(&z.out);
    /* no pickle, two pickles */
    memset(&z, 0, sizeof z);
    zw_add(&z, "a/data/0", x, 16);
    zw_add(&z, "a/version", "3\n", 2);
    zw_finish(&z);
    open_fails(&z.out, "nopkl.pth", WGML_ERR_FORMAT, "no '<archive>/data.pkl'", NULL);
    gb_free(&z.out);
    memset(&z, 0, sizeof z);
    zw_add(&z, "a/data.pkl", pk.p, pk.n);
    zw_add(&z, "b/data.pkl", pk.p, pk.n);
    zw_finish(&z);
    open_fails(&z.out, "twopkl.pth", WGML_ERR_FORMAT, "two pickles", NULL);
    gb_free(&z.out);
    /* a big-endian checkpoint (torch >= 2.1 writes <archive>/byteorder) */
    memset(&z, 0, sizeof z);
    zw_add(&z, "a/data.pkl", pk.p, pk.n);
    zw_add(&z, "a/byteorder", "big", 3);
    zw_add(&z, "a/data/0", x, 16);
    zw_finish(&z);
    open_fails(&z.out, "big.pth", WGML_ERR_UNSUPPORTED, "little-endian", NULL);
    gb_free(&z.out);
    /* not a ZIP at all; empty */
    gb junk = {0};
    gb_zeros(&junk, 100);
    open_fails(&junk, "junk.pth", WGML_ERR_FORMAT, "not a torch.save ZIP archive", NULL);
    junk.n = 0;
    open_fails(&junk, "empty.pth", WGML_ERR_FORMAT, NULL, NULL);
    gb_free(&junk);

    /* the good archive, then its directory and headers damaged field by field */
    memset(&z, 0, sizeof z);
    zw_add(&z, "a/data.pkl", pk.p, pk.n);
    zw_add(&z, "a/data/0", x, 16);
    zw_finish(&z);
    gb g = z.out;
    pth_close(open_ok(&g, "good.pth"));
    size_t eocd = g.n - 22, cd = 0;
    memcpy(&cd, g.p + eocd + 16, 4);
    uint32_t lho2; /* the second entry's local header */
    memcpy(&lho2, g.p + cd + 46 + strlen("a/data.pkl") + 42, 4);
    struct {
        size_t at;
        uint32_t v;
        int width;
        const char *want;
    } edits[] = {
        {eocd + 8, 0x00030003u, 4, "cannot fit"},             /* entry counts */
        {eocd + 12, 100000, 4, "runs past"},                  /* directory size */
        {eocd + 16, 5, 4, "missing or truncated"},            /* directory offset */
        {eocd + 4, 1, 2, "multi-disk"},                       /* disk number */
        {eocd + 20, 1, 2, "no ZIP end-of-central-directory"}, /* comment length */
        {cd + 42, 7, 4, "no local header at offset 7"},       /* local header offset */
        {cd + 42, 0xfffffff0u, 4, "outside"},                 /* local header offset */
        {cd + 28, 0, 2, "empty name"},                        /* name length */
        {cd + 28, 60000, 2, "runs past the directory"},       /* name length */
        {cd + 30, 60000, 2, "runs past the directory"},       /* extra length */
        {cd + 24, 0xffffffffu, 4, "needs a ZIP64 extra field"}, /* size */
        {cd + 24, 12, 4, "12 uncompressed"},                  /* size */
        {cd + 8, 1, 2, "encrypted"},                          /* flags */
        {cd + 20, 1000000, 4, "run past the entries"},         /* stored sizes, both */
        {26, 3, 2, "another name"},                           /* local name length */
        {lho2, 0x12345678u, 4, "no local header"},            /* local signature */
    };
    for (size_t k = 0; k < sizeof edits / sizeof edits[0]; k++) {
        uint8_t saved[8];
        memcpy(saved, g.p + edits[k].at, 8);
        memcpy(g.p + edits[k].at, &edits[k].v, (size_t)edits[k].width);
        if (k == 13) memcpy(g.p + edits[k].at + 4, &edits[k].v, 4);
        char what[32];
        snprintf(what, sizeof what, "edit%zu.pth", k);
        pth_file *p = NULL;
        wgml_error err;
        wgml_status st = pth_open_memory(g.p, g.n, what, &p, &err);
        if (st == WGML_OK || !strstr(err.message, edits[k].want) || !strstr(err.message, what))
            fail_msg("edit %zu: status %d, message \"%s\" (want \"%s\")", k, (int)st, st ? err.message : "", edits[k].want);
        memcpy(g.p + edits[k].at, saved, 8);
    }
    /* a comment after the end record is fine; a truncation anywhere is refused cleanly */
    for (size_t cut = 0; cut < g.n; cut++) {
        pth_file *p = NULL;
        wgml_error err;
        assert_int_not_equal(pth_open_memory(g.p, cut, "cut.pth", &p, &err), WGML_OK);
        assert_null(p);
        assert_non_null(strstr(err.message, "cut.pth"));
    }
    gb_free(&g);
    /* ZIP64 end records and extra fields */
    memset(&z, 0, sizeof z);
    z.zip64 = 1;
    zw_add(&z, "a/data.pkl", pk.p, pk.n);
    zw_add(&z, "a/data/0", x, 16);
    zw_finish(&z);
    pth_file *p = open_ok(&z.out, "zip64.pth");
    assert_int_equal(pth_n_tensors(p), 1);
    pth_close(p);
    gb_free(&z.out);
    gb_free(&pk);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kokoro_tiny),      cmocka_unit_test(test_kokoro_tiny_damaged),
        cmocka_unit_test(test_voice_pt),         cmocka_unit_test(test_views_and_types),
        cmocka_unit_test(test_nested),           cmocka_unit_test(test_hostile_pickles),
        cmocka_unit_test(test_hostile_tensors),  cmocka_unit_test(test_hostile_archives),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
