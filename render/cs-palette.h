/* cs-palette.h: the dtype colours (Okabe-Ito, colour-blind safe) and the sequential value scale
 * used by every picture castscope draws.
 *
 * Source: M. Okabe and K. Ito, "Color Universal Design" (2002), the 8-colour set:
 * black #000000, orange #E69F00, sky blue #56B4E9, bluish green #009E73, yellow #F0E442,
 * blue #0072B2, vermillion #D55E00, reddish purple #CC79A7.  The value scale samples
 * matplotlib's "viridis" (perceptually uniform, readable with colour-vision deficiency).
 */
#pragma once

#include <glib.h>

#include "cs-dtype.h"

G_BEGIN_DECLS

/** CsPaletteClass: the dtype groups the legend shows, in legend order. */
typedef enum
{
  CS_PALETTE_F64,        /* float64: reddish purple #CC79A7 */
  CS_PALETTE_F32,        /* float32: blue #0072B2 */
  CS_PALETTE_BF16,       /* bfloat16: vermillion #D55E00 */
  CS_PALETTE_F16,        /* float16: orange #E69F00 */
  CS_PALETTE_FP8,        /* every float8 / float4 dtype: bluish green #009E73 */
  CS_PALETTE_INT,        /* signed and unsigned integers: sky blue #56B4E9 */
  CS_PALETTE_BOOL,       /* bool8: black #000000 */
  CS_PALETTE_COMPLEX,    /* complex dtypes: yellow #F0E442 */
  CS_PALETTE_OTHER,      /* not a tensor / untyped: grey #999999 */
  CS_N_PALETTE_CLASSES
} CsPaletteClass;

/** CsColor: an sRGB colour, components in [0, 1]. */
typedef struct
{
  double r, g, b;        /* [0, 1] */
  double a;              /* [0, 1], 1 = opaque */
} CsColor;

CsPaletteClass cs_palette_class_for_dtype (CsDtype        dtype);
const char    *cs_palette_class_label     (CsPaletteClass klass);
const char    *cs_palette_class_hex       (CsPaletteClass klass);
void           cs_palette_class_color     (CsPaletteClass klass,
                                           CsColor       *out);
void           cs_palette_dtype_color     (CsDtype        dtype,
                                           CsColor       *out);
void           cs_palette_scale_color     (double         t,
                                           CsColor       *out);
void           cs_palette_to_hex          (const CsColor *color,
                                           char           out[8]);

/* Fixed colours of the badges and diff marks (Okabe-Ito too). */
#define CS_PALETTE_HEX_TENSOR_CORE "#009E73"   /* bluish green badge "TC" */
#define CS_PALETTE_HEX_WARNING     "#D55E00"   /* vermillion badge "f32" */
#define CS_PALETTE_HEX_ADDED       "#009E73"   /* diff: added cast / new region */
#define CS_PALETTE_HEX_REMOVED     "#CC79A7"   /* diff: removed cast */
#define CS_PALETTE_HEX_CHANGED     "#E69F00"   /* diff: region split or merged */
#define CS_PALETTE_HEX_SELECTED    "#0072B2"   /* selection outline */
#define CS_PALETTE_HEX_MOVED       "#56B4E9"   /* diff: statement moved into / out of a region */
#define CS_PALETTE_HEX_FOUND       "#F0E442"   /* Find: halo around every match */
/* Executors other than nvFuser (issue 18): their regions' and statements' outlines */
#define CS_PALETTE_HEX_EXEC_XENTROPY "#B35806" /* torchcompile_xentropy: TorchCompile regions */
#define CS_PALETTE_HEX_EXEC_SDPA     "#542788" /* sdpa: the attention statements */

G_END_DECLS
