/* bench-compile.c: the GPU executor's build time without a GPU (a benchmark, not a test).
 *
 *   bench-compile [LAYERS...]          default: 8 32
 *   CASTSCOPE_JIT_PROGRAMS=N bench-compile 8    NVRTC programs to split the kernels into
 *   BENCH_SPLITS="1 2 4 8" bench-compile 8      also a cold compile for each split
 *   bench-compile --emit 32 > llama32.txt        writes the 32-layer initial trace and exits
 *
 * For each depth, the LLaMA stack of ../shared/traces/thunder_llama_stack_initial.txt
 * ($CS_SHARED_TRACES), made deeper by tests/test-llama-layers.h beyond 8 layers, goes through
 * the pipeline (default policy); then the executor builds it as a device build would, minus
 * the device: steps, memory plan, generated source (best of 3 "generate" runs), and the NVRTC
 * compile for sm_90 into an empty disk cache ("cold") and again from that cache ("warm"); and
 * three dry builds with the whole-plan cache (kernels/cs-cuda-plan.c): the first generates and
 * writes the plan ("plan-cold"), the next read it ("plan-warm").
 * Printed: kernel steps, unique kernels, NVRTC programs, milliseconds (wall) and the process's
 * CPU milliseconds (every thread).  NVRTC needs no device, so this runs on the CPU machines;
 * a device build adds cudaLibraryLoadData per program and the cuBLASLt plans.
 *
 * The same file builds against the executor before kernel deduplication (one NVRTC program of
 * every step's kernel, cs_cuda_jit_compile on the whole source): CS_CUDA_BUILD_FULL_API tells
 * the two apart.
 */
#include "cs-config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <glib/gstdio.h>

#include "cs-cuda-private.h"
#include "test-llama-layers.h"
#include "test-trace-step.h"

static double
cpu_ms (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double) ts.tv_sec * 1e3 + (double) ts.tv_nsec / 1e6;
}

static double
wall_ms (void)
{
  return (double) g_get_monotonic_time () / 1e3;
}

typedef struct
{
  guint  steps;      /* kernel steps */
  guint  kernels;    /* kernels in the NVRTC source */
  guint  programs;   /* NVRTC programs */
  guint  hits;       /* programs from the disk cache */
  double wall, cpu;  /* ms */
} Result;

/* One build with the NVRTC compile. */
static gboolean
build_once (CsTrace *fwd, CsTrace *bwd, const CsPolicy *policy, Result *r, GError **error)
{
  double w0 = wall_ms (), c0 = cpu_ms ();
  CsCudaProgram *p;

  memset (r, 0, sizeof *r);
#ifdef CS_CUDA_BUILD_FULL_API
  p = cs_cuda_program_build_full (fwd, bwd, policy, CS_CUDA_BUILD_DRY | CS_CUDA_BUILD_COMPILE, error);
  if (p == NULL)
    return FALSE;
  r->programs = p->cubins ? p->cubins->len : 0;
  r->hits = p->cache_hits;
#else
  {
    g_autoptr(GBytes) cubin = NULL;
    gboolean hit = FALSE;

    p = cs_cuda_program_generate (fwd, bwd, policy, error);
    if (p == NULL)
      return FALSE;
    if (!cs_cuda_jit_compile (p->source->str, 9, 0, &cubin, &hit, error))
      {
        cs_cuda_program_free (p);
        return FALSE;
      }
    r->programs = 1;
    r->hits = hit;
  }
#endif
  r->wall = wall_ms () - w0;
  r->cpu = cpu_ms () - c0;
  r->kernels = p->n_kernels;
  for (guint i = 0; i < p->steps->len; i++)
    r->steps += ((CsCudaStep *) g_ptr_array_index (p->steps, i))->kind == CS_CUDA_STEP_KERNEL;
  cs_cuda_program_free (p);
  return TRUE;
}

static double
generate_best (CsTrace *fwd, CsTrace *bwd, const CsPolicy *policy)
{
  double best = G_MAXDOUBLE;

  for (guint i = 0; i < 3; i++)
    {
      double w0 = wall_ms ();
      CsCudaProgram *p = cs_cuda_program_generate (fwd, bwd, policy, NULL);

      g_assert (p != NULL);
      best = MIN (best, wall_ms () - w0);
      cs_cuda_program_free (p);
    }
  return best;
}

static void
report (const char *what, guint layers, const Result *r)
{
  printf ("%-8s layers=%-3u kernel_steps=%-5u unique_kernels=%-5u nvrtc_programs=%-3u cache_hits=%-3u "
          "wall_ms=%9.1f cpu_ms=%9.1f\n", what, layers, r->steps, r->kernels, r->programs, r->hits,
          r->wall, r->cpu);
  fflush (stdout);
}

static int
bench_depth (const char *text, guint layers)
{
  g_autofree char *src = layers == 8 ? g_strdup (text) : llama_stack_layers (text, layers);
  g_autoptr(CsPipeline) pl = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *tmpl = NULL;
  CsPolicy policy;
  CsTrace *fwd, *bwd;
  Result r;
  double w0;
  const char *splits = g_getenv ("BENCH_SPLITS");

  if (src == NULL)
    {
      fprintf (stderr, "bench-compile: cannot make %u layers from the trace\n", layers);
      return 1;
    }
  w0 = wall_ms ();
  cs_policy_init_default (&policy);
  pl = trace_step_pipeline (src, -1, "llama", &policy, &error);
  if (pl == NULL)
    {
      fprintf (stderr, "bench-compile: %s\n", error->message);
      return 1;
    }
  fwd = cs_pipeline_get_forward (pl);
  bwd = cs_pipeline_get_backward (pl);
  printf ("parse+pipeline layers=%u wall_ms=%.1f\n", layers, wall_ms () - w0);
  printf ("generate layers=%u wall_ms=%.1f (best of 3: steps, plan, source; no NVRTC)\n", layers,
          generate_best (fwd, bwd, &policy));

#ifdef CS_CUDA_PLAN_CACHE_API
  {
    /* the whole-plan cache: written by the first dry build, read by the next two */
    g_autofree char *dir = g_dir_make_tmp ("cs-bench-compile-XXXXXX", NULL);

    g_setenv ("CASTSCOPE_CACHE_DIR", dir, TRUE);
    for (guint i = 0; i < 3; i++)
      {
        double t = wall_ms ();
        CsCudaProgram *p = cs_cuda_program_build_full (fwd, bwd, &policy, CS_CUDA_BUILD_DRY | CS_CUDA_BUILD_PLAN_CACHE,
                                                       &error);

        if (p == NULL)
          goto fail;
        printf ("plan-%s layers=%u wall_ms=%.1f (dry build with the whole-plan cache, %s)\n",
                p->plan_cached ? "warm" : "cold", layers, wall_ms () - t,
                p->plan_cached ? "read" : "generated and written");
        cs_cuda_program_free (p);
      }
    trace_step_rm_dir (dir);
  }
#endif
  {
    g_autofree char *dir = g_dir_make_tmp ("cs-bench-compile-XXXXXX", NULL);

    g_setenv ("CASTSCOPE_CACHE_DIR", dir, TRUE);
    if (!build_once (fwd, bwd, &policy, &r, &error))
      goto fail;
    report ("cold", layers, &r);
    if (!build_once (fwd, bwd, &policy, &r, &error))
      goto fail;
    report ("warm", layers, &r);
    trace_step_rm_dir (dir);
  }
  if (splits != NULL)
    {
      g_auto(GStrv) ns = g_strsplit (splits, " ", -1);
      g_autofree char *keep = g_strdup (g_getenv ("CASTSCOPE_JIT_PROGRAMS"));

      for (guint i = 0; ns[i]; i++)
        {
          g_autofree char *dir = NULL;
          g_autofree char *what = NULL;

          if (ns[i][0] == '\0')
            continue;
          dir = g_dir_make_tmp ("cs-bench-compile-XXXXXX", NULL);
          g_setenv ("CASTSCOPE_CACHE_DIR", dir, TRUE);
          g_setenv ("CASTSCOPE_JIT_PROGRAMS", ns[i], TRUE);
          if (!build_once (fwd, bwd, &policy, &r, &error))
            goto fail;
          what = g_strdup_printf ("split=%s", ns[i]);
          report (what, layers, &r);
          trace_step_rm_dir (dir);
        }
      if (keep)
        g_setenv ("CASTSCOPE_JIT_PROGRAMS", keep, TRUE);
      else
        g_unsetenv ("CASTSCOPE_JIT_PROGRAMS");
    }
  return 0;
fail:
  fprintf (stderr, "bench-compile: %s\n", error->message);
  return 1;
}

int
main (int argc, char **argv)
{
  const char *dir = g_getenv ("CS_SHARED_TRACES");
  g_autofree char *path = NULL;
  g_autofree char *text = NULL;
  int rc = 0;

  if (dir == NULL)
    dir = "../shared/traces";
  path = g_build_filename (dir, "thunder_llama_stack_initial.txt", NULL);
  if (!g_file_get_contents (path, &text, NULL, NULL))
    {
      fprintf (stderr, "bench-compile: cannot read %s (set CS_SHARED_TRACES)\n", path);
      return 1;
    }
  if (argc == 3 && strcmp (argv[1], "--emit") == 0)
    {
      guint n = (guint) atoi (argv[2]);
      g_autofree char *deep = n == 8 ? g_strdup (text) : llama_stack_layers (text, n);

      if (deep == NULL)
        {
          fprintf (stderr, "bench-compile: cannot make %s layers from the trace (8 or more)\n", argv[2]);
          return 1;
        }
      fputs (deep, stdout);
      return 0;
    }
  printf ("processors=%u\n", g_get_num_processors ());
  if (argc < 2)
    {
      rc |= bench_depth (text, 8);
      rc |= bench_depth (text, 32);
    }
  for (int i = 1; i < argc; i++)
    rc |= bench_depth (text, (guint) atoi (argv[i]));
  return rc;
}
