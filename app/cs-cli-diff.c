/* cs-cli-diff.c: `castscope-cli diff FILE --policy k=v ... --vs k=v ...`: casts added and
 * removed, regions kept, new, removed, split and merged between two cast policies, forward
 * and backward (core/cs-diff.h), and for a distributed trace the dtype and bytes of each
 * collective. */
#include "cs-config.h"

#include <stdio.h>
#include <string.h>

#include "cs-cli.h"
#include "cs-cli-policy.h"
#include "cs-diff.h"
#include "cs-parse.h"
#include "cs-stats.h"

/* One line per region of @arr that maps onto two or more of the other trace: "region
 * A:nvFusion4 split into B:nvFusion7, B:nvFusion8" (@own "A", @other "B") or
 * "regions A:nvFusion1, A:nvFusion2 merged into B:nvFusion3" (@own "B", @other "A", @merged
 * TRUE): both traces number their regions nvFusion0, 1, ... on their own, so each name says
 * whose region it is. */
static void
print_regions (GPtrArray *arr, const char *own, const char *other, gboolean merged)
{
  for (guint i = 0; i < arr->len; i++)
    {
      const CsDiffRegion *r = arr->pdata[i];

      if (!merged)
        printf ("  region %s:%s split into", own, r->region->callee);
      else
        printf ("  regions");
      for (guint j = 0; j < r->others->len; j++)
        printf ("%s %s:%s", j ? "," : "", other, ((const CsStmt *) r->others->pdata[j])->callee);
      if (merged)
        printf (" merged into %s:%s", own, r->region->callee);
      printf ("\n");
    }
}

/* The input file's 1-based line of the initial statement whose id is @origin: a top-level
 * statement of @initial or one of its subsymbols; 0 when @initial holds no such statement or
 * it has no line. */
static guint32
origin_line (const CsTrace *initial, guint32 origin)
{
  GPtrArray *todo;
  guint32 line = 0;

  if (initial == NULL || origin == 0)
    return 0;
  todo = g_ptr_array_new ();
  for (guint i = 0; i < initial->n_stmts; i++)
    g_ptr_array_add (todo, initial->stmts[i]);
  while (todo->len && line == 0)
    {
      const CsStmt *s = g_ptr_array_steal_index_fast (todo, todo->len - 1);

      if (s->id == origin)
        line = s->line;
      for (guint j = 0; j < s->n_subs; j++)
        g_ptr_array_add (todo, s->subs[j]);
    }
  g_ptr_array_free (todo, TRUE);
  return line;
}

/* One line per cast added or removed: "+ cast f32 -> bf16 x2 (e.g. t7, from line 142, in
 * B:nvFusion0)", the line being the input file's line of the statement the casts derive from
 * (the initial statement of @initial that c->origin names), and the region the trace of @side
 * ("A" for removed casts, "B" for added ones) holds it in. */
static void
print_casts (const char *sign, GPtrArray *arr, const CsTrace *initial, const char *side)
{
  for (guint i = 0; i < arr->len; i++)
    {
      const CsDiffCast *c = arr->pdata[i];
      const CsProxy *out = cs_stmt_get_output (c->stmt);
      guint32 line = origin_line (initial, c->origin);
      g_autofree char *from = NULL;

      if (line)
        from = g_strdup_printf ("from line %u", line);
      else if (c->origin)
        from = g_strdup_printf ("from initial statement %u, which has no line", c->origin);
      else
        from = g_strdup ("made by a pass, from no statement of the input");
      printf ("  %s cast %s -> %s x%u (e.g. %s, %s%s%s%s%s)\n", sign,
              cs_dtype_short_name (c->from), cs_dtype_short_name (c->to), c->count,
              out ? out->name : "?", from, c->region ? ", in " : "", c->region ? side : "",
              c->region ? ":" : "", c->region ? c->region : "");
    }
}

/* The collectives of a distributed trace under the two policies (grad-reduce changes the dtype
 * and so the bytes each one moves): the totals, and each collective whose dtype or size
 * changed, paired in trace order.  Returns the number of changes; prints nothing for traces
 * without collectives. */
static guint
print_comm_diff (const CsTrace *a, const CsTrace *b)
{
  g_autoptr(CsTraceStats) sa = cs_stats_compute (a);
  g_autoptr(CsTraceStats) sb = cs_stats_compute (b);
  guint changed = 0;

  if (sa->comms->len == 0 && sb->comms->len == 0)
    return 0;
  printf ("  communication: %u -> %u collectives, %.4g -> %.4g bytes payload, %.4g -> %.4g bus bytes\n",
          sa->comms->len, sb->comms->len, sa->comm_payload_bytes, sb->comm_payload_bytes,
          sa->comm_bus_bytes, sb->comm_bus_bytes);
  for (guint i = 0; i < MIN (sa->comms->len, sb->comms->len); i++)
    {
      const CsStatsComm *x = &g_array_index (sa->comms, CsStatsComm, i);
      const CsStatsComm *y = &g_array_index (sb->comms, CsStatsComm, i);

      if (x->cost.dtype == y->cost.dtype && x->cost.payload_bytes == y->cost.payload_bytes
          && strcmp (x->kind, y->kind) == 0)
        continue;
      printf ("  collective %s %s %s -> %s %s %s (%.4g -> %.4g bytes)\n", x->name, x->kind,
              cs_dtype_short_name (x->cost.dtype), y->name, y->kind,
              cs_dtype_short_name (y->cost.dtype), x->cost.payload_bytes, y->cost.payload_bytes);
      changed++;
    }
  return changed + (sa->comms->len != sb->comms->len);
}

/* "3 added (2 f32 -> bf16, 1 bf16 -> f32)": the casts of @arr (each entry one origin and one
 * dtype pair, count casts) summed per dtype pair, in order of first appearance. */
static char *
cast_totals (const char *verb, GPtrArray *arr)
{
  GString *s = g_string_new (NULL);
  typedef struct { CsDtype from, to; guint n; } Pair;
  g_autoptr(GArray) pairs = g_array_new (FALSE, FALSE, sizeof (Pair));
  guint total = 0;

  for (guint i = 0; i < arr->len; i++)
    {
      const CsDiffCast *c = arr->pdata[i];
      guint j;

      total += c->count;
      for (j = 0; j < pairs->len; j++)
        {
          Pair *p = &g_array_index (pairs, Pair, j);
          if (p->from == c->from && p->to == c->to)
            {
              p->n += c->count;
              break;
            }
        }
      if (j == pairs->len)
        {
          Pair p = { c->from, c->to, c->count };
          g_array_append_val (pairs, p);
        }
    }
  g_string_append_printf (s, "%u %s", total, verb);
  for (guint j = 0; j < pairs->len; j++)
    {
      const Pair *p = &g_array_index (pairs, Pair, j);
      g_string_append_printf (s, "%s%u %s -> %s", j ? ", " : " (", p->n,
                              cs_dtype_short_name (p->from), cs_dtype_short_name (p->to));
    }
  if (pairs->len)
    g_string_append (s, ")");
  return g_string_free (s, FALSE);
}

/* Prints the diff of @a and @b under @label ("forward", "backward"); @initial is the input
 * trace both derive from, whose lines name the casts' statements.  Returns 0 when nothing
 * differs. */
static guint
print_diff (const char *label, const CsTrace *a, const CsTrace *b, const CsTrace *initial)
{
  guint comm_changes;
  g_autoptr(CsTraceDiff) d = NULL;
  g_autofree char *added = NULL, *removed = NULL;
  g_autofree char *split = NULL, *merged = NULL, *regrouped = NULL;

  if (a == NULL || b == NULL)
    {
      printf ("%s: %s\n", label, (a == NULL && b == NULL) ? "none" : "only one policy has it");
      return a == b ? 0 : 1;
    }
  d = cs_trace_diff (a, b);
  added = cast_totals ("added", d->casts_added);
  removed = cast_totals ("removed", d->casts_removed);
  /* "32 split, 41 merged": the regions of A that spread over several of B, and the regions of
   * B that gather several of A: one line each below (the app's banner counts the same).  The
   * groups that the maps connect (core/cs-diff.h) say how they relate: a group of several
   * regions on both sides is neither one split nor one merge, its statements moved among its
   * regions. */
  split = g_strdup_printf ("%u split", d->regions_split->len);
  merged = g_strdup_printf ("%u merged", d->regions_merged->len);
  regrouped = d->n_regrouped_a ? g_strdup_printf ("; %u of A regrouped into %u of B: statements "
                                                  "moved among them, the split and merged "
                                                  "ones are listed below", d->n_regrouped_a,
                                                  d->n_regrouped_b)
                               : g_strdup ("");
  printf ("%s: %u -> %u regions (%u kept, %u new, %u removed, %s, %s%s); casts: %s, %s\n",
          label, d->n_regions_a, d->n_regions_b, d->n_regions_kept, d->regions_new->len,
          d->regions_removed->len, split, merged, regrouped, added, removed);
  if (d->n_regions_unmatched)
    printf ("  (%u regions hold no statement the passes made, so they are compared with "
            "nothing and counted nowhere)\n", d->n_regions_unmatched);
  print_casts ("+", d->casts_added, initial, "B");
  print_casts ("-", d->casts_removed, initial, "A");
  for (guint i = 0; i < d->regions_new->len; i++)
    printf ("  new region B:%s (under A its statements ran outside every region)\n",
            ((const CsDiffRegion *) d->regions_new->pdata[i])->region->callee);
  for (guint i = 0; i < d->regions_removed->len; i++)
    printf ("  region A:%s removed (under B its statements run outside every region)\n",
            ((const CsDiffRegion *) d->regions_removed->pdata[i])->region->callee);
  /* split: a region of A spread over several regions of B; merged: the converse */
  print_regions (d->regions_split, "A", "B", FALSE);
  print_regions (d->regions_merged, "B", "A", TRUE);
  comm_changes = print_comm_diff (a, b);
  return (cs_trace_diff_is_empty (d) && comm_changes == 0) ? 0 : 1;
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
  const CsTrace *initial;
  g_autofree char *sa = NULL;
  g_autofree char *sb = NULL;
  GOptionEntry entries[] = {
    { "policy", 'p', 0, G_OPTION_ARG_STRING_ARRAY, &policy_a, "Policy A: a knob (repeatable; unset knobs are Thunder's defaults)", "KEY=VALUE" },
    { "vs", 'v', 0, G_OPTION_ARG_STRING_ARRAY, &policy_b, "Policy B: a knob (repeatable)", "KEY=VALUE" },
    { "grad", 'g', 0, G_OPTION_ARG_STRING, &grad, "Inputs that require grad: names, 'auto' (default: float inputs but module buffers, as Thunder), 'all' or 'none'", "A,B|auto|all|none" },
    { "index", 'i', 0, G_OPTION_ARG_INT, &index, "Which trace of the file (default 0)", "N" },
    { NULL },
  };

  ctx = cs_cli_option_context_new ("FILE --vs KEY=VALUE",
                                   "casts and regions that change between two cast policies");
  g_option_context_add_main_entries (ctx, entries, NULL);
  desc = cs_cli_policy_describe ();
  cs_cli_set_help (ctx, desc, CS_CLI_HELP_TRACE);
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
  if (policy_b == NULL)
    {
      cs_cli_error ("diff: --vs KEY=VALUE is required: it sets policy B (--policy sets A; "
                    "unset knobs are Thunder's defaults), e.g. --vs matmul=upcast-f32");
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
  if (cs_pipeline_input_was_final (pa))
    printf ("note: the input is already final (fused or split): no pass ran under either "
            "policy, so nothing below can differ; diff the program's initial trace\n");
  initial = cs_pipeline_find_trace (pa, "initial");
  print_diff ("forward", cs_pipeline_get_forward (pa), cs_pipeline_get_forward (pb), initial);
  if (cs_pipeline_get_backward (pa) || cs_pipeline_get_backward (pb))
    print_diff ("backward", cs_pipeline_get_backward (pa), cs_pipeline_get_backward (pb),
                initial);
  return CS_CLI_EXIT_OK;
}
