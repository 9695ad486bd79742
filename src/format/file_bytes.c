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
