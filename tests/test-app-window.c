/* test-app-window.c: the castscope window under Xvfb (GSK_RENDERER=cairo, GTK_A11Y=none).
 *
 * Drives CsWindow the way a user does (the policy dropdown, window actions) and checks what
 * the window shows: the trace text, the status bar, the graph's badges and the diff bar.
 * Expected values are worked out by hand from the seed sample, Thunder's
 * foo(a, b, w) = matmul(a + b, w) in bf16 (../shared/traces/seed_foo_fwd.txt):
 *   - default policy: one matmul in the forward (bf16 x bf16: tensor cores) and two in the
 *     backward (the VJP of matmul: grad_a = g @ w^T, grad_w = a^T @ g), all bf16;
 *   - matmul=upcast-f32: every matmul gets f32 operands (no tensor-core badge, an f32 badge),
 *     and the forward gains two casts that no pass can remove: w -> f32 (w is a trace input)
 *     and the matmul's f32 result -> bf16 (the trace returns bf16).  Redundant-cast removal
 *     may drop at most one old cast, the bf16 round trip of a + b before the matmul, so the
 *     forward holds at least one cast more than before.
 * Screenshots go to $CS_SCREENSHOT_DIR (default: the test build folder).
 */
#include "cs-config.h"

#include <math.h>
#include <string.h>

#include <glib/gstdio.h>
#include <gtk/gtk.h>

#include "cs-application.h"
#include "cs-analysis.h"
#include "cs-parse.h"
#include "cs-print.h"
#include "cs-window-private.h"
#include "cs-diff.h"
#include "cs-lens.h"
#include "cs-ops.h"

#define WAIT_TIMEOUT_S 120

static gboolean
timeout_cb (gpointer data)
{
  gboolean *flag = data;

  *flag = TRUE;
  return G_SOURCE_REMOVE;
}

/* Spins the main loop until the window has no job in flight and both views are laid out. */
/* Runs the main loop for 50 ms (about three frames). */
static void
wait_frame (void)
{
  gboolean done = FALSE;

  g_timeout_add (50, timeout_cb, &done);
  while (!done)
    g_main_context_iteration (NULL, TRUE);
}

static gboolean text_selection_visible (CsWindow *win);

static void
wait_idle (CsWindow *win)
{
  gboolean timed_out = FALSE;
  guint id = g_timeout_add_seconds (WAIT_TIMEOUT_S, timeout_cb, &timed_out);

  /* Let queued work start first (bounded: animations keep the context busy). */
  for (int i = 0; i < 50 && g_main_context_iteration (NULL, FALSE); i++)
    ;
  while (!timed_out && _cs_window_is_busy (win))
    g_main_context_iteration (NULL, TRUE);
  if (!timed_out)
    g_source_remove (id);
  g_assert_false (timed_out);
  /* Two frames so that the graph is drawn with the new layout. */
  for (int i = 0; i < 2; i++)
    wait_frame ();
}

static guint
count_substr (const char *text, const char *needle)
{
  guint n = 0;

  for (const char *p = strstr (text, needle); p != NULL; p = strstr (p + 1, needle))
    n++;
  return n;
}

static char *
screenshot_dir (void)
{
  const char *dir = g_getenv ("CS_SCREENSHOT_DIR");

  if (dir != NULL && dir[0] != '\0')
    return g_strdup (dir);
  return g_build_filename (g_getenv ("G_TEST_BUILDDIR") ? g_getenv ("G_TEST_BUILDDIR") : ".",
                           "screenshots", NULL);
}

/* Renders @widget with its own renderer into a PNG (reference/recipes.md 2(b)). */
static void
save_screenshot (GtkWidget *widget, const char *name)
{
  g_autofree char *dir = screenshot_dir ();
  g_autofree char *path = g_build_filename (dir, name, NULL);
  g_autoptr(GdkPaintable) paintable = gtk_widget_paintable_new (widget);
  GtkSnapshot *snapshot = gtk_snapshot_new ();
  int w = gtk_widget_get_width (widget);
  int h = gtk_widget_get_height (widget);
  g_autoptr(GskRenderNode) node = NULL;
  g_autoptr(GdkTexture) texture = NULL;
  GskRenderer *renderer = gtk_native_get_renderer (gtk_widget_get_native (widget));

  g_assert_cmpint (w, >, 0);
  g_assert_cmpint (h, >, 0);
  g_mkdir_with_parents (dir, 0755);
  /* A widget paintable is empty until the window is mapped and has drawn a frame (slow under
   * xvfb with sanitizers): retry for up to WAIT_TIMEOUT_S, one 50 ms frame at a time. */
  for (guint attempt = 0; attempt < WAIT_TIMEOUT_S * 20; attempt++)
    {
      gdk_paintable_snapshot (paintable, snapshot, w, h);
      node = gtk_snapshot_free_to_node (snapshot);
      if (node != NULL)
        break;
      snapshot = gtk_snapshot_new ();
      wait_frame ();
    }
  g_assert_nonnull (node);
  texture = gsk_renderer_render_texture (renderer, node, &GRAPHENE_RECT_INIT (0, 0, w, h));
  g_assert_true (gdk_texture_save_to_png (texture, path));
  g_test_message ("screenshot: %s (%dx%d)", path, w, h);
}

/* The bundled seed (data/seed_foo.txt), else the same trace from ../shared/traces. */
static char *
seed_path (void)
{
  char *path = cs_application_dup_seed_path ();
  const char *shared = g_getenv ("CS_SHARED_TRACES");

  if (path == NULL && shared != NULL)
    {
      path = g_build_filename (shared, "seed_foo_fwd.txt", NULL);
      if (!g_file_test (path, G_FILE_TEST_IS_REGULAR))
        g_clear_pointer (&path, g_free);
    }
  return path;
}

typedef struct
{
  CsApplication *app;
  CsWindow      *win;
} Fixture;

static void
fixture_setup (Fixture *fx, gconstpointer data)
{
  g_autoptr(GError) error = NULL;

  fx->app = cs_application_new (G_APPLICATION_NON_UNIQUE);
  g_assert_true (g_application_register (G_APPLICATION (fx->app), NULL, &error));
  g_assert_no_error (error);
  fx->win = cs_window_new (fx->app);
  gtk_window_set_default_size (GTK_WINDOW (fx->win), 1440, 880);
  gtk_window_present (GTK_WINDOW (fx->win));
}

static void
fixture_teardown (Fixture *fx, gconstpointer data)
{
  if (fx->win != NULL)
    gtk_window_destroy (GTK_WINDOW (fx->win));
  for (int i = 0; i < 50 && g_main_context_iteration (NULL, FALSE); i++)
    ;
  g_clear_object (&fx->app);
}

static gboolean
open_seed (Fixture *fx)
{
  g_autofree char *seed = seed_path ();
  g_autoptr(GFile) file = NULL;

  if (seed == NULL)
    {
      g_test_skip ("data/seed_foo.txt not found");
      return FALSE;
    }
  file = g_file_new_for_path (seed);
  cs_window_open_file (fx->win, file);
  wait_idle (fx->win);
  if (fx->win->analysis == NULL)
    g_test_message ("error bar: %s", gtk_label_get_text (fx->win->error_label));
  g_assert_nonnull (fx->win->analysis);
  return TRUE;
}

static GtkDropDown *
policy_dropdown (CsWindow *win, const char *key)
{
  for (guint k = 0; k < win->n_policy_keys; k++)
    if (strcmp (cs_policy_keys[k], key) == 0)
      return win->policy_dropdowns[k];
  g_assert_not_reached ();
  return NULL;
}

static guint
value_index (const char *key, const char *value)
{
  const char * const *values = cs_policy_values (key);

  for (guint i = 0; values[i] != NULL; i++)
    if (strcmp (values[i], value) == 0)
      return i;
  g_assert_not_reached ();
  return 0;
}

static void
show_family (CsWindow *win, const char *name)
{
  g_action_group_activate_action (G_ACTION_GROUP (win), "show", g_variant_new_string (name));
  wait_idle (win);
}

/* The acceptance test: matmul=upcast-f32 through the dropdown adds casts and turns the
 * tensor-core badges into f32 badges, forward and backward; the diff bar says so. */
static void
test_matmul_upcast (Fixture *fx, gconstpointer data)
{
  CsGraphView *fwd = fx->win->forward_view;
  CsGraphView *bwd = fx->win->backward_view;
  g_autofree char *text_before = NULL;
  g_autofree char *text_after = NULL;
  g_autoptr(GVariant) state = NULL;
  guint casts_before, casts_after;
  CsLayoutDiffStats stats;
  graphene_rect_t knob_before, knob_after, bar, canvas, canvas_before;

  if (!open_seed (fx))
    return;

  /* GtkApplication found the shortcuts window in the resource bundle. */
  g_assert_nonnull (gtk_application_window_get_help_overlay (GTK_APPLICATION_WINDOW (fx->win)));

  /* Default policy. */
  show_family (fx->win, "forward");
  g_assert_cmpstr (cs_policy_get (&fx->win->policy, "matmul"), ==, "native");
  text_before = _cs_window_dup_trace_text (fx->win);
  casts_before = count_substr (text_before, "prims.convert_element_type(");
  g_assert_cmpuint (cs_graph_view_count_badges (fwd, TRUE), ==, 1);
  g_assert_cmpuint (cs_graph_view_count_badges (fwd, FALSE), ==, 0);
  g_assert_false (gtk_info_bar_get_revealed (fx->win->diff_bar));
  _cs_window_find_next (fx->win, "matmul", TRUE);
  wait_idle (fx->win);
  save_screenshot (GTK_WIDGET (fx->win), "castscope-default.png");

  show_family (fx->win, "backward");
  g_assert_cmpuint (cs_graph_view_count_badges (bwd, TRUE), ==, 2);
  g_assert_cmpuint (cs_graph_view_count_badges (bwd, FALSE), ==, 0);
  show_family (fx->win, "forward");

  /* The user picks "upcast-f32" in the Matmul precision dropdown. */
  g_assert_true (gtk_widget_compute_bounds (GTK_WIDGET (policy_dropdown (fx->win, "matmul")),
                                            GTK_WIDGET (fx->win), &knob_before));
  g_assert_true (gtk_widget_compute_bounds (GTK_WIDGET (fwd), GTK_WIDGET (fx->win), &canvas_before));
  gtk_drop_down_set_selected (policy_dropdown (fx->win, "matmul"),
                              value_index ("matmul", "upcast-f32"));
  state = g_action_group_get_action_state (G_ACTION_GROUP (fx->win), "policy-matmul");
  g_assert_cmpstr (g_variant_get_string (state, NULL), ==, "upcast-f32");
  wait_idle (fx->win);

  g_assert_cmpstr (cs_policy_get (cs_analysis_get_policy (fx->win->analysis), "matmul"), ==,
                   "upcast-f32");
  text_after = _cs_window_dup_trace_text (fx->win);
  casts_after = count_substr (text_after, "prims.convert_element_type(");
  g_test_message ("forward casts: %u -> %u", casts_before, casts_after);
  g_assert_cmpuint (casts_after, >=, casts_before + 1);
  g_assert_nonnull (strstr (text_after, "prims.convert_element_type(w, dtypes.float32)"));
  g_assert_null (strstr (text_before, "prims.convert_element_type(w, dtypes.float32)"));
  g_assert_cmpuint (cs_graph_view_count_badges (fwd, TRUE), ==, 0);
  g_assert_cmpuint (cs_graph_view_count_badges (fwd, FALSE), ==, 1);

  /* The diff is shown until dismissed, and the graph marks the added casts. */
  g_assert_true (gtk_info_bar_get_revealed (fx->win->diff_bar));
  /* at the top of the side panel: the knob just used has not moved, the canvas keeps its
   * size, and the bar does not cover any of the canvas (both in window coordinates) */
  g_assert_true (gtk_widget_compute_bounds (GTK_WIDGET (policy_dropdown (fx->win, "matmul")),
                                            GTK_WIDGET (fx->win), &knob_after));
  g_assert_cmpfloat (knob_after.origin.y, ==, knob_before.origin.y);
  g_assert_cmpfloat (knob_after.origin.x, ==, knob_before.origin.x);
  g_assert_true (gtk_widget_compute_bounds (GTK_WIDGET (fx->win->diff_bar), GTK_WIDGET (fx->win), &bar));
  g_assert_true (gtk_widget_compute_bounds (GTK_WIDGET (fwd), GTK_WIDGET (fx->win), &canvas));
  g_test_message ("diff bar %.0f,%.0f %.0fx%.0f; canvas %.0f,%.0f %.0fx%.0f (before %.0fx%.0f)",
                  bar.origin.x, bar.origin.y, bar.size.width, bar.size.height,
                  canvas.origin.x, canvas.origin.y, canvas.size.width, canvas.size.height,
                  canvas_before.size.width, canvas_before.size.height);
  g_assert_cmpfloat (bar.size.height, >, 0);
  g_assert_cmpfloat (bar.size.width, >, 0);
  g_assert_false (graphene_rect_intersection (&bar, &canvas, NULL));
  g_assert_cmpfloat (bar.origin.x, >=, canvas.origin.x + canvas.size.width);
  g_assert_cmpfloat (canvas.size.width, ==, canvas_before.size.width);
  g_assert_cmpfloat (canvas.size.height, ==, canvas_before.size.height);
  g_assert_cmpfloat (canvas.origin.x, ==, canvas_before.origin.x);
  g_assert_cmpfloat (canvas.origin.y, ==, canvas_before.origin.y);
  g_assert_true (cs_graph_view_get_diff_stats (fwd, &stats));
  g_assert_cmpuint (stats.casts_added, >=, 2);
  _cs_window_find_next (fx->win, "matmul", TRUE);
  wait_idle (fx->win);
  save_screenshot (GTK_WIDGET (fx->win), "castscope-upcast-diff.png");

  show_family (fx->win, "backward");
  g_assert_cmpuint (cs_graph_view_count_badges (bwd, TRUE), ==, 0);
  g_assert_cmpuint (cs_graph_view_count_badges (bwd, FALSE), ==, 2);

  g_action_group_activate_action (G_ACTION_GROUP (fx->win), "dismiss-diff", NULL);
  g_assert_false (gtk_info_bar_get_revealed (fx->win->diff_bar));
  g_assert_false (cs_graph_view_get_diff_stats (bwd, &stats));

  /* Back to native through the action (the menu's radio item does this). */
  g_action_group_change_action_state (G_ACTION_GROUP (fx->win), "policy-matmul",
                                      g_variant_new_string ("native"));
  g_assert_cmpuint (gtk_drop_down_get_selected (policy_dropdown (fx->win, "matmul")), ==,
                    value_index ("matmul", "native"));
  wait_idle (fx->win);
  g_assert_cmpuint (cs_graph_view_count_badges (bwd, TRUE), ==, 2);
}

/* Selecting a node in the graph highlights its statement in the text, and the reverse. */
static void
test_selection_sync (Fixture *fx, gconstpointer data)
{
  CsTrace *trace;
  const CsStmt *matmul = NULL;

  if (!open_seed (fx))
    return;
  show_family (fx->win, "forward");
  trace = _cs_window_get_shown_trace (fx->win);
  g_assert_nonnull (trace);
  for (guint i = 0; i < trace->n_stmts; i++)
    if (trace->stmts[i]->kind == CS_STMT_CALL && strstr (trace->stmts[i]->callee, "matmul"))
      matmul = trace->stmts[i];
  g_assert_nonnull (matmul);

  /* Find by op name selects the matmul node. */
  _cs_window_find_next (fx->win, "matmul", TRUE);
  g_assert_cmpuint (cs_graph_view_get_selected (fx->win->forward_view), ==, matmul->id);
  {
    const char *details = gtk_label_get_text (fx->win->details_label);
    g_assert_nonnull (strstr (details, matmul->callee));
    g_assert_nonnull (strstr (details, "bf16[8, 16]"));
  }
  /* The highlighted text is the matmul's line. */
  {
    guint first, last;
    g_autofree char *line = NULL;

    g_assert_true (cs_line_view_get_highlight (fx->win->trace_view, &first, &last));
    g_assert_cmpuint (first, ==, last);
    line = cs_line_view_dup_line (fx->win->trace_view, first);
    g_assert_nonnull (strstr (line, "matmul("));
  }
  /* Keyboard: Shift+Tab from the matmul selects the statement before it in the trace (the
   * nvFusion0 region computing a + b), and the text follows. */
  {
    guint32 before = 0;

    for (guint i = 0; i < trace->n_stmts && trace->stmts[i] != matmul; i++)
      if (trace->stmts[i]->kind == CS_STMT_CALL)
        before = trace->stmts[i]->id;
    g_assert_cmpuint (before, !=, 0);
    g_assert_true (cs_graph_view_move_selection (fx->win->forward_view, GTK_DIR_TAB_BACKWARD));
    g_assert_cmpuint (cs_graph_view_get_selected (fx->win->forward_view), ==, before);
    g_assert_nonnull (strstr (gtk_label_get_text (fx->win->details_label), "nvFusion"));
  }
  /* Arrow down from the region reaches a node drawn below it: the matmul it feeds. */
  g_assert_true (cs_graph_view_move_selection (fx->win->forward_view, GTK_DIR_DOWN));
  g_assert_cmpuint (cs_graph_view_get_selected (fx->win->forward_view), ==, matmul->id);
}

/* A file that is not a trace: the error bar names file:line, nothing crashes. */
static void
test_bad_file (Fixture *fx, gconstpointer data)
{
  g_autofree char *dir = g_dir_make_tmp ("cs-app-XXXXXX", NULL);
  g_autofree char *path = g_build_filename (dir, "bad.txt", NULL);
  g_autoptr(GFile) file = NULL;
  const char *msg;

  g_assert_true (g_file_set_contents (path, "def computation(a):\n  t0 = ltorch.add(a,\n", -1, NULL));
  file = g_file_new_for_path (path);
  cs_window_open_file (fx->win, file);
  wait_idle (fx->win);
  g_assert_true (gtk_info_bar_get_revealed (fx->win->error_bar));
  msg = gtk_label_get_text (fx->win->error_label);
  g_test_message ("error shown: %s", msg);
  g_assert_nonnull (strstr (msg, "bad.txt:"));
  g_assert_null (fx->win->traces);

  /* A missing file too. */
  {
    g_autofree char *missing = g_build_filename (dir, "missing.txt", NULL);
    g_autoptr(GFile) mfile = g_file_new_for_path (missing);

    gtk_info_bar_set_revealed (fx->win->error_bar, FALSE);
    cs_window_open_file (fx->win, mfile);
    wait_idle (fx->win);
    g_assert_true (gtk_info_bar_get_revealed (fx->win->error_bar));
    g_assert_nonnull (strstr (gtk_label_get_text (fx->win->error_label), "missing.txt"));
  }
  g_unlink (path);
  g_rmdir (dir);
}

/* A trace whose shapes do not fit (data/mlp_gelu.txt with w2 declared [64, 128]: the second
 * linear, line 17, reads t1 [32, 256]) is refused when it is loaded, before any pass: one
 * message with file:17:3, once, and the window keeps the trace it showed (the same analysis,
 * file and title). */
static void
test_bad_shapes (Fixture *fx, gconstpointer data)
{
  g_autofree char *src = g_build_filename (g_getenv ("CS_DATA_DIR"), "mlp_gelu.txt", NULL);
  g_autofree char *dir = g_dir_make_tmp ("cs-app-XXXXXX", NULL);
  g_autofree char *path = g_build_filename (dir, "mlp_bad_w2.txt", NULL);
  g_autofree char *text = NULL, *bad = NULL, *want = NULL, *title = NULL;
  g_auto(GStrv) parts = NULL;
  g_autoptr(GFile) file = NULL;
  CsAnalysis *shown;
  GFile *shown_file;
  const char *msg;

  if (!open_seed (fx))
    return;
  shown = fx->win->analysis;
  shown_file = fx->win->file;
  title = g_strdup (gtk_window_get_title (GTK_WINDOW (fx->win)));
  g_assert_true (g_file_get_contents (src, &text, NULL, NULL));
  parts = g_strsplit (text, "# w2: \"cuda:0 bf16[64, 256]\"", -1);
  g_assert_cmpuint (g_strv_length (parts), ==, 2);
  bad = g_strjoinv ("# w2: \"cuda:0 bf16[64, 128]\"", parts);
  g_assert_true (g_file_set_contents (path, bad, -1, NULL));
  file = g_file_new_for_path (path);
  cs_window_open_file (fx->win, file);
  wait_idle (fx->win);
  g_assert_true (gtk_info_bar_get_revealed (fx->win->error_bar));
  msg = gtk_label_get_text (fx->win->error_label);
  g_test_message ("error shown: %s", msg);
  want = g_strdup_printf ("%s:17:3: ltorch.linear: shapes [32, 256] and [64, 128] cannot be "
                          "multiplied (weight is [out, in]); its tensor arguments: t1 bf16[32, 256], "
                          "w2 bf16[64, 128], b2 bf16[64]", path);
  g_assert_cmpstr (msg, ==, want);
  g_assert_cmpuint (count_substr (msg, "cannot be multiplied"), ==, 1);
  g_assert_true (fx->win->analysis == shown);
  g_assert_true (fx->win->file == shown_file);
  g_assert_cmpstr (gtk_window_get_title (GTK_WINDOW (fx->win)), ==, title);
  g_unlink (path);
  g_rmdir (dir);
}

/* Export writes the current view through render/'s painter. */
static void
test_export (Fixture *fx, gconstpointer data)
{
  g_autofree char *dir = g_dir_make_tmp ("cs-app-XXXXXX", NULL);
  const char *exts[] = { "svg", "png", "pdf" };

  if (!open_seed (fx))
    return;
  for (gsize i = 0; i < G_N_ELEMENTS (exts); i++)
    {
      g_autofree char *name = g_strconcat ("forward.", exts[i], NULL);
      g_autofree char *path = g_build_filename (dir, name, NULL);
      g_autofree char *contents = NULL;
      gsize len = 0;
      g_autoptr(GError) error = NULL;

      g_assert_true (cs_graph_view_export (fx->win->forward_view, path, &error));
      g_assert_no_error (error);
      g_assert_true (g_file_get_contents (path, &contents, &len, NULL));
      g_assert_cmpuint (len, >, 100);
      if (i == 0)
        g_assert_nonnull (strstr (contents, "<svg"));
      else if (i == 1)
        g_assert_cmpmem (contents, 4, "\x89PNG", 4);
      else
        g_assert_cmpmem (contents, 5, "%PDF-", 5);
      g_unlink (path);
    }
  {
    g_autoptr(GError) error = NULL;
    g_autofree char *path = g_build_filename (dir, "forward.bmp", NULL);

    g_assert_false (cs_graph_view_export (fx->win->forward_view, path, &error));
    g_assert_nonnull (error);
  }
  g_rmdir (dir);
}

/* Run on the CPU reference: every returned float tensor gets the verdict's measures against
 * f64 (err, ref_err, ratio), drawn as heat in the node fill while the dtype stays on edges and
 * borders.  On the CPU the reference error is the rounding floor, f64 rounded to nearest in the
 * tensor's dtype: no value stored in that dtype is closer to f64 element by element, so for every
 * bf16 output err >= ref_err, ratio >= 1.  The seed's outputs pass through a few roundings and
 * a 16-term dot product, so the ratio stays far below 64 (no blow-up). */
static void
test_run_overlay (Fixture *fx, gconstpointer data)
{
  CsLayout *layout;
  guint n_values = 0;
  gboolean gpu, t5_node = FALSE;
  double ratio, err, ref_err;

  if (!open_seed (fx))
    return;
  show_family (fx->win, "forward");
  g_action_group_activate_action (G_ACTION_GROUP (fx->win), "run", NULL);
  wait_idle (fx->win);
  if (gtk_info_bar_get_revealed (fx->win->error_bar))
    g_test_message ("error bar: %s", gtk_label_get_text (fx->win->error_label));
  g_assert_false (gtk_info_bar_get_revealed (fx->win->error_bar));
  g_test_message ("run: %s", fx->win->last_run_summary);
  /* On the GPU machine (CS_EXPECT_GPU=1, kernels module found) the run must take the CUDA
   * executor: the summary names the device and the CUDA-graph step time. */
  if (g_strcmp0 (g_getenv ("CS_EXPECT_GPU"), "1") == 0)
    g_assert_nonnull (strstr (fx->win->last_run_summary, "(CUDA graph)"));
  gpu = strstr (fx->win->last_run_summary, "(CUDA graph)") != NULL;
  for (guint h = CS_RUN_HEAT_RATIO; h <= CS_RUN_HEAT_REF_ERR; h++)
    {
      g_assert_nonnull (fx->win->run_edge_values[h][CS_FAMILY_FORWARD]);
      g_assert_nonnull (fx->win->run_edge_values[h][CS_FAMILY_BACKWARD]);
      /* The forward returns t5 (bf16[8, 16]) and the saved tensors. */
      g_assert_true (g_hash_table_contains (fx->win->run_edge_values[h][CS_FAMILY_FORWARD], "t5"));
    }
  ratio = *(double *) g_hash_table_lookup (fx->win->run_edge_values[CS_RUN_HEAT_RATIO][CS_FAMILY_FORWARD], "t5");
  err = *(double *) g_hash_table_lookup (fx->win->run_edge_values[CS_RUN_HEAT_ERR][CS_FAMILY_FORWARD], "t5");
  ref_err = *(double *) g_hash_table_lookup (fx->win->run_edge_values[CS_RUN_HEAT_REF_ERR][CS_FAMILY_FORWARD], "t5");
  g_test_message ("t5: err %g, ref_err %g, ratio %g", err, ref_err, ratio);
  g_assert_cmpfloat (ref_err, >, 0);
  g_assert_cmpfloat_with_epsilon (ratio, err / ref_err, 1e-12 * ratio);
  if (!gpu)
    g_assert_cmpfloat (ratio, >=, 1.0);
  g_assert_cmpfloat (ratio, <, 64.0);
  /* the CPU run is `castscope-cli run` with its default seed: the same t5 err and ref_err */
  if (!gpu && g_getenv ("CS_CLI") != NULL)
    {
      g_autofree char *seed = seed_path ();
      const char *argv[] = { g_getenv ("CS_CLI"), "run", seed, NULL };
      g_autofree char *out = NULL;
      const char *line;
      double cli_err = 0, cli_ref = 0;
      gint status = 0;

      g_assert_true (g_spawn_sync (NULL, (char **) argv, NULL, G_SPAWN_STDERR_TO_DEV_NULL, NULL, NULL,
                                   &out, NULL, &status, NULL));
      g_assert_cmpint (status, ==, 0);
      line = strstr (out, "  t5 ");
      g_assert_nonnull (line);
      g_assert_cmpint (sscanf (strstr (line, " err ") + 5, "%lf", &cli_err), ==, 1);
      g_assert_cmpint (sscanf (strstr (line, "ref_err ") + 8, "%lf", &cli_ref), ==, 1);
      g_test_message ("CLI t5: err %g, ref_err %g", cli_err, cli_ref);
      /* the CLI prints four significant digits */
      g_assert_cmpfloat_with_epsilon (err, cli_err, 6e-4 * cli_err);
      g_assert_cmpfloat_with_epsilon (ref_err, cli_ref, 6e-4 * cli_ref);
    }

  /* The default heat is the ratio, named as the CLI names it; t5's output node is filled with
   * it and its edges carry it, their colour still the dtype's. */
  g_assert_cmpuint (gtk_drop_down_get_selected (fx->win->overlay_dropdown), ==, CS_RUN_HEAT_RATIO);
  layout = cs_graph_view_get_layout (fx->win->forward_view);
  g_assert_nonnull (layout);
  g_assert_true (layout->has_scale);
  g_assert_cmpstr (layout->scale_title, ==, gpu ? "GPU ratio (err / ref_err)" : "ratio (err / ref_err)");
  for (guint i = 0; i < layout->n_edges; i++)
    if (layout->edges[i].has_value)
      {
        n_values++;
        g_assert_true (layout->edges[i].has_dtype);
        if (g_strcmp0 (layout->edges[i].proxy, "t5") == 0)
          g_assert_cmpfloat (layout->edges[i].value, ==, ratio);
      }
  g_assert_cmpuint (n_values, >, 0);
  for (guint i = 0; i < layout->n_nodes; i++)
    if (layout->nodes[i].kind == CS_LAYOUT_NODE_OUTPUT && g_strcmp0 (layout->nodes[i].name, "t5") == 0)
      {
        g_assert_true (layout->nodes[i].has_value);
        g_assert_cmpfloat (layout->nodes[i].value, ==, ratio);
        t5_node = TRUE;
      }
  g_assert_true (t5_node);
  /* The table lists them (a header row and at least one tensor row). */
  g_assert_nonnull (gtk_grid_get_child_at (fx->win->run_grid, 0, 1));
  save_screenshot (GTK_WIDGET (fx->win), "castscope-run-overlay.png");

  /* err: the same tensors, the key says so */
  gtk_drop_down_set_selected (fx->win->overlay_dropdown, CS_RUN_HEAT_ERR);
  layout = cs_graph_view_get_layout (fx->win->forward_view);
  g_assert_cmpstr (layout->scale_title, ==, gpu ? "GPU err (RMSE vs f64)" : "err (RMSE vs f64)");
  for (guint i = 0; i < layout->n_edges; i++)
    if (g_strcmp0 (layout->edges[i].proxy, "t5") == 0)
      g_assert_cmpfloat (layout->edges[i].value, ==, err);

  /* The time overlay colours the fusion region (GPU median, or the roofline estimate). */
  gtk_drop_down_set_selected (fx->win->overlay_dropdown, CS_RUN_HEAT_TIME);
  layout = cs_graph_view_get_layout (fx->win->forward_view);
  g_assert_true (layout->has_scale);
  g_assert_cmpuint (layout->n_clusters, >=, 1);
  {
    gboolean region_timed = FALSE;

    for (guint i = 0; i < layout->n_clusters; i++)
      if (layout->clusters[i].kind == CS_LAYOUT_CLUSTER_REGION && layout->clusters[i].has_value)
        {
          region_timed = TRUE;
          g_assert_cmpfloat (layout->clusters[i].value, >, 0);
        }
    g_assert_true (region_timed);
    for (guint i = 0; i < layout->n_edges; i++)
      g_assert_false (layout->edges[i].has_value);
  }
  gtk_drop_down_set_selected (fx->win->overlay_dropdown, CS_RUN_HEAT_RATIO);

  /* A policy change forgets the overlay (its numbers described other traces). */
  g_action_group_change_action_state (G_ACTION_GROUP (fx->win), "policy-matmul",
                                      g_variant_new_string ("upcast-f32"));
  wait_idle (fx->win);
  g_assert_null (fx->win->run_edge_values[CS_RUN_HEAT_RATIO][CS_FAMILY_FORWARD]);
}

/* Writes @text to a fresh temporary file and opens it in the window. */
static char *
open_text (Fixture *fx, const char *name, const char *text)
{
  g_autofree char *dir = g_dir_make_tmp ("cs-app-run-XXXXXX", NULL);
  char *path = g_build_filename (dir, name, NULL);
  g_autoptr(GFile) file = g_file_new_for_path (path);

  g_assert_true (g_file_set_contents (path, text, -1, NULL));
  cs_window_open_file (fx->win, file);
  wait_idle (fx->win);
  g_assert_nonnull (fx->win->analysis);
  return path;
}

static void
remove_text (const char *path)
{
  g_autofree char *dir = g_path_get_dirname (path);

  g_unlink (path);
  g_rmdir (dir);
}

/* Spins the main loop until @done (data) or @ms milliseconds pass; FALSE on time out. */
static gboolean
spin_until (gboolean (*done) (CsWindow *), CsWindow *win, guint ms)
{
  gboolean timed_out = FALSE;
  guint id = g_timeout_add (ms, timeout_cb, &timed_out);

  while (!timed_out && !done (win))
    g_main_context_iteration (NULL, TRUE);
  if (!timed_out)
    g_source_remove (id);
  return !timed_out;
}

static gboolean
progress_names_statement (CsWindow *win)
{
  const char *text = gtk_progress_bar_get_text (win->run_progress);

  return text != NULL && strstr (text, "statement") != NULL;
}

static gboolean
no_job (CsWindow *win)
{
  return win->n_jobs == 0;
}

/* The seed function matmul(a + b, w) in bf16 at a size whose CPU reference run takes
 * several seconds: a [4096, 2048], w [2048, 2048]: three matmuls of 34 GFLOP per mode (under
 * the 200 GFLOP limit), a few hundred MiB. */
static const char slow_seed[] =
  "import thunder\n"
  "import thunder.torch as ltorch\n"
  "import torch\n"
  "from thunder.executors.torchex import no_autocast\n\n"
  "@torch.no_grad()\n"
  "@no_autocast\n"
  "def computation(a, b, w):\n"
  "  # a: \"cuda:0 bf16[4096, 2048]\"\n"
  "  # b: \"cuda:0 bf16[2048]\"\n"
  "  # w: \"cuda:0 bf16[2048, 2048]\"\n"
  "  t4 = ltorch.add(a, b, alpha=1)  # t4: \"cuda:0 bf16[4096, 2048]\"\n"
  "  t5 = ltorch.matmul(t4, w)  # t5: \"cuda:0 bf16[4096, 2048]\"\n"
  "  return (t5,)\n";

/* Run shows which statement runs, and Cancel stops it before it finishes: the progress bar says
 * so, nothing is overlaid, no error is shown, and the window runs the next trace normally. */
static void
test_run_cancel (Fixture *fx, gconstpointer data)
{
  g_autofree char *path = open_text (fx, "slow_seed.txt", slow_seed);
  gint64 t0;
  double ms;

  g_action_group_activate_action (G_ACTION_GROUP (fx->win), "run", NULL);
  g_assert_cmpuint (fx->win->n_jobs, ==, 1);
  g_assert_true (gtk_widget_get_visible (GTK_WIDGET (fx->win->run_cancel_button)));
  /* the CPU reference reports its statements to the progress bar */
  g_assert_true (spin_until (progress_names_statement, fx->win, WAIT_TIMEOUT_S * 1000));
  g_test_message ("progress: %s", gtk_progress_bar_get_text (fx->win->run_progress));
  g_assert_nonnull (strstr (gtk_progress_bar_get_text (fx->win->run_progress),
                            "CPU reference: forward in trace dtypes, statement "));
  /* into the first matmul */
  wait_frame ();
  wait_frame ();
  g_assert_cmpuint (fx->win->n_jobs, ==, 1);

  g_signal_emit_by_name (fx->win->run_cancel_button, "clicked");
  t0 = g_get_monotonic_time ();
  g_assert_true (spin_until (no_job, fx->win, WAIT_TIMEOUT_S * 1000));
  ms = (g_get_monotonic_time () - t0) / 1000.0;
  g_test_message ("run stopped %.0f ms after Cancel", ms);
  /* Not a timing target: the uncancelled run (a 34 GFLOP matmul in the CPU reference) takes
     far longer than this, so the bound only tells a Cancel that stops the run from one that
     lets it finish; how fast it stops depends on the machine's load */
  g_assert_cmpfloat (ms, <, 5000);
  g_assert_cmpstr (gtk_progress_bar_get_text (fx->win->run_progress), ==, "Run cancelled");
  g_assert_cmpstr (gtk_label_get_text (fx->win->status_message), ==, "Run cancelled");
  g_assert_false (gtk_widget_get_visible (GTK_WIDGET (fx->win->run_cancel_button)));
  g_assert_false (gtk_info_bar_get_revealed (fx->win->error_bar));
  g_assert_null (fx->win->run_edge_values[CS_RUN_HEAT_RATIO][CS_FAMILY_FORWARD]);
  g_assert_null (fx->win->last_run_summary);
  remove_text (path);

  /* still usable: the seed opens and runs to the end */
  if (!open_seed (fx))
    return;
  g_action_group_activate_action (G_ACTION_GROUP (fx->win), "run", NULL);
  wait_idle (fx->win);
  g_assert_false (gtk_info_bar_get_revealed (fx->win->error_bar));
  g_assert_nonnull (fx->win->last_run_summary);
  g_assert_nonnull (fx->win->run_edge_values[CS_RUN_HEAT_RATIO][CS_FAMILY_FORWARD]);
  g_assert_false (gtk_widget_get_visible (GTK_WIDGET (fx->win->run_cancel_button)));
}

/* A step over the machine's memory is refused at once, before any run starts, with the
 * estimate and the machine's memory: two 2^40-element bf16 inputs hold 8 TiB each as the CPU
 * reference's f64 values, more than any machine has. */
static void
test_run_refused (Fixture *fx, gconstpointer data)
{
  g_autofree char *path = open_text (fx, "huge.txt",
    "import thunder\n"
    "import thunder.torch as ltorch\n"
    "import torch\n"
    "from thunder.executors.torchex import no_autocast\n\n"
    "@torch.no_grad()\n"
    "@no_autocast\n"
    "def computation(a, b):\n"
    "  # a: \"cuda:0 bf16[1048576, 1048576]\"\n"
    "  # b: \"cuda:0 bf16[1048576, 1048576]\"\n"
    "  t0 = ltorch.add(a, b)  # t0: \"cuda:0 bf16[1048576, 1048576]\"\n"
    "  return (t0,)\n");
  const char *msg;

  g_action_group_activate_action (G_ACTION_GROUP (fx->win), "run", NULL);
  g_assert_cmpuint (fx->win->n_jobs, ==, 0);
  g_assert_true (gtk_info_bar_get_revealed (fx->win->error_bar));
  msg = gtk_label_get_text (fx->win->error_label);
  g_test_message ("error bar: %s", msg);
  g_assert_true (g_str_has_prefix (msg, "Run refused: this step needs about "));
  g_assert_nonnull (strstr (msg, " TiB of host memory on the CPU reference (estimate), this "
                                 "machine has "));
  g_assert_true (g_str_has_suffix (msg, " (shrink the shapes, or run it on a machine with more "
                                        "memory)."));
  g_assert_cmpstr (gtk_label_get_text (fx->win->status_message), ==,
                   "Run refused: over the limits");
  g_assert_false (gtk_widget_get_visible (GTK_WIDGET (fx->win->run_cancel_button)));
  remove_text (path);
}

static void
count_cb (GObject *object, gpointer data)
{
  (*(guint *) data)++;
}

static void
count_notify_cb (GObject *object, GParamSpec *pspec, gpointer data)
{
  (*(guint *) data)++;
}

/* cs_graph_view_set_view() is a view change like a pan or zoom: it emits "view-changed" once
 * (the overview redraws its rectangle) and notifies "zoom" when the scale changes, and only
 * then; the view shown is the one set. */
static void
test_set_view_signal (Fixture *fx, gconstpointer data)
{
  CsGraphView *view = fx->win->forward_view;
  guint changed = 0, zoomed = 0;
  gulong h1, h2;
  CsView v, got;

  if (!open_seed (fx))
    return;
  show_family (fx->win, "forward");
  h1 = g_signal_connect (view, "view-changed", G_CALLBACK (count_cb), &changed);
  h2 = g_signal_connect (view, "notify::zoom", G_CALLBACK (count_notify_cb), &zoomed);
  cs_graph_view_get_view (view, &v);
  v.tx += 37;
  cs_graph_view_set_view (view, &v);
  g_assert_cmpuint (changed, ==, 1);
  g_assert_cmpuint (zoomed, ==, 0);
  v.scale *= 1.25;
  cs_graph_view_set_view (view, &v);
  g_assert_cmpuint (changed, ==, 2);
  g_assert_cmpuint (zoomed, ==, 1);
  cs_graph_view_get_view (view, &got);
  g_assert_cmpfloat (got.scale, ==, v.scale);
  g_assert_cmpfloat (got.tx, ==, v.tx);
  g_assert_cmpfloat (got.ty, ==, v.ty);
  /* the next frame draws it as set (no fit in between), without emitting again */
  wait_frame ();
  cs_graph_view_get_view (view, &got);
  g_assert_cmpfloat (got.tx, ==, v.tx);
  g_assert_cmpuint (changed, ==, 2);
  g_signal_handler_disconnect (view, h1);
  g_signal_handler_disconnect (view, h2);
}

/* View > Show Legend (Ctrl+L) hides the dtype legend on both graphs and gives the graph the
 * room: the next fit of a small graph moves it left by the legend's width. */
static void
test_legend_toggle (Fixture *fx, gconstpointer data)
{
  g_autoptr(GVariant) state = NULL;

  if (!open_seed (fx))
    return;
  show_family (fx->win, "forward");
  g_assert_true (cs_graph_view_get_show_legend (fx->win->forward_view));
  g_assert_true (cs_graph_view_get_show_legend (fx->win->backward_view));
  g_action_group_change_action_state (G_ACTION_GROUP (fx->win), "legend", g_variant_new_boolean (FALSE));
  wait_idle (fx->win);
  state = g_action_group_get_action_state (G_ACTION_GROUP (fx->win), "legend");
  g_assert_false (g_variant_get_boolean (state));
  g_assert_false (cs_graph_view_get_show_legend (fx->win->forward_view));
  g_assert_false (cs_graph_view_get_show_legend (fx->win->backward_view));
  save_screenshot (GTK_WIDGET (fx->win), "castscope-no-legend.png");
  g_action_group_change_action_state (G_ACTION_GROUP (fx->win), "legend", g_variant_new_boolean (TRUE));
  wait_idle (fx->win);
  g_assert_true (cs_graph_view_get_show_legend (fx->win->forward_view));
}

/* The pass slider walks the intermediate traces of one family; each family keeps its own. */
static void
test_pass_slider (Fixture *fx, gconstpointer data)
{
  CsAnalysis *an;
  guint n, fuse = G_MAXUINT;
  g_autofree char *first = NULL;
  g_autofree char *fused = NULL;

  if (!open_seed (fx))
    return;
  show_family (fx->win, "forward");
  an = fx->win->analysis;
  n = cs_analysis_n_passes (an, CS_FAMILY_FORWARD);
  g_assert_cmpuint (n, >=, 3);
  g_assert_cmpfloat (gtk_adjustment_get_upper (fx->win->pass_adjustment), ==, n - 1);
  g_assert_cmpfloat (gtk_adjustment_get_value (fx->win->pass_adjustment), ==, n - 1);
  for (guint i = 0; i < n; i++)
    if (g_strcmp0 (cs_analysis_pass_name (an, CS_FAMILY_FORWARD, i), "fuse") == 0)
      fuse = i;
  g_assert_cmpuint (fuse, <, n);

  /* Pass 0 is the trace as parsed: ltorch ops, no region. */
  gtk_adjustment_set_value (fx->win->pass_adjustment, 0);
  wait_idle (fx->win);
  g_assert_cmpstr (cs_analysis_pass_name (an, CS_FAMILY_FORWARD, 0), ==, "initial");
  g_assert_nonnull (strstr (gtk_label_get_text (fx->win->pass_label), "initial"));
  first = _cs_window_dup_trace_text (fx->win);
  g_assert_nonnull (strstr (first, "ltorch.add("));
  g_assert_null (strstr (first, "nvFusion"));
  g_assert_cmpstr (gtk_label_get_text (fx->win->status_regions), ==, "Fusion regions: 0");
  g_assert_true (cs_graph_view_get_trace (fx->win->forward_view)
                 == cs_analysis_get_trace (an, CS_FAMILY_FORWARD, 0));

  /* The fuse pass made the region. */
  gtk_adjustment_set_value (fx->win->pass_adjustment, fuse);
  wait_idle (fx->win);
  fused = _cs_window_dup_trace_text (fx->win);
  g_assert_nonnull (strstr (fused, "nvFusion0("));
  g_assert_nonnull (strstr (gtk_label_get_text (fx->win->pass_label), "fuse"));

  /* The region is drawn as a box of its 5 prims (broadcast, two upcasts, add, downcast);
   * toggling it collapses it to one region node, and back. */
  {
    CsTrace *tf = cs_analysis_get_trace (an, CS_FAMILY_FORWARD, fuse);
    const CsStmt *region = NULL;
    CsLayout *layout = cs_graph_view_get_layout (fx->win->forward_view);
    gint c, k;
    guint members = 0;

    for (guint i = 0; i < tf->n_stmts; i++)
      if (tf->stmts[i]->kind == CS_STMT_CALL && g_strcmp0 (tf->stmts[i]->callee, "nvFusion0") == 0)
        region = tf->stmts[i];
    g_assert_nonnull (region);
    c = cs_layout_find_cluster (layout, region->id);
    g_assert_cmpint (c, >=, 0);
    g_assert_cmpint (layout->clusters[c].kind, ==, CS_LAYOUT_CLUSTER_REGION);
    for (guint i = 0; i < layout->n_nodes; i++)
      if (layout->nodes[i].cluster == c && layout->nodes[i].kind != CS_LAYOUT_NODE_INPUT)
        members++;
    g_assert_cmpuint (members, ==, 5);
    cs_graph_view_toggle_expanded (fx->win->forward_view, region->id);
    wait_idle (fx->win);
    layout = cs_graph_view_get_layout (fx->win->forward_view);
    g_assert_cmpint (cs_layout_find_cluster (layout, region->id), <, 0);
    k = cs_layout_find_node (layout, region->id);
    g_assert_cmpint (k, >=, 0);
    g_assert_cmpint (layout->nodes[k].kind, ==, CS_LAYOUT_NODE_REGION);
    cs_graph_view_toggle_expanded (fx->win->forward_view, region->id);
    wait_idle (fx->win);
    g_assert_cmpint (cs_layout_find_cluster (cs_graph_view_get_layout (fx->win->forward_view),
                                             region->id), >=, 0);
  }

  /* The backward family has its own slider position (its last pass). */
  show_family (fx->win, "backward");
  g_assert_cmpfloat (gtk_adjustment_get_value (fx->win->pass_adjustment), ==,
                     cs_analysis_n_passes (an, CS_FAMILY_BACKWARD) - 1);
  g_assert_true (_cs_window_get_shown_trace (fx->win)
                 == cs_analysis_get_final (an, CS_FAMILY_BACKWARD));
  show_family (fx->win, "forward");
  g_assert_cmpfloat (gtk_adjustment_get_value (fx->win->pass_adjustment), ==, fuse);
}

/* An op castscope does not know: the grad pass names it in the error bar, and the trace is
 * still drawn as read, the unknown call as an opaque node. */
static void
test_unknown_op (Fixture *fx, gconstpointer data)
{
  g_autofree char *dir = g_dir_make_tmp ("cs-app-XXXXXX", NULL);
  g_autofree char *path = g_build_filename (dir, "unknown.txt", NULL);
  g_autoptr(GFile) file = NULL;
  CsLayout *layout;
  gboolean found = FALSE;

  g_assert_true (g_file_set_contents (path,
    "import thunder\n"
    "import thunder.torch as ltorch\n"
    "import torch\n"
    "\n"
    "@torch.no_grad()\n"
    "def computation(a, w):\n"
    "  # a: \"cuda:0 bf16[8, 16]\"\n"
    "  # w: \"cuda:0 bf16[16, 16]\"\n"
    "  t0 = mylib.frobnicate(a)  # t0: \"cuda:0 bf16[8, 16]\"\n"
    "  t1 = ltorch.matmul(t0, w)  # t1: \"cuda:0 bf16[8, 16]\"\n"
    "  return t1\n", -1, NULL));
  file = g_file_new_for_path (path);
  cs_window_open_file (fx->win, file);
  wait_idle (fx->win);
  g_assert_true (gtk_info_bar_get_revealed (fx->win->error_bar));
  g_test_message ("error shown: %s", gtk_label_get_text (fx->win->error_label));
  g_assert_nonnull (strstr (gtk_label_get_text (fx->win->error_label), "mylib.frobnicate"));
  g_assert_nonnull (fx->win->analysis);
  g_assert_cmpstr (cs_analysis_pass_name (fx->win->analysis, CS_FAMILY_FORWARD, 0), ==, "as read");
  layout = cs_graph_view_get_layout (fx->win->forward_view);
  g_assert_nonnull (layout);
  for (guint i = 0; i < layout->n_nodes; i++)
    if (g_strcmp0 (layout->nodes[i].name, "mylib.frobnicate") == 0)
      found = TRUE;
  g_assert_true (found);
  /* The matmul still carries its tensor-core badge (bf16 operands). */
  g_assert_cmpuint (cs_graph_view_count_badges (fx->win->forward_view, TRUE), ==, 1);
  g_unlink (path);
  g_rmdir (dir);
}

/* Clicking a line of the trace text selects its node. */
static void
test_text_click (Fixture *fx, gconstpointer data)
{
  g_autofree char *text = NULL;
  const char *hit;
  CsTrace *trace;
  guint32 id;

  if (!open_seed (fx))
    return;
  show_family (fx->win, "forward");
  text = _cs_window_dup_trace_text (fx->win);
  hit = strstr (text, "= prims.matmul(");
  g_assert_nonnull (hit);
  id = _cs_window_select_text_offset (fx->win, (int) g_utf8_pointer_to_offset (text, hit));
  g_assert_cmpuint (id, !=, 0);
  g_assert_cmpuint (cs_graph_view_get_selected (fx->win->forward_view), ==, id);
  trace = _cs_window_get_shown_trace (fx->win);
  for (guint i = 0; i < trace->n_stmts; i++)
    if (trace->stmts[i]->id == id)
      g_assert_cmpstr (trace->stmts[i]->callee, ==, "prims.matmul");
  /* The signature line is no statement. */
  g_assert_cmpuint (_cs_window_select_text_offset (fx->win,
                      (int) g_utf8_pointer_to_offset (text, strstr (text, "def computation"))), ==, 0);
}

typedef struct
{
  gint64 last_us;        /* monotonic time of the previous tick */
  gint64 max_gap_us;     /* longest time between two ticks: how long the GTK thread was busy */
} Ticker;

static gboolean
tick_cb (gpointer data)
{
  Ticker *t = data;
  gint64 now = g_get_monotonic_time ();

  if (t->last_us != 0)
    t->max_gap_us = MAX (t->max_gap_us, now - t->last_us);
  t->last_us = now;
  return G_SOURCE_CONTINUE;
}

/* Every bundled sample and every trace in ../shared/traces opens without a crash: either the
 * forward view draws something, or the error bar says why.  The log reports how long the GTK
 * thread was busy at most (a 5 ms ticker), for information only. */
static void
test_open_all (Fixture *fx, gconstpointer data)
{
  const char *dirs[] = { g_getenv ("CS_DATA_DIR"), g_getenv ("CS_SHARED_TRACES") };
  guint n_files = 0, n_drawn = 0;

  for (gsize d = 0; d < G_N_ELEMENTS (dirs); d++)
    {
      g_autoptr(GDir) dir = NULL;
      const char *name;

      if (dirs[d] == NULL || (dir = g_dir_open (dirs[d], 0, NULL)) == NULL)
        continue;
      while ((name = g_dir_read_name (dir)) != NULL)
        {
          g_autofree char *path = g_build_filename (dirs[d], name, NULL);
          g_autoptr(GFile) file = NULL;
          gint64 t0;

          if (!g_str_has_suffix (name, ".txt"))
            continue;
          Ticker ticker = { 0, 0 };
          guint tick_id;

          gtk_info_bar_set_revealed (fx->win->error_bar, FALSE);
          g_test_message ("opening %s", name);
          t0 = g_get_monotonic_time ();
          tick_id = g_timeout_add (5, tick_cb, &ticker);
          file = g_file_new_for_path (path);
          cs_window_open_file (fx->win, file);
          wait_idle (fx->win);
          g_source_remove (tick_id);
          n_files++;
          /* The visible view draws the file (a backward-only file opens on Backward). */
          if (cs_graph_view_get_layout (_cs_window_get_view (fx->win, _cs_window_get_family (fx->win))) != NULL)
            n_drawn++;
          else
            g_assert_true (gtk_info_bar_get_revealed (fx->win->error_bar));
          g_test_message ("%s: %s %s in %.0f ms (GTK thread busy at most %.0f ms)%s%s", name,
                          _cs_window_get_family (fx->win) == CS_FAMILY_FORWARD ? "forward" : "backward",
                          cs_graph_view_get_layout (_cs_window_get_view (fx->win, _cs_window_get_family (fx->win)))
                          ? "drawn" : "not drawn",
                          (g_get_monotonic_time () - t0) / 1000.0, ticker.max_gap_us / 1000.0,
                          gtk_info_bar_get_revealed (fx->win->error_bar) ? "; " : "",
                          gtk_info_bar_get_revealed (fx->win->error_bar)
                          ? gtk_label_get_text (fx->win->error_label) : "");
        }
    }
  if (n_files == 0)
    {
      g_test_skip ("no sample traces found");
      return;
    }
  g_test_message ("%u files opened, %u drawn", n_files, n_drawn);
  g_assert_cmpuint (n_drawn, ==, n_files);
}

/* An opened file lands in GtkRecentManager and in the Open Recent menu, whose item reopens it. */
static void
test_recent (Fixture *fx, gconstpointer data)
{
  g_autofree char *seed = seed_path ();
  g_autoptr(GFile) file = NULL;
  g_autofree char *uri = NULL;
  gboolean timed_out = FALSE;
  guint id;
  g_autoptr(GVariant) target = NULL;

  /* Recent items carry 1-second timestamps and the menu shows the 10 newest; other tests of
   * this process opened many files, so wait past their second to make the seed the newest. */
  g_usleep (1100 * 1000);
  if (!open_seed (fx))
    return;
  file = g_file_new_for_path (seed);
  uri = g_file_get_uri (file);
  /* The recent manager writes its list asynchronously: wait until the menu lists the seed. */
  id = g_timeout_add_seconds (20, timeout_cb, &timed_out);
  while (!timed_out && target == NULL)
    {
      g_main_context_iteration (NULL, TRUE);
      for (int i = 0; i < g_menu_model_get_n_items (G_MENU_MODEL (fx->win->recent_submenu)); i++)
        {
          g_autoptr(GVariant) t = g_menu_model_get_item_attribute_value (G_MENU_MODEL (fx->win->recent_submenu),
                                                                         i, G_MENU_ATTRIBUTE_TARGET,
                                                                         G_VARIANT_TYPE_STRING);
          if (t != NULL && g_strcmp0 (g_variant_get_string (t, NULL), uri) == 0)
            target = g_steal_pointer (&t);
        }
    }
  if (!timed_out)
    g_source_remove (id);
  g_assert_cmpint (g_menu_model_get_n_items (G_MENU_MODEL (fx->win->recent_submenu)), >=, 1);
  g_assert_cmpint (g_menu_model_get_n_items (G_MENU_MODEL (fx->win->recent_submenu)), <=, 10);
  g_assert_nonnull (target);
  g_assert_true (gtk_recent_manager_has_item (gtk_recent_manager_get_default (), uri));

  /* Activating the item reopens the file. */
  g_action_group_activate_action (G_ACTION_GROUP (fx->win), "open-recent",
                                  g_variant_new_string (uri));
  wait_idle (fx->win);
  g_assert_nonnull (fx->win->analysis);
  g_assert_true (g_file_equal (fx->win->file, file));
}

/* Matmuls with tensor-core (@tc) or f32 badges in the view: those drawn, plus those inside the
 * collapsed groups (their summaries count them the same way). */
static guint
count_matmuls (CsGraphView *view, gboolean tc)
{
  CsLayout *l = cs_graph_view_get_layout (view);
  guint n = cs_graph_view_count_badges (view, tc);

  for (guint i = 0; l != NULL && i < l->n_nodes; i++)
    if (l->nodes[i].kind == CS_LAYOUT_NODE_GROUP)
      for (guint g = 0; g < l->grouping->n_groups; g++)
        {
          const CsGroupSummary *s = &l->grouping->groups[g].summary;

          /* the node's group, or every layer of the fold of repeats it stands for */
          if (l->group_fold[g] >= 0 ? l->group_fold[g] != l->nodes[i].group
                                    : (gint) g != l->nodes[i].group)
            continue;
          n += tc ? s->n_tensor_core_matmuls : s->n_matmuls - s->n_tensor_core_matmuls;
        }
  return n;
}

/* The LLaMA block from Thunder (../shared/traces): every matmul/linear has bf16 operands, so
 * all of them carry tensor-core badges, and matmul=upcast-f32 leaves none.  Logs how long the
 * GTK thread was busy while the pipeline re-ran (information, not asserted). */
static void
test_large_policy (Fixture *fx, gconstpointer data)
{
  const char *shared = g_getenv ("CS_SHARED_TRACES");
  g_autofree char *path = shared ? g_build_filename (shared, "thunder_llama_stack_initial.txt", NULL)
                                 : NULL;
  g_autoptr(GFile) file = NULL;
  Ticker ticker = { 0, 0 };
  guint tick_id, tc_before, tc_after, f32_after;
  gint64 t0;

  if (path == NULL || !g_file_test (path, G_FILE_TEST_IS_REGULAR))
    {
      g_test_skip ("../shared/traces/thunder_llama_stack_initial.txt not found");
      return;
    }
  file = g_file_new_for_path (path);
  cs_window_open_file (fx->win, file);
  wait_idle (fx->win);
  g_assert_nonnull (fx->win->analysis);
  tc_before = count_matmuls (fx->win->forward_view, TRUE);
  g_assert_cmpuint (tc_before, >=, 4);
  g_assert_cmpuint (count_matmuls (fx->win->forward_view, FALSE), ==, 0);

  t0 = g_get_monotonic_time ();
  tick_id = g_timeout_add (5, tick_cb, &ticker);
  gtk_drop_down_set_selected (policy_dropdown (fx->win, "matmul"),
                              value_index ("matmul", "upcast-f32"));
  wait_idle (fx->win);
  g_source_remove (tick_id);
  tc_after = count_matmuls (fx->win->forward_view, TRUE);
  f32_after = count_matmuls (fx->win->forward_view, FALSE);
  g_test_message ("llama forward: tensor-core badges %u -> %u, f32 badges %u; policy change "
                  "took %.0f ms, GTK thread busy at most %.0f ms", tc_before, tc_after, f32_after,
                  (g_get_monotonic_time () - t0) / 1000.0, ticker.max_gap_us / 1000.0);
  g_assert_cmpuint (tc_after, ==, 0);
  g_assert_cmpuint (f32_after, ==, tc_before);
  g_assert_true (gtk_info_bar_get_revealed (fx->win->diff_bar));
  save_screenshot (GTK_WIDGET (fx->win), "castscope-llama-upcast.png");
}

/* Closing the window while a load, a policy change and a run are in flight: their results
 * arrive later and are dropped; nothing touches the destroyed widgets (GTK would log a
 * critical, fatal in tests). */
static void
test_close_while_busy (Fixture *fx, gconstpointer data)
{
  g_autofree char *seed = seed_path ();
  g_autoptr(GFile) file = NULL;
  g_autoptr(CsWindow) win = NULL;
  gboolean done = FALSE;
  guint guard;

  if (!open_seed (fx))
    return;
  win = g_object_ref (fx->win);
  g_action_group_activate_action (G_ACTION_GROUP (win), "run", NULL);
  g_action_group_change_action_state (G_ACTION_GROUP (win), "policy-matmul",
                                      g_variant_new_string ("upcast-f32"));
  file = g_file_new_for_path (seed);
  cs_window_open_file (win, file);
  g_assert_true (_cs_window_is_busy (win));
  gtk_window_destroy (GTK_WINDOW (win));
  fx->win = NULL;
  /* Let every worker finish and deliver: wait until no job is left (the 120 s bound only
   * guards a hang; a loaded or sanitized build takes longer than an idle one). */
  guard = g_timeout_add_seconds (120, timeout_cb, &done);
  while (!done && win->n_jobs > 0)
    g_main_context_iteration (NULL, TRUE);
  if (!done)
    g_source_remove (guard);
  g_assert_cmpuint (win->n_jobs, ==, 0);
}


/* ---- the app at model scale (issue 17) ---- */

static char *
shared_trace (const char *name)
{
  const char *shared = g_getenv ("CS_SHARED_TRACES");
  char *path = shared ? g_build_filename (shared, name, NULL) : NULL;

  if (path != NULL && !g_file_test (path, G_FILE_TEST_IS_REGULAR))
    g_clear_pointer (&path, g_free);
  return path;
}

static gboolean
open_path (Fixture *fx, const char *path)
{
  g_autoptr(GFile) file = NULL;

  if (path == NULL)
    {
      g_test_skip ("trace not found");
      return FALSE;
    }
  file = g_file_new_for_path (path);
  cs_window_open_file (fx->win, file);
  wait_idle (fx->win);
  g_assert_nonnull (fx->win->analysis);
  return TRUE;
}

/* The widget's pixels as drawn (its own renderer, as save_screenshot), premultiplied BGRA. */
static guchar *
widget_pixels (GtkWidget *widget, int *w, int *h, gsize *stride)
{
  g_autoptr(GdkPaintable) paintable = gtk_widget_paintable_new (widget);
  GskRenderer *renderer = gtk_native_get_renderer (gtk_widget_get_native (widget));
  g_autoptr(GskRenderNode) node = NULL;
  g_autoptr(GdkTexture) texture = NULL;
  guchar *data;

  *w = gtk_widget_get_width (widget);
  *h = gtk_widget_get_height (widget);
  g_assert_cmpint (*w, >, 0);
  for (guint attempt = 0; attempt < WAIT_TIMEOUT_S * 20 && node == NULL; attempt++)
    {
      GtkSnapshot *snapshot = gtk_snapshot_new ();

      gdk_paintable_snapshot (paintable, snapshot, *w, *h);
      node = gtk_snapshot_free_to_node (snapshot);
      if (node == NULL)
        wait_frame ();
    }
  g_assert_nonnull (node);
  texture = gsk_renderer_render_texture (renderer, node, &GRAPHENE_RECT_INIT (0, 0, *w, *h));
  *stride = (gsize) *w * 4;
  data = g_malloc (*stride * *h);
  gdk_texture_download (texture, data, *stride);
  return data;
}

/* Pixels in the (2r+1)^2 square around (x, y) that are not the white background. */
static guint
ink_around (const guchar *data, gsize stride, int w, int h, int x, int y, int r)
{
  guint n = 0;

  for (int j = MAX (0, y - r); j <= MIN (h - 1, y + r); j++)
    for (int i = MAX (0, x - r); i <= MIN (w - 1, x + r); i++)
      {
        const guchar *px = data + j * stride + i * 4;
        if (px[0] < 0xF0 || px[1] < 0xF0 || px[2] < 0xF0)
          n++;
      }
  return n;
}

static void
element_px (CsGraphView *view, const CsLayoutHit *hit, double *x, double *y)
{
  CsLayout *l = cs_graph_view_get_layout (view);
  CsView v;
  CsPoint c;

  cs_graph_view_get_view (view, &v);
  cs_layout_element_center (l, hit, &c);
  cs_view_to_px (&v, l, c.x, c.y, x, y);
}

static gboolean
find_selected_px (CsGraphView *view, double *x, double *y)
{
  CsLayoutHit hit;

  if (!cs_layout_find_element (cs_graph_view_get_layout (view), cs_graph_view_get_selected (view), &hit))
    return FALSE;
  element_px (view, &hit, x, y);
  return TRUE;
}

static gint
group_node (CsLayout *l, const char *name)
{
  for (guint i = 0; i < l->n_nodes; i++)
    if (l->nodes[i].kind == CS_LAYOUT_NODE_GROUP && g_strcmp0 (l->nodes[i].name, name) == 0)
      return (gint) i;
  return -1;
}

/* The 8-block LLaMA opens with its 8 blocks collapsed, at a readable zoom: in the forward
 * trace Thunder's fusion makes layers.0 differ from the others (its regions start at the
 * embedding), so it is one node and layers 1-7 are folded into another; and the first frame has
 * the graph at the middle of the canvas (not the white background) and its start at the top (no
 * empty band above it); the notes are in the side panel, and the legend beside
 * the graph, not on it. */
static void
test_llama_first_frame (Fixture *fx, gconstpointer data)
{
  g_autofree char *path = shared_trace ("thunder_llama_stack_initial.txt");
  CsGraphView *view = fx->win->forward_view;
  g_autofree guchar *pixels = NULL;
  CsLayout *l;
  guint n_groups = 0, ink;
  int w, h;
  gsize stride;

  if (!open_path (fx, path))
    return;
  l = cs_graph_view_get_layout (view);
  g_assert_nonnull (l);
  for (guint i = 0; i < l->n_nodes; i++)
    n_groups += l->nodes[i].kind == CS_LAYOUT_NODE_GROUP;
  g_assert_cmpuint (n_groups, ==, 2);
  g_assert_true (g_str_has_prefix (l->nodes[group_node (l, "layers.1")].label,
                                   "layers 1-7: same structure, 1 shown\n"));
  g_test_message ("first frame: zoom %.2f, %u nodes", cs_graph_view_get_zoom (view), l->n_nodes);
  g_assert_cmpfloat (cs_graph_view_get_zoom (view), >=, 0.75);
  pixels = widget_pixels (GTK_WIDGET (view), &w, &h, &stride);
  ink = ink_around (pixels, stride, w, h, w / 2, h / 2, 4);
  g_test_message ("ink in the 9x9 px at the canvas centre: %u", ink);
  g_assert_cmpuint (ink, >, 0);
  /* the graph starts at the top of the canvas (no empty band above it): its bounding box's
   * top is within 32 px of the canvas's top edge, and the top 80 px hold graph pixels */
  {
    CsView v;
    double top_x, top_y;
    guint band = 0;

    cs_graph_view_get_view (view, &v);
    cs_view_to_px (&v, l, l->bb.x0, l->bb.y1, &top_x, &top_y);
    g_test_message ("graph top at y = %.1f px of %d", top_y, h);
    g_assert_cmpfloat (top_y, >=, 0.0);
    g_assert_cmpfloat (top_y, <=, 32.0);
    for (int y = 4; y < MIN (h, 80); y += 9)
      for (int x = 4; x < w; x += 9)
        band += ink_around (pixels, stride, w, h, x, y, 4) > 0;
    g_test_message ("9x9 squares with ink in the top 80 px: %u", band);
    g_assert_cmpuint (band, >=, 10);
  }
  /* notes and legend in the side panel, clear of the graph */
  g_assert_true (gtk_widget_get_visible (GTK_WIDGET (fx->win->notes_label)));
  g_assert_nonnull (strstr (gtk_label_get_text (fx->win->notes_label), "8 of 8 layers drawn collapsed"));
  {
    graphene_rect_t a, b;

    g_assert_true (gtk_widget_compute_bounds (GTK_WIDGET (fx->win->legend_area), GTK_WIDGET (fx->win), &a));
    g_assert_true (gtk_widget_compute_bounds (GTK_WIDGET (view), GTK_WIDGET (fx->win), &b));
    g_assert_false (graphene_rect_intersection (&a, &b, NULL));
    g_assert_true (gtk_widget_compute_bounds (GTK_WIDGET (fx->win->notes_label), GTK_WIDGET (fx->win), &a));
    g_assert_false (graphene_rect_intersection (&a, &b, NULL));
  }
  /* the Structure list names the blocks and says they repeat */
  {
    GtkWidget *row = GTK_WIDGET (gtk_list_box_get_row_at_index (fx->win->structure_list, 0));
    g_assert_nonnull (row);
    g_assert_cmpstr (g_object_get_data (G_OBJECT (row), "cs-group-name"), ==, "layers.0");
  }
  /* the status bar's casts add up: the LLaMA's forward has two casts that are neither up nor
   * down, in its cross-entropy: the ignore-index mask b8 -> i64 and the count of the rows kept
   * i64 -> f32 */
  {
    guint n = 0, up = 0, down = 0, other = 0;

    g_assert_cmpint (sscanf (gtk_label_get_text (fx->win->status_casts),
                             "Casts: %u (%u up, %u down, %u other)", &n, &up, &down, &other), ==, 4);
    g_assert_cmpuint (other, ==, 2);
    g_assert_cmpuint (n, ==, up + down + other);
  }
  save_screenshot (GTK_WIDGET (fx->win), "castscope-llama-collapsed.png");
}

/* Expanding a layer keeps the selected layer where it was on screen; collapsing it again with
 * an op inside it selected puts the layer's node where the op was. */
static void
test_llama_expand_anchor (Fixture *fx, gconstpointer data)
{
  g_autofree char *path = shared_trace ("thunder_llama_stack_initial.txt");
  CsGraphView *view = fx->win->forward_view;
  CsLayout *l;
  gint gi;
  guint32 gid, op = 0;
  double x0, y0, x1, y1, zoom;

  if (!open_path (fx, path))
    return;
  l = cs_graph_view_get_layout (view);
  /* layers.3 is folded into the node of layers 0-7: selecting it selects that node */
  gi = cs_grouping_find (l->grouping, "layers.3");
  g_assert_cmpint (gi, >=, 0);
  g_assert_cmpint (group_node (l, "layers.3"), <, 0);
  gid = CS_LAYOUT_GROUP_ID (gi);
  cs_graph_view_select (view, gid, TRUE);
  wait_frame ();
  g_assert_true (find_selected_px (view, &x0, &y0));
  zoom = cs_graph_view_get_zoom (view);
  cs_graph_view_toggle_expanded (view, gid);
  wait_idle (fx->win);
  l = cs_graph_view_get_layout (view);
  g_assert_cmpint (group_node (l, "layers.3"), <, 0);
  g_assert_true (cs_graph_view_get_group_expanded (view, "layers.3"));
  g_assert_true (find_selected_px (view, &x1, &y1));
  g_test_message ("layers.3 at (%.1f, %.1f) -> its box's title at (%.1f, %.1f)", x0, y0, x1, y1);
  g_assert_cmpfloat (fabs (x1 - x0), <, 1.0);
  g_assert_cmpfloat (fabs (y1 - y0), <, 1.0);
  g_assert_cmpfloat (cs_graph_view_get_zoom (view), ==, zoom);
  save_screenshot (GTK_WIDGET (fx->win), "castscope-llama-layer-expanded.png");

  /* select a matmul of layers.3, collapse the layer: its node takes the op's place.  Folded,
   * the collapsed model is narrow enough to fit the view, which then keeps it whole on screen
   * rather than at the anchor: unfolded (View > Fold Repeated Layers off) it does not fit. */
  g_action_group_change_action_state (G_ACTION_GROUP (fx->win), "fold-repeats",
                                      g_variant_new_boolean (FALSE));
  wait_idle (fx->win);
  l = cs_graph_view_get_layout (view);
  for (guint i = 0; i < l->n_nodes && op == 0; i++)
    if (l->nodes[i].badge != CS_LAYOUT_BADGE_NONE && l->nodes[i].group >= 0
        && cs_grouping_is_within (l->grouping, l->nodes[i].group, cs_grouping_find (l->grouping, "layers.3")))
      op = l->nodes[i].stmt_id;
  g_assert_cmpuint (op, !=, 0);
  cs_graph_view_select (view, op, TRUE);
  wait_frame ();
  g_assert_true (find_selected_px (view, &x0, &y0));
  cs_graph_view_set_group_expanded (view, "layers.3", FALSE);
  wait_idle (fx->win);
  l = cs_graph_view_get_layout (view);
  g_assert_cmpint (group_node (l, "layers.3"), >=, 0);
  g_assert_cmpuint (cs_graph_view_get_selected (view), ==, op);
  g_assert_true (find_selected_px (view, &x1, &y1));
  g_test_message ("a matmul of layers.3 at (%.1f, %.1f) -> layers.3 at (%.1f, %.1f)", x0, y0, x1, y1);
  g_assert_cmpfloat (fabs (x1 - x0), <, 1.0);
  g_assert_cmpfloat (fabs (y1 - y0), <, 1.0);
}

/* A policy change and a pass-slider move keep the selection (found again in the new trace) at
 * its place; keyboard zoom zooms about it.  After matmul=upcast-f32 the diff bar's cast counts
 * are the marks on the graph (added casts, removed ones as ghosts) and core's diff of the two
 * shown traces. */
static void
test_llama_policy_anchor (Fixture *fx, gconstpointer data)
{
  g_autofree char *path = shared_trace ("thunder_llama_stack_initial.txt");
  CsGraphView *view = fx->win->forward_view;
  CsLayout *l;
  gint lin = -1;
  double x0, y0, x1, y1, zoom;
  CsLayoutDiffStats st;
  guint added = 0, removed = 0, core_added = 0, core_removed = 0;

  if (!open_path (fx, path))
    return;
  l = cs_graph_view_get_layout (view);
  for (guint i = 0; i < l->n_nodes; i++)
    if (l->nodes[i].badge != CS_LAYOUT_BADGE_NONE && l->nodes[i].group < 0)
      lin = (gint) i;     /* the output projection, outside the blocks */
  g_assert_cmpint (lin, >=, 0);
  cs_graph_view_select (view, l->nodes[lin].stmt_id, TRUE);
  wait_frame ();
  g_assert_true (find_selected_px (view, &x0, &y0));

  /* keyboard zoom: the selection stays put */
  zoom = cs_graph_view_get_zoom (view);
  cs_graph_view_zoom_by (view, 1.25);
  g_assert_cmpfloat (cs_graph_view_get_zoom (view), >, zoom * 1.2);
  g_assert_true (find_selected_px (view, &x1, &y1));
  g_assert_cmpfloat (fabs (x1 - x0), <, 0.5);
  g_assert_cmpfloat (fabs (y1 - y0), <, 0.5);
  zoom = cs_graph_view_get_zoom (view);

  gtk_drop_down_set_selected (policy_dropdown (fx->win, "matmul"), value_index ("matmul", "upcast-f32"));
  wait_idle (fx->win);
  l = cs_graph_view_get_layout (view);
  g_assert_true (find_selected_px (view, &x1, &y1));
  {
    CsLayoutHit hit;
    g_assert_true (cs_layout_find_element (l, cs_graph_view_get_selected (view), &hit));
    g_assert_cmpint (hit.kind, ==, CS_LAYOUT_HIT_NODE);
    g_assert_cmpint (l->nodes[hit.index].badge, ==, CS_LAYOUT_BADGE_F32);
  }
  g_test_message ("policy change: selection (%.1f, %.1f) -> (%.1f, %.1f)", x0, y0, x1, y1);
  /* the trace text, printed anew, is scrolled to the selection (selected above without
   * scrolling the text) */
  g_assert_true (text_selection_visible (fx->win));
  g_assert_cmpfloat (fabs (x1 - x0), <, 1.0);
  g_assert_cmpfloat (fabs (y1 - y0), <, 1.0);
  g_assert_cmpfloat (cs_graph_view_get_zoom (view), ==, zoom);

  /* the banner is the marks */
  g_assert_true (gtk_info_bar_get_revealed (fx->win->diff_bar));
  g_assert_true (cs_graph_view_get_diff_stats (view, &st));
  for (guint i = 0; i < l->n_nodes; i++)
    {
      added += l->nodes[i].diff_added;
      removed += l->nodes[i].diff_removed;
      /* removed casts are ghosts of their own */
      if (l->nodes[i].diff_removed > 0)
        g_assert_cmpint (l->nodes[i].kind, ==, CS_LAYOUT_NODE_GHOST);
    }
  for (guint c = 0; c < l->n_clusters; c++)
    {
      added += l->clusters[c].diff_added;
      g_assert_cmpuint (l->clusters[c].diff_removed, ==, 0);
    }
  {
    CsTrace *now = cs_graph_view_get_trace (view);
    CsTrace *before = cs_analysis_get_trace (fx->win->previous, CS_FAMILY_FORWARD,
                                             cs_analysis_n_passes (fx->win->previous, CS_FAMILY_FORWARD) - 1);
    g_autoptr(CsTraceDiff) diff = cs_trace_diff (before, now);

    for (guint i = 0; i < diff->casts_added->len; i++)
      core_added += ((CsDiffCast *) g_ptr_array_index (diff->casts_added, i))->count;
    for (guint i = 0; i < diff->casts_removed->len; i++)
      core_removed += ((CsDiffCast *) g_ptr_array_index (diff->casts_removed, i))->count;
  }
  g_test_message ("upcast-f32 forward: +%u -%u casts (marks +%u -%u, core diff +%u -%u)",
                  st.casts_added, st.casts_removed, added, removed, core_added, core_removed);
  g_assert_cmpuint (st.casts_added, >, 0);
  g_assert_cmpuint (added, ==, st.casts_added);
  g_assert_cmpuint (removed, ==, st.casts_removed);
  g_assert_cmpuint (core_added, ==, st.casts_added);
  g_assert_cmpuint (core_removed, ==, st.casts_removed);
  {
    g_autofree char *plus = g_strdup_printf ("+%u casts", st.casts_added);
    g_autofree char *minus = g_strdup_printf ("−%u casts", st.casts_removed);
    const char *text = gtk_label_get_text (fx->win->diff_label);

    g_assert_nonnull (strstr (text, plus));
    g_assert_nonnull (strstr (text, minus));
  }
  save_screenshot (GTK_WIDGET (fx->win), "castscope-llama-upcast-diff.png");

  /* the pass slider: one pass back, the selection is found again where it was */
  g_assert_true (find_selected_px (view, &x0, &y0));
  gtk_adjustment_set_value (fx->win->pass_adjustment, gtk_adjustment_get_value (fx->win->pass_adjustment) - 1);
  wait_idle (fx->win);
  g_assert_true (find_selected_px (view, &x1, &y1));
  g_test_message ("pass slider: selection (%.1f, %.1f) -> (%.1f, %.1f)", x0, y0, x1, y1);
  g_assert_cmpfloat (fabs (x1 - x0), <, 1.0);
  g_assert_cmpfloat (fabs (y1 - y0), <, 1.0);
}

static const CsStmt *
find_sub (const CsTrace *t, const char *callee, const CsStmt **parent)
{
  for (guint i = 0; i < t->n_stmts; i++)
    for (guint k = 0; k < t->stmts[i]->n_subs; k++)
      if (g_strcmp0 (t->stmts[i]->subs[k]->callee, callee) == 0)
        {
          *parent = t->stmts[i];
          return t->stmts[i]->subs[k];
        }
  return NULL;
}

/* Find "tanh" on the GELU MLP selects the tanh prim inside its fusion region (and, on the
 * initial trace, inside ltorch.gelu's decomposition, which it expands); a click on that op
 * selects it, a click on the region's title the region. */
static void
test_find_tanh (Fixture *fx, gconstpointer data)
{
  g_autofree char *path = g_build_filename (g_getenv ("CS_DATA_DIR"), "mlp_gelu.txt", NULL);
  CsGraphView *view = fx->win->forward_view;
  const CsStmt *tanh, *region = NULL;
  CsLayout *l;
  CsLayoutHit hit;
  double x, y;
  gint c;

  if (!open_path (fx, path))
    return;
  show_family (fx->win, "forward");
  tanh = find_sub (_cs_window_get_shown_trace (fx->win), "prims.tanh", &region);
  g_assert_nonnull (tanh);
  g_assert_true (cs_op_is_fusion (region->op));
  _cs_window_find_next (fx->win, "tanh", TRUE);
  wait_idle (fx->win);
  g_assert_cmpuint (cs_graph_view_get_selected (view), ==, tanh->id);
  l = cs_graph_view_get_layout (view);
  g_assert_true (cs_layout_find_element (l, tanh->id, &hit));
  g_assert_cmpint (hit.kind, ==, CS_LAYOUT_HIT_NODE);
  g_assert_true (l->nodes[hit.index].selected);
  g_assert_true (l->nodes[hit.index].found);
  c = l->nodes[hit.index].cluster;
  g_assert_cmpint (c, >=, 0);
  g_assert_cmpint (l->clusters[c].kind, ==, CS_LAYOUT_CLUSTER_REGION);
  g_assert_cmpuint (l->clusters[c].stmt_id, ==, region->id);
  g_assert_nonnull (strstr (gtk_label_get_text (fx->win->details_label), "prims.tanh"));
  g_assert_nonnull (strstr (gtk_label_get_text (fx->win->status_message), "match 1 of 1"));

  /* clicks: the op itself, then the region's title */
  cs_graph_view_select (view, 0, FALSE);
  element_px (view, &hit, &x, &y);
  g_assert_cmpuint (cs_graph_view_activate_at (view, x, y, 1), ==, tanh->id);
  g_assert_cmpuint (cs_graph_view_get_selected (view), ==, tanh->id);
  {
    CsView v;
    double tx, ty;

    cs_graph_view_get_view (view, &v);
    cs_view_to_px (&v, l, l->clusters[c].box.x0 + 12, l->clusters[c].title_pos.y, &tx, &ty);
    g_assert_cmpuint (cs_graph_view_activate_at (view, tx, ty, 1), ==, region->id);
  }
  g_assert_nonnull (strstr (gtk_label_get_text (fx->win->details_label), region->callee));

  /* several matches: next and previous walk them, every match has its halo */
  _cs_window_find_next (fx->win, "mul", TRUE);
  wait_idle (fx->win);
  {
    guint32 first = cs_graph_view_get_selected (view);
    guint n = fx->win->search_matches->len, halos = 0;

    g_assert_cmpuint (n, >=, 2);
    _cs_window_find_next (fx->win, "mul", FALSE);
    wait_idle (fx->win);
    g_assert_cmpuint (cs_graph_view_get_selected (view), ==, g_array_index (fx->win->search_matches, guint32, 1));
    _cs_window_find_previous (fx->win, "mul");
    wait_idle (fx->win);
    g_assert_cmpuint (cs_graph_view_get_selected (view), ==, first);
    l = cs_graph_view_get_layout (view);
    for (guint i = 0; i < l->n_nodes; i++)
      halos += l->nodes[i].found;
    for (guint k = 0; k < l->n_clusters; k++)
      halos += l->clusters[k].found;
    g_assert_cmpuint (halos, ==, n);
  }

  /* Thunder's initial trace of the same MLP (shared): tanh lies in ltorch.gelu's printed
   * decomposition (ltorch.tanh -> prims.tanh); at the initial pass Find expands gelu */
  {
    g_autofree char *initial = shared_trace ("thunder_b_mlp_gelu_initial.txt");

    if (initial == NULL)
      return;
    if (!open_path (fx, initial))
      return;
  }
  show_family (fx->win, "forward");
  gtk_adjustment_set_value (fx->win->pass_adjustment, 0);
  wait_idle (fx->win);
  l = cs_graph_view_get_layout (view);
  for (guint i = 0; i < l->n_nodes; i++)
    g_assert_cmpstr (l->nodes[i].label, !=, "tanh");
  _cs_window_find_next (fx->win, "tanh", TRUE);
  wait_idle (fx->win);
  l = cs_graph_view_get_layout (view);
  g_assert_true (cs_layout_find_element (l, cs_graph_view_get_selected (view), &hit));
  g_assert_cmpint (hit.kind, ==, CS_LAYOUT_HIT_NODE);
  g_assert_cmpuint (l->nodes[hit.index].stmt_id, ==, cs_graph_view_get_selected (view));
  g_assert_cmpstr (l->nodes[hit.index].label, ==, "tanh");
}

/* How many statements of @s (at every level) have a callee containing @part; @first gets the
 * first one (pre-order). */
static guint
count_callee (const CsStmt *s, const char *part, const CsStmt **first)
{
  guint n = s->callee != NULL && strstr (s->callee, part) != NULL;

  if (n && *first == NULL)
    *first = s;
  for (guint i = 0; i < s->n_subs; i++)
    n += count_callee (s->subs[i], part, first);
  return n;
}

/* The first statement of @s (at every level, subs before their wrapper, as Find orders them)
 * whose origin is @origin, or NULL. */
static const CsStmt *
first_with_origin (const CsStmt *s, guint32 origin)
{
  for (guint i = 0; i < s->n_subs; i++)
    {
      const CsStmt *r = first_with_origin (s->subs[i], origin);
      if (r != NULL)
        return r;
    }
  return s->origin == origin && !cs_op_is_fusion (s->op) ? s : NULL;
}

/* On the 8-block LLaMA's final forward trace SiLU is no op of its own (the passes decomposed
 * ltorch.silu into neg/exp/reciprocal inside the feed-forward regions), yet Find "silu" finds
 * the statements derived from each of the initial trace's 8 silu calls (CsStmt.origin), one
 * match per call, and selects the first statement derived from the first one. */
static void
test_find_silu_origin (Fixture *fx, gconstpointer data)
{
  g_autofree char *path = shared_trace ("thunder_llama_stack_initial.txt");
  CsGraphView *view = fx->win->forward_view;
  const CsTrace *initial, *final;
  const CsStmt *silu = NULL, *want = NULL, *sel;
  guint n_silu = 0, n_final = 0;

  if (!open_path (fx, path))
    return;
  show_family (fx->win, "forward");
  initial = cs_analysis_get_trace (fx->win->analysis, CS_FAMILY_FORWARD, 0);
  g_assert_cmpstr (cs_analysis_pass_name (fx->win->analysis, CS_FAMILY_FORWARD, 0), ==, "initial");
  final = _cs_window_get_shown_trace (fx->win);
  g_assert_true (final == cs_analysis_get_final (fx->win->analysis, CS_FAMILY_FORWARD));
  for (guint i = 0; i < initial->n_stmts; i++)
    if (initial->stmts[i]->callee != NULL && strcmp (initial->stmts[i]->callee, "ltorch.silu") == 0)
      {
        if (silu == NULL)
          silu = initial->stmts[i];
        n_silu++;
      }
  g_assert_cmpuint (n_silu, ==, 8);
  {
    const CsStmt *dummy = NULL;

    for (guint i = 0; i < final->n_stmts; i++)
      n_final += count_callee (final->stmts[i], "silu", &dummy);
  }
  g_assert_cmpuint (n_final, ==, 0);
  for (guint i = 0; i < final->n_stmts && want == NULL; i++)
    want = first_with_origin (final->stmts[i], silu->id);
  g_assert_nonnull (want);

  _cs_window_find_next (fx->win, "silu", TRUE);
  wait_idle (fx->win);
  g_assert_nonnull (fx->win->search_matches);
  g_assert_cmpuint (fx->win->search_matches->len, ==, n_silu);
  g_assert_cmpuint (cs_graph_view_get_selected (view), ==, want->id);
  sel = _cs_window_find_stmt_deep (final, cs_graph_view_get_selected (view), NULL);
  g_assert_nonnull (sel);
  g_assert_cmpuint (sel->origin, ==, silu->id);
  g_assert_null (strstr (sel->callee, "silu"));
  g_assert_nonnull (strstr (gtk_label_get_text (fx->win->status_message), "match 1 of 8"));
  /* each match derives from a different silu call */
  {
    g_autoptr(GHashTable) origins = g_hash_table_new (NULL, NULL);

    for (guint i = 0; i < fx->win->search_matches->len; i++)
      {
        const CsStmt *m = _cs_window_find_stmt_deep (final, g_array_index (fx->win->search_matches, guint32, i), NULL);

        g_assert_nonnull (m);
        g_hash_table_add (origins, GUINT_TO_POINTER (m->origin));
      }
    g_assert_cmpuint (g_hash_table_size (origins), ==, n_silu);
  }
  /* the initial pass still finds the silu calls themselves */
  gtk_adjustment_set_value (fx->win->pass_adjustment, 0);
  wait_idle (fx->win);
  _cs_window_find_next (fx->win, "silu", TRUE);
  wait_idle (fx->win);
  g_assert_cmpuint (cs_graph_view_get_selected (view), ==, silu->id);
  g_assert_cmpuint (fx->win->search_matches->len, ==, n_silu);
}

/* fuse-linear=on takes both linears of the GELU MLP into regions: the diff bar counts the two
 * moves and the graph marks both. */
static void
test_fuse_linear_moves (Fixture *fx, gconstpointer data)
{
  g_autofree char *path = g_build_filename (g_getenv ("CS_DATA_DIR"), "mlp_gelu.txt", NULL);
  CsGraphView *view = fx->win->forward_view;
  CsLayoutDiffStats st;
  CsLayout *l;
  guint marked = 0;

  if (!open_path (fx, path))
    return;
  show_family (fx->win, "forward");
  gtk_drop_down_set_selected (policy_dropdown (fx->win, "fuse-linear"), value_index ("fuse-linear", "on"));
  wait_idle (fx->win);
  g_assert_true (cs_graph_view_get_diff_stats (view, &st));
  g_assert_cmpuint (st.moved_in, ==, 2);
  l = cs_graph_view_get_layout (view);
  for (guint i = 0; i < l->n_nodes; i++)
    marked += l->nodes[i].diff_moved;
  g_assert_cmpuint (marked, ==, 2);
  g_assert_nonnull (strstr (gtk_label_get_text (fx->win->diff_label), "2 moved into regions"));
}

/* A run-table row selects the node that writes its tensor. */
static void
test_run_row_click (Fixture *fx, gconstpointer data)
{
  CsTrace *trace;
  int row = -1;

  if (!open_seed (fx))
    return;
  show_family (fx->win, "forward");
  g_action_group_activate_action (G_ACTION_GROUP (fx->win), "run", NULL);
  wait_idle (fx->win);
  for (int r = 1; r < 200 && row < 0; r++)
    {
      GtkWidget *cell = gtk_grid_get_child_at (fx->win->run_grid, 0, r);
      if (cell != NULL && g_strcmp0 (g_object_get_data (G_OBJECT (cell), CS_RUN_ROW_PROXY), "t5") == 0
          && GPOINTER_TO_INT (g_object_get_data (G_OBJECT (cell), CS_RUN_ROW_FAMILY)) == CS_FAMILY_FORWARD + 1)
        row = r;
    }
  g_assert_cmpint (row, >, 0);
  cs_graph_view_select (fx->win->forward_view, 0, FALSE);
  g_assert_true (_cs_window_run_row_activate (fx->win, row));
  wait_idle (fx->win);
  trace = _cs_window_get_shown_trace (fx->win);
  {
    const CsStmt *s = _cs_window_find_stmt_deep (trace, cs_graph_view_get_selected (fx->win->forward_view), NULL);
    g_autoptr(GPtrArray) outs = g_ptr_array_new ();
    gboolean writes_t5 = FALSE;

    g_assert_nonnull (s);
    cs_stmt_collect_outputs (s, outs);
    for (guint i = 0; i < outs->len; i++)
      writes_t5 |= g_strcmp0 (((CsProxy *) g_ptr_array_index (outs, i))->name, "t5") == 0;
    g_assert_true (writes_t5);
  }
}

/* The controller of @type attached to @widget, or NULL. */
static GtkEventController *
find_controller (GtkWidget *widget, GType type)
{
  g_autoptr(GListModel) list = gtk_widget_observe_controllers (widget);
  GtkEventController *found = NULL;

  for (guint i = 0; found == NULL && i < g_list_model_get_n_items (list); i++)
    {
      g_autoptr(GtkEventController) c = g_list_model_get_item (list, i);

      if (G_TYPE_CHECK_INSTANCE_TYPE (c, type))
        found = c;
    }
  return found;   /* the widget holds a reference */
}

/* A click on a run-table row reaches the grid's gesture as GTK delivers it: the widget that
 * gtk_widget_pick() finds at the row's position (the press's target) has no gesture of its
 * own to take the press (a selectable label has two), the grid's click gesture runs in the
 * capture phase (before any cell), and its "pressed" at that position selects the node that
 * writes the row's tensor.  A right click's text, the row's cells tab-separated, starts with
 * the tensor's name. */
static void
test_run_row_pick (Fixture *fx, gconstpointer data)
{
  GtkWidget *grid, *cell = NULL, *picked;
  GtkEventController *gesture;
  graphene_point_t p;
  int row = -1;

  if (!open_seed (fx))
    return;
  show_family (fx->win, "forward");
  g_action_group_activate_action (G_ACTION_GROUP (fx->win), "run", NULL);
  wait_idle (fx->win);
  grid = GTK_WIDGET (fx->win->run_grid);
  for (int r = 1; r < 200 && row < 0; r++)
    {
      GtkWidget *c = gtk_grid_get_child_at (fx->win->run_grid, 0, r);
      if (c != NULL && g_strcmp0 (g_object_get_data (G_OBJECT (c), CS_RUN_ROW_PROXY), "t5") == 0
          && GPOINTER_TO_INT (g_object_get_data (G_OBJECT (c), CS_RUN_ROW_FAMILY)) == CS_FAMILY_FORWARD + 1)
        {
          row = r;
          cell = c;
        }
    }
  g_assert_cmpint (row, >, 0);
  /* the middle of the row's err cell: a click anywhere on the row counts */
  g_assert_true (gtk_widget_compute_point (gtk_grid_get_child_at (fx->win->run_grid, 1, row), grid,
                                           &GRAPHENE_POINT_INIT (2, 4), &p));
  picked = gtk_widget_pick (grid, p.x, p.y, GTK_PICK_DEFAULT);
  g_assert_nonnull (picked);
  g_assert_true (picked == gtk_grid_get_child_at (fx->win->run_grid, 1, row)
                 || gtk_widget_is_ancestor (picked, gtk_grid_get_child_at (fx->win->run_grid, 1, row)));
  for (GtkWidget *w = picked; w != grid; w = gtk_widget_get_parent (w))
    {
      g_assert_null (find_controller (w, GTK_TYPE_GESTURE_CLICK));
      g_assert_null (find_controller (w, GTK_TYPE_GESTURE_DRAG));
      if (GTK_IS_LABEL (w))
        g_assert_false (gtk_label_get_selectable (GTK_LABEL (w)));
    }
  gesture = find_controller (grid, GTK_TYPE_GESTURE_CLICK);
  g_assert_nonnull (gesture);
  g_assert_cmpint (gtk_event_controller_get_propagation_phase (gesture), ==, GTK_PHASE_CAPTURE);
  cs_graph_view_select (fx->win->forward_view, 0, FALSE);
  g_assert_cmpuint (cs_graph_view_get_selected (fx->win->forward_view), ==, 0);
  g_signal_emit_by_name (gesture, "pressed", 1, p.x, p.y);
  wait_idle (fx->win);
  {
    CsTrace *trace = _cs_window_get_shown_trace (fx->win);
    const CsStmt *s = _cs_window_find_stmt_deep (trace, cs_graph_view_get_selected (fx->win->forward_view), NULL);
    g_autoptr(GPtrArray) outs = g_ptr_array_new ();
    gboolean writes_t5 = FALSE;

    g_assert_nonnull (s);
    cs_stmt_collect_outputs (s, outs);
    for (guint i = 0; i < outs->len; i++)
      writes_t5 |= g_strcmp0 (((CsProxy *) g_ptr_array_index (outs, i))->name, "t5") == 0;
    g_assert_true (writes_t5);
  }
  {
    g_autofree char *text = _cs_window_run_row_text (fx->win, row);
    g_auto(GStrv) fields = g_strsplit (text, "\t", -1);

    g_assert_cmpstr (fields[0], ==, gtk_label_get_text (GTK_LABEL (cell)));
    g_assert_cmpuint (g_strv_length (fields), ==, 8);
    g_assert_cmpstr (fields[3], ==, gtk_label_get_text (GTK_LABEL (gtk_grid_get_child_at (fx->win->run_grid, 3, row))));
  }
}

/* After a policy change drops the run table, the run's summary ("N tensors checked against
 * f64 ...") no longer shows: not in the status line, not in the run panel's progress bar. */
static void
test_run_summary_cleared (Fixture *fx, gconstpointer data)
{
  if (!open_seed (fx))
    return;
  g_action_group_activate_action (G_ACTION_GROUP (fx->win), "run", NULL);
  wait_idle (fx->win);
  g_assert_nonnull (strstr (gtk_label_get_text (fx->win->status_message), "tensors checked"));
  g_assert_true (gtk_widget_get_visible (GTK_WIDGET (fx->win->run_progress)));
  g_assert_nonnull (gtk_grid_get_child_at (fx->win->run_grid, 0, 1));
  gtk_drop_down_set_selected (policy_dropdown (fx->win, "matmul"), value_index ("matmul", "upcast-f32"));
  wait_idle (fx->win);
  g_assert_null (gtk_grid_get_child_at (fx->win->run_grid, 0, 1));
  g_test_message ("status after the policy change: %s", gtk_label_get_text (fx->win->status_message));
  g_assert_null (strstr (gtk_label_get_text (fx->win->status_message), "tensors checked"));
  g_assert_false (gtk_widget_get_visible (GTK_WIDGET (fx->win->run_progress)));
  /* a new run shows its summary again */
  g_action_group_activate_action (G_ACTION_GROUP (fx->win), "run", NULL);
  wait_idle (fx->win);
  g_assert_nonnull (strstr (gtk_label_get_text (fx->win->status_message), "tensors checked"));
  g_assert_true (gtk_widget_get_visible (GTK_WIDGET (fx->win->run_progress)));
}

/* Panning the canvas with a drag that starts on empty space keeps the selection; a click
 * (press and release without moving) there clears it.  The view's own click and drag
 * gestures get the signals GTK emits for a press, a motion and a release. */
static void
test_pan_keeps_selection (Fixture *fx, gconstpointer data)
{
  GtkWidget *view;
  GtkEventController *click, *drag;
  CsLayout *l;
  guint32 id = 0;
  CsView v0, v1;

  if (!open_seed (fx))
    return;
  show_family (fx->win, "forward");
  view = GTK_WIDGET (fx->win->forward_view);
  l = cs_graph_view_get_layout (fx->win->forward_view);
  g_assert_nonnull (l);
  for (guint i = 0; i < l->n_nodes && id == 0; i++)
    id = l->nodes[i].top_stmt_id;
  g_assert_cmpuint (id, !=, 0);
  /* (2, 2) is empty canvas: activating there selects nothing */
  cs_graph_view_select (fx->win->forward_view, id, FALSE);
  g_assert_cmpuint (cs_graph_view_activate_at (fx->win->forward_view, 2, 2, 1), ==, 0);
  click = find_controller (view, GTK_TYPE_GESTURE_CLICK);
  drag = find_controller (view, GTK_TYPE_GESTURE_DRAG);
  g_assert_nonnull (click);
  g_assert_nonnull (drag);

  cs_graph_view_select (fx->win->forward_view, id, FALSE);
  cs_graph_view_get_view (fx->win->forward_view, &v0);
  g_signal_emit_by_name (click, "pressed", 1, 2.0, 2.0);
  g_signal_emit_by_name (drag, "drag-begin", 2.0, 2.0);
  g_signal_emit_by_name (drag, "drag-update", 40.0, 30.0);
  g_signal_emit_by_name (drag, "drag-update", 80.0, 60.0);
  g_signal_emit_by_name (drag, "drag-end", 80.0, 60.0);
  wait_idle (fx->win);
  cs_graph_view_get_view (fx->win->forward_view, &v1);
  g_assert_cmpfloat (v1.tx - v0.tx, ==, 80.0);
  g_assert_cmpuint (cs_graph_view_get_selected (fx->win->forward_view), ==, id);

  /* a click on empty canvas still clears it */
  g_signal_emit_by_name (click, "pressed", 1, 2.0, 2.0);
  g_signal_emit_by_name (drag, "drag-begin", 2.0, 2.0);
  g_assert_cmpuint (cs_graph_view_get_selected (fx->win->forward_view), ==, id);
  g_signal_emit_by_name (drag, "drag-end", 0.0, 0.0);
  g_assert_cmpuint (cs_graph_view_get_selected (fx->win->forward_view), ==, 0);
}

/* (x + 1000) - 1000 in bf16 with redundant-casts=keep: every op of the region rounds to bf16,
 * so t1 = x + 1000 is stored with bf16's ulp of 4 at 1000 and t2 = t1 - 1000 keeps that error,
 * while t2's truth is x itself, a bf16 value (rounding floor 0: ratio inf); t3 = 2 t2 fails
 * too, but its prim comes later in the one region that makes all three.  t1 is rounded once
 * (ratio 1, passes).  The first divergence is t2: the button names it, Ctrl+D's action
 * selects the node writing it. */
static const char cancel_trace[] =
  "import thunder\n"
  "import thunder.torch as ltorch\n"
  "import torch\n"
  "from thunder.executors.torchex import no_autocast\n\n"
  "@torch.no_grad()\n"
  "@no_autocast\n"
  "def computation(x):\n"
  "  # x: \"cuda:0 bf16[16, 16]\"\n"
  "  t1 = ltorch.add(x, 1000.0, alpha=1)  # t1: \"cuda:0 bf16[16, 16]\"\n"
  "  t2 = ltorch.sub(t1, 1000.0, alpha=1)  # t2: \"cuda:0 bf16[16, 16]\"\n"
  "  t3 = ltorch.mul(t2, 2.0)  # t3: \"cuda:0 bf16[16, 16]\"\n"
  "  return (t3, t2, t1)\n";

static void
test_first_divergence (Fixture *fx, gconstpointer data)
{
  g_autofree char *path = open_text (fx, "cancel.txt", cancel_trace);
  CsTrace *trace;

  /* before a run there is nothing to jump to */
  g_assert_false (_cs_window_jump_to_divergence (fx->win));
  g_action_group_change_action_state (G_ACTION_GROUP (fx->win), "policy-redundant-casts",
                                      g_variant_new_string ("keep"));
  wait_idle (fx->win);
  g_action_group_activate_action (G_ACTION_GROUP (fx->win), "run", NULL);
  wait_idle (fx->win);
  g_assert_false (gtk_info_bar_get_revealed (fx->win->error_bar));
  g_assert_cmpstr (fx->win->run_divergence, ==, "t2");
  g_assert_cmpint (fx->win->run_divergence_family, ==, CS_FAMILY_FORWARD);
  g_assert_true (gtk_widget_get_visible (GTK_WIDGET (fx->win->divergence_button)));
  g_assert_nonnull (strstr (gtk_button_get_label (fx->win->divergence_button), "fwd t2"));
  /* the range column: t1 = x + 1000 (|x| of a few units) lies far past e4m3's 464 and well
   * inside f16, bf16 and e5m2 (57344): all 256 elements overflow e4m3, nothing else */
  {
    gboolean seen = FALSE;

    g_assert_cmpstr (gtk_label_get_text (GTK_LABEL (gtk_grid_get_child_at (fx->win->run_grid, 6, 0))), ==, "amax");
    for (int r = 1; r < 50; r++)
      {
        GtkWidget *cell = gtk_grid_get_child_at (fx->win->run_grid, 0, r);

        if (cell == NULL || g_strcmp0 (g_object_get_data (G_OBJECT (cell), CS_RUN_ROW_PROXY), "t1") != 0
            || GPOINTER_TO_INT (g_object_get_data (G_OBJECT (cell), CS_RUN_ROW_FAMILY)) != CS_FAMILY_FORWARD + 1)
          continue;
        seen = TRUE;
        g_assert_cmpstr (gtk_label_get_text (GTK_LABEL (gtk_grid_get_child_at (fx->win->run_grid, 7, r))),
                         ==, "e4m3: 256 overflow");
      }
    g_assert_true (seen);
  }
  show_family (fx->win, "backward");
  cs_graph_view_select (fx->win->forward_view, 0, FALSE);
  g_action_group_activate_action (G_ACTION_GROUP (fx->win), "first-divergence", NULL);
  wait_idle (fx->win);
  g_assert_cmpint (_cs_window_get_family (fx->win), ==, CS_FAMILY_FORWARD);
  trace = _cs_window_get_shown_trace (fx->win);
  {
    const CsStmt *s = _cs_window_find_stmt_deep (trace, cs_graph_view_get_selected (fx->win->forward_view), NULL);
    g_autoptr(GPtrArray) outs = g_ptr_array_new ();
    gboolean writes_t2 = FALSE;

    g_assert_nonnull (s);
    cs_stmt_collect_outputs (s, outs);
    for (guint i = 0; i < outs->len; i++)
      writes_t2 |= g_strcmp0 (((CsProxy *) g_ptr_array_index (outs, i))->name, "t2") == 0;
    g_assert_true (writes_t2);
  }
  /* under Thunder's default (the casts removed) t2 is computed from the unrounded f32 sum:
   * within its bound, and so is every tensor: no divergence */
  g_action_group_change_action_state (G_ACTION_GROUP (fx->win), "policy-redundant-casts",
                                      g_variant_new_string ("remove"));
  wait_idle (fx->win);
  g_action_group_activate_action (G_ACTION_GROUP (fx->win), "run", NULL);
  wait_idle (fx->win);
  g_assert_null (fx->win->run_divergence);
  g_assert_false (gtk_widget_get_sensitive (GTK_WIDGET (fx->win->divergence_button)));
  g_assert_false (_cs_window_jump_to_divergence (fx->win));
  remove_text (path);
}

/* The Rounding knob of the policy panel (issue 19) on the same (x + 1000) - 1000: under
 * rounding=eager each op you wrote rounds its result, so t1 = x + 1000 is stored in bf16 and
 * t2 = t1 - 1000 keeps its error (the first divergence is t2, as with redundant-casts=keep);
 * back at fused, the region keeps the sum in f32 and nothing diverges.  The panel's policy
 * line names rounding=eager only while it is set. */
static void
test_rounding_knob (Fixture *fx, gconstpointer data)
{
  g_autofree char *path = open_text (fx, "cancel.txt", cancel_trace);
  GtkDropDown *dd = policy_dropdown (fx->win, "rounding");

  g_assert_cmpuint (gtk_drop_down_get_selected (dd), ==, value_index ("rounding", "fused"));
  g_assert_null (strstr (gtk_label_get_text (fx->win->policy_label), "rounding"));
  gtk_drop_down_set_selected (dd, value_index ("rounding", "eager"));
  wait_idle (fx->win);
  g_assert_cmpint (fx->win->policy.rounding, ==, CS_ROUNDING_EAGER);
  g_assert_nonnull (strstr (gtk_label_get_text (fx->win->policy_label), "rounding=eager"));
  g_action_group_activate_action (G_ACTION_GROUP (fx->win), "run", NULL);
  wait_idle (fx->win);
  g_assert_false (gtk_info_bar_get_revealed (fx->win->error_bar));
  g_assert_cmpstr (fx->win->run_divergence, ==, "t2");
  g_action_group_change_action_state (G_ACTION_GROUP (fx->win), "policy-rounding",
                                      g_variant_new_string ("fused"));
  wait_idle (fx->win);
  g_assert_cmpuint (gtk_drop_down_get_selected (dd), ==, value_index ("rounding", "fused"));
  g_action_group_activate_action (G_ACTION_GROUP (fx->win), "run", NULL);
  wait_idle (fx->win);
  g_assert_null (fx->win->run_divergence);
  remove_text (path);
}

/* The precision lens in the window, on exp(x.float()).to(bf16) * y: from the pass that removed
 * the user's .to(bf16) on, the forward marks the mul that reads the unrounded value (one
 * mark), at the fuse pass (the cast still there) none, and under redundant-casts=keep none;
 * Ctrl+P's action turns the lens on in both graphs, whose region then has its rounding point. */
static const char cast_mul_trace[] =
  "import thunder\n"
  "import thunder.torch as ltorch\n"
  "import torch\n"
  "from thunder.executors.torchex import no_autocast\n\n"
  "@torch.no_grad()\n"
  "@no_autocast\n"
  "def computation(x, y):\n"
  "  # x: \"cuda:0 bf16[32, 64]\"\n"
  "  # y: \"cuda:0 bf16[32, 64]\"\n"
  "  t0 = ltorch.to(x, torch.float32, None, device=None, dtype=None, copy=False)  # t0: \"cuda:0 f32[32, 64]\"\n"
  "  t1 = ltorch.exp(t0)  # t1: \"cuda:0 f32[32, 64]\"\n"
  "  t2 = ltorch.to(t1, torch.bfloat16, None, device=None, dtype=None, copy=False)  # t2: \"cuda:0 bf16[32, 64]\"\n"
  "  t3 = ltorch.mul(t2, y)  # t3: \"cuda:0 bf16[32, 64]\"\n"
  "  return (t3,)\n";

static void
test_precision_lens (Fixture *fx, gconstpointer data)
{
  g_autofree char *path = open_text (fx, "cast_mul.txt", cast_mul_trace);
  CsAnalysis *an = fx->win->analysis;
  CsLayout *layout;
  guint n = cs_analysis_n_passes (an, CS_FAMILY_FORWARD), fuse = G_MAXUINT;
  gboolean rounding = FALSE;
  GVariant *state;

  show_family (fx->win, "forward");
  layout = cs_graph_view_get_layout (fx->win->forward_view);
  g_assert_nonnull (layout);
  g_assert_cmpuint (layout->n_user_casts_marked, ==, 1);
  for (guint i = 0; i < layout->n_nodes; i++)
    if (layout->nodes[i].user_casts_removed > 0)
      {
        g_assert_cmpstr (layout->nodes[i].label, ==, "mul");
        g_assert_cmpint (layout->nodes[i].user_cast_dtype, ==, CS_DTYPE_BF16);
      }
  g_assert_false (layout->precision_lens);
  g_action_group_change_action_state (G_ACTION_GROUP (fx->win), "precision-lens",
                                      g_variant_new_boolean (TRUE));
  wait_idle (fx->win);
  state = g_action_group_get_action_state (G_ACTION_GROUP (fx->win), "precision-lens");
  g_assert_true (g_variant_get_boolean (state));
  g_variant_unref (state);
  g_assert_true (cs_graph_view_get_precision_lens (fx->win->forward_view));
  g_assert_true (cs_graph_view_get_precision_lens (fx->win->backward_view));
  layout = cs_graph_view_get_layout (fx->win->forward_view);
  g_assert_true (layout->precision_lens);
  for (guint i = 0; i < layout->n_nodes; i++)
    rounding |= layout->nodes[i].rounds && layout->nodes[i].kind == CS_LAYOUT_NODE_CAST;
  g_assert_true (rounding);
  save_screenshot (GTK_WIDGET (fx->win), "castscope-precision-lens.png");

  for (guint i = 0; i < n; i++)
    if (g_strcmp0 (cs_analysis_pass_name (an, CS_FAMILY_FORWARD, i), "fuse") == 0)
      fuse = i;
  g_assert_cmpuint (fuse, <, n);
  gtk_adjustment_set_value (fx->win->pass_adjustment, fuse);
  wait_idle (fx->win);
  layout = cs_graph_view_get_layout (fx->win->forward_view);
  g_assert_cmpuint (layout->n_user_casts_marked, ==, 0);
  /* the lens stays on across layouts */
  g_assert_true (layout->precision_lens);
  gtk_adjustment_set_value (fx->win->pass_adjustment, n - 1);
  wait_idle (fx->win);
  g_assert_cmpuint (cs_graph_view_get_layout (fx->win->forward_view)->n_user_casts_marked, ==, 1);

  g_action_group_change_action_state (G_ACTION_GROUP (fx->win), "policy-redundant-casts",
                                      g_variant_new_string ("keep"));
  wait_idle (fx->win);
  g_assert_cmpuint (cs_graph_view_get_layout (fx->win->forward_view)->n_user_casts_marked, ==, 0);
  g_action_group_change_action_state (G_ACTION_GROUP (fx->win), "precision-lens",
                                      g_variant_new_boolean (FALSE));
  g_assert_false (cs_graph_view_get_layout (fx->win->forward_view)->precision_lens);
  remove_text (path);
}

/* The two elements a compare's sides are aligned on (CsWindow.compare_pair) are drawn at the
 * same x in their panes and the same height in the window. */
static void
assert_compare_aligned (CsWindow *win)
{
  CsLayoutHit hl, hr;
  double lx, ly, rx, ry;
  graphene_point_t p0 = GRAPHENE_POINT_INIT (0, 0), pl, pr;

  g_assert_cmpuint (win->compare_pair[0], !=, 0);
  g_assert_true (cs_layout_find_element (cs_graph_view_get_layout (win->compare_view),
                                         win->compare_pair[0], &hl));
  g_assert_true (cs_layout_find_element (cs_graph_view_get_layout (win->forward_view),
                                         win->compare_pair[1], &hr));
  element_px (win->compare_view, &hl, &lx, &ly);
  element_px (win->forward_view, &hr, &rx, &ry);
  g_assert_true (gtk_widget_compute_point (GTK_WIDGET (win->compare_view), GTK_WIDGET (win), &p0, &pl));
  g_assert_true (gtk_widget_compute_point (GTK_WIDGET (win->forward_view), GTK_WIDGET (win), &p0, &pr));
  g_test_message ("compare aligned on (%.1f, %.1f) | (%.1f, %.1f) (window y)", lx, ly + pl.y, rx,
                  ry + pr.y);
  g_assert_cmpfloat (fabs (lx - rx), <, 0.5);
  g_assert_cmpfloat (fabs (ly + pl.y - ry - pr.y), <, 0.5);
}

/* The side-by-side compare after matmul=upcast-f32 on the seed: the left side draws the
 * previous (native) forward at the same pass, as the older side of the diff: it marks removed
 * the casts the right side's ghosts stand for (the same count, by the same diff), and never
 * marks a cast added.  Zooming the right side zooms the left (aligned on a matched pair of
 * elements); selecting the matmul on the right
 * selects the native matmul (same origin, same op) on the left, and back. */
static void
test_compare (Fixture *fx, gconstpointer data)
{
  CsLayout *left, *right;
  CsLayoutDiffStats st;
  guint removed_left = 0;
  gint mm = -1;
  CsView a, b;
  guint32 id, left_id;
  const CsStmt *s;

  if (!open_seed (fx))
    return;
  show_family (fx->win, "forward");
  g_action_group_change_action_state (G_ACTION_GROUP (fx->win), "policy-matmul",
                                      g_variant_new_string ("upcast-f32"));
  wait_idle (fx->win);
  g_assert_nonnull (fx->win->previous);
  g_assert_false (gtk_widget_get_visible (GTK_WIDGET (fx->win->compare_box)));
  g_action_group_change_action_state (G_ACTION_GROUP (fx->win), "compare", g_variant_new_boolean (TRUE));
  wait_idle (fx->win);
  g_assert_true (gtk_widget_get_visible (GTK_WIDGET (fx->win->compare_box)));
  g_assert_nonnull (strstr (gtk_label_get_text (fx->win->compare_label), "matmul=native"));
  g_assert_true (cs_graph_view_get_trace (fx->win->compare_view)
                 == cs_analysis_get_final (fx->win->previous, CS_FAMILY_FORWARD));
  left = cs_graph_view_get_layout (fx->win->compare_view);
  right = cs_graph_view_get_layout (fx->win->forward_view);
  g_assert_nonnull (left);
  g_assert_nonnull (right);
  g_assert_true (cs_graph_view_get_diff_stats (fx->win->forward_view, &st));
  for (guint i = 0; i < left->n_nodes; i++)
    {
      g_assert_cmpint (left->nodes[i].mark, !=, CS_LAYOUT_MARK_ADDED);
      removed_left += left->nodes[i].diff_removed;
    }
  for (guint i = 0; i < left->n_clusters; i++)
    removed_left += left->clusters[i].diff_removed;
  g_test_message ("compare: %u casts removed marked on the left, %u ghosts on the right",
                  removed_left, st.casts_removed);
  g_assert_cmpuint (removed_left, ==, st.casts_removed);

  /* pan and zoom follow: the same zoom, the pair of matched elements the sides are aligned
   * on at the same place */
  cs_graph_view_zoom_by (fx->win->forward_view, 1.5);
  wait_frame ();
  cs_graph_view_get_view (fx->win->forward_view, &a);
  cs_graph_view_get_view (fx->win->compare_view, &b);
  g_assert_cmpfloat (a.scale, ==, b.scale);
  assert_compare_aligned (fx->win);

  /* matched selection: the right side's matmul selects the left side's matmul */
  for (guint i = 0; i < right->n_nodes; i++)
    if (right->nodes[i].badge != CS_LAYOUT_BADGE_NONE)
      mm = (gint) i;
  g_assert_cmpint (mm, >=, 0);
  id = right->nodes[mm].stmt_id;
  cs_graph_view_select (fx->win->forward_view, id, FALSE);
  g_signal_emit_by_name (fx->win->forward_view, "node-selected", (guint) id);
  left_id = cs_graph_view_get_selected (fx->win->compare_view);
  g_assert_cmpuint (left_id, !=, 0);
  s = _cs_window_find_stmt_deep (cs_graph_view_get_trace (fx->win->compare_view), left_id, NULL);
  g_assert_nonnull (s);
  g_assert_cmpstr (cs_op_semantic (s->op)->short_name, ==, "matmul");
  g_assert_cmpuint (s->origin, ==, _cs_window_find_stmt_deep (cs_graph_view_get_trace (fx->win->forward_view), id, NULL)->origin);
  /* and back: clearing on the right, then selecting on the left */
  cs_graph_view_select (fx->win->forward_view, 0, FALSE);
  g_signal_emit_by_name (fx->win->compare_view, "node-selected", (guint) left_id);
  wait_idle (fx->win);
  g_assert_cmpuint (cs_graph_view_get_selected (fx->win->forward_view), ==, id);

  /* The screenshot: the matmuls (selected) in the middle of both sides (the diff bar is in
   * the side panel, off the canvas); the left side follows the right side's pan. */
  {
    CsView v;

    right = cs_graph_view_get_layout (fx->win->forward_view);
    cs_graph_view_get_view (fx->win->forward_view, &v);
    v.scale /= 1.5;     /* the fitted zoom again */
    cs_view_center_on (&v, right, &right->nodes[mm].box,
                       gtk_widget_get_width (GTK_WIDGET (fx->win->forward_view)),
                       gtk_widget_get_height (GTK_WIDGET (fx->win->forward_view)));
    cs_graph_view_set_view (fx->win->forward_view, &v);
    g_signal_emit_by_name (fx->win->forward_view, "view-changed");
    wait_idle (fx->win);
    cs_graph_view_get_view (fx->win->compare_view, &b);
    g_assert_cmpfloat (b.scale, ==, v.scale);
    assert_compare_aligned (fx->win);
    save_screenshot (GTK_WIDGET (fx->win), "castscope-compare.png");
  }

  /* dismissed diff: the compare falls back to the pass before the shown one */
  g_action_group_activate_action (G_ACTION_GROUP (fx->win), "dismiss-diff", NULL);
  wait_idle (fx->win);
  g_assert_nonnull (strstr (gtk_label_get_text (fx->win->compare_label), "(left) before delete-last-used"));
  g_action_group_change_action_state (G_ACTION_GROUP (fx->win), "compare", g_variant_new_boolean (FALSE));
  g_assert_false (gtk_widget_get_visible (GTK_WIDGET (fx->win->compare_box)));
}

/* ---- side by side on the 8-block LLaMA (the new-user trial) ---- */

/* The statement (any level) of @t with op short name @op writing tensor @name, or NULL. */
static const CsStmt *
stmt_op_writing (const CsStmt *const *stmts, guint n, const char *op, const char *name)
{
  for (guint i = 0; i < n; i++)
    {
      const CsStmt *s = stmts[i], *r;
      const CsProxy *p = s->kind == CS_STMT_CALL ? cs_stmt_get_output (s) : NULL;

      if (p != NULL && g_strcmp0 (p->name, name) == 0
          && g_strcmp0 (cs_op_semantic (s->op)->short_name, op) == 0)
        return s;
      if (s->n_subs > 0
          && (r = stmt_op_writing ((const CsStmt *const *) s->subs, s->n_subs, op, name)) != NULL)
        return r;
    }
  return NULL;
}

/* Opens the LLaMA, sets matmul=upcast-f32, scrolls to the output projection (the last
 * matmul, outside the blocks) when @scroll, and turns Side by Side on. */
static gboolean
llama_side_by_side (Fixture *fx, gboolean scroll)
{
  g_autofree char *path = shared_trace ("thunder_llama_stack_initial.txt");

  if (!open_path (fx, path))
    return FALSE;
  gtk_drop_down_set_selected (policy_dropdown (fx->win, "matmul"), value_index ("matmul", "upcast-f32"));
  wait_idle (fx->win);
  if (scroll)
    {
      CsLayout *l = cs_graph_view_get_layout (fx->win->forward_view);
      gint lin = -1;

      for (guint i = 0; i < l->n_nodes; i++)
        if (l->nodes[i].badge != CS_LAYOUT_BADGE_NONE && l->nodes[i].group < 0)
          lin = (gint) i;
      g_assert_cmpint (lin, >=, 0);
      cs_graph_view_select (fx->win->forward_view, l->nodes[lin].stmt_id, TRUE);
      wait_idle (fx->win);
    }
  g_action_group_change_action_state (G_ACTION_GROUP (fx->win), "compare", g_variant_new_boolean (TRUE));
  wait_idle (fx->win);
  g_assert_true (gtk_widget_get_visible (GTK_WIDGET (fx->win->compare_box)));
  g_assert_nonnull (cs_graph_view_get_layout (fx->win->compare_view));
  return TRUE;
}

/* Side by Side opens with both panes drawing their graph at the same zoom: graph pixels in
 * the 41x41 px at the centre of each pane (the trial found the left pane blank), scrolled to
 * the output projection or (@data non-NULL) with layers.0 expanded and an op in it selected
 * (the left side draws its layers collapsed unless told). */
static void
test_sbs_first_frame (Fixture *fx, gconstpointer data)
{
  CsGraphView *panes[2];
  CsView a, b;

  if (!llama_side_by_side (fx, data == NULL))
    return;
  if (data != NULL)
    {
      CsGraphView *view = fx->win->forward_view;
      CsLayout *l;
      gint op = -1;

      g_action_group_change_action_state (G_ACTION_GROUP (fx->win), "compare", g_variant_new_boolean (FALSE));
      wait_idle (fx->win);
      cs_graph_view_set_group_expanded (view, "layers.0", TRUE);
      wait_idle (fx->win);
      l = cs_graph_view_get_layout (view);
      for (guint i = 0; i < l->n_nodes && op < 0; i++)
        if (l->nodes[i].kind == CS_LAYOUT_NODE_OP && l->nodes[i].group >= 0
            && g_str_has_prefix (l->grouping->groups[l->nodes[i].group].name, "layers.0"))
          op = (gint) i;
      g_assert_cmpint (op, >=, 0);
      cs_graph_view_select (view, l->nodes[op].stmt_id, TRUE);
      wait_idle (fx->win);
      g_action_group_change_action_state (G_ACTION_GROUP (fx->win), "compare", g_variant_new_boolean (TRUE));
      wait_idle (fx->win);
    }
  panes[0] = fx->win->compare_view;
  panes[1] = fx->win->forward_view;
  for (guint k = 0; k < 2; k++)
    {
      g_autofree guchar *pixels = NULL;
      int w, h;
      gsize stride;
      guint ink;

      pixels = widget_pixels (GTK_WIDGET (panes[k]), &w, &h, &stride);
      ink = ink_around (pixels, stride, w, h, w / 2, h / 2, 20);
      g_test_message ("%s pane %dx%d: %u graph px in the 41x41 at its centre", k ? "right" : "left",
                      w, h, ink);
      g_assert_cmpint (w, >, 100);
      g_assert_cmpuint (ink, >, 0);
    }
  save_screenshot (GTK_WIDGET (fx->win), data ? "sbs-first-frame-expanded.png" : "sbs-first-frame.png");
  cs_graph_view_get_view (panes[0], &a);
  cs_graph_view_get_view (panes[1], &b);
  g_assert_cmpfloat (a.scale, ==, b.scale);
  /* both sides draw layers.0 the same way (expanded when the right side expanded it) */
  g_assert_true (cs_graph_view_get_group_expanded (panes[0], "layers.0")
                 == cs_graph_view_get_group_expanded (panes[1], "layers.0"));
  g_assert_true (cs_graph_view_get_group_expanded (panes[1], "layers.0") == (data != NULL));
  if (data != NULL)
    assert_compare_aligned (fx->win);
}

/* The node of @view's layout nearest the middle of the widget that has a match on the other
 * side, or -1. */
static gint
matched_node_near_centre (CsWindow *win, CsGraphView *view, gboolean to_left)
{
  CsLayout *l = cs_graph_view_get_layout (view);
  int w = gtk_widget_get_width (GTK_WIDGET (view)), h = gtk_widget_get_height (GTK_WIDGET (view));
  double best = G_MAXDOUBLE;
  gint best_i = -1;

  for (guint i = 0; i < l->n_nodes; i++)
    {
      CsLayoutHit hit = { CS_LAYOUT_HIT_NODE, i };
      double x, y;

      if ((l->nodes[i].kind != CS_LAYOUT_NODE_OP && l->nodes[i].kind != CS_LAYOUT_NODE_CAST
           && l->nodes[i].kind != CS_LAYOUT_NODE_REGION) || l->nodes[i].stmt_id == 0
          || _cs_window_compare_match (win, to_left, l->nodes[i].stmt_id) == 0)
        continue;
      element_px (view, &hit, &x, &y);
      if (x < 0 || y < 0 || x > w || y > h)
        continue;
      if ((x - w / 2.0) * (x - w / 2.0) + (y - h / 2.0) * (y - h / 2.0) < best)
        {
          best = (x - w / 2.0) * (x - w / 2.0) + (y - h / 2.0) * (y - h / 2.0);
          best_i = (gint) i;
        }
    }
  return best_i;
}

/* A click on either pane keeps the clicked node where it is in its pane and pans the other
 * pane to its match (the trial found a click on the right scrolling the right away). */
static void
test_sbs_click_keeps_node (Fixture *fx, gconstpointer data)
{
  if (!llama_side_by_side (fx, FALSE))
    return;
  for (guint side = 0; side < 2; side++)
    {
      gboolean right = side == 0;
      CsGraphView *from = right ? fx->win->forward_view : fx->win->compare_view;
      CsGraphView *to = right ? fx->win->compare_view : fx->win->forward_view;
      gint n = matched_node_near_centre (fx->win, from, right);
      CsLayoutHit hit;
      guint32 id, match;
      double x0, y0, x1, y1, mx, my;
      int w = gtk_widget_get_width (GTK_WIDGET (to)), h = gtk_widget_get_height (GTK_WIDGET (to));

      g_assert_cmpint (n, >=, 0);
      hit = (CsLayoutHit) { CS_LAYOUT_HIT_NODE, (guint) n };
      id = cs_graph_view_get_layout (from)->nodes[n].stmt_id;
      match = _cs_window_compare_match (fx->win, right, id);
      element_px (from, &hit, &x0, &y0);
      /* as a click does: select, then ::node-selected */
      cs_graph_view_select (from, id, FALSE);
      g_signal_emit_by_name (from, "node-selected", (guint) id);
      wait_idle (fx->win);
      g_assert_cmpuint (cs_graph_view_get_selected (from), ==, id);
      element_px (from, &hit, &x1, &y1);
      g_assert_cmpuint (cs_graph_view_get_selected (to), ==, match);
      g_assert_true (find_selected_px (to, &mx, &my));
      g_test_message ("%s click: node (%.1f, %.1f) -> (%.1f, %.1f); match at (%.1f, %.1f)",
                      right ? "right" : "left", x0, y0, x1, y1, mx, my);
      g_assert_cmpfloat (fabs (x1 - x0), <, 1.0);
      g_assert_cmpfloat (fabs (y1 - y0), <, 1.0);
      g_assert_cmpfloat (mx, >=, 0);
      g_assert_cmpfloat (mx, <=, w);
      g_assert_cmpfloat (my, >=, 0);
      g_assert_cmpfloat (my, <=, h);
    }
}

/* native -> upcast-f32 -> native: the diff (banner and Side by Side) is against upcast-f32,
 * the previous policy (README: "shows the previous policy"), and counts the removed casts. */
static void
test_diff_previous_policy (Fixture *fx, gconstpointer data)
{
  CsLayoutDiffStats st;
  const char *text;
  g_autofree char *minus = NULL;

  if (!open_seed (fx))
    return;
  show_family (fx->win, "forward");
  g_action_group_change_action_state (G_ACTION_GROUP (fx->win), "policy-matmul",
                                      g_variant_new_string ("upcast-f32"));
  wait_idle (fx->win);
  g_action_group_change_action_state (G_ACTION_GROUP (fx->win), "policy-matmul",
                                      g_variant_new_string ("native"));
  wait_idle (fx->win);
  g_assert_nonnull (fx->win->previous);
  {
    g_autofree char *was = cs_policy_to_string (cs_analysis_get_policy (fx->win->previous));
    g_assert_nonnull (strstr (was, "matmul=upcast-f32"));
  }
  g_assert_true (gtk_info_bar_get_revealed (fx->win->diff_bar));
  g_assert_true (cs_graph_view_get_diff_stats (fx->win->forward_view, &st));
  g_test_message ("back to native: +%u -%u casts", st.casts_added, st.casts_removed);
  g_assert_cmpuint (st.casts_removed, >, 0);
  minus = g_strdup_printf ("−%u casts", st.casts_removed);
  text = gtk_label_get_text (fx->win->diff_label);
  g_assert_nonnull (strstr (text, minus));
  g_assert_null (strstr (text, "−0 casts"));
  g_action_group_change_action_state (G_ACTION_GROUP (fx->win), "compare", g_variant_new_boolean (TRUE));
  wait_idle (fx->win);
  g_assert_nonnull (strstr (gtk_label_get_text (fx->win->compare_label), "matmul=upcast-f32"));
  g_assert_true (cs_graph_view_get_trace (fx->win->compare_view)
                 == cs_analysis_get_final (fx->win->previous, CS_FAMILY_FORWARD));
}

/* A selection survives a policy flip by what it is, not by its tensor's name: under
 * upcast-f32 the LLaMA's `t12 = convert_element_type(...)` f32[2, 64, 128]; back under
 * native `t12` is a prims.mul of another shape, which must not be selected. */
static void
test_policy_flip_selection (Fixture *fx, gconstpointer data)
{
  g_autofree char *path = shared_trace ("thunder_llama_stack_initial.txt");
  CsGraphView *view = fx->win->forward_view;
  CsTrace *t;
  const CsStmt *s;
  guint32 origin;

  if (!open_path (fx, path))
    return;
  gtk_drop_down_set_selected (policy_dropdown (fx->win, "matmul"), value_index ("matmul", "upcast-f32"));
  wait_idle (fx->win);
  t = cs_graph_view_get_trace (view);
  s = stmt_op_writing ((const CsStmt *const *) t->stmts, t->n_stmts, "convert_element_type", "t12");
  g_assert_nonnull (s);
  origin = s->origin;
  _cs_window_select_stmt (fx->win, s->id, FALSE);
  wait_idle (fx->win);
  g_assert_cmpuint (cs_graph_view_get_selected (view), !=, 0);
  gtk_drop_down_set_selected (policy_dropdown (fx->win, "matmul"), value_index ("matmul", "native"));
  wait_idle (fx->win);
  t = cs_graph_view_get_trace (view);
  s = _cs_window_find_stmt_deep (t, cs_graph_view_get_selected (view), NULL);
  g_test_message ("after the flip: %s -> %s (origin %u, was %u)",
                  s ? cs_op_semantic (s->op)->short_name : "(none)",
                  s && cs_stmt_get_output (s) ? cs_stmt_get_output (s)->name : "-",
                  s ? s->origin : 0, origin);
  if (s != NULL && s->kind == CS_STMT_CALL)
    {
      const CsProxy *p = cs_stmt_get_output (s);

      g_assert_false (p != NULL && g_strcmp0 (p->name, "t12") == 0
                      && g_strcmp0 (cs_op_semantic (s->op)->short_name, "mul") == 0);
      g_assert_cmpuint (s->origin, ==, origin);
    }
}

/* The layout node of @view drawing the statement that writes @name, or -1. */
static gint
node_writing (CsGraphView *view, const char *name)
{
  CsLayout *l = cs_graph_view_get_layout (view);
  CsTrace *t = cs_graph_view_get_trace (view);

  for (guint i = 0; l != NULL && i < l->n_nodes; i++)
    {
      const CsStmt *s = _cs_window_find_stmt_deep (t, l->nodes[i].stmt_id, NULL);
      const CsProxy *p = s && s->kind == CS_STMT_CALL ? cs_stmt_get_output (s) : NULL;

      if (p != NULL && g_strcmp0 (p->name, name) == 0)
        return (gint) i;
    }
  return -1;
}

static const char *
selected_output (CsGraphView *view)
{
  const CsStmt *s = _cs_window_find_stmt_deep (cs_graph_view_get_trace (view),
                                               cs_graph_view_get_selected (view), NULL);
  const CsProxy *p = s && s->kind == CS_STMT_CALL ? cs_stmt_get_output (s) : NULL;

  return p ? p->name : NULL;
}

/* Thunder's trace (right, the window's file) beside torch.compile's graphs of the same function
 * (left, win.compare-file), matched by core/cs-aten-match.h.  The GELU MLP: Thunder's forward
 * rounds twice in its one region, Inductor's seven times in two (it also rounds the bias adds);
 * the label says 7 | 2 casts, 2 matched, 2 | 1 regions, 1 matched; selecting Thunder's GELU
 * downcast t1 selects Inductor's convert_element_type_4, and back; the backward is matched
 * too.  RMSNorm + SwiGLU: all 11 casts and 4 regions of the forward match.  The seed
 * foo(a, b, w) = matmul(a + b, w): 3 casts and 1 region on each side, all matched, Thunder's
 * bf16 rounding of a + b (t4) is Inductor's `add`; its picture is the README's
 * (castscope-compare-torch-compile.png). */
static void
test_compare_torch_compile (Fixture *fx, gconstpointer data)
{
  const char *dir = g_getenv ("CS_DATA_DIR");
  g_autofree char *mlp = g_build_filename (dir, "mlp_gelu.txt", NULL);
  g_autofree char *mlp_tc = g_build_filename (dir, "aten", "mlp_gelu_bf16.txt", NULL);
  g_autofree char *rms = g_build_filename (dir, "rmsnorm_swiglu.txt", NULL);
  g_autofree char *rms_tc = g_build_filename (dir, "aten", "rmsnorm_swiglu_bf16.txt", NULL);
  g_autoptr(GFile) f_mlp_tc = g_file_new_for_path (mlp_tc);
  g_autoptr(GFile) f_rms_tc = g_file_new_for_path (rms_tc);
  g_autofree char *seed = g_build_filename (dir, "seed_foo.txt", NULL);
  g_autofree char *seed_tc = g_build_filename (dir, "aten", "seed_foo_bf16.txt", NULL);
  g_autoptr(GFile) f_seed_tc = g_file_new_for_path (seed_tc);
  const char *label;
  gint n;
  guint32 right_id;

  if (!open_path (fx, mlp))
    return;
  show_family (fx->win, "forward");
  cs_window_compare_with_file (fx->win, f_mlp_tc);
  wait_idle (fx->win);
  g_assert_false (gtk_info_bar_get_revealed (fx->win->error_bar));
  g_assert_true (fx->win->comparing);
  g_assert_true (gtk_widget_get_visible (GTK_WIDGET (fx->win->compare_box)));
  g_assert_nonnull (cs_graph_view_get_layout (fx->win->compare_view));
  g_assert_nonnull (cs_graph_view_get_layout (fx->win->forward_view));
  /* left: Inductor's forward `forward`; right: Thunder's `computation` */
  g_assert_cmpstr (cs_graph_view_get_trace (fx->win->compare_view)->name, ==, "forward");
  g_assert_cmpstr (cs_graph_view_get_trace (fx->win->forward_view)->name, ==, "computation");
  label = gtk_label_get_text (fx->win->compare_label);
  g_test_message ("forward: %s", label);
  g_assert_nonnull (strstr (label, "torch.compile mlp_gelu_bf16.txt (left)"));
  g_assert_nonnull (strstr (label, "Thunder mlp_gelu.txt (right)"));
  g_assert_nonnull (strstr (label, "casts 7 | 2, 2 matched"));
  g_assert_nonnull (strstr (label, "regions 2 | 1, 1 matched"));

  /* Thunder's t1 (the GELU's f32 -> bf16) selects Inductor's convert_element_type_4 */
  n = node_writing (fx->win->forward_view, "t1");
  g_assert_cmpint (n, >=, 0);
  right_id = cs_graph_view_get_layout (fx->win->forward_view)->nodes[n].stmt_id;
  cs_graph_view_select (fx->win->forward_view, right_id, FALSE);
  g_signal_emit_by_name (fx->win->forward_view, "node-selected", (guint) right_id);
  g_assert_cmpstr (selected_output (fx->win->compare_view), ==, "convert_element_type_4");
  /* and back */
  cs_graph_view_select (fx->win->forward_view, 0, FALSE);
  g_signal_emit_by_name (fx->win->compare_view, "node-selected",
                         (guint) cs_graph_view_get_selected (fx->win->compare_view));
  wait_idle (fx->win);
  g_assert_cmpuint (cs_graph_view_get_selected (fx->win->forward_view), ==, right_id);

  show_family (fx->win, "backward");
  label = gtk_label_get_text (fx->win->compare_label);
  g_test_message ("backward: %s", label);
  g_assert_cmpstr (cs_graph_view_get_trace (fx->win->compare_view)->name, ==, "backward_fn");
  /* 5 of 7: the matcher pairs casts in trace order, and Thunder's backward region lists its
   * ops in toposort_bsym_dag order (issue 18), in which two of the bf16 roundings come in the
   * other order than in Inductor's graph; 6 matched before that order was mirrored */
  g_assert_nonnull (strstr (label, "casts 7 | 7, 5 matched"));
  g_assert_nonnull (strstr (label, "regions 2 | 2, 2 matched"));

  /* a policy change re-runs both sides: matmul=upcast-f32 leaves the forward's two rounding
   * casts matched on both */
  show_family (fx->win, "forward");
  g_action_group_change_action_state (G_ACTION_GROUP (fx->win), "policy-matmul",
                                      g_variant_new_string ("upcast-f32"));
  wait_idle (fx->win);
  g_assert_cmpint (cs_analysis_get_policy (fx->win->compare_analysis)->matmul, ==,
                   CS_MATMUL_UPCAST_F32);
  label = gtk_label_get_text (fx->win->compare_label);
  g_test_message ("forward, upcast-f32: %s", label);
  g_assert_nonnull (fx->win->compare_match);
  g_assert_cmpuint (fx->win->compare_match->casts->len, >=, 2);
  g_action_group_change_action_state (G_ACTION_GROUP (fx->win), "policy-matmul",
                                      g_variant_new_string ("native"));
  wait_idle (fx->win);

  /* RMSNorm + SwiGLU: every cast and region of the forward matched */
  if (!open_path (fx, rms))
    return;
  show_family (fx->win, "forward");
  cs_window_compare_with_file (fx->win, f_rms_tc);
  wait_idle (fx->win);
  label = gtk_label_get_text (fx->win->compare_label);
  g_test_message ("rmsnorm forward: %s", label);
  g_assert_nonnull (strstr (label, "torch.compile rmsnorm_swiglu_bf16.txt (left)"));
  /* 9 casts a side since issue 18's rematerialization: SiLU joins its consumer's region and
   * silu * up is computed in f32, so SiLU's bf16 rounding and its upcast are gone (2 fewer
   * casts each side); Thunder's forward has 3 regions, the graph of torch.compile 4 */
  g_assert_nonnull (strstr (label, "casts 9 | 9, 9 matched"));
  g_assert_nonnull (strstr (label, "regions 4 | 3, 3 matched"));
  /* the gate projection upcast for SiLU (fw_t96 since rematerialization moved it into the
   * SiLU-times-up region) */
  n = node_writing (fx->win->forward_view, "fw_t96");
  g_assert_cmpint (n, >=, 0);
  right_id = cs_graph_view_get_layout (fx->win->forward_view)->nodes[n].stmt_id;
  cs_graph_view_select (fx->win->forward_view, right_id, FALSE);
  g_signal_emit_by_name (fx->win->forward_view, "node-selected", (guint) right_id);
  /* the same cast of torch.compile's graph, also moved by rematerialization (hence fw_) */
  g_assert_cmpstr (selected_output (fx->win->compare_view), ==, "fw_convert_element_type_4");

  /* the seed foo(a, b, w) = matmul(a + b, w): small enough to read fitted, the README's
   * picture */
  if (!open_path (fx, seed))
    return;
  show_family (fx->win, "forward");
  cs_window_compare_with_file (fx->win, f_seed_tc);
  wait_idle (fx->win);
  label = gtk_label_get_text (fx->win->compare_label);
  g_test_message ("seed forward: %s", label);
  g_assert_nonnull (strstr (label, "casts 3 | 3, 3 matched"));
  g_assert_nonnull (strstr (label, "regions 1 | 1, 1 matched"));
  /* Thunder's rounding of a + b to bf16 (t4) is Inductor's `add` */
  n = node_writing (fx->win->forward_view, "t4");
  g_assert_cmpint (n, >=, 0);
  right_id = cs_graph_view_get_layout (fx->win->forward_view)->nodes[n].stmt_id;
  cs_graph_view_select (fx->win->forward_view, right_id, FALSE);
  g_signal_emit_by_name (fx->win->forward_view, "node-selected", (guint) right_id);
  g_assert_cmpstr (selected_output (fx->win->compare_view), ==, "add");
  /* both sides fitted (another file's sides pan and zoom on their own) */
  {
    /* as a user makes room for two graphs: the policy panel folded, the trace text lowered,
     * the details panel narrowed (the paned dividers above the compare: center, main, outer) */
    GtkWidget *w = GTK_WIDGET (fx->win->compare_paned);
    GtkPaned *panes[3] = { NULL, NULL, NULL };
    const int pos[3] = { 700, 10000, 0 };

    gtk_window_set_default_size (GTK_WINDOW (fx->win), 1600, 1000);
    wait_idle (fx->win);
    for (int k = 0; k < 3; k++)
      {
        w = gtk_widget_get_ancestor (gtk_widget_get_parent (w), GTK_TYPE_PANED);
        g_assert_nonnull (w);
        panes[k] = GTK_PANED (w);
      }
    for (int k = 0; k < 3; k++)
      gtk_paned_set_position (panes[k], pos[k]);
    wait_idle (fx->win);
    gtk_paned_set_position (fx->win->compare_paned,
                            gtk_widget_get_width (GTK_WIDGET (fx->win->compare_paned)) / 2);
    wait_idle (fx->win);
  }
  cs_graph_view_fit (fx->win->forward_view);
  cs_graph_view_fit (fx->win->compare_view);
  wait_frame ();
  save_screenshot (GTK_WIDGET (fx->win), "castscope-compare-torch-compile.png");
  g_action_group_activate_action (G_ACTION_GROUP (fx->win), "compare-close-file", NULL);
  wait_idle (fx->win);
  g_assert_null (fx->win->compare_analysis);
  g_assert_nonnull (strstr (gtk_label_get_text (fx->win->compare_label), "(left)"));
  g_assert_null (strstr (gtk_label_get_text (fx->win->compare_label), "torch.compile"));
}

/* The lens on the GELU MLP (data/mlp_gelu.txt): both bf16 linears accumulate in f32 and round
 * (rounding points), the GELU region computes in f32 and rounds; after a CPU Run the ratio heat
 * of the forward's output t2 is at least 1 (the floor: no bf16 value is nearer f64).  The
 * README's picture of heat and lens together. */
static void
test_lens_mlp (Fixture *fx, gconstpointer data)
{
  g_autofree char *path = g_build_filename (g_getenv ("CS_DATA_DIR"), "mlp_gelu.txt", NULL);
  CsLayout *l;
  guint n_linear_rounds = 0, n_region_rounds = 0;
  gboolean gpu, t2 = FALSE;

  if (!open_path (fx, path))
    return;
  show_family (fx->win, "forward");
  g_action_group_change_action_state (G_ACTION_GROUP (fx->win), "precision-lens",
                                      g_variant_new_boolean (TRUE));
  g_action_group_activate_action (G_ACTION_GROUP (fx->win), "run", NULL);
  wait_idle (fx->win);
  g_assert_false (gtk_info_bar_get_revealed (fx->win->error_bar));
  gpu = strstr (fx->win->last_run_summary, "(CUDA graph)") != NULL;
  l = cs_graph_view_get_layout (fx->win->forward_view);
  g_assert_true (l->precision_lens);
  for (guint i = 0; i < l->n_nodes; i++)
    {
      const CsLayoutNode *n = &l->nodes[i];

      if (n->badge == CS_LAYOUT_BADGE_TENSOR_CORE)
        {
          g_assert_cmpint (n->compute_dtype, ==, CS_DTYPE_F32);
          n_linear_rounds += n->rounds;
        }
      if (n->kind == CS_LAYOUT_NODE_CAST && n->dtype == CS_DTYPE_BF16 && n->rounds)
        n_region_rounds++;
      if (n->kind == CS_LAYOUT_NODE_OUTPUT && g_strcmp0 (n->name, "t2") == 0)
        {
          t2 = TRUE;
          g_assert_true (n->has_value);
          if (!gpu)
            g_assert_cmpfloat (n->value, >=, 1.0);
        }
    }
  g_assert_cmpuint (n_linear_rounds, ==, 2);
  g_assert_cmpuint (n_region_rounds, >=, 1);
  g_assert_true (t2);
  /* The screenshot: the first linear (the top tensor-core node: bf16 operands, f32
   * accumulation, its rounding) selected and centred at 160 % so that the lens's texts are
   * readable; fitted whole, the graph is too small for any text. */
  {
    gint top = -1;
    CsView v;

    for (guint i = 0; i < l->n_nodes; i++)
      if (l->nodes[i].badge == CS_LAYOUT_BADGE_TENSOR_CORE
          && (top < 0 || l->nodes[i].box.y1 > l->nodes[top].box.y1))
        top = (gint) i;
    g_assert_cmpint (top, >=, 0);
    cs_graph_view_get_view (fx->win->forward_view, &v);
    v.scale = 1.6;
    cs_view_center_on (&v, l, &l->nodes[top].box, gtk_widget_get_width (GTK_WIDGET (fx->win->forward_view)),
                       gtk_widget_get_height (GTK_WIDGET (fx->win->forward_view)));
    cs_graph_view_set_view (fx->win->forward_view, &v);
    cs_graph_view_select (fx->win->forward_view, l->nodes[top].stmt_id, FALSE);
    wait_idle (fx->win);
    g_assert_cmpfloat (cs_graph_view_get_zoom (fx->win->forward_view), ==, 1.6);
  }
  save_screenshot (GTK_WIDGET (fx->win), "castscope-mlp-lens-heat.png");
}

/* The run table's columns: the last header cell (and so every column) lies within the grid's
 * allocation (nothing is cut off by the panel), and where it is right of the scroller's page
 * the horizontal scroller reaches it (its range spans the grid and its scrollbar is shown);
 * the Tensor column stays narrow enough that err, ref_err and ratio show without scrolling. */
static void
assert_run_table_reachable (CsWindow *win)
{
  GtkWidget *grid = GTK_WIDGET (win->run_grid);
  GtkWidget *sw = gtk_widget_get_ancestor (grid, GTK_TYPE_SCROLLED_WINDOW);
  GtkAdjustment *adj;
  GtkWidget *last = NULL, *ratio;
  graphene_rect_t lb, rb;
  int last_col = -1, gw = gtk_widget_get_width (grid);
  double page, upper;

  g_assert_nonnull (sw);
  for (int col = 0; col < 16; col++)
    if (gtk_grid_get_child_at (win->run_grid, col, 0) != NULL)
      {
        last = gtk_grid_get_child_at (win->run_grid, col, 0);
        last_col = col;
      }
  g_assert_nonnull (last);
  ratio = gtk_grid_get_child_at (win->run_grid, 3, 0);
  g_assert_cmpstr (gtk_label_get_text (GTK_LABEL (ratio)), ==, "ratio");
  g_assert_true (gtk_widget_compute_bounds (last, grid, &lb));
  g_assert_true (gtk_widget_compute_bounds (ratio, GTK_WIDGET (sw), &rb));
  adj = gtk_scrolled_window_get_hadjustment (GTK_SCROLLED_WINDOW (sw));
  page = gtk_adjustment_get_page_size (adj);
  upper = gtk_adjustment_get_upper (adj);
  g_test_message ("window %d px: run table %d px wide, column %d ends at %.0f px; scroller "
                  "page %.0f of %.0f px; ratio column ends at %.0f px of the page",
                  gtk_widget_get_width (GTK_WIDGET (win)), gw, last_col,
                  lb.origin.x + lb.size.width, page, upper, rb.origin.x + rb.size.width);
  g_assert_cmpfloat (lb.origin.x + lb.size.width, <=, gw + 0.5);
  g_assert_cmpfloat (upper, >=, gw - 0.5);
  if (lb.origin.x + lb.size.width > page + 0.5)
    {
      GtkPolicyType hp;

      gtk_scrolled_window_get_policy (GTK_SCROLLED_WINDOW (sw), &hp, NULL);
      g_assert_true (hp == GTK_POLICY_AUTOMATIC || hp == GTK_POLICY_ALWAYS);
      g_assert_true (gtk_widget_get_visible (gtk_scrolled_window_get_hscrollbar (GTK_SCROLLED_WINDOW (sw))));
    }
  /* err, ref_err and ratio need no scrolling */
  g_assert_cmpfloat (rb.origin.x + rb.size.width, <=, page + 0.5);
}

/* After a CPU run of the GELU MLP, every column of the run table is visible or reachable by
 * its scroller in a 1440 x 880 window and a 1600 x 1000 one. */
static void
test_run_table_columns (Fixture *fx, gconstpointer data)
{
  g_autofree char *path = g_build_filename (g_getenv ("CS_DATA_DIR"), "mlp_gelu.txt", NULL);

  if (!open_path (fx, path))
    return;
  g_action_group_activate_action (G_ACTION_GROUP (fx->win), "run", NULL);
  wait_idle (fx->win);
  g_assert_false (gtk_info_bar_get_revealed (fx->win->error_bar));
  g_assert_nonnull (gtk_grid_get_child_at (fx->win->run_grid, 0, 1));
  assert_run_table_reachable (fx->win);
  gtk_window_set_default_size (GTK_WINDOW (fx->win), 1600, 1000);
  wait_idle (fx->win);
  g_assert_cmpint (gtk_widget_get_width (GTK_WIDGET (fx->win)), >=, 1590);
  assert_run_table_reachable (fx->win);
}

/* Every cell of the verdict's columns (tensor, err, ref_err, ratio) of the run table's tensor
 * rows lies inside the scroller's page, left of its vertical scrollbar, and is drawn at least
 * as wide as its text (nothing cut); returns the widest overflow seen, px (0 when none). */
static double
run_table_cut_px (CsWindow *win)
{
  GtkWidget *grid = GTK_WIDGET (win->run_grid);
  GtkWidget *sw = gtk_widget_get_ancestor (grid, GTK_TYPE_SCROLLED_WINDOW);
  GtkAdjustment *adj = gtk_scrolled_window_get_hadjustment (GTK_SCROLLED_WINDOW (sw));
  GtkWidget *vbar = gtk_scrolled_window_get_vscrollbar (GTK_SCROLLED_WINDOW (sw));
  double page = gtk_adjustment_get_page_size (adj), worst = 0;
  graphene_rect_t vb;
  int n = 0;

  g_assert_true (gtk_widget_compute_bounds (vbar, sw, &vb));
  for (int r = 1; r < 400; r++)
    {
      GtkWidget *first = gtk_grid_get_child_at (win->run_grid, 0, r);

      if (first == NULL || g_object_get_data (G_OBJECT (first), CS_RUN_ROW_PROXY) == NULL)
        continue;   /* blank, header or region rows */
      for (int col = 0; col <= 3; col++)
        {
          GtkWidget *cell = gtk_grid_get_child_at (win->run_grid, col, r);
          graphene_rect_t b;
          int nat;

          g_assert_nonnull (cell);
          g_assert_true (gtk_widget_compute_bounds (cell, sw, &b));
          worst = MAX (worst, b.origin.x + b.size.width - page);
          if (gtk_widget_get_visible (vbar))
            worst = MAX (worst, b.origin.x + b.size.width - vb.origin.x);
          if (gtk_label_get_ellipsize (GTK_LABEL (cell)) == PANGO_ELLIPSIZE_NONE)
            {
              gtk_widget_measure (cell, GTK_ORIENTATION_HORIZONTAL, -1, NULL, &nat, NULL, NULL);
              worst = MAX (worst, nat - b.size.width);
            }
          n++;
        }
    }
  g_assert_cmpint (n, >, 0);
  g_test_message ("window %d px: %d cells, page %.0f px, vertical scrollbar at %.0f px, worst "
                  "overflow %.1f px", gtk_widget_get_width (GTK_WIDGET (win)), n, page,
                  vb.origin.x, worst);
  return worst;
}

/* After a CPU run of the 8-block LLaMA, whose ratios are long ("5.06e+04"), the tensor, err,
 * ref_err and ratio columns show whole, clear of the always-drawn vertical scrollbar, in a
 * window of 1430 px and one of 1600 px (side panels placed from that width, as at start). */
static void
test_run_table_llama_fits (Fixture *fx, gconstpointer data)
{
  g_autofree char *path = shared_trace ("thunder_llama_stack_initial.txt");
  const int widths[] = { 1430, 1600 };

  if (!open_path (fx, path))
    return;
  g_action_group_activate_action (G_ACTION_GROUP (fx->win), "run", NULL);
  wait_idle (fx->win);
  g_assert_false (gtk_info_bar_get_revealed (fx->win->error_bar));
  g_assert_nonnull (gtk_grid_get_child_at (fx->win->run_grid, 0, 1));
  for (guint i = 0; i < G_N_ELEMENTS (widths); i++)
    {
      fx->win->panes_placed = FALSE;
      gtk_window_set_default_size (GTK_WINDOW (fx->win), widths[i], 900);
      wait_idle (fx->win);
      g_assert_cmpint (abs (gtk_widget_get_width (GTK_WIDGET (fx->win)) - widths[i]), <=, 10);
      g_assert_cmpfloat (run_table_cut_px (fx->win), <=, 0.5);
      assert_run_table_reachable (fx->win);
    }
}

static const char long_name_trace[] =
  "import thunder\n"
  "import thunder.torch as ltorch\n"
  "import torch\n"
  "from thunder.executors.torchex import no_autocast\n\n"
  "@torch.no_grad()\n"
  "@no_autocast\n"
  "def computation(x):\n"
  "  # x: \"cuda:0 bf16[16, 16]\"\n"
  "  t_layers_3_attention_output_scaled = ltorch.mul(x, 2.0)  # t_layers_3_attention_output_scaled: \"cuda:0 bf16[16, 16]\"\n"
  "  return (t_layers_3_attention_output_scaled,)\n";

/* A tensor name longer than the Tensor column's 16 characters is ellipsized in the middle
 * (drawn narrower than its whole text), its whole name in the cell's tooltip, and the verdict's
 * numbers still show without scrolling. */
static void
test_run_table_long_names (Fixture *fx, gconstpointer data)
{
  g_autofree char *path = open_text (fx, "long.txt", long_name_trace);
  GtkWidget *cell = NULL;
  const char *tip;

  g_assert_nonnull (path);
  g_action_group_activate_action (G_ACTION_GROUP (fx->win), "run", NULL);
  wait_idle (fx->win);
  g_assert_false (gtk_info_bar_get_revealed (fx->win->error_bar));
  for (int r = 1; r < 20 && cell == NULL; r++)
    {
      GtkWidget *c = gtk_grid_get_child_at (fx->win->run_grid, 0, r);

      if (c != NULL && g_strcmp0 (g_object_get_data (G_OBJECT (c), CS_RUN_ROW_PROXY),
                                  "t_layers_3_attention_output_scaled") == 0)
        cell = c;
    }
  g_assert_nonnull (cell);
  g_assert_cmpstr (gtk_label_get_text (GTK_LABEL (cell)), ==, "fwd t_layers_3_attention_output_scaled");
  g_assert_cmpint (gtk_label_get_ellipsize (GTK_LABEL (cell)), ==, PANGO_ELLIPSIZE_MIDDLE);
  {
    PangoLayout *pl = gtk_widget_create_pango_layout (cell, gtk_label_get_text (GTK_LABEL (cell)));
    int whole;

    pango_layout_get_pixel_size (pl, &whole, NULL);
    g_object_unref (pl);
    g_test_message ("long name: drawn %d px wide, %d px whole", gtk_widget_get_width (cell), whole);
    g_assert_cmpint (gtk_widget_get_width (cell), <, whole);
  }
  tip = gtk_widget_get_tooltip_text (cell);
  g_assert_nonnull (strstr (tip, "fwd t_layers_3_attention_output_scaled"));
  assert_run_table_reachable (fx->win);
  remove_text (path);
}

/* The lens on the 8-block LLaMA: every removed user cast of the forward is marked on the
 * collapsed model (the marks add up to the forward's removed casts); expanded, layers.3's
 * RMSNorm `xf.to(x.dtype) * self.weight` shows the mark on the mul by the weight, the .to(bf16)
 * it now reads past. */
static void
test_lens_llama (Fixture *fx, gconstpointer data)
{
  g_autofree char *path = shared_trace ("thunder_llama_stack_initial.txt");
  CsGraphView *view = fx->win->forward_view;
  CsLayout *l;
  guint n_fwd = 0, marked = 0;
  gint mark = -1;
  guint32 layer3;

  if (!open_path (fx, path))
    return;
  for (guint i = 0; fx->win->user_casts != NULL && i < fx->win->user_casts->len; i++)
    n_fwd += !((const CsRemovedCast *) g_ptr_array_index (fx->win->user_casts, i))->backward;
  g_assert_cmpuint (n_fwd, >, 16);
  l = cs_graph_view_get_layout (view);
  for (guint i = 0; i < l->n_nodes; i++)
    marked += l->nodes[i].user_casts_removed;
  g_assert_cmpuint (marked, ==, n_fwd);
  g_assert_cmpuint (l->n_user_casts_marked, ==, n_fwd);
  cs_graph_view_set_group_expanded (view, "layers.3", TRUE);
  wait_idle (fx->win);
  g_action_group_change_action_state (G_ACTION_GROUP (fx->win), "precision-lens",
                                      g_variant_new_boolean (TRUE));
  l = cs_graph_view_get_layout (view);
  layer3 = (guint32) cs_grouping_find (l->grouping, "layers.3");
  for (guint i = 0; i < l->n_nodes && mark < 0; i++)
    if (l->nodes[i].user_casts_removed > 0 && l->nodes[i].user_cast_dtype == CS_DTYPE_BF16
        && l->nodes[i].group >= 0 && cs_grouping_is_within (l->grouping, l->nodes[i].group, (gint) layer3))
      mark = (gint) i;
  g_assert_cmpint (mark, >=, 0);
  g_assert_cmpstr (l->nodes[mark].label, ==, "mul");
  cs_graph_view_select (view, l->nodes[mark].stmt_id, TRUE);
  cs_graph_view_zoom_by (view, 1.6);
  wait_idle (fx->win);
  save_screenshot (GTK_WIDGET (fx->win), "castscope-llama-lens.png");
}

/* The row of the Structure list naming group @name (the first such row), or NULL. */
static GtkListBoxRow *
structure_row (CsWindow *win, const char *name, const char *text_prefix)
{
  GtkListBoxRow *row;

  for (int i = 0; (row = gtk_list_box_get_row_at_index (win->structure_list, i)) != NULL; i++)
    {
      GtkWidget *label = gtk_list_box_row_get_child (row);

      if (g_strcmp0 (g_object_get_data (G_OBJECT (row), "cs-group-name"), name) == 0
          && (text_prefix == NULL
              || g_str_has_prefix (gtk_label_get_text (GTK_LABEL (label)), text_prefix)))
        return row;
    }
  return NULL;
}

/* Whether the trace view now shows the start of the highlighted (selected) text. */
static gboolean
text_selection_in_view (CsWindow *win)
{
  guint first, top, bottom;

  return cs_line_view_get_highlight (win->trace_view, &first, NULL)
         && cs_line_view_get_visible_lines (win->trace_view, &top, &bottom)
         && first >= top && first <= bottom;
}

/* Whether the trace view shows the start of the highlighted (selected) text, after at most
 * 100 frames (the pane scrolls once it has a size, a frame or more after a new text). */
static gboolean
text_selection_visible (CsWindow *win)
{
  for (int frame = 0; frame < 100; frame++)
    {
      if (text_selection_in_view (win))
        return TRUE;
      wait_frame ();
    }
  return FALSE;
}

/* In the initial trace (the pass slider at parse) the 8 blocks of the LLaMA fold into one node,
 * "layers 0-7: same structure, 1 shown", and a Structure row for the fold with the 8 layers
 * under it.  Activating layers.3's row expands
 * layers.3 alone: its own ops (the wq linear reading t_layers_3_attention_wq_weight) between
 * the folds of layers 0-2 and 4-7.  ] steps to layers.4 (layers.3 folds back: layers 0-3), [
 * back to layers.3; the fold of layers 0-7 returns when it is collapsed. */
static void
test_llama_fold (Fixture *fx, gconstpointer data)
{
  g_autofree char *path = shared_trace ("thunder_llama_stack_initial.txt");
  CsGraphView *view = fx->win->forward_view;
  GtkListBoxRow *row;
  CsLayout *l;
  gint fold, g3, g4, wq, lin = -1;

  if (!open_path (fx, path))
    return;
  gtk_adjustment_set_value (fx->win->pass_adjustment, 0);
  wait_idle (fx->win);
  l = cs_graph_view_get_layout (view);
  g_assert_cmpstr (l->trace->pass, ==, "initial");
  fold = group_node (l, "layers.0");
  g_assert_cmpint (fold, >=, 0);
  g_test_message ("the fold's node: %s", l->nodes[fold].label);
  g_assert_true (g_str_has_prefix (l->nodes[fold].label, "layers 0-7: same structure, 1 shown\n"));
  g_assert_nonnull (strstr (gtk_label_get_text (fx->win->notes_label), "folded into one node"));
  row = structure_row (fx->win, "layers.0", "▸ layers 0-7: same structure, 1 shown");
  g_assert_nonnull (row);
  row = structure_row (fx->win, "layers.3", NULL);
  g_assert_nonnull (row);
  g_assert_nonnull (strstr (gtk_label_get_text (GTK_LABEL (gtk_list_box_row_get_child (row))), "folded"));

  /* the side panel: layers.3 alone */
  g_signal_emit_by_name (fx->win->structure_list, "row-activated", row);
  wait_idle (fx->win);
  l = cs_graph_view_get_layout (view);
  g3 = cs_grouping_find (l->grouping, "layers.3");
  g4 = cs_grouping_find (l->grouping, "layers.4");
  g_assert_true (cs_graph_view_get_group_expanded (view, "layers.3"));
  g_assert_cmpuint (cs_graph_view_get_selected (view), ==, CS_LAYOUT_GROUP_ID (g3));
  g_assert_cmpint (cs_layout_find_cluster (l, CS_LAYOUT_GROUP_ID (g3)), >=, 0);
  /* its details name every layer of its structure, not only the first */
  g_test_message ("details: %s", gtk_label_get_text (fx->win->details_label));
  g_assert_nonnull (strstr (gtk_label_get_text (fx->win->details_label),
                            "Layers with this structure: layers.0, layers.1, layers.2, layers.3, "
                            "layers.4, layers.5, layers.6, layers.7"));
  g_assert_true (g_str_has_prefix (l->nodes[group_node (l, "layers.0")].label,
                                   "layers 0-2: same structure, 1 shown\n"));
  g_assert_true (g_str_has_prefix (l->nodes[group_node (l, "layers.4")].label,
                                   "layers 4-7: same structure, 1 shown\n"));
  wq = -1;
  for (guint i = 0; i < l->n_nodes; i++)
    if (l->nodes[i].kind == CS_LAYOUT_NODE_INPUT
        && g_strcmp0 (l->nodes[i].name, "t_layers_3_attention_wq_weight") == 0)
      wq = (gint) i;
  g_assert_cmpint (wq, >=, 0);
  for (guint j = 0; j < l->n_edges; j++)
    if (l->edges[j].tail == (guint) wq)
      lin = (gint) l->edges[j].head;
  g_assert_cmpint (lin, >=, 0);
  g_assert_cmpstr (l->nodes[lin].label, ==, "linear");
  g_assert_true (cs_grouping_is_within (l->grouping, l->nodes[lin].group, g3));
  save_screenshot (GTK_WIDGET (fx->win), "castscope-llama-fold-layer3.png");

  /* the keyboard: ] and [ */
  g_assert_true (cs_graph_view_step_repeat (view, 1));
  wait_idle (fx->win);
  l = cs_graph_view_get_layout (view);
  g_assert_false (cs_graph_view_get_group_expanded (view, "layers.3"));
  g_assert_true (cs_graph_view_get_group_expanded (view, "layers.4"));
  g_assert_cmpuint (cs_graph_view_get_selected (view), ==, CS_LAYOUT_GROUP_ID (g4));
  /* the trace text follows the selection to layers.4, as a click would */
  g_assert_true (text_selection_visible (fx->win));
  g_assert_true (g_str_has_prefix (l->nodes[group_node (l, "layers.0")].label,
                                   "layers 0-3: same structure, 1 shown\n"));
  g_assert_true (g_str_has_prefix (l->nodes[group_node (l, "layers.5")].label,
                                   "layers 5-7: same structure, 1 shown\n"));
  g_assert_true (cs_graph_view_step_repeat (view, -1));
  wait_idle (fx->win);
  g_assert_true (cs_graph_view_get_group_expanded (view, "layers.3"));
  g_assert_false (cs_graph_view_get_group_expanded (view, "layers.4"));
  /* collapsed again, the eight fold into one */
  cs_graph_view_toggle_expanded (view, CS_LAYOUT_GROUP_ID (g3));
  wait_idle (fx->win);
  l = cs_graph_view_get_layout (view);
  g_assert_true (g_str_has_prefix (l->nodes[group_node (l, "layers.0")].label,
                                   "layers 0-7: same structure, 1 shown\n"));
}

/* The trace text pane at the LLaMA's final forward trace (about 1,000 lines): selecting a
 * statement three quarters down scrolls the pane to it, and the highlighted line is that
 * statement's text; the line selected with the pointer is what Copy puts on the clipboard;
 * a click on another statement's line selects that one; setting the same text again keeps
 * the scroll position and the highlight. */
static void
test_llama_text_pane (Fixture *fx, gconstpointer data)
{
  g_autofree char *path = shared_trace ("thunder_llama_stack_initial.txt");
  CsLineView *pane;
  CsTrace *trace;
  const CsStmt *stmt = NULL, *other = NULL;
  g_autoptr(GString) printed = g_string_new (NULL);
  g_autofree char *line = NULL, *selected = NULL, *copy = NULL;
  guint first, last, top, bottom, n_lines;
  double scrolled;
  GValue value = G_VALUE_INIT;

  if (!open_path (fx, path))
    return;
  show_family (fx->win, "forward");
  pane = fx->win->trace_view;
  trace = _cs_window_get_shown_trace (fx->win);
  for (guint i = trace->n_stmts * 3 / 4; i < trace->n_stmts && stmt == NULL; i++)
    if (trace->stmts[i]->kind == CS_STMT_CALL)
      stmt = trace->stmts[i];
  for (guint i = 0; i < trace->n_stmts / 4 && other == NULL; i++)
    if (trace->stmts[i]->kind == CS_STMT_CALL)
      other = trace->stmts[i];
  g_assert_nonnull (stmt);
  g_assert_nonnull (other);
  n_lines = cs_line_view_get_n_lines (pane);
  g_test_message ("%u lines; selecting %s (id %u)", n_lines, stmt->callee, stmt->id);
  g_assert_cmpuint (n_lines, >, 500);

  _cs_window_select_stmt (fx->win, stmt->id, TRUE);
  wait_idle (fx->win);
  g_assert_true (text_selection_visible (fx->win));
  g_assert_true (cs_line_view_get_highlight (pane, &first, &last));
  g_assert_true (cs_line_view_get_visible_lines (pane, &top, &bottom));
  g_test_message ("highlight %u-%u, in view %u-%u", first, last, top, bottom);
  g_assert_cmpuint (first, >, n_lines / 2);
  g_assert_cmpuint (top, >, 0);
  g_assert_cmpuint (first, >=, top);
  g_assert_cmpuint (first, <=, bottom);
  /* the highlighted line is the statement as printed at the body's indent */
  cs_print_stmt_to (printed, stmt, 2, CS_PRINT_DEFAULT);
  if (strchr (printed->str, '\n') != NULL)
    g_string_truncate (printed, strchr (printed->str, '\n') - printed->str);
  line = cs_line_view_dup_line (pane, first);
  g_assert_cmpstr (line, ==, printed->str);

  /* the line, selected with the pointer, is copied */
  cs_line_view_select_range (pane, cs_line_view_line_offset (pane, first),
                             cs_line_view_line_offset (pane, first) + (int) g_utf8_strlen (line, -1));
  selected = cs_line_view_dup_selected_text (pane);
  g_assert_cmpstr (selected, ==, line);
  g_assert_true (gtk_widget_activate_action (GTK_WIDGET (pane), "clipboard.copy", NULL));
  g_value_init (&value, G_TYPE_STRING);
  g_assert_true (gdk_content_provider_get_value (
                   gdk_clipboard_get_content (gtk_widget_get_clipboard (GTK_WIDGET (pane))),
                   &value, NULL));
  copy = g_value_dup_string (&value);
  g_value_unset (&value);
  g_assert_cmpstr (copy, ==, line);

  /* the same text again: nothing moves, the highlight stays */
  scrolled = gtk_adjustment_get_value (gtk_scrollable_get_vadjustment (GTK_SCROLLABLE (pane)));
  {
    g_autofree char *same = _cs_window_dup_trace_text (fx->win);

    g_assert_false (cs_line_view_set_text (pane, same));
  }
  g_assert_cmpfloat (gtk_adjustment_get_value (gtk_scrollable_get_vadjustment (GTK_SCROLLABLE (pane))),
                     ==, scrolled);
  g_assert_true (cs_line_view_get_highlight (pane, &top, NULL));
  g_assert_cmpuint (top, ==, first);

  /* a click on the line of a statement near the top selects it, and the pane goes there */
  {
    g_autoptr(GString) one = g_string_new (NULL);
    g_autofree char *text = _cs_window_dup_trace_text (fx->win);
    const char *hit;

    cs_print_stmt_to (one, other, 2, CS_PRINT_DEFAULT);
    if (strchr (one->str, '\n') != NULL)
      g_string_truncate (one, strchr (one->str, '\n') - one->str);
    hit = strstr (text, one->str);
    g_assert_nonnull (hit);
    g_signal_emit_by_name (pane, "offset-clicked", (int) g_utf8_pointer_to_offset (text, hit) + 4);
    wait_idle (fx->win);
    g_assert_cmpuint (cs_graph_view_get_selected (fx->win->forward_view), ==, other->id);
    g_assert_true (text_selection_visible (fx->win));
    g_assert_true (cs_line_view_get_highlight (pane, &first, NULL));
    g_free (line);
    line = cs_line_view_dup_line (pane, first);
    g_assert_cmpstr (line, ==, one->str);
  }
}

/* Layouts and results are kept: collapsing layers.3 again shows the layout drawn before (the
 * same object, from the view's cache), and going back to a policy already seen shows its kept
 * result (the same traces) without re-running the pipeline, drawn from the cache. */
static void
test_llama_cache (Fixture *fx, gconstpointer data)
{
  g_autofree char *path = shared_trace ("thunder_llama_stack_initial.txt");
  CsGraphView *view = fx->win->forward_view;
  CsLayout *l0, *l1;
  CsTrace *t0;
  CsAnalysis *a0;

  if (!open_path (fx, path))
    return;
  l0 = cs_graph_view_get_layout (view);
  t0 = l0->trace;
  a0 = fx->win->analysis;
  cs_graph_view_set_group_expanded (view, "layers.3", TRUE);
  wait_idle (fx->win);
  l1 = cs_graph_view_get_layout (view);
  g_assert_true (l1 != l0);
  g_assert_true (l1->grouping == l0->grouping);   /* the trace's groups, found once */
  cs_graph_view_set_group_expanded (view, "layers.3", FALSE);
  wait_idle (fx->win);
  g_assert_true (cs_graph_view_get_layout (view) == l0);
  /* matmul=upcast-f32, then back to native */
  g_action_group_change_action_state (G_ACTION_GROUP (fx->win), "policy-matmul",
                                      g_variant_new_string ("upcast-f32"));
  wait_idle (fx->win);
  g_assert_true (fx->win->analysis != a0);
  g_assert_true (cs_graph_view_get_layout (view)->trace != t0);
  g_action_group_change_action_state (G_ACTION_GROUP (fx->win), "policy-matmul",
                                      g_variant_new_string ("native"));
  g_assert_true (fx->win->analysis == a0);        /* at once: no pipeline run */
  wait_idle (fx->win);
  g_assert_true (cs_graph_view_get_layout (view) == l0);
  g_assert_true (cs_graph_view_get_layout (view)->trace == t0);
}

/* The overview: a click on the minimap centres the view on that point of the graph (the
 * blocks unfolded, View > Fold Repeated Layers off, so that there are eight to pick from). */
static void
test_minimap (Fixture *fx, gconstpointer data)
{
  g_autofree char *path = shared_trace ("thunder_llama_stack_initial.txt");
  CsGraphView *view = fx->win->forward_view;
  cairo_surface_t *surf;
  cairo_t *cr;
  CsLayout *l;
  int w, h;

  if (!open_path (fx, path))
    return;
  g_action_group_change_action_state (G_ACTION_GROUP (fx->win), "fold-repeats",
                                      g_variant_new_boolean (FALSE));
  wait_idle (fx->win);
  g_assert_false (cs_graph_view_get_fold_repeats (view));
  w = gtk_widget_get_width (GTK_WIDGET (view));
  h = gtk_widget_get_height (GTK_WIDGET (view));
  l = cs_graph_view_get_layout (view);
  surf = cairo_image_surface_create (CAIRO_FORMAT_ARGB32, 200, 160);
  cr = cairo_create (surf);
  cs_graph_view_draw_minimap (view, cr, 200, 160);
  cairo_destroy (cr);
  cairo_surface_destroy (surf);
  /* the minimap shows the whole graph fitted into it with a 4 px margin: a click on where it
   * draws layers.5 brings layers.5 to the middle of the view */
  {
    gint g5 = group_node (l, "layers.5");
    CsView mini;
    CsLayoutHit hit;
    double mx, my, x, y;

    g_assert_cmpint (g5, >=, 0);
    hit = (CsLayoutHit) { CS_LAYOUT_HIT_NODE, (guint) g5 };
    cs_view_init_fit (&mini, l, 200, 160, 4, 1.0);
    cs_view_to_px (&mini, l, (l->nodes[g5].box.x0 + l->nodes[g5].box.x1) / 2,
                   (l->nodes[g5].box.y0 + l->nodes[g5].box.y1) / 2, &mx, &my);
    g_assert_cmpfloat (mx, >, 0);
    g_assert_cmpfloat (my, >, 0);
    g_assert_cmpfloat (mx, <, 200);
    g_assert_cmpfloat (my, <, 160);
    cs_graph_view_minimap_move (view, mx, my);
    element_px (view, &hit, &x, &y);
    g_test_message ("layers.5 after the minimap click: (%.1f, %.1f), view %d x %d", x, y, w, h);
    /* one minimap pixel is 1 / mini.scale points */
    g_assert_cmpfloat (fabs (x - w / 2.0), <=, cs_graph_view_get_zoom (view) / mini.scale);
    g_assert_cmpfloat (fabs (y - h / 2.0), <=, cs_graph_view_get_zoom (view) / mini.scale);
  }
  save_screenshot (GTK_WIDGET (fx->win), "castscope-llama-minimap.png");
}

/* The app's --inductor: the analysis of a torch.compile graph pair draws Inductor's kernels as
 * its regions (data/aten/inductor/mlp_gelu_bf16.output_code: one Triton kernel in the forward,
 * two in the backward), and castscope's nvFusion regions again once it is cleared. */
/* The default 1280x800 window (the .ui's default size) on data/mlp_gelu.txt: the graph pane
 * has most of the width (at least half the window), and the first frame shows the graph's top
 * (its inputs) inside the canvas, near its top edge, not cut off above it (at a readable zoom
 * the graph is taller than the canvas). */
static void
test_default_size (Fixture *fx, gconstpointer data)
{
  g_autofree char *path = g_build_filename (g_getenv ("CS_DATA_DIR"), "mlp_gelu.txt", NULL);
  CsGraphView *view = fx->win->forward_view;
  CsLayout *l;
  CsView v;
  double x0, y0, x1, y1;
  int vw, vh, ww;

  gtk_window_set_default_size (GTK_WINDOW (fx->win), 1280, 800);
  if (!open_path (fx, path))
    return;
  wait_frame ();
  ww = gtk_widget_get_width (GTK_WIDGET (fx->win));
  vw = gtk_widget_get_width (GTK_WIDGET (view));
  vh = gtk_widget_get_height (GTK_WIDGET (view));
  g_test_message ("window %d px wide, graph view %dx%d px", ww, vw, vh);
  save_screenshot (GTK_WIDGET (fx->win), "castscope-default-1280.png");
  /* the window manager's frame may take a few px off */
  g_assert_cmpint (ww, >=, 1200);
  g_assert_cmpint (ww, <=, 1280);
  g_assert_cmpint (vw, >=, ww / 2);
  /* the layout's top edge (bb.y1, y up) in widget px (y down) */
  l = cs_graph_view_get_layout (view);
  g_assert_nonnull (l);
  cs_graph_view_get_view (view, &v);
  cs_view_to_px (&v, l, l->bb.x0, l->bb.y1, &x0, &y0);
  cs_view_to_px (&v, l, l->bb.x1, l->bb.y0, &x1, &y1);
  g_test_message ("graph box on screen: (%.0f, %.0f)-(%.0f, %.0f)", x0, y0, x1, y1);
  g_assert_cmpfloat (y0, >=, 0);
  g_assert_cmpfloat (y0, <, vh / 4.0);

  /* Find (Ctrl+F) shows its bar over the canvas's top left: the knobs stay where they were and
   * the bar keeps above the canvas's centre */
  {
    graphene_rect_t knob_before, knob_after, bar, canvas;
    GtkWidget *knob = GTK_WIDGET (policy_dropdown (fx->win, "fusion"));

    g_assert_true (gtk_widget_compute_bounds (knob, GTK_WIDGET (fx->win), &knob_before));
    g_action_group_activate_action (G_ACTION_GROUP (fx->win), "find", NULL);
    for (int i = 0; i < 10; i++)
      wait_frame ();
    g_assert_true (gtk_search_bar_get_search_mode (fx->win->search_bar));
    g_assert_true (gtk_widget_compute_bounds (knob, GTK_WIDGET (fx->win), &knob_after));
    g_assert_cmpfloat (knob_after.origin.y, ==, knob_before.origin.y);
    g_assert_true (gtk_widget_compute_bounds (GTK_WIDGET (fx->win->search_bar),
                                              GTK_WIDGET (fx->win), &bar));
    g_assert_true (gtk_widget_compute_bounds (GTK_WIDGET (view), GTK_WIDGET (fx->win), &canvas));
    g_test_message ("find bar y %.0f-%.0f, canvas y %.0f-%.0f", bar.origin.y,
                    bar.origin.y + bar.size.height, canvas.origin.y,
                    canvas.origin.y + canvas.size.height);
    g_assert_cmpfloat (bar.size.height, >, 0);
    g_assert_cmpfloat (bar.origin.y + bar.size.height, <, canvas.origin.y + canvas.size.height / 2);
    save_screenshot (GTK_WIDGET (fx->win), "castscope-default-1280-find.png");
  }

  /* A file that fails to load shows the error bar over the canvas's top edge: the canvas keeps
   * its allocation (position and size) and the knobs their place, the open Find bar moves
   * below the bar instead of under it, the trace shown stays; closing the bar restores it all */
  {
    g_autofree char *dir = g_dir_make_tmp ("cs-app-XXXXXX", NULL);
    g_autofree char *bad = g_build_filename (dir, "bad.txt", NULL);
    g_autoptr(GFile) file = NULL;
    graphene_rect_t canvas_before, canvas_with, canvas_after, knob_before, knob_with, bar, find;
    GtkWidget *knob = GTK_WIDGET (policy_dropdown (fx->win, "fusion"));
    CsAnalysis *shown = fx->win->analysis;

    g_assert_false (gtk_info_bar_get_revealed (fx->win->error_bar));
    g_assert_true (gtk_widget_compute_bounds (GTK_WIDGET (view), GTK_WIDGET (fx->win), &canvas_before));
    g_assert_true (gtk_widget_compute_bounds (knob, GTK_WIDGET (fx->win), &knob_before));
    g_assert_true (g_file_set_contents (bad, "def computation(a):\n  t0 = ltorch.add(a,\n", -1, NULL));
    file = g_file_new_for_path (bad);
    cs_window_open_file (fx->win, file);
    wait_idle (fx->win);
    for (int i = 0; i < 10; i++)
      wait_frame ();
    g_assert_true (gtk_info_bar_get_revealed (fx->win->error_bar));
    g_assert_nonnull (strstr (gtk_label_get_text (fx->win->error_label), "bad.txt:"));
    g_assert_true (fx->win->analysis == shown);
    g_assert_true (gtk_widget_compute_bounds (GTK_WIDGET (view), GTK_WIDGET (fx->win), &canvas_with));
    g_assert_true (gtk_widget_compute_bounds (knob, GTK_WIDGET (fx->win), &knob_with));
    g_assert_true (gtk_widget_compute_bounds (GTK_WIDGET (fx->win->error_bar), GTK_WIDGET (fx->win), &bar));
    g_assert_true (gtk_widget_compute_bounds (GTK_WIDGET (fx->win->search_bar), GTK_WIDGET (fx->win), &find));
    g_test_message ("error bar y %.0f-%.0f, find bar y %.0f-%.0f, canvas y %.0f-%.0f (before %.0f-%.0f)",
                    bar.origin.y, bar.origin.y + bar.size.height, find.origin.y,
                    find.origin.y + find.size.height, canvas_with.origin.y,
                    canvas_with.origin.y + canvas_with.size.height, canvas_before.origin.y,
                    canvas_before.origin.y + canvas_before.size.height);
    g_assert_cmpfloat (canvas_with.origin.x, ==, canvas_before.origin.x);
    g_assert_cmpfloat (canvas_with.origin.y, ==, canvas_before.origin.y);
    g_assert_cmpfloat (canvas_with.size.width, ==, canvas_before.size.width);
    g_assert_cmpfloat (canvas_with.size.height, ==, canvas_before.size.height);
    g_assert_cmpfloat (knob_with.origin.y, ==, knob_before.origin.y);
    /* the bar lies over the canvas's top, above its centre, and the Find bar below it */
    g_assert_cmpfloat (bar.size.height, >, 0);
    g_assert_cmpfloat (bar.origin.y, >=, canvas_with.origin.y);
    g_assert_cmpfloat (bar.origin.y + bar.size.height, <, canvas_with.origin.y + canvas_with.size.height / 2);
    g_assert_cmpfloat (find.origin.y, >=, bar.origin.y + bar.size.height);
    save_screenshot (GTK_WIDGET (fx->win), "castscope-default-1280-error.png");
    /* the bar's close button */
    gtk_info_bar_response (fx->win->error_bar, GTK_RESPONSE_CLOSE);
    for (int i = 0; i < 10; i++)
      wait_frame ();
    g_assert_false (gtk_info_bar_get_revealed (fx->win->error_bar));
    g_assert_true (gtk_widget_compute_bounds (GTK_WIDGET (view), GTK_WIDGET (fx->win), &canvas_after));
    g_assert_cmpfloat (canvas_after.origin.y, ==, canvas_before.origin.y);
    g_assert_cmpfloat (canvas_after.size.height, ==, canvas_before.size.height);
    g_assert_true (gtk_widget_compute_bounds (GTK_WIDGET (fx->win->search_bar), GTK_WIDGET (fx->win), &find));
    g_assert_cmpfloat (find.origin.y, <, bar.origin.y + bar.size.height);
    g_unlink (bad);
    g_rmdir (dir);
  }

  /* Run fills the run table: the side panel keeps its width, the graph keeps at least half
   * the window, and the Pass row's label is drawn whole inside the graph pane */
  gtk_search_bar_set_search_mode (fx->win->search_bar, FALSE);
  g_action_group_activate_action (G_ACTION_GROUP (fx->win), "run", NULL);
  wait_idle (fx->win);
  g_assert_false (gtk_info_bar_get_revealed (fx->win->error_bar));
  save_screenshot (GTK_WIDGET (fx->win), "castscope-default-1280-run.png");
  {
    graphene_rect_t pass, row;
    GtkWidget *pass_label = gtk_widget_get_prev_sibling (GTK_WIDGET (fx->win->pass_scale));
    int min_w;

    g_test_message ("after run: window %d px, graph view %d px", gtk_widget_get_width (GTK_WIDGET (fx->win)),
                    gtk_widget_get_width (GTK_WIDGET (view)));
    g_assert_cmpint (gtk_widget_get_width (GTK_WIDGET (fx->win)), ==, ww);
    g_assert_cmpint (gtk_widget_get_width (GTK_WIDGET (view)), >=, ww / 2);
    g_assert_true (GTK_IS_LABEL (pass_label));
    g_assert_cmpstr (gtk_label_get_text (GTK_LABEL (pass_label)), ==, "Pass");
    gtk_widget_measure (pass_label, GTK_ORIENTATION_HORIZONTAL, -1, &min_w, NULL, NULL, NULL);
    g_assert_true (gtk_widget_compute_bounds (pass_label, GTK_WIDGET (fx->win), &pass));
    g_assert_true (gtk_widget_compute_bounds (GTK_WIDGET (view), GTK_WIDGET (fx->win), &row));
    g_test_message ("Pass label x %.0f, %.0f px wide (needs %d); graph x %.0f", pass.origin.x,
                    pass.size.width, min_w, row.origin.x);
    g_assert_cmpfloat (pass.size.width, >=, min_w);
    g_assert_cmpfloat (pass.origin.x, >=, row.origin.x);
  }
}

static void
test_analysis_inductor (void)
{
  const char *dir = g_getenv ("CS_DATA_DIR");
  g_autofree char *path = g_build_filename (dir ? dir : "data", "aten", "mlp_gelu_bf16.txt", NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTraceList) list = cs_parse_file (path, &error);
  CsPolicy policy;

  g_assert_no_error (error);
  cs_policy_init_default (&policy);
  for (guint pass = 0; pass < 2; pass++)
    {
      g_autoptr(CsAnalysis) an = NULL;
      CsTrace *fw, *bw;
      guint n_fw = 0, n_bw = 0, n_triton = 0;

      cs_analysis_set_inductor (pass == 0 ? "auto" : NULL);
      an = cs_analysis_new_for_list (list, &policy, &error);
      g_assert_no_error (error);
      fw = cs_analysis_get_final (an, CS_FAMILY_FORWARD);
      bw = cs_analysis_get_final (an, CS_FAMILY_BACKWARD);
      g_assert_nonnull (fw);
      g_assert_nonnull (bw);
      for (guint i = 0; i < fw->n_stmts; i++)
        if (fw->stmts[i]->kind == CS_STMT_CALL && cs_op_is_fusion (fw->stmts[i]->op))
          {
            n_fw++;
            n_triton += g_str_has_prefix (fw->stmts[i]->callee, "triton_poi_fused_gelu_0");
          }
      for (guint i = 0; i < bw->n_stmts; i++)
        n_bw += bw->stmts[i]->kind == CS_STMT_CALL && cs_op_is_fusion (bw->stmts[i]->op);
      /* castscope's consecutive fusion: 2 nvFusion regions each way (stats of the same file) */
      g_assert_cmpuint (n_fw, ==, pass == 0 ? 1 : 2);
      g_assert_cmpuint (n_triton, ==, pass == 0 ? 1 : 0);
      g_assert_cmpuint (n_bw, ==, 2);
    }
}

/* attention=fused on the softmax attention sample: the diff bar says where the two matmuls
 * went (one fused attention on tensor cores) and what happened to the regions; on the seed,
 * which has nothing to claim, the info bar says the policy changed nothing. */
static void
test_attention_fused (Fixture *fx, gconstpointer data)
{
  g_autofree char *seed = seed_path ();
  g_autofree char *dir = seed ? g_path_get_dirname (seed) : NULL;
  g_autofree char *path = dir ? g_build_filename (dir, "attention_softmax.txt", NULL) : NULL;
  const char *text;

  if (path == NULL || !g_file_test (path, G_FILE_TEST_IS_REGULAR))
    {
      g_test_skip ("data/attention_softmax.txt not found");
      return;
    }
  if (!open_path (fx, path))
    return;
  show_family (fx->win, "forward");
  g_action_group_change_action_state (G_ACTION_GROUP (fx->win), "policy-attention",
                                      g_variant_new_string ("fused"));
  wait_idle (fx->win);
  g_assert_true (gtk_info_bar_get_revealed (fx->win->diff_bar));
  text = gtk_label_get_text (fx->win->diff_label);
  g_test_message ("diff bar: %s", text);
  /* forward: matmul, softmax and matmul (2 tensor-core matmuls) become one sdpa call */
  g_assert_nonnull (strstr (text, "tensor-core matmuls 2 → 0"));
  g_assert_nonnull (strstr (text, "fused attention (tensor cores) 0 → 1"));
  g_assert_nonnull (strstr (text, "regions "));
  g_assert_false (gtk_info_bar_get_revealed (fx->win->error_bar));

  /* the backward sdpa call's details list all ten of its tensor inputs (grad_out, q, k, v,
   * out, logsumexp, cum_seq_q, cum_seq_k, philox seed and offset) */
  {
    CsGraphView *bv = fx->win->backward_view;
    CsTrace *bt;
    const CsStmt *bs = NULL;
    g_autoptr(GPtrArray) ins = g_ptr_array_new ();
    const char *det, *in_at, *out_at;

    show_family (fx->win, "backward");
    wait_idle (fx->win);
    bt = cs_graph_view_get_trace (bv);
    for (guint i = 0; bt != NULL && i < bt->n_stmts; i++)
      if (bt->stmts[i]->kind == CS_STMT_CALL && bt->stmts[i]->op != NULL
          && bt->stmts[i]->op->id == CS_OP_EX_SDPAFX_SCALED_DOT_PRODUCT_EFFICIENT_ATTENTION_BACKWARD)
        bs = bt->stmts[i];
    g_assert_nonnull (bs);
    cs_stmt_collect_inputs (bs, ins);
    g_assert_cmpuint (ins->len, ==, 10);
    _cs_window_find_next (fx->win, "attention_backward", TRUE);
    wait_idle (fx->win);
    g_assert_cmpuint (cs_graph_view_get_selected (bv), ==, bs->id);
    det = gtk_label_get_text (fx->win->details_label);
    g_test_message ("details: %s", det);
    in_at = strstr (det, "Inputs");
    out_at = strstr (det, "Outputs");
    g_assert_nonnull (in_at);
    g_assert_nonnull (out_at);
    for (guint i = 0; i < ins->len; i++)
      {
        g_autofree char *line = g_strdup_printf ("  %s  ", ((CsProxy *) ins->pdata[i])->name);
        const char *at = strstr (in_at, line);
        g_assert_true (at != NULL && at < out_at);
      }
  }

  if (!open_seed (fx))
    return;
  wait_idle (fx->win);
  g_assert_true (gtk_info_bar_get_revealed (fx->win->error_bar));
  g_assert_nonnull (strstr (gtk_label_get_text (fx->win->error_label), "claimed nothing"));
}

int
main (int argc, char **argv)
{
  gtk_disable_setlocale ();
  g_setenv ("GSETTINGS_BACKEND", "memory", TRUE);
  /* One private XDG tree for the whole process (GTK's recent-files manager binds its file
   * once), so the test never touches the user's files. */
  {
    g_autofree char *home = g_dir_make_tmp ("cs-app-home-XXXXXX", NULL);
    const char *vars[] = { "XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME" };

    for (gsize i = 0; i < G_N_ELEMENTS (vars); i++)
      {
        g_autofree char *dir = g_build_filename (home, vars[i], NULL);
        g_mkdir_with_parents (dir, 0700);
        g_setenv (vars[i], dir, TRUE);
      }
  }
  g_test_init (&argc, &argv, NULL);
  g_set_application_name ("castscope");
  gtk_init ();

  g_test_add_func ("/app/analysis/inductor", test_analysis_inductor);
  g_test_add ("/app/window/default-size", Fixture, NULL, fixture_setup, test_default_size,
              fixture_teardown);
  g_test_add ("/app/window/attention-fused", Fixture, NULL, fixture_setup, test_attention_fused,
              fixture_teardown);
  g_test_add ("/app/window/matmul-upcast", Fixture, NULL, fixture_setup, test_matmul_upcast,
              fixture_teardown);
  g_test_add ("/app/window/selection-sync", Fixture, NULL, fixture_setup, test_selection_sync,
              fixture_teardown);
  g_test_add ("/app/window/bad-file", Fixture, NULL, fixture_setup, test_bad_file,
              fixture_teardown);
  g_test_add ("/app/window/bad-shapes", Fixture, NULL, fixture_setup, test_bad_shapes,
              fixture_teardown);
  g_test_add ("/app/window/export", Fixture, NULL, fixture_setup, test_export,
              fixture_teardown);
  g_test_add ("/app/window/pass-slider", Fixture, NULL, fixture_setup, test_pass_slider,
              fixture_teardown);
  g_test_add ("/app/window/unknown-op", Fixture, NULL, fixture_setup, test_unknown_op,
              fixture_teardown);
  g_test_add ("/app/window/text-click", Fixture, NULL, fixture_setup, test_text_click,
              fixture_teardown);
  g_test_add ("/app/window/open-all", Fixture, NULL, fixture_setup, test_open_all,
              fixture_teardown);
  g_test_add ("/app/window/large-policy", Fixture, NULL, fixture_setup, test_large_policy,
              fixture_teardown);
  g_test_add ("/app/window/close-while-busy", Fixture, NULL, fixture_setup,
              test_close_while_busy, fixture_teardown);
  g_test_add ("/app/window/recent", Fixture, NULL, fixture_setup, test_recent,
              fixture_teardown);
  g_test_add ("/app/window/set-view-signal", Fixture, NULL, fixture_setup, test_set_view_signal,
              fixture_teardown);
  g_test_add ("/app/window/legend-toggle", Fixture, NULL, fixture_setup, test_legend_toggle,
              fixture_teardown);
  g_test_add ("/app/window/run-overlay", Fixture, NULL, fixture_setup, test_run_overlay,
              fixture_teardown);
  g_test_add ("/app/window/first-divergence", Fixture, NULL, fixture_setup, test_first_divergence,
              fixture_teardown);
  g_test_add ("/app/window/precision-lens", Fixture, NULL, fixture_setup, test_precision_lens,
              fixture_teardown);
  g_test_add ("/app/window/rounding-knob", Fixture, NULL, fixture_setup, test_rounding_knob,
              fixture_teardown);
  g_test_add ("/app/window/compare-torch-compile", Fixture, NULL, fixture_setup,
              test_compare_torch_compile, fixture_teardown);
  g_test_add ("/app/window/compare", Fixture, NULL, fixture_setup, test_compare,
              fixture_teardown);
  g_test_add ("/app/window/run-table-columns", Fixture, NULL, fixture_setup, test_run_table_columns,
              fixture_teardown);
  g_test_add ("/app/window/run-table-long-names", Fixture, NULL, fixture_setup,
              test_run_table_long_names, fixture_teardown);
  g_test_add ("/app/lens/mlp-heat", Fixture, NULL, fixture_setup, test_lens_mlp,
              fixture_teardown);
  g_test_add ("/app/lens/llama", Fixture, NULL, fixture_setup, test_lens_llama,
              fixture_teardown);
  g_test_add ("/app/window/run-cancel", Fixture, NULL, fixture_setup, test_run_cancel,
              fixture_teardown);
  g_test_add ("/app/window/run-refused", Fixture, NULL, fixture_setup, test_run_refused,
              fixture_teardown);
  g_test_add ("/app/scale/llama-first-frame", Fixture, NULL, fixture_setup, test_llama_first_frame,
              fixture_teardown);
  g_test_add ("/app/scale/llama-expand-anchor", Fixture, NULL, fixture_setup, test_llama_expand_anchor,
              fixture_teardown);
  g_test_add ("/app/scale/llama-policy-anchor", Fixture, NULL, fixture_setup, test_llama_policy_anchor,
              fixture_teardown);
  g_test_add ("/app/scale/find-tanh", Fixture, NULL, fixture_setup, test_find_tanh,
              fixture_teardown);
  g_test_add ("/app/scale/find-silu-origin", Fixture, NULL, fixture_setup, test_find_silu_origin,
              fixture_teardown);
  g_test_add ("/app/scale/fuse-linear-moves", Fixture, NULL, fixture_setup, test_fuse_linear_moves,
              fixture_teardown);
  g_test_add ("/app/scale/run-row-click", Fixture, NULL, fixture_setup, test_run_row_click,
              fixture_teardown);
  g_test_add ("/app/scale/run-table-llama-fits", Fixture, NULL, fixture_setup,
              test_run_table_llama_fits, fixture_teardown);
  g_test_add ("/app/window/run-row-pick", Fixture, NULL, fixture_setup, test_run_row_pick,
              fixture_teardown);
  g_test_add ("/app/window/run-summary-cleared", Fixture, NULL, fixture_setup,
              test_run_summary_cleared, fixture_teardown);
  g_test_add ("/app/window/pan-keeps-selection", Fixture, NULL, fixture_setup,
              test_pan_keeps_selection, fixture_teardown);
  g_test_add ("/app/scale/llama-fold", Fixture, NULL, fixture_setup, test_llama_fold,
              fixture_teardown);
  g_test_add ("/app/scale/llama-text-pane", Fixture, NULL, fixture_setup, test_llama_text_pane,
              fixture_teardown);
  g_test_add ("/app/scale/llama-cache", Fixture, NULL, fixture_setup, test_llama_cache,
              fixture_teardown);
  g_test_add ("/app/scale/sbs-first-frame", Fixture, NULL, fixture_setup, test_sbs_first_frame,
              fixture_teardown);
  g_test_add ("/app/scale/sbs-first-frame-expanded", Fixture, "expanded", fixture_setup,
              test_sbs_first_frame, fixture_teardown);
  g_test_add ("/app/scale/sbs-click-keeps-node", Fixture, NULL, fixture_setup,
              test_sbs_click_keeps_node, fixture_teardown);
  g_test_add ("/app/scale/policy-flip-selection", Fixture, NULL, fixture_setup,
              test_policy_flip_selection, fixture_teardown);
  g_test_add ("/app/window/diff-previous-policy", Fixture, NULL, fixture_setup,
              test_diff_previous_policy, fixture_teardown);
  g_test_add ("/app/scale/minimap", Fixture, NULL, fixture_setup, test_minimap,
              fixture_teardown);
  return g_test_run ();
}
