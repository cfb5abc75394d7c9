/* cs-aten-private.h: the lowering of the aten ops that no ltorch op matches (core only).
 *
 * core/cs-decompositions.c decomposes a statement whose op carries CS_OP_TAG_ATEN by handing it
 * to _cs_aten_lower() with a callback that emits ltorch calls (with their own decompositions) and
 * prims; the lowering composes the op from them as PyTorch's kernels compute it.
 */
#pragma once

#include <glib.h>

#include "cs-ir.h"

G_BEGIN_DECLS

/* Emits one call of @callee (a string literal: "ltorch.add", "prims.shallow_copy") with
 * @args; returns its typed result value (a proxy, or a tuple for multi-output ops). */
typedef CsValue *(*CsAtenCallFunc) (gpointer       data,
                                    const char    *callee,
                                    const CsArg   *args,
                                    guint          n_args,
                                    GError       **error);

typedef struct
{
  CsArena        *arena;   /* where new literal values go */
  CsAtenCallFunc  call;    /* emits a call */
  gpointer        data;    /* passed to @call */
} CsAtenLowerCtx;

/**
 * _cs_aten_lower: (skip)
 * @ctx: the emitter
 * @stmt: a call of an op tagged CS_OP_TAG_ATEN, its inputs and outputs typed
 * @error: return location for a #CS_DECOMPOSE_ERROR
 *
 * Emits @stmt's computation through @ctx.  Float math on bf16/f16 operands runs in f32 (the
 * "opmath" type of ATen's CUDA kernels) and each result is converted to the dtype the graph
 * printed for it.
 * Returns: the value of @stmt's outputs: a proxy for one output; for a multi-output op a
 *   tuple of the outputs @stmt names (its target positions that are not `_`), in order; NULL
 *   with @error set (CS_DECOMPOSE_ERROR_UNSUPPORTED for arguments it does not lower)
 */
CsValue *_cs_aten_lower (const CsAtenLowerCtx *ctx, const CsStmt *stmt, GError **error);

G_END_DECLS
