/* cs-fuse.h: the nvFuser fusion pass (reference/thunder-traces.md 6.1-6.4, 8).
 *
 * Source: thunder/executors/nvfuserex_impl.py (`fuse`, `_can_fuse_node`, the matmul/linear
 * checkers behind nv_enable_matmul / nv_enable_linear), thunder/executors/
 * data_dependent_partition.py (dataflow grouping) and the consecutive grouping of PR #1608.
 */
#pragma once

#include <glib.h>

#include "cs-ir.h"
#include "cs-policy.h"

G_BEGIN_DECLS

#define CS_FUSE_ERROR (cs_fuse_error_quark ())
/** cs_fuse_error_quark: the #GQuark of #CS_FUSE_ERROR (codes: #CsFuseError). */
GQuark cs_fuse_error_quark (void);

typedef enum
{
  CS_FUSE_ERROR_INPUT,      /* the trace has no return or reads an undefined proxy */
  CS_FUSE_ERROR_INVARIANT,  /* cs_fuse_check_invariants found a broken invariant */
} CsFuseError;

/**
 * cs_fuse_trace:
 * @trace: (transfer none): a decomposed trace (joint or forward only)
 * @policy: the cast policy (fusion mode, fuse-matmul, fuse-linear)
 * @error: return location for a #CS_FUSE_ERROR
 *
 * Groups fusible statements into regions and returns the new trace.  The fusion executors of
 * @policy's executor list run in its order (Thunder runs each fusion executor's fusion_pass in
 * list order): torchcompile_xentropy makes TorchCompileK regions (cs-executors.h; members kept
 * whole, not flattened), nvFuser nvFusionK regions from what is left; an executor the list
 * lacks makes none.  After each executor's grouping, Thunder's rematerialize runs over every
 * producer -> consumer pair of the fusion regions made so far (forward and backward alike: the
 * min-cut of thunder/core/rematerialization.py decides what the consumer recomputes; a region
 * left without outputs goes).  nvFuser's grouping (Thunder's default at 1e22aacb1 is
 * consecutive, data_dependent_partition._DEFAULT_FUSION_TYPE):
 * - consecutive: runs of adjacent fusible statements, no reordering;
 * - dataflow: producer/consumer merges that create no cycle, then horizontal merges of
 *   independent fusible groups, the result topologically ordered;
 * - off: no regions of any executor (a copy of @trace).
 * Groups made only of shape ops and single non-fusible statements stay unfused.  A region
 * of the forward holds no backward (stmt->backward) statement; a backward region may hold
 * forward statements rematerialization recomputes there, tags kept as in Thunder.  Each
 * region is one CALL statement `[outs] = nvFusionK(ins)` (k counts regions in order from 0), whose subsymbols are
 * the members flattened as nvFuserExecutor.flatten does (to prims, ltorch.embedding kept
 * whole); inputs/outputs are unique and ordered by first appearance (a rematerialized consumer
 * keeps the order of its outputs, as Thunder's apply_rematerialization_for_consumer does);
 * stmt->why says why the region ended.  Comment lines inside a run move before the region.
 * Units: none.  Errors: CS_FUSE_ERROR_INPUT for a trace without a return.
 * Returns: (transfer full): the fused trace, or NULL with @error set
 */
CsTrace    *cs_fuse_trace              (const CsTrace  *trace,
                                        const CsPolicy *policy,
                                        GError        **error);

/**
 * cs_fuse_stmt_is_fusible:
 * @stmt: a top-level statement
 * @policy: the cast policy
 *
 * Thunder's `_can_fuse_node`: a prim with an nvFuser translator (matmul/linear only when
 * fuse-matmul/fuse-linear are on), or a composite whose subsymbols are all fusible
 * (recursively), touching at least one CUDA tensor, with nvFuser-supported dtypes (not
 * int8/int16/uint8).
 */
gboolean    cs_fuse_stmt_is_fusible    (const CsStmt   *stmt,
                                        const CsPolicy *policy);

/**
 * cs_fuse_flatten_regions:
 * @trace: (transfer none): a trace that may hold region calls
 *
 * Replaces every region call by its subsymbols (the inverse of fusion, for re-fusing a
 * Thunder-fused trace under another policy).  Other statements are copied unchanged.
 * Returns: (transfer full): the flattened trace
 */
CsTrace    *cs_fuse_flatten_regions    (const CsTrace  *trace);

/**
 * cs_fuse_check_invariants:
 * @trace: (transfer none): a fused trace
 * @error: return location for a #CS_FUSE_ERROR (CS_FUSE_ERROR_INVARIANT)
 *
 * Checks: every proxy is produced at most once (a statement sits in at most one region);
 * every read proxy is produced earlier or is an input (trace order valid, hence the regions
 * are acyclic); a region's inputs are exactly the proxies its subsymbols read from outside
 * and its outputs are produced inside or are inputs it passes through (an output
 * remove_redundant_casts replaced by an input); no forward region holds a backward statement.
 * Returns: TRUE when every invariant holds
 */
gboolean    cs_fuse_check_invariants   (const CsTrace  *trace,
                                        GError        **error);

/** Number of region calls in @trace (top level). */
guint       cs_fuse_count_regions      (const CsTrace  *trace);

G_END_DECLS
