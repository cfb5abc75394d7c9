/* cs-half.c: narrow float conversions (see cs-half.h). */
#include "cs-config.h"

#include "cs-half.h"

#include <math.h>
#include <string.h>

static inline guint32
f32_bits (float x)
{
  guint32 u;
  memcpy (&u, &x, sizeof u);
  return u;
}

static inline float
bits_f32 (guint32 u)
{
  float x;
  memcpy (&x, &u, sizeof x);
  return x;
}

/* ---- a generic small-float codec over doubles ---------------------------------------- */

typedef struct
{
  int      man_bits;   /* stored mantissa bits */
  int      exp_bits;   /* exponent field bits */
  int      bias;       /* exponent bias */
  gboolean has_inf;    /* IEEE-like: all-ones exponent means inf / NaN */
  gboolean fnuz;       /* no -0, single NaN 0x80, no inf */
} SmallFloat;

static const SmallFloat fmt_bf16 = { 7, 8, 127, TRUE, FALSE };
static const SmallFloat fmt_f16 = { 10, 5, 15, TRUE, FALSE };
static const SmallFloat fmt_e4m3fn = { 3, 4, 7, FALSE, FALSE };
static const SmallFloat fmt_e5m2 = { 2, 5, 15, TRUE, FALSE };
static const SmallFloat fmt_e4m3fnuz = { 3, 4, 8, FALSE, TRUE };
static const SmallFloat fmt_e5m2fnuz = { 2, 5, 16, FALSE, TRUE };

static guint32
sf_nan (const SmallFloat *f, gboolean neg)
{
  int total = 1 + f->exp_bits + f->man_bits;
  guint32 exp_all = (1u << f->exp_bits) - 1;

  if (f->fnuz)
    return 1u << (total - 1);
  if (f->has_inf)   /* quiet NaN: top mantissa bit */
    return ((neg ? 1u : 0u) << (total - 1)) | (exp_all << f->man_bits) | (1u << (f->man_bits - 1));
  return ((neg ? 1u : 0u) << (total - 1)) | (exp_all << f->man_bits) | ((1u << f->man_bits) - 1);
}

static double
sf_max_finite (const SmallFloat *f)
{
  int exp_all = (1 << f->exp_bits) - 1;

  if (f->has_inf)
    return ldexp (2.0 - ldexp (1.0, -f->man_bits), exp_all - 1 - f->bias);
  if (f->fnuz)
    return ldexp (2.0 - ldexp (1.0, -f->man_bits), exp_all - f->bias);
  /* fn: all-ones exponent is finite except the all-ones mantissa (NaN) */
  return ldexp (2.0 - ldexp (1.0, 1 - f->man_bits), exp_all - f->bias);
}

static guint32
sf_encode (const SmallFloat *f, double x)
{
  int total = 1 + f->exp_bits + f->man_bits;
  gboolean neg = signbit (x) != 0;
  guint32 sign = (neg ? 1u : 0u) << (total - 1);
  int emin = 1 - f->bias;   /* exponent of the smallest normal */
  double a = fabs (x), quantum, q, r;
  int e;

  if (isnan (x))
    return sf_nan (f, neg);
  if (isinf (a))
    return f->has_inf ? sign | (((1u << f->exp_bits) - 1) << f->man_bits) : sf_nan (f, neg);
  if (a == 0.0)
    return f->fnuz ? 0 : sign;

  frexp (a, &e);
  e -= 1;                   /* a in [2^e, 2^(e+1)) */
  if (e < emin)
    e = emin;
  quantum = ldexp (1.0, e - f->man_bits);
  q = nearbyint (a / quantum);   /* exact division by a power of two; default mode = RNE */
  r = q * quantum;
  if (r > sf_max_finite (f))
    return f->has_inf ? sign | (((1u << f->exp_bits) - 1) << f->man_bits) : sf_nan (f, neg);
  if (r == 0.0)
    return f->fnuz ? 0 : sign;

  frexp (r, &e);
  e -= 1;
  if (e < emin)             /* subnormal: exponent field 0 */
    return sign | (guint32) ldexp (r, f->man_bits - emin);
  return sign | ((guint32) (e + f->bias) << f->man_bits)
         | ((guint32) ldexp (r, f->man_bits - e) - (1u << f->man_bits));
}

static double
sf_decode (const SmallFloat *f, guint32 bits)
{
  int total = 1 + f->exp_bits + f->man_bits;
  gboolean neg = (bits >> (total - 1)) & 1;
  guint32 exp_all = (1u << f->exp_bits) - 1;
  guint32 ef = (bits >> f->man_bits) & exp_all;
  guint32 mf = bits & ((1u << f->man_bits) - 1);
  double v;

  if (f->fnuz && bits == (1u << (total - 1)))
    return NAN;
  if (f->has_inf && ef == exp_all)
    return mf ? NAN : (neg ? -INFINITY : INFINITY);
  if (!f->has_inf && !f->fnuz && ef == exp_all && mf == (1u << f->man_bits) - 1)
    return NAN;
  if (ef == 0)
    v = ldexp ((double) mf, 1 - f->bias - f->man_bits);
  else
    v = ldexp ((double) (mf | (1u << f->man_bits)), (int) ef - f->bias - f->man_bits);
  return neg ? -v : v;
}

/* ---- bf16 ---------------------------------------------------------------------------- */

guint16
cs_half_bf16_from_f32 (float x)
{
  guint32 u = f32_bits (x);

  if ((u & 0x7fffffffu) > 0x7f800000u)
    return (guint16) (((u >> 16) & 0x8000u) | 0x7fc0u);
  /* Round to nearest even on the 16 dropped bits; a carry walks into the exponent, which
   * turns the largest finite values into inf exactly when RNE says so. */
  u += 0x7fffu + ((u >> 16) & 1u);
  return (guint16) (u >> 16);
}

guint16
cs_half_bf16_from_f64 (double x)
{
  float f = (float) x;

  /* an f64 that is exactly an f32 (or NaN) rounds the same through the fast f32 path */
  if ((double) f == x || isnan (x))
    return cs_half_bf16_from_f32 (f);
  return (guint16) sf_encode (&fmt_bf16, x);
}

float
cs_half_bf16_to_f32 (guint16 h)
{
  return bits_f32 ((guint32) h << 16);
}

float
cs_half_round_bf16 (float x)
{
  return cs_half_bf16_to_f32 (cs_half_bf16_from_f32 (x));
}

/* ---- f16 ----------------------------------------------------------------------------- */

guint16
cs_half_f16_from_f32 (float x)
{
  guint32 u = f32_bits (x);
  guint32 sign = (u >> 16) & 0x8000u;
  guint32 a = u & 0x7fffffffu;

  if (a > 0x7f800000u)
    return (guint16) (sign | 0x7e00u);
  if (a >= 0x477ff000u)          /* >= 65520: rounds to inf (and inf itself) */
    return (guint16) (sign | 0x7c00u);
  if (a < 0x38800000u)           /* below 2^-14: f16 subnormal or zero */
    {
      /* |x| * 2^24 is exact in f32; rounding it to an integer (RNE) gives the subnormal
       * mantissa, 1024 meaning the smallest normal 0x0400. */
      float scaled = bits_f32 (a) * 16777216.0f;
      return (guint16) (sign | (guint32) nearbyintf (scaled));
    }
  {
    guint32 mant = a & 0x7fffffu;
    guint32 h = ((((a >> 23) - 127 + 15)) << 10) | (mant >> 13);
    guint32 rest = mant & 0x1fffu;

    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u)))
      h++;                       /* a carry into the exponent is the right answer */
    return (guint16) (sign | h);
  }
}

guint16
cs_half_f16_from_f64 (double x)
{
  float f = (float) x;

  if ((double) f == x || isnan (x))
    return cs_half_f16_from_f32 (f);
  return (guint16) sf_encode (&fmt_f16, x);
}

float
cs_half_f16_to_f32 (guint16 h)
{
  guint32 sign = ((guint32) h & 0x8000u) << 16;
  guint32 e = (h >> 10) & 0x1fu;
  guint32 m = h & 0x3ffu;

  if (e == 0x1f)
    return bits_f32 (sign | 0x7f800000u | (m << 13));
  if (e == 0)
    {
      float v = (float) m * (1.0f / 16777216.0f);   /* m * 2^-24, exact */
      return sign ? -v : v;
    }
  return bits_f32 (sign | ((e - 15 + 127) << 23) | (m << 13));
}

float
cs_half_round_f16 (float x)
{
  return cs_half_f16_to_f32 (cs_half_f16_from_f32 (x));
}

/* ---- fp8 ----------------------------------------------------------------------------- */

static const SmallFloat *
fp8_format (CsDtype dtype)
{
  switch (dtype)
    {
    case CS_DTYPE_F8_E4M3FN: return &fmt_e4m3fn;
    case CS_DTYPE_F8_E5M2: return &fmt_e5m2;
    case CS_DTYPE_F8_E4M3FNUZ: return &fmt_e4m3fnuz;
    case CS_DTYPE_F8_E5M2FNUZ: return &fmt_e5m2fnuz;
    default: return NULL;
    }
}

gboolean
cs_half_fp8_supported (CsDtype dtype)
{
  return fp8_format (dtype) != NULL;
}

guint8
cs_half_fp8_from_f64 (CsDtype dtype, double x)
{
  const SmallFloat *f = fp8_format (dtype);

  return f ? (guint8) sf_encode (f, x) : 0;
}

double
cs_half_fp8_to_f64 (CsDtype dtype, guint8 bits)
{
  const SmallFloat *f = fp8_format (dtype);

  return f ? sf_decode (f, bits) : NAN;
}

/* ---- bulk ---------------------------------------------------------------------------- */

void
cs_half_bf16_from_f32_n (const float *src, guint16 *dst, gsize n)
{
  for (gsize i = 0; i < n; i++)
    dst[i] = cs_half_bf16_from_f32 (src[i]);
}

void
cs_half_bf16_to_f32_n (const guint16 *src, float *dst, gsize n)
{
  for (gsize i = 0; i < n; i++)
    dst[i] = cs_half_bf16_to_f32 (src[i]);
}

void
cs_half_f16_from_f32_n (const float *src, guint16 *dst, gsize n)
{
  for (gsize i = 0; i < n; i++)
    dst[i] = cs_half_f16_from_f32 (src[i]);
}

void
cs_half_f16_to_f32_n (const guint16 *src, float *dst, gsize n)
{
  for (gsize i = 0; i < n; i++)
    dst[i] = cs_half_f16_to_f32 (src[i]);
}
