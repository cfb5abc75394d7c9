/* cs-palette.c: dtype colours (Okabe-Ito) and the viridis value scale. */
#include "cs-config.h"

#include "cs-palette.h"

#include <math.h>
#include <stdio.h>

typedef struct
{
  const char *label;     /* legend text */
  const char *hex;       /* "#RRGGBB" (6 digits: Graphviz rejects 3-digit colours) */
} PaletteEntry;

/* Okabe & Ito (2002), "Color Universal Design", the 8-colour set, plus neutral grey. */
static const PaletteEntry entries[CS_N_PALETTE_CLASSES] = {
  [CS_PALETTE_F64]     = { "f64",     "#CC79A7" },
  [CS_PALETTE_F32]     = { "f32",     "#0072B2" },
  [CS_PALETTE_BF16]    = { "bf16",    "#D55E00" },
  [CS_PALETTE_F16]     = { "f16",     "#E69F00" },
  [CS_PALETTE_FP8]     = { "fp8",     "#009E73" },
  [CS_PALETTE_INT]     = { "int",     "#56B4E9" },
  [CS_PALETTE_BOOL]    = { "bool",    "#000000" },
  [CS_PALETTE_COMPLEX] = { "complex", "#F0E442" },
  [CS_PALETTE_OTHER]   = { "other",   "#999999" },
};

/* matplotlib viridis sampled at t = 0, 1/8, ..., 1 (from its published 256-entry table). */
static const double viridis[9][3] = {
  { 0.267004, 0.004874, 0.329415 },
  { 0.277018, 0.185228, 0.489898 },
  { 0.229739, 0.322361, 0.545706 },
  { 0.172719, 0.448791, 0.557885 },
  { 0.127568, 0.566949, 0.550556 },
  { 0.157851, 0.683765, 0.501686 },
  { 0.369214, 0.788888, 0.382914 },
  { 0.678489, 0.863742, 0.189503 },
  { 0.993248, 0.906157, 0.143936 },
};

/**
 * cs_palette_class_for_dtype:
 * @dtype: a tensor dtype
 *
 * The legend group of @dtype: each float width has its own colour, every fp8 / fp4 format
 * shares one, integers (signed and unsigned) share one, bool and complex have their own.
 * Source: the dtype list of thunder/core/dtypes.py (reference/thunder-traces.md 2.1).
 * Returns: the palette class; CS_PALETTE_OTHER for an out-of-range value
 */
CsPaletteClass
cs_palette_class_for_dtype (CsDtype dtype)
{
  switch (dtype)
    {
    case CS_DTYPE_F64: return CS_PALETTE_F64;
    case CS_DTYPE_F32: return CS_PALETTE_F32;
    case CS_DTYPE_BF16: return CS_PALETTE_BF16;
    case CS_DTYPE_F16: return CS_PALETTE_F16;
    case CS_DTYPE_F8_E5M2:
    case CS_DTYPE_F8_E5M2FNUZ:
    case CS_DTYPE_F8_E4M3FN:
    case CS_DTYPE_F8_E4M3FNUZ:
    case CS_DTYPE_F8_E8M0FNU:
    case CS_DTYPE_F4_E2M1FN_X2:
      return CS_PALETTE_FP8;
    case CS_DTYPE_U8:
    case CS_DTYPE_U64:
    case CS_DTYPE_I8:
    case CS_DTYPE_I16:
    case CS_DTYPE_I32:
    case CS_DTYPE_I64:
      return CS_PALETTE_INT;
    case CS_DTYPE_B8: return CS_PALETTE_BOOL;
    case CS_DTYPE_C32:
    case CS_DTYPE_C64:
    case CS_DTYPE_C128:
      return CS_PALETTE_COMPLEX;
    case CS_N_DTYPES:
    default:
      return CS_PALETTE_OTHER;
    }
}

/**
 * cs_palette_class_label:
 * @klass: a palette class
 *
 * Returns: (transfer none): the legend text ("bf16", "int", ...)
 */
const char *
cs_palette_class_label (CsPaletteClass klass)
{
  g_return_val_if_fail (klass < CS_N_PALETTE_CLASSES, "other");
  return entries[klass].label;
}

/**
 * cs_palette_class_hex:
 * @klass: a palette class
 *
 * Returns: (transfer none): the colour as "#RRGGBB" (a form Graphviz accepts)
 */
const char *
cs_palette_class_hex (CsPaletteClass klass)
{
  g_return_val_if_fail (klass < CS_N_PALETTE_CLASSES, entries[CS_PALETTE_OTHER].hex);
  return entries[klass].hex;
}

static double
hex_digit_pair (const char *s)
{
  return (double) (g_ascii_xdigit_value (s[0]) * 16 + g_ascii_xdigit_value (s[1])) / 255.0;
}

/**
 * cs_palette_class_color:
 * @klass: a palette class
 * @out: (out): the colour, opaque
 *
 * The class's colour as cairo components in [0, 1].
 */
void
cs_palette_class_color (CsPaletteClass klass, CsColor *out)
{
  const char *hex = cs_palette_class_hex (klass);

  out->r = hex_digit_pair (hex + 1);
  out->g = hex_digit_pair (hex + 3);
  out->b = hex_digit_pair (hex + 5);
  out->a = 1.0;
}

/**
 * cs_palette_dtype_color:
 * @dtype: a tensor dtype
 * @out: (out): its colour (cs_palette_class_color() of its class)
 */
void
cs_palette_dtype_color (CsDtype dtype, CsColor *out)
{
  cs_palette_class_color (cs_palette_class_for_dtype (dtype), out);
}

/**
 * cs_palette_scale_color:
 * @t: position on the scale, 0 = low, 1 = high (clamped; NaN gives grey)
 * @out: (out): the colour
 *
 * The sequential colour scale of value overlays (time, error): viridis, linearly interpolated
 * between 9 samples.  Dark purple at 0, yellow at 1.
 * Source: matplotlib's viridis colormap (van der Walt and Smith, 2015).
 */
void
cs_palette_scale_color (double t, CsColor *out)
{
  double f;
  guint i;

  if (isnan (t))
    {
      cs_palette_class_color (CS_PALETTE_OTHER, out);
      return;
    }
  t = CLAMP (t, 0.0, 1.0);
  f = t * 8.0;
  i = (guint) floor (f);
  if (i >= 8)
    i = 7;
  f -= i;
  out->r = viridis[i][0] + f * (viridis[i + 1][0] - viridis[i][0]);
  out->g = viridis[i][1] + f * (viridis[i + 1][1] - viridis[i][1]);
  out->b = viridis[i][2] + f * (viridis[i + 1][2] - viridis[i][2]);
  out->a = 1.0;
}

/**
 * cs_palette_to_hex:
 * @color: a colour (alpha ignored)
 * @out: (out caller-allocates): 8 bytes: "#RRGGBB" and a NUL
 */
void
cs_palette_to_hex (const CsColor *color, char out[8])
{
  int r = (int) lround (CLAMP (color->r, 0.0, 1.0) * 255.0);
  int g = (int) lround (CLAMP (color->g, 0.0, 1.0) * 255.0);
  int b = (int) lround (CLAMP (color->b, 0.0, 1.0) * 255.0);

  snprintf (out, 8, "#%02X%02X%02X", r, g, b);
}
