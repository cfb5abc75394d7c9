/* test-core-grad.c: the grad transform (cs_grad_joint).
 *
 * - the seed foo(a, b, w) = matmul(a + b, w) in bf16: the backward has the structure of
 *   ../shared/traces/seed_foo_bwd.txt (g @ w^T, (a+b)^T @ g on bf16 operands, grad of b = sum
 *   over dim 0, grad of a = grad of a+b);
 * - Thunder's own joint traces (thunder_*_grad_joint.txt) have the same backward op counts as
 *   ours for the same initial traces;
 * - every VJP rule agrees with central finite differences of the f64 CPU reference.
 */
#include "cs-config.h"

#include <glib.h>
#include <math.h>
#include <string.h>

#include "cs-grad.h"
#include "cs-ops.h"
#include "cs-parse.h"
#include "cs-print.h"

/* The seed, written as Thunder prints the initial trace (reference 1.2): ltorch.add with its
 * prims as subsymbols, ltorch.matmul over prims.matmul. */
static const char seed_text[] =
  "import thunder\n"
  "import thunder.torch as ltorch\n"
  "import torch\n"
  "from thunder.executors.torchex import no_autocast\n"
  "\n"
  "@torch.no_grad()\n"
  "@no_autocast\n"
  "def computation(a, b, w):\n"
  "  # a: \"cuda:0 bf16[8, 16]\"\n"
  "  # b: \"cuda:0 bf16[16]\"\n"
  "  # w: \"cuda:0 bf16[16, 16]\"\n"
  "  t4 = ltorch.add(a, b, alpha=1)  # t4: \"cuda:0 bf16[8, 16]\"\n"
  "    # t0 = prims.broadcast_in_dim(b, (8, 16), (1,))  # t0: \"cuda:0 bf16[8, 16]\"\n"
  "    # t1 = prims.convert_element_type(a, dtypes.float32)  # t1: \"cuda:0 f32[8, 16]\"\n"
  "    # t2 = prims.convert_element_type(t0, dtypes.float32)  # t2: \"cuda:0 f32[8, 16]\"\n"
  "    # t3 = prims.add(t1, t2)  # t3: \"cuda:0 f32[8, 16]\"\n"
  "    # t4 = prims.convert_element_type(t3, dtypes.bfloat16)  # t4: \"cuda:0 bf16[8, 16]\"\n"
  "  t5 = ltorch.matmul(t4, w)  # t5: \"cuda:0 bf16[8, 16]\"\n"
  "    # t5 = prims.matmul(t4, w)  # t5: \"cuda:0 bf16[8, 16]\"\n"
  "  return (t5,)\n";

static CsTrace *
parse_or_die (const char *text)
{
  g_autoptr(GError) error = NULL;
  CsTrace *t = cs_parse_trace (text, "test", &error);

  g_assert_no_error (error);
  g_assert_nonnull (t);
  return t;
}

static CsTrace *
load_shared (const char *file)
{
  const char *dir = g_getenv ("CS_SHARED_TRACES");
  g_autofree char *path = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTraceList) list = NULL;

  if (dir == NULL)
    return NULL;
  path = g_build_filename (dir, file, NULL);
  if (!g_file_test (path, G_FILE_TEST_EXISTS))
    return NULL;
  list = cs_parse_file (path, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (list->traces->len, >=, 1);
  return cs_trace_ref (list->traces->pdata[0]);
}

static CsValue *
dict_get (const CsValue *d, const char *key)
{
  g_assert_nonnull (d);
  g_assert_cmpint (d->kind, ==, CS_VALUE_DICT);
  for (guint i = 0; i + 1 < d->u.seq.n; i += 2)
    if (g_strcmp0 (d->u.seq.items[i]->u.s, key) == 0)
      return d->u.seq.items[i + 1];
  return NULL;
}

/* The statement of @t that produces @p (top level), or NULL. */
static CsStmt *
producer (const CsTrace *t, const CsProxy *p)
{
  for (guint i = 0; i < t->n_stmts; i++)
    {
      g_autoptr(GPtrArray) outs = g_ptr_array_new ();
      cs_stmt_collect_outputs (t->stmts[i], outs);
      for (guint j = 0; j < outs->len; j++)
        if (outs->pdata[j] == p)
          return t->stmts[i];
    }
  return NULL;
}

/* Follows convert_element_type chains back to the first non-cast producer's output. */
static CsProxy *
strip_casts (const CsTrace *t, CsProxy *p)
{
  for (;;)
    {
      CsStmt *s = producer (t, p);
      CsValue *a;
      if (s == NULL || s->kind != CS_STMT_CALL
          || cs_op_semantic (s->op)->id != CS_OP_PRIM_CONVERT_ELEMENT_TYPE)
        return p;
      a = cs_stmt_get_arg (s, 0, "a");
      if (a == NULL || a->kind != CS_VALUE_PROXY)
        return p;
      p = a->u.proxy;
    }
}

static guint
first_get_grad (const CsTrace *t)
{
  for (guint i = 0; i < t->n_stmts; i++)
    if (t->stmts[i]->kind == CS_STMT_CALL && t->stmts[i]->op->id == CS_OP_PRIM_GET_GRAD)
      return i;
  return t->n_stmts;
}

/* Number of top-level statements from the first get_grad on whose semantic op is @id. */
static guint
count_backward (const CsTrace *t, CsOpId id)
{
  guint n = 0;

  for (guint i = first_get_grad (t); i < t->n_stmts; i++)
    if (t->stmts[i]->kind == CS_STMT_CALL && cs_op_semantic (t->stmts[i]->op)->id == id)
      n++;
  return n;
}

static void
test_seed_structure (void)
{
  g_autoptr(CsTrace) init = parse_or_die (seed_text);
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTrace) joint = cs_grad_joint (init, NULL, &error);
  CsStmt *ret;
  CsValue *grads, *fwout;
  CsProxy *ga, *gb, *gw, *t4, *a, *b, *w;
  CsStmt *s;
  guint n_get = 0, n_bw = 0, gg;
  CsProxy *g = NULL;

  g_assert_no_error (error);
  g_assert_nonnull (joint);
  g_assert_cmpstr (joint->pass, ==, "grad");
  a = cs_trace_lookup_proxy (joint, "a");
  b = cs_trace_lookup_proxy (joint, "b");
  w = cs_trace_lookup_proxy (joint, "w");
  t4 = cs_trace_lookup_proxy (joint, "t4");

  /* one cotangent: the gradient of the output t5 */
  for (guint i = 0; i < joint->n_stmts; i++)
    {
      s = joint->stmts[i];
      if (s->kind == CS_STMT_CALL && s->op->id == CS_OP_PRIM_GET_GRAD)
        {
          CsValue *x = cs_stmt_get_arg (s, 0, NULL);
          n_get++;
          g = cs_stmt_get_output (s);
          g_assert_cmpstr (x->u.proxy->name, ==, "t5");
        }
      if (s->backward)
        n_bw++;
    }
  g_assert_cmpuint (n_get, ==, 1);
  g_assert_nonnull (g);
  g_assert_cmpint (g->dtype, ==, CS_DTYPE_BF16);
  /* everything after the get_grad is backward, nothing before it */
  gg = first_get_grad (joint);
  for (guint i = 0; i < joint->n_stmts; i++)
    if (joint->stmts[i]->kind == CS_STMT_CALL)
      g_assert_cmpint (joint->stmts[i]->backward, ==, i >= gg);

  /* return {'output': (ga, gb, gw), 'flat_args': [a, b, w], 'fw_flat_out': (t5,)} */
  ret = cs_trace_get_return (joint);
  grads = dict_get (ret->value, "output");
  fwout = dict_get (ret->value, "fw_flat_out");
  g_assert_cmpuint (grads->u.seq.n, ==, 3);
  g_assert_cmpuint (fwout->u.seq.n, ==, 1);
  g_assert_cmpstr (fwout->u.seq.items[0]->u.proxy->name, ==, "t5");
  g_assert_cmpuint (dict_get (ret->value, "flat_args")->u.seq.n, ==, 3);
  ga = grads->u.seq.items[0]->u.proxy;
  gb = grads->u.seq.items[1]->u.proxy;
  gw = grads->u.seq.items[2]->u.proxy;
  g_assert_cmpint (ga->dtype, ==, CS_DTYPE_BF16);
  g_assert_cmpint (gb->dtype, ==, CS_DTYPE_BF16);
  g_assert_cmpint (gw->dtype, ==, CS_DTYPE_BF16);
  g_assert_cmpuint (ga->rank, ==, 2);
  g_assert_cmpuint (gb->rank, ==, 1);
  g_assert_cmpint (gb->shape[0], ==, 16);
  g_assert_cmpint (gw->shape[0], ==, 16);
  g_assert_cmpint (gw->shape[1], ==, 16);

  /* two matmuls in the backward, both on bf16 operands */
  g_assert_cmpuint (count_backward (joint, CS_OP_LTORCH_MATMUL), ==, 2);
  g_assert_cmpuint (count_backward (joint, CS_OP_LTORCH_SUM), ==, 1);

  /* grad of w = transpose(a + b) @ g */
  s = producer (joint, gw);
  g_assert_cmpint (s->op->id, ==, CS_OP_LTORCH_MATMUL);
  {
    CsProxy *l = cs_stmt_get_arg (s, 0, NULL)->u.proxy, *r = cs_stmt_get_arg (s, 1, NULL)->u.proxy;
    CsStmt *tr = producer (joint, l);
    g_assert_true (r == g);
    g_assert_cmpint (tr->op->id, ==, CS_OP_PRIM_TRANSPOSE);
    g_assert_true (cs_stmt_get_arg (tr, 0, NULL)->u.proxy == t4);
    g_assert_cmpint (l->dtype, ==, CS_DTYPE_BF16);
  }

  /* grad of a = grad of (a + b) = g @ transpose(w), through lossless f32 round trips */
  {
    CsProxy *m = strip_casts (joint, ga);
    CsProxy *l, *r;
    CsStmt *tr;
    s = producer (joint, m);
    g_assert_cmpint (s->op->id, ==, CS_OP_LTORCH_MATMUL);
    l = cs_stmt_get_arg (s, 0, NULL)->u.proxy;
    r = cs_stmt_get_arg (s, 1, NULL)->u.proxy;
    g_assert_true (l == g);
    tr = producer (joint, r);
    g_assert_cmpint (tr->op->id, ==, CS_OP_PRIM_TRANSPOSE);
    g_assert_true (cs_stmt_get_arg (tr, 0, NULL)->u.proxy == w);
    g_assert_cmpint (r->dtype, ==, CS_DTYPE_BF16);
  }

  /* grad of b = sum over dim 0 of the (bf16) grad of the broadcast */
  s = producer (joint, gb);
  g_assert_cmpint (s->op->id, ==, CS_OP_LTORCH_SUM);
  {
    int64_t dims[4];
    guint nd = 0;
    g_assert_true (cs_value_get_int_seq (cs_stmt_get_arg (s, 1, NULL), dims, 4, &nd));
    g_assert_cmpuint (nd, ==, 1);
    g_assert_cmpint (dims[0], ==, 0);
    g_assert_true (strip_casts (joint, cs_stmt_get_arg (s, 0, NULL)->u.proxy)
                   == strip_casts (joint, ga));
  }
  (void) a;
  (void) b;
  g_assert_cmpuint (n_bw, >, 0);

  /* the joint prints and re-parses (the printer knows every statement we made) */
  {
    g_autofree char *text = cs_print_trace (joint, CS_PRINT_DEFAULT);
    g_autoptr(CsTrace) again = parse_or_die (text);
    g_assert_cmpuint (again->n_stmts, ==, joint->n_stmts);
    g_assert_nonnull (strstr (text, "prims.get_grad(t5)"));
    g_assert_nonnull (strstr (text, "'fw_flat_out': (t5,)"));
  }
}

static void
test_spec (void)
{
  g_autoptr(CsTrace) init = parse_or_die (seed_text);
  g_autoptr(GError) error = NULL;
  const char * const only_w[] = { "w", NULL };
  const char * const bad[] = { "nope", NULL };
  CsGradSpec spec = { .names = only_w };
  CsGradSpec none = { .none = TRUE };
  CsGradSpec badspec = { .names = bad };
  g_autoptr(CsTrace) jw = cs_grad_joint (init, &spec, &error);
  g_autoptr(CsTrace) jn = NULL;
  g_autoptr(CsTrace) jb = NULL;
  CsValue *grads;

  g_assert_no_error (error);
  grads = dict_get (cs_trace_get_return (jw)->value, "output");
  g_assert_cmpint (grads->u.seq.items[0]->kind, ==, CS_VALUE_NONE);
  g_assert_cmpint (grads->u.seq.items[1]->kind, ==, CS_VALUE_NONE);
  g_assert_cmpint (grads->u.seq.items[2]->kind, ==, CS_VALUE_PROXY);
  /* only w's grad: one matmul, no sum (dead code removed) */
  g_assert_cmpuint (count_backward (jw, CS_OP_LTORCH_MATMUL), ==, 1);
  g_assert_cmpuint (count_backward (jw, CS_OP_LTORCH_SUM), ==, 0);

  jn = cs_grad_joint (init, &none, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (first_get_grad (jn), ==, jn->n_stmts);

  jb = cs_grad_joint (init, &badspec, &error);
  g_assert_null (jb);
  g_assert_error (error, CS_GRAD_ERROR, CS_GRAD_ERROR_SPEC);
  g_assert_nonnull (strstr (error->message, "nope"));
}

static void
test_no_rule (void)
{
  static const char text[] =
    "def computation(x):\n"
    "  # x: \"cpu f32[4]\"\n"
    "  t0 = ltorch.lgamma_like_op(x)  # t0: \"cpu f32[4]\"\n"
    "  return (t0,)\n";
  g_autoptr(CsTrace) init = parse_or_die (text);
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTrace) joint = cs_grad_joint (init, NULL, &error);

  g_assert_null (joint);
  g_assert_error (error, CS_GRAD_ERROR, CS_GRAD_ERROR_NO_RULE);
  g_assert_nonnull (strstr (error->message, "ltorch.lgamma_like_op"));
  g_assert_nonnull (strstr (error->message, ":3"));
}

/* Our backward has Thunder's op counts for the same initial trace. */
static void
compare_with_thunder (const char *initial_file, const char *joint_file)
{
  g_autoptr(CsTrace) init = load_shared (initial_file);
  g_autoptr(CsTrace) theirs = load_shared (joint_file);
  g_autoptr(CsTrace) ours = NULL;
  g_autoptr(GError) error = NULL;
  static const CsOpId counted[] = { CS_OP_LTORCH_MATMUL, CS_OP_LTORCH_SUM, CS_OP_PRIM_GET_GRAD,
                                    CS_OP_LTORCH_ADD, CS_OP_PRIM_TRANSPOSE };

  if (init == NULL || theirs == NULL)
    {
      g_test_skip ("shared traces not present");
      return;
    }
  ours = cs_grad_joint (init, NULL, &error);
  g_assert_no_error (error);
  for (guint k = 0; k < G_N_ELEMENTS (counted); k++)
    {
      guint a = count_backward (ours, counted[k]), b = count_backward (theirs, counted[k]);
      if (a != b)
        g_test_message ("%s: %s: ours %u, Thunder %u", initial_file,
                        cs_op_get (counted[k])->name, a, b);
      g_assert_cmpuint (a, ==, b);
    }
}

static void
test_thunder_mlp (void)
{
  compare_with_thunder ("thunder_b_mlp_gelu_initial.txt", "thunder_b_mlp_gelu_grad_joint.txt");
}

static void
test_thunder_seed (void)
{
  compare_with_thunder ("thunder_a_seed_matmul_initial.txt", "thunder_a_seed_matmul_grad_joint.txt");
}

static void
test_thunder_attention (void)
{
  compare_with_thunder ("thunder_e_softmax_attention_initial.txt",
                        "thunder_e_softmax_attention_grad_joint.txt");
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/core/grad/seed/structure", test_seed_structure);
  g_test_add_func ("/core/grad/spec", test_spec);
  g_test_add_func ("/core/grad/error/no-rule", test_no_rule);
  g_test_add_func ("/core/grad/thunder/seed-counts", test_thunder_seed);
  g_test_add_func ("/core/grad/thunder/mlp-counts", test_thunder_mlp);
  g_test_add_func ("/core/grad/thunder/attention-counts", test_thunder_attention);
  return g_test_run ();
}
