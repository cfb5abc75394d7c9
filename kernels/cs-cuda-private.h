/* cs-cuda-private.h: internals of the CUDA executor (kernels/ only; tests excepted).
 *
 * Only the kernels/ sources see these structures.  The pieces:
 *   cs-cuda-backend.c  device queries, error helpers, the exported vtable
 *   cs-cuda-jit.c      NVRTC -> CUBIN with an on-disk cache, the self-contained preamble
 *   cs-cuda-blas.c     cuBLASLt plans (operand swap for row-major tensors) and launches
 *   cs-cuda-codegen.c  fusion region (prims) -> CUDA C kernels
 *   cs-cuda-attention.c  scaled dot product attention kernels (forward, backward)
 *   cs-cuda-cudnn.c    the same attention through cuDNN 9's fused flash attention (run-time loaded)
 *   cs-cuda-xentropy.c TorchCompile (cross-entropy) regions -> fused kernels
 *   cs-cuda-program.c  traces -> steps, views, liveness arena, run, CUDA graph, timings
 */
#pragma once

#include <glib.h>
#include <stdint.h>

#include <cuda_runtime.h>
#include <cublasLt.h>

#include "cs-cuda.h"
#include "cs-ir.h"
#include "cs-ops.h"
#include "cs-ops-args.h"
#include "cs-policy.h"

G_BEGIN_DECLS

/* Fills @error (CS_CUDA_ERROR_RUNTIME) and jumps to `out` when a runtime call fails; ggml's
 * CUDA_CHECK, but recoverable. */
#define CS_CU_CHECK(expr, error)                                                        \
  G_STMT_START {                                                                        \
    cudaError_t cs_cu_err_ = (expr);                                                    \
    if (cs_cu_err_ != cudaSuccess)                                                      \
      {                                                                                 \
        g_set_error ((error), CS_CUDA_ERROR, CS_CUDA_ERROR_RUNTIME, "%s failed: %s (%s)", \
                     #expr, cudaGetErrorString (cs_cu_err_), cudaGetErrorName (cs_cu_err_)); \
        goto out;                                                                       \
      }                                                                                 \
  } G_STMT_END

#define CS_CUBLAS_CHECK(expr, error)                                                    \
  G_STMT_START {                                                                        \
    cublasStatus_t cs_bl_st_ = (expr);                                                  \
    if (cs_bl_st_ != CUBLAS_STATUS_SUCCESS)                                             \
      {                                                                                 \
        g_set_error ((error), CS_CUDA_ERROR, CS_CUDA_ERROR_CUBLAS, "%s failed: status %d", \
                     #expr, (int) cs_bl_st_);                                           \
        goto out;                                                                       \
      }                                                                                 \
  } G_STMT_END

/* Ceilings measured on the H200 (reference/gpu-executor.md section 1): floors use these. */
#define CS_CUDA_PEAK_BF16_TFLOPS 790.0   /* bf16/f16 tensor-core GEMM, TFLOP/s */
#define CS_CUDA_PEAK_F32_TFLOPS   51.0   /* true-f32 GEMM (SIMT), TFLOP/s, datasheet 67 * 0.76 */
#define CS_CUDA_PEAK_TF32_TFLOPS 395.0   /* TF32 tensor cores, half the bf16 rate */
#define CS_CUDA_PEAK_TBPS          4.25  /* device copy, read + write, TB/s */

/* One device allocation inside the arena. */
typedef struct
{
  gsize    size_bytes;   /* requested bytes */
  gint     first;        /* first step touching it; -1 = none yet */
  gint     last;         /* last step touching it; -1 = none */
  gsize    offset;       /* bytes from the arena base, 256-aligned (valid after planning) */
  gboolean pinned;       /* program input or output: live for the whole step */
  gboolean zeroed;       /* device builds set its bytes to 0 once, when the arena is made (a
                            counter its kernels reset themselves; pinned) */
} CsCudaBuffer;

/* A tensor as the executor sees it: a strided view of one buffer. */
typedef struct
{
  CsDtype  dtype;                  /* element dtype */
  guint    rank;                   /* dims */
  int64_t  shape[CS_MAX_DIMS];     /* elements, outermost first */
  int64_t  strides[CS_MAX_DIMS];   /* elements; 0 for expanded dims */
  int64_t  offset;                 /* elements from the buffer start */
  guint    buffer;                 /* index into CsCudaProgram.buffers */
} CsCudaSlot;

typedef enum
{
  CS_CUDA_STEP_KERNEL,   /* a generated kernel */
  CS_CUDA_STEP_GEMM,     /* one cublasLtMatmul */
  CS_CUDA_STEP_CUDNN,    /* one cudnnBackendExecute (cs-cuda-cudnn.c) */
} CsCudaStepKind;

typedef struct _CsCudaGemm CsCudaGemm;
typedef struct _CsCudaCudnn CsCudaCudnn;

/* Bytes rounded up to the arena's 256-byte alignment. */
#define CS_CUDA_ALIGN_UP(n) (((gsize) (n) + 255) & ~(gsize) 255)

/* One scaled dot product attention for cuDNN (cs-cuda-cudnn.c), every tensor seen as a 4-d
 * [b, h, rows, cols] view of its slot (strides in elements, the last 1). */
typedef struct
{
  gboolean backward;               /* dQ, dK, dV from q, k, v, o, dO, stats */
  CsDtype  dtype;                  /* bf16 or f16 (q, k, v, o and the gradients) */
  int64_t  b, h, sq, skv, d, dv;   /* batch, heads, queries, keys, head dims of q/k and v */
  gboolean causal;                 /* top-left: key j > query i masked (PyTorch's is_causal) */
  double   scale;                  /* score scale */
  gint     q, k, v, o, stats;      /* slots; stats f32 [b, h, sq] (forward -1: not kept) */
  gint     dO, dQ, dK, dV;         /* backward slots, else -1 */
  int64_t  q_st[4], k_st[4], v_st[4], o_st[4];        /* strides of the views */
  int64_t  stats_st[4];                               /* [b, h, sq, 1] */
  int64_t  do_st[4], dq_st[4], dk_st[4], dv_st[4];    /* strides of the backward views */
} CsCudnnSdpa;

/* A finalized cuDNN execution plan as cuDNN serialises it, for the plan file (cs-cuda-plan.c)
 * and read back from it (cs-cuda-cudnn.c). */
typedef struct
{
  char    *key;          /* the problem's key (cs-cuda-cudnn.c's plan_key) */
  char    *json;         /* CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION */
  gint64   workspace;    /* the plan's workspace, bytes */
  gint64   engine;       /* its engine's global index (-1: unknown) */
} CsCudnnSaved;

/* One unique generated kernel of a program.  Steps whose regions have the same structure (ops,
 * dtypes, shapes, strides, constants: identical layers) generate byte-identical text and share
 * one CsCudaKernel. */
typedef struct
{
  char  *source;         /* `extern "C" __global__ void ... k<N> (...) {...}`, N = its index */
  char  *attrs;          /* its launch attributes (`__launch_bounds__(256)`) */
  char  *text;           /* its parameter list and body: what follows the name */
  guint  library;        /* which NVRTC program (index into CsCudaProgram.libraries) holds it */
} CsCudaKernel;

/* cs_cuda_program_build_full() and CsCudaBuildFlags exist (tests/bench-compile.c also builds
 * against the executor before them). */
#define CS_CUDA_BUILD_FULL_API 1
/* CS_CUDA_BUILD_PLAN_CACHE and cs-cuda-plan.c exist (tests/bench-compile.c builds without). */
#define CS_CUDA_PLAN_CACHE_API 1

/* How cs_cuda_program_build_full() builds. */
typedef enum
{
  CS_CUDA_BUILD_DEVICE       = 0,        /* everything: needs a device */
  CS_CUDA_BUILD_DRY          = 1 << 0,   /* no device: steps, memory plan, source (sm_90, 132 SMs) */
  CS_CUDA_BUILD_COMPILE      = 1 << 1,   /* with DRY: also compile the kernels to CUBINs (NVRTC
                                            needs no device), as a device build would */
  CS_CUDA_BUILD_NO_DEDUPE    = 1 << 2,   /* tests: one kernel per step, identical ones included */
  CS_CUDA_BUILD_PLAN_CACHE   = 1 << 3,   /* with DRY: read and write the whole-plan cache as a
                                            device build does (cs-cuda-plan.c) */
} CsCudaBuildFlags;

/* Alignment of every buffer in the arena, bytes. */
#define CS_CUDA_ALIGN 256

/* Streams a captured step may spread over (cs-cuda-streams.c). */
#define CS_CUDA_MAX_STREAMS 4
/* A step whose roofline floor is at least this (ms) fills the GPU on its own: such steps stay in
 * trace order among themselves (5 us: a few replayed launches' worth). */
#define CS_CUDA_SATURATING_MS 0.005

/* One kernel argument: a slot's data pointer. */
typedef struct
{
  guint slot;            /* index into CsCudaProgram.slots */
} CsCudaKArg;

typedef struct
{
  CsCudaStepKind kind;           /* KERNEL, GEMM or CUDNN: which part below is set */
  char          *label;          /* human-readable, no trace text beyond proxy names */
  const char    *kind_name;      /* "fusion", "matmul", "copy" */
  gboolean       backward;       /* from the backward trace */
  double         flops;          /* matmuls: 2*M*N*K*batch */
  double         bytes;          /* minimal bytes read + written */
  double         floor_ms;       /* roofline floor */
  GArray        *reads;          /* element-type guint: slot ids read */
  GArray        *writes;         /* element-type guint: slot ids written */

  /* KERNEL */
  guint          kernel;         /* kernel number (name "k<kernel>" in the program source) */
  gboolean       mergeable;      /* a region kernel of the code generator (gen_finish), or a
                                    backward attention kernel: it may share one launch with an
                                    adjacent independent one */
  gsize          shared_bytes;   /* static shared memory of its kernel, bytes, where its
                                    generator states it (the attention kernels); 0: not stated */
  GArray        *args;           /* element-type CsCudaKArg, in the kernel's parameter order */
  unsigned int   grid[3];        /* blocks */
  unsigned int   block[3];       /* threads per block */
  void          *func;           /* cudaKernel_t once loaded */
  void         **arg_ptrs;       /* pointers to arg_vals, for cudaLaunchKernel */
  void         **arg_vals;       /* device pointers */

  /* GEMM */
  CsCudaGemm    *gemm;           /* (owned) the cuBLASLt matmul (cs-cuda-blas.c) */

  /* CUDNN */
  CsCudaCudnn   *cudnn;          /* the plan's problem, pointers, variant pack */

  /* Where it runs in the captured graph (cs_cuda_program_schedule) */
  guint          stream;         /* 0 = the program's stream, else side_streams[stream - 1] */
  guint          n_waits;        /* entries of waits */
  guint          waits[CS_CUDA_MAX_STREAMS - 1]; /* earlier steps on other streams it waits for */
  gboolean       signals;        /* a later step waits for it: an event is recorded after it */
  guint          depth;          /* steps on the longest chain that ends with it, itself included */
} CsCudaStep;

/* A bias gradient @o = convert(sum(convert(@g, f32), rows), @g's dtype) of a fusion region, @g
 * [..., N] a region input (the output gradient of a linear), @o [N]. */
typedef struct
{
  CsProxy *g;            /* the summed tensor (bf16/f16) */
  CsProxy *o;            /* the region's output: the bias gradient, in g's dtype */
} CsCudaBiasGrad;

/* Where a tensor z goes when the trace only transposes it, reshapes that, and concatenates the
 * result x with others (the GPT backward's dQ, dK, dV before the cat of c_attn's gradient). */
typedef struct
{
  CsProxy *cat;                  /* the cat's output */
  CsProxy *x;                    /* the cat's input: reshape (y) */
  CsProxy *y;                    /* transpose (z, perm) */
  int64_t  perm[CS_MAX_DIMS];    /* that transpose's permutation */
  int64_t  off;                  /* x's first index along the cat dim */
  guint    dim;                  /* the cat dim */
} CsCudaCatPlace;

/* Everything a program owns.  Built by cs_cuda_program_build(). */
struct _CsCudaProgram
{
  CsPolicy       policy;         /* copy of the policy it was built with */
  GArray        *buffers;        /* element-type CsCudaBuffer */
  GArray        *slots;          /* element-type CsCudaSlot */
  GPtrArray     *steps;          /* element-type CsCudaStep*: what every training step runs */
  GPtrArray     *setup_steps;    /* element-type CsCudaStep*: constant fills (kernels that read
                                    nothing and write buffers no other step writes), run once
                                    when the program is built; their buffers are pinned */
  GString       *source;         /* generated CUDA C: every unique kernel once, in order (no
                                    preamble) */
  guint          n_kernels;      /* unique kernels (= kernels->len) */
  GPtrArray     *kernels;        /* element-type CsCudaKernel*: the unique kernels */
  GHashTable    *kernel_of;      /* kernel text (attributes, parameters, body) -> index in
                                    kernels; NULL with CS_CUDA_BUILD_NO_DEDUPE */
  GPtrArray     *cubins;         /* element-type GBytes: one CUBIN per NVRTC program (after a
                                    compile), index = CsCudaKernel.library */
  void         **libraries;      /* cudaLibrary_t per NVRTC program (device builds) */
  guint          n_libraries;    /* their number */
  double         nvrtc_ms;       /* wall time of the kernel compile (NVRTC or disk cache), ms */
  GHashTable    *slot_of;        /* CsProxy* -> slot index + 1 */
  GHashTable    *collection_of;  /* CsProxy* -> CsValue* (a bound tuple/list tree) */
  GHashTable    *want_perm;      /* CsProxy* -> int64_t[CS_MAX_DIMS] (g_new): the permutation
                                    of the one top-level transpose of that tensor whose result a
                                    reshape reads (plan_layouts); its producer lays it out so
                                    that the transpose is contiguous and the reshape a view */
  GPtrArray     *bias_grads;     /* element-type CsCudaBiasGrad* (g_free): the bias gradients
                                    regions compute as column sums that a dW matmul's epilogue
                                    may compute instead (plan_bias_grads) */
  GHashTable    *epilogue_outs;  /* CsProxy* set: region outputs a matmul epilogue bound */
  GHashTable    *place_of;       /* CsProxy* z -> CsCudaCatPlace* (g_free): z is written into its
                                    piece of a cat's output (plan_cats) */
  GHashTable    *cat_slot;       /* CsProxy* (a cat's output) -> slot + 1, made by the first
                                    producer of one of its pieces */
  GArray        *inputs;         /* element-type CsCudaTensorInfo */
  GArray        *input_slots;    /* element-type guint */
  GArray        *outputs;        /* element-type CsCudaTensorInfo */
  GArray        *output_slots;   /* element-type guint */
  int            device;         /* CUDA ordinal */
  int            n_sms;          /* for grid sizing */
  int            cc_major, cc_minor; /* the device's compute capability */

  void          *arena;          /* device memory, one cudaMalloc */
  gsize          arena_bytes;    /* planned size */
  gsize          arena_alloc_bytes; /* size of the pool block holding the arena (>= arena_bytes) */
  gsize          naive_bytes;    /* sum of buffer sizes */
  cudaStream_t   stream;         /* all work runs here, except graph steps on side streams */
  cudaStream_t   side_streams[CS_CUDA_MAX_STREAMS - 1]; /* streams 1.. of the schedule (device
                                    builds with n_streams > 1), or NULL */
  void          *side_workspaces[CS_CUDA_MAX_STREAMS - 1]; /* their cuBLASLt workspaces
                                    (workspace_bytes each), or NULL */
  guint          n_streams;      /* streams the schedule uses, >= 1 */
  guint          critical_path;  /* longest chain of steps that must run in order, in steps */
  cublasLtHandle_t lt;           /* cuBLASLt handle */
  gboolean       lt_shared;      /* lt is the process's handle (cs_cuda_lt_startup_join): not
                                    destroyed with the program */
  double         lt_startup_ms;  /* cuBLASLt's start-up on its thread (CsCudaTimes), ms */
  double         lt_wait_ms;     /* of plans_ms, the wait for it, ms */
  double         lt_lead_ms;     /* how long before this build it began, ms (0: not before) */
  void          *workspace;      /* cuBLASLt workspace */
  gsize          workspace_bytes;/* 32 MiB (Hopper recommendation) */
  cudaGraphExec_t graph;         /* instantiated whole-step graph, or NULL */
  double         compile_ms;     /* program build time, ms (the phases below summed) */
  double         device_ms;      /* device selection and context creation, ms */
  double         codegen_ms;     /* steps, source, memory plan, ms */
  double         setup_ms;       /* stream, arena, workspaces, ms */
  double         kernels_ms;     /* compile (or disk cache) and library loads, ms */
  double         plans_ms;       /* cuBLASLt plans (with the wait for its start-up), ms */
  double         first_plan_ms;  /* of plans_ms, the first GEMM's plan (cuBLASLt's start-up) */
  guint          n_gemm_plans;   /* distinct cuBLASLt problems planned (GEMMs without bias that
                                    share a problem share one plan) */
  guint          cache_hits;     /* NVRTC programs served from the disk cache */
  char          *full_source;    /* preamble + kernels, as compiled */
  GArray        *timings;        /* element-type CsCudaStepTiming (for program_time) */
  gboolean       backward_active;/* building the backward trace now */
  GPtrArray     *xent_rows;      /* cs-cuda-xentropy.c's records of the forward's cross-entropy
                                    rows steps that write log-softmax, for the backward to
                                    recompute it instead (freed with the program); or NULL */
  CsTrace       *f64_traces[2];  /* f64 programs (cs-cuda-f64.c): the retyped forward and
                                    backward the tensor infos point into; else NULL */
  gboolean       use_cudnn;      /* device builds: attention may go through cuDNN (where
                                    cs_cuda_cudnn_enabled() and the case fits) */
  GHashTable    *cudnn_plans;    /* problem key -> cuDNN plan (cs-cuda-cudnn.c), or NULL */
  guint          n_cudnn_plans;  /* distinct cuDNN problems planned */
  double         cudnn_ms;       /* time spent building cuDNN plans, ms (within codegen_ms) */
  void          *cudnn_workspace;        /* device bytes shared by the cuDNN steps */
  gsize          cudnn_workspace_bytes;  /* their size (max over the steps) */
  gsize          cudnn_workspace_alloc;  /* the pool block's size */
  char          *cudnn_consulted;/* cs_cuda_cudnn_describe() when the build asked cuDNN to take
                                    an attention (its answer shaped the plan), else NULL */
  gboolean       plan_cached;    /* the plan (steps, slots, memory plan, kernels' text) was
                                    read from the disk cache, not generated (cs-cuda-plan.c) */
  gboolean       plan_stale;     /* it was, but a part of it could not be used (a GEMM without
                                    its algorithm, a cuDNN plan of another cuDNN or that failed
                                    to load): written again after the build */
  char          *device_name;    /* the device's name (cs_cuda_device_name); dry builds "dry" */
  gsize          lt_version;     /* cublasLtGetVersion() */
  gsize          cudnn_version;  /* the cuDNN version its cuDNN plans were made with, 0: none */
  GPtrArray     *cudnn_saved;    /* element-type CsCudnnSaved*: the serialised plans of its
                                    cuDNN problems (made or read from the plan file) */
  guint          n_gemm_algos_cached; /* GEMM steps whose algorithm came from the plan file */
  guint          n_cudnn_loaded; /* cuDNN plans loaded from their serialised form */
  GStringChunk  *names;          /* tensor names of a plan read from the cache (the infos'
                                    `name`), or NULL */
  gint           break_kernel;   /* test hook CASTSCOPE_TEST_BREAK_KERNEL=N: after kernel kN
                                    runs, the first bytes of every tensor it writes are overwritten
                                    (a deliberately wrong result); -1 = off */
};

/* ---- backend ---- */
gboolean     cs_cuda_init_device      (int *n_sms, int *cc_major, int *cc_minor, GError **error);
/* The name of CUDA device @device ("NVIDIA H200"): cuDeviceGetName through the runtime's
 * driver entry point (no context needed), else cudaGetDeviceProperties; "?" when both fail.
 * Returns: (transfer full): the name */
char        *cs_cuda_device_name      (int device);

/* ---- program building (cs-cuda-program.c) ---- */
guint        cs_cuda_program_new_buffer (CsCudaProgram *p, gsize size_bytes);
/* A fresh contiguous slot (and buffer) for a tensor of @dtype and @shape. */
guint        cs_cuda_program_new_slot   (CsCudaProgram *p, CsDtype dtype, const int64_t *shape,
                                         guint rank);
/* Slot @slot of @p (asserted to exist); the pointer is valid until the next slot is added. */
CsCudaSlot  *cs_cuda_program_slot       (CsCudaProgram *p, guint slot);
/* The slot bound to @proxy, or -1. */
gint         cs_cuda_program_lookup     (CsCudaProgram *p, const CsProxy *proxy);
/* Binds @proxy to slot @slot (replacing an earlier binding): cs_cuda_program_lookup()'s answer. */
void         cs_cuda_program_bind       (CsCudaProgram *p, const CsProxy *proxy, guint slot);
/* Appends a new step of @kind to p->steps, marked backward while p->backward_active, with empty
 * reads, writes and args; @kind_name is kept as is (a static string), @label is taken.
 * Returns: (transfer none): the step, owned by @p */
CsCudaStep  *cs_cuda_program_add_step   (CsCudaProgram *p, CsCudaStepKind kind, const char *kind_name,
                                         char *label /* transfer full */);
/* TRUE when @s has the row-major contiguous strides of its shape (extent-1 dims: any stride). */
gboolean     cs_cuda_slot_is_contiguous (const CsCudaSlot *s);
/**
 * cs_cuda_program_new_output_slot:
 * @y: a typed tensor a kernel is about to write (a region's pointwise output, an attention
 *   output)
 *
 * A fresh slot (and buffer) for @y: contiguous, unless the trace transposes @y and reshapes the
 * transpose (p->want_perm, planned before the walk: the attention output going to [B, T, H*D],
 * a gradient of K after the RoPE backward): then @y's dims are laid out in the transpose's
 * order, dense, so that the transpose is a contiguous view and the reshape after it costs no
 * copy.  The kernel writing @y must address it through the slot's strides.
 * Returns: the slot
 */
guint        cs_cuda_program_new_output_slot (CsCudaProgram *p, const CsProxy *y);
guint        cs_cuda_program_reshape_view (CsCudaProgram *p, guint src, const int64_t *shape, guint rank);
/* Elements of @s: the product of its shape (1 for rank 0). */
gsize        cs_cuda_slot_numel         (const CsCudaSlot *s);

/* ---- codegen (cs-cuda-codegen.c) ---- */
/**
 * cs_cuda_codegen_region:
 * @prims: the region's prims in trace order (a fusion's subsymbols, or one op's decomposition)
 * @outs: the proxies the region must produce (bound to new slots on return)
 * @label: region name for step labels ("nvFusion0")
 *
 * Emits kernels for the region into p->source and adds their steps.  A region whose reductions
 * run along rows of one shape (a normalisation, a softmax) becomes one row-fused kernel (plus
 * its column reductions); otherwise pointwise ops with broadcasting become one kernel per output
 * shape and each reduction (sum, amax, amin, prod, var_mean) a reduction kernel with its
 * pointwise prologue inlined.  Source: reference/gpu-executor.md 4.2-4.3 (math in f32
 * registers, rounding where a value is stored in bf16/f16).  Errors: CS_CUDA_ERROR_UNSUPPORTED
 * naming the prim.
 */
gboolean     cs_cuda_codegen_region     (CsCudaProgram *p, CsStmt **prims, guint n_prims,
                                         CsProxy **outs, guint n_outs, const char *label,
                                         GError **error);
/* A contiguous copy of slot @src (any strides) into a new slot; returns the new slot. */
gboolean     cs_cuda_codegen_copy       (CsCudaProgram *p, guint src, const char *label,
                                         guint *out_slot, GError **error);

gboolean     cs_cuda_codegen_scatter_add (CsCudaProgram *p, guint a, guint idx, guint val, int64_t dim,
                                          const CsProxy *y, const char *label, guint *out_slot,
                                          GError **error);

gboolean     cs_cuda_codegen_embedding_backward (CsCudaProgram *p, guint grad, guint idx, int64_t padding_idx,
                                                 const CsProxy *y, const char *label, guint *out_slot,
                                                 GError **error);

/* The C type a tensor of @dt is stored as in generated kernels ("unsigned short" for bf16/f16,
 * "float", "long long"...), or NULL for a dtype the kernels do not store (cs-cuda-codegen.c). */
const char  *cs_cuda_storage_type       (CsDtype dt);
/* Adds the kernel of @text (its parameter list and body: everything after the name) with the
 * launch attributes @attrs to @p, or finds the identical kernel already there (kernels keyed by
 * their text, so identical layers share one); returns its index in p->kernels. */
guint        cs_cuda_intern_kernel      (CsCudaProgram *p, const char *attrs, const char *text);

/* ---- fused attention (cs-cuda-attention.c) ---- */
/* TRUE for the sdpa executor's statements and ATen's SDPA backend ops (forward, backward). */
gboolean     cs_cuda_attention_handles  (const CsStmt *st);
/* Their kernels (online-softmax forward; FlashAttention-2 backward); see the .c file. */
gboolean     cs_cuda_attention_call     (CsCudaProgram *p, CsStmt *st, GError **error);
/* ---- cuDNN attention (cs-cuda-cudnn.c) ---- */
/* The problem of a cuDNN step (what cs_cuda_cudnn_sdpa_step was given). */
const CsCudnnSdpa *cs_cuda_cudnn_problem (const CsCudaCudnn *c);
gboolean     cs_cuda_cudnn_enabled      (void);
/* cudnnGetVersion() of the loaded cuDNN (major * 10000 + minor * 100 + patch), loading it if
 * that was not tried yet; 0 when none is loaded. */
gsize        cs_cuda_cudnn_version      (void);
/* Frees a CsCudnnSaved. */
void         cs_cuda_cudnn_saved_free   (gpointer saved);
const char  *cs_cuda_cudnn_describe     (void);
/* Adds the cuDNN step of @d (FALSE, *@why set: not taken, run the kernels); see the .c file. */
gboolean     cs_cuda_cudnn_sdpa_step    (CsCudaProgram *p, const CsCudnnSdpa *d, char *label, char **why);
gboolean     cs_cuda_cudnn_bind         (CsCudaProgram *p, CsCudaCudnn *c, GError **error);
gboolean     cs_cuda_cudnn_run          (CsCudaProgram *p, CsCudaCudnn *c, GError **error);
void         cs_cuda_cudnn_free         (CsCudaCudnn *c);
/* ---- fused cross-entropy (cs-cuda-xentropy.c) ---- */
/* A torchcompile_xentropy region (TorchCompileN) as fused cross-entropy kernels; documented there. */
gboolean     cs_cuda_xentropy_region    (CsCudaProgram *p, CsStmt *st, GPtrArray *outs, GError **error);

/* ---- jit (cs-cuda-jit.c) ---- */
const char  *cs_cuda_jit_preamble       (void);
char        *cs_cuda_jit_cache_dir      (void);
/* Loads a CUBIN as a cudaLibrary_t. */
gboolean     cs_cuda_jit_load           (GBytes *cubin, void **library, GError **error);
/* Compile only (no device needed): used by tests to check generated source on any machine. */
gboolean     cs_cuda_jit_compile        (const char *source, int cc_major, int cc_minor,
                                         GBytes **cubin, gboolean *cache_hit, GError **error);
guint        cs_cuda_jit_n_programs     (guint n_kernels);
gboolean     cs_cuda_jit_compile_kernels (GPtrArray *kernels, guint n_programs, int cc_major,
                                          int cc_minor, GPtrArray **cubins, guint *cache_hits,
                                          GError **error);

/* ---- cuBLASLt (cs-cuda-blas.c) ---- */
/**
 * cs_cuda_gemm_new:
 * @a: slot of A, shape [..., M, K] (row-major or a transposed view)
 * @b: slot of B, shape [..., K, N] or [K, N]
 * @d: slot of D, shape [..., M, N], contiguous
 * @bias: slot of a bias [N] (linear) or -1
 *
 * Describes D = A @ B (+ bias) for cuBLASLt with the operand swap (reference/gpu-executor.md
 * 2.1): no transposes are materialised.  Errors: CS_CUDA_ERROR_UNSUPPORTED for layouts that
 * are neither row- nor column-major in the last two dims, or mixed dtypes.
 */
CsCudaGemm  *cs_cuda_gemm_new           (CsCudaProgram *p, guint a, guint b, guint d, gint bias,
                                         double *flops, GError **error);
/**
 * cs_cuda_gemm_set_bias_grad:
 * @bgrad: slot of a contiguous [M] tensor of @g's dtype
 *
 * Makes @g also write the bias gradient of the linear whose weight gradient it is: @bgrad[i] =
 * sum over k of A[i, k] for D = A @ B with A [M, K] (the output gradient transposed), summed in
 * f32 and rounded once to @g's dtype (cuBLASLt's CUBLASLT_EPILOGUE_BGRADB on the swapped
 * operands).  Only for what that epilogue is used with elsewhere (Transformer Engine's weight
 * gradient): bf16/f16, no batch, no bias, cuBLAS A untransposed and B transposed.
 * Returns: FALSE (and @g unchanged) when @g is not of that form
 */
gboolean     cs_cuda_gemm_set_bias_grad (CsCudaGemm *g, guint bgrad);
/* What a GEMM computes, without its plan: the first fields of CsCudaGemm (cs-cuda-blas.c has
 * their meaning), as the whole-plan cache keeps them. */
typedef struct
{
  guint              slot_a, slot_b, slot_d;   /* cuBLAS A (our B), cuBLAS B (our A), D */
  gint               slot_bias;                /* bias or bias gradient, or -1 */
  gboolean           bgrad;                    /* BGRADB epilogue */
  CsDtype            dtype;                    /* operand and output dtype */
  int64_t            m, n, k;                  /* col-major problem */
  cublasOperation_t  ta, tb;                   /* transposes of cuBLAS A and B */
  int64_t            a_rows, a_cols, lda;      /* stored layout of cuBLAS A */
  int64_t            b_rows, b_cols, ldb;      /* stored layout of cuBLAS B */
  int64_t            ldd;                      /* leading dim of D */
  int                batch;                    /* batch count */
  int64_t            stride_a, stride_b, stride_d; /* batch strides, elements */
  gboolean           tf32;                     /* TF32 allowed */
} CsCudaGemmProblem;
/* Copies @g's problem into @pr. */
void         cs_cuda_gemm_get_problem   (const CsCudaGemm *g, CsCudaGemmProblem *pr);
/* A GEMM of problem @pr, not planned yet (cs_cuda_gemm_plan makes its plan). */
CsCudaGemm  *cs_cuda_gemm_new_from_problem (const CsCudaGemmProblem *pr);
/* The algorithm @g runs with into @algo: TRUE once planned or given one by
 * cs_cuda_gemm_set_stored_algo, else FALSE (@algo untouched). */
gboolean     cs_cuda_gemm_get_algo      (const CsCudaGemm *g, cublasLtMatmulAlgo_t *algo);
/* Gives @g (not planned yet) the algorithm an earlier build chose for its problem with this
 * cuBLASLt on this device (the plan file): cs_cuda_gemm_plan then makes its descriptors and
 * takes @algo without a heuristic query, tuning or cublasLtMatmulAlgoCheck. */
void         cs_cuda_gemm_set_stored_algo (CsCudaGemm *g, const cublasLtMatmulAlgo_t *algo);
/* Whether @g holds an algorithm from cs_cuda_gemm_set_stored_algo. */
gboolean     cs_cuda_gemm_has_stored_algo (const CsCudaGemm *g);
/**
 * cs_cuda_lt_startup_begin:
 * @device: the CUDA ordinal programs will run on
 *
 * Starts cuBLASLt's start-up on a thread of its own (once per process; later calls return at
 * once): the device's primary context and a cuBLASLt handle; then, unless the first build
 * says it needs none (cs_cuda_lt_startup_want_heuristics), one heuristic query and one
 * algorithm check of a 64 x 64 bf16 GEMM, which pay cuBLASLt's first-use cost of its
 * heuristics (100-140 ms on the H200, kernels/BENCH-RESULTS.md run 46).
 */
void         cs_cuda_lt_startup_begin   (int device);
/**
 * cs_cuda_lt_startup_want_heuristics:
 * @want: whether the build will ask cuBLASLt's heuristics (a GEMM without an algorithm from
 *   the plan file)
 *
 * Tells the start-up thread, which waits for this after making the handle, whether to pay the
 * heuristics' first-use cost now.  Only the first call counts; cs_cuda_lt_startup_join calls
 * it with TRUE when no build did.
 */
void         cs_cuda_lt_startup_want_heuristics (gboolean want);
/**
 * cs_cuda_lt_startup_join:
 * @ms: (out): the start-up's duration, ms, for the first join; 0 for later ones
 * @waited_ms: (out): how long this call waited for it, ms
 * @t_begin: (out): when it began (g_get_monotonic_time())
 *
 * Begins the start-up if nothing did and waits for it.
 * Returns: (transfer none): the process's shared handle for @device (never destroyed), or NULL
 *   when the start-up failed or ran for another device (the caller makes its own)
 */
cublasLtHandle_t cs_cuda_lt_startup_join (int device, double *ms, double *waited_ms, gint64 *t_begin);
/* Builds the plan (descriptors, heuristic algorithm); needs the arena (bias pointer). */
gboolean     cs_cuda_gemm_plan          (CsCudaProgram *p, CsCudaGemm *g, GHashTable *plans,
                                         GError **error);
/* Runs the GEMM on stream @stream of the schedule (0: the program's stream), with that stream's
 * cuBLASLt workspace. */
gboolean     cs_cuda_gemm_run           (CsCudaProgram *p, CsCudaGemm *g, guint stream, GError **error);
/* Frees @g and its cuBLASLt descriptors (not a borrowed plan's: they are an identical GEMM's);
 * NULL is allowed. */
void         cs_cuda_gemm_free          (CsCudaGemm *g);
/* One line for logs: the dtype (f32: "/tf32" or "/true-f32"), M x N x K of the row-major
 * problem, " B^T" / " A^T" for an operand read transposed, " +bias" or " +bias grad".
 * Returns: (transfer full): the line */
char        *cs_cuda_gemm_describe      (CsCudaGemm *g);

/* ---- program (cs-cuda-program.c) ---- */
CsCudaProgram *cs_cuda_program_build    (CsTrace *fwd, CsTrace *bwd, const CsPolicy *policy, GError **error);
CsCudaProgram *cs_cuda_program_generate (CsTrace *fwd, CsTrace *bwd, const CsPolicy *policy, GError **error);
CsCudaProgram *cs_cuda_program_build_full (CsTrace *fwd, CsTrace *bwd, const CsPolicy *policy,
                                           CsCudaBuildFlags flags, GError **error);
/* Frees @p and all it owns: its graph, libraries, steps, streams, cuDNN plans, its cuBLASLt handle
 * unless shared, and its arena and workspaces (back to the memory pool); NULL is allowed. */
void         cs_cuda_program_free       (CsCudaProgram *p);

/* Frees a step (its label, lists, GEMM or cuDNN step). */
void         cs_cuda_program_step_free  (gpointer step);

/* ---- the whole-plan cache (cs-cuda-plan.c) ---- */
/**
 * cs_cuda_plan_key:
 * @p: the program being built, after its device phase (n_sms, compute capability, use_cudnn)
 *
 * The plan's cache key: the 128-bit MurmurHash3 (32 hex digits) of the format version, @flags, the device (name,
 * compute capability, SMs), the CUDA
 * runtime, driver and cuBLASLt versions, @policy, every CASTSCOPE_* environment variable but
 * CASTSCOPE_CACHE_DIR and CASTSCOPE_TEST_BREAK_KERNEL, this module's file (path, size,
 * modification time) and the printed @fwd and @bwd (every subsymbol level, without the leading
 * comments and the provenance line `# Constructed by ... (took N milliseconds)`).
 * Returns: (transfer full): 32 hex digits
 */
char        *cs_cuda_plan_key           (CsTrace *fwd, CsTrace *bwd, const CsPolicy *policy,
                                         const CsCudaProgram *p, CsCudaBuildFlags flags);
/* The 128-bit MurmurHash3 (x64_128, seed 0) of @n bytes at @d into @out (16 bytes: h1 then h2,
 * little-endian): not a cryptographic digest but a fast one (about a byte a cycle), the plan
 * file's check against damage and its key. */
void         cs_cuda_plan_hash128       (const guint8 *d, gsize n, guint8 out[16]);
/* The cache file of @key (`plan-<key>.bin` in cs_cuda_jit_cache_dir()), or NULL when
 * CASTSCOPE_NO_CACHE=1 or CASTSCOPE_PLAN_CACHE=0. */
char        *cs_cuda_plan_path          (const char *key);
/**
 * cs_cuda_plan_serialize:
 * @p: a program after its codegen phase (steps, slots, buffers planned, schedule, kernels),
 *   or after a whole device build (then with its GEMMs' algorithms and p->cudnn_saved)
 *
 * The plan file's bytes (format in cs-cuda-plan.c): what the codegen phase made, for @key,
 * with the algorithms of the GEMMs that have one and the serialised cuDNN plans, each part
 * after @p's cuBLASLt or cuDNN version, device name and compute capability.  The same
 * program always gives the same bytes.
 * Returns: (transfer full): the file's contents
 */
GBytes      *cs_cuda_plan_serialize     (const CsCudaProgram *p, const char *key);
/**
 * cs_cuda_plan_restore:
 * @p: a fresh program (program_build's containers, empty) with its device fields set
 * @data: a plan file's contents
 * @why: (out) (transfer full): on failure, why the file was refused (one phrase)
 *
 * Fills @p as its codegen phase would: buffers with their offsets, slots, the unique kernels
 * (p->kernels, p->source), steps with their schedule, constant fills, inputs and outputs; the
 * GEMMs get their stored algorithms (cs_cuda_gemm_set_stored_algo) and p->cudnn_saved the
 * serialised cuDNN plans, when their part's identity is this process's (else p->plan_stale);
 * a cuDNN step is planned again through cs_cuda_cudnn_sdpa_step (from its serialised plan
 * where there is one).  Checks the magic, format,
 * @key, length, hash and every index and extent (a slot inside its buffer, a buffer inside
 * the arena, waits on earlier steps); on any failure returns FALSE, @p then only fit to be
 * freed.
 * Returns: TRUE when @p holds the plan
 */
gboolean     cs_cuda_plan_restore       (CsCudaProgram *p, GBytes *data, const char *key, char **why);

/* ---- the f64 reference (cs-cuda-f64.c) ---- */
/* The deep copy of a final trace with every float tensor and float dtype argument in f64. */
CsTrace       *cs_cuda_trace_to_f64         (const CsTrace *trace);
/* As cs_cuda_program_build / _generate on the f64 copies of @fwd and @bwd. */
CsCudaProgram *cs_cuda_program_build_f64    (CsTrace *fwd, CsTrace *bwd, const CsPolicy *policy,
                                             GError **error);
CsCudaProgram *cs_cuda_program_generate_f64 (CsTrace *fwd, CsTrace *bwd, const CsPolicy *policy,
                                             GError **error);
/* Runs one training step of @p and waits for it: as the whole-step CUDA graph when @use_graph
 * (captured on first use, steps spread over the schedule's streams), else as plain launches in
 * order on p->stream.  Returns: FALSE with @error set (CS_CUDA_ERROR_RUNTIME, or a launch's) */
gboolean     cs_cuda_program_run        (CsCudaProgram *p, gboolean use_graph, GError **error);
gboolean     cs_cuda_program_reset_state (CsCudaProgram *p, GError **error);
/* Copies @n_bytes from @host into input @index's slot (blocking cudaMemcpy).  Errors:
 * CS_CUDA_ERROR_INPUT for an index out of range or @n_bytes other than the slot's numel times
 * its element size; CS_CUDA_ERROR_RUNTIME. */
gboolean     cs_cuda_program_set_input  (CsCudaProgram *p, guint index, const void *host, gsize n_bytes,
                                         GError **error);
/* Copies output @index into @host, dense and row-major (a strided output view is gathered on
 * the host); @n_bytes must be its numel times its element size.  Errors: CS_CUDA_ERROR_INPUT
 * (index out of range, wrong byte count), CS_CUDA_ERROR_RUNTIME. */
gboolean     cs_cuda_program_get_output (CsCudaProgram *p, guint index, void *host, gsize n_bytes,
                                         GError **error);
/* Times @p after 5 warm-up runs, @iters samples (at least 1) each, medians in ms: each of
 * p->steps between events on plain launches (p->timings, which t->steps points to until the
 * next call or the free), whole-step graph replays (graph_ms; graph_min_ms the fastest),
 * launch-and-wait latency on the host clock; each step alone with CASTSCOPE_STEP_REPS.  Fills
 * @t with those and with the build's phase times and counts.
 * Returns: FALSE with @error set on a CUDA failure */
gboolean     cs_cuda_program_time       (CsCudaProgram *p, guint iters, CsCudaTimes *t, GError **error);

/* ---- streams (cs-cuda-streams.c) ---- */
void         cs_cuda_program_schedule   (CsCudaProgram *p, guint n_streams);
/* The stream of schedule index @i (0: p->stream). */
cudaStream_t cs_cuda_program_stream     (CsCudaProgram *p, guint i);

/* ---- settings from the environment (cs-cuda-backend.c) ---- */
/* A whole number in [@min, @max] from the environment variable @name; unset or empty gives
 * @fallback; any other value that is not a decimal number in range also gives @fallback, with
 * one line on stderr per variable and process naming the variable, its value and the range. */
guint64      cs_cuda_env_uint           (const char *name, guint64 min, guint64 max,
                                         guint64 fallback);

/* Device pointer of a slot's first element (after planning). */
void        *cs_cuda_program_slot_ptr   (CsCudaProgram *p, guint slot);

G_END_DECLS
