/* test-core-rounding.c: the cast policy's rounding=fused|eager (issue 19; core/cs-cse.h
 * cs_cse_remove_redundant_casts_rounding(), the pipeline's remove-redundant-casts pass).
 *
 * - hand-made bf16 traces whose every value was worked out below: (a * b) + c, where rounding
 *   the product to bf16 (eager) changes the sum; add(a, c, alpha=7), one op whose inner
 *   `c * 7` Thunder writes as a nested ltorch.mul: eager (one op, one rounding) equals fused,
 *   redundant-casts=keep rounds the product too;
 * - data/mlp_gelu.txt: F.gelu is one eager kernel, so eager and fused compute the same bits in
 *   the forward and the backward, while keep (rounding after each of the ops Thunder's gelu is
 *   written with) differs; fused and eager pass the verdict against f64;
 * - data/rmsnorm_swiglu.txt: the gradient accumulated for rms_norm's output is rounded to bf16
 *   under eager before rms_norm's backward reads it, not under fused: two gradients differ,
 *   and fused passes PyTorch's check with eager as the reference.
 */
#include "cs-config.h"

#include <math.h>
#include <string.h>

#include "cs-compare.h"
#include "cs-grad.h"
#include "cs-lens.h"
#include "cs-ops.h"
#include "cs-parse.h"
#include "cs-pipeline.h"
#include "cs-policy.h"
#include "cs-ref.h"

/* ---- helpers ------------------------------------------------------------------------------ */

static CsPolicy
policy_of (const char *assignment)
{
  CsPolicy p;
  g_autoptr(GError) error = NULL;

  cs_policy_init_default (&p);
  if (assignment != NULL)
    g_assert_true (cs_policy_parse_assignment (&p, assignment, &error));
  g_assert_no_error (error);
  return p;
}

/* The forward of @t under @p (no input requires grad), run on the CPU reference in exact mode
 * with @env; returns the outputs. */
static GPtrArray *
run_forward (const CsTrace *t, const char *assignment, GHashTable *env)
{
  CsPolicy p = policy_of (assignment);
  CsGradSpec none = { FALSE, NULL, TRUE, NULL };
  g_autoptr(GError) error = NULL;
  g_autoptr(CsPipeline) pl = cs_pipeline_run (t, &p, &none, &error);
  GPtrArray *out = NULL;

  g_assert_no_error (error);
  g_assert_true (cs_ref_run_env (cs_pipeline_get_forward (pl), env, CS_REF_EXACT, 0, &out, NULL,
                                 NULL, &error));
  g_assert_no_error (error);
  return out;
}

static CsTensor *
bf16_vector (const double *v, int64_t n)
{
  g_autoptr(GError) error = NULL;
  CsTensor *x = cs_tensor_new_from_f64 (CS_DTYPE_BF16, &n, 1, v, &error);

  g_assert_no_error (error);
  /* every value chosen below is a bf16 number: the tensor holds it exactly */
  for (int64_t i = 0; i < n; i++)
    g_assert_cmpfloat (cs_tensor_get_f64 (x, i), ==, v[i]);
  return x;
}

static CsTrace *
parse (const char *text, const char *name)
{
  g_autoptr(GError) error = NULL;
  CsTrace *t = cs_parse_trace (text, name, &error);

  g_assert_no_error (error);
  return t;
}

/* ---- (a * b) + c by hand ------------------------------------------------------------------- */

static const char mul_add_trace[] =
  "import torch\n"
  "import thunder.torch as ltorch\n"
  "from thunder.executors.torchex import no_autocast\n\n"
  "@torch.no_grad()\n"
  "@no_autocast\n"
  "def computation(a, b, c):\n"
  "  # a: \"cuda:0 bf16[2]\"\n"
  "  # b: \"cuda:0 bf16[2]\"\n"
  "  # c: \"cuda:0 bf16[2]\"\n"
  "  t0 = ltorch.mul(a, b)  # t0: \"cuda:0 bf16[2]\"\n"
  "  t1 = ltorch.add(t0, c)  # t1: \"cuda:0 bf16[2]\"\n"
  "  return (t1,)\n";

/* Element 0: a = b = 1 + 3*2^-7 = 1.0234375, c = -1 (all bf16: 8 significant bits).
 *   a * b = 1 + 6*2^-7 + 9*2^-14 = 1.04742431640625, exact in f32 (15 significant bits).
 *   eager: the product is t0, stored in bf16.  In [1, 2) bf16's spacing is 2^-7; the part
 *     past 1 + 6*2^-7 is 9*2^-14 = 0.0703125 * 2^-7, under half a spacing: t0 = 1.046875.
 *     t0 + c = 6*2^-7 = 0.046875, exact in bf16 (3 significant bits).
 *   fused: one region, t0's f32 -> bf16 -> f32 chain removed: t0 + c in f32 =
 *     6*2^-7 + 9*2^-14 = 0.04742431640625, in [2^-5, 2^-4) where bf16's spacing is 2^-12:
 *     0.04742431640625 / 2^-12 = 194.25, rounded to 194: 194 * 2^-12 = 0.04736328125.
 *   f64: 0.04742431640625 (fused is closer: error 6.1e-5 against eager's 5.5e-4).
 * Element 1: a = 3, b = 0.5, c = 0.25: 1.5 + 0.25 = 1.75 in every mode (nothing rounds). */
static void
test_mul_add (void)
{
  static const double a[] = { 1.0234375, 3 }, b[] = { 1.0234375, 0.5 }, c[] = { -1, 0.25 };
  g_autoptr(CsTrace) t = parse (mul_add_trace, "mul_add.txt");
  g_autoptr(GHashTable) env = cs_ref_env_new ();
  g_autoptr(CsTensor) ta = bf16_vector (a, 2);
  g_autoptr(CsTensor) tb = bf16_vector (b, 2);
  g_autoptr(CsTensor) tc = bf16_vector (c, 2);
  const char *eager_like[] = { "rounding=eager", "redundant-casts=keep", "fusion=off" };

  cs_ref_env_insert (env, "a", ta);
  cs_ref_env_insert (env, "b", tb);
  cs_ref_env_insert (env, "c", tc);
  {
    g_autoptr(GPtrArray) fused = run_forward (t, NULL, env);
    g_autoptr(GPtrArray) f64 = NULL;
    g_autoptr(CsPipeline) pl = cs_pipeline_run (t, NULL, &(CsGradSpec) { FALSE, NULL, TRUE, NULL },
                                                NULL);

    g_assert_cmpuint (fused->len, ==, 1);
    g_assert_cmpint (((CsTensor *) fused->pdata[0])->dtype, ==, CS_DTYPE_BF16);
    g_assert_cmpfloat (cs_tensor_get_f64 (fused->pdata[0], 0), ==, 0.04736328125);
    g_assert_cmpfloat (cs_tensor_get_f64 (fused->pdata[0], 1), ==, 1.75);
    g_assert_true (cs_ref_run_env (cs_pipeline_get_forward (pl), env, CS_REF_F64, 0, &f64, NULL,
                                   NULL, NULL));
    g_assert_cmpfloat (cs_tensor_get_f64 (f64->pdata[0], 0), ==, 0.04742431640625);
  }
  /* eager rounds t0; keeping every cast and the torch executor alone (fusion=off, every cast
   * of the decomposition kept) do too, on this trace of two simple ops */
  for (guint i = 0; i < G_N_ELEMENTS (eager_like); i++)
    {
      g_autoptr(GPtrArray) out = run_forward (t, eager_like[i], env);

      g_test_message ("%s: %.17g", eager_like[i], cs_tensor_get_f64 (out->pdata[0], 0));
      g_assert_cmpfloat (cs_tensor_get_f64 (out->pdata[0], 0), ==, 0.046875);
      g_assert_cmpfloat (cs_tensor_get_f64 (out->pdata[0], 1), ==, 1.75);
    }
  /* eager does not depend on the fusion grouping */
  {
    CsPolicy p = policy_of ("rounding=eager");
    CsGradSpec none = { FALSE, NULL, TRUE, NULL };
    g_autoptr(CsPipeline) pl = NULL;
    g_autoptr(GPtrArray) out = NULL;

    p.fusion = CS_FUSION_OFF;
    pl = cs_pipeline_run (t, &p, &none, NULL);
    g_assert_nonnull (pl);
    g_assert_true (cs_ref_run_env (cs_pipeline_get_forward (pl), env, CS_REF_EXACT, 0, &out,
                                   NULL, NULL, NULL));
    g_assert_cmpfloat (cs_tensor_get_f64 (out->pdata[0], 0), ==, 0.046875);
  }
}

/* ---- one op with a nested product: add(a, c, alpha=7) ------------------------------------ */

static const char add_alpha_trace[] =
  "import torch\n"
  "import thunder.torch as ltorch\n"
  "from thunder.executors.torchex import no_autocast\n\n"
  "@torch.no_grad()\n"
  "@no_autocast\n"
  "def computation(a, c):\n"
  "  # a: \"cuda:0 bf16[1]\"\n"
  "  # c: \"cuda:0 bf16[1]\"\n"
  "  t0 = ltorch.add(a, c, alpha=7)  # t0: \"cuda:0 bf16[1]\"\n"
  "  return (t0,)\n";

/* Thunder's ltorch.add writes alpha as a nested ltorch.mul (`b = b * alpha`), whose result has
 * bf16 type; PyTorch eager's add is one kernel computing a + alpha * c in f32.
 * a = -7, c = 1 + 2^-7 = 1.0078125.  7c = 7.0546875 (exact in f32).
 *   fused and eager (one op): -7 + 7.0546875 = 0.0546875 = 7 * 2^-7, exact in bf16.
 *   keep: 7c rounded to bf16 first: in [4, 8) the spacing is 2^-5 = 0.03125; 0.0546875 past 7
 *     is 1.75 spacings, rounded to 2: 7.0625; -7 + 7.0625 = 0.0625.
 *   f64: 0.0546875. */
static void
test_add_alpha (void)
{
  static const double a[] = { -7 }, c[] = { 1.0078125 };
  g_autoptr(CsTrace) t = parse (add_alpha_trace, "add_alpha.txt");
  g_autoptr(GHashTable) env = cs_ref_env_new ();
  g_autoptr(CsTensor) ta = bf16_vector (a, 1);
  g_autoptr(CsTensor) tc = bf16_vector (c, 1);
  g_autoptr(GPtrArray) fused = NULL;
  g_autoptr(GPtrArray) eager = NULL;
  g_autoptr(GPtrArray) keep = NULL;

  cs_ref_env_insert (env, "a", ta);
  cs_ref_env_insert (env, "c", tc);
  fused = run_forward (t, "rounding=fused", env);
  eager = run_forward (t, "rounding=eager", env);
  keep = run_forward (t, "redundant-casts=keep", env);
  g_assert_cmpfloat (cs_tensor_get_f64 (fused->pdata[0], 0), ==, 0.0546875);
  g_assert_cmpfloat (cs_tensor_get_f64 (eager->pdata[0], 0), ==, 0.0546875);
  g_assert_cmpfloat (cs_tensor_get_f64 (keep->pdata[0], 0), ==, 0.0625);
}

/* ---- the user's own cast is an op: eager never drops it ----------------------------------- */

/* x.float().exp().to(bf16) * y: fused drops the user's .to(bf16) inside the region (the lens's
 * removed user cast, test-core-lens); under eager the .to(bf16) is a user-level op whose
 * result the multiply upcasts, and it stays. */
static void
test_user_cast_kept (void)
{
  static const char text[] =
    "import torch\n"
    "import thunder.torch as ltorch\n"
    "from thunder.executors.torchex import no_autocast\n\n"
    "@torch.no_grad()\n"
    "@no_autocast\n"
    "def computation(x, y):\n"
    "  # x: \"cuda:0 bf16[4]\"\n"
    "  # y: \"cuda:0 bf16[4]\"\n"
    "  t0 = ltorch.to(x, torch.float32, None, device=None, dtype=None, copy=False)  # t0: \"cuda:0 f32[4]\"\n"
    "  t1 = ltorch.exp(t0)  # t1: \"cuda:0 f32[4]\"\n"
    "  t2 = ltorch.to(t1, torch.bfloat16, None, device=None, dtype=None, copy=False)  # t2: \"cuda:0 bf16[4]\"\n"
    "  t3 = ltorch.mul(t2, y)  # t3: \"cuda:0 bf16[4]\"\n"
    "  return (t3,)\n";
  g_autoptr(CsTrace) t = parse (text, "cast_mul.txt");
  CsGradSpec none = { FALSE, NULL, TRUE, NULL };
  const char *policies[] = { "rounding=fused", "rounding=eager" };

  for (guint i = 0; i < G_N_ELEMENTS (policies); i++)
    {
      CsPolicy p = policy_of (policies[i]);
      g_autoptr(GError) error = NULL;
      g_autoptr(CsPipeline) pl = cs_pipeline_run (t, &p, &none, &error);
      g_autoptr(GPtrArray) removed = NULL;

      g_assert_no_error (error);
      removed = cs_lens_removed_user_casts (cs_pipeline_find_trace (pl, "initial"),
                                            cs_pipeline_find_trace (pl, "fuse"),
                                            cs_pipeline_find_trace (pl, "remove-redundant-casts"));
      g_assert_cmpuint (removed->len, ==, i == 0 ? 1 : 0);
    }
}

/* ---- samples: fused and eager against each other and against f64 ------------------------- */

static CsTrace *
load_data (const char *name)
{
  const char *dir = g_getenv ("CS_DATA_DIR");
  g_autofree char *path = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTraceList) list = NULL;

  g_assert_nonnull (dir);
  path = g_build_filename (dir, name, NULL);
  list = cs_parse_file (path, &error);
  g_assert_no_error (error);
  return cs_trace_ref (list->traces->pdata[0]);
}

static GHashTable *
random_env (const CsTrace *t, guint64 seed)
{
  GHashTable *env = cs_ref_env_new ();
  g_autoptr(GPtrArray) leaves = cs_ref_dup_leaf_inputs (t);

  for (guint i = 0; i < leaves->len; i++)
    {
      g_autoptr(GError) error = NULL;
      CsProxy *p = leaves->pdata[i];
      g_autoptr(CsTensor) x = cs_ref_random_input (t, p, seed, &error);

      g_assert_no_error (error);
      cs_ref_env_insert (env, p->name, x);
    }
  return env;
}

/* The joint trace (forward and backward, every pass through DCE) of @t under @assignment, run
 * on @env; @mode CS_REF_EXACT or CS_REF_F64. */
static GPtrArray *
run_joint (const CsTrace *t, const char *assignment, GHashTable *env, CsRefMode mode,
           GPtrArray **names)
{
  CsPolicy p = policy_of (assignment);
  g_autoptr(GError) error = NULL;
  g_autoptr(CsPipeline) pl = cs_pipeline_run (t, &p, NULL, &error);
  GPtrArray *out = NULL;

  g_assert_no_error (error);
  g_assert_true (cs_ref_run_env (cs_pipeline_find_trace (pl, "dce"), env, mode, 11, &out, names,
                                 NULL, &error));
  g_assert_no_error (error);
  return out;
}

static gboolean
same_bits (const CsTensor *x, const CsTensor *y)
{
  return x->dtype == y->dtype && cs_tensor_nbytes (x) == cs_tensor_nbytes (y)
         && memcmp (x->data, y->data, cs_tensor_nbytes (x)) == 0;
}

/* Every float output of @out passes PyTorch's verdict against @f64 with the rounding floor as
 * the reference error (what `run --device cpu` prints as ok / above). */
static void
assert_verdicts (GPtrArray *out, GPtrArray *f64, const char *what)
{
  guint n = 0;

  g_assert_cmpuint (out->len, ==, f64->len);
  for (guint k = 0; k < out->len; k++)
    {
      const CsTensor *x = out->pdata[k];
      CsAccuracy acc;

      if (x == NULL || !cs_dtype_is_float (x->dtype))
        continue;
      cs_accuracy_judge (x, NULL, f64->pdata[k], NULL, &acc);
      g_test_message ("%s: output %u err %.3e floor %.3e ratio %.2f %s", what, k, acc.err,
                      acc.ref_err, acc.ratio, acc.pass ? "ok" : "above");
      g_assert_true (acc.pass);
      n++;
    }
  g_assert_cmpuint (n, >, 0);
}

/* The grad pass's gradient accumulations that sum cotangents of two forward statements (the
 * top-level statements of its trace tagged grad_sum: autograd's accumulation, an op of its own
 * under rounding=eager). */
static guint
count_grad_sums (const CsTrace *t)
{
  CsPolicy p = policy_of (NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(CsPipeline) pl = cs_pipeline_run (t, &p, NULL, &error);
  const CsTrace *grad;
  guint n = 0;

  g_assert_no_error (error);
  grad = cs_pipeline_find_trace (pl, "grad");
  g_assert_nonnull (grad);
  for (guint i = 0; i < grad->n_stmts; i++)
    if (grad->stmts[i]->grad_sum)
      {
        g_assert_true (grad->stmts[i]->backward);
        g_assert_cmpstr (grad->stmts[i]->op->short_name, ==, "add");
        n++;
      }
  return n;
}

/* data/mlp_gelu.txt: linear, F.gelu(approximate='tanh'), linear.  The GELU is one op: eager
 * computes it in f32 and rounds once, as nvFuser does, so eager and fused agree bit for bit on
 * every output and gradient; keep rounds after each of the nested muls and adds Thunder's
 * ltorch.gelu is written with, and differs. */
static void
test_mlp_gelu (void)
{
  g_autoptr(CsTrace) t = load_data ("mlp_gelu.txt");
  g_autoptr(GHashTable) env = NULL;
  g_autoptr(GPtrArray) fused = NULL;
  g_autoptr(GPtrArray) eager = NULL;
  g_autoptr(GPtrArray) keep = NULL;
  g_autoptr(GPtrArray) f64 = NULL;
  gboolean keep_differs = FALSE;

  {
    CsPolicy p = policy_of (NULL);
    g_autoptr(CsPipeline) pl = cs_pipeline_run (t, &p, NULL, NULL);
    g_assert_nonnull (pl);
    env = random_env (cs_pipeline_find_trace (pl, "dce"), 11);
  }
  fused = run_joint (t, "rounding=fused", env, CS_REF_EXACT, NULL);
  eager = run_joint (t, "rounding=eager", env, CS_REF_EXACT, NULL);
  keep = run_joint (t, "redundant-casts=keep", env, CS_REF_EXACT, NULL);
  f64 = run_joint (t, "rounding=fused", env, CS_REF_F64, NULL);
  g_assert_cmpuint (fused->len, ==, eager->len);
  g_assert_cmpuint (fused->len, ==, keep->len);
  g_assert_cmpuint (fused->len, >=, 6);   /* t2, the saved tensors, five gradients */
  for (guint k = 0; k < fused->len; k++)
    {
      if (fused->pdata[k] == NULL)
        continue;
      g_assert_true (same_bits (fused->pdata[k], eager->pdata[k]));
      keep_differs |= !same_bits (fused->pdata[k], keep->pdata[k]);
    }
  g_assert_true (keep_differs);
  /* t0 is read five times, all inside gelu's decomposition: its cotangents are summed within
   * gelu's backward, no accumulation across ops (x, w1, b1, w2, b2 are read once each) */
  g_assert_cmpuint (count_grad_sums (t), ==, 0);
  assert_verdicts (fused, f64, "mlp_gelu fused");
  assert_verdicts (eager, f64, "mlp_gelu eager");
}

/* data/rmsnorm_swiglu.txt: t0 = rms_norm(x), silu(linear(t0, w_gate)) * linear(t0, w_up), a
 * residual add.  The forward's ops meet only at bf16 values (the linears' outputs) and agree
 * bit for bit.  In the backward, t0's gradient is the sum of the two linears' input gradients
 * (the grad pass's `ltorch.add(t52, t68)`, bf16, as autograd accumulates it in t0's dtype),
 * and rms_norm's backward reads it in the same region: fused keeps the sum in f32, eager
 * rounds it, so the gradients of x and norm_w differ.  PyTorch's check of a compiled model
 * (torch._dynamo.utils.same with fp64_ref) takes eager as the reference: fused passes it on
 * every output. */
static void
test_rmsnorm_swiglu (void)
{
  g_autoptr(CsTrace) t = load_data ("rmsnorm_swiglu.txt");
  g_autoptr(GHashTable) env = NULL;
  g_autoptr(GPtrArray) fused = NULL;
  g_autoptr(GPtrArray) eager = NULL;
  g_autoptr(GPtrArray) f64 = NULL;
  g_autoptr(GPtrArray) names = NULL;
  guint n_differ = 0, n_judged = 0;

  {
    g_autoptr(CsPipeline) pl = cs_pipeline_run (t, NULL, NULL, NULL);
    g_assert_nonnull (pl);
    env = random_env (cs_pipeline_find_trace (pl, "dce"), 11);
  }
  fused = run_joint (t, "rounding=fused", env, CS_REF_EXACT, &names);
  eager = run_joint (t, "rounding=eager", env, CS_REF_EXACT, NULL);
  f64 = run_joint (t, "rounding=fused", env, CS_REF_F64, NULL);
  g_assert_cmpuint (fused->len, ==, eager->len);
  for (guint k = 0; k < fused->len; k++)
    {
      const CsTensor *x = fused->pdata[k], *y = eager->pdata[k];
      CsAccuracy acc, acc_eager;

      if (x == NULL || !cs_dtype_is_float (x->dtype))
        continue;
      if (!same_bits (x, y))
        n_differ++;
      cs_accuracy_judge (x, y, f64->pdata[k], NULL, &acc);
      cs_accuracy_judge (y, NULL, f64->pdata[k], NULL, &acc_eager);
      g_test_message ("rmsnorm_swiglu %s: fused err %.3e, eager err %.3e (floor %.3e), %s",
                      (const char *) names->pdata[k], acc.err, acc.ref_err, acc_eager.ref_err,
                      same_bits (x, y) ? "same bits" : "differ");
      g_assert_true (acc.pass);
      n_judged++;
    }
  g_assert_cmpuint (n_judged, >, 0);
  g_assert_cmpuint (n_differ, >, 0);
  /* two accumulations across ops: t0's (read by both linears) and x's (read by rms_norm and
   * the residual add) */
  g_assert_cmpuint (count_grad_sums (t), ==, 2);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/core/rounding/hand/mul-add", test_mul_add);
  g_test_add_func ("/core/rounding/hand/add-alpha", test_add_alpha);
  g_test_add_func ("/core/rounding/user-cast-kept", test_user_cast_kept);
  g_test_add_func ("/core/rounding/sample/mlp-gelu", test_mlp_gelu);
  g_test_add_func ("/core/rounding/sample/rmsnorm-swiglu", test_rmsnorm_swiglu);
  return g_test_run ();
}
