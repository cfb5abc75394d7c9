/* cs-window-compare.c: the side-by-side compare with another file: Thunder's trace of a
 * function beside torch.compile's graphs of the same function (issue 22), or any two traces.
 *
 * The other file is parsed and run through the pipeline under the window's policy on a worker
 * thread (and again whenever the policy changes); the compare view then shows its trace of the
 * visible family (forward or backward) at the pass of the same name, else its final trace, on
 * the left.  The two traces share no names or origins, so the sides are matched by
 * core/cs-aten-match.h: cast for cast and region for region; the label says how many of each
 * side's casts and regions match, and selecting a matched cast or region on either side selects
 * its twin on the other.
 */
#include "cs-config.h"

#include "cs-window-private.h"

#include "cs-aten.h"
#include "cs-aten-match.h"
#include "cs-parse.h"

static void
compare_done_cb (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(CsWindow) self = user_data;
  CsWindowFileJob *job = g_task_get_task_data (G_TASK (result));

  _cs_window_job_end (self);
  if (job->generation != self->compare_generation)
    return;
  if (job->analysis == NULL)
    {
      g_autofree char *base = g_file_get_basename (job->file);
      g_autofree char *msg = g_strdup_printf ("Cannot compare with %s: %s", base,
                                              job->error ? job->error->message : "no trace");
      cs_window_show_error (self, msg);
      return;
    }
  g_set_object (&self->compare_file, job->file);
  if (job->list != NULL && job->list != self->compare_traces)
    {
      g_clear_pointer (&self->compare_traces, cs_trace_list_unref);
      self->compare_traces = cs_trace_list_ref (job->list);
    }
  g_clear_pointer (&self->compare_analysis, cs_analysis_unref);
  self->compare_analysis = g_steal_pointer (&job->analysis);
  if (!self->comparing)
    g_action_group_change_action_state (G_ACTION_GROUP (self), "compare",
                                        g_variant_new_boolean (TRUE));
  else
    _cs_window_update_compare (self);
}

static void
compare_start (CsWindow *self, GFile *file, CsTraceList *list)
{
  g_autoptr(GTask) task = NULL;
  CsWindowFileJob *job;

  if (self->compare_cancellable != NULL)
    g_cancellable_cancel (self->compare_cancellable);
  g_set_object (&self->compare_cancellable, g_cancellable_new ());
  g_object_unref (self->compare_cancellable);
  job = g_new0 (CsWindowFileJob, 1);
  job->file = g_object_ref (file);
  job->list = list ? cs_trace_list_ref (list) : NULL;
  job->policy = self->policy;
  job->generation = ++self->compare_generation;
  task = g_task_new (NULL, self->compare_cancellable, compare_done_cb, g_object_ref (self));
  g_task_set_task_data (task, job, _cs_window_file_job_free);
  _cs_window_job_begin (self);
  g_task_run_in_thread (task, _cs_window_file_job_thread);
}

/**
 * cs_window_compare_with_file:
 * @self: a #CsWindow
 * @file: a local trace file: a Thunder trace or torch.compile's graphs of the function the
 *   window shows
 *
 * Shows @file's trace of the visible family left of the window's graphs, matched cast for cast
 * and region for region (see the file comment); errors go to the window's info bar and keep
 * the compare as it was.
 */
void
cs_window_compare_with_file (CsWindow *self, GFile *file)
{
  g_return_if_fail (CS_IS_WINDOW (self));
  g_return_if_fail (G_IS_FILE (file));
  compare_start (self, file, NULL);
}

/**
 * _cs_window_compare_recompute:
 *
 * Re-runs the compared file under the window's (new) policy, so that both sides show the same
 * policy; nothing when no file is compared.
 */
void
_cs_window_compare_recompute (CsWindow *self)
{
  if (self->compare_file != NULL && self->compare_traces != NULL)
    compare_start (self, self->compare_file, self->compare_traces);
}

/**
 * _cs_window_compare_close_file:
 *
 * Ends the compare with another file: the compare view goes back to the previous policy or the
 * pass before (when it is shown).
 */
void
_cs_window_compare_close_file (CsWindow *self)
{
  if (self->compare_cancellable != NULL)
    g_cancellable_cancel (self->compare_cancellable);
  self->compare_generation++;
  g_clear_object (&self->compare_file);
  g_clear_pointer (&self->compare_traces, cs_trace_list_unref);
  g_clear_pointer (&self->compare_analysis, cs_analysis_unref);
  g_clear_pointer (&self->compare_match, cs_trace_match_free);
  _cs_window_update_compare (self);
}

/* "torch.compile" or "Thunder" for what @list holds */
static const char *
format_name (CsTraceList *list)
{
  return list && list->traces->len > 0 && cs_trace_aten_role (list->traces->pdata[0]) >= 0
         ? "torch.compile" : "Thunder";
}

/**
 * _cs_window_compare_file_trace:
 * @now: the trace the window shows (the right side)
 * @label: (out) (transfer full): what the compare label says
 *
 * The compared file's trace for the right side @now (the same family, the pass of the same
 * name, else the final trace), and the match of the two sides (kept in self->compare_match).
 * Returns: (transfer none) (nullable): the left side's trace, NULL when no file is compared
 */
CsTrace *
_cs_window_compare_file_trace (CsWindow *self, CsTrace *now, char **label)
{
  CsFamily f = _cs_window_get_family (self);
  CsTrace *base = NULL;
  guint n;
  g_autofree char *left = NULL;
  g_autofree char *right = NULL;
  const CsTraceMatch *m;

  *label = NULL;
  g_clear_pointer (&self->compare_match, cs_trace_match_free);
  if (self->compare_analysis == NULL)
    return NULL;
  n = cs_analysis_n_passes (self->compare_analysis, f);
  for (guint i = 0; i < n && base == NULL; i++)
    if (g_strcmp0 (cs_analysis_pass_name (self->compare_analysis, f, i), now->pass) == 0)
      base = cs_analysis_get_trace (self->compare_analysis, f, i);
  if (base == NULL)
    base = cs_analysis_get_final (self->compare_analysis, f);
  left = g_file_get_basename (self->compare_file);
  right = self->file ? g_file_get_basename (self->file) : g_strdup ("this trace");
  if (base == NULL)
    {
      *label = g_strdup_printf ("%s (%s) has no %s trace", left, format_name (self->compare_traces),
                                f == CS_FAMILY_BACKWARD ? "backward" : "forward");
      return NULL;
    }
  self->compare_match = cs_trace_match_new (base, now);
  m = self->compare_match;
  *label = g_strdup_printf ("%s %s (left) | %s %s (right)\ncasts %u | %u, %u matched · "
                            "regions %u | %u, %u matched",
                            format_name (self->compare_traces), left, format_name (self->traces),
                            right, m->n_casts_a, m->n_casts_b, m->casts->len, m->n_regions_a,
                            m->n_regions_b, m->regions->len);
  return base;
}

/**
 * _cs_window_compare_match:
 * @to_left: %TRUE to map an id of the right side (the window's trace) to the left side
 * @id: a statement id of the other side
 *
 * The element matching @id on the other side of the compare: through self->compare_match when
 * another file is compared, else cs_graph_view_match().
 * Returns: the id, 0 when nothing matches
 */
guint32
_cs_window_compare_match (CsWindow *self, gboolean to_left, guint32 id)
{
  CsGraphView *view = _cs_window_get_view (self, _cs_window_get_family (self));

  if (self->compare_analysis != NULL)
    return self->compare_match ? cs_trace_match_lookup (self->compare_match, !to_left, id) : 0;
  return to_left ? cs_graph_view_match (self->compare_view, view, id)
                 : cs_graph_view_match (view, self->compare_view, id);
}

/* win.compare-file: a file chooser for the file to compare with */
static void
compare_file_response_cb (GtkNativeDialog *dialog, int response, CsWindow *self)
{
  if (response == GTK_RESPONSE_ACCEPT)
    {
      g_autoptr(GFile) file = gtk_file_chooser_get_file (GTK_FILE_CHOOSER (dialog));

      if (file != NULL)
        cs_window_compare_with_file (self, file);
    }
  g_object_unref (dialog);
}

static void
compare_file_activated (GSimpleAction *action, GVariant *param, gpointer user_data)
{
  CsWindow *self = CS_WINDOW (user_data);
  GtkFileChooserNative *dialog;
  g_autoptr(GtkFileFilter) traces = gtk_file_filter_new ();
  g_autoptr(GtkFileFilter) all = gtk_file_filter_new ();

  dialog = gtk_file_chooser_native_new ("Compare With", GTK_WINDOW (self),
                                        GTK_FILE_CHOOSER_ACTION_OPEN, "_Compare", "_Cancel");
  gtk_file_filter_set_name (traces, "Thunder traces and torch.compile graphs (*.txt, *.py)");
  gtk_file_filter_add_pattern (traces, "*.txt");
  gtk_file_filter_add_pattern (traces, "*.py");
  gtk_file_filter_add_pattern (traces, "*.log");
  gtk_file_chooser_add_filter (GTK_FILE_CHOOSER (dialog), traces);
  gtk_file_filter_set_name (all, "All files");
  gtk_file_filter_add_pattern (all, "*");
  gtk_file_chooser_add_filter (GTK_FILE_CHOOSER (dialog), all);
  g_signal_connect (dialog, "response", G_CALLBACK (compare_file_response_cb), self);
  gtk_native_dialog_show (GTK_NATIVE_DIALOG (dialog));
}

static void
compare_close_file_activated (GSimpleAction *action, GVariant *param, gpointer user_data)
{
  _cs_window_compare_close_file (CS_WINDOW (user_data));
}

static const GActionEntry compare_actions[] = {
  { "compare-file", compare_file_activated, NULL, NULL, NULL },
  { "compare-close-file", compare_close_file_activated, NULL, NULL, NULL },
};

/**
 * _cs_window_init_compare_actions:
 *
 * Adds win.compare-file (choose a file to compare with) and win.compare-close-file.
 */
void
_cs_window_init_compare_actions (CsWindow *self)
{
  g_action_map_add_action_entries (G_ACTION_MAP (self), compare_actions,
                                   G_N_ELEMENTS (compare_actions), self);
}
