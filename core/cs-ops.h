/* cs-ops.h: the op table.  One entry per `prims.*`, `ltorch.*`, `torch.*` and executor name
 * castscope knows.  The entries carry identity only (name, category, tags, type-promotion kind);
 * each module keys its own behaviour on #CsOpId (meta and decomposition in core/cs-meta.c and
 * core/cs-decompose.c, VJPs in core/cs-grad.c, CPU reference in core/cs-ref.c, CUDA emitters
 * in kernels/).
 *
 * Source: thunder/core/prims.py (PrimIDs and tags), thunder/torch/__init__.py (ltorch symbols),
 * thunder/executors/torchex.py (torch executor names); reference/thunder-traces.md 3.1, 6.1.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef struct _CsOp      CsOp;   /* the same typedef as cs-ir.h's: the table knows no IR */

typedef enum
{
  CS_OP_CAT_ELEMENTWISE,  /* unary/binary/ternary elementwise math, comparisons, where */
  CS_OP_CAT_REDUCTION,    /* sum, amax, var_mean ... */
  CS_OP_CAT_SHAPE,        /* reshape, transpose, broadcast_in_dim, slice, cat ... (SHAPE_OP) */
  CS_OP_CAT_CAST,         /* convert_element_type, ltorch.to, .float() ... */
  CS_OP_CAT_MATMUL,       /* matmul, linear (MATMUL_OP) */
  CS_OP_CAT_FUSION,       /* nvFusionN / TorchCompileN / CUDAGraphN region calls */
  CS_OP_CAT_BOOKKEEPING,  /* unpack, checks, del, return, get_grad/put_grad, clear_collection */
  CS_OP_CAT_CREATION,     /* full, iota, uniform, zeros, arange ... */
  CS_OP_CAT_INDEXING,     /* take, gather, embedding ... */
  CS_OP_CAT_COMPOSITE,    /* ltorch composites: softmax, layer_norm, rms_norm, gelu, cross_entropy */
  CS_OP_CAT_ATTENTION,    /* scaled_dot_product_attention and its executor forms */
  CS_OP_CAT_OPAQUE,       /* a name the table does not know */
  CS_N_OP_CATS
} CsOpCategory;

/** Thunder's ELEMENTWISE_TYPE_PROMOTION_KIND (thunder/core/utils.py), or NONE. */
typedef enum
{
  CS_PROMO_NONE,          /* not an elementwise promotion op */
  CS_PROMO_DEFAULT,
  CS_PROMO_PRESERVE,
  CS_PROMO_INT_TO_FLOAT,
  CS_PROMO_ALWAYS_BOOL,
  CS_PROMO_COMPLEX_TO_FLOAT,
  CS_PROMO_BOOL_TO_LONG,
  CS_PROMO_NUMBER_TO_INT,
} CsPromoKind;

/** Tags (bit flags) */
typedef enum
{
  CS_OP_TAG_PRIM          = 1 << 0, /* a prims.* symbol (no decomposition) */
  CS_OP_TAG_FUSIBLE       = 1 << 1, /* nvFuser can execute it (prims) or all its prims (ltorch) */
  CS_OP_TAG_SHAPE_OP      = 1 << 2, /* Thunder's SHAPE_OP tag */
  CS_OP_TAG_REDUCTION     = 1 << 3, /* REDUCTION_OP */
  CS_OP_TAG_RANDOM        = 1 << 4, /* RANDOM_OP (never CSE'd) */
  CS_OP_TAG_MATMUL        = 1 << 5, /* MATMUL_OP */
  CS_OP_TAG_DONT_DCE      = 1 << 6, /* checks, return, put_grad, print, copy_ */
  CS_OP_TAG_UNARY         = 1 << 7, /* elementwise with one tensor input */
  CS_OP_TAG_BINARY        = 1 << 8, /* elementwise with two inputs */
  CS_OP_TAG_TERNARY       = 1 << 9, /* where, lerp */
  CS_OP_TAG_EXECUTOR      = 1 << 10,/* an executor's name for a symbol (torch.matmul, Tensor.expand,
                                       torch_slice_prim_impl); semantics = the op in alias_of */
} CsOpTag;

#include "cs-ops-list.h"

struct _CsOp
{
  CsOpId        id;        /* CS_OP_<NAME> */
  const char   *name;      /* as printed: "prims.add", "ltorch.add", "torch.matmul" */
  const char   *short_name;/* name without module: "add" */
  CsOpCategory  category;
  guint         tags;      /* CsOpTag bits */
  CsPromoKind   promo;     /* type-promotion kind for elementwise ops */
  CsOpId        alias_of;  /* executor names: the ltorch/prim op they implement; else id itself */
};

/**
 * cs_op_lookup:
 * @callee: the callee as printed (`prims.add`, `ltorch.add`, `nvFusion3`, `torch.matmul`)
 *
 * Finds the op-table entry.  Fusion calls (`nvFusion<k>`, `TorchCompile<k>`, `CUDAGraph<k>`)
 * map to CS_OP_FUSION.
 * Returns: (transfer none): the entry, or the opaque entry (CS_OP_OPAQUE) for unknown names;
 * never NULL
 */
const CsOp   *cs_op_lookup       (const char *callee);
/** The entry for @id. */
const CsOp   *cs_op_get          (CsOpId id);
/**
 * cs_op_semantic:
 * @op: an entry of the op table (from cs_op_get() or cs_op_lookup(); never NULL)
 *
 * The entry of the op @op implements (follows alias_of for executor names: torch.matmul ->
 * ltorch.matmul).  Inline: the passes call it for nearly every statement they look at.  The
 * table is indexed by id, so the entry for alias_of lies (alias_of - id) entries from @op.
 * Returns: (transfer none): that entry; the opaque entry when alias_of is out of range
 */
static inline const CsOp *
cs_op_semantic (const CsOp *op)
{
  if (G_UNLIKELY ((guint) op->alias_of >= CS_N_OPS))
    return cs_op_get (CS_OP_OPAQUE);
  return op + ((gssize) op->alias_of - (gssize) op->id);
}
const char   *cs_op_category_name(CsOpCategory cat);
gboolean      cs_op_has_tag      (const CsOp *op, CsOpTag tag);
/** TRUE when @op is a fusion region call. */
gboolean      cs_op_is_fusion    (const CsOp *op);

G_END_DECLS
