/* bench-pipeline.c: every pipeline pass on a generated trace (a benchmark, not a test).
 *
 *   bench-pipeline [N_STATEMENTS=10000] [REPEATS=5]
 *
 * Generates an ltorch-level bf16 trace of N statements (add, mul, tanh, matmul repeating, the
 * shape of a deep MLP), parses it, runs cs_pipeline_run with the default policy (autocast,
 * grad, decompose, fuse, remove-redundant-casts, cse, dce, split, delete-last-used) and prints
 * the best wall time of REPEATS runs and the time of each pass.  Target: under 100 ms for
 * 10,000 statements.  Also times the fusion passes alone on the decomposed joint trace and
 * copies of it; the peak resident set right after the pipeline rounds is printed before those,
 * so it counts the pipelines and not the bench's extra parts (REPEATS=1: one pipeline's peak).
 */
#include "cs-config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cs-cse.h"
#include "cs-dellast.h"
#include "cs-fuse.h"
#include "cs-parse.h"
#include "cs-pipeline.h"

/* Process CPU time in microseconds: the machine is shared, so wall time alone overstates. */
static gint64
cpu_us (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (gint64) ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* VmHWM of this process (its peak resident set so far), KiB; 0 when /proc is not there. */
static guint64
peak_rss_kib (void)
{
  g_autofree char *status = NULL;
  const char *line;

  if (!g_file_get_contents ("/proc/self/status", &status, NULL, NULL))
    return 0;
  line = strstr (status, "VmHWM:");
  return line ? g_ascii_strtoull (line + 6, NULL, 10) : 0;
}

static char *
generate (guint n)
{
  GString *s = g_string_new (NULL);
  const char *ty = "\"cuda:0 bf16[64, 64]\"";
  char prev[32] = "x";

  g_string_append (s, "def computation(x, w):\n");
  g_string_append_printf (s, "  # x: %s\n  # w: %s\n", ty, ty);
  for (guint i = 0; i < n; i++)
    {
      switch (i % 4)
        {
        case 0:
          g_string_append_printf (s, "  t%u = ltorch.add(%s, w, alpha=1)  # t%u: %s\n", i, prev, i, ty);
          break;
        case 1:
          g_string_append_printf (s, "  t%u = ltorch.mul(%s, %s)  # t%u: %s\n", i, prev, prev, i, ty);
          break;
        case 2:
          g_string_append_printf (s, "  t%u = ltorch.tanh(%s)  # t%u: %s\n", i, prev, i, ty);
          break;
        default:
          g_string_append_printf (s, "  t%u = ltorch.matmul(%s, w)  # t%u: %s\n", i, prev, i, ty);
          break;
        }
      g_snprintf (prev, sizeof prev, "t%u", i);
    }
  g_string_append_printf (s, "  return (%s,)\n", prev);
  return g_string_free (s, FALSE);
}

/* Best wall time of @repeats calls of @copy (cs_trace_copy or cs_trace_derive) on @t, in us. */
static gint64
best_copy_us (CsTrace *(*copy) (const CsTrace *, const char *), const CsTrace *t, guint repeats)
{
  gint64 best = G_MAXINT64;

  for (guint r = 0; r < repeats; r++)
    {
      g_autoptr(CsTrace) c = NULL;
      gint64 t0 = g_get_monotonic_time ();
      c = copy (t, NULL);
      best = MIN (best, g_get_monotonic_time () - t0);
    }
  return best;
}

int
main (int argc, char **argv)
{
  guint n = argc > 1 ? (guint) atoi (argv[1]) : 10000;
  guint repeats = argc > 2 ? (guint) atoi (argv[2]) : 5;
  g_autofree char *text = generate (n);
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTrace) t = NULL;
  g_autoptr(CsPipeline) best_pl = NULL;
  gint64 best = G_MAXINT64, best_cpu = G_MAXINT64, t0, c0;

  t0 = g_get_monotonic_time ();
  t = cs_parse_trace (text, "generated", &error);
  if (t == NULL)
    {
      fprintf (stderr, "bench-pipeline: parse failed: %s\n", error->message);
      return 1;
    }
  printf ("parse: %u statements, %zu bytes, %.2f ms\n", t->n_stmts, strlen (text),
          (g_get_monotonic_time () - t0) / 1e3);

  gint64 pass_min[64];
  for (guint i = 0; i < G_N_ELEMENTS (pass_min); i++)
    pass_min[i] = G_MAXINT64;
  for (guint r = 0; r < repeats; r++)
    {
      CsPipeline *pl;
      gint64 dt;
      t0 = g_get_monotonic_time ();
      c0 = cpu_us ();
      pl = cs_pipeline_run (t, NULL, NULL, &error);
      dt = g_get_monotonic_time () - t0;
      best_cpu = MIN (best_cpu, cpu_us () - c0);
      if (pl == NULL)
        {
          fprintf (stderr, "bench-pipeline: pipeline failed: %s\n", error->message);
          return 1;
        }
      for (guint i = 0; i < cs_pipeline_n_passes (pl) && i < G_N_ELEMENTS (pass_min); i++)
        pass_min[i] = MIN (pass_min[i], cs_pipeline_pass_time_ns (pl, i));
      if (dt < best)
        {
          best = dt;
          g_clear_pointer (&best_pl, cs_pipeline_unref);
          best_pl = pl;
        }
      else
        cs_pipeline_unref (pl);
    }
  printf ("pipeline (all passes, default policy): best of %u = %.2f ms wall, %.2f ms CPU for %u "
          "statements (target < 100 ms)\n", repeats, best / 1e3, best_cpu / 1e3, n);
  printf ("peak RSS after the pipeline rounds (the trace text, the parsed trace and %s): %.1f "
          "MiB\n", repeats > 1 ? "two pipelines, the best round's kept while the next runs"
                                : "one pipeline", peak_rss_kib () / 1024.0);
  printf ("  per pass, best of %u (the machine is shared: the best run shows the cost)\n", repeats);
  for (guint i = 0; i < cs_pipeline_n_passes (best_pl); i++)
    printf ("  %-26s %8.2f ms  %6u statements\n", cs_pipeline_pass_name (best_pl, i),
            (i < G_N_ELEMENTS (pass_min) ? pass_min[i] : cs_pipeline_pass_time_ns (best_pl, i)) / 1e6,
            cs_pipeline_get_trace (best_pl, i)->n_stmts);

  /* fusion passes alone on the decomposed joint trace */
  {
    CsTrace *dec = cs_pipeline_find_trace (best_pl, "decompose");
    CsPolicy p;
    cs_policy_init_default (&p);
    if (dec)
      {
        gint64 fbest = G_MAXINT64;
        for (guint r = 0; r < repeats; r++)
          {
            g_autoptr(CsTrace) f = NULL, a = NULL, b = NULL, c = NULL, d = NULL;
            t0 = g_get_monotonic_time ();
            f = cs_fuse_trace (dec, &p, NULL);
            a = cs_cse_remove_redundant_casts (f);
            b = cs_cse_trace (a);
            c = cs_cse_dce (b);
            d = cs_dellast_trace (c, FALSE);
            fbest = MIN (fbest, g_get_monotonic_time () - t0);
          }
        printf ("fuse + redundant casts + cse + dce + del on the decomposed joint (%u top-level "
                "statements): %.2f ms\n", dec->n_stmts, fbest / 1e3);
        printf ("one cs_trace_copy (deep copy) of the decomposed joint: %.2f ms\n",
                best_copy_us (cs_trace_copy, dec, repeats) / 1e3);
        printf ("one cs_trace_derive (what the passes make) of the decomposed joint: %.2f ms\n",
                best_copy_us (cs_trace_derive, dec, repeats) / 1e3);
      }
  }
  return 0;
}
