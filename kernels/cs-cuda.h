/* cs-cuda.h: the CUDA executor's public face, a vtable exported by the kernels module.
 *
 * kernels/ is built as a loadable module (libcscuda.so) so that no castscope binary needs the
 * NVIDIA driver to start (../shared/GPU.md, recipes.md 2(d)); app/cs-cuda-loader.c opens it with
 * GModule and calls cs_cuda_backend_get().  This header uses no CUDA type, so the CLI and the GUI
 * include it without the toolkit.  The layout follows ggml's backend vtable
 * (src/ggml-backend-impl.h): plain function pointers, one opaque program handle.
 *
 * A program is one training step: the forward trace (Thunder's `computation`) and, optionally,
 * the backward trace (`backward_fn`) linked through saved_for_backward, compiled once (NVRTC
 * kernels, cuBLASLt plans, one device arena planned from liveness) and run many times.
 */
#pragma once

#include <glib.h>
#include <gmodule.h>
#include <stdint.h>

#include "cs-dtype.h"
#include "cs-ir.h"
#include "cs-policy.h"

G_BEGIN_DECLS

/* Bumped whenever CsCudaBackend changes; the loader refuses a module of another version. */
#define CS_CUDA_BACKEND_ABI 7

/* The symbol the loader looks up in the module. */
#define CS_CUDA_BACKEND_SYMBOL "cs_cuda_backend_get"

#define CS_CUDA_ERROR (cs_cuda_error_quark ())
/** cs_cuda_error_quark: the #GQuark of #CS_CUDA_ERROR (codes: #CsCudaError). */
GQuark cs_cuda_error_quark (void);

typedef enum
{
  CS_CUDA_ERROR_NO_DEVICE,   /* no driver, no device, or the module could not be loaded */
  CS_CUDA_ERROR_RUNTIME,     /* a CUDA runtime call failed (message: call, error string) */
  CS_CUDA_ERROR_CUBLAS,      /* a cuBLASLt call failed or found no algorithm */
  CS_CUDA_ERROR_NVRTC,       /* NVRTC failed; the message carries the compile log */
  CS_CUDA_ERROR_UNSUPPORTED, /* the trace uses an op, dtype or layout the executor lacks */
  CS_CUDA_ERROR_INPUT,       /* bad use of the API: wrong input index or byte count */
} CsCudaError;

typedef struct _CsCudaProgram CsCudaProgram;

/** CsCudaDeviceInfo: what cs_cuda_backend_get()->device_info() reports. */
typedef struct
{
  char     name[256];          /* device name, e.g. "NVIDIA H200" */
  int      cc_major;           /* compute capability, e.g. 9 */
  int      cc_minor;           /* e.g. 0 */
  int      n_sms;              /* streaming multiprocessors */
  size_t   mem_bytes;          /* total device memory */
  int      runtime_version;    /* CUDART_VERSION style, e.g. 13000 */
  int      driver_version;     /* e.g. 13000 */
  int      nvrtc_major;        /* NVRTC version */
  int      nvrtc_minor;        /* e.g. 0 */
  size_t   cublaslt_version;   /* cublasLtGetVersion() */
} CsCudaDeviceInfo;

/** CsCudaTensorInfo: one program input or output (a tensor of the traces). */
typedef struct
{
  const char *name;            /* proxy name in its trace ("x", "t31"); owned by the program */
  CsDtype     dtype;           /* element dtype */
  guint       rank;            /* dims, <= CS_MAX_DIMS */
  int64_t     shape[CS_MAX_DIMS]; /* elements, outermost first */
  gboolean    backward;        /* TRUE for cotangents (inputs) and gradients (outputs) */
  int         grad_of;         /* outputs only: index of the input this is the gradient of, or -1 */
} CsCudaTensorInfo;

/** CsCudaStepTiming: one executed step (fusion kernel or matmul) with its median time. */
typedef struct
{
  const char *label;           /* "nvFusion0 k0 pointwise [8, 16]", "matmul t31 bf16 8x16x16" */
  const char *kind;            /* "fusion", "matmul", "copy" */
  gboolean    backward;        /* step belongs to the backward trace */
  double      median_ms;       /* median over the timed iterations, milliseconds */
  double      flops;           /* floating-point operations (matmuls: 2*M*N*K*batch), 0 for kernels */
  double      bytes;           /* minimal bytes read + written */
  double      floor_ms;        /* max(flops / peak, bytes / bandwidth), ceilings in the doc comment */
  double      alone_ms;        /* CASTSCOPE_STEP_REPS=N only (else 0): the step alone, N repeats in
                                  a CUDA graph, each after a memset of twice the L2 (the memsets'
                                  own graph subtracted), ms a repeat */
  double      warm_ms;         /* CASTSCOPE_STEP_REPS=N only (else 0): N back-to-back repeats in a
                                  graph, ms a repeat (inputs that fit stay in L2) */
  double      copy_alone_ms;   /* CASTSCOPE_STEP_REPS=N, memory-bound steps only (else 0): a
                                  device-to-device cudaMemcpyAsync of bytes / 2 (so bytes moved in
                                  all) timed as alone_ms is, ms a repeat: the copy ceiling there */
  double      copy_warm_ms;    /* the same copy timed as warm_ms is, ms a repeat */
} CsCudaStepTiming;

/** CsCudaTimes: what program_time() measures. */
typedef struct
{
  double      graph_ms;        /* median per-step GPU time from CUDA-graph replays, ms */
  double      graph_min_ms;    /* minimum of the same samples */
  double      latency_ms;      /* median of one launched-and-synced step (host included), ms */
  double      stream_ms;       /* median per-step time of plain stream launches (no graph), ms */
  guint       n_samples;       /* samples behind each median */
  guint       n_kernels;       /* kernel launches per step */
  guint       n_matmuls;       /* cuBLASLt calls per step */
  double      floor_ms;        /* sum of the steps' floors */
  double      compile_ms;      /* program_new wall time (NVRTC or disk cache, plans), ms; the
                                  sum of the five phases below */
  double      device_ms;       /* of which: selecting the device and creating its context, ms */
  double      codegen_ms;      /* the traces to steps, generated source and memory plan, ms (or
                                  reading them from the plan cache: plan_cached) */
  double      setup_ms;        /* stream, arena and workspace allocation, ms */
  double      kernels_ms;      /* NVRTC (or the disk cache) and loading the libraries, ms */
  double      plans_ms;        /* cuBLASLt matmul descriptors and algorithm heuristics, ms (with
                                  the wait for cuBLASLt's start-up, lt_wait_ms) */
  guint       n_gemm_plans;    /* distinct cuBLASLt plans (identical GEMMs share one) */
  double      first_plan_ms;   /* of plans_ms, the first GEMM's plan (cuBLASLt's start-up), ms */
  guint       cache_hits;      /* NVRTC programs served from the disk cache */
  size_t      arena_bytes;     /* device arena planned from liveness */
  size_t      naive_bytes;     /* sum of all buffer sizes (what no reuse would need) */
  GArray     *steps;           /* element-type CsCudaStepTiming; owned by the program */
  guint       n_streams;       /* streams the graph's launches run on (CASTSCOPE_STREAMS) */
  guint       critical_path;   /* launches on the longest chain that must run in order */
  gboolean    plan_cached;     /* the plan was read from the disk cache: codegen_ms is the time
                                  to read it (kernels/cs-cuda-plan.c) */
  double      lt_startup_ms;   /* cuBLASLt's start-up on its own thread (context, handle, first
                                  heuristic and check), ms: not a phase of the build, which only
                                  waits for it (lt_wait_ms) */
  double      lt_wait_ms;      /* of plans_ms, the time the build waited for that start-up, ms */
  double      lt_lead_ms;      /* how long before the build the start-up began (start_up called
                                  early), ms; 0 when the build began it */
  guint       step_reps;       /* CASTSCOPE_STEP_REPS: the repeats behind each step's alone_ms and
                                  warm_ms; 0 when off */
  guint       n_gemm_algos_cached; /* matmul steps whose cuBLASLt algorithm came from the plan
                                  cache (planned without a heuristic query) */
  guint       n_cudnn_plans;   /* distinct cuDNN attention plans */
  guint       n_cudnn_loaded;  /* of which loaded from their serialised form in the plan cache */
  double      cudnn_ms;        /* building or loading them, ms (within codegen_ms) */
} CsCudaTimes;

/**
 * CsCudaBackend:
 *
 * The executor's vtable.  Every function that can fail returns FALSE/NULL and sets a
 * #CS_CUDA_ERROR; none prints.  Functions are not thread-safe; use one program per thread.
 */
typedef struct
{
  guint            abi;        /* CS_CUDA_BACKEND_ABI */

  /* FALSE with CS_CUDA_ERROR_NO_DEVICE when there is no driver or no device. */
  gboolean       (*device_info)        (CsCudaDeviceInfo *info, GError **error);

  /* Compiles @fwd (+ @bwd, may be NULL): one NVRTC kernel per unique region structure (steps
   * with byte-identical generated code share it), compiled as one NVRTC program per processor
   * at the same time, each cached on disk; cuBLASLt plans, the arena.  @policy: allow_tf32
   * picks TF32 for f32 matmuls. */
  CsCudaProgram *(*program_new)        (CsTrace *fwd, CsTrace *bwd, const CsPolicy *policy,
                                        GError **error);
  void           (*program_free)       (CsCudaProgram *program); /* frees it; NULL: no-op */

  /* Inputs: the forward's tensor parameters in signature order, then the cotangents. */
  guint          (*program_n_inputs)   (CsCudaProgram *program);
  const CsCudaTensorInfo *(*program_input) (CsCudaProgram *program, guint index);
  /* Outputs: the forward's flat outputs, then the backward's gradients (non-None ones). */
  guint          (*program_n_outputs)  (CsCudaProgram *program);
  const CsCudaTensorInfo *(*program_output) (CsCudaProgram *program, guint index);

  /* Copies @n_bytes of host data (dense, the input's dtype, row-major) into input @index. */
  gboolean       (*program_set_input)  (CsCudaProgram *program, guint index, const void *host,
                                        gsize n_bytes, GError **error);
  /* Runs one step (forward then backward) and waits for it. @use_graph: replay the CUDA graph. */
  gboolean       (*program_run)        (CsCudaProgram *program, gboolean use_graph, GError **error);
  /* Copies output @index to @host as a dense row-major array of its dtype. */
  gboolean       (*program_get_output) (CsCudaProgram *program, guint index, void *host,
                                        gsize n_bytes, GError **error);
  /* Times @iters steps (>= 1, after 5 warm-up steps): graph replay, synced latency, per step. */
  gboolean       (*program_time)       (CsCudaProgram *program, guint iters, CsCudaTimes *times,
                                        GError **error);
  /* The generated CUDA source of the program (for --dump / debugging); owned by the program. */
  const char    *(*program_source)     (CsCudaProgram *program);
  /* The f64 reference: as program_new on copies of @fwd and @bwd with every float tensor (and
   * every float dtype argument) in f64, as core's CPU reference runs CS_REF_F64: conversions
   * between float dtypes are no-ops, matmul/linear run as cuBLASLt DGEMM, the generated
   * kernels compute in double.  Inputs and outputs are those of program_new, in the same
   * order, float ones as f64 (give inputs as f64: cs_tensor_convert). */
  CsCudaProgram *(*program_new_f64)    (CsTrace *fwd, CsTrace *bwd, const CsPolicy *policy,
                                        GError **error);
  /* Begins cuBLASLt's start-up (its first calls on device 0: the context, the handle, then,
   * unless the next program_new finds every matmul algorithm in the plan cache, one heuristic
   * query and algorithm check, 100-140 ms on the H200) on a thread of its own, so that it runs
   * beside whatever the caller does next (reading the trace, the passes); the next program_new
   * waits for it and reports it (CsCudaTimes.lt_startup_ms).  Returns at once; later calls do
   * nothing. */
  void           (*start_up)           (void);
} CsCudaBackend;

typedef const CsCudaBackend *(*CsCudaBackendGetFunc) (void);

/**
 * cs_cuda_backend_get:
 *
 * The entry point of the kernels module (looked up by name, CS_CUDA_BACKEND_SYMBOL).
 * Returns: (transfer none): the static vtable; never NULL
 */
G_MODULE_EXPORT const CsCudaBackend *cs_cuda_backend_get (void);

G_END_DECLS
