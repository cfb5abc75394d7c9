/* cs-line-view.h: CsLineView, a read-only view of a text as lines of one height.
 *
 * The trace text pane.  The text is kept as it is given, with the start of every line; only
 * the lines in view are laid out (Pango) and drawn, so setting a text of any length costs one
 * pass over it and drawing costs the lines on screen.  The widget is GtkScrollable (put it in
 * a GtkScrolledWindow); it does not wrap.  It shows one highlighted range of whole lines (the
 * selected statement), a text selection made with the pointer (copied with Ctrl+C or the
 * context menu), and tells of a click on the text ("offset-clicked").  Offsets are character
 * offsets into the text, as GtkTextBuffer counts them; lines are counted from 0.
 */
#pragma once

#include <gtk/gtk.h>

G_BEGIN_DECLS

#define CS_TYPE_LINE_VIEW (cs_line_view_get_type ())

G_DECLARE_FINAL_TYPE (CsLineView, cs_line_view, CS, LINE_VIEW, GtkWidget)

GtkWidget  *cs_line_view_new               (void);
gboolean    cs_line_view_set_text          (CsLineView *self,
                                            const char *text);
const char *cs_line_view_get_text          (CsLineView *self);
guint       cs_line_view_get_n_lines       (CsLineView *self);
guint       cs_line_view_line_at_offset    (CsLineView *self,
                                            int         offset);
int         cs_line_view_line_offset       (CsLineView *self,
                                            guint       line);
char       *cs_line_view_dup_line          (CsLineView *self,
                                            guint       line);
void        cs_line_view_set_highlight     (CsLineView *self,
                                            int         start,
                                            int         end);
gboolean    cs_line_view_get_highlight     (CsLineView *self,
                                            guint      *first_line,
                                            guint      *last_line);
void        cs_line_view_scroll_to_line    (CsLineView *self,
                                            guint       line);
gboolean    cs_line_view_get_visible_lines (CsLineView *self,
                                            guint      *first_line,
                                            guint      *last_line);
void        cs_line_view_select_range      (CsLineView *self,
                                            int         start,
                                            int         end);
char       *cs_line_view_dup_selected_text (CsLineView *self);
int         cs_line_view_offset_at_point   (CsLineView *self,
                                            double      x,
                                            double      y);

G_END_DECLS
