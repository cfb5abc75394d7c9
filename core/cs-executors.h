/* cs-executors.h: which of Thunder's executors claims an op before fusion (issue 18).
 *
 * Thunder walks its executor list in priority order (thunder/extend/__init__.py,
 * thunder/__init__.py at 1e22aacb1): an operator executor with a checker that accepts a bound
 * symbol takes it whole (its grad transform replaces the VJP, its execution transform the
 * decomposition); a fusion executor groups what it can fuse.  castscope mirrors the two that
 * change what a default Thunder run computes:
 *
 * - sdpa (thunder/executors/sdpaex.py): `ltorch.scaled_dot_product_attention` becomes
 *   `sdpafx_grad_forward_scaled_dot_product_efficient_attention` (flash attention; bf16/f16, no
 *   mask) or `sdpaex_grad_forward_scaled_dot_product_efficient_attention` (memory-efficient;
 *   f32, or a mask), and its backward the matching `..._backward` statement;
 * - torchcompile_xentropy (thunder/executors/torch_compile.py): regions `TorchCompileN` of the
 *   statements it can run, where one of them is a cross-entropy op (cs-fuse.h runs it).
 *
 * nvFuser is the fusion pass itself (cs-fuse.h); torch and python run the rest.
 */
#pragma once

#include <glib.h>

#include "cs-ir.h"
#include "cs-policy.h"

G_BEGIN_DECLS

/** Which kernel of the sdpa executor a statement gets (thunder/executors/utils.py SpdaBackend). */
typedef enum
{
  CS_SDPA_NONE,            /* not claimed: Thunder's MATH backend, decomposed */
  CS_SDPA_FLASH,           /* sdpafx_*: flash attention */
  CS_SDPA_MEM_EFFICIENT,   /* sdpaex_*: memory-efficient attention */
} CsSdpaBackend;

/**
 * cs_executor_sdpa_backend:
 * @stmt: a top-level statement
 * @policy: (nullable): the policy (NULL: Thunder's defaults)
 *
 * Whether the sdpa executor claims @stmt, an `ltorch.scaled_dot_product_attention` call
 * (positional or keyword query, key, value, attn_mask, dropout_p, is_causal, scale), and with
 * which kernel.  Mirrors `_scaled_dot_product_attention_checker` and `_fused_sdp_choice` (torch
 * >= 2.2 on an sm90 device, every backend enabled): q, k, v (and a mask) typed 4-D CUDA tensors
 * of one batch size and head count; flash when q, k, v are bf16 or f16 of one dtype, there is
 * no mask, the head dims are equal and at most 256 and a causal call has as many queries as
 * keys; else memory-efficient when the dtypes are f32/f16/bf16 of one dtype, q and k have the
 * same head dim and both head dims are multiples of 8 (f16/bf16) or 4 (f32); else NONE.
 * dropout_p and is_causal must be literals, scale None or a number.  NONE as well when the
 * policy's executor list has no sdpa.
 * Returns: the backend
 */
CsSdpaBackend cs_executor_sdpa_backend (const CsStmt *stmt, const CsPolicy *policy);

/**
 * cs_executor_sdpa_forward:
 * @trace: the trace that receives the statement and its new proxies
 * @sdpa: the claimed `ltorch.scaled_dot_product_attention` statement
 * @backend: FLASH or MEM_EFFICIENT (from cs_executor_sdpa_backend())
 * @names_free_from: as for _cs_decompose_fresh_proxy()
 *
 * The executor's forward statement, as sdpaex.py's meta functions type it, with @sdpa's output
 * proxy as its first output.  Flash: `(out, logsumexp f32[B, H, ceil(L/16)*16], cum_seq_q
 * i64[B+1], cum_seq_k i64[B+1], _, _, philox_seed i64[], philox_offset i64[], debug_attn_mask
 * i64[]) = sdpafx_grad_forward_scaled_dot_product_efficient_attention(q, k, v, dropout_p,
 * is_causal, scale=scale)` (max_q and max_k are Python ints, printed `_`).  Memory-efficient:
 * `(out, logsumexp f32[B, H, ceil(L/32)*32], philox_seed i64[], philox_offset i64[]) =
 * sdpaex_grad_forward_scaled_dot_product_efficient_attention(q, k, v, attn_mask, dropout_p,
 * is_causal, scale=scale)`.  The statement keeps @sdpa's origin (or id) and line.
 * Returns: (transfer none): the new statement, owned by @trace
 */
CsStmt       *cs_executor_sdpa_forward (CsTrace       *trace,
                                        const CsStmt  *sdpa,
                                        CsSdpaBackend  backend,
                                        guint32        names_free_from);

/**
 * cs_executor_sdpa_backward:
 * @trace: the trace that receives the statement
 * @fwd: a statement made by cs_executor_sdpa_forward()
 * @g: the gradient of its first output (same type)
 * @names_free_from: as for _cs_decompose_fresh_proxy()
 * @grads: (out) (array fixed-size=4): the gradient proxies of query, key, value and attn_mask
 *   (NULL where there is none)
 *
 * The backward of @fwd as sdpaex.py's `_scaled_dot_product_attention_grad` writes it.  Flash:
 * `(gq, gk, gv) = sdpafx_scaled_dot_product_efficient_attention_backward(g, q, k, v, out,
 * logsumexp, cum_seq_q, cum_seq_k, max_q, max_k, dropout_p, is_causal, philox_seed,
 * philox_offset, scale=scale)` with max_q = L and max_k = S as literals; memory-efficient:
 * `(gq, gk, gv, gmask) = sdpaex_scaled_dot_product_efficient_attention_backward(g, q, k, v,
 * attn_mask, out, logsumexp, philox_seed, philox_offset, dropout_p, is_causal, scale=scale)`,
 * gmask `_` without a mask.  The gradients are typed like the inputs (the meta functions).
 * Returns: (transfer none): the new statement (not tagged backward: the caller does that), or
 * NULL when @fwd is not such a statement
 */
CsStmt       *cs_executor_sdpa_backward (CsTrace      *trace,
                                         const CsStmt *fwd,
                                         CsProxy      *g,
                                         guint32       names_free_from,
                                         CsProxy     **grads);

/**
 * cs_executors_claim:
 * @trace: (transfer none): a trace after the grad pass (or a forward without grad)
 * @policy: the policy
 *
 * The operator executors' execution transforms for the statements the grad pass left (those
 * with no differentiable input, or a trace without grad): each top-level
 * `ltorch.scaled_dot_product_attention` the sdpa executor claims becomes its forward statement
 * (Thunder's `_scaled_dot_product_attention_fused`).  Other statements are kept.
 * Returns: (transfer full): the new trace (the same trace with one more reference when
 * nothing was claimed)
 */
CsTrace      *cs_executors_claim        (const CsTrace  *trace,
                                         const CsPolicy *policy);

/**
 * cs_executor_xentropy_can_fuse:
 * @stmt: a statement (top-level or a subsymbol)
 *
 * Thunder's `FusionExecutor.can_fuse` for the torchcompile_xentropy executor: @stmt is one of
 * its supported ops (prims broadcast_in_dim, convert_element_type, div, ne, neg, pad, reshape,
 * slice_prim, where; ltorch nll_loss_backward, log_softmax_backward, log_softmax, nll_loss,
 * sum, take_along_dim, contiguous, and the torch executor's names for them) on CUDA tensors
 * only, or every one of its subsymbols can be fused (recursively).  Region calls never.
 * Returns: whether the executor can take @stmt
 */
gboolean      cs_executor_xentropy_can_fuse  (const CsStmt *stmt);

/**
 * cs_executor_xentropy_required:
 * @stmt: a top-level statement
 *
 * Returns: whether @stmt is one of torchcompile_xentropy's `required_ops` (log_softmax,
 * nll_loss, cross_entropy, nll_loss_backward, log_softmax_backward): a group of fusible
 * statements becomes a TorchCompile region only when it holds one
 */
gboolean      cs_executor_xentropy_required  (const CsStmt *stmt);

/**
 * cs_executor_of_stmt:
 * @stmt: a top-level statement of a transformed trace
 *
 * Which executor runs @stmt: NVFUSER for an nvFusion region, TORCHCOMPILE_XENTROPY for a
 * TorchCompile region, SDPA for the sdpa executor's statements, TORCH for everything else
 * (bookkeeping included).
 * Returns: the executor
 */
CsExecutor    cs_executor_of_stmt            (const CsStmt *stmt);

G_END_DECLS
