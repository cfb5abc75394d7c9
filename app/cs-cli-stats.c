/* cs-cli-stats.c: `castscope-cli stats FILE [--policy k=v ...] [--grad ...] [--json]`:
 * casts, regions, matmuls (tensor-core eligible or not), FLOPs, bytes and the estimated H200
 * time of the final forward and backward traces, total and per region (core/cs-stats.h). */
#include "cs-config.h"

#include <stdio.h>
#include <string.h>

#if CS_HAVE_JSON
#include <json-glib/json-glib.h>
#endif

#include "cs-cli.h"
#include "cs-cli-policy.h"
#include "cs-stats.h"

/* The executors stats reports regions for, in the order it prints them. */
static const CsExecutor stats_executors[] = {
  CS_EXECUTOR_NVFUSER, CS_EXECUTOR_TORCHCOMPILE_XENTROPY, CS_EXECUTOR_SDPA, CS_EXECUTOR_TORCH,
};

#if CS_HAVE_JSON
static void
entry_members (JsonBuilder *b, const CsStatsEntry *e, gboolean region)
{
  json_builder_set_member_name (b, "statements");
  json_builder_add_int_value (b, e->n_statements);
  json_builder_set_member_name (b, "casts");
  json_builder_add_int_value (b, e->n_casts);
  json_builder_set_member_name (b, "upcasts");
  json_builder_add_int_value (b, e->n_upcasts);
  json_builder_set_member_name (b, "downcasts");
  json_builder_add_int_value (b, e->n_downcasts);
  json_builder_set_member_name (b, "matmuls");
  json_builder_add_int_value (b, e->n_matmuls);
  json_builder_set_member_name (b, "tensor_core_matmuls");
  json_builder_add_int_value (b, e->n_tensor_core_matmuls);
  json_builder_set_member_name (b, "flops");
  json_builder_add_double_value (b, e->flops);
  json_builder_set_member_name (b, "bytes");
  json_builder_add_double_value (b, e->bytes_read + e->bytes_written);
  json_builder_set_member_name (b, "bytes_read");
  json_builder_add_double_value (b, e->bytes_read);
  json_builder_set_member_name (b, "bytes_written");
  json_builder_add_double_value (b, e->bytes_written);
  json_builder_set_member_name (b, "est_ms");
  json_builder_add_double_value (b, e->est_ms);
  if (region)
    {
      json_builder_set_member_name (b, "end_reason");
      json_builder_add_string_value (b, e->why ? e->why : "");
      json_builder_set_member_name (b, "backward");
      json_builder_add_boolean_value (b, e->backward);
    }
}

static void
add_trace_json (JsonBuilder *b, const char *key, const CsTrace *t)
{
  g_autoptr(CsTraceStats) st = NULL;

  json_builder_set_member_name (b, key);
  if (t == NULL)
    {
      json_builder_add_null_value (b);
      return;
    }
  st = cs_stats_compute (t);
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "trace");
  json_builder_add_string_value (b, t->name ? t->name : "");
  entry_members (b, &st->total, FALSE);
  json_builder_set_member_name (b, "n_regions");
  json_builder_add_int_value (b, st->total.n_regions);
  /* regions (and claimed statements) by executor, in a fixed order */
  json_builder_set_member_name (b, "regions_by_executor");
  json_builder_begin_object (b);
  for (guint k = 0; k < G_N_ELEMENTS (stats_executors); k++)
    {
      json_builder_set_member_name (b, cs_executor_name (stats_executors[k]));
      json_builder_add_int_value (b, st->by_executor[stats_executors[k]]);
    }
  json_builder_end_object (b);
  json_builder_set_member_name (b, "regions");
  json_builder_begin_array (b);
  for (guint i = 0; i < st->regions->len; i++)
    {
      const CsStatsEntry *e = &g_array_index (st->regions, CsStatsEntry, i);
      json_builder_begin_object (b);
      json_builder_set_member_name (b, "name");
      json_builder_add_string_value (b, e->name ? e->name : "");
      entry_members (b, e, TRUE);
      json_builder_end_object (b);
    }
  json_builder_end_array (b);
  json_builder_end_object (b);
}
#endif

static void
print_trace_text (const char *label, const CsTrace *t)
{
  g_autoptr(CsTraceStats) st = NULL;
  const CsStatsEntry *e;

  if (t == NULL)
    {
      printf ("%s: none\n", label);
      return;
    }
  st = cs_stats_compute (t);
  e = &st->total;
  {
    g_autofree char *est = cs_cli_format_ms (e->est_ms);
    printf ("%s (%s): %u statements, %u regions, %u casts (%u up, %u down), %u matmuls "
            "(%u tensor-core), %.4g FLOP, %.4g bytes, est %s on H200\n",
            label, t->name ? t->name : "?", e->n_statements, e->n_regions, e->n_casts,
            e->n_upcasts, e->n_downcasts, e->n_matmuls, e->n_tensor_core_matmuls, e->flops,
            e->bytes_read + e->bytes_written, est);
  }
  printf ("  by executor:");
  for (guint k = 0; k < G_N_ELEMENTS (stats_executors); k++)
    printf ("%s %s %u", k ? "," : "", cs_executor_name (stats_executors[k]),
            st->by_executor[stats_executors[k]]);
  printf ("\n");
  for (guint i = 0; i < st->regions->len; i++)
    {
      const CsStatsEntry *r = &g_array_index (st->regions, CsStatsEntry, i);
      g_autofree char *est = cs_cli_format_ms (r->est_ms);
      printf ("  %-12s %4u prims %3u casts %2u matmuls %10.4g bytes %9s  ended: %s\n",
              r->name, r->n_statements, r->n_casts, r->n_matmuls,
              r->bytes_read + r->bytes_written, est, r->why ? r->why : "-");
    }
}

int
cs_cli_cmd_stats (int argc, char **argv)
{
  g_auto(GStrv) policy_args = NULL;
  g_autofree char *grad = NULL;
  g_autofree char *desc = NULL;
  gboolean json = FALSE;
  gint index = 0;
  g_autoptr(GOptionContext) ctx = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(CsPipeline) pl = NULL;
  CsPolicy policy;
  CsTrace *fw, *bw;
  GOptionEntry entries[] = {
    { "policy", 'p', 0, G_OPTION_ARG_STRING_ARRAY, &policy_args, "Set a cast policy knob (repeatable)", "KEY=VALUE" },
    { "grad", 'g', 0, G_OPTION_ARG_STRING, &grad, "Inputs that require grad: names, 'auto' (default: float inputs but module buffers, as Thunder), 'all' or 'none'", "A,B|auto|all|none" },
    { "json", 'j', 0, G_OPTION_ARG_NONE, &json, "Print JSON: {policy, forward, backward}, each with totals and a regions array", NULL },
    { "index", 'i', 0, G_OPTION_ARG_INT, &index, "Which trace of the file (default 0)", "N" },
    { NULL },
  };

  ctx = g_option_context_new ("FILE - casts, regions, matmuls, FLOPs, bytes and estimated time");
  g_option_context_add_main_entries (ctx, entries, NULL);
  desc = cs_cli_policy_describe ();
  g_option_context_set_description (ctx, desc);
  if (!cs_cli_parse_options (ctx, &argc, &argv))
    return CS_CLI_EXIT_USAGE;
  if (index < 0)
    {
      cs_cli_error ("stats: --index must be >= 0");
      return CS_CLI_EXIT_USAGE;
    }
  if (argc != 2)
    {
      cs_cli_error ("stats: expected one FILE (try --help)");
      return CS_CLI_EXIT_USAGE;
    }
  if (!cs_cli_policy_from_strv (policy_args, &policy, &error))
    {
      cs_cli_error ("stats: %s", error->message);
      return CS_CLI_EXIT_USAGE;
    }
#if !CS_HAVE_JSON
  if (json)
    {
      cs_cli_error ("stats: --json needs json-glib, which this build lacks");
      return CS_CLI_EXIT_USAGE;
    }
#endif
  pl = cs_cli_run_pipeline (argv[1], (guint) index, &policy, grad, &error);
  if (pl == NULL)
    {
      cs_cli_error ("%s", error->message);
      return cs_cli_exit_for_error (error);
    }
  fw = cs_pipeline_get_forward (pl);
  bw = cs_pipeline_get_backward (pl);
  if (fw == bw)
    fw = NULL; /* the file's own backward_fn */

#if CS_HAVE_JSON
  if (json)
    {
      g_autoptr(JsonBuilder) b = json_builder_new ();
      g_autoptr(JsonGenerator) gen = json_generator_new ();
      g_autoptr(JsonNode) root = NULL;
      g_autofree char *pol = cs_policy_to_string (cs_pipeline_get_policy (pl));
      g_autofree char *text = NULL;

      json_builder_begin_object (b);
      json_builder_set_member_name (b, "file");
      json_builder_add_string_value (b, argv[1]);
      json_builder_set_member_name (b, "policy");
      json_builder_add_string_value (b, pol);
      json_builder_set_member_name (b, "input_was_final");
      json_builder_add_boolean_value (b, cs_pipeline_input_was_final (pl));
      add_trace_json (b, "forward", fw);
      add_trace_json (b, "backward", bw);
      json_builder_end_object (b);
      root = json_builder_get_root (b);
      json_generator_set_root (gen, root);
      json_generator_set_pretty (gen, TRUE);
      text = json_generator_to_data (gen, NULL);
      printf ("%s\n", text);
      return CS_CLI_EXIT_OK;
    }
#endif
  {
    g_autofree char *pol = cs_policy_to_string (cs_pipeline_get_policy (pl));
    printf ("policy: %s%s\n", pol, cs_pipeline_input_was_final (pl) ? " (input already final: "
                                                                       "no pass ran)" : "");
  }
  print_trace_text ("forward", fw);
  print_trace_text ("backward", bw);
  return CS_CLI_EXIT_OK;
}
