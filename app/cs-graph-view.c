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

#include "cs-render.h"

#define MIN_SCALE 0.02   /* px per pt */
#define MAX_SCALE 8.0    /* px per pt */
#define FIT_MARGIN_PX 24.0
#define MIN_READABLE_SCALE 0.5  /* px per pt: below this, labels (10 pt) are under 5 px */

struct _CsGraphView
{
  GtkWidget        parent_instance;

  CsTrace         *trace;         /* (nullable, owned ref) the trace drawn */
  CsTrace         *diff_base;     /* (nullable, owned ref) older trace the diff compares with */
  CsLayout        *layout;        /* (nullable, owned ref) display list of @trace once laid out */
  CsLayoutDiffStats diff_stats;   /* marks found against @diff_base */
  CsRenderOptions  options;       /* detail and per-statement expansion */
  GCancellable    *cancellable;   /* the layout in flight */
  gboolean         busy;          /* a layout is in flight */
  char            *error;         /* (nullable) layout error shown in place of the graph */
  char            *placeholder;   /* (nullable) text shown when there is no trace */

  CsView           view;          /* pan / zoom */
  gboolean         need_fit;      /* fit on the next allocation */
  gboolean         fit_whole;     /* that fit shows the whole graph even when unreadable */
  double           drag_tx;       /* px: view.tx at drag begin */
  double           drag_ty;       /* px: view.ty at drag begin */
  double           pointer_x;     /* px: last pointer position (zoom centre) */
  double           pointer_y;
  double           pinch_scale;   /* view.scale at pinch begin */

  guint32          selected;      /* top-level CsStmt.id, 0 = none */
  GHashTable      *values;        /* (nullable, owned ref) stmt id -> double* (run overlay) */
  GHashTable      *edge_values;   /* (nullable, owned ref) proxy name -> double* */
  char            *values_title;  /* scale title ("region time (ms)") */
  gboolean         hide_legend;   /* the dtype legend is not drawn (View > Legend off) */
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
  N_SIGNALS
};

static GParamSpec *properties[N_PROPS];
static guint signals[N_SIGNALS];

static void start_layout (CsGraphView *self);

/* ------------------------------------------------------------------------------------------ */
/* Overlays applied to the layout (owner thread only)                                         */

static void
apply_selection (CsGraphView *self)
{
  CsLayoutHit hit = { CS_LAYOUT_HIT_NONE, 0 };
  gint i;

  if (self->layout == NULL)
    return;
  if (self->selected != 0)
    {
      if ((i = cs_layout_find_node (self->layout, self->selected)) >= 0)
        hit = (CsLayoutHit) { CS_LAYOUT_HIT_NODE, (guint) i };
      else if ((i = cs_layout_find_cluster (self->layout, self->selected)) >= 0)
        hit = (CsLayoutHit) { CS_LAYOUT_HIT_CLUSTER, (guint) i };
    }
  cs_layout_set_selection (self->layout, hit.kind == CS_LAYOUT_HIT_NONE ? NULL : &hit);
}

static void
apply_diff (CsGraphView *self)
{
  memset (&self->diff_stats, 0, sizeof self->diff_stats);
  if (self->layout == NULL)
    return;
  cs_layout_clear_marks (self->layout);
  if (self->diff_base != NULL && self->diff_base != self->trace)
    cs_layout_mark_diff (self->layout, self->diff_base, TRUE, &self->diff_stats);
}

static void
apply_values (CsGraphView *self)
{
  GHashTableIter iter;
  gpointer key, value;
  double lo = G_MAXDOUBLE, hi = -G_MAXDOUBLE;

  if (self->layout == NULL)
    return;
  cs_layout_clear_values (self->layout);
  if (self->values == NULL && self->edge_values == NULL)
    return;
  if (self->values != NULL)
    {
      g_hash_table_iter_init (&iter, self->values);
      while (g_hash_table_iter_next (&iter, &key, &value))
        {
          double v = *(double *) value;

          if (cs_layout_set_stmt_value (self->layout, GPOINTER_TO_UINT (key), v) > 0)
            {
              lo = MIN (lo, v);
              hi = MAX (hi, v);
            }
        }
    }
  if (self->edge_values != NULL)
    {
      g_hash_table_iter_init (&iter, self->edge_values);
      while (g_hash_table_iter_next (&iter, &key, &value))
        {
          double v = *(double *) value;

          if (cs_layout_set_edge_value (self->layout, key, v) > 0)
            {
              lo = MIN (lo, v);
              hi = MAX (hi, v);
            }
        }
    }
  /* Errors and times are magnitudes: the scale starts at 0 so that small reads as small. */
  if (lo > 0)
    lo = 0;
  if (lo <= hi)
    cs_layout_set_value_scale (self->layout, self->values_title ? self->values_title : "value",
                               lo, hi > lo ? hi : lo + 1e-30);
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
      self->layout = g_steal_pointer (&layout);
      apply_selection (self);
      apply_diff (self);
      apply_values (self);
      self->need_fit = TRUE;
    }
  gtk_widget_queue_draw (GTK_WIDGET (self));
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_BUSY]);
}

static void
start_layout (CsGraphView *self)
{
  gboolean was_busy = self->busy;

  if (self->cancellable != NULL)
    g_cancellable_cancel (self->cancellable);
  g_clear_object (&self->cancellable);
  g_clear_pointer (&self->error, g_free);

  if (self->trace == NULL)
    {
      g_clear_pointer (&self->layout, cs_layout_unref);
      self->busy = FALSE;
    }
  else
    {
      self->cancellable = g_cancellable_new ();
      self->busy = TRUE;
      cs_layout_new_async (self->trace, &self->options, self->cancellable, layout_ready_cb,
                           g_object_ref (self));
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
          double lw = 0, lh = 0;

          /* Keep the legend (top-left) clear of the graph when there is room beside it. */
          if (!self->hide_legend)
            cs_draw_legend_size (self->layout, CS_DRAW_DEFAULT, &lw, &lh);
          if (width - lw < 240)
            lw = 0;
          cs_view_init_fit (&self->view, self->layout, width - lw, height, FIT_MARGIN_PX, 1.5);
          self->view.tx += lw;
          if (!self->fit_whole && self->view.scale < MIN_READABLE_SCALE)
            {
              /* A graph too big to read when fitted opens readable at its top instead (fitted
               * to the width when that is enough); Fit (Ctrl+0) shows all of it. */
              double bw = self->layout->bb.x1 - self->layout->bb.x0;
              double sw = bw > 0 ? (width - lw - 2 * FIT_MARGIN_PX) / bw : 1.0;

              self->view.scale = CLAMP (sw, MIN_READABLE_SCALE, 1.0);
              self->view.tx = lw + FIT_MARGIN_PX;
              self->view.ty = FIT_MARGIN_PX;
            }
          self->need_fit = FALSE;
          self->fit_whole = FALSE;
        }
      cs_draw_layout (cr, self->layout, &self->view, width, height,
                      self->hide_legend ? CS_DRAW_DEFAULT & ~CS_DRAW_LEGEND : CS_DRAW_DEFAULT);
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

/* The top-level statement a hit stands for (0 for inputs, outputs and edges). */
static guint32
hit_stmt (CsGraphView *self, const CsLayoutHit *hit)
{
  switch (hit->kind)
    {
    case CS_LAYOUT_HIT_NODE:
      return self->layout->nodes[hit->index].top_stmt_id;
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

static void
click_pressed_cb (GtkGestureClick *gesture, int n_press, double x, double y, CsGraphView *self)
{
  CsLayoutHit hit;
  guint32 id = 0;

  gtk_widget_grab_focus (GTK_WIDGET (self));
  if (hit_at (self, x, y, &hit))
    id = hit_stmt (self, &hit);
  if (n_press == 2 && hit.kind == CS_LAYOUT_HIT_NODE && self->layout->nodes[hit.index].expandable)
    {
      /* Double click: draw the statement as its decomposition. */
      cs_graph_view_toggle_expanded (self, self->layout->nodes[hit.index].stmt_id);
      return;
    }
  if (n_press == 2 && hit.kind == CS_LAYOUT_HIT_CLUSTER
      && self->layout->clusters[hit.index].kind == CS_LAYOUT_CLUSTER_EXPANDED)
    {
      /* Double click on an expanded statement's box: collapse it again. */
      cs_graph_view_toggle_expanded (self, self->layout->clusters[hit.index].stmt_id);
      return;
    }
  set_selected (self, id, TRUE);
}

static void
drag_begin_cb (GtkGestureDrag *gesture, double x, double y, CsGraphView *self)
{
  self->drag_tx = self->view.tx;
  self->drag_ty = self->view.ty;
}

static void
drag_update_cb (GtkGestureDrag *gesture, double dx, double dy, CsGraphView *self)
{
  self->view.tx = self->drag_tx + dx;
  self->view.ty = self->drag_ty + dy;
  gtk_widget_queue_draw (GTK_WIDGET (self));
}

static void
zoom_at (CsGraphView *self, double factor, double x, double y)
{
  double target = CLAMP (self->view.scale * factor, MIN_SCALE, MAX_SCALE);

  if (self->layout == NULL || target == self->view.scale)
    return;
  cs_view_zoom_at (&self->view, target / self->view.scale, x, y);
  self->need_fit = FALSE;
  gtk_widget_queue_draw (GTK_WIDGET (self));
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_ZOOM]);
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
      gtk_widget_queue_draw (GTK_WIDGET (self));
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
  double w = gtk_widget_get_width (GTK_WIDGET (self));
  double h = gtk_widget_get_height (GTK_WIDGET (self));

  if (state & (GDK_CONTROL_MASK | GDK_ALT_MASK))
    return FALSE;
  switch (keyval)
    {
    case GDK_KEY_plus:
    case GDK_KEY_equal:
    case GDK_KEY_KP_Add:
      zoom_at (self, 1.25, w / 2, h / 2);
      return TRUE;
    case GDK_KEY_minus:
    case GDK_KEY_KP_Subtract:
      zoom_at (self, 0.8, w / 2, h / 2);
      return TRUE;
    case GDK_KEY_0:
    case GDK_KEY_KP_0:
      cs_graph_view_fit (self);
      return TRUE;
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

  if (trace != NULL)
    cs_trace_ref (trace);
  g_clear_pointer (&self->trace, cs_trace_unref);
  self->trace = trace;
  if (diff_base != NULL)
    cs_trace_ref (diff_base);
  g_clear_pointer (&self->diff_base, cs_trace_unref);
  self->diff_base = diff_base;
  /* Expansion overrides name statement ids of the old trace: start afresh. */
  g_clear_pointer (&self->options.expand, g_hash_table_unref);
  start_layout (self);
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
  gint i;

  g_return_if_fail (CS_IS_GRAPH_VIEW (self));
  set_selected (self, stmt_id, FALSE);
  if (!center || self->layout == NULL || !self->layout->laid_out || stmt_id == 0)
    return;
  if ((i = cs_layout_find_node (self->layout, stmt_id)) >= 0)
    {
      CsRect box = self->layout->nodes[i].box;
      double x0, y0, x1, y1;
      int w = gtk_widget_get_width (GTK_WIDGET (self));
      int h = gtk_widget_get_height (GTK_WIDGET (self));

      /* Scroll only when the node is not fully visible. */
      cs_view_to_px (&self->view, self->layout, box.x0, box.y1, &x0, &y0);
      cs_view_to_px (&self->view, self->layout, box.x1, box.y0, &x1, &y1);
      if (x0 < 0 || y0 < 0 || x1 > w || y1 > h)
        cs_view_center_on (&self->view, self->layout, &box, w, h);
    }
  else if ((i = cs_layout_find_cluster (self->layout, stmt_id)) >= 0)
    cs_view_center_on (&self->view, self->layout, &self->layout->clusters[i].box,
                       gtk_widget_get_width (GTK_WIDGET (self)),
                       gtk_widget_get_height (GTK_WIDGET (self)));
  self->need_fit = FALSE;
  gtk_widget_queue_draw (GTK_WIDGET (self));
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

  for (guint i = 0; i < layout->n_nodes; i++)
    if (self->selected != 0 && layout->nodes[i].top_stmt_id == self->selected)
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

      for (guint i = 0; self->trace != NULL && i < self->trace->n_stmts; i++)
        {
          guint32 id = self->trace->stmts[i]->id;

          if (cs_layout_find_node (layout, id) < 0 && cs_layout_find_cluster (layout, id) < 0)
            continue;
          if (id == self->selected)
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
  expanded = self->layout != NULL && cs_layout_find_cluster (self->layout, stmt_id) >= 0;
  cs_render_options_set_expanded (&self->options, stmt_id,
                                  expanded ? CS_RENDER_EXPAND_OFF : CS_RENDER_EXPAND_ON);
  start_layout (self);
}

/** Zooms by @factor (> 1 in) around the middle of the widget, within 2 %..800 %. */
void
cs_graph_view_zoom_by (CsGraphView *self, double factor)
{
  g_return_if_fail (CS_IS_GRAPH_VIEW (self));
  zoom_at (self, factor, gtk_widget_get_width (GTK_WIDGET (self)) / 2.0,
           gtk_widget_get_height (GTK_WIDGET (self)) / 2.0);
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
  g_clear_pointer (&self->error, g_free);
  g_clear_pointer (&self->placeholder, g_free);
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

  gtk_widget_class_set_css_name (widget_class, "csgraphview");
}

static void
cs_graph_view_init (CsGraphView *self)
{
  GtkGesture *click, *drag, *pinch;
  GtkEventController *scroll, *motion, *key;

  cs_render_options_init (&self->options);
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
 * On a small window the legend covers part of the graph; hiding it gives the graph the room
 * (the next fit uses the whole width).
 */
void
cs_graph_view_set_show_legend (CsGraphView *self, gboolean show)
{
  g_return_if_fail (CS_IS_GRAPH_VIEW (self));
  if (!self->hide_legend == !!show)
    return;
  self->hide_legend = !show;
  self->need_fit = TRUE;
  gtk_widget_queue_draw (GTK_WIDGET (self));
}

/** cs_graph_view_get_show_legend: Returns: whether the dtype legend is drawn */
gboolean
cs_graph_view_get_show_legend (CsGraphView *self)
{
  g_return_val_if_fail (CS_IS_GRAPH_VIEW (self), TRUE);
  return !self->hide_legend;
}
