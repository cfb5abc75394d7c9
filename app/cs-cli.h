/* cs-cli.h: castscope-cli subcommands.  Each lives in app/cs-cli-<name>.c.
 *
 * Exit codes (all commands): 0 ok, 1 bad input or failed check (message on stderr), 2 usage.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

#define CS_CLI_EXIT_OK    0
#define CS_CLI_EXIT_INPUT 1
#define CS_CLI_EXIT_USAGE 2

typedef int (*CsCliCommandFunc) (int argc, char **argv);

/* argv[0] is the command name; GOptionContext parses the rest. */
int cs_cli_cmd_print     (int argc, char **argv);   /* foundation */
int cs_cli_cmd_info      (int argc, char **argv);   /* foundation */
int cs_cli_cmd_run       (int argc, char **argv);   /* semantics (cpu) + kernels (cuda) */
int cs_cli_cmd_transform (int argc, char **argv);   /* pipeline */
int cs_cli_cmd_stats     (int argc, char **argv);   /* pipeline */
int cs_cli_cmd_diff      (int argc, char **argv);   /* pipeline */
int cs_cli_cmd_render    (int argc, char **argv);   /* render */
int cs_cli_cmd_bench     (int argc, char **argv);   /* kernels */

/* Exit codes and inputs as every command's --help states them (cs_cli_set_help()). */
#define CS_CLI_HELP_EXIT \
  "Exit status: 0 ok, 1 bad input or a failed check (a missing or unreadable file, a trace\n" \
  "that does not parse or that the passes refuse: the reason on stderr, with file:line:col\n" \
  "for the trace), 2 usage error (a bad option or value, or an option naming something the\n" \
  "input lacks: --index past its traces, --grad an input it does not have...)."
#define CS_CLI_HELP_STDIN \
  "FILE '-' reads standard input.  Any input is read up to 1 GiB and refused past it\n" \
  "(CASTSCOPE_MAX_INPUT_BYTES=N lowers the cap)."
#define CS_CLI_HELP_FORMAT \
  "--format auto|thunder|aten (every command): the text format of FILE (default auto:\n" \
  "torch.compile's printed graphs are told from Thunder's traces by their content)."

/* What a command reads, for cs_cli_set_help(). */
typedef enum
{
  CS_CLI_HELP_TRACE,      /* one trace FILE, or '-' for standard input */
  CS_CLI_HELP_FILES,      /* trace files (bench): no standard input */
} CsCliHelpInput;

/**
 * cs_cli_option_context_new:
 * @params: the arguments after the options, as the usage line shows them ("FILE", "[FILE...]")
 * @summary: what the command does, one line
 *
 * A context whose usage line reads "castscope-cli COMMAND [OPTION…] FILE - summary" (main()
 * sets the program name to "castscope-cli COMMAND").  Commands that take their files through a
 * G_OPTION_REMAINING entry give that entry no arg_description, or GLib prints it again.
 * Returns: (transfer full): the context
 */
GOptionContext *cs_cli_option_context_new (const char *params,
                                           const char *summary);

/**
 * cs_cli_set_help:
 * @ctx: a command's context
 * @description: (nullable): the command's own text after the options (ends with a newline
 *   or is empty)
 * @input: what the command reads
 *
 * Sets @ctx's description to @description followed by the text every command shares: where
 * the input comes from (CS_CLI_HELP_STDIN for a trace FILE) and the exit codes
 * (CS_CLI_HELP_EXIT).
 */
void     cs_cli_set_help      (GOptionContext *ctx,
                               const char     *description,
                               CsCliHelpInput  input);

/**
 * cs_cli_parse_options:
 * Runs @ctx over argc/argv (argv[0] = command name).  On a usage error prints it with the
 * command's help hint to stderr and returns FALSE (caller exits CS_CLI_EXIT_USAGE).
 */
gboolean cs_cli_parse_options (GOptionContext *ctx, int *argc, char ***argv);

/**
 * cs_cli_format_ms:
 * @ms: an estimated time in milliseconds
 *
 * The time in the unit that fits, 3 significant digits: "812 ns", "3.65 us", "1.14 ms",
 * "2.5 s", "4.2 min"; from an hour up the estimate cannot be one step's ("7.03e+08 h
 * (implausible for one step: check the trace's shapes)").  0 is "0 ms"; NaN or a negative
 * value "n/a".
 * Returns: (transfer full): the text
 */
char    *cs_cli_format_ms     (double ms);

/** Prints "castscope-cli: <message>" to stderr. */
void     cs_cli_error         (const char *fmt, ...) G_GNUC_PRINTF (1, 2);

G_END_DECLS
