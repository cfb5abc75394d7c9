/* cs-decompose.h: ltorch -> prims decompositions, under a cast policy.
 *
 * Each supported ltorch op is rebuilt one level down exactly as Thunder's initial trace prints
 * its subsymbols (same prims, same casts, same order, nested ltorch statements where Thunder's
 * decomposition calls other ltorch symbols, each carrying its own subsymbols).  Source:
 * thunder/torch/__init__.py, thunder/clang/__init__.py, thunder/clang/utils.py at commit
 * 1e22aacb1; reference/thunder-traces.md sections 2 and 3.2.
 *
 * Policy knobs implemented here (cs-policy.h):
 * - elementwise=native: bf16/f16 math is computed in the operands' dtype (no upcasts around
 *   elementwise ops, reductions, softmax and norms);
 * - matmul=upcast-f32: a bf16/f16 prims.matmul / prims.linear becomes convert->f32, an f32
 *   matmul/linear, and a convert back (the "seed hazard": the tensor cores sit idle).
 * The default policy reproduces Thunder.
 */
#pragma once

#include <glib.h>

#include "cs-ir.h"
#include "cs-policy.h"

G_BEGIN_DECLS

#define CS_DECOMPOSE_ERROR (cs_decompose_error_quark ())
/** cs_decompose_error_quark: the #GQuark of #CS_DECOMPOSE_ERROR (codes: #CsDecomposeError). */
GQuark cs_decompose_error_quark (void);

typedef enum
{
  CS_DECOMPOSE_ERROR_UNSUPPORTED, /* no decomposition for this op (or these arguments) */
  CS_DECOMPOSE_ERROR_PRIM,        /* the statement is already a prim (nothing one level down) */
  CS_DECOMPOSE_ERROR_ARGS,        /* malformed arguments */
  CS_DECOMPOSE_ERROR_TYPE,        /* the decomposition's result type differs from the statement's */
} CsDecomposeError;

/**
 * cs_decompose_stmt:
 * @trace: (transfer none): trace that owns @stmt; new statements and proxies are made in it
 * @stmt: a CALL statement of @trace whose op is an ltorch op (or an executor alias of one)
 * @policy: (nullable): cast policy; NULL means Thunder's defaults
 * @out: (element-type CsStmt*): the new statements are appended here, in order
 * @error: return location for a #CS_DECOMPOSE_ERROR (or a #CS_META_ERROR from typing)
 *
 * Builds the statements that compute @stmt's outputs one level down, as Thunder prints them.
 * Intermediates get fresh names (cs_trace_fresh_name (trace, "t")) and are typed by
 * cs_meta_infer(); the last statement writes @stmt's own output proxy (`t5 = ltorch.matmul(..)`
 * decomposes into `t5 = prims.matmul(..)`); a decomposition that would return an input
 * unchanged ends in `prims.shallow_copy` (Thunder PR #2396).  Nested ltorch statements carry
 * their own subsymbols.  @stmt is not modified.  With matmul=upcast-f32 a bf16/f16 prims.matmul
 * or prims.linear statement also decomposes (into its convert/f32/convert form).
 *
 * Errors: CS_DECOMPOSE_ERROR_UNSUPPORTED naming the op and the line, CS_DECOMPOSE_ERROR_PRIM for
 * a prim, CS_DECOMPOSE_ERROR_TYPE when @stmt's printed output type disagrees with the
 * decomposition's.
 * Returns: TRUE on success (then @out has at least one new statement)
 */
gboolean    cs_decompose_stmt       (CsTrace         *trace,
                                     const CsStmt    *stmt,
                                     const CsPolicy  *policy,
                                     GPtrArray       *out,
                                     GError         **error);

/**
 * cs_decompose_to_prims:
 * @trace: (transfer none): trace that owns @stmt
 * @stmt: a CALL statement (ltorch op, executor alias or prim)
 * @policy: (nullable): cast policy
 * @out: (element-type CsStmt*): flat list of prim statements appended here
 * @error: return location for a #CS_DECOMPOSE_ERROR
 *
 * Like cs_decompose_stmt() but recurses until only prims remain (the flat prim list fusion
 * bodies need).  A prim statement gives a copy of itself (or its matmul=upcast-f32 form).
 * Returns: TRUE on success
 */
gboolean    cs_decompose_to_prims   (CsTrace         *trace,
                                     const CsStmt    *stmt,
                                     const CsPolicy  *policy,
                                     GPtrArray       *out,
                                     GError         **error);

/**
 * cs_decompose_supports:
 * @stmt: a statement
 *
 * Returns: TRUE when @stmt is a CALL of an op castscope can decompose (the answer does not
 * look at the arguments, which may still be unsupported, e.g. advanced indexing)
 */
gboolean    cs_decompose_supports   (const CsStmt *stmt);

/**
 * cs_decompose_trace:
 * @trace: (transfer none): an initial (ltorch-level) trace
 * @policy: (nullable): cast policy
 * @error: return location for a #CS_DECOMPOSE_ERROR
 *
 * A copy of @trace whose top-level ltorch statements get freshly built subsymbols under
 * @policy (replacing any printed ones); other statements are kept unchanged (a statement of
 * @trace may be shared with the result: cs_trace_own_stmt() before editing one).  Statements
 * castscope cannot decompose keep their printed subsymbols.
 * Returns: (transfer full): the new trace (pass "decompose"), or NULL with @error set
 */
CsTrace    *cs_decompose_trace      (const CsTrace   *trace,
                                     const CsPolicy  *policy,
                                     GError         **error);

/* Internal to the passes that emit many statements (decompose, grad). */

/**
 * _cs_decompose_names_free_from: (skip)
 * @trace: a trace
 *
 * Where fresh names need no lookup: every proxy visible in @trace named "t<n>" has n below the
 * result.  Stays true while a pass adds proxies only through the name counter
 * (_cs_decompose_fresh_proxy(), cs_trace_fresh_name()): from then on, any "t<n>" with n at or
 * above the result and at or above trace->next_name is free.
 * Returns: 1 + the largest such n, 0 when there is none
 */
guint32     _cs_decompose_names_free_from (const CsTrace *trace);

/**
 * _cs_decompose_fresh_proxy: (skip)
 * @trace: the trace that receives the proxy
 * @names_free_from: _cs_decompose_names_free_from() of @trace at the start of the pass, or
 *   G_MAXUINT32 to look every candidate name up
 *
 * The same proxy as cs_trace_add_proxy (trace, cs_trace_fresh_name (trace, "t")) - untyped,
 * named "t<n>" with the smallest n from the trace's name counter that no visible proxy uses -
 * without formatting the name through printf, and with at most one lookup per candidate
 * (none from @names_free_from on).
 * Returns: (transfer none): the new proxy
 */
CsProxy    *_cs_decompose_fresh_proxy (CsTrace *trace,
                                       guint32  names_free_from);

/**
 * _cs_decompose_stmt_names: (skip)
 * @names_free_from: as for _cs_decompose_fresh_proxy()
 *
 * cs_decompose_stmt() for a pass that knows where fresh names need no lookup.
 * Returns: TRUE on success
 */
gboolean    _cs_decompose_stmt_names  (CsTrace         *trace,
                                       const CsStmt    *stmt,
                                       const CsPolicy  *policy,
                                       guint32          names_free_from,
                                       GPtrArray       *out,
                                       GError         **error);

G_END_DECLS
