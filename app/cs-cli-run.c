/* cs-cli-run.c: `castscope-cli run` (not built yet). */
#include "cs-config.h"

#include "cs-cli.h"

int
cs_cli_cmd_run (int argc, char **argv)
{
  cs_cli_error ("'run' is not available in this build yet");
  return CS_CLI_EXIT_USAGE;
}
