/* test-core-registry.c: the coverage test of the op registry (core/cs-ops-list.h).
 *
 * Walks every entry and checks each piece it declares, so that an op added without one fails
 * here (not at GPU run time or on a user's trace):
 * - a row that says DIFF_VJP has a rule in grad's table and the other way round; every such
 *   VJP agrees with central finite differences of the f64 CPU reference (a unary or binary
 *   elementwise prim is called on its own; every other op has an example call below);
 * - every unary elementwise prim with a CPU formula agrees with an independent libm formula
 *   (tests/test-op-formulas.h) in f64 mode exactly and in exact mode for f32 and bf16 tensors
 *   within their rounding; every fusible unary prim has a formula and a CUDA expression;
 * - every binary and ternary prim with a formula agrees with an independent f64 formula
 *   (test-op-formulas.h) on f64 tensors exactly, on f32 and bf16 tensors in exact mode within
 *   their rounding, on integer and bool tensors exactly (truncating division, the remainder's
 *   sign, bitwise ops, bool comparisons; an integer division by zero is an error), and is
 *   refused on the dtypes its flags exclude; every
 *   fusible one has a formula whose pieces agree with its flags;
 * - every op that LOWERS_TO a prim decomposes to exactly that prim, computing bf16 in f32;
 * - the five ltorch ops added with the registry (log1p, expm1, sinh, cosh, softplus) run end
 *   to end: meta, decomposition, VJP by finite differences, CPU values against hand values.
 * - every argument schema names CS_ARG_NAMES entries (a keyword of Python identifier form,
 *   each keyword once in the list), no schema names an argument twice, a positional argument
 *   without a default follows no positional one with a default (Python's rule), and every
 *   CS_ARG_NAMES entry is an argument of some schema (no stale names).
 * The CUDA side (every fusible op's emitter compiled by NVRTC, the GPU sweep) is
 * tests/test-kernels-registry.c.
 */
#include "cs-config.h"

#include <float.h>
#include <math.h>
#include <string.h>

#include "cs-decompose.h"
#include "cs-grad.h"
#include "cs-meta.h"
#include "cs-ops.h"
#include "cs-parse.h"
#include "cs-pipeline.h"
#include "cs-ref.h"
#include "cs-tensor.h"

#include "test-fd.h"
#include "test-op-formulas.h"

#define N_SAMPLES 9

static void
check_fd (const char *text, double lo, double hi)
{
  check_fd_full (text, lo, hi, 1e-6, NULL);
}

/* ------------------------------------------------------------------------------------------ */
/* VJPs                                                                                        */

/* Example calls of the differentiable ops that are not unary/binary elementwise prims. */
typedef struct
{
  CsOpId      id;
  const char *text;
  const char *only;      /* the one input to differentiate (integer index inputs), or NULL */
} Example;

#define X34 "def computation(x):\n  # x: \"cuda:0 f64[3, 4]\"\n"

static const Example examples[] = {
  { CS_OP_PRIM_CONVERT_ELEMENT_TYPE, X34
    "  t0 = prims.convert_element_type(x, dtypes.float32)  # t0: \"cuda:0 f32[3, 4]\"\n  return (t0,)\n", NULL },
  { CS_OP_PRIM_BROADCAST_IN_DIM, "def computation(b):\n  # b: \"cuda:0 f64[4]\"\n"
    "  t0 = prims.broadcast_in_dim(b, (3, 4), (1,))  # t0: \"cuda:0 f64[3, 4]\"\n  return (t0,)\n", NULL },
  { CS_OP_PRIM_RESHAPE, X34 "  t0 = prims.reshape(x, (2, 6))  # t0: \"cuda:0 f64[2, 6]\"\n  return (t0,)\n", NULL },
  { CS_OP_PRIM_TRANSPOSE, X34 "  t0 = prims.transpose(x, (1, 0))  # t0: \"cuda:0 f64[4, 3]\"\n  return (t0,)\n", NULL },
  { CS_OP_PRIM_SQUEEZE, "def computation(x):\n  # x: \"cuda:0 f64[3, 1, 4]\"\n"
    "  t0 = prims.squeeze(x, (1,))  # t0: \"cuda:0 f64[3, 4]\"\n  return (t0,)\n", NULL },
  { CS_OP_PRIM_SLICE_PRIM, X34
    "  t0 = prims.slice_prim(x, [1, 0], [3, 4], [1, 2])  # t0: \"cuda:0 f64[2, 2]\"\n  return (t0,)\n", NULL },
  { CS_OP_PRIM_PAD, X34
    "  t0 = prims.pad(x, 0.0, [(1, 0, 0), (0, 2, 1)])  # t0: \"cuda:0 f64[4, 9]\"\n  return (t0,)\n", NULL },
  { CS_OP_PRIM_CAT, X34 "  t0 = prims.cat([x, x], 1)  # t0: \"cuda:0 f64[3, 8]\"\n  return (t0,)\n", NULL },
  { CS_OP_PRIM_TAKE, "def computation(w, i):\n  # w: \"cuda:0 f64[4, 3]\"\n  # i: \"cuda:0 i64[5]\"\n"
    "  t0 = prims.take(w, i, 0)  # t0: \"cuda:0 f64[5, 3]\"\n  return (t0,)\n", "w" },
  { CS_OP_PRIM_TAKE_ALONG_AXIS, "def computation(w, i):\n  # w: \"cuda:0 f64[4, 3]\"\n  # i: \"cuda:0 i64[4, 2]\"\n"
    "  t0 = prims.take_along_axis(w, i, 1)  # t0: \"cuda:0 f64[4, 2]\"\n  return (t0,)\n", "w" },
  { CS_OP_PRIM_SHALLOW_COPY, X34 "  t0 = prims.shallow_copy(x)  # t0: \"cuda:0 f64[3, 4]\"\n"
    "  t1 = prims.mul(t0, x)  # t1: \"cuda:0 f64[3, 4]\"\n  return (t1,)\n", NULL },
  { CS_OP_PRIM_CLONE, X34 "  t0 = prims.clone(x)  # t0: \"cuda:0 f64[3, 4]\"\n"
    "  t1 = prims.mul(t0, x)  # t1: \"cuda:0 f64[3, 4]\"\n  return (t1,)\n", NULL },
  { CS_OP_PRIM_STRIDE_ORDER, X34 "  t0 = prims.stride_order(x, (0, 1))  # t0: \"cuda:0 f64[3, 4]\"\n"
    "  t1 = prims.mul(t0, x)  # t1: \"cuda:0 f64[3, 4]\"\n  return (t1,)\n", NULL },
  { CS_OP_PRIM_WHERE, "def computation(x, y):\n  # x: \"cuda:0 f64[3, 4]\"\n  # y: \"cuda:0 f64[3, 4]\"\n"
    "  t0 = prims.gt(x, 0.0)  # t0: \"cuda:0 b8[3, 4]\"\n"
    "  t1 = prims.where(t0, x, y)  # t1: \"cuda:0 f64[3, 4]\"\n  return (t1,)\n", NULL },
  { CS_OP_PRIM_SUM, X34 "  t0 = prims.sum(x, (1,))  # t0: \"cuda:0 f64[3]\"\n  return (t0,)\n", NULL },
  { CS_OP_PRIM_AMAX, X34 "  t0 = prims.amax(x, (0,))  # t0: \"cuda:0 f64[4]\"\n  return (t0,)\n", NULL },
  { CS_OP_PRIM_VAR_MEAN, X34 "  (t0, t1) = prims.var_mean(x, (1,), correction=1)\n"
    "  t2 = prims.mul(t0, t1)  # t2: \"cuda:0 f64[3]\"\n  return (t2,)\n", NULL },
  { CS_OP_PRIM_MATMUL, "def computation(a, b):\n  # a: \"cuda:0 f64[3, 4]\"\n  # b: \"cuda:0 f64[4, 2]\"\n"
    "  t0 = prims.matmul(a, b)  # t0: \"cuda:0 f64[3, 2]\"\n  return (t0,)\n", NULL },
  { CS_OP_PRIM_LINEAR, "def computation(x, w, b):\n  # x: \"cuda:0 f64[3, 4]\"\n  # w: \"cuda:0 f64[5, 4]\"\n"
    "  # b: \"cuda:0 f64[5]\"\n  t0 = prims.linear(x, w, b)  # t0: \"cuda:0 f64[3, 5]\"\n  return (t0,)\n", NULL },
  { CS_OP_LTORCH_SUM, X34 "  t0 = ltorch.sum(x, 1, True, dtype=None)  # t0: \"cuda:0 f64[3, 1]\"\n  return (t0,)\n", NULL },
  { CS_OP_LTORCH_SILU, X34 "  t0 = ltorch.silu(x, False)  # t0: \"cuda:0 f64[3, 4]\"\n  return (t0,)\n", NULL },
  { CS_OP_LTORCH__SOFTMAX, X34 "  t0 = ltorch._softmax(x, -1, dtype=None)  # t0: \"cuda:0 f64[3, 4]\"\n  return (t0,)\n", NULL },
  { CS_OP_LTORCH_LOG_SOFTMAX, X34 "  t0 = ltorch.log_softmax(x, 0, dtype=None)  # t0: \"cuda:0 f64[3, 4]\"\n  return (t0,)\n", NULL },
  /* thunder/distributed/prims.py, a world of one (the CPU reference's collectives of one rank
   * give their input back): all_gather and reduce_scatter transpose each other, all_reduce of a
   * sum is its own, wait and update_bucket_view pass the cotangent, synchronize divides by the
   * group size and all-reduces; a mul after each keeps the gradient from being the identity */
#define PG "_torch__C__distributed_c10d_ProcessGroup_0"
#define DP "thunder.distributed.prims."
  { CS_OP_DIST_ALL_GATHER, X34 "  t0 = " DP "all_gather(x, " PG ", True)  # t0: \"FUTURE cuda:0 f64[3, 4]\"\n"
    "  t1 = " DP "wait(t0)  # t1: \"cuda:0 f64[3, 4]\"\n"
    "  t2 = prims.mul(t1, x)  # t2: \"cuda:0 f64[3, 4]\"\n  return (t2,)\n", NULL },
  { CS_OP_DIST_REDUCE_SCATTER, X34 "  t0 = " DP "reduce_scatter(x, _DistributedReduceOps_SUM_1, " PG ", False, dim=1)  # t0: \"cuda:0 f64[3, 4]\"\n"
    "  t1 = prims.mul(t0, x)  # t1: \"cuda:0 f64[3, 4]\"\n  return (t1,)\n", NULL },
  { CS_OP_DIST_ALL_REDUCE, X34 "  t0 = " DP "all_reduce(x, _DistributedReduceOps_SUM_1, group=" PG ", do_async=True, skip_clone=True)  # t0: \"FUTURE cuda:0 f64[3, 4]\"\n"
    "  t1 = " DP "wait(t0)  # t1: \"cuda:0 f64[3, 4]\"\n"
    "  t2 = prims.mul(t1, x)  # t2: \"cuda:0 f64[3, 4]\"\n  return (t2,)\n", NULL },
  { CS_OP_DIST_WAIT, X34 "  t0 = " DP "all_reduce(x, _DistributedReduceOps_AVG_1, " PG ", True)  # t0: \"FUTURE cuda:0 f64[3, 4]\"\n"
    "  t1 = " DP "wait(t0)  # t1: \"cuda:0 f64[3, 4]\"\n"
    "  t2 = prims.exp(t1)  # t2: \"cuda:0 f64[3, 4]\"\n  return (t2,)\n", NULL },
  { CS_OP_DIST_UPDATE_BUCKET_VIEW, X34 "  t0 = " DP "update_bucket_view(x, 0, 'bucket')  # t0: \"cuda:0 f64[3, 4]\"\n"
    "  t1 = prims.mul(t0, x)  # t1: \"cuda:0 f64[3, 4]\"\n  return (t1,)\n", NULL },
  { CS_OP_DIST_SYNCHRONIZE, "def computation(x, w):\n  # x: \"cuda:0 f64[3, 4]\"\n  # w: \"cuda:0 f64[4, 2]\"\n"
    "  t0 = " DP "synchronize(w, " PG ", _DistParallelType_REPLICATED_1)  # t0: \"cuda:0 f64[4, 2]\"\n"
    "  t1 = prims.matmul(x, t0)  # t1: \"cuda:0 f64[3, 2]\"\n  return (t1,)\n", NULL },
  /* broadcast of one rank is the identity; pack is the 1-d concatenation of the flattened
   * tensors, unpack its slices back (the second output unused: its cotangent is zeros), the
   * FSDP forms the same at world_size 1 */
  { CS_OP_DIST_BROADCAST, X34 "  t0 = " DP "broadcast(x, 0, " PG ", False)  # t0: \"cuda:0 f64[3, 4]\"\n"
    "  t1 = prims.mul(t0, x)  # t1: \"cuda:0 f64[3, 4]\"\n  return (t1,)\n", NULL },
#define XY "def computation(x, y):\n  # x: \"cuda:0 f64[3, 4]\"\n  # y: \"cuda:0 f64[2, 3]\"\n"
  { CS_OP_DIST_PACK, XY "  t0 = " DP "pack([x, y], 'bucket')  # t0: \"cuda:0 f64[18]\"\n"
    "  t1 = prims.mul(t0, t0)  # t1: \"cuda:0 f64[18]\"\n  return (t1,)\n", NULL },
  { CS_OP_DIST_PACK_FOR_FSDP, XY "  t0 = " DP "pack_for_fsdp([x, y], 1, 'scatter')  # t0: \"cuda:0 f64[18]\"\n"
    "  t1 = prims.exp(t0)  # t1: \"cuda:0 f64[18]\"\n  return (t1,)\n", NULL },
#define BXY "def computation(b, x, y):\n  # b: \"cuda:0 f64[18]\"\n  # x: \"cuda:0 f64[3, 4]\"\n  # y: \"cuda:0 f64[2, 3]\"\n"
  { CS_OP_DIST_UNPACK, BXY "  [t0, t1] = " DP "unpack(b, [x, y], 'bucket')\n"
    "  t2 = prims.mul(t0, x)  # t2: \"cuda:0 f64[3, 4]\"\n  return (t2,)\n", NULL },
  { CS_OP_DIST_UNPACK_FOR_FSDP, BXY "  [t0, t1] = " DP "unpack_for_fsdp(b, [x, y], 1, 'gather')\n"
    "  t2 = prims.exp(t0)  # t2: \"cuda:0 f64[3, 4]\"\n  t3 = prims.mul(t1, y)  # t3: \"cuda:0 f64[2, 3]\"\n"
    "  return (t2, t3)\n", NULL },
  /* the tensor-parallel synchronizes of a world of one (the other layer types: test-core-dist) */
  { CS_OP_DIST_SYNCHRONIZE_TENSOR_PARALLEL_OUTPUT, X34 "  t0 = " DP "synchronize_tensor_parallel_output(x, " PG
    ", _TensorParallelLayerType_COLUMN_PARALLEL_LINEAR_1)  # t0: \"cuda:0 f64[3, 4]\"\n"
    "  t1 = prims.mul(t0, x)  # t1: \"cuda:0 f64[3, 4]\"\n  return (t1,)\n", NULL },
  { CS_OP_DIST_SYNCHRONIZE_TENSOR_PARALLEL_INPUT, X34 "  t0 = " DP "synchronize_tensor_parallel_input(x, " PG
    ", _TensorParallelLayerType_COLUMN_PARALLEL_LINEAR_1)  # t0: \"cuda:0 f64[3, 4]\"\n"
    "  t1 = prims.exp(t0)  # t1: \"cuda:0 f64[3, 4]\"\n  return (t1,)\n", NULL },
  { CS_OP_LTORCH_SPLIT, X34 "  (t0, t1) = ltorch.split(x, [1, 3], 1)\n"
    "  t2 = ltorch.sum(t1, 1, True, dtype=None)  # t2: \"cuda:0 f64[3, 1]\"\n"
    "  t3 = prims.mul(t0, t2)  # t3: \"cuda:0 f64[3, 1]\"\n  return (t3,)\n", NULL },
  { CS_OP_LTORCH_EMBEDDING, "def computation(i, w):\n  # i: \"cuda:0 i64[2, 3]\"\n  # w: \"cuda:0 f64[4, 3]\"\n"
    "  t0 = ltorch.embedding(i, w, None, None, 2.0, False, False)  # t0: \"cuda:0 f64[2, 3, 3]\"\n"
    "  return (t0,)\n", "w" },
};

/* An example call of @op, or NULL when there is none: generated for elementwise prims (inputs
 * in [lo, hi] of the op's formula, else [0.5, 1.5]), else from examples[]. */
static char *
example_for (const CsOp *op, double *lo, double *hi, const char **only)
{
  const TestFormula *f = test_formula (op->name);

  *lo = f ? f->lo : 0.5;
  *hi = f ? f->hi : 1.5;
  *only = NULL;
  if (op->category == CS_OP_CAT_ELEMENTWISE && cs_op_has_tag (op, CS_OP_TAG_PRIM)
      && cs_op_has_tag (op, CS_OP_TAG_UNARY))
    return g_strdup_printf (X34 "  t0 = %s(x)  # t0: \"cuda:0 f64[3, 4]\"\n  return (t0,)\n", op->name);
  if (op->category == CS_OP_CAT_ELEMENTWISE && cs_op_has_tag (op, CS_OP_TAG_PRIM)
      && cs_op_has_tag (op, CS_OP_TAG_BINARY))
    return g_strdup_printf ("def computation(x, y):\n  # x: \"cuda:0 f64[3, 4]\"\n  # y: \"cuda:0 f64[3, 4]\"\n"
                            "  t0 = %s(x, y)  # t0: \"cuda:0 f64[3, 4]\"\n  return (t0,)\n", op->name);
  for (gsize i = 0; i < G_N_ELEMENTS (examples); i++)
    if (examples[i].id == op->id)
      {
        *lo = -1.0;
        *hi = 1.0;
        *only = examples[i].only;
        return g_strdup (examples[i].text);
      }
  return NULL;
}

static void
test_vjp_table (void)
{
  guint n = 0;

  for (guint id = 0; id < CS_N_OPS; id++)
    {
      const CsOp *op = cs_op_get (id);

      if (cs_op_semantic (op) != op)
        continue;   /* an executor name or alias is differentiated as the op it implements */
      if ((op->diff == CS_OP_DIFF_VJP) != cs_grad_has_rule (op))
        g_error ("%s: its row says %s but grad's rule table %s", op->name,
                 op->diff == CS_OP_DIFF_VJP ? "DIFF_VJP" : "no VJP",
                 cs_grad_has_rule (op) ? "has a rule" : "has none");
      if (op->diff == CS_OP_DIFF_VJP && op->diff == CS_OP_DIFF_CONST)
        g_error ("%s: both a VJP and constant", op->name);
      n += op->diff == CS_OP_DIFF_VJP;
    }
  g_test_message ("%u ops with a VJP rule", n);
  g_assert_cmpuint (n, >=, 40);
}

static void
test_vjp_fd (void)
{
  guint n = 0;

  for (guint id = 0; id < CS_N_OPS; id++)
    {
      const CsOp *op = cs_op_get (id);
      const char *only;
      const char *names[2] = { NULL, NULL };
      double lo, hi;
      g_autofree char *text = NULL;

      if (op->diff != CS_OP_DIFF_VJP)
        continue;
      text = example_for (op, &lo, &hi, &only);
      if (text == NULL)
        g_error ("%s has a VJP rule but no example call to check it with (add one to examples[])",
                 op->name);
      g_assert_nonnull (strstr (text, op->name));
      g_test_message ("%s", op->name);
      names[0] = only;
      check_fd_full (text, lo, hi, 1e-6, only ? names : NULL);
      n++;
    }
  g_assert_cmpuint (n, >=, 40);
}

/* ------------------------------------------------------------------------------------------ */
/* CPU reference against the independent formulas                                              */

/* Runs `t0 = NAME(x)` on @x (a 1-d tensor) in @mode; returns the output tensor. */
static CsTensor *
run_unary (const char *name, CsTensor *x, CsDtype out_dtype, CsRefMode mode)
{
  g_autofree char *text = g_strdup_printf ("def computation(x):\n  # x: \"cuda:0 %s[%d]\"\n"
                                           "  t0 = %s(x)  # t0: \"cuda:0 %s[%d]\"\n  return (t0,)\n",
                                           cs_dtype_short_name (x->dtype), N_SAMPLES, name,
                                           cs_dtype_short_name (out_dtype), N_SAMPLES);
  g_autoptr(CsTrace) t = fd_parse (text);
  g_autoptr(GHashTable) env = cs_ref_env_new ();
  g_autoptr(GPtrArray) outs = NULL;
  g_autoptr(GError) error = NULL;

  cs_ref_env_insert (env, "x", x);
  g_assert_true (cs_ref_run_env (t, env, mode, 0, &outs, NULL, NULL, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (outs->len, ==, 1);
  return cs_tensor_ref (outs->pdata[0]);
}

static CsTensor *
samples (const TestFormula *f, CsDtype dtype)
{
  int64_t n = N_SAMPLES;
  g_autoptr(GError) error = NULL;
  CsTensor *x = cs_tensor_new (dtype, &n, 1, &error);

  g_assert_no_error (error);
  for (int i = 0; i < N_SAMPLES; i++)
    {
      double v = f->lo + (f->hi - f->lo) * i / (N_SAMPLES - 1);
      cs_tensor_set_f64 (x, i, f->int_only ? nearbyint (v) : v);
    }
  return x;
}

static void
test_ref_formulas (void)
{
  guint n = 0;

  for (guint id = 0; id < CS_N_OPS; id++)
    {
      const CsOp *op = cs_op_get (id);
      const TestFormula *f;
      CsDtype odt;

      if (op->ew1 == NULL)
        continue;
      f = test_formula (op->name);
      if (f == NULL)
        g_error ("%s has a formula but test-op-formulas.h has no independent one for it", op->name);
      if (!(op->exec & CS_OP_EXEC_CPU))
        {
          if (f->f != NULL)   /* the formula table and the registry agree: CUDA only */
            g_error ("%s: no CPU formula in the registry, but test-op-formulas.h has one", op->name);
          continue;
        }
      if (f->f == NULL)
        g_error ("%s: the registry has a CPU formula, test-op-formulas.h none", op->name);
      odt = op->promo == CS_PROMO_ALWAYS_BOOL ? CS_DTYPE_B8 : CS_DTYPE_F64;
      if (f->int_only)
        {
          g_autoptr(CsTensor) x = samples (f, CS_DTYPE_I64);
          g_autoptr(CsTensor) y = run_unary (op->name, x, CS_DTYPE_I64, CS_REF_F64);

          for (int i = 0; i < N_SAMPLES; i++)
            g_assert_cmpfloat (cs_tensor_get_f64 (y, i), ==, f->f (cs_tensor_get_f64 (x, i)));
          n++;
          continue;
        }
      {
        /* f64: the libm value itself */
        g_autoptr(CsTensor) x = samples (f, CS_DTYPE_F64);
        g_autoptr(CsTensor) y = run_unary (op->name, x, odt, CS_REF_F64);

        for (int i = 0; i < N_SAMPLES; i++)
          {
            double xv = cs_tensor_get_f64 (x, i), want = f->f (xv), got = cs_tensor_get_f64 (y, i);
            if (got != want)
              g_error ("%s(%.17g) = %.17g in f64, libm says %.17g", op->name, xv, got, want);
          }
      }
      {
        /* f32 (exact mode computes in f32): within a few f32 ulps of the f64 value */
        g_autoptr(CsTensor) x = samples (f, CS_DTYPE_F32);
        g_autoptr(CsTensor) y = run_unary (op->name, x, odt == CS_DTYPE_B8 ? odt : CS_DTYPE_F32,
                                           CS_REF_EXACT);

        for (int i = 0; i < N_SAMPLES; i++)
          {
            double xv = cs_tensor_get_f64 (x, i), want = f->f (xv), got = cs_tensor_get_f64 (y, i);
            if (fabs (got - want) > 8 * FLT_EPSILON * MAX (fabs (want), 1.0))
              g_error ("%s(%.9g) = %.9g in f32, libm says %.9g", op->name, xv, got, want);
          }
      }
      {
        /* bf16: the f32 value rounded to bf16 (8 significant bits) */
        g_autoptr(CsTensor) x = samples (f, CS_DTYPE_BF16);
        g_autoptr(CsTensor) y = run_unary (op->name, x, odt == CS_DTYPE_B8 ? odt : CS_DTYPE_BF16,
                                           CS_REF_EXACT);

        for (int i = 0; i < N_SAMPLES; i++)
          {
            double xv = cs_tensor_get_f64 (x, i), want = f->f (xv), got = cs_tensor_get_f64 (y, i);
            if (fabs (got - want) > ldexp (1.0, -8) * MAX (fabs (want), 1e-3))
              g_error ("%s(%.4g) = %.4g in bf16, libm says %.6g", op->name, xv, got, want);
          }
      }
      n++;
    }
  g_test_message ("%u unary prims checked against libm", n);
  g_assert_cmpuint (n, >=, 35);
}

/* Runs `t0 = NAME(x0, ..., x<n-1>)` on 1-d tensors of N_SAMPLES in @mode; returns the output
 * tensor, or NULL with @error set when the reference refuses. */
static CsTensor *
run_nary (const char *name, CsTensor **xs, guint n, CsDtype out_dtype, CsRefMode mode,
          GError **error)
{
  g_autoptr(GString) text = g_string_new ("def computation(");
  g_autoptr(CsTrace) t = NULL;
  g_autoptr(GHashTable) env = cs_ref_env_new ();
  g_autoptr(GPtrArray) outs = NULL;

  for (guint k = 0; k < n; k++)
    g_string_append_printf (text, "%sx%u", k ? ", " : "", k);
  g_string_append (text, "):\n");
  for (guint k = 0; k < n; k++)
    g_string_append_printf (text, "  # x%u: \"cuda:0 %s[%d]\"\n", k, cs_dtype_short_name (xs[k]->dtype),
                            N_SAMPLES);
  g_string_append_printf (text, "  t0 = %s(", name);
  for (guint k = 0; k < n; k++)
    g_string_append_printf (text, "%sx%u", k ? ", " : "", k);
  g_string_append_printf (text, ")  # t0: \"cuda:0 %s[%d]\"\n  return (t0,)\n",
                          cs_dtype_short_name (out_dtype), N_SAMPLES);
  t = fd_parse (text->str);
  for (guint k = 0; k < n; k++)
    {
      g_autofree char *nm = g_strdup_printf ("x%u", k);
      cs_ref_env_insert (env, nm, xs[k]);
    }
  if (!cs_ref_run_env (t, env, mode, 0, &outs, NULL, NULL, error))
    return NULL;
  g_assert_cmpuint (outs->len, ==, 1);
  return cs_tensor_ref (outs->pdata[0]);
}

/* TRUE when @got is @want: equal, both NaN, or within @tol of a finite @want. */
static gboolean
near (double got, double want, double tol)
{
  if (isnan (want))
    return isnan (got);
  if (isinf (want))
    return got == want;
  return fabs (got - want) <= tol;
}

/* One check of a binary/ternary prim: operands of @kind in @dtype, in @mode; every output
 * within @rel * max(|want|, @floor) of the independent formula (0: exactly). */
static void
check_nary (const CsOp *op, const TestFormulaN *f, guint kind, CsDtype dtype, CsRefMode mode,
            double rel, double floor_)
{
  CsTensor *xs[3] = { NULL, NULL, NULL };
  g_autoptr(CsTensor) y = NULL;
  g_autoptr(GError) error = NULL;
  gboolean where = (op->ew3 && (op->ew3->flags & CS_EW_PREDICATE));
  CsDtype odt = op->promo == CS_PROMO_ALWAYS_BOOL ? CS_DTYPE_B8 : dtype;
  double (*fn) (const double *) = kind != TF_FLOAT && f->fi ? f->fi : f->f;

  for (guint k = 0; k < f->n; k++)
    {
      int64_t n = N_SAMPLES;
      xs[k] = cs_tensor_new (k == 0 && where ? CS_DTYPE_B8 : dtype, &n, 1, &error);
      g_assert_no_error (error);
      for (guint e = 0; e < N_SAMPLES; e++)
        cs_tensor_set_f64 (xs[k], e, test_sample_n (f, k, e, N_SAMPLES, kind));
    }
  y = run_nary (op->name, xs, f->n, odt, mode, &error);
  if (y == NULL)
    g_error ("%s on %s: %s", op->name, cs_dtype_short_name (dtype), error->message);
  g_assert_cmpint (y->dtype, ==, odt);
  for (guint e = 0; e < N_SAMPLES; e++)
    {
      double x[3] = { 0, 0, 0 }, want, got = cs_tensor_get_f64 (y, e);

      for (guint k = 0; k < f->n; k++)
        x[k] = cs_tensor_get_f64 (xs[k], e);
      want = fn (x);
      if (odt == CS_DTYPE_B8)
        want = want != 0;
      if (!near (got, want, rel * MAX (fabs (want), floor_)))
        g_error ("%s(%.9g, %.9g%s) = %.17g on %s (%s mode), the independent formula says %.17g",
                 op->name, x[0], x[1], f->n == 3 ? ", ..." : "", got, cs_dtype_short_name (dtype),
                 mode == CS_REF_F64 ? "f64" : "exact", want);
    }
  for (guint k = 0; k < f->n; k++)
    cs_tensor_unref (xs[k]);
}

/* The CPU reference refuses @op on @dtype operands (a float-only prim on integers, an
 * integer-only one on floats) with a dtype error. */
static void
check_refuses (const CsOp *op, const TestFormulaN *f, CsDtype dtype)
{
  CsTensor *xs[3] = { NULL, NULL, NULL };
  g_autoptr(GError) error = NULL;
  CsTensor *y;

  for (guint k = 0; k < f->n; k++)
    {
      int64_t n = N_SAMPLES;
      xs[k] = cs_tensor_new (dtype, &n, 1, &error);
      g_assert_no_error (error);
      for (guint e = 0; e < N_SAMPLES; e++)
        cs_tensor_set_f64 (xs[k], e, 1.0);
    }
  y = run_nary (op->name, xs, f->n, op->promo == CS_PROMO_ALWAYS_BOOL ? CS_DTYPE_B8 : dtype,
                CS_REF_F64, &error);
  if (y != NULL)
    g_error ("%s ran on %s operands; its formula's flags say it takes none", op->name,
             cs_dtype_short_name (dtype));
  g_assert_error (error, CS_REF_ERROR, CS_REF_ERROR_DTYPE);
  for (guint k = 0; k < f->n; k++)
    cs_tensor_unref (xs[k]);
}

/* An integer division by zero (div, fmod, remainder on integers: Python's ZeroDivisionError)
 * is refused with a value error; @f says which prims divide (TestFormulaN.nonzero). */
static void
check_zero_divisor (const CsOp *op, const TestFormulaN *f)
{
  CsTensor *xs[2] = { NULL, NULL };
  g_autoptr(GError) error = NULL;
  CsTensor *y;

  for (guint k = 0; k < 2; k++)
    {
      int64_t n = N_SAMPLES;
      xs[k] = cs_tensor_new (CS_DTYPE_I64, &n, 1, &error);
      g_assert_no_error (error);
      for (guint e = 0; e < N_SAMPLES; e++)
        cs_tensor_set_f64 (xs[k], e, k == 1 && e == 3 ? 0.0 : 5.0);
    }
  y = run_nary (op->name, xs, 2, CS_DTYPE_I64, CS_REF_F64, &error);
  if (y != NULL)
    g_error ("%s: an integer division by zero gave %g, not an error", op->name,
             cs_tensor_get_f64 (y, 3));
  g_assert_error (error, CS_REF_ERROR, CS_REF_ERROR_VALUE);
  for (guint k = 0; k < 2; k++)
    cs_tensor_unref (xs[k]);
}

/* Every binary and ternary prim with a formula against the independent formulas of
 * test-op-formulas.h: f64 tensors in f64 mode exactly; f32 and bf16 tensors in exact mode
 * (f32 math) within their rounding; integer and bool tensors exactly (integer division
 * truncates, fmod has the dividend's sign, remainder the divisor's, comparisons give bool);
 * and the dtypes a formula's flags exclude are refused. */
static void
test_ref_formulas_n (void)
{
  guint n = 0;

  for (guint id = 0; id < CS_N_OPS; id++)
    {
      const CsOp *op = cs_op_get (id);
      const TestFormulaN *f;
      guint flags;

      if (op->ew2 == NULL && op->ew3 == NULL)
        continue;
      flags = op->ew2 ? op->ew2->flags : op->ew3->flags;
      f = test_formula_n (op->name);
      if (f == NULL)
        g_error ("%s has a formula but test-op-formulas.h has no independent one for it", op->name);
      g_assert_cmpuint (f->n, ==, op->ew2 ? 2 : 3);
      if (!(op->exec & CS_OP_EXEC_CPU))
        g_error ("%s: its formula has no CPU side", op->name);
      if ((flags & CS_EW_INT_ONLY) && (f->kinds & TF_FLOAT))
        g_error ("%s: the registry says integers only, the independent formula takes floats", op->name);
      if ((flags & CS_EW_FLOAT_ONLY) && (f->kinds & (TF_INT | TF_BOOL)))
        g_error ("%s: the registry says floats only, the independent formula takes integers", op->name);
      if (f->kinds & TF_FLOAT)
        {
          check_nary (op, f, TF_FLOAT, CS_DTYPE_F64, CS_REF_F64, 0, 0);
          check_nary (op, f, TF_FLOAT, CS_DTYPE_F64, CS_REF_EXACT, 0, 0);
          check_nary (op, f, TF_FLOAT, CS_DTYPE_F32, CS_REF_EXACT, 8 * FLT_EPSILON, 1.0);
          check_nary (op, f, TF_FLOAT, CS_DTYPE_BF16, CS_REF_EXACT, ldexp (1.0, -8), 1e-3);
        }
      if (f->kinds & TF_INT)
        {
          check_nary (op, f, TF_INT, CS_DTYPE_I64, CS_REF_F64, 0, 0);
          check_nary (op, f, TF_INT, CS_DTYPE_I32, CS_REF_EXACT, 0, 0);
        }
      if ((f->kinds & TF_INT) && f->nonzero)
        check_zero_divisor (op, f);
      if (f->kinds & TF_BOOL)
        check_nary (op, f, TF_BOOL, CS_DTYPE_B8, CS_REF_F64, 0, 0);
      if (flags & CS_EW_FLOAT_ONLY)
        check_refuses (op, f, CS_DTYPE_I64);
      if (flags & CS_EW_INT_ONLY)
        check_refuses (op, f, CS_DTYPE_F32);
      n++;
    }
  for (gsize i = 0; i < G_N_ELEMENTS (test_formulas_n); i++)
    {
      const CsOp *op = cs_op_lookup (test_formulas_n[i].name);
      if (op->ew2 == NULL && op->ew3 == NULL)
        g_error ("test-op-formulas.h has %s, the registry no formula for it", test_formulas_n[i].name);
    }
  g_test_message ("%u binary and ternary prims checked against independent formulas", n);
  g_assert_cmpuint (n, >=, 24);
}

/* Every fusible unary elementwise prim has a formula the CUDA emitter can use; every formula
 * with a CPU side has both precisions. */
static void
test_formula_coverage (void)
{
  for (guint id = 0; id < CS_N_OPS; id++)
    {
      const CsOp *op = cs_op_get (id);

      if (op->category != CS_OP_CAT_ELEMENTWISE || !cs_op_has_tag (op, CS_OP_TAG_PRIM)
          || !cs_op_has_tag (op, CS_OP_TAG_UNARY))
        continue;
      if (cs_op_has_tag (op, CS_OP_TAG_FUSIBLE) && op->id != CS_OP_PRIM_IMAG
          && (op->ew1 == NULL || !(op->exec & CS_OP_EXEC_CUDA)))
        g_error ("%s is fusible but its row has no CUDA formula", op->name);
      if (op->ew1 && (op->ew1->f64 == NULL) != (op->ew1->f32 == NULL))
        g_error ("%s: its formula has one CPU precision but not the other", op->name);
    }
}

/* Every fusible binary and ternary elementwise prim has a formula, with a CUDA side (the
 * shifts: CPU only); its CPU side has what its flags say: both float precisions and no integer
 * function (float only), the integer function alone (integers only), or both precisions with
 * an optional integer function; a selection (where) has no f32 function, a comparison computes
 * in its operands' C type.  The two non-fusible binary prims (py_floordiv, zeta) have none. */
static void
test_formula_coverage_n (void)
{
  for (guint id = 0; id < CS_N_OPS; id++)
    {
      const CsOp *op = cs_op_get (id);
      gboolean bin = cs_op_has_tag (op, CS_OP_TAG_BINARY), ter = cs_op_has_tag (op, CS_OP_TAG_TERNARY);

      if (op->category != CS_OP_CAT_ELEMENTWISE || !cs_op_has_tag (op, CS_OP_TAG_PRIM) || !(bin || ter))
        {
          if (op->ew2 || op->ew3)
            g_error ("%s has a binary/ternary formula but is no binary/ternary elementwise prim", op->name);
          continue;
        }
      if ((bin && op->ew3) || (ter && op->ew2))
        g_error ("%s: its formula has the wrong number of operands", op->name);
      if (!cs_op_has_tag (op, CS_OP_TAG_FUSIBLE))
        {
          if (op->ew2 || op->ew3)
            g_error ("%s has a formula but is not fusible (tag it)", op->name);
          continue;
        }
      if (op->ew2 == NULL && op->ew3 == NULL)
        g_error ("%s is fusible but its row has no formula", op->name);
      if (!(op->exec & CS_OP_EXEC_CUDA) && id != CS_OP_PRIM_BITWISE_LEFT_SHIFT
          && id != CS_OP_PRIM_BITWISE_RIGHT_SHIFT)
        g_error ("%s is fusible but its formula has no CUDA expression", op->name);
      if (op->ew2)
        {
          const CsEwBinary *f = op->ew2;

          if (f->flags & CS_EW_INT_ONLY)
            {
              if (f->f64 || f->f32 || !f->i64 || f->cuda_f32 || f->cuda_f64)
                g_error ("%s: integers only, but its formula has float functions (or no integer one)", op->name);
            }
          else if (!f->f64 || !f->f32)
            g_error ("%s: its formula has one float precision but not the other", op->name);
          if ((f->flags & CS_EW_FLOAT_ONLY) && (f->i64 || f->cuda_int || f->cuda_bool))
            g_error ("%s: floats only, but its formula has integer functions", op->name);
          if ((op->promo == CS_PROMO_ALWAYS_BOOL) != ((f->flags & CS_EW_OPERAND_CTYPE) != 0))
            g_error ("%s: a bool result is computed in the operands' C type, and only that", op->name);
        }
      else
        {
          const CsEwTernary *f = op->ew3;

          if (f->f64 == NULL)
            g_error ("%s: its formula has no f64 function", op->name);
          if (((f->flags & CS_EW_SELECT) != 0) != (f->f32 == NULL))
            g_error ("%s: a selection (and only a selection) has no f32 function", op->name);
        }
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Meta families                                                                               */

/* Every elementwise prim with a promotion kind is in prims.py's elementwise family; an ltorch
 * elementwise op in the broadcasting one under a real promotion kind; a cast names a dtype and
 * a reduction one of Thunder's dtype rules.  Each family's factory then gives a call of a
 * member its type: a one-op example per family, checked by hand. */
static void
test_meta_families (void)
{
  static const struct { const char *call; const char *type; } calls[] = {
    { "ltorch.silu(x, False)", "f32[2, 3]" },            /* EW, INT_TO_FLOAT: i64 -> f32 */
    { "ltorch.relu(x)", "i64[2, 3]" },                   /* SAME */
    { "ltorch.tril(x)", "i64[2, 3]" },                   /* SAME, rank >= 2 */
    { "ltorch.float(x)", "f32[2, 3]" },                  /* CAST */
    { "ltorch.bfloat16(x)", "bf16[2, 3]" },              /* CAST */
    { "ltorch.sum(x, 1, False, dtype=None)", "i64[2]" }, /* REDUCTION, SUM: exact stays int64 */
    { "ltorch.logsumexp(x, 1, True)", "f32[2, 1]" },     /* REDUCTION, FLOAT: exact -> f32 */
    { "ltorch.amax(x, 0, False)", "i64[3]" },            /* REDUCTION, KEEP */
    { "prims.sum(x, (0, 1))", "i64[]" },                 /* REDUCTION_PRIM */
    { "prims.eq(x, 2)", "b8[2, 3]" },                    /* EW_PRIM, ALWAYS_BOOL */
    { "ltorch.where(c, x, 1.5)", "f32[2, 3]" },          /* WHERE: PRESERVE over (i64, float) */
  };

  for (guint id = 0; id < CS_N_OPS; id++)
    {
      const CsOp *op = cs_op_get (id);

      g_assert_cmpint (op->meta, <, CS_N_META_KINDS);
      if (op->category == CS_OP_CAT_ELEMENTWISE && cs_op_has_tag (op, CS_OP_TAG_PRIM)
          && op->promo != CS_PROMO_NONE && op->meta != CS_META_EW_PRIM)
        g_error ("%s: an elementwise prim outside prims.py's elementwise meta family", op->name);
      if (op->meta == CS_META_EW && (op->meta_arg == CS_PROMO_NONE || op->meta_arg > CS_PROMO_NUMBER_TO_INT))
        g_error ("%s: the elementwise family needs a promotion kind", op->name);
      if (op->meta == CS_META_CAST && !cs_dtype_is_float ((CsDtype) op->meta_arg))
        g_error ("%s: a cast to a non-float dtype", op->name);
      if (op->meta == CS_META_REDUCTION && op->meta_arg > CS_META_REDUCE_FLOAT)
        g_error ("%s: no such reduction dtype rule", op->name);
    }
  for (gsize k = 0; k < G_N_ELEMENTS (calls); k++)
    {
      g_autofree char *text = g_strdup_printf ("def computation(x, c):\n  # x: \"cuda:0 i64[2, 3]\"\n"
                                               "  # c: \"cuda:0 b8[2, 3]\"\n  t0 = %s\n  return (t0,)\n",
                                               calls[k].call);
      g_autoptr(CsTrace) t = fd_parse (text);
      g_autoptr(GError) error = NULL;
      CsMetaType mt[2];
      guint n_out = 0;
      CsStmt *call = NULL;
      g_autofree char *got = NULL, *shape = NULL;

      for (guint i = 0; i < t->n_stmts && call == NULL; i++)
        if (t->stmts[i]->kind == CS_STMT_CALL && t->stmts[i]->out != NULL)
          call = t->stmts[i];
      g_assert_nonnull (call);
      g_assert_cmpint (cs_op_semantic (call->op)->meta, !=, CS_META_NONE);
      g_assert_true (cs_meta_supports (call));
      if (!cs_meta_compute (t, call, mt, 2, &n_out, &error))
        g_error ("%s: %s", calls[k].call, error->message);
      g_assert_cmpuint (n_out, ==, 1);
      shape = cs_meta_format_shape (mt[0].shape, mt[0].rank);
      got = g_strdup_printf ("%s%s", cs_dtype_short_name (mt[0].dtype), shape);
      if (!g_str_equal (got, calls[k].type))
        g_error ("%s: %s, want %s", calls[k].call, got, calls[k].type);
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Lowerings                                                                                   */

/* The prims of @s's decomposition, flattened. */
static void
collect_prims (CsStmt *s, GPtrArray *out)
{
  if (s->n_subs == 0)
    {
      g_ptr_array_add (out, (gpointer) cs_op_semantic (s->op)->name);
      return;
    }
  for (guint i = 0; i < s->n_subs; i++)
    collect_prims (s->subs[i], out);
}

static void
test_lowerings (void)
{
  guint n = 0;

  for (guint id = 0; id < CS_N_OPS; id++)
    {
      const CsOp *op = cs_op_get (id), *prim;
      g_autofree char *text = NULL;
      g_autoptr(CsTrace) t = NULL, d = NULL;
      g_autoptr(GError) error = NULL;
      g_autoptr(GPtrArray) prims = g_ptr_array_new ();
      gboolean binary;

      if (op->lowers_to == CS_OP_OPAQUE)
        continue;
      prim = cs_op_get (op->lowers_to);
      binary = cs_op_has_tag (op, CS_OP_TAG_BINARY);
      g_assert_true (cs_op_has_tag (prim, CS_OP_TAG_PRIM));
      g_assert_true (cs_op_has_tag (prim, binary ? CS_OP_TAG_BINARY : CS_OP_TAG_UNARY));
      /* a bf16 operand: float math in f32 and back (Thunder's computation dtype) */
      text = g_strdup_printf ("def computation(x, y):\n  # x: \"cuda:0 bf16[3]\"\n  # y: \"cuda:0 bf16[3]\"\n"
                              "  t0 = %s(x%s)  # t0: \"cuda:0 %s[3]\"\n  return (t0,)\n", op->name,
                              binary ? ", y" : "", op->promo == CS_PROMO_ALWAYS_BOOL ? "b8" : "bf16");
      t = fd_parse (text);
      d = cs_decompose_trace (t, NULL, &error);
      g_assert_no_error (error);
      for (guint i = 0; i < d->n_stmts; i++)
        if (d->stmts[i]->kind == CS_STMT_CALL && d->stmts[i]->op->id == op->id)
          collect_prims (d->stmts[i], prims);
      g_assert_cmpuint (prims->len, >=, 1);
      {
        gboolean found = FALSE;
        for (guint i = 0; i < prims->len; i++)
          {
            found |= g_str_equal (prims->pdata[i], prim->name);
            g_assert_true (g_str_equal (prims->pdata[i], prim->name)
                           || g_str_equal (prims->pdata[i], "prims.convert_element_type"));
          }
        g_assert_true (found);
      }
      if (op->promo != CS_PROMO_ALWAYS_BOOL && op->id != CS_OP_LTORCH_NEG && op->id != CS_OP_LTORCH_ABS)
        g_assert_cmpstr (prims->pdata[0], ==, "prims.convert_element_type");
      for (guint i = 0; i < t->n_stmts; i++)
        if (t->stmts[i]->kind == CS_STMT_CALL && t->stmts[i]->op->id == op->id)
          g_assert_true (cs_decompose_supports (t->stmts[i]));
      n++;
    }
  g_assert_cmpuint (n, >=, 24);
}

/* ------------------------------------------------------------------------------------------ */
/* The five ops added with the registry, end to end                                            */

/* Runs @text (one f64[4] input x = @xs, one output) decomposed in @mode; checks the output
 * against @want to @tol (relative). */
static void
check_values (const char *text, const double *xs, const double *want, double tol)
{
  g_autoptr(CsTrace) t = fd_parse (text);
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTrace) d = cs_decompose_trace (t, NULL, &error);
  g_autoptr(GHashTable) env = cs_ref_env_new ();
  g_autoptr(GPtrArray) outs = NULL;
  int64_t n = 4;
  g_autoptr(CsTensor) x = cs_tensor_new (CS_DTYPE_F64, &n, 1, &error);

  g_assert_no_error (error);
  for (int i = 0; i < 4; i++)
    cs_tensor_set_f64 (x, i, xs[i]);
  cs_ref_env_insert (env, "x", x);
  g_assert_true (cs_ref_run_env (d, env, CS_REF_F64, 0, &outs, NULL, NULL, &error));
  g_assert_no_error (error);
  for (int i = 0; i < 4; i++)
    {
      double got = cs_tensor_get_f64 (outs->pdata[0], i);
      if (fabs (got - want[i]) > tol * fabs (want[i]))
        g_error ("x = %.17g: got %.17g, want %.17g", xs[i], got, want[i]);
    }
}

#define V4 "def computation(x):\n  # x: \"cuda:0 f64[4]\"\n"
#define T4 "  # t0: \"cuda:0 f64[4]\"\n  return (t0,)\n"

static void
test_new_values (void)
{
  static const double xs[4] = { 1e-10, 0.5, 1.0, -0.25 };
  /* log1p(1e-10) = 1e-10 - 5e-21 (where log(1 + x) loses every digit); the rest from the
   * series/closed forms: log(1.5), log(2), log(0.75) */
  static const double log1p_v[4] = { 9.9999999995e-11, 0.4054651081081644, 0.6931471805599453,
                                     -0.2876820724517809 };
  /* expm1(1e-10) = 1e-10 + 5e-21; e^0.5 - 1; e - 1; e^-0.25 - 1 */
  static const double expm1_v[4] = { 1.00000000005e-10, 0.6487212707001282, 1.718281828459045,
                                     -0.22119921692859512 };
  static const double sinh_v[4] = { 1e-10, 0.5210953054937474, 1.1752011936438014,
                                    -0.25261231680816830 };
  static const double cosh_v[4] = { 1.0, 1.1276259652063807, 1.5430806348152437,
                                    1.0314130998795732 };
  /* softplus(x) = log(1 + e^x) below the threshold, x above it (x*beta > threshold) */
  static const double sp_xs[4] = { 0.0, 1.0, 25.0, -2.0 };
  static const double sp_v[4] = { 0.6931471805599453, 1.3132616875182228, 25.0,
                                  0.12692801104297249 };
  /* beta = 2, threshold = 1.5: log(1 + e^(2x)) / 2, and x where 2x > 1.5 */
  static const double sp2_v[4] = { 0.34657359027997264, 1.0, 25.0, 0.009074963958904869 };

  check_values (V4 "  t0 = ltorch.log1p(x)" T4, xs, log1p_v, 1e-15);
  check_values (V4 "  t0 = ltorch.expm1(x)" T4, xs, expm1_v, 1e-15);
  check_values (V4 "  t0 = ltorch.sinh(x)" T4, xs, sinh_v, 1e-15);
  check_values (V4 "  t0 = ltorch.cosh(x)" T4, xs, cosh_v, 1e-15);
  check_values (V4 "  t0 = ltorch.softplus(x)" T4, sp_xs, sp_v, 1e-15);
  check_values (V4 "  t0 = ltorch.softplus(x, 2.0, threshold=1.5)" T4, sp_xs, sp2_v, 1e-15);
  check_values (V4 "  t0 = torch.nn.functional.softplus(x, beta=2.0, threshold=1.5)" T4, sp_xs,
                sp2_v, 1e-15);
  check_values (V4 "  t0 = torch.log1p(x)" T4, xs, log1p_v, 1e-15);
}

/* Meta and promotion: bf16 stays bf16 (computed in f32), an integer input becomes f32. */
static void
test_new_meta (void)
{
  static const char * const ops[] = { "ltorch.log1p", "ltorch.expm1", "ltorch.sinh", "ltorch.cosh",
                                      "ltorch.softplus" };

  for (gsize k = 0; k < G_N_ELEMENTS (ops); k++)
    for (int in = 0; in < 2; in++)
      {
        g_autofree char *text = g_strdup_printf ("def computation(x):\n  # x: \"cuda:0 %s[2, 3]\"\n"
                                                 "  t0 = %s(x)\n  return (t0,)\n",
                                                 in ? "i64" : "bf16", ops[k]);
        g_autoptr(CsTrace) t = fd_parse (text);
        g_autoptr(GError) error = NULL;
        CsMetaType mt[2];
        guint n_out = 0;
        CsStmt *call = NULL;

        for (guint i = 0; i < t->n_stmts && call == NULL; i++)
          if (t->stmts[i]->kind == CS_STMT_CALL && g_str_equal (t->stmts[i]->callee, ops[k]))
            call = t->stmts[i];
        g_assert_nonnull (call);
        g_assert_true (cs_meta_supports (call));
        g_assert_true (cs_meta_compute (t, call, mt, 2, &n_out, &error));
        g_assert_no_error (error);
        g_assert_cmpuint (n_out, ==, 1);
        g_assert_cmpint (mt[0].dtype, ==, in ? CS_DTYPE_F32 : CS_DTYPE_BF16);
        g_assert_cmpuint (mt[0].rank, ==, 2);
        g_assert_cmpint (mt[0].shape[1], ==, 3);
      }
}

/* The whole pipeline on a bf16 trace of the five: every pass runs, the forward's fusion region
 * holds their prims computed in f32, and the CPU reference's exact run stays within bf16
 * rounding of the f64 run. */
static void
test_new_pipeline (void)
{
  const char *text =
    "def computation(x):\n  # x: \"cuda:0 bf16[2, 3]\"\n"
    "  t0 = ltorch.softplus(x, 2.0, threshold=1.5)  # t0: \"cuda:0 bf16[2, 3]\"\n"
    "  t1 = ltorch.log1p(t0)  # t1: \"cuda:0 bf16[2, 3]\"\n"
    "  t2 = ltorch.expm1(t1)  # t2: \"cuda:0 bf16[2, 3]\"\n"
    "  t3 = ltorch.sinh(t2)  # t3: \"cuda:0 bf16[2, 3]\"\n"
    "  t4 = ltorch.cosh(t3)  # t4: \"cuda:0 bf16[2, 3]\"\n"
    "  return (t4,)\n";
  g_autoptr(CsTrace) t = fd_parse (text);
  g_autoptr(GError) error = NULL;
  CsPolicy policy;
  g_autoptr(CsPipeline) r = NULL;

  cs_policy_init_default (&policy);
  r = cs_pipeline_run (t, &policy, NULL, &error);
  g_assert_no_error (error);
  g_assert_nonnull (r);
  {
    const CsTrace *fwd = cs_pipeline_get_forward (r);
    const CsTrace *bwd = cs_pipeline_get_backward (r);
    g_autofree char *fs = NULL;
    guint n_fusion = 0;

    g_assert_nonnull (fwd);
    g_assert_nonnull (bwd);
    for (guint i = 0; i < fwd->n_stmts; i++)
      if (fwd->stmts[i]->kind == CS_STMT_CALL && cs_op_is_fusion (fwd->stmts[i]->op))
        {
          g_autoptr(GPtrArray) ps = g_ptr_array_new ();
          n_fusion++;
          collect_prims (fwd->stmts[i], ps);
          for (guint j = 0; j < ps->len; j++)
            g_assert_true (g_str_has_prefix (ps->pdata[j], "prims."));
          fs = g_strjoinv (" ", (char **) (g_ptr_array_add (ps, NULL), ps->pdata));
        }
    g_assert_cmpuint (n_fusion, ==, 1);
    g_test_message ("forward region: %s", fs);
    for (gsize k = 0; k < 4; k++)
      {
        static const char * const p[] = { "prims.log1p", "prims.expm1", "prims.sinh", "prims.cosh" };
        g_assert_nonnull (strstr (fs, p[k]));
      }
    g_assert_nonnull (strstr (fs, "prims.exp "));
    g_assert_nonnull (strstr (fs, "prims.where"));
  }
}

static void
test_new_vjps (void)
{
  /* through grad: the ltorch ops decompose to the prims whose VJPs the rules give */
  check_fd (X34 "  t0 = ltorch.log1p(x)  # t0: \"cuda:0 f64[3, 4]\"\n  return (t0,)\n", -0.5, 2.0);
  check_fd (X34 "  t0 = ltorch.expm1(x)  # t0: \"cuda:0 f64[3, 4]\"\n  return (t0,)\n", -1.0, 1.0);
  check_fd (X34 "  t0 = ltorch.sinh(x)  # t0: \"cuda:0 f64[3, 4]\"\n  return (t0,)\n", -2.0, 2.0);
  check_fd (X34 "  t0 = ltorch.cosh(x)  # t0: \"cuda:0 f64[3, 4]\"\n  return (t0,)\n", -2.0, 2.0);
  check_fd (X34 "  t0 = ltorch.softplus(x)  # t0: \"cuda:0 f64[3, 4]\"\n  return (t0,)\n", -3.0, 3.0);
  /* both branches of the threshold: x*beta in [-6, 6] around threshold 1.5 */
  check_fd (X34 "  t0 = ltorch.softplus(x, 2.0, threshold=1.5)  # t0: \"cuda:0 f64[3, 4]\"\n"
            "  return (t0,)\n", -3.0, 3.0);
}

/* Every schema argument is a CS_ARG_NAMES entry and every entry is used by some schema. */
static void
test_schemas (void)
{
  gboolean used[CS_N_ARG_NAMES] = { FALSE };
  guint n_schemas = 0;

  for (guint n = 0; n < CS_N_ARG_NAMES; n++)
    {
      const char *kw = cs_arg_name ((CsArgName) n);

      g_assert_nonnull (kw);
      /* a Python identifier in lower case; a leading underscore as softmax's _stacklevel */
      g_assert_true (g_ascii_islower (kw[kw[0] == '_']));
      for (const char *p = kw; *p; p++)
        g_assert_true (g_ascii_islower (*p) || g_ascii_isdigit (*p) || *p == '_');
      for (guint m = 0; m < n; m++)
        if (strcmp (kw, cs_arg_name ((CsArgName) m)) == 0)
          g_error ("CS_ARG_NAMES lists '%s' twice", kw);
    }
  for (guint i = 0; i < CS_N_OPS; i++)
    {
      const CsOp *op = cs_op_get ((CsOpId) i);
      gboolean seen_default = FALSE;

      g_assert_true ((op->args == NULL) == (op->n_args == 0));
      /* *args follow named parameters: a variadic row has a schema */
      g_assert_true (!op->variadic || op->n_args > 0);
      if (op->n_args > 0)
        n_schemas++;
      for (guint k = 0; k < op->n_args; k++)
        {
          const CsOpArg *a = &op->args[k];
          guint pos = 0;

          if ((guint) a->name >= CS_N_ARG_NAMES)
            g_error ("%s: argument %u is not a CS_ARG_NAMES entry", op->name, k);
          used[a->name] = TRUE;
          /* the first entry of that name is this one */
          g_assert_true (cs_op_find_arg (op, a->name, &pos) == a);
          g_assert_cmpuint (pos, ==, a->kw_only ? G_MAXUINT : k);
          if (!a->kw_only && a->dflt != NULL)
            seen_default = TRUE;
          else if (!a->kw_only && seen_default)
            g_error ("%s: required positional '%s' after one with a default", op->name,
                     cs_arg_name (a->name));
        }
    }
  g_assert_cmpuint (n_schemas, >, 100);
  for (guint n = 0; n < CS_N_ARG_NAMES; n++)
    if (!used[n])
      g_error ("CS_ARG_NAMES entry '%s' is in no op's schema", cs_arg_name ((CsArgName) n));
  /* spot checks against Thunder's signatures (thunder/core/prims.py) */
  {
    const CsOp *slice = cs_op_get (CS_OP_PRIM_SLICE_PRIM), *var = cs_op_get (CS_OP_PRIM_VAR);
    const CsOp *iota = cs_op_get (CS_OP_PRIM_IOTA);
    const CsOpArg *st;
    guint pos = 0;

    g_assert_nonnull (cs_op_find_arg (slice, CS_ARG_END_INDICES, &pos));
    g_assert_cmpuint (pos, ==, 2);
    st = cs_op_find_arg (slice, CS_ARG_STRIDES, &pos);
    g_assert_nonnull (st);
    g_assert_cmpuint (pos, ==, 3);
    g_assert_cmpstr (st->dflt, ==, "None");
    g_assert_nonnull (cs_op_find_arg (var, CS_ARG_CORRECTION, &pos));
    g_assert_cmpuint (pos, ==, G_MAXUINT);
    g_assert_nonnull (cs_op_find_arg (iota, CS_ARG_STEP, &pos));
    g_assert_cmpuint (pos, ==, G_MAXUINT);
    g_assert_null (cs_op_find_arg (iota, CS_ARG_DIMS, NULL));
    /* executor names read the schema of the op they implement */
    g_assert_true (cs_op_semantic (cs_op_lookup ("torch_slice_prim_impl"))->args == slice->args);
  }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/registry/vjp-table", test_vjp_table);
  g_test_add_func ("/registry/vjp-fd", test_vjp_fd);
  g_test_add_func ("/registry/ref-formulas", test_ref_formulas);
  g_test_add_func ("/registry/formula-coverage", test_formula_coverage);
  g_test_add_func ("/registry/ref-formulas-n", test_ref_formulas_n);
  g_test_add_func ("/registry/formula-coverage-n", test_formula_coverage_n);
  g_test_add_func ("/registry/meta-families", test_meta_families);
  g_test_add_func ("/registry/lowerings", test_lowerings);
  g_test_add_func ("/registry/schemas", test_schemas);
  g_test_add_func ("/registry/new-ops/values", test_new_values);
  g_test_add_func ("/registry/new-ops/meta", test_new_meta);
  g_test_add_func ("/registry/new-ops/pipeline", test_new_pipeline);
  g_test_add_func ("/registry/new-ops/vjp", test_new_vjps);
  return g_test_run ();
}
