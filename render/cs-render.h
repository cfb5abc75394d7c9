/* cs-render.h: umbrella header of render/ (libcsrender): trace -> graph -> Graphviz layout on a
 * worker -> display list -> one cairo painter for screen and SVG/PNG/PDF, plus DOT export.
 * render/ knows nothing of GTK; the GUI draws a #CsLayout with cs_draw_layout() in its
 * GtkDrawingArea and hit-tests with cs_layout_hit_test().
 *
 * Typical GUI use:
 *   cs_render_options_init (&opts);
 *   cs_layout_new_async (trace, &opts, cancellable, on_layout_ready, self);
 *   ...  layout = cs_layout_new_finish (result, &error);
 *   cs_view_init_fit (&view, layout, w, h, 16, 1.0);
 *   draw func: cs_draw_layout (cr, layout, &view, w, h, CS_DRAW_DEFAULT);
 *   click: cs_view_to_pt (&view, layout, x, y, &xp, &yp);
 *          cs_layout_hit_test (layout, xp, yp, 3 / view.scale, &hit);
 *          layout->nodes[hit.index].stmt_id -> the trace line.
 */
#pragma once

#include "cs-render-types.h"
#include "cs-palette.h"
#include "cs-layout.h"
#include "cs-graph.h"
#include "cs-draw.h"
#include "cs-group.h"
#include "cs-layout-cache.h"
