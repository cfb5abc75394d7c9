/* test-render-files.c: every trace of ../shared/traces ($CS_SHARED_TRACES, skipped when
 * absent) and data/ ($CS_DATA_DIR) lays out and exports, and its display list agrees with the
 * trace: one region cluster per fusion call drawn expanded, every edge coloured with its
 * tensor's dtype, a badge on every matmul / linear with floating operands (f32 badge exactly
 * when an operand is f32 or f64), boxes inside the bounding box.
 */
#include "cs-config.h"

#include <string.h>

#include <glib/gstdio.h>

#include "cs-ops.h"
#include "cs-parse.h"
#include "cs-render.h"

static const CsStmt *
find_stmt (const CsStmt *s, guint32 id)
{
  if (s->id == id)
    return s;
  for (guint i = 0; i < s->n_subs; i++)
    {
      const CsStmt *r = find_stmt (s->subs[i], id);
      if (r != NULL)
        return r;
    }
  return NULL;
}

static const CsStmt *
trace_stmt (const CsTrace *t, guint32 id)
{
  for (guint i = 0; i < t->n_stmts; i++)
    {
      const CsStmt *r = find_stmt (t->stmts[i], id);
      if (r != NULL)
        return r;
    }
  return NULL;
}

static gboolean
is_matmul (const CsStmt *s)
{
  return s->op->category == CS_OP_CAT_MATMUL || cs_op_semantic (s->op)->category == CS_OP_CAT_MATMUL;
}

static void
check_layout (const char *file, CsTrace *t, CsLayout *l)
{
  guint regions_drawn = 0, region_clusters = 0;

  g_assert_true (l->laid_out);
  g_assert_cmpuint (l->n_nodes, >, 0);
  for (guint i = 0; i < l->n_nodes; i++)
    {
      const CsLayoutNode *n = &l->nodes[i];

      g_assert_true (n->box.x0 >= l->bb.x0 - 1 && n->box.x1 <= l->bb.x1 + 1);
      g_assert_true (n->box.y0 >= l->bb.y0 - 1 && n->box.y1 <= l->bb.y1 + 1);
      if (n->kind == CS_LAYOUT_NODE_OP)
        {
          const CsStmt *s = trace_stmt (t, n->stmt_id);
          g_autoptr(GPtrArray) ins = g_ptr_array_new ();
          gboolean any_float = FALSE, any_wide = FALSE;

          g_assert_nonnull (s);
          if (!is_matmul (s))
            {
              g_assert_cmpint (n->badge, ==, CS_LAYOUT_BADGE_NONE);
              continue;
            }
          cs_stmt_collect_inputs (s, ins);
          for (guint k = 0; k < ins->len; k++)
            {
              const CsProxy *p = g_ptr_array_index (ins, k);
              if (p->kind != CS_PROXY_TENSOR || !cs_dtype_is_float (p->dtype))
                continue;
              any_float = TRUE;
              any_wide |= p->dtype == CS_DTYPE_F32 || p->dtype == CS_DTYPE_F64;
            }
          if (any_float)
            {
              if (n->badge == CS_LAYOUT_BADGE_NONE)
                g_error ("%s: matmul node %s (stmt %u) has no badge", file, n->label, n->stmt_id);
              g_assert_cmpint (n->badge, ==, any_wide ? CS_LAYOUT_BADGE_F32
                                                      : CS_LAYOUT_BADGE_TENSOR_CORE);
            }
        }
      if (n->kind == CS_LAYOUT_NODE_REGION)
        {
          const CsStmt *s = trace_stmt (t, n->stmt_id);
          g_assert_nonnull (s);
          g_assert_true (cs_op_is_fusion (s->op));
        }
      if (n->cluster >= 0)
        {
          const CsRect *c = &l->clusters[n->cluster].box;
          g_assert_true (n->box.x0 >= c->x0 - 0.5 && n->box.x1 <= c->x1 + 0.5);
          g_assert_true (n->box.y0 >= c->y0 - 0.5 && n->box.y1 <= c->y1 + 0.5);
        }
    }
  /* clusters match regions: each REGION cluster is a fusion call of the trace, and at
   * statement level every top-level fusion call with drawn members has one */
  for (guint c = 0; c < l->n_clusters; c++)
    if (l->clusters[c].kind == CS_LAYOUT_CLUSTER_REGION)
      {
        const CsStmt *s = trace_stmt (t, l->clusters[c].stmt_id);
        g_assert_nonnull (s);
        g_assert_true (cs_op_is_fusion (s->op));
        g_assert_cmpstr (l->clusters[c].title, ==, s->callee);
        g_assert_cmpuint (l->clusters[c].n_stmts, >, 0);
        g_assert_cmpuint (l->clusters[c].n_stmts, <=, s->n_subs * 64);
        region_clusters++;
      }
  for (guint i = 0; i < t->n_stmts; i++)
    if (t->stmts[i]->kind == CS_STMT_CALL && cs_op_is_fusion (t->stmts[i]->op)
        && cs_layout_find_cluster (l, t->stmts[i]->id) >= 0)
      regions_drawn++;
  g_assert_cmpuint (regions_drawn, ==, region_clusters);
  if (l->detail == CS_RENDER_DETAIL_STATEMENTS)
    for (guint i = 0; i < t->n_stmts; i++)
      {
        const CsStmt *s = t->stmts[i];
        if (s->kind == CS_STMT_CALL && cs_op_is_fusion (s->op))
          {
            gint c = cs_layout_find_cluster (l, s->id);
            gint n = cs_layout_find_node (l, s->id);
            g_autoptr(GPtrArray) outs = g_ptr_array_new ();
            gboolean tensor_out = FALSE;

            cs_stmt_collect_outputs (s, outs);
            for (guint k = 0; k < outs->len; k++)
              tensor_out |= ((CsProxy *) g_ptr_array_index (outs, k))->kind == CS_PROXY_TENSOR;
            /* a region producing tensors is drawn: as its box, or as one node when nothing
             * inside is drawable */
            if (tensor_out && c < 0 && n < 0)
              g_error ("%s: region %s is not drawn", file, s->callee);
          }
      }
  /* edge colours match the dtypes */
  for (guint j = 0; j < l->n_edges; j++)
    {
      const CsLayoutEdge *e = &l->edges[j];
      const CsProxy *p = cs_trace_lookup_proxy (t, e->proxy);

      g_assert_nonnull (p);
      g_assert_cmpuint (e->tail, <, l->n_nodes);
      g_assert_cmpuint (e->head, <, l->n_nodes);
      if (p->kind == CS_PROXY_TENSOR && p->typed)
        {
          g_assert_true (e->has_dtype);
          g_assert_cmpint (e->dtype, ==, p->dtype);
        }
    }
}

static guint n_files, n_traces, n_nodes_total;

static void
render_dir (const char *dir)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GDir) d = g_dir_open (dir, 0, &error);
  g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func (g_free);
  g_autofree char *out_dir = g_dir_make_tmp ("cs-render-files-XXXXXX", NULL);
  const char *name;

  g_assert_no_error (error);
  while ((name = g_dir_read_name (d)) != NULL)
    if (g_str_has_suffix (name, ".txt"))
      g_ptr_array_add (names, g_strdup (name));
  g_ptr_array_sort (names, (GCompareFunc) g_strcmp0);
  for (guint f = 0; f < names->len; f++)
    {
      g_autofree char *path = g_build_filename (dir, g_ptr_array_index (names, f), NULL);
      g_autoptr(CsTraceList) list = cs_parse_file (path, &error);

      if (list == NULL)
        g_error ("%s does not parse: %s", path, error->message);
      n_files++;
      for (guint k = 0; k < list->traces->len; k++)
        {
          CsTrace *t = g_ptr_array_index (list->traces, k);
          g_autoptr(CsLayout) l = NULL;
          g_autofree char *out = NULL;
          gint64 t0 = g_get_monotonic_time ();

          if (t->n_stmts == 0)
            continue;
          l = cs_layout_new (t, NULL, NULL, &error);
          if (l == NULL)
            g_error ("%s trace %u does not render: %s", path, k, error->message);
          check_layout (path, t, l);
          /* PNG for the small ones, SVG for the large (the same painter) */
          out = g_strdup_printf ("%s/%u-%u.%s", out_dir, f, k, l->n_nodes < 300 ? "png" : "svg");
          if (!cs_draw_export (l, l->n_nodes < 300 ? CS_EXPORT_PNG : CS_EXPORT_SVG, out, 1.0,
                               CS_DRAW_DEFAULT, &error))
            g_error ("%s: export failed: %s", path, error->message);
          g_assert_true (g_file_test (out, G_FILE_TEST_IS_REGULAR));
          g_remove (out);
          g_test_message ("%s[%u]: %u nodes, %u edges, %u clusters, dot %.0f ms, total %.0f ms",
                          (char *) g_ptr_array_index (names, f), k, l->n_nodes, l->n_edges,
                          l->n_clusters, l->layout_ms, (g_get_monotonic_time () - t0) / 1000.0);
          n_traces++;
          n_nodes_total += l->n_nodes;
        }
    }
  g_rmdir (out_dir);
}

static void
test_shared (void)
{
  const char *dir = g_getenv ("CS_SHARED_TRACES");

  if (dir == NULL || !g_file_test (dir, G_FILE_TEST_IS_DIR))
    {
      g_test_skip ("CS_SHARED_TRACES is not a directory");
      return;
    }
  n_files = n_traces = 0;
  render_dir (dir);
  /* the shared folder holds 39 trace files (README of ../shared) */
  g_assert_cmpuint (n_files, >=, 39);
  g_assert_cmpuint (n_traces, >=, n_files);
}

static void
test_data (void)
{
  const char *dir = g_getenv ("CS_DATA_DIR");

  if (dir == NULL || !g_file_test (dir, G_FILE_TEST_IS_DIR))
    {
      g_test_skip ("CS_DATA_DIR is not a directory");
      return;
    }
  n_files = n_traces = 0;
  render_dir (dir);
  g_assert_cmpuint (n_files, >=, 1);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, G_TEST_OPTION_ISOLATE_DIRS, NULL);
  g_test_add_func ("/render/files/data", test_data);
  g_test_add_func ("/render/files/shared", test_shared);
  return g_test_run ();
}
