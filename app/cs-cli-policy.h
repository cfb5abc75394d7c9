/* cs-cli-policy.h: the `--policy key=value` and `--grad` options shared by the CLI commands
 * (transform, stats, diff, render, run).  Keys and values are core's (cs-policy.h). */
#pragma once

#include <glib.h>

#include "cs-policy.h"
#include "cs-grad.h"
#include "cs-pipeline.h"

G_BEGIN_DECLS

/**
 * cs_cli_policy_from_strv:
 * @assignments: (nullable): "key=value" strings (a repeated --policy option), NULL-terminated
 * @policy: (out caller-allocates): filled with Thunder's defaults, then each assignment
 * @error: return location for a #CS_POLICY_ERROR
 *
 * Each element may also hold several comma-separated assignments ("matmul=upcast-f32,fusion=off");
 * a comma-separated part without '=' continues the value before it (a list value:
 * "executors=nvfuser,torch,fusion=off" sets executors to nvfuser,torch); an element that sets nothing ('' or ',') is a CS_POLICY_ERROR_KEY error, not ignored.
 * Returns: TRUE on success
 */
gboolean  cs_cli_policy_from_strv (char **assignments, CsPolicy *policy, GError **error);

/**
 * cs_cli_policy_describe:
 *
 * Returns: (transfer full): text for GOptionContext's description listing every key, its
 * values and its default
 */
char     *cs_cli_policy_describe  (void);

/**
 * cs_cli_grad_spec_parse:
 * @text: (nullable): the --grad argument: NULL (default: the pipeline's rule, every floating
 *   input but module buffers), "auto" (the same), "all" (every floating input), "none", or
 *   comma-separated input names (an empty @text names one empty input, which the grad pass
 *   refuses as it refuses ",": it does not mean "none")
 * @spec: (out caller-allocates): the spec; its names point into @names_out
 * @names_out: (out) (transfer full): the split names (free with g_strfreev) or NULL
 *
 * Returns: TRUE when a spec was filled (@text non-NULL), FALSE for the default (use NULL)
 */
gboolean  cs_cli_grad_spec_parse  (const char *text, CsGradSpec *spec, char ***names_out);


/**
 * cs_cli_set_inductor:
 * @arg: (nullable): the --inductor argument: an output_code file, "auto" for the sibling file
 *   of the input (cs_inductor_sibling_path(): data/aten/NAME.txt ->
 *   data/aten/inductor/NAME.output_code), or NULL for castscope's own fusion
 *
 * Makes cs_cli_run_pipeline() and cs_cli_run_pipeline_on_list() run a torch.compile forward
 * graph (and its backward) with Inductor's regions (cs_pipeline_run_pair_inductor()).  An input
 * that is not a torch.compile forward graph is then a usage error.
 */
void        cs_cli_set_inductor (const char *arg);

/**
 * cs_cli_inductor_path:
 * Returns: (transfer none) (nullable): the output-code file whose regions the last pipeline run
 *   used (--inductor, resolved), or NULL
 */
const char *cs_cli_inductor_path (void);

/**
 * cs_cli_inductor_usage:
 * The --inductor option's help text, the same for every command that takes it.
 */
#define CS_CLI_INDUCTOR_HELP \
  "Use Inductor's fusion instead of castscope's: its Triton kernels as regions, read from the " \
  "TORCH_LOGS=output_code text of the same compile; 'auto' reads DIR/inductor/NAME.output_code " \
  "for FILE DIR/NAME.txt (torch.compile graphs only)"

/**
 * cs_cli_run_pipeline:
 * @path: trace file ("-" = stdin)
 * @index: which trace of the file (0 = first)
 * @policy: the cast policy
 * @grad_text: (nullable): the --grad argument (see cs_cli_grad_spec_parse())
 * @error: return location for a parse or pass error
 *
 * Parses @path and runs the pipeline on trace @index.
 * Returns: (transfer full): the pipeline, or NULL with @error set
 */
CsPipeline *cs_cli_run_pipeline (const char     *path,
                                 guint           index,
                                 const CsPolicy *policy,
                                 const char     *grad_text,
                                 GError        **error);

/**
 * cs_cli_run_pipeline_on_list:
 * @list: traces already parsed (from @path)
 * @path: where @list came from, for messages
 *
 * As cs_cli_run_pipeline() on a parsed file: for commands that run the pipeline more than
 * once on one input, which they must read once ("-" is stdin).
 * Returns: (transfer full): the pipeline, or NULL with @error set
 */
CsPipeline *cs_cli_run_pipeline_on_list (const CsTraceList *list,
                                         const char        *path,
                                         guint              index,
                                         const CsPolicy    *policy,
                                         const char        *grad_text,
                                         GError           **error);

/**
 * cs_cli_no_backward_reason:
 * @pl: a pipeline that made no backward trace
 * @path: the input file, for the message
 *
 * Why there is no backward trace: the input is already a final trace (castscope does not
 * differentiate what Thunder runs; its backward is a trace of its own, named when a *_bwd.txt
 * lies beside a *_fwd.txt), or nothing requires grad.
 * Returns: (transfer full): the message after "there is no backward trace"
 */
char       *cs_cli_no_backward_reason (CsPipeline *pl, const char *path);

/**
 * cs_cli_exit_for_error:
 * @error: a failure of cs_cli_run_pipeline() or cs_cli_run_pipeline_on_list()
 *
 * The exit status for it under the one rule of the CLI: CS_CLI_EXIT_USAGE (2) for an option
 * value that does not fit the input (a G_OPTION_ERROR, e.g. --index past the file's traces,
 * or CS_GRAD_ERROR_SPEC: --grad naming an input the trace lacks), CS_CLI_EXIT_INPUT (1) for
 * bad input (parse and pass errors).
 */
int         cs_cli_exit_for_error     (const GError *error);

G_END_DECLS
