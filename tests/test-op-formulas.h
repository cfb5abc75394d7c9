/* test-op-formulas.h: independent f64 formulas of the unary elementwise prims, written here
 * from libm and the definitions in thunder/core/prims.py (not read from the registry), with an
 * input domain for sample values.  Shared by test-core-registry (the CPU reference against
 * them) and test-kernels-registry (the inputs of the NVRTC/GPU sweep).  A test-only header. */
#pragma once

#include <glib.h>
#include <math.h>

typedef struct
{
  const char *name;           /* the prim as printed */
  double    (*f) (double x);  /* the value torch computes, in f64 */
  double      lo, hi;         /* sample inputs in [lo, hi] (inside the domain) */
  gboolean    int_only;       /* integer operands only (bitwise_not) */
} TestFormula;

static double tf_neg (double x) { return -x; }
static double tf_reciprocal (double x) { return 1.0 / x; }
static double tf_rsqrt (double x) { return 1.0 / sqrt (x); }
static double tf_round (double x) { return nearbyint (x); }   /* half to even (torch.round) */
static double tf_sign (double x) { return x > 0 ? 1.0 : x < 0 ? -1.0 : 0.0; }
static double tf_signbit (double x) { return signbit (x) ? 1.0 : 0.0; }
static double tf_isfinite (double x) { return isfinite (x) ? 1.0 : 0.0; }
static double tf_identity (double x) { return x; }
static double tf_bitwise_not (double x) { return -x - 1.0; }  /* two's complement: ~n = -n - 1 */

static const TestFormula test_formulas[] = {
  { "prims.py_abs", fabs, -2.0, 2.0, FALSE },
  { "prims.abs", fabs, -2.0, 2.0, FALSE },
  { "prims.acos", acos, -0.9, 0.9, FALSE },
  { "prims.acosh", acosh, 1.1, 3.0, FALSE },
  { "prims.asin", asin, -0.9, 0.9, FALSE },
  { "prims.asinh", asinh, -2.0, 2.0, FALSE },
  { "prims.atan", atan, -2.0, 2.0, FALSE },
  { "prims.atanh", atanh, -0.9, 0.9, FALSE },
  { "prims.bitwise_not", tf_bitwise_not, -50, 50, TRUE },
  { "prims.ceil", ceil, -3.0, 3.0, FALSE },
  { "prims.cos", cos, -3.0, 3.0, FALSE },
  { "prims.cosh", cosh, -3.0, 3.0, FALSE },
  { "prims.erf", erf, -2.0, 2.0, FALSE },
  { "prims.erfc", erfc, -2.0, 2.0, FALSE },
  { "prims.exp", exp, -3.0, 3.0, FALSE },
  { "prims.exp2", exp2, -3.0, 3.0, FALSE },
  { "prims.expm1", expm1, -1.0, 1.0, FALSE },
  { "prims.floor", floor, -3.0, 3.0, FALSE },
  { "prims.isfinite", tf_isfinite, -3.0, 3.0, FALSE },
  { "prims.lgamma", lgamma, 0.5, 4.0, FALSE },
  { "prims.log", log, 0.1, 4.0, FALSE },
  { "prims.log10", log10, 0.1, 4.0, FALSE },
  { "prims.log1p", log1p, -0.5, 3.0, FALSE },
  { "prims.log2", log2, 0.1, 4.0, FALSE },
  { "prims.neg", tf_neg, -2.0, 2.0, FALSE },
  { "prims.reciprocal", tf_reciprocal, 0.5, 2.0, FALSE },
  { "prims.round", tf_round, -3.0, 3.0, FALSE },
  { "prims.rsqrt", tf_rsqrt, 0.1, 4.0, FALSE },
  { "prims.sign", tf_sign, -2.0, 2.0, FALSE },
  { "prims.signbit", tf_signbit, -2.0, 2.0, FALSE },
  { "prims.sin", sin, -3.0, 3.0, FALSE },
  { "prims.sinh", sinh, -3.0, 3.0, FALSE },
  { "prims.sqrt", sqrt, 0.0, 4.0, FALSE },
  { "prims.tan", tan, -1.0, 1.0, FALSE },
  { "prims.tanh", tanh, -2.0, 2.0, FALSE },
  { "prims.trunc", trunc, -3.0, 3.0, FALSE },
  { "prims.real", tf_identity, -2.0, 2.0, FALSE },
  /* CUDA only (libm has no inverse error function): domains for the GPU sweep */
  { "prims.erfinv", NULL, -0.9, 0.9, FALSE },
  { "prims.erfcinv", NULL, 0.1, 1.9, FALSE },
};

/* The entry for @name, or NULL. */
static const TestFormula *
test_formula (const char *name)
{
  for (gsize i = 0; i < G_N_ELEMENTS (test_formulas); i++)
    if (g_str_equal (test_formulas[i].name, name))
      return &test_formulas[i];
  return NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* Binary and ternary prims: independent f64 formulas, from the definitions (torch's docs and
 * thunder/core/prims.py), not from the registry's.  Sample operands lie on a dyadic grid
 * (multiples of 1/8 in ranges of a power-of-two width), where these formulas are exact. */

/* The dtypes a prim takes (bit flags) */
enum
{
  TF_FLOAT = 1 << 0,  /* float tensors */
  TF_INT   = 1 << 1,  /* integer tensors */
  TF_BOOL  = 1 << 2,  /* bool tensors (and a bool result from them) */
};

typedef struct
{
  const char *name;                 /* the prim as printed */
  guint       n;                    /* operands: 2 or 3 */
  double    (*f) (const double *x); /* the value torch computes on float operands, in f64 */
  double    (*fi) (const double *x);/* on integer and bool operands; NULL: @f */
  double      lo[3], hi[3];         /* operand k's samples in [lo[k], hi[k]] */
  guint       kinds;                /* TF_* */
  gboolean    nonzero;              /* a divisor: integer samples of the second
                                       operand avoid 0, where integers raise */
} TestFormulaN;

static double tfn_add (const double *x) { return x[0] + x[1]; }
static double tfn_sub (const double *x) { return x[0] - x[1]; }
static double tfn_mul (const double *x) { return x[0] * x[1]; }
static double tfn_div (const double *x) { return x[0] / x[1]; }
static double tfn_div_int (const double *x) { return trunc (x[0] / x[1]); } /* toward zero */
static double tfn_pow (const double *x) { return pow (x[0], x[1]); }
static double tfn_atan2 (const double *x) { return atan2 (x[0], x[1]); }
/* no NaN among the samples: fmax/fmin are torch.maximum/minimum there */
static double tfn_maximum (const double *x) { return fmax (x[0], x[1]); }
static double tfn_minimum (const double *x) { return fmin (x[0], x[1]); }
static double tfn_eq (const double *x) { return x[0] == x[1] ? 1.0 : 0.0; }
static double tfn_ne (const double *x) { return x[0] != x[1] ? 1.0 : 0.0; }
static double tfn_lt (const double *x) { return x[0] < x[1] ? 1.0 : 0.0; }
static double tfn_le (const double *x) { return x[0] <= x[1] ? 1.0 : 0.0; }
static double tfn_gt (const double *x) { return x[0] > x[1] ? 1.0 : 0.0; }
static double tfn_ge (const double *x) { return x[0] >= x[1] ? 1.0 : 0.0; }
/* torch.fmod: a - b * trunc(a / b), the sign of the dividend */
static double tfn_fmod (const double *x) { return x[0] - x[1] * trunc (x[0] / x[1]); }
/* torch.remainder (Python's %): a - b * floor(a / b), the sign of the divisor */
static double tfn_remainder (const double *x) { return x[0] - x[1] * floor (x[0] / x[1]); }
static double tfn_nextafter (const double *x) { return nextafter (x[0], x[1]); }
static double tfn_and (const double *x) { return (double) ((gint64) x[0] & (gint64) x[1]); }
static double tfn_or (const double *x) { return (double) ((gint64) x[0] | (gint64) x[1]); }
static double tfn_xor (const double *x) { return (double) ((gint64) x[0] ^ (gint64) x[1]); }
/* shifts as arithmetic: a * 2^b, and floor(a / 2^b) (the sign fills in) */
static double tfn_lshift (const double *x) { return ldexp (x[0], (int) x[1]); }
static double tfn_rshift (const double *x) { return floor (ldexp (x[0], -(int) x[1])); }
static double tfn_where (const double *x) { return x[0] != 0 ? x[1] : x[2]; }
/* lerp(start, end, weight) = (1 - w) start + w end (exact on the grid) */
static double tfn_lerp (const double *x) { return (1.0 - x[2]) * x[0] + x[2] * x[1]; }

#define TF_ALL (TF_FLOAT | TF_INT)
#define TF_CMP (TF_FLOAT | TF_INT | TF_BOOL)
#define TF_BITS (TF_INT | TF_BOOL)

static const TestFormulaN test_formulas_n[] = {
  { "prims.add", 2, tfn_add, NULL, { -4, -2 }, { 4, 2 }, TF_ALL, FALSE },
  { "prims.sub", 2, tfn_sub, NULL, { -4, -2 }, { 4, 2 }, TF_ALL, FALSE },
  { "prims.mul", 2, tfn_mul, NULL, { -4, -2 }, { 4, 2 }, TF_ALL, FALSE },
  { "prims.div", 2, tfn_div, tfn_div_int, { -8, -4 }, { 8, 4 }, TF_ALL, TRUE },
  { "prims.pow", 2, tfn_pow, NULL, { 0.5, 0 }, { 2.5, 4 }, TF_ALL, FALSE },
  { "prims.atan2", 2, tfn_atan2, NULL, { -2, -2 }, { 2, 2 }, TF_FLOAT, FALSE },
  { "prims.maximum", 2, tfn_maximum, NULL, { -4, -4 }, { 4, 4 }, TF_ALL, FALSE },
  { "prims.minimum", 2, tfn_minimum, NULL, { -4, -4 }, { 4, 4 }, TF_ALL, FALSE },
  { "prims.eq", 2, tfn_eq, NULL, { -2, -2 }, { 2, 2 }, TF_CMP, FALSE },
  { "prims.ne", 2, tfn_ne, NULL, { -2, -2 }, { 2, 2 }, TF_CMP, FALSE },
  { "prims.lt", 2, tfn_lt, NULL, { -2, -2 }, { 2, 2 }, TF_CMP, FALSE },
  { "prims.le", 2, tfn_le, NULL, { -2, -2 }, { 2, 2 }, TF_CMP, FALSE },
  { "prims.gt", 2, tfn_gt, NULL, { -2, -2 }, { 2, 2 }, TF_CMP, FALSE },
  { "prims.ge", 2, tfn_ge, NULL, { -2, -2 }, { 2, 2 }, TF_CMP, FALSE },
  { "prims.fmod", 2, tfn_fmod, NULL, { -8, -4 }, { 8, 4 }, TF_ALL, TRUE },
  { "prims.remainder", 2, tfn_remainder, NULL, { -8, -4 }, { 8, 4 }, TF_ALL, TRUE },
  { "prims.nextafter", 2, tfn_nextafter, NULL, { -2, -2 }, { 2, 2 }, TF_FLOAT, FALSE },
  { "prims.bitwise_and", 2, NULL, tfn_and, { -5, -4 }, { 3, 4 }, TF_BITS, FALSE },
  { "prims.bitwise_or", 2, NULL, tfn_or, { -5, -4 }, { 3, 4 }, TF_BITS, FALSE },
  { "prims.bitwise_xor", 2, NULL, tfn_xor, { -5, -4 }, { 3, 4 }, TF_BITS, FALSE },
  { "prims.bitwise_left_shift", 2, NULL, tfn_lshift, { -64, 0 }, { 64, 8 }, TF_INT, FALSE },
  { "prims.bitwise_right_shift", 2, NULL, tfn_rshift, { -64, 0 }, { 64, 8 }, TF_INT, FALSE },
  { "prims.where", 3, tfn_where, NULL, { 0, -4, -2 }, { 1, 4, 2 }, TF_CMP, FALSE },
  { "prims.lerp", 3, tfn_lerp, NULL, { -4, -2, 0 }, { 4, 2, 1 }, TF_FLOAT, FALSE },
};

/* The entry for @name, or NULL. */
static const TestFormulaN *
test_formula_n (const char *name)
{
  for (gsize i = 0; i < G_N_ELEMENTS (test_formulas_n); i++)
    if (g_str_equal (test_formulas_n[i].name, name))
      return &test_formulas_n[i];
  return NULL;
}

/* Operand @k's sample @e of @n in [lo, hi]: on the grid of (hi - lo) / 2^m, 2^m the power of
 * two from n - 1 up (9 samples: eighths of the range), so every sample is exact in bf16;
 * operands walk the grid in different orders (strides 1, 5, 7, coprime to 9 and to powers of
 * two) so that they meet in many pairs.  Integer samples are rounded (a nonzero divisor moved
 * off 0 to hi), bool ones (and where's predicate) 0 or 1. */
static double
test_sample_n (const TestFormulaN *f, guint k, guint e, guint n, guint kind)
{
  static const guint stride[3] = { 1, 5, 7 };
  guint d = 1;
  double v;

  while (d < n - 1)
    d *= 2;
  v = f->lo[k] + (f->hi[k] - f->lo[k]) * (double) ((e * stride[k]) % n) / d;
  if (kind == TF_BOOL || (k == 0 && g_str_equal (f->name, "prims.where")))
    return ((e * stride[k] + k) % 3) == 0 ? 1.0 : 0.0;
  if (kind == TF_INT)
    {
      v = nearbyint (v);
      if (k == 1 && f->nonzero && v == 0)
        v = f->hi[k];
    }
  return v;
}
