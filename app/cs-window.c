/* cs-window.c: CsWindow, castscope's main window.
 *
 * Loading and analysis run on worker threads (GTask): the window parses the file, runs the
 * pipeline under the policy of the side panel (cs-analysis.c), and shows one family of traces
 * (forward or backward, the stack switcher) at one pass (the slider).  The graph (CsGraphView),
 * the trace text and the details panel follow one selection: a statement id.
 *
 * Actions, the policy panel, find and export: cs-window-actions.c.  Run: cs-window-run.c.
 */
#include "cs-config.h"

#include "cs-window-private.h"

#include "cs-lens.h"

#include <math.h>
#include <string.h>

#include "cs-diff.h"
#include "cs-ops.h"
#include "cs-parse.h"
#include "cs-pipeline.h"
#include "cs-print.h"
#include "cs-stats.h"

G_DEFINE_FINAL_TYPE (CsWindow, cs_window, GTK_TYPE_APPLICATION_WINDOW)

static void update_shown (CsWindow *self);
static void update_side_panel (CsWindow *self);
static const CsGroup *shown_group (CsWindow *self, guint32 stmt_id);
typedef struct
{
  char       *policy;      /* cs_policy_to_string() */
  CsAnalysis *analysis;    /* (owned) */
} SeenPolicy;

static void seen_policy_free (gpointer data);

static void seen_policy_add (CsWindow *self, CsAnalysis *analysis);

/* ------------------------------------------------------------------------------------------ */
/* Jobs and errors                                                                             */

void
_cs_window_job_begin (CsWindow *self)
{
  if (self->n_jobs++ == 0 && self->busy_spinner != NULL)
    gtk_spinner_start (self->busy_spinner);
}

/* Jobs may end after the window was closed (their tasks hold a reference): the template
 * children are gone then (busy_spinner NULL), and dispose bumped the generation so that every
 * late result is dropped as stale. */
void
_cs_window_job_end (CsWindow *self)
{
  g_return_if_fail (self->n_jobs > 0);
  if (--self->n_jobs == 0 && self->busy_spinner != NULL)
    gtk_spinner_stop (self->busy_spinner);
}

/**
 * cs_window_show_error:
 * @self: a #CsWindow
 * @message: the message (plain text; file:line:col for parse errors)
 *
 * Shows @message in the error info bar over the top of the graph canvas until it is closed
 * (nothing under it moves).  The window keeps whatever it showed before.
 */
void
cs_window_show_error (CsWindow *self, const char *message)
{
  g_return_if_fail (CS_IS_WINDOW (self));

  gtk_info_bar_set_message_type (self->error_bar, GTK_MESSAGE_ERROR);
  gtk_label_set_text (self->error_label, message);
  gtk_info_bar_set_revealed (self->error_bar, TRUE);
}

/* A note that is not an error (the trace is already final, ...): same bar, warning colours. */
static void
show_warning (CsWindow *self, const char *message)
{
  gtk_info_bar_set_message_type (self->error_bar, GTK_MESSAGE_WARNING);
  gtk_label_set_text (self->error_label, message);
  gtk_info_bar_set_revealed (self->error_bar, TRUE);
}

static void
error_bar_response_cb (CsWindow *self, int response)
{
  gtk_info_bar_set_revealed (self->error_bar, FALSE);
}

static void
hide_error (CsWindow *self)
{
  gtk_info_bar_set_revealed (self->error_bar, FALSE);
}

/* The canvas overlay's get-child-position: the error bar spans the canvas's top edge, and
 * every other child aligned to the top (the Find bar, the busy spinner) is placed below the
 * error bar while it shows (its height as it reveals and hides), so the two never cover each
 * other; children aligned elsewhere take GtkOverlay's own placement (the diff bar is not over
 * the canvas: it heads the side panel).  Nothing under the overlay moves.  Returns TRUE when
 * it placed @child. */
static gboolean
canvas_overlay_child_position_cb (GtkOverlay   *overlay,
                                  GtkWidget    *child,
                                  GdkRectangle *alloc,
                                  CsWindow     *self)
{
  GtkWidget *bar = GTK_WIDGET (self->error_bar);
  int width = gtk_widget_get_width (GTK_WIDGET (overlay));
  int height = gtk_widget_get_height (GTK_WIDGET (overlay));
  int bar_h = 0;
  GtkRequisition min, nat;

  if (child == bar || gtk_widget_get_valign (child) != GTK_ALIGN_START)
    return FALSE;
  if (gtk_widget_get_visible (bar))
    {
      int bar_min_w, bar_nat_h;

      gtk_widget_measure (bar, GTK_ORIENTATION_HORIZONTAL, -1, &bar_min_w, NULL, NULL, NULL);
      gtk_widget_measure (bar, GTK_ORIENTATION_VERTICAL, MAX (width, bar_min_w), NULL, &bar_nat_h,
                          NULL, NULL);
      /* a hidden bar measures its margins only */
      if (bar_nat_h > gtk_widget_get_margin_top (bar) + gtk_widget_get_margin_bottom (bar))
        bar_h = bar_nat_h;
    }
  gtk_widget_get_preferred_size (child, &min, &nat);
  alloc->width = MAX (min.width, MIN (width, nat.width));
  alloc->height = MAX (min.height, MIN (height, nat.height));
  alloc->y = bar_h;
  switch (gtk_widget_get_halign (child))
    {
    case GTK_ALIGN_FILL:
      alloc->width = MAX (alloc->width, width);
      alloc->x = 0;
      break;
    case GTK_ALIGN_CENTER:
      alloc->x = (width - alloc->width) / 2;
      break;
    case GTK_ALIGN_END:
      alloc->x = gtk_widget_get_direction (child) == GTK_TEXT_DIR_RTL ? 0 : width - alloc->width;
      break;
    case GTK_ALIGN_START:
    case GTK_ALIGN_BASELINE:
    default:
      alloc->x = gtk_widget_get_direction (child) == GTK_TEXT_DIR_RTL ? width - alloc->width : 0;
      break;
    }
  return TRUE;
}

/* ------------------------------------------------------------------------------------------ */
/* Which trace is shown                                                                        */

CsFamily
_cs_window_get_family (CsWindow *self)
{
  const char *name = gtk_stack_get_visible_child_name (self->graph_stack);

  return g_strcmp0 (name, "backward") == 0 ? CS_FAMILY_BACKWARD : CS_FAMILY_FORWARD;
}

CsGraphView *
_cs_window_get_view (CsWindow *self, CsFamily family)
{
  return family == CS_FAMILY_BACKWARD ? self->backward_view : self->forward_view;
}

static CsTrace *
family_trace (CsWindow *self, CsAnalysis *analysis, CsFamily family)
{
  guint n;

  if (analysis == NULL)
    return NULL;
  n = cs_analysis_n_passes (analysis, family);
  if (n == 0)
    return NULL;
  return cs_analysis_get_trace (analysis, family, MIN (self->pass_index[family], n - 1));
}

/** The trace of the visible family at its slider position, or NULL. */
CsTrace *
_cs_window_get_shown_trace (CsWindow *self)
{
  return family_trace (self, self->analysis, _cs_window_get_family (self));
}

/* The trace of the previous result at the same pass, for the diff overlay. */
static CsTrace *
diff_base_for (CsWindow *self, CsFamily family)
{
  CsTrace *now;
  guint n;

  if (self->previous == NULL || self->analysis == NULL)
    return NULL;
  now = family_trace (self, self->analysis, family);
  n = cs_analysis_n_passes (self->previous, family);
  if (now == NULL || n == 0)
    return NULL;
  /* Match by pass name; fall back to the final trace. */
  for (guint i = 0; i < n; i++)
    if (g_strcmp0 (cs_analysis_pass_name (self->previous, family, i), now->pass) == 0)
      return cs_analysis_get_trace (self->previous, family, i);
  return cs_analysis_get_final (self->previous, family);
}

gboolean
_cs_window_is_busy (CsWindow *self)
{
  return self->n_jobs > 0
         || cs_graph_view_is_busy (self->forward_view)
         || cs_graph_view_is_busy (self->backward_view)
         || (self->comparing && cs_graph_view_is_busy (self->compare_view));
}

/* ------------------------------------------------------------------------------------------ */
/* Trace text                                                                                  */

/* Shows the text of @trace (the printed one the analysis holds, or printed here) with its
 * statements' ranges.  The view keeps its scroll position, highlight and selection when the
 * text is the one it shows already. */
static void
update_text (CsWindow *self, CsTrace *trace)
{
  g_autofree char *text = NULL;

  if (trace == NULL)
    {
      g_array_set_size (self->stmt_ranges, 0);
      cs_line_view_set_text (self->trace_view, "");
      return;
    }
  {
    /* the final forward trace was printed with the result, on its worker */
    const GArray *ranges = NULL;
    const char *ready = self->analysis
                        ? cs_analysis_get_printed (self->analysis, trace, &ranges) : NULL;

    if (ready != NULL)
      {
        g_array_set_size (self->stmt_ranges, 0);
        g_array_append_vals (self->stmt_ranges, ranges->data, ranges->len);
        cs_line_view_set_text (self->trace_view, ready);
        return;
      }
  }
  text = cs_analysis_print_with_ranges (trace, self->stmt_ranges);
  cs_line_view_set_text (self->trace_view, text);
}

/**
 * _cs_window_dup_trace_text:
 * Returns: (transfer full): the text of the trace view (for tests)
 */
char *
_cs_window_dup_trace_text (CsWindow *self)
{
  return g_strdup (cs_line_view_get_text (self->trace_view));
}

static const CsStmtRange *
find_range (CsWindow *self, guint32 stmt_id)
{
  for (guint i = 0; i < self->stmt_ranges->len; i++)
    {
      const CsStmtRange *r = &g_array_index (self->stmt_ranges, CsStmtRange, i);
      if (r->stmt_id == stmt_id)
        return r;
    }
  return NULL;
}

static void
highlight_text (CsWindow *self, guint32 stmt_id, gboolean scroll)
{
  CsTrace *trace = _cs_window_get_shown_trace (self);
  const CsStmtRange *range = NULL, *last = NULL;
  const CsGroup *group = shown_group (self, stmt_id);
  guint top;

  /* a prim inside a region or decomposition: its top-level statement's text; a group: the
   * text from its first to its last statement */
  if (group != NULL && trace != NULL)
    {
      range = find_range (self, trace->stmts[group->first]->id);
      last = find_range (self, trace->stmts[group->last]->id);
    }
  else if (_cs_window_find_stmt_deep (trace, stmt_id, &top) != NULL)
    range = find_range (self, trace->stmts[top]->id);
  if (range == NULL)
    {
      cs_line_view_set_highlight (self->trace_view, -1, -1);
      return;
    }
  cs_line_view_set_highlight (self->trace_view, range->start, last ? last->end : range->end);
  if (scroll)
    cs_line_view_scroll_to_line (self->trace_view,
                                 cs_line_view_line_at_offset (self->trace_view, range->start));
}

static void
text_offset_clicked_cb (CsWindow *self, int offset, CsLineView *view)
{
  _cs_window_select_text_offset (self, offset);
}

/**
 * _cs_window_select_text_offset:
 * @offset: a character offset in the trace text
 *
 * Selects the statement printed at @offset (its line or its decomposition comments).
 * Returns: the statement id selected, 0 when @offset is outside every statement
 */
guint32
_cs_window_select_text_offset (CsWindow *self, int offset)
{
  for (guint i = 0; i < self->stmt_ranges->len; i++)
    {
      const CsStmtRange *r = &g_array_index (self->stmt_ranges, CsStmtRange, i);

      if (offset >= r->start && offset <= r->end)
        {
          _cs_window_select_stmt (self, r->stmt_id, FALSE);
          return r->stmt_id;
        }
    }
  return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Details panel                                                                               */

static void
append_proxy_line (GString *out, const CsProxy *proxy)
{
  g_autofree char *type = cs_proxy_type_string (proxy);
  g_autofree char *line = g_markup_printf_escaped ("  <tt>%s</tt>  %s\n", proxy->name,
                                                   type ? type : "?");
  g_string_append (out, line);
}

static const CsStmt *
find_in (const CsStmt *s, guint32 stmt_id)
{
  const CsStmt *r;

  if (s->id == stmt_id)
    return s;
  for (guint i = 0; i < s->n_subs; i++)
    if ((r = find_in (s->subs[i], stmt_id)) != NULL)
      return r;
  return NULL;
}

/**
 * _cs_window_find_stmt_deep:
 * @trace: (nullable): a trace
 * @stmt_id: a statement id at any level (0 and group ids find nothing)
 * @top_index: (out) (optional): index in trace->stmts of the top-level statement holding it
 *
 * Returns: (nullable): the statement (a top-level one, or a prim of a region or decomposition)
 */
const CsStmt *
_cs_window_find_stmt_deep (const CsTrace *trace, guint32 stmt_id, guint *top_index)
{
  if (trace == NULL || stmt_id == 0 || CS_LAYOUT_IS_GROUP_ID (stmt_id))
    return NULL;
  for (guint i = 0; i < trace->n_stmts; i++)
    {
      const CsStmt *r = find_in (trace->stmts[i], stmt_id);

      if (r != NULL)
        {
          if (top_index != NULL)
            *top_index = i;
          return r;
        }
    }
  return NULL;
}

static const CsStmt *
find_stmt (const CsTrace *trace, guint32 stmt_id)
{
  return _cs_window_find_stmt_deep (trace, stmt_id, NULL);
}

/* The group @stmt_id names in the visible view's layout, or NULL. */
static const CsGroup *
shown_group (CsWindow *self, guint32 stmt_id)
{
  CsLayout *l = cs_graph_view_get_layout (_cs_window_get_view (self, _cs_window_get_family (self)));
  gint g;

  if (!CS_LAYOUT_IS_GROUP_ID (stmt_id) || l == NULL || l->grouping == NULL)
    return NULL;
  g = CS_LAYOUT_GROUP_OF_ID (stmt_id);
  return (guint) g < l->grouping->n_groups ? &l->grouping->groups[g] : NULL;
}

/* "N (U up, D down)", with ", O other" when some casts are neither (integer and bool ones:
 * cs_stats counts those as casts but neither up nor down). */
static char *
cast_counts (guint n, guint up, guint down)
{
  if (n > up + down)
    return g_strdup_printf ("%u (%u up, %u down, %u other)", n, up, down, n - up - down);
  return g_strdup_printf ("%u (%u up, %u down)", n, up, down);
}

static void
update_details (CsWindow *self, guint32 stmt_id)
{
  CsTrace *trace = _cs_window_get_shown_trace (self);
  const CsStmt *stmt = find_stmt (trace, stmt_id);
  g_autoptr(GString) out = NULL;
  g_autoptr(GPtrArray) inputs = NULL;
  g_autoptr(GPtrArray) outputs = NULL;
  g_autofree char *head = NULL;

  if (stmt == NULL && shown_group (self, stmt_id) != NULL)
    {
      const CsGroup *g = shown_group (self, stmt_id);
      CsLayout *l = cs_graph_view_get_layout (_cs_window_get_view (self, _cs_window_get_family (self)));
      g_autofree char *sum = cs_group_summary_text (g);
      g_autofree char *casts = cast_counts (g->summary.n_casts, g->summary.n_upcasts,
                                            g->summary.n_downcasts);
      g_autoptr(GString) same = g_string_new (NULL);
      g_autofree char *text = NULL;
      gint rep = g->repeat_of >= 0 ? g->repeat_of : (gint) (g - l->grouping->groups);

      /* every layer of this structure: the first of its kind and its repeats */
      for (guint i = 0; g->n_same > 1 && i < l->grouping->n_groups; i++)
        if ((gint) i == rep || l->grouping->groups[i].repeat_of == rep)
          g_string_append_printf (same, "%s%s", same->len ? ", " : "", l->grouping->groups[i].name);
      text = g_markup_printf_escaped (
        "<b>%s</b>\n%s%s\n\n%s\n\nCasts: %s\nMatmuls: %u, %u on tensor cores\n"
        "Bytes written: %" G_GUINT64_FORMAT "\nEst. %.3g µs (H200 roofline)%s%s",
        g->name, g->kind == CS_GROUP_LAYER ? "layer" : g->kind == CS_GROUP_MODULE ? "module"
                                                     : "chunk of consecutive statements",
        g->repeat_of >= 0 ? " — same structure as the first of its kind" : "",
        sum, casts, g->summary.n_matmuls, g->summary.n_tensor_core_matmuls, g->summary.bytes,
        g->summary.est_ms * 1e3,
        g->n_same > 1 ? "\n\nLayers with this structure: " : "",
        same->str);
      gtk_label_set_markup (self->details_label, text);
      return;
    }
  if (stmt == NULL)
    {
      gtk_label_set_text (self->details_label,
                          "Select a node in the graph or a line of the trace.");
      return;
    }

  out = g_string_new (NULL);
  if (stmt->kind == CS_STMT_CALL)
    {
      const CsOp *sem = cs_op_semantic (stmt->op);

      head = g_markup_printf_escaped ("<b><tt>%s</tt></b>\n%s", stmt->callee,
                                      cs_op_category_name (stmt->op->category));
      g_string_append (out, head);
      if (sem != stmt->op)
        {
          g_autofree char *alias = g_markup_printf_escaped (" (implements <tt>%s</tt>)", sem->name);
          g_string_append (out, alias);
        }
      g_string_append (out, "\n");
    }
  else
    {
      static const char *kinds[] = { "call", "unpack", "annotated assignment", "del", "return",
                                     "comment", "blank" };
      g_string_append_printf (out, "<b>%s</b>\n", kinds[stmt->kind]);
    }
  if (stmt->backward)
    g_string_append (out, "<i>backward (tagged by the grad pass)</i>\n");

  inputs = g_ptr_array_new ();
  cs_stmt_collect_inputs (stmt, inputs);
  if (inputs->len > 0)
    {
      g_string_append (out, "\n<b>Inputs</b>\n");
      for (guint i = 0; i < inputs->len; i++)
        append_proxy_line (out, g_ptr_array_index (inputs, i));
    }
  outputs = g_ptr_array_new ();
  cs_stmt_collect_outputs (stmt, outputs);
  if (outputs->len > 0)
    {
      g_string_append (out, "\n<b>Outputs</b>\n");
      for (guint i = 0; i < outputs->len; i++)
        append_proxy_line (out, g_ptr_array_index (outputs, i));
    }
  if (stmt->why != NULL)
    {
      g_autofree char *why = g_markup_printf_escaped ("\n<b>%s</b>\n%s\n",
                                                      cs_op_is_fusion (stmt->op)
                                                      ? "Why the region ended" : "Inserted by",
                                                      stmt->why);
      g_string_append (out, why);
    }
  if (stmt->n_subs > 0)
    {
      g_autoptr(GString) subs = g_string_new (NULL);
      g_autofree char *esc = NULL;

      for (guint i = 0; i < stmt->n_subs; i++)
        cs_print_stmt_to (subs, stmt->subs[i], 0, CS_PRINT_NO_SUBS);
      esc = g_markup_escape_text (subs->str, -1);
      g_string_append_printf (out, "\n<b>%s</b> (%u)\n<tt><small>%s</small></tt>",
                              cs_op_is_fusion (stmt->op) ? "Region" : "Decomposition",
                              stmt->n_subs, esc);
    }
  gtk_label_set_markup (self->details_label, out->str);
}

/**
 * _cs_window_select_stmt:
 * @stmt_id: a statement id of the shown trace (any level) or a group id, or 0 to clear
 * @scroll: scroll the text view to it
 *
 * Selects one node everywhere: graph (revealing it: cs_graph_view_reveal()), text
 * highlight, details.
 */
void
_cs_window_select_stmt (CsWindow *self, guint32 stmt_id, gboolean scroll)
{
  CsGraphView *view = _cs_window_get_view (self, _cs_window_get_family (self));

  /* a statement inside a collapsed layer or statement is revealed (expanded, scrolled to) */
  cs_graph_view_reveal (view, stmt_id);
  highlight_text (self, stmt_id, TRUE);
  update_details (self, stmt_id);
}

/* ---- side-by-side compare ---- */

/* The two sides of a previous-policy or pass compare are aligned on a pair of matched
 * elements (self->compare_pair): both sides at the same zoom, the pair's two elements at the
 * same widget position in their panes.  A click makes the clicked node and its match the pair
 * (the clicked pane stays as it is, the other pans); panning or zooming either side moves the
 * other by the same amount about the pair.  The layouts of two policies differ, so copying
 * one side's offsets to the other would show another part of the other graph (or none). */

/* g_array_sort() on pairs of doubles: by the first. */
static gint
compare_doubles (gconstpointer a, gconstpointer b)
{
  double x = *(const double *) a, y = *(const double *) b;

  return x < y ? -1 : x > y;
}

/* Moves @to to @from's zoom with @to_id where @from_id is in @from (the same x in its pane,
 * the same height in the window); FALSE (nothing moved) when either element is not drawn. */
static gboolean
compare_align_on (CsWindow *self, CsGraphView *from, guint32 from_id, CsGraphView *to,
                  guint32 to_id)
{
  CsLayout *lf = cs_graph_view_get_layout (from), *lt = cs_graph_view_get_layout (to);
  CsLayoutHit hf, ht;
  CsPoint cf, ct;
  CsView vf, vt;
  double fx, fy, tx, ty;

  if (lf == NULL || lt == NULL || !lf->laid_out || !lt->laid_out || from_id == 0 || to_id == 0
      || !cs_layout_find_element (lf, from_id, &hf) || !cs_layout_find_element (lt, to_id, &ht))
    return FALSE;
  cs_graph_view_get_view (from, &vf);
  vt = vf;
  cs_layout_element_center (lf, &hf, &cf);
  cs_layout_element_center (lt, &ht, &ct);
  cs_view_to_px (&vf, lf, cf.x, cf.y, &fx, &fy);
  cs_view_to_px (&vt, lt, ct.x, ct.y, &tx, &ty);
  vt.tx += fx - tx;
  vt.ty += fy - ty;
  {
    /* the same height in the window (the left side's label sits above its view) */
    graphene_point_t p0 = GRAPHENE_POINT_INIT (0, 0), pf, pt;

    if (gtk_widget_compute_point (GTK_WIDGET (from), GTK_WIDGET (self), &p0, &pf)
        && gtk_widget_compute_point (GTK_WIDGET (to), GTK_WIDGET (self), &p0, &pt))
      vt.ty += pf.y - pt.y;
  }
  self->compare_syncing = TRUE;
  cs_graph_view_set_view (to, &vt);
  self->compare_syncing = FALSE;
  return TRUE;
}

/* Picks the pair to align on from @from's side: its selection when it is drawn and has a
 * match, else, of the nodes nearest the middle of @from's widget (the first 16), the first
 * with a match drawn on the other side.  FALSE when none. */
static gboolean
compare_pick_pair (CsWindow *self, CsGraphView *from)
{
  gboolean from_left = from == self->compare_view;
  CsGraphView *to = from_left ? _cs_window_get_view (self, _cs_window_get_family (self))
                              : self->compare_view;
  CsLayout *l = cs_graph_view_get_layout (from), *lt = cs_graph_view_get_layout (to);
  guint32 sel = cs_graph_view_get_selected (from), m;
  CsLayoutHit hit;
  int w = gtk_widget_get_width (GTK_WIDGET (from)), h = gtk_widget_get_height (GTK_WIDGET (from));
  g_autoptr(GArray) order = NULL;
  CsView v;

  if (l == NULL || lt == NULL || !l->laid_out || !lt->laid_out)
    return FALSE;
  if (sel != 0 && cs_layout_find_element (l, sel, &hit)
      && (m = _cs_window_compare_match (self, !from_left, sel)) != 0
      && cs_layout_find_element (lt, m, &hit))
    {
      self->compare_pair[from_left ? 0 : 1] = sel;
      self->compare_pair[from_left ? 1 : 0] = m;
      return TRUE;
    }
  /* (distance², node index) of the drawn statement nodes, nearest first */
  order = g_array_new (FALSE, FALSE, sizeof (double) * 2);
  cs_graph_view_get_view (from, &v);
  for (guint i = 0; i < l->n_nodes; i++)
    {
      const CsLayoutNode *n = &l->nodes[i];
      double x, y, e[2];

      if (n->stmt_id == 0 || n->kind == CS_LAYOUT_NODE_GHOST)
        continue;
      cs_view_to_px (&v, l, (n->box.x0 + n->box.x1) / 2, (n->box.y0 + n->box.y1) / 2, &x, &y);
      e[0] = (x - w / 2.0) * (x - w / 2.0) + (y - h / 2.0) * (y - h / 2.0);
      e[1] = i;
      g_array_append_vals (order, e, 1);
    }
  g_array_sort (order, compare_doubles);
  for (guint k = 0; k < MIN (order->len, 16); k++)
    {
      guint32 id = l->nodes[(guint) ((double *) order->data)[2 * k + 1]].stmt_id;

      if ((m = _cs_window_compare_match (self, !from_left, id)) != 0
          && cs_layout_find_element (lt, m, &hit))
        {
          self->compare_pair[from_left ? 0 : 1] = id;
          self->compare_pair[from_left ? 1 : 0] = m;
          return TRUE;
        }
    }
  return FALSE;
}

/* The left side of a previous-policy or pass compare draws the layers (groups) the right side
 * draws expanded expanded, and the others collapsed, so that both sides show the same
 * structure.  Returns: TRUE when the left side is being laid out anew for it. */
static gboolean
compare_mirror_groups (CsWindow *self)
{
  CsLayout *r = cs_graph_view_get_layout (_cs_window_get_view (self, _cs_window_get_family (self)));
  CsLayout *l = cs_graph_view_get_layout (self->compare_view);
  gboolean changed = FALSE;

  /* at most twice per layout of the right side: a group the left cannot draw so is left */
  if (!self->comparing || self->compare_analysis != NULL || r == NULL || l == NULL
      || !r->laid_out || !l->laid_out || r->grouping == NULL || l->grouping == NULL
      || self->compare_mirrors >= 2)
    return FALSE;
  for (guint g = 0; g < r->grouping->n_groups; g++)
    {
      const char *name = r->grouping->groups[g].name;
      gint k = cs_grouping_find (l->grouping, name);

      if (k >= 0 && l->group_collapsed[k] != r->group_collapsed[g])
        {
          cs_graph_view_set_group_expanded (self->compare_view, name, !r->group_collapsed[g]);
          changed = TRUE;
        }
    }
  self->compare_mirrors += changed;
  return changed;
}

/* One side of a compare pans or zooms (or is laid out anew): the other follows, aligned on
 * the pair (picked anew from @from when either element of it is not drawn); with no pair,
 * the same zoom and offsets. */
static void
compare_follow (CsWindow *self, CsGraphView *from, CsGraphView *to)
{
  gboolean from_left = from == self->compare_view;
  CsView v;

  if (!self->comparing || self->compare_syncing || self->compare_analysis != NULL)
    return;   /* another file's layout is not this one's: each side pans on its own */
  if (compare_align_on (self, from, self->compare_pair[from_left ? 0 : 1], to,
                        self->compare_pair[from_left ? 1 : 0]))
    return;
  if (compare_pick_pair (self, from)
      && compare_align_on (self, from, self->compare_pair[from_left ? 0 : 1], to,
                           self->compare_pair[from_left ? 1 : 0]))
    return;
  self->compare_syncing = TRUE;
  cs_graph_view_get_view (from, &v);
  cs_graph_view_set_view (to, &v);
  self->compare_syncing = FALSE;
}

/* A node of either side was selected: its match is selected on the other side, which pans to
 * put the match where the selected node is (the selected side does not move).  Another file
 * compared: the other side scrolls the match into view. */
static void
compare_select_other (CsWindow *self, CsGraphView *from, guint32 stmt_id)
{
  gboolean from_left = from == self->compare_view;
  CsGraphView *to = from_left ? _cs_window_get_view (self, _cs_window_get_family (self))
                              : self->compare_view;
  guint32 m = stmt_id ? _cs_window_compare_match (self, !from_left, stmt_id) : 0;

  self->compare_syncing = TRUE;
  if (from_left)
    {
      if (m != 0)
        _cs_window_select_stmt (self, m, TRUE);
      else
        cs_graph_view_select (to, 0, FALSE);
    }
  else
    cs_graph_view_select (to, m, FALSE);
  self->compare_syncing = FALSE;
  if (m == 0)
    return;
  if (self->compare_analysis != NULL)
    {
      if (!from_left)
        cs_graph_view_select (to, m, TRUE);
      return;
    }
  self->compare_pair[from_left ? 0 : 1] = stmt_id;
  self->compare_pair[from_left ? 1 : 0] = m;
  compare_align_on (self, from, stmt_id, to, m);
}

static void
view_node_selected_cb (CsWindow *self, guint stmt_id, CsGraphView *view)
{
  if (view != _cs_window_get_view (self, _cs_window_get_family (self)))
    return;
  highlight_text (self, stmt_id, TRUE);
  update_details (self, stmt_id);
  /* a compare selects the match on the other side */
  if (self->comparing && !self->compare_syncing)
    compare_select_other (self, view, stmt_id);
}

static void
compare_node_selected_cb (CsWindow *self, guint stmt_id, CsGraphView *compare)
{
  if (!self->comparing || self->compare_syncing)
    return;
  compare_select_other (self, compare, stmt_id);
}

static void
compare_view_changed_cb (CsWindow *self, CsGraphView *compare)
{
  compare_follow (self, compare, _cs_window_get_view (self, _cs_window_get_family (self)));
  gtk_widget_queue_draw (GTK_WIDGET (self->minimap_area));
}

static void
compare_layout_changed_cb (CsWindow *self, CsGraphView *compare)
{
  CsGraphView *view = _cs_window_get_view (self, _cs_window_get_family (self));

  /* a new left side starts where the right side is (another file's: fitted), on the match of
   * its selection */
  if (self->compare_analysis != NULL)
    cs_graph_view_fit (compare);
  if (self->comparing)
    {
      self->compare_syncing = TRUE;
      cs_graph_view_select (compare,
                            _cs_window_compare_match (self, TRUE, cs_graph_view_get_selected (view)),
                            FALSE);
      self->compare_syncing = FALSE;
    }
  self->compare_pair[0] = self->compare_pair[1] = 0;
  if (!compare_mirror_groups (self))
    compare_follow (self, view, compare);
}

/* The compare box is about to show (the right side narrows to half): the right side's middle
 * (its selection when drawn) is kept in its middle once it has the new width. */
static void
compare_opening (CsWindow *self)
{
  CsGraphView *view = _cs_window_get_view (self, _cs_window_get_family (self));
  CsLayout *l = cs_graph_view_get_layout (view);
  int w = gtk_widget_get_width (GTK_WIDGET (view)), h = gtk_widget_get_height (GTK_WIDGET (view));
  CsLayoutHit hit;
  CsView v;

  self->compare_recentre = FALSE;
  self->compare_mirrors = 0;
  if (l == NULL || !l->laid_out || w <= 0 || h <= 0)
    return;
  cs_graph_view_get_view (view, &v);
  if (cs_graph_view_get_selected (view) != 0
      && cs_layout_find_element (l, cs_graph_view_get_selected (view), &hit))
    {
      CsPoint c;

      cs_layout_element_center (l, &hit, &c);
      self->compare_centre_pt[0] = c.x;
      self->compare_centre_pt[1] = c.y;
    }
  else
    cs_view_to_pt (&v, l, w / 2.0, h / 2.0, &self->compare_centre_pt[0], &self->compare_centre_pt[1]);
  self->compare_old_width = w;
  self->compare_recentre = TRUE;
}

/* After an allocation: the right side of a compare that just opened puts the point kept by
 * compare_opening() in its middle, and the left follows (before the first frame draws). */
static void
compare_recentre (CsWindow *self)
{
  CsGraphView *view = _cs_window_get_view (self, _cs_window_get_family (self));
  CsLayout *l = cs_graph_view_get_layout (view);
  int w = gtk_widget_get_width (GTK_WIDGET (view)), h = gtk_widget_get_height (GTK_WIDGET (view));
  CsRect box = { self->compare_centre_pt[0], self->compare_centre_pt[1],
                 self->compare_centre_pt[0], self->compare_centre_pt[1] };
  CsView v;

  if (!self->compare_recentre || w == self->compare_old_width)
    return;
  self->compare_recentre = FALSE;
  if (!self->comparing || l == NULL || !l->laid_out || w <= 0 || h <= 0)
    return;
  cs_graph_view_get_view (view, &v);
  cs_view_center_on (&v, l, &box, w, h);
  self->compare_syncing = TRUE;
  cs_graph_view_set_view (view, &v);
  self->compare_syncing = FALSE;
  self->compare_pair[0] = self->compare_pair[1] = 0;
  compare_follow (self, view, self->compare_view);
}

/**
 * _cs_window_update_compare:
 *
 * win.compare: shows (or hides) the side-by-side compare of the visible family.  The left side
 * is the previous policy's trace at the same pass when a policy changed (the diff bar is up),
 * else the trace of the pass before the shown one; it is drawn as the older side of the diff
 * (its casts the right side lacks marked removed), with the layers the right side expands
 * expanded.  Both sides are at the same zoom, aligned on a pair of matched elements (see
 * compare_align_on()); pan and zoom follow each other about it, and selecting a node on
 * either side selects its match on the other (cs_graph_view_match()) and pans that side to it.
 * With a file to compare with (cs_window_compare_with_file()) the left side is that file's
 * trace instead, matched cast for cast and region for region (cs-window-compare.c).
 */
void
_cs_window_update_compare (CsWindow *self)
{
  CsFamily f = _cs_window_get_family (self);
  CsTrace *now = family_trace (self, self->analysis, f);
  CsTrace *base = NULL;
  g_autofree char *label = NULL;

  if (!self->comparing || now == NULL)
    {
      gtk_widget_set_visible (GTK_WIDGET (self->compare_box), FALSE);
      if (cs_graph_view_get_trace (self->compare_view) != NULL)
        cs_graph_view_set_trace (self->compare_view, NULL, NULL);
      return;
    }
  if (self->compare_analysis != NULL)
    {
      /* another file: no diff (the two traces share no origins), the matched counts */
      base = _cs_window_compare_file_trace (self, now, &label);
      gtk_label_set_text (self->compare_label, label);
      gtk_widget_set_tooltip_text (GTK_WIDGET (self->compare_label), label);
      cs_graph_view_set_diff_older (self->compare_view, FALSE);
      cs_graph_view_set_precision_lens (
        self->compare_view, cs_graph_view_get_precision_lens (_cs_window_get_view (self, f)));
      if (cs_graph_view_get_trace (self->compare_view) != base)
        cs_graph_view_set_trace (self->compare_view, base, NULL);
      if (!gtk_widget_get_visible (GTK_WIDGET (self->compare_box)))
        {
          int w = gtk_widget_get_width (GTK_WIDGET (self->compare_paned));

          compare_opening (self);
          gtk_widget_set_visible (GTK_WIDGET (self->compare_box), TRUE);
          gtk_paned_set_position (self->compare_paned, w > 0 ? w / 2 : 400);
        }
      return;
    }
  base = diff_base_for (self, f);
  if (base != NULL)
    {
      g_autofree char *was = cs_policy_to_string (cs_analysis_get_policy (self->previous));

      label = g_strdup_printf ("Before (left): %s", was);
    }
  else
    {
      guint n = cs_analysis_n_passes (self->analysis, f);
      guint i = MIN (self->pass_index[f], n - 1);

      if (i > 0)
        {
          base = cs_analysis_get_trace (self->analysis, f, i - 1);
          label = g_strdup_printf ("Pass %s (left) before %s (right)",
                                   cs_analysis_pass_name (self->analysis, f, i - 1),
                                   cs_analysis_pass_name (self->analysis, f, i));
        }
      else
        label = g_strdup ("Nothing to compare with: change a policy knob, or move the pass "
                          "slider past the first pass");
    }
  gtk_label_set_text (self->compare_label, label);
  gtk_widget_set_tooltip_text (GTK_WIDGET (self->compare_label), NULL);
  cs_graph_view_set_diff_older (self->compare_view, TRUE);
  cs_graph_view_set_precision_lens (self->compare_view,
                                    cs_graph_view_get_precision_lens (_cs_window_get_view (self, f)));
  if (cs_graph_view_get_trace (self->compare_view) != base)
    cs_graph_view_set_trace (self->compare_view, base, now);
  else
    cs_graph_view_set_diff_base (self->compare_view, now);
  if (!gtk_widget_get_visible (GTK_WIDGET (self->compare_box)))
    {
      int w = gtk_widget_get_width (GTK_WIDGET (self->compare_paned));

      compare_opening (self);
      gtk_widget_set_visible (GTK_WIDGET (self->compare_box), TRUE);
      gtk_paned_set_position (self->compare_paned, w > 0 ? w / 2 : 400);
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Status bar: core/cs-stats.h on the shown trace                                             */

/* The stats of @trace made with @analysis on its worker (a final trace), or NULL. */
static const CsTraceStats *
analysis_final_stats (CsAnalysis *analysis, const CsTrace *trace)
{
  for (CsFamily f = 0; analysis != NULL && f < CS_N_FAMILIES; f++)
    if (trace == cs_analysis_get_final (analysis, f))
      return cs_analysis_get_final_stats (analysis, f);
  return NULL;
}

/**
 * _cs_window_format_ms:
 * @ms: a time in milliseconds
 *
 * Returns: (transfer full): "%.3g" in the unit that keeps the number readable: ms, µs or ns
 */
char *
_cs_window_format_ms (double ms)
{
  if (ms >= 1.0 || ms == 0.0)
    return g_strdup_printf ("%.3g ms", ms);
  if (ms >= 1e-3)
    return g_strdup_printf ("%.3g µs", ms * 1e3);
  return g_strdup_printf ("%.3g ns", ms * 1e6);
}

void
_cs_window_update_status (CsWindow *self)
{
  CsTrace *trace = _cs_window_get_shown_trace (self);
  g_autoptr(CsTraceStats) own = NULL;
  const CsTraceStats *stats;
  g_autofree char *s_casts = NULL, *s_regions = NULL, *s_tc = NULL, *s_time = NULL;

  if (trace == NULL)
    {
      gtk_label_set_text (self->status_casts, "");
      gtk_label_set_text (self->status_regions, "");
      gtk_label_set_text (self->status_matmuls, "");
      gtk_label_set_text (self->status_time, "");
      return;
    }
  if ((stats = analysis_final_stats (self->analysis, trace)) == NULL)
    stats = own = cs_stats_compute (trace);
  {
    g_autofree char *c = cast_counts (stats->total.n_casts, stats->total.n_upcasts,
                                      stats->total.n_downcasts);
    s_casts = g_strconcat ("Casts: ", c, NULL);
  }
  s_regions = g_strdup_printf ("Fusion regions: %u", stats->total.n_regions);
  s_tc = g_strdup_printf ("Tensor-core matmuls: %u of %u", stats->total.n_tensor_core_matmuls,
                          stats->total.n_matmuls);
  {
    g_autofree char *t = _cs_window_format_ms (stats->total.est_ms);

    s_time = g_strdup_printf ("Est. %s (H200 roofline)", t);
  }
  gtk_label_set_text (self->status_casts, s_casts);
  gtk_label_set_text (self->status_regions, s_regions);
  gtk_label_set_text (self->status_matmuls, s_tc);
  gtk_label_set_text (self->status_time, s_time);
}

/* ------------------------------------------------------------------------------------------ */
/* Showing an analysis                                                                         */

static void
update_pass_row (CsWindow *self)
{
  CsFamily family = _cs_window_get_family (self);
  guint n = self->analysis ? cs_analysis_n_passes (self->analysis, family) : 0;
  g_autofree char *label = NULL;

  self->syncing = TRUE;
  gtk_adjustment_configure (self->pass_adjustment,
                            n ? MIN (self->pass_index[family], n - 1) : 0,
                            0, n ? n - 1 : 0, 1, 1, 0);
  self->syncing = FALSE;
  gtk_widget_set_sensitive (GTK_WIDGET (self->pass_scale), n > 1);
  if (n > 0)
    {
      guint i = MIN (self->pass_index[family], n - 1);
      label = g_strdup_printf ("%u/%u %s", i + 1, n,
                               cs_analysis_pass_name (self->analysis, family, i));
    }
  gtk_label_set_text (self->pass_label, label ? label : "");
}

/* The index of pass @name in @family of the current result, or -1. */
static gint
pass_index_of (CsWindow *self, CsFamily family, const char *name)
{
  guint n = self->analysis ? cs_analysis_n_passes (self->analysis, family) : 0;

  for (guint i = 0; i < n; i++)
    if (g_strcmp0 (cs_analysis_pass_name (self->analysis, family, i), name) == 0)
      return (gint) i;
  return -1;
}

/* The casts the user wrote that remove-redundant-casts dropped in the current result
 * (core/cs-lens.h, made with the result on its worker: cs_analysis_get_user_casts()), and in
 * @keep the traces they borrow from. */
static GPtrArray *
current_user_casts (CsWindow *self, GPtrArray **keep)
{
  GPtrArray *casts = NULL;

  *keep = NULL;
  if (self->analysis == NULL)
    return NULL;
  if (self->user_casts_for != self->analysis)
    {
      g_clear_pointer (&self->user_casts, g_ptr_array_unref);
      g_clear_pointer (&self->user_casts_for, cs_analysis_unref);
      self->user_casts_for = cs_analysis_ref (self->analysis);
      if (cs_analysis_get_user_casts (self->analysis, &casts, keep) && casts != NULL)
        self->user_casts = g_ptr_array_ref (casts);
    }
  cs_analysis_get_user_casts (self->analysis, &casts, keep);
  return self->user_casts;
}

/* Pushes the traces of the current result into both graph views, then refreshes the text,
 * status and details of the visible one. */
static void
update_shown (CsWindow *self)
{
  for (CsFamily f = 0; f < CS_N_FAMILIES; f++)
    {
      CsGraphView *view = _cs_window_get_view (self, f);
      CsTrace *trace = family_trace (self, self->analysis, f);

      if (trace == NULL && self->analysis != NULL)
        cs_graph_view_set_placeholder (view, f == CS_FAMILY_BACKWARD
                                       ? "No backward trace: no input requires grad, or the "
                                         "file holds a forward trace only."
                                       : "No forward trace in this file.");
      /* the user's removed casts are marked from the pass that removed them on; with a new
       * trace they are marked on the layout worker */
      gint r = pass_index_of (self, f, "remove-redundant-casts");
      guint n = self->analysis ? cs_analysis_n_passes (self->analysis, f) : 0;
      gboolean after = r >= 0 && n > 0 && MIN (self->pass_index[f], n - 1) >= (guint) r;
      GPtrArray *keep = NULL;
      GPtrArray *casts = after ? current_user_casts (self, &keep) : NULL;

      if (cs_graph_view_get_trace (view) != trace)
        cs_graph_view_set_trace_full (view, trace, diff_base_for (self, f), casts, keep);
      else
        {
          cs_graph_view_set_diff_base (view, diff_base_for (self, f));
          cs_graph_view_set_user_casts (view, casts, keep);
        }
    }
  _cs_window_apply_run_overlay (self);
  _cs_window_update_compare (self);
  update_pass_row (self);
  update_text (self, _cs_window_get_shown_trace (self));
  _cs_window_update_status (self);
  {
    guint32 sel = cs_graph_view_get_selected (_cs_window_get_view (self, _cs_window_get_family (self)));
    /* the text was printed anew: scrolled to the selection, as a click does */
    highlight_text (self, sel, TRUE);
    update_details (self, sel);
  }
}

static void
pass_value_changed_cb (GtkAdjustment *adj, CsWindow *self)
{
  CsFamily family = _cs_window_get_family (self);
  guint n = self->analysis ? cs_analysis_n_passes (self->analysis, family) : 0;
  guint i = (guint) (gtk_adjustment_get_value (adj) + 0.5);

  if (self->syncing || n == 0)
    return;
  self->pass_index[family] = MIN (i, n - 1);
  self->pass_at_end[family] = self->pass_index[family] == n - 1;
  update_shown (self);
}

static void
graph_stack_notify_cb (CsWindow *self, GParamSpec *pspec, GtkStack *stack)
{
  if (self->stmt_ranges == NULL)
    return;
  update_shown (self);
  update_side_panel (self);
}

static void
set_analysis (CsWindow *self, CsAnalysis *analysis)
{
  g_clear_pointer (&self->analysis, cs_analysis_unref);
  self->analysis = analysis ? cs_analysis_ref (analysis) : NULL;
  for (CsFamily f = 0; f < CS_N_FAMILIES; f++)
    {
      guint n = analysis ? cs_analysis_n_passes (analysis, f) : 0;

      if (self->pass_at_end[f] || self->pass_index[f] >= n)
        self->pass_index[f] = n ? n - 1 : 0;
    }
  update_shown (self);
}

/* ---- diff between the previous and the new result ---- */

typedef struct
{
  guint  n_tensor_core_matmuls; /* matmuls on tensor cores, final trace */
  guint  n_attention;           /* fused scaled-dot-product attention calls */
  guint  n_regions;             /* fusion regions of the final trace */
  double est_ms;                /* ms, the H200 roofline estimate */
} FinalStats;

/* The diff bar's numbers for @trace, computed once (the bar is redrawn at every layout);
 * only the final traces of the shown and the previous result are kept. */
static const FinalStats *
final_stats (CsWindow *self, CsTrace *trace)
{
  FinalStats *fs;

  if (self->final_stats == NULL)
    self->final_stats = g_hash_table_new_full (NULL, NULL, (GDestroyNotify) cs_trace_unref, g_free);
  if ((fs = g_hash_table_lookup (self->final_stats, trace)) == NULL)
    {
      g_autoptr(CsTraceStats) own = NULL;
      const CsTraceStats *s = analysis_final_stats (self->analysis, trace);
      GHashTableIter it;

      if (s == NULL)
        s = analysis_final_stats (self->previous, trace);
      if (s == NULL)
        s = own = cs_stats_compute (trace);
      gpointer k;

      /* drop the traces no longer shown */
      g_hash_table_iter_init (&it, self->final_stats);
      while (g_hash_table_iter_next (&it, &k, NULL))
        {
          gboolean keep = FALSE;

          for (CsFamily f = 0; f < CS_N_FAMILIES; f++)
            keep |= (self->analysis && k == cs_analysis_get_final (self->analysis, f))
                    || (self->previous && k == cs_analysis_get_final (self->previous, f));
          if (!keep)
            g_hash_table_iter_remove (&it);
        }
      fs = g_new0 (FinalStats, 1);
      fs->n_tensor_core_matmuls = s->total.n_tensor_core_matmuls;
      fs->n_attention = s->total.n_attention;
      fs->n_regions = s->total.n_regions;
      fs->est_ms = s->total.est_ms;
      g_hash_table_insert (self->final_stats, cs_trace_ref (trace), fs);
    }
  return fs;
}

/**
 * _cs_window_update_diff_bar:
 *
 * The diff bar, from what each graph marks (cs_graph_view_get_diff_stats(): the shown pass of
 * the new result against the same pass of the result before the policy change), so that its
 * numbers are the marks on the graph: casts added (green), removed (ghosts, pink), regions
 * split and merged, statements moved into or out of regions; plus the regions, tensor-core
 * matmuls, fused attention calls (when either side has one) and the estimated time of the two
 * final traces.  Hidden when there is no diff.  The bar sits at the
 * top of the side panel, never over the graph; what the colours mean is in its "?" popover.
 */
void
_cs_window_update_diff_bar (CsWindow *self)
{
  g_autoptr(GString) out = NULL;

  if (self->previous == NULL || self->analysis == NULL)
    {
      gtk_info_bar_set_revealed (self->diff_bar, FALSE);
      return;
    }
  out = g_string_new (NULL);
  for (CsFamily f = 0; f < CS_N_FAMILIES; f++)
    {
      CsTrace *before = cs_analysis_get_final (self->previous, f);
      CsTrace *after = cs_analysis_get_final (self->analysis, f);
      CsGraphView *view = _cs_window_get_view (self, f);
      CsLayoutDiffStats st;
      const FinalStats *s0, *s1;
      g_autofree char *t0 = NULL;
      g_autofree char *t1 = NULL;
      gboolean shown;

      if (before == NULL || after == NULL)
        continue;
      shown = cs_graph_view_get_diff_stats (view, &st) && !cs_graph_view_is_busy (view);
      s0 = final_stats (self, before);
      s1 = final_stats (self, after);
      t0 = _cs_window_format_ms (s0->est_ms);
      t1 = _cs_window_format_ms (s1->est_ms);
      g_string_append_printf (out, "\n<b>%s</b>: ",
                              f == CS_FAMILY_FORWARD ? "Forward" : "Backward");
      if (shown)
        g_string_append_printf (out, "<span foreground=\"#009E73\">+%u casts</span>, "
                                "<span foreground=\"#CC79A7\">−%u casts</span>\n"
                                "%u region%s split, %u merged\n"
                                "<span foreground=\"#1F78B4\">%u moved into regions, %u out</span>\n",
                                st.casts_added, st.casts_removed,
                                st.regions_split, st.regions_split == 1 ? "" : "s",
                                st.regions_merged, st.moved_in, st.moved_out);
      else
        g_string_append (out, "laying out…\n");
      g_string_append_printf (out, "regions %u → %u\ntensor-core matmuls %u → %u\n",
                              s0->n_regions, s1->n_regions,
                              s0->n_tensor_core_matmuls, s1->n_tensor_core_matmuls);
      /* a fused attention runs its matmuls on tensor cores too: say where they went */
      if (s0->n_attention > 0 || s1->n_attention > 0)
        g_string_append_printf (out, "fused attention (tensor cores) %u → %u\n",
                                s0->n_attention, s1->n_attention);
      g_string_append_printf (out, "est. %s → %s", t0, t1);
    }
  /* the legend of the marks is in the "?" popover (diff_help_label) and the label's tooltip */
  g_string_prepend (out, "<b>Policy changed</b> (vs. before)");
  gtk_label_set_markup (self->diff_label, out->str);
  gtk_widget_set_tooltip_text (GTK_WIDGET (self->diff_label),
                               gtk_label_get_label (self->diff_help_label));
  gtk_info_bar_set_revealed (self->diff_bar, TRUE);
}

static void
update_diff_bar (CsWindow *self)
{
  _cs_window_update_diff_bar (self);
}

/* ---- the side panel: overview, structure, legend, notes ---- */

static void
structure_row_activated_cb (GtkListBox *box, GtkListBoxRow *row, CsWindow *self)
{
  CsGraphView *view = _cs_window_get_view (self, _cs_window_get_family (self));
  const char *name = g_object_get_data (G_OBJECT (row), "cs-group-name");
  guint gid = GPOINTER_TO_UINT (g_object_get_data (G_OBJECT (row), "cs-group-id"));

  if (name == NULL)
    return;
  /* select the group, then toggle it: the view stays anchored on it */
  cs_graph_view_select (view, gid, TRUE);
  view_node_selected_cb (self, gid, view);
  cs_graph_view_set_group_expanded (view, name, !cs_graph_view_get_group_expanded (view, name));
}

static void
update_structure (CsWindow *self)
{
  CsGraphView *view = _cs_window_get_view (self, _cs_window_get_family (self));
  CsLayout *l = cs_graph_view_get_layout (view);
  GtkWidget *child;
  guint n = 0;

  while ((child = gtk_widget_get_first_child (GTK_WIDGET (self->structure_list))) != NULL)
    gtk_list_box_remove (self->structure_list, child);
  for (guint g = 0; l != NULL && l->grouping != NULL && g < l->grouping->n_groups; g++)
    {
      const CsGroup *gr = &l->grouping->groups[g];
      gboolean expanded = !l->group_collapsed[g];
      g_autofree char *text = NULL;
      GtkWidget *label, *row;

      /* modules only under an expanded layer */
      if (gr->parent >= 0 && l->group_collapsed[gr->parent])
        continue;
      /* a fold of repeats: a row for the run, its layers indented under it (each one can be
       * expanded on its own) */
      if (l->group_fold != NULL && l->group_fold[g] == (gint) g)
        {
          g_autofree char *title = cs_grouping_fold_label (l->grouping, l->group_fold, (gint) g);
          g_autofree char *head = g_strdup_printf ("▸ %s", title);

          label = gtk_label_new (head);
          gtk_label_set_xalign (GTK_LABEL (label), 0);
          gtk_label_set_ellipsize (GTK_LABEL (label), PANGO_ELLIPSIZE_END);
          gtk_widget_set_tooltip_text (label, "Layers with the same structure, drawn as one node; "
                                       "activate a layer below to expand it, or this row to "
                                       "expand the first");
          row = gtk_list_box_row_new ();
          gtk_list_box_row_set_child (GTK_LIST_BOX_ROW (row), label);
          g_object_set_data_full (G_OBJECT (row), "cs-group-name", g_strdup (gr->name), g_free);
          g_object_set_data (G_OBJECT (row), "cs-group-id",
                             GUINT_TO_POINTER (CS_LAYOUT_GROUP_ID (g)));
          gtk_list_box_append (self->structure_list, row);
          n++;
        }
      if (l->group_fold != NULL && l->group_fold[g] >= 0)
        text = g_strdup_printf ("      ▸ %s  · %u ops, folded", gr->label, gr->n_stmts);
      else if (gr->repeat_of >= 0)
        text = g_strdup_printf ("%s%s %s  · %u ops, = %s", gr->parent >= 0 ? "      " : "",
                                expanded ? "▾" : "▸", gr->label, gr->n_stmts,
                                l->grouping->groups[gr->repeat_of].label);
      else
        text = g_strdup_printf ("%s%s %s  · %u ops%s", gr->parent >= 0 ? "      " : "",
                                expanded ? "▾" : "▸", gr->label, gr->n_stmts,
                                gr->n_same > 1 ? "  (same structure ×" : "");
      if ((l->group_fold == NULL || l->group_fold[g] < 0) && gr->repeat_of < 0 && gr->n_same > 1)
        {
          char *t = g_strdup_printf ("%s%u)", text, gr->n_same);
          g_free (text);
          text = t;
        }
      label = gtk_label_new (text);
      gtk_label_set_xalign (GTK_LABEL (label), 0);
      gtk_label_set_ellipsize (GTK_LABEL (label), PANGO_ELLIPSIZE_END);
      gtk_widget_set_tooltip_text (label, gr->name);
      row = gtk_list_box_row_new ();
      gtk_list_box_row_set_child (GTK_LIST_BOX_ROW (row), label);
      g_object_set_data_full (G_OBJECT (row), "cs-group-name", g_strdup (gr->name), g_free);
      g_object_set_data (G_OBJECT (row), "cs-group-id", GUINT_TO_POINTER (CS_LAYOUT_GROUP_ID (g)));
      gtk_list_box_append (self->structure_list, row);
      n++;
    }
  gtk_widget_set_visible (GTK_WIDGET (self->structure_list), n > 0);
  gtk_widget_set_visible (GTK_WIDGET (self->structure_empty), n == 0);
}

static void
update_side_panel (CsWindow *self)
{
  CsGraphView *view = _cs_window_get_view (self, _cs_window_get_family (self));
  const char * const *notes = cs_graph_view_get_notes (view);
  g_autoptr(GString) text = g_string_new (NULL);

  CsLayout *l = cs_graph_view_get_layout (view);

  for (guint i = 0; notes != NULL && notes[i] != NULL; i++)
    g_string_append_printf (text, "%s%s", i ? "\n\n" : "", notes[i]);
  if (l != NULL && l->laid_out)
    g_string_append_printf (text, "%sLayout: %s, %u nodes, %.0f ms.", text->len ? "\n\n" : "",
                            l->layered ? "castscope's layered layout (too many nodes for dot)"
                                       : "Graphviz dot", l->n_nodes, l->layout_ms);
  gtk_label_set_text (self->notes_label, text->str);
  gtk_widget_set_visible (GTK_WIDGET (self->notes_label), text->len > 0);
  update_structure (self);
  gtk_widget_queue_draw (GTK_WIDGET (self->minimap_area));
  gtk_widget_queue_draw (GTK_WIDGET (self->legend_area));
}

static void
view_layout_changed_cb (CsWindow *self, CsGraphView *view)
{
  if (self->previous != NULL)
    update_diff_bar (self);
  if (view != _cs_window_get_view (self, _cs_window_get_family (self)))
    return;
  update_side_panel (self);
  self->compare_mirrors = 0;
  if (self->comparing && !compare_mirror_groups (self))
    {
      /* a new right side: the left is aligned on the selection (or the middle) anew */
      self->compare_pair[0] = self->compare_pair[1] = 0;
      compare_follow (self, view, self->compare_view);
    }
  /* the selection may have been found again under another id (another pass or policy), or
   * moved by the view itself (] and [ step layers): the text follows it */
  highlight_text (self, cs_graph_view_get_selected (view), TRUE);
  update_details (self, cs_graph_view_get_selected (view));
}

static void
view_view_changed_cb (CsWindow *self, CsGraphView *view)
{
  if (view == _cs_window_get_view (self, _cs_window_get_family (self)))
    {
      gtk_widget_queue_draw (GTK_WIDGET (self->minimap_area));
      compare_follow (self, view, self->compare_view);
    }
}

static void
minimap_draw (GtkDrawingArea *area, cairo_t *cr, int width, int height, gpointer data)
{
  CsWindow *self = data;

  cs_graph_view_draw_minimap (_cs_window_get_view (self, _cs_window_get_family (self)), cr,
                              width, height);
}

static void
minimap_drag_begin_cb (GtkGestureDrag *gesture, double x, double y, CsWindow *self)
{
  cs_graph_view_minimap_move (_cs_window_get_view (self, _cs_window_get_family (self)), x, y);
}

static void
minimap_drag_update_cb (GtkGestureDrag *gesture, double dx, double dy, CsWindow *self)
{
  double x, y;

  if (gtk_gesture_drag_get_start_point (gesture, &x, &y))
    cs_graph_view_minimap_move (_cs_window_get_view (self, _cs_window_get_family (self)),
                                x + dx, y + dy);
}

static void
legend_draw (GtkDrawingArea *area, cairo_t *cr, int width, int height, gpointer data)
{
  CsWindow *self = data;
  double h = 0;

  cs_graph_view_draw_keys (_cs_window_get_view (self, _cs_window_get_family (self)), cr, width, &h);
  if (h > 0 && (int) ceil (h) + 2 != gtk_drawing_area_get_content_height (area))
    gtk_drawing_area_set_content_height (area, (int) ceil (h) + 2);
}

/* Shift+Enter in the find bar: the previous match (GtkSearchEntry binds Ctrl+Shift+G only). */
static gboolean
search_key_pressed_cb (GtkEventControllerKey *controller, guint keyval, guint keycode,
                       GdkModifierType state, CsWindow *self)
{
  if ((keyval == GDK_KEY_Return || keyval == GDK_KEY_KP_Enter) && (state & GDK_SHIFT_MASK))
    {
      _cs_window_find_previous (self, gtk_editable_get_text (GTK_EDITABLE (self->search_entry)));
      return TRUE;
    }
  return FALSE;
}

/* ---- the run table: a row selects and reveals its node ---- */

static gboolean
writes (const CsStmt *s, const char *proxy)
{
  g_autoptr(GPtrArray) outs = g_ptr_array_new ();

  cs_stmt_collect_outputs (s, outs);
  for (guint k = 0; k < outs->len; k++)
    if (g_strcmp0 (((CsProxy *) g_ptr_array_index (outs, k))->name, proxy) == 0)
      return TRUE;
  return FALSE;
}

/**
 * _cs_window_run_row_activate:
 * @row: a row of the run table (0 = its header)
 *
 * What a click on a run-table row does: shows the row's family, selects the statement that
 * writes the row's tensor (or the region the row times), revealing it if it lies in a
 * collapsed layer or statement.
 * Returns: TRUE when the row named a node
 */
gboolean
_cs_window_run_row_activate (CsWindow *self, int row)
{
  GtkWidget *cell = gtk_grid_get_child_at (self->run_grid, 0, row);
  guint32 stmt_id;
  gint family;
  const char *proxy;

  if (cell == NULL || (family = GPOINTER_TO_INT (g_object_get_data (G_OBJECT (cell), CS_RUN_ROW_FAMILY))) == 0)
    return FALSE;
  family--;
  stmt_id = GPOINTER_TO_UINT (g_object_get_data (G_OBJECT (cell), CS_RUN_ROW_STMT));
  proxy = g_object_get_data (G_OBJECT (cell), CS_RUN_ROW_PROXY);
  return _cs_window_select_tensor (self, (CsFamily) family, proxy, stmt_id);
}

/**
 * _cs_window_select_tensor:
 * @family: the trace family holding the tensor
 * @proxy: (nullable): a tensor name: the statement writing it is selected (inside a fusion
 *   region, the region's prim)
 * @stmt_id: the statement to select when @proxy is NULL or written by none
 *
 * Shows @family and selects (and reveals, scrolled into view) the node of the tensor.
 * Returns: TRUE when a node was selected
 */
gboolean
_cs_window_select_tensor (CsWindow *self, CsFamily family, const char *proxy, guint32 stmt_id)
{
  CsTrace *trace;

  if (_cs_window_get_family (self) != family)
    gtk_stack_set_visible_child_name (self->graph_stack, family == CS_FAMILY_BACKWARD ? "backward" : "forward");
  trace = _cs_window_get_shown_trace (self);
  /* the statement writing the tensor; inside a fusion region, the region's prim */
  for (guint i = 0; proxy != NULL && trace != NULL && i < trace->n_stmts; i++)
    {
      const CsStmt *top = trace->stmts[i];
      guint32 found = 0;

      if (top->kind != CS_STMT_CALL)
        continue;
      if (writes (top, proxy))
        found = top->id;
      for (guint k = 0; found != 0 && cs_op_is_fusion (top->op) && k < top->n_subs; k++)
        if (writes (top->subs[k], proxy))
          found = top->subs[k]->id;
      if (found != 0)
        {
          stmt_id = found;
          break;
        }
    }
  if (stmt_id == 0)
    return FALSE;
  _cs_window_select_stmt (self, stmt_id, TRUE);
  return TRUE;
}

/**
 * _cs_window_run_row_text:
 * @row: a row of the run table (0 = its header)
 *
 * The texts of the row's cells, left to right, joined by tabs (empty cells give empty
 * fields, trailing ones are left out): what a right click on the row copies.
 * Returns: (transfer full) (nullable): the row's text, NULL when the row has no cell
 */
char *
_cs_window_run_row_text (CsWindow *self, int row)
{
  GString *text = g_string_new (NULL);
  int last = -1;   /* the column of the last cell written */

  for (int col = 0; col < 64; col++)
    {
      GtkWidget *cell = gtk_grid_get_child_at (self->run_grid, col, row);
      int c, r, w, h;

      if (cell == NULL || !GTK_IS_LABEL (cell))
        continue;
      gtk_grid_query_child (self->run_grid, cell, &c, &r, &w, &h);
      if (c != col)
        continue;   /* a cell spanning several columns counts once */
      for (int k = last; last >= 0 && k < col; k++)
        g_string_append_c (text, '\t');
      g_string_append (text, gtk_label_get_text (GTK_LABEL (cell)));
      last = col;
    }
  if (last < 0)
    {
      g_string_free (text, TRUE);
      return NULL;
    }
  return g_string_free (text, FALSE);
}

/* The run table's click: the row under the pointer selects its node (primary button) or is
 * copied to the clipboard as tab-separated text (secondary button).  The gesture runs in the
 * capture phase, so that it sees the press before any cell does. */
static void
run_grid_pressed_cb (GtkGestureClick *gesture, int n_press, double x, double y, CsWindow *self)
{
  GtkWidget *w = gtk_widget_pick (GTK_WIDGET (self->run_grid), x, y, GTK_PICK_DEFAULT);
  int col, row, width, height;

  while (w != NULL && gtk_widget_get_parent (w) != GTK_WIDGET (self->run_grid))
    w = gtk_widget_get_parent (w);
  if (w == NULL)
    return;
  gtk_grid_query_child (self->run_grid, w, &col, &row, &width, &height);
  if (gtk_gesture_single_get_current_button (GTK_GESTURE_SINGLE (gesture)) == GDK_BUTTON_SECONDARY)
    {
      g_autofree char *text = _cs_window_run_row_text (self, row);

      if (text != NULL)
        {
          gdk_clipboard_set_text (gtk_widget_get_clipboard (GTK_WIDGET (self->run_grid)), text);
          gtk_label_set_text (self->status_message, "Copied the run-table row");
        }
      return;
    }
  _cs_window_run_row_activate (self, row);
}

/* ---- loading ---- */

/* A new file opens on its forward view, or on the backward one when it has only that. */
static void
show_first_family (CsWindow *self)
{
  gboolean bwd_only = self->analysis != NULL
                      && cs_analysis_n_passes (self->analysis, CS_FAMILY_FORWARD) == 0
                      && cs_analysis_n_passes (self->analysis, CS_FAMILY_BACKWARD) > 0;

  gtk_stack_set_visible_child_name (self->graph_stack, bwd_only ? "backward" : "forward");
}

/**
 * _cs_window_file_job_free:
 *
 * Frees a #CsWindowFileJob (a GTask's task-data destroy function).
 */
void
_cs_window_file_job_free (gpointer data)
{
  CsWindowFileJob *job = data;

  g_clear_object (&job->file);
  g_clear_pointer (&job->list, cs_trace_list_unref);
  g_clear_pointer (&job->analysis, cs_analysis_unref);
  g_clear_error (&job->error);
  g_free (job);
}

/**
 * _cs_window_file_job_thread:
 *
 * A worker's half of opening or comparing a file: parses job->file unless job->list is
 * already set (a file opened before), then runs the pipeline under job->policy.  Errors go to
 * job->error (non-local file, parse error with file:line:col, pipeline error).
 */
void
_cs_window_file_job_thread (GTask *task, gpointer source, gpointer task_data,
                            GCancellable *cancellable)
{
  CsWindowFileJob *job = task_data;

  if (job->list == NULL)
    {
      g_autofree char *path = g_file_get_path (job->file);

      if (path == NULL)
        {
          g_autofree char *uri = g_file_get_uri (job->file);
          g_set_error (&job->error, G_IO_ERROR, G_IO_ERROR_NOT_SUPPORTED,
                       "%s: only local files can be opened", uri);
        }
      else
        job->list = cs_parse_file (path, &job->error);
    }
  if (job->list != NULL)
    job->analysis = cs_analysis_new_for_list (job->list, &job->policy, &job->error);
  g_task_return_boolean (task, TRUE);
}

static void
load_done_cb (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(CsWindow) self = user_data;
  CsWindowFileJob *job = g_task_get_task_data (G_TASK (result));

  _cs_window_job_end (self);
  if (job->generation != self->generation)
    return;

  /* A file that does not parse, or whose statements' shapes do not fit (the trace is wrong,
   * not castscope's passes): one message, and the window keeps what it showed. */
  if (job->list == NULL
      || (job->analysis == NULL && g_error_matches (job->error, CS_PIPELINE_ERROR,
                                                    CS_PIPELINE_ERROR_TYPES)))
    {
      cs_window_show_error (self, job->error->message);
      return;
    }

  /* The file parsed: it is the window's file from now on, even if the pipeline failed. */
  g_set_object (&self->file, job->file);
  g_clear_pointer (&self->traces, cs_trace_list_unref);
  self->traces = g_steal_pointer (&job->list);
  g_clear_pointer (&self->previous, cs_analysis_unref);
  g_queue_clear_full (&self->seen_policies, seen_policy_free);
  gtk_info_bar_set_revealed (self->diff_bar, FALSE);
  _cs_window_clear_run (self);
  {
    g_autofree char *base = g_file_get_basename (job->file);
    g_autofree char *title = g_strdup_printf ("%s — castscope", base);
    g_autofree char *uri = g_file_get_uri (job->file);

    gtk_window_set_title (GTK_WINDOW (self), title);
    gtk_recent_manager_add_item (gtk_recent_manager_get_default (), uri);
  }
  for (CsFamily f = 0; f < CS_N_FAMILIES; f++)
    self->pass_at_end[f] = TRUE;
  /* a new file opens fitted, its layers collapsed, nothing selected */
  cs_graph_view_reset (self->forward_view);
  cs_graph_view_reset (self->backward_view);
  g_clear_pointer (&self->search_matches, g_array_unref);
  g_clear_pointer (&self->search_needle, g_free);

  if (job->analysis == NULL)
    {
      g_autofree char *msg = g_strdup_printf ("The pipeline cannot transform this trace, so it "
                                              "is shown as read: %s", job->error->message);
      g_autoptr(CsAnalysis) as_read = cs_analysis_new_as_read (self->traces, &self->policy);

      cs_window_show_error (self, msg);
      set_analysis (self, as_read);
      show_first_family (self);
      return;
    }
  if (cs_analysis_get_warning (job->analysis) != NULL)
    show_warning (self, cs_analysis_get_warning (job->analysis));
  else
    hide_error (self);
  seen_policy_add (self, job->analysis);
  set_analysis (self, job->analysis);
  show_first_family (self);
}

/**
 * cs_window_open_file:
 * @self: a #CsWindow
 * @file: a local trace file
 *
 * Parses @file and runs the pipeline under the window's policy on a worker thread; on success
 * the window shows it and adds it to the recent files.  Errors (unreadable file, parse error
 * with file:line:col, pipeline error) are shown in the window's info bar; a parse error and a
 * statement whose shapes or dtypes do not fit (CS_PIPELINE_ERROR_TYPES, file:line:col) keep
 * the previous file on screen; a file the passes cannot transform is shown as read.
 */
void
cs_window_open_file (CsWindow *self, GFile *file)
{
  g_autoptr(GTask) task = NULL;
  CsWindowFileJob *job;

  g_return_if_fail (CS_IS_WINDOW (self));
  g_return_if_fail (G_IS_FILE (file));

  g_cancellable_cancel (self->cancellable);
  g_set_object (&self->cancellable, g_cancellable_new ());
  g_object_unref (self->cancellable);

  job = g_new0 (CsWindowFileJob, 1);
  job->file = g_object_ref (file);
  job->policy = self->policy;
  job->generation = ++self->generation;
  task = g_task_new (NULL, self->cancellable, load_done_cb, g_object_ref (self));
  g_task_set_task_data (task, job, _cs_window_file_job_free);
  _cs_window_job_begin (self);
  g_task_run_in_thread (task, _cs_window_file_job_thread);
}

/* ---- recompute after a policy change ---- */

/* Results kept per policy for going back (besides the one shown), at most: fewer for long
 * traces, so that the kept results hold at most about CS_WINDOW_SEEN_STMTS statements of the
 * file (every pass of a 50,000-statement trace takes about 400 MB: none is kept then, only
 * the diff's previous result is reused). */
#define CS_WINDOW_SEEN_POLICIES 3
#define CS_WINDOW_SEEN_STMTS    30000

/* How many results of other policies to keep for the open file. */
static guint
seen_policies_max (CsWindow *self)
{
  guint n = 0;

  for (guint i = 0; self->traces != NULL && i < self->traces->traces->len; i++)
    n += ((CsTrace *) g_ptr_array_index (self->traces->traces, i))->n_stmts;
  return MIN (CS_WINDOW_SEEN_POLICIES, CS_WINDOW_SEEN_STMTS / MAX (n, 1));
}

static void
seen_policy_free (gpointer data)
{
  SeenPolicy *p = data;

  g_free (p->policy);
  cs_analysis_unref (p->analysis);
  g_free (p);
}

/* Keeps @analysis as the result of its policy, the most recent first. */
static void
seen_policy_add (CsWindow *self, CsAnalysis *analysis)
{
  SeenPolicy *p = g_new0 (SeenPolicy, 1);

  p->policy = cs_policy_to_string (cs_analysis_get_policy (analysis));
  p->analysis = cs_analysis_ref (analysis);
  for (GList *l = self->seen_policies.head; l != NULL; l = l->next)
    if (strcmp (((SeenPolicy *) l->data)->policy, p->policy) == 0)
      {
        seen_policy_free (l->data);
        g_queue_delete_link (&self->seen_policies, l);
        break;
      }
  g_queue_push_head (&self->seen_policies, p);
  while (self->seen_policies.length > seen_policies_max (self) + 1)
    seen_policy_free (g_queue_pop_tail (&self->seen_policies));
}

/* The result kept for @policy (the diff's previous result included), or NULL. */
static CsAnalysis *
seen_policy_find (CsWindow *self, const CsPolicy *policy)
{
  g_autofree char *key = cs_policy_to_string (policy);

  if (self->previous != NULL)
    {
      g_autofree char *prev = cs_policy_to_string (cs_analysis_get_policy (self->previous));

      if (strcmp (prev, key) == 0)
        return self->previous;
    }
  for (GList *l = self->seen_policies.head; l != NULL; l = l->next)
    if (strcmp (((SeenPolicy *) l->data)->policy, key) == 0)
      return ((SeenPolicy *) l->data)->analysis;
  return NULL;
}

/* Shows the result of a policy change (computed or kept) with the diff against the result
 * shown before this change, the previous policy (README: the diff and Side by Side compare
 * with "the previous policy"; after A -> B -> A that is B). */
static void
show_recomputed (CsWindow *self, CsAnalysis *analysis)
{
  if (self->analysis != NULL && self->analysis != analysis)
    {
      g_clear_pointer (&self->previous, cs_analysis_unref);
      self->previous = cs_analysis_ref (self->analysis);
    }
  _cs_window_clear_run (self);
  set_analysis (self, analysis);
  update_diff_bar (self);
}

typedef struct
{
  CsWindow *self;        /* (owned) */
  guint     generation;  /* the window's generation when asked (stale once bumped) */
} RecomputeData;

static void
recompute_done_cb (GObject *source, GAsyncResult *result, gpointer user_data)
{
  RecomputeData *data = user_data;
  g_autoptr(CsWindow) self = data->self;
  g_autoptr(GError) error = NULL;
  g_autoptr(CsAnalysis) analysis = cs_analysis_new_finish (result, &error);
  guint generation = data->generation;

  g_free (data);
  _cs_window_job_end (self);
  if (generation != self->generation)
    return;
  if (analysis == NULL)
    {
      g_autofree char *msg = g_strdup_printf ("The pipeline failed under this policy; the graph "
                                              "still shows the previous result. %s",
                                              error->message);
      cs_window_show_error (self, msg);
      return;
    }
  hide_error (self);
  seen_policy_add (self, analysis);
  show_recomputed (self, analysis);
}

/**
 * _cs_window_recompute:
 *
 * Re-runs the pipeline under self->policy on a worker thread; when it returns (and no newer
 * request superseded it) the graphs, text and status update and the diff bar shows what
 * changed against the previous result.  A policy whose result is kept (the last few shown for
 * this file, fewer for long traces, and the diff's previous one) is not re-run: its result
 * is shown at once.
 */
void
_cs_window_recompute (CsWindow *self)
{
  RecomputeData *data;
  CsAnalysis *seen;

  if (self->traces == NULL)
    return;
  g_cancellable_cancel (self->cancellable);
  g_set_object (&self->cancellable, g_cancellable_new ());
  g_object_unref (self->cancellable);
  /* a policy shown before: its kept result at once (and the views' cached layouts of its
   * traces) */
  if ((seen = seen_policy_find (self, &self->policy)) != NULL)
    {
      g_autoptr(CsAnalysis) keep = cs_analysis_ref (seen);

      self->generation++;   /* a computation still in flight is stale now */
      hide_error (self);
      seen_policy_add (self, keep);
      show_recomputed (self, keep);
      return;
    }

  data = g_new0 (RecomputeData, 1);
  data->self = g_object_ref (self);
  data->generation = ++self->generation;
  _cs_window_job_begin (self);
  cs_analysis_new_async (self->traces, &self->policy, self->cancellable, recompute_done_cb, data);
  _cs_window_compare_recompute (self);   /* the compared file follows the policy */
}

/* ------------------------------------------------------------------------------------------ */
/* Drag and drop                                                                               */

static gboolean
drop_cb (GtkDropTarget *target, const GValue *value, double x, double y, CsWindow *self)
{
  if (!G_VALUE_HOLDS (value, G_TYPE_FILE))
    return FALSE;
  cs_window_open_file (self, g_value_get_object (value));
  return TRUE;
}

/* ------------------------------------------------------------------------------------------ */
/* GObject                                                                                     */

static void
cs_window_dispose (GObject *object)
{
  CsWindow *self = CS_WINDOW (object);

  if (self->cancellable != NULL)
    g_cancellable_cancel (self->cancellable);
  if (self->run_cancellable != NULL)
    g_cancellable_cancel (self->run_cancellable);
  if (self->compare_cancellable != NULL)
    g_cancellable_cancel (self->compare_cancellable);
  self->generation++;   /* results still in flight are stale now */
  self->compare_generation++;
  gtk_widget_dispose_template (GTK_WIDGET (self), CS_TYPE_WINDOW);
  G_OBJECT_CLASS (cs_window_parent_class)->dispose (object);
}

static void
cs_window_finalize (GObject *object)
{
  CsWindow *self = CS_WINDOW (object);

  g_clear_object (&self->cancellable);
  g_clear_object (&self->file);
  g_clear_pointer (&self->traces, cs_trace_list_unref);
  g_clear_pointer (&self->analysis, cs_analysis_unref);
  g_clear_pointer (&self->previous, cs_analysis_unref);
  g_queue_clear_full (&self->seen_policies, seen_policy_free);
  g_clear_pointer (&self->final_stats, g_hash_table_unref);
  g_clear_pointer (&self->stmt_ranges, g_array_unref);
  g_clear_pointer (&self->policy_dropdowns, g_free);
  g_clear_pointer (&self->last_run_summary, g_free);
  g_clear_pointer (&self->search_matches, g_array_unref);
  g_clear_pointer (&self->search_needle, g_free);
  for (CsFamily f = 0; f < CS_N_FAMILIES; f++)
    {
      for (guint h = 0; h < CS_N_RUN_HEAT; h++)
        {
          g_clear_pointer (&self->run_node_values[h][f], g_hash_table_unref);
          g_clear_pointer (&self->run_edge_values[h][f], g_hash_table_unref);
        }
    }
  for (guint h = 0; h < CS_N_RUN_HEAT; h++)
    g_clear_pointer (&self->run_titles[h], g_free);
  g_clear_pointer (&self->run_divergence, g_free);
  g_clear_pointer (&self->user_casts, g_ptr_array_unref);
  g_clear_pointer (&self->user_casts_for, cs_analysis_unref);
  g_clear_object (&self->run_cancellable);
  g_clear_object (&self->compare_file);
  g_clear_pointer (&self->compare_traces, cs_trace_list_unref);
  g_clear_pointer (&self->compare_analysis, cs_analysis_unref);
  g_clear_pointer (&self->compare_match, cs_trace_match_free);
  g_clear_object (&self->compare_cancellable);
  G_OBJECT_CLASS (cs_window_parent_class)->finalize (object);
}

/* Side panel widths at the first allocation, px: a fifth of the window for the policy panel
 * and a little more for the details and run panel, each within [min, max]; the graph gets the
 * rest (at 1280 px about 60 %).  Later the panes keep their widths and the graph takes what
 * the window gains or loses (the side panels do not resize). */
#define LEFT_PANEL_MIN_PX   230
#define LEFT_PANEL_MAX_PX   300
#define RIGHT_PANEL_MIN_PX  280
#define RIGHT_PANEL_MAX_PX  360

static void
cs_window_size_allocate (GtkWidget *widget, int width, int height, int baseline)
{
  CsWindow *self = CS_WINDOW (widget);

  /* placed before the children are allocated, so that the first frame has them */
  if (!self->panes_placed && width > 0)
    {
      int left = CLAMP (width / 5, LEFT_PANEL_MIN_PX, LEFT_PANEL_MAX_PX);
      int right = CLAMP (width * 9 / 40, RIGHT_PANEL_MIN_PX, RIGHT_PANEL_MAX_PX);

      self->panes_placed = TRUE;
      gtk_paned_set_position (self->outer_paned, left);
      gtk_paned_set_position (self->main_paned, MAX (width - left - right, 200));
    }
  GTK_WIDGET_CLASS (cs_window_parent_class)->size_allocate (widget, width, height, baseline);
  compare_recentre (self);
}

static void
cs_window_class_init (CsWindowClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  object_class->dispose = cs_window_dispose;
  object_class->finalize = cs_window_finalize;
  widget_class->size_allocate = cs_window_size_allocate;

  g_type_ensure (CS_TYPE_GRAPH_VIEW);
  g_type_ensure (CS_TYPE_LINE_VIEW);
  gtk_widget_class_set_template_from_resource (widget_class, "/org/castscope/Castscope/cs-window.ui");
  gtk_widget_class_bind_template_child (widget_class, CsWindow, error_bar);
  gtk_widget_class_bind_template_child (widget_class, CsWindow, error_label);
  gtk_widget_class_bind_template_child (widget_class, CsWindow, diff_bar);
  gtk_widget_class_bind_template_child (widget_class, CsWindow, diff_label);
  gtk_widget_class_bind_template_child (widget_class, CsWindow, diff_help_label);
  gtk_widget_class_bind_template_child (widget_class, CsWindow, search_bar);
  gtk_widget_class_bind_template_child (widget_class, CsWindow, search_entry);
  gtk_widget_class_bind_template_child (widget_class, CsWindow, policy_grid);
  gtk_widget_class_bind_template_child (widget_class, CsWindow, policy_label);
  gtk_widget_class_bind_template_child (widget_class, CsWindow, pass_adjustment);
  gtk_widget_class_bind_template_child (widget_class, CsWindow, pass_scale);
  gtk_widget_class_bind_template_child (widget_class, CsWindow, pass_label);
  gtk_widget_class_bind_template_child (widget_class, CsWindow, graph_stack);
  gtk_widget_class_bind_template_child (widget_class, CsWindow, forward_view);
  gtk_widget_class_bind_template_child (widget_class, CsWindow, backward_view);
  gtk_widget_class_bind_template_child (widget_class, CsWindow, busy_spinner);
  gtk_widget_class_bind_template_child (widget_class, CsWindow, trace_view);
  gtk_widget_class_bind_template_child (widget_class, CsWindow, details_label);
  gtk_widget_class_bind_template_child (widget_class, CsWindow, run_progress);
  gtk_widget_class_bind_template_child (widget_class, CsWindow, run_cancel_button);
  gtk_widget_class_bind_template_child (widget_class, CsWindow, run_grid);
  gtk_widget_class_bind_template_child (widget_class, CsWindow, overlay_dropdown);
  gtk_widget_class_bind_template_child (widget_class, CsWindow, divergence_button);
  gtk_widget_class_bind_template_child (widget_class, CsWindow, compare_paned);
  gtk_widget_class_bind_template_child (widget_class, CsWindow, outer_paned);
  gtk_widget_class_bind_template_child (widget_class, CsWindow, main_paned);
  gtk_widget_class_bind_template_child (widget_class, CsWindow, compare_box);
  gtk_widget_class_bind_template_child (widget_class, CsWindow, compare_label);
  gtk_widget_class_bind_template_child (widget_class, CsWindow, compare_view);
  gtk_widget_class_bind_template_child (widget_class, CsWindow, status_casts);
  gtk_widget_class_bind_template_child (widget_class, CsWindow, status_regions);
  gtk_widget_class_bind_template_child (widget_class, CsWindow, status_matmuls);
  gtk_widget_class_bind_template_child (widget_class, CsWindow, status_time);
  gtk_widget_class_bind_template_child (widget_class, CsWindow, status_message);
  gtk_widget_class_bind_template_child (widget_class, CsWindow, policy_submenu);
  gtk_widget_class_bind_template_child (widget_class, CsWindow, recent_submenu);
  gtk_widget_class_bind_template_child (widget_class, CsWindow, minimap_area);
  gtk_widget_class_bind_template_child (widget_class, CsWindow, structure_list);
  gtk_widget_class_bind_template_child (widget_class, CsWindow, structure_empty);
  gtk_widget_class_bind_template_child (widget_class, CsWindow, legend_heading);
  gtk_widget_class_bind_template_child (widget_class, CsWindow, legend_area);
  gtk_widget_class_bind_template_child (widget_class, CsWindow, notes_label);
  gtk_widget_class_bind_template_callback (widget_class, view_layout_changed_cb);
  gtk_widget_class_bind_template_callback (widget_class, view_view_changed_cb);
  gtk_widget_class_bind_template_callback_full (widget_class, "search_previous_cb",
                                                G_CALLBACK (_cs_window_search_previous_cb));
  gtk_widget_class_bind_template_callback (widget_class, error_bar_response_cb);
  gtk_widget_class_bind_template_callback (widget_class, canvas_overlay_child_position_cb);
  gtk_widget_class_bind_template_callback (widget_class, graph_stack_notify_cb);
  gtk_widget_class_bind_template_callback (widget_class, view_node_selected_cb);
  gtk_widget_class_bind_template_callback (widget_class, compare_node_selected_cb);
  gtk_widget_class_bind_template_callback (widget_class, compare_view_changed_cb);
  gtk_widget_class_bind_template_callback (widget_class, compare_layout_changed_cb);
  gtk_widget_class_bind_template_callback_full (widget_class, "overlay_changed_cb",
                                                G_CALLBACK (_cs_window_apply_run_overlay));
  gtk_widget_class_bind_template_callback_full (widget_class, "run_cancel_cb",
                                                G_CALLBACK (_cs_window_cancel_run));
  gtk_widget_class_bind_template_callback_full (widget_class, "search_changed_cb",
                                                G_CALLBACK (_cs_window_search_changed_cb));
  gtk_widget_class_bind_template_callback_full (widget_class, "search_activate_cb",
                                                G_CALLBACK (_cs_window_search_activate_cb));
}

static void
cs_window_init (CsWindow *self)
{
  GtkDropTarget *drop;

  self->stmt_ranges = g_array_new (FALSE, FALSE, sizeof (CsStmtRange));
  cs_policy_init_default (&self->policy);
  for (CsFamily f = 0; f < CS_N_FAMILIES; f++)
    self->pass_at_end[f] = TRUE;

  gtk_widget_init_template (GTK_WIDGET (self));

  gtk_widget_add_css_class (GTK_WIDGET (self->trace_view), "trace-text");
  g_signal_connect_object (self->trace_view, "offset-clicked",
                           G_CALLBACK (text_offset_clicked_cb), self, G_CONNECT_SWAPPED);

  g_signal_connect (self->pass_adjustment, "value-changed", G_CALLBACK (pass_value_changed_cb), self);

  gtk_search_bar_connect_entry (self->search_bar, GTK_EDITABLE (self->search_entry));

  {
    GtkEventController *keys = gtk_event_controller_key_new ();

    gtk_event_controller_set_propagation_phase (keys, GTK_PHASE_CAPTURE);
    g_signal_connect (keys, "key-pressed", G_CALLBACK (search_key_pressed_cb), self);
    gtk_widget_add_controller (GTK_WIDGET (self->search_entry), keys);
  }
  gtk_drawing_area_set_draw_func (self->minimap_area, minimap_draw, self, NULL);
  {
    GtkGesture *drag = gtk_gesture_drag_new ();

    g_signal_connect (drag, "drag-begin", G_CALLBACK (minimap_drag_begin_cb), self);
    g_signal_connect (drag, "drag-update", G_CALLBACK (minimap_drag_update_cb), self);
    gtk_widget_add_controller (GTK_WIDGET (self->minimap_area), GTK_EVENT_CONTROLLER (drag));
  }
  gtk_drawing_area_set_draw_func (self->legend_area, legend_draw, self, NULL);
  g_signal_connect (self->structure_list, "row-activated", G_CALLBACK (structure_row_activated_cb), self);
  {
    GtkGesture *rc = gtk_gesture_click_new ();

    gtk_gesture_single_set_button (GTK_GESTURE_SINGLE (rc), 0);   /* primary and secondary */
    gtk_event_controller_set_propagation_phase (GTK_EVENT_CONTROLLER (rc), GTK_PHASE_CAPTURE);
    g_signal_connect (rc, "pressed", G_CALLBACK (run_grid_pressed_cb), self);
    gtk_widget_add_controller (GTK_WIDGET (self->run_grid), GTK_EVENT_CONTROLLER (rc));
  }

  drop = gtk_drop_target_new (G_TYPE_FILE, GDK_ACTION_COPY);
  g_signal_connect (drop, "drop", G_CALLBACK (drop_cb), self);
  gtk_widget_add_controller (GTK_WIDGET (self), GTK_EVENT_CONTROLLER (drop));

  _cs_window_init_actions (self);
  _cs_window_init_compare_actions (self);
  _cs_window_init_policy_panel (self);
  g_signal_connect_object (gtk_recent_manager_get_default (), "changed",
                           G_CALLBACK (_cs_window_update_recent), self, G_CONNECT_SWAPPED);
  _cs_window_update_recent (self);
  update_shown (self);
}

/**
 * cs_window_new:
 * @application: (nullable): the application; NULL for a window outside an application (tests)
 *
 * Returns: (transfer full): a new window showing nothing until cs_window_open_file()
 */
CsWindow *
cs_window_new (CsApplication *application)
{
  return g_object_new (CS_TYPE_WINDOW, "application", application, NULL);
}
