/* cs-layout-private.h: render/-internal layout entry points (not for app/). */
#pragma once

#include "cs-layout.h"

G_BEGIN_DECLS

void      _cs_layout_run_layered   (CsLayout              *layout);
gboolean *_cs_graph_collapsed_groups (const CsGrouping    *grouping,
                                    const CsRenderOptions *options,
                                    guint                 *n_collapsed);

G_END_DECLS
