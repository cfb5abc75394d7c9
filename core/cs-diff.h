/* cs-diff.h: what changes between two traces of the same program (two policies, or two
 * passes): casts added/removed and fusion regions split/merged, keyed by the statements of the
 * initial trace they derive from (stmt->origin), since proxy names differ between runs.
 * The CLI's `diff`, the render overlays and the GUI use this one function.
 */
#pragma once

#include <glib.h>

#include "cs-ir.h"

G_BEGIN_DECLS

typedef struct
{
  guint32        origin;     /* initial-trace statement the cast derives from (0 = unknown) */
  CsDtype        from;       /* source dtype */
  CsDtype        to;         /* target dtype */
  guint          count;      /* how many more casts of this kind the trace has than the other */
  const CsStmt  *stmt;       /* one such cast in its trace (b for added, a for removed) */
  const char    *region;     /* callee of the region holding @stmt, or NULL (top level) */
} CsDiffCast;

typedef struct
{
  const CsStmt  *region;     /* the region: in a (split) or in b (merged) */
  GPtrArray     *others;     /* const CsStmt*: the regions of the other trace it maps to */
} CsDiffRegion;

typedef struct
{
  GPtrArray *casts_added;    /* CsDiffCast*: in b, not in a */
  GPtrArray *casts_removed;  /* CsDiffCast*: in a, not in b */
  GPtrArray *regions_split;  /* CsDiffRegion*: a region of a whose origins spread over >= 2
                                regions of b */
  GPtrArray *regions_merged; /* CsDiffRegion*: a region of b covering origins of >= 2 regions
                                of a */
  guint      n_regions_a;    /* regions in a */
  guint      n_regions_b;    /* regions in b */
} CsTraceDiff;

/**
 * cs_trace_diff:
 * @a: (transfer none): the first trace (e.g. the forward under policy A)
 * @b: (transfer none): the second trace (same program under policy B)
 *
 * Casts are compared as multisets of (origin, source dtype, target dtype) over every level
 * (top level, composite decompositions, region prims); regions by the origins of their prims.
 * Statements whose origin is 0 are ignored for regions.  The result borrows statements from
 * @a and @b: keep both alive while using it.
 * Returns: (transfer full): the diff; free with cs_trace_diff_free()
 */
CsTraceDiff *cs_trace_diff      (const CsTrace *a,
                                 const CsTrace *b);
void         cs_trace_diff_free (CsTraceDiff   *diff);
/** TRUE when nothing changed. */
gboolean     cs_trace_diff_is_empty (const CsTraceDiff *diff);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (CsTraceDiff, cs_trace_diff_free)

G_END_DECLS
