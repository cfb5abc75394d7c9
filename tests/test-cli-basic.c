/* test-cli-basic.c: `castscope-cli print` and `info` as a user runs them: exit codes 0 (ok),
 * 1 (bad input, "file:line:col: reason" on stderr) and 2 (usage), on a missing file, a
 * directory, an empty file, a binary file, a good file and standard input.  The CLI is
 * spawned directly ($CS_CLI), no shell. */
#include "cs-config.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cs-tensor.h"

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

  /* missing file: exit 1, "PATH: cannot read: ..." (no line and column: nothing was read) */
  r = run (NULL, "print", missing, NULL);
  g_assert_cmpint (r.status, ==, 1);
  want = g_strdup_printf ("castscope-cli: %s: cannot read: No such file or directory\n", missing);
  g_assert_true (g_str_has_prefix (r.err, want));
  g_assert_cmpstr (r.out, ==, "");
  run_clear (&r);
  g_clear_pointer (&want, g_free);

  /* a directory */
  r = run (NULL, "info", dir, NULL);
  g_assert_cmpint (r.status, ==, 1);
  want = g_strdup_printf ("castscope-cli: %s: is a directory", dir);
  g_assert_true (g_str_has_prefix (r.err, want));
  run_clear (&r);
  g_clear_pointer (&want, g_free);

  /* an empty file */
  r = run (NULL, "print", empty, NULL);
  g_assert_cmpint (r.status, ==, 1);
  want = g_strdup_printf ("castscope-cli: %s:1:1: empty input", empty);
  g_assert_true (g_str_has_prefix (r.err, want));
  run_clear (&r);
  g_clear_pointer (&want, g_free);

  /* a binary file: the NUL byte after "ELF\x02\x01\x01" is line 2, column 8 */
  r = run (NULL, "info", "--json", binary, NULL);
  g_assert_cmpint (r.status, ==, 1);
  want = g_strdup_printf ("castscope-cli: %s:2:8: not UTF-8", binary);
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
  g_assert_true (g_str_has_prefix (r.err, "castscope-cli: -:2:19: "));
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

/* data/seed_foo.txt with each @from replaced by @to (in order; NULL-terminated pairs), written
 * to a new file in @dir.  Returns its path. */
static char *
seed_variant (const char *dir, const char *name, ...)
{
  g_autofree char *seed = g_build_filename (g_getenv ("CS_DATA_DIR"), "seed_foo.txt", NULL);
  g_autofree char *text = NULL;
  char *path = g_build_filename (dir, name, NULL);
  const char *from;
  va_list ap;

  g_assert_true (g_file_get_contents (seed, &text, NULL, NULL));
  va_start (ap, name);
  while ((from = va_arg (ap, const char *)) != NULL)
    {
      const char *to = va_arg (ap, const char *);
      g_auto(GStrv) parts = g_strsplit (text, from, -1);

      g_assert_cmpuint (g_strv_length (parts), >=, 2);   /* @from must occur */
      g_free (text);
      text = g_strjoinv (to, parts);
    }
  va_end (ap);
  g_assert_true (g_file_set_contents (path, text, -1, NULL));
  return path;
}

/* The text report line of output @name ("  t5  bf16[8, 16]  max_abs_err ..."), or NULL. */
static char *
report_line (const char *out, const char *name)
{
  g_auto(GStrv) lines = g_strsplit (out, "\n", -1);
  g_autofree char *lead = g_strdup_printf ("  %s ", name);

  for (guint i = 0; lines[i]; i++)
    if (g_str_has_prefix (lines[i], lead))
      return g_strdup (lines[i]);
  return NULL;
}

/* stats lists the casts the user wrote that remove-redundant-casts dropped: in
 * exp(x.float()).to(bf16) * y (line 11) the .to(bf16) t2 goes, and the mul writing t6 reads the
 * unrounded f32 exp; under redundant-casts=keep there is none.  --cast-effect runs the forward
 * with and without: its errors are those castscope-cli run reports for t3 under the two
 * policies (the same seed-0 inputs), and the outputs differ (max |without - with| > 0). */
#if CS_HAVE_JSON
static double
run_err (const char *path, const char *policy)
{
  g_autoptr(JsonParser) parser = json_parser_new ();
  JsonObject *o;
  double err;
  Run r = run (NULL, "run", path, "--forward-only", "--json", "--policy", policy, NULL);

  g_assert_cmpint (r.status, ==, 0);
  g_assert_true (json_parser_load_from_data (parser, r.out, -1, NULL));
  o = json_array_get_object_element (json_object_get_array_member (json_object_get_object_member (
        json_node_get_object (json_parser_get_root (parser)), "forward"), "outputs"), 0);
  g_assert_cmpstr (json_object_get_string_member (o, "name"), ==, "t3");
  err = json_object_get_double_member (o, "err");
  run_clear (&r);
  return err;
}
#endif

static void
test_stats_removed_casts (void)
{
  static const char text[] =
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
  g_autofree char *dir = NULL, *path = NULL;
  Run r;

  if (!need_cli ())
    return;
  dir = g_dir_make_tmp ("cs-cli-XXXXXX", NULL);
  path = g_build_filename (dir, "cast_mul.txt", NULL);
  g_assert_true (g_file_set_contents (path, text, -1, NULL));
  r = run (NULL, "stats", path, NULL);
  g_assert_cmpint (r.status, ==, 0);
  g_assert_nonnull (strstr (r.out, "removed user casts: 3 (1 forward, 2 backward)"));
  g_assert_nonnull (strstr (r.out, "  line 13: t2 = ltorch.to(t1, torch.bfloat16, None, device=None, "
                                   "dtype=None, copy=False): t2 f32 -> bf16 in nvFusion0 (forward) "
                                   "removed; t6 reads the unrounded f32 value\n"));
  run_clear (&r);
  r = run (NULL, "stats", path, "--policy", "redundant-casts=keep", NULL);
  g_assert_cmpint (r.status, ==, 0);
  g_assert_nonnull (strstr (r.out, "removed user casts: none\n"));
  run_clear (&r);
#if CS_HAVE_JSON
  {
    g_autoptr(JsonParser) parser = json_parser_new ();
    JsonObject *root, *c, *e;
    JsonArray *casts, *effects;
    double keep = run_err (path, "redundant-casts=keep"), remove = run_err (path, "redundant-casts=remove");

    r = run (NULL, "stats", path, "--json", "--cast-effect", NULL);
    g_assert_cmpint (r.status, ==, 0);
    g_assert_true (json_parser_load_from_data (parser, r.out, -1, NULL));
    root = json_node_get_object (json_parser_get_root (parser));
    casts = json_object_get_array_member (root, "removed_user_casts");
    g_assert_cmpuint (json_array_get_length (casts), ==, 3);
    c = json_array_get_object_element (casts, 0);
    g_assert_cmpint (json_object_get_int_member (c, "line"), ==, 13);
    g_assert_cmpstr (json_object_get_string_member (c, "tensor"), ==, "t2");
    g_assert_cmpstr (json_object_get_string_member (c, "from"), ==, "f32");
    g_assert_cmpstr (json_object_get_string_member (c, "to"), ==, "bf16");
    g_assert_cmpstr (json_object_get_string_member (c, "region"), ==, "nvFusion0");
    g_assert_cmpstr (json_object_get_string_member (c, "reader"), ==, "t6");
    g_assert_false (json_object_get_boolean_member (c, "backward"));
    effects = json_object_get_array_member (json_object_get_object_member (root, "removed_user_casts_effect"),
                                            "forward");
    g_assert_cmpuint (json_array_get_length (effects), ==, 1);
    e = json_array_get_object_element (effects, 0);
    g_assert_cmpstr (json_object_get_string_member (e, "name"), ==, "t3");
    g_assert_cmpfloat (json_object_get_double_member (e, "err_keep"), ==, keep);
    g_assert_cmpfloat (json_object_get_double_member (e, "err_remove"), ==, remove);
    g_assert_cmpfloat (json_object_get_double_member (e, "max_abs_diff"), >, 0);
    run_clear (&r);
  }
#endif
  g_unlink (path);
  g_rmdir (dir);
}

/* run under rounding=fused and rounding=eager (issue 19) on (a * b) + c in bf16, inputs read
 * from --inputs: a = b = [1.0234375, 3], c = [-1, 0.25] (test-core-rounding works the values
 * out: element 0 is 0.04736328125 fused, 0.046875 eager, 0.04742431640625 in f64; element 1 is
 * 1.75 everywhere).  So max_abs_err is 2^-14 = 6.103515625e-05 fused (the f64 value rounded
 * once: ratio 1 against the floor) and 9 * 2^-14 = 5.4931640625e-04 eager (ratio 9); the text
 * report names the eager policy, and no policy line is printed under the default. */
static void
test_run_rounding (void)
{
  static const char text[] =
    "import thunder\n"
    "import thunder.torch as ltorch\n"
    "import torch\n"
    "from thunder.executors.torchex import no_autocast\n\n"
    "@torch.no_grad()\n"
    "@no_autocast\n"
    "def computation(a, b, c):\n"
    "  # a: \"cuda:0 bf16[2]\"\n"
    "  # b: \"cuda:0 bf16[2]\"\n"
    "  # c: \"cuda:0 bf16[2]\"\n"
    "  t0 = ltorch.mul(a, b)  # t0: \"cuda:0 bf16[2]\"\n"
    "  t1 = ltorch.add(t0, c)  # t1: \"cuda:0 bf16[2]\"\n"
    "  return (t1,)\n";
  const double ab[2] = { 1.0234375, 3 }, bb[2] = { 1.0234375, 0.5 }, cb[2] = { -1, 0.25 };
  const double *vals[3] = { ab, bb, cb };
  const char *names[3] = { "a", "b", "c" };
  const int64_t shape[1] = { 2 };
  g_autofree char *dir = NULL, *path = NULL;
  Run r;

  if (!need_cli ())
    return;
  dir = g_dir_make_tmp ("cs-cli-XXXXXX", NULL);
  path = g_build_filename (dir, "mul_add.txt", NULL);
  g_assert_true (g_file_set_contents (path, text, -1, NULL));
  for (guint i = 0; i < 3; i++)
    {
      g_autofree char *file = g_strconcat (names[i], ".npy", NULL);
      g_autofree char *npy = g_build_filename (dir, file, NULL);
      g_autoptr(CsTensor) x = cs_tensor_new_from_f64 (CS_DTYPE_BF16, shape, 1, vals[i], NULL);

      g_assert_true (cs_tensor_save_npy (x, npy, NULL));
    }
  r = run (NULL, "run", path, "--inputs", dir, "--grad", "none", NULL);
  g_assert_cmpint (r.status, ==, 0);
  g_assert_null (strstr (r.out, "policy:"));
  g_assert_nonnull (strstr (r.out, "  max_abs_err 6.104e-05 "));
  run_clear (&r);
  r = run (NULL, "run", path, "--inputs", dir, "--grad", "none", "--policy", "rounding=eager", NULL);
  g_assert_cmpint (r.status, ==, 0);
  g_assert_nonnull (strstr (r.out, "\npolicy: matmul=native elementwise=f32 autocast=off "
                                   "fusion=consecutive fuse-matmul=off fuse-linear=off "
                                   "redundant-casts=remove rounding=eager tf32=off "));
  g_assert_nonnull (strstr (r.out, "  max_abs_err 5.493e-04 "));
  run_clear (&r);
#if CS_HAVE_JSON
  {
    const char *modes[2] = { "rounding=fused", "rounding=eager" };
    const double max_abs[2] = { 6.103515625e-05, 5.4931640625e-04 }, ratio[2] = { 1, 9 };

    for (guint m = 0; m < 2; m++)
      {
        g_autoptr(JsonParser) parser = json_parser_new ();
        JsonObject *root, *o;

        r = run (NULL, "run", path, "--inputs", dir, "--grad", "none", "--json", "--policy",
                 modes[m], NULL);
        g_assert_cmpint (r.status, ==, 0);
        g_assert_true (json_parser_load_from_data (parser, r.out, -1, NULL));
        root = json_node_get_object (json_parser_get_root (parser));
        /* the policy string names rounding only when it is eager */
        g_assert_true ((strstr (json_object_get_string_member (root, "policy"), "rounding=eager")
                        != NULL) == (m == 1));
        o = json_array_get_object_element (json_object_get_array_member (
              json_object_get_object_member (root, "forward"), "outputs"), 0);
        g_assert_cmpstr (json_object_get_string_member (o, "name"), ==, "t1");
        g_assert_cmpfloat (json_object_get_double_member (o, "max_abs_err"), ==, max_abs[m]);
        g_assert_cmpfloat_with_epsilon (json_object_get_double_member (o, "ratio"), ratio[m], 1e-12);
        /* both pass: |x - f64| <= tol (1e-3) everywhere, PyTorch's allclose test */
        g_assert_cmpstr (json_object_get_string_member (o, "verdict"), ==, "ok");
        run_clear (&r);
      }
  }
#endif
  for (guint i = 0; i < 3; i++)
    {
      g_autofree char *file = g_strconcat (names[i], ".npy", NULL);
      g_autofree char *npy = g_build_filename (dir, file, NULL);

      g_unlink (npy);
    }
  g_unlink (path);
  g_rmdir (dir);
}

/* The dynamic range in run's report (core/cs-lens.h): t0 = x + 0 over eight f32 values placed by
 * hand, read from --inputs: 0, 1, -2, 70000 (past f16's 65520, e4m3's 464 and e5m2's 61440),
 * 500 (past e4m3's 464), 464 (e4m3's tie, rounds down to 448), 3e-8 (f16 subnormal, flushes
 * in e4m3 (<= 2^-10) and e5m2 (<= 2^-17)), 5e-5 (f16 and e5m2 subnormal, flushes in e4m3). */
static void
test_run_range (void)
{
  static const char text[] =
    "import thunder\n"
    "import thunder.torch as ltorch\n"
    "import torch\n"
    "from thunder.executors.torchex import no_autocast\n\n"
    "@torch.no_grad()\n"
    "@no_autocast\n"
    "def computation(x):\n"
    "  # x: \"cuda:0 f32[8]\"\n"
    "  t0 = ltorch.add(x, 0.0, alpha=1)  # t0: \"cuda:0 f32[8]\"\n"
    "  return (t0,)\n";
  const double v[8] = { 0, 1, -2, 70000, 500, 464, 3e-8, 5e-5 };
  const int64_t shape[1] = { 8 };
  g_autofree char *dir = NULL, *path = NULL, *npy = NULL, *line = NULL;
  g_autoptr(CsTensor) x = cs_tensor_new_from_f64 (CS_DTYPE_F32, shape, 1, v, NULL);
  Run r;

  if (!need_cli ())
    return;
  dir = g_dir_make_tmp ("cs-cli-XXXXXX", NULL);
  path = g_build_filename (dir, "range.txt", NULL);
  npy = g_build_filename (dir, "x.npy", NULL);
  g_assert_true (g_file_set_contents (path, text, -1, NULL));
  g_assert_true (cs_tensor_save_npy (x, npy, NULL));
  r = run (NULL, "run", path, "--forward-only", "--inputs", dir, NULL);
  g_assert_cmpint (r.status, ==, 0);
  line = report_line (r.out, "t0");
  g_assert_nonnull (line);
  g_assert_nonnull (strstr (line, "  amax 7.000e+04  range: f16: 1 overflow, 2 subnormal; "
                                  "e4m3: 2 overflow, 2 flush to zero; "
                                  "e5m2: 1 overflow, 1 flush to zero, 1 subnormal"));
  run_clear (&r);
#if CS_HAVE_JSON
  {
    g_autoptr(JsonParser) parser = json_parser_new ();
    JsonObject *o, *range, *e4m3, *bf16;

    r = run (NULL, "run", path, "--forward-only", "--inputs", dir, "--json", NULL);
    g_assert_cmpint (r.status, ==, 0);
    g_assert_true (json_parser_load_from_data (parser, r.out, -1, NULL));
    o = json_array_get_object_element (json_object_get_array_member (json_object_get_object_member (
          json_node_get_object (json_parser_get_root (parser)), "forward"), "outputs"), 0);
    g_assert_cmpstr (json_object_get_string_member (o, "name"), ==, "t0");
    range = json_object_get_object_member (o, "range");
    g_assert_cmpfloat (json_object_get_double_member (range, "amax"), ==, 70000);
    g_assert_cmpfloat (json_object_get_double_member (range, "min_nonzero"), ==, (double) 3e-8f);
    g_assert_cmpint (json_object_get_int_member (range, "zeros"), ==, 1);
    e4m3 = json_object_get_object_member (json_object_get_object_member (range, "formats"), "e4m3");
    g_assert_cmpint (json_object_get_int_member (e4m3, "overflow"), ==, 2);
    g_assert_cmpint (json_object_get_int_member (e4m3, "flush_to_zero"), ==, 2);
    g_assert_true (json_object_get_boolean_member (e4m3, "overflow_risk"));
    bf16 = json_object_get_object_member (json_object_get_object_member (range, "formats"), "bf16");
    g_assert_cmpint (json_object_get_int_member (bf16, "overflow"), ==, 0);
    g_assert_false (json_object_get_boolean_member (bf16, "overflow_risk"));
    g_assert_false (json_object_get_boolean_member (bf16, "underflow_risk"));
    run_clear (&r);
  }
#endif
  g_unlink (npy);
  g_unlink (path);
  g_rmdir (dir);
}

/* B6: NaN or inf in the exact run is never reported as a zero error. */
static void
test_run_nonfinite (void)
{
  g_autofree char *dir = NULL, *nan = NULL, *inf = NULL, *f16 = NULL, *line = NULL;
  Run r;

  if (!need_cli ())
    return;
  dir = g_dir_make_tmp ("cs-cli-XXXXXX", NULL);
  nan = seed_variant (dir, "nan.txt", "alpha=1)", "alpha=float(\"nan\"))", NULL);
  inf = seed_variant (dir, "inf.txt", "alpha=1)", "alpha=1e999)", NULL);
  f16 = seed_variant (dir, "f16.txt", "bf16", "f16", "alpha=1)", "alpha=1e6)", NULL);

  /* all NaN in both runs: the NaNs agree (issue 21 item 7), so no mismatch, and with no
   * finite element there is no error to report: "-", never 0 */
  r = run (NULL, "run", nan, "--forward-only", NULL);
  g_assert_cmpint (r.status, ==, 0);
  line = report_line (r.out, "t5");
  g_assert_nonnull (line);
  g_assert_nonnull (strstr (line, "err -  ref_err - (floor)  ratio -"));
  g_assert_nonnull (strstr (line, "non-finite 128 (as in f64)"));
  g_assert_null (strstr (line, "MISMATCH"));
  g_assert_null (strstr (line, "err 0.000e+00"));
  g_clear_pointer (&line, g_free);
  run_clear (&r);

  /* alpha=1e999: t4 = a + inf * b is +-inf, and so is the f64 reference; t5 sums +inf and
   * -inf into NaN in both: agreeing, and never an error of 0 */
  r = run (NULL, "run", inf, "--forward-only", NULL);
  g_assert_cmpint (r.status, ==, 0);
  line = report_line (r.out, "t5");
  g_assert_nonnull (line);
  g_assert_null (strstr (line, "err 0.000e+00"));
  g_assert_nonnull (strstr (line, "non-finite 128"));
  g_clear_pointer (&line, g_free);
  run_clear (&r);

  /* f16: a + 1e6 * b overflows to inf in t4 where the f64 truth is finite (an infinite
   * error), and t5 = t4 @ w sums +inf and -inf into NaN where f64 is finite */
  r = run (NULL, "run", f16, "--forward-only", "--all-outputs", NULL);
  g_assert_cmpint (r.status, ==, 0);
  line = report_line (r.out, "t4");
  g_assert_nonnull (line);
  g_assert_nonnull (strstr (line, "err inf "));
  g_assert_nonnull (strstr (line, "max_abs_err inf"));
  g_assert_nonnull (strstr (line, "rel_l2_err inf"));
  g_assert_nonnull (strstr (line, "MISMATCH: 128 "));
  g_clear_pointer (&line, g_free);
  line = report_line (r.out, "t5");
  g_assert_nonnull (line);
  g_assert_nonnull (strstr (line, "max_abs_err nan"));
  g_assert_nonnull (strstr (line, "MISMATCH: 128 "));
  g_clear_pointer (&line, g_free);
  /* both fail; t4 (made first: a + 1e6 * b) is the first divergence, not t5 = t4 @ w */
  g_assert_nonnull (strstr (r.out, "  first divergence: t4,"));
  run_clear (&r);

#if CS_HAVE_JSON
  /* JSON: the errors are the strings "nan" and "inf" (JSON has no such numbers) */
  {
    const char *paths[] = { f16, f16 };
    static const char * const names[] = { "t5", "t4" };
    static const char * const errs[] = { "nan", "inf" };

    for (guint c = 0; c < G_N_ELEMENTS (paths); c++)
      {
        g_autoptr(JsonParser) parser = json_parser_new ();
        g_autoptr(GError) error = NULL;
        JsonObject *root, *fwd;
        JsonArray *outs;
        gboolean seen = FALSE;

        r = run (NULL, "run", paths[c], "--json", NULL);
        g_assert_cmpint (r.status, ==, 0);
        g_assert_true (json_parser_load_from_data (parser, r.out, -1, &error));
        root = json_node_get_object (json_parser_get_root (parser));
        fwd = json_object_get_object_member (root, "forward");
        outs = json_object_get_array_member (fwd, "outputs");
        for (guint i = 0; i < json_array_get_length (outs); i++)
          {
            JsonObject *o = json_array_get_object_element (outs, i);

            if (strcmp (json_object_get_string_member (o, "name"), names[c]) != 0)
              continue;
            seen = TRUE;
            g_assert_cmpstr (json_object_get_string_member (o, "max_abs_err"), ==, errs[c]);
            g_assert_cmpstr (json_object_get_string_member (o, "rel_l2_err"), ==, errs[c]);
            g_assert_cmpstr (json_object_get_string_member (o, "err"), ==, errs[c]);
            g_assert_cmpstr (json_object_get_string_member (o, "verdict"), ==, "mismatch");
            g_assert_cmpint (json_object_get_int_member (o, "non_finite"), ==, 0);
            g_assert_cmpint (json_object_get_int_member (o, "non_finite_mismatch"), ==, 128);
          }
        g_assert_true (seen);
        run_clear (&r);
      }
  }
  /* identical NaNs: verdict ok, 128 agreeing non-finite elements, err null (no finite element) */
  {
    g_autoptr(JsonParser) parser = json_parser_new ();
    JsonArray *outs;
    gboolean seen = FALSE;

    r = run (NULL, "run", nan, "--json", "--forward-only", NULL);
    g_assert_cmpint (r.status, ==, 0);
    g_assert_true (json_parser_load_from_data (parser, r.out, -1, NULL));
    outs = json_object_get_array_member (json_object_get_object_member (
             json_node_get_object (json_parser_get_root (parser)), "forward"), "outputs");
    for (guint i = 0; i < json_array_get_length (outs); i++)
      {
        JsonObject *o = json_array_get_object_element (outs, i);

        if (strcmp (json_object_get_string_member (o, "name"), "t5") != 0)
          continue;
        seen = TRUE;
        g_assert_true (json_object_get_null_member (o, "err"));
        g_assert_cmpstr (json_object_get_string_member (o, "verdict"), ==, "ok");
        g_assert_cmpint (json_object_get_int_member (o, "non_finite"), ==, 128);
        g_assert_cmpint (json_object_get_int_member (o, "non_finite_mismatch"), ==, 0);
      }
    g_assert_true (seen);
    run_clear (&r);
  }
#endif

  g_unlink (nan);
  g_unlink (inf);
  g_unlink (f16);
  g_rmdir (dir);
}

/* B7: diff reads standard input once, for both policies. */
static void
test_diff_stdin (void)
{
  g_autofree char *seed = g_build_filename (g_getenv ("CS_DATA_DIR"), "seed_foo.txt", NULL);
  g_autofree char *text = NULL;
  Run r;

  if (!need_cli ())
    return;
  g_assert_true (g_file_get_contents (seed, &text, NULL, NULL));
  r = run (text, "diff", "-", "--vs", "matmul=upcast-f32", NULL);
  if (r.status != 0)
    g_error ("diff -: exit %d, stderr: %s", r.status, r.err);
  g_assert_nonnull (strstr (r.out, "B: "));
  g_assert_nonnull (strstr (r.out, "forward: "));
  g_assert_null (strstr (r.out, "forward: none"));
  /* the casts name the input's line of the statement they derive from: matmul=upcast-f32
   * adds the matmul's (line 14 of seed_foo.txt) input upcast, and the add's (line 13) output
   * downcast is no longer needed */
  g_assert_nonnull (strstr (r.out, "  + cast bf16 -> f32 x1 (e.g. t7, from line 14, in B:nvFusion0)\n"));
  g_assert_nonnull (strstr (r.out, "  - cast f32 -> bf16 x1 (e.g. t4, from line 13, in A:nvFusion0)\n"));
  g_assert_null (strstr (r.out, "initial statement"));
  run_clear (&r);
}

/* B8, B9: a bad option value is named, not reported as "expected one FILE". */
static void
test_bad_option_values (void)
{
  g_autofree char *seed = g_build_filename (g_getenv ("CS_DATA_DIR"), "seed_foo.txt", NULL);
  static const struct { const char *cmd, *opt, *want; } cases[] = {
    { "stats", "--index=-1", "--index must be >= 0" },
    { "diff", "--index=-1", "--index must be >= 0" },
    { "run", "--index=-1", "--index must be >= 0" },
    { "run", "--seed=-5", "--seed must be >= 0" },
    { "run", "--max-gflop=nan", "--max-gflop: cannot read 'nan' as a number of GFLOP" },
    { "run", "--max-gflop=inf", "--max-gflop: cannot read 'inf' as a number of GFLOP" },
    { "run", "--max-gflop=-1", "--max-gflop: cannot read '-1' as a number of GFLOP" },
  };

  if (!need_cli ())
    return;
  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      Run r = run (NULL, cases[i].cmd, seed, cases[i].opt, NULL);

      if (r.status != 2 || strstr (r.err, cases[i].want) == NULL
          || strstr (r.err, "expected one FILE") != NULL)
        g_error ("%s %s: exit %d, stderr \"%s\" (want exit 2 and \"%s\")", cases[i].cmd,
                 cases[i].opt, r.status, r.err, cases[i].want);
      run_clear (&r);
    }
  /* a finite limit still works: 0 refuses the step with the limit named */
  {
    Run r = run (NULL, "run", seed, "--max-gflop=0", NULL);
    g_assert_cmpint (r.status, ==, 1);
    g_assert_nonnull (strstr (r.err, "over the limit of 0"));
    run_clear (&r);
  }
}

/* B10: render names the user's output path and the reason it cannot be written. */
static void
test_render_unwritable (void)
{
#if CS_HAVE_RENDER
  g_autofree char *seed = g_build_filename (g_getenv ("CS_DATA_DIR"), "seed_foo.txt", NULL);
  static const char * const outs[] = { "/nonexistent/dir/x.svg", "/nonexistent/dir/x.dot",
                                       "/nonexistent/dir/x.png" };

  if (!need_cli ())
    return;
  for (gsize i = 0; i < G_N_ELEMENTS (outs); i++)
    {
      g_autofree char *want = g_strdup_printf ("castscope-cli: render: cannot write %s: %s\n",
                                               outs[i], g_strerror (ENOENT));
      Run r = run (NULL, "render", seed, "-o", outs[i], NULL);

      g_assert_cmpint (r.status, ==, 1);
      g_assert_cmpstr (r.err, ==, want);
      run_clear (&r);
    }
  /* a folder part that is a file, and a folder where the picture would go */
  {
    g_autofree char *dir = g_dir_make_tmp ("castscope-render-XXXXXX", NULL);
    g_autofree char *file = g_build_filename (dir, "plain.bin", NULL);
    g_autofree char *under = g_build_filename (file, "x.svg", NULL);
    g_autofree char *folder = g_build_filename (dir, "folder.svg", NULL);
    const char *paths[] = { under, folder };
    const int codes[] = { ENOTDIR, EISDIR };

    g_assert_true (g_file_set_contents (file, "x", 1, NULL));
    g_assert_cmpint (g_mkdir (folder, 0755), ==, 0);
    for (gsize i = 0; i < G_N_ELEMENTS (paths); i++)
      {
        g_autofree char *want = g_strdup_printf ("castscope-cli: render: cannot write %s: %s\n",
                                                 paths[i], g_strerror (codes[i]));
        Run r = run (NULL, "render", seed, "-o", paths[i], NULL);

        g_assert_cmpint (r.status, ==, 1);
        g_assert_cmpstr (r.err, ==, want);
        run_clear (&r);
      }
    g_rmdir (folder);
    g_unlink (file);
    g_rmdir (dir);
  }
#else
  g_test_skip ("built without render/");
#endif
}

/* B1: bench without a GPU says so once, with no empty workload headers. */
static void
test_bench_no_gpu (void)
{
  g_autofree char *seed = g_build_filename (g_getenv ("CS_DATA_DIR"), "seed_foo.txt", NULL);
  Run r;
  guint n = 0;

  if (!need_cli ())
    return;
  r = run (NULL, "bench", seed, seed, seed, NULL);
  if (r.status == 0)
    {
      g_test_skip ("a GPU is present");
      run_clear (&r);
      return;
    }
  g_assert_cmpint (r.status, ==, 1);
  if (strstr (r.err, "bench: cannot run on a GPU: ") == NULL)
    {
      g_test_skip ("a GPU is present");
      run_clear (&r);
      return;
    }
  for (const char *c = r.err; (c = strstr (c, "castscope-cli: ")) != NULL; c++)
    n++;
  g_assert_cmpuint (n, ==, 1);
  g_assert_cmpstr (r.out, ==, "");
  run_clear (&r);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/app/cli/bad-inputs", test_bad_inputs);
  g_test_add_func ("/app/cli/run-range", test_run_range);
  g_test_add_func ("/app/cli/run-rounding", test_run_rounding);
  g_test_add_func ("/app/cli/stats-removed-casts", test_stats_removed_casts);
  g_test_add_func ("/app/cli/usage", test_usage);
  g_test_add_func ("/app/cli/print/file", test_print_good_file);
  g_test_add_func ("/app/cli/print/stdin", test_print_stdin);
  g_test_add_func ("/app/cli/info", test_info);
  g_test_add_func ("/app/cli/run/non-finite", test_run_nonfinite);
  g_test_add_func ("/app/cli/diff/stdin", test_diff_stdin);
  g_test_add_func ("/app/cli/bad-option-values", test_bad_option_values);
  g_test_add_func ("/app/cli/render/unwritable", test_render_unwritable);
  g_test_add_func ("/app/cli/bench/no-gpu", test_bench_no_gpu);
  return g_test_run ();
}
