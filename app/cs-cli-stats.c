/* cs-cli-stats.c: `castscope-cli stats FILE [--policy k=v ...] [--grad ...] [--json]
 * [--world-size N] [--bus-gbps G] [--cast-effect]`: casts, regions, matmuls (tensor-core
 * eligible or not), FLOPs, bytes and the estimated H200 time of the final forward and backward
 * traces, total and per region, and for a distributed trace the bytes and estimated time of
 * each collective (core/cs-stats.h); the casts the user wrote that remove-redundant-casts
 * dropped (core/cs-lens.h) and, with --cast-effect, what dropping them changed in the
 * forward's outputs on the CPU reference. */
#include "cs-config.h"

#include <stdio.h>
#include <string.h>

#if CS_HAVE_JSON
#include <json-glib/json-glib.h>
#endif

#include "cs-cli.h"
#include "cs-ref-plan.h"
#include "cs-cli-policy.h"
#include "cs-inductor.h"
#include "cs-dist.h"
#include "cs-compare.h"
#include "cs-lens.h"
#include "cs-print.h"
#include "cs-ref.h"
#include "cs-ref-plan.h"
#include "cs-split.h"
#include "cs-stats.h"

#include <math.h>

/* The user's cast statement as printed, on one line without its type comment. */

/* Regions of @t that are Inductor's kernels (cs_inductor_stmt_is_region()). */
static guint
n_inductor_regions (const CsTrace *t)
{
  guint n = 0;
  for (guint i = 0; t != NULL && i < t->n_stmts; i++)
    n += cs_inductor_stmt_is_region (t->stmts[i]);
  return n;
}

static char *
user_cast_text (const CsStmt *user)
{
  GString *t = g_string_new (NULL);
  char *hash;

  cs_print_stmt_to (t, user, 0, 0);
  g_strstrip (t->str);
  hash = strstr (t->str, "  #");
  if (hash != NULL)
    *hash = '\0';
  return g_string_free (t, FALSE);
}

/* The casts the user wrote that remove-redundant-casts dropped (core/cs-lens.h); empty when
 * the pass did not run (input already final, fusion off, redundant-casts=keep). */
static GPtrArray *
removed_user_casts (CsPipeline *pl)
{
  CsTrace *initial = cs_pipeline_find_trace (pl, "initial");
  CsTrace *before = cs_pipeline_find_trace (pl, "fuse");
  CsTrace *after = cs_pipeline_find_trace (pl, "remove-redundant-casts");

  if (initial == NULL || before == NULL || after == NULL)
    return g_ptr_array_new_with_free_func (g_free);
  return cs_lens_removed_user_casts (initial, before, after);
}

/* What removing them changed: the forward run on the CPU reference under the policy and
 * under redundant-casts=keep, on the same random inputs, each output against the f64 run. */
typedef struct
{
  char      *name;          /* output proxy */
  char      *type;          /* "bf16[32, 64]" */
  CsAccuracy keep;          /* the run with the casts kept, against f64 (floor reference) */
  CsAccuracy remove;        /* the run with them removed */
  double     max_diff;      /* max |remove - keep| over the elements, NaN if non-finite */
} CastEffect;

static int
effect_by_name (gconstpointer a, gconstpointer b)
{
  return g_strcmp0 ((*(CastEffect * const *) a)->name, (*(CastEffect * const *) b)->name);
}

static void
cast_effect_free (gpointer p)
{
  CastEffect *e = p;

  g_free (e->name);
  g_free (e->type);
  g_free (e);
}

static gboolean
run_exact_f64 (const CsTrace *fw, GHashTable *env, gboolean f64, GHashTable *returned,
               GError **error)
{
  g_autoptr(GPtrArray) outs = NULL;

  return cs_ref_run_env (fw, env, f64 ? CS_REF_F64 : CS_REF_EXACT, 0, &outs, NULL, returned,
                         error);
}

static GPtrArray *
cast_effect (CsPipeline *pl, const char *path, guint index, const char *grad, GError **error)
{
  CsPolicy keep = *cs_pipeline_get_policy (pl);
  g_autoptr(CsPipeline) pk = NULL;
  CsTrace *fr, *fk;
  g_autoptr(GHashTable) env = cs_ref_env_new ();
  g_autoptr(GHashTable) ret_r = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
                                                       (GDestroyNotify) cs_tensor_unref);
  g_autoptr(GHashTable) ret_k = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
                                                       (GDestroyNotify) cs_tensor_unref);
  g_autoptr(GHashTable) ret_t = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
                                                       (GDestroyNotify) cs_tensor_unref);
  g_autoptr(GPtrArray) leaves = NULL;
  GPtrArray *effects;
  double flops = 0;
  GHashTableIter it;
  gpointer key, value;

  keep.redundant_casts = CS_REDUNDANT_CASTS_KEEP;
  pk = cs_cli_run_pipeline (path, index, &keep, grad, error);
  if (pk == NULL)
    return NULL;
  fr = cs_pipeline_get_forward (pl);
  fk = cs_pipeline_get_forward (pk);
  cs_ref_estimate (fr, &flops, NULL);
  if (flops > CS_REF_DEFAULT_MAX_FLOPS)
    {
      g_set_error (error, CS_REF_ERROR, CS_REF_ERROR_INPUT,
                   "the forward takes about %.3g GFLOP on the CPU reference, over the %.0f GFLOP "
                   "limit of run", flops / 1e9, CS_REF_DEFAULT_MAX_FLOPS / 1e9);
      return NULL;
    }
  for (guint pass = 0; pass < 2; pass++)
    {
      leaves = cs_ref_dup_leaf_inputs (pass == 0 ? fr : fk);
      for (guint i = 0; i < leaves->len; i++)
        {
          const CsProxy *p = g_ptr_array_index (leaves, i);
          g_autoptr(CsTensor) t = NULL;

          if (g_hash_table_contains (env, p->name))
            continue;
          t = cs_ref_random_input (pass == 0 ? fr : fk, p, 0, error);
          if (t == NULL)
            return NULL;
          cs_ref_env_insert (env, p->name, t);
        }
      g_clear_pointer (&leaves, g_ptr_array_unref);
    }
  if (!run_exact_f64 (fr, env, FALSE, ret_r, error) || !run_exact_f64 (fk, env, FALSE, ret_k, error)
      || !run_exact_f64 (fr, env, TRUE, ret_t, error))
    return NULL;
  effects = g_ptr_array_new_with_free_func (cast_effect_free);
  g_hash_table_iter_init (&it, ret_r);
  while (g_hash_table_iter_next (&it, &key, &value))
    {
      const CsTensor *xr = value, *xk = g_hash_table_lookup (ret_k, key);
      const CsTensor *t = g_hash_table_lookup (ret_t, key);
      CsAccuracyRule rule;
      CastEffect *e;

      if (xk == NULL || t == NULL || !cs_dtype_is_float (xr->dtype) || xr->numel != xk->numel
          || xr->numel != t->numel || g_hash_table_contains (env, key))
        continue;
      e = g_new0 (CastEffect, 1);
      e->name = g_strdup (key);
      e->type = cs_tensor_type_string (xr);
      cs_accuracy_rule (xr->dtype, xr->numel, cs_pipeline_get_backward (pl) != NULL, &rule);
      cs_accuracy_judge (xk, NULL, t, &rule, &e->keep);
      cs_accuracy_judge (xr, NULL, t, &rule, &e->remove);
      for (int64_t i = 0; i < xr->numel; i++)
        {
          double d = fabs (cs_tensor_get_f64 (xr, i) - cs_tensor_get_f64 (xk, i));

          if (isnan (d))
            {
              e->max_diff = NAN;
              break;
            }
          e->max_diff = MAX (e->max_diff, d);
        }
      g_ptr_array_add (effects, e);
    }
  g_ptr_array_sort (effects, effect_by_name);
  return effects;
}

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
  if (e->n_attention > 0)
    {
      /* only where there is one, so the output of traces without attention is unchanged */
      json_builder_set_member_name (b, "attention");
      json_builder_add_int_value (b, e->n_attention);
    }
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
add_comm_json (JsonBuilder *b, const CsTraceStats *st)
{
  json_builder_set_member_name (b, "communication");
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "collectives");
  json_builder_add_int_value (b, st->comms->len);
  json_builder_set_member_name (b, "group_size");
  json_builder_add_int_value (b, st->group_size);
  json_builder_set_member_name (b, "bus_bytes_per_s");
  json_builder_add_double_value (b, st->bus_bytes_per_s);
  json_builder_set_member_name (b, "payload_bytes");
  json_builder_add_double_value (b, st->comm_payload_bytes);
  json_builder_set_member_name (b, "bus_bytes");
  json_builder_add_double_value (b, st->comm_bus_bytes);
  json_builder_set_member_name (b, "est_ms");
  json_builder_add_double_value (b, st->comm_est_ms);
  json_builder_set_member_name (b, "compute_est_ms");
  json_builder_add_double_value (b, st->total.est_ms);
  json_builder_set_member_name (b, "ops");
  json_builder_begin_array (b);
  for (guint i = 0; i < st->comms->len; i++)
    {
      const CsStatsComm *c = &g_array_index (st->comms, CsStatsComm, i);
      json_builder_begin_object (b);
      json_builder_set_member_name (b, "output");
      json_builder_add_string_value (b, c->name);
      json_builder_set_member_name (b, "kind");
      json_builder_add_string_value (b, c->kind);
      json_builder_set_member_name (b, "line");
      json_builder_add_int_value (b, c->line);
      json_builder_set_member_name (b, "dtype");
      json_builder_add_string_value (b, cs_dtype_short_name (c->cost.dtype));
      if (c->cost.has_reduce_op)
        {
          json_builder_set_member_name (b, "reduce_op");
          json_builder_add_string_value (b, cs_dist_reduce_op_name (c->cost.reduce_op));
        }
      json_builder_set_member_name (b, "async");
      json_builder_add_boolean_value (b, c->async);
      json_builder_set_member_name (b, "payload_bytes");
      json_builder_add_double_value (b, c->cost.payload_bytes);
      json_builder_set_member_name (b, "bus_bytes");
      json_builder_add_double_value (b, c->cost.bus_bytes);
      json_builder_set_member_name (b, "est_ms");
      json_builder_add_double_value (b, c->cost.est_ms);
      json_builder_end_object (b);
    }
  json_builder_end_array (b);
  json_builder_end_object (b);
}

static void
add_trace_json (JsonBuilder *b, const char *key, const CsTrace *t, const CsStatsOptions *opts)
{
  g_autoptr(CsTraceStats) st = NULL;

  json_builder_set_member_name (b, key);
  if (t == NULL)
    {
      json_builder_add_null_value (b);
      return;
    }
  st = cs_stats_compute_full (t, opts);
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "trace");
  json_builder_add_string_value (b, t->name ? t->name : "");
  entry_members (b, &st->total, FALSE);
  json_builder_set_member_name (b, "n_regions");
  json_builder_add_int_value (b, st->total.n_regions);
  /* regions (and claimed statements) by executor, in a fixed order */
  json_builder_set_member_name (b, "regions_by_executor");
  json_builder_begin_object (b);
  {
    guint n_ind = n_inductor_regions (t);
    if (n_ind > 0)
      {
        json_builder_set_member_name (b, "inductor");
        json_builder_add_int_value (b, n_ind);
      }
    for (guint k = 0; k < G_N_ELEMENTS (stats_executors); k++)
      {
        guint n = st->by_executor[stats_executors[k]];
        json_builder_set_member_name (b, cs_executor_name (stats_executors[k]));
        json_builder_add_int_value (b, stats_executors[k] == CS_EXECUTOR_NVFUSER ? n - n_ind : n);
      }
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
  if (st->comms->len > 0)
    add_comm_json (b, st);
  json_builder_end_object (b);
}

static void
json_measure (JsonBuilder *b, double v)
{
  if (isnan (v))
    json_builder_add_string_value (b, "nan");
  else if (isinf (v))
    json_builder_add_string_value (b, "inf");
  else
    json_builder_add_double_value (b, v);
}

static void
add_removed_json (JsonBuilder *b, GPtrArray *removed, GPtrArray *effects, const char *effect_error,
                  gboolean want_effect)
{
  json_builder_set_member_name (b, "removed_user_casts");
  json_builder_begin_array (b);
  for (guint i = 0; i < removed->len; i++)
    {
      const CsRemovedCast *c = g_ptr_array_index (removed, i);
      g_autofree char *user = user_cast_text (c->user);

      json_builder_begin_object (b);
      json_builder_set_member_name (b, "line");
      json_builder_add_int_value (b, c->user->line);
      json_builder_set_member_name (b, "user_cast");
      json_builder_add_string_value (b, user);
      json_builder_set_member_name (b, "tensor");
      json_builder_add_string_value (b, cs_stmt_get_output (c->cast)->name);
      json_builder_set_member_name (b, "from");
      json_builder_add_string_value (b, cs_dtype_short_name (c->from));
      json_builder_set_member_name (b, "to");
      json_builder_add_string_value (b, cs_dtype_short_name (c->to));
      json_builder_set_member_name (b, "region");
      if (c->region)
        json_builder_add_string_value (b, c->region);
      else
        json_builder_add_null_value (b);
      json_builder_set_member_name (b, "backward");
      json_builder_add_boolean_value (b, c->backward);
      json_builder_set_member_name (b, "reader");
      if (c->reader)
        json_builder_add_string_value (b, c->reader);
      else
        json_builder_add_null_value (b);
      json_builder_end_object (b);
    }
  json_builder_end_array (b);
  if (!want_effect)
    return;
  json_builder_set_member_name (b, "removed_user_casts_effect");
  json_builder_begin_object (b);
  if (effect_error != NULL)
    {
      json_builder_set_member_name (b, "error");
      json_builder_add_string_value (b, effect_error);
    }
  json_builder_set_member_name (b, "forward");
  json_builder_begin_array (b);
  for (guint i = 0; effects != NULL && i < effects->len; i++)
    {
      const CastEffect *e = g_ptr_array_index (effects, i);

      json_builder_begin_object (b);
      json_builder_set_member_name (b, "name");
      json_builder_add_string_value (b, e->name);
      json_builder_set_member_name (b, "type");
      json_builder_add_string_value (b, e->type);
      json_builder_set_member_name (b, "err_keep");
      json_measure (b, e->keep.err);
      json_builder_set_member_name (b, "err_remove");
      json_measure (b, e->remove.err);
      json_builder_set_member_name (b, "ratio_keep");
      json_measure (b, e->keep.ratio);
      json_builder_set_member_name (b, "ratio_remove");
      json_measure (b, e->remove.ratio);
      json_builder_set_member_name (b, "max_abs_diff");
      json_measure (b, e->max_diff);
      json_builder_end_object (b);
    }
  json_builder_end_array (b);
  json_builder_end_object (b);
}
#endif

/* "s" unless @n is 1 */
#define PLURAL(n) ((n) == 1 ? "" : "s")

static void
print_comm_text (const CsTraceStats *st)
{
  printf ("  communication: %u collectives, %.4g bytes payload, %.4g bus bytes, est %.4g ms "
          "(group of %u, %.4g GB/s bus bandwidth) next to %.4g ms compute\n",
          st->comms->len, st->comm_payload_bytes, st->comm_bus_bytes, st->comm_est_ms,
          st->group_size, st->bus_bytes_per_s / 1e9, st->total.est_ms);
  for (guint i = 0; i < st->comms->len; i++)
    {
      const CsStatsComm *c = &g_array_index (st->comms, CsStatsComm, i);
      printf ("  %-12s %-14s %-4s %-4s %-5s %10.4g bytes %10.4g bus %10.4g ms\n", c->name, c->kind,
              cs_dtype_short_name (c->cost.dtype),
              c->cost.has_reduce_op ? cs_dist_reduce_op_name (c->cost.reduce_op) : "-",
              c->async ? "async" : "sync", c->cost.payload_bytes, c->cost.bus_bytes, c->cost.est_ms);
    }
}

/* "prims.convert_element_type(t3, dtypes.float32)": the statement that makes a duplicated
 * saved value, without its targets and type comment. */
static char *
producer_text (const CsStmt *st)
{
  GString *s = g_string_new (NULL);

  if (st == NULL)
    return g_string_free (s, FALSE);
  g_string_append_printf (s, "%s(", st->callee);
  for (guint i = 0; i < st->n_args; i++)
    {
      if (i)
        g_string_append (s, ", ");
      if (st->args[i].name)
        g_string_append_printf (s, "%s=", st->args[i].name);
      cs_print_value_to (s, st->args[i].value);
    }
  g_string_append_c (s, ')');
  return g_string_free (s, FALSE);
}

/* The forward's values saved for the backward more than once (text). */
static void
print_duplicate_saved_text (GPtrArray *dups)
{
  for (guint i = 0; i < dups->len; i++)
    {
      const CsSavedDuplicate *d = g_ptr_array_index (dups, i);
      g_autoptr(GString) names = g_string_new (NULL);
      g_autofree char *expr = producer_text (d->producer);
      g_autofree char *size = cs_format_size ((double) d->extra_bytes);

      for (guint k = 0; k < d->saved->len; k++)
        g_string_append_printf (names, "%s%s", k ? ", " : "", ((CsProxy *) d->saved->pdata[k])->name);
      printf ("  saved %u times (as Thunder does, lightning-thunder#1501): %s = %s; %s more than one copy\n",
              d->saved->len, names->str, expr, size);
    }
}

#if CS_HAVE_JSON
/* `"duplicate_saved": [{"saved": [...], "expression": "...", "extra_bytes": N}]` */
static void
add_duplicate_saved_json (JsonBuilder *b, GPtrArray *dups)
{
  json_builder_set_member_name (b, "duplicate_saved");
  json_builder_begin_array (b);
  for (guint i = 0; dups && i < dups->len; i++)
    {
      const CsSavedDuplicate *d = g_ptr_array_index (dups, i);
      g_autofree char *expr = producer_text (d->producer);

      json_builder_begin_object (b);
      json_builder_set_member_name (b, "saved");
      json_builder_begin_array (b);
      for (guint k = 0; k < d->saved->len; k++)
        json_builder_add_string_value (b, ((CsProxy *) d->saved->pdata[k])->name);
      json_builder_end_array (b);
      json_builder_set_member_name (b, "expression");
      json_builder_add_string_value (b, expr);
      json_builder_set_member_name (b, "extra_bytes");
      json_builder_add_int_value (b, (gint64) d->extra_bytes);
      json_builder_end_object (b);
    }
  json_builder_end_array (b);
}
#endif

/* Levenshtein distance of @a and @b, stopping at @cap (returns cap when it is reached). */
static guint
edit_distance (const char *a, const char *b, guint cap)
{
  gsize la = strlen (a), lb = strlen (b);
  g_autofree guint *row = NULL;

  if ((la > lb ? la - lb : lb - la) >= cap)
    return cap;
  row = g_new (guint, lb + 1);
  for (gsize j = 0; j <= lb; j++)
    row[j] = (guint) j;
  for (gsize i = 1; i <= la; i++)
    {
      guint diag = row[0], best = cap;

      row[0] = (guint) i;
      for (gsize j = 1; j <= lb; j++)
        {
          guint up = row[j];
          guint v = MIN (MIN (row[j] + 1, row[j - 1] + 1), diag + (a[i - 1] != b[j - 1]));

          row[j] = v;
          diag = up;
          best = MIN (best, v);
        }
      if (best >= cap)
        return cap;
    }
  return MIN (row[lb], cap);
}

/* The registry's op name nearest to @callee (at most 2 edits, the same namespace prefix), or
 * NULL: a suggestion for a typo such as `ltorch.rsqrtt`. */
static const char *
closest_op_name (const char *callee)
{
  const char *dot = strrchr (callee, '.');
  gsize prefix = dot ? (gsize) (dot - callee) + 1 : 0;
  const char *best = NULL;
  guint best_d = 3;

  for (guint id = 0; id < CS_N_OPS; id++)
    {
      const CsOp *op = cs_op_get ((CsOpId) id);
      guint d;

      if (op == NULL || op->name == NULL || strncmp (op->name, callee, prefix) != 0
          || cs_op_semantic (op)->category == CS_OP_CAT_OPAQUE)
        continue;
      d = edit_distance (callee, op->name, best_d);
      if (d < best_d)
        {
          best_d = d;
          best = op->name;
        }
    }
  return best;
}

/* The ops castscope does not know in the input trace (CS_OP_CAT_OPAQUE), each with its count and
 * first line: a typo in an op name would otherwise pass unnoticed where Thunder printed the
 * statement's subsymbols (the passes and the CPU reference run through those). */
static void
print_unknown_ops_text (const CsTrace *initial)
{
  g_autoptr(GHashTable) count = g_hash_table_new (g_str_hash, g_str_equal);
  g_autoptr(GPtrArray) order = g_ptr_array_new ();
  g_autoptr(GHashTable) first = g_hash_table_new (g_str_hash, g_str_equal);

  for (guint i = 0; initial != NULL && i < initial->n_stmts; i++)
    {
      const CsStmt *st = initial->stmts[i];

      if (st->kind != CS_STMT_CALL || st->op == NULL || st->callee == NULL
          || cs_op_semantic (st->op)->category != CS_OP_CAT_OPAQUE)
        continue;
      if (!g_hash_table_contains (count, st->callee))
        {
          g_ptr_array_add (order, (gpointer) st->callee);
          g_hash_table_insert (first, (gpointer) st->callee, GUINT_TO_POINTER (st->line));
        }
      g_hash_table_insert (count, (gpointer) st->callee,
                           GUINT_TO_POINTER (GPOINTER_TO_UINT (g_hash_table_lookup (count, st->callee)) + 1));
    }
  if (order->len == 0)
    return;
  printf ("unknown ops (opaque nodes; castscope runs their printed subsymbols where Thunder printed them):");
  for (guint i = 0; i < order->len; i++)
    {
      const char *near = closest_op_name (order->pdata[i]);

      printf ("%s %s x%u (line %u%s%s%s)", i ? "," : "", (const char *) order->pdata[i],
              GPOINTER_TO_UINT (g_hash_table_lookup (count, order->pdata[i])),
              GPOINTER_TO_UINT (g_hash_table_lookup (first, order->pdata[i])),
              near ? "; did you mean " : "", near ? near : "", near ? "?" : "");
    }
  printf ("\n");
}

static void
print_removed_text (GPtrArray *removed, GPtrArray *effects, const char *effect_error,
                    gboolean want_effect)
{
  guint n_bwd = 0;

  for (guint i = 0; i < removed->len; i++)
    n_bwd += ((const CsRemovedCast *) g_ptr_array_index (removed, i))->backward;
  if (removed->len == 0)
    {
      printf ("removed user casts: none\n");
      return;
    }
  printf ("removed user casts: %u (%u forward, %u backward): remove-redundant-casts dropped the "
          "rounding they ask for\n", removed->len, removed->len - n_bwd, n_bwd);
  for (guint i = 0; i < removed->len; i++)
    {
      const CsRemovedCast *c = g_ptr_array_index (removed, i);
      g_autofree char *user = user_cast_text (c->user);

      printf ("  line %u: %s: %s %s -> %s%s%s (%s) removed", c->user->line, user,
              cs_stmt_get_output (c->cast)->name, cs_dtype_short_name (c->from),
              cs_dtype_short_name (c->to), c->region ? " in " : "", c->region ? c->region : "",
              c->backward ? "backward" : "forward");
      if (cs_dtype_bits (c->to) >= cs_dtype_bits (c->from))
        printf (" (widening: no rounding lost by itself)");
      else if (c->reader)
        printf ("; %s reads the unrounded %s value", c->reader, cs_dtype_short_name (c->from));
      printf ("\n");
    }
  if (!want_effect)
    return;
  if (effect_error != NULL)
    {
      printf ("effect: not computed: %s\n", effect_error);
      return;
    }
  printf ("effect on the forward (CPU reference, the same inputs; err = RMSE vs f64):\n");
  for (guint i = 0; effects != NULL && i < effects->len; i++)
    {
      const CastEffect *e = g_ptr_array_index (effects, i);

      printf ("  %-10s %-20s err with the casts (redundant-casts=keep) %.3e, without %.3e; "
              "max |without - with| %.3g\n", e->name, e->type, e->keep.err, e->remove.err,
              e->max_diff);
    }
}

static void
print_trace_text (const char *label, const CsTrace *t, const CsStatsOptions *opts)
{
  g_autoptr(CsTraceStats) st = NULL;
  const CsStatsEntry *e;

  if (t == NULL)
    {
      printf ("%s: none\n", label);
      return;
    }
  st = cs_stats_compute_full (t, opts);
  e = &st->total;
  {
    g_autofree char *est = cs_cli_format_ms (e->est_ms);
    g_autofree char *flops = cs_format_flops (e->flops);
    g_autofree char *bytes = cs_format_size (e->bytes_read + e->bytes_written);

    g_autofree char *attn = e->n_attention > 0
                            ? g_strdup_printf (", %u fused attention", e->n_attention)
                            : g_strdup ("");
    printf ("%s (%s): %u statement%s, %u region%s, %u cast%s (%u up, %u down), %u matmul%s "
            "(%u tensor-core)%s, %s, %s, est %s on H200\n",
            label, t->name ? t->name : "?", e->n_statements, PLURAL (e->n_statements),
            e->n_regions, PLURAL (e->n_regions), e->n_casts, PLURAL (e->n_casts), e->n_upcasts,
            e->n_downcasts, e->n_matmuls, PLURAL (e->n_matmuls), e->n_tensor_core_matmuls,
            attn, flops, bytes, est);
  }
  printf ("  by executor:");
  {
    /* Inductor's regions (--inductor) count as executor "inductor", not nvfuser */
    guint n_ind = n_inductor_regions (t);
    if (n_ind > 0)
      printf (" inductor %u,", n_ind);
    for (guint k = 0; k < G_N_ELEMENTS (stats_executors); k++)
      {
        guint n = st->by_executor[stats_executors[k]];
        printf ("%s %s %u", k ? "," : "", cs_executor_name (stats_executors[k]),
                stats_executors[k] == CS_EXECUTOR_NVFUSER ? n - n_ind : n);
      }
  }
  printf ("\n");
  for (guint i = 0; i < st->regions->len; i++)
    {
      const CsStatsEntry *r = &g_array_index (st->regions, CsStatsEntry, i);
      g_autofree char *est = cs_cli_format_ms (r->est_ms);
      g_autofree char *bytes = cs_format_size (r->bytes_read + r->bytes_written);

      printf ("  %-12s %4u prims %3u casts %2u matmuls %10s %9s  ended: %s\n",
              r->name, r->n_statements, r->n_casts, r->n_matmuls, bytes, est,
              r->why ? r->why : "-");
    }
  if (st->comms->len > 0)
    print_comm_text (st);
}


/* One line on castscope's own fusion of the same trace, beside Inductor's (--inductor): its
 * region count, the casts inside its regions and the bytes moved. */
static void
print_own_fusion_text (const CsTrace *t, const CsStatsOptions *opts)
{
  g_autoptr(CsTraceStats) st = NULL;
  g_autofree char *bytes = NULL;
  guint in = 0;

  if (t == NULL)
    return;
  st = cs_stats_compute_full (t, opts);
  for (guint i = 0; i < st->regions->len; i++)
    in += g_array_index (st->regions, CsStatsEntry, i).n_casts;
  bytes = cs_format_size (st->total.bytes_read + st->total.bytes_written);
  printf ("  castscope's own fusion of it: %u region%s, %u of %u casts inside regions, %s\n",
          st->total.n_regions, PLURAL (st->total.n_regions), in, st->total.n_casts, bytes);
}

int
cs_cli_cmd_stats (int argc, char **argv)
{
  g_auto(GStrv) policy_args = NULL;
  g_autofree char *grad = NULL;
  g_autofree char *desc = NULL;
  gboolean json = FALSE, want_effect = FALSE;
  gint index = 0;
  g_autofree char *world_text = NULL, *bus_text = NULL;
  CsStatsOptions sopts = { 0 };
  g_autoptr(GPtrArray) removed = NULL;
  g_autoptr(GPtrArray) dups = NULL;      /* values saved for the backward more than once */
  g_autoptr(GPtrArray) effects = NULL;
  g_autofree char *effect_error = NULL;
  g_autoptr(GOptionContext) ctx = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(CsPipeline) pl = NULL;
  g_autoptr(CsPipeline) own = NULL;
  CsPolicy policy;
  CsTrace *fw, *bw;
  g_autofree char *inductor = NULL;
  GOptionEntry entries[] = {
    { "policy", 'p', 0, G_OPTION_ARG_STRING_ARRAY, &policy_args, "Set a cast policy knob (repeatable)", "KEY=VALUE" },
    { "grad", 'g', 0, G_OPTION_ARG_STRING, &grad, "Inputs that require grad: names, 'auto' (default: float inputs but module buffers, as Thunder), 'all' or 'none'", "A,B|auto|all|none" },
    { "json", 'j', 0, G_OPTION_ARG_NONE, &json, "Print JSON: {policy, forward, backward}, each with totals and a regions array", NULL },
    { "index", 'i', 0, G_OPTION_ARG_INT, &index, "Which trace of the file (default 0)", "N" },
    { "inductor", 0, 0, G_OPTION_ARG_STRING, &inductor, CS_CLI_INDUCTOR_HELP, "FILE|auto" },
    { "world-size", 0, 0, G_OPTION_ARG_STRING, &world_text, "Ranks of the process group for the communication estimate (default: what the trace's shapes say, else 1)", "N" },
    { "bus-gbps", 0, 0, G_OPTION_ARG_STRING, &bus_text, "Bus bandwidth for the communication estimate, GB/s (default 450: H200 NVLink, each direction)", "G" },
    { "cast-effect", 0, 0, G_OPTION_ARG_NONE, &want_effect, "Run the forward on the CPU reference with and without the removed user casts (redundant-casts=keep vs the policy) and report each output's error against f64", NULL },
    { NULL },
  };

  ctx = cs_cli_option_context_new ("FILE",
                                   "casts, regions, matmuls, FLOPs, bytes and estimated time");
  g_option_context_add_main_entries (ctx, entries, NULL);
  desc = cs_cli_policy_describe ();
  cs_cli_set_help (ctx, desc, CS_CLI_HELP_TRACE);
  if (!cs_cli_parse_options (ctx, &argc, &argv))
    return CS_CLI_EXIT_USAGE;
  cs_cli_set_inductor (inductor);
  if (index < 0)
    {
      cs_cli_error ("stats: --index must be >= 0");
      return CS_CLI_EXIT_USAGE;
    }
  /* unset, both are 0: CsStatsOptions' defaults */
  if (world_text != NULL)
    {
      guint64 world;
      if (!g_ascii_string_to_unsigned (world_text, 10, 1, 65536, &world, NULL))
        {
          cs_cli_error ("stats: --world-size takes 1 to 65536 ranks, not '%s'", world_text);
          return CS_CLI_EXIT_USAGE;
        }
      sopts.group_size = (guint) world;
    }
  if (bus_text != NULL)
    {
      char *end = NULL;
      double bus_gbps = g_ascii_strtod (bus_text, &end);
      if (end == bus_text || *end != '\0' || !(bus_gbps > 0) || !(bus_gbps < 1e6))
        {
          cs_cli_error ("stats: --bus-gbps takes a bandwidth in GB/s above 0 and below "
                        "1,000,000, not '%s'", bus_text);
          return CS_CLI_EXIT_USAGE;
        }
      sopts.bus_bytes_per_s = bus_gbps * 1e9;
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
  if (inductor != NULL)
    {
      /* castscope's own fusion of the same graphs, for the lines beside Inductor's */
      cs_cli_set_inductor (NULL);
      own = cs_cli_run_pipeline (argv[1], (guint) index, &policy, grad, &error);
      cs_cli_set_inductor (inductor);
      if (own == NULL)
        {
          cs_cli_error ("%s", error->message);
          return cs_cli_exit_for_error (error);
        }
    }
  removed = removed_user_casts (pl);
  if (fw != NULL)
    dups = cs_split_duplicate_saved (fw);
  if (want_effect && removed->len == 0)
    effect_error = g_strdup ("no user cast was removed");
  else if (want_effect)
    {
      g_autoptr(GError) effect_err = NULL;

      effects = cast_effect (pl, argv[1], (guint) index, grad, &effect_err);
      if (effects == NULL)
        effect_error = g_strdup (effect_err->message);
    }

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
      if (cs_cli_inductor_path () != NULL)
        {
          json_builder_set_member_name (b, "inductor");
          json_builder_add_string_value (b, cs_cli_inductor_path ());
        }
      json_builder_set_member_name (b, "input_was_final");
      json_builder_add_boolean_value (b, cs_pipeline_input_was_final (pl));
      add_trace_json (b, "forward", fw, &sopts);
      add_trace_json (b, "backward", bw, &sopts);
      if (own != NULL)
        {
          /* castscope's own fusion of the same graphs, beside Inductor's */
          json_builder_set_member_name (b, "castscope_fusion");
          json_builder_begin_object (b);
          add_trace_json (b, "forward", fw ? cs_pipeline_get_forward (own) : NULL, &sopts);
          add_trace_json (b, "backward", bw ? cs_pipeline_get_backward (own) : NULL, &sopts);
          json_builder_end_object (b);
        }
      add_removed_json (b, removed, effects, effect_error, want_effect);
      add_duplicate_saved_json (b, dups);
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
    if (cs_pipeline_attention_claimed_nothing (pl))
      printf ("attention=fused claimed nothing: no softmax(q @ k^T * scale) @ v pattern and no "
              "scaled_dot_product_attention call in this trace\n");
    if (cs_cli_inductor_path () != NULL)
      printf ("fusion: Inductor's kernels from %s (the policy's fusion knobs do not apply)\n",
              cs_cli_inductor_path ());
    print_unknown_ops_text (cs_pipeline_get_trace (pl, 0));
  }
  print_trace_text ("forward", fw, &sopts);
  if (dups != NULL)
    print_duplicate_saved_text (dups);
  if (own != NULL && fw != NULL)
    print_own_fusion_text (cs_pipeline_get_forward (own), &sopts);
  if (bw == NULL && fw != NULL)
    {
      /* say why, as transform --trace backward does (and where run finds one) */
      g_autofree char *why = cs_cli_no_backward_reason (pl, argv[1]);

      printf ("backward: none: %s\n", why);
    }
  else
    {
      print_trace_text ("backward", bw, &sopts);
      if (own != NULL && bw != NULL)
        print_own_fusion_text (cs_pipeline_get_backward (own), &sopts);
    }
  print_removed_text (removed, effects, effect_error, want_effect);
  return CS_CLI_EXIT_OK;
}
