/* cs-ops.h: the op registry.  One entry per `prims.*`, `ltorch.*`, `torch.*` and executor name
 * castscope knows, declared once in core/cs-ops-list.h: its identity (name, category, tags,
 * type-promotion kind, the op an executor name implements) and its meaning -- the argument
 * schema the passes read arguments through, the elementwise formula of a prim (from which the
 * CPU reference's f32/f64 paths and the CUDA emitter are derived), the prim an ltorch op lowers
 * to, how it is differentiated and which executors run it.  Meta and composite decompositions
 * live in core/cs-meta.c and core/cs-decompositions.c, VJP rules in core/cs-vjp.c's rule table;
 * tests/test-core-registry.c walks the registry and checks every piece an entry declares.
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
  CS_OP_CAT_DISTRIBUTED,  /* thunder/distributed/prims.py: collectives, wait, synchronize,
                             bucketing (cs-dist.h) */
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
  CS_OP_TAG_ATEN          = 1 << 11,/* an aten op whose arguments fit no ltorch op: decomposed by
                                       its lowering to ltorch calls (core/cs-aten-lower.c) */
} CsOpTag;

#include "cs-ops-list.h"

/** How gradients flow through an op (Thunder: the grad transform's rule lookups). */
typedef enum
{
  CS_OP_DIFF_NONE = 0,    /* no rule of its own: grad decomposes it, or fails naming it */
  CS_OP_DIFF_VJP,         /* a VJP rule in grad's rule table (cs_grad_has_rule()) */
  CS_OP_DIFF_CONST,       /* creates no gradient association (comparisons, creation, shape
                             queries: Thunder's nondifferentiable symbols) */
} CsOpDiff;

/**
 * CsMetaKind:
 *
 * The meta family of an op: which of core/cs-meta.c's factories infers its output shapes and
 * dtypes (a table by kind there), with #CsOp.meta_arg its parameter.  Elementwise rows get
 * theirs from their category, tags and promotion kind (a prim: CS_META_EW_PRIM; an ltorch op:
 * CS_META_EW under its own kind); other rows declare one (META in cs-ops-list.h) or have a
 * rule of their own in cs-meta.c (CS_META_NONE).
 */
typedef enum
{
  CS_META_NONE = 0,       /* no family: a rule of the op's own in cs-meta.c, or none */
  CS_META_EW_PRIM,        /* prims.py's elementwise meta: tensor operands of one shape and dtype
                             (numbers allowed), bool for ALWAYS_BOOL, real for COMPLEX_TO_FLOAT;
                             a predicate (CS_EW_PREDICATE) must be bool */
  CS_META_EW,             /* ltorch elementwise: broadcast operands, the dtype of type promotion
                             under the kind in meta_arg (a CsPromoKind) */
  CS_META_WHERE,          /* ltorch.where(pred, a, b): a bool predicate, all three broadcast,
                             PRESERVE over a and b */
  CS_META_SAME,           /* the first tensor's shape, dtype and device; meta_arg: the least rank
                             it takes (tril: 2) */
  CS_META_CAST,           /* the first tensor's shape and device, dtype meta_arg (a CsDtype) */
  CS_META_REDUCTION_PRIM, /* prims.sum/amax/...(a, dims): a's dtype, the dims removed */
  CS_META_REDUCTION,      /* ltorch reductions (a, dim, keepdim, dtype=), Thunder's `_reduction`
                             dtype rule in meta_arg (a CsMetaReduce) */
  CS_META_MATMUL,         /* matmul(a, b) with torch.matmul's broadcasting */
  CS_META_LINEAR,         /* linear(a, w, bias) */
  CS_N_META_KINDS
} CsMetaKind;

/** The dtype rules of the ltorch reductions (thunder/torch/__init__.py `_reduction`). */
typedef enum
{
  CS_META_REDUCE_KEEP,    /* the input's dtype (amax, amin) */
  CS_META_REDUCE_SUM,     /* dtype=, else int64 for exact inputs, else the input's */
  CS_META_REDUCE_MEAN,    /* dtype=, else the input's; a float or complex dtype only */
  CS_META_REDUCE_VAR,     /* (var, mean): the real dtype and the input's; keepdim keyword-only */
  CS_META_REDUCE_FLOAT,   /* float32 for exact inputs, else the input's (logsumexp) */
} CsMetaReduce;

/** Executors that run an op (bit flags). */
typedef enum
{
  CS_OP_EXEC_CPU  = 1 << 0, /* the CPU reference (core/cs-ref.c) runs it */
  CS_OP_EXEC_CUDA = 1 << 1, /* the CUDA emitter (kernels/cs-cuda-codegen.c) generates it */
} CsOpExec;

/** Argument names of the schemas (the keyword Thunder prints). */
#define CS_ARG_NAMES(X) \
  X (A, "a") X (B, "b") X (PRED, "pred") X (SHAPE, "shape") \
  X (BROADCAST_DIMENSIONS, "broadcast_dimensions") X (PERMUTATION, "permutation") \
  X (DIMS, "dims") X (DIM, "dim") X (DTYPE, "dtype") X (DEVICE, "device") \
  X (BETA, "beta") X (THRESHOLD, "threshold") X (START, "start") X (END, "end") X (WEIGHT, "weight") \
  X (W, "w") X (BIAS, "bias") X (QUERY, "query") X (KEY, "key") X (VALUE, "value") \
  X (ATTN_MASK, "attn_mask") X (DROPOUT_P, "dropout_p") X (IS_CAUSAL, "is_causal") X (SCALE, "scale") \
  X (GRAD_OUT, "grad_out") X (OUT, "out") X (LOGSUMEXP, "logsumexp") X (CUM_SEQ_Q, "cum_seq_q") \
  X (CUM_SEQ_K, "cum_seq_k") X (MAX_Q, "max_q") X (MAX_K, "max_k") X (PHILOX_SEED, "philox_seed") \
  X (PHILOX_OFFSET, "philox_offset") X (ORDER, "order") X (INDICES, "indices") \
  X (NUM_WEIGHTS, "num_weights") X (PADDING_IDX, "padding_idx") \
  X (SCALE_GRAD_BY_FREQ, "scale_grad_by_freq") X (SPARSE, "sparse") \
  X (START_INDICES, "start_indices") X (END_INDICES, "end_indices") X (STRIDES, "strides") \
  X (PADDING_VALUE, "padding_value") X (PADDING_CONFIG, "padding_config") \
  X (CORRECTION, "correction") X (INDEX, "index") X (SRC, "src") X (MAX_NORM, "max_norm") \
  X (NORM_TYPE, "norm_type") X (FILL_VALUE, "fill_value") X (LENGTH, "length") X (STEP, "step") \
  X (MINVAL, "minval") X (MAXVAL, "maxval") X (SEED, "seed") X (OFFSET, "offset") \
  X (G, "g") X (TARGET, "target") X (REDUCTION, "reduction") X (IGNORE_INDEX, "ignore_index") \
  X (TOTAL_WEIGHT, "total_weight") X (ATTN_BIAS, "attn_bias") \
  X (COMPUTE_LOG_SUMEXP, "compute_log_sumexp") X (RETURN_DEBUG_MASK, "return_debug_mask") \
  X (GRAD_INPUT_MASK, "grad_input_mask") X (GRAD_OUT_, "grad_out_") X (KEEPDIM, "keepdim") \
  X (INPLACE, "inplace") X (SIZE_OR_SECTIONS, "size_or_sections") X (MASK, "mask") \
  X (DIAGONAL, "diagonal") X (MEMORY_FORMAT, "memory_format") X (SIZE_AVERAGE, "size_average") \
  X (REDUCE, "reduce") X (LABEL_SMOOTHING, "label_smoothing") \
  X (DIM0, "dim0") X (DIM1, "dim1") X (START_DIM, "start_dim") X (END_DIM, "end_dim") \
  X (NORMALIZED_SHAPE, "normalized_shape") X (EPS, "eps") X (P, "p") X (TRAINING, "training") \
  X (OUTPUT, "output") X (APPROXIMATE, "approximate") X (ALPHA, "alpha") \
  X (ROUNDING_MODE, "rounding_mode") X (TENSOR_DTYPE_OR_DEVICE, "tensor_dtype_or_device") \
  X (OPTIONAL_POSITIONAL_DTYPE, "optional_positional_dtype") X (COPY, "copy") \
  X (STACKLEVEL, "_stacklevel") \
  CS_ARG_NAMES_ATEN (X) \
  CS_ARG_NAMES_DIST (X)

/* The arguments of torch.compile's aten ops (native_functions.yaml) no ltorch op names */
#define CS_ARG_NAMES_ATEN(X) \
  X (SELF, "self") X (MAT1, "mat1") X (MAT2, "mat2") X (HALF_TO_FLOAT, "half_to_float") \
  X (GRAD_OUTPUT, "grad_output") X (INPUT_DTYPE, "input_dtype") X (SPARSE_GRAD, "sparse_grad") \
  X (INPUT, "input") X (MEAN, "mean") X (RSTD, "rstd") X (OUTPUT_MASK, "output_mask") \
  X (SPLIT_SIZE, "split_size") X (SPLIT_SIZES, "split_sizes") X (OTHER, "other") X (C, "c") \
  X (S, "s") X (LAYOUT, "layout") X (PIN_MEMORY, "pin_memory")

/* The arguments of the distributed prims (thunder/distributed/prims.py), a block of their own */
#define CS_ARG_NAMES_DIST(X) \
  X (GROUP, "group") X (OP, "op") X (DO_ASYNC, "do_async") X (SKIP_CLONE, "skip_clone") \
  X (ROOT, "root") X (DISTPARALLEL_TYPE, "distparallel_type") X (TENSORS, "tensors") \
  X (BUCKET_KEY, "bucket_key") X (BUFFER, "buffer") X (INDEX_OF_DST_VIEW, "index_of_dst_view") \
  X (TENSOR, "tensor") X (WORLD_SIZE, "world_size") X (MODE, "mode") X (GRAD, "grad") \
  X (PARAM_FQN, "param_fqn") X (COMPILE_DATA, "compile_data") X (LAYER_TYPE, "layer_type") \
  X (T, "t")

#define CS_ARG_ENUM_ROW(id, kw) CS_ARG_##id,
typedef enum
{
  CS_ARG_NAMES (CS_ARG_ENUM_ROW)
  CS_N_ARG_NAMES
} CsArgName;
#undef CS_ARG_ENUM_ROW

/** What an argument of a schema holds. */
typedef enum
{
  CS_ARG_KIND_TENSOR,     /* a tensor proxy */
  CS_ARG_KIND_OPERAND,    /* a tensor or a number (elementwise operands) */
  CS_ARG_KIND_NUMBER,     /* a Python number */
  CS_ARG_KIND_INTS,       /* a sequence of ints */
  CS_ARG_KIND_INT_TUPLES, /* a sequence of int tuples (pad's (lo, hi, interior) per dim) */
  CS_ARG_KIND_DTYPE,      /* a dtype */
  CS_ARG_KIND_DEVICE,     /* a device */
  CS_ARG_KIND_OBJECT,     /* a context object Thunder prints by name: a ProcessGroup, an enum
                             member (_DistributedReduceOps_SUM_2), a CompileData */
  CS_ARG_KIND_TENSORS,    /* a list of tensor proxies */
  CS_ARG_KIND_STRING,     /* a Python string */
} CsArgKind;

/** One argument of an op's schema: its position is its index in the schema. */
typedef struct
{
  CsArgName    name;      /* its keyword (cs_arg_name()) */
  CsArgKind    kind;      /* what the argument holds */
  gboolean     kw_only;   /* keyword-only (no position) */
  const char  *dflt;      /* default as Thunder's signature writes it ("1.0", "None"); NULL:
                             required */
} CsOpArg;

/** Flags of an elementwise formula. */
typedef enum
{
  CS_EW_FLOAT_ONLY = 1 << 0, /* takes float dtypes only (transcendentals): an integer operand
                                is an error, not integer math */
  CS_EW_INT_ONLY   = 1 << 1, /* takes integer and bool dtypes only (bitwise ops) */
  CS_EW_OPERAND_CTYPE = 1 << 2, /* a bool result computed in its operands' C type (the
                                   comparisons), not in the result's */
  CS_EW_PREDICATE  = 1 << 3, /* the first operand is a bool predicate, outside type promotion
                                (where: PRESERVE over the other two) */
  CS_EW_SELECT     = 1 << 4, /* the result is one of the operands, rounded by nothing: the CPU
                                reference selects in f64 in every mode, the CUDA emitter does not
                                round it to the result's dtype (where) */
  CS_EW_SMALL_POWERS = 1 << 5, /* pow: the CUDA emitter writes a float base raised to the
                                  constant 2 or 3 as x*x or x*x*x, as PyTorch's pow kernel */
} CsEwFlags;

/**
 * CsEwUnary:
 *
 * The formula of a unary elementwise prim, the one definition its executors derive from: the
 * CPU reference computes f64 values with @f64 and (exact mode, f32/bf16/f16 tensors) f32 values
 * with @f32; the CUDA emitter writes the C expression for the operand's C type, `@` standing
 * for the operand.  A NULL expression: the CUDA emitter does not generate it for that type.
 */
typedef struct
{
  double      (*f64) (double x);  /* f64 and integer values */
  float       (*f32) (float x);   /* f32 values, rounded by the reference as the dtype says */
  const char   *cuda_f32;         /* expression over float operands ("log1pf (@)") */
  const char   *cuda_f64;         /* over double operands ("log1p (@)") */
  const char   *cuda_int;         /* over long long operands; NULL: not generated */
  const char   *cuda_bool;        /* over bool operands; NULL: the float expression */
  guint         flags;            /* CsEwFlags */
} CsEwUnary;

/**
 * CsEwBinary:
 *
 * The formula of a binary elementwise prim (a, b), the one definition its executors derive
 * from.  The CPU reference computes float values with @f64 (f64 mode, and f64 tensors in exact
 * mode) or @f32 (exact mode, f32/bf16/f16 values: the operands are rounded to f32 first, the
 * result is rounded as the dtype says), and integer and bool values with @i64 (the values held
 * as doubles, as the reference holds every value), or @f64 where @i64 is NULL.  An integer-only
 * formula (CS_EW_INT_ONLY) has @i64 alone, a float-only one (CS_EW_FLOAT_ONLY) no @i64.
 *
 * The CUDA expressions are chosen by the C type the value is computed in (the result's, or with
 * CS_EW_OPERAND_CTYPE the operands'): `@0` and `@1` stand for the operands, `@t` for that C
 * type.  A NULL expression: the CUDA emitter does not generate the prim for that type.
 */
typedef struct
{
  double      (*f64) (double a, double b);  /* float values in f64 */
  float       (*f32) (float a, float b);    /* float values in f32 (exact mode) */
  gboolean    (*i64) (double a, double b, double *out); /* integer and bool values; FALSE:
                                                           integer division by zero */
  const char   *cuda_f32;         /* over float ("(@t) (@0) + (@t) (@1)") */
  const char   *cuda_f64;         /* over double */
  const char   *cuda_int;         /* over long long */
  const char   *cuda_bool;        /* over bool */
  guint         flags;            /* CsEwFlags */
} CsEwBinary;

/**
 * CsEwTernary:
 *
 * The formula of a ternary elementwise prim (where, lerp): as #CsEwBinary with three operands
 * (`@0`, `@1`, `@2`).  Integer and bool values use @f64; @f32 is NULL for a selection
 * (CS_EW_SELECT), which the reference computes in f64 in every mode.
 */
typedef struct
{
  double      (*f64) (double a, double b, double c);  /* f64, integer and bool values */
  float       (*f32) (float a, float b, float c);     /* float values in f32 (exact mode) */
  const char   *cuda_f32;         /* over float */
  const char   *cuda_f64;         /* over double */
  const char   *cuda_int;         /* over long long */
  const char   *cuda_bool;        /* over bool */
  guint         flags;            /* CsEwFlags */
} CsEwTernary;

struct _CsOp
{
  CsOpId        id;        /* CS_OP_<NAME> */
  const char   *name;      /* as printed: "prims.add", "ltorch.add", "torch.matmul" */
  const char   *short_name;/* name without module: "add" */
  CsOpCategory  category;  /* coarse class (cs_op_category_name()) */
  guint         tags;      /* CsOpTag bits */
  CsPromoKind   promo;     /* type-promotion kind for elementwise ops */
  CsOpId        alias_of;  /* executor names and aten/operator aliases: the ltorch/prim op they
                              implement; else id itself */
  /* meaning (DEF column of cs-ops-list.h; zero where the row declares nothing) */
  const CsOpArg *args;     /* argument schema, n_args entries in positional order; NULL: none
                              declared (the passes read such an op's arguments themselves) */
  guint         n_args;    /* entries of args */
  gboolean      variadic;  /* the signature ends in *args (reshape's *shape): positional
                              arguments past the schema's are allowed */
  const CsEwUnary *ew1;    /* formula of a unary elementwise prim, else NULL */
  const CsEwBinary *ew2;   /* formula of a binary elementwise prim, else NULL */
  const CsEwTernary *ew3;  /* formula of a ternary elementwise prim, else NULL */
  CsOpId        lowers_to; /* an ltorch op that decomposes to one prim under its promotion
                              kind (ltorch.exp -> prims.exp); CS_OP_OPAQUE otherwise */
  CsOpDiff      diff;      /* how gradients flow through it */
  guint         exec;      /* CsOpExec bits (derived for rows with a formula) */
  CsMetaKind    meta;      /* its meta family (derived for elementwise rows), or CS_META_NONE */
  guint         meta_arg;  /* the family's parameter (see CsMetaKind) */
};

/**
 * cs_op_lookup:
 * @callee: the callee as printed (`prims.add`, `ltorch.add`, `nvFusion3`, `torch.matmul`)
 *
 * Finds the op-table entry.  Fusion calls (`nvFusion<k>`, `TorchCompile<k>`, `CUDAGraph<k>`)
 * map to CS_OP_FUSION; torch.compile's `torch.ops.aten.mm.default` (any overload) to the row
 * `aten.mm`, `torch.ops.prims.convert_element_type.default` to `prims.convert_element_type`.
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

/** cs_arg_name: the keyword of @name ("broadcast_dimensions"); static. */
const char   *cs_arg_name        (CsArgName name);
/**
 * cs_op_find_arg:
 * @op: an entry of the op table
 * @name: an argument name
 * @pos: (out) (optional): its position (G_MAXUINT for a keyword-only argument)
 *
 * Returns: (transfer none) (nullable): @name's entry in @op's schema, NULL when @op's schema
 * has no such argument
 */
const CsOpArg *cs_op_find_arg    (const CsOp *op, CsArgName name, guint *pos);
G_END_DECLS
