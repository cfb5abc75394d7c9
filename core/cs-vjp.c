/* cs-vjp.c: the grad pass's VJP rules, one per op with a rule, in a table indexed by op id,
 * and the builders of the backward statements they emit.
 *
 * Source: thunder/core/transforms.py (register_grad rules for prims, augmented_forward_impls /
 * backward_impls, restore_reduced_dims, grad_chooser_backward), thunder/torch/__init__.py
 * (_sum_grad), thunder/distributed/prims.py and thunder/executors/sdpaex.py (executor grad
 * transforms); reference/thunder-traces.md 5.1, 5.2.
 *
 * A rule reads the cotangent of its statement's output (grad_of: the accumulated put_grads, or
 * `prims.get_grad` for a forward output), emits its backward statements into the pass's list
 * (c->bw), and ends in put_grads that accumulate with `ltorch.add`.  The pass (cs-grad.c) decides
 * which statements get a rule (_cs_vjp_exists) and runs the records in reverse (_cs_vjp_run).
 */
#include "cs-config.h"

#include "cs-grad-private.h"

#include "cs-decompose.h"
#include "cs-dist.h"
#include "cs-executors.h"
#include "cs-meta.h"
#include "cs-promote.h"

#include <math.h>
#include <string.h>

/* ------------------------------------------------------------------------------------------ */
/* Small helpers                                                                               */

static gboolean
rule_fail (GradCtx *c, const CsStmt *s, const char *what)
{
  if (c->error == NULL)
    g_set_error (&c->error, CS_GRAD_ERROR, CS_GRAD_ERROR_BAD_TRACE, "%s: %s: %s",
                 _cs_grad_stmt_where (c, s), s ? s->callee : "?", what);
  return FALSE;
}

static CsValue *
v_f (GradCtx *c, double f)
{
  return cs_value_new_float (c->a, f);
}

static CsValue *
v_i (GradCtx *c, int64_t i)
{
  return cs_value_new_int (c->a, i);
}

static CsValue *
v_ints (GradCtx *c, const int64_t *v, guint n)
{
  return cs_value_new_int_seq (c->a, CS_VALUE_TUPLE, v, n);
}

static CsValue *
v_device (GradCtx *c, const CsDevice *dev)
{
  CsValue *v = CS_ARENA_NEW (c->a, CsValue);
  g_autofree char *s = cs_device_to_string (dev);

  v->kind = CS_VALUE_CALL;
  v->u.call.callee = "devices.Device";
  v->u.call.args = CS_ARENA_NEW (c->a, CsArg);
  v->u.call.args[0].value = cs_value_new_string (c->a, s);
  v->u.call.n_args = 1;
  return v;
}

static gboolean
value_number (const CsValue *v, double *out)
{
  if (v == NULL)
    return FALSE;
  switch (v->kind)
    {
    case CS_VALUE_INT: *out = (double) v->u.i; return TRUE;
    case CS_VALUE_FLOAT: *out = v->u.f; return TRUE;
    case CS_VALUE_BOOL: *out = v->u.b ? 1.0 : 0.0; return TRUE;
    default: return FALSE;
    }
}


static int64_t
canon_dim (int64_t d, guint rank)
{
  return d < 0 ? d + (int64_t) rank : d;
}

/* Reads a dims argument: an int or a sequence of ints, canonicalised and sorted; None/absent
 * means "all dims" when @none_is_all. */
static gboolean
read_dims (const CsValue *v, guint rank, gboolean none_is_all, gboolean dims[CS_MAX_DIMS])
{
  int64_t tmp[CS_MAX_DIMS];
  guint n = 0;

  memset (dims, 0, sizeof (gboolean) * CS_MAX_DIMS);
  if (v == NULL || v->kind == CS_VALUE_NONE)
    {
      if (!none_is_all)
        return FALSE;
      for (guint i = 0; i < rank; i++)
        dims[i] = TRUE;
      return TRUE;
    }
  if (v->kind == CS_VALUE_INT)
    {
      tmp[0] = v->u.i;
      n = 1;
    }
  else if (!cs_value_get_int_seq (v, tmp, CS_MAX_DIMS, &n))
    return FALSE;
  for (guint i = 0; i < n; i++)
    {
      int64_t d = canon_dim (tmp[i], rank);
      if (d < 0 || d >= (int64_t) MAX (rank, 1))
        return FALSE;
      if (rank > 0)
        dims[d] = TRUE;
    }
  return TRUE;
}

/* The kept (not reduced) dims of a reduction as a list, for broadcast_in_dim. */
static guint
kept_dims (const gboolean dims[CS_MAX_DIMS], guint rank, int64_t *out)
{
  guint n = 0;
  for (guint i = 0; i < rank; i++)
    if (!dims[i])
      out[n++] = i;
  return n;
}

/* ------------------------------------------------------------------------------------------ */
/* Type rules for the statements the VJPs emit                                                 */

typedef struct
{
  gboolean       tensor;       /* a tensor proxy */
  CsDtype        dtype;        /* tensor dtype; numbers: B8, I64 or F64 */
  guint          rank;         /* tensor: dims of shape; else 0 */
  const int64_t *shape;        /* tensor: extents (the proxy's) */
  CsDevice       device;       /* tensor: its device */
} OpInfo;

static gboolean
op_info (const CsValue *v, OpInfo *info)
{
  memset (info, 0, sizeof *info);
  if (value_is_tensor (v))
    {
      CsProxy *p = v->u.proxy;
      info->tensor = TRUE;
      info->dtype = p->dtype;
      info->rank = p->rank;
      info->shape = p->shape;
      info->device = p->device;
      return TRUE;
    }
  if (v == NULL)
    return FALSE;
  switch (v->kind)
    {
    case CS_VALUE_BOOL: info->dtype = CS_DTYPE_B8; return TRUE;
    case CS_VALUE_INT: info->dtype = CS_DTYPE_I64; return TRUE;
    case CS_VALUE_FLOAT: info->dtype = CS_DTYPE_F64; return TRUE;
    case CS_VALUE_PROXY:
      if (v->u.proxy->kind == CS_PROXY_NUMBER)
        {
          info->dtype = v->u.proxy->dtype;
          return TRUE;
        }
      return FALSE;
    default:
      return FALSE;
    }
}

static CsDtypeRef
promote_arg (const OpInfo *x)
{
  if (x->tensor)
    return cs_promote_arg_tensor (x->dtype, x->rank);
  switch (cs_dtype_kind (x->dtype))
    {
    case CS_DTYPE_KIND_BOOL: return cs_promote_arg_number (CS_PYTYPE_BOOL);
    case CS_DTYPE_KIND_INT: return cs_promote_arg_number (CS_PYTYPE_INT);
    case CS_DTYPE_KIND_COMPLEX: return cs_promote_arg_number (CS_PYTYPE_COMPLEX);
    default: return cs_promote_arg_number (CS_PYTYPE_FLOAT);
    }
}

/* Thunder's promotion dtype of two operands (a 0-d tensor and a Python number are weak). */
static gboolean
promote_pair (const OpInfo *x, const OpInfo *y, CsDtype *out, GError **error)
{
  CsDtypeRef args[2] = { promote_arg (x), promote_arg (y) };
  CsDtypeRef r;

  if (!cs_promote_dtypes (args, 2, &r, error))
    return FALSE;
  *out = r.dtype;
  return TRUE;
}

static gboolean
broadcast_shapes (const OpInfo *x, const OpInfo *y, int64_t *out, guint *rank)
{
  guint rx = x->tensor ? x->rank : 0, ry = y->tensor ? y->rank : 0;
  guint r = MAX (rx, ry);

  for (guint i = 0; i < r; i++)
    {
      int64_t dx = i < rx ? x->shape[rx - 1 - i] : 1;
      int64_t dy = i < ry ? y->shape[ry - 1 - i] : 1;
      if (dx != dy && dx != 1 && dy != 1)
        return FALSE;
      out[r - 1 - i] = dx == 1 ? dy : dx;
    }
  *rank = r;
  return TRUE;
}

/* ------------------------------------------------------------------------------------------ */
/* Emitting backward statements                                                                */

/* One backward CALL with a single new tensor output of the given type. */
static CsProxy *
emit_typed (GradCtx *c, CsOpId id, CsDtype dtype, const int64_t *shape, guint rank,
            const CsDevice *dev, CsArg *args, guint n_args)
{
  CsProxy *out = _cs_decompose_fresh_proxy (c->t, c->names_free_from);
  CsStmt *s;

  cs_proxy_set_tensor (c->t, out, dtype, shape, rank, dev);
  s = cs_stmt_new_call_static (c->t, cs_op_get (id), NULL, v_p (c, out), args, n_args);

  s->backward = 1;
  s->why = c->why;
  s->origin = c->origin;
  g_ptr_array_add (c->bw, s);
  return out;
}

#define ARGS(...) ((CsArg[]) { __VA_ARGS__ })
#define NARGS(...) (sizeof ((CsArg[]) { __VA_ARGS__ }) / sizeof (CsArg))
#define POS(v) { NULL, (v) }
#define KW(k, v) { (k), (v) }

/* Elementwise ltorch op on two operands (tensor proxies or numbers). */
static CsProxy *
ew2 (GradCtx *c, CsOpId id, CsValue *x, CsValue *y)
{
  OpInfo ix, iy;
  int64_t shape[CS_MAX_DIMS];
  guint rank = 0;
  CsDtype dt;
  const CsDevice *dev;

  if (c->error)
    return NULL;
  if (!op_info (x, &ix) || !op_info (y, &iy) || !broadcast_shapes (&ix, &iy, shape, &rank))
    {
      g_set_error (&c->error, CS_GRAD_ERROR, CS_GRAD_ERROR_BAD_TRACE,
                   "%s: operands of a backward formula do not broadcast", cs_op_get (id)->name);
      return NULL;
    }
  if (!promote_pair (&ix, &iy, &dt, &c->error))
    return NULL;
  if (id == CS_OP_LTORCH_TRUE_DIVIDE && !cs_dtype_is_inexact (dt))
    dt = CS_DTYPE_F32;
  if (id == CS_OP_LTORCH_EQ)
    dt = CS_DTYPE_B8;
  dev = ix.tensor ? &ix.device : &iy.device;
  if (id == CS_OP_LTORCH_ADD || id == CS_OP_LTORCH_SUB)
    return emit_typed (c, id, dt, shape, rank, dev,
                       ARGS (POS (x), POS (y), KW ("alpha", v_i (c, 1))), 3);
  return emit_typed (c, id, dt, shape, rank, dev, ARGS (POS (x), POS (y)), 2);
}

static CsProxy *
mul (GradCtx *c, CsValue *x, CsValue *y)
{
  return ew2 (c, CS_OP_LTORCH_MUL, x, y);
}

static CsProxy *
add (GradCtx *c, CsValue *x, CsValue *y)
{
  return ew2 (c, CS_OP_LTORCH_ADD, x, y);
}

static CsProxy *
sub (GradCtx *c, CsValue *x, CsValue *y)
{
  return ew2 (c, CS_OP_LTORCH_SUB, x, y);
}

static CsProxy *
divide (GradCtx *c, CsValue *x, CsValue *y)
{
  return ew2 (c, CS_OP_LTORCH_TRUE_DIVIDE, x, y);
}

/* Unary ltorch op with the input's type (float inputs). */
static CsProxy *
ew1 (GradCtx *c, CsOpId id, CsProxy *x)
{
  if (c->error)
    return NULL;
  return emit_typed (c, id, x->dtype, x->shape, x->rank, &x->device, ARGS (POS (v_p (c, x))), 1);
}

static CsProxy *
neg (GradCtx *c, CsProxy *x)
{
  return ew1 (c, CS_OP_LTORCH_NEG, x);
}

static CsProxy *
convert (GradCtx *c, CsProxy *x, CsDtype dtype)
{
  if (c->error)
    return NULL;
  return emit_typed (c, CS_OP_PRIM_CONVERT_ELEMENT_TYPE, dtype, x->shape, x->rank, &x->device,
                     ARGS (POS (v_p (c, x)), POS (cs_value_new_dtype (c->a, dtype, FALSE))), 2);
}

/* prims.broadcast_in_dim(x, shape, bdims) */
static CsProxy *
bcast (GradCtx *c, CsProxy *x, const int64_t *shape, guint rank, const int64_t *bdims, guint nb)
{
  if (c->error)
    return NULL;
  return emit_typed (c, CS_OP_PRIM_BROADCAST_IN_DIM, x->dtype, shape, rank, &x->device,
                     ARGS (POS (v_p (c, x)), POS (cs_value_new_int_seq (c->a, CS_VALUE_LIST,
                                                                        shape, rank)),
                           POS (cs_value_new_int_seq (c->a, CS_VALUE_LIST, bdims, nb))), 3);
}

/* Thunder's restore_reduced_dims (thunder/core/transforms.py): clang.unsqueeze of the reduced
 * dims of @x (a broadcast_in_dim to @shape with those dims 1), then clang.expand to @shape (a
 * second broadcast_in_dim over every dim, emitted even when it changes nothing, as
 * clang_utils.expand_impl does). */
static CsProxy *
restore_dims (GradCtx *c, CsProxy *x, const gboolean dims[CS_MAX_DIMS], const int64_t *shape,
              guint rank)
{
  int64_t kept[CS_MAX_DIMS], ushape[CS_MAX_DIMS], all[CS_MAX_DIMS];
  guint nk = kept_dims (dims, rank, kept);
  CsProxy *u;

  if (rank == 0)
    return x;
  for (guint i = 0; i < rank; i++)
    {
      ushape[i] = dims[i] ? 1 : shape[i];
      all[i] = i;
    }
  u = bcast (c, x, ushape, rank, kept, nk);
  return u ? bcast (c, u, shape, rank, all, rank) : NULL;
}

/* ltorch.sum(x, dims, keepdim, dtype=None) */
static CsProxy *
lsum (GradCtx *c, CsProxy *x, const gboolean dims[CS_MAX_DIMS], gboolean keepdim)
{
  int64_t dl[CS_MAX_DIMS], shape[CS_MAX_DIMS];
  guint nd = 0, r = 0;
  CsDtype dt = x->dtype;

  if (c->error)
    return NULL;
  for (guint i = 0; i < x->rank; i++)
    {
      if (dims[i])
        {
          dl[nd++] = i;
          if (keepdim)
            shape[r++] = 1;
        }
      else
        shape[r++] = x->shape[i];
    }
  if (!cs_dtype_is_inexact (dt))
    dt = CS_DTYPE_I64;   /* Thunder's sum promotes exact dtypes to int64 */
  {
    CsArg args[] = { POS (v_p (c, x)), POS (v_ints (c, dl, nd)),
                     POS (cs_value_new_bool (c->a, keepdim)),
                     KW ("dtype", cs_value_new_none (c->a)) };
    return emit_typed (c, CS_OP_LTORCH_SUM, dt, shape, r, &x->device, args, G_N_ELEMENTS (args));
  }
}

/* ltorch.reshape(x, shape) */
static CsProxy *
reshape (GradCtx *c, CsOpId id, CsProxy *x, const int64_t *shape, guint rank)
{
  CsArg args[2];

  if (c->error)
    return NULL;
  args[0] = (CsArg) POS (v_p (c, x));
  args[1] = (CsArg) POS (v_ints (c, shape, rank));
  return emit_typed (c, id, x->dtype, shape, rank, &x->device, args, 2);
}

/* prims.transpose(x, perm) */
static CsProxy *
transpose (GradCtx *c, CsProxy *x, const int64_t *perm)
{
  int64_t shape[CS_MAX_DIMS];
  CsArg args[2];

  if (c->error)
    return NULL;
  for (guint i = 0; i < x->rank; i++)
    shape[i] = x->shape[perm[i]];
  args[0] = (CsArg) POS (v_p (c, x));
  args[1] = (CsArg) POS (v_ints (c, perm, x->rank));
  return emit_typed (c, CS_OP_PRIM_TRANSPOSE, x->dtype, shape, x->rank, &x->device, args, 2);
}

/* x.mT: swap the last two dims (prims.transpose) */
static CsProxy *
mT (GradCtx *c, CsProxy *x)
{
  int64_t perm[CS_MAX_DIMS];

  if (c->error)
    return NULL;
  for (guint i = 0; i < x->rank; i++)
    perm[i] = i;
  if (x->rank >= 2)
    {
      perm[x->rank - 2] = x->rank - 1;
      perm[x->rank - 1] = x->rank - 2;
    }
  return transpose (c, x, perm);
}

/* clang.unsqueeze(x, dim) as prims.broadcast_in_dim */
static CsProxy *
unsqueeze (GradCtx *c, CsProxy *x, int64_t dim)
{
  int64_t shape[CS_MAX_DIMS], bd[CS_MAX_DIMS];
  guint r = x->rank + 1, k = 0, nb = 0;

  if (c->error)
    return NULL;
  dim = canon_dim (dim, r);
  for (guint i = 0; i < r; i++)
    {
      if ((int64_t) i == dim)
        shape[i] = 1;
      else
        {
          shape[i] = x->shape[k++];
          bd[nb++] = i;
        }
    }
  return bcast (c, x, shape, r, bd, nb);
}

/* prims.squeeze(x, dims) for size-1 dims */
static CsProxy *
squeeze (GradCtx *c, CsProxy *x, const gboolean dims[CS_MAX_DIMS])
{
  int64_t shape[CS_MAX_DIMS], dl[CS_MAX_DIMS];
  guint r = 0, nd = 0;
  CsArg args[2];

  if (c->error)
    return NULL;
  for (guint i = 0; i < x->rank; i++)
    {
      if (dims[i] && x->shape[i] == 1)
        dl[nd++] = i;
      else
        shape[r++] = x->shape[i];
    }
  if (nd == 0)
    return x;
  args[0] = (CsArg) POS (v_p (c, x));
  args[1] = (CsArg) POS (v_ints (c, dl, nd));
  return emit_typed (c, CS_OP_PRIM_SQUEEZE, x->dtype, shape, r, &x->device, args, 2);
}

/* ltorch.matmul(x, y) for the shapes the matmul/linear VJPs produce */
static CsProxy *
matmul (GradCtx *c, CsProxy *x, CsProxy *y)
{
  int64_t shape[CS_MAX_DIMS];
  guint r;
  CsArg args[2];

  if (c->error)
    return NULL;
  if (x->rank < 2 || y->rank < 2 || x->shape[x->rank - 1] != y->shape[y->rank - 2])
    {
      g_set_error (&c->error, CS_GRAD_ERROR, CS_GRAD_ERROR_BAD_TRACE,
                   "matmul backward: operands %s and %s do not multiply", x->name, y->name);
      return NULL;
    }
  r = MAX (x->rank, y->rank);
  for (guint i = 0; i + 2 < r; i++)
    {
      const CsProxy *big = x->rank >= y->rank ? x : y;
      shape[i] = big->shape[i];
    }
  shape[r - 2] = x->shape[x->rank - 2];
  shape[r - 1] = y->shape[y->rank - 1];
  args[0] = (CsArg) POS (v_p (c, x));
  args[1] = (CsArg) POS (v_p (c, y));
  return emit_typed (c, CS_OP_LTORCH_MATMUL, x->dtype, shape, r, &x->device, args, 2);
}

/* ltorch.where(pred, x, y) keeping @like's dtype */
static CsProxy *
where (GradCtx *c, CsValue *pred, CsValue *x, CsValue *y, CsProxy *like)
{
  OpInfo ip, ix, iy, ixy;
  int64_t s1[CS_MAX_DIMS], s2[CS_MAX_DIMS];
  guint r1 = 0, r2 = 0;
  CsArg args[3];

  if (c->error)
    return NULL;
  ixy = (OpInfo) { TRUE, like->dtype, 0, NULL, like->device };
  if (!op_info (pred, &ip) || !op_info (x, &ix) || !op_info (y, &iy)
      || !broadcast_shapes (&ix, &iy, s1, &r1)
      || (ixy.rank = r1, ixy.shape = s1, !broadcast_shapes (&ip, &ixy, s2, &r2)))
    {
      g_set_error (&c->error, CS_GRAD_ERROR, CS_GRAD_ERROR_BAD_TRACE,
                   "where backward: operands do not broadcast");
      return NULL;
    }
  args[0] = (CsArg) POS (pred);
  args[1] = (CsArg) POS (x);
  args[2] = (CsArg) POS (y);
  return emit_typed (c, CS_OP_LTORCH_WHERE, like->dtype, s2, r2, &like->device, args, 3);
}

/* prims.full(shape, 0, device=, dtype=) */
static CsProxy *
zeros (GradCtx *c, CsProxy *like)
{
  CsArg args[4];

  if (c->error)
    return NULL;
  args[0] = (CsArg) POS (v_ints (c, like->shape, like->rank));
  args[1] = (CsArg) POS (cs_dtype_is_inexact (like->dtype) ? v_f (c, 0.0) : v_i (c, 0));
  args[2] = (CsArg) KW ("device", v_device (c, &like->device));
  args[3] = (CsArg) KW ("dtype", cs_value_new_dtype (c->a, like->dtype, FALSE));
  return emit_typed (c, CS_OP_PRIM_FULL, like->dtype, like->shape, like->rank, &like->device,
                     args, 4);
}

/* ------------------------------------------------------------------------------------------ */
/* get_grad / put_grad                                                                         */

static CsProxy *
get_grad_stmt (GradCtx *c, CsProxy *p)
{
  CsArg args[1] = { POS (v_p (c, p)) };
  CsProxy *g = emit_typed (c, CS_OP_PRIM_GET_GRAD, p->dtype, p->shape, p->rank, &p->device,
                           args, 1);
  return g;
}

/* The gradient of forward proxy @p: the accumulated one, a get_grad for a forward output,
 * or NULL (no gradient reaches @p). */
static CsProxy *
grad_of (GradCtx *c, CsProxy *p)
{
  CsProxy *g = pmap_lookup (c->grads, p);

  if (g != NULL)
    return g;
  if (pmap_contains (c->outputs, p))
    {
      g = get_grad_stmt (c, p);
      pmap_insert (c->grads, p, g);
    }
  return g;
}

/* prims.put_grad(x, g): accumulate @g into the gradient of @x (Thunder: ltorch.add). */
static void
put_grad (GradCtx *c, CsValue *xv, CsProxy *g)
{
  CsProxy *x = value_tensor (xv);
  CsProxy *cur;

  if (c->error || g == NULL || !is_diff (x))
    return;
  if (x->rank != g->rank
      || (x->rank > 0 && memcmp (x->shape, g->shape, sizeof (int64_t) * x->rank) != 0))
    {
      g_set_error (&c->error, CS_GRAD_ERROR, CS_GRAD_ERROR_BAD_TRACE,
                   "gradient %s of %s has the wrong shape (internal VJP rule error)",
                   g->name, x->name);
      return;
    }
  cur = pmap_lookup (c->grads, x);
  if (cur == NULL && pmap_contains (c->outputs, x))
    cur = get_grad_stmt (c, x);   /* the outside cotangent: from no VJP (grad_from 0) */
  if (cur != NULL)
    {
      guint from = GPOINTER_TO_UINT (pmap_lookup (c->grad_from, x));
      gboolean across = from != c->origin + 1u;

      g = add (c, v_p (c, cur), v_p (c, g));
      /* cotangents from two forward statements: the sum is autograd's accumulation, an op of
       * its own (CsStmt.grad_sum); within one statement's decomposition (gelu reads its input
       * five times) it is part of that statement's backward, as eager's one backward kernel */
      if (across && g != NULL && c->bw->len > 0)
        ((CsStmt *) g_ptr_array_index (c->bw, c->bw->len - 1))->grad_sum = 1;
      pmap_insert (c->grad_from, x, GUINT_TO_POINTER (across ? GRAD_FROM_MIXED : from));
    }
  else
    pmap_insert (c->grad_from, x, GUINT_TO_POINTER (c->origin + 1u));
  pmap_insert (c->grads, x, g);
}

/* ------------------------------------------------------------------------------------------ */
/* VJP rules                                                                                   */

/**
 * cs_grad_has_rule:
 * @op: an op-table entry (executor names are followed to their semantic op)
 *
 * Source: thunder/core/transforms.py `_grad_fn_map`, `augmented_forward_impls`.
 * Returns: TRUE when castscope has a VJP rule for @op itself (no decomposition needed)
 */
gboolean
cs_grad_has_rule (const CsOp *op)
{
  g_return_val_if_fail (op != NULL, FALSE);
  return _cs_vjp_exists (cs_op_semantic (op)->id);
}

/* Fails for a tensor operand that is missing or has no tensor type, naming it. */
static gboolean
need_tensor (GradCtx *c, const CsStmt *s, const CsValue *v, const char *what)
{
  if (value_tensor (v) != NULL && v->u.proxy->typed)
    return TRUE;
  if (v != NULL && v->kind == CS_VALUE_PROXY)
    return rule_fail (c, s, cs_arena_printf (c->a, "%s %s has no tensor type (a trace without "
                                                   "type comments needs the meta pass first)",
                                             what, v->u.proxy->name));
  return rule_fail (c, s, cs_arena_printf (c->a, "%s is not a tensor", what));
}

static void
argsort (const int64_t *perm, guint n, int64_t *out)
{
  for (guint i = 0; i < n; i++)
    out[perm[i]] = i;
}

/* broadcast_in_dim(a, shape, bdims): sum g over the broadcast dims, then unsqueeze a's size-1
 * dims back (Thunder's _broadcast_in_dim_prim_grad). */
static void
rule_prim_broadcast_in_dim (GradCtx *c, CsStmt *s, CsProxy *g, CsProxy *out, CsValue *a0, CsValue *a1)
{
  CsValue *av = arg (s, CS_ARG_A);
  CsProxy *a = value_tensor (av);
  int64_t bd[CS_MAX_DIMS];
  guint nb = 0;
  gboolean is_bcast[CS_MAX_DIMS] = { 0 }, reduce[CS_MAX_DIMS] = { 0 };
  gboolean any_reduce = FALSE;
  int64_t non_unit[CS_MAX_DIMS];
  guint nn = 0;

  if (a == NULL)
    return;
  if (!cs_value_get_int_seq (cs_stmt_arg (s, CS_ARG_BROADCAST_DIMENSIONS), bd, CS_MAX_DIMS, &nb)
      || nb != a->rank)
    {
      rule_fail (c, s, "bad broadcast_dimensions");
      return;
    }
  for (guint i = 0; i < nb; i++)
    {
      if (a->shape[i] == 1)
        continue;
      if (bd[i] < 0 || bd[i] >= (int64_t) g->rank)
        {
          rule_fail (c, s, "broadcast dimension out of range");
          return;
        }
      is_bcast[bd[i]] = TRUE;
      non_unit[nn++] = i;
    }
  for (guint i = 0; i < g->rank; i++)
    if (!is_bcast[i])
      reduce[i] = any_reduce = TRUE;
  if (any_reduce)
    g = lsum (c, g, reduce, FALSE);
  if (g != NULL && nn != a->rank)
    g = bcast (c, g, a->shape, a->rank, non_unit, nn);
  put_grad (c, av, g);
}

/* slice_prim(a, start, end, strides): pad g back to a's shape, zeros outside the slice and
 * between its strided elements (Thunder's _slice_prim_grad) */
static void
rule_prim_slice_prim (GradCtx *c, CsStmt *s, CsProxy *g, CsProxy *out, CsValue *a0, CsValue *a1)
{
  CsValue *av = arg (s, CS_ARG_A);
  CsProxy *a = value_tensor (av);
  int64_t st[CS_MAX_DIMS], en[CS_MAX_DIMS], sd[CS_MAX_DIMS];
  guint n1 = 0, n2 = 0, n3 = 0;
  CsValue *cfg[CS_MAX_DIMS];
  CsValue *sv = arg (s, CS_ARG_STRIDES);
  CsArg args[3];
  CsProxy *ga;

  if (a == NULL)
    return;
  if (!cs_value_get_int_seq (arg (s, CS_ARG_START_INDICES), st, CS_MAX_DIMS, &n1)
      || !cs_value_get_int_seq (arg (s, CS_ARG_END_INDICES), en, CS_MAX_DIMS, &n2)
      || n1 != a->rank || n2 != a->rank || g->rank != a->rank)
    {
      rule_fail (c, s, "bad slice indices");
      return;
    }
  if (sv == NULL || sv->kind == CS_VALUE_NONE)
    for (guint i = 0; i < a->rank; i++)
      sd[i] = 1;
  else if (!cs_value_get_int_seq (sv, sd, CS_MAX_DIMS, &n3) || n3 != a->rank)
    {
      rule_fail (c, s, "bad slice strides");
      return;
    }
  for (guint i = 0; i < a->rank; i++)
    {
      int64_t lim = st[i] + (g->shape[i] == 0 ? 0 : 1 + (g->shape[i] - 1) * sd[i]);
      int64_t trip[3] = { st[i], a->shape[i] - lim, sd[i] - 1 };
      cfg[i] = v_ints (c, trip, 3);
    }
  args[0] = (CsArg) POS (v_p (c, g));
  args[1] = (CsArg) POS (cs_dtype_is_inexact (g->dtype) ? v_f (c, 0.0) : v_i (c, 0));
  args[2] = (CsArg) POS (cs_value_new_seq (c->a, CS_VALUE_TUPLE, cfg, a->rank));
  ga = emit_typed (c, CS_OP_PRIM_PAD, g->dtype, a->shape, a->rank, &g->device, args, 3);
  put_grad (c, av, ga);
}

/* pad(a, value, ((lo, hi, interior), ...)): restore what negative padding cropped (with zeros),
 * then take every (interior + 1)-th element from lo on (Thunder's pad_backward: un-pad, then
 * un-dilate with a strided slice). */
static void
rule_prim_pad (GradCtx *c, CsStmt *s, CsProxy *g, CsProxy *out, CsValue *a0, CsValue *a1)
{
  CsValue *av = arg (s, CS_ARG_A);
  CsProxy *a = value_tensor (av);
  CsValue *cfg = arg (s, CS_ARG_PADDING_CONFIG);
  int64_t lo[CS_MAX_DIMS], hi[CS_MAX_DIMS], in[CS_MAX_DIMS];
  int64_t st[CS_MAX_DIMS], en[CS_MAX_DIMS], sd[CS_MAX_DIMS];
  gboolean crop = FALSE;
  CsArg args[4];

  if (a == NULL || cfg == NULL || (cfg->kind != CS_VALUE_TUPLE && cfg->kind != CS_VALUE_LIST)
      || cfg->u.seq.n != a->rank || g->rank != a->rank)
    {
      rule_fail (c, s, "bad padding_config");
      return;
    }
  for (guint i = 0; i < a->rank; i++)
    {
      int64_t trip[3];
      guint n = 0;
      if (!cs_value_get_int_seq (cfg->u.seq.items[i], trip, 3, &n) || n != 3 || trip[2] < 0)
        {
          rule_fail (c, s, "bad padding_config entry");
          return;
        }
      lo[i] = trip[0];
      hi[i] = trip[1];
      in[i] = trip[2];
      crop |= lo[i] < 0 || hi[i] < 0;
    }
  if (crop)
    {
      CsValue *cv[CS_MAX_DIMS];
      int64_t shape[CS_MAX_DIMS];
      for (guint i = 0; i < a->rank; i++)
        {
          int64_t t[3] = { MAX (-lo[i], 0), MAX (-hi[i], 0), 0 };
          cv[i] = v_ints (c, t, 3);
          shape[i] = g->shape[i] + t[0] + t[1];
        }
      args[0] = (CsArg) POS (v_p (c, g));
      args[1] = (CsArg) POS (cs_dtype_is_inexact (g->dtype) ? v_f (c, 0.0) : v_i (c, 0));
      args[2] = (CsArg) POS (cs_value_new_seq (c->a, CS_VALUE_TUPLE, cv, a->rank));
      g = emit_typed (c, CS_OP_PRIM_PAD, g->dtype, shape, a->rank, &g->device, args, 3);
      if (g == NULL)
        return;
    }
  for (guint i = 0; i < a->rank; i++)
    {
      st[i] = MAX (lo[i], 0);
      sd[i] = in[i] + 1;
      en[i] = a->shape[i] > 0 ? st[i] + (a->shape[i] - 1) * sd[i] + 1 : st[i];
    }
  args[0] = (CsArg) POS (v_p (c, g));
  args[1] = (CsArg) POS (cs_value_new_int_seq (c->a, CS_VALUE_LIST, st, a->rank));
  args[2] = (CsArg) POS (cs_value_new_int_seq (c->a, CS_VALUE_LIST, en, a->rank));
  args[3] = (CsArg) POS (cs_value_new_int_seq (c->a, CS_VALUE_LIST, sd, a->rank));
  put_grad (c, av, emit_typed (c, CS_OP_PRIM_SLICE_PRIM, g->dtype, a->shape, a->rank, &g->device,
                               args, 4));
}

/* cat(tensors, dim): each input's gradient is its slice of g along dim (Thunder's
 * _cat_prim_grad) */
static void
rule_prim_cat (GradCtx *c, CsStmt *s, CsProxy *g, CsProxy *out, CsValue *a0, CsValue *a1)
{
  CsValue *tv = arg (s, CS_ARG_TENSORS);
  CsValue *dv = arg (s, CS_ARG_DIM);
  int64_t dim, start = 0;

  if (tv == NULL || (tv->kind != CS_VALUE_LIST && tv->kind != CS_VALUE_TUPLE) || dv == NULL
      || dv->kind != CS_VALUE_INT)
    {
      rule_fail (c, s, "bad cat arguments");
      return;
    }
  dim = canon_dim (dv->u.i, g->rank);
  for (guint k = 0; k < tv->u.seq.n; k++)
    {
      CsProxy *t = value_tensor (tv->u.seq.items[k]);
      int64_t st[CS_MAX_DIMS], en[CS_MAX_DIMS], sd[CS_MAX_DIMS];
      CsArg args[4];
      CsProxy *gs;

      if (t == NULL || dim < 0 || dim >= (int64_t) t->rank || t->rank != g->rank)
        {
          rule_fail (c, s, "bad cat operand");
          return;
        }
      for (guint i = 0; i < g->rank; i++)
        {
          st[i] = (int64_t) i == dim ? start : 0;
          en[i] = (int64_t) i == dim ? start + t->shape[i] : g->shape[i];
          sd[i] = 1;
        }
      start += t->shape[dim];
      args[0] = (CsArg) POS (v_p (c, g));
      args[1] = (CsArg) POS (cs_value_new_int_seq (c->a, CS_VALUE_LIST, st, g->rank));
      args[2] = (CsArg) POS (cs_value_new_int_seq (c->a, CS_VALUE_LIST, en, g->rank));
      args[3] = (CsArg) POS (cs_value_new_int_seq (c->a, CS_VALUE_LIST, sd, g->rank));
      gs = emit_typed (c, CS_OP_PRIM_SLICE_PRIM, g->dtype, t->shape, t->rank, &g->device, args, 4);
      put_grad (c, tv->u.seq.items[k], gs);
    }
}

/* take / take_along_axis: zeros, then index_add / scatter_add of g */
static void
vjp_take (GradCtx *c, CsStmt *s, CsProxy *g, CsOpId scatter)
{
  CsValue *av = arg (s, CS_ARG_A);
  CsProxy *a = value_tensor (av);
  CsValue *idx = arg (s, CS_ARG_INDEX);
  CsValue *dim = arg (s, CS_ARG_DIM);
  CsProxy *z;
  CsArg args[4];

  if (a == NULL || idx == NULL || dim == NULL)
    {
      rule_fail (c, s, "bad take arguments");
      return;
    }
  z = zeros (c, a);
  if (z == NULL)
    return;
  args[0] = (CsArg) POS (v_p (c, z));
  args[1] = (CsArg) POS (idx);
  args[2] = (CsArg) POS (v_p (c, g));
  args[3] = (CsArg) POS (dim);
  put_grad (c, av, emit_typed (c, scatter, a->dtype, a->shape, a->rank, &a->device, args, 4));
}

static void
vjp_var_mean (GradCtx *c, CsStmt *s)
{
  CsValue *av = arg (s, CS_ARG_A);
  CsProxy *a = value_tensor (av);
  g_autoptr(GPtrArray) outs = g_ptr_array_new ();
  CsProxy *v, *m, *gv, *gm, *total = NULL;
  gboolean dims[CS_MAX_DIMS];
  double corr = 0, n;
  int64_t numel_m;

  cs_stmt_collect_outputs (s, outs);
  if (a == NULL || outs->len != 2 || !read_dims (arg (s, CS_ARG_DIMS), a->rank, TRUE, dims))
    {
      rule_fail (c, s, "bad var_mean arguments");
      return;
    }
  value_number (arg (s, CS_ARG_CORRECTION), &corr);
  v = outs->pdata[0];
  m = outs->pdata[1];
  /* a missing gradient is zero (Thunder writes ltorch.zeros; the term is dropped here) */
  gv = grad_of (c, v);
  gm = grad_of (c, m);
  if (gv == NULL && gm == NULL)
    return;
  numel_m = cs_shape_numel (m->shape, m->rank);
  n = numel_m > 0 ? (double) (cs_shape_numel (a->shape, a->rank) / numel_m) : 1.0;
  if (gm != NULL)
    total = mul (c, v_f (c, 1.0 / n), v_p (c, restore_dims (c, gm, dims, a->shape, a->rank)));
  if (gv != NULL)
    {
      CsProxy *rgv = restore_dims (c, gv, dims, a->shape, a->rank);
      CsProxy *rm = restore_dims (c, m, dims, a->shape, a->rank);
      CsProxy *t1, *t2, *t3, *vg;
      if (rgv == NULL || rm == NULL)
        return;
      t1 = mul (c, v_i (c, 2), v_p (c, rgv));
      t2 = sub (c, av, v_p (c, rm));
      if (t1 == NULL || t2 == NULL)
        return;
      t3 = mul (c, v_p (c, t1), v_p (c, t2));
      if (t3 == NULL)
        return;
      vg = divide (c, v_p (c, t3), v_f (c, n - corr));
      if (vg == NULL)
        return;
      total = total ? add (c, v_p (c, total), v_p (c, vg)) : vg;
    }
  put_grad (c, av, total);
}

/* matmul(a, b): g @ b^T and a^T @ g, with the 1-D operands unsqueezed and the broadcast batch
 * dims summed back (Thunder's _matmul_prim_grad) */
static void
rule_prim_matmul (GradCtx *c, CsStmt *s, CsProxy *g, CsProxy *out, CsValue *a0, CsValue *a1)
{
  CsValue *av = arg (s, CS_ARG_A), *bv = arg (s, CS_ARG_B);
  CsProxy *a = value_tensor (av), *b = value_tensor (bv);
  gboolean d[CS_MAX_DIMS];

  if (!need_tensor (c, s, av, "operand") || !need_tensor (c, s, bv, "operand"))
    return;
  if (a->rank == 1 && b->rank == 1)
    {
      put_grad (c, av, mul (c, v_p (c, g), bv));
      put_grad (c, bv, mul (c, v_p (c, g), av));
    }
  else if (b->rank == 1)
    {
      CsProxy *ga = matmul (c, unsqueeze (c, g, -1), mT (c, unsqueeze (c, b, -1)));
      CsProxy *gb = matmul (c, mT (c, a), unsqueeze (c, g, -1));
      if (c->error)
        return;
      memset (d, 0, sizeof d);
      d[gb->rank - 1] = TRUE;
      gb = squeeze (c, gb, d);
      if (gb != NULL && gb->rank > 1)
        {
          memset (d, 0, sizeof d);
          for (guint i = 0; i + 1 < gb->rank; i++)
            d[i] = TRUE;
          gb = lsum (c, gb, d, FALSE);
        }
      put_grad (c, av, ga);
      put_grad (c, bv, gb);
    }
  else if (a->rank == 1)
    {
      CsProxy *ga = matmul (c, unsqueeze (c, g, -2), mT (c, b));
      CsProxy *gb;
      if (c->error)
        return;
      if (ga->rank > 2)
        {
          memset (d, 0, sizeof d);
          for (guint i = 0; i + 2 < ga->rank; i++)
            d[i] = TRUE;
          ga = lsum (c, ga, d, FALSE);
        }
      memset (d, 0, sizeof d);
      d[0] = TRUE;
      ga = ga ? squeeze (c, ga, d) : NULL;
      gb = matmul (c, mT (c, unsqueeze (c, a, -2)), unsqueeze (c, g, -2));
      put_grad (c, av, ga);
      put_grad (c, bv, gb);
    }
  else
    {
      CsProxy *ga = matmul (c, g, mT (c, b));
      CsProxy *gb = matmul (c, mT (c, a), g);
      if (c->error)
        return;
      if (gb->rank > b->rank)
        {
          /* N-D @ 2-D reaching the prim: sum the batch dims away */
          memset (d, 0, sizeof d);
          for (guint i = 0; i < gb->rank - b->rank; i++)
            d[i] = TRUE;
          gb = lsum (c, gb, d, FALSE);
        }
      put_grad (c, av, ga);
      put_grad (c, bv, gb);
    }
}

/* linear(a, w, bias): Thunder's _linear_prim_grad */
static void
rule_prim_linear (GradCtx *c, CsStmt *s, CsProxy *g, CsProxy *out, CsValue *a0, CsValue *a1)
{
  CsValue *av = arg (s, CS_ARG_A), *wv = arg (s, CS_ARG_W), *biasv = arg (s, CS_ARG_BIAS);
  CsProxy *a = value_tensor (av), *w = value_tensor (wv), *bias = value_tensor (biasv);
  int64_t N, K, M, sh[2];
  CsProxy *ga, *gw;
  gboolean d[CS_MAX_DIMS];

  if (!need_tensor (c, s, av, "input") || !need_tensor (c, s, wv, "weight"))
    return;
  if (a->rank < 1 || g->rank < 1)
    {
      rule_fail (c, s, "linear of a 0-d tensor");
      return;
    }
  N = g->shape[g->rank - 1];
  K = a->shape[a->rank - 1];
  M = N > 0 ? cs_shape_numel (g->shape, g->rank) / N : 0;
  sh[0] = M;
  sh[1] = N;
  ga = matmul (c, reshape (c, CS_OP_LTORCH_RESHAPE, g, sh, 2), w);
  ga = ga ? reshape (c, CS_OP_LTORCH_RESHAPE, ga, a->shape, a->rank) : NULL;
  if (a->rank == 1)
    gw = matmul (c, mT (c, unsqueeze (c, g, -2)), unsqueeze (c, a, -2));
  else
    {
      CsProxy *gt = mT (c, reshape (c, CS_OP_LTORCH_RESHAPE, g, sh, 2));
      sh[1] = K;
      gw = matmul (c, gt, reshape (c, CS_OP_LTORCH_RESHAPE, a, sh, 2));
    }
  put_grad (c, av, ga);
  put_grad (c, wv, gw);
  if (bias != NULL && !c->error)
    {
      CsProxy *gb = g;
      if (g->rank > 1)
        {
          memset (d, 0, sizeof d);
          for (guint i = 0; i + 1 < g->rank; i++)
            d[i] = TRUE;
          gb = lsum (c, g, d, FALSE);
        }
      put_grad (c, biasv, gb);
    }
}

/* ltorch.sum(a, dim, keepdim, dtype=): Thunder's _sum_grad */
static void
rule_ltorch_sum (GradCtx *c, CsStmt *s, CsProxy *g, CsProxy *out, CsValue *a0, CsValue *a1)
{
  CsValue *av = arg (s, CS_ARG_A);
  CsProxy *a = value_tensor (av);
  CsValue *dv = arg (s, CS_ARG_DIM), *kv = arg (s, CS_ARG_KEEPDIM);
  gboolean keep = kv != NULL && kv->kind == CS_VALUE_BOOL && kv->u.b;
  gboolean dims[CS_MAX_DIMS];
  int64_t all[CS_MAX_DIMS];
  CsProxy *ga;

  if (a == NULL || !read_dims (dv, a->rank, TRUE, dims))
    {
      rule_fail (c, s, "bad sum arguments");
      return;
    }
  if (dv == NULL || dv->kind == CS_VALUE_NONE || keep)
    {
      /* expand(g, a.shape): g has a's rank (keepdim) or is 0-d (dim=None) */
      guint n = 0;
      if (g->rank == a->rank)
        for (guint i = 0; i < a->rank; i++)
          all[n++] = i;
      ga = (g->rank == a->rank
            && (a->rank == 0 || memcmp (g->shape, a->shape, sizeof (int64_t) * a->rank) == 0))
           ? g : bcast (c, g, a->shape, a->rank, all, n);
    }
  else
    ga = restore_dims (c, g, dims, a->shape, a->rank);
  if (ga != NULL && ga->dtype != a->dtype)
    ga = convert (c, ga, a->dtype);
  put_grad (c, av, ga);
}

/* silu: g * s * (1 + a * (1 - s)), s = 1 / (1 + exp(-a)) (Thunder's _silu_grad) */
static void
rule_ltorch_silu (GradCtx *c, CsStmt *s, CsProxy *g, CsProxy *out, CsValue *a0, CsValue *a1)
{
  CsValue *av = arg (s, CS_ARG_A);
  CsProxy *a = value_tensor (av);
  CsProxy *sig, *t;

  if (a == NULL)
    return;
  t = ew1 (c, CS_OP_LTORCH_EXP, neg (c, a));
  if (t == NULL)
    return;
  t = add (c, v_i (c, 1), v_p (c, t));
  if (t == NULL)
    return;
  sig = divide (c, v_i (c, 1), v_p (c, t));
  if (sig == NULL)
    return;
  {
    CsProxy *gs = mul (c, v_p (c, g), v_p (c, sig));
    CsProxy *one_m = sub (c, v_i (c, 1), v_p (c, sig));
    CsProxy *am, *inner;
    if (gs == NULL || one_m == NULL)
      return;
    am = mul (c, av, v_p (c, one_m));
    if (am == NULL)
      return;
    inner = add (c, v_i (c, 1), v_p (c, am));
    if (inner == NULL)
      return;
    put_grad (c, av, mul (c, v_p (c, gs), v_p (c, inner)));
  }
}

/* softmax backward: out * (g - sum(out * g, dim, keepdim=True)), cast to the input dtype */
static void
vjp_softmax (GradCtx *c, CsStmt *s, CsProxy *g, gboolean log)
{
  CsValue *av = arg (s, CS_ARG_A);
  CsProxy *a = value_tensor (av);
  CsProxy *out = cs_stmt_get_output (s);
  gboolean dims[CS_MAX_DIMS];
  CsProxy *t, *gi;

  if (a == NULL || out == NULL || !read_dims (arg (s, CS_ARG_DIM), a->rank, FALSE, dims))
    {
      rule_fail (c, s, "bad softmax arguments");
      return;
    }
  if (log)
    {
      /* ltorch.log_softmax_backward(g, out, dim, dtype) = g - exp(out) * sum(g, dim, True) */
      CsProxy *e = ew1 (c, CS_OP_LTORCH_EXP, out);
      CsProxy *sg = lsum (c, g, dims, TRUE);
      if (e == NULL || sg == NULL)
        return;
      t = mul (c, v_p (c, e), v_p (c, sg));
      gi = t ? sub (c, v_p (c, g), v_p (c, t)) : NULL;
    }
  else
    {
      CsProxy *og = mul (c, v_p (c, out), v_p (c, g));
      CsProxy *sm = og ? lsum (c, og, dims, TRUE) : NULL;
      t = sm ? sub (c, v_p (c, g), v_p (c, sm)) : NULL;
      gi = t ? mul (c, v_p (c, out), v_p (c, t)) : NULL;
    }
  if (gi != NULL && gi->dtype != a->dtype)
    gi = convert (c, gi, a->dtype);
  put_grad (c, av, gi);
}

/* embedding(idx, weight, ...): ltorch.embedding_backward(g, idx, num_weights, padding_idx,
 * scale_grad_by_freq, sparse) (Thunder's _embedding_grad) */
static void
rule_ltorch_embedding (GradCtx *c, CsStmt *s, CsProxy *g, CsProxy *out, CsValue *a0, CsValue *a1)
{
  CsValue *iv = arg (s, CS_ARG_A), *wv = arg (s, CS_ARG_WEIGHT);
  CsValue *pv = arg (s, CS_ARG_PADDING_IDX), *scv = arg (s, CS_ARG_SCALE_GRAD_BY_FREQ);
  CsValue *spv = arg (s, CS_ARG_SPARSE);
  CsProxy *w = value_tensor (wv);
  CsArg args[6];

  if (w == NULL || iv == NULL || w->rank != 2)
    {
      rule_fail (c, s, "bad embedding arguments");
      return;
    }
  args[0] = (CsArg) POS (v_p (c, g));
  args[1] = (CsArg) POS (iv);
  args[2] = (CsArg) POS (v_i (c, w->shape[0]));
  args[3] = (CsArg) POS ((pv == NULL || pv->kind == CS_VALUE_NONE) ? v_i (c, -1) : pv);
  args[4] = (CsArg) POS (scv ? scv : cs_value_new_bool (c->a, FALSE));
  args[5] = (CsArg) POS (spv ? spv : cs_value_new_bool (c->a, FALSE));
  put_grad (c, wv, emit_typed (c, CS_OP_LTORCH_EMBEDDING_BACKWARD, g->dtype, w->shape, 2,
                               &g->device, args, 6));
}

/* "grad: VJP of <callee>", one string per callee (the statements of a rule share it). */
static const char *
vjp_why (GradCtx *c, const CsStmt *s)
{
  gboolean by_op = s->callee == s->op->name;
  const char *why = by_op ? c->why_by_op[s->op->id] : NULL;

  if (why != NULL)
    return why;
  why = g_hash_table_lookup (c->whys, s->callee);
  if (why == NULL)
    {
      why = cs_arena_printf (c->a, "grad: VJP of %s", s->callee);
      g_hash_table_insert (c->whys, (gpointer) s->callee, (gpointer) why);
    }
  if (by_op)
    c->why_by_op[s->op->id] = why;
  return why;
}

/* VJP of prims.convert_element_type */
static void
rule_prim_convert_element_type (GradCtx *c, CsStmt *s, CsProxy *g, CsProxy *out, CsValue *a0, CsValue *a1)
{
  if (value_tensor (a0) != NULL)
    put_grad (c, a0, convert (c, g, value_tensor (a0)->dtype));
}

/* VJP of prims.reshape */
static void
rule_prim_reshape (GradCtx *c, CsStmt *s, CsProxy *g, CsProxy *out, CsValue *a0, CsValue *a1)
{
  if (value_tensor (a0) != NULL)
    put_grad (c, a0, reshape (c, CS_OP_PRIM_RESHAPE, g, value_tensor (a0)->shape,
                              value_tensor (a0)->rank));
}

/* VJP of prims.transpose */
static void
rule_prim_transpose (GradCtx *c, CsStmt *s, CsProxy *g, CsProxy *out, CsValue *a0, CsValue *a1)
{
  int64_t perm[CS_MAX_DIMS], inv[CS_MAX_DIMS];
  guint n = 0;
  gboolean seen[CS_MAX_DIMS] = { 0 }, ok;
  ok = cs_value_get_int_seq (cs_stmt_arg (s, CS_ARG_PERMUTATION), perm, CS_MAX_DIMS, &n)
       && n == g->rank && value_tensor (a0) != NULL && value_tensor (a0)->rank == n;
  for (guint i = 0; ok && i < n; i++)
    {
      ok = perm[i] >= 0 && perm[i] < (int64_t) n && !seen[perm[i]];
      if (ok)
        seen[perm[i]] = TRUE;
    }
  if (!ok)
    {
      rule_fail (c, s, "bad permutation");
      return;
    }
  argsort (perm, n, inv);
  put_grad (c, a0, transpose (c, g, inv));
}

/* VJP of prims.squeeze */
static void
rule_prim_squeeze (GradCtx *c, CsStmt *s, CsProxy *g, CsProxy *out, CsValue *a0, CsValue *a1)
{
  CsProxy *a = value_tensor (a0);
  gboolean dims[CS_MAX_DIMS];
  int64_t kept[CS_MAX_DIMS];
  guint nk;
  if (a == NULL || !read_dims (arg (s, CS_ARG_DIMS), a->rank, FALSE, dims))
    {
      rule_fail (c, s, "bad squeeze dims");
      return;
    }
  nk = kept_dims (dims, a->rank, kept);
  put_grad (c, a0, bcast (c, g, a->shape, a->rank, kept, nk));
}

/* VJP of prims.take */
static void
rule_prim_take (GradCtx *c, CsStmt *s, CsProxy *g, CsProxy *out, CsValue *a0, CsValue *a1)
{
  vjp_take (c, s, g, CS_OP_PRIM_INDEX_ADD);
}

/* VJP of prims.take_along_axis */
static void
rule_prim_take_along_axis (GradCtx *c, CsStmt *s, CsProxy *g, CsProxy *out, CsValue *a0, CsValue *a1)
{
  vjp_take (c, s, g, CS_OP_PRIM_SCATTER_ADD);
}

/* VJP of prims.shallow_copy, prims.clone, prims.stride_order */
static void
rule_prim_shallow_copy (GradCtx *c, CsStmt *s, CsProxy *g, CsProxy *out, CsValue *a0, CsValue *a1)
{
  put_grad (c, a0, g);
}

/* VJP of prims.neg */
static void
rule_prim_neg (GradCtx *c, CsStmt *s, CsProxy *g, CsProxy *out, CsValue *a0, CsValue *a1)
{
  put_grad (c, a0, neg (c, g));
}

/* VJP of prims.exp */
static void
rule_prim_exp (GradCtx *c, CsStmt *s, CsProxy *g, CsProxy *out, CsValue *a0, CsValue *a1)
{
  put_grad (c, a0, mul (c, v_p (c, g), v_p (c, out)));
}

/* VJP of prims.log */
static void
rule_prim_log (GradCtx *c, CsStmt *s, CsProxy *g, CsProxy *out, CsValue *a0, CsValue *a1)
{
  put_grad (c, a0, divide (c, v_p (c, g), a0));
}

/* VJP of prims.tanh */
static void
rule_prim_tanh (GradCtx *c, CsStmt *s, CsProxy *g, CsProxy *out, CsValue *a0, CsValue *a1)
{
  CsProxy *t = mul (c, v_p (c, out), v_p (c, out));
  t = t ? sub (c, v_i (c, 1), v_p (c, t)) : NULL;
  put_grad (c, a0, t ? mul (c, v_p (c, g), v_p (c, t)) : NULL);
}

/* VJP of prims.erf */
static void
rule_prim_erf (GradCtx *c, CsStmt *s, CsProxy *g, CsProxy *out, CsValue *a0, CsValue *a1)
{
  /* 2 / sqrt(pi) * exp(-(a ** 2)) * g */
  CsProxy *t = ew2 (c, CS_OP_LTORCH_POW, a0, v_i (c, 2));
  t = t ? neg (c, t) : NULL;
  t = t ? ew1 (c, CS_OP_LTORCH_EXP, t) : NULL;
  t = t ? mul (c, v_f (c, 2.0 / sqrt (G_PI)), v_p (c, t)) : NULL;
  put_grad (c, a0, t ? mul (c, v_p (c, t), v_p (c, g)) : NULL);
}

/* VJP of prims.rsqrt */
static void
rule_prim_rsqrt (GradCtx *c, CsStmt *s, CsProxy *g, CsProxy *out, CsValue *a0, CsValue *a1)
{
  /* -0.5 * g * out ** 3.0 */
  CsProxy *t1 = mul (c, v_f (c, -0.5), v_p (c, g));
  CsProxy *t2 = ew2 (c, CS_OP_LTORCH_POW, v_p (c, out), v_f (c, 3.0));
  put_grad (c, a0, (t1 && t2) ? mul (c, v_p (c, t1), v_p (c, t2)) : NULL);
}

/* VJP of prims.sqrt */
static void
rule_prim_sqrt (GradCtx *c, CsStmt *s, CsProxy *g, CsProxy *out, CsValue *a0, CsValue *a1)
{
  /* g / (2.0 * out) */
  CsProxy *t = mul (c, v_f (c, 2.0), v_p (c, out));
  put_grad (c, a0, t ? divide (c, v_p (c, g), v_p (c, t)) : NULL);
}

/* VJP of prims.reciprocal */
static void
rule_prim_reciprocal (GradCtx *c, CsStmt *s, CsProxy *g, CsProxy *out, CsValue *a0, CsValue *a1)
{
  /* -g * out * out */
  CsProxy *t = neg (c, g);
  t = t ? mul (c, v_p (c, t), v_p (c, out)) : NULL;
  put_grad (c, a0, t ? mul (c, v_p (c, t), v_p (c, out)) : NULL);
}

/* VJP of prims.add */
static void
rule_prim_add (GradCtx *c, CsStmt *s, CsProxy *g, CsProxy *out, CsValue *a0, CsValue *a1)
{
  put_grad (c, a0, g);
  put_grad (c, a1, g);
}

/* VJP of prims.sub */
static void
rule_prim_sub (GradCtx *c, CsStmt *s, CsProxy *g, CsProxy *out, CsValue *a0, CsValue *a1)
{
  put_grad (c, a0, g);
  if (is_diff (value_tensor (a1)))
    put_grad (c, a1, neg (c, g));
}

/* VJP of prims.mul */
static void
rule_prim_mul (GradCtx *c, CsStmt *s, CsProxy *g, CsProxy *out, CsValue *a0, CsValue *a1)
{
  if (is_diff (value_tensor (a0)))
    put_grad (c, a0, mul (c, a1, v_p (c, g)));
  if (is_diff (value_tensor (a1)))
    put_grad (c, a1, mul (c, a0, v_p (c, g)));
}

/* VJP of prims.div */
static void
rule_prim_div (GradCtx *c, CsStmt *s, CsProxy *g, CsProxy *out, CsValue *a0, CsValue *a1)
{
  if (is_diff (value_tensor (a0)))
    put_grad (c, a0, divide (c, v_p (c, g), a1));
  if (is_diff (value_tensor (a1)))
    {
      /* -g * ((a / b) / b) */
      CsProxy *ng = neg (c, g);
      CsProxy *t = divide (c, a0, a1);
      t = t ? divide (c, v_p (c, t), a1) : NULL;
      put_grad (c, a1, (ng && t) ? mul (c, v_p (c, ng), v_p (c, t)) : NULL);
    }
}

/* VJP of prims.pow */
static void
rule_prim_pow (GradCtx *c, CsStmt *s, CsProxy *g, CsProxy *out, CsValue *a0, CsValue *a1)
{
  /* dx = g * y * x ** (y - 1); dy = g * out * log(x) */
  double y;
  if (is_diff (value_tensor (a0)))
    {
      CsProxy *gy = mul (c, v_p (c, g), a1);
      CsProxy *p;
      if (value_number (a1, &y) && a1->kind != CS_VALUE_PROXY)
        p = ew2 (c, CS_OP_LTORCH_POW, a0,
                 a1->kind == CS_VALUE_FLOAT ? v_f (c, y - 1.0) : v_i (c, (int64_t) y - 1));
      else
        {
          CsProxy *ym1 = sub (c, a1, v_i (c, 1));
          p = ym1 ? ew2 (c, CS_OP_LTORCH_POW, a0, v_p (c, ym1)) : NULL;
        }
      put_grad (c, a0, (gy && p) ? mul (c, v_p (c, gy), v_p (c, p)) : NULL);
    }
  if (is_diff (value_tensor (a1)))
    {
      CsProxy *go = mul (c, v_p (c, g), v_p (c, out));
      CsProxy *lx = NULL;
      if (value_tensor (a0) != NULL)
        lx = ew1 (c, CS_OP_LTORCH_LOG, value_tensor (a0));
      else if (value_number (a0, &y))
        {
          put_grad (c, a1, go ? mul (c, v_p (c, go), v_f (c, log (y))) : NULL);
          return;
        }
      put_grad (c, a1, (go && lx) ? mul (c, v_p (c, go), v_p (c, lx)) : NULL);
    }
}

/* VJP of prims.where */
static void
rule_prim_where (GradCtx *c, CsStmt *s, CsProxy *g, CsProxy *out, CsValue *a0, CsValue *a1)
{
  CsValue *pred = arg (s, CS_ARG_PRED), *x = arg (s, CS_ARG_A), *y = arg (s, CS_ARG_B);
  if (is_diff (value_tensor (x)))
    put_grad (c, x, where (c, pred, v_p (c, g), v_i (c, 0), g));
  if (is_diff (value_tensor (y)))
    put_grad (c, y, where (c, pred, v_i (c, 0), v_p (c, g), g));
}

/* VJP of prims.sum */
static void
rule_prim_sum (GradCtx *c, CsStmt *s, CsProxy *g, CsProxy *out, CsValue *a0, CsValue *a1)
{
  CsProxy *a = value_tensor (a0);
  gboolean dims[CS_MAX_DIMS];
  if (a == NULL || !read_dims (arg (s, CS_ARG_DIMS), a->rank, FALSE, dims))
    {
      rule_fail (c, s, "bad sum dims");
      return;
    }
  put_grad (c, a0, restore_dims (c, g, dims, a->shape, a->rank));
}

/* VJP of prims.amax */
static void
rule_prim_amax (GradCtx *c, CsStmt *s, CsProxy *g, CsProxy *out, CsValue *a0, CsValue *a1)
{
  /* grad_chooser_backward: g spread evenly over the positions of the maximum */
  CsProxy *a = value_tensor (a0);
  gboolean dims[CS_MAX_DIMS];
  CsProxy *gr, *pr, *loc, *cnt, *t;
  if (a == NULL || !read_dims (arg (s, CS_ARG_DIMS), a->rank, FALSE, dims))
    {
      rule_fail (c, s, "bad amax dims");
      return;
    }
  gr = restore_dims (c, g, dims, a->shape, a->rank);
  pr = restore_dims (c, out, dims, a->shape, a->rank);
  if (gr == NULL || pr == NULL)
    return;
  loc = ew2 (c, CS_OP_LTORCH_EQ, a0, v_p (c, pr));
  cnt = loc ? lsum (c, loc, dims, TRUE) : NULL;
  t = loc ? mul (c, v_p (c, gr), v_p (c, loc)) : NULL;
  t = (t && cnt) ? divide (c, v_p (c, t), v_p (c, cnt)) : NULL;
  if (t != NULL && t->dtype != g->dtype)
    t = convert (c, t, g->dtype);
  put_grad (c, a0, t);
}

/* VJP of ltorch._softmax */
static void
rule_ltorch__softmax (GradCtx *c, CsStmt *s, CsProxy *g, CsProxy *out, CsValue *a0, CsValue *a1)
{
  vjp_softmax (c, s, g, FALSE);
}

/* VJP of ltorch.log_softmax.  With the torchcompile_xentropy executor: Thunder's backward
 * (thunder/core/transforms.py log_softmax_backward) as one statement,
 * ltorch.log_softmax_backward(g, out, dim, a.dtype), which the executor claims; otherwise its
 * formula written out. */
static void
rule_ltorch_log_softmax (GradCtx *c, CsStmt *s, CsProxy *g, CsProxy *out, CsValue *a0, CsValue *a1)
{
  CsProxy *a = value_tensor (a0);

  if (!xentropy_rules (c) || a == NULL || a1 == NULL)
    {
      vjp_softmax (c, s, g, TRUE);
      return;
    }
  put_grad (c, a0, emit_typed (c, CS_OP_LTORCH_LOG_SOFTMAX_BACKWARD, a->dtype, g->shape, g->rank,
                               &g->device,
                               ARGS (POS (v_p (c, g)), POS (v_p (c, out)), POS (a1),
                                     POS (cs_value_new_dtype (c->a, a->dtype, FALSE))), 4));
}

/* VJP of prims.log1p: g / (a + 1) (Thunder: _log1p_prim_grad in thunder/core/transforms.py) */
static void
rule_prim_log1p (GradCtx *c, CsStmt *s, CsProxy *g, CsProxy *out, CsValue *a0, CsValue *a1)
{
  CsProxy *t = add (c, a0, v_i (c, 1));

  put_grad (c, a0, t ? divide (c, v_p (c, g), v_p (c, t)) : NULL);
}

/* VJP of prims.expm1: g * (out + 1.0) (Thunder: g * (result + 1.0)) */
static void
rule_prim_expm1 (GradCtx *c, CsStmt *s, CsProxy *g, CsProxy *out, CsValue *a0, CsValue *a1)
{
  CsProxy *t = add (c, v_p (c, out), v_f (c, 1.0));

  put_grad (c, a0, t ? mul (c, v_p (c, g), v_p (c, t)) : NULL);
}

/* VJP of prims.sinh: g * cosh(a) (Thunder: prims.mul(g, prims.cosh(x))) */
static void
rule_prim_sinh (GradCtx *c, CsStmt *s, CsProxy *g, CsProxy *out, CsValue *a0, CsValue *a1)
{
  CsProxy *t = value_tensor (a0) ? ew1 (c, CS_OP_LTORCH_COSH, value_tensor (a0)) : NULL;

  put_grad (c, a0, t ? mul (c, v_p (c, g), v_p (c, t)) : NULL);
}

/* VJP of prims.cosh: g * sinh(a) (Thunder: prims.mul(g, prims.sinh(x))) */
static void
rule_prim_cosh (GradCtx *c, CsStmt *s, CsProxy *g, CsProxy *out, CsValue *a0, CsValue *a1)
{
  CsProxy *t = value_tensor (a0) ? ew1 (c, CS_OP_LTORCH_SINH, value_tensor (a0)) : NULL;

  put_grad (c, a0, t ? mul (c, v_p (c, g), v_p (c, t)) : NULL);
}

/* ------------------------------------------------------------------------------------------ */
/* Distributed prims (thunder/distributed/prims.py).  all_gather and reduce_scatter are each
 * other's transpose; an all_reduce of a sum (or mean) is its own; wait passes the cotangent to
 * the future it waits for.  synchronize mirrors Thunder's synchronize_backward_rule: the
 * gradient divided by the group size, then all_reduce (REPLICATED, DDP) or reduce_scatter
 * (FULLY_SHARDED, FSDP) with SUM, do_async=True, and its wait; the grad-reduce policy converts
 * the gradient around that collective.  A backward collective of an async forward one is async
 * (a FUTURE output and a wait). */

static CsValue *
dist_sum_op (GradCtx *c, const CsValue *like)
{
  CsDistReduceOp op;

  if (like != NULL && cs_dist_reduce_op (like, &op) && op == CS_DIST_REDUCE_SUM)
    return (CsValue *) like;
  /* Thunder's context-object name of DistributedReduceOps.SUM (thunder/core/trace.py) */
  return cs_value_new_name (c->a, "_DistributedReduceOps_SUM_0");
}

/* Emits collective @id on @x (output @shape, x's dtype and device) with @op_v (NULL: no op
 * argument), @group, do_async (a keyword when @kw_async, as synchronize's backward passes it)
 * and @dim (NULL or None: left out); an async one is followed by its wait.  Returns the tensor
 * (the wait's output when async). */
static CsProxy *
emit_collective (GradCtx *c, CsOpId id, CsProxy *x, CsValue *op_v, CsValue *group,
                 gboolean async, gboolean kw_async, CsValue *dim, const int64_t *shape, guint rank)
{
  CsArg args[5];
  guint n = 0;
  CsProxy *out, *w;

  if (c->error || x == NULL)
    return NULL;
  args[n++] = (CsArg) POS (v_p (c, x));
  if (op_v != NULL)
    args[n++] = (CsArg) POS (op_v);
  args[n++] = (CsArg) POS (group);
  args[n++] = kw_async ? (CsArg) KW ("do_async", cs_value_new_bool (c->a, async))
                       : (CsArg) POS (cs_value_new_bool (c->a, async));
  if (dim != NULL && dim->kind != CS_VALUE_NONE)
    args[n++] = (CsArg) KW ("dim", dim);
  out = emit_typed (c, id, x->dtype, shape, rank, &x->device, args, n);
  if (out == NULL || !async)
    return out;
  out->future = 1;
  w = emit_typed (c, CS_OP_DIST_WAIT, x->dtype, shape, rank, &x->device, ARGS (POS (v_p (c, out))), 1);
  return w;
}

static gboolean
dist_async (const CsStmt *s)
{
  const CsValue *v = cs_stmt_arg (s, CS_ARG_DO_ASYNC);
  return v != NULL && ((v->kind == CS_VALUE_BOOL && v->u.b) || (v->kind == CS_VALUE_INT && v->u.i));
}

static guint
dist_group_size (GradCtx *c, const CsStmt *s)
{
  guint n = cs_dist_stmt_group_size (s);
  return n > 0 ? n : cs_dist_group_size (c->t, cs_stmt_arg (s, CS_ARG_GROUP));
}

/* The shape of @g with dim @d multiplied (@mul) or divided by @n. */
static gboolean
dist_shape (GradCtx *c, const CsStmt *s, const CsProxy *g, int64_t d, guint n, gboolean mul,
            int64_t *shape)
{
  if (g->rank == 0 || d < 0 || d >= (int64_t) g->rank || (!mul && g->shape[d] % n != 0))
    return rule_fail (c, s, "the gradient's shape does not fit the collective");
  memcpy (shape, g->shape, sizeof (int64_t) * g->rank);
  shape[d] = mul ? shape[d] * n : shape[d] / n;
  return TRUE;
}

static int64_t
dist_dim (const CsStmt *s)
{
  const CsValue *d = cs_stmt_arg (s, CS_ARG_DIM);
  return (d && d->kind == CS_VALUE_INT) ? d->u.i : 0;
}

/* VJP of all_gather: reduce_scatter (SUM) of the cotangent along the same dim */
static void
rule_dist_all_gather (GradCtx *c, CsStmt *s, CsProxy *g, CsProxy *out, CsValue *a0, CsValue *a1)
{
  int64_t shape[CS_MAX_DIMS];
  guint n = dist_group_size (c, s);

  if (!dist_shape (c, s, g, dist_dim (s), n, FALSE, shape))
    return;
  put_grad (c, a0, emit_collective (c, CS_OP_DIST_REDUCE_SCATTER, g, dist_sum_op (c, NULL),
                                    cs_stmt_arg (s, CS_ARG_GROUP), dist_async (s), FALSE,
                                    cs_stmt_arg (s, CS_ARG_DIM), shape, g->rank));
}

/* VJP of reduce_scatter: all_gather of the cotangent (SUM; AVG also divides by the size) */
static void
rule_dist_reduce_scatter (GradCtx *c, CsStmt *s, CsProxy *g, CsProxy *out, CsValue *a0, CsValue *a1)
{
  int64_t shape[CS_MAX_DIMS];
  guint n = dist_group_size (c, s);
  CsDistReduceOp op;
  CsProxy *t;

  if (!cs_dist_reduce_op (cs_stmt_arg (s, CS_ARG_OP), &op)
      || (op != CS_DIST_REDUCE_SUM && op != CS_DIST_REDUCE_AVG && n > 1))
    {
      rule_fail (c, s, "a reduce_scatter is differentiated for SUM and AVG only");
      return;
    }
  if (!dist_shape (c, s, g, dist_dim (s), n, TRUE, shape))
    return;
  t = emit_collective (c, CS_OP_DIST_ALL_GATHER, g, NULL, cs_stmt_arg (s, CS_ARG_GROUP),
                       dist_async (s), FALSE, cs_stmt_arg (s, CS_ARG_DIM), shape, g->rank);
  if (t != NULL && op == CS_DIST_REDUCE_AVG && n > 1)
    t = divide (c, v_p (c, t), v_i (c, n));
  put_grad (c, a0, t);
}

/* VJP of all_reduce: the same all_reduce of the cotangent (SUM and AVG; at a world of one
 * every op is the identity) */
static void
rule_dist_all_reduce (GradCtx *c, CsStmt *s, CsProxy *g, CsProxy *out, CsValue *a0, CsValue *a1)
{
  CsDistReduceOp op;
  guint n = dist_group_size (c, s);

  if (!cs_dist_reduce_op (cs_stmt_arg (s, CS_ARG_OP), &op))
    {
      rule_fail (c, s, "op is not a DistributedReduceOps member");
      return;
    }
  if (op != CS_DIST_REDUCE_SUM && op != CS_DIST_REDUCE_AVG)
    {
      if (n > 1)
        rule_fail (c, s, "an all_reduce is differentiated for SUM and AVG only");
      else
        put_grad (c, a0, g);
      return;
    }
  put_grad (c, a0, emit_collective (c, CS_OP_DIST_ALL_REDUCE, g, cs_stmt_arg (s, CS_ARG_OP),
                                    cs_stmt_arg (s, CS_ARG_GROUP), dist_async (s), FALSE, NULL,
                                    g->shape, g->rank));
}

/* VJP of wait and update_bucket_view: the cotangent itself */
static void
rule_dist_identity (GradCtx *c, CsStmt *s, CsProxy *g, CsProxy *out, CsValue *a0, CsValue *a1)
{
  put_grad (c, a0, g);
}

/* VJP of synchronize (Thunder's synchronize_backward_rule, with the grad-reduce policy) */
static void
rule_dist_synchronize (GradCtx *c, CsStmt *s, CsProxy *g, CsProxy *out, CsValue *a0, CsValue *a1)
{
  CsDistParallelType pt;
  CsProxy *a = value_tensor (a0), *t = g;
  guint n = dist_group_size (c, s);
  CsDtype rd = g->dtype;
  int64_t shape[CS_MAX_DIMS];
  CsValue *group = cs_stmt_arg (s, CS_ARG_GROUP);

  if (a == NULL || !cs_dist_parallel_type (cs_stmt_arg (s, CS_ARG_DISTPARALLEL_TYPE), &pt)
      || (pt != CS_DIST_PARALLEL_REPLICATED && pt != CS_DIST_PARALLEL_FULLY_SHARDED))
    {
      rule_fail (c, s, "synchronize with an unexpected distparallel_type");
      return;
    }
  if (c->policy != NULL && cs_dtype_is_float (g->dtype))
    rd = c->policy->grad_reduce == CS_GRAD_REDUCE_F32 ? CS_DTYPE_F32
         : c->policy->grad_reduce == CS_GRAD_REDUCE_BF16 ? CS_DTYPE_BF16 : g->dtype;
  if (rd != g->dtype)
    {
      const char *why = c->why;
      c->why = cs_arena_printf (c->a, "grad-reduce=%s: reduce %s's gradient in %s",
                                cs_policy_get (c->policy, "grad-reduce"), a->name,
                                cs_dtype_short_name (rd));
      t = convert (c, t, rd);
      c->why = why;
    }
  t = t ? divide (c, v_p (c, t), v_i (c, n)) : NULL;
  if (t == NULL)
    return;
  if (pt == CS_DIST_PARALLEL_REPLICATED)
    t = emit_collective (c, CS_OP_DIST_ALL_REDUCE, t, dist_sum_op (c, NULL), group, TRUE, TRUE,
                         NULL, t->shape, t->rank);
  else
    {
      if (!dist_shape (c, s, t, 0, n, FALSE, shape))
        return;
      t = emit_collective (c, CS_OP_DIST_REDUCE_SCATTER, t, dist_sum_op (c, NULL), group, TRUE,
                           TRUE, NULL, shape, t->rank);
    }
  if (t != NULL && rd != a->dtype)
    {
      const char *why = c->why;
      c->why = cs_arena_printf (c->a, "grad-reduce=%s: back to %s's dtype %s",
                                cs_policy_get (c->policy, "grad-reduce"), a->name,
                                cs_dtype_short_name (a->dtype));
      t = convert (c, t, a->dtype);
      c->why = why;
    }
  put_grad (c, a0, t);
}

/* VJP of broadcast: the input of the root rank receives the sum of every rank's cotangent and
 * the other ranks' inputs none (a reduce to the root).  Thunder registers no VJP for it
 * (thunder/distributed/prims.py); a trace does not print the rank it runs on, so castscope
 * differentiates the world of one only, where broadcast is the identity. */
static void
rule_dist_broadcast (GradCtx *c, CsStmt *s, CsProxy *g, CsProxy *out, CsValue *a0, CsValue *a1)
{
  if (dist_group_size (c, s) > 1)
    {
      rule_fail (c, s, "broadcast is differentiated in a world of one only: its VJP (a reduce "
                       "to the root rank) depends on the rank, which the trace does not print");
      return;
    }
  put_grad (c, a0, g);
}

static int64_t
numel_of (const CsProxy *p)
{
  int64_t n = 1;

  for (guint i = 0; i < p->rank; i++)
    n *= p->shape[i];
  return n;
}

/* The flat 1-d slice [@off, @off + numel(@like)) of the 1-d @g, reshaped to @like's shape
 * (prims.slice_prim, prims.reshape): one tensor's part of a bucket. */
static CsProxy *
bucket_part (GradCtx *c, CsProxy *g, int64_t off, const CsProxy *like)
{
  int64_t st = off, en = off + numel_of (like), sd = 1, flat = numel_of (like);
  CsArg args[4];
  CsProxy *part;

  if (c->error)
    return NULL;
  args[0] = (CsArg) POS (v_p (c, g));
  args[1] = (CsArg) POS (cs_value_new_int_seq (c->a, CS_VALUE_LIST, &st, 1));
  args[2] = (CsArg) POS (cs_value_new_int_seq (c->a, CS_VALUE_LIST, &en, 1));
  args[3] = (CsArg) POS (cs_value_new_int_seq (c->a, CS_VALUE_LIST, &sd, 1));
  part = emit_typed (c, CS_OP_PRIM_SLICE_PRIM, g->dtype, &flat, 1, &g->device, args, 4);
  if (part == NULL || (like->rank == 1 && like->shape[0] == flat))
    return part;
  return reshape (c, CS_OP_PRIM_RESHAPE, part, like->shape, like->rank);
}

/* The world size of pack_for_fsdp / unpack_for_fsdp, or 0 (with the error set) when it is not
 * 1: at a larger world "scatter" interleaves the tensors' chunks and "gather" unpacks a buffer
 * n times the tensors' size, which these rules do not transpose. */
static gboolean
fsdp_bucket_world_of_one (GradCtx *c, CsStmt *s)
{
  const CsValue *w = cs_stmt_arg (s, CS_ARG_WORLD_SIZE);

  if (w != NULL && w->kind == CS_VALUE_INT && w->u.i == 1)
    return TRUE;
  return rule_fail (c, s, "pack_for_fsdp / unpack_for_fsdp are differentiated at world_size=1 "
                          "only");
}

/* VJP of pack (and of pack_for_fsdp at world_size 1): the buffer is the 1-d concatenation of
 * the flattened tensors (torchex.py _pack_prim_impl, torch._utils._flatten_dense_tensors), so
 * each tensor's gradient is its slice of the cotangent, reshaped: the transpose of the
 * concatenation. */
static void
rule_dist_pack (GradCtx *c, CsStmt *s, CsProxy *g, CsProxy *out, CsValue *a0, CsValue *a1)
{
  CsValue *tv = arg (s, CS_ARG_TENSORS);
  int64_t off = 0;

  if (cs_op_semantic (s->op)->id == CS_OP_DIST_PACK_FOR_FSDP && !fsdp_bucket_world_of_one (c, s))
    return;
  if (tv == NULL || (tv->kind != CS_VALUE_LIST && tv->kind != CS_VALUE_TUPLE) || g->rank != 1)
    {
      rule_fail (c, s, "bad pack arguments");
      return;
    }
  for (guint k = 0; k < tv->u.seq.n; k++)
    {
      CsProxy *t = value_tensor (tv->u.seq.items[k]);

      if (t == NULL || off + numel_of (t) > g->shape[0])
        {
          rule_fail (c, s, "bad pack operand");
          return;
        }
      put_grad (c, tv->u.seq.items[k], bucket_part (c, g, off, t));
      off += numel_of (t);
    }
}

/* VJP of unpack (and of unpack_for_fsdp at world_size 1), several outputs: each output is its
 * slice of the buffer (torchex.py _unpack_prim_impl copies the bucket's views; the `tensors`
 * argument only gives the shapes and gets no gradient), so the buffer's gradient is the 1-d
 * concatenation of the flattened cotangents (zeros for an output without one):
 * ltorch.cat of prims.reshape. */
static void
vjp_dist_unpack (GradCtx *c, CsStmt *s)
{
  CsValue *bv = arg (s, CS_ARG_BUFFER);
  CsProxy *b = value_tensor (bv);
  g_autoptr(GPtrArray) outs = g_ptr_array_new ();
  CsValue **items;
  gboolean any = FALSE;
  int64_t total = 0;

  if (cs_op_semantic (s->op)->id == CS_OP_DIST_UNPACK_FOR_FSDP && !fsdp_bucket_world_of_one (c, s))
    return;
  cs_stmt_collect_outputs (s, outs);
  for (guint i = 0; i < outs->len && !any; i++)
    any = pmap_contains (c->grads, outs->pdata[i]) || pmap_contains (c->outputs, outs->pdata[i]);
  if (!any || outs->len == 0)
    return;
  if (b == NULL || b->rank != 1)
    {
      rule_fail (c, s, "bad unpack arguments");
      return;
    }
  items = CS_ARENA_NEW_N (c->a, CsValue *, outs->len);
  for (guint i = 0; i < outs->len; i++)
    {
      CsProxy *o = outs->pdata[i];
      CsProxy *g = (pmap_contains (c->grads, o) || pmap_contains (c->outputs, o))
                   ? grad_of (c, o) : NULL;
      int64_t flat = numel_of (o);

      if (g == NULL)
        g = zeros (c, o);
      if (g != NULL && !(g->rank == 1 && g->shape[0] == flat))
        g = reshape (c, CS_OP_PRIM_RESHAPE, g, &flat, 1);
      if (g == NULL)
        return;
      items[i] = v_p (c, g);
      total += flat;
    }
  if (total != b->shape[0])
    {
      rule_fail (c, s, "the outputs do not tile the buffer");
      return;
    }
  put_grad (c, bv, outs->len == 1 ? value_tensor (items[0])
                   : emit_typed (c, CS_OP_LTORCH_CAT, b->dtype, b->shape, 1, &b->device,
                                 ARGS (POS (cs_value_new_seq (c->a, CS_VALUE_LIST, items, outs->len)),
                                       POS (v_i (c, 0))), 2));
}

/* unpack: its own entry in run_rule (several outputs) */
static void
rule_dist_unpack (GradCtx *c, CsStmt *s, CsProxy *g, CsProxy *out, CsValue *a0, CsValue *a1)
{
  vjp_dist_unpack (c, s);
}

/* VJP of synchronize_tensor_parallel_output (Thunder's
 * synchronize_tensor_parallel_output_backward_rule): ROW_PARALLEL_LINEAR and
 * COLUMN_PARALLEL_EMBED all-reduced in the forward and pass the cotangent
 * (FwdAllReduceBwdIdentity); COLUMN_PARALLEL_LINEAR and ROW_PARALLEL_EMBED gathered the last
 * dim and take this rank's chunk of it back (FwdGatherBwdSplitAlongLastDim), which needs the
 * rank: differentiated in a world of one only, where it is the cotangent itself. */
static void
rule_dist_tp_output (GradCtx *c, CsStmt *s, CsProxy *g, CsProxy *out, CsValue *a0, CsValue *a1)
{
  CsDistTpLayerType lt;

  if (!cs_dist_tp_layer_type (cs_stmt_arg (s, CS_ARG_LAYER_TYPE), &lt))
    {
      rule_fail (c, s, "layer_type is not a TensorParallelLayerType member");
      return;
    }
  if ((lt == CS_DIST_TP_COLUMN_PARALLEL_LINEAR || lt == CS_DIST_TP_ROW_PARALLEL_EMBED)
      && dist_group_size (c, s) > 1)
    {
      rule_fail (c, s, "the backward of a gathering synchronize_tensor_parallel_output takes "
                       "this rank's chunk of the last dim: the trace does not print the rank");
      return;
    }
  put_grad (c, a0, g);
}

/* VJP of synchronize_tensor_parallel_input (Thunder's
 * synchronize_tensor_parallel_input_backward_rule): COLUMN_PARALLEL_LINEAR (an identity in the
 * forward) all-reduces the cotangent (SUM, do_async=True, skip_clone=True) and waits;
 * ROW_PARALLEL_LINEAR (this rank's slice of the last dim in the forward) all-gathers it along
 * dim 0 (async, then its wait) and, at a larger world, would put the chunks side by side on
 * the last dim (ltorch.chunk + cat): differentiated in a world of one, where the gather is the
 * cotangent's shape. */
static void
rule_dist_tp_input (GradCtx *c, CsStmt *s, CsProxy *g, CsProxy *out, CsValue *a0, CsValue *a1)
{
  CsDistTpLayerType lt;
  CsValue *group = cs_stmt_arg (s, CS_ARG_GROUP);
  CsProxy *t;

  if (!cs_dist_tp_layer_type (cs_stmt_arg (s, CS_ARG_LAYER_TYPE), &lt)
      || (lt != CS_DIST_TP_COLUMN_PARALLEL_LINEAR && lt != CS_DIST_TP_ROW_PARALLEL_LINEAR))
    {
      rule_fail (c, s, "synchronize_tensor_parallel_input of an unexpected layer_type");
      return;
    }
  if (lt == CS_DIST_TP_COLUMN_PARALLEL_LINEAR)
    {
      t = emit_collective (c, CS_OP_DIST_ALL_REDUCE, g, dist_sum_op (c, NULL), group, TRUE, TRUE,
                           NULL, g->shape, g->rank);
      if (t != NULL)
        {
          /* skip_clone=True on the all_reduce the wait reads */
          CsStmt *ar = g_ptr_array_index (c->bw, c->bw->len - 2);
          CsArg *args = CS_ARENA_NEW_N (c->a, CsArg, ar->n_args + 1);
          memcpy (args, ar->args, sizeof (CsArg) * ar->n_args);
          args[ar->n_args] = (CsArg) KW ("skip_clone", cs_value_new_bool (c->a, TRUE));
          cs_stmt_set_args (c->t, ar, args, ar->n_args + 1);
        }
      put_grad (c, a0, t);
      return;
    }
  if (dist_group_size (c, s) > 1)
    {
      rule_fail (c, s, "the backward of a ROW_PARALLEL_LINEAR synchronize_tensor_parallel_input "
                       "is differentiated in a world of one only");
      return;
    }
  put_grad (c, a0, emit_collective (c, CS_OP_DIST_ALL_GATHER, g, NULL, group, TRUE, FALSE,
                                    v_i (c, 0), g->shape, g->rank));
}

/* Grad's rule table: the VJP of every op castscope differentiates directly (Thunder's
 * register_grad table for prims plus the ltorch rules and augmented-forward/backward pairs named
 * in reference 5.1), indexed by the op's semantic id.  Each op whose registry row says DIFF_VJP
 * has its entry here (tests/test-core-registry.c checks both ways and each rule against finite
 * differences). */
typedef void (*VjpRule) (GradCtx *c, CsStmt *s, CsProxy *g, CsProxy *out, CsValue *a0, CsValue *a1);

/* prims.var_mean: its own entry in run_rule (two outputs) */
static void
rule_prim_var_mean (GradCtx *c, CsStmt *s, CsProxy *g, CsProxy *out, CsValue *a0, CsValue *a1)
{
  vjp_var_mean (c, s);
}

static void rule_ltorch_split (GradCtx *c, CsStmt *s, CsProxy *g, CsProxy *out, CsValue *a0,
                               CsValue *a1);

static const VjpRule vjp_rules[CS_N_OPS] = {
  [CS_OP_PRIM_CONVERT_ELEMENT_TYPE] = rule_prim_convert_element_type,
  [CS_OP_PRIM_BROADCAST_IN_DIM] = rule_prim_broadcast_in_dim,
  [CS_OP_PRIM_RESHAPE] = rule_prim_reshape,
  [CS_OP_PRIM_TRANSPOSE] = rule_prim_transpose,
  [CS_OP_PRIM_SQUEEZE] = rule_prim_squeeze,
  [CS_OP_PRIM_SLICE_PRIM] = rule_prim_slice_prim,
  [CS_OP_PRIM_PAD] = rule_prim_pad,
  [CS_OP_PRIM_CAT] = rule_prim_cat,
  [CS_OP_PRIM_TAKE] = rule_prim_take,
  [CS_OP_PRIM_TAKE_ALONG_AXIS] = rule_prim_take_along_axis,
  [CS_OP_PRIM_SHALLOW_COPY] = rule_prim_shallow_copy,
  [CS_OP_PRIM_CLONE] = rule_prim_shallow_copy,
  [CS_OP_PRIM_STRIDE_ORDER] = rule_prim_shallow_copy,
  [CS_OP_PRIM_NEG] = rule_prim_neg,
  [CS_OP_PRIM_EXP] = rule_prim_exp,
  [CS_OP_PRIM_LOG] = rule_prim_log,
  [CS_OP_PRIM_TANH] = rule_prim_tanh,
  [CS_OP_PRIM_ERF] = rule_prim_erf,
  [CS_OP_PRIM_RSQRT] = rule_prim_rsqrt,
  [CS_OP_PRIM_SQRT] = rule_prim_sqrt,
  [CS_OP_PRIM_RECIPROCAL] = rule_prim_reciprocal,
  [CS_OP_PRIM_ADD] = rule_prim_add,
  [CS_OP_PRIM_SUB] = rule_prim_sub,
  [CS_OP_PRIM_MUL] = rule_prim_mul,
  [CS_OP_PRIM_DIV] = rule_prim_div,
  [CS_OP_PRIM_POW] = rule_prim_pow,
  [CS_OP_PRIM_WHERE] = rule_prim_where,
  [CS_OP_PRIM_SUM] = rule_prim_sum,
  [CS_OP_PRIM_AMAX] = rule_prim_amax,
  [CS_OP_PRIM_MATMUL] = rule_prim_matmul,
  [CS_OP_PRIM_LINEAR] = rule_prim_linear,
  [CS_OP_LTORCH_SUM] = rule_ltorch_sum,
  [CS_OP_LTORCH_SILU] = rule_ltorch_silu,
  [CS_OP_LTORCH__SOFTMAX] = rule_ltorch__softmax,
  [CS_OP_LTORCH_LOG_SOFTMAX] = rule_ltorch_log_softmax,
  [CS_OP_LTORCH_EMBEDDING] = rule_ltorch_embedding,
  [CS_OP_PRIM_VAR_MEAN] = rule_prim_var_mean,
  [CS_OP_LTORCH_SPLIT] = rule_ltorch_split,
  [CS_OP_PRIM_LOG1P] = rule_prim_log1p,
  [CS_OP_PRIM_EXPM1] = rule_prim_expm1,
  [CS_OP_PRIM_SINH] = rule_prim_sinh,
  [CS_OP_PRIM_COSH] = rule_prim_cosh,
  /* thunder/distributed/prims.py */
  [CS_OP_DIST_ALL_GATHER] = rule_dist_all_gather,
  [CS_OP_DIST_REDUCE_SCATTER] = rule_dist_reduce_scatter,
  [CS_OP_DIST_ALL_REDUCE] = rule_dist_all_reduce,
  [CS_OP_DIST_WAIT] = rule_dist_identity,
  [CS_OP_DIST_UPDATE_BUCKET_VIEW] = rule_dist_identity,
  [CS_OP_DIST_SYNCHRONIZE] = rule_dist_synchronize,
  [CS_OP_DIST_BROADCAST] = rule_dist_broadcast,
  [CS_OP_DIST_PACK] = rule_dist_pack,
  [CS_OP_DIST_PACK_FOR_FSDP] = rule_dist_pack,
  [CS_OP_DIST_UNPACK] = rule_dist_unpack,
  [CS_OP_DIST_UNPACK_FOR_FSDP] = rule_dist_unpack,
  [CS_OP_DIST_SYNCHRONIZE_TENSOR_PARALLEL_OUTPUT] = rule_dist_tp_output,
  [CS_OP_DIST_SYNCHRONIZE_TENSOR_PARALLEL_INPUT] = rule_dist_tp_input,
};

gboolean
_cs_vjp_exists (CsOpId id)
{
  return (guint) id < CS_N_OPS && vjp_rules[id] != NULL;
}

/* ltorch.split's backward (thunder/core/transforms.py split_aug_fwd / split_backward): the
 * split itself is the forward; its backward is ltorch.cat(grads, dim), a piece without a
 * gradient given as zeros of its shape. */
static void
vjp_split (GradCtx *c, CsStmt *s)
{
  CsValue *av = arg (s, CS_ARG_A), *dv = arg (s, CS_ARG_DIM);
  CsProxy *a = value_tensor (av);
  g_autoptr(GPtrArray) outs = g_ptr_array_new ();
  CsValue **items;
  gboolean any = FALSE;
  int64_t dim = 0;

  if (a == NULL || (dv != NULL && dv->kind != CS_VALUE_INT))
    {
      rule_fail (c, s, "bad split arguments");
      return;
    }
  if (dv != NULL)
    dim = dv->u.i;
  cs_stmt_collect_outputs (s, outs);
  for (guint i = 0; i < outs->len && !any; i++)
    any = pmap_contains (c->grads, outs->pdata[i]) || pmap_contains (c->outputs, outs->pdata[i]);
  if (!any || outs->len == 0)
    return;
  items = CS_ARENA_NEW_N (c->a, CsValue *, outs->len);
  for (guint i = 0; i < outs->len; i++)
    {
      CsProxy *o = outs->pdata[i];
      CsProxy *g = (pmap_contains (c->grads, o) || pmap_contains (c->outputs, o))
                   ? grad_of (c, o) : NULL;
      if (g == NULL)
        g = zeros (c, o);
      if (g == NULL)
        return;
      items[i] = v_p (c, g);
    }
  put_grad (c, av, emit_typed (c, CS_OP_LTORCH_CAT, a->dtype, a->shape, a->rank, &a->device,
                               ARGS (POS (cs_value_new_seq (c->a, CS_VALUE_LIST, items, outs->len)),
                                     POS (v_i (c, dim))), 2));
}

/* ltorch.split: its own entry in run_rule (several outputs) */
static void
rule_ltorch_split (GradCtx *c, CsStmt *s, CsProxy *g, CsProxy *out, CsValue *a0, CsValue *a1)
{
  vjp_split (c, s);
}

/* ------------------------------------------------------------------------------------------ */
/* Executor grad transforms (issue 18)                                                         */

/* nll_loss's backward (thunder/core/transforms.py nll_loss_backward):
 * ltorch.nll_loss_backward(g, a, target, weight, reduction, ignore_index, total_weight), typed
 * like g with a's shape; no gradient for target and weight. */
static void
vjp_nll_loss (GradCtx *c, const VjpRecord *r)
{
  CsStmt *s = r->stmt;
  CsValue *av = arg (s, CS_ARG_A), *tv = arg (s, CS_ARG_TARGET), *wv = arg (s, CS_ARG_WEIGHT);
  CsValue *iv = arg (s, CS_ARG_IGNORE_INDEX), *rv = arg (s, CS_ARG_REDUCTION);
  CsProxy *a = value_tensor (av), *out = cs_stmt_get_output (s), *g;

  if (a == NULL || out == NULL || tv == NULL)
    {
      rule_fail (c, s, "bad nll_loss arguments");
      return;
    }
  if (!pmap_contains (c->grads, out) && !pmap_contains (c->outputs, out))
    return;
  g = grad_of (c, out);
  if (g == NULL)
    return;
  put_grad (c, av, emit_typed (c, CS_OP_LTORCH_NLL_LOSS_BACKWARD, g->dtype, a->shape, a->rank,
                               &g->device,
                               ARGS (POS (v_p (c, g)), POS (av), POS (tv),
                                     POS (wv ? wv : cs_value_new_none (c->a)),
                                     POS (rv ? rv : cs_value_new_string (c->a, "mean")),
                                     POS (iv ? iv : v_i (c, -100)),
                                     POS (r->aux ? v_p (c, r->aux) : cs_value_new_none (c->a))), 7));
}

/* TRUE for the forward statements of the sdpa executor (records of its grad transform). */
static gboolean
is_sdpa_executor_forward (CsOpId id)
{
  return id == CS_OP_EX_SDPAFX_GRAD_FORWARD_SCALED_DOT_PRODUCT_EFFICIENT_ATTENTION
         || id == CS_OP_EX_SDPAEX_GRAD_FORWARD_SCALED_DOT_PRODUCT_EFFICIENT_ATTENTION;
}

/* The backward half of the sdpa executor's grad transform (sdpaex.py
 * `_scaled_dot_product_attention_grad`): the gradient of the primal output goes into the
 * executor's backward statement, whose outputs are put on query, key, value (and the mask). */
static void
vjp_sdpa_executor (GradCtx *c, CsStmt *s)
{
  const CsValue *o0 = (s->out && s->out->kind == CS_VALUE_TUPLE && s->out->u.seq.n > 0)
                      ? s->out->u.seq.items[0] : NULL;
  CsProxy *out = o0 && o0->kind == CS_VALUE_PROXY ? o0->u.proxy : NULL;
  CsProxy *g, *grads[4];
  CsStmt *bw;

  if (out == NULL)
    {
      rule_fail (c, s, "expected the attention output first");
      return;
    }
  if (!pmap_contains (c->grads, out) && !pmap_contains (c->outputs, out))
    return;
  g = grad_of (c, out);
  if (g == NULL)
    return;
  bw = cs_executor_sdpa_backward (c->t, s, g, c->names_free_from, grads);
  if (bw == NULL)
    {
      rule_fail (c, s, "not a statement of the sdpa executor");
      return;
    }
  bw->backward = 1;
  bw->why = c->why;
  bw->origin = c->origin;
  g_ptr_array_add (c->bw, bw);
  for (guint i = 0; i < 3; i++)
    put_grad (c, s->args[i].value, grads[i]);
  if (grads[3] != NULL)
    put_grad (c, s->args[3].value, grads[3]);
}

void
_cs_vjp_run (GradCtx *c, const VjpRecord *r)
{
  CsStmt *s = r->stmt;
  CsProxy *out, *g;
  CsValue *a0 = nth_arg (s, 0), *a1 = nth_arg (s, 1);

  if (r->rule == CS_OP_PRIM_VAR_MEAN)
    {
      c->origin = s->origin ? s->origin : s->id;
      c->why = vjp_why (c, s);
      vjp_var_mean (c, s);
      return;
    }
  if (r->rule == CS_OP_LTORCH_SPLIT)
    {
      c->origin = s->origin ? s->origin : s->id;
      c->why = vjp_why (c, s);
      vjp_split (c, s);
      return;
    }
  if (r->rule == CS_OP_DIST_UNPACK || r->rule == CS_OP_DIST_UNPACK_FOR_FSDP)
    {
      c->origin = s->origin ? s->origin : s->id;
      c->why = vjp_why (c, s);
      vjp_dist_unpack (c, s);
      return;
    }
  if (r->rule == CS_OP_LTORCH_NLL_LOSS)
    {
      c->origin = s->origin ? s->origin : s->id;
      c->why = vjp_why (c, s);
      vjp_nll_loss (c, r);
      return;
    }
  if (is_sdpa_executor_forward (r->rule))
    {
      c->origin = s->origin ? s->origin : s->id;
      c->why = "grad: the sdpa executor's grad transform (thunder/executors/sdpaex.py)";
      vjp_sdpa_executor (c, s);
      return;
    }
  c->origin = s->origin ? s->origin : s->id;
  c->why = vjp_why (c, s);
  out = cs_stmt_get_output (s);
  if (out == NULL)
    {
      rule_fail (c, s, "expected one output");
      return;
    }
  /* Thunder skips a backward none of whose outputs has a gradient */
  if (!pmap_contains (c->grads, out) && !pmap_contains (c->outputs, out))
    return;
  g = grad_of (c, out);
  if (g == NULL)
    return;

  vjp_rules[r->rule] (c, s, g, out, a0, a1);
}
