/* cs-fuse.c: the nvFuser fusion pass.
 *
 * Source: thunder/executors/nvfuserex_impl.py (`fuse`, `_can_fuse_node`, checkers of
 * prims.matmul / prims.linear), thunder/executors/data_dependent_partition.py (dataflow
 * grouping), reference/thunder-traces.md 6.1-6.4 and 8.
 */
#include "cs-config.h"

#include "cs-fuse.h"
#include "cs-fuse-private.h"
#include "cs-ir-util.h"
#include "cs-ops.h"

#include <string.h>

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
      g_snprintf (buf, buf_len, "%s is not fusible (claimed by the torch executor)", name);
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


/* ------------------------------------------------------------------------------------------ */
/* Grouping                                                                                    */

typedef struct
{
  CsStmtVec   members;   /* top-level statements in order */
  CsStmtVec   comments;  /* comment lines emitted before the group */
  gboolean    fusible;   /* members are fusible (a candidate region) */
  gboolean    backward;  /* side of the forward/backward split */
  const char *why;       /* why the group ended (arena string) */
} Group;

static Group *
group_new (gboolean fusible, gboolean backward)
{
  Group *g = g_new0 (Group, 1);
  g->fusible = fusible;
  g->backward = backward;
  return g;
}

static void
group_free (Group *g)
{
  _cs_stmt_vec_free (&g->members);
  _cs_stmt_vec_free (&g->comments);
  g_free (g);
}

static gboolean
is_comment_like (const CsStmt *s)
{
  return s->kind == CS_STMT_COMMENT || s->kind == CS_STMT_BLANK;
}

/* TRUE when every prim @stmt flattens to (_cs_stmt_flatten's leaves) is a shape op; stops at
 * the first one that is not (no list is built).  Regions of shape ops alone are not fused
 * (PR #1559). */
static gboolean
flat_all_shape_ops (const CsStmt *stmt)
{
  const CsOp *sem;

  if (stmt->kind != CS_STMT_CALL || stmt->n_subs == 0
      || cs_op_has_tag (stmt->op, CS_OP_TAG_PRIM))
    {
      sem = stmt->op ? cs_op_semantic (stmt->op) : NULL;
      return sem != NULL && (sem->tags & CS_OP_TAG_SHAPE_OP);
    }
  for (guint i = 0; i < stmt->n_subs; i++)
    if (!flat_all_shape_ops (stmt->subs[i]))
      return FALSE;
  return TRUE;
}

static gboolean
group_is_shape_only (Group *g)
{
  for (guint i = 0; i < g->members.len; i++)
    if (!flat_all_shape_ops (g->members.v[i]))
      return FALSE;
  return TRUE;
}

/* "nvFusion<n>" in @arena, without printf (one per region). */
static const char *
region_name (CsArena *arena, guint n)
{
  char buf[24], digits[12];
  guint nd = 0, len = 8;

  memcpy (buf, "nvFusion", 8);
  do
    {
      digits[nd++] = (char) ('0' + n % 10);
      n /= 10;
    }
  while (n > 0);
  while (nd > 0)
    buf[len++] = digits[--nd];
  return cs_arena_strndup (arena, buf, len);
}

/* Emits one group into @out: a region call, or the members as they are. */
static void
emit_group (CsTrace *trace, Group *g, GPtrArray *out, guint *counter)
{
  g_auto(CsStmtVec) flat = CS_STMT_VEC_INIT;
  CsStmt *region;
  const char *name;

  for (guint i = 0; i < g->comments.len; i++)
    g_ptr_array_add (out, g->comments.v[i]);
  if (g->members.len == 0)
    return;
  if (!g->fusible || group_is_shape_only (g))
    {
      for (guint i = 0; i < g->members.len; i++)
        g_ptr_array_add (out, g->members.v[i]);
      return;
    }
  for (guint i = 0; i < g->members.len; i++)
    _cs_stmt_flatten (trace, g->members.v[i], &flat);
  name = region_name (trace->arena, (*counter)++);
  region = cs_stmt_new_call_static (trace, cs_op_get (CS_OP_FUSION), name, NULL, NULL, 0);
  region->type_comment = CS_TYPECOMMENT_NONE;
  region->backward = g->backward;
  region->origin = g->members.v[0]->origin;
  region->why = g->why;
  /* outputs start as everything produced; _cs_regions_refresh trims them */
  cs_stmt_set_subs (trace, region, flat.v, flat.len);
  g_ptr_array_add (out, region);
}

static void
fuse_consecutive (CsTrace *trace, const CsPolicy *policy, GPtrArray *items, GPtrArray *out,
                  guint *counter)
{
  Group *run = NULL;
  g_autoptr(GPtrArray) pending = g_ptr_array_new ();
  char buf[512];

#define CLOSE_RUN(reason) \
  G_STMT_START { \
    if (run != NULL) \
      { \
        run->why = (reason); \
        emit_group (trace, run, out, counter); \
        group_free (run); \
        run = NULL; \
      } \
  } G_STMT_END

  for (guint i = 0; i < items->len; i++)
    {
      CsStmt *s = items->pdata[i];
      const char *why;

      if (is_comment_like (s))
        {
          g_ptr_array_add (pending, s);
          continue;
        }
      why = _cs_fuse_why_not_fusible (s, policy, buf, sizeof buf);
      if (why == NULL)
        {
          if (run != NULL && !!run->backward != !!s->backward)
            CLOSE_RUN (run->backward ? "end of backward" : "end of forward");
          if (run == NULL)
            {
              for (guint j = 0; j < pending->len; j++)
                g_ptr_array_add (out, pending->pdata[j]);
              run = group_new (TRUE, s->backward);
            }
          else
            {
              for (guint j = 0; j < pending->len; j++)
                _cs_stmt_vec_push (&run->comments, pending->pdata[j]);
            }
          g_ptr_array_set_size (pending, 0);
          _cs_stmt_vec_push (&run->members, s);
          continue;
        }
      if (run != NULL)
        {
          const char *reason;
          if (s->kind == CS_STMT_RETURN)
            reason = run->backward ? "end of backward" : "end of trace";
          else if (s->op && cs_op_semantic (s->op)->id == CS_OP_PRIM_GET_GRAD && !run->backward)
            reason = _cs_arena_concat (trace->arena, "end of forward (next statement ",
                                   s->callee ? s->callee : "(null)", " starts the backward)");
          else
            reason = _cs_arena_concat (trace->arena, "next statement ", why, "");
          CLOSE_RUN (reason);
        }
      for (guint j = 0; j < pending->len; j++)
        g_ptr_array_add (out, pending->pdata[j]);
      g_ptr_array_set_size (pending, 0);
      g_ptr_array_add (out, s);
    }
  CLOSE_RUN ("end of trace");
  for (guint j = 0; j < pending->len; j++)
    g_ptr_array_add (out, pending->pdata[j]);
#undef CLOSE_RUN
}

/* Union-find over statement indices. */
static guint
uf_find (guint *parent, guint x)
{
  while (parent[x] != x)
    {
      parent[x] = parent[parent[x]];
      x = parent[x];
    }
  return x;
}

typedef struct
{
  guint      n;          /* statements (no comments, no return) */
  CsStmt   **stmts;      /* in trace order */
  GArray   **succ;       /* guint successor indices per node */
  GArray   **pred;       /* guint predecessor indices per node */
  gboolean  *fusible;
  guint     *parent;     /* union-find */
  guint     *gmax;       /* per root: largest member index */
  guint     *visit;      /* DFS stamp per node */
  guint      stamp;
} Dag;

/* TRUE when merging the groups of @a and @b (a's group has an edge into b's group) would
 * create a cycle: some path leaves the union and comes back. */
static gboolean
merge_makes_cycle (Dag *d, guint ra, guint rb)
{
  g_autoptr(GArray) stack = g_array_new (FALSE, FALSE, sizeof (guint));
  guint limit = MAX (d->gmax[ra], d->gmax[rb]);

  d->stamp++;
  /* start from every successor of a member of either group that is outside both */
  for (guint i = 0; i <= limit; i++)
    {
      guint r = uf_find (d->parent, i);
      if (r != ra && r != rb)
        continue;
      for (guint k = 0; k < d->succ[i]->len; k++)
        {
          guint s = g_array_index (d->succ[i], guint, k);
          guint rs = uf_find (d->parent, s);
          if (rs == ra || rs == rb || s > limit || d->visit[s] == d->stamp)
            continue;
          d->visit[s] = d->stamp;
          g_array_append_val (stack, s);
        }
    }
  while (stack->len > 0)
    {
      guint x = g_array_index (stack, guint, stack->len - 1);
      g_array_set_size (stack, stack->len - 1);
      for (guint k = 0; k < d->succ[x]->len; k++)
        {
          guint s = g_array_index (d->succ[x], guint, k);
          guint rs = uf_find (d->parent, s);
          if (rs == ra || rs == rb)
            return TRUE;
          if (s > limit || d->visit[s] == d->stamp)
            continue;
          d->visit[s] = d->stamp;
          g_array_append_val (stack, s);
        }
    }
  return FALSE;
}

static void
uf_union (Dag *d, guint a, guint b)
{
  guint ra = uf_find (d->parent, a), rb = uf_find (d->parent, b);
  guint r = MIN (ra, rb), o = MAX (ra, rb);
  if (ra == rb)
    return;
  d->parent[o] = r;
  d->gmax[r] = MAX (d->gmax[r], d->gmax[o]);
}

static void
fuse_dataflow (CsTrace *trace, const CsPolicy *policy, GPtrArray *items, GPtrArray *out,
               guint *counter)
{
  Dag d = { 0 };
  g_autoptr(GHashTable) producer = g_hash_table_new (g_direct_hash, g_direct_equal);
  g_autoptr(GPtrArray) tmp = g_ptr_array_new ();
  g_autoptr(GPtrArray) nodes = g_ptr_array_new ();
  g_autoptr(GPtrArray) head = g_ptr_array_new ();     /* comments before the first statement */
  GPtrArray **before;                                  /* comments attached to each node */
  CsStmt *ret = NULL;
  g_autoptr(GPtrArray) tail = g_ptr_array_new ();
  g_autoptr(GPtrArray) pending = g_ptr_array_new ();
  char buf[512];
  gboolean changed;

  /* nodes: every statement but comments and the final return (an earlier `return`, as in
   * malformed input, is an ordinary non-fusible node) */
  for (guint i = items->len; i-- > 0 && ret == NULL;)
    if (((CsStmt *) items->pdata[i])->kind == CS_STMT_RETURN)
      ret = items->pdata[i];
  for (guint i = 0; i < items->len; i++)
    {
      CsStmt *s = items->pdata[i];
      if (is_comment_like (s) || s == ret)
        continue;
      g_ptr_array_add (nodes, s);
    }
  d.n = nodes->len;
  d.stmts = (CsStmt **) nodes->pdata;
  d.succ = g_new0 (GArray *, d.n);
  d.pred = g_new0 (GArray *, d.n);
  d.fusible = g_new0 (gboolean, d.n);
  d.parent = g_new0 (guint, d.n);
  d.gmax = g_new0 (guint, d.n);
  d.visit = g_new0 (guint, d.n);
  before = g_new0 (GPtrArray *, d.n);

  {
    guint ni = 0;
    for (guint i = 0; i < items->len; i++)
      {
        CsStmt *s = items->pdata[i];
        if (is_comment_like (s))
          {
            g_ptr_array_add (pending, s);
            continue;
          }
        if (s == ret)
          {
            for (guint j = 0; j < pending->len; j++)
              g_ptr_array_add (tail, pending->pdata[j]);
            g_ptr_array_set_size (pending, 0);
            continue;
          }
        before[ni] = g_ptr_array_new ();
        for (guint j = 0; j < pending->len; j++)
          g_ptr_array_add (before[ni], pending->pdata[j]);
        g_ptr_array_set_size (pending, 0);
        ni++;
      }
    for (guint j = 0; j < pending->len; j++)
      g_ptr_array_add (tail, pending->pdata[j]);
  }

  for (guint i = 0; i < d.n; i++)
    {
      CsStmt *s = d.stmts[i];
      d.succ[i] = g_array_new (FALSE, FALSE, sizeof (guint));
      d.pred[i] = g_array_new (FALSE, FALSE, sizeof (guint));
      d.parent[i] = i;
      d.gmax[i] = i;
      d.fusible[i] = _cs_fuse_why_not_fusible (s, policy, buf, sizeof buf) == NULL;
      g_ptr_array_set_size (tmp, 0);
      _cs_stmt_reads (s, tmp);
      for (guint j = 0; j < tmp->len; j++)
        {
          gpointer pv;
          if (g_hash_table_lookup_extended (producer, tmp->pdata[j], NULL, &pv))
            {
              guint p = GPOINTER_TO_UINT (pv);
              gboolean dup = FALSE;
              for (guint k = 0; k < d.pred[i]->len && !dup; k++)
                dup = g_array_index (d.pred[i], guint, k) == p;
              if (!dup)
                {
                  g_array_append_val (d.pred[i], p);
                  g_array_append_val (d.succ[p], i);
                }
            }
        }
      g_ptr_array_set_size (tmp, 0);
      _cs_stmt_writes (s, tmp);
      for (guint j = 0; j < tmp->len; j++)
        g_hash_table_insert (producer, tmp->pdata[j], GUINT_TO_POINTER (i));
    }

  /* vertical merges: producer -> consumer, both fusible, same side, no cycle */
  do
    {
      changed = FALSE;
      for (guint i = 0; i < d.n; i++)
        {
          if (!d.fusible[i])
            continue;
          for (guint k = 0; k < d.pred[i]->len; k++)
            {
              guint p = g_array_index (d.pred[i], guint, k);
              guint rp = uf_find (d.parent, p), ri = uf_find (d.parent, i);
              if (rp == ri || !d.fusible[p] || !!d.stmts[p]->backward != !!d.stmts[i]->backward)
                continue;
              if (merge_makes_cycle (&d, rp, ri))
                continue;
              uf_union (&d, rp, ri);
              changed = TRUE;
            }
        }
    }
  while (changed);

  /* topological emission with horizontal merges of ready fusible groups */
  {
    guint *indeg = g_new0 (guint, d.n);      /* per root: edges from other groups */
    gboolean *done = g_new0 (gboolean, d.n); /* per root */
    g_autoptr(GPtrArray) groups = g_ptr_array_new ();
    GHashTable *root_members = g_hash_table_new_full (g_direct_hash, g_direct_equal, NULL,
                                                      (GDestroyNotify) g_array_unref);

    for (guint i = 0; i < d.n; i++)
      {
        guint r = uf_find (d.parent, i);
        GArray *m = g_hash_table_lookup (root_members, GUINT_TO_POINTER (r));
        if (m == NULL)
          {
            m = g_array_new (FALSE, FALSE, sizeof (guint));
            g_hash_table_insert (root_members, GUINT_TO_POINTER (r), m);
          }
        g_array_append_val (m, i);
        for (guint k = 0; k < d.pred[i]->len; k++)
          if (uf_find (d.parent, g_array_index (d.pred[i], guint, k)) != r)
            indeg[r]++;
      }

    for (;;)
      {
        guint best = G_MAXUINT;
        /* the ready root with the smallest first member (roots are their smallest index) */
        for (guint r = 0; r < d.n; r++)
          if (uf_find (d.parent, r) == r && !done[r] && indeg[r] == 0)
            {
              best = r;
              break;
            }
        if (best == G_MAXUINT)
          break;
        if (d.fusible[best])
          for (guint r = best + 1; r < d.n; r++)
            if (uf_find (d.parent, r) == r && !done[r] && indeg[r] == 0 && d.fusible[r]
                && !!d.stmts[r]->backward == !!d.stmts[best]->backward)
              {
                /* merge r into best (independent: both ready) */
                GArray *mb = g_hash_table_lookup (root_members, GUINT_TO_POINTER (best));
                GArray *mr = g_hash_table_lookup (root_members, GUINT_TO_POINTER (r));
                g_array_append_vals (mb, mr->data, mr->len);
                d.parent[r] = best;
                done[r] = TRUE;
              }
        done[best] = TRUE;
        {
          GArray *m = g_hash_table_lookup (root_members, GUINT_TO_POINTER (best));
          Group *g = group_new (d.fusible[best], d.stmts[best]->backward);
          /* members in trace order */
          guint *idx = (guint *) m->data;
          for (guint a = 1; a < m->len; a++)
            for (guint b = a; b > 0 && idx[b - 1] > idx[b]; b--)
              {
                guint t = idx[b];
                idx[b] = idx[b - 1];
                idx[b - 1] = t;
              }
          for (guint k = 0; k < m->len; k++)
            {
              guint x = idx[k];
              for (guint c = 0; c < before[x]->len; c++)
                _cs_stmt_vec_push (&g->comments, before[x]->pdata[c]);
              _cs_stmt_vec_push (&g->members, d.stmts[x]);
            }
          g->why = cs_arena_strdup (trace->arena,
                                    "dataflow: no fusible producer or consumer left that can "
                                    "join without a cycle or crossing forward/backward");
          g_ptr_array_add (groups, g);
          /* release successors */
          for (guint k = 0; k < m->len; k++)
            {
              guint x = idx[k];
              for (guint e = 0; e < d.succ[x]->len; e++)
                {
                  guint s = g_array_index (d.succ[x], guint, e);
                  guint rs = uf_find (d.parent, s);
                  if (rs != best && indeg[rs] > 0)
                    indeg[rs]--;
                }
            }
        }
      }
    for (guint i = 0; i < groups->len; i++)
      {
        emit_group (trace, groups->pdata[i], out, counter);
        group_free (groups->pdata[i]);
      }
    g_hash_table_unref (root_members);
    g_free (indeg);
    g_free (done);
  }

  for (guint j = 0; j < tail->len; j++)
    g_ptr_array_add (out, tail->pdata[j]);
  if (ret)
    g_ptr_array_add (out, ret);

  for (guint i = 0; i < d.n; i++)
    {
      g_array_unref (d.succ[i]);
      g_array_unref (d.pred[i]);
      g_ptr_array_unref (before[i]);
    }
  g_free (before);
  g_free (d.succ);
  g_free (d.pred);
  g_free (d.fusible);
  g_free (d.parent);
  g_free (d.gmax);
  g_free (d.visit);
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
  CsPolicy def;
  guint counter = 0;

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
  for (guint i = 0; i < t->n_stmts; i++)
    expand_cast_matmuls (t, t->stmts[i], items);

  if (policy->fusion == CS_FUSION_OFF)
    g_ptr_array_extend (out, items, NULL, NULL);
  else if (policy->fusion == CS_FUSION_DATAFLOW)
    fuse_dataflow (t, policy, items, out, &counter);
  else
    fuse_consecutive (t, policy, items, out, &counter);

  cs_trace_set_stmts (t, (CsStmt **) out->pdata, out->len);
  _cs_regions_refresh (t, FALSE);
  if (policy->fusion != CS_FUSION_OFF)
    _cs_fuse_rematerialize (t);
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

/**
 * cs_fuse_check_invariants: (see cs-fuse.h)
 */
gboolean
cs_fuse_check_invariants (const CsTrace *trace, GError **error)
{
  g_autoptr(GHashTable) defined = g_hash_table_new (g_direct_hash, g_direct_equal);
  g_autoptr(GHashTable) top_defined = g_hash_table_new (g_direct_hash, g_direct_equal);
  g_autoptr(GPtrArray) tmp = g_ptr_array_new ();
  g_autoptr(GPtrArray) inputs = NULL;

  g_return_val_if_fail (trace != NULL, FALSE);

  inputs = cs_trace_dup_inputs (trace);
  for (guint i = 0; i < inputs->len; i++)
    {
      g_hash_table_add (defined, inputs->pdata[i]);
      g_hash_table_add (top_defined, inputs->pdata[i]);
    }
  for (guint i = 0; i < trace->n_stmts; i++)
    {
      CsStmt *s = trace->stmts[i];
      if (s->kind == CS_STMT_COMMENT && s->comment_kind == CS_COMMENT_INPUT && s->annotated)
        g_hash_table_add (top_defined, s->annotated);
    }

#define FAIL(...) \
  G_STMT_START { \
    g_set_error (error, CS_FUSE_ERROR, CS_FUSE_ERROR_INVARIANT, __VA_ARGS__); \
    return FALSE; \
  } G_STMT_END

  for (guint i = 0; i < trace->n_stmts; i++)
    {
      CsStmt *s = trace->stmts[i];

      if (_cs_stmt_is_region (s))
        {
          g_autoptr(GHashTable) inside = g_hash_table_new (g_direct_hash, g_direct_equal);
          g_autoptr(GHashTable) ext = g_hash_table_new (g_direct_hash, g_direct_equal);
          g_autoptr(GHashTable) args = g_hash_table_new (g_direct_hash, g_direct_equal);
          g_autoptr(GPtrArray) outs = g_ptr_array_new ();

          g_ptr_array_set_size (tmp, 0);
          _cs_stmt_reads (s, tmp);
          for (guint j = 0; j < tmp->len; j++)
            {
              if (!g_hash_table_contains (top_defined, tmp->pdata[j]))
                FAIL ("%s reads %s before it is produced", s->callee,
                      ((CsProxy *) tmp->pdata[j])->name);
              if (!g_hash_table_add (args, tmp->pdata[j]))
                FAIL ("%s lists input %s twice", s->callee, ((CsProxy *) tmp->pdata[j])->name);
            }
          for (guint k = 0; k < s->n_subs; k++)
            {
              CsStmt *sub = s->subs[k];
              if (!!sub->backward != !!s->backward)
                FAIL ("%s mixes forward and backward statements", s->callee);
              g_ptr_array_set_size (tmp, 0);
              _cs_stmt_reads (sub, tmp);
              for (guint j = 0; j < tmp->len; j++)
                {
                  CsProxy *p = tmp->pdata[j];
                  if (g_hash_table_contains (inside, p))
                    continue;
                  if (!g_hash_table_contains (args, p))
                    FAIL ("%s: %s reads %s, which is neither produced inside nor an input",
                          s->callee, sub->callee ? sub->callee : "?", p->name);
                  g_hash_table_add (ext, p);
                }
              g_ptr_array_set_size (tmp, 0);
              _cs_stmt_writes (sub, tmp);
              for (guint j = 0; j < tmp->len; j++)
                {
                  CsProxy *p = tmp->pdata[j];
                  if (!g_hash_table_add (inside, p) || g_hash_table_contains (defined, p))
                    FAIL ("%s: %s is produced twice (a statement in two regions?)", s->callee,
                          p->name);
                  g_hash_table_add (defined, p);
                }
            }
          if (g_hash_table_size (ext) != g_hash_table_size (args))
            FAIL ("%s lists an input its prims never read", s->callee);
          _cs_stmt_writes (s, outs);
          for (guint j = 0; j < outs->len; j++)
            {
              if (!g_hash_table_contains (inside, outs->pdata[j]))
                FAIL ("%s: output %s is not produced inside", s->callee,
                      ((CsProxy *) outs->pdata[j])->name);
              g_hash_table_add (top_defined, outs->pdata[j]);
            }
          continue;
        }

      g_ptr_array_set_size (tmp, 0);
      _cs_stmt_reads (s, tmp);
      for (guint j = 0; j < tmp->len; j++)
        {
          CsProxy *p = tmp->pdata[j];
          if (!g_hash_table_contains (top_defined, p) && p->kind != CS_PROXY_OTHER)
            FAIL ("%s reads %s before it is produced",
                  s->callee ? s->callee : (s->kind == CS_STMT_RETURN ? "return" : "statement"),
                  p->name);
        }
      g_ptr_array_set_size (tmp, 0);
      _cs_stmt_writes (s, tmp);
      for (guint j = 0; j < tmp->len; j++)
        {
          CsProxy *p = tmp->pdata[j];
          if (g_hash_table_contains (defined, p) && !g_hash_table_contains (top_defined, p))
            FAIL ("%s is produced twice", p->name);
          g_hash_table_add (defined, p);
          g_hash_table_add (top_defined, p);
        }
    }
#undef FAIL
  return TRUE;
}
