/* test-cli-io.c: castscope-cli's output and input at their limits (issue 21 items 4 and 6).
 *
 * - Standard output on /dev/full: every command that prints exits 1 with "cannot write
 *   standard output: No space left on device" instead of 0 (or a silent 1), however much it
 *   wrote.
 * - render -o onto a file system that refuses the bytes (a file size limit, RLIMIT_FSIZE: the
 *   write fails with EFBIG as it does with ENOSPC on a full disk): exit 1, the reason on
 *   stderr, no partial file, an existing file left as it was, no temporary file left behind.
 * - The input cap (CASTSCOPE_MAX_INPUT_BYTES lowered to 65536 for the test) holds for a named
 *   FIFO and for standard input, and /dev/zero is refused at once.
 * The CLI ($CS_CLI) is spawned directly, no shell.
 */
#include "cs-config.h"

#include <errno.h>
#include <fcntl.h>
#include <gio/gio.h>
#include <glib/gstdio.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char *tmpdir;     /* per-run scratch folder */
static const char *cli;  /* $CS_CLI */

typedef struct
{
  int   status;   /* exit code, or -signal when killed by a signal */
  char *out;      /* stdout (empty when it went elsewhere) */
  char *err;      /* stderr */
} Result;

static void
result_clear (Result *r)
{
  g_free (r->out);
  g_free (r->err);
}

typedef enum
{
  SETUP_NONE,
  SETUP_STDOUT_FULL,     /* stdout is /dev/full */
  SETUP_FSIZE_LIMIT,     /* no file may grow past 2048 bytes (SIGXFSZ ignored: EFBIG) */
} Setup;

static void
child_setup (gpointer data)
{
  Setup setup = GPOINTER_TO_INT (data);

  if (setup == SETUP_STDOUT_FULL)
    {
      int fd = open ("/dev/full", O_WRONLY);
      if (fd < 0 || dup2 (fd, STDOUT_FILENO) < 0)
        _exit (99);
      close (fd);
    }
  else if (setup == SETUP_FSIZE_LIMIT)
    {
      struct rlimit rl = { 2048, 2048 };
      signal (SIGXFSZ, SIG_IGN);
      if (setrlimit (RLIMIT_FSIZE, &rl) != 0)
        _exit (99);
    }
}

/* Runs the CLI with @args (NULL-terminated, after argv[0]) in tmpdir; @stdin_path (nullable)
 * is opened as its standard input; @env_cap (nullable) sets CASTSCOPE_MAX_INPUT_BYTES. */
static Result
run_cli (const char * const *args, Setup setup, const char *stdin_path, const char *env_cap)
{
  g_autoptr(GPtrArray) argv = g_ptr_array_new ();
  g_autoptr(GError) error = NULL;
  GSubprocessLauncher *launcher;
  GSubprocess *proc;
  Result r = { 0 };
  GSubprocessFlags flags = G_SUBPROCESS_FLAGS_STDERR_PIPE;

  g_ptr_array_add (argv, (gpointer) cli);
  for (guint i = 0; args[i]; i++)
    g_ptr_array_add (argv, (gpointer) args[i]);
  g_ptr_array_add (argv, NULL);
  if (setup != SETUP_STDOUT_FULL)
    flags |= G_SUBPROCESS_FLAGS_STDOUT_PIPE;
  launcher = g_subprocess_launcher_new (flags);
  g_subprocess_launcher_set_cwd (launcher, tmpdir);
  if (env_cap)
    g_subprocess_launcher_setenv (launcher, "CASTSCOPE_MAX_INPUT_BYTES", env_cap, TRUE);
  if (stdin_path)
    g_subprocess_launcher_set_stdin_file_path (launcher, stdin_path);
  g_subprocess_launcher_set_child_setup (launcher, child_setup, GINT_TO_POINTER (setup), NULL);
  proc = g_subprocess_launcher_spawnv (launcher, (const char * const *) argv->pdata, &error);
  if (proc == NULL)
    g_error ("cannot spawn %s: %s", cli, error->message);
  if (!g_subprocess_communicate_utf8 (proc, NULL, NULL, &r.out, &r.err, &error))
    g_error ("%s: %s", cli, error->message);
  if (r.out == NULL)
    r.out = g_strdup ("");
  if (g_subprocess_get_if_exited (proc))
    r.status = g_subprocess_get_exit_status (proc);
  else
    r.status = -g_subprocess_get_term_sig (proc);
  g_object_unref (proc);
  g_object_unref (launcher);
  return r;
}

static char *
data_path (const char *name)
{
  return g_build_filename (g_getenv ("CS_DATA_DIR"), name, NULL);
}

/* The names in tmpdir, sorted and joined with spaces. */
static char *
list_tmpdir (void)
{
  g_autoptr(GDir) d = g_dir_open (tmpdir, 0, NULL);
  g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func (g_free);
  const char *n;

  g_assert_nonnull (d);
  while ((n = g_dir_read_name (d)) != NULL)
    g_ptr_array_add (names, g_strdup (n));
  g_ptr_array_sort (names, (GCompareFunc) g_strcmp0);
  g_ptr_array_add (names, NULL);
  return g_strjoinv (" ", (char **) names->pdata);
}

static void
empty_tmpdir (void)
{
  g_autoptr(GDir) d = g_dir_open (tmpdir, 0, NULL);
  const char *n;

  while ((n = g_dir_read_name (d)) != NULL)
    {
      g_autofree char *p = g_build_filename (tmpdir, n, NULL);
      g_remove (p);
    }
}

/* Item 4: every command that prints, with stdout on /dev/full: exit 1 and the reason. */
static void
test_stdout_full (void)
{
  g_autofree char *seed = data_path ("seed_foo.txt");
  g_autofree char *mlp = data_path ("mlp_gelu.txt");
  g_autofree char *big = g_build_filename (tmpdir, "chain.txt", NULL);
  g_autoptr(GString) chain = g_string_new ("def computation(a):\n  # a: \"cuda:0 f32[4, 4]\"\n"
                                           "  t0 = ltorch.neg(a)  # t0: \"cuda:0 f32[4, 4]\"\n");
  const char *cases[][8] = {
    { "print", seed, NULL },
    /* 400 statements (about 20 KiB), over stdio's buffer */
    { "print", big, NULL },
    { "info", big, NULL },
    { "info", seed, NULL },
    { "info", seed, "--json", NULL },
    { "transform", seed, NULL },
    /* over stdio's buffer: the failed write happens while the command still runs */
    { "transform", mlp, "--all-passes", NULL },
    { "stats", seed, NULL },
    { "stats", seed, "--json", NULL },
    { "diff", seed, "--vs", "matmul=upcast-f32", NULL },
    { "run", seed, "--device", "cpu", NULL },
    { "--help", NULL },
    /* a command's --help, which GOption prints before it exits */
    { "stats", "--help", NULL },
    { "run", "--help", NULL },
#if CS_HAVE_RENDER
    { "render", seed, "-o", "ok.svg", "--verbose", NULL },
#endif
  };

  for (guint k = 1; k < 400; k++)
    g_string_append_printf (chain, "  t%u = ltorch.neg(t%u)  # t%u: \"cuda:0 f32[4, 4]\"\n",
                            k, k - 1, k);
  g_string_append (chain, "  return (t399,)\n");
  g_assert_true (g_file_set_contents (big, chain->str, -1, NULL));
  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      Result r = run_cli (cases[i], SETUP_STDOUT_FULL, NULL, NULL);
      g_autofree char *what = g_strjoinv (" ", (char **) cases[i]);

      /* one message whichever write failed: the last flush (stdio keeps its errno) or one
       * while the command still ran (the reason is asked for again) */
      if (r.status != 1
          || strcmp (r.err, "castscope-cli: cannot write standard output: No space left on "
                            "device\n") != 0)
        g_error ("%s > /dev/full: exit %d (want 1), stderr \"%s\" (want \"castscope-cli: cannot "
                 "write standard output: No space left on device\")", what, r.status, r.err);
      result_clear (&r);
    }
  empty_tmpdir ();
}

static void
write_old (const char *name)
{
  g_autofree char *p = g_build_filename (tmpdir, name, NULL);
  g_assert_true (g_file_set_contents (p, "old contents\n", -1, NULL));
}

static void
assert_old (const char *name)
{
  g_autofree char *p = g_build_filename (tmpdir, name, NULL);
  g_autofree char *got = NULL;
  g_assert_true (g_file_get_contents (p, &got, NULL, NULL));
  g_assert_cmpstr (got, ==, "old contents\n");
}

/* Item 4: render -o where the file system refuses the bytes: exit 1 with the reason, no
 * partial file, no temporary file, an existing file untouched. */
static void
test_render_file_limit (void)
{
#if CS_HAVE_RENDER
  g_autofree char *mlp = data_path ("mlp_gelu.txt");
  static const char * const outs[] = { "x.pdf", "x.svg", "x.png" };

  for (gsize i = 0; i < G_N_ELEMENTS (outs); i++)
    {
      const char *args[] = { "render", mlp, "-o", outs[i], NULL };
      g_autofree char *want = g_strdup_printf ("castscope-cli: render: cannot write %s: ", outs[i]);
      g_autofree char *names = NULL;
      Result r;

      /* a new file: nothing is left */
      r = run_cli (args, SETUP_FSIZE_LIMIT, NULL, NULL);
      if (r.status != 1 || strstr (r.err, want) == NULL || strstr (r.err, g_strerror (EFBIG)) == NULL)
        g_error ("render -o %s over the file size limit: exit %d (want 1), stderr \"%s\" "
                 "(want \"%s...%s\")", outs[i], r.status, r.err, want, g_strerror (EFBIG));
      names = list_tmpdir ();
      g_assert_cmpstr (names, ==, "");
      result_clear (&r);
      g_clear_pointer (&names, g_free);

      /* an existing file keeps its contents */
      write_old (outs[i]);
      r = run_cli (args, SETUP_FSIZE_LIMIT, NULL, NULL);
      g_assert_cmpint (r.status, ==, 1);
      g_assert_nonnull (strstr (r.err, want));
      assert_old (outs[i]);
      names = list_tmpdir ();
      g_assert_cmpstr (names, ==, outs[i]);
      result_clear (&r);

      /* without the limit the same command replaces it (the picture is over the limit) */
      r = run_cli (args, SETUP_NONE, NULL, NULL);
      g_assert_cmpint (r.status, ==, 0);
      {
        g_autofree char *p = g_build_filename (tmpdir, outs[i], NULL);
        GStatBuf st;
        g_assert_cmpint (g_stat (p, &st), ==, 0);
        g_assert_cmpint (st.st_size, >, 2048);
      }
      result_clear (&r);
      empty_tmpdir ();
    }
#else
  g_test_skip ("built without render/");
#endif
}

static gpointer
fifo_writer (gpointer path)
{
  int fd = g_open (path, O_WRONLY, 0);
  char line[64];
  gsize sent = 0;

  memset (line, ' ', sizeof line);
  line[0] = '#';
  line[sizeof line - 1] = '\n';
  if (fd < 0)
    return GSIZE_TO_POINTER (0);
  while (sent < ((gsize) 16 << 20))
    {
      gssize n = write (fd, line, sizeof line);
      if (n <= 0)
        break;
      sent += (gsize) n;
    }
  close (fd);
  return GSIZE_TO_POINTER (sent);
}

/* Item 6: one cap for every input: a FIFO, standard input and a regular file over
 * CASTSCOPE_MAX_INPUT_BYTES=65536 are refused with the same message; /dev/zero at once. */
static void
test_input_cap (void)
{
  g_autofree char *fifo = g_build_filename (tmpdir, "fifo", NULL);
  g_autofree char *big = g_build_filename (tmpdir, "big.txt", NULL);
  GString *text = g_string_new (NULL);
  static const char tail[] = ": input larger than 65536 bytes (64 KiB), the cap "
                             "CASTSCOPE_MAX_INPUT_BYTES sets (unset it for the 1 GiB cap); is "
                             "this a trace file?\n";

  while (text->len < 70000)
    g_string_append (text, "# a comment line, as traces begin\n");
  g_assert_true (g_file_set_contents (big, text->str, (gssize) text->len, NULL));
  g_string_free (text, TRUE);

  /* a named FIFO fed 16 MiB: refused once 64 KiB are read */
  for (int k = 0; k < 2; k++)
    {
      const char *cmd = k == 0 ? "print" : "stats";
      const char *args[] = { cmd, fifo, NULL };
      g_autofree char *want = g_strdup_printf ("castscope-cli: %s%s", fifo, tail);
      GThread *writer;
      Result r;

      g_assert_cmpint (mkfifo (fifo, 0600), ==, 0);
      writer = g_thread_new ("fifo-writer", fifo_writer, fifo);
      r = run_cli (args, SETUP_NONE, NULL, "65536");
      g_assert_cmpuint (GPOINTER_TO_SIZE (g_thread_join (writer)), <, (gsize) 16 << 20);
      g_assert_cmpint (r.status, ==, 1);
      g_assert_cmpstr (r.err, ==, want);
      result_clear (&r);
      g_remove (fifo);
    }

  /* standard input and a regular file: the same cap, the same message */
  {
    const char *args[] = { "info", "-", NULL };
    g_autofree char *want = g_strdup_printf ("castscope-cli: -%s", tail);
    Result r = run_cli (args, SETUP_NONE, big, "65536");
    g_assert_cmpint (r.status, ==, 1);
    g_assert_cmpstr (r.err, ==, want);
    result_clear (&r);
  }
  {
    const char *args[] = { "transform", big, NULL };
    g_autofree char *want = g_strdup_printf ("castscope-cli: %s%s", big, tail);
    Result r = run_cli (args, SETUP_NONE, NULL, "65536");
    g_assert_cmpint (r.status, ==, 1);
    g_assert_cmpstr (r.err, ==, want);
    result_clear (&r);
  }

  /* /dev/zero under the default 1 GiB cap: refused at its first byte (a NUL), having read
   * one chunk, where the old reader went on to 4 GiB */
  {
    const char *args[] = { "print", "/dev/zero", NULL };
    Result r = run_cli (args, SETUP_NONE, NULL, NULL);
    g_assert_cmpint (r.status, ==, 1);
    g_assert_cmpstr (r.err, ==, "castscope-cli: /dev/zero:1:1: not UTF-8 text (byte 0x00); is this a binary file?\n");
    result_clear (&r);
  }
  empty_tmpdir ();
}

int
main (int argc, char **argv)
{
  int rc;

  g_test_init (&argc, &argv, NULL);
  signal (SIGPIPE, SIG_IGN);   /* the FIFO writer sees EPIPE when the CLI stops reading */
  cli = g_getenv ("CS_CLI");
  if (cli == NULL || !g_file_test (cli, G_FILE_TEST_IS_EXECUTABLE))
    g_error ("CS_CLI must name the built castscope-cli");
  tmpdir = g_dir_make_tmp ("castscope-cli-io-XXXXXX", NULL);
  g_assert_nonnull (tmpdir);

  g_test_add_func ("/app/cli/io/stdout-full", test_stdout_full);
  g_test_add_func ("/app/cli/io/render-file-limit", test_render_file_limit);
  g_test_add_func ("/app/cli/io/input-cap", test_input_cap);
  rc = g_test_run ();
  empty_tmpdir ();
  g_rmdir (tmpdir);
  g_free (tmpdir);
  return rc;
}
