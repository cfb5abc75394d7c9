/* cs-cli-diff.c: `castscope-cli diff FILE --policy k=v ... --vs k=v ...`: casts added and
 * removed, regions split and merged between two cast policies, forward and backward
 * (core/cs-diff.h). */
#include "cs-config.h"

#include <stdio.h>
#include <string.h>

#include "cs-cli.h"
#include "cs-cli-policy.h"
#include "cs-diff.h"
#include "cs-parse.h"

static void
print_regions (const char *verb, GPtrArray *arr)
{
  for (guint i = 0; i < arr->len; i++)
    {
      const CsDiffRegion *r = arr->pdata[i];
      printf ("  region %s %s into", r->region->callee, verb);
      for (guint j = 0; j < r->others->len; j++)
        printf ("%s %s", j ? "," : "", ((const CsStmt *) r->others->pdata[j])->callee);
      printf ("\n");
    }
}

static void
print_casts (const char *sign, GPtrArray *arr)
{
  for (guint i = 0; i < arr->len; i++)
    {
      const CsDiffCast *c = arr->pdata[i];
      const CsProxy *out = cs_stmt_get_output (c->stmt);
      printf ("  %s cast %s -> %s x%u (e.g. %s, from initial statement %u%s%s)\n", sign,
              cs_dtype_short_name (c->from), cs_dtype_short_name (c->to), c->count,
              out ? out->name : "?", c->origin, c->region ? ", in " : "",
              c->region ? c->region : "");
    }
}

static guint
print_diff (const char *label, const CsTrace *a, const CsTrace *b)
{
  g_autoptr(CsTraceDiff) d = NULL;

  if (a == NULL || b == NULL)
    {
      printf ("%s: %s\n", label, (a == NULL && b == NULL) ? "none" : "only one policy has it");
      return a == b ? 0 : 1;
    }
  d = cs_trace_diff (a, b);
  printf ("%s: %u -> %u regions, %u cast kinds added, %u removed, %u regions split, %u merged\n",
          label, d->n_regions_a, d->n_regions_b, d->casts_added->len, d->casts_removed->len,
          d->regions_split->len, d->regions_merged->len);
  print_casts ("+", d->casts_added);
  print_casts ("-", d->casts_removed);
  /* split: a region of A spread over several regions of B; merged: the converse */
  print_regions ("split", d->regions_split);
  for (guint i = 0; i < d->regions_merged->len; i++)
    {
      const CsDiffRegion *r = d->regions_merged->pdata[i];
      printf ("  regions");
      for (guint j = 0; j < r->others->len; j++)
        printf ("%s %s", j ? "," : "", ((const CsStmt *) r->others->pdata[j])->callee);
      printf (" merged into %s\n", r->region->callee);
    }
  return cs_trace_diff_is_empty (d) ? 0 : 1;
}

int
cs_cli_cmd_diff (int argc, char **argv)
{
  g_auto(GStrv) policy_a = NULL;
  g_auto(GStrv) policy_b = NULL;
  g_autofree char *grad = NULL;
  g_autofree char *desc = NULL;
  gint index = 0;
  g_autoptr(GOptionContext) ctx = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTraceList) list = NULL;
  g_autoptr(CsPipeline) pa = NULL;
  g_autoptr(CsPipeline) pb = NULL;
  CsPolicy a, b;
  g_autofree char *sa = NULL;
  g_autofree char *sb = NULL;
  GOptionEntry entries[] = {
    { "policy", 'p', 0, G_OPTION_ARG_STRING_ARRAY, &policy_a, "Policy A: a knob (repeatable; unset knobs are Thunder's defaults)", "KEY=VALUE" },
    { "vs", 'v', 0, G_OPTION_ARG_STRING_ARRAY, &policy_b, "Policy B: a knob (repeatable)", "KEY=VALUE" },
    { "grad", 'g', 0, G_OPTION_ARG_STRING, &grad, "Inputs that require grad: names, 'auto' (default: float inputs but module buffers, as Thunder), 'all' or 'none'", "A,B|auto|all|none" },
    { "index", 'i', 0, G_OPTION_ARG_INT, &index, "Which trace of the file (default 0)", "N" },
    { NULL },
  };

  ctx = g_option_context_new ("FILE - casts and regions that change between two cast policies");
  g_option_context_add_main_entries (ctx, entries, NULL);
  desc = cs_cli_policy_describe ();
  g_option_context_set_description (ctx, desc);
  if (!cs_cli_parse_options (ctx, &argc, &argv))
    return CS_CLI_EXIT_USAGE;
  if (index < 0)
    {
      cs_cli_error ("diff: --index must be >= 0");
      return CS_CLI_EXIT_USAGE;
    }
  if (argc != 2)
    {
      cs_cli_error ("diff: expected one FILE (try --help)");
      return CS_CLI_EXIT_USAGE;
    }
  if (!cs_cli_policy_from_strv (policy_a, &a, &error)
      || !cs_cli_policy_from_strv (policy_b, &b, &error))
    {
      cs_cli_error ("diff: %s", error->message);
      return CS_CLI_EXIT_USAGE;
    }
  /* parse once: "-" (stdin) can be read only once */
  list = cs_parse_file (argv[1], &error);
  if (list == NULL)
    {
      cs_cli_error ("%s", error->message);
      return CS_CLI_EXIT_INPUT;
    }
  pa = cs_cli_run_pipeline_on_list (list, argv[1], (guint) index, &a, grad, &error);
  if (pa == NULL)
    {
      if (error->domain == G_OPTION_ERROR)
        cs_cli_error ("%s", error->message);
      else
        cs_cli_error ("%s (policy A)", error->message);
      return cs_cli_exit_for_error (error);
    }
  pb = cs_cli_run_pipeline_on_list (list, argv[1], (guint) index, &b, grad, &error);
  if (pb == NULL)
    {
      if (error->domain == G_OPTION_ERROR)
        cs_cli_error ("%s", error->message);
      else
        cs_cli_error ("%s (policy B)", error->message);
      return cs_cli_exit_for_error (error);
    }
  sa = cs_policy_to_string (&a);
  sb = cs_policy_to_string (&b);
  printf ("A: %s\nB: %s\n", sa, sb);
  print_diff ("forward", cs_pipeline_get_forward (pa), cs_pipeline_get_forward (pb));
  if (cs_pipeline_get_backward (pa) || cs_pipeline_get_backward (pb))
    print_diff ("backward", cs_pipeline_get_backward (pa), cs_pipeline_get_backward (pb));
  return CS_CLI_EXIT_OK;
}
