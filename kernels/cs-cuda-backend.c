/* cs-cuda-backend.c: the kernels module's entry point: device queries and the exported vtable.
 *
 * The module links the CUDA runtime, cuBLASLt and NVRTC only; the runtime finds the driver at
 * run time, so on a machine without one every entry reports CS_CUDA_ERROR_NO_DEVICE
 * (../shared/GPU.md, "Rules that keep the binaries portable").
 */
#include "cs-config.h"

#include "cs-cuda-private.h"

#include <string.h>
#include <nvrtc.h>

G_DEFINE_QUARK (cs-cuda-error-quark, cs_cuda_error)

/**
 * cs_cuda_env_uint:
 * @name: the environment variable (CASTSCOPE_STREAMS, ...)
 * @min: smallest accepted value
 * @max: largest accepted value
 * @fallback: the value when the variable is unset, empty or not accepted
 *
 * Reads a setting from the environment.  A value that is not a decimal number in [@min, @max]
 * ("four", "-1", "9" for 1..4) is not taken silently: the first time per variable the process
 * prints "castscope: NAME=VALUE ignored: not a whole number in MIN..MAX; using FALLBACK".
 * Returns: the setting
 */
guint64
cs_cuda_env_uint (const char *name, guint64 min, guint64 max, guint64 fallback)
{
  static GHashTable *warned;   /* variable names already reported (under the lock) */
  G_LOCK_DEFINE_STATIC (warned);
  const char *env = g_getenv (name);
  guint64 v;

  if (env == NULL || *env == '\0')
    return fallback;
  if (g_ascii_string_to_unsigned (env, 10, min, max, &v, NULL))
    return v;
  G_LOCK (warned);
  if (warned == NULL)
    warned = g_hash_table_new (g_str_hash, g_str_equal);
  if (g_hash_table_add (warned, (gpointer) name))
    g_printerr ("castscope: %s=%s ignored: not a whole number in %" G_GUINT64_FORMAT "..%"
                G_GUINT64_FORMAT "; using %" G_GUINT64_FORMAT "\n",
                name, env, min, max, fallback);
  G_UNLOCK (warned);
  return fallback;
}

/**
 * cs_cuda_init_device:
 *
 * Selects device 0 and reads its SM count and compute capability.
 * Errors: CS_CUDA_ERROR_NO_DEVICE when the runtime finds no driver or no device.
 */
gboolean
cs_cuda_init_device (int *n_sms, int *cc_major, int *cc_minor, GError **error)
{
  int count = 0;
  cudaError_t e = cudaGetDeviceCount (&count);
  gboolean ok = FALSE;

  if (e != cudaSuccess || count < 1)
    {
      int driver = 0, runtime = 0;
      g_autofree char *why = NULL;

      /* cudaDriverGetVersion gives 0 when no driver is installed; the runtime then reports
       * "driver version is insufficient", which reads as if a driver were there */
      cudaDriverGetVersion (&driver);
      cudaRuntimeGetVersion (&runtime);
      if (e == cudaErrorInsufficientDriver && driver == 0)
        why = g_strdup ("no NVIDIA driver is installed on this machine");
      else if (e == cudaErrorInsufficientDriver)
        why = g_strdup_printf ("the NVIDIA driver (CUDA %d.%d) is older than the CUDA runtime "
                               "castscope was built with (%d.%d): update the driver",
                               driver / 1000, driver % 1000 / 10, runtime / 1000,
                               runtime % 1000 / 10);
      else if (e == cudaErrorNoDevice || e == cudaSuccess)
        why = g_strdup ("the NVIDIA driver finds no GPU");
      else
        why = g_strdup_printf ("%s (%s)", cudaGetErrorString (e), cudaGetErrorName (e));
      g_set_error (error, CS_CUDA_ERROR, CS_CUDA_ERROR_NO_DEVICE,
                   "no CUDA device: %s", why);
      cudaGetLastError ();
      return FALSE;
    }
  CS_CU_CHECK (cudaSetDevice (0), error);
  CS_CU_CHECK (cudaDeviceGetAttribute (n_sms, cudaDevAttrMultiProcessorCount, 0), error);
  CS_CU_CHECK (cudaDeviceGetAttribute (cc_major, cudaDevAttrComputeCapabilityMajor, 0), error);
  CS_CU_CHECK (cudaDeviceGetAttribute (cc_minor, cudaDevAttrComputeCapabilityMinor, 0), error);
  ok = TRUE;
out:
  return ok;
}

/** cs_cuda_device_name: see cs-cuda-private.h. */
char *
cs_cuda_device_name (int device)
{
  typedef int (*GetName) (char *name, int len, int dev);   /* cuDeviceGetName (CUresult) */
  GetName get_name = NULL;
  enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
  char name[256] = "";
  struct cudaDeviceProp prop;

  if (cudaGetDriverEntryPointByVersion ("cuDeviceGetName", (void **) &get_name, 12000, cudaEnableDefault, &q)
        == cudaSuccess
      && q == cudaDriverEntryPointSuccess && get_name != NULL && get_name (name, sizeof name, device) == 0
      && name[0] != '\0')
    return g_strdup (name);
  cudaGetLastError ();
  if (cudaGetDeviceProperties (&prop, device) == cudaSuccess)
    return g_strndup (prop.name, sizeof prop.name);
  cudaGetLastError ();
  return g_strdup ("?");
}

static gboolean
device_info (CsCudaDeviceInfo *info, GError **error)
{
  struct cudaDeviceProp prop;
  gboolean ok = FALSE;

  memset (info, 0, sizeof *info);
  if (!cs_cuda_init_device (&info->n_sms, &info->cc_major, &info->cc_minor, error))
    return FALSE;
  CS_CU_CHECK (cudaGetDeviceProperties (&prop, 0), error);
  g_strlcpy (info->name, prop.name, sizeof info->name);
  info->mem_bytes = prop.totalGlobalMem;
  cudaRuntimeGetVersion (&info->runtime_version);
  cudaDriverGetVersion (&info->driver_version);
  nvrtcVersion (&info->nvrtc_major, &info->nvrtc_minor);
  info->cublaslt_version = cublasLtGetVersion ();
  ok = TRUE;
out:
  return ok;
}

static guint
n_inputs (CsCudaProgram *p)
{
  return p->inputs->len;
}

static const CsCudaTensorInfo *
input (CsCudaProgram *p, guint i)
{
  return i < p->inputs->len ? &g_array_index (p->inputs, CsCudaTensorInfo, i) : NULL;
}

static guint
n_outputs (CsCudaProgram *p)
{
  return p->outputs->len;
}

static const CsCudaTensorInfo *
output (CsCudaProgram *p, guint i)
{
  return i < p->outputs->len ? &g_array_index (p->outputs, CsCudaTensorInfo, i) : NULL;
}

static const char *
source (CsCudaProgram *p)
{
  return p->full_source ? p->full_source : "";
}

/* The vtable's start_up: cuBLASLt's start-up on device 0 (the device cs_cuda_init_device
 * selects), on its own thread. */
static void
start_up (void)
{
  int count = 0;

  if (cudaGetDeviceCount (&count) == cudaSuccess && count > 0)
    cs_cuda_lt_startup_begin (0);
  cudaGetLastError ();
}

static const CsCudaBackend backend = {
  .abi = CS_CUDA_BACKEND_ABI,
  .device_info = device_info,
  .program_new = cs_cuda_program_build,
  .program_free = cs_cuda_program_free,
  .program_n_inputs = n_inputs,
  .program_input = input,
  .program_n_outputs = n_outputs,
  .program_output = output,
  .program_set_input = cs_cuda_program_set_input,
  .program_run = cs_cuda_program_run,
  .program_get_output = cs_cuda_program_get_output,
  .program_time = cs_cuda_program_time,
  .program_source = source,
  .program_new_f64 = cs_cuda_program_build_f64,
  .start_up = start_up,
};

const CsCudaBackend *
cs_cuda_backend_get (void)
{
  return &backend;
}
