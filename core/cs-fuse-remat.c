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
  cs_stmt_index (t, c);
  return c;
}

/* ------------------------------------------------------------------------------------------ */
/* Pointer lists                                                                               */

/* The pass's lists of proxies, statements and regions: GPtrArray's fields (pdata, len) with an
 * inline append, for the millions of appends of a pass over every pair of regions.  Made by
 * ptr_vec_new(), freed by ptr_vec_free(). */
typedef struct
{
  gpointer *pdata;   /* elements 0 .. len-1 */
  guint     len;     /* number of elements */
  guint     cap;     /* slots allocated in pdata */
} PtrVec;

static PtrVec *
ptr_vec_new (void)
{
  return g_new0 (PtrVec, 1);
}

static void
ptr_vec_free (PtrVec *a)
{
  g_free (a->pdata);
  g_free (a);
}

/* Makes room for @n elements of @a (at least doubling). */
G_NO_INLINE static void
ptr_vec_reserve (PtrVec *a, guint n)
{
  if (n <= a->cap)
    return;
  a->cap = MAX (n, MAX (16, 2 * a->cap));
  a->pdata = g_renew (gpointer, a->pdata, a->cap);
}

static inline void
ptr_vec_add (PtrVec *a, gpointer p)
{
  if (G_UNLIKELY (a->len == a->cap))
    ptr_vec_reserve (a, a->len + 1);
  a->pdata[a->len++] = p;
}

/* Sets the length of @a to @n; new elements are NULL. */
static void
ptr_vec_set_size (PtrVec *a, guint n)
{
  ptr_vec_reserve (a, n);
  for (guint i = a->len; i < n; i++)
    a->pdata[i] = NULL;
  a->len = n;
}

/* Appends the elements of @src to @a. */
static void
ptr_vec_extend (PtrVec *a, const PtrVec *src)
{
  ptr_vec_reserve (a, a->len + src->len);
  if (src->len > 0)
    memcpy (a->pdata + a->len, src->pdata, src->len * sizeof (gpointer));
  a->len += src->len;
}

/* ------------------------------------------------------------------------------------------ */
/* The regions as rematerialization edits them                                                 */

typedef struct _IdSlot IdSlot;

/* One fusion region while the pass runs: Thunder replaces the region's BoundSymbol by an
 * updated one after every pair (new_bsyms); these are the fields it reads. */
typedef struct
{
  CsStmt    *orig;       /* the region call before the pass */
  guint      top;        /* its index in the trace's statements */
  PtrVec *ins;        /* CsProxy *: current inputs (bsym.args) */
  PtrVec *outs;       /* CsProxy *: current outputs (bsym.output) */
  PtrVec *subs;       /* CsStmt *: current subsymbols */
  PtrVec *cuts;       /* CsProxy *: computed_cuts_for_producers, when it is a producer */
  PtrVec *absorbed;   /* RReg *: producers whose statements it now recomputes */
  gboolean   modified;   /* inputs or outputs differ from orig's: Thunder's BoundSymbol
                            equality (sym, args, output) no longer holds, so static consumer
                            lists that name orig do not name the current region */
  gboolean   subs_changed; /* subsymbols differ from orig's */
  gboolean   nvfusion;   /* an nvFusion region (else TorchCompile or another fusion) */
  gboolean   rw_ok;      /* rw and rw_at describe the current subs */
  CsProxyVec rw;         /* each subsymbol's reads, then its writes, concatenated */
  guint     *rw_at;      /* 2 * subs->len + 1 offsets into rw: subsymbol i reads
                            rw[rw_at[2i] .. rw_at[2i+1]) and writes rw[.. rw_at[2i+2]) */
  guint8    *kind;       /* subs->len entries: each subsymbol's CsStmtKind (with rw) */
  gboolean   rws_ok;     /* rws holds the slots of rw (rreg_rw_slots()) */
  IdSlot   **rws;        /* rw.len entries: the slot of each proxy of rw (slot_of()), so the
                            marks of a subsymbol's reads and writes need no proxy's id */
  guint      rws_cap;    /* entries allocated in rws */
  gboolean   must_ok;    /* must holds must_output() of the current subs */
  guint8    *must;       /* subs->len entries: must_output() of each subsymbol */
  guint      must_cap;   /* entries allocated in must */
} RReg;

/* Derives each subsymbol's reads and writes of @g once (after a change of its subsymbols:
 * rw_ok cleared). */
static void
rreg_rw (RReg *g)
{
  guint n = g->subs->len;

  if (g->rw_ok)
    return;
  if (g->rw.cap == 0)
    _cs_proxy_vec_grow (&g->rw);
  g->rw.len = 0;
  g->rw_at = g_renew (guint, g->rw_at, 2 * n + 1);
  g->kind = g_renew (guint8, g->kind, MAX (n, 1));
  for (guint i = 0; i < n; i++)
    {
      g->kind[i] = ((const CsStmt *) g->subs->pdata[i])->kind;
      g->rw_at[2 * i] = g->rw.len;
      _cs_stmt_reads_vec (g->subs->pdata[i], &g->rw);
      g->rw_at[2 * i + 1] = g->rw.len;
      _cs_stmt_writes_vec (g->subs->pdata[i], &g->rw);
    }
  g->rw_at[2 * n] = g->rw.len;
  g->rw_ok = TRUE;
  g->rws_ok = FALSE;
  g->must_ok = FALSE;
}

/* must_output() of each subsymbol of @g, derived once per change of its subsymbols. */
static const guint8 *
rreg_must (RReg *g)
{
  guint n = g->subs->len;

  if (g->must_ok)
    return g->must;
  if (n > g->must_cap)
    {
      g->must_cap = MAX (n, 2 * g->must_cap);
      g->must = g_renew (guint8, g->must, g->must_cap);
    }
  for (guint i = 0; i < n; i++)
    g->must[i] = must_output (g->subs->pdata[i]) ? 1 : 0;
  g->must_ok = TRUE;
  return g->must;
}

/* The proxies subsymbol @i of @g reads (as _cs_stmt_reads_vec lists them), @n of them;
 * rreg_rw() first. */
static inline CsProxy **
sub_reads (const RReg *g, guint i, guint *n)
{
  *n = g->rw_at[2 * i + 1] - g->rw_at[2 * i];
  return g->rw.v + g->rw_at[2 * i];
}

/* The proxies subsymbol @i of @g writes (as _cs_stmt_writes_vec lists them); rreg_rw() first. */
static inline CsProxy **
sub_writes (const RReg *g, guint i, guint *n)
{
  *n = g->rw_at[2 * i + 2] - g->rw_at[2 * i + 1];
  return g->rw.v + g->rw_at[2 * i + 1];
}

/* The slots of sub_reads (@g, @i); rreg_rw_slots() first. */
static inline IdSlot **
sub_read_slots (const RReg *g, guint i)
{
  return g->rws + g->rw_at[2 * i];
}

/* The slots of sub_writes (@g, @i); rreg_rw_slots() first. */
static inline IdSlot **
sub_write_slots (const RReg *g, guint i)
{
  return g->rws + g->rw_at[2 * i + 1];
}

static gboolean
ptr_in (PtrVec *a, gconstpointer p)
{
  for (guint i = 0; i < a->len; i++)
    if (a->pdata[i] == p)
      return TRUE;
  return FALSE;
}

static gint
cmp_guint (gconstpointer a, gconstpointer b)
{
  guint x = *(const guint *) a, y = *(const guint *) b;
  return x < y ? -1 : x > y;
}

static void
push_unique (PtrVec *a, gpointer p)
{
  if (!ptr_in (a, p))
    ptr_vec_add (a, p);
}

/* ------------------------------------------------------------------------------------------ */
/* Minimum cut                                                                                 */

/* An edge of the flow graph; edges come in pairs, 2k the edge of Thunder's graph and 2k + 1 its
 * residual pair (capacity 0), so the pair of edge k is k ^ 1. */
typedef struct
{
  guint  to;    /* head node */
  guint  next;  /* next edge out of the same tail node, in insertion order (FG_NONE: last) */
  double cap;   /* capacity (INFINITY for Thunder's float("inf")) */
  double flow;  /* current flow; the paired edge holds -flow */
} FEdge;

typedef struct
{
  FEdge      *edges;   /* every edge, n_edges of them (cap_edges allocated) */
  guint       n_edges; /* edges in use */
  guint       cap_edges; /* entries allocated */
  guint      *first;   /* per node: its first outgoing edge (FG_NONE: none) */
  guint      *last;    /* per node: its last outgoing edge */
  guint       n;       /* nodes: 0 source, 1 sink, then 2 per value (_in, _out) */
  guint       cap_n;   /* entries of first and last */
  PtrVec  *vars;    /* value index -> CsProxy * (a value's index lives in its IdSlot) */
  guint      *scratch; /* 4 * scratch_n: fg_max_flow's and find_cut's per-node arrays */
  guint       scratch_n; /* nodes scratch has room for */
} FGraph;

#define FG_SOURCE 0u
#define FG_SINK   1u
#define FG_NONE   G_MAXUINT

static void
fg_init (FGraph *g)
{
  memset (g, 0, sizeof *g);
  g->vars = ptr_vec_new ();
  g->cap_n = 64;
  g->first = g_new (guint, g->cap_n);
  g->last = g_new (guint, g->cap_n);
  g->n = 2;
  g->first[FG_SOURCE] = g->first[FG_SINK] = FG_NONE;
}

static void
fg_clear (FGraph *g)
{
  g_free (g->edges);
  g_free (g->first);
  g_free (g->last);
  g_free (g->scratch);
  ptr_vec_free (g->vars);
}

/* Empties @g for the next pair, keeping its storage. */
static void
fg_reset (FGraph *g)
{
  g->n_edges = 0;
  g->vars->len = 0;
  g->n = 2;
  g->first[FG_SOURCE] = g->first[FG_SINK] = FG_NONE;
}

/* Adds two nodes (a value's _in and _out) with no edges; returns the first. */
static guint
fg_add_nodes (FGraph *g)
{
  guint at = g->n;

  if (g->n + 2 > g->cap_n)
    {
      g->cap_n *= 2;
      g->first = g_renew (guint, g->first, g->cap_n);
      g->last = g_renew (guint, g->last, g->cap_n);
    }
  g->first[at] = g->first[at + 1] = FG_NONE;
  g->n += 2;
  return at;
}

/* Appends edge @k to @u's list of outgoing edges. */
static inline void
fg_link (FGraph *g, guint u, guint k)
{
  g->edges[k].next = FG_NONE;
  if (g->first[u] == FG_NONE)
    g->first[u] = k;
  else
    g->edges[g->last[u]].next = k;
  g->last[u] = k;
}

/* Adds edge @u -> @v, which @g does not have yet (u != v). */
static void
fg_edge_new (FGraph *g, guint u, guint v, double cap)
{
  guint k;

  if (G_UNLIKELY (g->n_edges + 2 > g->cap_edges))
    {
      g->cap_edges = MAX (256, 2 * g->cap_edges);
      g->edges = g_renew (FEdge, g->edges, g->cap_edges);
    }
  k = g->n_edges;
  g->n_edges += 2;
  g->edges[k].to = v;
  g->edges[k].cap = cap;
  g->edges[k].flow = 0;
  g->edges[k + 1].to = u;
  g->edges[k + 1].cap = 0;
  g->edges[k + 1].flow = 0;
  fg_link (g, u, k);
  fg_link (g, v, k + 1);
}

/* Adds edge @u -> @v (networkx add_edge: a second add of the same edge sets its capacity);
 * self loops carry no flow and are left out.  DiGraph edges are unique: an existing one is
 * found among @u's edges (a node has a few: the outputs of its value's readers). */
static void
fg_edge (FGraph *g, guint u, guint v, double cap)
{
  if (u == v)
    return;
  for (guint k = g->first[u]; k != FG_NONE; k = g->edges[k].next)
    if (!(k & 1) && g->edges[k].to == v)
      {
        g->edges[k].cap = cap;
        return;
      }
  fg_edge_new (g, u, v, cap);
}

/* Makes g->scratch hold 4 arrays of g->n entries. */
static void
fg_scratch (FGraph *g)
{
  if (g->scratch_n < g->n)
    {
      g->scratch_n = MAX (g->n, 2 * g->scratch_n);
      g->scratch = g_renew (guint, g->scratch, 4 * (gsize) g->scratch_n);
    }
}

/* Maximum flow from source to sink (Edmonds-Karp); FALSE when it is unbounded (a path of
 * infinite capacities: Thunder's minimum_cut raises). */
static gboolean
fg_max_flow (FGraph *g)
{
  guint *prev_node, *prev_edge, *queue;

  fg_scratch (g);
  prev_node = g->scratch;
  prev_edge = g->scratch + g->n;
  queue = g->scratch + 2 * g->n;

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
          for (guint k = g->first[u]; k != FG_NONE; k = g->edges[k].next)
            {
              FEdge *e = &g->edges[k];
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
          FEdge *e = &g->edges[prev_edge[v]];
          push = MIN (push, e->cap - e->flow);
        }
      if (isinf (push))
        return FALSE;
      for (guint v = FG_SINK; v != FG_SOURCE; v = prev_node[v])
        {
          g->edges[prev_edge[v]].flow += push;
          g->edges[prev_edge[v] ^ 1].flow -= push;
        }
    }
}

/* ------------------------------------------------------------------------------------------ */
/* The pass                                                                                    */

/* Per-proxy marks of the pass, one slot per CsProxy.id (ids are 1-based): an array made once
 * for the ids below t->next_proxy_id + 1 as the pass starts, and chunks of ID_CHUNK, made on
 * first use, for the proxies the pass creates: the sets and tables find_cut and the consumer's
 * update build for each pair.
 * A field is "set" when it equals the epoch (Remat.epoch) of the set it belongs to; epochs only
 * grow, so no slot is cleared between sets.  A proxy whose id is 0, or whose slot another proxy
 * holds, gets a slot of its own in Remat.other. */
struct _IdSlot
{
  CsProxy *who;        /* the proxy this slot belongs to (NULL: not yet claimed) */
  guint32  made;       /* == epoch: written by the producer's subsymbols */
  guint32  req;        /* == epoch: a required consumer value (find_cut), or read by the
                          consumer's new subsymbols (apply_consumer) */
  guint32  stop;       /* == epoch: find_producer_symbols stops at it */
  guint32  seen;       /* == epoch: queued by find_producer_symbols */
  guint32  prod;       /* == epoch: prod_at is valid */
  guint32  prod_at;    /* 1 + index of the first subsymbol writing it */
  guint32  user;       /* == epoch: user_first / user_last are valid */
  guint32  user_first; /* first entry of its readers' list (Remat.ue_*) */
  guint32  user_last;  /* last entry of that list */
  guint32  var;        /* == epoch: var_idx is valid, or written by the consumer's new
                          subsymbols (apply_consumer) */
  guint32  var_idx;    /* 1 + its value index in the flow graph */
  guint32  flag;       /* == epoch: an input of the producer (find_cut) */
  guint32  pout;       /* == epoch: an output of the producer (find_cut) */
  guint32  ext;        /* == epoch: listed in find_cut's external consumer inputs */
  guint32  loc;        /* == epoch: an output of the producer whose local readers are counted
                          (external_producer_outputs) */
  guint32  loc_n;      /* input lists of the pair's regions that name it (loc valid) */
  guint32  loc_list;   /* 1 + index of the last list counted, so each list counts once */
  guint32  in_c;       /* == epoch: an input of the consumer (external_producer_outputs) */
  guint32  mem;        /* == epoch: a member of a list marked by mark_list() */
  guint32  wr;         /* == epoch: wr_at is valid (find_cut) */
  guint32  wr_at;      /* 2 * index of the subsymbol writing it + (1 in the consumer) */
  guint32  live;       /* == epoch: may reach find_cut's sink (see sink_ancestors()) */
  guint32  arg;        /* == epoch: listed in the new inputs being built (apply_consumer), or
                          an input of the producer (apply_producer) */
  guint32  edges;      /* == epoch: add_var_edges added its edges to find_cut's graph */
  guint32  src;        /* == epoch: find_cut's graph has the edge source -> its `_in` */
  guint32  canon;      /* == epoch: canon_idx is valid (cut_key) */
  guint32  canon_idx;  /* its number in the pair's canonical form: the order of first
                          appearance (cut_key) */
  guint32  cut_of;     /* 1 + index of the producer region whose cuts list it (the pairs of
                          one producer are consecutive, so only the current producer's
                          mark is read); kept when the epochs start again */
};

#define ID_CHUNK_BITS 12u
#define ID_CHUNK      (1u << ID_CHUNK_BITS)   /* slots per chunk of the store */

/* A growable array of indices. */
typedef struct
{
  guint *v;          /* the indices */
  guint  len, cap;   /* entries in use / allocated */
} UVec;

static void
uvec_reserve (UVec *a, guint n)
{
  if (n > a->cap)
    {
      a->cap = MAX (n, 2 * a->cap);
      a->v = g_renew (guint, a->v, a->cap);
    }
}

static inline void
uvec_push (UVec *a, guint x)
{
  if (G_UNLIKELY (a->len == a->cap))
    uvec_reserve (a, MAX (64, a->len + 1));
  a->v[a->len++] = x;
}

/* toposort_bottom_up's scratch, kept for the pass. */
typedef struct
{
  UVec       at;     /* per-subsymbol arrays: parents' and children's offsets, taken */
  UVec       par;    /* parents, by subsymbol */
  UVec       ch;     /* children, by subsymbol */
  UVec       elig;   /* the eligible subsymbols, in the order they became so */
  UVec       from;   /* the new order: subsymbol indices */
  CsProxyVec rw;     /* the reordered reads and writes (swapped with the region's) */
  PtrVec *subs;   /* the reordered subsymbols (swapped with the region's) */
} Topo;

typedef struct
{
  CsTrace        *t;          /* the trace the pass rewrites */
  const CsPolicy *policy;     /* what is fusible (cs_fuse_stmt_is_fusible) */
  RReg           *regs;       /* fusion regions in trace order */
  guint           n_regs;     /* entries of regs */
  gint           *reg_of_top; /* top-level index -> region index, or -1 */
  guint32         n_ids;      /* proxy ids below it have static reader lists */
  guint32        *rd_start;   /* CSR: static readers (top-level indices) of each proxy id */
  guint          *rd;         /* CSR: the reader indices rd_start points into */
  CsProxyMap     *map;        /* scratch: recomputed values -> their fresh proxies */
  FGraph          g;          /* scratch: find_cut's graph, emptied for each pair */
  IdSlot         *base;       /* slots of the ids below n_base (zeroed), never moved */
  guint32         n_base;     /* entries of base: t->next_proxy_id + 1 as the pass starts */
  IdSlot        **chunks;     /* slots of the ids from n_base on: chunk (id - n_base) >>
                                 ID_CHUNK_BITS, made on first use (zeroed), never moved */
  guint32         n_chunks;   /* entries of chunks */
  GHashTable     *other;      /* CsProxy * -> IdSlot * (g_free'd) for proxies without a slot */
  guint32         epoch;      /* last epoch handed out */
  guint32        *ue_next;    /* readers' lists: entry -> next entry of the same list */
  guint32        *ue_sub;     /* entry -> 2 * subsymbol index + (1 for the consumer's) */
  guint32        *reg_mark;   /* per region: == epoch: a consumer of a later pair of the
                                 producer, unmodified (external_producer_outputs) */
  guint           ue_len, ue_cap; /* entries in use / allocated */
  CsProxyVec      vec_a;      /* scratch lists */
  CsProxyVec      vec_b;      /* scratch queue / stack (find_producer_symbols, sink_ancestors) */
  Topo            topo;       /* scratch of toposort_bottom_up */
  /* scratch lists of one pair, emptied where they are used */
  PtrVec      *ext;        /* the pair's external producer outputs, then the earlier cuts */
  PtrVec      *cut;        /* the pair's cut */
  PtrVec      *lists;      /* PtrVec *: external_producer_outputs' input lists */
  PtrVec      *req_c;      /* find_cut's required consumer values */
  PtrVec      *ext_in;     /* external consumer inputs (find_cut, then apply_consumer) */
  PtrVec      *made;       /* the producer's outputs (apply_consumer, then apply_producer) */
  PtrVec      *new_args;   /* apply_consumer's new inputs */
  PtrVec      *remat_in;   /* apply_consumer's values to recompute */
  PtrVec      *new_subs;   /* apply_consumer's new subsymbols */
  PtrVec      *new_outs;   /* apply_producer's new outputs */
  UVec            next;       /* consumers of the producer's later pairs */
  guint8         *sub_mark;   /* per-subsymbol marks (find_producer_symbols) */
  guint           sub_mark_cap; /* entries of sub_mark */
  GHashTable     *cuts;       /* CutMemo * (owned) -> itself: find_cut's answer per canonical
                                 form of a pair */
  UVec            key;        /* scratch: the current pair's canonical form (cut_key) */
  PtrVec         *canon;      /* scratch: canonical number -> CsProxy * of the current pair */
  gboolean        check;      /* CASTSCOPE_CHECK_IO=1: every remembered cut is recomputed and
                                 compared */
} Remat;

/* A pair's canonical form and the cut find_cut found for it, as canonical numbers. */
typedef struct
{
  guint32  hash;     /* of key */
  guint    n_key;    /* entries of key */
  guint    n_cut;    /* entries of cut */
  guint   *key;      /* the canonical form (cut_key) */
  guint   *cut;      /* the cut's values, in find_cut's order */
} CutMemo;

static guint
cut_memo_hash (gconstpointer a)
{
  return ((const CutMemo *) a)->hash;
}

static gboolean
cut_memo_equal (gconstpointer a, gconstpointer b)
{
  const CutMemo *x = a, *y = b;
  return x->n_key == y->n_key && memcmp (x->key, y->key, x->n_key * sizeof (guint)) == 0;
}

static void
cut_memo_free (gpointer a)
{
  CutMemo *m = a;
  g_free (m->key);
  g_free (m->cut);
  g_free (m);
}

/* Remat.sub_mark with @n entries, all 0. */
static guint8 *
sub_marks (Remat *r, guint n)
{
  if (n > r->sub_mark_cap)
    {
      r->sub_mark_cap = MAX (n, 2 * r->sub_mark_cap);
      g_free (r->sub_mark);
      r->sub_mark = g_new (guint8, r->sub_mark_cap);
    }
  memset (r->sub_mark, 0, n);
  return r->sub_mark;
}

/* Clears the epoch marks of @s, keeping its proxy and its cut_of mark. */
static void
slot_restart (IdSlot *s)
{
  CsProxy *who = s->who;
  guint32 cut_of = s->cut_of;

  memset (s, 0, sizeof (IdSlot));
  s->who = who;
  s->cut_of = cut_of;
}

/* A fresh epoch: every set marked with an older one is empty. */
static guint32
store_epoch (Remat *r)
{
  if (G_UNLIKELY (r->epoch == G_MAXUINT32))
    {
      GHashTableIter it;
      gpointer v;
      for (guint32 i = 0; i < r->n_base; i++)
        slot_restart (&r->base[i]);
      for (guint32 c = 0; c < r->n_chunks; c++)
        for (guint32 i = 0; r->chunks[c] != NULL && i < ID_CHUNK; i++)
          slot_restart (&r->chunks[c][i]);
      g_hash_table_iter_init (&it, r->other);
      while (g_hash_table_iter_next (&it, NULL, &v))
        slot_restart (v);
      if (r->reg_mark != NULL)
        memset (r->reg_mark, 0, r->n_regs * sizeof (guint32));
      r->epoch = 0;
    }
  return ++r->epoch;
}

static IdSlot *
slot_other (Remat *r, CsProxy *p)
{
  IdSlot *s = g_hash_table_lookup (r->other, p);

  if (s == NULL)
    {
      s = g_new0 (IdSlot, 1);
      s->who = p;
      g_hash_table_insert (r->other, p, s);
    }
  return s;
}

/* The slot of @p when slot_of's fast path misses: its base slot claimed on first use, the
 * slot of an id from n_base on in its chunk (made, zeroed, on first use), else a slot of its
 * own in Remat.other. */
G_NO_INLINE static IdSlot *
slot_slow (Remat *r, CsProxy *p)
{
  guint32 id = p->id;
  IdSlot *s = NULL;

  if (id != 0 && id < r->n_base)
    s = &r->base[id];
  else if (id != 0)
    {
      guint32 k = id - r->n_base, c = k >> ID_CHUNK_BITS;
      if (c >= r->n_chunks)
        {
          guint32 n = MAX (c + 1, 2 * r->n_chunks);
          r->chunks = g_renew (IdSlot *, r->chunks, n);
          memset (r->chunks + r->n_chunks, 0, (n - r->n_chunks) * sizeof (IdSlot *));
          r->n_chunks = n;
        }
      if (r->chunks[c] == NULL)
        r->chunks[c] = g_new0 (IdSlot, ID_CHUNK);
      s = &r->chunks[c][k & (ID_CHUNK - 1)];
    }
  if (s != NULL && s->who == p)
    return s;
  if (s != NULL && s->who == NULL)
    {
      s->who = p;
      return s;
    }
  return slot_other (r, p);
}

/* The slot of @p (stable until the pass ends). */
static inline IdSlot *
slot_of (Remat *r, CsProxy *p)
{
  guint32 id = p->id;

  IdSlot *s;

  if (G_LIKELY (id < r->n_base))
    s = &r->base[id];
  else
    {
      guint32 k = id - r->n_base, c = k >> ID_CHUNK_BITS;
      if (c >= r->n_chunks || r->chunks[c] == NULL)
        return slot_slow (r, p);
      s = &r->chunks[c][k & (ID_CHUNK - 1)];
    }
  if (G_LIKELY (s->who == p))
    return s;
  return slot_slow (r, p);
}

/* rreg_rw (@g), and the slots of its proxies in g->rws. */
static void
rreg_rw_slots (Remat *r, RReg *g)
{
  rreg_rw (g);
  if (g->rws_ok)
    return;
  if (g->rw.len > g->rws_cap)
    {
      g->rws_cap = MAX (g->rw.len, 2 * g->rws_cap);
      g->rws = g_renew (IdSlot *, g->rws, g->rws_cap);
    }
  for (guint k = 0; k < g->rw.len; k++)
    g->rws[k] = slot_of (r, g->rw.v[k]);
  g->rws_ok = TRUE;
}

/* Appends @x to @list unless its mark (a field of its slot) already equals epoch @e; marks it. */
static inline void
add_once (PtrVec *list, guint32 *mark, guint32 e, CsProxy *x)
{
  if (*mark != e)
    {
      *mark = e;
      ptr_vec_add (list, x);
    }
}

/* Marks every proxy of @a as a member (mem) of a fresh epoch, which it returns. */
static guint32
mark_list (Remat *r, PtrVec *a)
{
  guint32 m = store_epoch (r);

  for (guint i = 0; i < a->len; i++)
    slot_of (r, a->pdata[i])->mem = m;
  return m;
}

/* Appends subsymbol entry @sub to @s's readers' list of epoch @e (a new list when @s has
 * none for @e). */
static void
user_add (Remat *r, IdSlot *s, guint32 e, guint32 sub)
{
  guint32 k = r->ue_len++;

  if (G_UNLIKELY (r->ue_len > r->ue_cap))
    {
      r->ue_cap = MAX (256, 2 * r->ue_cap);
      r->ue_next = g_renew (guint32, r->ue_next, r->ue_cap);
      r->ue_sub = g_renew (guint32, r->ue_sub, r->ue_cap);
    }
  r->ue_sub[k] = sub;
  r->ue_next[k] = G_MAXUINT32;
  if (s->user != e)
    {
      s->user = e;
      s->user_first = k;
    }
  else
    r->ue_next[s->user_last] = k;
  s->user_last = k;
}

/* Marks (made = @e) the outputs of @g's subsymbols; with @list, appends each once, in order. */
static void
produced_vars (Remat *r, RReg *g, guint32 e, PtrVec *list)
{
  rreg_rw_slots (r, g);
  for (guint i = 0; i < g->subs->len; i++)
    {
      guint n;
      CsProxy **ws = sub_writes (g, i, &n);
      for (guint j = 0; j < n; j++)
        {
          IdSlot *s = sub_write_slots (g, i)[j];
          if (s->made != e)
            {
              s->made = e;
              if (list)
                ptr_vec_add (list, ws[j]);
            }
        }
    }
}

/* Thunder's utils.find_producer_symbols over @g's subsymbols: the indices (marked in @mark) of
 * the subsymbols that produce @proxies (@n_proxies), walking back through their arguments and
 * stopping at the proxies whose slot has stop == @stop_e. */
static void
find_producer_symbols (Remat *r, RReg *g, CsProxy *const *proxies, guint n_proxies,
                       guint32 stop_e, guint8 *mark)
{
  guint32 e = store_epoch (r);
  CsProxyVec *queue = &r->vec_b;

  rreg_rw_slots (r, g);
  for (guint i = 0; i < g->subs->len; i++)
    {
      guint n;
      sub_writes (g, i, &n);
      for (guint j = 0; j < n; j++)
        {
          IdSlot *s = sub_write_slots (g, i)[j];
          if (s->prod != e)
            {
              s->prod = e;
              s->prod_at = i + 1;
            }
        }
    }
  queue->len = 0;
  for (guint i = 0; i < n_proxies; i++)
    _cs_proxy_vec_push (queue, proxies[i]);
  while (queue->len > 0)
    {
      IdSlot *s = slot_of (r, queue->v[--queue->len]);
      guint at = s->prod == e ? s->prod_at : 0, n;
      CsProxy **rs;
      if (at == 0)
        continue;
      mark[at - 1] = 1;
      rs = sub_reads (g, at - 1, &n);
      for (guint j = 0; j < n; j++)
        {
          IdSlot *q = sub_read_slots (g, at - 1)[j];
          if (q->stop != stop_e && q->seen != e)
            {
              q->seen = e;
              _cs_proxy_vec_push (queue, rs[j]);
            }
        }
    }
}

/* The `_in` node of @p (its `_out` node is the next one) in the graph of epoch @e, created on
 * first use. */
static guint
fg_var (Remat *r, CsProxy *p, guint32 e)
{
  FGraph *g = &r->g;
  IdSlot *s = slot_of (r, p);

  if (s->var != e)
    {
      ptr_vec_add (g->vars, p);
      s->var = e;
      s->var_idx = g->vars->len;
      fg_add_nodes (g);
    }
  return 2 + 2 * (s->var_idx - 1);
}

/* Counts, for every output of @p marked in epoch @e, the lists among @lists[0 .. @n) that
 * name it (each list once, however often it names it), in the slots' loc_n. */
static void
count_in_lists (Remat *r, guint32 e, PtrVec *const *lists, guint n)
{
  for (guint l = 0; l < n; l++)
    for (guint i = 0; i < lists[l]->len; i++)
      {
        IdSlot *s = slot_of (r, lists[l]->pdata[i]);
        if (s->loc == e && s->loc_list != l + 1)
          {
            s->loc_list = l + 1;
            s->loc_n++;
          }
      }
}

/* Thunder's find_external_producer_outputs: the outputs of @p that must stay outputs because
 * a statement other than @c reads them; @next are the consumers of the later pairs of the same
 * producer (current versions), @c_reg / @next_regs their region indices.  An output's local
 * readers are the input lists of @p, @c and @next that name it; its global ones the static
 * readers outside @c and @next (those of them not modified yet). */
static void
external_producer_outputs (Remat *r, RReg *p, RReg *c, guint c_reg, const guint *next_regs,
                           guint n_next, PtrVec *ext)
{
  PtrVec **lists;
  guint32 e;

  e = store_epoch (r);
  for (guint i = 0; i < p->outs->len; i++)
    {
      IdSlot *s = slot_of (r, p->outs->pdata[i]);
      s->loc = e;
      s->loc_n = 0;
      s->loc_list = 0;
    }
  ptr_vec_set_size (r->lists, n_next + 2);
  lists = (PtrVec **) r->lists->pdata;
  lists[0] = p->ins;
  lists[1] = c->ins;
  for (guint k = 0; k < n_next; k++)
    lists[2 + k] = r->regs[next_regs[k]].ins;
  count_in_lists (r, e, lists, n_next + 2);
  for (guint i = 0; i < c->ins->len; i++)
    slot_of (r, c->ins->pdata[i])->in_c = e;
  if (!c->modified)
    r->reg_mark[c_reg] = e;
  for (guint k = 0; k < n_next; k++)
    if (!r->regs[next_regs[k]].modified)
      r->reg_mark[next_regs[k]] = e;

  for (guint i = 0; i < p->outs->len; i++)
    {
      CsProxy *out = p->outs->pdata[i];
      IdSlot *s = slot_of (r, out);
      guint local = s->loc_n, global = 0;
      gboolean remat;

      if (local <= 1 && out->id < r->n_ids)
        for (guint k = r->rd_start[out->id]; k < r->rd_start[out->id + 1]; k++)
          {
            gint rr = r->reg_of_top[r->rd[k]];
            if (rr < 0 || r->reg_mark[rr] != e)
              global++;
          }
      if (local > 1 || global > 0)
        remat = FALSE;
      else if (local == 0)
        remat = TRUE;
      else
        remat = s->in_c == e;
      if (!remat)
        ptr_vec_add (ext, out);
    }
}

/* Thunder's find_external_consumer_inputs: inputs of @c that @p neither outputs, reads nor
 * produces, in @c's input order, each once.  In epoch @e the slots mark what @p's subsymbols
 * produce (made, set by the caller); this marks @p's inputs (flag) and outputs (pout). */
static void
external_consumer_inputs (Remat *r, RReg *p, guint32 e, RReg *c, PtrVec *out)
{
  for (guint i = 0; i < p->ins->len; i++)
    slot_of (r, p->ins->pdata[i])->flag = e;
  for (guint i = 0; i < p->outs->len; i++)
    slot_of (r, p->outs->pdata[i])->pout = e;
  for (guint i = 0; i < c->ins->len; i++)
    {
      CsProxy *x = c->ins->pdata[i];
      IdSlot *s = slot_of (r, x);
      if (s->pout != e && s->flag != e && s->made != e)
        add_once (out, &s->ext, e, x);
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
 * producer: flag == @e), `_out -> _in` of every output of each subsymbol of @p and @c that
 * reads it (readers' lists of epoch @e).  A second call for the same @var adds the same edges
 * with the same capacities again (networkx keeps the graph as it is), so it returns at once
 * (edges == @e). */
static void
add_var_edges (Remat *r, CsProxy *var, RReg *p, RReg *c, guint32 e, gboolean all)
{
  FGraph *g = &r->g;
  IdSlot *s = slot_of (r, var);
  guint vi;
  double w;

  if (s->edges == e)
    return;
  s->edges = e;
  vi = fg_var (r, var, e);
  w = proxy_cut_bytes (var);
  if (s->flag == e)
    w /= 2.0;
  /* the first edge out of `_in` but its edge to the sink (find_cut adds those first) */
  fg_edge_new (g, vi, vi + 1, w);
  if (s->user != e)
    return;
  for (guint32 k = s->user_first; k != G_MAXUINT32; k = r->ue_next[k])
    {
      RReg *ur = (r->ue_sub[k] & 1) ? c : p;
      guint at = r->ue_sub[k] >> 1, n;
      CsProxy **ws;
      if (ur->kind[at] == CS_STMT_RETURN || ur->kind[at] == CS_STMT_UNPACK)
        continue;
      ws = sub_writes (ur, at, &n);
      for (guint j = 0; j < n; j++)
        if (all || sub_write_slots (ur, at)[j]->live == e)
          fg_edge (g, vi + 1, fg_var (r, ws[j], e), INFINITY);
    }
}

/* Marks (live == @e) the values of @p and @c that may reach find_cut's sink: the required
 * consumer values @req_c and, backwards through the subsymbol writing each, everything it
 * reads.  A value that cannot reach the sink carries no flow and stays off the sink's side of
 * the residual graph, so the cut is the same without it.  Returns FALSE (nothing pruned) when
 * some value has two writers. */
static gboolean
sink_ancestors (Remat *r, RReg *p, RReg *c, PtrVec *req_c, guint32 e)
{
  CsProxyVec *stack = &r->vec_b;

  for (guint pass = 0; pass < 2; pass++)
    {
      RReg *gr = pass == 0 ? p : c;
      for (guint i = 0; i < gr->subs->len; i++)
        {
          guint n;
          sub_writes (gr, i, &n);
          for (guint j = 0; j < n; j++)
            {
              IdSlot *s = sub_write_slots (gr, i)[j];
              if (s->wr == e)
                return FALSE;
              s->wr = e;
              s->wr_at = 2 * i + pass;
            }
        }
    }
  stack->len = 0;
  for (guint i = 0; i < req_c->len; i++)
    {
      IdSlot *s = slot_of (r, req_c->pdata[i]);
      if (s->live != e)
        {
          s->live = e;
          _cs_proxy_vec_push (stack, req_c->pdata[i]);
        }
    }
  while (stack->len > 0)
    {
      IdSlot *s = slot_of (r, stack->v[--stack->len]);
      RReg *gr;
      CsProxy **rs;
      guint n;
      if (s->wr != e)
        continue;
      gr = (s->wr_at & 1) ? c : p;
      rs = sub_reads (gr, s->wr_at >> 1, &n);
      for (guint j = 0; j < n; j++)
        {
          IdSlot *q = sub_read_slots (gr, s->wr_at >> 1)[j];
          if (q->live != e)
            {
              q->live = e;
              _cs_proxy_vec_push (stack, rs[j]);
            }
        }
    }
  return TRUE;
}

/* Thunder's find_cut: the values to pass from @p to @c so that @c recomputes the rest, as the
 * minimum cut of the graph whose source feeds @p's required values and whose sink drains @c's
 * required ones; ties go to the cut nearest the sink (networkx's partition: the nodes that
 * still reach the sink in the residual graph).  Leaves the cut in @cut (empty: no change). */
static void
find_cut_graph (Remat *r, PtrVec *ext_out, RReg *p, RReg *c, PtrVec *cut)
{
  CsProxyVec *req_p = &r->vec_a;
  PtrVec *req_c = r->req_c, *ext_in = r->ext_in;
  guint8 *cmark = sub_marks (r, c->subs->len + 1);
  gboolean differ = p->nvfusion != c->nvfusion, all;
  FGraph *g = &r->g;
  const guint8 *p_must;
  guint32 e;

  cut->len = 0;
  req_c->len = 0;
  ext_in->len = 0;
  e = store_epoch (r);
  rreg_rw_slots (r, p);
  rreg_rw_slots (r, c);
  produced_vars (r, p, e, NULL);
  for (guint i = 0; i < p->ins->len; i++)
    slot_of (r, p->ins->pdata[i])->flag = e;

  /* required producer values: its inputs, the outputs others read, tagged subsymbols' outputs
   * and (across executors) what the consumer's executor cannot run */
  req_p->len = 0;
  for (guint i = 0; i < p->ins->len; i++)
    _cs_proxy_vec_push (req_p, p->ins->pdata[i]);
  for (guint i = 0; i < ext_out->len; i++)
    _cs_proxy_vec_push (req_p, ext_out->pdata[i]);
  p_must = rreg_must (p);
  for (guint i = 0; i < p->subs->len; i++)
    {
      const CsStmt *s = p->subs->pdata[i];
      gboolean tagged = p_must[i];
      if (tagged || (differ && !consumer_can_fuse (r, c, s)))
        {
          guint n;
          CsProxy **ws = sub_writes (p, i, &n);
          for (guint j = 0; j < n; j++)
            _cs_proxy_vec_push (req_p, ws[j]);
        }
    }

  /* required consumer values (req == e, listed once in req_c): its outputs, its external
   * inputs and every value on the way from those inputs to the outputs */
#define REQ_C_ADD(x) add_once (req_c, &slot_of (r, (x))->req, e, (x))
  for (guint i = 0; i < c->outs->len; i++)
    REQ_C_ADD (c->outs->pdata[i]);
  external_consumer_inputs (r, p, e, c, ext_in);
  for (guint i = 0; i < ext_in->len; i++)
    {
      REQ_C_ADD (ext_in->pdata[i]);
      slot_of (r, ext_in->pdata[i])->stop = e;
    }
  find_producer_symbols (r, c, (CsProxy *const *) c->outs->pdata, c->outs->len, e, cmark);
  for (guint i = 0; i < c->subs->len; i++)
    if (cmark[i])
      {
        guint n;
        CsProxy **ws = sub_writes (c, i, &n);
        for (guint j = 0; j < n; j++)
          REQ_C_ADD (ws[j]);
      }
#undef REQ_C_ADD
  for (guint i = 0; i < req_p->len; i++)
    if (slot_of (r, req_p->v[i])->req == e)
      return;
  if (req_c->len == 0)
    return;

  /* readers of each value among the producer's and the consumer's subsymbols, in order */
  r->ue_len = 0;
  for (guint pass = 0; pass < 2; pass++)
    {
      RReg *gr = pass == 0 ? p : c;
      for (guint i = 0; i < gr->subs->len; i++)
        {
          guint n;
          sub_reads (gr, i, &n);
          for (guint j = 0; j < n; j++)
            user_add (r, sub_read_slots (gr, i)[j], e, 2 * i + pass);
        }
    }

  /* the graph of the values that may reach the sink (all of them when some value has two
   * writers), built in the order of Thunder's add_edges calls */
  all = !sink_ancestors (r, p, c, req_c, e);
  fg_reset (g);
  /* req_c lists each value once: every edge to the sink is new, and so is each value's
   * first edge from the source (src == e once it is there) */
  for (guint i = 0; i < req_c->len; i++)
    fg_edge_new (g, fg_var (r, req_c->pdata[i], e), FG_SINK, INFINITY);
  for (guint i = 0; i < req_p->len; i++)
    {
      IdSlot *s = slot_of (r, req_p->v[i]);
      if (!all && s->live != e)
        continue;
      if (s->src != e)
        {
          s->src = e;
          fg_edge_new (g, FG_SOURCE, fg_var (r, req_p->v[i], e), INFINITY);
        }
      add_var_edges (r, req_p->v[i], p, c, e, all);
    }
  for (guint pass = 0; pass < 2; pass++)
    {
      RReg *gr = pass == 0 ? p : c;
      for (guint i = 0; i < gr->subs->len; i++)
        {
          guint n;
          CsProxy **ws = sub_writes (gr, i, &n);
          for (guint j = 0; j < n; j++)
            if (all || sub_write_slots (gr, i)[j]->live == e)
              add_var_edges (r, ws[j], p, c, e, all);
        }
    }

  if (fg_max_flow (g))
    {
      /* nodes that reach the sink in the residual graph: networkx's non-reachable side */
      guint *queue, *reach;
      guint head = 0, tail = 0;
      fg_scratch (g);
      queue = g->scratch;
      reach = g->scratch + 3 * g->n;
      memset (reach, 0, g->n * sizeof (guint));
      reach[FG_SINK] = 1;
      queue[tail++] = FG_SINK;
      while (head < tail)
        {
          guint w = queue[head++];
          for (guint k = g->first[w]; k != FG_NONE; k = g->edges[k].next)
            {
              FEdge *back = &g->edges[k];
              FEdge *fe = &g->edges[k ^ 1];
              if (!reach[back->to] && fe->cap - fe->flow > 0)
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
            ptr_vec_add (cut, g->vars->pdata[k]);
        }
    }
}

/* Appends the value @x (its slot @s) to the canonical form being built in epoch @e: its
 * number, and the first time also its edge weight (two words of the double's bits).  r->key
 * has room for the three words (key_reserve()). */
static inline void
key_value (Remat *r, IdSlot *s, CsProxy *x, guint32 e)
{
  double w;
  guint64 bits;

  if (s->canon == e)
    {
      r->key.v[r->key.len++] = s->canon_idx;
      return;
    }
  s->canon = e;
  s->canon_idx = r->canon->len;
  ptr_vec_add (r->canon, x);
  w = proxy_cut_bytes (x);
  memcpy (&bits, &w, sizeof bits);
  r->key.v[r->key.len++] = s->canon_idx;
  r->key.v[r->key.len++] = (guint) bits;
  r->key.v[r->key.len++] = (guint) (bits >> 32);
}

/* Makes room in r->key for @n more words. */
static void
key_reserve (Remat *r, guint n)
{
  uvec_reserve (&r->key, r->key.len + n);
}

static void
key_list (Remat *r, const PtrVec *a, guint32 e)
{
  key_reserve (r, 1 + 3 * a->len);
  r->key.v[r->key.len++] = a->len;
  for (guint i = 0; i < a->len; i++)
    key_value (r, slot_of (r, a->pdata[i]), a->pdata[i], e);
}

/* Appends region @g to the canonical form: its executor, inputs, outputs and, per subsymbol,
 * its kind, must_output(), whether @c's executor can run it (@c non-NULL: the producer of a
 * pair across executors), its reads and its writes. */
static void
key_region (Remat *r, RReg *g, RReg *c, guint32 e)
{
  const guint8 *must;

  rreg_rw_slots (r, g);
  must = rreg_must (g);
  key_reserve (r, 2);
  r->key.v[r->key.len++] = g->subs->len;
  r->key.v[r->key.len++] = g->nvfusion;
  key_list (r, g->ins, e);
  key_list (r, g->outs, e);
  key_reserve (r, 5 * g->subs->len + 3 * g->rw.len);
  for (guint i = 0; i < g->subs->len; i++)
    {
      guint *v = r->key.v + r->key.len;
      v[0] = g->kind[i];
      v[1] = must[i];
      v[2] = c != NULL && consumer_can_fuse (r, c, g->subs->pdata[i]);
      v[3] = g->rw_at[2 * i + 1] - g->rw_at[2 * i];
      v[4] = g->rw_at[2 * i + 2] - g->rw_at[2 * i + 1];
      r->key.len += 5;
      /* the reads, then the writes */
      for (guint k = g->rw_at[2 * i]; k < g->rw_at[2 * i + 2]; k++)
        key_value (r, g->rws[k], g->rw.v[k], e);
    }
}

/* The canonical form of the pair (@p, @c) with the external producer outputs @ext_out in
 * r->key (r->canon: number -> proxy), made of everything find_cut_graph reads: the regions'
 * executors, inputs, outputs and subsymbols (kind, must_output(), the consumer executor's
 * fusibility across executors, reads, writes), @ext_out, and each value's edge weight, the
 * values numbered in order of first appearance.  Two pairs have equal forms exactly when one
 * is the other with its values renamed, so find_cut_graph's cut of one, renamed, is the
 * other's.  Returns the form's hash (FNV-1a over its words). */
static guint32
cut_key (Remat *r, PtrVec *ext_out, RReg *p, RReg *c)
{
  guint32 e = store_epoch (r), h = 2166136261u;

  r->key.len = 0;
  r->canon->len = 0;
  key_region (r, p, p->nvfusion != c->nvfusion ? c : NULL, e);
  key_region (r, c, NULL, e);
  key_list (r, ext_out, e);
  for (guint i = 0; i < r->key.len; i++)
    {
      h ^= r->key.v[i];
      h *= 16777619u;
    }
  return h;
}

/* find_cut_graph's cut for the pair, computed once per canonical form (cut_key): the layers of
 * a model repeat, and so do their pairs.  With CASTSCOPE_CHECK_IO=1 a remembered cut is
 * computed again and compared (an abort names the pair when they differ). */
static void
find_cut (Remat *r, PtrVec *ext_out, RReg *p, RReg *c, PtrVec *cut)
{
  CutMemo probe = { 0 }, *m;
  guint32 e;

  probe.hash = cut_key (r, ext_out, p, c);
  probe.n_key = r->key.len;
  probe.key = r->key.v;
  e = r->epoch;
  m = g_hash_table_lookup (r->cuts, &probe);
  if (m != NULL && !r->check)
    {
      cut->len = 0;
      for (guint i = 0; i < m->n_cut; i++)
        ptr_vec_add (cut, r->canon->pdata[m->cut[i]]);
      return;
    }
  find_cut_graph (r, ext_out, p, c, cut);
  if (m != NULL)
    {
      gboolean same = m->n_cut == cut->len;
      for (guint i = 0; same && i < cut->len; i++)
        same = cut->pdata[i] == r->canon->pdata[m->cut[i]];
      if (!same)
        g_error ("CASTSCOPE_CHECK_IO: rematerialization of %s -> %s: the cut of an earlier pair "
                 "of the same canonical form is not this pair's", p->orig->callee,
                 c->orig->callee);
      return;
    }
  m = g_new0 (CutMemo, 1);
  m->hash = probe.hash;
  m->n_key = probe.n_key;
  m->key = g_memdup2 (probe.key, probe.n_key * sizeof (guint));
  m->n_cut = cut->len;
  m->cut = g_new (guint, MAX (cut->len, 1));
  for (guint i = 0; i < cut->len; i++)
    {
      IdSlot *s = slot_of (r, cut->pdata[i]);
      if (s->canon != e)
        {
          /* a cut value outside the form (not expected): nothing is remembered */
          cut_memo_free (m);
          return;
        }
      m->cut[i] = s->canon_idx;
    }
  g_hash_table_add (r->cuts, m);
}

/* Thunder's bsym_list_to_dag + toposort_bsym_dag(leaves, BOTTOM_UP) with the default selector
 * (thunder/core/transforms.py), as apply_rematerialization_for_consumer orders the consumer's
 * new subsymbols: parents in argument order, children in consumer order (each once), the leaves
 * (no children) in list order; the first eligible node is taken, a parent becomes eligible once
 * every child is taken, and the list is reversed.  Reorders @g's subsymbols (and their reads and
 * writes) in place. */
static void
toposort_bottom_up (Remat *r, RReg *g)
{
  guint n = g->subs->len;
  guint32 e = store_epoch (r);
  Topo *tp = &r->topo;
  guint *par_at, *ch_at, *taken;   /* parents of i: par[par_at[i] ..], children alike */
  UVec *par = &tp->par, *ch = &tp->ch, *elig = &tp->elig; /* elig: a queue from elig_head */
  UVec *from = &tp->from;
  guint elig_head = 0;
  CsProxyVec *rw = &tp->rw;
  guint *rw_at;
  guint8 *kind;

  rreg_rw_slots (r, g);
  uvec_reserve (&tp->at, 3 * (n + 1));
  par_at = tp->at.v;
  ch_at = par_at + n + 1;
  taken = ch_at + n + 1;
  memset (taken, 0, (n + 1) * sizeof (guint));
  par->len = ch->len = elig->len = from->len = 0;
  r->ue_len = 0;
  for (guint i = 0; i < n; i++)
    {
      guint nw, nr;
      sub_writes (g, i, &nw);
      sub_reads (g, i, &nr);
      for (guint j = 0; j < nw; j++)
        {
          IdSlot *s = sub_write_slots (g, i)[j];
          if (s->prod != e)
            {
              s->prod = e;
              s->prod_at = i + 1;
            }
        }
      for (guint j = 0; j < nr; j++)
        user_add (r, sub_read_slots (g, i)[j], e, i);
    }
  for (guint i = 0; i < n; i++)
    {
      guint nr, nw;
      CsProxy **ins = sub_reads (g, i, &nr), **ws = sub_writes (g, i, &nw);
      par_at[i] = par->len;
      for (guint j = 0; j < nr; j++)
        {
          IdSlot *s = sub_read_slots (g, i)[j];
          guint at = s->prod == e ? s->prod_at : 0;
          gboolean dup = FALSE;
          if (at == 0)
            continue;
          for (guint k = par_at[i]; k < par->len && !dup; k++)
            dup = par->v[k] == at - 1;
          if (!dup)
            uvec_push (par, at - 1);
        }
      ch_at[i] = ch->len;
      for (guint j = 0; j < nw; j++)
        {
          IdSlot *s;
          gboolean is_input = FALSE;
          for (guint k = 0; k < nr && !is_input; k++)
            is_input = ins[k] == ws[j];
          if (is_input || (s = sub_write_slots (g, i)[j])->user != e)
            continue;
          for (guint32 k = s->user_first; k != G_MAXUINT32; k = r->ue_next[k])
            {
              guint c = r->ue_sub[k];
              gboolean dup = FALSE;
              for (guint m = ch_at[i]; m < ch->len && !dup; m++)
                dup = ch->v[m] == c;
              if (!dup)
                uvec_push (ch, c);
            }
        }
    }
  par_at[n] = par->len;
  ch_at[n] = ch->len;
  for (guint i = 0; i < n; i++)
    if (ch_at[i + 1] == ch_at[i])
      uvec_push (elig, i);
  while (elig_head < elig->len)
    {
      guint x = elig->v[elig_head++];
      taken[x] = 1;
      uvec_push (from, x);
      for (guint k = par_at[x]; k < par_at[x + 1]; k++)
        {
          guint pe = par->v[k];
          gboolean ok = TRUE;
          for (guint m = ch_at[pe]; m < ch_at[pe + 1] && ok; m++)
            ok = taken[ch->v[m]];
          if (ok)
            uvec_push (elig, pe);
        }
    }

  /* the order reversed, then any statement the walk cannot reach (none in a valid region) in
   * its place at the end; the reads and writes follow their statements */
  for (guint k = 0; k < from->len / 2; k++)
    {
      guint x = from->v[k];
      from->v[k] = from->v[from->len - 1 - k];
      from->v[from->len - 1 - k] = x;
    }
  for (guint i = 0; i < n; i++)
    if (!taken[i])
      uvec_push (from, i);
  tp->subs->len = 0;
  rw->len = 0;
  rw_at = g_new (guint, 2 * from->len + 1);
  kind = g_new (guint8, MAX (from->len, 1));
  for (guint k = 0; k < from->len; k++)
    {
      guint i = from->v[k];
      ptr_vec_add (tp->subs, g->subs->pdata[i]);
      kind[k] = g->kind[i];
      rw_at[2 * k] = rw->len;
      for (guint q = g->rw_at[2 * i]; q < g->rw_at[2 * i + 1]; q++)
        _cs_proxy_vec_push (rw, g->rw.v[q]);
      rw_at[2 * k + 1] = rw->len;
      for (guint q = g->rw_at[2 * i + 1]; q < g->rw_at[2 * i + 2]; q++)
        _cs_proxy_vec_push (rw, g->rw.v[q]);
    }
  rw_at[2 * from->len] = rw->len;
  if (rw->v != rw->inl && g->rw.v != g->rw.inl)
    {
      /* both on the heap: swap the storage (a list in its inline slots cannot move) */
      CsProxy **v = g->rw.v;
      guint len = g->rw.len, cap = g->rw.cap;
      g->rw.v = rw->v;
      g->rw.len = rw->len;
      g->rw.cap = rw->cap;
      rw->v = v;
      rw->len = len;
      rw->cap = cap;
    }
  else
    {
      g->rw.len = 0;
      for (guint k = 0; k < rw->len; k++)
        _cs_proxy_vec_push (&g->rw, rw->v[k]);
    }
  {
    PtrVec *subs = g->subs;
    g->subs = tp->subs;
    tp->subs = subs;
  }
  g_free (g->rw_at);
  g->rw_at = rw_at;
  g_free (g->kind);
  g->kind = kind;
  g->rws_ok = FALSE;
  g->must_ok = FALSE;
  rreg_rw_slots (r, g);
}

/* Thunder's apply_rematerialization_for_consumer: @c recomputes what it read from @p and the
 * cut does not pass, from the cut and @p's inputs (clones of @p's subsymbols with fresh names,
 * "bw_" before a backward consumer's, "fw_" before a forward one's). */
static void
apply_consumer (Remat *r, RReg *p, RReg *c, PtrVec *cut)
{
  CsTrace *t = r->t;
  PtrVec *p_made_list = r->made, *new_args = r->new_args, *remat_in = r->remat_in;
  PtrVec *subs = r->new_subs;
  guint8 *mark;
  const char *prefix = c->orig->backward ? "bw_" : "fw_";
  gboolean same;
  guint32 e, e_io, in_cut, in_args;

  p_made_list->len = 0;
  new_args->len = 0;
  remat_in->len = 0;
  e = store_epoch (r);
  produced_vars (r, p, e, p_made_list);
  in_cut = mark_list (r, cut);
  in_args = store_epoch (r);
#define ARG_ADD(x) add_once (new_args, &slot_of (r, (x))->arg, in_args, (x))
  for (guint i = 0; i < p_made_list->len; i++)
    if (slot_of (r, p_made_list->pdata[i])->mem == in_cut)
      ARG_ADD (p_made_list->pdata[i]);
  for (guint i = 0; i < p->ins->len; i++)
    if (slot_of (r, p->ins->pdata[i])->mem == in_cut)
      ARG_ADD (p->ins->pdata[i]);
  for (guint i = 0; i < new_args->len; i++)
    slot_of (r, new_args->pdata[i])->stop = e;
  {
    PtrVec *ext_in = r->ext_in;
    ext_in->len = 0;
    external_consumer_inputs (r, p, e, c, ext_in);
    for (guint i = 0; i < ext_in->len; i++)
      ARG_ADD (ext_in->pdata[i]);
  }
  for (guint i = 0; i < c->ins->len; i++)
    if (slot_of (r, c->ins->pdata[i])->arg != in_args)
      ptr_vec_add (remat_in, c->ins->pdata[i]);
  if (remat_in->len == 0)
    return;

  mark = sub_marks (r, p->subs->len + 1);
  find_producer_symbols (r, p, (CsProxy *const *) remat_in->pdata, remat_in->len, e, mark);

  /* the recomputed subsymbols (in the producer's order), then the consumer's own with their
   * reads of the recomputed values renamed, toposorted as Thunder does */
  _cs_proxy_map_clear (r->map);
  subs->len = 0;
  for (guint i = 0; i < p->subs->len; i++)
    {
      CsStmt *s = p->subs->pdata[i], *cl;
      CsProxy **ws;
      guint nw;
      if (!mark[i])
        continue;
      ws = sub_writes (p, i, &nw);
      for (guint j = 0; j < nw; j++)
        {
          CsProxy *o = ws[j], *n;
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
      ptr_vec_add (subs, cl);
    }
  for (guint i = 0; i < c->subs->len; i++)
    ptr_vec_add (subs, _cs_stmt_remap_reads (t, c->subs->pdata[i], r->map));
  c->subs->len = 0;
  ptr_vec_extend (c->subs, subs);
  c->subs_changed = TRUE;
  c->rw_ok = FALSE;
  c->must_ok = FALSE;
  toposort_bottom_up (r, c);

  /* inputs: the cut, the external inputs, then the producer's inputs the recomputation reads
   * (req == e_io: read by a new subsymbol; var == e_io: written by one) */
  e_io = store_epoch (r);
  for (guint i = 0; i < c->subs->len; i++)
    {
      guint nr, nw;
      sub_reads (c, i, &nr);
      sub_writes (c, i, &nw);
      for (guint j = 0; j < nr; j++)
        sub_read_slots (c, i)[j]->req = e_io;
      for (guint j = 0; j < nw; j++)
        sub_write_slots (c, i)[j]->var = e_io;
    }
  for (guint i = 0; i < p->ins->len; i++)
    {
      CsProxy *x = p->ins->pdata[i];
      IdSlot *s = slot_of (r, x);
      if (s->req == e_io && s->var != e_io)
        ARG_ADD (x);
    }
#undef ARG_ADD
  same = new_args->len == c->ins->len;
  if (same)
    {
      guint32 in_c = mark_list (r, c->ins);
      for (guint i = 0; i < new_args->len && same; i++)
        same = slot_of (r, new_args->pdata[i])->mem == in_c;
    }
  if (!same)
    c->modified = TRUE;
  c->ins->len = 0;
  ptr_vec_extend (c->ins, new_args);
  _cs_proxy_map_clear (r->map);
}

/* Thunder's apply_rematerialization_for_producer: @p outputs what others read (@ext, with the
 * earlier cuts of this producer) and the cut, less its own inputs, in production order. */
static void
apply_producer (Remat *r, RReg *p, PtrVec *ext, PtrVec *cut)
{
  PtrVec *made = r->made, *outs = r->new_outs;
  gboolean same;
  guint32 wanted, is_in;

  made->len = 0;
  outs->len = 0;
  produced_vars (r, p, store_epoch (r), made);
  wanted = mark_list (r, ext);
  for (guint i = 0; i < cut->len; i++)
    slot_of (r, cut->pdata[i])->mem = wanted;
  is_in = store_epoch (r);
  for (guint i = 0; i < p->ins->len; i++)
    slot_of (r, p->ins->pdata[i])->arg = is_in;
  for (guint i = 0; i < made->len; i++)
    {
      IdSlot *xs = slot_of (r, made->pdata[i]);
      if (xs->mem == wanted && xs->arg != is_in)
        ptr_vec_add (outs, made->pdata[i]);
    }
  same = outs->len == p->outs->len;
  if (same)
    {
      guint32 in_outs = mark_list (r, p->outs);
      for (guint i = 0; i < outs->len && same; i++)
        same = slot_of (r, outs->pdata[i])->mem == in_outs;
    }
  if (!same)
    p->modified = TRUE;
  p->outs->len = 0;
  ptr_vec_extend (p->outs, outs);
}

/* Appends @s's reads (or writes) to @out, each proxy once, in first-seen order. */
static void
value_vec_to_array (Remat *r, CsStmt *s, gboolean reads, PtrVec *out)
{
  g_auto(CsProxyVec) ps = CS_PROXY_VEC_INIT;
  guint32 m = store_epoch (r);
  if (reads)
    _cs_stmt_reads_vec (s, &ps);
  else
    _cs_stmt_writes_vec (s, &ps);
  for (guint i = 0; i < ps.len; i++)
    add_once (out, &slot_of (r, ps.v[i])->mem, m, ps.v[i]);
}

/* Thunder's rematerialize over the fusion regions of @t: pairs (producer, consumer) of regions
 * where the consumer reads an output of the producer (the readers as the trace stood before the
 * pass), sorted by producer then consumer; each pair sees the regions as the earlier pairs left
 * them.  Regions are refreshed after a change. */
void
_cs_fuse_rematerialize (CsTrace *t, const CsPolicy *policy, CsRefreshMarks *marks)
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
  r.reg_mark = g_new0 (guint32, r.n_regs);
  r.n_base = t->next_proxy_id + 1;
  r.base = g_new0 (IdSlot, r.n_base);
  r.other = g_hash_table_new_full (g_direct_hash, g_direct_equal, NULL, g_free);
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
      g->ins = ptr_vec_new ();
      g->outs = ptr_vec_new ();
      g->subs = ptr_vec_new ();
      g->cuts = ptr_vec_new ();
      g->absorbed = ptr_vec_new ();
      value_vec_to_array (&r, s, TRUE, g->ins);
      value_vec_to_array (&r, s, FALSE, g->outs);
      for (guint j = 0; j < s->n_subs; j++)
        ptr_vec_add (g->subs, s->subs[j]);
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
          const guint32 *io = NULL;
          guint n_read;
          if (s->kind == CS_STMT_COMMENT || s->kind == CS_STMT_BLANK || s->kind == CS_STMT_DEL)
            continue;
          /* a call's read ids are stored (cs_stmt_io(), _cs_stmt_reads order); the other
           * kinds' come from their values */
          ps.len = 0;
          if (s->kind == CS_STMT_CALL)
            io = cs_stmt_io (s);
          else
            _cs_stmt_reads_vec (s, &ps);
          n_read = io != NULL ? s->n_in : ps.len;
          for (guint j = 0; j < n_read; j++)
            {
              guint32 id = io != NULL ? io[j] : ps.v[j]->id;
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

  /* pairs (find_fusion_producer_consumer_pairs), sorted by producer, then consumer; the
   * consumers of one producer are collected once each (reg_mark == k + 1) */
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
              if (c < 0 || r.reg_mark[c] == k + 1)
                continue;
              r.reg_mark[c] = k + 1;
              g_array_append_val (cons, c);
            }
        }
      g_array_sort (cons, cmp_guint);
      for (guint q = 0; q < cons->len; q++)
        {
          guint pr[2] = { k, g_array_index (cons, guint, q) };
          g_array_append_vals (pairs, pr, 1);
        }
    }
  /* from here on reg_mark holds epochs (never 0) */
  memset (r.reg_mark, 0, r.n_regs * sizeof (guint32));

  r.map = _cs_proxy_map_new ();
  fg_init (&r.g);
  r.topo.subs = ptr_vec_new ();
  r.ext = ptr_vec_new ();
  r.cut = ptr_vec_new ();
  r.lists = ptr_vec_new ();
  r.req_c = ptr_vec_new ();
  r.ext_in = ptr_vec_new ();
  r.made = ptr_vec_new ();
  r.new_args = ptr_vec_new ();
  r.remat_in = ptr_vec_new ();
  r.new_subs = ptr_vec_new ();
  r.new_outs = ptr_vec_new ();
  r.cuts = g_hash_table_new_full (cut_memo_hash, cut_memo_equal, cut_memo_free, NULL);
  r.canon = ptr_vec_new ();
  r.check = g_strcmp0 (g_getenv ("CASTSCOPE_CHECK_IO"), "1") == 0;
  for (guint i = 0; i < pairs->len; i++)
    {
      guint *pr = &g_array_index (pairs, guint, 2 * i);
      RReg *p = &r.regs[pr[0]], *c = &r.regs[pr[1]];
      PtrVec *ext = r.ext, *cut = r.cut;
      guint *next;
      guint n_next = 0;

      ext->len = 0;
      cut->len = 0;
      /* the later pairs of this producer: a few, not the rest of the list */
      while (i + 1 + n_next < pairs->len
             && g_array_index (pairs, guint, 2 * (i + 1 + n_next)) == pr[0])
        n_next++;
      uvec_reserve (&r.next, n_next + 1);
      next = r.next.v;
      for (guint j = 0; j < n_next; j++)
        next[j] = g_array_index (pairs, guint, 2 * (i + 1 + j) + 1);
      external_producer_outputs (&r, p, c, pr[1], next, n_next, ext);
      find_cut (&r, ext, p, c, cut);
      if (cut->len == 0)
        continue;
      ptr_vec_extend (ext, p->cuts);
      /* Thunder updates the consumer from the producer as it was before this pair */
      apply_consumer (&r, p, c, cut);
      apply_producer (&r, p, ext, cut);
      if (c->subs_changed)
        push_unique (c->absorbed, p);
      for (guint j = 0; j < cut->len; j++)
        {
          IdSlot *s = slot_of (&r, cut->pdata[j]);
          if (s->cut_of != pr[0] + 1)
            {
              s->cut_of = pr[0] + 1;
              ptr_vec_add (p->cuts, cut->pdata[j]);
            }
        }
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
          cs_stmt_set_call (t, s, s->args, s->n_args,
                            cs_value_new_seq (t->arena, CS_VALUE_LIST, items, g->outs->len));
          s->region_fresh = 0;
          t->stmts[g->top] = s;
          changed = TRUE;
        }
    }
  /* freed after the loop above: a region's absorbed list names regions before and after it */
  for (guint k = 0; k < r.n_regs; k++)
    {
      RReg *g = &r.regs[k];
      ptr_vec_free (g->ins);
      ptr_vec_free (g->outs);
      ptr_vec_free (g->subs);
      ptr_vec_free (g->cuts);
      ptr_vec_free (g->absorbed);
      _cs_proxy_vec_free (&g->rw);
      g_free (g->rw_at);
      g_free (g->kind);
      g_free (g->rws);
      g_free (g->must);
    }
  _cs_proxy_map_free (r.map);
  fg_clear (&r.g);
  g_free (r.topo.at.v);
  g_free (r.topo.par.v);
  g_free (r.topo.ch.v);
  g_free (r.topo.elig.v);
  g_free (r.topo.from.v);
  _cs_proxy_vec_free (&r.topo.rw);
  ptr_vec_free (r.topo.subs);
  ptr_vec_free (r.ext);
  ptr_vec_free (r.cut);
  ptr_vec_free (r.lists);
  ptr_vec_free (r.req_c);
  ptr_vec_free (r.ext_in);
  ptr_vec_free (r.made);
  ptr_vec_free (r.new_args);
  ptr_vec_free (r.remat_in);
  ptr_vec_free (r.new_subs);
  ptr_vec_free (r.new_outs);
  g_hash_table_unref (r.cuts);
  ptr_vec_free (r.canon);
  g_free (r.key.v);
  g_free (r.next.v);
  g_free (r.sub_mark);
  g_hash_table_unref (r.other);
  for (guint32 k = 0; k < r.n_chunks; k++)
    g_free (r.chunks[k]);
  g_free (r.chunks);
  g_free (r.base);
  g_free (r.ue_next);
  g_free (r.ue_sub);
  g_free (r.reg_mark);
  _cs_proxy_vec_free (&r.vec_a);
  _cs_proxy_vec_free (&r.vec_b);
  g_free (r.regs);
  g_free (r.reg_of_top);
  g_free (r.rd_start);
  g_free (r.rd);
  if (changed && marks != NULL)
    _cs_regions_refresh_with (t, FALSE, marks);
  else if (changed)
    _cs_regions_refresh (t, FALSE);
}
