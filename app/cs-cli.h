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

/** Prints "castscope-cli: <message>" to stderr. */
void     cs_cli_error         (const char *fmt, ...) G_GNUC_PRINTF (1, 2);

G_END_DECLS
