/* cs-layout-cache.c: finished layouts and groupings kept for re-use (see cs-layout-cache.h). */
#include "cs-config.h"

#include "cs-layout-cache.h"

#include <string.h>

#include "cs-layout-private.h"
#include "cs-split.h"

typedef struct
{
  CsTrace  *trace;      /* (owned) a reference: the key's pointer stays unique */
  char     *key;        /* cs_render_options_key() */
  CsLayout *layout;     /* (owned) */
} LayoutEntry;

/* One value kept per trace (and tag) in one of the cache's per-trace queues: a grouping, a
 * statement index, duplicate-saved values or input reads. */
typedef struct
{
  CsTrace        *trace;  /* (owned) a reference: the key's pointer stays unique */
  guint           tag;    /* the rest of the key (CsRenderOptions.bookkeeping for reads; else 0) */
  gpointer        value;  /* (owned) one reference, released by @unref */
  GDestroyNotify  unref;  /* releases @value */
} TraceEntry;

/* Statement indexes kept: the trace marked last (about 40 MB at 50,000 top-level statements,
 * so no more; another trace's is made again when it is marked). */
#define CACHE_TRACE_INDEXES 1

struct _CsLayoutCache
{
  gint    ref_count;    /* atomic */
  GMutex  lock;         /* guards everything below */
  guint   max_layouts;  /* layouts kept, most recently used first */
  GQueue  layouts;      /* LayoutEntry*, most recently used at the head */
  GQueue  groupings;    /* TraceEntry* of CsGrouping, most recently used at the head */
  GQueue  indexes;      /* TraceEntry* of CsTraceIndex, most recently used at the head */
  GQueue  dups;         /* TraceEntry* of cs_split_duplicate_saved() results, likewise */
  GQueue  reads;        /* TraceEntry* of _CsInputRead arrays, likewise */
  guint   n_hits;       /* lookups answered from the cache */
};

static void
layout_entry_free (gpointer data)
{
  LayoutEntry *e = data;

  cs_trace_unref (e->trace);
  g_free (e->key);
  cs_layout_unref (e->layout);
  g_free (e);
}

static void
trace_entry_free (gpointer data)
{
  TraceEntry *e = data;

  e->unref (e->value);
  cs_trace_unref (e->trace);
  g_free (e);
}

/* The value kept for (@trace, @tag) in @q, moved to the head and passed through @ref (called
 * under the lock, so the entry cannot be freed meanwhile); NULL when there is none. */
static gpointer
trace_entry_find (CsLayoutCache *cache, GQueue *q, const CsTrace *trace, guint tag,
                  gpointer (*ref) (gpointer))
{
  gpointer found = NULL;

  g_mutex_lock (&cache->lock);
  for (GList *l = q->head; l != NULL; l = l->next)
    {
      TraceEntry *e = l->data;

      if (e->trace == trace && e->tag == tag)
        {
          g_queue_unlink (q, l);
          g_queue_push_head_link (q, l);
          found = ref (e->value);
          break;
        }
    }
  g_mutex_unlock (&cache->lock);
  return found;
}

/* Keeps @value (one reference taken through @ref, released by @unref) for (@trace, @tag) at
 * the head of @q, dropping the least recently used entries beyond @max. */
static void
trace_entry_put (CsLayoutCache *cache, GQueue *q, const CsTrace *trace, guint tag,
                 gpointer value, gpointer (*ref) (gpointer), GDestroyNotify unref, guint max)
{
  TraceEntry *e = g_new0 (TraceEntry, 1);

  e->trace = cs_trace_ref ((CsTrace *) trace);
  e->tag = tag;
  e->value = ref (value);
  e->unref = unref;
  g_mutex_lock (&cache->lock);
  g_queue_push_head (q, e);
  while (q->length > max)
    trace_entry_free (g_queue_pop_tail (q));
  g_mutex_unlock (&cache->lock);
}

/* The reference functions of the kept values, with the signatures the entries use. */
static gpointer grouping_ref (gpointer v) { return cs_grouping_ref (v); }
static void grouping_unref (gpointer v) { cs_grouping_unref (v); }
static gpointer index_ref (gpointer v) { return _cs_trace_index_ref (v); }
static void index_unref (gpointer v) { _cs_trace_index_unref (v); }
static gpointer ptr_array_ref (gpointer v) { return g_ptr_array_ref (v); }
static void ptr_array_unref (gpointer v) { g_ptr_array_unref (v); }
static gpointer array_ref (gpointer v) { return g_array_ref (v); }
static void array_unref (gpointer v) { g_array_unref (v); }

CsLayoutCache *
cs_layout_cache_new (guint max_layouts)
{
  CsLayoutCache *cache = g_new0 (CsLayoutCache, 1);

  cache->ref_count = 1;
  g_mutex_init (&cache->lock);
  cache->max_layouts = max_layouts ? max_layouts : CS_LAYOUT_CACHE_DEFAULT_SIZE;
  g_queue_init (&cache->layouts);
  g_queue_init (&cache->groupings);
  g_queue_init (&cache->indexes);
  g_queue_init (&cache->dups);
  g_queue_init (&cache->reads);
  return cache;
}

/**
 * cs_layout_cache_ref:
 * @cache: a cache
 * Returns: (transfer full): @cache
 */
CsLayoutCache *
cs_layout_cache_ref (CsLayoutCache *cache)
{
  g_return_val_if_fail (cache != NULL, NULL);
  g_atomic_int_inc (&cache->ref_count);
  return cache;
}

/**
 * cs_layout_cache_unref:
 * @cache: (transfer full) (nullable): a cache; the last reference frees what it keeps
 */
void
cs_layout_cache_unref (CsLayoutCache *cache)
{
  if (cache == NULL || !g_atomic_int_dec_and_test (&cache->ref_count))
    return;
  cs_layout_cache_clear (cache);
  g_mutex_clear (&cache->lock);
  g_free (cache);
}

/**
 * cs_layout_cache_clear:
 * @cache: a cache
 *
 * Drops every layout and grouping kept (a newly opened file: the old traces are not shown
 * again).
 */
void
cs_layout_cache_clear (CsLayoutCache *cache)
{
  g_return_if_fail (cache != NULL);
  g_mutex_lock (&cache->lock);
  g_queue_clear_full (&cache->layouts, layout_entry_free);
  g_queue_clear_full (&cache->groupings, trace_entry_free);
  g_queue_clear_full (&cache->indexes, trace_entry_free);
  g_queue_clear_full (&cache->dups, trace_entry_free);
  g_queue_clear_full (&cache->reads, trace_entry_free);
  g_mutex_unlock (&cache->lock);
}

/**
 * cs_layout_cache_dup_grouping:
 * @cache: a cache
 * @trace: a trace
 *
 * The groups of @trace (cs_grouping_new()), found once per trace and kept while @trace is one
 * of the CS_LAYOUT_CACHE_GROUPINGS most recently grouped.  Two threads asking for a new trace
 * at once may both group it; one result is kept.
 * Returns: (transfer full): the grouping (cs_grouping_unref() it)
 */
CsGrouping *
cs_layout_cache_dup_grouping (CsLayoutCache *cache, const CsTrace *trace)
{
  CsGrouping *found;

  g_return_val_if_fail (cache != NULL && trace != NULL, NULL);
  if ((found = trace_entry_find (cache, &cache->groupings, trace, 0, grouping_ref)) != NULL)
    return found;
  found = cs_grouping_new (trace);
  trace_entry_put (cache, &cache->groupings, trace, 0, found, grouping_ref, grouping_unref,
                   CS_LAYOUT_CACHE_GROUPINGS);
  return found;
}

/**
 * _cs_layout_cache_dup_trace_index:
 * @cache: a cache
 * @trace: a trace
 *
 * The statement index of @trace that the overlays use (render/cs-layout.c), made once per
 * trace and kept while @trace is one of the CACHE_TRACE_INDEXES most recently asked for.  Two
 * threads asking for a new trace at once may both make it; one is kept.
 * Returns: (transfer full): the index (_cs_trace_index_unref() it)
 */
CsTraceIndex *
_cs_layout_cache_dup_trace_index (CsLayoutCache *cache, const CsTrace *trace)
{
  CsTraceIndex *found;

  g_return_val_if_fail (cache != NULL && trace != NULL, NULL);
  if ((found = trace_entry_find (cache, &cache->indexes, trace, 0, index_ref)) != NULL)
    return found;
  found = _cs_trace_index_new (trace);
  trace_entry_put (cache, &cache->indexes, trace, 0, found, index_ref, index_unref,
                   CACHE_TRACE_INDEXES);
  return found;
}

/**
 * _cs_layout_cache_dup_duplicate_saved:
 * @cache: a cache
 * @trace: a trace
 *
 * cs_split_duplicate_saved() of @trace (value numbering the whole trace), found once per trace
 * and kept while @trace is one of the CS_LAYOUT_CACHE_GROUPINGS most recently asked for (each
 * entry is a few pointers per duplicated value; the trace is kept alive by its grouping's
 * entry as well).  Two threads asking for a new trace at once may both compute it; one is kept.
 * Returns: (transfer full) (element-type CsSavedDuplicate): the duplicates (g_ptr_array_unref()
 *   them); they borrow @trace's proxies and statements
 */
GPtrArray *
_cs_layout_cache_dup_duplicate_saved (CsLayoutCache *cache, const CsTrace *trace)
{
  GPtrArray *found;

  g_return_val_if_fail (cache != NULL && trace != NULL, NULL);
  if ((found = trace_entry_find (cache, &cache->dups, trace, 0, ptr_array_ref)) != NULL)
    return found;
  found = cs_split_duplicate_saved (trace);
  trace_entry_put (cache, &cache->dups, trace, 0, found, ptr_array_ref, ptr_array_unref,
                   CS_LAYOUT_CACHE_GROUPINGS);
  return found;
}

/**
 * _cs_layout_cache_dup_input_reads:
 * @cache: a cache
 * @trace: a trace
 * @bookkeeping: CsRenderOptions.bookkeeping (which statements are drawn)
 *
 * The reads of @trace's inputs by its drawn top-level statements (render/cs-graph.c's
 * find_folded_inputs()), when kept: put there by _cs_layout_cache_put_input_reads() and kept
 * while @trace is one of the CS_LAYOUT_CACHE_GROUPINGS most recently asked for.
 * Returns: (transfer full) (nullable) (element-type _CsInputRead): the reads, or NULL
 */
GArray *
_cs_layout_cache_dup_input_reads (CsLayoutCache *cache, const CsTrace *trace,
                                  gboolean bookkeeping)
{
  g_return_val_if_fail (cache != NULL && trace != NULL, NULL);
  return trace_entry_find (cache, &cache->reads, trace, bookkeeping != FALSE, array_ref);
}

/**
 * _cs_layout_cache_put_input_reads:
 * @cache: a cache
 * @trace: a trace
 * @bookkeeping: as for _cs_layout_cache_dup_input_reads()
 * @reads: (element-type _CsInputRead): the reads of @trace's inputs (a reference is taken)
 *
 * Keeps @reads for _cs_layout_cache_dup_input_reads(); two threads putting the same trace's
 * keep both until the older is pushed out (they are equal).
 */
void
_cs_layout_cache_put_input_reads (CsLayoutCache *cache, const CsTrace *trace,
                                  gboolean bookkeeping, GArray *reads)
{
  g_return_if_fail (cache != NULL && trace != NULL && reads != NULL);
  trace_entry_put (cache, &cache->reads, trace, bookkeeping != FALSE, reads, array_ref,
                   array_unref, CS_LAYOUT_CACHE_GROUPINGS);
}

static gint
compare_strings (gconstpointer a, gconstpointer b)
{
  return strcmp (*(const char * const *) a, *(const char * const *) b);
}

/**
 * cs_render_options_key:
 * @options: options
 *
 * Everything in @options that changes the picture, as one string (the cache's key, with the
 * trace): levels, limits, labels, fonts, hints, the fold of repeats and the per-statement and
 * per-group overrides in a fixed order.  The cache itself is not part of it.
 * Returns: (transfer full): the key
 */
char *
cs_render_options_key (const CsRenderOptions *options)
{
  GString *s = g_string_new (NULL);
  g_autoptr(GPtrArray) items = g_ptr_array_new_with_free_func (g_free);
  GHashTableIter it;
  gpointer k, v;

  g_return_val_if_fail (options != NULL, NULL);
  g_string_append_printf (s, "d%d c%d u%d m%u l%u e%d s%d b%d h%d f%s/%g", options->detail,
                          options->collapse, options->unfold_repeats, options->max_nodes,
                          options->max_edge_labels, options->edge_labels, options->node_shapes,
                          options->bookkeeping, options->hints,
                          options->font_family ? options->font_family : "", options->font_size_pt);
  if (options->expand != NULL)
    {
      g_hash_table_iter_init (&it, options->expand);
      while (g_hash_table_iter_next (&it, &k, &v))
        g_ptr_array_add (items, g_strdup_printf ("%010u=%d", GPOINTER_TO_UINT (k), GPOINTER_TO_INT (v)));
    }
  g_ptr_array_sort (items, compare_strings);
  for (guint i = 0; i < items->len; i++)
    g_string_append_printf (s, " s%s", (const char *) g_ptr_array_index (items, i));
  g_ptr_array_set_size (items, 0);
  if (options->group_expand != NULL)
    {
      g_hash_table_iter_init (&it, options->group_expand);
      while (g_hash_table_iter_next (&it, &k, &v))
        g_ptr_array_add (items, g_strdup_printf ("%s=%d", (const char *) k, GPOINTER_TO_INT (v)));
    }
  g_ptr_array_sort (items, compare_strings);
  for (guint i = 0; i < items->len; i++)
    g_string_append_printf (s, " g%s", (const char *) g_ptr_array_index (items, i));
  return g_string_free (s, FALSE);
}

/* The cache's key for @trace drawn with @options: cs_render_options_key() without the group
 * overrides, plus which groups end up collapsed (an override that repeats the level's choice,
 * as collapsing a layer again does, gives the same picture and the same key). */
static char *
cache_key (CsLayoutCache *cache, CsTrace *trace, const CsRenderOptions *options)
{
  CsRenderOptions o = *options;
  g_autofree char *base = NULL;
  GString *s;

  o.group_expand = NULL;
  base = cs_render_options_key (&o);
  s = g_string_new (base);
  if (options->collapse != CS_RENDER_COLLAPSE_FLAT)
    {
      g_autoptr(CsGrouping) grouping = cs_layout_cache_dup_grouping (cache, trace);
      guint n;
      g_autofree gboolean *collapsed = _cs_graph_collapsed_groups (grouping, options, &n);

      g_string_append (s, " G");
      for (guint g = 0; g < grouping->n_groups; g++)
        g_string_append_c (s, collapsed[g] ? '1' : '0');
    }
  return g_string_free (s, FALSE);
}

/**
 * cs_layout_cache_lookup:
 * @cache: a cache
 * @trace: the trace to draw
 * @options: what to draw
 *
 * Returns: (transfer full) (nullable): the layout made for @trace with these options (the same
 *   object as before, its overlays as its owner left them), or NULL
 */
CsLayout *
cs_layout_cache_lookup (CsLayoutCache *cache, CsTrace *trace, const CsRenderOptions *options)
{
  g_autofree char *key = NULL;
  CsLayout *found = NULL;

  g_return_val_if_fail (cache != NULL && trace != NULL && options != NULL, NULL);
  key = cache_key (cache, trace, options);
  g_mutex_lock (&cache->lock);
  for (GList *l = cache->layouts.head; l != NULL; l = l->next)
    {
      LayoutEntry *e = l->data;

      if (e->trace == trace && strcmp (e->key, key) == 0)
        {
          g_queue_unlink (&cache->layouts, l);
          g_queue_push_head_link (&cache->layouts, l);
          found = cs_layout_ref (e->layout);
          cache->n_hits++;
          break;
        }
    }
  g_mutex_unlock (&cache->lock);
  return found;
}

/**
 * cs_layout_cache_insert:
 * @cache: a cache
 * @trace: the trace drawn
 * @options: what was drawn
 * @layout: (transfer none): the laid-out result (a reference is taken)
 *
 * Keeps @layout as the most recently used; the least recently used beyond max_layouts is
 * dropped.  An entry for the same trace and options is replaced.
 */
void
cs_layout_cache_insert (CsLayoutCache *cache, CsTrace *trace, const CsRenderOptions *options,
                        CsLayout *layout)
{
  LayoutEntry *e;

  g_return_if_fail (cache != NULL && trace != NULL && options != NULL && layout != NULL);
  e = g_new0 (LayoutEntry, 1);
  e->trace = cs_trace_ref (trace);
  e->key = cache_key (cache, trace, options);
  e->layout = cs_layout_ref (layout);
  g_mutex_lock (&cache->lock);
  for (GList *l = cache->layouts.head; l != NULL; l = l->next)
    {
      LayoutEntry *o = l->data;

      if (o->trace == trace && strcmp (o->key, e->key) == 0)
        {
          g_queue_delete_link (&cache->layouts, l);
          layout_entry_free (o);
          break;
        }
    }
  g_queue_push_head (&cache->layouts, e);
  while (cache->layouts.length > cache->max_layouts)
    layout_entry_free (g_queue_pop_tail (&cache->layouts));
  g_mutex_unlock (&cache->lock);
}

/**
 * cs_layout_cache_n_layouts:
 * @cache: a cache
 * Returns: how many finished layouts it keeps now
 */
guint
cs_layout_cache_n_layouts (CsLayoutCache *cache)
{
  guint n;

  g_return_val_if_fail (cache != NULL, 0);
  g_mutex_lock (&cache->lock);
  n = cache->layouts.length;
  g_mutex_unlock (&cache->lock);
  return n;
}

/**
 * cs_layout_cache_n_hits:
 * @cache: a cache
 * Returns: how many cs_layout_cache_lookup() calls found a layout so far
 */
guint
cs_layout_cache_n_hits (CsLayoutCache *cache)
{
  guint n;

  g_return_val_if_fail (cache != NULL, 0);
  g_mutex_lock (&cache->lock);
  n = cache->n_hits;
  g_mutex_unlock (&cache->lock);
  return n;
}
