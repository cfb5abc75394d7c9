/* cs-stats.c: counts and roofline estimates (see cs-stats.h). */
#include "cs-config.h"

#include "cs-stats.h"
#include "cs-executors.h"
#include "cs-ir-util.h"
#include "cs-ops.h"
#include "cs-ops-args.h"
#include "cs-dist.h"

#include <string.h>

static void
flatten_const (const CsStmt *s, GPtrArray *out, guint depth)
{
  if (s->kind != CS_STMT_CALL || s->n_subs == 0 || (s->op && (s->op->tags & CS_OP_TAG_PRIM))
      || depth > 64)
    {
      g_ptr_array_add (out, (gpointer) s);
      return;
    }
  for (guint i = 0; i < s->n_subs; i++)
    flatten_const (s->subs[i], out, depth + 1);
}

static double
proxy_numel (const CsProxy *p)
{
  double n = 1;
  if (p->kind != CS_PROXY_TENSOR || !p->typed)
    return 0;
  for (guint i = 0; i < p->rank; i++)
    {
      if (p->shape[i] < 0)
        return 0;
      n *= (double) p->shape[i];
    }
  return n;
}

static double
proxy_bytes (const CsProxy *p)
{
  return proxy_numel (p) * (double) cs_dtype_size_bytes (p->dtype);
}

static gboolean
is_matmul (const CsStmt *s)
{
  const CsOp *sem;
  if (s->kind != CS_STMT_CALL || s->op == NULL)
    return FALSE;
  sem = cs_op_semantic (s->op);
  return sem->id == CS_OP_PRIM_MATMUL || sem->id == CS_OP_LTORCH_MATMUL
         || sem->id == CS_OP_PRIM_LINEAR || sem->id == CS_OP_LTORCH_LINEAR;
}

static gboolean
matmul_is_tensor_core (const CsStmt *s)
{
  CsValue *a = cs_stmt_get_arg (s, 0, NULL), *b = cs_stmt_get_arg (s, 1, NULL);
  gboolean ok = TRUE;
  if (a == NULL || b == NULL || a->kind != CS_VALUE_PROXY || b->kind != CS_VALUE_PROXY)
    return FALSE;
  for (int k = 0; k < 2; k++)
    {
      CsProxy *p = k == 0 ? a->u.proxy : b->u.proxy;
      if (p->kind == CS_PROXY_TENSOR && p->typed)
        {
          if (p->dtype != CS_DTYPE_BF16 && p->dtype != CS_DTYPE_F16)
            return FALSE;
        }
      else
        ok = FALSE;
    }
  if (!ok)
    {
      /* An operand without a type (older backward traces unpack saved tensors without type
       * comments): prims.matmul/linear require equal operand dtypes and return that dtype
       * (reference 2.4), so the typed output tells the operands' dtype. */
      CsProxy *out = cs_stmt_get_output (s);
      return out != NULL && out->kind == CS_PROXY_TENSOR && out->typed
             && (out->dtype == CS_DTYPE_BF16 || out->dtype == CS_DTYPE_F16);
    }
  return ok;
}

/* The FLOPs of a scaled-dot-product attention call, as torch.utils.flop_counter counts
 * them (sdpa_flop_count, sdpa_backward_flop_count): query [..., L, E], key [..., S, E],
 * value [..., S, Ev] with the leading dims B; the forward is the two batched matmuls
 * 2*B*L*S*E + 2*B*L*S*Ev, the backward (a call with a grad_out argument) the five of the
 * recomputed scores and the gradients, 2*B*L*S*(3E + 2Ev).  A causal mask does not halve the
 * count (neither does PyTorch's).  Returns -1 when an operand is not a ranked tensor of known
 * shape. */
static double
attention_flops (const CsStmt *stmt, const CsOp *sem)
{
  CsValue *v[3] = { cs_stmt_arg (stmt, CS_ARG_QUERY), cs_stmt_arg (stmt, CS_ARG_KEY),
                    cs_stmt_arg (stmt, CS_ARG_VALUE) };
  const CsProxy *q, *k, *val;
  double b, l, s, e, ev;
  gboolean backward = cs_op_find_arg (sem, CS_ARG_GRAD_OUT, NULL) != NULL
                      || cs_op_find_arg (sem, CS_ARG_GRAD_OUT_, NULL) != NULL;

  for (int i = 0; i < 3; i++)
    if (v[i] == NULL || v[i]->kind != CS_VALUE_PROXY || v[i]->u.proxy->kind != CS_PROXY_TENSOR
        || v[i]->u.proxy->rank < 2)
      return -1;
  q = v[0]->u.proxy;
  k = v[1]->u.proxy;
  val = v[2]->u.proxy;
  l = (double) q->shape[q->rank - 2];
  e = (double) q->shape[q->rank - 1];
  s = (double) k->shape[k->rank - 2];
  ev = (double) val->shape[val->rank - 1];
  if (l <= 0 || e <= 0 || s <= 0 || ev <= 0)
    return -1;
  b = proxy_numel (q) / (l * e);
  return backward ? 2.0 * b * l * s * (3.0 * e + 2.0 * ev) : 2.0 * b * l * s * (e + ev);
}

/**
 * cs_stats_stmt_flops:
 * @stmt: a statement
 *
 * matmul: 2 * numel(out) * K with K = the last dim of the first operand; linear the same
 * (plus numel(out) for a bias); scaled-dot-product attention (every op of the attention
 * category, forward and backward): its batched matmuls as torch.utils.flop_counter counts them
 * (2*B*L*S*(E + Ev) forward, 2*B*L*S*(3E + 2Ev) backward, no causal halving); every other
 * call: numel of its largest tensor input or output (one operation per element); bookkeeping,
 * shape ops and casts-free calls of no tensor: 0.
 * Returns: FLOP count
 */
double
cs_stats_stmt_flops (const CsStmt *stmt)
{
  const CsOp *sem;
  g_autoptr(GPtrArray) ps = NULL;
  double best = 0;

  g_return_val_if_fail (stmt != NULL, 0);
  if (stmt->kind != CS_STMT_CALL || stmt->op == NULL)
    return 0;
  sem = cs_op_semantic (stmt->op);
  if (sem->category == CS_OP_CAT_BOOKKEEPING || sem->category == CS_OP_CAT_SHAPE
      || cs_op_is_fusion (stmt->op))
    return 0;
  if (is_matmul (stmt))
    {
      CsValue *a = cs_stmt_get_arg (stmt, 0, NULL);
      CsValue *bias = cs_op_find_arg (sem, CS_ARG_BIAS, NULL) ? cs_stmt_arg (stmt, CS_ARG_BIAS) : NULL;
      CsProxy *o = cs_stmt_get_output (stmt);
      double k;
      if (a == NULL || a->kind != CS_VALUE_PROXY || o == NULL || a->u.proxy->rank == 0)
        return 0;
      k = (double) a->u.proxy->shape[a->u.proxy->rank - 1];
      if (k < 0)
        return 0;
      return 2.0 * proxy_numel (o) * k
             + ((bias && bias->kind == CS_VALUE_PROXY) ? proxy_numel (o) : 0);
    }
  if (sem->category == CS_OP_CAT_ATTENTION)
    {
      double f = attention_flops (stmt, sem);
      if (f >= 0)
        return f;
    }
  ps = g_ptr_array_new ();
  _cs_stmt_reads (stmt, ps);
  _cs_stmt_writes (stmt, ps);
  for (guint i = 0; i < ps->len; i++)
    best = MAX (best, proxy_numel (ps->pdata[i]));
  return best;
}

/* Accumulates the prims of one top-level statement (or region) into @e; returns the compute
 * time in seconds. */
static double
add_prims (CsStatsEntry *e, GPtrArray *flat)
{
  double secs = 0;

  for (guint i = 0; i < flat->len; i++)
    {
      const CsStmt *p = flat->pdata[i];
      CsProxy *in;
      CsDtype to;
      double f = cs_stats_stmt_flops (p);

      if (_cs_stmt_is_cast (p, &in, &to) && in->kind == CS_PROXY_TENSOR)
        {
          e->n_casts++;
          if (cs_dtype_is_float (in->dtype) && cs_dtype_is_float (to))
            {
              if (cs_dtype_size_bytes (to) > cs_dtype_size_bytes (in->dtype))
                e->n_upcasts++;
              else if (cs_dtype_size_bytes (to) < cs_dtype_size_bytes (in->dtype))
                e->n_downcasts++;
            }
        }
      if (is_matmul (p))
        {
          gboolean tc = matmul_is_tensor_core (p);
          e->n_matmuls++;
          if (tc)
            e->n_tensor_core_matmuls++;
          secs += f / (tc ? CS_STATS_TC_FLOPS_PER_S : CS_STATS_F32_FLOPS_PER_S);
        }
      else if (p->kind == CS_STMT_CALL && p->op != NULL
               && cs_op_semantic (p->op)->category == CS_OP_CAT_ATTENTION)
        {
          /* a fused attention runs its matmuls on tensor cores for bf16/f16 operands */
          CsValue *q = cs_stmt_arg (p, CS_ARG_QUERY);
          gboolean tc = q != NULL && q->kind == CS_VALUE_PROXY
                        && (q->u.proxy->dtype == CS_DTYPE_BF16 || q->u.proxy->dtype == CS_DTYPE_F16);
          e->n_attention++;
          secs += f / (tc ? CS_STATS_TC_FLOPS_PER_S : CS_STATS_F32_FLOPS_PER_S);
        }
      else
        secs += f / CS_STATS_F32_FLOPS_PER_S;
      e->flops += f;
    }
  return secs;
}

static gboolean
all_shape_ops (GPtrArray *flat)
{
  for (guint i = 0; i < flat->len; i++)
    {
      const CsStmt *p = flat->pdata[i];
      if (p->kind != CS_STMT_CALL || p->op == NULL
          || !(cs_op_semantic (p->op)->tags & CS_OP_TAG_SHAPE_OP))
        return FALSE;
    }
  return flat->len > 0;
}

static double
sum_bytes (GPtrArray *proxies)
{
  g_autoptr(GHashTable) seen = g_hash_table_new (g_direct_hash, g_direct_equal);
  double b = 0;
  for (guint i = 0; i < proxies->len; i++)
    if (g_hash_table_add (seen, proxies->pdata[i]))
      b += proxy_bytes (proxies->pdata[i]);
  return b;
}

static double
roofline_ms (double compute_s, double bytes)
{
  return MAX (compute_s, bytes / CS_STATS_HBM_BYTES_PER_S) * 1e3;
}

/**
 * cs_stats_compute: (see cs-stats.h)
 */
CsTraceStats *
cs_stats_compute (const CsTrace *trace)
{
  return cs_stats_compute_full (trace, NULL);
}

/* Adds @s, a collective, to @st's comms. */
static void
add_comm (CsTraceStats *st, const CsStmt *s)
{
  CsStatsComm c = { 0 };
  CsProxy *out = cs_stmt_get_output (s);
  const CsValue *a = cs_op_find_arg (cs_op_semantic (s->op), CS_ARG_DO_ASYNC, NULL)
                     ? cs_stmt_arg (s, CS_ARG_DO_ASYNC) : NULL;

  if (!cs_dist_comm_cost (s, st->group_size, st->bus_bytes_per_s, &c.cost))
    return;
  c.name = out ? out->name : "";
  c.callee = s->callee;
  c.kind = cs_op_semantic (s->op)->id == CS_OP_DIST_SYNCHRONIZE ? "all_gather"
           : cs_op_semantic (s->op)->short_name;
  c.line = s->line;
  c.backward = s->backward;
  c.async = a != NULL && ((a->kind == CS_VALUE_BOOL && a->u.b) || (a->kind == CS_VALUE_INT && a->u.i));
  g_array_append_val (st->comms, c);
  st->comm_payload_bytes += c.cost.payload_bytes;
  st->comm_bus_bytes += c.cost.bus_bytes;
  st->comm_est_ms += c.cost.est_ms;
}

/** cs_stats_compute_full: see cs-stats.h. */
CsTraceStats *
cs_stats_compute_full (const CsTrace *trace, const CsStatsOptions *opts)
{
  CsTraceStats *st;
  gboolean any_dist = FALSE;

  g_return_val_if_fail (trace != NULL, NULL);

  st = g_new0 (CsTraceStats, 1);
  st->regions = g_array_new (FALSE, TRUE, sizeof (CsStatsEntry));
  st->comms = g_array_new (FALSE, TRUE, sizeof (CsStatsComm));
  st->bus_bytes_per_s = (opts && opts->bus_bytes_per_s > 0) ? opts->bus_bytes_per_s
                                                             : CS_DIST_NVLINK_BUS_BYTES_PER_S;
  for (guint i = 0; i < trace->n_stmts && !any_dist; i++)
    any_dist = trace->stmts[i]->kind == CS_STMT_CALL && cs_dist_is_distributed (trace->stmts[i]->op);
  st->group_size = (opts && opts->group_size > 0) ? opts->group_size
                   : any_dist ? cs_dist_group_size (trace, NULL) : 1;
  for (guint i = 0; i < trace->n_stmts; i++)
    {
      const CsStmt *s = trace->stmts[i];
      g_autoptr(GPtrArray) flat = NULL;
      g_autoptr(GPtrArray) rd = NULL;
      g_autoptr(GPtrArray) wr = NULL;
      CsStatsEntry e = { 0 };
      double secs;

      if (s->kind != CS_STMT_CALL)
        continue;
      if (_cs_stmt_is_region (s) || s->op == NULL
          || cs_op_semantic (s->op)->category != CS_OP_CAT_BOOKKEEPING)
        st->by_executor[cs_executor_of_stmt (s)]++;
      if (any_dist && cs_dist_is_distributed (s->op) && !cs_dist_is_bucketing (s->op))
        {
          /* collectives are communication; wait, synchronize and the stash are not work */
          if (cs_dist_stmt_communicates (s))
            add_comm (st, s);
          st->total.n_statements++;
          continue;
        }
      flat = g_ptr_array_new ();
      rd = g_ptr_array_new ();
      wr = g_ptr_array_new ();
      _cs_stmt_reads (s, rd);
      _cs_stmt_writes (s, wr);
      if (_cs_stmt_is_region (s))
        {
          /* an output that is one of the region's inputs (`[t32, t10] = nvFusion1(t32)`:
           * remove_redundant_casts folded a cast round trip back onto the input) is handed
           * back as it is: no bytes written for it */
          for (guint j = wr->len; j-- > 0;)
            for (guint k = 0; k < rd->len; k++)
              if (wr->pdata[j] == rd->pdata[k])
                {
                  g_ptr_array_remove_index (wr, j);
                  break;
                }
          for (guint j = 0; j < s->n_subs; j++)
            flatten_const (s->subs[j], flat, 0);
          e.name = s->callee;
          e.why = s->why;
          e.backward = s->backward;
          e.n_statements = flat->len;
        }
      else
        flatten_const (s, flat, 0);
      secs = add_prims (&e, flat);
      if (!(all_shape_ops (flat) && !_cs_stmt_is_region (s)))
        {
          e.bytes_read = sum_bytes (rd);
          e.bytes_written = sum_bytes (wr);
        }
      e.est_ms = roofline_ms (secs, e.bytes_read + e.bytes_written);
      if (_cs_stmt_is_region (s))
        {
          g_array_append_val (st->regions, e);
          st->total.n_regions++;
        }
      st->total.n_statements++;
      st->total.n_casts += e.n_casts;
      st->total.n_upcasts += e.n_upcasts;
      st->total.n_downcasts += e.n_downcasts;
      st->total.n_matmuls += e.n_matmuls;
      st->total.n_tensor_core_matmuls += e.n_tensor_core_matmuls;
      st->total.n_attention += e.n_attention;
      st->total.flops += e.flops;
      st->total.bytes_read += e.bytes_read;
      st->total.bytes_written += e.bytes_written;
      st->total.est_ms += e.est_ms;
    }
  return st;
}

void
cs_trace_stats_free (CsTraceStats *stats)
{
  if (stats == NULL)
    return;
  g_array_unref (stats->regions);
  g_array_unref (stats->comms);
  g_free (stats);
}
