/*
 * zip.h - a minimal read-only ZIP reader over bytes in memory (or a mapping),
 * enough for the archives torch.save writes.
 *
 * Only stored entries (method 0) are accepted: torch.save never compresses,
 * and a compressed or encrypted entry is refused at open, naming the entry.
 * ZIP64 is understood (the end-of-central-directory record and locator, and
 * the 0x0001 extra field of central directory entries); multi-disk archives
 * are not.
 *
 * zip_open_memory validates everything up front: the end-of-central-directory
 * record is searched in the last 64 KiB + 22 bytes and its comment must end
 * exactly at the end of the file; the central directory must lie inside the
 * file; every entry's local header must be where the directory says, carry
 * the same name and method, and its data must end before the central
 * directory. Entry names are unique (a duplicate is refused). The sizes come
 * from the central directory (torch writes data descriptors, with zeros in the
 * local headers). After zip_open_memory succeeds every entry's data pointer
 * and size lie inside the bytes given. CRCs are not checked at open:
 * zip_check_crc does it on request.
 *
 * Allocation: one table of entries, one block of names and one sorted index,
 * all made at open; lookups are binary searches and allocate nothing.
 */
#ifndef WGML_FORMAT_ZIP_H
#define WGML_FORMAT_ZIP_H

#include <stddef.h>
#include <stdint.h>

#include "wgml.h"

typedef struct zip_entry {
    const char *name;        /* NUL-terminated copy */
    size_t name_len;
    uint64_t header_offset;  /* of the local header, for messages */
    uint64_t offset;         /* of the data */
    uint64_t size;           /* bytes (stored: as many in the file as uncompressed) */
    uint32_t crc32;          /* from the central directory */
    const uint8_t *data;     /* inside the bytes given to zip_open_memory; may be unaligned */
} zip_entry;

typedef struct zip_archive zip_archive;

/* 1 when the bytes start as a ZIP archive does (a local file header, or the
 * end record of an empty archive). */
int zip_is_zip(const void *data, size_t size);

/* Opens the archive in data[0..size) (bytes that must outlive it); `name`
 * labels messages. */
wgml_status zip_open_memory(const void *data, size_t size, const char *name, zip_archive **out, wgml_error *err);
void zip_close(zip_archive *z);

const char *zip_name(const zip_archive *z);
size_t zip_n_entries(const zip_archive *z);
const zip_entry *zip_entry_at(const zip_archive *z, size_t i); /* in central directory order; NULL if out of range */
const zip_entry *zip_find(const zip_archive *z, const char *name); /* NULL if absent */

/* CRC-32 (the ZIP/zlib polynomial) of n bytes, continuing from crc (0 to start). */
uint32_t zip_crc32(uint32_t crc, const void *p, size_t n);
/* Checks an entry's data against its CRC-32: WGML_ERR_FORMAT naming the entry when it differs. */
wgml_status zip_check_crc(const zip_archive *z, const zip_entry *e, wgml_error *err);

#endif
