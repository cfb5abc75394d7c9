/* cs-policy.h: the cast policy, one struct shared by the passes, the CLI and the GUI.
 *
 * Knobs and defaults: ../shared/DESIGN.md "The cast policy".  Defaults are Thunder's.
 * Spelled on the CLI as `--policy key=value` with the keys and values below.
 */
#pragma once

#include <glib.h>

#include "cs-dtype.h"

G_BEGIN_DECLS

typedef enum
{
  CS_MATMUL_NATIVE,      /* "native": matmul/linear in the operands' dtype (tensor cores) */
  CS_MATMUL_UPCAST_F32,  /* "upcast-f32": convert -> f32 matmul -> convert back */
} CsMatmulPrecision;

typedef enum
{
  CS_ELEMENTWISE_F32,    /* "f32": Thunder's computation dtype for bf16/f16 math */
  CS_ELEMENTWISE_NATIVE, /* "native": compute in the operands' dtype, no upcasts */
} CsElementwiseCompute;

typedef enum
{
  CS_AUTOCAST_OFF,       /* "off" */
  CS_AUTOCAST_BF16,      /* "bf16" */
  CS_AUTOCAST_F16,       /* "f16" */
} CsAutocast;

typedef enum
{
  CS_FUSION_CONSECUTIVE, /* "consecutive": Thunder's jit default */
  CS_FUSION_DATAFLOW,    /* "dataflow": ThunderFX's default */
  CS_FUSION_OFF,         /* "off": no regions */
} CsFusionMode;

typedef enum
{
  CS_REDUNDANT_CASTS_REMOVE, /* "remove": nvFuser's remove_redundant_casts inside regions */
  CS_REDUNDANT_CASTS_KEEP,   /* "keep": no cast is removed: every rounding of Thunder's
                                decomposition, those between the ltorch ops inside a composite
                                (ltorch.gelu's muls and adds) included */
} CsRedundantCasts;

/**
 * CsRounding:
 *
 * Where a bf16/f16 result is rounded (issue 19, the precision lens).  Applies when
 * redundant-casts=remove; redundant-casts=keep keeps every cast and overrides it.
 * - fused: nvFuser's remove_redundant_casts inside each region: a value stays in f32 across the
 *   ltorch ops of a region and is rounded once, where the region stores it (Thunder's default).
 * - eager: the casts are removed only within each user-level op (one statement of the initial
 *   trace: its decomposition, and the backward statements the grad pass made for it; the grad
 *   pass's sum of cotangents from two statements is an op of its own), never between two of
 *   them: each op's result is rounded to its result dtype, as a PyTorch eager kernel computes
 *   in opmath (f32) and stores its output in the tensor's dtype.  The removal then runs with
 *   fusion=off too (the torch executor runs each op as its eager kernel), on the top-level
 *   statements.  As under fused, a chain crossing a region boundary is kept.
 * Source: cs_cse_remove_redundant_casts_rounding() (cs-cse.h).
 */
typedef enum
{
  CS_ROUNDING_FUSED,     /* "fused": round once per region (nvFuser, Thunder's default) */
  CS_ROUNDING_EAGER,     /* "eager": round every user-level op's result, as PyTorch eager */
} CsRounding;

typedef enum
{
  CS_GRAD_REDUCE_NATIVE, /* "native": a gradient is all-reduced / reduce-scattered in its own
                            dtype (Thunder: synchronize's backward reduces `grad / size` as is) */
  CS_GRAD_REDUCE_F32,    /* "f32": converted to f32 before the collective, back after its wait */
  CS_GRAD_REDUCE_BF16,   /* "bf16": converted to bf16 before the collective, back after */
} CsGradReduce;

typedef enum
{
  CS_DDP_BUCKET_OFF,     /* "off": no bucketing pass, what Thunder 1e22aacb1's jit leaves (its
                            apply_bucketing_to_grad_allreduce finds no gradient all_reduce) */
  CS_DDP_BUCKET_25,      /* "25": Thunder's GradBuckets with ddp(bucket_size_in_mb=25.0), the default */
  CS_DDP_BUCKET_1,       /* "1": buckets of 1 MiB */
  CS_DDP_BUCKET_0,       /* "0": bucket_size_in_mb=0: no buckets, each all_reduce in place */
} CsDdpBucket;
/**
 * CsAttention:
 *
 * Whether castscope's own attention claim (issue 20, cs_attention_claim_trace() in
 * cs-attention-claim.h) rewrites a hand-written `softmax(q @ k.transpose(-2, -1) * scale, -1)
 * @ v` of the initial trace into one `ltorch.scaled_dot_product_attention`, which the sdpa
 * executor then claims (fused attention forward and backward).  A policy choice of castscope:
 * Thunder never claims the pattern.  The numerics change: the fused kernel keeps the scores and
 * the probabilities in f32 (flash attention's online softmax) where the pattern rounds the
 * scores, the scaled scores and the probabilities to the operands' dtype (bf16/f16).
 */
typedef enum
{
  CS_ATTENTION_PATTERN,  /* "pattern": keep what the trace says (Thunder's behaviour) */
  CS_ATTENTION_FUSED,    /* "fused": claim matmul, softmax, matmul as one fused attention */
} CsAttention;

/* ---- executors (issue 18) ------------------------------------------------------------------ */

/**
 * CsExecutor:
 *
 * Thunder's executors castscope knows by name (thunder/extend/__init__.py registry names at
 * 1e22aacb1).  Only sdpa, torchcompile_xentropy and nvfuser claim ops in castscope's passes;
 * torch (and python) run whatever nobody claimed, as Thunder's always-executors do; cudnn is
 * treated as not installed (it claims nothing, as in a Thunder without the cuDNN frontend) and
 * custom_op claims nothing castscope parses.
 */
typedef enum
{
  CS_EXECUTOR_CUDNN,                 /* "cudnn": not installed: claims nothing */
  CS_EXECUTOR_SDPA,                  /* "sdpa": thunder/executors/sdpaex.py */
  CS_EXECUTOR_TORCHCOMPILE_XENTROPY, /* "torchcompile_xentropy": thunder/executors/torch_compile.py */
  CS_EXECUTOR_NVFUSER,               /* "nvfuser": the nvFusion regions (cs-fuse.h) */
  CS_EXECUTOR_CUSTOM_OP,             /* "custom_op": claims nothing castscope parses */
  CS_EXECUTOR_TORCH,                 /* "torch": every op nobody else claimed */
  CS_EXECUTOR_PYTHON,                /* "python": Python builtins (claims nothing tensor-valued) */
  CS_N_EXECUTORS
} CsExecutor;

typedef struct
{
  CsMatmulPrecision    matmul;           /* key "matmul" */
  CsElementwiseCompute elementwise;      /* key "elementwise" */
  CsAutocast           autocast;         /* key "autocast" */
  CsFusionMode         fusion;           /* key "fusion" */
  gboolean             fuse_matmul;      /* key "fuse-matmul" (on/off): nv_enable_matmul */
  gboolean             fuse_linear;      /* key "fuse-linear" (on/off): nv_enable_linear */
  CsRedundantCasts     redundant_casts;  /* key "redundant-casts" */
  CsRounding           rounding;         /* key "rounding" (issue 19): fused or eager */
  gboolean             allow_tf32;       /* key "tf32" (on/off): f32 matmuls may use TF32 (GPU only) */
  CsGradReduce         grad_reduce;      /* key "grad-reduce": the dtype DDP/FSDP reduce gradients in */
  CsDdpBucket          ddp_bucket;       /* key "ddp-bucket-mb": DDP gradient bucketing */
  /* executors (issue 18): key "executors", a comma-separated list of CsExecutor names */
  guint8               executors[CS_N_EXECUTORS]; /* CsExecutor ids in priority order, no
                                                     repeats; n_executors of them are used */
  guint                n_executors;      /* 1..CS_N_EXECUTORS */
  CsAttention          attention;        /* key "attention" (issue 20): pattern or fused */
} CsPolicy;

/** The policy keys, in display order (NULL-terminated). */
extern const char * const cs_policy_keys[];

/** Thunder's defaults: native, f32, off, consecutive, off, off, remove, rounding fused, tf32 off,
 *  grad-reduce native, executors sdpa,torchcompile_xentropy,nvfuser,custom_op,torch,python,
 *  attention pattern. */
void      cs_policy_init_default (CsPolicy *policy);
/**
 * cs_policy_set:
 * @key: one of cs_policy_keys
 * @value: a value name ("native", "upcast-f32", "on", ...)
 * Errors: CS_POLICY_ERROR_KEY for an unknown key, CS_POLICY_ERROR_VALUE for an unknown value;
 * the message lists the accepted keys or values.
 */
gboolean  cs_policy_set          (CsPolicy *policy, const char *key, const char *value, GError **error);
/** Parses "key=value". */
gboolean  cs_policy_parse_assignment (CsPolicy *policy, const char *assignment, GError **error);
/** The value name of @key in @policy (static string). */
const char *cs_policy_get        (const CsPolicy *policy, const char *key);
/** The accepted values of @key (NULL-terminated, static), or NULL for an unknown key. */
const char * const *cs_policy_values (const char *key);
/** "matmul=native elementwise=f32 ..." (caller frees): every key but grad-reduce,
 *  ddp-bucket-mb, rounding and attention, which are written only when they are not native /
 *  off / fused / pattern (the first two matter to distributed traces alone; all four keep
 *  default policies printing as before the keys existed). */
char     *cs_policy_to_string    (const CsPolicy *policy);
gboolean  cs_policy_equal        (const CsPolicy *a, const CsPolicy *b);
/** cs_policy_ddp_bucket_mb: Thunder's bucket_size_in_mb that key "ddp-bucket-mb" stands for
 *  (25, 1 or 0), or -1 for off. */
double    cs_policy_ddp_bucket_mb (const CsPolicy *policy);

/* ---- executors (issue 18) ---- */

/** The default executor list as the key spells it (Thunder's default executors at 1e22aacb1,
 *  cuDNN not installed): "sdpa,torchcompile_xentropy,nvfuser,custom_op,torch,python". */
#define CS_POLICY_DEFAULT_EXECUTORS "sdpa,torchcompile_xentropy,nvfuser,custom_op,torch,python"

/** cs_executor_name: Thunder's name of @ex ("sdpa", "nvfuser"); static; NULL out of range. */
const char *cs_executor_name      (CsExecutor ex);
/**
 * cs_policy_executor_rank:
 * @policy: a policy
 * @ex: an executor
 *
 * Returns: the 0-based position of @ex in @policy's executor list (its priority: lower
 * claims first, as Thunder walks its executor list), or -1 when the list lacks it
 */
int       cs_policy_executor_rank (const CsPolicy *policy, CsExecutor ex);
/** cs_policy_has_executor: whether @ex is in @policy's executor list. */
gboolean  cs_policy_has_executor  (const CsPolicy *policy, CsExecutor ex);

#define CS_POLICY_ERROR (cs_policy_error_quark ())
/** cs_policy_error_quark: the #GQuark of #CS_POLICY_ERROR (codes: #CsPolicyError). */
GQuark    cs_policy_error_quark  (void);
typedef enum
{
  CS_POLICY_ERROR_KEY,
  CS_POLICY_ERROR_VALUE,
} CsPolicyError;

G_END_DECLS
