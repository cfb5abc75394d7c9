/* cs-dist.c: reading the distributed prims' arguments, Thunder's sort_waits and its DDP
 * gradient bucketing (see cs-dist.h). */
#include "cs-config.h"

#include "cs-dist.h"
#include "cs-decompose.h"
#include "cs-ir-util.h"
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
      WaitHeapItem *a = &g_array_index (h, WaitHeapItem, i);
      WaitHeapItem *b = &g_array_index (h, WaitHeapItem, p);
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
      WaitHeapItem *v = (WaitHeapItem *) (gpointer) h->data;
      WaitHeapItem tmp;
      if (l < h->len && heap_less (&v[l], &v[m]))
        m = l;
      if (r < h->len && heap_less (&v[r], &v[m]))
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
      _cs_stmt_reads (s, ps);
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
      _cs_stmt_writes (s, ps);
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

/* ---- gradient bucketing ------------------------------------------------------------------ */

/* One gradient bucket (thunder/distributed/bucketing.py Bucket). */
typedef struct
{
  GPtrArray   *grads;     /* CsProxy*: the pre-averaged gradients (Bucket.orig_tensors) */
  GPtrArray   *waits;     /* CsProxy*: the output of each gradient's own wait, replaced */
  CsProxy    **views;     /* update_bucket_view outputs, NULL until told */
  guint        n_told;    /* entries of views set; == grads->len: packed */
  const char  *name;      /* Bucket.bucket_name (name_bucket) */
  CsProxy     *future;    /* the bucket's all_reduce, once packed */
  const CsStmt *like;     /* one replaced all_reduce: its op and group */
} GradBucket;

static const CsStmt *
producer_of (GHashTable *prod, const CsProxy *p)
{
  return p ? g_hash_table_lookup (prod, p) : NULL;
}

static gboolean
is_op (const CsStmt *s, CsOpId id)
{
  return s != NULL && s->kind == CS_STMT_CALL && cs_op_semantic (s->op)->id == id;
}

static CsProxy *
first_proxy_arg (const CsStmt *s)
{
  const CsValue *v = s->n_args > 0 ? s->args[0].value : NULL;
  return (v && v->kind == CS_VALUE_PROXY) ? v->u.proxy : NULL;
}

/* Thunder's get_bsym_of_allreduce_of_grad / get_bsym_of_wait: from a gradient up the first
 * arguments of its producers to the first statement of op @id, or NULL. */
static const CsStmt *
walk_up_to (GHashTable *prod, CsProxy *g, CsOpId id)
{
  const CsStmt *s = producer_of (prod, g);

  for (guint guard = 0; s != NULL && guard < 64; guard++)
    {
      if (is_op (s, id))
        return s;
      s = producer_of (prod, first_proxy_arg (s));
    }
  return NULL;
}

/* Thunder's name_bucket: "-".join(f"{t.name}_{t.dtype}_{t.device}_{t.shape}") */
static const char *
bucket_name (CsTrace *t, GPtrArray *grads)
{
  g_autoptr(GString) s = g_string_new (NULL);

  for (guint i = 0; i < grads->len; i++)
    {
      const CsProxy *p = grads->pdata[i];
      g_string_append_printf (s, "%s%s_thunder.dtypes.%s_", i ? "-" : "", p->name,
                              cs_dtype_long_name (p->dtype));
      if (p->device.type == CS_DEVICE_CUDA)
        g_string_append_printf (s, "thunder.devices.Device(type='cuda', index=%d)",
                                p->device.index);
      else
        g_string_append_printf (s, "thunder.devices.Device(type='%s')",
                                p->device.type == CS_DEVICE_CPU ? "cpu" : "meta");
      g_string_append (s, "_(");
      for (guint d = 0; d < p->rank; d++)
        g_string_append_printf (s, "%s%" G_GINT64_FORMAT, d ? ", " : "", p->shape[d]);
      g_string_append (s, p->rank == 1 ? ",)" : ")");
    }
  return cs_arena_strdup (t->arena, s->str);
}

static CsStmt *
bucket_stmt (CsTrace *t, CsOpId id, CsValue *out, CsArg *args, guint n)
{
  CsStmt *s = cs_stmt_new_call_static (t, cs_op_get (id), NULL, out, args, n);

  s->backward = 1;
  s->why = "gradient bucketing: thunder/distributed/transforms/ddp.py "
           "optimize_allreduce_in_ddp_backward, bucketing.py GradBuckets";
  return s;
}

static CsProxy *
fresh_like (CsTrace *t, guint32 free_from, CsDtype dtype, const int64_t *shape, guint rank,
            const CsDevice *dev)
{
  CsProxy *p = _cs_decompose_fresh_proxy (t, free_from);

  cs_proxy_set_tensor (t, p, dtype, shape, rank, dev);
  return p;
}

/* pack(views, name) and all_reduce(buffer, SUM, group, do_async=True, skip_clone=True): Thunder's
 * GradBuckets._maybe_allreduce */
static void
bucket_allreduce (CsTrace *t, guint32 free_from, GradBucket *b, GPtrArray *out)
{
  CsArena *a = t->arena;
  g_autofree CsValue **items = g_new (CsValue *, b->grads->len);
  const CsProxy *g0 = b->grads->pdata[0];
  int64_t total = 0;
  CsProxy *buf;
  CsArg pargs[2], rargs[5];

  for (guint i = 0; i < b->grads->len; i++)
    {
      items[i] = cs_value_new_proxy (a, b->views[i]);
      total += (int64_t) numel (b->grads->pdata[i]);
    }
  buf = fresh_like (t, free_from, g0->dtype, &total, 1, &g0->device);
  pargs[0] = (CsArg) { NULL, cs_value_new_seq (a, CS_VALUE_LIST, items, b->grads->len) };
  pargs[1] = (CsArg) { NULL, cs_value_new_string (a, b->name) };
  g_ptr_array_add (out, bucket_stmt (t, CS_OP_DIST_PACK, cs_value_new_proxy (a, buf), pargs, 2));
  b->future = fresh_like (t, free_from, g0->dtype, &total, 1, &g0->device);
  b->future->future = 1;
  rargs[0] = (CsArg) { NULL, cs_value_new_proxy (a, buf) };
  rargs[1] = (CsArg) { NULL, cs_stmt_arg (b->like, CS_ARG_OP) };
  rargs[2] = (CsArg) { "group", cs_stmt_arg (b->like, CS_ARG_GROUP) };
  rargs[3] = (CsArg) { "do_async", cs_value_new_bool (a, TRUE) };
  rargs[4] = (CsArg) { "skip_clone", cs_value_new_bool (a, TRUE) };
  g_ptr_array_add (out, bucket_stmt (t, CS_OP_DIST_ALL_REDUCE, cs_value_new_proxy (a, b->future),
                                     rargs, 5));
}

/** cs_dist_bucket_grad_allreduce: see cs-dist.h. */
CsTrace *
cs_dist_bucket_grad_allreduce (const CsTrace *trace, double bucket_cap_mb, const char *pass)
{
  g_autoptr(CsTrace) t = NULL;
  g_autoptr(GHashTable) prod = g_hash_table_new (g_direct_hash, g_direct_equal);
  g_autoptr(GHashTable) drop = g_hash_table_new (g_direct_hash, g_direct_equal);
  g_autoptr(GHashTable) grad_bucket = g_hash_table_new (g_direct_hash, g_direct_equal);
  g_autoptr(GHashTable) pending = g_hash_table_new (g_direct_hash, g_direct_equal);
  g_autoptr(GPtrArray) leaves = g_ptr_array_new ();
  g_autoptr(GPtrArray) pre = g_ptr_array_new ();      /* pre-averaged gradients, output order */
  g_autoptr(GPtrArray) pre_wait = g_ptr_array_new (); /* and each one's wait output */
  g_autoptr(GPtrArray) pre_ar = g_ptr_array_new ();   /* and its all_reduce */
  g_autoptr(GPtrArray) out = g_ptr_array_new ();
  g_autoptr(GPtrArray) deferred = g_ptr_array_new ();
  g_autoptr(GPtrArray) ps = g_ptr_array_new ();
  g_autoptr(GArray) buckets = g_array_new (FALSE, TRUE, sizeof (GradBucket));
  /* bucket numbers (1-based) in the order of their all_reduces */
  g_autoptr(GArray) order = g_array_new (FALSE, FALSE, sizeof (guint));
  g_autoptr(CsProxyMap) swap = _cs_proxy_map_new ();
  CsStmt *ret;
  const CsValue *gv;
  guint32 free_from;
  double cap_bytes = bucket_cap_mb * 1024.0 * 1024.0;

  g_return_val_if_fail (trace != NULL, NULL);
  t = cs_trace_derive_shared (trace, pass);
  ret = cs_trace_get_return (t);
  if (ret == NULL || ret->value == NULL)
    return g_steal_pointer (&t);
  for (guint i = 0; i < t->n_stmts; i++)
    {
      g_ptr_array_set_size (ps, 0);
      _cs_stmt_writes (t->stmts[i], ps);
      for (guint j = 0; j < ps->len; j++)
        g_hash_table_insert (prod, ps->pdata[j], t->stmts[i]);
    }
  /* the gradients: a joint trace's 'output', a backward trace's return value */
  gv = ret->value;
  if (gv->kind == CS_VALUE_DICT)
    {
      const CsValue *o = NULL;
      for (guint i = 0; i + 1 < gv->u.seq.n && o == NULL; i += 2)
        if (gv->u.seq.items[i]->kind == CS_VALUE_STRING
            && strcmp (gv->u.seq.items[i]->u.s, "output") == 0)
          o = gv->u.seq.items[i + 1];
      gv = o;
    }
  if (gv != NULL)
    cs_value_collect_proxies (gv, leaves);
  for (guint i = 0; i < leaves->len; i++)
    {
      CsProxy *g = leaves->pdata[i];
      const CsStmt *ar, *w, *div;
      CsProxy *p;

      if (g->kind != CS_PROXY_TENSOR)
        continue;
      ar = walk_up_to (prod, g, CS_OP_DIST_ALL_REDUCE);
      w = walk_up_to (prod, g, CS_OP_DIST_WAIT);
      if (ar == NULL || w == NULL || g_hash_table_contains (drop, ar)
          || producer_of (prod, first_proxy_arg (w)) != ar)
        continue;
      p = first_proxy_arg (ar);
      div = producer_of (prod, p);
      /* BatchAllReduceVisitor: a pre-averaged gradient comes from a division */
      if (p == NULL || !p->typed
          || !(is_op (div, CS_OP_PRIM_DIV) || is_op (div, CS_OP_LTORCH_TRUE_DIVIDE)))
        continue;
      g_ptr_array_add (pre, p);
      g_ptr_array_add (pre_wait, cs_stmt_get_output (w));
      g_ptr_array_add (pre_ar, (gpointer) ar);
      g_hash_table_add (drop, (gpointer) ar);
      g_hash_table_add (drop, (gpointer) w);
    }
  if (pre->len == 0)
    return g_steal_pointer (&t);

  if (bucket_cap_mb <= 0)
    {
      /* make_allreduce_of_vanilla_ddp_inplace: each all_reduce with skip_clone=True */
      for (guint i = 0; i < t->n_stmts; i++)
        if (g_hash_table_contains (drop, t->stmts[i]) && is_op (t->stmts[i], CS_OP_DIST_ALL_REDUCE))
          {
            CsStmt *s = cs_trace_own_stmt (t, t->stmts[i]);
            CsArg *args = CS_ARENA_NEW_N (t->arena, CsArg, s->n_args + 1);
            guint n = 0;
            for (guint k = 0; k < s->n_args; k++)
              if (g_strcmp0 (s->args[k].name, "skip_clone") != 0
                  && !(s->args[k].name == NULL && k == 4))
                args[n++] = s->args[k];
            args[n++] = (CsArg) { "skip_clone", cs_value_new_bool (t->arena, TRUE) };
            cs_stmt_set_args (t, s, args, n);
            t->stmts[i] = s;
          }
      return g_steal_pointer (&t);
    }

  /* GradBuckets.build: per (dtype, device) in order of first appearance, gradients in output
   * order, a bucket closed once it holds >= bucket_cap bytes */
  {
    g_autoptr(GPtrArray) done = g_ptr_array_new ();
    for (guint i = 0; i < pre->len; i++)
      {
        const CsProxy *k = pre->pdata[i];
        double nbytes = 0;
        GradBucket cur = { 0 };
        gboolean seen = FALSE;

        for (guint j = 0; j < done->len && !seen; j++)
          {
            const CsProxy *d = done->pdata[j];
            seen = d->dtype == k->dtype && cs_device_equal (&d->device, &k->device);
          }
        if (seen)
          continue;
        g_ptr_array_add (done, (gpointer) k);
        for (guint j = i; j < pre->len; j++)
          {
            CsProxy *g = pre->pdata[j];
            if (g->dtype != k->dtype || !cs_device_equal (&g->device, &k->device))
              continue;
            if (cur.grads == NULL)
              {
                cur.grads = g_ptr_array_new ();
                cur.waits = g_ptr_array_new ();
                cur.like = pre_ar->pdata[j];
              }
            g_ptr_array_add (cur.grads, g);
            g_ptr_array_add (cur.waits, pre_wait->pdata[j]);
            nbytes += numel (g) * (double) cs_dtype_size_bytes (g->dtype);
            if (nbytes >= cap_bytes)
              {
                g_array_append_val (buckets, cur);
                memset (&cur, 0, sizeof cur);
                nbytes = 0;
              }
          }
        if (cur.grads != NULL)
          g_array_append_val (buckets, cur);
      }
  }
  for (guint b = 0; b < buckets->len; b++)
    {
      GradBucket *bk = &g_array_index (buckets, GradBucket, b);
      bk->views = CS_ARENA_NEW_N (t->arena, CsProxy *, bk->grads->len);
      bk->name = bucket_name (t, bk->grads);
      for (guint i = 0; i < bk->grads->len; i++)
        g_hash_table_insert (grad_bucket, bk->grads->pdata[i], GUINT_TO_POINTER (b + 1));
    }

  /* BatchAllReduceVisitor over the statements */
  free_from = _cs_decompose_names_free_from (t);
  for (guint i = 0; i < t->n_stmts; i++)
    {
      CsStmt *s = t->stmts[i];
      gboolean defer = FALSE;

      if (g_hash_table_contains (drop, s))
        {
          if (is_op (s, CS_OP_DIST_WAIT))
            g_hash_table_add (pending, cs_stmt_get_output (s));
          continue;
        }
      if (s == ret)
        continue;
      /* a statement reading a replaced wait's output (grad-reduce's convert back) waits for
       * the unpack */
      g_ptr_array_set_size (ps, 0);
      _cs_stmt_reads (s, ps);
      for (guint j = 0; j < ps->len && !defer; j++)
        defer = g_hash_table_contains (pending, ps->pdata[j]);
      if (defer || s->kind == CS_STMT_DEL)
        {
          if (defer)
            {
              g_ptr_array_set_size (ps, 0);
              _cs_stmt_writes (s, ps);
              for (guint j = 0; j < ps->len; j++)
                g_hash_table_add (pending, ps->pdata[j]);
            }
          g_ptr_array_add (defer ? deferred : out, s);
          continue;
        }
      g_ptr_array_add (out, s);
      g_ptr_array_set_size (ps, 0);
      _cs_stmt_writes (s, ps);
      for (guint j = 0; j < ps->len; j++)
        {
          guint b = GPOINTER_TO_UINT (g_hash_table_lookup (grad_bucket, ps->pdata[j]));
          GradBucket *bk;
          CsProxy *g = ps->pdata[j], *v;
          CsArg args[3];
          guint idx = 0;

          if (b == 0)
            continue;
          bk = &g_array_index (buckets, GradBucket, b - 1);
          while (bk->grads->pdata[idx] != g)
            idx++;
          /* Bucket.tell: update_bucket_view(grad, index, bucket_name) */
          v = fresh_like (t, free_from, g->dtype, g->shape, g->rank, &g->device);
          args[0] = (CsArg) { NULL, cs_value_new_proxy (t->arena, g) };
          args[1] = (CsArg) { NULL, cs_value_new_int (t->arena, idx) };
          args[2] = (CsArg) { NULL, cs_value_new_string (t->arena, bk->name) };
          g_ptr_array_add (out, bucket_stmt (t, CS_OP_DIST_UPDATE_BUCKET_VIEW,
                                             cs_value_new_proxy (t->arena, v), args, 3));
          bk->views[idx] = v;
          if (++bk->n_told == bk->grads->len)
            {
              bucket_allreduce (t, free_from, bk, out);
              g_array_append_val (order, b);
            }
        }
    }
  /* retrieve_allreduced_grads: every bucket's wait and unpack, in the order of its all_reduce */
  for (guint k = 0; k < order->len; k++)
    {
      GradBucket *bk = &g_array_index (buckets, GradBucket, g_array_index (order, guint, k) - 1);
      const CsProxy *f = bk->future;
      CsProxy *wb = fresh_like (t, free_from, f->dtype, f->shape, f->rank, &f->device);
      g_autofree CsValue **outs = g_new (CsValue *, bk->grads->len);
      g_autofree CsValue **orig = g_new (CsValue *, bk->grads->len);
      CsArg wargs[1], uargs[3];

      wargs[0] = (CsArg) { NULL, cs_value_new_proxy (t->arena, bk->future) };
      g_ptr_array_add (out, bucket_stmt (t, CS_OP_DIST_WAIT, cs_value_new_proxy (t->arena, wb),
                                         wargs, 1));
      for (guint i = 0; i < bk->grads->len; i++)
        {
          CsProxy *g = bk->grads->pdata[i];
          CsProxy *u = fresh_like (t, free_from, g->dtype, g->shape, g->rank, &g->device);
          outs[i] = cs_value_new_proxy (t->arena, u);
          orig[i] = cs_value_new_proxy (t->arena, g);
          _cs_proxy_map_insert (swap, bk->waits->pdata[i], u);
        }
      uargs[0] = (CsArg) { NULL, cs_value_new_proxy (t->arena, wb) };
      uargs[1] = (CsArg) { NULL, cs_value_new_seq (t->arena, CS_VALUE_LIST, orig, bk->grads->len) };
      uargs[2] = (CsArg) { NULL, cs_value_new_string (t->arena, bk->name) };
      g_ptr_array_add (out, bucket_stmt (t, CS_OP_DIST_UNPACK,
                                         cs_value_new_seq (t->arena, CS_VALUE_LIST, outs, bk->grads->len),
                                         uargs, 3));
    }
  for (guint i = 0; i < deferred->len; i++)
    g_ptr_array_add (out, _cs_stmt_remap_reads (t, deferred->pdata[i], swap));
  g_ptr_array_add (out, _cs_stmt_remap_reads (t, ret, swap));
  for (guint b = 0; b < buckets->len; b++)
    {
      g_ptr_array_unref (g_array_index (buckets, GradBucket, b).grads);
      g_ptr_array_unref (g_array_index (buckets, GradBucket, b).waits);
    }
  cs_trace_set_stmts (t, (CsStmt **) out->pdata, out->len);
  return g_steal_pointer (&t);
}
