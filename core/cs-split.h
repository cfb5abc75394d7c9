/* cs-split.h: split of a joint forward+backward trace into the forward `computation` and the
 * `backward_fn(saved_for_backward, cotangents)`.
 *
 * Source: thunder/transforms/autodiff.py (split_into_forward_and_backward);
 * reference/thunder-traces.md section 5.3 and 1.2 i/l (unpack and return forms).
 */
#pragma once

#include <glib.h>

#include "cs-ir.h"

G_BEGIN_DECLS

#define CS_SPLIT_ERROR (cs_split_error_quark ())
/** cs_split_error_quark: the #GQuark of #CS_SPLIT_ERROR (codes: #CsSplitError). */
GQuark cs_split_error_quark (void);

typedef enum
{
  CS_SPLIT_ERROR_NOT_JOINT,  /* the return is not the joint dict {'output', 'flat_args', 'fw_flat_out'} */
  CS_SPLIT_ERROR_BAD_TRACE,  /* a get_grad of something that is not a forward output, ... */
} CsSplitError;

/**
 * cs_split_forward_backward:
 * @joint: (transfer none): a joint trace from cs_grad_joint(), possibly decomposed and fused
 *   (fusion calls carry stmt->backward; a region never straddles the split)
 * @forward: (out) (transfer full): the forward trace `computation(...)` returning
 *   `{'output': ..., 'flat_args': [...], 'flat_output': (...)}, ((C0 tensors), (C1 others))`
 * @backward: (out) (transfer full) (nullable): `backward_fn(saved_for_backward, cotangents)`
 *   starting with `C0, C1, = saved_for_backward`, `t6, = cotangents`, `a, b, = C0` (and
 *   `= C1` when non-empty) with their detail comments, returning one gradient or None per flat
 *   input; NULL when there is no backward (nothing requires grad)
 * @error: return location for a #CS_SPLIT_ERROR
 *
 * Walks @joint backwards from the return: a statement is forward when it produces a proxy the
 * forward outputs need (or unpacks an input); get_grad outputs become the cotangents; the rest
 * is the backward (then dead-code eliminated).  saved_for_backward is every proxy read by a
 * backward statement that is available in the forward, in order of first use; tensors go to
 * C0, other proxies (numbers) to C1.
 * Returns: TRUE on success; FALSE with @error set (and both outputs NULL)
 */
gboolean cs_split_forward_backward (const CsTrace *joint,
                                    CsTrace      **forward,
                                    CsTrace      **backward,
                                    GError       **error);

/**
 * cs_split_dup_saved:
 * @forward: (transfer none): a forward trace from cs_split_forward_backward()
 *
 * The saved-for-backward tensors (C0) named in the forward's return, in order.
 * Returns: (transfer full) (element-type CsProxy): the proxies (borrowed from @forward)
 */
GPtrArray *cs_split_dup_saved (const CsTrace *forward);

/** One value saved for the backward more than once (cs_split_duplicate_saved()). */
typedef struct
{
  GPtrArray *saved;    /* element-type CsProxy (borrowed): the saved tensors that hold it, in
                          saved order; at least 2 */
  const CsStmt *producer; /* the statement (top-level or a region's subsymbol) that makes the
                          first of them */
  guint64    extra_bytes; /* bytes saved beyond one copy: (saved->len - 1) * its size */
} CsSavedDuplicate;

/**
 * cs_split_duplicate_saved:
 * @forward: (transfer none): a forward trace from cs_split_forward_backward() (or Thunder's
 *   final forward)
 *
 * The values saved for the backward under several names: saved tensors whose producing
 * expressions are equal, found by value numbering the forward (every statement and every
 * region's subsymbols, in order: the same op on the same value-numbered arguments is the same
 * value; trace inputs are themselves).  Thunder does this where CSE cannot merge the
 * expressions, e.g. the same f32 cast of one bf16 tensor made in three regions and saved three
 * times (lightning-thunder#1501); castscope reproduces it and reports it here rather than doing
 * better.
 * Returns: (transfer full) (element-type CsSavedDuplicate): one entry per duplicated value, in
 *   the order of its first saved tensor (the array frees its entries)
 */
GPtrArray *cs_split_duplicate_saved (const CsTrace *forward);

G_END_DECLS
