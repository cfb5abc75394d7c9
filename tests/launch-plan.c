/* launch-plan.c: the launch plan of a training step, without a GPU (a tool, not a test).
 *
 *   launch-plan [--streams] [--plan-cache] [--policy KEY=VALUE]... [--source FILE] TRACE [LAYERS]
 *
 * Parses TRACE (a Thunder initial trace), runs the pipeline under the default policy (plus the
 * given settings, e.g. --policy executors=nvfuser,torch), builds the CUDA program as a dry build
 * (steps and generated source, no device: CS_CUDA_BUILD_DRY) and prints one line per launch:
 *
 *   <index> <fwd|bwd> <kind> <label>
 *
 * where kind is "matmul" (one cublasLtMatmul), "fusion" (a generated region kernel), "finalize"
 * (a region kernel whose label says it adds up a column reduction's partials), "copy" (a
 * contiguous copy for a view that needs one) or "attention", then the totals; then the
 * constant fills the program runs once when it is built ("setup ..." lines, not launched per
 * step).  --streams adds, after the kind, the launch's stream in the captured graph
 * (kernels/cs-cuda-streams.c: `s0`..`s3`), the launches it waits for (`w12,40`) and `*` when
 * it is on one longest chain, then that chain's length.  --source writes the program's
 * generated kernels (p->source) to FILE.  --plan-cache builds through the whole-plan cache
 * (CS_CUDA_BUILD_PLAN_CACHE: read when there, else generated and written).  LAYERS > 8 deepens the LLaMA
 * stack first (tests/test-llama-layers.h).  The census in kernels/BENCH-RESULTS.md ("Launches
 * per block") was made with it.
 */
#include "cs-config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cs-cuda-private.h"
#include "test-llama-layers.h"
#include "test-trace-step.h"

/* The census kind of @s: matmul, finalize, copy or fusion (as launch-plan's header says). */
static const char *
census_kind (const CsCudaStep *s)
{
  if (s->kind == CS_CUDA_STEP_GEMM)
    return "matmul";
  if (strstr (s->label, "finalize"))
    return "finalize";
  if (g_strcmp0 (s->kind_name, "copy") == 0)
    return "copy";
  return s->kind_name ? s->kind_name : "kernel";
}

int
main (int argc, char **argv)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(CsPipeline) pl = NULL;
  g_autofree char *text = NULL;
  g_autoptr(GHashTable) totals = g_hash_table_new (g_str_hash, g_str_equal);
  CsPolicy policy;
  CsCudaProgram *p;
  const char *path = NULL, *source = NULL;
  guint layers = 0, n[2] = { 0, 0 };
  gboolean streams = FALSE;
  CsCudaBuildFlags flags = CS_CUDA_BUILD_DRY;
  g_autofree gboolean *on_chain = NULL;
  gsize len = 0;

  cs_policy_init_default (&policy);
  for (int i = 1; i < argc; i++)
    {
      if (strcmp (argv[i], "--streams") == 0)
        streams = TRUE;
      else if (strcmp (argv[i], "--plan-cache") == 0)
        flags |= CS_CUDA_BUILD_PLAN_CACHE;
      else if (strcmp (argv[i], "--policy") == 0 && i + 1 < argc)
        {
          g_auto(GStrv) kv = g_strsplit (argv[++i], "=", 2);

          if (kv[0] == NULL || kv[1] == NULL || !cs_policy_set (&policy, kv[0], kv[1], &error))
            {
              fprintf (stderr, "launch-plan: bad --policy %s: %s\n", argv[i], error ? error->message : "KEY=VALUE");
              return 2;
            }
        }
      else if (strcmp (argv[i], "--source") == 0 && i + 1 < argc)
        source = argv[++i];
      else if (path == NULL)
        path = argv[i];
      else
        layers = (guint) atoi (argv[i]);
    }
  if (path == NULL)
    {
      fprintf (stderr, "usage: launch-plan [--streams] [--plan-cache] [--policy KEY=VALUE]... [--source FILE] TRACE [LAYERS]\n");
      return 2;
    }
  if (!g_file_get_contents (path, &text, &len, &error))
    {
      fprintf (stderr, "launch-plan: %s\n", error->message);
      return 1;
    }
  if (layers > 8)
    {
      char *deep = llama_stack_layers (text, layers);

      if (deep == NULL)
        {
          fprintf (stderr, "launch-plan: %s is not the LLaMA stack\n", path);
          return 1;
        }
      g_free (text);
      text = deep;
      len = strlen (text);
    }
  pl = trace_step_pipeline (text, (gssize) len, path, &policy, &error);
  if (pl == NULL)
    {
      fprintf (stderr, "launch-plan: %s\n", error->message);
      return 1;
    }
  p = cs_cuda_program_build_full (cs_pipeline_get_forward (pl), cs_pipeline_get_backward (pl), &policy,
                                  flags, &error);
  if (p == NULL)
    {
      fprintf (stderr, "launch-plan: %s\n", error->message);
      return 1;
    }
  if (source != NULL && !g_file_set_contents (source, p->source->str, -1, &error))
    {
      fprintf (stderr, "launch-plan: %s\n", error->message);
      cs_cuda_program_free (p);
      return 1;
    }
  on_chain = g_new0 (gboolean, p->steps->len + 1);
  if (streams)
    {
      /* one longest chain, walked back from its last step through predecessors one shorter */
      gint at = -1;

      for (guint i = 0; i < p->steps->len; i++)
        if (at < 0 || ((CsCudaStep *) g_ptr_array_index (p->steps, i))->depth
                      > ((CsCudaStep *) g_ptr_array_index (p->steps, at))->depth)
          at = (gint) i;
      while (at >= 0)
        {
          CsCudaStep *s = g_ptr_array_index (p->steps, at);
          gint next = -1;

          on_chain[at] = TRUE;
          for (gint j = at - 1; j >= 0 && next < 0 && s->depth > 1; j--)
            {
              CsCudaStep *q = g_ptr_array_index (p->steps, j);
              gboolean pred = q->stream == s->stream;

              for (guint w = 0; w < s->n_waits; w++)
                pred |= s->waits[w] == (guint) j;
              if (pred && q->depth == s->depth - 1)
                next = j;
            }
          at = next;
        }
    }
  for (guint i = 0; i < p->steps->len; i++)
    {
      CsCudaStep *s = g_ptr_array_index (p->steps, i);
      const char *k = census_kind (s);

      if (streams)
        {
          g_autoptr(GString) w = g_string_new ("");

          for (guint j = 0; j < s->n_waits; j++)
            g_string_append_printf (w, "%s%u", j ? "," : " w", s->waits[j]);
          printf ("%u %s %s s%u%s%s %s\n", i, s->backward ? "bwd" : "fwd", k, s->stream, w->str,
                  on_chain[i] ? " *" : "", s->label);
        }
      else
        printf ("%u %s %s %s\n", i, s->backward ? "bwd" : "fwd", k, s->label);
      g_hash_table_insert (totals, (gpointer) k,
                           GUINT_TO_POINTER (GPOINTER_TO_UINT (g_hash_table_lookup (totals, k)) + 1));
      n[s->kind == CS_CUDA_STEP_GEMM]++;
    }
  for (guint i = 0; i < p->setup_steps->len; i++)
    {
      CsCudaStep *s = g_ptr_array_index (p->setup_steps, i);

      printf ("setup %s %s %s\n", s->backward ? "bwd" : "fwd", census_kind (s), s->label);
    }
  printf ("# launches %u: kernels %u, matmuls %u", p->steps->len, n[0], n[1]);
  {
    static const char *const kinds[] = { "fusion", "finalize", "copy", NULL };

    for (guint j = 0; kinds[j]; j++)
      printf (", %s %u", kinds[j], GPOINTER_TO_UINT (g_hash_table_lookup (totals, kinds[j])));
  }
  printf ("; once per program: %u constant fills\n", p->setup_steps->len);
  if (streams)
    printf ("# graph: %u stream%s, the longest chain of launches %u\n", p->n_streams, p->n_streams == 1 ? "" : "s",
            p->critical_path);
  cs_cuda_program_free (p);
  return 0;
}
