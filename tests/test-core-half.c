/* test-core-half.c: bf16 / f16 / fp8 conversions (core/cs-half.c).
 *
 * Every expected bit pattern is computed by hand from the format's layout (see each comment):
 * bf16 = 1/8/7 bias 127, f16 = 1/5/10 bias 15, e4m3fn = 1/4/3 bias 7, e5m2 = 1/5/2 bias 15.
 */
#include "cs-config.h"

#include "cs-half.h"

#include <math.h>
#include <string.h>

static float
f32_from_bits (guint32 u)
{
  float x;
  memcpy (&x, &u, sizeof x);
  return x;
}

static void
test_bf16_basic (void)
{
  g_assert_cmphex (cs_half_bf16_from_f32 (1.0f), ==, 0x3F80);   /* 0 01111111 0000000 */
  g_assert_cmphex (cs_half_bf16_from_f32 (-2.0f), ==, 0xC000);  /* 1 10000000 0000000 */
  g_assert_cmphex (cs_half_bf16_from_f32 (0.0f), ==, 0x0000);
  g_assert_cmphex (cs_half_bf16_from_f32 (-0.0f), ==, 0x8000);
  g_assert_cmphex (cs_half_bf16_from_f32 (INFINITY), ==, 0x7F80);
  g_assert_cmphex (cs_half_bf16_from_f32 (-INFINITY), ==, 0xFF80);
  g_assert_cmphex (cs_half_bf16_from_f32 (NAN), ==, 0x7FC0);
  /* 3.0 = 1.1b * 2^1 -> 0 10000000 1000000 */
  g_assert_cmphex (cs_half_bf16_from_f32 (3.0f), ==, 0x4040);
  g_assert_cmpfloat (cs_half_bf16_to_f32 (0x4040), ==, 3.0f);
  g_assert_cmpfloat (cs_half_bf16_to_f32 (0x3F81), ==, 1.0f + 1.0f / 128.0f);
}

static void
test_bf16_ties (void)
{
  /* 1 + 2^-8 sits halfway between 1.0 (mantissa 0, even) and 1 + 2^-7: to even -> 1.0 */
  g_assert_cmphex (cs_half_bf16_from_f32 (1.0f + 0x1p-8f), ==, 0x3F80);
  /* 1 + 3*2^-8 sits halfway between 1 + 2^-7 (odd) and 1 + 2^-6 (even) -> 0x3F82 */
  g_assert_cmphex (cs_half_bf16_from_f32 (1.0f + 3 * 0x1p-8f), ==, 0x3F82);
  /* just above the tie rounds up */
  g_assert_cmphex (cs_half_bf16_from_f32 (1.0f + 0x1p-8f + 0x1p-20f), ==, 0x3F81);
  /* largest f32 (0x7F7FFFFF) is past the bf16 max 0x7F7F + half ulp -> inf */
  g_assert_cmphex (cs_half_bf16_from_f32 (f32_from_bits (0x7F7FFFFFu)), ==, 0x7F80);
  /* 0x7F7F7FFF is below the tie -> bf16 max 0x7F7F */
  g_assert_cmphex (cs_half_bf16_from_f32 (f32_from_bits (0x7F7F7FFFu)), ==, 0x7F7F);
  /* subnormals: 2^-133 (f32 bits 0x00010000) is the smallest bf16 subnormal 0x0001;
   * 3*2^-134 (0x00018000) is a tie between 0x0001 and 0x0002 -> 0x0002;
   * 2^-149 (0x00000001) rounds to zero */
  g_assert_cmphex (cs_half_bf16_from_f32 (f32_from_bits (0x00010000u)), ==, 0x0001);
  g_assert_cmphex (cs_half_bf16_from_f32 (f32_from_bits (0x00018000u)), ==, 0x0002);
  g_assert_cmphex (cs_half_bf16_from_f32 (f32_from_bits (0x00000001u)), ==, 0x0000);
  /* from f64 the rounding happens once: 1 + 2^-8 + 2^-30 is above the tie -> 0x3F81, while
   * through f32 it would first lose 2^-30 and tie to 0x3F80 */
  g_assert_cmphex (cs_half_bf16_from_f64 (1.0 + 0x1p-8 + 0x1p-30), ==, 0x3F81);
  g_assert_cmphex (cs_half_bf16_from_f32 ((float) (1.0 + 0x1p-8 + 0x1p-30)), ==, 0x3F80);
  g_assert_cmphex (cs_half_bf16_from_f64 (1.0), ==, 0x3F80);
  g_assert_cmphex (cs_half_bf16_from_f64 (1e300), ==, 0x7F80);
  /* round helper: bf16 add 1.0 + 2^-9 stays 1.0 */
  g_assert_cmpfloat (cs_half_round_bf16 (1.0f + 0x1p-9f), ==, 1.0f);
}

static void
test_f16_basic (void)
{
  g_assert_cmphex (cs_half_f16_from_f32 (1.0f), ==, 0x3C00);     /* 0 01111 0000000000 */
  g_assert_cmphex (cs_half_f16_from_f32 (-2.0f), ==, 0xC000);
  g_assert_cmphex (cs_half_f16_from_f32 (-0.0f), ==, 0x8000);
  g_assert_cmphex (cs_half_f16_from_f32 (65504.0f), ==, 0x7BFF); /* max finite */
  g_assert_cmphex (cs_half_f16_from_f32 (65519.0f), ==, 0x7BFF); /* below the tie */
  g_assert_cmphex (cs_half_f16_from_f32 (65520.0f), ==, 0x7C00); /* tie, 0x7BFF odd -> inf */
  g_assert_cmphex (cs_half_f16_from_f32 (-65520.0f), ==, 0xFC00);
  g_assert_cmphex (cs_half_f16_from_f32 (1e10f), ==, 0x7C00);
  g_assert_cmphex (cs_half_f16_from_f32 (NAN), ==, 0x7E00);
  /* 1/3 = 1.0101...b * 2^-2: exponent 13 (01101), mantissa 0101010101 + round down -> 0x3555 */
  g_assert_cmphex (cs_half_f16_from_f32 (1.0f / 3.0f), ==, 0x3555);
  /* 0.1 = 1.1001100110011...b * 2^-4: exponent 11 (01011), mantissa 1001100110|011.. -> 0x2E66 */
  g_assert_cmphex (cs_half_f16_from_f32 (0.1f), ==, 0x2E66);
  g_assert_cmpfloat (cs_half_f16_to_f32 (0x3555), ==, 0.333251953125f);
  g_assert_cmpfloat (cs_half_f16_to_f32 (0x7BFF), ==, 65504.0f);
  g_assert_true (isinf (cs_half_f16_to_f32 (0xFC00)) && cs_half_f16_to_f32 (0xFC00) < 0);
  g_assert_true (isnan (cs_half_f16_to_f32 (0x7E00)));
}

static void
test_f16_subnormal_ties (void)
{
  /* smallest subnormal 2^-24 = 0x0001; smallest normal 2^-14 = 0x0400 */
  g_assert_cmphex (cs_half_f16_from_f32 (0x1p-24f), ==, 0x0001);
  g_assert_cmphex (cs_half_f16_from_f32 (0x1p-14f), ==, 0x0400);
  g_assert_cmpfloat (cs_half_f16_to_f32 (0x0001), ==, 0x1p-24f);
  g_assert_cmpfloat (cs_half_f16_to_f32 (0x03FF), ==, 1023 * 0x1p-24f);
  /* 2^-25 is a tie between 0 and 0x0001 -> 0; 3*2^-25 between 1 and 2 -> 2 */
  g_assert_cmphex (cs_half_f16_from_f32 (0x1p-25f), ==, 0x0000);
  g_assert_cmphex (cs_half_f16_from_f32 (3 * 0x1p-25f), ==, 0x0002);
  g_assert_cmphex (cs_half_f16_from_f32 (-3 * 0x1p-25f), ==, 0x8002);
  /* (2^10 - 0.5) * 2^-24 is a tie between 0x03FF (odd) and 0x0400 -> 0x0400 */
  g_assert_cmphex (cs_half_f16_from_f32 (1023.5f * 0x1p-24f), ==, 0x0400);
  /* normal ties: 1 + 2^-11 -> 0x3C00 (even), 1 + 3*2^-11 -> 0x3C02 */
  g_assert_cmphex (cs_half_f16_from_f32 (1.0f + 0x1p-11f), ==, 0x3C00);
  g_assert_cmphex (cs_half_f16_from_f32 (1.0f + 3 * 0x1p-11f), ==, 0x3C02);
  /* once-rounding from f64: 1 + 2^-11 + 2^-40 is above the tie -> 0x3C01 */
  g_assert_cmphex (cs_half_f16_from_f64 (1.0 + 0x1p-11 + 0x1p-40), ==, 0x3C01);
  g_assert_cmphex (cs_half_f16_from_f64 (65520.0), ==, 0x7C00);
  g_assert_cmphex (cs_half_f16_from_f64 (0x1p-24), ==, 0x0001);
}

/* Every finite bf16/f16 value converts back to itself: decode and encode are inverse. */
static void
test_roundtrip_all (void)
{
  for (guint32 h = 0; h < 0x10000u; h++)
    {
      float fb = cs_half_bf16_to_f32 ((guint16) h);
      float fh = cs_half_f16_to_f32 ((guint16) h);

      if (!isnan (fb))
        {
          g_assert_cmphex (cs_half_bf16_from_f32 (fb), ==, h);
          g_assert_cmphex (cs_half_bf16_from_f64 (fb), ==, h);
        }
      if (!isnan (fh))
        {
          g_assert_cmphex (cs_half_f16_from_f32 (fh), ==, h);
          g_assert_cmphex (cs_half_f16_from_f64 (fh), ==, h);
        }
    }
}

/* The bit-trick f32 paths and the generic f64 path agree on random f32 inputs (an f32 is
 * exactly representable in f64, so both round the same real number once). */
static void
test_paths_agree (void)
{
  GRand *rand = g_rand_new_with_seed (42);

  for (int i = 0; i < 200000; i++)
    {
      guint32 u = g_rand_int (rand);
      float x = f32_from_bits (u);

      if (isnan (x))
        continue;
      g_assert_cmphex (cs_half_f16_from_f32 (x), ==, cs_half_f16_from_f64 (x));
      g_assert_cmphex (cs_half_bf16_from_f32 (x), ==, cs_half_bf16_from_f64 (x));
    }
  g_rand_free (rand);
}

static void
test_fp8 (void)
{
  /* e4m3fn: 1.0 = 0 0111 000 = 0x38; 448 = 0 1111 110 = 0x7E; smallest subnormal 2^-9 = 0x01 */
  g_assert_cmphex (cs_half_fp8_from_f64 (CS_DTYPE_F8_E4M3FN, 1.0), ==, 0x38);
  g_assert_cmphex (cs_half_fp8_from_f64 (CS_DTYPE_F8_E4M3FN, 448.0), ==, 0x7E);
  g_assert_cmphex (cs_half_fp8_from_f64 (CS_DTYPE_F8_E4M3FN, -448.0), ==, 0xFE);
  /* 464 is the tie between 448 (mantissa 110, even) and 480 (not finite) -> 448 */
  g_assert_cmphex (cs_half_fp8_from_f64 (CS_DTYPE_F8_E4M3FN, 464.0), ==, 0x7E);
  /* past it: no inf in e4m3fn -> NaN 0x7F (PyTorch's choice) */
  g_assert_cmphex (cs_half_fp8_from_f64 (CS_DTYPE_F8_E4M3FN, 470.0), ==, 0x7F);
  g_assert_cmphex (cs_half_fp8_from_f64 (CS_DTYPE_F8_E4M3FN, -INFINITY), ==, 0xFF);
  g_assert_cmphex (cs_half_fp8_from_f64 (CS_DTYPE_F8_E4M3FN, 0x1p-9), ==, 0x01);
  g_assert_cmphex (cs_half_fp8_from_f64 (CS_DTYPE_F8_E4M3FN, 0x1p-10), ==, 0x00);
  /* 1.0625 = 1 + 2^-4 is the tie between 1.0 (0x38) and 1.125 (0x39) -> 0x38 */
  g_assert_cmphex (cs_half_fp8_from_f64 (CS_DTYPE_F8_E4M3FN, 1.0625), ==, 0x38);
  g_assert_true (isnan (cs_half_fp8_to_f64 (CS_DTYPE_F8_E4M3FN, 0x7F)));
  g_assert_cmpfloat (cs_half_fp8_to_f64 (CS_DTYPE_F8_E4M3FN, 0x7E), ==, 448.0);
  g_assert_cmpfloat (cs_half_fp8_to_f64 (CS_DTYPE_F8_E4M3FN, 0x01), ==, 0x1p-9);
  g_assert_cmpfloat (cs_half_fp8_to_f64 (CS_DTYPE_F8_E4M3FN, 0xB8), ==, -1.0);

  /* e5m2: 1.0 = 0 01111 00 = 0x3C; max 57344 = 0 11110 11 = 0x7B; 61440 is the tie between
   * 57344 (odd) and 65536 -> inf 0x7C; smallest subnormal 2^-16 = 0x01 */
  g_assert_cmphex (cs_half_fp8_from_f64 (CS_DTYPE_F8_E5M2, 1.0), ==, 0x3C);
  g_assert_cmphex (cs_half_fp8_from_f64 (CS_DTYPE_F8_E5M2, 57344.0), ==, 0x7B);
  g_assert_cmphex (cs_half_fp8_from_f64 (CS_DTYPE_F8_E5M2, 61440.0), ==, 0x7C);
  g_assert_cmphex (cs_half_fp8_from_f64 (CS_DTYPE_F8_E5M2, 0x1p-16), ==, 0x01);
  g_assert_cmphex (cs_half_fp8_from_f64 (CS_DTYPE_F8_E5M2, NAN), ==, 0x7E);
  g_assert_true (isinf (cs_half_fp8_to_f64 (CS_DTYPE_F8_E5M2, 0x7C)));
  g_assert_cmpfloat (cs_half_fp8_to_f64 (CS_DTYPE_F8_E5M2, 0x7B), ==, 57344.0);

  /* fnuz: e4m3fnuz max 240 = 0x7F, NaN = 0x80, no -0 */
  g_assert_cmphex (cs_half_fp8_from_f64 (CS_DTYPE_F8_E4M3FNUZ, 240.0), ==, 0x7F);
  g_assert_cmphex (cs_half_fp8_from_f64 (CS_DTYPE_F8_E4M3FNUZ, 1000.0), ==, 0x80);
  g_assert_cmphex (cs_half_fp8_from_f64 (CS_DTYPE_F8_E4M3FNUZ, -0.0), ==, 0x00);
  g_assert_cmphex (cs_half_fp8_from_f64 (CS_DTYPE_F8_E4M3FNUZ, 1.0), ==, 0x40);
  g_assert_true (isnan (cs_half_fp8_to_f64 (CS_DTYPE_F8_E4M3FNUZ, 0x80)));

  g_assert_false (cs_half_fp8_supported (CS_DTYPE_F8_E8M0FNU));
  g_assert_true (cs_half_fp8_supported (CS_DTYPE_F8_E5M2));

  /* every non-NaN e4m3fn / e5m2 byte round-trips */
  for (guint b = 0; b < 256; b++)
    {
      double v = cs_half_fp8_to_f64 (CS_DTYPE_F8_E4M3FN, (guint8) b);
      double w = cs_half_fp8_to_f64 (CS_DTYPE_F8_E5M2, (guint8) b);

      if (!isnan (v))
        g_assert_cmphex (cs_half_fp8_from_f64 (CS_DTYPE_F8_E4M3FN, v), ==, b);
      if (!isnan (w))
        g_assert_cmphex (cs_half_fp8_from_f64 (CS_DTYPE_F8_E5M2, w), ==, b);
    }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, G_TEST_OPTION_ISOLATE_DIRS, NULL);

  g_test_add_func ("/core/half/bf16/basic", test_bf16_basic);
  g_test_add_func ("/core/half/bf16/ties-subnormals", test_bf16_ties);
  g_test_add_func ("/core/half/f16/basic", test_f16_basic);
  g_test_add_func ("/core/half/f16/ties-subnormals", test_f16_subnormal_ties);
  g_test_add_func ("/core/half/roundtrip-all", test_roundtrip_all);
  g_test_add_func ("/core/half/f32-f64-paths-agree", test_paths_agree);
  g_test_add_func ("/core/half/fp8", test_fp8);

  return g_test_run ();
}
