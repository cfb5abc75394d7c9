/* bench-parse-scale.c: parse time and memory for 10^4, 10^5 and 10^6 statements (a benchmark
 * program, built but not a registered test or benchmark).
 *
 * The claim checked: parse time is linear in the trace's size, so the time per statement stays
 * flat from 10^4 to 10^6 top-level statements, and memory per statement does too.
 *
 * The trace is shaped like Thunder's final traces: flat ltorch/torch calls with their type
 * comments, nvFusion calls with a few fused prims as subsymbol lines, and del lines.  It keeps
 * under 2 lines per statement so that 10^6 statements stay inside CS_PARSE_MAX_LINES.
 *
 * Usage: bench-parse-scale [MAX_STATEMENTS] [REPEATS]   (defaults: 1000000, 3)
 * Prints one row per size: statements, lines, MB of text, parse wall and CPU ms (best of
 * REPEATS), CPU ns per statement and per byte, the trace arena and the resident memory the
 * parsed list holds.
 */
#include "cs-config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cs-parse.h"

static double
cpu_ms (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Resident set size now (bytes), from /proc/self/statm; 0 where that is unreadable. */
static gsize
rss_bytes (void)
{
  g_autofree char *text = NULL;
  unsigned long size = 0, resident = 0;

  if (!g_file_get_contents ("/proc/self/statm", &text, NULL, NULL))
    return 0;
  if (sscanf (text, "%lu %lu", &size, &resident) != 2)
    return 0;
  return (gsize) resident * (gsize) sysconf (_SC_PAGESIZE);
}

/* A trace of @n_stmts top-level statements; *n_lines_out gets its line count. */
static GString *
make_trace (guint n_stmts, guint *n_lines_out)
{
  GString *s = g_string_sized_new ((gsize) n_stmts * 120);
  guint t = 10, k;

  g_string_append (s, "# Constructed by Delete Last Used (took 10 milliseconds)\n"
                      "import torch\n"
                      "from thunder.executors.torchex import no_autocast\n\n"
                      "@torch.no_grad()\n@no_autocast\n"
                      "def computation(x, w, b):\n"
                      "  # x: \"cuda:0 bf16[8, 4096]\"\n"
                      "  # w: \"cuda:0 bf16[4096, 4096]\"\n"
                      "  # b: \"cuda:0 bf16[4096]\"\n"
                      "  t0 = ltorch.add(x, x, alpha=1)  # t0: \"cuda:0 bf16[8, 4096]\"\n"
                      "  t1 = ltorch.add(t0, x, alpha=1)  # t1: \"cuda:0 bf16[8, 4096]\"\n"
                      "  t2 = ltorch.add(t1, t0, alpha=1)  # t2: \"cuda:0 bf16[8, 4096]\"\n"
                      "  t3 = ltorch.add(t2, t1, alpha=1)  # t3: \"cuda:0 bf16[8, 4096]\"\n"
                      "  t4 = ltorch.add(t3, t2, alpha=1)  # t4: \"cuda:0 bf16[8, 4096]\"\n"
                      "  t5 = ltorch.add(t4, t3, alpha=1)  # t5: \"cuda:0 bf16[8, 4096]\"\n"
                      "  t6 = ltorch.add(t5, t4, alpha=1)  # t6: \"cuda:0 bf16[8, 4096]\"\n"
                      "  t7 = ltorch.add(t6, t5, alpha=1)  # t7: \"cuda:0 bf16[8, 4096]\"\n"
                      "  t8 = ltorch.add(t7, t6, alpha=1)  # t8: \"cuda:0 bf16[8, 4096]\"\n"
                      "  t9 = ltorch.add(t8, t7, alpha=1)  # t9: \"cuda:0 bf16[8, 4096]\"\n");
  for (k = 10; k + 1 < n_stmts; k++)
    {
      switch (k % 4)
        {
        case 0:
          g_string_append_printf (s,
            "  t%u = ltorch.add(t%u, t%u, alpha=1)  # t%u: \"cuda:0 bf16[8, 4096]\"\n"
            "    # t%u = prims.add(t%u, t%u)  # t%u: \"cuda:0 bf16[8, 4096]\"\n",
            t, t - 1, t - 2, t, t, t - 1, t - 2, t);
          t += 1;
          break;
        case 1:
          g_string_append_printf (s,
            "  t%u = torch.nn.functional.linear(t%u, w, b)  # t%u: \"cuda:0 bf16[8, 4096]\"\n",
            t, t - 1, t);
          t += 1;
          break;
        case 2:
          g_string_append_printf (s,
            "  [t%u] = nvFusion%u(t%u, t%u)\n"
            "    # t%u = prims.convert_element_type(t%u, dtypes.float32)  # t%u: \"cuda:0 f32[8, 4096]\"\n"
            "    # t%u = prims.convert_element_type(t%u, dtypes.bfloat16)  # t%u: \"cuda:0 bf16[8, 4096]\"\n",
            t + 1, k / 4, t - 1, t - 2,
            t, t - 1, t,
            t + 1, t, t + 1);
          t += 2;
          break;
        default:
          g_string_append_printf (s, "  del t%u\n", t - 9);
          break;
        }
    }
  g_string_append_printf (s, "  return t%u\n", t - 1);
  *n_lines_out = 0;
  for (gsize i = 0; i < s->len; i++)
    *n_lines_out += s->str[i] == '\n';
  return s;
}

int
main (int argc, char **argv)
{
  guint max_n = argc > 1 ? (guint) strtoul (argv[1], NULL, 10) : 1000000;
  guint repeats = argc > 2 ? (guint) strtoul (argv[2], NULL, 10) : 3;
  double first_ns = 0;
  int status = 0;

  printf ("%9s %9s %8s %10s %10s %9s %8s %10s %10s\n", "stmts", "lines", "text MB",
          "parse ms", "CPU ms", "ns/stmt", "ns/byte", "arena MB", "RSS MB");
  for (guint n = 10000; n <= max_n; n *= 10)
    {
      guint n_lines = 0;
      g_autoptr(GString) text = make_trace (n, &n_lines);
      double best_wall = G_MAXDOUBLE, best_cpu = G_MAXDOUBLE, ns_per_stmt;
      gsize arena_bytes = 0, rss_held = 0;

      for (guint r = 0; r < repeats; r++)
        {
          g_autoptr(GError) error = NULL;
          g_autoptr(CsTraceList) list = NULL;
          gsize rss0 = rss_bytes (), rss1;
          gint64 t0 = g_get_monotonic_time ();
          double c0 = cpu_ms ();

          list = cs_parse_text (text->str, text->len, "bench", &error);
          best_cpu = MIN (best_cpu, cpu_ms () - c0);
          best_wall = MIN (best_wall, (g_get_monotonic_time () - t0) / 1000.0);
          if (list == NULL)
            {
              fprintf (stderr, "bench-parse-scale: %u statements: %s\n", n, error->message);
              return 1;
            }
          rss1 = rss_bytes ();
          rss_held = MAX (rss_held, rss1 > rss0 ? rss1 - rss0 : 0);
          arena_bytes = cs_arena_size_bytes (((CsTrace *) g_ptr_array_index (list->traces, 0))->arena);
        }
      ns_per_stmt = best_cpu * 1e6 / n;
      printf ("%9u %9u %8.1f %10.1f %10.1f %9.0f %8.1f %10.1f %10.1f\n", n, n_lines,
              text->len / 1e6, best_wall, best_cpu, ns_per_stmt, best_cpu * 1e6 / text->len,
              arena_bytes / 1e6, rss_held / 1e6);
      if (first_ns == 0)
        first_ns = ns_per_stmt;
      else if (ns_per_stmt > 2 * first_ns)
        {
          printf ("  time per statement grew %.1fx from 10^4 statements: not linear\n",
                  ns_per_stmt / first_ns);
          status = 1;
        }
    }
  printf ("time per statement %s\n", status == 0 ? "stays within 2x of the 10^4 figure (linear)"
                                                 : "is NOT flat");
  return status;
}
