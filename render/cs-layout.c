/* cs-layout.c: Graphviz dot layout on one serialised worker, snapshot into the display list,
 * async API, hit testing and overlays.
 *
 * cgraph is not thread-safe (cgraph(3)): every Graphviz call in castscope runs under
 * graphviz_lock, so layouts requested from several threads run one after the other.
 */
#include "cs-config.h"

#include "cs-layout.h"
#include "cs-lens.h"
#include "cs-layout-private.h"
#include "cs-layout-cache.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gvc.h>

#include "cs-diff.h"
#include "cs-graph.h"
#include "cs-ops.h"

/* Above this many nodes dot runs fewer crossing-minimisation passes (mclimit=0.3), trading
 * some crossings for time.  Bounding network simplex too (nslimit) made the LLaMA backward
 * slower, not faster: a worse ranking gives longer edges, which cost more in mincross and
 * spline routing (measured with a Graphviz probe, CPU time 2.35 s -> 2.30 s with nslimit=2,
 * 2.15 s with mclimit=0.2 alone). */
#define FAST_LAYOUT_NODES 600

static GMutex graphviz_lock;
static GVC_t *graphviz_context;      /* one per process, created under the lock */
static GString *graphviz_messages;   /* agerr text of the current call, under the lock */

static int
capture_graphviz_message (char *msg)
{
  if (graphviz_messages != NULL && graphviz_messages->len < 4096)
    g_string_append (graphviz_messages, msg);
  return 0;
}

/* ---------------------------------------------------------------------------------------- */
/* reference counting                                                                        */

/**
 * cs_layout_ref:
 * @layout: a layout
 * Returns: (transfer full): @layout
 */
CsLayout *
cs_layout_ref (CsLayout *layout)
{
  g_return_val_if_fail (layout != NULL, NULL);
  g_atomic_int_inc (&layout->ref_count);
  return layout;
}

/**
 * cs_layout_unref:
 * @layout: (transfer full): a layout
 *
 * Drops a reference; the last one frees every array and string and releases the trace.
 */
void
cs_layout_unref (CsLayout *layout)
{
  g_return_if_fail (layout != NULL);
  if (!g_atomic_int_dec_and_test (&layout->ref_count))
    return;
  for (guint i = 0; i < layout->n_nodes; i++)
    {
      g_free (layout->nodes[i].name);
      g_free (layout->nodes[i].label);
      g_free (layout->nodes[i].detail);
      g_free (layout->nodes[i].user_cast_note);
    }
  for (guint i = 0; i < layout->n_edges; i++)
    {
      g_free (layout->edges[i].proxy);
      g_free (layout->edges[i].label);
      g_free (layout->edges[i].points);
    }
  for (guint i = 0; i < layout->n_clusters; i++)
    {
      g_free (layout->clusters[i].title);
      g_free (layout->clusters[i].subtitle);
    }
  g_free (layout->nodes);
  g_free (layout->edges);
  g_free (layout->clusters);
  g_strfreev (layout->notes);
  g_free (layout->title);
  g_free (layout->font_family);
  g_free (layout->dot);
  g_free (layout->scale_title);
  g_clear_pointer (&layout->grouping, cs_grouping_free);
  g_free (layout->group_collapsed);
  g_free (layout->group_fold);
  g_clear_pointer (&layout->trace_index, _cs_trace_index_unref);
  g_clear_pointer (&layout->trace, cs_trace_unref);
  g_free (layout);
}

/* ---------------------------------------------------------------------------------------- */
/* Graphviz                                                                                  */

static gboolean
parse_index (const char *name, const char *prefix, guint limit, guint *out)
{
  gsize plen = strlen (prefix);
  char *end = NULL;
  guint64 v;

  if (name == NULL || strncmp (name, prefix, plen) != 0 || name[plen] == '\0')
    return FALSE;
  v = g_ascii_strtoull (name + plen, &end, 10);
  if (end == NULL || *end != '\0' || v >= limit)
    return FALSE;
  *out = (guint) v;
  return TRUE;
}

static void
snapshot_clusters (CsLayout *layout, Agraph_t *g)
{
  for (int i = 1; i <= GD_n_cluster (g); i++)
    {
      Agraph_t *sg = GD_clust (g)[i];
      guint c;

      if (parse_index (agnameof (sg), "cluster_", layout->n_clusters, &c))
        {
          boxf bb = GD_bb (sg);
          CsLayoutCluster *cl = &layout->clusters[c];

          cl->box = (CsRect) { bb.LL.x, bb.LL.y, bb.UR.x, bb.UR.y };
          if (GD_label (sg) != NULL)
            cl->title_pos = (CsPoint) { GD_label (sg)->pos.x, GD_label (sg)->pos.y };
          else
            cl->title_pos = (CsPoint) { (bb.LL.x + bb.UR.x) / 2, bb.UR.y - 8 };
        }
      snapshot_clusters (layout, sg);
    }
}

static void
snapshot (CsLayout *layout, Agraph_t *g)
{
  boxf bb = GD_bb (g);

  layout->bb = (CsRect) { bb.LL.x, bb.LL.y, bb.UR.x, bb.UR.y };
  for (Agnode_t *n = agfstnode (g); n != NULL; n = agnxtnode (g, n))
    {
      guint i;
      double w, h;
      CsLayoutNode *ln;

      if (!parse_index (agnameof (n), "n", layout->n_nodes, &i))
        continue;
      ln = &layout->nodes[i];
      w = ND_width (n) * 72.0;
      h = ND_height (n) * 72.0;
      ln->box = (CsRect) { ND_coord (n).x - w / 2, ND_coord (n).y - h / 2,
                           ND_coord (n).x + w / 2, ND_coord (n).y + h / 2 };
      ln->label_pos = (CsPoint) { ND_coord (n).x, ND_coord (n).y };

      for (Agedge_t *e = agfstout (g, n); e != NULL; e = agnxtout (g, e))
        {
          guint j;
          CsLayoutEdge *le;
          splines *spl;

          if (!parse_index (agget (e, (char *) "id"), "e", layout->n_edges, &j))
            continue;
          le = &layout->edges[j];
          spl = ED_spl (e);
          if (spl != NULL && spl->size > 0 && spl->list[0].size > 0)
            {
              /* dot gives one bézier per edge (several only with concentrate=true, which
               * castscope does not set): keep the first */
              const bezier *bz = &spl->list[0];

              le->n_points = (guint) bz->size;
              le->points = g_new (CsPoint, le->n_points);
              for (int p = 0; p < bz->size; p++)
                le->points[p] = (CsPoint) { bz->list[p].x, bz->list[p].y };
              if (bz->eflag)
                {
                  le->has_arrow = TRUE;
                  le->arrow_tip = (CsPoint) { bz->ep.x, bz->ep.y };
                }
            }
          if (ED_label (e) != NULL && ED_label (e)->set)
            {
              le->has_label_pos = TRUE;
              le->label_pos = (CsPoint) { ED_label (e)->pos.x, ED_label (e)->pos.y };
            }
        }
    }
  snapshot_clusters (layout, g);
}

/**
 * cs_layout_run_graphviz:
 * @layout: a display list from cs_graph_build() (its `dot` text is laid out)
 * @cancellable: (nullable): checked before and after the layout (dot itself cannot be
 *   interrupted)
 * @error: return location for a #CS_RENDER_ERROR or G_IO_ERROR_CANCELLED
 *
 * Lays @layout out with Graphviz dot (rankdir TB) and copies the geometry into it: node boxes
 * (ND_coord +- ND_width / ND_height x 72 / 2), edge béziers and arrow tips (ED_spl), edge
 * label centres (ED_label), cluster boxes and title centres (GD_bb / GD_label of each
 * `cluster_<k>` subgraph, recursively) and the bounding box; then frees the Graphviz graph.
 * All units are points, y up.  Above 600 nodes dot runs with mclimit=0.3 (fewer
 * crossing-minimisation passes).  Blocks; serialised with every other
 * Graphviz call of the process; safe to call from any thread.  Sets @layout->layout_ms.
 * Errors: CS_RENDER_ERROR_LAYOUT with Graphviz's message when the DOT text is rejected or dot
 * fails.
 * Source: recipes.md 2(a) (types.h route, gotchas: y up, inches, 1-based GD_clust).
 * Returns: TRUE on success
 */
gboolean
cs_layout_run_graphviz (CsLayout *layout, GCancellable *cancellable, GError **error)
{
  Agraph_t *g;
  gint64 t0;
  gboolean ok = FALSE;

  g_return_val_if_fail (layout != NULL && layout->dot != NULL, FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  if (g_cancellable_set_error_if_cancelled (cancellable, error))
    return FALSE;

  g_mutex_lock (&graphviz_lock);
  t0 = g_get_monotonic_time ();
  graphviz_messages = g_string_new (NULL);
  agseterrf (capture_graphviz_message);
  agseterr (AGERR);
  if (graphviz_context == NULL)
    graphviz_context = gvContext ();

  g = agmemread (layout->dot);
  if (g == NULL)
    {
      g_set_error (error, CS_RENDER_ERROR, CS_RENDER_ERROR_LAYOUT,
                   "Graphviz could not read the graph of '%s': %s", layout->title,
                   graphviz_messages->len ? g_strstrip (graphviz_messages->str) : "unknown error");
      goto out;
    }
  if (layout->n_nodes > FAST_LAYOUT_NODES)
    agsafeset (g, (char *) "mclimit", (char *) "0.3", (char *) "");
  if (gvLayout (graphviz_context, g, "dot") != 0)
    {
      g_set_error (error, CS_RENDER_ERROR, CS_RENDER_ERROR_LAYOUT,
                   "Graphviz dot failed on '%s': %s", layout->title,
                   graphviz_messages->len ? g_strstrip (graphviz_messages->str) : "unknown error");
      agclose (g);
      goto out;
    }
  snapshot (layout, g);
  gvFreeLayout (graphviz_context, g);
  agclose (g);
  layout->laid_out = TRUE;
  ok = TRUE;

out:
  agseterrf (NULL);
  g_string_free (graphviz_messages, TRUE);
  graphviz_messages = NULL;
  layout->layout_ms = (g_get_monotonic_time () - t0) / 1000.0;
  g_mutex_unlock (&graphviz_lock);

  if (ok && g_cancellable_set_error_if_cancelled (cancellable, error))
    return FALSE;
  return ok;
}

/**
 * cs_layout_run:
 * @layout: a display list from cs_graph_build()
 * @cancellable: (nullable): a #GCancellable
 * @error: return location for a #CS_RENDER_ERROR or G_IO_ERROR_CANCELLED
 *
 * Lays @layout out.  A picture with a large expanded group (a layer, module or chunk of
 * COMPOSE_MIN_NODES nodes or more, drawn as a box of its statements) is laid out in pieces
 * (render/cs-layout-compose.c): each such group on its own, the picture around them with one
 * box per group, then put together; pieces laid out before with the same structure (a
 * repeated layer, a state seen before) come from a cache.  Otherwise, or when a piece would
 * exceed the limit where the whole would not: with Graphviz dot (cs_layout_run_graphviz()) up
 * to @layout->max_dot_nodes nodes, above that with castscope's layered layout
 * (render/cs-layout-layered.c: longest-path ranks and barycentre sweeps, milliseconds for
 * thousands of nodes; dot took 6.6 s of CPU for 2,042 nodes here), so nothing freezes.  A
 * composed picture uses dot for each piece up to that limit and the layered layout above it.
 * The note about the layered layout is in @layout->notes (cs_graph_build()); composing
 * replaces it with one that says how the picture was laid out.  Sets @layout->layered,
 * ->composed, ->composed_reused and ->layout_ms.  Blocks; safe on any thread.
 * Returns: TRUE on success
 */
gboolean
cs_layout_run (CsLayout *layout, GCancellable *cancellable, GError **error)
{
  gint64 t0;
  gboolean ran, ok;

  g_return_val_if_fail (layout != NULL, FALSE);
  ok = _cs_layout_run_composed (layout, cancellable, error, &ran);
  if (ran)
    return ok;
  if (layout->max_dot_nodes == 0 || layout->n_nodes <= layout->max_dot_nodes)
    return cs_layout_run_graphviz (layout, cancellable, error);
  if (g_cancellable_set_error_if_cancelled (cancellable, error))
    return FALSE;
  t0 = g_get_monotonic_time ();
  _cs_layout_run_layered (layout);
  layout->layered = TRUE;
  layout->layout_ms = (g_get_monotonic_time () - t0) / 1000.0;
  return !g_cancellable_set_error_if_cancelled (cancellable, error);
}

/**
 * cs_layout_new:
 * @trace: the trace to draw
 * @options: (nullable): what to draw (NULL = defaults)
 * @cancellable: (nullable): a #GCancellable
 * @error: return location for a #CS_RENDER_ERROR or G_IO_ERROR_CANCELLED
 *
 * cs_graph_build() then cs_layout_run(): a complete display list.  Blocks for the whole
 * layout (milliseconds for small traces, about a second for dot at its 1,200-node limit);
 * never call it on a GUI thread, use cs_layout_new_async().  With @options->cache set, the
 * layout made before for @trace with the same options (cs_render_options_key()) is returned
 * at once (the same object, a new reference), and a new one is kept there; the grouping of
 * @trace is found once (render/cs-layout-cache.h).
 * Returns: (transfer full): the laid-out display list, or NULL with @error set
 */
CsLayout *
cs_layout_new (CsTrace *trace, const CsRenderOptions *options, GCancellable *cancellable,
               GError **error)
{
  g_autoptr(CsLayout) layout = NULL;

  g_return_val_if_fail (trace != NULL, NULL);
  if (g_cancellable_set_error_if_cancelled (cancellable, error))
    return NULL;
  if (options != NULL && options->cache != NULL
      && (layout = cs_layout_cache_lookup (options->cache, trace, options)) != NULL)
    return g_steal_pointer (&layout);
  layout = cs_graph_build (trace, options, error);
  if (layout == NULL)
    return NULL;
  if (!cs_layout_run (layout, cancellable, error))
    return NULL;
  if (options != NULL && options->cache != NULL)
    cs_layout_cache_insert (options->cache, trace, options, layout);
  return g_steal_pointer (&layout);
}

/* ---------------------------------------------------------------------------------------- */
/* overlays made on the worker                                                               */

static void find_moves (const CsTrace *a, const CsTrace *b, GPtrArray **moved,
                        GByteArray **moved_in);
static void mark_diff_full (CsLayout *layout, const CsTrace *other, gboolean this_is_newer,
                            const CsTraceDiff *diff, const GPtrArray *moved,
                            const GByteArray *moved_in, CsLayoutDiffStats *stats);

struct _CsLayoutDiffSource
{
  gint         ref_count;       /* atomic */
  CsTrace     *trace;           /* (owned ref) the trace whose layouts are marked */
  CsTrace     *other;           /* (owned ref) the trace it is compared with */
  gboolean     trace_is_newer;  /* the diff is cs_trace_diff (other, trace), else (trace, other) */
  guint64      serial;          /* unique per source, > 0 (CsLayout.diff_serial) */
  GMutex       lock;            /* guards @diff and @made */
  gboolean     made;            /* @diff has been computed */
  CsTraceDiff *diff;            /* (owned, nullable until @made) */
  GPtrArray   *moved;           /* (owned, nullable until found) @trace_is_newer: find_moves() */
  GByteArray  *moved_in;        /* (owned, nullable until found) */
};

G_LOCK_DEFINE_STATIC (diff_source_serial);
static guint64 diff_source_serial;   /* under its lock; the last serial handed out */

/**
 * cs_layout_diff_source_new:
 * @trace: the trace drawn (a reference is taken)
 * @other: the trace it is compared with (a reference is taken)
 * @trace_is_newer: TRUE: the diff is cs_trace_diff (@other, @trace) and @trace is the newer
 *   side (cs_layout_mark_diff()'s this_is_newer); FALSE: cs_trace_diff (@trace, @other)
 *
 * A diff of @trace against @other, not computed yet: cs_layout_diff_source_get() computes it
 * once, on the first thread that asks (thread-safe), and every layout of @trace marked with it
 * shares it.  Each source has its own serial (cs_layout_diff_source_serial()), so a layout
 * marked with it (CsLayout.diff_serial) can be recognised.  Reference counted.
 * Returns: (transfer full): the source
 */
CsLayoutDiffSource *
cs_layout_diff_source_new (CsTrace *trace, CsTrace *other, gboolean trace_is_newer)
{
  CsLayoutDiffSource *src;

  g_return_val_if_fail (trace != NULL && other != NULL, NULL);
  src = g_new0 (CsLayoutDiffSource, 1);
  src->ref_count = 1;
  src->trace = cs_trace_ref (trace);
  src->other = cs_trace_ref (other);
  src->trace_is_newer = trace_is_newer;
  G_LOCK (diff_source_serial);
  src->serial = ++diff_source_serial;
  G_UNLOCK (diff_source_serial);
  g_mutex_init (&src->lock);
  return src;
}

/** cs_layout_diff_source_ref: Returns: (transfer full): @source */
CsLayoutDiffSource *
cs_layout_diff_source_ref (CsLayoutDiffSource *source)
{
  g_return_val_if_fail (source != NULL, NULL);
  g_atomic_int_inc (&source->ref_count);
  return source;
}

/** cs_layout_diff_source_unref: drops a reference; the last frees the diff and the traces. */
void
cs_layout_diff_source_unref (CsLayoutDiffSource *source)
{
  if (source == NULL || !g_atomic_int_dec_and_test (&source->ref_count))
    return;
  g_clear_pointer (&source->diff, cs_trace_diff_free);
  g_clear_pointer (&source->moved, g_ptr_array_unref);
  g_clear_pointer (&source->moved_in, g_byte_array_unref);
  cs_trace_unref (source->trace);
  cs_trace_unref (source->other);
  g_mutex_clear (&source->lock);
  g_free (source);
}

/**
 * cs_layout_diff_source_matches:
 * Returns: whether @source compares @trace with @other in that direction
 */
gboolean
cs_layout_diff_source_matches (const CsLayoutDiffSource *source, const CsTrace *trace,
                               const CsTrace *other, gboolean trace_is_newer)
{
  return source != NULL && source->trace == trace && source->other == other
         && !source->trace_is_newer == !trace_is_newer;
}

/**
 * cs_layout_diff_source_get:
 *
 * The diff, computed on the first call (cs_trace_diff(): it reads every statement of both
 * traces, about 0.3 s at 50,000 statements); a call from another thread meanwhile waits for
 * it.  Thread-safe.
 * Returns: (transfer none): the diff, valid while @source is
 */
const CsTraceDiff *
cs_layout_diff_source_get (CsLayoutDiffSource *source)
{
  const CsTraceDiff *diff;

  g_return_val_if_fail (source != NULL, NULL);
  g_mutex_lock (&source->lock);
  if (!source->made)
    {
      source->diff = source->trace_is_newer ? cs_trace_diff (source->other, source->trace)
                                            : cs_trace_diff (source->trace, source->other);
      source->made = TRUE;
    }
  diff = source->diff;
  g_mutex_unlock (&source->lock);
  return diff;
}

/* The statements of the newer trace that moved into and out of regions (find_moves()),
 * found once per source; NULL for a source whose trace is the older side. */
static void
diff_source_moves (CsLayoutDiffSource *source, const GPtrArray **moved,
                   const GByteArray **moved_in)
{
  *moved = NULL;
  *moved_in = NULL;
  if (!source->trace_is_newer)
    return;
  g_mutex_lock (&source->lock);
  if (source->moved == NULL)
    find_moves (source->other, source->trace, &source->moved, &source->moved_in);
  *moved = source->moved;
  *moved_in = source->moved_in;
  g_mutex_unlock (&source->lock);
}

/**
 * cs_layout_mark_diff_source:
 * @layout: a display list of @source's trace (owner thread only, or a layout nobody else
 *   holds yet)
 * @source: the diff to mark
 * @stats: (out) (optional): what was marked, as for cs_layout_mark_diff()
 *
 * cs_layout_mark_diff_with() with @source's diff and its moves into and out of regions (both
 * found once per source), then records it: CsLayout.diff_serial is @source's serial and
 * CsLayout.diff_marked what was marked.
 */
void
cs_layout_mark_diff_source (CsLayout *layout, CsLayoutDiffSource *source,
                            CsLayoutDiffStats *stats)
{
  CsLayoutDiffStats st;
  const GPtrArray *moved;
  const GByteArray *moved_in;

  g_return_if_fail (layout != NULL && source != NULL && layout->trace == source->trace);
  diff_source_moves (source, &moved, &moved_in);
  mark_diff_full (layout, source->other, source->trace_is_newer,
                  cs_layout_diff_source_get (source), moved, moved_in, &st);
  layout->diff_serial = source->serial;
  layout->diff_marked = st;
  if (stats != NULL)
    *stats = st;
}

/** cs_layout_diff_source_serial: Returns: the source's serial (> 0), as CsLayout.diff_serial */
guint64
cs_layout_diff_source_serial (const CsLayoutDiffSource *source)
{
  g_return_val_if_fail (source != NULL, 0);
  return source->serial;
}

/**
 * cs_layout_marks_copy:
 * @src: marks
 * @dst: (out caller-allocates): takes its own references of @src's
 */
void
cs_layout_marks_copy (const CsLayoutMarks *src, CsLayoutMarks *dst)
{
  g_return_if_fail (src != NULL && dst != NULL);
  dst->diff = src->diff ? cs_layout_diff_source_ref (src->diff) : NULL;
  dst->user_casts = src->user_casts ? g_ptr_array_ref (src->user_casts) : NULL;
  dst->user_casts_keep = src->user_casts_keep ? g_ptr_array_ref (src->user_casts_keep) : NULL;
  dst->user_casts_serial = src->user_casts_serial;
}

/** cs_layout_marks_clear: drops the references of @marks and zeroes it. */
void
cs_layout_marks_clear (CsLayoutMarks *marks)
{
  g_return_if_fail (marks != NULL);
  g_clear_pointer (&marks->diff, cs_layout_diff_source_unref);
  g_clear_pointer (&marks->user_casts, g_ptr_array_unref);
  g_clear_pointer (&marks->user_casts_keep, g_ptr_array_unref);
  marks->user_casts_serial = 0;
}

typedef struct
{
  CsTrace         *trace;   /* (owned ref) the trace to lay out */
  CsRenderOptions  options; /* (owned) a copy of the caller's */
  CsLayoutMarks    marks;   /* (owned) overlays to mark on the result */
} LayoutTaskData;

static void
layout_task_data_free (gpointer data)
{
  LayoutTaskData *d = data;

  cs_trace_unref (d->trace);
  cs_render_options_clear (&d->options);
  cs_layout_marks_clear (&d->marks);
  g_free (d);
}

/* Marks @marks on @layout, a layout nobody else holds yet; the statement index it needs comes
 * from @cache (nullable), shared with the trace's other layouts while they are marked (the
 * layout lets go of it afterwards: the cache keeps the one of the trace shown last, and a
 * layout kept in the cache must not keep another one alive). */
static void
apply_marks (CsLayout *layout, CsLayoutMarks *marks, CsLayoutCache *cache)
{
  gboolean casts = marks->user_casts_serial != 0 && marks->user_casts != NULL
                   && marks->user_casts->len > 0;

  if (cache != NULL && layout->trace != NULL && layout->trace_index == NULL
      && (marks->diff != NULL || casts))
    layout->trace_index = _cs_layout_cache_dup_trace_index (cache, layout->trace);
  if (marks->diff != NULL)
    cs_layout_mark_diff_source (layout, marks->diff, NULL);
  if (marks->user_casts_serial != 0)
    {
      cs_layout_mark_user_casts (layout, marks->user_casts);
      layout->user_casts_serial = marks->user_casts_serial;
    }
  g_clear_pointer (&layout->trace_index, _cs_trace_index_unref);
}

static void
layout_task_thread (GTask *task, gpointer source, gpointer task_data, GCancellable *cancellable)
{
  LayoutTaskData *d = task_data;
  const CsRenderOptions *o = &d->options;
  GError *error = NULL;
  CsLayout *layout = NULL;

  if (g_cancellable_set_error_if_cancelled (cancellable, &error))
    {
      g_task_return_error (task, error);
      return;
    }
  if (o->cache != NULL && (layout = cs_layout_cache_lookup (o->cache, d->trace, o)) != NULL)
    {
      /* a layout seen before may be shown by its owner: only warm the diff it will mark */
      if (d->marks.diff != NULL && layout->diff_serial != d->marks.diff->serial)
        cs_layout_diff_source_get (d->marks.diff);
      g_task_return_pointer (task, layout, (GDestroyNotify) cs_layout_unref);
      return;
    }
  layout = cs_graph_build (d->trace, o, &error);
  if (layout != NULL && !cs_layout_run (layout, cancellable, &error))
    g_clear_pointer (&layout, cs_layout_unref);
  if (layout == NULL)
    {
      g_task_return_error (task, error);
      return;
    }
  if (!g_cancellable_is_cancelled (cancellable))
    apply_marks (layout, &d->marks, o->cache);
  if (o->cache != NULL)
    cs_layout_cache_insert (o->cache, d->trace, o, layout);
  g_task_return_pointer (task, layout, (GDestroyNotify) cs_layout_unref);
}

/**
 * cs_layout_new_async:
 * @trace: the trace to draw (a reference is taken; traces are immutable)
 * @options: (nullable): what to draw; copied, so the caller may change or clear it at once
 * @cancellable: (nullable): cancels the request (the result is dropped and @callback gets
 *   G_IO_ERROR_CANCELLED)
 * @callback: called in the caller's thread-default main context when the layout is done
 * @user_data: data for @callback
 *
 * cs_layout_new() on a worker thread (GTask); Graphviz calls are serialised across all workers.
 * Finish with cs_layout_new_finish().
 */
void
cs_layout_new_async (CsTrace *trace, const CsRenderOptions *options, GCancellable *cancellable,
                     GAsyncReadyCallback callback, gpointer user_data)
{
  cs_layout_new_async_marked (trace, options, NULL, cancellable, callback, user_data);
}

/**
 * cs_layout_new_async_marked:
 * @trace: the trace to draw (a reference is taken)
 * @options: (nullable): what to draw; copied
 * @marks: (nullable): overlays to mark on the worker (copied): the diff, computed there on
 *   first use, and the user's removed casts
 * @cancellable: (nullable): as for cs_layout_new_async()
 * @callback: as for cs_layout_new_async()
 * @user_data: data for @callback
 *
 * cs_layout_new_async() that also marks @marks on a layout it builds, before the layout goes
 * into @options->cache, so that its owner finds CsLayout.diff_serial, .diff_marked and
 * .user_casts_serial set and need not mark on its own thread (for a 100,000-statement trace
 * the diff and the marks take about a second).  A layout found in the cache is handed out
 * unmarked (its owner may be showing it); only the diff it needs is computed.
 */
void
cs_layout_new_async_marked (CsTrace *trace, const CsRenderOptions *options,
                            const CsLayoutMarks *marks, GCancellable *cancellable,
                            GAsyncReadyCallback callback, gpointer user_data)
{
  g_autoptr(GTask) task = NULL;
  LayoutTaskData *d;

  g_return_if_fail (trace != NULL);
  g_return_if_fail (marks == NULL || marks->diff == NULL || marks->diff->trace == trace);
  task = g_task_new (NULL, cancellable, callback, user_data);
  g_task_set_source_tag (task, cs_layout_new_async);
  g_task_set_check_cancellable (task, TRUE);
  d = g_new0 (LayoutTaskData, 1);
  d->trace = cs_trace_ref (trace);
  if (options != NULL)
    cs_render_options_copy (options, &d->options);
  else
    cs_render_options_init (&d->options);
  if (marks != NULL)
    cs_layout_marks_copy (marks, &d->marks);
  g_task_set_task_data (task, d, layout_task_data_free);
  g_task_run_in_thread (task, layout_task_thread);
}

/**
 * cs_layout_new_finish:
 * @result: the #GAsyncResult passed to the callback
 * @error: return location for a #CS_RENDER_ERROR or G_IO_ERROR_CANCELLED
 * Returns: (transfer full): the display list, or NULL with @error set
 */
CsLayout *
cs_layout_new_finish (GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, NULL), NULL);
  return g_task_propagate_pointer (G_TASK (result), error);
}

/* ---------------------------------------------------------------------------------------- */
/* hit testing                                                                               */

static gboolean
rect_contains (const CsRect *r, double x, double y, double tol)
{
  return x >= r->x0 - tol && x <= r->x1 + tol && y >= r->y0 - tol && y <= r->y1 + tol;
}

static double
seg_dist2 (CsPoint a, CsPoint b, double x, double y)
{
  double dx = b.x - a.x, dy = b.y - a.y;
  double len2 = dx * dx + dy * dy;
  double t = len2 > 0 ? ((x - a.x) * dx + (y - a.y) * dy) / len2 : 0;
  double px, py;

  t = CLAMP (t, 0.0, 1.0);
  px = a.x + t * dx - x;
  py = a.y + t * dy - y;
  return px * px + py * py;
}

static CsPoint
bezier_at (const CsPoint *p, double t)
{
  double u = 1 - t;
  double a = u * u * u, b = 3 * u * u * t, c = 3 * u * t * t, d = t * t * t;

  return (CsPoint) { a * p[0].x + b * p[1].x + c * p[2].x + d * p[3].x,
                     a * p[0].y + b * p[1].y + c * p[2].y + d * p[3].y };
}

/* Squared distance from (x, y) to the edge's béziers, flattened in 16 steps per segment. */
static double
edge_dist2 (const CsLayoutEdge *e, double x, double y)
{
  double best = G_MAXDOUBLE;

  for (guint k = 0; k + 3 < e->n_points; k += 3)
    {
      CsPoint prev = e->points[k];
      for (int s = 1; s <= 16; s++)
        {
          CsPoint cur = bezier_at (&e->points[k], s / 16.0);
          best = MIN (best, seg_dist2 (prev, cur, x, y));
          prev = cur;
        }
    }
  if (e->has_arrow && e->n_points > 0)
    best = MIN (best, seg_dist2 (e->points[e->n_points - 1], e->arrow_tip, x, y));
  return best;
}

/**
 * cs_layout_hit_test:
 * @layout: a laid-out display list
 * @x_pt: x in points (layout coordinates, see cs_view_to_pt())
 * @y_pt: y in points, y up
 * @tolerance_pt: how far from a node box or an edge curve still counts, in points (pass
 *   a few pixels divided by the view scale)
 * @hit: (out): what is there
 *
 * Finds the element at a point: a node whose box (grown by @tolerance_pt) holds it first,
 * else the nearest edge within @tolerance_pt (distance to the flattened béziers and the arrow),
 * else the innermost cluster whose box holds it.  Linear in the size of the display list.
 * Source: recipes.md 2(a) item 2 (inverse transform, distance to flattened béziers), as
 * xdot.py's elements.py does.
 * Returns: TRUE when something was hit
 */
gboolean
cs_layout_hit_test (const CsLayout *layout, double x_pt, double y_pt, double tolerance_pt,
                    CsLayoutHit *hit)
{
  double best = G_MAXDOUBLE;
  gint best_i = -1;
  double best_area = G_MAXDOUBLE;

  g_return_val_if_fail (layout != NULL && hit != NULL, FALSE);
  hit->kind = CS_LAYOUT_HIT_NONE;
  hit->index = 0;
  if (!layout->laid_out)
    return FALSE;
  tolerance_pt = MAX (tolerance_pt, 0.0);

  for (guint i = 0; i < layout->n_nodes; i++)
    if (rect_contains (&layout->nodes[i].box, x_pt, y_pt, tolerance_pt))
      {
        hit->kind = CS_LAYOUT_HIT_NODE;
        hit->index = i;
        return TRUE;
      }
  for (guint j = 0; j < layout->n_edges; j++)
    {
      const CsLayoutEdge *e = &layout->edges[j];
      double d;

      if (e->n_points == 0)
        continue;
      d = edge_dist2 (e, x_pt, y_pt);
      if (d <= tolerance_pt * tolerance_pt && d < best)
        {
          best = d;
          best_i = (gint) j;
        }
    }
  if (best_i >= 0)
    {
      hit->kind = CS_LAYOUT_HIT_EDGE;
      hit->index = (guint) best_i;
      return TRUE;
    }
  best_i = -1;
  for (guint c = 0; c < layout->n_clusters; c++)
    {
      const CsRect *r = &layout->clusters[c].box;
      double area = (r->x1 - r->x0) * (r->y1 - r->y0);

      if (rect_contains (r, x_pt, y_pt, 0) && area < best_area)
        {
          best_area = area;
          best_i = (gint) c;
        }
    }
  if (best_i >= 0)
    {
      hit->kind = CS_LAYOUT_HIT_CLUSTER;
      hit->index = (guint) best_i;
      return TRUE;
    }
  return FALSE;
}

/**
 * cs_layout_find_node:
 * @layout: a display list
 * @stmt_id: a CsStmt.id
 *
 * The node drawn for statement @stmt_id; when the statement is drawn expanded (its prims),
 * the first node it holds (nodes whose top_stmt_id is @stmt_id).  For the GUI's "select the
 * graph node of this trace line".
 * Returns: the node index, or -1
 */
gint
cs_layout_find_node (const CsLayout *layout, guint32 stmt_id)
{
  g_return_val_if_fail (layout != NULL, -1);
  if (stmt_id == 0)
    return -1;
  for (guint i = 0; i < layout->n_nodes; i++)
    if (layout->nodes[i].stmt_id == stmt_id)
      return (gint) i;
  for (guint i = 0; i < layout->n_nodes; i++)
    if (layout->nodes[i].top_stmt_id == stmt_id)
      return (gint) i;
  return -1;
}

/**
 * cs_layout_find_cluster:
 * @layout: a display list
 * @stmt_id: CsStmt.id of a fusion call or an expanded statement
 * Returns: the cluster index, or -1
 */
gint
cs_layout_find_cluster (const CsLayout *layout, guint32 stmt_id)
{
  g_return_val_if_fail (layout != NULL, -1);
  for (guint c = 0; c < layout->n_clusters; c++)
    if (layout->clusters[c].stmt_id == stmt_id)
      return (gint) c;
  return -1;
}

/* ---------------------------------------------------------------------------------------- */
/* overlays                                                                                  */

/**
 * cs_layout_set_selection:
 * @layout: a display list (owner thread only)
 * @hit: (nullable): the element to select; NULL or CS_LAYOUT_HIT_NONE clears the selection
 *
 * Sets the `selected` flag of exactly one element (the painter outlines it).
 */
void
cs_layout_set_selection (CsLayout *layout, const CsLayoutHit *hit)
{
  g_return_if_fail (layout != NULL);
  for (guint i = 0; i < layout->n_nodes; i++)
    layout->nodes[i].selected = FALSE;
  for (guint i = 0; i < layout->n_edges; i++)
    layout->edges[i].selected = FALSE;
  for (guint i = 0; i < layout->n_clusters; i++)
    layout->clusters[i].selected = FALSE;
  if (hit == NULL)
    return;
  switch (hit->kind)
    {
    case CS_LAYOUT_HIT_NODE:
      if (hit->index < layout->n_nodes)
        layout->nodes[hit->index].selected = TRUE;
      break;
    case CS_LAYOUT_HIT_EDGE:
      if (hit->index < layout->n_edges)
        layout->edges[hit->index].selected = TRUE;
      break;
    case CS_LAYOUT_HIT_CLUSTER:
      if (hit->index < layout->n_clusters)
        layout->clusters[hit->index].selected = TRUE;
      break;
    case CS_LAYOUT_HIT_NONE:
    default:
      break;
    }
}

/**
 * cs_layout_clear_values:
 * @layout: a display list (owner thread only)
 *
 * Removes every overlay value and the value scale.
 */
void
cs_layout_clear_values (CsLayout *layout)
{
  g_return_if_fail (layout != NULL);
  for (guint i = 0; i < layout->n_nodes; i++)
    layout->nodes[i].has_value = FALSE;
  for (guint i = 0; i < layout->n_edges; i++)
    layout->edges[i].has_value = FALSE;
  for (guint i = 0; i < layout->n_clusters; i++)
    layout->clusters[i].has_value = FALSE;
  layout->has_scale = FALSE;
  layout->scale_log = FALSE;
  g_clear_pointer (&layout->scale_title, g_free);
}

/**
 * cs_layout_set_stmt_value:
 * @layout: a display list (owner thread only)
 * @stmt_id: CsStmt.id of a statement (a fusion call gives its value to its cluster or its
 *   collapsed node)
 * @value: the value (time in ms, error ...; the unit is the scale's)
 *
 * Attaches one value to the node(s) and cluster drawn for @stmt_id; the painter fills them
 * with cs_palette_scale_color() of (value - min) / (max - min).
 * Returns: how many elements got the value (0 when the statement is not drawn)
 */
guint
cs_layout_set_stmt_value (CsLayout *layout, guint32 stmt_id, double value)
{
  guint n = 0;

  g_return_val_if_fail (layout != NULL, 0);
  for (guint i = 0; i < layout->n_nodes; i++)
    if (layout->nodes[i].stmt_id == stmt_id && stmt_id != 0)
      {
        layout->nodes[i].has_value = TRUE;
        layout->nodes[i].value = value;
        n++;
      }
  for (guint c = 0; c < layout->n_clusters; c++)
    if (layout->clusters[c].stmt_id == stmt_id && stmt_id != 0)
      {
        layout->clusters[c].has_value = TRUE;
        layout->clusters[c].value = value;
        n++;
      }
  return n;
}

/**
 * cs_layout_set_edge_value:
 * @layout: a display list (owner thread only)
 * @proxy: a tensor name
 * @value: the value (for example max |error| of that tensor against the f64 reference)
 *
 * Attaches @value to every edge carrying @proxy; the painter colours them on the scale.
 * Returns: how many edges got the value
 */
guint
cs_layout_set_edge_value (CsLayout *layout, const char *proxy, double value)
{
  guint n = 0;

  g_return_val_if_fail (layout != NULL && proxy != NULL, 0);
  for (guint i = 0; i < layout->n_edges; i++)
    if (g_strcmp0 (layout->edges[i].proxy, proxy) == 0)
      {
        layout->edges[i].has_value = TRUE;
        layout->edges[i].value = value;
        n++;
      }
  return n;
}

/**
 * cs_layout_set_tensor_value:
 * @layout: a display list (owner thread only)
 * @proxy: a tensor name
 * @value: the value of that tensor (its err, ref_err or ratio against the f64 run)
 *
 * A per-tensor value: every edge carrying @proxy (drawn as a heat band under its dtype colour)
 * and the OUTPUT node of @proxy (filled with the heat, its border keeping the dtype colour).
 * Returns: how many elements got the value
 */
guint
cs_layout_set_tensor_value (CsLayout *layout, const char *proxy, double value)
{
  guint n;

  g_return_val_if_fail (layout != NULL && proxy != NULL, 0);
  n = cs_layout_set_edge_value (layout, proxy, value);
  for (guint i = 0; i < layout->n_nodes; i++)
    if (layout->nodes[i].kind == CS_LAYOUT_NODE_OUTPUT && g_strcmp0 (layout->nodes[i].name, proxy) == 0)
      {
        layout->nodes[i].has_value = TRUE;
        layout->nodes[i].value = value;
        n++;
      }
  return n;
}

/**
 * cs_layout_set_value_scale_log:
 * @layout: a display list (owner thread only)
 * @title: (nullable): key title, naming the measure ("err (RMSE vs f64)")
 * @min: value at the low end, > 0
 * @max: value at the high end, > @min
 *
 * A logarithmic colour scale (for errors spanning decades): a value v is drawn at
 * log(v / min) / log(max / min), clamped to [0, 1].  Falls back to the linear
 * cs_layout_set_value_scale() when the bounds are not positive and increasing.
 */
void
cs_layout_set_value_scale_log (CsLayout *layout, const char *title, double min, double max)
{
  g_return_if_fail (layout != NULL);
  if (!(min > 0 && max > min && isfinite (max)))
    {
      cs_layout_set_value_scale (layout, title, min, max);
      return;
    }
  cs_layout_set_value_scale (layout, title, min, max);
  layout->scale_log = TRUE;
}

/**
 * cs_layout_set_value_scale:
 * @layout: a display list (owner thread only)
 * @title: (nullable): key title with unit ("region time (ms)")
 * @min: value at the low end of the scale
 * @max: value at the high end; when @max <= @min the range of the values set is used
 *
 * Sets the colour scale of the value overlay and turns its key on.
 */
void
cs_layout_set_value_scale (CsLayout *layout, const char *title, double min, double max)
{
  g_return_if_fail (layout != NULL);
  if (!(max > min))
    {
      gboolean any = FALSE;

      min = G_MAXDOUBLE;
      max = -G_MAXDOUBLE;
#define ACC(arr, n) \
      for (guint i = 0; i < (n); i++) \
        if ((arr)[i].has_value && isfinite ((arr)[i].value)) \
          { min = MIN (min, (arr)[i].value); max = MAX (max, (arr)[i].value); any = TRUE; }
      ACC (layout->nodes, layout->n_nodes)
      ACC (layout->edges, layout->n_edges)
      ACC (layout->clusters, layout->n_clusters)
#undef ACC
      if (!any)
        {
          min = 0;
          max = 1;
        }
      if (max <= min)
        max = min + 1;
    }
  g_free (layout->scale_title);
  layout->scale_title = g_strdup (title);
  layout->scale_min = min;
  layout->scale_max = max;
  layout->scale_log = FALSE;
  layout->has_scale = TRUE;
}

/* ---- where a statement is drawn ---- */

/* What the overlays look statements up by, for one trace: made once per trace and shared by
 * its layouts (CsLayout.trace_index, kept in a CsLayoutCache), so that marking a layout after
 * an expand reads none of the trace's statements again.  Immutable once made, except
 * `writers`, made on first use under `lock`. */
struct _CsTraceIndex
{
  gint        ref_count;  /* atomic */
  GHashTable *parent;     /* CsStmt* -> enclosing CsStmt* (absent for top-level statements) */
  GHashTable *top_index;  /* top-level CsStmt* -> its index in trace->stmts + 1 */
  GHashTable *by_id;      /* stmt id -> CsStmt* (every level) */
  GHashTable *by_origin;  /* origin -> the first CsStmt* with it, in trace order (every level) */
  GMutex      lock;       /* guards `writers` */
  GHashTable *writers;    /* (nullable until used) output proxy name -> leaf CALL CsStmt* */
};

typedef struct
{
  CsTraceIndex *t;        /* the trace's index (a reference) */
  GHashTable *node_of;    /* stmt id -> node index + 1 (the node whose stmt_id it is) */
  GHashTable *cluster_of; /* stmt id -> cluster index + 1 */
} DrawIndex;

static void
index_subs (CsTraceIndex *t, const CsStmt *s)
{
  g_hash_table_insert (t->by_id, GUINT_TO_POINTER (s->id), (gpointer) s);
  if (s->origin != 0 && !g_hash_table_contains (t->by_origin, GUINT_TO_POINTER (s->origin)))
    g_hash_table_insert (t->by_origin, GUINT_TO_POINTER (s->origin), (gpointer) s);
  for (guint i = 0; i < s->n_subs; i++)
    {
      g_hash_table_insert (t->parent, s->subs[i], (gpointer) s);
      index_subs (t, s->subs[i]);
    }
}

/**
 * _cs_trace_index_new:
 * @trace: (nullable): a trace
 *
 * The statement index of @trace (every level): what encloses each statement, each top-level
 * statement's position, statements by id and by origin.  Reads every statement once (about
 * 0.1 s at 50,000 top-level statements).  The index borrows @trace's statements: keep @trace
 * alive while using it.
 * Returns: (transfer full): the index
 */
CsTraceIndex *
_cs_trace_index_new (const CsTrace *trace)
{
  CsTraceIndex *t = g_new0 (CsTraceIndex, 1);

  t->ref_count = 1;
  t->parent = g_hash_table_new (NULL, NULL);
  t->top_index = g_hash_table_new (NULL, NULL);
  t->by_id = g_hash_table_new (NULL, NULL);
  t->by_origin = g_hash_table_new (NULL, NULL);
  g_mutex_init (&t->lock);
  for (guint i = 0; trace != NULL && i < trace->n_stmts; i++)
    {
      const CsStmt *s = trace->stmts[i];

      g_hash_table_insert (t->top_index, (gpointer) s, GUINT_TO_POINTER (i + 1));
      index_subs (t, s);
    }
  return t;
}

/** _cs_trace_index_ref: Returns: (transfer full): @index */
CsTraceIndex *
_cs_trace_index_ref (CsTraceIndex *index)
{
  g_atomic_int_inc (&index->ref_count);
  return index;
}

/** _cs_trace_index_unref: drops a reference of @index (nullable). */
void
_cs_trace_index_unref (CsTraceIndex *index)
{
  if (index == NULL || !g_atomic_int_dec_and_test (&index->ref_count))
    return;
  g_hash_table_unref (index->parent);
  g_hash_table_unref (index->top_index);
  g_hash_table_unref (index->by_id);
  g_hash_table_unref (index->by_origin);
  g_clear_pointer (&index->writers, g_hash_table_unref);
  g_mutex_clear (&index->lock);
  g_free (index);
}

/* The leaf CALL statements of the trace by the tensor they write (made on first use). */
static GHashTable *
trace_index_writers (CsTraceIndex *t)
{
  GHashTable *w;

  g_mutex_lock (&t->lock);
  if (t->writers == NULL)
    {
      GHashTableIter it;
      gpointer key, value;

      t->writers = g_hash_table_new (g_str_hash, g_str_equal);
      g_hash_table_iter_init (&it, t->by_id);
      while (g_hash_table_iter_next (&it, &key, &value))
        {
          const CsStmt *s = value;
          const CsProxy *o = s->kind == CS_STMT_CALL && s->n_subs == 0 ? cs_stmt_get_output (s) : NULL;

          if (o != NULL)
            g_hash_table_insert (t->writers, (gpointer) o->name, (gpointer) s);
        }
    }
  w = t->writers;
  g_mutex_unlock (&t->lock);
  return w;
}

static void
draw_index_init (DrawIndex *ix, const CsLayout *layout)
{
  ix->t = layout->trace_index != NULL ? _cs_trace_index_ref (layout->trace_index)
                                      : _cs_trace_index_new (layout->trace);
  ix->node_of = g_hash_table_new (NULL, NULL);
  ix->cluster_of = g_hash_table_new (NULL, NULL);
  for (guint i = layout->n_nodes; i-- > 0;)
    if (layout->nodes[i].stmt_id != 0 && layout->nodes[i].kind != CS_LAYOUT_NODE_GHOST)
      g_hash_table_insert (ix->node_of, GUINT_TO_POINTER (layout->nodes[i].stmt_id),
                           GUINT_TO_POINTER (i + 1));
  for (guint c = layout->n_clusters; c-- > 0;)
    g_hash_table_insert (ix->cluster_of, GUINT_TO_POINTER (layout->clusters[c].stmt_id),
                         GUINT_TO_POINTER (c + 1));
}

static void
draw_index_clear (DrawIndex *ix)
{
  _cs_trace_index_unref (ix->t);
  g_hash_table_unref (ix->node_of);
  g_hash_table_unref (ix->cluster_of);
}

/* The element standing for @stmt: its own node or cluster, else the innermost enclosing
 * statement drawn, else the node of the collapsed group holding its top-level statement. */
static gboolean
element_for (const CsLayout *layout, DrawIndex *ix, const CsStmt *stmt, CsLayoutHit *hit)
{
  const CsStmt *top = NULL;

  for (const CsStmt *s = stmt; s != NULL; s = g_hash_table_lookup (ix->t->parent, s))
    {
      gpointer v;

      if ((v = g_hash_table_lookup (ix->node_of, GUINT_TO_POINTER (s->id))) != NULL)
        {
          *hit = (CsLayoutHit) { CS_LAYOUT_HIT_NODE, GPOINTER_TO_UINT (v) - 1 };
          return TRUE;
        }
      if ((v = g_hash_table_lookup (ix->cluster_of, GUINT_TO_POINTER (s->id))) != NULL)
        {
          *hit = (CsLayoutHit) { CS_LAYOUT_HIT_CLUSTER, GPOINTER_TO_UINT (v) - 1 };
          return TRUE;
        }
      top = s;
    }
  if (top != NULL && layout->grouping != NULL)
    {
      guint i = GPOINTER_TO_UINT (g_hash_table_lookup (ix->t->top_index, top));
      gint g = i > 0 ? layout->grouping->stmt_group[i - 1] : -1;
      gint outer = -1;

      for (; g >= 0; g = layout->grouping->groups[g].parent)
        if (layout->group_collapsed[g])
          outer = g;
      if (outer >= 0 && layout->group_fold != NULL && layout->group_fold[outer] >= 0)
        outer = layout->group_fold[outer];
      if (outer >= 0)
        {
          gpointer v = g_hash_table_lookup (ix->node_of, GUINT_TO_POINTER (CS_LAYOUT_GROUP_ID (outer)));
          if (v != NULL)
            {
              *hit = (CsLayoutHit) { CS_LAYOUT_HIT_NODE, GPOINTER_TO_UINT (v) - 1 };
              return TRUE;
            }
        }
    }
  return FALSE;
}

/**
 * cs_layout_find_element:
 * @layout: a display list
 * @stmt_id: a CsStmt.id at any level (a region's prim, a decomposition's prim) or a group id
 *   (CS_LAYOUT_GROUP_ID)
 * @hit: (out): the node or cluster standing for it
 *
 * Finds what is drawn for a statement: its own node or cluster; else the innermost enclosing
 * statement drawn (a prim of a collapsed ltorch call or region); else the node of the collapsed
 * group holding it (of the run of repeats it is folded into, see CsLayout.group_fold).  For the
 * GUI's "show me this statement" and the diff marks.
 * Returns: FALSE when nothing stands for @stmt_id (unknown id, bookkeeping)
 */
gboolean
cs_layout_find_element (const CsLayout *layout, guint32 stmt_id, CsLayoutHit *hit)
{
  DrawIndex ix;
  const CsStmt *s;
  gboolean ok = FALSE;
  gpointer v;

  g_return_val_if_fail (layout != NULL && hit != NULL, FALSE);
  hit->kind = CS_LAYOUT_HIT_NONE;
  hit->index = 0;
  if (stmt_id == 0)
    return FALSE;
  /* drawn as itself (the usual case: a selection, an anchor): no need for the trace's index */
  for (guint i = 0; i < layout->n_nodes; i++)
    if (layout->nodes[i].stmt_id == stmt_id && layout->nodes[i].kind != CS_LAYOUT_NODE_GHOST)
      {
        *hit = (CsLayoutHit) { CS_LAYOUT_HIT_NODE, i };
        return TRUE;
      }
  for (guint c = 0; c < layout->n_clusters; c++)
    if (layout->clusters[c].stmt_id == stmt_id)
      {
        *hit = (CsLayoutHit) { CS_LAYOUT_HIT_CLUSTER, c };
        return TRUE;
      }
  draw_index_init (&ix, layout);
  if ((v = g_hash_table_lookup (ix.node_of, GUINT_TO_POINTER (stmt_id))) != NULL)
    {
      *hit = (CsLayoutHit) { CS_LAYOUT_HIT_NODE, GPOINTER_TO_UINT (v) - 1 };
      ok = TRUE;
    }
  else if ((v = g_hash_table_lookup (ix.cluster_of, GUINT_TO_POINTER (stmt_id))) != NULL)
    {
      *hit = (CsLayoutHit) { CS_LAYOUT_HIT_CLUSTER, GPOINTER_TO_UINT (v) - 1 };
      ok = TRUE;
    }
  else if (!CS_LAYOUT_IS_GROUP_ID (stmt_id)
           && (s = g_hash_table_lookup (ix.t->by_id, GUINT_TO_POINTER (stmt_id))) != NULL)
    ok = element_for (layout, &ix, s, hit);
  else if (CS_LAYOUT_IS_GROUP_ID (stmt_id) && layout->grouping != NULL)
    {
      /* a group drawn inside a collapsed one, or folded into a run of repeats: that node */
      gint outer = -1;

      for (gint g = CS_LAYOUT_GROUP_OF_ID (stmt_id);
           g >= 0 && (guint) g < layout->grouping->n_groups; g = layout->grouping->groups[g].parent)
        if (layout->group_collapsed[g])
          outer = g;
      if (outer >= 0 && layout->group_fold != NULL && layout->group_fold[outer] >= 0)
        outer = layout->group_fold[outer];
      if (outer >= 0
          && (v = g_hash_table_lookup (ix.node_of, GUINT_TO_POINTER (CS_LAYOUT_GROUP_ID (outer)))) != NULL)
        {
          *hit = (CsLayoutHit) { CS_LAYOUT_HIT_NODE, GPOINTER_TO_UINT (v) - 1 };
          ok = TRUE;
        }
    }
  draw_index_clear (&ix);
  return ok;
}

/**
 * cs_layout_element_center:
 * @layout: a laid-out display list
 * @hit: a node or cluster
 * @center: (out): in points: a node's centre; a cluster's title (its centre as laid out, the
 *   part of a box to keep on screen when the box is larger than the view)
 */
void
cs_layout_element_center (const CsLayout *layout, const CsLayoutHit *hit, CsPoint *center)
{
  g_return_if_fail (layout != NULL && hit != NULL && center != NULL);
  *center = (CsPoint) { (layout->bb.x0 + layout->bb.x1) / 2, (layout->bb.y0 + layout->bb.y1) / 2 };
  if (hit->kind == CS_LAYOUT_HIT_NODE && hit->index < layout->n_nodes)
    {
      const CsRect *b = &layout->nodes[hit->index].box;
      *center = (CsPoint) { (b->x0 + b->x1) / 2, (b->y0 + b->y1) / 2 };
    }
  else if (hit->kind == CS_LAYOUT_HIT_CLUSTER && hit->index < layout->n_clusters)
    {
      const CsLayoutCluster *c = &layout->clusters[hit->index];
      double x = c->title_pos.x > c->box.x0 && c->title_pos.x < c->box.x1 ? c->title_pos.x
                                                                         : (c->box.x0 + c->box.x1) / 2;
      *center = (CsPoint) { x, c->title_pos.y };
    }
}

/**
 * cs_layout_set_found:
 * @layout: a display list (owner thread only)
 * @stmt_ids: (nullable): set of stmt ids (GUINT_TO_POINTER keys) matching a Find; NULL clears
 *
 * Flags the nodes and clusters drawn for exactly those ids (the painter draws a halo).
 * Returns: how many elements were flagged
 */
guint
cs_layout_set_found (CsLayout *layout, GHashTable *stmt_ids)
{
  guint n = 0;

  g_return_val_if_fail (layout != NULL, 0);
  for (guint i = 0; i < layout->n_nodes; i++)
    {
      layout->nodes[i].found = stmt_ids != NULL && layout->nodes[i].stmt_id != 0
                               && g_hash_table_contains (stmt_ids, GUINT_TO_POINTER (layout->nodes[i].stmt_id));
      n += layout->nodes[i].found;
    }
  for (guint c = 0; c < layout->n_clusters; c++)
    {
      layout->clusters[c].found = stmt_ids != NULL
                                  && g_hash_table_contains (stmt_ids, GUINT_TO_POINTER (layout->clusters[c].stmt_id));
      n += layout->clusters[c].found;
    }
  return n;
}

static void
remove_ghosts (CsLayout *layout)
{
  for (guint i = layout->n_nodes - layout->n_ghosts; i < layout->n_nodes; i++)
    {
      g_free (layout->nodes[i].name);
      g_free (layout->nodes[i].label);
      g_free (layout->nodes[i].detail);
    }
  layout->n_nodes -= layout->n_ghosts;
  layout->n_ghosts = 0;
}

/**
 * cs_layout_set_precision_lens:
 * @layout: a display list (owner thread only)
 * @on: draw the precision lens
 *
 * The precision lens: edges whose consumer computes in a wider dtype than the tensor is stored
 * in carry a second, dashed line in the compute dtype's colour (and "bf16 \u25b8 f32" by
 * their shape where it fits), and every rounding point (a statement computing wider than it
 * stores: a narrowing cast, a bf16 matmul accumulating in f32, a region upcasting its bf16
 * math) gets a marker in its storage dtype's colour at its output side.  Values come from
 * cs_lens_stmt_precision() (core/cs-lens.h) when the graph is built.
 */
void
cs_layout_set_precision_lens (CsLayout *layout, gboolean on)
{
  g_return_if_fail (layout != NULL);
  layout->precision_lens = on;
}

/**
 * cs_layout_mark_user_casts:
 * @layout: a display list (owner thread only)
 * @removed: (element-type CsRemovedCast): casts the user wrote that a pass removed
 *   (cs_lens_removed_user_casts()); their `reader` names are looked up in the layout's trace
 *
 * Marks, for every removed cast whose reader this trace draws, the node of the statement that
 * now reads the unrounded value (or the collapsed region, statement or group standing for
 * it): `user_casts_removed` counts them, `user_cast_dtype` is the dtype the cast asked for and
 * `user_cast_note` says what was removed.  These marks are not diff marks: they stay across
 * cs_layout_clear_marks() until marked again (NULL clears them).
 * Returns: how many removed casts got a mark
 */
guint
cs_layout_mark_user_casts (CsLayout *layout, const GPtrArray *removed)
{
#define USER_CAST_NOTE_LINES 8
  DrawIndex ix;
  GHashTable *writers;
  guint n = 0;

  g_return_val_if_fail (layout != NULL, 0);
  for (guint i = 0; i < layout->n_nodes; i++)
    {
      layout->nodes[i].user_casts_removed = 0;
      g_clear_pointer (&layout->nodes[i].user_cast_note, g_free);
    }
  layout->n_user_casts_marked = 0;
  if (removed == NULL || removed->len == 0 || layout->trace == NULL)
    return 0;
  draw_index_init (&ix, layout);
  writers = trace_index_writers (ix.t);
  for (guint i = 0; i < removed->len; i++)
    {
      const CsRemovedCast *c = g_ptr_array_index (removed, i);
      const CsStmt *reader;
      CsLayoutHit hit;
      CsLayoutNode *node;

      if (c->reader == NULL)
        continue;
      reader = g_hash_table_lookup (writers, c->reader);
      if (reader == NULL || !element_for (layout, &ix, reader, &hit) || hit.kind != CS_LAYOUT_HIT_NODE)
        continue;
      node = &layout->nodes[hit.index];
      if (node->user_casts_removed++ == 0)
        node->user_cast_dtype = c->to;
      /* the first few in the tooltip (a collapsed layer of a whole model stands for thousands:
       * appending them all is quadratic); the count says how many */
      if (node->user_casts_removed <= USER_CAST_NOTE_LINES)
      {
        g_autofree char *old = node->user_cast_note;
        g_autofree char *line = g_strdup_printf ("your cast on line %u (%s \u2192 %s%s%s) was removed "
                                                 "by remove-redundant-casts: %s reads the value "
                                                 "without that rounding", c->user->line,
                                                 cs_dtype_short_name (c->from),
                                                 cs_dtype_short_name (c->to),
                                                 c->region ? ", in " : "", c->region ? c->region : "",
                                                 c->reader);

        node->user_cast_note = old ? g_strdup_printf ("%s\n%s", old, line) : g_steal_pointer (&line);
      }
      layout->n_user_casts_marked++;
      n++;
    }
  for (guint i = 0; i < layout->n_nodes; i++)
    if (layout->nodes[i].user_casts_removed > USER_CAST_NOTE_LINES)
      {
        CsLayoutNode *node = &layout->nodes[i];
        char *t = g_strdup_printf ("%s\n\u2026 and %u more", node->user_cast_note,
                                   node->user_casts_removed - USER_CAST_NOTE_LINES);

        g_free (node->user_cast_note);
        node->user_cast_note = t;
      }
  draw_index_clear (&ix);
  return n;
#undef USER_CAST_NOTE_LINES
}

/**
 * cs_layout_clear_marks:
 * @layout: a display list (owner thread only)
 *
 * Removes every diff mark and the ghost nodes of removed casts.
 */
void
cs_layout_clear_marks (CsLayout *layout)
{
  g_return_if_fail (layout != NULL);
  remove_ghosts (layout);
  layout->diff_serial = 0;
  for (guint i = 0; i < layout->n_nodes; i++)
    {
      CsLayoutNode *n = &layout->nodes[i];
      n->mark = CS_LAYOUT_MARK_NONE;
      n->mark_count = n->diff_added = n->diff_removed = n->diff_moved = 0;
    }
  for (guint i = 0; i < layout->n_edges; i++)
    layout->edges[i].mark = CS_LAYOUT_MARK_NONE;
  for (guint i = 0; i < layout->n_clusters; i++)
    {
      CsLayoutCluster *c = &layout->clusters[i];
      c->mark = CS_LAYOUT_MARK_NONE;
      c->mark_count = c->diff_added = c->diff_removed = c->diff_moved = 0;
    }
}

/* ---- diff ---- */

/* Which mark an element shows when it stands for several changes: casts first, then moves,
 * then region changes. */
static int
mark_rank (CsLayoutMark m)
{
  switch (m)
    {
    case CS_LAYOUT_MARK_ADDED:     return 5;
    case CS_LAYOUT_MARK_REMOVED:   return 4;
    case CS_LAYOUT_MARK_MOVED_IN:
    case CS_LAYOUT_MARK_MOVED_OUT: return 3;
    case CS_LAYOUT_MARK_SPLIT:
    case CS_LAYOUT_MARK_MERGED:    return 2;
    case CS_LAYOUT_MARK_NEW:       return 1;
    case CS_LAYOUT_MARK_NONE:
    default:                       return 0;
    }
}

static void
put_mark (CsLayoutMark *mark, guint *mark_count, guint *added, guint *removed, guint *moved,
          CsLayoutMark m, guint count)
{
  if (m == CS_LAYOUT_MARK_ADDED)
    *added += count;
  else if (m == CS_LAYOUT_MARK_REMOVED)
    *removed += count;
  else if (m == CS_LAYOUT_MARK_MOVED_IN || m == CS_LAYOUT_MARK_MOVED_OUT)
    *moved += count;
  if (*mark == m)
    *mark_count += count;
  else if (mark_rank (m) > mark_rank (*mark))
    {
      *mark = m;
      *mark_count = m == CS_LAYOUT_MARK_ADDED ? *added : m == CS_LAYOUT_MARK_REMOVED ? *removed
                                              : count;
    }
}

/* Puts @mark with @count on the element standing for @stmt; TRUE when there is one. */
static gboolean
mark_stmt (CsLayout *layout, DrawIndex *ix, const CsStmt *stmt, CsLayoutMark mark, guint count)
{
  CsLayoutHit hit;

  if (stmt == NULL || !element_for (layout, ix, stmt, &hit))
    return FALSE;
  if (hit.kind == CS_LAYOUT_HIT_NODE)
    {
      CsLayoutNode *n = &layout->nodes[hit.index];
      put_mark (&n->mark, &n->mark_count, &n->diff_added, &n->diff_removed, &n->diff_moved, mark, count);
    }
  else
    {
      CsLayoutCluster *c = &layout->clusters[hit.index];
      put_mark (&c->mark, &c->mark_count, &c->diff_added, &c->diff_removed, &c->diff_moved, mark, count);
    }
  return TRUE;
}

/* The node a removed cast of the other trace is drawn next to: the drawn statement of this
 * trace with the cast's origin (the op it was inserted for; inside a collapsed statement,
 * region or group, the node standing for it), else the producer of the tensor it read, else
 * the first statement node. */
static gint
ghost_anchor (CsLayout *layout, DrawIndex *ix, const CsStmt *cast)
{
  g_autoptr(GPtrArray) ins = g_ptr_array_new ();
  gint first = -1;
  const CsStmt *own;
  CsLayoutHit hit;

  /* the first statement with the origin, where it is drawn as a node (a node inside an
   * expanded region is found by the loop below) */
  if (cast->origin != 0
      && (own = g_hash_table_lookup (ix->t->by_origin, GUINT_TO_POINTER (cast->origin))) != NULL
      && element_for (layout, ix, own, &hit) && hit.kind == CS_LAYOUT_HIT_NODE
      && layout->nodes[hit.index].kind != CS_LAYOUT_NODE_GHOST)
    return (gint) hit.index;
  if (cast->origin != 0)
    for (guint i = 0; i < layout->n_nodes; i++)
      {
        const CsStmt *s = g_hash_table_lookup (ix->t->by_id, GUINT_TO_POINTER (layout->nodes[i].stmt_id));

        if (layout->nodes[i].kind == CS_LAYOUT_NODE_GHOST)
          continue;
        if (s != NULL && s->origin == cast->origin)
          {
            /* a prim inside a collapsed node: the node that stands for it */
            if (element_for (layout, ix, s, &hit) && hit.kind == CS_LAYOUT_HIT_NODE)
              return (gint) hit.index;
            return (gint) i;
          }
      }
  cs_stmt_collect_inputs (cast, ins);
  for (guint i = 0; i < layout->n_nodes; i++)
    {
      const CsLayoutNode *n = &layout->nodes[i];

      if (n->kind == CS_LAYOUT_NODE_GHOST)
        continue;
      if (first < 0 && n->stmt_id != 0)
        first = (gint) i;
      for (guint k = 0; k < ins->len; k++)
        if (n->name != NULL && g_strcmp0 (n->name, ((CsProxy *) g_ptr_array_index (ins, k))->name) == 0
            && n->kind == CS_LAYOUT_NODE_INPUT)
          return (gint) i;
    }
  for (guint e = 0; e < layout->n_edges; e++)
    for (guint k = 0; k < ins->len; k++)
      if (g_strcmp0 (layout->edges[e].proxy, ((CsProxy *) g_ptr_array_index (ins, k))->name) == 0
          && layout->nodes[layout->edges[e].tail].kind != CS_LAYOUT_NODE_GHOST)
        return (gint) layout->edges[e].tail;
  return first >= 0 ? first : (layout->n_nodes > 0 ? 0 : -1);
}

/**
 * cs_layout_mark_label:
 * @mark: the mark (CS_LAYOUT_MARK_NONE: none)
 * @added: casts added the element stands for
 * @removed: casts removed it stands for
 * @moved: statements moved into or out of regions it stands for
 *
 * The text drawn beside a marked element (right of its top-right corner): all its changes
 * when it stands for several ("+3 \u22121 casts, 2 moved", a collapsed layer), else the
 * mark's name ("\u2212 removed", "split").
 * Returns: (transfer full) (nullable): the label, NULL for CS_LAYOUT_MARK_NONE
 */
char *
cs_layout_mark_label (CsLayoutMark mark, guint added, guint removed, guint moved)
{
  GString *t;

  if (mark == CS_LAYOUT_MARK_NONE)
    return NULL;
  if (!(added + removed + moved > 1 || (added > 0 && removed > 0)))
    switch (mark)
      {
      case CS_LAYOUT_MARK_ADDED:     return g_strdup ("+ added");
      case CS_LAYOUT_MARK_REMOVED:   return g_strdup ("\u2212 removed");
      case CS_LAYOUT_MARK_SPLIT:     return g_strdup ("split");
      case CS_LAYOUT_MARK_MERGED:    return g_strdup ("merged");
      case CS_LAYOUT_MARK_NEW:       return g_strdup ("new region");
      case CS_LAYOUT_MARK_MOVED_IN:  return g_strdup ("\u2192 into region");
      case CS_LAYOUT_MARK_MOVED_OUT: return g_strdup ("\u2190 out of region");
      case CS_LAYOUT_MARK_NONE:
      default:                       return NULL;
      }
  t = g_string_new (NULL);
  if (added > 0)
    g_string_append_printf (t, "+%u", added);
  if (removed > 0)
    g_string_append_printf (t, "%s\u2212%u", t->len ? " " : "", removed);
  if (added + removed > 0)
    g_string_append (t, added + removed == 1 ? " cast" : " casts");
  if (moved > 0)
    g_string_append_printf (t, "%s%u moved", t->len ? ", " : "", moved);
  return g_string_free (t, FALSE);
}

/* Text width in points of @text at @size pt, bold, from above: 0.8 em a character, more than
 * the mean width of the mark labels' characters in DejaVu Sans Bold (digits 0.70 em, most
 * lower-case letters 0.6-0.7, "m" 1.04), so a box this wide holds such a label
 * (cs_draw_mark_label_box() measures it; /render/draw/ghosts-apart checks). */
static double
text_width_bound (const char *text, double size)
{
  return text != NULL ? (double) g_utf8_strlen (text, -1) * 0.8 * size + 2 : 0;
}

/* Where @n's mark label is drawn (cs_draw_mark_label_box(), bounded by text_width_bound()
 * and 1.4 lines high) for a node whose box is @box; a zero rectangle for no mark. */
static CsRect
mark_label_bound (const CsLayout *layout, const CsLayoutNode *n, const CsRect *box)
{
  g_autofree char *t = cs_layout_mark_label (n->mark, n->diff_added, n->diff_removed, n->diff_moved);
  double fs = layout->font_size_pt * 0.8, lh = fs * 1.4;

  if (t == NULL)
    return (CsRect) { 0, 0, 0, 0 };
  return (CsRect) { box->x1 + 4, box->y1 + 2 - lh / 2, box->x1 + 4 + text_width_bound (t, fs),
                    box->y1 + 2 + lh / 2 };
}

static gboolean
rects_meet (const CsRect *a, const CsRect *b, double gap)
{
  if (a->x1 <= a->x0 || b->x1 <= b->x0)
    return FALSE;
  return !(a->x1 + gap <= b->x0 || b->x1 + gap <= a->x0 || a->y1 + gap <= b->y0
           || b->y1 + gap <= a->y0);
}

/* TRUE when @box (a ghost's, with its mark outline) and @label meet none of @obst (n_obst
 * rectangles), and stay right of bb.x0 and below bb.y1 (the view is anchored there). */
static gboolean
ghost_place_free (const CsLayout *layout, const CsRect *box, const CsRect *label,
                  const GArray *obst)
{
  CsRect outline = { box->x0 - 4, box->y0 - 4, box->x1 + 4, box->y1 + 4 };

  if (layout->laid_out
      && (outline.x0 < layout->bb.x0 || MAX (outline.y1, label->y1) > layout->bb.y1))
    return FALSE;
  for (guint i = 0; i < obst->len; i++)
    {
      const CsRect *o = &g_array_index (obst, CsRect, i);

      if (rects_meet (o, &outline, 2) || rects_meet (o, label, 2))
        return FALSE;
    }
  return TRUE;
}

/* The label and detail of each ghost that more casts were added up on (add_ghost() leaves
 * its label NULL): the count of all of them.  Then places every ghost, in order, where
 * neither it (with its dashed mark outline) nor its mark label ("\u221221 casts", drawn right
 * of its top-right corner) meets a node, a node's mark label or a ghost placed before: right
 * of its anchor, else stacked below or above that place, else the same on the left of the
 * anchor, else further right on the anchor's row (always free eventually: bb.x1 grows). */
static void
finish_ghosts (CsLayout *layout)
{
  g_autoptr(GArray) obst = g_array_new (FALSE, FALSE, sizeof (CsRect));
  g_autoptr(GArray) near = g_array_new (FALSE, FALSE, sizeof (CsRect));
  guint first = layout->n_nodes - layout->n_ghosts;
  double h = 15, fs = layout->font_size_pt;

  for (guint i = first; i < layout->n_nodes; i++)
    {
      CsLayoutNode *o = &layout->nodes[i];

      if (o->label != NULL)
        continue;
      o->label = g_strdup_printf ("\u2192 %s \u00d7%u", cs_dtype_short_name (o->dtype),
                                  o->diff_removed);
      g_free (o->detail);
      o->detail = g_strdup_printf ("removed: %u casts \u2192 %s (in the other trace, here "
                                   "no longer)", o->diff_removed, cs_dtype_short_name (o->dtype));
    }
  for (guint i = 0; i < first; i++)
    {
      CsRect lab = mark_label_bound (layout, &layout->nodes[i], &layout->nodes[i].box);

      g_array_append_val (obst, layout->nodes[i].box);
      if (lab.x1 > lab.x0)
        g_array_append_val (obst, lab);
    }
  for (guint i = first; i < layout->n_nodes; i++)
    {
      CsLayoutNode *g = &layout->nodes[i];
      const CsRect a = layout->nodes[g->target].box;
      double ac = (a.y0 + a.y1) / 2;
      /* wide enough for its own label ("\u2192 bf16 \u00d721", regular weight, 0.85 of the font
       * size: about 0.6 em a character) */
      double w = MAX (52, g_utf8_strlen (g->label, -1) * 0.6 * 0.85 * fs + 12);
      CsRect probe = { 0, 0, w, h }, lab, anchor_lab;
      double lab_w, lab_h, pitch, ac_fb;
      gboolean placed = FALSE;

      lab = mark_label_bound (layout, g, &probe);
      lab_w = lab.x1 - lab.x0;
      lab_h = lab.y1 - lab.y0;
      pitch = h + lab_h + 8;
      /* the fallback row: the anchor's, low enough that the label stays under bb.y1 */
      ac_fb = layout->laid_out ? MIN (ac, layout->bb.y1 - 4 - lab_h - h / 2 - 4) : ac;
      /* the obstacles any candidate below can meet: those within the rows tried, right of
       * the leftmost candidate */
      {
        double ylo = ac_fb - 7 * pitch - 20, yhi = ac + 7 * pitch + 20;
        double xlo = a.x0 - 10 - 4 - lab_w - 4 - w - 20;

        g_array_set_size (near, 0);
        for (guint k = 0; k < obst->len; k++)
          {
            const CsRect *o = &g_array_index (obst, CsRect, k);

            if (o->y1 >= ylo && o->y0 <= yhi && o->x1 >= xlo)
              g_array_append_val (near, *o);
          }
      }
      anchor_lab = mark_label_bound (layout, &layout->nodes[g->target], &a);
      for (guint side = 0; side < 2 && !placed; side++)
        for (gint r = 0; r < 13 && !placed; r++)
          for (guint k = 0; k < 2 && !placed; k++)
            {
              /* rows 0, -1, +1, -2, +2, ...: below (y down) first; on the right, each row
               * next to the anchor, else past the anchor's own mark label */
              gint row = (r + 1) / 2 * (r % 2 ? -1 : 1);
              double yc = ac + row * pitch;
              double x0 = side == 1 ? a.x0 - 10 - 4 - lab_w - 4 - w
                        : k == 0 ? a.x1 + 10 : MAX (a.x1, anchor_lab.x1) + 10;
              CsRect box = { x0, yc - h / 2, x0 + w, yc + h / 2 };

              if (k == 1 && (side == 1 || anchor_lab.x1 <= a.x1))
                continue;
              lab = mark_label_bound (layout, g, &box);
              if (ghost_place_free (layout, &box, &lab, near))
                {
                  g->box = box;
                  placed = TRUE;
                }
            }
      for (guint k = 1; !placed; k++)
        {
          double x0 = a.x1 + 10 + k * (w + lab_w + 14);
          CsRect box = { x0, ac_fb - h / 2, x0 + w, ac_fb + h / 2 };

          lab = mark_label_bound (layout, g, &box);
          if (ghost_place_free (layout, &box, &lab, near) || k > 100000)
            {
              g->box = box;
              placed = TRUE;
            }
        }
      lab = mark_label_bound (layout, g, &g->box);
      g->label_pos = (CsPoint) { (g->box.x0 + g->box.x1) / 2, (g->box.y0 + g->box.y1) / 2 };
      {
        CsRect outline = { g->box.x0 - 4, g->box.y0 - 4, g->box.x1 + 4, g->box.y1 + 4 };

        g_array_append_val (obst, outline);
        g_array_append_val (obst, lab);
        /* only x1 and y0 may grow: the view transform is anchored at (bb.x0, bb.y1) */
        if (layout->laid_out)
          {
            layout->bb.x1 = MAX (layout->bb.x1, MAX (outline.x1, lab.x1) + 4);
            layout->bb.y0 = MIN (layout->bb.y0, MIN (outline.y0, lab.y0) - 4);
          }
      }
    }
}

static void
add_ghost (CsLayout *layout, DrawIndex *ix, const CsDiffCast *c, guint *n_removed)
{
  CsLayoutNode g = { 0 };
  gint anchor = ghost_anchor (layout, ix, c->stmt);
  guint beside = 0;
  double w = 52, h = 15, x0, yc;

  if (anchor < 0)
    return;
  /* one ghost per place and dtype: the casts removed from inside a collapsed layer (thousands
   * in a whole model) add up on it instead of piling up beside it */
  for (guint i = layout->n_nodes - layout->n_ghosts; i < layout->n_nodes; i++)
    if (layout->nodes[i].target == anchor)
      {
        CsLayoutNode *o = &layout->nodes[i];

        if (o->dtype == c->to)
          {
            /* its label and detail are written once all are added (finish_ghosts()) */
            o->mark_count += c->count;
            o->diff_removed += c->count;
            g_clear_pointer (&o->label, g_free);
            *n_removed += c->count;
            return;
          }
        beside++;
      }
  g.kind = CS_LAYOUT_NODE_GHOST;
  g.stmt_id = 0;
  g.cluster = -1;
  g.group = -1;
  g.target = anchor;
  g.has_dtype = TRUE;
  g.dtype = c->to;
  g.name = g_strdup (c->stmt->callee);
  g.label = g_strdup_printf ("\u2192 %s", cs_dtype_short_name (c->to));
  g.detail = g_strdup_printf ("removed: %u cast%s %s \u2192 %s%s%s (in the other trace, here no "
                              "longer)", c->count, c->count == 1 ? "" : "s",
                              cs_dtype_short_name (c->from), cs_dtype_short_name (c->to),
                              c->region ? " in " : "", c->region ? c->region : "");
  /* provisional: right of the anchor; finish_ghosts() places it once its label is known */
  {
    const CsRect *a = &layout->nodes[anchor].box;
    double ac = (a->y0 + a->y1) / 2;

    g.box = (CsRect) { a->x1 + 10 + beside * (w + 6), ac - h / 2, a->x1 + 10 + beside * (w + 6) + w,
                       ac + h / 2 };
  }
  x0 = g.box.x0;
  yc = (g.box.y0 + g.box.y1) / 2;
  g.label_pos = (CsPoint) { x0 + w / 2, yc };
  g.mark = CS_LAYOUT_MARK_REMOVED;
  g.mark_count = c->count;
  g.diff_removed = c->count;
  layout->nodes = g_renew (CsLayoutNode, layout->nodes, layout->n_nodes + 1);
  layout->nodes[layout->n_nodes++] = g;
  layout->n_ghosts++;
  *n_removed += c->count;
}

/* Statements that moved into or out of fusion regions: leaf statements keyed by (origin,
 * short op name), counted inside and outside regions on each side. */
typedef struct
{
  guint      in_a, out_a, in_b, out_b;   /* counts: a = older, b = newer */
  GPtrArray *b_in;                       /* const CsStmt* of b inside regions */
  GPtrArray *b_out;                      /* const CsStmt* of b outside regions */
} MoveKey;

static void
move_key_free (gpointer p)
{
  MoveKey *k = p;
  g_ptr_array_unref (k->b_in);
  g_ptr_array_unref (k->b_out);
  g_free (k);
}

static void
count_moves (GHashTable *keys, const CsTrace *t, gboolean is_b)
{
  for (guint i = 0; i < t->n_stmts; i++)
    {
      const CsStmt *s = t->stmts[i];
      gboolean fusion = s->kind == CS_STMT_CALL && cs_op_is_fusion (s->op);
      guint n = fusion ? s->n_subs : 1;

      if (s->kind != CS_STMT_CALL)
        continue;
      for (guint k = 0; k < n; k++)
        {
          const CsStmt *m = fusion ? s->subs[k] : s;
          g_autofree char *key = NULL;
          MoveKey *mk;

          if (m->kind != CS_STMT_CALL || m->origin == 0 || cs_op_is_fusion (m->op)
              || m->op->category == CS_OP_CAT_BOOKKEEPING)
            continue;
          key = g_strdup_printf ("%u:%s", m->origin, cs_op_semantic (m->op)->short_name);
          mk = g_hash_table_lookup (keys, key);
          if (mk == NULL)
            {
              mk = g_new0 (MoveKey, 1);
              mk->b_in = g_ptr_array_new ();
              mk->b_out = g_ptr_array_new ();
              g_hash_table_insert (keys, g_steal_pointer (&key), mk);
            }
          if (is_b)
            {
              if (fusion)
                mk->in_b++, g_ptr_array_add (mk->b_in, (gpointer) m);
              else
                mk->out_b++, g_ptr_array_add (mk->b_out, (gpointer) m);
            }
          else if (fusion)
            mk->in_a++;
          else
            mk->out_a++;
        }
    }
}

/* The statements of @b that moved into or out of regions against @a (@moved), and for each
 * whether into (@moved_in: 1) or out of (0), in the order they are marked: per (origin, op)
 * key, the first of @b's statements inside regions as many as moved in, then the first ones
 * outside as many as moved out.  Reads every statement of both. */
static void
find_moves (const CsTrace *a, const CsTrace *b, GPtrArray **moved, GByteArray **moved_in)
{
  static const guint8 in_flag = 1, out_flag = 0;
  g_autoptr(GHashTable) keys = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, move_key_free);
  GHashTableIter it;
  gpointer v;

  *moved = g_ptr_array_new ();
  *moved_in = g_byte_array_new ();
  count_moves (keys, a, FALSE);
  count_moves (keys, b, TRUE);
  g_hash_table_iter_init (&it, keys);
  while (g_hash_table_iter_next (&it, NULL, &v))
    {
      MoveKey *mk = v;
      guint in = mk->in_b > mk->in_a && mk->out_a > mk->out_b
                 ? MIN (mk->in_b - mk->in_a, mk->out_a - mk->out_b) : 0;
      guint out = mk->out_b > mk->out_a && mk->in_a > mk->in_b
                  ? MIN (mk->out_b - mk->out_a, mk->in_a - mk->in_b) : 0;

      for (guint k = 0; k < in && k < mk->b_in->len; k++)
        {
          g_ptr_array_add (*moved, g_ptr_array_index (mk->b_in, k));
          g_byte_array_append (*moved_in, &in_flag, 1);
        }
      for (guint k = 0; k < out && k < mk->b_out->len; k++)
        {
          g_ptr_array_add (*moved, g_ptr_array_index (mk->b_out, k));
          g_byte_array_append (*moved_in, &out_flag, 1);
        }
    }
}


/**
 * cs_layout_mark_diff:
 * @layout: a display list of trace A (owner thread only)
 * @other: trace B to compare with (the same program under another cast policy or pass)
 * @this_is_newer: TRUE when A is the newer side: casts of A missing from B are marked ADDED,
 *   casts of B missing from A are drawn as GHOST nodes (marked REMOVED) next to the statement
 *   of A they were inserted for, regions of A covering statements of 2+ regions of B MERGED,
 *   regions of A that a region of B split into SPLIT, and statements of A that moved into or
 *   out of regions MOVED_IN / MOVED_OUT; FALSE: casts of A missing from B are REMOVED and
 *   regions of A whose statements spread over 2+ regions of B SPLIT (draw B with TRUE and A
 *   with FALSE for a side-by-side diff)
 * @stats: (out) (optional): what was marked, counted as the marks' `mark_count`s add up
 *
 * Marks the difference computed by core's cs_trace_diff() (casts as multisets of (origin,
 * source dtype, target dtype) over every level; regions by the initial-trace statements they
 * cover) on A's display list.  A change inside a collapsed statement, region or group marks
 * the node that stands for it, with its count.  Moves into and out of regions compare, per
 * (origin, op), how many leaf statements lie inside regions on each side.  Clears earlier
 * marks first.
 * Source: core/cs-diff.h, the same diff as `castscope-cli diff`.
 */
void
cs_layout_mark_diff (CsLayout *layout, const CsTrace *other, gboolean this_is_newer,
                     CsLayoutDiffStats *stats)
{
  g_autoptr(CsTraceDiff) diff = NULL;

  g_return_if_fail (layout != NULL && other != NULL);
  if (layout->trace != NULL)
    diff = this_is_newer ? cs_trace_diff (other, layout->trace) : cs_trace_diff (layout->trace, other);
  cs_layout_mark_diff_with (layout, other, this_is_newer, diff, stats);
}

/**
 * cs_layout_mark_diff_with:
 * @layout: a display list of trace A (owner thread only)
 * @other: trace B
 * @this_is_newer: as for cs_layout_mark_diff()
 * @diff: (nullable): cs_trace_diff (B, A) when @this_is_newer, else cs_trace_diff (A, B):
 *   computed once for a pair of traces (it reads every statement of both) and kept while
 *   the layouts of A change (expand, collapse); NULL marks nothing
 * @stats: (out) (optional): as for cs_layout_mark_diff()
 *
 * cs_layout_mark_diff() with the traces' diff given.
 */
void
cs_layout_mark_diff_with (CsLayout *layout, const CsTrace *other, gboolean this_is_newer,
                          const CsTraceDiff *diff, CsLayoutDiffStats *stats)
{
  mark_diff_full (layout, other, this_is_newer, diff, NULL, NULL, stats);
}

/* cs_layout_mark_diff_with() with the moves of find_moves (other, layout->trace) given (both
 * NULL: found here). */
static void
mark_diff_full (CsLayout *layout, const CsTrace *other, gboolean this_is_newer,
                const CsTraceDiff *diff, const GPtrArray *moved, const GByteArray *moved_in,
                CsLayoutDiffStats *stats)
{
  CsLayoutDiffStats st = { 0 };
  DrawIndex ix;

  g_return_if_fail (layout != NULL && other != NULL);
  cs_layout_clear_marks (layout);
  if (layout->trace == NULL || diff == NULL)
    goto done;
  draw_index_init (&ix, layout);
  if (this_is_newer)
    {
      for (guint i = 0; i < diff->casts_added->len; i++)
        {
          const CsDiffCast *c = g_ptr_array_index (diff->casts_added, i);
          if (mark_stmt (layout, &ix, c->stmt, CS_LAYOUT_MARK_ADDED, c->count))
            st.casts_added += c->count;
        }
      for (guint i = 0; i < diff->casts_removed->len; i++)
        {
          const CsDiffCast *c = g_ptr_array_index (diff->casts_removed, i);

          if (c->stmt != NULL)
            add_ghost (layout, &ix, c, &st.casts_removed);
        }
      finish_ghosts (layout);
      for (guint i = 0; i < diff->regions_merged->len; i++)
        {
          const CsDiffRegion *r = g_ptr_array_index (diff->regions_merged, i);
          if (mark_stmt (layout, &ix, r->region, CS_LAYOUT_MARK_MERGED, 1))
            st.regions_merged++;
        }
      for (guint i = 0; i < diff->regions_split->len; i++)
        {
          const CsDiffRegion *r = g_ptr_array_index (diff->regions_split, i);
          gboolean any = FALSE;

          for (guint k = 0; r->others != NULL && k < r->others->len; k++)
            any |= mark_stmt (layout, &ix, g_ptr_array_index (r->others, k), CS_LAYOUT_MARK_SPLIT, 0);
          if (any)
            st.regions_split++;
        }
      {
        g_autoptr(GPtrArray) own = NULL;
        g_autoptr(GByteArray) own_in = NULL;

        if (moved == NULL || moved_in == NULL)
          {
            find_moves (other, layout->trace, &own, &own_in);
            moved = own;
            moved_in = own_in;
          }
        for (guint k = 0; k < moved->len; k++)
          if (moved_in->data[k]
              ? mark_stmt (layout, &ix, g_ptr_array_index (moved, k), CS_LAYOUT_MARK_MOVED_IN, 1)
              : mark_stmt (layout, &ix, g_ptr_array_index (moved, k), CS_LAYOUT_MARK_MOVED_OUT, 1))
            {
              if (moved_in->data[k])
                st.moved_in++;
              else
                st.moved_out++;
            }
      }
    }
  else
    {
      for (guint i = 0; i < diff->casts_removed->len; i++)
        {
          const CsDiffCast *c = g_ptr_array_index (diff->casts_removed, i);
          if (mark_stmt (layout, &ix, c->stmt, CS_LAYOUT_MARK_REMOVED, c->count))
            st.casts_removed += c->count;
        }
      for (guint i = 0; i < diff->regions_split->len; i++)
        {
          const CsDiffRegion *r = g_ptr_array_index (diff->regions_split, i);
          if (mark_stmt (layout, &ix, r->region, CS_LAYOUT_MARK_SPLIT, 1))
            st.regions_split++;
        }
    }
  draw_index_clear (&ix);

done:
  if (stats != NULL)
    *stats = st;
}
