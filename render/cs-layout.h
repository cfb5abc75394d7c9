/* cs-layout.h: castscope's display list (a laid-out graph of one trace), the Graphviz layout
 * that fills it off the caller's thread, hit testing and the overlays (selection, diff marks,
 * one value per node or edge).
 *
 * Pipeline: cs_graph_build() (cs-graph.h) turns a trace into a #CsLayout with semantics but no
 * geometry; cs_layout_new() / cs_layout_new_async() then write it as DOT, lay it out with
 * Graphviz dot on the one Graphviz worker, copy every box, bézier and label position into the
 * display list and free Graphviz's graph (recipes.md 2(a) "Snapshot, then drop Graphviz").
 * The GTK thread never touches cgraph.
 *
 * Threading: a finished #CsLayout is immutable except for the overlay fields (`selected`,
 * `mark`, `value`, `has_value` and the value scale), which only the thread that owns the layout
 * (the GUI's main thread) may change through the cs_layout_set_* functions.  Reference counted.
 */
#pragma once

#include <gio/gio.h>

#include "cs-group.h"
#include "cs-diff.h"
#include "cs-ir.h"
#include "cs-policy.h"
#include "cs-render-types.h"

G_BEGIN_DECLS

/* The statement index of a trace that the overlays share (render/cs-layout.c). */
typedef struct _CsTraceIndex CsTraceIndex;

typedef enum
{
  CS_LAYOUT_NODE_OP,       /* a bound symbol (ltorch / torch / prim / opaque call) */
  CS_LAYOUT_NODE_CAST,     /* convert_element_type, ltorch.to, .float() ...: small, filled with
                              the target dtype's colour */
  CS_LAYOUT_NODE_INPUT,    /* a trace input tensor (signature or unpacked from a collection) */
  CS_LAYOUT_NODE_OUTPUT,   /* a tensor the trace returns */
  CS_LAYOUT_NODE_REGION,   /* a collapsed fusion region (nvFusionK call drawn as one node) */
  CS_LAYOUT_NODE_REF,      /* a reference to a tensor produced far above (`target` is the
                              producer): large traces cut edges spanning many statements, which
                              keeps dot fast (see cs_graph_build()) */
  CS_LAYOUT_NODE_GROUP,    /* a collapsed group (layer, module, chunk of render/cs-group.h):
                              one node labelled with its name and summary; `stmt_id` is
                              CS_LAYOUT_GROUP_ID (group index) */
  CS_LAYOUT_NODE_GHOST,    /* diff: a cast of the other trace that this one does not have,
                              drawn where it was (next to the node that now reads its input);
                              not laid out by dot, placed by cs_layout_mark_diff() */
  CS_LAYOUT_NODE_COMM,     /* a collective of a distributed trace (all_reduce, all_gather,
                              reduce_scatter, broadcast, a FULLY_SHARDED synchronize): a hexagon
                              filled with the colour of the dtype it moves */
} CsLayoutNodeKind;

/* Statement ids of groups: CsStmt ids are small counters, groups take the top of the range. */
#define CS_LAYOUT_GROUP_ID_BASE    0xF0000000u
#define CS_LAYOUT_GROUP_ID(g)      (CS_LAYOUT_GROUP_ID_BASE + (guint32) (g))
#define CS_LAYOUT_IS_GROUP_ID(id)  ((guint32) (id) >= CS_LAYOUT_GROUP_ID_BASE)
#define CS_LAYOUT_GROUP_OF_ID(id)  ((gint) ((guint32) (id) - CS_LAYOUT_GROUP_ID_BASE))

typedef enum
{
  CS_LAYOUT_BADGE_NONE,
  CS_LAYOUT_BADGE_TENSOR_CORE, /* matmul/linear whose float operands are all bf16/f16 */
  CS_LAYOUT_BADGE_F32,         /* matmul/linear with an f32/f64 operand: no tensor cores */
} CsLayoutBadge;

typedef enum
{
  CS_LAYOUT_MARK_NONE,
  CS_LAYOUT_MARK_ADDED,    /* diff: cast absent from the other trace (this one is newer) */
  CS_LAYOUT_MARK_REMOVED,  /* diff: cast absent from the other trace (this one is older) */
  CS_LAYOUT_MARK_SPLIT,    /* diff: region of the older trace whose statements spread over 2+
                              regions of the newer (core/cs-diff.h regions_split) */
  CS_LAYOUT_MARK_MERGED,   /* diff: region of the newer trace covering statements of 2+ regions
                              of the older (regions_merged) */
  CS_LAYOUT_MARK_NEW,      /* reserved (cs_layout_mark_diff() does not set it) */
  CS_LAYOUT_MARK_MOVED_IN, /* diff: a statement inside a region here that was outside every
                              region in the other (older) trace (fuse-linear=on) */
  CS_LAYOUT_MARK_MOVED_OUT,/* diff: a statement outside every region here that was inside a
                              region in the other (older) trace */
} CsLayoutMark;

typedef enum
{
  CS_LAYOUT_CLUSTER_REGION,   /* a fusion region (nvFusionK) drawn expanded */
  CS_LAYOUT_CLUSTER_EXPANDED, /* an ltorch / torch statement drawn as its prims */
  CS_LAYOUT_CLUSTER_GROUP,    /* an expanded group (layer, module, chunk): `stmt_id` is
                                 CS_LAYOUT_GROUP_ID (group index) */
  CS_LAYOUT_CLUSTER_BUCKET,   /* a gradient bucket of a distributed trace: the pack, unpack
                                 and update_bucket_view statements of one bucket_key (within
                                 one enclosing box); `stmt_id` is its first statement's */
} CsLayoutClusterKind;

/** CsLayoutNode: one node of the display list. */
typedef struct
{
  CsLayoutNodeKind  kind;        /* what the node is drawn for */
  guint32           stmt_id;     /* CsStmt.id it came from (a subsymbol's own id when expanded);
                                    0 for INPUT / OUTPUT nodes */
  guint32           top_stmt_id; /* id of the top-level statement holding it (== stmt_id at top
                                    level); 0 for INPUT / OUTPUT */
  char             *name;        /* INPUT / OUTPUT: proxy name; else callee as printed */
  char             *label;       /* text drawn, may hold '\n' */
  char             *detail;      /* tooltip text: outputs with types, callee, inputs */
  gboolean          has_dtype;   /* dtype below is meaningful */
  CsDtype           dtype;       /* CAST: target dtype; else the first output's / proxy's dtype */
  CsLayoutBadge     badge;       /* matmul / linear only */
  CsExecutor        executor;    /* statement nodes: who runs the statement
                                    (cs_executor_of_stmt()); 0 for INPUT / OUTPUT */
  gint              cluster;     /* innermost enclosing cluster index, -1 = none */
  gboolean          expandable;  /* has subsymbols: can be drawn expanded */
  gboolean          saved;       /* OUTPUT: returned as saved_for_backward (forward traces) */
  gint              target;      /* REF: index of the node producing the tensor; GHOST: the
                                    node it is drawn next to; else -1 */
  gint              group;       /* GROUP: its group index; else the innermost group of its
                                    top-level statement (-1 = none); see layout->grouping */
  CsRect            box;         /* pt, y up; node outline */
  CsPoint           label_pos;   /* pt: centre of the label */
  /* overlays */
  gboolean          selected;    /* the selection (cs_layout_set_selection()) */
  gboolean          found;       /* a match of the current Find (drawn with a halo) */
  CsLayoutMark      mark;        /* the diff mark drawn, NONE: none */
  guint             mark_count;  /* how many changes of kind `mark` it stands for (casts inside
                                    a collapsed node or group are counted on it); 0 = none */
  guint             diff_added;  /* casts added that it stands for (whatever `mark` shows) */
  guint             diff_removed;/* casts removed that it stands for (GHOST: its own) */
  guint             diff_moved;  /* statements moved into or out of regions it stands for */
  gboolean          has_value;   /* value below is set */
  double            value;       /* in the value scale's unit */
  /* precision lens (core/cs-lens.h, cs_lens_stmt_precision()): set by cs_graph_build() */
  gboolean          has_precision; /* compute_dtype / rounds below are meaningful */
  CsDtype           compute_dtype; /* dtype the statement's math runs in */
  gboolean          rounds;      /* computes wider than it stores: a rounding point */
  /* overlay: casts the user wrote that a pass removed (cs_layout_mark_user_casts()) */
  guint             user_casts_removed; /* how many such casts this node now reads past */
  CsDtype           user_cast_dtype;    /* the dtype the (first) removed cast rounded to */
  char             *user_cast_note;     /* (nullable, owned) what was removed, for tooltips */
} CsLayoutNode;

/** CsLayoutEdge: one use of a tensor (producer -> consumer). */
typedef struct
{
  guint             tail;        /* index of the producing node */
  guint             head;        /* index of the consuming node */
  char             *proxy;       /* tensor name */
  gboolean          has_dtype;   /* dtype below is meaningful */
  CsDtype           dtype;       /* the tensor's dtype (colour) */
  char             *label;       /* shape text "[8, 16]", or NULL */
  gboolean          future;      /* the tensor is a FUTURE (an async collective's output): the
                                    edge from the collective to the wait that waits for it,
                                    drawn dashed */
  CsPoint          *points;      /* pt: cubic bézier control points, 3k+1 of them; NULL before
                                    layout */
  guint             n_points;    /* entries of points */
  gboolean          has_arrow;   /* an arrowhead from points[n_points-1] to arrow_tip */
  CsPoint           arrow_tip;   /* pt */
  gboolean          has_label_pos; /* label_pos below is set */
  CsPoint           label_pos;   /* pt: centre of the label */
  /* overlays */
  gboolean          selected;    /* the selection (cs_layout_set_selection()) */
  CsLayoutMark      mark;        /* the diff mark drawn, NONE: none */
  gboolean          has_value;   /* value below is set */
  double            value;       /* in the value scale's unit */
  /* precision lens: the dtype the consuming statement computes this tensor in (set by
   * cs_graph_build() where the head is an op or region with a known compute dtype) */
  gboolean          has_compute;   /* compute_dtype below is meaningful */
  CsDtype           compute_dtype; /* meaningful when has_compute */
} CsLayoutEdge;

/** CsLayoutCluster: an expanded fusion region or an expanded statement. */
typedef struct
{
  CsLayoutClusterKind kind;      /* what the box encloses */
  guint32           stmt_id;     /* the nvFusionK call's / expanded statement's CsStmt.id */
  char             *title;       /* "nvFusion0" or the callee */
  char             *subtitle;    /* key stats: "5 ops · 1.0 KiB", or NULL */
  guint             n_stmts;     /* region members (prims) */
  CsExecutor        executor;    /* REGION: NVFUSER or TORCHCOMPILE_XENTROPY; else TORCH */
  guint64           bytes;       /* bytes: region inputs + outputs (tensor numel x size) */
  gint              parent;      /* enclosing cluster index, -1 = top level */
  gint              group;       /* GROUP: its group index; else -1 */
  CsRect            box;         /* pt, y up */
  CsPoint           title_pos;   /* pt: centre of the title line(s) */
  /* overlays */
  gboolean          selected;    /* the selection (cs_layout_set_selection()) */
  gboolean          found;       /* a match of the current Find */
  CsLayoutMark      mark;        /* the diff mark drawn, NONE: none */
  guint             mark_count;  /* as CsLayoutNode.mark_count */
  guint             diff_added;  /* as CsLayoutNode */
  guint             diff_removed; /* as CsLayoutNode */
  guint             diff_moved;   /* as CsLayoutNode */
  gboolean          has_value;   /* value below is set */
  double            value;       /* in the value scale's unit */
} CsLayoutCluster;

/** CsLayoutDiffStats: what cs_layout_mark_diff() found and marked.  The cast counts are the
 *  sums of the elements' `diff_added` / `diff_removed`, the moves of `diff_moved`, so a banner
 *  showing these numbers shows exactly what the graph marks. */
typedef struct
{
  guint casts_added;     /* casts of the newer trace absent from the older (ADDED marks) */
  guint casts_removed;   /* casts of the older trace absent from the newer (REMOVED marks:
                            the casts themselves on the older side, GHOST nodes on the newer) */
  guint regions_split;   /* regions of the older trace whose statements spread over 2+ regions
                            of the newer (SPLIT marks: the older region, or the newer regions
                            it became) */
  guint regions_merged;  /* regions of the newer trace covering statements of 2+ older regions */
  guint regions_new;     /* reserved, 0 */
  guint moved_in;        /* statements inside a region in the newer trace, outside every region
                            in the older (MOVED_IN marks, newer side only) */
  guint moved_out;       /* statements outside every region in the newer trace, inside one in
                            the older (MOVED_OUT marks, newer side only) */
} CsLayoutDiffStats;

/** CsLayout: the display list.  Arrays are read-only for users; see the file comment. */
typedef struct
{
  gint              ref_count;   /* atomic */
  CsTrace          *trace;       /* the trace drawn (a reference), or NULL */
  char             *title;       /* "computation (pass: parse)" */
  CsLayoutNode     *nodes;       /* n_nodes of them */
  guint             n_nodes;     /* entries of nodes */
  CsLayoutEdge     *edges;       /* n_edges of them */
  guint             n_edges;     /* entries of edges */
  CsLayoutCluster  *clusters;    /* n_clusters of them */
  guint             n_clusters;  /* entries of clusters */
  gboolean          laid_out;    /* geometry below is valid */
  CsRect            bb;          /* pt, the whole drawing */
  char            **notes;       /* NULL-terminated; messages for the user ("collapsed to regions
                                    because ..."); never NULL after cs_graph_build() */
  CsRenderDetail    detail;      /* the detail level actually used (never AUTO) */
  guint             dtype_classes; /* bit (1 << CsPaletteClass) for each class drawn */
  char             *font_family; /* font measured and drawn with */
  double            font_size_pt;/* pt */
  char             *dot;         /* the DOT text laid out (export "dot") */
  double            layout_ms;   /* ms spent laying out (Graphviz parse + dot + snapshot, or
                                    the layered layout) */
  guint             max_dot_nodes; /* above this many nodes cs_layout_run() uses castscope's
                                    layered layout instead of dot */
  gboolean          layered;     /* TRUE when the geometry comes from the layered layout (of
                                    the whole, or of a piece when `composed`) */
  guint             composed;    /* expanded groups laid out on their own and put into the
                                    picture around them (0: laid out whole); see
                                    cs_layout_run() */
  guint             composed_reused; /* of which taken from the piece cache (a repeat of a
                                    layer, a state seen before) */
  CsGrouping       *grouping;    /* (owned, nullable) the groups of `trace` (render/cs-group.h);
                                    NULL at CS_RENDER_COLLAPSE_FLAT */
  gboolean         *group_collapsed; /* per group of `grouping`: drawn as one node */
  gint             *group_fold;  /* per group of `grouping`: the first layer of the fold of
                                    repeats it is drawn in (itself for that layer; its GROUP
                                    node stands for the whole run), -1 = not folded; see
                                    cs_grouping_fold_repeats() */
  guint             n_ghosts;    /* GHOST nodes at the end of `nodes` (diff overlay) */
  gboolean          precision_lens; /* overlay: draw compute dtypes on edges and the rounding
                                    points (cs_layout_set_precision_lens()) */
  guint             n_user_casts_marked; /* overlay: sum of the nodes' user_casts_removed */
  /* the owner's bookkeeping of what its overlays were last set from (a layout kept in a
   * CsLayoutCache and shown again need not be marked again): serials the owner hands out,
   * 0 = none; cs_layout_clear_marks() resets diff_serial */
  guint64           diff_serial;       /* the diff the marks come from */
  CsLayoutDiffStats diff_marked;       /* what that marking counted */
  guint64           user_casts_serial; /* the removed-user-casts list marked */
  CsTraceIndex     *trace_index; /* (owned, nullable) the statement index of `trace` shared with
                                    its other layouts, set while the layout worker marks it
                                    (render/ only; NULL otherwise) */
  /* value overlay scale */
  gboolean          has_scale;   /* scale_* below are set (cs_layout_set_value_scale()) */
  char             *scale_title; /* "time (ms)", "max |error|" */
  double            scale_min;   /* value drawn with cs_palette_scale_color (0) */
  double            scale_max;   /* value drawn with cs_palette_scale_color (1) */
  gboolean          scale_log;   /* the scale is logarithmic (scale_min > 0): t = log(v / min) /
                                    log(max / min); values <= min draw as min */
} CsLayout;

CsLayout *cs_layout_ref           (CsLayout *layout);
void      cs_layout_unref         (CsLayout *layout);

CsLayout *cs_layout_new           (CsTrace               *trace,
                                   const CsRenderOptions *options,
                                   GCancellable          *cancellable,
                                   GError               **error);
void      cs_layout_new_async     (CsTrace               *trace,
                                   const CsRenderOptions *options,
                                   GCancellable          *cancellable,
                                   GAsyncReadyCallback    callback,
                                   gpointer               user_data);
CsLayout *cs_layout_new_finish    (GAsyncResult          *result,
                                   GError               **error);
gboolean  cs_layout_run           (CsLayout              *layout,
                                   GCancellable          *cancellable,
                                   GError               **error);
gboolean  cs_layout_run_graphviz  (CsLayout              *layout,
                                   GCancellable          *cancellable,
                                   GError               **error);

/* ---- hit testing and look-ups ---- */

typedef enum
{
  CS_LAYOUT_HIT_NONE,
  CS_LAYOUT_HIT_NODE,
  CS_LAYOUT_HIT_EDGE,
  CS_LAYOUT_HIT_CLUSTER,
} CsLayoutHitKind;

typedef struct
{
  CsLayoutHitKind   kind;        /* what was hit, NONE: nothing */
  guint             index;       /* into nodes, edges or clusters */
} CsLayoutHit;

gboolean  cs_layout_hit_test      (const CsLayout *layout,
                                   double          x_pt,
                                   double          y_pt,
                                   double          tolerance_pt,
                                   CsLayoutHit    *hit);
gint      cs_layout_find_node     (const CsLayout *layout,
                                   guint32         stmt_id);
gint      cs_layout_find_cluster  (const CsLayout *layout,
                                   guint32         stmt_id);
gboolean  cs_layout_find_element  (const CsLayout *layout,
                                   guint32         stmt_id,
                                   CsLayoutHit    *hit);
void      cs_layout_element_center (const CsLayout    *layout,
                                   const CsLayoutHit *hit,
                                   CsPoint           *center);
guint     cs_layout_set_found     (CsLayout       *layout,
                                   GHashTable     *stmt_ids);

/* ---- overlays (owner thread only) ---- */

void      cs_layout_set_selection (CsLayout          *layout,
                                   const CsLayoutHit *hit);
void      cs_layout_clear_values  (CsLayout          *layout);
guint     cs_layout_set_stmt_value(CsLayout          *layout,
                                   guint32            stmt_id,
                                   double             value);
guint     cs_layout_set_edge_value(CsLayout          *layout,
                                   const char        *proxy,
                                   double             value);
guint     cs_layout_set_tensor_value (CsLayout        *layout,
                                   const char        *proxy,
                                   double             value);
void      cs_layout_set_value_scale (CsLayout        *layout,
                                   const char        *title,
                                   double             min,
                                   double             max);
void      cs_layout_set_value_scale_log (CsLayout    *layout,
                                   const char        *title,
                                   double             min,
                                   double             max);


void      cs_layout_set_precision_lens (CsLayout     *layout,
                                   gboolean           on);
guint     cs_layout_mark_user_casts (CsLayout        *layout,
                                   const GPtrArray   *removed);
void      cs_layout_clear_marks   (CsLayout          *layout);
char     *cs_layout_mark_label    (CsLayoutMark       mark,
                                   guint              added,
                                   guint              removed,
                                   guint              moved);
void      cs_layout_mark_diff     (CsLayout          *layout,
                                   const CsTrace     *other,
                                   gboolean           this_is_newer,
                                   CsLayoutDiffStats *stats);
void      cs_layout_mark_diff_with (CsLayout         *layout,
                                   const CsTrace     *other,
                                   gboolean           this_is_newer,
                                   const CsTraceDiff *diff,
                                   CsLayoutDiffStats *stats);

/* ---- overlays marked on the layout worker ---- */

/* A diff of two traces (core's cs_trace_diff()), made once by whichever thread asks first
 * (a layout worker, as a rule) and shared by every layout of the pair (render/cs-layout.c). */
typedef struct _CsLayoutDiffSource CsLayoutDiffSource;

CsLayoutDiffSource *cs_layout_diff_source_new     (CsTrace            *trace,
                                                   CsTrace            *other,
                                                   gboolean            trace_is_newer);
CsLayoutDiffSource *cs_layout_diff_source_ref     (CsLayoutDiffSource *source);
void                cs_layout_diff_source_unref   (CsLayoutDiffSource *source);
gboolean            cs_layout_diff_source_matches (const CsLayoutDiffSource *source,
                                                   const CsTrace      *trace,
                                                   const CsTrace      *other,
                                                   gboolean            trace_is_newer);
const CsTraceDiff  *cs_layout_diff_source_get     (CsLayoutDiffSource *source);
guint64             cs_layout_diff_source_serial  (const CsLayoutDiffSource *source);
void                cs_layout_mark_diff_source    (CsLayout           *layout,
                                                   CsLayoutDiffSource *source,
                                                   CsLayoutDiffStats  *stats);

/**
 * CsLayoutMarks:
 *
 * The overlays cs_layout_new_async_marked() marks on a layout it builds, on the worker,
 * before anyone else sees the layout: the diff (cs_layout_mark_diff_with()) and the user's
 * removed casts (cs_layout_mark_user_casts()), with the serials the owner compares
 * (CsLayout.diff_serial, .user_casts_serial) so that it need not mark them again.  Plain
 * struct of references: cs_layout_marks_copy() / cs_layout_marks_clear().
 */
typedef struct
{
  CsLayoutDiffSource *diff;            /* (nullable, owned ref) the diff to mark; its trace
                                          must be the trace laid out */
  GPtrArray          *user_casts;      /* (nullable, owned ref) CsRemovedCast* to mark */
  GPtrArray          *user_casts_keep; /* (nullable, owned ref) CsTrace* (owned refs) that
                                          @user_casts borrows from, kept alive with it */
  guint64             user_casts_serial; /* stored in CsLayout.user_casts_serial; 0 = do not
                                          mark user casts */
} CsLayoutMarks;

void      cs_layout_marks_copy    (const CsLayoutMarks   *src,
                                   CsLayoutMarks         *dst);
void      cs_layout_marks_clear   (CsLayoutMarks         *marks);
void      cs_layout_new_async_marked (CsTrace            *trace,
                                   const CsRenderOptions *options,
                                   const CsLayoutMarks   *marks,
                                   GCancellable          *cancellable,
                                   GAsyncReadyCallback    callback,
                                   gpointer               user_data);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (CsLayout, cs_layout_unref)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (CsLayoutDiffSource, cs_layout_diff_source_unref)

G_END_DECLS
