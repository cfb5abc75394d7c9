/* test-core-attention-claim.c: castscope's attention claim (issue 20, policy attention=fused).
 *
 * - the rewrite of data/attention_softmax.txt (and its benchmark-size twin): one
 *   ltorch.scaled_dot_product_attention with q, k, v, None, 0.0, False and scale= the mul's
 *   literal, t0..t3 gone, t4's statement id kept as origin; no rewrite under attention=pattern;
 * - the variants: a div or a mul with the literal first, no scale (scale 1.0), the causal
 *   mask (tril with -inf, before or after the scale: is_causal=True) claim; a second reader of
 *   t1 or t3, a softmax over another dim or with a dtype, a negative scale, another tril, CPU
 *   tensors do not;
 * - the pipeline: the sdpa executor's flash statements forward and backward;
 * - the CPU reference: the forward output of attention=fused within bf16 rounding of the
 *   pattern's (trace dtypes), and in f64 the outputs and every gradient equal to the
 *   pattern's (the same function, so to f64 rounding).
 */
#include "cs-config.h"

#include <math.h>
#include <string.h>

#include "cs-attention-claim.h"
#include "cs-ops.h"
#include "cs-parse.h"
#include "cs-pipeline.h"
#include "cs-ref.h"
#include "cs-stats.h"
#include "cs-tensor.h"

static char *
sample_text (const char *name)
{
  const char *dir = g_getenv ("CS_DATA_DIR");
  g_autofree char *path = g_build_filename (dir ? dir : "data", name, NULL);
  g_autoptr(GError) error = NULL;
  char *text = NULL;

  g_assert_true (g_file_get_contents (path, &text, NULL, &error));
  g_assert_no_error (error);
  return text;
}

/* @text with its one occurrence of @from replaced by @to. */
static char *
replace_once (const char *text, const char *from, const char *to)
{
  const char *at = strstr (text, from);

  g_assert_nonnull (at);
  g_assert_null (strstr (at + 1, from));
  return g_strdup_printf ("%.*s%s%s", (int) (at - text), text, to, at + strlen (from));
}

static CsTrace *
parse_text (const char *text)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTraceList) list = cs_parse_text (text, strlen (text), "test.txt", &error);

  g_assert_no_error (error);
  g_assert_nonnull (list);
  return cs_trace_ref (list->traces->pdata[0]);
}

static CsPolicy
policy_of (const char *attention)
{
  CsPolicy p;

  cs_policy_init_default (&p);
  g_assert_true (cs_policy_set (&p, "attention", attention, NULL));
  return p;
}

static guint
count_calls (const CsTrace *t, CsOpId id)
{
  guint n = 0;

  for (guint i = 0; i < t->n_stmts; i++)
    if (t->stmts[i]->kind == CS_STMT_CALL && t->stmts[i]->op != NULL && t->stmts[i]->op->id == id)
      n++;
  return n;
}

static const CsStmt *
find_call (const CsTrace *t, CsOpId id)
{
  for (guint i = 0; i < t->n_stmts; i++)
    if (t->stmts[i]->kind == CS_STMT_CALL && t->stmts[i]->op != NULL && t->stmts[i]->op->id == id)
      return t->stmts[i];
  return NULL;
}

static const char *
proxy_name (const CsValue *v)
{
  g_assert_nonnull (v);
  g_assert_cmpint (v->kind, ==, CS_VALUE_PROXY);
  return v->u.proxy->name;
}

/* Claims @text under attention=fused; returns the number of patterns replaced and the
 * rewritten trace in @out. */
static guint
claim (const char *text, CsTrace **out)
{
  g_autoptr(CsTrace) t = parse_text (text);
  CsPolicy p = policy_of ("fused");
  guint n = 99;

  *out = cs_attention_claim_trace (t, &p, &n);
  g_assert_nonnull (*out);
  if (n == 0)
    g_assert_true (*out == t);
  return n;
}

/* The one sdpa statement of @t, checked against the pattern's q, k, v; returns its scale. */
static double
check_sdpa_causal (const CsTrace *t, guint32 t4_id, gboolean causal)
{
  const CsStmt *s = find_call (t, CS_OP_LTORCH_SCALED_DOT_PRODUCT_ATTENTION);
  const CsValue *sc;

  g_assert_nonnull (s);
  g_assert_cmpuint (count_calls (t, CS_OP_LTORCH_SCALED_DOT_PRODUCT_ATTENTION), ==, 1);
  g_assert_cmpuint (count_calls (t, CS_OP_LTORCH_MATMUL), ==, 0);
  g_assert_cmpuint (count_calls (t, CS_OP_LTORCH_TRANSPOSE), ==, 0);
  g_assert_cmpuint (count_calls (t, CS_OP_LTORCH__SOFTMAX), ==, 0);
  g_assert_cmpuint (count_calls (t, CS_OP_LTORCH_MUL), ==, 0);
  g_assert_cmpuint (count_calls (t, CS_OP_LTORCH_DIV), ==, 0);
  g_assert_cmpuint (s->n_args, ==, 7);
  g_assert_cmpstr (proxy_name (s->args[0].value), ==, "q");
  g_assert_cmpstr (proxy_name (s->args[1].value), ==, "k");
  g_assert_cmpstr (proxy_name (s->args[2].value), ==, "v");
  g_assert_cmpint (s->args[3].value->kind, ==, CS_VALUE_NONE);
  g_assert_cmpint (s->args[4].value->kind, ==, CS_VALUE_FLOAT);
  g_assert_cmpfloat (s->args[4].value->u.f, ==, 0.0);
  g_assert_cmpuint (count_calls (t, CS_OP_LTORCH_TRIL), ==, 0);
  g_assert_cmpint (s->args[5].value->kind, ==, CS_VALUE_BOOL);
  g_assert_cmpint (s->args[5].value->u.b, ==, causal);
  g_assert_cmpstr (s->args[6].name, ==, "scale");
  g_assert_cmpstr (cs_stmt_get_output (s)->name, ==, "t4");
  g_assert_cmpstr (s->why, ==, CS_ATTENTION_CLAIM_WHY);
  g_assert_cmpuint (s->origin, ==, t4_id);
  g_assert_cmpuint (s->id, ==, t4_id);
  sc = s->args[6].value;
  g_assert_cmpint (sc->kind, ==, CS_VALUE_FLOAT);
  return sc->u.f;
}

static double
check_sdpa (const CsTrace *t, guint32 t4_id)
{
  return check_sdpa_causal (t, t4_id, FALSE);
}

/* The id of the statement writing t4 in @text as parsed. */
static guint32
t4_stmt_id (const char *text)
{
  g_autoptr(CsTrace) t = parse_text (text);

  for (guint i = 0; i < t->n_stmts; i++)
    {
      CsProxy *o = t->stmts[i]->kind == CS_STMT_CALL ? cs_stmt_get_output (t->stmts[i]) : NULL;
      if (o != NULL && strcmp (o->name, "t4") == 0)
        return t->stmts[i]->id;
    }
  g_assert_not_reached ();
}

static void
test_rewrite_sample (void)
{
  g_autofree char *text = sample_text ("attention_softmax.txt");
  g_autofree char *big = sample_text ("bench/attention_softmax_t2048.txt");
  g_autoptr(CsTrace) t = parse_text (text);
  g_autoptr(CsTrace) c = NULL;
  g_autoptr(CsTrace) c2 = NULL;
  g_autoptr(CsTrace) same = NULL;
  CsPolicy pattern = policy_of ("pattern");
  guint n = 99;

  /* attention=pattern (the default): nothing changes */
  same = cs_attention_claim_trace (t, &pattern, &n);
  g_assert_true (same == t);
  g_assert_cmpuint (n, ==, 0);

  g_assert_cmpuint (claim (text, &c), ==, 1);
  g_assert_cmpfloat (check_sdpa (c, t4_stmt_id (text)), ==, 0.25);
  /* the literal as written: 0.08838834764831843 is 1/sqrt(128) to the digit Python printed */
  g_assert_cmpuint (claim (big, &c2), ==, 1);
  g_assert_cmpfloat (check_sdpa (c2, t4_stmt_id (big)), ==, 0.08838834764831843);
  /* the statement count: 5 calls became 1 */
  g_assert_cmpuint (c->n_stmts + 4, ==, t->n_stmts);
}

static const char mul_line[] = "t2 = ltorch.mul(t1, 0.25)";
static const char sm_line[] = "t3 = ltorch._softmax(t2, -1, dtype=None)";
#define BF16_SCORES "  # t5: \"cuda:0 bf16[2, 4, 32, 32]\"\n  "

/* The sample with the causal mask after the scale (as Thunder's sdpa decomposition writes it)
 * or, @before, between the scores and the scale; @tril is the tril call's argument tail. */
static char *
causal_text (const char *text, gboolean before, const char *tril)
{
  g_autofree char *line = NULL;

  if (!before)
    {
      line = g_strdup_printf ("t5 = ltorch.tril(t2, %s)" BF16_SCORES
                              "t3 = ltorch._softmax(t5, -1, dtype=None)", tril);
      return replace_once (text, sm_line, line);
    }
  line = g_strdup_printf ("t5 = ltorch.tril(t1, %s)" BF16_SCORES
                          "t2 = ltorch.mul(t5, 0.25)", tril);
  return replace_once (text, mul_line, line);
}

/* The forms that claim: div by a literal (scale 1/d), the literal first, no scale. */
static void
test_variants_claim (void)
{
  g_autofree char *text = sample_text ("attention_softmax.txt");
  g_autofree char *div = replace_once (text, mul_line, "t2 = ltorch.div(t1, 8)");
  g_autofree char *first = replace_once (text, mul_line, "t2 = ltorch.mul(0.5, t1)");
  g_autofree char *no_t2 = replace_once (text, "  t2 = ltorch.mul(t1, 0.25)  # t2: \"cuda:0 bf16[2, 4, 32, 32]\"\n", "");
  g_autofree char *none = replace_once (no_t2, "_softmax(t2,", "_softmax(t1,");
  g_autofree char *pub = replace_once (text, "ltorch._softmax(t2, -1, dtype=None)", "ltorch.softmax(t2, dim=3)");
  guint32 id = t4_stmt_id (text);
  g_autoptr(CsTrace) a = NULL, b = NULL, c = NULL, d = NULL;

  g_assert_cmpuint (claim (div, &a), ==, 1);
  g_assert_cmpfloat (check_sdpa (a, id), ==, 0.125);
  g_assert_cmpuint (claim (first, &b), ==, 1);
  g_assert_cmpfloat (check_sdpa (b, id), ==, 0.5);
  g_assert_cmpuint (claim (none, &c), ==, 1);
  g_assert_cmpfloat (check_sdpa (c, t4_stmt_id (none)), ==, 1.0);
  g_assert_cmpuint (claim (pub, &d), ==, 1);
  g_assert_cmpfloat (check_sdpa (d, id), ==, 0.25);
  /* the causal mask, after or before the scale: is_causal=True */
  for (int before = 0; before < 2; before++)
    {
      g_autofree char *causal = causal_text (text, before, "0, fill_value=-float('inf')");
      g_autoptr(CsTrace) e = NULL;

      g_assert_cmpuint (claim (causal, &e), ==, 1);
      g_assert_cmpfloat (check_sdpa_causal (e, t4_stmt_id (causal), TRUE), ==, 0.25);
    }
}

/* The forms that do not: t3 or t1 read again (returned, or by another statement), the softmax
 * over dim 2, a negative scale (its sqrt in the sdpa decomposition is NaN), CPU tensors, a
 * scale that is not a literal. */
static void
test_variants_refused (void)
{
  g_autofree char *text = sample_text ("attention_softmax.txt");
  g_auto(GStrv) parts = g_strsplit (text, "cuda:0", -1);
  g_autofree char *cpu = g_strjoinv ("cpu", parts);
  const char *cases[][2] = {
    { "return (t4,)", "return (t4, t3)" },
    { "return (t4,)", "return (t4, t1)" },
    { "return (t4,)", "t5 = ltorch.add(t1, t2)  # t5: \"cuda:0 bf16[2, 4, 32, 32]\"\n  return (t4, t5)" },
    { "return (t4,)", "t5 = ltorch.exp(t3)  # t5: \"cuda:0 bf16[2, 4, 32, 32]\"\n  return (t4, t5)" },
    { "ltorch.mul(t1, 0.25)", "ltorch.mul(t1, -0.25)" },
    { "ltorch.mul(t1, 0.25)", "ltorch.div(t1, -4)" },
    { "ltorch._softmax(t2, -1, dtype=None)", "ltorch._softmax(t2, 2, dtype=None)" },
    { "ltorch._softmax(t2, -1, dtype=None)", "ltorch._softmax(t2, -1, dtype=dtypes.float32)" },
    { "ltorch.transpose(k, -2, -1)  # t0: \"cuda:0 bf16[2, 4, 16, 32]\"",
      "ltorch.transpose(k, -1, -2)  # t0: \"cuda:0 bf16[2, 4, 16, 32]\"" },   /* claims: control */
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *v = replace_once (text, cases[i][0], cases[i][1]);
      g_autoptr(CsTrace) out = NULL;
      guint want = i + 1 == G_N_ELEMENTS (cases) ? 1 : 0;

      if (strstr (v, "dtypes.") != NULL)
        {
          char *w = replace_once (v, "import thunder\n", "import thunder\nimport thunder.core.dtypes as dtypes\n");
          g_free (v);
          v = w;
        }
      g_test_message ("case %u: %s", i, cases[i][1]);
      g_assert_cmpuint (claim (v, &out), ==, want);
      g_assert_cmpuint (count_calls (out, CS_OP_LTORCH_SCALED_DOT_PRODUCT_ATTENTION), ==, want);
    }
  /* a tril that is not the causal mask: another diagonal, another fill value; a negative
   * scale after the mask (-inf * -0.25 is +inf) */
  {
    const char *trils[] = { "1, fill_value=-float('inf')", "0, fill_value=0.0", "0" };

    for (guint i = 0; i < G_N_ELEMENTS (trils); i++)
      {
        g_autofree char *v = causal_text (text, FALSE, trils[i]);
        g_autoptr(CsTrace) out = NULL;

        g_test_message ("tril %s", trils[i]);
        g_assert_cmpuint (claim (v, &out), ==, 0);
      }
  }
  {
    g_autofree char *v0 = causal_text (text, TRUE, "0, fill_value=-float('inf')");
    g_autofree char *v = replace_once (v0, "ltorch.mul(t5, 0.25)", "ltorch.mul(t5, -0.25)");
    g_autoptr(CsTrace) out = NULL;

    g_assert_cmpuint (claim (v, &out), ==, 0);
  }
  /* CPU tensors: the sdpa executor would refuse them */
  {
    g_autoptr(CsTrace) out = NULL;
    g_assert_nonnull (strstr (cpu, "\"cpu bf16[2, 4, 32, 16]\""));
    g_assert_cmpuint (claim (cpu, &out), ==, 0);
  }
}

/* ---- the pipeline and the CPU reference --------------------------------------------------- */

static CsPipeline *
run_policy (const CsTrace *t, const char *attention)
{
  CsPolicy p = policy_of (attention);
  g_autoptr(GError) error = NULL;
  CsPipeline *pl = cs_pipeline_run (t, &p, NULL, &error);

  g_assert_no_error (error);
  g_assert_nonnull (pl);
  return pl;
}

static gboolean
has_pass (CsPipeline *pl, const char *name)
{
  for (guint i = 0; i < cs_pipeline_n_passes (pl); i++)
    if (strcmp (cs_pipeline_pass_name (pl, i), name) == 0)
      return TRUE;
  return FALSE;
}

/* The FLOPs of the prims.matmul calls in @s and its subsymbols (the innermost level). */
static double
matmul_flops (const CsStmt *s)
{
  double f = 0;

  if (s->n_subs == 0)
    return (s->kind == CS_STMT_CALL && s->op != NULL
            && cs_op_semantic (s->op)->id == CS_OP_PRIM_MATMUL) ? cs_stats_stmt_flops (s) : 0;
  for (guint j = 0; j < s->n_subs; j++)
    f += matmul_flops (s->subs[j]);
  return f;
}

/* attention=fused: the sdpa executor's flash statements, one forward and one backward, and no
 * matmul left; attention=pattern: no claim-attention pass, 2 forward matmuls. */
static void
test_pipeline (void)
{
  g_autofree char *text = sample_text ("attention_softmax.txt");
  g_autoptr(CsTrace) t = parse_text (text);
  g_autoptr(CsPipeline) fused = run_policy (t, "fused");
  g_autoptr(CsPipeline) pattern = run_policy (t, "pattern");
  CsTrace *f = cs_pipeline_get_forward (fused), *b = cs_pipeline_get_backward (fused);
  const CsStmt *fs;

  g_assert_true (has_pass (fused, "claim-attention"));
  g_assert_false (cs_pipeline_attention_claimed_nothing (fused));
  g_assert_false (cs_pipeline_attention_claimed_nothing (pattern));
  {
    /* a matmul and no softmax: nothing to claim, and the pipeline says so */
    g_autofree char *seed = sample_text ("seed_foo.txt");
    g_autoptr(CsTrace) st = parse_text (seed);
    g_autoptr(CsPipeline) none = run_policy (st, "fused");

    g_assert_false (has_pass (none, "claim-attention"));
    g_assert_true (cs_pipeline_attention_claimed_nothing (none));
  }
  g_assert_false (has_pass (pattern, "claim-attention"));
  g_assert_nonnull (b);
  fs = find_call (f, CS_OP_EX_SDPAFX_GRAD_FORWARD_SCALED_DOT_PRODUCT_EFFICIENT_ATTENTION);
  g_assert_nonnull (fs);
  g_assert_cmpuint (fs->origin, ==, t4_stmt_id (text));
  g_assert_cmpuint (count_calls (b, CS_OP_EX_SDPAFX_SCALED_DOT_PRODUCT_EFFICIENT_ATTENTION_BACKWARD), ==, 1);
  {
    g_autoptr(CsTraceStats) sf = cs_stats_compute (f);
    g_autoptr(CsTraceStats) sb = cs_stats_compute (b);
    g_autoptr(CsTraceStats) pf = cs_stats_compute (cs_pipeline_get_forward (pattern));

    g_assert_cmpuint (sf->by_executor[CS_EXECUTOR_SDPA], ==, 1);
    g_assert_cmpuint (sb->by_executor[CS_EXECUTOR_SDPA], ==, 1);
    g_assert_cmpuint (pf->by_executor[CS_EXECUTOR_SDPA], ==, 0);
    g_assert_cmpuint (sf->total.n_matmuls, ==, 0);
    g_assert_cmpuint (pf->total.n_matmuls, ==, 2);
    /* torch.utils.flop_counter's sdpa counts, q/k/v [2, 4, 32, 16]: B = 8, L = S = 32,
     * E = Ev = 16; forward 2*B*L*S*(E + Ev) = 524288, the pattern's two matmuls' FLOPs;
     * backward 2*B*L*S*(3E + 2Ev) = 1310720 (the scores recomputed and four gradient
     * matmuls) */
    g_assert_cmpfloat (cs_stats_stmt_flops (fs), ==, 524288.0);
    g_assert_cmpfloat (cs_stats_stmt_flops (find_call (b, CS_OP_EX_SDPAFX_SCALED_DOT_PRODUCT_EFFICIENT_ATTENTION_BACKWARD)),
                       ==, 1310720.0);
    g_assert_cmpuint (sf->total.n_attention, ==, 1);
    g_assert_cmpuint (sb->total.n_attention, ==, 1);
    g_assert_cmpuint (pf->total.n_attention, ==, 0);
    {
      CsTrace *pt = cs_pipeline_get_forward (pattern);
      double mm = 0;

      for (guint i = 0; i < pt->n_stmts; i++)
        mm += matmul_flops (pt->stmts[i]);
      g_assert_cmpfloat (mm, ==, 524288.0);
    }
  }
}

/* Runs the joint trace of @pl in @mode on inputs drawn per name (cs_ref_random_input, seed 7)
 * and a cotangent per forward output (seed 11); returns name -> tensor of the returned values,
 * the gradient names per flat argument in @grads and the forward outputs in @outs. */
static GHashTable *
run_joint (const CsTrace *init, CsPipeline *pl, CsRefMode mode, GPtrArray *grads, GPtrArray *outs)
{
  CsTrace *j = cs_pipeline_get_joint (pl);
  g_autoptr(GHashTable) env = cs_ref_env_new ();
  GHashTable *ret = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
                                           (GDestroyNotify) cs_tensor_unref);
  g_autoptr(GPtrArray) inputs = cs_trace_dup_inputs (init);
  g_autoptr(GPtrArray) flat = NULL;
  g_autoptr(GError) error = NULL;
  const CsValue *d, *gv = NULL, *fo = NULL;

  g_assert_nonnull (j);
  for (guint i = 0; i < inputs->len; i++)
    {
      CsProxy *p = inputs->pdata[i];
      g_autoptr(CsTensor) x = cs_ref_random_input (init, p, 7, &error);

      g_assert_no_error (error);
      cs_ref_env_insert (env, p->name, x);
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
  g_assert_true (cs_ref_run_env (j, env, mode, 0, &flat, NULL, ret, &error));
  g_assert_no_error (error);
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

/* Compares the forward outputs and the gradients of q, k, v of the two pipelines in @mode:
 * each must differ by less than @tol (relative to the largest magnitude); returns the largest
 * difference seen. */
static double
compare (const CsTrace *t, CsPipeline *a, CsPipeline *b, CsRefMode mode, double tol)
{
  g_autoptr(GPtrArray) g1 = g_ptr_array_new (), g2 = g_ptr_array_new ();
  g_autoptr(GPtrArray) o1 = g_ptr_array_new (), o2 = g_ptr_array_new ();
  g_autoptr(GHashTable) r1 = run_joint (t, a, mode, g1, o1);
  g_autoptr(GHashTable) r2 = run_joint (t, b, mode, g2, o2);
  double worst = 0;

  g_assert_cmpuint (o1->len, ==, 1);
  g_assert_cmpuint (o2->len, ==, 1);
  {
    CsTensor *x = g_hash_table_lookup (r1, ((CsProxy *) o1->pdata[0])->name);
    CsTensor *y = g_hash_table_lookup (r2, ((CsProxy *) o2->pdata[0])->name);
    double r;

    g_assert_nonnull (x);
    g_assert_nonnull (y);
    r = rel_diff (x, y);
    g_test_message ("mode %d output: rel diff %.3g", mode, r);
    g_assert_cmpfloat (r, <, tol);
    worst = MAX (worst, r);
  }
  g_assert_cmpuint (g1->len, ==, 3);
  g_assert_cmpuint (g2->len, ==, 3);
  for (guint i = 0; i < 3; i++)
    {
      CsTensor *x, *y;
      double r;

      g_assert_nonnull (g1->pdata[i]);
      g_assert_nonnull (g2->pdata[i]);
      x = g_hash_table_lookup (r1, g1->pdata[i]);
      y = g_hash_table_lookup (r2, g2->pdata[i]);
      g_assert_nonnull (x);
      g_assert_nonnull (y);
      r = rel_diff (x, y);
      g_test_message ("mode %d grad %u: rel diff %.3g", mode, i, r);
      g_assert_cmpfloat (r, <, tol);
      worst = MAX (worst, r);
    }
  return worst;
}

/* The CPU reference: in f64 the fused attention is the same function as the pattern (outputs
 * and the gradients of q, k, v to f64 rounding); in the trace dtypes (bf16) it differs by the
 * pattern's roundings of the scores and probabilities, within a few bf16 ulps of the largest
 * value (bf16's unit roundoff is 2^-8 = 3.9e-3). */
static void
check_ref (const char *text)
{
  g_autoptr(CsTrace) t = parse_text (text);
  g_autoptr(CsPipeline) fused = run_policy (t, "fused");
  g_autoptr(CsPipeline) pattern = run_policy (t, "pattern");
  double exact;

  compare (t, fused, pattern, CS_REF_F64, 1e-12);
  exact = compare (t, fused, pattern, CS_REF_EXACT, 4 * 3.9e-3);
  /* the roundings differ: the two bf16 computations are not bit-identical */
  g_assert_cmpfloat (exact, >, 0);
}

static void
test_ref (void)
{
  g_autofree char *text = sample_text ("attention_softmax.txt");

  check_ref (text);
}

/* The causal variant: the sdpa statement with is_causal=True computes what the tril does */
static void
test_ref_causal (void)
{
  g_autofree char *text = sample_text ("attention_softmax.txt");
  g_autofree char *causal = causal_text (text, FALSE, "0, fill_value=-float('inf')");
  g_autoptr(CsTrace) t = parse_text (causal);
  g_autoptr(CsPipeline) fused = run_policy (t, "fused");
  const CsStmt *fs = find_call (cs_pipeline_get_forward (fused),
                                CS_OP_EX_SDPAFX_GRAD_FORWARD_SCALED_DOT_PRODUCT_EFFICIENT_ATTENTION);

  g_assert_nonnull (fs);
  g_assert_cmpint (fs->args[4].value->kind, ==, CS_VALUE_BOOL);   /* is_causal */
  g_assert_true (fs->args[4].value->u.b);
  check_ref (causal);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, G_TEST_OPTION_ISOLATE_DIRS, NULL);
  g_test_add_func ("/core/attention-claim/rewrite-sample", test_rewrite_sample);
  g_test_add_func ("/core/attention-claim/variants-claim", test_variants_claim);
  g_test_add_func ("/core/attention-claim/variants-refused", test_variants_refused);
  g_test_add_func ("/core/attention-claim/pipeline", test_pipeline);
  g_test_add_func ("/core/attention-claim/ref", test_ref);
  g_test_add_func ("/core/attention-claim/ref-causal", test_ref_causal);
  return g_test_run ();
}
