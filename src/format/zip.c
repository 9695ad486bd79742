/*
 * zip.c - the read-only ZIP reader (see zip.h for what is accepted and checked).
 *
 * Every field is read through bounds-checked little-endian helpers at offsets
 * that were checked against the file first; counts read from the file are
 * checked against the bytes that could hold them before anything is
 * allocated, so a hostile archive costs at most a small multiple of its
 * central directory's size.
 */
#include "format/zip.h"

#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"

#define SIG_LOCAL 0x04034b50u
#define SIG_CENTRAL 0x02014b50u
#define SIG_END 0x06054b50u
#define SIG_END64 0x06064b50u
#define SIG_LOCATOR64 0x07064b50u

#define END_SIZE 22u
#define LOCATOR64_SIZE 20u
#define END64_MIN_SIZE 56u
#define CENTRAL_SIZE 46u
#define LOCAL_SIZE 30u
#define MAX_COMMENT 65535u

struct zip_archive {
    char *name;
    const uint8_t *base;
    size_t size;
    size_t n_entries;
    zip_entry *entries;
    char *names;              /* every entry's name, NUL-terminated, back to back */
    const zip_entry **sorted; /* by name, for duplicates and lookups */
};

static uint16_t le16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t le32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static uint64_t le64(const uint8_t *p) { return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32; }

int zip_is_zip(const void *data, size_t size) {
    const uint8_t *p = data;
    if (!p || size < 4) return 0;
    uint32_t sig = le32(p);
    return sig == SIG_LOCAL || (sig == SIG_END && size >= END_SIZE);
}

uint32_t zip_crc32(uint32_t crc, const void *data, size_t n) {
    uint32_t table[256];
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
        table[i] = c;
    }
    const uint8_t *p = data;
    crc = ~crc;
    for (size_t i = 0; i < n; i++) crc = table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
    return ~crc;
}

wgml_status zip_check_crc(const zip_archive *z, const zip_entry *e, wgml_error *err) {
    uint32_t crc = zip_crc32(0, e->data, (size_t)e->size);
    if (crc != e->crc32)
        return wgml_fail(err, WGML_ERR_FORMAT, "%s: entry '%s' at offset %llu: CRC-32 %08x, the directory says %08x",
                         z->name, e->name, (unsigned long long)e->header_offset, crc, e->crc32);
    return WGML_OK;
}

/* The end-of-central-directory record: the last signature in the final
 * 64 KiB + 22 bytes whose comment ends exactly at the end of the file. */
static wgml_status find_end(const zip_archive *z, size_t *at, wgml_error *err) {
    if (z->size < END_SIZE)
        return wgml_fail(err, WGML_ERR_FORMAT, "%s: %zu bytes is too small for a ZIP archive", z->name, z->size);
    size_t last = z->size - END_SIZE;
    size_t first = last > MAX_COMMENT ? last - MAX_COMMENT : 0;
    for (size_t i = last + 1; i-- > first;) {
        const uint8_t *p = z->base + i;
        if (le32(p) == SIG_END && (size_t)le16(p + 20) == last - i) {
            *at = i;
            return WGML_OK;
        }
    }
    return wgml_fail(err, WGML_ERR_FORMAT,
                     "%s: no ZIP end-of-central-directory record in the last %zu bytes (truncated, or not a ZIP archive)",
                     z->name, z->size - first);
}

typedef struct dir_info {
    uint64_t n, cd_offset, cd_size;
    uint64_t end; /* where the central directory must end: the first end record */
} dir_info;

static wgml_status read_end(const zip_archive *z, dir_info *d, wgml_error *err) {
    size_t at = 0;
    wgml_status st = find_end(z, &at, err);
    if (st) return st;
    const uint8_t *e = z->base + at;
    uint16_t disk = le16(e + 4), cd_disk = le16(e + 6), n_disk = le16(e + 8), n = le16(e + 10);
    uint32_t cd_size = le32(e + 12), cd_offset = le32(e + 16);
    int want64 = n == 0xffff || n_disk == 0xffff || cd_size == 0xffffffffu || cd_offset == 0xffffffffu;
    int has_locator = at >= LOCATOR64_SIZE && le32(e - LOCATOR64_SIZE) == SIG_LOCATOR64;
    if (!has_locator) {
        if (want64)
            return wgml_fail(err, WGML_ERR_FORMAT, "%s: the end record at offset %zu needs ZIP64 but has no ZIP64 locator",
                             z->name, at);
        if ((disk != 0 && disk != 0xffff) || (cd_disk != 0 && cd_disk != 0xffff) || n_disk != n)
            return wgml_fail(err, WGML_ERR_UNSUPPORTED, "%s: multi-disk ZIP archives are not supported (end record at offset %zu)",
                             z->name, at);
        d->n = n;
        d->cd_size = cd_size;
        d->cd_offset = cd_offset;
        d->end = at;
        return WGML_OK;
    }
    const uint8_t *loc = e - LOCATOR64_SIZE;
    uint64_t loc_at = at - LOCATOR64_SIZE;
    uint64_t off64 = le64(loc + 8);
    if (le32(loc + 4) != 0 || le32(loc + 16) > 1)
        return wgml_fail(err, WGML_ERR_UNSUPPORTED, "%s: multi-disk ZIP archives are not supported (ZIP64 locator at offset %llu)",
                         z->name, (unsigned long long)loc_at);
    if (off64 > loc_at || loc_at - off64 < END64_MIN_SIZE)
        return wgml_fail(err, WGML_ERR_FORMAT, "%s: the ZIP64 locator at offset %llu points at offset %llu, outside the file",
                         z->name, (unsigned long long)loc_at, (unsigned long long)off64);
    const uint8_t *r = z->base + off64;
    uint64_t rec_size = le64(r + 4);
    if (le32(r) != SIG_END64 || rec_size < END64_MIN_SIZE - 12 || rec_size > loc_at - off64 - 12)
        return wgml_fail(err, WGML_ERR_FORMAT, "%s: no valid ZIP64 end record at offset %llu", z->name,
                         (unsigned long long)off64);
    if (le32(r + 16) != 0 || le32(r + 20) != 0 || le64(r + 24) != le64(r + 32))
        return wgml_fail(err, WGML_ERR_UNSUPPORTED, "%s: multi-disk ZIP archives are not supported (ZIP64 end record at offset %llu)",
                         z->name, (unsigned long long)off64);
    d->n = le64(r + 32);
    d->cd_size = le64(r + 40);
    d->cd_offset = le64(r + 48);
    d->end = off64;
    return WGML_OK;
}

/* The ZIP64 extra field (id 1) of a central directory entry: the 64-bit values
 * of those fields that are 0xffffffff, in the order the format fixes. */
static wgml_status read_zip64_extra(const zip_archive *z, const uint8_t *x, size_t xlen, uint64_t at, const char *nm,
                                    uint64_t *usize, uint64_t *csize, uint64_t *lho, wgml_error *err) {
    size_t i = 0;
    while (i + 4 <= xlen) {
        uint16_t id = le16(x + i), len = le16(x + i + 2);
        if (len > xlen - i - 4)
            return wgml_fail(err, WGML_ERR_FORMAT, "%s: entry '%s' (directory offset %llu): extra field %#x overruns the entry",
                             z->name, nm, (unsigned long long)at, id);
        if (id == 1) {
            const uint8_t *f = x + i + 4;
            size_t k = 0;
            uint64_t *want[3] = {*usize == 0xffffffffu ? usize : NULL, *csize == 0xffffffffu ? csize : NULL,
                                 *lho == 0xffffffffu ? lho : NULL};
            for (int j = 0; j < 3; j++) {
                if (!want[j]) continue;
                if (k + 8 > len)
                    return wgml_fail(err, WGML_ERR_FORMAT, "%s: entry '%s' (directory offset %llu): ZIP64 extra field too short",
                                     z->name, nm, (unsigned long long)at);
                *want[j] = le64(f + k);
                k += 8;
            }
            return WGML_OK;
        }
        i += 4 + (size_t)len;
    }
    if (*usize == 0xffffffffu || *csize == 0xffffffffu || *lho == 0xffffffffu)
        return wgml_fail(err, WGML_ERR_FORMAT, "%s: entry '%s' (directory offset %llu) needs a ZIP64 extra field and has none",
                         z->name, nm, (unsigned long long)at);
    return WGML_OK;
}

static const char *method_name(uint16_t m) {
    switch (m) {
    case 8: return "deflate";
    case 9: return "deflate64";
    case 12: return "bzip2";
    case 14: return "LZMA";
    case 93: return "zstd";
    case 95: return "xz";
    default: return "unknown";
    }
}

static int cmp_entry_name(const void *a, const void *b) {
    return strcmp((*(const zip_entry *const *)a)->name, (*(const zip_entry *const *)b)->name);
}

static wgml_status parse(zip_archive *z, wgml_error *err) {
    dir_info d = {0, 0, 0, 0};
    wgml_status st = read_end(z, &d, err);
    if (st) return st;
    if (d.cd_offset > d.end || d.cd_size > d.end - d.cd_offset)
        return wgml_fail(err, WGML_ERR_FORMAT,
                         "%s: central directory at offset %llu of %llu bytes runs past its end record at offset %llu",
                         z->name, (unsigned long long)d.cd_offset, (unsigned long long)d.cd_size, (unsigned long long)d.end);
    if (d.n > d.cd_size / CENTRAL_SIZE)
        return wgml_fail(err, WGML_ERR_FORMAT, "%s: %llu entries cannot fit in a central directory of %llu bytes", z->name,
                         (unsigned long long)d.n, (unsigned long long)d.cd_size);
    size_t n = (size_t)d.n;
    z->entries = wgml_calloc(n ? n : 1, sizeof *z->entries);
    /* each name is at most the directory's bytes, plus a NUL per entry */
    z->names = wgml_malloc((size_t)d.cd_size + n + 1);
    z->sorted = wgml_calloc(n ? n : 1, sizeof *z->sorted);
    if (!z->entries || !z->names || !z->sorted) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "%s: out of memory", z->name);
    char *names = z->names;
    const uint8_t *cd = z->base + d.cd_offset;
    uint64_t pos = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t at = d.cd_offset + pos;
        if (d.cd_size - pos < CENTRAL_SIZE || le32(cd + pos) != SIG_CENTRAL)
            return wgml_fail(err, WGML_ERR_FORMAT, "%s: central directory entry %zu at offset %llu is missing or truncated",
                             z->name, i, (unsigned long long)at);
        const uint8_t *h = cd + pos;
        uint16_t flags = le16(h + 8), method = le16(h + 10);
        uint32_t crc = le32(h + 16);
        uint64_t csize = le32(h + 20), usize = le32(h + 24), lho = le32(h + 42);
        size_t nlen = le16(h + 28), xlen = le16(h + 30), clen = le16(h + 32);
        if (d.cd_size - pos - CENTRAL_SIZE < (uint64_t)nlen + xlen + clen)
            return wgml_fail(err, WGML_ERR_FORMAT, "%s: central directory entry %zu at offset %llu runs past the directory",
                             z->name, i, (unsigned long long)at);
        const char *raw = (const char *)h + CENTRAL_SIZE;
        if (nlen == 0 || memchr(raw, 0, nlen))
            return wgml_fail(err, WGML_ERR_FORMAT, "%s: central directory entry %zu at offset %llu has an empty name or a NUL byte",
                             z->name, i, (unsigned long long)at);
        memcpy(names, raw, nlen);
        names[nlen] = 0;
        zip_entry *e = &z->entries[i];
        e->name = names;
        e->name_len = nlen;
        names += nlen + 1;
        if ((st = read_zip64_extra(z, h + CENTRAL_SIZE + nlen, xlen, at, e->name, &usize, &csize, &lho, err))) return st;
        if (flags & 1)
            return wgml_fail(err, WGML_ERR_UNSUPPORTED, "%s: entry '%s' (directory offset %llu) is encrypted", z->name,
                             e->name, (unsigned long long)at);
        if (method != 0)
            return wgml_fail(err, WGML_ERR_UNSUPPORTED,
                             "%s: entry '%s' (directory offset %llu) is compressed (method %u, %s); only stored entries are supported",
                             z->name, e->name, (unsigned long long)at, method, method_name(method));
        if (csize != usize)
            return wgml_fail(err, WGML_ERR_FORMAT,
                             "%s: stored entry '%s' (directory offset %llu) has %llu bytes in the file but %llu uncompressed",
                             z->name, e->name, (unsigned long long)at, (unsigned long long)csize, (unsigned long long)usize);
        /* the local header: where the directory says, before the directory */
        if (lho > d.cd_offset || d.cd_offset - lho < LOCAL_SIZE)
            return wgml_fail(err, WGML_ERR_FORMAT, "%s: entry '%s': local header offset %llu is outside the file's entries",
                             z->name, e->name, (unsigned long long)lho);
        const uint8_t *l = z->base + lho;
        if (le32(l) != SIG_LOCAL)
            return wgml_fail(err, WGML_ERR_FORMAT, "%s: entry '%s': no local header at offset %llu", z->name, e->name,
                             (unsigned long long)lho);
        uint16_t lflags = le16(l + 6), lmethod = le16(l + 8);
        size_t lnlen = le16(l + 26), lxlen = le16(l + 28);
        if (lmethod != method || (lflags & 1))
            return wgml_fail(err, WGML_ERR_FORMAT, "%s: entry '%s': the local header at offset %llu disagrees with the directory (method %u, flags %#x)",
                             z->name, e->name, (unsigned long long)lho, lmethod, lflags);
        uint64_t data_at = lho + LOCAL_SIZE + (uint64_t)lnlen + lxlen;
        if (data_at > d.cd_offset || lnlen != nlen || memcmp(l + LOCAL_SIZE, raw, nlen) != 0)
            return wgml_fail(err, WGML_ERR_FORMAT, "%s: entry '%s': the local header at offset %llu has another name or runs past the entries",
                             z->name, e->name, (unsigned long long)lho);
        if (usize > d.cd_offset - data_at)
            return wgml_fail(err, WGML_ERR_FORMAT,
                             "%s: entry '%s' (local header at offset %llu): %llu bytes of data at offset %llu run past the entries (which end at %llu)",
                             z->name, e->name, (unsigned long long)lho, (unsigned long long)usize,
                             (unsigned long long)data_at, (unsigned long long)d.cd_offset);
        e->header_offset = lho;
        e->offset = data_at;
        e->size = usize;
        e->crc32 = crc;
        e->data = z->base + data_at;
        z->sorted[i] = e;
        pos += CENTRAL_SIZE + nlen + xlen + clen;
        z->n_entries = i + 1;
    }
    qsort(z->sorted, n, sizeof *z->sorted, cmp_entry_name);
    for (size_t i = 1; i < n; i++)
        if (strcmp(z->sorted[i - 1]->name, z->sorted[i]->name) == 0) {
            const zip_entry *later = z->sorted[i - 1]->header_offset > z->sorted[i]->header_offset ? z->sorted[i - 1] : z->sorted[i];
            return wgml_fail(err, WGML_ERR_FORMAT, "%s: duplicate entry '%s' (local header at offset %llu)", z->name,
                             later->name, (unsigned long long)later->header_offset);
        }
    return WGML_OK;
}

wgml_status zip_open_memory(const void *data, size_t size, const char *name, zip_archive **out, wgml_error *err) {
    *out = NULL;
    zip_archive *z = wgml_calloc(1, sizeof *z);
    char *nm = wgml_strdup(name ? name : "<memory>");
    if (!z || !nm) {
        wgml_free(z);
        wgml_free(nm);
        return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "out of memory opening %s", name ? name : "ZIP");
    }
    z->name = nm;
    static const uint8_t no_bytes[1];
    z->base = data ? data : no_bytes;
    z->size = size;
    if (!data && size) {
        zip_close(z);
        return wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "NULL data for a ZIP archive in memory");
    }
    wgml_status st = parse(z, err);
    if (st) {
        zip_close(z);
        return st;
    }
    *out = z;
    return WGML_OK;
}

void zip_close(zip_archive *z) {
    if (!z) return;
    wgml_free(z->entries);
    wgml_free(z->names);
    wgml_free((void *)z->sorted);
    wgml_free(z->name);
    wgml_free(z);
}

const char *zip_name(const zip_archive *z) { return z->name; }
size_t zip_n_entries(const zip_archive *z) { return z->n_entries; }

const zip_entry *zip_entry_at(const zip_archive *z, size_t i) { return i < z->n_entries ? &z->entries[i] : NULL; }

static int cmp_name_to_entry(const void *key, const void *elem) {
    return strcmp((const char *)key, (*(const zip_entry *const *)elem)->name);
}

const zip_entry *zip_find(const zip_archive *z, const char *name) {
    if (!z->sorted || !name) return NULL;
    const zip_entry *const *hit = bsearch(name, z->sorted, z->n_entries, sizeof *z->sorted, cmp_name_to_entry);
    return hit ? *hit : NULL;
}
