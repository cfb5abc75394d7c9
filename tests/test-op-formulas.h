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
