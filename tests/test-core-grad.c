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

#include "cs-decompose.h"
#include "cs-grad.h"
#include "cs-meta.h"
#include "cs-ops.h"
#include "cs-parse.h"
#include "cs-print.h"
#include "cs-ref.h"
#include "cs-tensor.h"

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
    "  # x: \"cuda:0 f32[4]\"\n"
    "  t0 = ltorch.lgamma_like_op(x)  # t0: \"cuda:0 f32[4]\"\n"
    "  return (t0,)\n";
  g_autoptr(CsTrace) init = parse_or_die (text);
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTrace) joint = cs_grad_joint (init, NULL, &error);

  g_assert_null (joint);
  g_assert_error (error, CS_GRAD_ERROR, CS_GRAD_ERROR_NO_RULE);
  g_assert_nonnull (strstr (error->message, "ltorch.lgamma_like_op"));
  g_assert_nonnull (strstr (error->message, ":3"));
}

/* Histogram of the semantic ops of the backward part (from the first get_grad on). */
static GHashTable *
backward_histogram (const CsTrace *t)
{
  GHashTable *h = g_hash_table_new (g_str_hash, g_str_equal);

  for (guint i = first_get_grad (t); i < t->n_stmts; i++)
    if (t->stmts[i]->kind == CS_STMT_CALL)
      {
        const char *n = cs_op_semantic (t->stmts[i]->op)->name;
        guint c = GPOINTER_TO_UINT (g_hash_table_lookup (h, n));
        g_hash_table_insert (h, (gpointer) n, GUINT_TO_POINTER (c + 1));
      }
  return h;
}

/* Our backward has exactly Thunder's op counts (every op: matmuls, sums, reshapes, casts,
 * gradient accumulations) for the same initial trace. */
static void
compare_with_thunder (const char *initial_file, const char *joint_file)
{
  g_autoptr(CsTrace) init = load_shared (initial_file);
  g_autoptr(CsTrace) theirs = load_shared (joint_file);
  g_autoptr(CsTrace) ours = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(GHashTable) ho = NULL;
  g_autoptr(GHashTable) ht = NULL;
  GHashTableIter it;
  gpointer k, v;

  if (init == NULL || theirs == NULL)
    {
      g_test_skip ("shared traces not present");
      return;
    }
  ours = cs_grad_joint (init, NULL, &error);
  g_assert_no_error (error);
  ho = backward_histogram (ours);
  ht = backward_histogram (theirs);
  g_assert_cmpuint (g_hash_table_size (ht), >, 2);
  g_hash_table_iter_init (&it, ht);
  while (g_hash_table_iter_next (&it, &k, &v))
    {
      g_test_message ("%s: %s: ours %u, Thunder %u", initial_file, (const char *) k,
                      GPOINTER_TO_UINT (g_hash_table_lookup (ho, k)), GPOINTER_TO_UINT (v));
      g_assert_cmpuint (GPOINTER_TO_UINT (g_hash_table_lookup (ho, k)), ==, GPOINTER_TO_UINT (v));
    }
  g_assert_cmpuint (g_hash_table_size (ho), ==, g_hash_table_size (ht));
  /* the matmuls and sums at least are there */
  g_assert_cmpuint (count_backward (ours, CS_OP_LTORCH_MATMUL), >=, 2);
  g_assert_cmpuint (count_backward (ours, CS_OP_LTORCH_SUM), >=, 1);
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


/* ------------------------------------------------------------------------------------------ */
/* Finite differences against the f64 CPU reference                                            */

#include "test-fd.h"

static void
check_fd (const char *text, double lo, double hi)
{
  check_fd_full (text, lo, hi, 1e-6, NULL);
}

#define HDR "def computation(x, y):\n  # x: \"cuda:0 f64[3, 4]\"\n  # y: \"cuda:0 f64[3, 4]\"\n"
#define HDR1 "def computation(x):\n  # x: \"cuda:0 f64[3, 4]\"\n"
#define T34 "  # t0: \"cuda:0 f64[3, 4]\"\n"

static void
test_fd_binary (void)
{
  static const char *ops[] = { "add", "sub", "mul", "div", "pow" };
  for (guint i = 0; i < G_N_ELEMENTS (ops); i++)
    {
      g_autofree char *text = g_strdup_printf (HDR "  t0 = prims.%s(x, y)" T34 "  return (t0,)\n",
                                               ops[i]);
      g_test_message ("prims.%s", ops[i]);
      check_fd (text, 0.5, 1.5);
    }
}

static void
test_fd_unary (void)
{
  static const char *ops[] = { "neg", "exp", "log", "tanh", "erf", "rsqrt", "sqrt", "reciprocal" };
  for (guint i = 0; i < G_N_ELEMENTS (ops); i++)
    {
      g_autofree char *text = g_strdup_printf (HDR1 "  t0 = prims.%s(x)" T34 "  return (t0,)\n",
                                               ops[i]);
      g_test_message ("prims.%s", ops[i]);
      check_fd (text, 0.5, 1.5);
    }
}

static void
test_fd_scalar (void)
{
  /* number operands: only the tensor gets a gradient */
  check_fd (HDR1 "  t0 = prims.mul(x, 2.5)" T34 "  t1 = prims.pow(t0, 3.0)  # t1: \"cuda:0 f64[3, 4]\"\n"
            "  t2 = prims.div(1.5, t1)  # t2: \"cuda:0 f64[3, 4]\"\n"
            "  t3 = prims.sub(t2, x)  # t3: \"cuda:0 f64[3, 4]\"\n  return (t3,)\n", 0.5, 1.5);
}

static void
test_fd_where (void)
{
  check_fd (HDR "  t0 = prims.gt(x, 0.0)  # t0: \"cuda:0 b8[3, 4]\"\n"
            "  t1 = prims.where(t0, x, y)  # t1: \"cuda:0 f64[3, 4]\"\n"
            "  t2 = prims.mul(t1, y)  # t2: \"cuda:0 f64[3, 4]\"\n  return (t2,)\n", -1.0, 1.0);
}

static void
test_fd_shape (void)
{
  check_fd ("def computation(x, b):\n  # x: \"cuda:0 f64[3, 4]\"\n  # b: \"cuda:0 f64[4]\"\n"
            "  t0 = prims.broadcast_in_dim(b, (3, 4), (1,))  # t0: \"cuda:0 f64[3, 4]\"\n"
            "  t1 = prims.mul(x, t0)  # t1: \"cuda:0 f64[3, 4]\"\n"
            "  t2 = prims.reshape(t1, (2, 6))  # t2: \"cuda:0 f64[2, 6]\"\n"
            "  t3 = prims.transpose(t2, (1, 0))  # t3: \"cuda:0 f64[6, 2]\"\n"
            "  t4 = prims.slice_prim(t3, [1, 0], [5, 2], [2, 1])  # t4: \"cuda:0 f64[2, 2]\"\n"
            "  t5 = prims.cat([t4, t3], 0)  # t5: \"cuda:0 f64[8, 2]\"\n"
            "  t6 = prims.broadcast_in_dim(t5, [8, 1, 2], [0, 2])  # t6: \"cuda:0 f64[8, 1, 2]\"\n"
            "  t7 = prims.squeeze(t6, (1,))  # t7: \"cuda:0 f64[8, 2]\"\n"
            "  t8 = prims.convert_element_type(t7, dtypes.float32)  # t8: \"cuda:0 f32[8, 2]\"\n"
            "  return (t8,)\n", -1.0, 1.0);
  /* broadcast of a size-1 dim (expand) */
  check_fd ("def computation(x, b):\n  # x: \"cuda:0 f64[3, 4]\"\n  # b: \"cuda:0 f64[3, 1]\"\n"
            "  t0 = prims.broadcast_in_dim(b, (3, 4), (0, 1))  # t0: \"cuda:0 f64[3, 4]\"\n"
            "  t1 = prims.mul(x, t0)  # t1: \"cuda:0 f64[3, 4]\"\n  return (t1,)\n", -1.0, 1.0);
}

static void
test_fd_reductions (void)
{
  check_fd (HDR1 "  t0 = prims.sum(x, (1,))  # t0: \"cuda:0 f64[3]\"\n"
            "  t1 = prims.amax(x, (0,))  # t1: \"cuda:0 f64[4]\"\n"
            "  (t2, t3) = prims.var_mean(x, (1,), correction=1)\n"
            "  t4 = prims.mul(t2, t3)  # t4: \"cuda:0 f64[3]\"\n"
            "  t5 = prims.mul(t0, t4)  # t5: \"cuda:0 f64[3]\"\n"
            "  return (t5, t1)\n", -1.0, 1.0);
  check_fd (HDR1 "  t0 = ltorch.sum(x, 1, True, dtype=None)  # t0: \"cuda:0 f64[3, 1]\"\n"
            "  t1 = ltorch.sum(x, None, False, dtype=None)  # t1: \"cuda:0 f64[]\"\n"
            "  t2 = ltorch.sum(x, (0, 1), False, dtype=None)  # t2: \"cuda:0 f64[]\"\n"
            "  return (t0, t1, t2)\n", -1.0, 1.0);
}

static void
test_fd_matmul (void)
{
  /* 2-D */
  check_fd ("def computation(a, b):\n  # a: \"cuda:0 f64[3, 4]\"\n  # b: \"cuda:0 f64[4, 2]\"\n"
            "  t0 = prims.matmul(a, b)  # t0: \"cuda:0 f64[3, 2]\"\n  return (t0,)\n", -1.0, 1.0);
  /* batched */
  check_fd ("def computation(a, b):\n  # a: \"cuda:0 f64[2, 3, 4]\"\n  # b: \"cuda:0 f64[2, 4, 2]\"\n"
            "  t0 = prims.matmul(a, b)  # t0: \"cuda:0 f64[2, 3, 2]\"\n  return (t0,)\n", -1.0, 1.0);
  /* matrix @ vector, vector @ matrix, vector @ vector */
  check_fd ("def computation(a, b):\n  # a: \"cuda:0 f64[3, 4]\"\n  # b: \"cuda:0 f64[4]\"\n"
            "  t0 = prims.matmul(a, b)  # t0: \"cuda:0 f64[3]\"\n  return (t0,)\n", -1.0, 1.0);
  check_fd ("def computation(a, b):\n  # a: \"cuda:0 f64[3]\"\n  # b: \"cuda:0 f64[3, 4]\"\n"
            "  t0 = prims.matmul(a, b)  # t0: \"cuda:0 f64[4]\"\n  return (t0,)\n", -1.0, 1.0);
  check_fd ("def computation(a, b):\n  # a: \"cuda:0 f64[3]\"\n  # b: \"cuda:0 f64[3]\"\n"
            "  t0 = prims.matmul(a, b)  # t0: \"cuda:0 f64[]\"\n  return (t0,)\n", -1.0, 1.0);
}

static void
test_fd_linear (void)
{
  check_fd ("def computation(x, w, b):\n  # x: \"cuda:0 f64[2, 3, 4]\"\n  # w: \"cuda:0 f64[5, 4]\"\n"
            "  # b: \"cuda:0 f64[5]\"\n"
            "  t0 = prims.linear(x, w, b)  # t0: \"cuda:0 f64[2, 3, 5]\"\n  return (t0,)\n", -1.0, 1.0);
  check_fd ("def computation(x, w):\n  # x: \"cuda:0 f64[3, 4]\"\n  # w: \"cuda:0 f64[5, 4]\"\n"
            "  t0 = prims.linear(x, w, None)  # t0: \"cuda:0 f64[3, 5]\"\n  return (t0,)\n", -1.0, 1.0);
  check_fd ("def computation(x, w, b):\n  # x: \"cuda:0 f64[4]\"\n  # w: \"cuda:0 f64[5, 4]\"\n"
            "  # b: \"cuda:0 f64[5]\"\n"
            "  t0 = prims.linear(x, w, b)  # t0: \"cuda:0 f64[5]\"\n  return (t0,)\n", -1.0, 1.0);
}

static const char * const w_only[] = { "w", NULL };

static void
test_fd_take (void)
{
  check_fd_full ("def computation(w, i):\n  # w: \"cuda:0 f64[4, 3]\"\n  # i: \"cuda:0 i64[5]\"\n"
                 "  t0 = prims.take(w, i, 0)  # t0: \"cuda:0 f64[5, 3]\"\n  return (t0,)\n",
                 -1.0, 1.0, 1e-6, w_only);
}

static void
test_fd_take_along_axis (void)
{
  check_fd_full ("def computation(w, i):\n  # w: \"cuda:0 f64[4, 3]\"\n  # i: \"cuda:0 i64[4, 2]\"\n"
                 "  t0 = prims.take_along_axis(w, i, 1)  # t0: \"cuda:0 f64[4, 2]\"\n  return (t0,)\n",
                 -1.0, 1.0, 1e-6, w_only);
}

static void
test_fd_embedding (void)
{
  check_fd_full ("def computation(i, w):\n  # i: \"cuda:0 i64[2, 3]\"\n  # w: \"cuda:0 f64[4, 3]\"\n"
                 "  t0 = ltorch.embedding(i, w, None, None, 2.0, False, False)  # t0: \"cuda:0 f64[2, 3, 3]\"\n"
                 "  return (t0,)\n", -1.0, 1.0, 1e-6, w_only);
}

static void
test_fd_ltorch_rules (void)
{
  check_fd (HDR1 "  t0 = ltorch._softmax(x, -1, dtype=None)" T34 "  return (t0,)\n", -1.0, 1.0);
  check_fd (HDR1 "  t0 = ltorch.log_softmax(x, 0, dtype=None)" T34 "  return (t0,)\n", -1.0, 1.0);
  check_fd (HDR1 "  t0 = ltorch.silu(x, False)" T34 "  return (t0,)\n", -1.0, 1.0);
}

static void
test_fd_decomposed (void)
{
  /* ops without a rule of their own: differentiated through their decomposition */
  check_fd (HDR1 "  t0 = ltorch.gelu(x, approximate='tanh')" T34 "  return (t0,)\n", -1.0, 1.0);
  check_fd (HDR1 "  t0 = ltorch.gelu(x, approximate='none')" T34 "  return (t0,)\n", -1.0, 1.0);
  check_fd (HDR1 "  t0 = ltorch.sigmoid(x)" T34 "  return (t0,)\n", -1.0, 1.0);
  check_fd (HDR1 "  t0 = ltorch.relu(x, False)" T34 "  return (t0,)\n", -1.0, 1.0);
  check_fd (HDR1 "  t0 = ltorch.mean(x, 1, False, dtype=None)  # t0: \"cuda:0 f64[3]\"\n"
            "  return (t0,)\n", -1.0, 1.0);
  check_fd ("def computation(x, w, b):\n  # x: \"cuda:0 f64[3, 4]\"\n  # w: \"cuda:0 f64[4]\"\n"
            "  # b: \"cuda:0 f64[4]\"\n"
            "  t0 = ltorch.layer_norm(x, (4,), w, b, 1e-05)" T34 "  return (t0,)\n", -1.0, 1.0);
  check_fd ("def computation(x, w):\n  # x: \"cuda:0 f64[3, 4]\"\n  # w: \"cuda:0 f64[4]\"\n"
            "  t0 = ltorch.rms_norm(x, (4,), w, 1e-06)" T34 "  return (t0,)\n", -1.0, 1.0);
}

static void
test_fd_cross_entropy (void)
{
  const char * const xonly[] = { "x", NULL };
  check_fd_full ("def computation(x, t):\n  # x: \"cuda:0 f64[3, 4]\"\n  # t: \"cuda:0 i64[3]\"\n"
                 "  t0 = ltorch.cross_entropy(x, t, None, None, -100, None, 'mean', 0.0)"
                 "  # t0: \"cuda:0 f64[]\"\n  return (t0,)\n", -1.0, 1.0, 1e-6, xonly);
}

static void
test_fd_sdpa (void)
{
  check_fd ("def computation(q, k, v):\n  # q: \"cuda:0 f64[1, 2, 3, 4]\"\n  # k: \"cuda:0 f64[1, 2, 3, 4]\"\n"
            "  # v: \"cuda:0 f64[1, 2, 3, 4]\"\n"
            "  t0 = ltorch.scaled_dot_product_attention(q, k, v, None, 0.0, True, scale=None)"
            "  # t0: \"cuda:0 f64[1, 2, 3, 4]\"\n  return (t0,)\n", -1.0, 1.0);
}

/* f64 versions of the bundled samples: the whole-trace gradients */
static char *
to_f64 (const char *text)
{
  g_autoptr(GString) s = g_string_new (text);
  g_string_replace (s, "bf16[", "f64[", 0);
  g_string_replace (s, "f32[", "f64[", 0);
  g_string_replace (s, "dtypes.bfloat16", "dtypes.float64", 0);
  g_string_replace (s, "dtypes.float32", "dtypes.float64", 0);
  return g_string_free (g_steal_pointer (&s), FALSE);
}

static void
check_fd_file (const char *dir, const char *file)
{
  g_autofree char *path = dir ? g_build_filename (dir, file, NULL) : NULL;
  g_autofree char *text = NULL;
  g_autofree char *f64 = NULL;

  if (path == NULL || !g_file_get_contents (path, &text, NULL, NULL))
    {
      g_test_skip ("shared traces not present");
      return;
    }
  f64 = to_f64 (text);
  check_fd (f64, -1.0, 1.0);
}

static void
check_fd_shared (const char *file)
{
  check_fd_file (g_getenv ("CS_SHARED_TRACES"), file);
}

static void
check_fd_data (const char *file)
{
  check_fd_file (g_getenv ("CS_DATA_DIR"), file);
}

static void
test_fd_seed (void)
{
  g_autofree char *f64 = to_f64 (seed_text);
  check_fd (f64, -1.0, 1.0);
}

/* Two outputs, one feeding the other: the gradient of t0 is its cotangent plus what flows back
 * from t1 (Thunder: get_grad then ltorch.add); both get_grads are grouped where the backward
 * starts; the f64 gradients match central differences. */
static void
test_multi_output (void)
{
  static const char text[] =
    "def computation(x, y):\n  # x: \"cuda:0 f64[3, 4]\"\n  # y: \"cuda:0 f64[3, 4]\"\n"
    "  t0 = prims.mul(x, y)  # t0: \"cuda:0 f64[3, 4]\"\n"
    "  t1 = prims.exp(t0)  # t1: \"cuda:0 f64[3, 4]\"\n"
    "  t2 = prims.mul(t1, x)  # t2: \"cuda:0 f64[3, 4]\"\n"
    "  return (t2, t0)\n";
  g_autoptr(CsTrace) init = parse_or_die (text);
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTrace) joint = cs_grad_joint (init, NULL, &error);
  guint first, n_get = 0, n_add = 0;

  g_assert_no_error (error);
  first = first_get_grad (joint);
  for (guint i = first; i < joint->n_stmts; i++)
    {
      CsStmt *s = joint->stmts[i];
      if (s->kind != CS_STMT_CALL)
        continue;
      if (s->op->id == CS_OP_PRIM_GET_GRAD)
        {
          g_assert_cmpuint (i, ==, first + n_get);   /* grouped */
          n_get++;
        }
      n_add += s->op->id == CS_OP_LTORCH_ADD;
    }
  g_assert_cmpuint (n_get, ==, 2);
  g_assert_cmpuint (n_add, >=, 2);   /* t0's grad = cotangent + from t1; x's grad: two uses */
  check_fd (text, -1.0, 1.0);
}

/* elementwise=native: the forward decomposition follows the policy (no f32 upcasts) */
static void
test_policy_native (void)
{
  g_autoptr(CsTrace) init = parse_or_die (seed_text);
  g_autoptr(GError) error = NULL;
  CsPolicy pol;
  CsGradSpec spec = { .all_float = TRUE, .policy = &pol };
  g_autoptr(CsTrace) dflt = cs_grad_joint (init, NULL, &error);
  g_autoptr(CsTrace) native = NULL;
  guint n_cvt_d = 0, n_cvt_n = 0;

  g_assert_no_error (error);
  cs_policy_init_default (&pol);
  g_assert_true (cs_policy_set (&pol, "elementwise", "native", &error));
  native = cs_grad_joint (init, &spec, &error);
  g_assert_no_error (error);
  for (guint i = 0; i < first_get_grad (dflt); i++)
    n_cvt_d += dflt->stmts[i]->kind == CS_STMT_CALL
               && dflt->stmts[i]->op->id == CS_OP_PRIM_CONVERT_ELEMENT_TYPE;
  for (guint i = 0; i < first_get_grad (native); i++)
    n_cvt_n += native->stmts[i]->kind == CS_STMT_CALL
               && native->stmts[i]->op->id == CS_OP_PRIM_CONVERT_ELEMENT_TYPE;
  g_assert_cmpuint (n_cvt_d, ==, 3);   /* a -> f32, b -> f32, sum -> bf16 */
  g_assert_cmpuint (n_cvt_n, ==, 0);
}

/* amax with ties: the gradient is shared evenly among the maxima (Thunder's
 * grad_chooser_backward), which central differences cannot see; values by hand. */
static void
test_amax_ties (void)
{
  static const char text[] =
    "def computation(x):\n  # x: \"cuda:0 f64[2, 4]\"\n"
    "  t0 = prims.amax(x, (1,))  # t0: \"cuda:0 f64[2]\"\n  return (t0,)\n";
  static const double xv[8] = { 1, 3, 3, 2,   5, -1, 5, 5 };
  static const double gv[2] = { 2.0, 3.0 };
  static const double want[8] = { 0, 1, 1, 0,   1, 0, 1, 1 };
  static const int64_t xs[2] = { 2, 4 }, gs[1] = { 2 };
  g_autoptr(CsTrace) init = parse_or_die (text);
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTrace) joint = cs_grad_joint (init, NULL, &error);
  g_autoptr(CsTrace) dj = NULL;
  g_autoptr(GHashTable) env = cs_ref_env_new ();
  g_autoptr(GHashTable) ret = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
                                                      (GDestroyNotify) cs_tensor_unref);
  g_autoptr(GPtrArray) outs = NULL;
  g_autoptr(CsTensor) x = cs_tensor_new_from_f64 (CS_DTYPE_F64, xs, 2, xv, NULL);
  g_autoptr(CsTensor) g = cs_tensor_new_from_f64 (CS_DTYPE_F64, gs, 1, gv, NULL);
  CsValue *grads;
  CsTensor *gx;
  gboolean ok;

  g_assert_no_error (error);
  dj = cs_decompose_trace (joint, NULL, &error);
  g_assert_no_error (error);
  cs_ref_env_insert (env, "x", x);
  for (guint i = 0; i < dj->n_stmts; i++)
    if (dj->stmts[i]->kind == CS_STMT_CALL && dj->stmts[i]->op->id == CS_OP_PRIM_GET_GRAD)
      cs_ref_env_insert (env, cs_stmt_get_output (dj->stmts[i])->name, g);
  ok = cs_ref_run_env (dj, env, CS_REF_F64, 0, &outs, NULL, ret, &error);
  g_assert_no_error (error);
  g_assert_true (ok);
  grads = dict_get (cs_trace_get_return (dj)->value, "output");
  gx = g_hash_table_lookup (ret, grads->u.seq.items[0]->u.proxy->name);
  g_assert_nonnull (gx);
  /* row 0: max 3 twice -> g/2 each = 1; row 1: max 5 three times -> g/3 each = 1 */
  for (guint i = 0; i < 8; i++)
    g_assert_cmpfloat_with_epsilon (cs_tensor_get_f64 (gx, i), want[i], 1e-15);
}

/* The types the VJP rules give every backward statement are the ones the meta pass infers
 * from its arguments (Thunder's meta functions). */
static void
check_backward_types (const CsTrace *init)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTrace) joint = cs_grad_joint (init, NULL, &error);
  guint n = 0;

  g_assert_no_error (error);
  for (guint i = first_get_grad (joint); i < joint->n_stmts; i++)
    {
      CsStmt *s = joint->stmts[i];
      CsMetaType mt[4];
      guint n_out = 0;
      CsProxy *p;
      if (s->kind != CS_STMT_CALL || (p = cs_stmt_get_output (s)) == NULL
          || s->op->id == CS_OP_PRIM_GET_GRAD)
        continue;
      if (!cs_meta_compute (joint, s, mt, G_N_ELEMENTS (mt), &n_out, &error))
        {
          CsOpId id = cs_op_semantic (s->op)->id;
          /* ops the meta pass does not know yet: their type is the input's (checked by the
           * FD tests once the reference runs them) */
          if (g_error_matches (error, CS_META_ERROR, CS_META_ERROR_UNSUPPORTED)
              && (id == CS_OP_PRIM_SCATTER_ADD || id == CS_OP_PRIM_INDEX_ADD
                  || id == CS_OP_LTORCH_EMBEDDING_BACKWARD))
            {
              g_test_message ("meta has no rule for %s yet", s->callee);
              g_clear_error (&error);
              continue;
            }
          g_error ("%s = %s: %s", p->name, s->callee, error->message);
        }
      g_assert_cmpuint (n_out, ==, 1);
      if (mt[0].dtype != p->dtype || mt[0].rank != p->rank
          || (p->rank > 0 && memcmp (mt[0].shape, p->shape, sizeof (int64_t) * p->rank) != 0))
        {
          g_autofree char *ours = cs_proxy_type_string (p);
          g_error ("%s = %s: grad typed it %s, meta says %s[rank %u]", p->name, s->callee, ours,
                   cs_dtype_short_name (mt[0].dtype), mt[0].rank);
        }
      n++;
    }
  g_assert_cmpuint (n, >, 0);
}

/* @dir_env: the environment variable naming the folder; @files: NULL-terminated.  Skipped
 * with the reason when the folder or a file is missing (../shared/traces in a clone without
 * it), never passed silently with fewer traces checked. */
static void
check_backward_types_in (const char *dir_env, const char * const *files)
{
  const char *dir = g_getenv (dir_env);

  for (guint k = 0; files[k]; k++)
    {
      g_autofree char *path = dir ? g_build_filename (dir, files[k], NULL) : NULL;
      g_autoptr(CsTraceList) list = NULL;
      g_autoptr(GError) error = NULL;

      if (path == NULL || !g_file_test (path, G_FILE_TEST_EXISTS))
        {
          g_autofree char *why = g_strdup_printf ("%s/%s not present", dir ? dir : dir_env,
                                                  files[k]);
          g_test_skip (why);
          return;
        }
      list = cs_parse_file (path, &error);
      g_assert_no_error (error);
      g_test_message ("%s", files[k]);
      check_backward_types (list->traces->pdata[0]);
    }
}

static void
test_backward_types_data (void)
{
  static const char * const data[] = { "seed_foo.txt", "mlp_gelu.txt", "attention_softmax.txt",
                                       "ln_mlp_residual.txt", "rmsnorm_swiglu.txt",
                                       "cross_entropy.txt", NULL };
  check_backward_types_in ("CS_DATA_DIR", data);
}

static void
test_backward_types_shared (void)
{
  static const char * const shared[] = { "thunder_a_seed_matmul_initial.txt",
                                         "thunder_b_mlp_gelu_initial.txt",
                                         "thunder_e_softmax_attention_initial.txt",
                                         "thunder_llama_stack_initial.txt", NULL };
  check_backward_types_in ("CS_SHARED_TRACES", shared);
}

/* a joint trace (it has get_grads) is not a forward: clear error with the line */
static void
test_error_joint_input (void)
{
  g_autoptr(CsTrace) init = parse_or_die (seed_text);
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTrace) joint = cs_grad_joint (init, NULL, &error);
  g_autofree char *text = NULL;
  g_autoptr(CsTrace) reparsed = NULL;
  g_autoptr(CsTrace) again = NULL;

  g_assert_no_error (error);
  text = cs_print_trace (joint, CS_PRINT_DEFAULT);
  reparsed = parse_or_die (text);
  again = cs_grad_joint (reparsed, NULL, &error);
  g_assert_null (again);
  g_assert_error (error, CS_GRAD_ERROR, CS_GRAD_ERROR_BAD_TRACE);
  g_assert_nonnull (strstr (error->message, "prims.get_grad"));
  g_assert_nonnull (strstr (error->message, "test:"));
}

/* An op without a VJP rule and an untyped output (t0): grad differentiates its decomposition,
 * which types t0.  The joint trace shares its input's proxies until then and starts over on a
 * deep copy, so the input's t0 stays untyped.  For f = (x + 2 w) * w with cotangent g:
 * df/dx = w * g (Thunder's mul VJP: ltorch.mul(w, g)), df/dw = t0 * g + 2 (w * g). */
static void
test_untyped_output (void)
{
  g_autoptr(CsTrace) init = parse_or_die (
    "def computation(x, w):\n"
    "  # x: \"cuda:0 f32[2, 2]\"\n"
    "  # w: \"cuda:0 f32[2, 2]\"\n"
    "  t0 = ltorch.add(x, w, alpha=2)\n"
    "  t1 = ltorch.mul(t0, w)  # t1: \"cuda:0 f32[2, 2]\"\n"
    "  return t1\n");
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTrace) joint = cs_grad_joint (init, NULL, &error);
  CsProxy *t0_in = cs_trace_lookup_proxy (init, "t0"), *t0 = NULL, *gx;
  CsValue *grads;
  CsStmt *def = NULL;

  g_assert_no_error (error);
  g_assert_nonnull (joint);
  t0 = cs_trace_lookup_proxy (joint, "t0");
  g_assert_nonnull (t0);
  g_assert_true (t0 != t0_in);
  g_assert_true (t0->typed);
  g_assert_cmpint (t0->dtype, ==, CS_DTYPE_F32);
  g_assert_cmpuint (t0->rank, ==, 2);
  g_assert_cmpint (t0->shape[0], ==, 2);
  g_assert_false (t0_in->typed);

  grads = dict_get (cs_trace_get_return (joint)->value, "output");
  g_assert_cmpuint (grads->u.seq.n, ==, 2);
  g_assert_cmpint (grads->u.seq.items[0]->kind, ==, CS_VALUE_PROXY);
  g_assert_cmpint (grads->u.seq.items[1]->kind, ==, CS_VALUE_PROXY);
  gx = grads->u.seq.items[0]->u.proxy;
  for (guint i = 0; i < joint->n_stmts && def == NULL; i++)
    if (cs_stmt_get_output (joint->stmts[i]) == gx)
      def = joint->stmts[i];
  g_assert_nonnull (def);
  g_assert_cmpint (cs_op_semantic (def->op)->id, ==, CS_OP_LTORCH_MUL);
  g_assert_cmpstr (def->args[0].value->u.proxy->name, ==, "w");
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/core/grad/seed/structure", test_seed_structure);
  g_test_add_func ("/core/grad/spec", test_spec);
  g_test_add_func ("/core/grad/untyped-output", test_untyped_output);
  g_test_add_func ("/core/grad/error/no-rule", test_no_rule);
  g_test_add_func ("/core/grad/error/joint-input", test_error_joint_input);
  g_test_add_func ("/core/grad/thunder/seed-counts", test_thunder_seed);
  g_test_add_func ("/core/grad/thunder/mlp-counts", test_thunder_mlp);
  g_test_add_func ("/core/grad/thunder/attention-counts", test_thunder_attention);
  g_test_add_func ("/core/grad/multi-output", test_multi_output);
  g_test_add_func ("/core/grad/policy/elementwise-native", test_policy_native);
  g_test_add_func ("/core/grad/amax-ties", test_amax_ties);
  g_test_add_func ("/core/grad/backward-types/data", test_backward_types_data);
  g_test_add_func ("/core/grad/backward-types/shared", test_backward_types_shared);
  g_test_add_func ("/core/grad/fd/seed", test_fd_seed);
  g_test_add_func ("/core/grad/fd/binary", test_fd_binary);
  g_test_add_func ("/core/grad/fd/unary", test_fd_unary);
  g_test_add_func ("/core/grad/fd/scalar-operands", test_fd_scalar);
  g_test_add_func ("/core/grad/fd/where", test_fd_where);
  g_test_add_func ("/core/grad/fd/shape", test_fd_shape);
  g_test_add_func ("/core/grad/fd/reductions", test_fd_reductions);
  g_test_add_func ("/core/grad/fd/matmul", test_fd_matmul);
  g_test_add_func ("/core/grad/fd/linear", test_fd_linear);
  g_test_add_func ("/core/grad/fd/take", test_fd_take);
  g_test_add_func ("/core/grad/fd/take-along-axis", test_fd_take_along_axis);
  g_test_add_func ("/core/grad/fd/embedding", test_fd_embedding);
  g_test_add_func ("/core/grad/fd/ltorch-rules", test_fd_ltorch_rules);
  g_test_add_func ("/core/grad/fd/decomposed", test_fd_decomposed);
  g_test_add_func ("/core/grad/fd/cross-entropy", test_fd_cross_entropy);
  g_test_add_func ("/core/grad/fd/sdpa", test_fd_sdpa);
  g_test_add_data_func ("/core/grad/fd/sample/mlp", "thunder_b_mlp_gelu_initial.txt",
                        (GTestDataFunc) check_fd_shared);
  g_test_add_data_func ("/core/grad/fd/sample/attention", "thunder_e_softmax_attention_initial.txt",
                        (GTestDataFunc) check_fd_shared);
  {
    static const char * const samples[] = { "seed_foo.txt", "mlp_gelu.txt", "attention_softmax.txt",
                                            "ln_mlp_residual.txt", "rmsnorm_swiglu.txt",
                                            "cross_entropy.txt" };
    for (guint i = 0; i < G_N_ELEMENTS (samples); i++)
      {
        g_autofree char *path = g_strdup_printf ("/core/grad/fd/data/%s", samples[i]);
        g_test_add_data_func (path, samples[i], (GTestDataFunc) check_fd_data);
      }
  }
  return g_test_run ();
}
