/* cs-window-run.c: CsWindow's Run: execute the shown forward and backward, then overlay
 * per-region time and per-tensor error on the graph and list them in the run table. */
#include "cs-config.h"

#include "cs-window-private.h"

/**
 * _cs_window_clear_run:
 *
 * Forgets the last run's overlay and table (the traces changed, so its values no longer
 * describe what is shown).
 */
void
_cs_window_clear_run (CsWindow *self)
{
  GtkWidget *child;

  if (self->run_cancellable != NULL)
    g_cancellable_cancel (self->run_cancellable);
  g_clear_object (&self->run_cancellable);
  for (CsFamily f = 0; f < CS_N_FAMILIES; f++)
    {
      g_clear_pointer (&self->run_node_values[f], g_hash_table_unref);
      g_clear_pointer (&self->run_edge_values[f], g_hash_table_unref);
      cs_graph_view_set_values (_cs_window_get_view (self, f), NULL, NULL, NULL);
    }
  g_clear_pointer (&self->run_title, g_free);
  g_clear_pointer (&self->last_run_summary, g_free);
  while ((child = gtk_widget_get_first_child (GTK_WIDGET (self->run_grid))) != NULL)
    gtk_grid_remove (self->run_grid, child);
  gtk_widget_set_visible (GTK_WIDGET (self->run_progress), FALSE);
}

/**
 * _cs_window_run:
 *
 * Runs the final forward and backward traces.
 */
void
_cs_window_run (CsWindow *self)
{
  cs_window_show_error (self, "Run is not available in this build: the CPU reference executor "
                              "(core/cs-ref.h) is not built in yet.");
}
