/* test-render-cli.c: `castscope-cli render` ($CS_CLI), spawned without a shell: exit codes
 * (0 ok, 1 bad input, 2 usage, as app/cs-cli.h documents), the files it writes, and the
 * pipeline path (--policy / --trace) drawing what the policy implies.
 */
#include "cs-config.h"

#include <string.h>

#include <cairo.h>
#include <glib/gstdio.h>
#include <sys/wait.h>

static char *tmp_dir;

static int
run_cli (const char * const *args, char **err_out)
{
  const char *cli = g_getenv ("CS_CLI");
  g_autoptr(GPtrArray) argv = g_ptr_array_new ();
  g_autoptr(GError) error = NULL;
  g_autofree char *out = NULL, *err = NULL;
  int status = 0;

  g_ptr_array_add (argv, (gpointer) cli);
  g_ptr_array_add (argv, (gpointer) "render");
  for (guint i = 0; args[i]; i++)
    g_ptr_array_add (argv, (gpointer) args[i]);
  g_ptr_array_add (argv, NULL);
  g_assert_true (g_spawn_sync (NULL, (char **) argv->pdata, NULL, G_SPAWN_DEFAULT, NULL, NULL,
                               &out, &err, &status, &error));
  g_assert_no_error (error);
  if (err_out)
    *err_out = g_steal_pointer (&err);
  g_assert_true (WIFEXITED (status));
  return WEXITSTATUS (status);
}

static char *
seed_path (void)
{
  return g_build_filename (g_getenv ("CS_DATA_DIR"), "seed_foo.txt", NULL);
}

static gboolean
have_cli (void)
{
  const char *cli = g_getenv ("CS_CLI");
  if (cli == NULL || !g_file_test (cli, G_FILE_TEST_IS_EXECUTABLE) || g_getenv ("CS_DATA_DIR") == NULL)
    {
      g_test_skip ("CS_CLI or CS_DATA_DIR not available");
      return FALSE;
    }
  return TRUE;
}

static void
test_formats (void)
{
  g_autofree char *seed = NULL;
  const char *exts[] = { "svg", "png", "pdf", "dot" };
  const char *magic[] = { "<?xml", "\x89PNG", "%PDF-", "digraph" };

  if (!have_cli ())
    return;
  seed = seed_path ();
  for (guint i = 0; i < G_N_ELEMENTS (exts); i++)
    {
      g_autofree char *out = g_strdup_printf ("%s/seed.%s", tmp_dir, exts[i]);
      g_autofree char *text = NULL;
      const char *args[] = { seed, "-o", out, NULL };
      gsize len;

      g_assert_cmpint (run_cli (args, NULL), ==, 0);
      g_assert_true (g_file_get_contents (out, &text, &len, NULL));
      g_assert_cmpuint (len, >, 50);
      g_assert_true (memcmp (text, magic[i], strlen (magic[i])) == 0);
      g_remove (out);
    }
}

static void
test_policy (void)
{
  g_autofree char *seed = NULL;
  g_autofree char *native = g_strdup_printf ("%s/native.dot", tmp_dir);
  g_autofree char *upcast = g_strdup_printf ("%s/upcast.dot", tmp_dir);
  g_autofree char *upcast_bwd = g_strdup_printf ("%s/upcast-bwd.dot", tmp_dir);
  g_autofree char *a = NULL, *b = NULL, *c = NULL;

  if (!have_cli ())
    return;
  seed = seed_path ();
  {
    const char *args[] = { seed, "--policy", "matmul=native", "-o", native, NULL };
    g_assert_cmpint (run_cli (args, NULL), ==, 0);
  }
  {
    const char *args[] = { seed, "--policy", "matmul=upcast-f32", "-o", upcast, NULL };
    g_assert_cmpint (run_cli (args, NULL), ==, 0);
  }
  {
    const char *args[] = { seed, "-p", "matmul=upcast-f32", "--trace", "backward", "-o", upcast_bwd, NULL };
    g_assert_cmpint (run_cli (args, NULL), ==, 0);
  }
  g_assert_true (g_file_get_contents (native, &a, NULL, NULL));
  g_assert_true (g_file_get_contents (upcast, &b, NULL, NULL));
  g_assert_true (g_file_get_contents (upcast_bwd, &c, NULL, NULL));
  /* the default keeps the matmul on tensor cores, upcast-f32 feeds it f32 operands */
  g_assert_nonnull (strstr (a, "badge=\"tensor-core\""));
  g_assert_null (strstr (a, "badge=\"f32-no-tensor-core\""));
  g_assert_nonnull (strstr (b, "badge=\"f32-no-tensor-core\""));
  g_assert_null (strstr (b, "badge=\"tensor-core\""));
  /* the backward has two matmuls (grad of a + b and of w), both in f32 */
  {
    guint n = 0;
    for (const char *p = c; (p = strstr (p, "badge=\"f32-no-tensor-core\"")) != NULL; p++)
      n++;
    g_assert_cmpuint (n, ==, 2);
  }
  g_assert_true (g_str_has_prefix (c, "digraph \"backward_fn\""));
  g_remove (native);
  g_remove (upcast);
  g_remove (upcast_bwd);
}

static void
test_expand_png (void)
{
  g_autofree char *seed = NULL;
  g_autofree char *out = g_strdup_printf ("%s/seed.png", tmp_dir);
  cairo_surface_t *s;

  if (!have_cli ())
    return;
  seed = seed_path ();
  {
    const char *args[] = { seed, "--expand", "--scale", "2", "-o", out, NULL };
    g_assert_cmpint (run_cli (args, NULL), ==, 0);
  }
  s = cairo_image_surface_create_from_png (out);
  g_assert_cmpint (cairo_surface_status (s), ==, CAIRO_STATUS_SUCCESS);
  /* at 2 px per point the legend is twice as big: the bf16 swatch row centre moves from
   * y = 72 to y = 144, x from 29 to 58 (see test-render-draw) */
  {
    guint32 v;
    cairo_surface_flush (s);
    v = *(guint32 *) (cairo_image_surface_get_data (s) + 144 * cairo_image_surface_get_stride (s) + 58 * 4);
    g_assert_cmphex (v & 0xffffff, ==, 0xD55E00);
  }
  cairo_surface_destroy (s);
  g_remove (out);
}

static void
test_errors (void)
{
  g_autofree char *seed = NULL;
  g_autofree char *out = g_strdup_printf ("%s/x.png", tmp_dir);
  g_autofree char *bad = g_strdup_printf ("%s/bad.txt", tmp_dir);
  g_autofree char *err = NULL;

  if (!have_cli ())
    return;
  seed = seed_path ();
  {
    const char *args[] = { seed, NULL };                         /* no -o */
    g_assert_cmpint (run_cli (args, NULL), ==, 2);
  }
  {
    const char *args[] = { seed, "-o", "x.jpeg", NULL };         /* unknown format */
    g_assert_cmpint (run_cli (args, &err), ==, 2);
    g_assert_nonnull (strstr (err, ".svg"));
    g_clear_pointer (&err, g_free);
  }
  {
    const char *args[] = { seed, "--detail", "everything", "-o", out, NULL };
    g_assert_cmpint (run_cli (args, NULL), ==, 2);
  }
  {
    const char *args[] = { seed, "--policy", "matmul=fp4", "-o", out, NULL };
    g_assert_cmpint (run_cli (args, NULL), ==, 2);
  }
  {
    const char *args[] = { seed, "--pass", "no-such-pass", "-o", out, NULL };
    g_assert_cmpint (run_cli (args, &err), ==, 2);
    g_assert_nonnull (strstr (err, "no-such-pass"));
    g_clear_pointer (&err, g_free);
  }
  {
    const char *args[] = { "/nonexistent/trace.txt", "-o", out, NULL };
    g_assert_cmpint (run_cli (args, NULL), ==, 1);
  }
  /* bad trace text: exit 1 with file:line:col, no output file */
  g_assert_true (g_file_set_contents (bad, "def computation(a):\n  t0 = ltorch.add(a, \n", -1, NULL));
  {
    const char *args[] = { bad, "-o", out, NULL };
    g_assert_cmpint (run_cli (args, &err), ==, 1);
    g_assert_nonnull (strstr (err, "bad.txt:"));
    g_assert_false (g_file_test (out, G_FILE_TEST_EXISTS));
  }
  g_remove (bad);
}


/* --precision draws the lens over the same layout: the PNG of the seed's final forward changes
 * (the rounding points of the region and the matmul, the dashes of f32 compute, two more
 * legend rows: the picture is taller); the DOT text, which has no overlays, does not. */
static void
test_precision_flag (void)
{
  g_autofree char *seed = NULL;
  g_autofree char *plain = g_strdup_printf ("%s/plain.png", tmp_dir);
  g_autofree char *lens = g_strdup_printf ("%s/lens.png", tmp_dir);
  g_autofree char *plain_dot = g_strdup_printf ("%s/plain.dot", tmp_dir);
  g_autofree char *lens_dot = g_strdup_printf ("%s/lens.dot", tmp_dir);
  g_autofree char *a = NULL, *b = NULL;
  cairo_surface_t *sa, *sb;

  if (!have_cli ())
    return;
  seed = seed_path ();
  {
    const char *args[] = { seed, "--policy", "matmul=native", "-o", plain, NULL };
    g_assert_cmpint (run_cli (args, NULL), ==, 0);
  }
  {
    const char *args[] = { seed, "--policy", "matmul=native", "--precision", "-o", lens, NULL };
    g_assert_cmpint (run_cli (args, NULL), ==, 0);
  }
  sa = cairo_image_surface_create_from_png (plain);
  sb = cairo_image_surface_create_from_png (lens);
  g_assert_cmpint (cairo_surface_status (sa), ==, CAIRO_STATUS_SUCCESS);
  g_assert_cmpint (cairo_surface_status (sb), ==, CAIRO_STATUS_SUCCESS);
  g_assert_cmpint (cairo_image_surface_get_height (sb), >, cairo_image_surface_get_height (sa));
  cairo_surface_destroy (sa);
  cairo_surface_destroy (sb);
  {
    const char *args[] = { seed, "--policy", "matmul=native", "-o", plain_dot, NULL };
    g_assert_cmpint (run_cli (args, NULL), ==, 0);
  }
  {
    const char *args[] = { seed, "--policy", "matmul=native", "--precision", "-o", lens_dot, NULL };
    g_assert_cmpint (run_cli (args, NULL), ==, 0);
  }
  g_assert_true (g_file_get_contents (plain_dot, &a, NULL, NULL));
  g_assert_true (g_file_get_contents (lens_dot, &b, NULL, NULL));
  g_assert_cmpstr (a, ==, b);
  g_remove (plain);
  g_remove (lens);
  g_remove (plain_dot);
  g_remove (lens_dot);
}

static guint
count_in (const char *text, const char *needle)
{
  guint n = 0;

  for (const char *p = strstr (text, needle); p != NULL; p = strstr (p + 1, needle))
    n++;
  return n;
}

/* The hierarchy flag: the 8-block LLaMA, whose blocks all have the same structure, as one
 * node for the 8 (auto: "layers 0-7: same structure, 1 shown"), as 8 block nodes (--no-fold),
 * as 8 layer clusters holding their 3 module clusters (none), with layers.3 alone expanded
 * between the folds of layers 0-2 and 4-7 (--expand-group; 7 nodes with --no-fold), flat (no
 * group at all); a bad level is a usage error. */
static void
test_collapse (void)
{
  const char *dir = g_getenv ("CS_SHARED_TRACES");
  g_autofree char *llama = dir ? g_build_filename (dir, "thunder_llama_stack_initial.txt", NULL) : NULL;
  g_autofree char *out = g_strdup_printf ("%s/llama.dot", tmp_dir);
  const char *levels[] = { "auto", "none", "flat" };
  g_autofree char *err = NULL;

  if (!have_cli ())
    return;
  if (llama == NULL || !g_file_test (llama, G_FILE_TEST_IS_REGULAR))
    {
      g_test_skip ("thunder_llama_stack_initial.txt not found");
      return;
    }
  for (guint i = 0; i < G_N_ELEMENTS (levels); i++)
    {
      g_autofree char *text = NULL;
      const char *args[] = { llama, "--collapse", levels[i], "-o", out, NULL };

      g_assert_cmpint (run_cli (args, NULL), ==, 0);
      g_assert_true (g_file_get_contents (out, &text, NULL, NULL));
      /* group nodes carry csgroup= on a node line ("n<i> [..."), group clusters on their
       * attribute line inside "subgraph cluster_<k>" */
      if (i == 0)
        {
          g_assert_cmpuint (count_in (text, "penwidth=2, csgroup="), ==, 1);
          g_assert_cmpuint (count_in (text, "label=\"layers 0-7: same structure, 1 shown\\n"), ==, 1);
          g_assert_cmpuint (count_in (text, "subgraph cluster_"), ==, 0);
        }
      else if (i == 1)
        {
          g_assert_cmpuint (count_in (text, "penwidth=2, csgroup="), ==, 0);
          g_assert_cmpuint (count_in (text, "color=\"#5B7DB1\"; csgroup="), ==, 8 * 4);
          g_assert_cmpuint (count_in (text, "label=\"layers.7  (same structure as layers.0)"), ==, 1);
        }
      else
        g_assert_cmpuint (count_in (text, "csgroup="), ==, 0);
      g_remove (out);
    }
  {
    g_autofree char *text = NULL;
    const char *args[] = { llama, "--expand-group", "layers.3", "-o", out, NULL };

    g_assert_cmpint (run_cli (args, NULL), ==, 0);
    g_assert_true (g_file_get_contents (out, &text, NULL, NULL));
    g_assert_cmpuint (count_in (text, "penwidth=2, csgroup="), ==, 2);
    g_assert_cmpuint (count_in (text, "label=\"layers 0-2: same structure, 1 shown\\n"), ==, 1);
    g_assert_cmpuint (count_in (text, "label=\"layers 4-7: same structure, 1 shown\\n"), ==, 1);
    g_assert_cmpuint (count_in (text, "color=\"#5B7DB1\"; csgroup="), ==, 4);
    g_remove (out);
  }
  {
    g_autofree char *text = NULL;
    const char *args[] = { llama, "--no-fold", "-o", out, NULL };
    const char *args3[] = { llama, "--no-fold", "--expand-group", "layers.3", "-o", out, NULL };

    g_assert_cmpint (run_cli (args, NULL), ==, 0);
    g_assert_true (g_file_get_contents (out, &text, NULL, NULL));
    g_assert_cmpuint (count_in (text, "penwidth=2, csgroup="), ==, 8);
    g_assert_cmpuint (count_in (text, "same structure, 1 shown"), ==, 0);
    g_clear_pointer (&text, g_free);
    g_assert_cmpint (run_cli (args3, NULL), ==, 0);
    g_assert_true (g_file_get_contents (out, &text, NULL, NULL));
    g_assert_cmpuint (count_in (text, "penwidth=2, csgroup="), ==, 7);
    g_remove (out);
  }
  {
    const char *args[] = { llama, "--collapse", "sideways", "-o", out, NULL };

    g_assert_cmpint (run_cli (args, &err), ==, 2);
    g_assert_nonnull (strstr (err, "--collapse must be auto, layers, modules, none or flat"));
  }
}

int
main (int argc, char **argv)
{
  int rc;

  g_test_init (&argc, &argv, G_TEST_OPTION_ISOLATE_DIRS, NULL);
  tmp_dir = g_dir_make_tmp ("cs-render-cli-XXXXXX", NULL);
  g_test_add_func ("/render/cli/formats", test_formats);
  g_test_add_func ("/render/cli/policy", test_policy);
  g_test_add_func ("/render/cli/precision", test_precision_flag);
  g_test_add_func ("/render/cli/expand-png", test_expand_png);
  g_test_add_func ("/render/cli/errors", test_errors);
  g_test_add_func ("/render/cli/collapse", test_collapse);
  rc = g_test_run ();
  g_rmdir (tmp_dir);
  g_free (tmp_dir);
  return rc;
}
