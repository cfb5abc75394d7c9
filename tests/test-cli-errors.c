/* test-cli-errors.c: the error paths of every castscope-cli command.
 *
 * For each command that reads a trace (print, info, transform, stats, diff, render, run):
 * a missing file, a directory, an unreadable file, an empty file, a binary file, a trace with
 * an unknown op (it still prints and renders; only passes that need its meaning fail, naming
 * it), a shape mismatch (named with its op and line), an unknown policy key and an unknown
 * policy value.  Each must exit 1 (bad input) or 2 (usage) with a message on stderr, never
 * crash (exit by signal) and never hang (the spawn is bounded by meson's timeout).
 */
#include "cs-config.h"

#include <errno.h>
#include <glib.h>
#include <gmodule.h>
#include <glib/gstdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

static char *tmpdir;     /* per-run scratch folder, 0755 */
static const char *cli;  /* $CS_CLI */

typedef struct
{
  const char *name;      /* command */
  const char *extra[6];  /* arguments after FILE (NULL-terminated) */
  gboolean    semantic;  /* needs op semantics (fails on an unknown op / shape mismatch) */
  gboolean    policy;    /* accepts --policy */
} Command;

static const Command commands[] = {
  { "print",     { NULL }, FALSE, FALSE },
  { "info",      { NULL }, FALSE, FALSE },
  { "transform", { NULL }, TRUE, TRUE },
  { "stats",     { NULL }, TRUE, TRUE },
  { "diff",      { "--vs", "matmul=upcast-f32", NULL }, TRUE, TRUE },
#if CS_HAVE_RENDER
  { "render",    { "-o", "@OUT@.svg", NULL }, FALSE, TRUE },
#endif
  { "run",       { "--device", "cpu", NULL }, TRUE, TRUE },
};

static const char unknown_op_trace[] =
  "import torch\n"
  "import thunder.torch as ltorch\n"
  "from thunder.executors.torchex import no_autocast\n"
  "\n"
  "@torch.no_grad()\n"
  "@no_autocast\n"
  "def computation(a, b):\n"
  "  # a: \"cuda:0 bf16[8, 16]\"\n"
  "  # b: \"cuda:0 bf16[16, 16]\"\n"
  "  t0 = mylib.frobnicate(a)  # t0: \"cuda:0 bf16[8, 16]\"\n"
  "  t1 = ltorch.matmul(t0, b)  # t1: \"cuda:0 bf16[8, 16]\"\n"
  "  return (t1,)\n";

/* ltorch.matmul of [8, 16] and [15, 16] on line 10. */
static const char shape_mismatch_trace[] =
  "import torch\n"
  "import thunder.torch as ltorch\n"
  "from thunder.executors.torchex import no_autocast\n"
  "\n"
  "@torch.no_grad()\n"
  "@no_autocast\n"
  "def computation(a, b):\n"
  "  # a: \"cuda:0 bf16[8, 16]\"\n"
  "  # b: \"cuda:0 bf16[15, 16]\"\n"
  "  t1 = ltorch.matmul(a, b)  # t1: \"cuda:0 bf16[8, 16]\"\n"
  "  return (t1,)\n";

/* t0 read on line 10 (column 22), made on line 11 */
static const char use_before_def_trace[] =
  "import torch\n"
  "import thunder.torch as ltorch\n"
  "from thunder.executors.torchex import no_autocast\n"
  "\n"
  "@torch.no_grad()\n"
  "@no_autocast\n"
  "def computation(a, b):\n"
  "  # a: \"cuda:0 bf16[8, 16]\"\n"
  "  # b: \"cuda:0 bf16[16, 16]\"\n"
  "  t1 = ltorch.matmul(t0, b)  # t1: \"cuda:0 bf16[8, 16]\"\n"
  "  t0 = ltorch.add(a, a)  # t0: \"cuda:0 bf16[8, 16]\"\n"
  "  return (t1,)\n";

/* zz, never defined, on line 10 column 22 */
static const char undefined_name_trace[] =
  "import torch\n"
  "import thunder.torch as ltorch\n"
  "from thunder.executors.torchex import no_autocast\n"
  "\n"
  "@torch.no_grad()\n"
  "@no_autocast\n"
  "def computation(a, b):\n"
  "  # a: \"cuda:0 bf16[8, 16]\"\n"
  "  # b: \"cuda:0 bf16[16, 16]\"\n"
  "  t0 = ltorch.add(a, zz)  # t0: \"cuda:0 bf16[8, 16]\"\n"
  "  t1 = ltorch.matmul(t0, b)  # t1: \"cuda:0 bf16[8, 16]\"\n"
  "  return (t1,)\n";

static void
drop_privileges (gpointer data)
{
  /* As root every file is readable; run as nobody so that a mode-000 file really is not. */
  if (geteuid () == 0)
    {
      if (setgid (65534) != 0 || setuid (65534) != 0)
        _exit (99);
    }
}

typedef struct
{
  int   status;   /* exit code, or -signal when killed by a signal */
  char *out;      /* stdout */
  char *err;      /* stderr */
} Result;

static void
result_clear (Result *r)
{
  g_free (r->out);
  g_free (r->err);
}

static Result
run_cli (const char *command, const char *file, const char * const *extra, const char *policy,
         gboolean as_nobody)
{
  g_autoptr(GPtrArray) argv = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(GError) error = NULL;
  Result r = { 0 };
  int wait_status = 0;

  g_ptr_array_add (argv, g_strdup (cli));
  g_ptr_array_add (argv, g_strdup (command));
  g_ptr_array_add (argv, g_strdup (file));
  for (guint i = 0; extra != NULL && extra[i] != NULL; i++)
    {
      if (strcmp (extra[i], "@OUT@.svg") == 0)
        g_ptr_array_add (argv, g_build_filename (tmpdir, "out.svg", NULL));
      else
        g_ptr_array_add (argv, g_strdup (extra[i]));
    }
  if (policy != NULL)
    {
      g_ptr_array_add (argv, g_strdup ("--policy"));
      g_ptr_array_add (argv, g_strdup (policy));
    }
  g_ptr_array_add (argv, NULL);
  if (!g_spawn_sync (tmpdir, (char **) argv->pdata, NULL, G_SPAWN_DEFAULT,
                     as_nobody ? drop_privileges : NULL, NULL, &r.out, &r.err, &wait_status,
                     &error))
    g_error ("cannot spawn %s: %s", cli, error->message);
  if (WIFEXITED (wait_status))
    r.status = WEXITSTATUS (wait_status);
  else if (WIFSIGNALED (wait_status))
    r.status = -WTERMSIG (wait_status);
  else
    r.status = -1000;
  return r;
}

static char *
write_file (const char *name, const char *data, gssize len)
{
  char *path = g_build_filename (tmpdir, name, NULL);
  g_autoptr(GError) error = NULL;

  if (!g_file_set_contents (path, data, len, &error))
    g_error ("%s", error->message);
  return path;
}

typedef enum
{
  CASE_MISSING,
  CASE_DIRECTORY,
  CASE_UNREADABLE,
  CASE_EMPTY,
  CASE_BINARY,
  CASE_UNKNOWN_OP,
  CASE_SHAPE_MISMATCH,
  CASE_POLICY_KEY,
  CASE_POLICY_VALUE,
  CASE_USE_BEFORE_DEF,
  CASE_UNDEFINED_NAME,
  N_CASES
} Case;

static const char * const case_names[N_CASES] = {
  "missing", "directory", "unreadable", "empty", "binary", "unknown-op", "shape-mismatch",
  "policy-key", "policy-value", "use-before-def", "undefined-name",
};

typedef struct
{
  const Command *cmd;
  Case           c;
} TestData;

static void
assert_failed_with (const Result *r, int code, const char *needle, const char *what)
{
  if (r->status != code || (needle != NULL && strstr (r->err, needle) == NULL))
    g_error ("%s: exit %d (want %d), stderr:\n%s\n(want it to mention '%s')", what, r->status,
             code, r->err, needle ? needle : "");
}

static void
test_case (gconstpointer data)
{
  const TestData *td = data;
  const Command *cmd = td->cmd;
  g_autofree char *what = g_strdup_printf ("%s/%s", cmd->name, case_names[td->c]);
  g_autofree char *path = NULL;
  Result r = { 0 };

  switch (td->c)
    {
    case CASE_MISSING:
      path = g_build_filename (tmpdir, "no-such-trace.txt", NULL);
      r = run_cli (cmd->name, path, cmd->extra, NULL, FALSE);
      assert_failed_with (&r, 1, "no-such-trace.txt", what);
      break;
    case CASE_DIRECTORY:
      r = run_cli (cmd->name, tmpdir, cmd->extra, NULL, FALSE);
      assert_failed_with (&r, 1, tmpdir, what);
      break;
    case CASE_UNREADABLE:
      path = write_file ("unreadable.txt", unknown_op_trace, -1);
      g_assert_cmpint (g_chmod (path, 0), ==, 0);
      r = run_cli (cmd->name, path, cmd->extra, NULL, TRUE);
      g_assert_cmpint (g_chmod (path, 0644), ==, 0);
      assert_failed_with (&r, 1, "unreadable.txt", what);
      break;
    case CASE_EMPTY:
      path = write_file ("empty.txt", "", 0);
      r = run_cli (cmd->name, path, cmd->extra, NULL, FALSE);
      assert_failed_with (&r, 1, "empty.txt", what);
      break;
    case CASE_BINARY:
      {
        char bytes[512];
        for (guint i = 0; i < sizeof bytes; i++)
          bytes[i] = (char) ((i * 131u + 7u) & 0xff);
        path = write_file ("binary.bin", bytes, sizeof bytes);
        r = run_cli (cmd->name, path, cmd->extra, NULL, FALSE);
        assert_failed_with (&r, 1, "binary.bin:", what);
      }
      break;
    case CASE_UNKNOWN_OP:
      path = write_file ("unknown-op.txt", unknown_op_trace, -1);
      r = run_cli (cmd->name, path, cmd->extra, NULL, FALSE);
      if (cmd->semantic)
        assert_failed_with (&r, 1, "mylib.frobnicate", what);
      else
        {
          if (r.status != 0)
            g_error ("%s: exit %d, stderr: %s", what, r.status, r.err);
          if (strcmp (cmd->name, "print") == 0)
            g_assert_nonnull (strstr (r.out, "t0 = mylib.frobnicate(a)  # t0: \"cuda:0 bf16[8, 16]\""));
        }
      break;
    case CASE_SHAPE_MISMATCH:
      path = write_file ("shape.txt", shape_mismatch_trace, -1);
      r = run_cli (cmd->name, path, cmd->extra, NULL, FALSE);
      if (cmd->semantic)
        {
          assert_failed_with (&r, 1, "ltorch.matmul", what);
          assert_failed_with (&r, 1, "10", what);
        }
      else if (r.status != 0)
        g_error ("%s: exit %d, stderr: %s", what, r.status, r.err);
      break;
    case CASE_POLICY_KEY:
    case CASE_POLICY_VALUE:
      {
        const char *pol = td->c == CASE_POLICY_KEY ? "matmull=native" : "matmul=fp8";
        g_autofree char *sample = g_build_filename (g_getenv ("CS_DATA_DIR"), "seed_foo.txt", NULL);
        r = run_cli (cmd->name, sample, cmd->extra, pol, FALSE);
        assert_failed_with (&r, 2, td->c == CASE_POLICY_KEY ? "matmull" : "fp8", what);
      }
      break;
    case CASE_USE_BEFORE_DEF:
      /* every command refuses it right after parsing (issue 21 item 5) */
      path = write_file ("ubd.txt", use_before_def_trace, -1);
      r = run_cli (cmd->name, path, cmd->extra, NULL, FALSE);
      assert_failed_with (&r, 1, "ubd.txt:10:22: 't0' is used before it is defined (on line 11)", what);
      break;
    case CASE_UNDEFINED_NAME:
      path = write_file ("undef.txt", undefined_name_trace, -1);
      r = run_cli (cmd->name, path, cmd->extra, NULL, FALSE);
      assert_failed_with (&r, 1, "undef.txt:10:22: 'zz' is not defined: not a parameter of computation()", what);
      break;
    default:
      g_assert_not_reached ();
    }
  /* Never a crash, never a GLib critical. */
  g_assert_cmpint (r.status, >=, 0);
  g_assert_null (strstr (r.err, "CRITICAL"));
  g_assert_null (strstr (r.err, "runtime error"));   /* UBSan */
  result_clear (&r);
}


/* ---- issue 21 item 9: messages that say what happened, one exit-code rule ---- */

/* Runs the CLI with @args (NULL-terminated, after the program name) in tmpdir. */
static Result
run_args (const char * const *args)
{
  g_autoptr(GPtrArray) argv = g_ptr_array_new ();
  g_autoptr(GError) error = NULL;
  Result r = { 0 };
  int wait_status = 0;

  g_ptr_array_add (argv, (gpointer) cli);
  for (guint i = 0; args[i]; i++)
    g_ptr_array_add (argv, (gpointer) args[i]);
  g_ptr_array_add (argv, NULL);
  if (!g_spawn_sync (tmpdir, (char **) argv->pdata, NULL, G_SPAWN_DEFAULT, NULL, NULL, &r.out,
                     &r.err, &wait_status, &error))
    g_error ("cannot spawn %s: %s", cli, error->message);
  r.status = WIFEXITED (wait_status) ? WEXITSTATUS (wait_status) : -1000;
  return r;
}

static void
expect (const char * const *args, int code, const char *needle)
{
  Result r = run_args (args);
  g_autofree char *what = g_strjoinv (" ", (char **) args);

  if (r.status != code || (needle && strstr (r.err, needle) == NULL))
    g_error ("castscope-cli %s: exit %d (want %d), stderr:\n%s(want it to contain \"%s\")", what,
             r.status, code, r.err, needle ? needle : "");
  result_clear (&r);
}

static char *
seed_path (void)
{
  return g_build_filename (g_getenv ("CS_DATA_DIR"), "seed_foo.txt", NULL);
}

/* With no NVIDIA driver the runtime's "CUDA driver version is insufficient for CUDA runtime
 * version" is replaced by what is missing, and the CPU device is named. */
static void
test_msg_no_driver (void)
{
  g_autofree char *seed = seed_path ();
  const char *args[] = { "run", seed, "--device", "cuda", NULL };
  Result r = run_args (args);
  GModule *libcuda;

  if (r.status == 0)
    {
      g_test_skip ("a CUDA device is present");
      result_clear (&r);
      return;
    }
  g_assert_cmpint (r.status, ==, 1);
  g_assert_null (strstr (r.err, "driver version is insufficient"));
  /* the command first, as every other message of run */
  g_assert_nonnull (strstr (r.err, "castscope-cli: run: --device cuda: no CUDA "));
  g_assert_nonnull (strstr (r.err, "(--device cpu runs the CPU reference executor instead)"));
  libcuda = g_module_open ("libcuda.so.1", G_MODULE_BIND_LAZY);
  if (CS_HAVE_CUDA && libcuda == NULL)
    g_assert_cmpstr (r.err, ==, "castscope-cli: run: --device cuda: no CUDA device: no NVIDIA driver is "
                     "installed on this machine (--device cpu runs the CPU reference executor "
                     "instead)\n");
  if (libcuda)
    g_module_close (libcuda);
  result_clear (&r);
}

/* Shapes that do not fit are the input's fault: the check of the trace before any pass (the
 * grad pass used to meet them in its decomposition, naming line and op twice) gives one error
 * at the statement, file:line:col, the same for every command that transforms, with or
 * without grad. */
static void
test_msg_shapes_checked_first (void)
{
  static const char text[] =
    "def computation(a, b):\n"
    "  # a: \"cuda:0 bf16[8, 16]\"\n"
    "  # b: \"cuda:0 bf16[15, 16]\"\n"
    "  t1 = ltorch.matmul(a, b)  # t1: \"cuda:0 bf16[8, 16]\"\n"
    "  return (t1,)\n";
  g_autofree char *path = write_file ("decomp.txt", text, -1);
  g_autofree char *want = g_strdup_printf ("castscope-cli: %s:4:3: ltorch.matmul: shapes "
                                           "[8, 16] and [15, 16] cannot be multiplied; its "
                                           "tensor arguments: a bf16[8, 16], b bf16[15, 16]\n",
                                           path);
  const char *cmds[][5] = {
    { "transform", path, "--grad", "none", NULL },
    { "transform", path, NULL },
    { "transform", "--all-passes", path, NULL },
    { "stats", path, NULL },
    { "run", path, "--device", "cpu", NULL },
  };

  for (gsize i = 0; i < G_N_ELEMENTS (cmds); i++)
    {
      Result r = run_args (cmds[i]);

      g_assert_cmpint (r.status, ==, 1);
      g_assert_cmpstr (r.err, ==, want);
      result_clear (&r);
    }
}

/* The new user's trial (issue 17): data/mlp_gelu.txt with w2 declared [64, 128] instead of
 * [64, 256].  The second linear (line 17, t2 = ltorch.linear(t1, w2, b2)) reads t1 [32, 256]:
 * one error, once, at 17:3, before any pass (no pass name), from stats and transform. */
static void
test_msg_bad_weight_shape (void)
{
  g_autofree char *src = g_build_filename (g_getenv ("CS_DATA_DIR"), "mlp_gelu.txt", NULL);
  g_autofree char *text = NULL;
  g_autofree char *bad = NULL;
  g_autofree char *path = NULL;
  g_autofree char *want = NULL;
  g_auto(GStrv) parts = NULL;
  const char *decl = "# w2: \"cuda:0 bf16[64, 256]\"";

  g_assert_true (g_file_get_contents (src, &text, NULL, NULL));
  parts = g_strsplit (text, decl, -1);
  g_assert_cmpuint (g_strv_length (parts), ==, 2);
  bad = g_strjoinv ("# w2: \"cuda:0 bf16[64, 128]\"", parts);
  path = write_file ("mlp_bad_w2.txt", bad, -1);
  want = g_strdup_printf ("castscope-cli: %s:17:3: ltorch.linear: shapes [32, 256] and "
                          "[64, 128] cannot be multiplied (weight is [out, in]); its tensor "
                          "arguments: t1 bf16[32, 256], w2 bf16[64, 128], b2 bf16[64]\n", path);
  {
    const char *cmds[][4] = {
      { "stats", path, NULL },
      { "transform", "--all-passes", path, NULL },
    };

    for (gsize i = 0; i < G_N_ELEMENTS (cmds); i++)
      {
        Result r = run_args (cmds[i]);
        guint n = 0;

        g_assert_cmpint (r.status, ==, 1);
        for (const char *p = strstr (r.err, "cannot be multiplied"); p; p = strstr (p + 1, "cannot be multiplied"))
          n++;
        g_assert_cmpuint (n, ==, 1);
        g_assert_null (strstr (r.err, "grad:"));
        g_assert_cmpstr (r.err, ==, want);
        g_assert_cmpstr (r.out, ==, "");
        result_clear (&r);
      }
  }
  /* render draws the trace as printed, with the same conflict as a warning */
  {
    g_autofree char *svg = g_build_filename (g_get_tmp_dir (), "cs-mlp-bad-w2.svg", NULL);
    const char *cmd[] = { "render", path, "-o", svg, NULL };
    g_autofree char *warn = g_strdup_printf ("castscope-cli: render: warning: %s:17:3: "
                                             "ltorch.linear: shapes [32, 256] and [64, 128] "
                                             "cannot be multiplied", path);
    Result r = run_args (cmd);

    g_assert_cmpint (r.status, ==, 0);
    g_assert_true (g_str_has_prefix (r.err, warn));
    g_assert_true (g_file_test (svg, G_FILE_TEST_EXISTS));
    g_unlink (svg);
    result_clear (&r);
  }
}

/* A trace printed without type strings (Thunder's docs): says so and what castscope needs,
 * instead of "operand 0 is neither a tensor nor a number". */
/* A file cut short before its return names the line where the trace stops; stats names an op
 * it does not know, with the nearest registry name (a typo of ltorch.rsqrt). */
static void
test_msg_cut_short_and_typo (void)
{
  static const char cut[] =
    "def computation(a, b):\n"
    "  # a: \"cuda:0 bf16[8, 16]\"\n"
    "  # b: \"cuda:0 bf16[8, 16]\"\n"
    "  t0 = ltorch.add(a, b, alpha=None)  # t0: \"cuda:0 bf16[8, 16]\"\n";
  static const char typo[] =
    "def computation(a):\n"
    "  # a: \"cuda:0 f32[8, 16]\"\n"
    "  t0 = ltorch.rsqrtt(a)  # t0: \"cuda:0 f32[8, 16]\"\n"
    "    # t0 = prims.rsqrt(a)  # t0: \"cuda:0 f32[8, 16]\"\n"
    "  return (t0,)\n";
  g_autofree char *cpath = write_file ("cut.txt", cut, -1);
  g_autofree char *tpath = write_file ("typo.txt", typo, -1);
  g_autofree char *want = g_strdup_printf ("%s:4: trace 'computation' has no return statement (its "
                                           "last statement is on line 4: is the file cut short?)",
                                           cpath);
  const char *args[] = { "stats", cpath, NULL };
  const char *targs[] = { "stats", tpath, NULL };
  Result r;

  expect (args, 1, want);
#if CS_HAVE_RENDER
  {
    /* the drawing of the trace as printed warns, and draws */
    const char *rargs[] = { "render", cpath, "-o", "cut.svg", NULL };
    g_autofree char *rwant = g_strdup_printf ("castscope-cli: render: warning: %s: trace "
                                              "'computation' has no return statement: is the "
                                              "file cut short?", cpath);
    r = run_args (rargs);
    g_assert_cmpint (r.status, ==, 0);
    g_assert_nonnull (strstr (r.err, rwant));
    result_clear (&r);
  }
#endif
  r = run_args (targs);
  g_assert_cmpint (r.status, ==, 0);
  g_assert_nonnull (strstr (r.out, "unknown ops (opaque nodes; castscope runs their printed "
                                   "subsymbols where Thunder printed them): ltorch.rsqrtt x1 "
                                   "(line 3; did you mean ltorch.rsqrt?)"));
  result_clear (&r);
}

static void
test_msg_untyped (void)
{
  static const char text[] =
    "def computation(t0, t1):\n"
    "  # t0\n"
    "  # t1\n"
    "  t2 = ltorch.add(t0, t1, alpha=None)  # t2\n"
    "  return (t2,)\n";
  g_autofree char *path = write_file ("untyped.txt", text, -1);
  g_autofree char *want = g_strdup_printf ("castscope-cli: %s:4: ltorch.add: input 't0' has no "
                                           "type annotation: the trace was printed without type "
                                           "strings; castscope needs the dtype and shape of "
                                           "every tensor input", path);
  static const char * const cmds[] = { "transform", "stats", "run" };

  for (gsize i = 0; i < G_N_ELEMENTS (cmds); i++)
    {
      const char *args[] = { cmds[i], path, NULL };
      expect (args, 1, want);
    }
}

/* "no backward trace" on a final trace says that it is final (and names the *_bwd.txt beside
 * it), not "nothing requires grad, or --grad none". */
static void
test_msg_final_no_backward (void)
{
  g_autofree char *seed = seed_path ();
  const char *mk[] = { "transform", seed, NULL };
  const char *mkb[] = { "transform", seed, "--trace", "backward", NULL };
  Result f = run_args (mk), b = run_args (mkb);
  g_autofree char *fwd = NULL, *bwd = NULL, *lone = NULL;
  g_autofree char *want = NULL;

  g_assert_cmpint (f.status, ==, 0);
  g_assert_cmpint (b.status, ==, 0);
  fwd = write_file ("seed_fwd.txt", f.out, -1);
  bwd = write_file ("seed_bwd.txt", b.out, -1);
  lone = write_file ("lone.txt", f.out, -1);
  {
    const char *args[] = { "transform", fwd, "--trace", "backward", NULL };
    want = g_strdup_printf ("castscope-cli: transform: there is no backward trace: %s is already "
                            "a final trace (what Thunder runs), which castscope does not "
                            "differentiate again: its backward is a trace of its own (%s)\n", fwd, bwd);
    Result r = run_args (args);
    g_assert_cmpint (r.status, ==, 2);   /* --trace backward names what the input lacks */
    g_assert_cmpstr (r.err, ==, want);
    result_clear (&r);
  }
#if CS_HAVE_RENDER
  {
    const char *args[] = { "render", lone, "--trace", "backward", "-o", "x.svg", NULL };
    expect (args, 2, "is already a final trace (what Thunder runs), which castscope does not "
                     "differentiate again: its backward is a trace of its own (a backward_fn "
                     "later in the file, --index N, or its *_bwd.txt file)");
  }
#endif
  {
    const char *args[] = { "transform", seed, "--grad", "none", "--trace", "backward", NULL };
    expect (args, 2, "there is no backward trace: nothing requires grad (no floating-point input, or --grad none)");
  }
  result_clear (&f);
  result_clear (&b);
  g_remove (fwd);
  g_remove (bwd);
  g_remove (lone);
}

/* run on a final forward trace takes the backward from the *_bwd.txt beside it and says so on
 * stderr (stats of the same file says "backward: none"); without a backward the report says
 * "forward only" and why. */
static void
test_run_sibling_backward (void)
{
  g_autofree char *seed = seed_path ();
  const char *mk[] = { "transform", seed, NULL };
  const char *mkb[] = { "transform", seed, "--trace", "backward", NULL };
  Result f = run_args (mk), b = run_args (mkb);
  g_autofree char *fwd = NULL, *bwd = NULL, *lone = NULL;

  g_assert_cmpint (f.status, ==, 0);
  g_assert_cmpint (b.status, ==, 0);
  fwd = write_file ("sib_fwd.txt", f.out, -1);
  bwd = write_file ("sib_bwd.txt", b.out, -1);
  lone = write_file ("lone.txt", f.out, -1);
  {
    const char *args[] = { "run", fwd, NULL };
    Result r = run_args (args);

    g_assert_cmpint (r.status, ==, 0);
    g_assert_cmpstr (r.err, ==, "castscope-cli: run: backward: taken from sib_bwd.txt beside it\n");
    g_assert_nonnull (strstr (r.out, "\nbackward (backward_fn): "));
    g_assert_null (strstr (r.out, "forward only"));
    result_clear (&r);
  }
  {
    /* stats of the file alone has no backward, and says where it is */
    const char *args[] = { "stats", fwd, NULL };
    Result r = run_args (args);
    g_autofree char *want = g_strdup_printf ("\nbackward: none: %s is already a final trace "
                                             "(what Thunder runs), which castscope does not "
                                             "differentiate again: its backward is a trace of "
                                             "its own (%s)\n", fwd, bwd);

    g_assert_cmpint (r.status, ==, 0);
    g_assert_nonnull (strstr (r.out, want));   /* the removed-casts line follows it */
    result_clear (&r);
  }
  {
    const char *args[] = { "run", fwd, "--forward-only", NULL };
    Result r = run_args (args);

    g_assert_cmpint (r.status, ==, 0);
    g_assert_cmpstr (r.err, ==, "");
    g_assert_true (g_str_has_suffix (r.out, "\nforward only: no backward trace (--forward-only)\n"));
    result_clear (&r);
  }
  {
    const char *args[] = { "run", lone, NULL };
    Result r = run_args (args);

    g_assert_cmpint (r.status, ==, 0);
    g_assert_cmpstr (r.err, ==, "");
    g_assert_true (g_str_has_suffix (r.out, "\nforward only: no backward trace (the file is a "
                                     "final forward trace, with no backward_fn after it and no "
                                     "*_bwd.txt beside it)\n"));
    result_clear (&r);
  }
  {
    const char *args[] = { "run", seed, "--grad", "none", NULL };
    Result r = run_args (args);

    g_assert_cmpint (r.status, ==, 0);
    g_assert_true (g_str_has_suffix (r.out, "\nforward only: no backward trace (nothing requires "
                                     "grad: no floating-point input, or --grad none)\n"));
    result_clear (&r);
  }
  {
    const char *args[] = { "run", "--help", NULL };
    Result r = run_args (args);

    g_assert_cmpint (r.status, ==, 0);
    g_assert_nonnull (strstr (r.out, "*_fwd.txt (stderr then says \"backward: taken from "
                                     "X_bwd.txt beside it\")"));
    result_clear (&r);
  }
  result_clear (&f);
  result_clear (&b);
  g_remove (fwd);
  g_remove (bwd);
  g_remove (lone);
}

/* diff's summary adds up: regions kept + new (+ split, merged) make B's count, casts are
 * counted one by one and summed per dtype pair (hand-counted in test-core-pipeline's
 * /core/pipeline/diff/counts; the backward: the add's VJP keeps its region with one more
 * downcast and one upcast less, the matmul's upcasts and downcasts are new, with a new region
 * for the upcasts in front of the matmuls).  Without --vs, diff is a usage error. */
static void
test_diff_summary (void)
{
  g_autofree char *seed = seed_path ();
  const char *args[] = { "diff", seed, "--vs", "matmul=upcast-f32", NULL };
  const char *novs[] = { "diff", seed, NULL };
  const char *pol_only[] = { "diff", seed, "--policy", "matmul=upcast-f32", NULL };
  Result r = run_args (args);

  g_assert_cmpint (r.status, ==, 0);
  if (!strstr (r.out, "\nforward: 1 -> 2 regions (1 kept, 1 new, 0 removed, 0 split, 0 merged); "
               "casts: 2 added (1 bf16 -> f32, 1 f32 -> bf16), 1 removed (1 f32 -> bf16)\n")
      || !strstr (r.out, "\n  new region B:nvFusion1 (under A its statements ran outside every "
                  "region)\n")
      || !strstr (r.out, "\nbackward: 1 -> 2 regions (1 kept, 1 new, 0 removed, 0 split, 0 "
                  "merged); casts: 3 added (1 bf16 -> f32, 2 f32 -> bf16), 1 removed (1 bf16 -> "
                  "f32)\n"))
    g_error ("diff: unexpected summary:\n%s", r.out);
  g_assert_null (strstr (r.out, "cast kinds"));
  result_clear (&r);
  expect (novs, 2, "diff: --vs KEY=VALUE is required");
  expect (pol_only, 2, "diff: --vs KEY=VALUE is required");
}

/* transform prints one thing: --trace, --pass, --all-passes and --list-passes exclude each
 * other (--pass fuse -t backward printed the fuse trace, ignoring -t). */
static void
test_transform_one_output (void)
{
  g_autofree char *seed = seed_path ();
  const char *pass_trace[] = { "transform", seed, "--pass", "fuse", "-t", "backward", NULL };
  const char *pass_list[] = { "transform", seed, "--pass", "fuse", "--list-passes", NULL };
  const char *all_list[] = { "transform", seed, "-a", "-l", NULL };
  const char *pass_all[] = { "transform", seed, "--pass", "fuse", "--all-passes", NULL };

  expect (pass_trace, 2, "transform: --trace and --pass exclude each other");
  expect (pass_list, 2, "transform: --pass and --list-passes exclude each other");
  expect (all_list, 2, "transform: --all-passes and --list-passes exclude each other");
  expect (pass_all, 2, "transform: --pass and --all-passes exclude each other");
}

/* --grad naming inputs is refused where it cannot apply: a final trace (not differentiated
 * again) and a torch.compile graph (AOT autograd chose what requires grad); --grad all is
 * taken as it is there. */
static void
test_grad_names_not_applicable (void)
{
  const char *data = g_getenv ("CS_DATA_DIR");
  g_autofree char *final = g_build_filename (data, "distributed", "ddp_final_fwd.txt", NULL);
  g_autofree char *aten = g_build_filename (data, "aten", "seed_foo_bf16.txt", NULL);
  const char *on_final[] = { "stats", final, "--grad", "bogus", NULL };
  const char *on_aten[] = { "stats", aten, "--grad", "primals_1", NULL };
  const char *all_aten[] = { "stats", aten, "--grad", "all", NULL };
  Result r;

  expect (on_final, 2, "--grad bogus: trace 0 of ");
  expect (on_final, 2, "is already final (what Thunder runs)");
  expect (on_aten, 2, "--grad primals_1: trace 0 of ");
  expect (on_aten, 2, "is a torch.compile graph");
  r = run_args (all_aten);
  g_assert_cmpint (r.status, ==, 0);
  result_clear (&r);
}

/* diff on a trace that is already final (no pass runs under either policy) says so before
 * its summary of no change; on an initial trace it does not. */
static void
test_diff_final_note (void)
{
  g_autofree char *final = g_build_filename (g_getenv ("CS_DATA_DIR"), "distributed",
                                             "ddp_final_fwd.txt", NULL);
  g_autofree char *seed = seed_path ();
  const char *args[] = { "diff", final, "--vs", "matmul=upcast-f32", NULL };
  const char *initial[] = { "diff", seed, "--vs", "matmul=upcast-f32", NULL };
  Result r = run_args (args);

  g_assert_cmpint (r.status, ==, 0);
  g_assert_nonnull (strstr (r.out, "\nnote: the input is already final (fused or split): no "
                                   "pass ran under either policy"));
  g_assert_nonnull (strstr (r.out, "casts: 0 added, 0 removed\n"));
  result_clear (&r);
  r = run_args (initial);
  g_assert_cmpint (r.status, ==, 0);
  g_assert_null (strstr (r.out, "already final"));
  result_clear (&r);
}

/* The "N split, M merged" of each summary line (forward, backward) of diff on the 8-block LLaMA
 * under matmul=upcast-f32 count the "region A:X split into B:Y, B:Z" and "regions A:X, A:Y
 * merged into B:Z" lines that follow it (the backward regroups its 50 regions into 66, 32 of A
 * spreading over several of B and 41 of B gathering several of A), and every region name says
 * whose region it is (A:, B:), both traces numbering theirs from nvFusion0. */
static void
test_diff_llama_counts (void)
{
  const char *dir = g_getenv ("CS_SHARED_TRACES");
  g_autofree char *llama = dir ? g_build_filename (dir, "thunder_llama_stack_initial.txt", NULL)
                               : NULL;
  g_auto(GStrv) lines = NULL;
  guint sections = 0, want_split = 0, want_merged = 0, n_split = 0, n_merged = 0;
  guint backward_split = 0, backward_merged = 0;
  Result r;

  if (llama == NULL || !g_file_test (llama, G_FILE_TEST_IS_REGULAR))
    {
      g_test_skip ("../shared/traces absent: the LLaMA diff is not checked");
      return;
    }
  {
    const char *args[] = { "diff", llama, "--vs", "matmul=upcast-f32", NULL };
    r = run_args (args);
  }
  g_assert_cmpint (r.status, ==, 0);
  lines = g_strsplit (r.out, "\n", -1);
  for (guint i = 0; ; i++)
    {
      const char *l = lines[i];
      const char *p;

      if (l == NULL || g_str_has_prefix (l, "forward: ") || g_str_has_prefix (l, "backward: "))
        {
          /* close the section before */
          if (sections > 0)
            {
              g_assert_cmpuint (n_split, ==, want_split);
              g_assert_cmpuint (n_merged, ==, want_merged);
            }
          if (l == NULL)
            break;
          p = strstr (l, " removed, ");
          g_assert_nonnull (p);
          g_assert_cmpint (sscanf (p, " removed, %u split, %u merged", &want_split,
                                   &want_merged), ==, 2);
          if (g_str_has_prefix (l, "backward: "))
            {
              backward_split = want_split;
              backward_merged = want_merged;
            }
          n_split = n_merged = 0;
          sections++;
          continue;
        }
      if (g_str_has_prefix (l, "  region ") && strstr (l, " split into "))
        {
          g_autofree char *rest = NULL;

          g_assert_true (g_str_has_prefix (l, "  region A:nvFusion"));
          rest = g_strdup (strstr (l, " split into ") + strlen (" split into "));
          g_assert_true (g_str_has_prefix (rest, "B:nvFusion"));
          g_assert_null (strstr (rest, "A:"));
          n_split++;
        }
      else if (g_str_has_prefix (l, "  regions ") && strstr (l, " merged into "))
        {
          g_assert_true (g_str_has_prefix (l, "  regions A:nvFusion"));
          g_assert_true (g_str_has_prefix (strstr (l, " merged into "), " merged into B:nvFusion"));
          g_assert_null (strstr (strstr (l, " merged into "), "A:"));
          n_merged++;
        }
      else if (strstr (l, " cast ") && strstr (l, ", in "))
        g_assert_nonnull (strstr (l, l[2] == '+' ? ", in B:" : ", in A:"));
    }
  g_assert_cmpuint (sections, ==, 2);
  g_assert_cmpuint (backward_split, ==, 32);
  g_assert_cmpuint (backward_merged, ==, 41);
  result_clear (&r);
}

/* A name the return statement returns that nothing defines: the passes would work on a
 * program without outputs.  The commands that transform refuse it at the return (line 4,
 * column 3); render draws it as printed, with a warning. */
static void
test_msg_undefined_return (void)
{
  static const char text[] =
    "def computation(a):\n"
    "  # a: \"cuda:0 f32[8, 16]\"\n"
    "  t0 = ltorch.neg(a)  # t0: \"cuda:0 f32[8, 16]\"\n"
    "  return (t0, t9)\n";
  g_autofree char *path = write_file ("undef-return.txt", text, -1);
  g_autofree char *want = g_strdup_printf ("%s:4:3: 't9' is returned but not defined: not a "
                                           "parameter of computation() and not made by any "
                                           "statement of the trace", path);
  const char *cmds[][6] = {
    { "stats", path, NULL },
    { "transform", path, NULL },
    { "run", path, "--device", "cpu", NULL },
    { "diff", path, "--vs", "matmul=upcast-f32", NULL },
  };

  for (gsize i = 0; i < G_N_ELEMENTS (cmds); i++)
    expect (cmds[i], 1, want);
#if CS_HAVE_RENDER
  {
    const char *rargs[] = { "render", path, "-o", "undef-return.svg", NULL };
    Result r = run_args (rargs);
    g_assert_cmpint (r.status, ==, 0);
    g_assert_nonnull (strstr (r.err, "castscope-cli: render: warning: "));
    g_assert_nonnull (strstr (r.err, want));
    result_clear (&r);
  }
#endif
}

/* Every command's --help: a usage line that starts with "castscope-cli COMMAND" and names
 * its arguments once, and the same text on standard input and exit codes (one helper). */
static void
test_help (void)
{
  static const struct { const char *cmd, *usage; gboolean stdin_ok; } cases[] = {
    { "print", "] FILE - print Thunder traces back\n", TRUE },
    { "info", "] FILE - summarise a trace file\n", TRUE },
    { "transform", "] FILE - run Thunder's passes", TRUE },
    { "stats", "] FILE - casts, regions", TRUE },
    { "diff", "] FILE --vs KEY=VALUE - casts and regions", TRUE },
    { "render", "] FILE -o OUT - draw a trace", TRUE },
    { "run", "] FILE - run one training step on the CPU "
             "reference (exact dtypes and f64) or the GPU (--device cuda)", TRUE },
    { "bench", "] [FILE...] - run the GPU benchmark "
               "workloads\n", FALSE },
  };

  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      const char *args[] = { cases[i].cmd, "--help", NULL };
      Result r = run_args (args);
      g_autofree char *start = g_strdup_printf ("  castscope-cli %s [OPTION", cases[i].cmd);
      const char *nl = strchr (r.out, '\n');
      const char *close = NULL;

      g_assert_cmpint (r.status, ==, 0);
      /* GLib writes "Usage:" (translated by the locale) and the usage line, whose "[OPTION…]"
       * is "[OPTION?]" in the C locale */
      g_assert_nonnull (nl);
      if (g_str_has_prefix (nl + 1, start))
        close = strchr (nl + 1, ']');
      if (close == NULL || !g_str_has_prefix (close, cases[i].usage))
        g_error ("%s --help: want the usage line \"%s...%s\" in:\n%s", cases[i].cmd, start,
                 cases[i].usage, r.out);
      g_assert_null (strstr (r.out, "FILE|- FILE|-"));
      g_assert_null (strstr (r.out, "FILE... [FILE...]"));
      g_assert_nonnull (strstr (r.out, "\nExit status: 0 ok, 1 bad input or a failed check (a "
                                       "missing or unreadable file, a trace\n"));
      g_assert_nonnull (strstr (r.out, "2 usage error (a bad option or value, or an option "
                                       "naming something the\ninput lacks"));
      g_assert_nonnull (strstr (r.out, "\n--format auto|thunder|aten (every command): the text "
                                       "format of FILE (default auto:\n"));
      if (cases[i].stdin_ok)
        g_assert_nonnull (strstr (r.out, "\nFILE '-' reads standard input.  Any input is read "
                                         "up to 1 GiB and refused past it\n"
                                         "(CASTSCOPE_MAX_INPUT_BYTES=N lowers the cap).\n"));
      else
        g_assert_null (strstr (r.out, "reads standard input"));
      result_clear (&r);
    }
}

/* Counts and units read as English: "1 region", "1 byte", FLOP in the unit that fits. */
static void
test_msg_units (void)
{
  g_autofree char *seed = seed_path ();
  const char *stats[] = { "stats", seed, NULL };
  const char *mem[] = { "run", seed, "--max-memory", "1", NULL };
  const char *flop[] = { "run", seed, "--max-gflop", "0.00001", NULL };
  Result r = run_args (stats);

  /* the seed's forward: 2*8*16*16 + 512 FLOP, 1568 bytes (test-core-fuse counts them) */
  g_assert_cmpint (r.status, ==, 0);
  if (!strstr (r.out, "\nforward (computation): 2 statements, 1 region, 3 casts (2 up, 1 down), "
               "1 matmul (1 tensor-core), 4608 FLOP, 1.53 KiB, est "))
    g_error ("stats: unexpected text:\n%s", r.out);
  result_clear (&r);
  expect (mem, 1, "over the limit of 1 byte (raise it with --max-memory");
  {
    /* a bad --max-gflop is named as a bad --max-memory is */
    const char *g1[] = { "run", seed, "--max-gflop", "abc", NULL };
    const char *g2[] = { "run", seed, "--max-gflop=-1", NULL };

    expect (g1, 2, "castscope-cli: run: --max-gflop: cannot read 'abc' as a number of GFLOP (a "
                   "finite number >= 0: 200, 0.5, 1e3)\n");
    expect (g2, 2, "castscope-cli: run: --max-gflop: cannot read '-1' as a number of GFLOP");
  }
  {
    /* an invalid CASTSCOPE_MAX_INPUT_BYTES is an error, not ignored */
    const char *pr[] = { "print", seed, NULL };

    g_setenv ("CASTSCOPE_MAX_INPUT_BYTES", "64K", TRUE);
    expect (pr, 1, "castscope-cli: CASTSCOPE_MAX_INPUT_BYTES='64K' is not a number of bytes "
                   "from 1 to 1073741824");
    g_unsetenv ("CASTSCOPE_MAX_INPUT_BYTES");
  }
  {
    /* the seed's forward saves t4 (a + b) for the backward besides its output */
    const char *run[] = { "run", seed, NULL };
    Result rr = run_args (run);

    g_assert_cmpint (rr.status, ==, 0);
    g_assert_nonnull (strstr (rr.out, "\n  saved for backward: 1 more output, worst t4 (err "));
    g_assert_nonnull (strstr (rr.out, "; --all-outputs lists it\n"));
    result_clear (&rr);
  }
  expect (flop, 1, "castscope-cli: run: this step needs about 13.5 kFLOP on the CPU reference, "
                   "over the limit of 10.0 kFLOP (raise it with --max-gflop)\n");
}

/* Estimated times in the unit that fits: the text matches stats --json's est_ms formatted by
 * hand (ns for the seed's forward), and an absurd estimate is called implausible. */
static void
test_msg_time_units (void)
{
  g_autofree char *seed = seed_path ();
  const char *jargs[] = { "stats", seed, "--json", NULL };
  const char *targs[] = { "stats", seed, NULL };
  Result j = run_args (jargs), t = run_args (targs);
  const char *at = strstr (j.out, "\"est_ms\" : ");
  double ms;
  g_autofree char *want = NULL;
  static const char huge[] =
    "def computation(a, b):\n"
    "  # a: \"cuda:0 bf16[1000000000, 1000000000]\"\n"
    "  # b: \"cuda:0 bf16[1000000000, 1000000000]\"\n"
    "  t1 = ltorch.matmul(a, b)  # t1: \"cuda:0 bf16[1000000000, 1000000000]\"\n"
    "  return (t1,)\n";

  g_assert_cmpint (j.status, ==, 0);
  g_assert_cmpint (t.status, ==, 0);
  g_assert_nonnull (at);
  ms = g_ascii_strtod (at + strlen ("\"est_ms\" : "), NULL);
  /* the seed step (4608 FLOP, 1568 bytes) is a fraction of a microsecond */
  g_assert_cmpfloat (ms, >, 0);
  g_assert_cmpfloat (ms, <, 1e-3);
  want = g_strdup_printf ("est %.3g ns on H200\n", ms * 1e6);
  if (strstr (t.out, want) == NULL)
    g_error ("stats: want \"%s\" in:\n%s", want, t.out);
  g_assert_null (strstr (t.out, "0.0000 ms"));
  result_clear (&j);
  result_clear (&t);

  {
    g_autofree char *path = write_file ("huge.txt", huge, -1);
    const char *a2[] = { "stats", path, "--grad", "none", "--json", NULL };
    const char *a3[] = { "stats", path, "--grad", "none", NULL };
    Result rj = run_args (a2), rt = run_args (a3);
    const char *p2 = strstr (rj.out, "\"est_ms\" : ");
    double big;
    g_autofree char *w2 = NULL;

    g_assert_nonnull (p2);
    big = g_ascii_strtod (p2 + strlen ("\"est_ms\" : "), NULL);
    /* 2e27 FLOP: far over an hour at any H200 rate */
    g_assert_cmpfloat (big, >, 3600e3);
    w2 = g_strdup_printf ("est %.3g h (implausible for one step: check the trace's shapes) on H200\n",
                          big / 3600e3);
    if (strstr (rt.out, w2) == NULL)
      g_error ("stats: want \"%s\" in:\n%s", w2, rt.out);
    result_clear (&rj);
    result_clear (&rt);
    g_remove (path);
  }
}

/* render --expand on a trace without decompositions says why it draws no more. */
static void
test_msg_expand_note (void)
{
#if CS_HAVE_RENDER
  g_autofree char *seed = seed_path ();
  const char *args[] = { "render", seed, "--expand", "-o", "x.svg", NULL };
  const char *with_subs[] = { "render", seed, "--expand", "--pass", "decompose", "-o", "x.svg", NULL };
  Result r = run_args (args), r2 = run_args (with_subs);

  g_assert_cmpint (r.status, ==, 0);
  g_assert_cmpstr (r.err, ==, "castscope-cli: render: note: --expand draws nothing more here: no "
                   "statement of this trace carries its decomposition (a trace printed without "
                   "subsymbol comments, like Thunder's initial trace.python()); --pass decompose "
                   "draws the prims castscope derives\n");
  g_assert_cmpint (r2.status, ==, 0);
  g_assert_null (strstr (r2.err, "draws nothing more"));
  result_clear (&r);
  result_clear (&r2);
  {
    g_autofree char *p = g_build_filename (tmpdir, "x.svg", NULL);
    g_remove (p);
  }
#else
  g_test_skip ("built without render/");
#endif
}

/* render --expand-group with a group the trace lacks is a usage error naming the groups it
 * has (a few, then "..."); the note on a collapsed model names render's options, not the app's
 * double-click. */
static void
test_render_groups (void)
{
#if CS_HAVE_RENDER
  const char *dir = g_getenv ("CS_SHARED_TRACES");
  g_autofree char *llama = dir ? g_build_filename (dir, "thunder_llama_stack_initial.txt", NULL)
                               : NULL;
  g_autofree char *seed = seed_path ();

  {
    const char *args[] = { "render", seed, "--expand-group", "layers.1", "-o", "x.svg", NULL };
    Result r = run_args (args);

    g_assert_cmpint (r.status, ==, 2);
    g_assert_cmpstr (r.err, ==, "castscope-cli: render: --expand-group layers.1: this trace has "
                     "no groups (no layer parameters such as t_layers_0_..., and 400 calls or "
                     "fewer, so no chunks)\n");
    result_clear (&r);
  }
  if (llama == NULL || !g_file_test (llama, G_FILE_TEST_IS_REGULAR))
    {
      g_test_skip ("../shared/traces absent: the LLaMA stack's groups are not checked");
      return;
    }
  {
    const char *args[] = { "render", llama, "--expand-group", "layers.99", "-o", "x.svg", NULL };
    Result r = run_args (args);

    g_assert_cmpint (r.status, ==, 2);
    g_assert_cmpstr (r.err, ==, "castscope-cli: render: --expand-group layers.99: no such group "
                     "in this trace; it has layers.0, layers.1, layers.2, layers.3, layers.4, ... "
                     "(8 in all), and groups inside them such as layers.0.attention\n");
    result_clear (&r);
  }
  {
    const char *args[] = { "render", llama, "-o", "x.svg", NULL };
    Result r = run_args (args);

    g_assert_cmpint (r.status, ==, 0);
    g_assert_cmpstr (r.err, ==, "castscope-cli: render: note: 8 of 8 layers drawn collapsed (all "
                     "with the same structure as layers.0); each run of consecutive layers with "
                     "the same structure is folded into one node (\"layers 0-7: same structure, "
                     "1 shown\"); --expand-group layers.1 draws that layer expanded, --no-fold "
                     "draws every layer as its own node, --collapse none draws every layer "
                     "expanded.\n");
    result_clear (&r);
  }
  {
    const char *args[] = { "render", llama, "--no-fold", "-o", "x.svg", NULL };
    Result r = run_args (args);

    g_assert_cmpint (r.status, ==, 0);
    g_assert_cmpstr (r.err, ==, "castscope-cli: render: note: 8 of 8 layers drawn collapsed (all "
                     "with the same structure as layers.0); --expand-group layers.0 draws it "
                     "expanded, --collapse none draws every layer.\n");
    result_clear (&r);
  }
  {
    /* a real group (a module inside a layer) is accepted */
    const char *args[] = { "render", llama, "--expand-group", "layers.3", "--expand-group",
                           "layers.3.attention", "-o", "x.svg", NULL };
    Result r = run_args (args);

    g_assert_cmpint (r.status, ==, 0);
    g_assert_null (strstr (r.err, "double-click"));
    result_clear (&r);
  }
  {
    g_autofree char *p = g_build_filename (tmpdir, "x.svg", NULL);
    g_remove (p);
  }
#else
  g_test_skip ("built without render/");
#endif
}

/* Options that did nothing are usage errors: --policy '' everywhere, --check / --iters
 * without --device cuda. */
static void
test_msg_ignored_options (void)
{
  g_autofree char *seed = seed_path ();
  static const char * const cmds[] = { "transform", "stats", "diff", "render", "run" };

  for (gsize i = 0; i < G_N_ELEMENTS (cmds); i++)
    {
      const char *args[] = { cmds[i], seed, "--policy", "", NULL, NULL, NULL };
      if (strcmp (cmds[i], "diff") == 0)
        {
          args[4] = "--vs";
          args[5] = "matmul=upcast-f32";
        }
      else if (strcmp (cmds[i], "render") == 0)
        {
          args[4] = "-o";
          args[5] = "x.svg";
        }
#if !CS_HAVE_RENDER
      if (strcmp (cmds[i], "render") == 0)
        continue;
#endif
      expect (args, 2, "--policy '' sets nothing: expected KEY=VALUE");
    }
  {
    const char *a1[] = { "run", seed, "--check", NULL };
    const char *a2[] = { "run", seed, "--device", "cpu", "--iters", "5", NULL };
    const char *a3[] = { "run", seed, "--device", "cuda", "--iters=-1", NULL };
    expect (a1, 2, "run: --check and --iters need --device cuda");
    expect (a2, 2, "run: --check and --iters need --device cuda");
    expect (a3, 2, "run: --iters must be >= 0");
  }
}

/* One rule for one mistake: an index past the file's traces is a usage error (2) for every
 * command, with or without the pipeline. */
static void
test_msg_exit_codes (void)
{
  g_autofree char *seed = seed_path ();
  const char *cases[][9] = {
    { "print", seed, "--trace", "5", NULL },
    { "transform", seed, "--index", "5", NULL },
    { "stats", seed, "--index", "5", NULL },
    { "diff", seed, "--vs", "matmul=upcast-f32", "--index", "5", NULL },
    { "run", seed, "--index", "5", NULL },
#if CS_HAVE_RENDER
    { "render", seed, "--index", "5", "-o", "x.svg", NULL },
    { "render", seed, "--index", "5", "--policy", "matmul=native", "-o", "x.svg", NULL },
#endif
  };

  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    expect (cases[i], 2, "holds 1 trace");

  /* an option naming what the trace lacks is a usage error (2); a missing file or folder is
   * bad input (1), as a missing FILE is */
  {
    const char *grad[] = { "transform", seed, "--grad", "nosuch", NULL };
    const char *grad_int[] = { "stats", seed, "--grad", "a,nosuch", NULL };
    const char *inputs[] = { "run", seed, "--inputs", "/nonexist", NULL };
    const char *ref[] = { "run", seed, "--reference", "gpu", NULL };
    const char *ref_cuda[] = { "run", seed, "--device", "cuda", "--reference", "cpu", NULL };

    const char *grad_empty[] = { "stats", seed, "--grad", "", NULL };
    const char *world0[] = { "stats", seed, "--world-size", "0", NULL };
    const char *world_x[] = { "stats", seed, "--world-size", "8x", NULL };
    const char *bus0[] = { "stats", seed, "--bus-gbps", "0", NULL };
    const char *bus_nan[] = { "stats", seed, "--bus-gbps", "nan", NULL };

    expect (grad, 2, "castscope-cli: grad: input 'nosuch' requested for grad is not a parameter "
                     "of computation");
    /* an empty --grad is not "none" */
    expect (grad_empty, 2, "castscope-cli: grad: input '' requested for grad is not a parameter");
    expect (world0, 2, "castscope-cli: stats: --world-size takes 1 to 65536 ranks, not '0'");
    expect (world_x, 2, "castscope-cli: stats: --world-size takes 1 to 65536 ranks, not '8x'");
    expect (bus0, 2, "castscope-cli: stats: --bus-gbps takes a bandwidth in GB/s above 0 and "
                     "below 1,000,000, not '0'");
    expect (bus_nan, 2, "--bus-gbps takes a bandwidth in GB/s above 0");
    expect (grad_int, 2, "'nosuch' requested for grad is not a parameter");
    expect (inputs, 1, "castscope-cli: run: --inputs /nonexist is not a directory");
    expect (ref, 2, "castscope-cli: run: --reference needs --device cuda --check");
    expect (ref_cuda, 2, "castscope-cli: run: --reference needs --device cuda --check");
  }
#if CS_HAVE_RENDER
  {
    const char *s0[] = { "render", seed, "--scale", "0", "-o", "x.svg", NULL };
    const char *s17[] = { "render", seed, "--scale", "17", "-o", "x.svg", NULL };
    const char *mn[] = { "render", seed, "--max-nodes", "-3", "-o", "x.svg", NULL };

    expect (s0, 2, "castscope-cli: render: --scale must be above 0 and at most 16 (pixels per "
                   "point), not 0\n");
    expect (s17, 2, "castscope-cli: render: --scale must be above 0 and at most 16 (pixels per "
                    "point), not 17\n");
    expect (mn, 2, "castscope-cli: render: --max-nodes must be >= 0, not -3\n");
  }
#endif
}

int
main (int argc, char **argv)
{
  g_autoptr(GPtrArray) cases = g_ptr_array_new_with_free_func (g_free);
  int rc;

  g_test_init (&argc, &argv, NULL);
  cli = g_getenv ("CS_CLI");
  if (cli == NULL || !g_file_test (cli, G_FILE_TEST_IS_EXECUTABLE))
    g_error ("CS_CLI must name the built castscope-cli");
  tmpdir = g_dir_make_tmp ("castscope-cli-errors-XXXXXX", NULL);
  g_assert_nonnull (tmpdir);
  g_chmod (tmpdir, 0755);

  for (gsize i = 0; i < G_N_ELEMENTS (commands); i++)
    for (int c = 0; c < N_CASES; c++)
      {
        TestData *td;
        g_autofree char *name = NULL;
        if ((c == CASE_POLICY_KEY || c == CASE_POLICY_VALUE) && !commands[i].policy)
          continue;
        td = g_new0 (TestData, 1);
        td->cmd = &commands[i];
        td->c = c;
        g_ptr_array_add (cases, td);
        name = g_strdup_printf ("/app/cli/errors/%s/%s", commands[i].name, case_names[c]);
        g_test_add_data_func (name, td, test_case);
      }
  g_test_add_func ("/app/cli/errors/messages/no-driver", test_msg_no_driver);
  g_test_add_func ("/app/cli/errors/messages/shapes-checked-first", test_msg_shapes_checked_first);
  g_test_add_func ("/app/cli/errors/messages/bad-weight-shape", test_msg_bad_weight_shape);
  g_test_add_func ("/app/cli/errors/messages/untyped", test_msg_untyped);
  g_test_add_func ("/app/cli/errors/messages/cut-short-and-typo", test_msg_cut_short_and_typo);
  g_test_add_func ("/app/cli/errors/messages/final-no-backward", test_msg_final_no_backward);
  g_test_add_func ("/app/cli/errors/messages/run-sibling-backward", test_run_sibling_backward);
  g_test_add_func ("/app/cli/errors/messages/diff-summary", test_diff_summary);
  g_test_add_func ("/app/cli/errors/messages/diff-final-note", test_diff_final_note);
  g_test_add_func ("/app/cli/errors/messages/grad-names-not-applicable",
                   test_grad_names_not_applicable);
  g_test_add_func ("/app/cli/errors/messages/transform-one-output", test_transform_one_output);
  g_test_add_func ("/app/cli/errors/messages/diff-llama-counts", test_diff_llama_counts);
  g_test_add_func ("/app/cli/errors/messages/help", test_help);
  g_test_add_func ("/app/cli/errors/messages/undefined-return", test_msg_undefined_return);
  g_test_add_func ("/app/cli/errors/messages/time-units", test_msg_time_units);
  g_test_add_func ("/app/cli/errors/messages/units", test_msg_units);
  g_test_add_func ("/app/cli/errors/messages/expand-note", test_msg_expand_note);
  g_test_add_func ("/app/cli/errors/messages/render-groups", test_render_groups);
  g_test_add_func ("/app/cli/errors/messages/ignored-options", test_msg_ignored_options);
  g_test_add_func ("/app/cli/errors/messages/exit-codes", test_msg_exit_codes);
  rc = g_test_run ();
  {
    static const char * const made[] = { "unreadable.txt", "empty.txt", "binary.bin",
                                          "unknown-op.txt", "shape.txt", "out.svg",
                                          "ubd.txt", "undef.txt", "decomp.txt",
                                          "untyped.txt" };
    for (gsize i = 0; i < G_N_ELEMENTS (made); i++)
      {
        g_autofree char *p = g_build_filename (tmpdir, made[i], NULL);
        g_remove (p);
      }
    g_rmdir (tmpdir);
  }
  g_free (tmpdir);
  return rc;
}
