/* cs-window-private.h: CsWindow internals shared by cs-window*.c and the GUI tests.
 *
 * Only app/cs-window*.c and tests/test-app-*.c include this header.
 */
#pragma once

#include "cs-window.h"
#include "cs-analysis.h"
#include "cs-aten-match.h"
#include "cs-graph-view.h"
#include "cs-line-view.h"
#include "cs-policy.h"

G_BEGIN_DECLS


/* What the node fill shows after a Run (the overlay dropdown, in this order).  The error
 * measures are the verdict's (core/cs-compare.h, CsAccuracy) under the CLI's names. */
typedef enum
{
  CS_RUN_HEAT_RATIO,    /* ratio = err / ref_err */
  CS_RUN_HEAT_ERR,      /* err: RMSE against the f64 run */
  CS_RUN_HEAT_REF_ERR,  /* ref_err: RMSE of the reference (exact run, or the rounding floor) */
  CS_RUN_HEAT_TIME,     /* per-region time, ms */
  CS_N_RUN_HEAT
} CsRunHeat;

struct _CsWindow
{
  GtkApplicationWindow parent_instance;

  /* template children */
  GtkInfoBar        *error_bar;       /* shows errors and warnings over the graph */
  GtkLabel          *error_label;     /* the error bar's message */
  GtkInfoBar        *diff_bar;        /* what the last policy change changed */
  GtkLabel          *diff_label;      /* its summary (markup; details in the tooltip) */
  GtkLabel          *diff_help_label; /* (transfer none) the "?" popover's legend of the diff marks */
  GtkSearchBar      *search_bar;      /* the find bar */
  GtkSearchEntry    *search_entry;    /* its entry (_cs_window_search_*_cb) */
  GtkGrid           *policy_grid;     /* policy panel: a label and a dropdown per key */
  GtkLabel          *policy_label;    /* the policy as cs_policy_to_string() writes it */
  GtkAdjustment     *pass_adjustment; /* the pass slider's range and position */
  GtkScale          *pass_scale;      /* the pass slider */
  GtkLabel          *pass_label;      /* the shown pass's name */
  GtkStack          *graph_stack;     /* pages "forward" and "backward" (_cs_window_get_family) */
  CsGraphView       *forward_view;    /* the forward family's graph */
  CsGraphView       *backward_view;   /* the backward family's graph */
  GtkSpinner        *busy_spinner;    /* spins while n_jobs > 0; NULL after dispose */
  CsLineView        *trace_view;      /* the shown trace's text */
  GtkLabel          *details_label;   /* the selection's details (markup) */
  GtkProgressBar    *run_progress;    /* a run's progress, shown while it is in flight */
  GtkButton         *run_cancel_button; /* shown while a run is in flight */
  GtkGrid           *run_grid;          /* the run table: a row per tensor or region */
  GtkLabel          *status_casts;      /* status bar: cast counts of the shown trace */
  GtkLabel          *status_regions;    /* status bar: its fusion regions */
  GtkLabel          *status_matmuls;    /* status bar: tensor-core matmuls of all matmuls */
  GtkLabel          *status_time;       /* status bar: its H200 roofline estimate */
  GtkLabel          *status_message;    /* status bar: the last message (find results, ...) */
  GMenu             *policy_submenu;    /* the menu's policy keys, a section each */
  GMenu             *recent_submenu;    /* the menu's recent files */
  GtkDrawingArea    *minimap_area;      /* the whole graph and the view's rectangle */
  GtkListBox        *structure_list;    /* one row per layer / module / chunk */
  GtkLabel          *structure_empty;   /* shown when the trace has no groups */
  GtkLabel          *legend_heading;    /* "Legend", shown with legend_area */
  GtkDrawingArea    *legend_area;       /* dtype legend and value key, beside the graph */
  GtkLabel          *notes_label;       /* the layout's notes, beside the graph */
  GtkPaned          *compare_paned;     /* the side-by-side compare | the graphs */
  GtkPaned          *outer_paned;       /* policy panel | the rest */
  GtkPaned          *main_paned;        /* graph and trace text | details and run panel */
  gboolean           panes_placed;      /* the side panels were sized from the first width */
  GtkBox            *compare_box;       /* left side of a compare: its label and view */
  GtkLabel          *compare_label;     /* what the left side shows */
  CsGraphView       *compare_view;      /* the older trace of a compare (previous policy at the
                                           same pass, else the pass before the shown one), or
                                           the compared file's trace */

  /* state */
  GFile             *file;              /* (nullable) the open file */
  CsTraceList       *traces;            /* (nullable) its parsed traces */
  CsPolicy           policy;            /* the policy shown in the panel (and last requested) */
  CsAnalysis        *analysis;          /* (nullable) the result shown */
  CsAnalysis        *previous;          /* (nullable) result before the last policy change, for
                                           the diff; cleared when the diff is dismissed */
  GHashTable        *final_stats;       /* (nullable) CsTrace* (a reference) -> FinalStats*: the
                                           diff bar's tensor-core matmuls and estimate of the
                                           final traces it shows, computed once per trace */
  GQueue             seen_policies;     /* SeenPolicy*: results of the policies shown last for
                                           this file, most recent first, at most
                                           CS_WINDOW_SEEN_POLICIES; going back to one of them
                                           shows it without re-running the pipeline (its traces,
                                           so also the views' cached layouts, are the same) */
  GCancellable      *cancellable;       /* cancels the in-flight load/analysis */
  guint              generation;        /* bumped per load/recompute; stale results are dropped */
  guint              n_jobs;            /* loads/analyses/runs in flight */
  guint              pass_index[CS_N_FAMILIES]; /* slider position per family */
  gboolean           pass_at_end[CS_N_FAMILIES]; /* follow the last pass when results change */
  GArray            *stmt_ranges;       /* element-type CsStmtRange, for the shown trace */
  GtkDropDown      **policy_dropdowns;  /* one per cs_policy_keys entry */
  guint              n_policy_keys;     /* entries of policy_dropdowns */
  gboolean           syncing;           /* set while the window updates widgets itself */
  guint32            search_last;       /* stmt id of the last find match */
  GArray            *search_matches;    /* (nullable) guint32 ids matching the current Find, in
                                           trace order */
  char              *search_needle;     /* (nullable) what they match */
  char              *last_run_summary;  /* (nullable) one line about the last run */
  GHashTable        *run_node_values[CS_N_RUN_HEAT][CS_N_FAMILIES]; /* (nullable) stmt id ->
                                           double*: per error measure, the largest value of the
                                           tensors the statement writes (top-level and the
                                           prim inside a region that writes it); per
                                           CS_RUN_HEAT_TIME the region time, ms (GPU median or
                                           estimate) */
  GHashTable        *run_edge_values[CS_N_RUN_HEAT][CS_N_FAMILIES]; /* (nullable) proxy name ->
                                           double*: per error measure, the tensor's value
                                           (NULL for CS_RUN_HEAT_TIME) */
  char              *run_titles[CS_N_RUN_HEAT]; /* (nullable) key title of each heat overlay,
                                           naming the measure as the CLI does */
  GtkDropDown       *overlay_dropdown;  /* run heat overlay: a CsRunHeat */
  GtkButton         *divergence_button; /* jumps to the run's first divergence */
  char              *run_divergence;    /* (nullable) the first divergence of the last run: the
                                           earliest tensor (forward before backward) whose
                                           verdict fails (cs_lens_first_divergence()) */
  CsFamily           run_divergence_family; /* its family */
  GCancellable      *run_cancellable;   /* (nullable) the run in flight */
  gboolean           comparing;         /* win.compare: the side-by-side compare is shown */
  gboolean           compare_syncing;   /* set while one side of a compare follows the other */
  guint32            compare_pair[2];   /* the elements the two sides of a compare are aligned
                                           on: [0] of the left (compare_view), [1] of the right
                                           (its match); 0 = none yet (cs-window.c) */
  guint              compare_mirrors;   /* times the left side was laid out anew to draw the
                                           right side's expanded layers since the right
                                           side's last layout (at most 2) */
  gboolean           compare_recentre;  /* the compare just opened: once the right side has
                                           its narrower width, put compare_centre_pt back in
                                           its middle (cs_window_size_allocate()) */
  int                compare_old_width; /* px: the right side's width before it opened */
  double             compare_centre_pt[2]; /* layout pt (y up) at the right side's middle then */
  GPtrArray         *user_casts;        /* (nullable) CsRemovedCast*: casts the user wrote that
                                           remove-redundant-casts dropped in `user_casts_for` */
  CsAnalysis        *user_casts_for;    /* (nullable, owned ref) the result they borrow from */
  GFile             *compare_file;      /* (nullable) the file compared with (cs-window-compare.c):
                                           the left side shows its traces */
  CsTraceList       *compare_traces;    /* (nullable) its parsed traces */
  CsAnalysis        *compare_analysis;  /* (nullable) them under the window's policy */
  CsTraceMatch      *compare_match;     /* (nullable) left (a) vs right (b) as shown */
  GCancellable      *compare_cancellable; /* (nullable) the compare job in flight */
  guint              compare_generation; /* bumped per compare job; stale results are dropped */
};

/* cs-window.c */
gboolean     _cs_window_select_tensor     (CsWindow   *self,
                                           CsFamily    family,
                                           const char *proxy,
                                           guint32     stmt_id);
const CsStmt *_cs_window_find_stmt_deep   (const CsTrace *trace,
                                           guint32        stmt_id,
                                           guint         *top_index);
void         _cs_window_update_diff_bar   (CsWindow   *self);
/** _cs_window_get_family: the family shown: BACKWARD when the graph stack shows "backward". */
CsFamily     _cs_window_get_family        (CsWindow   *self);
/** _cs_window_get_view: Returns: (transfer none): the graph view of @family */
CsGraphView *_cs_window_get_view          (CsWindow   *self,
                                           CsFamily    family);
CsTrace     *_cs_window_get_shown_trace   (CsWindow   *self);
/** _cs_window_is_busy: TRUE while a worker job runs or a graph view (forward, backward, the
 * compare view while comparing) has a layout in flight. */
gboolean     _cs_window_is_busy           (CsWindow   *self);
void         _cs_window_recompute         (CsWindow   *self);
/** _cs_window_update_status: fills the status bar (casts, fusion regions, tensor-core matmuls,
 * estimated time on the H200 roofline) from the shown trace's stats: the analysis's for a final
 * trace, else computed now; empty labels when no trace is shown. */
void         _cs_window_update_status     (CsWindow   *self);
char        *_cs_window_format_ms         (double      ms);
void         _cs_window_select_stmt       (CsWindow   *self,
                                           guint32     stmt_id,
                                           gboolean    scroll);
char        *_cs_window_dup_trace_text    (CsWindow   *self);
guint32      _cs_window_select_text_offset (CsWindow  *self,
                                           int         offset);
/* A file to open or compare with, parsed and run through the pipeline on a worker
 * (cs_window_open_file, cs_window_compare_with_file). */
typedef struct
{
  GFile       *file;        /* (owned) */
  CsPolicy     policy;      /* the window's policy when the job was made */
  CsTraceList *list;        /* (owned, nullable) the parsed traces; set beforehand to reuse a
                               file already parsed */
  CsAnalysis  *analysis;    /* (owned, nullable) the pipeline's result */
  GError      *error;       /* the first error */
  guint        generation;  /* the window's generation counter when the job was made */
} CsWindowFileJob;

void         _cs_window_file_job_free     (gpointer data);
void         _cs_window_file_job_thread   (GTask *task, gpointer source, gpointer task_data,
                                           GCancellable *cancellable);
/** _cs_window_job_begin: counts a worker job in; the first starts the busy spinner.  Pair with
 * _cs_window_job_end(). */
void         _cs_window_job_begin         (CsWindow   *self);
void         _cs_window_job_end           (CsWindow   *self);
void         _cs_window_update_compare    (CsWindow   *self);

/* cs-window-compare.c */
void         _cs_window_init_compare_actions (CsWindow *self);
void         _cs_window_compare_recompute (CsWindow   *self);
void         _cs_window_compare_close_file (CsWindow  *self);
CsTrace     *_cs_window_compare_file_trace (CsWindow  *self,
                                            CsTrace   *now,
                                            char     **label);
guint32      _cs_window_compare_match     (CsWindow   *self,
                                           gboolean    to_left,
                                           guint32     id);

/* cs-window-actions.c */
void         _cs_window_init_actions      (CsWindow   *self);
void         _cs_window_update_recent     (CsWindow   *self);
void         _cs_window_init_policy_panel (CsWindow   *self);
void         _cs_window_sync_policy       (CsWindow   *self);
void         _cs_window_find_next         (CsWindow   *self,
                                           const char *needle,
                                           gboolean    restart);
/** _cs_window_search_changed_cb: the search entry's "search-changed": _cs_window_find_next()
 * with restart (the first match). */
void         _cs_window_search_changed_cb (CsWindow       *self,
                                           GtkSearchEntry *entry);
/** _cs_window_search_activate_cb: "activate" (Enter) and "next-match" (Ctrl+G):
 * _cs_window_find_next() after the last match. */
void         _cs_window_search_activate_cb (CsWindow       *self,
                                            GtkSearchEntry *entry);
/** _cs_window_search_previous_cb: "previous-match" (Ctrl+Shift+G): _cs_window_find_previous(). */
void         _cs_window_search_previous_cb (CsWindow       *self,
                                            GtkSearchEntry *entry);
void         _cs_window_find_previous     (CsWindow   *self,
                                           const char *needle);

/* cs-window-run.c */
void         _cs_window_run               (CsWindow   *self);
void         _cs_window_clear_run         (CsWindow   *self);
void         _cs_window_apply_run_overlay (CsWindow   *self);
void         _cs_window_cancel_run        (CsWindow   *self);
gboolean     _cs_window_jump_to_divergence (CsWindow  *self);
/* label data on a run-table row's first cell: which node the row is about */
#define CS_RUN_ROW_STMT   "cs-run-row-stmt"    /* GUINT_TO_POINTER (top-level stmt id) */
#define CS_RUN_ROW_FAMILY "cs-run-row-family"  /* GINT_TO_POINTER (CsFamily + 1) */
#define CS_RUN_ROW_PROXY  "cs-run-row-proxy"   /* char*: the tensor, or NULL (a region row) */
gboolean     _cs_window_run_row_activate  (CsWindow   *self,
                                           int         row);
char        *_cs_window_run_row_text      (CsWindow   *self,
                                           int         row);

G_END_DECLS
