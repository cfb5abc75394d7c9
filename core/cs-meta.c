/* cs-meta.c: shape and dtype inference for prims and ltorch ops.
 *
 * Every rule cites the Thunder function it mirrors (commit 1e22aacb1):
 * prims: thunder/core/prims.py (`_elementwise_*_meta_factory`, `broadcast_in_dim_meta`,
 * `reshape_meta`, `slice_meta`, `_reduction_meta`, `matmul_meta`, `linear_meta`, `take_meta` ...);
 * ltorch: thunder/torch/__init__.py and the clang helpers it calls (thunder/clang/__init__.py).
 */
#include "cs-config.h"

#include "cs-meta.h"
#include "cs-dist.h"

#include "cs-ops.h"
#include "cs-ops-args.h"
#include "cs-print.h"
#include "cs-promote.h"

#include <math.h>
#include <stdarg.h>
#include <string.h>

G_DEFINE_QUARK (cs-meta-error-quark, cs_meta_error)

#define MAX_OUT 64

typedef struct
{
  CsTrace      *trace;    /* trace owning the statement */
  const CsStmt *stmt;     /* statement being inferred */
  const CsOp   *op;       /* semantic op (alias_of followed) */
  CsMetaType   *out;      /* inferred outputs */
  guint         max_out;  /* capacity of out */
  guint         n_out;    /* outputs inferred so far */
} Meta;

/* ------------------------------------------------------------------------------------------ */
/* Formatting and errors                                                                       */

char *
cs_meta_format_shape (const int64_t *shape, guint rank)
{
  GString *s = g_string_new ("[");

  for (guint i = 0; i < rank; i++)
    g_string_append_printf (s, i ? ", %" G_GINT64_FORMAT : "%" G_GINT64_FORMAT, shape[i]);
  g_string_append_c (s, ']');
  return g_string_free (s, FALSE);
}

static char *
format_type (CsDtype dtype, const int64_t *shape, guint rank)
{
  g_autofree char *sh = cs_meta_format_shape (shape, rank);

  return g_strdup_printf ("%s%s", cs_dtype_short_name (dtype), sh);
}

static char *
format_proxy_shape (const CsProxy *p)
{
  return cs_meta_format_shape (p->shape, p->rank);
}

static gboolean G_GNUC_PRINTF (4, 5)
meta_fail (const Meta *m, GError **error, CsMetaError code, const char *fmt, ...)
{
  g_autofree char *msg = NULL;
  va_list ap;

  va_start (ap, fmt);
  msg = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  if (m->stmt->line > 0)
    g_set_error (error, CS_META_ERROR, code, "line %u: %s: %s", m->stmt->line, m->stmt->callee, msg);
  else
    g_set_error (error, CS_META_ERROR, code, "%s: %s", m->stmt->callee, msg);
  return FALSE;
}

/* ------------------------------------------------------------------------------------------ */
/* Shape helpers                                                                               */

gboolean
cs_meta_canonicalize_dim (guint rank, int64_t dim, guint *out)
{
  int64_t r = rank == 0 ? 1 : rank;     /* wrap_scalar: a 0-d tensor accepts -1 and 0 */

  if (dim < -r || dim >= r)
    return FALSE;
  *out = (guint) (dim < 0 ? dim + r : dim);
  return TRUE;
}

gboolean
cs_meta_broadcast_shapes (const int64_t *a, guint rank_a, const int64_t *b, guint rank_b,
                          int64_t *out, guint *rank_out)
{
  guint r = MAX (rank_a, rank_b);

  for (guint i = 0; i < r; i++)
    {
      int64_t da = i < rank_a ? a[rank_a - 1 - i] : 1;
      int64_t db = i < rank_b ? b[rank_b - 1 - i] : 1;
      int64_t d;

      if (da == db || db == 1)
        d = da;
      else if (da == 1)
        d = db;
      else
        return FALSE;
      out[r - 1 - i] = d;
    }
  *rank_out = r;
  return TRUE;
}

/* Overflow-checked arithmetic on dim extents (extents stay below 2^62). */
#define DIM_LIMIT (G_GINT64_CONSTANT (1) << 62)

static gboolean
mul_ok (int64_t a, int64_t b, int64_t *out)
{
  if (a < 0 || b < 0 || (a != 0 && b > DIM_LIMIT / a))
    return FALSE;
  *out = a * b;
  return TRUE;
}

static gboolean
add_ok (int64_t a, int64_t b, int64_t *out)
{
  if ((b > 0 && a > DIM_LIMIT - b) || (b < 0 && a < -DIM_LIMIT - b))
    return FALSE;
  *out = a + b;
  return TRUE;
}

/* ceil(n / step) for 0 <= n, step >= 1, without overflow */
static int64_t
ceil_div (int64_t n, int64_t step)
{
  return n / step + (n % step != 0);
}

static gboolean
same_shape (const int64_t *a, guint ra, const int64_t *b, guint rb)
{
  if (ra != rb)
    return FALSE;
  for (guint i = 0; i < ra; i++)
    if (a[i] != b[i] && a[i] >= 0 && b[i] >= 0)   /* -1 = symbolic dim: matches anything */
      return FALSE;
  return TRUE;
}

static CsDtype
real_dtype (CsDtype d)
{
  switch (d)
    {
    case CS_DTYPE_C32: return CS_DTYPE_F16;
    case CS_DTYPE_C64: return CS_DTYPE_F32;
    case CS_DTYPE_C128: return CS_DTYPE_F64;
    default: return d;
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Argument access                                                                             */

static CsValue *
arg (const Meta *m, guint i, const char *kw)
{
  return cs_stmt_get_arg (m->stmt, i, kw);
}

static guint
n_positional (const CsStmt *stmt)
{
  guint n = 0;

  for (guint k = 0; k < stmt->n_args; k++)
    if (stmt->args[k].name == NULL)
      n++;
  return n;
}

static gboolean
value_is_none (const CsValue *v)
{
  return v == NULL || v->kind == CS_VALUE_NONE;
}

static gboolean
value_is_tensor (const CsValue *v)
{
  return v != NULL && v->kind == CS_VALUE_PROXY && v->u.proxy->kind == CS_PROXY_TENSOR;
}

/* A Python number (literal or number proxy): its Python type. */
static gboolean
value_number (const CsValue *v, CsPyType *pytype, double *val)
{
  double dummy;

  if (val == NULL)
    val = &dummy;
  if (v == NULL)
    return FALSE;
  switch (v->kind)
    {
    case CS_VALUE_BOOL:
      *pytype = CS_PYTYPE_BOOL;
      *val = v->u.b;
      return TRUE;
    case CS_VALUE_INT:
      *pytype = CS_PYTYPE_INT;
      *val = (double) v->u.i;
      return TRUE;
    case CS_VALUE_FLOAT:
      *pytype = CS_PYTYPE_FLOAT;
      *val = v->u.f;
      return TRUE;
    case CS_VALUE_COMPLEX:
      *pytype = CS_PYTYPE_COMPLEX;
      *val = v->u.c.re;
      return TRUE;
    case CS_VALUE_PROXY:
      if (v->u.proxy->kind != CS_PROXY_NUMBER)
        return FALSE;
      switch (v->u.proxy->dtype)
        {
        case CS_DTYPE_B8: *pytype = CS_PYTYPE_BOOL; break;
        case CS_DTYPE_I64: *pytype = CS_PYTYPE_INT; break;
        case CS_DTYPE_C128: *pytype = CS_PYTYPE_COMPLEX; break;
        default: *pytype = CS_PYTYPE_FLOAT; break;
        }
      *val = 0;
      if (v->u.proxy->has_value && v->u.proxy->value)
        return value_number (v->u.proxy->value, pytype, val);
      return TRUE;
    default:
      return FALSE;
    }
}

static gboolean
value_int (const CsValue *v, int64_t *out)
{
  if (v == NULL)
    return FALSE;
  if (v->kind == CS_VALUE_INT)
    {
      *out = v->u.i;
      return TRUE;
    }
  if (v->kind == CS_VALUE_PROXY && v->u.proxy->kind == CS_PROXY_NUMBER && v->u.proxy->has_value
      && v->u.proxy->value && v->u.proxy->value->kind == CS_VALUE_INT)
    {
      *out = v->u.proxy->value->u.i;
      return TRUE;
    }
  return FALSE;
}


/* @v, argument @i (keyword @kw, or none), as a typed tensor; fails naming it. */
static gboolean
check_tensor (const Meta *m, const CsValue *v, guint i, const char *kw, CsProxy **out,
              GError **error)
{
  if (v == NULL)
    return meta_fail (m, error, CS_META_ERROR_ARGS, "missing tensor argument %u%s%s", i,
                      kw ? " / " : "", kw ? kw : "");
  if (v->kind != CS_VALUE_PROXY || v->u.proxy->kind != CS_PROXY_TENSOR)
    return meta_fail (m, error, CS_META_ERROR_ARGS, "argument %u%s%s is not a tensor", i,
                      kw ? " / " : "", kw ? kw : "");
  if (!v->u.proxy->typed)
    return meta_fail (m, error, CS_META_ERROR_ARGS, "input %s has no type", v->u.proxy->name);
  *out = v->u.proxy;
  return TRUE;
}

static gboolean
get_tensor (const Meta *m, guint i, const char *kw, CsProxy **out, GError **error)
{
  return check_tensor (m, arg (m, i, kw), i, kw, out, error);
}

/* Argument @name of the statement's schema (cs-ops-list.h). */
static CsValue *
sarg (const Meta *m, CsArgName name)
{
  return cs_stmt_arg (m->stmt, name);
}

/* The schema's tensor argument @name (its position and keyword name it in errors). */
static gboolean
get_arg_tensor (const Meta *m, CsArgName name, CsProxy **out, GError **error)
{
  guint pos = G_MAXUINT;

  cs_op_find_arg (m->op, name, &pos);
  return check_tensor (m, sarg (m, name), pos, cs_arg_name (name), out, error);
}

/* The schema's argument @name: a tensor or None. */
static gboolean
get_opt_arg_tensor (const Meta *m, CsArgName name, CsProxy **out, GError **error)
{
  *out = NULL;
  if (value_is_none (sarg (m, name)))
    return TRUE;
  return get_arg_tensor (m, name, out, error);
}

/* The schema's int argument @name, @dflt when absent. */
static gboolean
get_int_named (const Meta *m, CsArgName name, int64_t dflt, int64_t *out, GError **error)
{
  CsValue *v = sarg (m, name);

  if (v == NULL)
    {
      *out = dflt;
      return TRUE;
    }
  if (!value_int (v, out))
    return meta_fail (m, error, CS_META_ERROR_ARGS, "argument %s must be an int", cs_arg_name (name));
  return TRUE;
}

/* The schema's bool argument @name (an int counts), @dflt when absent or neither. */
static gboolean
get_bool_named (const Meta *m, CsArgName name, gboolean dflt, gboolean *out)
{
  CsValue *v = sarg (m, name);

  if (v != NULL && v->kind == CS_VALUE_BOOL)
    *out = v->u.b;
  else if (v != NULL && v->kind == CS_VALUE_INT)
    *out = v->u.i != 0;
  else
    *out = dflt;
  return TRUE;
}

static gboolean
get_int_seq (const Meta *m, const CsValue *v, const char *what, int64_t *out, guint *n,
             GError **error)
{
  if (!cs_value_get_int_seq (v, out, CS_MAX_DIMS, n))
    return meta_fail (m, error, CS_META_ERROR_ARGS, "%s must be a sequence of at most %d ints",
                      what, CS_MAX_DIMS);
  return TRUE;
}

/* Shapes passed as varargs (`reshape(a, 2, 64, 128)`) or as one sequence (`reshape(a, (2, 64))`),
 * Thunder's utils.extract_shape_from_varargs. */
static gboolean
get_varargs_shape (const Meta *m, guint first, int64_t *out, guint *n, GError **error)
{
  guint np = n_positional (m->stmt);
  CsValue *v0 = arg (m, first, NULL);

  if (np == first + 1 && v0 != NULL && (v0->kind == CS_VALUE_TUPLE || v0->kind == CS_VALUE_LIST))
    return get_int_seq (m, v0, "shape", out, n, error);
  if (np < first)
    return meta_fail (m, error, CS_META_ERROR_ARGS, "missing shape");
  if (np - first > CS_MAX_DIMS)
    return meta_fail (m, error, CS_META_ERROR_SHAPE, "more than %d dims", CS_MAX_DIMS);
  *n = np - first;
  for (guint i = 0; i < *n; i++)
    if (!value_int (arg (m, first + i, NULL), &out[i]))
      return meta_fail (m, error, CS_META_ERROR_ARGS, "shape entry %u is not an int", i);
  return TRUE;
}

static gboolean
canon_dim (const Meta *m, guint rank, int64_t dim, guint *out, GError **error)
{
  if (!cs_meta_canonicalize_dim (rank, dim, out))
    return meta_fail (m, error, CS_META_ERROR_SHAPE,
                      "dim %" G_GINT64_FORMAT " is out of range for a tensor of rank %u", dim, rank);
  return TRUE;
}

/* ------------------------------------------------------------------------------------------ */
/* Output helpers                                                                              */

static CsMetaType *
push_out (Meta *m)
{
  CsMetaType *t;

  g_assert (m->n_out < m->max_out);
  t = &m->out[m->n_out++];
  memset (t, 0, sizeof *t);
  return t;
}

static gboolean
out_tensor (Meta *m, CsDtype dtype, const int64_t *shape, guint rank, const CsDevice *device,
            GError **error)
{
  CsMetaType *t;

  if (rank > CS_MAX_DIMS)
    return meta_fail (m, error, CS_META_ERROR_SHAPE, "result has more than %d dims", CS_MAX_DIMS);
  if (m->n_out >= m->max_out)
    return meta_fail (m, error, CS_META_ERROR_ARGS, "too many outputs");
  t = push_out (m);
  t->kind = CS_PROXY_TENSOR;
  t->dtype = dtype;
  t->rank = rank;
  if (rank)
    memcpy (t->shape, shape, sizeof (int64_t) * rank);
  t->device = device ? *device : (CsDevice) { CS_DEVICE_CUDA, 0 };
  return TRUE;
}

static gboolean
out_like (Meta *m, const CsProxy *p, CsDtype dtype, GError **error)
{
  return out_tensor (m, dtype, p->shape, p->rank, &p->device, error);
}

static gboolean
out_number (Meta *m, CsPyType pytype)
{
  CsMetaType *t;

  if (m->n_out >= m->max_out)
    return FALSE;
  t = push_out (m);
  t->kind = CS_PROXY_NUMBER;
  t->dtype = cs_pytype_dtype (pytype);
  return TRUE;
}

/* ------------------------------------------------------------------------------------------ */
/* Elementwise                                                                                  */

/* One operand of an elementwise op: a tensor or a Python number. */
typedef struct
{
  const CsValue *v;       /* the argument */
  CsProxy       *tensor;  /* non-NULL for a tensor */
  CsPyType       pytype;  /* for numbers */
} Operand;

static gboolean
get_operand (const Meta *m, guint i, const char *kw, Operand *op, GError **error)
{
  CsValue *v = arg (m, i, kw);

  memset (op, 0, sizeof *op);
  op->v = v;
  if (v == NULL)
    return meta_fail (m, error, CS_META_ERROR_ARGS, "missing operand %u", i);
  if (value_is_tensor (v))
    {
      if (!v->u.proxy->typed)
        return meta_fail (m, error, CS_META_ERROR_ARGS, "input %s has no type", v->u.proxy->name);
      op->tensor = v->u.proxy;
      return TRUE;
    }
  if (value_number (v, &op->pytype, NULL))
    return TRUE;
  return meta_fail (m, error, CS_META_ERROR_ARGS, "operand %u is neither a tensor nor a number", i);
}

static CsDtypeRef
operand_ref (const Operand *op)
{
  if (op->tensor)
    return cs_promote_arg_tensor (op->tensor->dtype, op->tensor->rank);
  return cs_promote_arg_number (op->pytype);
}

/* Broadcast shape of the tensor operands (PyTorch rules); device of the first tensor. */
static gboolean
broadcast_operands (const Meta *m, const Operand *ops, guint n, int64_t *shape, guint *rank,
                    CsDevice *device, gboolean *any_tensor, GError **error)
{
  *rank = 0;
  *any_tensor = FALSE;
  for (guint i = 0; i < n; i++)
    {
      int64_t tmp[CS_MAX_DIMS];
      guint r;

      if (!ops[i].tensor)
        continue;
      if (!*any_tensor)
        {
          *device = ops[i].tensor->device;
          *any_tensor = TRUE;
        }
      if (!cs_meta_broadcast_shapes (shape, *rank, ops[i].tensor->shape, ops[i].tensor->rank, tmp, &r))
        {
          g_autofree char *s1 = cs_meta_format_shape (shape, *rank);
          g_autofree char *s2 = format_proxy_shape (ops[i].tensor);
          return meta_fail (m, error, CS_META_ERROR_SHAPE, "shapes %s and %s cannot be broadcast",
                            s1, s2);
        }
      memcpy (shape, tmp, sizeof (int64_t) * r);
      *rank = r;
    }
  return TRUE;
}

/* ltorch elementwise op with a promotion kind: broadcast + promotion result dtype. */
static gboolean
meta_ltorch_elementwise (Meta *m, guint n_operands, CsPromoKind kind, GError **error)
{
  Operand ops[3];
  CsDtypeRef refs[3], result;
  int64_t shape[CS_MAX_DIMS];
  guint rank;
  CsDevice device = { CS_DEVICE_CUDA, 0 };
  gboolean any_tensor;
  GError *perr = NULL;

  for (guint i = 0; i < n_operands; i++)
    {
      if (!get_operand (m, i, NULL, &ops[i], error))
        return FALSE;
      refs[i] = operand_ref (&ops[i]);
    }
  if (!broadcast_operands (m, ops, n_operands, shape, &rank, &device, &any_tensor, error))
    return FALSE;
  if (!cs_promote_elementwise (refs, n_operands, kind, NULL, &result, &perr))
    {
      meta_fail (m, error, CS_META_ERROR_DTYPE, "%s", perr->message);
      g_error_free (perr);
      return FALSE;
    }
  if (!any_tensor)
    return out_number (m, result.pytype ? result.pytype : CS_PYTYPE_FLOAT);
  return out_tensor (m, result.dtype, shape, rank, &device, error);
}

/* prims elementwise: tensors share shape and dtype; numbers allowed (prims.py
 * `_elementwise_binary_meta_factory`). */
static gboolean
meta_prim_elementwise (Meta *m, guint n_operands, GError **error)
{
  Operand ops[3];
  const CsProxy *first = NULL;
  CsDtype dtype;
  guint start = 0;

  for (guint i = 0; i < n_operands; i++)
    if (!get_operand (m, i, NULL, &ops[i], error))
      return FALSE;
  if (m->op->ew3 != NULL && (m->op->ew3->flags & CS_EW_PREDICATE))
    {
      if (ops[0].tensor && ops[0].tensor->dtype != CS_DTYPE_B8)
        return meta_fail (m, error, CS_META_ERROR_DTYPE, "the predicate %s is %s, not bool",
                          ops[0].tensor->name, cs_dtype_short_name (ops[0].tensor->dtype));
      start = 1;
    }
  for (guint i = 0; i < n_operands; i++)
    {
      if (!ops[i].tensor)
        continue;
      if (first == NULL)
        {
          first = ops[i].tensor;
          continue;
        }
      if (!same_shape (first->shape, first->rank, ops[i].tensor->shape, ops[i].tensor->rank))
        {
          g_autofree char *s1 = format_proxy_shape (first);
          g_autofree char *s2 = format_proxy_shape (ops[i].tensor);
          return meta_fail (m, error, CS_META_ERROR_SHAPE,
                            "operands %s %s and %s %s must have the same shape (prims do not broadcast)",
                            first->name, s1, ops[i].tensor->name, s2);
        }
    }
  if (first == NULL)
    {
      /* Number x number: a number result (Thunder computes it eagerly). */
      return out_number (m, ops[start].pytype);
    }
  /* Dtype: the first non-predicate tensor; the others must agree. */
  {
    const CsProxy *dt = NULL;

    for (guint i = start; i < n_operands; i++)
      if (ops[i].tensor)
        {
          if (dt == NULL)
            dt = ops[i].tensor;
          else if (ops[i].tensor->dtype != dt->dtype)
            return meta_fail (m, error, CS_META_ERROR_DTYPE,
                              "operands %s (%s) and %s (%s) must have the same dtype",
                              dt->name, cs_dtype_short_name (dt->dtype), ops[i].tensor->name,
                              cs_dtype_short_name (ops[i].tensor->dtype));
        }
    if (dt != NULL)
      dtype = dt->dtype;
    else
      dtype = cs_pytype_dtype (ops[start].pytype);
    for (guint i = start; i < n_operands; i++)
      if (!ops[i].tensor && ops[i].pytype == CS_PYTYPE_FLOAT && cs_dtype_is_exact (dtype))
        return meta_fail (m, error, CS_META_ERROR_DTYPE,
                          "a float number cannot be combined with a %s tensor in a prim",
                          cs_dtype_short_name (dtype));
  }
  switch (m->op->promo)
    {
    case CS_PROMO_ALWAYS_BOOL:
      dtype = CS_DTYPE_B8;
      break;
    case CS_PROMO_COMPLEX_TO_FLOAT:
      dtype = real_dtype (dtype);
      break;
    default:
      break;
    }
  return out_like (m, first, dtype, error);
}

/* ------------------------------------------------------------------------------------------ */
/* Reductions                                                                                  */

/* Reads a `dim` argument: None / () / [] = all dims; an int; a sequence.  Sets mask. */
static gboolean
reduction_dims (const Meta *m, const CsProxy *a, const CsValue *v, gboolean *mask, GError **error)
{
  int64_t dims[CS_MAX_DIMS];
  guint n = 0;

  memset (mask, 0, sizeof (gboolean) * CS_MAX_DIMS);
  if (!value_is_none (v))
    {
      if (!get_int_seq (m, v, "dim", dims, &n, error))
        return FALSE;
    }
  if (n == 0)
    {
      for (guint i = 0; i < a->rank; i++)
        mask[i] = TRUE;
      return TRUE;
    }
  for (guint i = 0; i < n; i++)
    {
      guint d;

      if (!canon_dim (m, a->rank, dims[i], &d, error))
        return FALSE;
      if (a->rank == 0)
        continue;
      if (mask[d])
        return meta_fail (m, error, CS_META_ERROR_SHAPE, "dim %u is repeated", d);
      mask[d] = TRUE;
    }
  return TRUE;
}

static void
reduced_shape (const CsProxy *a, const gboolean *mask, gboolean keepdim, int64_t *shape, guint *rank)
{
  *rank = 0;
  for (guint i = 0; i < a->rank; i++)
    {
      if (!mask[i])
        shape[(*rank)++] = a->shape[i];
      else if (keepdim)
        shape[(*rank)++] = 1;
    }
}

/* prims.sum/amax/amin/prod/var/var_mean(a, dims), argmax/argmin(a, dim): the schema's
 * @dims_name removed. */
static gboolean
meta_prim_reduction (Meta *m, CsArgName dims_name, CsDtype dtype, guint n_outputs, GError **error)
{
  CsProxy *a;
  gboolean mask[CS_MAX_DIMS];
  int64_t shape[CS_MAX_DIMS];
  guint rank;

  if (!get_arg_tensor (m, CS_ARG_A, &a, error))
    return FALSE;
  if (!reduction_dims (m, a, sarg (m, dims_name), mask, error))
    return FALSE;
  reduced_shape (a, mask, FALSE, shape, &rank);
  for (guint i = 0; i < n_outputs; i++)
    if (!out_tensor (m, dtype, shape, rank, &a->device, error))
      return FALSE;
  return TRUE;
}

/* ltorch reductions: (a, dim, keepdim, dtype=) with Thunder's `_reduction` dtype rules. */
static gboolean
meta_ltorch_reduction (Meta *m, GError **error)
{
  CsProxy *a;
  gboolean mask[CS_MAX_DIMS], keepdim = FALSE;
  int64_t shape[CS_MAX_DIMS];
  guint rank;
  CsDtype dtype, req;
  gboolean has_req = cs_value_get_dtype (cs_stmt_arg_if_declared (m->stmt, CS_ARG_DTYPE), &req);
  CsMetaReduce rule = (CsMetaReduce) m->op->meta_arg;
  guint n_outputs = rule == CS_META_REDUCE_VAR ? 2 : 1;

  if (!get_arg_tensor (m, CS_ARG_A, &a, error))
    return FALSE;
  if (!reduction_dims (m, a, sarg (m, CS_ARG_DIM), mask, error))
    return FALSE;
  get_bool_named (m, CS_ARG_KEEPDIM, FALSE, &keepdim);   /* var_mean: keyword-only */
  reduced_shape (a, mask, keepdim, shape, &rank);
  dtype = a->dtype;
  switch (rule)
    {
    case CS_META_REDUCE_SUM:
      dtype = has_req ? req : (cs_dtype_is_exact (a->dtype) ? CS_DTYPE_I64 : a->dtype);
      break;
    case CS_META_REDUCE_MEAN:
      dtype = has_req ? req : a->dtype;
      if (cs_dtype_is_exact (dtype))
        return meta_fail (m, error, CS_META_ERROR_DTYPE,
                          "dtype=%s is not a floating point or complex dtype",
                          cs_dtype_long_name (dtype));
      break;
    case CS_META_REDUCE_VAR:
      dtype = real_dtype (a->dtype);
      break;
    case CS_META_REDUCE_FLOAT:
      if (cs_dtype_is_exact (a->dtype))
        dtype = CS_DTYPE_F32;
      break;
    case CS_META_REDUCE_KEEP:
      break;
    }
  for (guint i = 0; i < n_outputs; i++)
    if (!out_tensor (m, dtype, shape, rank, &a->device, error))
      return FALSE;
  return TRUE;
}

/* ------------------------------------------------------------------------------------------ */
/* Matmul and linear                                                                           */

static gboolean
matmul_shape (const Meta *m, const CsProxy *a, const CsProxy *b, int64_t *shape, guint *rank,
              GError **error)
{
  /* the shape strings of the messages are formatted only on failure (this runs for every
     matmul a pass emits) */
  g_autofree char *sa = NULL, *sb = NULL;

  if (a->rank == 0 || b->rank == 0)
    {
      sa = format_proxy_shape (a);
      sb = format_proxy_shape (b);
      return meta_fail (m, error, CS_META_ERROR_SHAPE,
                        "both operands must have at least one dim, got %s and %s", sa, sb);
    }
  if (a->dtype != b->dtype)
    return meta_fail (m, error, CS_META_ERROR_DTYPE, "operands %s (%s) and %s (%s) differ in dtype",
                      a->name, cs_dtype_short_name (a->dtype), b->name,
                      cs_dtype_short_name (b->dtype));
  if (a->rank == 1 && b->rank == 1)
    {
      if (a->shape[0] != b->shape[0])
        goto bad;
      *rank = 0;
      return TRUE;
    }
  if (a->rank == 1)
    {
      /* [K] @ [..., K, N] -> [..., N] */
      if (a->shape[0] != b->shape[b->rank - 2])
        goto bad;
      *rank = b->rank - 1;
      memcpy (shape, b->shape, sizeof (int64_t) * (b->rank - 2));
      shape[b->rank - 2] = b->shape[b->rank - 1];
      return TRUE;
    }
  if (b->rank == 1)
    {
      /* [..., M, K] @ [K] -> [..., M] */
      if (a->shape[a->rank - 1] != b->shape[0])
        goto bad;
      *rank = a->rank - 1;
      memcpy (shape, a->shape, sizeof (int64_t) * (a->rank - 1));
      return TRUE;
    }
  if (a->shape[a->rank - 1] != b->shape[b->rank - 2])
    goto bad;
  {
    guint r;

    if (!cs_meta_broadcast_shapes (a->shape, a->rank - 2, b->shape, b->rank - 2, shape, &r))
      {
        sa = format_proxy_shape (a);
        sb = format_proxy_shape (b);
        return meta_fail (m, error, CS_META_ERROR_SHAPE,
                          "batch dims of %s and %s cannot be broadcast", sa, sb);
      }
    if (r + 2 > CS_MAX_DIMS)
      return meta_fail (m, error, CS_META_ERROR_SHAPE, "too many dims");
    shape[r] = a->shape[a->rank - 2];
    shape[r + 1] = b->shape[b->rank - 1];
    *rank = r + 2;
  }
  return TRUE;

bad:
  sa = format_proxy_shape (a);
  sb = format_proxy_shape (b);
  return meta_fail (m, error, CS_META_ERROR_SHAPE, "shapes %s and %s cannot be multiplied", sa, sb);
}

static gboolean
meta_matmul (Meta *m, GError **error)
{
  CsProxy *a, *b;
  int64_t shape[CS_MAX_DIMS];
  guint rank = 0;

  if (!get_arg_tensor (m, CS_ARG_A, &a, error) || !get_arg_tensor (m, CS_ARG_B, &b, error))
    return FALSE;
  if (!matmul_shape (m, a, b, shape, &rank, error))
    return FALSE;
  return out_tensor (m, a->dtype, shape, rank, &a->device, error);
}

/* linear(a [..., K], w [N, K] or [K], bias [N] / [] / None) -> [..., N] (prims.py linear_meta). */
static gboolean
meta_linear (Meta *m, GError **error)
{
  CsProxy *a, *w, *bias;
  int64_t shape[CS_MAX_DIMS];
  guint rank;
  g_autofree char *sa = NULL, *sw = NULL;

  if (!get_arg_tensor (m, CS_ARG_A, &a, error) || !get_arg_tensor (m, CS_ARG_W, &w, error)
      || !get_opt_arg_tensor (m, CS_ARG_BIAS, &bias, error))
    return FALSE;
  if (a->rank == 0 || w->rank == 0 || w->rank > 2)
    {
      sa = format_proxy_shape (a);
      sw = format_proxy_shape (w);
      return meta_fail (m, error, CS_META_ERROR_SHAPE,
                        "input %s and weight %s: the input needs >= 1 dim and the weight 1 or 2", sa, sw);
    }
  if (a->shape[a->rank - 1] != w->shape[w->rank - 1])
    {
      sa = format_proxy_shape (a);
      sw = format_proxy_shape (w);
      return meta_fail (m, error, CS_META_ERROR_SHAPE, "shapes %s and %s cannot be multiplied (weight is [out, in])",
                        sa, sw);
    }
  if (a->dtype != w->dtype || (bias && bias->dtype != a->dtype))
    return meta_fail (m, error, CS_META_ERROR_DTYPE,
                      "input (%s), weight (%s)%s%s must share one dtype",
                      cs_dtype_short_name (a->dtype), cs_dtype_short_name (w->dtype),
                      bias ? " and bias " : "", bias ? cs_dtype_short_name (bias->dtype) : "");
  rank = a->rank - 1;
  memcpy (shape, a->shape, sizeof (int64_t) * rank);
  if (w->rank == 2)
    shape[rank++] = w->shape[0];
  if (bias != NULL)
    {
      gboolean ok = (bias->rank == 0)
                    || (w->rank == 2 && bias->rank == 1 && bias->shape[0] == w->shape[0]);

      if (!ok)
        {
          g_autofree char *sb = format_proxy_shape (bias);
          sw = format_proxy_shape (w);
          return meta_fail (m, error, CS_META_ERROR_SHAPE, "bias %s does not fit weight %s", sb, sw);
        }
    }
  return out_tensor (m, a->dtype, shape, rank, &a->device, error);
}

/* ------------------------------------------------------------------------------------------ */
/* Shape ops                                                                                    */

/* Reshape target with one optional -1 resolved (clang.reshape). */
static gboolean
resolve_reshape (const Meta *m, const CsProxy *a, int64_t *shape, guint n, gboolean allow_neg,
                 GError **error)
{
  int64_t numel = 1, total = cs_shape_numel (a->shape, a->rank);
  int neg = -1;

  for (guint i = 0; i < n; i++)
    {
      if (shape[i] >= 0)
        {
          if (!mul_ok (numel, shape[i], &numel))
            return meta_fail (m, error, CS_META_ERROR_SHAPE, "the target shape has too many elements");
        }
      else if (shape[i] == -1 && allow_neg && neg < 0)
        neg = (int) i;
      else
        return meta_fail (m, error, CS_META_ERROR_SHAPE, "invalid dim %" G_GINT64_FORMAT " in the target shape",
                          shape[i]);
    }
  if (neg >= 0)
    {
      if (numel == 0 || total % numel != 0)
        {
          g_autofree char *s1 = format_proxy_shape (a);
          g_autofree char *s2 = cs_meta_format_shape (shape, n);
          return meta_fail (m, error, CS_META_ERROR_SHAPE, "cannot reshape %s to %s", s1, s2);
        }
      shape[neg] = total / numel;
      numel = total;
    }
  if (numel != total)
    {
      g_autofree char *s1 = format_proxy_shape (a);
      g_autofree char *s2 = cs_meta_format_shape (shape, n);
      return meta_fail (m, error, CS_META_ERROR_SHAPE,
                        "cannot reshape %s (%" G_GINT64_FORMAT " elements) to %s", s1, total, s2);
    }
  return TRUE;
}

static gboolean
meta_broadcast_in_dim (Meta *m, GError **error)
{
  CsProxy *a;
  int64_t shape[CS_MAX_DIMS], bdims[CS_MAX_DIMS];
  guint n, nb;

  if (!get_arg_tensor (m, CS_ARG_A, &a, error)
      || !get_int_seq (m, cs_stmt_arg (m->stmt, CS_ARG_SHAPE), "shape", shape, &n, error)
      || !get_int_seq (m, cs_stmt_arg (m->stmt, CS_ARG_BROADCAST_DIMENSIONS), "broadcast_dimensions",
                       bdims, &nb, error))
    return FALSE;
  if (nb != a->rank)
    return meta_fail (m, error, CS_META_ERROR_SHAPE,
                      "broadcast_dimensions has %u entries but the input has rank %u", nb, a->rank);
  for (guint i = 0; i < nb; i++)
    {
      if (bdims[i] < 0 || bdims[i] >= (int64_t) n || (i > 0 && bdims[i] <= bdims[i - 1]))
        return meta_fail (m, error, CS_META_ERROR_SHAPE,
                          "broadcast_dimensions must be increasing dims of the target");
      if (a->shape[i] != 1 && a->shape[i] != shape[bdims[i]])
        {
          g_autofree char *s1 = format_proxy_shape (a);
          g_autofree char *s2 = cs_meta_format_shape (shape, n);
          return meta_fail (m, error, CS_META_ERROR_SHAPE, "cannot broadcast %s to %s", s1, s2);
        }
    }
  return out_tensor (m, a->dtype, shape, n, &a->device, error);
}

static gboolean
check_permutation (const Meta *m, guint rank, int64_t *perm, guint n, GError **error)
{
  gboolean seen[CS_MAX_DIMS] = { 0 };

  if (n != rank)
    return meta_fail (m, error, CS_META_ERROR_SHAPE, "permutation has %u entries for rank %u", n, rank);
  for (guint i = 0; i < n; i++)
    {
      guint d;

      if (!canon_dim (m, rank, perm[i], &d, error))
        return FALSE;
      if (seen[d])
        return meta_fail (m, error, CS_META_ERROR_SHAPE, "dim %u repeats in the permutation", d);
      seen[d] = TRUE;
      perm[i] = d;
    }
  return TRUE;
}

static gboolean
out_permuted (Meta *m, const CsProxy *a, const int64_t *perm, GError **error)
{
  int64_t shape[CS_MAX_DIMS];

  for (guint i = 0; i < a->rank; i++)
    shape[i] = a->shape[perm[i]];
  return out_tensor (m, a->dtype, shape, a->rank, &a->device, error);
}

/* slice_prim(a, start, end, strides): out = ceil((end - start) / stride). */
static gboolean
meta_slice (Meta *m, GError **error)
{
  CsProxy *a;
  int64_t st[CS_MAX_DIMS], en[CS_MAX_DIMS], str[CS_MAX_DIMS], shape[CS_MAX_DIMS];
  guint n1, n2, n3 = 0;
  CsValue *sv = sarg (m, CS_ARG_STRIDES);

  if (!get_arg_tensor (m, CS_ARG_A, &a, error)
      || !get_int_seq (m, sarg (m, CS_ARG_START_INDICES), "start_indices", st, &n1, error)
      || !get_int_seq (m, sarg (m, CS_ARG_END_INDICES), "end_indices", en, &n2, error))
    return FALSE;
  if (!value_is_none (sv) && !get_int_seq (m, sv, "strides", str, &n3, error))
    return FALSE;
  if (value_is_none (sv))
    {
      n3 = a->rank;
      for (guint i = 0; i < n3; i++)
        str[i] = 1;
    }
  if (n1 != a->rank || n2 != a->rank || n3 != a->rank)
    return meta_fail (m, error, CS_META_ERROR_SHAPE, "slice indices must have %u entries", a->rank);
  for (guint i = 0; i < a->rank; i++)
    {
      if (st[i] < 0 || en[i] < st[i] || en[i] > a->shape[i] || str[i] < 1)
        {
          g_autofree char *s1 = format_proxy_shape (a);
          return meta_fail (m, error, CS_META_ERROR_SHAPE,
                            "slice %" G_GINT64_FORMAT ":%" G_GINT64_FORMAT ":%" G_GINT64_FORMAT
                            " of dim %u is out of bounds for %s", st[i], en[i], str[i], i, s1);
        }
      shape[i] = ceil_div (en[i] - st[i], str[i]);
    }
  return out_tensor (m, a->dtype, shape, a->rank, &a->device, error);
}

static gboolean
meta_prim_squeeze (Meta *m, GError **error)
{
  CsProxy *a;
  int64_t dims[CS_MAX_DIMS], shape[CS_MAX_DIMS];
  gboolean mask[CS_MAX_DIMS] = { 0 };
  guint n, rank = 0;

  if (!get_arg_tensor (m, CS_ARG_A, &a, error) || !get_int_seq (m, sarg (m, CS_ARG_DIMS), "dims", dims, &n, error))
    return FALSE;
  for (guint i = 0; i < n; i++)
    {
      guint d;

      if (!canon_dim (m, a->rank, dims[i], &d, error))
        return FALSE;
      if (a->rank > 0 && a->shape[d] != 1)
        return meta_fail (m, error, CS_META_ERROR_SHAPE, "cannot squeeze dim %u of length %" G_GINT64_FORMAT,
                          d, a->shape[d]);
      mask[d] = TRUE;
    }
  for (guint i = 0; i < a->rank; i++)
    if (!mask[i])
      shape[rank++] = a->shape[i];
  return out_tensor (m, a->dtype, shape, rank, &a->device, error);
}

static gboolean
tensor_list (const Meta *m, const CsValue *v, CsProxy **out, guint max, guint *n, GError **error)
{
  if (v == NULL || (v->kind != CS_VALUE_TUPLE && v->kind != CS_VALUE_LIST))
    return meta_fail (m, error, CS_META_ERROR_ARGS, "expected a sequence of tensors");
  if (v->u.seq.n == 0 || v->u.seq.n > max)
    return meta_fail (m, error, CS_META_ERROR_ARGS, "expected 1 to %u tensors, got %u", max, v->u.seq.n);
  for (guint i = 0; i < v->u.seq.n; i++)
    {
      if (!value_is_tensor (v->u.seq.items[i]) || !v->u.seq.items[i]->u.proxy->typed)
        return meta_fail (m, error, CS_META_ERROR_ARGS, "element %u is not a typed tensor", i);
      out[i] = v->u.seq.items[i]->u.proxy;
    }
  *n = v->u.seq.n;
  return TRUE;
}

/* cat(tensors, dim): same rank, equal dims except dim; prims need equal dtypes, ltorch promotes
 * (PRESERVE). */
static gboolean
meta_cat (Meta *m, gboolean is_prim, GError **error)
{
  CsProxy *ts[256];
  guint n = 0, d;
  int64_t dim, shape[CS_MAX_DIMS];
  CsDtypeRef refs[256], res;
  GError *perr = NULL;

  if (!tensor_list (m, sarg (m, CS_ARG_TENSORS), ts, G_N_ELEMENTS (ts), &n, error)
      || !get_int_named (m, CS_ARG_DIM, 0, &dim, error))
    return FALSE;
  if (ts[0]->rank == 0)
    return meta_fail (m, error, CS_META_ERROR_SHAPE, "cannot concatenate 0-d tensors");
  if (!canon_dim (m, ts[0]->rank, dim, &d, error))
    return FALSE;
  memcpy (shape, ts[0]->shape, sizeof (int64_t) * ts[0]->rank);
  for (guint i = 0; i < n; i++)
    {
      refs[i] = cs_promote_arg_tensor (ts[i]->dtype, ts[i]->rank);
      if (i == 0)
        continue;
      if (ts[i]->rank != ts[0]->rank)
        return meta_fail (m, error, CS_META_ERROR_SHAPE, "tensors of ranks %u and %u cannot be concatenated",
                          ts[0]->rank, ts[i]->rank);
      for (guint k = 0; k < ts[0]->rank; k++)
        if (k != d && ts[i]->shape[k] != ts[0]->shape[k])
          {
            g_autofree char *s1 = format_proxy_shape (ts[0]);
            g_autofree char *s2 = format_proxy_shape (ts[i]);
            return meta_fail (m, error, CS_META_ERROR_SHAPE,
                              "shapes %s and %s differ outside dim %u", s1, s2, d);
          }
      if (!add_ok (shape[d], ts[i]->shape[d], &shape[d]))
        return meta_fail (m, error, CS_META_ERROR_SHAPE, "the concatenated dim is too long");
      if (is_prim && ts[i]->dtype != ts[0]->dtype)
        return meta_fail (m, error, CS_META_ERROR_DTYPE, "prims.cat needs one dtype, got %s and %s",
                          cs_dtype_short_name (ts[0]->dtype), cs_dtype_short_name (ts[i]->dtype));
    }
  if (!cs_promote_elementwise (refs, n, CS_PROMO_PRESERVE, NULL, &res, &perr))
    {
      meta_fail (m, error, CS_META_ERROR_DTYPE, "%s", perr->message);
      g_error_free (perr);
      return FALSE;
    }
  return out_tensor (m, res.dtype, shape, ts[0]->rank, &ts[0]->device, error);
}

/* pad(a, value, [(lo, hi, interior), ...]) */
static gboolean
meta_pad (Meta *m, GError **error)
{
  CsProxy *a;
  CsValue *cfg = sarg (m, CS_ARG_PADDING_CONFIG);
  int64_t shape[CS_MAX_DIMS];

  if (!get_arg_tensor (m, CS_ARG_A, &a, error))
    return FALSE;
  if (cfg == NULL || (cfg->kind != CS_VALUE_LIST && cfg->kind != CS_VALUE_TUPLE) || cfg->u.seq.n != a->rank)
    return meta_fail (m, error, CS_META_ERROR_ARGS, "padding_config needs one (lo, hi, interior) per dim");
  for (guint i = 0; i < a->rank; i++)
    {
      int64_t t[3];
      guint k;

      if (!cs_value_get_int_seq (cfg->u.seq.items[i], t, 3, &k) || k != 3 || t[2] < 0)
        return meta_fail (m, error, CS_META_ERROR_ARGS, "padding_config entry %u is not (lo, hi, interior)", i);
      {
        int64_t inner = 0;

        if ((a->shape[i] > 0 && !mul_ok (a->shape[i] - 1, t[2], &inner))
            || !add_ok (inner, a->shape[i], &inner) || !add_ok (inner, t[0], &inner)
            || !add_ok (inner, t[1], &inner))
          return meta_fail (m, error, CS_META_ERROR_SHAPE, "padding of dim %u overflows", i);
        shape[i] = inner;
      }
      if (shape[i] < 0)
        return meta_fail (m, error, CS_META_ERROR_SHAPE, "padding makes dim %u negative", i);
    }
  return out_tensor (m, a->dtype, shape, a->rank, &a->device, error);
}

/* Basic indexing (clang.getitem/_basic_indexing): ints, slices, None, Ellipsis. */
/**
 * cs_meta_slice_bounds:
 * @slice: a `slice(start,stop,step)` CALL value of a basic getitem (None = default)
 * @len: extent of the sliced dim
 * @out: (out caller-allocates): start, stop, step normalised as Python does (negative
 *   bounds count from the end, stop clamped to @len, an empty range becomes 0:0)
 *
 * Shared by the meta and the decomposition of ltorch.getitem (thunder/torch getitem ->
 * clang basic indexing).
 * Returns: CS_META_SLICE_OK, or what is wrong with @slice
 */
CsMetaSlice
cs_meta_slice_bounds (const CsValue *slice, int64_t len, int64_t out[3])
{
  out[0] = 0;
  out[1] = len;
  out[2] = 1;
  for (guint j = 0; j < 3 && j < slice->u.call.n_args; j++)
    {
      const CsValue *sv = slice->u.call.args[j].value;

      if (sv->kind == CS_VALUE_NONE)
        continue;
      if (!value_int (sv, &out[j]))
        return CS_META_SLICE_NOT_INT;
    }
  if (out[2] < 1)
    return CS_META_SLICE_BAD_STEP;
  if (out[0] < 0)
    out[0] += len;
  if (out[1] < 0)
    out[1] += len;
  if (out[0] < 0 || out[1] < 0)
    return CS_META_SLICE_OUT_OF_RANGE;
  if (out[0] > out[1] || out[0] >= len)
    out[0] = out[1] = 0;
  if (out[1] > len)
    out[1] = len;
  return CS_META_SLICE_OK;
}

static gboolean
meta_getitem (Meta *m, GError **error)
{
  CsProxy *a;
  CsValue *key = sarg (m, CS_ARG_KEY);
  const CsValue *items[CS_MAX_DIMS * 2];
  guint n_items = 0, in_dim = 0, rank = 0, n_index = 0;
  gboolean seen_ellipsis = FALSE;
  int64_t shape[CS_MAX_DIMS];

  if (!get_arg_tensor (m, CS_ARG_A, &a, error))
    return FALSE;
  if (key == NULL)
    return meta_fail (m, error, CS_META_ERROR_ARGS, "missing index");
  if (key->kind == CS_VALUE_TUPLE)
    {
      if (key->u.seq.n > G_N_ELEMENTS (items))
        return meta_fail (m, error, CS_META_ERROR_ARGS, "too many indices");
      for (guint i = 0; i < key->u.seq.n; i++)
        items[n_items++] = key->u.seq.items[i];
    }
  else
    items[n_items++] = key;
  for (guint i = 0; i < n_items; i++)
    if (items[i]->kind != CS_VALUE_NONE && items[i]->kind != CS_VALUE_ELLIPSIS)
      n_index++;
  if (n_index > a->rank)
    return meta_fail (m, error, CS_META_ERROR_SHAPE, "too many indices for a tensor of rank %u", a->rank);
  for (guint i = 0; i < n_items; i++)
    {
      const CsValue *k = items[i];

      if (rank >= CS_MAX_DIMS)
        return meta_fail (m, error, CS_META_ERROR_SHAPE, "too many dims");
      if (k->kind == CS_VALUE_ELLIPSIS)
        {
          guint fill = seen_ellipsis ? 0 : a->rank - n_index;

          seen_ellipsis = TRUE;
          for (guint j = 0; j < fill; j++)
            shape[rank++] = a->shape[in_dim++];
        }
      else if (k->kind == CS_VALUE_NONE)
        shape[rank++] = 1;
      else if (k->kind == CS_VALUE_INT)
        {
          int64_t len = a->shape[in_dim], x = k->u.i;

          if (x < -len || x >= len)
            return meta_fail (m, error, CS_META_ERROR_SHAPE,
                              "index %" G_GINT64_FORMAT " is out of bounds for dim %u of length %" G_GINT64_FORMAT,
                              x, in_dim, len);
          in_dim++;
        }
      else if (k->kind == CS_VALUE_CALL && g_strcmp0 (k->u.call.callee, "slice") == 0 && k->u.call.n_args == 3)
        {
          int64_t len = a->shape[in_dim], se[3];

          switch (cs_meta_slice_bounds (k, len, se))
            {
            case CS_META_SLICE_NOT_INT:
              return meta_fail (m, error, CS_META_ERROR_ARGS, "slice bounds must be ints");
            case CS_META_SLICE_BAD_STEP:
              return meta_fail (m, error, CS_META_ERROR_ARGS, "slice step must be >= 1");
            case CS_META_SLICE_OUT_OF_RANGE:
              return meta_fail (m, error, CS_META_ERROR_SHAPE, "slice start/stop out of range for length %" G_GINT64_FORMAT, len);
            case CS_META_SLICE_OK:
            default:
              break;
            }
          shape[rank++] = ceil_div (se[1] - se[0], se[2]);
          in_dim++;
        }
      else
        return meta_fail (m, error, CS_META_ERROR_UNSUPPORTED,
                          "only basic indexing (ints, slices, None, ...) is supported");
    }
  while (in_dim < a->rank && rank < CS_MAX_DIMS)
    shape[rank++] = a->shape[in_dim++];
  return out_tensor (m, a->dtype, shape, rank, &a->device, error);
}

/* split(a, size_or_sections, dim): pieces along dim (torch split semantics). */
static gboolean
meta_split (Meta *m, GError **error)
{
  CsProxy *a;
  CsValue *sz = sarg (m, CS_ARG_SIZE_OR_SECTIONS);
  int64_t dim, size, secs[256];
  guint d, n = 0;
  int64_t shape[CS_MAX_DIMS];

  if (!get_arg_tensor (m, CS_ARG_A, &a, error) || !get_int_named (m, CS_ARG_DIM, 0, &dim, error))
    return FALSE;
  if (!canon_dim (m, a->rank, dim, &d, error))
    return FALSE;
  if (a->rank == 0)
    return meta_fail (m, error, CS_META_ERROR_SHAPE, "cannot split a 0-d tensor");
  memcpy (shape, a->shape, sizeof (int64_t) * a->rank);
  if (value_int (sz, &size))
    {
      int64_t len = a->shape[d];

      if (size <= 0)
        return meta_fail (m, error, CS_META_ERROR_ARGS, "split size must be positive");
      for (int64_t at = 0; at < len;)
        {
          if (n >= G_N_ELEMENTS (secs))
            return meta_fail (m, error, CS_META_ERROR_ARGS, "too many pieces");
          secs[n++] = MIN (size, len - at);
          at += secs[n - 1];
        }
    }
  else
    {
      int64_t sum = 0;

      if (!cs_value_get_int_seq (sz, secs, G_N_ELEMENTS (secs), &n))
        return meta_fail (m, error, CS_META_ERROR_ARGS, "size_or_sections must be an int or ints");
      for (guint i = 0; i < n; i++)
        if (secs[i] < 0 || !add_ok (sum, secs[i], &sum))
          return meta_fail (m, error, CS_META_ERROR_SHAPE, "sections must be non-negative and fit the dim");
      if (sum != a->shape[d])
        return meta_fail (m, error, CS_META_ERROR_SHAPE,
                          "sections sum to %" G_GINT64_FORMAT " but dim %u has length %" G_GINT64_FORMAT,
                          sum, d, a->shape[d]);
    }
  for (guint i = 0; i < n; i++)
    {
      shape[d] = secs[i];
      if (!out_tensor (m, a->dtype, shape, a->rank, &a->device, error))
        return FALSE;
    }
  return TRUE;
}

/* ------------------------------------------------------------------------------------------ */
/* Conversions                                                                                 */

/* ltorch.to (thunder/torch/__init__.py `_parse_to_device_and_dtype`). */
static gboolean
meta_to (Meta *m, GError **error)
{
  CsProxy *a;
  CsValue *p1 = sarg (m, CS_ARG_TENSOR_DTYPE_OR_DEVICE);
  CsValue *p2 = sarg (m, CS_ARG_OPTIONAL_POSITIONAL_DTYPE);
  CsValue *kdev = sarg (m, CS_ARG_DEVICE), *kdt = sarg (m, CS_ARG_DTYPE);
  CsDtype dtype;
  CsDevice device;

  if (!get_arg_tensor (m, CS_ARG_A, &a, error))
    return FALSE;
  dtype = a->dtype;
  device = a->device;
  if (value_is_tensor (p1))
    {
      dtype = p1->u.proxy->dtype;
      device = p1->u.proxy->device;
    }
  else if (!value_is_none (p1) && cs_value_get_dtype (p1, &dtype))
    ;
  else if (!value_is_none (p1) && cs_value_get_device (p1, &device))
    {
      if (!value_is_none (p2) && !cs_value_get_dtype (p2, &dtype))
        return meta_fail (m, error, CS_META_ERROR_ARGS, "the second argument is not a dtype");
    }
  else if (!value_is_none (p1))
    return meta_fail (m, error, CS_META_ERROR_ARGS, "cannot read a dtype or device from the first argument");
  if (!value_is_none (kdt) && !cs_value_get_dtype (kdt, &dtype))
    return meta_fail (m, error, CS_META_ERROR_ARGS, "dtype= is not a dtype");
  if (!value_is_none (kdev) && !cs_value_get_device (kdev, &device))
    return meta_fail (m, error, CS_META_ERROR_ARGS, "device= is not a device");
  return out_tensor (m, dtype, a->shape, a->rank, &device, error);
}

static gboolean
meta_convert (Meta *m, GError **error)
{
  CsValue *v = sarg (m, CS_ARG_A);
  CsDtype dtype;
  CsPyType pt;

  if (!cs_value_get_dtype (sarg (m, CS_ARG_DTYPE), &dtype))
    return meta_fail (m, error, CS_META_ERROR_ARGS, "the second argument must be a dtype");
  if (value_number (v, &pt, NULL))
    {
      CsValue *dv = sarg (m, CS_ARG_DTYPE);
      return out_number (m, dv->kind == CS_VALUE_DTYPE && dv->u.dtype.pytype ? dv->u.dtype.pytype
                                                                             : CS_PYTYPE_FLOAT);
    }
  {
    CsProxy *a;

    if (!get_arg_tensor (m, CS_ARG_A, &a, error))
      return FALSE;
    return out_like (m, a, dtype, error);
  }
}

/* ------------------------------------------------------------------------------------------ */
/* Creation                                                                                    */

static gboolean
creation_dtype_device (const Meta *m, CsDtype dflt, CsDtype *dtype, CsDevice *device, GError **error)
{
  CsValue *dv = sarg (m, CS_ARG_DTYPE), *devv = sarg (m, CS_ARG_DEVICE);

  *dtype = dflt;
  *device = (CsDevice) { CS_DEVICE_CUDA, 0 };
  if (!value_is_none (dv) && !cs_value_get_dtype (dv, dtype))
    return meta_fail (m, error, CS_META_ERROR_ARGS, "dtype= is not a dtype");
  if (!value_is_none (devv) && !cs_value_get_device (devv, device))
    return meta_fail (m, error, CS_META_ERROR_ARGS, "device= is not a device");
  return TRUE;
}

/* full(shape, fill_value, device=, dtype=), uniform(shape, minval, maxval, device=, dtype=) */
static gboolean
meta_full_like_shape (Meta *m, GError **error)
{
  int64_t shape[CS_MAX_DIMS];
  guint n;
  CsDtype dtype;
  CsDevice device;

  if (!get_int_seq (m, sarg (m, CS_ARG_SHAPE), "shape", shape, &n, error))
    return FALSE;
  for (guint i = 0; i < n; i++)
    if (shape[i] < 0)
      return meta_fail (m, error, CS_META_ERROR_SHAPE, "negative dim in shape");
  if (!creation_dtype_device (m, CS_DTYPE_F32, &dtype, &device, error))
    return FALSE;
  return out_tensor (m, dtype, shape, n, &device, error);
}

/* iota(length, start=, step=, device=, dtype=) and ltorch.arange(start, end, step, ...). */
static gboolean
meta_iota (Meta *m, gboolean is_arange, GError **error)
{
  int64_t len;
  CsDtype dtype;
  CsDevice device;

  if (!is_arange)
    {
      if (!get_int_named (m, CS_ARG_LENGTH, 0, &len, error))
        return FALSE;
      if (!creation_dtype_device (m, CS_DTYPE_I64, &dtype, &device, error))
        return FALSE;
    }
  else
    {
      double v[3] = { 0, 0, 1 };
      CsPyType pt[3] = { CS_PYTYPE_INT, CS_PYTYPE_NONE, CS_PYTYPE_INT };
      gboolean any_float = FALSE;

      if (!value_number (sarg (m, CS_ARG_START), &pt[0], &v[0]))
        return meta_fail (m, error, CS_META_ERROR_ARGS, "start must be a number");
      if (value_is_none (sarg (m, CS_ARG_END)))
        {
          v[1] = v[0];
          v[0] = 0;
        }
      else if (!value_number (sarg (m, CS_ARG_END), &pt[1], &v[1]))
        return meta_fail (m, error, CS_META_ERROR_ARGS, "end must be a number");
      if (sarg (m, CS_ARG_STEP) && !value_number (sarg (m, CS_ARG_STEP), &pt[2], &v[2]))
        return meta_fail (m, error, CS_META_ERROR_ARGS, "step must be a number");
      for (guint i = 0; i < 3; i++)
        any_float |= pt[i] == CS_PYTYPE_FLOAT;
      if (v[2] == 0 || (v[1] - v[0]) / v[2] < 0)
        return meta_fail (m, error, CS_META_ERROR_ARGS, "step must make progress from start to end");
      if (!(fabs ((v[1] - v[0]) / v[2]) < (double) DIM_LIMIT))
        return meta_fail (m, error, CS_META_ERROR_SHAPE, "the range is too long");
      len = (int64_t) ceil ((v[1] - v[0]) / v[2]);
      if (!creation_dtype_device (m, any_float ? CS_DTYPE_F32 : CS_DTYPE_I64, &dtype, &device, error))
        return FALSE;
    }
  if (len < 0)
    return meta_fail (m, error, CS_META_ERROR_SHAPE, "negative length");
  return out_tensor (m, dtype, &len, 1, &device, error);
}

/* ------------------------------------------------------------------------------------------ */
/* Indexing                                                                                    */

static gboolean
check_index_dtype (const Meta *m, const CsProxy *idx, GError **error)
{
  if (cs_dtype_kind (idx->dtype) != CS_DTYPE_KIND_INT)
    return meta_fail (m, error, CS_META_ERROR_DTYPE, "indices %s must be an integer tensor, not %s",
                      idx->name, cs_dtype_short_name (idx->dtype));
  return TRUE;
}

/* prims.take(a, index, dim): a.shape[:dim] + index.shape + a.shape[dim+1:]. */
static gboolean
meta_take (Meta *m, GError **error)
{
  CsProxy *a, *idx;
  int64_t dim, shape[CS_MAX_DIMS];
  guint d, r = 0;

  if (!get_arg_tensor (m, CS_ARG_A, &a, error) || !get_arg_tensor (m, CS_ARG_INDEX, &idx, error)
      || !get_int_named (m, CS_ARG_DIM, 0, &dim, error) || !check_index_dtype (m, idx, error))
    return FALSE;
  if (!canon_dim (m, a->rank, dim, &d, error))
    return FALSE;
  if (a->rank + idx->rank > CS_MAX_DIMS + 1 || idx->rank > 1)
    return meta_fail (m, error, CS_META_ERROR_SHAPE, "take needs a 0-d or 1-d index");
  for (guint i = 0; i < d; i++)
    shape[r++] = a->shape[i];
  for (guint i = 0; i < idx->rank; i++)
    shape[r++] = idx->shape[i];
  for (guint i = d + 1; i < a->rank; i++)
    shape[r++] = a->shape[i];
  return out_tensor (m, a->dtype, shape, r, &a->device, error);
}

/* take_along_axis/gather(a, index, dim) -> index.shape; ltorch.take_along_dim expands index to
 * a.shape except dim (clang._maybe_expand_exclude_dim). */
static gboolean
meta_take_along (Meta *m, gboolean expand_like_a, GError **error)
{
  CsProxy *a, *idx;
  int64_t dim, shape[CS_MAX_DIMS];
  guint d;

  /* prims.take_along_axis/gather(a, index, dim), ltorch.take_along_dim(a, indices, dim) */
  if (!get_arg_tensor (m, CS_ARG_A, &a, error)
      || !get_arg_tensor (m, expand_like_a ? CS_ARG_INDICES : CS_ARG_INDEX, &idx, error)
      || !get_int_named (m, CS_ARG_DIM, 0, &dim, error) || !check_index_dtype (m, idx, error))
    return FALSE;
  if (!canon_dim (m, a->rank, dim, &d, error))
    return FALSE;
  if (idx->rank != a->rank)
    return meta_fail (m, error, CS_META_ERROR_SHAPE, "index rank %u differs from input rank %u",
                      idx->rank, a->rank);
  for (guint i = 0; i < a->rank; i++)
    {
      shape[i] = idx->shape[i];
      if (i == d)
        continue;
      if (expand_like_a)
        {
          if (idx->shape[i] != a->shape[i] && idx->shape[i] != 1)
            return meta_fail (m, error, CS_META_ERROR_SHAPE, "index dim %u (%" G_GINT64_FORMAT
                              ") cannot expand to %" G_GINT64_FORMAT, i, idx->shape[i], a->shape[i]);
          shape[i] = a->shape[i];
        }
      else if (idx->shape[i] > a->shape[i])
        return meta_fail (m, error, CS_META_ERROR_SHAPE, "index dim %u is longer than the input's", i);
    }
  return out_tensor (m, a->dtype, shape, a->rank, &a->device, error);
}

/* embedding(indices, weight, ...) -> indices.shape + weight.shape[1:]. */
static gboolean
meta_embedding (Meta *m, GError **error)
{
  CsProxy *a, *w;
  int64_t shape[CS_MAX_DIMS];
  guint r;

  if (!get_arg_tensor (m, CS_ARG_A, &a, error) || !get_arg_tensor (m, CS_ARG_WEIGHT, &w, error)
      || !check_index_dtype (m, a, error))
    return FALSE;
  if (w->rank != 2)
    return meta_fail (m, error, CS_META_ERROR_SHAPE, "weight must be 2-d, got rank %u", w->rank);
  if (a->rank + 1 > CS_MAX_DIMS)
    return meta_fail (m, error, CS_META_ERROR_SHAPE, "too many dims");
  memcpy (shape, a->shape, sizeof (int64_t) * a->rank);
  r = a->rank;
  shape[r++] = w->shape[1];
  return out_tensor (m, w->dtype, shape, r, &a->device, error);
}

/* ------------------------------------------------------------------------------------------ */
/* NN composites                                                                               */

/* layer_norm / rms_norm: normalized_shape must match the trailing dims and the weight. */
static gboolean
meta_norm (Meta *m, gboolean has_bias, GError **error)
{
  CsProxy *a, *w, *b = NULL;
  int64_t ns[CS_MAX_DIMS];
  guint n;

  if (!get_arg_tensor (m, CS_ARG_A, &a, error)
      || !get_int_seq (m, sarg (m, CS_ARG_NORMALIZED_SHAPE), "normalized_shape", ns, &n, error)
      || !get_opt_arg_tensor (m, CS_ARG_WEIGHT, &w, error)
      || (has_bias && !get_opt_arg_tensor (m, CS_ARG_BIAS, &b, error)))
    return FALSE;
  if (n == 0 || n > a->rank)
    return meta_fail (m, error, CS_META_ERROR_SHAPE, "normalized_shape of length %u does not fit rank %u",
                      n, a->rank);
  for (guint i = 0; i < n; i++)
    if (a->shape[a->rank - n + i] != ns[i])
      {
        g_autofree char *s1 = format_proxy_shape (a);
        g_autofree char *s2 = cs_meta_format_shape (ns, n);
        return meta_fail (m, error, CS_META_ERROR_SHAPE, "the last dims of %s are not %s", s1, s2);
      }
  if (w && !same_shape (w->shape, w->rank, ns, n))
    {
      g_autofree char *s1 = format_proxy_shape (w);
      g_autofree char *s2 = cs_meta_format_shape (ns, n);
      return meta_fail (m, error, CS_META_ERROR_SHAPE, "weight %s is not normalized_shape %s", s1, s2);
    }
  if (b && !same_shape (b->shape, b->rank, ns, n))
    {
      g_autofree char *s1 = format_proxy_shape (b);
      g_autofree char *s2 = cs_meta_format_shape (ns, n);
      return meta_fail (m, error, CS_META_ERROR_SHAPE, "bias %s is not normalized_shape %s", s1, s2);
    }
  return out_like (m, a, a->dtype, error);
}

/* _softmax / log_softmax(a, dim, dtype=): same shape, dtype= or a.dtype. */
static gboolean
meta_softmax (Meta *m, GError **error)
{
  CsProxy *a;
  int64_t dim;
  guint d;
  CsDtype dtype;

  if (!get_arg_tensor (m, CS_ARG_A, &a, error) || !get_int_named (m, CS_ARG_DIM, 0, &dim, error))
    return FALSE;
  if (!canon_dim (m, a->rank, dim, &d, error))
    return FALSE;
  dtype = a->dtype;
  /* _softmax and log_softmax take dtype keyword-only, ltorch.softmax at position 2 too */
  if (!value_is_none (sarg (m, CS_ARG_DTYPE)) && !cs_value_get_dtype (sarg (m, CS_ARG_DTYPE), &dtype))
    return meta_fail (m, error, CS_META_ERROR_ARGS, "dtype= is not a dtype");
  return out_like (m, a, dtype, error);
}

/* cross_entropy(a, target, weight, size_average, ignore_index, reduce, reduction, label_smoothing)
 * and nll_loss(a, target, weight, ignore_index, reduction). */
static gboolean
meta_loss (Meta *m, GError **error)
{
  CsProxy *a, *t, *w;
  CsValue *rv = sarg (m, CS_ARG_REDUCTION);
  const char *red = (rv && rv->kind == CS_VALUE_STRING) ? rv->u.s : "mean";
  guint class_dim;
  int64_t shape[CS_MAX_DIMS];
  guint r = 0;

  if (!get_arg_tensor (m, CS_ARG_A, &a, error) || !get_arg_tensor (m, CS_ARG_TARGET, &t, error)
      || !get_opt_arg_tensor (m, CS_ARG_WEIGHT, &w, error))
    return FALSE;
  if (strcmp (red, "none") != 0 && strcmp (red, "sum") != 0 && strcmp (red, "mean") != 0)
    return meta_fail (m, error, CS_META_ERROR_ARGS, "reduction must be 'none', 'sum' or 'mean', not '%s'", red);
  if (a->rank == 0)
    return meta_fail (m, error, CS_META_ERROR_SHAPE, "the input needs at least one dim");
  class_dim = a->rank >= 2 ? 1 : 0;
  if (same_shape (a->shape, a->rank, t->shape, t->rank) && m->op->id == CS_OP_LTORCH_CROSS_ENTROPY)
    {
      /* probability targets */
      if (!cs_dtype_is_float (t->dtype))
        return meta_fail (m, error, CS_META_ERROR_DTYPE, "probability targets must be floating point");
    }
  else
    {
      if (cs_dtype_kind (t->dtype) != CS_DTYPE_KIND_INT)
        return meta_fail (m, error, CS_META_ERROR_DTYPE,
                          "class-index target %s must be an integer tensor, not %s", t->name,
                          cs_dtype_short_name (t->dtype));
      if (t->rank + 1 != a->rank)
        return meta_fail (m, error, CS_META_ERROR_SHAPE,
                          "the input has rank %u, so the target needs rank %u, not %u", a->rank,
                          a->rank - 1, t->rank);
      for (guint i = 0, k = 0; i < a->rank; i++)
        {
          if (i == class_dim)
            continue;
          if (a->shape[i] != t->shape[k++])
            {
              g_autofree char *s1 = format_proxy_shape (a);
              g_autofree char *s2 = format_proxy_shape (t);
              return meta_fail (m, error, CS_META_ERROR_SHAPE,
                                "target %s does not match input %s outside the class dim", s2, s1);
            }
        }
    }
  if (w && (w->rank != 1 || w->shape[0] != a->shape[class_dim]))
    return meta_fail (m, error, CS_META_ERROR_SHAPE, "weight must be 1-d with %" G_GINT64_FORMAT " classes",
                      a->shape[class_dim]);
  if (strcmp (red, "none") == 0)
    for (guint i = 0; i < a->rank; i++)
      if (i != class_dim)
        shape[r++] = a->shape[i];
  return out_tensor (m, a->dtype, shape, r, &a->device, error);
}

/* scaled_dot_product_attention(q [..., L, E], k [..., S, E], v [..., S, Ev]) -> [..., L, Ev]. */
static gboolean
meta_sdpa (Meta *m, GError **error)
{
  CsProxy *q, *k, *v, *mask;
  int64_t shape[CS_MAX_DIMS];

  if (!get_arg_tensor (m, CS_ARG_QUERY, &q, error) || !get_arg_tensor (m, CS_ARG_KEY, &k, error)
      || !get_arg_tensor (m, CS_ARG_VALUE, &v, error) || !get_opt_arg_tensor (m, CS_ARG_ATTN_MASK, &mask, error))
    return FALSE;
  if (q->rank < 2 || k->rank < 2 || v->rank < 2)
    return meta_fail (m, error, CS_META_ERROR_SHAPE, "query, key and value need at least 2 dims");
  if (!cs_dtype_is_float (q->dtype) || k->dtype != q->dtype || v->dtype != q->dtype)
    return meta_fail (m, error, CS_META_ERROR_DTYPE, "query, key and value must share one float dtype");
  if (q->shape[q->rank - 1] != k->shape[k->rank - 1] || k->shape[k->rank - 2] != v->shape[v->rank - 2])
    {
      g_autofree char *s1 = format_proxy_shape (q);
      g_autofree char *s2 = format_proxy_shape (k);
      g_autofree char *s3 = format_proxy_shape (v);
      return meta_fail (m, error, CS_META_ERROR_SHAPE, "query %s, key %s and value %s do not fit", s1, s2, s3);
    }
  memcpy (shape, q->shape, sizeof (int64_t) * q->rank);
  shape[q->rank - 1] = v->shape[v->rank - 1];
  return out_tensor (m, q->dtype, shape, q->rank, &q->device, error);
}

/* ------------------------------------------------------------------------------------------ */
/* Dispatch                                                                                    */

/* ------------------------------------------------------------------------------------------ */
/* Distributed prims (thunder/distributed/prims.py: all_gather_meta, all_reduce_meta,
 * broadcast_meta, reduce_scatter, wait_meta, synchronize_meta, pack_meta, unpack_meta,
 * pack_for_fsdp_meta, unpack_for_fsdp_meta, update_bucket_view_meta, stash_grad_for_fsdp_meta,
 * synchronize_tensor_parallel_{output,input}_meta).  The group's size is what the statement's own
 * shapes say, else the trace's (cs_dist_group_size(): 1 when nothing tells it). */

static guint
meta_group_size (const Meta *m)
{
  guint n = cs_dist_stmt_group_size (m->stmt);

  if (n > 0)
    return n;
  return cs_dist_group_size (m->trace, cs_stmt_arg (m->stmt, CS_ARG_GROUP));
}

/* all_gather (@gather) or reduce_scatter: dim (default 0) multiplied or divided by the size */
static gboolean
meta_dist_gather_scatter (Meta *m, gboolean gather, GError **error)
{
  CsProxy *a;
  const CsValue *dv = cs_stmt_arg (m->stmt, CS_ARG_DIM);
  int64_t shape[CS_MAX_DIMS], d = 0;
  guint n, dim;

  if (!get_arg_tensor (m, CS_ARG_A, &a, error))
    return FALSE;
  if (dv != NULL && !value_is_none (dv) && !value_int (dv, &d))
    return meta_fail (m, error, CS_META_ERROR_ARGS, "dim is not an int or None");
  if (a->rank == 0 || d < 0 || d >= (int64_t) a->rank)
    return meta_fail (m, error, CS_META_ERROR_SHAPE, "dim must satisfy 0 <= dim=%" G_GINT64_FORMAT
                      " < a.ndim=%u", d, a->rank);
  dim = (guint) d;
  n = meta_group_size (m);
  memcpy (shape, a->shape, sizeof (int64_t) * a->rank);
  if (gather)
    {
      if (!mul_ok (shape[dim], n, &shape[dim]))
        return meta_fail (m, error, CS_META_ERROR_SHAPE, "dim %u overflows", dim);
    }
  else
    {
      if (shape[dim] % n != 0)
        return meta_fail (m, error, CS_META_ERROR_SHAPE, "a.shape[%u]=%" G_GINT64_FORMAT
                          " is not divisible by the group size %u", dim, shape[dim], n);
      shape[dim] /= n;
    }
  return out_tensor (m, a->dtype, shape, a->rank, &a->device, error);
}

static gboolean
meta_dist_tensors (const Meta *m, CsArgName name, CsProxy ***out, guint *n, GError **error)
{
  const CsValue *v = cs_stmt_arg (m->stmt, name);
  guint max;

  if (v == NULL || (v->kind != CS_VALUE_TUPLE && v->kind != CS_VALUE_LIST) || v->u.seq.n == 0)
    return meta_fail (m, error, CS_META_ERROR_ARGS, "%s: expected a non-empty list of tensors",
                      cs_arg_name (name));
  max = v->u.seq.n;
  *out = g_new (CsProxy *, max);
  if (!tensor_list (m, v, *out, max, n, error))
    {
      g_clear_pointer (out, g_free);
      return FALSE;
    }
  for (guint i = 1; i < *n; i++)
    if ((*out)[i]->dtype != (*out)[0]->dtype || !cs_device_equal (&(*out)[i]->device, &(*out)[0]->device))
      {
        g_clear_pointer (out, g_free);
        return meta_fail (m, error, CS_META_ERROR_DTYPE, "the tensors of a bucket must share one "
                          "dtype and device");
      }
  return TRUE;
}

static gboolean
meta_dist (Meta *m, GError **error)
{
  CsProxy *a;

  switch (m->op->id)
    {
    case CS_OP_DIST_ALL_GATHER:
      return meta_dist_gather_scatter (m, TRUE, error);
    case CS_OP_DIST_REDUCE_SCATTER:
      return meta_dist_gather_scatter (m, FALSE, error);
    case CS_OP_DIST_ALL_REDUCE:
      {
        CsDistReduceOp op;
        if (!cs_dist_reduce_op (cs_stmt_arg (m->stmt, CS_ARG_OP), &op))
          return meta_fail (m, error, CS_META_ERROR_ARGS, "op is not a DistributedReduceOps member");
      }
      /* fall through */
    case CS_OP_DIST_BROADCAST:
    case CS_OP_DIST_WAIT:
      if (!get_arg_tensor (m, CS_ARG_A, &a, error))
        return FALSE;
      return out_like (m, a, a->dtype, error);
    case CS_OP_DIST_SYNCHRONIZE:
      {
        CsDistParallelType pt;
        int64_t shape[CS_MAX_DIMS];

        if (!get_arg_tensor (m, CS_ARG_A, &a, error))
          return FALSE;
        if (!cs_dist_parallel_type (cs_stmt_arg (m->stmt, CS_ARG_DISTPARALLEL_TYPE), &pt))
          return meta_fail (m, error, CS_META_ERROR_ARGS, "distparallel_type is not a DistParallelType member");
        if (pt == CS_DIST_PARALLEL_REPLICATED)
          return out_like (m, a, a->dtype, error);
        if (pt != CS_DIST_PARALLEL_FULLY_SHARDED || a->rank == 0)
          return meta_fail (m, error, CS_META_ERROR_ARGS, "synchronize takes a REPLICATED or a "
                            "FULLY_SHARDED tensor of rank >= 1");
        memcpy (shape, a->shape, sizeof (int64_t) * a->rank);
        if (!mul_ok (shape[0], meta_group_size (m), &shape[0]))
          return meta_fail (m, error, CS_META_ERROR_SHAPE, "dim 0 overflows");
        return out_tensor (m, a->dtype, shape, a->rank, &a->device, error);
      }
    case CS_OP_DIST_PACK:
    case CS_OP_DIST_PACK_FOR_FSDP:
      {
        g_autofree CsProxy **ts = NULL;
        guint n;
        int64_t total = 0;

        if (!meta_dist_tensors (m, CS_ARG_TENSORS, &ts, &n, error))
          return FALSE;
        for (guint i = 0; i < n; i++)
          if (!add_ok (total, cs_shape_numel (ts[i]->shape, ts[i]->rank), &total))
            return meta_fail (m, error, CS_META_ERROR_SHAPE, "the bucket overflows");
        return out_tensor (m, ts[0]->dtype, &total, 1, &ts[0]->device, error);
      }
    case CS_OP_DIST_UNPACK:
    case CS_OP_DIST_UNPACK_FOR_FSDP:
      {
        g_autofree CsProxy **ts = NULL;
        guint n;
        int64_t total = 0, world = 1;
        gboolean gather = TRUE, fsdp = m->op->id == CS_OP_DIST_UNPACK_FOR_FSDP;

        if (!get_arg_tensor (m, CS_ARG_BUFFER, &a, error)
            || !meta_dist_tensors (m, CS_ARG_TENSORS, &ts, &n, error))
          return FALSE;
        if (fsdp)
          {
            const CsValue *mode = cs_stmt_arg (m->stmt, CS_ARG_MODE);
            if (!value_int (cs_stmt_arg (m->stmt, CS_ARG_WORLD_SIZE), &world) || world < 1)
              return meta_fail (m, error, CS_META_ERROR_ARGS, "world_size is not an int >= 1");
            if (mode == NULL || mode->kind != CS_VALUE_STRING
                || (strcmp (mode->u.s, "gather") != 0 && strcmp (mode->u.s, "scatter") != 0))
              return meta_fail (m, error, CS_META_ERROR_ARGS, "mode is not 'gather' or 'scatter'");
            gather = strcmp (mode->u.s, "gather") == 0;
          }
        if (a->dtype != ts[0]->dtype)
          return meta_fail (m, error, CS_META_ERROR_DTYPE, "the buffer and the tensors differ in dtype");
        for (guint i = 0; i < n; i++)
          total += cs_shape_numel (ts[i]->shape, ts[i]->rank);
        total = gather ? total * world : total / world;
        if (cs_shape_numel (a->shape, a->rank) != total)
          return meta_fail (m, error, CS_META_ERROR_SHAPE, "the buffer holds %" G_GINT64_FORMAT
                            " elements, the tensors %" G_GINT64_FORMAT, cs_shape_numel (a->shape, a->rank), total);
        for (guint i = 0; i < n; i++)
          {
            int64_t shape[CS_MAX_DIMS];
            memcpy (shape, ts[i]->shape, sizeof (int64_t) * ts[i]->rank);
            if (fsdp && ts[i]->rank > 0)
              shape[0] = gather ? shape[0] * world : shape[0] / world;
            if (!out_tensor (m, ts[i]->dtype, shape, ts[i]->rank, &ts[i]->device, error))
              return FALSE;
          }
        return TRUE;
      }
    case CS_OP_DIST_UPDATE_BUCKET_VIEW:
    case CS_OP_DIST_STASH_GRAD_FOR_FSDP:
      if (!get_tensor (m, 0, NULL, &a, error))
        return FALSE;
      return out_like (m, a, a->dtype, error);
    case CS_OP_DIST_SYNCHRONIZE_TENSOR_PARALLEL_OUTPUT:
    case CS_OP_DIST_SYNCHRONIZE_TENSOR_PARALLEL_INPUT:
      {
        CsDistTpLayerType lt;
        int64_t shape[CS_MAX_DIMS];
        gboolean out = m->op->id == CS_OP_DIST_SYNCHRONIZE_TENSOR_PARALLEL_OUTPUT;
        guint n;

        if (!get_arg_tensor (m, CS_ARG_T, &a, error))
          return FALSE;
        if (!cs_dist_tp_layer_type (cs_stmt_arg (m->stmt, CS_ARG_LAYER_TYPE), &lt))
          return meta_fail (m, error, CS_META_ERROR_ARGS, "layer_type is not a TensorParallelLayerType member");
        if (!out && lt != CS_DIST_TP_COLUMN_PARALLEL_LINEAR && lt != CS_DIST_TP_ROW_PARALLEL_LINEAR)
          return meta_fail (m, error, CS_META_ERROR_ARGS, "synchronize_tensor_parallel_input takes a "
                            "column- or row-parallel linear");
        memcpy (shape, a->shape, sizeof (int64_t) * a->rank);
        n = meta_group_size (m);
        if (a->rank > 0 && out && (lt == CS_DIST_TP_COLUMN_PARALLEL_LINEAR || lt == CS_DIST_TP_ROW_PARALLEL_EMBED))
          shape[a->rank - 1] *= n;
        if (a->rank > 0 && !out && lt == CS_DIST_TP_ROW_PARALLEL_LINEAR)
          shape[a->rank - 1] /= n;
        return out_tensor (m, a->dtype, shape, a->rank, &a->device, error);
      }
    default:
      return meta_fail (m, error, CS_META_ERROR_UNSUPPORTED, "no meta function");
    }
}

static const CsOp *
semantic_op (const CsStmt *stmt)
{
  const CsOp *op = stmt->op ? stmt->op : cs_op_lookup (stmt->callee);

  return cs_op_semantic (op);
}

/* ------------------------------------------------------------------------------------------ */
/* The meta families (CsMetaKind): one factory each, parametrised by the row's meta_arg        */

static gboolean
meta_family_ew_prim (Meta *m, GError **error)
{
  const CsOp *op = m->op;
  guint n = cs_op_has_tag (op, CS_OP_TAG_TERNARY) ? 3 : cs_op_has_tag (op, CS_OP_TAG_BINARY) ? 2 : 1;

  return meta_prim_elementwise (m, n, error);
}

static gboolean
meta_family_ew (Meta *m, GError **error)
{
  const CsOp *op = m->op;
  guint n = cs_op_has_tag (op, CS_OP_TAG_TERNARY) ? 3 : cs_op_has_tag (op, CS_OP_TAG_BINARY) ? 2 : 1;

  /* div(rounding_mode='trunc'/'floor') keeps integer results (DEFAULT) */
  if (op->id == CS_OP_LTORCH_DIV)
    {
      CsValue *rm = sarg (m, CS_ARG_ROUNDING_MODE);
      if (rm && rm->kind == CS_VALUE_STRING)
        return meta_ltorch_elementwise (m, 2, CS_PROMO_DEFAULT, error);
    }
  return meta_ltorch_elementwise (m, n, (CsPromoKind) op->meta_arg, error);
}

static gboolean
meta_family_where (Meta *m, GError **error)
{
  Operand ops[3];
  CsDtypeRef refs[2], res;
  int64_t shape[CS_MAX_DIMS];
  guint rank;
  CsDevice device = { CS_DEVICE_CUDA, 0 };
  gboolean any;
  GError *perr = NULL;

  for (guint i = 0; i < 3; i++)
    if (!get_operand (m, i, NULL, &ops[i], error))
      return FALSE;
  if (ops[0].tensor && ops[0].tensor->dtype != CS_DTYPE_B8)
    return meta_fail (m, error, CS_META_ERROR_DTYPE, "the condition %s is %s, not bool",
                      ops[0].tensor->name, cs_dtype_short_name (ops[0].tensor->dtype));
  refs[0] = operand_ref (&ops[1]);
  refs[1] = operand_ref (&ops[2]);
  if (!broadcast_operands (m, ops, 3, shape, &rank, &device, &any, error))
    return FALSE;
  if (!cs_promote_elementwise (refs, 2, CS_PROMO_PRESERVE, NULL, &res, &perr))
    {
      meta_fail (m, error, CS_META_ERROR_DTYPE, "%s", perr->message);
      g_error_free (perr);
      return FALSE;
    }
  if (!any)
    return out_number (m, res.pytype ? res.pytype : CS_PYTYPE_FLOAT);
  return out_tensor (m, res.dtype, shape, rank, &device, error);
}

static gboolean
meta_family_same (Meta *m, GError **error)
{
  CsProxy *a;

  if (!get_arg_tensor (m, CS_ARG_A, &a, error))
    return FALSE;
  if (a->rank < m->op->meta_arg)
    return meta_fail (m, error, CS_META_ERROR_SHAPE, "%s needs at least %u dims, got %u",
                      m->op->short_name, m->op->meta_arg, a->rank);
  return out_like (m, a, a->dtype, error);
}

static gboolean
meta_family_cast (Meta *m, GError **error)
{
  CsProxy *a;

  if (!get_arg_tensor (m, CS_ARG_A, &a, error))
    return FALSE;
  return out_like (m, a, (CsDtype) m->op->meta_arg, error);
}

static gboolean
meta_family_reduction_prim (Meta *m, GError **error)
{
  CsProxy *a;

  if (!get_arg_tensor (m, CS_ARG_A, &a, error))
    return FALSE;
  return meta_prim_reduction (m, CS_ARG_DIMS, a->dtype, 1, error);
}

typedef gboolean (*MetaFactory) (Meta *m, GError **error);

static const MetaFactory meta_families[CS_N_META_KINDS] = {
  [CS_META_EW_PRIM] = meta_family_ew_prim,
  [CS_META_EW] = meta_family_ew,
  [CS_META_WHERE] = meta_family_where,
  [CS_META_SAME] = meta_family_same,
  [CS_META_CAST] = meta_family_cast,
  [CS_META_REDUCTION_PRIM] = meta_family_reduction_prim,
  [CS_META_REDUCTION] = meta_ltorch_reduction,
  [CS_META_MATMUL] = meta_matmul,
  [CS_META_LINEAR] = meta_linear,
};

static gboolean
dispatch (Meta *m, GError **error)
{
  const CsOp *op = m->op;
  CsProxy *a;

  if (op->category == CS_OP_CAT_DISTRIBUTED)
    return meta_dist (m, error);
  if (op->meta != CS_META_NONE && meta_families[op->meta] != NULL)
    return meta_families[op->meta] (m, error);
  switch (op->id)
    {
    /* ---- prims ---- */
    case CS_OP_PRIM_CONVERT_ELEMENT_TYPE:
      return meta_convert (m, error);
    case CS_OP_PRIM_BROADCAST_IN_DIM:
      return meta_broadcast_in_dim (m, error);
    case CS_OP_PRIM_RESHAPE:
    case CS_OP_PRIM_VIEW:
      {
        int64_t shape[CS_MAX_DIMS];
        guint n;

        if (!get_arg_tensor (m, CS_ARG_A, &a, error)
            || !get_int_seq (m, cs_stmt_arg (m->stmt, CS_ARG_SHAPE), "shape", shape, &n, error)
            || !resolve_reshape (m, a, shape, n, FALSE, error))
          return FALSE;
        return out_tensor (m, a->dtype, shape, n, &a->device, error);
      }
    case CS_OP_PRIM_TRANSPOSE:
      {
        int64_t perm[CS_MAX_DIMS];
        guint n;

        if (!get_arg_tensor (m, CS_ARG_A, &a, error)
            || !get_int_seq (m, cs_stmt_arg (m->stmt, CS_ARG_PERMUTATION), "permutation", perm, &n, error)
            || !check_permutation (m, a->rank, perm, n, error))
          return FALSE;
        return out_permuted (m, a, perm, error);
      }
    case CS_OP_PRIM_SQUEEZE:
      return meta_prim_squeeze (m, error);
    case CS_OP_PRIM_SLICE_PRIM:
      return meta_slice (m, error);
    case CS_OP_PRIM_CAT:
      return meta_cat (m, TRUE, error);
    case CS_OP_PRIM_PAD:
      return meta_pad (m, error);
    case CS_OP_PRIM_DEVICE_PUT:
      {
        CsDevice dev;
        if (!get_arg_tensor (m, CS_ARG_A, &a, error))
          return FALSE;
        if (!cs_value_get_device (sarg (m, CS_ARG_DEVICE), &dev))
          return meta_fail (m, error, CS_META_ERROR_ARGS, "the second argument must be a device");
        return out_tensor (m, a->dtype, a->shape, a->rank, &dev, error);
      }
    case CS_OP_PRIM_VAR:
    case CS_OP_PRIM_VAR_MEAN:
      if (!get_arg_tensor (m, CS_ARG_A, &a, error))
        return FALSE;
      if (!cs_dtype_is_inexact (a->dtype))
        return meta_fail (m, error, CS_META_ERROR_DTYPE, "variance needs a float input, not %s",
                          cs_dtype_short_name (a->dtype));
      if (op->id == CS_OP_PRIM_VAR)
        return meta_prim_reduction (m, CS_ARG_DIMS, real_dtype (a->dtype), 1, error);
      /* (var, mean): var is real, mean keeps the dtype */
      if (!meta_prim_reduction (m, CS_ARG_DIMS, real_dtype (a->dtype), 2, error))
        return FALSE;
      m->out[m->n_out - 1].dtype = a->dtype;
      return TRUE;
    case CS_OP_EX_SDPAFX_SCALED_DOT_PRODUCT_EFFICIENT_ATTENTION_BACKWARD:
    case CS_OP_EX_SDPAEX_SCALED_DOT_PRODUCT_EFFICIENT_ATTENTION_BACKWARD:
      {
        /* thunder/executors/sdpaex.py, the backward metas: grad_query, grad_key, grad_value like
         * query, key, value (arguments 1-3, after grad_out); the memory-efficient form also
         * grad_attn_mask, like attn_mask (argument 4), or None without one */
        CsProxy *qkv[3];
        CsValue *mask;

        for (guint i = 0; i < 3; i++)
          if (!get_tensor (m, i + 1, NULL, &qkv[i], error) || !out_like (m, qkv[i], qkv[i]->dtype, error))
            return FALSE;
        if (op->id == CS_OP_EX_SDPAFX_SCALED_DOT_PRODUCT_EFFICIENT_ATTENTION_BACKWARD)
          return TRUE;
        mask = sarg (m, CS_ARG_ATTN_MASK);
        if (mask != NULL && mask->kind == CS_VALUE_PROXY && mask->u.proxy->kind == CS_PROXY_TENSOR
            && mask->u.proxy->typed)
          return out_like (m, mask->u.proxy, mask->u.proxy->dtype, error);
        return out_number (m, CS_PYTYPE_NONE) || meta_fail (m, error, CS_META_ERROR_ARGS, "too many outputs");
      }
    case CS_OP_PRIM_ARGMAX:
    case CS_OP_PRIM_ARGMIN:
      {
        CsValue *dv = sarg (m, CS_ARG_DIM);
        if (!get_arg_tensor (m, CS_ARG_A, &a, error))
          return FALSE;
        if (value_is_none (dv))
          return out_tensor (m, CS_DTYPE_I64, NULL, 0, &a->device, error);
        return meta_prim_reduction (m, CS_ARG_DIM, CS_DTYPE_I64, 1, error);
      }
    case CS_OP_PRIM_TAKE:
      return meta_take (m, error);
    case CS_OP_PRIM_TAKE_ALONG_AXIS:
    case CS_OP_PRIM_GATHER:
      return meta_take_along (m, FALSE, error);
    case CS_OP_PRIM_EMBEDDING:
      return meta_embedding (m, error);
    case CS_OP_PRIM_FULL:
    case CS_OP_PRIM_UNIFORM:
      return meta_full_like_shape (m, error);
    case CS_OP_PRIM_IOTA:
      return meta_iota (m, FALSE, error);

    /* ---- ltorch ---- */
    case CS_OP_LTORCH_DROPOUT:
      {
        CsPyType pt;
        double p = 0.5;
        CsValue *pv = sarg (m, CS_ARG_P);

        if (!get_arg_tensor (m, CS_ARG_A, &a, error))
          return FALSE;
        if (pv && (!value_number (pv, &pt, &p) || p < 0 || p > 1))
          return meta_fail (m, error, CS_META_ERROR_ARGS, "dropout probability must be in [0, 1]");
        return out_like (m, a, a->dtype, error);
      }
    case CS_OP_LTORCH__SOFTMAX:
    case CS_OP_LTORCH_LOG_SOFTMAX:
      return meta_softmax (m, error);
    case CS_OP_LTORCH_LAYER_NORM:
      return meta_norm (m, TRUE, error);
    case CS_OP_LTORCH_RMS_NORM:
      return meta_norm (m, FALSE, error);
    case CS_OP_LTORCH_TO:
      return meta_to (m, error);
    case CS_OP_LTORCH_TYPE_AS:
      {
        CsProxy *b;
        if (!get_arg_tensor (m, CS_ARG_A, &a, error) || !get_arg_tensor (m, CS_ARG_B, &b, error))
          return FALSE;
        return out_like (m, a, b->dtype, error);
      }
    case CS_OP_LTORCH_RESHAPE:
    case CS_OP_LTORCH_VIEW:
      {
        int64_t shape[CS_MAX_DIMS];
        guint n;

        if (!get_arg_tensor (m, CS_ARG_A, &a, error) || !get_varargs_shape (m, 1, shape, &n, error)
            || !resolve_reshape (m, a, shape, n, TRUE, error))
          return FALSE;
        return out_tensor (m, a->dtype, shape, n, &a->device, error);
      }
    case CS_OP_LTORCH_FLATTEN:
      {
        int64_t s, e, shape[CS_MAX_DIMS];
        guint ds, de, r = 0;

        if (!get_arg_tensor (m, CS_ARG_A, &a, error) || !get_int_named (m, CS_ARG_START_DIM, 0, &s, error)
            || !get_int_named (m, CS_ARG_END_DIM, -1, &e, error))
          return FALSE;
        if (a->rank == 0)
          {
            int64_t one = 1;
            return out_tensor (m, a->dtype, &one, 1, &a->device, error);
          }
        if (!canon_dim (m, a->rank, s, &ds, error) || !canon_dim (m, a->rank, e, &de, error))
          return FALSE;
        if (ds > de)
          return meta_fail (m, error, CS_META_ERROR_SHAPE, "start_dim comes after end_dim");
        for (guint i = 0; i < ds; i++)
          shape[r++] = a->shape[i];
        shape[r++] = cs_shape_numel (a->shape + ds, de - ds + 1);
        for (guint i = de + 1; i < a->rank; i++)
          shape[r++] = a->shape[i];
        return out_tensor (m, a->dtype, shape, r, &a->device, error);
      }
    case CS_OP_LTORCH_TRANSPOSE:
      {
        int64_t d0, d1, perm[CS_MAX_DIMS];
        guint c0, c1;

        if (!get_arg_tensor (m, CS_ARG_A, &a, error) || !get_int_named (m, CS_ARG_DIM0, 0, &d0, error)
            || !get_int_named (m, CS_ARG_DIM1, 0, &d1, error))
          return FALSE;
        if (!canon_dim (m, a->rank, d0, &c0, error) || !canon_dim (m, a->rank, d1, &c1, error))
          return FALSE;
        if (a->rank == 0)
          return out_like (m, a, a->dtype, error);
        for (guint i = 0; i < a->rank; i++)
          perm[i] = i;
        perm[c0] = c1;
        perm[c1] = c0;
        return out_permuted (m, a, perm, error);
      }
    case CS_OP_LTORCH_PERMUTE:
      {
        int64_t perm[CS_MAX_DIMS];
        guint n;

        if (!get_arg_tensor (m, CS_ARG_A, &a, error) || !get_varargs_shape (m, 1, perm, &n, error)
            || !check_permutation (m, a->rank, perm, n, error))
          return FALSE;
        return out_permuted (m, a, perm, error);
      }
    case CS_OP_LTORCH_EXPAND:
      {
        int64_t shape[CS_MAX_DIMS];
        guint n;

        if (!get_arg_tensor (m, CS_ARG_A, &a, error) || !get_varargs_shape (m, 1, shape, &n, error))
          return FALSE;
        if (n < a->rank)
          return meta_fail (m, error, CS_META_ERROR_SHAPE, "the requested shape has too few dims");
        for (guint i = 0; i < a->rank; i++)
          {
            guint k = n - a->rank + i;
            if (shape[k] == -1)
              shape[k] = a->shape[i];
            else if (shape[k] != a->shape[i] && a->shape[i] != 1)
              {
                g_autofree char *s1 = format_proxy_shape (a);
                g_autofree char *s2 = cs_meta_format_shape (shape, n);
                return meta_fail (m, error, CS_META_ERROR_SHAPE, "cannot expand %s to %s", s1, s2);
              }
          }
        for (guint i = 0; i < n; i++)
          if (shape[i] < 0)
            return meta_fail (m, error, CS_META_ERROR_SHAPE, "-1 is only allowed for existing dims");
        return out_tensor (m, a->dtype, shape, n, &a->device, error);
      }
    case CS_OP_LTORCH_UNSQUEEZE:
      {
        int64_t dim, shape[CS_MAX_DIMS];
        guint d, r = 0;

        if (!get_arg_tensor (m, CS_ARG_A, &a, error) || !get_int_named (m, CS_ARG_DIM, 0, &dim, error))
          return FALSE;
        if (a->rank + 1 > CS_MAX_DIMS)
          return meta_fail (m, error, CS_META_ERROR_SHAPE, "too many dims");
        if (!canon_dim (m, a->rank + 1, dim, &d, error))
          return FALSE;
        for (guint i = 0; i <= a->rank; i++)
          {
            if (i == d)
              shape[r++] = 1;
            if (i < a->rank)
              shape[r++] = a->shape[i];
          }
        return out_tensor (m, a->dtype, shape, r, &a->device, error);
      }
    case CS_OP_LTORCH_SQUEEZE:
      {
        CsValue *dv = sarg (m, CS_ARG_DIM);
        int64_t dims[CS_MAX_DIMS], shape[CS_MAX_DIMS];
        gboolean mask[CS_MAX_DIMS] = { 0 };
        guint n = 0, r = 0;

        if (!get_arg_tensor (m, CS_ARG_A, &a, error))
          return FALSE;
        if (value_is_none (dv))
          {
            for (guint i = 0; i < a->rank; i++)
              mask[i] = a->shape[i] == 1;
          }
        else
          {
            if (!get_int_seq (m, dv, "dim", dims, &n, error))
              return FALSE;
            for (guint i = 0; i < n; i++)
              {
                guint d;
                if (!canon_dim (m, a->rank, dims[i], &d, error))
                  return FALSE;
                if (a->rank > 0 && a->shape[d] == 1)
                  mask[d] = TRUE;
              }
          }
        for (guint i = 0; i < a->rank; i++)
          if (!mask[i])
            shape[r++] = a->shape[i];
        return out_tensor (m, a->dtype, shape, r, &a->device, error);
      }
    case CS_OP_LTORCH_GETITEM:
      return meta_getitem (m, error);
    case CS_OP_LTORCH_CAT:
      return meta_cat (m, FALSE, error);
    case CS_OP_LTORCH_SPLIT:
      return meta_split (m, error);
    case CS_OP_LTORCH_EMBEDDING:
      return meta_embedding (m, error);
    case CS_OP_LTORCH_TAKE_ALONG_DIM:
      return meta_take_along (m, TRUE, error);
    case CS_OP_LTORCH_CROSS_ENTROPY:
      return meta_loss (m, error);
    case CS_OP_LTORCH_NLL_LOSS:
      return meta_loss (m, error);
    case CS_OP_LTORCH_SCALED_DOT_PRODUCT_ATTENTION:
      return meta_sdpa (m, error);
    case CS_OP_LTORCH_ARANGE:
      return meta_iota (m, TRUE, error);
    case CS_OP_LTORCH_FULL:
    case CS_OP_LTORCH_ZEROS:
    case CS_OP_LTORCH_ONES:
      {
        /* full(shape, fill_value, device=, dtype=); zeros/ones(*shape, device=, dtype=):
         * dtype from the fill value's Python type (bool, int64, float32) or float32 */
        int64_t shape[CS_MAX_DIMS];
        guint n;
        CsDtype dtype = CS_DTYPE_F32;
        CsDevice dev = { CS_DEVICE_CPU, 0 };
        CsValue *dv = sarg (m, CS_ARG_DTYPE), *devv = sarg (m, CS_ARG_DEVICE);

        if (op->id == CS_OP_LTORCH_FULL)
          {
            CsPyType pt;

            if (!get_int_seq (m, sarg (m, CS_ARG_SHAPE), "shape", shape, &n, error))
              return FALSE;
            if (!value_number (sarg (m, CS_ARG_FILL_VALUE), &pt, NULL))
              return meta_fail (m, error, CS_META_ERROR_UNSUPPORTED, "only a number fill_value is supported");
            dtype = pt == CS_PYTYPE_BOOL ? CS_DTYPE_B8 : pt == CS_PYTYPE_INT ? CS_DTYPE_I64
                    : pt == CS_PYTYPE_COMPLEX ? CS_DTYPE_C64 : CS_DTYPE_F32;
          }
        else if (!get_varargs_shape (m, 0, shape, &n, error))
          return FALSE;
        for (guint i = 0; i < n; i++)
          if (shape[i] < 0)
            return meta_fail (m, error, CS_META_ERROR_SHAPE, "negative dim in shape");
        if (!value_is_none (dv) && !cs_value_get_dtype (dv, &dtype))
          return meta_fail (m, error, CS_META_ERROR_ARGS, "dtype= is not a dtype");
        if (!value_is_none (devv) && !cs_value_get_device (devv, &dev))
          return meta_fail (m, error, CS_META_ERROR_ARGS, "device= is not a device");
        return out_tensor (m, dtype, shape, n, &dev, error);
      }
    case CS_OP_LTORCH_NLL_LOSS_BACKWARD:
      {
        /* nll_loss_backward(g, a, target, weight, reduction, ignore_index, total_weight):
         * a's shape, g's dtype (thunder/torch/__init__.py: TensorProxy(like=g, shape=a.shape)) */
        CsProxy *g;
        if (!get_arg_tensor (m, CS_ARG_G, &g, error) || !get_arg_tensor (m, CS_ARG_A, &a, error))
          return FALSE;
        return out_tensor (m, g->dtype, a->shape, a->rank, &g->device, error);
      }
    case CS_OP_LTORCH_LOG_SOFTMAX_BACKWARD:
      {
        /* log_softmax_backward(g, output, dim, dtype): g's shape, dtype */
        CsProxy *g;
        CsDtype dtype;
        if (!get_arg_tensor (m, CS_ARG_G, &g, error))
          return FALSE;
        dtype = g->dtype;
        if (!value_is_none (sarg (m, CS_ARG_DTYPE)) && !cs_value_get_dtype (sarg (m, CS_ARG_DTYPE), &dtype))
          return meta_fail (m, error, CS_META_ERROR_ARGS, "dtype is not a dtype");
        return out_like (m, g, dtype, error);
      }
    case CS_OP_LTORCH_EMBEDDING_BACKWARD:
      {
        /* embedding_backward(grad, indices, num_weights, ...): [num_weights, grad.shape[-1]] */
        CsProxy *g;
        int64_t shape[2];
        if (!get_arg_tensor (m, CS_ARG_GRAD, &g, error) || !get_int_named (m, CS_ARG_NUM_WEIGHTS, -1, &shape[0], error))
          return FALSE;
        if (g->rank == 0 || shape[0] < 0)
          return meta_fail (m, error, CS_META_ERROR_SHAPE, "needs a grad with dims and num_weights >= 0");
        shape[1] = g->shape[g->rank - 1];
        return out_tensor (m, g->dtype, shape, 2, &g->device, error);
      }
    case CS_OP_LTORCH_UNIFORM_LIKE:
      {
        /* uniform_like(a, minval, maxval, *, device=, dtype=): a's shape, dtype= or a's */
        CsDtype dt;
        CsValue *dv = sarg (m, CS_ARG_DTYPE);

        if (!get_arg_tensor (m, CS_ARG_A, &a, error))
          return FALSE;
        dt = a->dtype;
        if (!value_is_none (dv) && !cs_value_get_dtype (dv, &dt))
          return meta_fail (m, error, CS_META_ERROR_ARGS, "dtype= is not a dtype");
        return out_like (m, a, dt, error);
      }
    case CS_OP_LTORCH_FULL_LIKE:
    case CS_OP_LTORCH_ZEROS_LIKE:
    case CS_OP_LTORCH_ONES_LIKE:
      {
        CsDtype dtype;
        CsDevice dev;
        CsValue *dv = sarg (m, CS_ARG_DTYPE), *devv = sarg (m, CS_ARG_DEVICE);

        if (!get_arg_tensor (m, CS_ARG_A, &a, error))
          return FALSE;
        dtype = a->dtype;
        dev = a->device;
        if (!value_is_none (dv) && !cs_value_get_dtype (dv, &dtype))
          return meta_fail (m, error, CS_META_ERROR_ARGS, "dtype= is not a dtype");
        if (!value_is_none (devv) && !cs_value_get_device (devv, &dev))
          return meta_fail (m, error, CS_META_ERROR_ARGS, "device= is not a device");
        return out_tensor (m, dtype, a->shape, a->rank, &dev, error);
      }
    default:
      break;
    }

  {
    CsProxy *o = cs_stmt_get_output (m->stmt);

    return meta_fail (m, error, CS_META_ERROR_UNSUPPORTED, "no shape/dtype rule for this op%s%s%s",
                      o ? " (statement computing " : "", o ? o->name : "", o ? ")" : "");
  }
}

gboolean
cs_meta_supports (const CsStmt *stmt)
{
  const CsOp *op;

  g_return_val_if_fail (stmt != NULL, FALSE);
  if (stmt->kind != CS_STMT_CALL)
    return FALSE;
  op = semantic_op (stmt);
  /* executor-only symbols (sdpafx_*, apex_*, nv_cross_entropy_*) have no ltorch/prim meaning */
  if (cs_op_has_tag (op, CS_OP_TAG_EXECUTOR))
    return FALSE;
  /* torch.compile's own aten ops come typed by their graph; decomposing one checks its
   * lowering's types against the graph's (cs-aten-lower.c) */
  if (cs_op_has_tag (op, CS_OP_TAG_ATEN))
    return FALSE;
  switch (op->category)
    {
    case CS_OP_CAT_OPAQUE:
    case CS_OP_CAT_FUSION:
    case CS_OP_CAT_BOOKKEEPING:
      return FALSE;
    default:
      break;
    }
  switch (op->id)
    {
    case CS_OP_PRIM_UNIFORM_PHILOX:
    case CS_OP_PRIM_RANDN:
    case CS_OP_PRIM_RANDINT:
    case CS_OP_PRIM_EMPTY:
    case CS_OP_PRIM_EXOGENOUS_LIKE:
    case CS_OP_PRIM_TENSOR_FROM_SEQUENCE:
    case CS_OP_PRIM_MULTINOMIAL:
    case CS_OP_PRIM_FLIP:
    case CS_OP_PRIM_UNFOLD:
    case CS_OP_PRIM_STD:
    case CS_OP_PRIM_TOPK:
    case CS_OP_PRIM_SORT:
    case CS_OP_PRIM_SCATTER:
    case CS_OP_PRIM_SCATTER_ADD:
    case CS_OP_PRIM_INDEX_ADD:
    case CS_OP_PRIM_INDEX_COPY:
    case CS_OP_PRIM_INDEX_PUT:
    case CS_OP_PRIM_EMBEDDING_BACKWARD:
    case CS_OP_PRIM_GROUPED_MM:
    case CS_OP_PRIM_CONVOLUTION:
    case CS_OP_PRIM_FREXP:
      return FALSE;
    default:
      break;
    }
  if (op->category == CS_OP_CAT_ELEMENTWISE)
    return op->promo != CS_PROMO_NONE || op->meta != CS_META_NONE;
  return TRUE;
}

gboolean
cs_meta_compute (CsTrace *trace, const CsStmt *stmt, CsMetaType *out_types, guint max_out,
                 guint *n_out, GError **error)
{
  Meta m = { 0 };

  g_return_val_if_fail (trace != NULL && stmt != NULL && out_types != NULL, FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  m.trace = trace;
  m.stmt = stmt;
  m.op = semantic_op (stmt);
  m.out = out_types;
  m.max_out = max_out;
  m.n_out = 0;
  *n_out = 0;
  if (stmt->kind != CS_STMT_CALL)
    return meta_fail (&m, error, CS_META_ERROR_UNSUPPORTED, "not a call statement");
  if (!dispatch (&m, error))
    return FALSE;
  *n_out = m.n_out;
  return TRUE;
}

/* Output leaves of a target tree (PROXY and UNDERSCORE values), depth first: the first @max go
 * to @out, *@n counts them all. */
static void
collect_leaves (CsValue *v, CsValue **out, guint max, guint *n)
{
  if (v == NULL)
    return;
  if (v->kind == CS_VALUE_TUPLE || v->kind == CS_VALUE_LIST)
    {
      for (guint i = 0; i < v->u.seq.n; i++)
        collect_leaves (v->u.seq.items[i], out, max, n);
      return;
    }
  if (*n < max)
    out[*n] = v;
  (*n)++;
}

/* cs_meta_infer() with @set_untyped; FALSE only compares the typed outputs and leaves @trace
 * and @stmt as they were. */
static gboolean
infer_stmt (CsTrace *trace, const CsStmt *stmt, gboolean set_untyped, GError **error)
{
  CsMetaType types_stack[MAX_OUT];
  guint n = 0;
  CsValue *leaves_stack[MAX_OUT];
  guint n_leaves = 0, cap = MAX_OUT;
  Meta m = { 0 };
  g_autofree CsMetaType *types_heap = NULL;
  g_autofree CsValue **leaves_heap = NULL;
  CsMetaType *types = types_stack;
  CsValue **leaves = leaves_stack;

  g_return_val_if_fail (trace != NULL && stmt != NULL, FALSE);
  m.stmt = stmt;

  collect_leaves (stmt->out, leaves, MAX_OUT, &n_leaves);
  if (n_leaves > MAX_OUT)
    {
      /* a statement with many outputs (distributed unpack of a bucket of gradients) */
      cap = n_leaves;
      types = types_heap = g_new (CsMetaType, cap);
      leaves = leaves_heap = g_new (CsValue *, cap);
      n_leaves = 0;
      collect_leaves (stmt->out, leaves, cap, &n_leaves);
    }
  if (!cs_meta_compute (trace, stmt, types, cap, &n, error))
    return FALSE;
  if (n_leaves == 0)
    return TRUE;    /* a bare call: nothing to type */
  if (n_leaves != n)
    return meta_fail (&m, error, CS_META_ERROR_MISMATCH, "the statement names %u outputs but the op gives %u",
                      n_leaves, n);
  for (guint i = 0; i < n; i++)
    {
      CsValue *lv = leaves[i];
      CsProxy *p;
      const CsMetaType *t = &types[i];

      if (lv->kind != CS_VALUE_PROXY || t->kind != CS_PROXY_TENSOR)
        continue;
      p = lv->u.proxy;
      if (!p->typed || (p->kind == CS_PROXY_OTHER && p->type_raw == NULL))
        {
          if (set_untyped)
            cs_proxy_set_tensor (trace, p, t->dtype, t->shape, t->rank, &t->device);
          continue;
        }
      if (p->kind != CS_PROXY_TENSOR || p->dtype != t->dtype
          || !same_shape (p->shape, p->rank, t->shape, t->rank)
          || !cs_device_equal (&p->device, &t->device))
        {
          g_autofree char *got = p->kind == CS_PROXY_TENSOR ? format_type (p->dtype, p->shape, p->rank)
                                                            : cs_proxy_type_string (p);
          g_autofree char *want = format_type (t->dtype, t->shape, t->rank);
          g_autofree char *dev_got = p->kind == CS_PROXY_TENSOR ? cs_device_to_string (&p->device) : g_strdup ("");
          g_autofree char *dev_want = cs_device_to_string (&t->device);

          return meta_fail (&m, error, CS_META_ERROR_MISMATCH,
                            "output %s is typed \"%s %s\" but its arguments give \"%s %s\"", p->name,
                            dev_got, got, dev_want, want);
        }
    }
  return TRUE;
}

gboolean
cs_meta_infer (CsTrace *trace, CsStmt *stmt, GError **error)
{
  return infer_stmt (trace, stmt, TRUE, error);
}

/* "t1 bf16[32, 256], w2 bf16[64, 128]": the typed tensors @s reads, the first 6. */
static char *
format_tensor_args (const CsStmt *s)
{
  g_autoptr(GPtrArray) reads = g_ptr_array_new ();
  GString *out = g_string_new (NULL);
  guint n = 0;

  cs_stmt_collect_inputs (s, reads);
  for (guint k = 0; k < reads->len; k++)
    {
      const CsProxy *p = reads->pdata[k];
      g_autofree char *type = NULL;
      gboolean seen = FALSE;

      if (p->kind != CS_PROXY_TENSOR || !p->typed)
        continue;
      for (guint j = 0; j < k && !seen; j++)
        seen = reads->pdata[j] == p;
      if (seen)
        continue;
      if (n++ == 6)
        {
          g_string_append (out, ", ...");
          break;
        }
      type = format_type (p->dtype, p->shape, p->rank);
      g_string_append_printf (out, "%s%s %s", out->len ? ", " : "", p->name, type);
    }
  return g_string_free (out, FALSE);
}

gboolean
cs_meta_check_trace (const CsTrace *trace, GError **error)
{
  g_return_val_if_fail (trace != NULL, FALSE);

  for (guint i = 0; i < trace->n_stmts; i++)
    {
      const CsStmt *s = trace->stmts[i];
      g_autoptr(GError) local = NULL;
      g_autofree char *prefix = NULL, *targs = NULL;
      const char *msg;

      const CsOpArg *bad;
      const CsValue *bad_value = NULL;
      const char *kw;
      guint n_extra, n_declared = 0;

      if (s->kind != CS_STMT_CALL)
        continue;
      if ((bad = cs_stmt_find_non_string_arg (s, &bad_value)) != NULL)
        {
          g_autoptr(GString) shown = g_string_new (NULL);
          cs_print_value_to (shown, bad_value);
          g_set_error (error, CS_META_ERROR, CS_META_ERROR_ARGS,
                       "%s:%u:%u: %s: argument '%s' takes a string or None, not %s",
                       trace->file ? trace->file : "<trace>", s->line, s->col ? s->col : 1,
                       s->callee, cs_arg_name (bad->name), shown->str);
          return FALSE;
        }
      if ((kw = cs_stmt_find_unknown_keyword (s)) != NULL)
        {
          const CsOp *op = cs_stmt_schema_op (s);
          g_autoptr(GString) known = g_string_new (NULL);
          for (guint k = 0; k < op->n_args; k++)
            g_string_append_printf (known, "%s%s", k ? ", " : "", cs_arg_name (op->args[k].name));
          g_set_error (error, CS_META_ERROR, CS_META_ERROR_ARGS,
                       "%s:%u:%u: %s: unexpected keyword argument '%s' (its arguments: %s)",
                       trace->file ? trace->file : "<trace>", s->line, s->col ? s->col : 1,
                       s->callee, kw, known->str);
          return FALSE;
        }
      if ((n_extra = cs_stmt_count_extra_positional (s, &n_declared)) > 0)
        {
          g_set_error (error, CS_META_ERROR, CS_META_ERROR_ARGS,
                       "%s:%u:%u: %s: takes %u positional argument%s but %u were given",
                       trace->file ? trace->file : "<trace>", s->line, s->col ? s->col : 1,
                       s->callee, n_declared, n_declared == 1 ? "" : "s", n_declared + n_extra);
          return FALSE;
        }
      if (!cs_meta_supports (s))
        continue;
      /* the meta functions read the trace only (a collective's group size) */
      if (infer_stmt ((CsTrace *) trace, s, FALSE, &local))
        continue;
      /* an argument the meta cannot read (an untyped or opaque operand) is not a conflict */
      if (local->code == CS_META_ERROR_ARGS || local->code == CS_META_ERROR_UNSUPPORTED)
        continue;
      msg = local->message;
      prefix = s->line > 0 ? g_strdup_printf ("line %u: %s: ", s->line, s->callee)
                           : g_strdup_printf ("%s: ", s->callee);
      if (g_str_has_prefix (msg, prefix))
        msg += strlen (prefix);
      targs = format_tensor_args (s);
      if (s->line > 0)
        g_set_error (error, CS_META_ERROR, local->code, "%s:%u:%u: %s: %s%s%s",
                     trace->file ? trace->file : "<trace>", s->line, s->col ? s->col : 1,
                     s->callee, msg, targs[0] ? "; its tensor arguments: " : "", targs);
      else
        g_set_error (error, CS_META_ERROR, local->code, "%s: %s: %s%s%s",
                     trace->file ? trace->file : "<trace>", s->callee, msg,
                     targs[0] ? "; its tensor arguments: " : "", targs);
      return FALSE;
    }
  return TRUE;
}

gboolean
cs_meta_infer_trace (CsTrace *trace, GError **error)
{
  g_return_val_if_fail (trace != NULL, FALSE);

  for (guint i = 0; i < trace->n_stmts; i++)
    {
      CsStmt *s = trace->stmts[i];

      if (s->kind != CS_STMT_CALL || !cs_meta_supports (s))
        continue;
      if (!cs_meta_infer (trace, s, error))
        return FALSE;
    }
  return TRUE;
}
