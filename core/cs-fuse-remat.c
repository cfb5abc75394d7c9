/* cs-fuse-remat.c: Thunder's rematerialization of fusion regions (_cs_fuse_rematerialize, see
 * cs-fuse-private.h).
 *
 * Source: thunder/core/rematerialization.py at 1e22aacb1 (rematerialize,
 * find_filtered_producer_consumer_pairs, find_external_producer_outputs,
 * find_external_consumer_inputs, find_cut, apply_rematerialization_for_producer/_consumer);
 * reference/thunder-traces.md 5.4.  Every producer -> consumer pair of fusion regions, forward
 * and backward alike, in trace order; the cut is the minimum cut of Thunder's graph (a node per
 * value split in `_in -> _out` with the element size as capacity), solved exactly here.
 */
#include "cs-config.h"

#include "cs-executors.h"
#include "cs-fuse.h"
#include "cs-fuse-private.h"
#include "cs-ir-util.h"
#include "cs-ops.h"

#include <math.h>
#include <string.h>

/* ------------------------------------------------------------------------------------------ */
/* Subsymbol properties                                                                        */

/* Subsymbols whose outputs the producer must pass on (never recomputed): Thunder's find_cut
 * makes the outputs of subsymbols tagged REDUCTION_OP, RANDOM_OP or MATMUL_OP required producer
 * values; has_tags gathers the tags of a subsymbol's own subsymbols too (a TorchCompile
 * region's ltorch.log_softmax holds a reduction).  Statements castscope cannot classify count
 * as tagged. */
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

/* Thunder's edge capacity (find_cut's get_weight): the element size in bytes of a tensor (not
 * its total size), 0 for number proxies, 1 for anything else. */
static double
proxy_cut_bytes (const CsProxy *p)
{
  if (p->kind == CS_PROXY_NUMBER)
    return 0;
  if (p->kind != CS_PROXY_TENSOR || !p->typed)
    return 1;
  return (double) cs_dtype_size_bytes (p->dtype);
}

/* A copy of the recomputed subsymbol @s for the consumer region: outputs renamed through @map
 * (the recomputed values -> their fresh proxies), values that keep their proxies and strings
 * shared with @s.  A statement other than a plain call is deep-copied by cs_stmt_copy_into()
 * with the same renaming (every other proxy kept). */
static CsStmt *
remat_clone (CsTrace *t, const CsStmt *s, const CsProxyMap *map)
{
  CsStmt *c;

  if (s->kind != CS_STMT_CALL || s->n_subs > 0 || s->value != NULL)
    {
      g_autoptr(GHashTable) gm = g_hash_table_new (g_direct_hash, g_direct_equal);
      g_auto(CsProxyVec) ps = CS_PROXY_VEC_INIT;
      _cs_stmt_reads_vec (s, &ps);
      for (guint i = 0; i < ps.len; i++)
        {
          CsProxy *to = _cs_proxy_map_lookup (map, ps.v[i]);
          g_hash_table_insert (gm, ps.v[i], to ? to : ps.v[i]);
        }
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

/* ------------------------------------------------------------------------------------------ */
/* The regions as rematerialization edits them                                                 */

/* One fusion region while the pass runs: Thunder replaces the region's BoundSymbol by an
 * updated one after every pair (new_bsyms); these are the fields it reads. */
typedef struct
{
  CsStmt    *orig;       /* the region call before the pass */
  guint      top;        /* its index in the trace's statements */
  GPtrArray *ins;        /* CsProxy *: current inputs (bsym.args) */
  GPtrArray *outs;       /* CsProxy *: current outputs (bsym.output) */
  GPtrArray *subs;       /* CsStmt *: current subsymbols */
  GPtrArray *cuts;       /* CsProxy *: computed_cuts_for_producers, when it is a producer */
  GPtrArray *absorbed;   /* RReg *: producers whose statements it now recomputes */
  gboolean   modified;   /* inputs or outputs differ from orig's: Thunder's BoundSymbol
                            equality (sym, args, output) no longer holds, so static consumer
                            lists that name orig do not name the current region */
  gboolean   subs_changed; /* subsymbols differ from orig's */
  gboolean   nvfusion;   /* an nvFusion region (else TorchCompile or another fusion) */
} RReg;

static gboolean
ptr_in (GPtrArray *a, gconstpointer p)
{
  for (guint i = 0; i < a->len; i++)
    if (a->pdata[i] == p)
      return TRUE;
  return FALSE;
}

static void
push_unique (GPtrArray *a, gpointer p)
{
  if (!ptr_in (a, p))
    g_ptr_array_add (a, p);
}

/* Outputs of @subs (flat_proxy_outs of each, in order), each once, into @set and @list. */
static void
produced_vars (GPtrArray *subs, GHashTable *set, GPtrArray *list)
{
  g_auto(CsProxyVec) ps = CS_PROXY_VEC_INIT;
  for (guint i = 0; i < subs->len; i++)
    {
      ps.len = 0;
      _cs_stmt_writes_vec (subs->pdata[i], &ps);
      for (guint j = 0; j < ps.len; j++)
        if (!g_hash_table_contains (set, ps.v[j]))
          {
            g_hash_table_add (set, ps.v[j]);
            if (list)
              g_ptr_array_add (list, ps.v[j]);
          }
    }
}

/* Thunder's utils.find_producer_symbols over @subs: the indices (marked in @mark) of the
 * subsymbols that produce @proxies, walking back through their arguments and stopping at
 * @stop. */
static void
find_producer_symbols (GPtrArray *subs, GPtrArray *proxies, GHashTable *stop, guint8 *mark)
{
  g_autoptr(GHashTable) producer = g_hash_table_new (g_direct_hash, g_direct_equal);
  g_autoptr(GHashTable) seen = g_hash_table_new (g_direct_hash, g_direct_equal);
  g_autoptr(GPtrArray) queue = g_ptr_array_new ();
  g_auto(CsProxyVec) ps = CS_PROXY_VEC_INIT;

  for (guint i = 0; i < subs->len; i++)
    {
      ps.len = 0;
      _cs_stmt_writes_vec (subs->pdata[i], &ps);
      for (guint j = 0; j < ps.len; j++)
        if (!g_hash_table_contains (producer, ps.v[j]))
          g_hash_table_insert (producer, ps.v[j], GUINT_TO_POINTER (i + 1));
    }
  g_ptr_array_extend (queue, proxies, NULL, NULL);
  while (queue->len > 0)
    {
      CsProxy *p = g_ptr_array_steal_index (queue, queue->len - 1);
      guint at = GPOINTER_TO_UINT (g_hash_table_lookup (producer, p));
      if (at == 0)
        continue;
      mark[at - 1] = 1;
      ps.len = 0;
      _cs_stmt_reads_vec (subs->pdata[at - 1], &ps);
      for (guint j = 0; j < ps.len; j++)
        if (!g_hash_table_contains (stop, ps.v[j]) && !g_hash_table_contains (seen, ps.v[j]))
          {
            g_hash_table_add (seen, ps.v[j]);
            g_ptr_array_add (queue, ps.v[j]);
          }
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Minimum cut                                                                                 */

typedef struct
{
  guint  to;    /* head node */
  guint  rev;   /* index of the paired edge in adj[to] */
  double cap;   /* capacity (INFINITY for Thunder's float("inf")) */
  double flow;  /* current flow; the paired edge holds -flow */
  gboolean real; /* an edge of Thunder's graph (not the residual pair) */
} FEdge;

typedef struct
{
  GArray    **adj;     /* FEdge per node */
  guint       n;       /* nodes: 0 source, 1 sink, then 2 per value (_in, _out) */
  guint       cap_n;   /* slots of adj; those not NULL are kept, emptied, by fg_reset() */
  GHashTable *idx;     /* CsProxy * -> 1 + value index */
  GPtrArray  *vars;    /* value index -> CsProxy * */
} FGraph;

#define FG_SOURCE 0u
#define FG_SINK   1u

static void
fg_init (FGraph *g)
{
  memset (g, 0, sizeof *g);
  g->idx = g_hash_table_new (g_direct_hash, g_direct_equal);
  g->vars = g_ptr_array_new ();
  g->cap_n = 64;
  g->adj = g_new0 (GArray *, g->cap_n);
  g->n = 2;
  for (guint i = 0; i < 2; i++)
    g->adj[i] = g_array_new (FALSE, FALSE, sizeof (FEdge));
}

static void
fg_clear (FGraph *g)
{
  for (guint i = 0; i < g->cap_n; i++)
    if (g->adj[i] != NULL)
      g_array_unref (g->adj[i]);
  g_free (g->adj);
  g_hash_table_unref (g->idx);
  g_ptr_array_unref (g->vars);
}

/* Empties @g for the next pair, keeping its storage. */
static void
fg_reset (FGraph *g)
{
  for (guint i = 0; i < g->n; i++)
    g_array_set_size (g->adj[i], 0);
  g_hash_table_remove_all (g->idx);
  g_ptr_array_set_size (g->vars, 0);
  g->n = 2;
}

/* The `_in` node of @p (its `_out` node is the next one), created on first use. */
static guint
fg_var (FGraph *g, CsProxy *p)
{
  guint k = GPOINTER_TO_UINT (g_hash_table_lookup (g->idx, p));
  if (k == 0)
    {
      g_ptr_array_add (g->vars, p);
      k = g->vars->len;
      g_hash_table_insert (g->idx, p, GUINT_TO_POINTER (k));
      if (g->n + 2 > g->cap_n)
        {
          guint old = g->cap_n;
          g->cap_n *= 2;
          g->adj = g_renew (GArray *, g->adj, g->cap_n);
          memset (g->adj + old, 0, (g->cap_n - old) * sizeof (GArray *));
        }
      for (guint i = g->n; i < g->n + 2; i++)
        if (g->adj[i] == NULL)
          g->adj[i] = g_array_new (FALSE, FALSE, sizeof (FEdge));
      g->n += 2;
    }
  return 2 + 2 * (k - 1);
}

/* Adds edge @u -> @v (networkx add_edge: a second add of the same edge sets its capacity);
 * self loops carry no flow and are left out.  DiGraph edges are unique: an existing one is
 * found among @u's edges (a node has a few: the outputs of its value's readers). */
static void
fg_edge (FGraph *g, guint u, guint v, double cap)
{
  GArray *au = g->adj[u];
  FEdge e = { 0 }, r = { 0 };

  if (u == v)
    return;
  for (guint k = 0; k < au->len; k++)
    {
      FEdge *x = &g_array_index (au, FEdge, k);
      if (x->real && x->to == v)
        {
          x->cap = cap;
          return;
        }
    }
  e.to = v;
  e.rev = g->adj[v]->len;
  e.cap = cap;
  e.real = TRUE;
  r.to = u;
  r.rev = g->adj[u]->len;
  r.cap = 0;
  g_array_append_val (g->adj[u], e);
  g_array_append_val (g->adj[v], r);
}

/* Maximum flow from source to sink (Edmonds-Karp); FALSE when it is unbounded (a path of
 * infinite capacities: Thunder's minimum_cut raises). */
static gboolean
fg_max_flow (FGraph *g)
{
  g_autofree guint *prev_node = g_new (guint, g->n);
  g_autofree guint *prev_edge = g_new (guint, g->n);
  g_autofree guint *queue = g_new (guint, g->n);

  for (;;)
    {
      guint head = 0, tail = 0;
      double push = INFINITY;

      for (guint i = 0; i < g->n; i++)
        prev_node[i] = G_MAXUINT;
      prev_node[FG_SOURCE] = FG_SOURCE;
      queue[tail++] = FG_SOURCE;
      while (head < tail && prev_node[FG_SINK] == G_MAXUINT)
        {
          guint u = queue[head++];
          for (guint k = 0; k < g->adj[u]->len; k++)
            {
              FEdge *e = &g_array_index (g->adj[u], FEdge, k);
              if (prev_node[e->to] == G_MAXUINT && e->cap - e->flow > 0)
                {
                  prev_node[e->to] = u;
                  prev_edge[e->to] = k;
                  queue[tail++] = e->to;
                }
            }
        }
      if (prev_node[FG_SINK] == G_MAXUINT)
        return TRUE;
      for (guint v = FG_SINK; v != FG_SOURCE; v = prev_node[v])
        {
          FEdge *e = &g_array_index (g->adj[prev_node[v]], FEdge, prev_edge[v]);
          push = MIN (push, e->cap - e->flow);
        }
      if (isinf (push))
        return FALSE;
      for (guint v = FG_SINK; v != FG_SOURCE; v = prev_node[v])
        {
          FEdge *e = &g_array_index (g->adj[prev_node[v]], FEdge, prev_edge[v]);
          e->flow += push;
          g_array_index (g->adj[v], FEdge, e->rev).flow -= push;
        }
    }
}

/* ------------------------------------------------------------------------------------------ */
/* The pass                                                                                    */

typedef struct
{
  CsTrace        *t;
  const CsPolicy *policy;
  RReg           *regs;       /* fusion regions in trace order */
  guint           n_regs;
  gint           *reg_of_top; /* top-level index -> region index, or -1 */
  guint32         n_ids;      /* proxy ids below it have static reader lists */
  guint32        *rd_start;   /* CSR: static readers (top-level indices) of each proxy id */
  guint          *rd;
  CsProxyMap     *map;        /* scratch: recomputed values -> their fresh proxies */
  FGraph          g;          /* scratch: find_cut's graph, emptied for each pair */
  GHashTable     *users;      /* scratch: CsProxy * -> GPtrArray * of its readers (find_cut) */
  GPtrArray      *user_lists; /* the GPtrArrays users has handed out; reused for each pair */
  guint           n_user_lists; /* of user_lists, those in use by the current pair */
} Remat;

/* Thunder's find_external_producer_outputs: the outputs of @p that must stay outputs because
 * a statement other than @c reads them; @next are the consumers of the later pairs of the same
 * producer (current versions), @c_reg / @next_regs their region indices. */
static void
external_producer_outputs (Remat *r, RReg *p, RReg *c, guint c_reg, const guint *next_regs,
                           guint n_next, GPtrArray *ext)
{
  for (guint i = 0; i < p->outs->len; i++)
    {
      CsProxy *out = p->outs->pdata[i];
      guint local = 0, global = 0;
      gboolean remat;

      local += ptr_in (p->ins, out);
      local += ptr_in (c->ins, out);
      for (guint k = 0; k < n_next; k++)
        local += ptr_in (r->regs[next_regs[k]].ins, out);
      if (local <= 1 && out->id < r->n_ids)
        for (guint k = r->rd_start[out->id]; k < r->rd_start[out->id + 1]; k++)
          {
            gint rr = r->reg_of_top[r->rd[k]];
            gboolean excluded = FALSE;
            if (rr >= 0 && (guint) rr == c_reg && !c->modified)
              excluded = TRUE;
            for (guint m = 0; m < n_next && !excluded; m++)
              if (rr >= 0 && (guint) rr == next_regs[m] && !r->regs[next_regs[m]].modified)
                excluded = TRUE;
            if (!excluded)
              global++;
          }
      if (local > 1 || global > 0)
        remat = FALSE;
      else if (local == 0)
        remat = TRUE;
      else
        remat = ptr_in (c->ins, out);
      if (!remat)
        g_ptr_array_add (ext, out);
    }
}

/* Thunder's find_external_consumer_inputs: inputs of @c that @p neither outputs, reads nor
 * produces, in @c's input order. */
static void
external_consumer_inputs (RReg *p, GHashTable *p_made, RReg *c, GPtrArray *out)
{
  for (guint i = 0; i < c->ins->len; i++)
    {
      CsProxy *x = c->ins->pdata[i];
      if (!ptr_in (p->outs, x) && !ptr_in (p->ins, x) && !g_hash_table_contains (p_made, x))
        push_unique (out, x);
    }
}

static gboolean
consumer_can_fuse (Remat *r, RReg *c, const CsStmt *s)
{
  if (c->nvfusion)
    return cs_fuse_stmt_is_fusible (s, r->policy);
  return cs_executor_xentropy_can_fuse (s);
}

/* find_cut's add_edges for @var: `_in -> _out` with its weight (halved for an input of the
 * producer), `_out -> _in` of every output of each subsymbol (of @all) that reads it. */
static void
add_var_edges (FGraph *g, CsProxy *var, RReg *p, GHashTable *users)
{
  guint vi = fg_var (g, var);
  double w = proxy_cut_bytes (var);
  GPtrArray *us;

  if (ptr_in (p->ins, var))
    w /= 2.0;
  fg_edge (g, vi, vi + 1, w);
  us = g_hash_table_lookup (users, var);
  if (us == NULL)
    return;
  for (guint k = 0; k < us->len; k++)
    {
      g_auto(CsProxyVec) ps = CS_PROXY_VEC_INIT;
      const CsStmt *u = us->pdata[k];
      if (u->kind == CS_STMT_RETURN || u->kind == CS_STMT_UNPACK)
        continue;
      _cs_stmt_writes_vec (u, &ps);
      for (guint j = 0; j < ps.len; j++)
        fg_edge (g, vi + 1, fg_var (g, ps.v[j]), INFINITY);
    }
}

/* Thunder's find_cut: the values to pass from @p to @c so that @c recomputes the rest, as the
 * minimum cut of the graph whose source feeds @p's required values and whose sink drains @c's
 * required ones; ties go to the cut nearest the sink (networkx's partition: the nodes that
 * still reach the sink in the residual graph).  Leaves the cut in @cut (empty: no change). */
static void
find_cut (Remat *r, GPtrArray *ext_out, RReg *p, RReg *c, GPtrArray *cut)
{
  g_autoptr(GPtrArray) req_p = g_ptr_array_new ();
  g_autoptr(GHashTable) req_c = g_hash_table_new (g_direct_hash, g_direct_equal);
  g_autoptr(GHashTable) p_made = g_hash_table_new (g_direct_hash, g_direct_equal);
  g_autoptr(GPtrArray) ext_in = g_ptr_array_new ();
  g_autoptr(GHashTable) stop = g_hash_table_new (g_direct_hash, g_direct_equal);
  GHashTable *users = r->users;
  g_autofree guint8 *cmark = g_new0 (guint8, c->subs->len + 1);
  g_autofree guint8 *reach = NULL;
  g_auto(CsProxyVec) ps = CS_PROXY_VEC_INIT;
  gboolean differ = p->nvfusion != c->nvfusion;
  FGraph *g = &r->g;

  g_ptr_array_set_size (cut, 0);
  produced_vars (p->subs, p_made, NULL);

  /* required producer values: its inputs, the outputs others read, tagged subsymbols' outputs
   * and (across executors) what the consumer's executor cannot run */
  g_ptr_array_extend (req_p, p->ins, NULL, NULL);
  g_ptr_array_extend (req_p, ext_out, NULL, NULL);
  for (guint i = 0; i < p->subs->len; i++)
    {
      const CsStmt *s = p->subs->pdata[i];
      gboolean tagged = must_output (s);
      if (tagged || (differ && !consumer_can_fuse (r, c, s)))
        {
          ps.len = 0;
          _cs_stmt_writes_vec (s, &ps);
          for (guint j = 0; j < ps.len; j++)
            g_ptr_array_add (req_p, ps.v[j]);
        }
    }

  /* required consumer values: its outputs, its external inputs and every value on the way from
   * those inputs to the outputs */
  for (guint i = 0; i < c->outs->len; i++)
    g_hash_table_add (req_c, c->outs->pdata[i]);
  external_consumer_inputs (p, p_made, c, ext_in);
  for (guint i = 0; i < ext_in->len; i++)
    {
      g_hash_table_add (req_c, ext_in->pdata[i]);
      g_hash_table_add (stop, ext_in->pdata[i]);
    }
  find_producer_symbols (c->subs, c->outs, stop, cmark);
  for (guint i = 0; i < c->subs->len; i++)
    if (cmark[i])
      {
        ps.len = 0;
        _cs_stmt_writes_vec (c->subs->pdata[i], &ps);
        for (guint j = 0; j < ps.len; j++)
          g_hash_table_add (req_c, ps.v[j]);
      }
  for (guint i = 0; i < req_p->len; i++)
    if (g_hash_table_contains (req_c, req_p->pdata[i]))
      return;
  if (g_hash_table_size (req_c) == 0)
    return;

  /* users of each value among the producer's and the consumer's subsymbols (the lists of
   * the previous pair are emptied and handed out again) */
  g_hash_table_remove_all (users);
  r->n_user_lists = 0;
  for (guint pass = 0; pass < 2; pass++)
    {
      GPtrArray *subs = pass == 0 ? p->subs : c->subs;
      for (guint i = 0; i < subs->len; i++)
        {
          ps.len = 0;
          _cs_stmt_reads_vec (subs->pdata[i], &ps);
          for (guint j = 0; j < ps.len; j++)
            {
              GPtrArray *us = g_hash_table_lookup (users, ps.v[j]);
              if (us == NULL)
                {
                  if (r->n_user_lists == r->user_lists->len)
                    g_ptr_array_add (r->user_lists, g_ptr_array_new ());
                  us = r->user_lists->pdata[r->n_user_lists++];
                  g_ptr_array_set_size (us, 0);
                  g_hash_table_insert (users, ps.v[j], us);
                }
              g_ptr_array_add (us, subs->pdata[i]);
            }
        }
    }

  fg_reset (g);
  {
    GHashTableIter it;
    gpointer key;
    g_hash_table_iter_init (&it, req_c);
    while (g_hash_table_iter_next (&it, &key, NULL))
      fg_edge (g, fg_var (g, key), FG_SINK, INFINITY);
  }
  for (guint i = 0; i < req_p->len; i++)
    {
      fg_edge (g, FG_SOURCE, fg_var (g, req_p->pdata[i]), INFINITY);
      add_var_edges (g, req_p->pdata[i], p, users);
    }
  for (guint pass = 0; pass < 2; pass++)
    {
      GPtrArray *subs = pass == 0 ? p->subs : c->subs;
      for (guint i = 0; i < subs->len; i++)
        {
          g_auto(CsProxyVec) outs = CS_PROXY_VEC_INIT;
          _cs_stmt_writes_vec (subs->pdata[i], &outs);
          for (guint j = 0; j < outs.len; j++)
            add_var_edges (g, outs.v[j], p, users);
        }
    }

  if (fg_max_flow (g))
    {
      /* nodes that reach the sink in the residual graph: networkx's non-reachable side */
      g_autofree guint *queue = g_new (guint, g->n);
      guint head = 0, tail = 0;
      reach = g_new0 (guint8, g->n);
      reach[FG_SINK] = 1;
      queue[tail++] = FG_SINK;
      while (head < tail)
        {
          guint w = queue[head++];
          for (guint k = 0; k < g->adj[w]->len; k++)
            {
              FEdge *back = &g_array_index (g->adj[w], FEdge, k);
              FEdge *e = &g_array_index (g->adj[back->to], FEdge, back->rev);
              if (!reach[back->to] && e->cap - e->flow > 0)
                {
                  reach[back->to] = 1;
                  queue[tail++] = back->to;
                }
            }
        }
      for (guint k = 0; k < g->vars->len; k++)
        {
          guint in = 2 + 2 * k;
          if (!reach[in] && reach[in + 1])
            g_ptr_array_add (cut, g->vars->pdata[k]);
        }
    }
}

/* Thunder's bsym_list_to_dag + toposort_bsym_dag(leaves, BOTTOM_UP) with the default selector
 * (thunder/core/transforms.py), as apply_rematerialization_for_consumer orders the consumer's
 * new subsymbols: parents in argument order, children in consumer order (each once), the leaves
 * (no children) in list order; the first eligible node is taken, a parent becomes eligible once
 * every child is taken, and the list is reversed.  Reorders @subs in place. */
static void
toposort_bottom_up (GPtrArray *subs)
{
  guint n = subs->len;
  g_autoptr(GHashTable) producer = g_hash_table_new (g_direct_hash, g_direct_equal);
  g_autoptr(GHashTable) readers = g_hash_table_new_full (g_direct_hash, g_direct_equal, NULL,
                                                         (GDestroyNotify) g_array_unref);
  g_autofree GArray **parents = g_new0 (GArray *, n + 1);
  g_autofree GArray **children = g_new0 (GArray *, n + 1);
  g_autofree guint8 *taken = g_new0 (guint8, n + 1);
  g_autoptr(GArray) eligible = g_array_new (FALSE, FALSE, sizeof (guint));
  g_autoptr(GPtrArray) order = g_ptr_array_sized_new (n);
  g_auto(CsProxyVec) ps = CS_PROXY_VEC_INIT;

  for (guint i = 0; i < n; i++)
    {
      ps.len = 0;
      _cs_stmt_writes_vec (subs->pdata[i], &ps);
      for (guint j = 0; j < ps.len; j++)
        if (!g_hash_table_contains (producer, ps.v[j]))
          g_hash_table_insert (producer, ps.v[j], GUINT_TO_POINTER (i + 1));
      ps.len = 0;
      _cs_stmt_reads_vec (subs->pdata[i], &ps);
      for (guint j = 0; j < ps.len; j++)
        {
          GArray *rs = g_hash_table_lookup (readers, ps.v[j]);
          if (rs == NULL)
            {
              rs = g_array_new (FALSE, FALSE, sizeof (guint));
              g_hash_table_insert (readers, ps.v[j], rs);
            }
          g_array_append_val (rs, i);
        }
    }
  for (guint i = 0; i < n; i++)
    {
      g_auto(CsProxyVec) ins = CS_PROXY_VEC_INIT;
      parents[i] = g_array_new (FALSE, FALSE, sizeof (guint));
      children[i] = g_array_new (FALSE, FALSE, sizeof (guint));
      _cs_stmt_reads_vec (subs->pdata[i], &ins);
      for (guint j = 0; j < ins.len; j++)
        {
          guint at = GPOINTER_TO_UINT (g_hash_table_lookup (producer, ins.v[j]));
          gboolean dup = FALSE;
          if (at == 0)
            continue;
          for (guint k = 0; k < parents[i]->len && !dup; k++)
            dup = g_array_index (parents[i], guint, k) == at - 1;
          if (!dup)
            g_array_append_val (parents[i], (guint) { at - 1 });
        }
      ps.len = 0;
      _cs_stmt_writes_vec (subs->pdata[i], &ps);
      for (guint j = 0; j < ps.len; j++)
        {
          GArray *rs;
          gboolean is_input = FALSE;
          for (guint k = 0; k < ins.len && !is_input; k++)
            is_input = ins.v[k] == ps.v[j];
          if (is_input || (rs = g_hash_table_lookup (readers, ps.v[j])) == NULL)
            continue;
          for (guint k = 0; k < rs->len; k++)
            {
              guint ch = g_array_index (rs, guint, k);
              gboolean dup = FALSE;
              for (guint m = 0; m < children[i]->len && !dup; m++)
                dup = g_array_index (children[i], guint, m) == ch;
              if (!dup)
                g_array_append_val (children[i], ch);
            }
        }
    }
  for (guint i = 0; i < n; i++)
    if (children[i]->len == 0)
      g_array_append_val (eligible, i);
  while (eligible->len > 0)
    {
      guint x = g_array_index (eligible, guint, 0);
      g_array_remove_index (eligible, 0);
      taken[x] = 1;
      g_ptr_array_add (order, subs->pdata[x]);
      for (guint k = 0; k < parents[x]->len; k++)
        {
          guint pe = g_array_index (parents[x], guint, k);
          gboolean ok = TRUE;
          for (guint m = 0; m < children[pe]->len && ok; m++)
            ok = taken[g_array_index (children[pe], guint, m)];
          if (ok)
            g_array_append_val (eligible, pe);
        }
    }
  for (guint i = 0; i < n; i++)
    {
      g_array_unref (parents[i]);
      g_array_unref (children[i]);
    }
  /* a statement the walk cannot reach (none in a valid region) keeps its place at the end */
  for (guint i = 0; i < n; i++)
    if (!taken[i])
      g_ptr_array_insert (order, 0, subs->pdata[i]);
  g_ptr_array_set_size (subs, 0);
  for (guint i = order->len; i > 0; i--)
    g_ptr_array_add (subs, order->pdata[i - 1]);
}

/* Thunder's apply_rematerialization_for_consumer: @c recomputes what it read from @p and the
 * cut does not pass, from the cut and @p's inputs (clones of @p's subsymbols with fresh names,
 * "bw_" before a backward consumer's, "fw_" before a forward one's). */
static void
apply_consumer (Remat *r, RReg *p, RReg *c, GPtrArray *cut)
{
  CsTrace *t = r->t;
  g_autoptr(GHashTable) p_made = g_hash_table_new (g_direct_hash, g_direct_equal);
  g_autoptr(GPtrArray) p_made_list = g_ptr_array_new ();
  g_autoptr(GPtrArray) new_args = g_ptr_array_new ();
  g_autoptr(GPtrArray) remat_in = g_ptr_array_new ();
  g_autoptr(GHashTable) stop = g_hash_table_new (g_direct_hash, g_direct_equal);
  g_autoptr(GHashTable) all_args = g_hash_table_new (g_direct_hash, g_direct_equal);
  g_autoptr(GHashTable) all_outs = g_hash_table_new (g_direct_hash, g_direct_equal);
  g_autoptr(GPtrArray) subs = NULL;
  g_autofree guint8 *mark = NULL;
  g_auto(CsProxyVec) ps = CS_PROXY_VEC_INIT;
  const char *prefix = c->orig->backward ? "bw_" : "fw_";
  gboolean same;

  produced_vars (p->subs, p_made, p_made_list);
  for (guint i = 0; i < p_made_list->len; i++)
    if (ptr_in (cut, p_made_list->pdata[i]))
      push_unique (new_args, p_made_list->pdata[i]);
  for (guint i = 0; i < p->ins->len; i++)
    if (ptr_in (cut, p->ins->pdata[i]))
      push_unique (new_args, p->ins->pdata[i]);
  for (guint i = 0; i < new_args->len; i++)
    g_hash_table_add (stop, new_args->pdata[i]);
  {
    g_autoptr(GPtrArray) ext_in = g_ptr_array_new ();
    external_consumer_inputs (p, p_made, c, ext_in);
    for (guint i = 0; i < ext_in->len; i++)
      push_unique (new_args, ext_in->pdata[i]);
  }
  for (guint i = 0; i < c->ins->len; i++)
    if (!ptr_in (new_args, c->ins->pdata[i]))
      g_ptr_array_add (remat_in, c->ins->pdata[i]);
  if (remat_in->len == 0)
    return;

  mark = g_new0 (guint8, p->subs->len + 1);
  find_producer_symbols (p->subs, remat_in, stop, mark);

  /* the recomputed subsymbols (in the producer's order), then the consumer's own with their
   * reads of the recomputed values renamed, toposorted as Thunder does */
  _cs_proxy_map_clear (r->map);
  subs = g_ptr_array_new ();
  for (guint i = 0; i < p->subs->len; i++)
    {
      CsStmt *s = p->subs->pdata[i], *cl;
      if (!mark[i])
        continue;
      ps.len = 0;
      _cs_stmt_writes_vec (s, &ps);
      for (guint j = 0; j < ps.len; j++)
        {
          CsProxy *o = ps.v[j], *n;
          const char *name = _cs_arena_concat (t->arena, prefix, o->name, "");
          guint32 hash = cs_name_hash (name);
          if (_cs_proxy_map_lookup (r->map, o) != NULL)
            continue;
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
          _cs_proxy_map_insert (r->map, o, n);
        }
      cl = remat_clone (t, s, r->map);
      cl->origin = s->origin;
      /* the recomputed statement keeps its BACKWARD tag (Thunder copies the producer's
       * subsymbols as they are): nvFuser's CSE, which keys on the tag, then keeps it apart
       * from an equal statement of the backward's own */
      cl->backward = s->backward;
      cl->why = "rematerialized: recomputed in the consumer region instead of passed";
      g_ptr_array_add (subs, cl);
    }
  for (guint i = 0; i < c->subs->len; i++)
    g_ptr_array_add (subs, _cs_stmt_remap_reads (t, c->subs->pdata[i], r->map));
  toposort_bottom_up (subs);

  /* inputs: the cut, the external inputs, then the producer's inputs the recomputation reads */
  for (guint i = 0; i < subs->len; i++)
    {
      ps.len = 0;
      _cs_stmt_reads_vec (subs->pdata[i], &ps);
      for (guint j = 0; j < ps.len; j++)
        g_hash_table_add (all_args, ps.v[j]);
      ps.len = 0;
      _cs_stmt_writes_vec (subs->pdata[i], &ps);
      for (guint j = 0; j < ps.len; j++)
        g_hash_table_add (all_outs, ps.v[j]);
    }
  for (guint i = 0; i < p->ins->len; i++)
    {
      CsProxy *x = p->ins->pdata[i];
      if (g_hash_table_contains (all_args, x) && !g_hash_table_contains (all_outs, x))
        push_unique (new_args, x);
    }
  same = new_args->len == c->ins->len;
  for (guint i = 0; i < new_args->len && same; i++)
    same = ptr_in (c->ins, new_args->pdata[i]);
  if (!same)
    c->modified = TRUE;
  g_ptr_array_set_size (c->ins, 0);
  g_ptr_array_extend (c->ins, new_args, NULL, NULL);
  g_ptr_array_set_size (c->subs, 0);
  g_ptr_array_extend (c->subs, subs, NULL, NULL);
  c->subs_changed = TRUE;
  _cs_proxy_map_clear (r->map);
}

/* Thunder's apply_rematerialization_for_producer: @p outputs what others read (@ext, with the
 * earlier cuts of this producer) and the cut, less its own inputs, in production order. */
static void
apply_producer (RReg *p, GPtrArray *ext, GPtrArray *cut)
{
  g_autoptr(GHashTable) p_made = g_hash_table_new (g_direct_hash, g_direct_equal);
  g_autoptr(GPtrArray) made = g_ptr_array_new ();
  g_autoptr(GPtrArray) outs = g_ptr_array_new ();
  gboolean same;

  produced_vars (p->subs, p_made, made);
  for (guint i = 0; i < made->len; i++)
    {
      CsProxy *x = made->pdata[i];
      if ((ptr_in (ext, x) || ptr_in (cut, x)) && !ptr_in (p->ins, x))
        g_ptr_array_add (outs, x);
    }
  same = outs->len == p->outs->len;
  for (guint i = 0; i < outs->len && same; i++)
    same = ptr_in (p->outs, outs->pdata[i]);
  if (!same)
    p->modified = TRUE;
  g_ptr_array_set_size (p->outs, 0);
  g_ptr_array_extend (p->outs, outs, NULL, NULL);
}

static void
value_vec_to_array (CsStmt *s, gboolean reads, GPtrArray *out)
{
  g_auto(CsProxyVec) ps = CS_PROXY_VEC_INIT;
  if (reads)
    _cs_stmt_reads_vec (s, &ps);
  else
    _cs_stmt_writes_vec (s, &ps);
  for (guint i = 0; i < ps.len; i++)
    push_unique (out, ps.v[i]);
}

/* Thunder's rematerialize over the fusion regions of @t: pairs (producer, consumer) of regions
 * where the consumer reads an output of the producer (the readers as the trace stood before the
 * pass), sorted by producer then consumer; each pair sees the regions as the earlier pairs left
 * them.  Regions are refreshed after a change. */
void
_cs_fuse_rematerialize (CsTrace *t, const CsPolicy *policy)
{
  Remat r = { 0 };
  g_autoptr(GArray) pairs = g_array_new (FALSE, FALSE, sizeof (guint) * 2);
  g_auto(CsProxyVec) ps = CS_PROXY_VEC_INIT;
  gboolean changed = FALSE;
  guint32 *count;

  r.t = t;
  r.policy = policy;
  r.reg_of_top = g_new (gint, t->n_stmts + 1);
  for (guint i = 0; i < t->n_stmts; i++)
    {
      r.reg_of_top[i] = -1;
      if (_cs_stmt_is_region (t->stmts[i]) && t->stmts[i]->n_subs > 0)
        r.n_regs++;
    }
  if (r.n_regs < 2)
    {
      g_free (r.reg_of_top);
      return;
    }
  r.regs = g_new0 (RReg, r.n_regs);
  for (guint i = 0, k = 0; i < t->n_stmts; i++)
    {
      CsStmt *s = t->stmts[i];
      RReg *g;
      if (!_cs_stmt_is_region (s) || s->n_subs == 0)
        continue;
      g = &r.regs[k];
      g->orig = s;
      g->top = i;
      g->nvfusion = _cs_stmt_is_nvfusion (s);
      g->ins = g_ptr_array_new ();
      g->outs = g_ptr_array_new ();
      g->subs = g_ptr_array_new ();
      g->cuts = g_ptr_array_new ();
      g->absorbed = g_ptr_array_new ();
      value_vec_to_array (s, TRUE, g->ins);
      value_vec_to_array (s, FALSE, g->outs);
      for (guint j = 0; j < s->n_subs; j++)
        g_ptr_array_add (g->subs, s->subs[j]);
      r.reg_of_top[i] = (gint) k++;
    }

  /* static readers of every proxy (utils.consumers of the trace before the pass) */
  r.n_ids = t->next_proxy_id + 1;
  count = g_new0 (guint32, r.n_ids + 1);
  for (guint pass = 0; pass < 2; pass++)
    {
      if (pass == 1)
        {
          guint32 acc = 0;
          r.rd_start = g_new (guint32, r.n_ids + 1);
          for (guint32 id = 0; id < r.n_ids; id++)
            {
              r.rd_start[id] = acc;
              acc += count[id];
              count[id] = 0;
            }
          r.rd_start[r.n_ids] = acc;
          r.rd = g_new (guint, acc + 1);
        }
      for (guint i = 0; i < t->n_stmts; i++)
        {
          CsStmt *s = t->stmts[i];
          if (s->kind == CS_STMT_COMMENT || s->kind == CS_STMT_BLANK || s->kind == CS_STMT_DEL)
            continue;
          ps.len = 0;
          _cs_stmt_reads_vec (s, &ps);
          for (guint j = 0; j < ps.len; j++)
            {
              guint32 id = ps.v[j]->id;
              if (id >= r.n_ids)
                continue;
              if (pass == 0)
                count[id]++;
              else
                r.rd[r.rd_start[id] + count[id]++] = i;
            }
        }
    }
  g_free (count);

  /* pairs (find_fusion_producer_consumer_pairs), sorted by producer, then consumer */
  for (guint k = 0; k < r.n_regs; k++)
    {
      RReg *g = &r.regs[k];
      g_autoptr(GArray) cons = g_array_new (FALSE, FALSE, sizeof (guint));
      for (guint i = 0; i < g->outs->len; i++)
        {
          CsProxy *o = g->outs->pdata[i];
          if (o->id >= r.n_ids)
            continue;
          for (guint m = r.rd_start[o->id]; m < r.rd_start[o->id + 1]; m++)
            {
              gint c = r.reg_of_top[r.rd[m]];
              gboolean dup = FALSE;
              if (c < 0)
                continue;
              for (guint q = 0; q < cons->len && !dup; q++)
                dup = g_array_index (cons, guint, q) == (guint) c;
              if (!dup)
                g_array_append_val (cons, c);
            }
        }
      for (guint a = 1; a < cons->len; a++)
        for (guint b = a; b > 0 && g_array_index (cons, guint, b - 1) > g_array_index (cons, guint, b); b--)
          {
            guint tmp = g_array_index (cons, guint, b);
            g_array_index (cons, guint, b) = g_array_index (cons, guint, b - 1);
            g_array_index (cons, guint, b - 1) = tmp;
          }
      for (guint q = 0; q < cons->len; q++)
        {
          guint pr[2] = { k, g_array_index (cons, guint, q) };
          g_array_append_vals (pairs, pr, 1);
        }
    }

  r.map = _cs_proxy_map_new ();
  fg_init (&r.g);
  r.users = g_hash_table_new (g_direct_hash, g_direct_equal);
  r.user_lists = g_ptr_array_new_with_free_func ((GDestroyNotify) g_ptr_array_unref);
  for (guint i = 0; i < pairs->len; i++)
    {
      guint *pr = &g_array_index (pairs, guint, 2 * i);
      RReg *p = &r.regs[pr[0]], *c = &r.regs[pr[1]];
      g_autoptr(GPtrArray) ext = g_ptr_array_new ();
      g_autoptr(GPtrArray) cut = g_ptr_array_new ();
      g_autofree guint *next = NULL;
      guint n_next = 0;

      /* the later pairs of this producer: a few, not the rest of the list */
      while (i + 1 + n_next < pairs->len
             && g_array_index (pairs, guint, 2 * (i + 1 + n_next)) == pr[0])
        n_next++;
      next = g_new (guint, n_next + 1);
      for (guint j = 0; j < n_next; j++)
        next[j] = g_array_index (pairs, guint, 2 * (i + 1 + j) + 1);
      external_producer_outputs (&r, p, c, pr[1], next, n_next, ext);
      find_cut (&r, ext, p, c, cut);
      if (cut->len == 0)
        continue;
      g_ptr_array_extend (ext, p->cuts, NULL, NULL);
      /* Thunder updates the consumer from the producer as it was before this pair */
      apply_consumer (&r, p, c, cut);
      apply_producer (p, ext, cut);
      if (c->subs_changed)
        push_unique (c->absorbed, p);
      for (guint j = 0; j < cut->len; j++)
        push_unique (p->cuts, cut->pdata[j]);
    }

  for (guint k = 0; k < r.n_regs; k++)
    {
      RReg *g = &r.regs[k];
      if (g->subs_changed)
        {
          CsStmt *s = cs_trace_own_stmt (t, g->orig);
          cs_stmt_set_subs (t, s, (CsStmt **) g->subs->pdata, g->subs->len);
          /* a producer left without outputs goes with the refresh: its boundary's reason
           * says where its statements went */
          for (guint j = 0; j < g->absorbed->len; j++)
            {
              RReg *p = g->absorbed->pdata[j];
              if (p->outs->len == 0)
                s->why = _cs_arena_concat (t->arena, s->why ? s->why : "", s->why ? "; " : "",
                                           cs_arena_printf (t->arena, "%s recomputed here by "
                                                            "rematerialization (that region "
                                                            "is gone)", p->orig->callee));
            }
          t->stmts[g->top] = s;
          changed = TRUE;
        }
      if (g->modified || g->subs_changed)
        {
          /* the outputs as Thunder's pass leaves them (a consumer keeps its order, a producer
           * lists its own in production order): the refresh keeps that order for those that
           * stay */
          CsStmt *s = cs_trace_own_stmt (t, t->stmts[g->top]);
          CsValue **items = CS_ARENA_NEW_N (t->arena, CsValue *, MAX (g->outs->len, 1));
          for (guint j = 0; j < g->outs->len; j++)
            items[j] = cs_value_new_proxy (t->arena, g->outs->pdata[j]);
          s->out = cs_value_new_seq (t->arena, CS_VALUE_LIST, items, g->outs->len);
          s->region_fresh = 0;
          t->stmts[g->top] = s;
          changed = TRUE;
        }
    }
  /* freed after the loop above: a region's absorbed list names regions before and after it */
  for (guint k = 0; k < r.n_regs; k++)
    {
      RReg *g = &r.regs[k];
      g_ptr_array_unref (g->ins);
      g_ptr_array_unref (g->outs);
      g_ptr_array_unref (g->subs);
      g_ptr_array_unref (g->cuts);
      g_ptr_array_unref (g->absorbed);
    }
  _cs_proxy_map_free (r.map);
  fg_clear (&r.g);
  g_hash_table_unref (r.users);
  g_ptr_array_unref (r.user_lists);
  g_free (r.regs);
  g_free (r.reg_of_top);
  g_free (r.rd_start);
  g_free (r.rd);
  if (changed)
    _cs_regions_refresh (t, FALSE);
}
