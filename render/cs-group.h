/* cs-group.h: the model's own structure in a trace: layers, modules and chunks of top-level
 * statements, so that a whole model can be drawn with its layers collapsed.
 *
 * Where the groups come from (in this order):
 * - parameter and buffer names.  Thunder names a module parameter after its path with the dots
 *   replaced by '_' and a "t_" in front: `t_layers_0_attention_wq_weight` is
 *   layers.0.attention.wq.weight.  The path up to the first numeric component is the layer
 *   ("layers.0"); what follows, less the trailing weight/bias, names the leaf module
 *   ("attention_wq").  A statement that reads such a parameter (a trace input: not written by
 *   any call) is an anchor of that layer; a statement reading a parameter without a numeric
 *   component (`t_norm_weight`, `t_output_weight`) is an anchor of the top level.
 * - the gaps between anchors.  Between two anchors of one layer a statement belongs to that
 *   layer.  Between anchors of two different layers, the statements that feed only the later
 *   anchor (every reader of what they write is the later anchor or another such statement, as
 *   the RMSNorm in front of `mul(xf, t_layers_1_attention_norm_weight)`) belong to the later
 *   layer, the others (the residual add, whose result the next residual add reads too) to the
 *   earlier one.
 * - the source-location comments (`# models.py:147: x = x + ...`).  The source lines that
 *   close a layer in those gaps also close the last layer before the top-level tail (the last
 *   residual add, which only the final norm reads), and the lines that open a layer open the
 *   first one after the top-level head.
 * - modules: inside a layer the same rules at the module level; a module is the longest prefix
 *   (in '_' components) a leaf module shares with another leaf module of the layer, trailing
 *   one-letter components dropped (attention_wq, attention_wk ... -> "attention";
 *   feed_forward_w_up, feed_forward_w_gate -> "feed_forward"; ffn_norm alone -> "ffn_norm").
 *   A layer with a single module gets no module groups.
 * - chunks: a trace without layer parameters but with more than CS_GROUP_CHUNK_MIN top-level
 *   calls is cut into chunks of consecutive statements ("statements 1-250"), so that it can be
 *   drawn collapsed as well; more than CS_GROUP_MAX_TOP chunks are nested in outer chunks of
 *   CS_GROUP_NEST chunks.
 *
 * Layers with the same structure (the same sequence of ops and modules, fusion regions compared
 * by their prims) are repeats of the first of them (`repeat_of`).  A run of consecutive repeats
 * drawn collapsed is folded into one node (cs_grouping_fold_repeats()): "layers 0-7: same
 * structure, 1 shown".
 * Everything here reads the trace only; no GTK, no Graphviz.
 */
#pragma once

#include <glib.h>

#include "cs-ir.h"

G_BEGIN_DECLS

/* A trace without layers is cut into chunks above this many top-level calls. */
#define CS_GROUP_CHUNK_MIN  400
/* Statements per chunk: at least this many, more when that would make over CS_GROUP_MAX_CHUNKS. */
#define CS_GROUP_CHUNK_SIZE 250
#define CS_GROUP_MAX_CHUNKS 200
/* Above this many chunks, CS_GROUP_NEST consecutive chunks make an outer chunk each (a 50,000-
 * statement trace opens as 20 outer chunks; expanding one draws its 10 chunks). */
#define CS_GROUP_MAX_TOP    40
#define CS_GROUP_NEST       10

typedef enum
{
  CS_GROUP_LAYER,   /* a numbered block of the model: "layers.3" */
  CS_GROUP_MODULE,  /* a module inside a layer: "layers.3.attention" */
  CS_GROUP_CHUNK,   /* consecutive statements of a trace without layers */
} CsGroupKind;

/** CsGroupSummary: what a collapsed group stands for. */
typedef struct
{
  guint    n_casts;             /* tensor casts (convert_element_type and its wrappers' leaf
                                   prims), all levels */
  guint    n_upcasts;           /* of which to a wider float (bf16 -> f32) */
  guint    n_downcasts;         /* of which to a narrower float */
  guint    n_matmuls;           /* leaf prims.matmul / prims.linear */
  guint    n_tensor_core_matmuls; /* of which with all float operands bf16 / f16 / fp8 */
  guint64  bytes;               /* bytes written: tensor outputs of the top-level statements */
  double   flops;               /* FLOP, cs_stats_stmt_flops() of the top-level statements */
  double   est_ms;              /* ms: roofline per top-level statement, max (FLOP / peak,
                                   (bytes read + written) / HBM bandwidth), the H200 peaks
                                   of core/cs-stats.h, summed */
} CsGroupSummary;

/** CsGroup: one group of top-level statements. */
typedef struct
{
  CsGroupKind    kind;          /* LAYER, MODULE or CHUNK */
  char          *name;          /* full name: "layers.3", "layers.3.attention", "statements 1-250" */
  char          *label;         /* short name drawn: "layers.3", "attention", "statements 1-250" */
  gint           parent;        /* index of the enclosing group, -1 = top level; parents come
                                   before their children */
  guint          n_stmts;       /* top-level CALL statements inside (children's included) */
  guint          first;         /* index in trace->stmts of the first member */
  guint          last;          /* index in trace->stmts of the last member */
  guint64        signature;     /* structure hash (LAYER: ops and modules in order) */
  gint           repeat_of;     /* LAYER: index of the first layer with the same structure,
                                   -1 when this is the first (or unique) */
  guint          n_same;        /* LAYER: layers with this layer's structure, itself included */
  CsGroupSummary summary;       /* what it stands for when collapsed */
} CsGroup;

/** CsGrouping: the groups of one trace. */
typedef struct
{
  gint           ref_count;     /* atomic; cs_grouping_ref() / cs_grouping_unref() */
  const CsTrace *trace;         /* the trace grouped (borrowed: keep it alive) */
  CsGroup       *groups;        /* n_groups of them, parents first */
  guint          n_groups;      /* entries of groups */
  gint          *stmt_group;    /* per trace->stmts index: innermost group, -1 = none */
  guint          n_layers;      /* groups of kind LAYER */
  guint          n_chunks;      /* groups of kind CHUNK */
} CsGrouping;

CsGrouping *cs_grouping_new         (const CsTrace    *trace);
CsGrouping *cs_grouping_ref         (CsGrouping       *grouping);
void        cs_grouping_unref       (CsGrouping       *grouping);
void        cs_grouping_free        (CsGrouping       *grouping);
gboolean    cs_grouping_is_within   (const CsGrouping *grouping,
                                     gint              group,
                                     gint              ancestor);
gint        cs_grouping_find        (const CsGrouping *grouping,
                                     const char       *name);
char       *cs_group_summary_text   (const CsGroup    *group);
guint       cs_grouping_fold_repeats (const CsGrouping *grouping,
                                     const gboolean   *collapsed,
                                     gint             *fold_of);
char       *cs_grouping_fold_label  (const CsGrouping *grouping,
                                     const gint       *fold_of,
                                     gint              rep);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (CsGrouping, cs_grouping_free)

G_END_DECLS
