/* test-core-split.c: cs_split_forward_backward.
 *
 * - Thunder's own fused joint traces (thunder_nvfuser_*_fused_joint.txt) split into exactly the
 *   saved_for_backward Thunder printed in the matching *_final_fwd.txt (names and order);
 * - our joints of the unfused samples (executors=["torch"]) save tensors of the same types, in
 *   the same order, as Thunder's final forward traces;
 * - the backward's signature, unpacks, detail comments and return.
 */
#include "cs-config.h"

#include <glib.h>
#include <string.h>

#include "cs-grad.h"
#include "cs-ops.h"
#include "cs-parse.h"
#include "cs-print.h"
#include "cs-split.h"

static const char seed_text[] =
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
  return cs_trace_ref (list->traces->pdata[0]);
}

/* The saved tensors (C0) named by a forward trace's `return {...}, ((C0), (C1))`. */
static GPtrArray *
saved_of (const CsTrace *fw, guint *n_other)
{
  const CsStmt *r = cs_trace_get_return (fw);
  const CsValue *v = r->value, *pair;
  GPtrArray *out = g_ptr_array_new ();

  g_assert_cmpint (v->kind, ==, CS_VALUE_TUPLE);
  g_assert_cmpuint (v->u.seq.n, ==, 2);
  pair = v->u.seq.items[1];
  g_assert_cmpint (pair->kind, ==, CS_VALUE_TUPLE);
  g_assert_cmpuint (pair->u.seq.n, ==, 2);
  cs_value_collect_proxies (pair->u.seq.items[0], out);
  if (n_other)
    *n_other = pair->u.seq.items[1]->u.seq.n;
  return out;
}

static char *
names_of (GPtrArray *ps)
{
  GString *s = g_string_new (NULL);

  for (guint i = 0; i < ps->len; i++)
    g_string_append_printf (s, "%s%s", i ? ", " : "", ((CsProxy *) ps->pdata[i])->name);
  return g_string_free (s, FALSE);
}

static char *
types_of (GPtrArray *ps)
{
  GString *s = g_string_new (NULL);

  for (guint i = 0; i < ps->len; i++)
    {
      g_autofree char *t = cs_proxy_type_string (ps->pdata[i]);
      g_string_append_printf (s, "%s%s", i ? ", " : "", t);
    }
  return g_string_free (s, FALSE);
}

static void
test_seed (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTrace) init = cs_parse_trace (seed_text, "seed", &error);
  g_autoptr(CsTrace) joint = NULL;
  g_autoptr(CsTrace) fw = NULL;
  g_autoptr(CsTrace) bw = NULL;
  g_autoptr(GPtrArray) saved = NULL;
  g_autofree char *names = NULL;
  g_autofree char *btext = NULL;
  g_autofree char *ftext = NULL;
  guint n_other = 99;
  const CsStmt *r;

  g_assert_no_error (error);
  joint = cs_grad_joint (init, NULL, &error);
  g_assert_no_error (error);
  g_assert_true (cs_split_forward_backward (joint, &fw, &bw, &error));
  g_assert_no_error (error);
  g_assert_nonnull (fw);
  g_assert_nonnull (bw);

  /* Thunder saves ((w, a + b), ()) for the seed (thunder_a_seed_matmul_final_fwd.txt) */
  saved = saved_of (fw, &n_other);
  names = names_of (saved);
  g_assert_cmpstr (names, ==, "w, t4");
  g_assert_cmpuint (n_other, ==, 0);
  {
    g_autoptr(GPtrArray) again = cs_split_dup_saved (fw);
    g_assert_cmpuint (again->len, ==, 2);
  }

  /* forward: no backward statement, no get_grad */
  for (guint i = 0; i < fw->n_stmts; i++)
    if (fw->stmts[i]->kind == CS_STMT_CALL)
      {
        g_assert_cmpint (fw->stmts[i]->backward, ==, 0);
        g_assert_cmpint (fw->stmts[i]->op->id, !=, CS_OP_PRIM_GET_GRAD);
        g_assert_cmpint (fw->stmts[i]->op->id, !=, CS_OP_LTORCH_SUM);
      }
  g_assert_cmpstr (fw->name, ==, "computation");

  /* backward: signature, unpacks with detail comments, one grad per flat input */
  g_assert_cmpstr (bw->name, ==, "backward_fn");
  g_assert_cmpuint (bw->n_params, ==, 2);
  g_assert_cmpstr (bw->params[0].name, ==, "saved_for_backward");
  g_assert_cmpstr (bw->params[1].name, ==, "cotangents");
  btext = cs_print_trace (bw, CS_PRINT_NO_SUBS);
  g_assert_nonnull (strstr (btext, "def backward_fn(saved_for_backward, cotangents):\n"));
  g_assert_nonnull (strstr (btext, "  C0, C1, = saved_for_backward\n  # C0: \"Collection\"\n"
                                   "  # C1: \"Collection\"\n"));
  g_assert_nonnull (strstr (btext, "  w, t4, = C0\n  # w: \"cuda:0 bf16[16, 16]\"\n"
                                   "  # t4: \"cuda:0 bf16[8, 16]\"\n"));
  g_assert_nonnull (strstr (btext, ", = cotangents\n"));
  r = cs_trace_get_return (bw);
  g_assert_cmpint (r->value->kind, ==, CS_VALUE_TUPLE);
  g_assert_cmpuint (r->value->u.seq.n, ==, 3);
  for (guint i = 0; i < 3; i++)
    g_assert_cmpint (r->value->u.seq.items[i]->kind, ==, CS_VALUE_PROXY);
  /* two matmuls and one sum in the backward, none in the forward's body beyond the matmul */
  {
    guint mm = 0, sums = 0;
    for (guint i = 0; i < bw->n_stmts; i++)
      if (bw->stmts[i]->kind == CS_STMT_CALL)
        {
          CsOpId id = cs_op_semantic (bw->stmts[i]->op)->id;
          g_assert_cmpint (bw->stmts[i]->backward, ==, 1);
          mm += id == CS_OP_LTORCH_MATMUL;
          sums += id == CS_OP_LTORCH_SUM;
        }
    g_assert_cmpuint (mm, ==, 2);
    g_assert_cmpuint (sums, ==, 1);
  }
  /* both re-parse */
  ftext = cs_print_trace (fw, CS_PRINT_DEFAULT);
  {
    g_autoptr(CsTrace) f2 = cs_parse_trace (ftext, "fw", &error);
    g_assert_no_error (error);
    g_autoptr(CsTrace) b2 = cs_parse_trace (btext, "bw", &error);
    g_assert_no_error (error);
    g_assert_nonnull (f2);
    g_assert_nonnull (b2);
  }
}

static void
test_no_grad (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTrace) init = cs_parse_trace (seed_text, "seed", &error);
  CsGradSpec none = { .none = TRUE };
  g_autoptr(CsTrace) joint = cs_grad_joint (init, &none, &error);
  g_autoptr(CsTrace) fw = NULL;
  g_autoptr(CsTrace) bw = NULL;
  g_autoptr(GPtrArray) saved = NULL;

  g_assert_no_error (error);
  g_assert_true (cs_split_forward_backward (joint, &fw, &bw, &error));
  g_assert_null (bw);
  saved = saved_of (fw, NULL);
  g_assert_cmpuint (saved->len, ==, 0);
}

static void
test_not_joint (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTrace) init = cs_parse_trace (seed_text, "seed", &error);
  CsTrace *fw = (CsTrace *) 0x1, *bw = (CsTrace *) 0x1;

  g_assert_false (cs_split_forward_backward (init, &fw, &bw, &error));
  g_assert_error (error, CS_SPLIT_ERROR, CS_SPLIT_ERROR_NOT_JOINT);
  g_assert_null (fw);
  g_assert_null (bw);
}

/* Splitting Thunder's own fused joint gives Thunder's saved_for_backward, by name. */
static void
check_thunder_fused (const char *joint_file, const char *fwd_file)
{
  g_autoptr(CsTrace) joint = load_shared (joint_file);
  g_autoptr(CsTrace) theirs = load_shared (fwd_file);
  g_autoptr(CsTrace) fw = NULL;
  g_autoptr(CsTrace) bw = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) a = NULL;
  g_autoptr(GPtrArray) b = NULL;
  g_autofree char *na = NULL;
  g_autofree char *nb = NULL;

  if (joint == NULL || theirs == NULL)
    {
      g_test_skip ("shared traces not present");
      return;
    }
  g_assert_true (cs_split_forward_backward (joint, &fw, &bw, &error));
  g_assert_no_error (error);
  a = saved_of (fw, NULL);
  b = saved_of (theirs, NULL);
  na = names_of (a);
  nb = names_of (b);
  g_assert_cmpstr (na, ==, nb);
  /* every fusion region stays whole on one side */
  for (guint i = 0; i < bw->n_stmts; i++)
    if (bw->stmts[i]->kind == CS_STMT_CALL && cs_op_is_fusion (bw->stmts[i]->op))
      for (guint j = 0; j < fw->n_stmts; j++)
        if (fw->stmts[j]->kind == CS_STMT_CALL)
          g_assert_cmpstr (fw->stmts[j]->callee, !=, bw->stmts[i]->callee);
}

static void
test_thunder_fused_seed (void)
{
  check_thunder_fused ("thunder_nvfuser_a_seed_matmul_default_fused_joint.txt",
                       "thunder_nvfuser_a_seed_matmul_default_final_fwd.txt");
}

static void
test_thunder_fused_mlp (void)
{
  check_thunder_fused ("thunder_nvfuser_b_mlp_gelu_default_fused_joint.txt",
                       "thunder_nvfuser_b_mlp_gelu_default_final_fwd.txt");
}

static void
test_thunder_fused_mlp_linear (void)
{
  check_thunder_fused ("thunder_nvfuser_b_mlp_gelu_linear_matmul_fused_joint.txt",
                       "thunder_nvfuser_b_mlp_gelu_linear_matmul_final_fwd.txt");
}

/* Our joint of an unfused sample saves tensors of the types Thunder's torch-executor forward
 * saves, in the same order (names differ: Thunder renames in later passes). */
static void
check_thunder_types (const char *initial_file, const char *fwd_file)
{
  g_autoptr(CsTrace) init = load_shared (initial_file);
  g_autoptr(CsTrace) theirs = load_shared (fwd_file);
  g_autoptr(CsTrace) joint = NULL;
  g_autoptr(CsTrace) fw = NULL;
  g_autoptr(CsTrace) bw = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) a = NULL;
  g_autoptr(GPtrArray) b = NULL;
  g_autofree char *ta = NULL;
  g_autofree char *tb = NULL;

  if (init == NULL || theirs == NULL)
    {
      g_test_skip ("shared traces not present");
      return;
    }
  joint = cs_grad_joint (init, NULL, &error);
  g_assert_no_error (error);
  g_assert_true (cs_split_forward_backward (joint, &fw, &bw, &error));
  g_assert_no_error (error);
  a = saved_of (fw, NULL);
  b = saved_of (theirs, NULL);
  ta = types_of (a);
  tb = types_of (b);
  g_test_message ("ours: %s", ta);
  g_test_message ("Thunder: %s", tb);
  g_assert_cmpstr (ta, ==, tb);
}

static void
test_thunder_types_seed (void)
{
  check_thunder_types ("thunder_a_seed_matmul_initial.txt", "thunder_a_seed_matmul_final_fwd.txt");
}

static void
test_thunder_types_mlp (void)
{
  check_thunder_types ("thunder_b_mlp_gelu_initial.txt", "thunder_b_mlp_gelu_final_fwd.txt");
}

static void
test_thunder_types_attention (void)
{
  check_thunder_types ("thunder_e_softmax_attention_initial.txt",
                       "thunder_e_softmax_attention_final_fwd.txt");
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/core/split/seed", test_seed);
  g_test_add_func ("/core/split/no-grad", test_no_grad);
  g_test_add_func ("/core/split/error/not-joint", test_not_joint);
  g_test_add_func ("/core/split/thunder/fused-seed", test_thunder_fused_seed);
  g_test_add_func ("/core/split/thunder/fused-mlp", test_thunder_fused_mlp);
  g_test_add_func ("/core/split/thunder/fused-mlp-linear", test_thunder_fused_mlp_linear);
  g_test_add_func ("/core/split/thunder/types-seed", test_thunder_types_seed);
  g_test_add_func ("/core/split/thunder/types-mlp", test_thunder_types_mlp);
  g_test_add_func ("/core/split/thunder/types-attention", test_thunder_types_attention);
  return g_test_run ();
}
