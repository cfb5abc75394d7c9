/* cs-cli-run-cuda.h: the `--device cuda` branch of `castscope-cli run`, shared with `bench`.
 *
 * Loads the kernels module at run time (cs-cuda-loader.h), builds one program for the forward
 * and backward traces, runs it, and with --check compares every output and gradient with the
 * CPU f64 reference (core/cs-ref.h) on the same random inputs.
 */
#pragma once

#include <glib.h>

#include "cs-cli-progress.h"
#include "cs-ir.h"
#include "cs-policy.h"

G_BEGIN_DECLS

typedef struct
{
  gboolean    check;        /* compare with cs_ref_run_env (CS_REF_F64) and fail on mismatch */
  guint       iters;        /* timed iterations (>= 1); 0 = run once, no timing */
  gboolean    json;         /* one JSON object on stdout instead of text */
  guint64     seed;         /* input seed */
  gboolean    no_graph;     /* run with plain stream launches instead of the CUDA graph */
  const char *dump_source;  /* (nullable): write the generated CUDA C here */
  const char *name;         /* (nullable): label for the report (the file name) */
  CsCliProgress *progress;  /* (nullable): the progress line (compiling, running, --check's
                               reference statement by statement, timing) */
  const char *progress_label; /* (nullable): what each progress line starts with ("bench 3 of
                                 14: FILE [default]"); NULL: @name, or "run" */
} CsCliCudaOptions;

/**
 * cs_cli_run_cuda:
 * @fwd: final forward trace (`computation`)
 * @bwd: (nullable): final backward trace (`backward_fn`)
 * @policy: the policy the traces were made under (allow_tf32 is read here)
 * @opts: options
 *
 * Runs one training step on the GPU and prints a report (per-region and per-matmul times,
 * bytes or FLOPs, achieved TB/s or TFLOP/s and % of the floor when @opts->iters > 0).
 * Without a device or module: a clear message on stderr and CS_CLI_EXIT_INPUT.
 * Returns: a CS_CLI_EXIT_* code (CS_CLI_EXIT_INPUT on a failed check)
 */
int       cs_cli_run_cuda            (CsTrace                *fwd,
                                      CsTrace                *bwd,
                                      const CsPolicy         *policy,
                                      const CsCliCudaOptions *opts);

/**
 * cs_cli_cuda_check_device:
 * @error: return location for the reason (no kernels module, no driver, no device)
 *
 * Loads the kernels module and asks it for the device, as cs_cli_run_cuda() does first: for
 * commands that run many steps and should say once that there is no GPU.
 * Returns: TRUE when a device can run steps
 */
gboolean  cs_cli_cuda_check_device   (GError                **error);

/**
 * cs_cli_cuda_load_step:
 * @path: a trace file: an initial trace (the pipeline runs under @policy), a final forward
 *   trace (its backward is taken from the same file's `backward_fn`, or from a sibling file
 *   named *_bwd.txt beside a *_fwd.txt), or a file holding both
 * @fwd: (out) (transfer full): forward trace
 * @bwd: (out) (transfer full) (nullable): backward trace or NULL
 *
 * Returns: TRUE on success; FALSE with @error set (parse or pass error)
 */
gboolean  cs_cli_cuda_load_step      (const char             *path,
                                      const CsPolicy         *policy,
                                      CsTrace               **fwd,
                                      CsTrace               **bwd,
                                      GError                **error);

G_END_DECLS
