/* cs-cli-transform.c: `castscope-cli transform FILE [--policy k=v ...] [--grad a,b|none]
 * [--pass NAME | --all-passes] [--trace forward|backward]`: runs the pass pipeline and prints
 * traces in Thunder's format. */
#include "cs-config.h"

#include <stdio.h>
#include <string.h>

#include "cs-cli.h"
#include "cs-cli-policy.h"
#include "cs-print.h"

int
cs_cli_cmd_transform (int argc, char **argv)
{
  g_auto(GStrv) policy_args = NULL;
  g_autofree char *grad = NULL;
  g_autofree char *pass = NULL;
  g_autofree char *which = NULL;
  g_autofree char *desc = NULL;
  gboolean all_passes = FALSE, list_passes = FALSE, no_subs = FALSE;
  gint index = 0;
  g_autoptr(GOptionContext) ctx = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(CsPipeline) pl = NULL;
  CsPolicy policy;
  CsPrintFlags flags;
  g_autofree char *inductor = NULL;
  GOptionEntry entries[] = {
    { "policy", 'p', 0, G_OPTION_ARG_STRING_ARRAY, &policy_args, "Set a cast policy knob (repeatable)", "KEY=VALUE" },
    { "grad", 'g', 0, G_OPTION_ARG_STRING, &grad, "Inputs that require grad: names, 'auto' (default: every float input but module buffers, as Thunder), 'all' (every float input) or 'none'", "A,B|auto|all|none" },
    { "pass", 0, 0, G_OPTION_ARG_STRING, &pass, "Print the trace made by this pass (see --list-passes)", "NAME" },
    { "all-passes", 'a', 0, G_OPTION_ARG_NONE, &all_passes, "Print every intermediate trace, each after a '# castscope pass: NAME' line", NULL },
    { "list-passes", 'l', 0, G_OPTION_ARG_NONE, &list_passes, "List the passes that ran and their times", NULL },
    { "trace", 't', 0, G_OPTION_ARG_STRING, &which, "Final trace to print: forward (default) or backward", "forward|backward" },
    { "index", 'i', 0, G_OPTION_ARG_INT, &index, "Which trace of the file (default 0)", "N" },
    { "inductor", 0, 0, G_OPTION_ARG_STRING, &inductor, CS_CLI_INDUCTOR_HELP, "FILE|auto" },
    { "top-level", 0, 0, G_OPTION_ARG_NONE, &no_subs, "Print top-level statements only (trace.python())", NULL },
    { NULL },
  };

  ctx = cs_cli_option_context_new ("FILE",
                                   "run Thunder's passes under a cast policy and print traces");
  g_option_context_add_main_entries (ctx, entries, NULL);
  desc = cs_cli_policy_describe ();
  cs_cli_set_help (ctx, desc, CS_CLI_HELP_TRACE);
  if (!cs_cli_parse_options (ctx, &argc, &argv))
    return CS_CLI_EXIT_USAGE;
  cs_cli_set_inductor (inductor);
  if (argc != 2)
    {
      cs_cli_error ("transform: expected one FILE (try --help)");
      return CS_CLI_EXIT_USAGE;
    }
  if (which && strcmp (which, "forward") != 0 && strcmp (which, "backward") != 0)
    {
      cs_cli_error ("transform: --trace must be 'forward' or 'backward', not '%s'", which);
      return CS_CLI_EXIT_USAGE;
    }
  /* one of: the final forward or backward (--trace), one pass's trace (--pass), every pass's
   * (--all-passes) or the list of passes (--list-passes) */
  {
    const char *given[4];
    guint n = 0;
    if (which)
      given[n++] = "--trace";
    if (pass)
      given[n++] = "--pass";
    if (all_passes)
      given[n++] = "--all-passes";
    if (list_passes)
      given[n++] = "--list-passes";
    if (n >= 2)
      {
        cs_cli_error ("transform: %s and %s exclude each other (each picks what to print)",
                      given[0], given[1]);
        return CS_CLI_EXIT_USAGE;
      }
  }
  if (index < 0)
    {
      cs_cli_error ("transform: --index must be >= 0");
      return CS_CLI_EXIT_USAGE;
    }
  if (!cs_cli_policy_from_strv (policy_args, &policy, &error))
    {
      cs_cli_error ("transform: %s", error->message);
      return CS_CLI_EXIT_USAGE;
    }
  pl = cs_cli_run_pipeline (argv[1], (guint) index, &policy, grad, &error);
  if (pl == NULL)
    {
      cs_cli_error ("%s", error->message);
      return cs_cli_exit_for_error (error);
    }
  flags = no_subs ? CS_PRINT_NO_SUBS : CS_PRINT_DEFAULT;

  if (list_passes)
    {
      int width = 28;   /* the longest pass name sets the column ("-backward" passes) */
      for (guint i = 0; i < cs_pipeline_n_passes (pl); i++)
        width = MAX (width, (int) strlen (cs_pipeline_pass_name (pl, i)));
      for (guint i = 0; i < cs_pipeline_n_passes (pl); i++)
        printf ("%-*s %8.3f ms  %u statements\n", width, cs_pipeline_pass_name (pl, i),
                cs_pipeline_pass_time_ns (pl, i) / 1e6, cs_pipeline_get_trace (pl, i)->n_stmts);
      return CS_CLI_EXIT_OK;
    }
  if (all_passes)
    {
      for (guint i = 0; i < cs_pipeline_n_passes (pl); i++)
        {
          g_autofree char *text = cs_print_trace (cs_pipeline_get_trace (pl, i), flags);
          printf ("%s# castscope pass: %s\n%s", i ? "\n" : "", cs_pipeline_pass_name (pl, i), text);
        }
      return CS_CLI_EXIT_OK;
    }
  if (pass)
    {
      CsTrace *t = cs_pipeline_find_trace (pl, pass);
      g_autofree char *text = NULL;
      if (t == NULL)
        {
          GString *names = g_string_new (NULL);
          for (guint i = 0; i < cs_pipeline_n_passes (pl); i++)
            g_string_append_printf (names, "%s%s", i ? ", " : "", cs_pipeline_pass_name (pl, i));
          cs_cli_error ("transform: no pass named '%s' ran (passes: %s)", pass, names->str);
          g_string_free (names, TRUE);
          return CS_CLI_EXIT_USAGE;
        }
      text = cs_print_trace (t, flags);
      fputs (text, stdout);
      return CS_CLI_EXIT_OK;
    }
  {
    CsTrace *t = (which && strcmp (which, "backward") == 0) ? cs_pipeline_get_backward (pl)
                                                            : cs_pipeline_get_forward (pl);
    g_autofree char *text = NULL;
    if (t == NULL)
      {
        g_autofree char *why = cs_cli_no_backward_reason (pl, argv[1]);
        cs_cli_error ("transform: there is no backward trace: %s", why);
        return CS_CLI_EXIT_USAGE;   /* --trace backward names what the input lacks */
      }
    text = cs_print_trace (t, flags);
    fputs (text, stdout);
  }
  return CS_CLI_EXIT_OK;
}
