/*
 * api_internal.h - what tests and the CLI's diagnostics may reach behind the
 * public API (never installed, not part of the stable interface).
 */
#ifndef WGML_API_INTERNAL_H
#define WGML_API_INTERNAL_H

#include "backend/backend.h"
#include "wgml.h"

/* The backend a model runs on. */
wgml_backend *wgml_model_backend(const wgml_model *model);

#endif
