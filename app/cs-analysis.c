/* cs-analysis.c: pipeline output arranged as forward/backward families (see cs-analysis.h). */
#include "cs-config.h"

#include "cs-analysis.h"
#include "cs-inductor.h"

#include <string.h>

#include "cs-lens.h"
#include "cs-print.h"
#include "cs-pipeline.h"
#include "cs-stats.h"

typedef struct
{
  const char *name;       /* pass name (static or owned by the pipeline) */
  CsTrace    *trace;      /* (owned ref) */
} CsAnalysisPass;

struct _CsAnalysis
{
  gint         ref_count;              /* atomic */
  CsPolicy     policy;                 /* the policy the traces were made under */
  CsPipeline  *forward_pipeline;       /* (nullable) pipeline over the file's first trace */
  CsPipeline  *backward_pipeline;      /* (nullable) pipeline over a backward_fn of the file */
  GArray      *passes[CS_N_FAMILIES];  /* element-type CsAnalysisPass, slider order */
  char        *warning;                /* (nullable) a non-fatal note for the info bar */
  gboolean     prepared;               /* the fields below were made (analysis_prepare()) */
  GPtrArray   *user_casts;             /* (nullable, owned) CsRemovedCast*: the user's casts
                                          the forward's remove-redundant-casts dropped */
  GPtrArray   *user_casts_keep;        /* (nullable, owned) CsTrace* (refs): the initial, fuse
                                          and remove-redundant-casts traces they borrow from */
  CsTraceStats *final_stats[CS_N_FAMILIES]; /* (nullable, owned) cs_stats_compute() of each
                                          family's final trace */
  char        *printed;                /* (nullable, owned) the forward's final trace printed
                                          (cs_analysis_print_with_ranges()), what the window
                                          shows first */
  GArray      *printed_ranges;         /* (nullable, owned) CsStmtRange of @printed */
};

static void
pass_clear (gpointer data)
{
  CsAnalysisPass *pass = data;

  g_clear_pointer (&pass->trace, cs_trace_unref);
}

static void
add_pass (CsAnalysis *self, CsFamily family, const char *name, CsTrace *trace)
{
  CsAnalysisPass pass = { name, cs_trace_ref (trace) };

  g_array_append_val (self->passes[family], pass);
}

/* Which families a pipeline pass belongs to.  Joint passes (before the split) are shown in
 * both; split-forward and delete-last-used only in the forward view; *-backward only in the
 * backward view (pass names from cs-pipeline.h). */
static void
pass_families (const char *name, gboolean *fwd, gboolean *bwd)
{
  gboolean is_bwd = g_str_has_suffix (name, "-backward");
  gboolean is_fwd = !is_bwd && (g_str_has_prefix (name, "split-")
                                || g_str_has_prefix (name, "delete-last-used"));

  *fwd = !is_bwd;
  *bwd = !is_fwd;
}

static gboolean
trace_is_backward (const CsTrace *trace)
{
  return trace->name != NULL && strcmp (trace->name, "backward_fn") == 0;
}

static char *inductor_arg;   /* cs_analysis_set_inductor(), or NULL */

void
cs_analysis_set_inductor (const char *arg)
{
  g_free (inductor_arg);
  inductor_arg = g_strdup (arg);
}

/* The output code for @list (a file of torch.compile graphs), or NULL with @error set. */
static CsInductorCode *
inductor_code_for (const CsTraceList *list, GError **error)
{
  g_autofree char *path = NULL;

  if (strcmp (inductor_arg, "auto") == 0)
    {
      path = list->path ? cs_inductor_sibling_path (list->path) : NULL;
      if (path == NULL || !g_file_test (path, G_FILE_TEST_EXISTS))
        {
          g_set_error (error, G_IO_ERROR, G_IO_ERROR_NOT_FOUND,
                       "--inductor auto: no output code beside %s (looked for %s)",
                       list->path ? list->path : "the input",
                       path ? path : "DIR/inductor/NAME.output_code for DIR/NAME.txt");
          return NULL;
        }
    }
  else
    path = g_strdup (inductor_arg);
  return cs_inductor_parse_file (path, error);
}

/* cs_pipeline_run(), or Inductor's regions for a torch.compile graph under --inductor. */
static CsPipeline *
run_pipeline (const CsTrace *trace, const CsPolicy *policy, const CsInductorCode *code,
              GError **error)
{
  if (code != NULL && trace->aten != NULL)
    return cs_pipeline_run_inductor (trace, policy, code, error);
  return cs_pipeline_run (trace, policy, NULL, error);
}

/**
 * cs_analysis_print_with_ranges:
 * @trace: a trace
 * @ranges: (element-type CsStmtRange): set to where each top-level statement lies in the text
 *   (character offsets)
 *
 * Prints @trace (cs_print_trace(), CS_PRINT_DEFAULT) and records where each top-level
 * statement lies in the text: each statement printed alone (cs_print_stmt_to at the body
 * indent) is found, in order, in the whole text.  Thread-safe (reads @trace only).
 * Returns: (transfer full): the text
 */
char *
cs_analysis_print_with_ranges (const CsTrace *trace, GArray *ranges)
{
  g_autofree char *text = cs_print_trace (trace, CS_PRINT_DEFAULT);
  const char *cursor = text;
  const char *counted = text;  /* char offsets are counted incrementally: O(text) in all */
  int counted_chars = 0;

  g_array_set_size (ranges, 0);
  for (guint i = 0; i < trace->n_stmts; i++)
    {
      const CsStmt *stmt = trace->stmts[i];
      g_autoptr(GString) one = g_string_new (NULL);
      const char *hit;
      CsStmtRange range;

      if (stmt->kind != CS_STMT_CALL && stmt->kind != CS_STMT_UNPACK
          && stmt->kind != CS_STMT_RETURN && stmt->kind != CS_STMT_ANNASSIGN)
        continue;
      cs_print_stmt_to (one, stmt, 2, CS_PRINT_DEFAULT);
      while (one->len > 0 && one->str[one->len - 1] == '\n')
        g_string_truncate (one, one->len - 1);
      if (one->len == 0)
        continue;
      hit = strstr (cursor, one->str);
      if (hit == NULL)
        continue;
      range.stmt_id = stmt->id;
      counted_chars += (int) g_utf8_pointer_to_offset (counted, hit);
      range.start = counted_chars;
      counted_chars += (int) g_utf8_pointer_to_offset (hit, hit + one->len);
      range.end = counted_chars;
      counted = hit + one->len;
      g_array_append_val (ranges, range);
      cursor = hit + one->len;
    }
  return g_steal_pointer (&text);
}

/* The index of pass @name in @family, or -1. */
static gint
pass_index (CsAnalysis *self, CsFamily family, const char *name)
{
  for (guint i = 0; i < self->passes[family]->len; i++)
    if (g_strcmp0 (g_array_index (self->passes[family], CsAnalysisPass, i).name, name) == 0)
      return (gint) i;
  return -1;
}

/* The final traces' stats and the printed final forward trace (analysis_prepare()). */
static gpointer
prepare_stats_and_text (gpointer data)
{
  CsAnalysis *self = data;

  for (CsFamily f = 0; f < CS_N_FAMILIES; f++)
    {
      CsTrace *final = cs_analysis_get_final (self, f);

      if (final != NULL)
        self->final_stats[f] = cs_stats_compute (final);
    }
  if (cs_analysis_get_final (self, CS_FAMILY_FORWARD) != NULL)
    {
      self->printed_ranges = g_array_new (FALSE, FALSE, sizeof (CsStmtRange));
      self->printed = cs_analysis_print_with_ranges (cs_analysis_get_final (self, CS_FAMILY_FORWARD),
                                                     self->printed_ranges);
    }
  return NULL;
}

/* What the window shows of every result besides its traces, made on the analysis's thread
 * (for a 100,000-statement trace the removed user casts take about a second): the user's
 * casts that remove-redundant-casts dropped (core/cs-lens.h), and on a second thread meanwhile
 * (the traces are only read) the final traces' stats and the printed final forward trace. */
static void
analysis_prepare (CsAnalysis *self)
{
  gint ii = pass_index (self, CS_FAMILY_FORWARD, "initial");
  gint fi = pass_index (self, CS_FAMILY_FORWARD, "fuse");
  gint ri = pass_index (self, CS_FAMILY_FORWARD, "remove-redundant-casts");
  GThread *other = g_thread_try_new ("cs-prepare", prepare_stats_and_text, self, NULL);

  if (ii >= 0 && fi >= 0 && ri >= 0)
    {
      CsTrace *t[3] = { cs_analysis_get_trace (self, CS_FAMILY_FORWARD, ii),
                        cs_analysis_get_trace (self, CS_FAMILY_FORWARD, fi),
                        cs_analysis_get_trace (self, CS_FAMILY_FORWARD, ri) };

      self->user_casts = cs_lens_removed_user_casts (t[0], t[1], t[2]);
      self->user_casts_keep = g_ptr_array_new_with_free_func ((GDestroyNotify) cs_trace_unref);
      for (guint k = 0; k < G_N_ELEMENTS (t); k++)
        g_ptr_array_add (self->user_casts_keep, cs_trace_ref (t[k]));
    }
  if (other != NULL)
    g_thread_join (other);
  else
    prepare_stats_and_text (self);
  self->prepared = TRUE;
}

/**
 * cs_analysis_new_for_list:
 * @list: (transfer none): the traces of a file (the first is the one transformed)
 * @policy: the cast policy to run the pipeline under
 * @error: return location for the pipeline's error
 *
 * Runs cs_pipeline_run() on the file's first trace under @policy and sorts its passes into the
 * forward and backward families.  A file that already holds final traces (e.g. Thunder's
 * printed forward followed by its `backward_fn`) is shown as is: the backward family then
 * holds the file's `backward_fn`.  Also makes what cs_analysis_get_user_casts(),
 * cs_analysis_get_final_stats() and cs_analysis_get_printed() return, so that the caller's
 * thread need not.  Thread-safe:
 * reads @list only.
 * Returns: (transfer full): the analysis, or NULL with @error set
 */
CsAnalysis *
cs_analysis_new_for_list (CsTraceList *list, const CsPolicy *policy, GError **error)
{
  g_autoptr(CsAnalysis) self = NULL;
  g_autoptr(CsInductorCode) code = NULL;
  CsTrace *first;
  CsTrace *file_backward = NULL;

  g_return_val_if_fail (list != NULL, NULL);
  g_return_val_if_fail (policy != NULL, NULL);

  if (list->traces->len == 0)
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "%s: the file holds no trace",
                   list->path ? list->path : "input");
      return NULL;
    }

  self = g_new0 (CsAnalysis, 1);
  self->ref_count = 1;
  self->policy = *policy;
  for (guint f = 0; f < CS_N_FAMILIES; f++)
    {
      self->passes[f] = g_array_new (FALSE, TRUE, sizeof (CsAnalysisPass));
      g_array_set_clear_func (self->passes[f], pass_clear);
    }

  first = g_ptr_array_index (list->traces, 0);
  if (inductor_arg != NULL && first->aten != NULL
      && (code = inductor_code_for (list, error)) == NULL)
    return NULL;
  for (guint i = 1; i < list->traces->len; i++)
    if (trace_is_backward (g_ptr_array_index (list->traces, i)))
      {
        file_backward = g_ptr_array_index (list->traces, i);
        break;
      }

  if (trace_is_backward (first))
    {
      /* A lone backward trace: nothing to run, show it in the backward view. */
      file_backward = first;
      first = NULL;
    }

  if (first != NULL)
    {
      guint n;

      self->forward_pipeline = run_pipeline (first, policy, code, error);
      if (self->forward_pipeline == NULL)
        return NULL;
      n = cs_pipeline_n_passes (self->forward_pipeline);
      for (guint i = 0; i < n; i++)
        {
          const char *name = cs_pipeline_pass_name (self->forward_pipeline, i);
          CsTrace *trace = cs_pipeline_get_trace (self->forward_pipeline, i);
          gboolean fwd, bwd;

          pass_families (name, &fwd, &bwd);
          if (fwd)
            add_pass (self, CS_FAMILY_FORWARD, name, trace);
          if (bwd && file_backward == NULL && !cs_pipeline_input_was_final (self->forward_pipeline))
            add_pass (self, CS_FAMILY_BACKWARD, name, trace);
        }
      /* Without grad the backward family holds only joint passes: drop them. */
      if (file_backward == NULL && cs_pipeline_get_backward (self->forward_pipeline) == NULL)
        g_array_set_size (self->passes[CS_FAMILY_BACKWARD], 0);
    }

  if (file_backward != NULL)
    {
      /* The file's backward_fn: the pipeline accepts a final trace as is (pass "initial"). */
      g_autoptr(GError) local_error = NULL;

      self->backward_pipeline = run_pipeline (file_backward, policy, code, &local_error);
      if (self->backward_pipeline != NULL)
        {
          guint n = cs_pipeline_n_passes (self->backward_pipeline);

          for (guint i = 0; i < n; i++)
            add_pass (self, CS_FAMILY_BACKWARD, cs_pipeline_pass_name (self->backward_pipeline, i),
                      cs_pipeline_get_trace (self->backward_pipeline, i));
        }
      else
        {
          add_pass (self, CS_FAMILY_BACKWARD, "as read", file_backward);
          self->warning = g_strdup (local_error->message);
        }
    }

  if (self->forward_pipeline != NULL && self->warning == NULL
      && cs_pipeline_attention_claimed_nothing (self->forward_pipeline))
    self->warning = g_strdup ("Attention “fused” claimed nothing: this trace has no "
                              "softmax(q @ kᵀ · scale) @ v pattern and no "
                              "scaled_dot_product_attention call, so it runs as before.");
  if (self->forward_pipeline != NULL && cs_pipeline_input_was_final (self->forward_pipeline)
      && self->warning == NULL)
    self->warning = g_strdup ("The trace is already final (fused or split): the cast policy "
                              "cannot change it.  Open an initial trace to explore policies.");

  analysis_prepare (self);
  return g_steal_pointer (&self);
}

/**
 * cs_analysis_new_as_read:
 * @list: (transfer none): the traces of a file
 * @policy: the policy in effect (recorded, not applied)
 *
 * The file's traces without any pass, for showing a file the pipeline cannot transform (an op
 * with no VJP rule, ...): the forward family holds the first trace that is not a
 * `backward_fn`, the backward family the first `backward_fn`; each has the one pass "as read".
 * Ops castscope does not know still draw (opaque nodes, cs-graph.h).
 * Returns: (transfer full): the analysis, or NULL when @list holds no trace
 */
CsAnalysis *
cs_analysis_new_as_read (CsTraceList *list, const CsPolicy *policy)
{
  CsAnalysis *self;

  g_return_val_if_fail (list != NULL, NULL);
  g_return_val_if_fail (policy != NULL, NULL);

  if (list->traces->len == 0)
    return NULL;
  self = g_new0 (CsAnalysis, 1);
  self->ref_count = 1;
  self->policy = *policy;
  for (guint f = 0; f < CS_N_FAMILIES; f++)
    {
      self->passes[f] = g_array_new (FALSE, TRUE, sizeof (CsAnalysisPass));
      g_array_set_clear_func (self->passes[f], pass_clear);
    }
  for (guint i = 0; i < list->traces->len; i++)
    {
      CsTrace *t = g_ptr_array_index (list->traces, i);
      CsFamily f = trace_is_backward (t) ? CS_FAMILY_BACKWARD : CS_FAMILY_FORWARD;

      if (self->passes[f]->len == 0)
        add_pass (self, f, "as read", t);
    }
  return self;
}

CsAnalysis *
cs_analysis_ref (CsAnalysis *analysis)
{
  g_return_val_if_fail (analysis != NULL, NULL);
  g_atomic_int_inc (&analysis->ref_count);
  return analysis;
}

void
cs_analysis_unref (CsAnalysis *analysis)
{
  g_return_if_fail (analysis != NULL);
  if (!g_atomic_int_dec_and_test (&analysis->ref_count))
    return;
  for (guint f = 0; f < CS_N_FAMILIES; f++)
    g_clear_pointer (&analysis->passes[f], g_array_unref);
  g_clear_pointer (&analysis->forward_pipeline, cs_pipeline_unref);
  g_clear_pointer (&analysis->backward_pipeline, cs_pipeline_unref);
  g_free (analysis->warning);
  g_clear_pointer (&analysis->user_casts, g_ptr_array_unref);
  g_clear_pointer (&analysis->user_casts_keep, g_ptr_array_unref);
  g_free (analysis->printed);
  g_clear_pointer (&analysis->printed_ranges, g_array_unref);
  for (guint f = 0; f < CS_N_FAMILIES; f++)
    g_clear_pointer (&analysis->final_stats[f], cs_trace_stats_free);
  g_free (analysis);
}

/** Returns: (transfer none): the policy @analysis was made under. */
const CsPolicy *
cs_analysis_get_policy (CsAnalysis *analysis)
{
  return &analysis->policy;
}

/** Number of slider positions of @family (0 when the family is empty, e.g. no backward). */
guint
cs_analysis_n_passes (CsAnalysis *analysis, CsFamily family)
{
  g_return_val_if_fail (family < CS_N_FAMILIES, 0);
  return analysis->passes[family]->len;
}

/** Returns: (transfer none) (nullable): the pass name at slider position @i of @family. */
const char *
cs_analysis_pass_name (CsAnalysis *analysis, CsFamily family, guint i)
{
  g_return_val_if_fail (family < CS_N_FAMILIES, NULL);
  if (i >= analysis->passes[family]->len)
    return NULL;
  return g_array_index (analysis->passes[family], CsAnalysisPass, i).name;
}

/** Returns: (transfer none) (nullable): the trace at slider position @i of @family. */
CsTrace *
cs_analysis_get_trace (CsAnalysis *analysis, CsFamily family, guint i)
{
  g_return_val_if_fail (family < CS_N_FAMILIES, NULL);
  if (i >= analysis->passes[family]->len)
    return NULL;
  return g_array_index (analysis->passes[family], CsAnalysisPass, i).trace;
}

/** Returns: (transfer none) (nullable): the last trace of @family (what runs). */
CsTrace *
cs_analysis_get_final (CsAnalysis *analysis, CsFamily family)
{
  guint n = cs_analysis_n_passes (analysis, family);

  return n ? cs_analysis_get_trace (analysis, family, n - 1) : NULL;
}

/**
 * cs_analysis_get_user_casts:
 * @casts: (out) (transfer none) (nullable): CsRemovedCast*, cs_lens_removed_user_casts() of
 *   the forward's initial, fuse and remove-redundant-casts traces; NULL when the family lacks
 *   one of those passes
 * @keep: (out) (transfer none) (nullable): CsTrace*: those three traces
 *
 * Returns: FALSE when @analysis did not make them (cs_analysis_new_as_read()): the caller
 *   computes them itself
 */
gboolean
cs_analysis_get_user_casts (CsAnalysis *analysis, GPtrArray **casts, GPtrArray **keep)
{
  *casts = analysis->user_casts;
  *keep = analysis->user_casts_keep;
  return analysis->prepared;
}

/**
 * cs_analysis_get_final_stats:
 * Returns: (transfer none) (nullable): cs_stats_compute() of @family's final trace, made with
 *   the analysis (NULL for cs_analysis_new_as_read() or an empty family)
 */
const CsTraceStats *
cs_analysis_get_final_stats (CsAnalysis *analysis, CsFamily family)
{
  g_return_val_if_fail (family < CS_N_FAMILIES, NULL);
  return analysis->final_stats[family];
}

/**
 * cs_analysis_get_printed:
 * @trace: a trace of @analysis
 * @ranges: (out) (transfer none): where each top-level statement lies in the text
 *
 * Returns: (transfer none) (nullable): @trace printed with the analysis
 *   (cs_analysis_print_with_ranges(): the forward's final trace), or NULL for another trace
 */
const char *
cs_analysis_get_printed (CsAnalysis *analysis, const CsTrace *trace, const GArray **ranges)
{
  *ranges = NULL;
  if (analysis->printed == NULL || trace != cs_analysis_get_final (analysis, CS_FAMILY_FORWARD))
    return NULL;
  *ranges = analysis->printed_ranges;
  return analysis->printed;
}

/** Returns: (transfer none) (nullable): a note for the info bar (e.g. "already final"). */
const char *
cs_analysis_get_warning (CsAnalysis *analysis)
{
  return analysis->warning;
}

typedef struct
{
  CsTraceList *list;    /* (owned ref) */
  CsPolicy     policy;  /* the policy to run the pipeline under (a copy) */
} AnalysisJob;

static void
analysis_job_free (gpointer data)
{
  AnalysisJob *job = data;

  g_clear_pointer (&job->list, cs_trace_list_unref);
  g_free (job);
}

static void
analysis_thread (GTask        *task,
                 gpointer      source_object,
                 gpointer      task_data,
                 GCancellable *cancellable)
{
  AnalysisJob *job = task_data;
  GError *error = NULL;
  CsAnalysis *analysis = cs_analysis_new_for_list (job->list, &job->policy, &error);

  if (analysis == NULL)
    g_task_return_error (task, error);
  else
    g_task_return_pointer (task, analysis, (GDestroyNotify) cs_analysis_unref);
}

/**
 * cs_analysis_new_async:
 * @list: (transfer none): the file's traces (a reference is taken)
 * @policy: the cast policy (copied)
 * @cancellable: (nullable): cancels the delivery (the pipeline itself runs to its end)
 * @callback: called on the calling thread's main context
 * @user_data: data for @callback
 *
 * cs_analysis_new_for_list() on a worker thread (GTask), so the GTK thread never blocks on the
 * pipeline.
 */
void
cs_analysis_new_async (CsTraceList        *list,
                       const CsPolicy     *policy,
                       GCancellable       *cancellable,
                       GAsyncReadyCallback callback,
                       gpointer            user_data)
{
  g_autoptr(GTask) task = g_task_new (NULL, cancellable, callback, user_data);
  AnalysisJob *job = g_new0 (AnalysisJob, 1);

  job->list = cs_trace_list_ref (list);
  job->policy = *policy;
  g_task_set_source_tag (task, cs_analysis_new_async);
  g_task_set_task_data (task, job, analysis_job_free);
  g_task_set_return_on_cancel (task, TRUE);
  g_task_run_in_thread (task, analysis_thread);
}

/**
 * cs_analysis_new_finish:
 * Returns: (transfer full): the analysis, or NULL with @error set (G_IO_ERROR_CANCELLED when
 * cancelled)
 */
CsAnalysis *
cs_analysis_new_finish (GAsyncResult *result, GError **error)
{
  return g_task_propagate_pointer (G_TASK (result), error);
}
