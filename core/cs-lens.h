/* cs-lens.h: castscope's precision lens, the analyses behind it that are not passes:
 *
 * - where a statement's math runs in a wider dtype than the tensor it stores, and so rounds
 *   (cs_lens_stmt_precision());
 * - casts the user wrote that redundant-cast removal dropped (cs_lens_removed_user_casts());
 * - the first divergence of a run: the earliest tensor whose error is past the verdict's bound
 *   (cs_lens_first_divergence());
 * - the dynamic range of a tensor against the ranges of f16, bf16 and fp8
 *   (cs_dtype_range(), cs_lens_range()).
 *
 * The CLI (`run`, `stats`, `render --precision`) and the app use these same functions.
 */
#pragma once

#include <glib.h>

#include "cs-compare.h"
#include "cs-ir.h"
#include "cs-tensor.h"

G_BEGIN_DECLS

/* ------------------------------------------------------------------------------------------ */
/* Storage and compute dtype                                                                   */

/** CsStmtPrecision: the dtypes of one statement's float math (cs_lens_stmt_precision()). */
typedef struct
{
  CsDtype  storage;      /* dtype of its first float tensor output (what memory holds) */
  CsDtype  compute;      /* dtype its arithmetic runs in; == storage for pure data movement */
  gboolean rounds;       /* compute is wider than storage: the result is rounded to storage
                            here (a rounding point of the lens) */
} CsStmtPrecision;

/**
 * cs_lens_stmt_precision:
 * @stmt: a call statement (any level: top-level, a region's prim, a decomposition's prim)
 * @out: (out caller-allocates): its storage and compute dtypes
 *
 * The dtype a statement computes in, by these rules:
 * - a cast (prims.convert_element_type, ltorch.to ...) computes in its input's dtype and
 *   stores the target dtype: a narrowing cast (f32 -> bf16) is a rounding point;
 * - a matmul or linear with bf16 / f16 operands accumulates in f32 (cuBLASLt's
 *   CUBLAS_COMPUTE_32F on tensor cores, the GPU executor's setting) and rounds to its output;
 * - a statement with subsymbols (a fusion region, an ltorch op decomposed into prims)
 *   computes in the widest float dtype its leaf prims produce, and rounds when that is wider
 *   than its output (Thunder's bf16 elementwise math runs in f32 and is cast back);
 * - an ltorch / torch elementwise, reduction or composite op without subsymbols computes in
 *   Thunder's computation dtype of its widest float input (bf16 / f16 -> f32,
 *   cs_promote_computation_dtype(), thunder/core/utils.py `get_computation_dtype`); a prim
 *   computes in its own output dtype (prims do not upcast);
 * - shape, indexing and creation ops move data: compute == storage.
 * Returns: FALSE when @stmt has no float tensor output (nothing to say)
 */
gboolean     cs_lens_stmt_precision     (const CsStmt    *stmt,
                                         CsStmtPrecision *out);

/* ------------------------------------------------------------------------------------------ */
/* Casts the user wrote that a pass removed                                                    */

/** CsRemovedCast: one cast that the remove-redundant-casts pass dropped, of a user's cast. */
typedef struct
{
  const CsStmt *user;       /* the cast statement of the initial trace (what the user wrote) */
  const CsStmt *cast;       /* the prims.convert_element_type of the trace before the pass that
                               derives from it (its origin) and is gone after the pass */
  CsDtype       from;       /* dtype it read */
  CsDtype       to;         /* dtype it rounded to */
  const char   *region;     /* callee of the region that held it ("nvFusion0"), or NULL */
  gboolean      backward;   /* the cast is part of the backward (its gradient, or the forward
                               recomputed in a backward region) */
  const char   *reader;     /* the tensor written by the first statement after the pass that
                               now reads the unrounded value in place of the cast's result (the
                               `prims.mul` of `(x.float().cumsum(-1)).to(bf16) * y`), or NULL */
} CsRemovedCast;

/**
 * cs_lens_removed_user_casts:
 * @initial: the initial trace (the user's program as Thunder traced it)
 * @before: the trace the remove-redundant-casts pass read (the fused joint trace)
 * @after: the trace it made
 *
 * The casts of @before whose origin is a cast statement of @initial (a `.to(dtype)`,
 * `.float()` ... the user wrote) and that @after no longer has (no statement of @after, at any
 * level, writes their output, or nothing reads it: remove_redundant_casts leaves a cast whose
 * readers it rewired in place, unread, for CSE and DCE to remove).  Thunder's remove_redundant_casts (thunder/core/transform_common.py,
 * nvFuser's pass in thunder/executors/nvfuserex_impl.py) drops a chain f32 -> bf16 -> f32
 * inside a region, so the rounding the user asked for does not happen: the readers take the
 * unrounded f32 value.  The gradient of such a cast (its VJP cast, same origin) is listed too,
 * with @backward set.  In the order of @before.  The result borrows statements and names from
 * the three traces: keep them alive while using it.
 * Returns: (transfer full) (element-type CsRemovedCast): the casts, possibly none
 */
GPtrArray   *cs_lens_removed_user_casts (const CsTrace *initial,
                                         const CsTrace *before,
                                         const CsTrace *after);

/* ------------------------------------------------------------------------------------------ */
/* First divergence                                                                            */

/** CsLensItem: one judged tensor for cs_lens_first_divergence(). */
typedef struct
{
  const char       *name;   /* the tensor's proxy name in the trace */
  const CsAccuracy *acc;    /* its verdict (cs_accuracy_judge()) */
} CsLensItem;

/**
 * cs_lens_first_divergence:
 * @trace: the trace that produced the tensors
 * @items: (array length=n_items): the judged tensors
 * @n_items: how many
 * @line: (out) (optional): the source line of the statement producing it (0 = made by a pass
 *   or unknown)
 *
 * The precision lens's first divergence: of the tensors that fail their verdict (err past
 * k * ref_err + atol, or NaN/inf where the reference has none: !acc->pass), the one whose
 * producing top-level statement comes first in @trace, and among the outputs of one fusion
 * region the one whose prim comes first in the region.  Ties keep the order of @items; a
 * tensor no statement produces sorts last.
 * Returns: the index into @items, or -1 when every tensor passes
 */
gint         cs_lens_first_divergence   (const CsTrace    *trace,
                                         const CsLensItem *items,
                                         guint             n_items,
                                         guint            *line);

/* ------------------------------------------------------------------------------------------ */
/* Dynamic range                                                                               */

/** CsDtypeRange: the representable range of a float dtype (IEEE-style round to nearest). */
typedef struct
{
  double   max_finite;     /* largest finite magnitude */
  double   min_normal;     /* smallest positive normal */
  double   min_subnormal;  /* smallest positive subnormal */
  double   overflow_at;    /* max_finite plus half its ulp: magnitudes above it round past
                              max_finite (round to nearest even); +inf for f64 */
  gboolean tie_overflows;  /* a magnitude of exactly overflow_at overflows too (max_finite's
                              last significand bit is 1, so the tie goes up): all but e4m3fn */
  gboolean has_inf;        /* overflow gives inf (f16, bf16, e5m2); else NaN, or the max when
                              the conversion saturates (e4m3fn) */
} CsDtypeRange;

/**
 * cs_dtype_range:
 * @dtype: f16, bf16, f32, f64, f8_e4m3fn or f8_e5m2
 * @out: (out caller-allocates): its range
 *
 * Values: f16 max 65504, min normal 2^-14, min subnormal 2^-24; bf16 max (2 - 2^-7) 2^127,
 * min normal 2^-126, min subnormal 2^-133; e4m3fn max 448, min normal 2^-6, min subnormal 2^-9,
 * no inf; e5m2 max 57344, min normal 2^-14, min subnormal 2^-16 (OCP 8-bit floating point
 * formats, v1.0; IEEE 754-2008 binary16; Google's bfloat16).
 * Returns: FALSE for other dtypes
 */
gboolean     cs_dtype_range             (CsDtype       dtype,
                                         CsDtypeRange *out);

/* The formats the range report checks every tensor against, in report order. */
typedef enum
{
  CS_LENS_FMT_F16,
  CS_LENS_FMT_BF16,
  CS_LENS_FMT_E4M3,        /* float8_e4m3fn */
  CS_LENS_FMT_E5M2,        /* float8_e5m2 */
  CS_LENS_N_FMTS
} CsLensFormat;

/** CsLensFit: how a tensor's values fit one format (cs_lens_range()). */
typedef struct
{
  gint64   n_overflow;     /* finite values with |x| > overflow_at (>= when tie_overflows):
                              stored as inf, NaN, or saturated to max_finite */
  gint64   n_flush;        /* nonzero values with |x| <= min_subnormal / 2: stored as 0 */
  gint64   n_subnormal;    /* values with min_subnormal / 2 < |x| < min_normal: kept with
                              fewer significant bits */
  double   headroom;       /* log2 (max_finite / amax): doublings before amax overflows
                              (negative when it already does; +inf for an all-zero tensor) */
  gboolean overflow_risk;  /* n_overflow > 0, or headroom < 1 (the next doubling overflows) */
  gboolean underflow_risk; /* n_flush > 0, or more than 1% of the nonzero values subnormal */
} CsLensFit;

/** CsLensRange: the dynamic range of one tensor (cs_lens_range()). */
typedef struct
{
  double     amax;         /* max |x| over the finite values (0 when none) */
  double     min_nonzero;  /* smallest nonzero |x| over the finite values (0 when none) */
  gint64     n;            /* elements */
  gint64     n_zero;       /* exact zeros */
  gint64     n_nonfinite;  /* NaN and inf elements (left out of everything else) */
  CsLensFit  fit[CS_LENS_N_FMTS]; /* per CsLensFormat */
} CsLensRange;

/**
 * cs_lens_range:
 * @x: a float tensor (its values are read as doubles: pass the f64 run's value to see the
 *   true range, the trace dtype's to see what was stored)
 * @out: (out caller-allocates): amax, the smallest nonzero magnitude, and per format of
 *   CsLensFormat the counts of values that would overflow (saturate), flush to zero or turn
 *   subnormal if stored in it, with the risk flags
 */
void         cs_lens_range              (const CsTensor *x,
                                         CsLensRange    *out);

/** cs_lens_format_name: "f16", "bf16", "e4m3", "e5m2". */
const char  *cs_lens_format_name        (CsLensFormat fmt);
/** cs_lens_format_dtype: the dtype of a CsLensFormat. */
CsDtype      cs_lens_format_dtype       (CsLensFormat fmt);

/**
 * cs_lens_range_summary:
 * @r: a range
 *
 * One line for reports: the formats at risk with their counts ("e4m3: 12 overflow, 3 flush
 * to zero; f16: overflow risk (headroom 0.4 doublings)"), or "" when every format holds the
 * values.
 * Returns: (transfer full): the text
 */
char        *cs_lens_range_summary      (const CsLensRange *r);

G_END_DECLS
