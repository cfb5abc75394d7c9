/* cs-autocast.h: Thunder's autocast transform (reference/thunder-traces.md section 4).
 *
 * Source: thunder/transforms/autocast.py (the rules for matmul, linear, convolution and
 * scaled_dot_product_attention; allowed autocast dtypes float16 and bfloat16).
 */
#pragma once

#include <glib.h>

#include "cs-ir.h"
#include "cs-policy.h"

G_BEGIN_DECLS

#define CS_AUTOCAST_ERROR (cs_autocast_error_quark ())
/** cs_autocast_error_quark: the #GQuark of #CS_AUTOCAST_ERROR (codes: #CsAutocastError). */
GQuark cs_autocast_error_quark (void);

typedef enum
{
  CS_AUTOCAST_ERROR_TYPES,   /* re-typing a statement downstream of a downcast failed */
} CsAutocastError;

/**
 * cs_autocast_trace:
 * @trace: (transfer none): an initial (ltorch-level) trace
 * @policy: the cast policy (key "autocast": off, bf16, f16)
 * @error: return location for a #CS_AUTOCAST_ERROR (or a CS_META_ERROR)
 *
 * With autocast=bf16/f16, every f32/f16/bf16 tensor operand of matmul, linear (bias included
 * when present), convolution and scaled_dot_product_attention (q, k, v) whose dtype differs
 * from the autocast dtype gets a `prims.convert_element_type(x, dtypes.bfloat16)` statement
 * right before the op (stmt->why names the rule); nothing else is cast.  The op's outputs take
 * the autocast dtype; statements downstream are re-typed by their meta functions (so
 * `matmul(bf16) + f32` promotes back to f32) and lose their recorded decomposition (the
 * decompose pass rebuilds it).  With autocast=off the result is an unchanged copy that shares
 * the input's statements, values and proxies (cs_trace_derive()).
 * Returns: (transfer full): the new trace (pass "autocast"), or NULL with @error set
 */
CsTrace *cs_autocast_trace (const CsTrace  *trace,
                            const CsPolicy *policy,
                            GError        **error);

G_END_DECLS
