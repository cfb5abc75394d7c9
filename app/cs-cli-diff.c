/* cs-cli-diff.c: `castscope-cli diff` (not built yet). */
#include "cs-config.h"

#include "cs-cli.h"

int
cs_cli_cmd_diff (int argc, char **argv)
{
  cs_cli_error ("'diff' is not available in this build yet");
  return CS_CLI_EXIT_USAGE;
}
