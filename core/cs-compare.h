/* cs-compare.h: structural equality of traces (round-trip checks, pass tests). */
#pragma once

#include <glib.h>

#include "cs-ir.h"

G_BEGIN_DECLS

/**
 * cs_trace_equal:
 * @a: a trace
 * @b: another trace
 * @why_not: (nullable): where the first difference is described ("stmt 3 (line 12): arg 1: ...")
 *
 * Structural equality: header (leading comments, provenance, imports, decorators, signature),
 * every statement recursively (kind, callee, arguments, targets, type comments, comments,
 * subsymbols) and every proxy's type.  Names are compared literally; literals by value and
 * spelling (value->raw); statement ids and source lines are ignored.
 * Returns: %TRUE if equal
 */
gboolean cs_trace_equal      (const CsTrace *a, const CsTrace *b, GString *why_not);

/** cs_stmt_equal: one statement and its subsymbols, as in cs_trace_equal(). */
gboolean cs_stmt_equal       (const CsStmt *a, const CsStmt *b, GString *why_not);


G_END_DECLS

/* ------------------------------------------------------------------------------------------ */
/* Accuracy of a computed tensor, judged as PyTorch's accuracy check judges it                 */

#include "cs-tensor.h"

G_BEGIN_DECLS

/* What the reference error of a #CsAccuracy was measured on. */
typedef enum
{
  CS_ACCURACY_REF_EXACT,   /* a reference run that rounds exactly as the trace says (the CPU
                            * reference in CS_REF_EXACT mode): PyTorch's eager `ref` */
  CS_ACCURACY_REF_FLOOR,   /* no reference run: the f64 values rounded once to the tensor's
                            * dtype (the error any implementation storing that dtype makes) */
} CsAccuracyRefKind;

/* The constants of one verdict, as torch._dynamo.utils.same() uses them (cs_accuracy_rule()). */
typedef struct
{
  double  k;               /* PyTorch's `multiplier`: err may be k times the reference error */
  double  tol;             /* PyTorch's `tol`: rtol and atol of the first allclose test */
  double  atol;            /* tol / 10: the absolute slack of the RMSE test */
} CsAccuracyRule;

/* One tensor's accuracy (cs_accuracy_judge()). */
typedef struct
{
  double             err;        /* RMSE(x - f64) over the compared elements; NaN or inf when
                                  * n_nonfinite_mismatch > 0 (NaN if a mismatch involves NaN) */
  double             ref_err;    /* RMSE(ref - f64) over the same elements (ref: ref_kind) */
  double             ratio;      /* err / ref_err; 0 when both are 0; +inf when only ref_err is */
  double             bound;      /* k * ref_err + atol: err at most this passes */
  double             max_abs;    /* max |x - f64| over the compared elements (NaN/inf as err) */
  double             rms_f64;    /* RMS of the f64 values over the compared elements */
  CsAccuracyRule     rule;       /* the constants used */
  CsAccuracyRefKind  ref_kind;   /* what ref_err was measured on */
  gint64             n;          /* elements */
  gint64             n_compared; /* elements where x, the reference and f64 are all finite */
  gint64             n_nonfinite;/* elements where x is NaN, or inf, and so is the reference
                                  * (same NaN or the same signed inf): agreeing, not compared */
  gint64             n_nonfinite_mismatch; /* elements where exactly one of x and the reference
                                  * is non-finite, or they are different non-finite values */
  gboolean           allclose;   /* PyTorch's first test passed: every compared element has
                                  * |x - ref| <= tol + tol * |ref| */
  gboolean           pass;       /* the verdict */
} CsAccuracy;

/**
 * cs_accuracy_rule:
 * @dtype: the judged tensor's dtype
 * @numel: its number of elements
 * @training: the step has a backward (forward and gradients are judged together)
 * @rule: (out caller-allocates): the constants
 *
 * The constants of PyTorch's fp64-reference accuracy check, torch._dynamo.utils.same() (file
 * torch/_dynamo/utils.py, its `multiplier` logic, `get_multiplier()` in newer releases) with
 * the tolerances its benchmark runners pass as `tol` (benchmarks/dynamo/torchbench.py,
 * get_tolerance_and_cosine_flag()):
 * - k = 3 for bf16, f16 and fp8 results ("AMP ... false alarms"), 2 for f32 and f64, and 3 for
 *   any tensor of fewer than 1000 elements ("noise might dominate our error metric for smaller
 *   tensors");
 * - tol = 1e-3 for bf16, f16 and fp8 (the runners' --float16/--amp tolerance) and for every
 *   float dtype in a training step (the runners' CUDA training tolerance); 1e-4 (same()'s own
 *   default) for f32 and f64 in a forward-only run;
 * - atol = tol / 10, the slack same() adds to `multiplier * ref_error`.
 * The per-model exceptions of the runners (higher tolerances for listed models, the 4-D 1x1
 * rule for convolutions, use_larger_multiplier_for_smaller_tensor) are not used.
 * Integer and bool dtypes get k = 0 and tol = 0: they must match exactly.
 */
void      cs_accuracy_rule   (CsDtype         dtype,
                              int64_t         numel,
                              gboolean        training,
                              CsAccuracyRule *rule);

/**
 * cs_accuracy_judge:
 * @x: the result under test (any dtype)
 * @ref: (nullable): the reference run that rounds as the trace says, @x's number of elements;
 *   NULL: the reference error is the rounding floor (CS_ACCURACY_REF_FLOOR)
 * @f64: the f64 run (the truth), @x's number of elements (any dtype; read as doubles)
 * @rule: (nullable): the constants; NULL: cs_accuracy_rule (@x->dtype, numel, TRUE)
 * @acc: (out caller-allocates): the measures and the verdict
 *
 * PyTorch's verdict, torch._dynamo.utils.same() with fp64_ref (torch/_dynamo/utils.py): the
 * error measure is the RMSE against the f64 run, computed for the result (err) and for the
 * reference (ref_err); the result passes when allclose(ref, x, rtol=tol, atol=tol) holds, or
 * when err <= k * ref_err + tol / 10.
 * Non-finite values: where @x and the reference (@f64 for the floor, which has no run of its
 * own) are both NaN, or both the same infinity, the element agrees and is left out of the
 * RMSEs (same() with equal_nan=True passes identical NaNs); an element non-finite in only one,
 * or +inf against -inf, is a mismatch and fails the verdict.  An element where @f64 alone is
 * non-finite (the truth overflowed where both lower-precision runs stayed finite) is left out
 * too.  Integer and bool tensors pass only when every element equals the reference's (or
 * @f64's when @ref is NULL).
 */
void      cs_accuracy_judge  (const CsTensor       *x,
                              const CsTensor       *ref,
                              const CsTensor       *f64,
                              const CsAccuracyRule *rule,
                              CsAccuracy           *acc);

/**
 * cs_accuracy_margin:
 * @acc: a judged tensor
 *
 * How far from failing: err / bound for float tensors (a verdict by the RMSE test fails above
 * 1), +inf for a failed verdict with a non-finite mismatch or a wrong integer.  Sorting by it,
 * largest first, puts the worst tensors first.
 * Returns: the margin
 */
double    cs_accuracy_margin (const CsAccuracy *acc);

/** cs_accuracy_ref_kind_name: "exact" or "floor" (the report's `ref` column). */
const char *cs_accuracy_ref_kind_name (CsAccuracyRefKind kind);

G_END_DECLS
