/* cs-dellast.h: Thunder's "Delete Last Used" pass (reference/thunder-traces.md 7.4).
 *
 * Source: thunder/executors/passes.py `del_last_used`.
 */
#pragma once

#include <glib.h>

#include "cs-ir.h"

G_BEGIN_DECLS

/**
 * cs_dellast_trace:
 * @trace: (transfer none): a final forward or backward trace
 * @clear_collections: also emit `clear_mutable_collection(C)` before deleting a collection
 *   proxy (Thunder does this in backward traces)
 *
 * Walks the statements backwards; for each statement (input annotations, comments, old `del`s
 * and the return are skipped; old `del`s are removed) its outputs and then its arguments that
 * are not read later and are not returned are deleted with one `del a, b` right after it
 * (after the unpack detail comments that follow an unpack).  With @clear_collections, the
 * collection proxies of that list are first cleared, in reverse order.
 * Returns: (transfer full): the new trace (pass "delete-last-used")
 */
CsTrace *cs_dellast_trace (const CsTrace *trace,
                           gboolean       clear_collections);

G_END_DECLS
