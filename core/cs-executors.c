/* cs-executors.c: the executors that claim ops before fusion (see cs-executors.h).
 *
 * Source: thunder/executors/sdpaex.py (checker, meta functions, grad transform),
 * thunder/executors/utils.py (_fused_sdp_choice, the input checks), thunder/executors/
 * torch_compile.py (torchcompile_xentropy: required_ops, supported_ops, cuda_device_checker),
 * thunder/extend/__init__.py (can_fuse).
 */
#include "cs-config.h"

#include "cs-executors.h"

#include "cs-decompose.h"
#include "cs-ops.h"
#include "cs-ops-args.h"

#include <math.h>
#include <string.h>

/* ------------------------------------------------------------------------------------------ */
/* sdpa                                                                                        */

static const CsProxy *
tensor_arg (const CsStmt *s, CsArgName name)
{
  const CsValue *v = cs_stmt_arg (s, name);

  if (v == NULL || v->kind != CS_VALUE_PROXY)
    return NULL;
  return v->u.proxy;
}

static gboolean
is_none_arg (const CsValue *v)
{
  return v == NULL || v->kind == CS_VALUE_NONE;
}

static gboolean
literal_number (const CsValue *v, double *out)
{
  if (v == NULL)
    return FALSE;
  switch (v->kind)
    {
    case CS_VALUE_INT: *out = (double) v->u.i; return TRUE;
    case CS_VALUE_FLOAT: *out = v->u.f; return TRUE;
    case CS_VALUE_BOOL: *out = v->u.b ? 1 : 0; return TRUE;
    default: return FALSE;
    }
}

/* A typed 4-D tensor on a CUDA device (the checker refuses CPU tensors; the input checks ask
 * for 4 dimensions). */
static gboolean
cuda_4d (const CsProxy *p)
{
  return p != NULL && p->kind == CS_PROXY_TENSOR && p->typed && p->rank == 4
         && p->device.type == CS_DEVICE_CUDA;
}

static gboolean
is_half (CsDtype d)
{
  return d == CS_DTYPE_BF16 || d == CS_DTYPE_F16;
}

CsSdpaBackend
cs_executor_sdpa_backend (const CsStmt *stmt, const CsPolicy *policy)
{
  const CsProxy *q, *k, *v, *m = NULL;
  const CsValue *mv, *dv, *cv, *sv;
  double dropout, causal, scale;
  CsPolicy def;

  g_return_val_if_fail (stmt != NULL, CS_SDPA_NONE);
  if (policy == NULL)
    {
      cs_policy_init_default (&def);
      policy = &def;
    }
  if (!cs_policy_has_executor (policy, CS_EXECUTOR_SDPA) || stmt->kind != CS_STMT_CALL
      || stmt->op == NULL
      || cs_op_semantic (stmt->op)->id != CS_OP_LTORCH_SCALED_DOT_PRODUCT_ATTENTION)
    return CS_SDPA_NONE;
  q = tensor_arg (stmt, CS_ARG_QUERY);
  k = tensor_arg (stmt, CS_ARG_KEY);
  v = tensor_arg (stmt, CS_ARG_VALUE);
  mv = cs_stmt_arg (stmt, CS_ARG_ATTN_MASK);
  dv = cs_stmt_arg (stmt, CS_ARG_DROPOUT_P);
  cv = cs_stmt_arg (stmt, CS_ARG_IS_CAUSAL);
  sv = cs_stmt_arg (stmt, CS_ARG_SCALE);
  if (!cuda_4d (q) || !cuda_4d (k) || !cuda_4d (v))
    return CS_SDPA_NONE;
  if (!is_none_arg (mv))
    {
      if (mv->kind != CS_VALUE_PROXY || !cuda_4d (mv->u.proxy))
        return CS_SDPA_NONE;
      m = mv->u.proxy;
    }
  dropout = 0;
  causal = 0;
  if ((dv != NULL && !literal_number (dv, &dropout)) || (cv != NULL && !literal_number (cv, &causal))
      || (!is_none_arg (sv) && !literal_number (sv, &scale)))
    return CS_SDPA_NONE;
  /* one batch size (aten's efficient attention does not broadcast it) and head count */
  if (k->shape[0] != q->shape[0] || v->shape[0] != q->shape[0]
      || (m != NULL && m->shape[0] != q->shape[0])
      || k->shape[1] != q->shape[1] || v->shape[1] != q->shape[1]
      || k->shape[2] != v->shape[2] || q->shape[2] <= 0 || k->shape[2] <= 0)
    return CS_SDPA_NONE;
  /* flash attention (can_use_flash_attention) */
  if (m == NULL && is_half (q->dtype) && k->dtype == q->dtype && v->dtype == q->dtype
      && q->shape[3] == k->shape[3] && q->shape[3] == v->shape[3] && q->shape[3] <= 256
      && q->shape[3] > 0 && !(causal != 0 && q->shape[2] != k->shape[2]))
    return CS_SDPA_FLASH;
  /* memory-efficient attention (can_use_efficient_attention) */
  if ((is_half (q->dtype) || q->dtype == CS_DTYPE_F32) && k->dtype == q->dtype
      && v->dtype == q->dtype && q->shape[3] == k->shape[3] && q->shape[3] > 0 && v->shape[3] > 0)
    {
      int64_t align = is_half (q->dtype) ? 8 : 4;
      if (q->shape[3] % align == 0 && v->shape[3] % align == 0)
        return CS_SDPA_MEM_EFFICIENT;
    }
  return CS_SDPA_NONE;
}

static CsProxy *
new_tensor (CsTrace *t, guint32 free_from, CsDtype dtype, const int64_t *shape, guint rank,
            const CsDevice *dev)
{
  CsProxy *p = _cs_decompose_fresh_proxy (t, free_from);

  cs_proxy_set_tensor (t, p, dtype, shape, rank, dev);
  return p;
}

static CsValue *
copy_or (CsTrace *t, const CsValue *v, CsValue *dflt)
{
  return v != NULL ? (CsValue *) v : dflt;
}

CsStmt *
cs_executor_sdpa_forward (CsTrace *trace, const CsStmt *sdpa, CsSdpaBackend backend,
                          guint32 names_free_from)
{
  CsArena *a;
  const CsProxy *q;
  CsProxy *primal;
  CsValue *items[9];
  CsArg args[7];
  guint n_out = 0, n_args = 0;
  int64_t lse_shape[3], cum = 0;
  CsStmt *s;
  const char *name;
  CsOpId id;
  const CsValue *orig_out;

  g_return_val_if_fail (trace != NULL && sdpa != NULL, NULL);
  g_return_val_if_fail (backend == CS_SDPA_FLASH || backend == CS_SDPA_MEM_EFFICIENT, NULL);
  a = trace->arena;
  q = tensor_arg (sdpa, CS_ARG_QUERY);
  orig_out = sdpa->out;
  g_return_val_if_fail (q != NULL && orig_out != NULL && orig_out->kind == CS_VALUE_PROXY, NULL);
  primal = orig_out->u.proxy;
  lse_shape[0] = q->shape[0];
  lse_shape[1] = q->shape[1];
  /* logsumexp_dim = ceil(L / 16) * 16 (flash), ceil(L / 32) * 32 (memory-efficient) */
  if (backend == CS_SDPA_FLASH)
    lse_shape[2] = (q->shape[2] + 15) / 16 * 16;
  else
    lse_shape[2] = (q->shape[2] + 31) / 32 * 32;
  items[n_out++] = cs_value_new_proxy (a, primal);
  items[n_out++] = cs_value_new_proxy (a, new_tensor (trace, names_free_from, CS_DTYPE_F32,
                                                      lse_shape, 3, &q->device));
  if (backend == CS_SDPA_FLASH)
    {
      cum = q->shape[0] + 1;
      items[n_out++] = cs_value_new_proxy (a, new_tensor (trace, names_free_from, CS_DTYPE_I64,
                                                          &cum, 1, &q->device));
      items[n_out++] = cs_value_new_proxy (a, new_tensor (trace, names_free_from, CS_DTYPE_I64,
                                                          &cum, 1, &q->device));
      items[n_out++] = cs_value_new_underscore (a);   /* max_q: a Python int */
      items[n_out++] = cs_value_new_underscore (a);   /* max_k */
    }
  items[n_out++] = cs_value_new_proxy (a, new_tensor (trace, names_free_from, CS_DTYPE_I64, NULL, 0,
                                                      &q->device));
  items[n_out++] = cs_value_new_proxy (a, new_tensor (trace, names_free_from, CS_DTYPE_I64, NULL, 0,
                                                      &q->device));
  if (backend == CS_SDPA_FLASH)
    items[n_out++] = cs_value_new_proxy (a, new_tensor (trace, names_free_from, CS_DTYPE_I64,
                                                        NULL, 0, &q->device));
  for (guint i = 0; i < 3; i++)
    args[n_args++] = (CsArg) { NULL, cs_stmt_arg (sdpa, i == 0 ? CS_ARG_QUERY
                                                     : i == 1 ? CS_ARG_KEY : CS_ARG_VALUE) };
  if (backend == CS_SDPA_MEM_EFFICIENT)
    args[n_args++] = (CsArg) { NULL, copy_or (trace, cs_stmt_arg (sdpa, CS_ARG_ATTN_MASK),
                                              cs_value_new_none (a)) };
  args[n_args++] = (CsArg) { NULL, copy_or (trace, cs_stmt_arg (sdpa, CS_ARG_DROPOUT_P),
                                            cs_value_new_float (a, 0.0)) };
  args[n_args++] = (CsArg) { NULL, copy_or (trace, cs_stmt_arg (sdpa, CS_ARG_IS_CAUSAL),
                                            cs_value_new_bool (a, FALSE)) };
  args[n_args++] = (CsArg) { "scale", copy_or (trace, cs_stmt_arg (sdpa, CS_ARG_SCALE),
                                               cs_value_new_none (a)) };
  if (backend == CS_SDPA_FLASH)
    {
      id = CS_OP_EX_SDPAFX_GRAD_FORWARD_SCALED_DOT_PRODUCT_EFFICIENT_ATTENTION;
      name = "sdpafx_grad_forward_scaled_dot_product_efficient_attention";
    }
  else
    {
      id = CS_OP_EX_SDPAEX_GRAD_FORWARD_SCALED_DOT_PRODUCT_EFFICIENT_ATTENTION;
      name = "sdpaex_grad_forward_scaled_dot_product_efficient_attention";
    }
  s = cs_stmt_new_call_static (trace, cs_op_get (id), name,
                               cs_value_new_seq (a, CS_VALUE_TUPLE, items, n_out), args, n_args);
  s->type_comment = CS_TYPECOMMENT_NONE;
  s->origin = sdpa->origin ? sdpa->origin : sdpa->id;
  s->line = sdpa->line;
  s->col = sdpa->col;
  s->backward = sdpa->backward;
  s->why = "claimed by the sdpa executor (thunder/executors/sdpaex.py)";
  return s;
}

/* The i-th target of @s's tuple output, or NULL. */
static CsValue *
out_item (const CsStmt *s, guint i)
{
  if (s->out == NULL || (s->out->kind != CS_VALUE_TUPLE && s->out->kind != CS_VALUE_LIST)
      || i >= s->out->u.seq.n)
    return NULL;
  return s->out->u.seq.items[i];
}

CsStmt *
cs_executor_sdpa_backward (CsTrace *trace, const CsStmt *fwd, CsProxy *g, guint32 names_free_from,
                           CsProxy **grads)
{
  CsArena *a;
  gboolean flash;
  const CsValue *qv, *kv, *vv, *mv = NULL;
  const CsProxy *q, *k, *v;
  CsValue *items[4];
  CsArg args[15];
  guint n_args = 0, n_out = 0, off;
  CsOpId id;
  const char *name;
  CsStmt *s;

  g_return_val_if_fail (trace != NULL && fwd != NULL && g != NULL && grads != NULL, NULL);
  a = trace->arena;
  for (guint i = 0; i < 4; i++)
    grads[i] = NULL;
  if (fwd->op == NULL)
    return NULL;
  if (fwd->op->id == CS_OP_EX_SDPAFX_GRAD_FORWARD_SCALED_DOT_PRODUCT_EFFICIENT_ATTENTION)
    flash = TRUE;
  else if (fwd->op->id == CS_OP_EX_SDPAEX_GRAD_FORWARD_SCALED_DOT_PRODUCT_EFFICIENT_ATTENTION)
    flash = FALSE;
  else
    return NULL;
  qv = fwd->args[0].value;
  kv = fwd->args[1].value;
  vv = fwd->args[2].value;
  if (qv->kind != CS_VALUE_PROXY || kv->kind != CS_VALUE_PROXY || vv->kind != CS_VALUE_PROXY
      || out_item (fwd, flash ? 8 : 3) == NULL)
    return NULL;
  q = qv->u.proxy;
  k = kv->u.proxy;
  v = vv->u.proxy;
  off = flash ? 3 : 4;   /* dropout_p's position */
  if (!flash)
    mv = fwd->args[3].value;
  grads[0] = new_tensor (trace, names_free_from, q->dtype, q->shape, q->rank, &q->device);
  grads[1] = new_tensor (trace, names_free_from, k->dtype, k->shape, k->rank, &k->device);
  grads[2] = new_tensor (trace, names_free_from, v->dtype, v->shape, v->rank, &v->device);
  for (guint i = 0; i < 3; i++)
    items[n_out++] = cs_value_new_proxy (a, grads[i]);
  args[n_args++] = (CsArg) { NULL, cs_value_new_proxy (a, g) };
  args[n_args++] = (CsArg) { NULL, (CsValue *) qv };
  args[n_args++] = (CsArg) { NULL, (CsValue *) kv };
  args[n_args++] = (CsArg) { NULL, (CsValue *) vv };
  if (flash)
    {
      for (guint i = 0; i < 4; i++)        /* out, logsumexp, cum_seq_q, cum_seq_k */
        args[n_args++] = (CsArg) { NULL, out_item (fwd, i) };
      args[n_args++] = (CsArg) { NULL, cs_value_new_int (a, q->shape[2]) };   /* max_q */
      args[n_args++] = (CsArg) { NULL, cs_value_new_int (a, k->shape[2]) };   /* max_k */
      args[n_args++] = (CsArg) { NULL, fwd->args[off].value };                /* dropout_p */
      args[n_args++] = (CsArg) { NULL, fwd->args[off + 1].value };            /* is_causal */
      args[n_args++] = (CsArg) { NULL, out_item (fwd, 6) };                   /* philox_seed */
      args[n_args++] = (CsArg) { NULL, out_item (fwd, 7) };                   /* philox_offset */
      id = CS_OP_EX_SDPAFX_SCALED_DOT_PRODUCT_EFFICIENT_ATTENTION_BACKWARD;
      name = "sdpafx_scaled_dot_product_efficient_attention_backward";
    }
  else
    {
      args[n_args++] = (CsArg) { NULL, (CsValue *) mv };
      for (guint i = 0; i < 4; i++)        /* out, logsumexp, philox_seed, philox_offset */
        args[n_args++] = (CsArg) { NULL, out_item (fwd, i) };
      args[n_args++] = (CsArg) { NULL, fwd->args[off].value };
      args[n_args++] = (CsArg) { NULL, fwd->args[off + 1].value };
      if (mv->kind == CS_VALUE_PROXY)
        {
          const CsProxy *m = mv->u.proxy;
          grads[3] = new_tensor (trace, names_free_from, m->dtype, m->shape, m->rank, &m->device);
          items[n_out++] = cs_value_new_proxy (a, grads[3]);
        }
      else
        items[n_out++] = cs_value_new_underscore (a);
      id = CS_OP_EX_SDPAEX_SCALED_DOT_PRODUCT_EFFICIENT_ATTENTION_BACKWARD;
      name = "sdpaex_scaled_dot_product_efficient_attention_backward";
    }
  args[n_args++] = (CsArg) { "scale", fwd->args[off + 2].value };
  s = cs_stmt_new_call_static (trace, cs_op_get (id), name,
                               cs_value_new_seq (a, CS_VALUE_TUPLE, items, n_out), args, n_args);
  s->type_comment = CS_TYPECOMMENT_NONE;
  s->why = "claimed by the sdpa executor (thunder/executors/sdpaex.py)";
  return s;
}

CsTrace *
cs_executors_claim (const CsTrace *trace, const CsPolicy *policy)
{
  CsTrace *t = NULL;
  guint32 free_from = 0;

  g_return_val_if_fail (trace != NULL, NULL);
  for (guint i = 0; i < trace->n_stmts; i++)
    {
      CsSdpaBackend be = cs_executor_sdpa_backend (trace->stmts[i], policy);

      if (be == CS_SDPA_NONE)
        continue;
      if (t == NULL)
        {
          t = cs_trace_derive_shared (trace, trace->pass);
          free_from = _cs_decompose_names_free_from (t);
        }
      t->stmts[i] = cs_executor_sdpa_forward (t, t->stmts[i], be, free_from);
    }
  return t != NULL ? t : cs_trace_ref ((CsTrace *) trace);
}

/* ------------------------------------------------------------------------------------------ */
/* torchcompile_xentropy                                                                       */

static gboolean
xentropy_supported (const CsOp *op)
{
  switch (cs_op_semantic (op)->id)
    {
    case CS_OP_PRIM_BROADCAST_IN_DIM: case CS_OP_PRIM_CONVERT_ELEMENT_TYPE:
    case CS_OP_PRIM_DIV: case CS_OP_PRIM_NE: case CS_OP_PRIM_NEG: case CS_OP_PRIM_PAD:
    case CS_OP_PRIM_RESHAPE: case CS_OP_PRIM_SLICE_PRIM: case CS_OP_PRIM_WHERE:
    case CS_OP_LTORCH_NLL_LOSS_BACKWARD: case CS_OP_LTORCH_LOG_SOFTMAX_BACKWARD:
    case CS_OP_LTORCH_LOG_SOFTMAX: case CS_OP_LTORCH_NLL_LOSS: case CS_OP_LTORCH_SUM:
    case CS_OP_LTORCH_TAKE_ALONG_DIM: case CS_OP_LTORCH_CONTIGUOUS:
      return TRUE;
    default:
      return FALSE;
    }
}

static gboolean
proxy_not_cuda (CsProxy *p, gpointer data)
{
  return p->kind == CS_PROXY_TENSOR && p->typed && p->device.type != CS_DEVICE_CUDA;
}

/* cuda_device_checker: every tensor argument on a CUDA device */
static gboolean
cuda_args (const CsStmt *s)
{
  for (guint i = 0; i < s->n_args; i++)
    if (cs_value_any_proxy (s->args[i].value, proxy_not_cuda, NULL))
      return FALSE;
  return TRUE;
}

static gboolean
xentropy_can_fuse_rec (const CsStmt *s, guint depth)
{
  if (s->kind != CS_STMT_CALL || s->op == NULL || cs_op_is_fusion (s->op) || depth > 64)
    return FALSE;
  if (xentropy_supported (s->op) && cuda_args (s))
    return TRUE;
  if (s->n_subs == 0)
    return FALSE;
  for (guint i = 0; i < s->n_subs; i++)
    if (!xentropy_can_fuse_rec (s->subs[i], depth + 1))
      return FALSE;
  return TRUE;
}

gboolean
cs_executor_xentropy_can_fuse (const CsStmt *stmt)
{
  g_return_val_if_fail (stmt != NULL, FALSE);
  return xentropy_can_fuse_rec (stmt, 0);
}

gboolean
cs_executor_xentropy_required (const CsStmt *stmt)
{
  g_return_val_if_fail (stmt != NULL, FALSE);
  if (stmt->kind != CS_STMT_CALL || stmt->op == NULL)
    return FALSE;
  switch (cs_op_semantic (stmt->op)->id)
    {
    case CS_OP_LTORCH_NLL_LOSS_BACKWARD: case CS_OP_LTORCH_LOG_SOFTMAX_BACKWARD:
    case CS_OP_LTORCH_LOG_SOFTMAX: case CS_OP_LTORCH_NLL_LOSS: case CS_OP_LTORCH_CROSS_ENTROPY:
      return TRUE;
    default:
      return FALSE;
    }
}

CsExecutor
cs_executor_of_stmt (const CsStmt *stmt)
{
  g_return_val_if_fail (stmt != NULL, CS_EXECUTOR_TORCH);
  if (stmt->kind != CS_STMT_CALL || stmt->op == NULL)
    return CS_EXECUTOR_TORCH;
  if (cs_op_is_fusion (stmt->op))
    return stmt->callee && g_str_has_prefix (stmt->callee, "TorchCompile")
           ? CS_EXECUTOR_TORCHCOMPILE_XENTROPY : CS_EXECUTOR_NVFUSER;
  switch (stmt->op->id)
    {
    case CS_OP_EX_SDPAFX_GRAD_FORWARD_SCALED_DOT_PRODUCT_EFFICIENT_ATTENTION:
    case CS_OP_EX_SDPAFX_SCALED_DOT_PRODUCT_EFFICIENT_ATTENTION_BACKWARD:
    case CS_OP_EX_SDPAEX_GRAD_FORWARD_SCALED_DOT_PRODUCT_EFFICIENT_ATTENTION:
    case CS_OP_EX_SDPAEX_SCALED_DOT_PRODUCT_EFFICIENT_ATTENTION_BACKWARD:
      return CS_EXECUTOR_SDPA;
    default:
      return CS_EXECUTOR_TORCH;
    }
}
