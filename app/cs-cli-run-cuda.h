/* cs-cli-run-cuda.h: the `--device cuda` branch of `castscope-cli run`, shared with `bench`.
 *
 * Loads the kernels module at run time (cs-cuda-loader.h), builds one program for the forward
 * and backward traces, runs it, and with --check judges every output and gradient as PyTorch's
 * accuracy check does (core/cs-compare.h, cs_accuracy_judge()) on the same random inputs:
 * its error against an f64 run (the CPU reference in CS_REF_F64 mode, or the GPU f64 program
 * where the CPU reference would be too costly) against the error of the CPU exact-dtype run
 * (where affordable; else the rounding floor of the dtype).
 */
#pragma once

#include <glib.h>

#include "cs-cli-progress.h"
#include "cs-ir.h"
#include "cs-policy.h"

G_BEGIN_DECLS

/* Where the f64 run of --check comes from (--reference). */
typedef enum
{
  CS_CLI_REFERENCE_AUTO,    /* the CPU when cs_cli_cpu_affordable(), else the GPU f64 program */
  CS_CLI_REFERENCE_CPU,     /* the CPU reference (f64 and exact-dtype runs), whatever the size */
  CS_CLI_REFERENCE_GPU,     /* the GPU f64 program; the exact-dtype CPU run only if affordable */
} CsCliReference;

typedef struct
{
  gboolean    check;        /* compare with cs_ref_run_env (CS_REF_F64) and fail on mismatch */
  guint       iters;        /* timed iterations (>= 1); 0 = run once, no timing */
  gboolean    json;         /* one JSON object on stdout instead of text */
  guint64     seed;         /* input seed */
  gboolean    no_graph;     /* run with plain stream launches instead of the CUDA graph */
  const char *dump_source;  /* (nullable): write the generated CUDA C here */
  const char *name;         /* (nullable): label for the report (the file name) */
  CsCliReference reference; /* --reference: where the f64 run of --check comes from */
  gboolean    cpu_affordable; /* the CPU reference runs this step in seconds (cs_cli_cpu_affordable) */
  double      cpu_gflop;    /* the CPU reference's estimate for the step, GFLOP (for the report) */
  CsCliProgress *progress;  /* (nullable): the progress line (compiling, running, --check's
                               reference statement by statement, timing) */
  const char *progress_label; /* (nullable): what each progress line starts with ("bench 3 of
                                 14: FILE [default]"); NULL: @name, or "run" */
  const char *command;       /* (nullable): the command its error messages start with
                               ("bench"); NULL: "run" */
} CsCliCudaOptions;

/**
 * cs_cli_cpu_affordable:
 * @flops: cs_ref_estimate()'s work estimate of the step (forward + backward)
 * @max_elems: its largest tensor, elements
 *
 * Whether --check runs the CPU reference (exact-dtype and f64 runs) by default: at most
 * 20 GFLOP and 2^24 elements per tensor, seconds on the GPU host (the CPU reference does
 * about 2e10 matmul FLOP/s and 1e8 elementwise results a second; the 32-layer LLaMA step is
 * 5.1 GFLOP).  Above it ref_err falls back to the rounding floor, a lower bound of the
 * reference's error, which calls deep models' correct gradients wrong (ratios near 10).
 * Returns: TRUE when affordable
 */
gboolean  cs_cli_cpu_affordable      (double flops, double max_elems);

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
 * cs_cli_cuda_start_up:
 *
 * Begins the CUDA executor's cuBLASLt start-up on a thread of its own (the backend's
 * start_up), for a command about to read a trace and run it on the GPU: the start-up then
 * runs beside the parsing and the passes, and cs_cli_run_cuda() reports it.  Does nothing when
 * the executor cannot be loaded.
 */
void      cs_cli_cuda_start_up       (void);

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
