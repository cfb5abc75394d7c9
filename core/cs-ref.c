/* cs-ref.c: the CPU reference executor (see cs-ref.h).
 *
 * Internally every tensor is a #Rv: its logical (trace) dtype, its shape and its elements as
 * doubles.  In exact mode the doubles always hold values representable in the logical dtype
 * (rounded at every prim output by round_values()); in f64 mode float values are never
 * rounded.  Prim semantics follow thunder/core/prims.py (meta functions) and PyTorch's
 * operators for the math.
 */
#include "cs-config.h"

#include "cs-ref.h"
#include "cs-dist.h"
#include "cs-half.h"
#include "cs-ops.h"
#include "cs-ops-args.h"
#include "cs-promote.h"

#include <math.h>
#include <string.h>

#if CS_HAVE_BLAS
#include <cblas.h>
#endif

G_DEFINE_QUARK (cs-ref-error-quark, cs_ref_error)

/* ------------------------------------------------------------------------------------------ */
/* Values                                                                                      */

typedef enum
{
  RV_TENSOR,
  RV_NUMBER,   /* a Python number (rank 0, one element); dtype B8 / I64 / F64 = bool/int/float */
  RV_SEQ,      /* tuple or list */
  RV_NONE,     /* None, strings, names: no numeric value */
} RvKind;

typedef struct _Rv Rv;
struct _Rv
{
  gint       ref;                 /* plain refcount (single thread) */
  RvKind     kind;                /* which fields below apply */
  CsDtype    dtype;               /* tensors: logical dtype; numbers: B8, I64 or F64 */
  guint      rank;                /* tensors: dims */
  int64_t    shape[CS_MAX_DIMS];  /* tensors: extents, outermost first */
  int64_t    numel;               /* tensors: elements; numbers: 1 */
  double    *data;                /* numel values */
  GPtrArray *items;               /* SEQ: Rv* (owned) */
};

static void rv_unref (Rv *v);

/* Host memory of the run on this thread, bytes: tensor values (8 bytes an element), kernel
 * scratch and the returned #CsTensors; cs_ref_run_env_full() resets both at its start and
 * reports the peak (CsRefRunOptions.peak_bytes).  A run stays on its calling thread. */
static _Thread_local gint64 mem_live, mem_peak;

static void
mem_take (gint64 bytes)
{
  mem_live += bytes;
  if (mem_live > mem_peak)
    mem_peak = mem_live;
}

static void
mem_give (gint64 bytes)
{
  mem_live -= bytes;
}

/* Bytes a tensor value of @numel elements holds (as rv_new_tensor allocates them). */
static gint64
rv_bytes (int64_t numel)
{
  return (gint64) MAX (numel, 1) * (gint64) sizeof (double);
}

static Rv *
rv_ref (Rv *v)
{
  v->ref++;
  return v;
}

static void
rv_unref (Rv *v)
{
  if (v == NULL || --v->ref > 0)
    return;
  if (v->kind == RV_TENSOR && v->data)
    mem_give (rv_bytes (v->numel));
  g_free (v->data);
  if (v->items)
    g_ptr_array_unref (v->items);
  g_free (v);
}

G_DEFINE_AUTOPTR_CLEANUP_FUNC (Rv, rv_unref)

static Rv *
rv_new_kind (RvKind kind)
{
  Rv *v = g_new0 (Rv, 1);
  v->ref = 1;
  v->kind = kind;
  for (guint i = 0; i < CS_MAX_DIMS; i++)
    v->shape[i] = 1;
  return v;
}

static Rv *
rv_new_number (CsDtype dtype, double x)
{
  Rv *v = rv_new_kind (RV_NUMBER);
  v->dtype = dtype;
  v->numel = 1;
  v->data = g_new (double, 1);
  v->data[0] = x;
  return v;
}

static Rv *
rv_new_seq (void)
{
  Rv *v = rv_new_kind (RV_SEQ);
  v->items = g_ptr_array_new_with_free_func ((GDestroyNotify) rv_unref);
  return v;
}

/* ------------------------------------------------------------------------------------------ */
/* Execution context and errors                                                                */

typedef struct
{
  const CsTrace *trace;     /* the trace run */
  GHashTable    *env;       /* name -> Rv* (owned) */
  CsRefMode      mode;      /* EXACT (trace dtypes) or F64 */
  guint64        seed;      /* random statement k uses seed + k */
  guint          n_random;  /* random statements run so far */
  GError       **error;     /* the run's error */
  const CsStmt  *top;       /* top-level statement being run (for line numbers) */
  const gint    *cancel;    /* (nullable) nonzero: stop (CsRefRunOptions.cancel) */
} Ctx;

static guint
stmt_line (Ctx *c, const CsStmt *s)
{
  if (s && s->line)
    return s->line;
  return c->top ? c->top->line : 0;
}

static gboolean fail (Ctx *c, const CsStmt *s, CsRefError code, const char *fmt, ...)
  G_GNUC_PRINTF (4, 5);

/* "file:line: callee: message" */
static gboolean
fail (Ctx *c, const CsStmt *s, CsRefError code, const char *fmt, ...)
{
  g_autofree char *msg = NULL;
  g_autofree char *where = NULL;
  va_list ap;
  guint line = stmt_line (c, s);

  if (c->error && *c->error)
    return FALSE;   /* the first failure of a statement is the one reported */
  va_start (ap, fmt);
  msg = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  if (c->trace->file && line)
    where = g_strdup_printf ("%s:%u: ", c->trace->file, line);
  else if (line)
    where = g_strdup_printf ("line %u: ", line);
  else
    where = g_strdup_printf ("%s: ", c->trace->name ? c->trace->name : "trace");
  if (s && s->kind == CS_STMT_CALL)
    g_set_error (c->error, CS_REF_ERROR, code, "%s%s: %s", where, s->callee, msg);
  else
    g_set_error (c->error, CS_REF_ERROR, code, "%s%s", where, msg);
  return FALSE;
}

static char *
shape_str (const int64_t *shape, guint rank)
{
  GString *s = g_string_new ("[");
  for (guint i = 0; i < rank; i++)
    g_string_append_printf (s, "%s%" G_GINT64_FORMAT, i ? ", " : "", shape[i]);
  g_string_append_c (s, ']');
  return g_string_free (s, FALSE);
}

/* ------------------------------------------------------------------------------------------ */
/* Rounding to a dtype                                                                         */

static gboolean
is_float (CsDtype d)
{
  return cs_dtype_kind (d) == CS_DTYPE_KIND_FLOAT;
}

static gboolean
is_int (CsDtype d)
{
  return cs_dtype_kind (d) == CS_DTYPE_KIND_INT;
}

static double
wrap_int (double v, CsDtype d)
{
  gint64 i;

  if (isnan (v) || isinf (v))
    return 0.0;
  v = trunc (v);
  if (d == CS_DTYPE_I64 || d == CS_DTYPE_U64)
    return v;
  i = (gint64) fmod (v, 18446744073709551616.0);
  switch (d)
    {
    case CS_DTYPE_U8: return (guint8) i;
    case CS_DTYPE_I8: return (gint8) i;
    case CS_DTYPE_I16: return (gint16) i;
    case CS_DTYPE_I32: return (gint32) i;
    default: return v;
    }
}

/* Rounds @n values to @dtype as storing them in a tensor of that dtype would.  In f64 mode
 * float dtypes are left alone. */
static void
round_values (double *v, int64_t n, CsDtype dtype, CsRefMode mode)
{
  if (dtype == CS_DTYPE_B8)
    {
      for (int64_t i = 0; i < n; i++)
        v[i] = v[i] != 0.0 ? 1.0 : 0.0;
      return;
    }
  if (is_int (dtype))
    {
      for (int64_t i = 0; i < n; i++)
        v[i] = wrap_int (v[i], dtype);
      return;
    }
  if (mode == CS_REF_F64 || dtype == CS_DTYPE_F64)
    return;
  switch (dtype)
    {
    case CS_DTYPE_F32:
      for (int64_t i = 0; i < n; i++)
        v[i] = (float) v[i];
      break;
    case CS_DTYPE_BF16:
      for (int64_t i = 0; i < n; i++)
        {
          float f = (float) v[i];
          v[i] = (double) f == v[i] ? cs_half_round_bf16 (f)
                                    : cs_half_bf16_to_f32 (cs_half_bf16_from_f64 (v[i]));
        }
      break;
    case CS_DTYPE_F16:
      for (int64_t i = 0; i < n; i++)
        {
          float f = (float) v[i];
          v[i] = (double) f == v[i] ? cs_half_round_f16 (f)
                                    : cs_half_f16_to_f32 (cs_half_f16_from_f64 (v[i]));
        }
      break;
    default:
      if (cs_half_fp8_supported (dtype))
        for (int64_t i = 0; i < n; i++)
          v[i] = cs_half_fp8_to_f64 (dtype, cs_half_fp8_from_f64 (dtype, v[i]));
      break;
    }
}

/* A new tensor value with uninitialised data. */
static Rv *
rv_new_tensor (Ctx *c, const CsStmt *s, CsDtype dtype, const int64_t *shape, guint rank)
{
  Rv *v;
  int64_t numel = 1;

  for (guint i = 0; i < rank; i++)
    {
      if (shape[i] < 0)
        {
          fail (c, s, CS_REF_ERROR_SHAPE, "negative extent %" G_GINT64_FORMAT " in the output "
                "shape", shape[i]);
          return NULL;
        }
      if (shape[i] && numel > ((int64_t) 1 << 36) / shape[i])
        {
          fail (c, s, CS_REF_ERROR_SHAPE, "output of more than 2^36 elements is over the CPU "
                "reference's limit");
          return NULL;
        }
      numel *= shape[i];
    }
  v = rv_new_kind (RV_TENSOR);
  v->dtype = dtype;
  v->rank = rank;
  memcpy (v->shape, shape, rank * sizeof (int64_t));
  v->numel = numel;
  v->data = g_try_new (double, MAX (numel, 1));
  if (v->data == NULL)
    {
      rv_unref (v);
      fail (c, s, CS_REF_ERROR_SHAPE, "out of host memory for %" G_GINT64_FORMAT " elements",
            numel);
      return NULL;
    }
  mem_take (rv_bytes (numel));
  return v;
}

/* ------------------------------------------------------------------------------------------ */
/* Conversions between #CsTensor and #Rv                                                      */

static Rv *
rv_from_tensor (const CsTensor *t, gboolean as_number)
{
  Rv *v;

  if (as_number && t->numel == 1)
    {
      CsDtype d = t->dtype == CS_DTYPE_B8 ? CS_DTYPE_B8 : is_int (t->dtype) ? CS_DTYPE_I64
                                                                            : CS_DTYPE_F64;
      return rv_new_number (d, cs_tensor_get_f64 (t, 0));
    }
  v = rv_new_kind (RV_TENSOR);
  v->dtype = t->dtype;
  v->rank = t->rank;
  memcpy (v->shape, t->shape, sizeof v->shape);
  v->numel = t->numel;
  v->data = cs_tensor_dup_f64 (t);
  mem_take (rv_bytes (v->numel));
  return v;
}

static CsTensor *
rv_to_tensor (const Rv *v, CsRefMode mode)
{
  CsDtype d;

  if (v->kind == RV_NUMBER)
    return cs_tensor_new_from_f64 (v->dtype, NULL, 0, v->data, NULL);
  d = v->dtype;
  if (mode == CS_REF_F64 && is_float (d))
    d = CS_DTYPE_F64;
  if (!cs_tensor_supports_dtype (d))
    d = CS_DTYPE_F64;
  return cs_tensor_new_from_f64 (d, v->shape, v->rank, v->data, NULL);
}

/* ------------------------------------------------------------------------------------------ */
/* Arguments                                                                                   */

static Rv *eval_value (Ctx *c, const CsStmt *s, const CsValue *val);

static gboolean
dtype_from_value (const CsValue *val, CsDtype *out)
{
  if (val == NULL)
    return FALSE;
  if (val->kind == CS_VALUE_DTYPE)
    {
      *out = val->u.dtype.pytype ? cs_pytype_dtype ((CsPyType) val->u.dtype.pytype)
                                 : val->u.dtype.dtype;
      if (val->u.dtype.pytype == CS_PYTYPE_FLOAT)
        *out = CS_DTYPE_F32;
      return TRUE;
    }
  if (val->kind == CS_VALUE_NAME && val->u.s)
    {
      const char *n = val->u.s;
      gboolean weak;

      if (g_str_has_prefix (n, "torch."))
        n += 6;
      else if (g_str_has_prefix (n, "dtypes."))
        n += 7;
      if (strcmp (n, "float") == 0)
        {
          *out = CS_DTYPE_F32;
          return TRUE;
        }
      if (strcmp (n, "int") == 0)
        {
          *out = CS_DTYPE_I64;
          return TRUE;
        }
      if (strcmp (n, "bool") == 0)
        {
          *out = CS_DTYPE_B8;
          return TRUE;
        }
      if (strcmp (n, "half") == 0)
        {
          *out = CS_DTYPE_F16;
          return TRUE;
        }
      if (strcmp (n, "long") == 0)
        {
          *out = CS_DTYPE_I64;
          return TRUE;
        }
      return cs_dtype_from_long (n, strlen (n), out, &weak)
             || cs_dtype_from_short (n, strlen (n), out);
    }
  return FALSE;
}

static gboolean
number_of (Ctx *c, const CsStmt *s, const CsValue *val, double *out)
{
  g_autoptr (Rv) v = NULL;

  if (val == NULL)
    return FALSE;
  v = eval_value (c, s, val);
  if (v == NULL)
    return FALSE;
  if (v->kind == RV_NUMBER || (v->kind == RV_TENSOR && v->numel == 1 && v->rank == 0))
    {
      *out = v->data[0];
      return TRUE;
    }
  return FALSE;
}

/* An int or a sequence of ints (number proxies resolved through the environment). */
static gboolean
int_seq_of (Ctx *c, const CsStmt *s, const CsValue *val, int64_t *out, guint max, guint *n)
{
  g_autoptr (Rv) v = NULL;

  if (val == NULL)
    return FALSE;
  v = eval_value (c, s, val);
  if (v == NULL)
    return FALSE;
  if (v->kind == RV_NUMBER && v->dtype != CS_DTYPE_F64)
    {
      if (max < 1)
        return FALSE;
      out[0] = (int64_t) v->data[0];
      *n = 1;
      return TRUE;
    }
  if (v->kind != RV_SEQ || v->items->len > max)
    return FALSE;
  for (guint i = 0; i < v->items->len; i++)
    {
      Rv *it = g_ptr_array_index (v->items, i);
      if (it->kind != RV_NUMBER || it->dtype == CS_DTYPE_F64)
        return FALSE;
      out[i] = (int64_t) it->data[0];
    }
  *n = v->items->len;
  return TRUE;
}

static Rv *
lookup (Ctx *c, const CsStmt *s, const char *name)
{
  Rv *v = g_hash_table_lookup (c->env, name);

  if (v == NULL)
    {
      fail (c, s, CS_REF_ERROR_UNBOUND, "'%s' has no value here (not an input and not produced "
            "by an earlier statement)", name);
      return NULL;
    }
  return rv_ref (v);
}

/* Evaluates an argument value to a new reference. */
static Rv *
eval_value (Ctx *c, const CsStmt *s, const CsValue *val)
{
  switch (val->kind)
    {
    case CS_VALUE_NONE:
      return rv_new_kind (RV_NONE);
    case CS_VALUE_BOOL:
      return rv_new_number (CS_DTYPE_B8, val->u.b ? 1.0 : 0.0);
    case CS_VALUE_INT:
      return rv_new_number (CS_DTYPE_I64, (double) val->u.i);
    case CS_VALUE_FLOAT:
      return rv_new_number (CS_DTYPE_F64, val->u.f);
    case CS_VALUE_PROXY:
      {
        const CsProxy *p = val->u.proxy;
        Rv *v = g_hash_table_lookup (c->env, p->name);

        if (v)
          return rv_ref (v);
        /* A number proxy with a known value that no statement binds (shape values). */
        if (p->kind == CS_PROXY_NUMBER && p->has_value && p->value)
          return eval_value (c, s, p->value);
        return lookup (c, s, p->name);
      }
    case CS_VALUE_TUPLE:
    case CS_VALUE_LIST:
      {
        Rv *seq = rv_new_seq ();

        for (guint i = 0; i < val->u.seq.n; i++)
          {
            Rv *it = eval_value (c, s, val->u.seq.items[i]);
            if (it == NULL)
              {
                rv_unref (seq);
                return NULL;
              }
            g_ptr_array_add (seq->items, it);
          }
        return seq;
      }
    default:
      /* strings, names, dtypes, devices, slices: no numeric value */
      return rv_new_kind (RV_NONE);
    }
}

/* The tensor or number @val, argument @i (keyword @kw, or none) of @s, evaluated; fails naming
 * it when it is missing or unbound. */
static Rv *
eval_tensor_arg (Ctx *c, const CsStmt *s, const CsValue *val, guint i, const char *kw)
{
  Rv *v;

  if (val == NULL)
    {
      fail (c, s, CS_REF_ERROR_INPUT, "missing argument %u%s%s", i, kw ? " / " : "",
            kw ? kw : "");
      return NULL;
    }
  if (val->kind == CS_VALUE_NAME && val->u.s && strchr (val->u.s, '.') == NULL)
    {
      fail (c, s, CS_REF_ERROR_UNBOUND, "'%s' has no value here (not an input and not produced "
            "by an earlier statement)", val->u.s);
      return NULL;
    }
  v = eval_value (c, s, val);
  if (v && v->kind != RV_TENSOR && v->kind != RV_NUMBER)
    {
      fail (c, s, CS_REF_ERROR_INPUT, "argument %u is not a tensor or a number", i);
      rv_unref (v);
      return NULL;
    }
  return v;
}

/* Positional argument @i of @s (an elementwise operand, a collective's input), evaluated. */
static Rv *
arg_tensor_at (Ctx *c, const CsStmt *s, guint i)
{
  return eval_tensor_arg (c, s, cs_stmt_get_arg (s, i, NULL), i, NULL);
}

/* Argument @name of @s's schema (cs-ops-list.h), a tensor or a number, evaluated. */
static Rv *
arg_tensor (Ctx *c, const CsStmt *s, CsArgName name)
{
  guint pos = 0;

  cs_op_find_arg (cs_op_semantic (s->op), name, &pos);
  return eval_tensor_arg (c, s, cs_stmt_arg (s, name), pos, cs_arg_name (name));
}

/* Canonical dim in [0, rank) (rank 0 accepts -1 and 0 as 0). */
static gboolean
canon_dim (Ctx *c, const CsStmt *s, int64_t d, guint rank, guint *out)
{
  int64_t r = rank == 0 ? 1 : rank;

  if (d < 0)
    d += r;
  if (d < 0 || d >= r)
    return fail (c, s, CS_REF_ERROR_SHAPE, "dimension out of range for rank %u", rank);
  *out = (guint) d;
  return TRUE;
}

/* ------------------------------------------------------------------------------------------ */
/* Elementwise prims                                                                           */

static CsDtypeRef
promo_arg (const Rv *v)
{
  if (v->kind == RV_NUMBER)
    return cs_promote_arg_number (v->dtype == CS_DTYPE_B8 ? CS_PYTYPE_BOOL
                                  : v->dtype == CS_DTYPE_I64 ? CS_PYTYPE_INT : CS_PYTYPE_FLOAT);
  return cs_promote_arg_tensor (v->dtype, v->rank);
}

/* Float math runs in f32 in exact mode for every float dtype narrower than f64. */
static gboolean
use_f32 (Ctx *c, CsDtype cdtype)
{
  return c->mode == CS_REF_EXACT && is_float (cdtype) && cdtype != CS_DTYPE_F64;
}

#define AT(v, i) ((v)->numel == 1 && (v)->rank == 0 ? (v)->data[0] : (v)->data[i])

/* Checks that every tensor argument has the same shape (0-d tensors and numbers act as
 * scalars; prims never broadcast) and returns the template argument for the output shape. */
static const Rv *
ew_shape (Ctx *c, const CsStmt *s, Rv **args, guint n)
{
  const Rv *tpl = NULL;

  for (guint i = 0; i < n; i++)
    {
      const Rv *a = args[i];

      if (a->kind != RV_TENSOR || a->rank == 0)
        continue;
      if (tpl == NULL)
        tpl = a;
      else if (a->rank != tpl->rank
               || memcmp (a->shape, tpl->shape, a->rank * sizeof (int64_t)) != 0)
        {
          g_autofree char *s1 = shape_str (tpl->shape, tpl->rank);
          g_autofree char *s2 = shape_str (a->shape, a->rank);
          fail (c, s, CS_REF_ERROR_SHAPE, "operand shapes %s and %s differ (prims do not "
                "broadcast; the trace must broadcast_in_dim first)", s1, s2);
          return NULL;
        }
    }
  if (tpl == NULL)
    for (guint i = 0; i < n; i++)
      if (args[i]->kind == RV_TENSOR)
        return args[i];
  return tpl ? tpl : args[0];
}

/* The elementwise prim @op (its registry formula: CsEwUnary, CsEwBinary or CsEwTernary) on
 * the statement's operands: type promotion over the operands (without a predicate), float
 * math in f64, or in f32 in exact mode for dtypes narrower than f64, integer math by the
 * formula's integer function; the result rounded to its dtype. */
static Rv *
run_elementwise (Ctx *c, const CsStmt *s, const CsOp *op)
{
  const CsEwUnary *f1 = op->ew1;
  const CsEwBinary *f2 = op->ew2;
  const CsEwTernary *f3 = op->ew3;
  guint n = f3 ? 3 : f2 ? 2 : 1;
  guint flags = f3 ? f3->flags : f2 ? f2->flags : f1 ? f1->flags : 0;
  guint first = (flags & CS_EW_PREDICATE) ? 1 : 0;   /* the first promoted operand */
  Rv *args[3] = { NULL, NULL, NULL };
  Rv *out = NULL;
  const Rv *tpl;
  CsDtypeRef refs[3], p;
  CsDtype cdtype, odtype;
  gboolean any_tensor = FALSE, f32, int_math;
  g_autoptr (GError) perr = NULL;

  g_assert (op->exec & CS_OP_EXEC_CPU);   /* exec_call runs the others' decompositions */
  for (guint i = 0; i < n; i++)
    {
      args[i] = arg_tensor_at (c, s, i);
      if (args[i] == NULL)
        goto out;
      any_tensor |= args[i]->kind == RV_TENSOR;
    }
  tpl = ew_shape (c, s, args, n);
  if (tpl == NULL)
    goto out;

  for (guint i = first; i < n; i++)
    refs[i - first] = promo_arg (args[i]);
  if (!cs_promote_dtypes (refs, n - first, &p, &perr))
    {
      fail (c, s, CS_REF_ERROR_DTYPE, "%s", perr->message);
      goto out;
    }
  cdtype = p.dtype;
  if (p.pytype == CS_PYTYPE_FLOAT && !any_tensor)
    cdtype = CS_DTYPE_F64;            /* Python float arithmetic is double */
  if (cs_dtype_kind (cdtype) == CS_DTYPE_KIND_COMPLEX || !cs_tensor_supports_dtype (cdtype))
    {
      fail (c, s, CS_REF_ERROR_DTYPE, "no CPU reference for %s values",
            cs_dtype_short_name (cdtype));
      goto out;
    }
  int_math = !is_float (cdtype);
  if (int_math && (flags & CS_EW_FLOAT_ONLY))
    {
      fail (c, s, CS_REF_ERROR_DTYPE, "takes float tensors, got %s (the trace should convert "
            "first)", cs_dtype_short_name (cdtype));
      goto out;
    }
  if (!int_math && (flags & CS_EW_INT_ONLY))
    {
      fail (c, s, CS_REF_ERROR_DTYPE, "takes integer or bool tensors, got %s",
            cs_dtype_short_name (cdtype));
      goto out;
    }

  odtype = op->promo == CS_PROMO_ALWAYS_BOOL ? CS_DTYPE_B8 : cdtype;

  if (any_tensor)
    out = rv_new_tensor (c, s, odtype, tpl->shape, tpl->kind == RV_TENSOR ? tpl->rank : 0);
  else
    out = rv_new_number (odtype == CS_DTYPE_B8 ? CS_DTYPE_B8 : int_math ? CS_DTYPE_I64
                                                                       : CS_DTYPE_F64, 0);
  if (out == NULL)
    goto out;

  f32 = use_f32 (c, cdtype);
  if (n == 1)
    {
      const Rv *a = args[0];
      float (*ff) (float) = f1->f32;
      double (*fd) (double) = f1->f64;

      if (op->id == CS_OP_PRIM_BITWISE_NOT && cdtype == CS_DTYPE_B8)
        for (int64_t i = 0; i < out->numel; i++)
          out->data[i] = AT (a, i) == 0;   /* ~ on bools is logical not (torch.bitwise_not) */
      else if (f32)
        for (int64_t i = 0; i < out->numel; i++)
          out->data[i] = ff ((float) AT (a, i));
      else
        for (int64_t i = 0; i < out->numel; i++)
          out->data[i] = fd (AT (a, i));
    }
  else if (n == 2)
    {
      const Rv *a = args[0], *b = args[1];

      if (int_math && f2->i64 != NULL)
        {
          for (int64_t i = 0; i < out->numel; i++)
            if (!f2->i64 (AT (a, i), AT (b, i), &out->data[i]))
              {
                fail (c, s, CS_REF_ERROR_VALUE, "integer division by zero at element %"
                      G_GINT64_FORMAT, i);
                g_clear_pointer (&out, rv_unref);
                goto out;
              }
        }
      else if (f32)
        for (int64_t i = 0; i < out->numel; i++)
          out->data[i] = f2->f32 ((float) AT (a, i), (float) AT (b, i));
      else
        for (int64_t i = 0; i < out->numel; i++)
          out->data[i] = f2->f64 (AT (a, i), AT (b, i));
    }
  else
    {
      const Rv *a = args[0], *b = args[1], *w = args[2];

      if (f32 && f3->f32 != NULL)
        for (int64_t i = 0; i < out->numel; i++)
          out->data[i] = f3->f32 ((float) AT (a, i), (float) AT (b, i), (float) AT (w, i));
      else
        for (int64_t i = 0; i < out->numel; i++)
          out->data[i] = f3->f64 (AT (a, i), AT (b, i), AT (w, i));
    }
  round_values (out->data, out->numel, out->dtype, c->mode);

out:
  for (guint i = 0; i < n; i++)
    rv_unref (args[i]);
  return out;
}

/* ------------------------------------------------------------------------------------------ */
/* Shape prims                                                                                 */

static void
contiguous_strides (const int64_t *shape, guint rank, int64_t *strides)
{
  int64_t st = 1;

  for (guint i = rank; i-- > 0;)
    {
      strides[i] = st;
      st *= shape[i];
    }
}

/* Decomposes flat index @o of @shape into @idx. */
static void
unflatten (int64_t o, const int64_t *shape, guint rank, int64_t *idx)
{
  for (guint i = rank; i-- > 0;)
    {
      idx[i] = shape[i] ? o % shape[i] : 0;
      o = shape[i] ? o / shape[i] : 0;
    }
}

/* Argument @name of @s's schema, which must be a tensor (the first argument of most prims). */
static Rv *
tensor_arg (Ctx *c, const CsStmt *s, CsArgName name)
{
  Rv *a = arg_tensor (c, s, name);

  if (a && a->kind != RV_TENSOR)
    {
      fail (c, s, CS_REF_ERROR_INPUT, "the first argument must be a tensor");
      rv_unref (a);
      return NULL;
    }
  return a;
}

static Rv *
run_broadcast_in_dim (Ctx *c, const CsStmt *s)
{
  g_autoptr (Rv) a = tensor_arg (c, s, CS_ARG_A);
  int64_t shape[CS_MAX_DIMS], bd[CS_MAX_DIMS], astr[CS_MAX_DIMS], idx[CS_MAX_DIMS];
  guint rank, nbd;
  Rv *out;

  if (a == NULL)
    return NULL;
  if (!int_seq_of (c, s, cs_stmt_arg (s, CS_ARG_SHAPE), shape, CS_MAX_DIMS, &rank)
      || !int_seq_of (c, s, cs_stmt_arg (s, CS_ARG_BROADCAST_DIMENSIONS), bd, CS_MAX_DIMS, &nbd))
    {
      if (c->error && *c->error)
        return NULL;
      fail (c, s, CS_REF_ERROR_INPUT, "expects (a, shape, broadcast_dimensions) int sequences");
      return NULL;
    }
  if (nbd != a->rank)
    {
      fail (c, s, CS_REF_ERROR_SHAPE, "broadcast_dimensions has %u entries for a rank-%u tensor",
            nbd, a->rank);
      return NULL;
    }
  for (guint k = 0; k < nbd; k++)
    if (bd[k] < 0 || bd[k] >= rank || (a->shape[k] != 1 && a->shape[k] != shape[bd[k]])
        || (k > 0 && bd[k] <= bd[k - 1]))
      {
        g_autofree char *sa = shape_str (a->shape, a->rank);
        g_autofree char *so = shape_str (shape, rank);
        fail (c, s, CS_REF_ERROR_SHAPE, "cannot broadcast %s to %s with dimension %u -> %"
              G_GINT64_FORMAT, sa, so, k, bd[k]);
        return NULL;
      }
  out = rv_new_tensor (c, s, a->dtype, shape, rank);
  if (out == NULL)
    return NULL;
  contiguous_strides (a->shape, a->rank, astr);
  for (int64_t o = 0; o < out->numel; o++)
    {
      int64_t off = 0;
      unflatten (o, shape, rank, idx);
      for (guint k = 0; k < nbd; k++)
        if (a->shape[k] != 1)
          off += idx[bd[k]] * astr[k];
      out->data[o] = a->data[off];
    }
  return out;
}

static Rv *
rv_reshaped (Ctx *c, const CsStmt *s, const Rv *a, const int64_t *shape_in, guint rank)
{
  int64_t shape[CS_MAX_DIMS], known = 1;
  int neg = -1;
  Rv *out;

  for (guint i = 0; i < rank; i++)
    {
      shape[i] = shape_in[i];
      if (shape[i] == -1 && neg < 0)
        neg = (int) i;
      else
        known *= shape[i];
    }
  if (neg >= 0)
    shape[neg] = known ? a->numel / known : 0;
  if (cs_shape_numel (shape, rank) != a->numel)
    {
      g_autofree char *sa = shape_str (a->shape, a->rank);
      g_autofree char *so = shape_str (shape_in, rank);
      fail (c, s, CS_REF_ERROR_SHAPE, "cannot reshape %s (%" G_GINT64_FORMAT " elements) to %s",
            sa, a->numel, so);
      return NULL;
    }
  out = rv_new_tensor (c, s, a->dtype, shape, rank);
  if (out)
    memcpy (out->data, a->data, (gsize) a->numel * sizeof (double));
  return out;
}

static Rv *
run_reshape (Ctx *c, const CsStmt *s)
{
  g_autoptr (Rv) a = tensor_arg (c, s, CS_ARG_A);
  int64_t shape[CS_MAX_DIMS];
  guint rank;

  if (a == NULL)
    return NULL;
  if (!int_seq_of (c, s, cs_stmt_arg (s, CS_ARG_SHAPE), shape, CS_MAX_DIMS, &rank))
    {
      fail (c, s, CS_REF_ERROR_INPUT, "expects (a, shape)");
      return NULL;
    }
  return rv_reshaped (c, s, a, shape, rank);
}

static Rv *
run_transpose (Ctx *c, const CsStmt *s)
{
  g_autoptr (Rv) a = tensor_arg (c, s, CS_ARG_A);
  int64_t perm[CS_MAX_DIMS], shape[CS_MAX_DIMS], astr[CS_MAX_DIMS], idx[CS_MAX_DIMS];
  guint n;
  guint seen = 0;
  Rv *out;

  if (a == NULL)
    return NULL;
  if (!int_seq_of (c, s, cs_stmt_arg (s, CS_ARG_PERMUTATION), perm, CS_MAX_DIMS, &n)
      || n != a->rank)
    {
      fail (c, s, CS_REF_ERROR_SHAPE, "expects a permutation of the %u dims", a->rank);
      return NULL;
    }
  for (guint i = 0; i < n; i++)
    {
      if (perm[i] < 0 || perm[i] >= n || (seen & (1u << perm[i])))
        {
          fail (c, s, CS_REF_ERROR_SHAPE, "not a permutation of the %u dims", a->rank);
          return NULL;
        }
      seen |= 1u << perm[i];
      shape[i] = a->shape[perm[i]];
    }
  out = rv_new_tensor (c, s, a->dtype, shape, n);
  if (out == NULL)
    return NULL;
  contiguous_strides (a->shape, a->rank, astr);
  for (int64_t o = 0; o < out->numel; o++)
    {
      int64_t off = 0;
      unflatten (o, shape, n, idx);
      for (guint i = 0; i < n; i++)
        off += idx[i] * astr[perm[i]];
      out->data[o] = a->data[off];
    }
  return out;
}

static Rv *
run_squeeze (Ctx *c, const CsStmt *s)
{
  g_autoptr (Rv) a = tensor_arg (c, s, CS_ARG_A);
  int64_t dims[CS_MAX_DIMS], shape[CS_MAX_DIMS];
  guint nd, rank = 0;
  gboolean drop[CS_MAX_DIMS] = { FALSE };

  if (a == NULL)
    return NULL;
  if (!int_seq_of (c, s, cs_stmt_arg (s, CS_ARG_DIMS), dims, CS_MAX_DIMS, &nd))
    {
      fail (c, s, CS_REF_ERROR_INPUT, "expects (a, dims)");
      return NULL;
    }
  for (guint i = 0; i < nd; i++)
    {
      guint d = 0;
      if (!canon_dim (c, s, dims[i], a->rank, &d))
        return NULL;
      if (a->rank > 0 && a->shape[d] != 1)
        {
          fail (c, s, CS_REF_ERROR_SHAPE, "cannot squeeze dimension %u of extent %"
                G_GINT64_FORMAT, d, a->shape[d]);
          return NULL;
        }
      drop[d] = TRUE;
    }
  for (guint i = 0; i < a->rank; i++)
    if (!drop[i])
      shape[rank++] = a->shape[i];
  return rv_reshaped (c, s, a, shape, rank);
}

static Rv *
run_slice (Ctx *c, const CsStmt *s)
{
  g_autoptr (Rv) a = tensor_arg (c, s, CS_ARG_A);
  int64_t start[CS_MAX_DIMS], end[CS_MAX_DIMS], step[CS_MAX_DIMS], shape[CS_MAX_DIMS];
  int64_t astr[CS_MAX_DIMS], idx[CS_MAX_DIMS];
  guint ns, ne, nst = 0;
  const CsValue *sv;
  Rv *out;

  if (a == NULL)
    return NULL;
  if (!int_seq_of (c, s, cs_stmt_arg (s, CS_ARG_START_INDICES), start, CS_MAX_DIMS, &ns)
      || !int_seq_of (c, s, cs_stmt_arg (s, CS_ARG_END_INDICES), end, CS_MAX_DIMS, &ne)
      || ns != a->rank || ne != a->rank)
    {
      fail (c, s, CS_REF_ERROR_SHAPE, "expects start and end indices for all %u dims", a->rank);
      return NULL;
    }
  sv = cs_stmt_arg (s, CS_ARG_STRIDES);
  if (sv && sv->kind != CS_VALUE_NONE)
    {
      if (!int_seq_of (c, s, sv, step, CS_MAX_DIMS, &nst) || nst != a->rank)
        {
          fail (c, s, CS_REF_ERROR_SHAPE, "expects strides for all %u dims", a->rank);
          return NULL;
        }
    }
  else
    for (guint i = 0; i < a->rank; i++)
      step[i] = 1;
  for (guint i = 0; i < a->rank; i++)
    {
      if (start[i] < 0 || end[i] > a->shape[i] || start[i] > end[i] || step[i] < 1)
        {
          fail (c, s, CS_REF_ERROR_SHAPE, "slice [%" G_GINT64_FORMAT ":%" G_GINT64_FORMAT ":%"
                G_GINT64_FORMAT "] is out of range for dimension %u of extent %" G_GINT64_FORMAT,
                start[i], end[i], step[i], i, a->shape[i]);
          return NULL;
        }
      shape[i] = (end[i] - start[i] + step[i] - 1) / step[i];
    }
  out = rv_new_tensor (c, s, a->dtype, shape, a->rank);
  if (out == NULL)
    return NULL;
  contiguous_strides (a->shape, a->rank, astr);
  for (int64_t o = 0; o < out->numel; o++)
    {
      int64_t off = 0;
      unflatten (o, shape, a->rank, idx);
      for (guint i = 0; i < a->rank; i++)
        off += (start[i] + idx[i] * step[i]) * astr[i];
      out->data[o] = a->data[off];
    }
  return out;
}

static Rv *
run_cat (Ctx *c, const CsStmt *s)
{
  const CsValue *lv = cs_stmt_arg (s, CS_ARG_TENSORS);
  g_autoptr (Rv) list = NULL;
  int64_t dim_i = 0, shape[CS_MAX_DIMS];
  guint dim = 0, rank;
  const Rv *first;
  Rv *out;
  int64_t outer = 1, inner = 1, pos = 0;

  if (lv == NULL || !(list = eval_value (c, s, lv)) || list->kind != RV_SEQ || list->items->len == 0)
    {
      if (c->error && *c->error)
        return NULL;
      fail (c, s, CS_REF_ERROR_INPUT, "expects a non-empty list of tensors");
      return NULL;
    }
  {
    double d = 0;
    if (!number_of (c, s, cs_stmt_arg (s, CS_ARG_DIM), &d))
      {
        fail (c, s, CS_REF_ERROR_INPUT, "expects (tensors, dim)");
        return NULL;
      }
    dim_i = (int64_t) d;
  }
  first = g_ptr_array_index (list->items, 0);
  if (first->kind != RV_TENSOR)
    {
      fail (c, s, CS_REF_ERROR_INPUT, "expects tensors");
      return NULL;
    }
  rank = first->rank;
  if (!canon_dim (c, s, dim_i, rank, &dim))
    return NULL;
  memcpy (shape, first->shape, sizeof shape);
  shape[dim] = 0;
  for (guint t = 0; t < list->items->len; t++)
    {
      const Rv *x = g_ptr_array_index (list->items, t);
      if (x->kind != RV_TENSOR || x->rank != rank || x->dtype != first->dtype)
        {
          fail (c, s, CS_REF_ERROR_SHAPE, "tensor %u differs in rank or dtype from the first", t);
          return NULL;
        }
      for (guint i = 0; i < rank; i++)
        if (i != dim && x->shape[i] != first->shape[i])
          {
            fail (c, s, CS_REF_ERROR_SHAPE, "tensor %u differs in dimension %u", t, i);
            return NULL;
          }
      shape[dim] += x->shape[dim];
    }
  out = rv_new_tensor (c, s, first->dtype, shape, rank);
  if (out == NULL)
    return NULL;
  for (guint i = 0; i < dim; i++)
    outer *= shape[i];
  for (guint i = dim + 1; i < rank; i++)
    inner *= shape[i];
  for (guint t = 0; t < list->items->len; t++)
    {
      const Rv *x = g_ptr_array_index (list->items, t);
      int64_t chunk = x->shape[dim] * inner;

      for (int64_t o = 0; o < outer; o++)
        memcpy (out->data + o * shape[dim] * inner + pos, x->data + o * chunk,
                (gsize) chunk * sizeof (double));
      pos += chunk;
    }
  return out;
}

static Rv *
run_pad (Ctx *c, const CsStmt *s)
{
  g_autoptr (Rv) a = tensor_arg (c, s, CS_ARG_A);
  g_autoptr (Rv) cfg = NULL;
  const CsValue *cv = cs_stmt_arg (s, CS_ARG_PADDING_CONFIG);
  int64_t lo[CS_MAX_DIMS], hi[CS_MAX_DIMS], in[CS_MAX_DIMS], shape[CS_MAX_DIMS];
  int64_t idx[CS_MAX_DIMS], ostr[CS_MAX_DIMS];
  double fill;
  Rv *out;

  if (a == NULL)
    return NULL;
  if (!number_of (c, s, cs_stmt_arg (s, CS_ARG_PADDING_VALUE), &fill) || cv == NULL
      || !(cfg = eval_value (c, s, cv)) || cfg->kind != RV_SEQ || cfg->items->len != a->rank)
    {
      if (c->error && *c->error)
        return NULL;
      fail (c, s, CS_REF_ERROR_INPUT, "expects (a, padding_value, [(lo, hi, interior)] per dim)");
      return NULL;
    }
  for (guint i = 0; i < a->rank; i++)
    {
      const Rv *t = g_ptr_array_index (cfg->items, i);
      if (t->kind != RV_SEQ || t->items->len != 3)
        {
          fail (c, s, CS_REF_ERROR_INPUT, "padding_config entry %u is not (lo, hi, interior)", i);
          return NULL;
        }
      lo[i] = (int64_t) ((Rv *) g_ptr_array_index (t->items, 0))->data[0];
      hi[i] = (int64_t) ((Rv *) g_ptr_array_index (t->items, 1))->data[0];
      in[i] = (int64_t) ((Rv *) g_ptr_array_index (t->items, 2))->data[0];
      if (in[i] < 0)
        {
          fail (c, s, CS_REF_ERROR_VALUE, "negative interior padding");
          return NULL;
        }
      shape[i] = lo[i] + hi[i] + a->shape[i] + (a->shape[i] > 0 ? (a->shape[i] - 1) * in[i] : 0);
      if (shape[i] < 0)
        {
          fail (c, s, CS_REF_ERROR_SHAPE, "padding makes dimension %u negative", i);
          return NULL;
        }
    }
  out = rv_new_tensor (c, s, a->dtype, shape, a->rank);
  if (out == NULL)
    return NULL;
  {
    double f[1] = { fill };
    round_values (f, 1, a->dtype, c->mode);
    for (int64_t o = 0; o < out->numel; o++)
      out->data[o] = f[0];
  }
  contiguous_strides (shape, a->rank, ostr);
  for (int64_t e = 0; e < a->numel; e++)
    {
      int64_t off = 0;
      gboolean inside = TRUE;

      unflatten (e, a->shape, a->rank, idx);
      for (guint i = 0; i < a->rank && inside; i++)
        {
          int64_t p = lo[i] + idx[i] * (in[i] + 1);
          inside = p >= 0 && p < shape[i];
          off += p * ostr[i];
        }
      if (inside)
        out->data[off] = a->data[e];
    }
  return out;
}

static Rv *
run_flip (Ctx *c, const CsStmt *s)
{
  g_autoptr (Rv) a = tensor_arg (c, s, CS_ARG_A);
  int64_t dims[CS_MAX_DIMS], idx[CS_MAX_DIMS], astr[CS_MAX_DIMS];
  gboolean flip[CS_MAX_DIMS] = { FALSE };
  guint nd;
  Rv *out;

  if (a == NULL)
    return NULL;
  if (!int_seq_of (c, s, cs_stmt_arg (s, CS_ARG_DIMS), dims, CS_MAX_DIMS, &nd))
    {
      fail (c, s, CS_REF_ERROR_INPUT, "expects (a, dims)");
      return NULL;
    }
  for (guint i = 0; i < nd; i++)
    {
      guint d = 0;
      if (!canon_dim (c, s, dims[i], a->rank, &d))
        return NULL;
      flip[d] = TRUE;
    }
  out = rv_new_tensor (c, s, a->dtype, a->shape, a->rank);
  if (out == NULL)
    return NULL;
  contiguous_strides (a->shape, a->rank, astr);
  for (int64_t o = 0; o < out->numel; o++)
    {
      int64_t off = 0;
      unflatten (o, a->shape, a->rank, idx);
      for (guint i = 0; i < a->rank; i++)
        off += (flip[i] ? a->shape[i] - 1 - idx[i] : idx[i]) * astr[i];
      out->data[o] = a->data[off];
    }
  return out;
}

/* convert_element_type(a, dtype): tensors round to the dtype; numbers become Python numbers of
 * the dtype's kind (`prims.convert_element_type(1, float)` gives 1.0). */
static Rv *
run_convert (Ctx *c, const CsStmt *s)
{
  g_autoptr (Rv) a = arg_tensor (c, s, CS_ARG_A);
  CsDtype d;
  Rv *out;

  if (a == NULL)
    return NULL;
  if (!dtype_from_value (cs_stmt_arg (s, CS_ARG_DTYPE), &d))
    {
      fail (c, s, CS_REF_ERROR_INPUT, "expects (a, dtype)");
      return NULL;
    }
  if (a->kind == RV_NUMBER)
    {
      CsDtype nd = d == CS_DTYPE_B8 ? CS_DTYPE_B8 : is_int (d) ? CS_DTYPE_I64 : CS_DTYPE_F64;
      out = rv_new_number (nd, a->data[0]);
      round_values (out->data, 1, nd, c->mode);
      return out;
    }
  if (!cs_tensor_supports_dtype (d))
    {
      fail (c, s, CS_REF_ERROR_DTYPE, "no CPU reference for %s", cs_dtype_short_name (d));
      return NULL;
    }
  out = rv_new_tensor (c, s, d, a->shape, a->rank);
  if (out == NULL)
    return NULL;
  memcpy (out->data, a->data, (gsize) a->numel * sizeof (double));
  round_values (out->data, out->numel, d, c->mode);
  return out;
}

/* ------------------------------------------------------------------------------------------ */
/* Reductions                                                                                  */

/* Reads the reduction dims argument into a mask; returns the output shape (dims removed). */
static gboolean
reduction_dims (Ctx *c, const CsStmt *s, const Rv *a, const CsValue *dv, gboolean *mask,
                int64_t *oshape, guint *orank)
{
  int64_t dims[CS_MAX_DIMS];
  guint nd = 0;

  memset (mask, 0, CS_MAX_DIMS * sizeof (gboolean));
  if (dv == NULL || dv->kind == CS_VALUE_NONE)
    {
      for (guint i = 0; i < a->rank; i++)
        mask[i] = TRUE;
    }
  else
    {
      if (!int_seq_of (c, s, dv, dims, CS_MAX_DIMS, &nd))
        return fail (c, s, CS_REF_ERROR_INPUT, "expects reduction dims as ints");
      for (guint i = 0; i < nd; i++)
        {
          guint d = 0;
          if (!canon_dim (c, s, dims[i], a->rank, &d))
            return FALSE;
          mask[d] = TRUE;
        }
    }
  *orank = 0;
  for (guint i = 0; i < a->rank; i++)
    if (!mask[i])
      oshape[(*orank)++] = a->shape[i];
  return TRUE;
}

/* Output flat index of input element @e, for a reduction with @mask. */
static int64_t
reduced_index (int64_t e, const Rv *a, const gboolean *mask, const int64_t *oshape, guint orank)
{
  int64_t idx[CS_MAX_DIMS], o = 0;
  guint k = 0;

  unflatten (e, a->shape, a->rank, idx);
  for (guint i = 0; i < a->rank; i++)
    if (!mask[i])
      o = o * oshape[k++] + idx[i];
  return o;
}

static Rv *
run_reduction (Ctx *c, const CsStmt *s, CsOpId id)
{
  g_autoptr (Rv) a = tensor_arg (c, s, CS_ARG_A);
  gboolean mask[CS_MAX_DIMS];
  int64_t oshape[CS_MAX_DIMS];
  guint orank;
  Rv *out;
  CsDtype od;

  if (a == NULL)
    return NULL;
  if (!reduction_dims (c, s, a, cs_stmt_arg (s, CS_ARG_DIMS), mask, oshape, &orank))
    return NULL;
  od = a->dtype;
  out = rv_new_tensor (c, s, od, oshape, orank);
  if (out == NULL)
    return NULL;
  for (int64_t o = 0; o < out->numel; o++)
    out->data[o] = id == CS_OP_PRIM_SUM ? 0.0 : id == CS_OP_PRIM_PROD ? 1.0
                   : id == CS_OP_PRIM_AMAX ? -INFINITY : INFINITY;
  if (a->numel == 0 && (id == CS_OP_PRIM_AMAX || id == CS_OP_PRIM_AMIN) && out->numel > 0)
    {
      rv_unref (out);
      fail (c, s, CS_REF_ERROR_SHAPE, "cannot take amax/amin over zero elements");
      return NULL;
    }
  for (int64_t e = 0; e < a->numel; e++)
    {
      int64_t o = reduced_index (e, a, mask, oshape, orank);
      double x = a->data[e];

      switch (id)
        {
        case CS_OP_PRIM_SUM: out->data[o] += x; break;
        case CS_OP_PRIM_PROD: out->data[o] *= x; break;
        case CS_OP_PRIM_AMAX:
          if (isnan (x) || x > out->data[o])
            out->data[o] = isnan (out->data[o]) ? out->data[o] : x;
          break;
        default:
          if (isnan (x) || x < out->data[o])
            out->data[o] = isnan (out->data[o]) ? out->data[o] : x;
          break;
        }
    }
  round_values (out->data, out->numel, od, c->mode);
  return out;
}

/* var / var_mean (a, dims, correction=): two-pass in f64. */
static Rv *
run_var (Ctx *c, const CsStmt *s, gboolean with_mean)
{
  g_autoptr (Rv) a = tensor_arg (c, s, CS_ARG_A);
  gboolean mask[CS_MAX_DIMS];
  int64_t oshape[CS_MAX_DIMS], n;
  guint orank;
  double corr = 1.0;
  const CsValue *cv;
  Rv *var = NULL, *mean = NULL, *seq;

  if (a == NULL)
    return NULL;
  if (!reduction_dims (c, s, a, cs_stmt_arg (s, CS_ARG_DIMS), mask, oshape, &orank))
    return NULL;
  cv = cs_stmt_arg (s, CS_ARG_CORRECTION);
  if (cv && !number_of (c, s, cv, &corr))
    {
      fail (c, s, CS_REF_ERROR_INPUT, "correction must be a number");
      return NULL;
    }
  if (!is_float (a->dtype))
    {
      fail (c, s, CS_REF_ERROR_DTYPE, "takes float tensors, got %s", cs_dtype_short_name (a->dtype));
      return NULL;
    }
  var = rv_new_tensor (c, s, a->dtype, oshape, orank);
  mean = var ? rv_new_tensor (c, s, a->dtype, oshape, orank) : NULL;
  if (mean == NULL)
    {
      rv_unref (var);
      return NULL;
    }
  n = var->numel ? a->numel / var->numel : 0;
  memset (mean->data, 0, (gsize) MAX (mean->numel, 1) * sizeof (double));
  memset (var->data, 0, (gsize) MAX (var->numel, 1) * sizeof (double));
  for (int64_t e = 0; e < a->numel; e++)
    mean->data[reduced_index (e, a, mask, oshape, orank)] += a->data[e];
  for (int64_t o = 0; o < mean->numel; o++)
    mean->data[o] /= (double) n;
  for (int64_t e = 0; e < a->numel; e++)
    {
      int64_t o = reduced_index (e, a, mask, oshape, orank);
      double d = a->data[e] - mean->data[o];
      var->data[o] += d * d;
    }
  for (int64_t o = 0; o < var->numel; o++)
    var->data[o] = (double) n - corr > 0 ? var->data[o] / ((double) n - corr) : NAN;
  round_values (var->data, var->numel, var->dtype, c->mode);
  round_values (mean->data, mean->numel, mean->dtype, c->mode);
  if (!with_mean)
    {
      rv_unref (mean);
      return var;
    }
  seq = rv_new_seq ();
  g_ptr_array_add (seq->items, var);
  g_ptr_array_add (seq->items, mean);
  return seq;
}

/* argmax / argmin (a, dim): dim None reduces the flattened tensor; first index wins ties,
 * NaN counts as the extreme (as PyTorch). */
static Rv *
run_argext (Ctx *c, const CsStmt *s, gboolean is_max)
{
  g_autoptr (Rv) a = tensor_arg (c, s, CS_ARG_A);
  const CsValue *dv = cs_stmt_arg (s, CS_ARG_DIM);
  gboolean mask[CS_MAX_DIMS];
  int64_t oshape[CS_MAX_DIMS];
  guint orank = 0, dim = 0;
  int64_t dim_i = 0;
  double *best;
  Rv *out;

  if (a == NULL)
    return NULL;
  if (a->numel == 0)
    {
      fail (c, s, CS_REF_ERROR_SHAPE, "cannot take argmax/argmin of an empty tensor");
      return NULL;
    }
  if (dv && dv->kind != CS_VALUE_NONE)
    {
      double d = 0;
      if (!number_of (c, s, dv, &d))
        {
          fail (c, s, CS_REF_ERROR_INPUT, "dim must be an int or None");
          return NULL;
        }
      dim_i = (int64_t) d;
      if (!canon_dim (c, s, dim_i, a->rank, &dim))
        return NULL;
      memset (mask, 0, sizeof mask);
      mask[dim] = a->rank > 0;
      orank = 0;
      for (guint i = 0; i < a->rank; i++)
        if (!mask[i])
          oshape[orank++] = a->shape[i];
    }
  else
    {
      for (guint i = 0; i < CS_MAX_DIMS; i++)
        mask[i] = TRUE;
      orank = 0;
    }
  out = rv_new_tensor (c, s, CS_DTYPE_I64, oshape, orank);
  if (out == NULL)
    return NULL;
  best = g_new (double, MAX (out->numel, 1));
  mem_take (rv_bytes (out->numel));
  for (int64_t o = 0; o < out->numel; o++)
    {
      best[o] = NAN;
      out->data[o] = -1;
    }
  for (int64_t e = 0; e < a->numel; e++)
    {
      int64_t o = orank ? reduced_index (e, a, mask, oshape, orank) : 0;
      int64_t idx[CS_MAX_DIMS], pos;
      double x = a->data[e];

      if (dv && dv->kind != CS_VALUE_NONE && a->rank > 0)
        {
          unflatten (e, a->shape, a->rank, idx);
          pos = idx[dim];
        }
      else
        pos = e;
      if (out->data[o] < 0)
        {
          best[o] = x;
          out->data[o] = (double) pos;
        }
      else if (!isnan (best[o]) && (isnan (x) || (is_max ? x > best[o] : x < best[o])))
        {
          best[o] = x;
          out->data[o] = (double) pos;
        }
    }
  g_free (best);
  mem_give (rv_bytes (out->numel));
  return out;
}

/* ------------------------------------------------------------------------------------------ */
/* Indexing                                                                                    */

static gboolean
check_index (Ctx *c, const CsStmt *s, double v, int64_t extent, int64_t *out)
{
  int64_t i = (int64_t) v;

  if (i < 0)
    i += extent;
  if (i < 0 || i >= extent)
    return fail (c, s, CS_REF_ERROR_VALUE, "index %" G_GINT64_FORMAT " is out of range for an "
                 "extent of %" G_GINT64_FORMAT, (int64_t) v, extent);
  *out = i;
  return TRUE;
}

/* take(a, index, dim): out shape = a.shape[:dim] + index.shape + a.shape[dim+1:]. */
static Rv *
run_take (Ctx *c, const CsStmt *s)
{
  g_autoptr (Rv) a = tensor_arg (c, s, CS_ARG_A);
  g_autoptr (Rv) index = arg_tensor (c, s, CS_ARG_INDEX);
  int64_t shape[CS_MAX_DIMS], outer = 1, inner = 1;
  guint dim = 0, rank = 0;
  double d = 0;
  Rv *out;

  if (a == NULL || index == NULL)
    return NULL;
  if (!number_of (c, s, cs_stmt_arg (s, CS_ARG_DIM), &d) || !canon_dim (c, s, (int64_t) d, a->rank, &dim))
    {
      if (!(c->error && *c->error))
        fail (c, s, CS_REF_ERROR_INPUT, "expects (a, index, dim)");
      return NULL;
    }
  if (is_float (index->dtype) && index->kind == RV_TENSOR)
    {
      fail (c, s, CS_REF_ERROR_DTYPE, "index must be an integer tensor");
      return NULL;
    }
  if (a->rank + index->rank > CS_MAX_DIMS)
    {
      fail (c, s, CS_REF_ERROR_SHAPE, "result rank over %d", CS_MAX_DIMS);
      return NULL;
    }
  for (guint i = 0; i < dim; i++)
    {
      shape[rank++] = a->shape[i];
      outer *= a->shape[i];
    }
  for (guint i = 0; i < index->rank; i++)
    shape[rank++] = index->shape[i];
  for (guint i = dim + 1; i < a->rank; i++)
    {
      shape[rank++] = a->shape[i];
      inner *= a->shape[i];
    }
  out = rv_new_tensor (c, s, a->dtype, shape, rank);
  if (out == NULL)
    return NULL;
  for (int64_t o = 0; o < outer; o++)
    for (int64_t j = 0; j < index->numel; j++)
      {
        int64_t k = 0;
        if (!check_index (c, s, index->data[j], a->shape[dim], &k))
          {
            rv_unref (out);
            return NULL;
          }
        memcpy (out->data + (o * index->numel + j) * inner,
                a->data + (o * a->shape[dim] + k) * inner, (gsize) inner * sizeof (double));
      }
  return out;
}

/* take_along_axis(a, index, dim) and gather(a, index, dim): out shape = index.shape;
 * out[i] = a[i with i[dim] replaced by index[i]].  Other extents of index must be <= a's
 * (gather) or equal / 1 for broadcasting (take_along_axis). */
static Rv *
run_gather (Ctx *c, const CsStmt *s, gboolean along_axis)
{
  g_autoptr (Rv) a = tensor_arg (c, s, CS_ARG_A);
  g_autoptr (Rv) index = arg_tensor (c, s, CS_ARG_INDEX);
  int64_t astr[CS_MAX_DIMS], idx[CS_MAX_DIMS], shape[CS_MAX_DIMS];
  guint dim = 0;
  double d = 0;
  Rv *out;

  if (a == NULL || index == NULL)
    return NULL;
  if (!number_of (c, s, cs_stmt_arg (s, CS_ARG_DIM), &d) || !canon_dim (c, s, (int64_t) d, a->rank, &dim))
    {
      if (!(c->error && *c->error))
        fail (c, s, CS_REF_ERROR_INPUT, "expects (a, index, dim)");
      return NULL;
    }
  if (index->kind != RV_TENSOR || index->rank != a->rank || is_float (index->dtype))
    {
      fail (c, s, CS_REF_ERROR_SHAPE, "index must be an integer tensor of the same rank as a");
      return NULL;
    }
  for (guint i = 0; i < a->rank; i++)
    {
      shape[i] = index->shape[i];
      if (i == dim)
        continue;
      if (along_axis && a->shape[i] != index->shape[i] && a->shape[i] != 1 && index->shape[i] != 1)
        {
          fail (c, s, CS_REF_ERROR_SHAPE, "a and index differ in dimension %u", i);
          return NULL;
        }
      if (along_axis)
        shape[i] = MAX (a->shape[i], index->shape[i]);
      else if (index->shape[i] > a->shape[i])
        {
          fail (c, s, CS_REF_ERROR_SHAPE, "index is larger than a in dimension %u", i);
          return NULL;
        }
    }
  out = rv_new_tensor (c, s, a->dtype, shape, a->rank);
  if (out == NULL)
    return NULL;
  contiguous_strides (a->shape, a->rank, astr);
  {
    int64_t istr[CS_MAX_DIMS];
    contiguous_strides (index->shape, index->rank, istr);
    for (int64_t o = 0; o < out->numel; o++)
      {
        int64_t off = 0, ioff = 0, k = 0;

        unflatten (o, shape, a->rank, idx);
        for (guint i = 0; i < a->rank; i++)
          ioff += (index->shape[i] == 1 ? 0 : idx[i]) * istr[i];
        if (!check_index (c, s, index->data[ioff], a->shape[dim], &k))
          {
            rv_unref (out);
            return NULL;
          }
        for (guint i = 0; i < a->rank; i++)
          off += (i == dim ? k : (a->shape[i] == 1 ? 0 : idx[i])) * astr[i];
        out->data[o] = a->data[off];
      }
  }
  return out;
}

/* embedding(a, weight, padding_idx=, max_norm=, ...): weight rows picked by the indices in a;
 * out shape = a.shape + [weight.shape[1]].  padding_idx only matters for the gradient. */
static Rv *
run_embedding (Ctx *c, const CsStmt *s)
{
  g_autoptr (Rv) a = arg_tensor (c, s, CS_ARG_A);
  g_autoptr (Rv) w = arg_tensor (c, s, CS_ARG_WEIGHT);
  const CsValue *mn = cs_stmt_arg (s, CS_ARG_MAX_NORM);
  int64_t shape[CS_MAX_DIMS], dimw;
  Rv *out;

  if (a == NULL || w == NULL)
    return NULL;
  if (mn && mn->kind != CS_VALUE_NONE)
    {
      fail (c, s, CS_REF_ERROR_UNSUPPORTED, "no CPU reference for max_norm renormalisation");
      return NULL;
    }
  if (w->kind != RV_TENSOR || w->rank != 2 || a->kind != RV_TENSOR || is_float (a->dtype)
      || a->rank + 1 > CS_MAX_DIMS)
    {
      fail (c, s, CS_REF_ERROR_SHAPE, "expects integer indices and a 2-D weight");
      return NULL;
    }
  memcpy (shape, a->shape, a->rank * sizeof (int64_t));
  dimw = w->shape[1];
  shape[a->rank] = dimw;
  out = rv_new_tensor (c, s, w->dtype, shape, a->rank + 1);
  if (out == NULL)
    return NULL;
  for (int64_t j = 0; j < a->numel; j++)
    {
      int64_t k = 0;
      if (!check_index (c, s, a->data[j], w->shape[0], &k))
        {
          rv_unref (out);
          return NULL;
        }
      memcpy (out->data + j * dimw, w->data + k * dimw, (gsize) dimw * sizeof (double));
    }
  return out;
}

/* ------------------------------------------------------------------------------------------ */
/* Creation                                                                                    */

static gboolean
creation_dtype (Ctx *c, const CsStmt *s, CsDtype *d)
{
  const CsValue *dv = cs_stmt_arg (s, CS_ARG_DTYPE);

  if (!dtype_from_value (dv, d))
    return fail (c, s, CS_REF_ERROR_INPUT, "missing or unknown dtype argument");
  if (!cs_tensor_supports_dtype (*d))
    return fail (c, s, CS_REF_ERROR_DTYPE, "no CPU reference for %s", cs_dtype_short_name (*d));
  return TRUE;
}

static Rv *
run_full (Ctx *c, const CsStmt *s)
{
  int64_t shape[CS_MAX_DIMS];
  guint rank;
  double v;
  CsDtype d;
  Rv *out;

  if (!int_seq_of (c, s, cs_stmt_arg (s, CS_ARG_SHAPE), shape, CS_MAX_DIMS, &rank)
      || !number_of (c, s, cs_stmt_arg (s, CS_ARG_FILL_VALUE), &v))
    {
      fail (c, s, CS_REF_ERROR_INPUT, "expects (shape, fill_value, device=, dtype=)");
      return NULL;
    }
  if (!creation_dtype (c, s, &d))
    return NULL;
  out = rv_new_tensor (c, s, d, shape, rank);
  if (out == NULL)
    return NULL;
  for (int64_t o = 0; o < out->numel; o++)
    out->data[o] = v;
  round_values (out->data, out->numel, d, c->mode);
  return out;
}

static Rv *
run_iota (Ctx *c, const CsStmt *s)
{
  double len, start = 0, step = 1;
  const CsValue *sv = cs_stmt_arg (s, CS_ARG_START), *tv = cs_stmt_arg (s, CS_ARG_STEP);
  CsDtype d;
  int64_t shape[1];
  Rv *out;

  if (!number_of (c, s, cs_stmt_arg (s, CS_ARG_LENGTH), &len) || len < 0
      || (sv && !number_of (c, s, sv, &start)) || (tv && !number_of (c, s, tv, &step)))
    {
      fail (c, s, CS_REF_ERROR_INPUT, "expects (length, start=, step=, device=, dtype=)");
      return NULL;
    }
  if (!creation_dtype (c, s, &d))
    return NULL;
  shape[0] = (int64_t) len;
  out = rv_new_tensor (c, s, d, shape, 1);
  if (out == NULL)
    return NULL;
  for (int64_t o = 0; o < out->numel; o++)
    out->data[o] = start + (double) o * step;
  round_values (out->data, out->numel, d, c->mode);
  return out;
}

/* uniform(shape, minval, maxval, device=, dtype=): GRand stream seeded per statement. */
static Rv *
run_uniform (Ctx *c, const CsStmt *s)
{
  int64_t shape[CS_MAX_DIMS];
  guint rank;
  double lo, hi;
  CsDtype d;
  GRand *rand;
  Rv *out;
  guint32 words[2];
  guint64 seed = c->seed + c->n_random++;

  if (!int_seq_of (c, s, cs_stmt_arg (s, CS_ARG_SHAPE), shape, CS_MAX_DIMS, &rank)
      || !number_of (c, s, cs_stmt_arg (s, CS_ARG_MINVAL), &lo)
      || !number_of (c, s, cs_stmt_arg (s, CS_ARG_MAXVAL), &hi))
    {
      fail (c, s, CS_REF_ERROR_INPUT, "expects (shape, minval, maxval, device=, dtype=)");
      return NULL;
    }
  if (!creation_dtype (c, s, &d))
    return NULL;
  out = rv_new_tensor (c, s, d, shape, rank);
  if (out == NULL)
    return NULL;
  words[0] = (guint32) seed;
  words[1] = (guint32) (seed >> 32);
  rand = g_rand_new_with_seed_array (words, 2);
  for (int64_t o = 0; o < out->numel; o++)
    out->data[o] = lo + (hi - lo) * g_rand_double (rand);
  g_rand_free (rand);
  round_values (out->data, out->numel, d, c->mode);
  return out;
}

/* ------------------------------------------------------------------------------------------ */
/* matmul / linear                                                                             */

static float *
to_f32 (const Rv *v)
{
  float *f = g_new (float, MAX (v->numel, 1));

  mem_take ((gint64) MAX (v->numel, 1) * (gint64) sizeof (float));
  for (int64_t i = 0; i < v->numel; i++)
    f[i] = (float) v->data[i];
  return f;
}

static gboolean
cancelled (const gint *cancel)
{
  return cancel != NULL && g_atomic_int_get (cancel) != 0;
}

/* Rows of C one BLAS call computes, so that a cancel request is seen between calls: about
 * 2^28 multiply-adds (tens of ms on one core), and at least 64 rows, since BLAS repacks the
 * other operand for every call and thinner calls spend a visible share of their time on it. */
static int64_t
gemm_chunk_rows (int64_t N, int64_t K)
{
  int64_t per_row = MAX (N, 1) * MAX (K, 1);

  return MAX ((int64_t) 64, ((int64_t) 1 << 28) / per_row);
}

/* C[M,N] = A[M,K] . B[K,N] (or B[N,K]^T when @tb), f32 multiply with f32 accumulation.  Runs in
 * row blocks of gemm_chunk_rows(); returns FALSE, C incomplete, when @cancel is set between
 * blocks. */
static gboolean
gemm_f32 (gboolean tb, int64_t M, int64_t N, int64_t K, const float *A, const float *B, float *C,
          const gint *cancel)
{
  int64_t chunk = gemm_chunk_rows (N, K);

  for (int64_t m0 = 0; m0 < M; m0 += chunk)
    {
      int64_t rows = MIN (chunk, M - m0);
      const float *Ab = A + m0 * K;
      float *Cb = C + m0 * N;

      if (cancelled (cancel))
        return FALSE;
#if CS_HAVE_BLAS
      if (rows <= G_MAXINT && N <= G_MAXINT && K <= G_MAXINT)
        {
          if (N)
            cblas_sgemm (CblasRowMajor, CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int) rows,
                         (int) N, (int) K, 1.0f, Ab, (int) MAX (K, 1), B,
                         (int) MAX (tb ? K : N, 1), 0.0f, Cb, (int) MAX (N, 1));
          continue;
        }
#endif
      for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < N; j++)
          {
            float acc = 0.0f;
            for (int64_t k = 0; k < K; k++)
              acc += Ab[i * K + k] * (tb ? B[j * K + k] : B[k * N + j]);
            Cb[i * N + j] = acc;
          }
    }
  return TRUE;
}

/* As gemm_f32() in f64. */
static gboolean
gemm_f64 (gboolean tb, int64_t M, int64_t N, int64_t K, const double *A, const double *B, double *C,
          const gint *cancel)
{
  int64_t chunk = gemm_chunk_rows (N, K);

  for (int64_t m0 = 0; m0 < M; m0 += chunk)
    {
      int64_t rows = MIN (chunk, M - m0);
      const double *Ab = A + m0 * K;
      double *Cb = C + m0 * N;

      if (cancelled (cancel))
        return FALSE;
#if CS_HAVE_BLAS
      if (rows <= G_MAXINT && N <= G_MAXINT && K <= G_MAXINT)
        {
          if (N)
            cblas_dgemm (CblasRowMajor, CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int) rows,
                         (int) N, (int) K, 1.0, Ab, (int) MAX (K, 1), B,
                         (int) MAX (tb ? K : N, 1), 0.0, Cb, (int) MAX (N, 1));
          continue;
        }
#endif
      for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < N; j++)
          {
            double acc = 0.0;
            for (int64_t k = 0; k < K; k++)
              acc += Ab[i * K + k] * (tb ? B[j * K + k] : B[k * N + j]);
            Cb[i * N + j] = acc;
          }
    }
  return TRUE;
}

static gboolean
same_dtype_operands (Ctx *c, const CsStmt *s, const Rv *a, const Rv *b, const Rv *bias)
{
  if (a->dtype != b->dtype || (bias && bias->dtype != a->dtype))
    return fail (c, s, CS_REF_ERROR_DTYPE, "operands must share one dtype, got %s and %s%s%s",
                 cs_dtype_short_name (a->dtype), cs_dtype_short_name (b->dtype),
                 bias ? " and " : "", bias ? cs_dtype_short_name (bias->dtype) : "");
  if (cs_dtype_kind (a->dtype) == CS_DTYPE_KIND_COMPLEX || !cs_tensor_supports_dtype (a->dtype))
    return fail (c, s, CS_REF_ERROR_DTYPE, "no CPU reference for %s operands",
                 cs_dtype_short_name (a->dtype));
  return TRUE;
}

/* torch.matmul semantics (a superset of prims.matmul): 1-D operands get a dim of 1 prepended
 * (a) or appended (b) that is removed afterwards; batch dims broadcast. */
static Rv *
run_matmul (Ctx *c, const CsStmt *s)
{
  g_autoptr (Rv) a = arg_tensor (c, s, CS_ARG_A);
  g_autoptr (Rv) b = arg_tensor (c, s, CS_ARG_B);
  int64_t as[CS_MAX_DIMS + 1], bs[CS_MAX_DIMS + 1], os[CS_MAX_DIMS + 1], ob[CS_MAX_DIMS];
  int64_t M, K, N, nbatch = 1, fshape[CS_MAX_DIMS];
  guint ar, br, nb, frank = 0;
  gboolean f32;
  Rv *out;

  if (a == NULL || b == NULL)
    return NULL;
  if (a->kind != RV_TENSOR || b->kind != RV_TENSOR || a->rank == 0 || b->rank == 0)
    {
      fail (c, s, CS_REF_ERROR_SHAPE, "operands must be tensors of rank >= 1");
      return NULL;
    }
  if (!same_dtype_operands (c, s, a, b, NULL))
    return NULL;
  ar = a->rank == 1 ? 2 : a->rank;
  br = b->rank == 1 ? 2 : b->rank;
  if (a->rank == 1)
    {
      as[0] = 1;
      as[1] = a->shape[0];
    }
  else
    memcpy (as, a->shape, ar * sizeof (int64_t));
  if (b->rank == 1)
    {
      bs[0] = b->shape[0];
      bs[1] = 1;
    }
  else
    memcpy (bs, b->shape, br * sizeof (int64_t));
  M = as[ar - 2];
  K = as[ar - 1];
  N = bs[br - 1];
  if (bs[br - 2] != K)
    {
      g_autofree char *sa = shape_str (a->shape, a->rank);
      g_autofree char *sb = shape_str (b->shape, b->rank);
      fail (c, s, CS_REF_ERROR_SHAPE, "inner dimensions differ: %s @ %s", sa, sb);
      return NULL;
    }
  nb = MAX (ar, br) - 2;
  for (guint i = 0; i < nb; i++)
    {
      int64_t ea = (int) i - (int) (nb - (ar - 2)) >= 0 ? as[i - (nb - (ar - 2))] : 1;
      int64_t eb = (int) i - (int) (nb - (br - 2)) >= 0 ? bs[i - (nb - (br - 2))] : 1;
      if (ea != eb && ea != 1 && eb != 1)
        {
          g_autofree char *sa = shape_str (a->shape, a->rank);
          g_autofree char *sb = shape_str (b->shape, b->rank);
          fail (c, s, CS_REF_ERROR_SHAPE, "batch dimensions do not broadcast: %s @ %s", sa, sb);
          return NULL;
        }
      ob[i] = MAX (ea, eb);
      nbatch *= ob[i];
    }
  for (guint i = 0; i < nb; i++)
    fshape[frank++] = ob[i];
  if (a->rank > 1)
    fshape[frank++] = M;
  if (b->rank > 1)
    fshape[frank++] = N;
  out = rv_new_tensor (c, s, a->dtype, fshape, frank);
  if (out == NULL)
    return NULL;
  memcpy (os, ob, nb * sizeof (int64_t));

  f32 = use_f32 (c, a->dtype);
  {
    g_autofree float *fa = f32 ? to_f32 (a) : NULL;
    g_autofree float *fb = f32 ? to_f32 (b) : NULL;
    g_autofree float *fc = f32 ? g_new (float, MAX (M * N, 1)) : NULL;
    g_autofree double *dc = f32 ? NULL : g_new (double, MAX (M * N, 1));
    gint64 scratch = f32 ? (gint64) (MAX (a->numel, 1) + MAX (b->numel, 1) + MAX (M * N, 1))
                           * (gint64) sizeof (float)
                         : (gint64) MAX (M * N, 1) * (gint64) sizeof (double);
    gboolean done = TRUE;
    int64_t idx[CS_MAX_DIMS];

    /* fa and fb were counted by to_f32 */
    mem_take (f32 ? (gint64) MAX (M * N, 1) * (gint64) sizeof (float)
                  : (gint64) MAX (M * N, 1) * (gint64) sizeof (double));

    for (int64_t bi = 0; bi < nbatch; bi++)
      {
        int64_t aoff = 0, boff = 0, astride = M * K, bstride = K * N, amul = 1, bmul = 1;

        unflatten (bi, ob, nb, idx);
        /* offsets into a and b for this batch element, broadcasting extents of 1 */
        for (guint i = nb; i-- > 0;)
          {
            int ia = (int) i - (int) (nb - (ar - 2)), ib = (int) i - (int) (nb - (br - 2));
            if (ia >= 0)
              {
                aoff += (as[ia] == 1 ? 0 : idx[i]) * amul;
                amul *= as[ia];
              }
            if (ib >= 0)
              {
                boff += (bs[ib] == 1 ? 0 : idx[i]) * bmul;
                bmul *= bs[ib];
              }
          }
        if (f32)
          {
            done = gemm_f32 (FALSE, M, N, K, fa + aoff * astride, fb + boff * bstride, fc,
                             c->cancel);
            for (int64_t i = 0; done && i < M * N; i++)
              out->data[bi * M * N + i] = fc[i];
          }
        else
          {
            done = gemm_f64 (FALSE, M, N, K, a->data + aoff * astride, b->data + boff * bstride,
                             dc, c->cancel);
            if (done)
              memcpy (out->data + bi * M * N, dc, (gsize) (M * N) * sizeof (double));
          }
        if (!done)
          break;
      }
    mem_give (scratch);
    if (!done)
      {
        rv_unref (out);
        fail (c, s, CS_REF_ERROR_CANCELLED, "cancelled");
        return NULL;
      }
  }
  round_values (out->data, out->numel, out->dtype, c->mode);
  return out;
}

/* linear(a, w, bias): a [..., K], w [N, K], bias [N] or None -> [..., N]; the bias is added
 * in the accumulation precision before the single rounding (cuBLASLt's bias epilogue). */
static Rv *
run_linear (Ctx *c, const CsStmt *s)
{
  g_autoptr (Rv) a = arg_tensor (c, s, CS_ARG_A);
  g_autoptr (Rv) w = arg_tensor (c, s, CS_ARG_W);
  const CsValue *bv = cs_stmt_arg (s, CS_ARG_BIAS);
  g_autoptr (Rv) bias = NULL;
  int64_t shape[CS_MAX_DIMS], K, N, M;
  guint rank;
  gboolean f32, done;
  Rv *out;

  if (a == NULL || w == NULL)
    return NULL;
  if (bv && bv->kind != CS_VALUE_NONE)
    {
      bias = eval_value (c, s, bv);
      if (bias == NULL)
        return NULL;
      if (bias->kind == RV_NONE)
        g_clear_pointer (&bias, rv_unref);
    }
  if (a->kind != RV_TENSOR || w->kind != RV_TENSOR || a->rank == 0 || (w->rank != 2 && w->rank != 1))
    {
      fail (c, s, CS_REF_ERROR_SHAPE, "expects a [..., K] and w [N, K]");
      return NULL;
    }
  if (!same_dtype_operands (c, s, a, w, bias))
    return NULL;
  K = a->shape[a->rank - 1];
  N = w->rank == 2 ? w->shape[0] : 1;
  if (w->shape[w->rank - 1] != K)
    {
      g_autofree char *sa = shape_str (a->shape, a->rank);
      g_autofree char *sw = shape_str (w->shape, w->rank);
      fail (c, s, CS_REF_ERROR_SHAPE, "in_features differ: a %s, w %s", sa, sw);
      return NULL;
    }
  if (bias && bias->kind == RV_TENSOR && bias->numel != N && bias->numel != 1)
    {
      fail (c, s, CS_REF_ERROR_SHAPE, "bias has %" G_GINT64_FORMAT " elements for %"
            G_GINT64_FORMAT " out_features", bias->numel, N);
      return NULL;
    }
  M = K ? a->numel / K : 0;
  if (K == 0)
    for (guint i = 0; i + 1 < a->rank; i++)
      M = (i == 0 ? 1 : M) * a->shape[i];
  rank = a->rank - 1;
  memcpy (shape, a->shape, rank * sizeof (int64_t));
  if (w->rank == 2)
    shape[rank++] = N;
  out = rv_new_tensor (c, s, a->dtype, shape, rank);
  if (out == NULL)
    return NULL;
  f32 = use_f32 (c, a->dtype);
  if (f32)
    {
      g_autofree float *fa = to_f32 (a);
      g_autofree float *fw = to_f32 (w);
      g_autofree float *fc = g_new (float, MAX (M * N, 1));
      gint64 scratch = (gint64) (MAX (a->numel, 1) + MAX (w->numel, 1) + MAX (M * N, 1))
                       * (gint64) sizeof (float);

      mem_take ((gint64) MAX (M * N, 1) * (gint64) sizeof (float));
      done = gemm_f32 (TRUE, M, N, K, fa, fw, fc, c->cancel);
      for (int64_t i = 0; done && i < M * N; i++)
        out->data[i] = bias ? (double) (fc[i] + (float) bias->data[bias->numel == 1 ? 0 : i % N])
                             : fc[i];
      mem_give (scratch);
    }
  else
    {
      done = gemm_f64 (TRUE, M, N, K, a->data, w->data, out->data, c->cancel);
      if (bias)
        for (int64_t i = 0; done && i < M * N; i++)
          out->data[i] += bias->data[bias->numel == 1 ? 0 : i % N];
    }
  if (!done)
    {
      rv_unref (out);
      fail (c, s, CS_REF_ERROR_CANCELLED, "cancelled");
      return NULL;
    }
  round_values (out->data, out->numel, out->dtype, c->mode);
  return out;
}

/* scatter_add(a, index, value, dim) / scatter(a, index, src, dim): a copy of a with, for
 * every position p of index, out[p with p[dim] = index[p]] += value[p] (scatter: =).  value is
 * a tensor indexed like index (torch.scatter's src) or a number.  Accumulates in f64 and rounds
 * once; repeated indices in scatter keep the last write. */
static Rv *
run_scatter (Ctx *c, const CsStmt *s, gboolean add)
{
  g_autoptr (Rv) a = tensor_arg (c, s, CS_ARG_A);
  g_autoptr (Rv) index = arg_tensor (c, s, CS_ARG_INDEX);
  g_autoptr (Rv) val = arg_tensor (c, s, add ? CS_ARG_VALUE : CS_ARG_SRC);
  int64_t astr[CS_MAX_DIMS], vstr[CS_MAX_DIMS], idx[CS_MAX_DIMS];
  guint dim = 0;
  double d = 0;
  Rv *out;

  if (a == NULL || index == NULL || val == NULL)
    return NULL;
  if (!number_of (c, s, cs_stmt_arg (s, CS_ARG_DIM), &d) || !canon_dim (c, s, (int64_t) d, a->rank, &dim))
    {
      if (!(c->error && *c->error))
        fail (c, s, CS_REF_ERROR_INPUT, "expects (a, index, value, dim)");
      return NULL;
    }
  if (index->kind != RV_TENSOR || index->rank != a->rank || is_float (index->dtype)
      || (val->kind == RV_TENSOR && val->rank != a->rank))
    {
      fail (c, s, CS_REF_ERROR_SHAPE, "index (integer) and value must have a's rank");
      return NULL;
    }
  for (guint i = 0; i < a->rank; i++)
    if ((i != dim && index->shape[i] > a->shape[i])
        || (val->kind == RV_TENSOR && index->shape[i] > val->shape[i]))
      {
        fail (c, s, CS_REF_ERROR_SHAPE, "index is larger than a or value in dimension %u", i);
        return NULL;
      }
  out = rv_new_tensor (c, s, a->dtype, a->shape, a->rank);
  if (out == NULL)
    return NULL;
  memcpy (out->data, a->data, (gsize) a->numel * sizeof (double));
  contiguous_strides (a->shape, a->rank, astr);
  if (val->kind == RV_TENSOR)
    contiguous_strides (val->shape, val->rank, vstr);
  for (int64_t e = 0; e < index->numel; e++)
    {
      int64_t off = 0, voff = 0, k = 0;

      unflatten (e, index->shape, index->rank, idx);
      if (!check_index (c, s, index->data[e], a->shape[dim], &k))
        {
          rv_unref (out);
          return NULL;
        }
      for (guint i = 0; i < a->rank; i++)
        {
          off += (i == dim ? k : idx[i]) * astr[i];
          if (val->kind == RV_TENSOR)
            voff += idx[i] * vstr[i];
        }
      if (add)
        out->data[off] += val->data[val->kind == RV_TENSOR ? voff : 0];
      else
        out->data[off] = val->data[val->kind == RV_TENSOR ? voff : 0];
    }
  round_values (out->data, out->numel, out->dtype, c->mode);
  return out;
}

/* index_add(a, index, value, dim): a copy of a with value's slice i along dim added to the
 * slice index[i]; index is 1-D (or 0-D), value has a's shape except value.shape[dim] ==
 * index.numel.  Source: thunder/core/prims.py index_add meta, torch.index_add. */
static Rv *
run_index_add (Ctx *c, const CsStmt *s)
{
  g_autoptr (Rv) a = tensor_arg (c, s, CS_ARG_A);
  g_autoptr (Rv) index = arg_tensor (c, s, CS_ARG_INDEX);
  g_autoptr (Rv) val = arg_tensor (c, s, CS_ARG_VALUE);
  int64_t outer = 1, inner = 1;
  guint dim = 0;
  double d = 0;
  Rv *out;

  if (a == NULL || index == NULL || val == NULL)
    return NULL;
  if (!number_of (c, s, cs_stmt_arg (s, CS_ARG_DIM), &d) || !canon_dim (c, s, (int64_t) d, a->rank, &dim))
    {
      fail (c, s, CS_REF_ERROR_INPUT, "expects (a, index, value, dim)");
      return NULL;
    }
  if (index->rank > 1 || is_float (index->dtype) || val->kind != RV_TENSOR || val->rank != a->rank
      || (a->rank > 0 && val->shape[dim] != index->numel))
    {
      fail (c, s, CS_REF_ERROR_SHAPE, "index must be 1-D integers and value a's shape with "
            "value.shape[dim] == len(index)");
      return NULL;
    }
  for (guint i = 0; i < a->rank; i++)
    if (i != dim && val->shape[i] != a->shape[i])
      {
        fail (c, s, CS_REF_ERROR_SHAPE, "a and value differ in dimension %u", i);
        return NULL;
      }
  out = rv_new_tensor (c, s, a->dtype, a->shape, a->rank);
  if (out == NULL)
    return NULL;
  memcpy (out->data, a->data, (gsize) a->numel * sizeof (double));
  for (guint i = 0; i < dim; i++)
    outer *= a->shape[i];
  for (guint i = dim + 1; i < a->rank; i++)
    inner *= a->shape[i];
  for (int64_t j = 0; j < index->numel; j++)
    {
      int64_t k = 0;
      int64_t ext = a->rank > 0 ? a->shape[dim] : 1;

      if (!check_index (c, s, index->data[j], ext, &k))
        {
          rv_unref (out);
          return NULL;
        }
      for (int64_t o = 0; o < outer; o++)
        for (int64_t e = 0; e < inner; e++)
          out->data[(o * ext + k) * inner + e] += val->data[(o * index->numel + j) * inner + e];
    }
  round_values (out->data, out->numel, out->dtype, c->mode);
  return out;
}

/* ------------------------------------------------------------------------------------------ */
/* Attention executor calls (sdpa executor): scaled dot product attention, forward and backward */

/* q [..., L, E], k [..., S, E], v [..., S, Ev] with equal leading dims. */
static gboolean
sdpa_shapes (Ctx *c, const CsStmt *s, const Rv *q, const Rv *k, const Rv *v, int64_t *nb,
             int64_t *L, int64_t *S, int64_t *E, int64_t *Ev)
{
  if (q->kind != RV_TENSOR || k->kind != RV_TENSOR || v->kind != RV_TENSOR || q->rank < 2
      || k->rank != q->rank || v->rank != q->rank)
    return fail (c, s, CS_REF_ERROR_SHAPE, "query, key and value must be tensors of one rank >= 2");
  *nb = 1;
  for (guint i = 0; i + 2 < q->rank; i++)
    {
      if (k->shape[i] != q->shape[i] || v->shape[i] != q->shape[i])
        return fail (c, s, CS_REF_ERROR_SHAPE, "query, key and value differ in batch dimension %u", i);
      *nb *= q->shape[i];
    }
  *L = q->shape[q->rank - 2];
  *E = q->shape[q->rank - 1];
  *S = k->shape[k->rank - 2];
  *Ev = v->shape[v->rank - 1];
  if (k->shape[k->rank - 1] != *E || v->shape[v->rank - 2] != *S)
    return fail (c, s, CS_REF_ERROR_SHAPE, "key must be [..., S, E] and value [..., S, Ev]");
  if (q->dtype != k->dtype || q->dtype != v->dtype || !is_float (q->dtype))
    return fail (c, s, CS_REF_ERROR_DTYPE, "query, key and value must share one float dtype");
  return TRUE;
}

/* Number argument @name of @s's schema, @dflt when absent or None. */
static gboolean
sdpa_flag (Ctx *c, const CsStmt *s, CsArgName name, double dflt, double *out)
{
  const CsValue *v = cs_stmt_arg (s, name);

  *out = dflt;
  if (v == NULL || v->kind == CS_VALUE_NONE)
    return TRUE;
  if (!number_of (c, s, v, out))
    return fail (c, s, CS_REF_ERROR_INPUT, "argument %s must be a number", cs_arg_name (name));
  return TRUE;
}

/* A zero placeholder for an output the CPU reference does not model (RNG state, cumulative
 * sequence lengths): typed like the trace's proxy when it has a type. */
static Rv *
sdpa_placeholder (Ctx *c, const CsStmt *s, guint k, const int64_t *dshape, guint drank)
{
  const CsValue *t = s->out && (s->out->kind == CS_VALUE_TUPLE || s->out->kind == CS_VALUE_LIST)
                     && k < s->out->u.seq.n ? s->out->u.seq.items[k] : NULL;

  if (t && t->kind == CS_VALUE_PROXY && t->u.proxy->typed && t->u.proxy->kind == CS_PROXY_TENSOR)
    {
      const CsProxy *p = t->u.proxy;
      int64_t shape[CS_MAX_DIMS];
      Rv *z;

      for (guint i = 0; i < p->rank; i++)
        shape[i] = MAX (p->shape[i], 0);
      z = rv_new_tensor (c, s, p->dtype, shape, p->rank);
      if (z)
        memset (z->data, 0, (gsize) MAX (z->numel, 1) * sizeof (double));
      return z;
    }
  /* untyped: i64 zeros of the shape the executor gives (see the caller) */
  {
    Rv *z = rv_new_tensor (c, s, CS_DTYPE_I64, dshape, drank);
    if (z)
      memset (z->data, 0, (gsize) MAX (z->numel, 1) * sizeof (double));
    return z;
  }
}

/* Where the arguments and outputs of one SDPA call sit: the positional index of each
 * argument (-1: keyword only or absent) and the outputs' count.  The Thunder executor's names
 * (thunder/executors/sdpaex.py) and ATen's backend ops (native_functions.yaml). */
/* What the schemas (cs-ops-list.h) do not say of an SDPA op: the arguments themselves
 * (dropout_p, is_causal, scale, out, logsumexp ...) are read through its schema. */
typedef struct
{
  gboolean has_mask;  /* the op takes a mask */
  CsArgName mask;     /* attn_mask / attn_bias (when has_mask) */
  CsArgName grad_out; /* backward: grad_out, or aten's efficient grad_out_ */
  guint n_out;        /* forward: outputs; backward: 3, or 4 with grad_attn_mask */
  gboolean cum;       /* forward: outputs 2 and 3 are cum_seq_q / cum_seq_k (i64[batch + 1]) */
} SdpaLayout;

/* sdpafx_grad_forward_scaled_dot_product_efficient_attention(q, k, v, dropout_p, is_causal,
 * scale=) -> 9 outputs; sdpaex_grad_forward_...(q, k, v, attn_mask, dropout_p, is_causal,
 * scale) -> (out, logsumexp, philox_seed, philox_offset) */
static const SdpaLayout sdpa_fw_flash = { FALSE, 0, 0, 9, TRUE };
static const SdpaLayout sdpa_fw_mem = { TRUE, CS_ARG_ATTN_MASK, 0, 4, FALSE };
/* aten::_scaled_dot_product_cudnn_attention(query, key, value, attn_bias, compute_log_sumexp,
 *   dropout_p=0., is_causal=False, return_debug_mask=False, *, scale=None) -> (output,
 *   logsumexp, cum_seq_q, cum_seq_k, max_q, max_k, philox_seed, philox_offset, debug_attn_mask)
 * aten::_scaled_dot_product_flash_attention(query, key, value, dropout_p=0., is_causal=False,
 *   return_debug_mask=False, *, scale=None) -> (output, logsumexp, cum_seq_q, cum_seq_k,
 *   max_q, max_k, rng_state, unused, debug_attn_mask)
 * aten::_scaled_dot_product_efficient_attention(query, key, value, attn_bias,
 *   compute_log_sumexp, dropout_p=0., is_causal=False, *, scale=None) -> (output, log_sumexp,
 *   philox_seed, philox_offset) */
static const SdpaLayout sdpa_fw_aten_cudnn = { TRUE, CS_ARG_ATTN_BIAS, 0, 9, TRUE };
static const SdpaLayout sdpa_fw_aten_flash = { FALSE, 0, 0, 9, TRUE };
static const SdpaLayout sdpa_fw_aten_mem = { TRUE, CS_ARG_ATTN_BIAS, 0, 4, FALSE };
/* sdpafx_scaled_dot_product_efficient_attention_backward(grad_out, q, k, v, out, logsumexp,
 * cum_seq_q, cum_seq_k, max_q, max_k, dropout_p, is_causal, philox_seed, philox_offset,
 * scale=); sdpaex_..._backward(grad_out, q, k, v, attn_mask, out, logsumexp, philox_seed,
 * philox_offset, dropout_p, is_causal, scale=) */
static const SdpaLayout sdpa_bw_flash = { FALSE, 0, CS_ARG_GRAD_OUT, 3, FALSE };
static const SdpaLayout sdpa_bw_mem = { TRUE, CS_ARG_ATTN_MASK, CS_ARG_GRAD_OUT, 4, FALSE };
/* aten::_scaled_dot_product_cudnn_attention_backward(grad_out, query, key, value, out,
 *   logsumexp, philox_seed, philox_offset, attn_bias, cum_seq_q, cum_seq_k, max_q, max_k,
 *   dropout_p, is_causal, *, scale=None) -> (Tensor, Tensor, Tensor)
 * aten::_scaled_dot_product_flash_attention_backward(grad_out, query, key, value, out,
 *   logsumexp, cum_seq_q, cum_seq_k, max_q, max_k, dropout_p, is_causal, philox_seed,
 *   philox_offset, *, scale=None) -> (grad_query, grad_key, grad_value)
 * aten::_scaled_dot_product_efficient_attention_backward(grad_out_, query, key, value,
 *   attn_bias, out, logsumexp, philox_seed, philox_offset, dropout_p, bool[4] grad_input_mask,
 *   is_causal=False, *, scale=None) -> (Tensor, Tensor, Tensor, Tensor) */
static const SdpaLayout sdpa_bw_aten_cudnn = { TRUE, CS_ARG_ATTN_BIAS, CS_ARG_GRAD_OUT, 3, FALSE };
static const SdpaLayout sdpa_bw_aten_flash = { FALSE, 0, CS_ARG_GRAD_OUT, 3, FALSE };
static const SdpaLayout sdpa_bw_aten_mem = { TRUE, CS_ARG_ATTN_BIAS, CS_ARG_GRAD_OUT_, 4, FALSE };

/* @seq cut to the outputs @s names: torch.compile's graphs fold the `getitem` reads of a
 * multi-output node into its targets, up to the last one read. */
static Rv *
sdpa_trim (const CsStmt *s, Rv *seq)
{
  const CsValue *o = s->out;

  if (o && (o->kind == CS_VALUE_TUPLE || o->kind == CS_VALUE_LIST) && o->u.seq.n > 0
      && o->u.seq.n < seq->items->len)
    g_ptr_array_remove_range (seq->items, o->u.seq.n, seq->items->len - o->u.seq.n);
  return seq;
}

/* The attention mask of @s as @lay names it (NULL without error when it is None or absent,
 * or the op takes none). */
static gboolean
sdpa_mask (Ctx *c, const CsStmt *s, const SdpaLayout *lay, Rv **mask)
{
  const CsValue *mv = lay->has_mask ? cs_stmt_arg (s, lay->mask) : NULL;

  *mask = NULL;
  if (mv == NULL || mv->kind == CS_VALUE_NONE)
    return TRUE;
  *mask = eval_value (c, s, mv);
  return *mask != NULL;
}

/* Forward of the layouts above: softmax(scale * q k^T + mask) v with a top-left causal mask
 * (j > i masked, torch's is_causal), scale = 1/sqrt(E) when None; f32 math in exact mode,
 * output rounded to q's dtype, logsumexp in f32 ([..., L], or as the trace types it: padded
 * to a multiple of 16 or 32 by the executors, [..., L, 1] by cuDNN).  Outputs the CPU does not
 * model (cumulative sequence lengths, RNG state, debug mask) are zeros. */
static Rv *
run_sdpa_forward (Ctx *c, const CsStmt *s, const SdpaLayout *lay)
{
  g_autoptr (Rv) q = arg_tensor (c, s, CS_ARG_QUERY);
  g_autoptr (Rv) k = arg_tensor (c, s, CS_ARG_KEY);
  g_autoptr (Rv) v = arg_tensor (c, s, CS_ARG_VALUE);
  g_autoptr (Rv) mask = NULL;
  int64_t nb, L, S, E, Ev, oshape[CS_MAX_DIMS], lstride;
  double dropout, causal, scale;
  gboolean f32;
  guint n_out = lay->n_out;
  CsDtype lse_dtype = CS_DTYPE_F32;
  Rv *out, *lse, *seq;
  g_autofree double *row = NULL;

  if (q == NULL || k == NULL || v == NULL || !sdpa_shapes (c, s, q, k, v, &nb, &L, &S, &E, &Ev))
    return NULL;
  if (!sdpa_mask (c, s, lay, &mask))
    return NULL;
  if (mask != NULL
      && (mask->kind != RV_TENSOR || mask->rank < 2 || mask->shape[mask->rank - 1] != S
          || (mask->shape[mask->rank - 2] != L && mask->shape[mask->rank - 2] != 1)
          || (mask->numel != L * S && mask->numel != S && mask->numel != nb * L * S)))
    {
      fail (c, s, CS_REF_ERROR_SHAPE, "attn_mask must broadcast to [..., L, S]");
      return NULL;
    }
  if (!sdpa_flag (c, s, CS_ARG_DROPOUT_P, 0.0, &dropout)
      || !sdpa_flag (c, s, CS_ARG_IS_CAUSAL, 0.0, &causal)
      || !sdpa_flag (c, s, CS_ARG_SCALE, 1.0 / sqrt ((double) E), &scale))
    return NULL;
  if (dropout != 0.0)
    {
      fail (c, s, CS_REF_ERROR_UNSUPPORTED, "no CPU reference for dropout_p > 0 (the GPU's "
            "Philox stream cannot be reproduced)");
      return NULL;
    }
  memcpy (oshape, q->shape, q->rank * sizeof (int64_t));
  oshape[q->rank - 1] = Ev;
  out = rv_new_tensor (c, s, q->dtype, oshape, q->rank);
  {
    /* logsumexp: [..., L], or as the trace types it (the executors pad L to a multiple of 16
       or 32, sdpaex.py's meta; the padding stays 0) */
    const CsValue *lt = s->out && (s->out->kind == CS_VALUE_TUPLE || s->out->kind == CS_VALUE_LIST)
                        && s->out->u.seq.n > 1 ? s->out->u.seq.items[1] : NULL;
    const CsProxy *lp = lt && lt->kind == CS_VALUE_PROXY ? lt->u.proxy : NULL;

    /* f32 (the kernels' accumulator type), or the float dtype the trace gives it */
    if (lp && lp->typed && lp->kind == CS_PROXY_TENSOR && is_float (lp->dtype))
      lse_dtype = lp->dtype;
    if (lp && lp->typed && lp->kind == CS_PROXY_TENSOR && lp->rank == q->rank - 1
        && lp->shape[lp->rank - 1] >= L)
      lse = out ? rv_new_tensor (c, s, lse_dtype, lp->shape, lp->rank) : NULL;
    else if (lp && lp->typed && lp->kind == CS_PROXY_TENSOR && lp->rank == q->rank
             && lp->shape[lp->rank - 1] == 1 && lp->shape[lp->rank - 2] == L)
      lse = out ? rv_new_tensor (c, s, lse_dtype, lp->shape, lp->rank) : NULL;   /* cuDNN */
    else if (lp && lp->typed && lp->kind == CS_PROXY_TENSOR && lp->rank >= 1
             && lp->shape[lp->rank - 1] == 0)
      /* not asked for (compute_log_sumexp=False): empty, as the trace types it */
      lse = out ? rv_new_tensor (c, s, lse_dtype, lp->shape, lp->rank) : NULL;
    else
      lse = out ? rv_new_tensor (c, s, lse_dtype, q->shape, q->rank - 1) : NULL;
  }
  if (lse == NULL)
    {
      rv_unref (out);
      return NULL;
    }
  memset (lse->data, 0, (gsize) MAX (lse->numel, 1) * sizeof (double));
  lstride = lse->numel / MAX (nb, 1);
  f32 = use_f32 (c, q->dtype);
  row = g_new (double, MAX (S, 1));
  mem_take (rv_bytes (S));
  for (int64_t b = 0; b < nb; b++)
    for (int64_t i = 0; i < L; i++)
      {
        if (cancelled (c->cancel))
          {
            mem_give (rv_bytes (S));
            rv_unref (out);
            rv_unref (lse);
            fail (c, s, CS_REF_ERROR_CANCELLED, "cancelled");
            return NULL;
          }
        const double *qi = q->data + (b * L + i) * E;
        double m = -INFINITY, l = 0;

        for (int64_t j = 0; j < S; j++)
          {
            const double *kj = k->data + (b * S + j) * E;
            double sc;

            if (f32)
              {
                float acc = 0;
                for (int64_t e = 0; e < E; e++)
                  acc += (float) qi[e] * (float) kj[e];
                sc = (float) (acc * (float) scale);
              }
            else
              {
                sc = 0;
                for (int64_t e = 0; e < E; e++)
                  sc += qi[e] * kj[e];
                sc *= scale;
              }
            if (mask)
              {
                double mval = mask->numel == S ? mask->data[j]
                              : mask->numel == L * S ? mask->data[i * S + j]
                              : mask->data[(b * L + i) * S + j];
                if (mask->dtype == CS_DTYPE_B8)
                  sc = mval != 0 ? sc : -INFINITY;
                else
                  sc += mval;
              }
            if (causal != 0 && j > i)
              sc = -INFINITY;
            row[j] = sc;
            m = MAX (m, sc);
          }
        for (int64_t j = 0; j < S; j++)
          {
            row[j] = m == -INFINITY ? 0.0 : (f32 ? (double) expf ((float) (row[j] - m)) : exp (row[j] - m));
            l += row[j];
          }
        for (int64_t e = 0; e < Ev; e++)
          {
            double acc = 0;
            for (int64_t j = 0; j < S; j++)
              acc += row[j] * v->data[(b * S + j) * Ev + e];
            out->data[(b * L + i) * Ev + e] = f32 ? (double) (float) ((float) acc / (float) l)
                                                  : acc / l;
          }
        if (lstride >= L)
          lse->data[b * lstride + i] = m + log (l);
      }
  mem_give (rv_bytes (S));
  round_values (out->data, out->numel, out->dtype, c->mode);
  round_values (lse->data, lse->numel, lse->dtype, c->mode);
  seq = rv_new_seq ();
  g_ptr_array_add (seq->items, out);
  g_ptr_array_add (seq->items, lse);
  for (guint i = 2; i < n_out; i++)
    {
      /* flash: cum_seq_q / cum_seq_k are i64[batch + 1]; RNG seed and offset are i64[] */
      int64_t cum[1] = { q->shape[0] + 1 };
      gboolean is_cum = lay->cum && (i == 2 || i == 3);
      Rv *z = sdpa_placeholder (c, s, i, cum, is_cum ? 1 : 0);
      if (z == NULL)
        {
          rv_unref (seq);
          return NULL;
        }
      g_ptr_array_add (seq->items, z);
    }
  return sdpa_trim (s, seq);
}

/* Backward of the layouts above, as the kernels compute it from the saved out and
 * logsumexp: P = exp(scale q k^T + mask - lse), D = rowsum(dO * out), dV = P^T dO,
 * dS = P * (dO v^T - D), dQ = scale dS k, dK = scale dS^T q, dmask = dS summed over the
 * mask's broadcast dims (the fourth output of the layouts with 4; None for a bool mask). */
static Rv *
run_sdpa_backward (Ctx *c, const CsStmt *s, const SdpaLayout *lay)
{
  g_autoptr (Rv) go = arg_tensor (c, s, lay->grad_out);
  g_autoptr (Rv) q = arg_tensor (c, s, CS_ARG_QUERY);
  g_autoptr (Rv) k = arg_tensor (c, s, CS_ARG_KEY);
  g_autoptr (Rv) v = arg_tensor (c, s, CS_ARG_VALUE);
  g_autoptr (Rv) o = arg_tensor (c, s, CS_ARG_OUT);
  g_autoptr (Rv) lse = arg_tensor (c, s, CS_ARG_LOGSUMEXP);
  g_autoptr (Rv) mask = NULL;
  int64_t nb, L, S, E, Ev, lstride;
  double dropout, causal, scale;
  Rv *gq, *gk, *gv, *gm = NULL, *seq;
  g_autofree double *p = NULL;
  g_autofree double *ds = NULL;

  if (go == NULL || q == NULL || k == NULL || v == NULL || o == NULL || lse == NULL
      || !sdpa_shapes (c, s, q, k, v, &nb, &L, &S, &E, &Ev))
    return NULL;
  if (!sdpa_mask (c, s, lay, &mask))
    return NULL;
  if (mask != NULL
      && (mask->kind != RV_TENSOR || mask->rank < 2 || mask->shape[mask->rank - 1] != S
          || (mask->numel != L * S && mask->numel != S && mask->numel != nb * L * S)))
    {
      fail (c, s, CS_REF_ERROR_SHAPE, "attn_mask must broadcast to [..., L, S]");
      return NULL;
    }
  if (go->numel != nb * L * Ev || o->numel != nb * L * Ev || lse->kind != RV_TENSOR
      || lse->numel < nb * L)
    {
      fail (c, s, CS_REF_ERROR_SHAPE, "grad_out and out must be [..., L, Ev], logsumexp [..., L]");
      return NULL;
    }
  lstride = lse->numel / nb;
  if (!sdpa_flag (c, s, CS_ARG_DROPOUT_P, 0.0, &dropout)
      || !sdpa_flag (c, s, CS_ARG_IS_CAUSAL, 0.0, &causal)
      || !sdpa_flag (c, s, CS_ARG_SCALE, 1.0 / sqrt ((double) E), &scale))
    return NULL;
  if (dropout != 0.0)
    {
      fail (c, s, CS_REF_ERROR_UNSUPPORTED, "no CPU reference for dropout_p > 0");
      return NULL;
    }
  gq = rv_new_tensor (c, s, q->dtype, q->shape, q->rank);
  gk = gq ? rv_new_tensor (c, s, k->dtype, k->shape, k->rank) : NULL;
  gv = gk ? rv_new_tensor (c, s, v->dtype, v->shape, v->rank) : NULL;
  if (gv == NULL)
    {
      rv_unref (gq);
      rv_unref (gk);
      return NULL;
    }
  memset (gq->data, 0, (gsize) MAX (gq->numel, 1) * sizeof (double));
  memset (gk->data, 0, (gsize) MAX (gk->numel, 1) * sizeof (double));
  memset (gv->data, 0, (gsize) MAX (gv->numel, 1) * sizeof (double));
  if (mask != NULL && mask->dtype != CS_DTYPE_B8 && lay->n_out == 4)
    {
      /* grad_attn_mask, for the layouts that return it (cuDNN's backward does not) */
      gm = rv_new_tensor (c, s, mask->dtype, mask->shape, mask->rank);
      if (gm == NULL)
        {
          rv_unref (gq);
          rv_unref (gk);
          rv_unref (gv);
          return NULL;
        }
      memset (gm->data, 0, (gsize) MAX (gm->numel, 1) * sizeof (double));
    }
  p = g_new (double, MAX (L * S, 1));
  ds = g_new (double, MAX (L * S, 1));
  mem_take (2 * rv_bytes (L * S));
  for (int64_t b = 0; b < nb; b++)
    {
      if (cancelled (c->cancel))
        {
          mem_give (2 * rv_bytes (L * S));
          rv_unref (gq);
          rv_unref (gk);
          rv_unref (gv);
          if (gm != NULL)
            rv_unref (gm);
          fail (c, s, CS_REF_ERROR_CANCELLED, "cancelled");
          return NULL;
        }
      for (int64_t i = 0; i < L; i++)
        {
          const double *qi = q->data + (b * L + i) * E;
          const double *doi = go->data + (b * L + i) * Ev;
          const double *oi = o->data + (b * L + i) * Ev;
          double d = 0;

          for (int64_t e = 0; e < Ev; e++)
            d += doi[e] * oi[e];
          for (int64_t j = 0; j < S; j++)
            {
              const double *kj = k->data + (b * S + j) * E;
              const double *vj = v->data + (b * S + j) * Ev;
              double sc = 0, dp = 0;

              gint64 mi = 0;

              for (int64_t e = 0; e < E; e++)
                sc += qi[e] * kj[e];
              sc *= scale;
              if (mask)
                {
                  mi = mask->numel == S ? j : mask->numel == L * S ? i * S + j : (b * L + i) * S + j;
                  if (mask->dtype == CS_DTYPE_B8)
                    sc = mask->data[mi] != 0 ? sc : -INFINITY;
                  else
                    sc += mask->data[mi];
                }
              p[i * S + j] = (causal != 0 && j > i) || sc == -INFINITY
                             ? 0.0 : exp (sc - lse->data[b * lstride + i]);
              for (int64_t e = 0; e < Ev; e++)
                dp += doi[e] * vj[e];
              ds[i * S + j] = p[i * S + j] * (dp - d);
              if (gm)
                gm->data[mi] += ds[i * S + j];
            }
        }
      for (int64_t i = 0; i < L; i++)
        for (int64_t j = 0; j < S; j++)
          {
            double pij = p[i * S + j], dsij = ds[i * S + j] * scale;

            for (int64_t e = 0; e < Ev; e++)
              gv->data[(b * S + j) * Ev + e] += pij * go->data[(b * L + i) * Ev + e];
            for (int64_t e = 0; e < E; e++)
              {
                gq->data[(b * L + i) * E + e] += dsij * k->data[(b * S + j) * E + e];
                gk->data[(b * S + j) * E + e] += dsij * q->data[(b * L + i) * E + e];
              }
          }
    }
  mem_give (2 * rv_bytes (L * S));
  /* accumulated in f64 (documented: attention backward sums in f64 and rounds once) */
  round_values (gq->data, gq->numel, gq->dtype, c->mode);
  round_values (gk->data, gk->numel, gk->dtype, c->mode);
  round_values (gv->data, gv->numel, gv->dtype, c->mode);
  seq = rv_new_seq ();
  g_ptr_array_add (seq->items, gq);
  g_ptr_array_add (seq->items, gk);
  g_ptr_array_add (seq->items, gv);
  if (lay->n_out == 4)
    {
      if (gm != NULL)
        round_values (gm->data, gm->numel, gm->dtype, c->mode);
      g_ptr_array_add (seq->items, gm ? gm : rv_new_kind (RV_NONE));
    }
  return sdpa_trim (s, seq);
}

/* ltorch.nll_loss_backward(g, a, target, weight, reduction, ignore_index, total_weight):
 * d/da of nll_loss: zeros of a's shape except grad[i, target[i]] = -g * w[target[i]] (divided
 * by total_weight for 'mean'; g per row for 'none'); ignored rows stay 0.  a is [N, C] or [C].
 * Source: the aten nll_loss_backward semantics Thunder's rule calls. */
static Rv *
run_nll_loss_backward (Ctx *c, const CsStmt *s)
{
  g_autoptr (Rv) g = arg_tensor (c, s, CS_ARG_G);
  g_autoptr (Rv) a = arg_tensor (c, s, CS_ARG_A);
  g_autoptr (Rv) target = arg_tensor (c, s, CS_ARG_TARGET);
  const CsValue *wv = cs_stmt_arg (s, CS_ARG_WEIGHT);
  const CsValue *rv = cs_stmt_arg (s, CS_ARG_REDUCTION);
  g_autoptr (Rv) w = NULL;
  g_autoptr (Rv) tw = NULL;
  double ignore = -100;
  const char *reduction = "mean";
  int64_t N, C;
  Rv *out;

  if (g == NULL || a == NULL || target == NULL)
    return NULL;
  if (wv && wv->kind != CS_VALUE_NONE && !(w = eval_value (c, s, wv)))
    return NULL;
  if (rv && rv->kind == CS_VALUE_STRING && rv->u.s)
    reduction = rv->u.s;
  if (cs_stmt_arg (s, CS_ARG_IGNORE_INDEX) && !number_of (c, s, cs_stmt_arg (s, CS_ARG_IGNORE_INDEX), &ignore))
    {
      fail (c, s, CS_REF_ERROR_INPUT, "ignore_index must be an int");
      return NULL;
    }
  if (cs_stmt_arg (s, CS_ARG_TOTAL_WEIGHT))
    {
      tw = eval_value (c, s, cs_stmt_arg (s, CS_ARG_TOTAL_WEIGHT));
      if (tw == NULL)
        return NULL;
    }
  if (a->kind != RV_TENSOR || (a->rank != 2 && a->rank != 1))
    {
      fail (c, s, CS_REF_ERROR_SHAPE, "no CPU reference for inputs of rank %u (2-D [N, C] or 1-D [C] only)",
            a->rank);
      return NULL;
    }
  N = a->rank == 2 ? a->shape[0] : 1;
  C = a->shape[a->rank - 1];
  if (target->numel != N || (strcmp (reduction, "none") == 0 && g->numel != N))
    {
      fail (c, s, CS_REF_ERROR_SHAPE, "target (and g for 'none') must have %" G_GINT64_FORMAT
            " elements", N);
      return NULL;
    }
  if (strcmp (reduction, "mean") != 0 && strcmp (reduction, "sum") != 0
      && strcmp (reduction, "none") != 0)
    {
      fail (c, s, CS_REF_ERROR_VALUE, "unknown reduction '%s'", reduction);
      return NULL;
    }
  out = rv_new_tensor (c, s, a->dtype, a->shape, a->rank);
  if (out == NULL)
    return NULL;
  memset (out->data, 0, (gsize) MAX (out->numel, 1) * sizeof (double));
  for (int64_t i = 0; i < N; i++)
    {
      double t = target->data[i], gi, wi;
      int64_t ti = 0;

      if (t == ignore)
        continue;
      if (!check_index (c, s, t, C, &ti))
        {
          rv_unref (out);
          return NULL;
        }
      wi = w ? w->data[ti] : 1.0;
      gi = strcmp (reduction, "none") == 0 ? g->data[i] : g->data[0];
      out->data[i * C + ti] = -gi * wi;
      if (strcmp (reduction, "mean") == 0)
        out->data[i * C + ti] /= tw && tw->kind != RV_NONE ? tw->data[0] : 1.0;
    }
  round_values (out->data, out->numel, out->dtype, c->mode);
  return out;
}

/* embedding_backward(grad, indices, num_weights, padding_idx, scale_grad_by_freq, sparse):
 * [num_weights, D] zeros with every grad row added at its index (rows of padding_idx skipped;
 * divided by the index's count when scale_grad_by_freq); accumulated in f32 in exact mode for
 * float dtypes narrower than f64 (opmath), rounded once.  Source: aten embedding_backward. */
static Rv *
run_embedding_backward (Ctx *c, const CsStmt *s)
{
  g_autoptr (Rv) g = arg_tensor (c, s, CS_ARG_GRAD);
  g_autoptr (Rv) idx = arg_tensor (c, s, CS_ARG_INDICES);
  double nw, pad = -1, freq = 0;
  int64_t shape[2], D;
  g_autofree float *acc32 = NULL;
  g_autofree int64_t *count = NULL;
  gboolean f32;
  Rv *out;

  if (g == NULL || idx == NULL)
    return NULL;
  if (!number_of (c, s, cs_stmt_arg (s, CS_ARG_NUM_WEIGHTS), &nw) || nw < 0)
    {
      fail (c, s, CS_REF_ERROR_INPUT, "expects (grad, indices, num_weights, padding_idx, "
            "scale_grad_by_freq, sparse)");
      return NULL;
    }
  if (cs_stmt_arg (s, CS_ARG_PADDING_IDX))
    number_of (c, s, cs_stmt_arg (s, CS_ARG_PADDING_IDX), &pad);
  if (cs_stmt_arg (s, CS_ARG_SCALE_GRAD_BY_FREQ))
    number_of (c, s, cs_stmt_arg (s, CS_ARG_SCALE_GRAD_BY_FREQ), &freq);
  if (g->kind != RV_TENSOR || g->rank != idx->rank + 1)
    {
      fail (c, s, CS_REF_ERROR_SHAPE, "grad must have the indices' shape plus one dimension");
      return NULL;
    }
  D = g->shape[g->rank - 1];
  shape[0] = (int64_t) nw;
  shape[1] = D;
  out = rv_new_tensor (c, s, g->dtype, shape, 2);
  if (out == NULL)
    return NULL;
  memset (out->data, 0, (gsize) MAX (out->numel, 1) * sizeof (double));
  f32 = use_f32 (c, g->dtype);
  if (f32)
    acc32 = g_new0 (float, MAX (out->numel, 1));
  count = g_new0 (int64_t, MAX (shape[0], 1));
  /* freed on return: counted until then (the error paths end the run) */
  mem_take ((f32 ? (gint64) MAX (out->numel, 1) * (gint64) sizeof (float) : 0)
            + (gint64) MAX (shape[0], 1) * (gint64) sizeof (int64_t));
  for (int64_t r = 0; r < idx->numel; r++)
    {
      int64_t k = 0;
      if (!check_index (c, s, idx->data[r], shape[0], &k))
        {
          rv_unref (out);
          return NULL;
        }
      count[k]++;
    }
  for (int64_t r = 0; r < idx->numel; r++)
    {
      int64_t k = (int64_t) idx->data[r];
      double sc;

      if (k < 0)
        k += shape[0];
      if (pad >= 0 && k == (int64_t) pad)
        continue;
      sc = freq != 0 ? 1.0 / (double) count[k] : 1.0;
      for (int64_t d = 0; d < D; d++)
        {
          if (f32)
            acc32[k * D + d] += (float) (g->data[r * D + d] * sc);
          else
            out->data[k * D + d] += g->data[r * D + d] * sc;
        }
    }
  if (f32)
    for (int64_t i = 0; i < out->numel; i++)
      out->data[i] = acc32[i];
  mem_give ((f32 ? (gint64) MAX (out->numel, 1) * (gint64) sizeof (float) : 0)
            + (gint64) MAX (shape[0], 1) * (gint64) sizeof (int64_t));
  round_values (out->data, out->numel, out->dtype, c->mode);
  return out;
}

/* ------------------------------------------------------------------------------------------ */
/* Statements                                                                                  */

static gboolean exec_stmts (Ctx *c, CsStmt * const *stmts, guint n);

static gboolean
unsupported (Ctx *c, const CsStmt *s)
{
  guint line = stmt_line (c, s);

  if (c->error && *c->error)
    return FALSE;
  if (c->trace->file && line)
    g_set_error (c->error, CS_REF_ERROR, CS_REF_ERROR_UNSUPPORTED,
                 "%s:%u: no CPU reference for %s", c->trace->file, line, s->callee);
  else if (line)
    g_set_error (c->error, CS_REF_ERROR, CS_REF_ERROR_UNSUPPORTED,
                 "line %u: no CPU reference for %s", line, s->callee);
  else
    g_set_error (c->error, CS_REF_ERROR, CS_REF_ERROR_UNSUPPORTED,
                 "%s (made by castscope's passes): no CPU reference for %s",
                 c->trace->name ? c->trace->name : "trace", s->callee);
  return FALSE;
}

/* Checks a computed tensor against the proxy's declared type. */
static gboolean
check_against_proxy (Ctx *c, const CsStmt *s, const CsProxy *p, const Rv *v)
{
  if (!p->typed || p->kind != CS_PROXY_TENSOR || v->kind != RV_TENSOR)
    return TRUE;
  if (p->dtype != v->dtype)
    return fail (c, s, CS_REF_ERROR_DTYPE, "computes %s for %s but the trace says %s",
                 cs_dtype_short_name (v->dtype), p->name, cs_dtype_short_name (p->dtype));
  if (p->rank != v->rank)
    goto mismatch;
  for (guint i = 0; i < p->rank; i++)
    if (p->shape[i] >= 0 && p->shape[i] != v->shape[i])
      goto mismatch;
  return TRUE;

mismatch:
  {
    g_autofree char *got = shape_str (v->shape, v->rank);
    g_autofree char *want = shape_str (p->shape, p->rank);
    return fail (c, s, CS_REF_ERROR_SHAPE, "computes shape %s for %s but the trace says %s",
                 got, p->name, want);
  }
}

static gboolean
bind_target (Ctx *c, const CsStmt *s, const CsValue *target, Rv *v)
{
  switch (target->kind)
    {
    case CS_VALUE_PROXY:
      if (!check_against_proxy (c, s, target->u.proxy, v))
        return FALSE;
      g_hash_table_replace (c->env, (gpointer) target->u.proxy->name, rv_ref (v));
      return TRUE;
    case CS_VALUE_TUPLE:
    case CS_VALUE_LIST:
      if (v->kind != RV_SEQ || v->items->len != target->u.seq.n)
        {
          if (target->u.seq.n == 1 && v->kind != RV_SEQ)
            return bind_target (c, s, target->u.seq.items[0], v);
          return fail (c, s, CS_REF_ERROR_SHAPE, "produces %u values for %u targets",
                       v->kind == RV_SEQ ? v->items->len : 1, target->u.seq.n);
        }
      for (guint i = 0; i < target->u.seq.n; i++)
        if (!bind_target (c, s, target->u.seq.items[i], g_ptr_array_index (v->items, i)))
          return FALSE;
      return TRUE;
    default:   /* `_` and literals: dropped */
      return TRUE;
    }
}

static void
collect_sub_outputs (const CsStmt *s, GPtrArray *out)
{
  for (guint i = 0; i < s->n_subs; i++)
    {
      cs_stmt_collect_outputs (s->subs[i], out);
      collect_sub_outputs (s->subs[i], out);
    }
}

/* Runs the decomposition of @s, then drops the names local to it. */
static gboolean
exec_subs (Ctx *c, const CsStmt *s)
{
  g_autoptr (GPtrArray) inner = g_ptr_array_new ();
  g_autoptr (GPtrArray) outs = g_ptr_array_new ();
  g_autoptr (GPtrArray) fresh = g_ptr_array_new ();

  collect_sub_outputs (s, inner);
  cs_stmt_collect_outputs (s, outs);
  for (guint i = 0; i < inner->len; i++)
    {
      const CsProxy *p = g_ptr_array_index (inner, i);
      gboolean is_out = FALSE;

      for (guint k = 0; k < outs->len && !is_out; k++)
        is_out = g_ptr_array_index (outs, k) == p
                 || strcmp (((CsProxy *) g_ptr_array_index (outs, k))->name, p->name) == 0;
      if (!is_out && !g_hash_table_contains (c->env, p->name))
        g_ptr_array_add (fresh, (gpointer) p->name);
    }
  if (!exec_stmts (c, s->subs, s->n_subs))
    return FALSE;
  for (guint k = 0; k < outs->len; k++)
    {
      const CsProxy *p = g_ptr_array_index (outs, k);
      if (!g_hash_table_contains (c->env, p->name))
        return fail (c, s, CS_REF_ERROR_UNBOUND, "its decomposition does not produce %s", p->name);
    }
  for (guint i = 0; i < fresh->len; i++)
    g_hash_table_remove (c->env, g_ptr_array_index (fresh, i));
  return TRUE;
}

static Rv *
run_shape_query (Ctx *c, const CsStmt *s, gboolean size)
{
  g_autoptr (Rv) a = tensor_arg (c, s, size ? CS_ARG_A : CS_ARG_T);   /* prims.shape(t) */
  const CsValue *dv;
  Rv *seq;

  if (a == NULL)
    return NULL;
  dv = size ? cs_stmt_arg (s, CS_ARG_DIM) : NULL;
  if (dv && dv->kind != CS_VALUE_NONE)
    {
      double d = 0;
      guint dim = 0;
      if (!number_of (c, s, dv, &d) || !canon_dim (c, s, (int64_t) d, a->rank, &dim))
        return NULL;
      return rv_new_number (CS_DTYPE_I64, (double) a->shape[dim]);
    }
  seq = rv_new_seq ();
  for (guint i = 0; i < a->rank; i++)
    g_ptr_array_add (seq->items, rv_new_number (CS_DTYPE_I64, (double) a->shape[i]));
  return seq;
}

/* Identity-like prims (shallow_copy, clone, device_put, stride_order, view of same shape). */
static Rv *
run_identity (Ctx *c, const CsStmt *s)
{
  return arg_tensor (c, s, CS_ARG_A);
}

/* ------------------------------------------------------------------------------------------ */
/* Distributed prims as a world of one (thunder/distributed/prims.py): every collective of one
 * rank gives its input back (all_reduce of any op, broadcast, all_gather and reduce_scatter
 * with a group of 1), wait gives the tensor its future holds (the collective's output),
 * synchronize gives the parameter, pack concatenates the flattened tensors of a bucket and
 * unpack cuts the buffer back into their shapes.  A trace whose shapes say the group is larger
 * is refused: the CPU reference runs one rank. */

static gboolean
dist_world_of_one (Ctx *c, const CsStmt *s)
{
  guint n = cs_dist_stmt_group_size (s);

  if (n == 0 && cs_op_find_arg (cs_op_semantic (s->op), CS_ARG_GROUP, NULL) != NULL)
    n = cs_dist_group_size (c->trace, cs_stmt_arg (s, CS_ARG_GROUP));
  if (n > 1)
    return fail (c, s, CS_REF_ERROR_UNSUPPORTED, "a process group of %u ranks: the CPU reference "
                 "runs a distributed trace as a world of one", n);
  return TRUE;
}

static Rv *
run_dist_pack (Ctx *c, const CsStmt *s)
{
  const CsValue *tv = cs_stmt_arg (s, CS_ARG_TENSORS);
  g_autoptr (Rv) seq = NULL;
  Rv *out;
  int64_t total = 0, off = 0;
  CsDtype dt = CS_DTYPE_F32;

  if (tv == NULL || (seq = eval_value (c, s, tv)) == NULL || seq->kind != RV_SEQ || seq->items->len == 0)
    {
      fail (c, s, CS_REF_ERROR_INPUT, "tensors is not a non-empty list of tensors");
      return NULL;
    }
  for (guint i = 0; i < seq->items->len; i++)
    {
      Rv *t = g_ptr_array_index (seq->items, i);
      if (t->kind != RV_TENSOR)
        {
          fail (c, s, CS_REF_ERROR_INPUT, "element %u of tensors is not a tensor", i);
          return NULL;
        }
      dt = t->dtype;
      total += t->numel;
    }
  out = rv_new_tensor (c, s, dt, &total, 1);
  if (out == NULL)
    return NULL;
  for (guint i = 0; i < seq->items->len; i++)
    {
      Rv *t = g_ptr_array_index (seq->items, i);
      memcpy (out->data + off, t->data, (gsize) t->numel * sizeof (double));
      off += t->numel;
    }
  return out;
}

static Rv *
run_dist_unpack (Ctx *c, const CsStmt *s)
{
  const CsValue *tv = cs_stmt_arg (s, CS_ARG_TENSORS);
  g_autoptr (Rv) buf = arg_tensor (c, s, CS_ARG_BUFFER);
  g_autoptr (Rv) seq = NULL;
  Rv *out;
  int64_t total = 0, off = 0;

  if (buf == NULL)
    return NULL;
  if (tv == NULL || (seq = eval_value (c, s, tv)) == NULL || seq->kind != RV_SEQ)
    {
      fail (c, s, CS_REF_ERROR_INPUT, "tensors is not a list of tensors");
      return NULL;
    }
  for (guint i = 0; i < seq->items->len; i++)
    {
      Rv *t = g_ptr_array_index (seq->items, i);
      if (t->kind != RV_TENSOR)
        {
          fail (c, s, CS_REF_ERROR_INPUT, "element %u of tensors is not a tensor", i);
          return NULL;
        }
      total += t->numel;
    }
  if (buf->kind != RV_TENSOR || total != buf->numel)
    {
      fail (c, s, CS_REF_ERROR_SHAPE, "the buffer holds %" G_GINT64_FORMAT " elements, the "
            "tensors %" G_GINT64_FORMAT, buf->numel, total);
      return NULL;
    }
  out = rv_new_seq ();
  for (guint i = 0; i < seq->items->len; i++)
    {
      Rv *t = g_ptr_array_index (seq->items, i);
      Rv *o = rv_new_tensor (c, s, buf->dtype, t->shape, t->rank);
      if (o == NULL)
        {
          rv_unref (out);
          return NULL;
        }
      memcpy (o->data, buf->data + off, (gsize) t->numel * sizeof (double));
      off += t->numel;
      g_ptr_array_add (out->items, o);
    }
  return out;
}

static Rv *
run_dist (Ctx *c, const CsStmt *s, CsOpId id)
{
  if (!dist_world_of_one (c, s))
    return NULL;
  switch (id)
    {
    case CS_OP_DIST_PACK:
    case CS_OP_DIST_PACK_FOR_FSDP:
      return run_dist_pack (c, s);
    case CS_OP_DIST_UNPACK:
    case CS_OP_DIST_UNPACK_FOR_FSDP:
      return run_dist_unpack (c, s);
    default:
      /* all_reduce, all_gather, reduce_scatter, broadcast of one rank; wait; synchronize;
       * update_bucket_view; stash_grad_for_fsdp; the tensor-parallel synchronizes */
      return arg_tensor_at (c, s, 0);
    }
}

static gboolean
exec_call (Ctx *c, const CsStmt *s)
{
  const CsOp *sem = cs_op_semantic (s->op);
  CsOpId id = sem->id;
  g_autoptr (Rv) v = NULL;

  switch (id)
    {
    case CS_OP_PRIM_GET_GRAD:
      {
        const CsProxy *p = cs_stmt_get_output (s);
        if (p && !g_hash_table_contains (c->env, p->name))
          return fail (c, s, CS_REF_ERROR_INPUT, "cotangent %s was not given as an input", p->name);
        return TRUE;
      }
    case CS_OP_PRIM_SHAPE:
      v = run_shape_query (c, s, FALSE);
      break;
    case CS_OP_LTORCH_SIZE:
    case CS_OP_PRIM_SIZE:
      v = run_shape_query (c, s, TRUE);
      break;
    case CS_OP_PRIM_CONVERT_ELEMENT_TYPE:
      v = run_convert (c, s);
      break;
    case CS_OP_PRIM_BROADCAST_IN_DIM:
      v = run_broadcast_in_dim (c, s);
      break;
    case CS_OP_PRIM_RESHAPE:
    case CS_OP_PRIM_VIEW:
      v = run_reshape (c, s);
      break;
    case CS_OP_PRIM_TRANSPOSE:
      v = run_transpose (c, s);
      break;
    case CS_OP_PRIM_SQUEEZE:
      v = run_squeeze (c, s);
      break;
    case CS_OP_PRIM_SLICE_PRIM:
      v = run_slice (c, s);
      break;
    case CS_OP_PRIM_CAT:
      v = run_cat (c, s);
      break;
    case CS_OP_PRIM_PAD:
      v = run_pad (c, s);
      break;
    case CS_OP_PRIM_FLIP:
      v = run_flip (c, s);
      break;
    case CS_OP_PRIM_SHALLOW_COPY:
    case CS_OP_PRIM_CLONE:
    case CS_OP_PRIM_DEVICE_PUT:
    case CS_OP_PRIM_STRIDE_ORDER:
      v = run_identity (c, s);
      break;
    case CS_OP_PRIM_SUM:
    case CS_OP_PRIM_PROD:
    case CS_OP_PRIM_AMAX:
    case CS_OP_PRIM_AMIN:
      v = run_reduction (c, s, id);
      break;
    case CS_OP_PRIM_VAR:
      v = run_var (c, s, FALSE);
      break;
    case CS_OP_PRIM_VAR_MEAN:
      v = run_var (c, s, TRUE);
      break;
    case CS_OP_PRIM_ARGMAX:
    case CS_OP_PRIM_ARGMIN:
      v = run_argext (c, s, id == CS_OP_PRIM_ARGMAX);
      break;
    case CS_OP_PRIM_TAKE:
      v = run_take (c, s);
      break;
    case CS_OP_PRIM_TAKE_ALONG_AXIS:
      v = run_gather (c, s, TRUE);
      break;
    case CS_OP_PRIM_GATHER:
      v = run_gather (c, s, FALSE);
      break;
    case CS_OP_PRIM_EMBEDDING:
      v = run_embedding (c, s);
      break;
    case CS_OP_PRIM_FULL:
      v = run_full (c, s);
      break;
    case CS_OP_PRIM_IOTA:
      v = run_iota (c, s);
      break;
    case CS_OP_PRIM_UNIFORM:
    case CS_OP_PRIM_UNIFORM_PHILOX:
      v = run_uniform (c, s);
      break;
    case CS_OP_PRIM_MATMUL:
      v = run_matmul (c, s);
      break;
    case CS_OP_PRIM_LINEAR:
      v = run_linear (c, s);
      break;
    case CS_OP_EX_SDPAFX_GRAD_FORWARD_SCALED_DOT_PRODUCT_EFFICIENT_ATTENTION:
      v = run_sdpa_forward (c, s, &sdpa_fw_flash);
      break;
    case CS_OP_EX_SDPAFX_SCALED_DOT_PRODUCT_EFFICIENT_ATTENTION_BACKWARD:
      v = run_sdpa_backward (c, s, &sdpa_bw_flash);
      break;
    case CS_OP_EX_SDPAEX_GRAD_FORWARD_SCALED_DOT_PRODUCT_EFFICIENT_ATTENTION:
      v = run_sdpa_forward (c, s, &sdpa_fw_mem);
      break;
    case CS_OP_EX_SDPAEX_SCALED_DOT_PRODUCT_EFFICIENT_ATTENTION_BACKWARD:
      v = run_sdpa_backward (c, s, &sdpa_bw_mem);
      break;
    case CS_OP_ATEN__SCALED_DOT_PRODUCT_CUDNN_ATTENTION:
      v = run_sdpa_forward (c, s, &sdpa_fw_aten_cudnn);
      break;
    case CS_OP_ATEN__SCALED_DOT_PRODUCT_CUDNN_ATTENTION_BACKWARD:
      v = run_sdpa_backward (c, s, &sdpa_bw_aten_cudnn);
      break;
    case CS_OP_ATEN__SCALED_DOT_PRODUCT_FLASH_ATTENTION:
      v = run_sdpa_forward (c, s, &sdpa_fw_aten_flash);
      break;
    case CS_OP_ATEN__SCALED_DOT_PRODUCT_FLASH_ATTENTION_BACKWARD:
      v = run_sdpa_backward (c, s, &sdpa_bw_aten_flash);
      break;
    case CS_OP_ATEN__SCALED_DOT_PRODUCT_EFFICIENT_ATTENTION:
      v = run_sdpa_forward (c, s, &sdpa_fw_aten_mem);
      break;
    case CS_OP_ATEN__SCALED_DOT_PRODUCT_EFFICIENT_ATTENTION_BACKWARD:
      v = run_sdpa_backward (c, s, &sdpa_bw_aten_mem);
      break;
    case CS_OP_PRIM_INDEX_ADD:
      v = run_index_add (c, s);
      break;
    case CS_OP_PRIM_SCATTER_ADD:
      v = run_scatter (c, s, TRUE);
      break;
    case CS_OP_PRIM_SCATTER:
      v = run_scatter (c, s, FALSE);
      break;
    case CS_OP_PRIM_EMBEDDING_BACKWARD:
      v = run_embedding_backward (c, s);
      break;
    case CS_OP_LTORCH_EMBEDDING_BACKWARD:   /* same signature as the prim */
      if (s->n_subs > 0)
        return exec_subs (c, s);
      v = run_embedding_backward (c, s);
      break;
    case CS_OP_LTORCH_NLL_LOSS_BACKWARD:
      if (s->n_subs > 0)
        return exec_subs (c, s);
      v = run_nll_loss_backward (c, s);
      break;
    default:
      if (sem->category == CS_OP_CAT_DISTRIBUTED)
        {
          v = run_dist (c, s, id);
          break;
        }
      if (sem->category == CS_OP_CAT_ELEMENTWISE && cs_op_has_tag (sem, CS_OP_TAG_PRIM))
        {
          /* a prim without a CPU formula in its registry row runs its decomposition, if the
           * trace gives one */
          if (!(sem->exec & CS_OP_EXEC_CPU))
            return s->n_subs ? exec_subs (c, s) : unsupported (c, s);
          v = run_elementwise (c, s, sem);
          break;
        }
      if (s->n_subs > 0)
        return exec_subs (c, s);
      if (sem->category == CS_OP_CAT_BOOKKEEPING && (s->out == NULL || cs_stmt_get_output (s) == NULL))
        {
          /* checks, comments, prints, put_grad, clear_mutable_collection: no value */
          g_autoptr (GPtrArray) outs = g_ptr_array_new ();
          cs_stmt_collect_outputs (s, outs);
          if (outs->len == 0)
            return TRUE;
        }
      if (id == CS_OP_PRIM_UNPACK_TRIVIAL)
        return TRUE;
      return unsupported (c, s);
    }
  if (v == NULL)
    {
      /* every kernel reports its own failures; this catches an argument that is not what
       * the op takes where a kernel only noticed that no value came out */
      if (c->error && *c->error == NULL)
        fail (c, s, CS_REF_ERROR_INPUT, "arguments do not fit %s's signature",
              cs_op_semantic (s->op)->name);
      return FALSE;
    }
  if (s->out == NULL)
    return TRUE;
  return bind_target (c, s, s->out, v);
}

static gboolean
exec_unpack (Ctx *c, const CsStmt *s)
{
  Rv *src = s->source ? g_hash_table_lookup (c->env, s->source->name) : NULL;

  if (src == NULL)
    {
      /* A collection given as its leaves: every target must be bound already. */
      for (guint i = 0; i < s->n_targets; i++)
        if (s->targets[i]->kind == CS_VALUE_PROXY
            && s->targets[i]->u.proxy->kind != CS_PROXY_COLLECTION
            && !g_hash_table_contains (c->env, s->targets[i]->u.proxy->name))
          return fail (c, s, CS_REF_ERROR_INPUT, "no value for %s (unpacked from %s)",
                       s->targets[i]->u.proxy->name, s->source ? s->source->name : "?");
      return TRUE;
    }
  if (src->kind != RV_SEQ || src->items->len != s->n_targets)
    return fail (c, s, CS_REF_ERROR_INPUT, "%s does not hold %u values", s->source->name,
                 s->n_targets);
  for (guint i = 0; i < s->n_targets; i++)
    if (!bind_target (c, s, s->targets[i], g_ptr_array_index (src->items, i)))
      return FALSE;
  return TRUE;
}

static gboolean
exec_stmts (Ctx *c, CsStmt * const *stmts, guint n)
{
  for (guint i = 0; i < n; i++)
    {
      const CsStmt *s = stmts[i];
      gboolean ok = TRUE;

      if (cancelled (c->cancel))
        return fail (c, s, CS_REF_ERROR_CANCELLED, "cancelled");
      switch (s->kind)
        {
        case CS_STMT_CALL:
          ok = exec_call (c, s);
          break;
        case CS_STMT_UNPACK:
          ok = exec_unpack (c, s);
          break;
        case CS_STMT_DEL:
          for (guint k = 0; k < s->n_names; k++)
            g_hash_table_remove (c->env, s->names[k]->name);
          break;
        case CS_STMT_ANNASSIGN:
          ok = fail (c, s, CS_REF_ERROR_UNSUPPORTED, "prologue statements (annotated "
                     "assignments) have no CPU reference");
          break;
        case CS_STMT_RETURN:   /* handled by the caller */
        case CS_STMT_COMMENT:
        case CS_STMT_BLANK:
        default:
          break;
        }
      if (!ok)
        return FALSE;
    }
  return TRUE;
}

/* ------------------------------------------------------------------------------------------ */
/* Public API                                                                                  */

static void
add_leaves (const CsTrace *trace, CsProxy *p, GPtrArray *out, guint depth)
{
  if (depth < 8)
    for (guint i = 0; i < trace->n_stmts; i++)
      {
        const CsStmt *s = trace->stmts[i];

        if (s->kind == CS_STMT_UNPACK && s->source
            && (s->source == p || strcmp (s->source->name, p->name) == 0))
          {
            for (guint k = 0; k < s->n_targets; k++)
              if (s->targets[k]->kind == CS_VALUE_PROXY)
                add_leaves (trace, s->targets[k]->u.proxy, out, depth + 1);
            return;
          }
      }
  /* A collection the trace never unpacks holds nothing it reads (Thunder's empty C1). */
  if (p->kind == CS_PROXY_COLLECTION)
    return;
  for (guint i = 0; i < out->len; i++)
    if (strcmp (((CsProxy *) g_ptr_array_index (out, i))->name, p->name) == 0)
      return;
  g_ptr_array_add (out, p);
}

GPtrArray *
cs_ref_dup_leaf_inputs (const CsTrace *trace)
{
  g_autoptr (GPtrArray) params = NULL;
  GPtrArray *out = g_ptr_array_new ();

  g_return_val_if_fail (trace != NULL, out);
  params = cs_trace_dup_inputs (trace);
  for (guint i = 0; i < params->len; i++)
    add_leaves (trace, g_ptr_array_index (params, i), out, 0);
  for (guint i = 0; i < trace->n_stmts; i++)
    {
      const CsStmt *s = trace->stmts[i];

      if (s->kind == CS_STMT_CALL && cs_op_semantic (s->op)->id == CS_OP_PRIM_GET_GRAD)
        {
          CsProxy *p = cs_stmt_get_output (s);
          if (p)
            add_leaves (trace, p, out, 8);
        }
    }
  return out;
}

static double
proxy_numel (const CsProxy *p)
{
  double n = 1;

  if (p->kind != CS_PROXY_TENSOR || !p->typed)
    return 0;
  for (guint i = 0; i < p->rank; i++)
    n *= p->shape[i] > 0 ? (double) p->shape[i] : 1.0;
  return n;
}

static void
estimate_walk (CsStmt * const *stmts, guint n, double *flops, double *max_elems)
{
  for (guint i = 0; i < n; i++)
    {
      const CsStmt *s = stmts[i];
      g_autoptr (GPtrArray) outs = NULL;
      CsOpId id;

      if (s->kind != CS_STMT_CALL)
        continue;
      id = cs_op_semantic (s->op)->id;
      outs = g_ptr_array_new ();
      cs_stmt_collect_outputs (s, outs);
      for (guint k = 0; k < outs->len; k++)
        *max_elems = MAX (*max_elems, proxy_numel (g_ptr_array_index (outs, k)));
      if (id == CS_OP_PRIM_MATMUL || id == CS_OP_PRIM_LINEAR)
        {
          const CsValue *a = cs_stmt_arg (s, CS_ARG_A);
          const CsProxy *o = cs_stmt_get_output (s);

          if (a && a->kind == CS_VALUE_PROXY && a->u.proxy->typed && a->u.proxy->rank > 0 && o)
            *flops += 2.0 * proxy_numel (o) * (double) MAX (a->u.proxy->shape[a->u.proxy->rank - 1], 1);
          continue;
        }
      if (s->n_subs)
        estimate_walk (s->subs, s->n_subs, flops, max_elems);
      else
        for (guint k = 0; k < outs->len; k++)
          *flops += proxy_numel (g_ptr_array_index (outs, k));
    }
}

void
cs_ref_estimate (const CsTrace *trace, double *flops, double *max_tensor_elems)
{
  double f = 0, m = 0;

  g_return_if_fail (trace != NULL);
  estimate_walk (trace->stmts, trace->n_stmts, &f, &m);
  if (flops)
    *flops = f;
  if (max_tensor_elems)
    *max_tensor_elems = m;
}

GHashTable *
cs_ref_env_new (void)
{
  return g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
                                (GDestroyNotify) cs_tensor_unref);
}

void
cs_ref_env_insert (GHashTable *env, const char *name, CsTensor *tensor)
{
  g_return_if_fail (env != NULL && name != NULL && tensor != NULL);
  g_hash_table_replace (env, g_strdup (name), cs_tensor_ref (tensor));
}

static void
index_bound_walk (CsStmt * const *stmts, guint n, const CsProxy *p, int64_t *bound)
{
  for (guint i = 0; i < n; i++)
    {
      const CsStmt *s = stmts[i];

      if (s->kind == CS_STMT_CALL)
        {
          CsOpId id = cs_op_semantic (s->op)->id;
          const CsValue *a = NULL, *idx = NULL, *dim = NULL;

          switch (id)
            {
            case CS_OP_PRIM_TAKE: case CS_OP_PRIM_TAKE_ALONG_AXIS: case CS_OP_PRIM_GATHER:
              a = cs_stmt_arg (s, CS_ARG_A);
              idx = cs_stmt_arg (s, CS_ARG_INDEX);
              dim = cs_stmt_arg (s, CS_ARG_DIM);
              break;
            case CS_OP_PRIM_EMBEDDING:
            case CS_OP_LTORCH_EMBEDDING:
              idx = cs_stmt_arg (s, CS_ARG_A);
              a = cs_stmt_arg (s, CS_ARG_WEIGHT);
              break;
            default:
              break;
            }
          if (idx && a && idx->kind == CS_VALUE_PROXY && strcmp (idx->u.proxy->name, p->name) == 0
              && a->kind == CS_VALUE_PROXY && a->u.proxy->kind == CS_PROXY_TENSOR
              && a->u.proxy->typed && a->u.proxy->rank > 0)
            {
              const CsProxy *ap = a->u.proxy;
              int64_t d = dim && dim->kind == CS_VALUE_INT ? dim->u.i : 0;
              int64_t ext;

              if (d < 0)
                d += ap->rank;
              if (d >= 0 && d < (int64_t) ap->rank)
                {
                  ext = ap->shape[d];
                  if (ext > 0 && (*bound == 0 || ext < *bound))
                    *bound = ext;
                }
            }
        }
      index_bound_walk (s->subs, s->n_subs, p, bound);
    }
}

int64_t
cs_ref_index_bound (const CsTrace *trace, const CsProxy *proxy)
{
  int64_t bound = 0;

  g_return_val_if_fail (trace != NULL && proxy != NULL, 0);
  index_bound_walk (trace->stmts, trace->n_stmts, proxy, &bound);
  return bound;
}

CsTensor *
cs_ref_random_input (const CsTrace *trace, const CsProxy *proxy, guint64 seed, GError **error)
{
  CsTensor *t;
  double scale = 1.0;
  int64_t bound;
  guint64 h = seed;

  g_return_val_if_fail (proxy != NULL, NULL);
  for (const char *q = proxy->name; *q; q++)
    h = h * 1099511628211ull + (guint8) *q;   /* per-name stream, independent of order */

  if (proxy->kind == CS_PROXY_NUMBER)
    {
      double v = 0;
      CsDtype d = proxy->dtype == CS_DTYPE_B8 ? CS_DTYPE_B8
                  : cs_dtype_kind (proxy->dtype) == CS_DTYPE_KIND_INT ? CS_DTYPE_I64 : CS_DTYPE_F64;

      if (proxy->has_value && proxy->value)
        {
          const CsValue *pv = proxy->value;
          v = pv->kind == CS_VALUE_INT ? (double) pv->u.i : pv->kind == CS_VALUE_FLOAT ? pv->u.f
              : pv->kind == CS_VALUE_BOOL ? pv->u.b : 0.0;
        }
      return cs_tensor_new_from_f64 (d, NULL, 0, &v, error);
    }
  if (proxy->kind != CS_PROXY_TENSOR || !proxy->typed)
    {
      g_set_error (error, CS_REF_ERROR, CS_REF_ERROR_INPUT,
                   "input %s has no tensor type in the trace, so no random value can be made "
                   "for it (give it with --inputs)", proxy->name);
      return NULL;
    }
  for (guint i = 0; i < proxy->rank; i++)
    if (proxy->shape[i] < 0)
      {
        g_set_error (error, CS_REF_ERROR, CS_REF_ERROR_INPUT,
                     "input %s has a symbolic dimension; give its value with --inputs",
                     proxy->name);
        return NULL;
      }
  t = cs_tensor_new (proxy->dtype, proxy->shape, proxy->rank, error);
  if (t == NULL)
    return NULL;
  if (proxy->rank >= 2 && proxy->shape[proxy->rank - 1] > 0)
    scale = 1.0 / sqrt ((double) proxy->shape[proxy->rank - 1]);
  bound = cs_ref_index_bound (trace, proxy);
  cs_tensor_fill_random (t, h, scale, bound > 0 ? bound : 16);
  return t;
}

static gboolean
flatten_return (Ctx *c, const CsStmt *s, const CsValue *v, GPtrArray *outs, GPtrArray *names,
                GHashTable *returned)
{
  switch (v->kind)
    {
    case CS_VALUE_PROXY:
      {
        Rv *r = g_hash_table_lookup (c->env, v->u.proxy->name);
        CsTensor *t;

        if (r == NULL)
          return fail (c, s, CS_REF_ERROR_UNBOUND, "returns %s, which has no value",
                       v->u.proxy->name);
        if (r->kind == RV_SEQ)
          {
            for (guint i = 0; i < r->items->len; i++)
              {
                Rv *it = g_ptr_array_index (r->items, i);
                CsTensor *ti = it->kind == RV_NONE ? NULL : rv_to_tensor (it, c->mode);

                if (ti)
                  mem_take ((gint64) MAX (ti->numel, 1) * (gint64) ti->elem_bytes);
                g_ptr_array_add (outs, ti);
                g_ptr_array_add (names, g_strdup (""));
              }
            return TRUE;
          }
        t = r->kind == RV_NONE ? NULL : rv_to_tensor (r, c->mode);
        if (t)
          mem_take ((gint64) MAX (t->numel, 1) * (gint64) t->elem_bytes);
        if (t && returned)
          cs_ref_env_insert (returned, v->u.proxy->name, t);
        g_ptr_array_add (outs, t);
        g_ptr_array_add (names, g_strdup (v->u.proxy->name));
        return TRUE;
      }
    case CS_VALUE_TUPLE:
    case CS_VALUE_LIST:
      for (guint i = 0; i < v->u.seq.n; i++)
        if (!flatten_return (c, s, v->u.seq.items[i], outs, names, returned))
          return FALSE;
      return TRUE;
    case CS_VALUE_DICT:
      for (guint i = 1; i < v->u.seq.n; i += 2)
        if (!flatten_return (c, s, v->u.seq.items[i], outs, names, returned))
          return FALSE;
      return TRUE;
    case CS_VALUE_NONE:
      g_ptr_array_add (outs, NULL);
      g_ptr_array_add (names, g_strdup (""));
      return TRUE;
    case CS_VALUE_INT:
    case CS_VALUE_FLOAT:
    case CS_VALUE_BOOL:
      {
        g_autoptr (Rv) r = eval_value (c, s, v);
        CsTensor *t = rv_to_tensor (r, c->mode);

        if (t)
          mem_take ((gint64) MAX (t->numel, 1) * (gint64) t->elem_bytes);
        g_ptr_array_add (outs, t);
        g_ptr_array_add (names, g_strdup (""));
        return TRUE;
      }
    default:
      return TRUE;
    }
}

static gboolean
bind_input (Ctx *c, const CsProxy *p, const CsTensor *t)
{
  /* In f64 mode a float input may come as f64 (an f64-mode output fed back in). */
  gboolean f64_view = c->mode == CS_REF_F64 && t->dtype == CS_DTYPE_F64 && p->typed
                      && p->kind == CS_PROXY_TENSOR && is_float (p->dtype);

  if (p->typed && p->kind == CS_PROXY_TENSOR)
    {
      gboolean ok = (t->dtype == p->dtype || f64_view) && t->rank == p->rank;

      for (guint i = 0; ok && i < p->rank; i++)
        ok = p->shape[i] < 0 || p->shape[i] == t->shape[i];
      if (!ok)
        {
          g_autofree char *want = cs_proxy_type_string (p);
          g_autofree char *got = cs_tensor_type_string (t);
          g_set_error (c->error, CS_REF_ERROR, CS_REF_ERROR_INPUT,
                       "input %s: the trace says \"%s\" but the value is %s", p->name, want, got);
          return FALSE;
        }
    }
  {
    Rv *v = rv_from_tensor (t, p->kind == CS_PROXY_NUMBER);

    if (f64_view)
      v->dtype = p->dtype;   /* logical dtype; values stay unrounded */
    g_hash_table_replace (c->env, (gpointer) p->name, v);
  }
  return TRUE;
}

gboolean
cs_ref_run_env (const CsTrace *trace, GHashTable *env, CsRefMode mode, guint64 seed,
                GPtrArray **outputs, GPtrArray **output_names, GHashTable *returned,
                GError **error)
{
  return cs_ref_run_env_full (trace, env, mode, seed, NULL, outputs, output_names, returned,
                              error);
}

gboolean
cs_ref_run_env_full (const CsTrace *trace, GHashTable *env, CsRefMode mode, guint64 seed,
                     CsRefRunOptions *opts, GPtrArray **outputs, GPtrArray **output_names,
                     GHashTable *returned, GError **error)
{
  g_autoptr (GPtrArray) leaves = NULL;
  g_autoptr (GPtrArray) outs = NULL;
  g_autoptr (GPtrArray) names = NULL;
  g_autoptr (GHashTable) values = NULL;
  const CsStmt *ret = NULL;
  Ctx c = { 0 };

  g_return_val_if_fail (trace != NULL && env != NULL && outputs != NULL, FALSE);

  values = g_hash_table_new_full (g_str_hash, g_str_equal, NULL, (GDestroyNotify) rv_unref);
  c.trace = trace;
  c.env = values;
  c.mode = mode;
  c.seed = seed;
  c.error = error;
  c.cancel = opts ? opts->cancel : NULL;
  mem_live = 0;
  mem_peak = 0;
  if (opts)
    opts->peak_bytes = 0;

  leaves = cs_ref_dup_leaf_inputs (trace);
  for (guint i = 0; i < leaves->len; i++)
    {
      const CsProxy *p = g_ptr_array_index (leaves, i);
      const CsTensor *t = g_hash_table_lookup (env, p->name);

      if (t == NULL)
        {
          g_autofree char *ty = p->typed ? cs_proxy_type_string (p) : g_strdup ("untyped");
          g_set_error (error, CS_REF_ERROR, CS_REF_ERROR_INPUT,
                       "no value for input %s (\"%s\")", p->name, ty);
          return FALSE;
        }
      if (!bind_input (&c, p, t))
        return FALSE;
    }

  for (guint i = 0; i < trace->n_stmts; i++)
    {
      const CsStmt *s = trace->stmts[i];

      c.top = s;
      if (s->kind == CS_STMT_RETURN)
        {
          ret = s;
          break;
        }
      if (opts && opts->progress)
        opts->progress (i, trace->n_stmts, opts->progress_data);
      if (!exec_stmts (&c, &trace->stmts[i], 1))
        return FALSE;
    }

  outs = g_ptr_array_new_with_free_func ((GDestroyNotify) cs_tensor_unref);
  names = g_ptr_array_new_with_free_func (g_free);
  if (ret && ret->value && !flatten_return (&c, ret, ret->value, outs, names, returned))
    return FALSE;
  if (opts)
    {
      opts->peak_bytes = (guint64) MAX (mem_peak, 0);
      if (opts->progress)
        opts->progress (trace->n_stmts, trace->n_stmts, opts->progress_data);
    }
  *outputs = g_steal_pointer (&outs);
  if (output_names)
    *output_names = g_steal_pointer (&names);
  return TRUE;
}

gboolean
cs_ref_run (const CsTrace *trace, CsTensor **inputs, guint n_inputs, CsRefMode mode,
            GPtrArray **outputs, GError **error)
{
  g_autoptr (GPtrArray) leaves = NULL;
  g_autoptr (GHashTable) env = NULL;

  g_return_val_if_fail (trace != NULL && outputs != NULL, FALSE);
  g_return_val_if_fail (n_inputs == 0 || inputs != NULL, FALSE);

  leaves = cs_ref_dup_leaf_inputs (trace);
  if (leaves->len != n_inputs)
    {
      g_set_error (error, CS_REF_ERROR, CS_REF_ERROR_INPUT,
                   "%s takes %u inputs, %u given", trace->name ? trace->name : "the trace",
                   leaves->len, n_inputs);
      return FALSE;
    }
  env = cs_ref_env_new ();
  for (guint i = 0; i < n_inputs; i++)
    {
      if (inputs[i] == NULL)
        {
          g_set_error (error, CS_REF_ERROR, CS_REF_ERROR_INPUT, "input %u is NULL", i);
          return FALSE;
        }
      cs_ref_env_insert (env, ((CsProxy *) g_ptr_array_index (leaves, i))->name, inputs[i]);
    }
  return cs_ref_run_env (trace, env, mode, 0, outputs, NULL, NULL, error);
}
