/* cs-draw.c: the cairo painter (screen, PNG, SVG, PDF) and file export.
 *
 * One function, cs_draw_layout(), draws everything; exports call it on a file surface, so a
 * file looks exactly like the screen (recipes.md 2(a) item 5).
 */
#include "cs-config.h"

#include "cs-draw.h"

#include <errno.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

#include <glib/gstdio.h>

#include <cairo-pdf.h>
#include <cairo-svg.h>
#include <pango/pangocairo.h>

#include "cs-graph.h"
#include "cs-palette.h"

#define UI_FONT_PX      11.0   /* legend / notes text, device px */
#define UI_MARGIN_PX     8.0
#define PNG_MAX_SIDE_PX  32000.0
#define PNG_MAX_PIXELS   (120.0 * 1000 * 1000)
#define EDGE_HEAT_PT         7.0  /* width of an edge's heat band under a value overlay, pt */
#define NODE_HEAT_BORDER_PT  2.2  /* border of a node filled with heat (its dtype colour), pt */
#define ROUND_MARK_PT        4.0  /* half width of the lens's rounding-point triangle, pt */

/* ---------------------------------------------------------------------------------------- */
/* view                                                                                      */

/**
 * cs_view_init_fit:
 * @view: (out caller-allocates): the view to set
 * @layout: a laid-out display list
 * @width_px: drawing area width in device pixels
 * @height_px: drawing area height in device pixels
 * @margin_px: free border kept around the graph, px
 * @max_scale: largest scale to use (1.0: never zoom small graphs past 100 %)
 *
 * Zoom to fit: the largest scale <= @max_scale that shows the whole bounding box inside the
 * area less its margins, graph centred.
 */
void
cs_view_init_fit (CsView *view, const CsLayout *layout, double width_px, double height_px,
                  double margin_px, double max_scale)
{
  double bw, bh, s;

  g_return_if_fail (view != NULL && layout != NULL);
  bw = MAX (layout->bb.x1 - layout->bb.x0, 1.0);
  bh = MAX (layout->bb.y1 - layout->bb.y0, 1.0);
  s = MIN ((width_px - 2 * margin_px) / bw, (height_px - 2 * margin_px) / bh);
  if (max_scale > 0)
    s = MIN (s, max_scale);
  if (!(s > 0))
    s = 0.01;
  view->scale = s;
  view->tx = (width_px - bw * s) / 2;
  view->ty = (height_px - bh * s) / 2;
}

/**
 * cs_view_to_px:
 * @view: a view
 * @layout: the layout drawn
 * @x_pt: layout x, points
 * @y_pt: layout y, points, y up
 * @x_px: (out): device x
 * @y_px: (out): device y, y down
 *
 * x_px = (x_pt - bb.x0) * scale + tx; y_px = (bb.y1 - y_pt) * scale + ty.
 */
void
cs_view_to_px (const CsView *view, const CsLayout *layout, double x_pt, double y_pt,
               double *x_px, double *y_px)
{
  *x_px = (x_pt - layout->bb.x0) * view->scale + view->tx;
  *y_px = (layout->bb.y1 - y_pt) * view->scale + view->ty;
}

/**
 * cs_view_to_pt:
 * @view: a view
 * @layout: the layout drawn
 * @x_px: device x (a pointer position)
 * @y_px: device y
 * @x_pt: (out): layout x, points
 * @y_pt: (out): layout y, points, y up
 *
 * The inverse of cs_view_to_px(), for hit testing.
 */
void
cs_view_to_pt (const CsView *view, const CsLayout *layout, double x_px, double y_px,
               double *x_pt, double *y_pt)
{
  *x_pt = (x_px - view->tx) / view->scale + layout->bb.x0;
  *y_pt = layout->bb.y1 - (y_px - view->ty) / view->scale;
}

/**
 * cs_view_zoom_at:
 * @view: a view
 * @factor: zoom factor (> 1 zooms in)
 * @x_px: device x that stays fixed (the pointer)
 * @y_px: device y that stays fixed
 *
 * Zooms about a point; the scale is kept within [0.01, 16].
 */
void
cs_view_zoom_at (CsView *view, double factor, double x_px, double y_px)
{
  double s;

  g_return_if_fail (view != NULL && factor > 0);
  s = CLAMP (view->scale * factor, 0.01, 16.0);
  factor = s / view->scale;
  view->tx = x_px - (x_px - view->tx) * factor;
  view->ty = y_px - (y_px - view->ty) * factor;
  view->scale = s;
}

/**
 * cs_view_center_on:
 * @view: a view (its scale is kept)
 * @layout: the layout drawn
 * @box: a box in layout points (a node's or cluster's)
 * @width_px: area width
 * @height_px: area height
 *
 * Pans so that @box is centred in the area (the GUI's "jump to node").
 */
void
cs_view_center_on (CsView *view, const CsLayout *layout, const CsRect *box, double width_px,
                   double height_px)
{
  double cx, cy;

  cs_view_to_px (view, layout, (box->x0 + box->x1) / 2, (box->y0 + box->y1) / 2, &cx, &cy);
  view->tx += width_px / 2 - cx;
  view->ty += height_px / 2 - cy;
}

/* ---------------------------------------------------------------------------------------- */
/* text                                                                                      */

typedef struct
{
  cairo_t     *cr;        /* the target */
  PangoLayout *pl;        /* (owned) the layout every text is set in */
  const char  *family;    /* font family ("DejaVu Sans" by default) */
  double       scale;     /* px per pt of the graph being drawn (0: unknown) */
} Painter;

/* Level of detail: text is drawn at its size when it is at least this many px high on screen
 * (readable), else not at all; the names of collapsed groups and of region and group boxes
 * are then drawn at LOD_LABEL_PX when they fit in their box. */
#define LOD_TEXT_PX   6.0
#define LOD_LABEL_PX  9.0

static void
painter_init (Painter *p, cairo_t *cr, const char *family)
{
  cairo_font_options_t *fo = cairo_font_options_create ();

  p->cr = cr;
  p->family = family ? family : "DejaVu Sans";
  p->pl = pango_cairo_create_layout (cr);
  cairo_font_options_set_hint_metrics (fo, CAIRO_HINT_METRICS_OFF);
  cairo_font_options_set_hint_style (fo, CAIRO_HINT_STYLE_NONE);
  pango_cairo_context_set_font_options (pango_layout_get_context (p->pl), fo);
  cairo_font_options_destroy (fo);
}

static void
painter_clear (Painter *p)
{
  g_clear_object (&p->pl);
}

static void
text_size (Painter *p, const char *text, double size, gboolean bold, double *w, double *h)
{
  PangoFontDescription *fd = pango_font_description_new ();
  PangoRectangle logical;

  pango_font_description_set_family (fd, p->family);
  pango_font_description_set_absolute_size (fd, size * PANGO_SCALE);
  pango_font_description_set_weight (fd, bold ? PANGO_WEIGHT_BOLD : PANGO_WEIGHT_NORMAL);
  pango_layout_set_font_description (p->pl, fd);
  pango_font_description_free (fd);
  pango_layout_set_alignment (p->pl, PANGO_ALIGN_CENTER);
  pango_layout_set_text (p->pl, text, -1);
  pango_cairo_update_layout (p->cr, p->pl);
  pango_layout_get_extents (p->pl, NULL, &logical);
  if (w)
    *w = (double) logical.width / PANGO_SCALE;
  if (h)
    *h = (double) logical.height / PANGO_SCALE;
}

/* Draws @text with its box's centre (xalign 0.5) or left edge (xalign 0) at x, centre at y. */
static void
draw_text (Painter *p, const char *text, double size, gboolean bold, double x, double y,
           double xalign, const CsColor *c)
{
  double w, h;

  text_size (p, text, size, bold, &w, &h);
  cairo_set_source_rgba (p->cr, c->r, c->g, c->b, c->a);
  cairo_move_to (p->cr, x - xalign * w, y - h / 2);
  pango_cairo_show_layout (p->cr, p->pl);
}

static const CsColor BLACK = { 0, 0, 0, 1 };
static const CsColor WHITE = { 1, 1, 1, 1 };
static const CsColor DARK = { 0.2, 0.2, 0.2, 1 };
static const CsColor GREY = { 0.45, 0.45, 0.45, 1 };

static void
hex_color (const char *hex, CsColor *c)
{
  c->r = (g_ascii_xdigit_value (hex[1]) * 16 + g_ascii_xdigit_value (hex[2])) / 255.0;
  c->g = (g_ascii_xdigit_value (hex[3]) * 16 + g_ascii_xdigit_value (hex[4])) / 255.0;
  c->b = (g_ascii_xdigit_value (hex[5]) * 16 + g_ascii_xdigit_value (hex[6])) / 255.0;
  c->a = 1;
}

static const CsColor *
contrast_text (const CsColor *bg)
{
  double lum = 0.2126 * bg->r + 0.7152 * bg->g + 0.0722 * bg->b;
  return lum > 0.45 ? &BLACK : &WHITE;
}

static void
set_color (cairo_t *cr, const CsColor *c)
{
  cairo_set_source_rgba (cr, c->r, c->g, c->b, c->a);
}

static void
rounded_rect (cairo_t *cr, double x, double y, double w, double h, double r)
{
  r = MIN (r, MIN (w, h) / 2);
  cairo_new_sub_path (cr);
  cairo_arc (cr, x + w - r, y + r, r, -G_PI / 2, 0);
  cairo_arc (cr, x + w - r, y + h - r, r, 0, G_PI / 2);
  cairo_arc (cr, x + r, y + h - r, r, G_PI / 2, G_PI);
  cairo_arc (cr, x + r, y + r, r, G_PI, 3 * G_PI / 2);
  cairo_close_path (cr);
}

/* user space of the graph: (x, -y) in points, see cs_draw_layout() */
static void
rect_path (cairo_t *cr, const CsRect *r, double radius)
{
  rounded_rect (cr, r->x0, -r->y1, r->x1 - r->x0, r->y1 - r->y0, radius);
}

static double
scale_t (const CsLayout *l, double v)
{
  double t;

  if (!l->has_scale || !(l->scale_max > l->scale_min))
    return 0.5;
  if (isnan (v))
    return 1.0;   /* a NaN error is the worst there is */
  if (l->scale_log && l->scale_min > 0)
    t = v > 0 ? (log10 (v) - log10 (l->scale_min)) / (log10 (l->scale_max) - log10 (l->scale_min))
              : 0.0;
  else
    t = (v - l->scale_min) / (l->scale_max - l->scale_min);
  return CLAMP (t, 0.0, 1.0);
}

static const char *
mark_hex (CsLayoutMark m)
{
  switch (m)
    {
    case CS_LAYOUT_MARK_ADDED:   return CS_PALETTE_HEX_ADDED;
    case CS_LAYOUT_MARK_REMOVED: return CS_PALETTE_HEX_REMOVED;
    case CS_LAYOUT_MARK_SPLIT:
    case CS_LAYOUT_MARK_MERGED:
    case CS_LAYOUT_MARK_NEW:     return CS_PALETTE_HEX_CHANGED;
    case CS_LAYOUT_MARK_MOVED_IN:
    case CS_LAYOUT_MARK_MOVED_OUT: return CS_PALETTE_HEX_MOVED;
    case CS_LAYOUT_MARK_NONE:
    default:                     return NULL;
    }
}

static void
draw_mark (Painter *p, const CsRect *r, CsLayoutMark m, guint count, guint added, guint removed,
           guint moved, double fs)
{
  CsColor c;

  if (mark_hex (m) == NULL)
    return;
  hex_color (mark_hex (m), &c);
  set_color (p->cr, &c);
  cairo_set_line_width (p->cr, 3.0);
  if (m == CS_LAYOUT_MARK_REMOVED)
    {
      double dash[] = { 4.0, 3.0 };
      cairo_set_dash (p->cr, dash, 2, 0);
    }
  {
    CsRect g = { r->x0 - 3, r->y0 - 3, r->x1 + 3, r->y1 + 3 };
    rect_path (p->cr, &g, 6);
  }
  cairo_stroke (p->cr);
  cairo_set_dash (p->cr, NULL, 0, 0);
  {
    g_autofree char *t = cs_layout_mark_label (m, added, removed, moved);

    draw_text (p, t, fs * 0.8, TRUE, r->x1 + 4, -(r->y1 + 2), 0.0, &c);
  }
}

/**
 * cs_draw_mark_label_box:
 * @layout: the layout @n belongs to (its font family and size)
 * @n: a node with a diff mark
 * @box: (out): where the painter draws the mark's label (cs_layout_mark_label(): "−21
 *   casts", "+ added"): its text's logical extents, in layout points (y up), left edge 4 pt
 *   right of the node's box, vertical centre 2 pt above its top
 *
 * Measures the label with PangoCairo as cs_draw_layout() draws it (bold, 0.8 of the layout's
 * font size).
 * Returns: FALSE (and @box untouched) when @n has no mark
 */
gboolean
cs_draw_mark_label_box (const CsLayout *layout, const CsLayoutNode *n, CsRect *box)
{
  g_autofree char *t = NULL;
  cairo_surface_t *surface;
  cairo_t *cr;
  Painter p;
  double w, h;

  if (mark_hex (n->mark) == NULL)
    return FALSE;
  t = cs_layout_mark_label (n->mark, n->diff_added, n->diff_removed, n->diff_moved);
  surface = cairo_recording_surface_create (CAIRO_CONTENT_COLOR_ALPHA, NULL);
  cr = cairo_create (surface);
  painter_init (&p, cr, layout->font_family);
  text_size (&p, t, layout->font_size_pt * 0.8, TRUE, &w, &h);
  painter_clear (&p);
  cairo_destroy (cr);
  cairo_surface_destroy (surface);
  *box = (CsRect) { n->box.x1 + 4, n->box.y1 + 2 - h / 2, n->box.x1 + 4 + w, n->box.y1 + 2 + h / 2 };
  return TRUE;
}

/* Low zoom: the first line of @label at LOD_LABEL_PX on screen, centred at (x, y) user
 * space (left-aligned at x when @align is 0), when it fits in @max_w points. */
static void
draw_lod_label (Painter *p, const char *label, double x, double y, double max_w, double align)
{
  g_autofree char *first = NULL;
  const char *nl;
  double size, w;

  if (p->scale <= 0 || label == NULL)
    return;
  nl = strchr (label, '\n');
  first = nl ? g_strndup (label, nl - label) : g_strdup (label);
  size = LOD_LABEL_PX / p->scale;
  text_size (p, first, size, TRUE, &w, NULL);
  if (w > max_w)
    return;
  draw_text (p, first, size, TRUE, x, y, align, &DARK);
}

/* Find: a yellow halo behind a match. */
static void
draw_found (Painter *p, const CsRect *r)
{
  CsColor c;
  CsRect g = { r->x0 - 5, r->y0 - 5, r->x1 + 5, r->y1 + 5 };

  hex_color (CS_PALETTE_HEX_FOUND, &c);
  c.a = 0.8;
  set_color (p->cr, &c);
  cairo_set_line_width (p->cr, 5.0);
  rect_path (p->cr, &g, 8);
  cairo_stroke (p->cr);
}

static gboolean
visible (const CsRect *r, double cx0, double cy0, double cx1, double cy1)
{
  /* clip extents are in user space (x, -y) */
  return !(r->x1 < cx0 || r->x0 > cx1 || -r->y0 < cy0 || -r->y1 > cy1);
}

/* ---------------------------------------------------------------------------------------- */
/* graph elements                                                                            */

/* The colour a cluster's box is filled with (alpha < 1 for a value fill; alpha 0 for the
 * unfilled box of an expanded statement). */
static void
cluster_fill (const CsLayout *l, const CsLayoutCluster *c, CsColor *out)
{
  *out = (CsColor) { 0, 0, 0, 0 };
  if (c->kind == CS_LAYOUT_CLUSTER_GROUP)
    *out = (CsColor) { 0.969, 0.976, 0.988, 1 };
  else if (c->kind == CS_LAYOUT_CLUSTER_BUCKET)
    *out = (CsColor) { 1.0, 0.973, 0.910, 1 };
  else if (c->kind == CS_LAYOUT_CLUSTER_REGION)
    {
      if (c->has_value)
        {
          cs_palette_scale_color (scale_t (l, c->value), out);
          out->a = 0.35;
        }
      else if (c->executor == CS_EXECUTOR_TORCHCOMPILE_XENTROPY)
        *out = (CsColor) { 0.996, 0.941, 0.875, 1 };
      else
        *out = (CsColor) { 0.949, 0.949, 0.949, 1 };
    }
}

/* The opaque colour a cluster's inside shows: its fill over its parents' over the white
 * background (the colour of its title plate). */
static void
cluster_inside (const CsLayout *l, const CsLayoutCluster *c, CsColor *out)
{
  CsColor f, under = WHITE;

  if (c->parent >= 0 && (guint) c->parent < l->n_clusters && &l->clusters[c->parent] != c)
    cluster_inside (l, &l->clusters[c->parent], &under);
  cluster_fill (l, c, &f);
  out->r = f.r * f.a + under.r * (1 - f.a);
  out->g = f.g * f.a + under.g * (1 - f.a);
  out->b = f.b * f.a + under.b * (1 - f.a);
  out->a = 1;
}

static void
draw_cluster (Painter *p, const CsLayout *l, const CsLayoutCluster *c)
{
  cairo_t *cr = p->cr;
  CsColor fill;

  rect_path (cr, &c->box, 6);
  cluster_fill (l, c, &fill);
  if (c->kind == CS_LAYOUT_CLUSTER_GROUP)
    {
      set_color (cr, &fill);
      cairo_fill_preserve (cr);
      cairo_set_source_rgb (cr, 0.357, 0.490, 0.694);
      cairo_set_line_width (cr, 1.5);
      cairo_stroke (cr);
    }
  else if (c->kind == CS_LAYOUT_CLUSTER_BUCKET)
    {
      set_color (cr, &fill);
      cairo_fill_preserve (cr);
      cairo_set_source_rgb (cr, 0.753, 0.541, 0.180);
      cairo_set_line_width (cr, 1.5);
      cairo_stroke (cr);
    }
  else if (c->kind == CS_LAYOUT_CLUSTER_REGION)
    {
      set_color (cr, &fill);
      cairo_fill_preserve (cr);
      if (c->executor == CS_EXECUTOR_TORCHCOMPILE_XENTROPY)
        {
          /* another executor's region: its own colour, a dashed outline */
          CsColor ex;
          double dash[] = { 6.0, 3.0 };
          hex_color (CS_PALETTE_HEX_EXEC_XENTROPY, &ex);
          set_color (cr, &ex);
          cairo_set_dash (cr, dash, 2, 0);
          cairo_set_line_width (cr, 1.5);
          cairo_stroke (cr);
          cairo_set_dash (cr, NULL, 0, 0);
        }
      else
        {
          cairo_set_source_rgb (cr, 0.5, 0.5, 0.5);
          cairo_set_line_width (cr, 1.0);
          cairo_stroke (cr);
        }
    }
  else
    {
      double dash[] = { 4.0, 3.0 };
      cairo_set_dash (cr, dash, 2, 0);
      cairo_set_source_rgb (cr, 0.63, 0.63, 0.63);
      cairo_set_line_width (cr, 1.0);
      cairo_stroke (cr);
      cairo_set_dash (cr, NULL, 0, 0);
    }
  if (c->selected)
    {
      CsColor s;
      CsRect g = { c->box.x0 - 2, c->box.y0 - 2, c->box.x1 + 2, c->box.y1 + 2 };
      hex_color (CS_PALETTE_HEX_SELECTED, &s);
      set_color (cr, &s);
      cairo_set_line_width (cr, 2.5);
      rect_path (cr, &g, 7);
      cairo_stroke (cr);
    }
  if (c->found)
    draw_found (p, &c->box);
  draw_mark (p, &c->box, c->mark, c->mark_count, c->diff_added, c->diff_removed, c->diff_moved,
             l->font_size_pt);
}

/* Fills the title plate: the rectangle (x, y, w, h) in user space (y down), padded by
 * TITLE_PLATE_PAD and kept inside the box, in the colour of the box's inside. */
#define TITLE_PLATE_PAD 2.0

static void
title_plate (Painter *p, const CsLayout *l, const CsLayoutCluster *c, double x, double y,
             double w, double h)
{
  CsColor inside;
  double x0 = MAX (x - TITLE_PLATE_PAD, c->box.x0 + 1), x1 = MIN (x + w + TITLE_PLATE_PAD, c->box.x1 - 1);
  double y0 = MAX (y - TITLE_PLATE_PAD, -c->box.y1 + 1), y1 = MIN (y + h + TITLE_PLATE_PAD, -c->box.y0 - 1);

  if (x1 <= x0 || y1 <= y0)
    return;
  cluster_inside (l, c, &inside);
  set_color (p->cr, &inside);
  rounded_rect (p->cr, x0, y0, x1 - x0, y1 - y0, 3);
  cairo_fill (p->cr);
}

/* A cluster's title (and subtitle), drawn after the edges on an opaque plate of the box's own
 * colour, so that no edge crosses it at any zoom: an edge entering the box through its title
 * band passes behind the title.  Zoomed out (@text FALSE), the box's name at a readable size
 * inside its top edge, when it fits, on its plate the same way. */
static void
draw_cluster_title (Painter *p, const CsLayout *l, const CsLayoutCluster *c, gboolean text)
{
  double fs = l->font_size_pt;
  double x = c->box.x0 + 6;

  if (c->title == NULL)
    return;
  if (text)
    {
      if ((c->kind == CS_LAYOUT_CLUSTER_REGION || c->kind == CS_LAYOUT_CLUSTER_GROUP
           || c->kind == CS_LAYOUT_CLUSTER_BUCKET) && c->subtitle != NULL)
        {
          double tw, th, sw, sh, top;

          text_size (p, c->title, fs, TRUE, &tw, &th);
          text_size (p, c->subtitle, fs * 0.85, FALSE, &sw, &sh);
          top = -c->title_pos.y - (th + sh) / 2;
          title_plate (p, l, c, x, top, MAX (tw, sw), th + sh);
          draw_text (p, c->title, fs, TRUE, x, top + th / 2, 0.0, &DARK);
          draw_text (p, c->subtitle, fs * 0.85, FALSE, x, top + th + sh / 2, 0.0, &GREY);
        }
      else
        {
          gboolean region = c->kind == CS_LAYOUT_CLUSTER_REGION;
          double size = region ? fs : fs * 0.85, tw, th;

          text_size (p, c->title, size, region, &tw, &th);
          title_plate (p, l, c, x, -c->title_pos.y - th / 2, tw, th);
          draw_text (p, c->title, size, region, x, -c->title_pos.y, 0.0, region ? &DARK : &GREY);
        }
    }
  else if ((c->kind == CS_LAYOUT_CLUSTER_REGION || c->kind == CS_LAYOUT_CLUSTER_GROUP)
           && p->scale > 0)
    {
      /* zoomed out: the box's name at a readable size inside its top edge, when it fits */
      const char *nl = strchr (c->title, '\n');
      g_autofree char *first = nl ? g_strndup (c->title, nl - c->title) : g_strdup (c->title);
      double size = LOD_LABEL_PX / p->scale, y = -c->box.y1 + size * 0.8, tw, th;

      text_size (p, first, size, TRUE, &tw, &th);
      if (tw > c->box.x1 - c->box.x0 - 12)
        return;
      title_plate (p, l, c, x, y - th / 2, tw, th);
      draw_lod_label (p, first, x, y, c->box.x1 - c->box.x0 - 12, 0.0);
    }
}

/* An edge keeps its dtype colour under a value overlay: the value is a heat band beneath it. */
static void
edge_color (const CsLayout *l, const CsLayoutEdge *e, CsColor *c)
{
  cs_palette_class_color (e->has_dtype ? cs_palette_class_for_dtype (e->dtype) : CS_PALETTE_OTHER, c);
}

static void
edge_path (cairo_t *cr, const CsLayoutEdge *e)
{
  cairo_move_to (cr, e->points[0].x, -e->points[0].y);
  for (guint k = 1; k + 2 < e->n_points; k += 3)
    cairo_curve_to (cr, e->points[k].x, -e->points[k].y, e->points[k + 1].x, -e->points[k + 1].y,
                    e->points[k + 2].x, -e->points[k + 2].y);
}

static void
draw_edge (Painter *p, const CsLayout *l, const CsLayoutEdge *e, gboolean labels)
{
  cairo_t *cr = p->cr;
  CsColor c;
  double lw = e->has_value ? 2.0 : 1.4;

  if (e->n_points < 4)
    return;
  edge_color (l, e, &c);
  if (e->selected)
    {
      CsColor s;
      hex_color (CS_PALETTE_HEX_SELECTED, &s);
      s.a = 0.45;
      set_color (cr, &s);
      cairo_set_line_width (cr, lw + (e->has_value ? 9 : 5));
      edge_path (cr, e);
      cairo_stroke (cr);
    }
  if (e->has_value)
    {
      /* heat: a wide band in the value's colour under the dtype-coloured line */
      CsColor v;

      cs_palette_scale_color (scale_t (l, e->value), &v);
      set_color (cr, &v);
      cairo_set_line_width (cr, EDGE_HEAT_PT);
      edge_path (cr, e);
      cairo_stroke (cr);
    }
  set_color (cr, &c);
  cairo_set_line_width (cr, lw);
  if (e->future)
    {
      /* an async collective's FUTURE, up to the wait that waits for it */
      double dash[] = { 5.0, 3.0 };
      cairo_set_dash (cr, dash, 2, 0);
    }
  edge_path (cr, e);
  cairo_stroke (cr);
  cairo_set_dash (cr, NULL, 0, 0);
  if (l->precision_lens && e->has_compute && e->has_dtype && e->compute_dtype != e->dtype)
    {
      /* the lens: stored in the line's dtype, computed in the dashes' */
      CsColor k;
      double dash[] = { 4.0, 3.0 };

      cs_palette_class_color (cs_palette_class_for_dtype (e->compute_dtype), &k);
      set_color (cr, &k);
      cairo_set_line_width (cr, lw + 1.2);
      cairo_set_dash (cr, dash, 2, 0);
      edge_path (cr, e);
      cairo_stroke (cr);
      cairo_set_dash (cr, NULL, 0, 0);
    }
  if (e->has_arrow)
    {
      CsPoint a = e->points[e->n_points - 1], t = e->arrow_tip;
      double dx = t.x - a.x, dy = t.y - a.y;
      double len = sqrt (dx * dx + dy * dy);

      if (len > 0.01)
        {
          double nx = -dy / len, ny = dx / len, hw = MAX (len * 0.4, 2.5);
          cairo_move_to (cr, t.x, -t.y);
          cairo_line_to (cr, a.x + nx * hw, -(a.y + ny * hw));
          cairo_line_to (cr, a.x - nx * hw, -(a.y - ny * hw));
          cairo_close_path (cr);
          cairo_fill (cr);
        }
    }
  if (labels && e->label != NULL && e->has_label_pos)
    draw_text (p, e->label, l->font_size_pt * 0.8, FALSE, e->label_pos.x, -e->label_pos.y, 0.5, &c);
}

/* The lens's rounding point: a triangle pointing down at the middle of the node's bottom edge
 * (where its result leaves), in the storage dtype's colour; its text "round f32\u2192bf16" is
 * placed by draw_lens_texts(). */
static void
draw_rounding (Painter *p, const CsLayoutNode *n)
{
  cairo_t *cr = p->cr;
  CsColor c;
  double cx = (n->box.x0 + n->box.x1) / 2, y = -n->box.y0;

  cs_palette_class_color (cs_palette_class_for_dtype (n->dtype), &c);
  cairo_move_to (cr, cx - ROUND_MARK_PT, y - 1);
  cairo_line_to (cr, cx + ROUND_MARK_PT, y - 1);
  cairo_line_to (cr, cx, y + ROUND_MARK_PT * 1.3);
  cairo_close_path (cr);
  set_color (cr, &c);
  cairo_fill_preserve (cr);
  cairo_set_source_rgb (cr, 1, 1, 1);
  cairo_set_line_width (cr, 0.8);
  cairo_stroke (cr);
}

/* Rectangles (pt, y down as drawn) that the lens's texts must not cover. */
static gboolean
rect_free (const GArray *taken, const CsRect *r, const CsRect *page)
{
  if (r->x0 < page->x0 || r->x1 > page->x1 || r->y0 < page->y0 || r->y1 > page->y1)
    return FALSE;
  for (guint i = 0; i < taken->len; i++)
    {
      const CsRect *o = &g_array_index (taken, CsRect, i);

      if (r->x0 < o->x1 && o->x0 < r->x1 && r->y0 < o->y1 && o->y0 < r->y1)
        return FALSE;
    }
  return TRUE;
}

/* Draws the first of @texts (n_texts, longest first) that fits at one of the anchors
 * (ax[k], ay[k]) (pt, y down; the text's left edge when align[k] is 0, its centre when 0.5,
 * its right edge when 1; ay is its vertical centre) on no rectangle of @taken and inside
 * @page, on a white ground, and adds its rectangle to @taken.  Every anchor is tried with one
 * text before the next, shorter text.  Returns FALSE (drawing nothing) when none fits. */
static gboolean
place_text (Painter *p, GArray *taken, const CsRect *page, const char * const *texts,
            guint n_texts, double size, const double *ax, const double *ay,
            const double *align, guint n_anchors, const CsColor *c)
{
  for (guint t = 0; t < n_texts; t++)
    {
      double w, h;

      text_size (p, texts[t], size, TRUE, &w, &h);
      for (guint k = 0; k < n_anchors; k++)
        {
          /* a pt of white ground around the text, two between texts */
          CsRect r = { ax[k] - align[k] * w - 1, ay[k] - h / 2, ax[k] - align[k] * w + w + 1,
                       ay[k] + h / 2 };
          CsRect room = { r.x0 - 1, r.y0, r.x1 + 1, r.y1 };

          if (!rect_free (taken, &room, page))
            continue;
          cairo_set_source_rgba (p->cr, 1, 1, 1, 0.85);
          cairo_rectangle (p->cr, r.x0, r.y0, r.x1 - r.x0, r.y1 - r.y0);
          cairo_fill (p->cr);
          draw_text (p, texts[t], size, TRUE, r.x0 + 1, ay[k], 0.0, c);
          g_array_append_val (taken, room);
          return TRUE;
        }
    }
  return FALSE;
}

/* The precision lens's texts, drawn over the finished graph where they cover no node, no
 * shape label and no other lens text: "round f32\u2192bf16" right or left of each rounding
 * point (else "round"), and "bf16 \u25b8 f32" below, above or beside the shape label of each
 * labelled edge whose consumer computes wider (else "\u25b8 f32"); a text that fits nowhere is left
 * out (the dashes and the marker still show it, the app's tooltips name it).  Only the
 * elements inside the clip rectangle (cx0, cy0)-(cx1, cy1) (pt, y down) take part. */
static void
draw_lens_texts (Painter *p, const CsLayout *l, gboolean edge_labels, double cx0, double cy0,
                 double cx1, double cy1)
{
  g_autoptr(GArray) taken = g_array_new (FALSE, FALSE, sizeof (CsRect));
  double fs = l->font_size_pt * 0.7, lfs = l->font_size_pt * 0.8;
  CsRect page = { l->bb.x0, -l->bb.y1, l->bb.x1, -l->bb.y0 };

  /* what is there already: nodes with their rounding markers, and the shape labels */
  for (guint i = 0; i < l->n_nodes; i++)
    {
      const CsLayoutNode *n = &l->nodes[i];
      CsRect r = { n->box.x0 - 1, -n->box.y1 - 1, n->box.x1 + 1, -n->box.y0 + 1 };

      if (!visible (&n->box, cx0 - 60, cy0 - 20, cx1 + 60, cy1 + 20))
        continue;
      g_array_append_val (taken, r);
      if (n->has_precision && n->rounds && n->has_dtype)
        {
          double cx = (n->box.x0 + n->box.x1) / 2;
          CsRect m = { cx - ROUND_MARK_PT, -n->box.y0, cx + ROUND_MARK_PT,
                       -n->box.y0 + ROUND_MARK_PT * 1.3 };
          g_array_append_val (taken, m);
        }
    }
  for (guint i = 0; edge_labels && i < l->n_edges; i++)
    {
      const CsLayoutEdge *e = &l->edges[i];
      double w, h;

      if (e->label == NULL || !e->has_label_pos)
        continue;
      text_size (p, e->label, lfs, FALSE, &w, &h);
      {
        CsRect r = { e->label_pos.x - w / 2, -e->label_pos.y - h / 2, e->label_pos.x + w / 2,
                     -e->label_pos.y + h / 2 };
        g_array_append_val (taken, r);
      }
    }

  for (guint i = 0; i < l->n_nodes; i++)
    {
      const CsLayoutNode *n = &l->nodes[i];
      double cx = (n->box.x0 + n->box.x1) / 2, th, y;
      double ax[] = { cx + ROUND_MARK_PT + 2, cx - ROUND_MARK_PT - 2 };
      double ay[2];
      double align[] = { 0.0, 1.0 };
      g_autofree char *full = NULL;
      const char *texts[2];
      CsColor c;

      if (!(n->has_precision && n->rounds && n->has_dtype)
          || !visible (&n->box, cx0, cy0, cx1, cy1))
        continue;
      full = g_strdup_printf ("round %s\u2192%s", cs_dtype_short_name (n->compute_dtype),
                              cs_dtype_short_name (n->dtype));
      texts[0] = full;
      texts[1] = "round";
      /* just below the node, beside the marker */
      text_size (p, full, fs, TRUE, NULL, &th);
      y = -n->box.y0 + 2 + th / 2;
      ay[0] = ay[1] = y;
      cs_palette_class_color (cs_palette_class_for_dtype (n->dtype), &c);
      place_text (p, taken, &page, texts, 2, fs, ax, ay, align, 2, &c);
    }

  for (guint i = 0; i < l->n_edges; i++)
    {
      const CsLayoutEdge *e = &l->edges[i];
      g_autofree char *full = NULL, *brief = NULL;
      const char *texts[2];
      double ax[4], ay[4], align[4];
      guint na = 0;
      double mx, my, th, w, h;
      CsColor c;

      if (!(e->has_compute && e->has_dtype && e->compute_dtype != e->dtype)
          || !edge_labels || e->label == NULL || !e->has_label_pos)
        continue;
      mx = e->label_pos.x;
      my = -e->label_pos.y;
      if (mx < cx0 || mx > cx1 || my < cy0 || my > cy1)
        continue;
      full = g_strdup_printf ("%s \u25b8 %s", cs_dtype_short_name (e->dtype),
                              cs_dtype_short_name (e->compute_dtype));
      brief = g_strdup_printf ("\u25b8 %s", cs_dtype_short_name (e->compute_dtype));
      texts[0] = full;
      texts[1] = brief;
      text_size (p, full, fs, TRUE, NULL, &th);
      text_size (p, e->label, lfs, FALSE, &w, &h);
      /* below, above, right of and left of the shape label */
      ax[na] = mx; ay[na] = my + h / 2 + th / 2; align[na++] = 0.5;
      ax[na] = mx; ay[na] = my - h / 2 - th / 2; align[na++] = 0.5;
      ax[na] = mx + w / 2 + 2; ay[na] = my; align[na++] = 0.0;
      ax[na] = mx - w / 2 - 2; ay[na] = my; align[na++] = 1.0;
      edge_color (l, e, &c);
      place_text (p, taken, &page, texts, 2, fs, ax, ay, align, na, &c);
    }
}

/* A cast the user wrote that a pass removed: a dashed tag above the node that now reads the
 * unrounded value, "removed .to(bf16)" (with the count when several). */
static void
draw_user_cast (Painter *p, const CsLayout *l, const CsLayoutNode *n, gboolean text)
{
  cairo_t *cr = p->cr;
  CsColor c;
  double fs = l->font_size_pt * 0.62, w, h, x, y;
  double dash[] = { 2.5, 1.5 };
  g_autofree char *t = n->user_casts_removed > 1
                       ? g_strdup_printf ("removed .to(%s) \u00d7%u", cs_dtype_short_name (n->user_cast_dtype),
                                          n->user_casts_removed)
                       : g_strdup_printf ("removed .to(%s)", cs_dtype_short_name (n->user_cast_dtype));

  hex_color (CS_PALETTE_HEX_REMOVED, &c);
  text_size (p, t, fs, TRUE, &w, &h);
  w += 6;
  h += 2;
  x = n->box.x1 - w + 4;
  y = -n->box.y1 - h - 2;
  rounded_rect (cr, x, y, w, h, h / 2);
  cairo_set_source_rgb (cr, 1, 1, 1);
  cairo_fill_preserve (cr);
  set_color (cr, &c);
  cairo_set_line_width (cr, 1.2);
  cairo_set_dash (cr, dash, 2, 0);
  cairo_stroke (cr);
  cairo_set_dash (cr, NULL, 0, 0);
  if (text)
    draw_text (p, t, fs, TRUE, x + w / 2, y + h / 2, 0.5, &c);
}

static void
draw_badge (Painter *p, const CsLayout *l, const CsLayoutNode *n, gboolean text)
{
  CsColor c;
  const char *t;
  double h = MIN (n->box.y1 - n->box.y0 - 6, l->font_size_pt * 1.3);
  double w = 22.0;
  double x = n->box.x1 - w - 4;
  double yc = -(n->box.y0 + n->box.y1) / 2;

  if (n->badge == CS_LAYOUT_BADGE_TENSOR_CORE)
    {
      hex_color (CS_PALETTE_HEX_TENSOR_CORE, &c);
      t = "TC";
    }
  else
    {
      hex_color (CS_PALETTE_HEX_WARNING, &c);
      t = "f32";
    }
  rounded_rect (p->cr, x, yc - h / 2, w, h, h / 2);
  set_color (p->cr, &c);
  cairo_fill (p->cr);
  if (text)
    draw_text (p, t, l->font_size_pt * 0.75, TRUE, x + w / 2, yc, 0.5, &WHITE);
}

static void
draw_node (Painter *p, const CsLayout *l, const CsLayoutNode *n, gboolean text)
{
  cairo_t *cr = p->cr;
  CsColor fill = WHITE, stroke = { 0.33, 0.33, 0.33, 1 }, dt;
  double lw = 1.0, radius = 4.0, fs = l->font_size_pt;
  double label_x = (n->box.x0 + n->box.x1) / 2;
  gboolean bold = FALSE;

  cs_palette_class_color (n->has_dtype ? cs_palette_class_for_dtype (n->dtype) : CS_PALETTE_OTHER, &dt);
  switch (n->kind)
    {
    case CS_LAYOUT_NODE_CAST:
      fill = dt;
      stroke = dt;
      radius = (n->box.y1 - n->box.y0) / 2;
      fs *= 0.85;
      break;
    case CS_LAYOUT_NODE_INPUT:
    case CS_LAYOUT_NODE_OUTPUT:
      fill = (CsColor) { 1 - 0.2 * (1 - dt.r), 1 - 0.2 * (1 - dt.g), 1 - 0.2 * (1 - dt.b), 1 };
      stroke = dt;
      lw = 1.5;
      radius = 0;
      break;
    case CS_LAYOUT_NODE_REF:
      fill = (CsColor) { 1 - 0.12 * (1 - dt.r), 1 - 0.12 * (1 - dt.g), 1 - 0.12 * (1 - dt.b), 1 };
      stroke = dt;
      lw = 1.2;
      radius = 2;
      fs *= 0.85;
      break;
    case CS_LAYOUT_NODE_REGION:
      fill = (CsColor) { 0.93, 0.93, 0.93, 1 };
      stroke = (CsColor) { 0.5, 0.5, 0.5, 1 };
      if (n->executor == CS_EXECUTOR_TORCHCOMPILE_XENTROPY)
        {
          fill = (CsColor) { 0.996, 0.941, 0.875, 1 };
          hex_color (CS_PALETTE_HEX_EXEC_XENTROPY, &stroke);
        }
      lw = 1.5;
      bold = TRUE;
      break;
    case CS_LAYOUT_NODE_GHOST:
      fill = (CsColor) { 1 - 0.35 * (1 - dt.r), 1 - 0.35 * (1 - dt.g), 1 - 0.35 * (1 - dt.b), 1 };
      stroke = dt;
      radius = (n->box.y1 - n->box.y0) / 2;
      fs *= 0.85;
      break;
    case CS_LAYOUT_NODE_COMM:
      fill = (CsColor) { 1 - 0.45 * (1 - dt.r), 1 - 0.45 * (1 - dt.g), 1 - 0.45 * (1 - dt.b), 1 };
      stroke = dt;
      lw = 2.0;
      bold = TRUE;
      break;
    case CS_LAYOUT_NODE_GROUP:
      fill = (CsColor) { 0.910, 0.933, 0.969, 1 };
      stroke = (CsColor) { 0.357, 0.490, 0.694, 1 };
      lw = 2.0;
      radius = 6;
      bold = TRUE;
      break;
    case CS_LAYOUT_NODE_OP:
    default:
      if (n->badge == CS_LAYOUT_BADGE_F32)
        {
          hex_color (CS_PALETTE_HEX_WARNING, &stroke);
          lw = 1.8;
        }
      else if (n->badge == CS_LAYOUT_BADGE_TENSOR_CORE)
        {
          hex_color (CS_PALETTE_HEX_TENSOR_CORE, &stroke);
          lw = 1.8;
        }
      else if (n->executor == CS_EXECUTOR_SDPA)
        {
          /* the sdpa executor's attention kernels: its colour, a heavy outline */
          hex_color (CS_PALETTE_HEX_EXEC_SDPA, &stroke);
          lw = 2.5;
        }
      break;
    }
  if (n->has_value)
    {
      /* heat as the fill; the dtype stays readable as the border (casts, inputs and outputs
       * keep their dtype border; an op's border turns to its output dtype) */
      cs_palette_scale_color (scale_t (l, n->value), &fill);
      if (n->badge == CS_LAYOUT_BADGE_NONE && n->kind != CS_LAYOUT_NODE_REGION
          && n->kind != CS_LAYOUT_NODE_GROUP)
        stroke = dt;
      lw = MAX (lw, NODE_HEAT_BORDER_PT);
    }
  if (n->found)
    draw_found (p, &n->box);
  if (n->kind == CS_LAYOUT_NODE_COMM)
    {
      /* a hexagon: communication, not compute */
      double x0 = n->box.x0, x1 = n->box.x1, y0 = -n->box.y1, y1 = -n->box.y0;
      double inset = MIN ((y1 - y0) / 2, (x1 - x0) / 4);
      cairo_new_path (cr);
      cairo_move_to (cr, x0 + inset, y0);
      cairo_line_to (cr, x1 - inset, y0);
      cairo_line_to (cr, x1, (y0 + y1) / 2);
      cairo_line_to (cr, x1 - inset, y1);
      cairo_line_to (cr, x0 + inset, y1);
      cairo_line_to (cr, x0, (y0 + y1) / 2);
      cairo_close_path (cr);
    }
  else
    rect_path (cr, &n->box, radius);
  set_color (cr, &fill);
  cairo_fill_preserve (cr);
  set_color (cr, &stroke);
  cairo_set_line_width (cr, lw);
  if (n->kind == CS_LAYOUT_NODE_REF || n->kind == CS_LAYOUT_NODE_GHOST)
    {
      double dash[] = { 3.0, 2.0 };
      cairo_set_dash (cr, dash, 2, 0);
    }
  cairo_stroke (cr);
  cairo_set_dash (cr, NULL, 0, 0);
  if (n->kind == CS_LAYOUT_NODE_OUTPUT)
    {
      CsRect in = { n->box.x0 + 2.5, n->box.y0 + 2.5, n->box.x1 - 2.5, n->box.y1 - 2.5 };
      rect_path (cr, &in, 0);
      cairo_set_line_width (cr, 0.8);
      cairo_stroke (cr);
    }
  if (n->badge != CS_LAYOUT_BADGE_NONE)
    {
      draw_badge (p, l, n, text);
      label_x -= 13.0;
    }
  if (text)
    draw_text (p, n->label, fs, bold, label_x, -(n->box.y0 + n->box.y1) / 2, 0.5,
               contrast_text (&fill));
  else if (n->kind == CS_LAYOUT_NODE_GROUP || n->kind == CS_LAYOUT_NODE_REGION)
    draw_lod_label (p, n->label, label_x, -(n->box.y0 + n->box.y1) / 2,
                    n->box.x1 - n->box.x0 - 4, 0.5);
  if (n->selected)
    {
      CsColor s;
      CsRect g = { n->box.x0 - 3, n->box.y0 - 3, n->box.x1 + 3, n->box.y1 + 3 };
      hex_color (CS_PALETTE_HEX_SELECTED, &s);
      set_color (cr, &s);
      cairo_set_line_width (cr, 2.5);
      rect_path (cr, &g, radius + 2);
      cairo_stroke (cr);
    }
  draw_mark (p, &n->box, n->mark, n->mark_count, n->diff_added, n->diff_removed, n->diff_moved,
             l->font_size_pt);
  if (l->precision_lens && n->has_precision && n->rounds && n->has_dtype)
    draw_rounding (p, n);
  if (n->user_casts_removed > 0)
    draw_user_cast (p, l, n, text);
}

/* ---------------------------------------------------------------------------------------- */
/* legend, value key, notes (device pixels)                                                  */

static const CsPaletteClass legend_classes[] = {
  CS_PALETTE_F64, CS_PALETTE_F32, CS_PALETTE_BF16, CS_PALETTE_F16, CS_PALETTE_FP8,
  CS_PALETTE_INT, CS_PALETTE_BOOL,
};

#define LEGEND_ROW_PX   16.0
#define LEGEND_PAD_PX    8.0
#define LEGEND_SWATCH_PX 26.0

static guint
legend_rows (const CsLayout *l, CsPaletteClass *rows)
{
  guint n = 0;

  for (guint i = 0; i < G_N_ELEMENTS (legend_classes); i++)
    rows[n++] = legend_classes[i];
  if (l->dtype_classes & (1u << CS_PALETTE_COMPLEX))
    rows[n++] = CS_PALETTE_COMPLEX;
  if (l->dtype_classes & (1u << CS_PALETTE_OTHER))
    rows[n++] = CS_PALETTE_OTHER;
  return n;
}

static const char *const legend_symbols[] = {
  "cast to that dtype",
  "tensor cores (bf16/f16 operands)",
  "f32 operands: no tensor cores",
  "fusion region",
};

/* Rows of the precision lens and of removed user casts, shown when they are drawn. */
static const char *const legend_lens[] = {
  "stored \u25b8 computed in (dashes)",
  "rounding point",
  "your cast, removed by a pass",
};

static guint
legend_lens_rows (const CsLayout *l, const char **rows)
{
  guint n = 0;

  if (l->precision_lens)
    {
      rows[n++] = legend_lens[0];
      rows[n++] = legend_lens[1];
    }
  if (l->n_user_casts_marked > 0)
    rows[n++] = legend_lens[2];
  return n;
}

static void
legend_measure (Painter *p, const CsLayout *l, double *w, double *h)
{
  CsPaletteClass rows[CS_N_PALETTE_CLASSES];
  const char *lens[G_N_ELEMENTS (legend_lens)];
  guint n = legend_rows (l, rows), nl = legend_lens_rows (l, lens);
  double tw, maxw = 0;

  text_size (p, "dtype (edges)", UI_FONT_PX, TRUE, &tw, NULL);
  maxw = tw;
  for (guint i = 0; i < G_N_ELEMENTS (legend_symbols); i++)
    {
      text_size (p, legend_symbols[i], UI_FONT_PX, FALSE, &tw, NULL);
      maxw = MAX (maxw, tw);
    }
  for (guint i = 0; i < nl; i++)
    {
      text_size (p, lens[i], UI_FONT_PX, FALSE, &tw, NULL);
      maxw = MAX (maxw, tw);
    }
  *w = 2 * LEGEND_PAD_PX + LEGEND_SWATCH_PX + 6 + maxw;
  *h = 2 * LEGEND_PAD_PX + LEGEND_ROW_PX * (1 + n + G_N_ELEMENTS (legend_symbols) + nl);
}

static void
draw_legend (Painter *p, const CsLayout *l, double x0, double y0)
{
  cairo_t *cr = p->cr;
  CsPaletteClass rows[CS_N_PALETTE_CLASSES];
  guint n = legend_rows (l, rows);
  double w, h, y, tx;
  CsColor c;

  legend_measure (p, l, &w, &h);
  rounded_rect (cr, x0, y0, w, h, 5);
  cairo_set_source_rgba (cr, 1, 1, 1, 0.92);
  cairo_fill_preserve (cr);
  cairo_set_source_rgb (cr, 0.6, 0.6, 0.6);
  cairo_set_line_width (cr, 1);
  cairo_stroke (cr);

  tx = x0 + LEGEND_PAD_PX + LEGEND_SWATCH_PX + 6;
  y = y0 + LEGEND_PAD_PX + LEGEND_ROW_PX / 2;
  draw_text (p, "dtype (edges)", UI_FONT_PX, TRUE, x0 + LEGEND_PAD_PX, y, 0.0, &DARK);
  for (guint i = 0; i < n; i++)
    {
      y += LEGEND_ROW_PX;
      cs_palette_class_color (rows[i], &c);
      set_color (cr, &c);
      cairo_set_line_width (cr, 3.0);
      cairo_move_to (cr, x0 + LEGEND_PAD_PX, y);
      cairo_line_to (cr, x0 + LEGEND_PAD_PX + LEGEND_SWATCH_PX, y);
      cairo_stroke (cr);
      draw_text (p, cs_palette_class_label (rows[i]), UI_FONT_PX, FALSE, tx, y, 0.0, &DARK);
    }
  /* cast pill */
  y += LEGEND_ROW_PX;
  cs_palette_class_color (CS_PALETTE_BF16, &c);
  rounded_rect (cr, x0 + LEGEND_PAD_PX, y - 6, LEGEND_SWATCH_PX, 12, 6);
  set_color (cr, &c);
  cairo_fill (cr);
  draw_text (p, "\u2192", UI_FONT_PX * 0.8, TRUE, x0 + LEGEND_PAD_PX + LEGEND_SWATCH_PX / 2, y, 0.5, &WHITE);
  draw_text (p, legend_symbols[0], UI_FONT_PX, FALSE, tx, y, 0.0, &DARK);
  /* badges */
  for (guint b = 0; b < 2; b++)
    {
      y += LEGEND_ROW_PX;
      hex_color (b == 0 ? CS_PALETTE_HEX_TENSOR_CORE : CS_PALETTE_HEX_WARNING, &c);
      rounded_rect (cr, x0 + LEGEND_PAD_PX, y - 6, LEGEND_SWATCH_PX, 12, 6);
      set_color (cr, &c);
      cairo_fill (cr);
      draw_text (p, b == 0 ? "TC" : "f32", UI_FONT_PX * 0.75, TRUE,
                 x0 + LEGEND_PAD_PX + LEGEND_SWATCH_PX / 2, y, 0.5, &WHITE);
      draw_text (p, legend_symbols[1 + b], UI_FONT_PX, FALSE, tx, y, 0.0, &DARK);
    }
  /* region */
  y += LEGEND_ROW_PX;
  rounded_rect (cr, x0 + LEGEND_PAD_PX, y - 6, LEGEND_SWATCH_PX, 12, 3);
  cairo_set_source_rgb (cr, 0.949, 0.949, 0.949);
  cairo_fill_preserve (cr);
  cairo_set_source_rgb (cr, 0.5, 0.5, 0.5);
  cairo_stroke (cr);
  draw_text (p, legend_symbols[3], UI_FONT_PX, FALSE, tx, y, 0.0, &DARK);
  /* the lens: a bf16 line with f32 dashes; the rounding triangle; a removed user cast */
  {
    const char *lens[G_N_ELEMENTS (legend_lens)];
    guint nl = legend_lens_rows (l, lens);
    double sx = x0 + LEGEND_PAD_PX;

    for (guint i = 0; i < nl; i++)
      {
        y += LEGEND_ROW_PX;
        if (lens[i] == legend_lens[0])
          {
            double dash[] = { 4.0, 3.0 };

            cs_palette_class_color (CS_PALETTE_BF16, &c);
            set_color (cr, &c);
            cairo_set_line_width (cr, 1.6);
            cairo_move_to (cr, sx, y);
            cairo_line_to (cr, sx + LEGEND_SWATCH_PX, y);
            cairo_stroke (cr);
            cs_palette_class_color (CS_PALETTE_F32, &c);
            set_color (cr, &c);
            cairo_set_line_width (cr, 2.8);
            cairo_set_dash (cr, dash, 2, 0);
            cairo_move_to (cr, sx, y);
            cairo_line_to (cr, sx + LEGEND_SWATCH_PX, y);
            cairo_stroke (cr);
            cairo_set_dash (cr, NULL, 0, 0);
          }
        else if (lens[i] == legend_lens[1])
          {
            double cx = sx + LEGEND_SWATCH_PX / 2;

            cs_palette_class_color (CS_PALETTE_BF16, &c);
            set_color (cr, &c);
            cairo_move_to (cr, cx - 5, y - 4);
            cairo_line_to (cr, cx + 5, y - 4);
            cairo_line_to (cr, cx, y + 4);
            cairo_close_path (cr);
            cairo_fill (cr);
          }
        else
          {
            double dash[] = { 2.5, 1.5 };

            hex_color (CS_PALETTE_HEX_REMOVED, &c);
            rounded_rect (cr, sx, y - 6, LEGEND_SWATCH_PX, 12, 6);
            set_color (cr, &c);
            cairo_set_line_width (cr, 1.2);
            cairo_set_dash (cr, dash, 2, 0);
            cairo_stroke (cr);
            cairo_set_dash (cr, NULL, 0, 0);
          }
        draw_text (p, lens[i], UI_FONT_PX, FALSE, tx, y, 0.0, &DARK);
      }
  }
}

#define KEY_W_PX 170.0
#define KEY_H_PX  52.0

static void
draw_value_key (Painter *p, const CsLayout *l, double x0, double y0)
{
  cairo_t *cr = p->cr;
  cairo_pattern_t *grad;
  char lo[32], hi[32];

  rounded_rect (cr, x0, y0, KEY_W_PX, KEY_H_PX, 5);
  cairo_set_source_rgba (cr, 1, 1, 1, 0.92);
  cairo_fill_preserve (cr);
  cairo_set_source_rgb (cr, 0.6, 0.6, 0.6);
  cairo_set_line_width (cr, 1);
  cairo_stroke (cr);
  draw_text (p, l->scale_title ? l->scale_title : "value", UI_FONT_PX, TRUE, x0 + 8, y0 + 12, 0.0, &DARK);
  grad = cairo_pattern_create_linear (x0 + 8, 0, x0 + KEY_W_PX - 8, 0);
  for (int i = 0; i <= 8; i++)
    {
      CsColor c;
      cs_palette_scale_color (i / 8.0, &c);
      cairo_pattern_add_color_stop_rgb (grad, i / 8.0, c.r, c.g, c.b);
    }
  cairo_rectangle (cr, x0 + 8, y0 + 22, KEY_W_PX - 16, 10);
  cairo_set_source (cr, grad);
  cairo_fill (cr);
  cairo_pattern_destroy (grad);
  g_snprintf (lo, sizeof lo, "%.3g", l->scale_min);
  g_snprintf (hi, sizeof hi, "%.3g", l->scale_max);
  draw_text (p, lo, UI_FONT_PX * 0.9, FALSE, x0 + 8, y0 + 42, 0.0, &DARK);
  draw_text (p, hi, UI_FONT_PX * 0.9, FALSE, x0 + KEY_W_PX - 8, y0 + 42, 1.0, &DARK);
  if (l->scale_log)
    draw_text (p, "log scale", UI_FONT_PX * 0.8, FALSE, x0 + KEY_W_PX / 2, y0 + 42, 0.5, &DARK);
}

static double
notes_height (Painter *p, const CsLayout *l, double width)
{
  double h = 0, th;

  for (guint i = 0; l->notes && l->notes[i]; i++)
    {
      pango_layout_set_width (p->pl, (int) ((width - 16) * PANGO_SCALE));
      pango_layout_set_wrap (p->pl, PANGO_WRAP_WORD);
      text_size (p, l->notes[i], UI_FONT_PX, FALSE, NULL, &th);
      h += th + 10;
    }
  pango_layout_set_width (p->pl, -1);
  return h;
}

static void
draw_notes (Painter *p, const CsLayout *l, double x0, double y_bottom, double width)
{
  double h = notes_height (p, l, width), y = y_bottom - h, th;

  for (guint i = 0; l->notes && l->notes[i]; i++)
    {
      pango_layout_set_width (p->pl, (int) ((width - 16) * PANGO_SCALE));
      pango_layout_set_wrap (p->pl, PANGO_WRAP_WORD);
      text_size (p, l->notes[i], UI_FONT_PX, FALSE, NULL, &th);
      rounded_rect (p->cr, x0, y, width, th + 6, 4);
      cairo_set_source_rgba (p->cr, 1.0, 0.97, 0.80, 0.95);
      cairo_fill (p->cr);
      pango_layout_set_alignment (p->pl, PANGO_ALIGN_LEFT);
      set_color (p->cr, &DARK);
      cairo_move_to (p->cr, x0 + 8, y + 3);
      pango_cairo_show_layout (p->cr, p->pl);
      y += th + 10;
    }
  pango_layout_set_width (p->pl, -1);
}

/**
 * cs_draw_legend_size:
 * @layout: a display list
 * @flags: what cs_draw_layout() will draw
 * @width_px: (out): width of the legend box in device pixels (0 without CS_DRAW_LEGEND)
 * @height_px: (out): its height
 *
 * Size of the legend drawn at the top-left corner, so that callers (file export, a GUI that
 * wants the graph clear of it) can reserve the room.
 */
void
cs_draw_legend_size (const CsLayout *layout, CsDrawFlags flags, double *width_px, double *height_px)
{
  cairo_surface_t *s;
  cairo_t *cr;
  Painter p;

  *width_px = *height_px = 0;
  if (!(flags & CS_DRAW_LEGEND))
    return;
  s = cairo_image_surface_create (CAIRO_FORMAT_ARGB32, 1, 1);
  cr = cairo_create (s);
  painter_init (&p, cr, layout->font_family);
  legend_measure (&p, layout, width_px, height_px);
  painter_clear (&p);
  cairo_destroy (cr);
  cairo_surface_destroy (s);
}

/**
 * cs_draw_keys:
 * @cr: a cairo context in device pixels (a side panel's drawing area)
 * @layout: a display list
 * @x: left edge, px
 * @y: top edge, px
 * @width_px: (out) (optional): width drawn, px
 * @height_px: (out) (optional): height drawn, px
 *
 * Draws the dtype legend (the same box cs_draw_layout() puts at the top-left with
 * CS_DRAW_LEGEND) and below it, when a value overlay is set, the value key: for a GUI that
 * keeps them beside the graph rather than over it.
 */
void
cs_draw_keys (cairo_t *cr, const CsLayout *layout, double x, double y, double *width_px,
              double *height_px)
{
  Painter p;
  double w, h;

  g_return_if_fail (cr != NULL && layout != NULL);
  cairo_save (cr);
  painter_init (&p, cr, layout->font_family);
  pango_cairo_update_layout (cr, p.pl);
  legend_measure (&p, layout, &w, &h);
  draw_legend (&p, layout, x, y);
  if (layout->has_scale)
    {
      draw_value_key (&p, layout, x, y + h + UI_MARGIN_PX);
      h += UI_MARGIN_PX + KEY_H_PX;
      w = MAX (w, KEY_W_PX);
    }
  painter_clear (&p);
  cairo_restore (cr);
  if (width_px != NULL)
    *width_px = w;
  if (height_px != NULL)
    *height_px = h;
}

/* ---------------------------------------------------------------------------------------- */
/* the painter                                                                               */

/**
 * cs_draw_layout:
 * @cr: any cairo context (a GtkDrawingArea's, an image, SVG or PDF surface's); its state is
 *   saved and restored
 * @layout: a laid-out display list
 * @view: pan and zoom (cs_view_init_fit() for zoom-to-fit)
 * @width_px: width of the area in device units (for the legend, key, notes and culling)
 * @height_px: height of the area
 * @flags: what to draw besides the graph
 *
 * Draws the graph: clusters (fusion regions filled grey; expanded statements dashed), edges
 * as the layout's béziers coloured by dtype (or by the value scale) with arrowheads and shape
 * labels, the clusters' titles and stats over the edges on plates of their box's colour (no
 * edge crosses a title), nodes (op boxes; cast pills filled with the target dtype's
 * colour; inputs and outputs tinted with their dtype, outputs double-framed; collapsed regions
 * grey and bold; matmul badges "TC" / "f32"), value fills, diff marks and the selection; then,
 * in device space, the dtype legend (top-left), the value key (top-right) and the layout's
 * notes (bottom-left).  Elements outside the clip are skipped and text is skipped when it
 * would be under 3 px high, so large graphs stay fast when zoomed out.
 */
void
cs_draw_layout (cairo_t *cr, const CsLayout *layout, const CsView *view, double width_px,
                double height_px, CsDrawFlags flags)
{
  Painter p;
  double cx0, cy0, cx1, cy1;
  gboolean text;

  g_return_if_fail (cr != NULL && layout != NULL && view != NULL);
  cairo_save (cr);
  painter_init (&p, cr, layout->font_family);

  if (layout->laid_out)
    {
      cairo_save (cr);
      cairo_translate (cr, view->tx - layout->bb.x0 * view->scale,
                       view->ty + layout->bb.y1 * view->scale);
      cairo_scale (cr, view->scale, view->scale);
      cairo_clip_extents (cr, &cx0, &cy0, &cx1, &cy1);
      cairo_set_line_join (cr, CAIRO_LINE_JOIN_ROUND);
      text = layout->font_size_pt * view->scale >= LOD_TEXT_PX;
      p.scale = view->scale;

      for (guint i = 0; i < layout->n_clusters; i++)
        if (visible (&layout->clusters[i].box, cx0, cy0, cx1, cy1))
          draw_cluster (&p, layout, &layout->clusters[i]);
      for (guint i = 0; i < layout->n_edges; i++)
        {
          const CsLayoutEdge *e = &layout->edges[i];
          const CsLayoutNode *a = &layout->nodes[e->tail], *b = &layout->nodes[e->head];
          CsRect r = { MIN (a->box.x0, b->box.x0), MIN (a->box.y0, b->box.y0),
                       MAX (a->box.x1, b->box.x1), MAX (a->box.y1, b->box.y1) };
          for (guint k = 0; k < e->n_points; k++)
            {
              r.x0 = MIN (r.x0, e->points[k].x);
              r.x1 = MAX (r.x1, e->points[k].x);
              r.y0 = MIN (r.y0, e->points[k].y);
              r.y1 = MAX (r.y1, e->points[k].y);
            }
          if (visible (&r, cx0, cy0, cx1, cy1))
            draw_edge (&p, layout, e, text && (flags & CS_DRAW_EDGE_LABELS));
        }
      /* titles over the edges (each on its plate), under the nodes */
      for (guint i = 0; i < layout->n_clusters; i++)
        if (visible (&layout->clusters[i].box, cx0, cy0, cx1, cy1))
          draw_cluster_title (&p, layout, &layout->clusters[i], text);
      for (guint i = 0; i < layout->n_nodes; i++)
        if (visible (&layout->nodes[i].box, cx0 - 60, cy0 - 20, cx1 + 60, cy1 + 20))
          draw_node (&p, layout, &layout->nodes[i], text);
      if (layout->precision_lens && text)
        draw_lens_texts (&p, layout, (flags & CS_DRAW_EDGE_LABELS) != 0, cx0, cy0, cx1, cy1);
      cairo_restore (cr);
    }

  pango_cairo_update_layout (cr, p.pl);
  if (flags & CS_DRAW_LEGEND)
    draw_legend (&p, layout, UI_MARGIN_PX, UI_MARGIN_PX);
  if ((flags & CS_DRAW_VALUE_KEY) && layout->has_scale)
    draw_value_key (&p, layout, width_px - KEY_W_PX - UI_MARGIN_PX, UI_MARGIN_PX);
  if ((flags & CS_DRAW_NOTES) && layout->notes && layout->notes[0])
    draw_notes (&p, layout, UI_MARGIN_PX, height_px - UI_MARGIN_PX,
                MIN (width_px - 2 * UI_MARGIN_PX, 640.0));

  painter_clear (&p);
  cairo_restore (cr);
}

/* ---------------------------------------------------------------------------------------- */
/* export                                                                                    */

/**
 * cs_export_format_from_path:
 * @path: an output file name
 * @format: (out): the format its extension names (.svg, .png, .pdf, .dot / .gv; any case)
 * Returns: FALSE for any other extension
 */
gboolean
cs_export_format_from_path (const char *path, CsExportFormat *format)
{
  const char *dot;
  g_autofree char *ext = NULL;

  g_return_val_if_fail (path != NULL && format != NULL, FALSE);
  dot = strrchr (path, '.');
  if (dot == NULL || strchr (dot, '/') != NULL)
    return FALSE;
  ext = g_ascii_strdown (dot + 1, -1);
  if (g_str_equal (ext, "svg"))
    *format = CS_EXPORT_SVG;
  else if (g_str_equal (ext, "png"))
    *format = CS_EXPORT_PNG;
  else if (g_str_equal (ext, "pdf"))
    *format = CS_EXPORT_PDF;
  else if (g_str_equal (ext, "dot") || g_str_equal (ext, "gv"))
    *format = CS_EXPORT_DOT;
  else
    return FALSE;
  return TRUE;
}

static double
page_notes_height (const CsLayout *layout, double width)
{
  cairo_surface_t *s = cairo_image_surface_create (CAIRO_FORMAT_ARGB32, 1, 1);
  cairo_t *cr = cairo_create (s);
  Painter p;
  double h;

  painter_init (&p, cr, layout->font_family);
  h = notes_height (&p, layout, width);
  painter_clear (&p);
  cairo_destroy (cr);
  cairo_surface_destroy (s);
  return h;
}

/* Checks, without creating or changing anything, that @path can be written: its folder exists,
 * is a folder and takes new files, and @path itself (if it exists) is a writable file.  FALSE
 * with "cannot write PATH: <reason>" when not ("Not a directory" for a folder part that is a
 * file, "Is a directory" for a folder at @path). */
static gboolean
probe_writable (const char *path, GError **error)
{
  g_autofree char *dir = g_path_get_dirname (path);
  GStatBuf st;
  int saved = 0;

  if (g_stat (dir, &st) != 0)
    saved = errno;
  else if (!S_ISDIR (st.st_mode))
    saved = ENOTDIR;
  else if (g_access (dir, W_OK | X_OK) != 0)
    saved = errno;
  else if (g_stat (path, &st) == 0 && S_ISDIR (st.st_mode))
    saved = EISDIR;
  else if (g_access (path, F_OK) == 0 && g_access (path, W_OK) != 0)
    saved = errno;
  if (saved != 0)
    {
      g_set_error (error, CS_RENDER_ERROR, CS_RENDER_ERROR_IO, "cannot write %s: %s", path,
                   g_strerror (saved));
      return FALSE;
    }
  return TRUE;
}

/* cairo write callback: appends to a GByteArray (the picture is written to disk in one piece
 * once it is complete). */
static cairo_status_t
append_bytes (void *closure, const unsigned char *data, unsigned int length)
{
  g_byte_array_append (closure, data, length);
  return CAIRO_STATUS_SUCCESS;
}

/* Writes @len bytes to @path through a temporary file in the same folder renamed over @path
 * once everything is written (g_file_set_contents): a failed write (a full disk) leaves no
 * partial file and the old @path, if any, untouched. */
static gboolean
write_whole_file (const char *path, const void *data, gsize len, GError **error)
{
  g_autoptr(GError) e = NULL;

  if (!g_file_set_contents (path, data, (gssize) len, &e))
    {
      g_set_error (error, CS_RENDER_ERROR, CS_RENDER_ERROR_IO, "cannot write %s: %s", path,
                   e->message);
      return FALSE;
    }
  return TRUE;
}

/* The export page: its size in points and where the graph goes (legend and value key at the
 * top-left, the graph beside them when tall or below them when wide, notes at the bottom). */
static void
page_geometry (const CsLayout *layout, CsDrawFlags flags, double *pw_out, double *ph_out,
               CsView *view_out)
{
  double lw, lh, gw, gh, pw, ph, nh, m = 12.0;
  CsView view;

  cs_draw_legend_size (layout, flags, &lw, &lh);
  if ((flags & CS_DRAW_VALUE_KEY) && layout->has_scale)
    {
      lw += KEY_W_PX + m;
      lh = MAX (lh, KEY_H_PX);
    }
  gw = layout->bb.x1 - layout->bb.x0;
  gh = layout->bb.y1 - layout->bb.y0;
  memset (&view, 0, sizeof view);
  view.scale = 1.0;
  if (lw > 0 && gh > gw + lh)
    {
      /* tall graph: legend in a column at the left, graph beside it */
      pw = lw + gw + 3 * m;
      nh = (flags & CS_DRAW_NOTES) ? page_notes_height (layout, MIN (pw - 2 * UI_MARGIN_PX, 640.0)) : 0;
      ph = MAX (gh, lh) + 2 * m + (nh > 0 ? nh + m : 0);
      view.tx = lw + 2 * m;
      view.ty = m;
    }
  else
    {
      /* wide graph: legend in a band at the top */
      pw = MAX (gw, lw) + 2 * m;
      nh = (flags & CS_DRAW_NOTES) ? page_notes_height (layout, MIN (pw - 2 * UI_MARGIN_PX, 640.0)) : 0;
      ph = (lh > 0 ? lh + m : 0) + gh + 2 * m + (nh > 0 ? nh + m : 0);
      view.tx = m + (pw - 2 * m - gw) / 2;
      view.ty = m + (lh > 0 ? lh + m : 0);
    }

  *pw_out = pw;
  *ph_out = ph;
  *view_out = view;
}

/* The PNG scale used for a @pw x @ph point page when @requested is asked for: at most
 * PNG_MAX_SIDE_PX a side and PNG_MAX_PIXELS in all; 1.0 for a non-positive request. */
static double
png_scale (double pw, double ph, double requested)
{
  double scale = requested > 0 ? requested : 1.0;

  scale = MIN (scale, PNG_MAX_SIDE_PX / MAX (pw, ph));
  return MIN (scale, sqrt (PNG_MAX_PIXELS / (pw * ph)));
}

/**
 * cs_draw_export_png_scale:
 * @layout: a laid-out display list
 * @scale: the requested device pixels per point
 * @flags: as for cs_draw_export()
 *
 * The scale cs_draw_export() will use for a PNG of @layout: @scale unless the image would be
 * over 32,000 px a side or 120 Mpixel, then the largest scale that fits (so a caller can say
 * that it was reduced).  0 when @layout has no geometry.
 * Returns: pixels per point
 */
double
cs_draw_export_png_scale (const CsLayout *layout, double scale, CsDrawFlags flags)
{
  double pw, ph;
  CsView view;

  g_return_val_if_fail (layout != NULL, 0);
  if (!layout->laid_out)
    return 0;
  page_geometry (layout, flags, &pw, &ph, &view);
  return png_scale (pw, ph, scale);
}

/**
 * cs_draw_export:
 * @layout: a laid-out display list
 * @format: SVG, PNG, PDF (drawn by cs_draw_layout()) or DOT (the text laid out)
 * @path: output file (overwritten)
 * @scale: device pixels per layout point for PNG (1.0 = 100 %, 2.0 for high-DPI); SVG and PDF
 *   are vector pages in points and ignore it
 * @flags: what to draw besides the graph
 * @error: return location for a #CS_RENDER_ERROR
 *
 * Writes the picture the GUI shows: the page holds the legend (and the value key) at the
 * top-left, the graph at 100 % beside it (tall graphs) or below it (wide graphs), and the
 * notes in a band at the bottom.  A PNG too
 * large for one image (over 32,000 px a side or 120 Mpixel) is drawn at the largest scale that
 * fits (cs_draw_export_png_scale() tells which): prefer SVG for huge traces.
 * The picture is drawn in memory and written through a temporary file in @path's folder that
 * replaces @path only once every byte is written: a failure (a full disk, a file size limit)
 * leaves no partial file and an existing @path as it was.
 * Errors: CS_RENDER_ERROR_IO when cairo or the file system cannot write @path,
 * CS_RENDER_ERROR_TRACE when @layout has no geometry.
 * Returns: TRUE on success
 */
gboolean
cs_draw_export (const CsLayout *layout, CsExportFormat format, const char *path, double scale,
                CsDrawFlags flags, GError **error)
{
  double pw, ph;
  CsView view;
  cairo_surface_t *surface = NULL;
  cairo_t *cr;
  cairo_status_t st;
  g_autoptr(GByteArray) bytes = NULL;

  g_return_val_if_fail (layout != NULL && path != NULL, FALSE);
  /* g_file_set_contents() names its temporary file in errors: check @path first so that the
   * common failures (no such folder, no permission) name it, with the reason. */
  if (!probe_writable (path, error))
    return FALSE;
  if (format == CS_EXPORT_DOT)
    return write_whole_file (path, layout->dot ? layout->dot : "",
                             layout->dot ? strlen (layout->dot) : 0, error);
  if (!layout->laid_out)
    {
      g_set_error (error, CS_RENDER_ERROR, CS_RENDER_ERROR_TRACE,
                   "%s: the graph has not been laid out", path);
      return FALSE;
    }

  page_geometry (layout, flags, &pw, &ph, &view);

  bytes = g_byte_array_new ();
  switch (format)
    {
    case CS_EXPORT_SVG:
      surface = cairo_svg_surface_create_for_stream (append_bytes, bytes, pw, ph);
      break;
    case CS_EXPORT_PDF:
      surface = cairo_pdf_surface_create_for_stream (append_bytes, bytes, pw, ph);
      break;
    case CS_EXPORT_PNG:
      scale = png_scale (pw, ph, scale);
      surface = cairo_image_surface_create (CAIRO_FORMAT_ARGB32, (int) ceil (pw * scale),
                                            (int) ceil (ph * scale));
      break;
    case CS_EXPORT_DOT:
    default:
      g_assert_not_reached ();
    }
  st = cairo_surface_status (surface);
  if (st != CAIRO_STATUS_SUCCESS)
    {
      g_set_error (error, CS_RENDER_ERROR, CS_RENDER_ERROR_IO, "%s: cannot create the picture: %s",
                   path, cairo_status_to_string (st));
      cairo_surface_destroy (surface);
      return FALSE;
    }
  cr = cairo_create (surface);
  if (format == CS_EXPORT_PNG)
    cairo_scale (cr, scale, scale);
  cairo_set_source_rgb (cr, 1, 1, 1);
  cairo_paint (cr);
  cs_draw_layout (cr, layout, &view, pw, ph, flags);
  st = cairo_status (cr);
  cairo_destroy (cr);
  if (st == CAIRO_STATUS_SUCCESS && format == CS_EXPORT_PNG)
    st = cairo_surface_write_to_png_stream (surface, append_bytes, bytes);
  /* SVG and PDF surfaces write their last bytes when finished */
  cairo_surface_finish (surface);
  if (st == CAIRO_STATUS_SUCCESS)
    st = cairo_surface_status (surface);
  cairo_surface_destroy (surface);
  if (st != CAIRO_STATUS_SUCCESS)
    {
      g_set_error (error, CS_RENDER_ERROR, CS_RENDER_ERROR_IO, "cannot draw %s: %s", path,
                   cairo_status_to_string (st));
      return FALSE;
    }
  return write_whole_file (path, bytes->data, bytes->len, error);
}
