/*
 * pipeline_cache.c - Dawn's blob cache as one file per entry (pipeline_cache.h).
 *
 * An entry lives in <dir>/<16 hex digits>.bin, the digits an FNV-1a 64 hash
 * of (format version, isolation key, Dawn's key). The file holds, little-endian:
 *
 *   0   8 bytes  magic "wgmlPIPE"
 *   8   u32      format version (FORMAT_VERSION)
 *   12  u32      isolation key length I
 *   16  u64      key length K
 *   24  u64      value length V
 *   32  u64      FNV-1a 64 of the isolation key, key and value
 *   40  I + K + V bytes: the isolation key, the key, the value
 *
 * A load trusts nothing in the file: the lengths must be within the limits
 * and add up to the file's size exactly, and the checksum must match, or the
 * file is corrupt (deleted, counted as rejected, a miss); a whole file whose
 * isolation key or key differ from the ones asked for (a hash collision) is a
 * miss and stays. Nothing is read past what the header announces.
 *
 * A store writes <name>.tmp.<pid>.<n> in the same directory (O_EXCL, 0600) and
 * renames it over <name>: rename is atomic, so readers in any process see the
 * old file or the new one, never a part. A crash can leave a .tmp file
 * behind; it is never read.
 */
#include "gpu/pipeline_cache.h"

#include "core/alloc.h"
#include "core/cache_dir.h"
#include "core/hash.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#define FORMAT_VERSION 1u
#define HEADER_SIZE    40
#define PENDING_SLOTS  8 /* values read for a size query, awaiting Dawn's second call */

static const char magic[8] = {'w', 'g', 'm', 'l', 'P', 'I', 'P', 'E'};

/* A value read for a size query (load with no buffer), kept for the copy. */
typedef struct pending_load {
    uint8_t *key;
    size_t key_size;
    uint8_t *value; /* NULL: slot free */
    size_t value_size;
    uint64_t stamp; /* age, for eviction */
} pending_load;

struct wgml_pipeline_cache {
    char *dir;
    char *iso; /* isolation key */
    size_t iso_len;
    pthread_mutex_t lock; /* guards what follows; counters are atomics */
    int dir_ready;        /* the directory exists (made by us or found) */
    int store_off;        /* the directory cannot be made or written: no more stores */
    unsigned tmp_seq;     /* temporary file names */
    uint64_t stamp;
    pending_load pending[PENDING_SLOTS];
    wgml_pipeline_cache_counters counters;
};

/* ---- byte order ------------------------------------------------------------------ */

static void put_u32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put_u64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get_u32(const uint8_t *p) {
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static uint64_t get_u64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* Counters are bumped outside the lock, from any thread. */
static void count(uint64_t *field) { __atomic_add_fetch(field, 1, __ATOMIC_RELAXED); }

/* ---- paths ----------------------------------------------------------------------- */

int wgml_pipeline_cache_default_dir(char *out, size_t cap) { return wgml_cache_dir(out, cap); }

/* The entry's file name: a hash of the format version, isolation key and key. */
static uint64_t entry_hash(const wgml_pipeline_cache *pc, const void *key, size_t key_size) {
    uint8_t head[12];
    put_u32(head, FORMAT_VERSION);
    put_u64(head + 4, (uint64_t)pc->iso_len);
    uint64_t h = wgml_fnv64(WGML_FNV64_BASIS, head, sizeof head);
    h = wgml_fnv64(h, pc->iso, pc->iso_len);
    return wgml_fnv64(h, key, key_size);
}

int wgml_pipeline_cache_entry_path(const wgml_pipeline_cache *pc, const void *key, size_t key_size, char *out,
                                   size_t cap) {
    if (!pc || !out || !cap) return 0;
    int n = snprintf(out, cap, "%s/%016llx.bin", pc->dir, (unsigned long long)entry_hash(pc, key, key_size));
    return n > 0 && (size_t)n < cap;
}


/* ---- open and close ---------------------------------------------------------------- */

wgml_pipeline_cache *wgml_pipeline_cache_open(const char *dir, const char *isolation_key) {
    char def[4096];
    if (!dir) {
        if (!wgml_pipeline_cache_default_dir(def, sizeof def)) return NULL;
        dir = def;
    }
    if (!*dir || strcasecmp(dir, "off") == 0) return NULL;
    if (!isolation_key) isolation_key = "";
    size_t iso_len = strlen(isolation_key);
    if (iso_len > WGML_PIPELINE_CACHE_MAX_KEY) return NULL;
    wgml_pipeline_cache *pc = wgml_calloc(1, sizeof *pc);
    if (!pc) return NULL;
    pc->dir = wgml_strdup(dir);
    pc->iso = wgml_strdup(isolation_key);
    if (!pc->dir || !pc->iso || pthread_mutex_init(&pc->lock, NULL) != 0) {
        wgml_free(pc->dir);
        wgml_free(pc->iso);
        wgml_free(pc);
        return NULL;
    }
    /* "a/b/" and "a/b" are one directory: no trailing slashes in file paths */
    for (size_t n = strlen(pc->dir); n > 1 && pc->dir[n - 1] == '/'; n--)
        pc->dir[n - 1] = '\0';
    pc->iso_len = iso_len;
    return pc;
}

static void pending_drop(pending_load *p) {
    wgml_free(p->key);
    wgml_free(p->value);
    memset(p, 0, sizeof *p);
}

void wgml_pipeline_cache_close(wgml_pipeline_cache *pc) {
    if (!pc) return;
    for (int i = 0; i < PENDING_SLOTS; i++)
        pending_drop(&pc->pending[i]);
    pthread_mutex_destroy(&pc->lock);
    wgml_free(pc->dir);
    wgml_free(pc->iso);
    wgml_free(pc);
}

void wgml_pipeline_cache_get_counters(const wgml_pipeline_cache *pc, wgml_pipeline_cache_counters *c) {
    if (!c) return;
    memset(c, 0, sizeof *c);
    if (!pc) return;
    c->hits = __atomic_load_n(&pc->counters.hits, __ATOMIC_RELAXED);
    c->misses = __atomic_load_n(&pc->counters.misses, __ATOMIC_RELAXED);
    c->stores = __atomic_load_n(&pc->counters.stores, __ATOMIC_RELAXED);
    c->rejected = __atomic_load_n(&pc->counters.rejected, __ATOMIC_RELAXED);
}

const char *wgml_pipeline_cache_dir(const wgml_pipeline_cache *pc) { return pc ? pc->dir : ""; }

/* ---- reading an entry -------------------------------------------------------------- */

/* Reads exactly n bytes; 0 on success. */
static int read_full(int fd, void *buf, size_t n) {
    uint8_t *p = buf;
    while (n) {
        ssize_t r = read(fd, p, n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

/* Writes exactly n bytes; 0 on success. */
static int write_full(int fd, const void *buf, size_t n) {
    const uint8_t *p = buf;
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

typedef enum { ENTRY_FOUND, ENTRY_ABSENT, ENTRY_OTHER, ENTRY_CORRUPT } entry_result;

/* Reads and checks key's file. ENTRY_FOUND: *value (the caller frees it) and
 * *value_size are set. ENTRY_OTHER: a sound entry of another key under the
 * same name. ENTRY_CORRUPT: the file cannot be a whole entry. ENTRY_ABSENT:
 * no file, or it cannot be read (also out of memory). */
static entry_result read_entry(const wgml_pipeline_cache *pc, const char *path, const void *key, size_t key_size,
                               uint8_t **value, size_t *value_size) {
    *value = NULL;
    *value_size = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ENTRY_ABSENT;
    entry_result res = ENTRY_CORRUPT;
    uint8_t head[HEADER_SIZE], *keys = NULL, *val = NULL;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        res = ENTRY_ABSENT; /* not ours to judge or delete */
        goto out;
    }
    if ((uint64_t)st.st_size < HEADER_SIZE || read_full(fd, head, HEADER_SIZE) != 0) goto out;
    uint64_t iso_len = get_u32(head + 12), klen = get_u64(head + 16), vlen = get_u64(head + 24);
    uint64_t sum = get_u64(head + 32);
    if (memcmp(head, magic, sizeof magic) != 0 || get_u32(head + 8) != FORMAT_VERSION) goto out;
    if (iso_len > WGML_PIPELINE_CACHE_MAX_KEY || klen > WGML_PIPELINE_CACHE_MAX_KEY ||
        vlen > WGML_PIPELINE_CACHE_MAX_VALUE || vlen == 0 ||
        (uint64_t)st.st_size != HEADER_SIZE + iso_len + klen + vlen)
        goto out;
    /* Sound sizes: the rest is the isolation key + key, then the value. */
    size_t nkeys = (size_t)(iso_len + klen);
    keys = wgml_malloc(nkeys ? nkeys : 1);
    val = wgml_malloc((size_t)vlen);
    if (!keys || !val) {
        res = ENTRY_ABSENT;
        goto out;
    }
    if (read_full(fd, keys, nkeys) != 0 || read_full(fd, val, (size_t)vlen) != 0) goto out;
    if (wgml_fnv64(wgml_fnv64(WGML_FNV64_BASIS, keys, nkeys), val, (size_t)vlen) != sum) goto out;
    if (iso_len != pc->iso_len || klen != key_size || memcmp(keys, pc->iso, pc->iso_len) != 0 ||
        memcmp(keys + iso_len, key, key_size) != 0) {
        res = ENTRY_OTHER;
        goto out;
    }
    res = ENTRY_FOUND;
    *value = val;
    *value_size = (size_t)vlen;
    val = NULL;
out:
    close(fd);
    wgml_free(keys);
    wgml_free(val);
    return res;
}

/* The pending load of key, or NULL. Called with the lock held. */
static pending_load *pending_find(wgml_pipeline_cache *pc, const void *key, size_t key_size) {
    for (int i = 0; i < PENDING_SLOTS; i++) {
        pending_load *p = &pc->pending[i];
        if (p->value && p->key_size == key_size && memcmp(p->key, key, key_size) == 0) return p;
    }
    return NULL;
}

/* Keeps a value read for a size query (taking ownership of value, and of a
 * copy of key) in a free slot or the oldest one. Called with the lock held;
 * 0 on success, -1 (value freed) when out of memory. */
static int pending_add(wgml_pipeline_cache *pc, const void *key, size_t key_size, uint8_t *value, size_t value_size) {
    uint8_t *k = wgml_malloc(key_size ? key_size : 1);
    if (!k) {
        wgml_free(value);
        return -1;
    }
    memcpy(k, key, key_size);
    pending_load *slot = &pc->pending[0];
    for (int i = 0; i < PENDING_SLOTS; i++) {
        pending_load *p = &pc->pending[i];
        if (!p->value) {
            slot = p;
            break;
        }
        if (p->stamp < slot->stamp) slot = p;
    }
    pending_drop(slot);
    *slot = (pending_load){k, key_size, value, value_size, ++pc->stamp};
    return 0;
}

size_t wgml_pipeline_cache_load(wgml_pipeline_cache *pc, const void *key, size_t key_size, void *value,
                                size_t value_size) {
    if (!pc || !key) return 0;
    /* Dawn's second call: the value the size query read. */
    pthread_mutex_lock(&pc->lock);
    pending_load *p = pending_find(pc, key, key_size);
    if (p) {
        size_t n = p->value_size;
        if (value && value_size >= n) {
            memcpy(value, p->value, n);
            pending_drop(p);
            count(&pc->counters.hits);
        }
        pthread_mutex_unlock(&pc->lock);
        return n;
    }
    pthread_mutex_unlock(&pc->lock);

    char path[4096];
    uint8_t *v = NULL;
    size_t n = 0;
    entry_result r = ENTRY_ABSENT;
    if (wgml_pipeline_cache_entry_path(pc, key, key_size, path, sizeof path))
        r = read_entry(pc, path, key, key_size, &v, &n);
    if (r == ENTRY_CORRUPT) {
        unlink(path);
        count(&pc->counters.rejected);
    }
    if (r != ENTRY_FOUND) {
        count(&pc->counters.misses);
        return 0;
    }
    if (value && value_size >= n) { /* a caller that asks with a buffer at once */
        memcpy(value, v, n);
        wgml_free(v);
        count(&pc->counters.hits);
        return n;
    }
    pthread_mutex_lock(&pc->lock);
    int kept = pending_add(pc, key, key_size, v, n);
    pthread_mutex_unlock(&pc->lock);
    if (kept != 0) {
        count(&pc->counters.misses);
        return 0;
    }
    return n;
}

/* ---- writing an entry -------------------------------------------------------------- */

/* Writes the entry; 1 when it is in place. */
static int store_entry(wgml_pipeline_cache *pc, const void *key, size_t key_size, const void *value,
                       size_t value_size) {
    if (!pc || !key || !value || value_size == 0 || key_size > WGML_PIPELINE_CACHE_MAX_KEY ||
        value_size > WGML_PIPELINE_CACHE_MAX_VALUE)
        return 0;
    pthread_mutex_lock(&pc->lock);
    if (!pc->store_off && !pc->dir_ready) {
        if (wgml_make_dirs(pc->dir) == 0)
            pc->dir_ready = 1;
        else
            pc->store_off = 1;
    }
    int off = pc->store_off;
    unsigned seq = pc->tmp_seq++;
    pending_load *p = pending_find(pc, key, key_size); /* a value read before is outdated now */
    if (p) pending_drop(p);
    pthread_mutex_unlock(&pc->lock);
    if (off) return 0;

    char path[4096], tmp[4200];
    if (!wgml_pipeline_cache_entry_path(pc, key, key_size, path, sizeof path)) return 0;
    int n = snprintf(tmp, sizeof tmp, "%s.tmp.%ld.%u", path, (long)getpid(), seq);
    if (n < 0 || (size_t)n >= sizeof tmp) return 0;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        /* The directory went away (someone cleared the cache): make it again
         * next time. Anything else (no permission, read-only, no space): stop. */
        int gone = errno == ENOENT;
        pthread_mutex_lock(&pc->lock);
        if (gone)
            pc->dir_ready = 0;
        else
            pc->store_off = 1;
        pthread_mutex_unlock(&pc->lock);
        return 0;
    }
    uint8_t head[HEADER_SIZE];
    memcpy(head, magic, sizeof magic);
    put_u32(head + 8, FORMAT_VERSION);
    put_u32(head + 12, (uint32_t)pc->iso_len);
    put_u64(head + 16, (uint64_t)key_size);
    put_u64(head + 24, (uint64_t)value_size);
    uint64_t sum = wgml_fnv64(WGML_FNV64_BASIS, pc->iso, pc->iso_len);
    sum = wgml_fnv64(sum, key, key_size);
    put_u64(head + 32, wgml_fnv64(sum, value, value_size));
    int ok = write_full(fd, head, sizeof head) == 0 && write_full(fd, pc->iso, pc->iso_len) == 0 &&
             write_full(fd, key, key_size) == 0 && write_full(fd, value, value_size) == 0;
    if (close(fd) != 0) ok = 0;
    if (!ok || rename(tmp, path) != 0) {
        unlink(tmp);
        return 0;
    }
    return 1;
}

void wgml_pipeline_cache_store(wgml_pipeline_cache *pc, const void *key, size_t key_size, const void *value,
                               size_t value_size) {
    if (store_entry(pc, key, key_size, value, value_size)) count(&pc->counters.stores);
}

void wgml_pipeline_cache_put(wgml_pipeline_cache *pc, const void *key, size_t key_size, const void *value,
                             size_t value_size) {
    store_entry(pc, key, key_size, value, value_size);
}

size_t wgml_pipeline_cache_get(wgml_pipeline_cache *pc, const void *key, size_t key_size, void **value) {
    *value = NULL;
    if (!pc || !key) return 0;
    char path[4096];
    uint8_t *v = NULL;
    size_t n = 0;
    if (!wgml_pipeline_cache_entry_path(pc, key, key_size, path, sizeof path)) return 0;
    entry_result r = read_entry(pc, path, key, key_size, &v, &n);
    if (r == ENTRY_CORRUPT) unlink(path);
    if (r != ENTRY_FOUND) return 0;
    *value = v;
    return n;
}
