/* bench-render.c: what render/ costs at model scale (a benchmark program, not a test; `meson
 * test --benchmark` or run it directly).  Numbers in tests/BENCH-RESULTS.md.
 *
 * For each trace, as the app draws it (default options: layers or chunks collapsed, see
 * render/cs-group.h), prints:
 * - nodes / edges drawn, the engine (Graphviz dot or castscope's layered layout);
 * - open: cs_graph_build() (grouping, text measuring, DOT) + the layout, best of --repeat, ms;
 * - expand: the same with one group expanded (the middle layer or chunk), ms;
 * - paint per frame: cs_draw_layout() of a 1600 x 1000 px image at three zooms (the fit of the
 *   whole graph, 75 % and 200 % centred on the middle of the graph), mean of --frames frames,
 *   ms;
 * - the expand / collapse cycle of the app (bench_cycle()): open, expand, collapse, expand
 *   again, expand the next group, without and with a layout cache (CsRenderOptions.cache, as
 *   CsGraphView sets it) in the same run, ms per step and the ratio;
 * - memory: the process's resident set (VmRSS of /proc/self/status) growth from before the
 *   build to after the layout with the layout alive, and the peak (VmHWM) so far, MiB.
 *
 * Traces: generated flat chains of 10,000 and 50,000 statements (matmul -> upcast -> tanh ->
 * downcast -> add blocks, one weight each: no layer parameters, so drawn as chunks);
 * a generated 32-layer model (parameters named t_layers_<k>_attention_wq_weight ... as
 * Thunder prints them, an RMSNorm + 4 linears + a residual per layer); the 8-block LLaMA
 * traces of $CS_SHARED_TRACES (initial, Thunder's final forward and backward); FILE...
 * arguments; and, with --flat, the old flat drawing for comparison.
 *
 * Usage: bench-render [--repeat N] [--frames N] [--flat] [--big N] [FILE...]
 *        bench-render --write-chain N FILE   (the generated chain as a trace file, for the app)
 *        bench-render --write-model N FILE   (the generated N-layer model as a trace file)
 */
#include "cs-config.h"

#include <stdio.h>
#include <string.h>

#include "cs-parse.h"
#include "cs-render.h"

/* A chain of @blocks blocks of 5 statements (matmul, upcast, tanh, downcast, residual add). */
static char *
generate_chain (guint blocks)
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

/* A @layers-layer model with Thunder's parameter names: per layer an RMSNorm (upcast, pow,
 * mean, rsqrt, mul, downcast, mul by t_layers_<k>_attention_norm_weight), q/k/v/o linears, and
 * the residual add (13 statements). */
static char *
generate_model (guint layers)
{
  static const char *const w[] = { "attention_norm", "attention_wq", "attention_wk", "attention_wv",
                                   "attention_wo" };
  GString *s = g_string_new ("def computation(x");
  guint t = 0, r = 0;

  for (guint k = 0; k < layers; k++)
    for (guint j = 0; j < G_N_ELEMENTS (w); j++)
      g_string_append_printf (s, ", t_layers_%u_%s_weight", k, w[j]);
  g_string_append (s, "):\n  # x: \"cuda:0 bf16[64, 128]\"\n");
  for (guint k = 0; k < layers; k++)
    for (guint j = 0; j < G_N_ELEMENTS (w); j++)
      g_string_append_printf (s, "  # t_layers_%u_%s_weight: \"cuda:0 bf16[%s]\"\n", k, w[j],
                              j == 0 ? "128" : "128, 128");
  g_string_append_printf (s, "  t%u = ltorch.add(x, x)  # t%u: \"cuda:0 bf16[64, 128]\"\n", t, t);
  r = t++;
  for (guint k = 0; k < layers; k++)
    {
      guint f = t++, p = t++, m = t++, q = t++, n = t++, d = t++, a = t++;
      guint lq = t++, lk = t++, lv = t++, s1 = t++, lo = t++, res = t++;

      g_string_append_printf (s, "  t%u = prims.convert_element_type(t%u, dtypes.float32)  # t%u: \"cuda:0 f32[64, 128]\"\n", f, r, f);
      g_string_append_printf (s, "  t%u = ltorch.pow(t%u, 2)  # t%u: \"cuda:0 f32[64, 128]\"\n", p, f, p);
      g_string_append_printf (s, "  t%u = ltorch.mean(t%u, -1, True)  # t%u: \"cuda:0 f32[64, 1]\"\n", m, p, m);
      g_string_append_printf (s, "  t%u = ltorch.rsqrt(t%u)  # t%u: \"cuda:0 f32[64, 1]\"\n", q, m, q);
      g_string_append_printf (s, "  t%u = ltorch.mul(t%u, t%u)  # t%u: \"cuda:0 f32[64, 128]\"\n", n, f, q, n);
      g_string_append_printf (s, "  t%u = prims.convert_element_type(t%u, dtypes.bfloat16)  # t%u: \"cuda:0 bf16[64, 128]\"\n", d, n, d);
      g_string_append_printf (s, "  t%u = ltorch.mul(t%u, t_layers_%u_attention_norm_weight)  # t%u: \"cuda:0 bf16[64, 128]\"\n", a, d, k, a);
      g_string_append_printf (s, "  t%u = ltorch.linear(t%u, t_layers_%u_attention_wq_weight, None)  # t%u: \"cuda:0 bf16[64, 128]\"\n", lq, a, k, lq);
      g_string_append_printf (s, "  t%u = ltorch.linear(t%u, t_layers_%u_attention_wk_weight, None)  # t%u: \"cuda:0 bf16[64, 128]\"\n", lk, a, k, lk);
      g_string_append_printf (s, "  t%u = ltorch.linear(t%u, t_layers_%u_attention_wv_weight, None)  # t%u: \"cuda:0 bf16[64, 128]\"\n", lv, a, k, lv);
      g_string_append_printf (s, "  t%u = ltorch.add(t%u, t%u)  # t%u: \"cuda:0 bf16[64, 128]\"\n", s1, lq, lk, s1);
      g_string_append_printf (s, "  t%u = ltorch.linear(t%u, t_layers_%u_attention_wo_weight, None)  # t%u: \"cuda:0 bf16[64, 128]\"\n", lo, s1, k, lo);
      g_string_append_printf (s, "  t%u = ltorch.add(t%u, t%u)  # t%u: \"cuda:0 bf16[64, 128]\"\n", res, r, lo, res);
      (void) lv;
      r = res;
    }
  g_string_append_printf (s, "  return (t%u,)\n", r);
  return g_string_free (s, FALSE);
}

/* VmRSS and VmHWM of this process, KiB (0 when /proc is not there). */
static void
memory_kib (guint64 *rss, guint64 *hwm)
{
  g_autofree char *status = NULL;

  *rss = *hwm = 0;
  if (!g_file_get_contents ("/proc/self/status", &status, NULL, NULL))
    return;
  for (char *line = status; line && *line; line = strchr (line, '\n') ? strchr (line, '\n') + 1 : NULL)
    {
      if (g_str_has_prefix (line, "VmRSS:"))
        *rss = g_ascii_strtoull (line + 6, NULL, 10);
      else if (g_str_has_prefix (line, "VmHWM:"))
        *hwm = g_ascii_strtoull (line + 6, NULL, 10);
    }
}

static CsLayout *
open_layout (CsTrace *t, const CsRenderOptions *o, double *ms)
{
  g_autoptr(GError) error = NULL;
  gint64 t0 = g_get_monotonic_time ();
  CsLayout *l = cs_layout_new (t, o, NULL, &error);

  *ms = (g_get_monotonic_time () - t0) / 1000.0;
  if (l == NULL)
    printf ("  error: %s\n", error->message);
  return l;
}

/* Mean ms of @frames paints of @l into a 1600 x 1000 image at @scale (<= 0: fitted), centred
 * on the middle of the graph. */
static double
paint_ms (const CsLayout *l, double scale, guint frames)
{
  cairo_surface_t *s = cairo_image_surface_create (CAIRO_FORMAT_ARGB32, 1600, 1000);
  cairo_t *cr = cairo_create (s);
  CsView v;
  gint64 t0;

  cs_view_init_fit (&v, l, 1600, 1000, 24, 1.5);
  if (scale > 0)
    {
      CsRect mid = { (l->bb.x0 + l->bb.x1) / 2, (l->bb.y0 + l->bb.y1) / 2,
                     (l->bb.x0 + l->bb.x1) / 2, (l->bb.y0 + l->bb.y1) / 2 };
      v.scale = scale;
      cs_view_center_on (&v, l, &mid, 1600, 1000);
    }
  t0 = g_get_monotonic_time ();
  for (guint i = 0; i < frames; i++)
    {
      cairo_set_source_rgb (cr, 1, 1, 1);
      cairo_paint (cr);
      cs_draw_layout (cr, l, &v, 1600, 1000, CS_DRAW_EDGE_LABELS);
    }
  cairo_surface_flush (s);
  cairo_destroy (cr);
  cairo_surface_destroy (s);
  return (g_get_monotonic_time () - t0) / 1000.0 / MAX (frames, 1);
}

/* One step of bench_cycle(): lays @t out with @group (nullable) expanded, ms. */
static double
cycle_step (CsTrace *t, const CsRenderOptions *base, CsLayoutCache *cache, const char *group)
{
  CsRenderOptions o;
  double ms;
  CsLayout *l;

  cs_render_options_copy (base, &o);
  g_clear_pointer (&o.cache, cs_layout_cache_unref);
  o.cache = cache ? cs_layout_cache_ref (cache) : NULL;
  if (group != NULL)
    cs_render_options_set_group_expanded (&o, group, CS_RENDER_EXPAND_ON);
  l = open_layout (t, &o, &ms);
  if (l != NULL)
    cs_layout_unref (l);
  cs_render_options_clear (&o);
  return ms;
}

/* Expand / collapse as the app does it, without a layout cache (before) and with one (after,
 * CsRenderOptions.cache as CsGraphView sets it), in the same run: open, expand @group,
 * collapse it, expand it again, expand the group after it (a state not seen: only the
 * grouping is cached).  Prints ms per step and the ratio before / after. */
static void
bench_cycle (CsTrace *t, const CsRenderOptions *base, const char *group)
{
  g_autoptr(CsLayout) probe = cs_layout_new (t, base, NULL, NULL);
  const char *next = NULL;
  double before[5], after[5];
  const char *steps[] = { "open", "expand", "collapse", "expand again", "expand next" };
  gint g;

  if (probe == NULL || probe->grouping == NULL || (g = cs_grouping_find (probe->grouping, group)) < 0)
    return;
  for (guint h = (guint) g + 1; h < probe->grouping->n_groups && next == NULL; h++)
    if (probe->grouping->groups[h].parent == probe->grouping->groups[g].parent)
      next = probe->grouping->groups[h].name;
  for (guint pass = 0; pass < 2; pass++)
    {
      g_autoptr(CsLayoutCache) cache = pass ? cs_layout_cache_new (0) : NULL;
      double *ms = pass ? after : before;

      ms[0] = cycle_step (t, base, cache, NULL);
      ms[1] = cycle_step (t, base, cache, group);
      ms[2] = cycle_step (t, base, cache, NULL);
      ms[3] = cycle_step (t, base, cache, group);
      ms[4] = next ? cycle_step (t, base, cache, next) : 0;
    }
  printf ("  cycle (%s, then %s):", group, next ? next : "-");
  for (guint i = 0; i < G_N_ELEMENTS (steps); i++)
    if (after[i] >= 0.05)
      printf ("\n    %-13s %8.1f -> %8.1f ms  %5.2fx", steps[i], before[i], after[i],
              before[i] / after[i]);
    else
      printf ("\n    %-13s %8.1f -> %8.2f ms  (cache hit)", steps[i], before[i], after[i]);
  printf ("\n");
}

static void
bench_trace (const char *name, CsTrace *t, guint repeat, guint frames, gboolean flat)
{
  CsRenderOptions o;
  g_autoptr(CsLayout) keep = NULL;
  double best_open = G_MAXDOUBLE, best_expand = -1, ms, fit_scale;
  guint64 rss0, rss1, hwm;
  const char *expanded = NULL;
  guint expand_nodes = 0, expand_composed = 0, expand_reused = 0;
  gboolean expand_layered = FALSE;
  CsView fit;

  cs_render_options_init (&o);
  if (flat)
    o.collapse = CS_RENDER_COLLAPSE_FLAT;
  memory_kib (&rss0, &hwm);
  for (guint i = 0; i < repeat; i++)
    {
      CsLayout *l = open_layout (t, &o, &ms);

      if (l == NULL)
        {
          cs_render_options_clear (&o);
          return;
        }
      best_open = MIN (best_open, ms);
      if (i + 1 == repeat)
        keep = l;
      else
        cs_layout_unref (l);
    }
  memory_kib (&rss1, &hwm);
  /* expand the middle layer (or chunk) */
  if (keep->grouping != NULL)
    {
      gint mid = -1;
      guint n_top = 0, k = 0;

      for (guint g = 0; g < keep->grouping->n_groups; g++)
        n_top += keep->grouping->groups[g].parent < 0;
      for (guint g = 0; g < keep->grouping->n_groups; g++)
        if (keep->grouping->groups[g].parent < 0 && k++ == n_top / 2)
          mid = (gint) g;
      if (mid >= 0)
        {
          CsRenderOptions e;

          expanded = keep->grouping->groups[mid].name;
          cs_render_options_copy (&o, &e);
          cs_render_options_set_group_expanded (&e, expanded, CS_RENDER_EXPAND_ON);
          for (guint i = 0; i < repeat; i++)
            {
              g_autoptr(CsLayout) l = open_layout (t, &e, &ms);
              if (l != NULL)
                best_expand = best_expand < 0 ? ms : MIN (best_expand, ms);
              if (l != NULL && i + 1 == repeat)
                {
                  expand_nodes = l->n_nodes;
                  expand_composed = l->composed;
                  expand_reused = l->composed_reused;
                  expand_layered = l->layered;
                }
            }
          cs_render_options_clear (&e);
        }
    }
  cs_view_init_fit (&fit, keep, 1600, 1000, 24, 1.5);
  fit_scale = fit.scale;
  printf ("%-40s %7u %6u %6u %-7s %8.1f %8.1f  %6.2f %6.2f %6.2f  %7.1f %7.1f%s%s\n", name,
          t->n_stmts, keep->n_nodes, keep->n_edges, keep->layered ? "layered" : "dot", best_open,
          best_expand, paint_ms (keep, 0, frames), paint_ms (keep, 0.75, frames),
          paint_ms (keep, 2.0, frames), (rss1 > rss0 ? rss1 - rss0 : 0) / 1024.0, hwm / 1024.0,
          expanded ? "  expand: " : "", expanded ? expanded : "");
  (void) fit_scale;
  if (expanded != NULL)
    {
      g_autofree char *how = expand_composed
        ? g_strdup_printf ("%u group(s) laid out on their own (%u from the piece cache), composed, ",
                           expand_composed, expand_reused)
        : g_strdup ("");

      printf ("  expanded: %u nodes, %s%s\n", expand_nodes, how, expand_layered ? "layered" : "dot");
    }
  if (keep->grouping != NULL && expanded != NULL)
    bench_cycle (t, &o, expanded);
  cs_render_options_clear (&o);
}

static void
bench_text (const char *name, const char *text, guint repeat, guint frames, gboolean flat)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTrace) t = cs_parse_trace (text, name, &error);

  if (t == NULL)
    {
      fprintf (stderr, "bench-render: %s\n", error->message);
      return;
    }
  bench_trace (name, t, repeat, frames, flat);
}

int
main (int argc, char **argv)
{
  gint repeat = 3, frames = 10, big = 50000;
  gboolean flat = FALSE;
  gint write_n = 0, write_layers = 0;
  g_auto(GStrv) files = NULL;
  g_autoptr(GOptionContext) ctx = g_option_context_new ("[FILE...] - render/ benchmark");
  g_autoptr(GError) error = NULL;
  GOptionEntry entries[] = {
    { "repeat", 'r', 0, G_OPTION_ARG_INT, &repeat, "Runs per trace; the best is reported (default 3)", "N" },
    { "frames", 'f', 0, G_OPTION_ARG_INT, &frames, "Frames painted per zoom (default 10)", "N" },
    { "flat", 0, 0, G_OPTION_ARG_NONE, &flat, "Draw flat (no groups), as before grouping", NULL },
    { "big", 0, 0, G_OPTION_ARG_INT, &big, "Statements of the largest generated chain (default 50000)", "N" },
    { "write-chain", 0, 0, G_OPTION_ARG_INT, &write_n, "Write the generated chain of about N statements to the FILE given and exit (to open it in the app)", "N" },
    { "write-model", 0, 0, G_OPTION_ARG_INT, &write_layers, "Write the generated model of N layers to the FILE given and exit", "N" },
    { G_OPTION_REMAINING, 0, 0, G_OPTION_ARG_FILENAME_ARRAY, &files, NULL, "FILE..." },
    { NULL },
  };
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
  frames = MAX (frames, 1);
  if (write_n > 0 || write_layers > 0)
    {
      g_autofree char *text = write_n > 0 ? generate_chain (((guint) write_n - 1) / 5)
                                          : generate_model ((guint) write_layers);

      if (files == NULL || files[0] == NULL || !g_file_set_contents (files[0], text, -1, &error))
        {
          fprintf (stderr, "bench-render: --write-chain / --write-model: %s\n",
                   error ? error->message : "give the file to write");
          return 2;
        }
      return 0;
    }
  printf ("%-40s %7s %6s %6s %-7s %8s %8s  %6s %6s %6s  %7s %7s\n", "trace", "stmts", "nodes",
          "edges", "engine", "open ms", "expand", "p.fit", "p.75%", "p.200%", "RSS+MiB", "peakMiB");
  {
    g_autofree char *model = generate_model (32);
    bench_text ("generated model, 32 layers", model, (guint) repeat, (guint) frames, flat);
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
                     (guint) frames, flat);
      }
  for (guint n = 10000; n <= (guint) big; n = n < 50000 ? 50000 : n * 2)
    {
      g_autofree char *text = generate_chain ((n - 1) / 5);
      g_autofree char *name = g_strdup_printf ("generated chain, %u statements", ((n - 1) / 5) * 5 + 1);

      bench_text (name, text, (guint) repeat, (guint) frames, flat);
    }
  for (guint i = 0; files && files[i]; i++)
    {
      g_autoptr(CsTraceList) list = cs_parse_file (files[i], &error);
      if (list == NULL)
        {
          fprintf (stderr, "bench-render: %s\n", error->message);
          return 1;
        }
      bench_trace (files[i], g_ptr_array_index (list->traces, 0), (guint) repeat, (guint) frames, flat);
    }
  return 0;
}
