/* test-kernels-cuda.c: the CUDA executor on a GPU, against the CPU f64 reference.
 *
 * Every case builds a program from a trace, feeds the CPU reference's random inputs
 * (cs_ref_random_input), poisons the device arena with NaN bytes first (so an output element
 * nothing wrote cannot pass), runs, and compares each output with cs_ref_run_env (CS_REF_F64)
 * by relative L2 error with a per-dtype bound (METHOD.md: bf16 1e-3..1e-2, f32 far under 1e-3).
 * Without a CUDA device every case calls g_test_skip.
 */
#include "cs-config.h"

#include <math.h>
#include <string.h>

#include "cs-compare.h"
#include "cs-cuda-private.h"
#include "cs-parse.h"
#include "cs-pipeline.h"
#include "cs-ref.h"
#include "cs-tensor.h"

static gboolean have_device;

static CsTrace *
parse_or_load (const char *text_or_file, gboolean file)
{
  g_autoptr(GError) error = NULL;
  CsTrace *t;

  if (file)
    {
      const char *dir = g_getenv ("CS_SHARED_TRACES");
      g_autofree char *path = dir ? g_build_filename (dir, text_or_file, NULL) : NULL;
      g_autoptr(CsTraceList) list = NULL;

      if (path == NULL || !g_file_test (path, G_FILE_TEST_EXISTS))
        return NULL;
      list = cs_parse_file (path, &error);
      g_assert_no_error (error);
      return cs_trace_ref (g_ptr_array_index (list->traces, 0));
    }
  t = cs_parse_trace (text_or_file, "test", &error);
  g_assert_no_error (error);
  return t;
}

static double
bound (CsDtype dt, gboolean tf32)
{
  switch (dt)
    {
    case CS_DTYPE_BF16: return 2e-2;
    case CS_DTYPE_F16: return 5e-3;
    case CS_DTYPE_F32: return tf32 ? 5e-3 : 1e-4;
    default: return 1e-12;
    }
}

/* Runs @fwd (+ @bwd) on the GPU and the CPU; returns the largest error/bound ratio. */
static double
check_step (CsTrace *fwd, CsTrace *bwd, const CsPolicy *policy, gboolean graph, GArray *bits_out)
{
  g_autoptr(GError) error = NULL;
  CsCudaProgram *p = cs_cuda_program_build (fwd, bwd, policy, &error);
  g_autoptr(GHashTable) env = cs_ref_env_new ();
  g_autoptr(GHashTable) returned = cs_ref_env_new ();
  g_autoptr(GPtrArray) fo = NULL, fn = NULL, bo = NULL, bn = NULL;
  g_autoptr(GPtrArray) fl = cs_ref_dup_leaf_inputs (fwd);
  g_autoptr(GPtrArray) bl = bwd ? cs_ref_dup_leaf_inputs (bwd) : g_ptr_array_new ();
  double worst = 0;

  g_assert_no_error (error);
  g_assert_nonnull (p);
  for (guint i = 0; i < p->inputs->len; i++)
    {
      CsCudaTensorInfo *in = &g_array_index (p->inputs, CsCudaTensorInfo, i);
      GPtrArray *leaves = in->backward ? bl : fl;
      CsProxy *px = NULL;
      g_autoptr(CsTensor) x = NULL;

      for (guint j = 0; j < leaves->len; j++)
        if (g_strcmp0 (((CsProxy *) g_ptr_array_index (leaves, j))->name, in->name) == 0)
          px = g_ptr_array_index (leaves, j);
      g_assert_nonnull (px);
      x = cs_ref_random_input (in->backward ? bwd : fwd, px, 100 + i, &error);
      g_assert_no_error (error);
      /* Poison first so that every element must be written by the step. */
      if (i == 0)
        {
          g_assert_cmpint (cudaMemset (p->arena, 0xff, p->arena_bytes), ==, cudaSuccess);
          g_assert_true (cs_cuda_program_reset_state (p, NULL));   /* what the poison overwrote */
        }
      g_assert_true (cs_cuda_program_set_input (p, i, x->data, cs_tensor_nbytes (x), &error));
      cs_ref_env_insert (env, in->name, x);
    }
  if (p->inputs->len == 0)
    {
      g_assert_cmpint (cudaMemset (p->arena, 0xff, p->arena_bytes), ==, cudaSuccess);
      g_assert_true (cs_cuda_program_reset_state (p, NULL));   /* what the poison overwrote */
    }
  /* a graph is replayed three times: its streams' launches must not race, whatever order they
     run in (each replay is the whole step again, on the same inputs) */
  for (guint r = 0; r < (graph ? 3u : 1u); r++)
    {
      g_assert_true (cs_cuda_program_run (p, graph, &error));
      g_assert_no_error (error);
    }

  g_assert_true (cs_ref_run_env (fwd, env, CS_REF_F64, 0, &fo, &fn, returned, &error));
  g_assert_no_error (error);
  if (bwd)
    {
      GHashTableIter it;
      gpointer k, v;

      g_hash_table_iter_init (&it, env);
      while (g_hash_table_iter_next (&it, &k, &v))
        if (!g_hash_table_contains (returned, k))
          cs_ref_env_insert (returned, k, v);
      g_assert_true (cs_ref_run_env (bwd, returned, CS_REF_F64, 0, &bo, &bn, NULL, &error));
      g_assert_no_error (error);
    }

  for (guint i = 0; i < p->outputs->len; i++)
    {
      CsCudaTensorInfo *o = &g_array_index (p->outputs, CsCudaTensorInfo, i);
      g_autoptr(CsTensor) got = cs_tensor_new (o->dtype, o->shape, o->rank, &error);
      GPtrArray *outs = o->backward ? bo : fo, *names = o->backward ? bn : fn;
      CsTensor *ref = NULL;
      double num = 0, den = 0, rel;

      g_assert_true (cs_cuda_program_get_output (p, i, got->data, cs_tensor_nbytes (got), &error));
      for (guint j = 0; j < outs->len; j++)
        if (g_strcmp0 (g_ptr_array_index (names, j), o->name) == 0)
          {
            ref = g_ptr_array_index (outs, j);
            break;
          }
      g_assert_nonnull (ref);
      g_assert_cmpint (ref->numel, ==, got->numel);
      for (int64_t e = 0; e < got->numel; e++)
        {
          double a = cs_tensor_get_f64 (got, e), r = cs_tensor_get_f64 (ref, e);

          g_assert_false (isnan (a));   /* poisoned or wrong */
          num += (a - r) * (a - r);
          den += r * r;
        }
      rel = den > 0 ? sqrt (num / den) : sqrt (num);
      g_test_message ("%s %s: rel.L2 %.3e (bound %.0e)", o->backward ? "grad" : "out", o->name, rel,
                      bound (o->dtype, policy->allow_tf32));
      worst = MAX (worst, rel / bound (o->dtype, policy->allow_tf32));
      if (bits_out)
        g_array_append_vals (bits_out, got->data, cs_tensor_nbytes (got));
    }
  cs_cuda_program_free (p);
  return worst;
}

static void
run_case (const char *text, gboolean file, const char *bwd_file, gboolean tf32)
{
  g_autoptr(CsTrace) fwd = NULL;
  g_autoptr(CsTrace) bwd = NULL;
  CsPolicy policy;
  double worst;

  if (!have_device)
    {
      g_test_skip ("no CUDA device");
      return;
    }
  fwd = parse_or_load (text, file);
  if (bwd_file)
    bwd = parse_or_load (bwd_file, TRUE);
  if (fwd == NULL || (bwd_file && bwd == NULL))
    {
      g_test_skip ("../shared/traces not present");
      return;
    }
  cs_policy_init_default (&policy);
  /* attention and cross-entropy decomposed (their fused kernels: test-kernels-attention, -xentropy) */
  cs_policy_set (&policy, "executors", "nvfuser,torch", NULL);
  policy.allow_tf32 = tf32;
  worst = check_step (fwd, bwd, &policy, FALSE, NULL);
  g_assert_cmpfloat (worst, <=, 1.0);
}

static void
test_seed (void)
{
  run_case ("thunder_nvfuser_a_seed_matmul_default_final_fwd.txt", TRUE,
            "thunder_nvfuser_a_seed_matmul_default_final_bwd.txt", FALSE);
}

static void
test_mlp (void)
{
  run_case ("thunder_nvfuser_b_mlp_gelu_default_final_fwd.txt", TRUE,
            "thunder_nvfuser_b_mlp_gelu_default_final_bwd.txt", FALSE);
}

static void
test_mlp_linear_fused (void)
{
  run_case ("thunder_nvfuser_b_mlp_gelu_linear_matmul_final_fwd.txt", TRUE,
            "thunder_nvfuser_b_mlp_gelu_linear_matmul_final_bwd.txt", FALSE);
}

/* Row reductions (block per row, R > 1024; warp per row), column reduction with a split over
 * blockIdx.y (R = 20000), var_mean, amax to a 0-d tensor, broadcast back, exp, bf16 round. */
static const char reductions[] =
  "def computation(x, y, b):\n"
  "  # x: \"cuda:0 bf16[37, 3000]\"\n"
  "  # y: \"cuda:0 f32[20000, 70]\"\n"
  "  # b: \"cuda:0 bf16[64]\"\n"
  "  [t1, t2, t3, t5, t9, t11, t12] = nvFusion0(x, y, b)\n"
  "    # t0 = prims.convert_element_type(x, dtypes.float32)  # t0: \"cuda:0 f32[37, 3000]\"\n"
  "    # t1 = prims.sum(t0, (1,))  # t1: \"cuda:0 f32[37]\"\n"
  "    # (t2, t3) = prims.var_mean(t0, (0,), correction=1)\n"
  "    # t4 = prims.broadcast_in_dim(t1, (37, 3000), (0,))  # t4: \"cuda:0 f32[37, 3000]\"\n"
  "    # t6 = prims.sub(t0, t4)  # t6: \"cuda:0 f32[37, 3000]\"\n"
  "    # t7 = prims.mul(0.001, t6)  # t7: \"cuda:0 f32[37, 3000]\"\n"
  "    # t70 = prims.exp(t7)  # t70: \"cuda:0 f32[37, 3000]\"\n"
  "    # t5 = prims.convert_element_type(t70, dtypes.bfloat16)  # t5: \"cuda:0 bf16[37, 3000]\"\n"
  "    # t8 = prims.convert_element_type(b, dtypes.float32)  # t8: \"cuda:0 f32[64]\"\n"
  "    # t9 = prims.amax(t8, (0,))  # t9: \"cuda:0 f32[]\"\n"
  "    # t10 = prims.mul(y, y)  # t10: \"cuda:0 f32[20000, 70]\"\n"
  "    # t11 = prims.sum(t10, (0,))  # t11: \"cuda:0 f32[70]\"\n"
  "    # (t12, t13) = prims.var_mean(y, (1,), correction=0)\n"
  "  return (t1, t2, t3, t5, t9, t11, t12)\n";

static void
test_reductions (void)
{
  run_case (reductions, FALSE, NULL, FALSE);
}

#include "test-row-fused-trace.h"

static void
test_row_fused (void)
{
  run_case (row_fused_trace, FALSE, NULL, FALSE);
}

#include "test-membound-trace.h"

/* The memory-bound kernel forms (tests/test-membound-trace.h) under each setting of their
 * environment overrides (CASTSCOPE_ROW_RPW, CASTSCOPE_PW_TILES, CASTSCOPE_COL_BPS,
 * CASTSCOPE_COL_UNROLL, CASTSCOPE_ROW_LATEW; unset: the defaults): within bound of the f64 reference, and the same bits from two builds and runs. */
static void
test_membound_forms (void)
{
  static const char *const forms[][5] = {
    { NULL, NULL, NULL, NULL, NULL }, { "1", "1", "3", "0", "1" }, { "2", "2", "6", "8", "0" }, { "4", "4", "8", "16", "1" },
  };
  static const char *const names[5] = { "CASTSCOPE_ROW_RPW", "CASTSCOPE_PW_TILES", "CASTSCOPE_COL_BPS", "CASTSCOPE_COL_UNROLL",
                                        "CASTSCOPE_ROW_LATEW" };
  g_autoptr(CsTrace) fwd = NULL;
  CsPolicy policy;

  if (!have_device)
    {
      g_test_skip ("no CUDA device");
      return;
    }
  fwd = parse_or_load (membound_trace, FALSE);
  cs_policy_init_default (&policy);
  cs_policy_set (&policy, "executors", "nvfuser,torch", NULL);
  for (guint f = 0; f < G_N_ELEMENTS (forms); f++)
    {
      g_autoptr(GArray) a = g_array_new (FALSE, FALSE, 1);
      g_autoptr(GArray) b = g_array_new (FALSE, FALSE, 1);

      for (guint k = 0; k < 5; k++)
        if (forms[f][k])
          g_setenv (names[k], forms[f][k], TRUE);
        else
          g_unsetenv (names[k]);
      g_test_message ("form %u: rows a warp %s, tiles %s, col blocks an SM %s, col unroll %s, late weights %s", f,
                      forms[f][0] ? forms[f][0] : "default", forms[f][1] ? forms[f][1] : "default",
                      forms[f][2] ? forms[f][2] : "default", forms[f][3] ? forms[f][3] : "default",
                      forms[f][4] ? forms[f][4] : "default");
      g_assert_cmpfloat (check_step (fwd, NULL, &policy, FALSE, a), <=, 1.0);
      g_assert_cmpfloat (check_step (fwd, NULL, &policy, TRUE, b), <=, 1.0);
      g_assert_cmpuint (a->len, ==, b->len);
      g_assert_cmpmem (a->data, a->len, b->data, b->len);
    }
  for (guint k = 0; k < 5; k++)
    g_unsetenv (names[k]);
}

/* cuBLASLt: true f32, a transposed operand from a permute, batched matmul, linear with bias. */
static const char matmuls[] =
  "def computation(a, b, c, d, w, bias, e, f):\n"
  "  # a: \"cuda:0 f32[33, 65]\"\n"
  "  # b: \"cuda:0 f32[17, 65]\"\n"
  "  # c: \"cuda:0 bf16[4, 33, 64]\"\n"
  "  # d: \"cuda:0 bf16[4, 64, 24]\"\n"
  "  # w: \"cuda:0 bf16[40, 64]\"\n"
  "  # bias: \"cuda:0 bf16[40]\"\n"
  "  # e: \"cuda:0 f16[128, 72]\"\n"
  "  # f: \"cuda:0 f16[72, 56]\"\n"
  "  t0 = torch.permute(b, (1, 0))  # t0: \"cuda:0 f32[65, 17]\"\n"
  "    # t0 = ltorch.permute(b, (1, 0))  # t0: \"cuda:0 f32[65, 17]\"\n"
  "      # t0 = prims.transpose(b, (1, 0))  # t0: \"cuda:0 f32[65, 17]\"\n"
  "  t1 = torch.matmul(a, t0)  # t1: \"cuda:0 f32[33, 17]\"\n"
  "    # t1 = ltorch.matmul(a, t0)  # t1: \"cuda:0 f32[33, 17]\"\n"
  "      # t1 = prims.matmul(a, t0)  # t1: \"cuda:0 f32[33, 17]\"\n"
  "  t2 = torch.matmul(c, d)  # t2: \"cuda:0 bf16[4, 33, 24]\"\n"
  "    # t2 = ltorch.matmul(c, d)  # t2: \"cuda:0 bf16[4, 33, 24]\"\n"
  "      # t2 = prims.matmul(c, d)  # t2: \"cuda:0 bf16[4, 33, 24]\"\n"
  "  t3 = torch.nn.functional.linear(c, w, bias)  # t3: \"cuda:0 bf16[4, 33, 40]\"\n"
  "    # t3 = ltorch.linear(c, w, bias)  # t3: \"cuda:0 bf16[4, 33, 40]\"\n"
  "      # t3 = prims.linear(c, w, bias)  # t3: \"cuda:0 bf16[4, 33, 40]\"\n"
  "  t4 = torch.matmul(e, f)  # t4: \"cuda:0 f16[128, 56]\"\n"
  "    # t4 = ltorch.matmul(e, f)  # t4: \"cuda:0 f16[128, 56]\"\n"
  "      # t4 = prims.matmul(e, f)  # t4: \"cuda:0 f16[128, 56]\"\n"
  "  t5 = torch.permute(t4, (1, 0))  # t5: \"cuda:0 f16[56, 128]\"\n"
  "    # t5 = ltorch.permute(t4, (1, 0))  # t5: \"cuda:0 f16[56, 128]\"\n"
  "      # t5 = prims.transpose(t4, (1, 0))  # t5: \"cuda:0 f16[56, 128]\"\n"
  "  return (t1, t2, t3, t5)\n";

static void
test_matmuls (void)
{
  run_case (matmuls, FALSE, NULL, FALSE);
}

static void
test_matmuls_tf32 (void)
{
  run_case (matmuls, FALSE, NULL, TRUE);
}

/* Shape prims inside a region: cat (clamped reads, select), pad with interior padding,
 * strided slice, take_along_axis with an index tensor. */
static const char shapes[] =
  "def computation(x, y, ix):\n"
  "  # x: \"cuda:0 f32[8, 5]\"\n"
  "  # y: \"cuda:0 f32[8, 3]\"\n"
  "  # ix: \"cuda:0 i64[8, 2]\"\n"
  "  [t1, t2, t3, t4] = nvFusion0(x, y, ix)\n"
  "    # t0 = prims.cat([x, y], 1)  # t0: \"cuda:0 f32[8, 8]\"\n"
  "    # t1 = prims.exp(t0)  # t1: \"cuda:0 f32[8, 8]\"\n"
  "    # t2 = prims.pad(x, 0.5, [(1, 1, 0), (0, 2, 1)])  # t2: \"cuda:0 f32[10, 11]\"\n"
  "    # t3 = prims.slice_prim(t0, [0, 1], [8, 7], [1, 2])  # t3: \"cuda:0 f32[8, 3]\"\n"
  "    # t4 = prims.take_along_axis(t0, ix, 1)  # t4: \"cuda:0 f32[8, 2]\"\n"
  "  return (t1, t2, t3, t4)\n";

static void
test_shapes (void)
{
  run_case (shapes, FALSE, NULL, FALSE);
}

#include "test-transposed-output-trace.h"

/* A region output laid out for the transpose + reshape that read it (strided stores, no copy:
 * test-kernels-codegen's /kernels/codegen/transposed-output), beside a contiguous f32 one. */
static void
test_transposed_output (void)
{
  run_case (transposed_output_trace, FALSE, NULL, FALSE);
}

#include "test-bias-grad-trace.h"

/* A bias gradient from the weight gradient's cuBLASLt epilogue (CUBLASLT_EPILOGUE_BGRADB:
 * test-kernels-codegen's /kernels/codegen/bias-grad-epilogue), beside the matmul's own output
 * and the region's remaining output; then the same with CASTSCOPE_GEMM_BGRAD=0 (the region's
 * column sum). */
static void
test_bias_grad_epilogue (void)
{
  run_case (bias_grad_trace, FALSE, NULL, FALSE);
  if (!have_device)
    return;
  g_setenv ("CASTSCOPE_GEMM_BGRAD", "0", TRUE);
  run_case (bias_grad_trace, FALSE, NULL, FALSE);
  g_unsetenv ("CASTSCOPE_GEMM_BGRAD");
}

#include "test-strided-view-trace.h"

/* Strided reshape views and split slices as views (test-kernels-codegen's
 * /kernels/codegen/strided-views) read back through their strides. */
static void
test_strided_views (void)
{
  run_case (strided_view_trace, FALSE, NULL, FALSE);
}

/* The CUDA graph replays exactly what the stream launches do: identical bits. */
static void
test_graph_same_bits (void)
{
  g_autoptr(CsTrace) fwd = NULL;
  g_autoptr(CsTrace) bwd = NULL;
  g_autoptr(GArray) a = g_array_new (FALSE, FALSE, 1);
  g_autoptr(GArray) b = g_array_new (FALSE, FALSE, 1);
  CsPolicy policy;

  if (!have_device)
    {
      g_test_skip ("no CUDA device");
      return;
    }
  fwd = parse_or_load ("thunder_nvfuser_b_mlp_gelu_default_final_fwd.txt", TRUE);
  bwd = parse_or_load ("thunder_nvfuser_b_mlp_gelu_default_final_bwd.txt", TRUE);
  if (!fwd || !bwd)
    {
      g_test_skip ("../shared/traces not present");
      return;
    }
  cs_policy_init_default (&policy);
  /* attention and cross-entropy decomposed (their fused kernels: test-kernels-attention, -xentropy) */
  cs_policy_set (&policy, "executors", "nvfuser,torch", NULL);
  g_assert_cmpfloat (check_step (fwd, bwd, &policy, FALSE, a), <=, 1.0);
  g_assert_cmpfloat (check_step (fwd, bwd, &policy, TRUE, b), <=, 1.0);
  g_assert_cmpuint (a->len, ==, b->len);
  g_assert_cmpmem (a->data, a->len, b->data, b->len);
}

/* The shared 8-block LLaMA's training step (attention and cross-entropy fused), whose graph
 * spreads its launches over several streams (kernels/cs-cuda-streams.c): the replays give the
 * bits the launches in trace order on one stream give (no output poisoned or NaN). */
static void
test_graph_streams_llama (void)
{
  g_autoptr(CsTrace) init = NULL;
  g_autoptr(CsPipeline) pl = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(GArray) a = g_array_new (FALSE, FALSE, 1);
  g_autoptr(GArray) b = g_array_new (FALSE, FALSE, 1);
  CsPolicy policy;

  if (!have_device)
    {
      g_test_skip ("no CUDA device");
      return;
    }
  init = parse_or_load ("thunder_llama_stack_initial.txt", TRUE);
  if (!init)
    {
      g_test_skip ("../shared/traces not present");
      return;
    }
  cs_policy_init_default (&policy);
  pl = cs_pipeline_run (init, &policy, NULL, &error);
  g_assert_no_error (error);
  /* (the verdict of this model under PyTorch's rule: test-kernels-attention) */
  g_test_message ("stream launches: worst error/bound %.2f",
                  check_step (cs_pipeline_get_forward (pl), cs_pipeline_get_backward (pl), &policy, FALSE, a));
  g_test_message ("graph replays: worst error/bound %.2f",
                  check_step (cs_pipeline_get_forward (pl), cs_pipeline_get_backward (pl), &policy, TRUE, b));
  g_assert_cmpuint (a->len, ==, b->len);
  g_assert_cmpmem (a->data, a->len, b->data, b->len);
}

/* ---- the f64 reference on the GPU and PyTorch's verdict ---------------------------------- */

/* data/NAME through the pipeline under the default policy. */
static CsPipeline *
sample_pipeline (const char *name)
{
  const char *dir = g_getenv ("CS_DATA_DIR");
  g_autofree char *path = dir ? g_build_filename (dir, name, NULL) : NULL;
  g_autoptr(CsTraceList) list = NULL;
  g_autoptr(GError) error = NULL;
  CsPolicy policy;
  CsPipeline *pl;

  if (path == NULL || !g_file_test (path, G_FILE_TEST_EXISTS))
    return NULL;
  list = cs_parse_file (path, &error);
  g_assert_no_error (error);
  cs_policy_init_default (&policy);
  /* attention and cross-entropy decomposed (their fused kernels: test-kernels-attention, -xentropy) */
  cs_policy_set (&policy, "executors", "nvfuser,torch", NULL);
  pl = cs_pipeline_run (g_ptr_array_index (list->traces, 0), &policy, NULL, &error);
  g_assert_no_error (error);
  return pl;
}

/* Random inputs of @p's inputs (the CPU reference's), by name into @env. */
static void
fill_inputs (CsCudaProgram *p, CsTrace *fwd, CsTrace *bwd, GHashTable *env)
{
  g_autoptr(GPtrArray) fl = cs_ref_dup_leaf_inputs (fwd);
  g_autoptr(GPtrArray) bl = bwd ? cs_ref_dup_leaf_inputs (bwd) : g_ptr_array_new ();
  g_autoptr(GError) error = NULL;

  for (guint i = 0; i < p->inputs->len; i++)
    {
      CsCudaTensorInfo *in = &g_array_index (p->inputs, CsCudaTensorInfo, i);
      GPtrArray *leaves = in->backward ? bl : fl;
      CsProxy *px = NULL;
      g_autoptr(CsTensor) x = NULL;

      for (guint j = 0; j < leaves->len; j++)
        if (g_strcmp0 (((CsProxy *) g_ptr_array_index (leaves, j))->name, in->name) == 0)
          px = g_ptr_array_index (leaves, j);
      g_assert_nonnull (px);
      x = cs_ref_random_input (in->backward ? bwd : fwd, px, 300 + i, &error);
      g_assert_no_error (error);
      cs_ref_env_insert (env, in->name, x);
    }
}

/* Copies the inputs of @env into @p (converted to @p's input dtypes), poisons the arena
 * first (NaN bytes), runs. */
static void
set_and_run (CsCudaProgram *p, GHashTable *env)
{
  g_autoptr(GError) error = NULL;

  g_assert_cmpint (cudaMemset (p->arena, 0xff, p->arena_bytes), ==, cudaSuccess);
  g_assert_true (cs_cuda_program_reset_state (p, NULL));   /* what the poison overwrote */
  for (guint i = 0; i < p->inputs->len; i++)
    {
      CsCudaTensorInfo *in = &g_array_index (p->inputs, CsCudaTensorInfo, i);
      g_autoptr(CsTensor) x = cs_tensor_convert (g_hash_table_lookup (env, in->name), in->dtype, &error);

      g_assert_no_error (error);
      g_assert_true (cs_cuda_program_set_input (p, i, x->data, cs_tensor_nbytes (x), &error));
    }
  g_assert_true (cs_cuda_program_run (p, FALSE, &error));
  g_assert_no_error (error);
}

/* The CPU reference of the step in @mode: outputs and names of forward and backward. */
static void
cpu_step (CsTrace *fwd, CsTrace *bwd, GHashTable *env, CsRefMode mode, GPtrArray **fo,
          GPtrArray **fn, GPtrArray **bo, GPtrArray **bn)
{
  g_autoptr(GHashTable) returned = cs_ref_env_new ();
  g_autoptr(GError) error = NULL;

  g_assert_true (cs_ref_run_env (fwd, env, mode, 0, fo, fn, returned, &error));
  g_assert_no_error (error);
  if (bwd)
    {
      GHashTableIter it;
      gpointer k, v;

      g_hash_table_iter_init (&it, env);
      while (g_hash_table_iter_next (&it, &k, &v))
        if (!g_hash_table_contains (returned, k))
          cs_ref_env_insert (returned, k, v);
      g_assert_true (cs_ref_run_env (bwd, returned, mode, 0, bo, bn, NULL, &error));
      g_assert_no_error (error);
    }
}

static CsTensor *
named (GPtrArray *outs, GPtrArray *names, const char *name)
{
  for (guint j = 0; outs && j < outs->len; j++)
    if (g_strcmp0 (g_ptr_array_index (names, j), name) == 0)
      return g_ptr_array_index (outs, j);
  return NULL;
}

static CsTensor *
get_output (CsCudaProgram *p, guint i)
{
  CsCudaTensorInfo *o = &g_array_index (p->outputs, CsCudaTensorInfo, i);
  g_autoptr(GError) error = NULL;
  CsTensor *t = cs_tensor_new (o->dtype, o->shape, o->rank, &error);

  g_assert_no_error (error);
  g_assert_true (cs_cuda_program_get_output (p, i, t->data, cs_tensor_nbytes (t), &error));
  return t;
}

static const char * const small_samples[] = {
  "seed_foo.txt", "mlp_gelu.txt", "attention_softmax.txt", "cross_entropy.txt",
  "ln_mlp_residual.txt", "rmsnorm_swiglu.txt",
};

/* The GPU f64 program agrees with the CPU reference's f64 mode to 1e-12 (normwise relative
 * error of every output and gradient) on every small sample of data/. */
static void
test_f64_vs_cpu (void)
{
  guint n_checked = 0;

  if (!have_device)
    {
      g_test_skip ("no CUDA device");
      return;
    }
  for (guint c = 0; c < G_N_ELEMENTS (small_samples); c++)
    {
      g_autoptr(CsPipeline) pl = sample_pipeline (small_samples[c]);
      g_autoptr(GHashTable) env = cs_ref_env_new ();
      g_autoptr(GPtrArray) fo = NULL, fn = NULL, bo = NULL, bn = NULL;
      g_autoptr(GError) error = NULL;
      CsTrace *fwd, *bwd;
      CsCudaProgram *q;
      CsPolicy policy;

      if (pl == NULL)
        {
          g_test_skip ("data/ not found");
          return;
        }
      fwd = cs_pipeline_get_forward (pl);
      bwd = cs_pipeline_get_backward (pl);
      cs_policy_init_default (&policy);
  /* attention and cross-entropy decomposed (their fused kernels: test-kernels-attention, -xentropy) */
  cs_policy_set (&policy, "executors", "nvfuser,torch", NULL);
      q = cs_cuda_program_build_f64 (fwd, bwd, &policy, &error);
      g_assert_no_error (error);
      fill_inputs (q, fwd, bwd, env);
      set_and_run (q, env);
      cpu_step (fwd, bwd, env, CS_REF_F64, &fo, &fn, &bo, &bn);
      for (guint i = 0; i < q->outputs->len; i++)
        {
          CsCudaTensorInfo *o = &g_array_index (q->outputs, CsCudaTensorInfo, i);
          g_autoptr(CsTensor) got = get_output (q, i);
          CsTensor *ref = o->backward ? named (bo, bn, o->name) : named (fo, fn, o->name);
          double num = 0, den = 0, rel;

          g_assert_nonnull (ref);
          g_assert_cmpint (ref->numel, ==, got->numel);
          if (cs_dtype_is_float (o->dtype))
            g_assert_cmpint (o->dtype, ==, CS_DTYPE_F64);
          for (int64_t e = 0; e < got->numel; e++)
            {
              double a = cs_tensor_get_f64 (got, e), r = cs_tensor_get_f64 (ref, e);

              g_assert_false (isnan (a));
              num += (a - r) * (a - r);
              den += r * r;
            }
          rel = den > 0 ? sqrt (num / den) : sqrt (num);
          g_test_message ("%s %s %s: GPU f64 vs CPU f64 rel.L2 %.3e", small_samples[c],
                          o->backward ? "grad" : "out", o->name, rel);
          g_assert_cmpfloat (rel, <=, 1e-12);
          n_checked++;
        }
      cs_cuda_program_free (q);
    }
  g_assert_cmpuint (n_checked, >=, 20);
}

/* PyTorch's verdict on the GPU run of every small sample (exact-dtype CPU run as the
 * reference, CPU f64 as the truth): every output passes; with the test hook breaking the
 * program's last kernel (a deliberately wrong result), some output fails.  The last kernel,
 * not k0: a first kernel may only compute a row's shift for a log-softmax, which the result
 * does not depend on (cross_entropy's k0 passed when spoilt). */
static void
test_verdict_and_broken_kernel (void)
{
  if (!have_device)
    {
      g_test_skip ("no CUDA device");
      return;
    }
  for (guint c = 0; c < G_N_ELEMENTS (small_samples); c++)
    for (guint broken = 0, last_kernel = 0; broken < 2; broken++)
      {
        g_autoptr(CsPipeline) pl = sample_pipeline (small_samples[c]);
        g_autoptr(GHashTable) env = cs_ref_env_new ();
        g_autoptr(GPtrArray) fo = NULL, fn = NULL, bo = NULL, bn = NULL;
        g_autoptr(GPtrArray) eo = NULL, en = NULL, ebo = NULL, ebn = NULL;
        g_autoptr(GError) error = NULL;
        CsTrace *fwd, *bwd;
        CsCudaProgram *p;
        CsPolicy policy;
        guint n_fail = 0;

        if (pl == NULL)
          {
            g_test_skip ("data/ not found");
            return;
          }
        fwd = cs_pipeline_get_forward (pl);
        bwd = cs_pipeline_get_backward (pl);
        cs_policy_init_default (&policy);
  /* attention and cross-entropy decomposed (their fused kernels: test-kernels-attention, -xentropy) */
  cs_policy_set (&policy, "executors", "nvfuser,torch", NULL);
        if (broken)
          {
            g_autofree char *k = g_strdup_printf ("%u", last_kernel);

            g_setenv ("CASTSCOPE_TEST_BREAK_KERNEL", k, TRUE);
          }
        p = cs_cuda_program_build (fwd, bwd, &policy, &error);
        g_unsetenv ("CASTSCOPE_TEST_BREAK_KERNEL");
        g_assert_no_error (error);
        if (!broken)
          last_kernel = p->n_kernels > 0 ? p->n_kernels - 1 : 0;
        if (broken && p->n_kernels == 0)
          {
            cs_cuda_program_free (p);
            continue;
          }
        fill_inputs (p, fwd, bwd, env);
        set_and_run (p, env);
        cpu_step (fwd, bwd, env, CS_REF_F64, &fo, &fn, &bo, &bn);
        cpu_step (fwd, bwd, env, CS_REF_EXACT, &eo, &en, &ebo, &ebn);
        for (guint i = 0; i < p->outputs->len; i++)
          {
            CsCudaTensorInfo *o = &g_array_index (p->outputs, CsCudaTensorInfo, i);
            g_autoptr(CsTensor) got = get_output (p, i);
            CsTensor *t = o->backward ? named (bo, bn, o->name) : named (fo, fn, o->name);
            CsTensor *r = o->backward ? named (ebo, ebn, o->name) : named (eo, en, o->name);
            CsAccuracy acc;

            g_assert_nonnull (t);
            g_assert_nonnull (r);
            cs_accuracy_judge (got, r, t, NULL, &acc);
            g_test_message ("%s%s %s: err %.3e ref_err %.3e ratio %.3g %s", small_samples[c],
                            broken ? " (last kernel broken)" : "", o->name, acc.err, acc.ref_err, acc.ratio,
                            acc.pass ? "ok" : "FAIL");
            if (!broken)
              g_assert_true (acc.pass);
            n_fail += !acc.pass;
          }
        if (broken)
          g_assert_cmpuint (n_fail, >=, 1);
        cs_cuda_program_free (p);
      }
}

int
main (int argc, char **argv)
{
  int n = 0;
  int sms, maj, min;

  g_test_init (&argc, &argv, G_TEST_OPTION_ISOLATE_DIRS, NULL);
  have_device = cudaGetDeviceCount (&n) == cudaSuccess && n > 0
                && cs_cuda_init_device (&sms, &maj, &min, NULL);
  g_test_add_func ("/kernels/cuda/seed/fwd-bwd", test_seed);
  g_test_add_func ("/kernels/cuda/mlp/fwd-bwd", test_mlp);
  g_test_add_func ("/kernels/cuda/mlp/linear-in-fusion", test_mlp_linear_fused);
  g_test_add_func ("/kernels/cuda/reduce/row-col-varmean-amax", test_reductions);
  g_test_add_func ("/kernels/cuda/reduce/row-fused", test_row_fused);
  g_test_add_func ("/kernels/cuda/membound/forms", test_membound_forms);
  g_test_add_func ("/kernels/cuda/matmul/f32-bf16-f16-batched-bias", test_matmuls);
  g_test_add_func ("/kernels/cuda/matmul/tf32", test_matmuls_tf32);
  g_test_add_func ("/kernels/cuda/pointwise/cat-pad-slice-take", test_shapes);
  g_test_add_func ("/kernels/cuda/pointwise/transposed-output", test_transposed_output);
  g_test_add_func ("/kernels/cuda/matmul/bias-grad-epilogue", test_bias_grad_epilogue);
  g_test_add_func ("/kernels/cuda/views/strided-reshape-split", test_strided_views);
  g_test_add_func ("/kernels/cuda/graph/same-bits", test_graph_same_bits);
  g_test_add_func ("/kernels/cuda/graph/streams-llama", test_graph_streams_llama);
  g_test_add_func ("/kernels/cuda/f64/agrees-with-cpu-f64", test_f64_vs_cpu);
  g_test_add_func ("/kernels/cuda/verdict/pytorch-rule-and-broken-kernel", test_verdict_and_broken_kernel);
  return g_test_run ();
}
