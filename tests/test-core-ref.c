/* test-core-ref.c: host tensors (core/cs-tensor.c) and the CPU reference executor
 * (core/cs-ref.c).
 *
 * Every expected value is computed by hand (noted beside it) or is a published constant
 * (e = 2.718281828..., erf(0.5) = 0.5204998778...); bf16 results follow the rounding rules
 * spelled out in the comments.
 */
#include "cs-config.h"

#include "cs-ops.h"
#include "cs-parse.h"
#include "cs-ref.h"
#include "cs-tensor.h"

#include <glib/gstdio.h>
#include <math.h>
#include <string.h>
#include <sys/wait.h>

#if CS_HAVE_JSON
#include <json-glib/json-glib.h>
#endif

/* ---- helpers ----------------------------------------------------------------------------- */

static CsTensor *
tensor (CsDtype dtype, const int64_t *shape, guint rank, const double *v)
{
  g_autoptr (GError) error = NULL;
  CsTensor *t = cs_tensor_new_from_f64 (dtype, shape, rank, v, &error);

  g_assert_no_error (error);
  return t;
}

#define T1(dtype, n, ...) \
  tensor ((dtype), (const int64_t[]) { (n) }, 1, (const double[]) { __VA_ARGS__ })
#define T2(dtype, r, c, ...) \
  tensor ((dtype), (const int64_t[]) { (r), (c) }, 2, (const double[]) { __VA_ARGS__ })

static CsTrace *
parse (const char *text)
{
  g_autoptr (GError) error = NULL;
  CsTrace *t = cs_parse_trace (text, "test.txt", &error);

  g_assert_no_error (error);
  g_assert_nonnull (t);
  return t;
}

/* Runs @text on @inputs (NULL-terminated) and returns the outputs. */
static GPtrArray *
run_mode (const char *text, CsRefMode mode, CsTensor **inputs)
{
  g_autoptr (CsTrace) trace = parse (text);
  g_autoptr (GError) error = NULL;
  GPtrArray *out = NULL;
  guint n = 0;

  while (inputs && inputs[n])
    n++;
  g_assert_true (cs_ref_run (trace, inputs, n, mode, &out, &error));
  g_assert_no_error (error);
  return out;
}

static GPtrArray *
run (const char *text, CsTensor **inputs)
{
  return run_mode (text, CS_REF_EXACT, inputs);
}

static void
free_inputs (CsTensor **inputs)
{
  for (guint i = 0; inputs[i]; i++)
    cs_tensor_unref (inputs[i]);
}

/* Runs and expects an error of @code whose message contains @needle. */
static void
run_fails (const char *text, CsTensor **inputs, gint code, const char *needle)
{
  g_autoptr (CsTrace) trace = parse (text);
  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) out = NULL;
  guint n = 0;

  while (inputs && inputs[n])
    n++;
  g_assert_false (cs_ref_run (trace, inputs, n, CS_REF_EXACT, &out, &error));
  g_assert_error (error, CS_REF_ERROR, code);
  if (strstr (error->message, needle) == NULL)
    g_error ("message \"%s\" lacks \"%s\"", error->message, needle);
}

static void
assert_values (const CsTensor *t, CsDtype dtype, const int64_t *shape, guint rank,
               const double *want, double tol)
{
  g_assert_nonnull (t);
  g_assert_cmpint (t->dtype, ==, dtype);
  g_assert_cmpuint (t->rank, ==, rank);
  for (guint i = 0; i < rank; i++)
    g_assert_cmpint (t->shape[i], ==, shape[i]);
  for (int64_t i = 0; i < t->numel; i++)
    {
      double got = cs_tensor_get_f64 (t, i);
      if (isnan (want[i]))
        g_assert_true (isnan (got));
      else if (tol == 0)
        g_assert_cmpfloat (got, ==, want[i]);
      else
        g_assert_cmpfloat_with_epsilon (got, want[i], tol);
    }
}

#define OUT(arr, i) ((CsTensor *) g_ptr_array_index ((arr), (i)))
#define WANT1(t, dtype, n, tol, ...) \
  assert_values ((t), (dtype), (const int64_t[]) { (n) }, 1, (const double[]) { __VA_ARGS__ }, (tol))
#define WANT2(t, dtype, r, c, tol, ...) \
  assert_values ((t), (dtype), (const int64_t[]) { (r), (c) }, 2, \
                 (const double[]) { __VA_ARGS__ }, (tol))
#define WANT0(t, dtype, tol, v) \
  assert_values ((t), (dtype), NULL, 0, (const double[]) { (v) }, (tol))

/* ---- tensors ----------------------------------------------------------------------------- */

static void
test_tensor_store (void)
{
  g_autoptr (CsTensor) i8 = T1 (CS_DTYPE_I8, 3, 200, -2.7, 127.9);
  g_autoptr (CsTensor) b = T1 (CS_DTYPE_B8, 3, 0.0, -0.5, 2.0);
  g_autoptr (CsTensor) bf = T1 (CS_DTYPE_BF16, 2, 1.0 + 0x1p-8, 1.0 + 3 * 0x1p-8);
  g_autoptr (CsTensor) f32 = T1 (CS_DTYPE_F32, 1, 0.1);
  g_autoptr (GError) error = NULL;
  g_autoptr (CsTensor) bad = NULL;

  /* int8: 200 wraps to 200 - 256 = -56; -2.7 truncates to -2; 127.9 to 127 */
  WANT1 (i8, CS_DTYPE_I8, 3, 0, -56, -2, 127);
  WANT1 (b, CS_DTYPE_B8, 3, 0, 0, 1, 1);
  /* bf16 ties to even: 1 + 2^-8 -> 1.0, 1 + 3*2^-8 -> 1 + 2^-6 */
  WANT1 (bf, CS_DTYPE_BF16, 2, 0, 1.0, 1.0 + 0x1p-6);
  g_assert_cmphex (((guint16 *) bf->data)[1], ==, 0x3F82);
  /* f32 0.1 is 0.100000001490116... */
  WANT1 (f32, CS_DTYPE_F32, 1, 0, (double) 0.1f);
  g_assert_cmpint (cs_tensor_nbytes (bf), ==, 4);

  bad = cs_tensor_new (CS_DTYPE_C64, (const int64_t[]) { 2 }, 1, &error);
  g_assert_null (bad);
  g_assert_error (error, CS_TENSOR_ERROR, CS_TENSOR_ERROR_DTYPE);
  g_clear_error (&error);
  bad = cs_tensor_new (CS_DTYPE_F32, (const int64_t[]) { -1 }, 1, &error);
  g_assert_error (error, CS_TENSOR_ERROR, CS_TENSOR_ERROR_SHAPE);
  g_clear_error (&error);
  bad = cs_tensor_new (CS_DTYPE_F32, (const int64_t[]) { 1 << 20, 1 << 20, 1 << 10 }, 3, &error);
  g_assert_error (error, CS_TENSOR_ERROR, CS_TENSOR_ERROR_SIZE);
}

static void
test_tensor_random (void)
{
  const int64_t shape[1] = { 20000 };
  g_autoptr (CsTensor) a = cs_tensor_new (CS_DTYPE_F32, shape, 1, NULL);
  g_autoptr (CsTensor) b = cs_tensor_new (CS_DTYPE_F32, shape, 1, NULL);
  g_autoptr (CsTensor) idx = cs_tensor_new (CS_DTYPE_I64, shape, 1, NULL);
  g_autoptr (CsTensor) coin = cs_tensor_new (CS_DTYPE_B8, shape, 1, NULL);
  double mean = 0, var = 0, heads = 0;
  int64_t lo = G_MAXINT64, hi = G_MININT64;

  cs_tensor_fill_random (a, 7, 2.0, 0);
  cs_tensor_fill_random (b, 7, 2.0, 0);
  g_assert_cmpmem (a->data, cs_tensor_nbytes (a), b->data, cs_tensor_nbytes (b));
  cs_tensor_fill_random (b, 8, 2.0, 0);
  g_assert_true (memcmp (a->data, b->data, cs_tensor_nbytes (a)) != 0);
  /* normal(0, 1) * 2: sample mean within 5 sigma/sqrt(n) = 0.07 of 0, variance near 4 */
  for (int64_t i = 0; i < a->numel; i++)
    mean += cs_tensor_get_f64 (a, i);
  mean /= a->numel;
  for (int64_t i = 0; i < a->numel; i++)
    var += pow (cs_tensor_get_f64 (a, i) - mean, 2);
  var /= a->numel - 1;
  g_assert_cmpfloat (fabs (mean), <, 0.07);
  g_assert_cmpfloat (fabs (var - 4.0), <, 0.25);

  cs_tensor_fill_random (idx, 3, 1.0, 50);
  for (int64_t i = 0; i < idx->numel; i++)
    {
      lo = MIN (lo, (int64_t) cs_tensor_get_f64 (idx, i));
      hi = MAX (hi, (int64_t) cs_tensor_get_f64 (idx, i));
    }
  g_assert_cmpint (lo, ==, 0);
  g_assert_cmpint (hi, ==, 49);

  cs_tensor_fill_random (coin, 3, 1.0, 0);
  for (int64_t i = 0; i < coin->numel; i++)
    heads += cs_tensor_get_f64 (coin, i);
  g_assert_cmpfloat (fabs (heads / coin->numel - 0.5), <, 0.02);
}

static void
test_tensor_npy (void)
{
  g_autoptr (CsTensor) bf = T2 (CS_DTYPE_BF16, 2, 3, 1.0, -2.5, 0x1p-133, 3.0e38, 0.0, 1.0 + 0x1p-7);
  g_autoptr (CsTensor) i32 = T1 (CS_DTYPE_I32, 3, -1, 0, 123456);
  g_autoptr (GBytes) bytes = cs_tensor_to_npy_bytes (bf);
  g_autoptr (GError) error = NULL;
  g_autoptr (CsTensor) back = NULL;
  g_autoptr (CsTensor) back_bf = NULL;
  g_autofree char *dir = g_dir_make_tmp ("cs-npy-XXXXXX", NULL);
  g_autofree char *path = g_build_filename (dir, "x.npy", NULL);
  gsize len;
  const guint8 *data = g_bytes_get_data (bytes, &len);
  guint8 broken[256];

  /* header: magic, version 1.0, a dict padded so the data starts at a multiple of 64 */
  g_assert_cmpmem (data, 8, "\x93NUMPY\x01\x00", 8);
  g_assert_cmpuint ((10 + data[8] + 256 * data[9]) % 64, ==, 0);
  g_assert_nonnull (g_strstr_len ((const char *) data + 10, 70, "'descr': '<f4'"));
  g_assert_nonnull (g_strstr_len ((const char *) data + 10, 70, "'shape': (2, 3)"));
  g_assert_cmpuint (10 + data[8] + 256 * data[9], ==, 128);   /* a 61-byte dict pads to 128 */
  g_assert_cmpuint (len, ==, 128 + 6 * 4);
  /* bf16 saved as float32 holds the same values; converting back gives the same bits */
  back = cs_tensor_from_npy_bytes (data, len, "x.npy", &error);
  g_assert_no_error (error);
  g_assert_cmpint (back->dtype, ==, CS_DTYPE_F32);
  back_bf = cs_tensor_convert (back, CS_DTYPE_BF16, &error);
  g_assert_cmpmem (back_bf->data, cs_tensor_nbytes (back_bf), bf->data, cs_tensor_nbytes (bf));

  g_assert_true (cs_tensor_save_npy (i32, path, &error));
  g_clear_pointer (&back, cs_tensor_unref);
  back = cs_tensor_load_npy (path, &error);
  g_assert_no_error (error);
  WANT1 (back, CS_DTYPE_I32, 3, 0, -1, 0, 123456);
  g_remove (path);
  g_rmdir (dir);

  /* errors: bad magic, Fortran order, truncated data, missing file */
  memcpy (broken, data, MIN (len, sizeof broken));
  broken[1] = 'X';
  g_clear_pointer (&back, cs_tensor_unref);
  back = cs_tensor_from_npy_bytes (broken, len, "b.npy", &error);
  g_assert_error (error, CS_TENSOR_ERROR, CS_TENSOR_ERROR_FORMAT);
  g_assert_nonnull (strstr (error->message, "magic"));
  g_clear_error (&error);
  memcpy (broken, data, MIN (len, sizeof broken));
  memcpy (strstr ((char *) broken + 10, "False"), "True ", 5);
  back = cs_tensor_from_npy_bytes (broken, len, "b.npy", &error);
  g_assert_error (error, CS_TENSOR_ERROR, CS_TENSOR_ERROR_FORMAT);
  g_assert_nonnull (strstr (error->message, "Fortran"));
  g_clear_error (&error);
  back = cs_tensor_from_npy_bytes (data, len - 4, "b.npy", &error);
  g_assert_error (error, CS_TENSOR_ERROR, CS_TENSOR_ERROR_FORMAT);
  g_assert_nonnull (strstr (error->message, "promises 24"));
  g_clear_error (&error);
  back = cs_tensor_load_npy ("/nonexistent/x.npy", &error);
  g_assert_error (error, CS_TENSOR_ERROR, CS_TENSOR_ERROR_IO);
}

/* .npy reader on 3000 randomly mutated copies of a valid file (1-4 byte flips, truncations):
 * each either loads a consistent tensor or fails with CS_TENSOR_ERROR; never a crash. */
static void
test_npy_mutations (void)
{
  g_autoptr (CsTensor) t = T2 (CS_DTYPE_F32, 2, 3, 1, 2, 3, 4, 5, 6);
  g_autoptr (GBytes) bytes = cs_tensor_to_npy_bytes (t);
  gsize len;
  const guint8 *data = g_bytes_get_data (bytes, &len);
  GRand *rand = g_rand_new_with_seed (11);
  guint n_ok = 0;

  for (int it = 0; it < 3000; it++)
    {
      g_autofree guint8 *m = g_memdup2 (data, len);
      gsize mlen = it % 10 == 0 ? (gsize) g_rand_int_range (rand, 0, (gint32) len) : len;
      int flips = g_rand_int_range (rand, 1, 5);
      g_autoptr (GError) error = NULL;
      g_autoptr (CsTensor) back = NULL;

      for (int f = 0; f < flips; f++)
        m[g_rand_int_range (rand, 0, (gint32) MIN (len, 140))] = (guint8) g_rand_int (rand);
      back = cs_tensor_from_npy_bytes (m, mlen, "m.npy", &error);
      if (back)
        {
          g_assert_no_error (error);
          g_assert_cmpuint (cs_tensor_nbytes (back) + 10, <=, mlen);
          n_ok++;
        }
      else
        g_assert_true (error != NULL && error->domain == CS_TENSOR_ERROR);
    }
  g_assert_cmpuint (n_ok, >, 0);   /* flips in padding spaces still load */
  g_rand_free (rand);
}

/* ---- elementwise ------------------------------------------------------------------------- */

static const char *unary_f32_trace =
  "def computation(a):\n"
  "  # a: \"cpu f32[3]\"\n"
  "  t0 = prims.exp(a)  # t0: \"cpu f32[3]\"\n"
  "  t1 = prims.erf(a)  # t1: \"cpu f32[3]\"\n"
  "  t2 = prims.tanh(a)  # t2: \"cpu f32[3]\"\n"
  "  t3 = prims.rsqrt(a)  # t3: \"cpu f32[3]\"\n"
  "  t4 = prims.neg(a)  # t4: \"cpu f32[3]\"\n"
  "  t5 = prims.reciprocal(a)  # t5: \"cpu f32[3]\"\n"
  "  t6 = prims.log(a)  # t6: \"cpu f32[3]\"\n"
  "  t7 = prims.abs(t4)  # t7: \"cpu f32[3]\"\n"
  "  t8 = prims.sqrt(a)  # t8: \"cpu f32[3]\"\n"
  "  t9 = prims.sin(a)  # t9: \"cpu f32[3]\"\n"
  "  return (t0, t1, t2, t3, t4, t5, t6, t7, t8, t9)\n";

static void
test_unary (void)
{
  CsTensor *in[] = { T1 (CS_DTYPE_F32, 3, 0.5, 1.0, 4.0), NULL };
  g_autoptr (GPtrArray) o = run (unary_f32_trace, in);
  const double eps = 1e-6;

  g_assert_cmpuint (o->len, ==, 10);
  WANT1 (OUT (o, 0), CS_DTYPE_F32, 3, 2e-6, 1.6487212707, 2.7182818285, 54.598150033);
  WANT1 (OUT (o, 1), CS_DTYPE_F32, 3, eps, 0.5204998778, 0.8427007929, 1.0);
  WANT1 (OUT (o, 2), CS_DTYPE_F32, 3, eps, 0.4621171573, 0.7615941560, 0.9993292997);
  WANT1 (OUT (o, 3), CS_DTYPE_F32, 3, eps, 1.4142135624, 1.0, 0.5);
  WANT1 (OUT (o, 4), CS_DTYPE_F32, 3, 0, -0.5, -1.0, -4.0);
  WANT1 (OUT (o, 5), CS_DTYPE_F32, 3, 0, 2.0, 1.0, 0.25);
  WANT1 (OUT (o, 6), CS_DTYPE_F32, 3, eps, -0.6931471806, 0.0, 1.3862943611);
  WANT1 (OUT (o, 7), CS_DTYPE_F32, 3, 0, 0.5, 1.0, 4.0);
  WANT1 (OUT (o, 8), CS_DTYPE_F32, 3, eps, 0.7071067812, 1.0, 2.0);
  WANT1 (OUT (o, 9), CS_DTYPE_F32, 3, eps, 0.4794255386, 0.8414709848, -0.7568024953);
  /* exact mode stores f32: exp(1) is the f32 nearest e */
  g_assert_cmpfloat (cs_tensor_get_f64 (OUT (o, 0), 1), ==, (double) 2.7182817f);
  free_inputs (in);
}

static void
test_binary (void)
{
  const char *text =
    "def computation(a, b):\n"
    "  # a: \"cpu f32[4]\"\n"
    "  # b: \"cpu f32[4]\"\n"
    "  t0 = prims.add(a, b)  # t0: \"cpu f32[4]\"\n"
    "  t1 = prims.sub(a, b)  # t1: \"cpu f32[4]\"\n"
    "  t2 = prims.mul(a, 2.0)  # t2: \"cpu f32[4]\"\n"
    "  t3 = prims.div(a, b)  # t3: \"cpu f32[4]\"\n"
    "  t4 = prims.pow(a, 2.0)  # t4: \"cpu f32[4]\"\n"
    "  t5 = prims.maximum(a, b)  # t5: \"cpu f32[4]\"\n"
    "  t6 = prims.minimum(a, b)  # t6: \"cpu f32[4]\"\n"
    "  t7 = prims.lt(a, b)  # t7: \"cpu b8[4]\"\n"
    "  t8 = prims.eq(a, b)  # t8: \"cpu b8[4]\"\n"
    "  t9 = prims.ge(a, b)  # t9: \"cpu b8[4]\"\n"
    "  t10 = prims.where(t7, a, b)  # t10: \"cpu f32[4]\"\n"
    "  t11 = prims.ne(a, b)  # t11: \"cpu b8[4]\"\n"
    "  return (t0, t1, t2, t3, t4, t5, t6, t7, t8, t9, t10, t11)\n";
  CsTensor *in[] = { T1 (CS_DTYPE_F32, 4, 1.0, -2.0, 3.0, NAN),
                     T1 (CS_DTYPE_F32, 4, 4.0, -2.0, 1.0, 1.0), NULL };
  g_autoptr (GPtrArray) o = run (text, in);

  WANT1 (OUT (o, 0), CS_DTYPE_F32, 4, 0, 5.0, -4.0, 4.0, NAN);
  WANT1 (OUT (o, 1), CS_DTYPE_F32, 4, 0, -3.0, 0.0, 2.0, NAN);
  WANT1 (OUT (o, 2), CS_DTYPE_F32, 4, 0, 2.0, -4.0, 6.0, NAN);
  WANT1 (OUT (o, 3), CS_DTYPE_F32, 4, 0, 0.25, 1.0, 3.0, NAN);
  WANT1 (OUT (o, 4), CS_DTYPE_F32, 4, 0, 1.0, 4.0, 9.0, NAN);
  /* maximum/minimum propagate NaN like torch.maximum */
  WANT1 (OUT (o, 5), CS_DTYPE_F32, 4, 0, 4.0, -2.0, 3.0, NAN);
  WANT1 (OUT (o, 6), CS_DTYPE_F32, 4, 0, 1.0, -2.0, 1.0, NAN);
  WANT1 (OUT (o, 7), CS_DTYPE_B8, 4, 0, 1, 0, 0, 0);
  WANT1 (OUT (o, 8), CS_DTYPE_B8, 4, 0, 0, 1, 0, 0);
  WANT1 (OUT (o, 9), CS_DTYPE_B8, 4, 0, 0, 1, 1, 0);
  WANT1 (OUT (o, 10), CS_DTYPE_F32, 4, 0, 1.0, -2.0, 1.0, 1.0);
  WANT1 (OUT (o, 11), CS_DTYPE_B8, 4, 0, 1, 0, 1, 1);   /* NaN != 1 */
  free_inputs (in);
}

static void
test_int_math (void)
{
  const char *text =
    "def computation(a):\n"
    "  # a: \"cpu i64[4]\"\n"
    "  t0 = prims.div(a, 2)  # t0: \"cpu i64[4]\"\n"
    "  t1 = prims.remainder(a, 3)  # t1: \"cpu i64[4]\"\n"
    "  t2 = prims.fmod(a, 3)  # t2: \"cpu i64[4]\"\n"
    "  t3 = prims.bitwise_and(a, 6)  # t3: \"cpu i64[4]\"\n"
    "  t4 = prims.convert_element_type(a, dtypes.float32)  # t4: \"cpu f32[4]\"\n"
    "  return (t0, t1, t2, t3, t4)\n";
  CsTensor *in[] = { T1 (CS_DTYPE_I64, 4, 7, -7, 5, -1), NULL };
  g_autoptr (GPtrArray) o = run (text, in);

  /* C-style truncating division; Python-style remainder; C fmod */
  WANT1 (OUT (o, 0), CS_DTYPE_I64, 4, 0, 3, -3, 2, 0);
  WANT1 (OUT (o, 1), CS_DTYPE_I64, 4, 0, 1, 2, 2, 2);
  WANT1 (OUT (o, 2), CS_DTYPE_I64, 4, 0, 1, -1, 2, -1);
  WANT1 (OUT (o, 3), CS_DTYPE_I64, 4, 0, 6, 0, 4, 6);   /* -7 = ...11001 & 110 = 000 */
  WANT1 (OUT (o, 4), CS_DTYPE_F32, 4, 0, 7, -7, 5, -1);
  free_inputs (in);

  {
    CsTensor *in2[] = { T1 (CS_DTYPE_I64, 1, 3), NULL };
    run_fails ("def computation(a):\n"
               "  # a: \"cpu i64[1]\"\n"
               "  t0 = prims.div(a, 0)  # t0: \"cpu i64[1]\"\n"
               "  return t0\n", in2, CS_REF_ERROR_VALUE, "division by zero");
    run_fails ("def computation(a):\n"
               "  # a: \"cpu i64[1]\"\n"
               "  t0 = prims.exp(a)  # t0: \"cpu f32[1]\"\n"
               "  return t0\n", in2, CS_REF_ERROR_DTYPE, "float tensors");
    free_inputs (in2);
  }
}

/* Every unary float prim at a point whose value is a published constant (f64 tensors: the
 * math runs in f64).  pi/3, pi/6, ln(sqrt(pi)) and the rest to 10 digits. */
static void
test_unary_table (void)
{
  static const struct { const char *op; double x; double want; } cases[] = {
    { "acos", 0.5, 1.0471975512 }, { "asin", 0.5, 0.5235987756 }, { "atan", 0.5, 0.4636476090 },
    { "acosh", 2.0, 1.3169578969 }, { "asinh", 0.5, 0.4812118251 }, { "atanh", 0.5, 0.5493061443 },
    { "cos", 0.5, 0.8775825619 }, { "cosh", 0.5, 1.1276259652 }, { "sinh", 0.5, 0.5210953055 },
    { "tan", 0.5, 0.5463024898 }, { "expm1", 0.5, 0.6487212707 }, { "log1p", 0.5, 0.4054651081 },
    { "log2", 0.5, -1.0 }, { "log10", 0.5, -0.3010299957 }, { "exp2", 0.5, 1.4142135624 },
    { "erfc", 0.5, 0.4795001222 }, { "lgamma", 0.5, 0.5723649429 }, { "floor", -2.5, -3.0 },
    { "ceil", -2.5, -2.0 }, { "round", 2.5, 2.0 }, { "round", -2.5, -2.0 }, { "round", 3.5, 4.0 },
    { "trunc", -2.5, -2.0 }, { "sign", -2.5, -1.0 }, { "sign", 0.0, 0.0 }, { "neg", 0.5, -0.5 },
    { "abs", -0.5, 0.5 }, { "real", -0.5, -0.5 },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *text = g_strdup_printf ("def computation(a):\n"
                                               "  # a: \"cpu f64[1]\"\n"
                                               "  t0 = prims.%s(a)  # t0: \"cpu f64[1]\"\n"
                                               "  return t0\n", cases[i].op);
      CsTensor *in[] = { T1 (CS_DTYPE_F64, 1, cases[i].x), NULL };
      g_autoptr (GPtrArray) o = run (text, in);

      if (fabs (cs_tensor_get_f64 (OUT (o, 0), 0) - cases[i].want) > 1e-9)
        g_error ("prims.%s(%g) = %.12g, want %.12g", cases[i].op, cases[i].x,
                 cs_tensor_get_f64 (OUT (o, 0), 0), cases[i].want);
      free_inputs (in);
    }
}

/* The remaining binary/ternary prims and the bool-valued unary ones. */
static void
test_binary_table (void)
{
  const char *text =
    "def computation(a, b, i, j, z):\n"
    "  # a: \"cpu f64[2]\"\n"
    "  # b: \"cpu f32[1]\"\n"
    "  # i: \"cpu i32[2]\"\n"
    "  # j: \"cpu i32[2]\"\n"
    "  # z: \"cpu f32[3]\"\n"
    "  t0 = prims.atan2(a, a)  # t0: \"cpu f64[2]\"\n"
    "  t1 = prims.nextafter(a, 2.0)  # t1: \"cpu f64[2]\"\n"
    "  t2 = prims.nextafter(b, 2.0)  # t2: \"cpu f32[1]\"\n"
    "  t3 = prims.lerp(a, 3.0, 0.25)  # t3: \"cpu f64[2]\"\n"
    "  t4 = prims.bitwise_or(i, j)  # t4: \"cpu i32[2]\"\n"
    "  t5 = prims.bitwise_xor(i, j)  # t5: \"cpu i32[2]\"\n"
    "  t6 = prims.bitwise_left_shift(i, j)  # t6: \"cpu i32[2]\"\n"
    "  t7 = prims.bitwise_right_shift(i, 1)  # t7: \"cpu i32[2]\"\n"
    "  t8 = prims.bitwise_not(i)  # t8: \"cpu i32[2]\"\n"
    "  t9 = prims.isfinite(z)  # t9: \"cpu b8[3]\"\n"
    "  t10 = prims.signbit(z)  # t10: \"cpu b8[3]\"\n"
    "  t11 = prims.le(i, j)  # t11: \"cpu b8[2]\"\n"
    "  t12 = prims.gt(a, 1.0)  # t12: \"cpu b8[2]\"\n"
    "  return (t0, t1, t2, t3, t4, t5, t6, t7, t8, t9, t10, t11, t12)\n";
  CsTensor *in[] = { T1 (CS_DTYPE_F64, 2, 1.0, -1.0), T1 (CS_DTYPE_F32, 1, 1.0),
                     T1 (CS_DTYPE_I32, 2, 5, -16), T1 (CS_DTYPE_I32, 2, 3, 2),
                     T1 (CS_DTYPE_F32, 3, INFINITY, -0.0, NAN), NULL };
  g_autoptr (GPtrArray) o = run (text, in);

  /* atan2(1, 1) = pi/4, atan2(-1, -1) = -3pi/4 */
  WANT1 (OUT (o, 0), CS_DTYPE_F64, 2, 1e-9, 0.7853981634, -2.3561944902);
  /* nextafter toward 2: 1 + 2^-52 in f64, 1 + 2^-23 in f32; -1 + 2^-53 in f64 */
  WANT1 (OUT (o, 1), CS_DTYPE_F64, 2, 0, 1.0 + 0x1p-52, -1.0 + 0x1p-53);
  WANT1 (OUT (o, 2), CS_DTYPE_F32, 1, 0, 1.0 + 0x1p-23);
  /* lerp(a, 3, 0.25) = a + 0.25 (3 - a) */
  WANT1 (OUT (o, 3), CS_DTYPE_F64, 2, 0, 1.5, 0.0);
  WANT1 (OUT (o, 4), CS_DTYPE_I32, 2, 0, 7, -14);     /* 101|011; ...110000|10 */
  WANT1 (OUT (o, 5), CS_DTYPE_I32, 2, 0, 6, -14);
  WANT1 (OUT (o, 6), CS_DTYPE_I32, 2, 0, 40, -64);    /* 5 << 3, -16 << 2 */
  WANT1 (OUT (o, 7), CS_DTYPE_I32, 2, 0, 2, -8);      /* arithmetic shift */
  WANT1 (OUT (o, 8), CS_DTYPE_I32, 2, 0, -6, 15);
  WANT1 (OUT (o, 9), CS_DTYPE_B8, 3, 0, 0, 1, 0);
  WANT1 (OUT (o, 10), CS_DTYPE_B8, 3, 0, 0, 1, 0);
  WANT1 (OUT (o, 11), CS_DTYPE_B8, 2, 0, 0, 1);
  WANT1 (OUT (o, 12), CS_DTYPE_B8, 2, 0, 0, 0);
  free_inputs (in);
}

/* bf16 rounding at every prim output, end to end through a Thunder-style cast pair. */
static const char *bf16_add_trace =
  "def computation(a):\n"
  "  # a: \"cpu bf16[3]\"\n"
  "  t0 = ltorch.add(a, 0.001953125, alpha=1)  # t0: \"cpu bf16[3]\"\n"
  "    # t1 = prims.convert_element_type(a, dtypes.float32)  # t1: \"cpu f32[3]\"\n"
  "    # t2 = prims.add(t1, 0.001953125)  # t2: \"cpu f32[3]\"\n"
  "    # t0 = prims.convert_element_type(t2, dtypes.bfloat16)  # t0: \"cpu bf16[3]\"\n"
  "  return t0\n";

static void
test_bf16_rounding (void)
{
  CsTensor *in[] = { T1 (CS_DTYPE_BF16, 3, 1.0, 2.0, 1.0 + 0x1p-7), NULL };
  g_autoptr (GPtrArray) exact = run_mode (bf16_add_trace, CS_REF_EXACT, in);
  g_autoptr (GPtrArray) f64 = run_mode (bf16_add_trace, CS_REF_F64, in);

  /* 1 + 2^-9 is below half a bf16 ulp of 1 (2^-8): stays 1.0; 2 + 2^-9 stays 2.0;
   * (1 + 2^-7) + 2^-9 is below the tie at 1 + 2^-7 + 2^-8: stays 1 + 2^-7 */
  WANT1 (OUT (exact, 0), CS_DTYPE_BF16, 3, 0, 1.0, 2.0, 1.0 + 0x1p-7);
  /* f64 mode: no rounding, returned as f64 */
  WANT1 (OUT (f64, 0), CS_DTYPE_F64, 3, 0, 1.0 + 0x1p-9, 2.0 + 0x1p-9, 1.0 + 0x1p-7 + 0x1p-9);
  free_inputs (in);
}

/* A bf16 prim without cast pair (castscope's elementwise=native policy) computes in f32 and
 * rounds once: 1 + 3*2^-9 (bf16 1.0 + bf16 3*2^-9 = 1.005859375) rounds to 1 + 2^-7. */
static void
test_bf16_native_prim (void)
{
  const char *text =
    "def computation(a, b):\n"
    "  # a: \"cpu bf16[1]\"\n"
    "  # b: \"cpu bf16[1]\"\n"
    "  t0 = prims.add(a, b)  # t0: \"cpu bf16[1]\"\n"
    "  return t0\n";
  CsTensor *in[] = { T1 (CS_DTYPE_BF16, 1, 1.0), T1 (CS_DTYPE_BF16, 1, 3 * 0x1p-9), NULL };
  g_autoptr (GPtrArray) o = run (text, in);

  WANT1 (OUT (o, 0), CS_DTYPE_BF16, 1, 0, 1.0 + 0x1p-7);
  free_inputs (in);
}

/* ---- shape prims ------------------------------------------------------------------------- */

static void
test_shape_prims (void)
{
  const char *text =
    "def computation(a, v):\n"
    "  # a: \"cpu f32[2, 3]\"\n"
    "  # v: \"cpu f32[3]\"\n"
    "  t0 = prims.broadcast_in_dim(v, [2, 3], [1])  # t0: \"cpu f32[2, 3]\"\n"
    "  t1 = prims.transpose(a, (1, 0))  # t1: \"cpu f32[3, 2]\"\n"
    "  t2 = prims.reshape(a, (3, 2))  # t2: \"cpu f32[3, 2]\"\n"
    "  t3 = prims.slice_prim(a, [0, 0], [2, 3], [1, 2])  # t3: \"cpu f32[2, 2]\"\n"
    "  t4 = prims.cat([a, a], 0)  # t4: \"cpu f32[4, 3]\"\n"
    "  t5 = prims.pad(v, 0.0, [(1, 0, 1)])  # t5: \"cpu f32[6]\"\n"
    "  t6 = prims.reshape(v, (1, 3))  # t6: \"cpu f32[1, 3]\"\n"
    "  t7 = prims.squeeze(t6, (0,))  # t7: \"cpu f32[3]\"\n"
    "  t8 = prims.broadcast_in_dim(t6, [2, 3], [0, 1])  # t8: \"cpu f32[2, 3]\"\n"
    "  t9 = prims.cat([a, a], 1)  # t9: \"cpu f32[2, 6]\"\n"
    "  t10 = prims.pad(v, -1.0, [(-1, 2, 0)])  # t10: \"cpu f32[4]\"\n"
    "  t11 = prims.flip(a, (1,))  # t11: \"cpu f32[2, 3]\"\n"
    "  return (t0, t1, t2, t3, t4, t5, t7, t8, t9, t10, t11)\n";
  CsTensor *in[] = { T2 (CS_DTYPE_F32, 2, 3, 1, 2, 3, 4, 5, 6), T1 (CS_DTYPE_F32, 3, 7, 8, 9),
                     NULL };
  g_autoptr (GPtrArray) o = run (text, in);

  WANT2 (OUT (o, 0), CS_DTYPE_F32, 2, 3, 0, 7, 8, 9, 7, 8, 9);
  WANT2 (OUT (o, 1), CS_DTYPE_F32, 3, 2, 0, 1, 4, 2, 5, 3, 6);
  WANT2 (OUT (o, 2), CS_DTYPE_F32, 3, 2, 0, 1, 2, 3, 4, 5, 6);
  WANT2 (OUT (o, 3), CS_DTYPE_F32, 2, 2, 0, 1, 3, 4, 6);
  WANT2 (OUT (o, 4), CS_DTYPE_F32, 4, 3, 0, 1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6);
  /* lo 1, interior 1: [0, 7, 0, 8, 0, 9] */
  WANT1 (OUT (o, 5), CS_DTYPE_F32, 6, 0, 0, 7, 0, 8, 0, 9);
  WANT1 (OUT (o, 6), CS_DTYPE_F32, 3, 0, 7, 8, 9);
  WANT2 (OUT (o, 7), CS_DTYPE_F32, 2, 3, 0, 7, 8, 9, 7, 8, 9);
  WANT2 (OUT (o, 8), CS_DTYPE_F32, 2, 6, 0, 1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6);
  /* lo -1 drops the first element, hi 2 appends two fill values */
  WANT1 (OUT (o, 9), CS_DTYPE_F32, 4, 0, 8, 9, -1, -1);
  WANT2 (OUT (o, 10), CS_DTYPE_F32, 2, 3, 0, 3, 2, 1, 6, 5, 4);
  free_inputs (in);
}

static void
test_shape_errors (void)
{
  CsTensor *in[] = { T2 (CS_DTYPE_F32, 2, 3, 1, 2, 3, 4, 5, 6), T1 (CS_DTYPE_F32, 3, 7, 8, 9),
                     NULL };

  run_fails ("def computation(a, v):\n"
             "  # a: \"cpu f32[2, 3]\"\n"
             "  # v: \"cpu f32[3]\"\n"
             "  t0 = prims.add(a, v)  # t0: \"cpu f32[2, 3]\"\n"
             "  return t0\n", in, CS_REF_ERROR_SHAPE, ":4: prims.add: operand shapes [2, 3] and [3]");
  run_fails ("def computation(a, v):\n"
             "  # a: \"cpu f32[2, 3]\"\n"
             "  # v: \"cpu f32[3]\"\n"
             "  t0 = prims.reshape(a, (4, 2))  # t0: \"cpu f32[4, 2]\"\n"
             "  return t0\n", in, CS_REF_ERROR_SHAPE, "cannot reshape [2, 3]");
  /* the trace's declared type is checked against what the prim computes */
  run_fails ("def computation(a, v):\n"
             "  # a: \"cpu f32[2, 3]\"\n"
             "  # v: \"cpu f32[3]\"\n"
             "  t0 = prims.neg(a)  # t0: \"cpu f32[3, 2]\"\n"
             "  return t0\n", in, CS_REF_ERROR_SHAPE, "trace says [3, 2]");
  run_fails ("def computation(a, v):\n"
             "  # a: \"cpu f32[2, 3]\"\n"
             "  # v: \"cpu f32[3]\"\n"
             "  t0 = prims.neg(a)  # t0: \"cpu bf16[2, 3]\"\n"
             "  return t0\n", in, CS_REF_ERROR_DTYPE, "computes f32 for t0 but the trace says bf16");
  run_fails ("def computation(a, v):\n"
             "  # a: \"cpu f32[2, 3]\"\n"
             "  # v: \"cpu f32[3]\"\n"
             "  t0 = prims.broadcast_in_dim(v, [2, 4], [1])  # t0: \"cpu f32[2, 4]\"\n"
             "  return t0\n", in, CS_REF_ERROR_SHAPE, "cannot broadcast [3] to [2, 4]");
  run_fails ("def computation(a, v):\n"
             "  # a: \"cpu f32[2, 3]\"\n"
             "  # v: \"cpu f32[3]\"\n"
             "  t0 = prims.slice_prim(v, [1], [5], [1])  # t0: \"cpu f32[4]\"\n"
             "  return t0\n", in, CS_REF_ERROR_SHAPE, "out of range");
  free_inputs (in);
}

/* ---- reductions -------------------------------------------------------------------------- */

static void
test_reductions (void)
{
  const char *text =
    "def computation(a):\n"
    "  # a: \"cpu f32[2, 3]\"\n"
    "  t0 = prims.sum(a, (1,))  # t0: \"cpu f32[2]\"\n"
    "  t1 = prims.amax(a, (0,))  # t1: \"cpu f32[3]\"\n"
    "  t2 = prims.amin(a, (0, 1))  # t2: \"cpu f32[]\"\n"
    "  t3 = prims.prod(a, (1,))  # t3: \"cpu f32[2]\"\n"
    "  (t4, t5) = prims.var_mean(a, (1,), correction=1)\n"
    "  t6 = prims.var(a, (1,), correction=0)  # t6: \"cpu f32[2]\"\n"
    "  t7 = prims.argmax(a, 1)  # t7: \"cpu i64[2]\"\n"
    "  t8 = prims.argmin(a, None)  # t8: \"cpu i64[]\"\n"
    "  return (t0, t1, t2, t3, t4, t5, t6, t7, t8)\n";
  /* rows [1, 5, 3] and [7, 2, 7] */
  CsTensor *in[] = { T2 (CS_DTYPE_F32, 2, 3, 1, 5, 3, 7, 2, 7), NULL };
  g_autoptr (GPtrArray) o = run (text, in);

  WANT1 (OUT (o, 0), CS_DTYPE_F32, 2, 0, 9, 16);
  WANT1 (OUT (o, 1), CS_DTYPE_F32, 3, 0, 7, 5, 7);
  WANT0 (OUT (o, 2), CS_DTYPE_F32, 0, 1);
  WANT1 (OUT (o, 3), CS_DTYPE_F32, 2, 0, 15, 98);
  /* row 0: mean 3, squared deviations 4 + 4 + 0 = 8, /2 = 4; row 1: mean 16/3,
   * deviations (5/3)^2 + (10/3)^2 + (5/3)^2 = 150/9, /2 = 25/3 */
  WANT1 (OUT (o, 4), CS_DTYPE_F32, 2, 1e-6, 4.0, 25.0 / 3.0);
  WANT1 (OUT (o, 5), CS_DTYPE_F32, 2, 1e-6, 3.0, 16.0 / 3.0);
  WANT1 (OUT (o, 6), CS_DTYPE_F32, 2, 1e-6, 8.0 / 3.0, 150.0 / 27.0);
  /* argmax: the first maximum wins (row 1 has 7 at 0 and 2) */
  WANT1 (OUT (o, 7), CS_DTYPE_I64, 2, 0, 1, 0);
  WANT0 (OUT (o, 8), CS_DTYPE_I64, 0, 0);
  free_inputs (in);
}

/* bf16 sum in Thunder's decomposition: upcast, prims.sum in f32, downcast. 256 ones plus one
 * 1 + 2^-7: the f32 sum 257.0078125 rounds in bf16 (ulp 2 at 256) to 258. */
static void
test_bf16_reduction (void)
{
  g_autoptr (CsTensor) x = cs_tensor_new (CS_DTYPE_BF16, (const int64_t[]) { 257 }, 1, NULL);
  const char *text =
    "def computation(x):\n"
    "  # x: \"cpu bf16[257]\"\n"
    "  t0 = prims.convert_element_type(x, dtypes.float32)  # t0: \"cpu f32[257]\"\n"
    "  t1 = prims.sum(t0, (0,))  # t1: \"cpu f32[]\"\n"
    "  t2 = prims.convert_element_type(t1, dtypes.bfloat16)  # t2: \"cpu bf16[]\"\n"
    "  return (t1, t2)\n";
  CsTensor *in[] = { NULL, NULL };
  g_autoptr (GPtrArray) o = NULL;
  g_autoptr (GPtrArray) f = NULL;

  for (int i = 0; i < 257; i++)
    cs_tensor_set_f64 (x, i, i == 0 ? 1.0 + 0x1p-7 : 1.0);
  in[0] = x;
  o = run (text, in);
  f = run_mode (text, CS_REF_F64, in);
  WANT0 (OUT (o, 0), CS_DTYPE_F32, 0, 257.0078125);
  WANT0 (OUT (o, 1), CS_DTYPE_BF16, 0, 258.0);
  WANT0 (OUT (f, 1), CS_DTYPE_F64, 0, 257.0078125);
}

/* ---- matmul / linear --------------------------------------------------------------------- */

static void
test_matmul (void)
{
  const char *text =
    "def computation(a, b, u, w, x, bias, bb):\n"
    "  # a: \"cpu f32[2, 2]\"\n"
    "  # b: \"cpu f32[2, 2]\"\n"
    "  # u: \"cpu f32[3]\"\n"
    "  # w: \"cpu f32[3, 2]\"\n"
    "  # x: \"cpu f32[1, 2]\"\n"
    "  # bias: \"cpu f32[3]\"\n"
    "  # bb: \"cpu f32[2, 1, 2]\"\n"
    "  t0 = prims.matmul(a, b)  # t0: \"cpu f32[2, 2]\"\n"
    "  t1 = prims.matmul(u, u)  # t1: \"cpu f32[]\"\n"
    "  t2 = prims.linear(x, w, bias)  # t2: \"cpu f32[1, 3]\"\n"
    "  t3 = prims.linear(x, w, None)  # t3: \"cpu f32[1, 3]\"\n"
    "  t4 = prims.matmul(bb, a)  # t4: \"cpu f32[2, 1, 2]\"\n"
    "  t5 = prims.matmul(w, x)  # t5: \"cpu f32[3, 2]\"\n"
    "  return (t0, t1, t2, t3, t4)\n";
  CsTensor *in[] = { T2 (CS_DTYPE_F32, 2, 2, 1, 2, 3, 4), T2 (CS_DTYPE_F32, 2, 2, 5, 6, 7, 8),
                     T1 (CS_DTYPE_F32, 3, 1, 2, 3),
                     T2 (CS_DTYPE_F32, 3, 2, 1, 0, 0, 1, 1, 1),
                     T2 (CS_DTYPE_F32, 1, 2, 1, 2), T1 (CS_DTYPE_F32, 3, 0.5, 0, -1),
                     tensor (CS_DTYPE_F32, (const int64_t[]) { 2, 1, 2 }, 3,
                             (const double[]) { 1, 0, 0, 1 }),
                     NULL };
  g_autoptr (CsTrace) trace = parse (text);
  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) o = NULL;

  /* t5 = w[3,2] @ x[1,2] has mismatched inner dims: the run stops there */
  g_assert_false (cs_ref_run (trace, in, 7, CS_REF_EXACT, &o, &error));
  g_assert_error (error, CS_REF_ERROR, CS_REF_ERROR_SHAPE);
  g_assert_nonnull (strstr (error->message, ":14: prims.matmul: inner dimensions differ: "
                                            "[3, 2] @ [1, 2]"));
  g_clear_error (&error);
  g_clear_pointer (&trace, cs_trace_unref);
  {
    g_autofree char *ok = g_strdup (text);
    char *line = strstr (ok, "  t5 =");
    memmove (line, strstr (line, "\n") + 1, strlen (strstr (line, "\n") + 1) + 1);
    trace = parse (ok);
  }
  g_assert_true (cs_ref_run (trace, in, 7, CS_REF_EXACT, &o, &error));
  g_assert_no_error (error);
  /* [[1,2],[3,4]] @ [[5,6],[7,8]] = [[19,22],[43,50]] */
  WANT2 (OUT (o, 0), CS_DTYPE_F32, 2, 2, 0, 19, 22, 43, 50);
  /* [1,2,3] . [1,2,3] = 14 */
  WANT0 (OUT (o, 1), CS_DTYPE_F32, 0, 14);
  /* x @ w^T = [1, 2, 3]; + bias [0.5, 0, -1] */
  WANT2 (OUT (o, 2), CS_DTYPE_F32, 1, 3, 0, 1.5, 2, 2);
  WANT2 (OUT (o, 3), CS_DTYPE_F32, 1, 3, 0, 1, 2, 3);
  /* batch [2,1,2] @ [2,2]: [1,0]@a = [1,2]; [0,1]@a = [3,4] */
  assert_values (OUT (o, 4), CS_DTYPE_F32, (const int64_t[]) { 2, 1, 2 }, 3,
                 (const double[]) { 1, 2, 3, 4 }, 0);
  free_inputs (in);
}

/* bf16 matmul: f32 accumulation then one rounding.  [1, 2^-8] . [1, 1] = 1 + 2^-8 exactly in
 * f32, which ties to bf16 1.0; [1, 2^-8, 2^-8] . [1, 1, 1] = 1 + 2^-7 stays. */
static void
test_matmul_bf16 (void)
{
  const char *text =
    "def computation(a, b):\n"
    "  # a: \"cpu bf16[2, 3]\"\n"
    "  # b: \"cpu bf16[3, 1]\"\n"
    "  t0 = prims.matmul(a, b)  # t0: \"cpu bf16[2, 1]\"\n"
    "  return t0\n";
  CsTensor *in[] = { T2 (CS_DTYPE_BF16, 2, 3, 1, 0x1p-8, 0, 1, 0x1p-8, 0x1p-8),
                     T2 (CS_DTYPE_BF16, 3, 1, 1, 1, 1), NULL };
  g_autoptr (GPtrArray) e = run_mode (text, CS_REF_EXACT, in);
  g_autoptr (GPtrArray) f = run_mode (text, CS_REF_F64, in);

  WANT2 (OUT (e, 0), CS_DTYPE_BF16, 2, 1, 0, 1.0, 1.0 + 0x1p-7);
  WANT2 (OUT (f, 0), CS_DTYPE_F64, 2, 1, 0, 1.0 + 0x1p-8, 1.0 + 0x1p-7);
  free_inputs (in);
}

/* ---- indexing and creation --------------------------------------------------------------- */

static void
test_indexing (void)
{
  const char *text =
    "def computation(a, idx, i2):\n"
    "  # a: \"cpu f32[3, 2]\"\n"
    "  # idx: \"cpu i64[2]\"\n"
    "  # i2: \"cpu i64[3, 2]\"\n"
    "  t0 = prims.take(a, idx, 0)  # t0: \"cpu f32[2, 2]\"\n"
    "  t1 = prims.embedding(idx, a, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False, sparse=False)  # t1: \"cpu f32[2, 2]\"\n"
    "  t2 = prims.take_along_axis(a, i2, 1)  # t2: \"cpu f32[3, 2]\"\n"
    "  t3 = prims.gather(a, i2, 1)  # t3: \"cpu f32[3, 2]\"\n"
    "  t4 = prims.take(a, idx, 1)  # t4: \"cpu f32[3, 2]\"\n"
    "  return (t0, t1, t2, t3, t4)\n";
  /* a = [[1, 2], [3, 4], [5, 6]], idx = [2, 0], i2 = [[1, 0], [0, 0], [1, 1]] */
  CsTensor *in[] = { T2 (CS_DTYPE_F32, 3, 2, 1, 2, 3, 4, 5, 6), T1 (CS_DTYPE_I64, 2, 2, 0),
                     T2 (CS_DTYPE_I64, 3, 2, 1, 0, 0, 0, 1, 1), NULL };
  g_autoptr (GPtrArray) o = NULL;

  {
    g_autoptr (CsTrace) trace = parse (text);
    g_autoptr (GError) error = NULL;

    /* t4 takes column 2 of a 2-column tensor */
    g_assert_false (cs_ref_run (trace, in, 3, CS_REF_EXACT, &o, &error));
    g_assert_error (error, CS_REF_ERROR, CS_REF_ERROR_VALUE);
    g_assert_nonnull (strstr (error->message, "index 2 is out of range for an extent of 2"));
    g_assert_nonnull (strstr (error->message, "test.txt:9: prims.take"));
    /* index bounds for random inputs: idx indexes dim 0 (3) and dim 1 (2) -> 2 */
    g_assert_cmpint (cs_ref_index_bound (trace, cs_trace_lookup_proxy (trace, "idx")), ==, 2);
    g_assert_cmpint (cs_ref_index_bound (trace, cs_trace_lookup_proxy (trace, "i2")), ==, 2);
    g_assert_cmpint (cs_ref_index_bound (trace, cs_trace_lookup_proxy (trace, "a")), ==, 0);
  }
  {
    g_autofree char *head = g_strdup (text);
    g_autofree char *ok = NULL;
    *strstr (head, "  t4 =") = '\0';
    ok = g_strconcat (head, "  return (t0, t1, t2, t3)\n", NULL);
    o = run (ok, in);
  }
  WANT2 (OUT (o, 0), CS_DTYPE_F32, 2, 2, 0, 5, 6, 1, 2);
  WANT2 (OUT (o, 1), CS_DTYPE_F32, 2, 2, 0, 5, 6, 1, 2);
  WANT2 (OUT (o, 2), CS_DTYPE_F32, 3, 2, 0, 2, 1, 3, 3, 6, 6);
  WANT2 (OUT (o, 3), CS_DTYPE_F32, 3, 2, 0, 2, 1, 3, 3, 6, 6);
  free_inputs (in);
}

static void
test_creation (void)
{
  const char *text =
    "def computation():\n"
    "  t0 = prims.full((2, 2), 1.5, device=devices.Device(\"cpu\"), dtype=dtypes.bfloat16)  # t0: \"cpu bf16[2, 2]\"\n"
    "  t1 = prims.iota(5, start=2, step=3, device=devices.Device(\"cpu\"), dtype=dtypes.int64)  # t1: \"cpu i64[5]\"\n"
    "  t2 = prims.uniform((1000,), -1.0, 3.0, device=devices.Device(\"cpu\"), dtype=dtypes.float32)  # t2: \"cpu f32[1000]\"\n"
    "  t3 = prims.full((3,), 0.1, device=devices.Device(\"cpu\"), dtype=dtypes.bfloat16)  # t3: \"cpu bf16[3]\"\n"
    "  return (t0, t1, t2, t3)\n";
  g_autoptr (GPtrArray) o = run (text, NULL);
  g_autoptr (GPtrArray) o2 = run (text, NULL);
  const CsTensor *u = OUT (o, 2);
  double lo = 10, hi = -10, mean = 0;

  WANT2 (OUT (o, 0), CS_DTYPE_BF16, 2, 2, 0, 1.5, 1.5, 1.5, 1.5);
  WANT1 (OUT (o, 1), CS_DTYPE_I64, 5, 0, 2, 5, 8, 11, 14);
  /* 0.1 in bf16: 1.1001101b * 2^-4 = 0.10009765625 */
  WANT1 (OUT (o, 3), CS_DTYPE_BF16, 3, 0, 0.10009765625, 0.10009765625, 0.10009765625);
  for (int64_t i = 0; i < u->numel; i++)
    {
      double v = cs_tensor_get_f64 (u, i);
      lo = MIN (lo, v);
      hi = MAX (hi, v);
      mean += v / u->numel;
    }
  g_assert_cmpfloat (lo, >=, -1.0);
  g_assert_cmpfloat (hi, <, 3.0);
  g_assert_cmpfloat (fabs (mean - 1.0), <, 0.2);   /* uniform(-1, 3) has mean 1, sd 1.15 */
  /* the same seed gives the same stream */
  g_assert_cmpmem (u->data, cs_tensor_nbytes (u), OUT (o2, 2)->data, cs_tensor_nbytes (u));
}

/* ---- statements: subsymbols, fusion regions, bookkeeping, errors ------------------------- */

static void
test_subsymbols_and_fusion (void)
{
  const char *text =
    "# Constructed by Delete Last Used\n"
    "import thunder\n"
    "import thunder.core.prims as prims\n"
    "import torch\n"
    "\n"
    "@torch.no_grad()\n"
    "@no_autocast\n"
    "def computation(a, b):\n"
    "  # a: \"cuda:0 f32[2]\"\n"
    "  # b: \"cuda:0 f32[2]\"\n"
    "  [t2, t3] = nvFusion0(a, b)\n"
    "    # t0 = prims.mul(a, b)  # t0: \"cuda:0 f32[2]\"\n"
    "    # t1 = prims.neg(t0)  # t1: \"cuda:0 f32[2]\"\n"
    "    # t2 = prims.add(t1, 1.0)  # t2: \"cuda:0 f32[2]\"\n"
    "    # t3 = prims.shallow_copy(a)  # t3: \"cuda:0 f32[2]\"\n"
    "  del a\n"
    "  t4 = torch.mul(t2, b)  # t4: \"cuda:0 f32[2]\"\n"
    "    # t4 = ltorch.mul(t2, b)  # t4: \"cuda:0 f32[2]\"\n"
    "      # t4 = prims.mul(t2, b)  # t4: \"cuda:0 f32[2]\"\n"
    "  return {'output': (t4,), 'flat_args': [t3, b]}\n";
  CsTensor *in[] = { T1 (CS_DTYPE_F32, 2, 2, 3), T1 (CS_DTYPE_F32, 2, 4, 5), NULL };
  g_autoptr (CsTrace) trace = parse (text);
  g_autoptr (GPtrArray) o = NULL;
  g_autoptr (GPtrArray) names = NULL;
  g_autoptr (GHashTable) env = cs_ref_env_new ();
  g_autoptr (GHashTable) returned = cs_ref_env_new ();
  g_autoptr (GError) error = NULL;

  cs_ref_env_insert (env, "a", in[0]);
  cs_ref_env_insert (env, "b", in[1]);
  g_assert_true (cs_ref_run_env (trace, env, CS_REF_EXACT, 0, &o, &names, returned, &error));
  g_assert_no_error (error);
  /* t2 = 1 - a*b = [-7, -14]; t4 = t2 * b = [-28, -70] */
  g_assert_cmpuint (o->len, ==, 3);
  WANT1 (OUT (o, 0), CS_DTYPE_F32, 2, 0, -28, -70);
  WANT1 (OUT (o, 1), CS_DTYPE_F32, 2, 0, 2, 3);
  g_assert_cmpstr (g_ptr_array_index (names, 0), ==, "t4");
  g_assert_cmpstr (g_ptr_array_index (names, 2), ==, "b");
  g_assert_true (g_hash_table_contains (returned, "t4"));
  free_inputs (in);
}

static void
test_unsupported (void)
{
  CsTensor *in[] = { T1 (CS_DTYPE_F32, 2, 1, 2), NULL };

  run_fails ("def computation(a):\n"
             "  # a: \"cpu f32[2]\"\n"
             "  t0 = prims.neg(a)  # t0: \"cpu f32[2]\"\n"
             "\n"
             "  # fns.py:3: \tfoo(a)\n"
             "  t1 = ltorch.foo(t0)  # t1: \"cpu f32[2]\"\n"
             "  return t1\n", in, CS_REF_ERROR_UNSUPPORTED, ":6: no CPU reference for ltorch.foo");
  /* an ltorch op printed without its decomposition (trace.python() output) */
  run_fails ("def computation(a):\n"
             "  # a: \"cpu f32[2]\"\n"
             "  t0 = ltorch.softmax(a, 0)  # t0: \"cpu f32[2]\"\n"
             "  return t0\n", in, CS_REF_ERROR_UNSUPPORTED, ":3: no CPU reference for ltorch.softmax");
  /* a name no statement produced: a context name (leading '_'), which the parser lets through
   * as a constant (an undefined plain name is refused by cs_validate_trace already) */
  run_fails ("def computation(a):\n"
             "  # a: \"cpu f32[2]\"\n"
             "  t0 = prims.neg(_zz)  # t0: \"cpu f32[2]\"\n"
             "  return t0\n", in, CS_REF_ERROR_UNBOUND, "'_zz' has no value");
  /* wrong input dtype */
  run_fails ("def computation(a):\n"
             "  # a: \"cpu bf16[2]\"\n"
             "  return a\n", in, CS_REF_ERROR_INPUT, "input a: the trace says \"cpu bf16[2]\" but the value is f32[2]");
  run_fails ("def computation(a, b):\n"
             "  # a: \"cpu f32[2]\"\n"
             "  return a\n", in, CS_REF_ERROR_INPUT, "takes 2 inputs, 1 given");
  free_inputs (in);
}

/* Forward then backward by name: y = a * b; ga = g * b, gb = g * a (Thunder's split layout). */
static const char *fwd_text =
  "def computation(a, b):\n"
  "  # a: \"cuda:0 f32[2]\"\n"
  "  # b: \"cuda:0 f32[2]\"\n"
  "  t0 = prims.mul(a, b)  # t0: \"cuda:0 f32[2]\"\n"
  "  return {'output': (t0,), 'flat_args': [a, b], 'flat_output': (t0,)}, ((a, b), ())\n";
static const char *bwd_text =
  "def backward_fn(saved_for_backward, cotangents):\n"
  "  # saved_for_backward: \"Collection\"\n"
  "  # cotangents: \"Collection\"\n"
  "  C0, C1, = saved_for_backward\n"
  "  # C0: \"Collection\"\n"
  "  # C1: \"Collection\"\n"
  "  clear_mutable_collection(saved_for_backward)\n"
  "  clear_mutable_collection(C1)\n"
  "  del C1, saved_for_backward\n"
  "  t4, = cotangents\n"
  "  # t4: \"cuda:0 f32[2]\"\n"
  "  clear_mutable_collection(cotangents)\n"
  "  del cotangents\n"
  "  a, b, = C0\n"
  "  # a: \"cuda:0 f32[2]\"\n"
  "  # b: \"cuda:0 f32[2]\"\n"
  "  clear_mutable_collection(C0)\n"
  "  del C0\n"
  "  t5 = prims.mul(t4, b)  # t5: \"cuda:0 f32[2]\"\n"
  "  t6 = prims.mul(t4, a)  # t6: \"cuda:0 f32[2]\"\n"
  "  return (t5, t6)\n";

static void
test_forward_backward (void)
{
  g_autoptr (CsTrace) fwd = parse (fwd_text);
  g_autoptr (CsTrace) bwd = parse (bwd_text);
  g_autoptr (GPtrArray) leaves = cs_ref_dup_leaf_inputs (bwd);
  g_autoptr (GHashTable) env = cs_ref_env_new ();
  g_autoptr (GHashTable) saved = cs_ref_env_new ();
  g_autoptr (GPtrArray) fo = NULL;
  g_autoptr (GPtrArray) bo = NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (CsTensor) a = T1 (CS_DTYPE_F32, 2, 2, 3);
  g_autoptr (CsTensor) b = T1 (CS_DTYPE_F32, 2, 5, 7);
  g_autoptr (CsTensor) g = T1 (CS_DTYPE_F32, 2, 1, -1);

  /* backward leaves in signature order: C0's tensors (C1, never unpacked, holds nothing),
   * then the cotangent */
  g_assert_cmpuint (leaves->len, ==, 3);
  g_assert_cmpstr (((CsProxy *) g_ptr_array_index (leaves, 0))->name, ==, "a");
  g_assert_cmpstr (((CsProxy *) g_ptr_array_index (leaves, 1))->name, ==, "b");
  g_assert_cmpstr (((CsProxy *) g_ptr_array_index (leaves, 2))->name, ==, "t4");

  cs_ref_env_insert (env, "a", a);
  cs_ref_env_insert (env, "b", b);
  g_assert_true (cs_ref_run_env (fwd, env, CS_REF_EXACT, 0, &fo, NULL, saved, &error));
  g_assert_no_error (error);
  WANT1 (OUT (fo, 0), CS_DTYPE_F32, 2, 0, 10, 21);
  cs_ref_env_insert (saved, "t4", g);
  g_assert_true (cs_ref_run_env (bwd, saved, CS_REF_EXACT, 0, &bo, NULL, NULL, &error));
  g_assert_no_error (error);
  WANT1 (OUT (bo, 0), CS_DTYPE_F32, 2, 0, 5, -7);
  WANT1 (OUT (bo, 1), CS_DTYPE_F32, 2, 0, 2, -3);
}

/* The MLP (bf16, GELU tanh) that Thunder printed: forward then backward on random inputs, in
 * exact and f64 mode.  The bf16 outputs must sit within bf16 rounding of the f64 truth, and
 * the backward's gradient of b2 must equal the column sums of the cotangent (d/db2 of
 * sum(g * (h @ w2^T + b2)) = sum over rows of g), checked in f64 mode. */
static void
test_thunder_mlp (void)
{
  const char *dir = g_getenv ("CS_SHARED_TRACES");
  g_autofree char *fpath = NULL;
  g_autofree char *bpath = NULL;
  g_autoptr (CsTraceList) fl = NULL;
  g_autoptr (CsTraceList) bl = NULL;
  g_autoptr (GError) error = NULL;
  CsTrace *fwd, *bwd;
  g_autoptr (GPtrArray) fleaves = NULL;
  g_autoptr (GPtrArray) bleaves = NULL;
  g_autoptr (GHashTable) env = cs_ref_env_new ();
  g_autoptr (GHashTable) saved_e = cs_ref_env_new ();
  g_autoptr (GHashTable) saved_f = cs_ref_env_new ();
  g_autoptr (GPtrArray) fe = NULL, ff = NULL, be = NULL, bf = NULL;
  CsTensor *g = NULL;
  double max_rel = 0;

  if (dir == NULL)
    {
      g_test_skip ("CS_SHARED_TRACES not set");
      return;
    }
  fpath = g_build_filename (dir, "thunder_b_mlp_gelu_final_fwd.txt", NULL);
  bpath = g_build_filename (dir, "thunder_b_mlp_gelu_final_bwd.txt", NULL);
  if (!g_file_test (fpath, G_FILE_TEST_EXISTS))
    {
      g_test_skip ("shared traces absent");
      return;
    }
  fl = cs_parse_file (fpath, &error);
  g_assert_no_error (error);
  bl = cs_parse_file (bpath, &error);
  g_assert_no_error (error);
  fwd = g_ptr_array_index (fl->traces, 0);
  bwd = g_ptr_array_index (bl->traces, 0);

  fleaves = cs_ref_dup_leaf_inputs (fwd);
  g_assert_cmpuint (fleaves->len, ==, 5);
  for (guint i = 0; i < fleaves->len; i++)
    {
      CsProxy *p = g_ptr_array_index (fleaves, i);
      g_autoptr (CsTensor) t = cs_ref_random_input (fwd, p, 1, &error);
      g_assert_no_error (error);
      cs_ref_env_insert (env, p->name, t);
    }
  g_assert_true (cs_ref_run_env (fwd, env, CS_REF_EXACT, 0, &fe, NULL, saved_e, &error));
  g_assert_no_error (error);
  g_assert_true (cs_ref_run_env (fwd, env, CS_REF_F64, 0, &ff, NULL, saved_f, &error));
  g_assert_no_error (error);
  g_assert_cmpint (OUT (fe, 0)->dtype, ==, CS_DTYPE_BF16);
  g_assert_cmpint (OUT (ff, 0)->dtype, ==, CS_DTYPE_F64);
  g_assert_cmpint (OUT (fe, 0)->shape[0], ==, 64);
  g_assert_cmpint (OUT (fe, 0)->shape[1], ==, 128);
  {
    double num = 0, den = 0;
    for (int64_t i = 0; i < OUT (fe, 0)->numel; i++)
      {
        double e = cs_tensor_get_f64 (OUT (fe, 0), i), t = cs_tensor_get_f64 (OUT (ff, 0), i);
        g_assert_true (isfinite (e));
        num += (e - t) * (e - t);
        den += t * t;
        max_rel = MAX (max_rel, fabs (e - t) / MAX (fabs (t), 1e-2));
      }
    /* relative RMS error of a bf16 two-layer MLP: a few bf16 ulps (2^-8 = 0.0039) */
    g_assert_cmpfloat (sqrt (num / den), <, 0.02);
    g_assert_cmpfloat (sqrt (num / den), >, 1e-4);   /* rounding did happen */
  }

  bleaves = cs_ref_dup_leaf_inputs (bwd);
  for (guint i = 0; i < bleaves->len; i++)
    {
      CsProxy *p = g_ptr_array_index (bleaves, i);
      if (!g_hash_table_contains (saved_e, p->name))
        {
          g = cs_ref_random_input (bwd, p, 2, &error);
          g_assert_no_error (error);
          cs_ref_env_insert (saved_e, p->name, g);
          cs_ref_env_insert (saved_f, p->name, g);
          cs_tensor_unref (g);
        }
    }
  g_assert_true (cs_ref_run_env (bwd, saved_e, CS_REF_EXACT, 0, &be, NULL, NULL, &error));
  g_assert_no_error (error);
  g_assert_true (cs_ref_run_env (bwd, saved_f, CS_REF_F64, 0, &bf, NULL, NULL, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (bf->len, ==, 5);
  {
    /* backward returns grads for (x, w1, b1, w2, b2): the last is sum over rows of t145 */
    const CsTensor *gb2 = OUT (bf, 4);
    const CsTensor *cot = g_hash_table_lookup (saved_f, "t145");
    g_assert_nonnull (cot);
    g_assert_cmpint (gb2->numel, ==, 128);
    for (int64_t j = 0; j < 128; j++)
      {
        double sum = 0;
        for (int64_t i = 0; i < 64; i++)
          sum += cs_tensor_get_f64 (cot, i * 128 + j);
        g_assert_cmpfloat_with_epsilon (cs_tensor_get_f64 (gb2, j), sum, 1e-9);
      }
  }
}

/* Thunder's joint trace (forward + backward in one, grads under 'output') and its final
 * forward + backward pair compute the same gradients from the same inputs and cotangent:
 * equal to f64 rounding in f64 mode, and within bf16 rounding in exact mode (the final traces
 * round at their own places). */
static void
test_joint_vs_split (void)
{
  const char *dir = g_getenv ("CS_SHARED_TRACES");
  const char *stems[] = { "thunder_a_seed_matmul", "thunder_b_mlp_gelu",
                          "thunder_e_softmax_attention" };

  if (dir == NULL || !g_file_test (dir, G_FILE_TEST_IS_DIR))
    {
      g_test_skip ("shared traces absent");
      return;
    }
  for (guint st = 0; st < G_N_ELEMENTS (stems); st++)
    for (int mode = 0; mode < 2; mode++)
      {
        g_autofree char *jf = g_strdup_printf ("%s/%s_grad_joint.txt", dir, stems[st]);
        g_autofree char *ff = g_strdup_printf ("%s/%s_final_fwd.txt", dir, stems[st]);
        g_autofree char *bf = g_strdup_printf ("%s/%s_final_bwd.txt", dir, stems[st]);
        g_autoptr (CsTraceList) jl = cs_parse_file (jf, NULL);
        g_autoptr (CsTraceList) fl = cs_parse_file (ff, NULL);
        g_autoptr (CsTraceList) bl = cs_parse_file (bf, NULL);
        CsTrace *joint, *fwd, *bwd;
        g_autoptr (GPtrArray) jleaves = NULL;
        g_autoptr (GPtrArray) bleaves = NULL;
        g_autoptr (GHashTable) env = cs_ref_env_new ();
        g_autoptr (GHashTable) saved = cs_ref_env_new ();
        g_autoptr (GPtrArray) jo = NULL, fo = NULL, bo = NULL;
        g_autoptr (GError) error = NULL;
        CsRefMode m = mode ? CS_REF_F64 : CS_REF_EXACT;

        g_assert_nonnull (jl);
        g_assert_nonnull (fl);
        g_assert_nonnull (bl);
        joint = g_ptr_array_index (jl->traces, 0);
        fwd = g_ptr_array_index (fl->traces, 0);
        bwd = g_ptr_array_index (bl->traces, 0);
        /* joint leaves: the forward inputs and the get_grad cotangent */
        jleaves = cs_ref_dup_leaf_inputs (joint);
        for (guint i = 0; i < jleaves->len; i++)
          {
            CsProxy *p = g_ptr_array_index (jleaves, i);
            g_autoptr (CsTensor) t = cs_ref_random_input (joint, p, 5, &error);
            g_assert_no_error (error);
            cs_ref_env_insert (env, p->name, t);
          }
        g_assert_true (cs_ref_run_env (joint, env, m, 0, &jo, NULL, NULL, &error));
        g_assert_no_error (error);
        g_assert_true (cs_ref_run_env (fwd, env, m, 0, &fo, NULL, saved, &error));
        g_assert_no_error (error);
        /* the backward's cotangent has the joint's get_grad name */
        bleaves = cs_ref_dup_leaf_inputs (bwd);
        for (guint i = 0; i < bleaves->len; i++)
          {
            CsProxy *p = g_ptr_array_index (bleaves, i);
            if (!g_hash_table_contains (saved, p->name))
              {
                CsTensor *t = g_hash_table_lookup (env, p->name);
                g_assert_nonnull (t);
                cs_ref_env_insert (saved, p->name, t);
              }
          }
        g_assert_true (cs_ref_run_env (bwd, saved, m, 0, &bo, NULL, NULL, &error));
        g_assert_no_error (error);
        /* joint 'output' = one grad per flat arg; backward returns the same list */
        for (guint i = 0; i < bo->len; i++)
          {
            const CsTensor *gj = g_ptr_array_index (jo, i), *gs = g_ptr_array_index (bo, i);
            double num = 0, den = 0;

            if (gs == NULL)
              continue;
            g_assert_nonnull (gj);
            g_assert_cmpint (gj->numel, ==, gs->numel);
            for (int64_t k = 0; k < gs->numel; k++)
              {
                double a = cs_tensor_get_f64 (gj, k), b = cs_tensor_get_f64 (gs, k);
                num += (a - b) * (a - b);
                den += b * b;
              }
            if (g_test_verbose ())
              g_test_message ("%s %s grad %u: rel diff %.3e", stems[st], mode ? "f64" : "exact",
                              i, sqrt (num / MAX (den, 1e-300)));
            /* the torch-executor final traces round at exactly the joint's places: the
             * results are bit-identical in both modes */
            g_assert_cmpfloat (num, ==, 0.0);
          }
      }
}

/* nvFuser's fused joint (regions, redundant casts removed inside them) against the unfused
 * joint on the same inputs and cotangent: the same function (f64 results equal to 1e-12),
 * rounded at different places (exact results differ, within bf16 error). */
static void
test_fused_vs_unfused (void)
{
  const char *dir = g_getenv ("CS_SHARED_TRACES");
  const char *pairs[][2] = {
    { "thunder_b_mlp_gelu_grad_joint", "thunder_nvfuser_b_mlp_gelu_default_fused_joint" },
    { "thunder_a_seed_matmul_grad_joint", "thunder_nvfuser_a_seed_matmul_default_fused_joint" },
  };
  gboolean any_differs = FALSE;

  if (dir == NULL || !g_file_test (dir, G_FILE_TEST_IS_DIR))
    {
      g_test_skip ("shared traces absent");
      return;
    }
  for (guint pi = 0; pi < G_N_ELEMENTS (pairs); pi++)
    for (int mode = 0; mode < 2; mode++)
      {
        g_autofree char *pa = g_strdup_printf ("%s/%s.txt", dir, pairs[pi][0]);
        g_autofree char *pb = g_strdup_printf ("%s/%s.txt", dir, pairs[pi][1]);
        g_autoptr (CsTraceList) la = cs_parse_file (pa, NULL);
        g_autoptr (CsTraceList) lb = cs_parse_file (pb, NULL);
        CsTrace *ta, *tb;
        g_autoptr (GPtrArray) leaves_a = NULL, leaves_b = NULL;
        g_autoptr (GPtrArray) inputs = g_ptr_array_new_with_free_func ((GDestroyNotify) cs_tensor_unref);
        g_autoptr (GPtrArray) oa = NULL, ob = NULL;
        g_autoptr (GError) error = NULL;
        CsRefMode m = mode ? CS_REF_F64 : CS_REF_EXACT;

        g_assert_nonnull (la);
        g_assert_nonnull (lb);
        ta = g_ptr_array_index (la->traces, 0);
        tb = g_ptr_array_index (lb->traces, 0);
        leaves_a = cs_ref_dup_leaf_inputs (ta);
        leaves_b = cs_ref_dup_leaf_inputs (tb);
        g_assert_cmpuint (leaves_a->len, ==, leaves_b->len);
        for (guint i = 0; i < leaves_a->len; i++)
          {
            CsTensor *t = cs_ref_random_input (ta, g_ptr_array_index (leaves_a, i), 9, &error);
            g_assert_no_error (error);
            g_ptr_array_add (inputs, t);
          }
        g_assert_true (cs_ref_run (ta, (CsTensor **) inputs->pdata, inputs->len, m, &oa, &error));
        g_assert_no_error (error);
        g_assert_true (cs_ref_run (tb, (CsTensor **) inputs->pdata, inputs->len, m, &ob, &error));
        g_assert_no_error (error);
        g_assert_cmpuint (oa->len, ==, ob->len);
        for (guint i = 0; i < oa->len; i++)
          {
            const CsTensor *x = g_ptr_array_index (oa, i), *y = g_ptr_array_index (ob, i);
            double num = 0, den = 0;

            if (x == NULL || y == NULL)
              continue;
            g_assert_cmpint (x->numel, ==, y->numel);
            for (int64_t k = 0; k < x->numel; k++)
              {
                double a = cs_tensor_get_f64 (x, k), b = cs_tensor_get_f64 (y, k);
                num += (a - b) * (a - b);
                den += b * b;
              }
            if (g_test_verbose ())
              g_test_message ("%s %s output %u: rel diff %.3e", pairs[pi][1],
                              mode ? "f64" : "exact", i, sqrt (num / MAX (den, 1e-300)));
            if (mode)
              g_assert_cmpfloat (sqrt (num / MAX (den, 1e-300)), <, 1e-12);
            else
              {
                g_assert_cmpfloat (sqrt (num / MAX (den, 1e-300)), <, 2e-2);
                any_differs |= num > 0;
              }
          }
      }
  /* removing the bf16 round trips inside regions changes some bits */
  g_assert_true (any_differs);
}

/* ---- attention executor calls, nll_loss_backward, embedding_backward -------------------- */

#define SDPA_FWD_TEXT \
  "def computation(q, k, v):\n" \
  "  # q: \"cuda:0 f64[1, 2, 1]\"\n" \
  "  # k: \"cuda:0 f64[1, 2, 1]\"\n" \
  "  # v: \"cuda:0 f64[1, 2, 1]\"\n" \
  "  (t0, t1, t2, t3, _, _, t4, t5, t6) = sdpafx_grad_forward_scaled_dot_product_efficient_attention(q, k, v, 0.0, %s, scale=1.0)\n" \
  "  return (t0, t1)\n"

/* q = [1, 0], k = [1, 0], v = [1, 3], scale 1: row 0 weights e/(e+1), 1/(e+1) give
 * 1.5378828427, logsumexp log(e + 1) = 1.3132616875; row 1 ties: 2.0, log 2.  Causal: row 0
 * sees only key 0: 1.0, logsumexp 1.0. */
static void
test_sdpa_forward (void)
{
  const int64_t sh[3] = { 1, 2, 1 };
  CsTensor *in[] = { tensor (CS_DTYPE_F64, sh, 3, (const double[]) { 1, 0 }),
                     tensor (CS_DTYPE_F64, sh, 3, (const double[]) { 1, 0 }),
                     tensor (CS_DTYPE_F64, sh, 3, (const double[]) { 1, 3 }), NULL };
  g_autofree char *plain = g_strdup_printf (SDPA_FWD_TEXT, "False");
  g_autofree char *causal = g_strdup_printf (SDPA_FWD_TEXT, "True");
  g_autoptr (GPtrArray) o = run (plain, in);
  g_autoptr (GPtrArray) oc = run (causal, in);

  assert_values (OUT (o, 0), CS_DTYPE_F64, sh, 3, (const double[]) { 1.5378828427, 2.0 }, 1e-9);
  assert_values (OUT (o, 1), CS_DTYPE_F32, sh, 2, (const double[]) { 1.3132616875, 0.6931471806 }, 1e-6);
  assert_values (OUT (oc, 0), CS_DTYPE_F64, sh, 3, (const double[]) { 1.0, 2.0 }, 1e-12);
  assert_values (OUT (oc, 1), CS_DTYPE_F32, sh, 2, (const double[]) { 1.0, 0.6931471806 }, 1e-6);
  free_inputs (in);
}

/* The attention backward against central finite differences of sum(dO * sdpa(q, k, v)) in
 * f64 (L = S = 3, E = 2, causal). */
static void
test_sdpa_backward_fd (void)
{
  const char *fwd =
    "def computation(q, k, v):\n"
    "  # q: \"cuda:0 f64[1, 3, 2]\"\n"
    "  # k: \"cuda:0 f64[1, 3, 2]\"\n"
    "  # v: \"cuda:0 f64[1, 3, 2]\"\n"
    "  (t0, t1, t2, t3, _, _, t4, t5, t6) = sdpafx_grad_forward_scaled_dot_product_efficient_attention(q, k, v, 0.0, True, scale=None)\n"
    "  return (t0, t1)\n";
  const char *bwd =
    "def backward_fn(g, q, k, v, o, lse):\n"
    "  # g: \"cuda:0 f64[1, 3, 2]\"\n"
    "  # q: \"cuda:0 f64[1, 3, 2]\"\n"
    "  # k: \"cuda:0 f64[1, 3, 2]\"\n"
    "  # v: \"cuda:0 f64[1, 3, 2]\"\n"
    "  # o: \"cuda:0 f64[1, 3, 2]\"\n"
    "  # lse: \"cuda:0 f32[1, 3]\"\n"
    "  (t0, t1, t2) = sdpafx_scaled_dot_product_efficient_attention_backward(g, q, k, v, o, lse, None, None, 3, 3, 0.0, True, None, None, scale=None)\n"
    "  return (t0, t1, t2)\n";
  const int64_t sh[3] = { 1, 3, 2 };
  const double qv[6] = { 0.3, -0.7, 1.1, 0.2, -0.4, 0.9 };
  const double kv[6] = { 0.5, 0.1, -0.6, 0.8, 0.2, -1.0 };
  const double vv[6] = { 1.0, -2.0, 0.5, 0.25, -1.5, 2.0 };
  const double gv[6] = { 0.7, -0.3, 0.2, 1.0, -0.9, 0.4 };
  const double *base[3] = { qv, kv, vv };
  g_autoptr (CsTrace) ft = parse (fwd);
  g_autoptr (CsTrace) bt = parse (bwd);
  g_autoptr (GPtrArray) fo = NULL;
  g_autoptr (GPtrArray) bo = NULL;
  g_autoptr (GError) error = NULL;
  CsTensor *fin[4] = { tensor (CS_DTYPE_F64, sh, 3, qv), tensor (CS_DTYPE_F64, sh, 3, kv),
                       tensor (CS_DTYPE_F64, sh, 3, vv), NULL };
  CsTensor *bin[7] = { NULL };

  g_assert_true (cs_ref_run (ft, fin, 3, CS_REF_F64, &fo, &error));
  g_assert_no_error (error);
  bin[0] = tensor (CS_DTYPE_F64, sh, 3, gv);
  bin[1] = fin[0];
  bin[2] = fin[1];
  bin[3] = fin[2];
  bin[4] = OUT (fo, 0);
  bin[5] = OUT (fo, 1);
  g_assert_true (cs_ref_run (bt, bin, 6, CS_REF_F64, &bo, &error));
  g_assert_no_error (error);

  for (int which = 0; which < 3; which++)
    for (int e = 0; e < 6; e++)
      {
        double lp = 0, lm = 0, h = 1e-6;

        for (int sign = -1; sign <= 1; sign += 2)
          {
            double pert[6];
            CsTensor *pin[4] = { NULL, NULL, NULL, NULL };
            g_autoptr (GPtrArray) po = NULL;
            double loss = 0;

            for (int j = 0; j < 3; j++)
              {
                memcpy (pert, base[j], sizeof pert);
                if (j == which)
                  pert[e] += sign * h;
                pin[j] = tensor (CS_DTYPE_F64, sh, 3, pert);
              }
            g_assert_true (cs_ref_run (ft, pin, 3, CS_REF_F64, &po, &error));
            for (int i = 0; i < 6; i++)
              loss += gv[i] * cs_tensor_get_f64 (OUT (po, 0), i);
            if (sign < 0)
              lm = loss;
            else
              lp = loss;
            free_inputs (pin);
          }
        g_assert_cmpfloat_with_epsilon (cs_tensor_get_f64 (OUT (bo, which), e), (lp - lm) / (2 * h),
                                        1e-6);
      }
  cs_tensor_unref (bin[0]);
  free_inputs (fin);
}

/* nll_loss_backward for 'mean' with ignore_index: rows 0 and 2 count (total weight 2), row 1
 * is ignored: grad[0, 2] = grad[2, 0] = -g / 2 = -0.75. */
static void
test_loss_embedding_backward (void)
{
  const char *text =
    "def backward_fn(g, a, target, tw, go, idx):\n"
    "  # g: \"cuda:0 f32[]\"\n"
    "  # a: \"cuda:0 f32[3, 3]\"\n"
    "  # target: \"cuda:0 i64[3]\"\n"
    "  # tw: \"cuda:0 f32[]\"\n"
    "  # go: \"cuda:0 f32[4, 2]\"\n"
    "  # idx: \"cuda:0 i64[4]\"\n"
    "  t0 = ltorch.nll_loss_backward(g, a, target, None, 'mean', -100, tw)  # t0: \"cuda:0 f32[3, 3]\"\n"
    "  t1 = prims.embedding_backward(go, idx, 3, -1, False, False)  # t1: \"cuda:0 f32[3, 2]\"\n"
    "  t2 = prims.embedding_backward(go, idx, 3, 1, True, False)  # t2: \"cuda:0 f32[3, 2]\"\n"
    "  return (t0, t1, t2)\n";
  CsTensor *in[] = { tensor (CS_DTYPE_F32, NULL, 0, (const double[]) { 1.5 }),
                     T2 (CS_DTYPE_F32, 3, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0),
                     T1 (CS_DTYPE_I64, 3, 2, -100, 0),
                     tensor (CS_DTYPE_F32, NULL, 0, (const double[]) { 2.0 }),
                     T2 (CS_DTYPE_F32, 4, 2, 1, 2, 3, 4, 5, 6, 7, 8),
                     T1 (CS_DTYPE_I64, 4, 0, 2, 0, 1), NULL };
  g_autoptr (GPtrArray) o = run (text, in);

  WANT2 (OUT (o, 0), CS_DTYPE_F32, 3, 3, 0, 0, 0, -0.75, 0, 0, 0, -0.75, 0, 0);
  /* rows 0 and 2 of go go to index 0: [1+5, 2+6]; row 1 to 2; row 3 to 1 */
  WANT2 (OUT (o, 1), CS_DTYPE_F32, 3, 2, 0, 6, 8, 7, 8, 3, 4);
  /* padding_idx 1 skipped, scale_grad_by_freq halves index 0 (seen twice) */
  WANT2 (OUT (o, 2), CS_DTYPE_F32, 3, 2, 0, 3, 4, 0, 0, 3, 4);
  free_inputs (in);
}

/* scatter_add / scatter: row 0 gets 1 at column 0 and 2 at column 2; row 1 gets 3 and 4 at
 * column 1 (added: 7; written: the last write, 4). */
static void
test_scatter (void)
{
  const char *text =
    "def computation(a, idx, v):\n"
    "  # a: \"cpu f32[2, 3]\"\n"
    "  # idx: \"cpu i64[2, 2]\"\n"
    "  # v: \"cpu f32[2, 2]\"\n"
    "  t0 = prims.scatter_add(a, idx, v, 1)  # t0: \"cpu f32[2, 3]\"\n"
    "  t1 = prims.scatter(a, idx, v, 1)  # t1: \"cpu f32[2, 3]\"\n"
    "  return (t0, t1)\n";
  CsTensor *in[] = { T2 (CS_DTYPE_F32, 2, 3, 0, 0, 0, 0, 0, 0),
                     T2 (CS_DTYPE_I64, 2, 2, 0, 2, 1, 1), T2 (CS_DTYPE_F32, 2, 2, 1, 2, 3, 4),
                     NULL };
  g_autoptr (GPtrArray) o = run (text, in);

  WANT2 (OUT (o, 0), CS_DTYPE_F32, 2, 3, 0, 1, 0, 2, 0, 7, 0);
  WANT2 (OUT (o, 1), CS_DTYPE_F32, 2, 3, 0, 1, 0, 2, 0, 4, 0);
  free_inputs (in);

  /* index_add along dim 1 of zeros[2, 3] with index [2, 2] and value [[1, 2], [3, 4]]: both
   * columns land on column 2: [3, 7] */
  {
    const char *t2 =
      "def computation(a, idx, v):\n"
      "  # a: \"cpu f32[2, 3]\"\n"
      "  # idx: \"cpu i64[2]\"\n"
      "  # v: \"cpu f32[2, 2]\"\n"
      "  t0 = prims.index_add(a, idx, v, 1)  # t0: \"cpu f32[2, 3]\"\n"
      "  return t0\n";
    CsTensor *in2[] = { T2 (CS_DTYPE_F32, 2, 3, 0, 0, 0, 0, 0, 0), T1 (CS_DTYPE_I64, 2, 2, 2),
                        T2 (CS_DTYPE_F32, 2, 2, 1, 2, 3, 4), NULL };
    g_autoptr (GPtrArray) o2 = run (t2, in2);

    WANT2 (OUT (o2, 0), CS_DTYPE_F32, 2, 3, 0, 0, 0, 3, 0, 0, 7);
    free_inputs (in2);
  }
}

/* Work estimate: linear [2, 3] x [4, 3]^T = 2*2*4*3 = 48 FLOP, plus neg over 8 elements. */
static void
test_estimate (void)
{
  g_autoptr (CsTrace) t = parse ("def computation(a, w):\n"
                                 "  # a: \"cpu f32[2, 3]\"\n"
                                 "  # w: \"cpu f32[4, 3]\"\n"
                                 "  t0 = prims.linear(a, w, None)  # t0: \"cpu f32[2, 4]\"\n"
                                 "  t1 = ltorch.neg(t0)  # t1: \"cpu f32[2, 4]\"\n"
                                 "    # t1 = prims.neg(t0)  # t1: \"cpu f32[2, 4]\"\n"
                                 "  return t1\n");
  double flops = 0, elems = 0;

  cs_ref_estimate (t, &flops, &elems);
  g_assert_cmpfloat (flops, ==, 56);
  g_assert_cmpfloat (elems, ==, 8);
}

/* Robustness: every prim of the op table and the executor calls with a list of malformed
 * argument patterns either runs or fails with a CS_REF_ERROR naming the statement; never a
 * crash (run this test under ASan/UBSan too). */
static void
test_malformed_arguments (void)
{
  static const char *patterns[] = {
    "", "a", "a, a", "a, 'x'", "1.5", "a, (0,)", "a, [2, 3], [0]", "a, [2, 3], [1]",
    "a, a, a", "[a], 0", "[a, i], 0", "a, None", "None, None, None", "a, (5,)", "a, (-1,)",
    "a, i", "i, a, 0", "a, i, 7", "a, i, 1", "a, i, -3", "a, [6], [0]", "(2, 3), 1.0",
    "(2, -3), 1.0, device=devices.Device(\"cpu\"), dtype=dtypes.float32", "-5, start=0",
    "a, 0.0, [(1, 1, 0)]", "a, 0.0, [(1, 1, -1), (0, 0, 0)]", "a, [0, 0], [9, 9], [1, 1]",
    "a, [0, 0], [2, 3], [0, 1]", "a, (1, 0, 2)", "a, (0, 0)", "a, dtypes.float32",
    "a, dtypes.complex64", "i, 0", "a, b", "b, a", "a, a, a, 0.0, True", "a, (0, 1), correction=7",
  };
  const char *header =
    "def computation(a, b, i):\n"
    "  # a: \"cpu f32[2, 3]\"\n"
    "  # b: \"cpu bf16[3, 2]\"\n"
    "  # i: \"cpu i64[2]\"\n";
  CsTensor *in[] = { T2 (CS_DTYPE_F32, 2, 3, 1, 2, 3, 4, 5, 6), T2 (CS_DTYPE_BF16, 3, 2, 1, 2, 3, 4, 5, 6),
                     T1 (CS_DTYPE_I64, 2, 0, 5), NULL };
  guint n_ok = 0, n_err = 0;

  for (int id = 0; id < CS_N_OPS; id++)
    {
      const CsOp *op = cs_op_get ((CsOpId) id);

      if (!g_str_has_prefix (op->name, "prims.") && !g_str_has_prefix (op->name, "sdpafx_")
          && strcmp (op->name, "ltorch.nll_loss_backward") != 0
          && strcmp (op->name, "ltorch.embedding_backward") != 0)
        continue;
      for (guint k = 0; k < G_N_ELEMENTS (patterns); k++)
        {
          g_autofree char *text = g_strdup_printf ("%s  t9 = %s(%s)\n  return t9\n", header,
                                                   op->name, patterns[k]);
          g_autoptr (GError) error = NULL;
          g_autoptr (CsTrace) trace = cs_parse_trace (text, "m.txt", &error);
          g_autoptr (GPtrArray) out = NULL;

          if (trace == NULL)
            continue;   /* the parser refused it: nothing to run */
          if (cs_ref_run (trace, in, 3, CS_REF_EXACT, &out, &error))
            n_ok++;
          else
            {
              if (error == NULL)
                g_error ("%s(%s) failed without an error", op->name, patterns[k]);
              g_assert_true (error->domain == CS_REF_ERROR || error->domain == CS_TENSOR_ERROR);
              n_err++;
            }
        }
    }
  /* most patterns are wrong for most prims */
  g_assert_cmpuint (n_err, >, n_ok);
  g_assert_cmpuint (n_ok, >, 50);
  if (g_test_verbose ())
    g_test_message ("%u ran, %u refused", n_ok, n_err);
  free_inputs (in);
}

/* ---- castscope-cli run --device cpu ------------------------------------------------------ */

typedef struct
{
  int   status;   /* exit code */
  char *out;      /* stdout */
  char *err;      /* stderr */
} CliRun;

static void
cli_run_clear (CliRun *r)
{
  g_free (r->out);
  g_free (r->err);
}

static const char *
cli_path (void)
{
  const char *p = g_getenv ("CS_CLI");
  return p != NULL && g_file_test (p, G_FILE_TEST_IS_EXECUTABLE) ? p : NULL;
}

/* Spawns $CS_CLI with @args (NULL-terminated, after argv[0]); no shell. */
static CliRun
cli (const char * const *args)
{
  g_autoptr (GPtrArray) argv = g_ptr_array_new ();
  g_autoptr (GError) error = NULL;
  CliRun r = { 0 };
  int wait_status = 0;

  g_ptr_array_add (argv, (gpointer) cli_path ());
  for (guint i = 0; args[i]; i++)
    g_ptr_array_add (argv, (gpointer) args[i]);
  g_ptr_array_add (argv, NULL);
  g_assert_true (g_spawn_sync (NULL, (char **) argv->pdata, NULL, G_SPAWN_DEFAULT, NULL, NULL,
                               &r.out, &r.err, &wait_status, &error));
  g_assert_no_error (error);
  r.status = WIFEXITED (wait_status) ? WEXITSTATUS (wait_status) : -1;
  return r;
}

static char *
write_tmp (const char *dir, const char *name, const char *text)
{
  char *path = g_build_filename (dir, name, NULL);

  g_assert_true (g_file_set_contents (path, text, -1, NULL));
  return path;
}

static void
rm_tree (const char *dir)
{
  GDir *d = g_dir_open (dir, 0, NULL);
  const char *n;

  while (d && (n = g_dir_read_name (d)))
    {
      g_autofree char *p = g_build_filename (dir, n, NULL);
      if (g_file_test (p, G_FILE_TEST_IS_DIR))
        rm_tree (p);
      else
        g_remove (p);
    }
  if (d)
    g_dir_close (d);
  g_rmdir (dir);
}

/* bf16 add of 1.0 + 2^-9 through the CLI: input from --inputs, output via --save, the error
 * against f64 is exactly 2^-9 = 1.953e-03. */
static void
test_cli_run_cpu (void)
{
  g_autofree char *dir = NULL;
  g_autofree char *trace = NULL;
  g_autofree char *in_dir = NULL;
  g_autofree char *out_dir = NULL;
  g_autofree char *a_path = NULL;
  g_autofree char *t0_path = NULL;
  g_autoptr (CsTensor) a = T1 (CS_DTYPE_BF16, 3, 1.0, 2.0, 1.0 + 0x1p-7);
  g_autoptr (CsTensor) saved = NULL;
  g_autoptr (GError) error = NULL;
  CliRun r;

  if (cli_path () == NULL)
    {
      g_test_skip ("CS_CLI not built");
      return;
    }
  dir = g_dir_make_tmp ("cs-cli-run-XXXXXX", NULL);
  trace = write_tmp (dir, "add.txt", bf16_add_trace);
  in_dir = g_build_filename (dir, "in", NULL);
  out_dir = g_build_filename (dir, "out", NULL);
  g_mkdir (in_dir, 0755);
  a_path = g_build_filename (in_dir, "a.npy", NULL);
  g_assert_true (cs_tensor_save_npy (a, a_path, &error));

  r = cli ((const char *[]) { "run", trace, "--device", "cpu", "--inputs", in_dir, "--save",
                              out_dir, NULL });
  g_assert_cmpint (r.status, ==, 0);
  g_assert_nonnull (strstr (r.out, "t0"));
  g_assert_nonnull (strstr (r.out, "bf16[3]"));
  g_assert_nonnull (strstr (r.out, "max_abs_err 1.953e-03"));
  cli_run_clear (&r);
  t0_path = g_build_filename (out_dir, "t0.npy", NULL);
  saved = cs_tensor_load_npy (t0_path, &error);
  g_assert_no_error (error);
  /* bf16 saved as float32: the exact-mode values 1.0, 2.0, 1 + 2^-7 */
  WANT1 (saved, CS_DTYPE_F32, 3, 0, 1.0, 2.0, 1.0 + 0x1p-7);

#if CS_HAVE_JSON
  {
    g_autoptr (JsonParser) parser = json_parser_new ();
    JsonObject *root, *o;
    JsonArray *outs;

    r = cli ((const char *[]) { "run", trace, "--inputs", in_dir, "--json", NULL });
    g_assert_cmpint (r.status, ==, 0);
    g_assert_true (json_parser_load_from_data (parser, r.out, -1, &error));
    root = json_node_get_object (json_parser_get_root (parser));
    g_assert_cmpstr (json_object_get_string_member (root, "device"), ==, "cpu");
    outs = json_object_get_array_member (json_object_get_object_member (root, "forward"),
                                         "outputs");
    g_assert_cmpuint (json_array_get_length (outs), ==, 1);
    o = json_array_get_object_element (outs, 0);
    g_assert_cmpstr (json_object_get_string_member (o, "name"), ==, "t0");
    g_assert_cmpstr (json_object_get_string_member (o, "dtype"), ==, "bf16");
    g_assert_cmpfloat (json_object_get_double_member (o, "max_abs_err"), ==, 0x1p-9);
    g_assert_cmpint (json_array_get_int_element (json_object_get_array_member (o, "shape"), 0),
                     ==, 3);
    cli_run_clear (&r);
  }
#endif
  rm_tree (dir);
}

static void
test_cli_run_errors (void)
{
  g_autofree char *dir = NULL;
  g_autofree char *good = NULL;
  g_autofree char *bad = NULL;
  g_autofree char *in_dir = NULL;
  g_autofree char *a_path = NULL;
  g_autoptr (CsTensor) a4 = T1 (CS_DTYPE_F32, 4, 1, 2, 3, 4);
  CliRun r;

  if (cli_path () == NULL)
    {
      g_test_skip ("CS_CLI not built");
      return;
    }
  dir = g_dir_make_tmp ("cs-cli-run-XXXXXX", NULL);
  good = write_tmp (dir, "add.txt", bf16_add_trace);
  bad = write_tmp (dir, "foo.txt",
                   "def computation(a):\n"
                   "  # a: \"cpu f32[2]\"\n"
                   "  t0 = ltorch.foo(a)  # t0: \"cpu f32[2]\"\n"
                   "  return t0\n");
  in_dir = g_build_filename (dir, "in", NULL);
  g_mkdir (in_dir, 0755);
  a_path = g_build_filename (in_dir, "a.npy", NULL);
  g_assert_true (cs_tensor_save_npy (a4, a_path, NULL));

  /* --grad none: the pipeline passes the unknown op through, the reference names it */
  r = cli ((const char *[]) { "run", bad, "--device", "cpu", "--grad", "none", NULL });
  g_assert_cmpint (r.status, ==, 1);
  g_assert_nonnull (strstr (r.err, "foo.txt:3: no CPU reference for ltorch.foo"));
  cli_run_clear (&r);
  /* a.npy holds f32[4] where the trace says bf16[3] */
  r = cli ((const char *[]) { "run", good, "--inputs", in_dir, NULL });
  g_assert_cmpint (r.status, ==, 1);
  g_assert_nonnull (strstr (r.err, "holds f32[4]"));
  cli_run_clear (&r);
  r = cli ((const char *[]) { "run", good, "--device", "cuda", NULL });
  g_assert_cmpint (r.status, ==, 1);
  g_assert_cmpstr (r.err, !=, "");
  cli_run_clear (&r);
  r = cli ((const char *[]) { "run", good, "--device", "tpu", NULL });
  g_assert_cmpint (r.status, ==, 2);
  cli_run_clear (&r);
  r = cli ((const char *[]) { "run", NULL });
  g_assert_cmpint (r.status, ==, 2);
  cli_run_clear (&r);
  r = cli ((const char *[]) { "run", "/nonexistent/trace.txt", NULL });
  g_assert_cmpint (r.status, ==, 1);
  g_assert_nonnull (strstr (r.err, "/nonexistent/trace.txt"));
  cli_run_clear (&r);
  r = cli ((const char *[]) { "run", good, "--max-gflop", "1e-12", NULL });
  g_assert_cmpint (r.status, ==, 1);
  g_assert_nonnull (strstr (r.err, " FLOP on the CPU reference, over the limit of 0 FLOP"));
  cli_run_clear (&r);
  r = cli ((const char *[]) { "run", "--help", NULL });
  g_assert_cmpint (r.status, ==, 0);
  g_assert_nonnull (strstr (r.out, "--inputs"));
  cli_run_clear (&r);
  rm_tree (dir);
}

/* cs_tensor_measure_error: NaN anywhere gives NaN errors, inf on one side inf errors, so a
 * tolerance test `err <= tol` (run's report, the GPU --check) can never pass them. */
static void
test_measure_error_nonfinite (void)
{
  static const struct
  {
    double a[3], ref[3];
    double want;        /* max_abs and rel_l2: a number, INFINITY, or NAN */
    gint64 nonfinite, mismatch;
  } cases[] = {
    { { 1, 2, 3 }, { 1, 2, 3.5 }, 0.5, 0, 0 },
    { { 1, INFINITY, 3 }, { 1, 2, 3 }, INFINITY, 1, 1 },           /* overflow: truth finite */
    { { 1, 2, 3 }, { 1, -INFINITY, 3 }, INFINITY, 0, 1 },
    { { 1, INFINITY, 3 }, { 1, -INFINITY, 3 }, INFINITY, 1, 1 },   /* opposite signs */
    { { 1, INFINITY, 3 }, { 1, INFINITY, 3 }, 0, 1, 0 },          /* the same infinity */
    { { NAN, NAN, NAN }, { NAN, NAN, NAN }, NAN, 3, 3 },           /* NaN in both: no match */
    { { 1, NAN, 3 }, { 1, 2, 3 }, NAN, 1, 1 },
    { { 1, 2, 3 }, { NAN, 2, 3 }, NAN, 0, 1 },
  };
  const int64_t shape[] = { 3 };

  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr(CsTensor) a = cs_tensor_new_from_f64 (CS_DTYPE_F32, shape, 1, cases[i].a, NULL);
      g_autoptr(CsTensor) ref = cs_tensor_new_from_f64 (CS_DTYPE_F64, shape, 1, cases[i].ref, NULL);
      CsTensorErrorStats st;

      cs_tensor_measure_error (a, ref, &st);
      g_assert_cmpint (st.n_nonfinite, ==, cases[i].nonfinite);
      g_assert_cmpint (st.n_mismatch, ==, cases[i].mismatch);
      if (isnan (cases[i].want))
        {
          g_assert_true (isnan (st.max_abs) && isnan (st.max_rel) && isnan (st.rel_l2));
          g_assert_false (st.rel_l2 <= 1e30);
        }
      else if (isinf (cases[i].want))
        {
          g_assert_true (isinf (st.max_abs) && isinf (st.max_rel) && isinf (st.rel_l2));
          g_assert_false (st.rel_l2 <= 1e30);
        }
      else
        {
          g_assert_cmpfloat_with_epsilon (st.max_abs, cases[i].want, 1e-12);
          g_assert_true (isfinite (st.rel_l2));
        }
    }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, G_TEST_OPTION_ISOLATE_DIRS, NULL);

  g_test_add_func ("/core/ref/tensor/store", test_tensor_store);
  g_test_add_func ("/core/ref/tensor/random", test_tensor_random);
  g_test_add_func ("/core/ref/tensor/npy", test_tensor_npy);
  g_test_add_func ("/core/ref/tensor/npy-mutations", test_npy_mutations);
  g_test_add_func ("/core/ref/elementwise/unary", test_unary);
  g_test_add_func ("/core/ref/elementwise/binary", test_binary);
  g_test_add_func ("/core/ref/elementwise/int", test_int_math);
  g_test_add_func ("/core/ref/elementwise/unary-table", test_unary_table);
  g_test_add_func ("/core/ref/elementwise/binary-table", test_binary_table);
  g_test_add_func ("/core/ref/bf16/add-cast-pair", test_bf16_rounding);
  g_test_add_func ("/core/ref/bf16/native-prim", test_bf16_native_prim);
  g_test_add_func ("/core/ref/bf16/sum", test_bf16_reduction);
  g_test_add_func ("/core/ref/shape/prims", test_shape_prims);
  g_test_add_func ("/core/ref/shape/errors", test_shape_errors);
  g_test_add_func ("/core/ref/reduction", test_reductions);
  g_test_add_func ("/core/ref/matmul/f32", test_matmul);
  g_test_add_func ("/core/ref/matmul/bf16", test_matmul_bf16);
  g_test_add_func ("/core/ref/indexing", test_indexing);
  g_test_add_func ("/core/ref/creation", test_creation);
  g_test_add_func ("/core/ref/stmt/subsymbols-fusion", test_subsymbols_and_fusion);
  g_test_add_func ("/core/ref/stmt/unsupported", test_unsupported);
  g_test_add_func ("/core/ref/stmt/forward-backward", test_forward_backward);
  g_test_add_func ("/core/ref/thunder/mlp-gelu", test_thunder_mlp);
  g_test_add_func ("/core/ref/thunder/joint-vs-split", test_joint_vs_split);
  g_test_add_func ("/core/ref/thunder/fused-vs-unfused", test_fused_vs_unfused);
  g_test_add_func ("/core/ref/attention/forward", test_sdpa_forward);
  g_test_add_func ("/core/ref/attention/backward-finite-differences", test_sdpa_backward_fd);
  g_test_add_func ("/core/ref/loss-embedding-backward", test_loss_embedding_backward);
  g_test_add_func ("/core/ref/scatter", test_scatter);
  g_test_add_func ("/core/ref/estimate", test_estimate);
  g_test_add_func ("/core/ref/measure-error/non-finite", test_measure_error_nonfinite);
  g_test_add_func ("/core/ref/robustness/malformed-arguments", test_malformed_arguments);
  g_test_add_func ("/core/ref/cli/run-cpu", test_cli_run_cpu);
  g_test_add_func ("/core/ref/cli/errors", test_cli_run_errors);

  return g_test_run ();
}
