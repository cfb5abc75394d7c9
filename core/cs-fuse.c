/* cs-fuse.c: the nvFuser fusion pass - fusibility (which statements nvFuser takes) and the
 * pass's steps in order.  Its parts live beside it: region building in cs-fuse-regions.c, the
 * region refresh in cs-fuse-refresh.c, rematerialization in cs-fuse-remat.c, the invariant
 * checker in cs-fuse-check.c; the IR services every pass uses in cs-ir-util.c.
 *
 * Source: thunder/executors/nvfuserex_impl.py (`fuse`, `_can_fuse_node`, checkers of
 * prims.matmul / prims.linear), reference/thunder-traces.md 6.1-6.4 and 8.
 */
#include "cs-config.h"

#include "cs-executors.h"
#include "cs-fuse.h"
#include "cs-fuse-private.h"
#include "cs-ir-util.h"
#include "cs-ops.h"

G_DEFINE_QUARK (cs-fuse-error-quark, cs_fuse_error)

/* ------------------------------------------------------------------------------------------ */
/* Fusibility (Thunder's _can_fuse_node + the executor checkers)                               */

static gboolean
dtype_supported (CsDtype d)
{
  switch (d)
    {
    case CS_DTYPE_U8:
    case CS_DTYPE_I8:
    case CS_DTYPE_I16:
    case CS_DTYPE_C32:
    case CS_DTYPE_F8_E8M0FNU:
      return FALSE;
    default:
      return TRUE;
    }
}

/* Checks the proxies of one statement: supported dtypes and at least one CUDA tensor (untyped
 * proxies count as CUDA tensors: the docs' traces omit types). */
static const char *
check_tensors (const CsStmt *stmt, char *buf, gsize buf_len)
{
  g_auto(CsProxyVec) ps = CS_PROXY_VEC_INIT;
  gboolean any_cuda = FALSE, any_tensor = FALSE;

  _cs_stmt_reads_vec (stmt, &ps);
  _cs_stmt_writes_vec (stmt, &ps);
  for (guint i = 0; i < ps.len; i++)
    {
      CsProxy *p = ps.v[i];
      if (p->kind == CS_PROXY_TENSOR)
        {
          any_tensor = TRUE;
          if (!dtype_supported (p->dtype))
            {
              g_snprintf (buf, buf_len, "%s has a %s tensor (not supported by nvFuser)",
                          stmt->callee ? stmt->callee : "statement",
                          cs_dtype_short_name (p->dtype));
              return buf;
            }
          if (p->device.type == CS_DEVICE_CUDA || !p->typed)
            any_cuda = TRUE;
        }
      else if (!p->typed)
        any_cuda = TRUE;
    }
  if (any_tensor && !any_cuda)
    {
      g_snprintf (buf, buf_len, "%s has no CUDA tensor", stmt->callee ? stmt->callee : "statement");
      return buf;
    }
  if (!any_tensor && !any_cuda)
    {
      g_snprintf (buf, buf_len, "%s reads and writes no tensor",
                  stmt->callee ? stmt->callee : "statement");
      return buf;
    }
  return NULL;
}

static const char *
why_not_fusible_rec (const CsStmt *stmt, const CsPolicy *policy, char *buf, gsize buf_len,
                     guint depth)
{
  const CsOp *op, *sem;
  const char *name;

  if (stmt->kind != CS_STMT_CALL)
    return "not a bound symbol";
  op = stmt->op;
  name = stmt->callee ? stmt->callee : (op ? op->name : "?");
  if (op == NULL)
    {
      g_snprintf (buf, buf_len, "%s is unknown", name);
      return buf;
    }
  sem = cs_op_semantic (op);
  if (cs_op_is_fusion (op))
    {
      g_snprintf (buf, buf_len, "%s is already a fusion region", name);
      return buf;
    }
  if (sem->category == CS_OP_CAT_BOOKKEEPING)
    {
      g_snprintf (buf, buf_len, "%s is not fusible (bookkeeping)", name);
      return buf;
    }
  /* An executor's name (torch.reshape, Tensor.expand, torch_slice_prim_impl) means Thunder's
   * "Transform for execution" already gave the statement to that executor, which happens only
   * to statements nvFuser did not take: re-fusing a final trace keeps that decision. */
  if ((op->tags & CS_OP_TAG_EXECUTOR) && depth == 0)
    {
      g_snprintf (buf, buf_len, "%s is not fusible (claimed by the %s executor)", name,
                  cs_executor_name (cs_executor_of_stmt (stmt)));
      return buf;
    }
  if (sem->id == CS_OP_PRIM_MATMUL || sem->id == CS_OP_LTORCH_MATMUL)
    {
      if (!policy->fuse_matmul)
        {
          g_snprintf (buf, buf_len, "%s is not fusible (fuse-matmul=off)", name);
          return buf;
        }
      if (stmt->n_subs == 0 || cs_op_has_tag (op, CS_OP_TAG_PRIM))
        return check_tensors (stmt, buf, buf_len);
    }
  else if (sem->id == CS_OP_PRIM_LINEAR || sem->id == CS_OP_LTORCH_LINEAR)
    {
      if (!policy->fuse_linear)
        {
          g_snprintf (buf, buf_len, "%s is not fusible (fuse-linear=off)", name);
          return buf;
        }
      if (stmt->n_subs == 0 || cs_op_has_tag (op, CS_OP_TAG_PRIM))
        return check_tensors (stmt, buf, buf_len);
    }
  if (stmt->n_subs > 0 && !cs_op_has_tag (op, CS_OP_TAG_PRIM) && depth < 64)
    {
      for (guint i = 0; i < stmt->n_subs; i++)
        {
          char sub_buf[256];
          const char *r = why_not_fusible_rec (stmt->subs[i], policy, sub_buf, sizeof sub_buf,
                                               depth + 1);
          if (r != NULL)
            {
              g_snprintf (buf, buf_len, "%s is not fusible (its decomposition: %s)", name, r);
              return buf;
            }
        }
      return check_tensors (stmt, buf, buf_len);
    }
  if (!(op->tags & CS_OP_TAG_FUSIBLE)
      && !(sem->tags & CS_OP_TAG_FUSIBLE && cs_op_has_tag (sem, CS_OP_TAG_PRIM)))
    {
      g_snprintf (buf, buf_len, "%s is not fusible (no nvFuser translator)", name);
      return buf;
    }
  return check_tensors (stmt, buf, buf_len);
}

const char *
_cs_fuse_why_not_fusible (const CsStmt *stmt, const CsPolicy *policy, char *buf, gsize buf_len)
{
  return why_not_fusible_rec (stmt, policy, buf, buf_len, 0);
}

gboolean
cs_fuse_stmt_is_fusible (const CsStmt *stmt, const CsPolicy *policy)
{
  char buf[256];
  CsPolicy def;

  g_return_val_if_fail (stmt != NULL, FALSE);
  if (policy == NULL)
    {
      cs_policy_init_default (&def);
      policy = &def;
    }
  return _cs_fuse_why_not_fusible (stmt, policy, buf, sizeof buf) == NULL;
}

/**
 * cs_fuse_count_regions:
 * @trace: a trace
 *
 * Returns: the number of top-level region calls (nvFusionK, TorchCompileK, CUDAGraphK)
 */
guint
cs_fuse_count_regions (const CsTrace *trace)
{
  guint n = 0;

  g_return_val_if_fail (trace != NULL, 0);
  for (guint i = 0; i < trace->n_stmts; i++)
    if (_cs_stmt_is_region (trace->stmts[i]))
      n++;
  return n;
}


/* The executor step before fusion: a matmul/linear whose decomposition holds casts (policy
 * matmul=upcast-f32) is replaced by its prims, so the casts can join regions like any other
 * cast; every other statement is kept (claimed whole by nvFuser or the torch executor). */
static void
expand_cast_matmuls (CsTrace *t, CsStmt *s, GPtrArray *out)
{
  if (s->kind == CS_STMT_CALL && s->op != NULL && s->n_subs > 0
      && !cs_op_has_tag (s->op, CS_OP_TAG_PRIM)
      && cs_op_semantic (s->op)->category == CS_OP_CAT_MATMUL)
    {
      g_auto(CsStmtVec) flat = CS_STMT_VEC_INIT;
      gboolean has_cast = FALSE;
      _cs_stmt_flatten (t, s, &flat);
      for (guint i = 0; i < flat.len && !has_cast; i++)
        has_cast = _cs_stmt_is_cast (flat.v[i], NULL, NULL);
      if (has_cast)
        {
          for (guint i = 0; i < flat.len; i++)
            g_ptr_array_add (out, flat.v[i]);
          return;
        }
    }
  g_ptr_array_add (out, s);
}

/**
 * cs_fuse_trace: (see cs-fuse.h)
 */
CsTrace *
cs_fuse_trace (const CsTrace *trace, const CsPolicy *policy, GError **error)
{
  g_autoptr(CsTrace) t = NULL;
  g_autoptr(GPtrArray) items = g_ptr_array_sized_new (trace->n_stmts);
  g_autoptr(GPtrArray) out = g_ptr_array_sized_new (trace->n_stmts);
  CsRefreshMarks *marks;      /* the refresh's marks, for every refresh of this pass */
  CsPolicy def;
  guint counter = 0;
  gboolean refreshed = FALSE; /* the trace is as a refresh left it */

  g_return_val_if_fail (trace != NULL, NULL);
  if (policy == NULL)
    {
      cs_policy_init_default (&def);
      policy = &def;
    }
  if (cs_trace_get_return (trace) == NULL)
    {
      g_set_error (error, CS_FUSE_ERROR, CS_FUSE_ERROR_INPUT,
                   "%s: trace '%s' has no return statement; cannot fuse",
                   trace->file ? trace->file : "<trace>", trace->name ? trace->name : "?");
      return NULL;
    }

  t = cs_trace_derive_shared (trace, "fuse");
  marks = _cs_refresh_marks_new ();
  for (guint i = 0; i < t->n_stmts; i++)
    expand_cast_matmuls (t, t->stmts[i], items);

  /* the fusion executors in the policy's priority order (Thunder's transform_for_execution
   * runs each fusion executor's fusion_pass in the order of its executor list): each groups
   * what is left, then rematerializes every pair of fusion regions made so far
   * (torch_compile.py and nvfuserex_impl.py both call rematerialize); fusion=off makes no
   * regions of either */
  for (guint e = 0; e < policy->n_executors && e < CS_N_EXECUTORS; e++)
    {
      CsExecutor ex = (CsExecutor) policy->executors[e];
      guint xcounter = 0;

      if (policy->fusion == CS_FUSION_OFF)
        break;
      if (ex == CS_EXECUTOR_TORCHCOMPILE_XENTROPY)
        _cs_fuse_group_xentropy (t, items, out, &xcounter);
      else if (ex == CS_EXECUTOR_NVFUSER && policy->fusion == CS_FUSION_DATAFLOW)
        _cs_fuse_group_dataflow (t, policy, items, out, &counter);
      else if (ex == CS_EXECUTOR_NVFUSER && policy->fusion == CS_FUSION_CONSECUTIVE)
        _cs_fuse_group_consecutive (t, policy, items, out, &counter);
      else
        continue;
      cs_trace_set_stmts (t, (CsStmt **) out->pdata, out->len);
      _cs_regions_refresh_with (t, FALSE, marks);
      /* leaves the trace refreshed (it refreshes after any change) */
      _cs_fuse_rematerialize (t, policy, marks);
      refreshed = TRUE;
      g_ptr_array_set_size (items, 0);
      g_ptr_array_set_size (out, 0);
      for (guint i = 0; i < t->n_stmts; i++)
        g_ptr_array_add (items, t->stmts[i]);
    }
  if (!refreshed)
    {
      cs_trace_set_stmts (t, (CsStmt **) items->pdata, items->len);
      _cs_regions_refresh_with (t, FALSE, marks);
    }
  _cs_refresh_marks_free (marks);
  /* unused proxies the decomposition and grad passes left behind stay in the shared tables
   * (no later pass copies them); the dce pass drops them */
  return g_steal_pointer (&t);
}

/**
 * cs_fuse_flatten_regions: (see cs-fuse.h)
 */
CsTrace *
cs_fuse_flatten_regions (const CsTrace *trace)
{
  g_autoptr(CsTrace) t = NULL;
  g_autoptr(GPtrArray) out = g_ptr_array_new ();

  g_return_val_if_fail (trace != NULL, NULL);
  t = cs_trace_copy (trace, "flatten-regions");
  for (guint i = 0; i < t->n_stmts; i++)
    {
      CsStmt *s = t->stmts[i];
      if (_cs_stmt_is_region (s))
        for (guint j = 0; j < s->n_subs; j++)
          {
            s->subs[j]->backward = s->backward;
            g_ptr_array_add (out, s->subs[j]);
          }
      else if (s->kind != CS_STMT_DEL)
        g_ptr_array_add (out, s);
    }
  cs_trace_set_stmts (t, (CsStmt **) out->pdata, out->len);
  return g_steal_pointer (&t);
}
