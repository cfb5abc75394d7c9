/* cs-attention-claim.h: castscope's attention claim (issue 20, policy key "attention").
 *
 * A policy choice of castscope, not a Thunder pass: Thunder's sdpa executor claims only
 * `ltorch.scaled_dot_product_attention` calls, never an attention written out as matmul,
 * softmax, matmul.  Under attention=fused this rewrite turns such a pattern of the initial
 * trace into the one sdpa call, which the sdpa executor then claims (cs-executors.h), the grad
 * pass differentiates with the executor's backward and the CUDA executor runs fused.
 */
#pragma once

#include <glib.h>

#include "cs-ir.h"
#include "cs-policy.h"

G_BEGIN_DECLS

/** The `why` of a statement the claim made. */
#define CS_ATTENTION_CLAIM_WHY                                                               \
  "claimed by castscope's attention executor: matmul, softmax, matmul as one fused attention " \
  "(policy attention=fused)"

/**
 * cs_attention_claim_trace:
 * @trace: an initial trace (ltorch statements, before autocast and grad)
 * @policy: (nullable): the cast policy; NULL or attention=pattern claims nothing
 * @n_claimed: (out) (optional): the number of patterns replaced
 *
 * Finds, among the top-level statements,
 * ```
 * t0 = ltorch.transpose(k, -2, -1)      # or (k, -1, -2), (k, 2, 3), (k, 3, 2)
 * t1 = ltorch.matmul(q, t0)
 * t2 = ltorch.mul(t1, c)                # or mul(c, t1), div(t1, d) (scale 1/d), or absent (1)
 * t3 = ltorch._softmax(t2, -1, dtype=None)   # or ltorch.softmax; dim -1 or 3
 * t4 = ltorch.matmul(t3, v)
 * ```
 * optionally with a causal mask `tm = ltorch.tril(x, 0, fill_value=-float('inf'))` just before
 * or just after the scale (then a positive one), which gives is_causal=True (torch's causal
 * mask is the lower triangle, diagonal included, aligned at the top left, as tril's),
 * where c and d are number literals and the scale is not negative (the sdpa decomposition
 * multiplies q and k by sqrt(scale): a negative one would make them NaN), each of t0..t3 is read by the next statement alone (not
 * by any other statement, the return included), q, k and v are typed 4-D CUDA tensors of one
 * floating dtype, q [B, H, L, E], k [B, H, S, E], v [B, H, S, Ev], and no `dtype` is given to
 * the softmax.  Each such pattern becomes, at t4's place,
 * `t4 = ltorch.scaled_dot_product_attention(q, k, v, None, 0.0, is_causal, scale=c)`: the scale
 * is the mul's literal value as written (1/d for a div, 1.0 without a scale), t4 keeps its
 * proxy (the op's meta is checked to give it the same type), and the statement keeps t4's
 * statement id, origin, line and type comment, with why = #CS_ATTENTION_CLAIM_WHY; t0..t3's
 * statements (and the tril's) are dropped.  Semantics:
 * torch.nn.functional.scaled_dot_product_attention with attn_mask=None, dropout_p=0 computes
 * softmax(q @ k^T * scale, -1) @ v, with -inf above the diagonal when is_causal; the rounding
 * differs (see #CsAttention).
 * Returns: (transfer full): the rewritten trace (derived from @trace, pass "claim-attention"),
 *   or a new reference to @trace when nothing was claimed
 */
CsTrace *cs_attention_claim_trace (const CsTrace  *trace,
                                   const CsPolicy *policy,
                                   guint          *n_claimed);

G_END_DECLS
