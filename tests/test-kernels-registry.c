/* test-kernels-registry.c: the CUDA side of the op registry's coverage test.
 *
 * For every dtype the emitter handles (f32, f64, bf16, i64), one fusion region holds every
 * unary elementwise prim whose registry formula has a CUDA expression for that type; the
 * program is generated, each op's expression is looked for in the source, and the source is
 * compiled by NVRTC to a CUBIN (no GPU needed; an op whose expression does not compile is named
 * by compiling the ops one by one).  On a machine with a CUDA device the same programs run
 * against the f64 CPU reference, one sweep over every op (ggml's test-backend-ops idea);
 * without a device the sweep skips.  Inputs lie in each op's domain (tests/test-op-formulas.h).
 */
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

static const CsDtype sweep_dtypes[] = { CS_DTYPE_F32, CS_DTYPE_F64, CS_DTYPE_BF16, CS_DTYPE_I64 };

/* TRUE when the registry says the CUDA emitter generates @op on @dt operands. */
static gboolean
emits_on (const CsOp *op, CsDtype dt)
{
  const CsEwUnary *f = op->ew1;
  gboolean is_int = dt == CS_DTYPE_I64;

  if (f == NULL || !(op->exec & CS_OP_EXEC_CUDA) || !cs_op_has_tag (op, CS_OP_TAG_FUSIBLE))
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

/* A trace whose one fusion region computes tK = op_K(xK) for every op of @ops on @dt. */
static char *
sweep_trace (GPtrArray *ops, CsDtype dt)
{
  GString *s = g_string_new ("def computation(");
  const char *d = cs_dtype_short_name (dt);

  for (guint k = 0; k < ops->len; k++)
    g_string_append_printf (s, "%sx%u", k ? ", " : "", k);
  g_string_append (s, "):\n");
  for (guint k = 0; k < ops->len; k++)
    g_string_append_printf (s, "  # x%u: \"cuda:0 %s[%d]\"\n", k, d, N_ELEMS);
  g_string_append (s, "  [");
  for (guint k = 0; k < ops->len; k++)
    g_string_append_printf (s, "%st%u", k ? ", " : "", k);
  g_string_append (s, "] = nvFusion0(");
  for (guint k = 0; k < ops->len; k++)
    g_string_append_printf (s, "%sx%u", k ? ", " : "", k);
  g_string_append (s, ")\n");
  for (guint k = 0; k < ops->len; k++)
    {
      const CsOp *op = ops->pdata[k];
      g_string_append_printf (s, "    # t%u = %s(x%u)  # t%u: \"cuda:0 %s[%d]\"\n", k, op->name, k, k,
                              op->promo == CS_PROMO_ALWAYS_BOOL ? "b8" : d, N_ELEMS);
    }
  g_string_append (s, "  return (");
  for (guint k = 0; k < ops->len; k++)
    g_string_append_printf (s, "t%u, ", k);
  g_string_append (s, ")\n");
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
   * formulas (neg, reciprocal, abs on integers, bitwise_not) at least one kernel */
  for (guint k = 0; k < ops->len; k++)
    {
      const CsOp *op = ops->pdata[k];
      const CsEwUnary *f = op->ew1;
      const char *e = dt == CS_DTYPE_I64 ? f->cuda_int : dt == CS_DTYPE_F64 ? f->cuda_f64 : f->cuda_f32;
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
  g_assert_cmpuint (ops->len, >=, dt == CS_DTYPE_I64 ? 3 : 30);
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

/* Every fusible unary prim is in at least one sweep (the registry gives it a CUDA formula). */
static void
test_coverage (void)
{
  for (guint id = 0; id < CS_N_OPS; id++)
    {
      const CsOp *op = cs_op_get (id);
      gboolean any = FALSE;

      if (op->category != CS_OP_CAT_ELEMENTWISE || !cs_op_has_tag (op, CS_OP_TAG_PRIM)
          || !cs_op_has_tag (op, CS_OP_TAG_UNARY) || !cs_op_has_tag (op, CS_OP_TAG_FUSIBLE)
          || id == CS_OP_PRIM_IMAG)   /* complex only: no real-valued kernel */
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
  for (guint i = 0; i < p->inputs->len; i++)
    {
      CsCudaTensorInfo *in = &g_array_index (p->inputs, CsCudaTensorInfo, i);
      guint k = (guint) g_ascii_strtoull (in->name + 1, NULL, 10);   /* "x<k>" */
      const TestFormula *f = test_formula (((const CsOp *) ops->pdata[k])->name);
      int64_t n = N_ELEMS;
      g_autoptr(CsTensor) x = cs_tensor_new (dt, &n, 1, &error);

      g_assert_nonnull (f);
      for (int e = 0; e < N_ELEMS; e++)
        {
          double v = f->lo + (f->hi - f->lo) * e / (N_ELEMS - 1);
          cs_tensor_set_f64 (x, e, dt == CS_DTYPE_I64 ? nearbyint (v) : v);
        }
      g_assert_true (cs_cuda_program_set_input (p, i, x->data, cs_tensor_nbytes (x), &error));
      cs_ref_env_insert (env, in->name, x);
    }
  g_assert_true (cs_cuda_program_run (p, FALSE, &error));
  g_assert_no_error (error);
  /* the CPU reference has no erfinv/erfcinv: their outputs are checked by the inverse */
  for (guint i = 0; i < p->outputs->len; i++)
    {
      CsCudaTensorInfo *o = &g_array_index (p->outputs, CsCudaTensorInfo, i);
      guint k = (guint) g_ascii_strtoull (o->name + 1, NULL, 10);   /* "t<k>" */
      const CsOp *op = ops->pdata[k];
      const TestFormula *f = test_formula (op->name);
      g_autoptr(CsTensor) got = cs_tensor_new (o->dtype, o->shape, o->rank, &error);
      g_autofree char *xname = g_strdup_printf ("x%u", k);
      CsTensor *x = g_hash_table_lookup (env, xname);
      double num = 0, den = 0, rel;

      g_assert_true (cs_cuda_program_get_output (p, i, got->data, cs_tensor_nbytes (got), &error));
      for (int e = 0; e < N_ELEMS; e++)
        {
          double xv = cs_tensor_get_f64 (x, e), gv = cs_tensor_get_f64 (got, e), want;

          if (f->f != NULL)
            want = f->f (xv);
          else
            {
              /* erf(erfinv(y)) = y; erfc(erfcinv(y)) = y */
              want = xv;
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
