/* test-core-executors.c: the executors that claim ops before fusion (issue 18), against
 * Thunder's own traces and the f64 CPU reference.
 *
 * - the sdpa executor's checker (cs_executor_sdpa_backend) on hand-made statements;
 * - the 8-block LLaMA stack (../shared/traces/thunder_llama_stack_*.txt, printed by Thunder with
 *   its default executors without nvFuser): one sdpa forward and backward per block, cross-
 *   entropy in one TorchCompile region each way, the sdpa backward's arguments typed and
 *   saved as in Thunder's final traces, None gradients for the module buffers t_cos/t_sin;
 *   with executors=nvfuser,torch none of that;
 * - the nvFusion region counts of the traces Thunder's nvFuser (stub) made for the seed
 *   function and the GELU MLP (thunder_nvfuser_*);
 * - the CPU reference of the claimed statements (sdpafx/sdpaex forward and backward, the
 *   TorchCompile regions with nll_loss_backward and log_softmax_backward) against the
 *   decomposed computation (executors=nvfuser,torch) in f64: outputs and every gradient;
 * - ltorch.split's backward is one cat, module buffers get no gradient.
 */
#include "cs-config.h"

#include <math.h>
#include <string.h>

#include "cs-executors.h"
#include "cs-grad.h"
#include "cs-ops.h"
#include "cs-parse.h"
#include "cs-pipeline.h"
#include "cs-ref.h"
#include "cs-stats.h"
#include "cs-tensor.h"

static CsTrace *
parse_text (const char *text)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTraceList) list = cs_parse_text (text, strlen (text), "test.txt", &error);

  g_assert_no_error (error);
  g_assert_nonnull (list);
  return cs_trace_ref (list->traces->pdata[0]);
}

/* A shared trace, or NULL (the caller skips) when ../shared is absent. */
static CsTrace *
load_shared (const char *name)
{
  const char *dir = g_getenv ("CS_SHARED_TRACES");
  g_autofree char *path = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTraceList) list = NULL;

  if (dir == NULL)
    return NULL;
  path = g_build_filename (dir, name, NULL);
  if (!g_file_test (path, G_FILE_TEST_EXISTS))
    return NULL;
  list = cs_parse_file (path, &error);
  g_assert_no_error (error);
  return cs_trace_ref (list->traces->pdata[0]);
}

static CsPipeline *
run_policy (const CsTrace *t, const char *assignments)
{
  CsPolicy p;
  g_autoptr(GError) error = NULL;
  g_auto(GStrv) parts = NULL;
  CsPipeline *pl;

  cs_policy_init_default (&p);
  if (assignments != NULL)
    {
      parts = g_strsplit (assignments, " ", -1);
      for (guint i = 0; parts[i]; i++)
        g_assert_true (cs_policy_parse_assignment (&p, parts[i], NULL));
    }
  pl = cs_pipeline_run (t, &p, NULL, &error);
  g_assert_no_error (error);
  g_assert_nonnull (pl);
  return pl;
}

/* Top-level calls of @t whose op is @id. */
static GPtrArray *
calls_of (const CsTrace *t, CsOpId id)
{
  GPtrArray *a = g_ptr_array_new ();

  for (guint i = 0; i < t->n_stmts; i++)
    if (t->stmts[i]->kind == CS_STMT_CALL && t->stmts[i]->op->id == id)
      g_ptr_array_add (a, t->stmts[i]);
  return a;
}

/* Top-level region calls of @t whose callee starts with @prefix. */
static GPtrArray *
regions_of (const CsTrace *t, const char *prefix)
{
  GPtrArray *a = g_ptr_array_new ();

  for (guint i = 0; i < t->n_stmts; i++)
    if (t->stmts[i]->kind == CS_STMT_CALL && cs_op_is_fusion (t->stmts[i]->op)
        && g_str_has_prefix (t->stmts[i]->callee, prefix))
      g_ptr_array_add (a, t->stmts[i]);
  return a;
}

/* The names of the forward's saved_for_backward (`return {...}, ((saved), (...))`). */
static GHashTable *
saved_names (const CsTrace *fwd)
{
  GHashTable *set = g_hash_table_new (g_str_hash, g_str_equal);
  CsStmt *ret = cs_trace_get_return (fwd);
  g_autoptr(GPtrArray) ps = g_ptr_array_new ();
  const CsValue *v;

  g_assert_nonnull (ret);
  v = ret->value;
  g_assert_true (v != NULL && v->kind == CS_VALUE_TUPLE && v->u.seq.n == 2);
  v = v->u.seq.items[1];
  g_assert_true (v->kind == CS_VALUE_TUPLE && v->u.seq.n >= 1);
  cs_value_collect_proxies (v->u.seq.items[0], ps);
  for (guint i = 0; i < ps->len; i++)
    g_hash_table_add (set, (gpointer) ((CsProxy *) ps->pdata[i])->name);
  return set;
}

static gboolean
same_type (const CsProxy *a, const CsProxy *b)
{
  return a->kind == b->kind && a->dtype == b->dtype && a->rank == b->rank
         && (a->rank == 0 || memcmp (a->shape, b->shape, a->rank * sizeof (int64_t)) == 0);
}

/* The returned values of a backward trace (`return (g0, None, ...)`). */
static const CsValue *
backward_return (const CsTrace *bwd)
{
  CsStmt *ret = cs_trace_get_return (bwd);

  g_assert_nonnull (ret);
  g_assert_true (ret->value != NULL && ret->value->kind == CS_VALUE_TUPLE);
  return ret->value;
}

/* ------------------------------------------------------------------------------------------ */
/* The checker                                                                                 */

#define SDPA_HDR "def computation(q, k, v, m):\n" \
  "  # q: \"%s %s[2, 4, %d, %d]\"\n  # k: \"%s %s[2, 4, %d, %d]\"\n" \
  "  # v: \"%s %s[2, 4, %d, %d]\"\n  # m: \"%s %s[2, 4, %d, %d]\"\n"

static CsSdpaBackend
backend_of (const char *dev, const char *dt, int L, int S, int E, gboolean mask, gboolean causal,
            const char *executors)
{
  g_autofree char *text = g_strdup_printf (
    SDPA_HDR "  y = ltorch.scaled_dot_product_attention(q, k, v, %s, 0.0, %s, scale=None)"
    "  # y: \"%s %s[2, 4, %d, %d]\"\n  return (y,)\n",
    dev, dt, L, E, dev, dt, S, E, dev, dt, S, E, dev, dt, L, S, mask ? "m" : "None",
    causal ? "True" : "False", dev, dt, L, E);
  g_autoptr(CsTrace) t = parse_text (text);
  CsPolicy p;
  const CsStmt *s = NULL;

  cs_policy_init_default (&p);
  if (executors)
    g_assert_true (cs_policy_set (&p, "executors", executors, NULL));
  for (guint i = 0; i < t->n_stmts && s == NULL; i++)
    if (t->stmts[i]->kind == CS_STMT_CALL)
      s = t->stmts[i];
  g_assert_nonnull (s);
  return cs_executor_sdpa_backend (s, &p);
}

/* _fused_sdp_choice's rules (thunder/executors/utils.py, torch's sdp_utils) by hand */
static void
test_sdpa_backend (void)
{
  /* bf16/f16 without a mask: flash */
  g_assert_cmpint (backend_of ("cuda:0", "bf16", 64, 64, 32, FALSE, TRUE, NULL), ==, CS_SDPA_FLASH);
  g_assert_cmpint (backend_of ("cuda:0", "f16", 16, 24, 64, FALSE, FALSE, NULL), ==, CS_SDPA_FLASH);
  /* f32, or a mask: memory-efficient */
  g_assert_cmpint (backend_of ("cuda:0", "f32", 64, 64, 32, FALSE, TRUE, NULL), ==,
                   CS_SDPA_MEM_EFFICIENT);
  g_assert_cmpint (backend_of ("cuda:0", "bf16", 64, 64, 32, TRUE, FALSE, NULL), ==,
                   CS_SDPA_MEM_EFFICIENT);
  /* flash refuses a causal call with fewer queries than keys; memory-efficient takes it */
  g_assert_cmpint (backend_of ("cuda:0", "bf16", 16, 64, 32, FALSE, TRUE, NULL), ==,
                   CS_SDPA_MEM_EFFICIENT);
  /* head dim over 256 (flash) and not a multiple of 8 (memory-efficient, f16/bf16): MATH */
  g_assert_cmpint (backend_of ("cuda:0", "bf16", 8, 8, 300, FALSE, FALSE, NULL), ==, CS_SDPA_NONE);
  /* f32 head dims need a multiple of 4 */
  g_assert_cmpint (backend_of ("cuda:0", "f32", 8, 8, 12, FALSE, FALSE, NULL), ==,
                   CS_SDPA_MEM_EFFICIENT);
  g_assert_cmpint (backend_of ("cuda:0", "f32", 8, 8, 10, FALSE, FALSE, NULL), ==, CS_SDPA_NONE);
  /* f64 (no fused kernel), CPU tensors (the checker refuses them), no sdpa executor */
  g_assert_cmpint (backend_of ("cuda:0", "f64", 8, 8, 16, FALSE, FALSE, NULL), ==, CS_SDPA_NONE);
  g_assert_cmpint (backend_of ("cpu", "bf16", 8, 8, 16, FALSE, FALSE, NULL), ==, CS_SDPA_NONE);
  g_assert_cmpint (backend_of ("cuda:0", "bf16", 8, 8, 16, FALSE, FALSE, "nvfuser,torch"), ==,
                   CS_SDPA_NONE);
}

static void
test_module_buffers (void)
{
  g_assert_true (cs_grad_input_is_module_buffer ("t_cos"));
  g_assert_true (cs_grad_input_is_module_buffer ("t_layers_0_attention_rope_cache"));
  g_assert_false (cs_grad_input_is_module_buffer ("t_layers_0_attention_wq_weight"));
  g_assert_false (cs_grad_input_is_module_buffer ("t_ln_f_bias"));
  g_assert_false (cs_grad_input_is_module_buffer ("x"));
  g_assert_false (cs_grad_input_is_module_buffer ("t_"));
  g_assert_false (cs_grad_input_is_module_buffer ("t0"));
}

/* ------------------------------------------------------------------------------------------ */
/* The LLaMA stack against Thunder's final traces                                              */

static void
test_llama_claims (void)
{
  g_autoptr(CsTrace) init = load_shared ("thunder_llama_stack_initial.txt");
  g_autoptr(CsTrace) tb = load_shared ("thunder_llama_stack_final_bwd.txt");
  g_autoptr(CsPipeline) pl = NULL;
  g_autoptr(GPtrArray) ff = NULL, fb = NULL, xf = NULL, xb = NULL, tbb = NULL, tbx = NULL;
  g_autoptr(CsTraceStats) sf = NULL, sb = NULL;
  g_autoptr(GPtrArray) inputs = NULL;
  CsTrace *fwd, *bwd;
  const CsValue *ours, *theirs;

  if (init == NULL || tb == NULL)
    {
      g_test_skip ("needs ../shared/traces/thunder_llama_stack_{initial,final_bwd}.txt");
      return;
    }
  pl = run_policy (init, NULL);
  fwd = cs_pipeline_get_forward (pl);
  bwd = cs_pipeline_get_backward (pl);
  g_assert_nonnull (bwd);

  /* one sdpa forward and one backward per block, as Thunder's traces have */
  ff = calls_of (fwd, CS_OP_EX_SDPAFX_GRAD_FORWARD_SCALED_DOT_PRODUCT_EFFICIENT_ATTENTION);
  fb = calls_of (bwd, CS_OP_EX_SDPAFX_SCALED_DOT_PRODUCT_EFFICIENT_ATTENTION_BACKWARD);
  tbb = calls_of (tb, CS_OP_EX_SDPAFX_SCALED_DOT_PRODUCT_EFFICIENT_ATTENTION_BACKWARD);
  g_assert_cmpuint (ff->len, ==, 8);
  g_assert_cmpuint (fb->len, ==, 8);
  g_assert_cmpuint (tbb->len, ==, 8);
  /* no attention matmul left: 7 linears per block, the output projection, and their
   * backward matmuls (2 per linear); Thunder's final forward has 57 linears too */
  sf = cs_stats_compute (fwd);
  sb = cs_stats_compute (bwd);
  g_assert_cmpuint (sf->total.n_matmuls, ==, 8 * 7 + 1);
  g_assert_cmpuint (sf->by_executor[CS_EXECUTOR_SDPA], ==, 8);
  g_assert_cmpuint (sb->by_executor[CS_EXECUTOR_SDPA], ==, 8);
  g_assert_cmpuint (sf->by_executor[CS_EXECUTOR_TORCHCOMPILE_XENTROPY], ==, 1);
  g_assert_cmpuint (sb->by_executor[CS_EXECUTOR_TORCHCOMPILE_XENTROPY], ==, 1);
  /* nvFuser: 33 forward and 49 backward regions, as Thunder made under the nvFuser stub
   * (tests/oracle/traces/llama8__nvstub_default.txt): per block 4 forward regions (RMSNorm,
   * rotary, residual + RMSNorm, silu * up: rematerialization moves the silu region into its
   * consumer and the empty region goes) and one more for the final norm */
  g_assert_cmpuint (sf->by_executor[CS_EXECUTOR_NVFUSER], ==, 33);
  g_assert_cmpuint (sb->by_executor[CS_EXECUTOR_NVFUSER], ==, 49);

  /* cross-entropy: TorchCompile0 returns log_softmax f32[128, 512], total_weight i64[] and
   * the loss f32[] (Thunder: [t5182, t5204, t5206] = TorchCompile0(t7400, targets)); the
   * backward region returns bf16[2, 64, 512] and bf16[128, 512] (Thunder: [t5159, t5150] =
   * TorchCompile1(targets, t5207, t5182, t5204)) and reads targets itself */
  xf = regions_of (fwd, "TorchCompile");
  xb = regions_of (bwd, "TorchCompile");
  tbx = regions_of (tb, "TorchCompile");
  g_assert_cmpuint (xf->len, ==, 1);
  g_assert_cmpuint (xb->len, ==, 1);
  g_assert_cmpuint (tbx->len, ==, 1);
  {
    CsStmt *r = xf->pdata[0];
    g_autoptr(GPtrArray) outs = g_ptr_array_new ();
    CsDtype want[3] = { CS_DTYPE_F32, CS_DTYPE_I64, CS_DTYPE_F32 };
    guint want_rank[3] = { 2, 0, 0 };

    cs_stmt_collect_outputs (r, outs);
    g_assert_cmpuint (outs->len, ==, 3);
    for (guint i = 0; i < 3; i++)
      {
        CsProxy *o = outs->pdata[i];
        g_assert_cmpint (o->dtype, ==, want[i]);
        g_assert_cmpuint (o->rank, ==, want_rank[i]);
      }
  }
  {
    CsStmt *r = xb->pdata[0], *t = tbx->pdata[0];
    g_autoptr(GPtrArray) outs = g_ptr_array_new ();
    g_autoptr(GPtrArray) touts = g_ptr_array_new ();
    g_autoptr(GPtrArray) ins = g_ptr_array_new ();
    gboolean reads_targets = FALSE;

    cs_stmt_collect_outputs (r, outs);
    cs_stmt_collect_outputs (t, touts);
    g_assert_cmpuint (outs->len, ==, touts->len);
    for (guint i = 0; i < outs->len; i++)
      g_assert_true (same_type (outs->pdata[i], touts->pdata[i]));
    cs_stmt_collect_inputs (r, ins);
    g_assert_cmpuint (ins->len, ==, 4);
    for (guint i = 0; i < ins->len; i++)
      reads_targets |= strcmp (((CsProxy *) ins->pdata[i])->name, "targets") == 0;
    g_assert_true (reads_targets);
  }

  /* gradients: None for idx, targets and the module buffers t_cos and t_sin, at the same
   * positions as Thunder's backward returns None, a tensor for every parameter */
  ours = backward_return (bwd);
  theirs = backward_return (tb);
  inputs = cs_trace_dup_inputs (init);
  g_assert_cmpuint (ours->u.seq.n, ==, theirs->u.seq.n);
  g_assert_cmpuint (ours->u.seq.n, ==, inputs->len);
  for (guint i = 0; i < ours->u.seq.n; i++)
    {
      const char *name = ((CsProxy *) inputs->pdata[i])->name;
      gboolean none = ours->u.seq.items[i]->kind == CS_VALUE_NONE;

      g_assert_cmpint (none, ==, theirs->u.seq.items[i]->kind == CS_VALUE_NONE);
      g_assert_cmpint (none, ==, !g_str_has_suffix (name, "_weight"));
    }
}

/* The sdpa backward's arguments, position by position: the same literals, tensors of the same
 * type, each one saved for backward (not recomputed) in both traces. */
static void
test_llama_sdpa_saved (void)
{
  g_autoptr(CsTrace) init = load_shared ("thunder_llama_stack_initial.txt");
  g_autoptr(CsTrace) tf = load_shared ("thunder_llama_stack_final_fwd.txt");
  g_autoptr(CsTrace) tb = load_shared ("thunder_llama_stack_final_bwd.txt");
  g_autoptr(CsPipeline) pl = NULL;
  g_autoptr(GPtrArray) ours = NULL, theirs = NULL;
  g_autoptr(GHashTable) our_saved = NULL, their_saved = NULL;
  guint n_tensors = 0;

  if (init == NULL || tf == NULL || tb == NULL)
    {
      g_test_skip ("needs ../shared/traces/thunder_llama_stack_*.txt");
      return;
    }
  pl = run_policy (init, NULL);
  ours = calls_of (cs_pipeline_get_backward (pl),
                   CS_OP_EX_SDPAFX_SCALED_DOT_PRODUCT_EFFICIENT_ATTENTION_BACKWARD);
  theirs = calls_of (tb, CS_OP_EX_SDPAFX_SCALED_DOT_PRODUCT_EFFICIENT_ATTENTION_BACKWARD);
  our_saved = saved_names (cs_pipeline_get_forward (pl));
  their_saved = saved_names (tf);
  g_assert_cmpuint (ours->len, ==, 8);
  g_assert_cmpuint (theirs->len, ==, 8);
  for (guint k = 0; k < 8; k++)
    {
      const CsStmt *a = ours->pdata[k], *b = theirs->pdata[k];

      g_assert_cmpuint (a->n_args, ==, 15);
      g_assert_cmpuint (a->n_args, ==, b->n_args);
      for (guint i = 0; i < a->n_args; i++)
        {
          const CsValue *va = a->args[i].value, *vb = b->args[i].value;

          g_assert_cmpstr (a->args[i].name, ==, b->args[i].name);
          g_assert_cmpint (va->kind, ==, vb->kind);
          if (va->kind != CS_VALUE_PROXY)
            {
              g_assert_true (cs_value_equal (va, vb));
              continue;
            }
          g_assert_true (same_type (va->u.proxy, vb->u.proxy));
          /* grad_out (position 0) is computed in the backward; the rest is saved */
          g_assert_cmpint (i > 0, ==, g_hash_table_contains (our_saved, va->u.proxy->name));
          g_assert_cmpint (i > 0, ==, g_hash_table_contains (their_saved, vb->u.proxy->name));
          n_tensors++;
        }
    }
  /* grad_out, q, k, v, out, logsumexp, cum_seq_q, cum_seq_k, philox seed and offset */
  g_assert_cmpuint (n_tensors, ==, 8 * 10);
}

/* executors=nvfuser,torch: attention decomposed, no TorchCompile region, buffers as before */
static void
test_llama_legacy (void)
{
  g_autoptr(CsTrace) init = load_shared ("thunder_llama_stack_initial.txt");
  g_autoptr(CsPipeline) pl = NULL;
  g_autoptr(CsTraceStats) sf = NULL;
  g_autoptr(GPtrArray) xf = NULL;

  if (init == NULL)
    {
      g_test_skip ("needs ../shared/traces/thunder_llama_stack_initial.txt");
      return;
    }
  pl = run_policy (init, "executors=nvfuser,torch");
  sf = cs_stats_compute (cs_pipeline_get_forward (pl));
  xf = regions_of (cs_pipeline_get_forward (pl), "TorchCompile");
  g_assert_cmpuint (xf->len, ==, 0);
  g_assert_cmpuint (sf->by_executor[CS_EXECUTOR_SDPA], ==, 0);
  /* q k^T and P v per block decomposed into matmuls: 57 + 16 */
  g_assert_cmpuint (sf->total.n_matmuls, ==, 8 * 7 + 1 + 16);
}

/* The traces Thunder's nvFuser (the kit's stub, nvFuser 0.2.27) fused: as many regions in the
 * final forward and backward, default and with matmul/linear fusion on. */
static void
test_nvfuser_region_counts (void)
{
  static const struct { const char *fn, *cfg, *policy; } cases[] = {
    { "a_seed_matmul", "default", NULL },
    { "a_seed_matmul", "linear_matmul", "fuse-matmul=on fuse-linear=on" },
    { "b_mlp_gelu", "default", NULL },
    { "b_mlp_gelu", "linear_matmul", "fuse-matmul=on fuse-linear=on" },
  };
  guint n = 0;

  for (gsize c = 0; c < G_N_ELEMENTS (cases); c++)
    {
      g_autofree char *iname = g_strdup_printf ("thunder_%s_initial.txt", cases[c].fn);
      g_autofree char *fname = g_strdup_printf ("thunder_nvfuser_%s_%s_final_fwd.txt", cases[c].fn,
                                                cases[c].cfg);
      g_autofree char *bname = g_strdup_printf ("thunder_nvfuser_%s_%s_final_bwd.txt", cases[c].fn,
                                                cases[c].cfg);
      g_autoptr(CsTrace) init = load_shared (iname);
      g_autoptr(CsTrace) tf = load_shared (fname);
      g_autoptr(CsTrace) tb = load_shared (bname);
      g_autoptr(CsPipeline) pl = NULL;
      g_autoptr(GPtrArray) of = NULL, ob = NULL, wf = NULL, wb = NULL;

      if (init == NULL || tf == NULL || tb == NULL)
        continue;
      pl = run_policy (init, cases[c].policy);
      of = regions_of (cs_pipeline_get_forward (pl), "nvFusion");
      ob = regions_of (cs_pipeline_get_backward (pl), "nvFusion");
      wf = regions_of (tf, "nvFusion");
      wb = regions_of (tb, "nvFusion");
      g_test_message ("%s %s: forward %u (Thunder %u), backward %u (Thunder %u)", cases[c].fn,
                      cases[c].cfg, of->len, wf->len, ob->len, wb->len);
      g_assert_cmpuint (wf->len, >, 0);
      g_assert_cmpuint (of->len, ==, wf->len);
      g_assert_cmpuint (ob->len, ==, wb->len);
      n++;
    }
  if (n == 0)
    g_test_skip ("needs ../shared/traces/thunder_nvfuser_*.txt");
}

/* ------------------------------------------------------------------------------------------ */
/* The CPU reference of the claimed statements against the decomposed computation, in f64      */

/* Runs the joint trace of @pl in f64 on inputs drawn per name (cs_ref_random_input, seed 7) and
 * a cotangent per forward output (seed 11); returns name -> tensor of the returned values and
 * the gradient names per flat argument (NULL for None) in @grads. */
static GHashTable *
run_joint_f64 (const CsTrace *init, CsPipeline *pl, GPtrArray *grads, GPtrArray *outs)
{
  CsTrace *j = cs_pipeline_get_joint (pl);
  g_autoptr(GHashTable) env = cs_ref_env_new ();
  GHashTable *ret = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
                                           (GDestroyNotify) cs_tensor_unref);
  g_autoptr(GPtrArray) inputs = cs_trace_dup_inputs (init);
  g_autoptr(GPtrArray) flat = NULL;
  g_autoptr(GError) error = NULL;
  const CsValue *d, *gv = NULL, *fo = NULL;

  for (guint i = 0; i < inputs->len; i++)
    {
      CsProxy *p = inputs->pdata[i];
      g_autoptr(CsTensor) t = NULL;

      if (cs_dtype_kind (p->dtype) == CS_DTYPE_KIND_INT)
        {
          /* class indices below the 10 classes of the samples */
          t = cs_tensor_new (p->dtype, p->shape, p->rank, &error);
          g_assert_no_error (error);
          for (int64_t e = 0; e < t->numel; e++)
            cs_tensor_set_f64 (t, e, (double) ((e * 7 + 3) % 10));
        }
      else
        t = cs_ref_random_input (init, p, 7, &error);
      g_assert_no_error (error);
      cs_ref_env_insert (env, p->name, t);
    }
  for (guint i = 0; i < j->n_stmts; i++)
    {
      CsStmt *s = j->stmts[i];
      if (s->kind == CS_STMT_CALL && s->op->id == CS_OP_PRIM_GET_GRAD)
        {
          const CsProxy *o = cs_stmt_get_arg (s, 0, NULL)->u.proxy;
          g_autoptr(CsTensor) c = cs_ref_random_input (init, o, 11, &error);
          g_assert_no_error (error);
          cs_ref_env_insert (env, cs_stmt_get_output (s)->name, c);
        }
    }
  {
    gboolean ok = cs_ref_run_env (j, env, CS_REF_F64, 0, &flat, NULL, ret, &error);
    g_assert_no_error (error);
    g_assert_true (ok);
  }
  d = cs_trace_get_return (j)->value;
  for (guint i = 0; i + 1 < d->u.seq.n; i += 2)
    {
      if (strcmp (d->u.seq.items[i]->u.s, "output") == 0)
        gv = d->u.seq.items[i + 1];
      if (strcmp (d->u.seq.items[i]->u.s, "fw_flat_out") == 0)
        fo = d->u.seq.items[i + 1];
    }
  g_assert_nonnull (gv);
  g_assert_nonnull (fo);
  for (guint i = 0; i < gv->u.seq.n; i++)
    g_ptr_array_add (grads, gv->u.seq.items[i]->kind == CS_VALUE_PROXY
                            ? (gpointer) gv->u.seq.items[i]->u.proxy->name : NULL);
  cs_value_collect_proxies (fo, outs);
  return ret;
}

/* max |a - b| / max(max |b|, tiny) */
static double
rel_diff (const CsTensor *a, const CsTensor *b)
{
  double num = 0, den = 1e-300;

  g_assert_cmpint (a->numel, ==, b->numel);
  for (int64_t i = 0; i < a->numel; i++)
    {
      num = MAX (num, fabs (cs_tensor_get_f64 (a, i) - cs_tensor_get_f64 (b, i)));
      den = MAX (den, fabs (cs_tensor_get_f64 (b, i)));
    }
  return num / den;
}

/* @text under the default executors must claim what @claims says (sdpa statements,
 * TorchCompile regions) and agree in f64 with executors=nvfuser,torch, which decomposes
 * everything: every forward output and every gradient. */
static void
check_against_decomposed (const char *text, guint sdpa_fwd, guint xentropy_regions)
{
  g_autoptr(CsTrace) t = parse_text (text);
  g_autoptr(CsPipeline) claimed = run_policy (t, NULL);
  g_autoptr(CsPipeline) decomposed = run_policy (t, "executors=nvfuser,torch");
  g_autoptr(GPtrArray) g1 = g_ptr_array_new (), g2 = g_ptr_array_new ();
  g_autoptr(GPtrArray) o1 = g_ptr_array_new (), o2 = g_ptr_array_new ();
  g_autoptr(GHashTable) r1 = NULL, r2 = NULL;
  g_autoptr(CsTraceStats) sf = cs_stats_compute (cs_pipeline_get_forward (claimed));
  g_autoptr(CsTraceStats) sb = cs_stats_compute (cs_pipeline_get_backward (claimed));
  g_autoptr(CsTraceStats) df = cs_stats_compute (cs_pipeline_get_forward (decomposed));
  guint n_grads = 0;

  g_assert_cmpuint (sf->by_executor[CS_EXECUTOR_SDPA], ==, sdpa_fwd);
  g_assert_cmpuint (sb->by_executor[CS_EXECUTOR_SDPA], ==, sdpa_fwd);
  g_assert_cmpuint (sf->by_executor[CS_EXECUTOR_TORCHCOMPILE_XENTROPY], ==, xentropy_regions);
  g_assert_cmpuint (sb->by_executor[CS_EXECUTOR_TORCHCOMPILE_XENTROPY], ==, xentropy_regions);
  g_assert_cmpuint (df->by_executor[CS_EXECUTOR_SDPA], ==, 0);
  g_assert_cmpuint (df->by_executor[CS_EXECUTOR_TORCHCOMPILE_XENTROPY], ==, 0);

  r1 = run_joint_f64 (t, claimed, g1, o1);
  r2 = run_joint_f64 (t, decomposed, g2, o2);
  g_assert_cmpuint (o1->len, ==, o2->len);
  for (guint i = 0; i < o1->len; i++)
    {
      CsTensor *a = g_hash_table_lookup (r1, ((CsProxy *) o1->pdata[i])->name);
      CsTensor *b = g_hash_table_lookup (r2, ((CsProxy *) o2->pdata[i])->name);
      g_assert_nonnull (a);
      g_assert_nonnull (b);
      g_test_message ("output %u: rel diff %.3g", i, rel_diff (a, b));
      g_assert_cmpfloat (rel_diff (a, b), <, 1e-12);
    }
  g_assert_cmpuint (g1->len, ==, g2->len);
  for (guint i = 0; i < g1->len; i++)
    {
      CsTensor *a, *b;

      g_assert_cmpint (g1->pdata[i] == NULL, ==, g2->pdata[i] == NULL);
      if (g1->pdata[i] == NULL)
        continue;
      a = g_hash_table_lookup (r1, g1->pdata[i]);
      b = g_hash_table_lookup (r2, g2->pdata[i]);
      g_assert_nonnull (a);
      g_assert_nonnull (b);
      g_test_message ("grad %u: rel diff %.3g", i, rel_diff (a, b));
      g_assert_cmpfloat (rel_diff (a, b), <, 1e-12);
      n_grads++;
    }
  g_assert_cmpuint (n_grads, >, 0);
}

#define IMPORTS "import thunder\nimport thunder.core.dtypes as dtypes\n" \
  "import thunder.core.prims as prims\nimport thunder.torch as ltorch\nimport torch\n\n"

/* flash attention (bf16, causal and not) into a linear and cross-entropy */
static const char sdpa_xent_bf16[] = IMPORTS
  "def computation(q, k, v, w, targets):\n"
  "  # q: \"cuda:0 bf16[2, 2, 8, 16]\"\n  # k: \"cuda:0 bf16[2, 2, 8, 16]\"\n"
  "  # v: \"cuda:0 bf16[2, 2, 8, 16]\"\n  # w: \"cuda:0 bf16[10, 16]\"\n"
  "  # targets: \"cuda:0 i64[32]\"\n"
  "  y = ltorch.scaled_dot_product_attention(q, k, v, None, 0.0, True, scale=None)  # y: \"cuda:0 bf16[2, 2, 8, 16]\"\n"
  "  z = ltorch.scaled_dot_product_attention(y, k, v, None, 0.0, False, scale=0.5)  # z: \"cuda:0 bf16[2, 2, 8, 16]\"\n"
  "  t0 = ltorch.reshape(z, (32, 16))  # t0: \"cuda:0 bf16[32, 16]\"\n"
  "  t1 = ltorch.linear(t0, w, None)  # t1: \"cuda:0 bf16[32, 10]\"\n"
  "  t2 = prims.convert_element_type(t1, dtypes.float32)  # t2: \"cuda:0 f32[32, 10]\"\n"
  "  t3 = ltorch.cross_entropy(t2, targets, None, None, -100, None, 'mean', 0.0)  # t3: \"cuda:0 f32[]\"\n"
  "  return (t3,)\n";

/* memory-efficient attention: f32 with an additive mask that gets a gradient, 12 queries
 * (logsumexp padded to 32) */
static const char sdpa_mask_f32[] = IMPORTS
  "def computation(q, k, v, m):\n"
  "  # q: \"cuda:0 f32[2, 2, 12, 8]\"\n  # k: \"cuda:0 f32[2, 2, 12, 8]\"\n"
  "  # v: \"cuda:0 f32[2, 2, 12, 8]\"\n  # m: \"cuda:0 f32[2, 2, 12, 12]\"\n"
  "  y = ltorch.scaled_dot_product_attention(q, k, v, m, 0.0, False, scale=None)  # y: \"cuda:0 f32[2, 2, 12, 8]\"\n"
  "  t0 = ltorch.mul(y, y)  # t0: \"cuda:0 f32[2, 2, 12, 8]\"\n"
  "  return (t0,)\n";

static void
test_ref_sdpa_flash_xentropy (void)
{
  check_against_decomposed (sdpa_xent_bf16, 2, 1);
}

static void
test_ref_sdpa_mem_efficient (void)
{
  g_autoptr(CsTrace) t = parse_text (sdpa_mask_f32);
  g_autoptr(CsPipeline) pl = run_policy (t, NULL);
  g_autoptr(GPtrArray) f = calls_of (cs_pipeline_get_forward (pl),
                                     CS_OP_EX_SDPAEX_GRAD_FORWARD_SCALED_DOT_PRODUCT_EFFICIENT_ATTENTION);
  const CsValue *out;
  const CsProxy *lse;

  /* the meta: (out, logsumexp f32[2, 2, 32], philox_seed i64[], philox_offset i64[]) */
  g_assert_cmpuint (f->len, ==, 1);
  out = ((CsStmt *) f->pdata[0])->out;
  g_assert_cmpuint (out->u.seq.n, ==, 4);
  lse = out->u.seq.items[1]->u.proxy;
  g_assert_cmpint (lse->dtype, ==, CS_DTYPE_F32);
  g_assert_cmpuint (lse->rank, ==, 3);
  g_assert_cmpint (lse->shape[2], ==, 32);
  check_against_decomposed (sdpa_mask_f32, 1, 0);
}

/* ------------------------------------------------------------------------------------------ */
/* split                                                                                       */

static void
test_split_backward_is_cat (void)
{
  static const char text[] = IMPORTS
    "def computation(x):\n  # x: \"cuda:0 bf16[4, 12]\"\n"
    "  (a, b, c) = ltorch.split(x, 4, 1)\n"
    "  t1 = ltorch.mul(a, b)  # t1: \"cuda:0 bf16[4, 4]\"\n  return (t1,)\n";
  g_autoptr(CsTrace) t = parse_text (text);
  g_autoptr(CsPipeline) pl = run_policy (t, "fusion=off");
  CsTrace *g = cs_pipeline_find_trace (pl, "grad");
  g_autoptr(GPtrArray) cats = calls_of (g, CS_OP_LTORCH_CAT);
  g_autoptr(GPtrArray) pads = calls_of (g, CS_OP_PRIM_PAD);
  g_autoptr(GPtrArray) splits = calls_of (g, CS_OP_LTORCH_SPLIT);
  const CsValue *list;

  /* Thunder's split_backward: the split stays, one cat of the three gradients (zeros for c) */
  g_assert_cmpuint (splits->len, ==, 1);
  g_assert_cmpuint (cats->len, ==, 1);
  g_assert_cmpuint (pads->len, ==, 0);
  list = ((CsStmt *) cats->pdata[0])->args[0].value;
  g_assert_cmpint (list->kind, ==, CS_VALUE_LIST);
  g_assert_cmpuint (list->u.seq.n, ==, 3);
  g_assert_cmpint (((CsStmt *) cats->pdata[0])->args[1].value->u.i, ==, 1);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/core/executors/sdpa-backend", test_sdpa_backend);
  g_test_add_func ("/core/executors/module-buffers", test_module_buffers);
  g_test_add_func ("/core/executors/llama-claims", test_llama_claims);
  g_test_add_func ("/core/executors/llama-sdpa-saved", test_llama_sdpa_saved);
  g_test_add_func ("/core/executors/llama-legacy", test_llama_legacy);
  g_test_add_func ("/core/executors/nvfuser-region-counts", test_nvfuser_region_counts);
  g_test_add_func ("/core/executors/ref-sdpa-flash-xentropy", test_ref_sdpa_flash_xentropy);
  g_test_add_func ("/core/executors/ref-sdpa-mem-efficient", test_ref_sdpa_mem_efficient);
  g_test_add_func ("/core/executors/split-backward-is-cat", test_split_backward_is_cat);
  return g_test_run ();
}
