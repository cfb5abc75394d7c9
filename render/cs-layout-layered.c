/* cs-layout-layered.c: castscope's fast layered layout, used instead of Graphviz dot for
 * graphs too large for dot to lay out in about a second.
 *
 * A reduced Sugiyama layout: longest-path ranks (sources pulled down next to their first
 * reader), then alternating down / up sweeps that move each node towards the mean x of its
 * neighbours in the previous sweep direction, keeping rank order and a minimum gap; cubic
 * edges from the bottom of the tail to the top of the head.  No virtual nodes and no
 * crossing minimisation beyond the barycentre sort, so it runs in O((nodes + edges) x sweeps)
 * (milliseconds at 4,000 nodes), where dot needed 6.6 s of CPU for 2,042 nodes
 * (tests/bench-render.c).  Netron switches its dagre ranker to longest-path above 3,000 nodes
 * for the same reason (reference/viewers-and-user-asks.md section 3).
 */
#include "cs-config.h"

#include "cs-layout-private.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define NODE_SEP_PT   16.0   /* horizontal gap between neighbours */
#define RANK_SEP_PT   30.0   /* vertical gap between ranks */
#define ARROW_PT       7.0
#define CLUSTER_PAD_PT 8.0
#define CLUSTER_TITLE_PT 26.0
#define SWEEPS         8

typedef struct
{
  const CsLayout *layout;   /* the layout whose nodes are sorted */
  double         *key;      /* sort key per node */
  gint           *cluster;  /* top-level cluster of each node (-1) for grouping */
} SortCtx;

static int
cmp_nodes (const void *pa, const void *pb, void *data)
{
  const SortCtx *c = data;
  guint a = *(const guint *) pa, b = *(const guint *) pb;

  if (c->key[a] < c->key[b])
    return -1;
  if (c->key[a] > c->key[b])
    return 1;
  return a < b ? -1 : a > b;
}

/* qsort_r is a GNU extension; g_qsort_with_data is stable and portable */
static gint
cmp_nodes_g (gconstpointer pa, gconstpointer pb, gpointer data)
{
  return cmp_nodes (pa, pb, data);
}

static gint
top_cluster (const CsLayout *l, gint c)
{
  while (c >= 0 && l->clusters[c].parent >= 0)
    c = l->clusters[c].parent;
  return c;
}

/* Places the nodes of one rank, in @order, as close to their desired centres as the minimum
 * gaps allow (forward and backward passes averaged, then a forward pass for safety). */
static void
place_rank (const CsLayout *l, const guint *order, guint n, const double *desired, double *x)
{
  double *fw = g_newa (double, n + 1), *bw = g_newa (double, n + 1);

  for (guint i = 0; i < n; i++)
    {
      const CsLayoutNode *v = &l->nodes[order[i]];
      double half = (v->box.x1 - v->box.x0) / 2;
      fw[i] = desired[order[i]];
      if (i > 0)
        {
          const CsLayoutNode *u = &l->nodes[order[i - 1]];
          double min = fw[i - 1] + (u->box.x1 - u->box.x0) / 2 + NODE_SEP_PT + half;
          fw[i] = MAX (fw[i], min);
        }
    }
  for (guint i = n; i-- > 0;)
    {
      const CsLayoutNode *v = &l->nodes[order[i]];
      double half = (v->box.x1 - v->box.x0) / 2;
      bw[i] = desired[order[i]];
      if (i + 1 < n)
        {
          const CsLayoutNode *u = &l->nodes[order[i + 1]];
          double max = bw[i + 1] - (u->box.x1 - u->box.x0) / 2 - NODE_SEP_PT - half;
          bw[i] = MIN (bw[i], max);
        }
    }
  for (guint i = 0; i < n; i++)
    {
      double xi = (fw[i] + bw[i]) / 2;
      if (i > 0)
        {
          const CsLayoutNode *u = &l->nodes[order[i - 1]], *v = &l->nodes[order[i]];
          double min = x[order[i - 1]] + (u->box.x1 - u->box.x0) / 2 + NODE_SEP_PT
                       + (v->box.x1 - v->box.x0) / 2;
          xi = MAX (xi, min);
        }
      x[order[i]] = xi;
    }
}

/**
 * _cs_layout_run_layered:
 * @layout: a display list from cs_graph_build()
 *
 * Fills every node box, edge bézier (4 points) and arrow, edge label position, cluster box
 * and title position and the bounding box, in points with y up, like the Graphviz snapshot
 * does, with the fast layered layout described at the top of this file.  Cluster boxes are
 * the bounding boxes of their members plus a title band; members are kept side by side in
 * each rank.  Never fails; thread-safe (no global state).
 */
void
_cs_layout_run_layered (CsLayout *l)
{
  guint n = l->n_nodes;
  guint *indeg = g_new0 (guint, n), *topo = g_new (guint, n), *rank = g_new0 (guint, n);
  guint *succ_start = g_new0 (guint, n + 1), *succ = g_new (guint, l->n_edges + 1);
  guint *pred_start = g_new0 (guint, n + 1), *pred = g_new (guint, l->n_edges + 1);
  double *x = g_new0 (double, n), *desired = g_new0 (double, n), *key = g_new0 (double, n);
  gint *tc = g_new (gint, n), *leaf = g_new (gint, n);
  guint n_topo = 0, max_rank = 0;
  GPtrArray *ranks;
  SortCtx ctx = { l, key, tc };
  double y_top;

  /* adjacency (CSR) */
  for (guint j = 0; j < l->n_edges; j++)
    {
      succ_start[l->edges[j].tail + 1]++;
      pred_start[l->edges[j].head + 1]++;
    }
  for (guint i = 0; i < n; i++)
    {
      succ_start[i + 1] += succ_start[i];
      pred_start[i + 1] += pred_start[i];
    }
  {
    guint *sf = g_memdup2 (succ_start, sizeof (guint) * n), *pf = g_memdup2 (pred_start, sizeof (guint) * n);
    for (guint j = 0; j < l->n_edges; j++)
      {
        succ[sf[l->edges[j].tail]++] = l->edges[j].head;
        pred[pf[l->edges[j].head]++] = l->edges[j].tail;
      }
    g_free (sf);
    g_free (pf);
  }
  for (guint i = 0; i < n; i++)
    {
      guint in = pred_start[i + 1] - pred_start[i], out = succ_start[i + 1] - succ_start[i];
      indeg[i] = in;
      tc[i] = top_cluster (l, l->nodes[i].cluster);
      /* a leaf (an input read once, an output) is placed after the sweeps, beside its one
       * partner: letting it compete for the partner's x makes long chains drift sideways */
      leaf[i] = (in == 0 && out == 1) ? (gint) succ[succ_start[i]]
                : (out == 0 && in == 1) ? (gint) pred[pred_start[i]] : -1;
    }

  /* Kahn's topological order, smallest index first (trace order); a cycle (none in a trace)
   * is broken by taking the smallest remaining node */
  {
    gboolean *done = g_new0 (gboolean, n);
    GQueue q = G_QUEUE_INIT;
    guint next_scan = 0;

    for (guint i = 0; i < n; i++)
      if (indeg[i] == 0)
        g_queue_push_tail (&q, GUINT_TO_POINTER (i));
    while (n_topo < n)
      {
        guint v;
        if (g_queue_is_empty (&q))
          {
            while (done[next_scan])
              next_scan++;
            g_queue_push_tail (&q, GUINT_TO_POINTER (next_scan));
            indeg[next_scan] = 0;
          }
        v = GPOINTER_TO_UINT (g_queue_pop_head (&q));
        if (done[v])
          continue;
        done[v] = TRUE;
        topo[n_topo++] = v;
        for (guint k = succ_start[v]; k < succ_start[v + 1]; k++)
          if (!done[succ[k]] && --indeg[succ[k]] == 0)
            g_queue_push_tail (&q, GUINT_TO_POINTER (succ[k]));
      }
    g_free (done);
  }

  /* longest-path ranks; then sources move down next to their nearest reader */
  for (guint t = 0; t < n; t++)
    {
      guint v = topo[t];
      for (guint k = pred_start[v]; k < pred_start[v + 1]; k++)
        rank[v] = MAX (rank[v], rank[pred[k]] + 1);
    }
  for (guint t = n; t-- > 0;)
    {
      guint v = topo[t], min_succ = G_MAXUINT;
      if (pred_start[v + 1] != pred_start[v])
        continue;
      for (guint k = succ_start[v]; k < succ_start[v + 1]; k++)
        min_succ = MIN (min_succ, rank[succ[k]]);
      if (min_succ != G_MAXUINT && min_succ > 0)
        rank[v] = min_succ - 1;
    }
  for (guint i = 0; i < n; i++)
    max_rank = MAX (max_rank, rank[i]);

  /* ranks in topological order; initial x: packed */
  ranks = g_ptr_array_new_with_free_func ((GDestroyNotify) g_array_unref);
  for (guint r = 0; r <= max_rank; r++)
    g_ptr_array_add (ranks, g_array_new (FALSE, FALSE, sizeof (guint)));
  for (guint t = 0; t < n; t++)
    if (leaf[topo[t]] < 0)
      g_array_append_val ((GArray *) g_ptr_array_index (ranks, rank[topo[t]]), topo[t]);
  for (guint r = 0; r <= max_rank; r++)
    {
      GArray *a = g_ptr_array_index (ranks, r);
      double cx = 0;
      for (guint i = 0; i < a->len; i++)
        {
          guint v = g_array_index (a, guint, i);
          double w = l->nodes[v].box.x1 - l->nodes[v].box.x0;
          x[v] = cx + w / 2;
          cx += w + NODE_SEP_PT;
        }
    }

  /* sweeps: down (towards predecessors), up (towards successors) */
  for (guint s = 0; s < SWEEPS; s++)
    {
      gboolean down = (s % 2) == 0;
      for (guint ri = 0; ri <= max_rank; ri++)
        {
          guint r = down ? ri : max_rank - ri;
          GArray *a = g_ptr_array_index (ranks, r);
          guint *order = (guint *) a->data;

          for (guint i = 0; i < a->len; i++)
            {
              guint v = order[i], from = down ? pred_start[v] : succ_start[v];
              guint to = down ? pred_start[v + 1] : succ_start[v + 1];
              double sum = 0, wsum = 0;

              for (guint k = from; k < to; k++)
                {
                  guint u = down ? pred[k] : succ[k];
                  if (leaf[u] >= 0)
                    continue;
                  sum += x[u];
                  wsum += 1;
                }
              desired[v] = wsum > 0 ? sum / wsum : x[v];
            }
          /* order by desired x; members of one top-level cluster stay side by side (keyed by
           * their mean desired x) */
          {
            GHashTable *csum = g_hash_table_new_full (NULL, NULL, NULL, g_free);
            for (guint i = 0; i < a->len; i++)
              {
                guint v = order[i];
                if (tc[v] >= 0)
                  {
                    double *acc = g_hash_table_lookup (csum, GINT_TO_POINTER (tc[v]));
                    if (acc == NULL)
                      {
                        acc = g_new0 (double, 2);
                        g_hash_table_insert (csum, GINT_TO_POINTER (tc[v]), acc);
                      }
                    acc[0] += desired[v];
                    acc[1] += 1;
                  }
              }
            for (guint i = 0; i < a->len; i++)
              {
                guint v = order[i];
                key[v] = desired[v];
                if (tc[v] >= 0)
                  {
                    double *acc = g_hash_table_lookup (csum, GINT_TO_POINTER (tc[v]));
                    /* cluster mean first, then position inside the cluster (tiny weight) */
                    key[v] = acc[0] / acc[1] + desired[v] * 1e-6;
                  }
              }
            g_hash_table_unref (csum);
          }
          g_qsort_with_data (order, (gint) a->len, sizeof (guint), cmp_nodes_g, &ctx);
          place_rank (l, order, a->len, desired, x);
        }
    }

  /* leaves: beside their partner, in the first free gap to the right of its centre */
  {
    GPtrArray *leaves = g_ptr_array_new_with_free_func ((GDestroyNotify) g_array_unref);
    for (guint r = 0; r <= max_rank; r++)
      g_ptr_array_add (leaves, g_array_new (FALSE, FALSE, sizeof (guint)));
    for (guint t = 0; t < n; t++)
      if (leaf[topo[t]] >= 0)
        {
          guint v = topo[t];
          g_array_append_val ((GArray *) g_ptr_array_index (leaves, rank[v]), v);
          key[v] = x[leaf[v]];
        }
    for (guint r = 0; r <= max_rank; r++)
      {
        GArray *lv = g_ptr_array_index (leaves, r), *a = g_ptr_array_index (ranks, r);
        GArray *occ = g_array_new (FALSE, FALSE, sizeof (guint));   /* placed, sorted by x */

        g_array_append_vals (occ, a->data, a->len);
        g_qsort_with_data (lv->data, (gint) lv->len, sizeof (guint), cmp_nodes_g, &ctx);
        for (guint i = 0; i < lv->len; i++)
          {
            guint v = g_array_index (lv, guint, i), pos;
            double half = (l->nodes[v].box.x1 - l->nodes[v].box.x0) / 2;
            double cx = x[leaf[v]] + (l->nodes[leaf[v]].box.x1 - l->nodes[leaf[v]].box.x0) / 2
                        + NODE_SEP_PT + half;
            /* one pass left to right (occ is sorted by x): push right past every placed node
             * it would overlap */
            for (guint k = 0; k < occ->len; k++)
              {
                guint u = g_array_index (occ, guint, k);
                double uh = (l->nodes[u].box.x1 - l->nodes[u].box.x0) / 2;
                if (fabs (x[u] - cx) < uh + half + NODE_SEP_PT - 0.01)
                  cx = x[u] + uh + half + NODE_SEP_PT;
              }
            x[v] = cx;
            for (pos = 0; pos < occ->len && x[g_array_index (occ, guint, pos)] < cx; pos++)
              ;
            g_array_insert_val (occ, pos, v);
          }
        /* the rank now holds everything, left to right */
        g_array_set_size (a, 0);
        g_array_append_vals (a, occ->data, occ->len);
        g_array_unref (occ);
      }
    g_ptr_array_unref (leaves);
  }

  /* y: rank 0 at the top */
  y_top = 0;
  for (guint r = 0; r <= max_rank; r++)
    {
      GArray *a = g_ptr_array_index (ranks, r);
      double h = 0;
      for (guint i = 0; i < a->len; i++)
        {
          const CsLayoutNode *v = &l->nodes[g_array_index (a, guint, i)];
          h = MAX (h, v->box.y1 - v->box.y0);
        }
      for (guint i = 0; i < a->len; i++)
        {
          CsLayoutNode *v = &l->nodes[g_array_index (a, guint, i)];
          double w = v->box.x1 - v->box.x0, hh = v->box.y1 - v->box.y0;
          double cy = y_top - h / 2;
          v->box = (CsRect) { x[g_array_index (a, guint, i)] - w / 2, cy - hh / 2,
                              x[g_array_index (a, guint, i)] + w / 2, cy + hh / 2 };
          v->label_pos = (CsPoint) { x[g_array_index (a, guint, i)], cy };
        }
      y_top -= h + RANK_SEP_PT;
    }

  /* edges: one cubic from the bottom of the tail to just above the head, then the arrow */
  for (guint j = 0; j < l->n_edges; j++)
    {
      CsLayoutEdge *e = &l->edges[j];
      const CsLayoutNode *a = &l->nodes[e->tail], *b = &l->nodes[e->head];
      CsPoint p0 = { (a->box.x0 + a->box.x1) / 2, a->box.y0 };
      CsPoint tip = { (b->box.x0 + b->box.x1) / 2, b->box.y1 };
      CsPoint p3 = { tip.x, tip.y + ARROW_PT };
      double dy = MAX (p0.y - p3.y, 10.0);

      g_free (e->points);
      e->n_points = 4;
      e->points = g_new (CsPoint, 4);
      e->points[0] = p0;
      e->points[1] = (CsPoint) { p0.x, p0.y - dy * 0.5 };
      e->points[2] = (CsPoint) { p3.x, p3.y + dy * 0.5 };
      e->points[3] = p3;
      e->has_arrow = TRUE;
      e->arrow_tip = tip;
      e->has_label_pos = e->label != NULL;
      e->label_pos = (CsPoint) { (p0.x + p3.x) / 2 + 14, (p0.y + p3.y) / 2 };
    }

  /* clusters: children before parents (a child's index is larger than its parent's) */
  for (guint c = l->n_clusters; c-- > 0;)
    {
      CsLayoutCluster *cl = &l->clusters[c];
      gboolean any = FALSE;
      CsRect r = { G_MAXDOUBLE, G_MAXDOUBLE, -G_MAXDOUBLE, -G_MAXDOUBLE };

      for (guint i = 0; i < n; i++)
        if (l->nodes[i].cluster == (gint) c)
          {
            const CsRect *b = &l->nodes[i].box;
            r = (CsRect) { MIN (r.x0, b->x0), MIN (r.y0, b->y0), MAX (r.x1, b->x1), MAX (r.y1, b->y1) };
            any = TRUE;
          }
      for (guint k = c + 1; k < l->n_clusters; k++)
        if (l->clusters[k].parent == (gint) c)
          {
            const CsRect *b = &l->clusters[k].box;
            r = (CsRect) { MIN (r.x0, b->x0), MIN (r.y0, b->y0), MAX (r.x1, b->x1), MAX (r.y1, b->y1) };
            any = TRUE;
          }
      if (!any)
        r = (CsRect) { 0, 0, 0, 0 };
      cl->box = (CsRect) { r.x0 - CLUSTER_PAD_PT, r.y0 - CLUSTER_PAD_PT, r.x1 + CLUSTER_PAD_PT,
                           r.y1 + CLUSTER_PAD_PT + CLUSTER_TITLE_PT };
      cl->title_pos = (CsPoint) { cl->box.x0 + 40, cl->box.y1 - CLUSTER_TITLE_PT / 2 - 2 };
    }

  /* bounding box */
  {
    CsRect bb = { G_MAXDOUBLE, G_MAXDOUBLE, -G_MAXDOUBLE, -G_MAXDOUBLE };
    for (guint i = 0; i < n; i++)
      {
        const CsRect *b = &l->nodes[i].box;
        bb = (CsRect) { MIN (bb.x0, b->x0), MIN (bb.y0, b->y0), MAX (bb.x1, b->x1), MAX (bb.y1, b->y1) };
      }
    for (guint c = 0; c < l->n_clusters; c++)
      {
        const CsRect *b = &l->clusters[c].box;
        bb = (CsRect) { MIN (bb.x0, b->x0), MIN (bb.y0, b->y0), MAX (bb.x1, b->x1), MAX (bb.y1, b->y1) };
      }
    for (guint j = 0; j < l->n_edges; j++)
      if (l->edges[j].has_label_pos)
        bb.x1 = MAX (bb.x1, l->edges[j].label_pos.x + 40);
    if (n == 0)
      bb = (CsRect) { 0, 0, 1, 1 };
    l->bb = (CsRect) { bb.x0 - 8, bb.y0 - 8, bb.x1 + 8, bb.y1 + 8 };
  }
  l->laid_out = TRUE;

  g_ptr_array_unref (ranks);
  g_free (indeg);
  g_free (topo);
  g_free (rank);
  g_free (succ_start);
  g_free (succ);
  g_free (pred_start);
  g_free (pred);
  g_free (x);
  g_free (desired);
  g_free (key);
  g_free (tc);
  g_free (leaf);
}
