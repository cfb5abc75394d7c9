/* cs-dist.h: the distributed prims of thunder/distributed/prims.py (DDP, FSDP, tensor parallel)
 * as castscope reads them: which statement is which collective, the reduce op, the parallel
 * type and process-group size of its arguments, and the bytes a collective moves.
 *
 * Thunder prints the non-printable arguments of these prims as context-object names
 * (thunder/core/trace.py `_make_name`): a ProcessGroup as `_torch__C__distributed_c10d_ProcessGroup_0`,
 * an enum member as `_<EnumClass>_<MEMBER>_<n>` (`_DistributedReduceOps_SUM_2`,
 * `_DistParallelType_REPLICATED_1`).  Neither the group's size nor its ranks are printed; the
 * size is read from the shapes of the statements that change them (all_gather multiplies dim 0
 * by it, reduce_scatter divides it, a FULLY_SHARDED synchronize unshards dim 0), else it is 1:
 * a world of one.
 *
 * Also Thunder's two trace passes of distributed training: sort_waits (communication overlap)
 * and the DDP gradient bucketing.
 *
 * Source: thunder/distributed/prims.py, thunder/distributed/bucketing.py,
 * thunder/distributed/utils.py, thunder/distributed/transforms/ddp.py at commit 1e22aacb1.
 */
#pragma once

#include <glib.h>

#include "cs-ir.h"
#include "cs-ops.h"

G_BEGIN_DECLS

/** Thunder's DistributedReduceOps (thunder/distributed/prims.py). */
typedef enum
{
  CS_DIST_REDUCE_SUM,
  CS_DIST_REDUCE_AVG,
  CS_DIST_REDUCE_PRODUCT,
  CS_DIST_REDUCE_MIN,
  CS_DIST_REDUCE_MAX,
  CS_DIST_REDUCE_BAND,
  CS_DIST_REDUCE_BOR,
  CS_DIST_REDUCE_BXOR,
} CsDistReduceOp;

/** Thunder's DistParallelType (thunder/core/proxies.py). */
typedef enum
{
  CS_DIST_PARALLEL_NONE,
  CS_DIST_PARALLEL_REPLICATED,     /* DDP: every rank holds the whole parameter */
  CS_DIST_PARALLEL_FULLY_SHARDED,  /* FSDP: rank r holds chunk r of dim 0 */
  CS_DIST_PARALLEL_COLUMN_WISE,    /* tensor parallel */
  CS_DIST_PARALLEL_ROW_WISE,
} CsDistParallelType;

/** Thunder's TensorParallelLayerType (thunder/distributed/tensor_parallel/common.py). */
typedef enum
{
  CS_DIST_TP_COLUMN_PARALLEL_LINEAR,
  CS_DIST_TP_ROW_PARALLEL_LINEAR,
  CS_DIST_TP_COLUMN_PARALLEL_EMBED,
  CS_DIST_TP_ROW_PARALLEL_EMBED,
} CsDistTpLayerType;

/**
 * cs_dist_is_collective:
 * @op: an op-table entry (executor names are followed to their prim)
 *
 * Returns: TRUE for the prims that communicate: all_gather, all_reduce, broadcast,
 * reduce_scatter (synchronize communicates only once grad has lowered it)
 */
gboolean     cs_dist_is_collective   (const CsOp *op);
/**
 * cs_dist_stmt_communicates:
 * @stmt: a statement
 *
 * Returns: TRUE for a collective call, and for a FULLY_SHARDED synchronize (Thunder's
 * augmented forward makes it an all_gather and its wait; castscope keeps the one statement)
 */
gboolean     cs_dist_stmt_communicates (const CsStmt *stmt);
/** TRUE for every prim of thunder/distributed/prims.py (and their torch executor names). */
gboolean     cs_dist_is_distributed  (const CsOp *op);
/** TRUE for the bucketing prims: pack, unpack, update_bucket_view, pack_for_fsdp, unpack_for_fsdp. */
gboolean     cs_dist_is_bucketing    (const CsOp *op);

/**
 * cs_dist_enum_member:
 * @v: an argument value: a context-object NAME `_DistributedReduceOps_SUM_2`, a dotted name
 *   `thunder.distributed.prims.DistributedReduceOps.SUM` or a string 'SUM'
 * @enum_class: the enum's class name ("DistributedReduceOps")
 *
 * Returns: (transfer none) (nullable): the member's name ("SUM", "FULLY_SHARDED") inside
 * @v's text, as a string of the process (interned); NULL when @v names no member of @enum_class
 */
const char  *cs_dist_enum_member     (const CsValue *v, const char *enum_class);
/** cs_dist_reduce_op: the DistributedReduceOps @v names.  Returns: FALSE when it names none. */
gboolean     cs_dist_reduce_op       (const CsValue *v, CsDistReduceOp *out);
/** The lower-case name of @op ("sum"), as castscope prints it. */
const char  *cs_dist_reduce_op_name  (CsDistReduceOp op);
/** cs_dist_parallel_type: the DistParallelType @v names.  Returns: FALSE when it names none. */
gboolean     cs_dist_parallel_type   (const CsValue *v, CsDistParallelType *out);
/** cs_dist_tp_layer_type: the TensorParallelLayerType @v names.  Returns: FALSE when none. */
gboolean     cs_dist_tp_layer_type   (const CsValue *v, CsDistTpLayerType *out);

/**
 * cs_dist_stmt_group_size:
 * @stmt: a call of a distributed prim whose input and output are typed
 *
 * The group size @stmt's own shapes imply: all_gather out[d] / in[d] (d = dim, default 0),
 * reduce_scatter in[d] / out[d], a FULLY_SHARDED synchronize out[0] / in[0], the world_size
 * argument of pack_for_fsdp / unpack_for_fsdp, a tensor-parallel synchronize that gathers or
 * splits the last dim.
 * Returns: the size (>= 1), or 0 when @stmt does not tell it (another op, untyped, a ratio
 * that is not a whole number)
 */
guint        cs_dist_stmt_group_size (const CsStmt *stmt);
/**
 * cs_dist_group_size:
 * @trace: a trace
 * @group: (nullable): the ProcessGroup argument (a NAME); NULL: any group of @trace
 *
 * The size of @group: the first statement of @trace (top level, in order) on the same group
 * whose shapes tell it (cs_dist_stmt_group_size()), else 1 (a world of one, which is also what
 * a DDP trace without sharded shapes implies).  O(statements of @trace).
 * Returns: >= 1
 */
guint        cs_dist_group_size      (const CsTrace *trace, const CsValue *group);

/**
 * CsDistCommCost:
 *
 * The communication of one collective, per rank, as NCCL's performance notes count it
 * (nccl-tests doc/PERFORMANCE.md): the payload S in bytes (the larger of input and output:
 * the full tensor), the bus bytes S * factor with factor 2(n-1)/n for all_reduce, (n-1)/n for
 * all_gather and reduce_scatter, 1 for broadcast, and the time bus bytes / bus bandwidth.
 */
typedef struct
{
  CsDistReduceOp reduce_op;    /* all_reduce / reduce_scatter: the op; SUM otherwise */
  gboolean     has_reduce_op;  /* the statement names a reduce op */
  CsDtype      dtype;          /* the element dtype moved */
  guint        group_size;     /* n, >= 1 */
  double       payload_bytes;  /* S: bytes of the full (unsharded) tensor */
  double       bus_bytes;      /* S * factor(n): bytes each rank sends over the link */
  double       est_ms;         /* bus_bytes / bus bandwidth, milliseconds; 0 for n = 1 */
} CsDistCommCost;

/** H200 NVLink 4: 450 GB/s each direction per GPU (NVIDIA H200 datasheet: 900 GB/s
 *  bidirectional); the peak NCCL's bus bandwidth approaches for large messages. */
#define CS_DIST_NVLINK_BUS_BYTES_PER_S 450.0e9

/**
 * cs_dist_comm_cost:
 * @stmt: a call that communicates (cs_dist_stmt_communicates()) with typed tensors; a
 *   FULLY_SHARDED synchronize costs as the all_gather it stands for
 * @group_size: n (cs_dist_group_size()), >= 1
 * @bus_bytes_per_s: the bus bandwidth (CS_DIST_NVLINK_BUS_BYTES_PER_S)
 * @out: (out): its cost
 *
 * Returns: FALSE when @stmt is not a collective or its tensor sizes are unknown
 */
gboolean     cs_dist_comm_cost       (const CsStmt *stmt, guint group_size, double bus_bytes_per_s,
                                      CsDistCommCost *out);

/** cs_dist_trace_has_wait: TRUE when a top-level statement of @trace is a wait (Thunder's
 *  has_wait_prims, thunder/distributed/utils.py). */
gboolean     cs_dist_trace_has_wait  (const CsTrace *trace);
/**
 * cs_dist_sort_waits:
 * @trace: (transfer none): a trace (the joint trace, before fusion)
 * @pass: (nullable): the pass name of the result
 *
 * Thunder's sort_waits (thunder/distributed/utils.py, applied by maybe_sort_waits in
 * thunder/__init__.py to the joint trace before transform_for_execution): a top-down
 * topological sort of the statements by dataflow that, among the statements whose inputs are
 * ready, takes a collective first (the one with the larger input first), else the earliest
 * other statement of the trace, a wait only when nothing else is ready, the return last; ties
 * go to the statement that became ready first, as Python's min over Thunder's list of
 * eligible nodes.  So every wait moves as late as its consumers allow and every collective as
 * early as its input allows, to overlap communication with computation.  Comment lines move
 * with the statement after them (the leading input annotations stay first).  A trace without
 * a wait, or with del statements (which Thunder's pass refuses), comes back in its order.
 * Cost: O(n log n) in the statements and their inputs.
 * Returns: (transfer full): the sorted trace (structurally shared with @trace)
 */
CsTrace     *cs_dist_sort_waits      (const CsTrace *trace, const char *pass);

/**
 * cs_dist_bucket_grad_allreduce:
 * @trace: (transfer none): a joint trace (its return's 'output' holds the gradients) or a
 *   backward trace (its return value does), before fusion
 * @bucket_cap_mb: Thunder's `ddp(bucket_size_in_mb=)` (25.0 by default); <= 0: no buckets,
 *   every gradient's all_reduce in place (skip_clone=True)
 * @pass: (nullable): the pass name of the result
 *
 * Thunder's DDP gradient bucketing, optimize_allreduce_in_ddp_backward
 * (thunder/distributed/transforms/ddp.py) with GradBuckets (thunder/distributed/bucketing.py):
 * the gradients whose value comes from wait(all_reduce(g / n)) (synchronize's backward) are
 * grouped by (dtype, device), in the order of the return's gradients, into buckets closed
 * once they hold >= @bucket_cap_mb MiB (the last one with what is left).  Their own
 * all_reduce and wait go; after the division that makes each pre-averaged gradient comes
 * `update_bucket_view(g, index, bucket_key)`; once a bucket has all its gradients, `pack` of
 * the views and one `all_reduce(buffer, SUM, group=, do_async=True, skip_clone=True)`; before
 * the return each bucket's `wait` and `unpack`, in the order of the all_reduces, whose outputs
 * take the place of the old waits' (statements that read those, such as grad-reduce's convert
 * back to the parameter's dtype, move after the unpack).  The bucket key is Thunder's
 * name_bucket string.  The reduce dtype of a bucket is its gradients' dtype: under
 * grad-reduce=f32 the pre-averaged gradients are f32, so the buckets are.
 * Thunder 1e22aacb1's jit does not reach this in effect: transform_for_execution calls
 * apply_bucketing_to_grad_allreduce after maybe_sort_waits made the waits
 * torch_wait_prim_impl, which it does not recognise (see tests/test-core-dist.c).
 * Cost: O(statements + gradients).
 * Returns: (transfer full): the bucketed trace (@trace's statements when it has no such
 * gradient)
 */
CsTrace     *cs_dist_bucket_grad_allreduce (const CsTrace *trace, double bucket_cap_mb,
                                            const char *pass);

G_END_DECLS
