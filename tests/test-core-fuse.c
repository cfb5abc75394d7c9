/* test-core-fuse.c: the fusion pass and its clean-ups (core/cs-fuse.c, core/cs-cse.c,
 * core/cs-dellast.c, core/cs-stats.c, core/cs-diff.c) against Thunder's own fusion decisions
 * (../shared/traces/thunder_nvfuser_*, issue283, docs_mlp_mnist, nb_llama) and hand-written
 * traces whose expected regions are worked out in the comments.
 *
 * Regions are compared "up to names" through a signature: the multiset of prim names, the
 * casts inside (from->to), the types of the inputs and of the outputs.  Outputs that are also
 * inputs (Thunder prints `[t32, t10] = nvFusion1(t32)` when remove_redundant_casts maps a
 * region output back onto an input; castscope rewrites the readers instead) are left out.
 */
#include "cs-config.h"

#include <string.h>

#include "cs-cse.h"
#include "cs-dellast.h"
#include "cs-diff.h"
#include "cs-fuse.h"
#include "cs-fuse-private.h"
#include "cs-ir-util.h"
#include "cs-grad.h"
#include "cs-decompose.h"
#include "cs-ops.h"
#include "cs-parse.h"
#include "cs-pipeline.h"
#include "cs-print.h"
#include "cs-stats.h"
#include "test-regions.h"

/* fuse -> remove redundant casts -> CSE -> DCE, as the pipeline runs them */
static CsTrace *
fuse_and_clean (const CsTrace *in, const CsPolicy *policy)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTrace) f = cs_fuse_trace (in, policy, &error);
  g_autoptr(CsTrace) r = NULL;
  g_autoptr(CsTrace) c = NULL;

  g_assert_no_error (error);
  g_assert_nonnull (f);
  g_assert_true (cs_fuse_check_invariants (f, &error));
  g_assert_no_error (error);
  r = policy->redundant_casts == CS_REDUNDANT_CASTS_REMOVE ? cs_cse_remove_redundant_casts (f)
                                                           : cs_trace_ref (f);
  c = cs_cse_trace (r);
  return cs_cse_dce (c);
}

/* ---- hand-written traces ---------------------------------------------------------------- */

/* bf16 a + b, matmul, then f32 math: with consecutive fusion the matmul splits two regions;
 * the first region's bf16->f32->bf16 chain (t3 -> t4 -> t5) collapses. */
static const char *chain_trace =
  "def computation(a, b, w):\n"
  "  # a: \"cuda:0 bf16[8, 16]\"\n"
  "  # b: \"cuda:0 bf16[8, 16]\"\n"
  "  # w: \"cuda:0 bf16[16, 16]\"\n"
  "  t0 = prims.convert_element_type(a, dtypes.float32)  # t0: \"cuda:0 f32[8, 16]\"\n"
  "  t1 = prims.convert_element_type(b, dtypes.float32)  # t1: \"cuda:0 f32[8, 16]\"\n"
  "  t2 = prims.add(t0, t1)  # t2: \"cuda:0 f32[8, 16]\"\n"
  "  t3 = prims.convert_element_type(t2, dtypes.bfloat16)  # t3: \"cuda:0 bf16[8, 16]\"\n"
  "  t4 = prims.convert_element_type(t3, dtypes.float32)  # t4: \"cuda:0 f32[8, 16]\"\n"
  "  t5 = prims.exp(t4)  # t5: \"cuda:0 f32[8, 16]\"\n"
  "  t6 = prims.convert_element_type(t5, dtypes.bfloat16)  # t6: \"cuda:0 bf16[8, 16]\"\n"
  "  t7 = prims.matmul(t6, w)  # t7: \"cuda:0 bf16[8, 16]\"\n"
  "  t8 = prims.convert_element_type(t7, dtypes.float32)  # t8: \"cuda:0 f32[8, 16]\"\n"
  "  t9 = prims.neg(t8)  # t9: \"cuda:0 f32[8, 16]\"\n"
  "  t10 = prims.convert_element_type(t9, dtypes.bfloat16)  # t10: \"cuda:0 bf16[8, 16]\"\n"
  "  return (t10,)\n";

static void
test_consecutive_regions (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTrace) t = cs_parse_trace (chain_trace, "chain", &error);
  g_autoptr(CsTrace) f = NULL;
  g_autoptr(CsTrace) clean = NULL;
  CsPolicy p;
  const CsStmt *r0 = NULL, *r1 = NULL, *mm = NULL;
  guint n_regions = 0;

  g_assert_no_error (error);
  cs_policy_init_default (&p);
  f = cs_fuse_trace (t, &p, &error);
  g_assert_no_error (error);
  for (guint i = 0; i < f->n_stmts; i++)
    {
      const CsStmt *s = f->stmts[i];
      if (_cs_stmt_is_region (s))
        {
          if (n_regions == 0)
            r0 = s;
          else
            r1 = s;
          n_regions++;
        }
      else if (s->kind == CS_STMT_CALL)
        mm = s;
    }
  g_assert_cmpuint (n_regions, ==, 2);
  g_assert_cmpstr (r0->callee, ==, "nvFusion0");
  g_assert_cmpstr (r1->callee, ==, "nvFusion1");
  g_assert_cmpuint (r0->n_subs, ==, 7);
  g_assert_cmpuint (r1->n_subs, ==, 3);
  g_assert_cmpstr (mm->callee, ==, "prims.matmul");
  g_assert_cmpstr (r0->why, ==, "next statement prims.matmul is not fusible (fuse-matmul=off)");
  g_assert_cmpstr (r1->why, ==, "end of trace");
  /* inputs/outputs: [t6] = nvFusion0(a, b); [t10] = nvFusion1(t7) */
  g_assert_cmpuint (r0->n_args, ==, 2);
  g_assert_cmpstr (r0->args[0].value->u.proxy->name, ==, "a");
  g_assert_cmpstr (r0->args[1].value->u.proxy->name, ==, "b");
  g_assert_cmpuint (r0->out->u.seq.n, ==, 1);
  g_assert_cmpstr (r0->out->u.seq.items[0]->u.proxy->name, ==, "t6");
  g_assert_true (cs_fuse_check_invariants (f, &error));

  /* redundant casts: t4 = cvt(t3 = cvt(t2, bf16), f32) is t2 itself; t3 dies */
  clean = fuse_and_clean (t, &p);
  for (guint i = 0; i < clean->n_stmts; i++)
    if (_cs_stmt_is_region (clean->stmts[i]))
      {
        r0 = clean->stmts[i];
        break;
      }
  g_assert_cmpuint (r0->n_subs, ==, 5);
  for (guint i = 0; i < r0->n_subs; i++)
    {
      CsProxy *o = cs_stmt_get_output (r0->subs[i]);
      g_assert_cmpstr (o->name, !=, "t3");
      g_assert_cmpstr (o->name, !=, "t4");
      if (strcmp (o->name, "t5") == 0)
        g_assert_cmpstr (r0->subs[i]->args[0].value->u.proxy->name, ==, "t2");
    }

  /* fuse-matmul=on: one region holding everything */
  p.fuse_matmul = TRUE;
  {
    g_autoptr(CsTrace) g = cs_fuse_trace (t, &p, &error);
    g_assert_no_error (error);
    g_assert_cmpuint (cs_fuse_count_regions (g), ==, 1);
  }
  /* fusion=off: no region */
  p.fuse_matmul = FALSE;
  p.fusion = CS_FUSION_OFF;
  {
    g_autoptr(CsTrace) g = cs_fuse_trace (t, &p, &error);
    g_assert_cmpuint (cs_fuse_count_regions (g), ==, 0);
    g_assert_cmpuint (g->n_stmts, ==, t->n_stmts);
  }
}

/* Dataflow grouping merges across a non-fusible statement when no data path runs through it:
 * x -> exp (fusible), y -> matmul (not), x -> neg (fusible).  Consecutive: 2 regions, which
 * rematerialization makes 1; dataflow: exp and neg in one region, before or after the
 * matmul. */
static const char *horiz_trace =
  "def computation(x, w):\n"
  "  # x: \"cuda:0 f32[4, 4]\"\n"
  "  # w: \"cuda:0 f32[4, 4]\"\n"
  "  t0 = prims.exp(x)  # t0: \"cuda:0 f32[4, 4]\"\n"
  "  t1 = prims.matmul(w, w)  # t1: \"cuda:0 f32[4, 4]\"\n"
  "  t2 = prims.neg(x)  # t2: \"cuda:0 f32[4, 4]\"\n"
  "  t3 = prims.add(t0, t2)  # t3: \"cuda:0 f32[4, 4]\"\n"
  "  return (t3, t1)\n";

/* A cycle guard: a = exp(x); m = matmul(a, w); b = add(a, m): a and b may not share a region
 * because the path a -> m -> b leaves it. */
static const char *cycle_trace =
  "def computation(x, w):\n"
  "  # x: \"cuda:0 f32[4, 4]\"\n"
  "  # w: \"cuda:0 f32[4, 4]\"\n"
  "  t0 = prims.exp(x)  # t0: \"cuda:0 f32[4, 4]\"\n"
  "  t1 = prims.matmul(t0, w)  # t1: \"cuda:0 f32[4, 4]\"\n"
  "  t2 = prims.add(t0, t1)  # t2: \"cuda:0 f32[4, 4]\"\n"
  "  return (t2,)\n";

static void
test_dataflow_regions (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTrace) h = cs_parse_trace (horiz_trace, "horiz", &error);
  g_autoptr(CsTrace) c = cs_parse_trace (cycle_trace, "cycle", &error);
  CsPolicy p;

  g_assert_no_error (error);
  cs_policy_init_default (&p);
  {
    /* consecutive grouping makes exp | matmul | neg, add; rematerialization then recomputes
     * exp in the second region (the cut passes x, f32 halved as a producer input: 2, not t0:
     * 4) and the first, left without outputs, goes */
    g_autoptr(CsTrace) f = cs_fuse_trace (h, &p, &error);
    g_assert_cmpuint (cs_fuse_count_regions (f), ==, 1);
    g_assert_true (cs_fuse_check_invariants (f, &error));
    g_assert_no_error (error);
  }
  p.fusion = CS_FUSION_DATAFLOW;
  {
    g_autoptr(CsTrace) f = cs_fuse_trace (h, &p, &error);
    g_assert_no_error (error);
    g_assert_cmpuint (cs_fuse_count_regions (f), ==, 1);
    g_assert_true (cs_fuse_check_invariants (f, &error));
    g_assert_no_error (error);
  }
  {
    g_autoptr(CsTrace) f = cs_fuse_trace (c, &p, &error);
    g_assert_no_error (error);
    g_assert_cmpuint (cs_fuse_count_regions (f), ==, 2);
    g_assert_true (cs_fuse_check_invariants (f, &error));
    g_assert_no_error (error);
  }
}

/* Shape-only runs stay unfused; a single fusible statement still becomes a region. */
static const char *shape_trace =
  "def computation(x, w):\n"
  "  # x: \"cuda:0 bf16[4, 4]\"\n"
  "  # w: \"cuda:0 bf16[4, 4]\"\n"
  "  t0 = prims.transpose(x, (1, 0))  # t0: \"cuda:0 bf16[4, 4]\"\n"
  "  t1 = prims.matmul(t0, w)  # t1: \"cuda:0 bf16[4, 4]\"\n"
  "  t2 = prims.convert_element_type(t1, dtypes.float32)  # t2: \"cuda:0 f32[4, 4]\"\n"
  "  return (t2,)\n";

static void
test_shape_only (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTrace) t = cs_parse_trace (shape_trace, "shape", &error);
  g_autoptr(CsTrace) f = NULL;
  CsPolicy p;

  g_assert_no_error (error);
  cs_policy_init_default (&p);
  f = cs_fuse_trace (t, &p, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (cs_fuse_count_regions (f), ==, 1);
  g_assert_cmpstr (f->stmts[2]->callee, ==, "prims.transpose");
  g_assert_cmpstr (f->stmts[4]->callee, ==, "nvFusion0");
}

/* Delete-last-used: after each statement, its outputs and arguments not used later. */
static void
test_dellast (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTrace) t = cs_parse_trace (horiz_trace, "horiz", &error);
  g_autoptr(CsTrace) d = NULL;
  g_autofree char *text = NULL;

  g_assert_no_error (error);
  d = cs_dellast_trace (t, FALSE);
  text = cs_print_trace (d, CS_PRINT_NO_LEADING);
  /* w dies after the matmul; x after neg; t0, t2 after add; t1 and t3 are returned */
  g_assert_nonnull (strstr (text, "t1 = prims.matmul(w, w)  # t1: \"cuda:0 f32[4, 4]\"\n  del w\n"));
  g_assert_nonnull (strstr (text, "t2 = prims.neg(x)  # t2: \"cuda:0 f32[4, 4]\"\n  del x\n"));
  g_assert_nonnull (strstr (text, "  del t0, t2\n  return (t3, t1)"));
  g_assert_null (strstr (text, "del t1"));
}

/* Stats: 8x16 @ 16x16 bf16 matmul = 2*8*16*16 = 4096 FLOP on tensor cores. */
static void
test_stats (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTrace) t = cs_parse_trace (chain_trace, "chain", &error);
  g_autoptr(CsTrace) f = NULL;
  g_autoptr(CsTraceStats) st = NULL;
  CsPolicy p;
  const CsStatsEntry *r0;

  g_assert_no_error (error);
  cs_policy_init_default (&p);
  f = fuse_and_clean (t, &p);
  st = cs_stats_compute (f);
  g_assert_cmpuint (st->total.n_regions, ==, 2);
  g_assert_cmpuint (st->total.n_matmuls, ==, 1);
  g_assert_cmpuint (st->total.n_tensor_core_matmuls, ==, 1);
  /* casts left: a, b up; t2->bf16 gone? no: t5 = exp(t2) then t6 = cvt(t5, bf16) down;
   * region 1: t8 up, t10 down.  5 casts */
  g_assert_cmpuint (st->total.n_casts, ==, 5);
  g_assert_cmpuint (st->total.n_upcasts, ==, 3);
  g_assert_cmpuint (st->total.n_downcasts, ==, 2);
  /* region 0 reads a, b (2 * 128 * 2 bytes) and writes t6 (256 bytes) */
  r0 = &g_array_index (st->regions, CsStatsEntry, 0);
  g_assert_cmpfloat (r0->bytes_read, ==, 512.0);
  g_assert_cmpfloat (r0->bytes_written, ==, 256.0);
  /* matmul: 4096 FLOP; elementwise per output element: cvt a, cvt b, add, exp, cvt (5 * 128)
   * + region 1: cvt, neg, cvt (3 * 128) */
  g_assert_cmpfloat (st->total.flops, ==, 4096.0 + 8 * 128.0);
  /* time of region 0: max(5*128/60e12 s, 768/4.3e12 s) = 768/4.3e12 s */
  g_assert_cmpfloat_with_epsilon (r0->est_ms, 768.0 / 4.3e12 * 1e3, 1e-15);
}

/* ---- Thunder's own fusion decisions ------------------------------------------------------ */

static void
compare_with_thunder (const char *joint_file, const char *fused_file, gboolean fuse_mm)
{
  g_autoptr(CsTrace) joint = load_shared (joint_file);
  g_autoptr(CsTrace) thunder = NULL;
  g_autoptr(CsTrace) ours = NULL;
  CsPolicy p;

  if (joint == NULL)
    {
      g_test_skip ("CS_SHARED_TRACES not available");
      return;
    }
  thunder = load_shared (fused_file);
  cs_policy_init_default (&p);
  p.fuse_matmul = fuse_mm;
  p.fuse_linear = fuse_mm;
  ours = fuse_and_clean (joint, &p);
  assert_same_regions (ours, thunder);
}

/* Starting from Thunder's own (unfused, torch-executor) joint trace of the seed. */
static void
test_thunder_seed_default (void)
{
  compare_with_thunder ("thunder_a_seed_matmul_grad_joint.txt",
                        "thunder_nvfuser_a_seed_matmul_default_fused_joint.txt", FALSE);
}

static void
test_thunder_seed_linear_matmul (void)
{
  compare_with_thunder ("thunder_a_seed_matmul_grad_joint.txt",
                        "thunder_nvfuser_a_seed_matmul_linear_matmul_fused_joint.txt", TRUE);
}

/* Flatten a Thunder-fused trace and fuse it again with the policy it was made with. */
static void
refuse_case (const char *file, gboolean fuse_linear, guint expect_regions)
{
  g_autoptr(CsTrace) t = load_shared (file);
  g_autoptr(CsTrace) flat = NULL;
  g_autoptr(CsTrace) again = NULL;
  CsPolicy p;

  if (t == NULL)
    {
      g_test_skip ("CS_SHARED_TRACES not available");
      return;
    }
  cs_policy_init_default (&p);
  p.fuse_linear = fuse_linear;
  p.fuse_matmul = fuse_linear;
  flat = cs_fuse_flatten_regions (t);
  g_assert_cmpuint (cs_fuse_count_regions (flat), ==, 0);
  again = fuse_and_clean (flat, &p);
  g_assert_cmpuint (cs_fuse_count_regions (t), ==, expect_regions);
  assert_same_regions (again, t);
}

/* issue #283: autocast casts form their own region before torch.matmul; the f32 add after it
 * forms another (policy: defaults). */
static void
test_refuse_issue283 (void)
{
  refuse_case ("issue283_autocast_bf16_matmul.txt", FALSE, 2);
}

/* docs MLP (dropout regions between linears; types elided; policy: defaults). */
static void
test_refuse_docs_mlp (void)
{
  refuse_case ("docs_mlp_mnist_augmented_forward.txt", FALSE, 5);
}

/* LLaMA bf16 forward excerpt (RMSNorm/RoPE/SwiGLU regions; policy: defaults). */
static void
test_refuse_llama (void)
{
  g_autoptr(CsTrace) t = load_shared ("nb_llama_bf16_augmented_forward_excerpt.txt");
  if (t == NULL)
    {
      g_test_skip ("CS_SHARED_TRACES not available");
      return;
    }
  refuse_case ("nb_llama_bf16_augmented_forward_excerpt.txt", FALSE, cs_fuse_count_regions (t));
}


/* issue #1368 (nv_enable_linear=True): the stored excerpt stops mid-region, with no return and
 * outputs (t14, t21) made by prims that were cut off, so its region cannot be rebuilt exactly.
 * What can be checked: returning the last value the excerpt computes, the flattened prims form
 * one region holding prims.linear with fuse-linear=on, and split at the linear without it. */
static void
test_refuse_issue1368 (void)
{
  g_autoptr(CsTrace) t = load_shared ("issue1368_linear_inside_fusion_excerpt.txt");
  g_autoptr(CsTrace) flat = NULL;
  CsPolicy p;
  CsStmt *ret;
  CsValue *item;
  guint n;

  if (t == NULL)
    {
      g_test_skip ("CS_SHARED_TRACES not available");
      return;
    }
  g_assert_null (cs_trace_get_return (t));
  flat = cs_fuse_flatten_regions (t);
  n = flat->n_stmts;
  item = cs_value_new_proxy (flat->arena, cs_stmt_get_output (flat->stmts[n - 1]));
  ret = cs_stmt_new (flat, CS_STMT_RETURN);
  ret->value = cs_value_new_seq (flat->arena, CS_VALUE_TUPLE, &item, 1);
  {
    CsStmt **stmts = g_new (CsStmt *, n + 1);
    memcpy (stmts, flat->stmts, sizeof (CsStmt *) * n);
    stmts[n] = ret;
    cs_trace_set_stmts (flat, stmts, n + 1);
    g_free (stmts);
  }
  cs_policy_init_default (&p);
  p.fuse_linear = TRUE;
  {
    g_autoptr(CsTrace) f = fuse_and_clean (flat, &p);
    g_autoptr(GPtrArray) sig = signatures (f);
    g_assert_cmpuint (sig->len, ==, 1);
    g_assert_nonnull (strstr (sig->pdata[0], "prims.linear"));
  }
  p.fuse_linear = FALSE;
  {
    g_autoptr(CsTrace) f = fuse_and_clean (flat, &p);
    g_assert_cmpuint (cs_fuse_count_regions (f), ==, 2);
  }
}


/* Malformed input found by fuzz-pipeline: an early `return` before the last one used to
 * overflow the dataflow grouping's per-node array.  Both modes must fuse without a crash. */
static void
test_two_returns (void)
{
  const char *text =
    "def computation(x):\n"
    "  # x: \"cuda:0 f32[4]\"\n"
    "  t0 = prims.exp(x)  # t0: \"cuda:0 f32[4]\"\n"
    "  return\n"
    "  t1 = prims.neg(t0)  # t1: \"cuda:0 f32[4]\"\n"
    "  return (t1,)\n";
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTrace) t = cs_parse_trace (text, "two-returns", &error);
  CsPolicy p;

  g_assert_no_error (error);
  cs_policy_init_default (&p);
  for (int mode = 0; mode < 2; mode++)
    {
      g_autoptr(CsTrace) f = NULL;
      p.fusion = mode ? CS_FUSION_DATAFLOW : CS_FUSION_CONSECUTIVE;
      f = cs_fuse_trace (t, &p, &error);
      g_assert_no_error (error);
      g_assert_nonnull (f);
      /* the early return is not fusible: consecutive grouping stops at it (two regions),
       * then rematerialization moves exp into neg's region (the cut passes x, f32 halved as
       * a producer input: 2, rather than t0: 4) and the first region, left without outputs,
       * goes; dataflow grouping merges exp -> neg, which no data path through it separates */
      g_assert_cmpuint (cs_fuse_count_regions (f), ==, 1);
    }
}

/* Rematerialization's min-cut, by hand: P = [t0 = exp(x), t1 = convert(t0)] | matmul | C =
 * [mul(t1, t2)].  The cut passes either P's input x (its element size halved: a producer input)
 * or t1 (its element size).  x bf16 -> t1 f32: 1 < 4, C recomputes exp and the convert from x and
 * P, left without outputs, goes (one region, whose end reason says so).  x f32 -> t1 bf16:
 * 2 == 2, a tie, which networkx's partition gives to the cut nearest the consumer: t1 is passed,
 * nothing moves (two regions). */
static void
test_remat_cut (void)
{
  static const char *const fmt =
    "def computation(x, w):\n"
    "  # x: \"cuda:0 %s[4, 4]\"\n"
    "  # w: \"cuda:0 f32[4, 4]\"\n"
    "  t0 = prims.exp(x)  # t0: \"cuda:0 %s[4, 4]\"\n"
    "  t1 = prims.convert_element_type(t0, dtypes.%s)  # t1: \"cuda:0 %s[4, 4]\"\n"
    "  t2 = prims.matmul(w, w)  # t2: \"cuda:0 f32[4, 4]\"\n"
    "  t3 = prims.mul(t1, t2)  # t3: \"cuda:0 f32[4, 4]\"\n"
    "  return (t3,)\n";
  CsPolicy p;

  cs_policy_init_default (&p);
  for (int f32_in = 0; f32_in < 2; f32_in++)
    {
      g_autoptr(GError) error = NULL;
      g_autofree char *text = f32_in ? g_strdup_printf (fmt, "f32", "f32", "bfloat16", "bf16")
                                     : g_strdup_printf (fmt, "bf16", "bf16", "float32", "f32");
      g_autoptr(CsTrace) t = cs_parse_trace (text, "remat-cut", &error);
      g_autoptr(CsTrace) f = NULL;
      const CsStmt *last = NULL;

      g_assert_no_error (error);
      f = cs_fuse_trace (t, &p, &error);
      g_assert_no_error (error);
      g_assert_true (cs_fuse_check_invariants (f, &error));
      g_assert_no_error (error);
      g_assert_cmpuint (cs_fuse_count_regions (f), ==, f32_in ? 2 : 1);
      for (guint i = 0; i < f->n_stmts; i++)
        if (_cs_stmt_is_region (f->stmts[i]))
          last = f->stmts[i];
      g_assert_nonnull (last);
      g_assert_cmpuint (last->n_subs, ==, f32_in ? 1 : 3);
      if (!f32_in)
        g_assert_nonnull (strstr (last->why, "nvFusion0 recomputed here by rematerialization"));
    }
}

/* Diff: default vs fuse-matmul on the chain trace: the two regions merge into one. */
static void
test_diff (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTrace) t = cs_parse_trace (chain_trace, "chain", &error);
  g_autoptr(CsTrace) a = NULL;
  g_autoptr(CsTrace) b = NULL;
  g_autoptr(CsTraceDiff) d = NULL;
  g_autoptr(CsTraceDiff) same = NULL;
  CsPolicy p;

  g_assert_no_error (error);
  cs_policy_init_default (&p);
  a = fuse_and_clean (t, &p);
  p.fuse_matmul = TRUE;
  b = fuse_and_clean (t, &p);
  d = cs_trace_diff (a, b);
  g_assert_cmpuint (d->n_regions_a, ==, 2);
  g_assert_cmpuint (d->n_regions_b, ==, 1);
  g_assert_cmpuint (d->regions_merged->len, ==, 1);
  g_assert_cmpuint (((CsDiffRegion *) d->regions_merged->pdata[0])->others->len, ==, 2);
  g_assert_cmpuint (d->regions_split->len, ==, 0);
  /* one region: the bf16 round trip t6 -> matmul -> t8 stays (matmul output is bf16), but
   * the casts around the matmul are the same statements: no cast change */
  g_assert_cmpuint (d->casts_added->len, ==, 0);
  /* the other way round, fuse-matmul=on's one region splits into two */
  {
    g_autoptr(CsTraceDiff) r = cs_trace_diff (b, a);
    g_assert_cmpuint (r->regions_split->len, ==, 1);
    g_assert_cmpuint (((CsDiffRegion *) r->regions_split->pdata[0])->others->len, ==, 2);
    g_assert_cmpuint (r->regions_merged->len, ==, 0);
  }
  same = cs_trace_diff (a, a);
  g_assert_true (cs_trace_diff_is_empty (same));
}

/* seed_foo_bwd.txt unpacks t6, t4 and w without type comments; its two matmuls print bf16
 * outputs, so both are tensor-core matmuls (reference 2.4: operands and output share a dtype). */
static void
test_stats_untyped_operands (void)
{
  g_autoptr(CsTrace) t = load_shared ("seed_foo_bwd.txt");
  g_autoptr(CsTraceStats) st = NULL;

  if (t == NULL)
    {
      g_test_skip ("CS_SHARED_TRACES not available");
      return;
    }
  g_assert_false (cs_trace_lookup_proxy (t, "t6")->typed);
  st = cs_stats_compute (t);
  g_assert_cmpuint (st->total.n_matmuls, ==, 2);
  g_assert_cmpuint (st->total.n_tensor_core_matmuls, ==, 2);
}

/* The incremental refresh: a region left fresh by one refresh must be rebuilt when a later
 * statement starts reading one of its internal values while its outputs stay needed (here
 * t4 = neg(t2) is redirected to read t1, the sin output hidden in nvFusion0, and the matmul
 * still reads t2). */
static const char *hidden_trace =
  "def computation(a):\n"
  "  # a: \"cuda:0 f32[4, 4]\"\n"
  "  [t2] = nvFusion0(a)\n"
  "    # t1 = prims.sin(a)  # t1: \"cuda:0 f32[4, 4]\"\n"
  "    # t2 = prims.cos(t1)  # t2: \"cuda:0 f32[4, 4]\"\n"
  "  t3 = prims.matmul(t2, t2)  # t3: \"cuda:0 f32[4, 4]\"\n"
  "  t4 = prims.neg(t2)  # t4: \"cuda:0 f32[4, 4]\"\n"
  "  return (t3, t4)\n";

static void
test_refresh_hidden_value (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTrace) t = cs_parse_trace (hidden_trace, "hidden", &error);
  g_autoptr(CsProxyMap) map = _cs_proxy_map_new ();
  g_autofree char *text = NULL;
  CsStmt *region;

  g_assert_no_error (error);
  _cs_regions_refresh (t, FALSE);
  region = t->stmts[1];
  g_assert_true (_cs_stmt_is_region (region));
  g_assert_true (region->region_fresh);
  g_assert_cmpuint (region->out->u.seq.n, ==, 1);

  _cs_proxy_map_insert (map, cs_trace_lookup_proxy (t, "t2"), cs_trace_lookup_proxy (t, "t1"));
  g_assert_cmpstr (t->stmts[3]->callee, ==, "prims.neg");
  t->stmts[3] = _cs_stmt_remap_reads (t, t->stmts[3], map);
  _cs_regions_refresh (t, FALSE);
  text = cs_print_trace (t, CS_PRINT_NO_SUBS);
  /* both values leave the region now, in production order */
  g_assert_nonnull (strstr (text, "[t1, t2] = nvFusion0(a)"));
  g_assert_nonnull (strstr (text, "t4 = prims.neg(t1)"));
}

/* The same refreshes as test_refresh_hidden_value with one store of marks kept across them
 * and across another trace refreshed in between (its marks are stale for the first trace):
 * the same regions come out as with a store per refresh. */
static void
test_refresh_shared_marks (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTrace) t = cs_parse_trace (hidden_trace, "hidden", &error);
  g_autoptr(CsTrace) other = NULL;
  g_autoptr(CsProxyMap) map = _cs_proxy_map_new ();
  g_autofree char *text = NULL, *other_text = NULL;
  CsRefreshMarks *marks = _cs_refresh_marks_new ();

  g_assert_no_error (error);
  _cs_regions_refresh_with (t, FALSE, marks);
  g_assert_true (t->stmts[1]->region_fresh);
  g_assert_cmpuint (t->stmts[1]->out->u.seq.n, ==, 1);

  /* another trace: the sin output is read after the region from the start */
  other = cs_parse_trace ("def computation(a):\n"
                          "  # a: \"cuda:0 f32[4, 4]\"\n"
                          "  [t2] = nvFusion0(a)\n"
                          "    # t1 = prims.sin(a)  # t1: \"cuda:0 f32[4, 4]\"\n"
                          "    # t2 = prims.cos(t1)  # t2: \"cuda:0 f32[4, 4]\"\n"
                          "    # t5 = prims.exp(t1)  # t5: \"cuda:0 f32[4, 4]\"\n"
                          "  t4 = prims.neg(t1)  # t4: \"cuda:0 f32[4, 4]\"\n"
                          "  return (t4,)\n", "other", &error);
  g_assert_no_error (error);
  _cs_regions_refresh_with (other, TRUE, marks);
  other_text = cs_print_trace (other, 0);
  /* t2 and t5 are read by nothing: only sin stays, as the region's one output */
  g_assert_nonnull (strstr (other_text, "[t1] = nvFusion0(a)"));
  g_assert_null (strstr (other_text, "prims.cos"));
  g_assert_null (strstr (other_text, "prims.exp"));

  _cs_proxy_map_insert (map, cs_trace_lookup_proxy (t, "t2"), cs_trace_lookup_proxy (t, "t1"));
  t->stmts[3] = _cs_stmt_remap_reads (t, t->stmts[3], map);
  _cs_regions_refresh_with (t, FALSE, marks);
  text = cs_print_trace (t, CS_PRINT_NO_SUBS);
  g_assert_nonnull (strstr (text, "[t1, t2] = nvFusion0(a)"));
  g_assert_nonnull (strstr (text, "t4 = prims.neg(t1)"));
  _cs_refresh_marks_free (marks);
}

/* A chain of @n bf16 ops (add, mul, tanh, matmul repeated), the shape of bench-pipeline's
 * generated trace: after grad, about n/2 regions. */
static char *
generated_chain (guint n)
{
  GString *s = g_string_new ("def computation(x, w):\n"
                             "  # x: \"cuda:0 bf16[64, 64]\"\n  # w: \"cuda:0 bf16[64, 64]\"\n");
  char prev[32] = "x";

  for (guint i = 0; i < n; i++)
    {
      g_string_append_printf (s, "  t%u = ", i);
      switch (i % 4)
        {
        case 0: g_string_append_printf (s, "ltorch.add(%s, w, alpha=1)", prev); break;
        case 1: g_string_append_printf (s, "ltorch.mul(%s, %s)", prev, prev); break;
        case 2: g_string_append_printf (s, "ltorch.tanh(%s)", prev); break;
        default: g_string_append_printf (s, "ltorch.matmul(%s, w)", prev); break;
        }
      g_string_append_printf (s, "  # t%u: \"cuda:0 bf16[64, 64]\"\n", i);
      g_snprintf (prev, sizeof prev, "t%u", i);
    }
  g_string_append_printf (s, "  return (%s,)\n", prev);
  return g_string_free (s, FALSE);
}

/* Appends the ids, origins and output proxy ids of @s and its subsymbols (not printed in a
 * trace, but the GUI and the passes key on them). */
static void
append_ids (GString *out, const CsStmt *s, guint depth)
{
  CsProxy *o = cs_stmt_get_output (s);

  g_string_append_printf (out, "%*s%u/%u", (int) depth, "", s->id, s->origin);
  if (o != NULL)
    g_string_append_printf (out, "->%s#%u", o->name, o->id);
  g_string_append_c (out, '\n');
  for (guint i = 0; i < s->n_subs; i++)
    append_ids (out, s->subs[i], depth + 1);
}

/* Every pass's trace, printed, under @policy_kv, with every statement's id, origin and output
 * proxy id after it. */
static char *
pipeline_text (const CsTrace *t, const char *policy_kv)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(CsPipeline) p = NULL;
  GString *all = g_string_new (NULL);
  g_autoptr(GRegex) took = g_regex_new ("took [0-9]+ milliseconds", 0, 0, NULL);
  CsPolicy policy;

  cs_policy_init_default (&policy);
  if (policy_kv != NULL)
    g_assert_true (cs_policy_parse_assignment (&policy, policy_kv, &error));
  p = cs_pipeline_run (t, &policy, NULL, &error);
  g_assert_no_error (error);
  for (guint i = 0; i < cs_pipeline_n_passes (p); i++)
    {
      g_autofree char *printed = cs_print_trace (cs_pipeline_get_trace (p, i), CS_PRINT_DEFAULT);
      /* provenance lines hold the passes' wall times: left out */
      g_autofree char *text = g_regex_replace_literal (took, printed, -1, 0, "took N milliseconds",
                                                       0, NULL);
      const char *body = g_str_has_prefix (text, "# Constructed by ") ? strchr (text, '\n') : NULL;
      const CsTrace *pt = cs_pipeline_get_trace (p, i);
      g_string_append_printf (all, "## %s\n%s", cs_pipeline_pass_name (p, i),
                              body != NULL ? body + 1 : text);
      for (guint k = 0; k < pt->n_stmts; k++)
        append_ids (all, pt->stmts[k], 0);
    }
  return g_string_free (all, FALSE);
}

/* The pipeline's output depends on its input alone: two parses of the same 400-block chain
 * give the same text, ids included, whether run first, after another trace or a second time
 * (no state of one run - name counters, scratch arrays, generation marks - reaches the next).
 * Under matmul=upcast-f32 rrc replaces region outputs, so later regions are remapped before
 * they are rewritten. */
static void
test_pipeline_deterministic (void)
{
  g_autofree char *src = generated_chain (400);
  g_autofree char *other_src = generated_chain (37);
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTrace) t1 = cs_parse_trace (src, "chain", &error);
  g_autoptr(CsTrace) t2 = NULL;
  g_autoptr(CsTrace) other = NULL;
  const char *policies[] = { NULL, "matmul=upcast-f32", "fusion=dataflow" };

  g_assert_no_error (error);
  t2 = cs_parse_trace (src, "chain", &error);
  g_assert_no_error (error);
  other = cs_parse_trace (other_src, "other", &error);
  g_assert_no_error (error);
  for (guint k = 0; k < G_N_ELEMENTS (policies); k++)
    {
      g_autofree char *first = pipeline_text (t1, policies[k]);
      g_autofree char *between = pipeline_text (other, policies[k]);
      g_autofree char *fresh = pipeline_text (t2, policies[k]);
      g_autofree char *again = pipeline_text (t1, policies[k]);

      g_assert_cmpstr (fresh, ==, first);
      g_assert_cmpstr (again, ==, first);
      g_assert_cmpstr (between, !=, first);
      /* by hand: the matmuls (fuse-matmul=off) cut the chain into 100 blocks of add, mul,
       * tanh, each one forward region and, with its VJPs, one backward region: nvFusion0 ..
       * nvFusion199 (upcast-f32's casts around the matmuls form regions of their own) */
      g_assert_nonnull (strstr (first, "nvFusion199("));
      if (policies[k] == NULL || strcmp (policies[k], "fusion=dataflow") == 0)
        g_assert_null (strstr (first, "nvFusion200"));
    }
}

/* @k regions reading a_i and b_i, equal adds at the top level: CSE maps them all to a0, which
 * turns each region's two muls into duplicates, so the region must be rewritten after the
 * remap.  Parsed statements have no origin, so the derived trace owns its regions: the
 * rewrite edits them in place.  rrc finds no cast and leaves every region as it is. */
static void
test_cse_region_after_remap (void)
{
  GString *src = g_string_new ("def computation(x, w):\n"
                               "  # x: \"cuda:0 f32[4, 4]\"\n  # w: \"cuda:0 f32[4, 4]\"\n");
  GString *ret = g_string_new ("  return (");
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTrace) t = NULL;
  g_autoptr(CsTrace) cse = NULL, rrc = NULL;
  g_autofree char *cse_text = NULL, *rrc_text = NULL;
  const guint k = 80;

  for (guint i = 0; i < k; i++)
    {
      g_string_append_printf (src, "  a%u = prims.add(x, w)  # a%u: \"cuda:0 f32[4, 4]\"\n", i, i);
      g_string_append_printf (src, "  b%u = prims.add(x, w)  # b%u: \"cuda:0 f32[4, 4]\"\n", i, i);
      g_string_append_printf (src, "  [c%u, d%u] = nvFusion%u(a%u, b%u)\n", i, i, i, i, i);
      g_string_append_printf (src, "    # c%u = prims.mul(a%u, a%u)  # c%u: \"cuda:0 f32[4, 4]\"\n",
                              i, i, i, i);
      g_string_append_printf (src, "    # d%u = prims.mul(b%u, b%u)  # d%u: \"cuda:0 f32[4, 4]\"\n",
                              i, i, i, i);
      g_string_append_printf (ret, "c%u, d%u, ", i, i);
    }
  g_string_append (ret, ")\n");
  g_string_append (src, ret->str);
  t = cs_parse_trace (src->str, "owned", &error);
  g_assert_no_error (error);
  cse = cs_cse_trace (t);
  rrc = cs_cse_remove_redundant_casts (t);
  cse_text = cs_print_trace (cse, CS_PRINT_DEFAULT);
  rrc_text = cs_print_trace (rrc, CS_PRINT_DEFAULT);
  /* by hand: every a_i and b_i is a0 (equal top-level adds), so d_i = a0 * a0 = c_i, and
   * every region keeps one mul of a0 */
  for (guint i = 0; i < k; i += 79)
    {
      g_autofree char *region = g_strdup_printf ("[c%u] = nvFusion%u(a0)", i, i);
      g_autofree char *dup = g_strdup_printf ("d%u = prims.mul", i);
      g_autofree char *kept = g_strdup_printf ("[c%u, d%u] = nvFusion%u(a%u, b%u)", i, i, i, i, i);
      g_assert_nonnull (strstr (cse_text, region));
      g_assert_null (strstr (cse_text, dup));
      g_assert_nonnull (strstr (rrc_text, kept));
      g_assert_nonnull (strstr (rrc_text, dup));
    }
  g_string_free (src, TRUE);
  g_string_free (ret, TRUE);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, G_TEST_OPTION_ISOLATE_DIRS, NULL);
  g_test_add_func ("/core/fuse/refresh/hidden-value-read-later", test_refresh_hidden_value);
  g_test_add_func ("/core/fuse/refresh/shared-marks", test_refresh_shared_marks);
  g_test_add_func ("/core/fuse/consecutive/regions", test_consecutive_regions);
  g_test_add_func ("/core/fuse/dataflow/regions", test_dataflow_regions);
  g_test_add_func ("/core/fuse/shape-only", test_shape_only);
  g_test_add_func ("/core/fuse/dellast", test_dellast);
  g_test_add_func ("/core/fuse/stats", test_stats);
  g_test_add_func ("/core/fuse/diff", test_diff);
  g_test_add_func ("/core/fuse/two-returns", test_two_returns);
  g_test_add_func ("/core/fuse/remat-cut", test_remat_cut);
  g_test_add_func ("/core/fuse/thunder/seed-default", test_thunder_seed_default);
  g_test_add_func ("/core/fuse/thunder/seed-linear-matmul", test_thunder_seed_linear_matmul);
  g_test_add_func ("/core/fuse/refuse/issue283", test_refuse_issue283);
  g_test_add_func ("/core/fuse/refuse/docs-mlp", test_refuse_docs_mlp);
  g_test_add_func ("/core/fuse/refuse/llama", test_refuse_llama);
  g_test_add_func ("/core/fuse/refuse/issue1368-excerpt", test_refuse_issue1368);
  g_test_add_func ("/core/stats/untyped-operands", test_stats_untyped_operands);
  g_test_add_func ("/core/pipeline/deterministic", test_pipeline_deterministic);
  g_test_add_func ("/core/cse/region-after-remap", test_cse_region_after_remap);
  return g_test_run ();
}
