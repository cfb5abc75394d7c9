/* cs-cuda-loader.h: finds and opens the CUDA executor module (kernels/) at run time.
 *
 * Used by castscope-cli and the GUI, so that neither links CUDA and both start on machines
 * without the NVIDIA driver (../shared/GPU.md).  Search order: $CASTSCOPE_KERNELS_DIR, the
 * build tree's kernels/ folder, then CS_KERNELS_MODULE_DIR (the install dir).
 */
#pragma once

#include <glib.h>

#include "cs-cuda.h"

G_BEGIN_DECLS

/**
 * cs_cuda_loader_get:
 * @error: return location for a #CS_CUDA_ERROR (CS_CUDA_ERROR_NO_DEVICE when the module is
 *   missing or of another ABI; the message lists the folders searched)
 *
 * Opens libcscuda once per process (kept resident) and returns its vtable.
 * Returns: (transfer none) (nullable): the backend, or NULL with @error set
 */
const CsCudaBackend *cs_cuda_loader_get (GError **error);

G_END_DECLS
