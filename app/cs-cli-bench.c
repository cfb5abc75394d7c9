/* cs-cli-bench.c: `castscope-cli bench` (not built yet). */
#include "cs-config.h"

#include "cs-cli.h"

int
cs_cli_cmd_bench (int argc, char **argv)
{
  cs_cli_error ("'bench' is not available in this build yet");
  return CS_CLI_EXIT_USAGE;
}
