/* cs-cli-stats.c: `castscope-cli stats` (not built yet). */
#include "cs-config.h"

#include "cs-cli.h"

int
cs_cli_cmd_stats (int argc, char **argv)
{
  cs_cli_error ("'stats' is not available in this build yet");
  return CS_CLI_EXIT_USAGE;
}
