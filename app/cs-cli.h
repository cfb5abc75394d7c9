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
