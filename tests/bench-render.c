/* bench-render.c: layout times of render/ (a benchmark program, not a test; `meson test
 * --benchmark` or run it directly).
 *
 * For generated traces of about 250 ... 4,000 nodes (a residual chain of blocks
 * matmul -> upcast -> tanh -> downcast -> add, one weight input per block, every 8th block also
 * reading the first input again: a long edge) and for the largest shared samples
 * ($CS_SHARED_TRACES/thunder_llama_stack_*.txt), prints node / edge counts, the time of
 * cs_graph_build() (text measuring, DOT), of Graphviz (parse + dot + snapshot, wall and this
 * process's CPU time: on a loaded machine the CPU time is the steadier number), and the
 * target: a 2,000-node trace under 2 s.
 *
 * Usage: bench-render [--repeat N] [--max-nodes N] [FILE...]
 *
 * Measured 2026-11-29 on the GPU machine's host (16 idle cores; binary built on the dev
 * machine, carried with ../shared/tools/gpu-bundle and Graphviz's plugins, GVBINDIR set),
 * best of 3, ms:
 *
 *   trace                               nodes  engine   build  layout
 *   generated, 40 blocks                  248  dot        3.1    44.4
 *   generated, 80 blocks                  493  dot        6.0    92.0
 *   generated, 160 blocks                 983  dot       11.9   355.6
 *   generated, 333 blocks                2042  layered   29.3     3.3
 *   generated, 666 blocks                4082  layered   58.5     6.6
 *   thunder_llama_stack_initial           510  dot        7.3   184.3
 *   thunder_llama_stack_final_fwd        1395  layered   23.7     0.9
 *   thunder_llama_stack_final_bwd        1800  layered   18.7     1.2
 *
 * Forcing dot (--max-nodes 100000, one run): 2,042 nodes 1,683 ms, 4,082 nodes 8,716 ms,
 * LLaMA forward 1,407 nodes 711 ms, LLaMA backward 1,805 nodes 1,133 ms.  On the 2-core
 * development machine under a load average of 11-19 the same dot runs took 4-5x longer
 * (2,042 nodes: 6.6 s of CPU), hence the 1,200-node limit for dot
 * (CS_RENDER_DEFAULT_MAX_NODES) and the layered layout above it.
 */
#include "cs-config.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cs-parse.h"
#include "cs-render.h"

static char *
generate (guint blocks)
{
  GString *s = g_string_new ("def computation(x");
  guint t = 0, r;

  for (guint k = 0; k < blocks; k++)
    g_string_append_printf (s, ", w%u", k);
  g_string_append (s, "):\n  # x: \"cuda:0 bf16[64, 64]\"\n");
  for (guint k = 0; k < blocks; k++)
    g_string_append_printf (s, "  # w%u: \"cuda:0 bf16[64, 64]\"\n", k);
  g_string_append_printf (s, "  t%u = ltorch.add(x, x)  # t%u: \"cuda:0 bf16[64, 64]\"\n", t, t);
  r = t++;
  for (guint k = 0; k < blocks; k++)
    {
      guint m = t++, c = t++, g = t++, d = t++, a = t++;

      g_string_append_printf (s, "  t%u = ltorch.matmul(t%u, w%u)  # t%u: \"cuda:0 bf16[64, 64]\"\n", m, r, k, m);
      g_string_append_printf (s, "  t%u = prims.convert_element_type(t%u, dtypes.float32)  # t%u: \"cuda:0 f32[64, 64]\"\n", c, m, c);
      g_string_append_printf (s, "  t%u = prims.tanh(t%u)  # t%u: \"cuda:0 f32[64, 64]\"\n", g, c, g);
      g_string_append_printf (s, "  t%u = prims.convert_element_type(t%u, dtypes.bfloat16)  # t%u: \"cuda:0 bf16[64, 64]\"\n", d, g, d);
      if (k % 8 == 7)
        g_string_append_printf (s, "  t%u = ltorch.add(t%u, x)  # t%u: \"cuda:0 bf16[64, 64]\"\n", a, d, a);
      else
        g_string_append_printf (s, "  t%u = ltorch.add(t%u, t%u)  # t%u: \"cuda:0 bf16[64, 64]\"\n", a, d, r, a);
      r = a;
    }
  g_string_append_printf (s, "  return (t%u,)\n", r);
  return g_string_free (s, FALSE);
}

static double
cpu_ms (void)
{
  return (double) clock () * 1000.0 / CLOCKS_PER_SEC;
}

static void
bench_trace (const char *name, CsTrace *t, guint repeat, guint max_nodes)
{
  double best_build = G_MAXDOUBLE, best_wall = G_MAXDOUBLE, best_cpu = G_MAXDOUBLE;
  guint n_nodes = 0, n_edges = 0;
  gboolean layered = FALSE;
  CsRenderDetail detail = CS_RENDER_DETAIL_AUTO;
  CsRenderOptions o;

  cs_render_options_init (&o);
  o.max_nodes = max_nodes;
  for (guint i = 0; i < repeat; i++)
    {
      g_autoptr(GError) error = NULL;
      g_autoptr(CsLayout) l = NULL;
      gint64 t0 = g_get_monotonic_time ();
      double c0, b;

      l = cs_graph_build (t, &o, &error);
      if (l == NULL)
        {
          printf ("%-44s error: %s\n", name, error->message);
          cs_render_options_clear (&o);
          return;
        }
      b = (g_get_monotonic_time () - t0) / 1000.0;
      c0 = cpu_ms ();
      t0 = g_get_monotonic_time ();
      if (!cs_layout_run (l, NULL, &error))
        {
          printf ("%-44s error: %s\n", name, error->message);
          cs_render_options_clear (&o);
          return;
        }
      best_wall = MIN (best_wall, (g_get_monotonic_time () - t0) / 1000.0);
      best_cpu = MIN (best_cpu, cpu_ms () - c0);
      best_build = MIN (best_build, b);
      n_nodes = l->n_nodes;
      n_edges = l->n_edges;
      detail = l->detail;
      layered = l->layered;
    }
  printf ("%-44s %6u %6u %-10s %-8s %8.1f %9.1f %9.1f  %s\n", name, n_nodes, n_edges,
          detail == CS_RENDER_DETAIL_REGIONS ? "regions" : detail == CS_RENDER_DETAIL_PRIMS ? "prims" : "statements",
          layered ? "layered" : "dot",
          best_build, best_wall, best_cpu,
          n_nodes >= 1800 && n_nodes <= 2200 ? (best_build + best_wall < 2000 ? "2000-node target < 2 s: met"
                                                                             : "2000-node target < 2 s: MISSED")
                                             : "");
  cs_render_options_clear (&o);
}

int
main (int argc, char **argv)
{
  gint repeat = 3, max_nodes = 0;
  g_auto(GStrv) files = NULL;
  g_autoptr(GOptionContext) ctx = g_option_context_new ("[FILE...] - render/ layout benchmark");
  g_autoptr(GError) error = NULL;
  GOptionEntry entries[] = {
    { "repeat", 'r', 0, G_OPTION_ARG_INT, &repeat, "Runs per trace; the best is reported (default 3)", "N" },
    { "max-nodes", 0, 0, G_OPTION_ARG_INT, &max_nodes, "AUTO threshold (default: render/'s)", "N" },
    { G_OPTION_REMAINING, 0, 0, G_OPTION_ARG_FILENAME_ARRAY, &files, NULL, "FILE..." },
    { NULL },
  };
  const guint blocks[] = { 40, 80, 160, 333, 666 };
  const char *shared_names[] = { "thunder_llama_stack_initial.txt", "thunder_llama_stack_final_fwd.txt",
                                 "thunder_llama_stack_final_bwd.txt" };
  const char *shared = g_getenv ("CS_SHARED_TRACES");

  g_option_context_add_main_entries (ctx, entries, NULL);
  if (!g_option_context_parse (ctx, &argc, &argv, &error))
    {
      fprintf (stderr, "bench-render: %s\n", error->message);
      return 2;
    }
  repeat = MAX (repeat, 1);
  printf ("%-44s %6s %6s %-10s %-8s %8s %9s %9s\n", "trace", "nodes", "edges", "detail", "engine",
          "build ms", "layout ms", "lay. cpu");
  for (guint i = 0; i < G_N_ELEMENTS (blocks); i++)
    {
      g_autofree char *text = generate (blocks[i]);
      g_autofree char *name = g_strdup_printf ("generated, %u blocks", blocks[i]);
      g_autoptr(CsTrace) t = cs_parse_trace (text, name, &error);

      if (t == NULL)
        {
          fprintf (stderr, "bench-render: %s\n", error->message);
          return 1;
        }
      bench_trace (name, t, (guint) repeat, (guint) max_nodes);
    }
  if (shared != NULL)
    for (guint i = 0; i < G_N_ELEMENTS (shared_names); i++)
      {
        g_autofree char *path = g_build_filename (shared, shared_names[i], NULL);
        g_autoptr(CsTraceList) list = NULL;

        if (!g_file_test (path, G_FILE_TEST_EXISTS))
          continue;
        list = cs_parse_file (path, &error);
        if (list == NULL)
          {
            fprintf (stderr, "bench-render: %s\n", error->message);
            return 1;
          }
        bench_trace (shared_names[i], g_ptr_array_index (list->traces, 0), (guint) repeat,
                     (guint) max_nodes);
      }
  for (guint i = 0; files && files[i]; i++)
    {
      g_autoptr(CsTraceList) list = cs_parse_file (files[i], &error);
      if (list == NULL)
        {
          fprintf (stderr, "bench-render: %s\n", error->message);
          return 1;
        }
      bench_trace (files[i], g_ptr_array_index (list->traces, 0), (guint) repeat, (guint) max_nodes);
    }
  return 0;
}
