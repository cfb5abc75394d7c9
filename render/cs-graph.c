/* cs-graph.c: trace -> display-list semantics (nodes, tensor edges, clusters) -> DOT text.
 *
 * Node sizes are measured here with PangoCairo in the layout's font and passed to Graphviz as
 * fixed sizes, so the boxes dot places are exactly the boxes the painter fills.
 */
#include "cs-config.h"

#include "cs-graph.h"
#include "cs-split.h"
#include "cs-dist.h"
#include "cs-lens.h"
#include "cs-layout-cache.h"
#include "cs-layout-private.h"

#include <math.h>
#include <string.h>

#include <pango/pangocairo.h>

#include "cs-executors.h"
#include "cs-ops.h"
#include "cs-ops-args.h"
#include "cs-palette.h"

#define DEFAULT_FONT "DejaVu Sans"
#define PAD_X_PT       8.0   /* pt: label padding inside op nodes */
#define PAD_Y_PT       4.0
#define CAST_PAD_X_PT  5.0
#define CAST_PAD_Y_PT  2.0
#define BADGE_W_PT    26.0   /* pt: room for the "TC" / "f32" badge at the right of a node */
#define MIN_NODE_W_PT 36.0

typedef struct
{
  CsTrace               *trace;        /* the trace drawn */
  const CsRenderOptions *options;      /* the caller's options (borrowed) */
  CsRenderDetail         detail;       /* never AUTO */
  GArray                *nodes;        /* CsLayoutNode */
  GArray                *edges;        /* CsLayoutEdge */
  GArray                *clusters;     /* CsLayoutCluster */
  GHashTable            *producer;     /* CsProxy* -> node index + 1 */
  GHashTable            *outputs;      /* CsProxy* of OUTPUT nodes made */
  PangoLayout           *measure;      /* NULL when only counting */
  cairo_surface_t       *surface;      /* 1 x 1 image under cr (NULL when only counting) */
  cairo_t               *cr;           /* measure's context */
  gboolean               counting;     /* only count nodes (cs_graph_count_nodes) */
  guint                  force;        /* > 0 inside a statement expanded by an override: its
                                          subsymbols expand down to the prims */
  guint                  n_counted;    /* nodes made so far */
  /* groups (render/cs-group.h) */
  const CsGrouping      *grouping;     /* (nullable) borrowed */
  const gboolean        *collapsed;    /* per group: drawn as one node */
  const gint            *fold_of;      /* (nullable) per group: the first layer of its fold of
                                          repeats, -1 = not folded (cs_grouping_fold_repeats()) */
  gint                  *group_node;   /* per group: its node when collapsed, -1 before */
  gint                  *group_cluster;/* per group: its cluster when expanded, -1 before */
  guint                 *group_returns;/* per group: returned tensors folded into its node */
  GHashTable            *folded;       /* CsProxy* trace inputs read only inside one collapsed
                                          group: drawn as part of it, no node of their own */
  GHashTable            *group_edges;  /* "tail head proxy" of the edges into group nodes */
  gint                   cur_group;    /* innermost group of the statement being emitted */
  GHashTable            *buckets;      /* "parent-cluster bucket_key" -> bucket cluster + 1 */
  /* per trace->stmts index, made at first use and kept for every pass of the builder (a
   * top-level statement's tensors are asked for up to three times a pass) */
  GPtrArray            **top_ins;      /* (owned) stmt_tensor_inputs(), NULL before */
  GPtrArray            **top_outs;     /* (owned) stmt_tensor_outputs(), NULL before */
  GPtrArray             *dups;         /* (owned) (nullable) cs_split_duplicate_saved() of the
                                          trace, NULL before its first use */
} Builder;

/* ---------------------------------------------------------------------------------------- */
/* helpers                                                                                   */

static gboolean
proxy_is_drawn (const CsProxy *p)
{
  /* Tensors, and proxies never typed (docs that elide types: `# t4`). Numbers, collections
   * and "Any" are not edges. */
  return p != NULL && (p->kind == CS_PROXY_TENSOR || (p->kind == CS_PROXY_OTHER && !p->typed));
}

static guint64
proxy_bytes (const CsProxy *p)
{
  int64_t numel;

  if (p == NULL || p->kind != CS_PROXY_TENSOR || !p->typed)
    return 0;
  for (guint i = 0; i < p->rank; i++)
    if (p->shape[i] < 0)
      return 0;
  numel = cs_shape_numel (p->shape, p->rank);
  if (p->dtype == CS_DTYPE_F4_E2M1FN_X2)
    return (guint64) numel;   /* two values per byte, extents count bytes */
  return (guint64) numel * cs_dtype_size_bytes (p->dtype);
}

static char *
shape_text (const CsProxy *p)
{
  GString *s;

  if (p == NULL || p->kind != CS_PROXY_TENSOR || !p->typed)
    return NULL;
  s = g_string_new ("[");
  for (guint i = 0; i < p->rank; i++)
    {
      if (i)
        g_string_append (s, ", ");
      if (p->shape[i] < 0)
        g_string_append_c (s, '?');
      else
        g_string_append_printf (s, "%" G_GINT64_FORMAT, p->shape[i]);
    }
  g_string_append_c (s, ']');
  return g_string_free (s, FALSE);
}

/* "bf16[8, 16]" or "" */
static char *
type_short (const CsProxy *p)
{
  g_autofree char *shape = shape_text (p);

  if (shape == NULL)
    return g_strdup ("");
  return g_strdup_printf ("%s%s", cs_dtype_short_name (p->dtype), shape);
}

/* Short label of a callee: the semantic op's short name ("torch.nn.functional.linear" ->
 * "linear"), or the last dotted component for names the op table does not know. */
static char *
callee_short (const CsStmt *s)
{
  const CsOp *sem = cs_op_semantic (s->op);
  const char *dot;

  if (cs_op_is_fusion (s->op) || s->op->id == CS_OP_OPAQUE || sem == NULL || sem->short_name == NULL
      || sem->short_name[0] == '\0')
    {
      const char *c = s->callee ? s->callee : "?";
      dot = strrchr (c, '.');
      return g_strdup (dot ? dot + 1 : c);
    }
  return g_strdup (sem->short_name);
}

static gboolean
stmt_is_cast (const CsStmt *s)
{
  return s->op->category == CS_OP_CAT_CAST || cs_op_semantic (s->op)->category == CS_OP_CAT_CAST;
}

static gboolean
stmt_is_matmul (const CsStmt *s)
{
  return s->op->category == CS_OP_CAT_MATMUL || cs_op_semantic (s->op)->category == CS_OP_CAT_MATMUL;
}

static GPtrArray *
stmt_tensor_inputs (const CsStmt *s)
{
  g_autoptr(GPtrArray) all = g_ptr_array_new ();
  GPtrArray *out = g_ptr_array_new ();

  cs_stmt_collect_inputs (s, all);
  for (guint i = 0; i < all->len; i++)
    {
      CsProxy *p = g_ptr_array_index (all, i);
      guint k;

      if (!proxy_is_drawn (p))
        continue;
      for (k = 0; k < out->len; k++)
        if (g_ptr_array_index (out, k) == p)
          break;
      if (k == out->len)
        g_ptr_array_add (out, p);
    }
  return out;
}

static GPtrArray *
stmt_tensor_outputs (const CsStmt *s)
{
  g_autoptr(GPtrArray) all = g_ptr_array_new ();
  GPtrArray *out = g_ptr_array_new ();

  cs_stmt_collect_outputs (s, all);
  for (guint i = 0; i < all->len; i++)
    {
      CsProxy *p = g_ptr_array_index (all, i);
      guint k;

      if (!proxy_is_drawn (p))
        continue;
      for (k = 0; k < out->len; k++)
        if (g_ptr_array_index (out, k) == p)
          break;
      if (k == out->len)
        g_ptr_array_add (out, p);
    }
  return out;
}

/* Badge of a matmul / linear: f32 (or f64) float operand -> warning; all float operands
 * bf16 / f16 / fp8 -> tensor cores.  Source: DESIGN.md (tensor cores need low-precision
 * operands; an upcast to f32 around the matmul turns them off). */
static CsLayoutBadge
matmul_badge (const CsStmt *s)
{
  g_autoptr(GPtrArray) ins = stmt_tensor_inputs (s);
  gboolean any_low = FALSE;

  for (guint i = 0; i < ins->len; i++)
    {
      const CsProxy *p = g_ptr_array_index (ins, i);

      if (p->kind != CS_PROXY_TENSOR || !cs_dtype_is_float (p->dtype))
        continue;
      if (p->dtype == CS_DTYPE_F32 || p->dtype == CS_DTYPE_F64)
        return CS_LAYOUT_BADGE_F32;
      any_low = TRUE;
    }
  return any_low ? CS_LAYOUT_BADGE_TENSOR_CORE : CS_LAYOUT_BADGE_NONE;
}

/* A statement is hidden unless it is a call that reads or writes a drawn proxy (bookkeeping
 * such as unpacks, del, checks, clear_mutable_collection and number arithmetic is hidden). */
static gboolean
stmt_is_drawn (Builder *b, const CsStmt *s)
{
  g_autoptr(GPtrArray) ins = NULL;
  g_autoptr(GPtrArray) outs = NULL;

  if (s->kind != CS_STMT_CALL)
    return FALSE;
  if (b->options->bookkeeping)
    return TRUE;
  if (s->op->category == CS_OP_CAT_BOOKKEEPING
      || cs_op_semantic (s->op)->category == CS_OP_CAT_BOOKKEEPING)
    return FALSE;
  ins = stmt_tensor_inputs (s);
  outs = stmt_tensor_outputs (s);
  return ins->len > 0 || outs->len > 0;
}

/* The drawn tensors top-level statement @i reads and writes (borrowed from the builder). */
static void
top_io (Builder *b, guint i, GPtrArray **ins, GPtrArray **outs)
{
  if (b->top_ins == NULL)
    {
      b->top_ins = g_new0 (GPtrArray *, b->trace->n_stmts + 1);
      b->top_outs = g_new0 (GPtrArray *, b->trace->n_stmts + 1);
    }
  if (b->top_ins[i] == NULL)
    {
      b->top_ins[i] = stmt_tensor_inputs (b->trace->stmts[i]);
      b->top_outs[i] = stmt_tensor_outputs (b->trace->stmts[i]);
    }
  *ins = b->top_ins[i];
  *outs = b->top_outs[i];
}

/* stmt_is_drawn() of top-level statement @i, from top_io(). */
static gboolean
top_is_drawn (Builder *b, guint i)
{
  const CsStmt *s = b->trace->stmts[i];
  GPtrArray *ins, *outs;

  if (s->kind != CS_STMT_CALL)
    return FALSE;
  if (b->options->bookkeeping)
    return TRUE;
  if (s->op->category == CS_OP_CAT_BOOKKEEPING
      || cs_op_semantic (s->op)->category == CS_OP_CAT_BOOKKEEPING)
    return FALSE;
  top_io (b, i, &ins, &outs);
  return ins->len > 0 || outs->len > 0;
}

static gboolean
want_expand (Builder *b, const CsStmt *s)
{
  CsRenderExpand ov;

  if (s->n_subs == 0)
    return FALSE;
  ov = cs_render_options_get_expanded (b->options, s->id);
  if (ov == CS_RENDER_EXPAND_ON)
    return TRUE;
  if (ov == CS_RENDER_EXPAND_OFF)
    return FALSE;
  if (b->force > 0)
    return TRUE;
  if (cs_op_is_fusion (s->op))
    return b->detail != CS_RENDER_DETAIL_REGIONS;
  return b->detail == CS_RENDER_DETAIL_PRIMS;
}

static void
measure_text (Builder *b, const char *text, double size_pt, gboolean bold, double *w, double *h)
{
  PangoFontDescription *fd;
  PangoRectangle logical;

  if (b->measure == NULL)
    {
      *w = *h = 0;
      return;
    }
  fd = pango_font_description_new ();
  pango_font_description_set_family (fd, b->options->font_family ? b->options->font_family
                                                                 : DEFAULT_FONT);
  pango_font_description_set_absolute_size (fd, size_pt * PANGO_SCALE);
  pango_font_description_set_weight (fd, bold ? PANGO_WEIGHT_BOLD : PANGO_WEIGHT_NORMAL);
  pango_layout_set_font_description (b->measure, fd);
  pango_font_description_free (fd);
  pango_layout_set_text (b->measure, text, -1);
  pango_layout_get_extents (b->measure, NULL, &logical);
  *w = (double) logical.width / PANGO_SCALE;
  *h = (double) logical.height / PANGO_SCALE;
}

static double
font_size (Builder *b)
{
  return b->options->font_size_pt > 0 ? b->options->font_size_pt : 10.0;
}

/* ---------------------------------------------------------------------------------------- */
/* nodes and edges                                                                           */

static guint
add_node (Builder *b, CsLayoutNode *n)
{
  double w, h, fs = font_size (b);
  double px = PAD_X_PT, py = PAD_Y_PT;

  if (n->kind == CS_LAYOUT_NODE_CAST || n->kind == CS_LAYOUT_NODE_REF)
    {
      fs *= 0.85;
      px = CAST_PAD_X_PT;
      py = CAST_PAD_Y_PT;
    }
  measure_text (b, n->label, fs, n->kind == CS_LAYOUT_NODE_REGION || n->kind == CS_LAYOUT_NODE_GROUP
                                  || n->kind == CS_LAYOUT_NODE_COMM, &w, &h);
  w += 2 * px;
  h += 2 * py;
  if (n->kind == CS_LAYOUT_NODE_COMM)
    w += h;   /* the hexagon's points */
  if (n->badge != CS_LAYOUT_BADGE_NONE)
    w += BADGE_W_PT;
  if (n->kind != CS_LAYOUT_NODE_CAST && w < MIN_NODE_W_PT)
    w = MIN_NODE_W_PT;
  n->box = (CsRect) { 0, 0, ceil (w), ceil (h) };
  if (n->kind != CS_LAYOUT_NODE_REF)
    n->target = -1;
  if (n->kind != CS_LAYOUT_NODE_GROUP)
    n->group = (n->kind == CS_LAYOUT_NODE_OP || n->kind == CS_LAYOUT_NODE_CAST
                || n->kind == CS_LAYOUT_NODE_REGION || n->kind == CS_LAYOUT_NODE_COMM)
               ? b->cur_group : -1;
  g_array_append_val (b->nodes, *n);
  b->n_counted++;
  return b->nodes->len - 1;
}

static guint
input_node (Builder *b, CsProxy *p)
{
  gpointer v = g_hash_table_lookup (b->producer, p);
  CsLayoutNode n = { 0 };
  g_autofree char *ts = NULL;
  guint idx;

  if (v != NULL)
    return GPOINTER_TO_UINT (v) - 1;
  ts = type_short (p);
  n.kind = CS_LAYOUT_NODE_INPUT;
  n.name = g_strdup (p->name);
  n.label = ts[0] ? g_strdup_printf ("%s\n%s", p->name, ts) : g_strdup (p->name);
  {
    g_autofree char *full = cs_proxy_type_string (p);
    n.detail = g_strdup_printf ("input %s: %s", p->name, full);
  }
  n.has_dtype = p->kind == CS_PROXY_TENSOR;
  n.dtype = p->dtype;
  n.cluster = -1;
  idx = add_node (b, &n);
  g_hash_table_insert (b->producer, p, GUINT_TO_POINTER (idx + 1));
  return idx;
}

static void
add_edge (Builder *b, guint tail, guint head, CsProxy *p)
{
  CsLayoutEdge e = { 0 };

  e.tail = tail;
  e.head = head;
  e.proxy = g_strdup (p->name);
  e.has_dtype = p->kind == CS_PROXY_TENSOR && p->typed;
  e.dtype = p->dtype;
  e.label = shape_text (p);
  e.future = p->future;
  g_array_append_val (b->edges, e);
}

static char *
stmt_detail (const CsStmt *s, GPtrArray *ins, GPtrArray *outs)
{
  GString *d = g_string_new (NULL);

  for (guint i = 0; i < outs->len; i++)
    g_string_append_printf (d, "%s%s", i ? ", " : "", ((CsProxy *) g_ptr_array_index (outs, i))->name);
  if (outs->len)
    g_string_append (d, " = ");
  g_string_append_printf (d, "%s(", s->callee ? s->callee : "?");
  for (guint i = 0; i < ins->len; i++)
    g_string_append_printf (d, "%s%s", i ? ", " : "", ((CsProxy *) g_ptr_array_index (ins, i))->name);
  g_string_append_c (d, ')');
  for (guint i = 0; i < outs->len; i++)
    {
      CsProxy *p = g_ptr_array_index (outs, i);
      g_autofree char *ts = cs_proxy_type_string (p);
      g_string_append_printf (d, "\n%s: %s", p->name, ts);
    }
  if (s->why != NULL)
    g_string_append_printf (d, "\n(%s)", s->why);
  return g_string_free (d, FALSE);
}

static void
stmt_node (Builder *b, const CsStmt *s, gint cluster, guint32 top_id)
{
  g_autoptr(GPtrArray) ins = stmt_tensor_inputs (s);
  g_autoptr(GPtrArray) outs = stmt_tensor_outputs (s);
  CsLayoutNode n = { 0 };
  g_autofree char *name = callee_short (s);
  CsProxy *first_out = outs->len ? g_ptr_array_index (outs, 0) : NULL;
  guint idx;

  n.stmt_id = s->id;
  n.top_stmt_id = top_id;
  n.executor = cs_executor_of_stmt (s);
  n.name = g_strdup (s->callee ? s->callee : "?");
  n.cluster = cluster;
  n.expandable = s->n_subs > 0;
  n.detail = stmt_detail (s, ins, outs);
  if (first_out != NULL && first_out->kind == CS_PROXY_TENSOR)
    {
      n.has_dtype = TRUE;
      n.dtype = first_out->dtype;
    }
  {
    CsStmtPrecision pr;

    if (cs_lens_stmt_precision (s, &pr))
      {
        n.has_precision = TRUE;
        n.compute_dtype = pr.compute;
        n.rounds = pr.rounds;
      }
  }
  if (cs_op_is_fusion (s->op))
    {
      n.kind = CS_LAYOUT_NODE_REGION;
      n.label = g_strdup_printf ("%s\n%u ops", s->callee, s->n_subs);
    }
  else if (cs_dist_stmt_communicates (s))
    {
      /* a collective: its kind, reduce op and the dtype and size it moves */
      CsProxy *in = ins->len ? g_ptr_array_index (ins, 0) : NULL;
      CsDistReduceOp rop;
      const CsOp *sem = cs_op_semantic (s->op);
      gboolean has_op = cs_op_find_arg (sem, CS_ARG_OP, NULL) != NULL
                        && cs_dist_reduce_op (cs_stmt_arg (s, CS_ARG_OP), &rop);
      guint64 bytes = MAX (in ? proxy_bytes (in) : 0, first_out ? proxy_bytes (first_out) : 0);
      g_autofree char *sz = g_format_size_full (bytes, G_FORMAT_SIZE_IEC_UNITS);

      n.kind = CS_LAYOUT_NODE_COMM;
      if (in != NULL && in->kind == CS_PROXY_TENSOR)
        {
          n.has_dtype = TRUE;
          n.dtype = in->dtype;
        }
      n.label = g_strdup_printf ("%s%s%s\n%s \u00b7 %s",
                                 sem->id == CS_OP_DIST_SYNCHRONIZE ? "all_gather" : sem->short_name,
                                 has_op ? " " : "", has_op ? cs_dist_reduce_op_name (rop) : "",
                                 n.has_dtype ? cs_dtype_short_name (n.dtype) : "?", sz);
    }
  else if (cs_op_semantic (s->op)->id == CS_OP_DIST_WAIT && ins->len == 1)
    {
      /* wait names the future it waits for */
      n.kind = CS_LAYOUT_NODE_OP;
      n.label = g_strdup_printf ("wait\n%s", ((CsProxy *) g_ptr_array_index (ins, 0))->name);
    }
  else if (stmt_is_cast (s) && n.has_dtype)
    {
      n.kind = CS_LAYOUT_NODE_CAST;
      n.label = g_strdup_printf ("\u2192 %s", cs_dtype_short_name (n.dtype));
    }
  else
    {
      n.kind = CS_LAYOUT_NODE_OP;
      if (stmt_is_matmul (s))
        n.badge = matmul_badge (s);
      if (b->options->node_shapes && first_out != NULL)
        {
          g_autofree char *ts = type_short (first_out);
          n.label = g_strdup_printf ("%s\n%s", name, ts);
        }
      else
        n.label = g_strdup (name);
    }
  /* edges from the producers of the inputs (before this node's outputs are registered, so an
   * output that reuses an input name, as `[t32, t10] = nvFusion1(t32)`, keeps its producer) */
  {
    guint *tails = g_newa (guint, ins->len + 1);
    for (guint i = 0; i < ins->len; i++)
      tails[i] = input_node (b, g_ptr_array_index (ins, i));
    idx = add_node (b, &n);
    for (guint i = 0; i < ins->len; i++)
      {
        add_edge (b, tails[i], idx, g_ptr_array_index (ins, i));
        /* the lens: what the reader computes this tensor in (a cast reads it as stored) */
        if (n.has_precision && n.kind != CS_LAYOUT_NODE_CAST)
          {
            CsLayoutEdge *e = &g_array_index (b->edges, CsLayoutEdge, b->edges->len - 1);

            if (e->has_dtype && cs_dtype_is_float (e->dtype))
              {
                e->has_compute = TRUE;
                e->compute_dtype = cs_dtype_bits (n.compute_dtype) > cs_dtype_bits (e->dtype)
                                   ? n.compute_dtype : e->dtype;
              }
          }
      }
  }
  for (guint i = 0; i < outs->len; i++)
    {
      CsProxy *p = g_ptr_array_index (outs, i);
      gboolean is_input = FALSE;
      for (guint k = 0; k < ins->len; k++)
        if (g_ptr_array_index (ins, k) == p)
          is_input = TRUE;
      if (!is_input)
        g_hash_table_insert (b->producer, p, GUINT_TO_POINTER (idx + 1));
    }
}

/* Number of leaf nodes statement @s becomes when expanded (flattening nested expansions). */
static gboolean
forced_on (Builder *b, const CsStmt *s)
{
  return cs_render_options_get_expanded (b->options, s->id) == CS_RENDER_EXPAND_ON;
}

static guint
count_leaves (Builder *b, const CsStmt *s)
{
  guint n = 0;
  gboolean on = forced_on (b, s);

  if (on)
    b->force++;
  for (guint i = 0; i < s->n_subs; i++)
    {
      const CsStmt *sub = s->subs[i];

      if (!stmt_is_drawn (b, sub))
        continue;
      if (want_expand (b, sub))
        n += count_leaves (b, sub);
      else
        n++;
    }
  if (on)
    b->force--;
  return n;
}

static void emit_stmt (Builder *b, const CsStmt *s, gint cluster, guint32 top_id, gboolean flatten);

static gint
add_cluster (Builder *b, const CsStmt *s, gint parent)
{
  CsLayoutCluster c = { 0 };
  g_autoptr(GPtrArray) ins = stmt_tensor_inputs (s);
  g_autoptr(GPtrArray) outs = stmt_tensor_outputs (s);

  c.kind = cs_op_is_fusion (s->op) ? CS_LAYOUT_CLUSTER_REGION : CS_LAYOUT_CLUSTER_EXPANDED;
  c.executor = cs_executor_of_stmt (s);
  c.stmt_id = s->id;
  c.parent = parent;
  c.group = -1;
  c.title = g_strdup (s->callee ? s->callee : "?");
  for (guint i = 0; i < ins->len; i++)
    c.bytes += proxy_bytes (g_ptr_array_index (ins, i));
  for (guint i = 0; i < outs->len; i++)
    {
      CsProxy *p = g_ptr_array_index (outs, i);
      gboolean dup = FALSE;
      for (guint k = 0; k < ins->len; k++)
        if (g_ptr_array_index (ins, k) == p)
          dup = TRUE;
      if (!dup)
        c.bytes += proxy_bytes (p);
    }
  g_array_append_val (b->clusters, c);
  return (gint) b->clusters->len - 1;
}

static void
emit_children (Builder *b, const CsStmt *s, gint cluster, guint32 top_id, gboolean flatten)
{
  gboolean on = forced_on (b, s);

  if (on)
    b->force++;
  for (guint i = 0; i < s->n_subs; i++)
    if (stmt_is_drawn (b, s->subs[i]))
      emit_stmt (b, s->subs[i], cluster, top_id, flatten);
  if (on)
    b->force--;
}

/* @flatten: we are inside an EXPANDED cluster: expanded members add their leaves to it. */
static void
emit_stmt (Builder *b, const CsStmt *s, gint cluster, guint32 top_id, gboolean flatten)
{
  if (!want_expand (b, s))
    {
      stmt_node (b, s, cluster, top_id);
      return;
    }
  if (flatten && !cs_op_is_fusion (s->op))
    {
      emit_children (b, s, cluster, top_id, TRUE);
      return;
    }
  if (!cs_op_is_fusion (s->op) && count_leaves (b, s) <= 1)
    {
      /* torch.matmul -> ltorch.matmul -> prims.matmul: no box around a single prim */
      emit_children (b, s, cluster, top_id, TRUE);
      return;
    }
  {
    gint c = add_cluster (b, s, cluster);
    guint before = b->nodes->len;
    CsLayoutCluster *cl;

    emit_children (b, s, c, top_id, !cs_op_is_fusion (s->op));
    cl = &g_array_index (b->clusters, CsLayoutCluster, c);
    for (guint i = before; i < b->nodes->len; i++)
      if (g_array_index (b->nodes, CsLayoutNode, i).kind != CS_LAYOUT_NODE_INPUT)
        cl->n_stmts++;
    if (cl->kind == CS_LAYOUT_CLUSTER_REGION)
      {
        g_autofree char *sz = g_format_size_full (cl->bytes, G_FORMAT_SIZE_IEC_UNITS);
        cl->subtitle = g_strdup_printf ("%u ops \u00b7 %s", cl->n_stmts, sz);
      }
    if (cl->n_stmts == 0)
      {
        /* nothing drawable inside (e.g. a region of number arithmetic): draw it as one node */
        g_free (cl->title);
        g_free (cl->subtitle);
        g_array_set_size (b->clusters, b->clusters->len - 1);
        stmt_node (b, s, cluster, top_id);
      }
  }
}

/* The forward return `{'output': ..., 'flat_args': [...], ...}, ((saved...), (...))`:
 * flat_args re-returns the inputs (not drawn); proxies in the second part are
 * saved_for_backward (reference/thunder-traces.md 5.3). */
static void
collect_returned (const CsValue *v, gboolean saved, GPtrArray *proxies, GArray *saved_flags)
{
  if (v == NULL)
    return;
  switch (v->kind)
    {
    case CS_VALUE_PROXY:
      g_ptr_array_add (proxies, v->u.proxy);
      g_array_append_val (saved_flags, saved);
      break;
    case CS_VALUE_DICT:
      for (guint i = 0; i + 1 < v->u.seq.n; i += 2)
        {
          const CsValue *k = v->u.seq.items[i];
          if (k->kind == CS_VALUE_STRING && g_strcmp0 (k->u.s, "flat_args") == 0)
            continue;
          collect_returned (v->u.seq.items[i + 1], saved, proxies, saved_flags);
        }
      break;
    case CS_VALUE_TUPLE:
    case CS_VALUE_LIST:
      if (!saved && v->kind == CS_VALUE_TUPLE && v->u.seq.n == 2
          && v->u.seq.items[0]->kind == CS_VALUE_DICT)
        {
          collect_returned (v->u.seq.items[0], FALSE, proxies, saved_flags);
          collect_returned (v->u.seq.items[1], TRUE, proxies, saved_flags);
          break;
        }
      for (guint i = 0; i < v->u.seq.n; i++)
        collect_returned (v->u.seq.items[i], saved, proxies, saved_flags);
      break;
    default:
      break;
    }
}

/* The node producing @p, when it is a collapsed group's node, else NULL. */
static const CsLayoutNode *
group_producer (Builder *b, CsProxy *p)
{
  gpointer v = g_hash_table_lookup (b->producer, p);
  const CsLayoutNode *prod = v ? &g_array_index (b->nodes, CsLayoutNode, GPOINTER_TO_UINT (v) - 1) : NULL;

  return prod != NULL && prod->kind == CS_LAYOUT_NODE_GROUP ? prod : NULL;
}

/* cs_split_duplicate_saved() of the last trace drawn without a layout cache, kept by its
 * CsTrace.serial (unique per trace object): value numbering a whole forward takes a few
 * microseconds per statement.  Layouts are built on worker threads, hence the lock. */
static GMutex     dup_lock;
static gboolean   dup_valid;
static guint32    dup_serial;
static GPtrArray *dup_last;

/* The builder's trace's duplicated saved values: from the layout cache when the options have
 * one (kept per trace there, so that views drawing other traces do not push it out), else the
 * last trace's; asked for once per build.  Returns: (transfer none) */
static GPtrArray *
duplicate_saved_of (Builder *b)
{
  if (b->dups != NULL)
    return b->dups;
  if (b->options->cache != NULL)
    {
      b->dups = _cs_layout_cache_dup_duplicate_saved (b->options->cache, b->trace);
      return b->dups;
    }
  g_mutex_lock (&dup_lock);
  if (!dup_valid || dup_serial != b->trace->serial)
    {
      g_clear_pointer (&dup_last, g_ptr_array_unref);
      dup_last = cs_split_duplicate_saved (b->trace);
      dup_serial = b->trace->serial;
      dup_valid = TRUE;
    }
  b->dups = g_ptr_array_ref (dup_last);
  g_mutex_unlock (&dup_lock);
  return b->dups;
}

static void
emit_return (Builder *b, const CsStmt *ret)
{
  g_autoptr(GPtrArray) proxies = g_ptr_array_new ();
  g_autoptr(GArray) saved = g_array_new (FALSE, FALSE, sizeof (gboolean));
  g_autoptr(GHashTable) counted = g_hash_table_new (NULL, NULL);
  /* values saved under several names (lightning-thunder#1501): flagged on their output nodes */
  GPtrArray *dups = duplicate_saved_of (b);
  g_autoptr(GHashTable) dup_of = g_hash_table_new (NULL, NULL);   /* CsProxy * -> CsSavedDuplicate * */

  for (guint i = 0; i < dups->len; i++)
    {
      CsSavedDuplicate *d = g_ptr_array_index (dups, i);

      for (guint k = 0; k < d->saved->len; k++)
        g_hash_table_insert (dup_of, d->saved->pdata[k], d);
    }
  collect_returned (ret->value, FALSE, proxies, saved);
  /* A collapsed group that returns several tensors (the blocks' saved_for_backward, the
   * parameter gradients) gets one output node for all of them. */
  for (guint i = 0; i < proxies->len; i++)
    {
      CsProxy *p = g_ptr_array_index (proxies, i);
      const CsLayoutNode *prod;

      if (!proxy_is_drawn (p) || !g_hash_table_add (counted, p))
        continue;
      if ((prod = group_producer (b, p)) != NULL)
        b->group_returns[prod->group]++;
    }
  for (guint i = 0; i < proxies->len; i++)
    {
      CsProxy *p = g_ptr_array_index (proxies, i);
      CsLayoutNode n = { 0 };
      g_autofree char *ts = NULL;
      const CsLayoutNode *prod;
      guint tail, idx;

      if (!proxy_is_drawn (p) || g_hash_table_contains (b->outputs, p))
        continue;
      g_hash_table_add (b->outputs, p);
      prod = group_producer (b, p);
      if (prod == NULL && g_hash_table_lookup (b->producer, p) == NULL
          && g_hash_table_contains (b->folded, p))
        continue;
      if (prod != NULL && b->group_returns[prod->group] > 1)
        {
          gint g = prod->group;
          guint count = b->group_returns[g];

          if (count == G_MAXUINT)
            continue;    /* its summary node is made */
          tail = (guint) b->group_node[g];
          n.kind = CS_LAYOUT_NODE_OUTPUT;
          n.saved = g_array_index (saved, gboolean, i);
          n.name = g_strdup (p->name);
          {
            /* a fold's node returns what every layer of the run returns */
            g_autofree char *fold = b->fold_of != NULL && b->fold_of[g] == g
                                    ? cs_grouping_fold_label (b->grouping, b->fold_of, g) : NULL;
            g_autofree char *who = fold != NULL ? g_strndup (fold, strcspn (fold, ":"))
                                                : g_strdup (b->grouping->groups[g].label);

            n.label = g_strdup_printf ("%u %s\nof %s", count, n.saved ? "saved" : "outputs", who);
            n.detail = g_strdup_printf ("%u tensors %s returns (%s, ...)", count,
                                        fold != NULL ? who : b->grouping->groups[g].name, p->name);
          }
          n.has_dtype = p->kind == CS_PROXY_TENSOR;
          n.dtype = p->dtype;
          n.cluster = -1;
          idx = add_node (b, &n);
          add_edge (b, tail, idx, p);
          b->group_returns[g] = G_MAXUINT;
          continue;
        }
      ts = type_short (p);
      n.kind = CS_LAYOUT_NODE_OUTPUT;
      n.saved = g_array_index (saved, gboolean, i);
      n.name = g_strdup (p->name);
      n.label = g_strdup_printf ("%s%s%s%s", n.saved ? "saved " : "", p->name, ts[0] ? "\n" : "", ts);
      {
        g_autofree char *full = cs_proxy_type_string (p);
        const CsSavedDuplicate *d = n.saved ? g_hash_table_lookup (dup_of, p) : NULL;

        n.detail = g_strdup_printf ("%s %s: %s", n.saved ? "saved for backward" : "output",
                                    p->name, full);
        if (d != NULL)
          {
            g_autoptr(GString) others = g_string_new (NULL);
            char *label = n.label, *detail = n.detail;

            for (guint k = 0; k < d->saved->len; k++)
              if (d->saved->pdata[k] != p)
                g_string_append_printf (others, "%s%s", others->len ? ", " : "",
                                        ((CsProxy *) d->saved->pdata[k])->name);
            n.label = g_strdup_printf ("%s\nsaved %u times", label, d->saved->len);
            n.detail = g_strdup_printf ("%s; the same value as %s, saved %u times (Thunder does "
                                        "this: lightning-thunder#1501)", detail, others->str,
                                        d->saved->len);
            g_free (label);
            g_free (detail);
          }
      }
      n.has_dtype = p->kind == CS_PROXY_TENSOR;
      n.dtype = p->dtype;
      n.cluster = -1;
      tail = input_node (b, p);
      idx = add_node (b, &n);
      add_edge (b, tail, idx, p);
    }
}

static void
free_node (CsLayoutNode *n)
{
  g_free (n->name);
  g_free (n->label);
  g_free (n->detail);
}

static void
builder_free_arrays (Builder *b)
{
  for (guint i = 0; i < b->nodes->len; i++)
    free_node (&g_array_index (b->nodes, CsLayoutNode, i));
  for (guint i = 0; i < b->edges->len; i++)
    {
      CsLayoutEdge *e = &g_array_index (b->edges, CsLayoutEdge, i);
      g_free (e->proxy);
      g_free (e->label);
    }
  for (guint i = 0; i < b->clusters->len; i++)
    {
      CsLayoutCluster *c = &g_array_index (b->clusters, CsLayoutCluster, i);
      g_free (c->title);
      g_free (c->subtitle);
    }
  g_array_set_size (b->nodes, 0);
  g_array_set_size (b->edges, 0);
  g_array_set_size (b->clusters, 0);
}


/* ---------------------------------------------------------------------------------------- */
/* groups                                                                                    */

/* The outermost collapsed group holding group @g (itself included), -1 when none is. */
static gint
outer_collapsed (Builder *b, gint g)
{
  gint found = -1;

  for (; g >= 0; g = b->grouping->groups[g].parent)
    if (b->collapsed[g])
      found = g;
  /* a folded repeat is drawn as its fold's first layer */
  if (found >= 0 && b->fold_of != NULL && b->fold_of[found] >= 0)
    found = b->fold_of[found];
  return found;
}

static gint
ensure_group_cluster (Builder *b, gint g)
{
  const CsGroup *gr;
  CsLayoutCluster c = { 0 };

  if (g < 0)
    return -1;
  if (b->group_cluster[g] >= 0)
    return b->group_cluster[g];
  gr = &b->grouping->groups[g];
  c.parent = ensure_group_cluster (b, gr->parent);
  c.kind = CS_LAYOUT_CLUSTER_GROUP;
  c.stmt_id = CS_LAYOUT_GROUP_ID (g);
  c.group = g;
  c.title = gr->repeat_of >= 0
            ? g_strdup_printf ("%s  (same structure as %s)", gr->label,
                               b->grouping->groups[gr->repeat_of].label)
            : g_strdup (gr->label);
  c.subtitle = cs_group_summary_text (gr);
  c.n_stmts = gr->n_stmts;
  c.bytes = gr->summary.bytes;
  g_array_append_val (b->clusters, c);
  b->group_cluster[g] = (gint) b->clusters->len - 1;
  return b->group_cluster[g];
}

static guint
ensure_group_node (Builder *b, gint g)
{
  const CsGroup *gr = &b->grouping->groups[g];
  CsLayoutNode n = { 0 };
  g_autofree char *sum = NULL;
  g_autoptr(GString) detail = g_string_new (NULL);
  guint idx;

  if (b->group_node[g] >= 0)
    return (guint) b->group_node[g];
  sum = cs_group_summary_text (gr);
  n.kind = CS_LAYOUT_NODE_GROUP;
  n.stmt_id = n.top_stmt_id = CS_LAYOUT_GROUP_ID (g);
  n.group = g;
  n.name = g_strdup (gr->name);
  n.expandable = TRUE;
  n.cluster = ensure_group_cluster (b, gr->parent);
  if (b->fold_of != NULL && b->fold_of[g] == g)
    {
      g_autofree char *title = cs_grouping_fold_label (b->grouping, b->fold_of, g);
      guint n_in = 0;

      for (guint h = (guint) g; h < b->grouping->n_groups; h++)
        n_in += b->fold_of[h] == g;
      n.label = g_strdup_printf ("%s\n\u00d7%u, each %s", title, n_in, sum);
      g_string_append_printf (detail, "%s\n%u layers with the same structure folded into this "
                              "node (its edges are the whole run's); the summary is one layer's: "
                              "%s\n", title, n_in, sum);
    }
  else if (gr->repeat_of >= 0)
    n.label = g_strdup_printf ("%s  = %s\n%s", gr->label, b->grouping->groups[gr->repeat_of].label, sum);
  else if (gr->n_same > 1)
    n.label = g_strdup_printf ("%s  (\u00d7%u alike)\n%s", gr->label, gr->n_same, sum);
  else
    n.label = g_strdup_printf ("%s\n%s", gr->label, sum);
  if (b->fold_of == NULL || b->fold_of[g] != g)
    g_string_append_printf (detail, "%s %s (collapsed; double-click to expand)\n%s",
                            gr->kind == CS_GROUP_LAYER ? "layer" : gr->kind == CS_GROUP_MODULE
                            ? "module" : "chunk", gr->name, sum);
  else
    g_string_append_printf (detail, "double-click to expand %s; expand another layer of the run "
                            "from the Structure tree, or with ] and [ once one is expanded",
                            gr->name);
  g_string_append_printf (detail, "\ncasts: %u (%u up, %u down); matmuls: %u, %u on tensor cores",
                          gr->summary.n_casts, gr->summary.n_upcasts, gr->summary.n_downcasts,
                          gr->summary.n_matmuls, gr->summary.n_tensor_core_matmuls);
  if (gr->repeat_of >= 0)
    g_string_append_printf (detail, "\nsame structure as %s (%u layers alike)",
                            b->grouping->groups[gr->repeat_of].name, gr->n_same);
  n.detail = g_string_free (g_steal_pointer (&detail), FALSE);
  idx = add_node (b, &n);
  b->group_node[g] = (gint) idx;
  return idx;
}

/* A top-level statement inside collapsed group @g: its reads become edges into the group's
 * node (one per producer and tensor), its writes are produced by that node. */
static void
emit_into_group (Builder *b, guint si, gint g)
{
  GPtrArray *ins, *outs;
  guint *tails;
  gboolean *skip;
  guint idx;

  top_io (b, si, &ins, &outs);
  tails = g_newa (guint, ins->len + 1);
  skip = g_newa (gboolean, ins->len + 1);

  for (guint i = 0; i < ins->len; i++)
    {
      CsProxy *p = g_ptr_array_index (ins, i);
      gpointer v = g_hash_table_lookup (b->producer, p);

      skip[i] = FALSE;
      if (v == NULL && g_hash_table_contains (b->folded, p))
        skip[i] = TRUE;
      else
        tails[i] = input_node (b, p);
    }
  idx = ensure_group_node (b, g);
  for (guint i = 0; i < ins->len; i++)
    {
      CsProxy *p = g_ptr_array_index (ins, i);
      char *key;

      if (skip[i] || tails[i] == idx)
        continue;
      key = g_strdup_printf ("%u %u %p", tails[i], idx, (void *) p);
      if (!g_hash_table_add (b->group_edges, key))
        continue;
      add_edge (b, tails[i], idx, p);
    }
  for (guint i = 0; i < outs->len; i++)
    g_hash_table_insert (b->producer, g_ptr_array_index (outs, i), GUINT_TO_POINTER (idx + 1));
}

/* Every read of a trace input (a proxy no top-level call writes) by a drawn top-level
 * statement, in trace order: the same for every build of the trace, so kept in the layout
 * cache when there is one.  Returns: (transfer full) (element-type _CsInputRead) */
static GArray *
input_reads (Builder *b)
{
  g_autoptr(GHashTable) written = NULL;
  GArray *reads;

  if (b->options->cache != NULL
      && (reads = _cs_layout_cache_dup_input_reads (b->options->cache, b->trace,
                                                    b->options->bookkeeping)) != NULL)
    return reads;
  written = g_hash_table_new (NULL, NULL);
  reads = g_array_new (FALSE, FALSE, sizeof (_CsInputRead));
  for (guint i = 0; i < b->trace->n_stmts; i++)
    if (b->trace->stmts[i]->kind == CS_STMT_CALL)
      {
        GPtrArray *ins, *outs;

        top_io (b, i, &ins, &outs);
        for (guint o = 0; o < outs->len; o++)
          g_hash_table_add (written, g_ptr_array_index (outs, o));
      }
  for (guint i = 0; i < b->trace->n_stmts; i++)
    {
      GPtrArray *ins, *outs;

      if (!top_is_drawn (b, i))
        continue;
      top_io (b, i, &ins, &outs);
      for (guint k = 0; k < ins->len; k++)
        {
          _CsInputRead r = { i, g_ptr_array_index (ins, k) };

          if (!g_hash_table_contains (written, r.proxy))
            g_array_append_val (reads, r);
        }
    }
  if (b->options->cache != NULL)
    _cs_layout_cache_put_input_reads (b->options->cache, b->trace, b->options->bookkeeping,
                                      reads);
  return reads;
}

/* Trace inputs whose every reader lies in one collapsed group are drawn as part of it. */
static void
find_folded_inputs (Builder *b)
{
  g_autoptr(GArray) reads = input_reads (b);
  g_autoptr(GHashTable) owner = g_hash_table_new (NULL, NULL);   /* proxy -> owner + 2 */
  GHashTableIter it;
  gpointer k, v;

  for (guint r = 0; r < reads->len; r++)
    {
      const _CsInputRead *rd = &g_array_index (reads, _CsInputRead, r);
      gint g = b->grouping->stmt_group[rd->stmt];
      gint own = g >= 0 ? outer_collapsed (b, g) : -1;

      if (!g_hash_table_lookup_extended (owner, rd->proxy, NULL, &v))
        g_hash_table_insert (owner, rd->proxy, GINT_TO_POINTER (own + 2));
      else if (GPOINTER_TO_INT (v) != own + 2)
        g_hash_table_insert (owner, rd->proxy, GINT_TO_POINTER (0));
    }
  g_hash_table_iter_init (&it, owner);
  while (g_hash_table_iter_next (&it, &k, &v))
    if (GPOINTER_TO_INT (v) >= 2)
      g_hash_table_add (b->folded, k);
}

/* The bucket cluster of @s (a pack / unpack / update_bucket_view with a bucket_key) inside
 * @parent, made at its first member; -1 for any other statement. */
static gint
bucket_cluster (Builder *b, const CsStmt *s, gint parent)
{
  const CsOp *sem = cs_op_semantic (s->op);
  const CsValue *key;
  g_autofree char *k = NULL;
  gpointer v;
  CsLayoutCluster c = { 0 };

  if (sem->id != CS_OP_DIST_PACK && sem->id != CS_OP_DIST_UNPACK
      && sem->id != CS_OP_DIST_UPDATE_BUCKET_VIEW)
    return -1;
  key = cs_stmt_arg (s, CS_ARG_BUCKET_KEY);
  if (key == NULL || key->kind != CS_VALUE_STRING)
    return -1;
  k = g_strdup_printf ("%d %s", parent, key->u.s);
  v = g_hash_table_lookup (b->buckets, k);
  if (v != NULL)
    return GPOINTER_TO_INT (v) - 1;
  c.kind = CS_LAYOUT_CLUSTER_BUCKET;
  c.stmt_id = s->id;
  c.parent = parent;
  c.group = -1;
  c.title = g_strdup ("gradient bucket");
  g_array_append_val (b->clusters, c);
  g_hash_table_insert (b->buckets, g_steal_pointer (&k), GINT_TO_POINTER (b->clusters->len));
  return (gint) b->clusters->len - 1;
}

/* Titles of the bucket clusters: how many gradients each holds (its update_bucket_views). */
static void
finish_buckets (Builder *b)
{
  for (guint c = 0; c < b->clusters->len; c++)
    {
      CsLayoutCluster *cl = &g_array_index (b->clusters, CsLayoutCluster, c);
      guint views = 0;

      if (cl->kind != CS_LAYOUT_CLUSTER_BUCKET)
        continue;
      for (guint i = 0; i < b->nodes->len; i++)
        {
          const CsLayoutNode *n = &g_array_index (b->nodes, CsLayoutNode, i);
          if (n->cluster == (gint) c)
            {
              cl->n_stmts++;
              views += g_str_has_suffix (n->name, "update_bucket_view")
                       || g_str_has_suffix (n->name, "update_bucket_view_prim_impl");
            }
        }
      cl->subtitle = g_strdup_printf ("%u gradients", views);
    }
}

static void
builder_run (Builder *b)
{
  CsStmt *ret = NULL;

  g_hash_table_remove_all (b->producer);
  g_hash_table_remove_all (b->outputs);
  g_hash_table_remove_all (b->folded);
  g_hash_table_remove_all (b->group_edges);
  g_hash_table_remove_all (b->buckets);
  b->n_counted = 0;
  b->cur_group = -1;
  if (b->grouping != NULL)
    {
      for (guint g = 0; g < b->grouping->n_groups; g++)
        {
          b->group_node[g] = -1;
          b->group_cluster[g] = -1;
          b->group_returns[g] = 0;
        }
      find_folded_inputs (b);
    }
  /* input nodes are made at their first use, so that dot's ranking puts each one right
   * above its first reader (declaring them all first makes edges span the whole trace) */
  for (guint i = 0; i < b->trace->n_stmts; i++)
    {
      const CsStmt *s = b->trace->stmts[i];

      if (s->kind == CS_STMT_RETURN)
        ret = (CsStmt *) s;
      if (!top_is_drawn (b, i))
        continue;
      b->cur_group = b->grouping != NULL ? b->grouping->stmt_group[i] : -1;
      if (b->cur_group >= 0)
        {
          gint oc = outer_collapsed (b, b->cur_group);

          if (oc >= 0)
            emit_into_group (b, i, oc);
          else
            {
              gint gc = ensure_group_cluster (b, b->cur_group);
              gint bc = b->counting ? -1 : bucket_cluster (b, s, gc);
              emit_stmt (b, s, bc >= 0 ? bc : gc, s->id, FALSE);
            }
        }
      else
        {
          gint bc = b->counting ? -1 : bucket_cluster (b, s, -1);
          emit_stmt (b, s, bc, s->id, FALSE);
        }
    }
  b->cur_group = -1;
  if (!b->counting)
    finish_buckets (b);
  if (ret != NULL)
    emit_return (b, ret);
  /* signature inputs nothing reads are still drawn */
  {
    g_autoptr(GPtrArray) ins = cs_trace_dup_inputs (b->trace);
    for (guint i = 0; i < ins->len; i++)
      {
        CsProxy *p = g_ptr_array_index (ins, i);
        if (proxy_is_drawn (p) && !g_hash_table_contains (b->folded, p))
          input_node (b, p);
      }
  }
}

/* Long edges are what make dot slow on traces: an edge spanning k ranks becomes k virtual
 * nodes that take part in crossing minimisation and spline routing (the 496-node LLaMA
 * initial trace, whose rotary tables feed every layer, took 18 s).  In graphs above
 * CUT_MIN_NODES nodes, an edge whose ends are more than CUT_SPAN nodes apart in trace order is
 * redirected from a small REF node next to its reader; nearby readers share a REF node. */
#define CUT_MIN_NODES 150
#define CUT_SPAN       48

/* A graph of collapsed groups is short but its edges into the groups span many ranks (a
 * tensor every block reads: LLaMA's rotary tables, the chain's first input): cut them too,
 * above this span in nodes. */
#define CUT_SPAN_GROUPS 6

static void
cut_long_edges (Builder *b)
{
  guint n_orig = b->nodes->len;
  g_autoptr(GHashTable) last_ref = NULL;   /* "tail:proxy" -> ref index + 1 */
  g_autoptr(GArray) anchor = NULL;          /* order of each REF node (its first reader) */
  guint span = CUT_SPAN, n_groups = 0;

  for (guint i = 0; b->grouping != NULL && i < n_orig; i++)
    n_groups += g_array_index (b->nodes, CsLayoutNode, i).kind == CS_LAYOUT_NODE_GROUP;
  if (n_groups >= CUT_SPAN_GROUPS)
    span = CUT_SPAN_GROUPS;
  else if (n_orig <= CUT_MIN_NODES)
    return;
  last_ref = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  anchor = g_array_new (FALSE, FALSE, sizeof (guint));
  for (guint j = 0; j < b->edges->len; j++)
    {
      CsLayoutEdge *e = &g_array_index (b->edges, CsLayoutEdge, j);
      CsLayoutNode *tail;
      g_autofree char *key = NULL;
      gpointer v;
      guint ref;

      /* outputs (sinks) are ranked right below their producer anyway: never cut into them */
      if (e->tail >= n_orig || e->head < e->tail + span
          || g_array_index (b->nodes, CsLayoutNode, e->head).kind == CS_LAYOUT_NODE_OUTPUT)
        continue;
      key = g_strdup_printf ("%u:%s", e->tail, e->proxy);
      v = g_hash_table_lookup (last_ref, key);
      if (v != NULL && e->head < g_array_index (anchor, guint, GPOINTER_TO_UINT (v) - 1 - n_orig) + span / 2)
        ref = GPOINTER_TO_UINT (v) - 1;
      else
        {
          CsLayoutNode n = { 0 };
          const char *ts;

          tail = &g_array_index (b->nodes, CsLayoutNode, e->tail);
          ts = e->label ? e->label : "";
          n.kind = CS_LAYOUT_NODE_REF;
          n.target = (gint) e->tail;
          n.name = g_strdup (e->proxy);
          n.label = g_strdup_printf ("\u21aa %s", e->proxy);
          n.detail = g_strdup_printf ("%s %s%s from %s (a long edge, cut to keep the layout fast)",
                                      e->proxy, e->has_dtype ? cs_dtype_short_name (e->dtype) : "",
                                      ts, tail->label);
          n.has_dtype = e->has_dtype;
          n.dtype = e->dtype;
          n.cluster = -1;
          ref = add_node (b, &n);
          g_array_append_val (anchor, e->head);
          g_hash_table_insert (last_ref, g_steal_pointer (&key), GUINT_TO_POINTER (ref + 1));
          e = &g_array_index (b->edges, CsLayoutEdge, j);
        }
      e->tail = ref;
    }
}

static void
builder_init (Builder *b, CsTrace *trace, const CsRenderOptions *options, gboolean measure)
{
  memset (b, 0, sizeof *b);
  b->trace = trace;
  b->options = options;
  b->nodes = g_array_new (FALSE, TRUE, sizeof (CsLayoutNode));
  b->edges = g_array_new (FALSE, TRUE, sizeof (CsLayoutEdge));
  b->clusters = g_array_new (FALSE, TRUE, sizeof (CsLayoutCluster));
  b->producer = g_hash_table_new (NULL, NULL);
  b->outputs = g_hash_table_new (NULL, NULL);
  b->folded = g_hash_table_new (NULL, NULL);
  b->group_edges = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  b->buckets = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  b->cur_group = -1;
  if (measure)
    {
      cairo_font_options_t *fo = cairo_font_options_create ();
      PangoContext *ctx;

      b->surface = cairo_image_surface_create (CAIRO_FORMAT_ARGB32, 1, 1);
      b->cr = cairo_create (b->surface);
      b->measure = pango_cairo_create_layout (b->cr);
      /* unhinted metrics: the same widths at every zoom and in SVG / PDF */
      cairo_font_options_set_hint_metrics (fo, CAIRO_HINT_METRICS_OFF);
      cairo_font_options_set_hint_style (fo, CAIRO_HINT_STYLE_NONE);
      ctx = pango_layout_get_context (b->measure);
      pango_cairo_context_set_font_options (ctx, fo);
      pango_layout_context_changed (b->measure);
      cairo_font_options_destroy (fo);
    }
}

static void
builder_clear (Builder *b)
{
  builder_free_arrays (b);
  g_array_unref (b->nodes);
  g_array_unref (b->edges);
  g_array_unref (b->clusters);
  g_hash_table_unref (b->producer);
  g_hash_table_unref (b->outputs);
  g_hash_table_unref (b->folded);
  g_hash_table_unref (b->group_edges);
  g_hash_table_unref (b->buckets);
  g_free (b->group_node);
  g_free (b->group_cluster);
  g_free (b->group_returns);
  for (guint i = 0; b->top_ins != NULL && i < b->trace->n_stmts; i++)
    {
      g_clear_pointer (&b->top_ins[i], g_ptr_array_unref);
      g_clear_pointer (&b->top_outs[i], g_ptr_array_unref);
    }
  g_free (b->top_ins);
  g_free (b->top_outs);
  g_clear_pointer (&b->dups, g_ptr_array_unref);
  g_clear_object (&b->measure);
  g_clear_pointer (&b->cr, cairo_destroy);
  g_clear_pointer (&b->surface, cairo_surface_destroy);
}

static void
builder_set_groups (Builder *b, const CsGrouping *grouping, const gboolean *collapsed,
                    const gint *fold_of)
{
  b->grouping = grouping;
  b->collapsed = collapsed;
  b->fold_of = fold_of;
  if (grouping == NULL)
    return;
  b->group_node = g_new (gint, grouping->n_groups + 1);
  b->group_cluster = g_new (gint, grouping->n_groups + 1);
  b->group_returns = g_new0 (guint, grouping->n_groups + 1);
}

/* Nodes @trace gives at @detail with these groups, without measuring. */
static guint
count_with (CsTrace *trace, const CsRenderOptions *options, const CsGrouping *grouping,
            const gboolean *collapsed, const gint *fold_of, CsRenderDetail detail)
{
  Builder b;
  guint n;

  builder_init (&b, trace, options, FALSE);
  builder_set_groups (&b, grouping, collapsed, fold_of);
  b.detail = detail;
  builder_run (&b);
  n = b.nodes->len;
  builder_clear (&b);
  return n;
}

/**
 * cs_graph_count_nodes:
 * @trace: a trace
 * @detail: a level (AUTO counts STATEMENTS)
 * @bookkeeping: count bookkeeping statements too
 *
 * How many display-list nodes @trace gives at @detail without measuring text or laying out,
 * drawn flat (every statement, no groups collapsed); used by benchmarks and tests.
 * Returns: the node count (inputs and outputs included)
 */
guint
cs_graph_count_nodes (CsTrace *trace, CsRenderDetail detail, gboolean bookkeeping)
{
  CsRenderOptions opts;
  Builder b;
  guint n;

  g_return_val_if_fail (trace != NULL, 0);
  cs_render_options_init (&opts);
  opts.bookkeeping = bookkeeping;
  builder_init (&b, trace, &opts, FALSE);
  b.detail = detail == CS_RENDER_DETAIL_AUTO ? CS_RENDER_DETAIL_STATEMENTS : detail;
  builder_run (&b);
  n = b.nodes->len;
  builder_clear (&b);
  return n;
}

static char **
notes_to_strv (GPtrArray *notes)
{
  g_ptr_array_add (notes, NULL);
  return (char **) g_ptr_array_free (notes, FALSE);
}

/* Which groups @options draws collapsed: the level (AUTO: LAYERS for two layers or more, or
 * chunks), then the per-group overrides.  Returns: (transfer full) one flag per group. */
gboolean *
_cs_graph_collapsed_groups (const CsGrouping *grouping, const CsRenderOptions *options,
                            guint *n_collapsed)
{
  CsRenderCollapse level = options->collapse;
  gboolean *collapsed = g_new0 (gboolean, grouping->n_groups + 1);

  *n_collapsed = 0;
  if (level == CS_RENDER_COLLAPSE_AUTO)
    level = grouping->n_layers >= 2 || grouping->n_chunks > 0 ? CS_RENDER_COLLAPSE_LAYERS
                                                              : CS_RENDER_COLLAPSE_NONE;
  for (guint g = 0; g < grouping->n_groups; g++)
    {
      const CsGroup *gr = &grouping->groups[g];
      CsRenderExpand ov = cs_render_options_get_group_expanded (options, gr->name);

      if (gr->kind == CS_GROUP_MODULE)
        collapsed[g] = level == CS_RENDER_COLLAPSE_MODULES;
      else
        collapsed[g] = level == CS_RENDER_COLLAPSE_LAYERS;
      if (ov == CS_RENDER_EXPAND_ON)
        collapsed[g] = FALSE;
      else if (ov == CS_RENDER_EXPAND_OFF)
        collapsed[g] = TRUE;
      if (collapsed[g])
        (*n_collapsed)++;
    }
  return collapsed;
}

/**
 * cs_graph_build:
 * @trace: the trace to draw (a reference is kept by the result)
 * @options: (nullable): what to draw; NULL = cs_render_options_init() defaults
 * @error: return location for a #CS_RENDER_ERROR
 *
 * Builds the display list's semantics: one node per drawn bound symbol (short op name, cast
 * nodes with their target dtype, matmul badges), INPUT / OUTPUT nodes, one edge per tensor
 * use (dtype and shape), clusters for fusion regions (statements, bytes in + out) and expanded
 * statements, measured node sizes, and the DOT text to lay out.  No geometry yet
 * (@laid_out is FALSE): call cs_layout_run_graphviz().
 * With AUTO detail, a trace above @options->max_nodes nodes is drawn at REGIONS detail and a
 * note says so; edge labels are dropped above @options->max_edge_labels edges (noted too).
 * Groups (render/cs-group.h): unless @options->collapse is FLAT, the trace's layers, modules
 * and chunks are found; a collapsed group is one GROUP node with its summary (the trace inputs
 * only it reads, and the tensors it returns, are part of it), an expanded one a GROUP cluster
 * around its statements.  AUTO collapses the layers of a trace with two or more of them, and
 * the chunks of a long trace without layers, so that there is no node limit: a whole model
 * opens as its blocks.  The AUTO detail level counts nodes after that.
 * Errors: CS_RENDER_ERROR_TRACE for a trace with no statements.
 * Source: DESIGN.md "Rendering"; fusion regions as in reference/thunder-traces.md 6.3.
 * Returns: (transfer full): a layout without geometry, or NULL with @error set
 */
CsLayout *
cs_graph_build (CsTrace *trace, const CsRenderOptions *options, GError **error)
{
  CsRenderOptions defaults;
  Builder b;
  CsLayout *layout;
  GPtrArray *notes = g_ptr_array_new ();
  guint max_nodes, max_labels, n_collapsed = 0;
  CsGrouping *grouping = NULL;
  gboolean *collapsed = NULL;
  gint *fold_of = NULL;
  guint n_folds = 0;

  g_return_val_if_fail (trace != NULL, NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  cs_render_options_init (&defaults);
  if (options == NULL)
    options = &defaults;
  if (trace->n_stmts == 0)
    {
      g_set_error (error, CS_RENDER_ERROR, CS_RENDER_ERROR_TRACE,
                   "trace '%s' has no statements to draw", trace->name ? trace->name : "?");
      g_ptr_array_free (notes, TRUE);
      return NULL;
    }
  max_nodes = options->max_nodes ? options->max_nodes : CS_RENDER_DEFAULT_MAX_NODES;
  max_labels = options->max_edge_labels ? options->max_edge_labels : CS_RENDER_DEFAULT_MAX_EDGE_LABELS;

  if (options->collapse != CS_RENDER_COLLAPSE_FLAT)
    {
      grouping = options->cache != NULL ? cs_layout_cache_dup_grouping (options->cache, trace)
                                        : cs_grouping_new (trace);
      if (grouping->n_groups == 0)
        g_clear_pointer (&grouping, cs_grouping_free);
    }
  if (grouping != NULL)
    {
      collapsed = _cs_graph_collapsed_groups (grouping, options, &n_collapsed);
      fold_of = g_new (gint, grouping->n_groups + 1);
      if (!options->unfold_repeats)
        n_folds = cs_grouping_fold_repeats (grouping, collapsed, fold_of);
      else
        for (guint g = 0; g < grouping->n_groups; g++)
          fold_of[g] = -1;
    }

  builder_init (&b, trace, options, TRUE);
  builder_set_groups (&b, grouping, collapsed, fold_of);
  b.detail = options->detail;
  if (b.detail == CS_RENDER_DETAIL_AUTO)
    {
      guint n_full;

      /* statement level first; only when that is too many nodes, count the region level and
       * build that instead */
      b.detail = CS_RENDER_DETAIL_STATEMENTS;
      builder_run (&b);
      n_full = b.nodes->len;
      if (n_full > max_nodes)
        {
          guint n_reg = count_with (trace, options, grouping, collapsed, fold_of,
                                    CS_RENDER_DETAIL_REGIONS);
          if (n_reg < n_full)
            {
              b.detail = CS_RENDER_DETAIL_REGIONS;
              g_ptr_array_add (notes, g_strdup_printf (
                "Collapsed to one node per fusion region: %u nodes at statement level exceed the "
                "%u-node limit for a quick layout (%u nodes now). %s",
                n_full, max_nodes, n_reg,
                options->hints == CS_RENDER_HINTS_CLI
                ? "--detail statements draws every statement."
                : "Expand a region to see its prims."));
              builder_free_arrays (&b);
              builder_run (&b);
            }
        }
    }
  else
    builder_run (&b);
  cut_long_edges (&b);
  if (grouping != NULL && n_collapsed > 0)
    {
      const CsGroup *first = NULL;
      guint n_layers_c = 0, n_chunks_c = 0;

      for (guint g = 0; g < grouping->n_groups; g++)
        if (collapsed[g] && grouping->groups[g].kind != CS_GROUP_MODULE
            && (b.group_node[g] >= 0 || (fold_of[g] >= 0 && b.group_node[fold_of[g]] >= 0)))
          {
            if (grouping->groups[g].kind == CS_GROUP_LAYER)
              n_layers_c++;
            else
              n_chunks_c++;
            if (first == NULL)
              first = grouping->groups[g].repeat_of >= 0
                      ? &grouping->groups[grouping->groups[g].repeat_of] : &grouping->groups[g];
          }
      if (n_layers_c > 0 && n_folds == 0)
        {
          g_autofree char *how = options->hints == CS_RENDER_HINTS_CLI
            ? g_strdup_printf ("--expand-group %s draws it expanded, --collapse none draws every "
                               "layer", first->name)
            : g_strdup ("double-click a layer, or pick it in the Structure tree, to expand it");

          g_ptr_array_add (notes, g_strdup_printf (
            "%u of %u layers drawn collapsed (%s%s); %s.", n_layers_c, grouping->n_layers,
            first->n_same == grouping->n_layers ? "all with the same structure as "
                                                : "the first is ",
            first->name, how));
        }
      else if (n_layers_c > 0)
        {
          /* the runs of repeats folded, the first three named */
          g_autoptr(GString) runs = g_string_new (NULL);
          g_autofree char *how = NULL;
          const char *one = NULL;   /* a layer inside a fold, to name in the CLI's hint */
          guint shown = 0;

          for (guint g = 0; g < grouping->n_groups; g++)
            if (fold_of[g] == (gint) g && shown++ < 3)
              {
                g_autofree char *t = cs_grouping_fold_label (grouping, fold_of, (gint) g);
                g_string_append_printf (runs, "%s\"%s\"", runs->len ? ", " : "", t);
              }
            else if (fold_of[g] >= 0 && one == NULL)
              one = grouping->groups[g].name;
          if (shown > 3)
            g_string_append_printf (runs, " and %u more", shown - 3);
          how = options->hints == CS_RENDER_HINTS_CLI
            ? g_strdup_printf ("--expand-group %s draws that layer expanded, --no-fold draws "
                               "every layer as its own node, --collapse none draws every layer "
                               "expanded", one != NULL ? one : first->name)
            : g_strdup ("pick a layer of a run in the Structure tree to expand it alone (a "
                        "double-click expands the run's first layer); ] and [ then step through "
                        "the repeats");
          g_ptr_array_add (notes, g_strdup_printf (
            "%u of %u layers drawn collapsed (%s%s); each run of consecutive layers with the "
            "same structure is folded into one node (%s); %s.", n_layers_c, grouping->n_layers,
            first->n_same == grouping->n_layers ? "all with the same structure as "
                                                : "the first is ",
            first->name, runs->str, how));
        }
      if (n_chunks_c > 0)
        {
          g_autofree char *how = options->hints == CS_RENDER_HINTS_CLI
            ? g_strdup_printf ("--expand-group '%s' draws one expanded, --collapse none draws "
                               "them all", first->kind == CS_GROUP_CHUNK ? first->name
                                                                         : "statements 1-250")
            : g_strdup ("double-click a chunk to expand it");

          guint n_calls = 0;   /* the calls the chunks hold (trace->n_stmts counts comments) */

          for (guint g = 0; g < grouping->n_groups; g++)
            if (grouping->groups[g].kind == CS_GROUP_CHUNK && grouping->groups[g].parent < 0)
              n_calls += grouping->groups[g].n_stmts;
          g_ptr_array_add (notes, g_strdup_printf (
            "No layers in the parameter names: the %u statements are drawn as %u collapsed "
            "chunks of consecutive statements; %s.", n_calls, n_chunks_c, how));
        }
    }
  if (b.nodes->len > max_nodes)
    g_ptr_array_add (notes, g_strdup_printf (
      "%u nodes: more than the %u Graphviz dot lays out in about a second, so castscope's fast "
      "layered layout drew them (more edge crossings). Collapse or filter to get dot's layout.",
      b.nodes->len, max_nodes));
  if (!options->edge_labels || b.edges->len > max_labels)
    {
      for (guint i = 0; i < b.edges->len; i++)
        g_clear_pointer (&g_array_index (b.edges, CsLayoutEdge, i).label, g_free);
      /* only the app shows an edge's shape on hover; castscope-cli's pictures have no
       * tooltips */
      if (options->edge_labels)
        g_ptr_array_add (notes, g_strdup_printf (
          "Tensor shapes are not drawn on edges: %u edges exceed %u%s.", b.edges->len,
          max_labels, options->hints == CS_RENDER_HINTS_CLI ? ""
                                                           : " (hover an edge for its shape)"));
    }

  layout = g_new0 (CsLayout, 1);
  layout->ref_count = 1;
  layout->trace = cs_trace_ref (trace);
  layout->title = g_strdup_printf ("%s (pass: %s)", trace->name ? trace->name : "trace",
                                   trace->pass ? trace->pass : "parse");
  layout->n_nodes = b.nodes->len;
  layout->nodes = (CsLayoutNode *) g_array_free (b.nodes, FALSE);
  layout->n_edges = b.edges->len;
  layout->edges = (CsLayoutEdge *) g_array_free (b.edges, FALSE);
  layout->n_clusters = b.clusters->len;
  layout->clusters = (CsLayoutCluster *) g_array_free (b.clusters, FALSE);
  b.nodes = g_array_new (FALSE, TRUE, sizeof (CsLayoutNode));
  b.edges = g_array_new (FALSE, TRUE, sizeof (CsLayoutEdge));
  b.clusters = g_array_new (FALSE, TRUE, sizeof (CsLayoutCluster));
  layout->detail = b.detail;
  layout->max_dot_nodes = max_nodes;
  layout->font_family = g_strdup (options->font_family ? options->font_family : DEFAULT_FONT);
  layout->font_size_pt = font_size (&b);
  for (guint i = 0; i < layout->n_edges; i++)
    layout->dtype_classes |= 1u << (layout->edges[i].has_dtype
                                    ? cs_palette_class_for_dtype (layout->edges[i].dtype)
                                    : CS_PALETTE_OTHER);
  for (guint i = 0; i < layout->n_nodes; i++)
    if (layout->nodes[i].kind == CS_LAYOUT_NODE_CAST)
      layout->dtype_classes |= 1u << cs_palette_class_for_dtype (layout->nodes[i].dtype);
  layout->notes = notes_to_strv (notes);
  layout->grouping = grouping;
  layout->group_collapsed = collapsed;
  layout->group_fold = fold_of;
  layout->dot = cs_graph_to_dot (layout);
  builder_clear (&b);
  return layout;
}

/* ---------------------------------------------------------------------------------------- */
/* DOT                                                                                       */

static void
dot_quote (GString *out, const char *s)
{
  g_string_append_c (out, '"');
  for (const char *p = s ? s : ""; *p; p++)
    {
      switch (*p)
        {
        case '"':  g_string_append (out, "\\\""); break;
        case '\\': g_string_append (out, "\\\\"); break;
        case '\n': g_string_append (out, "\\n"); break;
        case '\r':
        case '\t': g_string_append_c (out, ' '); break;
        default:
          if ((unsigned char) *p >= 0x20)
            g_string_append_c (out, *p);
          break;
        }
    }
  g_string_append_c (out, '"');
}

static const char *
node_fill (const CsLayoutNode *n, char buf[8])
{
  CsColor c;

  switch (n->kind)
    {
    case CS_LAYOUT_NODE_CAST:
      return cs_palette_class_hex (cs_palette_class_for_dtype (n->dtype));
    case CS_LAYOUT_NODE_COMM:
      cs_palette_dtype_color (n->has_dtype ? n->dtype : CS_N_DTYPES, &c);
      c.r = 1 - 0.45 * (1 - c.r); c.g = 1 - 0.45 * (1 - c.g); c.b = 1 - 0.45 * (1 - c.b);
      cs_palette_to_hex (&c, buf);
      return buf;
    case CS_LAYOUT_NODE_REGION:
      return "#EEEEEE";
    case CS_LAYOUT_NODE_GROUP:
      return "#E8EEF7";
    case CS_LAYOUT_NODE_INPUT:
    case CS_LAYOUT_NODE_OUTPUT:
    case CS_LAYOUT_NODE_REF:
      cs_palette_dtype_color (n->has_dtype ? n->dtype : CS_N_DTYPES, &c);
      c.r = 1 - 0.2 * (1 - c.r); c.g = 1 - 0.2 * (1 - c.g); c.b = 1 - 0.2 * (1 - c.b);
      cs_palette_to_hex (&c, buf);
      return buf;
    case CS_LAYOUT_NODE_OP:
    default:
      return "#FFFFFF";
    }
}

static void
dot_node (GString *out, const CsLayout *layout, guint i, const char *indent)
{
  const CsLayoutNode *n = &layout->nodes[i];
  char buf[8];

  g_string_append_printf (out, "%sn%u [label=", indent, i);
  dot_quote (out, n->label);
  g_string_append_printf (out, ", width=%.4f, height=%.4f, fillcolor=\"%s\"",
                          (n->box.x1 - n->box.x0) / 72.0, (n->box.y1 - n->box.y0) / 72.0,
                          node_fill (n, buf));
  if (n->kind == CS_LAYOUT_NODE_CAST)
    g_string_append (out, ", style=\"filled,rounded\", fontsize=8.5");
  else if (n->kind == CS_LAYOUT_NODE_OUTPUT)
    g_string_append (out, ", peripheries=2");
  else if (n->kind == CS_LAYOUT_NODE_REF)
    g_string_append (out, ", style=\"filled,dashed\"");
  else if (n->kind == CS_LAYOUT_NODE_COMM)
    g_string_append_printf (out, ", shape=hexagon, penwidth=2, color=\"%s\", cskind=\"collective\"",
                            cs_palette_class_hex (n->has_dtype ? cs_palette_class_for_dtype (n->dtype)
                                                                : CS_PALETTE_OTHER));
  else if (n->kind == CS_LAYOUT_NODE_GROUP)
    g_string_append_printf (out, ", color=\"#5B7DB1\", penwidth=2, csgroup=%d", n->group);
  if (n->badge == CS_LAYOUT_BADGE_TENSOR_CORE)
    g_string_append (out, ", badge=\"tensor-core\", color=\"" CS_PALETTE_HEX_TENSOR_CORE "\"");
  else if (n->badge == CS_LAYOUT_BADGE_F32)
    g_string_append (out, ", badge=\"f32-no-tensor-core\", color=\"" CS_PALETTE_HEX_WARNING "\"");
  if (n->stmt_id)
    g_string_append_printf (out, ", stmt=%u", n->stmt_id);
  g_string_append (out, "];\n");
}

static void
dot_cluster (GString *out, const CsLayout *layout, guint c, guint depth)
{
  const CsLayoutCluster *cl = &layout->clusters[c];
  g_autofree char *indent = g_strnfill (2 * (depth + 1), ' ');
  g_autofree char *label = cl->subtitle ? g_strdup_printf ("%s\n%s", cl->title, cl->subtitle)
                                        : g_strdup (cl->title);

  g_string_append_printf (out, "%ssubgraph cluster_%u {\n%s  label=", indent, c, indent);
  dot_quote (out, label);
  if (cl->kind == CS_LAYOUT_CLUSTER_REGION)
    g_string_append_printf (out, "; style=\"filled,rounded\"; fillcolor=\"#F2F2F2\"; color=\"#808080\"; stmt=%u;\n",
                            cl->stmt_id);
  else if (cl->kind == CS_LAYOUT_CLUSTER_GROUP)
    g_string_append_printf (out, "; style=\"filled,rounded\"; fillcolor=\"#F7F9FC\"; color=\"#5B7DB1\"; csgroup=%d;\n",
                            cl->group);
  else if (cl->kind == CS_LAYOUT_CLUSTER_BUCKET)
    g_string_append_printf (out, "; style=\"filled,rounded\"; fillcolor=\"#FFF8E8\"; color=\"#C08A2E\"; csbucket=1; stmt=%u;\n",
                            cl->stmt_id);
  else
    g_string_append_printf (out, "; style=\"dashed,rounded\"; color=\"#A0A0A0\"; fontsize=8.5; stmt=%u;\n",
                            cl->stmt_id);
  {
    g_autofree char *inner = g_strnfill (2 * (depth + 2), ' ');
    for (guint i = 0; i < layout->n_nodes; i++)
      if (layout->nodes[i].cluster == (gint) c)
        dot_node (out, layout, i, inner);
  }
  for (guint k = 0; k < layout->n_clusters; k++)
    if (layout->clusters[k].parent == (gint) c)
      dot_cluster (out, layout, k, depth + 1);
  g_string_append_printf (out, "%s}\n", indent);
}

/**
 * cs_graph_to_dot:
 * @layout: a display list from cs_graph_build()
 *
 * Writes @layout as Graphviz DOT: nodes `n<i>` (i = index in @layout->nodes) with their
 * measured sizes as `fixedsize` boxes, clusters `cluster_<k>` (k = index in
 * @layout->clusters), edges with attribute `id="e<j>"` (j = index in @layout->edges), colours
 * from the dtype palette.  This text is what cs_layout_run_graphviz() lays out and what
 * `castscope-cli render -o x.dot` writes.  Every string from the trace is quoted and escaped.
 * Returns: (transfer full): the DOT text
 */
char *
cs_graph_to_dot (const CsLayout *layout)
{
  GString *out = g_string_new (NULL);
  const char *font;
  double fs;

  g_return_val_if_fail (layout != NULL, NULL);
  font = layout->font_family ? layout->font_family : DEFAULT_FONT;
  fs = layout->font_size_pt > 0 ? layout->font_size_pt : 10.0;
  g_string_append (out, "digraph ");
  dot_quote (out, layout->trace && layout->trace->name ? layout->trace->name : "trace");
  g_string_append (out, " {\n  graph [rankdir=TB, nodesep=0.22, ranksep=0.32, fontname=");
  dot_quote (out, font);
  g_string_append_printf (out, ", fontsize=%.1f, labeljust=l, margin=8];\n", fs);
  g_string_append (out, "  node [shape=box, fixedsize=true, style=\"filled,rounded\", fontname=");
  dot_quote (out, font);
  g_string_append_printf (out, ", fontsize=%.1f, penwidth=1];\n", fs);
  g_string_append (out, "  edge [arrowsize=0.6, penwidth=1.4, fontname=");
  dot_quote (out, font);
  g_string_append_printf (out, ", fontsize=%.1f];\n", fs * 0.8);

  for (guint i = 0; i < layout->n_nodes; i++)
    if (layout->nodes[i].cluster < 0)
      dot_node (out, layout, i, "  ");
  for (guint c = 0; c < layout->n_clusters; c++)
    if (layout->clusters[c].parent < 0)
      dot_cluster (out, layout, c, 0);
  for (guint j = 0; j < layout->n_edges; j++)
    {
      const CsLayoutEdge *e = &layout->edges[j];
      const char *hex = cs_palette_class_hex (e->has_dtype ? cs_palette_class_for_dtype (e->dtype)
                                                           : CS_PALETTE_OTHER);

      g_string_append_printf (out, "  n%u -> n%u [id=\"e%u\", color=\"%s\"", e->tail, e->head, j, hex);
      if (e->label != NULL)
        {
          g_string_append (out, ", label=");
          dot_quote (out, e->label);
          g_string_append_printf (out, ", fontcolor=\"%s\"", hex);
        }
      if (e->future)
        g_string_append (out, ", style=dashed, cswait=1");
      g_string_append (out, ", tooltip=");
      dot_quote (out, e->proxy);
      g_string_append (out, "];\n");
    }
  g_string_append (out, "}\n");
  return g_string_free (out, FALSE);
}
