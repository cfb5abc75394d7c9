/* test-core-accuracy.c: the accuracy verdict (core/cs-compare.h, cs_accuracy_judge()).
 *
 * Hand-made cases of PyTorch's fp64-reference rule (torch._dynamo.utils.same): a bf16 matmul
 * computed as a GPU would (f32 accumulation, one rounding) against its f64 truth and against
 * an exact-dtype reference that accumulates in another order; the same matmul with its error
 * scaled by 2 (within k = 3: passes) and by 10 (fails); NaN and inf in the same places (pass)
 * and in one run only (fail); one injected wrong element (fail); integers; the rule's
 * constants.  Every expected value is computed here, independently of the code under test.
 */
#include "cs-config.h"

#include <math.h>
#include <string.h>

#include "cs-compare.h"
#include "cs-half.h"
#include "cs-tensor.h"

#define M 32
#define N 40
#define K 64

typedef struct
{
  CsTensor *gpu;     /* bf16[M, N]: f32 accumulation in k order, rounded once */
  CsTensor *ref;     /* bf16[M, N]: f32 accumulation in reverse k order, rounded once */
  CsTensor *f64;     /* f64[M, N]: the exact product */
} Matmul;

static void
matmul_clear (Matmul *m)
{
  g_clear_pointer (&m->gpu, cs_tensor_unref);
  g_clear_pointer (&m->ref, cs_tensor_unref);
  g_clear_pointer (&m->f64, cs_tensor_unref);
}

static void
matmul_make (Matmul *m)
{
  const int64_t sa[2] = { M, K }, sb[2] = { K, N }, so[2] = { M, N };
  g_autoptr(CsTensor) a = cs_tensor_new (CS_DTYPE_BF16, sa, 2, NULL);
  g_autoptr(CsTensor) b = cs_tensor_new (CS_DTYPE_BF16, sb, 2, NULL);

  /* operands ~ normal(0, 1/sqrt(K)) in bf16: outputs of about unit size */
  cs_tensor_fill_random (a, 11, 1.0 / sqrt (K), 0);
  cs_tensor_fill_random (b, 12, 1.0, 0);
  m->gpu = cs_tensor_new (CS_DTYPE_BF16, so, 2, NULL);
  m->ref = cs_tensor_new (CS_DTYPE_BF16, so, 2, NULL);
  m->f64 = cs_tensor_new (CS_DTYPE_F64, so, 2, NULL);
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++)
      {
        float up = 0, down = 0;
        double exact = 0;

        for (int k = 0; k < K; k++)
          {
            float x = (float) cs_tensor_get_f64 (a, i * K + k), y = (float) cs_tensor_get_f64 (b, k * N + j);
            float xr = (float) cs_tensor_get_f64 (a, i * K + K - 1 - k);
            float yr = (float) cs_tensor_get_f64 (b, (K - 1 - k) * N + j);

            up += x * y;
            down += xr * yr;
            exact += (double) x * (double) y;   /* bf16 * bf16 is exact in f64 */
          }
        cs_tensor_set_f64 (m->gpu, i * N + j, up);
        cs_tensor_set_f64 (m->ref, i * N + j, down);
        cs_tensor_set_f64 (m->f64, i * N + j, exact);
      }
}

/* RMSE of @x against @t, computed here. */
static double
rmse (const CsTensor *x, const CsTensor *t)
{
  double s = 0;

  for (int64_t i = 0; i < t->numel; i++)
    {
      double d = cs_tensor_get_f64 (x, i) - cs_tensor_get_f64 (t, i);
      s += d * d;
    }
  return sqrt (s / (double) t->numel);
}

/* f64 + s * (ref - f64) in @dt: an error s times the reference's (exactly so in f32, which
 * holds these values to 2^-24 relative; about so in bf16, whose last rounding adds up to half
 * an ulp). */
static CsTensor *
scaled_error (const Matmul *m, double s, CsDtype dt)
{
  CsTensor *x = cs_tensor_new (dt, m->f64->shape, 2, NULL);

  for (int64_t i = 0; i < x->numel; i++)
    {
      double t = cs_tensor_get_f64 (m->f64, i);
      cs_tensor_set_f64 (x, i, t + s * (cs_tensor_get_f64 (m->ref, i) - t));
    }
  return x;
}

static void
test_rule (void)
{
  CsAccuracyRule r;

  /* bf16 and f16: multiplier 3, tol 1e-3 (AMP), atol tol / 10 */
  cs_accuracy_rule (CS_DTYPE_BF16, 1 << 20, FALSE, &r);
  g_assert_cmpfloat (r.k, ==, 3.0);
  g_assert_cmpfloat (r.tol, ==, 1e-3);
  g_assert_cmpfloat (r.atol, ==, 1e-4);
  cs_accuracy_rule (CS_DTYPE_F16, 1 << 20, TRUE, &r);
  g_assert_cmpfloat (r.k, ==, 3.0);
  /* f32: multiplier 2; tol 1e-3 training, 1e-4 forward only */
  cs_accuracy_rule (CS_DTYPE_F32, 1000, TRUE, &r);
  g_assert_cmpfloat (r.k, ==, 2.0);
  g_assert_cmpfloat (r.tol, ==, 1e-3);
  cs_accuracy_rule (CS_DTYPE_F32, 1000, FALSE, &r);
  g_assert_cmpfloat (r.tol, ==, 1e-4);
  g_assert_cmpfloat (r.atol, ==, 1e-5);
  /* fewer than 1000 elements: multiplier 3 */
  cs_accuracy_rule (CS_DTYPE_F32, 999, TRUE, &r);
  g_assert_cmpfloat (r.k, ==, 3.0);
  /* integers: exact */
  cs_accuracy_rule (CS_DTYPE_I64, 10, TRUE, &r);
  g_assert_cmpfloat (r.k, ==, 0.0);
  g_assert_cmpfloat (r.tol, ==, 0.0);
}

/* The matmul as a GPU computes it, judged against a reference in another summation order:
 * both errors are one bf16 rounding of the output, so the ratio is near 1 and it passes. */
static void
test_bf16_matmul_passes (void)
{
  Matmul m = { 0 };
  CsAccuracy acc;
  double want_err, want_ref;

  matmul_make (&m);
  want_err = rmse (m.gpu, m.f64);
  want_ref = rmse (m.ref, m.f64);
  /* one bf16 rounding of unit-size values: RMSE between 2^-11 and 2^-8 */
  g_assert_cmpfloat (want_ref, >, 0x1p-11);
  g_assert_cmpfloat (want_ref, <, 0x1p-8);
  cs_accuracy_judge (m.gpu, m.ref, m.f64, NULL, &acc);
  g_assert_cmpfloat_with_epsilon (acc.err, want_err, 1e-15);
  g_assert_cmpfloat_with_epsilon (acc.ref_err, want_ref, 1e-15);
  g_assert_cmpfloat_with_epsilon (acc.ratio, want_err / want_ref, 1e-12);
  g_assert_cmpfloat_with_epsilon (acc.bound, 3.0 * want_ref + 1e-4, 1e-15);
  g_assert_cmpint (acc.ref_kind, ==, CS_ACCURACY_REF_EXACT);
  g_assert_cmpint (acc.n, ==, M * N);
  g_assert_cmpint (acc.n_compared, ==, M * N);
  g_assert_cmpint (acc.n_nonfinite_mismatch, ==, 0);
  g_assert_cmpfloat (acc.ratio, >, 0.5);
  g_assert_cmpfloat (acc.ratio, <, 2.0);
  g_assert_true (acc.pass);
  g_assert_cmpfloat (cs_accuracy_margin (&acc), <, 1.0);
  matmul_clear (&m);
}

/* The bf16 matmul's rule (k = 3): errors of 2 and 2.9 times the exact-dtype error pass, 3.5 and
 * 10 times it fail (the results are held in f32 so the error is exactly that multiple). */
static void
test_bf16_matmul_scaled (void)
{
  Matmul m = { 0 };
  CsAccuracyRule rule;
  CsAccuracy acc;
  const double pass[2] = { 2.0, 2.9 }, fail[2] = { 3.5, 10.0 };
  double ref;

  matmul_make (&m);
  ref = rmse (m.ref, m.f64);
  cs_accuracy_rule (CS_DTYPE_BF16, M * N, TRUE, &rule);
  for (guint c = 0; c < 2; c++)
    {
      g_autoptr(CsTensor) x = scaled_error (&m, pass[c], CS_DTYPE_F32);

      cs_accuracy_judge (x, m.ref, m.f64, &rule, &acc);
      g_assert_cmpfloat_with_epsilon (acc.err, rmse (x, m.f64), 1e-15);
      g_assert_cmpfloat_with_epsilon (acc.ratio, pass[c], 1e-3);
      g_assert_cmpfloat (acc.err, <=, 3.0 * ref + 1e-4);
      g_assert_true (acc.pass);
    }
  for (guint c = 0; c < 2; c++)
    {
      g_autoptr(CsTensor) x = scaled_error (&m, fail[c], CS_DTYPE_F32);

      cs_accuracy_judge (x, m.ref, m.f64, &rule, &acc);
      g_assert_cmpfloat_with_epsilon (acc.ratio, fail[c], 1e-3);
      /* 3.5 x ref exceeds 3 x ref + 1e-4 since ref > 2^-11 (test_bf16_matmul_passes) */
      g_assert_cmpfloat (acc.err, >, 3.0 * ref + 1e-4);
      g_assert_false (acc.allclose);
      g_assert_false (acc.pass);
      g_assert_cmpfloat (cs_accuracy_margin (&acc), >, 1.0);
    }
  /* ten times the error in a bf16 result (rounded again): still fails under its own rule */
  {
    g_autoptr(CsTensor) x = scaled_error (&m, 10.0, CS_DTYPE_BF16);

    cs_accuracy_judge (x, m.ref, m.f64, NULL, &acc);
    g_assert_cmpfloat (acc.rule.k, ==, 3.0);
    g_assert_cmpfloat (acc.ratio, >, 8.0);
    g_assert_false (acc.pass);
  }
  matmul_clear (&m);
}

/* One wrong element (a kernel bug: 1.0 added at [3, 7]) fails the verdict. */
static void
test_injected_error_fails (void)
{
  Matmul m = { 0 };
  g_autoptr(CsTensor) bad = NULL;
  CsAccuracy acc;
  int64_t at = 3 * N + 7;

  matmul_make (&m);
  bad = cs_tensor_copy (m.gpu);
  cs_tensor_set_f64 (bad, at, cs_tensor_get_f64 (bad, at) + 1.0);
  cs_accuracy_judge (bad, m.ref, m.f64, NULL, &acc);
  /* the one element alone contributes sqrt(1 / (M N)) = 0.025 to the RMSE */
  g_assert_cmpfloat (acc.err, >, sqrt (1.0 / (M * N)) * 0.9);
  g_assert_false (acc.allclose);
  g_assert_false (acc.pass);
  /* the same tensor is fine without the injection */
  cs_accuracy_judge (m.gpu, m.ref, m.f64, NULL, &acc);
  g_assert_true (acc.pass);
  matmul_clear (&m);
}

static CsTensor *
vec (CsDtype dt, const double *v, int n)
{
  const int64_t shape[1] = { n };

  return cs_tensor_new_from_f64 (dt, shape, 1, v, NULL);
}

/* NaN and inf where the reference has them too agree (issue 21 item 7); in one run only, or
 * with the other sign, they fail. */
static void
test_nonfinite (void)
{
  const double xs[4] = { NAN, 1.0, 2.0, INFINITY };
  const double rs[4] = { NAN, 1.0, 2.0, INFINITY };
  const double ts[4] = { 5.0, 1.0, 2.0, 1e300 };
  const double r1[4] = { 1.0, 1.0, 2.0, INFINITY };
  g_autoptr(CsTensor) x = vec (CS_DTYPE_BF16, xs, 4);
  g_autoptr(CsTensor) r = vec (CS_DTYPE_BF16, rs, 4);
  g_autoptr(CsTensor) t = vec (CS_DTYPE_F64, ts, 4);
  g_autoptr(CsTensor) rone = vec (CS_DTYPE_BF16, r1, 4);
  CsAccuracy acc;

  /* same NaN and same inf positions: pass, the two finite elements are exact */
  cs_accuracy_judge (x, r, t, NULL, &acc);
  g_assert_cmpint (acc.n_nonfinite, ==, 2);
  g_assert_cmpint (acc.n_nonfinite_mismatch, ==, 0);
  g_assert_cmpint (acc.n_compared, ==, 2);
  g_assert_cmpfloat (acc.err, ==, 0.0);
  g_assert_true (acc.pass);

  /* NaN in the run under test only: fails, with a NaN error */
  cs_accuracy_judge (x, rone, t, NULL, &acc);
  g_assert_cmpint (acc.n_nonfinite_mismatch, ==, 1);
  g_assert_true (isnan (acc.err));
  g_assert_false (acc.pass);
  /* ... or in the reference only */
  cs_accuracy_judge (rone, x, t, NULL, &acc);
  g_assert_cmpint (acc.n_nonfinite_mismatch, ==, 1);
  g_assert_false (acc.pass);
  /* +inf against -inf: fails, with an infinite error */
  {
    const double xi[4] = { 0.0, 1.0, 2.0, INFINITY };
    const double ri[4] = { 0.0, 1.0, 2.0, -INFINITY };
    g_autoptr(CsTensor) a = vec (CS_DTYPE_BF16, xi, 4);
    g_autoptr(CsTensor) b = vec (CS_DTYPE_BF16, ri, 4);

    cs_accuracy_judge (a, b, t, NULL, &acc);
    g_assert_cmpint (acc.n_nonfinite_mismatch, ==, 1);
    g_assert_true (isinf (acc.err));
    g_assert_false (acc.pass);
  }

  /* no reference run: the truth says where NaN belongs; the floor is f64 rounded to bf16 */
  {
    const double tv[3] = { NAN, 1.0 + 0x1p-9, 3.0 };        /* 1 + 2^-9 rounds to 1.0 in bf16 */
    const double xv[3] = { NAN, 1.0, 3.0 };
    const double xw[3] = { 7.0, 1.0, 3.0 };
    g_autoptr(CsTensor) tt = vec (CS_DTYPE_F64, tv, 3);
    g_autoptr(CsTensor) xx = vec (CS_DTYPE_BF16, xv, 3);
    g_autoptr(CsTensor) xwrong = vec (CS_DTYPE_BF16, xw, 3);

    cs_accuracy_judge (xx, NULL, tt, NULL, &acc);
    g_assert_cmpint (acc.ref_kind, ==, CS_ACCURACY_REF_FLOOR);
    g_assert_cmpint (acc.n_nonfinite, ==, 1);
    g_assert_cmpint (acc.n_compared, ==, 2);
    /* err = ref_err = sqrt((2^-9)^2 / 2) */
    g_assert_cmpfloat_with_epsilon (acc.err, 0x1p-9 / sqrt (2.0), 1e-18);
    g_assert_cmpfloat_with_epsilon (acc.ref_err, 0x1p-9 / sqrt (2.0), 1e-18);
    g_assert_cmpfloat (acc.ratio, ==, 1.0);
    g_assert_true (acc.pass);
    /* a finite value where the truth is NaN: a mismatch */
    cs_accuracy_judge (xwrong, NULL, tt, NULL, &acc);
    g_assert_cmpint (acc.n_nonfinite_mismatch, ==, 1);
    g_assert_false (acc.pass);
  }
}

/* Integers must equal the reference exactly. */
static void
test_integers (void)
{
  const double a[3] = { 1, 2, 3 }, b[3] = { 1, 2, 4 };
  g_autoptr(CsTensor) x = vec (CS_DTYPE_I64, a, 3);
  g_autoptr(CsTensor) y = vec (CS_DTYPE_I64, b, 3);
  CsAccuracy acc;

  cs_accuracy_judge (x, x, x, NULL, &acc);
  g_assert_true (acc.pass);
  cs_accuracy_judge (y, x, x, NULL, &acc);
  g_assert_false (acc.pass);
  g_assert_cmpfloat (acc.max_abs, ==, 1.0);
  g_assert_true (isinf (cs_accuracy_margin (&acc)));
  cs_accuracy_judge (y, NULL, x, NULL, &acc);
  g_assert_false (acc.pass);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, G_TEST_OPTION_ISOLATE_DIRS, NULL);
  g_test_add_func ("/core/accuracy/rule", test_rule);
  g_test_add_func ("/core/accuracy/bf16-matmul-passes", test_bf16_matmul_passes);
  g_test_add_func ("/core/accuracy/bf16-matmul-2x-passes-10x-fails", test_bf16_matmul_scaled);
  g_test_add_func ("/core/accuracy/injected-error-fails", test_injected_error_fails);
  g_test_add_func ("/core/accuracy/nonfinite", test_nonfinite);
  g_test_add_func ("/core/accuracy/integers", test_integers);
  return g_test_run ();
}
