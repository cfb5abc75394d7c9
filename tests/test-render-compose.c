/* test-render-compose.c: render/cs-layout-compose.c, a picture laid out in pieces.
 *
 * The traces: a chain of 1,001 `prims.neg` statements on one f32[4] tensor, which render/
 * cuts into chunks of 250 statements (cs-group.h: "statements 1-250", "statements 251-500",
 * ...); expanding a chunk draws its 250 statements as 250 nodes in a box, more than
 * COMPOSE_MIN_NODES (24), so that box is laid out on its own.  The chunks "statements
 * 251-500" and "statements 501-750" are the same: 250 negs in a row, each reading the one
 * before, same shapes and dtypes, so the second one expanded reuses the first one's piece.
 * And the 8-block LLaMA of $CS_SHARED_TRACES, whose blocks have the same structure (the
 * grouping says so: "all with the same structure as layers.0"): two blocks expanded are two
 * pieces with one layout.
 */
#include "cs-config.h"

#include <math.h>
#include <string.h>

#include "cs-parse.h"
#include "cs-render.h"
#include "cs-layout-private.h"

#define TOL 3.0   /* pt */

static CsTrace *
neg_chain (void)
{
  GString *s = g_string_new ("def computation(x):\n  # x: \"cuda:0 f32[4]\"\n");
  g_autoptr(GError) error = NULL;
  g_autofree char *text = NULL;
  CsTrace *t;

  g_string_append (s, "  t0 = prims.neg(x)  # t0: \"cuda:0 f32[4]\"\n");
  for (guint i = 1; i <= 1000; i++)
    g_string_append_printf (s, "  t%u = prims.neg(t%u)  # t%u: \"cuda:0 f32[4]\"\n", i, i - 1, i);
  g_string_append (s, "  return t1000\n");
  text = g_string_free (s, FALSE);
  t = cs_parse_trace (text, "chain", &error);
  g_assert_no_error (error);
  return t;
}

static CsLayout *
layout_with (CsTrace *t, const char *const *expanded)
{
  CsRenderOptions o;
  g_autoptr(GError) error = NULL;
  CsLayout *l;

  cs_render_options_init (&o);
  for (guint i = 0; expanded[i] != NULL; i++)
    cs_render_options_set_group_expanded (&o, expanded[i], CS_RENDER_EXPAND_ON);
  l = cs_layout_new (t, &o, NULL, &error);
  g_assert_no_error (error);
  g_assert_nonnull (l);
  g_assert_true (l->laid_out);
  cs_render_options_clear (&o);
  return l;
}

static gboolean
inside (const CsRect *inner, const CsRect *outer)
{
  return inner->x0 >= outer->x0 - TOL && inner->x1 <= outer->x1 + TOL
         && inner->y0 >= outer->y0 - TOL && inner->y1 <= outer->y1 + TOL;
}

static gboolean
overlap (const CsRect *a, const CsRect *b)
{
  return a->x0 < b->x1 - TOL && b->x0 < a->x1 - TOL && a->y0 < b->y1 - TOL && b->y0 < a->y1 - TOL;
}

static double
dist_to_rect (CsPoint p, const CsRect *r)
{
  double dx = p.x < r->x0 ? r->x0 - p.x : p.x > r->x1 ? p.x - r->x1 : 0;
  double dy = p.y < r->y0 ? r->y0 - p.y : p.y > r->y1 ? p.y - r->y1 : 0;

  return sqrt (dx * dx + dy * dy);
}

/* The cluster of expanded group @name. */
static const CsLayoutCluster *
group_box (const CsLayout *l, const char *name)
{
  gint g = cs_grouping_find (l->grouping, name);

  g_assert_cmpint (g, >=, 0);
  for (guint c = 0; c < l->n_clusters; c++)
    if (l->clusters[c].kind == CS_LAYOUT_CLUSTER_GROUP && l->clusters[c].group == g)
      return &l->clusters[c];
  g_assert_not_reached ();
  return NULL;
}

/* What every composed picture must be: the nodes of each expanded group in its box, no other
 * node in it, every edge starting at its tail and ending (arrow tip or last point) at its
 * head.  Returns the nodes in the box of @name. */
static guint
check_geometry (const CsLayout *l, const char *name)
{
  const CsLayoutCluster *box = group_box (l, name);
  gint g = box->group;
  guint n_in = 0;

  for (guint i = 0; i < l->n_nodes; i++)
    {
      const CsLayoutNode *n = &l->nodes[i];
      gboolean member = FALSE;

      for (gint c = n->cluster; c >= 0; c = l->clusters[c].parent)
        member |= &l->clusters[c] == box;
      if (member)
        {
          g_assert_true (inside (&n->box, &box->box));
          g_assert_true (n->group == g || cs_grouping_is_within (l->grouping, n->group, g));
          n_in++;
        }
      else if (n->kind != CS_LAYOUT_NODE_INPUT && n->kind != CS_LAYOUT_NODE_REF)
        g_assert_false (overlap (&n->box, &box->box));
    }
  for (guint j = 0; j < l->n_edges; j++)
    {
      const CsLayoutEdge *e = &l->edges[j];
      CsPoint end;

      g_assert_cmpuint (e->n_points, >=, 4);
      g_assert_cmpuint ((e->n_points - 1) % 3, ==, 0);
      end = e->has_arrow ? e->arrow_tip : e->points[e->n_points - 1];
      g_assert_cmpfloat (dist_to_rect (e->points[0], &l->nodes[e->tail].box), <=, TOL);
      g_assert_cmpfloat (dist_to_rect (end, &l->nodes[e->head].box), <=, TOL);
    }
  return n_in;
}

static gboolean
has_note (const CsLayout *l, const char *text)
{
  for (guint i = 0; l->notes != NULL && l->notes[i] != NULL; i++)
    if (strstr (l->notes[i], text) != NULL)
      return TRUE;
  return FALSE;
}

static void
test_chain_chunk (void)
{
  g_autoptr(CsTrace) t = neg_chain ();
  const char *two[] = { "statements 251-500", NULL };
  const char *three[] = { "statements 501-750", NULL };
  g_autoptr(CsLayout) a = NULL;
  g_autoptr(CsLayout) b = NULL;
  g_autoptr(CsLayout) collapsed = NULL;
  const CsLayoutCluster *ba, *bb;
  guint k = 0;

  _cs_layout_pieces_clear ();
  {
    const char *none[] = { NULL };

    /* nothing expanded: one layout of the whole (5 chunk nodes, x, the output) */
    collapsed = layout_with (t, none);
    g_assert_cmpuint (collapsed->composed, ==, 0);
  }
  a = layout_with (t, two);
  g_assert_cmpuint (a->composed, ==, 1);
  g_assert_cmpuint (a->composed_reused, ==, 0);
  g_assert_false (a->layered);
  /* 250 negs, each a node of the box */
  g_assert_cmpuint (check_geometry (a, "statements 251-500"), ==, 250);
  g_assert_true (has_note (a, "Laid out in pieces: statements 251-500 (250 nodes) on its own"));
  g_assert_true (has_note (a, "0 of the 1 reused"));

  b = layout_with (t, three);
  g_assert_cmpuint (b->composed, ==, 1);
  g_assert_cmpuint (b->composed_reused, ==, 1);
  g_assert_cmpuint (check_geometry (b, "statements 501-750"), ==, 250);
  g_assert_true (has_note (b, "1 of the 1 reused"));

  /* the reused piece: the k-th neg of either chunk sits at the same place in its box */
  ba = group_box (a, "statements 251-500");
  bb = group_box (b, "statements 501-750");
  g_assert_cmpfloat (fabs ((ba->box.x1 - ba->box.x0) - (bb->box.x1 - bb->box.x0)), <, 0.01);
  g_assert_cmpfloat (fabs ((ba->box.y1 - ba->box.y0) - (bb->box.y1 - bb->box.y0)), <, 0.01);
  for (guint i = 0, j = 0; i < a->n_nodes && j < b->n_nodes; i++, j++)
    {
      while (i < a->n_nodes && (a->nodes[i].cluster < 0 || &a->clusters[a->nodes[i].cluster] != ba))
        i++;
      while (j < b->n_nodes && (b->nodes[j].cluster < 0 || &b->clusters[b->nodes[j].cluster] != bb))
        j++;
      if (i == a->n_nodes || j == b->n_nodes)
        break;
      g_assert_cmpfloat (fabs ((a->nodes[i].box.x0 - ba->box.x0) - (b->nodes[j].box.x0 - bb->box.x0)), <, 0.01);
      g_assert_cmpfloat (fabs ((a->nodes[i].box.y0 - ba->box.y0) - (b->nodes[j].box.y0 - bb->box.y0)), <, 0.01);
      k++;
    }
  g_assert_cmpuint (k, ==, 250);
}

static void
test_llama_repeats (void)
{
  const char *dir = g_getenv ("CS_SHARED_TRACES");
  g_autofree char *path = dir ? g_build_filename (dir, "thunder_llama_stack_initial.txt", NULL) : NULL;
  g_autoptr(CsTraceList) list = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(CsLayout) l = NULL;
  const char *both[] = { "layers.2", "layers.5", NULL };

  if (path == NULL || !g_file_test (path, G_FILE_TEST_IS_REGULAR))
    {
      g_test_skip ("thunder_llama_stack_initial.txt not found");
      return;
    }
  list = cs_parse_file (path, &error);
  g_assert_no_error (error);
  _cs_layout_pieces_clear ();
  l = layout_with (g_ptr_array_index (list->traces, 0), both);
  g_assert_cmpuint (l->composed, ==, 2);
  /* the two blocks have the same structure: one layout for both */
  g_assert_cmpuint (l->composed_reused, ==, 1);
  g_assert_cmpuint (check_geometry (l, "layers.2"), >=, 24);
  g_assert_cmpuint (check_geometry (l, "layers.5"), >=, 24);
  /* the two boxes do not overlap */
  g_assert_false (overlap (&group_box (l, "layers.2")->box, &group_box (l, "layers.5")->box));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/render/compose/chain-chunk", test_chain_chunk);
  g_test_add_func ("/render/compose/llama-repeats", test_llama_repeats);
  return g_test_run ();
}
