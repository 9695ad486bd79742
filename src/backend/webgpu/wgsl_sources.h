/*
 * wgsl_sources.h - the WGSL kernels, embedded at build time.
 *
 * Every src/backend/webgpu/kernels/NAME.wgsl is compiled into the library by
 * cmake/embed_wgsl.cmake (the file generated/wgsl_sources.c in the build
 * folder); NAME is the file name without ".wgsl".
 */
#ifndef WGML_BACKEND_WEBGPU_WGSL_SOURCES_H
#define WGML_BACKEND_WEBGPU_WGSL_SOURCES_H

/* The source of kernel `name`, or NULL if there is none. */
const char *wgml_wgsl_source(const char *name);

/* The number of kernels and the name of the i-th (sorted by name), for tests and tools. */
int wgml_wgsl_count(void);
const char *wgml_wgsl_name(int i);

#endif
