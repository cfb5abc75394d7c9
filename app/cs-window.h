/* cs-window.h: CsWindow, castscope's main window (one per open trace file). */
#pragma once

#include <gtk/gtk.h>

#include "cs-application.h"

G_BEGIN_DECLS

#define CS_TYPE_WINDOW (cs_window_get_type ())

G_DECLARE_FINAL_TYPE (CsWindow, cs_window, CS, WINDOW, GtkApplicationWindow)

CsWindow *cs_window_new        (CsApplication *application);
void      cs_window_open_file  (CsWindow      *self,
                                GFile         *file);
void      cs_window_show_error (CsWindow      *self,
                                const char    *message);
void      cs_window_compare_with_file (CsWindow *self,
                                       GFile    *file);

G_END_DECLS
