/* cs-cli-render-none.c: `castscope-cli render` in a build without render/ (Graphviz or cairo
 * were not found at configure time). */
#include "cs-config.h"

#include "cs-cli.h"

int
cs_cli_cmd_render (int argc, char **argv)
{
  cs_cli_error ("render: this castscope-cli was built without rendering "
                "(Graphviz and cairo were not found; install libgraphviz-dev libcairo2-dev "
                "libpango1.0-dev and reconfigure)");
  return CS_CLI_EXIT_INPUT;
}
