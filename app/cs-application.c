/* cs-application.c: the castscope GtkApplication (see cs-application.h).
 *
 * Modelled on GNOME Text Editor's EditorApplication: app-wide actions and accelerators are set
 * up in startup; activate opens the seed sample; open opens one window per file.
 */
#include "cs-config.h"

#include "cs-application.h"
#include "cs-analysis.h"
#include "cs-window.h"

struct _CsApplication
{
  GtkApplication parent_instance;
};

G_DEFINE_FINAL_TYPE (CsApplication, cs_application, GTK_TYPE_APPLICATION)

/**
 * cs_application_dup_seed_path:
 *
 * Locates the bundled seed sample `seed_foo.txt`: `$CS_DATA_DIR` when set (tests), then the
 * source tree's data/ (CS_SOURCE_DATADIR, for running from the build folder), then the
 * installed `$datadir/castscope`.
 *
 * Returns: (transfer full) (nullable): the path of an existing file, or NULL when none exists
 */
char *
cs_application_dup_seed_path (void)
{
  const char *env = g_getenv ("CS_DATA_DIR");
  g_autofree char *installed = g_build_filename (CS_INSTALL_DATADIR, "castscope", NULL);
  const char *dirs[] = { env, CS_SOURCE_DATADIR, installed };

  for (gsize i = 0; i < G_N_ELEMENTS (dirs); i++)
    {
      g_autofree char *path = NULL;

      if (dirs[i] == NULL || dirs[i][0] == '\0')
        continue;
      path = g_build_filename (dirs[i], "seed_foo.txt", NULL);
      if (g_file_test (path, G_FILE_TEST_IS_REGULAR))
        return g_steal_pointer (&path);
    }
  return NULL;
}

static void
cs_application_activate (GApplication *app)
{
  GtkWindow *window = gtk_application_get_active_window (GTK_APPLICATION (app));

  if (window == NULL)
    {
      g_autofree char *seed = cs_application_dup_seed_path ();
      CsWindow *win = cs_window_new (CS_APPLICATION (app));

      if (seed != NULL)
        {
          g_autoptr(GFile) file = g_file_new_for_path (seed);
          cs_window_open_file (win, file);
        }
      else
        cs_window_show_error (win, "The bundled sample trace seed_foo.txt was not found; "
                                   "open a trace with Open (Ctrl+O).");
      window = GTK_WINDOW (win);
    }
  gtk_window_present (window);
}

static void
cs_application_open (GApplication  *app,
                     GFile        **files,
                     int            n_files,
                     const char    *hint)
{
  for (int i = 0; i < n_files; i++)
    {
      CsWindow *win = cs_window_new (CS_APPLICATION (app));

      cs_window_open_file (win, files[i]);
      gtk_window_present (GTK_WINDOW (win));
    }
}

static void
quit_activated (GSimpleAction *action,
                GVariant      *param,
                gpointer       user_data)
{
  g_application_quit (G_APPLICATION (user_data));
}

static void
about_activated (GSimpleAction *action,
                 GVariant      *param,
                 gpointer       user_data)
{
  static const char *authors[] = { "The castscope developers", NULL };
  GtkWindow *parent = gtk_application_get_active_window (GTK_APPLICATION (user_data));

  gtk_show_about_dialog (parent,
                         "program-name", "castscope",
                         "version", CS_VERSION,
                         "comments", "Explore Lightning Thunder traces: where casts land, "
                                     "why fusion regions split, and what it costs on a GPU.",
                         "license-type", GTK_LICENSE_MIT_X11,
                         "authors", authors,
                         "logo-icon-name", "castscope",
                         NULL);
}

static const GActionEntry app_actions[] = {
  { "quit", quit_activated, NULL, NULL, NULL },
  { "about", about_activated, NULL, NULL, NULL },
};

static void
cs_application_startup (GApplication *app)
{
  static const struct { const char *action; const char *accels[3]; } accels[] = {
    { "app.quit",        { "<Control>q", NULL } },
    { "win.open",        { "<Control>o", NULL } },
    { "win.export",      { "<Control>e", NULL } },
    { "win.find",        { "<Control>f", NULL } },
    { "win.run",         { "F5", NULL } },
    { "win.first-divergence", { "<Control>d", NULL } },
    { "win.zoom-in",     { "<Control>plus", "<Control>equal", NULL } },
    { "win.zoom-out",    { "<Control>minus", NULL } },
    { "win.zoom-fit",    { "<Control>0", NULL } },
    { "win.legend",      { "<Control>l", NULL } },
    { "win.precision-lens", { "<Control>p", NULL } },
    { "win.compare",     { "<Control>k", NULL } },
    { "win.close",       { "<Control>w", NULL } },
  };

  G_APPLICATION_CLASS (cs_application_parent_class)->startup (app);

  g_action_map_add_action_entries (G_ACTION_MAP (app), app_actions,
                                   G_N_ELEMENTS (app_actions), app);
  for (gsize i = 0; i < G_N_ELEMENTS (accels); i++)
    gtk_application_set_accels_for_action (GTK_APPLICATION (app), accels[i].action,
                                           accels[i].accels);
}

/* --inductor FILE|auto: the regions of torch.compile graphs are Inductor's kernels
 * (cs_analysis_set_inductor()). */
static gint
cs_application_handle_local_options (GApplication *app, GVariantDict *options)
{
  const char *inductor = NULL;

  if (g_variant_dict_lookup (options, "inductor", "&s", &inductor))
    cs_analysis_set_inductor (inductor);
  return -1;
}

static void
cs_application_class_init (CsApplicationClass *klass)
{
  GApplicationClass *app_class = G_APPLICATION_CLASS (klass);

  app_class->handle_local_options = cs_application_handle_local_options;
  app_class->activate = cs_application_activate;
  app_class->open = cs_application_open;
  app_class->startup = cs_application_startup;
}

static void
cs_application_init (CsApplication *self)
{
  static const GOptionEntry entries[] = {
    { "inductor", 0, 0, G_OPTION_ARG_STRING, NULL,
      "torch.compile graphs: draw Inductor's kernels as the regions, read from the "
      "TORCH_LOGS=output_code text of the same compile ('auto': DIR/inductor/NAME.output_code "
      "for DIR/NAME.txt)", "FILE|auto" },
    { NULL },
  };

  g_application_add_main_option_entries (G_APPLICATION (self), entries);
  /* the usage line of --help: castscope [OPTION…] [FILE…] */
  g_application_set_option_context_parameter_string (G_APPLICATION (self), "[FILE…]");
  g_application_set_option_context_summary (G_APPLICATION (self),
                                             "Open Thunder traces (one window per FILE; "
                                             "none: the bundled sample).");
}

/**
 * cs_application_new:
 * @flags: #G_APPLICATION_DEFAULT_FLAGS for the real app; tests add #G_APPLICATION_NON_UNIQUE
 *   so that parallel test processes never hand off to one primary instance
 *   (reference/recipes.md 2(b))
 *
 * Returns: (transfer full): the application, id `org.castscope.Castscope`, able to open files
 */
CsApplication *
cs_application_new (GApplicationFlags flags)
{
  return g_object_new (CS_TYPE_APPLICATION,
                       "application-id", "org.castscope.Castscope",
                       "flags", flags | G_APPLICATION_HANDLES_OPEN,
                       "resource-base-path", "/org/castscope/Castscope",
                       NULL);
}
