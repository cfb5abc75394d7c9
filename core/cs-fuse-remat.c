/* cs-fuse-remat.c: rematerialization between forward and backward regions
 * (_cs_fuse_rematerialize, see cs-fuse-private.h).
 *
 * Source: thunder/core/rematerialization.py (rematerialize, the min-cut between a producer and
 * a consumer fusion); reference/thunder-traces.md 5.4.
 */
#include "cs-config.h"

#include "cs-fuse.h"
#include "cs-fuse-private.h"
#include "cs-ir-util.h"
#include "cs-ops.h"

#include <string.h>

/* ------------------------------------------------------------------------------------------ */
/* Rematerialization between a forward region and a backward region                            */

/* Subsymbols whose outputs the producer must pass on (never recomputed): Thunder's
 * rematerialization treats outputs of reduction, random and matmul/linear subsymbols as
 * "must output" (thunder/core/rematerialization.py; PR #1319 for MATMUL_OP), the tags of a
 * subsymbol's own subsymbols included (has_tags gathers them: a TorchCompile region's
 * ltorch.log_softmax holds a reduction). */
static gboolean
must_output (const CsStmt *s)
{
  const CsOp *sem;
  if (s->kind != CS_STMT_CALL || s->op == NULL)
    return TRUE;
  sem = cs_op_semantic (s->op);
  if (((s->op->tags | sem->tags) & (CS_OP_TAG_REDUCTION | CS_OP_TAG_RANDOM | CS_OP_TAG_MATMUL))
      || sem->category == CS_OP_CAT_MATMUL || sem->category == CS_OP_CAT_BOOKKEEPING
      || sem->category == CS_OP_CAT_REDUCTION)
    return TRUE;
  if (!cs_op_has_tag (s->op, CS_OP_TAG_PRIM))
    for (guint i = 0; i < s->n_subs; i++)
      if (must_output (s->subs[i]))
        return TRUE;
  return FALSE;
}

/* Thunder's edge capacity: the element size in bytes of a tensor (not its total size), 0 for
 * number proxies, 1 for anything else. */
static double
proxy_cut_bytes (const CsProxy *p)
{
  if (p->kind == CS_PROXY_NUMBER)
    return 0;
  if (p->kind != CS_PROXY_TENSOR || !p->typed)
    return 1;
  return (double) cs_dtype_size_bytes (p->dtype);
}

/* Per-proxy state of the rematerialization, indexed by CsProxy.id (< n); a "set" entry of a
 * *_gen array equals the generation of the current producer/consumer pair. */
typedef struct
{
  guint32    n;          /* ids below n are tracked (trace->next_proxy_id + 1 at the start) */
  guint32    gen;        /* current pair's generation */
  guint32   *n_readers;  /* top-level statements reading the proxy */
  CsStmt   **region_of;  /* the region whose outputs list it, in trace order so far */
  guint32   *made_gen;   /* == gen: written by prod's subsymbol made_idx */
  guint32   *made_idx;
  guint32   *in_gen;     /* == gen: an input of prod */
  guint32   *needed_gen; /* == gen: read by cons from prod */
  guint32   *leaf_gen;   /* == gen: a leaf of the slice */
  guint8    *in_slice;   /* per subsymbol of prod: in the recomputed slice */
  guint      in_slice_cap;
  CsProxyVec tmp;        /* scratch */
  CsProxyVec stack;      /* scratch */
  CsProxyVec needed;     /* scratch: the values cons reads from prod, each once */
  CsProxyVec leaves;     /* scratch: leaves in discovery order */
  CsProxyMap *map;       /* scratch: the slice's outputs -> their bw_ proxies (one pair's,
                            emptied after it) */
} Remat;

static inline gboolean
remat_has (const Remat *r, const guint32 *arr, const CsProxy *p)
{
  return p->id < r->n && arr[p->id] == r->gen;
}

static inline guint32
remat_readers (const Remat *r, const CsProxy *p)
{
  return p->id < r->n ? r->n_readers[p->id] : 0;
}

/* A copy of the slice subsymbol @s for the consumer region: reads and writes renamed through
 * @map (the slice's outputs -> their bw_ proxies; leaves are not in it), values that keep
 * their proxies and strings shared with @s.  A statement other than a plain call (none in
 * practice) is deep-copied by cs_stmt_copy_into() with the same renaming and @leaves kept. */
static CsStmt *
remat_clone (CsTrace *t, const CsStmt *s, const CsProxyMap *map, const CsProxyVec *leaves)
{
  CsStmt *c;

  if (s->kind != CS_STMT_CALL || s->n_subs > 0 || s->value != NULL)
    {
      g_autoptr(GHashTable) gm = g_hash_table_new (g_direct_hash, g_direct_equal);
      for (guint i = 0; i < leaves->len; i++)
        g_hash_table_insert (gm, leaves->v[i], leaves->v[i]);
      for (guint k = 0; k < _cs_proxy_map_size (map); k++)
        {
          CsProxy *from = _cs_proxy_map_key (map, k);
          g_hash_table_insert (gm, from, _cs_proxy_map_lookup (map, from));
        }
      return cs_stmt_copy_into (t, s, gm);
    }
  c = cs_arena_alloc_line_uninit (t->arena, sizeof (CsStmt));
  *c = *s;
  c->owner = t->serial;
  c->id = ++t->next_stmt_id;
  c->region_fresh = 0;
  if (s->n_args > 0)
    {
      c->args = CS_ARENA_NEW_N (t->arena, CsArg, s->n_args);
      for (guint i = 0; i < s->n_args; i++)
        {
          c->args[i].name = s->args[i].name;
          c->args[i].value = _cs_value_remap (t->arena, s->args[i].value, map);
        }
    }
  c->out = _cs_value_remap (t->arena, s->out, map);
  return c;
}

/* Decides whether @cons (a backward region) should recompute the values it reads from @prod
 * (a forward region) from @prod's inputs (and its must-output values): when those weigh
 * fewer bytes, the two-cut simplification of Thunder's min-cut (capacities = element byte
 * sizes, producer inputs halved; outputs other statements read are passed anyway and cost
 * nothing; a tie keeps the outputs).  Reads only the two regions and r->n_readers; leaves the
 * slice in r->in_slice (per subsymbol of @prod) and its leaves in r->leaves.
 * Returns: TRUE when the slice should be cloned into @cons (remat_apply) */
static gboolean
remat_analyze (const CsStmt *prod, const CsStmt *cons, Remat *r)
{
  double cost_out = 0, cost_leaves = 0;
  guint n_slice = 0;

  r->gen++;
  r->needed.len = 0;
  r->leaves.len = 0;
  r->stack.len = 0;
  for (guint i = 0; i < prod->n_subs; i++)
    {
      r->tmp.len = 0;
      _cs_stmt_writes_vec (prod->subs[i], &r->tmp);
      for (guint j = 0; j < r->tmp.len; j++)
        if (r->tmp.v[j]->id < r->n)
          {
            r->made_gen[r->tmp.v[j]->id] = r->gen;
            r->made_idx[r->tmp.v[j]->id] = i;
          }
    }
  r->tmp.len = 0;
  _cs_stmt_reads_vec (prod, &r->tmp);
  for (guint j = 0; j < r->tmp.len; j++)
    if (r->tmp.v[j]->id < r->n)
      r->in_gen[r->tmp.v[j]->id] = r->gen;

  /* the values cons reads from prod; those other statements read too stay outputs */
  r->tmp.len = 0;
  _cs_stmt_reads_vec (cons, &r->tmp);
  for (guint j = 0; j < r->tmp.len; j++)
    {
      CsProxy *p = r->tmp.v[j];
      if (!remat_has (r, r->made_gen, p) || remat_has (r, r->needed_gen, p))
        continue;
      r->needed_gen[p->id] = r->gen;
      _cs_proxy_vec_push (&r->needed, p);
      if (remat_readers (r, p) > 1)
        continue;
      cost_out += proxy_cut_bytes (p);
      _cs_proxy_vec_push (&r->stack, p);
    }
  if (r->stack.len == 0)
    return FALSE;

  if (r->in_slice_cap < prod->n_subs)
    {
      r->in_slice_cap = MAX (prod->n_subs, 2 * r->in_slice_cap);
      r->in_slice = g_renew (guint8, r->in_slice, r->in_slice_cap);
    }
  memset (r->in_slice, 0, prod->n_subs);

  /* backward slice inside prod, stopping at prod's inputs, must-output values and values
   * other statements read (passed anyway) */
  while (r->stack.len > 0)
    {
      CsProxy *p = r->stack.v[--r->stack.len];
      CsStmt *s = remat_has (r, r->made_gen, p) ? prod->subs[r->made_idx[p->id]] : NULL;
      gboolean external = s != NULL && !remat_has (r, r->needed_gen, p) && remat_readers (r, p) > 0;
      if (s == NULL || must_output (s) || external)
        {
          /* proxies with ids past the marks (none in practice) count as fresh leaves */
          gboolean fresh = p->id >= r->n || r->leaf_gen[p->id] != r->gen;
          if (fresh)
            {
              if (p->id < r->n)
                r->leaf_gen[p->id] = r->gen;
              _cs_proxy_vec_push (&r->leaves, p);
              if (!external)
                cost_leaves += proxy_cut_bytes (p) * (remat_has (r, r->in_gen, p) ? 0.5 : 1.0);
            }
          continue;
        }
      if (r->in_slice[r->made_idx[p->id]])
        continue;
      r->in_slice[r->made_idx[p->id]] = 1;
      n_slice++;
      r->tmp.len = 0;
      _cs_stmt_reads_vec (s, &r->tmp);
      for (guint j = 0; j < r->tmp.len; j++)
        _cs_proxy_vec_push (&r->stack, r->tmp.v[j]);
    }
  /* a needed value that is itself a leaf (a must-output) costs the same either way */
  return cost_leaves < cost_out && n_slice > 0;
}

/* Clones the slice of @prod that remat_analyze left in r->in_slice (per subsymbol) into the
 * consumer *@consp with fresh bw_ names (r->leaves: the slice's leaves, kept as they are) and
 * renames the consumer's reads of the slice's outputs. */
static void
remat_apply (CsTrace *t, CsStmt *prod, CsStmt **consp, Remat *r)
{
  CsStmt *cons = *consp;
  CsProxyMap *map = r->map;
  const guint8 *in_slice = r->in_slice;
  CsProxyVec *tmp = &r->tmp;
  g_autoptr(GPtrArray) subs = NULL;
  guint n_slice = 0;

  for (guint i = 0; i < prod->n_subs; i++)
    n_slice += in_slice[i];
  /* clone the slice (in prod's order) into cons with fresh bw_ names */
  _cs_proxy_map_clear (map);
  subs = g_ptr_array_sized_new (n_slice + cons->n_subs);
  for (guint i = 0; i < prod->n_subs; i++)
    {
      CsStmt *s = prod->subs[i];
      CsStmt *c;
      if (!in_slice[i])
        continue;
      tmp->len = 0;
      _cs_stmt_writes_vec (s, tmp);
      for (guint j = 0; j < tmp->len; j++)
        {
          CsProxy *o = tmp->v[j];
          const char *name = _cs_arena_concat (t->arena, "bw_", o->name, "");
          guint32 hash = cs_name_hash (name);
          CsProxy *n;
          if (_cs_trace_lookup_proxy_hashed (t, name, hash) != NULL)
            {
              name = cs_trace_fresh_name (t, name);
              hash = cs_name_hash (name);
            }
          n = _cs_trace_new_proxy (t, name, hash, 0);
          n->kind = o->kind;
          n->dtype = o->dtype;
          n->rank = o->rank;
          n->shape = o->shape;
          n->device = o->device;
          n->typed = o->typed;
          n->type_raw = o->type_raw;
          _cs_proxy_map_insert (map, o, n);
        }
      c = remat_clone (t, s, map, &r->leaves);
      c->origin = s->origin;
      c->backward = cons->backward;
      c->why = "rematerialized: recomputed in the backward region instead of saved";
      g_ptr_array_add (subs, c);
    }
  /* cons may be a region of the input trace (re-fusing a final trace): edit a private copy;
   * what it reads from prod and is now recomputed is exactly what the map renames */
  cons = *consp = cs_trace_own_stmt (t, cons);
  for (guint i = 0; i < cons->n_subs; i++)
    {
      cons->subs[i] = _cs_stmt_remap_reads (t, cons->subs[i], map);
      g_ptr_array_add (subs, cons->subs[i]);
    }
  cs_stmt_set_subs (t, cons, (CsStmt **) subs->pdata, subs->len);
  _cs_proxy_map_clear (map);
}

/* Rematerialization of one producer/consumer pair: TRUE when part of @prod was cloned into
 * the consumer *@consp (which is then replaced by an edited copy). */
static gboolean
remat_pair (CsTrace *t, CsStmt *prod, CsStmt **consp, Remat *r)
{
  if (!remat_analyze (prod, *consp, r))
    return FALSE;
  remat_apply (t, prod, consp, r);
  return TRUE;
}


/* The forward producers of the backward region @s whose values it reads, in reading order,
 * each once (r->region_of: the region writing each proxy id, in trace order so far). */
static void
remat_producers (const CsStmt *s, const Remat *r, CsProxyVec *tmp, GPtrArray *prods)
{
  g_ptr_array_set_size (prods, 0);
  tmp->len = 0;
  _cs_stmt_reads_vec (s, tmp);
  for (guint j = 0; j < tmp->len; j++)
    {
      CsStmt *p = tmp->v[j]->id < r->n ? r->region_of[tmp->v[j]->id] : NULL;
      gboolean dup = FALSE;
      for (guint m = 0; m < prods->len && !dup; m++)
        dup = prods->pdata[m] == p;
      if (p && !p->backward && !dup)
        g_ptr_array_add (prods, p);
    }
}

/* Marks the proxies the region @s writes as written by it. */
static void
remat_note_writes (CsStmt *s, Remat *r, CsProxyVec *tmp)
{
  tmp->len = 0;
  _cs_stmt_writes_vec (s, tmp);
  for (guint j = 0; j < tmp->len; j++)
    if (tmp->v[j]->id < r->n)
      r->region_of[tmp->v[j]->id] = s;
}

/* Thunder runs rematerialization inside the fusion pass on every producer -> consumer pair of
 * fusions; castscope does the forward -> backward pairs, which is what shrinks
 * saved_for_backward (reference/thunder-traces.md 5.4). */
void
_cs_fuse_rematerialize (CsTrace *t)
{
  gboolean changed = FALSE;
  Remat r = { 0 };
  g_autoptr(GPtrArray) prods = g_ptr_array_new ();
  guint32 *reader_gen;

  r.n = t->next_proxy_id + 1;
  r.n_readers = g_new0 (guint32, r.n);
  r.region_of = g_new0 (CsStmt *, r.n);
  r.made_gen = g_new0 (guint32, r.n);
  r.made_idx = g_new0 (guint32, r.n);
  r.in_gen = g_new0 (guint32, r.n);
  r.needed_gen = g_new0 (guint32, r.n);
  r.leaf_gen = g_new0 (guint32, r.n);
  reader_gen = g_new0 (guint32, r.n);
  r.map = _cs_proxy_map_new ();

  /* readers per proxy: a statement reading a value twice counts once */
  for (guint i = 0; i < t->n_stmts; i++)
    {
      r.tmp.len = 0;
      _cs_stmt_reads_vec (t->stmts[i], &r.tmp);
      for (guint j = 0; j < r.tmp.len; j++)
        {
          guint32 id = r.tmp.v[j]->id;
          if (id < r.n && reader_gen[id] != i + 1)
            {
              reader_gen[id] = i + 1;
              r.n_readers[id]++;
            }
        }
    }

  /* each backward region against its forward producers, in reading order: a second pair sees
   * the consumer as the first left it */
  for (guint i = 0; i < t->n_stmts; i++)
    {
      CsStmt *s = t->stmts[i];
      if (!_cs_stmt_is_region (s))
        continue;
      if (s->backward)
        {
          remat_producers (s, &r, &r.tmp, prods);
          /* pairs of one executor's regions: nvFusion with nvFusion, TorchCompile with
             TorchCompile (each fusion executor's pass rematerializes its own trace) */
          for (guint j = 0; j < prods->len; j++)
            if (_cs_stmt_is_nvfusion (prods->pdata[j]) == _cs_stmt_is_nvfusion (t->stmts[i])
                && remat_pair (t, prods->pdata[j], &t->stmts[i], &r))
              changed = TRUE;
          s = t->stmts[i];
        }
      remat_note_writes (s, &r, &r.tmp);
    }
  g_free (reader_gen);
  _cs_proxy_map_free (r.map);
  g_free (r.n_readers);
  g_free (r.region_of);
  g_free (r.made_gen);
  g_free (r.made_idx);
  g_free (r.in_gen);
  g_free (r.needed_gen);
  g_free (r.leaf_gen);
  g_free (r.in_slice);
  _cs_proxy_vec_free (&r.tmp);
  _cs_proxy_vec_free (&r.stack);
  _cs_proxy_vec_free (&r.needed);
  _cs_proxy_vec_free (&r.leaves);
  if (changed)
    _cs_regions_refresh (t, FALSE);
}
