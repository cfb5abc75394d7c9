/* cs-layout-private.h: render/-internal layout entry points (not for app/). */
#pragma once

#include "cs-layout.h"

G_BEGIN_DECLS

/* A read of a trace input (a proxy no top-level statement writes) by a drawn top-level
 * statement (render/cs-graph.c). */
typedef struct
{
  guint    stmt;         /* index into CsTrace.stmts */
  CsProxy *proxy;        /* (not owned) the input read */
} _CsInputRead;

void      _cs_layout_run_layered   (CsLayout              *layout);
gboolean  _cs_layout_run_composed  (CsLayout              *layout,
                                    GCancellable          *cancellable,
                                    GError               **error,
                                    gboolean              *ran);
void      _cs_layout_pieces_clear  (void);
CsTraceIndex *_cs_trace_index_new  (const CsTrace         *trace);
CsTraceIndex *_cs_trace_index_ref  (CsTraceIndex          *index);
void      _cs_trace_index_unref    (CsTraceIndex          *index);
CsTraceIndex *_cs_layout_cache_dup_trace_index (CsLayoutCache *cache,
                                    const CsTrace         *trace);
GPtrArray *_cs_layout_cache_dup_duplicate_saved (CsLayoutCache *cache,
                                    const CsTrace         *trace);
GArray   *_cs_layout_cache_dup_input_reads (CsLayoutCache *cache,
                                    const CsTrace         *trace,
                                    gboolean               bookkeeping);
void      _cs_layout_cache_put_input_reads (CsLayoutCache *cache,
                                    const CsTrace         *trace,
                                    gboolean               bookkeeping,
                                    GArray                *reads);
gboolean *_cs_graph_collapsed_groups (const CsGrouping    *grouping,
                                    const CsRenderOptions *options,
                                    guint                 *n_collapsed);

G_END_DECLS
