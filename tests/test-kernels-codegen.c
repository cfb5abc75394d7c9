/* test-kernels-codegen.c: the CUDA executor's code generation, checked without a GPU.
 *
 * Builds programs in "generate" mode (steps, memory plan, CUDA source for sm_90) from real
 * Thunder final traces (../shared/traces) and small hand-written traces, compiles the source
 * with NVRTC to CUBIN (NVRTC needs no device), and checks: no trace name reaches the source,
 * the matmul operand mapping (transpose flags instead of copies), and the arena plan (buffers
 * whose live ranges overlap never share bytes).
 */
#include "cs-config.h"

#include <string.h>

#include "cs-aten.h"
#include "cs-cuda-private.h"
#include "cs-grad.h"
#include "cs-ops.h"
#include "cs-parse.h"
#include "cs-pipeline.h"
#include "cs-print.h"
#include "test-llama-layers.h"

static CsTrace *
load_shared (const char *name)
{
  const char *dir = g_getenv ("CS_SHARED_TRACES");
  g_autofree char *path = NULL;
  g_autoptr(CsTraceList) list = NULL;
  g_autoptr(GError) error = NULL;

  if (dir == NULL)
    return NULL;
  path = g_build_filename (dir, name, NULL);
  if (!g_file_test (path, G_FILE_TEST_EXISTS))
    return NULL;
  list = cs_parse_file (path, &error);
  g_assert_no_error (error);
  return cs_trace_ref (g_ptr_array_index (list->traces, 0));
}

/* TRUE when @word occurs in @src as a whole C identifier. */
static gboolean
has_identifier (const char *src, const char *word)
{
  gsize n = strlen (word);

  for (const char *p = strstr (src, word); p; p = strstr (p + 1, word))
    {
      gboolean left = p == src || !(g_ascii_isalnum (p[-1]) || p[-1] == '_' || p[-1] == '.');
      gboolean right = !(g_ascii_isalnum (p[n]) || p[n] == '_');

      if (left && right)
        return TRUE;
    }
  return FALSE;
}

static void
assert_no_trace_names (const CsTrace *t, const char *src)
{
  GHashTableIter it;
  gpointer k, v;

  g_autoptr(GHashTable) all_proxies = cs_trace_dup_proxies (t);

  g_hash_table_iter_init (&it, all_proxies);
  while (g_hash_table_iter_next (&it, &k, &v))
    {
      const char *name = k;

      /* The generator's own fixed identifiers (blockIdx.x/.y, the members v and e of its
       * vector unions, loop names) are no evidence when a proxy has the same spelling (the
       * LLaMA stack's attention has a proxy v). */
      static const char *const own[] = { "v", "e", "x", "y", "i", "n", "o", "r", "s", "C", "O", "R",
                                         "lane", "base", NULL };

      if (g_strv_contains (own, name))
        continue;
      if (has_identifier (src, name))
        g_error ("trace name '%s' appears in the generated source", name);
    }
}

static void
assert_arena_disjoint (CsCudaProgram *p)
{
  for (guint i = 0; i < p->buffers->len; i++)
    for (guint j = i + 1; j < p->buffers->len; j++)
      {
        CsCudaBuffer *a = &g_array_index (p->buffers, CsCudaBuffer, i);
        CsCudaBuffer *b = &g_array_index (p->buffers, CsCudaBuffer, j);
        gboolean live_overlap, mem_overlap;

        if (a->first < 0 || b->first < 0)
          continue;
        live_overlap = a->first <= b->last && b->first <= a->last;
        mem_overlap = a->offset < b->offset + b->size_bytes && b->offset < a->offset + a->size_bytes;
        g_assert_false (live_overlap && mem_overlap);
        g_assert_cmpuint (a->offset % 256, ==, 0);
        g_assert_cmpuint (a->offset + a->size_bytes, <=, p->arena_bytes);
      }
  g_assert_cmpuint (p->arena_bytes, <=, p->naive_bytes);
}

static void
compile_ok (CsCudaProgram *p)
{
  if (g_getenv ("CS_DUMP_SOURCE"))
    g_file_set_contents (g_getenv ("CS_DUMP_SOURCE"), p->full_source, -1, NULL);

  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) cubin = NULL;
  const char *src = p->full_source + strlen (cs_cuda_jit_preamble ());

  g_assert_true (cs_cuda_jit_compile (src, 9, 0, &cubin, NULL, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (g_bytes_get_size (cubin), >, 1000);
  /* An ELF image (CUBIN), not PTX text. */
  g_assert_cmpmem (g_bytes_get_data (cubin, NULL), 4, "\177ELF", 4);
}

/* The steps of @kind in the forward or backward trace; a kernel step whose launch runs
 * adjacent kernels merged ("A + B" labels) counts each of them. */
static guint
count_kind (CsCudaProgram *p, CsCudaStepKind kind, gboolean backward)
{
  guint n = 0;

  for (guint i = 0; i < p->steps->len; i++)
    {
      CsCudaStep *s = g_ptr_array_index (p->steps, i);

      if (s->kind == kind && s->backward == backward)
        {
          n++;
          for (const char *c = strstr (s->label, " + "); c; c = strstr (c + 1, " + "))
            n++;
        }
    }
  return n;
}

static void
test_seed (void)
{
  g_autoptr(CsTrace) fwd = load_shared ("thunder_nvfuser_a_seed_matmul_default_final_fwd.txt");
  g_autoptr(CsTrace) bwd = load_shared ("thunder_nvfuser_a_seed_matmul_default_final_bwd.txt");
  g_autoptr(GError) error = NULL;
  CsPolicy policy;
  CsCudaProgram *p;
  gboolean saw_t = FALSE;

  if (!fwd || !bwd)
    {
      g_test_skip ("../shared/traces not present");
      return;
    }
  cs_policy_init_default (&policy);
  /* attention and cross-entropy decomposed (their fused kernels: test-kernels-attention, -xentropy) */
  cs_policy_set (&policy, "executors", "nvfuser,torch", NULL);
  p = cs_cuda_program_generate (fwd, bwd, &policy, &error);
  g_assert_no_error (error);
  /* Inputs a, b, w then the cotangent t23; outputs t31 then grads t32, t10, t33. */
  g_assert_cmpuint (p->inputs->len, ==, 4);
  g_assert_cmpstr (g_array_index (p->inputs, CsCudaTensorInfo, 3).name, ==, "t23");
  g_assert_true (g_array_index (p->inputs, CsCudaTensorInfo, 3).backward);
  g_assert_cmpuint (p->outputs->len, ==, 4);
  g_assert_cmpstr (g_array_index (p->outputs, CsCudaTensorInfo, 1).name, ==, "t32");
  /* grads follow flat_args [a, b, w] */
  g_assert_cmpint (g_array_index (p->outputs, CsCudaTensorInfo, 1).grad_of, ==, 0);
  g_assert_cmpint (g_array_index (p->outputs, CsCudaTensorInfo, 2).grad_of, ==, 1);
  g_assert_cmpint (g_array_index (p->outputs, CsCudaTensorInfo, 3).grad_of, ==, 2);
  g_assert_cmpuint (count_kind (p, CS_CUDA_STEP_GEMM, FALSE), ==, 1);
  g_assert_cmpuint (count_kind (p, CS_CUDA_STEP_GEMM, TRUE), ==, 2);
  /* t32 = t23 @ permute(w): the permute is a transpose flag, not a copy kernel. */
  for (guint i = 0; i < p->steps->len; i++)
    {
      CsCudaStep *s = g_ptr_array_index (p->steps, i);

      g_assert_cmpstr (s->kind_name, !=, "copy");
      if (s->kind == CS_CUDA_STEP_GEMM && strstr (s->label, "B^T"))
        saw_t = TRUE;
    }
  g_assert_true (saw_t);
  assert_no_trace_names (fwd, p->source->str);
  assert_no_trace_names (bwd, p->source->str);
  assert_arena_disjoint (p);
  compile_ok (p);
  cs_cuda_program_free (p);
}

static void
test_mlp (void)
{
  g_autoptr(CsTrace) fwd = load_shared ("thunder_nvfuser_b_mlp_gelu_default_final_fwd.txt");
  g_autoptr(CsTrace) bwd = load_shared ("thunder_nvfuser_b_mlp_gelu_default_final_bwd.txt");
  g_autoptr(GError) error = NULL;
  CsPolicy policy;
  CsCudaProgram *p;
  guint bias = 0, bias_grad = 0;

  if (!fwd || !bwd)
    {
      g_test_skip ("../shared/traces not present");
      return;
    }
  cs_policy_init_default (&policy);
  /* attention and cross-entropy decomposed (their fused kernels: test-kernels-attention, -xentropy) */
  cs_policy_set (&policy, "executors", "nvfuser,torch", NULL);
  p = cs_cuda_program_generate (fwd, bwd, &policy, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (p->inputs->len, ==, 6);      /* x w1 b1 w2 b2 + cotangent */
  g_assert_cmpuint (p->outputs->len, ==, 6);     /* t179 + 5 grads */
  g_assert_cmpuint (count_kind (p, CS_CUDA_STEP_GEMM, FALSE), ==, 2);
  g_assert_cmpuint (count_kind (p, CS_CUDA_STEP_GEMM, TRUE), ==, 4);
  for (guint i = 0; i < p->steps->len; i++)
    {
      CsCudaStep *s = g_ptr_array_index (p->steps, i);

      if (s->kind == CS_CUDA_STEP_GEMM && strstr (s->label, "+bias grad"))
        {
          g_assert_true (s->backward);
          bias_grad++;
        }
      else if (s->kind == CS_CUDA_STEP_GEMM && strstr (s->label, "+bias"))
        bias++;
      g_assert_cmpstr (s->kind_name, !=, "copy");
    }
  g_assert_cmpuint (bias, ==, 2);   /* both linears use the cuBLASLt BIAS epilogue */
  /* and both weight gradients' matmuls write the bias gradients (BGRADB) that the backward's
   * regions would sum over rows of the output gradients */
  g_assert_cmpuint (bias_grad, ==, 2);
  /* nvFusion1 returns t171 and t35 = reshape(t171): one kernel writes t171 once, t35 is a view
   * of its buffer (the kernel may share its launch with an adjacent one: labels "A + B"). */
  {
    g_autoptr(GHashTable) px = cs_trace_dup_proxies (bwd);
    gint s171 = cs_cuda_program_lookup (p, g_hash_table_lookup (px, "t171"));
    gint s35 = cs_cuda_program_lookup (p, g_hash_table_lookup (px, "t35"));
    guint buf, writes = 0;

    g_assert_cmpint (s171, >=, 0);
    g_assert_cmpint (s35, >=, 0);
    buf = cs_cuda_program_slot (p, (guint) s171)->buffer;
    g_assert_cmpuint (cs_cuda_program_slot (p, (guint) s35)->buffer, ==, buf);
    for (guint i = 0; i < p->steps->len; i++)
      {
        CsCudaStep *s = g_ptr_array_index (p->steps, i);

        for (guint j = 0; j < s->writes->len; j++)
          if (cs_cuda_program_slot (p, g_array_index (s->writes, guint, j))->buffer == buf)
            {
              writes++;
              g_assert_nonnull (strstr (s->label, "nvFusion1 pointwise [64, 512] (1 out)"));
            }
      }
    g_assert_cmpuint (writes, ==, 1);
  }
  assert_no_trace_names (fwd, p->source->str);
  assert_no_trace_names (bwd, p->source->str);
  assert_arena_disjoint (p);
  compile_ok (p);
  cs_cuda_program_free (p);
}

/* Reductions of every form, var_mean (untyped multi-output), broadcasting and a linear. */
static const char small_trace[] =
  "def computation(x, w, b):\n"
  "  # x: \"cuda:0 bf16[37, 3000]\"\n"
  "  # w: \"cuda:0 bf16[64, 3000]\"\n"
  "  # b: \"cuda:0 bf16[64]\"\n"
  "  [t1, t2, t5, t9] = nvFusion0(x, b)\n"
  "    # t0 = prims.convert_element_type(x, dtypes.float32)  # t0: \"cuda:0 f32[37, 3000]\"\n"
  "    # t1 = prims.sum(t0, (1,))  # t1: \"cuda:0 f32[37]\"\n"
  "    # (t2, t3) = prims.var_mean(t0, (0,), correction=1)\n"
  "    # t4 = prims.broadcast_in_dim(t1, (37, 3000), (0,))  # t4: \"cuda:0 f32[37, 3000]\"\n"
  "    # t6 = prims.sub(t0, t4)  # t6: \"cuda:0 f32[37, 3000]\"\n"
  "    # t7 = prims.exp(t6)  # t7: \"cuda:0 f32[37, 3000]\"\n"
  "    # t5 = prims.convert_element_type(t7, dtypes.bfloat16)  # t5: \"cuda:0 bf16[37, 3000]\"\n"
  "    # t8 = prims.convert_element_type(b, dtypes.float32)  # t8: \"cuda:0 f32[64]\"\n"
  "    # t9 = prims.amax(t8, (0,))  # t9: \"cuda:0 f32[]\"\n"
  "  t10 = torch.nn.functional.linear(t5, w, b)  # t10: \"cuda:0 bf16[37, 64]\"\n"
  "  return (t1, t2, t5, t9, t10)\n";

/* Parses @text (asserting it parses) and generates its program under the default policy.
 * Returns: (transfer full) (nullable): the program, NULL with @error set when generation fails;
 * @trace_out gets the parsed trace. */
static CsCudaProgram *
generate (const char *text, const char *name, CsTrace **trace_out, GError **error)
{
  g_autoptr(GError) parse_error = NULL;
  CsTrace *t = cs_parse_trace (text, name, &parse_error);
  CsPolicy policy;

  g_assert_no_error (parse_error);
  cs_policy_init_default (&policy);
  /* attention and cross-entropy decomposed (their fused kernels: test-kernels-attention, -xentropy) */
  cs_policy_set (&policy, "executors", "nvfuser,torch", NULL);
  *trace_out = t;
  return cs_cuda_program_generate (t, NULL, &policy, error);
}

static void
test_small (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTrace) t = NULL;
  CsCudaProgram *p = generate (small_trace, "small", &t, &error);

  g_assert_no_error (error);
  g_assert_cmpuint (p->outputs->len, ==, 5);
  /* sum over the inner dim -> row form with a 256-thread block per row (R = 3000 > 1024). */
  /* (in a launch merged with its neighbour the block and thread indices are cs_bx, cs_tx...) */
  g_assert_true (strstr (p->source->str, "threadIdx.x / 256") || strstr (p->source->str, "cs_tx / 256"));
  /* var_mean over dim 0 -> column form; Welford state merged across blockIdx.y. */
  g_assert_true (strstr (p->source->str, "blockIdx.y * 8 + threadIdx.y") || strstr (p->source->str, "cs_by * 8 + cs_ty"));
  assert_no_trace_names (t, p->source->str);
  assert_arena_disjoint (p);
  compile_ok (p);
  cs_cuda_program_free (p);
}

#include "test-row-fused-trace.h"

/* The kernels whose label holds @a (and @b when given); the kernels sharing a merged launch
 * ("A + B" labels) each count. */
static guint
count_label (CsCudaProgram *p, const char *a, const char *b)
{
  guint n = 0;

  for (guint i = 0; i < p->steps->len; i++)
    {
      CsCudaStep *s = g_ptr_array_index (p->steps, i);
      g_auto(GStrv) parts = NULL;

      if (s->kind != CS_CUDA_STEP_KERNEL)
        continue;
      parts = g_strsplit (s->label, " + ", -1);
      for (guint j = 0; parts[j]; j++)
        if (strstr (parts[j], a) && (!b || strstr (parts[j], b)))
          n++;
    }
  return n;
}

static void
test_row_fused (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTrace) t = NULL;
  CsCudaProgram *p = generate (row_fused_trace, "rows", &t, &error);

  g_assert_no_error (error);
  g_assert_cmpuint (p->outputs->len, ==, 10);
  /* Each normalisation is one kernel: its statistics and its outputs. */
  g_assert_cmpuint (count_label (p, "nvFusion0 ", NULL), ==, 2);
  g_assert_cmpuint (count_label (p, "nvFusion0 row-fused [40, 2048] (40 rows of 2048, 1 reductions in 2 passes, 1+2 out, 1 col sums)", NULL), ==, 1);
  g_assert_cmpuint (count_label (p, "nvFusion0 col sums finalize (1 x 2048 over 40 blocks)", NULL), ==, 1);
  g_assert_cmpuint (count_label (p, "nvFusion1 ", NULL), ==, 1);
  g_assert_cmpuint (count_label (p, "nvFusion1 row-fused [70, 1500] (70 rows of 1500, 2 reductions in 2 passes, 1+1 out, 0 col sums)", NULL), ==, 1);
  /* [1, 50, 768] summed over (0, 2) is 50 rows; the sum over size-1 dims is no kernel. */
  g_assert_cmpuint (count_label (p, "nvFusion2 ", NULL), ==, 2);
  g_assert_cmpuint (count_label (p, "nvFusion2 col-reduce [1, 50, 768]", NULL), ==, 1);
  g_assert_cmpuint (count_label (p, "nvFusion2 row-fused [1, 50, 768] (50 rows of 768, 1 reductions in 1 passes, 1+1 out, 0 col sums)", NULL), ==, 1);
  /* A statistic read across rows: a row reduction, then a pointwise kernel. */
  g_assert_cmpuint (count_label (p, "nvFusion3 ", NULL), ==, 2);
  g_assert_cmpuint (count_label (p, "nvFusion3 row-reduce [24, 24]", NULL), ==, 1);
  g_assert_cmpuint (count_label (p, "nvFusion3 pointwise [24, 24]", NULL), ==, 1);
  g_assert_cmpuint (count_kind (p, CS_CUDA_STEP_KERNEL, FALSE), ==, 7);
  /* Block per row (R > 1024) merges warps through shared memory; warp per row broadcasts lane
   * 0's state; no statistic goes through memory except the outputs. */
  g_assert_nonnull (strstr (p->source->str, "__syncthreads ();\n  p0s = shp0s[0];"));
  /* var_mean: the mean from a sum, then the centred squares about it in a second pass. */
  g_assert_nonnull (strstr (p->source->str, "const float p0mu = p0s / (float) 2048;"));
  g_assert_nonnull (strstr (p->source->str, "p0cs += (float) (((float) ("));
  g_assert_nonnull (strstr (p->source->str, "p0s = __shfl_sync (0xffffffffu, p0s, 0);"));
  /* R = 1500 is no multiple of 256: a loop; 768 = 24 x 32: fully unrolled.  Column sums (a
   * block per row only): a loop over rows per block, per-block partials of each lane's
   * columns, summed in block order by the finalize kernel. */
  g_assert_nonnull (strstr (p->source->str, " o < O; o += (ix_t) gridDim.x * 1)"));
  g_assert_nonnull (strstr (p->source->str, "      ca0[t_] += (float) ("));
  g_assert_nonnull (strstr (p->source->str, "[(ix_t) blockIdx.x * R + ((t_ >> 3) * 256 + lane) * 8 + (t_ & 7)] = ca0[t_];"));
  g_assert_nonnull (strstr (p->source->str, "      s_ += a"));
  g_assert_nonnull (strstr (p->source->str, "for (ix_t r = lane; r < R; r += 256)"));
  g_assert_nonnull (strstr (p->source->str, "for (int t_ = 0; t_ < 24; t_++)\n    {\n      const ix_t r = ((t_ >> 3) * 32"));
  /* ... and, rows being multiples of 8 per lane, each lane owns groups of 8 consecutive
   * elements: the row tensors are read once by 16-byte loads into unions kept for every pass
   * (the RMSNorm input, 24 bf16 per lane; the LayerNorm weight, 8 per lane), and the row
   * outputs written by 16-byte stores. */
  g_assert_nonnull (strstr (p->source->str, "const ix_t r = ((t_ >> 3) * 32 + lane) * 8 + (t_ & 7);"));
  g_assert_nonnull (strstr (p->source->str, "union { uint4 v[3]; unsigned short e[24]; } VL"));
  g_assert_nonnull (strstr (p->source->str, "union { uint4 v[3]; unsigned short e[24]; } VW"));
  g_assert_nonnull (strstr (p->source->str, "union { uint4 v[1]; unsigned short e[8]; } VL"));
  g_assert_nonnull (strstr (p->source->str, "      const ix_t rv_ = (v_ * 256 + lane) * 8;\n"));
  /* The fallback's pointwise kernel reads and writes f32 [24, 24] 8 elements at a time. */
  g_assert_nonnull (strstr (p->source->str, "union { float4 v[2]; float e[8]; } L"));
  g_assert_nonnull (strstr (p->source->str, "union { float4 v[2]; float e[8]; } W"));
  assert_no_trace_names (t, p->source->str);
  assert_arena_disjoint (p);
  compile_ok (p);
  cs_cuda_program_free (p);
}


#include "test-membound-trace.h"

/* The memory-bound forms of tests/test-membound-trace.h under their environment overrides:
 * rows a warp (CASTSCOPE_ROW_RPW: the rows staged in shared memory by cp.async, the f32 RMSNorm
 * too), pointwise tiles a block (CASTSCOPE_PW_TILES, 4 falling back to 2 for 529 blocks) and the
 * column split (CASTSCOPE_COL_BPS: 68 splits, capped by 64 rows a split) and its unroll
 * (CASTSCOPE_COL_UNROLL); the column sums' finalize kernels past and within the whole unroll;
 * each compiles.  Then the defaults. */
static void
test_membound_forms (void)
{
  static const struct { const char *rpw, *tiles, *bps, *unroll, *row_label, *pw_label, *col_label; } forms[] = {
    { "1", "1", "3", "0", "0 col sums)", "(1 out)", "68 splits" },
    { "2", "2", "6", "8", "0 col sums, 2 rows a warp)", "(1 out, 2 tiles a block)", "68 splits" },
    { "4", "4", "1", "16", "0 col sums, 2 rows a warp)", "(1 out, 2 tiles a block)", "68 splits" },
  };

  for (guint f = 0; f < G_N_ELEMENTS (forms); f++)
    {
      g_autoptr(GError) error = NULL;
      g_autoptr(CsTrace) t = NULL;
      CsCudaProgram *p;

      g_setenv ("CASTSCOPE_ROW_RPW", forms[f].rpw, TRUE);
      g_setenv ("CASTSCOPE_PW_TILES", forms[f].tiles, TRUE);
      g_setenv ("CASTSCOPE_COL_BPS", forms[f].bps, TRUE);
      g_setenv ("CASTSCOPE_COL_UNROLL", forms[f].unroll, TRUE);
      g_setenv ("CASTSCOPE_ROW_LATEW", f == 0 ? "1" : "0", TRUE);
      p = generate (membound_trace, "membound", &t, &error);
      g_assert_no_error (error);
      g_assert_cmpuint (p->outputs->len, ==, 11);
      /* one row a warp with CASTSCOPE_ROW_LATEW=1: the LayerNorm's weight and bias loaded after
         the variance's shuffles */
      if (f == 0)
        {
          const char *wl = strstr (p->source->str, "VL22.v[v_] = *(const uint4 *) (a1 + rv_);");
          const char *sh = strstr (p->source->str, "cs_shfl (p0cs, m_)");

          g_assert_nonnull (wl);
          g_assert_nonnull (sh);
          g_assert_true (wl > sh);
        }
      /* the finalize kernels: 33 and 5 partials a lane (the last lanes 4) in loops unrolled whole */
      g_assert_cmpuint (count_label (p, "nvFusion5 col sums finalize (1 x 2048 over 264 blocks)", NULL), ==, 1);
      g_assert_cmpuint (count_label (p, "nvFusion6 col sums finalize (1 x 2048 over 37 blocks)", NULL), ==, 1);
      g_assert_nonnull (strstr (p->source->str, "#pragma unroll\n      for (int j_ = 0; j_ < 33; j_++)\n        {\n"
                                                "          const ix_t t_ = cs_ty + j_ * 8;\n          s_ += "));
      g_assert_nonnull (strstr (p->source->str, "#pragma unroll\n      for (int j_ = 0; j_ < 5; j_++)\n        {\n"
                                                "          const ix_t t_ = threadIdx.y + j_ * 8;\n"
                                                "          if (t_ >= 37)\n            break;\n"));
      /* the column form's unroll: its rows' loop, and the partials' loop when set */
      g_assert_nonnull (strstr (p->source->str, f == 0 ? "#pragma unroll 4\n    for (ix_t r = " : f == 1 ? "#pragma unroll 8\n    for (ix_t r = "
                                                                                       : "#pragma unroll 16\n    for (ix_t r = "));
      if (f > 0)
        g_assert_nonnull (strstr (p->source->str, f == 1 ? "#pragma unroll 8\n    for (ix_t s_ = "
                                                         : "#pragma unroll 16\n    for (ix_t s_ = "));
      else
        g_assert_null (strstr (p->source->str, "#pragma unroll 4\n    for (ix_t s_ = "));
      g_assert_cmpuint (count_label (p, "nvFusion0 row-fused [4225, 256]", forms[f].row_label), ==, 1);
      g_assert_cmpuint (count_label (p, "nvFusion2 row-fused [4300, 256]", forms[f].row_label), ==, 1);
      g_assert_cmpuint (count_label (p, "nvFusion1 pointwise [1001, 2161]", forms[f].pw_label), ==, 1);
      g_assert_cmpuint (count_label (p, "nvFusion4 col-reduce [4300, 256]", forms[f].col_label), ==, 1);
      if (f > 0)
        {
          /* the rows by cp.async to shared memory, read back a row at a time; a thread's tiles
           * loaded before any is computed */
          g_assert_nonnull (strstr (p->source->str, "cs_cp_async16 (&VSVL"));
          g_assert_nonnull (strstr (p->source->str, "  cs_cp_async_commit ();\n  cs_cp_async_wait0 ();\n"));
          g_assert_nonnull (strstr (p->source->str, "union { uint2 v[2]; unsigned short e[8]; } L0_[2];"));
          g_assert_nonnull (strstr (p->source->str, "union { uint4 v[1]; unsigned short e[8]; } L0_[2];"));
          g_assert_nonnull (strstr (p->source->str, "          auto &L0 = L0_[u_];\n"));
        }
      assert_no_trace_names (t, p->source->str);
      assert_arena_disjoint (p);
      compile_ok (p);
      cs_cuda_program_free (p);
    }
  g_unsetenv ("CASTSCOPE_ROW_RPW");
  g_unsetenv ("CASTSCOPE_PW_TILES");
  g_unsetenv ("CASTSCOPE_COL_BPS");
  g_unsetenv ("CASTSCOPE_COL_UNROLL");
  g_unsetenv ("CASTSCOPE_ROW_LATEW");
  {
    /* the defaults: 4 tiles a block from 2^27 elements (the first region), 1 below (the
     * second); one row a warp (the membound trace's LayerNorm) */
    static const char big[] =
      "def computation(x, y):\n"
      "  # x: \"cuda:0 bf16[8192, 16384]\"\n"
      "  # y: \"cuda:0 bf16[8192, 16383]\"\n"
      "  [t1] = nvFusion0(x)\n"
      "    # t0 = prims.convert_element_type(x, dtypes.float32)  # t0: \"cuda:0 f32[8192, 16384]\"\n"
      "    # t2 = prims.mul(t0, 2.0)  # t2: \"cuda:0 f32[8192, 16384]\"\n"
      "    # t1 = prims.convert_element_type(t2, dtypes.bfloat16)  # t1: \"cuda:0 bf16[8192, 16384]\"\n"
      "  [t4] = nvFusion1(y)\n"
      "    # t3 = prims.convert_element_type(y, dtypes.float32)  # t3: \"cuda:0 f32[8192, 16383]\"\n"
      "    # t5 = prims.mul(t3, 2.0)  # t5: \"cuda:0 f32[8192, 16383]\"\n"
      "    # t4 = prims.convert_element_type(t5, dtypes.bfloat16)  # t4: \"cuda:0 bf16[8192, 16383]\"\n"
      "  return (t1, t4)\n";
    g_autoptr(GError) error = NULL;
    g_autoptr(CsTrace) t = NULL, t2 = NULL;
    CsCudaProgram *p = generate (big, "big", &t, &error);

    g_assert_no_error (error);
    g_assert_cmpuint (count_label (p, "nvFusion0 pointwise [8192, 16384] (1 out, 4 tiles a block)", NULL), ==, 1);
    g_assert_cmpuint (count_label (p, "nvFusion1 pointwise [8192, 16383] (1 out)", NULL), ==, 1);
    cs_cuda_program_free (p);
    p = generate (membound_trace, "membound", &t2, &error);
    g_assert_no_error (error);
    g_assert_cmpuint (count_label (p, "nvFusion0 row-fused [4225, 256]", "0 col sums)"), ==, 1);
    g_assert_cmpuint (count_label (p, "nvFusion1 pointwise [1001, 2161] (1 out)", NULL), ==, 1);
    cs_cuda_program_free (p);
  }
}

/* A region that only reshapes (or shallow-copies) its contiguous input is a view: no kernel,
 * the output shares the input's buffer. */
static void
test_reshape_view (void)
{
  static const char text[] =
    "def computation(xv, yv):\n"
    "  # xv: \"cuda:0 bf16[1, 64, 32]\"\n"
    "  # yv: \"cuda:0 bf16[64, 32]\"\n"
    "  [t1, t2] = nvFusion0(xv, yv)\n"
    "    # t1 = prims.reshape(xv, (64, 32))  # t1: \"cuda:0 bf16[64, 32]\"\n"
    "    # t2 = prims.shallow_copy(yv)  # t2: \"cuda:0 bf16[64, 32]\"\n"
    "  return (t1, t2)\n";
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTrace) t = NULL;
  CsCudaProgram *p = generate (text, "view", &t, &error);

  g_assert_no_error (error);
  g_assert_cmpuint (p->n_kernels, ==, 0);
  g_assert_cmpuint (p->steps->len, ==, 0);
  g_assert_cmpuint (p->outputs->len, ==, 2);
  for (guint i = 0; i < 2; i++)
    {
      CsCudaSlot *in = cs_cuda_program_slot (p, g_array_index (p->input_slots, guint, i));
      CsCudaSlot *out = cs_cuda_program_slot (p, g_array_index (p->output_slots, guint, i));

      g_assert_cmpuint (in->buffer, ==, out->buffer);
      g_assert_cmpuint (out->rank, ==, 2);
      g_assert_cmpint (out->shape[0], ==, 64);
    }
  cs_cuda_program_free (p);
}

#include "test-transposed-output-trace.h"

/* A region output that a transpose + reshape reads is written in the transpose's layout: the
 * reshape is a view of its buffer (no copy step), the store goes through its strides, the
 * region's other output of the same shape stays contiguous (vector stores). */
static void
test_transposed_output (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTrace) t = NULL;
  CsCudaProgram *p = generate (transposed_output_trace, "transposed", &t, &error);
  CsCudaSlot *o8, *o3;

  g_assert_no_error (error);
  g_assert_cmpuint (p->steps->len, ==, 1);
  g_assert_cmpuint (count_label (p, "nvFusion0 pointwise [2, 3, 37, 64] (2 out)", NULL), ==, 1);
  g_assert_cmpuint (count_label (p, "copy", NULL), ==, 0);
  g_assert_cmpuint (p->outputs->len, ==, 2);
  o8 = cs_cuda_program_slot (p, g_array_index (p->output_slots, guint, 0));
  o3 = cs_cuda_program_slot (p, g_array_index (p->output_slots, guint, 1));
  /* t8 [2, 37, 192] is a contiguous view of t2's buffer, which the kernel writes */
  g_assert_true (cs_cuda_slot_is_contiguous (o8));
  g_assert_cmpuint (o8->rank, ==, 3);
  g_assert_cmpint (o8->shape[2], ==, 192);
  g_assert_true (cs_cuda_slot_is_contiguous (o3));
  g_assert_cmpuint (o3->buffer, !=, o8->buffer);
  {
    gboolean writes_t2 = FALSE;
    CsCudaStep *s = p->steps->pdata[0];

    for (guint i = 0; i < s->writes->len; i++)
      {
        CsCudaSlot *w = cs_cuda_program_slot (p, g_array_index (s->writes, guint, i));

        if (w->buffer == o8->buffer)
          {
            /* t2 [B, H, T, D] with the strides of [B, T, H, D] */
            g_assert_false (cs_cuda_slot_is_contiguous (w));
            g_assert_cmpint (w->strides[0], ==, 37 * 3 * 64);
            g_assert_cmpint (w->strides[1], ==, 64);
            g_assert_cmpint (w->strides[2], ==, 3 * 64);
            g_assert_cmpint (w->strides[3], ==, 1);
            writes_t2 = TRUE;
          }
      }
    g_assert_true (writes_t2);
  }
  /* the strided store (index names canonical: i0..i3 over [2, 3, 37, 64]), and t3's quads */
  g_assert_true (strstr (p->source->str, "* 7104 + i1 * 64 + i2 * 192 + i3] = cs_f2bf ((float) (")
                 || strstr (p->source->str, "* 7104 + i1 * 64 + i2 * 192 + i3] = cs_bfbits ("));
  g_assert_nonnull (strstr (p->source->str, "*(float4 *) (a"));
  compile_ok (p);
  cs_cuda_program_free (p);
}

#include "test-bias-grad-trace.h"
#include "test-strided-view-trace.h"

/* Reshapes of strided tensors are views where the strides allow (view_strides), slices of a
 * region input are views: one copy step in all (t1), the other outputs share their inputs'
 * buffers. */
static void
test_strided_views (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTrace) t = NULL;
  CsCudaProgram *p = generate (strided_view_trace, "views", &t, &error);
  CsCudaSlot *in_b, *in_c, *o3, *o5, *o7, *o8;

  g_assert_no_error (error);
  g_assert_cmpuint (p->steps->len, ==, 1);
  g_assert_cmpstr (((CsCudaStep *) p->steps->pdata[0])->kind_name, ==, "copy");
  g_assert_cmpuint (p->outputs->len, ==, 6);
  in_b = cs_cuda_program_slot (p, g_array_index (p->input_slots, guint, 1));
  in_c = cs_cuda_program_slot (p, g_array_index (p->input_slots, guint, 2));
  o3 = cs_cuda_program_slot (p, g_array_index (p->output_slots, guint, 1));
  o5 = cs_cuda_program_slot (p, g_array_index (p->output_slots, guint, 2));
  o7 = cs_cuda_program_slot (p, g_array_index (p->output_slots, guint, 3));
  o8 = cs_cuda_program_slot (p, g_array_index (p->output_slots, guint, 4));
  g_assert_cmpuint (o3->buffer, ==, in_b->buffer);
  g_assert_cmpint (o3->strides[0], ==, 8);
  g_assert_cmpint (o3->strides[1], ==, 48);
  g_assert_cmpint (o3->strides[2], ==, 4);
  g_assert_cmpint (o3->strides[3], ==, 1);
  g_assert_cmpuint (o5->buffer, ==, in_c->buffer);
  g_assert_cmpint (o5->offset, ==, 0);
  g_assert_cmpint (o5->strides[1], ==, 24);
  /* t9 = xc[:, 1::2, 16:24] */
  g_assert_cmpuint (o7->buffer, ==, in_c->buffer);
  g_assert_cmpint (o7->offset, ==, 24 + 16);
  g_assert_cmpint (o7->strides[0], ==, 120);
  g_assert_cmpint (o7->strides[1], ==, 48);
  g_assert_cmpint (o7->strides[2], ==, 1);
  /* t8 = t6 [3, 5, 8] (offset 8, row stride 24) as [3, 5, 2, 4] */
  g_assert_cmpuint (o8->buffer, ==, in_c->buffer);
  g_assert_cmpint (o8->offset, ==, 8);
  g_assert_cmpint (o8->strides[1], ==, 24);
  g_assert_cmpint (o8->strides[2], ==, 4);
  compile_ok (p);
  cs_cuda_program_free (p);
}

/* A bias gradient (a region's sum over rows of the output gradient) after the weight
 * gradient's matmul that reads that gradient transposed: the matmul's epilogue writes it, the
 * region keeps its other output only; with CASTSCOPE_GEMM_BGRAD=0 the region sums the columns
 * itself. */
static void
test_bias_grad_epilogue (void)
{
  for (int off = 0; off < 2; off++)
    {
      g_autoptr(GError) error = NULL;
      g_autoptr(CsTrace) t = NULL;
      CsCudaProgram *p;
      CsCudaStep *mm;
      guint o5;

      if (off)
        g_setenv ("CASTSCOPE_GEMM_BGRAD", "0", TRUE);
      p = generate (bias_grad_trace, "bias-grad", &t, &error);
      g_unsetenv ("CASTSCOPE_GEMM_BGRAD");
      g_assert_no_error (error);
      g_assert_cmpuint (p->outputs->len, ==, 3);
      g_assert_cmpuint (p->steps->len, ==, 2);
      mm = p->steps->pdata[0];
      g_assert_cmpint (mm->kind, ==, CS_CUDA_STEP_GEMM);
      o5 = g_array_index (p->output_slots, guint, 1);
      if (off)
        {
          g_assert_null (strstr (mm->label, "+bias grad"));
          g_assert_cmpuint (mm->writes->len, ==, 1);
          g_assert_cmpuint (count_label (p, "nvFusion0 col-reduce [4, 64, 96]", NULL), ==, 1);
        }
      else
        {
          /* t2 [96, 80] and the bias gradient t5 [96] from one cublasLtMatmul */
          g_assert_nonnull (strstr (mm->label, "96x80x256 A^T (M x N x K) +bias grad"));
          g_assert_cmpuint (mm->writes->len, ==, 2);
          g_assert_cmpuint (g_array_index (mm->writes, guint, 1), ==, o5);
          g_assert_cmpuint (count_label (p, "nvFusion0 col-reduce", NULL), ==, 0);
          g_assert_cmpuint (count_label (p, "nvFusion0 pointwise [4, 64, 96] (1 out)", NULL), ==, 1);
        }
      compile_ok (p);
      cs_cuda_program_free (p);
    }
}

static void
test_unsupported (void)
{
  static const char text[] =
    "def computation(x):\n"
    "  # x: \"cuda:0 f32[4, 4]\"\n"
    "  [t1] = nvFusion0(x)\n"
    "    # t1 = prims.digamma(x)  # t1: \"cuda:0 f32[4, 4]\"\n"
    "  return t1\n";
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTrace) t = NULL;
  CsCudaProgram *p = generate (text, "unsup", &t, &error);

  g_assert_null (p);
  g_assert_error (error, CS_CUDA_ERROR, CS_CUDA_ERROR_UNSUPPORTED);
  g_assert_nonnull (strstr (error->message, "prims.digamma"));
  g_assert_nonnull (strstr (error->message, "line 4"));
}

/* Final traces made by castscope's own pipeline, under both matmul policies, generate and
 * compile; under upcast-f32 every matmul runs as true f32 (no TF32 unless allowed). */
static CsTrace *
load_path (const char *path)
{
  g_autoptr(CsTraceList) list = NULL;
  g_autoptr(GError) error = NULL;

  list = cs_parse_file (path, &error);
  g_assert_no_error (error);
  return cs_trace_ref (g_ptr_array_index (list->traces, 0));
}

static void
pipeline_case_trace (CsTrace *init, const char *matmul, const char *rounding, gboolean compile)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(CsPipeline) pl = NULL;
  CsPolicy policy;
  CsCudaProgram *p;
  guint f32 = 0, gemms = 0;

  cs_policy_init_default (&policy);
  /* attention and cross-entropy decomposed (their fused kernels: test-kernels-attention, -xentropy) */
  cs_policy_set (&policy, "executors", "nvfuser,torch", NULL);
  g_assert_true (cs_policy_set (&policy, "matmul", matmul, &error));
  g_assert_true (cs_policy_set (&policy, "rounding", rounding, &error));
  pl = cs_pipeline_run (init, &policy, NULL, &error);
  g_assert_no_error (error);
  p = cs_cuda_program_generate (cs_pipeline_get_forward (pl), cs_pipeline_get_backward (pl), &policy, &error);
  g_assert_no_error (error);
  for (guint i = 0; i < p->steps->len; i++)
    {
      CsCudaStep *s = g_ptr_array_index (p->steps, i);

      if (s->kind != CS_CUDA_STEP_GEMM)
        continue;
      gemms++;
      if (strstr (s->label, "f32/true-f32"))
        f32++;
    }
  if (g_str_equal (matmul, "upcast-f32"))
    g_assert_cmpuint (f32, ==, gemms);
  else
    g_assert_cmpuint (f32, ==, 0);
  assert_arena_disjoint (p);
  if (compile)
    compile_ok (p);
  cs_cuda_program_free (p);
}

static void
pipeline_case (const char *file, const char *matmul, const char *rounding)
{
  g_autoptr(CsTrace) init = load_shared (file);

  if (!init)
    {
      g_test_skip ("../shared/traces not present");
      return;
    }
  pipeline_case_trace (init, matmul, rounding, TRUE);
}

/* Every bundled sample and benchmark workload (data/ and data/bench/); each also generates
 * under rounding=eager (issue 19). */
static void
test_samples (gconstpointer sub)
{
  const char *dir = g_getenv ("CS_DATA_DIR");
  g_autofree char *d = dir ? g_build_filename (dir, sub, NULL) : NULL;
  g_autoptr(GDir) gd = d ? g_dir_open (d, 0, NULL) : NULL;
  const char *n;
  guint count = 0;

  if (gd == NULL)
    {
      g_test_skip ("data folder not found");
      return;
    }
  while ((n = g_dir_read_name (gd)))
    {
      g_autofree char *path = NULL;
      g_autoptr(CsTrace) t = NULL;

      if (!g_str_has_suffix (n, ".txt"))
        continue;
      path = g_build_filename (d, n, NULL);
      t = load_path (path);
      g_test_message ("%s", path);
      /* NVRTC compiles the native build; the upcast build is generated and planned (its
       * kernels are the same templates; compiling both doubles the test's time). */
      pipeline_case_trace (t, "native", "fused", TRUE);
      pipeline_case_trace (t, "upcast-f32", "fused", FALSE);
      pipeline_case_trace (t, "native", "eager", FALSE);
      count++;
    }
  g_assert_cmpuint (count, >=, 1);
}

/* The f64 reference (kernels/cs-cuda-f64.c) of every bundled sample: every float tensor of the
 * copies is f64 (integers and bools keep their dtype), every program input and output is the
 * same tensor as in the program under test with f64 for float, every matmul is a DGEMM, and
 * NVRTC compiles the kernels instantiated with double. */
static void
test_f64_samples (void)
{
  const char *dir = g_getenv ("CS_DATA_DIR");
  g_autoptr(GDir) gd = dir ? g_dir_open (dir, 0, NULL) : NULL;
  const char *n;
  guint count = 0;

  if (gd == NULL)
    {
      g_test_skip ("data folder not found");
      return;
    }
  while ((n = g_dir_read_name (gd)))
    {
      g_autofree char *path = NULL;
      g_autoptr(CsTrace) t = NULL;
      g_autoptr(CsPipeline) pl = NULL;
      g_autoptr(GError) error = NULL;
      CsPolicy policy;
      CsCudaProgram *p, *q;
      CsTrace *fwd, *bwd;

      if (!g_str_has_suffix (n, ".txt"))
        continue;
      path = g_build_filename (dir, n, NULL);
      t = load_path (path);
      g_test_message ("f64: %s", path);
      cs_policy_init_default (&policy);
  /* attention and cross-entropy decomposed (their fused kernels: test-kernels-attention, -xentropy) */
  cs_policy_set (&policy, "executors", "nvfuser,torch", NULL);
      pl = cs_pipeline_run (t, &policy, NULL, &error);
      g_assert_no_error (error);
      fwd = cs_pipeline_get_forward (pl);
      bwd = cs_pipeline_get_backward (pl);
      {
        g_autoptr(CsTrace) f = cs_cuda_trace_to_f64 (fwd);
        guint pos = 0, n_float = 0;
        CsProxy *x;

        while ((x = cs_name_table_next (f->proxies, &pos)) != NULL)
          if (x->kind == CS_PROXY_TENSOR && x->typed && cs_dtype_is_float (x->dtype))
            {
              g_assert_cmpint (x->dtype, ==, CS_DTYPE_F64);
              n_float++;
            }
        g_assert_cmpuint (n_float, >, 0);
        /* the original is untouched */
        {
          g_autoptr(GHashTable) all = cs_trace_dup_proxies (fwd);
          GHashTableIter it;
          gpointer k, v;

          n_float = 0;
          g_hash_table_iter_init (&it, all);
          while (g_hash_table_iter_next (&it, &k, &v))
            if (((CsProxy *) v)->kind == CS_PROXY_TENSOR && ((CsProxy *) v)->dtype == CS_DTYPE_BF16)
              n_float++;
          g_assert_cmpuint (n_float, >, 0);
        }
      }
      p = cs_cuda_program_generate (fwd, bwd, &policy, &error);
      g_assert_no_error (error);
      q = cs_cuda_program_generate_f64 (fwd, bwd, &policy, &error);
      g_assert_no_error (error);
      g_assert_cmpuint (q->inputs->len, ==, p->inputs->len);
      g_assert_cmpuint (q->outputs->len, ==, p->outputs->len);
      for (guint i = 0; i < p->inputs->len + p->outputs->len; i++)
        {
          gboolean in = i < p->inputs->len;
          guint j = in ? i : i - p->inputs->len;
          CsCudaTensorInfo *a = &g_array_index (in ? p->inputs : p->outputs, CsCudaTensorInfo, j);
          CsCudaTensorInfo *b = &g_array_index (in ? q->inputs : q->outputs, CsCudaTensorInfo, j);

          g_assert_cmpstr (a->name, ==, b->name);
          g_assert_cmpuint (a->rank, ==, b->rank);
          g_assert_cmpmem (a->shape, a->rank * sizeof (int64_t), b->shape, b->rank * sizeof (int64_t));
          g_assert_cmpint (b->dtype, ==, cs_dtype_is_float (a->dtype) ? CS_DTYPE_F64 : a->dtype);
        }
      for (guint i = 0; i < q->steps->len; i++)
        {
          CsCudaStep *s = g_ptr_array_index (q->steps, i);

          if (s->kind == CS_CUDA_STEP_GEMM)
            g_assert_nonnull (strstr (s->label, "f64"));
        }
      compile_ok (q);
      cs_cuda_program_free (p);
      cs_cuda_program_free (q);
      count++;
    }
  g_assert_cmpuint (count, >=, 5);
}

/* ---- one kernel per region structure ---- */

/* Appends the prims of @st as the executor walks them (cs-cuda-program.c flatten_prims). */
static void
region_prims (CsStmt *st, GPtrArray *out)
{
  if (st->kind != CS_STMT_CALL)
    return;
  if (st->n_subs == 0 || cs_op_has_tag (st->op, CS_OP_TAG_PRIM)
      || cs_op_has_tag (cs_op_semantic (st->op), CS_OP_TAG_PRIM))
    {
      g_ptr_array_add (out, st);
      return;
    }
  for (guint i = 0; i < st->n_subs; i++)
    region_prims (st->subs[i], out);
}

/* The canonical name of @x in a region signature: "%<n>" by first appearance, with its type. */
static const char *
canon_proxy (GHashTable *ids, GString *sig, const CsProxy *x)
{
  const char *id = g_hash_table_lookup (ids, x);

  if (id == NULL)
    {
      GString *t = g_string_new (NULL);

      cs_print_type_to (t, x);
      id = g_strdup_printf ("%%%u<%s>", g_hash_table_size (ids), t->str);
      g_string_free (t, TRUE);
      g_hash_table_insert (ids, (gpointer) x, (gpointer) id);
    }
  (void) sig;
  return id;
}

/* A region's structure, written independently of the code generator: for every prim its op,
 * its arguments (proxies as "%<n><type>" by first appearance, constants as printed) and its
 * outputs' types, then which values leave the region. */
static char *
region_signature (CsStmt *region)
{
  g_autoptr(GPtrArray) prims = g_ptr_array_new ();
  g_autoptr(GHashTable) ids = g_hash_table_new_full (NULL, NULL, NULL, g_free);
  g_autoptr(GPtrArray) outs = g_ptr_array_new ();
  GString *sig = g_string_new (NULL);

  for (guint i = 0; i < region->n_subs; i++)
    region_prims (region->subs[i], prims);
  for (guint i = 0; i < prims->len; i++)
    {
      CsStmt *st = g_ptr_array_index (prims, i);
      g_autoptr(GPtrArray) o = g_ptr_array_new ();

      g_string_append_printf (sig, "%s(", cs_op_semantic (st->op)->name);
      for (guint a = 0; a < st->n_args; a++)
        {
          CsValue *v = st->args[a].value;
          g_autoptr(GPtrArray) ps = g_ptr_array_new ();
          GString *t = g_string_new (NULL);

          cs_value_collect_proxies (v, ps);
          cs_print_value_to (t, v);
          /* proxies inside the printed value become their canonical names */
          for (guint q = 0; q < ps->len; q++)
            {
              CsProxy *x = g_ptr_array_index (ps, q);
              g_autofree char *pat = g_strdup_printf ("\\b%s\\b", x->name);
              g_autoptr(GRegex) re = g_regex_new (pat, 0, 0, NULL);
              char *r = g_regex_replace_literal (re, t->str, -1, 0, canon_proxy (ids, sig, x), 0, NULL);

              g_string_assign (t, r);
              g_free (r);
            }
          g_string_append_printf (sig, "%s%s", a ? ", " : "", t->str);
          g_string_free (t, TRUE);
        }
      g_string_append (sig, ") -> ");
      cs_stmt_collect_outputs (st, o);
      for (guint q = 0; q < o->len; q++)
        g_string_append_printf (sig, "%s ", canon_proxy (ids, sig, g_ptr_array_index (o, q)));
      g_string_append (sig, "; ");
    }
  cs_stmt_collect_outputs (region, outs);
  g_string_append (sig, "returns");
  for (guint q = 0; q < outs->len; q++)
    g_string_append_printf (sig, " %s", canon_proxy (ids, sig, g_ptr_array_index (outs, q)));
  return g_string_free (sig, FALSE);
}

/* The steps of @p as built: those of every training step, then the constant fills run once
 * (p->setup_steps).  The array owns none of them. */
static GPtrArray *
all_steps (CsCudaProgram *p)
{
  GPtrArray *a = g_ptr_array_new ();

  for (guint i = 0; i < p->steps->len; i++)
    g_ptr_array_add (a, g_ptr_array_index (p->steps, i));
  for (guint i = 0; i < p->setup_steps->len; i++)
    g_ptr_array_add (a, g_ptr_array_index (p->setup_steps, i));
  return a;
}

/* The kernel numbers of the kernel steps a region made ("<region> ..." labels of its trace),
 * as text. */
static char *
region_kernels (CsCudaProgram *p, const char *callee, gboolean backward)
{
  GString *s = g_string_new (NULL);
  gsize n = strlen (callee);
  g_autoptr(GPtrArray) steps = all_steps (p);

  for (guint i = 0; i < steps->len; i++)
    {
      CsCudaStep *st = g_ptr_array_index (steps, i);

      if (st->kind == CS_CUDA_STEP_KERNEL && st->backward == backward
          && strncmp (st->label, callee, n) == 0 && st->label[n] == ' ')
        g_string_append_printf (s, "k%u ", st->kernel);
    }
  return g_string_free (s, FALSE);
}

/* A kernel's text without its name (`k<N> (` -> `K (`). */
static char *
kernel_text_unnamed (const char *src)
{
  g_autoptr(GRegex) re = g_regex_new ("\\bk[0-9]+ \\(", 0, 0, NULL);

  return g_regex_replace_literal (re, src, -1, 0, "K (", 0, NULL);
}

typedef struct
{
  guint kernel_steps;   /* steps that run a generated kernel */
  guint n_kernels;      /* unique kernels */
  guint n_classes;      /* distinct region structures */
  guint n_regions;      /* fusion regions of both traces */
  guint max_class;      /* regions of the largest class */
} DedupeCounts;

/* Builds @init's step with and without deduplication and checks: regions of the same structure
 * (region_signature) run the same kernels; every unique kernel's text occurs once; step by step
 * the deduplicated program runs the kernel text, arguments and launch shape of the
 * one-kernel-per-step program; no trace name reaches the source.  Compiles it with NVRTC when
 * @compile. */
static void
dedupe_case (CsTrace *init, gboolean compile, DedupeCounts *c)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(CsPipeline) pl = NULL;
  g_autoptr(GHashTable) class_kernels = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  g_autoptr(GHashTable) class_size = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  g_autoptr(GHashTable) texts = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  CsPolicy policy;
  CsCudaProgram *p, *q;
  CsTrace *tr[2];
  guint n_global = 0;
  g_autoptr(GPtrArray) ps = NULL, qs = NULL;
  g_autofree gboolean *numbered = NULL;

  memset (c, 0, sizeof *c);
  cs_policy_init_default (&policy);
  /* attention and cross-entropy decomposed (their fused kernels: test-kernels-attention, -xentropy) */
  g_assert_true (cs_policy_set (&policy, "executors", "nvfuser,torch", NULL));
  pl = cs_pipeline_run (init, &policy, NULL, &error);
  g_assert_no_error (error);
  tr[0] = cs_pipeline_get_forward (pl);
  tr[1] = cs_pipeline_get_backward (pl);
  p = cs_cuda_program_build_full (tr[0], tr[1], &policy, CS_CUDA_BUILD_DRY, &error);
  g_assert_no_error (error);
  q = cs_cuda_program_build_full (tr[0], tr[1], &policy, CS_CUDA_BUILD_DRY | CS_CUDA_BUILD_NO_DEDUPE, &error);
  g_assert_no_error (error);

  /* Same steps (and the same constant fills); the one-kernel-per-step program has one kernel
   * per kernel step, numbered in the order the steps were made (the fills among them). */
  g_assert_cmpuint (p->steps->len, ==, q->steps->len);
  g_assert_cmpuint (p->setup_steps->len, ==, q->setup_steps->len);
  ps = all_steps (p);
  qs = all_steps (q);
  numbered = g_new0 (gboolean, q->n_kernels + 1);
  for (guint i = 0; i < ps->len; i++)
    {
      CsCudaStep *a = g_ptr_array_index (ps, i);
      CsCudaStep *b = g_ptr_array_index (qs, i);
      g_autofree char *ta = NULL, *tb = NULL;

      g_assert_cmpint (a->kind, ==, b->kind);
      g_assert_cmpstr (a->label, ==, b->label);
      if (a->kind != CS_CUDA_STEP_KERNEL)
        continue;
      g_assert_cmpuint (b->kernel, <, q->n_kernels);
      g_assert_false (numbered[b->kernel]);
      numbered[b->kernel] = TRUE;
      c->kernel_steps++;
      ta = kernel_text_unnamed (((CsCudaKernel *) g_ptr_array_index (p->kernels, a->kernel))->source);
      tb = kernel_text_unnamed (((CsCudaKernel *) g_ptr_array_index (q->kernels, b->kernel))->source);
      g_assert_cmpstr (ta, ==, tb);
      g_assert_cmpmem (a->grid, sizeof a->grid, b->grid, sizeof b->grid);
      g_assert_cmpmem (a->block, sizeof a->block, b->block, sizeof b->block);
      g_assert_cmpuint (a->args->len, ==, b->args->len);
      g_assert_cmpmem (a->args->data, a->args->len * sizeof (CsCudaKArg), b->args->data,
                       b->args->len * sizeof (CsCudaKArg));
      g_hash_table_add (texts, g_steal_pointer (&tb));
    }
  g_assert_cmpuint (q->n_kernels, ==, c->kernel_steps);
  /* Unique kernels = distinct kernel texts among the steps, each in the source once. */
  c->n_kernels = p->n_kernels;
  g_assert_cmpuint (p->n_kernels, ==, g_hash_table_size (texts));
  {
    guint n = 0;

    for (const char *at = strstr (p->source->str, "__global__"); at; at = strstr (at + 1, "__global__"))
      n++;
    g_assert_cmpuint (n, ==, p->n_kernels);
  }

  /* Regions of one structure run the same kernels. */
  for (guint t = 0; t < 2; t++)
    for (guint i = 0; tr[t] && i < tr[t]->n_stmts; i++)
      {
        CsStmt *st = tr[t]->stmts[i];
        g_autofree char *sig = NULL;
        char *ks;
        const char *seen;

        if (st->kind != CS_STMT_CALL || !cs_op_is_fusion (st->op))
          continue;
        sig = region_signature (st);
        ks = region_kernels (p, st->callee, t == 1);
        c->n_regions++;
        seen = g_hash_table_lookup (class_kernels, sig);
        if (seen)
          {
            if (strcmp (seen, ks) != 0)
              g_error ("%s (%s) has the structure of an earlier region but runs %s, not %s", st->callee,
                       t ? "backward" : "forward", ks, seen);
            g_free (ks);
          }
        else
          g_hash_table_insert (class_kernels, g_strdup (sig), ks);
        g_hash_table_insert (class_size, g_strdup (sig),
                             GUINT_TO_POINTER (GPOINTER_TO_UINT (g_hash_table_lookup (class_size, sig)) + 1));
      }
  c->n_classes = g_hash_table_size (class_kernels);
  {
    GHashTableIter it;
    gpointer k, v;

    /* Upper bound from the structures alone: one representative region's kernels per class,
     * plus kernels of steps outside fusion regions (copies, scatters). */
    g_hash_table_iter_init (&it, class_kernels);
    while (g_hash_table_iter_next (&it, &k, &v))
      {
        g_auto(GStrv) ks = g_strsplit (v, " ", -1);

        for (guint j = 0; ks[j]; j++)
          n_global += ks[j][0] != '\0';
      }
    g_hash_table_iter_init (&it, class_size);
    while (g_hash_table_iter_next (&it, &k, &v))
      c->max_class = MAX (c->max_class, GPOINTER_TO_UINT (v));
  }
  {
    guint outside = 0;

    for (guint i = 0; i < ps->len; i++)
      {
        CsCudaStep *st = g_ptr_array_index (ps, i);

        if (st->kind == CS_CUDA_STEP_KERNEL && !g_str_has_prefix (st->label, "nvFusion"))
          outside++;
      }
    g_assert_cmpuint (p->n_kernels, <=, n_global + outside);
  }

  assert_no_trace_names (tr[0], p->source->str);
  if (tr[1])
    assert_no_trace_names (tr[1], p->source->str);
  if (compile)
    compile_ok (p);
  cs_cuda_program_free (p);
  cs_cuda_program_free (q);
}

/* The 8-block LLaMA stack and the same model at 32 blocks: the layers' regions share kernels, so
 * 24 more layers add kernel steps but not one kernel. */
static void
test_dedupe_llama (void)
{
  const char *dir = g_getenv ("CS_SHARED_TRACES");
  g_autofree char *path = dir ? g_build_filename (dir, "thunder_llama_stack_initial.txt", NULL) : NULL;
  g_autofree char *text = NULL;
  g_autofree char *deep = NULL;
  g_autoptr(CsTraceList) l8 = NULL, l32 = NULL;
  g_autoptr(GError) error = NULL;
  DedupeCounts c8, c32;

  if (path == NULL || !g_file_get_contents (path, &text, NULL, NULL))
    {
      g_test_skip ("../shared/traces not present");
      return;
    }
  l8 = cs_parse_text (text, strlen (text), "llama8", &error);
  g_assert_no_error (error);
  dedupe_case (g_ptr_array_index (l8->traces, 0), TRUE, &c8);
  g_test_message ("8 layers: %u kernel steps, %u unique kernels, %u regions in %u structures (largest %u)",
                  c8.kernel_steps, c8.n_kernels, c8.n_regions, c8.n_classes, c8.max_class);
  /* Eight identical layers: some region structure occurs in each of them, forward and backward. */
  g_assert_cmpuint (c8.max_class, >=, 8);
  g_assert_cmpuint (c8.n_classes, <, c8.n_regions);
  g_assert_cmpuint (c8.n_kernels, <, c8.kernel_steps);

  deep = llama_stack_layers (text, 32);
  g_assert_nonnull (deep);
  l32 = cs_parse_text (deep, strlen (deep), "llama32", &error);
  g_assert_no_error (error);
  dedupe_case (g_ptr_array_index (l32->traces, 0), FALSE, &c32);
  g_test_message ("32 layers: %u kernel steps, %u unique kernels, %u regions in %u structures (largest %u)",
                  c32.kernel_steps, c32.n_kernels, c32.n_regions, c32.n_classes, c32.max_class);
  g_assert_cmpuint (c32.n_classes, ==, c8.n_classes);
  g_assert_cmpuint (c32.n_kernels, ==, c8.n_kernels);
  /* each further layer adds the same regions to the classes (a multiple of 24 members) */
  g_assert_cmpuint (c32.max_class, >, c8.max_class);
  g_assert_cmpuint ((c32.max_class - c8.max_class) % 24, ==, 0);
  g_assert_cmpuint (c32.kernel_steps, >, c8.kernel_steps);
  g_assert_cmpuint ((c32.kernel_steps - c8.kernel_steps) % 24, ==, 0);
  g_assert_cmpuint (c32.n_regions, >, c8.n_regions);
  g_assert_cmpuint ((c32.n_regions - c8.n_regions) % 24, ==, 0);
}

static void
test_pipeline_seed (void)
{
  pipeline_case ("thunder_a_seed_matmul_initial.txt", "native", "fused");
  pipeline_case ("thunder_a_seed_matmul_initial.txt", "upcast-f32", "fused");
}

static void
test_pipeline_mlp (void)
{
  pipeline_case ("thunder_b_mlp_gelu_initial.txt", "native", "fused");
  pipeline_case ("thunder_b_mlp_gelu_initial.txt", "upcast-f32", "fused");
}

/* A LLaMA block stack: embedding (+ backward through atomics), RMSNorm, RoPE (cat of halves),
 * attention decomposed by the pipeline, SwiGLU; 580 steps in one NVRTC program. */
static void
test_pipeline_llama (void)
{
  pipeline_case ("thunder_llama_stack_initial.txt", "native", "fused");
}

/* The same stack under rounding=eager (issue 19): the kernels of the traces with every op's
 * rounding kept generate and compile, and the arena plan holds. */
static void
test_pipeline_llama_eager (void)
{
  pipeline_case ("thunder_llama_stack_initial.txt", "native", "eager");
}

/* rounding=eager in generated CUDA (issue 19): the kernels read the trace after the
 * remove-redundant-casts pass, so t0 = a * b, kept in f32 under fused, is rounded to bf16 in
 * the kernel under eager (one more `cs_rbf`, the round-to-nearest-even of the codegen), before
 * the add reads it; both programs compile. */
static guint
count_substr (const char *hay, const char *needle)
{
  guint n = 0;

  for (const char *q = strstr (hay, needle); q != NULL; q = strstr (q + 1, needle))
    n++;
  return n;
}

static void
test_rounding_eager (void)
{
  static const char text[] =
    "import torch\n"
    "import thunder.torch as ltorch\n"
    "from thunder.executors.torchex import no_autocast\n\n"
    "@torch.no_grad()\n"
    "@no_autocast\n"
    "def computation(a, b, c):\n"
    "  # a: \"cuda:0 bf16[64]\"\n"
    "  # b: \"cuda:0 bf16[64]\"\n"
    "  # c: \"cuda:0 bf16[64]\"\n"
    "  t0 = ltorch.mul(a, b)  # t0: \"cuda:0 bf16[64]\"\n"
    "  t1 = ltorch.add(t0, c)  # t1: \"cuda:0 bf16[64]\"\n"
    "  return (t1,)\n";
  const char *modes[] = { "fused", "eager" };
  guint n_round[2];
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTrace) t = cs_parse_trace (text, "mul_add.txt", &error);
  CsGradSpec none = { FALSE, NULL, TRUE, NULL };

  g_assert_no_error (error);
  for (guint m = 0; m < 2; m++)
    {
      g_autoptr(CsPipeline) pl = NULL;
      CsPolicy policy;
      CsCudaProgram *p;

      cs_policy_init_default (&policy);
      cs_policy_set (&policy, "executors", "nvfuser,torch", NULL);
      g_assert_true (cs_policy_set (&policy, "rounding", modes[m], NULL));
      pl = cs_pipeline_run (t, &policy, &none, &error);
      g_assert_no_error (error);
      p = cs_cuda_program_generate (cs_pipeline_get_forward (pl), NULL, &policy, &error);
      g_assert_no_error (error);
      n_round[m] = count_substr (p->source->str, "cs_rbf (");
      g_test_message ("rounding=%s: %u bf16 roundings in the kernel source", modes[m], n_round[m]);
      compile_ok (p);
      cs_cuda_program_free (p);
    }
  /* the pointwise kernel has two copies of its body (eight elements a thread with vector loads,
   * and the tail): fused rounds t1 in each, eager t0 and t1 in each */
  g_assert_cmpuint (n_round[0], ==, 2);
  g_assert_cmpuint (n_round[1], ==, 4);
}

/* Tensors in @v (a return value), None and numbers left out. */
static guint
count_tensors (CsValue *v)
{
  g_autoptr(GPtrArray) ps = g_ptr_array_new ();
  guint n = 0;

  if (v)
    cs_value_collect_proxies (v, ps);
  for (guint i = 0; i < ps->len; i++)
    n += ((CsProxy *) g_ptr_array_index (ps, i))->kind == CS_PROXY_TENSOR;
  return n;
}

/* Every torch.compile sample of data/aten (forward graph + backward graph, issue 22) builds
 * for the GPU, kernels compiled by NVRTC: the backward reads the saved tensors the forward
 * returns by name and takes `tangents_N` as its cotangent inputs.  The program's inputs are
 * the forward's tensor parameters plus the tangents; its outputs the forward's returned
 * tensors plus the backward's gradients, counted from the graphs as printed. */
static void
test_aten_samples (void)
{
  const char *dir = g_getenv ("CS_DATA_DIR");
  g_autofree char *adir = dir ? g_build_filename (dir, "aten", NULL) : NULL;
  g_autoptr(GDir) gd = adir ? g_dir_open (adir, 0, NULL) : NULL;
  const char *n;
  guint count = 0;

  if (gd == NULL)
    {
      g_test_skip ("data/aten not found");
      return;
    }
  while ((n = g_dir_read_name (gd)))
    {
      g_autofree char *path = NULL;
      g_autoptr(CsTraceList) list = NULL;
      g_autoptr(CsPipeline) pl = NULL;
      g_autoptr(GError) error = NULL;
      g_autoptr(GPtrArray) fin = NULL, bin = NULL;
      CsTrace *fw_in, *bw_in;
      CsPolicy policy;
      CsCudaProgram *p;
      guint n_in = 0, n_tangents = 0;

      if (!g_str_has_suffix (n, ".txt"))
        continue;
      path = g_build_filename (adir, n, NULL);
      g_test_message ("aten: %s", path);
      list = cs_parse_file (path, &error);
      g_assert_no_error (error);
      fw_in = g_ptr_array_index (list->traces, 0);
      g_assert_cmpint (cs_trace_aten_role (fw_in), ==, CS_ATEN_GRAPH_FORWARD);
      bw_in = cs_aten_find_backward (list, 0);
      g_assert_nonnull (bw_in);
      cs_policy_init_default (&policy);
      pl = cs_pipeline_run_pair (fw_in, bw_in, &policy, &error);
      g_assert_no_error (error);
      p = cs_cuda_program_build_full (cs_pipeline_get_forward (pl), cs_pipeline_get_backward (pl),
                                      &policy, CS_CUDA_BUILD_DRY | CS_CUDA_BUILD_COMPILE, &error);
      g_assert_no_error (error);
      fin = cs_trace_dup_inputs (fw_in);
      for (guint i = 0; i < fin->len; i++)
        n_in += ((CsProxy *) g_ptr_array_index (fin, i))->kind == CS_PROXY_TENSOR;
      bin = cs_trace_dup_inputs (bw_in);
      for (guint i = 0; i < bin->len; i++)
        n_tangents += g_str_has_prefix (((CsProxy *) g_ptr_array_index (bin, i))->name, "tangents_");
      g_assert_cmpuint (n_tangents, >, 0);
      g_assert_cmpuint (p->inputs->len, ==, n_in + n_tangents);
      g_assert_cmpuint (p->outputs->len, ==,
                        count_tensors (cs_trace_get_return (fw_in)->value)
                        + count_tensors (cs_trace_get_return (bw_in)->value));
      cs_cuda_program_free (p);
      count++;
    }
  g_assert_cmpuint (count, >=, 16);
}

/* The GPT stack of tests/oracle/gpt_stack.py (4 blocks), Thunder's initial trace printed by
 * thunder-kit on the H200, under the default policy (sdpa and TorchCompile cross-entropy as the
 * GPU runs them): every kernel compiles.  Its layer norms read the three views of c_attn's
 * split through index names made inside the row kernel's pass; the 16-byte loads at the
 * kernel's head once named them before they were defined (NVRTC: "identifier i0 is
 * undefined"). */
static void
test_gpt_stack (void)
{
  const char *srcdir = g_getenv ("G_TEST_SRCDIR");
  g_autofree char *path = g_build_filename (srcdir ? srcdir : ".", "oracle", "gpt_stack4_initial.txt", NULL);
  g_autoptr(CsTraceList) list = NULL;
  g_autoptr(CsPipeline) pl = NULL;
  g_autoptr(GError) error = NULL;
  CsPolicy policy;
  CsCudaProgram *p;

  list = cs_parse_file (path, &error);
  g_assert_no_error (error);
  cs_policy_init_default (&policy);
  pl = cs_pipeline_run (g_ptr_array_index (list->traces, 0), &policy, NULL, &error);
  g_assert_no_error (error);
  p = cs_cuda_program_build_full (cs_pipeline_get_forward (pl), cs_pipeline_get_backward (pl),
                                  &policy, CS_CUDA_BUILD_DRY, &error);
  g_assert_no_error (error);
  assert_arena_disjoint (p);
  compile_ok (p);
  cs_cuda_program_free (p);
}

/* ---- launches per step (issue 20) ---- */

typedef struct
{
  guint steps;      /* launches per training step */
  guint matmuls;    /* of which cublasLtMatmul calls */
  guint finalize;   /* kernels adding up a column reduction's partials */
  guint copies;     /* contiguous copies of views */
  guint setup;      /* constant fills run once per program */
  guint split_sums; /* column reductions split over blocks, the last block merging the splits */
  guint counters;   /* buffers zeroed once per program (those reductions' split counters) */
  guint merged;     /* region kernels that share a launch with the one before them */
  guint bias_grads; /* matmuls that also write a bias gradient (CUBLASLT_EPILOGUE_BGRADB) */
  guint splits_cats;/* kernels of ltorch.split and ltorch.cat statements */
} Launches;

/* The launches of @init's training step under the default policy (attention and cross-entropy
 * fused, as the GPU runs it), from a dry build. */
static void
count_launches (CsTrace *init, Launches *n)
{
  g_autoptr(CsPipeline) pl = NULL;
  g_autoptr(GError) error = NULL;
  CsPolicy policy;
  CsCudaProgram *p;

  memset (n, 0, sizeof *n);
  cs_policy_init_default (&policy);
  pl = cs_pipeline_run (init, &policy, NULL, &error);
  g_assert_no_error (error);
  p = cs_cuda_program_build_full (cs_pipeline_get_forward (pl), cs_pipeline_get_backward (pl), &policy,
                                  CS_CUDA_BUILD_DRY, &error);
  g_assert_no_error (error);
  n->steps = p->steps->len;
  for (guint i = 0; i < p->steps->len; i++)
    {
      CsCudaStep *s = g_ptr_array_index (p->steps, i);

      n->matmuls += s->kind == CS_CUDA_STEP_GEMM;
      n->bias_grads += strstr (s->label, "+bias grad") != NULL;
      for (const char *c = strstr (s->label, "ltorch.split"); c; c = strstr (c + 1, "ltorch.split"))
        n->splits_cats++;
      for (const char *c = strstr (s->label, "ltorch.cat"); c; c = strstr (c + 1, "ltorch.cat"))
        n->splits_cats++;
      n->finalize += strstr (s->label, "finalize") != NULL;
      /* a merged launch "A + B" counts the copies among its parts */
      for (const char *c = strstr (s->label, "reshape copy"); c; c = strstr (c + 1, "reshape copy"))
        n->copies++;
      for (const char *c = strstr (s->label, " + "); c; c = strstr (c + 1, " + "))
        n->merged++;
      for (const char *c = strstr (s->label, "the last adds them"); c; c = strstr (c + 1, "the last adds them"))
        n->split_sums++;
      /* the constant fills never run per step */
      g_assert_null (strstr (s->label, "attention zero i64"));
    }
  n->setup = p->setup_steps->len;
  for (guint i = 0; i < p->buffers->len; i++)
    {
      CsCudaBuffer *b = &g_array_index (p->buffers, CsCudaBuffer, i);

      if (b->zeroed)
        {
          /* one 32-bit count per output column (per 256-column tile in the vector form),
           * live for the whole step */
          g_assert_true (b->pinned);
          n->counters++;
        }
    }
  if (n->split_sums > 0)
    {
      g_assert_nonnull (strstr (p->source->str, "atomicAdd (&a"));
      /* the partials read back from L2: scalar (__ldcg (&aN[...])) or 16-byte (__ldcg (ps_)) */
      g_assert_true (strstr (p->source->str, "__ldcg (&a") || strstr (p->source->str, "__ldcg (ps_)"));
    }
  for (guint i = 0; i < p->setup_steps->len; i++)
    {
      CsCudaStep *s = g_ptr_array_index (p->setup_steps, i);

      /* a constant fill reads nothing and owns its pinned buffers */
      g_assert_cmpuint (s->reads->len, ==, 0);
      g_assert_cmpuint (s->writes->len, >, 0);
      for (guint j = 0; j < s->writes->len; j++)
        g_assert_true (g_array_index (p->buffers, CsCudaBuffer,
                                      cs_cuda_program_slot (p, g_array_index (s->writes, guint, j))->buffer).pinned);
    }
  assert_arena_disjoint (p);
  cs_cuda_program_free (p);
}

/* The 8-block LLaMA step's launches against the census of kernels/BENCH-RESULTS.md ("Launches
 * per block"): 47 per block + 13 outside them = 389 before issue 20's levers.  The 5 constant
 * fills of each block's sdpa outputs (RNG seed and offset, sequence lengths) run once per
 * program: 42 per block, and 40 fills at setup.  The 2 RMSNorm weight-gradient finalizes of
 * each block (and the final norm's) go: their column sums' last split block merges the
 * partials: 40 per block, 8 x 40 + 12 = 332.  Adjacent independent region kernels share a
 * launch: in each block's backward the two RMSNorm backwards' column sum and row kernel, and
 * RoPE backward's two pointwise kernels (3 per block), and the final norm's pair: 37 per
 * block, 8 x 37 + 11 = 307.  Two copies per block go when the kernel writing a tensor lays it
 * out for the transpose a reshape reads (cs_cuda_program_new_output_slot): the attention
 * output y [B, H, T, D] is written as [B, T, H, D], so transpose + reshape to [B, T, H*D] for
 * wo is a view; RoPE backward's dK is stored the same way for its transpose + reshape into the
 * wk matmuls: 35 per block, 8 x 35 + 11 = 291.  The backward attention's dQ and dK/dV
 * kernels (128 threads, 20 and 22 KiB of shared tiles at head dim 32) read the same operands
 * and write different gradients: they share one launch.  No other launch changes: 34 per
 * block, 8 x 34 + 11 = 283. */
static void
test_launches_llama (void)
{
  g_autoptr(CsTrace) init = load_shared ("thunder_llama_stack_initial.txt");
  Launches n;

  if (init == NULL)
    {
      g_test_skip ("../shared/traces not present");
      return;
    }
  count_launches (init, &n);
  g_test_message ("LLaMA 8 blocks: %u launches (%u matmuls, %u finalize, %u copies), %u fills once",
                  n.steps, n.matmuls, n.finalize, n.copies, n.setup);
  g_assert_cmpuint (n.matmuls, ==, 8 * 21 + 3);
  g_assert_cmpuint (n.setup, ==, 8 * 5);
  g_assert_cmpuint (n.finalize, ==, 0);
  g_assert_cmpuint (n.split_sums, ==, 8 * 2 + 1);
  g_assert_cmpuint (n.counters, ==, 8 * 2 + 1);
  g_assert_cmpuint (n.copies, ==, 0);
  g_assert_cmpuint (n.bias_grads, ==, 0);
  g_assert_cmpuint (n.splits_cats, ==, 0);
  g_assert_cmpuint (n.merged, ==, 8 * 4 + 1);
  g_assert_cmpuint (n.steps, ==, 8 * 34 + 11);
}

/* The 4-block GPT of tests/oracle: 222 launches before issue 20's levers (51 matmuls, 34
 * finalizes, 16 copies, 20 constant fills of sdpa outputs and the iota of the positions); the
 * 21 fills run once per program: 201; the 34 column sums (bias and LayerNorm gradients) merge
 * their splits in their last block: 167.  Each merge of adjacent independent region kernels
 * takes one launch more off: 167 - merged, at least the 4 x 2 pairs of LayerNorm backward
 * column sums of the blocks' two norms.  The 16 copies (per block the attention output for
 * c_proj, and dQ, dK, dV transposed and reshaped for the `cat` of c_attn's backward) go: the
 * attention kernels write those tensors as [B, T, H, D] (cs_cuda_program_new_output_slot),
 * so each transpose + reshape is a view: 222 - 21 - 34 - 16 - merged.  The 16 bias gradients
 * (4 linears a block) are computed by their weight gradient's matmul (CUBLASLT_EPILOGUE_BGRADB):
 * 16 of the 34 column sums leave their regions, each of them a part of a merged launch, so the
 * launches stay (16 fewer kernel parts, 16 fewer merges): 222 - 21 - 34 - 16 - 16 - merged.
 * Each block's forward `ltorch.split` of c_attn's output into q, k, v is three views (slices of
 * its input: no kernel; the reshapes after them are strided views), and its backward `cat` of
 * dQ, dK, dV for c_attn's gradients is written in place by the attention kernels (each piece
 * laid out in the cat's output): 8 kernels fewer, 222 - 21 - 34 - 16 - 16 - 8 - merged = 115. */
static void
test_launches_gpt (void)
{
  const char *srcdir = g_getenv ("G_TEST_SRCDIR");
  g_autofree char *path = g_build_filename (srcdir ? srcdir : ".", "oracle", "gpt_stack4_initial.txt", NULL);
  g_autoptr(CsTraceList) list = NULL;
  g_autoptr(GError) error = NULL;
  Launches n;

  list = cs_parse_file (path, &error);
  g_assert_no_error (error);
  count_launches (g_ptr_array_index (list->traces, 0), &n);
  g_test_message ("GPT 4 blocks: %u launches (%u matmuls, %u finalize, %u copies), %u fills once",
                  n.steps, n.matmuls, n.finalize, n.copies, n.setup);
  g_assert_cmpuint (n.matmuls, ==, 51);
  g_assert_cmpuint (n.setup, ==, 4 * 5 + 1);
  g_assert_cmpuint (n.finalize, ==, 0);
  g_assert_cmpuint (n.bias_grads, ==, 4 * 4);
  g_assert_cmpuint (n.split_sums, ==, 34 - 16);
  g_assert_cmpuint (n.counters, ==, 34 - 16);
  g_assert_cmpuint (n.copies, ==, 0);
  g_assert_cmpuint (n.merged, >=, 4 * 2);
  g_assert_cmpuint (n.splits_cats, ==, 0);
  g_assert_cmpuint (n.steps, ==, 222 - 21 - 34 - 16 - 16 - 8 - n.merged);
  g_assert_cmpuint (n.steps, ==, 115);
}

/* Settings from the environment: a value in range is taken, an unset or empty one gives the
 * default silently, any other one gives the default and one line on stderr naming it. */
static void
test_env_uint (void)
{
  if (g_test_subprocess ())
    {
      g_setenv ("CS_TEST_ENV_UINT", "3", TRUE);
      g_assert_cmpuint (cs_cuda_env_uint ("CS_TEST_ENV_UINT", 1, 4, 4), ==, 3);
      g_setenv ("CS_TEST_ENV_UINT", "", TRUE);
      g_assert_cmpuint (cs_cuda_env_uint ("CS_TEST_ENV_UINT", 1, 4, 4), ==, 4);
      g_setenv ("CS_TEST_ENV_UINT", "9", TRUE);
      g_assert_cmpuint (cs_cuda_env_uint ("CS_TEST_ENV_UINT", 1, 4, 4), ==, 4);
      g_setenv ("CS_TEST_ENV_UINT", "four", TRUE);
      g_assert_cmpuint (cs_cuda_env_uint ("CS_TEST_ENV_UINT", 1, 4, 4), ==, 4);
      g_setenv ("CS_TEST_ENV_MIN", "1e5", TRUE);
      g_assert_cmpuint (cs_cuda_env_uint ("CS_TEST_ENV_MIN", 0, G_MAXUINT64, 131072), ==, 131072);
      g_setenv ("CS_TEST_ENV_MIN", "0", TRUE);
      g_assert_cmpuint (cs_cuda_env_uint ("CS_TEST_ENV_MIN", 0, G_MAXUINT64, 131072), ==, 0);
      return;
    }
  g_test_trap_subprocess (NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
  g_test_trap_assert_passed ();
  /* once per variable: "9" is reported, "four" (the same variable) is not */
  g_test_trap_assert_stderr ("*castscope: CS_TEST_ENV_UINT=9 ignored: not a whole number in 1..4; using 4*");
  g_test_trap_assert_stderr_unmatched ("*CS_TEST_ENV_UINT=four*");
  g_test_trap_assert_stderr ("*castscope: CS_TEST_ENV_MIN=1e5 ignored*using 131072*");
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, G_TEST_OPTION_ISOLATE_DIRS, NULL);
  g_test_add_func ("/kernels/codegen/seed", test_seed);
  g_test_add_func ("/kernels/codegen/mlp", test_mlp);
  g_test_add_func ("/kernels/codegen/reductions", test_small);
  g_test_add_func ("/kernels/codegen/row-fused", test_row_fused);
  g_test_add_func ("/kernels/codegen/membound-forms", test_membound_forms);
  g_test_add_func ("/kernels/codegen/reshape-view", test_reshape_view);
  g_test_add_func ("/kernels/codegen/transposed-output", test_transposed_output);
  g_test_add_func ("/kernels/codegen/bias-grad-epilogue", test_bias_grad_epilogue);
  g_test_add_func ("/kernels/codegen/strided-views", test_strided_views);
  g_test_add_func ("/kernels/codegen/unsupported", test_unsupported);
  g_test_add_func ("/kernels/codegen/pipeline/seed", test_pipeline_seed);
  g_test_add_func ("/kernels/codegen/pipeline/mlp", test_pipeline_mlp);
  g_test_add_func ("/kernels/codegen/pipeline/llama", test_pipeline_llama);
  g_test_add_func ("/kernels/codegen/pipeline/llama-eager", test_pipeline_llama_eager);
  g_test_add_func ("/kernels/codegen/dedupe/llama", test_dedupe_llama);
  g_test_add_data_func ("/kernels/codegen/samples/small", ".", test_samples);
  g_test_add_data_func ("/kernels/codegen/samples/bench", "bench", test_samples);
  g_test_add_func ("/kernels/codegen/f64/samples", test_f64_samples);
  g_test_add_func ("/kernels/codegen/rounding-eager", test_rounding_eager);
  g_test_add_func ("/kernels/codegen/aten/samples", test_aten_samples);
  g_test_add_func ("/kernels/codegen/gpt-stack", test_gpt_stack);
  g_test_add_func ("/kernels/codegen/launches/llama", test_launches_llama);
  g_test_add_func ("/kernels/codegen/launches/gpt", test_launches_gpt);
  g_test_add_func ("/kernels/codegen/env-uint", test_env_uint);
  return g_test_run ();
}
