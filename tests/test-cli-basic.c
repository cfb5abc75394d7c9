/* test-cli-basic.c: `castscope-cli print` and `info` as a user runs them: exit codes 0 (ok),
 * 1 (bad input, "file:line:col: reason" on stderr) and 2 (usage), on a missing file, a
 * directory, an empty file, a binary file, a good file and standard input.  The CLI is
 * spawned directly ($CS_CLI), no shell. */
#include "cs-config.h"

#include <glib/gstdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#if CS_HAVE_JSON
#include <json-glib/json-glib.h>
#endif

typedef struct
{
  int   status;   /* exit code */
  char *out;      /* stdout */
  char *err;      /* stderr */
} Run;

static void
run_clear (Run *r)
{
  g_free (r->out);
  g_free (r->err);
}

static const char *
cli (void)
{
  const char *p = g_getenv ("CS_CLI");
  return p != NULL && g_file_test (p, G_FILE_TEST_IS_EXECUTABLE) ? p : NULL;
}

/* Runs the CLI with @args (NULL-terminated, without argv[0]); @input is fed to stdin. */
static Run
run (const char *input, const char *first, ...)
{
  GPtrArray *argv = g_ptr_array_new ();
  g_autoptr(GError) error = NULL;
  Run r = { 0 };
  va_list ap;
  int in_fd = -1, out_fd = -1, err_fd = -1, wait_status = 0;
  GPid pid;
  GString *out = g_string_new (NULL), *err = g_string_new (NULL);
  char buf[4096];
  gssize got;

  g_ptr_array_add (argv, (gpointer) cli ());
  va_start (ap, first);
  for (const char *a = first; a != NULL; a = va_arg (ap, const char *))
    g_ptr_array_add (argv, (gpointer) a);
  va_end (ap);
  g_ptr_array_add (argv, NULL);

  if (!g_spawn_async_with_pipes (NULL, (char **) argv->pdata, NULL, G_SPAWN_DO_NOT_REAP_CHILD, NULL,
                                 NULL, &pid, &in_fd, &out_fd, &err_fd, &error))
    g_error ("cannot run %s: %s", cli (), error->message);
  if (input != NULL)
    g_assert_cmpint (write (in_fd, input, strlen (input)), ==, (gssize) strlen (input));
  close (in_fd);
  while ((got = read (out_fd, buf, sizeof buf)) > 0)
    g_string_append_len (out, buf, got);
  while ((got = read (err_fd, buf, sizeof buf)) > 0)
    g_string_append_len (err, buf, got);
  close (out_fd);
  close (err_fd);
  g_assert_cmpint (waitpid (pid, &wait_status, 0), ==, pid);
  g_spawn_close_pid (pid);
  g_assert_true (g_spawn_check_wait_status (wait_status, NULL) || WIFEXITED (wait_status));
  r.status = WEXITSTATUS (wait_status);
  r.out = g_string_free (out, FALSE);
  r.err = g_string_free (err, FALSE);
  g_ptr_array_free (argv, TRUE);
  return r;
}

static char *
shared (const char *file)
{
  const char *dir = g_getenv ("CS_SHARED_TRACES");
  if (dir == NULL || !g_file_test (dir, G_FILE_TEST_IS_DIR))
    return NULL;
  return g_build_filename (dir, file, NULL);
}

static gboolean
need_cli (void)
{
  if (cli () == NULL)
    {
      g_test_skip ("CS_CLI (castscope-cli) is not built");
      return FALSE;
    }
  return TRUE;
}

static void
test_bad_inputs (void)
{
  g_autofree char *dir = NULL, *empty = NULL, *binary = NULL, *missing = NULL, *want = NULL;
  static const char bin[] = "def f(a):\n\x7f" "ELF\x02\x01\x01\x00\xff\xfe\n";
  Run r;

  if (!need_cli ())
    return;
  dir = g_dir_make_tmp ("cs-cli-XXXXXX", NULL);
  empty = g_build_filename (dir, "empty.txt", NULL);
  binary = g_build_filename (dir, "binary.bin", NULL);
  missing = g_build_filename (dir, "missing.txt", NULL);
  g_assert_true (g_file_set_contents (empty, "", 0, NULL));
  g_assert_true (g_file_set_contents (binary, bin, sizeof bin - 1, NULL));

  /* missing file: exit 1, "PATH:1:1: cannot read: ..." */
  r = run (NULL, "print", missing, NULL);
  g_assert_cmpint (r.status, ==, 1);
  want = g_strdup_printf ("%s:1:1: cannot read", missing);
  g_assert_true (g_str_has_prefix (r.err, want));
  g_assert_cmpstr (r.out, ==, "");
  run_clear (&r);
  g_clear_pointer (&want, g_free);

  /* a directory */
  r = run (NULL, "info", dir, NULL);
  g_assert_cmpint (r.status, ==, 1);
  want = g_strdup_printf ("%s:1:1: is a directory", dir);
  g_assert_true (g_str_has_prefix (r.err, want));
  run_clear (&r);
  g_clear_pointer (&want, g_free);

  /* an empty file */
  r = run (NULL, "print", empty, NULL);
  g_assert_cmpint (r.status, ==, 1);
  want = g_strdup_printf ("%s:1:1: empty input", empty);
  g_assert_true (g_str_has_prefix (r.err, want));
  run_clear (&r);
  g_clear_pointer (&want, g_free);

  /* a binary file: the NUL byte after "ELF\x02\x01\x01" is line 2, column 8 */
  r = run (NULL, "info", "--json", binary, NULL);
  g_assert_cmpint (r.status, ==, 1);
  want = g_strdup_printf ("%s:2:8: not UTF-8", binary);
  if (!g_str_has_prefix (r.err, want))
    g_error ("stderr \"%s\" should start with \"%s\"", r.err, want);
  g_assert_cmpstr (r.out, ==, "");
  run_clear (&r);

  g_unlink (empty);
  g_unlink (binary);
  g_rmdir (dir);
}

static void
test_usage (void)
{
  Run r;

  if (!need_cli ())
    return;
  r = run (NULL, "print", NULL);
  g_assert_cmpint (r.status, ==, 2);
  g_assert_nonnull (strstr (r.err, "expected exactly one FILE"));
  run_clear (&r);
  r = run (NULL, "info", "--no-such-option", "x", NULL);
  g_assert_cmpint (r.status, ==, 2);
  run_clear (&r);
  r = run (NULL, "print", "--help", NULL);
  g_assert_cmpint (r.status, ==, 0);
  g_assert_nonnull (strstr (r.out, "--no-subsymbols"));
  run_clear (&r);
  r = run (NULL, "info", "--help", NULL);
  g_assert_cmpint (r.status, ==, 0);
  g_assert_nonnull (strstr (r.out, "--json"));
  run_clear (&r);
}

static void
test_print_good_file (void)
{
  g_autofree char *path = shared ("thunder_nvfuser_b_mlp_gelu_default_final_bwd.txt");
  g_autofree char *text = NULL;
  Run r;

  if (!need_cli ())
    return;
  if (path == NULL)
    {
      g_test_skip ("no shared traces");
      return;
    }
  g_assert_true (g_file_get_contents (path, &text, NULL, NULL));
  r = run (NULL, "print", path, NULL);
  g_assert_cmpint (r.status, ==, 0);
  g_assert_cmpstr (r.out, ==, text);
  g_assert_cmpstr (r.err, ==, "");
  run_clear (&r);

  /* --no-subsymbols: grep -c '^    ' on the file gives 57 subsymbol lines, 112 lines in all */
  r = run (NULL, "print", "--no-subsymbols", path, NULL);
  g_assert_cmpint (r.status, ==, 0);
  {
    guint n = 0;
    for (const char *c = r.out; *c; c++)
      n += *c == '\n';
    g_assert_cmpuint (n, ==, 112 - 57);
  }
  run_clear (&r);
}

static void
test_print_stdin (void)
{
  static const char text[] =
    "def f(a):\n"
    "  # a: \"cpu f32[2]\"\n"
    "  t0 = prims.neg(a)  # t0: \"cpu f32[2]\"\n"
    "  return t0\n";
  Run r;

  if (!need_cli ())
    return;
  r = run (text, "print", "-", NULL);
  g_assert_cmpint (r.status, ==, 0);
  g_assert_cmpstr (r.out, ==, text);
  run_clear (&r);
  /* a syntax error on stdin is located in "-" */
  r = run ("def f(a):\n  t0 = prims.neg(a\n", "print", "-", NULL);
  g_assert_cmpint (r.status, ==, 1);
  g_assert_true (g_str_has_prefix (r.err, "-:2:19: "));
  run_clear (&r);
}

static void
test_info (void)
{
  g_autofree char *path = shared ("issue283_autocast_bf16_matmul.txt");
  Run r;

  if (!need_cli ())
    return;
  if (path == NULL)
    {
      g_test_skip ("no shared traces");
      return;
    }
  /* counted by hand in the file: nvFusion0 (2 converts to bf16) and nvFusion1 (1 convert to
   * f32, 1 add); 1 top-level torch.matmul */
  r = run (NULL, "info", path, NULL);
  g_assert_cmpint (r.status, ==, 0);
  g_assert_nonnull (strstr (r.out, "1 trace\n"));
  g_assert_nonnull (strstr (r.out, "fusion regions: 2\n"));
  g_assert_nonnull (strstr (r.out, "casts: 0 top-level, 3 inside fusion regions, 3 at every level"));
  g_assert_null (strstr (r.out, "line 20"));
  run_clear (&r);
  r = run (NULL, "info", "--casts", path, NULL);
  g_assert_cmpint (r.status, ==, 0);
  g_assert_nonnull (strstr (r.out, "line 20     bf16  -> f32   t5"));
  run_clear (&r);
#if CS_HAVE_JSON
  r = run (NULL, "info", "--json", path, NULL);
  g_assert_cmpint (r.status, ==, 0);
  {
    g_autoptr(JsonParser) parser = json_parser_new ();
    JsonObject *root, *t, *casts, *by;
    g_assert_true (json_parser_load_from_data (parser, r.out, -1, NULL));
    root = json_node_get_object (json_parser_get_root (parser));
    g_assert_cmpuint (json_array_get_length (json_object_get_array_member (root, "traces")), ==, 1);
    t = json_array_get_object_element (json_object_get_array_member (root, "traces"), 0);
    g_assert_cmpstr (json_object_get_string_member (t, "name"), ==, "computation");
    g_assert_cmpuint (json_array_get_length (json_object_get_array_member (t, "fusion_regions")), ==, 2);
    g_assert_cmpint (json_object_get_int_member (json_object_get_object_member (t, "ops"), "torch.matmul"),
                     ==, 1);
    casts = json_object_get_object_member (t, "casts");
    by = json_object_get_object_member (casts, "by_target_dtype");
    g_assert_cmpint (json_object_get_int_member (by, "bf16"), ==, 2);
    g_assert_cmpint (json_object_get_int_member (by, "f32"), ==, 1);
    /* the casts that run, with their file lines (counted in the file: the nvFusion0 prims are
     * lines 12-13, the nvFusion1 convert is line 20) */
    {
      JsonArray *sites = json_object_get_array_member (casts, "sites");
      static const struct { gint64 line; const char *from, *to, *region; } want[] = {
        { 12, "f32", "bf16", "nvFusion0" }, { 13, "f32", "bf16", "nvFusion0" },
        { 20, "bf16", "f32", "nvFusion1" },
      };
      g_assert_cmpuint (json_array_get_length (sites), ==, 3);
      for (guint i = 0; i < 3; i++)
        {
          JsonObject *o = json_array_get_object_element (sites, i);
          g_assert_cmpint (json_object_get_int_member (o, "line"), ==, want[i].line);
          g_assert_cmpstr (json_object_get_string_member (o, "from"), ==, want[i].from);
          g_assert_cmpstr (json_object_get_string_member (o, "to"), ==, want[i].to);
          g_assert_cmpstr (json_object_get_string_member (o, "region"), ==, want[i].region);
        }
    }
    /* tensors: a, b, t_2, t2, t3, result, t5, t6 = 5 f32 + 3 bf16 */
    g_assert_cmpint (json_object_get_int_member (json_object_get_object_member (t, "tensor_dtypes"), "f32"),
                     ==, 5);
  }
  run_clear (&r);
#endif
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/app/cli/bad-inputs", test_bad_inputs);
  g_test_add_func ("/app/cli/usage", test_usage);
  g_test_add_func ("/app/cli/print/file", test_print_good_file);
  g_test_add_func ("/app/cli/print/stdin", test_print_stdin);
  g_test_add_func ("/app/cli/info", test_info);
  return g_test_run ();
}
