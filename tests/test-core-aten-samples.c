/* test-core-aten-samples.c: every torch.compile sample of data/aten (issue 22) through the
 * pipeline and the CPU reference, one test path per file (`-p /core/aten/sample/NAME`):
 *
 *  1. the forward and its backward run in exact mode and in f64 mode with random inputs;
 *     every float output is finite and its exact run is within a bf16-sized relative error of
 *     the f64 run (rel. L2 <= 2^-4: a wrong dtype, a lost cast or a wrong rounding at one op
 *     passes, a wrong formula in exact mode alone does not);
 *  2. the graph's f64 twin (every float annotation and dtype argument made f64) checks the
 *     backward against the forward: for each float input with a gradient, the directional
 *     derivative of L = sum_k <tangent_k, out_k> by central finite differences equals
 *     <grad, direction>.  This checks the CPU reference of every aten op of the file (forward
 *     and backward kernels: sdpa, gather, split, logical_and, fma ...) against the other side.
 *
 * Plus the SDPA backends' kernels alone (cuDNN with a bias and is_causal, the efficient form
 * with its grad_bias): the forward against softmax(q k^T * scale + bias) v computed here in
 * f64, the backward against finite differences of that forward.
 */
#include "cs-config.h"

#include <math.h>
#include <string.h>

#include "cs-aten.h"
#include "cs-aten-match.h"
#include "cs-parse.h"
#include "cs-pipeline.h"
#include "cs-policy.h"
#include "cs-ref.h"
#include "cs-stats.h"
#include "cs-tensor.h"

static const char * const samples[] = {
  "attention_softmax_bf16", "cross_entropy_bf16", "gpt_block_bf16", "llama_block_bf16",
  "ln_linear_gelu_handmade", "ln_mlp_residual_autocast", "ln_mlp_residual_bf16",
  "mlp_gelu_autocast", "mlp_gelu_bf16", "rmsnorm_swiglu_autocast", "rmsnorm_swiglu_bf16",
  "seed_foo_autocast", "seed_foo_bf16", "seed_foo_handmade",
};

static char *
sample_text (const char *name)
{
  const char *dir = g_getenv ("CS_DATA_DIR");
  g_autofree char *file = g_strconcat (name, ".txt", NULL);
  g_autofree char *path = g_build_filename (dir ? dir : "data", "aten", file, NULL);
  char *text = NULL;
  g_autoptr(GError) error = NULL;

  g_file_get_contents (path, &text, NULL, &error);
  g_assert_no_error (error);
  return text;
}

static char *
replace_all (const char *s, const char *from, const char *to)
{
  g_auto(GStrv) parts = g_strsplit (s, from, -1);

  return g_strjoinv (to, parts);
}

/* The f64 twin of a printed graph: every float annotation ("bf16[", "f32[", "f16[") and
 * every float dtype argument made f64 (converts between float dtypes become no-ops). */
static char *
f64_twin (const char *text)
{
  static const char * const pairs[][2] = {
    { "\"bf16[", "\"f64[" }, { "\"f32[", "\"f64[" }, { "\"f16[", "\"f64[" },
    { "torch.bfloat16", "torch.float64" }, { "torch.float32", "torch.float64" },
    { "torch.float16", "torch.float64" },
  };
  char *cur = g_strdup (text);

  for (gsize i = 0; i < G_N_ELEMENTS (pairs); i++)
    {
      char *next = replace_all (cur, pairs[i][0], pairs[i][1]);
      g_free (cur);
      cur = next;
    }
  return cur;
}

typedef struct
{
  CsTraceList *list;
  CsPipeline  *pl;
  CsTrace     *fw;       /* borrowed from pl */
  CsTrace     *bw;       /* borrowed from pl */
  CsTrace     *fw_in;    /* the forward graph as read (its parameters: the primals) */
  guint        n_user;   /* the forward's user outputs, returned before the saved tensors */
} Pair;

static void
pair_clear (Pair *p)
{
  g_clear_pointer (&p->pl, cs_pipeline_unref);
  g_clear_pointer (&p->list, cs_trace_list_unref);
}

static void
pair_load (Pair *p, const char *text, const char *file)
{
  g_autoptr(GError) error = NULL;
  CsTrace *bw_in;

  memset (p, 0, sizeof *p);
  p->list = cs_parse_text (text, strlen (text), file, &error);
  g_assert_no_error (error);
  g_assert_nonnull (p->list);
  p->fw_in = p->list->traces->pdata[0];
  g_assert_cmpint (cs_trace_aten_role (p->fw_in), ==, CS_ATEN_GRAPH_FORWARD);
  bw_in = cs_aten_find_backward (p->list, 0);
  g_assert_nonnull (bw_in);
  p->pl = cs_pipeline_run_pair (p->fw_in, bw_in, NULL, &error);
  g_assert_no_error (error);
  p->fw = cs_pipeline_get_forward (p->pl);
  p->bw = cs_pipeline_get_backward (p->pl);
  g_assert_nonnull (p->fw);
  g_assert_nonnull (p->bw);
  {
    g_autoptr(GPtrArray) rets = g_ptr_array_new ();
    CsStmt *ret = cs_trace_get_return (p->fw_in);

    g_assert_nonnull (ret);
    cs_value_collect_proxies (ret->value, rets);
    g_assert_cmpuint (rets->len, >, cs_aten_n_saved (p->fw_in, bw_in));
    p->n_user = rets->len - cs_aten_n_saved (p->fw_in, bw_in);
  }
}

/* Random values for every leaf input of @t that @env does not hold yet. */
static void
fill_inputs (const CsTrace *t, GHashTable *env, guint64 seed)
{
  g_autoptr(GPtrArray) leaves = cs_ref_dup_leaf_inputs (t);

  for (guint i = 0; i < leaves->len; i++)
    {
      const CsProxy *p = leaves->pdata[i];
      g_autoptr(GError) error = NULL;
      g_autoptr(CsTensor) v = NULL;

      if (g_hash_table_contains (env, p->name))
        continue;
      v = cs_ref_random_input (t, p, seed, &error);
      g_assert_no_error (error);
      cs_ref_env_insert (env, p->name, v);
    }
}

static GHashTable *
env_copy (GHashTable *env)
{
  GHashTable *c = cs_ref_env_new ();
  GHashTableIter it;
  gpointer k, v;

  g_hash_table_iter_init (&it, env);
  while (g_hash_table_iter_next (&it, &k, &v))
    cs_ref_env_insert (c, k, v);
  return c;
}

static double
rel_l2 (const CsTensor *a, const CsTensor *b)
{
  double num = 0, den = 0;

  g_assert_cmpint (a->numel, ==, b->numel);
  for (int64_t i = 0; i < a->numel; i++)
    {
      double x = cs_tensor_get_f64 (a, i), y = cs_tensor_get_f64 (b, i);
      num += (x - y) * (x - y);
      den += y * y;
    }
  return den > 0 ? sqrt (num / den) : sqrt (num);
}

/* Runs @t in exact mode on @ex and in f64 mode on @f6 (the same inputs, or what the two runs
 * of the forward returned); checks every float output as the file comment says (1) and
 * fills @ret_ex / @ret_f6 with the returned values. */
static void
run_both (const CsTrace *t, GHashTable *ex, GHashTable *f6, GHashTable *ret_ex,
          GHashTable *ret_f6, const char *what)
{
  g_autoptr(GPtrArray) xo = NULL, fo = NULL, xn = NULL;
  g_autoptr(GError) error = NULL;
  guint n_float = 0;

  cs_ref_run_env (t, ex, CS_REF_EXACT, 0, &xo, &xn, ret_ex, &error);
  g_assert_no_error (error);
  cs_ref_run_env (t, f6, CS_REF_F64, 0, &fo, NULL, ret_f6, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (xo->len, ==, fo->len);
  for (guint i = 0; i < xo->len; i++)
    {
      const CsTensor *x = xo->pdata[i], *f = fo->pdata[i];
      double err;

      if (x == NULL || !cs_dtype_is_float (x->dtype))
        continue;
      for (int64_t k = 0; k < x->numel; k++)
        if (!isfinite (cs_tensor_get_f64 (x, k)))
          g_error ("%s output %s: element %" G_GINT64_FORMAT " is not finite", what,
                   (const char *) xn->pdata[i], k);
      err = rel_l2 (x, f);
      g_test_message ("%s %s (%s): rel. L2 error %.3g", what, (const char *) xn->pdata[i],
                      cs_dtype_short_name (x->dtype), err);
      if (!(err <= 0.0625))
        g_error ("%s output %s: exact run is %.3g (rel. L2) from the f64 run", what,
                 (const char *) xn->pdata[i], err);
      n_float++;
    }
  g_assert_cmpuint (n_float, >=, 1);
}

/* L = sum over the user outputs of <tangent, out>, the forward run in f64 on @env. */
static double
loss (const Pair *p, GHashTable *env, GHashTable *tangents)
{
  g_autoptr(GHashTable) e = env_copy (env);
  g_autoptr(GPtrArray) outs = NULL;
  g_autoptr(GError) error = NULL;
  double l = 0;

  cs_ref_run_env (p->fw, e, CS_REF_F64, 0, &outs, NULL, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (outs->len, >=, p->n_user);
  for (guint k = 0; k < p->n_user; k++)
    {
      g_autofree char *tn = g_strdup_printf ("tangents_%u", k + 1);
      const CsTensor *o = outs->pdata[k], *t = g_hash_table_lookup (tangents, tn);

      g_assert_nonnull (t);
      g_assert_cmpint (o->numel, ==, t->numel);
      for (int64_t i = 0; i < o->numel; i++)
        l += cs_tensor_get_f64 (o, i) * cs_tensor_get_f64 (t, i);
    }
  return l;
}

/* The check (2) of the file comment on the f64 twin @p; returns how many inputs it checked. */
static guint
check_fd (const Pair *p)
{
  g_autoptr(GHashTable) env = cs_ref_env_new ();
  g_autoptr(GHashTable) tangents = cs_ref_env_new ();
  g_autoptr(GHashTable) ret = NULL;
  g_autoptr(GPtrArray) grads = NULL;
  g_autoptr(GError) error = NULL;
  CsStmt *bret = cs_trace_get_return (p->bw);
  guint n = 0;

  fill_inputs (p->fw, env, 11);
  ret = cs_ref_env_new ();
  {
    /* the backward's inputs by position: the saved tensors are the forward's returns after
     * its user outputs, in the backward's parameter order (torch/_functorch/partitioners.py),
     * then the tangents; positions, not names, since the f64 twin's passes may rename a saved
     * convert that became a no-op */
    g_autoptr(GHashTable) e = env_copy (env);
    g_autoptr(GHashTable) one = cs_ref_env_new ();
    g_autoptr(GPtrArray) fo = NULL;

    cs_ref_run_env (p->fw, e, CS_REF_F64, 0, &fo, NULL, NULL, &error);
    g_assert_no_error (error);
    fill_inputs (p->bw, one, 23);
    for (guint i = 0; i < p->bw->n_params; i++)
      {
        const char *nm = p->bw->params[i].name;

        g_assert_nonnull (nm);
        if (g_str_has_prefix (nm, "tangents_"))
          {
            cs_ref_env_insert (tangents, nm, g_hash_table_lookup (one, nm));
            cs_ref_env_insert (ret, nm, g_hash_table_lookup (one, nm));
            continue;
          }
        g_assert_cmpuint (p->n_user + i, <, fo->len);
        g_assert_nonnull (fo->pdata[p->n_user + i]);
        cs_ref_env_insert (ret, nm, fo->pdata[p->n_user + i]);
      }
  }
  g_assert_cmpuint (g_hash_table_size (tangents), ==, p->n_user);
  cs_ref_run_env (p->bw, ret, CS_REF_F64, 0, &grads, NULL, NULL, &error);
  g_assert_no_error (error);
  /* AOT's backward returns one gradient (or None) per forward input, in their order */
  g_assert_nonnull (bret);
  g_assert_cmpint (bret->value->kind, ==, CS_VALUE_TUPLE);
  g_assert_cmpuint (bret->value->u.seq.n, ==, p->fw_in->n_params);
  g_assert_cmpuint (grads->len, ==, bret->value->u.seq.n);
  {
    for (guint i = 0; i < bret->value->u.seq.n; i++)
      {
        const CsValue *rv = bret->value->u.seq.items[i];
        const char *pname = p->fw_in->params[i].name;
        CsTensor *x0, *g;
        g_autoptr(CsTensor) dir = NULL;
        double an = 0, scale = 0, fd, h = 1e-6, lp = 0, lm = 0;

        if (rv->kind != CS_VALUE_PROXY)
          continue;   /* None: no gradient (an integer input) */
        g = grads->pdata[i];
        g_assert_nonnull (g);
        x0 = g_hash_table_lookup (env, pname);
        g_assert_nonnull (x0);
        g_assert_cmpint (x0->numel, ==, g->numel);
        dir = cs_tensor_new (x0->dtype, x0->shape, x0->rank, NULL);
        {
          GRand *r = g_rand_new_with_seed (97 + i);
          for (int64_t k = 0; k < dir->numel; k++)
            cs_tensor_set_f64 (dir, k, g_rand_double_range (r, -1, 1));
          g_rand_free (r);
        }
        for (int64_t k = 0; k < g->numel; k++)
          {
            an += cs_tensor_get_f64 (g, k) * cs_tensor_get_f64 (dir, k);
            scale += fabs (cs_tensor_get_f64 (g, k) * cs_tensor_get_f64 (dir, k));
          }
        for (int sgn = -1; sgn <= 1; sgn += 2)
          {
            g_autoptr(GHashTable) e = env_copy (env);
            g_autoptr(CsTensor) xs = cs_tensor_new (x0->dtype, x0->shape, x0->rank, NULL);

            for (int64_t k = 0; k < xs->numel; k++)
              cs_tensor_set_f64 (xs, k, cs_tensor_get_f64 (x0, k) + sgn * h * cs_tensor_get_f64 (dir, k));
            cs_ref_env_insert (e, pname, xs);
            if (sgn < 0)
              lm = loss (p, e, tangents);
            else
              lp = loss (p, e, tangents);
          }
        fd = (lp - lm) / (2 * h);
        g_test_message ("d/d%s: backward %.12g, finite differences %.12g", pname, an, fd);
        if (!(fabs (fd - an) <= 1e-6 * (scale + 1e-3)))
          g_error ("gradient of %s: the backward gives %.12g, finite differences %.12g",
                   pname, an, fd);
        n++;
      }
  }
  return n;
}

static void
test_sample (gconstpointer data)
{
  const char *name = data;
  g_autofree char *text = sample_text (name);
  g_autofree char *twin = f64_twin (text);
  g_autofree char *file = g_strconcat (name, ".txt", NULL);
  Pair p, q;

  /* 1: both modes on the graph as printed */
  pair_load (&p, text, file);
  {
    g_autoptr(GHashTable) env = cs_ref_env_new ();
    g_autoptr(GHashTable) env2 = NULL;
    g_autoptr(GHashTable) rx = cs_ref_env_new (), rf = cs_ref_env_new ();
    g_autoptr(GHashTable) tangents = cs_ref_env_new ();
    GHashTableIter it;
    gpointer k, v;

    fill_inputs (p.fw, env, 5);
    env2 = env_copy (env);
    run_both (p.fw, env, env2, rx, rf, "forward");
    /* the tangents, the same values for both runs */
    for (guint i = 0; i < p.bw->n_params; i++)
      if (p.bw->params[i].name && g_str_has_prefix (p.bw->params[i].name, "tangents_"))
        g_assert_false (g_hash_table_contains (rx, p.bw->params[i].name));
    fill_inputs (p.bw, tangents, 6);
    g_hash_table_iter_init (&it, tangents);
    while (g_hash_table_iter_next (&it, &k, &v))
      if (!g_hash_table_contains (rx, k))
        {
          cs_ref_env_insert (rx, k, v);
          cs_ref_env_insert (rf, k, v);
        }
    run_both (p.bw, rx, rf, NULL, NULL, "backward");
  }
  pair_clear (&p);
  /* 2: the backward against finite differences of the forward, on the f64 twin */
  pair_load (&q, twin, file);
  g_assert_cmpuint (check_fd (&q), >=, 1);
  pair_clear (&q);
  /* 3: the command a user types: `castscope-cli run --device cpu FILE` runs both and exits 0 */
  if (g_getenv ("CS_CLI") != NULL)
    {
      const char *dir = g_getenv ("CS_DATA_DIR");
      g_autofree char *path = g_build_filename (dir ? dir : "data", "aten", file, NULL);
      const char *argv[] = { g_getenv ("CS_CLI"), "run", "--device", "cpu", path, NULL };
      g_autofree char *out = NULL, *err = NULL;
      g_autoptr(GError) error = NULL;
      int status = 0;

      g_spawn_sync (NULL, (char **) argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, &out, &err,
                    &status, &error);
      g_assert_no_error (error);
      if (!g_spawn_check_wait_status (status, NULL))
        g_error ("castscope-cli run --device cpu %s failed: %s", file, err);
      g_assert_nonnull (strstr (out, "forward (forward)"));
      g_assert_nonnull (strstr (out, "backward (backward_fn)"));
    }
}

/* ------------------------------------------------------------------------------------------ */
/* The SDPA backends' kernels alone                                                            */

#define SDPA_T "f64[1, 2, 5, 3][30, 15, 3, 1]cpu"
#define SDPA_B "f64[1, 2, 5, 5][50, 25, 5, 1]cpu"
#define SDPA_L "f64[1, 2, 5, 1][10, 5, 1, 1]cpu"
#define SDPA_LE "f64[1, 2, 5][10, 5, 1]cpu"
#define SDPA_I "i64[][]cpu"

/* cuDNN's forward and backward with a float bias and is_causal, scale 0.7 */
static const char sdpa_cudnn_text[] =
  " ===== Forward graph 0 =====\n"
  " class GraphModule(torch.nn.Module):\n"
  "    def forward(self, primals_1: \"" SDPA_T "\", primals_2: \"" SDPA_T "\", primals_3: \"" SDPA_T "\", primals_4: \"" SDPA_B "\"):\n"
  "        sdpa = torch.ops.aten._scaled_dot_product_cudnn_attention.default(primals_1, primals_2, primals_3, primals_4, True, 0.0, True, scale = 0.7)\n"
  "        getitem: \"" SDPA_T "\" = sdpa[0]\n"
  "        getitem_1: \"" SDPA_L "\" = sdpa[1]\n"
  "        getitem_2: \"" SDPA_I "\" = sdpa[6]\n"
  "        getitem_3: \"" SDPA_I "\" = sdpa[7];  sdpa = None\n"
  "        return (getitem, primals_1, primals_2, primals_3, primals_4, getitem, getitem_1, getitem_2, getitem_3)\n"
  "\n"
  " ===== Backward graph 0 =====\n"
  " class GraphModule(torch.nn.Module):\n"
  "    def forward(self, primals_1: \"" SDPA_T "\", primals_2: \"" SDPA_T "\", primals_3: \"" SDPA_T "\", primals_4: \"" SDPA_B "\", getitem: \"" SDPA_T "\", getitem_1: \"" SDPA_L "\", getitem_2: \"" SDPA_I "\", getitem_3: \"" SDPA_I "\", tangents_1: \"" SDPA_T "\"):\n"
  "        bw = torch.ops.aten._scaled_dot_product_cudnn_attention_backward.default(tangents_1, primals_1, primals_2, primals_3, getitem, getitem_1, getitem_2, getitem_3, primals_4, None, None, 5, 5, 0.0, True, scale = 0.7)\n"
  "        getitem_4: \"" SDPA_T "\" = bw[0]\n"
  "        getitem_5: \"" SDPA_T "\" = bw[1]\n"
  "        getitem_6: \"" SDPA_T "\" = bw[2];  bw = None\n"
  "        return (getitem_4, getitem_5, getitem_6, None)\n"
  "\n";

/* The efficient backend: bias without is_causal, scale None, grad_bias as the fourth output */
static const char sdpa_mem_text[] =
  " ===== Forward graph 0 =====\n"
  " class GraphModule(torch.nn.Module):\n"
  "    def forward(self, primals_1: \"" SDPA_T "\", primals_2: \"" SDPA_T "\", primals_3: \"" SDPA_T "\", primals_4: \"" SDPA_B "\"):\n"
  "        sdpa = torch.ops.aten._scaled_dot_product_efficient_attention.default(primals_1, primals_2, primals_3, primals_4, True)\n"
  "        getitem: \"" SDPA_T "\" = sdpa[0]\n"
  "        getitem_1: \"" SDPA_LE "\" = sdpa[1]\n"
  "        getitem_2: \"" SDPA_I "\" = sdpa[2]\n"
  "        getitem_3: \"" SDPA_I "\" = sdpa[3];  sdpa = None\n"
  "        return (getitem, primals_1, primals_2, primals_3, primals_4, getitem, getitem_1, getitem_2, getitem_3)\n"
  "\n"
  " ===== Backward graph 0 =====\n"
  " class GraphModule(torch.nn.Module):\n"
  "    def forward(self, primals_1: \"" SDPA_T "\", primals_2: \"" SDPA_T "\", primals_3: \"" SDPA_T "\", primals_4: \"" SDPA_B "\", getitem: \"" SDPA_T "\", getitem_1: \"" SDPA_LE "\", getitem_2: \"" SDPA_I "\", getitem_3: \"" SDPA_I "\", tangents_1: \"" SDPA_T "\"):\n"
  "        bw = torch.ops.aten._scaled_dot_product_efficient_attention_backward.default(tangents_1, primals_1, primals_2, primals_3, primals_4, getitem, getitem_1, getitem_2, getitem_3, 0.0, [True, True, True, True])\n"
  "        getitem_4: \"" SDPA_T "\" = bw[0]\n"
  "        getitem_5: \"" SDPA_T "\" = bw[1]\n"
  "        getitem_6: \"" SDPA_T "\" = bw[2]\n"
  "        getitem_7: \"" SDPA_B "\" = bw[3];  bw = None\n"
  "        return (getitem_4, getitem_5, getitem_6, getitem_7)\n"
  "\n";

/* softmax(q k^T * scale + bias, causal top-left) v for [1, 2, 5, 3] operands, in f64 */
static void
sdpa_by_hand (GHashTable *env, double scale, gboolean causal, double *out)
{
  const CsTensor *q = g_hash_table_lookup (env, "primals_1");
  const CsTensor *k = g_hash_table_lookup (env, "primals_2");
  const CsTensor *v = g_hash_table_lookup (env, "primals_3");
  const CsTensor *b = g_hash_table_lookup (env, "primals_4");

  for (int h = 0; h < 2; h++)
    for (int i = 0; i < 5; i++)
      {
        double s[5], m = -INFINITY, z = 0;

        for (int j = 0; j < 5; j++)
          {
            double d = 0;
            for (int e = 0; e < 3; e++)
              d += cs_tensor_get_f64 (q, (h * 5 + i) * 3 + e) * cs_tensor_get_f64 (k, (h * 5 + j) * 3 + e);
            s[j] = causal && j > i ? -INFINITY : d * scale + cs_tensor_get_f64 (b, (h * 5 + i) * 5 + j);
            m = MAX (m, s[j]);
          }
        for (int j = 0; j < 5; j++)
          z += s[j] = exp (s[j] - m);
        for (int e = 0; e < 3; e++)
          {
            double acc = 0;
            for (int j = 0; j < 5; j++)
              acc += s[j] / z * cs_tensor_get_f64 (v, (h * 5 + j) * 3 + e);
            out[(h * 5 + i) * 3 + e] = acc;
          }
      }
}

static void
check_sdpa (const char *text, double scale, gboolean causal, guint n_grads)
{
  Pair p;
  g_autoptr(GHashTable) env = cs_ref_env_new ();
  g_autoptr(GHashTable) e = NULL;
  g_autoptr(GPtrArray) outs = NULL;
  g_autoptr(GError) error = NULL;
  double want[30];

  pair_load (&p, text, "sdpa.txt");
  g_assert_cmpuint (p.n_user, ==, 1);
  fill_inputs (p.fw, env, 3);
  e = env_copy (env);
  cs_ref_run_env (p.fw, e, CS_REF_F64, 0, &outs, NULL, NULL, &error);
  g_assert_no_error (error);
  sdpa_by_hand (env, scale, causal, want);
  for (int i = 0; i < 30; i++)
    g_assert_cmpfloat_with_epsilon (cs_tensor_get_f64 (outs->pdata[0], i), want[i], 1e-12);
  /* row 0 of a causal head attends to key 0 alone: out[0] = v[0] */
  if (causal)
    for (int e2 = 0; e2 < 3; e2++)
      g_assert_cmpfloat_with_epsilon (cs_tensor_get_f64 (outs->pdata[0], e2),
                                      cs_tensor_get_f64 (g_hash_table_lookup (env, "primals_3"), e2), 1e-14);
  g_assert_cmpuint (check_fd (&p), ==, n_grads);
  pair_clear (&p);
}

/* Inference: the efficient backend without logsumexp (compute_log_sumexp=False: an empty one
 * of [1, 2, 0]), is_causal, no bias */
static const char sdpa_nolse_text[] =
  "class GraphModule(torch.nn.Module):\n"
  "    def forward(self, primals_1: \"" SDPA_T "\", primals_2: \"" SDPA_T "\", primals_3: \"" SDPA_T "\", primals_4: \"" SDPA_B "\"):\n"
  "        sdpa = torch.ops.aten._scaled_dot_product_efficient_attention.default(primals_1, primals_2, primals_3, None, False, 0.0, True)\n"
  "        getitem: \"" SDPA_T "\" = sdpa[0]\n"
  "        getitem_1: \"f64[1, 2, 0][0, 0, 1]cpu\" = sdpa[1];  sdpa = None\n"
  "        return (getitem, getitem_1)\n"
  "        \n";

static void
test_sdpa_no_lse (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTraceList) list = cs_parse_text (sdpa_nolse_text, strlen (sdpa_nolse_text), "s.txt", &error);
  g_autoptr(CsPipeline) pl = NULL;
  g_autoptr(GHashTable) env = cs_ref_env_new ();
  g_autoptr(GHashTable) e = NULL;
  g_autoptr(GPtrArray) outs = NULL;
  double want[30];
  int64_t s25[4] = { 1, 2, 5, 5 };
  g_autoptr(CsTensor) zero_bias = cs_tensor_new (CS_DTYPE_F64, s25, 4, NULL);

  g_assert_no_error (error);
  pl = cs_pipeline_run (list->traces->pdata[0], NULL, NULL, &error);
  g_assert_no_error (error);
  for (int64_t i = 0; i < zero_bias->numel; i++)
    cs_tensor_set_f64 (zero_bias, i, 0);
  fill_inputs (cs_pipeline_get_forward (pl), env, 9);
  cs_ref_env_insert (env, "primals_4", zero_bias);   /* unread by the graph; the hand check's */
  e = env_copy (env);
  cs_ref_run_env (cs_pipeline_get_forward (pl), e, CS_REF_EXACT, 0, &outs, NULL, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpint (((CsTensor *) outs->pdata[1])->numel, ==, 0);
  sdpa_by_hand (env, 1.0 / sqrt (3.0), TRUE, want);
  for (int i = 0; i < 30; i++)   /* exact mode on f64 operands: f64 math */
    g_assert_cmpfloat_with_epsilon (cs_tensor_get_f64 (outs->pdata[0], i), want[i], 1e-12);
}

static void
test_sdpa_cudnn (void)
{
  check_sdpa (sdpa_cudnn_text, 0.7, TRUE, 3);
}

static void
test_sdpa_efficient (void)
{
  check_sdpa (sdpa_mem_text, 1.0 / sqrt (3.0), FALSE, 4);
}

/* ------------------------------------------------------------------------------------------ */
/* The ops added for the samples, against values worked out by hand                           */

static const char ops_text[] =
  "class GraphModule(torch.nn.Module):\n"
  "    def forward(self, x: \"f64[2, 3][3, 1]cpu\", idx: \"i64[2, 2][2, 1]cpu\", m: \"b8[3][1]cpu\"):\n"
  "        gather: \"f64[2, 2][2, 1]cpu\" = torch.ops.aten.gather.default(x, 1, idx)\n"
  "        split = torch.ops.aten.split.Tensor(x, 2, 1)\n"
  "        getitem: \"f64[2, 2][3, 1]cpu\" = split[0]\n"
  "        getitem_1: \"f64[2, 1][3, 1]cpu\" = split[1];  split = None\n"
  "        split_with_sizes = torch.ops.aten.split_with_sizes.default(x, [1, 2], 1)\n"
  "        getitem_2: \"f64[2, 2][3, 1]cpu\" = split_with_sizes[1];  split_with_sizes = None\n"
  "        le: \"b8[2, 3][3, 1]cpu\" = torch.ops.aten.le.Scalar(x, 3)\n"
  "        ne: \"b8[2, 3][3, 1]cpu\" = torch.ops.aten.ne.Scalar(x, 2)\n"
  "        logical_and: \"b8[2, 3][3, 1]cpu\" = torch.ops.aten.logical_and.default(le, ne)\n"
  "        bitwise_not: \"b8[2, 3][3, 1]cpu\" = torch.ops.aten.bitwise_not.default(logical_and)\n"
  "        logical_or: \"b8[2, 3][3, 1]cpu\" = torch.ops.aten.logical_or.default(m, le)\n"
  "        logical_xor: \"b8[2, 3][3, 1]cpu\" = torch.ops.aten.logical_xor.default(le, x)\n"
  "        sub: \"f64[2, 3][3, 1]cpu\" = torch.ops.aten.sub.Tensor(x, 2)\n"
  "        logical_not: \"b8[2, 3][3, 1]cpu\" = torch.ops.aten.logical_not.default(sub)\n"
  "        fma: \"f64[2, 3][3, 1]cpu\" = torch.ops.prims.fma.default(x, x, ne)\n"
  "        return (gather, getitem, getitem_1, getitem_2, logical_and, bitwise_not, logical_or, logical_xor, logical_not, fma)\n"
  "        \n";

static void
test_ops_values (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTraceList) list = cs_parse_text (ops_text, strlen (ops_text), "ops.txt", &error);
  g_autoptr(CsPipeline) pl = NULL;
  g_autoptr(GHashTable) env = cs_ref_env_new ();
  g_autoptr(GPtrArray) outs = NULL;
  int64_t s23[2] = { 2, 3 }, s22[2] = { 2, 2 }, s3 = 3;
  g_autoptr(CsTensor) x = cs_tensor_new (CS_DTYPE_F64, s23, 2, NULL);
  g_autoptr(CsTensor) idx = cs_tensor_new (CS_DTYPE_I64, s22, 2, NULL);
  g_autoptr(CsTensor) m = cs_tensor_new (CS_DTYPE_B8, &s3, 1, NULL);
  static const double xs[6] = { 1, 2, 3, 4, 5, 6 }, is[4] = { 2, 0, 1, 1 }, ms[3] = { 0, 1, 0 };
  /* x = [[1, 2, 3], [4, 5, 6]]; le = x <= 3 = [[T, T, T], [F, F, F]]; ne = x != 2 =
   * [[T, F, T], [T, T, T]]; m broadcasts over the rows */
  static const struct { guint n; double v[6]; } want[10] = {
    { 4, { 3, 1, 5, 5 } },                  /* gather(x, 1, [[2, 0], [1, 1]]) */
    { 4, { 1, 2, 4, 5 } },                  /* split(x, 2, 1)[0] */
    { 2, { 3, 6 } },                        /* split(x, 2, 1)[1] */
    { 4, { 2, 3, 5, 6 } },                  /* split_with_sizes(x, [1, 2], 1)[1] */
    { 6, { 1, 0, 1, 0, 0, 0 } },            /* le & ne */
    { 6, { 0, 1, 0, 1, 1, 1 } },            /* ~(le & ne) on bools: logical not */
    { 6, { 1, 1, 1, 0, 1, 0 } },            /* m | le */
    { 6, { 0, 0, 0, 1, 1, 1 } },            /* le ^ (x != 0) */
    { 6, { 0, 1, 0, 0, 0, 0 } },            /* !(x - 2) */
    { 6, { 2, 4, 10, 17, 26, 37 } },        /* x * x + ne */
  };

  g_assert_no_error (error);
  for (int i = 0; i < 6; i++)
    cs_tensor_set_f64 (x, i, xs[i]);
  for (int i = 0; i < 4; i++)
    cs_tensor_set_f64 (idx, i, is[i]);
  for (int i = 0; i < 3; i++)
    cs_tensor_set_f64 (m, i, ms[i]);
  pl = cs_pipeline_run (list->traces->pdata[0], NULL, NULL, &error);
  g_assert_no_error (error);
  cs_ref_env_insert (env, "x", x);
  cs_ref_env_insert (env, "idx", idx);
  cs_ref_env_insert (env, "m", m);
  for (int mode = 0; mode < 2; mode++)
    {
      g_autoptr(GHashTable) e = env_copy (env);
      g_clear_pointer (&outs, g_ptr_array_unref);
      cs_ref_run_env (cs_pipeline_get_forward (pl), e, mode ? CS_REF_F64 : CS_REF_EXACT, 0,
                      &outs, NULL, NULL, &error);
      g_assert_no_error (error);
      g_assert_cmpuint (outs->len, ==, 10);
      for (guint k = 0; k < 10; k++)
        {
          const CsTensor *o = outs->pdata[k];

          g_assert_cmpint (o->numel, ==, want[k].n);
          g_assert_cmpint (o->dtype, ==, k >= 4 && k <= 8 ? CS_DTYPE_B8 : CS_DTYPE_F64);
          for (guint i = 0; i < want[k].n; i++)
            g_assert_cmpfloat (cs_tensor_get_f64 (o, i), ==, want[k].v[i]);
        }
    }
}

/* ------------------------------------------------------------------------------------------ */
/* The upcast-in-autocast case: what the matmul-precision toggle costs                         */

/* Each *_autocast sample under matmul=native and matmul=upcast-f32: the same matmuls, all on
 * tensor cores natively (autocast gave them bf16 operands: its downcasts of the f32 weights
 * and activations are in the graph) and none when upcast, whose estimated time is larger in
 * the forward and in the backward (f32 matmuls at the f32 peak, and their operands' converts:
 * the number of casts may stay the same where an upcast cancels autocast's downcast). */
static void
test_autocast_policy (gconstpointer data)
{
  const char *name = data;
  g_autofree char *text = sample_text (name);
  g_autofree char *file = g_strconcat (name, ".txt", NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTraceList) list = cs_parse_text (text, strlen (text), file, &error);
  CsTraceStats *st[2][2] = { { NULL, NULL }, { NULL, NULL } };   /* [policy][fw, bw] */

  g_assert_no_error (error);
  for (int up = 0; up < 2; up++)
    {
      CsPolicy policy;
      g_autoptr(CsPipeline) pl = NULL;

      cs_policy_init_default (&policy);
      policy.matmul = up ? CS_MATMUL_UPCAST_F32 : CS_MATMUL_NATIVE;
      pl = cs_pipeline_run_pair (list->traces->pdata[0], cs_aten_find_backward (list, 0),
                                 &policy, &error);
      g_assert_no_error (error);
      st[up][0] = cs_stats_compute (cs_pipeline_get_forward (pl));
      st[up][1] = cs_stats_compute (cs_pipeline_get_backward (pl));
    }
  for (int k = 0; k < 2; k++)
    {
      const CsStatsEntry *n = &st[0][k]->total, *u = &st[1][k]->total;

      g_test_message ("%s %s: native %u/%u tensor-core matmuls, %u casts, est %.4g ms; "
                      "upcast-f32 %u/%u, %u casts, est %.4g ms", name, k ? "backward" : "forward",
                      n->n_tensor_core_matmuls, n->n_matmuls, n->n_casts, n->est_ms,
                      u->n_tensor_core_matmuls, u->n_matmuls, u->n_casts, u->est_ms);
      g_assert_cmpuint (n->n_matmuls, >=, 1);
      g_assert_cmpuint (u->n_matmuls, ==, n->n_matmuls);
      g_assert_cmpuint (n->n_tensor_core_matmuls, ==, n->n_matmuls);
      g_assert_cmpuint (u->n_tensor_core_matmuls, ==, 0);
      g_assert_cmpfloat (u->est_ms, >, n->est_ms);
    }
  /* autocast's downcasts: at least one per forward matmul (its f32 weight to bf16) */
  g_assert_cmpuint (st[0][0]->total.n_downcasts, >=, st[0][0]->total.n_matmuls);
  for (int up = 0; up < 2; up++)
    for (int k = 0; k < 2; k++)
      cs_trace_stats_free (st[up][k]);
}

/* ------------------------------------------------------------------------------------------ */
/* Thunder's trace and torch.compile's graph of one function, matched                         */

/* The final forward and backward of @path (Thunder's trace, or a torch.compile pair) under the
 * default policy. */
static CsPipeline *
pipeline_of (const char *path, CsTrace **fw, CsTrace **bw)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTraceList) list = cs_parse_file (path, &error);
  CsPipeline *pl;

  g_assert_no_error (error);
  if (cs_trace_aten_role (list->traces->pdata[0]) == CS_ATEN_GRAPH_FORWARD)
    pl = cs_pipeline_run_pair (list->traces->pdata[0], cs_aten_find_backward (list, 0), NULL, &error);
  else
    pl = cs_pipeline_run (list->traces->pdata[0], NULL, NULL, &error);
  g_assert_no_error (error);
  *fw = cs_pipeline_get_forward (pl);
  *bw = cs_pipeline_get_backward (pl);
  g_assert_nonnull (*fw);
  g_assert_nonnull (*bw);
  return pl;
}

static const CsStmt *find_stmt (const CsTrace *t, guint32 id);

/* Every matched pair converts the same dtypes over the same element count, one to one. */
static void
check_pairs (const CsTrace *a, const CsTrace *b, const CsTraceMatch *m)
{
  for (guint i = 0; i < m->casts->len; i++)
    {
      const CsTracePair *p = &g_array_index (m->casts, CsTracePair, i);
      const CsStmt *x = find_stmt (a, p->a), *y = find_stmt (b, p->b);
      const CsValue *xi, *yi;

      g_assert_nonnull (x);
      g_assert_nonnull (y);
      xi = cs_stmt_get_arg (x, 0, "a");
      yi = cs_stmt_get_arg (y, 0, "a");
      g_assert_cmpint (xi->u.proxy->dtype, ==, yi->u.proxy->dtype);
      g_assert_cmpint (cs_stmt_get_output (x)->dtype, ==, cs_stmt_get_output (y)->dtype);
      g_assert_cmpuint (cs_trace_match_lookup (m, TRUE, p->a), ==, p->b);
      g_assert_cmpuint (cs_trace_match_lookup (m, FALSE, p->b), ==, p->a);
    }
  g_assert_cmpuint (m->casts->len, <=, MIN (m->n_casts_a, m->n_casts_b));
  g_assert_cmpuint (m->regions->len, <=, MIN (m->n_regions_a, m->n_regions_b));
}

static const CsStmt *
find_deep (const CsStmt *const *stmts, guint n, guint32 id)
{
  for (guint i = 0; i < n; i++)
    {
      const CsStmt *r;

      if (stmts[i]->id == id)
        return stmts[i];
      if ((r = find_deep ((const CsStmt *const *) stmts[i]->subs, stmts[i]->n_subs, id)) != NULL)
        return r;
    }
  return NULL;
}

static const CsStmt *
find_stmt (const CsTrace *t, guint32 id)
{
  return find_deep ((const CsStmt *const *) t->stmts, t->n_stmts, id);
}

static const char *
out_name (const CsTrace *t, guint32 id)
{
  const CsStmt *s = find_stmt (t, id);
  const CsProxy *p = s ? cs_stmt_get_output (s) : NULL;

  return p ? p->name : s ? s->callee : "?";
}

/* The name of the cast of @b matched to the cast of @a that writes @a_out, or NULL. */
static const char *
matched_cast (const CsTrace *a, const CsTrace *b, const CsTraceMatch *m, const char *a_out)
{
  for (guint i = 0; i < m->casts->len; i++)
    {
      const CsTracePair *p = &g_array_index (m->casts, CsTracePair, i);
      if (g_strcmp0 (out_name (a, p->a), a_out) == 0)
        return out_name (b, p->b);
    }
  return NULL;
}

static CsTraceMatch *
match_logged (const char *what, const CsTrace *a, const CsTrace *b)
{
  CsTraceMatch *m = cs_trace_match_new (a, b);

  g_test_message ("%s: %u casts | %u, %u matched; %u regions | %u, %u matched", what,
                  m->n_casts_a, m->n_casts_b, m->casts->len, m->n_regions_a, m->n_regions_b,
                  m->regions->len);
  for (guint i = 0; i < m->casts->len; i++)
    {
      const CsTracePair *p = &g_array_index (m->casts, CsTracePair, i);
      g_test_message ("  cast %s = %s", out_name (a, p->a), out_name (b, p->b));
    }
  for (guint i = 0; i < m->regions->len; i++)
    {
      const CsTracePair *p = &g_array_index (m->regions, CsTracePair, i);
      g_test_message ("  region %s = %s", find_stmt (a, p->a)->callee,
                      find_stmt (b, p->b)->callee);
    }
  check_pairs (a, b, m);
  return m;
}

static char *
data_file (const char *rel)
{
  const char *dir = g_getenv ("CS_DATA_DIR");

  return g_build_filename (dir ? dir : "data", rel, NULL);
}

/* The GELU MLP, F.linear(F.gelu(F.linear(x, w1, b1), approximate='tanh'), w2, b2) in bf16:
 * Thunder's forward rounds twice in its one region (t0 -> f32 for the GELU, its result ->
 * bf16); Inductor's first region adds the bias in f32 too (bias and mm result -> f32, addmm ->
 * bf16, saved) before the same GELU, and its second region is the second bias add.  So
 * Thunder's two casts are Inductor's upcast of the matmul's output and the GELU's downcast,
 * and the one GELU region is Inductor's first region. */
static void
test_match_mlp (void)
{
  g_autofree char *pt = data_file ("mlp_gelu.txt");
  g_autofree char *pa = data_file ("aten/mlp_gelu_bf16.txt");
  CsTrace *tf, *tb, *af, *ab;
  g_autoptr(CsPipeline) plt = pipeline_of (pt, &tf, &tb);
  g_autoptr(CsPipeline) pla = pipeline_of (pa, &af, &ab);
  g_autoptr(CsTraceMatch) mf = match_logged ("forward", tf, af);
  g_autoptr(CsTraceMatch) mb = match_logged ("backward", tb, ab);

  g_assert_cmpuint (mf->n_casts_a, ==, 2);
  g_assert_cmpuint (mf->n_casts_b, ==, 7);
  g_assert_cmpuint (mf->casts->len, ==, 2);
  g_assert_cmpstr (matched_cast (tf, af, mf, "t33"), ==, "t3");   /* convert(t0 = mm) */
  g_assert_cmpstr (matched_cast (tf, af, mf, "t1"), ==, "convert_element_type_4");
  g_assert_cmpuint (mf->n_regions_a, ==, 1);
  g_assert_cmpuint (mf->n_regions_b, ==, 2);
  g_assert_cmpuint (mf->regions->len, ==, 1);
  g_assert_cmpstr (find_stmt (af, g_array_index (mf->regions, CsTracePair, 0).b)->callee,
                   ==, "nvFusion0");
  g_assert_cmpuint (mb->casts->len, >=, 1);
}

/* RMSNorm then SwiGLU (data/rmsnorm_swiglu.txt and its torch.compile twin): both forwards hold
 * 11 casts in 4 regions, every one of Thunder's casts has its twin (the same dtypes, sizes and
 * producers in the same order) and every region its twin. */
static void
test_match_rmsnorm (void)
{
  g_autofree char *pt = data_file ("rmsnorm_swiglu.txt");
  g_autofree char *pa = data_file ("aten/rmsnorm_swiglu_bf16.txt");
  CsTrace *tf, *tb, *af, *ab;
  g_autoptr(CsPipeline) plt = pipeline_of (pt, &tf, &tb);
  g_autoptr(CsPipeline) pla = pipeline_of (pa, &af, &ab);
  g_autoptr(CsTraceMatch) mf = match_logged ("forward", tf, af);
  g_autoptr(CsTraceMatch) mb = match_logged ("backward", tb, ab);

  /* since issue 18's rematerialization SiLU joins its consumer's region on both sides (its
   * bf16 rounding and upcast are gone: 9 casts a side); Thunder's forward has 3 regions */
  g_assert_cmpuint (mf->n_casts_a, ==, 9);
  g_assert_cmpuint (mf->n_casts_b, ==, 9);
  g_assert_cmpuint (mf->casts->len, ==, 9);
  g_assert_cmpuint (mf->n_regions_a, ==, 3);
  g_assert_cmpuint (mf->n_regions_b, ==, 4);
  g_assert_cmpuint (mf->regions->len, ==, 3);
  /* the gate projection's output, upcast for SiLU (recomputed in the SiLU-times-up region,
   * hence fw_ on both sides) */
  g_assert_cmpstr (matched_cast (tf, af, mf, "fw_t96"), ==, "fw_convert_element_type_4");
  /* the residual's last rounding: x + down(...) -> bf16 */
  g_assert_cmpstr (matched_cast (tf, af, mf, "t6"), ==, "add_2");
  g_assert_cmpuint (mb->casts->len, >=, 1);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  for (gsize i = 0; i < G_N_ELEMENTS (samples); i++)
    {
      g_autofree char *path = g_strconcat ("/core/aten/sample/", samples[i], NULL);
      g_test_add_data_func (path, samples[i], test_sample);
    }
  for (gsize i = 0; i < G_N_ELEMENTS (samples); i++)
    if (g_str_has_suffix (samples[i], "_autocast"))
      {
        g_autofree char *path = g_strconcat ("/core/aten/autocast/matmul-policy/", samples[i], NULL);
        g_test_add_data_func (path, samples[i], test_autocast_policy);
      }
  g_test_add_func ("/core/aten/ops/values", test_ops_values);
  g_test_add_func ("/core/aten/match/mlp-gelu", test_match_mlp);
  g_test_add_func ("/core/aten/match/rmsnorm-swiglu", test_match_rmsnorm);
  g_test_add_func ("/core/aten/sdpa/cudnn-bias-causal", test_sdpa_cudnn);
  g_test_add_func ("/core/aten/sdpa/efficient-bias-grad", test_sdpa_efficient);
  g_test_add_func ("/core/aten/sdpa/efficient-no-logsumexp", test_sdpa_no_lse);
  return g_test_run ();
}
