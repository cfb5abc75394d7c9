/* cs-pipeline.h: the pass pipeline under a cast policy (DESIGN.md "The pipeline").
 *
 *   initial --autocast--> --grad--> --decompose--> --fuse--> --remove-redundant-casts-->
 *   --cse--> --dce--> --split-forward/--split-backward--> --delete-last-used(-backward)
 *
 * Every pass returns a new trace and never mutates its input; the pipeline keeps every
 * intermediate trace with its pass name (the GUI's pass slider, `castscope-cli transform
 * --pass NAME`).  Mirrors thunder/__init__.py `apply_transforms_and_build_cache_entry`
 * (reference/thunder-traces.md section 0) in the order the nvFuser executor runs its passes
 * (section 6.3).
 *
 * remove-redundant-casts runs only with fusion on (it belongs to the nvFuser pass) and
 * redundant-casts=remove; otherwise that pass records an unchanged copy.  A trace that is
 * already a joint (it has prims.get_grad) skips the grad pass; prologues are not
 * differentiated.
 *
 * An input trace that is already final (holds fusion regions, is a `backward_fn`, or was
 * constructed by "Delete Last Used") is accepted as is: the pipeline then has the single pass
 * "initial", and that trace is the forward (or the backward for a `backward_fn`).
 *
 * A torch.compile graph (CsTrace.aten, cs-aten.h) is already differentiated and split: it
 * goes through initial, decompose, fuse, remove-redundant-casts, cse, dce and
 * delete-last-used only, and a backward graph is then both the forward and the backward of
 * the pipeline (as a `backward_fn` is); cs_pipeline_run_pair() runs a forward graph and its
 * backward graph together.
 */
#pragma once

#include <glib.h>

#include "cs-inductor.h"
#include "cs-ir.h"
#include "cs-policy.h"

G_BEGIN_DECLS

typedef struct _CsPipeline CsPipeline;
/* Declared in cs-grad.h (grad pass); only passed through here. */
typedef struct _CsGradSpec CsGradSpec;

#define CS_PIPELINE_ERROR (cs_pipeline_error_quark ())
/** cs_pipeline_error_quark: the #GQuark of #CS_PIPELINE_ERROR (codes: #CsPipelineError). */
GQuark cs_pipeline_error_quark (void);

typedef enum
{
  CS_PIPELINE_ERROR_INPUT,   /* the input trace cannot be transformed (no return, ...) */
  CS_PIPELINE_ERROR_TYPES,   /* a statement of the input whose shapes or dtypes do not fit
                                (cs_meta_check_trace()): the trace itself is wrong */
  CS_PIPELINE_ERROR_PASS,    /* a pass failed; the message names the pass and the statement */
} CsPipelineError;

/**
 * cs_pipeline_run:
 * @initial: (transfer none): the trace as parsed (Thunder's first computation trace)
 * @policy: (nullable): the cast policy; NULL = Thunder's defaults
 * @grad: (nullable): which inputs get gradients; NULL = Thunder's rule: every floating-point
 *   tensor input except module buffers (cs_grad_input_is_module_buffer()), see cs-grad.h
 * @error: return location for a #CS_PIPELINE_ERROR (or the failing pass's own domain)
 *
 * Runs every pass in order.  Units: none.  Before the first pass (a trace that is not final)
 * the input is checked: no return statement or an untyped tensor input is CS_PIPELINE_ERROR_INPUT,
 * a statement whose shapes or dtypes do not fit is CS_PIPELINE_ERROR_TYPES with
 * cs_meta_check_trace()'s message ("file:line:col: <callee>: <reason>; ...", no pass name).  Then the first failing pass stops the
 * pipeline; its error is returned with the pass name prefixed ("decompose: ...").
 * Source: thunder/__init__.py, thunder/executors/nvfuserex_impl.py (fusion pass order).
 * Returns: (transfer full): the pipeline, or NULL with @error set
 */
CsPipeline  *cs_pipeline_run          (const CsTrace     *initial,
                                       const CsPolicy    *policy,
                                       const CsGradSpec  *grad,
                                       GError           **error);
/**
 * cs_pipeline_run_pair:
 * @forward: (transfer none): a torch.compile forward graph (CsTrace.aten set)
 * @backward: (transfer none) (nullable): its backward graph (cs_aten_find_backward())
 * @policy: (nullable): the cast policy; NULL = Thunder's defaults
 * @error: return location for the failing pass's error
 *
 * The passes of a torch.compile graph (see the file comment) on @forward, then on @backward
 * with pass names ending in "-backward" ("initial-backward", "decompose-backward", ...,
 * "delete-last-used-backward").  Returned values keep their names, so the final forward's
 * saved tensors feed the final backward by name.
 * Returns: (transfer full): the pipeline (forward and backward set), or NULL with @error set
 */
CsPipeline  *cs_pipeline_run_pair     (const CsTrace     *forward,
                                       const CsTrace     *backward,
                                       const CsPolicy    *policy,
                                       GError           **error);
/**
 * cs_pipeline_run_pair_inductor:
 * @forward: (transfer none): a torch.compile forward graph (CsTrace.aten set)
 * @backward: (transfer none) (nullable): its backward graph
 * @policy: (nullable): the cast policy; NULL = Thunder's defaults
 * @code: Inductor's output code of the same compile (cs-inductor.h)
 * @error: return location for the failing pass's error
 *
 * As cs_pipeline_run_pair(), with Inductor's fusion in place of castscope's: the "fuse" pass
 * of each graph is cs_inductor_fuse_trace() with the module of @code of the same role and AOT
 * graph number, so the regions are Inductor's Triton kernels.  The policy's fusion knobs do not
 * apply (the other knobs do: the decompose pass still lowers under it).
 * Errors: CS_INDUCTOR_ERROR_GRAPH when @code has no module for a graph; the fuse pass's errors.
 * Returns: (transfer full): the pipeline, or NULL with @error set
 */
CsPipeline  *cs_pipeline_run_pair_inductor (const CsTrace          *forward,
                                            const CsTrace          *backward,
                                            const CsPolicy         *policy,
                                            const CsInductorCode   *code,
                                            GError                **error);
/**
 * cs_pipeline_run_inductor:
 * @graph: (transfer none): one torch.compile graph (CsTrace.aten set): forward, backward or
 *   inference
 * @policy: (nullable): the cast policy; NULL = Thunder's defaults
 * @code: Inductor's output code of the same compile
 * @error: return location for the failing pass's error
 *
 * As cs_pipeline_run() on @graph (a backward graph is then both the forward and the backward of
 * the pipeline), with the "fuse" pass cs_inductor_fuse_trace() on the module of @code of
 * @graph's role and number (as cs_pipeline_run_pair_inductor(), for one graph: the app runs a
 * file's forward and backward graphs as two pipelines).
 * Returns: (transfer full): the pipeline, or NULL with @error set
 */
CsPipeline  *cs_pipeline_run_inductor (const CsTrace          *graph,
                                       const CsPolicy         *policy,
                                       const CsInductorCode   *code,
                                       GError                **error);
/** Returns: (transfer full): @pipeline with one more reference (atomic; any thread). */
CsPipeline  *cs_pipeline_ref          (CsPipeline        *pipeline);
/** Drops a reference; the last one frees every kept trace (NULL is allowed). */
void         cs_pipeline_unref        (CsPipeline        *pipeline);

/** Number of traces kept (>= 1: "initial" is always the first). */
guint        cs_pipeline_n_passes     (CsPipeline        *pipeline);
/**
 * cs_pipeline_pass_name:
 * Returns: (transfer none): the name of pass @i: "initial", "autocast", "grad", "decompose",
 * "fuse", "remove-redundant-casts", "cse", "dce", "split-forward", "split-backward",
 * "delete-last-used", "delete-last-used-backward"; NULL when @i is out of range
 */
const char  *cs_pipeline_pass_name    (CsPipeline        *pipeline,
                                       guint              i);
/** Returns: (transfer none): the trace made by pass @i, or NULL when out of range. */
CsTrace     *cs_pipeline_get_trace    (CsPipeline        *pipeline,
                                       guint              i);
/** Returns: (transfer none) (nullable): the trace of the pass named @name, or NULL. */
CsTrace     *cs_pipeline_find_trace   (CsPipeline        *pipeline,
                                       const char        *name);
/** Returns: (transfer none): the final forward trace (with del statements). */
CsTrace     *cs_pipeline_get_forward  (CsPipeline        *pipeline);
/** Returns: (transfer none) (nullable): the final backward trace, NULL without grad. */
CsTrace     *cs_pipeline_get_backward (CsPipeline        *pipeline);
/** Returns: (transfer none) (nullable): the fused joint trace after CSE/DCE (before the
 *  split), or NULL when the input was already final. */
CsTrace     *cs_pipeline_get_joint    (CsPipeline        *pipeline);
/** Returns: (transfer none): the policy the pipeline ran under. */
const CsPolicy *cs_pipeline_get_policy (CsPipeline       *pipeline);
/** TRUE when the input was already final and no pass ran. */
gboolean     cs_pipeline_input_was_final (CsPipeline     *pipeline);
/**
 * cs_pipeline_attention_claimed_nothing:
 * @pipeline: a pipeline
 *
 * TRUE when the policy asked for attention=fused and the final forward holds no fused
 * attention: castscope's claim (cs_attention_claim_trace()) matched no pattern and the trace
 * had no scaled_dot_product_attention call of its own, so the policy changed nothing.
 */
gboolean     cs_pipeline_attention_claimed_nothing (CsPipeline *pipeline);
/** Wall time of pass @i in nanoseconds (0 for "initial"). */
gint64       cs_pipeline_pass_time_ns (CsPipeline        *pipeline,
                                       guint              i);

/**
 * cs_trace_is_final:
 * @trace: a trace
 *
 * TRUE when @trace already went through Thunder's execution transforms: it holds fusion
 * region calls (nvFusionK, TorchCompileK, CUDAGraphK), is named `backward_fn`, or its
 * provenance is "Delete Last Used".
 */
gboolean     cs_trace_is_final        (const CsTrace     *trace);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (CsPipeline, cs_pipeline_unref)

G_END_DECLS
