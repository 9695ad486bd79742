/*
 * file_bytes.c - a whole file's bytes, read-only (file_bytes.h).
 */
#include "format/file_bytes.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#if !defined(__wasm__)
#include <sys/mman.h>
#endif

#include "core/alloc.h"
#include "core/error.h"

wgml_status wgml_file_bytes(const char *path, size_t min_size, const char *what, const uint8_t **base, size_t *size,
                            int *kind, wgml_error *err) {
    *base = NULL;
    *size = 0;
    *kind = WGML_BYTES_BORROWED;
    int fd = open(path, O_RDONLY);
    if (fd < 0) return wgml_fail(err, WGML_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return wgml_fail(err, WGML_ERR_IO, "%s: not a regular file", path);
    }
    size_t n = (size_t)sb.st_size;
    if (n < min_size) {
        close(fd);
        return wgml_fail(err, WGML_ERR_FORMAT, "%s: file of %zu bytes is too small to be %s", path, n, what);
    }
#if !defined(__wasm__)
    void *m = mmap(NULL, n, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED) return wgml_fail(err, WGML_ERR_IO, "%s: cannot map %zu bytes: %s", path, n, strerror(errno));
    *base = m;
    *kind = WGML_BYTES_MAPPED;
#else
    uint8_t *buf = wgml_malloc(n ? n : 1);
    if (!buf) {
        close(fd);
        return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "%s: out of memory reading %zu bytes", path, n);
    }
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r <= 0) break;
        got += (size_t)r;
    }
    close(fd);
    if (got != n) {
        wgml_free(buf);
        return wgml_fail(err, WGML_ERR_IO, "%s: short read", path);
    }
    *base = buf;
    *kind = WGML_BYTES_OWNED;
#endif
    *size = n;
    return WGML_OK;
}

void wgml_file_bytes_release(const uint8_t *base, size_t size, int kind) {
#if !defined(__wasm__)
    if (kind == WGML_BYTES_MAPPED && base) munmap((void *)base, size);
#else
    (void)size;
#endif
    if (kind == WGML_BYTES_OWNED) wgml_free((void *)base);
}

char *wgml_path_join(const char *dir, const char *name) {
    size_t dn = dir ? strlen(dir) : 0, nn = strlen(name);
    int slash = dn > 0 && dir[dn - 1] != '/';
    char *p = wgml_malloc(dn + (size_t)slash + nn + 1);
    if (!p) return NULL;
    if (dn) memcpy(p, dir, dn);
    if (slash) p[dn] = '/';
    memcpy(p + dn + (size_t)slash, name, nn + 1);
    return p;
}

wgml_status wgml_read_text_file(const char *dir, const char *name, size_t max_size, int optional, char **text,
                                size_t *len, wgml_error *err) {
    *text = NULL;
    if (len) *len = 0;
    char *path = wgml_path_join(dir, name);
    if (!path) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "%s: out of memory", name);
    wgml_status st = WGML_OK;
    char *buf = NULL;
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        if (!(optional && errno == ENOENT)) st = wgml_fail(err, WGML_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
        wgml_free(path);
        return st;
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        st = wgml_fail(err, WGML_ERR_IO, "%s: not a regular file", path);
        goto done;
    }
    if ((uint64_t)sb.st_size > (uint64_t)max_size) {
        st = wgml_fail(err, WGML_ERR_FORMAT, "%s: file of %llu bytes is over the limit of %zu bytes", path,
                       (unsigned long long)sb.st_size, max_size);
        goto done;
    }
    size_t n = (size_t)sb.st_size, got = 0;
    buf = wgml_malloc(n + 1);
    if (!buf) {
        st = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "%s: out of memory reading %zu bytes", path, n);
        goto done;
    }
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
    }
    if (got != n) {
        st = wgml_fail(err, WGML_ERR_IO, "%s: short read (%zu of %zu bytes)", path, got, n);
        goto done;
    }
    buf[n] = '\0';
    *text = buf;
    buf = NULL;
    if (len) *len = n;
done:
    close(fd);
    wgml_free(buf);
    wgml_free(path);
    return st;
}
