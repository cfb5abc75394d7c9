/* cs-fuse-private.h: the fusion pass's internals that other passes call (fusibility, the
 * region refresh).  Internal to core/ (tests may include it).
 */
#pragma once

#include <glib.h>

#include "cs-ir.h"
#include "cs-policy.h"

G_BEGIN_DECLS

/* NULL when nvFuser can execute @stmt under @policy, else a reason (static or in @buf). */
const char *_cs_fuse_why_not_fusible (const CsStmt *stmt, const CsPolicy *policy,
                                      char *buf, gsize buf_len);

/*
 * Recomputes every region's outputs (produced inside, read later outside or returned),
 * DCEs its subsymbols against them and recomputes its inputs (first appearance order); this
 * is Thunder's `update_fusion_call_ctx` + `fuse` step 3.  When @dce_top is TRUE, top-level
 * statements whose outputs are never read are dropped too (Thunder's `dce`).  One backward
 * sweep; keeps the statement order.
 */
void        _cs_regions_refresh      (CsTrace *trace, gboolean dce_top);

/* The region refresh's per-proxy marks and scratch lists, kept between the refreshes of one
 * pass (the fusion pass refreshes several times): the arrays grow with the traces' proxy ids
 * and are never cleared (generation stamps).  Not shared between threads. */
typedef struct _CsRefreshMarks CsRefreshMarks;

/* An empty store; free with _cs_refresh_marks_free() (NULL is ignored). */
CsRefreshMarks *_cs_refresh_marks_new  (void);
void        _cs_refresh_marks_free   (CsRefreshMarks *marks);

/* _cs_regions_refresh() with the marks of @marks (any trace; the result does not depend on
 * what @marks saw before). */
void        _cs_regions_refresh_with (CsTrace *trace, gboolean dce_top, CsRefreshMarks *marks);

/* Within the fusion pass: Thunder's rematerialize (thunder/core/rematerialization.py) over
 * every producer -> consumer pair of fusion regions of @t, forward and backward alike
 * (cs-fuse-remat.c); @policy decides what an nvFusion consumer can run when the producer is
 * another executor's region.  Regions are refreshed after a change, with @marks (nullable:
 * a store of its own). */
void        _cs_fuse_rematerialize   (CsTrace *t, const CsPolicy *policy,
                                      CsRefreshMarks *marks);

/* Within the fusion pass (cs-fuse-regions.c): groups @items (top-level statements of @trace,
 * in order) into regions under @policy and appends the result to @out: region calls named
 * nvFusion<*@counter> (counting up) and the statements left as they are.  Consecutive:
 * Thunder's runs of fusible statements; dataflow: data_dependent_partition's merges along
 * producer -> consumer edges that make no cycle. */
void        _cs_fuse_group_consecutive (CsTrace *trace, const CsPolicy *policy,
                                        GPtrArray *items, GPtrArray *out, guint *counter);
/* _cs_fuse_group_dataflow: merges each fusible statement with its fusible producers of the same
 * side (forward or BACKWARD) wherever the merge makes no cycle, then emits the groups in
 * topological order, the group with the earliest first statement first; a fusible group takes
 * every other ready fusible group of its side (horizontal merge).  Comments stay before the
 * statement they preceded; the comments after the last statement, then the final return, come
 * last.  A group of statements that are not fusible, or only shape ops, is emitted as it is. */
void        _cs_fuse_group_dataflow    (CsTrace *trace, const CsPolicy *policy,
                                        GPtrArray *items, GPtrArray *out, guint *counter);

/* Within the fusion pass (cs-fuse-regions.c): the torchcompile_xentropy executor's fusion pass
 * (thunder/executors/torch_compile.py): runs of consecutive statements it can fuse
 * (cs_executor_xentropy_can_fuse()) become regions TorchCompile<*@counter> when one of them is
 * a required op (cs_executor_xentropy_required()); members are kept whole.  Appends to @out. */
void        _cs_fuse_group_xentropy    (CsTrace *trace, GPtrArray *items, GPtrArray *out,
                                        guint *counter);

G_END_DECLS
