/* cs-graph-view.c: CsGraphView, the graph canvas (see cs-graph-view.h).
 *
 * Sysprof's flame graph is the model (sysprof-flame-graph.c): a GtkWidget with a snapshot
 * vfunc, a hit-test structure shared by click, motion and tooltip, and event controllers.
 * Here the display list and the hit testing come from render/ (CsLayout, cs_layout_hit_test),
 * the pixels from render/'s cairo painter (cs_draw_layout) under a CsView (pan, zoom).  Layout
 * runs on render/'s Graphviz worker (cs_layout_new_async); the GTK thread never waits on it.
 */
#include "cs-config.h"

#include "cs-graph-view.h"

#include <math.h>
#include <string.h>

#include "cs-ops.h"
#include "cs-render.h"

#define MIN_SCALE 0.02   /* px per pt */
#define MAX_SCALE 8.0    /* px per pt */
#define FIT_MARGIN_PX 24.0
#define MIN_READABLE_SCALE 0.75 /* px per pt: below this, labels (10 pt) are under 7.5 px */

/* Where the element the view is anchored on was on screen before a new layout, and what it is,
 * so that it can be found in the new layout (same trace: by id; another pass or policy: by
 * group name, or its statement in @trace found again by find_stmt_like()). */
/* Finished layouts each view keeps (render/cs-layout-cache.h): the expand / collapse states
 * and passes seen last. */
#define VIEW_CACHE_LAYOUTS 12
/* The "Laying out…" note over the old picture shows after this long, redrawn this often. */
#define BUSY_NOTE_US       300000
#define BUSY_TICK_MS       250

typedef struct
{
  gboolean  valid;         /* an anchor was recorded: the fields below are set */
  gboolean  selection;     /* the anchor is the selected element */
  guint32   stmt_id;       /* its id in the old layout (a statement or a group id) */
  char     *group;         /* (nullable) name of its group, or of the group it lies in */
  guint32   origin;        /* its statement's origin (initial-trace id), 0 = none */
  const char *op;          /* its statement's op, short name (static op-table string) */
  CsTrace  *trace;         /* (owned) the trace it was found in */
  double    px, py;        /* widget px of its centre (cs_layout_element_center) */
} Anchor;

struct _CsGraphView
{
  GtkWidget        parent_instance;

  CsTrace         *trace;         /* (nullable, owned ref) the trace drawn */
  CsTrace         *diff_base;     /* (nullable, owned ref) older trace the diff compares with */
  CsLayout        *layout;        /* (nullable, owned ref) display list of @trace once laid out */
  CsLayoutDiffStats diff_stats;   /* marks found against @diff_base */
  CsLayoutDiffSource *diff;       /* (nullable, owned ref) core's diff of @trace against
                                     @diff_base (made once, on the layout worker as a rule),
                                     kept while only the layout changes (expand, collapse) */
  guint64          user_casts_serial; /* serial of @user_casts (CsLayout.user_casts_serial) */
  CsRenderOptions  options;       /* detail and per-statement expansion */
  GCancellable    *cancellable;   /* the layout in flight */
  gboolean         busy;          /* a layout is in flight */
  gint64           busy_since;    /* monotonic µs when the layout in flight started */
  guint            busy_tick;     /* source redrawing the "Laying out…" progress, 0 = none */
  char            *error;         /* (nullable) layout error shown in place of the graph */
  char            *placeholder;   /* (nullable) text shown when there is no trace */

  CsView           view;          /* pan / zoom */
  gboolean         need_fit;      /* fit on the next allocation */
  gboolean         fit_whole;     /* that fit shows the whole graph even when unreadable */
  double           drag_tx;       /* px: view.tx at drag begin */
  double           drag_ty;       /* px: view.ty at drag begin */
  gboolean         clear_pending; /* a press on empty space: clear the selection on release,
                                   * unless the pointer moved past the drag threshold (a pan) */
  double           pointer_x;     /* px: last pointer position (zoom centre) */
  double           pointer_y;     /* px: with pointer_x */
  double           pinch_scale;   /* view.scale at pinch begin */

  guint32          selected;      /* top-level CsStmt.id, 0 = none */
  GHashTable      *values;        /* (nullable, owned ref) stmt id -> double* (run overlay) */
  GHashTable      *edge_values;   /* (nullable, owned ref) proxy name -> double* */
  char            *values_title;  /* scale title ("region time (ms)") */
  gboolean         hide_legend;   /* the side panel's dtype legend is hidden (View > Legend) */
  gboolean         precision_lens;/* draw the precision lens (View > Precision Lens) */
  gboolean         diff_older;    /* the drawn trace is the older side of the diff (the left of a
                                     side-by-side compare): its casts missing from @diff_base
                                     are REMOVED, its regions that split SPLIT */
  GPtrArray       *user_casts;    /* (nullable, owned ref) CsRemovedCast*: casts the user wrote
                                     that a pass removed, marked on every layout */
  GPtrArray       *user_casts_keep; /* (nullable, owned ref) CsTrace*: what @user_casts
                                     borrows from (kept alive for the layout worker) */
  gboolean         keep_view;     /* the next layout keeps the anchor in place (no fit) */
  Anchor           anchor;        /* see Anchor */
  guint32          pending_center;/* stmt id to scroll to once laid out (Find's reveal), 0 */
  GHashTable      *found;         /* (nullable, owned) stmt ids matching Find (halo) */
  cairo_surface_t *minimap;       /* (nullable) cached minimap picture of @minimap_layout */
  CsLayout        *minimap_layout;/* (unowned, compared only) the layout it shows */
  CsView           minimap_view;  /* the minimap's transform */
  int              minimap_w;     /* px: size it was drawn for */
  int              minimap_h;     /* px: with minimap_w */
};

G_DEFINE_FINAL_TYPE (CsGraphView, cs_graph_view, GTK_TYPE_WIDGET)

enum
{
  PROP_0,
  PROP_BUSY,
  PROP_ZOOM,
  N_PROPS
};

enum
{
  NODE_SELECTED,
  LAYOUT_CHANGED,
  VIEW_CHANGED,
  N_SIGNALS
};

static GParamSpec *properties[N_PROPS];
static guint signals[N_SIGNALS];

static void start_layout_full (CsGraphView *self, gboolean keep);
static void set_selected (CsGraphView *self, guint32 stmt_id, gboolean emit);
static gboolean set_user_casts (CsGraphView *self, GPtrArray *removed, GPtrArray *keep);
#define start_layout(self) start_layout_full ((self), TRUE)

/* ------------------------------------------------------------------------------------------ */
/* Overlays applied to the layout (owner thread only)                                         */

static void
apply_selection (CsGraphView *self)
{
  CsLayoutHit hit = { CS_LAYOUT_HIT_NONE, 0 };
  gint i;

  if (self->layout == NULL)
    return;
  (void) i;
  if (self->selected != 0)
    cs_layout_find_element (self->layout, self->selected, &hit);
  cs_layout_set_selection (self->layout, hit.kind == CS_LAYOUT_HIT_NONE ? NULL : &hit);
  cs_layout_set_found (self->layout, self->found);
}

/* Serials of the user-cast lists a view marks with (CsLayout.user_casts_serial). */
static guint64 overlay_serial;

/* The diff source for the trace drawn against @diff_base (made when either changed), or NULL
 * when no diff is shown. */
static CsLayoutDiffSource *
current_diff (CsGraphView *self)
{
  if (self->trace == NULL || self->diff_base == NULL || self->diff_base == self->trace)
    {
      g_clear_pointer (&self->diff, cs_layout_diff_source_unref);
      return NULL;
    }
  if (!cs_layout_diff_source_matches (self->diff, self->trace, self->diff_base, !self->diff_older))
    {
      g_clear_pointer (&self->diff, cs_layout_diff_source_unref);
      self->diff = cs_layout_diff_source_new (self->trace, self->diff_base, !self->diff_older);
    }
  return self->diff;
}

static void
apply_diff (CsGraphView *self)
{
  CsLayoutDiffSource *src;

  memset (&self->diff_stats, 0, sizeof self->diff_stats);
  if (self->layout == NULL)
    return;
  if (self->layout->trace == self->trace && (src = current_diff (self)) != NULL)
    {
      guint64 serial = cs_layout_diff_source_serial (src);

      /* marked on the layout worker, or a layout kept in the cache and marked before */
      if (self->layout->diff_serial == serial)
        {
          self->diff_stats = self->layout->diff_marked;
          return;
        }
      cs_layout_mark_diff_source (self->layout, src, &self->diff_stats);
    }
  else
    cs_layout_clear_marks (self->layout);
}

static void
apply_lens (CsGraphView *self)
{
  if (self->layout == NULL)
    return;
  cs_layout_set_precision_lens (self->layout, self->precision_lens);
  if (self->layout->user_casts_serial == self->user_casts_serial && self->user_casts_serial != 0)
    return;
  cs_layout_mark_user_casts (self->layout, self->user_casts);
  self->layout->user_casts_serial = self->user_casts_serial;
}

static void
apply_values (CsGraphView *self)
{
  GHashTableIter iter;
  gpointer key, value;
  double lo = G_MAXDOUBLE, hi = -G_MAXDOUBLE, lo_pos = G_MAXDOUBLE;
  gboolean any = FALSE;

  if (self->layout == NULL)
    return;
  cs_layout_clear_values (self->layout);
  if (self->values == NULL && self->edge_values == NULL)
    return;
#define TAKE(v) \
  do { if (isfinite (v)) { lo = MIN (lo, v); hi = MAX (hi, v); if ((v) > 0) lo_pos = MIN (lo_pos, v); any = TRUE; } } while (0)
  if (self->values != NULL)
    {
      g_hash_table_iter_init (&iter, self->values);
      while (g_hash_table_iter_next (&iter, &key, &value))
        {
          double v = *(double *) value;

          if (cs_layout_set_stmt_value (self->layout, GPOINTER_TO_UINT (key), v) > 0)
            TAKE (v);
        }
    }
  if (self->edge_values != NULL)
    {
      g_hash_table_iter_init (&iter, self->edge_values);
      while (g_hash_table_iter_next (&iter, &key, &value))
        {
          double v = *(double *) value;

          /* per tensor: its edges (heat under the dtype line) and its output node */
          if (cs_layout_set_tensor_value (self->layout, key, v) > 0)
            TAKE (v);
        }
    }
#undef TAKE
  if (!any)
    {
      lo = 0;
      hi = 1;
    }
  /* Errors and times are magnitudes: a scale from 0 so that small reads as small, or a log
   * scale when the positive values span two decades or more (errors usually do). */
  if (hi > 0 && lo_pos < G_MAXDOUBLE && hi / lo_pos >= 100)
    cs_layout_set_value_scale_log (self->layout,
                                   self->values_title ? self->values_title : "value", lo_pos, hi);
  else
    cs_layout_set_value_scale (self->layout, self->values_title ? self->values_title : "value",
                               MIN (lo, 0), hi > MIN (lo, 0) ? hi : MIN (lo, 0) + 1e-30);
}

/* ------------------------------------------------------------------------------------------ */
/* Anchoring the view across layouts                                                          */

static void
anchor_clear (Anchor *a)
{
  g_clear_pointer (&a->group, g_free);
  g_clear_pointer (&a->trace, cs_trace_unref);
  memset (a, 0, sizeof *a);
}

/* The statement with id @id at any level of @trace, or NULL. */
static const CsStmt *
find_stmt_deep (const CsStmt *const *stmts, guint n, guint32 id)
{
  for (guint i = 0; i < n; i++)
    {
      const CsStmt *s = stmts[i], *r;

      if (s->id == id)
        return s;
      if (s->n_subs > 0 && (r = find_stmt_deep ((const CsStmt *const *) s->subs, s->n_subs, id)) != NULL)
        return r;
    }
  return NULL;
}

static const CsStmt *
trace_find_stmt (const CsTrace *trace, guint32 id)
{
  if (trace == NULL || id == 0 || CS_LAYOUT_IS_GROUP_ID (id))
    return NULL;
  return find_stmt_deep ((const CsStmt *const *) trace->stmts, trace->n_stmts, id);
}

/* The element the view is anchored on: the selection when it is drawn, else the node
 * nearest the middle of the widget. */
static gboolean
anchor_pick (CsGraphView *self, CsLayoutHit *hit, gboolean *is_selection)
{
  const CsLayout *l = self->layout;
  double w = gtk_widget_get_width (GTK_WIDGET (self)), h = gtk_widget_get_height (GTK_WIDGET (self));
  double cx, cy, best = G_MAXDOUBLE;
  gint best_i = -1;

  *is_selection = FALSE;
  if (self->selected != 0 && cs_layout_find_element (l, self->selected, hit))
    {
      *is_selection = TRUE;
      return TRUE;
    }
  cs_view_to_pt (&self->view, l, w / 2, h / 2, &cx, &cy);
  for (guint i = 0; i < l->n_nodes; i++)
    {
      const CsLayoutNode *n = &l->nodes[i];
      double x = (n->box.x0 + n->box.x1) / 2 - cx, y = (n->box.y0 + n->box.y1) / 2 - cy;

      if (n->stmt_id == 0 || n->kind == CS_LAYOUT_NODE_GHOST)
        continue;
      if (x * x + y * y < best)
        {
          best = x * x + y * y;
          best_i = (gint) i;
        }
    }
  if (best_i < 0)
    return FALSE;
  *hit = (CsLayoutHit) { CS_LAYOUT_HIT_NODE, (guint) best_i };
  return TRUE;
}

static void
anchor_capture (CsGraphView *self)
{
  const CsLayout *l = self->layout;
  CsLayoutHit hit;
  CsPoint c;
  gint g = -1;
  guint32 id;
  gboolean sel;

  if (l == NULL || !l->laid_out || self->need_fit)
    return;
  anchor_clear (&self->anchor);
  if (!anchor_pick (self, &hit, &sel))
    return;
  cs_layout_element_center (l, &hit, &c);
  if (hit.kind == CS_LAYOUT_HIT_NODE)
    {
      id = l->nodes[hit.index].stmt_id;
      g = l->nodes[hit.index].group;
    }
  else
    {
      id = l->clusters[hit.index].stmt_id;
      g = l->clusters[hit.index].group;
    }
  /* a selected prim inside a drawn node: the selection itself is what to find again */
  if (sel)
    id = self->selected;
  self->anchor.valid = TRUE;
  self->anchor.selection = sel;
  self->anchor.stmt_id = id;
  self->anchor.trace = l->trace ? cs_trace_ref (l->trace) : NULL;
  if (l->grouping != NULL && g >= 0 && (guint) g < l->grouping->n_groups)
    self->anchor.group = g_strdup (l->grouping->groups[g].name);
  {
    const CsStmt *s = trace_find_stmt (l->trace, id);

    if (s != NULL)
      {
        self->anchor.origin = s->origin;
        self->anchor.op = s->kind == CS_STMT_CALL ? cs_op_semantic (s->op)->short_name : NULL;
      }
  }
  cs_view_to_px (&self->view, l, c.x, c.y, &self->anchor.px, &self->anchor.py);
}

/* TRUE when @p and @like are tensors of the same shape (or both not tensors: rank 0). */
static gboolean
proxy_same_shape (const CsProxy *p, const CsProxy *like)
{
  return p->rank == like->rank
         && (p->rank == 0 || memcmp (p->shape, like->shape, p->rank * sizeof *p->shape) == 0);
}

/* The first output tensor of @s, or NULL. */
static const CsProxy *
first_output (const CsStmt *s)
{
  g_autoptr(GPtrArray) outs = g_ptr_array_new ();

  cs_stmt_collect_outputs (s, outs);
  return outs->len > 0 ? g_ptr_array_index (outs, 0) : NULL;
}

/* The first statement of @trace (any level) with op @op writing a tensor named @like->name of
 * @like's shape, or 0 (tensor names are reused across policies and passes: the name alone may
 * be another op's). */
static guint32
stmt_writing (const CsStmt *const *stmts, guint n, const CsProxy *like, const char *op)
{
  for (guint i = 0; i < n; i++)
    {
      const CsStmt *s = stmts[i];
      guint32 r;

      if (s->kind == CS_STMT_CALL && g_strcmp0 (cs_op_semantic (s->op)->short_name, op) == 0)
        {
          g_autoptr(GPtrArray) outs = g_ptr_array_new ();

          cs_stmt_collect_outputs (s, outs);
          for (guint k = 0; k < outs->len; k++)
            {
              const CsProxy *p = g_ptr_array_index (outs, k);

              if (strcmp (p->name, like->name) == 0 && proxy_same_shape (p, like))
                return s->id;
            }
        }
      if (s->n_subs > 0 && (r = stmt_writing ((const CsStmt *const *) s->subs, s->n_subs, like, op)) != 0)
        return r;
    }
  return 0;
}

/* The first statement (any level) with @origin and, when @op is not NULL, that op and, when
 * @like is not NULL, a first output of @like's shape. */
static guint32
stmt_with_origin (const CsStmt *const *stmts, guint n, guint32 origin, const char *op,
                  const CsProxy *like)
{
  for (guint i = 0; i < n; i++)
    {
      guint32 r;

      if (stmts[i]->kind == CS_STMT_CALL && stmts[i]->origin == origin
          && (op == NULL || g_strcmp0 (cs_op_semantic (stmts[i]->op)->short_name, op) == 0))
        {
          const CsProxy *p = like ? first_output (stmts[i]) : NULL;

          if (like == NULL || (p != NULL && proxy_same_shape (p, like)))
            return stmts[i]->id;
        }
      if (stmts[i]->n_subs > 0
          && (r = stmt_with_origin ((const CsStmt *const *) stmts[i]->subs, stmts[i]->n_subs,
                                    origin, op, like)) != 0)
        return r;
    }
  return 0;
}

/* The statement of @trace that is @s of another trace of the same initial trace (another pass
 * or policy), by what survives re-running the passes: the same op of the same initial-trace
 * statement (origin) writing the same shape, else of any shape; else the same op writing a
 * tensor of the same name and shape; else any statement of the same origin.  Returns: its id,
 * 0 when none. */
static guint32
find_stmt_like (const CsTrace *trace, const CsStmt *s)
{
  const CsStmt *const *stmts = (const CsStmt *const *) trace->stmts;
  const char *op = s->kind == CS_STMT_CALL ? cs_op_semantic (s->op)->short_name : NULL;
  const CsProxy *out = first_output (s);
  guint32 id = 0;

  if (s->origin != 0 && op != NULL)
    {
      if (out != NULL)
        id = stmt_with_origin (stmts, trace->n_stmts, s->origin, op, out);
      if (id == 0)
        id = stmt_with_origin (stmts, trace->n_stmts, s->origin, op, NULL);
    }
  if (id == 0 && out != NULL && op != NULL)
    id = stmt_writing (stmts, trace->n_stmts, out, op);
  if (id == 0 && s->origin != 0)
    id = stmt_with_origin (stmts, trace->n_stmts, s->origin, NULL, NULL);
  return id;
}

/* The group node or cluster of @l named @name or holding it ("layers.3" for
 * "layers.3.attention"). */
static gboolean
find_group_element (const CsLayout *l, const char *name, CsLayoutHit *hit)
{
  gsize best_len = 0;
  gboolean found = FALSE;

  for (guint i = 0; l->grouping != NULL && i < l->n_nodes; i++)
    if (l->nodes[i].kind == CS_LAYOUT_NODE_GROUP)
      {
        const char *gn = l->grouping->groups[l->nodes[i].group].name;
        gsize len = strlen (gn);

        if (g_str_has_prefix (name, gn) && (name[len] == '\0' || name[len] == '.') && len > best_len)
          {
            best_len = len;
            *hit = (CsLayoutHit) { CS_LAYOUT_HIT_NODE, i };
            found = TRUE;
          }
      }
  for (guint c = 0; l->grouping != NULL && c < l->n_clusters; c++)
    if (l->clusters[c].kind == CS_LAYOUT_CLUSTER_GROUP
        && strcmp (l->grouping->groups[l->clusters[c].group].name, name) == 0)
      {
        *hit = (CsLayoutHit) { CS_LAYOUT_HIT_CLUSTER, c };
        return TRUE;
      }
  /* a layer folded into a run of repeats (or a module of one): the run's node */
  if (!found && l->grouping != NULL)
    {
      gint g = cs_grouping_find (l->grouping, name);

      if (g >= 0)
        found = cs_layout_find_element (l, CS_LAYOUT_GROUP_ID (g), hit);
    }
  return found;
}

/* Finds the anchor in the new layout: the same id in the same trace; else the statement that
 * writes the same tensor, the same group, or the same origin. */
static gboolean
anchor_match (CsGraphView *self, CsLayoutHit *hit, guint32 *new_id)
{
  const CsLayout *l = self->layout;
  const Anchor *a = &self->anchor;
  guint32 id = 0;

  if (!a->valid)
    return FALSE;
  if (a->trace == l->trace || (CS_LAYOUT_IS_GROUP_ID (a->stmt_id) && a->group == NULL))
    id = a->stmt_id;
  else if (CS_LAYOUT_IS_GROUP_ID (a->stmt_id))
    {
      if (find_group_element (l, a->group, hit))
        {
          *new_id = hit->kind == CS_LAYOUT_HIT_NODE ? l->nodes[hit->index].stmt_id
                                                    : l->clusters[hit->index].stmt_id;
          return TRUE;
        }
    }
  else if (l->trace != NULL)
    {
      /* the same op of the same initial statement (a policy may rename its output: the
       * upcast matmul writes a new tensor, the cast back takes the old name), else the same
       * op writing the same tensor (name and shape), else the same initial statement */
      const CsStmt *old = trace_find_stmt (a->trace, a->stmt_id);

      if (old != NULL)
        id = find_stmt_like (l->trace, old);
      else if (a->origin != 0)
        id = stmt_with_origin ((const CsStmt *const *) l->trace->stmts, l->trace->n_stmts,
                               a->origin, a->op, NULL);
    }
  if (id != 0 && cs_layout_find_element (l, id, hit))
    {
      *new_id = id;
      return TRUE;
    }
  if (a->group != NULL && find_group_element (l, a->group, hit))
    {
      *new_id = hit->kind == CS_LAYOUT_HIT_NODE ? l->nodes[hit->index].stmt_id
                                                : l->clusters[hit->index].stmt_id;
      return TRUE;
    }
  return FALSE;
}

/* Puts the anchor element where it was on screen, at the same zoom; TRUE when it was found.
 * A selection found again under a new id (another pass or policy) is selected under it. */
static gboolean
anchor_apply (CsGraphView *self)
{
  CsLayoutHit hit;
  CsPoint c;
  guint32 new_id = 0;
  double x, y;

  if (!anchor_match (self, &hit, &new_id))
    return FALSE;
  cs_layout_element_center (self->layout, &hit, &c);
  cs_view_to_px (&self->view, self->layout, c.x, c.y, &x, &y);
  self->view.tx += self->anchor.px - x;
  self->view.ty += self->anchor.py - y;
  {
    /* a graph that fits in the widget at this zoom is kept whole on screen (moved as little
     * as needed) */
    const CsLayout *l = self->layout;
    double w = gtk_widget_get_width (GTK_WIDGET (self)), h = gtk_widget_get_height (GTK_WIDGET (self));
    double bx0, by0, bx1, by1;

    cs_view_to_px (&self->view, l, l->bb.x0, l->bb.y1, &bx0, &by0);
    cs_view_to_px (&self->view, l, l->bb.x1, l->bb.y0, &bx1, &by1);
    if (bx1 - bx0 <= w)
      self->view.tx += bx0 < 0 ? -bx0 : bx1 > w ? w - bx1 : 0;
    if (by1 - by0 <= h)
      self->view.ty += by0 < 0 ? -by0 : by1 > h ? h - by1 : 0;
  }
  if (self->anchor.selection && self->anchor.trace != self->layout->trace && new_id != self->selected)
    {
      self->selected = new_id;
      apply_selection (self);
      g_signal_emit (self, signals[NODE_SELECTED], 0, (guint) new_id);
    }
  return TRUE;
}

/* ------------------------------------------------------------------------------------------ */
/* Layout                                                                                      */

static void
layout_ready_cb (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(CsGraphView) self = user_data;
  g_autoptr(GError) error = NULL;
  g_autoptr(CsLayout) layout = cs_layout_new_finish (result, &error);

  if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
    return;       /* a newer layout replaced this one; it clears busy */
  self->busy = FALSE;
  g_clear_handle_id (&self->busy_tick, g_source_remove);
  g_clear_pointer (&self->error, g_free);
  g_clear_pointer (&self->layout, cs_layout_unref);
  if (layout == NULL)
    self->error = g_strdup (error->message);
  else if (layout->trace != self->trace)
    {
      /* Not ours (the trace changed without cancelling): ignore. */
    }
  else
    {
      gboolean keep = self->keep_view && self->anchor.valid;

      self->layout = g_steal_pointer (&layout);
      apply_selection (self);
      apply_diff (self);
      apply_values (self);
      apply_lens (self);
      if (!keep || !anchor_apply (self))
        self->need_fit = !keep;
      self->keep_view = FALSE;
      anchor_clear (&self->anchor);
      if (self->pending_center != 0)
        {
          guint32 id = self->pending_center;

          self->pending_center = 0;
          if (!self->need_fit)
            cs_graph_view_select (self, id, TRUE);
        }
      g_signal_emit (self, signals[LAYOUT_CHANGED], 0);
    }
  gtk_widget_queue_draw (GTK_WIDGET (self));
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_BUSY]);
}

/* While a layout is in flight: redraw, so that the progress note over the old picture shows
 * how long it has taken (cs_graph_view_snapshot()). */
static gboolean
busy_tick_cb (gpointer user_data)
{
  CsGraphView *self = user_data;

  gtk_widget_queue_draw (GTK_WIDGET (self));
  return G_SOURCE_CONTINUE;
}

/* Lays the trace out anew; @keep: keep the view anchored (the selection, or what is in the
 * middle, stays where it is on screen) instead of fitting the new picture. */
static void
start_layout_full (CsGraphView *self, gboolean keep)
{
  gboolean was_busy = self->busy;

  if (keep && self->layout != NULL && self->layout->laid_out && !self->need_fit)
    {
      /* while a layout is in flight the picture on screen is still the old one */
      if (!self->keep_view || !self->anchor.valid)
        anchor_capture (self);
      self->keep_view = self->anchor.valid;
    }
  else if (!keep)
    {
      self->keep_view = FALSE;
      anchor_clear (&self->anchor);
    }

  if (self->cancellable != NULL)
    g_cancellable_cancel (self->cancellable);
  g_clear_object (&self->cancellable);
  g_clear_pointer (&self->error, g_free);

  if (self->trace == NULL)
    {
      g_clear_pointer (&self->layout, cs_layout_unref);
      self->busy = FALSE;
      g_clear_handle_id (&self->busy_tick, g_source_remove);
    }
  else
    {
      self->cancellable = g_cancellable_new ();
      self->busy = TRUE;
      self->busy_since = g_get_monotonic_time ();
      if (self->busy_tick == 0)
        self->busy_tick = g_timeout_add (BUSY_TICK_MS, busy_tick_cb, self);
      CsLayoutMarks marks = { 0 };

      /* the diff and the user's casts are marked on the worker, off this thread */
      marks.diff = current_diff (self);
      marks.user_casts = self->user_casts;
      marks.user_casts_keep = self->user_casts_keep;
      marks.user_casts_serial = self->user_casts_serial;
      cs_layout_new_async_marked (self->trace, &self->options, &marks, self->cancellable,
                                  layout_ready_cb, g_object_ref (self));
    }
  gtk_widget_queue_draw (GTK_WIDGET (self));
  if (was_busy != self->busy)
    g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_BUSY]);
}

/* ------------------------------------------------------------------------------------------ */
/* Drawing                                                                                     */

static void
draw_message (cairo_t *cr, GtkWidget *widget, const char *text, int width, int height)
{
  PangoLayout *pl = gtk_widget_create_pango_layout (widget, text);
  int tw, th;

  pango_layout_set_width (pl, MAX (1, width - 40) * PANGO_SCALE);
  pango_layout_set_wrap (pl, PANGO_WRAP_WORD_CHAR);
  pango_layout_set_alignment (pl, PANGO_ALIGN_CENTER);
  pango_layout_get_pixel_size (pl, &tw, &th);
  cairo_set_source_rgba (cr, 0, 0, 0, 0.55);
  cairo_move_to (cr, 20, (height - th) / 2.0);
  pango_cairo_show_layout (cr, pl);
  g_object_unref (pl);
}

/* Fits the layout into the widget.  @whole (Fit, Ctrl+0): all of it however small.  Else (a
 * new trace): fitted when that is readable (MIN_READABLE_SCALE), otherwise at that scale with
 * the graph's start (its top: the inputs, the first block) FIT_MARGIN_PX below the widget's top
 * edge when the graph is taller than the widget (vertically centred when it is not), and,
 * when it is wider, horizontally centred on the middle one of the collapsed blocks (a model),
 * else on the node nearest the middle of the graph, so that the first frame shows the graph readable from where
 * a reader starts, with no empty band above it. */
static void
fit_view (CsGraphView *self, int width, int height, gboolean whole)
{
  const CsLayout *l = self->layout;
  double mx = (l->bb.x0 + l->bb.x1) / 2, my = (l->bb.y0 + l->bb.y1) / 2, best = G_MAXDOUBLE;
  CsRect box = { mx, my, mx, my };

  cs_view_init_fit (&self->view, l, width, height, FIT_MARGIN_PX, 1.5);
  if (whole || self->view.scale >= MIN_READABLE_SCALE)
    return;
  {
    /* a model drawn as its collapsed blocks: the middle block */
    g_autoptr(GArray) groups = g_array_new (FALSE, FALSE, sizeof (guint));

    for (guint i = 0; i < l->n_nodes; i++)
      if (l->nodes[i].kind == CS_LAYOUT_NODE_GROUP)
        g_array_append_val (groups, i);
    if (groups->len >= 2)
      {
        box = l->nodes[g_array_index (groups, guint, (groups->len - 1) / 2)].box;
        best = 0;
      }
  }
  for (guint i = 0; best > 0 && i < l->n_nodes; i++)
    {
      const CsRect *b = &l->nodes[i].box;
      double dx = (b->x0 + b->x1) / 2 - mx, dy = (b->y0 + b->y1) / 2 - my;

      if (dx * dx + dy * dy < best)
        {
          best = dx * dx + dy * dy;
          box = *b;
        }
    }
  self->view.scale = MIN_READABLE_SCALE;
  cs_view_center_on (&self->view, l, &box, width, height);
  /* view.tx, view.ty are where the graph's left and top edges land (cs_view_to_px) */
  if ((l->bb.x1 - l->bb.x0) * self->view.scale <= width - 2 * FIT_MARGIN_PX)
    self->view.tx = (width - (l->bb.x1 - l->bb.x0) * self->view.scale) / 2;
  if ((l->bb.y1 - l->bb.y0) * self->view.scale > height - 2 * FIT_MARGIN_PX)
    self->view.ty = FIT_MARGIN_PX;
  else
    self->view.ty = (height - (l->bb.y1 - l->bb.y0) * self->view.scale) / 2;
}

/* "Laying out… 1.2 s" in a pill at the top centre of the canvas. */
static void
draw_busy_note (cairo_t *cr, GtkWidget *widget, double seconds, int width)
{
  g_autofree char *text = g_strdup_printf ("Laying out\u2026 %.1f s", seconds);
  PangoLayout *pl = gtk_widget_create_pango_layout (widget, text);
  int tw, th;
  double x, y = 8, pad = 6;

  pango_layout_get_pixel_size (pl, &tw, &th);
  x = (width - tw) / 2.0;
  cairo_new_sub_path (cr);
  cairo_arc (cr, x - pad + th / 2.0, y + th / 2.0 + pad / 2, th / 2.0 + pad / 2, G_PI / 2, 3 * G_PI / 2);
  cairo_arc (cr, x + tw + pad - th / 2.0, y + th / 2.0 + pad / 2, th / 2.0 + pad / 2, -G_PI / 2, G_PI / 2);
  cairo_close_path (cr);
  cairo_set_source_rgba (cr, 0.15, 0.2, 0.3, 0.85);
  cairo_fill (cr);
  cairo_set_source_rgb (cr, 1, 1, 1);
  cairo_move_to (cr, x, y + pad / 2);
  pango_cairo_show_layout (cr, pl);
  g_object_unref (pl);
}

static void
cs_graph_view_snapshot (GtkWidget *widget, GtkSnapshot *snapshot)
{
  CsGraphView *self = CS_GRAPH_VIEW (widget);
  int width = gtk_widget_get_width (widget);
  int height = gtk_widget_get_height (widget);
  cairo_t *cr;

  if (width <= 0 || height <= 0)
    return;
  cr = gtk_snapshot_append_cairo (snapshot, &GRAPHENE_RECT_INIT (0, 0, width, height));
  cairo_set_source_rgb (cr, 1, 1, 1);
  cairo_paint (cr);

  if (self->layout != NULL && self->layout->laid_out)
    {
      if (self->need_fit)
        {
          fit_view (self, width, height, self->fit_whole);
          self->need_fit = FALSE;
          self->fit_whole = FALSE;
          g_signal_emit (self, signals[VIEW_CHANGED], 0);
        }
      /* the legend, the value key and the notes live in the window's side panel, never on
       * the graph */
      cs_draw_layout (cr, self->layout, &self->view, width, height, CS_DRAW_EDGE_LABELS);
      /* a new layout in flight (expand, collapse, another pass or policy): the old picture
       * stays, with a note at the top once it takes longer than a moment */
      if (self->busy && g_get_monotonic_time () - self->busy_since >= BUSY_NOTE_US)
        draw_busy_note (cr, widget, (g_get_monotonic_time () - self->busy_since) / 1e6, width);
    }
  else if (self->error != NULL)
    {
      g_autofree char *msg = g_strdup_printf ("The graph could not be drawn: %s", self->error);
      draw_message (cr, widget, msg, width, height);
    }
  else if (self->busy)
    draw_message (cr, widget, "Laying out…", width, height);
  else if (self->placeholder != NULL)
    draw_message (cr, widget, self->placeholder, width, height);
  cairo_destroy (cr);
}

/* ------------------------------------------------------------------------------------------ */
/* Input                                                                                       */

static gboolean
hit_at (CsGraphView *self, double x, double y, CsLayoutHit *hit)
{
  double xp, yp;

  if (self->layout == NULL || !self->layout->laid_out)
    return FALSE;
  cs_view_to_pt (&self->view, self->layout, x, y, &xp, &yp);
  return cs_layout_hit_test (self->layout, xp, yp, 3.0 / self->view.scale, hit);
}

/* The statement (or group) a hit stands for: an op inside a region or decomposition is
 * itself, a REF node stands for its producer, a cluster (region, expanded statement, group)
 * for itself; 0 for inputs, outputs, ghosts and edges. */
static guint32
hit_stmt (CsGraphView *self, const CsLayoutHit *hit)
{
  const CsLayoutNode *n;

  switch (hit->kind)
    {
    case CS_LAYOUT_HIT_NODE:
      n = &self->layout->nodes[hit->index];
      if (n->kind == CS_LAYOUT_NODE_REF && n->target >= 0)
        n = &self->layout->nodes[n->target];
      if (n->kind == CS_LAYOUT_NODE_INPUT || n->kind == CS_LAYOUT_NODE_OUTPUT
          || n->kind == CS_LAYOUT_NODE_GHOST)
        return 0;
      return n->stmt_id;
    case CS_LAYOUT_HIT_CLUSTER:
      return self->layout->clusters[hit->index].stmt_id;
    case CS_LAYOUT_HIT_EDGE:
    case CS_LAYOUT_HIT_NONE:
    default:
      return 0;
    }
}

static void
set_selected (CsGraphView *self, guint32 stmt_id, gboolean emit)
{
  if (self->selected == stmt_id)
    return;
  self->selected = stmt_id;
  apply_selection (self);
  gtk_widget_queue_draw (GTK_WIDGET (self));
  if (emit)
    g_signal_emit (self, signals[NODE_SELECTED], 0, (guint) stmt_id);
}

/**
 * cs_graph_view_activate_at:
 * @x: widget x, px
 * @y: widget y, px
 * @n_press: 1 for a click, 2 for a double click
 *
 * What a click does at (@x, @y): selects the element there (an op inside a fusion region or a
 * decomposition selects that op; a click on a region's or group's box, its title included,
 * selects the region or group; empty space clears the selection) and emits ::node-selected.
 * A double click expands a collapsed statement, region or group, and collapses an expanded
 * one (the view stays anchored on it).
 * Returns: the statement or group id selected or toggled, 0 for none
 */
guint32
cs_graph_view_activate_at (CsGraphView *self, double x, double y, int n_press)
{
  CsLayoutHit hit;
  guint32 id = 0;

  g_return_val_if_fail (CS_IS_GRAPH_VIEW (self), 0);
  if (hit_at (self, x, y, &hit))
    id = hit_stmt (self, &hit);
  if (n_press == 2 && hit.kind == CS_LAYOUT_HIT_NODE && self->layout->nodes[hit.index].expandable
      && id != 0)
    {
      set_selected (self, id, TRUE);
      cs_graph_view_toggle_expanded (self, self->layout->nodes[hit.index].stmt_id);
      return id;
    }
  if (n_press == 2 && hit.kind == CS_LAYOUT_HIT_CLUSTER)
    {
      /* double click on an expanded box: collapse it again */
      set_selected (self, id, TRUE);
      cs_graph_view_toggle_expanded (self, self->layout->clusters[hit.index].stmt_id);
      return id;
    }
  set_selected (self, id, TRUE);
  return id;
}

/* A press on an element acts at once (cs_graph_view_activate_at()); a press on empty space
 * (or an edge) only marks the selection to be cleared when the button is released without
 * a pan in between (drag_end_cb()), so that dragging the canvas keeps the selection. */
static void
click_pressed_cb (GtkGestureClick *gesture, int n_press, double x, double y, CsGraphView *self)
{
  CsLayoutHit hit;

  gtk_widget_grab_focus (GTK_WIDGET (self));
  self->clear_pending = FALSE;
  if (!hit_at (self, x, y, &hit) || hit_stmt (self, &hit) == 0)
    {
      self->clear_pending = TRUE;
      return;
    }
  cs_graph_view_activate_at (self, x, y, n_press);
}

static void
drag_begin_cb (GtkGestureDrag *gesture, double x, double y, CsGraphView *self)
{
  self->drag_tx = self->view.tx;
  self->drag_ty = self->view.ty;
}

/* Whether a pointer offset of (@dx, @dy) px from the press is a drag, not a click (GTK's
 * drag threshold, gtk-dnd-drag-threshold). */
static gboolean
past_drag_threshold (CsGraphView *self, double dx, double dy)
{
  return gtk_drag_check_threshold (GTK_WIDGET (self), 0, 0, (int) round (dx), (int) round (dy));
}

static void
drag_end_cb (GtkGestureDrag *gesture, double dx, double dy, CsGraphView *self)
{
  if (self->clear_pending && !past_drag_threshold (self, dx, dy))
    set_selected (self, 0, TRUE);
  self->clear_pending = FALSE;
}

static void
drag_update_cb (GtkGestureDrag *gesture, double dx, double dy, CsGraphView *self)
{
  if (past_drag_threshold (self, dx, dy))
    self->clear_pending = FALSE;   /* a pan, not a click */
  self->view.tx = self->drag_tx + dx;
  self->view.ty = self->drag_ty + dy;
  self->need_fit = FALSE;
  gtk_widget_queue_draw (GTK_WIDGET (self));
  g_signal_emit (self, signals[VIEW_CHANGED], 0);
}

/* After a zoom or pan, a graph that left the widget entirely is brought back to its middle. */
static void
keep_graph_in_view (CsGraphView *self)
{
  const CsLayout *l = self->layout;
  double w = gtk_widget_get_width (GTK_WIDGET (self)), h = gtk_widget_get_height (GTK_WIDGET (self));
  double x0, y0, x1, y1;

  if (l == NULL || !l->laid_out || w <= 0 || h <= 0)
    return;
  cs_view_to_px (&self->view, l, l->bb.x0, l->bb.y1, &x0, &y0);
  cs_view_to_px (&self->view, l, l->bb.x1, l->bb.y0, &x1, &y1);
  if (x1 < 0 || x0 > w || y1 < 0 || y0 > h)
    cs_view_center_on (&self->view, l, &l->bb, w, h);
}

static void
zoom_at (CsGraphView *self, double factor, double x, double y)
{
  double target = CLAMP (self->view.scale * factor, MIN_SCALE, MAX_SCALE);

  if (self->layout == NULL || target == self->view.scale)
    return;
  cs_view_zoom_at (&self->view, target / self->view.scale, x, y);
  self->need_fit = FALSE;
  keep_graph_in_view (self);
  gtk_widget_queue_draw (GTK_WIDGET (self));
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_ZOOM]);
  g_signal_emit (self, signals[VIEW_CHANGED], 0);
}

/* Keyboard zoom's fixed point: the selection's centre when it is on screen, else the middle of
 * the widget. */
static void
zoom_point (CsGraphView *self, double *x, double *y)
{
  double w = gtk_widget_get_width (GTK_WIDGET (self)), h = gtk_widget_get_height (GTK_WIDGET (self));
  CsLayoutHit hit;

  *x = w / 2;
  *y = h / 2;
  if (self->layout != NULL && self->layout->laid_out && self->selected != 0
      && cs_layout_find_element (self->layout, self->selected, &hit))
    {
      CsPoint c;
      double px, py;

      cs_layout_element_center (self->layout, &hit, &c);
      cs_view_to_px (&self->view, self->layout, c.x, c.y, &px, &py);
      if (px >= 0 && px <= w && py >= 0 && py <= h)
        {
          *x = px;
          *y = py;
        }
    }
}

static gboolean
scroll_cb (GtkEventControllerScroll *controller, double dx, double dy, CsGraphView *self)
{
  GdkModifierType mods = gtk_event_controller_get_current_event_state (GTK_EVENT_CONTROLLER (controller));
  gboolean smooth = gtk_event_controller_scroll_get_unit (controller) == GDK_SCROLL_UNIT_SURFACE;

  if (self->layout == NULL)
    return FALSE;
  if (smooth && !(mods & GDK_CONTROL_MASK))
    {
      /* Touchpad: two-finger scroll pans; pinch (GtkGestureZoom) zooms. */
      self->view.tx -= dx;
      self->view.ty -= dy;
      self->need_fit = FALSE;
      gtk_widget_queue_draw (GTK_WIDGET (self));
      g_signal_emit (self, signals[VIEW_CHANGED], 0);
      return TRUE;
    }
  /* Wheel: one notch zooms by 1.2 around the pointer. */
  zoom_at (self, pow (1.2, -dy / (smooth ? 20.0 : 1.0)), self->pointer_x, self->pointer_y);
  return TRUE;
}

static void
motion_cb (GtkEventControllerMotion *controller, double x, double y, CsGraphView *self)
{
  self->pointer_x = x;
  self->pointer_y = y;
}

static void
pinch_begin_cb (GtkGesture *gesture, GdkEventSequence *sequence, CsGraphView *self)
{
  self->pinch_scale = self->view.scale;
}

static void
pinch_scale_changed_cb (GtkGestureZoom *gesture, double scale, CsGraphView *self)
{
  double cx, cy;

  if (self->pinch_scale <= 0)
    return;
  if (!gtk_gesture_get_bounding_box_center (GTK_GESTURE (gesture), &cx, &cy))
    {
      cx = gtk_widget_get_width (GTK_WIDGET (self)) / 2.0;
      cy = gtk_widget_get_height (GTK_WIDGET (self)) / 2.0;
    }
  zoom_at (self, self->pinch_scale * scale / self->view.scale, cx, cy);
}

static gboolean
key_pressed_cb (GtkEventControllerKey *controller, guint keyval, guint keycode,
                GdkModifierType state, CsGraphView *self)
{
  if (state & (GDK_CONTROL_MASK | GDK_ALT_MASK))
    return FALSE;
  switch (keyval)
    {
    case GDK_KEY_plus:
    case GDK_KEY_equal:
    case GDK_KEY_KP_Add:
      cs_graph_view_zoom_by (self, 1.25);
      return TRUE;
    case GDK_KEY_minus:
    case GDK_KEY_KP_Subtract:
      cs_graph_view_zoom_by (self, 0.8);
      return TRUE;
    case GDK_KEY_Return:
    case GDK_KEY_KP_Enter:
    case GDK_KEY_space:
      /* expand / collapse the selected statement, region or group */
      if (self->selected != 0)
        cs_graph_view_toggle_expanded (self, self->selected);
      return self->selected != 0;
    case GDK_KEY_0:
    case GDK_KEY_KP_0:
      cs_graph_view_fit (self);
      return TRUE;
    case GDK_KEY_bracketright:
      return cs_graph_view_step_repeat (self, 1);
    case GDK_KEY_bracketleft:
      return cs_graph_view_step_repeat (self, -1);
    case GDK_KEY_Left:
      return cs_graph_view_move_selection (self, GTK_DIR_LEFT);
    case GDK_KEY_Right:
      return cs_graph_view_move_selection (self, GTK_DIR_RIGHT);
    case GDK_KEY_Up:
      return cs_graph_view_move_selection (self, GTK_DIR_UP);
    case GDK_KEY_Down:
      return cs_graph_view_move_selection (self, GTK_DIR_DOWN);
    case GDK_KEY_Tab:
      return cs_graph_view_move_selection (self, GTK_DIR_TAB_FORWARD);
    case GDK_KEY_ISO_Left_Tab:
      return cs_graph_view_move_selection (self, GTK_DIR_TAB_BACKWARD);
    case GDK_KEY_Escape:
      set_selected (self, 0, TRUE);
      return TRUE;
    default:
      return FALSE;
    }
}

static gboolean
query_tooltip_cb (GtkWidget *widget, int x, int y, gboolean keyboard, GtkTooltip *tooltip,
                  CsGraphView *self)
{
  CsLayoutHit hit;

  if (!hit_at (self, x, y, &hit))
    return FALSE;
  switch (hit.kind)
    {
    case CS_LAYOUT_HIT_NODE:
      {
        const CsLayoutNode *n = &self->layout->nodes[hit.index];
        g_autoptr(GString) s = g_string_new (n->detail ? n->detail : n->label);

        if (n->has_value)
          g_string_append_printf (s, "\n%s: %.4g", self->layout->scale_title
                                  ? self->layout->scale_title : "value", n->value);
        if (self->layout->precision_lens && n->has_precision && n->has_dtype)
          g_string_append_printf (s, "\nstored %s, computed in %s%s", cs_dtype_short_name (n->dtype),
                                  cs_dtype_short_name (n->compute_dtype),
                                  n->rounds ? ": rounds here" : "");
        if (n->user_cast_note != NULL)
          g_string_append_printf (s, "\n%s", n->user_cast_note);
        gtk_tooltip_set_text (tooltip, s->str);
        return TRUE;
      }
    case CS_LAYOUT_HIT_EDGE:
      {
        const CsLayoutEdge *e = &self->layout->edges[hit.index];
        g_autoptr(GString) s = g_string_new (e->proxy);

        if (e->has_dtype)
          g_string_append_printf (s, " %s", cs_dtype_short_name (e->dtype));
        if (e->label)
          g_string_append (s, e->label);
        if (e->has_value)
          g_string_append_printf (s, "\n%s: %.4g", self->layout->scale_title
                                  ? self->layout->scale_title : "value", e->value);
        if (self->layout->precision_lens && e->has_compute)
          g_string_append_printf (s, "\ncomputed in %s by its reader", cs_dtype_short_name (e->compute_dtype));
        gtk_tooltip_set_text (tooltip, s->str);
        return TRUE;
      }
    case CS_LAYOUT_HIT_CLUSTER:
      {
        const CsLayoutCluster *c = &self->layout->clusters[hit.index];
        g_autofree char *text = g_strdup_printf ("%s%s%s", c->title, c->subtitle ? "\n" : "",
                                                 c->subtitle ? c->subtitle : "");
        gtk_tooltip_set_text (tooltip, text);
        return TRUE;
      }
    case CS_LAYOUT_HIT_NONE:
    default:
      return FALSE;
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Public API                                                                                  */

/**
 * cs_graph_view_new:
 * Returns: (transfer full): an empty graph view
 */
GtkWidget *
cs_graph_view_new (void)
{
  return g_object_new (CS_TYPE_GRAPH_VIEW, NULL);
}

/**
 * cs_graph_view_set_trace:
 * @self: a #CsGraphView
 * @trace: (nullable): the trace to draw (a reference is taken)
 * @diff_base: (nullable): an older trace; casts and regions that differ from it are marked
 *   (cs_layout_mark_diff)
 *
 * Starts laying out @trace on render/'s worker; the old picture stays until the new one is
 * ready (the view is then fitted).  The selection is kept when the statement id still exists.
 */
void
cs_graph_view_set_trace (CsGraphView *self, CsTrace *trace, CsTrace *diff_base)
{
  g_return_if_fail (CS_IS_GRAPH_VIEW (self));
  cs_graph_view_set_trace_full (self, trace, diff_base, self->user_casts, self->user_casts_keep);
}

/**
 * cs_graph_view_set_trace_full:
 * @self: a #CsGraphView
 * @trace: (nullable): the trace to draw (a reference is taken)
 * @diff_base: (nullable): as for cs_graph_view_set_trace()
 * @user_casts: (nullable): as for cs_graph_view_set_user_casts(), for @trace
 * @keep: (nullable): as for cs_graph_view_set_user_casts()
 *
 * cs_graph_view_set_trace() with the user's removed casts of @trace: the diff against
 * @diff_base and these casts are marked on the layout worker with the new layout, not on this
 * thread.
 */
void
cs_graph_view_set_trace_full (CsGraphView *self, CsTrace *trace, CsTrace *diff_base,
                              GPtrArray *user_casts, GPtrArray *keep)
{
  g_return_if_fail (CS_IS_GRAPH_VIEW (self));
  set_user_casts (self, user_casts, keep);

  if (trace != NULL)
    cs_trace_ref (trace);
  g_clear_pointer (&self->trace, cs_trace_unref);
  self->trace = trace;
  if (diff_base != NULL)
    cs_trace_ref (diff_base);
  g_clear_pointer (&self->diff_base, cs_trace_unref);
  self->diff_base = diff_base;
  /* Statement overrides name ids of the old trace: start afresh.  Group overrides name
   * groups ("layers.3"), the same in every pass and policy: kept. */
  g_clear_pointer (&self->options.expand, g_hash_table_unref);
  start_layout (self);
}

/**
 * cs_graph_view_reset:
 *
 * Forgets the view, the selection, Find's matches and every expand / collapse choice, so that
 * the next trace (a newly opened file) opens fitted with its default groups collapsed.
 * cs_graph_view_set_trace() alone keeps the view anchored on the selection (a policy change,
 * another pass).
 */
void
cs_graph_view_reset (CsGraphView *self)
{
  g_return_if_fail (CS_IS_GRAPH_VIEW (self));
  g_clear_pointer (&self->options.expand, g_hash_table_unref);
  g_clear_pointer (&self->options.group_expand, g_hash_table_unref);
  g_clear_pointer (&self->found, g_hash_table_unref);
  cs_layout_cache_clear (self->options.cache);
  self->selected = 0;
  self->pending_center = 0;
  self->keep_view = FALSE;
  anchor_clear (&self->anchor);
  self->need_fit = TRUE;
  g_clear_pointer (&self->layout, cs_layout_unref);
  g_clear_pointer (&self->trace, cs_trace_unref);
}

/** Returns: (transfer none) (nullable): the trace shown. */
CsTrace *
cs_graph_view_get_trace (CsGraphView *self)
{
  g_return_val_if_fail (CS_IS_GRAPH_VIEW (self), NULL);
  return self->trace;
}

/**
 * cs_graph_view_set_diff_base:
 * @diff_base: (nullable): the older trace to mark the differences against; NULL clears the
 *   marks (the diff was dismissed)
 */
void
cs_graph_view_set_diff_base (CsGraphView *self, CsTrace *diff_base)
{
  g_return_if_fail (CS_IS_GRAPH_VIEW (self));

  if (diff_base == self->diff_base)
    return;
  if (diff_base != NULL)
    cs_trace_ref (diff_base);
  g_clear_pointer (&self->diff_base, cs_trace_unref);
  self->diff_base = diff_base;
  apply_diff (self);
  gtk_widget_queue_draw (GTK_WIDGET (self));
}

/**
 * cs_graph_view_get_diff_stats:
 * @stats: (out): casts added/removed and regions split/merged/new found against the diff base
 *
 * Returns: TRUE when a diff is shown and laid out
 */
gboolean
cs_graph_view_get_diff_stats (CsGraphView *self, CsLayoutDiffStats *stats)
{
  g_return_val_if_fail (CS_IS_GRAPH_VIEW (self), FALSE);
  *stats = self->diff_stats;
  return self->layout != NULL && self->diff_base != NULL;
}

/**
 * cs_graph_view_set_values:
 * @values: (nullable): statement id (GUINT_TO_POINTER) -> double* per node (region time),
 *   or NULL to clear the overlay
 * @edge_values: (nullable): tensor name -> double* per edge (error against f64)
 * @title: (nullable): the colour-scale title, with its unit ("time (ms)")
 *
 * Colours nodes and edges by value on render/'s sequential scale (min..max of the values).
 */
void
cs_graph_view_set_values (CsGraphView *self, GHashTable *values, GHashTable *edge_values,
                          const char *title)
{
  g_return_if_fail (CS_IS_GRAPH_VIEW (self));

  if (values != NULL)
    g_hash_table_ref (values);
  g_clear_pointer (&self->values, g_hash_table_unref);
  self->values = values;
  if (edge_values != NULL)
    g_hash_table_ref (edge_values);
  g_clear_pointer (&self->edge_values, g_hash_table_unref);
  self->edge_values = edge_values;
  g_free (self->values_title);
  self->values_title = g_strdup (title);
  apply_values (self);
  gtk_widget_queue_draw (GTK_WIDGET (self));
}

/** Text drawn when there is no trace (or before the first layout). */
void
cs_graph_view_set_placeholder (CsGraphView *self, const char *text)
{
  g_return_if_fail (CS_IS_GRAPH_VIEW (self));
  g_free (self->placeholder);
  self->placeholder = g_strdup (text);
  gtk_widget_queue_draw (GTK_WIDGET (self));
}

/** Returns: the selected top-level statement id, 0 for none. */
guint32
cs_graph_view_get_selected (CsGraphView *self)
{
  g_return_val_if_fail (CS_IS_GRAPH_VIEW (self), 0);
  return self->selected;
}

/**
 * cs_graph_view_select:
 * @stmt_id: a top-level statement id of the trace, or 0 to clear
 * @center: scroll so that the node (or its region) is in the middle
 *
 * Selects without emitting ::node-selected (the caller already knows).
 */
void
cs_graph_view_select (CsGraphView *self, guint32 stmt_id, gboolean center)
{
  CsLayoutHit hit;

  g_return_if_fail (CS_IS_GRAPH_VIEW (self));
  set_selected (self, stmt_id, FALSE);
  if (!center || self->layout == NULL || !self->layout->laid_out || stmt_id == 0)
    return;
  if (cs_layout_find_element (self->layout, stmt_id, &hit))
    {
      CsPoint c;
      double x, y;
      int w = gtk_widget_get_width (GTK_WIDGET (self));
      int h = gtk_widget_get_height (GTK_WIDGET (self));

      cs_layout_element_center (self->layout, &hit, &c);
      if (self->view.scale < MIN_READABLE_SCALE)
        self->view.scale = MIN_READABLE_SCALE;
      /* Scroll only when it is not well inside the widget. */
      cs_view_to_px (&self->view, self->layout, c.x, c.y, &x, &y);
      if (x < w * 0.1 || y < h * 0.1 || x > w * 0.9 || y > h * 0.9 || self->need_fit)
        {
          CsRect box = { c.x, c.y, c.x, c.y };
          cs_view_center_on (&self->view, self->layout, &box, w, h);
        }
    }
  self->need_fit = FALSE;
  gtk_widget_queue_draw (GTK_WIDGET (self));
  g_signal_emit (self, signals[VIEW_CHANGED], 0);
}

static void
node_center (const CsLayoutNode *n, double *x, double *y)
{
  *x = (n->box.x0 + n->box.x1) / 2;
  *y = (n->box.y0 + n->box.y1) / 2;
}

/**
 * cs_graph_view_move_selection:
 * @direction: GTK_DIR_UP/DOWN/LEFT/RIGHT (geometric, on screen) or GTK_DIR_TAB_FORWARD/BACKWARD
 *   (trace order)
 *
 * Moves the selection to the nearest statement node in @direction (distance along it counts
 * once, sideways distance twice) and emits ::node-selected.  With nothing selected, selects
 * the first statement node.
 * Returns: TRUE when the selection moved
 */
gboolean
cs_graph_view_move_selection (CsGraphView *self, GtkDirectionType direction)
{
  const CsLayout *layout = self->layout;
  gint cur = -1, best = -1;
  double best_cost = G_MAXDOUBLE, cx, cy;

  g_return_val_if_fail (CS_IS_GRAPH_VIEW (self), FALSE);
  if (layout == NULL || !layout->laid_out || layout->n_nodes == 0)
    return FALSE;

  for (guint i = 0; self->selected != 0 && i < layout->n_nodes; i++)
    if (layout->nodes[i].stmt_id == self->selected)
      {
        cur = (gint) i;
        break;
      }
  for (guint i = 0; cur < 0 && self->selected != 0 && i < layout->n_nodes; i++)
    if (layout->nodes[i].top_stmt_id == self->selected)
      {
        cur = (gint) i;
        break;
      }
  if (cur < 0 && self->selected != 0)
    {
      gint c = cs_layout_find_cluster (layout, self->selected);
      /* A selected region: start from its first member node. */
      for (guint i = 0; c >= 0 && i < layout->n_nodes; i++)
        if (layout->nodes[i].cluster == c)
          {
            cur = (gint) i;
            break;
          }
    }

  if (direction == GTK_DIR_TAB_FORWARD || direction == GTK_DIR_TAB_BACKWARD || cur < 0)
    {
      /* Trace order: the statements of the trace that are drawn, as a node or a region. */
      gboolean fwd = direction != GTK_DIR_TAB_BACKWARD;
      g_autoptr(GArray) order = g_array_new (FALSE, FALSE, sizeof (guint32));
      gint here = -1;
      guint32 pick;

      guint32 sel_top = cur >= 0 ? layout->nodes[cur].top_stmt_id : self->selected;

      for (guint i = 0; self->trace != NULL && i < self->trace->n_stmts; i++)
        {
          guint32 id = self->trace->stmts[i]->id;

          if (cs_layout_find_node (layout, id) < 0 && cs_layout_find_cluster (layout, id) < 0)
            {
              /* inside a collapsed group: the group's node, once */
              CsLayoutHit h;

              if (self->trace->stmts[i]->kind != CS_STMT_CALL
                  || !cs_layout_find_element (layout, id, &h) || h.kind != CS_LAYOUT_HIT_NODE
                  || layout->nodes[h.index].kind != CS_LAYOUT_NODE_GROUP)
                continue;
              id = layout->nodes[h.index].stmt_id;
              if (order->len > 0 && g_array_index (order, guint32, order->len - 1) == id)
                continue;
            }
          if (id == self->selected || id == sel_top)
            here = (gint) order->len;
          g_array_append_val (order, id);
        }
      if (order->len == 0)
        return FALSE;
      if (here < 0)
        pick = g_array_index (order, guint32, fwd ? 0 : order->len - 1);
      else if (fwd ? (guint) here + 1 < order->len : here > 0)
        pick = g_array_index (order, guint32, fwd ? here + 1 : here - 1);
      else
        return FALSE;
      set_selected (self, pick, TRUE);
      cs_graph_view_select (self, pick, TRUE);
      return TRUE;
    }

  node_center (&layout->nodes[cur], &cx, &cy);
  for (guint i = 0; i < layout->n_nodes; i++)
    {
      const CsLayoutNode *n = &layout->nodes[i];
      double x, y, along, side;

      if (n->top_stmt_id == 0 || n->top_stmt_id == self->selected)
        continue;
      node_center (n, &x, &y);
      switch (direction)
        {
        case GTK_DIR_UP:    along = y - cy; side = fabs (x - cx); break;   /* y up in points */
        case GTK_DIR_DOWN:  along = cy - y; side = fabs (x - cx); break;
        case GTK_DIR_LEFT:  along = cx - x; side = fabs (y - cy); break;
        case GTK_DIR_RIGHT: along = x - cx; side = fabs (y - cy); break;
        case GTK_DIR_TAB_FORWARD:
        case GTK_DIR_TAB_BACKWARD:
        default:            along = 0; side = 0; break;
        }
      if (along <= 0.5)
        continue;
      if (along + 2 * side < best_cost)
        {
          best_cost = along + 2 * side;
          best = (gint) i;
        }
    }
  if (best < 0)
    return FALSE;
  set_selected (self, layout->nodes[best].top_stmt_id, TRUE);
  cs_graph_view_select (self, layout->nodes[best].top_stmt_id, TRUE);
  return TRUE;
}

/**
 * cs_graph_view_toggle_expanded:
 * @stmt_id: a statement with subsymbols (an ltorch call, or a fusion region)
 *
 * Draws the statement as its decomposition (its prims in a box), or as one node again, and
 * lays the graph out anew (render/'s per-statement override, CsRenderExpand).  Double click
 * does this.
 */
void
cs_graph_view_toggle_expanded (CsGraphView *self, guint32 stmt_id)
{
  gboolean expanded;

  g_return_if_fail (CS_IS_GRAPH_VIEW (self));
  if (stmt_id == 0)
    return;
  if (CS_LAYOUT_IS_GROUP_ID (stmt_id))
    {
      gint g = CS_LAYOUT_GROUP_OF_ID (stmt_id);
      const CsLayout *l = self->layout;

      if (l == NULL || l->grouping == NULL || (guint) g >= l->grouping->n_groups)
        return;
      cs_graph_view_set_group_expanded (self, l->grouping->groups[g].name, l->group_collapsed[g]);
      return;
    }
  expanded = self->layout != NULL && cs_layout_find_cluster (self->layout, stmt_id) >= 0;
  cs_render_options_set_expanded (&self->options, stmt_id,
                                  expanded ? CS_RENDER_EXPAND_OFF : CS_RENDER_EXPAND_ON);
  start_layout (self);
}

/**
 * cs_graph_view_set_group_expanded:
 * @name: a group's full name ("layers.3")
 * @expanded: draw it as a box of its statements (TRUE) or as one node with its summary
 *
 * Lays the graph out anew with that group expanded or collapsed; the view stays anchored on
 * the selection (or on what is in its middle).  The choice is kept across passes and policies.
 */
void
cs_graph_view_set_group_expanded (CsGraphView *self, const char *name, gboolean expanded)
{
  g_return_if_fail (CS_IS_GRAPH_VIEW (self));
  g_return_if_fail (name != NULL);
  cs_render_options_set_group_expanded (&self->options, name,
                                        expanded ? CS_RENDER_EXPAND_ON : CS_RENDER_EXPAND_OFF);
  start_layout (self);
}

/**
 * cs_graph_view_get_group_expanded:
 * @name: a group's full name
 * Returns: TRUE when the shown layout draws that group expanded
 */
gboolean
cs_graph_view_get_group_expanded (CsGraphView *self, const char *name)
{
  gint g;

  g_return_val_if_fail (CS_IS_GRAPH_VIEW (self), FALSE);
  if (self->layout == NULL || self->layout->grouping == NULL
      || (g = cs_grouping_find (self->layout->grouping, name)) < 0)
    return FALSE;
  return !self->layout->group_collapsed[g];
}

/* The layer holding what is selected (a fold's node: its first layer), or -1. */
static gint
selected_layer (CsGraphView *self)
{
  const CsLayout *l = self->layout;
  CsLayoutHit hit;
  gint g;

  if (l == NULL || l->grouping == NULL || self->selected == 0)
    return -1;
  if (CS_LAYOUT_IS_GROUP_ID (self->selected))
    g = CS_LAYOUT_GROUP_OF_ID (self->selected);
  else if (!cs_layout_find_element (l, self->selected, &hit))
    return -1;
  else
    g = hit.kind == CS_LAYOUT_HIT_NODE ? l->nodes[hit.index].group : l->clusters[hit.index].group;
  for (; g >= 0 && (guint) g < l->grouping->n_groups; g = l->grouping->groups[g].parent)
    if (l->grouping->groups[g].kind == CS_GROUP_LAYER)
      return g;
  return -1;
}

/**
 * cs_graph_view_step_repeat:
 * @step: 1 for the next layer with the same structure, -1 for the previous one
 *
 * Expands the repeats of a layer one at a time (keys ] and [): with an expanded layer
 * selected (or something inside it), collapses it and expands the next (previous) layer with
 * the same structure, which folds back into its run of repeats (render/cs-group.h,
 * cs_grouping_fold_repeats()); with a collapsed layer or a fold of repeats selected, expands
 * that layer (a fold's first one).  The expanded layer is selected and centred.
 * Returns: TRUE when a new layout was started
 */
gboolean
cs_graph_view_step_repeat (CsGraphView *self, gint step)
{
  const CsLayout *l;
  const CsGroup *gs;
  gint g, target = -1, cls;

  g_return_val_if_fail (CS_IS_GRAPH_VIEW (self), FALSE);
  l = self->layout;
  if ((g = selected_layer (self)) < 0)
    return FALSE;
  gs = l->grouping->groups;
  if (l->group_collapsed[g])
    target = g;
  else
    {
      cls = gs[g].repeat_of >= 0 ? gs[g].repeat_of : g;
      for (gint h = g + (step > 0 ? 1 : -1); h >= 0 && (guint) h < l->grouping->n_groups;
           h += step > 0 ? 1 : -1)
        if (gs[h].kind == CS_GROUP_LAYER && (gs[h].repeat_of >= 0 ? gs[h].repeat_of : h) == cls)
          {
            target = h;
            break;
          }
      if (target < 0)
        return FALSE;
      cs_render_options_set_group_expanded (&self->options, gs[g].name, CS_RENDER_EXPAND_OFF);
    }
  cs_render_options_set_group_expanded (&self->options, gs[target].name, CS_RENDER_EXPAND_ON);
  set_selected (self, CS_LAYOUT_GROUP_ID (target), FALSE);
  self->pending_center = CS_LAYOUT_GROUP_ID (target);
  start_layout (self);
  return TRUE;
}

/**
 * cs_graph_view_reveal:
 * @stmt_id: a statement id at any level (a region's prim, a prim of an ltorch call), or a
 *   group id
 *
 * Selects @stmt_id and makes it visible: the collapsed groups holding it are expanded, the
 * collapsed statement holding it is drawn as its prims, and once laid out the view scrolls to
 * it (at a readable zoom).  Find and the run table use this.
 * Returns: TRUE when a new layout was started for it
 */
gboolean
cs_graph_view_reveal (CsGraphView *self, guint32 stmt_id)
{
  const CsLayout *l = self->layout;
  gboolean relayout = FALSE;
  CsLayoutHit hit;

  g_return_val_if_fail (CS_IS_GRAPH_VIEW (self), FALSE);
  if (l == NULL || self->trace == NULL || stmt_id == 0)
    return FALSE;
  set_selected (self, stmt_id, FALSE);
  if (cs_layout_find_element (l, stmt_id, &hit)
      && ((hit.kind == CS_LAYOUT_HIT_NODE && l->nodes[hit.index].stmt_id == stmt_id)
          || (hit.kind == CS_LAYOUT_HIT_CLUSTER && l->clusters[hit.index].stmt_id == stmt_id)))
    {
      cs_graph_view_select (self, stmt_id, TRUE);
      return FALSE;
    }
  if (!CS_LAYOUT_IS_GROUP_ID (stmt_id))
    for (guint i = 0; i < self->trace->n_stmts; i++)
      {
        const CsStmt *top = self->trace->stmts[i];

        if (top->id != stmt_id
            && (top->n_subs == 0
                || find_stmt_deep ((const CsStmt *const *) top->subs, top->n_subs, stmt_id) == NULL))
          continue;
        if (l->grouping != NULL)
          for (gint g = l->grouping->stmt_group[i]; g >= 0; g = l->grouping->groups[g].parent)
            if (l->group_collapsed[g])
              {
                cs_render_options_set_group_expanded (&self->options, l->grouping->groups[g].name,
                                                      CS_RENDER_EXPAND_ON);
                relayout = TRUE;
              }
        if (top->id != stmt_id && cs_layout_find_cluster (l, top->id) < 0)
          {
            cs_render_options_set_expanded (&self->options, top->id, CS_RENDER_EXPAND_ON);
            relayout = TRUE;
          }
        break;
      }
  else if (l->grouping != NULL)
    {
      for (gint g = CS_LAYOUT_GROUP_OF_ID (stmt_id); g >= 0 && (guint) g < l->grouping->n_groups;
           g = l->grouping->groups[g].parent)
        if (g != CS_LAYOUT_GROUP_OF_ID (stmt_id) && l->group_collapsed[g])
          {
            cs_render_options_set_group_expanded (&self->options, l->grouping->groups[g].name,
                                                  CS_RENDER_EXPAND_ON);
            relayout = TRUE;
          }
    }
  if (!relayout)
    {
      cs_graph_view_select (self, stmt_id, TRUE);
      return FALSE;
    }
  self->pending_center = stmt_id;
  start_layout (self);
  return TRUE;
}

/**
 * cs_graph_view_set_found:
 * @stmt_ids: (nullable): set of statement / group ids (GUINT_TO_POINTER keys) that match the
 *   current Find, drawn with a halo; NULL clears
 */
void
cs_graph_view_set_found (CsGraphView *self, GHashTable *stmt_ids)
{
  g_return_if_fail (CS_IS_GRAPH_VIEW (self));
  if (stmt_ids != NULL)
    g_hash_table_ref (stmt_ids);
  g_clear_pointer (&self->found, g_hash_table_unref);
  self->found = stmt_ids;
  if (self->layout != NULL)
    cs_layout_set_found (self->layout, self->found);
  gtk_widget_queue_draw (GTK_WIDGET (self));
}

/**
 * cs_graph_view_get_notes:
 * Returns: (transfer none) (nullable): the shown layout's notes (NULL-terminated), for the
 *   window's side panel
 */
const char * const *
cs_graph_view_get_notes (CsGraphView *self)
{
  g_return_val_if_fail (CS_IS_GRAPH_VIEW (self), NULL);
  return self->layout ? (const char * const *) self->layout->notes : NULL;
}

/**
 * cs_graph_view_draw_keys:
 * @cr: where to draw (a side-panel drawing area)
 * @width: its width, px
 * @height: (out) (optional): the height used, px
 *
 * Draws the dtype legend and, after a run, the value key of the shown layout at the top-left
 * of @cr (render/'s cs_draw_keys), so that the window shows them beside the graph instead of
 * over it.
 */
void
cs_graph_view_draw_keys (CsGraphView *self, cairo_t *cr, double width, double *height)
{
  double w = 0, h = 0;

  g_return_if_fail (CS_IS_GRAPH_VIEW (self));
  if (self->layout != NULL)
    cs_draw_keys (cr, self->layout, 0, 0, &w, &h);
  if (height != NULL)
    *height = h;
}

/**
 * cs_graph_view_draw_minimap:
 * @cr: a drawing area's cairo context
 * @width: its width, px
 * @height: its height, px
 *
 * Draws the whole graph fitted into @width x @height (cached until the layout or the size
 * changes) and the rectangle of what the view shows.
 */
void
cs_graph_view_draw_minimap (CsGraphView *self, cairo_t *cr, int width, int height)
{
  const CsLayout *l = self->layout;
  double x0, y0, x1, y1, vx0, vy0, vx1, vy1;
  int vw = gtk_widget_get_width (GTK_WIDGET (self)), vh = gtk_widget_get_height (GTK_WIDGET (self));

  g_return_if_fail (CS_IS_GRAPH_VIEW (self));
  cairo_set_source_rgb (cr, 0.97, 0.97, 0.97);
  cairo_paint (cr);
  if (l == NULL || !l->laid_out || width <= 0 || height <= 0)
    return;
  if (self->minimap == NULL || self->minimap_layout != l || self->minimap_w != width
      || self->minimap_h != height)
    {
      cairo_t *mc;

      g_clear_pointer (&self->minimap, cairo_surface_destroy);
      self->minimap = cairo_image_surface_create (CAIRO_FORMAT_ARGB32, width, height);
      self->minimap_layout = (CsLayout *) l;
      self->minimap_w = width;
      self->minimap_h = height;
      cs_view_init_fit (&self->minimap_view, l, width, height, 4, 1.0);
      mc = cairo_create (self->minimap);
      cairo_set_source_rgb (mc, 1, 1, 1);
      cairo_paint (mc);
      cs_draw_layout (mc, l, &self->minimap_view, width, height, 0);
      cairo_destroy (mc);
    }
  cairo_set_source_surface (cr, self->minimap, 0, 0);
  cairo_paint (cr);
  /* the part of the graph the view shows */
  cs_view_to_pt (&self->view, l, 0, 0, &vx0, &vy0);
  cs_view_to_pt (&self->view, l, vw, vh, &vx1, &vy1);
  cs_view_to_px (&self->minimap_view, l, vx0, vy0, &x0, &y0);
  cs_view_to_px (&self->minimap_view, l, vx1, vy1, &x1, &y1);
  cairo_rectangle (cr, x0, y0, x1 - x0, y1 - y0);
  cairo_set_source_rgba (cr, 0.0, 0.447, 0.698, 0.12);
  cairo_fill_preserve (cr);
  cairo_set_source_rgb (cr, 0.0, 0.447, 0.698);
  cairo_set_line_width (cr, 1.5);
  cairo_stroke (cr);
}

/**
 * cs_graph_view_minimap_move:
 * @x: px in the minimap (as drawn by cs_graph_view_draw_minimap())
 * @y: px
 *
 * Pans the view so that the graph point under (@x, @y) of the minimap is in its middle (a
 * click or drag on the minimap).
 */
void
cs_graph_view_minimap_move (CsGraphView *self, double x, double y)
{
  double px, py;
  CsRect box;

  g_return_if_fail (CS_IS_GRAPH_VIEW (self));
  if (self->layout == NULL || !self->layout->laid_out || self->minimap_layout != self->layout)
    return;
  cs_view_to_pt (&self->minimap_view, self->layout, x, y, &px, &py);
  box = (CsRect) { px, py, px, py };
  cs_view_center_on (&self->view, self->layout, &box, gtk_widget_get_width (GTK_WIDGET (self)),
                     gtk_widget_get_height (GTK_WIDGET (self)));
  self->need_fit = FALSE;
  gtk_widget_queue_draw (GTK_WIDGET (self));
  g_signal_emit (self, signals[VIEW_CHANGED], 0);
}

/**
 * cs_graph_view_get_view:
 * @view: (out): the pan and zoom shown (for tests and the minimap)
 */
void
cs_graph_view_get_view (CsGraphView *self, CsView *view)
{
  g_return_if_fail (CS_IS_GRAPH_VIEW (self));
  *view = self->view;
}

/**
 * cs_graph_view_set_view:
 * @view: the pan and zoom to show (another view's, for a side-by-side compare)
 *
 * Shows @view as it is (no fit on the next allocation) and emits CsGraphView::view-changed
 * (and notifies "zoom" when the scale differs), as a pan or zoom by the user does, so that the
 * overview and any other listener follow.  Two views that follow each other through this
 * (a side-by-side compare) guard against re-entry in their handler.
 */
void
cs_graph_view_set_view (CsGraphView *self, const CsView *view)
{
  gboolean zoomed;

  g_return_if_fail (CS_IS_GRAPH_VIEW (self) && view != NULL);
  zoomed = self->view.scale != view->scale;
  self->view = *view;
  self->need_fit = FALSE;
  gtk_widget_queue_draw (GTK_WIDGET (self));
  if (zoomed)
    g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_ZOOM]);
  g_signal_emit (self, signals[VIEW_CHANGED], 0);
}

/**
 * cs_graph_view_set_diff_older:
 * @older: the drawn trace is the older side of the diff (cs_layout_mark_diff() with
 *   this_is_newer FALSE: its casts the diff base lacks are marked REMOVED)
 */
void
cs_graph_view_set_diff_older (CsGraphView *self, gboolean older)
{
  g_return_if_fail (CS_IS_GRAPH_VIEW (self));
  if (!self->diff_older == !older)
    return;
  self->diff_older = older;
  apply_diff (self);
  gtk_widget_queue_draw (GTK_WIDGET (self));
}

/**
 * cs_graph_view_match:
 * @other: another view (the other side of a compare)
 * @other_id: a statement or group id of @other's trace
 *
 * The element of this view's trace that matches @other_id, found as the view finds its anchor
 * across policies and passes: the same group by name; the same op of the same initial-trace
 * statement (origin), of the same shape first; the same op writing a tensor of the same name
 * and shape; the same origin.
 * Returns: the id here, 0 when nothing matches
 */
guint32
cs_graph_view_match (CsGraphView *self, CsGraphView *other, guint32 other_id)
{
  const CsStmt *s;

  g_return_val_if_fail (CS_IS_GRAPH_VIEW (self) && CS_IS_GRAPH_VIEW (other), 0);
  if (self->trace == NULL || other->trace == NULL || other_id == 0)
    return 0;
  if (self->trace == other->trace)
    return other_id;
  if (CS_LAYOUT_IS_GROUP_ID (other_id))
    {
      gint g = CS_LAYOUT_GROUP_OF_ID (other_id);
      CsLayoutHit hit;

      if (other->layout == NULL || other->layout->grouping == NULL || self->layout == NULL
          || g < 0 || (guint) g >= other->layout->grouping->n_groups
          || !find_group_element (self->layout, other->layout->grouping->groups[g].name, &hit))
        return 0;
      return hit.kind == CS_LAYOUT_HIT_NODE ? self->layout->nodes[hit.index].stmt_id
                                            : self->layout->clusters[hit.index].stmt_id;
    }
  s = trace_find_stmt (other->trace, other_id);
  return s != NULL ? find_stmt_like (self->trace, s) : 0;
}

/**
 * cs_graph_view_zoom_by:
 * @factor: > 1 zooms in
 *
 * Zooms by @factor (within 2 %..800 %) about the selection when it is on screen, else about
 * the middle of the widget (keyboard +/-, the menu); a graph zoomed or panned off the widget
 * is brought back.
 */
void
cs_graph_view_zoom_by (CsGraphView *self, double factor)
{
  double x, y;

  g_return_if_fail (CS_IS_GRAPH_VIEW (self));
  zoom_point (self, &x, &y);
  zoom_at (self, factor, x, y);
}

/** Fits the whole graph into the widget (at most 150 %), however small it gets. */
void
cs_graph_view_fit (CsGraphView *self)
{
  g_return_if_fail (CS_IS_GRAPH_VIEW (self));
  self->need_fit = TRUE;
  self->fit_whole = TRUE;
  gtk_widget_queue_draw (GTK_WIDGET (self));
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_ZOOM]);
}

/** Returns: the zoom, px per Graphviz point (1.0 = 100 %). */
double
cs_graph_view_get_zoom (CsGraphView *self)
{
  g_return_val_if_fail (CS_IS_GRAPH_VIEW (self), 1.0);
  return self->view.scale;
}

/** Returns: TRUE while a layout is in flight. */
gboolean
cs_graph_view_is_busy (CsGraphView *self)
{
  g_return_val_if_fail (CS_IS_GRAPH_VIEW (self), FALSE);
  return self->busy;
}

/** Returns: (transfer none) (nullable): the display list shown (tests, export). */
CsLayout *
cs_graph_view_get_layout (CsGraphView *self)
{
  g_return_val_if_fail (CS_IS_GRAPH_VIEW (self), NULL);
  return self->layout;
}

/**
 * cs_graph_view_export:
 * @path: output file; the format comes from the extension (.svg, .png, .pdf, .dot)
 * @error: return location for a #CS_RENDER_ERROR
 *
 * Writes the whole graph with the current overlays (diff, selection, values) through render/'s
 * painter, the same one that draws the screen (cs_draw_export); PNG at 2 px per point.
 * Errors: CS_RENDER_ERROR_TRACE when nothing is laid out, CS_RENDER_ERROR_FORMAT for an unknown
 * extension, CS_RENDER_ERROR_IO when the file cannot be written.
 * Returns: TRUE on success
 */
gboolean
cs_graph_view_export (CsGraphView *self, const char *path, GError **error)
{
  CsExportFormat format;

  g_return_val_if_fail (CS_IS_GRAPH_VIEW (self), FALSE);
  g_return_val_if_fail (path != NULL, FALSE);

  if (self->layout == NULL || !self->layout->laid_out)
    {
      g_set_error (error, CS_RENDER_ERROR, CS_RENDER_ERROR_TRACE,
                   "Nothing to export: the graph is not laid out yet");
      return FALSE;
    }
  if (!cs_export_format_from_path (path, &format))
    {
      g_set_error (error, CS_RENDER_ERROR, CS_RENDER_ERROR_FORMAT,
                   "%s: unknown export format (use .svg, .png, .pdf or .dot)", path);
      return FALSE;
    }
  return cs_draw_export (self->layout, format, path, format == CS_EXPORT_PNG ? 2.0 : 1.0,
                         CS_DRAW_DEFAULT, error);
}

/**
 * cs_graph_view_count_badges:
 * @tensor_core: TRUE to count tensor-core badges, FALSE to count f32 warning badges
 *
 * Returns: the number of matmul/linear nodes drawn with that badge (0 before layout)
 */
guint
cs_graph_view_count_badges (CsGraphView *self, gboolean tensor_core)
{
  guint n = 0;

  g_return_val_if_fail (CS_IS_GRAPH_VIEW (self), 0);
  if (self->layout == NULL)
    return 0;
  for (guint i = 0; i < self->layout->n_nodes; i++)
    if (self->layout->nodes[i].badge == (tensor_core ? CS_LAYOUT_BADGE_TENSOR_CORE
                                                     : CS_LAYOUT_BADGE_F32))
      n++;
  return n;
}

/* ------------------------------------------------------------------------------------------ */
/* GObject                                                                                     */

static void
cs_graph_view_get_property (GObject *object, guint prop_id, GValue *value, GParamSpec *pspec)
{
  CsGraphView *self = CS_GRAPH_VIEW (object);

  switch (prop_id)
    {
    case PROP_BUSY:
      g_value_set_boolean (value, self->busy);
      break;
    case PROP_ZOOM:
      g_value_set_double (value, self->view.scale);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
cs_graph_view_dispose (GObject *object)
{
  CsGraphView *self = CS_GRAPH_VIEW (object);

  if (self->cancellable != NULL)
    g_cancellable_cancel (self->cancellable);
  g_clear_object (&self->cancellable);
  G_OBJECT_CLASS (cs_graph_view_parent_class)->dispose (object);
}

static void
cs_graph_view_finalize (GObject *object)
{
  CsGraphView *self = CS_GRAPH_VIEW (object);

  g_clear_pointer (&self->layout, cs_layout_unref);
  g_clear_pointer (&self->trace, cs_trace_unref);
  g_clear_pointer (&self->diff_base, cs_trace_unref);
  g_clear_pointer (&self->values, g_hash_table_unref);
  g_clear_pointer (&self->edge_values, g_hash_table_unref);
  g_clear_pointer (&self->values_title, g_free);
  g_clear_pointer (&self->user_casts, g_ptr_array_unref);
  g_clear_pointer (&self->error, g_free);
  g_clear_pointer (&self->placeholder, g_free);
  g_clear_pointer (&self->found, g_hash_table_unref);
  g_clear_pointer (&self->minimap, cairo_surface_destroy);
  anchor_clear (&self->anchor);
  g_clear_handle_id (&self->busy_tick, g_source_remove);
  g_clear_pointer (&self->diff, cs_layout_diff_source_unref);
  g_clear_pointer (&self->user_casts_keep, g_ptr_array_unref);
  cs_render_options_clear (&self->options);
  G_OBJECT_CLASS (cs_graph_view_parent_class)->finalize (object);
}

static void
cs_graph_view_class_init (CsGraphViewClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  object_class->get_property = cs_graph_view_get_property;
  object_class->dispose = cs_graph_view_dispose;
  object_class->finalize = cs_graph_view_finalize;
  widget_class->snapshot = cs_graph_view_snapshot;

  properties[PROP_BUSY] =
    g_param_spec_boolean ("busy", NULL, NULL, FALSE, G_PARAM_READABLE | G_PARAM_STATIC_STRINGS);
  properties[PROP_ZOOM] =
    g_param_spec_double ("zoom", NULL, NULL, 0, G_MAXDOUBLE, 1.0,
                         G_PARAM_READABLE | G_PARAM_STATIC_STRINGS);
  g_object_class_install_properties (object_class, N_PROPS, properties);

  /**
   * CsGraphView::node-selected:
   * @stmt_id: the top-level statement id selected by the user (0 = none)
   */
  signals[NODE_SELECTED] =
    g_signal_new ("node-selected", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0,
                  NULL, NULL, NULL, G_TYPE_NONE, 1, G_TYPE_UINT);
  /**
   * CsGraphView::layout-changed:
   *
   * A new layout is shown (after a trace, policy, pass or expand / collapse change): its
   * notes, groups and diff marks may differ.
   */
  signals[LAYOUT_CHANGED] =
    g_signal_new ("layout-changed", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0,
                  NULL, NULL, NULL, G_TYPE_NONE, 0);
  /**
   * CsGraphView::view-changed:
   *
   * The pan or zoom changed (the minimap follows it).
   */
  signals[VIEW_CHANGED] =
    g_signal_new ("view-changed", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0,
                  NULL, NULL, NULL, G_TYPE_NONE, 0);

  gtk_widget_class_set_css_name (widget_class, "csgraphview");
}

static void
cs_graph_view_init (CsGraphView *self)
{
  GtkGesture *click, *drag, *pinch;
  GtkEventController *scroll, *motion, *key;

  cs_render_options_init (&self->options);
  /* finished layouts of this view (expand / collapse back, a pass or policy seen before) */
  self->options.cache = cs_layout_cache_new (VIEW_CACHE_LAYOUTS);
  self->view.scale = 1.0;
  gtk_widget_set_focusable (GTK_WIDGET (self), TRUE);
  gtk_widget_set_has_tooltip (GTK_WIDGET (self), TRUE);
  gtk_widget_set_overflow (GTK_WIDGET (self), GTK_OVERFLOW_HIDDEN);
  g_signal_connect (self, "query-tooltip", G_CALLBACK (query_tooltip_cb), self);

  click = gtk_gesture_click_new ();
  g_signal_connect (click, "pressed", G_CALLBACK (click_pressed_cb), self);
  gtk_widget_add_controller (GTK_WIDGET (self), GTK_EVENT_CONTROLLER (click));

  drag = gtk_gesture_drag_new ();
  g_signal_connect (drag, "drag-begin", G_CALLBACK (drag_begin_cb), self);
  g_signal_connect (drag, "drag-update", G_CALLBACK (drag_update_cb), self);
  g_signal_connect (drag, "drag-end", G_CALLBACK (drag_end_cb), self);
  gtk_widget_add_controller (GTK_WIDGET (self), GTK_EVENT_CONTROLLER (drag));

  pinch = gtk_gesture_zoom_new ();
  g_signal_connect (pinch, "begin", G_CALLBACK (pinch_begin_cb), self);
  g_signal_connect (pinch, "scale-changed", G_CALLBACK (pinch_scale_changed_cb), self);
  gtk_widget_add_controller (GTK_WIDGET (self), GTK_EVENT_CONTROLLER (pinch));

  scroll = gtk_event_controller_scroll_new (GTK_EVENT_CONTROLLER_SCROLL_BOTH_AXES);
  g_signal_connect (scroll, "scroll", G_CALLBACK (scroll_cb), self);
  gtk_widget_add_controller (GTK_WIDGET (self), scroll);

  motion = gtk_event_controller_motion_new ();
  g_signal_connect (motion, "motion", G_CALLBACK (motion_cb), self);
  gtk_widget_add_controller (GTK_WIDGET (self), motion);

  key = gtk_event_controller_key_new ();
  g_signal_connect (key, "key-pressed", G_CALLBACK (key_pressed_cb), self);
  gtk_widget_add_controller (GTK_WIDGET (self), key);
}

/**
 * cs_graph_view_set_show_legend:
 * @show: draw the dtype legend at the top-left (the default) or not
 *
 * The legend is drawn in the window's side panel (cs_graph_view_draw_keys()), never on the
 * graph; this flag is what the window's View > Legend toggle shows.
 */
void
cs_graph_view_set_show_legend (CsGraphView *self, gboolean show)
{
  g_return_if_fail (CS_IS_GRAPH_VIEW (self));
  if (!self->hide_legend == !!show)
    return;
  self->hide_legend = !show;
  gtk_widget_queue_draw (GTK_WIDGET (self));
}

/**
 * cs_graph_view_set_fold_repeats:
 * @fold: draw each run of consecutive collapsed layers with the same structure as one node
 *   (the default; render/cs-group.h cs_grouping_fold_repeats()) or every layer on its own
 *
 * Lays the graph out anew when the choice changes (View > Fold Repeated Layers); the view
 * stays anchored on the selection.
 */
void
cs_graph_view_set_fold_repeats (CsGraphView *self, gboolean fold)
{
  g_return_if_fail (CS_IS_GRAPH_VIEW (self));
  if (!self->options.unfold_repeats == !!fold)
    return;
  self->options.unfold_repeats = !fold;
  if (self->trace != NULL)
    start_layout (self);
}

/** cs_graph_view_get_fold_repeats: Returns: whether runs of repeated layers are folded */
gboolean
cs_graph_view_get_fold_repeats (CsGraphView *self)
{
  g_return_val_if_fail (CS_IS_GRAPH_VIEW (self), TRUE);
  return !self->options.unfold_repeats;
}

/**
 * cs_graph_view_set_precision_lens:
 * @on: draw the precision lens (render/cs-layout.h cs_layout_set_precision_lens(): compute
 *   dtypes on edges, rounding points)
 */
void
cs_graph_view_set_precision_lens (CsGraphView *self, gboolean on)
{
  g_return_if_fail (CS_IS_GRAPH_VIEW (self));
  self->precision_lens = on;
  apply_lens (self);
  gtk_widget_queue_draw (GTK_WIDGET (self));
}

/** cs_graph_view_get_precision_lens: Returns: whether the precision lens is drawn */
gboolean
cs_graph_view_get_precision_lens (CsGraphView *self)
{
  g_return_val_if_fail (CS_IS_GRAPH_VIEW (self), FALSE);
  return self->precision_lens;
}

/* Takes @removed and @keep without marking anything; TRUE when they changed. */
static gboolean
set_user_casts (CsGraphView *self, GPtrArray *removed, GPtrArray *keep)
{
  if (removed == self->user_casts)
    return FALSE;
  if (removed != NULL)
    g_ptr_array_ref (removed);
  if (keep != NULL)
    g_ptr_array_ref (keep);
  g_clear_pointer (&self->user_casts, g_ptr_array_unref);
  g_clear_pointer (&self->user_casts_keep, g_ptr_array_unref);
  self->user_casts = removed;
  self->user_casts_keep = keep;
  self->user_casts_serial = ++overlay_serial;
  return TRUE;
}

/**
 * cs_graph_view_set_user_casts:
 * @removed: (nullable) (element-type CsRemovedCast): casts the user wrote that a pass removed
 *   (core/cs-lens.h); referenced, marked on this and every later layout
 *   (cs_layout_mark_user_casts()); NULL clears the marks
 * @keep: (nullable) (element-type CsTrace): the traces @removed borrows from (referenced, so
 *   that a layout worker marking them can rely on them)
 */
void
cs_graph_view_set_user_casts (CsGraphView *self, GPtrArray *removed, GPtrArray *keep)
{
  g_return_if_fail (CS_IS_GRAPH_VIEW (self));
  if (!set_user_casts (self, removed, keep))
    return;
  /* the picture of another trace while the new one is laid out (which marks them) */
  if (self->layout != NULL && self->layout->trace == self->trace)
    apply_lens (self);
  gtk_widget_queue_draw (GTK_WIDGET (self));
}

/** cs_graph_view_get_show_legend: Returns: whether the dtype legend is drawn */
gboolean
cs_graph_view_get_show_legend (CsGraphView *self)
{
  g_return_val_if_fail (CS_IS_GRAPH_VIEW (self), TRUE);
  return !self->hide_legend;
}
