/* test-render-draw.c: the cairo painter and the exports (render/cs-draw.c).
 *
 * Pixels are probed where the geometry says an element is: legend swatches at the offsets
 * documented in cs-draw.c, a bf16 edge at a point of its bézier, a cast node's fill, a badge.
 * Expected colours are the Okabe-Ito hex values (cs-palette.h) and viridis' end points.
 */
#include "cs-config.h"

#include <math.h>
#include <string.h>

#include <cairo.h>
#include <pango/pangocairo.h>
#include <glib/gstdio.h>

#include "cs-parse.h"
#include "cs-pipeline.h"
#include "cs-policy.h"
#include "cs-render.h"

static const char seed_fwd[] =
  "def computation(a, b, w):\n"
  "  # a: \"cuda:0 bf16[8, 16]\"\n"
  "  # b: \"cuda:0 bf16[16]\"\n"
  "  # w: \"cuda:0 bf16[16, 16]\"\n"
  "  [t19] = nvFusion0(b, a)\n"
  "    # t6 = prims.broadcast_in_dim(b, (8, 16), (1,))  # t6: \"cuda:0 bf16[8, 16]\"\n"
  "    # t11 = prims.convert_element_type(a, dtypes.float32)  # t11: \"cuda:0 f32[8, 16]\"\n"
  "    # t14 = prims.convert_element_type(t6, dtypes.float32)  # t14: \"cuda:0 f32[8, 16]\"\n"
  "    # t17 = prims.add(t11, t14)  # t17: \"cuda:0 f32[8, 16]\"\n"
  "    # t19 = prims.convert_element_type(t17, dtypes.bfloat16)  # t19: \"cuda:0 bf16[8, 16]\"\n"
  "  t31 = torch.matmul(t19, w)  # t31: \"cuda:0 bf16[8, 16]\"\n"
  "    # t31 = ltorch.matmul(t19, w)  # t31: \"cuda:0 bf16[8, 16]\"\n"
  "      # t31 = prims.matmul(t19, w)  # t31: \"cuda:0 bf16[8, 16]\"\n"
  "  return {'output': (t31,), 'flat_args': [a, b, w], 'flat_output': (t31,)}, ((w, t19), ())\n";

static CsLayout *
seed_layout (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTrace) t = cs_parse_trace (seed_fwd, "seed", &error);
  CsLayout *l;

  g_assert_no_error (error);
  l = cs_layout_new (t, NULL, NULL, &error);
  g_assert_no_error (error);
  return l;
}

/* RGB of pixel (x, y) of an ARGB32 surface (opaque background assumed) */
static void
pixel (cairo_surface_t *s, int x, int y, int rgb[3])
{
  const guint8 *data;
  guint32 v;

  cairo_surface_flush (s);
  data = cairo_image_surface_get_data (s);
  g_assert_cmpint (x, >=, 0);
  g_assert_cmpint (y, >=, 0);
  g_assert_cmpint (x, <, cairo_image_surface_get_width (s));
  g_assert_cmpint (y, <, cairo_image_surface_get_height (s));
  v = *(const guint32 *) (data + y * cairo_image_surface_get_stride (s) + x * 4);
  rgb[0] = (v >> 16) & 0xff;
  rgb[1] = (v >> 8) & 0xff;
  rgb[2] = v & 0xff;
}

static void
hex_rgb (const char *hex, int rgb[3])
{
  for (int i = 0; i < 3; i++)
    rgb[i] = g_ascii_xdigit_value (hex[1 + 2 * i]) * 16 + g_ascii_xdigit_value (hex[2 + 2 * i]);
}

static gboolean
close_rgb (const int a[3], const int b[3], int tol)
{
  return abs (a[0] - b[0]) <= tol && abs (a[1] - b[1]) <= tol && abs (a[2] - b[2]) <= tol;
}

static void
assert_pixel (cairo_surface_t *s, int x, int y, const char *hex, int tol)
{
  int got[3], want[3];

  pixel (s, x, y, got);
  hex_rgb (hex, want);
  if (!close_rgb (got, want, tol))
    g_error ("pixel (%d, %d) is #%02X%02X%02X, expected %s", x, y, got[0], got[1], got[2], hex);
}

/* Is there a pixel within @r px of (x, y) of colour @hex? (antialiased thin lines) */
static gboolean
near_pixel (cairo_surface_t *s, double x, double y, int r, const char *hex, int tol)
{
  int want[3], got[3];

  hex_rgb (hex, want);
  for (int dy = -r; dy <= r; dy++)
    for (int dx = -r; dx <= r; dx++)
      {
        int px = (int) floor (x) + dx, py = (int) floor (y) + dy;
        if (px < 0 || py < 0 || px >= cairo_image_surface_get_width (s)
            || py >= cairo_image_surface_get_height (s))
          continue;
        pixel (s, px, py, got);
        if (close_rgb (got, want, tol))
          return TRUE;
      }
  return FALSE;
}

static cairo_surface_t *
paint (const CsLayout *l, const CsView *view, int w, int h, CsDrawFlags flags)
{
  cairo_surface_t *s = cairo_image_surface_create (CAIRO_FORMAT_ARGB32, w, h);
  cairo_t *cr = cairo_create (s);

  cairo_set_source_rgb (cr, 1, 1, 1);
  cairo_paint (cr);
  cs_draw_layout (cr, l, view, w, h, flags);
  g_assert_cmpint (cairo_status (cr), ==, CAIRO_STATUS_SUCCESS);
  cairo_destroy (cr);
  return s;
}

static CsPoint
bezier_mid (const CsLayoutEdge *e)
{
  const CsPoint *p = e->points;   /* first segment, t = 0.5 */
  return (CsPoint) { 0.125 * p[0].x + 0.375 * p[1].x + 0.375 * p[2].x + 0.125 * p[3].x,
                     0.125 * p[0].y + 0.375 * p[1].y + 0.375 * p[2].y + 0.125 * p[3].y };
}

static void
test_edges_and_nodes (void)
{
  g_autoptr(CsLayout) l = seed_layout ();
  CsView view = { 2.0, 20, 20 };
  int w = (int) ((l->bb.x1 - l->bb.x0) * 2 + 40), h = (int) ((l->bb.y1 - l->bb.y0) * 2 + 40);
  cairo_surface_t *s = paint (l, &view, w, h, 0);
  guint n_bf16 = 0, n_f32 = 0;

  for (guint j = 0; j < l->n_edges; j++)
    {
      const CsLayoutEdge *e = &l->edges[j];
      CsPoint m = bezier_mid (e);
      double x, y;
      const char *hex = cs_palette_class_hex (cs_palette_class_for_dtype (e->dtype));

      cs_view_to_px (&view, l, m.x, m.y, &x, &y);
      /* skip points that fall inside a node (an edge may pass under a label) */
      {
        CsLayoutHit hit;
        if (cs_layout_hit_test (l, m.x, m.y, 0, &hit) && hit.kind == CS_LAYOUT_HIT_NODE)
          continue;
      }
      g_assert_true (near_pixel (s, x, y, 1, hex, 40));
      n_bf16 += e->dtype == CS_DTYPE_BF16;
      n_f32 += e->dtype == CS_DTYPE_F32;
    }
  g_assert_cmpuint (n_bf16, >=, 3);
  g_assert_cmpuint (n_f32, >=, 2);

  for (guint i = 0; i < l->n_nodes; i++)
    {
      const CsLayoutNode *n = &l->nodes[i];
      double x, y;

      if (n->kind == CS_LAYOUT_NODE_CAST)
        {
          /* left part of the pill, clear of the text: the target dtype's colour */
          cs_view_to_px (&view, l, n->box.x0 + 4, (n->box.y0 + n->box.y1) / 2, &x, &y);
          assert_pixel (s, (int) x, (int) y,
                        cs_palette_class_hex (cs_palette_class_for_dtype (n->dtype)), 6);
        }
      else if (n->badge == CS_LAYOUT_BADGE_TENSOR_CORE)
        {
          /* the badge's left end: 22 pt wide, 4 pt from the right side */
          cs_view_to_px (&view, l, n->box.x1 - 4 - 22 + 4, (n->box.y0 + n->box.y1) / 2 - 2, &x, &y);
          assert_pixel (s, (int) x, (int) y, CS_PALETTE_HEX_TENSOR_CORE, 6);
        }
      else if (n->kind == CS_LAYOUT_NODE_OP)
        {
          /* op boxes are white inside */
          cs_view_to_px (&view, l, n->box.x0 + 3, n->box.y0 + 3, &x, &y);
          assert_pixel (s, (int) x, (int) y, "#FFFFFF", 2);
        }
    }
  cairo_surface_destroy (s);
}

static void
test_legend_png (void)
{
  g_autoptr(CsLayout) l = seed_layout ();
  g_autoptr(GError) error = NULL;
  g_autofree char *dir = g_dir_make_tmp ("cs-render-XXXXXX", &error);
  g_autofree char *path = g_build_filename (dir, "seed.png", NULL);
  cairo_surface_t *s;
  double lw, lh;

  g_assert_no_error (error);
  g_assert_true (cs_draw_export (l, CS_EXPORT_PNG, path, 1.0, CS_DRAW_DEFAULT, &error));
  g_assert_no_error (error);
  s = cairo_image_surface_create_from_png (path);
  g_assert_cmpint (cairo_surface_status (s), ==, CAIRO_STATUS_SUCCESS);
  /* page: legend + graph + 12 pt margins, at 1 px per pt */
  cs_draw_legend_size (l, CS_DRAW_DEFAULT, &lw, &lh);
  g_assert_cmpint (cairo_image_surface_get_width (s), >=, (int) (l->bb.x1 - l->bb.x0));
  g_assert_cmpint (cairo_image_surface_get_height (s), >=, (int) (l->bb.y1 - l->bb.y0 + lh));
  /* legend at (8, 8): 8 px padding, 16 px rows (title, f64, f32, bf16, ...), swatches from
   * x = 16 to 42, 3 px lines centred on each row */
  assert_pixel (s, 29, 8 + 8 + 16 * 1 + 8, cs_palette_class_hex (CS_PALETTE_F64), 4);
  assert_pixel (s, 29, 8 + 8 + 16 * 2 + 8, "#0072B2", 4);
  assert_pixel (s, 29, 8 + 8 + 16 * 3 + 8, "#D55E00", 4);
  assert_pixel (s, 29, 8 + 8 + 16 * 4 + 8, "#E69F00", 4);
  assert_pixel (s, 29, 8 + 8 + 16 * 7 + 8, "#000000", 4);
  /* a corner of the page is background */
  assert_pixel (s, 2, cairo_image_surface_get_height (s) - 2, "#FFFFFF", 0);
  /* PNG scale limits, from the page size in points (the 1.0 export): a small request is kept,
   * a huge one gives at most 32,000 px a side and 120 Mpixel, whichever binds */
  {
    double w1 = cairo_image_surface_get_width (s), h1 = cairo_image_surface_get_height (s);
    double want = MIN (32000.0 / MAX (w1, h1), sqrt (120e6 / (w1 * h1)));
    double got = cs_draw_export_png_scale (l, 1000.0, CS_DRAW_DEFAULT);

    g_assert_cmpfloat (cs_draw_export_png_scale (l, 2.0, CS_DRAW_DEFAULT), ==, 2.0);
    g_assert_cmpfloat (fabs (got - want) / want, <, 0.01);
    g_assert_cmpfloat (got, <, 1000.0);
  }
  {
    int h_with = cairo_image_surface_get_height (s);
    cairo_surface_destroy (s);

    /* without the legend the page loses the legend's band (this graph is not tall enough
     * for a side column: 12 pt margins) */
    g_assert_true (cs_draw_export (l, CS_EXPORT_PNG, path, 1.0, CS_DRAW_DEFAULT & ~CS_DRAW_LEGEND, &error));
    s = cairo_image_surface_create_from_png (path);
    g_assert_cmpint (abs (cairo_image_surface_get_height (s) - (h_with - (int) ceil (lh + 12))), <=, 1);
    cairo_surface_destroy (s);
  }
  g_remove (path);
  g_rmdir (dir);
}

/* A point of edge @e's first bézier segment at parameter 1/2, and the unit normal there. */
static void
edge_mid (const CsLayoutEdge *e, CsPoint *at, CsPoint *normal)
{
  const CsPoint *p = e->points;
  double dx, dy, len;

  at->x = (p[0].x + 3 * p[1].x + 3 * p[2].x + p[3].x) / 8;
  at->y = (p[0].y + 3 * p[1].y + 3 * p[2].y + p[3].y) / 8;
  dx = (p[2].x + p[3].x - p[0].x - p[1].x);
  dy = (p[2].y + p[3].y - p[0].y - p[1].y);
  len = sqrt (dx * dx + dy * dy);
  g_assert_cmpfloat (len, >, 0);
  normal->x = -dy / len;
  normal->y = dx / len;
}

/* Heat overlays keep the dtype readable: a node's fill takes the heat while its border stays
 * (the matmul's tensor-core border, a cast's dtype); an edge keeps its dtype-coloured line with
 * the heat as a band on each side of it. */
static void
test_value_overlay (void)
{
  g_autoptr(CsLayout) l = seed_layout ();
  CsView view = { 2.0, 20, 20 };
  int w = (int) ((l->bb.x1 - l->bb.x0) * 2 + 40) + 200, h = (int) ((l->bb.y1 - l->bb.y0) * 2 + 40);
  cairo_surface_t *s;
  gint mm = -1, edge = -1;
  double x, y;

  for (guint i = 0; i < l->n_nodes; i++)
    if (l->nodes[i].badge == CS_LAYOUT_BADGE_TENSOR_CORE)
      mm = (gint) i;
  g_assert_cmpint (mm, >=, 0);
  g_assert_cmpuint (cs_layout_set_stmt_value (l, l->nodes[mm].stmt_id, 10.0), ==, 1);
  g_assert_cmpuint (cs_layout_set_edge_value (l, "t19", 0.0), ==, 2);
  cs_layout_set_value_scale (l, "time (ms)", 0.0, 10.0);
  s = paint (l, &view, w, h, CS_DRAW_VALUE_KEY);
  /* the matmul holds the top of the scale: viridis(1) = #FDE725 (matplotlib) */
  cs_view_to_px (&view, l, l->nodes[mm].box.x0 + 4, l->nodes[mm].box.y0 + 4, &x, &y);
  assert_pixel (s, (int) x, (int) y, "#FDE725", 3);
  /* its border is still the tensor-core green (#009E73) at the middle of its left side */
  cs_view_to_px (&view, l, l->nodes[mm].box.x0, (l->nodes[mm].box.y0 + l->nodes[mm].box.y1) / 2,
                 &x, &y);
  g_assert_true (near_pixel (s, x, y, 1, CS_PALETTE_HEX_TENSOR_CORE, 24));
  /* an edge of t19 (bf16): the line is bf16's vermillion #D55E00, the band beside it
   * viridis(0) = #440154 (the band is 7 pt wide, the line 2 pt: 2.5 pt out is band only) */
  for (guint i = 0; i < l->n_edges; i++)
    if (g_strcmp0 (l->edges[i].proxy, "t19") == 0 && l->edges[i].n_points >= 4)
      edge = (gint) i;
  g_assert_cmpint (edge, >=, 0);
  {
    CsPoint at, nrm;

    edge_mid (&l->edges[edge], &at, &nrm);
    cs_view_to_px (&view, l, at.x, at.y, &x, &y);
    g_assert_true (near_pixel (s, x, y, 1, "#D55E00", 24));
    cs_view_to_px (&view, l, at.x + 2.5 * nrm.x, at.y + 2.5 * nrm.y, &x, &y);
    assert_pixel (s, (int) round (x), (int) round (y), "#440154", 8);
    cs_view_to_px (&view, l, at.x - 2.5 * nrm.x, at.y - 2.5 * nrm.y, &x, &y);
    assert_pixel (s, (int) round (x), (int) round (y), "#440154", 8);
  }
  /* the key's gradient starts at viridis(0) = #440154 (x0 + 8, y0 + 22 .. 32; 170 px wide) */
  assert_pixel (s, w - 170 - 8 + 9, 8 + 27, "#440154", 6);
  assert_pixel (s, w - 8 - 9, 8 + 27, "#FDE725", 8);
  cairo_surface_destroy (s);

  /* a log scale from 1e-4 to 1e-2 puts 1e-3 half way: viridis(0.5) = #21918C; 1e-5 (under
   * the low end) clamps to viridis(0) */
  cs_layout_clear_values (l);
  g_assert_cmpuint (cs_layout_set_stmt_value (l, l->nodes[mm].stmt_id, 1e-3), ==, 1);
  cs_layout_set_value_scale_log (l, "err (RMSE vs f64)", 1e-4, 1e-2);
  g_assert_true (l->scale_log);
  s = paint (l, &view, w, h, CS_DRAW_VALUE_KEY);
  cs_view_to_px (&view, l, l->nodes[mm].box.x0 + 4, l->nodes[mm].box.y0 + 4, &x, &y);
  assert_pixel (s, (int) x, (int) y, "#21918C", 3);
  cairo_surface_destroy (s);
  g_assert_cmpuint (cs_layout_set_stmt_value (l, l->nodes[mm].stmt_id, 1e-5), ==, 1);
  s = paint (l, &view, w, h, 0);
  cs_view_to_px (&view, l, l->nodes[mm].box.x0 + 4, l->nodes[mm].box.y0 + 4, &x, &y);
  assert_pixel (s, (int) x, (int) y, "#440154", 3);
  cairo_surface_destroy (s);
  /* bounds that are not positive fall back to the linear scale */
  cs_layout_set_value_scale_log (l, "err", 0.0, 1.0);
  g_assert_false (l->scale_log);
}

/* The precision lens draws the rounding point of the region's convert to bf16: a triangle in
 * bf16's vermillion (#D55E00) under the node, 4 pt to each side of its middle 1 pt above the
 * node's bottom, narrowing to its tip 5.2 pt below it (half width 2.7 pt at 1 pt below).
 * 1.5 pt right of the middle and 1 pt below the node lies inside it, 1.2 pt from its side and
 * 0.8 pt clear of the 1.4 pt edge leaving the node's middle (at 4 px per pt); without the lens
 * that pixel is not vermillion. */
static void
test_precision_lens (void)
{
  g_autoptr(CsLayout) l = seed_layout ();
  CsView view = { 4.0, 20, 20 };
  int w = (int) ((l->bb.x1 - l->bb.x0) * 4 + 40), h = (int) ((l->bb.y1 - l->bb.y0) * 4 + 40);
  cairo_surface_t *s;
  gint down = -1;
  double x, y;
  int got[3], want[3];

  for (guint i = 0; i < l->n_nodes; i++)
    if (g_strcmp0 (l->nodes[i].label, "\u2192 bf16") == 0)
      down = (gint) i;
  g_assert_cmpint (down, >=, 0);
  g_assert_true (l->nodes[down].rounds);
  cs_view_to_px (&view, l, (l->nodes[down].box.x0 + l->nodes[down].box.x1) / 2 + 1.5,
                 l->nodes[down].box.y0 - 1.0, &x, &y);
  s = paint (l, &view, w, h, 0);
  pixel (s, (int) x, (int) y, got);
  hex_rgb ("#D55E00", want);
  g_assert_false (close_rgb (got, want, 24));
  cairo_surface_destroy (s);
  cs_layout_set_precision_lens (l, TRUE);
  s = paint (l, &view, w, h, 0);
  assert_pixel (s, (int) x, (int) y, "#D55E00", 24);
  cairo_surface_destroy (s);
}

static void
test_exports (void)
{
  g_autoptr(CsLayout) l = seed_layout ();
  g_autoptr(GError) error = NULL;
  g_autofree char *dir = g_dir_make_tmp ("cs-render-XXXXXX", &error);
  const char *names[] = { "g.svg", "g.pdf", "g.dot", "g.PNG" };
  const char *magic[] = { "<?xml", "%PDF-", "digraph", "\x89PNG" };
  CsExportFormat f;

  for (guint i = 0; i < G_N_ELEMENTS (names); i++)
    {
      g_autofree char *path = g_build_filename (dir, names[i], NULL);
      g_autofree char *text = NULL;
      gsize len;

      g_assert_true (cs_export_format_from_path (path, &f));
      g_assert_true (cs_draw_export (l, f, path, 1.0, CS_DRAW_DEFAULT, &error));
      g_assert_no_error (error);
      g_assert_true (g_file_get_contents (path, &text, &len, NULL));
      g_assert_cmpuint (len, >, 100);
      g_assert_true (memcmp (text, magic[i], strlen (magic[i])) == 0);
      if (f == CS_EXPORT_DOT)
        g_assert_cmpstr (text, ==, l->dot);
      if (f == CS_EXPORT_SVG)
        g_assert_nonnull (strstr (text, "<svg"));
      g_remove (path);
    }
  g_assert_false (cs_export_format_from_path ("x.jpeg", &f));
  g_assert_false (cs_export_format_from_path ("noext", &f));
  g_assert_false (cs_export_format_from_path ("dir.svg/file", &f));
  /* an unwritable path is an IO error, not a crash */
  g_assert_false (cs_draw_export (l, CS_EXPORT_PNG, "/nonexistent-dir/x.png", 1.0, CS_DRAW_DEFAULT, &error));
  g_assert_error (error, CS_RENDER_ERROR, CS_RENDER_ERROR_IO);
  g_clear_error (&error);
  g_assert_false (cs_draw_export (l, CS_EXPORT_SVG, "/nonexistent-dir/x.svg", 1.0, CS_DRAW_DEFAULT, &error));
  g_assert_error (error, CS_RENDER_ERROR, CS_RENDER_ERROR_IO);
  g_clear_error (&error);
  g_rmdir (dir);
}

static void
test_view (void)
{
  g_autoptr(CsLayout) l = seed_layout ();
  CsView v;
  double x, y, xp, yp;

  cs_view_init_fit (&v, l, 400, 300, 10, 1.0);
  /* the whole box fits: both corners land inside the area */
  cs_view_to_px (&v, l, l->bb.x0, l->bb.y1, &x, &y);
  g_assert_cmpfloat (x, >=, 9.99);
  g_assert_cmpfloat (y, >=, 9.99);
  cs_view_to_px (&v, l, l->bb.x1, l->bb.y0, &x, &y);
  g_assert_cmpfloat (x, <=, 390.01);
  g_assert_cmpfloat (y, <=, 290.01);
  /* scale = min (380 / w, 280 / h, 1) */
  g_assert_cmpfloat_with_epsilon (v.scale, MIN (MIN (380 / (l->bb.x1 - l->bb.x0),
                                                     280 / (l->bb.y1 - l->bb.y0)), 1.0), 1e-9);
  /* y is flipped: the top of the layout is at the top of the area */
  cs_view_to_px (&v, l, 0, l->bb.y1, &x, &y);
  cs_view_to_px (&v, l, 0, l->bb.y0, &xp, &yp);
  g_assert_cmpfloat (y, <, yp);
  /* round trip and zoom about a fixed point */
  cs_view_to_pt (&v, l, 123, 77, &xp, &yp);
  cs_view_to_px (&v, l, xp, yp, &x, &y);
  g_assert_cmpfloat_with_epsilon (x, 123, 1e-9);
  g_assert_cmpfloat_with_epsilon (y, 77, 1e-9);
  cs_view_zoom_at (&v, 2.0, 123, 77);
  cs_view_to_px (&v, l, xp, yp, &x, &y);
  g_assert_cmpfloat_with_epsilon (x, 123, 1e-9);
  g_assert_cmpfloat_with_epsilon (y, 77, 1e-9);
  cs_view_center_on (&v, l, &l->nodes[0].box, 400, 300);
  cs_view_to_px (&v, l, (l->nodes[0].box.x0 + l->nodes[0].box.x1) / 2,
                 (l->nodes[0].box.y0 + l->nodes[0].box.y1) / 2, &x, &y);
  g_assert_cmpfloat_with_epsilon (x, 200, 1e-9);
  g_assert_cmpfloat_with_epsilon (y, 150, 1e-9);
}

static void
test_palette (void)
{
  CsColor c;
  char hex[8];

  g_assert_cmpint (cs_palette_class_for_dtype (CS_DTYPE_BF16), ==, CS_PALETTE_BF16);
  g_assert_cmpint (cs_palette_class_for_dtype (CS_DTYPE_F8_E4M3FN), ==, CS_PALETTE_FP8);
  g_assert_cmpint (cs_palette_class_for_dtype (CS_DTYPE_U8), ==, CS_PALETTE_INT);
  g_assert_cmpint (cs_palette_class_for_dtype (CS_DTYPE_B8), ==, CS_PALETTE_BOOL);
  g_assert_cmpint (cs_palette_class_for_dtype (CS_DTYPE_C64), ==, CS_PALETTE_COMPLEX);
  /* Okabe-Ito blue = (0, 114, 178) */
  cs_palette_dtype_color (CS_DTYPE_F32, &c);
  g_assert_cmpfloat_with_epsilon (c.r, 0.0, 1e-9);
  g_assert_cmpfloat_with_epsilon (c.g, 114 / 255.0, 1e-9);
  g_assert_cmpfloat_with_epsilon (c.b, 178 / 255.0, 1e-9);
  cs_palette_to_hex (&c, hex);
  g_assert_cmpstr (hex, ==, "#0072B2");
  /* every class has a distinct colour */
  for (int i = 0; i < CS_N_PALETTE_CLASSES; i++)
    for (int j = i + 1; j < CS_N_PALETTE_CLASSES; j++)
      g_assert_cmpstr (cs_palette_class_hex (i), !=, cs_palette_class_hex (j));
  /* viridis: 0 -> #440154, 0.5 -> #21918C, 1 -> #FDE725 (matplotlib's table) */
  cs_palette_scale_color (0.0, &c);
  cs_palette_to_hex (&c, hex);
  g_assert_cmpstr (hex, ==, "#440154");
  cs_palette_scale_color (0.5, &c);
  cs_palette_to_hex (&c, hex);
  g_assert_cmpstr (hex, ==, "#21918C");
  cs_palette_scale_color (7.0, &c);   /* clamped */
  cs_palette_to_hex (&c, hex);
  g_assert_cmpstr (hex, ==, "#FDE725");
}


/* Dark pixels (text) inside the box @r (grown by -3 pt so the outline is left out) of a layout
 * drawn at @scale. */
static guint
dark_inside (const CsLayout *l, const CsRect *r, double scale)
{
  int w = 400, h = 300;
  cairo_surface_t *s = cairo_image_surface_create (CAIRO_FORMAT_ARGB32, w, h);
  cairo_t *cr = cairo_create (s);
  CsView v = { scale, 0, 0 };
  CsRect box = *r;
  double x0, y0, x1, y1;
  guint n = 0;

  cs_view_center_on (&v, l, &box, w, h);
  cairo_set_source_rgb (cr, 1, 1, 1);
  cairo_paint (cr);
  cs_draw_layout (cr, l, &v, w, h, 0);
  cairo_destroy (cr);
  cs_view_to_px (&v, l, r->x0 + 3, r->y1 - 3, &x0, &y0);
  cs_view_to_px (&v, l, r->x1 - 3, r->y0 + 3, &x1, &y1);
  for (int y = MAX (0, (int) ceil (y0)); y < MIN (h, (int) y1); y++)
    for (int x = MAX (0, (int) ceil (x0)); x < MIN (w, (int) x1); x++)
      {
        int rgb[3];
        pixel (s, x, y, rgb);
        if (rgb[0] < 0x80 && rgb[1] < 0x80 && rgb[2] < 0x80)
          n++;
      }
  cairo_surface_destroy (s);
  return n;
}

/* Level of detail: an op's 10 pt label is drawn at 100 % (10 px) and not at 50 % (5 px, under
 * the 6 px that still reads); a collapsed group's name is drawn at 50 % too, at 9 px. */
static void
test_level_of_detail (void)
{
  g_autoptr(CsLayout) seed = seed_layout ();
  GString *text = g_string_new ("def computation(x):\n  # x: \"cuda:0 f32[4]\"\n"
                                "  t0 = prims.neg(x)  # t0: \"cuda:0 f32[4]\"\n");
  g_autoptr(CsTrace) chain = NULL;
  g_autoptr(CsLayout) chunks = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *src = NULL;
  gint mm = -1, grp = -1;

  for (guint i = 0; i < seed->n_nodes; i++)
    if (g_strcmp0 (seed->nodes[i].label, "matmul") == 0)
      mm = (gint) i;
  g_assert_cmpint (mm, >=, 0);
  g_assert_cmpuint (dark_inside (seed, &seed->nodes[mm].box, 1.0), >, 0);
  g_assert_cmpuint (dark_inside (seed, &seed->nodes[mm].box, 0.5), ==, 0);

  for (guint i = 1; i <= 600; i++)
    g_string_append_printf (text, "  t%u = prims.neg(t%u)  # t%u: \"cuda:0 f32[4]\"\n", i, i - 1, i);
  g_string_append (text, "  return t600\n");
  src = g_string_free (text, FALSE);
  chain = cs_parse_trace (src, "chain", &error);
  g_assert_no_error (error);
  chunks = cs_layout_new (chain, NULL, NULL, &error);
  g_assert_no_error (error);
  for (guint i = 0; i < chunks->n_nodes; i++)
    if (chunks->nodes[i].kind == CS_LAYOUT_NODE_GROUP)
      grp = (gint) i;
  g_assert_cmpint (grp, >=, 0);
  g_assert_cmpuint (dark_inside (chunks, &chunks->nodes[grp].box, 0.5), >, 0);
}

/* Point @t of cubic segment @k of @e's bézier. */
static CsPoint
bezier_at (const CsLayoutEdge *e, guint k, double t)
{
  const CsPoint *p = e->points + 3 * k;
  double u = 1 - t, a = u * u * u, b = 3 * u * u * t, c = 3 * u * t * t, d = t * t * t;

  return (CsPoint) { a * p[0].x + b * p[1].x + c * p[2].x + d * p[3].x,
                     a * p[0].y + b * p[1].y + c * p[2].y + d * p[3].y };
}

/* Width and height in points of @text in @family at @size pt (bold or not), as cs-draw.c
 * measures its labels. */
static void
text_extent (const char *family, const char *text, double size, gboolean bold, double *w,
             double *h)
{
  cairo_surface_t *s = cairo_image_surface_create (CAIRO_FORMAT_ARGB32, 1, 1);
  cairo_t *cr = cairo_create (s);
  PangoLayout *pl = pango_cairo_create_layout (cr);
  PangoFontDescription *fd = pango_font_description_new ();
  PangoRectangle logical;

  pango_font_description_set_family (fd, family);
  pango_font_description_set_absolute_size (fd, size * PANGO_SCALE);
  pango_font_description_set_weight (fd, bold ? PANGO_WEIGHT_BOLD : PANGO_WEIGHT_NORMAL);
  pango_layout_set_font_description (pl, fd);
  pango_layout_set_text (pl, text, -1);
  pango_layout_get_extents (pl, NULL, &logical);
  *w = (double) logical.width / PANGO_SCALE;
  *h = (double) logical.height / PANGO_SCALE;
  pango_font_description_free (fd);
  g_object_unref (pl);
  cairo_destroy (cr);
  cairo_surface_destroy (s);
}

/* No edge crosses a region's title: a region of one small op is as wide as its title, so the
 * edge from the input into the op enters through the title block (the bold name and the
 * stats line under it, left-aligned 6 pt in, centred on title_pos); wherever its bézier lies
 * inside that block the pixel is not the edge's colour (the title is drawn over the edges on
 * an opaque plate), at 100 % and 300 %. */
static void
test_title_over_edges (void)
{
  static const char src[] =
    "def computation(a):\n"
    "  # a: \"cuda:0 bf16[8, 16]\"\n"
    "  [t1] = nvFusion0(a)\n"
    "    # t1 = prims.neg(a)  # t1: \"cuda:0 bf16[8, 16]\"\n"
    "  return t1\n";
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTrace) t = cs_parse_trace (src, "title", &error);
  g_autoptr(CsLayout) l = NULL;
  const CsLayoutCluster *c = NULL;
  const double scales[] = { 1.0, 3.0 };

  g_assert_no_error (error);
  l = cs_layout_new (t, NULL, NULL, &error);
  g_assert_no_error (error);
  for (guint i = 0; i < l->n_clusters; i++)
    if (l->clusters[i].kind == CS_LAYOUT_CLUSTER_REGION)
      c = &l->clusters[i];
  g_assert_nonnull (c);
  for (guint si = 0; si < G_N_ELEMENTS (scales); si++)
    {
      double sc = scales[si], fs = l->font_size_pt;
      CsView view = { sc, 20, 20 };
      int w = (int) ((l->bb.x1 - l->bb.x0) * sc + 40), h = (int) ((l->bb.y1 - l->bb.y0) * sc + 40);
      cairo_surface_t *s = paint (l, &view, w, h, 0);
      double tw, th, sw, sh;
      CsRect band;
      guint checked = 0;

      g_assert_nonnull (c->subtitle);
      text_extent (l->font_family, c->title, fs, TRUE, &tw, &th);
      text_extent (l->font_family, c->subtitle, fs * 0.85, FALSE, &sw, &sh);
      band = (CsRect) { c->box.x0 + 6, c->title_pos.y - (th + sh) / 2,
                        c->box.x0 + 6 + MAX (tw, sw), c->title_pos.y + (th + sh) / 2 };

      for (guint j = 0; j < l->n_edges; j++)
        {
          const CsLayoutEdge *e = &l->edges[j];
          const char *hex = cs_palette_class_hex (cs_palette_class_for_dtype (e->dtype));

          for (guint k = 0; 3 * k + 3 < e->n_points; k++)
            for (int q = 0; q <= 200; q++)
              {
                CsPoint m = bezier_at (e, k, q / 200.0);
                double x, y;

                if (m.x < band.x0 || m.x > band.x1 || m.y < band.y0 || m.y > band.y1)
                  continue;
                cs_view_to_px (&view, l, m.x, m.y, &x, &y);
                if (near_pixel (s, x, y, 0, hex, 40))
                  g_error ("at %.0f %%, the edge %u crosses the title '%s' at (%.1f, %.1f) px",
                           sc * 100, j, c->title, x, y);
                checked++;
              }
        }
      g_test_message ("%.0f %%: %u points of edges on the title checked", sc * 100, checked);
      g_assert_cmpuint (checked, >, 0);
      cairo_surface_destroy (s);
    }
}

static gboolean
rects_overlap (const CsRect *a, const CsRect *b)
{
  return a->x0 < b->x1 && b->x0 < a->x1 && a->y0 < b->y1 && b->y0 < a->y1;
}

/* The 8-block LLaMA under matmul=upcast-f32, marked with its diff to matmul=native as the app
 * draws it (layers folded): the casts removed are ghosts beside the nodes they were made for,
 * several on the folded layers' node (one per dtype, "\u221221 casts" on the \u2192 f32 one).
 * No ghost meets a node or another ghost, and no ghost's mark label (as the painter measures
 * it) meets another's, a node or a ghost: the label of one ghost used to sit under the next
 * ghost, and a ghost on the saved t_norm_weight output node. */
static void
test_ghosts_apart (void)
{
  const char *dir = g_getenv ("CS_SHARED_TRACES");
  g_autofree char *path = dir ? g_build_filename (dir, "thunder_llama_stack_initial.txt", NULL) : NULL;
  g_autoptr(CsTraceList) list = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(CsPipeline) native = NULL;
  g_autoptr(CsPipeline) upcast = NULL;
  CsPolicy policy;

  if (path == NULL || !g_file_test (path, G_FILE_TEST_IS_REGULAR))
    {
      g_test_skip ("thunder_llama_stack_initial.txt not found");
      return;
    }
  list = cs_parse_file (path, &error);
  g_assert_no_error (error);
  cs_policy_init_default (&policy);
  native = cs_pipeline_run (g_ptr_array_index (list->traces, 0), &policy, NULL, &error);
  g_assert_no_error (error);
  g_assert_true (cs_policy_set (&policy, "matmul", "upcast-f32", &error));
  upcast = cs_pipeline_run (g_ptr_array_index (list->traces, 0), &policy, NULL, &error);
  g_assert_no_error (error);
  for (guint fam = 0; fam < 2; fam++)
    {
      CsTrace *newer = fam == 0 ? cs_pipeline_get_forward (upcast) : cs_pipeline_get_backward (upcast);
      CsTrace *older = fam == 0 ? cs_pipeline_get_forward (native) : cs_pipeline_get_backward (native);
      g_autoptr(CsLayout) l = NULL;
      g_autofree CsRect *labels = NULL;
      CsRenderOptions o;
      CsLayoutDiffStats st;
      guint first, on_fold = 0;

      cs_render_options_init (&o);
      l = cs_layout_new (newer, &o, NULL, &error);
      cs_render_options_clear (&o);
      g_assert_no_error (error);
      cs_layout_mark_diff (l, older, TRUE, &st);
      g_test_message ("%s: %u ghosts, %u casts removed", fam ? "backward" : "forward",
                      l->n_ghosts, st.casts_removed);
      g_assert_cmpuint (l->n_ghosts, >=, 2);
      first = l->n_nodes - l->n_ghosts;
      labels = g_new0 (CsRect, l->n_nodes);
      for (guint i = first; i < l->n_nodes; i++)
        {
          g_assert_cmpint (l->nodes[i].kind, ==, CS_LAYOUT_NODE_GHOST);
          g_assert_true (cs_draw_mark_label_box (l, &l->nodes[i], &labels[i]));
          g_assert_cmpfloat (labels[i].x1, >, labels[i].x0);
          on_fold += l->nodes[l->nodes[i].target].kind == CS_LAYOUT_NODE_GROUP;
        }
      if (fam == 0)
        g_assert_cmpuint (on_fold, >=, 2);
      for (guint i = first; i < l->n_nodes; i++)
        for (guint j = 0; j < l->n_nodes; j++)
          {
            if (j == i)
              continue;
            if (rects_overlap (&l->nodes[i].box, &l->nodes[j].box))
              g_error ("%s: ghost %u (%s) meets node %u (%s)", fam ? "backward" : "forward", i,
                       l->nodes[i].label, j, l->nodes[j].label);
            if (rects_overlap (&labels[i], &l->nodes[j].box))
              g_error ("%s: the mark label of ghost %u (%s) meets node %u (%s)",
                       fam ? "backward" : "forward", i, l->nodes[i].label, j, l->nodes[j].label);
            if (j >= first && rects_overlap (&labels[i], &labels[j]))
              g_error ("%s: the mark labels of ghosts %u (%s) and %u (%s) meet",
                       fam ? "backward" : "forward", i, l->nodes[i].label, j, l->nodes[j].label);
          }
    }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, G_TEST_OPTION_ISOLATE_DIRS, NULL);
  g_test_add_func ("/render/draw/palette", test_palette);
  g_test_add_func ("/render/draw/view", test_view);
  g_test_add_func ("/render/draw/edges-and-nodes", test_edges_and_nodes);
  g_test_add_func ("/render/draw/legend-png", test_legend_png);
  g_test_add_func ("/render/draw/value-overlay", test_value_overlay);
  g_test_add_func ("/render/draw/precision-lens", test_precision_lens);
  g_test_add_func ("/render/draw/exports", test_exports);
  g_test_add_func ("/render/draw/level-of-detail", test_level_of_detail);
  g_test_add_func ("/render/draw/title-over-edges", test_title_over_edges);
  g_test_add_func ("/render/draw/ghosts-apart", test_ghosts_apart);
  return g_test_run ();
}
