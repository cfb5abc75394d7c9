/* cs-policy.c: the cast policy (see cs-policy.h).
 *
 * One table drives set/get/values/to_string so the CLI (`--policy key=value`), the GUI and the
 * passes spell every knob the same way.  Defaults are Thunder's (DESIGN.md "The cast policy").
 */
#include "cs-config.h"

#include "cs-policy.h"

#include <string.h>

G_DEFINE_QUARK (cs-policy-error-quark, cs_policy_error)

const char * const cs_policy_keys[] = {
  "matmul", "elementwise", "autocast", "fusion", "fuse-matmul", "fuse-linear",
  "redundant-casts", "rounding", "tf32", "grad-reduce", "ddp-bucket-mb",
  "executors",   /* issue 18: the list-valued key (its own block below) */
  "attention",   /* issue 20: castscope's attention claim */
  NULL,
};

static const char * const matmul_values[] = { "native", "upcast-f32", NULL };
static const char * const elementwise_values[] = { "f32", "native", NULL };
static const char * const autocast_values[] = { "off", "bf16", "f16", NULL };
static const char * const fusion_values[] = { "consecutive", "dataflow", "off", NULL };
static const char * const onoff_values[] = { "off", "on", NULL };
static const char * const redundant_values[] = { "remove", "keep", NULL };
static const char * const rounding_values[] = { "fused", "eager", NULL };
static const char * const grad_reduce_values[] = { "native", "f32", "bf16", NULL };
static const char * const ddp_bucket_values[] = { "off", "25", "1", "0", NULL };
static const char * const attention_values[] = { "pattern", "fused", NULL };

/* Each key maps to a value table and an int-sized field of CsPolicy (enums and gbooleans are
 * both stored as int: the value index is the enum value, and for on/off 0 = off, 1 = on). */
typedef struct
{
  const char          *key;     /* as in cs_policy_keys */
  const char * const  *values;  /* NULL-terminated; index = stored value */
  gsize                offset;  /* offsetof the int-sized field in CsPolicy */
} PolicyKnob;

static const PolicyKnob knobs[] = {
  { "matmul",          matmul_values,      G_STRUCT_OFFSET (CsPolicy, matmul) },
  { "elementwise",     elementwise_values, G_STRUCT_OFFSET (CsPolicy, elementwise) },
  { "autocast",        autocast_values,    G_STRUCT_OFFSET (CsPolicy, autocast) },
  { "fusion",          fusion_values,      G_STRUCT_OFFSET (CsPolicy, fusion) },
  { "fuse-matmul",     onoff_values,       G_STRUCT_OFFSET (CsPolicy, fuse_matmul) },
  { "fuse-linear",     onoff_values,       G_STRUCT_OFFSET (CsPolicy, fuse_linear) },
  { "redundant-casts", redundant_values,   G_STRUCT_OFFSET (CsPolicy, redundant_casts) },
  { "rounding",        rounding_values,    G_STRUCT_OFFSET (CsPolicy, rounding) },
  { "tf32",            onoff_values,       G_STRUCT_OFFSET (CsPolicy, allow_tf32) },
  { "grad-reduce",     grad_reduce_values, G_STRUCT_OFFSET (CsPolicy, grad_reduce) },
  { "ddp-bucket-mb",   ddp_bucket_values,  G_STRUCT_OFFSET (CsPolicy, ddp_bucket) },
  { "attention",       attention_values,   G_STRUCT_OFFSET (CsPolicy, attention) },
};

G_STATIC_ASSERT (sizeof (CsMatmulPrecision) == sizeof (int));
G_STATIC_ASSERT (sizeof (CsElementwiseCompute) == sizeof (int));
G_STATIC_ASSERT (sizeof (CsAutocast) == sizeof (int));
G_STATIC_ASSERT (sizeof (CsFusionMode) == sizeof (int));
G_STATIC_ASSERT (sizeof (CsRedundantCasts) == sizeof (int));
G_STATIC_ASSERT (sizeof (CsGradReduce) == sizeof (int));
G_STATIC_ASSERT (sizeof (CsDdpBucket) == sizeof (int));
G_STATIC_ASSERT (sizeof (CsRounding) == sizeof (int));
G_STATIC_ASSERT (sizeof (CsAttention) == sizeof (int));
G_STATIC_ASSERT (sizeof (gboolean) == sizeof (int));

static const PolicyKnob *
find_knob (const char *key)
{
  for (gsize i = 0; i < G_N_ELEMENTS (knobs); i++)
    if (strcmp (knobs[i].key, key) == 0)
      return &knobs[i];
  return NULL;
}

static int *
knob_field (CsPolicy *policy, const PolicyKnob *knob)
{
  return (int *) G_STRUCT_MEMBER_P (policy, knob->offset);
}

static char *
join_values (const char * const *values)
{
  return g_strjoinv (", ", (char **) values);
}

/* ---- executors (issue 18): a list-valued key, kept apart from the enum knobs ------------- */

static const char * const executor_names[CS_N_EXECUTORS + 1] = {
  [CS_EXECUTOR_CUDNN] = "cudnn",
  [CS_EXECUTOR_SDPA] = "sdpa",
  [CS_EXECUTOR_TORCHCOMPILE_XENTROPY] = "torchcompile_xentropy",
  [CS_EXECUTOR_NVFUSER] = "nvfuser",
  [CS_EXECUTOR_CUSTOM_OP] = "custom_op",
  [CS_EXECUTOR_TORCH] = "torch",
  [CS_EXECUTOR_PYTHON] = "python",
  [CS_N_EXECUTORS] = NULL,
};

/* The lists the app offers (cs_policy_values): Thunder's default first, then castscope before
 * executors (nvFuser and torch alone), Thunder's default without nvFuser (how the shared LLaMA
 * traces were printed) and the torch executor alone.  Any other list is accepted too. */
static const char * const executor_presets[] = {
  CS_POLICY_DEFAULT_EXECUTORS,
  "nvfuser,torch",
  "sdpa,torchcompile_xentropy,custom_op,torch,python",
  "torch",
  NULL,
};

const char *
cs_executor_name (CsExecutor ex)
{
  return (guint) ex < CS_N_EXECUTORS ? executor_names[ex] : NULL;
}

int
cs_policy_executor_rank (const CsPolicy *policy, CsExecutor ex)
{
  g_return_val_if_fail (policy != NULL, -1);
  for (guint i = 0; i < policy->n_executors && i < CS_N_EXECUTORS; i++)
    if (policy->executors[i] == (guint8) ex)
      return (int) i;
  return -1;
}

gboolean
cs_policy_has_executor (const CsPolicy *policy, CsExecutor ex)
{
  return cs_policy_executor_rank (policy, ex) >= 0;
}

/* Parses "a,b,c" (names of executor_names, spaces around commas allowed) into @policy's
 * list; @policy is unchanged on error. */
static gboolean
set_executors (CsPolicy *policy, const char *value, GError **error)
{
  g_auto(GStrv) parts = g_strsplit (value, ",", -1);
  guint8 list[CS_N_EXECUTORS];
  guint n = 0;

  for (guint i = 0; parts[i] != NULL; i++)
    {
      const char *name = g_strstrip (parts[i]);
      int found = -1;

      for (int e = 0; e < CS_N_EXECUTORS && found < 0; e++)
        if (strcmp (executor_names[e], name) == 0)
          found = e;
      if (found < 0)
        {
          g_autofree char *names = join_values (executor_names);
          g_set_error (error, CS_POLICY_ERROR, CS_POLICY_ERROR_VALUE,
                       "unknown executor '%s' in policy key 'executors' (executors: %s; give "
                       "them comma-separated in priority order, e.g. executors=%s)",
                       name, names, CS_POLICY_DEFAULT_EXECUTORS);
          return FALSE;
        }
      for (guint j = 0; j < n; j++)
        if (list[j] == (guint8) found)
          {
            g_set_error (error, CS_POLICY_ERROR, CS_POLICY_ERROR_VALUE,
                         "executor '%s' is listed twice in policy key 'executors'", name);
            return FALSE;
          }
      list[n++] = (guint8) found;
    }
  if (n == 0 || (n == 1 && parts[0][0] == 0))
    {
      g_set_error (error, CS_POLICY_ERROR, CS_POLICY_ERROR_VALUE,
                   "policy key 'executors' needs at least one executor (e.g. executors=%s)",
                   CS_POLICY_DEFAULT_EXECUTORS);
      return FALSE;
    }
  memcpy (policy->executors, list, n);
  policy->n_executors = n;
  return TRUE;
}

/* The list as the key spells it, interned (lives as long as the process). */
static const char *
get_executors (const CsPolicy *policy)
{
  GString *s = g_string_new (NULL);
  const char *r;

  for (guint i = 0; i < policy->n_executors && i < CS_N_EXECUTORS; i++)
    g_string_append_printf (s, "%s%s", i ? "," : "",
                            cs_executor_name ((CsExecutor) policy->executors[i]) ?: "?");
  r = g_intern_string (s->str);
  g_string_free (s, TRUE);
  return r;
}

/**
 * cs_policy_init_default:
 * @policy: (out caller-allocates): the policy to fill
 *
 * Thunder's defaults: matmul=native (no promotion around matmul/linear, thunder/torch
 * `matmul`), elementwise=f32 (`_computation_dtype_map`), autocast=off, fusion=consecutive
 * (`fusion_type` default of thunder.jit), fuse-matmul=off and fuse-linear=off
 * (`nv_enable_matmul`/`nv_enable_linear` default False), redundant-casts=remove
 * (nvFuser's `remove_redundant_casts`), rounding=fused (nvFuser rounds once per region),
 * tf32=off, grad-reduce=native (Thunder reduces a gradient in its own dtype:
 * thunder/distributed/prims.py synchronize_backward_rule),
 * ddp-bucket-mb=off (what Thunder 1e22aacb1's jit leaves: its bucketing pass finds nothing,
 * see cs_dist_bucket_grad_allreduce()),
 * executors=sdpa,torchcompile_xentropy,nvfuser,custom_op,torch,python (Thunder's default
 * executors, thunder/extend/__init__.py and thunder/__init__.py; cuDNN treated as not installed),
 * attention=pattern (Thunder never claims a hand-written matmul-softmax-matmul).
 */
void
cs_policy_init_default (CsPolicy *policy)
{
  g_return_if_fail (policy != NULL);

  memset (policy, 0, sizeof *policy);
  policy->matmul = CS_MATMUL_NATIVE;
  policy->elementwise = CS_ELEMENTWISE_F32;
  policy->autocast = CS_AUTOCAST_OFF;
  policy->fusion = CS_FUSION_CONSECUTIVE;
  policy->fuse_matmul = FALSE;
  policy->fuse_linear = FALSE;
  policy->redundant_casts = CS_REDUNDANT_CASTS_REMOVE;
  policy->rounding = CS_ROUNDING_FUSED;
  policy->allow_tf32 = FALSE;
  policy->grad_reduce = CS_GRAD_REDUCE_NATIVE;
  policy->ddp_bucket = CS_DDP_BUCKET_OFF;
  set_executors (policy, CS_POLICY_DEFAULT_EXECUTORS, NULL);
  policy->attention = CS_ATTENTION_PATTERN;
}

/**
 * cs_policy_set:
 * @policy: the policy to change
 * @key: one of #cs_policy_keys
 * @value: a value name ("native", "upcast-f32", "on", ...); "true"/"false" and "1"/"0" are
 *   accepted for on/off knobs
 * @error: return location for a #CS_POLICY_ERROR
 *
 * Sets one knob.  @policy is unchanged on error.
 * Errors: CS_POLICY_ERROR_KEY (message lists the keys), CS_POLICY_ERROR_VALUE (message lists
 * the values of @key).
 * Returns: TRUE on success
 */
gboolean
cs_policy_set (CsPolicy *policy, const char *key, const char *value, GError **error)
{
  const PolicyKnob *knob;

  g_return_val_if_fail (policy != NULL, FALSE);
  g_return_val_if_fail (key != NULL, FALSE);
  g_return_val_if_fail (value != NULL, FALSE);

  if (strcmp (key, "executors") == 0)
    return set_executors (policy, value, error);
  knob = find_knob (key);
  if (knob == NULL)
    {
      g_autofree char *keys = join_values (cs_policy_keys);
      g_set_error (error, CS_POLICY_ERROR, CS_POLICY_ERROR_KEY,
                   "unknown policy key '%s' (keys: %s)", key, keys);
      return FALSE;
    }
  for (int i = 0; knob->values[i] != NULL; i++)
    if (strcmp (knob->values[i], value) == 0)
      {
        *knob_field (policy, knob) = i;
        return TRUE;
      }
  if (knob->values == onoff_values)
    {
      if (strcmp (value, "true") == 0 || strcmp (value, "1") == 0)
        {
          *knob_field (policy, knob) = 1;
          return TRUE;
        }
      if (strcmp (value, "false") == 0 || strcmp (value, "0") == 0)
        {
          *knob_field (policy, knob) = 0;
          return TRUE;
        }
    }
  {
    g_autofree char *vals = join_values (knob->values);
    g_set_error (error, CS_POLICY_ERROR, CS_POLICY_ERROR_VALUE,
                 "unknown value '%s' for policy key '%s' (values: %s)", value, key, vals);
  }
  return FALSE;
}

/**
 * cs_policy_parse_assignment:
 * @policy: the policy to change
 * @assignment: "key=value" (spaces around '=' are not allowed)
 * @error: return location for a #CS_POLICY_ERROR
 *
 * Parses one `--policy` argument.  Errors: CS_POLICY_ERROR_KEY when there is no '=' or the key
 * is unknown, CS_POLICY_ERROR_VALUE for a bad value.
 * Returns: TRUE on success
 */
gboolean
cs_policy_parse_assignment (CsPolicy *policy, const char *assignment, GError **error)
{
  const char *eq;
  g_autofree char *key = NULL;

  g_return_val_if_fail (policy != NULL, FALSE);
  g_return_val_if_fail (assignment != NULL, FALSE);

  eq = strchr (assignment, '=');
  if (eq == NULL || eq == assignment)
    {
      g_autofree char *keys = join_values (cs_policy_keys);
      g_set_error (error, CS_POLICY_ERROR, CS_POLICY_ERROR_KEY,
                   "policy setting '%s' is not of the form key=value (keys: %s)",
                   assignment, keys);
      return FALSE;
    }
  key = g_strndup (assignment, (gsize) (eq - assignment));
  return cs_policy_set (policy, key, eq + 1, error);
}

/**
 * cs_policy_get:
 * @policy: a policy
 * @key: one of #cs_policy_keys
 *
 * Returns: (transfer none): the value name of @key ("native", "on", ...; for "executors" the
 * list, comma-separated, as an interned string), or NULL for an unknown key
 */
const char *
cs_policy_get (const CsPolicy *policy, const char *key)
{
  const PolicyKnob *knob;
  int v;

  g_return_val_if_fail (policy != NULL, NULL);
  g_return_val_if_fail (key != NULL, NULL);

  if (strcmp (key, "executors") == 0)
    return get_executors (policy);
  knob = find_knob (key);
  if (knob == NULL)
    return NULL;
  v = *(const int *) G_STRUCT_MEMBER_P ((gpointer) policy, knob->offset);
  if (knob->values == onoff_values)
    v = v ? 1 : 0;
  if (v < 0 || (gsize) v >= g_strv_length ((char **) knob->values))
    return NULL;
  return knob->values[v];
}

/**
 * cs_policy_values:
 * @key: a policy key
 *
 * Returns: (transfer none): the accepted values of @key, NULL-terminated, the first being the
 * enum value 0 (for "executors": the preset lists, the default first; any list of executor
 * names is accepted); NULL for an unknown key
 */
const char * const *
cs_policy_values (const char *key)
{
  const PolicyKnob *knob;

  g_return_val_if_fail (key != NULL, NULL);
  if (strcmp (key, "executors") == 0)
    return executor_presets;
  knob = find_knob (key);
  return knob ? knob->values : NULL;
}

/** cs_policy_ddp_bucket_mb: see cs-policy.h. */
double
cs_policy_ddp_bucket_mb (const CsPolicy *policy)
{
  g_return_val_if_fail (policy != NULL, -1);
  switch (policy->ddp_bucket)
    {
    case CS_DDP_BUCKET_25:
      return 25.0;
    case CS_DDP_BUCKET_1:
      return 1.0;
    case CS_DDP_BUCKET_0:
      return 0.0;
    default:
      return -1;
    }
}

/**
 * cs_policy_to_string:
 * @policy: a policy
 *
 * Returns: (transfer full): "matmul=native elementwise=f32 autocast=off fusion=consecutive
 * fuse-matmul=off fuse-linear=off redundant-casts=remove tf32=off executors=sdpa,...,python"
 * (every key, in #cs_policy_keys order; grad-reduce only when it is not native and
 * ddp-bucket-mb only when it is not off, so that the policy of a trace without collectives
 * reads as before the keys existed, rounding only when it is not fused, so that every
 * default policy reads as before issue 19, and attention only when it is not pattern, as
 * before issue 20)
 */
char *
cs_policy_to_string (const CsPolicy *policy)
{
  GString *s;

  g_return_val_if_fail (policy != NULL, NULL);

  s = g_string_new (NULL);
  for (guint i = 0; cs_policy_keys[i] != NULL; i++)
    {
      const char *v = cs_policy_get (policy, cs_policy_keys[i]);
      if (strcmp (cs_policy_keys[i], "grad-reduce") == 0 && policy->grad_reduce == CS_GRAD_REDUCE_NATIVE)
        continue;
      if (strcmp (cs_policy_keys[i], "ddp-bucket-mb") == 0 && policy->ddp_bucket == CS_DDP_BUCKET_OFF)
        continue;
      if (strcmp (cs_policy_keys[i], "rounding") == 0 && policy->rounding == CS_ROUNDING_FUSED)
        continue;
      if (strcmp (cs_policy_keys[i], "attention") == 0 && policy->attention == CS_ATTENTION_PATTERN)
        continue;
      g_string_append_printf (s, "%s%s=%s", i ? " " : "", cs_policy_keys[i], v ? v : "?");
    }
  return g_string_free (s, FALSE);
}

/**
 * cs_policy_equal:
 * @a: a policy
 * @b: another policy
 *
 * Returns: TRUE when every knob has the same value (on/off knobs compare as booleans)
 */
gboolean
cs_policy_equal (const CsPolicy *a, const CsPolicy *b)
{
  g_return_val_if_fail (a != NULL && b != NULL, FALSE);

  return a->matmul == b->matmul
         && a->elementwise == b->elementwise
         && a->autocast == b->autocast
         && a->fusion == b->fusion
         && !a->fuse_matmul == !b->fuse_matmul
         && !a->fuse_linear == !b->fuse_linear
         && a->redundant_casts == b->redundant_casts
         && a->rounding == b->rounding
         && !a->allow_tf32 == !b->allow_tf32
         && a->grad_reduce == b->grad_reduce
         && a->ddp_bucket == b->ddp_bucket
         && a->attention == b->attention
         && a->n_executors == b->n_executors
         && memcmp (a->executors, b->executors, MIN (a->n_executors, CS_N_EXECUTORS)) == 0;
}
