/* test-render-graph.c: trace -> display list semantics, Graphviz geometry, hit testing,
 * overlays, diff marks and the async layout (render/cs-graph.c, render/cs-layout.c).
 *
 * Expected values are counted by hand from the trace text below (Thunder's final forward
 * trace of the seed function with the nvFuser executor, ../shared/traces/
 * thunder_nvfuser_a_seed_matmul_default_final_fwd.txt) and from the cast policy's definition.
 */
#include "cs-config.h"

#include <math.h>
#include <string.h>

#include "cs-lens.h"
#include "cs-parse.h"
#include "cs-pipeline.h"
#include "cs-policy.h"
#include "cs-render.h"
#include "test-duplicate-saved-trace.h"

static const char seed_fwd[] =
  "import torch\n"
  "from thunder.executors.torchex import no_autocast\n"
  "\n"
  "@torch.no_grad()\n"
  "@no_autocast\n"
  "def computation(a, b, w):\n"
  "  # a: \"cuda:0 bf16[8, 16]\"\n"
  "  # b: \"cuda:0 bf16[16]\"\n"
  "  # w: \"cuda:0 bf16[16, 16]\"\n"
  "  [t19] = nvFusion0(b, a)\n"
  "    # t6 = prims.broadcast_in_dim(b, (8, 16), (1,))  # t6: \"cuda:0 bf16[8, 16]\"\n"
  "    # t11 = prims.convert_element_type(a, dtypes.float32)  # t11: \"cuda:0 f32[8, 16]\"\n"
  "    # t14 = prims.convert_element_type(t6, dtypes.float32)  # t14: \"cuda:0 f32[8, 16]\"\n"
  "    # t17 = prims.add(t11, t14)  # t17: \"cuda:0 f32[8, 16]\"\n"
  "    # t19 = prims.convert_element_type(t17, dtypes.bfloat16)  # t19: \"cuda:0 bf16[8, 16]\"\n"
  "\n"
  "  # fns.py:7: \t    return torch.matmul(a + b, w)\n"
  "  t31 = torch.matmul(t19, w)  # t31: \"cuda:0 bf16[8, 16]\"\n"
  "    # t31 = ltorch.matmul(t19, w)  # t31: \"cuda:0 bf16[8, 16]\"\n"
  "      # t31 = prims.matmul(t19, w)  # t31: \"cuda:0 bf16[8, 16]\"\n"
  "  return {'output': (t31,), 'flat_args': [a, b, w], 'flat_output': (t31,)}, ((w, t19), ())\n";

static const char f32_matmul[] =
  "def computation(a, w):\n"
  "  # a: \"cuda:0 f32[4, 8]\"\n"
  "  # w: \"cuda:0 f32[8, 2]\"\n"
  "  t0 = torch.matmul(a, w)  # t0: \"cuda:0 f32[4, 2]\"\n"
  "    # t0 = ltorch.matmul(a, w)  # t0: \"cuda:0 f32[4, 2]\"\n"
  "      # t0 = prims.matmul(a, w)  # t0: \"cuda:0 f32[4, 2]\"\n"
  "  return (t0,)\n";

static CsTrace *
parse (const char *text)
{
  g_autoptr(GError) error = NULL;
  CsTrace *t = cs_parse_trace (text, "test", &error);

  g_assert_no_error (error);
  g_assert_nonnull (t);
  return t;
}

static CsLayout *
build (CsTrace *t, CsRenderDetail detail)
{
  g_autoptr(GError) error = NULL;
  CsRenderOptions o;
  CsLayout *l;

  cs_render_options_init (&o);
  o.detail = detail;
  l = cs_layout_new (t, &o, NULL, &error);
  cs_render_options_clear (&o);
  g_assert_no_error (error);
  g_assert_nonnull (l);
  return l;
}

static gint
find_named (const CsLayout *l, CsLayoutNodeKind kind, const char *name)
{
  for (guint i = 0; i < l->n_nodes; i++)
    if (l->nodes[i].kind == kind && g_strcmp0 (l->nodes[i].name, name) == 0)
      return (gint) i;
  return -1;
}

static gint
find_label (const CsLayout *l, const char *label)
{
  for (guint i = 0; i < l->n_nodes; i++)
    if (g_strcmp0 (l->nodes[i].label, label) == 0)
      return (gint) i;
  return -1;
}

static guint
count_kind (const CsLayout *l, CsLayoutNodeKind kind)
{
  guint n = 0;
  for (guint i = 0; i < l->n_nodes; i++)
    n += l->nodes[i].kind == kind;
  return n;
}

static gint
find_edge (const CsLayout *l, const char *proxy, CsLayoutNodeKind head_kind)
{
  for (guint j = 0; j < l->n_edges; j++)
    if (g_strcmp0 (l->edges[j].proxy, proxy) == 0 && l->nodes[l->edges[j].head].kind == head_kind)
      return (gint) j;
  return -1;
}

/* ---- semantics ---- */

static void
test_seed_semantics (void)
{
  g_autoptr(CsTrace) t = parse (seed_fwd);
  g_autoptr(CsLayout) l = build (t, CS_RENDER_DETAIL_AUTO);
  gint mm, e;
  guint n_cast_f32 = 0, n_cast_bf16 = 0;

  /* 3 inputs + 5 region prims + matmul + 3 outputs (t31, saved w, saved t19) */
  g_assert_cmpuint (l->n_nodes, ==, 12);
  /* b->bcast, a->cvt, t6->cvt, t11->add, t14->add, t17->cvt, t19->mm, w->mm, t31->out,
   * w->saved, t19->saved */
  g_assert_cmpuint (l->n_edges, ==, 11);
  g_assert_cmpint (l->detail, ==, CS_RENDER_DETAIL_STATEMENTS);
  g_assert_cmpuint (count_kind (l, CS_LAYOUT_NODE_INPUT), ==, 3);
  g_assert_cmpuint (count_kind (l, CS_LAYOUT_NODE_OUTPUT), ==, 3);
  g_assert_cmpuint (count_kind (l, CS_LAYOUT_NODE_CAST), ==, 3);

  /* the region: 5 prims; bytes = b (16 x 2) + a (128 x 2) + t19 (128 x 2) = 544 */
  g_assert_cmpuint (l->n_clusters, ==, 1);
  g_assert_cmpint (l->clusters[0].kind, ==, CS_LAYOUT_CLUSTER_REGION);
  g_assert_cmpstr (l->clusters[0].title, ==, "nvFusion0");
  g_assert_cmpuint (l->clusters[0].n_stmts, ==, 5);
  g_assert_cmpuint (l->clusters[0].bytes, ==, 544);
  for (guint i = 0; i < t->n_stmts; i++)
    if (t->stmts[i]->kind == CS_STMT_CALL && g_strcmp0 (t->stmts[i]->callee, "nvFusion0") == 0)
      g_assert_cmpuint (l->clusters[0].stmt_id, ==, t->stmts[i]->id);
  for (guint i = 0; i < l->n_nodes; i++)
    {
      const CsLayoutNode *n = &l->nodes[i];
      if (n->kind == CS_LAYOUT_NODE_CAST)
        {
          g_assert_cmpint (n->cluster, ==, 0);
          g_assert_true (n->has_dtype);
          n_cast_f32 += n->dtype == CS_DTYPE_F32;
          n_cast_bf16 += n->dtype == CS_DTYPE_BF16;
        }
    }
  g_assert_cmpuint (n_cast_f32, ==, 2);
  g_assert_cmpuint (n_cast_bf16, ==, 1);

  /* matmul of bf16 operands: tensor cores */
  mm = find_named (l, CS_LAYOUT_NODE_OP, "torch.matmul");
  g_assert_cmpint (mm, >=, 0);
  g_assert_cmpint (l->nodes[mm].badge, ==, CS_LAYOUT_BADGE_TENSOR_CORE);
  g_assert_cmpstr (l->nodes[mm].label, ==, "matmul");
  g_assert_cmpint (l->nodes[mm].cluster, ==, -1);
  g_assert_true (l->nodes[mm].expandable);

  /* edge colours are the tensors' dtypes, labels their shapes */
  e = find_edge (l, "t19", CS_LAYOUT_NODE_OP);
  g_assert_cmpint (e, >=, 0);
  g_assert_cmpint (l->edges[e].dtype, ==, CS_DTYPE_BF16);
  g_assert_cmpstr (l->edges[e].label, ==, "[8, 16]");
  g_assert_cmpint (l->edges[e].head, ==, mm);
  e = find_edge (l, "t11", CS_LAYOUT_NODE_OP);
  g_assert_cmpint (e, >=, 0);
  g_assert_cmpint (l->edges[e].dtype, ==, CS_DTYPE_F32);
  e = find_edge (l, "b", CS_LAYOUT_NODE_OP);
  g_assert_cmpstr (l->edges[e].label, ==, "[16]");

  /* outputs: t31 returned, w and t19 saved for backward; flat_args not drawn */
  g_assert_false (l->nodes[find_named (l, CS_LAYOUT_NODE_OUTPUT, "t31")].saved);
  g_assert_true (l->nodes[find_named (l, CS_LAYOUT_NODE_OUTPUT, "w")].saved);
  g_assert_true (l->nodes[find_named (l, CS_LAYOUT_NODE_OUTPUT, "t19")].saved);
  g_assert_cmpint (find_named (l, CS_LAYOUT_NODE_OUTPUT, "a"), ==, -1);

  /* the legend knows which dtypes are drawn */
  g_assert_true (l->dtype_classes & (1u << CS_PALETTE_BF16));
  g_assert_true (l->dtype_classes & (1u << CS_PALETTE_F32));
  g_assert_false (l->dtype_classes & (1u << CS_PALETTE_F16));
  g_assert_null (l->notes[0]);
}

static void
test_f32_badge (void)
{
  g_autoptr(CsTrace) t = parse (f32_matmul);
  g_autoptr(CsLayout) l = build (t, CS_RENDER_DETAIL_AUTO);
  gint mm = find_named (l, CS_LAYOUT_NODE_OP, "torch.matmul");

  g_assert_cmpint (mm, >=, 0);
  g_assert_cmpint (l->nodes[mm].badge, ==, CS_LAYOUT_BADGE_F32);
}

static void
test_detail_levels (void)
{
  g_autoptr(CsTrace) t = parse (seed_fwd);
  g_autoptr(CsLayout) reg = build (t, CS_RENDER_DETAIL_REGIONS);
  g_autoptr(CsLayout) prims = build (t, CS_RENDER_DETAIL_PRIMS);
  gint r, pm;

  /* regions: one node for nvFusion0, no cluster: 3 inputs + region + matmul + 3 outputs */
  g_assert_cmpuint (reg->n_clusters, ==, 0);
  g_assert_cmpuint (reg->n_nodes, ==, 8);
  r = find_named (reg, CS_LAYOUT_NODE_REGION, "nvFusion0");
  g_assert_cmpint (r, >=, 0);
  g_assert_cmpstr (reg->nodes[r].label, ==, "nvFusion0\n5 ops");

  /* prims: torch.matmul -> ltorch.matmul -> prims.matmul is drawn as the one prim, without a
   * box; it keeps the prim's own statement id and the top-level id */
  pm = find_named (prims, CS_LAYOUT_NODE_OP, "prims.matmul");
  g_assert_cmpint (pm, >=, 0);
  g_assert_cmpint (find_named (prims, CS_LAYOUT_NODE_OP, "torch.matmul"), ==, -1);
  g_assert_cmpuint (prims->n_clusters, ==, 1);
  {
    guint32 mm_id = 0;
    for (guint i = 0; i < t->n_stmts; i++)
      if (t->stmts[i]->kind == CS_STMT_CALL && g_strcmp0 (t->stmts[i]->callee, "torch.matmul") == 0)
        mm_id = t->stmts[i]->id;
    g_assert_cmpuint (mm_id, !=, 0);
    g_assert_cmpuint (prims->nodes[pm].top_stmt_id, ==, mm_id);
  }
  g_assert_cmpuint (prims->nodes[pm].stmt_id, !=, prims->nodes[pm].top_stmt_id);
  g_assert_cmpint (cs_layout_find_node (prims, prims->nodes[pm].top_stmt_id), ==, pm);
  g_assert_cmpint (prims->nodes[pm].badge, ==, CS_LAYOUT_BADGE_TENSOR_CORE);
}

static void
test_expand_override (void)
{
  g_autoptr(CsTrace) t = parse (seed_fwd);
  g_autoptr(GError) error = NULL;
  g_autoptr(CsLayout) l = NULL;
  CsRenderOptions o, copy;
  guint32 region_id = 0, mm_id = 0;

  for (guint i = 0; i < t->n_stmts; i++)
    if (t->stmts[i]->kind == CS_STMT_CALL && g_strcmp0 (t->stmts[i]->callee, "nvFusion0") == 0)
      region_id = t->stmts[i]->id;
    else if (t->stmts[i]->kind == CS_STMT_CALL && g_strcmp0 (t->stmts[i]->callee, "torch.matmul") == 0)
      mm_id = t->stmts[i]->id;
  g_assert_cmpuint (region_id, !=, 0);
  cs_render_options_init (&o);
  cs_render_options_set_expanded (&o, region_id, CS_RENDER_EXPAND_OFF);
  cs_render_options_set_expanded (&o, mm_id, CS_RENDER_EXPAND_ON);
  g_assert_cmpint (cs_render_options_get_expanded (&o, region_id), ==, CS_RENDER_EXPAND_OFF);
  cs_render_options_copy (&o, &copy);
  cs_render_options_set_expanded (&o, region_id, CS_RENDER_EXPAND_DEFAULT);
  g_assert_cmpint (cs_render_options_get_expanded (&o, region_id), ==, CS_RENDER_EXPAND_DEFAULT);
  g_assert_cmpint (cs_render_options_get_expanded (&copy, region_id), ==, CS_RENDER_EXPAND_OFF);

  l = cs_layout_new (t, &copy, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (l->n_clusters, ==, 0);
  g_assert_cmpint (find_named (l, CS_LAYOUT_NODE_REGION, "nvFusion0"), >=, 0);
  g_assert_cmpint (find_named (l, CS_LAYOUT_NODE_OP, "prims.matmul"), >=, 0);
  cs_render_options_clear (&o);
  cs_render_options_clear (&copy);
}

static void
test_auto_collapse (void)
{
  g_autoptr(CsTrace) t = parse (seed_fwd);
  g_autoptr(GError) error = NULL;
  g_autoptr(CsLayout) l = NULL;
  CsRenderOptions o;

  cs_render_options_init (&o);
  o.max_nodes = 10;          /* 12 nodes at statement level, 8 with the region collapsed */
  o.max_edge_labels = 5;     /* 11 edges */
  l = cs_graph_build (t, &o, &error);
  g_assert_no_error (error);
  g_assert_false (l->laid_out);
  g_assert_cmpint (l->detail, ==, CS_RENDER_DETAIL_REGIONS);
  g_assert_cmpuint (l->n_nodes, ==, 8);
  g_assert_nonnull (l->notes[0]);
  g_assert_nonnull (strstr (l->notes[0], "Collapsed"));
  g_assert_nonnull (l->notes[1]);
  g_assert_nonnull (strstr (l->notes[1], "shapes"));
  /* the app shows an edge's shape on hover */
  g_assert_nonnull (strstr (l->notes[1], "hover an edge"));
  for (guint j = 0; j < l->n_edges; j++)
    g_assert_null (l->edges[j].label);
  g_assert_cmpuint (cs_graph_count_nodes (t, CS_RENDER_DETAIL_STATEMENTS, FALSE), ==, 12);
  /* castscope-cli's PNG, SVG and PDF have no tooltips: the note does not offer them */
  g_clear_pointer (&l, cs_layout_unref);
  o.hints = CS_RENDER_HINTS_CLI;
  l = cs_graph_build (t, &o, &error);
  g_assert_no_error (error);
  g_assert_nonnull (l->notes[0]);
  g_assert_nonnull (l->notes[1]);
  g_assert_nonnull (strstr (l->notes[1], "Tensor shapes are not drawn on edges: "));
  g_assert_null (strstr (l->notes[1], "hover"));
  cs_render_options_clear (&o);
}

static void
test_dot_text (void)
{
  g_autoptr(CsTrace) t = parse (seed_fwd);
  g_autoptr(CsLayout) l = build (t, CS_RENDER_DETAIL_AUTO);

  g_assert_nonnull (strstr (l->dot, "subgraph cluster_0 {"));
  g_assert_nonnull (strstr (l->dot, "label=\"nvFusion0\\n5 ops \u00b7 544 bytes\""));
  g_assert_nonnull (strstr (l->dot, "color=\"#D55E00\""));   /* a bf16 edge */
  g_assert_nonnull (strstr (l->dot, "color=\"#0072B2\""));   /* an f32 edge */
  g_assert_nonnull (strstr (l->dot, "badge=\"tensor-core\""));
}

/* ---- geometry ---- */

static gboolean
inside (const CsRect *inner, const CsRect *outer, double tol)
{
  return inner->x0 >= outer->x0 - tol && inner->y0 >= outer->y0 - tol
         && inner->x1 <= outer->x1 + tol && inner->y1 <= outer->y1 + tol;
}

static double
dist_to_box (CsPoint p, const CsRect *r)
{
  double dx = MAX (MAX (r->x0 - p.x, 0), p.x - r->x1);
  double dy = MAX (MAX (r->y0 - p.y, 0), p.y - r->y1);
  return sqrt (dx * dx + dy * dy);
}

static void
test_geometry (void)
{
  g_autoptr(CsTrace) t = parse (seed_fwd);
  g_autoptr(CsLayout) l = build (t, CS_RENDER_DETAIL_AUTO);

  g_assert_true (l->laid_out);
  g_assert_cmpfloat (l->bb.x1 - l->bb.x0, >, 50);
  g_assert_cmpfloat (l->bb.y1 - l->bb.y0, >, 200);
  for (guint i = 0; i < l->n_nodes; i++)
    {
      const CsLayoutNode *n = &l->nodes[i];
      g_assert_true (inside (&n->box, &l->bb, 1.0));
      if (n->cluster >= 0)
        g_assert_true (inside (&n->box, &l->clusters[n->cluster].box, 0.5));
      /* the label is centred in the box */
      g_assert_cmpfloat_with_epsilon (n->label_pos.x, (n->box.x0 + n->box.x1) / 2, 0.01);
    }
  for (guint j = 0; j < l->n_edges; j++)
    {
      const CsLayoutEdge *e = &l->edges[j];
      const CsLayoutNode *a = &l->nodes[e->tail], *b = &l->nodes[e->head];

      g_assert_cmpuint (e->n_points, >=, 4);
      g_assert_cmpuint ((e->n_points - 1) % 3, ==, 0);
      g_assert_true (e->has_arrow);
      /* the curve leaves the tail's box and the arrow ends on the head's box */
      g_assert_cmpfloat (dist_to_box (e->points[0], &a->box), <, 2.0);
      g_assert_cmpfloat (dist_to_box (e->arrow_tip, &b->box), <, 2.0);
      /* top to bottom: y points up, producers above consumers */
      g_assert_cmpfloat (a->label_pos.y, >, b->label_pos.y);
      g_assert_true (e->has_label_pos);
    }
  /* the region's title sits inside its box, near the top */
  g_assert_cmpfloat (l->clusters[0].title_pos.y, <, l->clusters[0].box.y1);
  g_assert_cmpfloat (l->clusters[0].title_pos.y, >, l->clusters[0].box.y1 - 40);
}

static void
test_hit (void)
{
  g_autoptr(CsTrace) t = parse (seed_fwd);
  g_autoptr(CsLayout) l = build (t, CS_RENDER_DETAIL_AUTO);
  CsLayoutHit hit;
  gint mm = find_named (l, CS_LAYOUT_NODE_OP, "torch.matmul");
  const CsLayoutNode *n = &l->nodes[mm];
  gint e = find_edge (l, "t19", CS_LAYOUT_NODE_OP);
  const CsLayoutEdge *ed = &l->edges[e];
  const CsLayoutCluster *c = &l->clusters[0];
  CsPoint mid;

  g_assert_true (cs_layout_hit_test (l, (n->box.x0 + n->box.x1) / 2, (n->box.y0 + n->box.y1) / 2, 0, &hit));
  g_assert_cmpint (hit.kind, ==, CS_LAYOUT_HIT_NODE);
  g_assert_cmpuint (hit.index, ==, (guint) mm);
  /* just outside the box, within the tolerance */
  g_assert_true (cs_layout_hit_test (l, n->box.x1 + 1.5, (n->box.y0 + n->box.y1) / 2, 2.0, &hit));
  g_assert_cmpint (hit.kind, ==, CS_LAYOUT_HIT_NODE);

  /* the last point of the edge's bézier (3k+1 points: on the curve) */
  mid = ed->points[ed->n_points - 1];
  g_assert_true (cs_layout_hit_test (l, mid.x + 1.0, mid.y, 2.0, &hit));
  g_assert_cmpint (hit.kind, ==, CS_LAYOUT_HIT_EDGE);
  g_assert_cmpuint (hit.index, ==, (guint) e);

  /* the region's top-left corner: inside the cluster, on no node or edge */
  g_assert_true (cs_layout_hit_test (l, c->box.x0 + 2, c->box.y1 - 2, 0.5, &hit));
  g_assert_cmpint (hit.kind, ==, CS_LAYOUT_HIT_CLUSTER);
  g_assert_cmpuint (hit.index, ==, 0);

  g_assert_false (cs_layout_hit_test (l, l->bb.x1 + 100, l->bb.y1 + 100, 3.0, &hit));
  g_assert_cmpint (hit.kind, ==, CS_LAYOUT_HIT_NONE);

  cs_layout_set_selection (l, &(CsLayoutHit) { CS_LAYOUT_HIT_NODE, (guint) mm });
  g_assert_true (l->nodes[mm].selected);
  cs_layout_set_selection (l, &(CsLayoutHit) { CS_LAYOUT_HIT_EDGE, (guint) e });
  g_assert_false (l->nodes[mm].selected);
  g_assert_true (l->edges[e].selected);
  cs_layout_set_selection (l, NULL);
  g_assert_false (l->edges[e].selected);
}

static void
test_values (void)
{
  g_autoptr(CsTrace) t = parse (seed_fwd);
  g_autoptr(CsLayout) l = build (t, CS_RENDER_DETAIL_AUTO);
  gint mm = find_named (l, CS_LAYOUT_NODE_OP, "torch.matmul");

  /* t19 feeds the matmul and the saved output: 2 edges */
  g_assert_cmpuint (cs_layout_set_edge_value (l, "t19", 3.0), ==, 2);
  g_assert_cmpuint (cs_layout_set_edge_value (l, "nope", 1.0), ==, 0);
  g_assert_cmpuint (cs_layout_set_stmt_value (l, l->nodes[mm].stmt_id, 0.5), ==, 1);
  g_assert_cmpuint (cs_layout_set_stmt_value (l, l->clusters[0].stmt_id, 1.5), ==, 1);
  cs_layout_set_value_scale (l, "time (ms)", 0, 0);   /* automatic: the values' range */
  g_assert_true (l->has_scale);
  g_assert_cmpfloat (l->scale_min, ==, 0.5);
  g_assert_cmpfloat (l->scale_max, ==, 3.0);
  g_assert_cmpstr (l->scale_title, ==, "time (ms)");
  cs_layout_clear_values (l);
  g_assert_false (l->has_scale);
  g_assert_false (l->nodes[mm].has_value);
}

/* ---- diff marks: the seed under matmul=native vs matmul=upcast-f32 ---- */

static CsPipeline *
run_seed (const char *matmul)
{
  g_autofree char *path = g_build_filename (g_getenv ("CS_DATA_DIR"), "seed_foo.txt", NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTraceList) list = cs_parse_file (path, &error);
  CsPolicy policy;
  CsPipeline *pl;

  g_assert_no_error (error);
  cs_policy_init_default (&policy);
  g_assert_true (cs_policy_set (&policy, "matmul", matmul, &error));
  pl = cs_pipeline_run (g_ptr_array_index (list->traces, 0), &policy, NULL, &error);
  g_assert_no_error (error);
  return pl;
}

static void
test_diff_marks (void)
{
  g_autoptr(CsPipeline) native = NULL;
  g_autoptr(CsPipeline) upcast = NULL;
  g_autoptr(CsLayout) lu = NULL, ln = NULL;
  CsLayoutDiffStats st;
  guint marked = 0;
  gint mm;

  if (g_getenv ("CS_DATA_DIR") == NULL)
    {
      g_test_skip ("CS_DATA_DIR not set");
      return;
    }
  native = run_seed ("native");
  upcast = run_seed ("upcast-f32");
  lu = build (cs_pipeline_get_forward (upcast), CS_RENDER_DETAIL_AUTO);
  ln = build (cs_pipeline_get_forward (native), CS_RENDER_DETAIL_AUTO);

  /* the badges: native matmul on tensor cores, upcast one in f32 */
  mm = find_label (ln, "matmul");
  g_assert_cmpint (mm, >=, 0);
  g_assert_cmpint (ln->nodes[mm].badge, ==, CS_LAYOUT_BADGE_TENSOR_CORE);
  mm = find_label (lu, "matmul");
  g_assert_cmpint (mm, >=, 0);
  g_assert_cmpint (lu->nodes[mm].badge, ==, CS_LAYOUT_BADGE_F32);

  /* upcast-f32 adds w -> f32 before the matmul and the result -> bf16 after it */
  cs_layout_mark_diff (lu, cs_pipeline_get_forward (native), TRUE, &st);
  g_assert_cmpuint (st.casts_added, ==, 2);
  for (guint i = 0; i < lu->n_nodes; i++)
    if (lu->nodes[i].mark == CS_LAYOUT_MARK_ADDED)
      {
        g_assert_cmpint (lu->nodes[i].kind, ==, CS_LAYOUT_NODE_CAST);
        marked++;
      }
  g_assert_cmpuint (marked, ==, 2);
  /* the downcast of a + b that upcast-f32 drops is drawn as a ghost, next to the statement it
   * was made for, and counted */
  g_assert_cmpuint (st.casts_removed, ==, 1);
  g_assert_cmpuint (lu->n_ghosts, ==, 1);
  {
    const CsLayoutNode *gh = &lu->nodes[lu->n_nodes - 1];

    g_assert_cmpint (gh->kind, ==, CS_LAYOUT_NODE_GHOST);
    g_assert_cmpint (gh->mark, ==, CS_LAYOUT_MARK_REMOVED);
    g_assert_cmpuint (gh->mark_count, ==, 1);
    g_assert_cmpint (gh->dtype, ==, CS_DTYPE_BF16);
    g_assert_cmpint (gh->target, >=, 0);
    g_assert_cmpfloat (gh->box.x0, >, lu->nodes[gh->target].box.x1);
  }
  {
    gint e = find_edge (lu, "w", CS_LAYOUT_NODE_CAST);
    g_assert_cmpint (e, >=, 0);
    g_assert_cmpint (lu->nodes[lu->edges[e].head].mark, ==, CS_LAYOUT_MARK_ADDED);
    g_assert_cmpint (lu->nodes[lu->edges[e].head].dtype, ==, CS_DTYPE_F32);
  }
  /* ... and drops the downcast of a + b (the matmul reads the f32 sum directly) */
  cs_layout_mark_diff (ln, cs_pipeline_get_forward (upcast), FALSE, &st);
  g_assert_cmpuint (st.casts_removed, ==, 1);
  marked = 0;
  for (guint i = 0; i < ln->n_nodes; i++)
    if (ln->nodes[i].mark == CS_LAYOUT_MARK_REMOVED)
      {
        g_assert_cmpint (ln->nodes[i].kind, ==, CS_LAYOUT_NODE_CAST);
        g_assert_cmpint (ln->nodes[i].dtype, ==, CS_DTYPE_BF16);
        marked++;
      }
  g_assert_cmpuint (marked, ==, 1);
  cs_layout_clear_marks (ln);
  for (guint i = 0; i < ln->n_nodes; i++)
    g_assert_cmpint (ln->nodes[i].mark, ==, CS_LAYOUT_MARK_NONE);
  cs_layout_clear_marks (lu);
  g_assert_cmpuint (lu->n_ghosts, ==, 0);
}

/* fuse-linear=on takes both linears of the GELU MLP (data/mlp_gelu.txt) into fusion regions:
 * two statements moved in, marked on the linear prims. */
static void
test_diff_moved (void)
{
  g_autofree char *path = g_build_filename (g_getenv ("CS_DATA_DIR"), "mlp_gelu.txt", NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTraceList) list = cs_parse_file (path, &error);
  g_autoptr(CsPipeline) off = NULL, on = NULL;
  g_autoptr(CsLayout) l = NULL;
  CsPolicy policy;
  CsLayoutDiffStats st;
  guint marked = 0;

  g_assert_no_error (error);
  cs_policy_init_default (&policy);
  off = cs_pipeline_run (g_ptr_array_index (list->traces, 0), &policy, NULL, &error);
  g_assert_no_error (error);
  g_assert_true (cs_policy_set (&policy, "fuse-linear", "on", &error));
  on = cs_pipeline_run (g_ptr_array_index (list->traces, 0), &policy, NULL, &error);
  g_assert_no_error (error);
  l = build (cs_pipeline_get_forward (on), CS_RENDER_DETAIL_AUTO);
  cs_layout_mark_diff (l, cs_pipeline_get_forward (off), TRUE, &st);
  g_assert_cmpuint (st.moved_in, ==, 2);
  g_assert_cmpuint (st.moved_out, ==, 0);
  for (guint i = 0; i < l->n_nodes; i++)
    if (l->nodes[i].mark == CS_LAYOUT_MARK_MOVED_IN)
      {
        g_assert_cmpstr (l->nodes[i].label, ==, "linear");
        g_assert_cmpint (l->nodes[i].cluster, >=, 0);
        marked += l->nodes[i].mark_count;
      }
  g_assert_cmpuint (marked, ==, 2);
}

/* The same diff marked on the layout worker (cs_layout_new_async_marked() with a
 * CsLayoutDiffSource): the two linears moved in as in test_diff_moved(), recorded with the
 * source's serial; a second layout marked from the same source (its moves found once) marks
 * the same. */
static void
marked_done (GObject *source, GAsyncResult *result, gpointer data)
{
  CsLayout **out = data;
  g_autoptr(GError) error = NULL;

  *out = cs_layout_new_finish (result, &error);
  g_assert_no_error (error);
}

static void
test_diff_marked_on_worker (void)
{
  g_autofree char *path = g_build_filename (g_getenv ("CS_DATA_DIR"), "mlp_gelu.txt", NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTraceList) list = cs_parse_file (path, &error);
  g_autoptr(CsPipeline) off = NULL, on = NULL;
  g_autoptr(CsLayout) l = NULL;
  g_autoptr(CsLayout) again = NULL;
  g_autoptr(CsLayoutDiffSource) src = NULL;
  CsLayoutMarks marks = { 0 };
  CsLayoutDiffStats st;
  CsPolicy policy;
  guint marked = 0;

  g_assert_no_error (error);
  cs_policy_init_default (&policy);
  off = cs_pipeline_run (g_ptr_array_index (list->traces, 0), &policy, NULL, &error);
  g_assert_no_error (error);
  g_assert_true (cs_policy_set (&policy, "fuse-linear", "on", &error));
  on = cs_pipeline_run (g_ptr_array_index (list->traces, 0), &policy, NULL, &error);
  g_assert_no_error (error);
  src = cs_layout_diff_source_new (cs_pipeline_get_forward (on), cs_pipeline_get_forward (off), TRUE);
  g_assert_true (cs_layout_diff_source_matches (src, cs_pipeline_get_forward (on),
                                                cs_pipeline_get_forward (off), TRUE));
  g_assert_false (cs_layout_diff_source_matches (src, cs_pipeline_get_forward (on),
                                                 cs_pipeline_get_forward (off), FALSE));
  marks.diff = src;
  marks.user_casts_serial = 7;
  cs_layout_new_async_marked (cs_pipeline_get_forward (on), NULL, &marks, NULL, marked_done, &l);
  while (l == NULL)
    g_main_context_iteration (NULL, TRUE);
  g_assert_cmpuint (l->diff_serial, ==, cs_layout_diff_source_serial (src));
  g_assert_cmpuint (l->user_casts_serial, ==, 7);
  g_assert_cmpuint (l->diff_marked.moved_in, ==, 2);
  g_assert_cmpuint (l->diff_marked.moved_out, ==, 0);
  for (guint i = 0; i < l->n_nodes; i++)
    if (l->nodes[i].mark == CS_LAYOUT_MARK_MOVED_IN)
      {
        g_assert_cmpstr (l->nodes[i].label, ==, "linear");
        marked += l->nodes[i].mark_count;
      }
  g_assert_cmpuint (marked, ==, 2);
  g_assert_null (l->trace_index);

  again = build (cs_pipeline_get_forward (on), CS_RENDER_DETAIL_AUTO);
  cs_layout_mark_diff_source (again, src, &st);
  g_assert_cmpuint (st.moved_in, ==, 2);
  g_assert_cmpuint (st.casts_added, ==, l->diff_marked.casts_added);
  g_assert_cmpuint (st.casts_removed, ==, l->diff_marked.casts_removed);
  g_assert_cmpuint (again->diff_serial, ==, cs_layout_diff_source_serial (src));
}

/* ---- async ---- */

typedef struct
{
  GMainLoop *loop;
  guint      pending;
  GPtrArray *layouts;
  GError    *error;
} AsyncState;

static void
layout_done (GObject *source, GAsyncResult *result, gpointer data)
{
  AsyncState *s = data;
  GError *error = NULL;
  CsLayout *l = cs_layout_new_finish (result, &error);

  if (l != NULL)
    g_ptr_array_add (s->layouts, l);
  else if (s->error == NULL)
    s->error = error;
  else
    g_error_free (error);
  if (--s->pending == 0)
    g_main_loop_quit (s->loop);
}

static void
test_async (void)
{
  g_autoptr(CsTrace) t = parse (seed_fwd);
  g_autoptr(CsTrace) t2 = parse (f32_matmul);
  AsyncState s = { 0 };

  s.loop = g_main_loop_new (NULL, FALSE);
  s.layouts = g_ptr_array_new_with_free_func ((GDestroyNotify) cs_layout_unref);
  /* several layouts at once: Graphviz work is serialised, each result is complete */
  for (guint i = 0; i < 6; i++)
    {
      s.pending++;
      cs_layout_new_async (i % 2 ? t2 : t, NULL, NULL, layout_done, &s);
    }
  g_main_loop_run (s.loop);
  g_assert_no_error (s.error);
  g_assert_cmpuint (s.layouts->len, ==, 6);
  for (guint i = 0; i < s.layouts->len; i++)
    {
      CsLayout *l = g_ptr_array_index (s.layouts, i);
      g_assert_true (l->laid_out);
      g_assert_true (l->n_nodes == 12 || l->n_nodes == 4);
    }
  g_ptr_array_unref (s.layouts);
  g_main_loop_unref (s.loop);
}

static void
test_async_cancel (void)
{
  g_autoptr(CsTrace) t = parse (seed_fwd);
  g_autoptr(GCancellable) c = g_cancellable_new ();
  AsyncState s = { 0 };

  s.loop = g_main_loop_new (NULL, FALSE);
  s.layouts = g_ptr_array_new_with_free_func ((GDestroyNotify) cs_layout_unref);
  g_cancellable_cancel (c);
  s.pending = 1;
  cs_layout_new_async (t, NULL, c, layout_done, &s);
  g_main_loop_run (s.loop);
  g_assert_error (s.error, G_IO_ERROR, G_IO_ERROR_CANCELLED);
  g_assert_cmpuint (s.layouts->len, ==, 0);
  g_clear_error (&s.error);
  g_ptr_array_unref (s.layouts);
  g_main_loop_unref (s.loop);
}

static void
test_bad_dot (void)
{
  g_autoptr(CsTrace) t = parse (seed_fwd);
  g_autoptr(GError) error = NULL;
  g_autoptr(CsLayout) l = cs_graph_build (t, NULL, &error);

  g_assert_no_error (error);
  /* Graphviz rejects the text: a clear error, no crash, no layout */
  g_free (l->dot);
  l->dot = g_strdup ("digraph { n0 -> }");
  g_assert_false (cs_layout_run_graphviz (l, NULL, &error));
  g_assert_error (error, CS_RENDER_ERROR, CS_RENDER_ERROR_LAYOUT);
  g_assert_false (l->laid_out);
}

/* ---- the layered layout (graphs above the dot limit) ---- */

static char *
residual_chain (guint blocks)
{
  GString *s = g_string_new ("def computation(x");
  guint t = 1, r = 0;

  for (guint k = 0; k < blocks; k++)
    g_string_append_printf (s, ", w%u", k);
  g_string_append (s, "):\n  # x: \"cuda:0 bf16[64, 64]\"\n");
  for (guint k = 0; k < blocks; k++)
    g_string_append_printf (s, "  # w%u: \"cuda:0 bf16[64, 64]\"\n", k);
  g_string_append (s, "  t0 = ltorch.add(x, x)  # t0: \"cuda:0 bf16[64, 64]\"\n");
  for (guint k = 0; k < blocks; k++)
    {
      guint m = t++, a = t++;
      g_string_append_printf (s, "  t%u = ltorch.matmul(t%u, w%u)  # t%u: \"cuda:0 bf16[64, 64]\"\n", m, r, k, m);
      g_string_append_printf (s, "  t%u = ltorch.add(t%u, t%u)  # t%u: \"cuda:0 bf16[64, 64]\"\n", a, m, r, a);
      r = a;
    }
  g_string_append_printf (s, "  return (t%u,)\n", r);
  return g_string_free (s, FALSE);
}

static void
test_layered (void)
{
  g_autofree char *text = residual_chain (700);
  g_autoptr(CsTrace) t = parse (text);
  g_autoptr(CsLayout) l = NULL;
  gboolean noted = FALSE;
  CsRenderOptions o;
  g_autoptr(GError) error = NULL;

  /* flat: without the chunks a long trace is drawn as by default (see test_chunks_collapsed) */
  cs_render_options_init (&o);
  o.collapse = CS_RENDER_COLLAPSE_FLAT;
  l = cs_layout_new (t, &o, NULL, &error);
  g_assert_no_error (error);
  cs_render_options_clear (&o);

  /* x, t0, 700 x (w, matmul, add), the output: 2,103 nodes, above the 1,200-node dot limit */
  g_assert_cmpuint (l->n_nodes, ==, 2103);
  g_assert_true (l->layered);
  g_assert_true (l->laid_out);
  for (guint i = 0; l->notes[i]; i++)
    noted |= strstr (l->notes[i], "layered layout") != NULL;
  g_assert_true (noted);
  /* no two nodes overlap */
  for (guint i = 0; i < l->n_nodes; i++)
    for (guint k = i + 1; k < l->n_nodes; k++)
      {
        const CsRect *a = &l->nodes[i].box, *b = &l->nodes[k].box;
        g_assert_false (a->x0 < b->x1 - 0.01 && b->x0 < a->x1 - 0.01
                        && a->y0 < b->y1 - 0.01 && b->y0 < a->y1 - 0.01);
      }
  /* edges run downwards from the tail's bottom to an arrow on the head's top */
  for (guint j = 0; j < l->n_edges; j++)
    {
      const CsLayoutEdge *e = &l->edges[j];
      g_assert_cmpuint (e->n_points, ==, 4);
      g_assert_cmpfloat (e->points[0].y, ==, l->nodes[e->tail].box.y0);
      g_assert_cmpfloat (e->arrow_tip.y, ==, l->nodes[e->head].box.y1);
      g_assert_cmpfloat (e->points[0].y, >, e->arrow_tip.y);
    }
  /* the chain stays straight: each weight sits beside its matmul, the chain does not drift
   * sideways block after block (the width of one add/matmul plus one weight box and gaps) */
  g_assert_cmpfloat (l->bb.x1 - l->bb.x0, <, 400);
}


/* ---- groups (render/cs-group.h) ---- */

/* The 700-block chain (1,401 statements, no parameters) is drawn as chunks of 250 statements:
 * 6 chunk nodes (250 x 5 + 151) and the output.  Every chunk boundary (statement 250, 500 ...:
 * even positions, the matmul of a block, since t0 comes first) cuts a block between its matmul
 * and its add, so the next chunk reads two tensors of the previous one (the matmul's result
 * and the residual): 5 x 2 edges, plus the one into the output.  The inputs x and w<k> are each
 * read inside one chunk and drawn as part of it. */
static void
test_chunks_collapsed (void)
{
  g_autofree char *text = residual_chain (700);
  g_autoptr(CsTrace) t = parse (text);
  g_autoptr(CsLayout) l = build (t, CS_RENDER_DETAIL_AUTO);
  guint n_group = 0, n_out = 0;
  gboolean noted = FALSE;

  for (guint i = 0; i < l->n_nodes; i++)
    {
      if (l->nodes[i].kind == CS_LAYOUT_NODE_GROUP)
        {
          n_group++;
          g_assert_true (CS_LAYOUT_IS_GROUP_ID (l->nodes[i].stmt_id));
          g_assert_cmpint (CS_LAYOUT_GROUP_OF_ID (l->nodes[i].stmt_id), ==, l->nodes[i].group);
        }
      if (l->nodes[i].kind == CS_LAYOUT_NODE_OUTPUT)
        n_out++;
    }
  g_assert_cmpuint (n_group, ==, 6);
  g_assert_cmpuint (n_out, ==, 1);
  g_assert_cmpuint (l->n_nodes, ==, 7);
  g_assert_cmpuint (l->n_edges, ==, 11);
  g_assert_false (l->layered);
  g_assert_nonnull (l->grouping);
  g_assert_cmpuint (l->grouping->groups[5].n_stmts, ==, 151);
  for (guint i = 0; l->notes[i]; i++)
    noted |= strstr (l->notes[i], "6 collapsed chunks") != NULL;
  g_assert_true (noted);
}

/* The notes say how to draw more in the words of the interface that shows them: the app's
 * double-click by default, castscope-cli render's options with CS_RENDER_HINTS_CLI (the
 * sentence is drawn into exported pictures too). */
static void
test_chunks_hints (void)
{
  g_autofree char *text = residual_chain (700);
  g_autoptr(CsTrace) t = parse (text);
  g_autoptr(CsLayout) app = build (t, CS_RENDER_DETAIL_AUTO);
  g_autoptr(CsLayout) cli = NULL;
  g_autoptr(GError) error = NULL;
  CsRenderOptions o;
  static const char want_app[] = "No layers in the parameter names: the 1401 statements are "
    "drawn as 6 collapsed chunks of consecutive statements; double-click a chunk to expand it.";
  static const char want_cli[] = "No layers in the parameter names: the 1401 statements are "
    "drawn as 6 collapsed chunks of consecutive statements; --expand-group 'statements 1-250' "
    "draws one expanded, --collapse none draws them all.";

  cs_render_options_init (&o);
  g_assert_cmpint (o.hints, ==, CS_RENDER_HINTS_APP);
  o.hints = CS_RENDER_HINTS_CLI;
  cli = cs_layout_new (t, &o, NULL, &error);
  cs_render_options_clear (&o);
  g_assert_no_error (error);
  g_assert_nonnull (app->notes[0]);
  g_assert_cmpstr (app->notes[0], ==, want_app);
  g_assert_nonnull (cli->notes[0]);
  g_assert_cmpstr (cli->notes[0], ==, want_cli);
}

/* The group node of @l named @name (CsLayoutNode.name is the group's, for a fold its first
 * layer's), or -1. */
static gint
find_group_node (const CsLayout *l, const char *name)
{
  return find_named (l, CS_LAYOUT_NODE_GROUP, name);
}

/* The 8-block LLaMA opens as its blocks, and since all eight have the same structure (test-
 * render-group.c checks that from the text) they are folded into one node, "layers 0-7: same
 * structure, 1 shown"; unfolded they are 8 nodes.  Expanding layers.3 draws its 50 statements
 * (the count test-render-group.c takes from the text) in a layers.3 box holding three module
 * boxes, reading layers.3's own parameters, between the folds of layers 0-2 and 4-7. */
static void
test_llama_collapsed (void)
{
  const char *dir = g_getenv ("CS_SHARED_TRACES");
  g_autofree char *path = dir ? g_build_filename (dir, "thunder_llama_stack_initial.txt", NULL) : NULL;
  g_autoptr(CsTraceList) list = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(CsLayout) l = NULL;
  g_autoptr(CsLayout) u = NULL;
  g_autoptr(CsLayout) e = NULL;
  CsRenderOptions o;
  CsTrace *t;
  CsLayoutHit hit;
  guint n_group = 0, inside = 0, modules = 0, wq_readers = 0;
  gint c3 = -1, fold, g0, g3, g5, f03, f47;

  if (path == NULL || !g_file_test (path, G_FILE_TEST_IS_REGULAR))
    {
      g_test_skip ("thunder_llama_stack_initial.txt not found");
      return;
    }
  list = cs_parse_file (path, &error);
  g_assert_no_error (error);
  t = g_ptr_array_index (list->traces, 0);

  /* folded (the default) */
  l = build (t, CS_RENDER_DETAIL_AUTO);
  for (guint i = 0; i < l->n_nodes; i++)
    n_group += l->nodes[i].kind == CS_LAYOUT_NODE_GROUP;
  g_assert_cmpuint (n_group, ==, 1);
  fold = find_group_node (l, "layers.0");
  g_assert_cmpint (fold, >=, 0);
  g_assert_true (g_str_has_prefix (l->nodes[fold].label,
                                   "layers 0-7: same structure, 1 shown\n\u00d78, each 50 ops"));
  g0 = cs_grouping_find (l->grouping, "layers.0");
  g5 = cs_grouping_find (l->grouping, "layers.5");
  g_assert_cmpint (l->nodes[fold].group, ==, g0);
  for (guint k = 0; k < 8; k++)
    {
      g_autofree char *name = g_strdup_printf ("layers.%u", k);
      g_assert_cmpint (l->group_fold[cs_grouping_find (l->grouping, name)], ==, g0);
    }
  /* a folded layer, and a statement of it, are found at the fold's node */
  g_assert_true (cs_layout_find_element (l, CS_LAYOUT_GROUP_ID (g5), &hit));
  g_assert_cmpint (hit.kind, ==, CS_LAYOUT_HIT_NODE);
  g_assert_cmpuint (hit.index, ==, (guint) fold);
  g_assert_true (cs_layout_find_element (l, t->stmts[l->grouping->groups[g5].first]->id, &hit));
  g_assert_cmpuint (hit.index, ==, (guint) fold);
  g_assert_cmpuint (l->n_clusters, ==, 0);
  g_assert_false (l->layered);
  /* the 72 block parameters are drawn inside their blocks */
  g_assert_cmpint (find_named (l, CS_LAYOUT_NODE_INPUT, "t_layers_3_attention_wq_weight"), <, 0);
  g_assert_cmpint (find_named (l, CS_LAYOUT_NODE_INPUT, "t_norm_weight"), >=, 0);

  /* unfolded: one node per block */
  cs_render_options_init (&o);
  o.unfold_repeats = TRUE;
  u = cs_layout_new (t, &o, NULL, &error);
  cs_render_options_clear (&o);
  g_assert_no_error (error);
  n_group = 0;
  for (guint i = 0; i < u->n_nodes; i++)
    if (u->nodes[i].kind == CS_LAYOUT_NODE_GROUP)
      {
        g_autofree char *want = g_strdup_printf ("layers.%u", n_group);
        g_assert_cmpstr (u->nodes[i].name, ==, want);
        n_group++;
      }
  g_assert_cmpuint (n_group, ==, 8);
  for (guint g = 0; g < u->grouping->n_groups; g++)
    g_assert_cmpint (u->group_fold[g], ==, -1);

  /* layers.3 expanded: the folds around it */
  cs_render_options_init (&o);
  cs_render_options_set_group_expanded (&o, "layers.3", CS_RENDER_EXPAND_ON);
  e = cs_layout_new (t, &o, NULL, &error);
  cs_render_options_clear (&o);
  g_assert_no_error (error);
  f03 = find_group_node (e, "layers.0");
  f47 = find_group_node (e, "layers.4");
  g_assert_cmpint (f03, >=, 0);
  g_assert_cmpint (f47, >=, 0);
  g_assert_true (g_str_has_prefix (e->nodes[f03].label, "layers 0-2: same structure, 1 shown\n"));
  g_assert_true (g_str_has_prefix (e->nodes[f47].label, "layers 4-7: same structure, 1 shown\n"));
  g3 = cs_grouping_find (e->grouping, "layers.3");
  g_assert_cmpint (e->group_fold[g3], ==, -1);
  g_assert_false (e->group_collapsed[g3]);
  for (guint c = 0; c < e->n_clusters; c++)
    if (e->clusters[c].kind == CS_LAYOUT_CLUSTER_GROUP && e->clusters[c].parent < 0)
      {
        g_assert_cmpint (c3, <, 0);
        c3 = (gint) c;
        g_assert_cmpstr (e->clusters[c].title, ==, "layers.3  (same structure as layers.0)");
      }
    else if (e->clusters[c].kind == CS_LAYOUT_CLUSTER_GROUP)
      modules++;
  g_assert_cmpint (c3, >=, 0);
  g_assert_cmpint (e->clusters[c3].group, ==, g3);
  g_assert_cmpuint (modules, ==, 3);
  for (guint i = 0; i < e->n_nodes; i++)
    {
      gint c = e->nodes[i].cluster;

      while (c >= 0 && c != c3)
        c = e->clusters[c].parent;
      if (c == c3)
        inside++;
    }
  g_assert_cmpuint (inside, ==, 50);
  /* layer 3's own nodes: the wq linear reading t_layers_3_attention_wq_weight, inside the box */
  g_assert_cmpint (find_named (e, CS_LAYOUT_NODE_INPUT, "t_layers_3_attention_wq_weight"), >=, 0);
  g_assert_cmpint (find_named (e, CS_LAYOUT_NODE_INPUT, "t_layers_4_attention_wq_weight"), <, 0);
  g_assert_cmpint (find_named (e, CS_LAYOUT_NODE_INPUT, "t_layers_0_attention_wq_weight"), <, 0);
  for (guint j = 0; j < e->n_edges; j++)
    if (g_strcmp0 (e->edges[j].proxy, "t_layers_3_attention_wq_weight") == 0)
      {
        const CsLayoutNode *h = &e->nodes[e->edges[j].head];

        g_assert_cmpint (h->kind, ==, CS_LAYOUT_NODE_OP);
        g_assert_cmpstr (h->label, ==, "linear");
        g_assert_cmpint (h->group, ==, cs_grouping_find (e->grouping, "layers.3.attention"));
        wq_readers++;
      }
  g_assert_cmpuint (wq_readers, ==, 1);
}

/* A layout cache (render/cs-layout-cache.h): the same trace and options give the same layout
 * object; an override repeating the level's choice (collapsing a collapsed layer) is the same
 * picture, so the same layout; expanding a layer is another layout sharing the trace's
 * grouping; the least recently used beyond the size is dropped. */
static void
test_layout_cache (void)
{
  const char *dir = g_getenv ("CS_SHARED_TRACES");
  g_autofree char *path = dir ? g_build_filename (dir, "thunder_llama_stack_initial.txt", NULL) : NULL;
  g_autoptr(CsTraceList) list = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(CsLayoutCache) cache = cs_layout_cache_new (2);
  g_autoptr(CsLayout) a = NULL;
  g_autoptr(CsLayout) b = NULL;
  g_autoptr(CsLayout) c = NULL;
  g_autoptr(CsLayout) d = NULL;
  g_autoptr(CsLayout) e = NULL;
  CsRenderOptions o;
  CsTrace *t;

  if (path == NULL || !g_file_test (path, G_FILE_TEST_IS_REGULAR))
    {
      g_test_skip ("thunder_llama_stack_initial.txt not found");
      return;
    }
  list = cs_parse_file (path, &error);
  g_assert_no_error (error);
  t = g_ptr_array_index (list->traces, 0);
  cs_render_options_init (&o);
  o.cache = cs_layout_cache_ref (cache);
  a = cs_layout_new (t, &o, NULL, &error);
  g_assert_no_error (error);
  b = cs_layout_new (t, &o, NULL, &error);
  g_assert_true (a == b);
  g_assert_cmpuint (cs_layout_cache_n_hits (cache), ==, 1);
  cs_render_options_set_group_expanded (&o, "layers.3", CS_RENDER_EXPAND_OFF);
  c = cs_layout_new (t, &o, NULL, &error);
  g_assert_true (c == a);
  cs_render_options_set_group_expanded (&o, "layers.3", CS_RENDER_EXPAND_ON);
  d = cs_layout_new (t, &o, NULL, &error);
  g_assert_no_error (error);
  g_assert_true (d != a);
  g_assert_true (d->grouping == a->grouping);
  g_assert_cmpint (d->group_collapsed[cs_grouping_find (d->grouping, "layers.3")], ==, FALSE);
  g_assert_cmpuint (cs_layout_cache_n_layouts (cache), ==, 2);
  /* a third picture drops the least recently used (the collapsed one) */
  o.unfold_repeats = TRUE;
  e = cs_layout_new (t, &o, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (cs_layout_cache_n_layouts (cache), ==, 2);
  o.unfold_repeats = FALSE;
  cs_render_options_set_group_expanded (&o, "layers.3", CS_RENDER_EXPAND_DEFAULT);
  {
    g_autoptr(CsLayout) f = cs_layout_new (t, &o, NULL, &error);
    g_assert_true (f != a);
  }
  cs_render_options_clear (&o);
}

/* A distributed trace (data/distributed/handmade_ddp_bwd_buckets.txt): the all_reduce is a
 * COMM node (hexagon in DOT) of the dtype it moves, the FUTURE it returns is a dashed edge into
 * the wait that waits for it, and the bucket's update_bucket_views, pack and unpack are one
 * BUCKET cluster of 4 statements holding 2 gradients. */
static void
test_distributed (void)
{
  const char *dir = g_getenv ("CS_DATA_DIR");
  g_autofree char *path = g_build_filename (dir ? dir : "data", "distributed", "handmade_ddp_bwd_buckets.txt", NULL);
  g_autofree char *text = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTrace) t = NULL;
  g_autoptr(CsLayout) l = NULL;
  g_autofree char *dot = NULL;
  gint comm = -1, wait = -1, bucket = -1;
  guint in_bucket = 0, futures = 0;

  g_assert_true (g_file_get_contents (path, &text, NULL, &error));
  t = parse (text);
  l = cs_graph_build (t, NULL, &error);
  g_assert_no_error (error);
  for (guint i = 0; i < l->n_nodes; i++)
    {
      if (l->nodes[i].kind == CS_LAYOUT_NODE_COMM)
        {
          g_assert_cmpint (comm, ==, -1);
          comm = (gint) i;
        }
      if (g_str_has_suffix (l->nodes[i].name, ".wait"))
        wait = (gint) i;
    }
  g_assert_cmpint (comm, >=, 0);
  g_assert_cmpint (wait, >=, 0);
  g_assert_true (l->nodes[comm].has_dtype);
  g_assert_cmpint (l->nodes[comm].dtype, ==, CS_DTYPE_BF16);
  g_assert_nonnull (strstr (l->nodes[comm].label, "all_reduce sum"));
  g_assert_nonnull (strstr (l->nodes[comm].label, "bf16 \u00b7 2.0"));   /* 1024 bf16 */
  g_assert_nonnull (strstr (l->nodes[comm].label, "KiB"));
  g_assert_nonnull (strstr (l->nodes[wait].label, "ft15"));
  for (guint j = 0; j < l->n_edges; j++)
    if (l->edges[j].future)
      {
        futures++;
        g_assert_cmpuint (l->edges[j].tail, ==, (guint) comm);
        g_assert_cmpuint (l->edges[j].head, ==, (guint) wait);
        g_assert_cmpstr (l->edges[j].proxy, ==, "ft15");
      }
  g_assert_cmpuint (futures, ==, 1);
  for (guint c = 0; c < l->n_clusters; c++)
    if (l->clusters[c].kind == CS_LAYOUT_CLUSTER_BUCKET)
      {
        g_assert_cmpint (bucket, ==, -1);
        bucket = (gint) c;
      }
  g_assert_cmpint (bucket, >=, 0);
  g_assert_cmpstr (l->clusters[bucket].subtitle, ==, "2 gradients");
  for (guint i = 0; i < l->n_nodes; i++)
    if (l->nodes[i].cluster == bucket)
      {
        in_bucket++;
        g_assert_nonnull (strstr (l->nodes[i].name, "pack") ? l->nodes[i].name
                          : strstr (l->nodes[i].name, "update_bucket_view"));
      }
  g_assert_cmpuint (in_bucket, ==, 4);   /* 2 update_bucket_view, pack, unpack */
  dot = cs_graph_to_dot (l);
  g_assert_nonnull (strstr (dot, "shape=hexagon"));
  g_assert_nonnull (strstr (dot, "style=dashed, cswait=1"));
  g_assert_nonnull (strstr (dot, "csbucket=1"));
}

/* The buckets castscope's ddp-bucket-mb pass makes draw as groups too: the real DDP trace
 * (data/distributed/ddp_initial.txt) under ddp-bucket-mb=25 has one bucket of its 21
 * gradients: one BUCKET cluster holding the 21 update_bucket_views, the pack and the unpack,
 * and one all_reduce hexagon of 266880 bytes (260.6 KiB) of bf16. */
static void
test_distributed_castscope_bucket (void)
{
  const char *dir = g_getenv ("CS_DATA_DIR");
  g_autofree char *path = g_build_filename (dir ? dir : "data", "distributed", "ddp_initial.txt", NULL);
  g_autofree char *text = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTrace) t = NULL;
  g_autoptr(CsPipeline) pl = NULL;
  g_autoptr(CsLayout) l = NULL;
  CsPolicy pol;
  gint bucket = -1;
  guint in_bucket = 0, comms = 0, views = 0;

  g_assert_true (g_file_get_contents (path, &text, NULL, &error));
  t = parse (text);
  cs_policy_init_default (&pol);
  g_assert_true (cs_policy_set (&pol, "ddp-bucket-mb", "25", NULL));
  pl = cs_pipeline_run (t, &pol, NULL, &error);
  g_assert_no_error (error);
  l = cs_graph_build (cs_pipeline_get_backward (pl), NULL, &error);
  g_assert_no_error (error);
  for (guint c = 0; c < l->n_clusters; c++)
    if (l->clusters[c].kind == CS_LAYOUT_CLUSTER_BUCKET)
      {
        g_assert_cmpint (bucket, ==, -1);
        bucket = (gint) c;
      }
  g_assert_cmpint (bucket, >=, 0);
  g_assert_cmpstr (l->clusters[bucket].subtitle, ==, "21 gradients");
  for (guint i = 0; i < l->n_nodes; i++)
    {
      if (l->nodes[i].kind == CS_LAYOUT_NODE_COMM)
        {
          comms++;
          g_assert_cmpint (l->nodes[i].dtype, ==, CS_DTYPE_BF16);
          g_assert_nonnull (strstr (l->nodes[i].label, "all_reduce sum"));
          g_assert_nonnull (strstr (l->nodes[i].label, "bf16 \u00b7 260.6"));   /* 266880 / 1024 */
          g_assert_nonnull (strstr (l->nodes[i].label, "KiB"));
          g_assert_cmpint (l->nodes[i].cluster, !=, bucket);
        }
      if (l->nodes[i].cluster == bucket)
        {
          in_bucket++;
          views += g_str_has_suffix (l->nodes[i].name, "update_bucket_view");
        }
    }
  g_assert_cmpuint (comms, ==, 1);
  g_assert_cmpuint (views, ==, 21);
  g_assert_cmpuint (in_bucket, ==, 23);   /* 21 update_bucket_view, pack, unpack */
}

/* ---- the precision lens (core/cs-lens.h through cs_graph_build()) ---- */

/* The seed's region computes a + b in f32 and rounds it to bf16 (t19): the convert to bf16 is a
 * rounding point, the converts to f32 and the add are not; the bf16 matmul accumulates in f32
 * and rounds.  Edges into an op carry the dtype it computes in: t19 (bf16) into the matmul is
 * computed in f32; a into its convert is read as stored (no compute dtype).  Collapsed, the
 * region stores bf16, computes f32, rounds; its input edge a is computed in f32. */
static void
test_precision_lens (void)
{
  g_autoptr(CsTrace) t = parse (seed_fwd);
  g_autoptr(CsLayout) l = build (t, CS_RENDER_DETAIL_STATEMENTS);
  g_autoptr(CsLayout) r = build (t, CS_RENDER_DETAIL_REGIONS);
  gint down = find_label (l, "\u2192 bf16"), add = find_label (l, "add"), mm = -1, e;
  guint n_up = 0, region = 0;

  g_assert_cmpint (down, >=, 0);
  g_assert_true (l->nodes[down].has_precision);
  g_assert_cmpint (l->nodes[down].compute_dtype, ==, CS_DTYPE_F32);
  g_assert_true (l->nodes[down].rounds);
  for (guint i = 0; i < l->n_nodes; i++)
    {
      if (g_strcmp0 (l->nodes[i].label, "\u2192 f32") == 0)
        {
          n_up++;
          g_assert_false (l->nodes[i].rounds);
        }
      if (l->nodes[i].badge == CS_LAYOUT_BADGE_TENSOR_CORE)
        mm = (gint) i;
    }
  g_assert_cmpuint (n_up, ==, 2);
  g_assert_cmpint (add, >=, 0);
  g_assert_cmpint (l->nodes[add].compute_dtype, ==, CS_DTYPE_F32);
  g_assert_false (l->nodes[add].rounds);
  g_assert_cmpint (mm, >=, 0);
  g_assert_cmpint (l->nodes[mm].compute_dtype, ==, CS_DTYPE_F32);
  g_assert_true (l->nodes[mm].rounds);
  e = -1;
  for (guint j = 0; j < l->n_edges; j++)
    if (g_strcmp0 (l->edges[j].proxy, "t19") == 0 && l->edges[j].head == (guint) mm)
      e = (gint) j;
  g_assert_cmpint (e, >=, 0);
  g_assert_true (l->edges[e].has_compute);
  g_assert_cmpint (l->edges[e].dtype, ==, CS_DTYPE_BF16);
  g_assert_cmpint (l->edges[e].compute_dtype, ==, CS_DTYPE_F32);
  e = find_edge (l, "a", CS_LAYOUT_NODE_CAST);
  g_assert_cmpint (e, >=, 0);
  g_assert_false (l->edges[e].has_compute);

  for (guint i = 0; i < r->n_nodes; i++)
    if (r->nodes[i].kind == CS_LAYOUT_NODE_REGION)
      {
        region++;
        g_assert_cmpint (r->nodes[i].dtype, ==, CS_DTYPE_BF16);
        g_assert_cmpint (r->nodes[i].compute_dtype, ==, CS_DTYPE_F32);
        g_assert_true (r->nodes[i].rounds);
      }
  g_assert_cmpuint (region, ==, 1);
  e = find_edge (r, "a", CS_LAYOUT_NODE_REGION);
  g_assert_cmpint (e, >=, 0);
  g_assert_true (r->edges[e].has_compute);
  g_assert_cmpint (r->edges[e].compute_dtype, ==, CS_DTYPE_F32);
  g_assert_false (l->precision_lens);
  cs_layout_set_precision_lens (l, TRUE);
  g_assert_true (l->precision_lens);
}

/* exp(x.float()).to(bf16) * y: remove-redundant-casts drops the user's .to(bf16); the final
 * forward's mul (now reading the unrounded exp) carries the mark, once, with the dtype asked
 * for; the mark survives the diff's cs_layout_clear_marks() and goes with NULL. */
static void
test_user_cast_marks (void)
{
  static const char text[] =
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
  g_autoptr(CsTrace) t = parse (text);
  g_autoptr(GError) error = NULL;
  g_autoptr(CsPipeline) pl = cs_pipeline_run (t, NULL, NULL, &error);
  g_autoptr(GPtrArray) removed = NULL;
  g_autoptr(CsLayout) l = NULL;
  gint mul;

  g_assert_no_error (error);
  removed = cs_lens_removed_user_casts (cs_pipeline_find_trace (pl, "initial"),
                                        cs_pipeline_find_trace (pl, "fuse"),
                                        cs_pipeline_find_trace (pl, "remove-redundant-casts"));
  l = build (cs_pipeline_get_forward (pl), CS_RENDER_DETAIL_STATEMENTS);
  g_assert_cmpuint (cs_layout_mark_user_casts (l, removed), ==, 1);
  g_assert_cmpuint (l->n_user_casts_marked, ==, 1);
  mul = find_label (l, "mul");
  g_assert_cmpint (mul, >=, 0);
  g_assert_cmpuint (l->nodes[mul].user_casts_removed, ==, 1);
  g_assert_cmpint (l->nodes[mul].user_cast_dtype, ==, CS_DTYPE_BF16);
  g_assert_nonnull (strstr (l->nodes[mul].user_cast_note, "line 13"));
  for (guint i = 0; i < l->n_nodes; i++)
    if ((gint) i != mul)
      g_assert_cmpuint (l->nodes[i].user_casts_removed, ==, 0);
  cs_layout_clear_marks (l);
  g_assert_cmpuint (l->nodes[mul].user_casts_removed, ==, 1);
  g_assert_cmpuint (cs_layout_mark_user_casts (l, NULL), ==, 0);
  g_assert_cmpuint (l->nodes[mul].user_casts_removed, ==, 0);
  g_assert_null (l->nodes[mul].user_cast_note);
}

/* A value saved under two names (lightning-thunder#1501: the f32 cast of x made in both
 * regions) is flagged on both saved nodes, with the other name in the detail; other saved
 * tensors are not. */
static void
test_duplicate_saved_flag (void)
{
  g_autoptr(CsTrace) t = parse (duplicate_saved_trace);
  g_autoptr(CsLayout) l = build (t, CS_RENDER_DETAIL_STATEMENTS);
  gint a = find_label (l, "saved t0\nf32[4, 8]\nsaved 2 times");
  gint c = find_label (l, "saved t3\nf32[4, 8]\nsaved 2 times");

  g_assert_cmpint (a, >=, 0);
  g_assert_cmpint (c, >=, 0);
  g_assert_nonnull (strstr (l->nodes[a].detail, "the same value as t3, saved 2 times"));
  g_assert_nonnull (strstr (l->nodes[c].detail, "the same value as t0"));
  g_assert_cmpint (find_label (l, "saved t1\nf32[4, 8]"), >=, 0);
  g_assert_cmpint (find_label (l, "saved w\nbf16[8, 8]"), >=, 0);
}

/* With a layout cache (as the app's views have), the duplicates are kept per trace: a build of
 * another trace in between (the other view's) leaves the flags of the first the same, and a
 * trace without duplicates gets none from the one built before it. */
static void
test_duplicate_saved_cached (void)
{
  g_autoptr(CsTrace) t = parse (duplicate_saved_trace);
  g_autofree char *text = residual_chain (10);
  g_autoptr(CsTrace) other = parse (text);
  g_autoptr(CsLayoutCache) cache = cs_layout_cache_new (0);

  for (guint round = 0; round < 2; round++)
    {
      g_autoptr(GError) error = NULL;
      g_autoptr(CsLayout) l = NULL;
      g_autoptr(CsLayout) lo = NULL;
      CsRenderOptions o;

      cs_render_options_init (&o);
      o.detail = CS_RENDER_DETAIL_STATEMENTS;
      o.cache = cs_layout_cache_ref (cache);
      l = cs_graph_build (t, &o, &error);
      g_assert_no_error (error);
      lo = cs_graph_build (other, &o, &error);
      g_assert_no_error (error);
      cs_render_options_clear (&o);
      g_assert_cmpint (find_label (l, "saved t0\nf32[4, 8]\nsaved 2 times"), >=, 0);
      g_assert_cmpint (find_label (l, "saved t3\nf32[4, 8]\nsaved 2 times"), >=, 0);
      for (guint i = 0; i < lo->n_nodes; i++)
        g_assert_true (lo->nodes[i].label == NULL
                       || strstr (lo->nodes[i].label, "saved 2 times") == NULL);
    }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, G_TEST_OPTION_ISOLATE_DIRS, NULL);
  g_test_add_func ("/render/graph/seed-semantics", test_seed_semantics);
  g_test_add_func ("/render/graph/duplicate-saved", test_duplicate_saved_flag);
  g_test_add_func ("/render/graph/duplicate-saved-cached", test_duplicate_saved_cached);
  g_test_add_func ("/render/graph/precision-lens", test_precision_lens);
  g_test_add_func ("/render/graph/user-cast-marks", test_user_cast_marks);
  g_test_add_func ("/render/graph/f32-badge", test_f32_badge);
  g_test_add_func ("/render/graph/detail-levels", test_detail_levels);
  g_test_add_func ("/render/graph/expand-override", test_expand_override);
  g_test_add_func ("/render/graph/auto-collapse", test_auto_collapse);
  g_test_add_func ("/render/graph/dot-text", test_dot_text);
  g_test_add_func ("/render/graph/distributed", test_distributed);
  g_test_add_func ("/render/graph/distributed/castscope-bucket", test_distributed_castscope_bucket);
  g_test_add_func ("/render/layout/geometry", test_geometry);
  g_test_add_func ("/render/layout/hit-test", test_hit);
  g_test_add_func ("/render/layout/values", test_values);
  g_test_add_func ("/render/layout/diff-marks", test_diff_marks);
  g_test_add_func ("/render/layout/diff-moved", test_diff_moved);
  g_test_add_func ("/render/layout/diff-marked-on-worker", test_diff_marked_on_worker);
  g_test_add_func ("/render/layout/async", test_async);
  g_test_add_func ("/render/layout/async-cancel", test_async_cancel);
  g_test_add_func ("/render/layout/bad-dot", test_bad_dot);
  g_test_add_func ("/render/layout/layered", test_layered);
  g_test_add_func ("/render/groups/chunks", test_chunks_collapsed);
  g_test_add_func ("/render/groups/chunks-hints", test_chunks_hints);
  g_test_add_func ("/render/groups/llama", test_llama_collapsed);
  g_test_add_func ("/render/groups/layout-cache", test_layout_cache);
  return g_test_run ();
}
