/* test-core-parse-aten.c: torch.compile's printed FX graphs (issue 22): the parser, the
 * printer, the aten rows and lowerings, and the pipeline on a forward/backward pair. */
#include "cs-config.h"

#include <math.h>
#include <string.h>

#include "cs-aten.h"
#include "cs-ops.h"
#include "cs-parse.h"
#include "cs-pipeline.h"
#include "cs-policy.h"
#include "cs-print.h"
#include "cs-ref.h"
#include "cs-stats.h"
#include "cs-tensor.h"

static char *
data_path (const char *name)
{
  const char *dir = g_getenv ("CS_DATA_DIR");

  return g_build_filename (dir ? dir : "data", "aten", name, NULL);
}

static CsTraceList *
load (const char *name)
{
  g_autofree char *path = data_path (name);
  g_autoptr(GError) error = NULL;
  CsTraceList *list = cs_parse_file (path, &error);

  g_assert_no_error (error);
  g_assert_nonnull (list);
  return list;
}

static CsTraceList *
parse_str (const char *text, GError **error)
{
  return cs_parse_text (text, strlen (text), "t.txt", error);
}

static char *
file_text (const char *name)
{
  g_autofree char *path = data_path (name);
  char *text = NULL;

  g_assert_true (g_file_get_contents (path, &text, NULL, NULL));
  return text;
}

/* ------------------------------------------------------------------------------------------ */

static void
test_detect (void)
{
  const char *thunder = "def computation(a):\n  # a: \"cuda:0 f32[2]\"\n  return (a,)\n";
  const char *aten = "class GraphModule(torch.nn.Module):\n    def forward(self, a: \"f32[2][1]cpu\"):\n"
                     "        return (a,)\n";
  const char *logged = "I0101 12:00:00.000000 4242 torch/_functorch/_aot_autograd/graph_compile.py:1180] "
                       "[0/0] [__aot_graphs] TRACED GRAPH\n";

  g_assert_cmpint (cs_parse_detect_format (thunder, strlen (thunder)), ==, CS_PARSE_FORMAT_THUNDER);
  g_assert_cmpint (cs_parse_detect_format (aten, strlen (aten)), ==, CS_PARSE_FORMAT_ATEN);
  g_assert_cmpint (cs_parse_detect_format (logged, strlen (logged)), ==, CS_PARSE_FORMAT_ATEN);
}

/* The seed pair: types, strides, devices, names, roles, and the pairing of the two graphs. */
static void
test_seed_types (void)
{
  g_autoptr(CsTraceList) list = load ("seed_foo_handmade.txt");
  CsTrace *fw, *bw;
  CsProxy *p2, *perm;
  const int64_t *st;
  guint rank = 0;

  g_assert_cmpuint (list->traces->len, ==, 2);
  fw = list->traces->pdata[0];
  bw = list->traces->pdata[1];
  g_assert_cmpstr (fw->name, ==, "forward");
  g_assert_cmpstr (bw->name, ==, "backward_fn");
  g_assert_cmpint (cs_trace_aten_role (fw), ==, CS_ATEN_GRAPH_FORWARD);
  g_assert_cmpint (cs_trace_aten_role (bw), ==, CS_ATEN_GRAPH_BACKWARD);
  g_assert_cmpint (fw->aten->graph_id, ==, 0);
  g_assert_cmpstr (fw->aten->title, ==, "Forward graph 0");
  g_assert_cmpuint (fw->n_params, ==, 3);
  g_assert_cmpstr (bw->params[2].name, ==, "tangents_1");

  p2 = cs_trace_lookup_proxy (fw, "primals_2");
  g_assert_nonnull (p2);
  g_assert_cmpint (p2->kind, ==, CS_PROXY_TENSOR);
  g_assert_cmpint (p2->dtype, ==, CS_DTYPE_BF16);
  g_assert_cmpuint (p2->rank, ==, 1);
  g_assert_cmpint (p2->shape[0], ==, 16);
  g_assert_cmpint (p2->device.type, ==, CS_DEVICE_CUDA);
  g_assert_cmpint (p2->device.index, ==, 0);

  /* permute of a [8, 16] tensor: shape [16, 8], strides [1, 16] */
  perm = cs_trace_lookup_proxy (bw, "permute");
  g_assert_nonnull (perm);
  g_assert_cmpint (perm->shape[0], ==, 16);
  g_assert_cmpint (perm->shape[1], ==, 8);
  st = cs_aten_info_get_strides (bw->aten, "permute", &rank);
  g_assert_nonnull (st);
  g_assert_cmpuint (rank, ==, 2);
  g_assert_cmpint (st[0], ==, 1);
  g_assert_cmpint (st[1], ==, 16);

  /* ops: aten.mm is ltorch.matmul, the convert prim is prims' own */
  for (guint i = 0; i < fw->n_stmts; i++)
    if (fw->stmts[i]->kind == CS_STMT_CALL && g_str_equal (fw->stmts[i]->callee, "torch.ops.aten.mm.default"))
      g_assert_cmpint (cs_op_semantic (fw->stmts[i]->op)->id, ==, CS_OP_LTORCH_MATMUL);
  g_assert_cmpint (cs_op_lookup ("torch.ops.prims.convert_element_type.default")->id, ==,
                   CS_OP_PRIM_CONVERT_ELEMENT_TYPE);
  g_assert_cmpint (cs_op_lookup ("torch.ops.aten.frobnicate.default")->id, ==, CS_OP_OPAQUE);

  /* pairing: the backward takes primals_3 and add, the forward returns (mm, primals_3, add) */
  g_assert_true (cs_aten_find_backward (list, 0) == bw);
  g_assert_cmpuint (cs_aten_n_saved (fw, bw), ==, 2);
}

static void
check_roundtrip (const char *name)
{
  g_autoptr(CsTraceList) list = load (name);
  g_autofree char *want = file_text (name);
  g_autofree char *got = cs_print_trace_list (list, CS_PRINT_DEFAULT);

  g_assert_cmpstr (got, ==, want);
}

static void
test_roundtrip (void)
{
  check_roundtrip ("seed_foo_handmade.txt");
  check_roundtrip ("ln_linear_gelu_handmade.txt");
}

/* native_layer_norm's getitem reads become its three targets. */
static void
test_getitem_fold (void)
{
  g_autoptr(CsTraceList) list = load ("ln_linear_gelu_handmade.txt");
  CsTrace *fw = list->traces->pdata[0];
  CsStmt *ln = NULL;
  CsProxy *mean;

  for (guint i = 0; i < fw->n_stmts; i++)
    {
      g_assert_false (fw->stmts[i]->kind == CS_STMT_CALL
                      && g_str_equal (fw->stmts[i]->callee, "operator.getitem"));
      if (fw->stmts[i]->kind == CS_STMT_CALL
          && g_str_equal (fw->stmts[i]->callee, "torch.ops.aten.native_layer_norm.default"))
        ln = fw->stmts[i];
    }
  g_assert_nonnull (ln);
  g_assert_cmpint (ln->out->kind, ==, CS_VALUE_TUPLE);
  g_assert_cmpuint (ln->out->u.seq.n, ==, 3);
  g_assert_cmpstr (ln->out->u.seq.items[1]->u.proxy->name, ==, "getitem_1");
  mean = ln->out->u.seq.items[1]->u.proxy;
  g_assert_cmpint (mean->dtype, ==, CS_DTYPE_F32);
  g_assert_cmpuint (mean->rank, ==, 2);
  g_assert_cmpint (mean->shape[0], ==, 4);
  g_assert_cmpint (mean->shape[1], ==, 1);
  g_assert_cmpint (cs_op_semantic (ln->op)->id, ==, CS_OP_ATEN_NATIVE_LAYER_NORM);
}

/* A joint graph: `(self, primals, tangents)`, one annotation line, the pytree flattening. */
static const char joint_text[] =
  "TRACED GRAPH\n"
  " ===== Joint graph 0 =====\n"
  " /x/_lazy_graph_module.py class joint_helper(torch.nn.Module):\n"
  "    def forward(self, primals, tangents):\n"
  "        primals_1: \"f32[4][1]cpu\"; primals_2: \"f32[4][1]cpu\"; tangents_1: \"f32[4][1]cpu\"; \n"
  "    \n"
  "        primals_1, primals_2, tangents_1, = fx_pytree.tree_flatten_spec([primals, tangents], self._in_spec)\n"
  "        mul: \"f32[4][1]cpu\" = torch.ops.aten.mul.Tensor(primals_1, primals_2)\n"
  "        mul_1: \"f32[4][1]cpu\" = torch.ops.aten.mul.Tensor(tangents_1, primals_1);  primals_1 = None\n"
  "        mul_2: \"f32[4][1]cpu\" = torch.ops.aten.mul.Tensor(tangents_1, primals_2);  tangents_1 = primals_2 = None\n"
  "        return pytree.tree_unflatten([mul, mul_2, mul_1], self._out_spec)\n"
  "        \n"
  "\n";

static void
test_joint (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTraceList) list = parse_str (joint_text, &error);
  g_autofree char *back = NULL;
  CsTrace *t;

  g_assert_no_error (error);
  t = list->traces->pdata[0];
  g_assert_cmpstr (t->name, ==, "joint");
  g_assert_cmpint (cs_trace_aten_role (t), ==, CS_ATEN_GRAPH_JOINT);
  g_assert_cmpuint (t->n_params, ==, 3);
  g_assert_cmpstr (t->params[0].name, ==, "primals_1");
  g_assert_cmpstr (t->params[2].name, ==, "tangents_1");
  g_assert_null (cs_trace_lookup_proxy (t, "primals"));
  back = cs_print_trace_list (list, CS_PRINT_DEFAULT);
  g_assert_cmpstr (back, ==, joint_text);
}

/* Dynamo's graph (TORCH_LOGS=graph_code): renamed placeholders, operators, a method. */
static const char graph_code_text[] =
  "class GraphModule(torch.nn.Module):\n"
  "    def forward(self, L_a_: \"f32[4, 4][4, 1]cpu\", L_w_: \"f32[4, 4][4, 1]cpu\"):\n"
  "        l_a_ = L_a_\n"
  "        l_w_ = L_w_\n"
  "        \n"
  "        # File: g.py:5 in f, code: y = torch.sigmoid(a @ w) * 2.0\n"
  "        matmul: \"f32[4, 4][4, 1]cpu\" = l_a_ @ l_w_;  l_a_ = l_w_ = None\n"
  "        sigmoid: \"f32[4, 4][4, 1]cpu\" = torch.sigmoid(matmul);  matmul = None\n"
  "        mul: \"f32[4, 4][4, 1]cpu\" = sigmoid * 2.0;  sigmoid = None\n"
  "        \n"
  "        # File: g.py:6 in f, code: return y.sum(-1)\n"
  "        sum_1: \"f32[4][1]cpu\" = mul.sum(-1);  mul = None\n"
  "        return (sum_1,)\n"
  "        \n";

static void
test_graph_code (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTraceList) list = parse_str (graph_code_text, &error);
  g_autofree char *back = NULL;
  CsTrace *t;
  guint n_calls = 0;

  g_assert_no_error (error);
  t = list->traces->pdata[0];
  g_assert_cmpint (cs_trace_aten_role (t), ==, CS_ATEN_GRAPH_OTHER);
  g_assert_cmpstr (t->params[0].name, ==, "L_a_");
  for (guint i = 0; i < t->n_stmts; i++)
    {
      CsStmt *s = t->stmts[i];
      if (s->kind != CS_STMT_CALL)
        continue;
      n_calls++;
      if (g_str_equal (s->callee, "operator.matmul"))
        {
          g_assert_cmpint (cs_op_semantic (s->op)->id, ==, CS_OP_LTORCH_MATMUL);
          /* l_a_ is the placeholder L_a_ under its node name */
          g_assert_cmpstr (s->args[0].value->u.proxy->name, ==, "L_a_");
        }
      if (g_str_equal (s->callee, "Tensor.sum"))
        g_assert_cmpint (cs_op_semantic (s->op)->id, ==, CS_OP_LTORCH_SUM);
    }
  g_assert_cmpuint (n_calls, ==, 4);
  back = cs_print_trace_list (list, CS_PRINT_DEFAULT);
  g_assert_cmpstr (back, ==, graph_code_text);
}

/* Colour codes and a glog prefix: the same graph; error columns count the original bytes. */
static void
test_ansi_and_prefix (void)
{
  const char *text =
    "I0101 12:00:00.000000 4242 torch/_functorch/_aot_autograd/graph_compile.py:1180] [0/0] [__aot_graphs] TRACED GRAPH\n"
    " ===== Forward graph 3 =====\n"
    " /x.py class GraphModule(torch.nn.Module):\n"
    "    def forward(self, a: \"\x1b[31mf32\x1b[0m\x1b[34m[2]\x1b[0m\x1b[2;34m[1]\x1b[0m\x1b[2;32mcpu\x1b[0m\"):\n"
    "        neg: \"\x1b[31mf32\x1b[0m[2][1]cpu\" = torch.ops.aten.neg.default(a)\x1b[2m;  a = None\x1b[0m\n"
    "        return (neg,)\n";
  const char *bad =
    "class GraphModule(torch.nn.Module):\n"
    "    def forward(self, a: \"f32[2][1]cpu\"):\n"
    "        neg: \"\x1b[31mf32\x1b[0m[2][1]cpu\" = torch.ops.aten.neg.default(zz)\n"
    "        return (neg,)\n";
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTraceList) list = parse_str (text, &error);
  g_autoptr(CsTraceList) none = NULL;
  CsTrace *t;
  CsProxy *a;

  g_assert_no_error (error);
  t = list->traces->pdata[0];
  g_assert_cmpint (t->aten->graph_id, ==, 3);
  g_assert_cmpstr (t->aten->header->pdata[0], ==, "TRACED GRAPH");
  a = cs_trace_lookup_proxy (t, "a");
  g_assert_cmpint (a->dtype, ==, CS_DTYPE_F32);
  g_assert_cmpint (a->shape[0], ==, 2);
  g_assert_cmpint (a->device.type, ==, CS_DEVICE_CPU);
  /* `zz` is byte 67 of line 3: byte 58 of the text without the two colour codes (9 bytes) */
  none = parse_str (bad, &error);
  g_assert_null (none);
  g_assert_error (error, CS_PARSE_ERROR, CS_PARSE_ERROR_SYNTAX);
  g_assert_true (g_str_has_prefix (error->message, "t.txt:3:67: "));
  g_assert_nonnull (strstr (error->message, "'zz'"));
}

/* Errors carry file:line:col (columns counted by hand from the inputs). */
static void
test_errors (void)
{
  static const struct
  {
    const char *text;
    CsParseError code;
    const char *where;   /* "t.txt:L:C: " */
    const char *what;    /* a piece of the message */
  } cases[] = {
    { "class GraphModule(torch.nn.Module):\n    def forward(self, a: \"f32[2][1]cpu\"):\n"
      "        add: \"f32[2][1]cpu\" = torch.ops.aten.add.Tensor(a, b)\n        return (add,)\n",
      CS_PARSE_ERROR_SYNTAX, "t.txt:3:60: ", "'b' is used before it is defined" },
    { "class GraphModule(torch.nn.Module):\n    def forward(self, a: \"q16[2][1]cpu\"):\n"
      "        return (a,)\n",
      CS_PARSE_ERROR_TYPE, "t.txt:2:27: ", "unknown dtype 'q16'" },
    { "class GraphModule(torch.nn.Module):\n    def forward(self, a: \"f32[2, 3][1]cpu\"):\n"
      "        return (a,)\n",
      CS_PARSE_ERROR_TYPE, "t.txt:2:27: ", "1 strides for 2 dimensions" },
    { "class GraphModule(torch.nn.Module):\n    def forward(self, a: \"f32[2][1]cpu\"):\n"
      "        neg: \"f32[2][1]cpu\" = torch.ops.aten.neg.default(a)\n",
      CS_PARSE_ERROR_SYNTAX, "t.txt:2:5: ", "no return statement" },
    { "class GraphModule(torch.nn.Module):\n    def forward(self, a: \"f32[2][1]cpu\"):\n"
      "        a: \"f32[2][1]cpu\" = torch.ops.aten.neg.default(a)\n        return (a,)\n",
      CS_PARSE_ERROR_SYNTAX, "t.txt:3:9: ", "'a' is defined twice" },
    { "class GraphModule(torch.nn.Module):\n    def forward(self, a: \"f32[2][1]cpu\"):\n"
      "        neg: \"f32[2][1]cpu\" = torch.ops.aten.neg.default(a\n        return (neg,)\n",
      CS_PARSE_ERROR_SYNTAX, "t.txt:3:59: ", "expected ',' or ')'" },
    { "class GraphModule(torch.nn.Module):\n    def forward(self, a: \"f32[2][1]cpu\"):\n"
      "        return (a,)\n\n    class submod_0(torch.nn.Module):\n",
      CS_PARSE_ERROR_SYNTAX, "t.txt:5:5: ", "nested GraphModules" },
    { "TRACED GRAPH\n nothing here\n", CS_PARSE_ERROR_EMPTY, "t.txt:1:1: ", "no torch.compile graph" },
  };

  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr(GError) error = NULL;
      g_autoptr(CsTraceList) list = cs_parse_aten_text (cases[i].text, strlen (cases[i].text),
                                                        "t.txt", &error);

      g_test_message ("case %" G_GSIZE_FORMAT ": %s", i, error ? error->message : "(no error)");
      g_assert_null (list);
      g_assert_error (error, CS_PARSE_ERROR, (gint) cases[i].code);
      g_assert_true (g_str_has_prefix (error->message, cases[i].where));
      g_assert_nonnull (strstr (error->message, cases[i].what));
    }
}

/* --format: the default format forces the reader. */
static void
test_forced_format (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTraceList) list = NULL;
  CsParseFormat f;

  g_assert_true (cs_parse_format_from_string ("aten", &f));
  g_assert_cmpint (f, ==, CS_PARSE_FORMAT_ATEN);
  g_assert_false (cs_parse_format_from_string ("fx", &f));
  cs_parse_set_default_format (CS_PARSE_FORMAT_THUNDER);
  list = parse_str (graph_code_text, &error);
  cs_parse_set_default_format (CS_PARSE_FORMAT_AUTO);
  g_assert_null (list);
  g_assert_error (error, CS_PARSE_ERROR, CS_PARSE_ERROR_SYNTAX);
}

/* ------------------------------------------------------------------------------------------ */

/* stats on the seed pair: one bf16 matmul forward and two backward, all on tensor cores;
 * matmul=upcast-f32 takes the tensor cores away. */
static void
test_stats (void)
{
  g_autoptr(CsTraceList) list = load ("seed_foo_handmade.txt");
  CsPolicy policy;
  g_autoptr(GError) error = NULL;

  for (int up = 0; up < 2; up++)
    {
      g_autoptr(CsPipeline) pl = NULL;
      g_autoptr(CsTraceStats) fs = NULL, bs = NULL;
      CsTrace *fw, *bw;

      cs_policy_init_default (&policy);
      if (up)
        policy.matmul = CS_MATMUL_UPCAST_F32;
      pl = cs_pipeline_run_pair (list->traces->pdata[0], cs_aten_find_backward (list, 0), &policy, &error);
      g_assert_no_error (error);
      fw = cs_pipeline_get_forward (pl);
      bw = cs_pipeline_get_backward (pl);
      g_assert_nonnull (fw);
      g_assert_nonnull (bw);
      g_assert_nonnull (cs_pipeline_find_trace (pl, "fuse-backward"));
      g_assert_null (cs_pipeline_find_trace (pl, "grad"));
      fs = cs_stats_compute (fw);
      bs = cs_stats_compute (bw);
      g_assert_cmpuint (fs->total.n_matmuls, ==, 1);
      g_assert_cmpuint (bs->total.n_matmuls, ==, 2);
      g_assert_cmpuint (fs->total.n_tensor_core_matmuls, ==, up ? 0 : 1);
      g_assert_cmpuint (bs->total.n_tensor_core_matmuls, ==, up ? 0 : 2);
      /* 2 * M * N * K for [8, 16] @ [16, 16]: 4096 (native: the aten.mm statement) */
      g_assert_cmpfloat (fs->total.flops, >=, 4096);
      for (guint i = 0; !up && i < fw->n_stmts; i++)
        if (fw->stmts[i]->kind == CS_STMT_CALL
            && g_str_equal (fw->stmts[i]->callee, "torch.ops.aten.mm.default"))
          g_assert_cmpfloat (cs_stats_stmt_flops (fw->stmts[i]), ==, 4096);
      /* the bf16 add is computed in f32: up- and down-casts in the forward's region */
      g_assert_cmpuint (fs->total.n_upcasts, >=, 2);
      g_assert_cmpuint (fs->total.n_downcasts, >=, 1);
    }
}

/* The CPU reference on lowered aten ops, against values computed by hand (f64). */
static const char ref_text[] =
  "class GraphModule(torch.nn.Module):\n"
  "    def forward(self, x: \"f64[2, 2][2, 1]cpu\", w: \"f64[2, 2][2, 1]cpu\", c: \"f64[2][1]cpu\", g: \"f64[2, 2][2, 1]cpu\"):\n"
  "        addmm: \"f64[2, 2][2, 1]cpu\" = torch.ops.aten.addmm.default(c, x, w)\n"
  "        _softmax: \"f64[2, 2][2, 1]cpu\" = torch.ops.aten._softmax.default(addmm, -1, False)\n"
  "        native_layer_norm = torch.ops.aten.native_layer_norm.default(x, [2], None, None, 0.0)\n"
  "        getitem: \"f64[2, 2][2, 1]cpu\" = native_layer_norm[0]\n"
  "        getitem_2: \"f64[2, 1][1, 1]cpu\" = native_layer_norm[2];  native_layer_norm = None\n"
  "        gelu_backward: \"f64[2, 2][2, 1]cpu\" = torch.ops.aten.gelu_backward.default(g, x)\n"
  "        threshold_backward: \"f64[2, 2][2, 1]cpu\" = torch.ops.aten.threshold_backward.default(g, getitem, 0)\n"
  "        t: \"f64[2, 2][1, 2]cpu\" = torch.ops.aten.t.default(x)\n"
  "        return (addmm, _softmax, getitem, getitem_2, gelu_backward, threshold_backward, t)\n"
  "        \n";

static CsTensor *
tensor_2x2 (double a, double b, double c, double d)
{
  int64_t shape[2] = { 2, 2 };
  CsTensor *t = cs_tensor_new (CS_DTYPE_F64, shape, 2, NULL);

  cs_tensor_set_f64 (t, 0, a);
  cs_tensor_set_f64 (t, 1, b);
  cs_tensor_set_f64 (t, 2, c);
  cs_tensor_set_f64 (t, 3, d);
  return t;
}

static void
test_ref_values (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTraceList) list = parse_str (ref_text, &error);
  g_autoptr(CsPipeline) pl = NULL;
  g_autoptr(GHashTable) env = cs_ref_env_new ();
  g_autoptr(GPtrArray) outs = NULL;
  g_autoptr(CsTensor) x = tensor_2x2 (1, 2, 3, 4);
  g_autoptr(CsTensor) w = tensor_2x2 (1, 0, 0, 1);
  g_autoptr(CsTensor) g = tensor_2x2 (1, 1, 1, 1);
  g_autoptr(CsTensor) c = NULL;
  int64_t n2 = 2;
  /* addmm = c + x @ I; softmax of rows (2, 1), (4, 3): (sigma(1), 1 - sigma(1)); layer norm of
   * (1, 2) and (3, 4): mean 1.5 / 3.5, var 0.25, rstd 2 -> (-1, 1); gelu'(x) = Phi(x) + x phi(x);
   * threshold_backward(1, (-1, 1), 0) = (0, 1); t(x) = x^T */
  static const double want[7][4] = {
    { 2, 1, 4, 3 },
    { 0.7310585786300049, 0.2689414213699951, 0.7310585786300049, 0.2689414213699951 },
    { -1, 1, -1, 1 },
    { 2, 2, NAN, NAN },
    { 1.0833154705876864, 1.085231801078197, 1.011945647204184, 1.0005036496612265 },
    { 0, 1, 0, 1 },
    { 1, 3, 2, 4 },
  };

  g_assert_no_error (error);
  c = cs_tensor_new (CS_DTYPE_F64, &n2, 1, NULL);
  cs_tensor_set_f64 (c, 0, 1);
  cs_tensor_set_f64 (c, 1, -1);
  pl = cs_pipeline_run (list->traces->pdata[0], NULL, NULL, &error);
  g_assert_no_error (error);
  cs_ref_env_insert (env, "x", x);
  cs_ref_env_insert (env, "w", w);
  cs_ref_env_insert (env, "c", c);
  cs_ref_env_insert (env, "g", g);
  g_assert_true (cs_ref_run_env (cs_pipeline_get_forward (pl), env, CS_REF_F64, 0, &outs, NULL,
                                 NULL, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (outs->len, ==, 7);
  for (guint k = 0; k < 7; k++)
    for (guint i = 0; i < 4; i++)
      {
        if (isnan (want[k][i]))
          continue;
        g_assert_cmpfloat_with_epsilon (cs_tensor_get_f64 (outs->pdata[k], i), want[k][i], 1e-14);
      }
}

/* The pair through the pipeline and the CPU reference: the forward's saved tensors feed the
 * backward by name; the gradient of b is the column sums of the gradient of a + b. */
static void
test_pair_run (void)
{
  g_autoptr(CsTraceList) list = load ("seed_foo_handmade.txt");
  g_autoptr(GError) error = NULL;
  g_autoptr(CsPipeline) pl = cs_pipeline_run_pair (list->traces->pdata[0],
                                                   cs_aten_find_backward (list, 0), NULL, &error);
  g_autoptr(GHashTable) env = cs_ref_env_new ();
  g_autoptr(GHashTable) ret = cs_ref_env_new ();
  g_autoptr(GPtrArray) fo = NULL, bo = NULL, bn = NULL;
  g_autoptr(GPtrArray) leaves = NULL;
  CsTrace *fw, *bw;

  g_assert_no_error (error);
  fw = cs_pipeline_get_forward (pl);
  bw = cs_pipeline_get_backward (pl);
  leaves = cs_ref_dup_leaf_inputs (fw);
  for (guint i = 0; i < leaves->len; i++)
    {
      g_autoptr(CsTensor) v = cs_ref_random_input (fw, leaves->pdata[i], 7, &error);
      g_assert_no_error (error);
      cs_ref_env_insert (env, ((CsProxy *) leaves->pdata[i])->name, v);
    }
  g_assert_true (cs_ref_run_env (fw, env, CS_REF_F64, 0, &fo, NULL, ret, &error));
  g_assert_no_error (error);
  g_assert_true (g_hash_table_contains (ret, "add"));
  g_assert_true (g_hash_table_contains (ret, "primals_3"));
  {
    /* tangents_1 = 1 everywhere: d(sum)/d(mm) */
    int64_t shape[2] = { 8, 16 };
    g_autoptr(CsTensor) ones = cs_tensor_new (CS_DTYPE_BF16, shape, 2, NULL);
    for (int64_t i = 0; i < 8 * 16; i++)
      cs_tensor_set_f64 (ones, i, 1.0);
    cs_ref_env_insert (ret, "tangents_1", ones);
  }
  g_assert_true (cs_ref_run_env (bw, ret, CS_REF_F64, 0, &bo, &bn, NULL, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (bo->len, ==, 3);
  g_assert_cmpstr (bn->pdata[1], ==, "view");
  {
    /* d/d(a)[i, k] = sum_j w[k, j] (tangent 1): row sums of w; view = sum over i of that */
    CsTensor *w = g_hash_table_lookup (env, "primals_3");
    CsTensor *ga = bo->pdata[0], *gb = bo->pdata[1];
    for (int k = 0; k < 16; k++)
      {
        double rs = 0;
        for (int j = 0; j < 16; j++)
          rs += cs_tensor_get_f64 (w, k * 16 + j);
        g_assert_cmpfloat_with_epsilon (cs_tensor_get_f64 (ga, 3 * 16 + k), rs, 1e-12);
        g_assert_cmpfloat_with_epsilon (cs_tensor_get_f64 (gb, k), 8 * rs, 1e-11);
      }
  }
}

/* The passes' traces of a torch.compile graph print as Thunder text that loads back: the
 * graph's `-inf` (torch.fx's spelling of masked_fill's float('-inf')) prints as Python's
 * -float('inf') there, and as -inf again in the graph's own format. */
static void
test_nonfinite_print (void)
{
  g_autoptr(CsTraceList) list = load ("gpt_block_bf16.txt");
  g_autoptr(GError) error = NULL;
  g_autoptr(CsPipeline) pl = cs_pipeline_run_pair (list->traces->pdata[0],
                                                   cs_aten_find_backward (list, 0), NULL, &error);
  g_autofree char *graph = cs_print_trace_list (list, CS_PRINT_DEFAULT);
  g_autofree char *fwd = NULL, *again = NULL;
  g_autoptr(CsTrace) back = NULL;

  g_assert_no_error (error);
  g_assert_nonnull (strstr (graph, "torch.ops.aten.full.default([], -inf, "));
  fwd = cs_print_trace (cs_pipeline_get_forward (pl), CS_PRINT_DEFAULT);
  g_assert_nonnull (strstr (fwd, "prims.full((), -float('inf'), "));
  g_assert_null (strstr (fwd, ", -inf,"));
  back = cs_parse_trace (fwd, "forward", &error);
  g_assert_no_error (error);
  again = cs_print_trace (back, CS_PRINT_DEFAULT);
  g_assert_cmpstr (again, ==, fwd);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/core/parse-aten/detect", test_detect);
  g_test_add_func ("/core/parse-aten/seed-types", test_seed_types);
  g_test_add_func ("/core/parse-aten/roundtrip", test_roundtrip);
  g_test_add_func ("/core/parse-aten/getitem-fold", test_getitem_fold);
  g_test_add_func ("/core/parse-aten/joint", test_joint);
  g_test_add_func ("/core/parse-aten/graph-code", test_graph_code);
  g_test_add_func ("/core/parse-aten/ansi-and-log-prefix", test_ansi_and_prefix);
  g_test_add_func ("/core/parse-aten/errors", test_errors);
  g_test_add_func ("/core/parse-aten/forced-format", test_forced_format);
  g_test_add_func ("/core/aten/stats", test_stats);
  g_test_add_func ("/core/aten/ref-values", test_ref_values);
  g_test_add_func ("/core/aten/pair-run", test_pair_run);
  g_test_add_func ("/core/aten/nonfinite-print", test_nonfinite_print);
  return g_test_run ();
}
