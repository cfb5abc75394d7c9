/* cs-application.h: CsApplication, the GtkApplication of the `castscope` desktop app.
 *
 * Opens one CsWindow per file given on the command line (or through GApplication's open);
 * with no file it opens the bundled seed sample (cs_application_dup_seed_path()).
 */
#pragma once

#include <gtk/gtk.h>

G_BEGIN_DECLS

#define CS_TYPE_APPLICATION (cs_application_get_type ())

G_DECLARE_FINAL_TYPE (CsApplication, cs_application, CS, APPLICATION, GtkApplication)

CsApplication *cs_application_new            (GApplicationFlags  flags);
char          *cs_application_dup_seed_path  (void);

G_END_DECLS
