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

/* origin -> region statement of @t */
static GHashTable *
region_of_origin (const CsTrace *t, guint *n_regions)
{
  GHashTable *h = g_hash_table_new (g_direct_hash, g_direct_equal);
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
        if (!g_hash_table_contains (h, k))
          g_hash_table_insert (h, k, (gpointer) s);
    }
  return h;
}

static void
region_spread (const CsTrace *x, GHashTable *y_of, GPtrArray *out)
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
      others = g_ptr_array_new ();
      g_hash_table_iter_init (&it, set);
      while (g_hash_table_iter_next (&it, &k, NULL))
        {
          const CsStmt *r = g_hash_table_lookup (y_of, k);
          gboolean dup = FALSE;
          if (r == NULL)
            continue;
          for (guint m = 0; m < others->len && !dup; m++)
            dup = others->pdata[m] == r;
          if (!dup)
            g_ptr_array_add (others, (gpointer) r);
        }
      if (others->len >= 2)
        {
          CsDiffRegion *d = g_new0 (CsDiffRegion, 1);
          /* order the other regions by their callee number (trace order) */
          d->region = s;
          d->others = g_steal_pointer (&others);
          g_ptr_array_add (out, d);
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

  ca = cast_buckets (a);
  cb = cast_buckets (b);
  cast_delta (cb, ca, d->casts_added);
  cast_delta (ca, cb, d->casts_removed);
  g_ptr_array_sort (d->casts_added, cmp_cast);
  g_ptr_array_sort (d->casts_removed, cmp_cast);

  ra = region_of_origin (a, &d->n_regions_a);
  rb = region_of_origin (b, &d->n_regions_b);
  region_spread (a, rb, d->regions_split);
  region_spread (b, ra, d->regions_merged);
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
  g_free (diff);
}

gboolean
cs_trace_diff_is_empty (const CsTraceDiff *diff)
{
  g_return_val_if_fail (diff != NULL, TRUE);
  return diff->casts_added->len == 0 && diff->casts_removed->len == 0
         && diff->regions_split->len == 0 && diff->regions_merged->len == 0;
}
