/* cs-grad.h: the grad transform (Thunder's "Grad transform pass"): one joint forward+backward
 * trace built from VJP rules, with get_grad/put_grad semantics.
 *
 * Source: thunder/transforms/autodiff.py (grad_transform_on_trace), VJP rules in
 * thunder/core/transforms.py and thunder/torch/__init__.py (_sum_grad);
 * reference/thunder-traces.md sections 5.1 and 5.2.
 */
#pragma once

#include <glib.h>

#include "cs-ir.h"
#include "cs-policy.h"

G_BEGIN_DECLS

#define CS_GRAD_ERROR (cs_grad_error_quark ())
/** cs_grad_error_quark: the #GQuark of #CS_GRAD_ERROR (codes: #CsGradError). */
GQuark cs_grad_error_quark (void);

typedef enum
{
  CS_GRAD_ERROR_NO_RULE,     /* a prim has no VJP rule, or a composite has no decomposition */
  CS_GRAD_ERROR_BAD_TRACE,   /* no return, untyped tensor proxies, bad arguments of an op */
  CS_GRAD_ERROR_SPEC,        /* CsGradSpec names an input the trace does not have */
  CS_GRAD_ERROR_LIMIT,       /* decomposition too deep (a cycle) or rank over CS_MAX_DIMS */
} CsGradError;

/**
 * CsGradSpec:
 *
 * Which inputs of the trace require grad.  Exactly one of the three ways is used: @none wins,
 * then @names (when non-NULL), else @all_float.
 */
typedef struct _CsGradSpec CsGradSpec;
struct _CsGradSpec
{
  gboolean            all_float; /* every floating tensor input requires grad (Thunder's default
                                    for parameters and float inputs) */
  const char * const *names;     /* or exactly these inputs (NULL-terminated); NULL = not used */
  gboolean            none;      /* no input requires grad: the joint is the forward only */
  const CsPolicy     *policy;    /* policy for decomposing ops without a VJP rule
                                    (cs_decompose_stmt); NULL = Thunder's defaults */
  gboolean            module_rule; /* with all_float: inputs that name a module buffer
                                    (cs_grad_input_is_module_buffer()) get no gradient, as in
                                    Thunder, and in a DDP/FSDP trace only the synchronized
                                    parameters (cs_grad_data_parallel_params()) get one; the
                                    pipeline's default */
};

/**
 * cs_grad_input_is_module_buffer:
 * @name: an input name of a computation trace
 *
 * Thunder names a module's tensors `t_<module path>` with dots as underscores (thunder/core/
 * module.py's parameter and buffer names through the interpreter's proxy naming): parameters
 * end in `_weight` or `_bias` (`t_layers_0_attention_wq_weight`), buffers do not (`t_cos`,
 * `t_sin`).  Buffers do not require grad, so Thunder gives them None in the backward.  A
 * parameter named otherwise (a bare nn.Parameter attribute such as `t_cls_token`) reads as a
 * buffer: pass --grad to override.
 * Returns: TRUE when @name is `t_` + something that ends neither in `_weight` nor `_bias`
 */
gboolean cs_grad_input_is_module_buffer (const char *name);

/**
 * cs_grad_data_parallel_params:
 * @trace: (transfer none): a computation trace
 *
 * The inputs of a DDP or FSDP trace that are parameters: the tensors a top-level
 * `synchronize(p, group, REPLICATED | FULLY_SHARDED)` reads.  Thunder's ddp and fsdp transforms
 * wrap every parameter of the module in one (thunder/distributed/transforms/ddp_v2.py and
 * fsdp_v2.py, DDPTransform / FSDPTransform.transform_traces_pre_prologue, for each
 * unpack_parameter) and leave buffers and the batch alone, so with the module rule
 * (#CsGradSpec.module_rule) exactly these inputs require grad in such a trace: Thunder's own
 * DDP/FSDP backward returns None for the rest (the rotary `cos`/`sin` buffers of
 * data/distributed/ddp_final_bwd.txt, which the `t_` name rule does not catch).  A batch input
 * that does require grad needs --grad.
 * Returns: (transfer full) (nullable): a set of input names (strings of @trace's arena), or
 * NULL when @trace has no such synchronize
 */
GHashTable *cs_grad_data_parallel_params (const CsTrace *trace);

/**
 * cs_grad_joint:
 * @initial: (transfer none): an initial (ltorch-level) trace, e.g. parsed from Thunder's first
 *   trace or the output of the autocast pass
 * @spec: (nullable): which inputs require grad; NULL = all floating inputs
 * @error: return location for a #CS_GRAD_ERROR (or an error of cs_decompose_stmt)
 *
 * Thunder's "Grad transform pass": walks @initial in order; statements with no differentiable
 * (floating tensor) argument are copied; statements with a VJP rule (prims, and the ltorch
 * rules Thunder has: sum, silu, _softmax, log_softmax, embedding) are copied as the forward and
 * their backward is queued; everything else is replaced by its decomposition (the parsed
 * subsymbols, or cs_decompose_stmt) and retried.  At the return the queued backwards are emitted
 * in reverse order: a gradient put twice on one proxy is accumulated with `ltorch.add`; the
 * gradient of a forward output is read with `prims.get_grad` (a cotangent); a backward whose
 * outputs got no gradient is skipped.  All get_grads are grouped where the backward begins, and
 * dead code is removed.  Backward statements have stmt->backward = 1 and are written at ltorch
 * level (ltorch.mul, ltorch.sum, ltorch.matmul ...) or as the prims Thunder's rules call
 * (prims.transpose, prims.convert_element_type, prims.broadcast_in_dim ...), typed by the rule,
 * so the later decompose pass gives them Thunder's casts.
 *
 * Rules (reference 5.2): prims convert_element_type, broadcast_in_dim, reshape, transpose,
 * squeeze, slice_prim, pad, cat, take, take_along_axis, shallow_copy/clone/stride_order, neg,
 * exp, log, tanh, erf, rsqrt, sqrt, reciprocal, add, sub, mul, div, pow, where, sum, amax,
 * var_mean, matmul (1-D, 2-D, batched), linear (1-D/N-D input, with or without bias); ltorch
 * sum, _softmax, log_softmax (its backward written out: g - exp(out) * sum(g)), silu,
 * embedding.  Everything else (gelu, sigmoid, relu, mean, layer_norm, rms_norm, cross_entropy,
 * scaled_dot_product_attention, to, ...) goes through its decomposition.  Comparisons,
 * bitwise ops, floor/ceil, full/iota and bookkeeping statements are constant.
 *
 * Ops the backward statements use (what decompose, the CPU reference and the CUDA executor
 * must know): ltorch add/sub/mul/true_divide/neg/exp/log/pow/where/eq/sum/matmul/reshape,
 * prims get_grad/transpose/broadcast_in_dim/convert_element_type/squeeze/slice_prim/pad/full/
 * index_add (take) /scatter_add (take_along_axis), ltorch.embedding_backward.
 *
 * Input types: every differentiated statement needs typed outputs; untyped tuple outputs
 * (var_mean) are typed with cs_meta_infer().  Decomposition: cs_decompose_stmt() under
 * @spec->policy, falling back to the statement's printed subsymbols.
 * Shapes: static only (a symbolic dim -1 in an input gives CS_GRAD_ERROR_BAD_TRACE).
 * Returns: (transfer full): the joint trace (pass "grad", name kept) whose return is
 *   `{'output': (grad or None per flat arg), 'flat_args': [inputs], 'fw_flat_out': (outputs)}`,
 *   or NULL with @error set
 */
CsTrace *cs_grad_joint (const CsTrace   *initial,
                        const CsGradSpec *spec,
                        GError          **error);

/**
 * cs_grad_has_rule:
 * @op: an op-table entry (executor names are followed to their semantic op)
 *
 * Returns: TRUE when castscope has a VJP rule for @op itself (no decomposition needed)
 */
gboolean cs_grad_has_rule (const CsOp *op);

G_END_DECLS
