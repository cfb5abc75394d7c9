/* cs-cli-render.c: `castscope-cli render` (not built yet). */
#include "cs-config.h"

#include "cs-cli.h"

int
cs_cli_cmd_render (int argc, char **argv)
{
  cs_cli_error ("'render' is not available in this build yet");
  return CS_CLI_EXIT_USAGE;
}
