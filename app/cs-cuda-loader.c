/* cs-cuda-loader.c: GModule loader for the kernels module (see cs-cuda-loader.h). */
#include "cs-config.h"

#include "cs-cuda-loader.h"

#include <gmodule.h>

#ifndef CS_KERNELS_BUILD_DIR
#define CS_KERNELS_BUILD_DIR ""
#endif

/* The module's own copy defines the same quark string, so errors compare equal. */
G_DEFINE_QUARK (cs-cuda-error-quark, cs_cuda_error)

static const CsCudaBackend *loaded;

const CsCudaBackend *
cs_cuda_loader_get (GError **error)
{
  const char *dirs[3];
  g_autoptr(GString) tried = g_string_new ("");
  guint n = 0;

  if (loaded)
    return loaded;
  if (!g_module_supported ())
    {
      g_set_error (error, CS_CUDA_ERROR, CS_CUDA_ERROR_NO_DEVICE, "no CUDA executor: modules are not supported here");
      return NULL;
    }
  if (g_getenv ("CASTSCOPE_KERNELS_DIR"))
    dirs[n++] = g_getenv ("CASTSCOPE_KERNELS_DIR");
  if (CS_KERNELS_BUILD_DIR[0])
    dirs[n++] = CS_KERNELS_BUILD_DIR;
  dirs[n++] = CS_KERNELS_MODULE_DIR;

  for (guint i = 0; i < n; i++)
    {
      g_autofree char *path = g_module_build_path (dirs[i], "cscuda");
      GModule *mod;
      CsCudaBackendGetFunc get = NULL;
      const CsCudaBackend *b;

      if (!g_file_test (path, G_FILE_TEST_EXISTS))
        {
          g_string_append_printf (tried, "%s%s (absent)", tried->len ? ", " : "", path);
          continue;
        }
      mod = g_module_open (path, G_MODULE_BIND_LOCAL);
      if (mod == NULL)
        {
          g_string_append_printf (tried, "%s%s (%s)", tried->len ? ", " : "", path, g_module_error ());
          continue;
        }
      if (!g_module_symbol (mod, CS_CUDA_BACKEND_SYMBOL, (gpointer *) &get) || get == NULL)
        {
          g_string_append_printf (tried, "%s%s (no %s)", tried->len ? ", " : "", path, CS_CUDA_BACKEND_SYMBOL);
          g_module_close (mod);
          continue;
        }
      b = get ();
      if (b == NULL || b->abi != CS_CUDA_BACKEND_ABI)
        {
          g_string_append_printf (tried, "%s%s (ABI %u, want %u)", tried->len ? ", " : "", path,
                                  b ? b->abi : 0, CS_CUDA_BACKEND_ABI);
          g_module_close (mod);
          continue;
        }
      g_module_make_resident (mod);
      loaded = b;
      return loaded;
    }
  g_set_error (error, CS_CUDA_ERROR, CS_CUDA_ERROR_NO_DEVICE,
               "no CUDA executor module (castscope built without CUDA, or not installed): tried %s",
               tried->str);
  return NULL;
}
