/* cs-line-view.c: CsLineView, a read-only view of a text as lines of one height.
 *
 * The text is held as one string with the byte and character offset of each line's start.
 * Every line is one Pango line of the widget's font (no wrapping), so line i lies at
 * y = TOP_MARGIN + i * line height, and the scroll range is known without laying out any line;
 * the snapshot lays out the lines in view only.  A line longer than LONG_LINE bytes is laid out
 * from a little before the first visible column (columns counted as the width of "0", the
 * widget's font being monospace) to a little past the last.
 */
#include "cs-config.h"

#include "cs-line-view.h"

#include <math.h>
#include <string.h>

#define LEFT_MARGIN 6     /* px before each line's first character */
#define TOP_MARGIN 4      /* px above the first line */
#define BOTTOM_MARGIN 4   /* px below the last line */
#define LONG_LINE 4096    /* bytes: longer lines are laid out around the visible columns */
#define DRAG_THRESHOLD 3  /* px the pointer moves before a press becomes a text selection */

struct _CsLineView
{
  GtkWidget parent_instance;

  char          *text;          /* (owned) the whole text, NUL-terminated */
  gsize         *line_byte;     /* n_lines + 1: byte offset of each line's start; the last is
                                   the text's length + 1 (one past a final newline) */
  int           *line_char;     /* n_lines + 1: character offset of each line's start, the
                                   same sentinel (the text's length in characters + 1) */
  guint          n_lines;       /* lines of the text (newlines + 1; 1 for an empty text) */
  guint          max_cols;      /* characters of the longest line */

  GtkAdjustment *hadj;          /* (owned) horizontal scroll, px */
  GtkAdjustment *vadj;          /* (owned) vertical scroll, px */
  guint          hscroll_policy;  /* GtkScrollablePolicy */
  guint          vscroll_policy;  /* GtkScrollablePolicy */

  guint          metrics_serial;  /* pango_context_get_serial() the metrics were taken at */
  gboolean       metrics_valid;   /* line_h and char_w are of the current font */
  int            line_h;        /* px: height of one line */
  double         char_w;        /* px: width of one column ("0") */

  int            hl_start;      /* highlighted range (char offsets, end exclusive), -1: none */
  int            hl_end;        /* char offset one past the highlight */
  int            sel_anchor;    /* where the pointer selection began (char offset) */
  int            sel_start;     /* the text selection, [sel_start, sel_end); empty: none */
  int            sel_end;       /* char offset, exclusive; >= sel_start */
  double         press_x;       /* widget coordinates of the primary button's press */
  double         press_y;       /* with press_x */
  gboolean       dragging;      /* the press has moved into a text selection */
  int            pending_line;  /* line to scroll to once allocated, -1: none */

  GtkWidget     *menu;          /* (owned) the context menu (a GtkPopoverMenu child) */
};

enum
{
  PROP_0,
  PROP_HADJUSTMENT,
  PROP_VADJUSTMENT,
  PROP_HSCROLL_POLICY,
  PROP_VSCROLL_POLICY,
};

enum
{
  SIGNAL_OFFSET_CLICKED,
  N_SIGNALS
};

static guint signals[N_SIGNALS];

G_DEFINE_FINAL_TYPE_WITH_CODE (CsLineView, cs_line_view, GTK_TYPE_WIDGET,
                               G_IMPLEMENT_INTERFACE (GTK_TYPE_SCROLLABLE, NULL))

/* ---- metrics and geometry ---------------------------------------------------------------- */

static void
ensure_metrics (CsLineView *self)
{
  PangoContext *ctx = gtk_widget_get_pango_context (GTK_WIDGET (self));
  guint serial = pango_context_get_serial (ctx);
  PangoLayout *layout;
  PangoRectangle logical;

  if (self->metrics_valid && serial == self->metrics_serial)
    return;
  layout = pango_layout_new (ctx);
  pango_layout_set_text (layout, "0000000000", -1);
  pango_layout_get_pixel_extents (layout, NULL, &logical);
  g_object_unref (layout);
  self->line_h = MAX (1, logical.height);
  self->char_w = MAX (1.0, logical.width / 10.0);
  self->metrics_serial = serial;
  self->metrics_valid = TRUE;
}

/* Bytes of line @i without its newline. */
static gsize
line_len (CsLineView *self, guint i)
{
  return self->line_byte[i + 1] - 1 - self->line_byte[i];
}

/* Characters of line @i without its newline. */
static int
line_chars (CsLineView *self, guint i)
{
  return self->line_char[i + 1] - 1 - self->line_char[i];
}

/* The part of line @i that is laid out with the horizontal scroll at @hv px: all of it, or for
 * a long line the columns around the view.  Sets @start (bytes into the text), @len (bytes)
 * and @col0 (the column the part begins at). */
static void
line_piece (CsLineView *self, guint i, double hv, gsize *start, gsize *len, int *col0)
{
  const char *line = self->text + self->line_byte[i];
  gsize n = line_len (self, i);
  int first, count;
  const char *a, *b, *end = line + n;

  if (n <= LONG_LINE)
    {
      *start = self->line_byte[i];
      *len = n;
      *col0 = 0;
      return;
    }
  first = MAX (0, (int) (hv / self->char_w) - 16);
  first = MIN (first, line_chars (self, i));
  count = (int) (gtk_widget_get_width (GTK_WIDGET (self)) / self->char_w) + 64;
  a = g_utf8_offset_to_pointer (line, first);
  for (b = a; b < end && count > 0; count--)
    b = g_utf8_next_char (b);
  *start = (gsize) (a - self->text);
  *len = (gsize) (MIN (b, end) - a);
  *col0 = first;
}

static int
content_height (CsLineView *self)
{
  return TOP_MARGIN + (int) self->n_lines * self->line_h + BOTTOM_MARGIN;
}

static int
content_width (CsLineView *self)
{
  return LEFT_MARGIN + (int) (self->max_cols * self->char_w + 0.5) + LEFT_MARGIN;
}

static void
configure_adjustments (CsLineView *self)
{
  int w = gtk_widget_get_width (GTK_WIDGET (self));
  int h = gtk_widget_get_height (GTK_WIDGET (self));
  double upper;

  ensure_metrics (self);
  if (self->vadj != NULL)
    {
      upper = MAX (content_height (self), h);
      gtk_adjustment_configure (self->vadj,
                                CLAMP (gtk_adjustment_get_value (self->vadj), 0, upper - h),
                                0, upper, self->line_h, h * 0.9, h);
    }
  if (self->hadj != NULL)
    {
      upper = MAX (content_width (self), w);
      gtk_adjustment_configure (self->hadj,
                                CLAMP (gtk_adjustment_get_value (self->hadj), 0, upper - w),
                                0, upper, self->char_w * 4, w * 0.9, w);
    }
}

static double
vscroll (CsLineView *self)
{
  return self->vadj ? gtk_adjustment_get_value (self->vadj) : 0;
}

static double
hscroll (CsLineView *self)
{
  return self->hadj ? gtk_adjustment_get_value (self->hadj) : 0;
}

/* ---- text -------------------------------------------------------------------------------- */

/* Characters in @n bytes of UTF-8 at @p: the bytes that do not continue a character. */
static gsize
utf8_chars (const char *p, gsize n)
{
  gsize cont = 0;

  for (gsize i = 0; i < n; i++)
    cont += ((guchar) p[i] & 0xC0) == 0x80;
  return n - cont;
}

static void
index_text (CsLineView *self)
{
  gsize len = strlen (self->text);
  guint n = 1;
  const char *p, *end = self->text + len;
  int chars = 0;

  for (p = self->text; (p = memchr (p, '\n', (gsize) (end - p))) != NULL; p++)
    n++;
  g_free (self->line_byte);
  g_free (self->line_char);
  self->line_byte = g_new (gsize, n + 1);
  self->line_char = g_new (int, n + 1);
  self->n_lines = n;
  self->max_cols = 0;
  p = self->text;
  for (guint i = 0; i < n; i++)
    {
      const char *nl = memchr (p, '\n', (gsize) (end - p));
      const char *stop = nl ? nl : end;
      int c = (int) utf8_chars (p, (gsize) (stop - p));

      self->line_byte[i] = (gsize) (p - self->text);
      self->line_char[i] = chars;
      self->max_cols = MAX (self->max_cols, (guint) c);
      chars += c + 1;
      p = stop + 1;
    }
  self->line_byte[n] = len + 1;
  self->line_char[n] = chars;
}

/**
 * cs_line_view_set_text:
 * @self: a #CsLineView
 * @text: (nullable): the text (UTF-8, invalid bytes shown as U+FFFD; NULL: empty), copied
 *
 * Shows @text from its first line.  A text equal to the one shown changes nothing (the scroll
 * position, highlight and selection stay); another drops the highlight and the selection and
 * keeps the scroll position as far as the new text reaches.  Costs one pass over @text.
 * Returns: TRUE when the text changed
 */
gboolean
cs_line_view_set_text (CsLineView *self, const char *text)
{
  g_return_val_if_fail (CS_IS_LINE_VIEW (self), FALSE);

  if (text == NULL)
    text = "";
  if (strcmp (text, self->text) == 0)
    return FALSE;
  g_free (self->text);
  /* invalid UTF-8 is shown with U+FFFD in its place */
  self->text = g_utf8_validate (text, -1, NULL) ? g_strdup (text) : g_utf8_make_valid (text, -1);
  index_text (self);
  self->hl_start = self->hl_end = -1;
  self->sel_start = self->sel_end = self->sel_anchor = 0;
  self->dragging = FALSE;
  gtk_widget_action_set_enabled (GTK_WIDGET (self), "clipboard.copy", FALSE);
  configure_adjustments (self);
  gtk_widget_queue_draw (GTK_WIDGET (self));
  return TRUE;
}

/**
 * cs_line_view_get_text:
 * Returns: (transfer none): the text shown ("" when none); valid until the next set_text
 */
const char *
cs_line_view_get_text (CsLineView *self)
{
  g_return_val_if_fail (CS_IS_LINE_VIEW (self), NULL);
  return self->text;
}

/**
 * cs_line_view_get_n_lines:
 * Returns: the number of lines (newlines + 1: a text ending in a newline ends in an empty line)
 */
guint
cs_line_view_get_n_lines (CsLineView *self)
{
  g_return_val_if_fail (CS_IS_LINE_VIEW (self), 0);
  return self->n_lines;
}

/**
 * cs_line_view_line_at_offset:
 * @offset: a character offset (clamped to the text)
 *
 * Returns: the line holding @offset (a newline belongs to the line it ends)
 */
guint
cs_line_view_line_at_offset (CsLineView *self, int offset)
{
  guint lo = 0, hi;

  g_return_val_if_fail (CS_IS_LINE_VIEW (self), 0);
  hi = self->n_lines;  /* line_char[lo] <= offset < line_char[hi], by bisection */
  while (hi - lo > 1)
    {
      guint mid = lo + (hi - lo) / 2;

      if (self->line_char[mid] <= offset)
        lo = mid;
      else
        hi = mid;
    }
  return lo;
}

/**
 * cs_line_view_line_offset:
 * @line: a line (clamped to the last)
 *
 * Returns: the character offset of @line's first character
 */
int
cs_line_view_line_offset (CsLineView *self, guint line)
{
  g_return_val_if_fail (CS_IS_LINE_VIEW (self), 0);
  return self->line_char[MIN (line, self->n_lines - 1)];
}

/**
 * cs_line_view_dup_line:
 * @line: a line
 *
 * Returns: (transfer full) (nullable): the text of @line without its newline, NULL past the
 *   last line
 */
char *
cs_line_view_dup_line (CsLineView *self, guint line)
{
  g_return_val_if_fail (CS_IS_LINE_VIEW (self), NULL);
  if (line >= self->n_lines)
    return NULL;
  return g_strndup (self->text + self->line_byte[line], line_len (self, line));
}

/* ---- highlight, scrolling ---------------------------------------------------------------- */

/**
 * cs_line_view_set_highlight:
 * @start: character offset of the range's start, or -1 for no highlight
 * @end: character offset one past its end (a range ending at a line's newline ends there)
 *
 * Paints the background of every line that the range touches (the first line holding @start
 * to the line holding its last character), the whole width of the view.  Does not scroll.
 */
void
cs_line_view_set_highlight (CsLineView *self, int start, int end)
{
  g_return_if_fail (CS_IS_LINE_VIEW (self));

  if (start < 0)
    start = end = -1;
  else
    end = MAX (end, start);
  if (start == self->hl_start && end == self->hl_end)
    return;
  self->hl_start = start;
  self->hl_end = end;
  gtk_widget_queue_draw (GTK_WIDGET (self));
}

/**
 * cs_line_view_get_highlight:
 * @first_line: (out) (optional): the first highlighted line
 * @last_line: (out) (optional): the last highlighted line
 *
 * Returns: whether a range is highlighted
 */
gboolean
cs_line_view_get_highlight (CsLineView *self, guint *first_line, guint *last_line)
{
  guint first, last;

  g_return_val_if_fail (CS_IS_LINE_VIEW (self), FALSE);
  if (self->hl_start < 0)
    return FALSE;
  first = cs_line_view_line_at_offset (self, self->hl_start);
  last = cs_line_view_line_at_offset (self, MAX (self->hl_start, self->hl_end - 1));
  if (first_line)
    *first_line = first;
  if (last_line)
    *last_line = MAX (first, last);
  return TRUE;
}

static void
scroll_now (CsLineView *self, guint line)
{
  int h = gtk_widget_get_height (GTK_WIDGET (self));
  double v = vscroll (self);
  double y = TOP_MARGIN + (double) MIN (line, self->n_lines - 1) * self->line_h;

  if (self->hadj != NULL && gtk_adjustment_get_value (self->hadj) > 0)
    gtk_adjustment_set_value (self->hadj, 0);
  if (self->vadj == NULL || (y >= v + h / 10 && y + self->line_h <= v + h * 9 / 10))
    return;
  gtk_adjustment_set_value (self->vadj, MAX (0, y - h / 10));
}

/**
 * cs_line_view_scroll_to_line:
 * @line: a line (clamped to the last)
 *
 * Brings @line into view at 1/10 of the height from the top, and the first column, unless it
 * is already within the middle 8/10 of the view (then nothing moves).  Before the view has a
 * size, it does so once it gets one.
 */
void
cs_line_view_scroll_to_line (CsLineView *self, guint line)
{
  g_return_if_fail (CS_IS_LINE_VIEW (self));

  ensure_metrics (self);
  if (gtk_widget_get_height (GTK_WIDGET (self)) <= 0)
    {
      self->pending_line = (int) MIN (line, G_MAXINT);
      return;
    }
  self->pending_line = -1;
  scroll_now (self, line);
}

/**
 * cs_line_view_get_visible_lines:
 * @first_line: (out) (optional): the first line wholly in view
 * @last_line: (out) (optional): the last line wholly in view
 *
 * Returns: FALSE when no line is wholly in view (the view has no size yet)
 */
gboolean
cs_line_view_get_visible_lines (CsLineView *self, guint *first_line, guint *last_line)
{
  int h;
  double v, a, b;

  g_return_val_if_fail (CS_IS_LINE_VIEW (self), FALSE);
  ensure_metrics (self);
  h = gtk_widget_get_height (GTK_WIDGET (self));
  v = vscroll (self);
  a = ceil ((v - TOP_MARGIN) / self->line_h);
  b = floor ((v + h - TOP_MARGIN) / self->line_h) - 1;
  a = MAX (a, 0);
  b = MIN (b, (double) self->n_lines - 1);
  if (h <= 0 || b < a)
    return FALSE;
  if (first_line)
    *first_line = (guint) a;
  if (last_line)
    *last_line = (guint) b;
  return TRUE;
}

/* ---- selection, clipboard ---------------------------------------------------------------- */

/**
 * cs_line_view_offset_at_point:
 * @x: widget coordinate, px
 * @y: widget coordinate, px
 *
 * Returns: the character offset nearest to (@x, @y): in the line under @y (the first or last
 *   line above or below the text), before or after the character under @x
 */
int
cs_line_view_offset_at_point (CsLineView *self, double x, double y)
{
  double fy;
  guint line;
  gsize start, len;
  int col0, index = 0, trailing = 0, off;
  PangoLayout *layout;

  g_return_val_if_fail (CS_IS_LINE_VIEW (self), 0);
  ensure_metrics (self);
  fy = (y + vscroll (self) - TOP_MARGIN) / self->line_h;
  line = fy < 0 ? 0 : (guint) MIN (fy, (double) self->n_lines - 1);
  line_piece (self, line, hscroll (self), &start, &len, &col0);
  layout = gtk_widget_create_pango_layout (GTK_WIDGET (self), NULL);
  pango_layout_set_text (layout, self->text + start, (int) len);
  pango_layout_xy_to_index (layout,
                            (int) ((x + hscroll (self) - LEFT_MARGIN - col0 * self->char_w)
                                   * PANGO_SCALE),
                            self->line_h / 2 * PANGO_SCALE, &index, &trailing);
  g_object_unref (layout);
  index = CLAMP (index, 0, (int) len);
  off = self->line_char[line] + col0
        + (int) g_utf8_strlen (self->text + start, index) + trailing;
  return MIN (off, self->line_char[line] + line_chars (self, line));
}

/**
 * cs_line_view_select_range:
 * @start: character offset
 * @end: character offset (either order; equal: no selection)
 *
 * Selects the text between @start and @end (clamped to the text), as a pointer drag does.
 */
void
cs_line_view_select_range (CsLineView *self, int start, int end)
{
  int total;

  g_return_if_fail (CS_IS_LINE_VIEW (self));
  total = self->line_char[self->n_lines] - 1;
  start = CLAMP (start, 0, total);
  end = CLAMP (end, 0, total);
  self->sel_start = MIN (start, end);
  self->sel_end = MAX (start, end);
  gtk_widget_action_set_enabled (GTK_WIDGET (self), "clipboard.copy",
                                 self->sel_end > self->sel_start);
  gtk_widget_queue_draw (GTK_WIDGET (self));
}

/**
 * cs_line_view_dup_selected_text:
 * Returns: (transfer full) (nullable): the selected text, NULL when nothing is selected
 */
char *
cs_line_view_dup_selected_text (CsLineView *self)
{
  const char *a, *b;

  g_return_val_if_fail (CS_IS_LINE_VIEW (self), NULL);
  if (self->sel_end <= self->sel_start)
    return NULL;
  {
    guint la = cs_line_view_line_at_offset (self, self->sel_start);
    guint lb = cs_line_view_line_at_offset (self, self->sel_end);

    a = g_utf8_offset_to_pointer (self->text + self->line_byte[la],
                                  self->sel_start - self->line_char[la]);
    b = g_utf8_offset_to_pointer (self->text + self->line_byte[lb],
                                  self->sel_end - self->line_char[lb]);
  }
  return g_strndup (a, (gsize) (b - a));
}

static void
copy_action (GtkWidget *widget, const char *name, GVariant *param)
{
  CsLineView *self = CS_LINE_VIEW (widget);
  g_autofree char *text = cs_line_view_dup_selected_text (self);

  if (text != NULL)
    gdk_clipboard_set_text (gtk_widget_get_clipboard (widget), text);
}

static void
select_all_action (GtkWidget *widget, const char *name, GVariant *param)
{
  CsLineView *self = CS_LINE_VIEW (widget);

  cs_line_view_select_range (self, 0, self->line_char[self->n_lines] - 1);
}

/* The primary selection follows the text selection, as in GtkTextView. */
static void
update_primary (CsLineView *self)
{
  g_autofree char *text = cs_line_view_dup_selected_text (self);

  if (text != NULL)
    gdk_clipboard_set_text (gtk_widget_get_primary_clipboard (GTK_WIDGET (self)), text);
}

static void
drag_begin_cb (GtkGestureDrag *gesture, double x, double y, CsLineView *self)
{
  if (gtk_widget_get_focusable (GTK_WIDGET (self)))
    gtk_widget_grab_focus (GTK_WIDGET (self));
  self->press_x = x;
  self->press_y = y;
  self->dragging = FALSE;
  self->sel_anchor = cs_line_view_offset_at_point (self, x, y);
}

static void
drag_update_cb (GtkGestureDrag *gesture, double dx, double dy, CsLineView *self)
{
  double y = self->press_y + dy;
  int h = gtk_widget_get_height (GTK_WIDGET (self));

  if (!self->dragging && ABS (dx) < DRAG_THRESHOLD && ABS (dy) < DRAG_THRESHOLD)
    return;
  self->dragging = TRUE;
  /* past the top or bottom edge: the text scrolls a line a move */
  if (self->vadj != NULL && (y < 0 || y > h))
    gtk_adjustment_set_value (self->vadj, vscroll (self) + (y < 0 ? -1 : 1) * self->line_h);
  cs_line_view_select_range (self, self->sel_anchor,
                             cs_line_view_offset_at_point (self, self->press_x + dx, y));
}

static void
drag_end_cb (GtkGestureDrag *gesture, double dx, double dy, CsLineView *self)
{
  if (self->dragging)
    {
      self->dragging = FALSE;
      update_primary (self);
      return;
    }
  /* a click: the selection goes, and the window selects what was clicked */
  cs_line_view_select_range (self, 0, 0);
  if (self->press_y + vscroll (self) < content_height (self))
    g_signal_emit (self, signals[SIGNAL_OFFSET_CLICKED], 0, self->sel_anchor);
}

static void
menu_pressed_cb (GtkGestureClick *gesture, int n_press, double x, double y, CsLineView *self)
{
  GdkRectangle at = { (int) x, (int) y, 1, 1 };

  gtk_popover_set_pointing_to (GTK_POPOVER (self->menu), &at);
  gtk_popover_popup (GTK_POPOVER (self->menu));
}

static gboolean
scroll_binding (GtkWidget *widget, GVariant *args, gpointer data)
{
  CsLineView *self = CS_LINE_VIEW (widget);
  int what = g_variant_get_int32 (args);
  double v = vscroll (self);

  if (self->vadj == NULL)
    return FALSE;
  switch (what)
    {
    case 0: v -= gtk_adjustment_get_step_increment (self->vadj); break;
    case 1: v += gtk_adjustment_get_step_increment (self->vadj); break;
    case 2: v -= gtk_adjustment_get_page_increment (self->vadj); break;
    case 3: v += gtk_adjustment_get_page_increment (self->vadj); break;
    case 4: v = 0; break;
    default: v = gtk_adjustment_get_upper (self->vadj); break;
    }
  gtk_adjustment_set_value (self->vadj, v);
  return TRUE;
}

/* ---- GtkWidget --------------------------------------------------------------------------- */

static void
cs_line_view_measure (GtkWidget *widget, GtkOrientation orientation, int for_size,
                      int *minimum, int *natural, int *minimum_baseline, int *natural_baseline)
{
  CsLineView *self = CS_LINE_VIEW (widget);

  ensure_metrics (self);
  /* the scrolled window shows a part: one line high, a few columns wide at the least */
  if (orientation == GTK_ORIENTATION_VERTICAL)
    *minimum = *natural = TOP_MARGIN + self->line_h + BOTTOM_MARGIN;
  else
    *minimum = *natural = LEFT_MARGIN + (int) (8 * self->char_w);
}

static void
cs_line_view_size_allocate (GtkWidget *widget, int width, int height, int baseline)
{
  CsLineView *self = CS_LINE_VIEW (widget);

  configure_adjustments (self);
  if (self->pending_line >= 0 && height > 0)
    {
      guint line = (guint) self->pending_line;

      self->pending_line = -1;
      scroll_now (self, line);
    }
  gtk_popover_present (GTK_POPOVER (self->menu));
}

static void
get_fg_color (CsLineView *self, GdkRGBA *color)
{
#if GTK_CHECK_VERSION (4, 10, 0)
  gtk_widget_get_color (GTK_WIDGET (self), color);
#else
  gtk_style_context_get_color (gtk_widget_get_style_context (GTK_WIDGET (self)), color);
#endif
}

static void
cs_line_view_snapshot (GtkWidget *widget, GtkSnapshot *snapshot)
{
  CsLineView *self = CS_LINE_VIEW (widget);
  int w = gtk_widget_get_width (widget), h = gtk_widget_get_height (widget);
  double v = vscroll (self), hv = hscroll (self);
  static const GdkRGBA hl_color = { 1.0, 0xf0 / 255.0, 0xb3 / 255.0, 1.0 };  /* #fff0b3 */
  static const GdkRGBA sel_color = { 0.21, 0.52, 0.89, 0.35 };
  GdkRGBA fg;
  PangoLayout *layout;
  guint first, last, hl_first = 1, hl_last = 0;
  double fa;

  ensure_metrics (self);
  fa = floor ((v - TOP_MARGIN) / self->line_h);
  first = fa < 0 ? 0 : (guint) MIN (fa, (double) self->n_lines - 1);
  last = (guint) MIN ((double) self->n_lines - 1,
                      MAX (0, floor ((v + h - TOP_MARGIN) / self->line_h)));
  cs_line_view_get_highlight (self, &hl_first, &hl_last);
  get_fg_color (self, &fg);
  layout = gtk_widget_create_pango_layout (widget, NULL);

  gtk_snapshot_push_clip (snapshot, &GRAPHENE_RECT_INIT (0, 0, w, h));
  for (guint i = first; i <= last; i++)
    {
      double y = TOP_MARGIN + (double) i * self->line_h - v;
      gsize start, len;
      int col0;
      double x0;

      line_piece (self, i, hv, &start, &len, &col0);
      x0 = LEFT_MARGIN - hv + col0 * self->char_w;
      pango_layout_set_text (layout, self->text + start, (int) len);
      if (i >= hl_first && i <= hl_last)
        gtk_snapshot_append_color (snapshot, &hl_color,
                                   &GRAPHENE_RECT_INIT (0, y, w, self->line_h));
      if (self->sel_end > self->sel_start
          && self->sel_start < self->line_char[i + 1] && self->sel_end > self->line_char[i])
        {
          int a = MAX (self->sel_start, self->line_char[i] + col0) - self->line_char[i] - col0;
          int b = self->sel_end - self->line_char[i] - col0;
          int n = (int) g_utf8_strlen (self->text + start, (gssize) len);
          PangoRectangle pa, pb;
          double xa, xb;

          pango_layout_index_to_pos (layout, (int) (g_utf8_offset_to_pointer (self->text + start, MIN (a, n))
                                                    - (self->text + start)), &pa);
          pango_layout_index_to_pos (layout, (int) (g_utf8_offset_to_pointer (self->text + start, MIN (b, n))
                                                    - (self->text + start)), &pb);
          xa = x0 + (double) pa.x / PANGO_SCALE;
          xb = x0 + (double) pb.x / PANGO_SCALE;
          if (b > n)  /* the newline is selected too */
            xb += self->char_w;
          gtk_snapshot_append_color (snapshot, &sel_color,
                                     &GRAPHENE_RECT_INIT (xa, y, xb - xa, self->line_h));
        }
      if (len == 0)
        continue;
      gtk_snapshot_save (snapshot);
      gtk_snapshot_translate (snapshot, &GRAPHENE_POINT_INIT (x0, y));
      gtk_snapshot_append_layout (snapshot, layout, &fg);
      gtk_snapshot_restore (snapshot);
    }
  gtk_snapshot_pop (snapshot);
  g_object_unref (layout);
}

/* ---- GtkScrollable ----------------------------------------------------------------------- */

static void
adjustment_changed_cb (GtkAdjustment *adj, CsLineView *self)
{
  gtk_widget_queue_draw (GTK_WIDGET (self));
}

static void
set_adjustment (CsLineView *self, GtkAdjustment **slot, GtkAdjustment *adj)
{
  if (adj == NULL)
    adj = gtk_adjustment_new (0, 0, 0, 0, 0, 0);
  if (*slot == adj)
    return;
  if (*slot != NULL)
    {
      g_signal_handlers_disconnect_by_func (*slot, adjustment_changed_cb, self);
      g_object_unref (*slot);
    }
  *slot = g_object_ref_sink (adj);
  g_signal_connect (adj, "value-changed", G_CALLBACK (adjustment_changed_cb), self);
  configure_adjustments (self);
}

static void
cs_line_view_set_property (GObject *object, guint prop_id, const GValue *value, GParamSpec *pspec)
{
  CsLineView *self = CS_LINE_VIEW (object);

  switch (prop_id)
    {
    case PROP_HADJUSTMENT:
      set_adjustment (self, &self->hadj, g_value_get_object (value));
      break;
    case PROP_VADJUSTMENT:
      set_adjustment (self, &self->vadj, g_value_get_object (value));
      break;
    case PROP_HSCROLL_POLICY:
      self->hscroll_policy = g_value_get_enum (value);
      break;
    case PROP_VSCROLL_POLICY:
      self->vscroll_policy = g_value_get_enum (value);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
cs_line_view_get_property (GObject *object, guint prop_id, GValue *value, GParamSpec *pspec)
{
  CsLineView *self = CS_LINE_VIEW (object);

  switch (prop_id)
    {
    case PROP_HADJUSTMENT:
      g_value_set_object (value, self->hadj);
      break;
    case PROP_VADJUSTMENT:
      g_value_set_object (value, self->vadj);
      break;
    case PROP_HSCROLL_POLICY:
      g_value_set_enum (value, self->hscroll_policy);
      break;
    case PROP_VSCROLL_POLICY:
      g_value_set_enum (value, self->vscroll_policy);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
cs_line_view_dispose (GObject *object)
{
  CsLineView *self = CS_LINE_VIEW (object);

  g_clear_pointer (&self->menu, gtk_widget_unparent);
  if (self->hadj != NULL)
    g_signal_handlers_disconnect_by_func (self->hadj, adjustment_changed_cb, self);
  if (self->vadj != NULL)
    g_signal_handlers_disconnect_by_func (self->vadj, adjustment_changed_cb, self);
  g_clear_object (&self->hadj);
  g_clear_object (&self->vadj);
  G_OBJECT_CLASS (cs_line_view_parent_class)->dispose (object);
}

static void
cs_line_view_finalize (GObject *object)
{
  CsLineView *self = CS_LINE_VIEW (object);

  g_free (self->text);
  g_free (self->line_byte);
  g_free (self->line_char);
  G_OBJECT_CLASS (cs_line_view_parent_class)->finalize (object);
}

static void
cs_line_view_class_init (CsLineViewClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);
  static const struct { guint key; GdkModifierType mods; int what; } scroll_keys[] = {
    { GDK_KEY_Up, 0, 0 }, { GDK_KEY_KP_Up, 0, 0 }, { GDK_KEY_Down, 0, 1 },
    { GDK_KEY_KP_Down, 0, 1 }, { GDK_KEY_Page_Up, 0, 2 }, { GDK_KEY_KP_Page_Up, 0, 2 },
    { GDK_KEY_Page_Down, 0, 3 }, { GDK_KEY_KP_Page_Down, 0, 3 },
    { GDK_KEY_Home, GDK_CONTROL_MASK, 4 }, { GDK_KEY_End, GDK_CONTROL_MASK, 5 },
  };

  object_class->set_property = cs_line_view_set_property;
  object_class->get_property = cs_line_view_get_property;
  object_class->dispose = cs_line_view_dispose;
  object_class->finalize = cs_line_view_finalize;
  widget_class->measure = cs_line_view_measure;
  widget_class->size_allocate = cs_line_view_size_allocate;
  widget_class->snapshot = cs_line_view_snapshot;

  g_object_class_override_property (object_class, PROP_HADJUSTMENT, "hadjustment");
  g_object_class_override_property (object_class, PROP_VADJUSTMENT, "vadjustment");
  g_object_class_override_property (object_class, PROP_HSCROLL_POLICY, "hscroll-policy");
  g_object_class_override_property (object_class, PROP_VSCROLL_POLICY, "vscroll-policy");

  /**
   * CsLineView::offset-clicked:
   * @offset: the character offset clicked (cs_line_view_offset_at_point())
   *
   * A primary-button click (a press and release that did not select text) on a line.
   */
  signals[SIGNAL_OFFSET_CLICKED] =
    g_signal_new ("offset-clicked", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0,
                  NULL, NULL, NULL, G_TYPE_NONE, 1, G_TYPE_INT);

  gtk_widget_class_install_action (widget_class, "clipboard.copy", NULL, copy_action);
  gtk_widget_class_install_action (widget_class, "selection.select-all", NULL, select_all_action);
  gtk_widget_class_add_binding_action (widget_class, GDK_KEY_c, GDK_CONTROL_MASK,
                                       "clipboard.copy", NULL);
  gtk_widget_class_add_binding_action (widget_class, GDK_KEY_Insert, GDK_CONTROL_MASK,
                                       "clipboard.copy", NULL);
  gtk_widget_class_add_binding_action (widget_class, GDK_KEY_a, GDK_CONTROL_MASK,
                                       "selection.select-all", NULL);
  for (guint i = 0; i < G_N_ELEMENTS (scroll_keys); i++)
    gtk_widget_class_add_binding (widget_class, scroll_keys[i].key, scroll_keys[i].mods,
                                  scroll_binding, "i", scroll_keys[i].what);
  gtk_widget_class_set_css_name (widget_class, "lineview");
}

static void
cs_line_view_init (CsLineView *self)
{
  GtkGesture *drag, *menu_click;
  g_autoptr(GMenu) menu = g_menu_new ();

  self->text = g_strdup ("");
  self->hl_start = self->hl_end = -1;
  self->pending_line = -1;
  index_text (self);
  gtk_widget_set_focusable (GTK_WIDGET (self), TRUE);
  gtk_widget_set_overflow (GTK_WIDGET (self), GTK_OVERFLOW_HIDDEN);
  gtk_widget_add_css_class (GTK_WIDGET (self), "view");
  gtk_widget_add_css_class (GTK_WIDGET (self), "monospace");
  gtk_widget_set_cursor_from_name (GTK_WIDGET (self), "text");
  gtk_widget_action_set_enabled (GTK_WIDGET (self), "clipboard.copy", FALSE);

  drag = gtk_gesture_drag_new ();
  gtk_gesture_single_set_button (GTK_GESTURE_SINGLE (drag), GDK_BUTTON_PRIMARY);
  g_signal_connect (drag, "drag-begin", G_CALLBACK (drag_begin_cb), self);
  g_signal_connect (drag, "drag-update", G_CALLBACK (drag_update_cb), self);
  g_signal_connect (drag, "drag-end", G_CALLBACK (drag_end_cb), self);
  gtk_widget_add_controller (GTK_WIDGET (self), GTK_EVENT_CONTROLLER (drag));

  g_menu_append (menu, "_Copy", "clipboard.copy");
  g_menu_append (menu, "Select _All", "selection.select-all");
  self->menu = gtk_popover_menu_new_from_model (G_MENU_MODEL (menu));
  gtk_popover_set_has_arrow (GTK_POPOVER (self->menu), FALSE);
  gtk_widget_set_halign (self->menu, GTK_ALIGN_START);
  gtk_widget_set_parent (self->menu, GTK_WIDGET (self));
  menu_click = gtk_gesture_click_new ();
  gtk_gesture_single_set_button (GTK_GESTURE_SINGLE (menu_click), GDK_BUTTON_SECONDARY);
  g_signal_connect (menu_click, "pressed", G_CALLBACK (menu_pressed_cb), self);
  gtk_widget_add_controller (GTK_WIDGET (self), GTK_EVENT_CONTROLLER (menu_click));
}

/**
 * cs_line_view_new:
 * Returns: (transfer full): a new, empty #CsLineView
 */
GtkWidget *
cs_line_view_new (void)
{
  return g_object_new (CS_TYPE_LINE_VIEW, NULL);
}
