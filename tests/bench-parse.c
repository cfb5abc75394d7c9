/* bench-parse.c: parse and print time for a large synthetic trace (a benchmark program, not a
 * test).  Target: 100,000 top-level statements parse + print in under 0.5 s.
 *
 * The trace mixes the line shapes of real Thunder output: ltorch calls with 5 prims of
 * decomposition, torch.nn.functional.linear with 2 nested levels, nvFusion calls with 4 fused
 * prims, del lines, unpacks and input annotations.
 *
 * Usage: bench-parse [N_STATEMENTS] [REPEATS]
 */
#include "cs-config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cs-parse.h"
#include "cs-print.h"

static double
cpu_ms (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static GString *
make_trace (guint n_stmts, guint *n_subs_out)
{
  GString *s = g_string_sized_new ((gsize) n_stmts * 200);
  guint n_subs = 0, t = 10, k = 0;

  g_string_append (s, "# Constructed by Delete Last Used (took 10 milliseconds)\n"
                      "import torch\n"
                      "import torch.nn.functional\n"
                      "from thunder.executors.torchex import no_autocast\n\n"
                      "@torch.no_grad()\n@no_autocast\n"
                      "def computation(x, w, b, C0):\n"
                      "  # x: \"cuda:0 bf16[8, 4096]\"\n"
                      "  # w: \"cuda:0 bf16[4096, 4096]\"\n"
                      "  # b: \"cuda:0 bf16[4096]\"\n"
                      "  t1, t2, t3, t4, t5, t6, t7, t8, t9, = C0\n"
                      "  # C0: \"Collection\"\n");
  k = 5;
  while (k < n_stmts)
    {
      switch (k % 4)
        {
        case 0:
          g_string_append_printf (s,
            "  t%u = ltorch.add(t%u, t%u, alpha=1)  # t%u: \"cuda:0 bf16[8, 4096]\"\n"
            "    # t%u = prims.broadcast_in_dim(t%u, (8, 4096), (0, 1))  # t%u: \"cuda:0 bf16[8, 4096]\"\n"
            "    # t%u = prims.convert_element_type(t%u, dtypes.float32)  # t%u: \"cuda:0 f32[8, 4096]\"\n"
            "    # t%u = prims.convert_element_type(t%u, dtypes.float32)  # t%u: \"cuda:0 f32[8, 4096]\"\n"
            "    # t%u = prims.add(t%u, t%u)  # t%u: \"cuda:0 f32[8, 4096]\"\n"
            "    # t%u = prims.convert_element_type(t%u, dtypes.bfloat16)  # t%u: \"cuda:0 bf16[8, 4096]\"\n",
            t + 5, t - 1, t - 2, t + 5,
            t, t - 2, t,
            t + 1, t - 1, t + 1,
            t + 2, t, t + 2,
            t + 3, t + 1, t + 2, t + 3,
            t + 5, t + 3, t + 5);
          n_subs += 5;
          t += 6;
          break;
        case 1:
          g_string_append_printf (s,
            "  t%u = torch.nn.functional.linear(t%u, w, b)  # t%u: \"cuda:0 bf16[8, 4096]\"\n"
            "    # t%u = ltorch.linear(t%u, w, b)  # t%u: \"cuda:0 bf16[8, 4096]\"\n"
            "      # t%u = prims.linear(t%u, w, b)  # t%u: \"cuda:0 bf16[8, 4096]\"\n",
            t, t - 1, t, t, t - 1, t, t, t - 1, t);
          n_subs += 2;
          t += 1;
          break;
        case 2:
          g_string_append_printf (s,
            "  [t%u, t%u] = nvFusion%u(t%u, t%u)\n"
            "    # t%u = prims.convert_element_type(t%u, dtypes.float32)  # t%u: \"cuda:0 f32[8, 4096]\"\n"
            "    # t%u = prims.mul(t%u, 0.08838834764831843)  # t%u: \"cuda:0 f32[8, 4096]\"\n"
            "    # t%u = prims.where(t%u, t%u, -float('inf'))  # t%u: \"cuda:0 f32[8, 4096]\"\n"
            "    # t%u = prims.convert_element_type(t%u, dtypes.bfloat16)  # t%u: \"cuda:0 bf16[8, 4096]\"\n",
            t + 2, t + 3, k / 4, t - 1, t - 2,
            t, t - 1, t,
            t + 1, t, t + 1,
            t + 2, t + 1, t, t + 2,
            t + 3, t + 2, t + 3);
          n_subs += 4;
          t += 4;
          break;
        default:
          g_string_append_printf (s, "  del t%u, t%u\n", t - 8, t - 9);
          break;
        }
      k++;
    }
  g_string_append_printf (s, "  return {'output': (t%u,), 'flat_args': [x, w, b]}, ((t%u, w), (1e-05,))\n",
                          t - 1, t - 2);
  k++;
  *n_subs_out = n_subs;
  return s;
}

int
main (int argc, char **argv)
{
  guint n = argc > 1 ? (guint) strtoul (argv[1], NULL, 10) : 100000;
  guint repeats = argc > 2 ? (guint) strtoul (argv[2], NULL, 10) : 5;
  guint n_subs = 0, n_lines = 0;
  g_autoptr(GString) text = make_trace (n, &n_subs);
  double best_parse = G_MAXDOUBLE, best_print = G_MAXDOUBLE;
  double cpu_parse = G_MAXDOUBLE, cpu_print = G_MAXDOUBLE;
  gboolean same = FALSE;
  gsize arena_bytes = 0;

  for (gsize i = 0; i < text->len; i++)
    n_lines += text->str[i] == '\n';
  for (guint r = 0; r < repeats; r++)
    {
      g_autoptr(GError) error = NULL;
      g_autoptr(CsTraceList) list = NULL;
      g_autofree char *printed = NULL;
      gint64 t0, t1, t2;
      double c0, c1, c2;

      c0 = cpu_ms ();
      t0 = g_get_monotonic_time ();
      list = cs_parse_text (text->str, text->len, "bench", &error);
      t1 = g_get_monotonic_time ();
      c1 = cpu_ms ();
      if (list == NULL)
        {
          fprintf (stderr, "bench-parse: %s\n", error->message);
          return 1;
        }
      printed = cs_print_trace_list (list, CS_PRINT_DEFAULT);
      t2 = g_get_monotonic_time ();
      c2 = cpu_ms ();
      cpu_parse = MIN (cpu_parse, c1 - c0);
      cpu_print = MIN (cpu_print, c2 - c1);
      best_parse = MIN (best_parse, (t1 - t0) / 1000.0);
      best_print = MIN (best_print, (t2 - t1) / 1000.0);
      same = strcmp (printed, text->str) == 0;
      arena_bytes = cs_arena_size_bytes (((CsTrace *) g_ptr_array_index (list->traces, 0))->arena);
    }
  printf ("bench-parse: %u top-level statements (+%u subsymbols), %u lines, %.1f MB\n", n, n_subs,
          n_lines, text->len / 1e6);
  printf ("  parse  %8.1f ms wall, %8.1f ms CPU  (%.0f MB/s wall)\n", best_parse, cpu_parse,
          text->len / 1e3 / best_parse);
  printf ("  print  %8.1f ms wall, %8.1f ms CPU  (%.0f MB/s wall)\n", best_print, cpu_print,
          text->len / 1e3 / best_print);
  printf ("  total  %8.1f ms wall, %8.1f ms CPU; per statement (subsymbols included) %.2f us CPU\n",
          best_parse + best_print, cpu_parse + cpu_print,
          (cpu_parse + cpu_print) * 1e3 / (n + n_subs));
  printf ("  trace arena %.1f MB (%.0f bytes per statement)\n", arena_bytes / 1e6,
          (double) arena_bytes / (n + n_subs));
  printf ("  printed text %s the input (best of %u runs)\n", same ? "equals" : "DIFFERS FROM", repeats);
  return same ? 0 : 1;
}
