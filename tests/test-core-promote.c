/* test-core-promote.c: Thunder's elementwise type promotion (core/cs-promote.c).
 *
 * Expected values come from PyTorch's documented examples (torch.result_type docs and the
 * "Type promotion" section of the tensor attributes docs), from the entries of Thunder's
 * promotion tables in thunder/core/utils.py where Thunder deliberately differs, and from
 * reference/thunder-traces.md 2.2-2.3.
 */
#include "cs-config.h"

#include "cs-promote.h"

static CsDtypeRef
T (CsDtype d)          /* a tensor of rank >= 1 */
{
  return cs_promote_arg_tensor (d, 2);
}

static CsDtypeRef
Z (CsDtype d)          /* a 0-d tensor */
{
  return cs_promote_arg_tensor (d, 0);
}

static CsDtypeRef
N (CsPyType t)         /* a Python number */
{
  return cs_promote_arg_number (t);
}

static void
assert_ref (CsDtypeRef got, CsDtype dtype, gboolean weak, CsPyType pytype)
{
  g_assert_cmpint (got.pytype, ==, pytype);
  g_assert_cmpint (got.dtype, ==, dtype);
  g_assert_cmpint (got.weak, ==, weak ? 1 : 0);
}

static CsDtypeRef
promote2 (CsDtypeRef a, CsDtypeRef b)
{
  CsDtypeRef args[2] = { a, b }, out;
  g_autoptr (GError) error = NULL;

  g_assert_true (cs_promote_dtypes (args, 2, &out, &error));
  g_assert_no_error (error);
  return out;
}

/* PyTorch docs, "Type promotion" examples: int_tensor + 5 -> int32, int_tensor + long_zerodim
 * -> int32, long_tensor + int_tensor -> int64, bool_tensor + long_tensor -> int64,
 * bool_tensor + uint_tensor -> uint8, float_tensor + double_tensor -> float64,
 * complex_float + complex_double -> complex128, bool_tensor + int_tensor -> int32,
 * long_tensor + float_tensor -> float32. */
static void
test_pytorch_doc_examples (void)
{
  assert_ref (promote2 (T (CS_DTYPE_I32), N (CS_PYTYPE_INT)), CS_DTYPE_I32, FALSE, 0);
  assert_ref (promote2 (T (CS_DTYPE_I32), Z (CS_DTYPE_I64)), CS_DTYPE_I32, FALSE, 0);
  assert_ref (promote2 (T (CS_DTYPE_I64), T (CS_DTYPE_I32)), CS_DTYPE_I64, FALSE, 0);
  assert_ref (promote2 (T (CS_DTYPE_B8), T (CS_DTYPE_I64)), CS_DTYPE_I64, FALSE, 0);
  assert_ref (promote2 (T (CS_DTYPE_B8), T (CS_DTYPE_U8)), CS_DTYPE_U8, FALSE, 0);
  assert_ref (promote2 (T (CS_DTYPE_F32), T (CS_DTYPE_F64)), CS_DTYPE_F64, FALSE, 0);
  assert_ref (promote2 (T (CS_DTYPE_C64), T (CS_DTYPE_C128)), CS_DTYPE_C128, FALSE, 0);
  assert_ref (promote2 (T (CS_DTYPE_B8), T (CS_DTYPE_I32)), CS_DTYPE_I32, FALSE, 0);
  assert_ref (promote2 (T (CS_DTYPE_I64), T (CS_DTYPE_F32)), CS_DTYPE_F32, FALSE, 0);
  /* uint8 + int8 -> int16 */
  assert_ref (promote2 (T (CS_DTYPE_U8), T (CS_DTYPE_I8)), CS_DTYPE_I16, FALSE, 0);
  /* torch.result_type(int tensor, 1.0) -> float32: Thunder says Python float (weak f32) */
  assert_ref (promote2 (T (CS_DTYPE_I32), N (CS_PYTYPE_FLOAT)), CS_DTYPE_F32, TRUE,
              CS_PYTYPE_FLOAT);
  /* float tensor + 0-d double tensor stays float32 (a weak dtype never upcasts a strong one) */
  assert_ref (promote2 (T (CS_DTYPE_F32), Z (CS_DTYPE_F64)), CS_DTYPE_F32, FALSE, 0);
}

static void
test_low_precision (void)
{
  /* bf16 + f16 -> f32 */
  assert_ref (promote2 (T (CS_DTYPE_BF16), T (CS_DTYPE_F16)), CS_DTYPE_F32, FALSE, 0);
  assert_ref (promote2 (T (CS_DTYPE_F16), T (CS_DTYPE_BF16)), CS_DTYPE_F32, FALSE, 0);
  /* bf16 tensor * 2.0 stays bf16 */
  assert_ref (promote2 (T (CS_DTYPE_BF16), N (CS_PYTYPE_FLOAT)), CS_DTYPE_BF16, FALSE, 0);
  /* 0-d f32 tensor with a bf16 tensor stays bf16 */
  assert_ref (promote2 (Z (CS_DTYPE_F32), T (CS_DTYPE_BF16)), CS_DTYPE_BF16, FALSE, 0);
  /* weak bf16 with weak f16 gives weak f32 (two 0-d tensors) */
  assert_ref (promote2 (Z (CS_DTYPE_BF16), Z (CS_DTYPE_F16)), CS_DTYPE_F32, TRUE, 0);
  /* weak f64 (0-d) with Python float stays weak f64 */
  assert_ref (promote2 (Z (CS_DTYPE_F64), N (CS_PYTYPE_FLOAT)), CS_DTYPE_F64, TRUE, 0);
  /* bf16 with f32 tensor -> f32 */
  assert_ref (promote2 (T (CS_DTYPE_BF16), T (CS_DTYPE_F32)), CS_DTYPE_F32, FALSE, 0);
  /* an int tensor with a bf16 tensor -> bf16 (inexact beats exact) */
  assert_ref (promote2 (T (CS_DTYPE_I64), T (CS_DTYPE_BF16)), CS_DTYPE_BF16, FALSE, 0);
}

/* Entries where Thunder's lattice is not PyTorch's (thunder/core/utils.py tables). */
static void
test_thunder_specific (void)
{
  /* u8 with a 0-d int64 tensor: PyTorch's result_type gives uint8, Thunder's table int16 */
  assert_ref (promote2 (T (CS_DTYPE_U8), Z (CS_DTYPE_I64)), CS_DTYPE_I16, FALSE, 0);
  /* u8 with a strong int32 gives int32 */
  assert_ref (promote2 (T (CS_DTYPE_U8), T (CS_DTYPE_I32)), CS_DTYPE_I32, FALSE, 0);
  /* a bool tensor with a Python int gives weak int8 */
  assert_ref (promote2 (T (CS_DTYPE_B8), N (CS_PYTYPE_INT)), CS_DTYPE_I8, TRUE, 0);
  /* Python bool with Python int gives Python int */
  assert_ref (promote2 (N (CS_PYTYPE_BOOL), N (CS_PYTYPE_INT)), CS_DTYPE_I64, TRUE,
              CS_PYTYPE_INT);
  /* strong int8 beats weak int16 */
  assert_ref (promote2 (T (CS_DTYPE_I8), Z (CS_DTYPE_I16)), CS_DTYPE_I8, FALSE, 0);
  /* complex: a strong f16 with a weak complex64 gives strong complex32 */
  assert_ref (promote2 (T (CS_DTYPE_F16), Z (CS_DTYPE_C64)), CS_DTYPE_C32, FALSE, 0);
  /* complex32 with bf16 gives complex64 */
  assert_ref (promote2 (T (CS_DTYPE_C32), T (CS_DTYPE_BF16)), CS_DTYPE_C64, FALSE, 0);
  /* Python complex with a weak bf16 gives weak complex64 */
  assert_ref (promote2 (N (CS_PYTYPE_COMPLEX), Z (CS_DTYPE_BF16)), CS_DTYPE_C64, TRUE, 0);
  /* the one asymmetric corner of Thunder's inexact table: weak bf16 then weak complex32 gives
   * complex32_, the other order complex64_ */
  assert_ref (promote2 (Z (CS_DTYPE_BF16), Z (CS_DTYPE_C32)), CS_DTYPE_C32, TRUE, 0);
  assert_ref (promote2 (Z (CS_DTYPE_C32), Z (CS_DTYPE_BF16)), CS_DTYPE_C64, TRUE, 0);
  /* Python float with Python complex gives Python complex */
  assert_ref (promote2 (N (CS_PYTYPE_FLOAT), N (CS_PYTYPE_COMPLEX)), CS_DTYPE_C64, TRUE,
              CS_PYTYPE_COMPLEX);
}

static void
test_errors (void)
{
  CsDtypeRef args[2] = { T (CS_DTYPE_F8_E4M3FN), T (CS_DTYPE_F8_E5M2) }, out;
  g_autoptr (GError) error = NULL;

  g_assert_false (cs_promote_dtypes (args, 2, &out, &error));
  g_assert_error (error, CS_PROMOTE_ERROR, CS_PROMOTE_ERROR_NO_COMMON);
  g_assert_nonnull (strstr (error->message, "float8_e4m3fn"));
  g_clear_error (&error);

  args[1] = T (CS_DTYPE_F32);
  g_assert_false (cs_promote_dtypes (args, 2, &out, &error));
  g_assert_error (error, CS_PROMOTE_ERROR, CS_PROMOTE_ERROR_NO_COMMON);
  g_clear_error (&error);

  g_assert_false (cs_promote_dtypes (args, 0, &out, &error));
  g_assert_error (error, CS_PROMOTE_ERROR, CS_PROMOTE_ERROR_EMPTY);
  g_clear_error (&error);

  g_assert_false (cs_promote_elementwise (args, 1, CS_PROMO_NONE, NULL, NULL, &error));
  g_assert_error (error, CS_PROMOTE_ERROR, CS_PROMOTE_ERROR_KIND);
}

static void
elementwise (CsPromoKind kind, CsDtypeRef a, CsDtypeRef *b, CsDtypeRef *comp, CsDtypeRef *res)
{
  CsDtypeRef args[2] = { a, b ? *b : a };
  g_autoptr (GError) error = NULL;

  g_assert_true (cs_promote_elementwise (args, b ? 2 : 1, kind, comp, res, &error));
  g_assert_no_error (error);
}

static void
test_kinds (void)
{
  CsDtypeRef comp, res, b;

  /* DEFAULT: bf16 + bf16 computes in f32, returns bf16 */
  b = T (CS_DTYPE_BF16);
  elementwise (CS_PROMO_DEFAULT, T (CS_DTYPE_BF16), &b, &comp, &res);
  assert_ref (comp, CS_DTYPE_F32, FALSE, 0);
  assert_ref (res, CS_DTYPE_BF16, FALSE, 0);
  /* DEFAULT: f16 * 2.0 computes in f32, returns f16 */
  b = N (CS_PYTYPE_FLOAT);
  elementwise (CS_PROMO_DEFAULT, T (CS_DTYPE_F16), &b, &comp, &res);
  assert_ref (comp, CS_DTYPE_F32, FALSE, 0);
  assert_ref (res, CS_DTYPE_F16, FALSE, 0);
  /* DEFAULT on two weak bf16: weak f32 computation */
  b = Z (CS_DTYPE_BF16);
  elementwise (CS_PROMO_DEFAULT, Z (CS_DTYPE_BF16), &b, &comp, &res);
  assert_ref (comp, CS_DTYPE_F32, TRUE, 0);
  assert_ref (res, CS_DTYPE_BF16, TRUE, 0);
  /* DEFAULT on ints: no change */
  b = N (CS_PYTYPE_INT);
  elementwise (CS_PROMO_DEFAULT, T (CS_DTYPE_I32), &b, &comp, &res);
  assert_ref (comp, CS_DTYPE_I32, FALSE, 0);
  assert_ref (res, CS_DTYPE_I32, FALSE, 0);
  /* DEFAULT on fp8: not upcast */
  elementwise (CS_PROMO_DEFAULT, T (CS_DTYPE_F8_E4M3FN), NULL, &comp, &res);
  assert_ref (comp, CS_DTYPE_F8_E4M3FN, FALSE, 0);
  assert_ref (res, CS_DTYPE_F8_E4M3FN, FALSE, 0);

  /* INT_TO_FLOAT: exp of an int64 tensor is Python float (f32 tensors); of bf16 is f32/bf16;
   * of a bool tensor is float too (bools are exact). */
  elementwise (CS_PROMO_INT_TO_FLOAT, T (CS_DTYPE_I64), NULL, &comp, &res);
  assert_ref (comp, CS_DTYPE_F32, TRUE, CS_PYTYPE_FLOAT);
  assert_ref (res, CS_DTYPE_F32, TRUE, CS_PYTYPE_FLOAT);
  elementwise (CS_PROMO_INT_TO_FLOAT, T (CS_DTYPE_B8), NULL, &comp, &res);
  assert_ref (res, CS_DTYPE_F32, TRUE, CS_PYTYPE_FLOAT);
  elementwise (CS_PROMO_INT_TO_FLOAT, T (CS_DTYPE_BF16), NULL, &comp, &res);
  assert_ref (comp, CS_DTYPE_F32, FALSE, 0);
  assert_ref (res, CS_DTYPE_BF16, FALSE, 0);
  elementwise (CS_PROMO_INT_TO_FLOAT, T (CS_DTYPE_F64), NULL, &comp, &res);
  assert_ref (comp, CS_DTYPE_F64, FALSE, 0);

  /* ALWAYS_BOOL: comparisons do not upcast */
  b = T (CS_DTYPE_BF16);
  elementwise (CS_PROMO_ALWAYS_BOOL, T (CS_DTYPE_BF16), &b, &comp, &res);
  assert_ref (comp, CS_DTYPE_BF16, FALSE, 0);
  assert_ref (res, CS_DTYPE_B8, TRUE, CS_PYTYPE_BOOL);

  /* PRESERVE: where keeps bf16 */
  b = N (CS_PYTYPE_FLOAT);
  elementwise (CS_PROMO_PRESERVE, T (CS_DTYPE_BF16), &b, &comp, &res);
  assert_ref (comp, CS_DTYPE_BF16, FALSE, 0);
  assert_ref (res, CS_DTYPE_BF16, FALSE, 0);

  /* COMPLEX_TO_FLOAT: abs(c64) -> (c64, f32); abs(c32) -> (c64, f16); abs(bf16) = DEFAULT */
  elementwise (CS_PROMO_COMPLEX_TO_FLOAT, T (CS_DTYPE_C64), NULL, &comp, &res);
  assert_ref (comp, CS_DTYPE_C64, FALSE, 0);
  assert_ref (res, CS_DTYPE_F32, FALSE, 0);
  elementwise (CS_PROMO_COMPLEX_TO_FLOAT, T (CS_DTYPE_C32), NULL, &comp, &res);
  assert_ref (comp, CS_DTYPE_C64, FALSE, 0);
  assert_ref (res, CS_DTYPE_F16, FALSE, 0);
  elementwise (CS_PROMO_COMPLEX_TO_FLOAT, T (CS_DTYPE_BF16), NULL, &comp, &res);
  assert_ref (comp, CS_DTYPE_F32, FALSE, 0);
  assert_ref (res, CS_DTYPE_BF16, FALSE, 0);

  /* BOOL_TO_LONG: pow(bool, bool) -> (int, int); pow(bf16, 2.0) -> (f32, bf16) */
  b = T (CS_DTYPE_B8);
  elementwise (CS_PROMO_BOOL_TO_LONG, T (CS_DTYPE_B8), &b, &comp, &res);
  assert_ref (comp, CS_DTYPE_I64, TRUE, CS_PYTYPE_INT);
  assert_ref (res, CS_DTYPE_I64, TRUE, CS_PYTYPE_INT);
  b = N (CS_PYTYPE_FLOAT);
  elementwise (CS_PROMO_BOOL_TO_LONG, T (CS_DTYPE_BF16), &b, &comp, &res);
  assert_ref (comp, CS_DTYPE_F32, FALSE, 0);
  assert_ref (res, CS_DTYPE_BF16, FALSE, 0);

  /* NUMBER_TO_INT: floor(2.5) -> int; floor(f32 tensor) -> f32 */
  elementwise (CS_PROMO_NUMBER_TO_INT, N (CS_PYTYPE_FLOAT), NULL, &comp, &res);
  assert_ref (comp, CS_DTYPE_F32, TRUE, CS_PYTYPE_FLOAT);
  assert_ref (res, CS_DTYPE_I64, TRUE, CS_PYTYPE_INT);
  elementwise (CS_PROMO_NUMBER_TO_INT, T (CS_DTYPE_F32), NULL, &comp, &res);
  assert_ref (res, CS_DTYPE_F32, FALSE, 0);
}

static void
test_computation_dtype (void)
{
  g_assert_cmpint (cs_promote_computation_dtype (CS_DTYPE_BF16), ==, CS_DTYPE_F32);
  g_assert_cmpint (cs_promote_computation_dtype (CS_DTYPE_F16), ==, CS_DTYPE_F32);
  g_assert_cmpint (cs_promote_computation_dtype (CS_DTYPE_C32), ==, CS_DTYPE_C64);
  g_assert_cmpint (cs_promote_computation_dtype (CS_DTYPE_F32), ==, CS_DTYPE_F32);
  g_assert_cmpint (cs_promote_computation_dtype (CS_DTYPE_F64), ==, CS_DTYPE_F64);
  g_assert_cmpint (cs_promote_computation_dtype (CS_DTYPE_F8_E5M2), ==, CS_DTYPE_F8_E5M2);
  g_assert_cmpint (cs_promote_computation_dtype (CS_DTYPE_I32), ==, CS_DTYPE_I32);
}

static void
test_fold (void)
{
  /* where(bool tensor, bf16 tensor, 0-d f32 tensor) folds to bf16 */
  CsDtypeRef args[3] = { T (CS_DTYPE_B8), T (CS_DTYPE_BF16), Z (CS_DTYPE_F32) }, out;
  g_autoptr (GError) error = NULL;

  g_assert_true (cs_promote_dtypes (args, 3, &out, &error));
  assert_ref (out, CS_DTYPE_BF16, FALSE, 0);
  /* one Python int alone stays Python int */
  args[0] = N (CS_PYTYPE_INT);
  g_assert_true (cs_promote_dtypes (args, 1, &out, &error));
  assert_ref (out, CS_DTYPE_I64, TRUE, CS_PYTYPE_INT);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, G_TEST_OPTION_ISOLATE_DIRS, NULL);

  g_test_add_func ("/core/promote/lattice/pytorch-docs", test_pytorch_doc_examples);
  g_test_add_func ("/core/promote/lattice/low-precision", test_low_precision);
  g_test_add_func ("/core/promote/lattice/thunder-specific", test_thunder_specific);
  g_test_add_func ("/core/promote/lattice/fold", test_fold);
  g_test_add_func ("/core/promote/errors", test_errors);
  g_test_add_func ("/core/promote/kinds", test_kinds);
  g_test_add_func ("/core/promote/computation-dtype", test_computation_dtype);

  return g_test_run ();
}
