/* test-core-inductor.c: Inductor's fusion regions read from TORCH_LOGS=output_code (issue 22):
 * the parser, the regions over the AOT graphs of every data/aten sample, a hand-checked case
 * and bad input. */
#include "cs-config.h"

#include <string.h>
#include <sys/wait.h>

#include <glib/gstdio.h>

#include "cs-aten.h"
#include "cs-fuse.h"
#include "cs-inductor.h"
#include "cs-ir-util.h"
#include "cs-parse.h"
#include "cs-pipeline.h"
#include "cs-stats.h"

/* The samples generate.py wrote with --inductor (data/aten/inductor/<case>_<mode>.output_code). */
static const char *const samples[] = {
  "attention_softmax_autocast", "attention_softmax_bf16", "cross_entropy_autocast",
  "cross_entropy_bf16", "gpt_block_autocast", "gpt_block_bf16", "llama_block_autocast",
  "llama_block_bf16", "ln_mlp_residual_autocast", "ln_mlp_residual_bf16", "mlp_gelu_autocast",
  "mlp_gelu_bf16", "rmsnorm_swiglu_autocast", "rmsnorm_swiglu_bf16", "seed_foo_autocast",
  "seed_foo_bf16",
};

static char *
data_path (const char *sub, const char *name, const char *ext)
{
  const char *dir = g_getenv ("CS_DATA_DIR");
  g_autofree char *file = g_strconcat (name, ext, NULL);

  return sub ? g_build_filename (dir ? dir : "data", "aten", sub, file, NULL)
             : g_build_filename (dir ? dir : "data", "aten", file, NULL);
}

static CsInductorCode *
load_code (const char *name)
{
  g_autofree char *path = data_path ("inductor", name, ".output_code");
  g_autoptr(GError) error = NULL;
  CsInductorCode *code = cs_inductor_parse_file (path, &error);

  g_assert_no_error (error);
  g_assert_nonnull (code);
  return code;
}

/* The forward graph of data/aten/@name.txt and its backward (borrowed from *@list). */
static CsTrace *
load_graphs (const char *name, CsTraceList **list, CsTrace **backward)
{
  g_autofree char *path = data_path (NULL, name, ".txt");
  g_autoptr(GError) error = NULL;

  *list = cs_parse_file (path, &error);
  g_assert_no_error (error);
  g_assert_cmpint (cs_trace_aten_role ((*list)->traces->pdata[0]), ==, CS_ATEN_GRAPH_FORWARD);
  *backward = cs_aten_find_backward (*list, 0);
  return (*list)->traces->pdata[0];
}

static guint
count_regions (const CsTrace *t)
{
  guint n = 0;
  for (guint i = 0; i < t->n_stmts; i++)
    n += cs_inductor_stmt_is_region (t->stmts[i]);
  g_assert_cmpuint (n, ==, cs_fuse_count_regions (t));
  return n;
}

static const CsStmt *
find_stmt (const CsTrace *t, const char *callee, guint *index)
{
  for (guint i = 0; i < t->n_stmts; i++)
    if (t->stmts[i]->callee && strcmp (t->stmts[i]->callee, callee) == 0)
      {
        if (index)
          *index = i;
        return t->stmts[i];
      }
  return NULL;
}

static guint
count_casts (const CsStmt *region)
{
  guint n = 0;
  for (guint i = 0; i < region->n_subs; i++)
    n += _cs_stmt_is_cast (region->subs[i], NULL, NULL);
  return n;
}

/* The Triton launches of each module of @name's output code, counted from the raw text (lines
 * with `triton_...run(` between one `# AOT ID:` line and the next), not by the parser. */
static void
raw_launch_counts (const char *name, guint *counts, guint max, guint *n_modules)
{
  g_autofree char *path = data_path ("inductor", name, ".output_code");
  g_autofree char *text = NULL;
  g_auto(GStrv) lines = NULL;
  int m = -1;

  g_assert_true (g_file_get_contents (path, &text, NULL, NULL));
  lines = g_strsplit (text, "\n", -1);
  for (guint i = 0; lines[i]; i++)
    {
      if (strstr (lines[i], "] # AOT ID: ['") != NULL)
        {
          m++;
          g_assert_cmpint (m, <, (int) max);
          counts[m] = 0;
        }
      else if (m >= 0 && strstr (lines[i], "            triton_") != NULL
               && strstr (lines[i], ".run(") != NULL)
        counts[m]++;
    }
  *n_modules = (guint) (m + 1);
}

/* ------------------------------------------------------------------------------------------ */

/* mlp_gelu, bf16: F.linear(F.gelu(F.linear(x, w1, b1), approximate='tanh'), w2, b2).  Read by
 * hand from data/aten/inductor/mlp_gelu_bf16.output_code: the forward module's call runs
 * extern_kernels.addmm (line 109), triton_poi_fused_gelu_0 (line 114) and extern_kernels.addmm
 * (line 117); the kernel's Graph fragment (lines 66-77) reads the placeholder addmm and
 * computes convert_element_type_3, mul, mul_1, mul_2, add, mul_3, mul_4, tanh, add_1, mul_5,
 * convert_element_type_4 (the tanh-gelu in f32 between an upcast and a downcast).  The backward
 * runs triton_per_fused_sum_0 (the bias grad of the second linear), four extern mm, and
 * triton_per_fused_gelu_gelu_backward_sum_1 (gelu's backward and the first bias grad). */
static void
test_mlp_gelu_hand (void)
{
  static const char *const gelu_nodes[] = {
    "convert_element_type_3", "mul", "mul_1", "mul_2", "add", "mul_3", "mul_4", "tanh",
    "add_1", "mul_5", "convert_element_type_4",
  };
  g_autoptr(CsInductorCode) code = load_code ("mlp_gelu_bf16");
  g_autoptr(CsTraceList) list = NULL;
  g_autoptr(CsPipeline) pl = NULL;
  g_autoptr(GError) error = NULL;
  const CsInductorGraph *fw, *bw;
  const CsInductorLaunch *l;
  const CsInductorKernel *k;
  CsTrace *forward, *backward, *fused;
  const CsStmt *region, *addmm = NULL, *addmm_1 = NULL;
  guint i_region = 0, i_addmm = 0, i_addmm_1 = 0, n_calls = 0;
  CsProxy *in, *out;
  CsDtype to;

  g_assert_cmpuint (code->graphs->len, ==, 2);
  fw = cs_inductor_code_find_graph (code, CS_ATEN_GRAPH_FORWARD, 0);
  bw = cs_inductor_code_find_graph (code, CS_ATEN_GRAPH_BACKWARD, 0);
  g_assert_nonnull (fw);
  g_assert_nonnull (bw);
  g_assert_cmpstr (fw->aot_id, ==, "0_forward");
  g_assert_cmpstr (bw->aot_id, ==, "0_backward");
  g_assert_cmpuint (fw->n_triton, ==, 1);
  g_assert_cmpuint (fw->n_extern, ==, 2);
  g_assert_cmpuint (bw->n_triton, ==, 2);
  g_assert_cmpuint (bw->n_extern, ==, 4);

  /* the forward's launches, in call order */
  g_assert_cmpuint (fw->launches->len, ==, 3);
  l = fw->launches->pdata[0];
  g_assert_cmpint (l->kind, ==, CS_INDUCTOR_LAUNCH_EXTERN);
  g_assert_cmpstr (l->callee, ==, "extern_kernels.addmm");
  g_assert_cmpuint (l->line, ==, 109);
  l = fw->launches->pdata[1];
  g_assert_cmpint (l->kind, ==, CS_INDUCTOR_LAUNCH_TRITON);
  g_assert_cmpstr (l->callee, ==, "triton_poi_fused_gelu_0");
  g_assert_cmpuint (l->line, ==, 114);
  /* `V1202 06:42:17.663000 1991 torch/_inductor/graph.py:2552] [0/0] [__output_code] ` is 80
   * bytes, then 12 spaces of indentation */
  g_assert_cmpuint (l->col, ==, 93);
  g_assert_cmpuint (l->args->len, ==, 3);
  g_assert_cmpstr (l->args->pdata[0], ==, "buf0");
  g_assert_cmpstr (l->args->pdata[1], ==, "buf1");
  g_assert_cmpstr (l->args->pdata[2], ==, "");          /* xnumel 8192 */
  g_assert_cmpuint (l->source_nodes->len, ==, 1);
  g_assert_cmpstr (l->source_nodes->pdata[0], ==, "gelu"); /* Dynamo's name, not the graph's */
  l = fw->launches->pdata[2];
  g_assert_cmpstr (l->callee, ==, "extern_kernels.addmm");
  g_assert_cmpuint (l->line, ==, 117);

  /* its fragment */
  k = ((const CsInductorLaunch *) fw->launches->pdata[1])->kernel;
  g_assert_nonnull (k);
  g_assert_cmpstr (k->name, ==, "triton_poi_fused_gelu_0");
  g_assert_cmpuint (k->nodes->len, ==, 12);
  g_assert_null (((CsInductorNode *) k->nodes->pdata[0])->target);   /* %addmm PlaceHolder */
  g_assert_cmpstr (((CsInductorNode *) k->nodes->pdata[0])->name, ==, "addmm");
  for (guint i = 1; i < k->nodes->len; i++)
    {
      const CsInductorNode *n = k->nodes->pdata[i];
      g_assert_cmpstr (n->name, ==, gelu_nodes[i - 1]);
      g_assert_cmpuint (n->line, ==, 66 + i);
      g_assert_true (n->typed);
      g_assert_cmpuint (n->rank, ==, 2);
      g_assert_cmpint (n->shape[0], ==, 32);
      g_assert_cmpint (n->shape[1], ==, 256);
      g_assert_cmpint (n->dtype, ==, i == k->nodes->len - 1 ? CS_DTYPE_BF16 : CS_DTYPE_F32);
    }
  g_assert_cmpstr (((CsInductorNode *) k->nodes->pdata[1])->target, ==,
                   "torch.ops.prims.convert_element_type.default");
  g_assert_cmpuint (((CsInductorNode *) k->nodes->pdata[1])->refs->len, ==, 1);
  g_assert_cmpstr (((CsInductorNode *) k->nodes->pdata[1])->refs->pdata[0], ==, "addmm");

  /* the regions over the AOT graphs */
  forward = load_graphs ("mlp_gelu_bf16", &list, &backward);
  pl = cs_pipeline_run_pair_inductor (forward, backward, NULL, code, &error);
  g_assert_no_error (error);
  fused = cs_pipeline_find_trace (pl, "fuse");
  g_assert_nonnull (fused);
  g_assert_cmpuint (count_regions (fused), ==, 1);
  region = find_stmt (fused, "triton_poi_fused_gelu_0", &i_region);
  for (guint i = 0; i < fused->n_stmts; i++)
    {
      CsProxy *o = fused->stmts[i]->kind == CS_STMT_CALL ? cs_stmt_get_output (fused->stmts[i])
                                                         : NULL;
      if (o && strcmp (o->name, "addmm") == 0)
        addmm = fused->stmts[i], i_addmm = i;
      if (o && strcmp (o->name, "addmm_1") == 0)
        addmm_1 = fused->stmts[i], i_addmm_1 = i;
    }
  g_assert_nonnull (region);
  g_assert_nonnull (addmm);
  g_assert_nonnull (addmm_1);
  g_assert_cmpstr (addmm->callee, ==, "torch.ops.aten.addmm.default");  /* outside: a matmul */
  g_assert_cmpuint (i_addmm, <, i_region);
  g_assert_cmpuint (i_region, <, i_addmm_1);
  /* reads addmm, writes convert_element_type_4 (the second addmm's operand, also saved) */
  g_assert_cmpuint (region->n_args, ==, 1);
  g_assert_cmpstr (region->args[0].value->u.proxy->name, ==, "addmm");
  g_assert_cmpint (region->out->kind, ==, CS_VALUE_LIST);
  g_assert_cmpuint (region->out->u.seq.n, ==, 1);
  g_assert_cmpstr (region->out->u.seq.items[0]->u.proxy->name, ==, "convert_element_type_4");
  /* the 11 nodes are one prim each: the upcast, 9 f32 ops, the downcast */
  g_assert_cmpuint (region->n_subs, ==, 11);
  g_assert_cmpuint (count_casts (region), ==, 2);
  g_assert_true (_cs_stmt_is_cast (region->subs[0], &in, &to));
  g_assert_cmpstr (in->name, ==, "addmm");
  g_assert_cmpint (to, ==, CS_DTYPE_F32);
  g_assert_true (_cs_stmt_is_cast (region->subs[10], &in, &to));
  g_assert_cmpint (to, ==, CS_DTYPE_BF16);
  out = cs_stmt_get_output (region->subs[7]);
  g_assert_cmpstr (region->subs[7]->callee, ==, "prims.tanh");
  g_assert_cmpstr (out->name, ==, "tanh");
  g_assert_true (g_str_has_prefix (region->why, "Inductor kernel ("));
  g_assert_nonnull (strstr (region->why, "mlp_gelu_bf16.output_code:114)"));
  for (guint i = 0; i < fused->n_stmts; i++)
    if (fused->stmts[i]->kind == CS_STMT_CALL && !_cs_stmt_is_region (fused->stmts[i]))
      n_calls++;
  /* outside: permute, addmm, permute_1, addmm_1, permute_2, permute_6 */
  g_assert_cmpuint (n_calls, ==, 6);

  /* backward: the two kernels, in launch order, the 14 nodes of gelu's backward */
  fused = cs_pipeline_find_trace (pl, "fuse-backward");
  g_assert_nonnull (fused);
  g_assert_cmpuint (count_regions (fused), ==, 2);
  region = find_stmt (fused, "triton_per_fused_gelu_gelu_backward_sum_1", NULL);
  g_assert_nonnull (region);
  g_assert_nonnull (find_stmt (fused, "triton_per_fused_sum_0", NULL));
  /* its fragment (lines 217-241) has 22 call_function nodes, gelu's forward recomputed from
   * addmm (the forward saved addmm, not tanh) and its backward; three are casts
   * (convert_element_type_12 and _3 up to f32, _14 down to bf16), and sum_2, a bf16 sum,
   * lowers to an upcast, an f32 sum, a broadcast_in_dim (keepdim) and a downcast (castscope's
   * lowering of aten.sum, as PyTorch accumulates a bf16 sum in f32): 5 casts, 21 + 4 prims */
  g_assert_cmpuint (count_casts (region), ==, 5);
  g_assert_cmpuint (region->n_subs, ==, 21 + 4);
  /* it reads mm (dL/d gelu) and the saved addmm; mm_2 and permute_7 read convert_element_type_14,
   * view_1 reads sum_2 */
  g_assert_cmpuint (region->n_args, ==, 2);
  g_assert_cmpstr (region->args[0].value->u.proxy->name, ==, "mm");
  g_assert_cmpstr (region->args[1].value->u.proxy->name, ==, "addmm");
  g_assert_cmpuint (region->out->u.seq.n, ==, 2);
  g_assert_cmpstr (region->out->u.seq.items[0]->u.proxy->name, ==, "convert_element_type_14");
  g_assert_cmpstr (region->out->u.seq.items[1]->u.proxy->name, ==, "sum_2");
  {
    g_autoptr(CsTraceStats) st = cs_stats_compute (cs_pipeline_get_backward (pl));
    g_assert_cmpuint (st->total.n_regions, ==, 2);
    g_assert_cmpuint (st->total.n_matmuls, ==, 4);
  }
}

/* Every sample: each Triton launch of a module is one region of its graph, and the fused
 * traces keep castscope's region invariants. */
static void
test_samples (void)
{
  for (guint s = 0; s < G_N_ELEMENTS (samples); s++)
    {
      g_autoptr(CsInductorCode) code = load_code (samples[s]);
      g_autoptr(CsTraceList) list = NULL;
      g_autoptr(CsPipeline) pl = NULL;
      g_autoptr(GError) error = NULL;
      CsTrace *forward, *backward;
      guint raw[8], n_modules = 0;
      const char *pass[2] = { "fuse", "fuse-backward" };

      g_test_message ("%s", samples[s]);
      raw_launch_counts (samples[s], raw, G_N_ELEMENTS (raw), &n_modules);
      g_assert_cmpuint (n_modules, ==, 2);
      g_assert_cmpuint (code->graphs->len, ==, 2);
      forward = load_graphs (samples[s], &list, &backward);
      g_assert_nonnull (backward);
      pl = cs_pipeline_run_pair_inductor (forward, backward, NULL, code, &error);
      g_assert_no_error (error);
      for (guint m = 0; m < 2; m++)
        {
          const CsInductorGraph *g = code->graphs->pdata[m];
          CsTrace *fused = cs_pipeline_find_trace (pl, pass[m]);
          CsTrace *final = m == 0 ? cs_pipeline_get_forward (pl) : cs_pipeline_get_backward (pl);
          guint n_prims = 0;

          g_assert_cmpint (g->role, ==, m == 0 ? CS_ATEN_GRAPH_FORWARD : CS_ATEN_GRAPH_BACKWARD);
          g_assert_cmpuint (g->n_triton, ==, raw[m]);
          g_assert_nonnull (fused);
          g_assert_cmpuint (count_regions (fused), ==, raw[m]);
          cs_fuse_check_invariants (fused, &error);
          g_assert_no_error (error);
          cs_fuse_check_invariants (final, &error);
          g_assert_no_error (error);
          for (guint i = 0; i < fused->n_stmts; i++)
            if (cs_inductor_stmt_is_region (fused->stmts[i]))
              {
                g_assert_cmpuint (fused->stmts[i]->n_subs, >, 0);
                n_prims += fused->stmts[i]->n_subs;
              }
          g_assert_cmpuint (n_prims > 0, ==, raw[m] > 0);
          /* after DCE too, but for rmsnorm_swiglu_autocast's forward: its kernel
           * triton_poi_fused__to_copy_mm_t_4 only pads a weight for pad_mm (a node of the
           * post-grad graph), so its region holds copies whose values nothing reads */
          if (strcmp (samples[s], "rmsnorm_swiglu_autocast") == 0 && m == 0)
            {
              g_assert_nonnull (find_stmt (fused, "triton_poi_fused__to_copy_mm_t_4", NULL));
              g_assert_null (find_stmt (final, "triton_poi_fused__to_copy_mm_t_4", NULL));
              g_assert_cmpuint (count_regions (final), ==, raw[m] - 1);
            }
          else
            g_assert_cmpuint (count_regions (final), ==, raw[m]);
        }
    }
}

/* attention_softmax_bf16 runs sdpa (cuDNN attention) as a fallback kernel: no Triton kernel,
 * no region; the autocast cross-entropy's post-grad graph replaces amax/sub/exp/sum with
 * prepare_softmax_online, which castscope puts back into the kernel that computes it. */
static void
test_special_cases (void)
{
  g_autoptr(CsInductorCode) code = load_code ("attention_softmax_bf16");
  const CsInductorGraph *fw = cs_inductor_code_find_graph (code, CS_ATEN_GRAPH_FORWARD, 0);
  const CsInductorLaunch *l;

  g_assert_cmpuint (fw->n_triton, ==, 0);
  g_assert_cmpuint (fw->n_extern, ==, 1);
  l = fw->launches->pdata[0];
  g_assert_cmpstr (l->callee, ==, "torch.ops.aten._scaled_dot_product_cudnn_attention.default");

  {
    g_autoptr(CsInductorCode) ce = load_code ("cross_entropy_bf16");
    g_autoptr(CsTraceList) list = NULL;
    g_autoptr(CsPipeline) pl = NULL;
    g_autoptr(GError) error = NULL;
    CsTrace *forward, *backward, *fused;
    const CsStmt *r0;

    forward = load_graphs ("cross_entropy_bf16", &list, &backward);
    pl = cs_pipeline_run_pair_inductor (forward, backward, NULL, ce, &error);
    g_assert_no_error (error);
    fused = cs_pipeline_find_trace (pl, "fuse");
    r0 = find_stmt (fused, "triton_per_fused__log_softmax__to_copy_prepare_softmax_online_0", NULL);
    g_assert_nonnull (r0);
    g_assert_nonnull (strstr (r0->why, "post-grad nodes not in the graph: "
                                       "prepare_softmax_online_default"));
    g_assert_nonnull (strstr (r0->why, "also the graph nodes between its nodes: amax, sub, exp, sum_1"));
  }
}

/* ------------------------------------------------------------------------------------------ */
/* Bad input                                                                                   */

#define PREFIX "V1202 06:42:17.663000 1991 torch/_inductor/graph.py:2552] [0/0] [__output_code] "

/* A forward module with one kernel whose fragment names @node (line 5 of the text). */
static char *
one_kernel_module (const char *node)
{
  return g_strdup_printf (
    "# AOT ID: ['0_forward']\n"
    "# kernel path: <cache>/x.py\n"
    "# Graph fragment:\n"
    "#   %%addmm : Tensor \"bf16[32, 256][256, 1]cuda:0\" = PlaceHolder[target=addmm]\n"
    "#   %%%s : Tensor \"f32[32, 256][256, 1]cuda:0\"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%%addmm, 2), kwargs = {})\n"
    "#   return %%%s\n"
    "triton_poi_fused_mul_0 = async_compile.triton('triton_poi_fused_mul_0', '''\n"
    "''', device_str='cuda')\n"
    "class Runner:\n"
    "    def call(self, args):\n"
    "        primals_1, = args\n"
    "        with torch.cuda._DeviceGuard(0):\n"
    "            triton_poi_fused_mul_0.run(buf0, buf1, 8192, stream=stream0)\n"
    "        return (buf1, )\n", node, node);
}

static void
expect_error (const char *text, int code, const char *message)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(CsInductorCode) c = cs_inductor_parse_text (text, strlen (text), "t.output_code",
                                                        &error);
  g_assert_null (c);
  g_assert_error (error, CS_INDUCTOR_ERROR, code);
  g_assert_cmpstr (error->message, ==, message);
}

static void
test_bad_input (void)
{
  g_autofree char *path = data_path ("inductor", "mlp_gelu_bf16", ".output_code");
  g_autofree char *text = NULL;
  g_autofree char *cut = NULL;
  g_autofree char *msg = NULL;
  const char *p;
  guint n_lines = 0;

  /* truncated inside the forward's call: right after the gelu launch (line 114) */
  g_assert_true (g_file_get_contents (path, &text, NULL, NULL));
  p = text;
  for (guint i = 0; i < 114; i++)
    p = strchr (p, '\n') + 1;
  cut = g_strndup (text, (gsize) (p - text));
  for (const char *c = cut; *c; c++)
    n_lines += *c == '\n';
  g_assert_cmpuint (n_lines, ==, 114);
  /* the error points at the last line read */
  msg = g_strdup_printf ("t.output_code:114:1: the file ends inside the call of module "
                         "0_forward (line 97) before its return");
  expect_error (cut, CS_INDUCTOR_ERROR_SYNTAX, msg);

  /* truncated inside a kernel's source string (line 79 opens it) */
  g_clear_pointer (&cut, g_free);
  p = text;
  for (guint i = 0; i < 80; i++)
    p = strchr (p, '\n') + 1;
  cut = g_strndup (text, (gsize) (p - text));
  expect_error (cut, CS_INDUCTOR_ERROR_SYNTAX,
                "t.output_code:80:1: the file ends inside the source string of the kernel "
                "defined at line 79");

  /* no module at all */
  expect_error ("def f():\n  return 1\n", CS_INDUCTOR_ERROR_EMPTY,
                "t.output_code: no module of Inductor's output code (no '# AOT ID:' line): "
                "expected what TORCH_LOGS=output_code prints");

  /* a launch of a kernel the module does not define (column 13: after 12 spaces) */
  {
    g_autofree char *good = one_kernel_module ("mul");
    g_autoptr(GString) bad = g_string_new (good);
    g_string_replace (bad, "            triton_poi_fused_mul_0.run(",
                      "            triton_poi_fused_add_7.run(", 1);
    expect_error (bad->str, CS_INDUCTOR_ERROR_NAME,
                  "t.output_code:13:13: kernel 'triton_poi_fused_add_7' is launched but module "
                  "0_forward does not define it");
  }

  /* a Graph fragment line that is neither a PlaceHolder nor a call_function */
  {
    g_autofree char *good = one_kernel_module ("mul");
    g_autoptr(GString) bad = g_string_new (good);
    g_string_replace (bad, "= call_function[target=", "= get_attr[target=", 1);
    expect_error (bad->str, CS_INDUCTOR_ERROR_SYNTAX,
                  "t.output_code:5:5: Graph fragment node 'mul' is neither a PlaceHolder nor a "
                  "call_function");
  }
}

/* A kernel whose nodes are not nodes of the graph: file:line:col of the first unknown name. */
static void
test_unknown_node (void)
{
  g_autoptr(CsTraceList) list = NULL;
  g_autoptr(CsPipeline) pl = NULL;
  g_autoptr(GError) error = NULL;
  CsTrace *forward, *backward, *decomposed;
  const char *names[] = { "mul", "no_such_node" };

  forward = load_graphs ("mlp_gelu_bf16", &list, &backward);
  pl = cs_pipeline_run_pair (forward, backward, NULL, &error);
  g_assert_no_error (error);
  decomposed = cs_pipeline_find_trace (pl, "decompose");
  g_assert_nonnull (decomposed);
  for (guint v = 0; v < 2; v++)
    for (guint prefixed = 0; prefixed < 2; prefixed++)
      {
        g_autofree char *plain = one_kernel_module (names[v]);
        g_autoptr(GString) text = g_string_new (NULL);
        g_auto(GStrv) lines = g_strsplit (plain, "\n", -1);
        g_autoptr(CsInductorCode) code = NULL;
        g_autoptr(CsTrace) fused = NULL;
        g_autoptr(GError) err = NULL;

        for (guint i = 0; lines[i] && (lines[i][0] || lines[i + 1]); i++)
          g_string_append_printf (text, "%s%s\n", prefixed ? PREFIX : "", lines[i]);
        code = cs_inductor_parse_text (text->str, text->len, "t.output_code", &err);
        g_assert_no_error (err);
        fused = cs_inductor_fuse_trace (decomposed, code->graphs->pdata[0], "t.output_code",
                                        &err);
        if (v == 0)
          {
            /* `mul` is a node of the graph: one region of it */
            g_assert_no_error (err);
            g_assert_cmpuint (count_regions (fused), ==, 1);
            continue;
          }
        g_assert_null (fused);
        g_assert_error (err, CS_INDUCTOR_ERROR, CS_INDUCTOR_ERROR_NAME);
        {
          /* line 5, column 6 (after `#   %`), shifted by the 80-byte log prefix */
          g_autofree char *want = g_strdup_printf (
            "t.output_code:5:%u: kernel 'triton_poi_fused_mul_0': node 'no_such_node' is not a "
            "node of graph 'forward' (nor is any other node of its Graph fragment): is this the "
            "output code of another graph?", prefixed ? 86u : 6u);
          g_assert_cmpuint (strlen (PREFIX), ==, 80);
          g_assert_cmpstr (err->message, ==, want);
        }
      }
}

/* The output code of another function: its kernels name no node of this graph. */
static void
test_wrong_graph (void)
{
  g_autoptr(CsInductorCode) code = load_code ("cross_entropy_bf16");
  g_autoptr(CsTraceList) list = NULL;
  g_autoptr(CsPipeline) pl = NULL;
  g_autoptr(GError) error = NULL;
  CsTrace *forward, *backward;

  forward = load_graphs ("seed_foo_bf16", &list, &backward);
  pl = cs_pipeline_run_pair_inductor (forward, backward, NULL, code, &error);
  g_assert_null (pl);
  g_assert_error (error, CS_INDUCTOR_ERROR, CS_INDUCTOR_ERROR_NAME);
  g_assert_true (g_str_has_prefix (error->message, "fuse: "));
  g_assert_nonnull (strstr (error->message, "cross_entropy_bf16.output_code:"));
  g_assert_nonnull (strstr (error->message, "is not a node of graph 'forward'"));
}


/* The CLI: stats --inductor auto on a sample, and the usage error on a Thunder trace. */
static void
test_cli (void)
{
  const char *cli = g_getenv ("CS_CLI");
  g_autofree char *aten = data_path (NULL, "mlp_gelu_bf16", ".txt");
  g_autofree char *out = NULL;
  g_autofree char *err = NULL;
  g_autoptr(GError) error = NULL;
  int status = 0;

  if (cli == NULL)
    {
      g_test_skip ("CS_CLI is not set (run through meson test)");
      return;
    }
  {
    const char *argv[] = { cli, "stats", "--inductor", "auto", aten, NULL };
    g_assert_true (g_spawn_sync (NULL, (char **) argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, &out,
                                 &err, &status, &error));
    g_assert_no_error (error);
    g_assert_true (g_spawn_check_wait_status (status, NULL));
    g_assert_nonnull (strstr (out, "\nfusion: Inductor's kernels from "));
    g_assert_nonnull (strstr (out, "inductor/mlp_gelu_bf16.output_code (the policy's fusion "
                                   "knobs do not apply)\n"));
    g_assert_nonnull (strstr (out, " 1 region, 8 casts (5 up, 3 down), 2 matmuls (2 tensor-core)"));
    g_assert_nonnull (strstr (out, "  by executor: inductor 1, nvfuser 0, torchcompile_xentropy "
                                   "0, sdpa 0, torch 6\n"));
    g_assert_nonnull (strstr (out, "  triton_poi_fused_gelu_0   11 prims   2 casts  0 matmuls"));
    g_assert_nonnull (strstr (out, "  by executor: inductor 2, nvfuser 0,"));
    /* beside it, castscope's own consecutive fusion: 2 nvFusion regions each way, the 7 casts
     * left after remove-redundant-casts all inside them (stats of the same file without
     * --inductor) */
    g_assert_nonnull (strstr (out, "  castscope's own fusion of it: 2 regions, 7 of 7 casts "
                                   "inside regions, 353 KiB\n"));
    g_assert_nonnull (strstr (out, "  castscope's own fusion of it: 2 regions, 7 of 7 casts "
                                   "inside regions, 277 KiB\n"));
  }
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);
  {
    /* render: the kernel is a cluster of the DOT graph, with its 11 prims */
    g_autofree char *tmp = g_dir_make_tmp ("cs-inductor-XXXXXX", NULL);
    g_autofree char *dot = g_build_filename (tmp, "mlp.dot", NULL);
    g_autofree char *text = NULL;
    const char *argv[] = { cli, "render", "--inductor", "auto", aten, "-o", dot, NULL };

    g_assert_true (g_spawn_sync (NULL, (char **) argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, &out,
                                 &err, &status, &error));
    g_assert_no_error (error);
    g_assert_true (g_spawn_check_wait_status (status, NULL));
    g_assert_true (g_file_get_contents (dot, &text, NULL, NULL));
    g_assert_nonnull (strstr (text, "subgraph cluster"));
    g_assert_nonnull (strstr (text, "triton_poi_fused_gelu_0"));
    g_assert_nonnull (strstr (text, "11 ops"));
    g_assert_null (strstr (text, "nvFusion"));
    g_unlink (dot);
    g_rmdir (tmp);
  }
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);
  {
    const char *dir = g_getenv ("CS_DATA_DIR");
    g_autofree char *seed = g_build_filename (dir ? dir : "data", "seed_foo.txt", NULL);
    const char *argv[] = { cli, "stats", "--inductor", "auto", seed, NULL };
    g_assert_true (g_file_test (seed, G_FILE_TEST_EXISTS));
    g_assert_true (g_spawn_sync (NULL, (char **) argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, &out,
                                 &err, &status, &error));
    g_assert_no_error (error);
    g_assert_cmpint (WEXITSTATUS (status), ==, 2);
    g_assert_nonnull (strstr (err, "--inductor: trace 0 of "));
    g_assert_nonnull (strstr (err, " is not a torch.compile forward graph"));
  }
}

/* The output code of another function whose node names happen to exist in this graph (FX
 * names are generic: seed_foo's kernel computes a node `add`, and so does mlp_gelu's gelu): the
 * fragment's types tell them apart. */
static void
test_wrong_types (void)
{
  g_autoptr(CsInductorCode) code = load_code ("seed_foo_bf16");
  g_autofree char *path = data_path ("inductor", "seed_foo_bf16", ".output_code");
  g_autofree char *text = NULL;
  g_autofree char *want = NULL;
  g_auto(GStrv) lines = NULL;
  g_autoptr(CsTraceList) list = NULL;
  g_autoptr(CsPipeline) pl = NULL;
  g_autoptr(GError) error = NULL;
  CsTrace *forward, *backward;
  guint line = 0, col = 0;

  /* where seed_foo's fragment names `%add` (read from the file, not from the parser) */
  g_assert_true (g_file_get_contents (path, &text, NULL, NULL));
  lines = g_strsplit (text, "\n", -1);
  for (guint i = 0; lines[i] && line == 0; i++)
    {
      const char *at = strstr (lines[i], "] #   %add : Tensor \"bf16[8, 16]");
      if (at != NULL)
        {
          line = i + 1;
          col = (guint) (at - lines[i]) + 8;   /* 1-based: "] #   %" then the name */
        }
    }
  g_assert_cmpuint (line, ==, 66);
  forward = load_graphs ("mlp_gelu_bf16", &list, &backward);
  pl = cs_pipeline_run_pair_inductor (forward, backward, NULL, code, &error);
  g_assert_null (pl);
  g_assert_error (error, CS_INDUCTOR_ERROR, CS_INDUCTOR_ERROR_NAME);
  want = g_strdup_printf ("fuse: %s:%u:%u: kernel 'triton_poi_fused_add_0': node 'add' is "
                          "bf16[8, 16] in its Graph fragment but \"cuda:0 f32[32, 256]\" in graph "
                          "'forward': is this the output code of another graph?", path, line, col);
  g_assert_cmpstr (error->message, ==, want);
}

static void
test_sibling_path (void)
{
  g_autofree char *a = cs_inductor_sibling_path ("data/aten/mlp_gelu_bf16.txt");
  g_autofree char *b = cs_inductor_sibling_path ("mlp_gelu_bf16.txt");
  g_autofree char *c = cs_inductor_sibling_path ("data/aten/mlp_gelu_bf16.log");

  g_assert_cmpstr (a, ==, "data/aten/inductor/mlp_gelu_bf16.output_code");
  g_assert_cmpstr (b, ==, "./inductor/mlp_gelu_bf16.output_code");
  g_assert_null (c);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/core/inductor/mlp-gelu-hand", test_mlp_gelu_hand);
  g_test_add_func ("/core/inductor/samples", test_samples);
  g_test_add_func ("/core/inductor/special-cases", test_special_cases);
  g_test_add_func ("/core/inductor/bad-input", test_bad_input);
  g_test_add_func ("/core/inductor/unknown-node", test_unknown_node);
  g_test_add_func ("/core/inductor/wrong-graph", test_wrong_graph);
  g_test_add_func ("/core/inductor/wrong-types", test_wrong_types);
  g_test_add_func ("/core/inductor/sibling-path", test_sibling_path);
  g_test_add_func ("/core/inductor/cli", test_cli);
  return g_test_run ();
}
