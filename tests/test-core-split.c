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
#include <math.h>
#include <string.h>

#include "cs-decompose.h"
#include "cs-grad.h"
#include "cs-ops.h"
#include "cs-parse.h"
#include "cs-print.h"
#include "cs-ref.h"
#include "cs-split.h"
#include "cs-tensor.h"
#include "test-duplicate-saved-trace.h"

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

/* Running the split traces gives the joint's gradients: forward (f64 CPU reference) -> its
 * returned saved tensors + the cotangents -> backward, compared with the joint run on the same
 * inputs.  Both are the same arithmetic, so they agree to rounding. */
static void
check_split_runs (const char *file)
{
  const char *dir = g_getenv ("CS_DATA_DIR");
  g_autofree char *path = dir ? g_build_filename (dir, file, NULL) : NULL;
  g_autoptr(CsTraceList) list = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTrace) joint = NULL;
  g_autoptr(CsTrace) djoint = NULL;
  g_autoptr(CsTrace) fw = NULL;
  g_autoptr(CsTrace) bw = NULL;
  g_autoptr(GPtrArray) inputs = NULL;
  g_autoptr(GHashTable) env = cs_ref_env_new ();
  g_autoptr(GHashTable) jret = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
                                                       (GDestroyNotify) cs_tensor_unref);
  g_autoptr(GHashTable) fret = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
                                                       (GDestroyNotify) cs_tensor_unref);
  g_autoptr(GPtrArray) jout = NULL;
  g_autoptr(GPtrArray) fout = NULL;
  g_autoptr(GPtrArray) bout = NULL;
  const CsStmt *jr, *br;
  gboolean ok;
  guint n_grads = 0;

  if (path == NULL || !g_file_test (path, G_FILE_TEST_EXISTS))
    {
      g_test_skip ("data/ samples not present");
      return;
    }
  list = cs_parse_file (path, &error);
  g_assert_no_error (error);
  joint = cs_grad_joint (list->traces->pdata[0], NULL, &error);
  g_assert_no_error (error);
  djoint = cs_decompose_trace (joint, NULL, &error);
  g_assert_no_error (error);
  g_assert_true (cs_split_forward_backward (djoint, &fw, &bw, &error));
  g_assert_no_error (error);
  g_assert_nonnull (bw);

  /* inputs (random, index inputs in range) and one cotangent per get_grad */
  inputs = cs_ref_dup_leaf_inputs (djoint);
  for (guint i = 0; i < inputs->len; i++)
    {
      g_autoptr(CsTensor) t = cs_ref_random_input (djoint, inputs->pdata[i], 7, &error);
      g_assert_no_error (error);
      cs_ref_env_insert (env, ((CsProxy *) inputs->pdata[i])->name, t);
    }
  ok = cs_ref_run_env (djoint, env, CS_REF_F64, 0, &jout, NULL, jret, &error);
  if (g_error_matches (error, CS_REF_ERROR, CS_REF_ERROR_UNSUPPORTED))
    {
      g_autofree char *msg = g_strdup_printf ("CPU reference: %s", error->message);
      g_test_skip (msg);
      return;
    }
  g_assert_no_error (error);
  g_assert_true (ok);
  ok = cs_ref_run_env (fw, env, CS_REF_F64, 0, &fout, NULL, fret, &error);
  g_assert_no_error (error);
  g_assert_true (ok);
  /* the backward reads the saved tensors by name (forward returns them) and the cotangents
   * (the joint's get_grad outputs, still in env) */
  {
    GHashTableIter it;
    gpointer k, v;
    g_hash_table_iter_init (&it, fret);
    while (g_hash_table_iter_next (&it, &k, &v))
      cs_ref_env_insert (env, k, v);
  }
  ok = cs_ref_run_env (bw, env, CS_REF_F64, 0, &bout, NULL, NULL, &error);
  g_assert_no_error (error);
  g_assert_true (ok);

  jr = cs_trace_get_return (djoint);
  br = cs_trace_get_return (bw);
  {
    const CsValue *jg = NULL;
    for (guint i = 0; i + 1 < jr->value->u.seq.n; i += 2)
      if (g_strcmp0 (jr->value->u.seq.items[i]->u.s, "output") == 0)
        jg = jr->value->u.seq.items[i + 1];
    g_assert_nonnull (jg);
    g_assert_cmpuint (jg->u.seq.n, ==, br->value->u.seq.n);
    g_assert_cmpuint (bout->len, ==, jg->u.seq.n);
    for (guint i = 0; i < jg->u.seq.n; i++)
      {
        CsTensor *b = bout->pdata[i];
        CsTensor *a;
        double max_d = 0, max_a = 0;
        if (jg->u.seq.items[i]->kind != CS_VALUE_PROXY)
          {
            g_assert_null (b);
            continue;
          }
        a = g_hash_table_lookup (jret, jg->u.seq.items[i]->u.proxy->name);
        g_assert_nonnull (a);
        g_assert_nonnull (b);
        g_assert_cmpint (a->numel, ==, b->numel);
        for (int64_t j = 0; j < a->numel; j++)
          {
            max_d = MAX (max_d, fabs (cs_tensor_get_f64 (a, j) - cs_tensor_get_f64 (b, j)));
            max_a = MAX (max_a, fabs (cs_tensor_get_f64 (a, j)));
          }
        g_assert_cmpfloat (max_a, >, 0.0);
        g_assert_cmpfloat (max_d, <=, 1e-12 * max_a);
        n_grads++;
      }
  }
  g_assert_cmpuint (n_grads, >, 0);
}

/* A number proxy the backward reads is saved in C1 (Thunder: saved_for_backward_other) */
static void
test_number_saved (void)
{
  static const char text[] =
    "def computation(x, f):\n"
    "  # x: \"cuda:0 f64[3]\"\n"
    "  # f: \"float 2.5\"\n"
    "  t0 = prims.mul(x, f)  # t0: \"cuda:0 f64[3]\"\n"
    "  return (t0,)\n";
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTrace) init = cs_parse_trace (text, "num", &error);
  g_autoptr(CsTrace) joint = NULL;
  g_autoptr(CsTrace) fw = NULL;
  g_autoptr(CsTrace) bw = NULL;
  g_autoptr(GPtrArray) saved = NULL;
  g_autofree char *btext = NULL;
  guint n_other = 0;
  const CsValue *pair;

  g_assert_no_error (error);
  joint = cs_grad_joint (init, NULL, &error);
  g_assert_no_error (error);
  g_assert_true (cs_split_forward_backward (joint, &fw, &bw, &error));
  saved = saved_of (fw, &n_other);
  g_assert_cmpuint (saved->len, ==, 0);
  g_assert_cmpuint (n_other, ==, 1);
  pair = cs_trace_get_return (fw)->value->u.seq.items[1];
  g_assert_cmpstr (pair->u.seq.items[1]->u.seq.items[0]->u.proxy->name, ==, "f");
  btext = cs_print_trace (bw, CS_PRINT_NO_SUBS);
  g_assert_nonnull (strstr (btext, "  f, = C1\n  # f: \"float 2.5\"\n"));
  g_assert_nonnull (strstr (btext, ", None)\n"));   /* f gets no gradient */
}

/* lightning-thunder#1501: a value saved for the backward under several names.  nvFuser's CSE
 * works per region, so the f32 cast of x made in both regions is saved twice (t0 and t3); t1
 * and t4 are different values (neg and exp of it), and the bf16 weight w is saved once. */
static void
test_duplicate_saved (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTrace) fw = cs_parse_trace (duplicate_saved_trace, "dup", &error);
  g_autoptr(GPtrArray) dups = NULL;
  const CsSavedDuplicate *d;

  g_assert_no_error (error);
  dups = cs_split_duplicate_saved (fw);
  g_assert_cmpuint (dups->len, ==, 1);
  d = g_ptr_array_index (dups, 0);
  g_assert_cmpuint (d->saved->len, ==, 2);
  g_assert_cmpstr (((CsProxy *) d->saved->pdata[0])->name, ==, "t0");
  g_assert_cmpstr (((CsProxy *) d->saved->pdata[1])->name, ==, "t3");
  g_assert_nonnull (d->producer);
  g_assert_cmpstr (d->producer->callee, ==, "prims.convert_element_type");
  g_assert_cmpuint (d->extra_bytes, ==, 4 * 8 * 4);   /* one more f32[4, 8] */
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/core/split/seed", test_seed);
  g_test_add_func ("/core/split/duplicate-saved", test_duplicate_saved);
  g_test_add_func ("/core/split/no-grad", test_no_grad);
  g_test_add_func ("/core/split/number-saved", test_number_saved);
  g_test_add_func ("/core/split/error/not-joint", test_not_joint);
  g_test_add_func ("/core/split/thunder/fused-seed", test_thunder_fused_seed);
  g_test_add_func ("/core/split/thunder/fused-mlp", test_thunder_fused_mlp);
  g_test_add_func ("/core/split/thunder/fused-mlp-linear", test_thunder_fused_mlp_linear);
  g_test_add_func ("/core/split/thunder/types-seed", test_thunder_types_seed);
  g_test_add_func ("/core/split/thunder/types-mlp", test_thunder_types_mlp);
  g_test_add_func ("/core/split/thunder/types-attention", test_thunder_types_attention);
  {
    static const char * const samples[] = { "seed_foo.txt", "mlp_gelu.txt", "attention_softmax.txt",
                                            "ln_mlp_residual.txt", "rmsnorm_swiglu.txt",
                                            "cross_entropy.txt" };
    for (guint i = 0; i < G_N_ELEMENTS (samples); i++)
      {
        g_autofree char *tp = g_strdup_printf ("/core/split/run/%s", samples[i]);
        g_test_add_data_func (tp, samples[i], (GTestDataFunc) check_split_runs);
      }
  }
  return g_test_run ();
}
