/* cs-window-run.c: CsWindow's Run: execute the shown forward and backward, then overlay the
 * per-tensor error against f64 or the per-region time on the graph, and list both in the run
 * table.
 *
 * Executors, on a worker thread (GTask):
 * - core's CPU reference (core/cs-ref.h), always: each trace runs twice on the same random
 *   inputs, CS_REF_EXACT (trace dtypes, bf16/f16 rounding after every prim, as the GPU stores
 *   values) and CS_REF_F64 (the ground truth).  The backward takes the forward's returned
 *   tensors (saved_for_backward) by name plus random cotangents; its f64 run takes the f64
 *   forward's tensors, so its error includes the forward's.
 * - the CUDA executor (kernels/, loaded at run time through app/cs-cuda-loader.h) when the
 *   module loads and a device answers: the same inputs are copied to the GPU, its outputs are
 *   judged as PyTorch's accuracy check does (core/cs-compare.h): error against the f64 run vs
 *   the exact-dtype run's, and per-step times (CUDA events, CUDA-graph replay) give each
 *   region's time.  Without a GPU the region times are the H200 roofline estimate of
 *   core/cs-stats.h, and the table says so.
 *
 * The run table shows what `castscope-cli run` prints, under the same names: err (RMSE vs
 * f64), ref_err (the exact-dtype run's for GPU rows, the rounding floor for CPU rows: in the
 * cell's tooltip), ratio and the verdict, worst first, right after the tensor's name, then its
 * type and range check; long names are ellipsized and the table scrolls sideways.
 *
 * Before anything runs, the step's peak host memory and its work are estimated from the
 * traces (core/cs-ref-plan.h) and a step over the limits (75% of the memory available, the
 * CLI's default 200 GFLOP) is refused with both numbers in the info bar.  While it runs, the
 * progress bar names the statement (forward/backward, trace dtypes/f64) and Cancel stops the
 * CPU reference within a fraction of a second (its cancel flag is read before every statement
 * and between matmul row blocks); a GPU compile in progress finishes first.
 */
#include "cs-config.h"

#include "cs-window-private.h"

#include <math.h>
#include <string.h>

#include "cs-compare.h"
#include "cs-cuda-loader.h"
#include "cs-lens.h"
#include "cs-ops.h"
#include "cs-ref.h"
#include "cs-ref-plan.h"
#include "cs-stats.h"
#include "cs-tensor.h"

/* The seed of `castscope-cli run` (its --seed default): the forward's random inputs and random
 * prims from seed 0, the backward's from seed 1, so the run table shows the CLI's numbers. */
#define RUN_SEED   0u
#define TIME_ITERS 20

typedef struct
{
  CsFamily  family;        /* the trace it belongs to: forward or backward */
  gboolean  gpu;           /* measured on the GPU (else the CPU reference in trace dtypes) */
  char     *name;          /* tensor (proxy) name */
  char     *type;          /* "bf16[8, 16]" */
  guint32   stmt_id;       /* top-level statement producing it, 0 = none */
  guint32   inner_id;      /* the statement at any depth producing it (a region's prim), or
                            * stmt_id; 0 = none */
  CsAccuracy acc;          /* err, ref_err, ratio, verdict (cs_accuracy_judge) */
  CsLensRange range;       /* dynamic range of the f64 (true) values (cs_lens_range) */
} RunRow;

typedef struct
{
  CsFamily  family;        /* the trace the step or region belongs to */
  char     *name;          /* region callee ("nvFusion0") or step label */
  guint32   stmt_id;       /* top-level statement it times, 0 = none */
  guint     n_ops;         /* prims in the region (0 for matmul steps) */
  double    ms;            /* measured median (GPU) or roofline estimate, ms */
  double    bytes;         /* bytes read + written */
} RunTime;

typedef struct
{
  CsWindow  *self;          /* (owned) for progress reports */
  CsTrace   *trace[CS_N_FAMILIES]; /* (owned, nullable) final traces */
  CsPolicy   policy;        /* for the GPU program (tf32) */
  GArray    *rows;          /* element-type RunRow */
  GArray    *times;         /* element-type RunTime */
  gboolean   gpu_ran;       /* the GPU run succeeded */
  char      *device;        /* "NVIDIA H200" or "CPU reference" */
  double     wall_ms;       /* wall time of the whole job, ms */
  double     gpu_step_ms;   /* GPU: median step time (graph replay), ms */
  char      *note;          /* (nullable) what could not be run, for the info bar */
  char      *gpu_note;      /* (nullable) why the GPU was not used */
  guint      generation;    /* the window's generation when the run started */
  GCancellable *cancellable; /* (owned) the run's; the window's run_cancellable while it is
                               the newest run */
  gint       cancel;        /* atomic: nonzero once @cancellable fired (read by the CPU
                               reference between statements and matmul row blocks) */
  gint64     last_progress_us; /* monotonic time of the last statement progress report */
} RunJob;

typedef struct
{
  CsWindow *self;           /* (owned) */
  double    fraction;       /* 0..1 */
  char     *text;           /* (owned) the progress bar's text */
} RunProgress;

static void
run_row_clear (gpointer data)
{
  RunRow *row = data;

  g_free (row->name);
  g_free (row->type);
}

static void
run_time_clear (gpointer data)
{
  g_free (((RunTime *) data)->name);
}

static void
run_job_free (gpointer data)
{
  RunJob *job = data;

  g_clear_object (&job->self);
  for (CsFamily f = 0; f < CS_N_FAMILIES; f++)
    g_clear_pointer (&job->trace[f], cs_trace_unref);
  g_clear_pointer (&job->rows, g_array_unref);
  g_clear_pointer (&job->times, g_array_unref);
  g_free (job->device);
  g_free (job->note);
  g_free (job->gpu_note);
  g_clear_object (&job->cancellable);
  g_free (job);
}

static gboolean
progress_idle (gpointer data)
{
  RunProgress *p = data;

  if (p->self->run_progress == NULL)
    return G_SOURCE_REMOVE;   /* the window closed */
  gtk_widget_set_visible (GTK_WIDGET (p->self->run_progress), TRUE);
  gtk_progress_bar_set_fraction (p->self->run_progress, p->fraction);
  gtk_progress_bar_set_text (p->self->run_progress, p->text);
  return G_SOURCE_REMOVE;
}

static void
progress_free (gpointer data)
{
  RunProgress *p = data;

  g_object_unref (p->self);
  g_free (p->text);
  g_free (p);
}

static void
report_progress (RunJob *job, double fraction, const char *text)
{
  RunProgress *p = g_new0 (RunProgress, 1);

  p->self = g_object_ref (job->self);
  p->fraction = fraction;
  p->text = g_strdup (text);
  g_main_context_invoke_full (NULL, G_PRIORITY_DEFAULT, progress_idle, p, progress_free);
}

static gboolean
writes (const CsStmt *stmt, const char *name)
{
  g_autoptr(GPtrArray) outs = g_ptr_array_new ();

  cs_stmt_collect_outputs (stmt, outs);
  for (guint k = 0; k < outs->len; k++)
    if (strcmp (((const CsProxy *) g_ptr_array_index (outs, k))->name, name) == 0)
      return TRUE;
  return FALSE;
}

/* The innermost subsymbol of @stmt (which writes @name) that writes @name: the prim of a region
 * that makes a region output. */
static guint32
inner_writer (const CsStmt *stmt, const char *name)
{
  for (guint i = stmt->n_subs; i > 0; i--)
    {
      const CsStmt *sub = stmt->subs[i - 1];

      if (sub->kind == CS_STMT_CALL && writes (sub, name))
        return inner_writer (sub, name);
    }
  return stmt->id;
}

/* The top-level statement of @trace whose outputs include @name (0 = none); @inner: the
 * statement at any depth that writes it. */
static guint32
producer_of_deep (const CsTrace *trace, const char *name, guint32 *inner)
{
  if (inner != NULL)
    *inner = 0;
  for (guint i = 0; trace != NULL && i < trace->n_stmts; i++)
    {
      const CsStmt *stmt = trace->stmts[i];

      if (stmt->kind != CS_STMT_CALL || !writes (stmt, name))
        continue;
      if (inner != NULL)
        *inner = inner_writer (stmt, name);
      return stmt->id;
    }
  return 0;
}

static guint32
producer_of (const CsTrace *trace, const char *name)
{
  return producer_of_deep (trace, name, NULL);
}

/* The top-level call of @trace named @callee ("nvFusion0"), 0 = none. */
static guint32
call_named (const CsTrace *trace, const char *callee)
{
  for (guint i = 0; trace != NULL && i < trace->n_stmts; i++)
    if (trace->stmts[i]->kind == CS_STMT_CALL && g_strcmp0 (trace->stmts[i]->callee, callee) == 0)
      return trace->stmts[i]->id;
  return 0;
}

/* Appends a row judging @x against the f64 run @t (same numel): with @ref, the exact-dtype
 * run, as reference (GPU rows); without, the rounding floor (CPU rows, a lens). */
static void
add_row (RunJob *job, CsFamily family, gboolean gpu, const char *name, const CsTensor *x,
         const CsTensor *ref, const CsTensor *t)
{
  CsAccuracyRule rule;
  RunRow row = { 0 };

  cs_accuracy_rule (x->dtype, x->numel, job->trace[CS_FAMILY_BACKWARD] != NULL, &rule);
  cs_accuracy_judge (x, ref, t, &rule, &row.acc);
  row.family = family;
  row.gpu = gpu;
  row.name = g_strdup (name);
  row.type = cs_tensor_type_string (x);
  row.stmt_id = producer_of_deep (job->trace[family], name, &row.inner_id);
  cs_lens_range (t, &row.range);
  g_array_append_val (job->rows, row);
}

/* Compares every returned float tensor of the exact run with the f64 run, by name; trace
 * inputs handed back unchanged (saved for backward) are skipped. */
static void
compare_outputs (RunJob *job, CsFamily family, GHashTable *exact, GHashTable *ref,
                 GHashTable *inputs)
{
  GHashTableIter iter;
  gpointer key, value;

  g_hash_table_iter_init (&iter, exact);
  while (g_hash_table_iter_next (&iter, &key, &value))
    {
      const CsTensor *x = value;
      const CsTensor *r = g_hash_table_lookup (ref, key);

      if (r == NULL || x->numel != r->numel || !cs_dtype_is_float (x->dtype)
          || g_hash_table_contains (inputs, key))
        continue;
      add_row (job, family, FALSE, key, x, NULL, r);
    }
}

/* Statement progress of one CPU reference run: what runs, and its share of the bar. */
typedef struct
{
  RunJob     *job;          /* the run it reports for (its progress throttle) */
  const char *what;         /* "forward" / "backward" */
  const char *mode;         /* "trace dtypes" / "f64" */
  double      p0;           /* fraction at its first statement */
  double      span;         /* fraction it covers */
} RefProgress;

static void
ref_progress_cb (guint done, guint total, gpointer data)
{
  RefProgress *rp = data;
  gint64 now = g_get_monotonic_time ();
  g_autofree char *text = NULL;

  /* at most 10 reports a second: a 10,000-statement trace must not flood the main loop */
  if (done > 0 && done < total && now - rp->job->last_progress_us < 100 * 1000)
    return;
  rp->job->last_progress_us = now;
  text = g_strdup_printf ("CPU reference: %s in %s, statement %u of %u…", rp->what, rp->mode,
                          MIN (done + 1, total), total);
  report_progress (rp->job, rp->p0 + rp->span * done / MAX (total, 1), text);
}

static gboolean
job_cancelled (RunJob *job, GError **error)
{
  if (g_atomic_int_get (&job->cancel) == 0)
    return FALSE;
  g_set_error (error, CS_REF_ERROR, CS_REF_ERROR_CANCELLED, "cancelled");
  return TRUE;
}

/* Runs @trace in both modes.  @env_exact / @env_f64 may already bind some leaves (the
 * backward's saved tensors); the others get random values, the same in both envs. */
static gboolean
run_family (RunJob *job, CsFamily family, GHashTable *env_exact, GHashTable *env_f64,
            GHashTable *ret_exact, GHashTable *ret_f64, double p0, GError **error)
{
  CsTrace *trace = job->trace[family];
  g_autoptr(GPtrArray) leaves = cs_ref_dup_leaf_inputs (trace);
  g_autoptr(GPtrArray) out_exact = NULL;
  g_autoptr(GPtrArray) out_f64 = NULL;
  const char *what = family == CS_FAMILY_FORWARD ? "forward" : "backward";
  g_autofree char *msg1 = g_strdup_printf ("CPU reference: %s in trace dtypes…", what);
  g_autofree char *msg2 = g_strdup_printf ("CPU reference: %s in f64…", what);

  for (guint i = 0; i < leaves->len; i++)
    {
      const CsProxy *p = g_ptr_array_index (leaves, i);
      g_autoptr(CsTensor) t = NULL;

      if (g_hash_table_contains (env_exact, p->name))
        continue;
      if (job_cancelled (job, error))
        return FALSE;
      t = cs_ref_random_input (trace, p, RUN_SEED + family, error);
      if (t == NULL)
        return FALSE;
      cs_ref_env_insert (env_exact, p->name, t);
      cs_ref_env_insert (env_f64, p->name, t);
    }
  report_progress (job, p0, msg1);
  {
    RefProgress rp = { job, what, "trace dtypes", p0, 0.2 };
    CsRefRunOptions ro = { &job->cancel, ref_progress_cb, &rp, 0 };

    if (!cs_ref_run_env_full (trace, env_exact, CS_REF_EXACT, RUN_SEED + family, &ro, &out_exact, NULL,
                              ret_exact, error))
      return FALSE;
  }
  report_progress (job, p0 + 0.2, msg2);
  {
    RefProgress rp = { job, what, "f64", p0 + 0.2, 0.2 };
    CsRefRunOptions ro = { &job->cancel, ref_progress_cb, &rp, 0 };

    if (!cs_ref_run_env_full (trace, env_f64, CS_REF_F64, RUN_SEED + family, &ro, &out_f64, NULL, ret_f64,
                              error))
      return FALSE;
  }
  compare_outputs (job, family, ret_exact, ret_f64, env_exact);
  return TRUE;
}

/* Region times from the roofline model (no GPU). */
static void
estimate_times (RunJob *job)
{
  for (CsFamily f = 0; f < CS_N_FAMILIES; f++)
    {
      g_autoptr(CsTraceStats) stats = NULL;

      if (job->trace[f] == NULL)
        continue;
      stats = cs_stats_compute (job->trace[f]);
      for (guint i = 0; i < stats->regions->len; i++)
        {
          const CsStatsEntry *e = &g_array_index (stats->regions, CsStatsEntry, i);
          RunTime t = { f, g_strdup (e->name ? e->name : "?"), call_named (job->trace[f], e->name),
                        e->n_statements, e->est_ms, e->bytes_read + e->bytes_written };

          g_array_append_val (job->times, t);
        }
    }
}

/* The GPU run: same inputs as the CPU reference, outputs against f64, per-step times.
 * Returns FALSE with @error set when there is no executor or device (the caller notes it). */
static gboolean
run_gpu (RunJob *job, GHashTable *fwd_env, GHashTable *bwd_env, GHashTable *fwd_exact,
         GHashTable *bwd_exact, GHashTable *fwd_ref, GHashTable *bwd_ref, GError **error)
{
  const CsCudaBackend *be = cs_cuda_loader_get (error);
  CsCudaDeviceInfo info;
  CsCudaProgram *prog;
  CsCudaTimes times = { 0 };
  gboolean ok = FALSE;

  if (be == NULL || !be->device_info (&info, error)
      || g_cancellable_set_error_if_cancelled (job->cancellable, error))
    return FALSE;
  report_progress (job, 0.8, "GPU: compiling (NVRTC, cuBLASLt plans)…");
  prog = be->program_new (job->trace[CS_FAMILY_FORWARD], job->trace[CS_FAMILY_BACKWARD],
                          &job->policy, error);
  if (prog == NULL)
    return FALSE;

  for (guint i = 0; i < be->program_n_inputs (prog); i++)
    {
      const CsCudaTensorInfo *in = be->program_input (prog, i);
      const CsTensor *x = g_hash_table_lookup (in->backward ? bwd_env : fwd_env, in->name);

      if (x == NULL)
        {
          g_set_error (error, CS_CUDA_ERROR, CS_CUDA_ERROR_INPUT,
                       "GPU input %s has no value from the CPU run", in->name);
          goto out;
        }
      if (!be->program_set_input (prog, i, x->data, cs_tensor_nbytes (x), error))
        goto out;
    }
  report_progress (job, 0.85, "GPU: running…");
  if (g_cancellable_set_error_if_cancelled (job->cancellable, error)
      || !be->program_run (prog, FALSE, error))
    goto out;
  for (guint i = 0; i < be->program_n_outputs (prog); i++)
    {
      const CsCudaTensorInfo *o = be->program_output (prog, i);
      const CsTensor *r = g_hash_table_lookup (o->backward ? bwd_ref : fwd_ref, o->name);
      const CsTensor *e = g_hash_table_lookup (o->backward ? bwd_exact : fwd_exact, o->name);
      g_autoptr(CsTensor) got = NULL;

      if (r == NULL || !cs_dtype_is_float (o->dtype))
        continue;
      got = cs_tensor_new (o->dtype, o->shape, o->rank, error);
      if (got == NULL || !be->program_get_output (prog, i, got->data, cs_tensor_nbytes (got), error))
        goto out;
      if (got->numel == r->numel)
        add_row (job, o->backward ? CS_FAMILY_BACKWARD : CS_FAMILY_FORWARD, TRUE, o->name, got,
                 e != NULL && e->numel == got->numel ? e : NULL, r);
    }
  report_progress (job, 0.9, "GPU: timing (CUDA graph replay)…");
  if (g_cancellable_set_error_if_cancelled (job->cancellable, error)
      || !be->program_time (prog, TIME_ITERS, &times, error))
    goto out;
  job->gpu_step_ms = times.graph_ms;
  for (guint i = 0; times.steps != NULL && i < times.steps->len; i++)
    {
      const CsCudaStepTiming *s = &g_array_index (times.steps, CsCudaStepTiming, i);
      CsFamily f = s->backward ? CS_FAMILY_BACKWARD : CS_FAMILY_FORWARD;
      g_auto(GStrv) words = g_strsplit (s->label, " ", 3);
      guint32 id = 0;

      /* Labels: "nvFusion0 k0 pointwise ..." or "matmul t31 bf16 8x16x16". */
      if (words[0] != NULL && strcmp (words[0], "matmul") == 0 && words[1] != NULL)
        id = producer_of (job->trace[f], words[1]);
      else if (words[0] != NULL)
        id = call_named (job->trace[f], words[0]);
      {
        RunTime t = { f, g_strdup (s->label), id, 0, s->median_ms, s->bytes };
        g_array_append_val (job->times, t);
      }
    }
  job->device = g_strdup (info.name);
  ok = TRUE;
out:
  be->program_free (prog);
  return ok;
}

static GHashTable *
new_returned_table (void)
{
  return g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
                                (GDestroyNotify) cs_tensor_unref);
}

static void
run_cancelled_cb (GCancellable *cancellable, gpointer data)
{
  g_atomic_int_set (&((RunJob *) data)->cancel, 1);
}

static void
run_thread (GTask *task, gpointer source, gpointer task_data, GCancellable *cancellable)
{
  RunJob *job = task_data;
  g_autoptr(GHashTable) env_exact = cs_ref_env_new ();
  g_autoptr(GHashTable) env_f64 = cs_ref_env_new ();
  g_autoptr(GHashTable) fwd_exact = new_returned_table ();
  g_autoptr(GHashTable) fwd_f64 = new_returned_table ();
  g_autoptr(GHashTable) benv_exact = cs_ref_env_new ();
  g_autoptr(GHashTable) benv_f64 = cs_ref_env_new ();
  g_autoptr(GHashTable) bwd_exact = new_returned_table ();
  g_autoptr(GHashTable) bwd_f64 = new_returned_table ();
  g_autoptr(GError) gpu_error = NULL;
  GError *error = NULL;
  gint64 t0 = g_get_monotonic_time ();
  gulong handler;

  if (job->trace[CS_FAMILY_FORWARD] == NULL)
    {
      g_task_return_new_error (task, G_IO_ERROR, G_IO_ERROR_NOT_SUPPORTED,
                               "there is no forward trace to run");
      return;
    }
  /* Cancel (the button, a newer run, the window closing) sets the flag the CPU reference
   * reads; the handler runs at once when the run was cancelled already. */
  handler = g_cancellable_connect (cancellable, G_CALLBACK (run_cancelled_cb), job, NULL);
  if (!run_family (job, CS_FAMILY_FORWARD, env_exact, env_f64, fwd_exact, fwd_f64, 0.0, &error))
    {
      g_cancellable_disconnect (cancellable, handler);
      g_prefix_error (&error, "forward: ");
      g_task_return_error (task, error);
      return;
    }
  if (g_task_return_error_if_cancelled (task))
    return;
  if (job->trace[CS_FAMILY_BACKWARD] != NULL)
    {
      /* The backward binds the forward's returned tensors (saved_for_backward) by name. */
      GHashTableIter iter;
      gpointer key, value;

      g_hash_table_iter_init (&iter, fwd_exact);
      while (g_hash_table_iter_next (&iter, &key, &value))
        cs_ref_env_insert (benv_exact, key, value);
      g_hash_table_iter_init (&iter, fwd_f64);
      while (g_hash_table_iter_next (&iter, &key, &value))
        cs_ref_env_insert (benv_f64, key, value);
      if (!run_family (job, CS_FAMILY_BACKWARD, benv_exact, benv_f64, bwd_exact, bwd_f64, 0.4,
                       &error))
        {
          if (g_error_matches (error, CS_REF_ERROR, CS_REF_ERROR_CANCELLED))
            {
              g_cancellable_disconnect (cancellable, handler);
              g_task_return_error (task, error);
              return;
            }
          job->note = g_strdup_printf ("The backward could not run on the CPU reference: %s",
                                       error->message);
          g_clear_error (&error);
        }
    }
  g_cancellable_disconnect (cancellable, handler);
  if (g_task_return_error_if_cancelled (task))
    return;

  job->gpu_ran = run_gpu (job, env_exact, benv_exact, fwd_exact, bwd_exact, fwd_f64, bwd_f64,
                          &gpu_error);
  if (g_task_return_error_if_cancelled (task))
    return;
  if (!job->gpu_ran)
    {
      /* Keep only the CPU rows and estimate the region times. */
      for (guint i = job->rows->len; i > 0; i--)
        if (g_array_index (job->rows, RunRow, i - 1).gpu)
          g_array_remove_index (job->rows, i - 1);
      g_array_set_size (job->times, 0);
      estimate_times (job);
      job->gpu_note = g_strdup (gpu_error ? gpu_error->message : "no GPU");
      job->device = g_strdup ("CPU reference");
    }
  job->wall_ms = (g_get_monotonic_time () - t0) / 1000.0;
  report_progress (job, 1.0, "done");
  g_task_return_boolean (task, TRUE);
}

/* ------------------------------------------------------------------------------------------ */
/* Showing the results                                                                         */

/* Run table columns (grid columns).  The verdict's numbers come first, right after the
 * tensor, so that they show in the side panel's width without scrolling; the type and the
 * range check follow, reached by the table's horizontal scrollbar. */
enum
{
  COL_TENSOR,
  COL_ERR,
  COL_REF_ERR,
  COL_RATIO,
  COL_VERDICT,
  COL_TYPE,
  COL_AMAX,
  COL_RANGE,
};

/* Width bounds of the cells of the text columns that can be long, in characters: a longer
 * text is ellipsized (in the middle for tensor names, whose ends tell them apart) and shown
 * whole in the cell's tooltip (grid_add_bounded()). */
#define TENSOR_MIN_CHARS 12
#define TENSOR_MAX_CHARS 24
#define RANGE_MAX_CHARS  24

/* Tooltips of the ref_err cells: the reference the number comes from (CsAccuracyRefKind). */
#define REF_EXACT_TIP "exact: the error against f64 of the run that rounds as the trace says"
#define REF_FLOOR_TIP "floor: the f64 values rounded once to the tensor's dtype, against f64"

static GtkWidget *
grid_add (GtkGrid *grid, int col, int row, const char *text, gboolean header, gboolean numeric)
{
  GtkWidget *label = gtk_label_new (text);

  /* not selectable: a selectable label takes the press, and a click on a row must reach
   * the grid's gesture (it selects the row's node); a right click copies the row instead
   * (_cs_window_run_row_text()) */
  gtk_label_set_xalign (GTK_LABEL (label), numeric ? 1.0 : 0.0);
  if (header)
    gtk_widget_add_css_class (label, "run-table-header");
  if (numeric)
    gtk_widget_add_css_class (label, "status-number");
  gtk_grid_attach (grid, label, col, row, 1, 1);
  return label;
}

/* Makes the cell @label, attached at one column, span @columns columns. */
static GtkWidget *
grid_span (GtkWidget *label, int columns)
{
  GtkLayoutManager *lm = gtk_widget_get_layout_manager (gtk_widget_get_parent (label));

  gtk_grid_layout_child_set_column_span (GTK_GRID_LAYOUT_CHILD (gtk_layout_manager_get_layout_child (lm, label)),
                                         columns);
  return label;
}

/* grid_add() for a text that may be long: at least @min_chars wide (the width the table
 * gets in the panel's scroller), at most @max_chars when there is room, ellipsized at @mode
 * beyond, its whole text in the tooltip when it is longer than @min_chars. */
static GtkWidget *
grid_add_bounded (GtkGrid *grid, int col, int row, const char *text, gboolean header,
                  int min_chars, int max_chars, PangoEllipsizeMode mode)
{
  GtkWidget *label = grid_add (grid, col, row, text, header, FALSE);

  gtk_label_set_ellipsize (GTK_LABEL (label), mode);
  gtk_label_set_width_chars (GTK_LABEL (label), MIN (min_chars, (int) g_utf8_strlen (text, -1)));
  gtk_label_set_max_width_chars (GTK_LABEL (label), max_chars);
  if (g_utf8_strlen (text, -1) > min_chars)
    gtk_widget_set_tooltip_text (label, text);   /* it may be drawn cut */
  return label;
}

/* Tags the first cell of table row @row with the node it is about (a click selects it:
 * _cs_window_run_row_activate()). */
static void
link_row (GtkGrid *grid, int row, CsFamily family, guint32 stmt_id, const char *proxy)
{
  GtkWidget *cell = gtk_grid_get_child_at (grid, 0, row);

  if (cell == NULL)
    return;
  g_object_set_data (G_OBJECT (cell), CS_RUN_ROW_FAMILY, GINT_TO_POINTER ((gint) family + 1));
  g_object_set_data (G_OBJECT (cell), CS_RUN_ROW_STMT, GUINT_TO_POINTER (stmt_id));
  g_object_set_data_full (G_OBJECT (cell), CS_RUN_ROW_PROXY, g_strdup (proxy), g_free);
  {
    /* an ellipsized name keeps its whole text in the tooltip */
    const char *name = gtk_label_get_text (GTK_LABEL (cell));
    g_autofree char *tip = gtk_widget_get_tooltip_text (cell) != NULL
      ? g_strdup_printf ("%s\nClick to select this tensor's node in the graph; right-click "
                         "to copy the row", name)
      : g_strdup ("Click to select this tensor's node in the graph; right-click to copy the "
                  "row");

    gtk_widget_set_tooltip_text (cell, tip);
  }
}

static int
row_compare (gconstpointer a, gconstpointer b)
{
  const RunRow *x = a, *y = b;

  if (x->family != y->family)
    return (int) x->family - (int) y->family;
  if (x->gpu != y->gpu)
    return x->gpu ? -1 : 1;
  {
    /* worst first, as the CLI: the largest err / (k ref_err + atol), NaN first */
    double mx = cs_accuracy_margin (&x->acc), my = cs_accuracy_margin (&y->acc);

    if (isnan (mx) != isnan (my))
      return isnan (mx) ? -1 : 1;
    return mx < my ? 1 : mx > my ? -1 : 0;
  }
}

/* Makes the run table's scroller at least as wide as the verdict's columns (tensor through
 * ratio) as they are drawn, so that they show whole without scrolling, left of the always-drawn
 * vertical scrollbar (its width is added to the minimum); the side panel widens when it needs
 * to.  @reserve FALSE lifts the minimum (no table). */
static void
reserve_verdict_columns (CsWindow *self, gboolean reserve)
{
  GtkWidget *sw = gtk_widget_get_ancestor (GTK_WIDGET (self->run_grid), GTK_TYPE_SCROLLED_WINDOW);
  int width = 0;

  if (sw == NULL)
    return;
  for (int col = 0; reserve && col <= COL_RATIO; col++)
    {
      int widest = 0;

      for (GtkWidget *c = gtk_widget_get_first_child (GTK_WIDGET (self->run_grid)); c != NULL;
           c = gtk_widget_get_next_sibling (c))
        {
          int at, row, span, height, nat;

          gtk_grid_query_child (self->run_grid, c, &at, &row, &span, &height);
          if (at != col || span != 1)
            continue;   /* a spanning cell (a region's name) widens no single column */
          gtk_widget_measure (c, GTK_ORIENTATION_HORIZONTAL, -1, NULL, &nat, NULL, NULL);
          widest = MAX (widest, nat);
        }
      width += widest + (col > 0 ? (int) gtk_grid_get_column_spacing (self->run_grid) : 0);
    }
  if (reserve)
    {
      /* the minimum counts the scroller whole: the vertical scrollbar's width comes on top */
      GtkWidget *vbar = gtk_scrolled_window_get_vscrollbar (GTK_SCROLLED_WINDOW (sw));
      int bar = 0;

      if (vbar != NULL)
        gtk_widget_measure (vbar, GTK_ORIENTATION_HORIZONTAL, -1, NULL, &bar, NULL, NULL);
      /* and a column gap, so that the ratios do not touch the scrollbar */
      width += bar + (int) gtk_grid_get_column_spacing (self->run_grid);
    }
  gtk_scrolled_window_set_min_content_width (GTK_SCROLLED_WINDOW (sw), reserve ? width : -1);
}

static void
fill_table (CsWindow *self, RunJob *job)
{
  int r = 0;

  g_array_sort (job->rows, row_compare);
  grid_add (self->run_grid, COL_TENSOR, r, "Tensor", TRUE, FALSE);
  grid_add (self->run_grid, COL_ERR, r, "err", TRUE, TRUE);
  gtk_widget_set_tooltip_text (grid_add (self->run_grid, COL_REF_ERR, r, "ref_err", TRUE, TRUE),
                               "The reference error against f64 the verdict allows a multiple of: "
                               "the exact-dtype run's (exact, GPU rows) or the rounding floor "
                               "(floor, CPU rows)");
  grid_add (self->run_grid, COL_RATIO, r, "ratio", TRUE, TRUE);
  grid_add (self->run_grid, COL_VERDICT, r, "verdict", TRUE, FALSE);
  grid_add (self->run_grid, COL_TYPE, r, "Type", TRUE, FALSE);
  grid_add (self->run_grid, COL_AMAX, r, "amax", TRUE, TRUE);
  gtk_widget_set_tooltip_text (grid_add (self->run_grid, COL_RANGE, r, "range", TRUE, FALSE),
                               "The tensor's values against the ranges of f16, bf16, e4m3 and "
                               "e5m2: elements that overflow, flush to zero or turn subnormal");
  r++;
  for (guint i = 0; i < job->rows->len; i++)
    {
      const RunRow *row = &g_array_index (job->rows, RunRow, i);
      const CsAccuracy *a = &row->acc;
      gboolean none = a->n_compared == 0 && a->n > 0;   /* every element non-finite */
      g_autofree char *name = g_strdup_printf ("%s %s%s",
                                               row->family == CS_FAMILY_FORWARD ? "fwd" : "bwd",
                                               row->name,
                                               job->gpu_ran ? (row->gpu ? " (GPU)" : " (CPU)") : "");
      g_autofree char *err = none && isfinite (a->err) ? g_strdup ("-") : g_strdup_printf ("%.3g", a->err);
      g_autofree char *ref = none ? g_strdup ("-") : g_strdup_printf ("%.3g", a->ref_err);
      g_autofree char *ratio = none && isfinite (a->ratio) ? g_strdup ("-") : g_strdup_printf ("%.3g", a->ratio);
      /* GPU rows: PyTorch's verdict; CPU rows: whether the error is within k roundings */
      const char *verdict = a->n_nonfinite_mismatch ? (row->gpu ? "FAIL (NaN/inf)" : "MISMATCH")
                            : a->pass ? "ok" : row->gpu ? "FAIL" : "above";

      grid_add_bounded (self->run_grid, COL_TENSOR, r, name, FALSE, TENSOR_MIN_CHARS,
                        TENSOR_MAX_CHARS, PANGO_ELLIPSIZE_MIDDLE);
      grid_add (self->run_grid, COL_ERR, r, err, FALSE, TRUE);
      /* which reference, in the cell's tooltip (the column stays narrow; GPU rows are
       * "exact", CPU rows "floor", as their names say) */
      gtk_widget_set_tooltip_text (grid_add (self->run_grid, COL_REF_ERR, r, ref, FALSE, TRUE),
                                   a->ref_kind == CS_ACCURACY_REF_EXACT ? REF_EXACT_TIP : REF_FLOOR_TIP);
      grid_add (self->run_grid, COL_RATIO, r, ratio, FALSE, TRUE);
      grid_add (self->run_grid, COL_VERDICT, r, verdict, FALSE, FALSE);
      grid_add (self->run_grid, COL_TYPE, r, row->type, FALSE, FALSE);
      {
        g_autofree char *amax = g_strdup_printf ("%.3g", row->range.amax);
        g_autofree char *rs = cs_lens_range_summary (&row->range);

        grid_add (self->run_grid, COL_AMAX, r, amax, FALSE, TRUE);
        grid_add_bounded (self->run_grid, COL_RANGE, r, rs[0] ? rs : "fits all", FALSE,
                          RANGE_MAX_CHARS, RANGE_MAX_CHARS, PANGO_ELLIPSIZE_END);
      }
      link_row (self->run_grid, r, row->family, row->stmt_id, row->name);
      r++;
    }

  r++;
  /* the regions' (or GPU steps') table under it: the name spans the tensor and err columns,
   * so that it shows whole without widening the tensor column */
  grid_span (grid_add (self->run_grid, 0, r, job->gpu_ran ? "GPU step" : "Region", TRUE, FALSE), 2);
  grid_add (self->run_grid, 2, r, job->gpu_ran ? "" : "ops", TRUE, TRUE);
  gtk_widget_set_tooltip_text (grid_add (self->run_grid, 3, r, job->gpu_ran ? "median" : "est.",
                                         TRUE, TRUE),
                               job->gpu_ran ? "The step's median time on the GPU (CUDA events)"
                                            : "The H200 roofline estimate (no GPU ran)");
  grid_add (self->run_grid, 4, r, "KB moved", TRUE, TRUE);
  r++;
  for (guint i = 0; i < job->times->len; i++)
    {
      const RunTime *t = &g_array_index (job->times, RunTime, i);
      g_autofree char *name = g_strdup_printf ("%s %s", t->family == CS_FAMILY_FORWARD ? "fwd"
                                                                                      : "bwd",
                                               t->name);
      g_autofree char *ops = t->n_ops ? g_strdup_printf ("%u", t->n_ops) : g_strdup ("");
      g_autofree char *ms = _cs_window_format_ms (t->ms);
      g_autofree char *kb = g_strdup_printf ("%.3g", t->bytes / 1e3);

      grid_span (grid_add_bounded (self->run_grid, 0, r, name, FALSE, TENSOR_MIN_CHARS,
                                   TENSOR_MAX_CHARS, PANGO_ELLIPSIZE_MIDDLE), 2);
      grid_add (self->run_grid, 2, r, ops, FALSE, TRUE);
      grid_add (self->run_grid, 3, r, ms, FALSE, TRUE);
      grid_add (self->run_grid, 4, r, kb, FALSE, TRUE);
      link_row (self->run_grid, r, t->family, t->stmt_id, NULL);
      r++;
    }
  reserve_verdict_columns (self, TRUE);
}

/**
 * _cs_window_apply_run_overlay:
 *
 * Passes the overlay chosen in the run panel (error against f64, or region time) to both graph
 * views; nothing when there is no run.
 */
void
_cs_window_apply_run_overlay (CsWindow *self)
{
  guint heat = gtk_drop_down_get_selected (self->overlay_dropdown);

  if (heat >= CS_N_RUN_HEAT)
    heat = CS_RUN_HEAT_RATIO;
  for (CsFamily f = 0; f < CS_N_FAMILIES; f++)
    {
      CsGraphView *view = _cs_window_get_view (self, f);

      if (self->run_titles[heat] == NULL)
        cs_graph_view_set_values (view, NULL, NULL, NULL);
      else
        cs_graph_view_set_values (view, self->run_node_values[heat][f],
                                  self->run_edge_values[heat][f], self->run_titles[heat]);
    }
}

static void
put_max (GHashTable **table, guint32 id, double v)
{
  double *cur;

  if (*table == NULL)
    *table = g_hash_table_new_full (NULL, NULL, NULL, g_free);
  cur = g_hash_table_lookup (*table, GUINT_TO_POINTER (id));
  if (cur == NULL)
    g_hash_table_insert (*table, GUINT_TO_POINTER (id), g_memdup2 (&v, sizeof v));
  else
    *cur = MAX (*cur, v);
}

/* The run's first divergence (core/cs-lens.h, as castscope-cli run names it): the earliest
 * failing tensor of the forward, else of the backward, among the rows of the device that ran;
 * the button says which, or that there is none. */
static void
find_divergence (CsWindow *self, RunJob *job)
{
  g_autofree char *label = NULL;

  g_clear_pointer (&self->run_divergence, g_free);
  for (CsFamily f = 0; f < CS_N_FAMILIES && self->run_divergence == NULL; f++)
    {
      g_autoptr(GArray) items = g_array_new (FALSE, TRUE, sizeof (CsLensItem));
      g_autoptr(GArray) rows = g_array_new (FALSE, FALSE, sizeof (guint));
      gint at;

      if (job->trace[f] == NULL)
        continue;
      for (guint i = 0; i < job->rows->len; i++)
        {
          const RunRow *row = &g_array_index (job->rows, RunRow, i);
          CsLensItem item = { row->name, &row->acc };

          if (row->family != f || row->gpu != job->gpu_ran)
            continue;
          g_array_append_val (items, item);
          g_array_append_val (rows, i);
        }
      at = cs_lens_first_divergence (job->trace[f], (const CsLensItem *) items->data, items->len,
                                     NULL);
      if (at >= 0)
        {
          const RunRow *row = &g_array_index (job->rows, RunRow, g_array_index (rows, guint, at));

          self->run_divergence = g_strdup (row->name);
          self->run_divergence_family = f;
          label = g_strdup_printf ("First divergence: %s %s (ratio %.3g)",
                                   f == CS_FAMILY_FORWARD ? "fwd" : "bwd", row->name,
                                   row->acc.ratio);
        }
    }
  gtk_button_set_label (self->divergence_button,
                        label ? label : "No divergence: every tensor within its bound");
  /* a long tensor name must not widen the side panel: the label ellipsizes, the tooltip
   * keeps the whole text */
  if (GTK_IS_LABEL (gtk_button_get_child (self->divergence_button)))
    gtk_label_set_ellipsize (GTK_LABEL (gtk_button_get_child (self->divergence_button)),
                             PANGO_ELLIPSIZE_END);
  gtk_widget_set_sensitive (GTK_WIDGET (self->divergence_button), self->run_divergence != NULL);
  gtk_widget_set_visible (GTK_WIDGET (self->divergence_button), TRUE);
}

/**
 * _cs_window_jump_to_divergence:
 *
 * win.first-divergence (Ctrl+D, the run panel's button): shows the family of the last run's
 * first divergence and selects the node writing that tensor, revealing it.
 * Returns: TRUE when there was one and its node was selected
 */
gboolean
_cs_window_jump_to_divergence (CsWindow *self)
{
  if (self->run_divergence == NULL)
    {
      gtk_label_set_text (self->status_message, self->last_run_summary != NULL
                          ? "No divergence: every tensor is within k \u00d7 ref_err + atol"
                          : "Run first (F5): the first divergence comes from a run");
      return FALSE;
    }
  return _cs_window_select_tensor (self, self->run_divergence_family, self->run_divergence, 0);
}

static void
run_done_cb (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr(CsWindow) self = user_data;
  RunJob *job = g_task_get_task_data (G_TASK (result));
  g_autoptr(GError) error = NULL;

  _cs_window_job_end (self);
  if (job->cancellable != self->run_cancellable)
    return;     /* a newer run replaced this one; it owns the progress bar and Cancel */
  if (self->run_cancel_button == NULL)
    return;     /* the window closed */
  gtk_widget_set_visible (GTK_WIDGET (self->run_cancel_button), FALSE);
  if (job->generation != self->generation)
    {
      /* the traces changed meanwhile: its numbers describe other traces */
      gtk_widget_set_visible (GTK_WIDGET (self->run_progress), FALSE);
      return;
    }
  if (!g_task_propagate_boolean (G_TASK (result), &error))
    {
      if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED)
          || g_error_matches (error, CS_REF_ERROR, CS_REF_ERROR_CANCELLED))
        {
          gtk_progress_bar_set_text (self->run_progress, "Run cancelled");
          gtk_label_set_text (self->status_message, "Run cancelled");
          return;
        }
      {
        g_autofree char *msg = g_strdup_printf ("Run failed (CPU reference): %s", error->message);
        cs_window_show_error (self, msg);
      }
      gtk_widget_set_visible (GTK_WIDGET (self->run_progress), FALSE);
      return;
    }
  _cs_window_clear_run (self);
  for (guint i = 0; i < job->rows->len; i++)
    {
      const RunRow *row = &g_array_index (job->rows, RunRow, i);
      const double v[] = { row->acc.ratio, row->acc.err, row->acc.ref_err };

      /* The overlay shows what ran on the device that ran (GPU when there was one). */
      if (row->gpu != job->gpu_ran)
        continue;
      /* a tensor of NaNs agreeing with f64 has no measure: leave it uncoloured */
      if (row->acc.n_compared == 0 && row->acc.n > 0 && row->acc.n_nonfinite_mismatch == 0)
        continue;
      for (guint h = 0; h < G_N_ELEMENTS (v); h++)
        {
          GHashTable **edges = &self->run_edge_values[h][row->family];

          if (*edges == NULL)
            *edges = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
          g_hash_table_insert (*edges, g_strdup (row->name), g_memdup2 (&v[h], sizeof (double)));
          if (row->stmt_id != 0)
            put_max (&self->run_node_values[h][row->family], row->stmt_id, v[h]);
          if (row->inner_id != 0 && row->inner_id != row->stmt_id)
            put_max (&self->run_node_values[h][row->family], row->inner_id, v[h]);
        }
    }
  for (guint i = 0; i < job->times->len; i++)
    {
      const RunTime *t = &g_array_index (job->times, RunTime, i);
      GHashTable **table = &self->run_node_values[CS_RUN_HEAT_TIME][t->family];
      double *cur;

      if (t->stmt_id == 0)
        continue;
      if (*table == NULL)
        *table = g_hash_table_new_full (NULL, NULL, NULL, g_free);
      /* A region may run as several kernels: sum their times. */
      cur = g_hash_table_lookup (*table, GUINT_TO_POINTER (t->stmt_id));
      if (cur != NULL)
        *cur += t->ms;
      else
        g_hash_table_insert (*table, GUINT_TO_POINTER (t->stmt_id),
                             g_memdup2 (&t->ms, sizeof (double)));
    }
  /* The key names the measure as castscope-cli run does (err, ref_err, ratio). */
  self->run_titles[CS_RUN_HEAT_RATIO] = g_strdup (job->gpu_ran ? "GPU ratio (err / ref_err)"
                                                               : "ratio (err / ref_err)");
  self->run_titles[CS_RUN_HEAT_ERR] = g_strdup (job->gpu_ran ? "GPU err (RMSE vs f64)"
                                                             : "err (RMSE vs f64)");
  self->run_titles[CS_RUN_HEAT_REF_ERR] = g_strdup (job->gpu_ran ? "ref_err (exact run vs f64)"
                                                                 : "ref_err (floor vs f64)");
  self->run_titles[CS_RUN_HEAT_TIME] = g_strdup (job->gpu_ran ? "GPU time (ms)"
                                                              : "est. time (ms, H200)");
  if (job->gpu_ran)
    {
      guint n_gpu = 0, n_fail = 0;

      for (guint i = 0; i < job->rows->len; i++)
        {
          const RunRow *row = &g_array_index (job->rows, RunRow, i);

          n_gpu += row->gpu;
          n_fail += row->gpu && !row->acc.pass;
        }
      self->last_run_summary = g_strdup_printf ("%s: step %.3g ms (CUDA graph), %u tensors checked "
                                                "against f64, %u fail", job->device,
                                                job->gpu_step_ms, n_gpu, n_fail);
    }
  else
    self->last_run_summary = g_strdup_printf ("CPU reference (no GPU): %u tensors checked against "
                                              "f64 in %.1f ms", job->rows->len, job->wall_ms);
  _cs_window_apply_run_overlay (self);
  find_divergence (self, job);
  fill_table (self, job);
  gtk_widget_set_visible (GTK_WIDGET (self->run_progress), TRUE);
  gtk_progress_bar_set_fraction (self->run_progress, 1.0);
  gtk_progress_bar_set_text (self->run_progress, self->last_run_summary);
  gtk_widget_set_tooltip_text (GTK_WIDGET (self->run_progress), job->gpu_note);
  gtk_widget_set_visible (GTK_WIDGET (self->overlay_dropdown), TRUE);
  if (job->note != NULL)
    cs_window_show_error (self, job->note);
  gtk_label_set_text (self->status_message, self->last_run_summary);
}

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

  for (CsFamily f = 0; f < CS_N_FAMILIES; f++)
    {
      for (guint h = 0; h < CS_N_RUN_HEAT; h++)
        {
          g_clear_pointer (&self->run_node_values[h][f], g_hash_table_unref);
          g_clear_pointer (&self->run_edge_values[h][f], g_hash_table_unref);
        }
      cs_graph_view_set_values (_cs_window_get_view (self, f), NULL, NULL, NULL);
    }
  for (guint h = 0; h < CS_N_RUN_HEAT; h++)
    g_clear_pointer (&self->run_titles[h], g_free);
  g_clear_pointer (&self->run_divergence, g_free);
  if (self->divergence_button != NULL)
    gtk_widget_set_visible (GTK_WIDGET (self->divergence_button), FALSE);
  /* the run's summary goes with its table: the status line says so once, the progress bar
   * that showed it is hidden */
  if (self->last_run_summary != NULL)
    {
      if (g_strcmp0 (gtk_label_get_text (self->status_message), self->last_run_summary) == 0)
        gtk_label_set_text (self->status_message,
                            "Run results cleared: the traces changed (Run again, F5)");
      gtk_widget_set_visible (GTK_WIDGET (self->run_progress), FALSE);
      gtk_progress_bar_set_text (self->run_progress, NULL);
      gtk_widget_set_tooltip_text (GTK_WIDGET (self->run_progress), NULL);
    }
  g_clear_pointer (&self->last_run_summary, g_free);
  while ((child = gtk_widget_get_first_child (GTK_WIDGET (self->run_grid))) != NULL)
    gtk_grid_remove (self->run_grid, child);
  reserve_verdict_columns (self, FALSE);
  gtk_widget_set_visible (GTK_WIDGET (self->overlay_dropdown), FALSE);
}

/**
 * _cs_window_run:
 *
 * Runs the final forward and backward traces of the current result (worker thread, progress in
 * the run panel): on the CPU reference always, on the GPU too when the CUDA executor loads and
 * a device answers.  Then overlays the relative error of every returned tensor against the f64
 * run (edges, and the statements producing them) or the per-region time (the run panel's
 * overlay switch), and lists both in the run table.  Errors go to the info bar; the window
 * stays usable meanwhile.
 */
void
_cs_window_run (CsWindow *self)
{
  g_autoptr(GTask) task = NULL;
  g_autoptr(GError) error = NULL;
  RunJob *job;
  CsRefStepCost cost;
  CsRefMachineMemory machine;
  CsRefMemoryVerdict verdict;
  const char *hint = NULL;

  if (self->analysis == NULL)
    {
      cs_window_show_error (self, "Nothing to run: open a trace first.");
      return;
    }
  /* The same limits as castscope-cli run (its defaults): refused before anything is made. */
  cs_ref_estimate_step (cs_analysis_get_final (self->analysis, CS_FAMILY_FORWARD),
                        cs_analysis_get_final (self->analysis, CS_FAMILY_BACKWARD),
                        CS_REF_STEP_EXACT | CS_REF_STEP_F64 | CS_REF_STEP_READBACK, &cost);
  cs_ref_machine_memory (&machine);
  verdict = cs_ref_check_step_memory (&cost, &machine, CS_REF_MEMORY_DEFAULT, &error);
  if (verdict == CS_REF_MEMORY_OVER_MACHINE)
    hint = "shrink the shapes, or run it on a machine with more memory";
  else if (verdict == CS_REF_MEMORY_OVER_LIMIT)
    hint = "75% of the memory available now";
  else if (!cs_ref_check_step (&cost, G_MAXUINT64, CS_REF_DEFAULT_MAX_FLOPS, &error))
    hint = "about a minute on one core; castscope-cli run --max-gflop raises it";
  if (error != NULL)
    {
      g_autofree char *msg = g_strdup_printf ("Run refused: %s (%s).", error->message, hint);

      cs_window_show_error (self, msg);
      gtk_label_set_text (self->status_message, "Run refused: over the limits");
      return;
    }
  if (self->run_cancellable != NULL)
    g_cancellable_cancel (self->run_cancellable);
  g_set_object (&self->run_cancellable, g_cancellable_new ());
  g_object_unref (self->run_cancellable);

  job = g_new0 (RunJob, 1);
  job->self = g_object_ref (self);
  job->policy = self->policy;
  job->rows = g_array_new (FALSE, TRUE, sizeof (RunRow));
  g_array_set_clear_func (job->rows, run_row_clear);
  job->times = g_array_new (FALSE, TRUE, sizeof (RunTime));
  g_array_set_clear_func (job->times, run_time_clear);
  job->generation = self->generation;
  job->cancellable = g_object_ref (self->run_cancellable);
  for (CsFamily f = 0; f < CS_N_FAMILIES; f++)
    {
      CsTrace *t = cs_analysis_get_final (self->analysis, f);
      job->trace[f] = t ? cs_trace_ref (t) : NULL;
    }
  gtk_widget_set_visible (GTK_WIDGET (self->run_progress), TRUE);
  gtk_progress_bar_set_fraction (self->run_progress, 0);
  gtk_progress_bar_set_text (self->run_progress, "starting…");
  gtk_widget_set_visible (GTK_WIDGET (self->run_cancel_button), TRUE);
  gtk_widget_set_sensitive (GTK_WIDGET (self->run_cancel_button), TRUE);
  task = g_task_new (NULL, self->run_cancellable, run_done_cb, g_object_ref (self));
  g_task_set_task_data (task, job, run_job_free);
  _cs_window_job_begin (self);
  g_task_run_in_thread (task, run_thread);
}

/**
 * _cs_window_cancel_run:
 *
 * The run panel's Cancel: stops the run in flight (its CPU reference within a fraction of a
 * second); the progress bar then says "Run cancelled" and the window stays as it was.
 */
void
_cs_window_cancel_run (CsWindow *self)
{
  if (self->run_cancellable == NULL || g_cancellable_is_cancelled (self->run_cancellable))
    return;
  g_cancellable_cancel (self->run_cancellable);
  gtk_widget_set_sensitive (GTK_WIDGET (self->run_cancel_button), FALSE);
  gtk_progress_bar_set_text (self->run_progress, "cancelling…");
}
