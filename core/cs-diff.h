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
  const CsStmt  *region;     /* the region: in a (split, removed) or in b (merged, new) */
  GPtrArray     *others;     /* const CsStmt*: the regions of the other trace it maps to
                                (empty for new and removed regions) */
} CsDiffRegion;

typedef struct
{
  GPtrArray *casts_added;    /* CsDiffCast*: in b, not in a */
  GPtrArray *casts_removed;  /* CsDiffCast*: in a, not in b */
  GPtrArray *regions_split;  /* CsDiffRegion*: a region of a whose origins spread over >= 2
                                regions of b, or the one region of a of a split group */
  GPtrArray *regions_merged; /* CsDiffRegion*: a region of b covering origins of >= 2 regions
                                of a, or the one region of b of a merged group */
  GPtrArray *regions_new;    /* CsDiffRegion*: a region of b none of whose origins is in a
                                region of a (its statements ran outside every region, or
                                are new) */
  GPtrArray *regions_removed; /* CsDiffRegion*: a region of a none of whose origins is in a
                                region of b */
  guint      n_regions_a;    /* regions in a */
  guint      n_regions_b;    /* regions in b */
  /* The maps between regions (see cs_trace_diff()) connect them into groups (a region of a
   * and the regions of b it maps onto, the regions of a those map onto, and so on); each
   * group is one of: */
  guint      n_regions_kept; /* one region of a, one of b (1:1); or n of each, each mapping
                                onto one (regions that only their origins tell apart, as the
                                backward statements of one forward statement): n */
  guint      n_groups_split; /* one region of a, >= 2 of b: how many such groups */
  guint      n_split_into;   /* ... and their regions of b */
  guint      n_groups_merged; /* >= 2 regions of a, one of b: how many */
  guint      n_merged_from;  /* ... and their regions of a */
  guint      n_regrouped_a;  /* >= 2 regions on both sides: their regions of a */
  guint      n_regrouped_b;  /* ... and of b */
  /* so that n_regions_a = kept + removed + groups_split + merged_from + regrouped_a +
   * (unmatched regions of a), and n_regions_b = kept + new + split_into + groups_merged +
   * regrouped_b + (unmatched regions of b) */
  guint      n_regions_unmatched; /* regions of a or b without any origin (statements that
                                do not come from the passes): compared with nothing, in no
                                count above */
} CsTraceDiff;

/**
 * cs_trace_diff:
 * @a: (transfer none): the first trace (e.g. the forward under policy A)
 * @b: (transfer none): the second trace (same program under policy B)
 *
 * Casts are compared as multisets of (origin, source dtype, target dtype) over every level
 * (top level, composite decompositions, region prims); regions by the origins of their prims:
 * a region of @a maps onto the region of @b that holds the first statement of each of its
 * origins (an origin's statements can be in several regions: rematerialized copies, or the
 * backward statements of one forward statement's VJP), and the other way round.
 * regions_split and regions_merged list each region that maps onto two or more, and the one
 * region of a split (merged) group when its origins map onto one region; the n_ counts
 * classify the groups that these maps connect, and add up to n_regions_a and n_regions_b.
 * Statements whose origin is 0 are ignored for regions (a region of only such statements is
 * counted in n_regions_unmatched).  The result borrows statements from
 * @a and @b: keep both alive while using it.
 * Returns: (transfer full): the diff; free with cs_trace_diff_free()
 */
CsTraceDiff *cs_trace_diff      (const CsTrace *a,
                                 const CsTrace *b);
/** cs_trace_diff_free: frees @diff and its arrays (not the statements they borrow); NULL is
 * allowed. */
void         cs_trace_diff_free (CsTraceDiff   *diff);
/** TRUE when nothing changed. */
gboolean     cs_trace_diff_is_empty (const CsTraceDiff *diff);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (CsTraceDiff, cs_trace_diff_free)

G_END_DECLS
