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
  rc = g_test_run ();
  {
    static const char * const made[] = { "unreadable.txt", "empty.txt", "binary.bin",
                                          "unknown-op.txt", "shape.txt", "out.svg",
                                          "ubd.txt", "undef.txt" };
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
