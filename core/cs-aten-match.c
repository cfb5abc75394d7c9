/* cs-aten-match.c: casts and regions of two traces of one function, matched (see
 * cs-aten-match.h). */
#include "cs-config.h"

#include "cs-aten-match.h"

#include "cs-ir-util.h"
#include "cs-ops.h"

#include <string.h>

/* One cast of a trace in order: its id, its key, the region holding it (0: none). */
typedef struct
{
  guint32     id;         /* CsStmt.id of the cast */
  CsDtype     from;       /* the converted tensor's dtype */
  CsDtype     to;         /* the target dtype */
  double      numel;      /* elements converted (an unknown extent counts 0) */
  guint32     region;     /* CsStmt.id of the region holding it, 0: none */
  const char *producer;   /* what made the converted tensor ("matmul", "mul", ...), or "" */
} Cast;

/* One region: its id, the matmuls before it, its place after the last of them. */
typedef struct
{
  guint32 id;        /* CsStmt.id of the region call */
  guint   segment;   /* matmuls (outside regions) before it in the trace */
  guint   ordinal;   /* regions before it since that matmul */
} Region;

static double
numel_of (const CsProxy *p)
{
  double n = 1;

  for (guint i = 0; i < p->rank; i++)
    n *= p->shape[i] < 0 ? 0 : (double) p->shape[i];
  return n;
}

static gboolean
is_matmul (const CsStmt *s)
{
  return s->kind == CS_STMT_CALL && s->op != NULL
         && cs_op_semantic (s->op)->category == CS_OP_CAT_MATMUL;
}

/* The kind of op a producer is, as the match compares it: "matmul" for every matmul and
 * linear (Thunder's linear is Inductor's addmm or mm), else the op's short name. */
static const char *
op_kind (const CsStmt *s)
{
  const CsOp *op = s->op ? cs_op_semantic (s->op) : NULL;

  if (op == NULL)
    return "";
  return op->category == CS_OP_CAT_MATMUL ? "matmul" : op->short_name;
}

/* name -> the innermost statement writing it (a region's prim rather than the region) */
static void
index_writers (const CsStmt *s, GHashTable *writers, guint depth)
{
  g_autoptr(GPtrArray) outs = NULL;

  if (s->kind != CS_STMT_CALL || depth > 64)
    return;
  outs = g_ptr_array_new ();
  cs_stmt_collect_outputs (s, outs);
  for (guint i = 0; i < outs->len; i++)
    g_hash_table_replace (writers, (gpointer) ((CsProxy *) outs->pdata[i])->name, (gpointer) s);
  for (guint i = 0; i < s->n_subs; i++)
    index_writers (s->subs[i], writers, depth + 1);
}

/* Casts under @s (itself when it is one; its subsymbols otherwise), in order; matmuls met
 * outside a region are counted into *@n_matmuls. */
static void
collect (const CsStmt *s, guint32 region, GArray *casts, guint *n_matmuls, GHashTable *writers,
         guint depth)
{
  CsProxy *in = NULL;
  CsDtype to;

  if (s->kind != CS_STMT_CALL || depth > 64)
    return;
  if (_cs_stmt_is_cast (s, &in, &to))
    {
      if (in->kind == CS_PROXY_TENSOR && in->typed)
        {
          const CsStmt *w = g_hash_table_lookup (writers, in->name);
          Cast c = { s->id, in->dtype, to, numel_of (in), region, w ? op_kind (w) : "" };

          /* a broadcast or view before the cast: what it broadcast decides */
          for (guint k = 0; k < 4 && w != NULL && w->op != NULL
               && cs_op_semantic (w->op)->category == CS_OP_CAT_SHAPE; k++)
            {
              const CsValue *a0 = cs_stmt_get_arg (w, 0, NULL);

              w = a0 && a0->kind == CS_VALUE_PROXY
                  ? g_hash_table_lookup (writers, a0->u.proxy->name) : NULL;
              c.producer = w ? op_kind (w) : "input";
            }
          g_array_append_val (casts, c);
        }
      return;
    }
  if (s->n_subs == 0 || (s->op && cs_op_has_tag (s->op, CS_OP_TAG_PRIM)))
    {
      if (region == 0 && is_matmul (s) && n_matmuls)
        (*n_matmuls)++;
      return;
    }
  if (region == 0 && is_matmul (s) && n_matmuls)
    {
      (*n_matmuls)++;
      n_matmuls = NULL;   /* a matmul with its decomposition counts once */
    }
  for (guint i = 0; i < s->n_subs; i++)
    collect (s->subs[i], region, casts, n_matmuls, writers, depth + 1);
}

static void
scan (const CsTrace *t, GArray *casts, GArray *regions)
{
  guint n_mm = 0, seg = 0, ord = 0;
  g_autoptr(GHashTable) writers = g_hash_table_new (g_str_hash, g_str_equal);

  for (guint i = 0; i < t->n_stmts; i++)
    index_writers (t->stmts[i], writers, 0);

  for (guint i = 0; i < t->n_stmts; i++)
    {
      const CsStmt *s = t->stmts[i];

      if (_cs_stmt_is_region (s))
        {
          Region r;

          if (n_mm != seg)
            {
              seg = n_mm;
              ord = 0;
            }
          r.id = s->id;
          r.segment = seg;
          r.ordinal = ord++;
          g_array_append_val (regions, r);
          for (guint k = 0; k < s->n_subs; k++)
            collect (s->subs[k], s->id, casts, NULL, writers, 0);
        }
      else
        collect (s, 0, casts, &n_mm, writers, 0);
    }
}

static gboolean
same_cast (const Cast *x, const Cast *y)
{
  return x->from == y->from && x->to == y->to && x->numel == y->numel;
}

/* The weight of matching @x with @y: 0 when they convert different dtypes or sizes, else 2,
 * plus 1 when the tensors they convert come from the same kind of op. */
static guint
weight (const Cast *x, const Cast *y)
{
  if (!same_cast (x, y))
    return 0;
  return 2 + (strcmp (x->producer, y->producer) == 0);
}

/* The order-preserving matching of @ca and @cb of the largest total weight (a weighted
 * longest common subsequence); pairs appended in order. */
static void
lcs (GArray *ca, GArray *cb, GArray *out)
{
  guint n = ca->len, m = cb->len;
  guint *L = g_new0 (guint, (gsize) (n + 1) * (m + 1));
#define AT(i, j) L[(gsize) (i) * (m + 1) + (j)]
#define W(i, j) weight (&g_array_index (ca, Cast, i), &g_array_index (cb, Cast, j))

  for (guint i = n; i-- > 0;)
    for (guint j = m; j-- > 0;)
      {
        guint w = W (i, j), best = MAX (AT (i + 1, j), AT (i, j + 1));

        if (w > 0)
          best = MAX (best, AT (i + 1, j + 1) + w);
        AT (i, j) = best;
      }
  for (guint i = 0, j = 0; i < n && j < m;)
    {
      guint w = W (i, j);

      if (w > 0 && AT (i, j) == AT (i + 1, j + 1) + w)
        {
          CsTracePair p = { g_array_index (ca, Cast, i).id, g_array_index (cb, Cast, j).id };
          g_array_append_val (out, p);
          i++;
          j++;
        }
      else if (AT (i, j) == AT (i + 1, j))
        i++;
      else
        j++;
    }
#undef W
#undef AT
  g_free (L);
}

static const Cast *
cast_by_id (GArray *casts, guint32 id)
{
  for (guint i = 0; i < casts->len; i++)
    if (g_array_index (casts, Cast, i).id == id)
      return &g_array_index (casts, Cast, i);
  return NULL;
}

/** cs_trace_match_new: see cs-aten-match.h. */
CsTraceMatch *
cs_trace_match_new (const CsTrace *a, const CsTrace *b)
{
  CsTraceMatch *m;
  g_autoptr(GArray) ca = g_array_new (FALSE, FALSE, sizeof (Cast));
  g_autoptr(GArray) cb = g_array_new (FALSE, FALSE, sizeof (Cast));
  g_autoptr(GArray) ra = g_array_new (FALSE, FALSE, sizeof (Region));
  g_autoptr(GArray) rb = g_array_new (FALSE, FALSE, sizeof (Region));
  g_autofree guint32 *a_to_b = NULL;
  g_autofree gboolean *b_used = NULL;

  g_return_val_if_fail (a != NULL && b != NULL, NULL);
  m = g_new0 (CsTraceMatch, 1);
  m->casts = g_array_new (FALSE, FALSE, sizeof (CsTracePair));
  m->regions = g_array_new (FALSE, FALSE, sizeof (CsTracePair));
  scan (a, ca, ra);
  scan (b, cb, rb);
  m->n_casts_a = ca->len;
  m->n_casts_b = cb->len;
  m->n_regions_a = ra->len;
  m->n_regions_b = rb->len;
  lcs (ca, cb, m->casts);

  /* regions by the matched casts they hold: votes[i][j] */
  a_to_b = g_new0 (guint32, MAX (ra->len, 1));
  b_used = g_new0 (gboolean, MAX (rb->len, 1));
  {
    g_autofree guint *votes = g_new0 (guint, (gsize) MAX (ra->len, 1) * MAX (rb->len, 1));

    for (guint k = 0; k < m->casts->len; k++)
      {
        const CsTracePair *p = &g_array_index (m->casts, CsTracePair, k);
        const Cast *x = cast_by_id (ca, p->a), *y = cast_by_id (cb, p->b);

        if (x->region == 0 || y->region == 0)
          continue;
        for (guint i = 0; i < ra->len; i++)
          if (g_array_index (ra, Region, i).id == x->region)
            for (guint j = 0; j < rb->len; j++)
              if (g_array_index (rb, Region, j).id == y->region)
                votes[(gsize) i * rb->len + j]++;
      }
    for (;;)
      {
        guint best = 0, bi = 0, bj = 0;

        for (guint i = 0; i < ra->len; i++)
          for (guint j = 0; j < rb->len; j++)
            if (a_to_b[i] == 0 && !b_used[j] && votes[(gsize) i * rb->len + j] > best)
              {
                best = votes[(gsize) i * rb->len + j];
                bi = i;
                bj = j;
              }
        if (best == 0)
          break;
        a_to_b[bi] = g_array_index (rb, Region, bj).id;
        b_used[bj] = TRUE;
      }
  }
  /* the rest by their place among the matmuls */
  for (guint i = 0; i < ra->len; i++)
    {
      const Region *x = &g_array_index (ra, Region, i);

      if (a_to_b[i] != 0)
        continue;
      for (guint j = 0; j < rb->len; j++)
        {
          const Region *y = &g_array_index (rb, Region, j);

          if (!b_used[j] && x->segment == y->segment && x->ordinal == y->ordinal)
            {
              a_to_b[i] = y->id;
              b_used[j] = TRUE;
              break;
            }
        }
    }
  for (guint i = 0; i < ra->len; i++)
    if (a_to_b[i] != 0)
      {
        CsTracePair p = { g_array_index (ra, Region, i).id, a_to_b[i] };
        g_array_append_val (m->regions, p);
      }
  return m;
}

/** cs_trace_match_free: frees @match (NULL is allowed). */
void
cs_trace_match_free (CsTraceMatch *match)
{
  if (match == NULL)
    return;
  g_array_unref (match->casts);
  g_array_unref (match->regions);
  g_free (match);
}

/** cs_trace_match_lookup: see cs-aten-match.h. */
guint32
cs_trace_match_lookup (const CsTraceMatch *match, gboolean from_a, guint32 id)
{
  GArray *sets[2];

  g_return_val_if_fail (match != NULL, 0);
  if (id == 0)
    return 0;
  sets[0] = match->casts;
  sets[1] = match->regions;
  for (guint k = 0; k < 2; k++)
    for (guint i = 0; i < sets[k]->len; i++)
      {
        const CsTracePair *p = &g_array_index (sets[k], CsTracePair, i);

        if ((from_a ? p->a : p->b) == id)
          return from_a ? p->b : p->a;
      }
  return 0;
}
