/* cs-cli.c: castscope-cli entry point and subcommand dispatch. */
#include "cs-config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <locale.h>
#include <unistd.h>

#include "cs-cli.h"
#include "cs-cli-progress.h"
#include "cs-parse.h"

typedef struct
{
  const char       *name;    /* subcommand */
  CsCliCommandFunc  func;    /* runs it (argv[0]: the subcommand); returns a CS_CLI_EXIT_* */
  const char       *summary; /* one line for --help */
} CsCliCommand;

static const CsCliCommand commands[] = {
  { "print",     cs_cli_cmd_print,     "print the trace(s) of a file back in Thunder's format" },
  { "info",      cs_cli_cmd_info,      "summarise a trace file: statements, ops, dtypes, regions, casts" },
  { "transform", cs_cli_cmd_transform, "run the pass pipeline under a cast policy and print traces" },
  { "stats",     cs_cli_cmd_stats,     "casts, regions, matmuls, FLOPs, bytes and estimated time" },
  { "diff",      cs_cli_cmd_diff,      "casts and regions that change between two cast policies" },
  { "render",    cs_cli_cmd_render,    "draw a trace as a graph to SVG, PNG, PDF or DOT" },
  { "run",       cs_cli_cmd_run,       "execute forward and backward on the CPU reference or the GPU" },
  { "bench",     cs_cli_cmd_bench,     "run the benchmark workloads on the GPU" },
};

static void
print_usage (FILE *out)
{
  fprintf (out, "Usage: castscope-cli COMMAND [OPTION...] FILE\n\n"
                "Load Lightning Thunder traces, re-run Thunder's transforms under a cast policy,\n"
                "draw and run them.\n\nCommands:\n");
  for (gsize i = 0; i < G_N_ELEMENTS (commands); i++)
    fprintf (out, "  %-10s %s\n", commands[i].name, commands[i].summary);
  fprintf (out, "\n" CS_CLI_HELP_FORMAT "\n"
                "\nRun 'castscope-cli COMMAND --help' for the options of a command.\n"
                CS_CLI_HELP_STDIN "\n" CS_CLI_HELP_EXIT "\n");
}

GOptionContext *
cs_cli_option_context_new (const char *params, const char *summary)
{
  g_autofree char *text = g_strdup_printf ("%s - %s", params, summary);

  return g_option_context_new (text);
}

void
cs_cli_set_help (GOptionContext *ctx, const char *description, CsCliHelpInput input)
{
  g_autofree char *text = NULL;

  text = g_strconcat (description ? description : "",
                      description && description[0] ? "\n" : "",
                      input == CS_CLI_HELP_TRACE ? CS_CLI_HELP_STDIN "\n" : "",
                      CS_CLI_HELP_FORMAT "\n", CS_CLI_HELP_EXIT, NULL);
  g_option_context_set_description (ctx, text);
}

gboolean
cs_cli_parse_options (GOptionContext *ctx, int *argc, char ***argv)
{
  g_autoptr(GError) error = NULL;

  if (!g_option_context_parse (ctx, argc, argv, &error))
    {
      fprintf (stderr, "castscope-cli: %s: %s\nTry 'castscope-cli %s --help'.\n",
               (*argv)[0], error->message, (*argv)[0]);
      return FALSE;
    }
  return TRUE;
}

char *
cs_cli_format_ms (double ms)
{
  if (!(ms >= 0))
    return g_strdup ("n/a");
  if (ms == 0)
    return g_strdup ("0 ms");
  if (ms < 1e-3)
    return g_strdup_printf ("%.3g ns", ms * 1e6);
  if (ms < 1.0)
    return g_strdup_printf ("%.3g us", ms * 1e3);
  if (ms < 1e3)
    return g_strdup_printf ("%.3g ms", ms);
  if (ms < 60e3)
    return g_strdup_printf ("%.3g s", ms / 1e3);
  if (ms < 3600e3)
    return g_strdup_printf ("%.3g min", ms / 60e3);
  return g_strdup_printf ("%.3g h (implausible for one step: check the trace's shapes)",
                          ms / 3600e3);
}

void
cs_cli_error (const char *fmt, ...)
{
  va_list ap;
  g_autofree char *msg = NULL;

  va_start (ap, fmt);
  msg = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  cs_cli_progress_clear_stderr ();
  fprintf (stderr, "castscope-cli: %s\n", msg);
}

/* Flushes and closes standard output once the command is done.  Every printf of a command
 * goes through stdio's buffer, whose error flag stays set after a failed write: a full disk,
 * /dev/full or a closed descriptor turns the exit status @rc into CS_CLI_EXIT_INPUT (unless
 * it already is a failure) with "cannot write standard output: <reason>" on stderr; the
 * reason of a write that failed before the last one comes from one more write. */
static gboolean stdout_finished; /* finish_stdout() has run */

static int
finish_stdout (int rc)
{
  int err = 0;
  gboolean failed = ferror (stdout) != 0;

  stdout_finished = TRUE;
  errno = 0;
  if (fflush (stdout) != 0)
    {
      failed = TRUE;
      err = errno;
    }
  if (failed && err == 0)
    {
      /* the write that failed was an earlier one, its errno long gone: ask the descriptor
       * again (one byte, on output that is incomplete anyway), so that a full disk reads
       * "No space left on device" whichever command wrote how much */
      errno = 0;
      if (write (STDOUT_FILENO, "\n", 1) < 0)
        err = errno;
    }
  errno = 0;
  if (fclose (stdout) != 0 && !failed)
    {
      failed = TRUE;
      err = errno;
    }
  if (!failed)
    return rc;
  if (err != 0)
    cs_cli_error ("cannot write standard output: %s", g_strerror (err));
  else
    cs_cli_error ("cannot write standard output: a write failed, the output is incomplete "
                  "(is the disk full?)");
  return rc != CS_CLI_EXIT_OK ? rc : CS_CLI_EXIT_INPUT;
}

/* finish_stdout() for the paths that end in exit() inside a library instead of returning
 * from main(): GOption prints a command's --help and exits 0.  _exit() is the way out of an
 * atexit handler (gnulib's close_stdout does the same). */
static void
finish_stdout_at_exit (void)
{
  int rc;

  if (stdout_finished)
    return;
  rc = finish_stdout (CS_CLI_EXIT_OK);
  if (rc != CS_CLI_EXIT_OK)
    _exit (rc);
}

int
main (int argc, char **argv)
{
  atexit (finish_stdout_at_exit);
  setlocale (LC_ALL, "");
  /* Numbers in traces are always printed the Python way. */
  setlocale (LC_NUMERIC, "C");

  if (argc < 2)
    {
      print_usage (stderr);
      return CS_CLI_EXIT_USAGE;
    }
  if (strcmp (argv[1], "--help") == 0 || strcmp (argv[1], "-h") == 0 || strcmp (argv[1], "help") == 0)
    {
      print_usage (stdout);
      return finish_stdout (CS_CLI_EXIT_OK);
    }
  if (strcmp (argv[1], "--version") == 0)
    {
      printf ("castscope-cli %s\n", CS_VERSION);
      return finish_stdout (CS_CLI_EXIT_OK);
    }
  /* --format FMT / --format=FMT, taken out before the command parses its own options */
  for (int i = 2; i < argc; i++)
    {
      const char *v = NULL;
      int used = 0;
      CsParseFormat fmt;

      if (strcmp (argv[i], "--") == 0)
        break;
      if (strcmp (argv[i], "--format") == 0)
        {
          if (i + 1 >= argc)
            {
              fprintf (stderr, "castscope-cli: --format needs a value (auto, thunder or aten)\n");
              return CS_CLI_EXIT_USAGE;
            }
          v = argv[i + 1];
          used = 2;
        }
      else if (g_str_has_prefix (argv[i], "--format="))
        {
          v = argv[i] + strlen ("--format=");
          used = 1;
        }
      if (v == NULL)
        continue;
      if (!cs_parse_format_from_string (v, &fmt))
        {
          fprintf (stderr, "castscope-cli: unknown --format '%s' (auto, thunder or aten)\n", v);
          return CS_CLI_EXIT_USAGE;
        }
      cs_parse_set_default_format (fmt);
      memmove (argv + i, argv + i + used, sizeof (char *) * (argc - i - used + 1));
      argc -= used;
      i--;
    }
  for (gsize i = 0; i < G_N_ELEMENTS (commands); i++)
    if (strcmp (argv[1], commands[i].name) == 0)
      {
        g_autofree char *prgname = g_strdup_printf ("castscope-cli %s", commands[i].name);

        /* GOption's usage line: "castscope-cli print [OPTION…] FILE - ..." */
        g_set_prgname (prgname);
        return finish_stdout (commands[i].func (argc - 1, argv + 1));
      }
  fprintf (stderr, "castscope-cli: unknown command '%s'\n\n", argv[1]);
  print_usage (stderr);
  return CS_CLI_EXIT_USAGE;
}
