/* cs-render-types.h: types shared by every render/ header: geometry in Graphviz points, the
 * CS_RENDER_ERROR domain and the render options.
 *
 * Coordinates: every position in a #CsLayout is in Graphviz points (1/72 in), origin at the
 * bottom-left of the graph's bounding box, y pointing up (recipes.md 2(a) "Coordinates").  Only
 * #CsView (cs-draw.h) turns them into device pixels, y down.
 */
#pragma once

#include <glib.h>
#include <stdint.h>

G_BEGIN_DECLS

/** CsPoint: a point in Graphviz points, y up. */
typedef struct
{
  double x;              /* pt */
  double y;              /* pt, y up */
} CsPoint;

/** CsRect: an axis-aligned box in Graphviz points, y up; x0 <= x1 and y0 <= y1. */
typedef struct
{
  double x0, y0;         /* pt, lower-left corner */
  double x1, y1;         /* pt, upper-right corner */
} CsRect;

#define CS_RENDER_ERROR (cs_render_error_quark ())
/** cs_render_error_quark: the #GQuark of #CS_RENDER_ERROR (codes: #CsRenderError). */
GQuark cs_render_error_quark (void);

typedef enum
{
  CS_RENDER_ERROR_TRACE,     /* the trace cannot be drawn (no trace, no body) */
  CS_RENDER_ERROR_LAYOUT,    /* Graphviz failed to read or lay out the graph (its message kept) */
  CS_RENDER_ERROR_TOO_LARGE, /* reserved (no node limit since groups collapse large traces) */
  CS_RENDER_ERROR_IO,        /* the output file could not be written */
  CS_RENDER_ERROR_FORMAT,    /* unknown export format / file extension */
} CsRenderError;

/**
 * CsRenderDetail:
 *
 * How much of a trace becomes nodes.  Per-statement overrides (cs_render_options_set_expanded())
 * apply on top of the level.
 */
typedef enum
{
  CS_RENDER_DETAIL_AUTO,       /* STATEMENTS, or REGIONS when that would exceed max_nodes (a note
                                  in the layout says so) */
  CS_RENDER_DETAIL_STATEMENTS, /* one node per top-level bound symbol (ltorch / torch level);
                                  fusion regions drawn as clusters of their prims */
  CS_RENDER_DETAIL_PRIMS,      /* every statement expanded into its leaf prims (stmt->subs,
                                  recursively); `castscope-cli render --expand` */
  CS_RENDER_DETAIL_REGIONS,    /* fusion regions collapsed to one node each, statements collapsed */
} CsRenderDetail;

/**
 * CsRenderCollapse:
 *
 * Which groups of render/cs-group.h (layers, their modules, chunks) are drawn as one node each
 * (with their summary); the others are drawn as labelled boxes around their statements.
 * Per-group overrides (cs_render_options_set_group_expanded()) apply on top.
 */
typedef enum
{
  CS_RENDER_COLLAPSE_AUTO,     /* LAYERS when the trace has two layers or more, or chunks;
                                  else NONE */
  CS_RENDER_COLLAPSE_NONE,     /* every group drawn as a box of its statements */
  CS_RENDER_COLLAPSE_LAYERS,   /* layers and chunks collapsed (a whole model as its blocks) */
  CS_RENDER_COLLAPSE_MODULES,  /* layers expanded, each module collapsed */
  CS_RENDER_COLLAPSE_FLAT,     /* no groups at all: the statements as before grouping */
} CsRenderCollapse;

/** CsRenderExpand: a per-statement override of the detail level. */
typedef enum
{
  CS_RENDER_EXPAND_DEFAULT,    /* follow the level */
  CS_RENDER_EXPAND_ON,         /* draw the statement's subsymbols (region members / prims) */
  CS_RENDER_EXPAND_OFF,        /* draw the statement as one node */
} CsRenderExpand;

/**
 * CsRenderHints:
 *
 * Which interface the layout's notes (CsLayout.notes, drawn into exported pictures too) name
 * when they say how to draw more of a collapsed graph.
 */
typedef enum
{
  CS_RENDER_HINTS_APP,         /* the app's gestures: "double-click a layer, or pick it in the
                                  Structure tree, to expand it" (default) */
  CS_RENDER_HINTS_CLI,         /* castscope-cli render's options: "--expand-group layers.0
                                  draws it expanded, --collapse none draws every layer" */
} CsRenderHints;

/* Above this many nodes AUTO collapses fusion regions, and a graph still above it is laid out
 * by castscope's layered layout instead of dot (cs_layout_run()).  Measured with
 * tests/bench-render.c: dot takes 0.36 s at 983 nodes and 1.7 s at 2,042 on an idle machine,
 * 4-5x that on a loaded 2-core one; the layered layout takes 3 ms at 2,042 nodes. */
#define CS_RENDER_DEFAULT_MAX_NODES      1200
/* Edge labels (shapes) are dropped above this many edges: each label is a virtual node for dot. */
#define CS_RENDER_DEFAULT_MAX_EDGE_LABELS 400

/* A cache of finished layouts and groupings (render/cs-layout-cache.h). */
typedef struct _CsLayoutCache CsLayoutCache;

/**
 * CsRenderOptions:
 *
 * What to draw.  Plain struct: initialise with cs_render_options_init(), release with
 * cs_render_options_clear(); copy with cs_render_options_copy() (the async layout keeps a copy).
 */
typedef struct
{
  CsRenderDetail  detail;          /* level of detail, default AUTO */
  GHashTable     *expand;          /* stmt id (GUINT_TO_POINTER) -> CsRenderExpand
                                      (GINT_TO_POINTER); NULL = no overrides; owned */
  CsRenderCollapse collapse;       /* which groups are collapsed, default AUTO */
  GHashTable     *group_expand;    /* group name (char*, owned) -> CsRenderExpand
                                      (GINT_TO_POINTER); NULL = no overrides; owned.  Names
                                      ("layers.3") stay valid across policies and passes */
  guint           max_nodes;       /* AUTO threshold in nodes; 0 = CS_RENDER_DEFAULT_MAX_NODES */
  guint           max_edge_labels; /* edges above which shape labels are dropped;
                                      0 = CS_RENDER_DEFAULT_MAX_EDGE_LABELS */
  gboolean        edge_labels;     /* label edges with the tensor shape (default TRUE) */
  gboolean        node_shapes;     /* add the output type ("bf16[8, 16]") to node labels (FALSE) */
  gboolean        bookkeeping;     /* draw unpack / del / clear_collection / checks (FALSE) */
  char           *font_family;     /* Pango family used for measuring and drawing; owned;
                                      NULL = "DejaVu Sans" */
  double          font_size_pt;    /* node label size in pt; <= 0 = 10 */
  CsRenderHints   hints;           /* whose instructions the notes give, default APP */
  gboolean        unfold_repeats;  /* draw every collapsed layer on its own; FALSE (default):
                                      a run of consecutive collapsed layers with the same
                                      structure is one node, "layers 0-7: same structure, 1
                                      shown" (cs_grouping_fold_repeats()) */
  CsLayoutCache  *cache;           /* (nullable) where cs_layout_new() looks for and keeps
                                      finished layouts and groupings; a reference is held
                                      (copies take their own); NULL = lay out every time */
} CsRenderOptions;

void     cs_render_options_init         (CsRenderOptions       *options);
void     cs_render_options_clear        (CsRenderOptions       *options);
void     cs_render_options_copy         (const CsRenderOptions *src,
                                         CsRenderOptions       *dst);
void     cs_render_options_set_expanded (CsRenderOptions       *options,
                                         guint32                stmt_id,
                                         CsRenderExpand         expand);
CsRenderExpand cs_render_options_get_expanded (const CsRenderOptions *options,
                                               guint32                stmt_id);
void     cs_render_options_set_group_expanded (CsRenderOptions *options,
                                               const char      *group_name,
                                               CsRenderExpand   expand);
CsRenderExpand cs_render_options_get_group_expanded (const CsRenderOptions *options,
                                                     const char            *group_name);
gboolean cs_render_collapse_from_string (const char       *text,
                                         CsRenderCollapse *out);

G_END_DECLS
