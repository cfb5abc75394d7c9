/* cs-fuse-refresh.c: the region refresh (_cs_regions_refresh, see cs-fuse-private.h):
 * Thunder's update_fusion_call_ctx and the dce that follows it.
 *
 * Source: thunder/executors/nvfuserex_impl.py (`fuse` step 3), thunder/core/transform_common.py
 * (dce); reference/thunder-traces.md 6.3 and 7.2.
 */
#include "cs-config.h"

#include "cs-fuse.h"
#include "cs-fuse-private.h"
#include "cs-ir-util.h"
#include "cs-ops.h"

/* ------------------------------------------------------------------------------------------ */
/* Region refresh (update_fusion_call_ctx) and DCE                                             */

static gboolean
stmt_dont_dce (const CsStmt *s)
{
  if (s->kind != CS_STMT_CALL)
    return TRUE;
  if (s->op == NULL)
    return TRUE;
  if ((s->op->tags & CS_OP_TAG_DONT_DCE) || (cs_op_semantic (s->op)->tags & CS_OP_TAG_DONT_DCE))
    return TRUE;
  return FALSE;
}

/* Per-proxy marks indexed by CsProxy.id (ids are 1-based and below trace->next_proxy_id), so
 * the refresh needs no hash table per region.  A mark is "set" when it equals the generation
 * it was set for; generations only grow, so the arrays are never cleared between regions nor
 * between refreshes that share the store (CsRefreshMarks). */
typedef struct
{
  guint32   gen;        /* last generation handed out */
  guint32   cap;        /* entries of each array */
  guint32  *needed;     /* == Marks.needed_gen: read by a later top-level statement */
  guint32  *live;       /* == region gen: needed inside the region being refreshed */
  guint32  *produced;   /* == region gen: produced by a kept subsymbol so far */
  guint32  *seen;       /* == gen: already listed (outputs, then inputs) */
  guint32  *prod_at;    /* subsymbol index of the first kept writer (where produced == gen) */
  guint32  *visible;    /* == visible generation: written at the top level or an input */
  guint32  *hidden_gen; /* == hidden generation: hidden_at is valid */
  guint32  *hidden_at;  /* 1 + index of the fresh region writing it without listing it */
} MarkStore;

#define MARK_STORE_N_ARRAYS 8

static guint32 **
mark_store_array (MarkStore *st, guint k)
{
  guint32 **arrs[MARK_STORE_N_ARRAYS] = { &st->needed, &st->live, &st->produced, &st->seen,
                                          &st->prod_at, &st->visible, &st->hidden_gen,
                                          &st->hidden_at };
  return arrs[k];
}

/* Makes room for ids below @n (new entries zeroed) and, when the generations could run out
 * during a refresh of @n_stmts statements, starts them again from zeroed arrays. */
static void
mark_store_reserve (MarkStore *st, guint32 n, guint n_stmts)
{
  if (n > st->cap)
    {
      guint32 cap = MAX (n, st->cap + st->cap / 8);
      for (guint k = 0; k < MARK_STORE_N_ARRAYS; k++)
        {
          guint32 **a = mark_store_array (st, k);
          *a = g_renew (guint32, *a, cap);
          memset (*a + st->cap, 0, (cap - st->cap) * sizeof (guint32));
        }
      st->cap = cap;
    }
  /* a refresh takes at most 3 generations per statement and 3 more */
  if (st->gen > G_MAXUINT32 - 3 * (guint64) n_stmts - 16)
    {
      for (guint k = 0; k < MARK_STORE_N_ARRAYS; k++)
        memset (*mark_store_array (st, k), 0, st->cap * sizeof (guint32));
      st->gen = 0;
    }
}

static void
mark_store_clear (MarkStore *st)
{
  for (guint k = 0; k < MARK_STORE_N_ARRAYS; k++)
    g_free (*mark_store_array (st, k));
  memset (st, 0, sizeof *st);
}

typedef struct
{
  MarkStore st;         /* the arrays */
  guint32   n;          /* valid ids are below n (trace->next_proxy_id + 1) */
  guint32   needed_gen; /* generation of this refresh's needed marks */
  CsProxyVec tmp;       /* scratch proxy list */
  CsProxyVec outs;      /* scratch */
  CsProxyVec ins;       /* scratch */
  CsProxyVec pass;      /* scratch: the pass-through outputs of the region being rebuilt */
  CsStmtVec kept;       /* scratch */
  guint32  *read_id;    /* scratch: ids read by kept subsymbols, backward order (n_reads of
                           read_pos_cap slots) */
  guint    *read_pos;   /* subsymbol index of each entry of read_id */
  guint    *read_j;     /* its position among that subsymbol's reads (_cs_stmt_reads order) */
  guint     n_reads;    /* entries of read_id, read_pos and read_j */
  guint     read_pos_cap; /* slots of read_id, read_pos, read_j (>= n_reads) */
} Marks;

struct _CsRefreshMarks
{
  Marks     m;          /* the marks and scratch lists, kept between refreshes */
  CsStmtVec top_kept;   /* scratch: the top-level statements kept */
  CsProxyVec top_tmp;   /* scratch */
  guint8   *stale;      /* statement index -> 1 when a later read needs a hidden value of it */
  guint     stale_cap;  /* entries of stale */
};

/**
 * _cs_refresh_marks_new: (see cs-fuse-private.h)
 */
CsRefreshMarks *
_cs_refresh_marks_new (void)
{
  return g_new0 (CsRefreshMarks, 1);
}

/**
 * _cs_refresh_marks_free: (see cs-fuse-private.h)
 */
void
_cs_refresh_marks_free (CsRefreshMarks *marks)
{
  Marks *m;

  if (marks == NULL)
    return;
  m = &marks->m;
  mark_store_clear (&m->st);
  _cs_proxy_vec_free (&m->tmp);
  _cs_proxy_vec_free (&m->outs);
  _cs_proxy_vec_free (&m->ins);
  _cs_proxy_vec_free (&m->pass);
  _cs_stmt_vec_free (&m->kept);
  g_free (m->read_id);
  g_free (m->read_pos);
  g_free (m->read_j);
  _cs_stmt_vec_free (&marks->top_kept);
  _cs_proxy_vec_free (&marks->top_tmp);
  g_free (marks->stale);
  g_free (marks);
}

static inline gboolean
mark_test (const Marks *m, const guint32 *arr, const CsProxy *p, guint32 v)
{
  return p->id < m->n && arr[p->id] == v;
}

static inline void
mark_set (Marks *m, guint32 *arr, const CsProxy *p, guint32 v)
{
  if (p->id < m->n)
    arr[p->id] = v;
}

/* TRUE when @p is read after the region being refreshed (see Marks). */
static inline gboolean
needed_test (const Marks *m, const CsProxy *p)
{
  return mark_test (m, m->st.needed, p, m->needed_gen);
}

/* Appends to @pass the outputs of the region call @s that are also its arguments (pass-through
 * outputs: remove_redundant_casts replaced an output by one of the region's inputs). */
static void
collect_pass_through (const CsStmt *s, CsProxyVec *pass)
{
  const CsValue *o = s->out;

  pass->len = 0;
  if (o == NULL || (o->kind != CS_VALUE_LIST && o->kind != CS_VALUE_TUPLE))
    return;
  for (guint i = 0; i < o->u.seq.n; i++)
    {
      const CsValue *it = o->u.seq.items[i];
      if (it->kind != CS_VALUE_PROXY)
        continue;
      for (guint j = 0; j < s->n_args; j++)
        {
          const CsValue *a = s->args[j].value;
          if (a != NULL && a->kind == CS_VALUE_PROXY && a->u.proxy == it->u.proxy)
            {
              _cs_proxy_vec_push (pass, it->u.proxy);
              break;
            }
        }
    }
}

/* Notes that the kept subsymbol @i of the region being refreshed reads id @id as its @j-th
 * read: live within the region (generation @gen) and listed for the inputs. */
static inline void
note_sub_read (Marks *m, guint32 id, guint i, guint j, guint32 gen)
{
  if (id < m->n)
    m->st.live[id] = gen;
  if (G_UNLIKELY (m->n_reads == m->read_pos_cap))
    {
      m->read_pos_cap = MAX (64, 2 * m->read_pos_cap);
      m->read_id = g_renew (guint32, m->read_id, m->read_pos_cap);
      m->read_pos = g_renew (guint, m->read_pos, m->read_pos_cap);
      m->read_j = g_renew (guint, m->read_j, m->read_pos_cap);
    }
  m->read_id[m->n_reads] = id;
  m->read_pos[m->n_reads] = i;
  m->read_j[m->n_reads] = j;
  m->n_reads++;
}

/* The backward sweep of region_refresh_one() for subsymbol @i of @s when it is not a CALL
 * (no stored ids): kept when a write is needed or live (Thunder's dce); then its outputs,
 * productions and reads are noted as for a call.  Returns whether it is kept. */
static gboolean
sub_refresh_other (const CsStmt *s, guint i, Marks *m, guint32 gen)
{
  MarkStore *st = &m->st;
  CsProxyVec *tmp = &m->tmp;
  const CsStmt *sub = s->subs[i];
  gboolean keep = FALSE;

  tmp->len = 0;
  _cs_stmt_writes_vec (sub, tmp);
  for (guint j = 0; j < tmp->len && !keep; j++)
    if (needed_test (m, tmp->v[j]) || mark_test (m, st->live, tmp->v[j], gen))
      keep = TRUE;
  if (!keep)
    return FALSE;
  for (guint j = 0; j < tmp->len; j++)
    {
      CsProxy *p = tmp->v[j];
      if (needed_test (m, p))
        _cs_proxy_vec_push (&m->outs, p);
      if (p->id < m->n)
        {
          st->produced[p->id] = gen;
          st->prod_at[p->id] = i;
        }
    }
  tmp->len = 0;
  _cs_stmt_reads_vec (sub, tmp);
  for (guint j = 0; j < tmp->len; j++)
    note_sub_read (m, tmp->v[j]->id, i, j, gen);
  return TRUE;
}

/* The @j-th proxy @s reads (_cs_stmt_reads_vec order), through @tmp. */
static CsProxy *
nth_read (const CsStmt *s, guint j, CsProxyVec *tmp)
{
  tmp->len = 0;
  _cs_stmt_reads_vec (s, tmp);
  return tmp->v[j];
}

/* The @j-th proxy @s writes (_cs_stmt_writes_vec order), through @tmp. */
static CsProxy *
nth_write (const CsStmt *s, guint j, CsProxyVec *tmp)
{
  if (j == 0 && s->out != NULL && s->out->kind == CS_VALUE_PROXY)
    return s->out->u.proxy;
  tmp->len = 0;
  _cs_stmt_writes_vec (s, tmp);
  return tmp->v[j];
}

/* Rebuilds the region call @s from its subsymbols against the needed marks (proxies read
 * after it).  Outputs: the pass-through outputs @s lists (outputs that are inputs; Thunder
 * never drops a fusion's outputs after remove_redundant_casts) first, then the values its kept
 * subsymbols produce that are read later, in the order @s lists them when it lists every one
 * (a rematerialized consumer keeps its order), else in production order; inputs: what the kept
 * subsymbols read from outside, in first appearance order, then any pass-through output none
 * of them reads.  Returns FALSE when no produced output is left (Thunder's dce keeps a
 * fusion only for an output it produces). */
static gboolean
region_refresh_one (CsTrace *trace, CsStmt *s, Marks *m)
{
  MarkStore *st = &m->st;
  CsProxyVec *tmp = &m->tmp, *outs = &m->outs, *ins = &m->ins;
  CsProxyVec *pass = &m->pass;
  CsStmtVec *kept = &m->kept;
  CsValue **items;
  CsArg *args;
  guint32 gen = ++st->gen, gen_in, gen_listed;
  guint n_outs_rev;

  outs->len = 0;
  ins->len = 0;
  m->n_reads = 0;
  kept->len = 0;
  collect_pass_through (s, pass);

  /* One backward sweep over the subsymbols (each one's memory is touched once):
   * - DCE: a subsymbol is kept when one of its outputs is needed after the region
   *   (needed marks) or read by a later kept subsymbol (live marks), or when it must not be
   *   DCEd;
   * - outputs: values written by kept subsymbols and needed after the region (collected in
   *   reverse, put in production order below);
   * - the first (lowest) index of a kept subsymbol writing each value (prod_at, valid where
   *   produced == gen), and every read with its index, for the inputs below. */
  for (guint i = s->n_subs; i-- > 0;)
    {
      CsStmt *sub = s->subs[i];
      const guint32 *io;
      gboolean keep;

      /* the statements and their id arrays of the next iterations */
      if (i >= 4)
        __builtin_prefetch (s->subs[i - 4]);
      if (i >= 2 && s->subs[i - 2]->kind == CS_STMT_CALL)
        __builtin_prefetch (cs_stmt_io (s->subs[i - 2]));
      if (sub->kind != CS_STMT_CALL)
        {
          /* no stored ids: the other kinds list theirs (none is a fusible prim) */
          if (!sub_refresh_other (s, i, m, gen))
            continue;
          _cs_stmt_vec_push (kept, sub);
          continue;
        }
      io = cs_stmt_io (sub);
      keep = stmt_dont_dce (sub);
      for (guint j = sub->n_in; j < sub->n_in + sub->n_out && !keep; j++)
        {
          guint32 id = io[j];
          if (id < m->n && (st->needed[id] == m->needed_gen || st->live[id] == gen))
            keep = TRUE;
        }
      if (!keep)
        continue;
      _cs_stmt_vec_push (kept, sub);
      for (guint j = sub->n_in; j < sub->n_in + sub->n_out; j++)
        {
          guint32 id = io[j];
          if (id >= m->n)
            continue;
          if (st->needed[id] == m->needed_gen)
            _cs_proxy_vec_push (outs, nth_write (sub, j - sub->n_in, tmp));
          st->produced[id] = gen;
          st->prod_at[id] = i;
        }
      for (guint j = 0; j < sub->n_in; j++)
        note_sub_read (m, io[j], i, j, gen);
    }
  if (outs->len == 0)
    return FALSE;

  /* pass-through outputs first, then the produced ones: in the order @s lists them when it
   * lists all of them (Thunder's rematerialize keeps a consumer's outputs as they were while it
   * toposorts its subsymbols), else in production order; each once */
  n_outs_rev = outs->len;
  for (guint i = 0; i < pass->len; i++)
    if (!mark_test (m, st->seen, pass->v[i], gen))
      {
        mark_set (m, st->seen, pass->v[i], gen);
        _cs_proxy_vec_push (outs, pass->v[i]);
      }
  tmp->len = 0;
  gen_listed = ++st->gen;
  if (s->out != NULL && (s->out->kind == CS_VALUE_LIST || s->out->kind == CS_VALUE_TUPLE))
    for (guint i = 0; i < s->out->u.seq.n; i++)
      {
        const CsValue *it = s->out->u.seq.items[i];
        CsProxy *p;
        if (it->kind != CS_VALUE_PROXY)
          continue;
        p = it->u.proxy;
        if (mark_test (m, st->produced, p, gen) && needed_test (m, p)
            && !mark_test (m, st->seen, p, gen_listed))
          {
            mark_set (m, st->seen, p, gen_listed);
            _cs_proxy_vec_push (tmp, p);
          }
      }
  if (tmp->len == n_outs_rev)
    for (guint i = 0; i < tmp->len; i++)
      {
        mark_set (m, st->seen, tmp->v[i], gen);
        _cs_proxy_vec_push (outs, tmp->v[i]);
      }
  for (guint i = 0; i < n_outs_rev; i++)
    {
      CsProxy *p = outs->v[n_outs_rev - 1 - i];
      if (!mark_test (m, st->seen, p, gen))
        {
          mark_set (m, st->seen, p, gen);
          _cs_proxy_vec_push (outs, p);
        }
    }
  memmove (outs->v, outs->v + n_outs_rev, sizeof (CsProxy *) * (outs->len - n_outs_rev));
  outs->len -= n_outs_rev;

  /* kept is reversed */
  _cs_stmt_vec_reverse (kept);

  /* inputs: values read before any kept subsymbol produced them, in first appearance order
   * (the reads were collected backward; a fresh generation for the "seen" marks) */
  gen_in = ++st->gen;
  for (guint r = m->n_reads; r-- > 0;)
    {
      guint32 id = m->read_id[r];
      guint at = m->read_pos[r];
      gboolean inside = id < m->n && st->produced[id] == gen && st->prod_at[id] < at;
      if (!inside && !(id < m->n && st->seen[id] == gen_in))
        {
          if (id < m->n)
            st->seen[id] = gen_in;
          _cs_proxy_vec_push (ins, nth_read (s->subs[at], m->read_j[r], tmp));
        }
    }
  for (guint i = 0; i < pass->len; i++)
    if (!mark_test (m, st->seen, pass->v[i], gen_in))
      {
        mark_set (m, st->seen, pass->v[i], gen_in);
        _cs_proxy_vec_push (ins, pass->v[i]);
      }

  cs_stmt_set_subs (trace, s, kept->v, kept->len);
  items = CS_ARENA_NEW_N (trace->arena, CsValue *, MAX (outs->len, 1));
  for (guint i = 0; i < outs->len; i++)
    items[i] = cs_value_new_proxy (trace->arena, outs->v[i]);
  args = CS_ARENA_NEW_N (trace->arena, CsArg, MAX (ins->len, 1));
  for (guint i = 0; i < ins->len; i++)
    {
      args[i].name = NULL;
      args[i].value = cs_value_new_proxy (trace->arena, ins->v[i]);
    }
  cs_stmt_set_call (trace, s, args, ins->len,
                    cs_value_new_seq (trace->arena, CS_VALUE_LIST, items, outs->len));
  s->type_comment = CS_TYPECOMMENT_NONE;
  s->type_comment_raw = NULL;
  s->region_fresh = 1;
  return TRUE;
}

/* TRUE when some output of the fresh region @s is no longer read later (needed marks). */
static gboolean
region_output_unneeded (const CsStmt *s, const Marks *m)
{
  const CsValue *o = s->out;

  if (o == NULL || (o->kind != CS_VALUE_LIST && o->kind != CS_VALUE_TUPLE))
    return TRUE;
  for (guint i = 0; i < o->u.seq.n; i++)
    {
      const CsValue *it = o->u.seq.items[i];
      if (it->kind != CS_VALUE_PROXY || !needed_test (m, it->u.proxy))
        return TRUE;
    }
  return FALSE;
}

/* Marks, for each proxy id, the fresh region of @trace that writes it without listing it as
 * an output: st->hidden_at[id] = 1 + its index where st->hidden_gen[id] == @gen. */
static void
build_hidden (const CsTrace *trace, Marks *m, guint32 gen)
{
  MarkStore *st = &m->st;
  CsProxyVec tmp = CS_PROXY_VEC_INIT;

  for (guint i = 0; i < trace->n_stmts; i++)
    {
      const CsStmt *s = trace->stmts[i];
      if (!_cs_stmt_is_region (s) || !s->region_fresh)
        continue;
      for (guint j = 0; j < s->n_subs; j++)
        {
          const CsStmt *sub = s->subs[j];
          if (sub->kind == CS_STMT_CALL)
            {
              const guint32 *io = cs_stmt_io (sub);
              for (guint k = sub->n_in; k < sub->n_in + sub->n_out; k++)
                if (io[k] < m->n)
                  {
                    st->hidden_gen[io[k]] = gen;
                    st->hidden_at[io[k]] = i + 1;
                  }
              continue;
            }
          tmp.len = 0;
          _cs_stmt_writes_vec (sub, &tmp);
          for (guint k = 0; k < tmp.len; k++)
            {
              const CsProxy *p = tmp.v[k];
              if (p->id < m->n)
                {
                  st->hidden_gen[p->id] = gen;
                  st->hidden_at[p->id] = i + 1;
                }
            }
        }
      if (s->out != NULL && (s->out->kind == CS_VALUE_LIST || s->out->kind == CS_VALUE_TUPLE))
        for (guint j = 0; j < s->out->u.seq.n; j++)
          {
            const CsValue *it = s->out->u.seq.items[j];
            if (it->kind == CS_VALUE_PROXY && it->u.proxy->id < m->n)
              st->hidden_gen[it->u.proxy->id] = 0;
          }
    }
  _cs_proxy_vec_free (&tmp);
}

/* The backward walk of _cs_regions_refresh has met a read of proxy @id (< m->n) by the
 * statement at index @i: the value is needed, and when it is not visible, the fresh region
 * that holds it internally (if any, before @i) must be rebuilt. */
static inline void
refresh_note_read (const CsTrace *trace, Marks *m, guint32 id, guint i, guint32 visible_gen,
                   guint32 *hidden_gen, guint8 *stale)
{
  MarkStore *st = &m->st;

  st->needed[id] = m->needed_gen;
  if (st->visible[id] == visible_gen)
    return;
  if (*hidden_gen == 0)
    {
      *hidden_gen = ++st->gen;
      build_hidden (trace, m, *hidden_gen);
    }
  if (st->hidden_gen[id] == *hidden_gen && st->hidden_at[id] - 1 < i)
    stale[st->hidden_at[id] - 1] = 1;
}

/**
 * _cs_regions_refresh_with: (see cs-fuse-private.h)
 */
void
_cs_regions_refresh_with (CsTrace *trace, gboolean dce_top, CsRefreshMarks *marks)
{
  Marks *mp = &marks->m;
  MarkStore *st = &mp->st;
  CsStmtVec *kept = &marks->top_kept;
  CsProxyVec *tmp = &marks->top_tmp;
  guint32 visible_gen, hidden_gen = 0; /* hidden marks are built on first need */
  guint8 *stale;
  gboolean any_region = FALSE;

  /* without regions and without top-level DCE every statement stays as it is */
  for (guint i = 0; i < trace->n_stmts && !any_region && !dce_top; i++)
    any_region = _cs_stmt_is_region (trace->stmts[i]);
  if (!any_region && !dce_top)
    return;

  mp->n = trace->next_proxy_id + 1;
  mark_store_reserve (st, mp->n, trace->n_stmts);
  mp->needed_gen = ++st->gen;
  visible_gen = ++st->gen;
  if (marks->stale_cap < trace->n_stmts + 1)
    {
      marks->stale_cap = MAX (trace->n_stmts + 1, 2 * marks->stale_cap);
      g_free (marks->stale);
      marks->stale = g_new (guint8, marks->stale_cap);
    }
  stale = marks->stale;
  memset (stale, 0, trace->n_stmts + 1);
  kept->len = 0;

  /* A fresh region (left as is by the previous refresh) is rebuilt only when one of its
   * outputs is no longer needed or a later statement now reads one of its internal values;
   * otherwise rebuilding it would give the same region.  Values written at the top level
   * (region outputs included) and the signature's inputs are "visible"; only a read of
   * something else can be an internal value, and only then are the fresh regions' writes
   * swept to find which region holds it (build_hidden). */
  for (guint i = 0; i < trace->n_params; i++)
    {
      CsProxy *p = trace->params[i].name ? cs_trace_lookup_proxy (trace, trace->params[i].name)
                                         : NULL;
      if (p != NULL)
        mark_set (mp, st->visible, p, visible_gen);
    }
  for (guint i = 0; i < trace->n_stmts; i++)
    {
      const CsStmt *s = trace->stmts[i];

      if (i + 4 < trace->n_stmts)
        __builtin_prefetch (trace->stmts[i + 4]);
      if (i + 2 < trace->n_stmts && trace->stmts[i + 2]->kind == CS_STMT_CALL)
        __builtin_prefetch (cs_stmt_io (trace->stmts[i + 2]));
      if (s->kind == CS_STMT_CALL)
        {
          const guint32 *io = cs_stmt_io (s);
          for (guint k = s->n_in; k < s->n_in + s->n_out; k++)
            if (io[k] < mp->n)
              st->visible[io[k]] = visible_gen;
          continue;
        }
      tmp->len = 0;
      _cs_stmt_writes_vec (s, tmp);
      for (guint k = 0; k < tmp->len; k++)
        mark_set (mp, st->visible, tmp->v[k], visible_gen);
    }

  for (guint i = trace->n_stmts; i-- > 0;)
    {
      CsStmt *s = trace->stmts[i];

      if (i >= 4)
        __builtin_prefetch (trace->stmts[i - 4]);
      if (i >= 2 && trace->stmts[i - 2]->kind == CS_STMT_CALL)
        __builtin_prefetch (cs_stmt_io (trace->stmts[i - 2]));

      if (_cs_stmt_is_region (s))
        {
          if (!s->region_fresh || stale[i] || region_output_unneeded (s, mp))
            {
              /* rebuilt, in place when the trace owns it (it may be shared with the input) */
              s = cs_trace_own_stmt (trace, s);
              if (!region_refresh_one (trace, s, mp))
                continue;
            }
        }
      else if (dce_top && s->kind == CS_STMT_CALL && !stmt_dont_dce (s))
        {
          const guint32 *io = cs_stmt_io (s);
          gboolean live = FALSE;
          for (guint j = s->n_in; j < s->n_in + s->n_out && !live; j++)
            if (io[j] >= mp->n || st->needed[io[j]] == mp->needed_gen)
              live = TRUE;
          /* a bare call (no outputs) without DONT_DCE is kept: it may have effects we do
           * not model */
          if (!live && (s->n_out > 0 || s->out != NULL))
            continue;
        }
      _cs_stmt_vec_push (kept, s);
      if (s->kind == CS_STMT_CALL)
        {
          const guint32 *io = cs_stmt_io (s);
          for (guint j = 0; j < s->n_in; j++)
            if (io[j] < mp->n)
              refresh_note_read (trace, mp, io[j], i, visible_gen, &hidden_gen, stale);
          continue;
        }
      tmp->len = 0;
      _cs_stmt_reads_vec (s, tmp);
      for (guint j = 0; j < tmp->len; j++)
        if (tmp->v[j]->id < mp->n)
          refresh_note_read (trace, mp, tmp->v[j]->id, i, visible_gen, &hidden_gen, stale);
    }
  _cs_stmt_vec_reverse (kept);
  cs_trace_set_stmts (trace, kept->v, kept->len);
  kept->len = 0;
}

void
_cs_regions_refresh (CsTrace *trace, gboolean dce_top)
{
  CsRefreshMarks *marks = _cs_refresh_marks_new ();

  _cs_regions_refresh_with (trace, dce_top, marks);
  _cs_refresh_marks_free (marks);
}
