/* cs-fuse-regions.c: region building, the fusion pass's grouping of statements into nvFuser
 * regions (consecutive and dataflow), see cs-fuse-private.h.
 *
 * Source: thunder/executors/nvfuserex_impl.py (`fuse`: consecutive fusible statements),
 * thunder/executors/data_dependent_partition.py (dataflow grouping); reference/thunder-traces.md
 * 6.2 and 6.3.
 */
#include "cs-config.h"

#include "cs-executors.h"
#include "cs-fuse.h"
#include "cs-fuse-private.h"
#include "cs-ir-util.h"
#include "cs-ops.h"
#include "cs-ops-args.h"

#include <string.h>

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

/* The tensor argument @name of @s (read through its op's schema), else NULL. */
static const CsProxy *
tensor_arg (const CsStmt *s, CsArgName name)
{
  const CsValue *v = cs_stmt_arg (s, name);
  return v != NULL && v->kind == CS_VALUE_PROXY && v->u.proxy->kind == CS_PROXY_TENSOR
           ? v->u.proxy : NULL;
}

/* nvFuser's is_supported_tensor: a CUDA tensor (untyped counts as one) of a dtype nvFuser
 * has, rank 8 at most. */
static gboolean
nv_supported_tensor (const CsProxy *p)
{
  if (p == NULL)
    return FALSE;
  if (!p->typed)
    return TRUE;
  return p->device.type == CS_DEVICE_CUDA && p->rank <= 8 && p->dtype != CS_DTYPE_U8
         && p->dtype != CS_DTYPE_I8 && p->dtype != CS_DTYPE_I16 && p->dtype != CS_DTYPE_C32
         && p->dtype != CS_DTYPE_F8_E8M0FNU;
}

/* TRUE when nvFuser executes the composite @s itself instead of its subsymbols (its
 * implmap holds the ltorch symbol): ltorch.embedding under _embedding_check (input and
 * weight supported tensors, a 2-D weight; the stub's nvFuser 0.2.27 passes the version
 * test).  Thunder's nvfuserex_impl.py register_supported(ltorch.embedding, embedding,
 * _embedding_check); nvFuserExecutor.flatten stops at such a symbol. */
static gboolean
nv_executes_whole (const CsStmt *s)
{
  const CsProxy *idx, *w;

  if (s->kind != CS_STMT_CALL || s->op == NULL || s->op->id != CS_OP_LTORCH_EMBEDDING)
    return FALSE;
  idx = tensor_arg (s, CS_ARG_A);
  w = tensor_arg (s, CS_ARG_WEIGHT);
  return nv_supported_tensor (idx) && nv_supported_tensor (w) && (!w->typed || w->rank == 2);
}

/* nvFuserExecutor.flatten: @stmt as the statements nvFuser executes, appended to @out -
 * @stmt itself when it is a prim or nvFuser executes it whole (nv_executes_whole), else its
 * subsymbols flattened in turn.  A subsymbol taken out of its statement gets castscope's origin
 * and grad_sum marks of the statement, but no BACKWARD tag: Thunder's flatten copies the
 * subsymbols as the grad transform made them, and only top-level bound symbols carry the tag
 * (thunder/transforms/autodiff.py tags the joint's statements; the op-executor pass tags the
 * subsymbols only of statements no executor claims, and nvFuser claims every composite it can
 * fuse whole).  nvFuserExecutor.cse keys on the tag (BoundSymbolRHS.backward), so a backward
 * prim of the joint's top level and an equal one from a backward composite's decomposition
 * stay apart, as in Thunder. */
static void
nv_flatten (CsTrace *trace, CsStmt *stmt, CsStmtVec *out)
{
  if (stmt->kind != CS_STMT_CALL || stmt->n_subs == 0
      || cs_op_has_tag (stmt->op, CS_OP_TAG_PRIM) || nv_executes_whole (stmt))
    {
      _cs_stmt_vec_push (out, stmt);
      return;
    }
  for (guint i = 0; i < stmt->n_subs; i++)
    {
      CsStmt *sub = stmt->subs[i];
      if ((sub->origin == 0 && stmt->origin != 0) || (stmt->grad_sum && !sub->grad_sum)
          || sub->backward)
        {
          /* the subsymbol may be shared with the input trace: edit a private copy */
          sub = cs_trace_own_stmt (trace, sub);
          if (sub->origin == 0)
            sub->origin = stmt->origin;
          sub->grad_sum |= stmt->grad_sum;
          sub->backward = 0;
        }
      nv_flatten (trace, sub, out);
    }
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
    nv_flatten (trace, g->members.v[i], &flat);
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

void
_cs_fuse_group_consecutive (CsTrace *trace, const CsPolicy *policy, GPtrArray *items, GPtrArray *out,
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

/* ------------------------------------------------------------------------------------------ */
/* torchcompile_xentropy (issue 18)                                                            */

/* "TorchCompile<n>" in @arena. */
static const char *
torchcompile_name (CsArena *arena, guint n)
{
  return cs_arena_printf (arena, "TorchCompile%u", n);
}

/* Emits one run of statements the xentropy executor can fuse: a TorchCompile region when a
 * member is one of its required ops (torch_compile.py fusion_pass), else the members as they
 * are.  The members are kept whole (the executor runs ltorch.log_softmax as one op), not
 * flattened to prims. */
static void
emit_xentropy_group (CsTrace *trace, Group *g, GPtrArray *out, guint *counter)
{
  gboolean required = FALSE;
  CsStmt *region;

  for (guint i = 0; i < g->comments.len; i++)
    g_ptr_array_add (out, g->comments.v[i]);
  for (guint i = 0; i < g->members.len && !required; i++)
    required = cs_executor_xentropy_required (g->members.v[i]);
  if (!required)
    {
      for (guint i = 0; i < g->members.len; i++)
        g_ptr_array_add (out, g->members.v[i]);
      return;
    }
  region = cs_stmt_new_call_static (trace, cs_op_get (CS_OP_FUSION),
                                    torchcompile_name (trace->arena, (*counter)++), NULL, NULL, 0);
  region->type_comment = CS_TYPECOMMENT_NONE;
  region->backward = g->backward;
  region->origin = g->members.v[0]->origin;
  region->why = g->why;
  cs_stmt_set_subs (trace, region, g->members.v, g->members.len);
  g_ptr_array_add (out, region);
}

void
_cs_fuse_group_xentropy (CsTrace *trace, GPtrArray *items, GPtrArray *out, guint *counter)
{
  Group *run = NULL;
  g_autoptr(GPtrArray) pending = NULL;
  CsStmt *prev = NULL;   /* the last statement before items[i] that is not a comment */
  gboolean plain = TRUE;

  /* without a required op no run becomes a region, and without a comment inside a run (one
   * after a statement it can fuse; the run would move it ahead of its members) every
   * statement stays where it is */
  for (guint i = 0; i < items->len && plain; i++)
    {
      CsStmt *s = items->pdata[i];
      if (is_comment_like (s))
        plain = prev == NULL || !cs_executor_xentropy_can_fuse (prev);
      else
        {
          plain = !cs_executor_xentropy_required (s);
          prev = s;
        }
    }
  if (plain)
    {
      g_ptr_array_extend (out, items, NULL, NULL);
      return;
    }
  pending = g_ptr_array_new ();

#define CLOSE_XRUN(reason) \
  G_STMT_START { \
    if (run != NULL) \
      { \
        run->why = (reason); \
        emit_xentropy_group (trace, run, out, counter); \
        group_free (run); \
        run = NULL; \
      } \
  } G_STMT_END

  for (guint i = 0; i < items->len; i++)
    {
      CsStmt *s = items->pdata[i];

      if (is_comment_like (s))
        {
          g_ptr_array_add (pending, s);
          continue;
        }
      if (cs_executor_xentropy_can_fuse (s))
        {
          if (run != NULL && !!run->backward != !!s->backward)
            CLOSE_XRUN (run->backward ? "end of backward" : "end of forward");
          if (run == NULL)
            {
              for (guint j = 0; j < pending->len; j++)
                g_ptr_array_add (out, pending->pdata[j]);
              run = group_new (TRUE, s->backward);
            }
          else
            for (guint j = 0; j < pending->len; j++)
              _cs_stmt_vec_push (&run->comments, pending->pdata[j]);
          g_ptr_array_set_size (pending, 0);
          _cs_stmt_vec_push (&run->members, s);
          continue;
        }
      CLOSE_XRUN (_cs_arena_concat (trace->arena, "next statement ",
                                    s->callee ? s->callee : "(a statement)",
                                    " is not supported by torchcompile_xentropy"));
      for (guint j = 0; j < pending->len; j++)
        g_ptr_array_add (out, pending->pdata[j]);
      g_ptr_array_set_size (pending, 0);
      g_ptr_array_add (out, s);
    }
  CLOSE_XRUN ("end of trace");
  for (guint j = 0; j < pending->len; j++)
    g_ptr_array_add (out, pending->pdata[j]);
#undef CLOSE_XRUN
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
  gboolean  *fusible;    /* per node: _cs_fuse_why_not_fusible() == NULL */
  guint     *parent;     /* union-find */
  guint     *gmax;       /* per root: largest member index */
  guint     *next;       /* members of a group as a list: next member, or G_MAXUINT */
  guint     *last;       /* per root: last member of its list (the root is the first) */
  guint     *visit;      /* DFS stamp per node */
  guint      stamp;      /* current DFS: visit[s] == stamp: seen */
} Dag;

/* TRUE when merging the groups of @a and @b (a's group has an edge into b's group) would
 * create a cycle: some path leaves the union and comes back. */
static gboolean
merge_makes_cycle (Dag *d, guint ra, guint rb)
{
  g_autoptr(GArray) stack = g_array_new (FALSE, FALSE, sizeof (guint));
  guint limit = MAX (d->gmax[ra], d->gmax[rb]);
  guint roots[2] = { ra, rb };

  d->stamp++;
  /* start from every successor of a member of either group that is outside both (edges go
   * forward in trace order, so nothing past @limit leads back into the union) */
  for (guint q = 0; q < 2; q++)
    for (guint i = roots[q]; i != G_MAXUINT; i = d->next[i])
      for (guint k = 0; k < d->succ[i]->len; k++)
        {
          guint s = g_array_index (d->succ[i], guint, k);
          guint rs = uf_find (d->parent, s);
          if (rs == ra || rs == rb || s > limit || d->visit[s] == d->stamp)
            continue;
          d->visit[s] = d->stamp;
          g_array_append_val (stack, s);
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
  d->next[d->last[r]] = o;
  d->last[r] = d->last[o];
}

/* Which ready heap root @r goes to: 0 not fusible, 1 fusible forward, 2 fusible backward. */
static guint
ready_kind (const Dag *d, guint r)
{
  if (!d->fusible[r])
    return 0;
  return d->stmts[r]->backward ? 2 : 1;
}

/* A binary min-heap of statement indices in a GArray of guint. */
static void
heap_push (GArray *h, guint x)
{
  guint i = h->len;

  g_array_append_val (h, x);
  while (i > 0 && g_array_index (h, guint, (i - 1) / 2) > x)
    {
      g_array_index (h, guint, i) = g_array_index (h, guint, (i - 1) / 2);
      i = (i - 1) / 2;
    }
  g_array_index (h, guint, i) = x;
}

static guint
heap_pop (GArray *h)
{
  guint top = g_array_index (h, guint, 0), x, i = 0, n;

  x = g_array_index (h, guint, h->len - 1);
  g_array_set_size (h, h->len - 1);
  n = h->len;
  if (n == 0)
    return top;
  for (;;)
    {
      guint c = 2 * i + 1;
      if (c >= n)
        break;
      if (c + 1 < n && g_array_index (h, guint, c + 1) < g_array_index (h, guint, c))
        c++;
      if (g_array_index (h, guint, c) >= x)
        break;
      g_array_index (h, guint, i) = g_array_index (h, guint, c);
      i = c;
    }
  g_array_index (h, guint, i) = x;
  return top;
}

static gint
cmp_guint (gconstpointer a, gconstpointer b)
{
  guint x = *(const guint *) a, y = *(const guint *) b;
  return x < y ? -1 : x > y;
}

void
_cs_fuse_group_dataflow (CsTrace *trace, const CsPolicy *policy, GPtrArray *items, GPtrArray *out,
               guint *counter)
{
  Dag d = { 0 };
  g_autoptr(GHashTable) producer = g_hash_table_new (g_direct_hash, g_direct_equal);
  g_autoptr(GPtrArray) tmp = g_ptr_array_new ();
  g_autoptr(GPtrArray) nodes = g_ptr_array_new ();
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
  d.next = g_new (guint, d.n);
  d.last = g_new (guint, d.n);
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
      d.next[i] = G_MAXUINT;
      d.last[i] = i;
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
    g_autoptr(GPtrArray) groups = g_ptr_array_new ();
    GArray *ready[3];
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

    /* ready roots (no edges left from other groups), by kind: not fusible, fusible forward,
     * fusible backward; a root enters its heap once, when it becomes ready */
    for (guint q = 0; q < 3; q++)
      ready[q] = g_array_new (FALSE, FALSE, sizeof (guint));
    for (guint r = 0; r < d.n; r++)
      if (uf_find (d.parent, r) == r && indeg[r] == 0)
        heap_push (ready[ready_kind (&d, r)], r);

    for (;;)
      {
        guint best = G_MAXUINT, bq = 0;
        /* the ready root with the smallest first member (roots are their smallest index) */
        for (guint q = 0; q < 3; q++)
          if (ready[q]->len > 0 && g_array_index (ready[q], guint, 0) < best)
            {
              best = g_array_index (ready[q], guint, 0);
              bq = q;
            }
        if (best == G_MAXUINT)
          break;
        heap_pop (ready[bq]);
        /* a fusible group takes every other ready fusible group of its side (independent:
         * both ready) */
        if (d.fusible[best])
          while (ready[bq]->len > 0)
            {
              guint r = heap_pop (ready[bq]);
              GArray *mb = g_hash_table_lookup (root_members, GUINT_TO_POINTER (best));
              GArray *mr = g_hash_table_lookup (root_members, GUINT_TO_POINTER (r));
              g_array_append_vals (mb, mr->data, mr->len);
              d.parent[r] = best;
            }
        {
          GArray *m = g_hash_table_lookup (root_members, GUINT_TO_POINTER (best));
          Group *g = group_new (d.fusible[best], d.stmts[best]->backward);
          /* members in trace order */
          guint *idx = (guint *) m->data;
          g_array_sort (m, cmp_guint);
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
                  if (rs != best && indeg[rs] > 0 && --indeg[rs] == 0)
                    heap_push (ready[ready_kind (&d, rs)], rs);
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
    for (guint q = 0; q < 3; q++)
      g_array_unref (ready[q]);
    g_free (indeg);
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
  g_free (d.next);
  g_free (d.last);
}
