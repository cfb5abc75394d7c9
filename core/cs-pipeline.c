/* cs-pipeline.c: the pass pipeline (see cs-pipeline.h).
 *
 * Order mirrors thunder/__init__.py (apply_transforms_and_build_cache_entry): autocast, grad
 * transform (one joint trace), execution transforms (decompose), the nvFuser fusion pass with
 * its clean-ups (remove_redundant_casts, CSE, DCE), the forward/backward split, and
 * "Delete Last Used".
 */
#include "cs-config.h"

#include "cs-pipeline.h"
#include "cs-attention-claim.h"
#include "cs-autocast.h"
#include "cs-cse.h"
#include "cs-decompose.h"
#include "cs-dellast.h"
#include "cs-dist.h"
#include "cs-executors.h"
#include "cs-fuse.h"
#include "cs-ir-util.h"
#include "cs-meta.h"
#include "cs-grad.h"
#include "cs-ops.h"
#include "cs-aten.h"
#include "cs-inductor.h"
#include "cs-split.h"
#include "cs-validate.h"

#include <string.h>

G_DEFINE_QUARK (cs-pipeline-error-quark, cs_pipeline_error)

struct _CsPipeline
{
  gint        ref_count;    /* atomic */
  CsPolicy    policy;       /* the policy it ran under */
  GPtrArray  *names;        /* char*, pass name per kept trace */
  GPtrArray  *traces;       /* CsTrace*, owned, same length as names */
  GArray     *times_ns;     /* gint64 per kept trace: wall time of the pass */
  CsTrace    *forward;      /* borrowed from traces: final forward */
  CsTrace    *backward;     /* borrowed from traces: final backward or NULL */
  CsTrace    *joint;        /* borrowed: fused joint after DCE, or NULL */
  gboolean    input_final;  /* the input was already final: no pass ran */
};

/* Thunder's provenance text for each pass (the `# Constructed by ...` line; reference/
 * thunder-traces.md 1.1), NULL to keep the input's line. */
static const char *
thunder_pass_name (const char *name)
{
  static const struct { const char *ours, *thunder; } names[] = {
    { "autocast", "Autocast" },
    { "grad", "Grad transform pass" },
    { "decompose", "Transform for operator executor execution" },
    { "sort-waits", "Sort Waits" },
    { "bucketing", "Batching all_reduce calls" },
    { "fuse", "Fusion" },
    { "remove-redundant-casts", "Remove redundant casts" },
    { "cse", "Nvfuser Common Subexpression Elimination" },
    { "dce", "Dead Code Elimination" },
    { "split-forward", "Augmented forward pass" },
    { "split-backward", "Backward pass" },
    { "delete-last-used", "Delete Last Used" },
    { "delete-last-used-backward", "Delete Last Used" },
  };
  for (gsize i = 0; i < G_N_ELEMENTS (names); i++)
    if (strcmp (names[i].ours, name) == 0)
      return names[i].thunder;
  /* a torch.compile backward graph's passes (cs_pipeline_run_pair): "fuse-backward" */
  if (g_str_has_suffix (name, "-backward"))
    {
      g_autofree char *base = g_strndup (name, strlen (name) - strlen ("-backward"));
      for (gsize i = 0; i < G_N_ELEMENTS (names); i++)
        if (strcmp (names[i].ours, base) == 0)
          return names[i].thunder;
    }
  return NULL;
}

/* Wall time in microseconds (never 0): what a user waits for a pass. */
static gint64
pass_clock_us (void)
{
  return g_get_monotonic_time () + 1;
}

/* CASTSCOPE_CHECK_IO=1: aborts when a statement of @trace (at any level) holds def-use ids
 * that differ from its arguments and target (cs_stmt_io_matches()), naming the pass, the
 * trace, the statement (and the region or call whose subsymbol it is) and the first id that
 * differs (cs_stmt_io_mismatch()). */
static void
check_io_tree (const CsTrace *trace, const CsStmt *s, const CsStmt *parent, guint depth,
               const char *pass)
{
  g_autofree char *why = cs_stmt_io_mismatch (s);

  if (why != NULL)
    {
      g_autofree char *under = parent == NULL
        ? g_strdup ("")
        : g_strdup_printf (", a subsymbol (depth %u) of statement %u (%s)", depth, parent->id,
                           parent->callee ? parent->callee : "?");
      g_error ("CASTSCOPE_CHECK_IO: after pass %s, trace %s: statement %u (%s, line %u, "
               "origin %u%s) holds stale def-use ids: %s",
               pass, trace->name ? trace->name : "?", s->id, s->callee ? s->callee : "?",
               s->line, s->origin, under, why);
    }
  for (guint i = 0; i < s->n_subs; i++)
    check_io_tree (trace, s->subs[i], s, depth + 1, pass);
}

static void
check_io (const CsTrace *trace, const char *pass)
{
  static int enabled = -1;

  if (enabled < 0)
    enabled = g_strcmp0 (g_getenv ("CASTSCOPE_CHECK_IO"), "1") == 0;
  if (!enabled)
    return;
  for (guint i = 0; i < trace->n_stmts; i++)
    check_io_tree (trace, trace->stmts[i], NULL, 0, pass);
}

static void
add_pass (CsPipeline *p, const char *name, CsTrace *trace, gint64 t0)
{
  gint64 dt = t0 ? (pass_clock_us () - t0) * 1000 : 0;
  const char *thunder = thunder_pass_name (name);

  check_io (trace, name);
  if (trace->pass == NULL || strcmp (trace->pass, name) != 0)
    trace->pass = cs_arena_strdup (trace->arena, name);
  if (thunder != NULL)
    trace->provenance = cs_arena_printf (trace->arena, "%s (took %" G_GINT64_FORMAT
                                         " milliseconds)", thunder, dt / 1000000);
  g_ptr_array_add (p->names, g_strdup (name));
  g_ptr_array_add (p->traces, trace);
  g_array_append_val (p->times_ns, dt);
}

/**
 * cs_trace_is_final: (see cs-pipeline.h)
 */
gboolean
cs_trace_is_final (const CsTrace *trace)
{
  g_return_val_if_fail (trace != NULL, FALSE);

  if (trace->name && strcmp (trace->name, "backward_fn") == 0)
    return TRUE;
  if (trace->provenance && g_str_has_prefix (trace->provenance, "Delete Last Used"))
    return TRUE;
  for (guint i = 0; i < trace->n_stmts; i++)
    if (_cs_stmt_is_region (trace->stmts[i]))
      return TRUE;
  return FALSE;
}

/* Gives the subsymbols @t owns the origin and grad_sum marks of the statement they decompose,
 * in place, as the fusion pass gives them when nvFuser takes them out of their statement
 * (cs-fuse-regions.c nv_flatten: it has to copy subsymbols it does not own; doing it here,
 * where they are new, saves the fusion pass a copy of nearly every subsymbol).  The BACKWARD
 * tag stays on the top-level statements, as in Thunder. */
static void
tag_subsymbols (CsTrace *t, CsStmt *stmt, guint depth)
{
  if (depth > 64 || stmt->kind != CS_STMT_CALL || (stmt->op && (stmt->op->tags & CS_OP_TAG_PRIM)))
    return;
  for (guint i = 0; i < stmt->n_subs; i++)
    {
      CsStmt *sub = stmt->subs[i];
      if (sub->owner != t->serial)
        continue;
      if (sub->origin == 0)
        sub->origin = stmt->origin;
      sub->grad_sum |= stmt->grad_sum;
      tag_subsymbols (t, sub, depth + 1);
    }
}

/* Prefixes the error of pass @pass with "PASS: ".  Errors of the lower layers (decompose,
 * meta) say "line N: ..." without the file: they become "FILE:N: ..." so that every pass error
 * reads "pass: t.txt:10: op: reason". */
static void
pass_error (GError **error, const char *pass, const CsTrace *t)
{
  const char *m;

  if (error == NULL || *error == NULL)
    return;
  m = (*error)->message;
  if (t != NULL && t->file != NULL && g_str_has_prefix (m, "line ") && g_ascii_isdigit (m[5]))
    {
      char *msg = g_strdup_printf ("%s:%s", t->file, m + 5);
      g_free ((*error)->message);
      (*error)->message = msg;
    }
  g_prefix_error (error, "%s: ", pass);
}

/* Thunder's execution transform under @policy: every top-level ltorch statement gets its
 * decomposition rebuilt (cs_decompose_trace; the statement itself is kept so the GUI can
 * collapse it, as Thunder prints it).  With matmul=upcast-f32, top-level prims.matmul /
 * prims.linear (as the grad rules write them) are replaced by their convert -> f32 -> convert
 * prims. */
static CsTrace *
decompose_pass (const CsTrace *in, const CsPolicy *policy, GError **error)
{
  /* the operator executors' execution transforms first: what they claim is not decomposed */
  g_autoptr(CsTrace) claimed = cs_executors_claim (in, policy);
  g_autoptr(CsTrace) t = cs_decompose_trace (claimed, policy, error);
  g_autoptr(GPtrArray) out = NULL;

  if (t == NULL)
    {
      pass_error (error, "decompose", in);
      return NULL;
    }
  for (guint i = 0; i < t->n_stmts; i++)
    tag_subsymbols (t, t->stmts[i], 0);
  if (policy->matmul != CS_MATMUL_UPCAST_F32)
    return g_steal_pointer (&t);
  out = g_ptr_array_new ();
  for (guint i = 0; i < t->n_stmts; i++)
    {
      CsStmt *s = t->stmts[i];
      const CsOp *sem = (s->kind == CS_STMT_CALL && s->op) ? cs_op_semantic (s->op) : NULL;
      if (sem != NULL && (s->op->tags & CS_OP_TAG_PRIM)
          && (sem->id == CS_OP_PRIM_MATMUL || sem->id == CS_OP_PRIM_LINEAR))
        {
          g_autoptr(GPtrArray) prims = g_ptr_array_new ();
          if (!cs_decompose_to_prims (t, s, policy, prims, error))
            {
              pass_error (error, "decompose", in);
              return NULL;
            }
          for (guint j = 0; j < prims->len; j++)
            {
              CsStmt *p = prims->pdata[j];
              if (p->origin == 0)
                p->origin = s->origin ? s->origin : s->id;
              p->backward = s->backward;
              g_ptr_array_add (out, p);
            }
          continue;
        }
      g_ptr_array_add (out, s);
    }
  cs_trace_set_stmts (t, (CsStmt **) out->pdata, out->len);
  return g_steal_pointer (&t);
}

/* TRUE when @t is already a joint forward+backward trace (Thunder's "Grad transform pass"
 * output, e.g. thunder_*_grad_joint.txt): it reads cotangents with prims.get_grad. */
static gboolean
trace_is_joint (const CsTrace *t)
{
  for (guint i = 0; i < t->n_stmts; i++)
    {
      const CsStmt *s = t->stmts[i];
      if (s->kind == CS_STMT_CALL && s->op && cs_op_semantic (s->op)->id == CS_OP_PRIM_GET_GRAD)
        return TRUE;
    }
  return FALSE;
}

static const CsValue *
dict_lookup (const CsValue *d, const char *key)
{
  if (d == NULL || d->kind != CS_VALUE_DICT)
    return NULL;
  for (guint i = 0; i + 1 < d->u.seq.n; i += 2)
    if (d->u.seq.items[i]->kind == CS_VALUE_STRING && strcmp (d->u.seq.items[i]->u.s, key) == 0)
      return d->u.seq.items[i + 1];
  return NULL;
}

/* A parsed joint carries no BACKWARD tags (the printer does not show them): a statement the
 * forward outputs (`fw_flat_out`) need is forward; every other statement from the first
 * prims.get_grad on is backward, which is how Thunder's split later divides it. */
static void
infer_backward_tags (CsTrace *t)
{
  CsStmt *ret = cs_trace_get_return (t);
  const CsValue *fw = ret ? dict_lookup (ret->value, "fw_flat_out") : NULL;
  g_autoptr(GHashTable) needed = g_hash_table_new (g_direct_hash, g_direct_equal);
  g_autoptr(GPtrArray) tmp = g_ptr_array_new ();
  guint first_gg = t->n_stmts;
  gboolean *fwd;

  for (guint i = 0; i < t->n_stmts; i++)
    {
      if (t->stmts[i]->backward)
        return; /* tagged already */
      if (first_gg == t->n_stmts && t->stmts[i]->kind == CS_STMT_CALL && t->stmts[i]->op
          && cs_op_semantic (t->stmts[i]->op)->id == CS_OP_PRIM_GET_GRAD)
        first_gg = i;
    }
  if (fw == NULL || first_gg == t->n_stmts)
    return;
  cs_value_collect_proxies (fw, tmp);
  for (guint j = 0; j < tmp->len; j++)
    g_hash_table_add (needed, tmp->pdata[j]);
  fwd = g_new0 (gboolean, t->n_stmts);
  for (guint i = t->n_stmts; i-- > 0;)
    {
      CsStmt *s = t->stmts[i];
      gboolean is_fwd = FALSE;
      g_ptr_array_set_size (tmp, 0);
      _cs_stmt_writes (s, tmp);
      for (guint j = 0; j < tmp->len && !is_fwd; j++)
        is_fwd = g_hash_table_contains (needed, tmp->pdata[j]);
      if (!is_fwd)
        continue;
      fwd[i] = TRUE;
      g_ptr_array_set_size (tmp, 0);
      _cs_stmt_reads (s, tmp);
      for (guint j = 0; j < tmp->len; j++)
        g_hash_table_add (needed, tmp->pdata[j]);
    }
  for (guint i = first_gg; i < t->n_stmts; i++)
    {
      CsStmt *s = t->stmts[i];
      if (s->kind == CS_STMT_CALL && !fwd[i])
        s->backward = 1;
    }
  t->backward_tags = TRUE;
  g_free (fwd);
}

/* The passes need the dtype and shape of every tensor input: a trace printed without type
 * strings (Thunder's docs often leave them out: `# t0` instead of `# t0: "cuda:0 f32[2]"`)
 * is refused with the first input a statement reads that has none, and what to add. */
static gboolean
check_typed_inputs (const CsTrace *t, GError **error)
{
  g_autoptr(GPtrArray) inputs = cs_trace_dup_inputs (t);
  g_autoptr(GPtrArray) reads = g_ptr_array_new ();

  for (guint i = 0; i < t->n_stmts; i++)
    {
      const CsStmt *s = t->stmts[i];

      if (s->kind != CS_STMT_CALL)
        continue;
      g_ptr_array_set_size (reads, 0);
      cs_stmt_collect_inputs (s, reads);
      for (guint k = 0; k < reads->len; k++)
        {
          const CsProxy *p = reads->pdata[k];
          if (p->typed || p->kind != CS_PROXY_OTHER || !g_ptr_array_find (inputs, p, NULL))
            continue;
          g_set_error (error, CS_PIPELINE_ERROR, CS_PIPELINE_ERROR_INPUT,
                       "%s:%u: %s: input '%s' has no type annotation: the trace was printed "
                       "without type strings; castscope needs the dtype and shape of every "
                       "tensor input, as Thunder prints them after the signature "
                       "(# %s: \"cuda:0 f32[8, 16]\")", t->file ? t->file : "<trace>",
                       s->line, s->callee, p->name, p->name);
          return FALSE;
        }
    }
  return TRUE;
}

/* The passes that apply to a torch.compile graph (cs-aten.h), which is already differentiated
 * and split: decompose (its aten ops to prims under @policy: computation dtype, matmul
 * precision), fuse, remove-redundant-casts, cse, dce, delete-last-used; no autocast (torch
 * applied it already), grad or split.  Each kept trace gets the pass name with @suffix
 * ("" or "-backward").  Returns the last trace (borrowed from @p), NULL with @error set. */
static CsTrace *
run_aten_passes (CsPipeline *p, const CsTrace *graph, const char *suffix,
                 const CsInductorGraph *plan, const char *plan_path, GError **error)
{
  const CsPolicy *policy = &p->policy;
  CsTrace *cur;
  g_autofree char *name = NULL;
  gint64 t0;

#define ATEN_PASS(nm, expr, prefix)                                       \
  do                                                                      \
    {                                                                     \
      t0 = pass_clock_us ();                                              \
      cur = (expr);                                                       \
      if (cur == NULL)                                                    \
        {                                                                 \
          if (prefix)                                                     \
            g_prefix_error (error, "%s: ", nm);                           \
          return NULL;                                                    \
        }                                                                 \
      g_free (name);                                                      \
      name = g_strconcat (nm, suffix, NULL);                              \
      add_pass (p, name, cur, t0);                                        \
    }                                                                     \
  while (0)

  cur = cs_trace_copy (graph, NULL);
  g_free (name);
  name = g_strconcat ("initial", suffix, NULL);
  add_pass (p, name, cur, 0);
  ATEN_PASS ("decompose", decompose_pass (cur, policy, error), FALSE);
  if (plan != NULL)
    ATEN_PASS ("fuse", cs_inductor_fuse_trace (cur, plan, plan_path, error), TRUE);
  else
    ATEN_PASS ("fuse", cs_fuse_trace (cur, policy, error), TRUE);
  ATEN_PASS ("remove-redundant-casts",
             policy->redundant_casts == CS_REDUNDANT_CASTS_REMOVE
               && (policy->fusion != CS_FUSION_OFF || policy->rounding == CS_ROUNDING_EAGER)
               ? cs_cse_remove_redundant_casts_rounding (cur, policy->rounding)
               : cs_trace_derive (cur, "remove-redundant-casts"), TRUE);
  ATEN_PASS ("cse", cs_cse_trace (cur), TRUE);
  ATEN_PASS ("dce", cs_cse_dce (cur), TRUE);
  ATEN_PASS ("delete-last-used", cs_dellast_trace (cur, FALSE), TRUE);
#undef ATEN_PASS
  return cur;
}

static CsPipeline *
pipeline_new (const CsPolicy *policy)
{
  CsPipeline *p = g_new0 (CsPipeline, 1);

  p->ref_count = 1;
  if (policy)
    p->policy = *policy;
  else
    cs_policy_init_default (&p->policy);
  p->names = g_ptr_array_new_with_free_func (g_free);
  p->traces = g_ptr_array_new_with_free_func ((GDestroyNotify) cs_trace_unref);
  p->times_ns = g_array_new (FALSE, FALSE, sizeof (gint64));
  return p;
}

/**
 * cs_pipeline_run_pair: (see cs-pipeline.h)
 */
CsPipeline *
cs_pipeline_run_pair (const CsTrace *forward, const CsTrace *backward, const CsPolicy *policy,
                      GError **error)
{
  g_autoptr(CsPipeline) p = NULL;

  g_return_val_if_fail (forward != NULL && forward->aten != NULL, NULL);
  g_return_val_if_fail (backward == NULL || backward->aten != NULL, NULL);
  p = pipeline_new (policy);
  if ((p->forward = run_aten_passes (p, forward, "", NULL, NULL, error)) == NULL)
    return NULL;
  if (backward != NULL
      && (p->backward = run_aten_passes (p, backward, "-backward", NULL, NULL, error)) == NULL)
    return NULL;
  return g_steal_pointer (&p);
}

/* The module of @code for @graph (by role and AOT graph number), or NULL with @error set. */
static const CsInductorGraph *
inductor_module (const CsInductorCode *code, const CsTrace *graph, GError **error)
{
  const CsInductorGraph *m;

  m = cs_inductor_code_find_graph (code, graph->aten->role, graph->aten->graph_id);
  if (m == NULL)
    g_set_error (error, CS_INDUCTOR_ERROR, CS_INDUCTOR_ERROR_GRAPH,
                 "%s: no module for the %s graph %d (no '# AOT ID: [\'%d_%s\']' line)",
                 code->path, cs_aten_role_name (graph->aten->role), graph->aten->graph_id,
                 graph->aten->graph_id, cs_aten_role_name (graph->aten->role));
  return m;
}

/**
 * cs_pipeline_run_inductor: (see cs-pipeline.h)
 */
CsPipeline *
cs_pipeline_run_inductor (const CsTrace *graph, const CsPolicy *policy,
                          const CsInductorCode *code, GError **error)
{
  g_autoptr(CsPipeline) p = NULL;
  const CsInductorGraph *m;

  g_return_val_if_fail (graph != NULL && graph->aten != NULL, NULL);
  g_return_val_if_fail (code != NULL, NULL);
  if ((m = inductor_module (code, graph, error)) == NULL)
    return NULL;
  p = pipeline_new (policy);
  if ((p->forward = run_aten_passes (p, graph, "", m, code->path, error)) == NULL)
    return NULL;
  if (graph->aten->role == CS_ATEN_GRAPH_BACKWARD)
    p->backward = p->forward;
  return g_steal_pointer (&p);
}

/**
 * cs_pipeline_run_pair_inductor: (see cs-pipeline.h)
 */
CsPipeline *
cs_pipeline_run_pair_inductor (const CsTrace *forward, const CsTrace *backward,
                               const CsPolicy *policy, const CsInductorCode *code,
                               GError **error)
{
  g_autoptr(CsPipeline) p = NULL;
  const CsInductorGraph *mf, *mb = NULL;

  g_return_val_if_fail (forward != NULL && forward->aten != NULL, NULL);
  g_return_val_if_fail (backward == NULL || backward->aten != NULL, NULL);
  g_return_val_if_fail (code != NULL, NULL);
  if ((mf = inductor_module (code, forward, error)) == NULL)
    return NULL;
  if (backward != NULL && (mb = inductor_module (code, backward, error)) == NULL)
    return NULL;
  p = pipeline_new (policy);
  if ((p->forward = run_aten_passes (p, forward, "", mf, code->path, error)) == NULL)
    return NULL;
  if (backward != NULL
      && (p->backward = run_aten_passes (p, backward, "-backward", mb, code->path, error)) == NULL)
    return NULL;
  return g_steal_pointer (&p);
}

/**
 * cs_pipeline_run: (see cs-pipeline.h)
 */
CsPipeline *
cs_pipeline_run (const CsTrace *initial, const CsPolicy *policy, const CsGradSpec *grad,
                 GError **error)
{
  g_autoptr(CsPipeline) p = NULL;
  CsTrace *cur;
  gboolean has_grad = FALSE;
  gint64 t0;

  g_return_val_if_fail (initial != NULL, NULL);

  p = g_new0 (CsPipeline, 1);
  p->ref_count = 1;
  if (policy)
    p->policy = *policy;
  else
    cs_policy_init_default (&p->policy);
  policy = &p->policy;
  p->names = g_ptr_array_new_with_free_func (g_free);
  p->traces = g_ptr_array_new_with_free_func ((GDestroyNotify) cs_trace_unref);
  p->times_ns = g_array_new (FALSE, FALSE, sizeof (gint64));

  if (initial->aten != NULL)
    {
      /* a torch.compile graph: already differentiated and split */
      if ((p->forward = run_aten_passes (p, initial, "", NULL, NULL, error)) == NULL)
        return NULL;
      if (initial->aten->role == CS_ATEN_GRAPH_BACKWARD)
        p->backward = p->forward;
      return g_steal_pointer (&p);
    }
  add_pass (p, "initial", cs_trace_copy (initial, NULL), 0);
  if (cs_trace_is_final (initial))
    {
      CsTrace *t = p->traces->pdata[0];
      p->input_final = TRUE;
      if (t->name && strcmp (t->name, "backward_fn") == 0)
        p->backward = t;
      p->forward = t;
      return g_steal_pointer (&p);
    }
  if (cs_trace_get_return (initial) == NULL)
    {
      guint last = 0;

      /* where the trace stops: a file cut short ends without its return */
      for (guint i = initial->n_stmts; i-- > 0 && last == 0;)
        last = initial->stmts[i]->line;
      g_set_error (error, CS_PIPELINE_ERROR, CS_PIPELINE_ERROR_INPUT,
                   "%s:%u: trace '%s' has no return statement (its last statement is on line %u: "
                   "is the file cut short?)",
                   initial->file ? initial->file : "<trace>", last,
                   initial->name ? initial->name : "?", last);
      return NULL;
    }

  {
    g_autoptr(GError) local = NULL;

    if (!cs_validate_return (initial, &local))
      {
        g_set_error_literal (error, CS_PIPELINE_ERROR, CS_PIPELINE_ERROR_INPUT, local->message);
        return NULL;
      }
  }
  if (!check_typed_inputs (initial, error))
    return NULL;
  /* shapes and dtypes that do not fit are the input's fault: one error at the statement, before
   * a pass meets them in its decomposition */
  {
    g_autoptr(GError) local = NULL;

    if (!cs_meta_check_trace (initial, &local))
      {
        g_set_error_literal (error, CS_PIPELINE_ERROR, CS_PIPELINE_ERROR_TYPES, local->message);
        return NULL;
      }
  }

  cur = p->traces->pdata[0];
  /* attention=fused: castscope's attention claim (issue 20), before autocast and grad so that
   * both see the one sdpa call; a pass of its own only when it claimed something, so that
   * the pass list of every other trace is as it was */
  if (policy->attention == CS_ATTENTION_FUSED)
    {
      guint n_claimed = 0;
      CsTrace *claimed;

      t0 = pass_clock_us ();
      claimed = cs_attention_claim_trace (cur, policy, &n_claimed);
      if (n_claimed > 0)
        {
          add_pass (p, "claim-attention", claimed, t0);
          cur = claimed;
        }
      else
        cs_trace_unref (claimed);
    }

  /* autocast */
  t0 = pass_clock_us ();
  cur = cs_autocast_trace (cur, policy, error);
  if (cur == NULL)
    {
      pass_error (error, "autocast", initial);
      return NULL;
    }
  add_pass (p, "autocast", cur, t0);

  /* grad: not for a trace that is already a joint (its get_grads read the cotangents), nor
   * for a prologue/epilogue (Thunder never differentiates those) */
  if (trace_is_joint (cur))
    {
      infer_backward_tags (cur);
      has_grad = TRUE;
    }
  else if (cur->name == NULL
           || (strcmp (cur->name, "prologue") != 0 && strcmp (cur->name, "epilogue") != 0))
  {
    CsGradSpec spec = { TRUE, NULL, FALSE, NULL, TRUE };
    if (grad)
      spec = *grad;
    spec.policy = policy;
    if (!spec.none)
      {
        t0 = pass_clock_us ();
        cur = cs_grad_joint (cur, &spec, error);
        if (cur == NULL)
          {
            pass_error (error, "grad", initial);
            return NULL;
          }
        add_pass (p, "grad", cur, t0);
        has_grad = TRUE;
      }
  }

  /* decompose */
  t0 = pass_clock_us ();
  cur = decompose_pass (cur, policy, error);
  if (cur == NULL)
    return NULL;
  add_pass (p, "decompose", cur, t0);

  /* Thunder's maybe_sort_waits (thunder/__init__.py: after the grad transform, before
   * transform_for_execution and its fusion pass): only for a trace with waits, so the pass
   * list of every other trace is as it was */
  if (cs_dist_trace_has_wait (cur))
    {
      t0 = pass_clock_us ();
      cur = cs_dist_sort_waits (cur, "sort-waits");
      add_pass (p, "sort-waits", cur, t0);
      /* ddp-bucket-mb: Thunder's transform_for_execution -> apply_bucketing_to_grad_allreduce,
       * as it would act if it recognised the sorted waits (cs_dist_bucket_grad_allreduce()) */
      if (cs_policy_ddp_bucket_mb (policy) >= 0)
        {
          t0 = pass_clock_us ();
          cur = cs_dist_bucket_grad_allreduce (cur, cs_policy_ddp_bucket_mb (policy), "bucketing");
          add_pass (p, "bucketing", cur, t0);
        }
    }

  /* fuse and its clean-ups */
  t0 = pass_clock_us ();
  cur = cs_fuse_trace (cur, policy, error);
  if (cur == NULL)
    {
      pass_error (error, "fuse", initial);
      return NULL;
    }
  add_pass (p, "fuse", cur, t0);

  t0 = pass_clock_us ();
  /* remove_redundant_casts is part of the nvFuser pass: without fusion (the torch executor
   * alone) every cast of the decomposition stays.  rounding=eager runs it with or without
   * fusion, stopping at every user-level op's result: each op rounds once, as eager PyTorch's
   * kernels (and the torch executor, which runs them) do */
  if (policy->redundant_casts == CS_REDUNDANT_CASTS_REMOVE
      && (policy->rounding == CS_ROUNDING_EAGER
          || (policy->fusion != CS_FUSION_OFF && cs_policy_has_executor (policy, CS_EXECUTOR_NVFUSER))))
    cur = cs_cse_remove_redundant_casts_rounding (cur, policy->rounding);
  else
    cur = cs_trace_derive (cur, "remove-redundant-casts");
  add_pass (p, "remove-redundant-casts", cur, t0);

  t0 = pass_clock_us ();
  /* CSE is the nvFuser executor's too (nvFuserExecutor.cse, called from its fusion_pass):
   * without it (fusion=off, or no nvfuser in the executor list) Thunder's torch executor keeps
   * every duplicate statement, the duplicate casts included */
  if (policy->fusion != CS_FUSION_OFF && cs_policy_has_executor (policy, CS_EXECUTOR_NVFUSER))
    cur = cs_cse_trace (cur);
  else
    cur = cs_trace_copy (cur, "cse");
  add_pass (p, "cse", cur, t0);

  t0 = pass_clock_us ();
  cur = cs_cse_dce (cur);
  add_pass (p, "dce", cur, t0);
  p->joint = cur;

  /* split */
  if (has_grad)
    {
      CsTrace *fw = NULL, *bw = NULL;
      t0 = pass_clock_us ();
      if (!cs_split_forward_backward (cur, &fw, &bw, error))
        {
          pass_error (error, "split", initial);
          return NULL;
        }
      add_pass (p, "split-forward", fw, t0);
      if (bw)
        add_pass (p, "split-backward", bw, 0);
      p->forward = fw;
      p->backward = bw;
    }
  else
    p->forward = cur;

  /* delete last used */
  t0 = pass_clock_us ();
  p->forward = cs_dellast_trace (p->forward, FALSE);
  add_pass (p, "delete-last-used", p->forward, t0);
  if (p->backward)
    {
      t0 = pass_clock_us ();
      p->backward = cs_dellast_trace (p->backward, TRUE);
      add_pass (p, "delete-last-used-backward", p->backward, t0);
    }
  return g_steal_pointer (&p);
}

CsPipeline *
cs_pipeline_ref (CsPipeline *pipeline)
{
  g_return_val_if_fail (pipeline != NULL, NULL);
  g_atomic_int_inc (&pipeline->ref_count);
  return pipeline;
}

void
cs_pipeline_unref (CsPipeline *pipeline)
{
  if (pipeline == NULL)
    return;
  if (!g_atomic_int_dec_and_test (&pipeline->ref_count))
    return;
  g_ptr_array_unref (pipeline->names);
  g_ptr_array_unref (pipeline->traces);
  g_array_unref (pipeline->times_ns);
  g_free (pipeline);
}

guint
cs_pipeline_n_passes (CsPipeline *pipeline)
{
  g_return_val_if_fail (pipeline != NULL, 0);
  return pipeline->traces->len;
}

const char *
cs_pipeline_pass_name (CsPipeline *pipeline, guint i)
{
  g_return_val_if_fail (pipeline != NULL, NULL);
  return i < pipeline->names->len ? pipeline->names->pdata[i] : NULL;
}

CsTrace *
cs_pipeline_get_trace (CsPipeline *pipeline, guint i)
{
  g_return_val_if_fail (pipeline != NULL, NULL);
  return i < pipeline->traces->len ? pipeline->traces->pdata[i] : NULL;
}

CsTrace *
cs_pipeline_find_trace (CsPipeline *pipeline, const char *name)
{
  g_return_val_if_fail (pipeline != NULL && name != NULL, NULL);
  for (guint i = 0; i < pipeline->names->len; i++)
    if (strcmp (pipeline->names->pdata[i], name) == 0)
      return pipeline->traces->pdata[i];
  return NULL;
}

CsTrace *
cs_pipeline_get_forward (CsPipeline *pipeline)
{
  g_return_val_if_fail (pipeline != NULL, NULL);
  return pipeline->forward;
}

CsTrace *
cs_pipeline_get_backward (CsPipeline *pipeline)
{
  g_return_val_if_fail (pipeline != NULL, NULL);
  return pipeline->backward;
}

CsTrace *
cs_pipeline_get_joint (CsPipeline *pipeline)
{
  g_return_val_if_fail (pipeline != NULL, NULL);
  return pipeline->joint;
}

const CsPolicy *
cs_pipeline_get_policy (CsPipeline *pipeline)
{
  g_return_val_if_fail (pipeline != NULL, NULL);
  return &pipeline->policy;
}

gboolean
cs_pipeline_input_was_final (CsPipeline *pipeline)
{
  g_return_val_if_fail (pipeline != NULL, FALSE);
  return pipeline->input_final;
}

static gboolean
holds_attention (const CsStmt *s)
{
  if (s->kind == CS_STMT_CALL && s->op != NULL
      && cs_op_semantic (s->op)->category == CS_OP_CAT_ATTENTION)
    return TRUE;
  for (guint j = 0; j < s->n_subs; j++)
    if (holds_attention (s->subs[j]))
      return TRUE;
  return FALSE;
}

gboolean
cs_pipeline_attention_claimed_nothing (CsPipeline *pipeline)
{
  g_return_val_if_fail (pipeline != NULL, FALSE);
  if (pipeline->policy.attention != CS_ATTENTION_FUSED || pipeline->forward == NULL)
    return FALSE;
  for (guint i = 0; i < pipeline->forward->n_stmts; i++)
    if (holds_attention (pipeline->forward->stmts[i]))
      return FALSE;
  return TRUE;
}

gint64
cs_pipeline_pass_time_ns (CsPipeline *pipeline, guint i)
{
  g_return_val_if_fail (pipeline != NULL, 0);
  return i < pipeline->times_ns->len ? g_array_index (pipeline->times_ns, gint64, i) : 0;
}
