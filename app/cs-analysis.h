/* cs-analysis.h: what the window shows for one file under one cast policy.
 *
 * A CsAnalysis is the pipeline's output arranged for the GUI: two "families" of traces (the
 * forward view and the backward view), each an ordered list of (pass name, trace) for the pass
 * slider.  Passes before the forward/backward split (the joint trace) belong to both families.
 * It is immutable once built and reference counted, so a worker thread builds it and the GTK
 * thread reads it.
 */
#pragma once

#include <gio/gio.h>

#include "cs-ir.h"
#include "cs-policy.h"
#include "cs-stats.h"

G_BEGIN_DECLS

typedef enum
{
  CS_FAMILY_FORWARD,    /* computation: joint passes, then split-forward, delete-last-used */
  CS_FAMILY_BACKWARD,   /* backward_fn: joint passes, then split-backward, ... -backward */
  CS_N_FAMILIES
} CsFamily;

typedef struct _CsAnalysis CsAnalysis;

/* A top-level statement's place in the trace text buffer (character offsets). */
typedef struct
{
  guint32 stmt_id;     /* CsStmt.id of a top-level statement; never 0 */
  int     start;       /* char offset of its first character */
  int     end;         /* char offset one past its last line (subsymbol comments included) */
} CsStmtRange;

/**
 * cs_analysis_set_inductor:
 * @arg: (nullable): an output_code file, "auto" (the file beside each opened
 *   DIR/NAME.txt: DIR/inductor/NAME.output_code), or NULL for castscope's own fusion
 *
 * Makes every later analysis of a torch.compile graph use Inductor's kernels as its regions
 * (the app's --inductor option).  Call before the first analysis (not thread-safe).
 */
void            cs_analysis_set_inductor (const char     *arg);
CsAnalysis     *cs_analysis_new_for_list (CsTraceList    *list,
                                          const CsPolicy *policy,
                                          GError        **error);
CsAnalysis     *cs_analysis_new_as_read  (CsTraceList    *list,
                                          const CsPolicy *policy);
/** cs_analysis_ref: takes a reference (atomic: any thread).  Returns: (transfer full): @analysis */
CsAnalysis     *cs_analysis_ref          (CsAnalysis     *analysis);
/** cs_analysis_unref: drops a reference (atomic); the last frees @analysis with its pass traces,
 * pipelines and stats.  @analysis must not be NULL. */
void            cs_analysis_unref        (CsAnalysis     *analysis);
const CsPolicy *cs_analysis_get_policy   (CsAnalysis     *analysis);
guint           cs_analysis_n_passes     (CsAnalysis     *analysis,
                                          CsFamily        family);
const char     *cs_analysis_pass_name    (CsAnalysis     *analysis,
                                          CsFamily        family,
                                          guint           i);
CsTrace        *cs_analysis_get_trace    (CsAnalysis     *analysis,
                                          CsFamily        family,
                                          guint           i);
CsTrace        *cs_analysis_get_final    (CsAnalysis     *analysis,
                                          CsFamily        family);
const char     *cs_analysis_get_warning  (CsAnalysis     *analysis);
gboolean        cs_analysis_get_user_casts (CsAnalysis   *analysis,
                                          GPtrArray     **casts,
                                          GPtrArray     **keep);
const CsTraceStats *cs_analysis_get_final_stats (CsAnalysis *analysis,
                                          CsFamily        family);
const char     *cs_analysis_get_printed  (CsAnalysis     *analysis,
                                          const CsTrace  *trace,
                                          const GArray  **ranges);
char           *cs_analysis_print_with_ranges (const CsTrace *trace,
                                          GArray         *ranges);

void            cs_analysis_new_async    (CsTraceList        *list,
                                          const CsPolicy     *policy,
                                          GCancellable       *cancellable,
                                          GAsyncReadyCallback callback,
                                          gpointer            user_data);
CsAnalysis     *cs_analysis_new_finish   (GAsyncResult       *result,
                                          GError            **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (CsAnalysis, cs_analysis_unref)

G_END_DECLS
