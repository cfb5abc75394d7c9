/* test-core-lens.c: the precision lens's analyses (core/cs-lens.h).
 *
 * - cs_dtype_range(): the documented limits of f16, bf16, e4m3fn and e5m2;
 * - cs_lens_range(): amax, the smallest nonzero magnitude and the per-format counts on a
 *   hand-made tensor whose every value was placed on a side of a limit worked out here;
 * - cs_lens_stmt_precision(): storage and compute dtypes of hand-written statements;
 * - cs_lens_removed_user_casts(): `exp(x.float()).to(bf16) * y`, whose `.to(bf16)` Thunder's
 *   redundant-cast removal drops (the same pattern as the thunder-kit's cumsum_cast_mul);
 * - cs_lens_first_divergence(): the earliest failing tensor by trace order.
 */
#include "cs-config.h"

#include <math.h>
#include <string.h>

#include "cs-lens.h"
#include "cs-ops.h"
#include "cs-parse.h"
#include "cs-pipeline.h"
#include "cs-policy.h"

static void
test_dtype_range (void)
{
  CsDtypeRange r;

  g_assert_true (cs_dtype_range (CS_DTYPE_F16, &r));
  g_assert_cmpfloat (r.max_finite, ==, 65504.0);
  g_assert_cmpfloat (r.min_normal, ==, 6.103515625e-05);           /* 2^-14 */
  g_assert_cmpfloat (r.min_subnormal, ==, 5.9604644775390625e-08);  /* 2^-24 */
  g_assert_cmpfloat (r.overflow_at, ==, 65520.0);                   /* 65504 + 32 / 2 */
  g_assert_true (r.has_inf);
  g_assert_true (r.tie_overflows);

  g_assert_true (cs_dtype_range (CS_DTYPE_BF16, &r));
  g_assert_cmpfloat (r.max_finite, ==, 3.3895313892515355e+38);    /* (2 - 2^-7) 2^127 */
  g_assert_cmpfloat (r.min_normal, ==, 1.1754943508222875e-38);    /* 2^-126 */
  g_assert_cmpfloat (r.min_subnormal, ==, 9.183549615799121e-41);  /* 2^-133 */

  g_assert_true (cs_dtype_range (CS_DTYPE_F8_E4M3FN, &r));
  g_assert_cmpfloat (r.max_finite, ==, 448.0);
  g_assert_cmpfloat (r.min_normal, ==, 0.015625);                  /* 2^-6 */
  g_assert_cmpfloat (r.min_subnormal, ==, 0.001953125);            /* 2^-9 */
  g_assert_cmpfloat (r.overflow_at, ==, 464.0);
  g_assert_false (r.has_inf);
  g_assert_false (r.tie_overflows);

  g_assert_true (cs_dtype_range (CS_DTYPE_F8_E5M2, &r));
  g_assert_cmpfloat (r.max_finite, ==, 57344.0);                   /* 1.75 x 2^15 */
  g_assert_cmpfloat (r.min_subnormal, ==, 1.52587890625e-05);      /* 2^-16 */
  g_assert_cmpfloat (r.overflow_at, ==, 61440.0);                  /* 57344 + 8192 / 2 */

  g_assert_false (cs_dtype_range (CS_DTYPE_I32, &r));
}

/* Twelve values, each placed by hand against the limits above:
 *   0          zero
 *   1          fits everywhere
 *   -70000     > 65520: overflows f16, e4m3 (> 464) and e5m2 (> 61440)
 *   65520      f16's tie: overflows f16 (65504's significand is odd), e4m3, e5m2
 *   65519      fits f16; overflows e4m3 and e5m2
 *   2^-25      f16's tie below 2^-24: flushes in f16, e4m3 (<= 2^-10), e5m2 (<= 2^-17)
 *   3e-8       f16 subnormal (2^-25 < x < 2^-14); flushes in e4m3 and e5m2
 *   5e-5       f16 subnormal (< 2^-14); e4m3 flush (<= 2^-10); e5m2 subnormal (2^-17 < x < 2^-14)
 *   500        overflows e4m3 only
 *   464        e4m3's tie rounds down to 448 (significand 110 is even): fits everywhere
 *   NaN, inf   non-finite, counted apart
 * bf16 holds all of them (its range is f32's). */
static void
test_range_counts (void)
{
  const double v[] = { 0, 1, -70000, 65520, 65519, ldexp (1.0, -25), 3e-8, 5e-5, 500, 464,
                       NAN, INFINITY };
  const int64_t shape[1] = { G_N_ELEMENTS (v) };
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTensor) x = cs_tensor_new_from_f64 (CS_DTYPE_F64, shape, 1, v, &error);
  CsLensRange r;
  g_autofree char *sum = NULL;

  g_assert_no_error (error);
  cs_lens_range (x, &r);
  g_assert_cmpint (r.n, ==, 12);
  g_assert_cmpint (r.n_zero, ==, 1);
  g_assert_cmpint (r.n_nonfinite, ==, 2);
  g_assert_cmpfloat (r.amax, ==, 70000);
  g_assert_cmpfloat (r.min_nonzero, ==, ldexp (1.0, -25));

  g_assert_cmpint (r.fit[CS_LENS_FMT_F16].n_overflow, ==, 2);
  g_assert_cmpint (r.fit[CS_LENS_FMT_F16].n_flush, ==, 1);
  g_assert_cmpint (r.fit[CS_LENS_FMT_F16].n_subnormal, ==, 2);
  g_assert_true (r.fit[CS_LENS_FMT_F16].overflow_risk);
  g_assert_true (r.fit[CS_LENS_FMT_F16].underflow_risk);
  g_assert_cmpfloat_with_epsilon (r.fit[CS_LENS_FMT_F16].headroom, log2 (65504.0 / 70000.0), 1e-12);

  g_assert_cmpint (r.fit[CS_LENS_FMT_BF16].n_overflow, ==, 0);
  g_assert_cmpint (r.fit[CS_LENS_FMT_BF16].n_flush, ==, 0);
  g_assert_cmpint (r.fit[CS_LENS_FMT_BF16].n_subnormal, ==, 0);
  g_assert_false (r.fit[CS_LENS_FMT_BF16].overflow_risk);
  g_assert_false (r.fit[CS_LENS_FMT_BF16].underflow_risk);

  g_assert_cmpint (r.fit[CS_LENS_FMT_E4M3].n_overflow, ==, 4);
  g_assert_cmpint (r.fit[CS_LENS_FMT_E4M3].n_flush, ==, 3);
  g_assert_cmpint (r.fit[CS_LENS_FMT_E4M3].n_subnormal, ==, 0);

  g_assert_cmpint (r.fit[CS_LENS_FMT_E5M2].n_overflow, ==, 3);
  g_assert_cmpint (r.fit[CS_LENS_FMT_E5M2].n_flush, ==, 2);
  g_assert_cmpint (r.fit[CS_LENS_FMT_E5M2].n_subnormal, ==, 1);

  sum = cs_lens_range_summary (&r);
  g_assert_cmpstr (sum, ==, "f16: 2 overflow, 1 flush to zero, 2 subnormal; "
                            "e4m3: 4 overflow, 3 flush to zero; "
                            "e5m2: 3 overflow, 2 flush to zero, 1 subnormal");
}

/* Headroom: amax 300 fits e4m3 (448) but one doubling (600) would not: a risk without an
 * overflow; amax 100 has log2(4.48) = 2.16 doublings: no risk.  An all-zero tensor has no
 * risk and infinite headroom. */
static void
test_range_headroom (void)
{
  const double a[] = { 300, -2, 0.5 }, b[] = { 100, 1 }, z[] = { 0, 0 };
  const int64_t s3[1] = { 3 }, s2[1] = { 2 };
  g_autoptr(CsTensor) ta = cs_tensor_new_from_f64 (CS_DTYPE_F32, s3, 1, a, NULL);
  g_autoptr(CsTensor) tb = cs_tensor_new_from_f64 (CS_DTYPE_BF16, s2, 1, b, NULL);
  g_autoptr(CsTensor) tz = cs_tensor_new_from_f64 (CS_DTYPE_F16, s2, 1, z, NULL);
  CsLensRange r;
  g_autofree char *sum = NULL;

  cs_lens_range (ta, &r);
  g_assert_cmpint (r.fit[CS_LENS_FMT_E4M3].n_overflow, ==, 0);
  g_assert_true (r.fit[CS_LENS_FMT_E4M3].overflow_risk);
  g_assert_cmpfloat_with_epsilon (r.fit[CS_LENS_FMT_E4M3].headroom, log2 (448.0 / 300.0), 1e-12);
  g_assert_cmpfloat (r.min_nonzero, ==, 0.5);
  sum = cs_lens_range_summary (&r);
  g_assert_cmpstr (sum, ==, "e4m3: overflow risk (headroom 0.58 doublings)");
  cs_lens_range (tb, &r);
  g_assert_false (r.fit[CS_LENS_FMT_E4M3].overflow_risk);
  cs_lens_range (tz, &r);
  g_assert_cmpint (r.n_zero, ==, 2);
  g_assert_cmpfloat (r.amax, ==, 0);
  g_assert_true (isinf (r.fit[CS_LENS_FMT_F16].headroom));
  g_assert_false (r.fit[CS_LENS_FMT_F16].overflow_risk);
  g_assert_false (r.fit[CS_LENS_FMT_F16].underflow_risk);
}

static const char prec_trace[] =
  "import thunder\n"
  "import thunder.torch as ltorch\n"
  "import torch\n"
  "from thunder.executors.torchex import no_autocast\n\n"
  "@torch.no_grad()\n"
  "@no_autocast\n"
  "def computation(x, w):\n"
  "  # x: \"cuda:0 bf16[8, 16]\"\n"
  "  # w: \"cuda:0 bf16[16, 16]\"\n"
  "  t0 = ltorch.gelu(x, approximate='tanh')  # t0: \"cuda:0 bf16[8, 16]\"\n"
  "  t1 = ltorch.matmul(t0, w)  # t1: \"cuda:0 bf16[8, 16]\"\n"
  "  t2 = ltorch.to(t1, torch.float32, None, device=None, dtype=None, copy=False)  # t2: \"cuda:0 f32[8, 16]\"\n"
  "  t3 = ltorch.exp(t2)  # t3: \"cuda:0 f32[8, 16]\"\n"
  "  t4 = ltorch.to(t3, torch.bfloat16, None, device=None, dtype=None, copy=False)  # t4: \"cuda:0 bf16[8, 16]\"\n"
  "  t5 = ltorch.reshape(t4, (128,))  # t5: \"cuda:0 bf16[128]\"\n"
  "  return (t5,)\n";

static const CsStmt *
stmt_writing (const CsTrace *t, const char *name)
{
  for (guint i = 0; i < t->n_stmts; i++)
    {
      const CsProxy *o = t->stmts[i]->kind == CS_STMT_CALL ? cs_stmt_get_output (t->stmts[i]) : NULL;
      if (o != NULL && strcmp (o->name, name) == 0)
        return t->stmts[i];
    }
  return NULL;
}

static void
assert_precision (const CsTrace *t, const char *name, CsDtype storage, CsDtype compute,
                  gboolean rounds)
{
  const CsStmt *s = stmt_writing (t, name);
  CsStmtPrecision p;

  g_assert_nonnull (s);
  g_assert_true (cs_lens_stmt_precision (s, &p));
  if (p.storage != storage || p.compute != compute || !p.rounds != !rounds)
    g_error ("%s: storage %s compute %s rounds %d, expected %s %s %d", name,
             cs_dtype_short_name (p.storage), cs_dtype_short_name (p.compute), p.rounds,
             cs_dtype_short_name (storage), cs_dtype_short_name (compute), rounds);
}

/* In the initial trace: the bf16 GELU computes in f32 (Thunder's computation dtype) and
 * rounds; the bf16 matmul accumulates in f32 and rounds; .float() widens (no rounding); exp in
 * f32 neither; .to(bf16) rounds; reshape moves data.  After the pipeline the forward's fusion
 * region stores bf16 and computes in f32 (its prims upcast): a rounding point; the f32 prims
 * inside it compute in f32 and do not round; its final convert to bf16 does. */
static void
test_precision (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTrace) t = cs_parse_trace (prec_trace, "prec.txt", &error);
  g_autoptr(CsPipeline) pl = NULL;
  CsTrace *fw;
  gboolean region_seen = FALSE;

  g_assert_no_error (error);
  assert_precision (t, "t0", CS_DTYPE_BF16, CS_DTYPE_F32, TRUE);
  assert_precision (t, "t1", CS_DTYPE_BF16, CS_DTYPE_F32, TRUE);
  assert_precision (t, "t2", CS_DTYPE_F32, CS_DTYPE_BF16, FALSE);
  assert_precision (t, "t3", CS_DTYPE_F32, CS_DTYPE_F32, FALSE);
  assert_precision (t, "t4", CS_DTYPE_BF16, CS_DTYPE_F32, TRUE);
  assert_precision (t, "t5", CS_DTYPE_BF16, CS_DTYPE_BF16, FALSE);

  pl = cs_pipeline_run (t, NULL, NULL, &error);
  g_assert_no_error (error);
  fw = cs_pipeline_get_forward (pl);
  for (guint i = 0; i < fw->n_stmts; i++)
    {
      const CsStmt *s = fw->stmts[i];
      CsStmtPrecision p;

      if (s->kind != CS_STMT_CALL || !cs_op_is_fusion (s->op) || !cs_lens_stmt_precision (s, &p))
        continue;
      if (p.storage != CS_DTYPE_BF16)
        continue;
      region_seen = TRUE;
      g_assert_cmpint (p.compute, ==, CS_DTYPE_F32);
      g_assert_true (p.rounds);
      for (guint k = 0; k < s->n_subs; k++)
        {
          CsStmtPrecision q;
          const CsProxy *o = cs_stmt_get_output (s->subs[k]);

          if (o == NULL || !cs_lens_stmt_precision (s->subs[k], &q))
            continue;
          if (strcmp (s->subs[k]->op->short_name, "exp") == 0)
            {
              g_assert_cmpint (q.compute, ==, CS_DTYPE_F32);
              g_assert_false (q.rounds);
            }
          if (strcmp (s->subs[k]->op->short_name, "convert_element_type") == 0
              && o->dtype == CS_DTYPE_BF16)
            g_assert_true (q.rounds);
        }
    }
  g_assert_true (region_seen);
}

static const char cast_mul_trace[] =
  "import thunder\n"
  "import thunder.torch as ltorch\n"
  "import torch\n"
  "from thunder.executors.torchex import no_autocast\n\n"
  "@torch.no_grad()\n"
  "@no_autocast\n"
  "def computation(x, y):\n"
  "  # x: \"cuda:0 bf16[32, 64]\"\n"
  "  # y: \"cuda:0 bf16[32, 64]\"\n"
  "  t0 = ltorch.to(x, torch.float32, None, device=None, dtype=None, copy=False)  # t0: \"cuda:0 f32[32, 64]\"\n"
  "  t1 = ltorch.exp(t0)  # t1: \"cuda:0 f32[32, 64]\"\n"
  "  t2 = ltorch.to(t1, torch.bfloat16, None, device=None, dtype=None, copy=False)  # t2: \"cuda:0 bf16[32, 64]\"\n"
  "  t3 = ltorch.mul(t2, y)  # t3: \"cuda:0 bf16[32, 64]\"\n"
  "  return (t3,)\n";

/* Under Thunder's defaults fuse puts everything in one region: convert(x, f32), exp,
 * convert(t1, bf16) (the user's .to), convert(t2, f32) (mul's upcast), mul, convert to bf16.
 * remove-redundant-casts folds the f32 -> bf16 -> f32 chain: the user's rounding t2 is gone
 * and prims.mul reads the unrounded exp.  With redundant-casts=keep nothing is removed; the
 * widening .to(f32) on line 11 stays under both. */
static void
test_removed_user_casts (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTrace) t = cs_parse_trace (cast_mul_trace, "cast_mul.txt", &error);
  g_autoptr(CsPipeline) pl = NULL;
  g_autoptr(GPtrArray) removed = NULL;
  CsPolicy keep;
  gboolean fwd_seen = FALSE;

  g_assert_no_error (error);
  pl = cs_pipeline_run (t, NULL, NULL, &error);
  g_assert_no_error (error);
  removed = cs_lens_removed_user_casts (cs_pipeline_find_trace (pl, "initial"),
                                        cs_pipeline_find_trace (pl, "fuse"),
                                        cs_pipeline_find_trace (pl, "remove-redundant-casts"));
  g_assert_cmpuint (removed->len, >=, 1);
  for (guint i = 0; i < removed->len; i++)
    {
      const CsRemovedCast *c = g_ptr_array_index (removed, i);

      g_test_message ("removed: %s = %s -> %s in %s (%s), now read by %s",
                      cs_stmt_get_output (c->cast)->name, cs_dtype_short_name (c->from),
                      cs_dtype_short_name (c->to), c->region, c->backward ? "backward" : "forward",
                      c->reader ? c->reader : "-");
      /* every one derives from the user's .to(bf16) on line 13 */
      g_assert_cmpuint (c->user->line, ==, 13);
      g_assert_nonnull (c->region);
      if (!c->backward && strcmp (cs_stmt_get_output (c->cast)->name, "t2") == 0)
        {
          fwd_seen = TRUE;
          g_assert_cmpint (c->from, ==, CS_DTYPE_F32);
          g_assert_cmpint (c->to, ==, CS_DTYPE_BF16);
          /* the forward's mul (writing t6, in f32) now reads the unrounded value */
          g_assert_nonnull (c->reader);
          {
            const CsTrace *after = cs_pipeline_find_trace (pl, "remove-redundant-casts");
            gboolean mul = FALSE;

            for (guint k = 0; k < after->n_stmts; k++)
              for (guint j = 0; j < after->stmts[k]->n_subs; j++)
                {
                  const CsStmt *sub = after->stmts[k]->subs[j];
                  const CsProxy *o = cs_stmt_get_output (sub);
                  if (o != NULL && strcmp (o->name, c->reader) == 0)
                    mul = strcmp (sub->op->short_name, "mul") == 0;
                }
            g_assert_true (mul);
          }
        }
    }
  g_assert_true (fwd_seen);

  g_clear_pointer (&removed, g_ptr_array_unref);
  g_clear_pointer (&pl, cs_pipeline_unref);
  cs_policy_init_default (&keep);
  keep.redundant_casts = CS_REDUNDANT_CASTS_KEEP;
  pl = cs_pipeline_run (t, &keep, NULL, &error);
  g_assert_no_error (error);
  removed = cs_lens_removed_user_casts (cs_pipeline_find_trace (pl, "initial"),
                                        cs_pipeline_find_trace (pl, "fuse"),
                                        cs_pipeline_find_trace (pl, "remove-redundant-casts"));
  g_assert_cmpuint (removed->len, ==, 0);
}

/* Three judged tensors: t5 (statement 2) fails, t3 (statement 1) passes, t7 (statement 3)
 * fails: the first divergence is t5, line 12; with everything passing there is none. */
static void
test_first_divergence (void)
{
  static const char text[] =
    "import torch\n"
    "import thunder.torch as ltorch\n"
    "from thunder.executors.torchex import no_autocast\n\n"
    "@torch.no_grad()\n"
    "@no_autocast\n"
    "def computation(a):\n"
    "  # a: \"cuda:0 f32[4]\"\n"
    "  t3 = ltorch.exp(a)  # t3: \"cuda:0 f32[4]\"\n"
    "  t4 = ltorch.neg(t3)  # t4: \"cuda:0 f32[4]\"\n"
    "  t1 = ltorch.mul(t4, t4)  # t1: \"cuda:0 f32[4]\"\n"
    "  t5 = ltorch.exp(t1)  # t5: \"cuda:0 f32[4]\"\n"
    "  t7 = ltorch.tanh(t5)  # t7: \"cuda:0 f32[4]\"\n"
    "  return (t7, t5, t3)\n";
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTrace) t = cs_parse_trace (text, "div.txt", &error);
  CsAccuracy ok = { 0 }, bad = { 0 };
  CsLensItem items[3];
  guint line = 99;

  g_assert_no_error (error);
  ok.pass = TRUE;
  bad.pass = FALSE;
  items[0] = (CsLensItem) { "t7", &bad };
  items[1] = (CsLensItem) { "t3", &ok };
  items[2] = (CsLensItem) { "t5", &bad };
  g_assert_cmpint (cs_lens_first_divergence (t, items, 3, &line), ==, 2);
  g_assert_cmpuint (line, ==, 12);
  items[2].acc = &ok;
  g_assert_cmpint (cs_lens_first_divergence (t, items, 3, &line), ==, 0);
  g_assert_cmpuint (line, ==, 13);
  items[0].acc = &ok;
  g_assert_cmpint (cs_lens_first_divergence (t, items, 3, &line), ==, -1);
  g_assert_cmpuint (line, ==, 0);

  /* fused into one region, t3, t1, t5 and t7 are outputs of the same call: the region's prims
   * order them (t5 before t7) */
  {
    g_autoptr(CsPipeline) pl = cs_pipeline_run (t, NULL, NULL, &error);
    CsTrace *fw;
    guint n_regions = 0;

    g_assert_no_error (error);
    fw = cs_pipeline_get_forward (pl);
    for (guint i = 0; i < fw->n_stmts; i++)
      n_regions += fw->stmts[i]->kind == CS_STMT_CALL && cs_op_is_fusion (fw->stmts[i]->op);
    g_assert_cmpuint (n_regions, ==, 1);
    items[0] = (CsLensItem) { "t7", &bad };
    items[1] = (CsLensItem) { "t3", &ok };
    items[2] = (CsLensItem) { "t5", &bad };
    g_assert_cmpint (cs_lens_first_divergence (fw, items, 3, NULL), ==, 2);
  }
}

/* The 8-block LLaMA of ../shared/traces: RMSNorm ends with `return xf.to(x.dtype) * self.weight`
 * (its source comment `# models.py:86:` precedes the ltorch.to on the next line), twice per
 * block and once at the end: 17 casts f32 -> bf16 the user wrote.  Fusion puts each inside a
 * region with the multiply's upcast, and remove-redundant-casts drops every one of them: the
 * forward's narrowing removed user casts are exactly those 17 lines, each read by a statement
 * still there. */
static void
test_llama_rmsnorm (void)
{
  const char *dir = g_getenv ("CS_SHARED_TRACES");
  g_autofree char *path = dir ? g_build_filename (dir, "thunder_llama_stack_initial.txt", NULL) : NULL;
  g_autofree char *text = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTrace) t = NULL;
  g_autoptr(CsPipeline) pl = NULL;
  g_autoptr(GPtrArray) removed = NULL;
  g_autoptr(GHashTable) lines = g_hash_table_new (NULL, NULL);
  g_auto(GStrv) rows = NULL;
  guint n_narrow = 0;

  if (path == NULL || !g_file_get_contents (path, &text, NULL, NULL))
    {
      g_test_skip ("no shared traces");
      return;
    }
  rows = g_strsplit (text, "\n", -1);
  for (guint i = 0; rows[i] != NULL; i++)
    if (strstr (rows[i], "# models.py:86:") != NULL && strstr (rows[i], "xf.to(x.dtype)") != NULL)
      g_hash_table_add (lines, GUINT_TO_POINTER (i + 2));   /* the statement on the next line */
  g_assert_cmpuint (g_hash_table_size (lines), ==, 17);
  t = cs_parse_trace (text, path, &error);
  g_assert_no_error (error);
  pl = cs_pipeline_run (t, NULL, NULL, &error);
  g_assert_no_error (error);
  removed = cs_lens_removed_user_casts (cs_pipeline_find_trace (pl, "initial"),
                                        cs_pipeline_find_trace (pl, "fuse"),
                                        cs_pipeline_find_trace (pl, "remove-redundant-casts"));
  for (guint i = 0; i < removed->len; i++)
    {
      const CsRemovedCast *c = g_ptr_array_index (removed, i);

      if (c->backward || c->to != CS_DTYPE_BF16)
        continue;
      n_narrow++;
      g_assert_cmpint (c->from, ==, CS_DTYPE_F32);
      g_assert_true (g_hash_table_contains (lines, GUINT_TO_POINTER (c->user->line)));
      g_assert_nonnull (c->reader);
      g_assert_nonnull (c->region);
    }
  g_assert_cmpuint (n_narrow, ==, 17);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/core/lens/dtype-range", test_dtype_range);
  g_test_add_func ("/core/lens/range-counts", test_range_counts);
  g_test_add_func ("/core/lens/range-headroom", test_range_headroom);
  g_test_add_func ("/core/lens/precision", test_precision);
  g_test_add_func ("/core/lens/removed-user-casts", test_removed_user_casts);
  g_test_add_func ("/core/lens/first-divergence", test_first_divergence);
  g_test_add_func ("/core/lens/llama-rmsnorm", test_llama_rmsnorm);
  return g_test_run ();
}
