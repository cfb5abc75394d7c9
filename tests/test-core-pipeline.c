/* test-core-pipeline.c: the whole pass pipeline (core/cs-pipeline.c) under cast policies, on
 * the shared Thunder traces: the seed's tensor-core question, fusion invariants on every
 * sample and policy, semantics (f64 reference; bf16 bit-exactness with redundant-casts=keep)
 * and Thunder's own nvFuser decisions (thunder_nvfuser_*).
 */
#include "cs-config.h"

#include <math.h>
#if CS_HAVE_JSON
#include <json-glib/json-glib.h>
#endif
#include <string.h>
#include <sys/wait.h>

#include "cs-autocast.h"
#include "cs-cse.h"
#include "cs-decompose.h"
#include "cs-dellast.h"
#include "cs-fuse.h"
#include "cs-fuse-private.h"
#include "cs-print.h"
#include "cs-grad.h"
#include "cs-diff.h"
#include "cs-pipeline.h"
#if defined(__has_include)
#if __has_include ("cs-ref.h")
#define HAVE_REF 1
#endif
#endif
#ifdef HAVE_REF
#include "cs-ref.h"
#endif
#include "cs-split.h"
#include "cs-stats.h"
#ifdef HAVE_REF
#include "cs-tensor.h"
#endif
#include "test-regions.h"

/* ---- helpers --------------------------------------------------------------------------- */

static const char *samples[] = {
  "data/seed_foo.txt",
  "data/mlp_gelu.txt",
  "data/ln_mlp_residual.txt",
  "data/rmsnorm_swiglu.txt",
  "data/attention_softmax.txt",
  "data/cross_entropy.txt",
  "thunder_a_seed_matmul_initial.txt",
  "thunder_b_mlp_gelu_initial.txt",
  "thunder_e_softmax_attention_initial.txt",
  "thunder_llama_stack_initial.txt",
};

/* Traces run forward only (--grad none); none at the moment (the LLaMA stack needed it until
 * the grad pass got prims.pad's VJP). */
static gboolean
sample_forward_only (const char *name)
{
  return FALSE;
}

static const char *policies[][3] = {
  { NULL },
  { "matmul=upcast-f32", NULL },
  { "elementwise=native", NULL },
  { "fusion=dataflow", NULL },
  { "fuse-matmul=on", "fuse-linear=on", NULL },
  { "redundant-casts=keep", NULL },
  { "autocast=bf16", NULL },
  { "fusion=off", NULL },
  { "fusion=dataflow", "matmul=upcast-f32", "fuse-linear=on" },
};

static void
policy_from (CsPolicy *p, const char * const *kv)
{
  cs_policy_init_default (p);
  for (guint i = 0; i < 3 && kv[i]; i++)
    g_assert_true (cs_policy_parse_assignment (p, kv[i], NULL));
}

static CsPipeline *
run (const CsTrace *t, const CsPolicy *p)
{
  g_autoptr(GError) error = NULL;
  CsGradSpec none = { FALSE, NULL, TRUE, NULL };
  CsPipeline *pl = cs_pipeline_run (t, p, (t->file && sample_forward_only (t->file)) ? &none : NULL,
                                    &error);
  g_assert_no_error (error);
  g_assert_nonnull (pl);
  return pl;
}

/* Every matmul prim (top level, inside composites and regions), depth first. */
static void
collect_matmuls (const CsStmt *s, GPtrArray *out)
{
  const CsOp *sem;
  if (s->kind != CS_STMT_CALL || s->op == NULL)
    return;
  sem = cs_op_semantic (s->op);
  if ((sem->id == CS_OP_PRIM_MATMUL || sem->id == CS_OP_PRIM_LINEAR) && (s->op->tags & CS_OP_TAG_PRIM))
    {
      g_ptr_array_add (out, (gpointer) s);
      return;
    }
  for (guint i = 0; i < s->n_subs; i++)
    collect_matmuls (s->subs[i], out);
}

static GPtrArray *
trace_matmuls (const CsTrace *t)
{
  GPtrArray *a = g_ptr_array_new ();
  for (guint i = 0; i < t->n_stmts; i++)
    collect_matmuls (t->stmts[i], a);
  return a;
}

/* Producer statement of every proxy (all levels). */
static void
index_producers (const CsStmt *s, GHashTable *prod)
{
  g_autoptr(GPtrArray) w = g_ptr_array_new ();
  _cs_stmt_writes (s, w);
  for (guint i = 0; i < w->len; i++)
    g_hash_table_insert (prod, w->pdata[i], (gpointer) s);
  for (guint i = 0; i < s->n_subs; i++)
    index_producers (s->subs[i], prod);
}

/* A bundled sample ("data/x.txt", from CS_DATA_DIR) or a shared trace. */
static CsTrace *
load_sample (const char *name)
{
  if (g_str_has_prefix (name, "data/"))
    {
      const char *dir = g_getenv ("CS_DATA_DIR");
      g_autofree char *path = NULL;
      g_autoptr(GError) error = NULL;
      g_autoptr(CsTraceList) list = NULL;
      if (dir == NULL)
        return NULL;
      path = g_build_filename (dir, name + 5, NULL);
      if (!g_file_test (path, G_FILE_TEST_EXISTS))
        return NULL;
      list = cs_parse_file (path, &error);
      g_assert_no_error (error);
      return cs_trace_ref (list->traces->pdata[0]);
    }
  return load_shared (name);
}

/* ---- the seed --------------------------------------------------------------------------- */

static void
check_seed_matmuls (const CsTrace *t, gboolean expect_f32)
{
  g_autoptr(GPtrArray) mms = trace_matmuls (t);
  g_autoptr(GHashTable) prod = g_hash_table_new (g_direct_hash, g_direct_equal);

  g_assert_cmpuint (mms->len, >=, 1);
  for (guint i = 0; i < t->n_stmts; i++)
    index_producers (t->stmts[i], prod);
  for (guint i = 0; i < mms->len; i++)
    {
      const CsStmt *m = mms->pdata[i];
      for (guint k = 0; k < 2; k++)
        {
          CsValue *v = cs_stmt_get_arg (m, k, NULL);
          const CsStmt *p;
          CsProxy *in;
          CsDtype to;
          g_assert_nonnull (v);
          g_assert_cmpint (v->kind, ==, CS_VALUE_PROXY);
          if (expect_f32)
            {
              g_assert_cmpint (v->u.proxy->dtype, ==, CS_DTYPE_F32);
              continue;
            }
          g_assert_cmpint (v->u.proxy->dtype, ==, CS_DTYPE_BF16);
          /* no convert_element_type to f32 (an upcast) feeds the matmul, and no cast at all
           * reads a matmul-adjacent f32 value to make this operand except the elementwise
           * region's own final downcast */
          p = g_hash_table_lookup (prod, v->u.proxy);
          if (p && _cs_stmt_is_cast (p, &in, &to))
            g_assert_cmpint (to, !=, CS_DTYPE_F32);
        }
    }
}

static void
test_seed_default (void)
{
  g_autoptr(CsTrace) t = load_shared ("thunder_a_seed_matmul_initial.txt");
  g_autoptr(CsPipeline) pl = NULL;
  g_autoptr(CsTraceStats) fs = NULL;
  g_autoptr(CsTraceStats) bs = NULL;
  CsPolicy p;

  if (t == NULL)
    {
      g_test_skip ("CS_SHARED_TRACES not available");
      return;
    }
  cs_policy_init_default (&p);
  pl = run (t, &p);
  g_assert_nonnull (cs_pipeline_get_backward (pl));
  check_seed_matmuls (cs_pipeline_get_forward (pl), FALSE);
  check_seed_matmuls (cs_pipeline_get_backward (pl), FALSE);
  fs = cs_stats_compute (cs_pipeline_get_forward (pl));
  bs = cs_stats_compute (cs_pipeline_get_backward (pl));
  /* forward: one matmul; backward: dA = g @ w^T, dW = (a+b)^T @ g */
  g_assert_cmpuint (fs->total.n_matmuls, ==, 1);
  g_assert_cmpuint (fs->total.n_tensor_core_matmuls, ==, 1);
  g_assert_cmpuint (bs->total.n_matmuls, ==, 2);
  g_assert_cmpuint (bs->total.n_tensor_core_matmuls, ==, 2);
  /* 2*8*16*16 FLOP per matmul */
  g_assert_cmpfloat (fs->total.flops, >=, 4096.0);
}

static void
test_seed_upcast (void)
{
  g_autoptr(CsTrace) t = load_shared ("thunder_a_seed_matmul_initial.txt");
  g_autoptr(CsPipeline) pl = NULL;
  g_autoptr(CsTraceStats) fs = NULL;
  g_autoptr(CsTraceStats) bs = NULL;
  g_autoptr(CsTraceStats) fd = NULL;
  g_autoptr(CsPipeline) pd = NULL;
  CsPolicy p;

  if (t == NULL)
    {
      g_test_skip ("CS_SHARED_TRACES not available");
      return;
    }
  cs_policy_init_default (&p);
  pd = run (t, &p);
  p.matmul = CS_MATMUL_UPCAST_F32;
  pl = run (t, &p);
  check_seed_matmuls (cs_pipeline_get_forward (pl), TRUE);
  check_seed_matmuls (cs_pipeline_get_backward (pl), TRUE);
  fs = cs_stats_compute (cs_pipeline_get_forward (pl));
  bs = cs_stats_compute (cs_pipeline_get_backward (pl));
  fd = cs_stats_compute (cs_pipeline_get_forward (pd));
  g_assert_cmpuint (fs->total.n_matmuls, ==, 1);
  g_assert_cmpuint (fs->total.n_tensor_core_matmuls, ==, 0);
  g_assert_cmpuint (bs->total.n_matmuls, ==, 2);
  g_assert_cmpuint (bs->total.n_tensor_core_matmuls, ==, 0);
  /* the upcast costs casts: more in the forward than with defaults */
  g_assert_cmpuint (fs->total.n_casts, >, fd->total.n_casts);
}

/* ---- invariants on every sample and policy --------------------------------------------- */

static void
check_no_straddle (const CsTrace *joint)
{
  for (guint i = 0; i < joint->n_stmts; i++)
    {
      const CsStmt *s = joint->stmts[i];
      if (!_cs_stmt_is_region (s))
        continue;
      /* a forward region holds no backward statement; a backward region may hold forward
       * ones rematerialization recomputes there (they keep their tag, as in Thunder) */
      for (guint k = 0; k < s->n_subs; k++)
        if (!s->backward)
          g_assert_false (s->subs[k]->backward);
    }
}

/* The incremental region refresh (regions left fresh are skipped) must give what a full
 * refresh of every region gives: rebuild @x's regions from scratch on a deep copy and compare
 * the printed traces. */
static void
check_refresh_is_full (const CsTrace *x, const char *what)
{
  g_autoptr(CsTrace) c = cs_trace_copy (x, NULL);
  g_autofree char *a = NULL, *b = NULL;

  for (guint i = 0; i < c->n_stmts; i++)
    c->stmts[i]->region_fresh = 0;
  _cs_regions_refresh (c, FALSE);
  a = cs_print_trace (x, 0);
  b = cs_print_trace (c, 0);
  if (strcmp (a, b) != 0)
    g_error ("%s: a full region refresh changes the trace:\n%s\n---- vs ----\n%s", what, a, b);
}

static void
test_invariants (void)
{
  guint n_runs = 0;

  for (guint si = 0; si < G_N_ELEMENTS (samples); si++)
    {
      g_autoptr(CsTrace) t = load_sample (samples[si]);
      if (t == NULL)
        {
          g_test_message ("%s not available", samples[si]);
          continue;
        }
      for (guint pi = 0; pi < G_N_ELEMENTS (policies); pi++)
        {
          g_autoptr(CsPipeline) pl = NULL;
          g_autoptr(GError) error = NULL;
          CsPolicy p;
          const char *names[] = { "fuse", "remove-redundant-casts", "cse", "dce" };

          policy_from (&p, policies[pi]);
          pl = run (t, &p);
          for (guint k = 0; k < G_N_ELEMENTS (names); k++)
            {
              CsTrace *x = cs_pipeline_find_trace (pl, names[k]);
              g_assert_nonnull (x);
              if (!cs_fuse_check_invariants (x, &error))
                g_error ("%s, policy %u, pass %s: %s", samples[si], pi, names[k], error->message);
              check_no_straddle (x);
              /* remove-redundant-casts refreshes no region: it leaves the casts it rewired
               * unread for cse (Thunder's remove_redundant_casts leaves them to
               * nvFuserExecutor.cse, dce and update_fusion_call_ctx) */
              if (k != 1)
                {
                  g_autofree char *what = g_strdup_printf ("%s, policy %u, pass %s", samples[si],
                                                           pi, names[k]);
                  check_refresh_is_full (x, what);
                }
              if (p.fusion == CS_FUSION_OFF)
                g_assert_cmpuint (cs_fuse_count_regions (x), ==, 0);
            }
          if (!cs_fuse_check_invariants (cs_pipeline_get_forward (pl), &error))
            g_error ("%s, policy %u, forward: %s", samples[si], pi, error->message);
          if (cs_pipeline_get_backward (pl)
              && !cs_fuse_check_invariants (cs_pipeline_get_backward (pl), &error))
            g_error ("%s, policy %u, backward: %s", samples[si], pi, error->message);
          n_runs++;
        }
    }
  if (n_runs == 0)
    g_test_skip ("no sample traces available");
  g_assert_cmpuint (n_runs % G_N_ELEMENTS (policies), ==, 0);
}

/* ---- semantics ------------------------------------------------------------------------- */

#ifdef HAVE_REF
/* Random inputs for every leaf input of @t, by name. */
static GHashTable *
random_env (const CsTrace *t, guint64 seed)
{
  GHashTable *env = cs_ref_env_new ();
  g_autoptr(GPtrArray) leaves = cs_ref_dup_leaf_inputs (t);
  for (guint i = 0; i < leaves->len; i++)
    {
      g_autoptr(GError) error = NULL;
      CsProxy *p = leaves->pdata[i];
      g_autoptr(CsTensor) x = cs_ref_random_input (t, p, seed, &error);
      g_assert_no_error (error);
      cs_ref_env_insert (env, p->name, x);   /* the env takes its own reference */
    }
  return env;
}

static double
max_rel_diff (const CsTensor *a, const CsTensor *b)
{
  g_autofree double *x = cs_tensor_dup_f64 (a);
  g_autofree double *y = cs_tensor_dup_f64 (b);
  gsize n = cs_tensor_nbytes (a) / cs_dtype_size_bytes (a->dtype);
  double worst = 0;
  g_assert_cmpuint (cs_tensor_nbytes (a) / cs_dtype_size_bytes (a->dtype), ==,
                    cs_tensor_nbytes (b) / cs_dtype_size_bytes (b->dtype));
  for (gsize i = 0; i < n; i++)
    {
      double d = fabs (x[i] - y[i]) / MAX (1.0, fabs (x[i]));
      if (isnan (x[i]) != isnan (y[i]))
        return INFINITY;
      worst = MAX (worst, d);
    }
  return worst;
}

static gboolean
small_enough (const CsTrace *t)
{
  g_autoptr(GPtrArray) leaves = cs_ref_dup_leaf_inputs (t);
  double total = 0;
  for (guint i = 0; i < leaves->len; i++)
    {
      CsProxy *p = leaves->pdata[i];
      if (p->kind == CS_PROXY_TENSOR)
        total += (double) cs_shape_numel (p->shape, p->rank);
    }
  return total < 4e6;
}

static void
test_semantics_f64 (void)
{
  guint n_checked = 0;

  for (guint si = 0; si < G_N_ELEMENTS (samples); si++)
    {
      g_autoptr(CsTrace) t = load_sample (samples[si]);
      g_autoptr(GHashTable) env = NULL;
      g_autoptr(GPtrArray) ref = NULL;
      g_autoptr(GError) error = NULL;

      if (t == NULL)
        continue;
      if (!small_enough (t))
        {
          g_test_message ("%s: too large for the f64 reference in a test, skipped", samples[si]);
          continue;
        }
      env = random_env (t, 7);
      if (!cs_ref_run_env (t, env, CS_REF_F64, 0, &ref, NULL, NULL, &error))
        {
          /* a bundled sample without printed subsymbols: its decomposition (default policy)
           * is the reference; in f64 every policy's decomposition computes the same values */
          g_autoptr(CsTrace) d = cs_decompose_trace (t, NULL, NULL);
          g_assert_nonnull (d);
          g_clear_error (&error);
          if (!cs_ref_run_env (d, env, CS_REF_F64, 0, &ref, NULL, NULL, &error))
            g_error ("%s: reference run: %s", samples[si], error->message);
        }
      for (guint pi = 0; pi < G_N_ELEMENTS (policies); pi++)
        {
          g_autoptr(CsPipeline) pl = NULL;
          g_autoptr(GPtrArray) outs = NULL;
          CsPolicy p;

          policy_from (&p, policies[pi]);
          pl = run (t, &p);
          if (!cs_ref_run_env (cs_pipeline_get_forward (pl), env, CS_REF_F64, 0, &outs, NULL,
                               NULL, &error))
            g_error ("%s, policy %u: %s", samples[si], pi, error->message);
          /* the forward returns {'output': <the initial outputs>, ...}: the first outputs */
          g_assert_cmpuint (outs->len, >=, ref->len);
          for (guint k = 0; k < ref->len; k++)
            {
              double d;
              if (ref->pdata[k] == NULL)
                continue;
              d = max_rel_diff (ref->pdata[k], outs->pdata[k]);
              if (d > 1e-9)
                g_error ("%s, policy %u: output %u differs from the initial trace by %g (f64)",
                         samples[si], pi, k, d);
            }
          n_checked++;
        }
    }
  g_assert_cmpuint (n_checked, >, 0);
}

/* redundant-casts=keep: the fused joint (every pass through DCE) computes, bit for bit in the
 * bf16-exact reference, what the unfused decomposed joint computes. */
static void
test_keep_bit_exact (void)
{
  guint n_checked = 0;

  for (guint si = 0; si < G_N_ELEMENTS (samples); si++)
    {
      g_autoptr(CsTrace) t = load_sample (samples[si]);
      g_autoptr(CsPipeline) pl = NULL;
      g_autoptr(GHashTable) env = NULL;
      g_autoptr(GPtrArray) a = NULL;
      g_autoptr(GPtrArray) b = NULL;
      g_autoptr(GError) error = NULL;
      CsTrace *dec, *fused;
      CsPolicy p;

      if (t == NULL)
        continue;
      if (!small_enough (t))
        continue;
      cs_policy_init_default (&p);
      p.redundant_casts = CS_REDUNDANT_CASTS_KEEP;
      pl = run (t, &p);
      dec = cs_pipeline_find_trace (pl, "decompose");
      fused = cs_pipeline_find_trace (pl, "dce");
      env = random_env (dec, 11);
      if (!cs_ref_run_env (dec, env, CS_REF_EXACT, 0, &a, NULL, NULL, &error))
        {
          if (g_error_matches (error, CS_REF_ERROR, CS_REF_ERROR_UNSUPPORTED))
            {
              /* e.g. cross_entropy's backward needs prims.scatter_add, which the CPU
               * reference does not have yet */
              g_test_message ("%s: not checked: %s", samples[si], error->message);
              continue;
            }
          g_error ("%s decomposed: %s", samples[si], error->message);
        }
      n_checked++;
      if (!cs_ref_run_env (fused, env, CS_REF_EXACT, 0, &b, NULL, NULL, &error))
        g_error ("%s fused: %s", samples[si], error->message);
      g_assert_cmpuint (a->len, ==, b->len);
      for (guint k = 0; k < a->len; k++)
        {
          const CsTensor *x = a->pdata[k], *y = b->pdata[k];
          if (x == NULL || y == NULL)
            {
              g_assert_true (x == y);
              continue;
            }
          g_assert_cmpint (x->dtype, ==, y->dtype);
          g_assert_cmpuint (cs_tensor_nbytes (x), ==, cs_tensor_nbytes (y));
          g_assert_cmpmem (x->data, cs_tensor_nbytes (x), y->data, cs_tensor_nbytes (y));
        }
    }
  g_assert_cmpuint (n_checked, >, 0);

  /* the check is sharp: with redundant-casts=remove the GELU MLP's f32->bf16->f32 chains
   * inside its region collapse, the bf16 roundings go, and the bits change */
  {
    g_autoptr(CsTrace) t = load_sample ("data/mlp_gelu.txt");
    g_autoptr(CsPipeline) pl = NULL;
    g_autoptr(GHashTable) env = NULL;
    g_autoptr(GPtrArray) a = NULL;
    g_autoptr(GPtrArray) b = NULL;
    gboolean differ = FALSE;
    CsPolicy p;

    if (t == NULL)
      return;
    cs_policy_init_default (&p);
    pl = run (t, &p);
    env = random_env (cs_pipeline_find_trace (pl, "decompose"), 11);
    g_assert_true (cs_ref_run_env (cs_pipeline_find_trace (pl, "decompose"), env, CS_REF_EXACT, 0,
                                   &a, NULL, NULL, NULL));
    g_assert_true (cs_ref_run_env (cs_pipeline_find_trace (pl, "dce"), env, CS_REF_EXACT, 0, &b,
                                   NULL, NULL, NULL));
    for (guint k = 0; k < a->len && !differ; k++)
      {
        const CsTensor *x = a->pdata[k], *y = b->pdata[k];
        if (x && y && cs_tensor_nbytes (x) == cs_tensor_nbytes (y))
          differ = memcmp (x->data, y->data, cs_tensor_nbytes (x)) != 0;
      }
    g_assert_true (differ);
  }
}

#else
static void
test_semantics_f64 (void)
{
  g_test_skip ("the CPU reference executor (core/cs-ref.h) is not in this tree");
}

static void
test_keep_bit_exact (void)
{
  g_test_skip ("the CPU reference executor (core/cs-ref.h) is not in this tree");
}
#endif

/* ---- Thunder's nvFuser decisions, from the initial trace -------------------------------- */

static char *
saved_signature (const CsTrace *fw)
{
  g_autoptr(GPtrArray) saved = cs_split_dup_saved (fw);
  g_autoptr(GPtrArray) types = g_ptr_array_new_with_free_func (g_free);
  for (guint i = 0; i < saved->len; i++)
    g_ptr_array_add (types, cs_proxy_type_string (saved->pdata[i]));
  return sorted_join (types);
}

static void
compare_final (const char *initial, const char *fwd_file, const char *bwd_file, gboolean mm)
{
  g_autoptr(CsTrace) t = load_shared (initial);
  g_autoptr(CsTrace) tf = NULL;
  g_autoptr(CsTrace) tb = NULL;
  g_autoptr(CsPipeline) pl = NULL;
  g_autofree char *ours_saved = NULL;
  g_autofree char *thunder_saved = NULL;
  CsPolicy p;

  if (t == NULL)
    {
      g_test_skip ("CS_SHARED_TRACES not available");
      return;
    }
  tf = load_shared (fwd_file);
  tb = load_shared (bwd_file);
  cs_policy_init_default (&p);
  p.fuse_matmul = mm;
  p.fuse_linear = mm;
  pl = run (t, &p);
  assert_same_regions (cs_pipeline_get_forward (pl), tf);
  ours_saved = saved_signature (cs_pipeline_get_forward (pl));
  thunder_saved = saved_signature (tf);
  g_assert_cmpstr (ours_saved, ==, thunder_saved);
  assert_same_regions (cs_pipeline_get_backward (pl), tb);
}

static void
test_thunder_seed_default (void)
{
  compare_final ("thunder_a_seed_matmul_initial.txt",
                 "thunder_nvfuser_a_seed_matmul_default_final_fwd.txt",
                 "thunder_nvfuser_a_seed_matmul_default_final_bwd.txt", FALSE);
}

static void
test_thunder_seed_linear_matmul (void)
{
  compare_final ("thunder_a_seed_matmul_initial.txt",
                 "thunder_nvfuser_a_seed_matmul_linear_matmul_final_fwd.txt",
                 "thunder_nvfuser_a_seed_matmul_linear_matmul_final_bwd.txt", TRUE);
}

static void
test_thunder_mlp_default (void)
{
  compare_final ("thunder_b_mlp_gelu_initial.txt",
                 "thunder_nvfuser_b_mlp_gelu_default_final_fwd.txt",
                 "thunder_nvfuser_b_mlp_gelu_default_final_bwd.txt", FALSE);
}

static void
test_thunder_mlp_linear_matmul (void)
{
  compare_final ("thunder_b_mlp_gelu_initial.txt",
                 "thunder_nvfuser_b_mlp_gelu_linear_matmul_final_fwd.txt",
                 "thunder_nvfuser_b_mlp_gelu_linear_matmul_final_bwd.txt", TRUE);
}

/* Thunder's own joint (its "Grad transform pass" output) goes through the same passes without
 * a second grad; BACKWARD tags are inferred from what fw_flat_out needs. */
static void
test_thunder_joint_seed (void)
{
  compare_final ("thunder_a_seed_matmul_grad_joint.txt",
                 "thunder_nvfuser_a_seed_matmul_default_final_fwd.txt",
                 "thunder_nvfuser_a_seed_matmul_default_final_bwd.txt", FALSE);
}

static void
test_thunder_joint_mlp (void)
{
  compare_final ("thunder_b_mlp_gelu_grad_joint.txt",
                 "thunder_nvfuser_b_mlp_gelu_linear_matmul_final_fwd.txt",
                 "thunder_nvfuser_b_mlp_gelu_linear_matmul_final_bwd.txt", TRUE);
}


/* Autocast (reference/thunder-traces.md 4): the f32 program of issue #283 run under
 * autocast=bf16 gets Thunder's casts (both matmul operands downcast, each cast saying why;
 * the add promotes back to f32) and, fused, Thunder's two regions around torch.matmul. */
static const char *issue283_initial =
  "def computation(a, b, t_2):\n"
  "  # a: \"cuda:0 f32[2, 2]\"\n"
  "  # b: \"cuda:0 f32[2, 2]\"\n"
  "  # t_2: \"cuda:0 f32[2, 2]\"\n"
  "  result = ltorch.matmul(a, b)  # result: \"cuda:0 f32[2, 2]\"\n"
  "    # result = prims.matmul(a, b)  # result: \"cuda:0 f32[2, 2]\"\n"
  "  t6 = ltorch.add(result, t_2, alpha=1)  # t6: \"cuda:0 f32[2, 2]\"\n"
  "    # t6 = prims.add(result, t_2)  # t6: \"cuda:0 f32[2, 2]\"\n"
  "  return t6\n";

static void
test_autocast_issue283 (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTrace) t = cs_parse_trace (issue283_initial, "issue283", &error);
  g_autoptr(CsTrace) thunder = NULL;
  g_autoptr(CsPipeline) pl = NULL;
  CsGradSpec none = { FALSE, NULL, TRUE, NULL };
  CsPolicy p;
  CsTrace *ac;
  guint n_casts = 0;

  g_assert_no_error (error);
  cs_policy_init_default (&p);
  p.autocast = CS_AUTOCAST_BF16;
  pl = cs_pipeline_run (t, &p, &none, &error);
  g_assert_no_error (error);
  ac = cs_pipeline_find_trace (pl, "autocast");
  for (guint i = 0; i < ac->n_stmts; i++)
    {
      CsProxy *in;
      CsDtype to;
      if (!_cs_stmt_is_cast (ac->stmts[i], &in, &to))
        continue;
      n_casts++;
      g_assert_cmpint (in->dtype, ==, CS_DTYPE_F32);
      g_assert_cmpint (to, ==, CS_DTYPE_BF16);
      g_assert_nonnull (ac->stmts[i]->why);
      g_assert_nonnull (strstr (ac->stmts[i]->why, "autocast"));
      g_assert_nonnull (strstr (ac->stmts[i]->why, "matmul"));
    }
  g_assert_cmpuint (n_casts, ==, 2);
  /* the add still returns f32: bf16 matmul output + f32 promotes back */
  g_assert_cmpint (cs_trace_lookup_proxy (ac, "t6")->dtype, ==, CS_DTYPE_F32);
  g_assert_cmpint (cs_trace_lookup_proxy (ac, "result")->dtype, ==, CS_DTYPE_BF16);

  thunder = load_shared ("issue283_autocast_bf16_matmul.txt");
  if (thunder == NULL)
    return;
  assert_same_regions (cs_pipeline_get_forward (pl), thunder);
}

/* A statement downstream of an autocast downcast that writes no tensor keeps its outputs: a
 * prims.shape read of the matmul's result (Thunder's rotate_half reads x.size(-1)) under
 * autocast=f16 on bf16 inputs, which downcasts both matmul operands to f16. */
static const char shape_after_downcast[] =
  "def computation(a, w):\n"
  "  # a: \"cuda:0 bf16[8, 16]\"\n"
  "  # w: \"cuda:0 bf16[16, 16]\"\n"
  "  t0 = ltorch.matmul(a, w)  # t0: \"cuda:0 bf16[8, 16]\"\n"
  "  (n0, n1) = prims.shape(t0)\n"
  "  t1 = ltorch.add(t0, a, alpha=None)  # t1: \"cuda:0 bf16[8, 16]\"\n"
  "  return t1\n";

static void
test_autocast_shape_read (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTrace) t = cs_parse_trace (shape_after_downcast, "shape", &error);
  g_autoptr(CsPipeline) pl = NULL;
  CsPolicy p;
  CsTrace *ac;

  g_assert_no_error (error);
  cs_policy_init_default (&p);
  p.autocast = CS_AUTOCAST_F16;
  pl = cs_pipeline_run (t, &p, NULL, &error);
  g_assert_no_error (error);
  ac = cs_pipeline_find_trace (pl, "autocast");
  /* the input comments, two downcasts, the matmul (f16), the shape read, the add, return */
  g_assert_cmpuint (ac->n_stmts, ==, 8);
  g_assert_true (_cs_stmt_is_cast (ac->stmts[2], NULL, NULL));
  g_assert_true (_cs_stmt_is_cast (ac->stmts[3], NULL, NULL));
  g_assert_cmpint (cs_trace_lookup_proxy (ac, "t0")->dtype, ==, CS_DTYPE_F16);
  g_assert_cmpstr (ac->stmts[5]->callee, ==, "prims.shape");
  g_assert_cmpint (cs_trace_lookup_proxy (ac, "n0")->kind, !=, CS_PROXY_TENSOR);
  /* the add promotes f16 and bf16 to f32 */
  g_assert_cmpint (cs_trace_lookup_proxy (ac, "t1")->dtype, ==, CS_DTYPE_F32);
}

/* ---- pass list, final input ------------------------------------------------------------ */

static void
test_pass_names (void)
{
  g_autoptr(CsTrace) t = load_shared ("thunder_a_seed_matmul_initial.txt");
  g_autoptr(CsPipeline) pl = NULL;
  const char *expect[] = { "initial", "autocast", "grad", "decompose", "fuse",
                           "remove-redundant-casts", "cse", "dce", "split-forward",
                           "split-backward", "delete-last-used", "delete-last-used-backward" };

  if (t == NULL)
    {
      g_test_skip ("CS_SHARED_TRACES not available");
      return;
    }
  pl = run (t, NULL);
  g_assert_cmpuint (cs_pipeline_n_passes (pl), ==, G_N_ELEMENTS (expect));
  for (guint i = 0; i < G_N_ELEMENTS (expect); i++)
    {
      g_assert_cmpstr (cs_pipeline_pass_name (pl, i), ==, expect[i]);
      g_assert_cmpstr (cs_pipeline_get_trace (pl, i)->pass, ==, expect[i]);
    }
  g_assert_null (cs_pipeline_pass_name (pl, 99));
  /* the input is not modified: a second run gives the same forward text */
  {
    g_autoptr(CsPipeline) pl2 = run (t, NULL);
    g_autofree char *a = cs_print_trace (cs_pipeline_get_forward (pl), CS_PRINT_DEFAULT);
    g_autofree char *b = cs_print_trace (cs_pipeline_get_forward (pl2), CS_PRINT_DEFAULT);
    /* The provenance line times the pass ("took 6 milliseconds" under valgrind): not compared. */
    g_autoptr(GRegex) took = g_regex_new ("took [0-9]+ milliseconds", 0, 0, NULL);
    g_autofree char *a_untimed = g_regex_replace_literal (took, a, -1, 0, "took N milliseconds", 0, NULL);
    g_autofree char *b_untimed = g_regex_replace_literal (took, b, -1, 0, "took N milliseconds", 0, NULL);
    g_assert_cmpstr (a_untimed, ==, b_untimed);
  }
}

static void
test_final_input (void)
{
  g_autoptr(CsTrace) t = load_shared ("thunder_nvfuser_b_mlp_gelu_default_final_bwd.txt");
  g_autoptr(CsPipeline) pl = NULL;
  g_autoptr(CsTraceStats) st = NULL;

  if (t == NULL)
    {
      g_test_skip ("CS_SHARED_TRACES not available");
      return;
    }
  g_assert_true (cs_trace_is_final (t));
  pl = run (t, NULL);
  g_assert_true (cs_pipeline_input_was_final (pl));
  g_assert_cmpuint (cs_pipeline_n_passes (pl), ==, 1);
  g_assert_true (cs_pipeline_get_backward (pl) == cs_pipeline_get_trace (pl, 0));
  st = cs_stats_compute (cs_pipeline_get_backward (pl));
  g_assert_cmpuint (st->total.n_regions, ==, cs_fuse_count_regions (t));
  g_assert_cmpuint (st->total.n_regions, >=, 1);
}


/* ---- passes keep their inputs --------------------------------------------------------- */

/* The printed trace without its provenance line (the pipeline's names the pass and its time). */
static char *
print_untimed (const CsTrace *t)
{
  static GRegex *prov;
  g_autofree char *text = cs_print_trace (t, CS_PRINT_DEFAULT);

  if (prov == NULL)
    prov = g_regex_new ("^# Constructed by .*\n", G_REGEX_MULTILINE, 0, NULL);
  return g_regex_replace_literal (prov, text, -1, 0, "", 0, NULL);
}

static void
assert_unchanged (const CsTrace *t, const char *before, const char *what, const char *sample,
                  guint pi)
{
  g_autofree char *now = print_untimed (t);
  if (strcmp (now, before) != 0)
    g_error ("%s, policy %u: the %s trace changed after a later pass:\n%s\n---- was ----\n%s",
             sample, pi, what, now, before);
}

/* The BACKWARD tags of the top-level statements (not printed), one character each. */
static char *
backward_tags (const CsTrace *t)
{
  char *b = g_malloc (t->n_stmts + 1);
  for (guint i = 0; i < t->n_stmts; i++)
    b[i] = t->stmts[i]->backward ? 'B' : '-';
  b[t->n_stmts] = '\0';
  return b;
}

/* decompose and split share the top-level statements of their input (cs_trace_derive_shared)
 * and edit only private copies: every trace of the chain prints the same after the later
 * passes as when it was made (the pipeline keeps and shows them all), and the pipeline's own
 * traces print as the chain's did when they were new. */
static void
test_inputs_unchanged (void)
{
  guint n_runs = 0, n_shared = 0, n_rebuilt = 0, n_split_shared = 0;

  for (guint si = 0; si < G_N_ELEMENTS (samples); si++)
    {
      g_autoptr(CsTrace) t = load_sample (samples[si]);
      if (t == NULL)
        continue;
      for (guint pi = 0; pi < G_N_ELEMENTS (policies); pi++)
        {
          g_autoptr(CsPipeline) pl = NULL;
          g_autoptr(GError) error = NULL;
          g_autoptr(CsTrace) a = NULL, g = NULL, d = NULL, f = NULL, r = NULL, c = NULL, x = NULL;
          g_autoptr(CsTrace) fw = NULL, bw = NULL, fwd = NULL, bwd = NULL;
          g_autofree char *g0 = NULL, *d0 = NULL, *f0 = NULL, *x0 = NULL, *fw0 = NULL, *bw0 = NULL;
          g_autofree char *gtags = NULL, *gtags2 = NULL, *xtags = NULL, *xtags2 = NULL;
          CsGradSpec spec = { TRUE, NULL, FALSE, NULL, TRUE };  /* the pipeline's default */
          CsPolicy p;

          if (sample_forward_only (samples[si]))
            continue;
          policy_from (&p, policies[pi]);
          spec.policy = &p;
          a = cs_autocast_trace (t, &p, &error);
          g_assert_no_error (error);
          g = cs_grad_joint (a, &spec, &error);
          g_assert_no_error (error);
          g0 = print_untimed (g);
          gtags = backward_tags (g);

          d = cs_decompose_trace (g, &p, &error);
          g_assert_no_error (error);
          d0 = print_untimed (d);
          assert_unchanged (g, g0, "grad", samples[si], pi);
          g_assert_cmpstr (d0, !=, g0);
          g_assert_cmpuint (d->n_stmts, ==, g->n_stmts);
          for (guint i = 0; i < d->n_stmts; i++)
            {
              /* a statement is shared unless its subsymbols were rebuilt */
              if (d->stmts[i] == g->stmts[i])
                n_shared++;
              else
                {
                  g_assert_cmpuint (d->stmts[i]->owner, ==, d->serial);
                  g_assert_cmpuint (d->stmts[i]->id, ==, g->stmts[i]->id);
                  n_rebuilt += d->stmts[i]->subs != g->stmts[i]->subs;
                }
            }

          f = cs_fuse_trace (d, &p, &error);
          g_assert_no_error (error);
          f0 = print_untimed (f);
          /* as the pipeline: the redundant casts go only with fusion */
          r = (p.redundant_casts == CS_REDUNDANT_CASTS_REMOVE && p.fusion != CS_FUSION_OFF)
              ? cs_cse_remove_redundant_casts (f) : cs_trace_derive (f, "remove-redundant-casts");
          /* and CSE only with nvFuser's fusion pass */
          c = p.fusion != CS_FUSION_OFF ? cs_cse_trace (r) : cs_trace_copy (r, "cse");
          x = cs_cse_dce (c);
          x0 = print_untimed (x);
          xtags = backward_tags (x);
          g_assert_nonnull (strchr (xtags, 'B'));
          assert_unchanged (d, d0, "decompose", samples[si], pi);

          g_assert_true (cs_split_forward_backward (x, &fw, &bw, &error));
          g_assert_no_error (error);
          g_assert_nonnull (bw);
          fw0 = print_untimed (fw);
          bw0 = print_untimed (bw);
          assert_unchanged (x, x0, "dce", samples[si], pi);
          for (guint i = 0; i < fw->n_stmts; i++)
            for (guint k = 0; k < x->n_stmts; k++)
              if (fw->stmts[i] == x->stmts[k])
                {
                  g_assert_false (fw->stmts[i]->backward);
                  n_split_shared++;
                  break;
                }
          for (guint i = 0; i < bw->n_stmts; i++)
            if (bw->stmts[i]->kind == CS_STMT_CALL)
              g_assert_true (bw->stmts[i]->backward);

          /* split retags: on a joint whose tags are all cleared (or all set), the tags of the
           * pieces are as they should be and the joint's stay as they were */
          for (int set = 0; set < 2; set++)
            {
              g_autoptr(CsTrace) y = cs_trace_derive (x, NULL);
              g_autoptr(CsTrace) yf = NULL, yb = NULL;
              g_autofree char *ytags = NULL, *ytags2 = NULL;

              for (guint i = 0; i < y->n_stmts; i++)
                y->stmts[i]->backward = set;
              ytags = backward_tags (y);
              g_assert_true (cs_split_forward_backward (y, &yf, &yb, &error));
              g_assert_no_error (error);
              ytags2 = backward_tags (y);
              g_assert_cmpstr (ytags2, ==, ytags);
              for (guint i = 0; i < yf->n_stmts; i++)
                g_assert_false (yf->stmts[i]->backward);
              for (guint i = 0; i < yb->n_stmts; i++)
                if (yb->stmts[i]->kind == CS_STMT_CALL)
                  g_assert_true (yb->stmts[i]->backward);
            }

          fwd = cs_dellast_trace (fw, FALSE);
          bwd = cs_dellast_trace (bw, TRUE);
          assert_unchanged (fw, fw0, "split-forward", samples[si], pi);
          assert_unchanged (bw, bw0, "split-backward", samples[si], pi);
          assert_unchanged (x, x0, "dce", samples[si], pi);
          assert_unchanged (f, f0, "fuse", samples[si], pi);
          assert_unchanged (d, d0, "decompose", samples[si], pi);
          assert_unchanged (g, g0, "grad", samples[si], pi);
          gtags2 = backward_tags (g);
          xtags2 = backward_tags (x);
          g_assert_cmpstr (gtags2, ==, gtags);
          g_assert_cmpstr (xtags2, ==, xtags);

          /* the pipeline: its grad trace (the input of its decompose step) is as it was made;
           * without the matmul upcast (a rewrite of the pipeline's own) every pass is the
           * chain's */
          pl = run (t, &p);
          assert_unchanged (cs_pipeline_find_trace (pl, "grad"), g0, "pipeline grad", samples[si], pi);
          if (p.matmul != CS_MATMUL_UPCAST_F32)
            {
              assert_unchanged (cs_pipeline_find_trace (pl, "decompose"), d0, "pipeline decompose",
                                samples[si], pi);
              assert_unchanged (cs_pipeline_find_trace (pl, "dce"), x0, "pipeline dce", samples[si], pi);
              assert_unchanged (cs_pipeline_find_trace (pl, "split-forward"), fw0,
                                "pipeline split-forward", samples[si], pi);
              assert_unchanged (cs_pipeline_find_trace (pl, "split-backward"), bw0,
                                "pipeline split-backward", samples[si], pi);
            }
          n_runs++;
        }
    }
  if (n_runs == 0)
    {
      g_test_skip ("no sample available");
      return;
    }
  g_test_message ("%u runs: %u decompose statements shared, %u rebuilt; %u forward statements shared",
                  n_runs, n_shared, n_rebuilt, n_split_shared);
  g_assert_cmpuint (n_shared, >, 0);
  g_assert_cmpuint (n_rebuilt, >, 0);
  g_assert_cmpuint (n_split_shared, >, 0);
}

/* ---- the CLI (CS_CLI): transform / stats --json / diff, exit codes ---------------------- */

static int
run_cli (char **out, const char *a1, const char *a2, const char *a3, const char *a4,
         const char *a5, const char *a6)
{
  const char *cli = g_getenv ("CS_CLI");
  const char *argv[8] = { cli, a1, a2, a3, a4, a5, a6, NULL };
  g_autoptr(GError) error = NULL;
  int status = 0;

  g_assert_true (g_spawn_sync (NULL, (char **) argv, NULL, G_SPAWN_STDERR_TO_DEV_NULL, NULL, NULL,
                               out, NULL, &status, &error));
  g_assert_no_error (error);
  return WIFEXITED (status) ? WEXITSTATUS (status) : -1;
}

static void
test_cli (void)
{
  const char *cli = g_getenv ("CS_CLI");
  const char *dir = g_getenv ("CS_SHARED_TRACES");
  g_autofree char *seed = NULL;
  g_autofree char *out = NULL;

  if (cli == NULL || !g_file_test (cli, G_FILE_TEST_IS_EXECUTABLE) || dir == NULL
      || !g_file_test (dir, G_FILE_TEST_IS_DIR))
    {
      g_test_skip ("CS_CLI or CS_SHARED_TRACES not available");
      return;
    }
  seed = g_build_filename (dir, "thunder_a_seed_matmul_initial.txt", NULL);

  /* transform --pass fuse prints Thunder's region form */
  g_assert_cmpint (run_cli (&out, "transform", seed, "--pass", "fuse", NULL, NULL), ==, 0);
  g_assert_nonnull (strstr (out, "] = nvFusion0("));
  g_assert_nonnull (strstr (out, "def computation(a, b, w):"));
  g_clear_pointer (&out, g_free);
  /* backward with upcast-f32: matmuls read f32 */
  g_assert_cmpint (run_cli (&out, "transform", seed, "--policy", "matmul=upcast-f32", "--trace",
                            "backward"), ==, 0);
  g_assert_nonnull (strstr (out, "def backward_fn(saved_for_backward, cotangents):"));
  g_assert_nonnull (strstr (out, "prims.matmul("));
  g_clear_pointer (&out, g_free);

  /* usage and input errors */
  g_assert_cmpint (run_cli (&out, "transform", seed, "--policy", "matmul=fp8", NULL, NULL), ==, 2);
  g_clear_pointer (&out, g_free);
  g_assert_cmpint (run_cli (&out, "stats", "/nonexistent/trace.txt", NULL, NULL, NULL, NULL), ==, 1);
  g_clear_pointer (&out, g_free);
  g_assert_cmpint (run_cli (&out, "transform", seed, "--pass", "nope", NULL, NULL), ==, 2);
  g_clear_pointer (&out, g_free);

  /* diff: the upcast adds casts */
  g_assert_cmpint (run_cli (&out, "diff", seed, "--vs", "matmul=upcast-f32", NULL, NULL), ==, 0);
  g_assert_nonnull (strstr (out, "+ cast bf16 -> f32"));
  g_clear_pointer (&out, g_free);

#if CS_HAVE_JSON
  {
    g_autoptr(JsonParser) parser = json_parser_new ();
    g_autoptr(GError) error = NULL;
    const char *keys[] = { "statements", "casts", "regions", "matmuls", "tensor_core_matmuls",
                           "flops", "bytes", "est_ms" };
    JsonObject *root, *fw;
    JsonArray *regions;

    g_assert_cmpint (run_cli (&out, "stats", seed, "--policy", "matmul=upcast-f32", "--json", NULL),
                     ==, 0);
    g_assert_true (json_parser_load_from_data (parser, out, -1, &error));
    g_assert_no_error (error);
    root = json_node_get_object (json_parser_get_root (parser));
    for (int side = 0; side < 2; side++)
      {
        fw = json_object_get_object_member (root, side ? "backward" : "forward");
        g_assert_nonnull (fw);
        for (guint k = 0; k < G_N_ELEMENTS (keys); k++)
          g_assert_true (json_object_has_member (fw, keys[k]));
        g_assert_cmpint (json_object_get_int_member (fw, "tensor_core_matmuls"), ==, 0);
        g_assert_cmpint (json_object_get_int_member (fw, "matmuls"), ==, side ? 2 : 1);
        regions = json_object_get_array_member (fw, "regions");
        g_assert_cmpuint (json_array_get_length (regions), >=, 1);
        g_assert_true (json_object_has_member (json_array_get_object_element (regions, 0),
                                               "end_reason"));
        g_assert_true (json_object_has_member (json_array_get_object_element (regions, 0),
                                               "name"));
      }
  }
#endif
}

/* The passes share statements, values and proxies with their input (cs_trace_derive and
 * cs_trace_derive_shared) and must copy before editing: running every pass again on the
 * pipeline's intermediate traces leaves those traces exactly as they printed before, and gives
 * the same results as the pipeline did. */
static void
test_passes_rerun (void)
{
  guint n_runs = 0;

  for (guint si = 0; si < G_N_ELEMENTS (samples); si++)
    {
      g_autoptr(CsTrace) t = load_sample (samples[si]);
      if (t == NULL)
        continue;
      /* /core/pipeline/inputs-unchanged covers every policy; here the default, upcast-f32,
       * fused matmul/linear and dataflow + upcast + fused linear (the ones that change what
       * fusion and rematerialization see) */
      static const guint rerun_policies[] = { 0, 1, 4, 8 };
      for (guint ri = 0; ri < G_N_ELEMENTS (rerun_policies); ri++)
        {
          guint pi = rerun_policies[ri];
          g_autoptr(CsPipeline) pl = NULL;
          g_autoptr(GPtrArray) before = g_ptr_array_new_with_free_func (g_free);
          g_autoptr(GPtrArray) again = g_ptr_array_new_with_free_func ((GDestroyNotify) cs_trace_unref);
          g_autoptr(GError) error = NULL;
          CsTrace *dec, *fuse, *rrc, *cse, *dce, *fw = NULL, *bw = NULL;
          CsPolicy p;

          policy_from (&p, policies[pi]);
          pl = run (t, &p);
          for (guint k = 0; k < cs_pipeline_n_passes (pl); k++)
            g_ptr_array_add (before, cs_print_trace (cs_pipeline_get_trace (pl, k), CS_PRINT_DEFAULT));
          dec = cs_pipeline_find_trace (pl, "decompose");
          fuse = cs_pipeline_find_trace (pl, "fuse");
          rrc = cs_pipeline_find_trace (pl, "remove-redundant-casts");
          cse = cs_pipeline_find_trace (pl, "cse");
          dce = cs_pipeline_find_trace (pl, "dce");
          if (dec == NULL || fuse == NULL)
            continue;
          g_ptr_array_add (again, cs_fuse_trace (dec, &p, &error));
          g_assert_no_error (error);
          if (rrc)
            g_ptr_array_add (again, cs_cse_remove_redundant_casts (fuse));
          if (cse)
            g_ptr_array_add (again, cs_cse_trace (rrc ? rrc : fuse));
          if (dce)
            {
              g_ptr_array_add (again, cs_cse_dce (cse ? cse : (rrc ? rrc : fuse)));
              if (cs_pipeline_get_backward (pl) != NULL)
                {
                  g_assert_true (cs_split_forward_backward (dce, &fw, &bw, &error));
                  g_assert_no_error (error);
                  g_ptr_array_add (again, fw);
                  g_ptr_array_add (again, bw);
                  g_ptr_array_add (again, cs_dellast_trace (fw, FALSE));
                  g_ptr_array_add (again, cs_dellast_trace (bw, TRUE));
                }
            }
          for (guint k = 0; k < cs_pipeline_n_passes (pl); k++)
            {
              g_autofree char *after = cs_print_trace (cs_pipeline_get_trace (pl, k), CS_PRINT_DEFAULT);
              if (g_strcmp0 (after, before->pdata[k]) != 0)
                g_error ("%s, policy %u: the %s trace changed when the passes ran again on it",
                         samples[si], pi, cs_pipeline_pass_name (pl, k));
            }
          /* the same inputs give the same fused trace (the pipeline adds the provenance line) */
          {
            g_autofree char *a = cs_print_trace (again->pdata[0], CS_PRINT_DEFAULT);
            g_autofree char *b = cs_print_trace (fuse, CS_PRINT_DEFAULT);
            const char *ab = strstr (a, "\nimport "), *bb = strstr (b, "\nimport ");
            g_assert_nonnull (ab);
            g_assert_nonnull (bb);
            g_assert_cmpstr (ab, ==, bb);
          }
          n_runs++;
        }
    }
  if (n_runs == 0)
    g_test_skip ("no sample traces available");
}

/* ---- cs_trace_diff between two policies, counted by hand ---------------------------------- */

/* The casts of @arr summed (each entry is one origin and dtype pair, count casts). */
static guint
diff_cast_total (GPtrArray *arr, CsDtype from, CsDtype to)
{
  guint n = 0;

  for (guint i = 0; i < arr->len; i++)
    {
      const CsDiffCast *c = arr->pdata[i];
      if (c->from == from && c->to == to)
        n += c->count;
    }
  return n;
}

/* matmul=native vs upcast-f32.  The seed's forward: native has one region (the add, statement
 * 4, computed in f32: two upcasts and a downcast); upcast-f32 keeps it (with the upcast of w
 * for the matmul, statement 5, in it instead of the downcast) and adds a region of its own for
 * the matmul's downcast: 1 -> 2 regions = 1 kept + 1 new; casts +1 bf16->f32 and +1 f32->bf16
 * (statement 5), -1 f32->bf16 (statement 4).
 * mlp_gelu's forward: native has one region (the gelu, statement 7: an upcast of its input, a
 * downcast of its output); upcast-f32 adds one in front of the first linear (statement 6:
 * x, w1, b1 upcast), keeps the gelu's (now f32 in and out, with w2 and b2 upcast for the second
 * linear, statement 8) and adds one after the second linear (its downcast): 1 -> 3 = 1 kept +
 * 2 new; casts +5 bf16->f32 (3 + 2), +2 f32->bf16 (the second region's output and the
 * rounding of the first linear's f32 output t6 to bf16, which the backward region then
 * recomputes the gelu from: rematerialization's min-cut ties t6, f32 halved as a producer
 * input, with its bf16 rounding, and networkx's partition takes the cut nearer the consumer),
 * -1 bf16->f32 and -1 f32->bf16 (the gelu's). */
static void
test_diff_counts (void)
{
  static const struct
  {
    const char *file;
    guint n_a, n_b, kept, n_new, up_added, down_added, up_removed, down_removed;
  } cases[] = {
    { "data/seed_foo.txt", 1, 2, 1, 1, 1, 1, 0, 1 },
    { "data/mlp_gelu.txt", 1, 3, 1, 2, 5, 2, 1, 1 },
  };

  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr(CsTrace) t = load_sample (cases[i].file);
      g_autoptr(CsPipeline) pa = NULL, pb = NULL;
      g_autoptr(CsTraceDiff) d = NULL, same = NULL;
      CsPolicy a, b;

      g_assert_nonnull (t);
      policy_from (&a, (const char *[]) { "matmul=native", NULL });
      policy_from (&b, (const char *[]) { "matmul=upcast-f32", NULL });
      pa = run (t, &a);
      pb = run (t, &b);
      d = cs_trace_diff (cs_pipeline_get_forward (pa), cs_pipeline_get_forward (pb));
      g_assert_cmpuint (d->n_regions_a, ==, cases[i].n_a);
      g_assert_cmpuint (d->n_regions_b, ==, cases[i].n_b);
      g_assert_cmpuint (d->n_regions_kept, ==, cases[i].kept);
      g_assert_cmpuint (d->regions_new->len, ==, cases[i].n_new);
      g_assert_cmpuint (d->regions_removed->len, ==, 0);
      g_assert_cmpuint (d->regions_split->len + d->regions_merged->len, ==, 0);
      g_assert_cmpuint (d->n_regrouped_a + d->n_regrouped_b, ==, 0);
      g_assert_cmpuint (diff_cast_total (d->casts_added, CS_DTYPE_BF16, CS_DTYPE_F32), ==,
                        cases[i].up_added);
      g_assert_cmpuint (diff_cast_total (d->casts_added, CS_DTYPE_F32, CS_DTYPE_BF16), ==,
                        cases[i].down_added);
      g_assert_cmpuint (diff_cast_total (d->casts_removed, CS_DTYPE_BF16, CS_DTYPE_F32), ==,
                        cases[i].up_removed);
      g_assert_cmpuint (diff_cast_total (d->casts_removed, CS_DTYPE_F32, CS_DTYPE_BF16), ==,
                        cases[i].down_removed);
      /* the other way round the new regions are removed ones */
      {
        g_autoptr(CsTraceDiff) r = cs_trace_diff (cs_pipeline_get_forward (pb),
                                                  cs_pipeline_get_forward (pa));
        g_assert_cmpuint (r->regions_removed->len, ==, cases[i].n_new);
        g_assert_cmpuint (r->regions_new->len, ==, 0);
        g_assert_cmpuint (r->n_regions_kept, ==, cases[i].kept);
      }
      same = cs_trace_diff (cs_pipeline_get_forward (pa), cs_pipeline_get_forward (pa));
      g_assert_true (cs_trace_diff_is_empty (same));
      g_assert_cmpuint (same->n_regions_kept, ==, cases[i].n_a);
    }
}

/* grad-reduce=f32 puts the cast before each all_reduce and the cast back after its wait in
 * regions of their own: each backward region of A holding a gradient's statements (one origin)
 * splits into two regions of B.  The split groups' regions of A are listed with both regions
 * of B, though every origin's first statement is in one of them, and the counts add up. */
static void
test_diff_split_one_origin (void)
{
  g_autoptr(CsTrace) t = load_sample ("data/distributed/handmade_ddp_initial.txt");
  g_autoptr(CsPipeline) pa = NULL, pb = NULL;
  g_autoptr(CsTraceDiff) d = NULL;
  CsPolicy a, b;

  g_assert_nonnull (t);
  policy_from (&a, (const char *[]) { "grad-reduce=native", NULL });
  policy_from (&b, (const char *[]) { "grad-reduce=f32", NULL });
  pa = run (t, &a);
  pb = run (t, &b);
  d = cs_trace_diff (cs_pipeline_get_backward (pa), cs_pipeline_get_backward (pb));
  g_assert_cmpuint (d->n_regions_a, ==, 3);
  g_assert_cmpuint (d->n_regions_b, ==, 5);
  g_assert_cmpuint (d->n_regions_kept, ==, 1);
  g_assert_cmpuint (d->n_groups_split, ==, 2);
  g_assert_cmpuint (d->n_split_into, ==, 4);
  g_assert_cmpuint (d->regions_split->len, ==, 2);
  for (guint i = 0; i < d->regions_split->len; i++)
    g_assert_cmpuint (((CsDiffRegion *) d->regions_split->pdata[i])->others->len, ==, 2);
  g_assert_cmpuint (d->regions_merged->len + d->regions_new->len + d->regions_removed->len, ==, 0);
  g_assert_false (cs_trace_diff_is_empty (d));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, G_TEST_OPTION_ISOLATE_DIRS, NULL);
  g_test_add_func ("/core/pipeline/pass-names", test_pass_names);
  g_test_add_func ("/core/pipeline/final-input", test_final_input);
  g_test_add_func ("/core/pipeline/inputs-unchanged", test_inputs_unchanged);
  g_test_add_func ("/core/pipeline/seed/default-tensor-cores", test_seed_default);
  g_test_add_func ("/core/pipeline/seed/upcast-f32", test_seed_upcast);
  g_test_add_func ("/core/pipeline/invariants", test_invariants);
  g_test_add_func ("/core/pipeline/passes-rerun", test_passes_rerun);
  g_test_add_func ("/core/pipeline/semantics/f64", test_semantics_f64);
  g_test_add_func ("/core/pipeline/semantics/keep-bit-exact", test_keep_bit_exact);
  g_test_add_func ("/core/pipeline/thunder/seed-default", test_thunder_seed_default);
  g_test_add_func ("/core/pipeline/thunder/seed-linear-matmul", test_thunder_seed_linear_matmul);
  g_test_add_func ("/core/pipeline/thunder/mlp-default", test_thunder_mlp_default);
  g_test_add_func ("/core/pipeline/thunder/mlp-linear-matmul", test_thunder_mlp_linear_matmul);
  g_test_add_func ("/core/pipeline/cli", test_cli);
  g_test_add_func ("/core/pipeline/autocast/issue283", test_autocast_issue283);
  g_test_add_func ("/core/pipeline/autocast/shape-read", test_autocast_shape_read);
  g_test_add_func ("/core/pipeline/thunder/joint-seed", test_thunder_joint_seed);
  g_test_add_func ("/core/pipeline/thunder/joint-mlp-linear-matmul", test_thunder_joint_mlp);
  g_test_add_func ("/core/pipeline/diff/counts", test_diff_counts);
  g_test_add_func ("/core/pipeline/diff/split-one-origin", test_diff_split_one_origin);
  return g_test_run ();
}
