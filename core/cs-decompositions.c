/* cs-decompositions.c: the ltorch -> prims decompositions (Thunder's initial-trace subsymbols).
 *
 * Structure: each ltorch op has a builder that reads the statement's arguments and emits
 * statements into a list, returning the value that holds the result (a proxy value, or a
 * tuple for multi-output ops).  Prims are emitted with emit(); calls of other ltorch symbols
 * (where Thunder's Python code calls a torchsymbol or uses an operator on a TensorProxy inside
 * an ltorch function) are emitted with call_ltorch(), which builds the nested statement and its
 * own subsymbols.  clang helpers (thunder/clang) are inlined as prims, as in Thunder.
 * Every emitted statement is typed by cs_meta_infer().  The pass that applies them (renaming a
 * decomposition's results to the statement's outputs, down to prims, over a trace) is
 * cs-decompose.c.
 */
#include "cs-config.h"

#include "cs-decompose-private.h"

#include "cs-aten-private.h"

#include "cs-meta.h"
#include "cs-ops.h"
#include "cs-ops-args.h"
#include "cs-promote.h"

#include <math.h>
#include <stdarg.h>
#include <string.h>

/* Arguments of a statement under construction. */
typedef struct
{
  CsArg a[CS_MAX_DIMS + 8];/* printed order: positional, then keyword */
  guint n;                 /* used entries */
} Args;

typedef CsValue *(*BuildFn) (Dx *dx, const CsStmt *s, GPtrArray *out, GError **error);

/* ------------------------------------------------------------------------------------------ */
/* Errors                                                                                      */

gpointer
_cs_decompose_fail (const CsStmt *s, GError **error, CsDecomposeError code, const char *fmt, ...)
{
  g_autofree char *msg = NULL;
  va_list ap;

  va_start (ap, fmt);
  msg = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  if (s->line > 0)
    g_set_error (error, CS_DECOMPOSE_ERROR, code, "line %u: %s: %s", s->line, s->callee, msg);
  else
    g_set_error (error, CS_DECOMPOSE_ERROR, code, "%s: %s", s->callee, msg);
  return NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* Values                                                                                      */

static CsArena *
arena (Dx *dx)
{
  return dx->trace->arena;
}

/* TRUE when a tuple/list tree @v has a missing (NULL) item. */
static gboolean
has_null_item (const CsValue *v)
{
  for (guint i = 0; i < v->u.seq.n; i++)
    {
      const CsValue *it = v->u.seq.items[i];
      if (it == NULL
          || ((it->kind == CS_VALUE_TUPLE || it->kind == CS_VALUE_LIST) && has_null_item (it)))
        return TRUE;
    }
  return FALSE;
}

/* The value node an argument uses: @v itself (values are immutable; the final renaming,
 * subst_stmt, copies what it changes), `None` for a missing value, and for a tuple/list with
 * missing items a copy where they read `None`. */
static CsValue *
use (Dx *dx, CsValue *v)
{
  if (v == NULL)
    return cs_value_new_none (arena (dx));
  if ((v->kind == CS_VALUE_TUPLE || v->kind == CS_VALUE_LIST) && has_null_item (v))
    {
      guint n = v->u.seq.n;
      CsValue **items = CS_ARENA_NEW_N (arena (dx), CsValue *, MAX (n, 1));

      for (guint i = 0; i < n; i++)
        items[i] = use (dx, v->u.seq.items[i]);
      return cs_value_new_seq (arena (dx), v->kind, items, n);
    }
  return v;
}

static CsValue *
vint (Dx *dx, int64_t i)
{
  return cs_value_new_int (arena (dx), i);
}

static CsValue *
vfloat (Dx *dx, double f)
{
  return cs_value_new_float (arena (dx), f);
}

static CsValue *
vbool (Dx *dx, gboolean b)
{
  return cs_value_new_bool (arena (dx), b);
}

static CsValue *
vnone (Dx *dx)
{
  return cs_value_new_none (arena (dx));
}

static CsValue *
vdtype (Dx *dx, CsDtype d, gboolean weak)
{
  return cs_value_new_dtype (arena (dx), d, weak);
}

static CsValue *
vints (Dx *dx, CsValueKind kind, const int64_t *v, guint n)
{
  return cs_value_new_int_seq (arena (dx), kind, v, n);
}

static CsValue *
vrange (Dx *dx, CsValueKind kind, int64_t from, int64_t to)
{
  int64_t v[CS_MAX_DIMS];
  guint n = 0;

  for (int64_t i = from; i < to && n < CS_MAX_DIMS; i++)
    v[n++] = i;
  return vints (dx, kind, v, n);
}

/* devices.Device("cuda:0") */
static CsValue *
vdevice (Dx *dx, const CsDevice *dev)
{
  CsValue *v = CS_ARENA_NEW (arena (dx), CsValue);
  g_autofree char *s = cs_device_to_string (dev);

  v->kind = CS_VALUE_CALL;
  v->u.call.callee = cs_arena_strdup (arena (dx), "devices.Device");
  v->u.call.n_args = 1;
  v->u.call.args = CS_ARENA_NEW (arena (dx), CsArg);
  v->u.call.args[0].name = NULL;
  v->u.call.args[0].value = cs_value_new_string (arena (dx), s);
  /* Thunder prints devices.Device("cuda:0") with double quotes */
  v->u.call.args[0].value->raw = cs_arena_printf (arena (dx), "\"%s\"", s);
  return v;
}

static gboolean
is_none (const CsValue *v)
{
  return v == NULL || v->kind == CS_VALUE_NONE;
}

static CsProxy *
tensor_of (const CsValue *v)
{
  if (v != NULL && v->kind == CS_VALUE_PROXY && v->u.proxy->kind == CS_PROXY_TENSOR && v->u.proxy->typed)
    return v->u.proxy;
  return NULL;
}

static gboolean
number_of (const CsValue *v, CsPyType *pt, double *val)
{
  double dummy;

  if (val == NULL)
    val = &dummy;
  if (v == NULL)
    return FALSE;
  switch (v->kind)
    {
    case CS_VALUE_BOOL: *pt = CS_PYTYPE_BOOL; *val = v->u.b; return TRUE;
    case CS_VALUE_INT: *pt = CS_PYTYPE_INT; *val = (double) v->u.i; return TRUE;
    case CS_VALUE_FLOAT: *pt = CS_PYTYPE_FLOAT; *val = v->u.f; return TRUE;
    case CS_VALUE_COMPLEX: *pt = CS_PYTYPE_COMPLEX; *val = v->u.c.re; return TRUE;
    default: return FALSE;
    }
}

static gboolean
int_of (const CsValue *v, int64_t *out)
{
  if (v != NULL && v->kind == CS_VALUE_INT)
    {
      *out = v->u.i;
      return TRUE;
    }
  return FALSE;
}


static CsValue *
sarg (const CsStmt *s, guint i, const char *kw)
{
  return cs_stmt_get_arg (s, i, kw);
}

/* ------------------------------------------------------------------------------------------ */
/* Emission                                                                                    */

static void
ap (Args *al, CsValue *v)
{
  g_assert (al->n < G_N_ELEMENTS (al->a));
  al->a[al->n].name = NULL;
  al->a[al->n++].value = v;
}

static void
ak (Args *al, const char *name, CsValue *v)
{
  g_assert (al->n < G_N_ELEMENTS (al->a));
  al->a[al->n].name = name;
  al->a[al->n++].value = v;
}

/* A new CALL of @op (printed as @callee, a string literal, or as the op's name when NULL) with
 * fresh nodes for the arguments of @al and the target @out (NULL when the caller sets it
 * later with cs_stmt_set_out()).  Keyword names are not copied: they are string literals or
 * already in the trace's arena. */
static CsStmt *
new_call (Dx *dx, const CsOp *op, const char *callee, const Args *al, CsValue *out)
{
  CsArg args[G_N_ELEMENTS (al->a)];
  CsStmt *st;

  for (guint i = 0; i < al->n; i++)
    {
      args[i].name = al->a[i].name;
      args[i].value = use (dx, al->a[i].value);
    }
  st = cs_stmt_new_call_static (dx->trace, op, callee, out, args, al->n);
  st->line = 0;
  st->origin = dx->origin->origin ? dx->origin->origin : dx->origin->id;
  st->grad_sum = dx->origin->grad_sum;
  return st;
}

/* Writes "t<n>" into @buf (at least 12 bytes); returns its length.  Two digits at a time
 * (this names every proxy the passes make). */
static guint
format_t_name (char *buf, guint32 n)
{
  static const char pairs[] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";
  char digits[10];
  guint nd = sizeof digits, len;

  while (n >= 100)
    {
      guint r = n % 100;
      n /= 100;
      digits[--nd] = pairs[2 * r + 1];
      digits[--nd] = pairs[2 * r];
    }
  if (n >= 10)
    {
      digits[--nd] = pairs[2 * n + 1];
      digits[--nd] = pairs[2 * n];
    }
  else
    digits[--nd] = (char) ('0' + n);
  len = sizeof digits - nd;
  buf[0] = 't';
  memcpy (buf + 1, digits + nd, len);
  buf[len + 1] = '\0';
  return len + 1;
}


/**
 * _cs_decompose_names_free_from: (skip)
 * @trace: a trace
 *
 * See cs-decompose.h.  Reads the bound each name table keeps (cs_name_table_t_bound()).
 * Returns: 1 + the largest n of a proxy named "t<n>" ever added to @trace or to a trace it
 * shares proxies with (0 when there is none), or
 * G_MAXUINT32 when that does not fit
 */
guint32
_cs_decompose_names_free_from (const CsTrace *trace)
{
  guint32 free_from = 0;

  /* each layer's table keeps the bound of every name it was given (removals and the dce
   * pass's keep-filter leave it as it was: an upper bound is all the callers need) */
  for (const CsTrace *t = trace; t != NULL; t = t->proxy_base)
    free_from = MAX (free_from, cs_name_table_t_bound (t->proxies));
  return free_from;
}

/* Names @p (unnamed, in @trace's arena) "t<n>" with the smallest n from @trace's name counter
 * that no visible proxy uses, as _cs_decompose_fresh_proxy() does. */
static void
name_fresh (CsTrace *trace, guint32 names_free_from, CsProxy *p)
{
  char buf[16];

  for (;;)
    {
      guint32 n = trace->next_name++;
      guint len = format_t_name (buf, n);
      guint32 hash = cs_name_hash (buf);

      if (n >= names_free_from || _cs_trace_lookup_proxy_hashed (trace, buf, hash) == NULL)
        {
          _cs_trace_name_proxy (trace, p, cs_arena_strndup (trace->arena, buf, len), hash,
                                (guint64) n + 1);
          return;
        }
    }
}

/**
 * _cs_decompose_fresh_proxy: (skip)
 * @trace: the trace that receives the proxy
 * @names_free_from: from _cs_decompose_names_free_from(), or G_MAXUINT32
 *
 * See cs-decompose.h.  The proxy is built as cs_trace_add_proxy() builds one.
 * Returns: (transfer none): the new, untyped proxy "t<n>"
 */
CsProxy *
_cs_decompose_fresh_proxy (CsTrace *trace, guint32 names_free_from)
{
  CsProxy *p = _cs_proxy_new_unnamed (trace->arena);

  name_fresh (trace, names_free_from, p);
  return p;
}

static CsProxy *
fresh (Dx *dx)
{
  return _cs_decompose_fresh_proxy (dx->trace, dx->names_free_from);
}


static gboolean
type_stmt (Dx *dx, CsStmt *st, GError **error)
{
  if (!cs_meta_infer (dx->trace, st, error))
    {
      if (dx->origin->line > 0)
        g_prefix_error (error, "line %u: decomposing %s: ", dx->origin->line, dx->origin->callee);
      else
        g_prefix_error (error, "decomposing %s: ", dx->origin->callee);
      return FALSE;
    }
  return TRUE;
}

/* Emits a prim with @n_out fresh outputs (a tuple when > 1); returns the output value. */
static CsValue *
emit_n (Dx *dx, GPtrArray *out, CsOpId id, const Args *al, guint n_out, GError **error)
{
  CsStmt *st;
  CsValue *ov;

  /* the outputs are named first: new_call makes no proxy, so the names are those Thunder
     gives (arguments, then outputs) */
  if (n_out == 1)
    ov = cs_value_new_proxy (arena (dx), fresh (dx));
  else
    {
      CsValue *items[8];

      g_assert (n_out <= G_N_ELEMENTS (items));
      for (guint i = 0; i < n_out; i++)
        items[i] = cs_value_new_proxy (arena (dx), fresh (dx));
      ov = cs_value_new_seq (arena (dx), CS_VALUE_TUPLE, items, n_out);
    }
  st = new_call (dx, cs_op_get (id), NULL, al, ov);
  if (!type_stmt (dx, st, error))
    return NULL;
  g_ptr_array_add (out, st);
  /* the statement's own target node: every statement that reads it takes a fresh node (use),
     and the final renaming (subst_stmt) covers all the statements of the decomposition */
  return ov;
}

static CsValue *
emit (Dx *dx, GPtrArray *out, CsOpId id, const Args *al, GError **error)
{
  return emit_n (dx, out, id, al, 1, error);
}

/* Leaves of a value tree that are proxies. */
void
_cs_decompose_proxy_leaves (const CsValue *v, GPtrArray *acc)
{
  if (v == NULL)
    return;
  if (v->kind == CS_VALUE_TUPLE || v->kind == CS_VALUE_LIST)
    {
      for (guint i = 0; i < v->u.seq.n; i++)
        _cs_decompose_proxy_leaves (v->u.seq.items[i], acc);
      return;
    }
  if (v->kind == CS_VALUE_PROXY)
    g_ptr_array_add (acc, v->u.proxy);
}

/* TRUE when @p is a proxy leaf of the value tree @v. */
static gboolean
has_proxy_leaf (const CsValue *v, const CsProxy *p)
{
  if (v == NULL)
    return FALSE;
  if (v->kind == CS_VALUE_TUPLE || v->kind == CS_VALUE_LIST)
    {
      for (guint i = 0; i < v->u.seq.n; i++)
        if (has_proxy_leaf (v->u.seq.items[i], p))
          return TRUE;
      return FALSE;
    }
  return v->kind == CS_VALUE_PROXY && v->u.proxy == p;
}

/* TRUE when one of the statements @stmts[@start..] outputs @p. */
static gboolean
produced_in (GPtrArray *stmts, guint start, const CsProxy *p)
{
  for (guint i = start; i < stmts->len; i++)
    if (has_proxy_leaf (((CsStmt *) g_ptr_array_index (stmts, i))->out, p))
      return TRUE;
  return FALSE;
}

/* Thunder (PR #2396): a symbol whose result is one of its inputs gets a prims.shallow_copy.
 * Rewrites @result so every leaf is produced inside the subsymbols @subs[@start..]. */
CsValue *
_cs_decompose_ensure_produced (Dx *dx, GPtrArray *subs, guint start, CsValue *result, GError **error)
{
  if (result == NULL)
    return NULL;
  if (result->kind == CS_VALUE_TUPLE || result->kind == CS_VALUE_LIST)
    {
      guint n = result->u.seq.n;
      CsValue **items = CS_ARENA_NEW_N (arena (dx), CsValue *, MAX (n, 1));

      for (guint i = 0; i < n; i++)
        if (!(items[i] = _cs_decompose_ensure_produced (dx, subs, start, result->u.seq.items[i], error)))
          return NULL;
      return cs_value_new_seq (arena (dx), result->kind, items, n);
    }
  if (result->kind == CS_VALUE_PROXY && !produced_in (subs, start, result->u.proxy))
    {
      Args al = { 0 };

      ap (&al, result);
      return emit (dx, subs, CS_OP_PRIM_SHALLOW_COPY, &al, error);
    }
  return result;
}

/* A call of another ltorch symbol: the nested statement, with its own subsymbols; its output is
 * the value its decomposition produces (so names follow Thunder's order).  The subsymbols are
 * built at the end of @out (no list of their own), then moved into the statement. */
static CsValue *
call_ltorch (Dx *dx, GPtrArray *out, const char *callee, const Args *al, GError **error)
{
  const CsOp *op = cs_op_lookup (callee);
  CsStmt *st = new_call (dx, op, callee, al, NULL);
  guint start = out->len;
  CsValue *res;

  res = _cs_decompose_build (dx, st, out, error);
  if (res != NULL)
    res = _cs_decompose_ensure_produced (dx, out, start, res, error);
  if (res != NULL)
    {
      cs_stmt_set_out (dx->trace, st, use (dx, res));
      cs_stmt_set_subs (dx->trace, st, (CsStmt **) out->pdata + start, out->len - start);
    }
  g_ptr_array_set_size (out, start);
  if (res == NULL || !type_stmt (dx, st, error))
    return NULL;
  g_ptr_array_add (out, st);
  return res;
}

/* ------------------------------------------------------------------------------------------ */
/* clang helpers, inlined as prims                                                             */

static CsDtype
computation_dtype (Dx *dx, CsDtype d)
{
  if (dx->policy.elementwise == CS_ELEMENTWISE_NATIVE)
    return d;
  return cs_promote_computation_dtype (d);
}

static CsDtypeRef
operand_ref (const CsValue *v)
{
  CsProxy *t = tensor_of (v);
  CsPyType pt = CS_PYTYPE_FLOAT;

  if (t)
    return cs_promote_arg_tensor (t->dtype, t->rank);
  if (v == NULL)
    return cs_promote_arg_number (pt);
  if (v->kind == CS_VALUE_PROXY && v->u.proxy->kind == CS_PROXY_NUMBER)
    {
      switch (v->u.proxy->dtype)
        {
        case CS_DTYPE_B8: pt = CS_PYTYPE_BOOL; break;
        case CS_DTYPE_I64: pt = CS_PYTYPE_INT; break;
        default: break;
        }
      return cs_promote_arg_number (pt);
    }
  number_of (v, &pt, NULL);
  return cs_promote_arg_number (pt);
}

/* (computation, result) of an elementwise op, with elementwise=native applied. */
static gboolean
promote (Dx *dx, const CsStmt *s, CsValue **vals, guint n, CsPromoKind kind, CsDtypeRef *comp,
         CsDtypeRef *res, GError **error)
{
  CsDtypeRef refs[4];
  GError *perr = NULL;

  for (guint i = 0; i < n; i++)
    refs[i] = operand_ref (vals[i]);
  if (!cs_promote_elementwise (refs, n, kind, comp, res, &perr))
    {
      _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS, "%s", perr->message);
      g_error_free (perr);
      return FALSE;
    }
  if (dx->policy.elementwise == CS_ELEMENTWISE_NATIVE && comp->dtype != res->dtype
      && (res->dtype == CS_DTYPE_BF16 || res->dtype == CS_DTYPE_F16) && kind != CS_PROMO_ALWAYS_BOOL)
    *comp = *res;
  return TRUE;
}

/* clang maybe_convert_to_dtype: a tensor gets prims.convert_element_type when its dtype
 * differs; a number takes the Python type of @dt (5 -> 5.0 for a float dtype). */
static CsValue *
maybe_convert (Dx *dx, GPtrArray *out, CsValue *v, CsDtypeRef dt, GError **error)
{
  CsProxy *t = tensor_of (v);
  CsPyType pt;
  double val;

  if (t)
    {
      CsDtype target = dt.pytype ? cs_pytype_dtype (dt.pytype) : dt.dtype;
      Args al = { 0 };

      if (t->dtype == target)
        return v;
      ap (&al, v);
      ap (&al, vdtype (dx, target, dt.weak || dt.pytype));
      return emit (dx, out, CS_OP_PRIM_CONVERT_ELEMENT_TYPE, &al, error);
    }
  if (number_of (v, &pt, &val))
    {
      CsDtype target = dt.pytype ? cs_pytype_dtype (dt.pytype) : dt.dtype;

      switch (cs_dtype_kind (target))
        {
        case CS_DTYPE_KIND_FLOAT:
          return pt == CS_PYTYPE_FLOAT ? v : vfloat (dx, val);
        case CS_DTYPE_KIND_INT:
          return pt == CS_PYTYPE_INT ? v : vint (dx, (int64_t) val);
        case CS_DTYPE_KIND_BOOL:
          return pt == CS_PYTYPE_BOOL ? v : vbool (dx, val != 0);
        default:
          return v;
        }
    }
  return v;
}

static CsValue *
convert_to (Dx *dx, GPtrArray *out, CsValue *v, CsDtype d, GError **error)
{
  CsDtypeRef r = { d, 0, 0 };

  return maybe_convert (dx, out, v, r, error);
}

/* clang expand/expand_impl: prims.broadcast_in_dim(a, tuple(shape), tuple(range(offset, ...))). */
static CsValue *
expand_to (Dx *dx, GPtrArray *out, CsValue *v, const int64_t *shape, guint rank, GError **error)
{
  CsProxy *t = tensor_of (v);
  Args al = { 0 };
  guint offset;

  g_assert (t != NULL && rank >= t->rank);
  offset = rank - t->rank;
  ap (&al, v);
  ap (&al, vints (dx, CS_VALUE_TUPLE, shape, rank));
  ap (&al, vrange (dx, CS_VALUE_TUPLE, offset, offset + t->rank));
  return emit (dx, out, CS_OP_PRIM_BROADCAST_IN_DIM, &al, error);
}

/* clang maybe_broadcast: every tensor not of the common shape is expanded (CPU 0-d tensors are
 * left alone).  Returns FALSE with @error on incompatible shapes. */
static gboolean
maybe_broadcast (Dx *dx, const CsStmt *s, GPtrArray *out, CsValue **vals, guint n, GError **error)
{
  int64_t shape[CS_MAX_DIMS];
  guint rank = 0;
  gboolean any = FALSE;

  for (guint i = 0; i < n; i++)
    {
      CsProxy *t = tensor_of (vals[i]);
      int64_t tmp[CS_MAX_DIMS];
      guint r;

      if (!t)
        continue;
      if (!cs_meta_broadcast_shapes (shape, rank, t->shape, t->rank, tmp, &r))
        {
          _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS, "operand shapes cannot be broadcast");
          return FALSE;
        }
      memcpy (shape, tmp, sizeof (int64_t) * r);
      rank = r;
      any = TRUE;
    }
  if (!any)
    return TRUE;
  for (guint i = 0; i < n; i++)
    {
      CsProxy *t = tensor_of (vals[i]);

      if (!t || (t->rank == 0 && t->device.type == CS_DEVICE_CPU))
        continue;
      if (!same_dims (t->shape, t->rank, shape, rank))
        if (!(vals[i] = expand_to (dx, out, vals[i], shape, rank, error)))
          return FALSE;
    }
  return TRUE;
}

/* clang _elementwise_binary_wrapper: promote, broadcast, convert both, prim, convert back. */
static CsValue *
ew_binary (Dx *dx, const CsStmt *s, GPtrArray *out, CsOpId prim, CsValue *a, CsValue *b,
           CsPromoKind kind, GError **error)
{
  CsValue *vals[2] = { a, b };
  CsDtypeRef comp, res;
  Args al = { 0 };
  CsValue *r;

  if (!tensor_of (a) && !tensor_of (b))
    return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_UNSUPPORTED, "number-only arithmetic is not decomposed");
  if (!promote (dx, s, vals, 2, kind, &comp, &res, error))
    return NULL;
  if (!maybe_broadcast (dx, s, out, vals, 2, error))
    return NULL;
  if (!(vals[0] = maybe_convert (dx, out, vals[0], comp, error))
      || !(vals[1] = maybe_convert (dx, out, vals[1], comp, error)))
    return NULL;
  ap (&al, vals[0]);
  ap (&al, vals[1]);
  if (!(r = emit (dx, out, prim, &al, error)))
    return NULL;
  return maybe_convert (dx, out, r, res, error);
}

/* clang _elementwise_unary_wrapper */
static CsValue *
ew_unary (Dx *dx, const CsStmt *s, GPtrArray *out, CsOpId prim, CsValue *a, CsPromoKind kind,
          GError **error)
{
  CsDtypeRef comp, res;
  Args al = { 0 };
  CsValue *r;

  if (!tensor_of (a))
    return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS, "the operand is not a typed tensor");
  if (!promote (dx, s, &a, 1, kind, &comp, &res, error))
    return NULL;
  if (!(a = maybe_convert (dx, out, a, comp, error)))
    return NULL;
  ap (&al, a);
  if (!(r = emit (dx, out, prim, &al, error)))
    return NULL;
  return maybe_convert (dx, out, r, res, error);
}

/* clang.sigmoid: convert, neg, exp, add(1.0, .), reciprocal, convert (all prims). */
static CsValue *
clang_sigmoid (Dx *dx, const CsStmt *s, GPtrArray *out, CsValue *a, GError **error)
{
  CsDtypeRef comp, res;
  CsValue *t;
  Args al = { 0 };

  if (!tensor_of (a))
    return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS, "the operand is not a typed tensor");
  if (!promote (dx, s, &a, 1, CS_PROMO_INT_TO_FLOAT, &comp, &res, error))
    return NULL;
  if (!(a = maybe_convert (dx, out, a, comp, error)))
    return NULL;
  if (!(t = ew_unary (dx, s, out, CS_OP_PRIM_NEG, a, CS_PROMO_DEFAULT, error))
      || !(t = ew_unary (dx, s, out, CS_OP_PRIM_EXP, t, CS_PROMO_INT_TO_FLOAT, error))
      || !(t = ew_binary (dx, s, out, CS_OP_PRIM_ADD, vfloat (dx, 1.0), t, CS_PROMO_DEFAULT, error))
      || !(t = ew_unary (dx, s, out, CS_OP_PRIM_RECIPROCAL, t, CS_PROMO_INT_TO_FLOAT, error)))
    return NULL;
  (void) al;
  return maybe_convert (dx, out, t, res, error);
}

/* prims.matmul / prims.linear, with matmul=upcast-f32 turning bf16/f16 operands into
 * convert -> f32 op -> convert back. */
static CsValue *
emit_matmul_like (Dx *dx, GPtrArray *out, CsOpId prim, CsValue **ops, guint n, GError **error)
{
  CsProxy *a = tensor_of (ops[0]);
  Args al = { 0 };
  gboolean upcast = dx->policy.matmul == CS_MATMUL_UPCAST_F32 && a != NULL
                    && (a->dtype == CS_DTYPE_BF16 || a->dtype == CS_DTYPE_F16);
  CsValue *r;

  if (!upcast)
    {
      for (guint i = 0; i < n; i++)
        ap (&al, ops[i]);
      return emit (dx, out, prim, &al, error);
    }
  for (guint i = 0; i < n; i++)
    {
      CsValue *v = ops[i];

      if (tensor_of (v) && !(v = convert_to (dx, out, v, CS_DTYPE_F32, error)))
        return NULL;
      ap (&al, v);
    }
  if (!(r = emit (dx, out, prim, &al, error)))
    return NULL;
  return convert_to (dx, out, r, a->dtype, error);
}

/* ------------------------------------------------------------------------------------------ */
/* Nested ltorch calls with Thunder's printed signatures                                       */

static CsValue *
lt_binary (Dx *dx, GPtrArray *out, const char *callee, CsValue *a, CsValue *b, GError **error)
{
  Args al = { 0 };

  ap (&al, a);
  ap (&al, b);
  if (g_str_equal (callee, "ltorch.add") || g_str_equal (callee, "ltorch.sub"))
    ak (&al, "alpha", vint (dx, 1));
  return call_ltorch (dx, out, callee, &al, error);
}

static CsValue *
lt_unary (Dx *dx, GPtrArray *out, const char *callee, CsValue *a, GError **error)
{
  Args al = { 0 };

  ap (&al, a);
  return call_ltorch (dx, out, callee, &al, error);
}

/* ltorch.to(a, dtype, None, device=None, dtype=None, copy=False, memory_format=None) */
static CsValue *
lt_to (Dx *dx, GPtrArray *out, CsValue *a, CsDtype d, GError **error)
{
  Args al = { 0 };

  ap (&al, a);
  ap (&al, vdtype (dx, d, FALSE));
  ap (&al, vnone (dx));
  ak (&al, "device", vnone (dx));
  ak (&al, "dtype", vnone (dx));
  ak (&al, "copy", vbool (dx, FALSE));
  ak (&al, "memory_format", vnone (dx));
  return call_ltorch (dx, out, "ltorch.to", &al, error);
}

/* ltorch.sum/amax(a, dim, keepdim[, dtype=None]) */
static CsValue *
lt_reduce (Dx *dx, GPtrArray *out, const char *callee, CsValue *a, CsValue *dim, gboolean keepdim,
           GError **error)
{
  Args al = { 0 };

  ap (&al, a);
  ap (&al, dim);
  ap (&al, vbool (dx, keepdim));
  if (g_str_equal (callee, "ltorch.sum") || g_str_equal (callee, "ltorch.mean"))
    ak (&al, "dtype", vnone (dx));
  return call_ltorch (dx, out, callee, &al, error);
}

/* ------------------------------------------------------------------------------------------ */
/* Reductions (thunder/torch/__init__.py `_reduction`)                                         */

typedef enum
{
  RED_SAME,              /* result dtype = dtype or a.dtype */
  RED_COMPLEX_TO_FLOAT,  /* var, var_mean */
  RED_KEEP_PROMOTED,     /* mean: no final conversion */
} RedKind;

static CsValue *
reduction (Dx *dx, const CsStmt *s, GPtrArray *out, CsValue *av, CsOpId prim, CsValue *dimv,
           gboolean keepdim, gboolean has_dtype, CsDtype dtype, RedKind kind, CsValue *correction,
           GError **error)
{
  CsProxy *a = tensor_of (av);
  gboolean mask[CS_MAX_DIMS] = { 0 };
  int64_t dims[CS_MAX_DIMS], oshape[CS_MAX_DIMS], bdims[CS_MAX_DIMS];
  guint nd = 0, no = 0, nb = 0;
  CsDtype comp, res = 0;
  gboolean has_res = TRUE;
  CsValue *x, *r;
  Args al = { 0 };
  guint n_res = prim == CS_OP_PRIM_VAR_MEAN ? 2 : 1;
  CsValue *parts[2];

  if (!a)
    return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS, "the input is not a typed tensor");
  if (!is_none (dimv))
    {
      int64_t raw[CS_MAX_DIMS];
      guint n;

      if (!cs_value_get_int_seq (dimv, raw, CS_MAX_DIMS, &n))
        return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS, "dim must be an int or a sequence of ints");
      for (guint i = 0; i < n; i++)
        {
          guint d;

          if (!cs_meta_canonicalize_dim (a->rank, raw[i], &d))
            return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS, "dim %" G_GINT64_FORMAT " is out of range", raw[i]);
          dims[nd++] = d;
          mask[d] = TRUE;
        }
    }
  if (nd == 0)
    for (guint i = 0; i < a->rank; i++)
      {
        dims[nd++] = i;
        mask[i] = TRUE;
      }

  comp = computation_dtype (dx, has_dtype ? dtype : a->dtype);
  switch (kind)
    {
    case RED_SAME:
      res = has_dtype ? dtype : a->dtype;
      break;
    case RED_COMPLEX_TO_FLOAT:
      res = has_dtype ? dtype : a->dtype;
      if (res == CS_DTYPE_C64) res = CS_DTYPE_F32;
      else if (res == CS_DTYPE_C128) res = CS_DTYPE_F64;
      else if (res == CS_DTYPE_C32) res = CS_DTYPE_F16;
      break;
    case RED_KEEP_PROMOTED:
      has_res = FALSE;
      break;
    }

  if (!(x = lt_to (dx, out, av, comp, error)))
    return NULL;
  ap (&al, x);
  ap (&al, vints (dx, CS_VALUE_TUPLE, dims, nd));
  if (correction)
    ak (&al, "correction", correction);
  if (!(r = emit_n (dx, out, prim, &al, n_res, error)))
    return NULL;
  if (n_res == 1)
    parts[0] = r;
  else
    {
      parts[0] = use (dx, r->u.seq.items[0]);
      parts[1] = use (dx, r->u.seq.items[1]);
    }
  if (keepdim)
    {
      for (guint i = 0; i < a->rank; i++)
        {
          oshape[no++] = mask[i] ? 1 : a->shape[i];
          if (!mask[i])
            bdims[nb++] = i;
        }
      for (guint k = 0; k < n_res; k++)
        {
          Args bl = { 0 };

          ap (&bl, parts[k]);
          ap (&bl, vints (dx, CS_VALUE_LIST, oshape, no));
          ap (&bl, vints (dx, CS_VALUE_LIST, bdims, nb));
          if (!(parts[k] = emit (dx, out, CS_OP_PRIM_BROADCAST_IN_DIM, &bl, error)))
            return NULL;
        }
    }
  if (has_res)
    for (guint k = 0; k < n_res; k++)
      if (!(parts[k] = lt_to (dx, out, parts[k], res, error)))
        return NULL;
  if (n_res == 1)
    return parts[0];
  return cs_value_new_seq (arena (dx), CS_VALUE_TUPLE, parts, 2);
}

/* ------------------------------------------------------------------------------------------ */
/* ltorch builders                                                                             */

static gboolean
alpha_is_one (const CsValue *alpha)
{
  CsPyType pt;
  double v;

  if (is_none (alpha))
    return TRUE;
  if (number_of (alpha, &pt, &v))
    return v == 1.0;
  return FALSE;
}

static CsValue *
b_add_sub (Dx *dx, const CsStmt *s, GPtrArray *out, CsOpId prim, GError **error)
{
  CsValue *a = cs_stmt_arg (s, CS_ARG_A), *b = cs_stmt_arg (s, CS_ARG_B);
  CsValue *alpha = cs_stmt_arg (s, CS_ARG_ALPHA);

  if (!a || !b)
    return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS, "needs two operands");
  if (!alpha_is_one (alpha))
    if (!(b = lt_binary (dx, out, "ltorch.mul", b, alpha, error)))
      return NULL;
  return ew_binary (dx, s, out, prim, a, b, CS_PROMO_DEFAULT, error);
}

static CsValue *
b_binary (Dx *dx, const CsStmt *s, GPtrArray *out, CsOpId prim, CsPromoKind kind, GError **error)
{
  CsValue *a = sarg (s, 0, NULL), *b = sarg (s, 1, NULL);

  if (!a || !b)
    return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS, "needs two operands");
  return ew_binary (dx, s, out, prim, a, b, kind, error);
}

static CsValue *
b_unary (Dx *dx, const CsStmt *s, GPtrArray *out, CsOpId prim, CsPromoKind kind, GError **error)
{
  CsValue *a = cs_stmt_arg (s, CS_ARG_A);

  if (!a)
    return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS, "needs an operand");
  return ew_unary (dx, s, out, prim, a, kind, error);
}

/* clang.where: PRESERVE promotion of a and b, convert, broadcast, prims.where. */
static CsValue *
clang_where (Dx *dx, const CsStmt *s, GPtrArray *out, CsValue *pred, CsValue *a, CsValue *b,
             GError **error)
{
  CsValue *ab[2] = { a, b }, *all[3];
  CsDtypeRef comp, res;
  Args al = { 0 };

  if (pred == NULL || a == NULL || b == NULL || (!tensor_of (pred) && !tensor_of (a) && !tensor_of (b)))
    return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS, "needs a condition and two values, one of them a typed tensor");
  if (!promote (dx, s, ab, 2, CS_PROMO_PRESERVE, &comp, &res, error))
    return NULL;
  if (!(a = maybe_convert (dx, out, a, res, error)) || !(b = maybe_convert (dx, out, b, res, error)))
    return NULL;
  all[0] = pred;
  all[1] = a;
  all[2] = b;
  if (!maybe_broadcast (dx, s, out, all, 3, error))
    return NULL;
  ap (&al, all[0]);
  ap (&al, all[1]);
  ap (&al, all[2]);
  return emit (dx, out, CS_OP_PRIM_WHERE, &al, error);
}

/* gelu (thunder/torch/__init__.py): nested ltorch arithmetic. */
static CsValue *
b_gelu (Dx *dx, const CsStmt *s, GPtrArray *out, GError **error)
{
  CsValue *a = cs_stmt_arg (s, CS_ARG_A), *approx = cs_stmt_arg (s, CS_ARG_APPROXIMATE);
  const char *mode = (approx && approx->kind == CS_VALUE_STRING) ? approx->u.s : "none";
  CsValue *t, *u;

  if (!tensor_of (a))
    return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS, "needs a typed tensor");
  if (g_str_equal (mode, "none"))
    {
      /* phi_a = 0.5 + 0.5 * erf(a / sqrt(2)); return a * phi_a */
      if (!(t = lt_binary (dx, out, "ltorch.true_divide", a, vfloat (dx, sqrt (2.0)), error))
          || !(t = lt_unary (dx, out, "ltorch.erf", t, error))
          || !(t = lt_binary (dx, out, "ltorch.mul", vfloat (dx, 0.5), t, error))
          || !(t = lt_binary (dx, out, "ltorch.add", vfloat (dx, 0.5), t, error)))
        return NULL;
      return lt_binary (dx, out, "ltorch.mul", a, t, error);
    }
  if (g_str_equal (mode, "tanh"))
    {
      /* a_pow_3 = a * a * a; 0.5 * a * (1.0 + tanh(sqrt(2/pi) * (a + 0.044715 * a_pow_3))) */
      CsValue *a3, *half;

      if (!(a3 = lt_binary (dx, out, "ltorch.mul", a, a, error))
          || !(a3 = lt_binary (dx, out, "ltorch.mul", a3, a, error))
          || !(half = lt_binary (dx, out, "ltorch.mul", vfloat (dx, 0.5), a, error))
          || !(t = lt_binary (dx, out, "ltorch.mul", vfloat (dx, 0.044715), a3, error))
          || !(t = lt_binary (dx, out, "ltorch.add", a, t, error))
          || !(t = lt_binary (dx, out, "ltorch.mul", vfloat (dx, sqrt (2.0 / G_PI)), t, error))
          || !(t = lt_unary (dx, out, "ltorch.tanh", t, error))
          || !(u = lt_binary (dx, out, "ltorch.add", vfloat (dx, 1.0), t, error)))
        return NULL;
      return lt_binary (dx, out, "ltorch.mul", half, u, error);
    }
  return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS, "approximate='%s' is not 'none' or 'tanh'", mode);
}

/* softplus(a, beta=1.0, threshold=20.0) (thunder/torch/__init__.py):
 *   scaled_input = a * beta; rhs = log1p(exp(scaled_input)) / beta
 *   where(scaled_input > threshold, a, rhs)
 * Each ltorch step computes a bf16/f16 input in f32 and rounds back, as Thunder's do. */
static CsValue *
b_softplus (Dx *dx, const CsStmt *s, GPtrArray *out, GError **error)
{
  CsValue *a = cs_stmt_arg (s, CS_ARG_A);
  CsValue *beta = cs_stmt_arg (s, CS_ARG_BETA), *threshold = cs_stmt_arg (s, CS_ARG_THRESHOLD);
  CsValue *x, *e, *rhs, *m;
  Args al = { 0 };
  double bv, tv;

  if (!tensor_of (a))
    return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS, "needs a typed tensor");
  if (!cs_stmt_arg_number (s, CS_ARG_BETA, &bv) || !cs_stmt_arg_number (s, CS_ARG_THRESHOLD, &tv))
    return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS, "beta and threshold must be numbers");
  if (beta == NULL)
    beta = vfloat (dx, bv);
  if (threshold == NULL)
    threshold = vfloat (dx, tv);
  if (!(x = lt_binary (dx, out, "ltorch.mul", a, beta, error))
      || !(e = lt_unary (dx, out, "ltorch.exp", x, error))
      || !(e = lt_unary (dx, out, "ltorch.log1p", e, error))
      || !(rhs = lt_binary (dx, out, "ltorch.true_divide", e, beta, error))
      || !(m = lt_binary (dx, out, "ltorch.gt", x, threshold, error)))
    return NULL;
  ap (&al, m);
  ap (&al, a);
  ap (&al, rhs);
  return call_ltorch (dx, out, "ltorch.where", &al, error);
}

/* _softmax(a, dim, dtype=) */
static CsValue *
b_softmax (Dx *dx, const CsStmt *s, GPtrArray *out, GError **error)
{
  CsValue *a = cs_stmt_arg (s, CS_ARG_A), *dim = cs_stmt_arg (s, CS_ARG_DIM);
  CsValue *dt = cs_stmt_arg (s, CS_ARG_DTYPE);
  CsProxy *ta = tensor_of (a);
  CsDtype rd, cd;
  CsValue *x, *m, *e, *sm;

  if (!ta || !dim)
    return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS, "needs a typed tensor and a dim");
  rd = ta->dtype;
  if (!is_none (dt) && !cs_value_get_dtype (dt, &rd))
    return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS, "dtype= is not a dtype");
  cd = computation_dtype (dx, rd);
  if (!(x = lt_to (dx, out, a, cd, error)))
    return NULL;
  if (cs_shape_numel (ta->shape, ta->rank) == 0)
    {
      if (!(e = lt_unary (dx, out, "ltorch.exp", x, error)))
        return NULL;
    }
  else if (!(m = lt_reduce (dx, out, "ltorch.amax", x, dim, TRUE, error))
           || !(e = lt_binary (dx, out, "ltorch.sub", x, m, error))
           || !(e = lt_unary (dx, out, "ltorch.exp", e, error)))
    return NULL;
  if (!(sm = lt_reduce (dx, out, "ltorch.sum", e, dim, TRUE, error))
      || !(sm = lt_binary (dx, out, "ltorch.true_divide", e, sm, error)))
    return NULL;
  return lt_to (dx, out, sm, rd, error);
}

/* logsumexp(a, dim, keepdim) */
static CsValue *
logsumexp (Dx *dx, const CsStmt *s, GPtrArray *out, CsValue *a, CsValue *dim, gboolean keepdim,
           GError **error)
{
  CsValue *mx, *t, *sans, *r;

  if (!(mx = lt_reduce (dx, out, "ltorch.amax", a, dim, TRUE, error))
      || !(t = lt_unary (dx, out, "ltorch.abs", mx, error))
      || !(t = lt_binary (dx, out, "ltorch.eq", t, vfloat (dx, INFINITY), error)))
    return NULL;
  {
    Args al = { 0 };

    ap (&al, t);
    ap (&al, vint (dx, 0));
    ap (&al, mx);
    if (!(sans = call_ltorch (dx, out, "ltorch.where", &al, error)))
      return NULL;
  }
  if (!(t = lt_binary (dx, out, "ltorch.sub", a, sans, error))
      || !(t = lt_unary (dx, out, "ltorch.exp", t, error))
      || !(t = lt_reduce (dx, out, "ltorch.sum", t, dim, keepdim, error))
      || !(r = lt_unary (dx, out, "ltorch.log", t, error)))
    return NULL;
  if (!keepdim)
    {
      Args al = { 0 };

      ap (&al, sans);
      ap (&al, dim);
      if (!(sans = call_ltorch (dx, out, "ltorch.squeeze", &al, error)))
        return NULL;
    }
  return lt_binary (dx, out, "ltorch.add", r, sans, error);
}

/* log_softmax(a, dim, dtype=) */
static CsValue *
b_log_softmax (Dx *dx, const CsStmt *s, GPtrArray *out, GError **error)
{
  CsValue *a = cs_stmt_arg (s, CS_ARG_A), *dim = cs_stmt_arg (s, CS_ARG_DIM);
  CsValue *dt = cs_stmt_arg (s, CS_ARG_DTYPE);
  CsProxy *ta = tensor_of (a);
  CsDtype rd;
  CsValue *x, *l;

  if (!ta || !dim)
    return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS, "needs a typed tensor and a dim");
  rd = ta->dtype;
  if (!is_none (dt) && !cs_value_get_dtype (dt, &rd))
    return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS, "dtype= is not a dtype");
  if (!(x = lt_to (dx, out, a, computation_dtype (dx, rd), error)))
    return NULL;
  {
    Args al = { 0 };

    ap (&al, x);
    ap (&al, dim);
    ap (&al, vbool (dx, TRUE));
    if (!(l = call_ltorch (dx, out, "ltorch.logsumexp", &al, error)))
      return NULL;
  }
  if (!(l = lt_binary (dx, out, "ltorch.sub", x, l, error)))
    return NULL;
  return lt_to (dx, out, l, rd, error);
}

static CsValue *
b_logsumexp (Dx *dx, const CsStmt *s, GPtrArray *out, GError **error)
{
  CsValue *kd = cs_stmt_arg (s, CS_ARG_KEEPDIM);

  return logsumexp (dx, s, out, cs_stmt_arg (s, CS_ARG_A), cs_stmt_arg (s, CS_ARG_DIM),
                    kd && kd->kind == CS_VALUE_BOOL && kd->u.b, error);
}

/* ltorch reductions: sum/amax/amin/prod(a, dim, keepdim, dtype=), mean, var_mean. */
static CsValue *
b_reduction (Dx *dx, const CsStmt *s, GPtrArray *out, CsOpId id, GError **error)
{
  CsValue *a = cs_stmt_arg (s, CS_ARG_A), *dim = cs_stmt_arg (s, CS_ARG_DIM);
  CsValue *kdv = cs_stmt_arg (s, CS_ARG_KEEPDIM);
  CsValue *dtv = cs_stmt_arg_if_declared (s, CS_ARG_DTYPE);   /* amax, amin: none */
  gboolean keepdim = kdv && kdv->kind == CS_VALUE_BOOL && kdv->u.b;
  CsProxy *ta = tensor_of (a);
  CsDtype dt = 0;
  gboolean has_dt = !is_none (dtv);

  if (!ta)
    return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS, "needs a typed tensor");
  if (has_dt && !cs_value_get_dtype (dtv, &dt))
    return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS, "dtype= is not a dtype");
  switch (id)
    {
    case CS_OP_LTORCH_SUM:
      if (!has_dt)
        {
          dt = cs_dtype_is_exact (ta->dtype) ? CS_DTYPE_I64 : ta->dtype;
          has_dt = TRUE;
        }
      return reduction (dx, s, out, a, CS_OP_PRIM_SUM, dim,
                        keepdim, has_dt, dt, RED_SAME, NULL, error);
    case CS_OP_LTORCH_AMAX:
    case CS_OP_LTORCH_AMIN:
      return reduction (dx, s, out, a, id == CS_OP_LTORCH_AMAX ? CS_OP_PRIM_AMAX : CS_OP_PRIM_AMIN, dim,
                        keepdim, FALSE, 0, RED_SAME, NULL, error);
    case CS_OP_LTORCH_VAR_MEAN:
      {
        CsValue *corr = cs_stmt_arg (s, CS_ARG_CORRECTION);
        return reduction (dx, s, out, a, CS_OP_PRIM_VAR_MEAN, dim, keepdim, FALSE, 0,
                          RED_COMPLEX_TO_FLOAT, corr ? corr : vint (dx, 1), error);
      }
    case CS_OP_LTORCH_MEAN:
      {
        CsDtype rd = has_dt ? dt : ta->dtype;
        CsValue *r;
        int64_t nelem = 1;
        gboolean mask[CS_MAX_DIMS] = { 0 };
        int64_t raw[CS_MAX_DIMS];
        guint n = 0;

        if (cs_dtype_is_exact (rd))
          return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS, "mean needs a float dtype");
        if (!(r = reduction (dx, s, out, a, CS_OP_PRIM_SUM, dim, keepdim, TRUE, rd, RED_KEEP_PROMOTED,
                             NULL, error)))
          return NULL;
        if (!is_none (dim))
          cs_value_get_int_seq (dim, raw, CS_MAX_DIMS, &n);
        for (guint i = 0; i < n; i++)
          {
            guint d;
            if (cs_meta_canonicalize_dim (ta->rank, raw[i], &d))
              mask[d] = TRUE;
          }
        for (guint i = 0; i < ta->rank; i++)
          if (n == 0 || mask[i])
            nelem = (ta->shape[i] > 0 && nelem > G_MAXINT64 / ta->shape[i]) ? G_MAXINT64 : nelem * MAX (ta->shape[i], 0);
        if (!(r = lt_binary (dx, out, "ltorch.true_divide", r, vint (dx, nelem), error)))
          return NULL;
        return lt_to (dx, out, r, rd, error);
      }
    default:
      return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_UNSUPPORTED, "no decomposition");
    }
}

/* ltorch.to: clone if copy, device_put if the device changes, convert if the dtype differs. */
static CsValue *
b_to (Dx *dx, const CsStmt *s, GPtrArray *out, GError **error)
{
  CsValue *a = cs_stmt_arg (s, CS_ARG_A), *p1 = cs_stmt_arg (s, CS_ARG_TENSOR_DTYPE_OR_DEVICE);
  CsValue *p2 = cs_stmt_arg (s, CS_ARG_OPTIONAL_POSITIONAL_DTYPE);
  CsValue *kdev = cs_stmt_arg (s, CS_ARG_DEVICE), *kdt = cs_stmt_arg (s, CS_ARG_DTYPE);
  CsValue *cp = cs_stmt_arg (s, CS_ARG_COPY);
  CsProxy *ta = tensor_of (a);
  CsDtype dtype;
  CsDevice dev;
  gboolean has_dtype = FALSE, has_dev = FALSE;

  if (!ta)
    return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS, "needs a typed tensor");
  if (tensor_of (p1))
    {
      dtype = tensor_of (p1)->dtype;
      dev = tensor_of (p1)->device;
      has_dtype = has_dev = TRUE;
    }
  else if (!is_none (p1) && cs_value_get_dtype (p1, &dtype))
    has_dtype = TRUE;
  else if (!is_none (p1) && cs_value_get_device (p1, &dev))
    {
      has_dev = TRUE;
      if (!is_none (p2) && cs_value_get_dtype (p2, &dtype))
        has_dtype = TRUE;
    }
  if (!is_none (kdt) && cs_value_get_dtype (kdt, &dtype))
    has_dtype = TRUE;
  if (!is_none (kdev) && cs_value_get_device (kdev, &dev))
    has_dev = TRUE;
  if (cp && cp->kind == CS_VALUE_BOOL && cp->u.b)
    {
      Args al = { 0 };
      ap (&al, a);
      if (!(a = emit (dx, out, CS_OP_PRIM_CLONE, &al, error)))
        return NULL;
    }
  if (has_dev && !cs_device_equal (&dev, &ta->device))
    {
      Args al = { 0 };
      ap (&al, a);
      ap (&al, vdevice (dx, &dev));
      if (!(a = emit (dx, out, CS_OP_PRIM_DEVICE_PUT, &al, error)))
        return NULL;
    }
  if (has_dtype)
    return convert_to (dx, out, a, dtype, error);
  return a;
}

/* clang.reshape: no-op short-circuit, -1 resolved, prims.reshape(a, tuple(shape)). */
static CsValue *
clang_reshape (Dx *dx, const CsStmt *s, GPtrArray *out, CsValue *a, int64_t *shape, guint n,
               GError **error)
{
  CsProxy *ta = tensor_of (a);
  int64_t numel = 1, total;
  int neg = -1;
  Args al = { 0 };

  if (!ta)
    return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS, "needs a typed tensor");
  if (same_dims (ta->shape, ta->rank, shape, n))
    return a;
  total = cs_shape_numel (ta->shape, ta->rank);
  for (guint i = 0; i < n; i++)
    if (shape[i] >= 0)
      {
        if (shape[i] != 0 && numel > (G_GINT64_CONSTANT (1) << 62) / shape[i])
          return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS, "the target shape has too many elements");
        numel *= shape[i];
      }
    else if (shape[i] == -1 && neg < 0)
      neg = (int) i;
    else
      return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS, "bad target shape");
  if (neg >= 0)
    {
      if (numel == 0 || total % numel)
        return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS, "cannot infer the -1 dim");
      shape[neg] = total / numel;
    }
  ap (&al, a);
  ap (&al, vints (dx, CS_VALUE_TUPLE, shape, n));
  return emit (dx, out, CS_OP_PRIM_RESHAPE, &al, error);
}

/* Reads a varargs or sequence shape starting at positional @first. */
static gboolean
varargs_ints (const CsStmt *s, guint first, int64_t *out, guint *n)
{
  CsValue *v0 = sarg (s, first, NULL);
  guint np = 0;

  for (guint k = 0; k < s->n_args; k++)
    if (s->args[k].name == NULL)
      np++;
  if (np == first + 1 && v0 && (v0->kind == CS_VALUE_TUPLE || v0->kind == CS_VALUE_LIST))
    return cs_value_get_int_seq (v0, out, CS_MAX_DIMS, n);
  if (np < first || np - first > CS_MAX_DIMS)
    return FALSE;
  *n = np - first;
  for (guint i = 0; i < *n; i++)
    if (!int_of (sarg (s, first + i, NULL), &out[i]))
      return FALSE;
  return TRUE;
}

/* clang.transpose: canonicalized permutation, identity dropped. */
static CsValue *
clang_transpose (Dx *dx, const CsStmt *s, GPtrArray *out, CsValue *a, const int64_t *perm, guint n,
                 GError **error)
{
  CsProxy *ta = tensor_of (a);
  int64_t p[CS_MAX_DIMS];
  gboolean ident = TRUE;
  Args al = { 0 };

  if (!ta || n != ta->rank)
    return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS, "permutation does not fit the input");
  for (guint i = 0; i < n; i++)
    {
      guint d;
      if (!cs_meta_canonicalize_dim (ta->rank, perm[i], &d))
        return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS, "bad permutation");
      p[i] = d;
      ident &= d == i;
    }
  if (ident)
    return a;
  ap (&al, a);
  ap (&al, vints (dx, CS_VALUE_TUPLE, p, n));
  return emit (dx, out, CS_OP_PRIM_TRANSPOSE, &al, error);
}

/* clang.unsqueeze(a, dim): prims.broadcast_in_dim(a, list shape, list dims). */
static CsValue *
clang_unsqueeze (Dx *dx, const CsStmt *s, GPtrArray *out, CsValue *a, int64_t dim, GError **error)
{
  CsProxy *ta = tensor_of (a);
  int64_t shape[CS_MAX_DIMS], bd[CS_MAX_DIMS];
  guint d, r = 0, nb = 0;
  Args al = { 0 };

  if (!ta || ta->rank + 1 > CS_MAX_DIMS || !cs_meta_canonicalize_dim (ta->rank + 1, dim, &d))
    return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS, "bad unsqueeze dim");
  for (guint i = 0, ai = 0; i < ta->rank + 1; i++)
    {
      if (i == d)
        shape[r++] = 1;
      else
        {
          shape[r++] = ta->shape[ai];
          bd[nb++] = i;
          ai++;
        }
    }
  ap (&al, a);
  ap (&al, vints (dx, CS_VALUE_LIST, shape, r));
  ap (&al, vints (dx, CS_VALUE_LIST, bd, nb));
  return emit (dx, out, CS_OP_PRIM_BROADCAST_IN_DIM, &al, error);
}

/* getitem: basic indexing (clang._basic_indexing). */
static CsValue *
b_getitem (Dx *dx, const CsStmt *s, GPtrArray *out, GError **error)
{
  CsValue *a = cs_stmt_arg (s, CS_ARG_A), *key = cs_stmt_arg (s, CS_ARG_KEY);
  CsProxy *ta = tensor_of (a);
  const CsValue *items[CS_MAX_DIMS * 2];
  const CsValue *k2[CS_MAX_DIMS * 2];
  guint n = 0, n_index = 0, nk = 0;
  int64_t st[CS_MAX_DIMS], en[CS_MAX_DIMS], sd[CS_MAX_DIMS], sq[CS_MAX_DIMS];
  guint nsq = 0;
  gboolean seen_ell = FALSE, need_slice = FALSE;

  if (!ta || !key)
    return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS, "needs a typed tensor and an index");
  if (key->kind == CS_VALUE_TUPLE)
    {
      if (key->u.seq.n > G_N_ELEMENTS (items))
        return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS, "too many indices");
      for (guint i = 0; i < key->u.seq.n; i++)
        items[n++] = key->u.seq.items[i];
    }
  else
    items[n++] = key;
  for (guint i = 0; i < n; i++)
    {
      CsValueKind kd = items[i]->kind;
      if (kd == CS_VALUE_INT || kd == CS_VALUE_CALL)
        n_index++;
      else if (kd != CS_VALUE_NONE && kd != CS_VALUE_ELLIPSIS)
        return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_UNSUPPORTED, "advanced indexing is not decomposed");
    }
  if (n_index > ta->rank)
    return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS, "too many indices");
  /* expand the ellipsis into full slices (NULL marks slice(None)) */
  for (guint i = 0; i < n; i++)
    {
      if (items[i]->kind == CS_VALUE_ELLIPSIS)
        {
          guint fill = seen_ell ? 0 : ta->rank - n_index;
          seen_ell = TRUE;
          for (guint j = 0; j < fill && nk < G_N_ELEMENTS (k2); j++)
            k2[nk++] = NULL;
        }
      else if (nk < G_N_ELEMENTS (k2))
        k2[nk++] = items[i];
      if (nk >= G_N_ELEMENTS (k2))
        return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS, "too many indices");
    }
  /* None -> unsqueeze at its position (clang.unsqueeze inlined) */
  for (guint i = 0; i < nk; i++)
    if (k2[i] != NULL && k2[i]->kind == CS_VALUE_NONE)
      {
        if (!(a = clang_unsqueeze (dx, s, out, a, i, error)))
          return NULL;
        k2[i] = NULL;
      }
  ta = tensor_of (a);
  for (guint i = 0; i < ta->rank; i++)
    {
      const CsValue *k = i < nk ? k2[i] : NULL;
      int64_t len = ta->shape[i];

      if (k == NULL)
        {
          st[i] = 0;
          en[i] = len;
          sd[i] = 1;
        }
      else if (k->kind == CS_VALUE_INT)
        {
          int64_t x = k->u.i;
          if (x < -len || x >= len)
            return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS, "index out of range");
          if (x < 0)
            x += len;
          st[i] = x;
          en[i] = x + 1;
          sd[i] = 1;
          sq[nsq++] = i;
        }
      else if (k->kind == CS_VALUE_CALL && g_strcmp0 (k->u.call.callee, "slice") == 0 && k->u.call.n_args == 3)
        {
          int64_t v[3];

          switch (cs_meta_slice_bounds (k, len, v))
            {
            case CS_META_SLICE_NOT_INT:
              return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS, "slice bounds must be ints");
            case CS_META_SLICE_BAD_STEP:
              return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS, "slice step must be >= 1");
            case CS_META_SLICE_OUT_OF_RANGE:
              return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS, "slice out of range");
            case CS_META_SLICE_OK:
            default:
              break;
            }
          st[i] = v[0];
          en[i] = v[1];
          sd[i] = v[2];
        }
      else
        return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_UNSUPPORTED, "unsupported index");
      if (st[i] != 0 || en[i] != len || sd[i] != 1)
        need_slice = TRUE;
    }
  if (need_slice || nsq > 0)
    {
      Args al = { 0 };
      ap (&al, a);
      ap (&al, vints (dx, CS_VALUE_LIST, st, ta->rank));
      ap (&al, vints (dx, CS_VALUE_LIST, en, ta->rank));
      ap (&al, vints (dx, CS_VALUE_LIST, sd, ta->rank));
      if (!(a = emit (dx, out, CS_OP_PRIM_SLICE_PRIM, &al, error)))
        return NULL;
    }
  if (nsq > 0)
    {
      Args al = { 0 };
      ap (&al, a);
      ap (&al, vints (dx, CS_VALUE_TUPLE, sq, nsq));
      if (!(a = emit (dx, out, CS_OP_PRIM_SQUEEZE, &al, error)))
        return NULL;
    }
  return a;
}

/* clang.cat: PRESERVE promotion when more than one tensor, prims.cat(list, dim). */
static CsValue *
b_cat (Dx *dx, const CsStmt *s, GPtrArray *out, GError **error)
{
  CsValue *ts = cs_stmt_arg (s, CS_ARG_TENSORS), *dim = cs_stmt_arg (s, CS_ARG_DIM);
  CsValue *items[256];
  guint n;
  Args al = { 0 };

  if (!ts || (ts->kind != CS_VALUE_TUPLE && ts->kind != CS_VALUE_LIST) || ts->u.seq.n == 0
      || ts->u.seq.n > G_N_ELEMENTS (items))
    return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS, "needs a sequence of tensors");
  n = ts->u.seq.n;
  for (guint i = 0; i < n; i++)
    items[i] = ts->u.seq.items[i];
  if (n > 1)
    {
      CsDtypeRef comp, res;

      if (!promote (dx, s, items, n, CS_PROMO_PRESERVE, &comp, &res, error))
        return NULL;
      for (guint i = 0; i < n; i++)
        if (!(items[i] = convert_to (dx, out, items[i], res.dtype, error)))
          return NULL;
    }
  ap (&al, cs_value_new_seq (arena (dx), CS_VALUE_LIST, items, n));
  ap (&al, dim ? dim : vint (dx, 0));
  return emit (dx, out, CS_OP_PRIM_CAT, &al, error);
}

/* clang.slice_in_dim */
static CsValue *
slice_in_dim (Dx *dx, GPtrArray *out, CsValue *a, int64_t start, int64_t stop, guint dim, GError **error)
{
  CsProxy *ta = tensor_of (a);
  int64_t st[CS_MAX_DIMS], en[CS_MAX_DIMS], sd[CS_MAX_DIMS];
  Args al = { 0 };

  for (guint i = 0; i < ta->rank; i++)
    {
      st[i] = 0;
      en[i] = ta->shape[i];
      sd[i] = 1;
    }
  st[dim] = start;
  en[dim] = MIN (stop, ta->shape[dim]);
  ap (&al, a);
  ap (&al, vints (dx, CS_VALUE_LIST, st, ta->rank));
  ap (&al, vints (dx, CS_VALUE_LIST, en, ta->rank));
  ap (&al, vints (dx, CS_VALUE_LIST, sd, ta->rank));
  return emit (dx, out, CS_OP_PRIM_SLICE_PRIM, &al, error);
}

static CsValue *
b_split (Dx *dx, const CsStmt *s, GPtrArray *out, GError **error)
{
  CsValue *a = cs_stmt_arg (s, CS_ARG_A), *sz = cs_stmt_arg (s, CS_ARG_SIZE_OR_SECTIONS);
  CsProxy *ta = tensor_of (a);
  int64_t dim = 0, size, secs[256];
  guint d, n = 0;
  CsValue *pieces[256];
  gboolean is_int;

  if (!ta || !sz)
    return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS, "needs a typed tensor and sizes");
  if (cs_stmt_arg (s, CS_ARG_DIM) && !int_of (cs_stmt_arg (s, CS_ARG_DIM), &dim))
    return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS, "dim must be an int");
  if (!cs_meta_canonicalize_dim (ta->rank, dim, &d) || ta->rank == 0)
    return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS, "bad dim");
  is_int = int_of (sz, &size);
  if (is_int)
    {
      if (size <= 0)
        return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_UNSUPPORTED, "split size must be positive");
      for (int64_t at = 0; at < ta->shape[d];)
        {
          int64_t step = MIN (size, ta->shape[d] - at);

          if (n >= G_N_ELEMENTS (pieces))
            return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS, "too many pieces");
          if (!(pieces[n++] = slice_in_dim (dx, out, a, at, at + step, d, error)))
            return NULL;
          at += step;
        }
      return cs_value_new_seq (arena (dx), CS_VALUE_LIST, pieces, n);
    }
  if (!cs_value_get_int_seq (sz, secs, G_N_ELEMENTS (secs), &n))
    return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS, "size_or_sections must be ints");
  {
    int64_t at = 0;
    for (guint i = 0; i < n; i++)
      {
        if (secs[i] < 0 || secs[i] > ta->shape[d] - at)
          return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS,
                          "split sections exceed the dimension's length");
        if (!(pieces[i] = slice_in_dim (dx, out, a, at, at + secs[i], d, error)))
          return NULL;
        at += secs[i];
      }
  }
  return cs_value_new_seq (arena (dx), CS_VALUE_TUPLE, pieces, n);
}

/* ltorch.matmul: 1-d -> prims.matmul; nd @ 2d -> reshape, 2-d gemm, reshape; batched -> expand. */
static CsValue *
b_matmul (Dx *dx, const CsStmt *s, GPtrArray *out, GError **error)
{
  CsValue *a = cs_stmt_arg (s, CS_ARG_A), *b = cs_stmt_arg (s, CS_ARG_B);
  CsProxy *ta = tensor_of (a), *tb = tensor_of (b);
  CsValue *ops[2];

  if (!ta || !tb)
    return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS, "needs two typed tensors");
  if (ta->rank == 1 || tb->rank == 1)
    {
      ops[0] = a;
      ops[1] = b;
      return emit_matmul_like (dx, out, CS_OP_PRIM_MATMUL, ops, 2, error);
    }
  if (ta->rank > 2 && tb->rank == 2)
    {
      Args al = { 0 };
      CsValue *a2, *r;

      ap (&al, a);
      ap (&al, vint (dx, -1));
      ap (&al, vint (dx, ta->shape[ta->rank - 1]));
      if (!(a2 = call_ltorch (dx, out, "ltorch.reshape", &al, error)))
        return NULL;
      ops[0] = a2;
      ops[1] = b;
      if (!(r = emit_matmul_like (dx, out, CS_OP_PRIM_MATMUL, ops, 2, error)))
        return NULL;
      al.n = 0;
      ap (&al, r);
      for (guint i = 0; i + 2 < ta->rank; i++)
        ap (&al, vint (dx, ta->shape[i]));
      ap (&al, vint (dx, -1));
      ap (&al, vint (dx, tb->shape[1]));
      return call_ltorch (dx, out, "ltorch.reshape", &al, error);
    }
  {
    int64_t batch[CS_MAX_DIMS], shp[CS_MAX_DIMS];
    guint nb;

    if (ta->rank < 2 || tb->rank < 2
        || !cs_meta_broadcast_shapes (ta->shape, ta->rank - 2, tb->shape, tb->rank - 2, batch, &nb))
      return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS, "batch dims cannot be broadcast");
    memcpy (shp, batch, sizeof (int64_t) * nb);
    shp[nb] = ta->shape[ta->rank - 2];
    shp[nb + 1] = ta->shape[ta->rank - 1];
    if (!same_dims (shp, nb + 2, ta->shape, ta->rank) && !(a = expand_to (dx, out, a, shp, nb + 2, error)))
      return NULL;
    shp[nb] = tb->shape[tb->rank - 2];
    shp[nb + 1] = tb->shape[tb->rank - 1];
    if (!same_dims (shp, nb + 2, tb->shape, tb->rank) && !(b = expand_to (dx, out, b, shp, nb + 2, error)))
      return NULL;
    ops[0] = a;
    ops[1] = b;
    return emit_matmul_like (dx, out, CS_OP_PRIM_MATMUL, ops, 2, error);
  }
}

/* layer_norm (thunder/torch/__init__.py `_native_layer_norm` and `_normalize`). */
static CsValue *
b_layer_norm (Dx *dx, const CsStmt *s, GPtrArray *out, GError **error)
{
  CsValue *a = cs_stmt_arg (s, CS_ARG_A), *w = cs_stmt_arg (s, CS_ARG_WEIGHT);
  CsValue *b = cs_stmt_arg (s, CS_ARG_BIAS);
  CsValue *eps = cs_stmt_arg (s, CS_ARG_EPS);
  CsProxy *ta = tensor_of (a);
  int64_t ns[CS_MAX_DIMS];
  guint nn = 0;
  CsValue *acc, *vm, *var, *mean, *rstd, *o;

  if (!ta)
    return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS, "needs a typed tensor");
  if (tensor_of (w))
    nn = tensor_of (w)->rank;
  else if (tensor_of (b))
    nn = tensor_of (b)->rank;
  else if (!cs_value_get_int_seq (cs_stmt_arg (s, CS_ARG_NORMALIZED_SHAPE), ns, CS_MAX_DIMS, &nn))
    return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS, "normalized_shape must be ints");
  if (nn == 0 || nn > ta->rank)
    return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS, "normalized_shape does not fit the input");
  if (!(acc = lt_to (dx, out, a, computation_dtype (dx, ta->dtype), error)))
    return NULL;
  {
    Args al = { 0 };

    ap (&al, acc);
    ap (&al, vrange (dx, CS_VALUE_TUPLE, ta->rank - nn, ta->rank));
    ak (&al, "keepdim", vbool (dx, TRUE));
    ak (&al, "correction", vint (dx, 0));
    if (!(vm = call_ltorch (dx, out, "ltorch.var_mean", &al, error)))
      return NULL;
    var = use (dx, vm->u.seq.items[0]);
    mean = use (dx, vm->u.seq.items[1]);
  }
  if (!(rstd = lt_binary (dx, out, "ltorch.add", var, is_none (eps) ? vfloat (dx, 1e-5) : eps, error))
      || !(rstd = lt_unary (dx, out, "ltorch.rsqrt", rstd, error))
      || !(o = lt_binary (dx, out, "ltorch.sub", a, mean, error))
      || !(o = lt_binary (dx, out, "ltorch.mul", o, rstd, error)))
    return NULL;
  if (tensor_of (w) && !(o = lt_binary (dx, out, "ltorch.mul", o, w, error)))
    return NULL;
  if (tensor_of (b) && !(o = lt_binary (dx, out, "ltorch.add", o, b, error)))
    return NULL;
  if (!(o = lt_to (dx, out, o, ta->dtype, error)))
    return NULL;
  if (!lt_to (dx, out, mean, ta->dtype, error) || !lt_to (dx, out, rstd, ta->dtype, error))
    return NULL;
  return o;
}

/* rms_norm (thunder/torch/__init__.py `rms_norm`). */
static CsValue *
b_rms_norm (Dx *dx, const CsStmt *s, GPtrArray *out, GError **error)
{
  CsValue *a = cs_stmt_arg (s, CS_ARG_A), *w = cs_stmt_arg (s, CS_ARG_WEIGHT);
  CsValue *eps = cs_stmt_arg (s, CS_ARG_EPS);
  CsProxy *ta = tensor_of (a);
  int64_t ns[CS_MAX_DIMS];
  guint nn = 0;
  CsDtype in_dt;
  CsValue *x, *t;

  if (!ta)
    return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS, "needs a typed tensor");
  if (!cs_value_get_int_seq (cs_stmt_arg (s, CS_ARG_NORMALIZED_SHAPE), ns, CS_MAX_DIMS, &nn) || nn == 0 || nn > ta->rank)
    return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS, "normalized_shape does not fit the input");
  in_dt = ta->dtype;
  x = a;
  if ((in_dt == CS_DTYPE_F16 || in_dt == CS_DTYPE_BF16) && dx->policy.elementwise != CS_ELEMENTWISE_NATIVE)
    if (!(x = convert_to (dx, out, a, CS_DTYPE_F32, error)))
      return NULL;
  if (is_none (eps))
    {
      CsDtype d = tensor_of (x)->dtype;
      eps = vfloat (dx, d == CS_DTYPE_BF16 ? 0.0078125 : d == CS_DTYPE_F16 ? 0.0009765625
                        : d == CS_DTYPE_F64 ? 2.220446049250313e-16 : 1.1920928955078125e-07);
    }
  if (!(t = lt_binary (dx, out, "ltorch.mul", x, x, error)))
    return NULL;
  {
    Args al = { 0 };

    ap (&al, t);
    ap (&al, vrange (dx, CS_VALUE_LIST, ta->rank - nn, ta->rank));
    ap (&al, vbool (dx, TRUE));
    ak (&al, "dtype", vnone (dx));
    if (!(t = call_ltorch (dx, out, "ltorch.mean", &al, error)))
      return NULL;
  }
  if (!(t = lt_binary (dx, out, "ltorch.add", t, eps, error))
      || !(t = lt_unary (dx, out, "ltorch.rsqrt", t, error))
      || !(t = lt_binary (dx, out, "ltorch.mul", x, t, error)))
    return NULL;
  if (tensor_of (w) && !(t = lt_binary (dx, out, "ltorch.mul", t, w, error)))
    return NULL;
  return convert_to (dx, out, t, in_dt, error);
}

/* embedding: take-based unless padding_idx / max_norm is set. */
static CsValue *
b_embedding (Dx *dx, const CsStmt *s, GPtrArray *out, GError **error)
{
  CsValue *a = cs_stmt_arg (s, CS_ARG_A), *w = cs_stmt_arg (s, CS_ARG_WEIGHT);
  CsValue *pad = cs_stmt_arg (s, CS_ARG_PADDING_IDX), *maxn = cs_stmt_arg (s, CS_ARG_MAX_NORM);
  CsProxy *ta = tensor_of (a), *tw = tensor_of (w);
  Args al = { 0 };
  CsValue *flat, *r;
  int64_t numel, oshape[CS_MAX_DIMS];
  guint r_n;

  if (!ta || !tw || tw->rank != 2)
    return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS, "needs indices and a 2-d weight");
  if (!is_none (pad) || !is_none (maxn))
    {
      for (guint i = 0; i < s->n_args && i < G_N_ELEMENTS (al.a); i++)
        (s->args[i].name ? ak (&al, cs_arena_strdup (arena (dx), s->args[i].name), s->args[i].value)
                         : ap (&al, s->args[i].value));
      return emit (dx, out, CS_OP_PRIM_EMBEDDING, &al, error);
    }
  if (ta->rank == 1)
    {
      ap (&al, w);
      ap (&al, a);
      ap (&al, vint (dx, 0));
      return emit (dx, out, CS_OP_PRIM_TAKE, &al, error);
    }
  numel = cs_shape_numel (ta->shape, ta->rank);
  ap (&al, a);
  ap (&al, vints (dx, CS_VALUE_LIST, &numel, 1));
  if (!(flat = call_ltorch (dx, out, "ltorch.reshape", &al, error)))
    return NULL;
  al.n = 0;
  ap (&al, w);
  ap (&al, flat);
  ap (&al, vint (dx, 0));
  if (!(r = emit (dx, out, CS_OP_PRIM_TAKE, &al, error)))
    return NULL;
  memcpy (oshape, ta->shape, sizeof (int64_t) * ta->rank);
  oshape[ta->rank] = tw->shape[1];
  r_n = ta->rank + 1;
  al.n = 0;
  ap (&al, r);
  ap (&al, vints (dx, CS_VALUE_LIST, oshape, r_n));
  return call_ltorch (dx, out, "ltorch.reshape", &al, error);
}

/* dropout(a, p, training, inplace) */
static CsValue *
b_dropout (Dx *dx, const CsStmt *s, GPtrArray *out, GError **error)
{
  CsValue *a = cs_stmt_arg (s, CS_ARG_A), *pv = cs_stmt_arg (s, CS_ARG_P);
  CsValue *tr = cs_stmt_arg (s, CS_ARG_TRAINING);
  CsProxy *ta = tensor_of (a);
  double p = 0.5;
  CsPyType pt;
  CsValue *r, *mask;
  Args al = { 0 };

  if (!ta)
    return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS, "needs a typed tensor");
  if (pv && !number_of (pv, &pt, &p))
    return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS, "p must be a number");
  if ((tr && tr->kind == CS_VALUE_BOOL && !tr->u.b) || p == 0)
    return a;
  if (p == 1)
    return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_UNSUPPORTED, "p=1 (zeros_like) is not decomposed");
  ap (&al, a);
  ap (&al, vfloat (dx, 0.0));
  ap (&al, vfloat (dx, 1.0));
  ak (&al, "device", vnone (dx));
  ak (&al, "dtype", vnone (dx));
  if (!(r = call_ltorch (dx, out, "ltorch.uniform_like", &al, error))
      || !(mask = lt_binary (dx, out, "ltorch.lt", r, vfloat (dx, 1 - p), error))
      || !(r = lt_binary (dx, out, "ltorch.mul", a, mask, error)))
    return NULL;
  return lt_binary (dx, out, "ltorch.mul", r, vfloat (dx, 1 / (1 - p)), error);
}

/* uniform_like(a, minval, maxval, device=, dtype=) -> prims.uniform(a.shape, ...) */
static CsValue *
b_uniform_like (Dx *dx, const CsStmt *s, GPtrArray *out, GError **error)
{
  CsValue *a = cs_stmt_arg (s, CS_ARG_A), *mn = cs_stmt_arg (s, CS_ARG_MINVAL), *mx = cs_stmt_arg (s, CS_ARG_MAXVAL);
  CsValue *dv = cs_stmt_arg (s, CS_ARG_DEVICE), *dt = cs_stmt_arg (s, CS_ARG_DTYPE);
  CsProxy *ta = tensor_of (a);
  CsDtype d;
  CsDevice dev;
  Args al = { 0 };

  if (!ta)
    return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS, "needs a typed tensor");
  d = ta->dtype;
  dev = ta->device;
  if (!is_none (dt))
    cs_value_get_dtype (dt, &d);
  if (!is_none (dv))
    cs_value_get_device (dv, &dev);
  ap (&al, vints (dx, CS_VALUE_TUPLE, ta->shape, ta->rank));
  ap (&al, mn ? mn : vfloat (dx, 0.0));
  ap (&al, mx ? mx : vfloat (dx, 1.0));
  ak (&al, "device", vdevice (dx, &dev));
  ak (&al, "dtype", vdtype (dx, d, FALSE));
  return emit (dx, out, CS_OP_PRIM_UNIFORM, &al, error);
}

/* arange(start, end, step, device=, dtype=): integer ranges only (clang.arange -> prims.iota). */
static CsValue *
b_arange (Dx *dx, const CsStmt *s, GPtrArray *out, GError **error)
{
  CsValue *sv = cs_stmt_arg (s, CS_ARG_START), *ev = cs_stmt_arg (s, CS_ARG_END);
  CsValue *stv = cs_stmt_arg (s, CS_ARG_STEP);
  CsValue *dv = cs_stmt_arg (s, CS_ARG_DEVICE), *dt = cs_stmt_arg (s, CS_ARG_DTYPE);
  int64_t start = 0, end, step = 1, len;
  CsDtype d = CS_DTYPE_I64;
  CsDevice dev = { CS_DEVICE_CUDA, 0 };
  Args al = { 0 };

  if (is_none (ev))
    {
      if (!int_of (sv, &end))
        return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_UNSUPPORTED, "only integer ranges are decomposed");
    }
  else if (!int_of (sv, &start) || !int_of (ev, &end))
    return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_UNSUPPORTED, "only integer ranges are decomposed");
  if (stv && !is_none (stv) && !int_of (stv, &step))
    return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_UNSUPPORTED, "only integer ranges are decomposed");
  if (!is_none (dt) && (!cs_value_get_dtype (dt, &d) || !cs_dtype_is_exact (d)))
    return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_UNSUPPORTED, "only integer ranges are decomposed");
  if (!is_none (dv))
    cs_value_get_device (dv, &dev);
  if (step == 0 || ((double) end - (double) start) / (double) step < 0)
    return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS, "step must make progress");
  if (!(fabs ((double) end - (double) start) / fabs ((double) step) < (double) (G_GINT64_CONSTANT (1) << 62)))
    return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS, "the range is too long");
  len = (int64_t) ceil (((double) end - (double) start) / (double) step);
  ap (&al, vint (dx, len));
  ak (&al, "start", vint (dx, start));
  ak (&al, "step", vint (dx, step));
  ak (&al, "device", vdevice (dx, &dev));
  ak (&al, "dtype", vdtype (dx, d, FALSE));
  return emit (dx, out, CS_OP_PRIM_IOTA, &al, error);
}

/* tril(a, diagonal, fill_value=) */
static CsValue *
b_tril (Dx *dx, const CsStmt *s, GPtrArray *out, GError **error)
{
  CsValue *a = cs_stmt_arg (s, CS_ARG_A), *diag = cs_stmt_arg (s, CS_ARG_DIAGONAL);
  CsValue *fill = cs_stmt_arg (s, CS_ARG_FILL_VALUE);
  CsProxy *ta = tensor_of (a);
  CsValue *rows, *cols, *mask;
  Args al = { 0 };

  if (!ta || ta->rank < 2)
    return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS, "needs a tensor of rank >= 2");
  if (ta->dtype == CS_DTYPE_B8)
    return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_UNSUPPORTED, "bool tril (a & mask) is not decomposed");
  for (guint k = 0; k < 2; k++)
    {
      CsValue *r;

      al.n = 0;
      ap (&al, vint (dx, ta->shape[ta->rank - 2 + k]));
      ap (&al, vnone (dx));
      ap (&al, vint (dx, 1));
      ak (&al, "device", vdevice (dx, &ta->device));
      ak (&al, "dtype", vnone (dx));
      if (!(r = call_ltorch (dx, out, "ltorch.arange", &al, error)))
        return NULL;
      al.n = 0;
      ap (&al, r);
      ap (&al, vint (dx, k == 0 ? -1 : -2));
      if (!(r = call_ltorch (dx, out, "ltorch.unsqueeze", &al, error)))
        return NULL;
      if (k == 0)
        rows = r;
      else
        cols = r;
    }
  if (!(rows = lt_binary (dx, out, "ltorch.add", rows, diag ? diag : vint (dx, 0), error))
      || !(mask = lt_binary (dx, out, "ltorch.ge", rows, cols, error)))
    return NULL;
  al.n = 0;
  ap (&al, mask);
  ap (&al, a);
  ap (&al, is_none (fill) ? vint (dx, 0) : fill);
  return call_ltorch (dx, out, "ltorch.where", &al, error);
}

/* nll_loss(a, target, weight, ignore_index, reduction) (`_nll_loss_helper`), weight=None only. */
static CsValue *
nll_loss (Dx *dx, const CsStmt *s, GPtrArray *out, CsValue *a, CsValue *target, CsValue *weight,
          int64_t ignore_index, const char *reduction, GError **error)
{
  CsProxy *ta = tensor_of (a);
  guint class_dim;
  int64_t num_class;
  gboolean can_mask;
  CsValue *o, *bt, *mask, *r, *tw;
  Args al = { 0 };

  if (!ta || !tensor_of (target))
    return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS, "needs typed input and target");
  if (!is_none (weight))
    return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_UNSUPPORTED, "class weights are not decomposed");
  class_dim = ta->rank >= 2 ? 1 : 0;
  num_class = ta->shape[class_dim];
  can_mask = ignore_index >= 0 && ignore_index < num_class;
  if (!(o = lt_unary (dx, out, "ltorch.neg", a, error)))
    return NULL;
  ap (&al, target);
  ap (&al, vint (dx, class_dim));
  if (!(bt = call_ltorch (dx, out, "ltorch.unsqueeze", &al, error)))
    return NULL;
  if (can_mask)
    {
      al.n = 0;
      ap (&al, o);
      ap (&al, bt);
      ap (&al, vint (dx, class_dim));
      if (!(o = call_ltorch (dx, out, "ltorch.take_along_dim", &al, error))
          || !(mask = lt_binary (dx, out, "ltorch.ne", bt, vint (dx, ignore_index), error)))
        return NULL;
      al.n = 0;
      ap (&al, mask);
      ap (&al, o);
      ap (&al, vint (dx, 0));
      if (!(o = call_ltorch (dx, out, "ltorch.where", &al, error)))
        return NULL;
    }
  else
    {
      CsValue *cfg_items[CS_MAX_DIMS];
      CsValue *padded;

      if (!(mask = lt_binary (dx, out, "ltorch.ne", bt, vint (dx, ignore_index), error)))
        return NULL;
      al.n = 0;
      ap (&al, mask);
      ap (&al, bt);
      ap (&al, vint (dx, num_class));
      if (!(bt = call_ltorch (dx, out, "ltorch.where", &al, error)))
        return NULL;
      for (guint i = 0; i < ta->rank; i++)
        {
          int64_t c[3] = { 0, i == class_dim ? 1 : 0, 0 };
          cfg_items[i] = vints (dx, CS_VALUE_TUPLE, c, 3);
        }
      al.n = 0;
      ap (&al, o);
      ap (&al, cs_dtype_is_exact (ta->dtype) ? vint (dx, 0) : vfloat (dx, 0.0));
      ap (&al, cs_value_new_seq (arena (dx), CS_VALUE_LIST, cfg_items, ta->rank));
      if (!(padded = emit (dx, out, CS_OP_PRIM_PAD, &al, error)))
        return NULL;
      al.n = 0;
      ap (&al, padded);
      ap (&al, bt);
      ap (&al, vint (dx, class_dim));
      if (!(o = call_ltorch (dx, out, "ltorch.take_along_dim", &al, error)))
        return NULL;
    }
  if (g_str_equal (reduction, "none"))
    {
      al.n = 0;
      ap (&al, o);
      ap (&al, vint (dx, class_dim));
      return call_ltorch (dx, out, "ltorch.squeeze", &al, error);
    }
  if (!(r = lt_reduce (dx, out, "ltorch.sum", o, vnone (dx), FALSE, error)))
    return NULL;
  if (g_str_equal (reduction, "sum"))
    return r;
  if (!(tw = lt_reduce (dx, out, "ltorch.sum", mask, vnone (dx), FALSE, error)))
    return NULL;
  return lt_binary (dx, out, "ltorch.true_divide", r, tw, error);
}

static const char *
str_arg (const CsValue *v, const char *dflt)
{
  return (v && v->kind == CS_VALUE_STRING) ? v->u.s : dflt;
}

static CsValue *
b_nll_loss (Dx *dx, const CsStmt *s, GPtrArray *out, GError **error)
{
  int64_t ii = -1;
  CsValue *iv = cs_stmt_arg (s, CS_ARG_IGNORE_INDEX);

  if (!is_none (iv) && !int_of (iv, &ii))
    return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS, "ignore_index must be an int");
  return nll_loss (dx, s, out, cs_stmt_arg (s, CS_ARG_A), cs_stmt_arg (s, CS_ARG_TARGET),
                   cs_stmt_arg (s, CS_ARG_WEIGHT), ii, str_arg (cs_stmt_arg (s, CS_ARG_REDUCTION), "mean"), error);
}

/* log_softmax_backward(g, output, dim, dtype) (thunder/torch/__init__.py):
 * to(g - exp(output) * sum(g, dim, keepdim=True), dtype). */
static CsValue *
b_log_softmax_backward (Dx *dx, const CsStmt *s, GPtrArray *out, GError **error)
{
  CsValue *g = cs_stmt_arg (s, CS_ARG_G), *o = cs_stmt_arg (s, CS_ARG_OUTPUT);
  CsValue *dim = cs_stmt_arg (s, CS_ARG_DIM), *dv = cs_stmt_arg (s, CS_ARG_DTYPE);
  CsValue *e, *sg, *m, *r;
  CsDtype d;

  if (!tensor_of (g) || !tensor_of (o) || dim == NULL)
    return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS, "needs typed g and output and a dim");
  d = tensor_of (g)->dtype;
  if (!is_none (dv) && !cs_value_get_dtype (dv, &d))
    return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS, "dtype is not a dtype");
  if (!(e = lt_unary (dx, out, "ltorch.exp", o, error))
      || !(sg = lt_reduce (dx, out, "ltorch.sum", g, dim, TRUE, error))
      || !(m = lt_binary (dx, out, "ltorch.mul", e, sg, error))
      || !(r = lt_binary (dx, out, "ltorch.sub", g, m, error)))
    return NULL;
  return lt_to (dx, out, r, d, error);
}

/* cross_entropy with class-index targets and no label smoothing: log_softmax + nll_loss. */
static CsValue *
b_cross_entropy (Dx *dx, const CsStmt *s, GPtrArray *out, GError **error)
{
  CsValue *a = cs_stmt_arg (s, CS_ARG_A), *t = cs_stmt_arg (s, CS_ARG_TARGET);
  CsValue *w = cs_stmt_arg (s, CS_ARG_WEIGHT);
  CsValue *iv = cs_stmt_arg (s, CS_ARG_IGNORE_INDEX), *ls = cs_stmt_arg (s, CS_ARG_LABEL_SMOOTHING);
  CsProxy *ta = tensor_of (a), *tt = tensor_of (t);
  CsPyType pt;
  double lsv = 0;
  int64_t ii = -100;
  Args al = { 0 };
  CsValue *l;

  if (!ta || !tt)
    return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS, "needs typed input and target");
  if (ls && number_of (ls, &pt, &lsv) && lsv != 0)
    return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_UNSUPPORTED, "label smoothing is not decomposed");
  if (same_dims (ta->shape, ta->rank, tt->shape, tt->rank))
    return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_UNSUPPORTED, "probability targets are not decomposed");
  if (!is_none (iv) && !int_of (iv, &ii))
    return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS, "ignore_index must be an int");
  ap (&al, a);
  ap (&al, vint (dx, ta->rank >= 2 ? 1 : 0));
  ak (&al, "dtype", vnone (dx));
  if (!(l = call_ltorch (dx, out, "ltorch.log_softmax", &al, error)))
    return NULL;
  al.n = 0;
  ap (&al, l);
  ap (&al, t);
  ap (&al, is_none (w) ? vnone (dx) : w);
  ap (&al, vint (dx, ii));
  ap (&al, cs_value_new_string (arena (dx), str_arg (cs_stmt_arg (s, CS_ARG_REDUCTION), "mean")));
  return call_ltorch (dx, out, "ltorch.nll_loss", &al, error);
}

/* scaled_dot_product_attention: the reference (math) decomposition. */
static CsValue *
b_sdpa (Dx *dx, const CsStmt *s, GPtrArray *out, GError **error)
{
  CsValue *q = cs_stmt_arg (s, CS_ARG_QUERY), *k = cs_stmt_arg (s, CS_ARG_KEY);
  CsValue *v = cs_stmt_arg (s, CS_ARG_VALUE);
  CsValue *mask = cs_stmt_arg (s, CS_ARG_ATTN_MASK), *dp = cs_stmt_arg (s, CS_ARG_DROPOUT_P);
  CsValue *causal = cs_stmt_arg (s, CS_ARG_IS_CAUSAL), *sc = cs_stmt_arg (s, CS_ARG_SCALE);
  CsProxy *tq = tensor_of (q);
  double scale;
  CsPyType pt;
  CsValue *l, *kt, *w;
  Args al = { 0 };

  if (!tq || !tensor_of (k) || !tensor_of (v))
    return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS, "needs typed query, key and value");
  if (is_none (sc))
    scale = 1.0 / pow ((double) tq->shape[tq->rank - 1], 0.5);
  else if (!number_of (sc, &pt, &scale))
    return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS, "scale must be a number");
  /* q and k are each scaled by sqrt(scale): a negative (or NaN) scale has none */
  if (!(scale >= 0))
    return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS,
                    "scale=%g is negative: the decomposition multiplies q and k by sqrt(scale)",
                    scale);
  scale = pow (scale, 0.5);
  if (!(q = lt_binary (dx, out, "ltorch.mul", q, vfloat (dx, scale), error)))
    return NULL;
  ap (&al, k);
  ap (&al, vint (dx, -2));
  ap (&al, vint (dx, -1));
  if (!(kt = call_ltorch (dx, out, "ltorch.transpose", &al, error))
      || !(kt = lt_binary (dx, out, "ltorch.mul", kt, vfloat (dx, scale), error))
      || !(l = lt_binary (dx, out, "ltorch.matmul", q, kt, error)))
    return NULL;
  if (causal && causal->kind == CS_VALUE_BOOL && causal->u.b)
    {
      if (!is_none (mask))
        return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS, "attn_mask must be None when is_causal=True");
      al.n = 0;
      ap (&al, l);
      ap (&al, vint (dx, 0));
      ak (&al, "fill_value", vfloat (dx, -INFINITY));
      if (!(l = call_ltorch (dx, out, "ltorch.tril", &al, error)))
        return NULL;
    }
  if (!is_none (mask))
    {
      CsProxy *tm = tensor_of (mask);

      if (!tm)
        return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS, "attn_mask must be a typed tensor");
      if (tm->dtype == CS_DTYPE_B8)
        {
          al.n = 0;
          ap (&al, mask);
          ap (&al, l);
          ap (&al, vfloat (dx, -INFINITY));
          if (!(l = call_ltorch (dx, out, "ltorch.where", &al, error)))
            return NULL;
        }
      else if (!(l = lt_binary (dx, out, "ltorch.add", l, mask, error)))
        return NULL;
    }
  al.n = 0;
  ap (&al, l);
  ap (&al, vint (dx, -1));
  ak (&al, "dtype", vnone (dx));
  if (!(w = call_ltorch (dx, out, "ltorch._softmax", &al, error)))
    return NULL;
  al.n = 0;
  ap (&al, w);
  ap (&al, dp ? dp : vfloat (dx, 0.0));
  ap (&al, vbool (dx, TRUE));
  ap (&al, vbool (dx, FALSE));
  if (!(w = call_ltorch (dx, out, "ltorch.dropout", &al, error)))
    return NULL;
  return lt_binary (dx, out, "ltorch.matmul", w, v, error);
}

/* clang.take_along_axis: expand the index except along dim, prims.take_along_axis. */
static CsValue *
b_take_along_dim (Dx *dx, const CsStmt *s, GPtrArray *out, GError **error)
{
  CsValue *a = cs_stmt_arg (s, CS_ARG_A), *idx = cs_stmt_arg (s, CS_ARG_INDICES);
  CsProxy *ta = tensor_of (a), *ti = tensor_of (idx);
  int64_t dim;
  guint d;
  Args al = { 0 };

  if (!ta || !ti || !int_of (cs_stmt_arg (s, CS_ARG_DIM), &dim) || !cs_meta_canonicalize_dim (ta->rank, dim, &d)
      || ti->rank != ta->rank)
    return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS, "needs a tensor, same-rank indices and a dim");
  {
    int64_t target[CS_MAX_DIMS];

    memcpy (target, ta->shape, sizeof (int64_t) * ta->rank);
    target[d] = ti->shape[d];
    if (!same_dims (target, ta->rank, ti->shape, ti->rank)
        && !(idx = expand_to (dx, out, idx, target, ta->rank, error)))
      return NULL;
  }
  ap (&al, a);
  ap (&al, idx);
  ap (&al, vint (dx, d));
  return emit (dx, out, CS_OP_PRIM_TAKE_ALONG_AXIS, &al, error);
}

/* ------------------------------------------------------------------------------------------ */
/* Dispatch                                                                                    */

static const CsOp *
semantic (const CsStmt *s)
{
  return cs_op_semantic (s->op ? s->op : cs_op_lookup (s->callee));
}

/* The builders of the composite ltorch ops whose decomposition is one function of the
 * statement, indexed by the op's semantic id (an op the table names needs no other arm here). */
typedef CsValue *(*CompositeBuilder) (Dx *dx, const CsStmt *s, GPtrArray *out, GError **error);

static const CompositeBuilder composite_builders[CS_N_OPS] = {
  [CS_OP_LTORCH_GELU] = b_gelu,
  [CS_OP_LTORCH_UNIFORM_LIKE] = b_uniform_like,
  [CS_OP_LTORCH_SOFTPLUS] = b_softplus,
  [CS_OP_LTORCH_TRIL] = b_tril,
  [CS_OP_LTORCH__SOFTMAX] = b_softmax,
  [CS_OP_LTORCH_LOG_SOFTMAX] = b_log_softmax,
  [CS_OP_LTORCH_LOGSUMEXP] = b_logsumexp,
  [CS_OP_LTORCH_LAYER_NORM] = b_layer_norm,
  [CS_OP_LTORCH_RMS_NORM] = b_rms_norm,
};

/* The emitter _cs_aten_lower() calls: ltorch symbols with their decompositions, prims. */
typedef struct
{
  Dx        *dx;  /* the decomposition the calls are made in */
  GPtrArray *out; /* CsStmt*: where they are appended, in order */
} AtenEmit;

static CsValue *
aten_call (gpointer data, const char *callee, const CsArg *args, guint n_args, GError **error)
{
  AtenEmit *e = data;
  const CsOp *op = cs_op_lookup (callee);
  Args al = { 0 };

  for (guint i = 0; i < n_args; i++)
    {
      if (args[i].name)
        ak (&al, args[i].name, args[i].value);
      else
        ap (&al, args[i].value);
    }
  if (cs_op_has_tag (op, CS_OP_TAG_PRIM))
    return emit (e->dx, e->out, op->id, &al, error);
  return call_ltorch (e->dx, e->out, callee, &al, error);
}

CsValue *
_cs_decompose_build (Dx *dx, const CsStmt *s, GPtrArray *out, GError **error)
{
  const CsOp *op = semantic (s);
  CsValue *a = cs_stmt_arg_if_declared (s, CS_ARG_A);   /* the cases below that read it */

  if (cs_op_has_tag (op, CS_OP_TAG_ATEN))
    {
      /* torch.compile's aten ops that no ltorch op matches (cs-aten-lower.c) */
      AtenEmit e = { dx, out };
      CsAtenLowerCtx ctx = { arena (dx), aten_call, &e };

      return _cs_aten_lower (&ctx, s, error);
    }
  if (composite_builders[op->id] != NULL)
    return composite_builders[op->id] (dx, s, out, error);
  /* an op whose registry row names the one prim it lowers to, under its promotion kind */
  if (op->lowers_to != CS_OP_OPAQUE && cs_op_has_tag (op, CS_OP_TAG_BINARY))
    return b_binary (dx, s, out, op->lowers_to, op->promo, error);
  if (op->lowers_to != CS_OP_OPAQUE)
    {
      if (op->id == CS_OP_LTORCH_ABS && tensor_of (a)
          && (tensor_of (a)->dtype == CS_DTYPE_B8 || tensor_of (a)->dtype == CS_DTYPE_U8))
        return a;   /* clang.abs short-circuits unsigned dtypes */
      return b_unary (dx, s, out, op->lowers_to, op->promo, error);
    }
  switch (op->id)
    {
    case CS_OP_LTORCH_ADD:
      return b_add_sub (dx, s, out, CS_OP_PRIM_ADD, error);
    case CS_OP_LTORCH_SUB:
      return b_add_sub (dx, s, out, CS_OP_PRIM_SUB, error);
    case CS_OP_LTORCH_DIV:
      {
        CsValue *rm = cs_stmt_arg (s, CS_ARG_ROUNDING_MODE);
        Args al = { 0 };

        if (!is_none (rm))
          return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_UNSUPPORTED, "rounding_mode is not decomposed");
        ap (&al, cs_stmt_arg (s, CS_ARG_A));
        ap (&al, cs_stmt_arg (s, CS_ARG_B));
        return call_ltorch (dx, out, "ltorch.true_divide", &al, error);
      }
    case CS_OP_LTORCH_SIGMOID:
      return clang_sigmoid (dx, s, out, a, error);
    case CS_OP_LTORCH_SILU:
      {
        CsValue *sg = clang_sigmoid (dx, s, out, a, error);
        if (!sg)
          return NULL;
        return ew_binary (dx, s, out, CS_OP_PRIM_MUL, a, sg, CS_PROMO_DEFAULT, error);
      }
    case CS_OP_LTORCH_RELU:
      {
        CsValue *m;
        Args al = { 0 };

        if (!(m = lt_binary (dx, out, "ltorch.gt", a, vint (dx, 0), error)))
          return NULL;
        ap (&al, m);
        ap (&al, a);
        ap (&al, vint (dx, 0));
        return call_ltorch (dx, out, "ltorch.where", &al, error);
      }
    case CS_OP_LTORCH_WHERE:
      return clang_where (dx, s, out, cs_stmt_arg (s, CS_ARG_PRED), cs_stmt_arg (s, CS_ARG_A),
                          cs_stmt_arg (s, CS_ARG_B), error);
    case CS_OP_LTORCH_LINEAR:
      {
        CsValue *ops[3] = { cs_stmt_arg (s, CS_ARG_A), cs_stmt_arg (s, CS_ARG_W),
                            cs_stmt_arg (s, CS_ARG_BIAS) };

        if (!ops[0] || !ops[1])
          return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS, "needs an input and a weight");
        if (ops[2] == NULL)
          ops[2] = vnone (dx);
        return emit_matmul_like (dx, out, CS_OP_PRIM_LINEAR, ops, 3, error);
      }
    case CS_OP_LTORCH_MATMUL:
      return b_matmul (dx, s, out, error);
    case CS_OP_LTORCH_SUM:
    case CS_OP_LTORCH_MEAN:
    case CS_OP_LTORCH_AMAX:
    case CS_OP_LTORCH_AMIN:
    case CS_OP_LTORCH_VAR_MEAN:
      return b_reduction (dx, s, out, op->id, error);
    case CS_OP_LTORCH_TO:
      return b_to (dx, s, out, error);
    case CS_OP_LTORCH_RESHAPE:
      {
        int64_t shape[CS_MAX_DIMS];
        guint n;

        if (!varargs_ints (s, 1, shape, &n))
          return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS, "shape must be ints");
        return clang_reshape (dx, s, out, a, shape, n, error);
      }
    case CS_OP_LTORCH_VIEW:
      {
        int64_t shape[CS_MAX_DIMS];
        guint n;
        Args al = { 0 };

        if (!varargs_ints (s, 1, shape, &n))
          return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_UNSUPPORTED, "view(dtype) is not decomposed");
        ap (&al, a);
        ap (&al, vints (dx, CS_VALUE_TUPLE, shape, n));
        return call_ltorch (dx, out, "ltorch.reshape", &al, error);
      }
    case CS_OP_LTORCH_TRANSPOSE:
      {
        CsProxy *ta = tensor_of (a);
        int64_t d0, d1, perm[CS_MAX_DIMS];
        guint c0, c1;

        if (!ta || !int_of (cs_stmt_arg (s, CS_ARG_DIM0), &d0) || !int_of (cs_stmt_arg (s, CS_ARG_DIM1), &d1)
            || !cs_meta_canonicalize_dim (ta->rank, d0, &c0) || !cs_meta_canonicalize_dim (ta->rank, d1, &c1))
          return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS, "needs a tensor and two dims");
        for (guint i = 0; i < ta->rank; i++)
          perm[i] = i;
        if (ta->rank > 0)
          {
            perm[c0] = c1;
            perm[c1] = c0;
          }
        return clang_transpose (dx, s, out, a, perm, ta->rank, error);
      }
    case CS_OP_LTORCH_PERMUTE:
      {
        int64_t perm[CS_MAX_DIMS];
        guint n;

        if (!varargs_ints (s, 1, perm, &n))
          return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS, "dims must be ints");
        return clang_transpose (dx, s, out, a, perm, n, error);
      }
    case CS_OP_LTORCH_EXPAND:
      {
        CsProxy *ta = tensor_of (a);
        int64_t shape[CS_MAX_DIMS];
        guint n;

        if (!ta || !varargs_ints (s, 1, shape, &n) || n < ta->rank)
          return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS, "needs a tensor and a shape");
        for (guint i = 0; i < ta->rank; i++)
          if (shape[n - ta->rank + i] == -1)
            shape[n - ta->rank + i] = ta->shape[i];
        return expand_to (dx, out, a, shape, n, error);
      }
    case CS_OP_LTORCH_UNSQUEEZE:
      {
        int64_t d;

        if (!int_of (cs_stmt_arg (s, CS_ARG_DIM), &d))
          return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS, "dim must be an int");
        return clang_unsqueeze (dx, s, out, a, d, error);
      }
    case CS_OP_LTORCH_SQUEEZE:
      {
        CsProxy *ta = tensor_of (a);
        CsValue *dv = cs_stmt_arg (s, CS_ARG_DIM);
        int64_t dims[CS_MAX_DIMS], keep[CS_MAX_DIMS];
        guint n = 0, nk = 0;
        Args al = { 0 };

        if (!ta)
          return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS, "needs a typed tensor");
        if (is_none (dv))
          {
            for (guint i = 0; i < ta->rank; i++)
              if (ta->shape[i] == 1)
                keep[nk++] = i;
          }
        else
          {
            if (!cs_value_get_int_seq (dv, dims, CS_MAX_DIMS, &n))
              return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS, "dim must be ints");
            for (guint i = 0; i < n; i++)
              {
                guint d;
                if (!cs_meta_canonicalize_dim (ta->rank, dims[i], &d))
                  return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS, "bad dim");
                if (ta->rank > 0 && ta->shape[d] == 1)
                  keep[nk++] = d;
              }
          }
        ap (&al, a);
        ap (&al, vints (dx, CS_VALUE_TUPLE, keep, nk));
        return emit (dx, out, CS_OP_PRIM_SQUEEZE, &al, error);
      }
    case CS_OP_LTORCH_GETITEM:
      return b_getitem (dx, s, out, error);
    case CS_OP_LTORCH_CAT:
      return b_cat (dx, s, out, error);
    case CS_OP_LTORCH_SPLIT:
      return b_split (dx, s, out, error);
    case CS_OP_LTORCH_EMBEDDING:
      return b_embedding (dx, s, out, error);
    case CS_OP_LTORCH_DROPOUT:
      return b_dropout (dx, s, out, error);
    case CS_OP_LTORCH_CROSS_ENTROPY:
      return b_cross_entropy (dx, s, out, error);
    case CS_OP_LTORCH_NLL_LOSS:
      return b_nll_loss (dx, s, out, error);
    case CS_OP_LTORCH_LOG_SOFTMAX_BACKWARD:
      return b_log_softmax_backward (dx, s, out, error);
    case CS_OP_LTORCH_SCALED_DOT_PRODUCT_ATTENTION:
      return b_sdpa (dx, s, out, error);
    case CS_OP_LTORCH_TAKE_ALONG_DIM:
      return b_take_along_dim (dx, s, out, error);
    case CS_OP_LTORCH_ARANGE:
      return b_arange (dx, s, out, error);
    case CS_OP_LTORCH_CONTIGUOUS:
      {
        /* default contiguous_format: clang.stride_order(a) with the row-major order */
        CsValue *mf = cs_stmt_arg (s, CS_ARG_MEMORY_FORMAT);
        CsProxy *ta = tensor_of (a);
        int64_t order[CS_MAX_DIMS];
        Args al = { 0 };

        if (!ta)
          return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS, "needs a typed tensor");
        if (!is_none (mf) && mf->kind == CS_VALUE_NAME && strstr (mf->u.s, "preserve_format"))
          return a;
        if (!is_none (mf) && !(mf->kind == CS_VALUE_NAME && strstr (mf->u.s, "contiguous_format")))
          return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_UNSUPPORTED, "only the contiguous and preserve memory formats are decomposed");
        for (guint i = 0; i < ta->rank; i++)
          order[i] = ta->rank - 1 - i;
        ap (&al, a);
        ap (&al, vints (dx, CS_VALUE_TUPLE, order, ta->rank));
        return emit (dx, out, CS_OP_PRIM_STRIDE_ORDER, &al, error);
      }
    case CS_OP_LTORCH_CLONE:
      {
        Args al = { 0 };

        if (!tensor_of (a))
          return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS, "needs a typed tensor");
        ap (&al, a);
        return emit (dx, out, CS_OP_PRIM_CLONE, &al, error);
      }
    case CS_OP_LTORCH_FLOAT:
    case CS_OP_LTORCH_HALF:
    case CS_OP_LTORCH_BFLOAT16:
      /* registered methods (to_float ...): clang.maybe_convert_to_dtype inlined */
      if (!tensor_of (a))
        return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS, "needs a typed tensor");
      return convert_to (dx, out, a, op->id == CS_OP_LTORCH_FLOAT ? CS_DTYPE_F32
                                     : op->id == CS_OP_LTORCH_HALF ? CS_DTYPE_F16 : CS_DTYPE_BF16, error);
    case CS_OP_LTORCH_TYPE_AS:
      {
        /* to(a, b.true_dtype, device=b.device) */
        CsProxy *tb = tensor_of (cs_stmt_arg (s, CS_ARG_B));
        Args al = { 0 };

        if (!tensor_of (a) || !tb)
          return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS, "needs two typed tensors");
        ap (&al, a);
        ap (&al, vdtype (dx, tb->dtype, tb->rank == 0));
        ap (&al, vnone (dx));
        ak (&al, "device", vdevice (dx, &tb->device));
        ak (&al, "dtype", vnone (dx));
        ak (&al, "copy", vbool (dx, FALSE));
        ak (&al, "memory_format", vnone (dx));
        return call_ltorch (dx, out, "ltorch.to", &al, error);
      }
    case CS_OP_LTORCH_FLATTEN:
      {
        /* clang.flatten: 0-d -> unsqueeze; nothing to flatten -> a; else clang.reshape */
        CsProxy *ta = tensor_of (a);
        int64_t sd = 0, ed = -1, shape[CS_MAX_DIMS];
        guint cs, ce, r = 0;
        CsValue *sdv = cs_stmt_arg (s, CS_ARG_START_DIM), *edv = cs_stmt_arg (s, CS_ARG_END_DIM);

        if (!ta || (sdv && !int_of (sdv, &sd)) || (edv && !int_of (edv, &ed))
            || !cs_meta_canonicalize_dim (ta->rank, sd, &cs) || !cs_meta_canonicalize_dim (ta->rank, ed, &ce)
            || ce < cs)
          return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS, "needs a tensor and start_dim <= end_dim");
        if (ta->rank == 0)
          return clang_unsqueeze (dx, s, out, a, 0, error);
        if (ce == cs)
          return a;
        for (guint i = 0; i < cs; i++)
          shape[r++] = ta->shape[i];
        shape[r++] = cs_shape_numel (ta->shape + cs, ce - cs + 1);
        for (guint i = ce + 1; i < ta->rank; i++)
          shape[r++] = ta->shape[i];
        return clang_reshape (dx, s, out, a, shape, r, error);
      }
    case CS_OP_LTORCH_MASKED_FILL:
      {
        /* where(mask, value, a), a number value taking a's Python type when promotion would
         * otherwise pick the value's type */
        CsValue *mask = cs_stmt_arg (s, CS_ARG_MASK), *val = cs_stmt_arg (s, CS_ARG_VALUE);
        CsProxy *ta = tensor_of (a);
        CsPyType pt;
        double v;
        Args al = { 0 };

        if (!ta || !tensor_of (mask) || !val)
          return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS, "needs a tensor, a mask and a value");
        if (number_of (val, &pt, &v))
          {
            CsDtypeRef refs[2] = { cs_promote_arg_tensor (ta->dtype, ta->rank), cs_promote_arg_number (pt) };
            CsDtypeRef p;

            if (cs_promote_dtypes (refs, 2, &p, NULL) && p.pytype == refs[1].pytype && p.dtype == refs[1].dtype)
              val = cs_dtype_is_float (ta->dtype) ? vfloat (dx, v)
                    : ta->dtype == CS_DTYPE_B8 ? vbool (dx, v != 0) : vint (dx, (int64_t) v);
          }
        ap (&al, mask);
        ap (&al, val);
        ap (&al, a);
        return call_ltorch (dx, out, "ltorch.where", &al, error);
      }
    case CS_OP_LTORCH_FULL:
      {
        /* clang.full: prims.full(tuple(shape), fill_value, device=, dtype=) */
        CsMetaType mt[1];
        guint nm;
        Args al = { 0 };

        if (!cs_meta_compute (dx->trace, s, mt, 1, &nm, error))
          return NULL;
        ap (&al, vints (dx, CS_VALUE_TUPLE, mt[0].shape, mt[0].rank));
        ap (&al, cs_stmt_arg (s, CS_ARG_FILL_VALUE));
        ak (&al, "device", vdevice (dx, &mt[0].device));
        ak (&al, "dtype", vdtype (dx, mt[0].dtype, FALSE));
        return emit (dx, out, CS_OP_PRIM_FULL, &al, error);
      }
    case CS_OP_LTORCH_ZEROS:
    case CS_OP_LTORCH_ONES:
      {
        /* full(shape, 0 or 1, device=device, dtype=default dtype) */
        CsMetaType mt[1];
        guint nm;
        CsValue *dv = cs_stmt_arg (s, CS_ARG_DEVICE);
        Args al = { 0 };

        if (!cs_meta_compute (dx->trace, s, mt, 1, &nm, error))
          return NULL;
        ap (&al, vints (dx, CS_VALUE_TUPLE, mt[0].shape, mt[0].rank));
        ap (&al, vint (dx, op->id == CS_OP_LTORCH_ONES ? 1 : 0));
        ak (&al, "device", dv ? dv : vnone (dx));
        ak (&al, "dtype", vdtype (dx, mt[0].dtype, FALSE));
        return call_ltorch (dx, out, "ltorch.full", &al, error);
      }
    case CS_OP_LTORCH_FULL_LIKE:
      {
        /* clang.full_like: prims.full(a.shape, fill, device=a.device, dtype=a.true_dtype) */
        CsMetaType mt[1];
        guint nm;
        CsProxy *ta = tensor_of (a);
        Args al = { 0 };

        if (!ta || !cs_meta_compute (dx->trace, s, mt, 1, &nm, error))
          return ta ? NULL : _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_ARGS, "needs a typed tensor");
        ap (&al, vints (dx, CS_VALUE_TUPLE, mt[0].shape, mt[0].rank));
        ap (&al, cs_stmt_arg (s, CS_ARG_FILL_VALUE));
        ak (&al, "device", vdevice (dx, &mt[0].device));
        ak (&al, "dtype", vdtype (dx, mt[0].dtype, ta->rank == 0 && is_none (cs_stmt_arg (s, CS_ARG_DTYPE))));
        return emit (dx, out, CS_OP_PRIM_FULL, &al, error);
      }
    case CS_OP_LTORCH_ZEROS_LIKE:
    case CS_OP_LTORCH_ONES_LIKE:
      {
        CsValue *dv = cs_stmt_arg (s, CS_ARG_DEVICE), *dt = cs_stmt_arg (s, CS_ARG_DTYPE);
        Args al = { 0 };

        ap (&al, a);
        ap (&al, vint (dx, op->id == CS_OP_LTORCH_ONES_LIKE ? 1 : 0));
        ak (&al, "device", dv ? dv : vnone (dx));
        ak (&al, "dtype", dt ? dt : vnone (dx));
        return call_ltorch (dx, out, "ltorch.full_like", &al, error);
      }
    case CS_OP_PRIM_MATMUL:
    case CS_OP_PRIM_LINEAR:
      if (dx->policy.matmul == CS_MATMUL_UPCAST_F32)
        {
          CsValue *ops[3] = { sarg (s, 0, NULL), sarg (s, 1, NULL), sarg (s, 2, NULL) };
          guint n = op->id == CS_OP_PRIM_LINEAR ? 3 : 2;
          CsProxy *t0 = tensor_of (ops[0]);

          if (n == 3 && ops[2] == NULL)
            ops[2] = vnone (dx);
          if (t0 && (t0->dtype == CS_DTYPE_BF16 || t0->dtype == CS_DTYPE_F16))
            return emit_matmul_like (dx, out, op->id, ops, n, error);
        }
      return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_PRIM, "is a prim (nothing one level down)");
    default:
      break;
    }
  if (cs_op_has_tag (op, CS_OP_TAG_PRIM))
    return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_PRIM, "is a prim (nothing one level down)");
  return _cs_decompose_fail (s, error, CS_DECOMPOSE_ERROR_UNSUPPORTED, "castscope has no decomposition for this op");
}

gboolean
cs_decompose_supports (const CsStmt *stmt)
{
  const CsOp *op;

  g_return_val_if_fail (stmt != NULL, FALSE);
  if (stmt->kind != CS_STMT_CALL)
    return FALSE;
  op = semantic (stmt);
  if (op->lowers_to != CS_OP_OPAQUE || composite_builders[op->id] != NULL
      || cs_op_has_tag (op, CS_OP_TAG_ATEN))
    return TRUE;
  switch (op->id)
    {
    case CS_OP_LTORCH_ADD: case CS_OP_LTORCH_SUB: case CS_OP_LTORCH_DIV:
    case CS_OP_LTORCH_SIGMOID: case CS_OP_LTORCH_SILU: case CS_OP_LTORCH_RELU:
    case CS_OP_LTORCH_WHERE: case CS_OP_LTORCH_LINEAR:
    case CS_OP_LTORCH_MATMUL: case CS_OP_LTORCH_SUM: case CS_OP_LTORCH_MEAN:
    case CS_OP_LTORCH_AMAX: case CS_OP_LTORCH_AMIN: case CS_OP_LTORCH_VAR_MEAN:
    case CS_OP_LTORCH_TO: case CS_OP_LTORCH_RESHAPE: case CS_OP_LTORCH_VIEW:
    case CS_OP_LTORCH_TRANSPOSE: case CS_OP_LTORCH_PERMUTE: case CS_OP_LTORCH_EXPAND:
    case CS_OP_LTORCH_UNSQUEEZE: case CS_OP_LTORCH_SQUEEZE: case CS_OP_LTORCH_GETITEM:
    case CS_OP_LTORCH_CAT: case CS_OP_LTORCH_SPLIT: case CS_OP_LTORCH_EMBEDDING:
    case CS_OP_LTORCH_DROPOUT: case CS_OP_LTORCH_CROSS_ENTROPY: case CS_OP_LTORCH_NLL_LOSS:
    case CS_OP_LTORCH_LOG_SOFTMAX_BACKWARD:
    case CS_OP_LTORCH_SCALED_DOT_PRODUCT_ATTENTION: case CS_OP_LTORCH_TAKE_ALONG_DIM:
    case CS_OP_LTORCH_ARANGE: case CS_OP_LTORCH_CONTIGUOUS: case CS_OP_LTORCH_CLONE:
    case CS_OP_LTORCH_FLOAT: case CS_OP_LTORCH_HALF: case CS_OP_LTORCH_BFLOAT16:
    case CS_OP_LTORCH_TYPE_AS: case CS_OP_LTORCH_FLATTEN: case CS_OP_LTORCH_MASKED_FILL:
    case CS_OP_LTORCH_MAXIMUM: case CS_OP_LTORCH_MINIMUM:
    case CS_OP_LTORCH_FULL: case CS_OP_LTORCH_ZEROS: case CS_OP_LTORCH_ONES:
    case CS_OP_LTORCH_FULL_LIKE: case CS_OP_LTORCH_ZEROS_LIKE: case CS_OP_LTORCH_ONES_LIKE:
      return TRUE;
    default:
      return FALSE;
    }
}

