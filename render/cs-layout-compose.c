/* cs-layout-compose.c: a layout made of pieces.  Each large expanded group (a layer, module or
 * chunk drawn as a box of its statements, CS_LAYOUT_CLUSTER_GROUP at the top level) is laid
 * out on its own, the rest of the picture with one box of that size in its place, and the
 * pieces are put together (see _cs_layout_run_composed()).
 *
 * A piece's geometry depends only on what dot sees of it: node sizes and shapes, which box each
 * node is in, the edges between them with their label text and the box titles.  That is the
 * key of the piece cache (process-wide, the CACHE_PIECES most recently used), so that expanding
 * a layer lays out that layer and the picture around it, going back to a state seen lays out
 * only the picture around it, and the repeats of a layer (the same ops, shapes and dtypes:
 * "layers 0-7: same structure") share one layout.  A policy that changes a dtype changes the
 * key through the edge and node sizes and labels only where they change; colours are not part
 * of it (they do not move anything).
 */
#include "cs-config.h"

#include <string.h>

#include "cs-graph.h"
#include "cs-layout-private.h"

/* A top-level expanded group with at least this many nodes is laid out on its own. */
#define COMPOSE_MIN_NODES  24
/* Pieces kept (a model's distinct layers under a few policies and states). */
#define CACHE_PIECES       64
/* pt: space between a piece and the box drawn around it */
#define PIECE_PAD          8.0

/* A laid-out piece: a CsLayout holding geometry only (no strings, no trace). */
typedef struct
{
  char     *key;        /* piece_key() */
  CsLayout *geometry;   /* (owned) nodes' boxes and label centres, edges' béziers, arrows and
                           label centres, clusters' boxes and title centres, bb */
} Piece;

static GMutex pieces_lock;
static GQueue pieces;           /* Piece*, most recently used at the head; under pieces_lock */

static void
geometry_free (CsLayout *g)
{
  for (guint j = 0; j < g->n_edges; j++)
    g_free (g->edges[j].points);
  g_free (g->nodes);
  g_free (g->edges);
  g_free (g->clusters);
  g_free (g->dot);
  g_free (g);
}

static void
piece_free (Piece *p)
{
  g_free (p->key);
  geometry_free (p->geometry);
  g_free (p);
}

/* What dot sees of @sub (see the file comment). */
static char *
piece_key (const CsLayout *sub)
{
  GString *k = g_string_new (NULL);

  g_string_append_printf (k, "%s/%g|", sub->font_family ? sub->font_family : "", sub->font_size_pt);
  for (guint i = 0; i < sub->n_nodes; i++)
    {
      const CsLayoutNode *n = &sub->nodes[i];

      g_string_append_printf (k, "%d:%.2fx%.2f:%d;", n->kind, n->box.x1 - n->box.x0,
                              n->box.y1 - n->box.y0, n->cluster);
    }
  g_string_append_c (k, '|');
  for (guint j = 0; j < sub->n_edges; j++)
    {
      const CsLayoutEdge *e = &sub->edges[j];

      g_string_append_printf (k, "%u>%u:%s;", e->tail, e->head, e->label ? e->label : "");
    }
  g_string_append_c (k, '|');
  for (guint c = 0; c < sub->n_clusters; c++)
    {
      const CsLayoutCluster *cl = &sub->clusters[c];

      g_string_append_printf (k, "%d:%d:%s\n%s;", cl->parent, cl->kind, cl->title ? cl->title : "",
                              cl->subtitle ? cl->subtitle : "");
    }
  return g_string_free (k, FALSE);
}

/* A copy of @sub's geometry (no strings): what the cache keeps. */
static CsLayout *
geometry_copy (const CsLayout *sub)
{
  CsLayout *g = g_new0 (CsLayout, 1);

  g->ref_count = 1;
  g->n_nodes = sub->n_nodes;
  g->nodes = g_new0 (CsLayoutNode, sub->n_nodes);
  for (guint i = 0; i < sub->n_nodes; i++)
    {
      g->nodes[i].box = sub->nodes[i].box;
      g->nodes[i].label_pos = sub->nodes[i].label_pos;
    }
  g->n_edges = sub->n_edges;
  g->edges = g_new0 (CsLayoutEdge, sub->n_edges);
  for (guint j = 0; j < sub->n_edges; j++)
    {
      const CsLayoutEdge *e = &sub->edges[j];

      g->edges[j].n_points = e->n_points;
      g->edges[j].points = e->n_points ? g_memdup2 (e->points, e->n_points * sizeof (CsPoint)) : NULL;
      g->edges[j].has_arrow = e->has_arrow;
      g->edges[j].arrow_tip = e->arrow_tip;
      g->edges[j].has_label_pos = e->has_label_pos;
      g->edges[j].label_pos = e->label_pos;
    }
  g->n_clusters = sub->n_clusters;
  g->clusters = g_new0 (CsLayoutCluster, sub->n_clusters);
  for (guint c = 0; c < sub->n_clusters; c++)
    {
      g->clusters[c].box = sub->clusters[c].box;
      g->clusters[c].title_pos = sub->clusters[c].title_pos;
    }
  g->bb = sub->bb;
  g->layered = sub->layered;
  return g;
}

/* The piece laid out before with @key (moved to the head), or NULL. */
static CsLayout *
pieces_lookup (const char *key)
{
  CsLayout *found = NULL;

  g_mutex_lock (&pieces_lock);
  for (GList *l = pieces.head; l != NULL; l = l->next)
    if (strcmp (((Piece *) l->data)->key, key) == 0)
      {
        g_queue_unlink (&pieces, l);
        g_queue_push_head_link (&pieces, l);
        found = geometry_copy (((Piece *) l->data)->geometry);
        break;
      }
  g_mutex_unlock (&pieces_lock);
  return found;
}

static void
pieces_insert (char *key, CsLayout *geometry)
{
  Piece *p = g_new0 (Piece, 1);

  p->key = key;
  p->geometry = geometry;
  g_mutex_lock (&pieces_lock);
  g_queue_push_head (&pieces, p);
  while (pieces.length > CACHE_PIECES)
    piece_free (g_queue_pop_tail (&pieces));
  g_mutex_unlock (&pieces_lock);
}

/**
 * _cs_layout_pieces_clear:
 *
 * Forgets every piece laid out (tests: the next composed layout lays every piece out).
 */
void
_cs_layout_pieces_clear (void)
{
  g_mutex_lock (&pieces_lock);
  g_queue_clear_full (&pieces, (GDestroyNotify) piece_free);
  g_mutex_unlock (&pieces_lock);
}

/* A layout to hand to dot that borrows @l's trace name and fonts; nodes, edges and clusters
 * are shallow copies (their strings belong to @l): free with sub_free(). */
static CsLayout *
sub_new (const CsLayout *l, guint n_nodes, guint n_edges, guint n_clusters)
{
  CsLayout *s = g_new0 (CsLayout, 1);

  s->ref_count = 1;
  s->trace = l->trace;
  s->title = l->title;
  s->font_family = l->font_family;
  s->font_size_pt = l->font_size_pt;
  s->max_dot_nodes = l->max_dot_nodes;
  s->nodes = g_new0 (CsLayoutNode, MAX (n_nodes, 1));
  s->edges = g_new0 (CsLayoutEdge, MAX (n_edges, 1));
  s->clusters = g_new0 (CsLayoutCluster, MAX (n_clusters, 1));
  return s;
}

static void
sub_free (CsLayout *s)
{
  for (guint j = 0; j < s->n_edges; j++)
    g_free (s->edges[j].points);
  g_free (s->nodes);
  g_free (s->edges);
  g_free (s->clusters);
  g_free (s->dot);
  g_free (s);
}

/* Lays @sub out: dot up to its max_dot_nodes, else the layered layout. */
static gboolean
sub_run (CsLayout *sub, GCancellable *cancellable, GError **error)
{
  sub->dot = cs_graph_to_dot (sub);
  if (sub->max_dot_nodes == 0 || sub->n_nodes <= sub->max_dot_nodes)
    return cs_layout_run_graphviz (sub, cancellable, error);
  _cs_layout_run_layered (sub);
  sub->layered = TRUE;
  sub->laid_out = TRUE;
  return TRUE;
}

static void
move_point (CsPoint *p, double dx, double dy)
{
  p->x += dx;
  p->y += dy;
}

static void
move_rect (CsRect *r, double dx, double dy)
{
  r->x0 += dx;
  r->x1 += dx;
  r->y0 += dy;
  r->y1 += dy;
}

/* The points of @e, an edge between a piece and the rest (or two pieces), from @pe, its edge
 * in the outer picture: a straight cubic added from the tail's bottom (@tail_box, nullable:
 * the tail is in the outer picture) to where @pe starts on the piece's border, and from where
 * @pe ends to the head's top (@head_box, nullable likewise), with the arrow there. */
static void
splice_edge (CsLayoutEdge *e, const CsLayoutEdge *pe, const CsRect *tail_box, const CsRect *head_box)
{
  GArray *pts = g_array_new (FALSE, FALSE, sizeof (CsPoint));

  if (pe->n_points > 0)
    g_array_append_vals (pts, pe->points, pe->n_points);
  else
    {
      /* dot gave no spline: a straight line between the two boxes' centres */
      CsPoint a = { 0, 0 }, b = { 0, 0 };

      g_array_append_val (pts, a);
      g_array_append_val (pts, a);
      g_array_append_val (pts, b);
      g_array_append_val (pts, b);
    }
  e->has_arrow = pe->has_arrow;
  e->arrow_tip = pe->arrow_tip;
  if (tail_box != NULL)
    {
      CsPoint s = { (tail_box->x0 + tail_box->x1) / 2, tail_box->y0 };
      CsPoint p0 = g_array_index (pts, CsPoint, 0);
      CsPoint seg[3] = { s, { s.x + (p0.x - s.x) / 3, s.y + (p0.y - s.y) / 3 },
                         { s.x + 2 * (p0.x - s.x) / 3, s.y + 2 * (p0.y - s.y) / 3 } };

      g_array_prepend_vals (pts, seg, 3);
    }
  if (head_box != NULL)
    {
      CsPoint q = { (head_box->x0 + head_box->x1) / 2, head_box->y1 };
      CsPoint q1 = { q.x, q.y + 5 };
      CsPoint pn = e->has_arrow ? e->arrow_tip : g_array_index (pts, CsPoint, pts->len - 1);
      CsPoint seg[3] = { { pn.x + (q1.x - pn.x) / 3, pn.y + (q1.y - pn.y) / 3 },
                         { pn.x + 2 * (q1.x - pn.x) / 3, pn.y + 2 * (q1.y - pn.y) / 3 }, q1 };

      if (e->has_arrow)
        {
          /* the parent's spline ends short of its arrow tip on the border: join the tip */
          CsPoint a = g_array_index (pts, CsPoint, pts->len - 1);
          CsPoint join[3] = { { a.x + (pn.x - a.x) / 3, a.y + (pn.y - a.y) / 3 },
                              { a.x + 2 * (pn.x - a.x) / 3, a.y + 2 * (pn.y - a.y) / 3 }, pn };

          g_array_append_vals (pts, join, 3);
        }
      g_array_append_vals (pts, seg, 3);
      e->has_arrow = TRUE;
      e->arrow_tip = q;
    }
  g_free (e->points);
  e->n_points = pts->len;
  e->points = (CsPoint *) g_array_free (pts, FALSE);
  e->has_label_pos = pe->has_label_pos;
  e->label_pos = pe->label_pos;
}

/**
 * _cs_layout_run_composed:
 * @layout: a display list from cs_graph_build()
 * @cancellable: (nullable): checked between pieces
 * @error: return location for a #CS_RENDER_ERROR or G_IO_ERROR_CANCELLED
 * @ran: (out): TRUE when @layout was composed (the result is then the return value); FALSE
 *   when it has no large expanded group, or a piece would exceed dot's limit where the whole
 *   would not: lay it out whole
 *
 * Lays @layout out in pieces.  Each top-level expanded group box (CS_LAYOUT_CLUSTER_GROUP)
 * with at least COMPOSE_MIN_NODES nodes is laid out on its own (dot up to max_dot_nodes
 * nodes, else castscope's layered layout), or taken from the piece cache when a piece with
 * the same key was laid out before (a repeated layer, a state seen before); then the picture
 * around them with one node of each piece's size (plus its title) in its place; then the
 * pieces are moved into those places.  Edges between a piece and the rest follow the outer
 * layout to the piece's border and a straight line to the node inside.  Sets
 * @layout->composed, ->composed_reused, ->layered (some piece used the layered layout) and
 * ->layout_ms.
 * Returns: TRUE on success (when @ran)
 */
gboolean
_cs_layout_run_composed (CsLayout *layout, GCancellable *cancellable, GError **error,
                         gboolean *ran)
{
  g_autofree gint *top = NULL;        /* per cluster: its top-level ancestor */
  g_autofree gint *piece_of = NULL;   /* per top-level cluster: piece index, -1 = none */
  g_autofree gint *owner = NULL;      /* per node: piece index, -1 = outer picture */
  g_autofree guint *members = NULL;   /* per cluster: nodes inside, every level */
  g_autoptr(GArray) piece_cluster = g_array_new (FALSE, FALSE, sizeof (guint));
  CsLayout **subs = NULL;
  CsLayout *outer = NULL;
  g_autofree gint *sub_index = NULL;  /* per node: its index in its piece or the outer picture */
  g_autofree gint *csub_index = NULL; /* per cluster: its index in its piece or the outer one */
  g_autofree gint *outer_edge = NULL; /* per edge: its index in the outer picture (>= 0), or
                                         -1 - its index in its piece */
  guint n_pieces, n_outer_nodes = 0, max_dot;
  gint64 t0 = g_get_monotonic_time ();
  gboolean ok = FALSE, too_big = FALSE;

  *ran = FALSE;
  if (layout->n_clusters == 0 || layout->n_nodes == 0)
    return FALSE;
  max_dot = layout->max_dot_nodes ? layout->max_dot_nodes : G_MAXUINT;
  top = g_new (gint, layout->n_clusters);
  members = g_new0 (guint, layout->n_clusters);
  for (guint c = 0; c < layout->n_clusters; c++)
    {
      gint t = (gint) c;

      while (layout->clusters[t].parent >= 0)
        t = layout->clusters[t].parent;
      top[c] = t;
    }
  for (guint i = 0; i < layout->n_nodes; i++)
    if (layout->nodes[i].cluster >= 0)
      members[top[layout->nodes[i].cluster]]++;
  piece_of = g_new (gint, layout->n_clusters);
  for (guint c = 0; c < layout->n_clusters; c++)
    {
      piece_of[c] = -1;
      if (layout->clusters[c].parent < 0 && layout->clusters[c].kind == CS_LAYOUT_CLUSTER_GROUP
          && members[c] >= COMPOSE_MIN_NODES)
        {
          piece_of[c] = (gint) piece_cluster->len;
          g_array_append_val (piece_cluster, c);
          too_big |= members[c] > max_dot;
        }
    }
  n_pieces = piece_cluster->len;
  if (n_pieces == 0)
    return FALSE;
  owner = g_new (gint, layout->n_nodes);
  for (guint i = 0; i < layout->n_nodes; i++)
    {
      gint c = layout->nodes[i].cluster;

      owner[i] = c >= 0 ? piece_of[top[c]] : -1;
      n_outer_nodes += owner[i] < 0;
    }
  /* an input read inside one piece only (a layer's weights) is laid out with that piece */
  {
    g_autofree gint *reader = g_new (gint, layout->n_nodes);   /* -1 none, -2 several / outside */

    for (guint i = 0; i < layout->n_nodes; i++)
      reader[i] = -1;
    for (guint j = 0; j < layout->n_edges; j++)
      {
        guint t = layout->edges[j].tail, h = layout->edges[j].head;

        if (reader[h] != -2 && owner[h] < 0)
          reader[h] = -2;   /* something writes it: not an input of the trace */
        if (reader[t] == -1)
          reader[t] = owner[h] >= 0 ? owner[h] : -2;
        else if (reader[t] != owner[h])
          reader[t] = -2;
      }
    for (guint i = 0; i < layout->n_nodes; i++)
      if (owner[i] < 0 && reader[i] >= 0
          && (layout->nodes[i].kind == CS_LAYOUT_NODE_INPUT || layout->nodes[i].kind == CS_LAYOUT_NODE_REF))
        {
          owner[i] = reader[i];
          n_outer_nodes--;
        }
  }
  /* composing only helps where every piece fits dot, or where the whole would use dot anyway */
  if (layout->n_nodes > max_dot && (too_big || n_outer_nodes + n_pieces > max_dot))
    return FALSE;
  *ran = TRUE;

  /* the pieces */
  subs = g_new0 (CsLayout *, n_pieces);
  sub_index = g_new (gint, layout->n_nodes);
  csub_index = g_new (gint, layout->n_clusters);
  {
    g_autofree guint *nn = g_new0 (guint, n_pieces + 1);  /* last: the outer picture */
    g_autofree guint *ne = g_new0 (guint, n_pieces + 1);
    g_autofree guint *nc = g_new0 (guint, n_pieces + 1);

    for (guint i = 0; i < layout->n_nodes; i++)
      sub_index[i] = (gint) nn[owner[i] < 0 ? n_pieces : (guint) owner[i]]++;
    for (guint c = 0; c < layout->n_clusters; c++)
      {
        gint p = piece_of[top[c]];

        csub_index[c] = -1;
        if (p >= 0 && (gint) c != (gint) g_array_index (piece_cluster, guint, p))
          csub_index[c] = (gint) nc[p]++;
        else if (p < 0)
          csub_index[c] = (gint) nc[n_pieces]++;
      }
    for (guint j = 0; j < layout->n_edges; j++)
      {
        gint a = owner[layout->edges[j].tail], b = owner[layout->edges[j].head];

        if (a >= 0 && a == b)
          ne[a]++;
        else
          ne[n_pieces]++;
      }
    for (guint p = 0; p < n_pieces; p++)
      subs[p] = sub_new (layout, nn[p], ne[p], nc[p]);
    outer = sub_new (layout, nn[n_pieces] + n_pieces, ne[n_pieces], nc[n_pieces]);
  }
  for (guint i = 0; i < layout->n_nodes; i++)
    {
      CsLayout *s = owner[i] < 0 ? outer : subs[owner[i]];
      CsLayoutNode *n = &s->nodes[s->n_nodes++];
      gint c = layout->nodes[i].cluster;

      *n = layout->nodes[i];
      n->cluster = c < 0 ? -1 : csub_index[c];
    }
  for (guint c = 0; c < layout->n_clusters; c++)
    {
      gint p = piece_of[top[c]];
      CsLayout *s;
      CsLayoutCluster *cl;
      gint parent = layout->clusters[c].parent;

      if (csub_index[c] < 0)
        continue;
      s = p < 0 ? outer : subs[p];
      cl = &s->clusters[s->n_clusters++];
      *cl = layout->clusters[c];
      cl->parent = parent < 0 || csub_index[parent] < 0 ? -1 : csub_index[parent];
    }
  /* the edges inside each piece (outer_edge: -1 - their index there) */
  outer_edge = g_new (gint, layout->n_edges);
  for (guint j = 0; j < layout->n_edges; j++)
    {
      const CsLayoutEdge *e = &layout->edges[j];
      gint a = owner[e->tail], b = owner[e->head];
      CsLayoutEdge *se;

      outer_edge[j] = G_MAXINT;
      if (a < 0 || a != b)
        continue;
      se = &subs[a]->edges[subs[a]->n_edges];
      *se = *e;
      se->points = NULL;
      se->n_points = 0;
      se->tail = (guint) sub_index[e->tail];
      se->head = (guint) sub_index[e->head];
      outer_edge[j] = -1 - (gint) subs[a]->n_edges++;
    }

  /* the pieces, laid out or found */
  for (guint p = 0; p < n_pieces; p++)
    {
      CsLayout *sub = subs[p];
      g_autofree char *key = piece_key (sub);
      CsLayout *geometry;

      if (g_cancellable_set_error_if_cancelled (cancellable, error))
        goto out;
      if ((geometry = pieces_lookup (key)) != NULL)
        layout->composed_reused++;
      else
        {
          if (!sub_run (sub, cancellable, error))
            goto out;
          geometry = geometry_copy (sub);
          pieces_insert (g_strdup (key), geometry_copy (sub));
        }
      /* the piece's geometry into its shallow copy (the cached one may come from another
       * group with the same key) */
      for (guint i = 0; i < sub->n_nodes; i++)
        {
          sub->nodes[i].box = geometry->nodes[i].box;
          sub->nodes[i].label_pos = geometry->nodes[i].label_pos;
        }
      for (guint j = 0; j < sub->n_edges; j++)
        {
          CsLayoutEdge *e = &sub->edges[j];

          g_free (e->points);
          e->points = geometry->edges[j].points;
          e->n_points = geometry->edges[j].n_points;
          geometry->edges[j].points = NULL;
          e->has_arrow = geometry->edges[j].has_arrow;
          e->arrow_tip = geometry->edges[j].arrow_tip;
          e->has_label_pos = geometry->edges[j].has_label_pos;
          e->label_pos = geometry->edges[j].label_pos;
        }
      for (guint c = 0; c < sub->n_clusters; c++)
        {
          sub->clusters[c].box = geometry->clusters[c].box;
          sub->clusters[c].title_pos = geometry->clusters[c].title_pos;
        }
      sub->bb = geometry->bb;
      sub->layered = geometry->layered;
      layout->layered |= geometry->layered;
      geometry_free (geometry);
    }

  /* the picture around them: one node per piece, the size of the piece and its title */
  for (guint p = 0; p < n_pieces; p++)
    {
      const CsLayoutCluster *cl = &layout->clusters[g_array_index (piece_cluster, guint, p)];
      CsLayoutNode *n = &outer->nodes[outer->n_nodes++];
      guint lines = 1 + (cl->subtitle != NULL);
      double title_h = lines * (layout->font_size_pt > 0 ? layout->font_size_pt : 10.0) * 1.4 + 4;

      memset (n, 0, sizeof *n);
      n->kind = CS_LAYOUT_NODE_GROUP;
      n->label = (char *) "";
      n->cluster = -1;
      n->target = -1;
      n->group = cl->group;
      n->box = (CsRect) { 0, 0, subs[p]->bb.x1 - subs[p]->bb.x0 + 2 * PIECE_PAD,
                          subs[p]->bb.y1 - subs[p]->bb.y0 + 2 * PIECE_PAD + title_h };
    }
  for (guint j = 0; j < layout->n_edges; j++)
    {
      const CsLayoutEdge *e = &layout->edges[j];
      gint a = owner[e->tail], b = owner[e->head];
      CsLayoutEdge *se;

      if (outer_edge[j] < 0)
        continue;
      se = &outer->edges[outer->n_edges];
      *se = *e;
      se->points = NULL;
      se->n_points = 0;
      se->tail = a >= 0 ? n_outer_nodes + (guint) a : (guint) sub_index[e->tail];
      se->head = b >= 0 ? n_outer_nodes + (guint) b : (guint) sub_index[e->head];
      outer_edge[j] = (gint) outer->n_edges++;
    }
  if (g_cancellable_set_error_if_cancelled (cancellable, error) || !sub_run (outer, cancellable, error))
    goto out;
  layout->layered |= outer->layered;

  /* put together */
  layout->bb = outer->bb;
  for (guint i = 0; i < layout->n_nodes; i++)
    if (owner[i] < 0)
      {
        layout->nodes[i].box = outer->nodes[sub_index[i]].box;
        layout->nodes[i].label_pos = outer->nodes[sub_index[i]].label_pos;
      }
  for (guint c = 0; c < layout->n_clusters; c++)
    if (piece_of[top[c]] < 0)
      {
        layout->clusters[c].box = outer->clusters[csub_index[c]].box;
        layout->clusters[c].title_pos = outer->clusters[csub_index[c]].title_pos;
      }
  for (guint p = 0; p < n_pieces; p++)
    {
      guint pc = g_array_index (piece_cluster, guint, p);
      const CsRect *pb = &outer->nodes[n_outer_nodes + p].box;
      double dx = pb->x0 + PIECE_PAD - subs[p]->bb.x0, dy = pb->y0 + PIECE_PAD - subs[p]->bb.y0;
      double title_h = (pb->y1 - pb->y0) - (subs[p]->bb.y1 - subs[p]->bb.y0) - 2 * PIECE_PAD;

      layout->clusters[pc].box = *pb;
      layout->clusters[pc].title_pos = (CsPoint) { (pb->x0 + pb->x1) / 2, pb->y1 - PIECE_PAD / 2 - title_h / 2 };
      for (guint i = 0; i < layout->n_nodes; i++)
        if (owner[i] == (gint) p)
          {
            CsLayoutNode *n = &layout->nodes[i];

            n->box = subs[p]->nodes[sub_index[i]].box;
            n->label_pos = subs[p]->nodes[sub_index[i]].label_pos;
            move_rect (&n->box, dx, dy);
            move_point (&n->label_pos, dx, dy);
          }
      for (guint c = 0; c < layout->n_clusters; c++)
        if (piece_of[top[c]] == (gint) p && c != pc)
          {
            CsLayoutCluster *cl = &layout->clusters[c];

            cl->box = subs[p]->clusters[csub_index[c]].box;
            cl->title_pos = subs[p]->clusters[csub_index[c]].title_pos;
            move_rect (&cl->box, dx, dy);
            move_point (&cl->title_pos, dx, dy);
          }
      for (guint j = 0; j < layout->n_edges; j++)
        if (outer_edge[j] < 0 && owner[layout->edges[j].tail] == (gint) p)
          {
            CsLayoutEdge *e = &layout->edges[j];
            CsLayoutEdge *se = &subs[p]->edges[-1 - outer_edge[j]];

            g_free (e->points);
            e->n_points = se->n_points;
            e->points = se->points;
            se->points = NULL;
            se->n_points = 0;
            for (guint k = 0; k < e->n_points; k++)
              move_point (&e->points[k], dx, dy);
            e->has_arrow = se->has_arrow;
            e->arrow_tip = se->arrow_tip;
            move_point (&e->arrow_tip, dx, dy);
            e->has_label_pos = se->has_label_pos;
            e->label_pos = se->label_pos;
            move_point (&e->label_pos, dx, dy);
          }
    }
  for (guint j = 0; j < layout->n_edges; j++)
    if (outer_edge[j] >= 0)
      {
        CsLayoutEdge *e = &layout->edges[j];
        const CsLayoutEdge *oe = &outer->edges[outer_edge[j]];

        splice_edge (e, oe, owner[e->tail] >= 0 ? &layout->nodes[e->tail].box : NULL,
                     owner[e->head] >= 0 ? &layout->nodes[e->head].box : NULL);
      }
  layout->composed = n_pieces;
  layout->laid_out = TRUE;
  ok = TRUE;
  {
    /* say how the picture was laid out (the side panel and exports show the notes) */
    GString *what = g_string_new (NULL);
    guint n = 0;

    while (layout->notes != NULL && layout->notes[n] != NULL)
      n++;
    for (guint p = 0; p < n_pieces; p++)
      {
        const CsLayoutCluster *cl = &layout->clusters[g_array_index (piece_cluster, guint, p)];
        const char *name = layout->grouping != NULL && cl->group >= 0
                           && (guint) cl->group < layout->grouping->n_groups
                           ? layout->grouping->groups[cl->group].name : cl->title;

        g_string_append_printf (what, "%s%s (%u nodes)", p ? ", " : "", name ? name : "?",
                                subs[p]->n_nodes);
      }
    layout->notes = g_renew (char *, layout->notes, n + 2);
    layout->notes[n] = g_strdup_printf (
      "Laid out in pieces: %s on %s own with Graphviz dot%s, then the picture around %s; "
      "%u of the %u reused from layouts made before (the same structure: a repeated layer, or "
      "a state seen before).", what->str, n_pieces == 1 ? "its" : "their",
      outer->layered || layout->layered ? " (castscope's layered layout above the dot limit)" : "",
      n_pieces == 1 ? "it" : "them", layout->composed_reused, n_pieces);
    layout->notes[n + 1] = NULL;
    g_string_free (what, TRUE);
  }
  /* a picture too large for one dot run said the layered layout drew it: not so now */
  for (guint k = 0; layout->n_nodes > max_dot && layout->notes != NULL && layout->notes[k]; k++)
    if (strstr (layout->notes[k], "layered layout drew them") != NULL)
      {
        g_free (layout->notes[k]);
        layout->notes[k] = g_strdup_printf (
          "%u nodes: more than the %u Graphviz dot lays out in about a second, so each of the "
          "%u expanded groups was laid out on its own with dot (%u of them reused) and the "
          "picture around them apart, then put together.", layout->n_nodes, max_dot, n_pieces,
          layout->composed_reused);
      }

out:
  for (guint p = 0; p < n_pieces; p++)
    if (subs[p] != NULL)
      sub_free (subs[p]);
  g_free (subs);
  if (outer != NULL)
    sub_free (outer);
  layout->layout_ms = (g_get_monotonic_time () - t0) / 1000.0;
  return ok;
}
