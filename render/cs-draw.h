/* cs-draw.h: the one cairo painter of castscope.  It draws a #CsLayout to any cairo_t: a GTK
 * drawing area, an image surface (PNG), an SVG or a PDF surface, so files look exactly like the
 * screen (recipes.md 2(a) "Export").  Text goes through PangoCairo with the family the layout
 * was measured with.  The view transform maps Graphviz points (y up) to device pixels (y down):
 *
 *   x_px = (x_pt - bb.x0) * scale + tx        y_px = (bb.y1 - y_pt) * scale + ty
 */
#pragma once

#include <cairo.h>
#include <glib.h>

#include "cs-layout.h"

G_BEGIN_DECLS

/** CsView: the pan / zoom of one picture. */
typedef struct
{
  double scale;          /* px per pt; 1.0 = 100 % (one Graphviz point per pixel) */
  double tx;             /* px: device x of the layout's left edge (bb.x0) */
  double ty;             /* px: device y of the layout's top edge (bb.y1) */
} CsView;

typedef enum
{
  CS_DRAW_LEGEND      = 1 << 0,  /* dtype colours, cast / badge key (top-left of the area) */
  CS_DRAW_VALUE_KEY   = 1 << 1,  /* colour key of the value overlay (top-right), when set */
  CS_DRAW_NOTES       = 1 << 2,  /* the layout's notes (bottom-left) */
  CS_DRAW_EDGE_LABELS = 1 << 3,  /* tensor shapes on edges */
  CS_DRAW_DEFAULT     = 0xf,
} CsDrawFlags;

typedef enum
{
  CS_EXPORT_SVG,
  CS_EXPORT_PNG,
  CS_EXPORT_PDF,
  CS_EXPORT_DOT,
} CsExportFormat;

void      cs_view_init_fit      (CsView         *view,
                                 const CsLayout *layout,
                                 double          width_px,
                                 double          height_px,
                                 double          margin_px,
                                 double          max_scale);
void      cs_view_to_px         (const CsView   *view,
                                 const CsLayout *layout,
                                 double          x_pt,
                                 double          y_pt,
                                 double         *x_px,
                                 double         *y_px);
void      cs_view_to_pt         (const CsView   *view,
                                 const CsLayout *layout,
                                 double          x_px,
                                 double          y_px,
                                 double         *x_pt,
                                 double         *y_pt);
void      cs_view_zoom_at       (CsView         *view,
                                 double          factor,
                                 double          x_px,
                                 double          y_px);
void      cs_view_center_on     (CsView         *view,
                                 const CsLayout *layout,
                                 const CsRect   *box,
                                 double          width_px,
                                 double          height_px);

gboolean  cs_draw_mark_label_box (const CsLayout *layout,
                                 const CsLayoutNode *n,
                                 CsRect         *box);
void      cs_draw_layout        (cairo_t        *cr,
                                 const CsLayout *layout,
                                 const CsView   *view,
                                 double          width_px,
                                 double          height_px,
                                 CsDrawFlags     flags);
void      cs_draw_keys          (cairo_t        *cr,
                                 const CsLayout *layout,
                                 double          x,
                                 double          y,
                                 double         *width_px,
                                 double         *height_px);
void      cs_draw_legend_size   (const CsLayout *layout,
                                 CsDrawFlags     flags,
                                 double         *width_px,
                                 double         *height_px);

gboolean  cs_export_format_from_path (const char     *path,
                                      CsExportFormat *format);
gboolean  cs_draw_export        (const CsLayout *layout,
                                 CsExportFormat  format,
                                 const char     *path,
                                 double          scale,
                                 CsDrawFlags     flags,
                                 GError        **error);
/* The PNG scale cs_draw_export() uses for @scale (smaller for images over its size limits). */
double    cs_draw_export_png_scale (const CsLayout *layout,
                                    double          scale,
                                    CsDrawFlags     flags);

G_END_DECLS
