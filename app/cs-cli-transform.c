/* cs-cli-transform.c: `castscope-cli transform` (not built yet). */
#include "cs-config.h"

#include "cs-cli.h"

int
cs_cli_cmd_transform (int argc, char **argv)
{
  cs_cli_error ("'transform' is not available in this build yet");
  return CS_CLI_EXIT_USAGE;
}
