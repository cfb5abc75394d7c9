/* cs-aten-match.h: one function traced by Thunder and by torch.compile, matched cast for cast
 * and region for region (issue 22's side-by-side compare).
 *
 * The two traces share no names, origins or statement ids: Thunder's `t12` is torch.compile's
 * `convert_element_type_3`.  What they share is the computation: the same function rounds the
 * same tensors, so its casts have the same source and target dtype and the same number of
 * elements (shapes may differ by a view: Thunder's [2, 16, 64] is Inductor's [32, 64]), in
 * the same dataflow order; and the fusion regions that hold them are the kernels each
 * compiler made of the same stretch of code.
 */
#pragma once

#include <glib.h>
#include <stdint.h>

#include "cs-ir.h"

G_BEGIN_DECLS

/** A matched pair: a statement id of the first trace and of the second. */
typedef struct
{
  guint32 a;   /* CsStmt.id in trace a (a cast: the convert itself, inside its region) */
  guint32 b;   /* CsStmt.id in trace b */
} CsTracePair;

typedef struct
{
  guint   n_casts_a;      /* tensor casts of a, every level (as cs-stats.h counts them) */
  guint   n_casts_b;      /* of b */
  guint   n_regions_a;    /* fusion regions of a (top-level) */
  guint   n_regions_b;    /* of b */
  GArray *casts;          /* CsTracePair: matched casts, in a's order */
  GArray *regions;        /* CsTracePair: matched regions, in a's order */
} CsTraceMatch;

/**
 * cs_trace_match_new:
 * @a: a trace (a Thunder trace, say)
 * @b: another trace of the same function (torch.compile's graph of it, after the same passes)
 *
 * Casts: the order-preserving matching of the two traces' casts (in trace order, regions
 * entered, decompositions flattened to their prims) of the largest weight, two casts matching
 * when they convert the same dtype to the same dtype over the same number of elements (weight
 * 2), one more when the converted tensors come from the same kind of op (a matmul or linear,
 * a mul..., looking through broadcasts and views).  Regions: each region of
 * @a goes with the region of @b that holds most of the casts matched to its own (ties: the
 * earlier), one to one; regions left over are matched by their place among the matmuls (the
 * k-th region after the j-th matmul of the trace on both sides), matmuls being where every
 * compiler ends a region under fuse-matmul=off.
 * Returns: (transfer full): the match; free with cs_trace_match_free()
 */
CsTraceMatch *cs_trace_match_new    (const CsTrace *a, const CsTrace *b);
void          cs_trace_match_free   (CsTraceMatch *match);

/**
 * cs_trace_match_lookup:
 * @match: a match
 * @from_a: %TRUE when @id is a statement of trace a
 * @id: a statement id (a cast or a region)
 *
 * Returns: the matched statement's id on the other side, 0 when @id is matched to nothing
 */
guint32       cs_trace_match_lookup (const CsTraceMatch *match, gboolean from_a, guint32 id);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (CsTraceMatch, cs_trace_match_free)

G_END_DECLS
