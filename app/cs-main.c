/* cs-main.c: entry point of `castscope`, the desktop app.
 *
 *   castscope [FILE...]   open traces (none: the bundled seed sample)
 */
#include "cs-config.h"

#include <locale.h>

#include <gtk/gtk.h>

#include "cs-application.h"

int
main (int argc, char **argv)
{
  g_autoptr(CsApplication) app = NULL;

  /* GTK would reset LC_NUMERIC in gtk_init(); keep ours. */
  gtk_disable_setlocale ();
  setlocale (LC_ALL, "");
  /* Numbers in traces are always printed the Python way. */
  setlocale (LC_NUMERIC, "C");
  g_set_application_name ("castscope");

  app = cs_application_new (G_APPLICATION_DEFAULT_FLAGS);
  return g_application_run (G_APPLICATION (app), argc, argv);
}
