/* cs-decompose-private.h: what the decompose pass (cs-decompose.c) shares with the
 * decomposition builders (cs-decompositions.c).  Internal to core/.
 */
#pragma once

#include <glib.h>
#include <string.h>

#include "cs-decompose.h"
#include "cs-ir.h"
#include "cs-policy.h"

G_BEGIN_DECLS

typedef struct
{
  CsTrace        *trace;   /* trace that receives new statements and proxies */
  CsPolicy        policy;  /* cast policy in force */
  const CsStmt   *origin;  /* top-level statement being decomposed (for messages, origin ids) */
  guint32         names_free_from; /* see _cs_decompose_names_free_from() */
} Dx;

/* TRUE when the shapes @a (rank @ra) and @b (rank @rb) are the same. */
static inline gboolean
same_dims (const int64_t *a, guint ra, const int64_t *b, guint rb)
{
  return ra == rb && (ra == 0 || memcmp (a, b, sizeof (int64_t) * ra) == 0);
}

/*
 * _cs_decompose_fail:
 * @s: the statement being decomposed
 * @error: return location
 * @code: the CsDecomposeError
 * @fmt: printf format of the message
 *
 * Sets @error to "line N: CALLEE: MESSAGE" (or "CALLEE: MESSAGE" for a statement without a
 * line).  Returns: NULL, for `return _cs_decompose_fail (...)` in a builder
 */
gpointer _cs_decompose_fail (const CsStmt *s, GError **error, CsDecomposeError code,
                             const char *fmt, ...) G_GNUC_PRINTF (4, 5);

/*
 * _cs_decompose_build:
 * @dx: the decomposition's context (trace receiving statements and proxies, policy, origin)
 * @s: a CALL statement of an ltorch (or aten) op
 * @out: receives the emitted statements, in order, each typed by cs_meta_infer()
 * @error: return location
 *
 * Source: the op's decomposition in thunder/torch/__init__.py and thunder/clang (aten ops:
 * cs-aten-lower.c).  Returns: the value holding the result (a proxy, or a tuple for
 * multi-output ops), or NULL with @error set (CS_DECOMPOSE_ERROR_PRIM for a prim,
 * CS_DECOMPOSE_ERROR_UNSUPPORTED for an op castscope has no decomposition for)
 */
CsValue *_cs_decompose_build (Dx *dx, const CsStmt *s, GPtrArray *out, GError **error);

/*
 * _cs_decompose_ensure_produced:
 * @dx: the decomposition's context
 * @subs: the statements of the decomposition
 * @start: the first of them in @subs
 * @result: the value _cs_decompose_build() returned
 * @error: return location
 *
 * Thunder (PR #2396): a symbol whose result is one of its inputs gets a prims.shallow_copy.
 * Returns: @result rewritten so every leaf is produced inside @subs[@start..], NULL on error
 */
CsValue *_cs_decompose_ensure_produced (Dx *dx, GPtrArray *subs, guint start, CsValue *result,
                                        GError **error);

/*
 * _cs_decompose_proxy_leaves:
 * @v: a value tree
 * @acc: receives the proxies among its leaves, in order
 */
void _cs_decompose_proxy_leaves (const CsValue *v, GPtrArray *acc);

G_END_DECLS
