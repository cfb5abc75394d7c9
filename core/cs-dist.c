/* cs-dist.c: reading the distributed prims' arguments (see cs-dist.h). */
#include "cs-config.h"

#include "cs-dist.h"
#include "cs-ops-args.h"

#include <string.h>

/** cs_dist_is_distributed: see cs-dist.h. */
gboolean
cs_dist_is_distributed (const CsOp *op)
{
  return op != NULL && cs_op_semantic (op)->category == CS_OP_CAT_DISTRIBUTED;
}

/** cs_dist_is_collective: see cs-dist.h. */
gboolean
cs_dist_is_collective (const CsOp *op)
{
  CsOpId id;

  if (op == NULL)
    return FALSE;
  id = cs_op_semantic (op)->id;
  return id == CS_OP_DIST_ALL_GATHER || id == CS_OP_DIST_ALL_REDUCE || id == CS_OP_DIST_BROADCAST
         || id == CS_OP_DIST_REDUCE_SCATTER;
}

/** cs_dist_stmt_communicates: see cs-dist.h. */
gboolean
cs_dist_stmt_communicates (const CsStmt *stmt)
{
  CsDistParallelType pt;

  if (stmt == NULL || stmt->kind != CS_STMT_CALL)
    return FALSE;
  if (cs_dist_is_collective (stmt->op))
    return TRUE;
  return cs_op_semantic (stmt->op)->id == CS_OP_DIST_SYNCHRONIZE
         && cs_dist_parallel_type (cs_stmt_arg (stmt, CS_ARG_DISTPARALLEL_TYPE), &pt)
         && pt == CS_DIST_PARALLEL_FULLY_SHARDED;
}

/** cs_dist_is_bucketing: see cs-dist.h. */
gboolean
cs_dist_is_bucketing (const CsOp *op)
{
  CsOpId id;

  if (op == NULL)
    return FALSE;
  id = cs_op_semantic (op)->id;
  return id == CS_OP_DIST_PACK || id == CS_OP_DIST_UNPACK || id == CS_OP_DIST_UPDATE_BUCKET_VIEW
         || id == CS_OP_DIST_PACK_FOR_FSDP || id == CS_OP_DIST_UNPACK_FOR_FSDP;
}

/** cs_dist_enum_member: see cs-dist.h. */
const char *
cs_dist_enum_member (const CsValue *v, const char *enum_class)
{
  const char *text, *p;
  gsize cl;

  if (v == NULL || enum_class == NULL)
    return NULL;
  if (v->kind == CS_VALUE_STRING)
    return g_intern_string (v->u.s);
  if (v->kind != CS_VALUE_NAME || v->u.s == NULL)
    return NULL;
  text = v->u.s;
  cl = strlen (enum_class);
  /* `_DistributedReduceOps_SUM_2` (thunder/core/trace.py _make_name of an Enum member) or a
   * dotted `...DistributedReduceOps.SUM` */
  p = strstr (text, enum_class);
  if (p == NULL || (p != text && p[-1] != '_' && p[-1] != '.'))
    return NULL;
  p += cl;
  if (*p != '_' && *p != '.')
    return NULL;
  p++;
  {
    /* the member runs to the counter suffix `_<digits>` (members hold '_': FULLY_SHARDED) */
    const char *e = p + strlen (p), *q = e;
    g_autofree char *m = NULL;

    while (q > p && q[-1] >= '0' && q[-1] <= '9')
      q--;
    if (q < e && q > p && q[-1] == '_')
      e = q - 1;
    if (e == p)
      return NULL;
    m = g_strndup (p, (gsize) (e - p));
    return g_intern_string (m);
  }
}

static gboolean
member_index (const CsValue *v, const char *cls, const char * const *names, guint n, guint *out)
{
  const char *m = cs_dist_enum_member (v, cls);

  if (m == NULL)
    return FALSE;
  for (guint i = 0; i < n; i++)
    if (g_ascii_strcasecmp (m, names[i]) == 0)
      {
        *out = i;
        return TRUE;
      }
  return FALSE;
}

static const char * const reduce_names[] = { "SUM", "AVG", "PRODUCT", "MIN", "MAX", "BAND", "BOR",
                                             "BXOR" };

/** cs_dist_reduce_op: see cs-dist.h. */
gboolean
cs_dist_reduce_op (const CsValue *v, CsDistReduceOp *out)
{
  guint i;

  if (!member_index (v, "DistributedReduceOps", reduce_names, G_N_ELEMENTS (reduce_names), &i))
    return FALSE;
  *out = (CsDistReduceOp) i;
  return TRUE;
}

/** cs_dist_reduce_op_name: see cs-dist.h. */
const char *
cs_dist_reduce_op_name (CsDistReduceOp op)
{
  static const char * const lower[] = { "sum", "avg", "product", "min", "max", "band", "bor", "bxor" };

  return (guint) op < G_N_ELEMENTS (lower) ? lower[op] : "?";
}

/** cs_dist_parallel_type: see cs-dist.h. */
gboolean
cs_dist_parallel_type (const CsValue *v, CsDistParallelType *out)
{
  static const char * const names[] = { "NONE", "REPLICATED", "FULLY_SHARDED", "COLUMN_WISE",
                                        "ROW_WISE" };
  guint i;

  if (!member_index (v, "DistParallelType", names, G_N_ELEMENTS (names), &i))
    return FALSE;
  *out = (CsDistParallelType) i;
  return TRUE;
}

/** cs_dist_tp_layer_type: see cs-dist.h. */
gboolean
cs_dist_tp_layer_type (const CsValue *v, CsDistTpLayerType *out)
{
  static const char * const names[] = { "COLUMN_PARALLEL_LINEAR", "ROW_PARALLEL_LINEAR",
                                        "COLUMN_PARALLEL_EMBED", "ROW_PARALLEL_EMBED" };
  guint i;

  if (!member_index (v, "TensorParallelLayerType", names, G_N_ELEMENTS (names), &i))
    return FALSE;
  *out = (CsDistTpLayerType) i;
  return TRUE;
}

static const CsProxy *
typed_tensor (const CsValue *v)
{
  if (v == NULL || v->kind != CS_VALUE_PROXY || v->u.proxy->kind != CS_PROXY_TENSOR
      || !v->u.proxy->typed)
    return NULL;
  return v->u.proxy;
}

/* big / small when it is a whole number >= 1, else 0 */
static guint
ratio (int64_t big, int64_t small)
{
  if (big <= 0 || small <= 0 || big % small != 0 || big / small > G_MAXUINT32)
    return 0;
  return (guint) (big / small);
}

static guint
dim_ratio (const CsProxy *num, const CsProxy *den, int64_t dim)
{
  if (num->rank == 0 || num->rank != den->rank)
    return 0;
  if (dim < 0)
    dim += num->rank;
  if (dim < 0 || dim >= (int64_t) num->rank)
    return 0;
  return ratio (num->shape[dim], den->shape[dim]);
}

static int64_t
dim_arg (const CsStmt *s)
{
  const CsValue *d = cs_stmt_arg (s, CS_ARG_DIM);
  return (d && d->kind == CS_VALUE_INT) ? d->u.i : 0;
}

/** cs_dist_stmt_group_size: see cs-dist.h. */
guint
cs_dist_stmt_group_size (const CsStmt *stmt)
{
  const CsOp *sem;
  const CsProxy *in, *out;

  if (stmt == NULL || stmt->kind != CS_STMT_CALL || !cs_dist_is_distributed (stmt->op))
    return 0;
  sem = cs_op_semantic (stmt->op);
  if (sem->id == CS_OP_DIST_PACK_FOR_FSDP || sem->id == CS_OP_DIST_UNPACK_FOR_FSDP)
    {
      const CsValue *w = cs_stmt_arg (stmt, CS_ARG_WORLD_SIZE);
      return (w && w->kind == CS_VALUE_INT && w->u.i >= 1 && w->u.i <= G_MAXUINT32) ? (guint) w->u.i : 0;
    }
  in = typed_tensor (cs_stmt_get_arg (stmt, 0, NULL));
  out = cs_stmt_get_output (stmt);
  if (in == NULL || out == NULL || out->kind != CS_PROXY_TENSOR || !out->typed)
    return 0;
  switch (sem->id)
    {
    case CS_OP_DIST_ALL_GATHER:
      return dim_ratio (out, in, dim_arg (stmt));
    case CS_OP_DIST_REDUCE_SCATTER:
      return dim_ratio (in, out, dim_arg (stmt));
    case CS_OP_DIST_SYNCHRONIZE:
      {
        CsDistParallelType pt;
        if (!cs_dist_parallel_type (cs_stmt_arg (stmt, CS_ARG_DISTPARALLEL_TYPE), &pt)
            || pt != CS_DIST_PARALLEL_FULLY_SHARDED)
          return 0;
        return dim_ratio (out, in, 0);
      }
    case CS_OP_DIST_SYNCHRONIZE_TENSOR_PARALLEL_OUTPUT:
      return in->rank ? dim_ratio (out, in, -1) : 0;
    case CS_OP_DIST_SYNCHRONIZE_TENSOR_PARALLEL_INPUT:
      return in->rank ? dim_ratio (in, out, -1) : 0;
    default:
      return 0;
    }
}

static gboolean
same_group (const CsStmt *s, const CsValue *group)
{
  const CsValue *g;

  if (group == NULL)
    return TRUE;
  if (cs_op_find_arg (cs_op_semantic (s->op), CS_ARG_GROUP, NULL) == NULL)
    return TRUE;   /* pack_for_fsdp: no group argument, its world_size is the default group's */
  g = cs_stmt_arg (s, CS_ARG_GROUP);
  return g != NULL && g->kind == group->kind && g->kind == CS_VALUE_NAME
         && g_strcmp0 (g->u.s, group->u.s) == 0;
}

/** cs_dist_group_size: see cs-dist.h. */
guint
cs_dist_group_size (const CsTrace *trace, const CsValue *group)
{
  g_return_val_if_fail (trace != NULL, 1);
  for (guint i = 0; i < trace->n_stmts; i++)
    {
      const CsStmt *s = trace->stmts[i];
      guint n;

      if (s->kind != CS_STMT_CALL || !cs_dist_is_distributed (s->op) || !same_group (s, group))
        continue;
      n = cs_dist_stmt_group_size (s);
      if (n > 0)
        return n;
    }
  return 1;
}

static double
numel (const CsProxy *p)
{
  double n = 1;

  for (guint i = 0; i < p->rank; i++)
    {
      if (p->shape[i] < 0)
        return -1;
      n *= (double) p->shape[i];
    }
  return n;
}

/** cs_dist_comm_cost: see cs-dist.h. */
gboolean
cs_dist_comm_cost (const CsStmt *stmt, guint group_size, double bus_bytes_per_s,
                   CsDistCommCost *out)
{
  const CsOp *sem;
  const CsProxy *in, *o;
  double n_in, n_out, factor, nn;

  g_return_val_if_fail (out != NULL, FALSE);
  memset (out, 0, sizeof *out);
  if (!cs_dist_stmt_communicates (stmt))
    return FALSE;
  sem = cs_op_semantic (stmt->op);
  in = typed_tensor (cs_stmt_get_arg (stmt, 0, NULL));
  o = cs_stmt_get_output (stmt);
  if (in == NULL || (n_in = numel (in)) < 0)
    return FALSE;
  n_out = (o && o->kind == CS_PROXY_TENSOR && o->typed) ? numel (o) : n_in;
  if (n_out < 0)
    n_out = n_in;
  out->group_size = MAX (group_size, 1);
  nn = out->group_size;
  out->dtype = in->dtype;
  out->payload_bytes = MAX (n_in, n_out) * (double) cs_dtype_size_bytes (in->dtype);
  out->reduce_op = CS_DIST_REDUCE_SUM;
  if (cs_op_find_arg (sem, CS_ARG_OP, NULL) != NULL)
    out->has_reduce_op = cs_dist_reduce_op (cs_stmt_arg (stmt, CS_ARG_OP), &out->reduce_op);
  switch (sem->id)
    {
    case CS_OP_DIST_ALL_REDUCE:
      factor = 2.0 * (nn - 1) / nn;
      break;
    case CS_OP_DIST_BROADCAST:
      factor = nn > 1 ? 1.0 : 0.0;
      break;
    default:  /* all_gather, reduce_scatter */
      factor = (nn - 1) / nn;
      break;
    }
  out->bus_bytes = out->payload_bytes * factor;
  out->est_ms = bus_bytes_per_s > 0 ? out->bus_bytes / bus_bytes_per_s * 1e3 : 0;
  return TRUE;
}

/* ---- sort_waits ------------------------------------------------------------------------- */

typedef struct
{
  int64_t key;   /* Thunder's selector key: smaller first */
  guint   seq;   /* order of becoming eligible (Python's min keeps the first of equal keys) */
  guint   node;  /* index of the node */
} WaitHeapItem;

static gboolean
heap_less (const WaitHeapItem *a, const WaitHeapItem *b)
{
  return a->key < b->key || (a->key == b->key && a->seq < b->seq);
}

static void
heap_push (GArray *h, WaitHeapItem it)
{
  guint i;

  g_array_append_val (h, it);
  i = h->len - 1;
  while (i > 0)
    {
      guint p = (i - 1) / 2;
      WaitHeapItem *a = &g_array_index (h, WaitHeapItem, i), *b = &g_array_index (h, WaitHeapItem, p);
      WaitHeapItem tmp;
      if (!heap_less (a, b))
        break;
      tmp = *a, *a = *b, *b = tmp;
      i = p;
    }
}

static WaitHeapItem
heap_pop (GArray *h)
{
  WaitHeapItem top = g_array_index (h, WaitHeapItem, 0);
  guint i = 0;

  g_array_index (h, WaitHeapItem, 0) = g_array_index (h, WaitHeapItem, h->len - 1);
  g_array_set_size (h, h->len - 1);
  for (;;)
    {
      guint l = 2 * i + 1, r = l + 1, m = i;
      WaitHeapItem tmp;
      if (l < h->len && heap_less (&g_array_index (h, WaitHeapItem, l), &g_array_index (h, WaitHeapItem, m)))
        m = l;
      if (r < h->len && heap_less (&g_array_index (h, WaitHeapItem, r), &g_array_index (h, WaitHeapItem, m)))
        m = r;
      if (m == i)
        break;
      tmp = g_array_index (h, WaitHeapItem, i);
      g_array_index (h, WaitHeapItem, i) = g_array_index (h, WaitHeapItem, m);
      g_array_index (h, WaitHeapItem, m) = tmp;
      i = m;
    }
  return top;
}

/** cs_dist_trace_has_wait: see cs-dist.h. */
gboolean
cs_dist_trace_has_wait (const CsTrace *trace)
{
  g_return_val_if_fail (trace != NULL, FALSE);
  for (guint i = 0; i < trace->n_stmts; i++)
    if (trace->stmts[i]->kind == CS_STMT_CALL
        && cs_op_semantic (trace->stmts[i]->op)->id == CS_OP_DIST_WAIT)
      return TRUE;
  return FALSE;
}

static gboolean
is_comment (const CsStmt *s)
{
  return s->kind == CS_STMT_COMMENT || s->kind == CS_STMT_BLANK;
}

/* Thunder's selector prefer_comm_over_other_over_wait (thunder/distributed/utils.py
 * sort_waits): the smallest key goes first: a collective by minus its input's element count
 * (the larger first), any other statement by its index @i in the trace, a wait after all of
 * them (@n), the return last (@n + 1). */
static int64_t
sort_key (const CsStmt *s, guint i, guint n)
{
  if (s->kind == CS_STMT_RETURN)
    return (int64_t) n + 1;
  if (s->kind != CS_STMT_CALL)
    return (int64_t) i;
  if (cs_op_semantic (s->op)->id == CS_OP_DIST_WAIT)
    return (int64_t) n;
  if (cs_dist_is_collective (s->op))
    {
      const CsProxy *a = typed_tensor (cs_stmt_get_arg (s, 0, NULL));
      double ne = a ? numel (a) : -1;
      return ne > 0 ? -(int64_t) ne : 0;
    }
  return (int64_t) i;
}

/** cs_dist_sort_waits: see cs-dist.h. */
CsTrace *
cs_dist_sort_waits (const CsTrace *trace, const char *pass)
{
  g_autoptr(CsTrace) t = NULL;
  g_autoptr(GHashTable) prod = NULL;
  g_autoptr(GPtrArray) ps = g_ptr_array_new ();
  g_autoptr(GArray) heap = g_array_new (FALSE, FALSE, sizeof (WaitHeapItem));
  g_autofree guint *first = NULL, *at = NULL, *n_parents = NULL;
  g_autofree CsStmt **order = NULL;
  GPtrArray **children = NULL;
  guint n, lead = 0, n_nodes = 0, n_out = 0, seq = 0;

  g_return_val_if_fail (trace != NULL, NULL);
  t = cs_trace_derive_shared (trace, pass);
  n = t->n_stmts;
  if (!cs_dist_trace_has_wait (t))
    return g_steal_pointer (&t);
  for (guint i = 0; i < n; i++)
    if (t->stmts[i]->kind == CS_STMT_DEL)
      return g_steal_pointer (&t);   /* as Thunder's sort_waits: not with del statements */

  /* nodes: each non-comment statement (at stmt[k]) with the comments in front of it (from
   * first[k]); the leading comments (the input annotations) stay first, the trailing ones last */
  while (lead < n && is_comment (t->stmts[lead]))
    lead++;
  first = g_new0 (guint, n);
  at = g_new0 (guint, n);
  for (guint i = lead, start = lead; i < n; i++)
    {
      if (is_comment (t->stmts[i]))
        continue;
      first[n_nodes] = start;
      at[n_nodes++] = i;
      start = i + 1;
    }
  if (n_nodes == 0)
    return g_steal_pointer (&t);

  /* dataflow edges through proxies */
  prod = g_hash_table_new (g_direct_hash, g_direct_equal);
  n_parents = g_new0 (guint, n_nodes);
  children = g_new0 (GPtrArray *, n_nodes);
  for (guint k = 0; k < n_nodes; k++)
    {
      CsStmt *s = t->stmts[at[k]];
      g_autoptr(GHashTable) seen = g_hash_table_new (g_direct_hash, g_direct_equal);

      children[k] = g_ptr_array_new ();
      g_ptr_array_set_size (ps, 0);
      cs_stmt_collect_inputs (s, ps);
      for (guint j = 0; j < ps->len; j++)
        {
          gpointer v = g_hash_table_lookup (prod, ps->pdata[j]);
          guint pk;
          if (v == NULL)
            continue;   /* an input of the trace */
          pk = GPOINTER_TO_UINT (v) - 1;
          if (g_hash_table_contains (seen, GUINT_TO_POINTER (pk + 1)))
            continue;
          g_hash_table_add (seen, GUINT_TO_POINTER (pk + 1));
          g_ptr_array_add (children[pk], GUINT_TO_POINTER (k));
          n_parents[k]++;
        }
      g_ptr_array_set_size (ps, 0);
      cs_stmt_collect_outputs (s, ps);
      for (guint j = 0; j < ps->len; j++)
        g_hash_table_insert (prod, ps->pdata[j], GUINT_TO_POINTER (k + 1));
    }

  for (guint k = 0; k < n_nodes; k++)
    if (n_parents[k] == 0)
      heap_push (heap, (WaitHeapItem) { sort_key (t->stmts[at[k]], at[k], n), seq++, k });
  order = g_new (CsStmt *, n);
  for (guint i = 0; i < lead; i++)
    order[n_out++] = t->stmts[i];
  while (heap->len > 0)
    {
      WaitHeapItem it = heap_pop (heap);
      GPtrArray *ch = children[it.node];

      for (guint i = first[it.node]; i <= at[it.node]; i++)
        order[n_out++] = t->stmts[i];
      for (guint j = 0; j < ch->len; j++)
        {
          guint c = GPOINTER_TO_UINT (ch->pdata[j]);
          if (--n_parents[c] == 0)
            heap_push (heap, (WaitHeapItem) { sort_key (t->stmts[at[c]], at[c], n), seq++, c });
        }
    }
  for (guint i = at[n_nodes - 1] + 1; i < n; i++)
    order[n_out++] = t->stmts[i];
  for (guint k = 0; k < n_nodes; k++)
    g_ptr_array_unref (children[k]);
  g_free (children);
  g_assert (n_out == n);
  cs_trace_set_stmts (t, order, n);
  return g_steal_pointer (&t);
}
