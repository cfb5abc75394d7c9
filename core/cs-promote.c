/* cs-promote.c: Thunder's elementwise type promotion (see cs-promote.h).
 *
 * The lattices are written as rules over (class, strength, dtype) rather than as tables:
 * strength 0 = Python number type, 1 = weak dtype, 2 = strong dtype.  The rules reproduce
 * thunder/core/utils.py `_elementwise_exact_promotion_table` and
 * `_elementwise_inexact_promotion_table` entry for entry (tests/test-core-promote.c checks the
 * corners).
 */
#include "cs-config.h"

#include "cs-promote.h"

G_DEFINE_QUARK (cs-promote-error-quark, cs_promote_error)

enum { STR_PY = 0, STR_WEAK = 1, STR_STRONG = 2 };

static guint
ref_strength (const CsDtypeRef *r)
{
  if (r->pytype != CS_PYTYPE_NONE)
    return STR_PY;
  return r->weak ? STR_WEAK : STR_STRONG;
}

static gboolean
is_bool_dtype (CsDtype d)
{
  return d == CS_DTYPE_B8;
}

static gboolean
is_int_dtype (CsDtype d)
{
  switch (d)
    {
    case CS_DTYPE_U8: case CS_DTYPE_U64: case CS_DTYPE_I8: case CS_DTYPE_I16:
    case CS_DTYPE_I32: case CS_DTYPE_I64:
      return TRUE;
    default:
      return FALSE;
    }
}

static gboolean
is_complex_dtype (CsDtype d)
{
  return d == CS_DTYPE_C32 || d == CS_DTYPE_C64 || d == CS_DTYPE_C128;
}

static gboolean
is_exact (const CsDtypeRef *r)
{
  if (r->pytype == CS_PYTYPE_BOOL || r->pytype == CS_PYTYPE_INT)
    return TRUE;
  if (r->pytype != CS_PYTYPE_NONE)
    return FALSE;
  return is_bool_dtype (r->dtype) || is_int_dtype (r->dtype);
}

static CsDtypeRef
mk (CsDtype d, guint strength)
{
  CsDtypeRef r = { d, strength != STR_STRONG, 0 };
  return r;
}

static CsDtypeRef
mk_py (CsPyType t)
{
  return cs_promote_arg_number (t);
}

CsDtypeRef
cs_promote_arg_tensor (CsDtype dtype, guint rank)
{
  CsDtypeRef r = { dtype, rank == 0, 0 };
  return r;
}

CsDtypeRef
cs_promote_arg_number (CsPyType pytype)
{
  CsDtypeRef r = { CS_DTYPE_F32, 1, (guint8) pytype };

  switch (pytype)
    {
    case CS_PYTYPE_BOOL: r.dtype = CS_DTYPE_B8; break;
    case CS_PYTYPE_INT: r.dtype = CS_DTYPE_I64; break;
    case CS_PYTYPE_FLOAT: r.dtype = CS_DTYPE_F32; break;
    case CS_PYTYPE_COMPLEX: r.dtype = CS_DTYPE_C64; break;
    case CS_PYTYPE_NONE:
    default:
      r.pytype = CS_PYTYPE_NONE;
      r.weak = 0;
      break;
    }
  return r;
}

char *
cs_promote_dtype_ref_name (const CsDtypeRef *ref)
{
  if (ref->pytype != CS_PYTYPE_NONE)
    return g_strdup (cs_pytype_name ((CsPyType) ref->pytype));
  return g_strdup_printf ("%s%s", cs_dtype_long_name (ref->dtype), ref->weak ? "_" : "");
}

static gboolean
no_common (const CsDtypeRef *a, const CsDtypeRef *b, GError **error)
{
  g_autofree char *na = cs_promote_dtype_ref_name (a);
  g_autofree char *nb = cs_promote_dtype_ref_name (b);

  g_set_error (error, CS_PROMOTE_ERROR, CS_PROMOTE_ERROR_NO_COMMON,
               "no common dtype for %s and %s in Thunder's promotion lattice", na, nb);
  return FALSE;
}

/* Position on the signed exact chain
 * bool < b8_ < b8 < int < i8_ < i16_ < i32_ < i64_ < i8 < i16 < i32 < i64;
 * -1 for uint8 / uint64 (off the chain). */
static int
exact_chain_pos (const CsDtypeRef *r)
{
  guint s = ref_strength (r);

  if (r->pytype == CS_PYTYPE_BOOL)
    return 0;
  if (r->pytype == CS_PYTYPE_INT)
    return 3;
  switch (r->dtype)
    {
    case CS_DTYPE_B8: return s == STR_WEAK ? 1 : 2;
    case CS_DTYPE_I8: return s == STR_WEAK ? 4 : 8;
    case CS_DTYPE_I16: return s == STR_WEAK ? 5 : 9;
    case CS_DTYPE_I32: return s == STR_WEAK ? 6 : 10;
    case CS_DTYPE_I64: return s == STR_WEAK ? 7 : 11;
    default: return -1;
    }
}

static CsDtypeRef
exact_from_pos (int pos)
{
  switch (pos)
    {
    case 0: return mk_py (CS_PYTYPE_BOOL);
    case 1: return mk (CS_DTYPE_B8, STR_WEAK);
    case 2: return mk (CS_DTYPE_B8, STR_STRONG);
    case 3: return mk_py (CS_PYTYPE_INT);
    case 4: return mk (CS_DTYPE_I8, STR_WEAK);
    case 5: return mk (CS_DTYPE_I16, STR_WEAK);
    case 6: return mk (CS_DTYPE_I32, STR_WEAK);
    case 7: return mk (CS_DTYPE_I64, STR_WEAK);
    case 8: return mk (CS_DTYPE_I8, STR_STRONG);
    case 9: return mk (CS_DTYPE_I16, STR_STRONG);
    case 10: return mk (CS_DTYPE_I32, STR_STRONG);
    default: return mk (CS_DTYPE_I64, STR_STRONG);
    }
}

static gboolean
promote_exact (const CsDtypeRef *a, const CsDtypeRef *b, CsDtypeRef *out, GError **error)
{
  int pa = exact_chain_pos (a), pb = exact_chain_pos (b);
  gboolean a_u8 = a->pytype == 0 && a->dtype == CS_DTYPE_U8;
  gboolean b_u8 = b->pytype == 0 && b->dtype == CS_DTYPE_U8;
  gboolean a_u64 = a->pytype == 0 && a->dtype == CS_DTYPE_U64;
  gboolean b_u64 = b->pytype == 0 && b->dtype == CS_DTYPE_U64;

  if (a_u64 || b_u64)
    {
      /* Not in Thunder's table: uint64 with itself, bools and Python ints only. */
      const CsDtypeRef *other = a_u64 ? b : a;
      guint s = MAX (ref_strength (a), ref_strength (b));

      if ((other->pytype == 0 && other->dtype == CS_DTYPE_U64)
          || (exact_chain_pos (other) >= 0 && exact_chain_pos (other) <= 3))
        {
          *out = mk (CS_DTYPE_U64, MAX (s, STR_WEAK));
          return TRUE;
        }
      return no_common (a, b, error);
    }

  if (a_u8 && b_u8)
    {
      *out = mk (CS_DTYPE_U8, MAX (ref_strength (a), ref_strength (b)));
      return TRUE;
    }
  if (a_u8 || b_u8)
    {
      const CsDtypeRef *u = a_u8 ? a : b;
      int po = a_u8 ? pb : pa;

      if (po <= 3)            /* bools and Python int: uint8 side wins */
        *out = *u;
      else if (po >= 10)      /* strong int32 / int64 */
        *out = exact_from_pos (po);
      else                    /* every weak int, int8, int16 */
        *out = mk (CS_DTYPE_I16, STR_STRONG);
      return TRUE;
    }

  {
    int hi = MAX (pa, pb), lo = MIN (pa, pb);

    /* A bool tensor (weak or strong) with a Python int gives int8_. */
    if (hi == 3 && (lo == 1 || lo == 2))
      *out = mk (CS_DTYPE_I8, STR_WEAK);
    else
      *out = exact_from_pos (hi);
  }
  return TRUE;
}

static CsDtype
complex_counterpart (CsDtype d)
{
  switch (d)
    {
    case CS_DTYPE_F16: return CS_DTYPE_C32;
    case CS_DTYPE_BF16: case CS_DTYPE_F32: return CS_DTYPE_C64;
    case CS_DTYPE_F64: return CS_DTYPE_C128;
    default: return d;   /* complex stays; fp8 handled by the caller */
    }
}

static CsDtype
real_counterpart (CsDtype d)
{
  switch (d)
    {
    case CS_DTYPE_C32: return CS_DTYPE_F16;
    case CS_DTYPE_C64: return CS_DTYPE_F32;
    case CS_DTYPE_C128: return CS_DTYPE_F64;
    default: return d;
    }
}

/* Width rank among floats that promote by width (bf16 and f16 share a rank). */
static int
float_rank (CsDtype d)
{
  switch (d)
    {
    case CS_DTYPE_BF16: case CS_DTYPE_F16: return 1;
    case CS_DTYPE_F32: return 2;
    case CS_DTYPE_F64: return 3;
    case CS_DTYPE_C32: return 1;
    case CS_DTYPE_C64: return 2;
    case CS_DTYPE_C128: return 3;
    default: return 0;   /* fp8 / fp4: no width order */
    }
}

static gboolean
promote_inexact (const CsDtypeRef *a, const CsDtypeRef *b, CsDtypeRef *out, GError **error)
{
  CsDtypeRef x = *a, y = *b;
  gboolean xc = x.pytype == CS_PYTYPE_COMPLEX || (x.pytype == 0 && is_complex_dtype (x.dtype));
  gboolean yc = y.pytype == CS_PYTYPE_COMPLEX || (y.pytype == 0 && is_complex_dtype (y.dtype));
  guint sx, sy;

  /* Thunder's inexact table is not symmetric in one corner: with a weak real float as the
   * accumulated (left) dtype and a weak complex on the right, the complex wins unchanged
   * (bfloat16_ then complex32_ gives complex32_, while complex32_ then bfloat16_ gives
   * complex64_).  Mirrored as is, since the fold order is the argument order. */
  if (!xc && yc && x.pytype == 0 && x.weak && y.pytype == 0 && y.weak)
    {
      *out = y;
      return TRUE;
    }

  /* A float meeting a complex first becomes its complex counterpart, keeping its strength. */
  if (xc != yc)
    {
      CsDtypeRef *f = xc ? &y : &x;

      if (f->pytype == CS_PYTYPE_FLOAT)
        *f = mk_py (CS_PYTYPE_COMPLEX);
      else if (float_rank (f->dtype) == 0)
        return no_common (a, b, error);
      else
        f->dtype = complex_counterpart (f->dtype);
    }

  sx = ref_strength (&x);
  sy = ref_strength (&y);
  if (sx != sy)
    {
      *out = sx > sy ? x : y;
      return TRUE;
    }
  if (sx == STR_PY || x.dtype == y.dtype)
    {
      *out = x;
      return TRUE;
    }
  if (float_rank (x.dtype) == 0 || float_rank (y.dtype) == 0)
    return no_common (a, b, error);
  if (float_rank (x.dtype) == float_rank (y.dtype))
    {
      /* bf16 with f16 (both weak or both strong) gives f32 of that strength. */
      *out = mk (CS_DTYPE_F32, sx);
      return TRUE;
    }
  *out = float_rank (x.dtype) > float_rank (y.dtype) ? x : y;
  return TRUE;
}

static gboolean
promote_pair (const CsDtypeRef *a, const CsDtypeRef *b, CsDtypeRef *out, GError **error)
{
  gboolean ea = is_exact (a), eb = is_exact (b);

  if (!ea && eb)
    {
      *out = *a;
      return TRUE;
    }
  if (ea && !eb)
    {
      *out = *b;
      return TRUE;
    }
  if (ea)
    return promote_exact (a, b, out, error);
  return promote_inexact (a, b, out, error);
}

gboolean
cs_promote_dtypes (const CsDtypeRef *args, guint n, CsDtypeRef *out, GError **error)
{
  CsDtypeRef acc = mk_py (CS_PYTYPE_BOOL);

  g_return_val_if_fail (out != NULL, FALSE);
  g_return_val_if_fail (n == 0 || args != NULL, FALSE);

  if (n == 0)
    {
      g_set_error_literal (error, CS_PROMOTE_ERROR, CS_PROMOTE_ERROR_EMPTY,
                           "type promotion needs at least one argument");
      return FALSE;
    }
  for (guint i = 0; i < n; i++)
    {
      CsDtypeRef next;

      if (!promote_pair (&acc, &args[i], &next, error))
        return FALSE;
      acc = next;
    }
  *out = acc;
  return TRUE;
}

CsDtype
cs_promote_computation_dtype (CsDtype d)
{
  switch (d)
    {
    case CS_DTYPE_BF16: case CS_DTYPE_F16: return CS_DTYPE_F32;
    case CS_DTYPE_C32: return CS_DTYPE_C64;
    default: return d;
    }
}

gboolean
cs_promote_elementwise (const CsDtypeRef *args, guint n, CsPromoKind kind,
                        CsDtypeRef *computation, CsDtypeRef *result, GError **error)
{
  CsDtypeRef p, comp, res;
  gboolean p_exact, p_complex, p_bool;

  if (kind == CS_PROMO_NONE || kind > CS_PROMO_NUMBER_TO_INT)
    {
      g_set_error (error, CS_PROMOTE_ERROR, CS_PROMOTE_ERROR_KIND,
                   "not an elementwise type-promotion kind (%d)", (int) kind);
      return FALSE;
    }
  if (!cs_promote_dtypes (args, n, &p, error))
    return FALSE;

  p_exact = is_exact (&p);
  p_bool = p.pytype == CS_PYTYPE_BOOL || (p.pytype == 0 && p.dtype == CS_DTYPE_B8);
  p_complex = p.pytype == CS_PYTYPE_COMPLEX || (p.pytype == 0 && is_complex_dtype (p.dtype));

  /* DEFAULT: low-precision promotion dtypes compute in their upcast (weakness kept). */
  comp = p;
  if (p.pytype == 0)
    comp.dtype = cs_promote_computation_dtype (p.dtype);
  res = p;

  switch (kind)
    {
    case CS_PROMO_PRESERVE:
      comp = p;
      break;
    case CS_PROMO_ALWAYS_BOOL:
      comp = p;
      res = mk_py (CS_PYTYPE_BOOL);
      break;
    case CS_PROMO_INT_TO_FLOAT:
      if (p_exact)
        comp = res = mk_py (CS_PYTYPE_FLOAT);
      break;
    case CS_PROMO_COMPLEX_TO_FLOAT:
      if (p_complex)
        {
          if (p.pytype == CS_PYTYPE_COMPLEX)
            res = mk_py (CS_PYTYPE_FLOAT);
          else
            res.dtype = real_counterpart (p.dtype);
        }
      break;
    case CS_PROMO_BOOL_TO_LONG:
      if (p_bool)
        comp = res = mk_py (CS_PYTYPE_INT);
      break;
    case CS_PROMO_NUMBER_TO_INT:
      {
        gboolean all_numbers = TRUE;

        for (guint i = 0; i < n; i++)
          all_numbers = all_numbers && args[i].pytype != CS_PYTYPE_NONE;
        if (all_numbers && p.pytype == CS_PYTYPE_FLOAT)
          {
            comp = p;
            res = mk_py (CS_PYTYPE_INT);
          }
      }
      break;
    case CS_PROMO_DEFAULT:
    default:
      break;
    }

  if (computation)
    *computation = comp;
  if (result)
    *result = res;
  return TRUE;
}
