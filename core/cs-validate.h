/* cs-validate.h: the name checks Python would make if a parsed trace ran: every proxy a
 * statement reads is defined before it, and no operand is a name the trace never defines.
 * The parser calls cs_validate_trace() on every trace it reads (cs_parse_text), so every
 * command and the app refuse such a trace before any pass runs.
 */
#pragma once

#include <glib.h>

#include "cs-ir.h"

G_BEGIN_DECLS

/**
 * cs_validate_trace:
 * @trace: a trace as the parser made it
 * @name: the input's name for messages ("-" for stdin)
 * @text: (nullable): the text @trace was read from (@len bytes), to find the column of the
 *   offending use; without it the message points at the statement
 * @len: bytes of @text
 * @error: return location for a #CS_PARSE_ERROR (CS_PARSE_ERROR_NAME)
 *
 * Walks the body in order as Python would run it.  Defined at the start: the signature's
 * parameters and the proxies of input annotations (`# a: "cuda:0 bf16[8, 16]"`, for traces
 * printed without a signature).  A statement defines its targets (a call's, an unpack's, an
 * annotated assignment's) once it has run; its decomposition (the subsymbol comments, a fusion
 * region's prims) runs before it, each subsymbol defining its targets in turn.  A name is
 * defined from the first line that defines it on, at every level (a top-level statement may
 * read what an earlier decomposition made, as castscope's own synthetic benchmark traces do).
 * Two errors, each "name:line:col: ..." at the use:
 *  - a proxy read before the line that defines it ("'t0' is used before it is defined (on
 *    line 11)");
 *  - an operand that is a bare name the trace never binds ("'zz' is not defined: ...").
 *    Dotted names (torch.float32), names starting with '_' (Thunder's context objects such as
 *    _torch_memory_format_0) and Python builtins (float, slice, ...) are constants, not errors.
 *    Names in the return statement are not checked for this: trace excerpts (the middle of a
 *    long trace cut out, as ../shared/traces/nb_llama_bf16_augmented_forward_excerpt.txt)
 *    return names their text no longer defines, and the passes keep them as opaque names.
 * Cost: O(statements + values); the text is read only to place an error.
 * Returns: TRUE when the trace is consistent
 */
gboolean cs_validate_trace (const CsTrace *trace,
                            const char    *name,
                            const char    *text,
                            gsize          len,
                            GError       **error);

/**
 * cs_validate_return:
 * @trace: a parsed trace with a return statement
 * @error: return location for a #CS_PARSE_ERROR (CS_PARSE_ERROR_NAME)
 *
 * The check cs_validate_trace() leaves out for excerpts, for a trace that is to be
 * transformed: every bare name its return statement returns is bound (a parameter or a
 * statement's target; dotted names, names starting with '_' and Python builtins are
 * constants, as there).  A returned name nothing defines would make every pass work on a
 * program with no outputs (dead-code elimination keeps nothing), so the pipeline refuses it
 * (cs_pipeline_run(), for traces that are not final) and `render` warns.  The error is
 * "file:line:col: 'NAME' is returned but not defined: ..." at the return statement.
 * Cost: O(size of the returned value).
 * Returns: TRUE when every returned name is bound, and for a trace without a return
 */
gboolean cs_validate_return (const CsTrace *trace,
                             GError       **error);

G_END_DECLS
