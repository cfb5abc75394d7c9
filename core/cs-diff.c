/* cs-diff.c: casts and regions that differ between two traces (see cs-diff.h). */
#include "cs-config.h"

#include "cs-diff.h"
#include "cs-ir-util.h"
#include "cs-ops.h"

typedef struct
{
  guint          count;   /* casts with this key */
  const CsStmt  *stmt;    /* first one */
  const char    *region;  /* its region callee or NULL */
} CastBucket;

static void
collect_casts (const CsStmt *s, const char *region, GHashTable *buckets, guint depth)
{
  CsProxy *in;
  CsDtype to;

  if (depth > 64)
    return;
  if (_cs_stmt_is_cast (s, &in, &to) && in->kind == CS_PROXY_TENSOR)
    {
      char *key = g_strdup_printf ("%u:%d:%d", s->origin, (int) in->dtype, (int) to);
      CastBucket *b = g_hash_table_lookup (buckets, key);
      if (b == NULL)
        {
          b = g_new0 (CastBucket, 1);
          b->stmt = s;
          b->region = region;
          g_hash_table_insert (buckets, key, b);
        }
      else
        g_free (key);
      b->count++;
      return;
    }
  if (s->kind == CS_STMT_CALL && (s->op == NULL || !(s->op->tags & CS_OP_TAG_PRIM)))
    {
      const char *r = _cs_stmt_is_region (s) ? s->callee : region;
      for (guint i = 0; i < s->n_subs; i++)
        collect_casts (s->subs[i], r, buckets, depth + 1);
    }
}

static GHashTable *
cast_buckets (const CsTrace *t)
{
  GHashTable *h = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  for (guint i = 0; i < t->n_stmts; i++)
    collect_casts (t->stmts[i], NULL, h, 0);
  return h;
}

static void
cast_delta (GHashTable *x, GHashTable *y, GPtrArray *out)
{
  GHashTableIter it;
  gpointer k, v;

  g_hash_table_iter_init (&it, x);
  while (g_hash_table_iter_next (&it, &k, &v))
    {
      CastBucket *bx = v, *by = g_hash_table_lookup (y, k);
      guint ny = by ? by->count : 0;
      if (bx->count > ny)
        {
          CsDiffCast *c = g_new0 (CsDiffCast, 1);
          CsProxy *in;
          _cs_stmt_is_cast (bx->stmt, &in, &c->to);
          c->from = in->dtype;
          c->origin = bx->stmt->origin;
          c->count = bx->count - ny;
          c->stmt = bx->stmt;
          c->region = bx->region;
          g_ptr_array_add (out, c);
        }
    }
}

static gint
cmp_cast (gconstpointer pa, gconstpointer pb)
{
  const CsDiffCast *a = *(CsDiffCast * const *) pa, *b = *(CsDiffCast * const *) pb;
  if (a->origin != b->origin)
    return a->origin < b->origin ? -1 : 1;
  if (a->from != b->from)
    return (int) a->from - (int) b->from;
  return (int) a->to - (int) b->to;
}

static void
origins_of (const CsStmt *s, GHashTable *set, guint depth)
{
  if (depth > 64)
    return;
  if (s->origin)
    g_hash_table_add (set, GUINT_TO_POINTER (s->origin));
  for (guint i = 0; i < s->n_subs; i++)
    origins_of (s->subs[i], set, depth + 1);
}

/* origin -> the region statements of @t holding a statement of that origin (GPtrArray of
 * const CsStmt*, trace order: rematerialization can copy an origin into several regions) */
static GHashTable *
regions_of_origin (const CsTrace *t, guint *n_regions)
{
  GHashTable *h = g_hash_table_new_full (g_direct_hash, g_direct_equal, NULL,
                                         (GDestroyNotify) g_ptr_array_unref);
  *n_regions = 0;
  for (guint i = 0; i < t->n_stmts; i++)
    {
      const CsStmt *s = t->stmts[i];
      g_autoptr(GHashTable) set = NULL;
      GHashTableIter it;
      gpointer k;
      if (!_cs_stmt_is_region (s))
        continue;
      (*n_regions)++;
      set = g_hash_table_new (g_direct_hash, g_direct_equal);
      for (guint j = 0; j < s->n_subs; j++)
        origins_of (s->subs[j], set, 0);
      g_hash_table_iter_init (&it, set);
      while (g_hash_table_iter_next (&it, &k, NULL))
        {
          GPtrArray *regions = g_hash_table_lookup (h, k);

          if (regions == NULL)
            g_hash_table_insert (h, k, regions = g_ptr_array_new ());
          g_ptr_array_add (regions, (gpointer) s);
        }
    }
  return h;
}

/* The first region (in trace order) of @of (regions_of_origin()) holding @origin, or NULL.
 * An origin copied into several regions (rematerialization, or the backward statements one
 * forward statement's VJP makes) maps to its first: the others hold copies. */
static const CsStmt *
first_region (GHashTable *of, gconstpointer origin)
{
  GPtrArray *rs = g_hash_table_lookup (of, origin);

  return rs ? rs->pdata[0] : NULL;
}

/* The regions of @x whose origins spread over >= 2 regions of @y (@y_of: origin -> regions of
 * @y) into @out and those that map onto none into @none; regions without any origin are
 * counted in @n_unknown. */
static void
region_spread (const CsTrace *x, GHashTable *y_of, GPtrArray *out, GPtrArray *none,
               guint *n_unknown)
{
  for (guint i = 0; i < x->n_stmts; i++)
    {
      const CsStmt *s = x->stmts[i];
      g_autoptr(GHashTable) set = NULL;
      g_autoptr(GPtrArray) others = NULL;
      GHashTableIter it;
      gpointer k;
      if (!_cs_stmt_is_region (s))
        continue;
      set = g_hash_table_new (g_direct_hash, g_direct_equal);
      for (guint j = 0; j < s->n_subs; j++)
        origins_of (s->subs[j], set, 0);
      if (g_hash_table_size (set) == 0)
        {
          (*n_unknown)++;   /* nothing to compare it by (a trace not made by the passes) */
          continue;
        }
      others = g_ptr_array_new ();
      g_hash_table_iter_init (&it, set);
      while (g_hash_table_iter_next (&it, &k, NULL))
        {
          const CsStmt *r = first_region (y_of, k);
          gboolean dup = FALSE;

          if (r == NULL)
            continue;
          for (guint m = 0; m < others->len && !dup; m++)
            dup = others->pdata[m] == r;
          if (!dup)
            g_ptr_array_add (others, (gpointer) r);
        }
      if (others->len >= 2 || others->len == 0)
        {
          CsDiffRegion *d = g_new0 (CsDiffRegion, 1);
          d->region = s;
          d->others = g_steal_pointer (&others);
          g_ptr_array_add (d->others->len ? out : none, d);
        }
    }
}

/* Union-find root of @i in @parent (path halving). */
static guint
uf_find (guint *parent, guint i)
{
  while (parent[i] != i)
    i = parent[i] = parent[parent[i]];
  return i;
}

/* The groups of regions that share origins (connected components of "holds a statement of the
 * same origin" over the regions of @a and @b with an origin) classified into d's counts. */
static void
region_groups (const CsTrace *a, const CsTrace *b, GHashTable *ra, GHashTable *rb,
               CsTraceDiff *d)
{
  g_autoptr(GPtrArray) regions = g_ptr_array_new ();   /* a's regions, then b's */
  g_autoptr(GHashTable) index_a = g_hash_table_new (g_direct_hash, g_direct_equal);  /* +1 */
  g_autoptr(GHashTable) index_b = g_hash_table_new (g_direct_hash, g_direct_equal);
  g_autofree guint *parent = NULL, *na = NULL, *nb = NULL;
  g_autofree gboolean *spread = NULL;
  guint n_a = 0;

  for (guint i = 0; i < a->n_stmts; i++)
    if (_cs_stmt_is_region (a->stmts[i]))
      g_ptr_array_add (regions, a->stmts[i]);
  n_a = regions->len;
  for (guint i = 0; i < b->n_stmts; i++)
    if (_cs_stmt_is_region (b->stmts[i]))
      g_ptr_array_add (regions, b->stmts[i]);
  parent = g_new (guint, regions->len + 1);
  na = g_new0 (guint, regions->len + 1);
  nb = g_new0 (guint, regions->len + 1);
  for (guint i = 0; i < regions->len; i++)
    {
      parent[i] = i;
      g_hash_table_insert (i < n_a ? index_a : index_b, regions->pdata[i],
                           GUINT_TO_POINTER (i + 1));
    }
  /* a region joins the group of the region of the other trace that each of its origins maps
   * to (first_region(), as regions_split and regions_merged map them) */
  for (guint i = 0; i < regions->len; i++)
    {
      g_autoptr(GHashTable) set = g_hash_table_new (g_direct_hash, g_direct_equal);
      const CsStmt *s = regions->pdata[i];
      GHashTableIter it;
      gpointer k;

      for (guint j = 0; j < s->n_subs; j++)
        origins_of (s->subs[j], set, 0);
      g_hash_table_iter_init (&it, set);
      while (g_hash_table_iter_next (&it, &k, NULL))
        {
          const CsStmt *r = first_region (i < n_a ? rb : ra, k);
          guint o;

          if (r == NULL)
            continue;
          o = GPOINTER_TO_UINT (g_hash_table_lookup (i < n_a ? index_b : index_a, r)) - 1;
          parent[uf_find (parent, o)] = uf_find (parent, i);
        }
    }
  for (guint i = 0; i < regions->len; i++)
    {
      g_autoptr(GHashTable) set = g_hash_table_new (g_direct_hash, g_direct_equal);
      const CsStmt *s = regions->pdata[i];

      for (guint j = 0; j < s->n_subs; j++)
        origins_of (s->subs[j], set, 0);
      if (g_hash_table_size (set) == 0)
        continue;   /* unmatched: in no group */
      if (i < n_a)
        na[uf_find (parent, i)]++;
      else
        nb[uf_find (parent, i)]++;
    }
  /* groups with a region that maps onto two or more (regions_split, regions_merged) */
  spread = g_new0 (gboolean, regions->len + 1);
  for (guint t = 0; t < 2; t++)
    {
      GPtrArray *list = t == 0 ? d->regions_split : d->regions_merged;

      for (guint i = 0; i < list->len; i++)
        {
          const CsStmt *s = ((const CsDiffRegion *) list->pdata[i])->region;
          guint at = GPOINTER_TO_UINT (g_hash_table_lookup (t == 0 ? index_a : index_b, s)) - 1;

          spread[uf_find (parent, at)] = TRUE;
        }
    }
  for (guint r = 0; r < regions->len; r++)
    {
      if (na[r] + nb[r] == 0)
        continue;
      if (na[r] == nb[r] && !spread[r])
        d->n_regions_kept += na[r];   /* each maps onto one: the same regions, told apart
                                         by nothing finer than their origins */
      else if (na[r] == 1 && nb[r] >= 2)
        {
          d->n_groups_split++;
          d->n_split_into += nb[r];
        }
      else if (na[r] >= 2 && nb[r] == 1)
        {
          d->n_groups_merged++;
          d->n_merged_from += na[r];
        }
      else if (na[r] >= 2 && nb[r] >= 2)
        {
          d->n_regrouped_a += na[r];
          d->n_regrouped_b += nb[r];
        }
      /* 1:0 and 0:1 are the removed and new regions (regions_removed, regions_new) */
    }
  /* a split group's region of a (a merged group's of b) whose origins all map onto one region
   * of the other trace (an origin whose statements the policy put in several regions, as the
   * casts before and after a reduction in f32) is listed too, with the group's regions of the
   * other trace, so that the lists name every region a split or merge changed */
  for (guint t = 0; t < 2; t++)
    {
      GPtrArray *list = t == 0 ? d->regions_split : d->regions_merged;
      g_autoptr(GHashTable) listed = g_hash_table_new (g_direct_hash, g_direct_equal);
      guint from = t == 0 ? 0 : n_a, to = t == 0 ? n_a : regions->len;

      for (guint i = 0; i < list->len; i++)
        g_hash_table_add (listed, (gpointer) ((const CsDiffRegion *) list->pdata[i])->region);
      for (guint i = from; i < to; i++)
        {
          guint r = uf_find (parent, i);
          CsDiffRegion *e;
          gboolean one_to_many = t == 0 ? (na[r] == 1 && nb[r] >= 2) : (nb[r] == 1 && na[r] >= 2);

          if (!one_to_many || g_hash_table_contains (listed, regions->pdata[i]))
            continue;
          e = g_new0 (CsDiffRegion, 1);
          e->region = regions->pdata[i];
          e->others = g_ptr_array_new ();
          for (guint j = t == 0 ? n_a : 0; j < (t == 0 ? regions->len : n_a); j++)
            if (uf_find (parent, j) == r)
              g_ptr_array_add (e->others, regions->pdata[j]);
          g_ptr_array_add (list, e);
        }
    }
}

static void
diff_region_free (CsDiffRegion *d)
{
  g_ptr_array_unref (d->others);
  g_free (d);
}

/**
 * cs_trace_diff: (see cs-diff.h)
 */
CsTraceDiff *
cs_trace_diff (const CsTrace *a, const CsTrace *b)
{
  CsTraceDiff *d;
  g_autoptr(GHashTable) ca = NULL;
  g_autoptr(GHashTable) cb = NULL;
  g_autoptr(GHashTable) ra = NULL;
  g_autoptr(GHashTable) rb = NULL;

  g_return_val_if_fail (a != NULL && b != NULL, NULL);

  d = g_new0 (CsTraceDiff, 1);
  d->casts_added = g_ptr_array_new_with_free_func (g_free);
  d->casts_removed = g_ptr_array_new_with_free_func (g_free);
  d->regions_split = g_ptr_array_new_with_free_func ((GDestroyNotify) diff_region_free);
  d->regions_merged = g_ptr_array_new_with_free_func ((GDestroyNotify) diff_region_free);
  d->regions_new = g_ptr_array_new_with_free_func ((GDestroyNotify) diff_region_free);
  d->regions_removed = g_ptr_array_new_with_free_func ((GDestroyNotify) diff_region_free);

  ca = cast_buckets (a);
  cb = cast_buckets (b);
  cast_delta (cb, ca, d->casts_added);
  cast_delta (ca, cb, d->casts_removed);
  g_ptr_array_sort (d->casts_added, cmp_cast);
  g_ptr_array_sort (d->casts_removed, cmp_cast);

  ra = regions_of_origin (a, &d->n_regions_a);
  rb = regions_of_origin (b, &d->n_regions_b);
  region_spread (a, rb, d->regions_split, d->regions_removed, &d->n_regions_unmatched);
  region_spread (b, ra, d->regions_merged, d->regions_new, &d->n_regions_unmatched);
  region_groups (a, b, ra, rb, d);
  return d;
}

void
cs_trace_diff_free (CsTraceDiff *diff)
{
  if (diff == NULL)
    return;
  g_ptr_array_unref (diff->casts_added);
  g_ptr_array_unref (diff->casts_removed);
  g_ptr_array_unref (diff->regions_split);
  g_ptr_array_unref (diff->regions_merged);
  g_ptr_array_unref (diff->regions_new);
  g_ptr_array_unref (diff->regions_removed);
  g_free (diff);
}

gboolean
cs_trace_diff_is_empty (const CsTraceDiff *diff)
{
  g_return_val_if_fail (diff != NULL, TRUE);
  return diff->casts_added->len == 0 && diff->casts_removed->len == 0
         && diff->regions_split->len == 0 && diff->regions_merged->len == 0
         && diff->regions_new->len == 0 && diff->regions_removed->len == 0;
}
