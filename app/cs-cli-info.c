/* cs-cli-info.c: `castscope-cli info` (not built yet). */
#include "cs-config.h"

#include "cs-cli.h"

int
cs_cli_cmd_info (int argc, char **argv)
{
  cs_cli_error ("'info' is not available in this build yet");
  return CS_CLI_EXIT_USAGE;
}
