/* cs-graph-view.h: CsGraphView, the canvas that draws one trace as a graph.
 *
 * Nodes are the trace's statements (top level, or a prim inside a region or decomposition)
 * and groups (layers, modules, chunks: CS_LAYOUT_GROUP_ID), named by id (0 = none).  Layout
 * runs off the GTK thread (render/); the widget draws the display list with render/'s cairo
 * painter under its own view transform (pan, zoom), and hit-tests clicks against it.
 */
#pragma once

#include <gtk/gtk.h>

#include "cs-ir.h"
#include "cs-draw.h"
#include "cs-layout.h"

G_BEGIN_DECLS

#define CS_TYPE_GRAPH_VIEW (cs_graph_view_get_type ())

G_DECLARE_FINAL_TYPE (CsGraphView, cs_graph_view, CS, GRAPH_VIEW, GtkWidget)

GtkWidget  *cs_graph_view_new            (void);
void        cs_graph_view_set_trace      (CsGraphView       *self,
                                          CsTrace           *trace,
                                          CsTrace           *diff_base);
void        cs_graph_view_set_trace_full (CsGraphView       *self,
                                          CsTrace           *trace,
                                          CsTrace           *diff_base,
                                          GPtrArray         *user_casts,
                                          GPtrArray         *keep);
CsTrace    *cs_graph_view_get_trace      (CsGraphView       *self);
void        cs_graph_view_set_diff_base  (CsGraphView       *self,
                                          CsTrace           *diff_base);
gboolean    cs_graph_view_get_diff_stats (CsGraphView       *self,
                                          CsLayoutDiffStats *stats);
void        cs_graph_view_set_values     (CsGraphView       *self,
                                          GHashTable        *values,
                                          GHashTable        *edge_values,
                                          const char        *title);
void        cs_graph_view_set_placeholder(CsGraphView       *self,
                                          const char        *text);
guint32     cs_graph_view_get_selected   (CsGraphView       *self);
void        cs_graph_view_set_show_legend (CsGraphView      *self,
                                           gboolean          show);
gboolean    cs_graph_view_get_show_legend (CsGraphView      *self);
void        cs_graph_view_set_fold_repeats (CsGraphView     *self,
                                          gboolean          fold);
gboolean    cs_graph_view_get_fold_repeats (CsGraphView     *self);
void        cs_graph_view_set_precision_lens (CsGraphView   *self,
                                          gboolean          on);
gboolean    cs_graph_view_get_precision_lens (CsGraphView   *self);
void        cs_graph_view_set_user_casts (CsGraphView       *self,
                                          GPtrArray         *removed,
                                          GPtrArray         *keep);
void        cs_graph_view_select         (CsGraphView       *self,
                                          guint32            stmt_id,
                                          gboolean           center);
gboolean    cs_graph_view_move_selection (CsGraphView       *self,
                                          GtkDirectionType   direction);
void        cs_graph_view_toggle_expanded(CsGraphView       *self,
                                          guint32            stmt_id);
void        cs_graph_view_zoom_by        (CsGraphView       *self,
                                          double             factor);
void        cs_graph_view_fit            (CsGraphView       *self);
double      cs_graph_view_get_zoom       (CsGraphView       *self);
gboolean    cs_graph_view_is_busy        (CsGraphView       *self);
gboolean    cs_graph_view_export         (CsGraphView       *self,
                                          const char        *path,
                                          GError           **error);
CsLayout   *cs_graph_view_get_layout     (CsGraphView       *self);
guint       cs_graph_view_count_badges   (CsGraphView       *self,
                                          gboolean           tensor_core);
void        cs_graph_view_reset          (CsGraphView       *self);
guint32     cs_graph_view_activate_at    (CsGraphView       *self,
                                          double             x,
                                          double             y,
                                          int                n_press);
void        cs_graph_view_set_group_expanded (CsGraphView   *self,
                                          const char        *name,
                                          gboolean           expanded);
gboolean    cs_graph_view_get_group_expanded (CsGraphView   *self,
                                          const char        *name);
gboolean    cs_graph_view_reveal         (CsGraphView       *self,
                                          guint32            stmt_id);
gboolean    cs_graph_view_step_repeat    (CsGraphView       *self,
                                          gint               step);
void        cs_graph_view_set_found      (CsGraphView       *self,
                                          GHashTable        *stmt_ids);
const char * const *cs_graph_view_get_notes (CsGraphView    *self);
void        cs_graph_view_draw_keys      (CsGraphView       *self,
                                          cairo_t           *cr,
                                          double             width,
                                          double            *height);
void        cs_graph_view_draw_minimap   (CsGraphView       *self,
                                          cairo_t           *cr,
                                          int                width,
                                          int                height);
void        cs_graph_view_minimap_move   (CsGraphView       *self,
                                          double             x,
                                          double             y);
void        cs_graph_view_get_view       (CsGraphView       *self,
                                          CsView            *view);
void        cs_graph_view_set_view       (CsGraphView       *self,
                                          const CsView      *view);
void        cs_graph_view_set_diff_older (CsGraphView       *self,
                                          gboolean           older);
guint32     cs_graph_view_match          (CsGraphView       *self,
                                          CsGraphView       *other,
                                          guint32            other_id);

G_END_DECLS
