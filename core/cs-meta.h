/* cs-meta.h: shape and dtype inference ("meta functions") for the statements of a trace.
 *
 * Each supported op computes the types of its outputs from its arguments, as Thunder's meta
 * functions do (thunder/core/prims.py `*_meta`, thunder/torch/__init__.py, thunder/clang/__init__.py;
 * reference/thunder-traces.md sections 2 and 3).  Untyped outputs get their type set; typed
 * outputs (from the trace's `# t: "cuda:0 bf16[8, 16]"` comments) are checked and a mismatch is
 * an error that names the line, the callee and both types.
 *
 * core never prints: every problem is a #CS_META_ERROR.
 */
#pragma once

#include <glib.h>

#include "cs-ir.h"

G_BEGIN_DECLS

#define CS_META_ERROR (cs_meta_error_quark ())
/** cs_meta_error_quark: the #GQuark of #CS_META_ERROR (codes: #CsMetaError). */
GQuark cs_meta_error_quark (void);

typedef enum
{
  CS_META_ERROR_UNSUPPORTED, /* the op has no meta function in castscope (unknown or bookkeeping op) */
  CS_META_ERROR_ARGS,        /* missing or malformed arguments (wrong kind, untyped input tensor) */
  CS_META_ERROR_SHAPE,       /* shapes that do not fit (broadcast, matmul, reshape numel, bad dim) */
  CS_META_ERROR_DTYPE,       /* dtypes that do not fit (mixed matmul operands, non-bool predicate) */
  CS_META_ERROR_MISMATCH,    /* the inferred type differs from the output's printed type */
} CsMetaError;

/**
 * CsMetaType:
 *
 * The inferred type of one output.  Only tensors are inferred; number outputs are reported as
 * CS_PROXY_NUMBER with @dtype set to the Python type's dtype.
 */
typedef struct
{
  CsProxyKind kind;                 /* CS_PROXY_TENSOR or CS_PROXY_NUMBER */
  CsDtype     dtype;                /* element dtype (strong) */
  guint       rank;                 /* number of dims, <= CS_MAX_DIMS */
  int64_t     shape[CS_MAX_DIMS];   /* elements per dim, outermost first */
  CsDevice    device;               /* where the tensor lives */
} CsMetaType;

/**
 * cs_meta_infer:
 * @trace: (transfer none): trace that owns @stmt and its proxies
 * @stmt: a CS_STMT_CALL statement of @trace
 * @error: return location for a #CS_META_ERROR
 *
 * Infers the output types of @stmt from its arguments.  Outputs that are untyped get the
 * inferred type (cs_proxy_set_tensor()); typed outputs are compared (dtype, shape, device) and a
 * difference is CS_META_ERROR_MISMATCH.  Executor names (`torch.matmul`, op->alias_of) use the
 * meta of the op they implement.  Shapes: int64 elements, outermost first; broadcasting follows
 * PyTorch (trailing dims aligned, 1 stretches).
 *
 * Errors: CS_META_ERROR_UNSUPPORTED for an op without meta (the message names the callee, the
 * statement's output and its line), CS_META_ERROR_ARGS/SHAPE/DTYPE for arguments that do not
 * fit ("line 12: ltorch.matmul: shapes [8, 16] and [15, 16] cannot be multiplied"),
 * CS_META_ERROR_MISMATCH for a printed type that disagrees.  Messages start with
 * "line N: <callee>: " (or "<callee>: " for statements made by a pass, line 0).
 * Source: Thunder meta functions (thunder/core/prims.py, thunder/torch/__init__.py,
 * thunder/clang/__init__.py) at commit 1e22aacb1.
 * Returns: TRUE on success
 */
gboolean    cs_meta_infer          (CsTrace  *trace,
                                    CsStmt   *stmt,
                                    GError  **error);

/**
 * cs_meta_compute:
 * @trace: (transfer none): trace that owns @stmt
 * @stmt: a CS_STMT_CALL statement
 * @out_types: (out caller-allocates) (array length=max_out): inferred types, in the order of
 *   the output tree's leaves (a tuple output such as var_mean's gives 2)
 * @max_out: capacity of @out_types
 * @n_out: (out): number of inferred outputs
 * @error: return location for a #CS_META_ERROR
 *
 * The inference of cs_meta_infer() without touching the outputs.
 * Errors: as cs_meta_infer() except CS_META_ERROR_MISMATCH.
 * Returns: TRUE on success
 */
gboolean    cs_meta_compute        (CsTrace     *trace,
                                    const CsStmt *stmt,
                                    CsMetaType  *out_types,
                                    guint        max_out,
                                    guint       *n_out,
                                    GError     **error);

/**
 * cs_meta_infer_trace:
 * @trace: (transfer none): a trace
 * @error: return location for a #CS_META_ERROR
 *
 * Runs cs_meta_infer() on every top-level CALL statement of @trace in order (not on
 * subsymbols).  Bookkeeping statements (unpacks, checks, `prims.shape`, fusion calls) are
 * skipped.  Stops at the first error.
 * Returns: TRUE when every statement's types are consistent
 */
gboolean    cs_meta_infer_trace    (CsTrace  *trace,
                                    GError  **error);

/**
 * cs_meta_check_trace:
 * @trace: (transfer none): a trace as parsed (read only: no output gets a type)
 * @error: return location for a #CS_META_ERROR
 *
 * The shape and dtype check of a trace before any pass runs: every top-level CALL statement
 * that has a meta function (cs_meta_supports()) is inferred from its arguments' types as
 * cs_meta_infer() does, without typing untyped outputs.  A statement whose arguments do not
 * fit (CS_META_ERROR_SHAPE, CS_META_ERROR_DTYPE: a linear whose weight's in-features differ
 * from the input's last dim) or whose printed output type differs from the inferred one
 * (CS_META_ERROR_MISMATCH) stops the check.  A statement the meta cannot read (an untyped or
 * non-tensor operand, CS_META_ERROR_ARGS, e.g. the output of an op without meta) is skipped:
 * that is not a conflict.
 * Errors: the first conflict, in the error's code, as "file:line:col: <callee>: <reason>; its
 * tensor arguments: <name> <type>, ..." (@trace's file, "<trace>" without one; the statement's
 * line and column, 1-based; without a line "file: <callee>: ..."; the typed tensors it reads,
 * at most 6), e.g. "mlp.txt:17:3: ltorch.linear: shapes [32, 256] and [64, 128] cannot be
 * multiplied (weight is [out, in]); its tensor arguments: t1 bf16[32, 256], w2 bf16[64, 128],
 * b2 bf16[64]".
 * Cost: one meta inference per top-level statement.
 * Returns: TRUE when no statement's types conflict
 */
gboolean    cs_meta_check_trace    (const CsTrace *trace,
                                    GError       **error);

/**
 * cs_meta_supports:
 * @stmt: a CALL statement
 *
 * Returns: TRUE when castscope has a meta function for @stmt's op (after following alias_of)
 */
gboolean    cs_meta_supports       (const CsStmt *stmt);

/**
 * cs_meta_broadcast_shapes:
 * @a: first shape (outermost first)
 * @rank_a: rank of @a
 * @b: second shape
 * @rank_b: rank of @b
 * @out: (out caller-allocates): the common shape, CS_MAX_DIMS entries
 * @rank_out: (out): its rank, max(@rank_a, @rank_b)
 *
 * PyTorch broadcasting: trailing dims aligned; a dim of 1 stretches to the other.
 * Source: thunder/clang/utils.py `compute_broadcast_shape`.
 * Returns: FALSE when two aligned dims differ and neither is 1
 */
gboolean    cs_meta_broadcast_shapes (const int64_t *a,
                                      guint          rank_a,
                                      const int64_t *b,
                                      guint          rank_b,
                                      int64_t       *out,
                                      guint         *rank_out);

/**
 * cs_meta_canonicalize_dim:
 * @rank: tensor rank
 * @dim: a dim index, possibly negative (Python style)
 * @out: (out): the dim in [0, rank) (for rank 0, -1 and 0 map to 0)
 *
 * Source: thunder/core/utils.py `canonicalize_dim` (wrap_scalar=True).
 * Returns: FALSE when @dim is out of range
 */
gboolean    cs_meta_canonicalize_dim (guint    rank,
                                      int64_t  dim,
                                      guint   *out);

/**
 * cs_meta_format_shape:
 * @shape: dims, outermost first
 * @rank: number of dims
 *
 * Returns: (transfer full): "[8, 16]" as Thunder prints shapes
 */
char       *cs_meta_format_shape   (const int64_t *shape,
                                    guint          rank);

typedef enum
{
  CS_META_SLICE_OK,
  CS_META_SLICE_NOT_INT,       /* a bound or the step is not an int */
  CS_META_SLICE_BAD_STEP,      /* step < 1 */
  CS_META_SLICE_OUT_OF_RANGE,  /* start or stop below -len */
} CsMetaSlice;

CsMetaSlice cs_meta_slice_bounds (const CsValue *slice, int64_t len, int64_t out[3]);

G_END_DECLS
