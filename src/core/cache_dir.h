/*
 * cache_dir.h - the directory wgml keeps its caches in (compiled GPU
 * pipelines, the CPU's measured kernel choices):
 *
 *   $WGML_CACHE_DIR if set ("off" disables every cache),
 *   else $XDG_CACHE_HOME/wgml/pipelines (an absolute XDG_CACHE_HOME),
 *   else $HOME/.cache/wgml/pipelines.
 *
 * (One folder for both, so that WGML_CACHE_DIR moves or turns off all of
 * them; the name is the pipeline cache's, which came first.)
 */
#ifndef WGML_CORE_CACHE_DIR_H
#define WGML_CORE_CACHE_DIR_H

#include <stddef.h>

/* The directory into out (NUL-terminated). Returns 0 when caching is off:
 * WGML_CACHE_DIR=off, or none of the variables, or a path that does not fit cap. */
int wgml_cache_dir(char *out, size_t cap);

/* mkdir -p with mode 0700 for what it creates; 0 when path is a directory at the end. */
int wgml_make_dirs(const char *path);

#endif
