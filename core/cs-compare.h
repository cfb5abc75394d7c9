/* cs-compare.h: structural equality of traces (round-trip checks, pass tests). */
#pragma once

#include <glib.h>

#include "cs-ir.h"

G_BEGIN_DECLS

/**
 * cs_trace_equal:
 * @a: a trace
 * @b: another trace
 * @why_not: (nullable): where the first difference is described ("stmt 3 (line 12): arg 1: ...")
 *
 * Structural equality: header (leading comments, provenance, imports, decorators, signature),
 * every statement recursively (kind, callee, arguments, targets, type comments, comments,
 * subsymbols) and every proxy's type.  Names are compared literally; literals by value and
 * spelling (value->raw); statement ids and source lines are ignored.
 * Returns: %TRUE if equal
 */
gboolean cs_trace_equal      (const CsTrace *a, const CsTrace *b, GString *why_not);

/** cs_stmt_equal: one statement and its subsymbols, as in cs_trace_equal(). */
gboolean cs_stmt_equal       (const CsStmt *a, const CsStmt *b, GString *why_not);


G_END_DECLS
