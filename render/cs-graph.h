/* cs-graph.h: trace -> castscope graph (nodes, tensor edges, clusters) -> DOT text.
 *
 * What becomes what (DESIGN.md "Rendering", reference/thunder-traces.md 6.3):
 * - every drawn bound symbol is a node labelled with its short op name; casts
 *   (CS_OP_CAT_CAST: prims.convert_element_type, ltorch.to, Tensor.to ...) are small CAST
 *   nodes coloured by their target dtype; matmul / linear (CS_OP_CAT_MATMUL) carry a badge;
 * - each tensor a statement reads is an edge from its producer (a statement, or an INPUT node
 *   for trace inputs and tensors unpacked from saved_for_backward / cotangents) to the reader,
 *   coloured by the tensor's dtype and labelled with its shape; each returned tensor gets an
 *   OUTPUT node;
 * - a fusion call (nvFusionK, whose subsymbols are the region's prims) is a REGION cluster of its
 *   prims, titled with its name, member count and bytes in + out; collapsed it is one REGION
 *   node; an expanded ltorch statement is an EXPANDED cluster of its leaf prims;
 * - bookkeeping (unpack, del, clear_mutable_collection, checks, return) is not drawn.
 */
#pragma once

#include <glib.h>

#include "cs-ir.h"
#include "cs-layout.h"
#include "cs-render-types.h"

G_BEGIN_DECLS

CsLayout *cs_graph_build  (CsTrace               *trace,
                           const CsRenderOptions *options,
                           GError               **error);
char     *cs_graph_to_dot (const CsLayout        *layout);
guint     cs_graph_count_nodes (CsTrace          *trace,
                                CsRenderDetail    detail,
                                gboolean          bookkeeping);

G_END_DECLS
