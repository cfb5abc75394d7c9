/* cs-cse.c: remove_redundant_casts, CSE and DCE (see cs-cse.h).
 *
 * Source: thunder/executors/nvfuserex_impl.py (remove_redundant_casts, nvFuser cse),
 * thunder/core/transform_common.py (cse_single_bsym, dce); reference/thunder-traces.md 7.1-7.3.
 */
#include "cs-config.h"

#include "cs-cse.h"
#include "cs-fuse-private.h"
#include "cs-ir-util.h"
#include "cs-ops.h"

#include <string.h>

/* ------------------------------------------------------------------------------------------ */
/* remove_redundant_casts                                                                      */

typedef struct
{
  CsProxyMap *repl;    /* proxy -> equivalent original proxy */
  CsProxyMap *inter;   /* cast output -> most original float source */
  CsProxyMap *one;     /* scratch: a single substitution */
  GHashTable *origin;  /* rounding=eager only (else NULL): cast output (CsProxy *) -> the op
                          of the cast that made it (GUINT_TO_POINTER (op_key ())) */
} CastMaps;

static void
cast_maps_init (CastMaps *m, CsRounding rounding)
{
  m->repl = _cs_proxy_map_new ();
  m->inter = _cs_proxy_map_new ();
  m->one = _cs_proxy_map_new ();
  m->origin = rounding == CS_ROUNDING_EAGER ? g_hash_table_new (NULL, NULL) : NULL;
}

static void
cast_maps_free (CastMaps *m)
{
  _cs_proxy_map_free (m->repl);
  _cs_proxy_map_free (m->inter);
  _cs_proxy_map_free (m->one);
  g_clear_pointer (&m->origin, g_hash_table_unref);
}

/* The eager op a statement belongs to: its statement of the initial trace (CsStmt.origin), the
 * grad pass's gradient accumulations (CsStmt.grad_sum) apart from the VJP that emitted them. */
static guint
op_key (const CsStmt *s)
{
  return (guint) s->origin * 2u + (s->grad_sum ? 1u : 0u);
}

/* rounding=eager: TRUE when the cast @s reads @x, the output of a cast of another user-level op
 * (op_key() differs): @x is that op's stored result, rounded to its dtype, and the look-through
 * stops there. */
static gboolean
crosses_op (const CastMaps *m, const CsStmt *s, CsProxy *x)
{
  gpointer made_by;

  if (m->origin == NULL || !g_hash_table_lookup_extended (m->origin, x, NULL, &made_by))
    return FALSE;
  return GPOINTER_TO_UINT (made_by) != op_key (s);
}

/* TRUE when @subs holds exactly @s's subsymbols (so the region need not be rebuilt). */
static gboolean
same_subs (const CsStmt *s, const CsStmtVec *subs)
{
  if (subs->len != s->n_subs)
    return FALSE;
  for (guint i = 0; i < subs->len; i++)
    if (subs->v[i] != s->subs[i])
      return FALSE;
  return TRUE;
}

/* @s with @subs as its subsymbols: @s itself when they are the same, else a copy @t owns. */
static CsStmt *
with_subs (CsTrace *t, CsStmt *s, const CsStmtVec *subs)
{
  if (same_subs (s, subs))
    return s;
  s = cs_trace_own_stmt (t, s);
  cs_stmt_set_subs (t, s, subs->v, subs->len);
  return s;
}

/* Processes one statement; returns FALSE when it is dropped. */
static gboolean
rrc_stmt (CsTrace *t, CsStmt **sp, CastMaps *m)
{
  CsProxy *x, *out, *orig;
  CsDtype to;
  CsStmt *s;

  s = *sp = _cs_stmt_remap_reads (t, *sp, m->repl);
  if (!_cs_stmt_is_cast (s, &x, &to))
    return TRUE;
  out = cs_stmt_get_output (s);
  if (out == NULL || x->kind != CS_PROXY_TENSOR || !x->typed || !cs_dtype_is_float (x->dtype)
      || !cs_dtype_is_float (to))
    return TRUE;
  orig = crosses_op (m, s, x) ? NULL : _cs_proxy_map_lookup (m->inter, x);
  if (orig == NULL)
    orig = x;
  if (orig->dtype == to)
    {
      _cs_proxy_map_add (m->repl, out, orig);
      return FALSE;
    }
  if (orig != x)
    {
      /* only the cast's own input is rewritten (its first argument) */
      _cs_proxy_map_clear (m->one);
      _cs_proxy_map_insert (m->one, x, orig);
      *sp = _cs_stmt_remap_reads (t, s, m->one);
    }
  _cs_proxy_map_insert (m->inter, out, orig);
  if (m->origin != NULL)
    g_hash_table_insert (m->origin, out, GUINT_TO_POINTER (op_key (s)));
  return TRUE;
}

/* ------------------------------------------------------------------------------------------ */
/* A region's signature after a substitution                                                   */

/* TRUE when @v (a proxy value) names @p. */
static gboolean
value_is (const CsValue *v, const CsProxy *p)
{
  return v != NULL && v->kind == CS_VALUE_PROXY && v->u.proxy == p;
}

/* The region call @s with its outputs through @inner, then @outer (each output that @inner
 * does not map), and its outputs and arguments each listed once, in their order: Thunder's
 * remove_redundant_casts and nvFuserExecutor.cse rebuild a fusion's outputs so
 * (from_bsym_swap_proxies with skip_output=False, then the dedup of bsym.output; cse also
 * dedups bsym.args).  An output a removed cast made is replaced by the value the cast chain
 * started from: an earlier value of the region, or one of its inputs, which stays listed as an
 * output (`[t371, t349] = nvFusion2(t371)`; the later statements read that input).  Returns
 * @s itself when nothing changes, else a copy @t owns. */
static CsStmt *
remap_region_signature (CsTrace *t, CsStmt *s, const CsProxyMap *inner,
                        const CsProxyMap *outer)
{
  const CsValue *o = s->out;
  gboolean change = FALSE;
  guint n_out = 0, n_args = 0;
  g_autofree CsValue **items = NULL;
  g_autofree CsArg *args = NULL;

  if (o == NULL || (o->kind != CS_VALUE_LIST && o->kind != CS_VALUE_TUPLE))
    return s;
  items = g_new (CsValue *, MAX (o->u.seq.n, 1));
  for (guint i = 0; i < o->u.seq.n; i++)
    {
      CsValue *it = o->u.seq.items[i];
      gboolean dup = FALSE;
      if (it->kind == CS_VALUE_PROXY)
        {
          CsProxy *q = _cs_proxy_map_lookup (inner, it->u.proxy);
          if (q == NULL && outer != NULL)
            q = _cs_proxy_map_lookup (outer, it->u.proxy);
          if (q != NULL && q != it->u.proxy)
            {
              it = cs_value_new_proxy (t->arena, q);
              change = TRUE;
            }
          for (guint k = 0; k < n_out && !dup; k++)
            dup = value_is (items[k], it->u.proxy);
        }
      if (dup)
        change = TRUE;
      else
        items[n_out++] = it;
    }
  args = g_new (CsArg, MAX (s->n_args, 1));
  for (guint i = 0; i < s->n_args; i++)
    {
      const CsValue *v = s->args[i].value;
      gboolean dup = FALSE;
      for (guint k = 0; k < n_args && !dup && v->kind == CS_VALUE_PROXY; k++)
        dup = value_is (args[k].value, v->u.proxy);
      if (dup)
        change = TRUE;
      else
        args[n_args++] = s->args[i];
    }
  if (!change)
    return s;
  s = cs_trace_own_stmt (t, s);
  {
    CsArg *own_args = CS_ARENA_NEW_N (t->arena, CsArg, MAX (n_args, 1));
    memcpy (own_args, args, sizeof (CsArg) * n_args);
    cs_stmt_set_call (t, s, own_args, n_args,
                      cs_value_new_seq (t->arena, o->kind,
                                        (CsValue **) cs_arena_dup_ptrs (t->arena,
                                                                        (gpointer const *) items,
                                                                        n_out),
                                        n_out));
  }
  s->region_fresh = 0;
  return s;
}

/* ------------------------------------------------------------------------------------------ */
/* remove_redundant_casts: the driver                                                          */

/* A region's subsymbols through fresh inner maps (@inner emptied first; its repl then holds
 * the region's replaced outputs, for the statements after the region).  Returns the region. */
static CsStmt *
rrc_region (CsTrace *t, CsStmt *s, CastMaps *inner, CsStmtVec *subs)
{
  _cs_proxy_map_clear (inner->repl);
  _cs_proxy_map_clear (inner->inter);
  if (inner->origin != NULL)
    g_hash_table_remove_all (inner->origin);
  subs->len = 0;
  for (guint j = 0; j < s->n_subs; j++)
    {
      CsStmt *sub = s->subs[j];
      if (rrc_stmt (t, &sub, inner))
        _cs_stmt_vec_push (subs, sub);
    }
  return with_subs (t, s, subs);
}

/**
 * cs_cse_remove_redundant_casts_rounding: (see cs-cse.h)
 *
 * One walk over the top level with the outer maps; each region is first remapped through the
 * outer substitution (outputs earlier regions replaced), then rewritten with inner maps that
 * start empty, whose replacements the outer map takes over.
 */
CsTrace *
cs_cse_remove_redundant_casts_rounding (const CsTrace *trace, CsRounding rounding)
{
  g_autoptr(CsTrace) t = NULL;
  g_auto(CsStmtVec) kept = CS_STMT_VEC_INIT;
  g_auto(CsStmtVec) subs = CS_STMT_VEC_INIT;
  CastMaps outer, inner;

  g_return_val_if_fail (trace != NULL, NULL);

  t = cs_trace_derive_shared (trace, "remove-redundant-casts");
  cast_maps_init (&outer, rounding);
  cast_maps_init (&inner, rounding);
  for (guint i = 0; i < t->n_stmts; i++)
    {
      CsStmt *s = t->stmts[i];

      if (_cs_stmt_is_nvfusion (s))
        {
          /* replaced region outputs: later statements read the original instead */
          s = rrc_region (t, _cs_stmt_remap_reads (t, s, outer.repl), &inner, &subs);
          s = remap_region_signature (t, s, inner.repl, NULL);
          _cs_proxy_map_absorb (outer.repl, inner.repl);
          _cs_stmt_vec_push (&kept, s);
          continue;
        }
      if (rrc_stmt (t, &s, &outer))
        _cs_stmt_vec_push (&kept, s);
    }
  cs_trace_set_stmts (t, kept.v, kept.len);
  cast_maps_free (&outer);
  cast_maps_free (&inner);
  return g_steal_pointer (&t);
}

/**
 * cs_cse_remove_redundant_casts: (see cs-cse.h)
 */
CsTrace *
cs_cse_remove_redundant_casts (const CsTrace *trace)
{
  return cs_cse_remove_redundant_casts_rounding (trace, CS_ROUNDING_FUSED);
}

/* ------------------------------------------------------------------------------------------ */
/* CSE                                                                                         */

static guint
value_hash (const CsValue *v, guint depth)
{
  guint h;

  if (v == NULL || depth > 32)
    return 7;
  h = (guint) v->kind * 2654435761u;
  switch (v->kind)
    {
    case CS_VALUE_BOOL:
      return h ^ (guint) v->u.b;
    case CS_VALUE_INT:
      return h ^ g_int64_hash (&v->u.i);
    case CS_VALUE_FLOAT:
      return h ^ g_double_hash (&v->u.f);
    case CS_VALUE_COMPLEX:
      return h ^ g_double_hash (&v->u.c.re) ^ (g_double_hash (&v->u.c.im) << 1);
    case CS_VALUE_STRING:
    case CS_VALUE_NAME:
      return h ^ g_str_hash (v->u.s ? v->u.s : "");
    case CS_VALUE_PROXY:
      /* proxies are 64-byte aligned (cs_proxy_alloc): their address's low bits say nothing */
      return h ^ (guint) ((guintptr) v->u.proxy >> 6);
    case CS_VALUE_DTYPE:
      return h ^ ((guint) v->u.dtype.dtype << 8) ^ ((guint) v->u.dtype.weak << 4)
             ^ v->u.dtype.pytype;
    case CS_VALUE_TUPLE:
    case CS_VALUE_LIST:
    case CS_VALUE_DICT:
    case CS_VALUE_SUBSCRIPT:
    case CS_VALUE_ATTR:
      for (guint i = 0; i < v->u.seq.n; i++)
        h = h * 31 + value_hash (v->u.seq.items[i], depth + 1);
      return h;
    case CS_VALUE_CALL:
      h ^= g_str_hash (v->u.call.callee ? v->u.call.callee : "");
      for (guint i = 0; i < v->u.call.n_args; i++)
        h = h * 31 + value_hash (v->u.call.args[i].value, depth + 1);
      return h;
    default:
      return h;
    }
}

static gboolean
value_eq (const CsValue *a, const CsValue *b, guint depth)
{
  if (a == b)
    return TRUE;
  if (a == NULL || b == NULL || a->kind != b->kind || depth > 32)
    return FALSE;
  switch (a->kind)
    {
    case CS_VALUE_BOOL:
      return !a->u.b == !b->u.b;
    case CS_VALUE_INT:
      return a->u.i == b->u.i;
    case CS_VALUE_FLOAT:
      /* bit equality: 0.0 and -0.0 differ, NaN equals itself */
      return memcmp (&a->u.f, &b->u.f, sizeof (double)) == 0;
    case CS_VALUE_COMPLEX:
      return memcmp (&a->u.c, &b->u.c, sizeof a->u.c) == 0;
    case CS_VALUE_STRING:
    case CS_VALUE_NAME:
      return g_strcmp0 (a->u.s, b->u.s) == 0;
    case CS_VALUE_PROXY:
      return a->u.proxy == b->u.proxy;
    case CS_VALUE_DTYPE:
      return a->u.dtype.dtype == b->u.dtype.dtype && a->u.dtype.weak == b->u.dtype.weak
             && a->u.dtype.pytype == b->u.dtype.pytype;
    case CS_VALUE_TUPLE:
    case CS_VALUE_LIST:
    case CS_VALUE_DICT:
    case CS_VALUE_SUBSCRIPT:
    case CS_VALUE_ATTR:
      if (a->u.seq.n != b->u.seq.n
          || (a->kind == CS_VALUE_ATTR && g_strcmp0 (a->u.seq.attr, b->u.seq.attr) != 0))
        return FALSE;
      for (guint i = 0; i < a->u.seq.n; i++)
        if (!value_eq (a->u.seq.items[i], b->u.seq.items[i], depth + 1))
          return FALSE;
      return TRUE;
    case CS_VALUE_CALL:
      if (g_strcmp0 (a->u.call.callee, b->u.call.callee) != 0 || a->u.call.n_args != b->u.call.n_args)
        return FALSE;
      for (guint i = 0; i < a->u.call.n_args; i++)
        if (g_strcmp0 (a->u.call.args[i].name, b->u.call.args[i].name) != 0
            || !value_eq (a->u.call.args[i].value, b->u.call.args[i].value, depth + 1))
          return FALSE;
      return TRUE;
    default:
      return TRUE; /* NONE, UNDERSCORE, ELLIPSIS */
    }
}

/* TRUE when @s may be merged with an equal statement (Thunder's cse_single_bsym rules). */
static gboolean
cse_eligible (const CsStmt *s)
{
  const CsOp *sem;

  if (s->kind != CS_STMT_CALL || s->op == NULL || s->out == NULL || _cs_stmt_is_region (s))
    return FALSE;
  sem = cs_op_semantic (s->op);
  if ((s->op->tags | sem->tags) & (CS_OP_TAG_RANDOM | CS_OP_TAG_DONT_DCE))
    return FALSE;
  if (sem->category == CS_OP_CAT_ATTENTION || sem->id == CS_OP_PRIM_GET_GRAD
      || sem->category == CS_OP_CAT_OPAQUE || sem->category == CS_OP_CAT_BOOKKEEPING)
    return FALSE;
  return TRUE;
}

/* The CSE key: (op, callee, BACKWARD flag, arguments with proxies resolved). */
static guint
cse_hash (gconstpointer p)
{
  const CsStmt *s = p;
  /* statements with the same op and callee hash alike: the callee string (compared by
   * cse_equal) is not hashed */
  guint h = (guint) s->op->id * 40503u ^ (s->backward ? 0x9e3779b9u : 0);
  for (guint i = 0; i < s->n_args; i++)
    h = h * 31 + value_hash (s->args[i].value, 0)
        + (s->args[i].name ? g_str_hash (s->args[i].name) : 0);
  /* the set probes linearly from the low bits: mix every bit into them (murmur3's finalizer) */
  h ^= h >> 16;
  h *= 0x85ebca6bu;
  h ^= h >> 13;
  h *= 0xc2b2ae35u;
  h ^= h >> 16;
  return h;
}

static gboolean
cse_equal (gconstpointer pa, gconstpointer pb)
{
  const CsStmt *a = pa, *b = pb;
  if (a->op != b->op || !a->backward != !b->backward || a->n_args != b->n_args
      || g_strcmp0 (a->callee, b->callee) != 0)
    return FALSE;
  for (guint i = 0; i < a->n_args; i++)
    if (g_strcmp0 (a->args[i].name, b->args[i].name) != 0
        || !value_eq (a->args[i].value, b->args[i].value, 0))
      return FALSE;
  return TRUE;
}

/* Maps the outputs of @dup to those of @orig; FALSE when their shapes differ. */
static gboolean
map_outputs (CsProxyMap *map, const CsStmt *dup, const CsStmt *orig)
{
  g_auto(CsProxyVec) a = CS_PROXY_VEC_INIT;
  g_auto(CsProxyVec) b = CS_PROXY_VEC_INIT;

  _cs_stmt_writes_vec (dup, &a);
  _cs_stmt_writes_vec (orig, &b);
  if (a.len != b.len || a.len == 0)
    return FALSE;
  for (guint i = 0; i < a.len; i++)
    if (a.v[i] != b.v[i])
      _cs_proxy_map_add (map, a.v[i], b.v[i]);
  return TRUE;
}

/* The set of statements seen so far, keyed by cse_hash/cse_equal: open addressing with
 * linear probing, each slot keeping the hash (a probe compares statements only on equal
 * hashes).  Emptied per region by clearing the slots in use, so one set serves every region. */
typedef struct
{
  CsStmt **stmt;   /* cap slots, NULL = free */
  guint   *hash;   /* hash of the statement in the slot */
  guint    cap;    /* power of two */
  guint    len;    /* statements in the set */
  GArray  *used;   /* guint: indices of the slots in use (for clearing) */
} StmtSet;

static void
stmt_set_init (StmtSet *set)
{
  set->cap = 64;
  set->len = 0;
  set->stmt = g_new0 (CsStmt *, set->cap);
  set->hash = g_new0 (guint, set->cap);
  set->used = g_array_new (FALSE, FALSE, sizeof (guint));
}

static void
stmt_set_clear (StmtSet *set)
{
  for (guint i = 0; i < set->used->len; i++)
    set->stmt[g_array_index (set->used, guint, i)] = NULL;
  g_array_set_size (set->used, 0);
  set->len = 0;
}

static void
stmt_set_free (StmtSet *set)
{
  g_free (set->stmt);
  g_free (set->hash);
  g_array_unref (set->used);
}

/* The statement equal to @s in @set, or NULL; *slot receives where @s would go. */
static CsStmt *
stmt_set_find (const StmtSet *set, CsStmt *s, guint h, guint *slot)
{
  guint i = h & (set->cap - 1);

  while (set->stmt[i] != NULL)
    {
      if (set->hash[i] == h && cse_equal (set->stmt[i], s))
        return set->stmt[i];
      i = (i + 1) & (set->cap - 1);
    }
  *slot = i;
  return NULL;
}

static void
stmt_set_put (StmtSet *set, CsStmt *s, guint h, guint slot);

static void
stmt_set_grow (StmtSet *set)
{
  CsStmt **old = set->stmt;
  guint *old_hash = set->hash, old_cap = set->cap, slot;
  g_autoptr(GArray) old_used = set->used;

  set->cap *= 2;
  set->stmt = g_new0 (CsStmt *, set->cap);
  set->hash = g_new0 (guint, set->cap);
  set->used = g_array_new (FALSE, FALSE, sizeof (guint));
  set->len = 0;
  for (guint i = 0; i < old_cap; i++)
    if (old[i] != NULL)
      {
        stmt_set_find (set, old[i], old_hash[i], &slot);
        stmt_set_put (set, old[i], old_hash[i], slot);
      }
  g_free (old);
  g_free (old_hash);
}

/* Puts @s (not in @set, @slot from stmt_set_find) into @set. */
static void
stmt_set_put (StmtSet *set, CsStmt *s, guint h, guint slot)
{
  set->stmt[slot] = s;
  set->hash[slot] = h;
  g_array_append_val (set->used, slot);
  if (++set->len * 2 > set->cap)
    stmt_set_grow (set);
}

/* Returns FALSE when @s is a duplicate (dropped).  @seen is a set of statements keyed by
 * cse_hash/cse_equal (their arguments are already rewritten through @map). */
static gboolean
cse_stmt (CsTrace *t, CsStmt **sp, CsProxyMap *map, StmtSet *seen)
{
  CsStmt *prev, *s;
  guint h, slot = 0;

  s = *sp = _cs_stmt_remap_reads (t, *sp, map);
  if (!cse_eligible (s))
    return TRUE;
  h = cse_hash (s);
  prev = stmt_set_find (seen, s, h, &slot);
  if (prev != NULL && map_outputs (map, s, prev))
    return FALSE;
  if (prev == NULL)
    stmt_set_put (seen, s, h, slot);
  return TRUE;
}

/* A region's subsymbols through a fresh inner map and set (@map and @seen emptied first;
 * @map then holds the region's duplicate outputs, for the statements after the region).
 * Returns the region. */
static CsStmt *
cse_region (CsTrace *t, CsStmt *s, CsProxyMap *map, StmtSet *seen, CsStmtVec *subs)
{
  _cs_proxy_map_clear (map);
  stmt_set_clear (seen);
  subs->len = 0;
  for (guint j = 0; j < s->n_subs; j++)
    {
      CsStmt *sub = s->subs[j];
      if (cse_stmt (t, &sub, map, seen))
        _cs_stmt_vec_push (subs, sub);
    }
  return with_subs (t, s, subs);
}

/**
 * cs_cse_trace: (see cs-cse.h)
 *
 * One walk over the top level, as cs_cse_remove_redundant_casts() walks it: a region is
 * remapped through the outer map, then deduplicated inside with an inner map and set that
 * start empty; the outer map takes over the inner one's entries.
 */
CsTrace *
cs_cse_trace (const CsTrace *trace)
{
  g_autoptr(CsTrace) t = NULL;
  g_auto(CsStmtVec) kept = CS_STMT_VEC_INIT;
  g_auto(CsStmtVec) subs = CS_STMT_VEC_INIT;
  g_autoptr(CsProxyMap) map = _cs_proxy_map_new ();
  g_autoptr(CsProxyMap) inner = _cs_proxy_map_new ();
  StmtSet seen, inner_seen;

  g_return_val_if_fail (trace != NULL, NULL);

  t = cs_trace_derive_shared (trace, "cse");
  stmt_set_init (&seen);
  stmt_set_init (&inner_seen);
  for (guint i = 0; i < t->n_stmts; i++)
    {
      CsStmt *s = t->stmts[i];

      if (_cs_stmt_is_nvfusion (s))
        {
          s = cse_region (t, _cs_stmt_remap_reads (t, s, map), inner, &inner_seen, &subs);
          s = remap_region_signature (t, s, inner, map);
          _cs_proxy_map_absorb (map, inner);
          _cs_stmt_vec_push (&kept, s);
          continue;
        }
      if (cse_stmt (t, &s, map, &seen))
        _cs_stmt_vec_push (&kept, s);
    }
  cs_trace_set_stmts (t, kept.v, kept.len);
  stmt_set_free (&seen);
  stmt_set_free (&inner_seen);
  _cs_regions_refresh (t, FALSE);
  return g_steal_pointer (&t);
}

/**
 * cs_cse_dce: (see cs-cse.h)
 */
CsTrace *
cs_cse_dce (const CsTrace *trace)
{
  CsTrace *t;

  g_return_val_if_fail (trace != NULL, NULL);
  t = cs_trace_derive_shared (trace, "dce");
  _cs_regions_refresh (t, TRUE);
  _cs_trace_compact_proxies (t);
  return t;
}
