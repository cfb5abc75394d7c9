/* cs-cli-print.c: `castscope-cli print FILE|-`: parse trace text and print it back in
 * Thunder's format (all of a file's traces in their arrangement, or one of them). */
#include "cs-config.h"

#include <stdio.h>

#include "cs-cli.h"
#include "cs-parse.h"
#include "cs-print.h"

/**
 * cs_cli_cmd_print:
 * @argc: arguments, argv[0] = "print"
 * @argv: `[--no-subsymbols] [--no-leading] [--trace N] FILE|-`
 *
 * Parses FILE (cs_parse_file) and prints it back with cs_print_trace_list(), or one trace.
 * Returns: CS_CLI_EXIT_OK, CS_CLI_EXIT_INPUT (the parser's "file:line:col: reason" on
 * stderr) or CS_CLI_EXIT_USAGE
 */
int
cs_cli_cmd_print (int argc, char **argv)
{
  gboolean no_subs = FALSE, no_leading = FALSE;
  gint trace_index = -1;
  g_auto(GStrv) files = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(GOptionContext) ctx = cs_cli_option_context_new ("FILE", "print Thunder traces back");
  g_autoptr(CsTraceList) list = NULL;
  g_autofree char *text = NULL;
  CsPrintFlags flags = CS_PRINT_DEFAULT;
  const GOptionEntry entries[] = {
    { "no-subsymbols", 's', 0, G_OPTION_ARG_NONE, &no_subs,
      "Top-level statements only (trace.python(), no decomposition comments)", NULL },
    { "no-leading", 'L', 0, G_OPTION_ARG_NONE, &no_leading,
      "Drop comment lines before a trace that Thunder did not print (e.g. '# source: ...')", NULL },
    { "trace", 't', 0, G_OPTION_ARG_INT, &trace_index,
      "Print only trace N of the file (0-based; -1 = the last)", "N" },
    { G_OPTION_REMAINING, 0, 0, G_OPTION_ARG_FILENAME_ARRAY, &files, NULL, NULL },
    { NULL }
  };
  gboolean trace_given;

  g_option_context_add_main_entries (ctx, entries, NULL);
  g_option_context_set_summary (ctx,
    "Reads one file of Thunder trace text (one trace, several concatenated, or a printed\n"
    "Python list of traces) and prints it in Thunder's format.");
  cs_cli_set_help (ctx, NULL, CS_CLI_HELP_TRACE);
  trace_index = G_MININT;
  if (!cs_cli_parse_options (ctx, &argc, &argv))
    return CS_CLI_EXIT_USAGE;
  trace_given = trace_index != G_MININT;
  if (files == NULL || files[0] == NULL || files[1] != NULL)
    {
      fprintf (stderr, "castscope-cli: print: expected exactly one FILE (or '-')\n"
                       "Try 'castscope-cli print --help'.\n");
      return CS_CLI_EXIT_USAGE;
    }
  if (no_subs)
    flags |= CS_PRINT_NO_SUBS;
  if (no_leading)
    flags |= CS_PRINT_NO_LEADING;

  list = cs_parse_file (files[0], &error);
  if (list == NULL)
    {
      cs_cli_error ("%s", error->message);
      return CS_CLI_EXIT_INPUT;
    }
  if (trace_given)
    {
      gint n = (gint) list->traces->len;
      gint k = trace_index < 0 ? n + trace_index : trace_index;
      if (k < 0 || k >= n)
        {
          fprintf (stderr, "castscope-cli: print: --trace %d: %s holds %d trace%s\n", trace_index,
                   files[0], n, n == 1 ? "" : "s");
          return CS_CLI_EXIT_USAGE;
        }
      text = cs_print_trace (g_ptr_array_index (list->traces, k), flags);
    }
  else
    text = cs_print_trace_list (list, flags);
  fputs (text, stdout);   /* a failed write is reported by main() when it closes stdout */
  return CS_CLI_EXIT_OK;
}
