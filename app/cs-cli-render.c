/* cs-cli-render.c: `castscope-cli render FILE [--policy k=v ...] [--trace forward|backward]
 * [--pass NAME] [--expand] [--collapse LEVEL] [--expand-group NAME] [--no-fold]
 * -o out.svg|out.png|out.pdf|out.dot`.
 *
 * Without --policy / --pass / --trace / --grad the file's trace is drawn as it is; with any of
 * them the pass pipeline runs and the chosen trace is drawn.  The picture comes from render/'s
 * painter, the same one the GUI draws with.
 */
#include "cs-config.h"

#include <stdio.h>
#include <string.h>

#include "cs-cli.h"
#include "cs-lens.h"
#include "cs-meta.h"
#include "cs-cli-policy.h"
#include "cs-parse.h"
#include "cs-render.h"
#include "cs-validate.h"

static gboolean
parse_detail (const char *text, CsRenderDetail *out)
{
  static const struct { const char *name; CsRenderDetail d; } names[] = {
    { "auto", CS_RENDER_DETAIL_AUTO },
    { "statements", CS_RENDER_DETAIL_STATEMENTS },
    { "prims", CS_RENDER_DETAIL_PRIMS },
    { "regions", CS_RENDER_DETAIL_REGIONS },
  };

  for (gsize i = 0; i < G_N_ELEMENTS (names); i++)
    if (strcmp (text, names[i].name) == 0)
      {
        *out = names[i].d;
        return TRUE;
      }
  return FALSE;
}

/* Why an --expand-group name is not found: the groups the trace has, the first few of the top
 * level then "...", and how their modules are named. */
static char *
group_names (const CsGrouping *grouping)
{
  GString *s = g_string_new (NULL);
  const CsGroup *child = NULL;
  guint n_top = 0, n_listed = 0;

  if (grouping->n_groups == 0)
    {
      g_string_append_printf (s, "this trace has no groups (no layer parameters such as "
                              "t_layers_0_..., and %u calls or fewer, so no chunks)",
                              (guint) CS_GROUP_CHUNK_MIN);
      return g_string_free (s, FALSE);
    }
  g_string_append (s, "no such group in this trace; it has ");
  for (guint g = 0; g < grouping->n_groups; g++)
    {
      if (grouping->groups[g].parent >= 0)
        {
          if (child == NULL)
            child = &grouping->groups[g];
          continue;
        }
      if (n_listed < 5)
        {
          g_string_append_printf (s, "%s%s", n_listed ? ", " : "", grouping->groups[g].name);
          n_listed++;
        }
      n_top++;
    }
  if (n_top > n_listed)
    g_string_append_printf (s, ", ... (%u in all)", n_top);
  if (child)
    g_string_append_printf (s, ", and groups inside them such as %s", child->name);
  return g_string_free (s, FALSE);
}

/* A problem of the trace that render draws through and the commands that transform refuse. */
static void
warn_drawn_as_printed (const char *problem)
{
  fprintf (stderr, "castscope-cli: render: warning: %s (drawn as printed; stats, transform and "
           "run refuse it)\n", problem);
}

int
cs_cli_cmd_render (int argc, char **argv)
{
  g_auto(GStrv) policy_args = NULL;
  g_autofree char *grad = NULL;
  g_autofree char *pass = NULL;
  g_autofree char *which = NULL;
  g_autofree char *output = NULL;
  g_autofree char *detail_text = NULL;
  g_autofree char *collapse_text = NULL;
  g_auto(GStrv) expand_groups = NULL;
  g_autofree char *desc = NULL;
  gboolean expand = FALSE, node_shapes = FALSE, no_edge_labels = FALSE, bookkeeping = FALSE;
  gboolean no_legend = FALSE, verbose = FALSE, no_fold = FALSE;
  gint index = 0, max_nodes = 0;
  double scale = 1.5;
  g_autoptr(GOptionContext) ctx = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(CsPipeline) pl = NULL;
  gboolean precision = FALSE;
  g_autoptr(CsTraceList) list = NULL;
  g_autoptr(CsLayout) layout = NULL;
  CsTrace *trace = NULL;
  CsRenderOptions opts;
  CsExportFormat format;
  CsDrawFlags flags = CS_DRAW_DEFAULT;
  g_autofree char *inductor = NULL;
  GOptionEntry entries[] = {
    { "output", 'o', 0, G_OPTION_ARG_FILENAME, &output, "Output file: .svg, .png, .pdf or .dot (required)", "FILE" },
    { "policy", 'p', 0, G_OPTION_ARG_STRING_ARRAY, &policy_args, "Set a cast policy knob and run the pipeline (repeatable)", "KEY=VALUE" },
    { "grad", 'g', 0, G_OPTION_ARG_STRING, &grad, "Inputs that require grad (runs the pipeline): names, 'auto', 'all' or 'none'", "A,B|auto|all|none" },
    { "trace", 't', 0, G_OPTION_ARG_STRING, &which, "Final trace to draw (runs the pipeline): forward (default) or backward", "forward|backward" },
    { "pass", 0, 0, G_OPTION_ARG_STRING, &pass, "Draw the trace made by this pass (runs the pipeline)", "NAME" },
    { "index", 'i', 0, G_OPTION_ARG_INT, &index, "Which trace of the file (default 0)", "N" },
    { "inductor", 0, 0, G_OPTION_ARG_STRING, &inductor, CS_CLI_INDUCTOR_HELP, "FILE|auto" },
    { "expand", 'e', 0, G_OPTION_ARG_NONE, &expand, "Expand every statement into its prims (same as --detail prims)", NULL },
    { "detail", 'd', 0, G_OPTION_ARG_STRING, &detail_text, "auto (default), statements, prims or regions", "LEVEL" },
    { "collapse", 0, 0, G_OPTION_ARG_STRING, &collapse_text, "Groups drawn as one node: auto (default: the layers of a model, the chunks of a long trace), layers, modules, none (boxes only) or flat (no groups)", "LEVEL" },
    { "expand-group", 0, 0, G_OPTION_ARG_STRING_ARRAY, &expand_groups, "Draw this group expanded (repeatable), e.g. layers.3", "NAME" },
    { "no-fold", 0, 0, G_OPTION_ARG_NONE, &no_fold, "Draw every collapsed layer (default: a run of consecutive layers with the same structure is one node, 'layers 0-7: same structure, 1 shown'; --expand-group layers.3 draws one of them)", NULL },
    { "max-nodes", 0, 0, G_OPTION_ARG_INT, &max_nodes, "Node count above which 'auto' collapses fusion regions (default 1200)", "N" },
    { "shapes", 0, 0, G_OPTION_ARG_NONE, &node_shapes, "Print the output type in node labels", NULL },
    { "no-edge-labels", 0, 0, G_OPTION_ARG_NONE, &no_edge_labels, "Do not label edges with tensor shapes", NULL },
    { "bookkeeping", 0, 0, G_OPTION_ARG_NONE, &bookkeeping, "Also draw unpacks, checks and other bookkeeping calls", NULL },
    { "no-legend", 0, 0, G_OPTION_ARG_NONE, &no_legend, "Leave the dtype legend out", NULL },
    { "scale", 's', 0, G_OPTION_ARG_DOUBLE, &scale, "PNG pixels per point (default 1.5)", "S" },
    { "verbose", 'v', 0, G_OPTION_ARG_NONE, &verbose, "Print node, edge and region counts and the layout time", NULL },
    { "precision", 0, 0, G_OPTION_ARG_NONE, &precision, "The precision lens: compute dtypes on edges (dashes), rounding points; with the pipeline (--policy, --trace or --pass) also the casts you wrote that remove-redundant-casts dropped", NULL },
    { NULL },
  };

  ctx = cs_cli_option_context_new ("FILE -o OUT", "draw a trace as a graph (dtype-coloured edges, "
                                   "fusion regions) to SVG, PNG, PDF or DOT");
  g_option_context_add_main_entries (ctx, entries, NULL);
  desc = cs_cli_policy_describe ();
  cs_cli_set_help (ctx, desc, CS_CLI_HELP_TRACE);
  if (!cs_cli_parse_options (ctx, &argc, &argv))
    return CS_CLI_EXIT_USAGE;
  cs_cli_set_inductor (inductor);
  if (argc != 2)
    {
      cs_cli_error ("render: expected one FILE (try --help)");
      return CS_CLI_EXIT_USAGE;
    }
  if (output == NULL)
    {
      cs_cli_error ("render: -o FILE is required (.svg, .png, .pdf or .dot)");
      return CS_CLI_EXIT_USAGE;
    }
  if (!cs_export_format_from_path (output, &format))
    {
      cs_cli_error ("render: cannot tell the format of '%s': use .svg, .png, .pdf or .dot", output);
      return CS_CLI_EXIT_USAGE;
    }
  if (which && strcmp (which, "forward") != 0 && strcmp (which, "backward") != 0)
    {
      cs_cli_error ("render: --trace must be 'forward' or 'backward', not '%s'", which);
      return CS_CLI_EXIT_USAGE;
    }
  if (index < 0)
    {
      cs_cli_error ("render: --index must be >= 0, not %d", index);
      return CS_CLI_EXIT_USAGE;
    }
  if (max_nodes < 0)
    {
      cs_cli_error ("render: --max-nodes must be >= 0, not %d", max_nodes);
      return CS_CLI_EXIT_USAGE;
    }
  if (!(scale > 0 && scale <= 16))
    {
      cs_cli_error ("render: --scale must be above 0 and at most 16 (pixels per point), not %g",
                    scale);
      return CS_CLI_EXIT_USAGE;
    }
  cs_render_options_init (&opts);
  opts.hints = CS_RENDER_HINTS_CLI;   /* the notes name render's options, not the app's gestures */
  if (detail_text && !parse_detail (detail_text, &opts.detail))
    {
      cs_cli_error ("render: --detail must be auto, statements, prims or regions, not '%s'", detail_text);
      cs_render_options_clear (&opts);
      return CS_CLI_EXIT_USAGE;
    }
  if (collapse_text && !cs_render_collapse_from_string (collapse_text, &opts.collapse))
    {
      cs_cli_error ("render: --collapse must be auto, layers, modules, none or flat, not '%s'", collapse_text);
      cs_render_options_clear (&opts);
      return CS_CLI_EXIT_USAGE;
    }
  for (guint i = 0; expand_groups && expand_groups[i]; i++)
    cs_render_options_set_group_expanded (&opts, expand_groups[i], CS_RENDER_EXPAND_ON);
  if (expand)
    opts.detail = CS_RENDER_DETAIL_PRIMS;
  opts.max_nodes = (guint) max_nodes;
  opts.node_shapes = node_shapes;
  opts.edge_labels = !no_edge_labels;
  opts.bookkeeping = bookkeeping;
  opts.unfold_repeats = no_fold;
  if (no_legend)
    flags &= ~CS_DRAW_LEGEND;

  if (policy_args || grad || which || pass || inductor)
    {
      CsPolicy policy;

      if (!cs_cli_policy_from_strv (policy_args, &policy, &error))
        {
          cs_cli_error ("render: %s", error->message);
          cs_render_options_clear (&opts);
          return CS_CLI_EXIT_USAGE;
        }
      pl = cs_cli_run_pipeline (argv[1], (guint) index, &policy, grad, &error);
      if (pl == NULL)
        {
          cs_cli_error ("%s", error->message);
          cs_render_options_clear (&opts);
          return cs_cli_exit_for_error (error);
        }
      if (pass)
        {
          trace = cs_pipeline_find_trace (pl, pass);
          if (trace == NULL)
            {
              GString *names = g_string_new (NULL);
              for (guint i = 0; i < cs_pipeline_n_passes (pl); i++)
                g_string_append_printf (names, "%s%s", i ? ", " : "", cs_pipeline_pass_name (pl, i));
              cs_cli_error ("render: no pass named '%s' ran (passes: %s)", pass, names->str);
              g_string_free (names, TRUE);
              cs_render_options_clear (&opts);
              return CS_CLI_EXIT_USAGE;
            }
        }
      else
        trace = (which && strcmp (which, "backward") == 0) ? cs_pipeline_get_backward (pl)
                                                          : cs_pipeline_get_forward (pl);
      if (trace == NULL)
        {
          g_autofree char *why = cs_cli_no_backward_reason (pl, argv[1]);
          cs_cli_error ("render: there is no backward trace: %s", why);
          cs_render_options_clear (&opts);
          return CS_CLI_EXIT_USAGE;   /* --trace backward names what the input lacks */
        }
    }
  else
    {
      list = cs_parse_file (argv[1], &error);
      if (list == NULL)
        {
          cs_cli_error ("%s", error->message);
          cs_render_options_clear (&opts);
          return CS_CLI_EXIT_INPUT;
        }
      if ((guint) index >= list->traces->len)
        {
          cs_cli_error ("render: %s holds %u trace(s); --index %d is out of range", argv[1],
                        list->traces->len, index);
          cs_render_options_clear (&opts);
          return CS_CLI_EXIT_USAGE;
        }
      trace = g_ptr_array_index (list->traces, index);
      /* the trace as printed is drawn even when its types conflict (that is what there is to
       * look at), with the conflict the other commands refuse it for */
      if (!cs_meta_check_trace (trace, &error))
        {
          warn_drawn_as_printed (error->message);
          g_clear_error (&error);
        }
      /* the input checks of cs_pipeline_run() that the drawing does not need */
      if (!cs_trace_is_final (trace) && cs_trace_get_return (trace) == NULL)
        {
          g_autofree char *problem = g_strdup_printf ("%s: trace '%s' has no return statement: "
                                                      "is the file cut short?", argv[1],
                                                      trace->name ? trace->name : "?");
          warn_drawn_as_printed (problem);
        }
      else if (!cs_trace_is_final (trace) && !cs_validate_return (trace, &error))
        {
          warn_drawn_as_printed (error->message);
          g_clear_error (&error);
        }
    }

  for (guint i = 0; expand_groups && expand_groups[i]; i++)
    {
      g_autoptr(CsGrouping) grouping = cs_grouping_new (trace);

      if (cs_grouping_find (grouping, expand_groups[i]) < 0)
        {
          g_autofree char *names = group_names (grouping);

          cs_cli_error ("render: --expand-group %s: %s", expand_groups[i], names);
          cs_render_options_clear (&opts);
          return CS_CLI_EXIT_USAGE;
        }
    }
  if (expand || opts.detail == CS_RENDER_DETAIL_PRIMS)
    {
      gboolean any_subs = FALSE;

      for (guint i = 0; i < trace->n_stmts && !any_subs; i++)
        any_subs = trace->stmts[i]->kind == CS_STMT_CALL && trace->stmts[i]->n_subs > 0;
      if (!any_subs)
        fprintf (stderr, "castscope-cli: render: note: --%s draws nothing more here: no statement "
                 "of this trace carries its decomposition (a trace printed without subsymbol "
                 "comments, like Thunder's initial trace.python()); --pass decompose draws the "
                 "prims castscope derives\n", expand ? "expand" : "detail prims");
    }
  layout = cs_layout_new (trace, &opts, NULL, &error);
  cs_render_options_clear (&opts);
  if (layout != NULL && precision)
    {
      cs_layout_set_precision_lens (layout, TRUE);
      if (pl != NULL && cs_pipeline_find_trace (pl, "fuse") != NULL)
        {
          g_autoptr(GPtrArray) removed = cs_lens_removed_user_casts (
            cs_pipeline_find_trace (pl, "initial"), cs_pipeline_find_trace (pl, "fuse"),
            cs_pipeline_find_trace (pl, "remove-redundant-casts"));

          cs_layout_mark_user_casts (layout, removed);
        }
    }
  if (layout == NULL)
    {
      cs_cli_error ("render: %s: %s", argv[1], error->message);
      return CS_CLI_EXIT_INPUT;
    }
  for (guint i = 0; layout->notes[i]; i++)
    fprintf (stderr, "castscope-cli: render: note: %s\n", layout->notes[i]);
  if (format == CS_EXPORT_PNG)
    {
      double used = cs_draw_export_png_scale (layout, scale, flags);
      if (used > 0 && used < scale)
        fprintf (stderr, "castscope-cli: render: note: --scale %g gives a PNG over 32,000 px a "
                 "side or 120 Mpixel; drawn at %.3g pixels per point (SVG keeps every detail)\n",
                 scale, used);
    }
  if (!cs_draw_export (layout, format, output, scale, flags, &error))
    {
      cs_cli_error ("render: %s", error->message);
      return CS_CLI_EXIT_INPUT;
    }
  if (verbose)
    printf ("%s: %u nodes, %u edges, %u clusters, layout %.1f ms, %.0f x %.0f pt -> %s\n",
            layout->title, layout->n_nodes, layout->n_edges, layout->n_clusters,
            layout->layout_ms, layout->bb.x1 - layout->bb.x0, layout->bb.y1 - layout->bb.y0,
            output);
  return CS_CLI_EXIT_OK;
}
