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
  CS_REDUNDANT_CASTS_KEEP,   /* "keep": rounding after every op, as eager PyTorch */
} CsRedundantCasts;

typedef enum
{
  CS_GRAD_REDUCE_NATIVE, /* "native": a gradient is all-reduced / reduce-scattered in its own
                            dtype (Thunder: synchronize's backward reduces `grad / size` as is) */
  CS_GRAD_REDUCE_F32,    /* "f32": converted to f32 before the collective, back after its wait */
  CS_GRAD_REDUCE_BF16,   /* "bf16": converted to bf16 before the collective, back after */
} CsGradReduce;

typedef struct
{
  CsMatmulPrecision    matmul;           /* key "matmul" */
  CsElementwiseCompute elementwise;      /* key "elementwise" */
  CsAutocast           autocast;         /* key "autocast" */
  CsFusionMode         fusion;           /* key "fusion" */
  gboolean             fuse_matmul;      /* key "fuse-matmul" (on/off): nv_enable_matmul */
  gboolean             fuse_linear;      /* key "fuse-linear" (on/off): nv_enable_linear */
  CsRedundantCasts     redundant_casts;  /* key "redundant-casts" */
  gboolean             allow_tf32;       /* key "tf32" (on/off): f32 matmuls may use TF32 (GPU only) */
  CsGradReduce         grad_reduce;      /* key "grad-reduce": the dtype DDP/FSDP reduce gradients in */
} CsPolicy;

/** The policy keys, in display order (NULL-terminated). */
extern const char * const cs_policy_keys[];

/** Thunder's defaults: native, f32, off, consecutive, off, off, remove, tf32 off, grad-reduce
 *  native. */
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
/** "matmul=native elementwise=f32 ..." (caller frees): every key but grad-reduce, which is
 *  written only when it is not native (it matters to distributed traces alone). */
char     *cs_policy_to_string    (const CsPolicy *policy);
gboolean  cs_policy_equal        (const CsPolicy *a, const CsPolicy *b);

#define CS_POLICY_ERROR (cs_policy_error_quark ())
GQuark    cs_policy_error_quark  (void);
typedef enum
{
  CS_POLICY_ERROR_KEY,
  CS_POLICY_ERROR_VALUE,
} CsPolicyError;

G_END_DECLS
