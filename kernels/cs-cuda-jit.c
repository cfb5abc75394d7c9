/* cs-cuda-jit.c: NVRTC -> CUBIN for the device's own architecture, with an on-disk cache.
 *
 * Rules from ../shared/GPU.md and reference/gpu-executor.md section 3: a self-contained
 * preamble (NVRTC 13.0 has no cuda_bf16.h), CUBIN never PTX, a disk cache keyed by SHA-256 of
 * (source, options, NVRTC version, arch); files are written to a temporary name and renamed, so
 * concurrent processes and threads never see a torn file.  A program's unique kernels are split
 * into a few NVRTC programs of about equal source size, compiled at the same time on a
 * GThreadPool (NVRTC compiles separate programs concurrently); each is cached on its own.
 */
#include "cs-config.h"

#include "cs-cuda-private.h"

#include <string.h>
#include <nvrtc.h>
#include <glib/gstdio.h>
#include <unistd.h>

/* The preamble: bf16/f16 as 16-bit payloads with hardware round-to-nearest-even conversions
 * (cvt.rn.bf16.f32 on sm_80+; cs_bfbits stores a value already rounded to bf16 by its upper
 * half, no second conversion), NaN-propagating min/max as torch.maximum, Python's remainder
 * (the sign of the divisor) as torch.remainder, warp reductions, and the warp's tensor-core
 * multiply-accumulate cs_mma_{bf16,f16}_16816 (d[4] += A b, PTX mma.sync.aligned.m16n8k16.row.col
 * with f32 accumulators: the fragments of the PTX ISA's m16n8k16 layout, a[4] and b[2] two
 * 16-bit elements a register, the lower index in the low half), and the warp's shared-memory
 * fragment loads cs_ldm_x4 / cs_ldm_x4_t (PTX ldmatrix.sync.aligned.m8n8.x4{,.trans}.shared.b16:
 * lane l gives the 16-byte-aligned address of row l % 8 of 8 x 8 matrix l / 8; register j of
 * lane l gets elements (l / 4, 2 (l % 4) + {0, 1}) of matrix j, with .trans (2 (l % 4) + {0, 1},
 * l / 4); r[4] of 16-bit pairs, the lower element in the low half), and the thread's
 * asynchronous 16-byte global-to-shared copies cs_cp_async16 (cp.async.cg.shared.global, both
 * addresses 16-byte aligned), cs_cp_async_commit (commit_group) and cs_cp_async_wait0
 * (wait_group 0: the thread's copies done; a barrier then shows them to the block). */
static const char preamble[] =
  "// castscope generated kernels: self-contained preamble (no CUDA headers)\n"
  "typedef unsigned short cs_bf16_t;\n"
  "typedef unsigned short cs_f16_t;\n"
  "static __device__ __forceinline__ float cs_bf2f (cs_bf16_t h)\n"
  "{ return __uint_as_float (((unsigned int) h) << 16); }\n"
  "static __device__ __forceinline__ cs_bf16_t cs_f2bf (float f)\n"
  "{ cs_bf16_t r; asm (\"cvt.rn.bf16.f32 %0, %1;\" : \"=h\"(r) : \"f\"(f)); return r; }\n"
  "static __device__ __forceinline__ float cs_h2f (cs_f16_t h)\n"
  "{ float f; asm (\"cvt.f32.f16 %0, %1;\" : \"=f\"(f) : \"h\"(h)); return f; }\n"
  "static __device__ __forceinline__ cs_f16_t cs_f2h (float f)\n"
  "{ cs_f16_t r; asm (\"cvt.rn.f16.f32 %0, %1;\" : \"=h\"(r) : \"f\"(f)); return r; }\n"
  "static __device__ __forceinline__ float cs_rbf (float f) { return cs_bf2f (cs_f2bf (f)); }\n"
  "static __device__ __forceinline__ cs_bf16_t cs_bfbits (float f)\n"
  "{ return (cs_bf16_t) (__float_as_uint (f) >> 16); }\n"
  "static __device__ __forceinline__ float cs_rh (float f) { return cs_h2f (cs_f2h (f)); }\n"
  "static __device__ __forceinline__ float cs_maxf (float a, float b)\n"
  "{ return (a != a || a > b) ? a : b; }\n"
  "static __device__ __forceinline__ float cs_minf (float a, float b)\n"
  "{ return (a != a || a < b) ? a : b; }\n"
  "static __device__ __forceinline__ double cs_maxd (double a, double b)\n"
  "{ return (a != a || a > b) ? a : b; }\n"
  "static __device__ __forceinline__ double cs_mind (double a, double b)\n"
  "{ return (a != a || a < b) ? a : b; }\n"
  "static __device__ __forceinline__ float cs_signf (float a)\n"
  "{ return a > 0.0f ? 1.0f : (a < 0.0f ? -1.0f : a); }\n"
  "static __device__ __forceinline__ double cs_signd (double a)\n"
  "{ return a > 0.0 ? 1.0 : (a < 0.0 ? -1.0 : a); }\n"
  "static __device__ __forceinline__ float cs_remf (float a, float b)\n"
  "{ float r = fmodf (a, b); if (r != 0 && ((r < 0) != (b < 0))) r += b; return r; }\n"
  "static __device__ __forceinline__ double cs_remd (double a, double b)\n"
  "{ double r = fmod (a, b); if (r != 0 && ((r < 0) != (b < 0))) r += b; return r; }\n"
  "static __device__ __forceinline__ float cs_shfl (float v, int m)\n"
  "{ return __shfl_xor_sync (0xffffffffu, v, m); }\n"
  "static __device__ __forceinline__ double cs_shfl (double v, int m)\n"
  "{ return __shfl_xor_sync (0xffffffffu, v, m); }\n"
  "static __device__ __forceinline__ void cs_mma_bf16_16816 (float *d, const unsigned *a, const unsigned *b)\n"
  "{ asm volatile (\"mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\"\n"
  "    : \"+f\"(d[0]), \"+f\"(d[1]), \"+f\"(d[2]), \"+f\"(d[3]) : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"r\"(b[0]), \"r\"(b[1])); }\n"
  "static __device__ __forceinline__ void cs_mma_f16_16816 (float *d, const unsigned *a, const unsigned *b)\n"
  "{ asm volatile (\"mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\"\n"
  "    : \"+f\"(d[0]), \"+f\"(d[1]), \"+f\"(d[2]), \"+f\"(d[3]) : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"r\"(b[0]), \"r\"(b[1])); }\n"
  "static __device__ __forceinline__ unsigned cs_smem_addr (const void *p)\n"
  "{ unsigned s; asm (\"{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }\" : \"=r\"(s) : \"l\"(p)); return s; }\n"
  "static __device__ __forceinline__ void cs_ldm_x4 (unsigned *r, const void *p)\n"
  "{ asm volatile (\"ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\"\n"
  "    : \"=r\"(r[0]), \"=r\"(r[1]), \"=r\"(r[2]), \"=r\"(r[3]) : \"r\"(cs_smem_addr (p)) : \"memory\"); }\n"
  "static __device__ __forceinline__ void cs_ldm_x4_t (unsigned *r, const void *p)\n"
  "{ asm volatile (\"ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\"\n"
  "    : \"=r\"(r[0]), \"=r\"(r[1]), \"=r\"(r[2]), \"=r\"(r[3]) : \"r\"(cs_smem_addr (p)) : \"memory\"); }\n"
  "static __device__ __forceinline__ void cs_cp_async16 (void *s, const void *g)\n"
  "{ asm volatile (\"cp.async.cg.shared.global [%0], [%1], 16;\" :: \"r\"(cs_smem_addr (s)), \"l\"(g) : \"memory\"); }\n"
  "static __device__ __forceinline__ void cs_cp_async_commit (void)\n"
  "{ asm volatile (\"cp.async.commit_group;\" ::: \"memory\"); }\n"
  "static __device__ __forceinline__ void cs_cp_async_wait0 (void)\n"
  "{ asm volatile (\"cp.async.wait_group 0;\" ::: \"memory\"); }\n";

const char *
cs_cuda_jit_preamble (void)
{
  return preamble;
}

/**
 * cs_cuda_jit_cache_dir:
 *
 * The executor's disk cache: $CASTSCOPE_CACHE_DIR, else ~/.cache/castscope/kernels.  Holds the
 * CUBINs (cs_cuda_jit_compile) and the tuned cuBLASLt algorithms (cs-cuda-blas.c).
 * Returns: (transfer full): the directory, which may not exist yet
 */
char *
cs_cuda_jit_cache_dir (void)
{
  const char *env = g_getenv ("CASTSCOPE_CACHE_DIR");

  if (env != NULL && env[0] != '\0')
    return g_strdup (env);
  return g_build_filename (g_get_user_cache_dir (), "castscope", "kernels", NULL);
}

/**
 * cs_cuda_jit_compile:
 * @source: kernels without the preamble
 * @cc_major: target compute capability (sm_<major><minor>)
 * @cubin: (out) (transfer full): the CUBIN
 * @cache_hit: (out) (optional): TRUE when it came from the disk cache
 *
 * Compiles preamble + @source with NVRTC straight to CUBIN (`--gpu-architecture=sm_XY`,
 * `-std=c++17`, `-DNDEBUG`, no fast math).  Needs no device, so the CPU machines can check the
 * generated code.  Cache: $CASTSCOPE_CACHE_DIR or ~/.cache/castscope/kernels, file name
 * `<sha256>.cubin`; CASTSCOPE_NO_CACHE=1 bypasses it.
 * Errors: CS_CUDA_ERROR_NVRTC with the compile log.
 * Returns: TRUE on success
 */
gboolean
cs_cuda_jit_compile (const char *source, int cc_major, int cc_minor, GBytes **cubin,
                     gboolean *cache_hit, GError **error)
{
  g_autofree char *arch = g_strdup_printf ("--gpu-architecture=sm_%d%d", cc_major, cc_minor);
  const char *opts[] = { arch, "-std=c++17", "-DNDEBUG", "--fmad=true", "-default-device" };
  g_autoptr(GString) full = g_string_new (preamble);
  g_autoptr(GChecksum) sum = g_checksum_new (G_CHECKSUM_SHA256);
  g_autofree char *dir = cs_cuda_jit_cache_dir ();
  g_autofree char *path = NULL;
  gboolean use_cache = g_strcmp0 (g_getenv ("CASTSCOPE_NO_CACHE"), "1") != 0;
  nvrtcProgram prog = NULL;
  nvrtcResult rc;
  int vmaj = 0, vmin = 0;
  char *bin = NULL;
  size_t bin_size = 0;
  gboolean ok = FALSE;

  if (cache_hit)
    *cache_hit = FALSE;
  g_string_append (full, source);
  nvrtcVersion (&vmaj, &vmin);
  g_checksum_update (sum, (const guchar *) full->str, full->len);
  for (gsize i = 0; i < G_N_ELEMENTS (opts); i++)
    g_checksum_update (sum, (const guchar *) opts[i], -1);
  {
    g_autofree char *ver = g_strdup_printf ("nvrtc %d.%d sm_%d%d", vmaj, vmin, cc_major, cc_minor);
    g_checksum_update (sum, (const guchar *) ver, -1);
  }
  path = g_strdup_printf ("%s/%s.cubin", dir, g_checksum_get_string (sum));

  if (use_cache)
    {
      char *data = NULL;
      gsize len = 0;

      if (g_file_get_contents (path, &data, &len, NULL) && len > 0)
        {
          *cubin = g_bytes_new_take (data, len);
          if (cache_hit)
            *cache_hit = TRUE;
          return TRUE;
        }
      g_free (data);
    }

  rc = nvrtcCreateProgram (&prog, full->str, "castscope_kernels.cu", 0, NULL, NULL);
  if (rc != NVRTC_SUCCESS)
    {
      g_set_error (error, CS_CUDA_ERROR, CS_CUDA_ERROR_NVRTC, "nvrtcCreateProgram failed: %s",
                   nvrtcGetErrorString (rc));
      return FALSE;
    }
  rc = nvrtcCompileProgram (prog, G_N_ELEMENTS (opts), opts);
  if (rc != NVRTC_SUCCESS)
    {
      size_t log_size = 0;
      g_autofree char *log = NULL;

      nvrtcGetProgramLogSize (prog, &log_size);
      log = g_malloc0 (log_size + 1);
      nvrtcGetProgramLog (prog, log);
      g_set_error (error, CS_CUDA_ERROR, CS_CUDA_ERROR_NVRTC,
                   "NVRTC %d.%d failed to compile the generated kernels (%s): %s", vmaj, vmin,
                   nvrtcGetErrorString (rc), log);
      goto out;
    }
  if (nvrtcGetCUBINSize (prog, &bin_size) != NVRTC_SUCCESS || bin_size == 0)
    {
      g_set_error (error, CS_CUDA_ERROR, CS_CUDA_ERROR_NVRTC, "NVRTC produced no CUBIN for %s", arch);
      goto out;
    }
  bin = g_malloc (bin_size);
  nvrtcGetCUBIN (prog, bin);
  *cubin = g_bytes_new_take (bin, bin_size);

  if (use_cache && g_mkdir_with_parents (dir, 0755) == 0)
    {
      g_autofree char *tmp = g_strdup_printf ("%s.tmp.%d.%p", path, (int) getpid (), (void *) g_thread_self ());

      /* A failed cache write is not an error: the next run compiles again. */
      if (g_file_set_contents (tmp, g_bytes_get_data (*cubin, NULL), bin_size, NULL))
        {
          if (g_rename (tmp, path) != 0)
            g_unlink (tmp);
        }
    }
  ok = TRUE;

out:
  nvrtcDestroyProgram (&prog);
  return ok;
}

/**
 * cs_cuda_jit_n_programs:
 * @n_kernels: unique kernels to compile
 *
 * How many NVRTC programs cs_cuda_jit_compile_kernels() splits @n_kernels into by default: one
 * per processor (g_get_num_processors), at most one per kernel.  $CASTSCOPE_JIT_PROGRAMS=N sets
 * N instead (1: one program for the whole step).
 * Returns: a number in [1, max(@n_kernels, 1)]
 */
guint
cs_cuda_jit_n_programs (guint n_kernels)
{
  guint n = (guint) cs_cuda_env_uint ("CASTSCOPE_JIT_PROGRAMS", 1, 4096, g_get_num_processors ());

  return CLAMP (n, 1, MAX (n_kernels, 1));
}

typedef struct
{
  const char *source;    /* the program's kernels, without the preamble */
  int         cc_major, cc_minor; /* target: sm_<major><minor> */
  GBytes     *cubin;     /* out */
  gboolean    hit;       /* out: from the disk cache */
  GError     *error;     /* out */
} JitJob;

static void
jit_job_run (gpointer data, gpointer user_data)
{
  JitJob *j = data;

  (void) user_data;
  cs_cuda_jit_compile (j->source, j->cc_major, j->cc_minor, &j->cubin, &j->hit, &j->error);
}

typedef struct { guint index; gsize len; } KernelLen;

static gint
by_len_desc (gconstpointer a, gconstpointer b)
{
  const KernelLen *x = a, *y = b;

  if (x->len != y->len)
    return x->len < y->len ? 1 : -1;
  return x->index < y->index ? -1 : x->index > y->index ? 1 : 0;
}

/**
 * cs_cuda_jit_compile_kernels:
 * @kernels: element-type CsCudaKernel*: the program's unique kernels; their `library` fields
 *   are set to the NVRTC program each lands in
 * @n_programs: how many NVRTC programs to split them into (clamped to [1, kernels->len])
 * @cubins: (out) (transfer full): element-type GBytes, one CUBIN per program
 * @cache_hits: (out) (optional): programs served from the disk cache
 *
 * Splits @kernels into @n_programs NVRTC programs of about equal source size (the longest
 * kernel first onto the program with the least source so far; a program holds its kernels in
 * index order, so the same kernels give the same programs and the same cache files) and
 * compiles them at the same time with cs_cuda_jit_compile() on a thread pool of one thread per
 * processor, at most one per program.  Needs no device.
 * Errors: the first program's CS_CUDA_ERROR_NVRTC that failed, with its compile log.
 * Returns: TRUE when every program compiled
 */
gboolean
cs_cuda_jit_compile_kernels (GPtrArray *kernels, guint n_programs, int cc_major, int cc_minor,
                             GPtrArray **cubins, guint *cache_hits, GError **error)
{
  guint n = kernels->len;
  g_autoptr(GArray) order = g_array_sized_new (FALSE, FALSE, sizeof (KernelLen), n);
  g_autofree gsize *load = NULL;
  g_autofree JitJob *jobs = NULL;
  GString **src = NULL;
  GThreadPool *pool = NULL;
  guint threads, hits = 0;
  gboolean ok = TRUE;

  *cubins = g_ptr_array_new_with_free_func ((GDestroyNotify) g_bytes_unref);
  if (cache_hits)
    *cache_hits = 0;
  if (n == 0)
    return TRUE;
  n_programs = CLAMP (n_programs, 1, n);
  load = g_new0 (gsize, n_programs);
  for (guint i = 0; i < n; i++)
    {
      KernelLen kl = { i, strlen (((CsCudaKernel *) g_ptr_array_index (kernels, i))->source) };

      g_array_append_val (order, kl);
    }
  g_array_sort (order, by_len_desc);
  for (guint i = 0; i < n; i++)
    {
      KernelLen *kl = &g_array_index (order, KernelLen, i);
      guint best = 0;

      for (guint b = 1; b < n_programs; b++)
        if (load[b] < load[best])
          best = b;
      load[best] += kl->len;
      ((CsCudaKernel *) g_ptr_array_index (kernels, kl->index))->library = best;
    }
  src = g_new0 (GString *, n_programs);
  for (guint b = 0; b < n_programs; b++)
    src[b] = g_string_sized_new (load[b] + 1);
  for (guint i = 0; i < n; i++)
    {
      CsCudaKernel *k = g_ptr_array_index (kernels, i);

      g_string_append (src[k->library], k->source);
    }

  jobs = g_new0 (JitJob, n_programs);
  threads = MIN (n_programs, MAX (g_get_num_processors (), 1));
  if (threads > 1)
    pool = g_thread_pool_new (jit_job_run, NULL, (gint) threads, FALSE, NULL);
  for (guint b = 0; b < n_programs; b++)
    {
      jobs[b].source = src[b]->str;
      jobs[b].cc_major = cc_major;
      jobs[b].cc_minor = cc_minor;
      if (pool == NULL || !g_thread_pool_push (pool, &jobs[b], NULL))
        jit_job_run (&jobs[b], NULL);
    }
  if (pool)
    g_thread_pool_free (pool, FALSE, TRUE);   /* waits for every job */
  for (guint b = 0; b < n_programs; b++)
    {
      if (jobs[b].error != NULL)
        {
          if (ok)
            g_propagate_error (error, g_steal_pointer (&jobs[b].error));
          g_clear_error (&jobs[b].error);
          ok = FALSE;
        }
      hits += jobs[b].hit;
      if (jobs[b].cubin)
        g_ptr_array_add (*cubins, jobs[b].cubin);
      g_string_free (src[b], TRUE);
    }
  g_free (src);
  if (!ok)
    g_clear_pointer (cubins, g_ptr_array_unref);
  if (cache_hits)
    *cache_hits = hits;
  return ok;
}

/**
 * cs_cuda_jit_load:
 * @cubin: a CUBIN from cs_cuda_jit_compile() or cs_cuda_jit_compile_kernels()
 * @library: (out): a cudaLibrary_t holding every kernel of @cubin
 *
 * cudaLibraryLoadData (runtime API: no driver symbol is linked).
 * Errors: CS_CUDA_ERROR_RUNTIME when loading fails.
 */
gboolean
cs_cuda_jit_load (GBytes *cubin, void **library, GError **error)
{
  cudaLibrary_t lib = NULL;
  gboolean ok = FALSE;

  CS_CU_CHECK (cudaLibraryLoadData (&lib, g_bytes_get_data (cubin, NULL), NULL, NULL, 0, NULL, NULL, 0),
               error);
  *library = lib;
  ok = TRUE;
out:
  return ok;
}
