/* cs-stats.h: counts and a roofline time estimate per trace and per fusion region.
 *
 * Cost model (an estimate, not a measurement): H200 peaks from ../shared/GPU.md and the task
 * brief: 790 TFLOP/s for bf16/f16 tensor-core matmuls, 60 TFLOP/s for f32 (non tensor-core)
 * matmuls and all elementwise/reduction math, 4.3 TB/s HBM bandwidth.  A region or statement
 * takes max(compute time, memory time); a trace is the sum of its regions and statements.
 */
#pragma once

#include <glib.h>

#include "cs-dist.h"
#include "cs-ir.h"
#include "cs-policy.h"

G_BEGIN_DECLS

#define CS_STATS_TC_FLOPS_PER_S      790.0e12  /* bf16/f16 tensor-core matmul peak, FLOP/s */
#define CS_STATS_F32_FLOPS_PER_S      60.0e12  /* f32 (no tensor core) peak, FLOP/s */
#define CS_STATS_HBM_BYTES_PER_S       4.3e12  /* H200 memory bandwidth, bytes/s */

typedef struct
{
  const char *name;               /* region callee ("nvFusion3"); NULL for a whole trace */
  const char *why;                /* region: why it ended (stmt->why); NULL otherwise */
  guint       n_statements;       /* trace: top-level calls; region: prims inside */
  guint       n_casts;            /* tensor prims.convert_element_type, all levels */
  guint       n_upcasts;          /* of which to a wider float (bf16 -> f32 ...) */
  guint       n_downcasts;        /* of which to a narrower float */
  guint       n_regions;          /* fusion regions (0 for a region entry) */
  guint       n_matmuls;          /* prims.matmul / prims.linear (and their wrappers) */
  guint       n_tensor_core_matmuls; /* of which with bf16/f16 operands */
  guint       n_attention;        /* fused scaled-dot-product attention calls, fwd and bwd */
  double      flops;              /* FLOP: 2*M*N*K per matmul, the batched matmuls of an
                                     attention call, 1 per output element otherwise */
  double      bytes_read;         /* bytes read from memory (region inputs; views count 0) */
  double      bytes_written;      /* bytes written (region outputs) */
  double      est_ms;             /* roofline estimate on an H200, milliseconds */
  gboolean    backward;           /* region: it belongs to the backward */
} CsStatsEntry;

/** One collective of a distributed trace (all_gather, all_reduce, broadcast, reduce_scatter). */
typedef struct
{
  const char     *name;           /* the collective's output proxy ("t23"); its callee below */
  const char     *callee;         /* as printed: "thunder.distributed.prims.all_reduce" */
  const char     *kind;           /* "all_reduce", "all_gather", "reduce_scatter", "broadcast" */
  guint32         line;           /* its line in the input (0: made by a pass) */
  gboolean        backward;       /* made by grad's backward */
  gboolean        async;          /* do_async: its output is a FUTURE that a wait consumes */
  CsDistCommCost  cost;           /* dtype, group size, payload and bus bytes, est_ms */
} CsStatsComm;

typedef struct
{
  CsStatsEntry  total;            /* the whole trace: compute (collectives excluded) */
  GArray       *regions;          /* CsStatsEntry per region, in trace order */
  GArray       *comms;            /* CsStatsComm per collective, in trace order (empty without) */
  double        comm_payload_bytes; /* sum of the collectives' payloads, bytes */
  double        comm_bus_bytes;   /* sum of their bus bytes, bytes */
  double        comm_est_ms;      /* sum of their estimated times, milliseconds */
  guint         group_size;       /* n the estimate used (options, else cs_dist_group_size()) */
  double        bus_bytes_per_s;  /* the bus bandwidth the estimate used, bytes/s */
  guint         by_executor[CS_N_EXECUTORS]; /* top-level statements each executor runs
                                    (cs_executor_of_stmt()): regions for nvfuser and
                                    torchcompile_xentropy, claimed calls for sdpa, every
                                    other non-bookkeeping call for torch */
} CsTraceStats;

/** Options of cs_stats_compute_full(). */
typedef struct
{
  guint   group_size;             /* ranks of the process group for the estimate; 0: the
                                     trace's (cs_dist_group_size(), 1 when nothing tells) */
  double  bus_bytes_per_s;        /* bus bandwidth, bytes/s; 0: CS_DIST_NVLINK_BUS_BYTES_PER_S */
} CsStatsOptions;

/**
 * cs_stats_compute:
 * @trace: (transfer none): any trace (initial, joint, fused, final)
 *
 * Counts casts, regions, matmuls (tensor-core eligible when both operands are bf16 or f16),
 * FLOPs and bytes, and the roofline time, for @trace and each of its regions.  Shape ops
 * outside regions are views (0 bytes).  Units: FLOP, bytes, milliseconds.
 * Source: the policy's question (DESIGN.md: an 8192x4096 @ 4096x4096 matmul takes 0.44 ms in
 * bf16 and 5.7 ms upcast to f32 on an H200).
 * Returns: (transfer full): the stats; free with cs_trace_stats_free()
 */
CsTraceStats *cs_stats_compute     (const CsTrace *trace);
/**
 * cs_stats_compute_full:
 * @trace: (transfer none): any trace
 * @opts: (nullable): the communication estimate's group size and bandwidth (NULL: defaults)
 *
 * cs_stats_compute(), plus one #CsStatsComm per collective: payload S (the full tensor,
 * bytes), bus bytes S*2(n-1)/n (all_reduce), S*(n-1)/n (all_gather, reduce_scatter), S
 * (broadcast), and the time bus bytes / bus bandwidth (NCCL's bus-bandwidth model,
 * nccl-tests doc/PERFORMANCE.md; a lower bound: no latency term).  Collectives count in
 * comms alone, not in the compute totals; wait and synchronize cost nothing by themselves.
 * Returns: (transfer full): the stats
 */
CsTraceStats *cs_stats_compute_full (const CsTrace *trace, const CsStatsOptions *opts);
/** cs_trace_stats_free: frees @stats with its regions and comms arrays; NULL is allowed. */
void          cs_trace_stats_free  (CsTraceStats  *stats);

/** FLOPs of one statement (prim or wrapper), the rule used by cs_stats_compute(). */
double        cs_stats_stmt_flops  (const CsStmt  *stmt);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (CsTraceStats, cs_trace_stats_free)

G_END_DECLS
