/* cs-cse.h: the clean-up passes the nvFuser executor runs after grouping (reference/
 * thunder-traces.md 6.3 "Order of the whole pass", 7.1-7.3): remove_redundant_casts, common
 * subexpression elimination and dead code elimination, at the top level and inside regions.
 *
 * Source: thunder/executors/nvfuserex_impl.py (`remove_redundant_casts`, the nvFuser `cse`,
 * `update_fusion_call_ctx`), thunder/core/transform_common.py (`cse`, `cse_single_bsym`,
 * `dce`).
 */
#pragma once

#include <glib.h>

#include "cs-ir.h"
#include "cs-policy.h"

G_BEGIN_DECLS

/**
 * cs_cse_remove_redundant_casts:
 * @trace: (transfer none): a fused trace
 *
 * nvFuser's remove_redundant_casts: only float->float `prims.convert_element_type` on tensor
 * proxies is considered.  A cast whose most original float source (looking through earlier
 * casts) already has the target dtype is dropped and its output replaced by that source
 * (bf16->f32->bf16 gives back the bf16 value; f32->bf16->f32 gives back the f32 value, dropping
 * the bf16 rounding: a semantic change Thunder documents); any other cast is rewritten to read
 * the most original source.  Runs once over the top-level statements (casts outside regions)
 * and with fresh maps inside each region; replaced region outputs propagate to later
 * statements.  A region's outputs are mapped onto what replaced them and listed once each; an
 * output replaced by one of the region's inputs stays an output (`[t371, t349] =
 * nvFusion2(t371)`, as Thunder prints it).  Nothing is dead-code eliminated here: prims left
 * unread stay until cs_cse_trace() and its refresh (Thunder's remove_redundant_casts leaves
 * them to nvFuserExecutor.cse, dce and update_fusion_call_ctx, so a cast made redundant here
 * can still absorb a later duplicate in CSE).  A cast chain that crosses a region boundary is
 * kept.
 * Returns: (transfer full): the new trace (pass "remove-redundant-casts")
 */
CsTrace *cs_cse_remove_redundant_casts (const CsTrace *trace);

/**
 * cs_cse_remove_redundant_casts_rounding:
 * @trace: (transfer none): a decomposed trace, fused or not
 * @rounding: CS_ROUNDING_FUSED: exactly cs_cse_remove_redundant_casts(); CS_ROUNDING_EAGER:
 *   the same walk, but the look-through stops at a cast output made by another user-level op
 *   than the cast reading it (CsStmt.origin differs: another statement of the initial trace,
 *   or of the backward the grad pass made for another one; or CsStmt.grad_sum differs: the
 *   grad pass's sum of two cotangents is an op of its own, as autograd's accumulation is)
 *
 * Under CS_ROUNDING_EAGER a bf16/f16 value one op stores and the next op upcasts keeps its
 * rounding (the f32 -> bf16 -> f32 chain between two ops stays), while the chains inside one
 * op's decomposition (ltorch.gelu's nested muls and adds, each with its own bf16 result) still
 * fold: each user-level op computes in f32 and rounds once, as a PyTorch eager kernel with
 * opmath does.  A user's `.to(bf16)` followed by another op is therefore never dropped.
 * Source: PyTorch eager stores every op's output in its dtype (at::opmath_type computes bf16
 * and f16 kernels in float); nvFuser's remove_redundant_casts for the rest.
 * Returns: (transfer full): the new trace (pass "remove-redundant-casts")
 */
CsTrace *cs_cse_remove_redundant_casts_rounding (const CsTrace *trace, CsRounding rounding);

/**
 * cs_cse_trace:
 * @trace: (transfer none): a fused trace
 *
 * Common subexpression elimination.  Key = (op, callee, arguments with proxies resolved,
 * BACKWARD flag).  A statement whose key was seen earlier is dropped and its outputs mapped to
 * the earlier outputs; later reads are rewritten (also inside subsymbols).  Top-level
 * statements share one map; each region's prims get their own; a region's outputs are mapped
 * as its readers are and listed once each.  Regions are then refreshed (inputs/outputs, dead
 * prims; an output that is one of the region's inputs stays).  Never merged: RANDOM ops,
 * attention, get_grad, statements without outputs and DONT_DCE statements.
 * Returns: (transfer full): the new trace (pass "cse")
 */
CsTrace *cs_cse_trace                  (const CsTrace *trace);

/**
 * cs_cse_dce:
 * @trace: (transfer none): a trace
 *
 * Dead code elimination: walking back from the return, a statement is kept when it is tagged
 * DONT_DCE, is not a call (unpack, comment, return), or produces a proxy read later; a region
 * keeps only the outputs read later and the prims they need, and loses inputs no longer read.
 * Returns: (transfer full): the new trace (pass "dce")
 */
CsTrace *cs_cse_dce                    (const CsTrace *trace);

G_END_DECLS
