/* cs-layout-cache.h: finished layouts and groupings kept for re-use, so that collapsing a group
 * again, expanding one seen before or going back to a policy already seen (whose traces the
 * window keeps) draws at once instead of laying out anew.
 *
 * What is kept:
 * - groupings (render/cs-group.h), one per trace: they depend on the trace only, and finding
 *   them reads every statement (about a third of an expand of a 50,000-statement trace);
 *   cs_graph_build() takes the cached one when CsRenderOptions.cache is set;
 * - finished layouts, keyed by the trace and everything in CsRenderOptions that changes the
 *   picture (the detail and collapse levels, the per-statement overrides, which groups end up
 *   collapsed, the fold of repeats, fonts, labels), the max_layouts most recently used.
 *
 * Threading: every function may be called from any thread (one mutex).  A cached layout is
 * handed out as a new reference to the same object, whose overlay fields (selection, marks,
 * values) belong to its owner thread: one cache serves one view (CsGraphView keeps its own).
 * Reference counted.
 */
#pragma once

#include <glib.h>

#include "cs-group.h"
#include "cs-ir.h"
#include "cs-layout.h"
#include "cs-render-types.h"

G_BEGIN_DECLS

/* Layouts kept by a cache made with max_layouts 0. */
#define CS_LAYOUT_CACHE_DEFAULT_SIZE 16
/* Groupings kept (one per trace; a window shows about 10 passes per family). */
#define CS_LAYOUT_CACHE_GROUPINGS    48

/**
 * cs_layout_cache_new:
 * @max_layouts: finished layouts to keep, most recently used; 0 for
 *   #CS_LAYOUT_CACHE_DEFAULT_SIZE (groupings: always #CS_LAYOUT_CACHE_GROUPINGS)
 * Returns: (transfer full): an empty cache; release with cs_layout_cache_unref()
 */
CsLayoutCache *cs_layout_cache_new          (guint                  max_layouts);
CsLayoutCache *cs_layout_cache_ref          (CsLayoutCache         *cache);
void           cs_layout_cache_unref        (CsLayoutCache         *cache);
CsGrouping    *cs_layout_cache_dup_grouping (CsLayoutCache         *cache,
                                             const CsTrace         *trace);
CsLayout      *cs_layout_cache_lookup       (CsLayoutCache         *cache,
                                             CsTrace               *trace,
                                             const CsRenderOptions *options);
void           cs_layout_cache_insert       (CsLayoutCache         *cache,
                                             CsTrace               *trace,
                                             const CsRenderOptions *options,
                                             CsLayout              *layout);
void           cs_layout_cache_clear        (CsLayoutCache         *cache);
guint          cs_layout_cache_n_layouts    (CsLayoutCache         *cache);
guint          cs_layout_cache_n_hits       (CsLayoutCache         *cache);
char          *cs_render_options_key        (const CsRenderOptions *options);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (CsLayoutCache, cs_layout_cache_unref)

G_END_DECLS
