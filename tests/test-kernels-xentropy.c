/* test-kernels-xentropy.c: the fused cross-entropy kernels (kernels/cs-cuda-xentropy.c).
 *
 * Traces: F.cross_entropy(logits[.float()], targets) in Thunder's initial-trace format, run
 * through castscope's passes with executors=torchcompile_xentropy,nvfuser,torch, so the final
 * forward holds a TorchCompile region of cross_entropy's decomposition and the backward one of
 * nll_loss_backward + log_softmax_backward (as Thunder prints them in
 * thunder_llama_stack_final_*.txt).
 *
 * Without a device: the programs are generated and NVRTC-compiled to CUBINs (f32, bf16 and the
 * f64 reference), the kernels have the expected structure (rows + reduction + backward), carry no
 * trace names, and regions the kernels do not compute are refused naming the statement.
 * With a device: every output and gradient against the CPU reference in f64 (core/cs-ref.c),
 * normwise relative error under a per-dtype bound (the mean's count and the saved log-softmax
 * are checked through the loss and the gradient, which read them); the f64 GPU program
 * against the CPU f64 run to 1e-12.  Inputs: logits 3 * N(0, 1) (a fixed generator), targets
 * uniform in [0, V) with every third row (from row 1) ignore_index = -100, cotangent 1.5.
 */
#include "cs-config.h"

#include <math.h>
#include <string.h>

#include "cs-cuda-private.h"
#include "cs-parse.h"
#include "cs-pipeline.h"
#include "cs-ref.h"
#include "cs-tensor.h"

static gboolean have_device;
static gboolean special_inputs;   /* make_input: logits rows with inf and NaN (test_gpu_non_finite) */
static gboolean rounds_inside;    /* the step rounds to bf16 itself (the f64 truth does not): every
                                     output's bound is bf16's (test_gpu_around) */

typedef struct
{
  int64_t     R, V;
  CsDtype     dt;          /* logits dtype: BF16 (upcast to f32 first) or F32 */
  const char *reduction;   /* mean, sum, none */
} Case;

/* The initial trace of @c (data/bench/cross_entropy_v50304.txt's form). */
static char *
case_trace (const Case *c)
{
  GString *s = g_string_new ("");
  const char *d = cs_dtype_short_name (c->dt);
  gboolean none = strcmp (c->reduction, "none") == 0;
  g_autofree char *out_shape = none ? g_strdup_printf ("[%" G_GINT64_FORMAT "]", c->R) : g_strdup ("[]");

  g_string_append (s, "import thunder\nimport thunder.core.dtypes as dtypes\nimport thunder.torch as ltorch\n"
                      "import torch\nfrom thunder.executors.torchex import no_autocast\n\n"
                      "@torch.no_grad()\n@no_autocast\ndef computation(logits, targets):\n");
  g_string_append_printf (s, "  # logits: \"cuda:0 %s[%" G_GINT64_FORMAT ", %" G_GINT64_FORMAT "]\"\n", d, c->R, c->V);
  g_string_append_printf (s, "  # targets: \"cuda:0 i64[%" G_GINT64_FORMAT "]\"\n", c->R);
  if (c->dt != CS_DTYPE_F32)
    g_string_append_printf (s, "  t0 = ltorch.to(logits, dtypes.float32, None, device=None, dtype=None, copy=False, "
                            "memory_format=None)  # t0: \"cuda:0 f32[%" G_GINT64_FORMAT ", %" G_GINT64_FORMAT "]\"\n",
                            c->R, c->V);
  g_string_append_printf (s, "  t1 = ltorch.cross_entropy(%s, targets, None, None, -100, None, '%s', 0.0)"
                          "  # t1: \"cuda:0 f32%s\"\n", c->dt != CS_DTYPE_F32 ? "t0" : "logits", c->reduction,
                          out_shape);
  g_string_append (s, "  return (t1,)\n");
  return g_string_free (s, FALSE);
}

static void
xent_policy (CsPolicy *policy)
{
  cs_policy_init_default (policy);
  g_assert_true (cs_policy_set (policy, "executors", "torchcompile_xentropy,nvfuser,torch", NULL));
}

static CsPipeline *
case_pipeline (const Case *c)
{
  g_autofree char *text = case_trace (c);
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTrace) t = cs_parse_trace (text, "xentropy", &error);
  CsPolicy policy;
  CsPipeline *pl;

  g_assert_no_error (error);
  xent_policy (&policy);
  pl = cs_pipeline_run (t, &policy, NULL, &error);
  g_assert_no_error (error);
  g_assert_nonnull (pl);
  return pl;
}

/* TRUE when a top-level statement of @t is a TorchCompile region. */
static gboolean
has_torchcompile (const CsTrace *t)
{
  for (guint i = 0; i < t->n_stmts; i++)
    if (t->stmts[i]->kind == CS_STMT_CALL && t->stmts[i]->callee
        && g_str_has_prefix (t->stmts[i]->callee, "TorchCompile"))
      return TRUE;
  return FALSE;
}

static guint
count_steps (CsCudaProgram *p, const char *what)
{
  guint n = 0;

  for (guint i = 0; i < p->steps->len; i++)
    if (strstr (((CsCudaStep *) g_ptr_array_index (p->steps, i))->label, what))
      n++;
  return n;
}

/* ---- without a device ---- */

static CsCudaStep *
find_step (CsCudaProgram *p, const char *what)
{
  for (guint i = 0; i < p->steps->len; i++)
    if (strstr (((CsCudaStep *) g_ptr_array_index (p->steps, i))->label, what))
      return g_ptr_array_index (p->steps, i);
  g_assert_not_reached ();
}

static guint
step_index (CsCudaProgram *p, const char *what)
{
  for (guint i = 0; i < p->steps->len; i++)
    if (strstr (((CsCudaStep *) g_ptr_array_index (p->steps, i))->label, what))
      return i;
  g_assert_not_reached ();
}

/* The training step of @c moves the logits once from DRAM, the gradient written once (@fused,
 * the default): the rows step, the backward fused in, reads the [R, V] logits and writes the
 * per-row values and the gradient [R, V] in the logits' dtype, and no backward step is left;
 * 'mean' counts the rows not ignored before it, in a step of its own.  Without (@fused FALSE,
 * CASTSCOPE_XENT_FUSED=0) the logits move once forward and twice backward: the rows kernel
 * reads them and writes only per-row values (no log-softmax); the backward reads the logits
 * and the per-row logsumexp and writes the gradient. */
static void
check_step_bytes (CsCudaProgram *p, const Case *c, gboolean fused)
{
  CsCudaStep *rs = find_step (p, "cross-entropy rows"), *bs;
  double xb = (double) (c->R * c->V) * (double) cs_dtype_size_bytes (c->dt);
  gboolean reads_x = FALSE;
  guint big = 0;

  if (fused)
    {
      g_assert_nonnull (strstr (rs->label, "gradient"));
      g_assert_cmpfloat (rs->bytes, <=, 2 * xb + 32.0 * (double) c->R);
      if (c->V == 1)
        return;   /* [R, V] is [R]: nothing to tell the gradient from the row losses */
      g_assert_cmpuint (count_steps (p, "cross-entropy backward"), ==, 0);
      g_assert_cmpuint (count_steps (p, "cross-entropy count"), ==, strcmp (c->reduction, "mean") == 0 ? 1 : 0);
      if (strcmp (c->reduction, "mean") == 0)
        g_assert_cmpuint (step_index (p, "cross-entropy count"), <, step_index (p, "cross-entropy rows"));
      for (guint i = 0; i < rs->reads->len; i++)
        {
          CsCudaSlot *sl = cs_cuda_program_slot (p, g_array_index (rs->reads, guint, i));

          if ((int64_t) cs_cuda_slot_numel (sl) == c->R * c->V)
            {
              g_assert_cmpint (sl->dtype, ==, c->dt);
              reads_x = TRUE;
              big++;
            }
          else
            g_assert_cmpuint (cs_cuda_slot_numel (sl), <=, (guint64) c->R);
        }
      g_assert_true (reads_x);
      g_assert_cmpuint (big, ==, 1);   /* the logits, and nothing else of [R, V] */
      big = 0;
      for (guint i = 0; i < rs->writes->len; i++)
        {
          CsCudaSlot *sl = cs_cuda_program_slot (p, g_array_index (rs->writes, guint, i));

          if ((int64_t) cs_cuda_slot_numel (sl) == c->R * c->V)
            {
              g_assert_cmpint (sl->dtype, ==, c->dt);
              big++;
            }
          else
            g_assert_cmpuint (cs_cuda_slot_numel (sl), <=, (guint64) c->R);
        }
      g_assert_cmpuint (big, ==, 1);   /* the gradient */
      return;
    }
  bs = find_step (p, "cross-entropy backward");
  g_assert_null (strstr (rs->label, "gradient"));
  for (guint i = 0; i < rs->writes->len; i++)
    g_assert_cmpuint (cs_cuda_slot_numel (cs_cuda_program_slot (p, g_array_index (rs->writes, guint, i))), <=,
                      (guint64) c->R);
  g_assert_cmpfloat (rs->bytes, <=, xb + 32.0 * (double) c->R);
  for (guint i = 0; i < bs->reads->len; i++)
    {
      CsCudaSlot *sl = cs_cuda_program_slot (p, g_array_index (bs->reads, guint, i));

      reads_x |= sl->dtype == c->dt && (int64_t) cs_cuda_slot_numel (sl) == c->R * c->V;
    }
  g_assert_true (reads_x);
  g_assert_cmpuint (bs->writes->len, ==, 1);
  g_assert_cmpint (cs_cuda_program_slot (p, g_array_index (bs->writes, guint, 0))->dtype, ==, c->dt);
  g_assert_cmpfloat (bs->bytes, <=, 2 * xb + 32.0 * (double) c->R);
}

static const Case compile_cases[] = {
  { 7, 37, CS_DTYPE_BF16, "mean" },
  { 7, 1000, CS_DTYPE_F32, "sum" },
  { 64, 50304, CS_DTYPE_BF16, "mean" },
  { 7, 37, CS_DTYPE_F32, "none" },
  { 1, 1, CS_DTYPE_F32, "mean" },
  { 7, 1000, CS_DTYPE_F16, "mean" },
  { 2, 262144, CS_DTYPE_BF16, "mean" },
};

/* Generated, NVRTC-compiled (sm_90), with a rows kernel, a reduction (mean, sum) and the
 * backward (fused into the rows kernel; with CASTSCOPE_XENT_FUSED=0, reread1024 and split too), each
 * once, moving the bytes check_step_bytes() expects; the f64 reference's program compiles as
 * well. */
static void
test_nvrtc (void)
{
  static const char *modes[] = { NULL, "0", "reread1024", "split" };   /* NULL: "1", the default */

  for (gsize k = 0; k < G_N_ELEMENTS (compile_cases) * G_N_ELEMENTS (modes); k++)
    {
      const char *mode = modes[k / G_N_ELEMENTS (compile_cases)];
      gboolean fused = g_strcmp0 (mode, "0") != 0, regs = mode == NULL || g_strcmp0 (mode, "split") == 0;
      const Case *c = &compile_cases[k % G_N_ELEMENTS (compile_cases)];
      g_autoptr(CsPipeline) pl = case_pipeline (c);
      CsTrace *fwd = cs_pipeline_get_forward (pl), *bwd = cs_pipeline_get_backward (pl);
      g_autoptr(GError) error = NULL;
      g_autoptr(GBytes) cubin = NULL;
      CsPolicy policy;
      CsCudaProgram *p;
      gboolean none = strcmp (c->reduction, "none") == 0;

      g_assert_true (has_torchcompile (fwd));
      g_assert_true (has_torchcompile (bwd));
      xent_policy (&policy);
      g_setenv ("CASTSCOPE_XENT_FUSED", mode ? mode : "1", TRUE);
      p = cs_cuda_program_build_full (fwd, bwd, &policy, CS_CUDA_BUILD_DRY | CS_CUDA_BUILD_COMPILE, &error);
      g_assert_no_error (error);
      g_assert_nonnull (p);
      if (g_getenv ("CS_DUMP_SOURCE") && c->V == 50304)
        {
          /* a developer hook: the benchmark's program source, one file a mode */
          g_autofree char *path = g_strdup_printf ("%s.%s.cu", g_getenv ("CS_DUMP_SOURCE"), mode ? mode : "1");

          g_file_set_contents (path, p->full_source, -1, NULL);
        }
      g_test_message ("R %" G_GINT64_FORMAT " V %" G_GINT64_FORMAT " %s %s (CASTSCOPE_XENT_FUSED %s): %u kernels, "
                      "%u steps", c->R, c->V, cs_dtype_short_name (c->dt), c->reduction, mode ? mode : "1",
                      p->n_kernels, p->steps->len);
      g_assert_cmpuint (count_steps (p, "cross-entropy rows"), ==, 1);
      g_assert_cmpuint (count_steps (p, "cross-entropy reduce"), ==, none ? 0 : 1);
      g_assert_cmpuint (count_steps (p, "cross-entropy backward"), ==, fused ? 0 : 1);
      g_assert_cmpuint (p->steps->len, ==, (none ? 1u : 2u) + (fused ? strcmp (c->reduction, "mean") == 0 : 1));
      g_assert_nonnull (p->cubins);
      g_assert_cmpuint (p->cubins->len, >=, 1);
      /* no trace text in the source */
      g_assert_null (strstr (p->source->str, "logits"));
      g_assert_null (strstr (p->source->str, "targets"));
      g_assert_null (strstr (p->source->str, "TorchCompile"));
      /* the literal ignore_index and V are there */
      g_assert_nonnull (strstr (p->source->str, "-100LL"));
      {
        g_autofree char *v = g_strdup_printf ("V = %" G_GINT64_FORMAT "LL", c->V);

        g_assert_nonnull (strstr (p->source->str, v));
      }
      /* 16-byte vector loads where the rows allow (V a multiple of 8 bf16/f16 or 4 f32
       * elements); 8-byte ones for 16-bit rows of a multiple of 4 */
      if (c->V % (c->dt == CS_DTYPE_F32 ? 4 : 8) == 0)
        g_assert_nonnull (strstr (p->source->str, "uint4"));
      if (c->V == 50304 && c->dt == CS_DTYPE_BF16 && !regs)
        {
          g_assert_nonnull (strstr (p->source->str, "g0 < V / 8"));
          g_assert_null (strstr (p->source->str, " rc["));   /* one pass: no row kept in registers */
        }

      if (c->V == 262144 && fused)   /* too long for registers: the gradient pass reads it again */
        g_assert_null (strstr (p->source->str, " rc["));
      if (g_strcmp0 (mode, "reread1024") == 0)
        g_assert_nonnull (strstr (p->source->str, "__launch_bounds__(1024)"));
      if (regs && c->V == 50304 && c->dt == CS_DTYPE_BF16)
        {
          /* 2816 groups of 8 in shared memory, the other 3472 in registers, 7 a thread of 512 */
          g_assert_nonnull (strstr (p->source->str, "sx[2816]"));
          g_assert_nonnull (strstr (p->source->str, "rc[7]"));
          g_assert_nonnull (strstr (p->source->str, "__launch_bounds__(512, 2)"));
        }
      check_step_bytes (p, c, fused);
      cs_cuda_program_free (p);

      p = cs_cuda_program_generate_f64 (fwd, bwd, &policy, &error);
      g_assert_no_error (error);
      g_assert_nonnull (p);
      g_assert_nonnull (strstr (p->source->str, "double"));
      g_assert_null (strstr (p->source->str, "cs_bf2f"));
      g_assert_true (cs_cuda_jit_compile (p->source->str, 9, 0, &cubin, NULL, &error));
      g_assert_no_error (error);
      g_assert_cmpmem (g_bytes_get_data (cubin, NULL), 4, "\177ELF", 4);
      cs_cuda_program_free (p);
    }
  g_setenv ("CASTSCOPE_XENT_FUSED", "1", TRUE);
}

/* log_softmax(logits.float()) returned, in Thunder's initial-trace format: the rows kernel
 * writes log-softmax (a forward output the backward reads too). */
static char *
logp_trace (int64_t R, int64_t V, CsDtype dt)
{
  const char *d = cs_dtype_short_name (dt);

  return g_strdup_printf (
    "import thunder\nimport thunder.core.dtypes as dtypes\nimport thunder.torch as ltorch\nimport torch\n"
    "from thunder.executors.torchex import no_autocast\n\n@torch.no_grad()\n@no_autocast\n"
    "def computation(logits, targets):\n"
    "  # logits: \"cuda:0 %s[%" G_GINT64_FORMAT ", %" G_GINT64_FORMAT "]\"\n"
    "  # targets: \"cuda:0 i64[%" G_GINT64_FORMAT "]\"\n"
    "  t0 = ltorch.to(logits, dtypes.float32, None, device=None, dtype=None, copy=False, memory_format=None)"
    "  # t0: \"cuda:0 f32[%" G_GINT64_FORMAT ", %" G_GINT64_FORMAT "]\"\n"
    "  t1 = ltorch.log_softmax(t0, 1, dtype=None)  # t1: \"cuda:0 f32[%" G_GINT64_FORMAT ", %" G_GINT64_FORMAT "]\"\n"
    "  return (t1,)\n", d, R, V, R, R, V, R, V);
}

static CsPipeline *
logp_pipeline (int64_t R, int64_t V, CsDtype dt)
{
  g_autofree char *text = logp_trace (R, V, dt);
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTrace) t = cs_parse_trace (text, "logp", &error);
  CsPolicy policy;
  CsPipeline *pl;

  g_assert_no_error (error);
  xent_policy (&policy);
  pl = cs_pipeline_run (t, &policy, NULL, &error);
  g_assert_no_error (error);
  return pl;
}

/* log-softmax outputs: kept in registers at 256 and 1024 threads, 2-element groups, element by
 * element (the reduction field is unused) */
static const Case logp_cases[] = {
  { 3, 1000, CS_DTYPE_F32, "" }, { 3, 50304, CS_DTYPE_BF16, "" }, { 4, 1002, CS_DTYPE_BF16, "" },
  { 3, 37, CS_DTYPE_F32, "" },
};

/* The rows kernel still writes log-softmax when it is a forward output (the backward reads it
 * through the region codegen): generated, NVRTC-compiled, the [R, V] f32 tensor written. */
static void
test_logp_output (void)
{
  for (gsize k = 0; k < G_N_ELEMENTS (logp_cases); k++)
    {
      const Case *c = &logp_cases[k];
      g_autoptr(CsPipeline) pl = logp_pipeline (c->R, c->V, c->dt);
      g_autoptr(GError) error = NULL;
      CsPolicy policy;
      CsCudaProgram *p;
      CsCudaStep *rs;
      gboolean logp = FALSE;

      xent_policy (&policy);
      p = cs_cuda_program_build_full (cs_pipeline_get_forward (pl), cs_pipeline_get_backward (pl), &policy,
                                      CS_CUDA_BUILD_DRY | CS_CUDA_BUILD_COMPILE, &error);
      g_assert_no_error (error);
      g_assert_nonnull (p);
      rs = find_step (p, "cross-entropy rows");
      for (guint i = 0; i < rs->writes->len; i++)
        {
          CsCudaSlot *sl = cs_cuda_program_slot (p, g_array_index (rs->writes, guint, i));

          logp |= sl->dtype == CS_DTYPE_F32 && (int64_t) cs_cuda_slot_numel (sl) == c->R * c->V;
        }
      g_assert_true (logp);
      if (c->V == 50304)
        g_assert_nonnull (strstr (p->source->str, "__launch_bounds__(1024)"));
      cs_cuda_program_free (p);
    }
}

/* The same trace generates the same source (the disk cache's key), three kernels. */
static void
test_deterministic (void)
{
  const Case c = { 7, 37, CS_DTYPE_BF16, "mean" };
  g_autoptr(CsPipeline) pl = case_pipeline (&c);
  CsTrace *fwd = cs_pipeline_get_forward (pl), *bwd = cs_pipeline_get_backward (pl);
  g_autoptr(GError) error = NULL;
  CsPolicy policy;
  CsCudaProgram *p, *q;

  xent_policy (&policy);
  p = cs_cuda_program_generate (fwd, bwd, &policy, &error);
  g_assert_no_error (error);
  q = cs_cuda_program_generate (fwd, bwd, &policy, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (p->source->str, ==, q->source->str);
  g_assert_cmpuint (p->n_kernels, ==, 3);
  cs_cuda_program_free (p);
  cs_cuda_program_free (q);
}

/* A final trace whose forward region is @region_body (subsymbol lines) and returns @ret. */
static CsTrace *
region_trace (const char *outs, const char *region_body, const char *ret)
{
  g_autofree char *text = g_strdup_printf (
    "def computation(logits, targets):\n"
    "  # logits: \"cuda:0 f32[4, 10]\"\n"
    "  # targets: \"cuda:0 i64[4]\"\n"
    "  [%s] = TorchCompile0(logits, targets)\n"
    "%s"
    "  return (%s,)\n", outs, region_body, ret);
  g_autoptr(GError) error = NULL;
  CsTrace *t = cs_parse_trace (text, "region", &error);

  g_assert_no_error (error);
  return t;
}

/* Regions the kernels do not compute exactly are refused, naming the statement or output. */
static void
test_unsupported (void)
{
  static const struct { const char *outs, *body, *ret, *want; } cases[] = {
    { "t1", "    # t1 = ltorch.cross_entropy(logits, targets, None, None, -100, None, 'mean', 0.1)  # t1: \"cuda:0 f32[]\"\n",
      "t1", "label_smoothing" },
    { "t5", "    # t1 = ltorch.log_softmax(logits, 1, dtype=None)  # t1: \"cuda:0 f32[4, 10]\"\n"
            "    # t3 = ltorch.unsqueeze(targets, 1)  # t3: \"cuda:0 i64[4, 1]\"\n"
            "    # t4 = ltorch.ne(t3, -100)  # t4: \"cuda:0 b8[4, 1]\"\n"
            "    # t5 = prims.where(t4, t1, 0.0)  # t5: \"cuda:0 f32[4, 10]\"\n", "t5", "prims.where" },
    { "t4", "    # t1 = ltorch.cross_entropy(logits, targets, None, None, -100, None, 'mean', 0.0)  # t1: \"cuda:0 f32[]\"\n"
            "    # t3 = ltorch.unsqueeze(targets, 1)  # t3: \"cuda:0 i64[4, 1]\"\n"
            "    # t4 = ltorch.ne(t3, -100)  # t4: \"cuda:0 b8[4, 1]\"\n", "t4", "output t4" },
    { "t1", "    # t1 = ltorch.cross_entropy(logits, targets, logits, None, -100, None, 'mean', 0.0)  # t1: \"cuda:0 f32[]\"\n",
      "t1", "weight" },
    { "t2", "    # t2 = ltorch.cross_entropy(logits, targets, None, None, -100, None, 'mean', 0.0)  # t2: \"cuda:0 f32[]\"\n"
            "    # t1 = ltorch.log_softmax(t2, 0, dtype=None)  # t1: \"cuda:0 f32[]\"\n", "t2", "not the logits" },
    { "t2", "    # t1 = ltorch.log_softmax(logits, 1, dtype=None)  # t1: \"cuda:0 f32[4, 10]\"\n"
            "    # t2 = ltorch.neg(t1)  # t2: \"cuda:0 f32[4, 10]\"\n", "t2", "output t2" },
  };

  for (gsize k = 0; k < G_N_ELEMENTS (cases); k++)
    {
      g_autoptr(CsTrace) t = region_trace (cases[k].outs, cases[k].body, cases[k].ret);
      g_autoptr(GError) error = NULL;
      CsPolicy policy;
      CsCudaProgram *p;

      xent_policy (&policy);
      p = cs_cuda_program_generate (t, NULL, &policy, &error);
      g_assert_null (p);
      g_assert_error (error, CS_CUDA_ERROR, CS_CUDA_ERROR_UNSUPPORTED);
      g_test_message ("%s", error->message);
      g_assert_nonnull (strstr (error->message, cases[k].want));
      g_assert_nonnull (strstr (error->message, "line "));
    }
}

/* A region with an elementwise prologue (logits / 2, rounded to bf16 and back) and epilogue
 * (0.5 * exp(mean)) around the cross-entropy: the executor sweeps prims.div, convert_element_type
 * and such into its region. */
#define AROUND_BODY \
  "    # t5 = prims.div(logits, 2.0)  # t5: \"cuda:0 f32[4, 10]\"\n" \
  "    # t6 = prims.convert_element_type(t5, dtypes.bfloat16)  # t6: \"cuda:0 bf16[4, 10]\"\n" \
  "    # t0 = prims.convert_element_type(t6, dtypes.float32)  # t0: \"cuda:0 f32[4, 10]\"\n" \
  "    # t1 = ltorch.cross_entropy(t0, targets, None, None, -100, None, 'mean', 0.0)  # t1: \"cuda:0 f32[]\"\n" \
  "    # t3 = prims.exp(t1)  # t3: \"cuda:0 f32[]\"\n" \
  "    # t2 = prims.mul(t3, 0.5)  # t2: \"cuda:0 f32[]\"\n"

/* log_softmax alone, nll_loss on it (ignore_index=None is -1 in Thunder), a region output that
 * reshapes an input: generated, compiled. */
static void
test_other_forms (void)
{
  static const struct { const char *outs, *body, *ret; guint n_kernels; } cases[] = {
    { "t1", "    # t1 = ltorch.log_softmax(logits, -1, dtype=None)  # t1: \"cuda:0 f32[4, 10]\"\n", "t1", 1 },
    { "t1, t2", "    # t1 = ltorch.log_softmax(logits, 1, dtype=None)  # t1: \"cuda:0 f32[4, 10]\"\n"
                "    # t2 = ltorch.nll_loss(t1, targets, None, None, 'sum')  # t2: \"cuda:0 f32[]\"\n", "t2", 2 },
    { "t1, t3", "    # t1 = ltorch.cross_entropy(logits, targets, None, None, 3, None, 'none', 0.0)  # t1: \"cuda:0 f32[4]\"\n"
                "    # t3 = ltorch.reshape(targets, (2, 2))  # t3: \"cuda:0 i64[2, 2]\"\n", "t3", 1 },
    /* statements around the kernels: the logits scaled first (a pointwise kernel before), the
     * mean scaled and exp'd after (a pointwise kernel after) */
    { "t2", AROUND_BODY, "t2", 4 },
  };

  for (gsize k = 0; k < G_N_ELEMENTS (cases); k++)
    {
      g_autoptr(CsTrace) t = region_trace (cases[k].outs, cases[k].body, cases[k].ret);
      g_autoptr(GError) error = NULL;
      CsPolicy policy;
      CsCudaProgram *p;

      xent_policy (&policy);
      p = cs_cuda_program_build_full (t, NULL, &policy, CS_CUDA_BUILD_DRY | CS_CUDA_BUILD_COMPILE, &error);
      g_assert_no_error (error);
      g_assert_nonnull (p);
      g_assert_cmpuint (p->n_kernels, ==, cases[k].n_kernels);
      if (k == 1)
        g_assert_nonnull (strstr (p->source->str, "-1LL"));   /* nll_loss's default ignore_index */
      if (k == 2)
        g_assert_nonnull (strstr (p->source->str, "== 3LL"));
      cs_cuda_program_free (p);
    }
}

/* The region @region of Thunder's printed trace @file (in $CS_SHARED_TRACES): its call line
 * and subsymbol lines (@block), its argument and output names, and `  # name: "type"` lines for
 * its arguments (@types, from the file's comments).  FALSE when the file is not there. */
static gboolean
thunder_region (const char *file, const char *region, GString *block, GString *types, GStrv *args, GStrv *outs)
{
  const char *dir = g_getenv ("CS_SHARED_TRACES");
  g_autofree char *path = dir ? g_build_filename (dir, file, NULL) : NULL;
  g_autofree char *text = NULL;
  g_autofree char *call = g_strdup_printf ("= %s(", region);
  g_auto(GStrv) lines = NULL;
  gint at = -1;

  if (path == NULL || !g_file_get_contents (path, &text, NULL, NULL))
    return FALSE;
  lines = g_strsplit (text, "\n", -1);
  for (guint i = 0; lines[i] && at < 0; i++)
    if (strstr (lines[i], call) && g_str_has_prefix (lines[i], "  ["))
      at = (gint) i;
  g_assert_cmpint (at, >=, 0);
  {
    const char *open = strstr (lines[at], call) + strlen (call);
    g_autofree char *a = g_strndup (open, strcspn (open, ")"));
    const char *lb = strchr (lines[at], '['), *rb = strchr (lines[at], ']');
    g_autofree char *o = g_strndup (lb + 1, (gsize) (rb - lb - 1));

    *args = g_strsplit (a, ", ", -1);
    *outs = g_strsplit (o, ", ", -1);
    for (guint k = 0; (*args)[k]; k++)
      {
        g_autofree char *key = g_strdup_printf ("# %s: \"", (*args)[k]);
        const char *hit = strstr (text, key);

        g_assert_nonnull (hit);
        g_string_append_printf (types, "  %.*s\n", (int) strcspn (hit, "\n"), hit);
      }
    g_string_append_printf (block, "%s\n", lines[at]);
    for (guint i = (guint) at + 1; lines[i] && g_str_has_prefix (lines[i], "    ")
                                   && lines[i][strspn (lines[i], " ")] == '#'; i++)
      g_string_append_printf (block, "%s\n", lines[i]);
  }
  return TRUE;
}

/* Thunder's TorchCompile regions of the LLaMA stack's loss as a training step of their own:
 * the forward is TorchCompile0 (its inputs the step's inputs), saving what TorchCompile1 reads,
 * the backward TorchCompile1 with the loss's cotangent, returning the logits' gradient.  FALSE
 * without ../shared/traces. */
static gboolean
thunder_llama_step (CsTrace **fwd, CsTrace **bwd)
{
  g_autoptr(GString) fb = g_string_new (""), ft = g_string_new (""), bb = g_string_new (""), bt = g_string_new ("");
  g_auto(GStrv) fa = NULL, fo = NULL, ba = NULL, bo = NULL;
  g_autoptr(GPtrArray) saved = g_ptr_array_new (), cot = g_ptr_array_new (), loss = g_ptr_array_new ();
  g_autofree char *fa_s = NULL, *saved_s = NULL, *loss_s = NULL;
  g_autofree char *ftext = NULL, *btext = NULL;
  g_autoptr(GError) error = NULL;

  if (!thunder_region ("thunder_llama_stack_final_fwd.txt", "TorchCompile0", fb, ft, &fa, &fo)
      || !thunder_region ("thunder_llama_stack_final_bwd.txt", "TorchCompile1", bb, bt, &ba, &bo))
    return FALSE;
  for (guint k = 0; ba[k]; k++)
    g_ptr_array_add (g_strv_contains ((const char * const *) fa, ba[k])
                     || g_strv_contains ((const char * const *) fo, ba[k]) ? saved : cot, ba[k]);
  for (guint k = 0; fo[k]; k++)
    if (!g_strv_contains ((const char * const *) ba, fo[k]))
      g_ptr_array_add (loss, fo[k]);
  g_assert_cmpuint (cot->len, ==, 1);
  g_assert_cmpuint (loss->len, ==, 1);
  g_ptr_array_add (saved, NULL);
  fa_s = g_strjoinv (", ", fa);
  saved_s = g_strjoinv (", ", (GStrv) saved->pdata);
  loss_s = g_strdup (loss->pdata[0]);
  ftext = g_strdup_printf ("def computation(%s):\n%s%s  return {'output': (%s,), 'flat_args': [%s], "
                           "'flat_output': (%s,)}, ((%s), ())\n", fa_s, ft->str, fb->str, loss_s, fa_s, loss_s,
                           saved_s);
  btext = g_strdup_printf ("def backward_fn(saved_for_backward, cotangents):\n"
                           "  # saved_for_backward: \"Collection\"\n  # cotangents: \"Collection\"\n"
                           "  C0, C1, = saved_for_backward\n  # C0: \"Collection\"\n  # C1: \"Collection\"\n"
                           "  %s, = cotangents\n  %s, = C0\n%s%s"
                           "  return (%s, None)\n", (char *) cot->pdata[0], saved_s, bt->str, bb->str, bo[0]);
  *fwd = cs_parse_trace (ftext, "llama-fwd", &error);
  g_assert_no_error (error);
  *bwd = cs_parse_trace (btext, "llama-bwd", &error);
  g_assert_no_error (error);
  return TRUE;
}

/* Thunder's own TorchCompile regions of the LLaMA stack (forward: log-softmax, count and mean
 * of bf16 logits [2, 64, 512]; backward: the bf16 gradient and its [128, 512] reshape):
 * generated and NVRTC-compiled, the backward fused into the forward's rows kernel (the count of
 * rows not ignored first, then rows and gradient, then the reduction), no backward kernel. */
static void
test_thunder_regions (void)
{
  g_autoptr(CsTrace) fwd = NULL;
  g_autoptr(CsTrace) bwd = NULL;
  g_autoptr(GError) error = NULL;
  CsPolicy policy;
  CsCudaProgram *p;

  if (!thunder_llama_step (&fwd, &bwd))
    {
      g_test_skip ("../shared/traces not present");
      return;
    }
  xent_policy (&policy);
  p = cs_cuda_program_build_full (fwd, bwd, &policy, CS_CUDA_BUILD_DRY | CS_CUDA_BUILD_COMPILE, &error);
  g_assert_no_error (error);
  g_assert_nonnull (p);
  g_test_message ("%u kernels, %u outputs", p->n_kernels, p->outputs->len);
  g_assert_cmpuint (count_steps (p, "cross-entropy rows 128 x 512 and TorchCompile1 gradient"), ==, 1);
  g_assert_cmpuint (count_steps (p, "cross-entropy count 128 rows"), ==, 1);
  g_assert_cmpuint (count_steps (p, "cross-entropy reduce 128 rows"), ==, 1);
  g_assert_cmpuint (count_steps (p, "cross-entropy backward"), ==, 0);
  g_assert_cmpuint (p->outputs->len, ==, 2);   /* the loss, the logits' gradient */
  g_assert_cmpint (g_array_index (p->outputs, CsCudaTensorInfo, 1).dtype, ==, CS_DTYPE_BF16);
  cs_cuda_program_free (p);
}

/* ---- on a device ---- */

/* Deterministic inputs: logits 3 * N(0, 1) (Box-Muller over a 64-bit LCG), targets in [0, V)
 * with rows 1, 4, 7, ... ignored, every cotangent 1.5. */
static guint64
lcg (guint64 *s)
{
  *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
  return *s >> 11;
}

static double
unif (guint64 *s)
{
  return ((double) lcg (s) + 0.5) / 9007199254740992.0;
}

static CsTensor *
make_input (const CsCudaTensorInfo *in, int64_t V, guint64 seed)
{
  g_autoptr(GError) error = NULL;
  CsTensor *x = cs_tensor_new (in->dtype, in->shape, in->rank, &error);
  guint64 s = seed;

  g_assert_no_error (error);
  for (int64_t e = 0; e < x->numel; e++)
    {
      double v;

      if (in->backward)
        v = 1.5;
      else if (!cs_dtype_is_float (in->dtype))
        v = (e % 3 == 1) ? -100 : special_inputs ? (double) (e % V) : (double) (lcg (&s) % (guint64) V);
      else
        v = 3.0 * sqrt (-2.0 * log (unif (&s))) * cos (2.0 * G_PI * unif (&s));
      cs_tensor_set_f64 (x, e, v);
    }
  if (special_inputs && !in->backward && cs_dtype_is_float (in->dtype))
    {
      /* rows of logits [R >= 7, V >= 8], targets r (r % 3 != 1): row 0 holds +inf off its
       * target (loss +inf), row 1 (ignored) NaN (loss 0), row 2 only -inf (loss NaN), row 3
       * -inf off its target (finite), row 5 NaN after three -inf (the first 4 elements: a
       * vector group of NaN and -inf alone in f32, with finite values in bf16; loss NaN), row 6
       * -inf at its target (+inf) */
      cs_tensor_set_f64 (x, 0 * V + 5, INFINITY);
      cs_tensor_set_f64 (x, 1 * V + 0, NAN);
      for (int64_t j = 0; j < V; j++)
        cs_tensor_set_f64 (x, 2 * V + j, -INFINITY);
      for (int64_t j = 0; j < 3; j++)
        cs_tensor_set_f64 (x, 3 * V + j, -INFINITY);
      for (int64_t j = 0; j < 3; j++)
        cs_tensor_set_f64 (x, 5 * V + j, -INFINITY);
      cs_tensor_set_f64 (x, 5 * V + 3, NAN);
      cs_tensor_set_f64 (x, 6 * V + 6, -INFINITY);
    }
  return x;
}

static CsTensor *
named (GPtrArray *outs, GPtrArray *names, const char *name)
{
  for (guint j = 0; outs && j < outs->len; j++)
    if (g_strcmp0 (g_ptr_array_index (names, j), name) == 0)
      return g_ptr_array_index (outs, j);
  return NULL;
}

static double
rel_bound (CsDtype dt, gboolean f64)
{
  if (f64)
    return 1e-12;
  if (rounds_inside && cs_dtype_is_float (dt))
    dt = CS_DTYPE_BF16;
  switch (dt)
    {
    case CS_DTYPE_BF16: return 1e-2;
    case CS_DTYPE_F16: return 2e-3;
    case CS_DTYPE_F32: return 2e-5;
    default: return 0;   /* integers (the count): exact */
    }
}

/* Runs @fwd + @bwd (targets in [0, @V)) on the GPU (the f64 program when @f64) and on the CPU
 * (f64), compares every output and gradient; returns the number compared. */
static guint
check_step (CsTrace *fwd, CsTrace *bwd, int64_t V, gboolean f64, const char *what)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GHashTable) env = cs_ref_env_new ();
  g_autoptr(GHashTable) returned = cs_ref_env_new ();
  g_autoptr(GPtrArray) fo = NULL, fn = NULL, bo = NULL, bn = NULL;
  g_autoptr(GPtrArray) fl = cs_ref_dup_leaf_inputs (fwd);
  g_autoptr(GPtrArray) bl = bwd ? cs_ref_dup_leaf_inputs (bwd) : g_ptr_array_new ();
  CsPolicy policy;
  CsCudaProgram *p;
  guint n = 0;

  xent_policy (&policy);
  p = f64 ? cs_cuda_program_build_f64 (fwd, bwd, &policy, &error) : cs_cuda_program_build (fwd, bwd, &policy, &error);
  g_assert_no_error (error);
  g_assert_nonnull (p);
  g_assert_cmpuint (count_steps (p, "cross-entropy rows"), <=, 1);
  g_assert_cmpint (cudaMemset (p->arena, 0xff, p->arena_bytes), ==, cudaSuccess);   /* NaN poison */
  g_assert_true (cs_cuda_program_reset_state (p, NULL));   /* what the poison overwrote */
  for (guint i = 0; i < p->inputs->len; i++)
    {
      CsCudaTensorInfo *in = &g_array_index (p->inputs, CsCudaTensorInfo, i);
      GPtrArray *leaves = in->backward ? bl : fl;
      g_autoptr(CsTensor) x = make_input (in, V, 1000 + i);
      g_autoptr(CsTensor) xr = NULL;

      /* the CPU runs the trace's dtypes: an f64 program's inputs are the same values */
      if (f64 && cs_dtype_is_float (in->dtype))
        {
          CsDtype tdt = CS_DTYPE_F32;

          /* the dtype the trace gives the input */
          for (guint j = 0; j < leaves->len; j++)
            if (g_strcmp0 (((CsProxy *) g_ptr_array_index (leaves, j))->name, in->name) == 0)
              tdt = ((CsProxy *) g_ptr_array_index (leaves, j))->dtype;
          xr = cs_tensor_new (tdt, in->shape, in->rank, &error);
          g_assert_no_error (error);
          for (int64_t e = 0; e < x->numel; e++)
            cs_tensor_set_f64 (xr, e, cs_tensor_get_f64 (x, e));
          /* the f64 program gets the values the trace dtype holds */
          for (int64_t e = 0; e < x->numel; e++)
            cs_tensor_set_f64 (x, e, cs_tensor_get_f64 (xr, e));
        }
      g_assert_true (cs_cuda_program_set_input (p, i, x->data, cs_tensor_nbytes (x), &error));
      g_assert_no_error (error);
      cs_ref_env_insert (env, in->name, xr ? xr : x);
    }
  g_assert_true (cs_cuda_program_run (p, FALSE, &error));
  g_assert_no_error (error);
  cs_ref_run_env (fwd, env, CS_REF_F64, 0, &fo, &fn, returned, &error);
  g_assert_no_error (error);
  {
    GHashTableIter it;
    gpointer k, v;

    g_hash_table_iter_init (&it, env);
    while (g_hash_table_iter_next (&it, &k, &v))
      if (!g_hash_table_contains (returned, k))
        cs_ref_env_insert (returned, k, v);
  }
  if (bwd)
    cs_ref_run_env (bwd, returned, CS_REF_F64, 0, &bo, &bn, NULL, &error);
  g_assert_no_error (error);
  for (guint i = 0; i < p->outputs->len; i++)
    {
      CsCudaTensorInfo *o = &g_array_index (p->outputs, CsCudaTensorInfo, i);
      g_autoptr(CsTensor) got = cs_tensor_new (o->dtype, o->shape, o->rank, &error);
      CsTensor *ref = o->backward ? named (bo, bn, o->name) : named (fo, fn, o->name);
      double num = 0, den = 0, rel, b = rel_bound (o->dtype, f64);

      g_assert_true (cs_cuda_program_get_output (p, i, got->data, cs_tensor_nbytes (got), &error));
      g_assert_nonnull (ref);
      g_assert_cmpint (ref->numel, ==, got->numel);
      for (int64_t e = 0; e < got->numel; e++)
        {
          double a = cs_tensor_get_f64 (got, e), r = cs_tensor_get_f64 (ref, e);

          if (special_inputs && !isfinite (r))
            {
              /* the same NaN or infinity as Thunder's decomposition gives */
              if (isnan (r))
                g_assert_true (isnan (a));
              else
                g_assert_cmpfloat (a, ==, r);
              continue;
            }
          g_assert_false (isnan (a));
          num += (a - r) * (a - r);
          den += r * r;
        }
      if (special_inputs && !o->backward && o->rank == 1)
        {
          /* the row losses make_input's special rows must give (by hand: lse = +inf with an
           * +inf logit; -inf - lse at a -inf target; -inf - -inf for a row of -inf only) */
          g_assert_cmpfloat (cs_tensor_get_f64 (got, 0), ==, INFINITY);
          g_assert_cmpfloat (cs_tensor_get_f64 (got, 1), ==, 0.0);
          g_assert_true (isnan (cs_tensor_get_f64 (got, 2)));
          g_assert_true (isfinite (cs_tensor_get_f64 (got, 3)));
          g_assert_true (isnan (cs_tensor_get_f64 (got, 5)));
          g_assert_cmpfloat (cs_tensor_get_f64 (got, 6), ==, INFINITY);
        }
      rel = den > 0 ? sqrt (num / den) : sqrt (num);
      g_test_message ("%s%s: %s %s %s rel.L2 %.3e (bound %.0e)", what, f64 ? " f64" : "", o->backward ? "grad" : "out", o->name, cs_dtype_short_name (o->dtype), rel, b);
      g_assert_cmpfloat (rel, <=, b);
      n++;
    }
  cs_cuda_program_free (p);
  return n;
}

static guint
check_case (const Case *c, gboolean f64)
{
  g_autoptr(CsPipeline) pl = case_pipeline (c);
  g_autofree char *what = g_strdup_printf ("R %" G_GINT64_FORMAT " V %" G_GINT64_FORMAT " %s %s", c->R, c->V,
                                           cs_dtype_short_name (c->dt), c->reduction);

  return check_step (cs_pipeline_get_forward (pl), cs_pipeline_get_backward (pl), c->V, f64, what);
}

/* Thunder's LLaMA loss regions (test_thunder_regions) on the GPU, and their f64 program. */
static void
test_gpu_thunder_regions (void)
{
  g_autoptr(CsTrace) fwd = NULL;
  g_autoptr(CsTrace) bwd = NULL;

  if (!have_device)
    {
      g_test_skip ("no CUDA device");
      return;
    }
  if (!thunder_llama_step (&fwd, &bwd))
    {
      g_test_skip ("../shared/traces not present");
      return;
    }
  g_assert_cmpuint (check_step (fwd, bwd, 512, FALSE, "llama TorchCompile0/1"), ==, 2);
  g_assert_cmpuint (check_step (fwd, bwd, 512, TRUE, "llama TorchCompile0/1"), ==, 2);
}

/* Every V of {1, 37, 1000, 50304} x rows {1, 7, 64} x logits {bf16, f32} x {mean, sum},
 * 'none' at two sizes, f16 logits once, V = 256k (4-element groups, not kept in registers) and
 * 256k + 3 (element by element). */
static void
test_gpu_vs_cpu (void)
{
  static const int64_t Vs[] = { 1, 37, 1000, 50304 }, Rs[] = { 1, 7, 64 };
  static const CsDtype dts[] = { CS_DTYPE_BF16, CS_DTYPE_F32 };
  static const char *reds[] = { "mean", "sum" };
  guint n = 0;

  if (!have_device)
    {
      g_test_skip ("no CUDA device");
      return;
    }
  for (gsize v = 0; v < G_N_ELEMENTS (Vs); v++)
    for (gsize r = 0; r < G_N_ELEMENTS (Rs); r++)
      for (gsize d = 0; d < G_N_ELEMENTS (dts); d++)
        for (gsize k = 0; k < G_N_ELEMENTS (reds); k++)
          {
            Case c = { Rs[r], Vs[v], dts[d], reds[k] };

            n += check_case (&c, FALSE);
          }
  {
    Case c1 = { 7, 37, CS_DTYPE_BF16, "none" }, c2 = { 64, 50304, CS_DTYPE_F32, "none" };
    Case c3 = { 64, 1000, CS_DTYPE_F16, "mean" };
    Case c4 = { 2, 262144, CS_DTYPE_BF16, "mean" }, c5 = { 3, 262147, CS_DTYPE_F32, "sum" };

    n += check_case (&c1, FALSE);
    n += check_case (&c2, FALSE);
    n += check_case (&c3, FALSE);
    n += check_case (&c4, FALSE);
    n += check_case (&c5, FALSE);
  }
  g_assert_cmpuint (n, ==, 48 * 2 + 10);   /* the loss and the logits' gradient of each */
}

/* Rows whose max is +inf or NaN, rows of -inf only and -inf at the target take Thunder's
 * logsumexp rule (shift 0 when the max is infinite): the same infinities and NaNs as the CPU,
 * ignored rows 0 whatever their logits; f32 and bf16 logits, 'none' and 'sum'. */
static void
test_gpu_non_finite (void)
{
  static const Case cases[] = {
    { 8, 37, CS_DTYPE_F32, "none" }, { 8, 1000, CS_DTYPE_BF16, "none" }, { 8, 40, CS_DTYPE_F32, "sum" },
    { 8, 1100, CS_DTYPE_F32, "none" },   /* a thread's second group after its NaN one */
  };

  if (!have_device)
    {
      g_test_skip ("no CUDA device");
      return;
    }
  special_inputs = TRUE;
  for (gsize k = 0; k < G_N_ELEMENTS (cases); k++)
    g_assert_cmpuint (check_case (&cases[k], FALSE), ==, 2);
  special_inputs = FALSE;
}

/* (logits / 2 rounded to bf16) -> cross_entropy -> / 4: the executor sweeps the divisions and
 * converts into its regions, forward (div, convert before; div after) and backward (the
 * cotangent / 4 before; the gradient's converts and / 2 after). */
static const char around_trace[] =
  "import thunder\nimport thunder.core.dtypes as dtypes\nimport thunder.torch as ltorch\nimport torch\n"
  "from thunder.executors.torchex import no_autocast\n\n@torch.no_grad()\n@no_autocast\n"
  "def computation(logits, targets):\n"
  "  # logits: \"cuda:0 f32[6, 40]\"\n"
  "  # targets: \"cuda:0 i64[6]\"\n"
  "  t5 = ltorch.true_divide(logits, 2.0)  # t5: \"cuda:0 f32[6, 40]\"\n"
  "  t6 = ltorch.to(t5, dtypes.bfloat16, None, device=None, dtype=None, copy=False, memory_format=None)"
  "  # t6: \"cuda:0 bf16[6, 40]\"\n"
  "  t0 = ltorch.to(t6, dtypes.float32, None, device=None, dtype=None, copy=False, memory_format=None)"
  "  # t0: \"cuda:0 f32[6, 40]\"\n"
  "  t1 = ltorch.cross_entropy(t0, targets, None, None, -100, None, 'mean', 0.0)  # t1: \"cuda:0 f32[]\"\n"
  "  t2 = ltorch.true_divide(t1, 4.0)  # t2: \"cuda:0 f32[]\"\n"
  "  return (t2,)\n";

static CsPipeline *
around_pipeline (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTrace) t = cs_parse_trace (around_trace, "around", &error);
  CsPolicy policy;
  CsPipeline *pl;

  g_assert_no_error (error);
  xent_policy (&policy);
  pl = cs_pipeline_run (t, &policy, NULL, &error);
  g_assert_no_error (error);
  return pl;
}

/* The regions of around_trace: generated and compiled, a pointwise kernel before and after the
 * fused ones in each direction. */
static void
test_around (void)
{
  g_autoptr(CsPipeline) pl = around_pipeline ();
  g_autoptr(GError) error = NULL;
  CsPolicy policy;
  CsCudaProgram *p;

  xent_policy (&policy);
  p = cs_cuda_program_build_full (cs_pipeline_get_forward (pl), cs_pipeline_get_backward (pl), &policy,
                                  CS_CUDA_BUILD_DRY | CS_CUDA_BUILD_COMPILE, &error);
  g_assert_no_error (error);
  g_assert_nonnull (p);
  g_assert_cmpuint (count_steps (p, "cross-entropy rows"), ==, 1);
  g_assert_cmpuint (count_steps (p, "cross-entropy reduce"), ==, 1);
  g_assert_cmpuint (count_steps (p, "cross-entropy backward"), ==, 1);
  g_assert_cmpuint (p->steps->len, ==, 3 + 4);
  cs_cuda_program_free (p);
}

/* log_softmax along dims 0 and 1 of one input, and their backward: the fused rows kernel for
 * dim 1 (the last), the region codegen for dim 0 and for both backward statements (no
 * nll_loss_backward feeds them). */
static const char lsm_trace[] =
  "def computation(x):\n"
  "  # x: \"cuda:0 f32[5, 33]\"\n"
  "  t1 = ltorch.log_softmax(x, 0, dtype=None)  # t1: \"cuda:0 f32[5, 33]\"\n"
  "  t2 = ltorch.log_softmax(x, 1, dtype=None)  # t2: \"cuda:0 f32[5, 33]\"\n"
  "  return (t1, t2)\n";

static CsPipeline *
lsm_pipeline (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTrace) t = cs_parse_trace (lsm_trace, "lsm", &error);
  CsPolicy policy;
  CsPipeline *pl;

  g_assert_no_error (error);
  xent_policy (&policy);
  pl = cs_pipeline_run (t, &policy, NULL, &error);
  g_assert_no_error (error);
  g_assert_true (has_torchcompile (cs_pipeline_get_forward (pl)));
  g_assert_true (has_torchcompile (cs_pipeline_get_backward (pl)));
  return pl;
}

static void
test_log_softmax_dims (void)
{
  g_autoptr(CsPipeline) pl = lsm_pipeline ();
  g_autoptr(GError) error = NULL;
  CsPolicy policy;
  CsCudaProgram *p;

  xent_policy (&policy);
  p = cs_cuda_program_build_full (cs_pipeline_get_forward (pl), cs_pipeline_get_backward (pl), &policy,
                                  CS_CUDA_BUILD_DRY | CS_CUDA_BUILD_COMPILE, &error);
  g_assert_no_error (error);
  g_assert_nonnull (p);
  g_assert_cmpuint (count_steps (p, "cross-entropy rows 5 x 33"), ==, 1);
  g_assert_cmpuint (count_steps (p, "cross-entropy backward"), ==, 0);
  cs_cuda_program_free (p);
}

static void
test_gpu_log_softmax_dims (void)
{
  g_autoptr(CsPipeline) pl = NULL;

  if (!have_device)
    {
      g_test_skip ("no CUDA device");
      return;
    }
  pl = lsm_pipeline ();
  g_assert_cmpuint (check_step (cs_pipeline_get_forward (pl), cs_pipeline_get_backward (pl), 33, FALSE, "lsm"), ==, 3);
  g_assert_cmpuint (check_step (cs_pipeline_get_forward (pl), cs_pipeline_get_backward (pl), 33, TRUE, "lsm"), ==, 3);
}

/* logp_cases on the GPU: log-softmax and its gradient. */
static void
test_gpu_logp_output (void)
{
  if (!have_device)
    {
      g_test_skip ("no CUDA device");
      return;
    }
  for (gsize k = 0; k < G_N_ELEMENTS (logp_cases); k++)
    {
      g_autoptr(CsPipeline) pl = logp_pipeline (logp_cases[k].R, logp_cases[k].V, logp_cases[k].dt);

      g_assert_cmpuint (check_step (cs_pipeline_get_forward (pl), cs_pipeline_get_backward (pl), logp_cases[k].V,
                                    FALSE, "logp"), ==, 2);
    }
}

/* around_trace on the GPU, and its f64 program. */
static void
test_gpu_around (void)
{
  g_autoptr(CsPipeline) pl = NULL;

  if (!have_device)
    {
      g_test_skip ("no CUDA device");
      return;
    }
  pl = around_pipeline ();
  rounds_inside = TRUE;
  g_assert_cmpuint (check_step (cs_pipeline_get_forward (pl), cs_pipeline_get_backward (pl), 40, FALSE, "around"), ==, 2);
  g_assert_cmpuint (check_step (cs_pipeline_get_forward (pl), cs_pipeline_get_backward (pl), 40, TRUE, "around"), ==, 2);
  rounds_inside = FALSE;
}

/* The f64 program (cs-cuda-f64.c retypes every float tensor) agrees with the CPU f64 run. */
static void
test_gpu_f64 (void)
{
  static const Case cases[] = {
    { 7, 37, CS_DTYPE_BF16, "mean" }, { 64, 1000, CS_DTYPE_F32, "sum" }, { 7, 50304, CS_DTYPE_BF16, "none" },
  };

  if (!have_device)
    {
      g_test_skip ("no CUDA device");
      return;
    }
  for (gsize k = 0; k < G_N_ELEMENTS (cases); k++)
    g_assert_cmpuint (check_case (&cases[k], TRUE), >=, 2);
}

/* The forms CASTSCOPE_XENT_FUSED picks on the GPU against the CPU: the three-pass one ("0"), the
 * fused one with the gradient pass reading the row again at 256 and 1024 threads ("reread",
 * "reread1024"; unset or "1" keeps it in registers where it fits, as the other GPU tests run),
 * or keeping it in shared memory and registers ("split"): V a
 * multiple of the groups and not (element by element), ignored rows, mean / sum / none, bf16
 * / f16 / f32, non-finite rows. */
static void
test_gpu_fused_modes (void)
{
  static const char *modes[] = { "0", "reread", "reread1024", "split" };
  static const Case cases[] = {
    { 64, 50304, CS_DTYPE_BF16, "mean" }, { 7, 1000, CS_DTYPE_F32, "sum" }, { 7, 37, CS_DTYPE_BF16, "none" },
    { 5, 1002, CS_DTYPE_F16, "mean" }, { 3, 2053, CS_DTYPE_F32, "mean" },
  };
  static const Case special[] = { { 8, 1100, CS_DTYPE_F32, "none" }, { 8, 1000, CS_DTYPE_BF16, "none" } };

  if (!have_device)
    {
      g_test_skip ("no CUDA device");
      return;
    }
  for (gsize m = 0; m < G_N_ELEMENTS (modes); m++)
    {
      g_setenv ("CASTSCOPE_XENT_FUSED", modes[m], TRUE);
      for (gsize k = 0; k < G_N_ELEMENTS (cases); k++)
        g_assert_cmpuint (check_case (&cases[k], FALSE), ==, 2);
      special_inputs = TRUE;
      for (gsize k = 0; k < G_N_ELEMENTS (special); k++)
        g_assert_cmpuint (check_case (&special[k], FALSE), ==, 2);
      special_inputs = FALSE;
    }
  g_setenv ("CASTSCOPE_XENT_FUSED", "1", TRUE);
}

int
main (int argc, char **argv)
{
  int n = 0;
  int sms, maj, min;

  g_test_init (&argc, &argv, G_TEST_OPTION_ISOLATE_DIRS, NULL);
  have_device = cudaGetDeviceCount (&n) == cudaSuccess && n > 0 && cs_cuda_init_device (&sms, &maj, &min, NULL);
  g_test_add_func ("/kernels/xentropy/nvrtc", test_nvrtc);
  g_test_add_func ("/kernels/xentropy/deterministic", test_deterministic);
  g_test_add_func ("/kernels/xentropy/unsupported", test_unsupported);
  g_test_add_func ("/kernels/xentropy/other-forms", test_other_forms);
  g_test_add_func ("/kernels/xentropy/thunder-llama-regions", test_thunder_regions);
  g_test_add_func ("/kernels/xentropy/around", test_around);
  g_test_add_func ("/kernels/xentropy/logp-output", test_logp_output);
  g_test_add_func ("/kernels/xentropy/log-softmax-dims", test_log_softmax_dims);
  g_test_add_func ("/kernels/xentropy/gpu/vs-cpu-f64", test_gpu_vs_cpu);
  g_test_add_func ("/kernels/xentropy/gpu/f64-program", test_gpu_f64);
  g_test_add_func ("/kernels/xentropy/gpu/non-finite", test_gpu_non_finite);
  g_test_add_func ("/kernels/xentropy/gpu/around", test_gpu_around);
  g_test_add_func ("/kernels/xentropy/gpu/logp-output", test_gpu_logp_output);
  g_test_add_func ("/kernels/xentropy/gpu/log-softmax-dims", test_gpu_log_softmax_dims);
  g_test_add_func ("/kernels/xentropy/gpu/thunder-llama-regions", test_gpu_thunder_regions);
  g_test_add_func ("/kernels/xentropy/gpu/fused-modes", test_gpu_fused_modes);
  return g_test_run ();
}
