/* cs-cli-print.c: `castscope-cli print` (not built yet). */
#include "cs-config.h"

#include "cs-cli.h"

int
cs_cli_cmd_print (int argc, char **argv)
{
  cs_cli_error ("'print' is not available in this build yet");
  return CS_CLI_EXIT_USAGE;
}
