/* cs-cuda-f64.c: the f64 reference on the GPU.
 *
 * The same forward and backward with every floating-point tensor in f64, as core's CPU
 * reference runs them in CS_REF_F64 mode (core/cs-ref.h): the traces are deep-copied, every
 * float tensor proxy (bf16, f16, f32, fp8) is retyped f64 and every float dtype argument
 * (`dtypes.bfloat16` of a convert_element_type, a full's dtype...) becomes f64, so conversions
 * between float dtypes become no-ops and integers and bools keep their dtypes.  The copy then
 * goes through the ordinary program builder: matmul/linear run as cuBLASLt DGEMM
 * (CUBLAS_COMPUTE_64F, cs-cuda-blas.c) and the generated NVRTC kernels are instantiated with
 * double (cs-cuda-codegen.c computes in double for f64 operands).
 */
#include "cs-config.h"

#include "cs-cuda-private.h"

static gboolean
is_lower_float (CsDtype dt)
{
  return cs_dtype_is_float (dt) && dt != CS_DTYPE_F64;
}

/* Every float dtype literal inside @v becomes f64 (in place: @v belongs to a deep copy). */
static void
retype_value (CsValue *v)
{
  if (v == NULL)
    return;
  switch (v->kind)
    {
    case CS_VALUE_DTYPE:
      if (is_lower_float (v->u.dtype.dtype))
        {
          v->u.dtype.dtype = CS_DTYPE_F64;
          v->u.dtype.weak = 0;
          v->u.dtype.pytype = 0;
          v->raw = NULL;
        }
      break;
    case CS_VALUE_TUPLE: case CS_VALUE_LIST: case CS_VALUE_DICT:
    case CS_VALUE_SUBSCRIPT: case CS_VALUE_ATTR:
      for (guint i = 0; i < v->u.seq.n; i++)
        retype_value (v->u.seq.items[i]);
      break;
    case CS_VALUE_CALL:
      for (guint i = 0; i < v->u.call.n_args; i++)
        retype_value (v->u.call.args[i].value);
      break;
    default:
      break;
    }
}

static void
retype_stmt (CsStmt *st)
{
  if (st->kind == CS_STMT_CALL)
    {
      for (guint i = 0; i < st->n_args; i++)
        retype_value (st->args[i].value);
      st->type_comment_raw = NULL;
    }
  for (guint i = 0; i < st->n_subs; i++)
    retype_stmt (st->subs[i]);
}

/**
 * cs_cuda_trace_to_f64:
 * @trace: a final trace
 *
 * See the file comment.
 * Returns: (transfer full): the f64 copy (pass "f64")
 */
CsTrace *
cs_cuda_trace_to_f64 (const CsTrace *trace)
{
  CsTrace *t = cs_trace_copy (trace, "f64");
  guint pos = 0;
  CsProxy *p;

  while ((p = cs_name_table_next (t->proxies, &pos)) != NULL)
    if (p->kind == CS_PROXY_TENSOR && p->typed && is_lower_float (p->dtype))
      {
        p->dtype = CS_DTYPE_F64;
        p->type_raw = NULL;
      }
  for (guint i = 0; i < t->n_stmts; i++)
    retype_stmt (t->stmts[i]);
  return t;
}

static CsCudaProgram *
build_f64 (CsTrace *fwd, CsTrace *bwd, const CsPolicy *policy, gboolean dry, GError **error)
{
  g_autoptr(CsTrace) f = cs_cuda_trace_to_f64 (fwd);
  g_autoptr(CsTrace) b = bwd ? cs_cuda_trace_to_f64 (bwd) : NULL;
  CsPolicy pol = *policy;
  CsCudaProgram *p;

  pol.allow_tf32 = FALSE;
  p = dry ? cs_cuda_program_generate (f, b, &pol, error) : cs_cuda_program_build (f, b, &pol, error);
  if (p != NULL)
    {
      /* the program's tensor infos name proxies of the copies: keep them alive */
      p->f64_traces[0] = g_steal_pointer (&f);
      p->f64_traces[1] = g_steal_pointer (&b);
      p->break_kernel = -1;   /* the test hook breaks the run under test, never the reference */
    }
  else
    g_prefix_error (error, "f64 reference: ");
  return p;
}

/**
 * cs_cuda_program_build_f64:
 *
 * As cs_cuda_program_build() on the f64 copies of @fwd and @bwd (cs_cuda_trace_to_f64()):
 * inputs and outputs are the same tensors in the same order, with every float one in f64.
 * Returns: (transfer full): the program or NULL with @error set
 */
CsCudaProgram *
cs_cuda_program_build_f64 (CsTrace *fwd, CsTrace *bwd, const CsPolicy *policy, GError **error)
{
  return build_f64 (fwd, bwd, policy, FALSE, error);
}

/**
 * cs_cuda_program_generate_f64:
 *
 * As cs_cuda_program_generate() (no device) on the f64 copies: for codegen tests.
 * Returns: (transfer full): the program or NULL with @error set
 */
CsCudaProgram *
cs_cuda_program_generate_f64 (CsTrace *fwd, CsTrace *bwd, const CsPolicy *policy, GError **error)
{
  return build_f64 (fwd, bwd, policy, TRUE, error);
}
