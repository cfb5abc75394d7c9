/* test-kernels-registry.c: the CUDA side of the op registry's coverage test.
 *
 * For every dtype the emitter handles (f32, f64, bf16, i64, and bool for the binary and
 * ternary prims), one fusion region holds every elementwise prim whose registry formula has a
 * CUDA expression for that type (unary, binary, and where/lerp; comparisons give bool); the
 * program is generated, each op's expression is looked for in the source, and the source is
 * compiled by NVRTC to a CUBIN (no GPU needed; an op whose expression does not compile is named
 * by compiling the ops one by one).  On a machine with a CUDA device the same programs run
 * against the independent f64 formulas of tests/test-op-formulas.h, one sweep over every op
 * (ggml's test-backend-ops idea); without a device the sweep skips.  Inputs lie in each op's
 * domain (test-op-formulas.h; binary operands on a grid exact in bf16). */
#include "cs-config.h"

#include <math.h>
#include <string.h>

#include "cs-cuda-private.h"
#include "cs-ops.h"
#include "cs-parse.h"
#include "cs-ref.h"
#include "cs-tensor.h"

#include "test-op-formulas.h"

#define N_ELEMS 64

static gboolean have_device;

static const CsDtype sweep_dtypes[] = { CS_DTYPE_F32, CS_DTYPE_F64, CS_DTYPE_BF16, CS_DTYPE_I64,
                                        CS_DTYPE_B8 };

/* The operands of @op: 1, 2 or 3. */
static guint
n_operands (const CsOp *op)
{
  return op->ew3 ? 3 : op->ew2 ? 2 : 1;
}

/* The registry formula's CUDA expression of a binary/ternary @op over @dt operands, or NULL. */
static const char *
nary_cuda (const CsOp *op, CsDtype dt)
{
  const char * const *e = op->ew2 ? &op->ew2->cuda_f32 : &op->ew3->cuda_f32;   /* f32 f64 int bool */

  return e[dt == CS_DTYPE_F64 ? 1 : dt == CS_DTYPE_I64 ? 2 : dt == CS_DTYPE_B8 ? 3 : 0];
}

/* The TF_* kind of samples for @dt. */
static guint
sample_kind (CsDtype dt)
{
  return dt == CS_DTYPE_B8 ? TF_BOOL : dt == CS_DTYPE_I64 ? TF_INT : TF_FLOAT;
}

/* TRUE when the registry says the CUDA emitter generates @op on @dt operands (and, for a
 * binary/ternary prim, the independent formula takes that kind of dtype). */
static gboolean
emits_on (const CsOp *op, CsDtype dt)
{
  const CsEwUnary *f = op->ew1;
  gboolean is_int = dt == CS_DTYPE_I64;

  if (!(op->exec & CS_OP_EXEC_CUDA) || !cs_op_has_tag (op, CS_OP_TAG_FUSIBLE))
    return FALSE;
  if (op->ew2 || op->ew3)
    {
      const TestFormulaN *tf = test_formula_n (op->name);
      return tf != NULL && (tf->kinds & sample_kind (dt)) && nary_cuda (op, dt) != NULL;
    }
  if (f == NULL || dt == CS_DTYPE_B8)
    return FALSE;
  if (is_int)
    return f->cuda_int != NULL && !(f->flags & CS_EW_FLOAT_ONLY);
  return f->cuda_f32 != NULL && f->cuda_f64 != NULL && !(f->flags & CS_EW_INT_ONLY);
}

/* The ops of the sweep for @dt; @only: one op id, or CS_N_OPS for all. */
static GPtrArray *
sweep_ops (CsDtype dt, guint only)
{
  GPtrArray *ops = g_ptr_array_new ();

  for (guint id = 0; id < CS_N_OPS; id++)
    {
      const CsOp *op = cs_op_get (id);

      if ((only == CS_N_OPS || only == id) && emits_on (op, dt))
        g_ptr_array_add (ops, (gpointer) op);
    }
  return ops;
}

/* Input @j of op @k: "x<k>" (the first operand), "x<k>_<j>". */
static char *
input_name (guint k, guint j)
{
  return j == 0 ? g_strdup_printf ("x%u", k) : g_strdup_printf ("x%u_%u", k, j);
}

/* A trace whose one fusion region computes tK = op_K(xK, xK_1, ...) for every op of @ops on
 * @dt (where's predicate is bool). */
static char *
sweep_trace (GPtrArray *ops, CsDtype dt)
{
  GString *s = g_string_new ("def computation(");
  GString *args = g_string_new ("");
  const char *d = cs_dtype_short_name (dt);

  for (guint k = 0; k < ops->len; k++)
    for (guint j = 0; j < n_operands (ops->pdata[k]); j++)
      {
        g_autofree char *nm = input_name (k, j);
        g_string_append_printf (args, "%s%s", args->len ? ", " : "", nm);
      }
  g_string_append_printf (s, "%s):\n", args->str);
  for (guint k = 0; k < ops->len; k++)
    {
      const CsOp *op = ops->pdata[k];

      for (guint j = 0; j < n_operands (op); j++)
        {
          g_autofree char *nm = input_name (k, j);
          gboolean pred = j == 0 && op->ew3 && (op->ew3->flags & CS_EW_PREDICATE);
          g_string_append_printf (s, "  # %s: \"cuda:0 %s[%d]\"\n", nm, pred ? "b8" : d, N_ELEMS);
        }
    }
  g_string_append (s, "  [");
  for (guint k = 0; k < ops->len; k++)
    g_string_append_printf (s, "%st%u", k ? ", " : "", k);
  g_string_append_printf (s, "] = nvFusion0(%s)\n", args->str);
  for (guint k = 0; k < ops->len; k++)
    {
      const CsOp *op = ops->pdata[k];
      g_string_append_printf (s, "    # t%u = %s(", k, op->name);
      for (guint j = 0; j < n_operands (op); j++)
        {
          g_autofree char *nm = input_name (k, j);
          g_string_append_printf (s, "%s%s", j ? ", " : "", nm);
        }
      g_string_append_printf (s, ")  # t%u: \"cuda:0 %s[%d]\"\n", k,
                              op->promo == CS_PROMO_ALWAYS_BOOL ? "b8" : d, N_ELEMS);
    }
  g_string_append (s, "  return (");
  for (guint k = 0; k < ops->len; k++)
    g_string_append_printf (s, "t%u, ", k);
  g_string_append (s, ")\n");
  g_string_free (args, TRUE);
  return g_string_free (s, FALSE);
}

static CsTrace *
parse (const char *text)
{
  g_autoptr(GError) error = NULL;
  CsTrace *t = cs_parse_trace (text, "registry", &error);

  g_assert_no_error (error);
  g_assert_nonnull (t);
  return t;
}

/* Generates and NVRTC-compiles the sweep of @dt restricted to @only. Returns: TRUE when it
 * compiles; @log gets NVRTC's complaint otherwise. */
static gboolean
compiles (CsDtype dt, guint only, char **log)
{
  g_autoptr(GPtrArray) ops = sweep_ops (dt, only);
  g_autofree char *text = sweep_trace (ops, dt);
  g_autoptr(CsTrace) t = parse (text);
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) cubin = NULL;
  CsPolicy policy;
  CsCudaProgram *p;
  gboolean ok;

  cs_policy_init_default (&policy);
  /* the executor list the CUDA executor runs (issue 18: no sdpa or xentropy kernels yet) */
  cs_policy_set (&policy, "executors", "nvfuser,torch", NULL);
  p = cs_cuda_program_generate (t, NULL, &policy, &error);
  g_assert_no_error (error);
  g_assert_nonnull (p);
  /* every op's expression is in the kernel: its C function name, or for the operator-only
   * formulas (neg, reciprocal, abs on integers, bitwise_not, the C operators of the binary
   * prims, where, lerp) at least one kernel */
  for (guint k = 0; k < ops->len; k++)
    {
      const CsOp *op = ops->pdata[k];
      const CsEwUnary *f = op->ew1;
      const char *e = f == NULL ? nary_cuda (op, dt)
                      : dt == CS_DTYPE_I64 ? f->cuda_int : dt == CS_DTYPE_F64 ? f->cuda_f64 : f->cuda_f32;
      g_autofree char *fn = g_strndup (e, strcspn (e, " (@"));

      if (*fn && !strstr (p->source->str, fn))
        g_error ("%s on %s: '%s' is not in the generated source", op->name,
                 cs_dtype_short_name (dt), fn);
    }
  g_assert_cmpuint (p->n_kernels, >=, 1);
  ok = cs_cuda_jit_compile (p->source->str, 9, 0, &cubin, NULL, &error);
  if (ok)
    {
      g_assert_cmpuint (g_bytes_get_size (cubin), >, 1000);
      g_assert_cmpmem (g_bytes_get_data (cubin, NULL), 4, "\177ELF", 4);
    }
  else if (log)
    *log = g_strdup (error ? error->message : "?");
  cs_cuda_program_free (p);
  return ok;
}

static void
test_nvrtc (gconstpointer data)
{
  CsDtype dt = GPOINTER_TO_INT (data);
  g_autoptr(GPtrArray) ops = sweep_ops (dt, CS_N_OPS);

  g_test_message ("%u ops on %s", ops->len, cs_dtype_short_name (dt));
  g_assert_cmpuint (ops->len, >=, dt == CS_DTYPE_B8 ? 10 : dt == CS_DTYPE_I64 ? 14 : 45);
  if (!compiles (dt, CS_N_OPS, NULL))
    for (guint k = 0; k < ops->len; k++)
      {
        g_autofree char *log = NULL;
        const CsOp *op = ops->pdata[k];

        if (!compiles (dt, op->id, &log))
          g_error ("%s on %s: its CUDA expression does not compile: %s", op->name,
                   cs_dtype_short_name (dt), log);
      }
}

/* Every fusible elementwise prim is in at least one sweep (the registry gives it a CUDA
 * formula), but for the complex-only imag and the shifts (CPU only). */
static void
test_coverage (void)
{
  for (guint id = 0; id < CS_N_OPS; id++)
    {
      const CsOp *op = cs_op_get (id);
      gboolean any = FALSE;

      if (op->category != CS_OP_CAT_ELEMENTWISE || !cs_op_has_tag (op, CS_OP_TAG_PRIM)
          || !cs_op_has_tag (op, CS_OP_TAG_FUSIBLE)
          || id == CS_OP_PRIM_IMAG   /* complex only: no real-valued kernel */
          || id == CS_OP_PRIM_BITWISE_LEFT_SHIFT || id == CS_OP_PRIM_BITWISE_RIGHT_SHIFT)
        continue;
      for (gsize d = 0; d < G_N_ELEMENTS (sweep_dtypes); d++)
        any |= emits_on (op, sweep_dtypes[d]);
      if (!any)
        g_error ("%s is fusible but no sweep generates it", op->name);
    }
}

/* On the GPU: every op of the sweep against the f64 CPU reference, relative L2 per output. */
static void
test_gpu_sweep (gconstpointer data)
{
  CsDtype dt = GPOINTER_TO_INT (data);
  g_autoptr(GPtrArray) ops = sweep_ops (dt, CS_N_OPS);
  g_autofree char *text = NULL;
  g_autoptr(CsTrace) t = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(GHashTable) env = cs_ref_env_new ();
  CsPolicy policy;
  CsCudaProgram *p;
  double bound = dt == CS_DTYPE_BF16 ? 1e-2 : dt == CS_DTYPE_F32 ? 1e-5 : dt == CS_DTYPE_F64 ? 1e-13 : 0;

  if (!have_device)
    {
      g_test_skip ("no CUDA device");
      return;
    }
  text = sweep_trace (ops, dt);
  t = parse (text);
  cs_policy_init_default (&policy);
  /* the executor list the CUDA executor runs (issue 18: no sdpa or xentropy kernels yet) */
  cs_policy_set (&policy, "executors", "nvfuser,torch", NULL);
  p = cs_cuda_program_build (t, NULL, &policy, &error);
  g_assert_no_error (error);
  g_assert_nonnull (p);
  g_assert_cmpint (cudaMemset (p->arena, 0xff, p->arena_bytes), ==, cudaSuccess);
  g_assert_true (cs_cuda_program_reset_state (p, NULL));   /* what the poison overwrote */
  for (guint i = 0; i < p->inputs->len; i++)
    {
      CsCudaTensorInfo *in = &g_array_index (p->inputs, CsCudaTensorInfo, i);
      char *end = NULL;
      guint k = (guint) g_ascii_strtoull (in->name + 1, &end, 10);   /* "x<k>", "x<k>_<j>" */
      guint j = end && *end == '_' ? (guint) g_ascii_strtoull (end + 1, NULL, 10) : 0;
      const CsOp *op = ops->pdata[k];
      int64_t n = N_ELEMS;
      g_autoptr(CsTensor) x = cs_tensor_new (in->dtype, &n, 1, &error);

      if (op->ew1 != NULL)
        {
          const TestFormula *f = test_formula (op->name);

          g_assert_nonnull (f);
          for (int e = 0; e < N_ELEMS; e++)
            {
              double v = f->lo + (f->hi - f->lo) * e / (N_ELEMS - 1);
              cs_tensor_set_f64 (x, e, dt == CS_DTYPE_I64 ? nearbyint (v) : v);
            }
        }
      else
        {
          const TestFormulaN *f = test_formula_n (op->name);

          g_assert_nonnull (f);
          for (int e = 0; e < N_ELEMS; e++)
            cs_tensor_set_f64 (x, e, test_sample_n (f, j, e, N_ELEMS, sample_kind (dt)));
        }
      g_assert_true (cs_cuda_program_set_input (p, i, x->data, cs_tensor_nbytes (x), &error));
      cs_ref_env_insert (env, in->name, x);
    }
  g_assert_true (cs_cuda_program_run (p, FALSE, &error));
  g_assert_no_error (error);
  /* against the independent formulas of test-op-formulas.h; there is no libm erfinv/erfcinv:
   * their outputs are checked by the inverse */
  for (guint i = 0; i < p->outputs->len; i++)
    {
      CsCudaTensorInfo *o = &g_array_index (p->outputs, CsCudaTensorInfo, i);
      guint k = (guint) g_ascii_strtoull (o->name + 1, NULL, 10);   /* "t<k>" */
      const CsOp *op = ops->pdata[k];
      g_autoptr(CsTensor) got = cs_tensor_new (o->dtype, o->shape, o->rank, &error);
      CsTensor *x[3] = { NULL, NULL, NULL };
      double num = 0, den = 0, rel;

      for (guint j = 0; j < n_operands (op); j++)
        {
          g_autofree char *xname = input_name (k, j);
          x[j] = g_hash_table_lookup (env, xname);
          g_assert_nonnull (x[j]);
        }
      g_assert_true (cs_cuda_program_get_output (p, i, got->data, cs_tensor_nbytes (got), &error));
      for (int e = 0; e < N_ELEMS; e++)
        {
          double xv[3] = { 0, 0, 0 }, gv = cs_tensor_get_f64 (got, e), want;

          for (guint j = 0; j < n_operands (op); j++)
            xv[j] = cs_tensor_get_f64 (x[j], e);
          if (op->ew1 == NULL)
            {
              const TestFormulaN *f = test_formula_n (op->name);

              want = dt != CS_DTYPE_I64 && dt != CS_DTYPE_B8 ? f->f (xv) : f->fi ? f->fi (xv) : f->f (xv);
              if (o->dtype == CS_DTYPE_B8)
                want = want != 0;
              if (!isfinite (want))
                {
                  /* a float division by zero: the same infinity, or NaN */
                  if (isnan (want) ? !isnan (gv) : gv != want)
                    g_error ("%s on %s: element %d is %g, want %g", op->name, cs_dtype_short_name (dt), e,
                             gv, want);
                  continue;
                }
            }
          else if (test_formula (op->name)->f != NULL)
            want = test_formula (op->name)->f (xv[0]);
          else
            {
              /* erf(erfinv(y)) = y; erfc(erfcinv(y)) = y */
              want = xv[0];
              gv = op->id == CS_OP_PRIM_ERFINV ? erf (gv) : erfc (gv);
            }
          g_assert_false (isnan (gv));
          num += (gv - want) * (gv - want);
          den += want * want;
        }
      rel = den > 0 ? sqrt (num / den) : sqrt (num);
      g_test_message ("%s on %s: rel.L2 %.3e (bound %.0e)", op->name, cs_dtype_short_name (dt), rel, bound);
      if (rel > bound)
        g_error ("%s on %s: rel.L2 %.3e over the bound %.0e", op->name, cs_dtype_short_name (dt), rel, bound);
    }
  cs_cuda_program_free (p);
}

int
main (int argc, char **argv)
{
  int n = 0, sms, maj, min;

  g_test_init (&argc, &argv, G_TEST_OPTION_ISOLATE_DIRS, NULL);
  have_device = cudaGetDeviceCount (&n) == cudaSuccess && n > 0
                && cs_cuda_init_device (&sms, &maj, &min, NULL);
  g_test_add_func ("/kernels/registry/coverage", test_coverage);
  for (gsize d = 0; d < G_N_ELEMENTS (sweep_dtypes); d++)
    {
      g_autofree char *a = g_strdup_printf ("/kernels/registry/nvrtc/%s", cs_dtype_short_name (sweep_dtypes[d]));
      g_autofree char *b = g_strdup_printf ("/kernels/registry/gpu-sweep/%s", cs_dtype_short_name (sweep_dtypes[d]));
      g_test_add_data_func (a, GINT_TO_POINTER (sweep_dtypes[d]), test_nvrtc);
      g_test_add_data_func (b, GINT_TO_POINTER (sweep_dtypes[d]), test_gpu_sweep);
    }
  return g_test_run ();
}
