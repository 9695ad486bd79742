/*
 * cache_dir.c - the directory of wgml's caches (cache_dir.h).
 */
#include "core/cache_dir.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "core/alloc.h"

int wgml_cache_dir(char *out, size_t cap) {
    const char *dir = getenv("WGML_CACHE_DIR");
    int n = -1;
    if (dir && *dir) {
        if (strcasecmp(dir, "off") == 0) return 0;
        n = snprintf(out, cap, "%s", dir);
    } else {
        const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
        if (xdg && xdg[0] == '/') /* the XDG spec: a relative value is to be ignored */
            n = snprintf(out, cap, "%s/wgml/pipelines", xdg);
        else if (home && *home)
            n = snprintf(out, cap, "%s/.cache/wgml/pipelines", home);
    }
    return n > 0 && (size_t)n < cap;
}

int wgml_make_dirs(const char *path) {
    char *p = wgml_strdup(path);
    if (!p) return -1;
    for (char *s = p + 1; *s; s++) {
        if (*s != '/') continue;
        *s = '\0';
        if (mkdir(p, 0700) != 0 && errno != EEXIST) {
            wgml_free(p);
            return -1;
        }
        *s = '/';
    }
    int rc = mkdir(p, 0700) == 0 || errno == EEXIST ? 0 : -1;
    struct stat st;
    if (rc == 0 && (stat(p, &st) != 0 || !S_ISDIR(st.st_mode))) rc = -1;
    wgml_free(p);
    return rc;
}
