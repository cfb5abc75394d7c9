/* cs-ir-util.c: the IR services the passes share (see cs-ir-util.h): proxy maps, remapping
 * reads copy-on-write, the reads and writes of a statement, flattening, casts, the proxy
 * compaction.
 */
#include "cs-config.h"

#include "cs-ir-util.h"
#include "cs-ops.h"
#include "cs-ops-args.h"

#include <string.h>

const char *
_cs_arena_concat (CsArena *arena, const char *a, const char *b, const char *c)
{
  gsize la = strlen (a), lb = strlen (b), lc = strlen (c);
  char *d = cs_arena_alloc (arena, la + lb + lc + 1);   /* zeroed: the terminator is there */

  memcpy (d, a, la);
  memcpy (d + la, b, lb);
  memcpy (d + la + lb, c, lc);
  return d;
}

/* ------------------------------------------------------------------------------------------ */
/* Proxy maps                                                                                  */

#define MAP_WORDS(cap) (((gsize) (cap) + 63) / 64)

/* Makes room for ids below @cap (rounded up to whole chunks): new bits clear, new chunk
 * pointers NULL. */
static void
map_grow (CsProxyMap *m, guint32 cap)
{
  guint32 old_chunks = m->cap / CS_PROXY_MAP_CHUNK, n_chunks;

  cap = (cap + CS_PROXY_MAP_CHUNK - 1) & ~(CS_PROXY_MAP_CHUNK - 1);
  n_chunks = cap / CS_PROXY_MAP_CHUNK;
  m->chunks = g_renew (CsProxyMapSlot *, m->chunks, n_chunks);
  memset (m->chunks + old_chunks, 0, (n_chunks - old_chunks) * sizeof (CsProxyMapSlot *));
  m->bits = g_renew (guint64, m->bits, MAP_WORDS (cap));
  memset (m->bits + MAP_WORDS (m->cap), 0,
          (MAP_WORDS (cap) - MAP_WORDS (m->cap)) * sizeof (guint64));
  m->cap = cap;
}

CsProxyMap *
_cs_proxy_map_new (void)
{
  return g_new0 (CsProxyMap, 1);
}

void
_cs_proxy_map_free (CsProxyMap *map)
{
  if (map == NULL)
    return;
  for (guint32 c = 0; c < map->cap / CS_PROXY_MAP_CHUNK; c++)
    g_free (map->chunks[c]);
  g_free (map->chunks);
  g_free (map->bits);
  _cs_proxy_vec_free (&map->keys);
  if (map->other)
    g_hash_table_unref (map->other);
  g_free (map);
}

void
_cs_proxy_map_clear (CsProxyMap *map)
{
  for (guint i = 0; i < map->keys.len; i++)
    {
      const CsProxy *k = map->keys.v[i];
      if (k->id < map->cap && (map->bits[k->id / 64] & ((guint64) 1 << (k->id % 64)))
          && _cs_proxy_map_slot (map, k->id)->from == k)
        {
          CsProxyMapSlot *slot = _cs_proxy_map_slot (map, k->id);
          slot->from = slot->to = NULL;
          map->bits[k->id / 64] &= ~((guint64) 1 << (k->id % 64));
        }
    }
  map->keys.len = 0;
  if (map->other)
    g_hash_table_remove_all (map->other);
}

guint
_cs_proxy_map_size (const CsProxyMap *map)
{
  return map->keys.len;
}

CsProxy *
_cs_proxy_map_key (const CsProxyMap *map, guint i)
{
  return map->keys.v[i];
}

CsProxy *
_cs_proxy_map_lookup_other (const CsProxyMap *map, const CsProxy *from)
{
  return map->other ? g_hash_table_lookup (map->other, from) : NULL;
}

void
_cs_proxy_map_insert (CsProxyMap *map, CsProxy *from, CsProxy *to)
{
  guint32 id = from->id;

  if (id != 0 && id >= map->cap)
    map_grow (map, MAX (id + 1, MAX (map->cap * 2, CS_PROXY_MAP_CHUNK)));
  if (id != 0)
    {
      CsProxyMapSlot **chunk = &map->chunks[id >> CS_PROXY_MAP_CHUNK_BITS];
      CsProxyMapSlot *slot;
      if (*chunk == NULL)
        *chunk = g_new0 (CsProxyMapSlot, CS_PROXY_MAP_CHUNK);
      slot = &(*chunk)[id & (CS_PROXY_MAP_CHUNK - 1)];
      if (slot->from == NULL || slot->from == from)
        {
          if (slot->from == NULL)
            {
              _cs_proxy_vec_push (&map->keys, from);
              map->bits[id / 64] |= (guint64) 1 << (id % 64);
            }
          slot->from = from;
          slot->to = to;
          return;
        }
    }
  if (map->other == NULL)
    map->other = g_hash_table_new (g_direct_hash, g_direct_equal);
  if (!g_hash_table_contains (map->other, from))
    _cs_proxy_vec_push (&map->keys, from);
  g_hash_table_insert (map->other, from, to);
}


void
_cs_proxy_map_add (CsProxyMap *map, CsProxy *from, CsProxy *to)
{
  to = _cs_proxy_map_resolve (map, to);
  if (from != to)
    _cs_proxy_map_insert (map, from, to);
}

void
_cs_proxy_map_absorb (CsProxyMap *dst, const CsProxyMap *src)
{
  for (guint k = 0; k < _cs_proxy_map_size (src); k++)
    {
      CsProxy *from = _cs_proxy_map_key (src, k);
      _cs_proxy_map_add (dst, from, _cs_proxy_map_resolve (src, _cs_proxy_map_lookup (src, from)));
    }
}

/* The value @v (kind PROXY) through @map: @v itself when its proxy is unmapped. */
static inline CsValue *
remap_proxy_value (CsArena *arena, CsValue *v, const CsProxyMap *map)
{
  CsProxy *q = _cs_proxy_map_resolve (map, v->u.proxy);

  return q == v->u.proxy ? v : cs_value_new_proxy (arena, q);
}

CsValue *
_cs_value_remap (CsArena *arena, CsValue *v, const CsProxyMap *map)
{
  if (v == NULL || _cs_proxy_map_size (map) == 0)
    return v;
  switch (v->kind)
    {
    case CS_VALUE_PROXY:
      return remap_proxy_value (arena, v, map);
    case CS_VALUE_TUPLE:
    case CS_VALUE_LIST:
    case CS_VALUE_DICT:
    case CS_VALUE_SUBSCRIPT:
    case CS_VALUE_ATTR:
      {
        CsValue **items = NULL;
        for (guint i = 0; i < v->u.seq.n; i++)
          {
            CsValue *ni = _cs_value_remap (arena, v->u.seq.items[i], map);
            if (ni != v->u.seq.items[i] && items == NULL)
              {
                items = CS_ARENA_NEW_N (arena, CsValue *, v->u.seq.n);
                memcpy (items, v->u.seq.items, sizeof (CsValue *) * v->u.seq.n);
              }
            if (items)
              items[i] = ni;
          }
        if (items == NULL)
          return v;
        {
          CsValue *nv = CS_ARENA_NEW (arena, CsValue);
          *nv = *v;
          nv->u.seq.items = items;
          return nv;
        }
      }
    case CS_VALUE_CALL:
      {
        CsArg *args = NULL;
        for (guint i = 0; i < v->u.call.n_args; i++)
          {
            CsValue *ni = _cs_value_remap (arena, v->u.call.args[i].value, map);
            if (ni != v->u.call.args[i].value && args == NULL)
              {
                args = CS_ARENA_NEW_N (arena, CsArg, v->u.call.n_args);
                memcpy (args, v->u.call.args, sizeof (CsArg) * v->u.call.n_args);
              }
            if (args)
              args[i].value = ni;
          }
        if (args == NULL)
          return v;
        {
          CsValue *nv = CS_ARENA_NEW (arena, CsValue);
          *nv = *v;
          nv->u.call.args = args;
          return nv;
        }
      }
    default:
      return v;
    }
}

CsStmt *
_cs_stmt_remap_reads (CsTrace *trace, CsStmt *stmt, const CsProxyMap *map)
{
  CsArena *arena = trace->arena;
  CsArg *args = NULL;
  /* value and source are read only for the kinds that have them: they lie outside the
   * statement's first cache line, and most statements are calls */
  CsValue *value = NULL;
  CsProxy *source = NULL, **names = NULL;
  gboolean new_value = FALSE, new_source = FALSE;
  CsStmt **subs = NULL, *own;

  if (_cs_proxy_map_size (map) == 0)
    return stmt;
  switch (stmt->kind)
    {
    case CS_STMT_CALL:
      {
        /* the stored read ids first: the arguments are walked only when one may be mapped */
        const guint32 *io = cs_stmt_io (stmt);
        gboolean any = FALSE;
        for (guint i = 0; i < stmt->n_in && !any; i++)
          any = _cs_proxy_map_may_hold_id (map, io[i]);
        if (!any)
          break;
      }
      for (guint i = 0; i < stmt->n_args; i++)
        {
          CsValue *v = stmt->args[i].value, *ni = v;
          /* proxies and literals inline; nested values through _cs_value_remap */
          if (v->kind == CS_VALUE_PROXY)
            ni = remap_proxy_value (arena, v, map);
          else if (v->kind >= CS_VALUE_TUPLE)
            ni = _cs_value_remap (arena, v, map);
          if (ni != stmt->args[i].value && args == NULL)
            {
              args = CS_ARENA_NEW_N (arena, CsArg, stmt->n_args);
              memcpy (args, stmt->args, sizeof (CsArg) * stmt->n_args);
            }
          if (args)
            args[i].value = ni;
        }
      break;
    case CS_STMT_RETURN:
    case CS_STMT_ANNASSIGN:
      value = _cs_value_remap (arena, stmt->value, map);
      new_value = value != stmt->value;
      break;
    case CS_STMT_UNPACK:
      if (stmt->source)
        {
          source = _cs_proxy_map_resolve (map, stmt->source);
          new_source = source != stmt->source;
        }
      break;
    case CS_STMT_DEL:
      for (guint i = 0; i < stmt->n_names; i++)
        {
          CsProxy *q = _cs_proxy_map_resolve (map, stmt->names[i]);
          if (q != stmt->names[i] && names == NULL)
            names = (CsProxy **) cs_arena_dup_ptrs (arena, (gpointer const *) stmt->names,
                                                    stmt->n_names);
          if (names)
            names[i] = q;
        }
      break;
    default:
      break;
    }
  /* a fresh region's arguments are exactly the outside values its subsymbols read: when none
   * of them is mapped, no subsymbol needs a look */
  if (args == NULL && stmt->region_fresh && _cs_stmt_is_region (stmt))
    return stmt;
  for (guint i = 0; i < stmt->n_subs; i++)
    {
      CsStmt *ns = _cs_stmt_remap_reads (trace, stmt->subs[i], map);
      if (ns != stmt->subs[i] && subs == NULL)
        subs = (CsStmt **) cs_arena_dup_ptrs (arena, (gpointer const *) stmt->subs, stmt->n_subs);
      if (subs)
        subs[i] = ns;
    }
  if (args == NULL && !new_value && !new_source && names == NULL && subs == NULL)
    return stmt;
  own = cs_trace_own_stmt (trace, stmt);
  own->region_fresh = 0;
  if (args)
    cs_stmt_set_args (trace, own, args, own->n_args);
  if (new_value)
    own->value = value;
  if (new_source)
    own->source = source;
  if (names)
    own->names = names;
  if (subs)
    own->subs = subs;
  return own;
}

/* The grow and free functions of CsProxyVec and CsStmtVec (same layout, element type @Elem):
 * the first push moves to the inline storage, the next growth copies it to the heap, later
 * ones double the heap array. */
#define DEFINE_PTR_VEC_OPS(Vec, Elem, grow, free_)                                             \
  void                                                                                        \
  grow (Vec *a)                                                                               \
  {                                                                                           \
    if (a->cap == 0)                                                                          \
      {                                                                                       \
        a->v = a->inl;                                                                        \
        a->cap = G_N_ELEMENTS (a->inl);                                                       \
      }                                                                                       \
    else if (a->v == a->inl)                                                                  \
      {                                                                                       \
        a->v = g_new (Elem, a->cap * 2);                                                      \
        memcpy (a->v, a->inl, sizeof a->inl);                                                 \
        a->cap *= 2;                                                                          \
      }                                                                                       \
    else                                                                                      \
      {                                                                                       \
        a->cap *= 2;                                                                          \
        a->v = g_renew (Elem, a->v, a->cap);                                                  \
      }                                                                                       \
  }                                                                                           \
                                                                                              \
  void                                                                                        \
  free_ (Vec *a)                                                                              \
  {                                                                                           \
    if (a->v != a->inl)                                                                       \
      g_free (a->v);                                                                          \
    a->v = NULL;                                                                              \
    a->len = a->cap = 0;                                                                      \
  }

DEFINE_PTR_VEC_OPS (CsProxyVec, CsProxy *, _cs_proxy_vec_grow, _cs_proxy_vec_free)
DEFINE_PTR_VEC_OPS (CsStmtVec, CsStmt *, _cs_stmt_vec_grow, _cs_stmt_vec_free)

static gboolean
push_proxy (CsProxy *p, gpointer out)
{
  _cs_proxy_vec_push (out, p);
  return FALSE;
}

void
_cs_value_proxies_vec (const CsValue *v, CsProxyVec *out)
{
  cs_value_any_proxy (v, push_proxy, out);
}

/* The GPtrArray forms, for callers off the hot paths: one traversal, kept in the _vec forms. */
static void
vec_append_to (CsProxyVec *v, GPtrArray *out)
{
  for (guint i = 0; i < v->len; i++)
    g_ptr_array_add (out, v->v[i]);
  _cs_proxy_vec_free (v);
}

void
_cs_stmt_reads (const CsStmt *stmt, GPtrArray *out)
{
  CsProxyVec v = CS_PROXY_VEC_INIT;
  _cs_stmt_reads_vec (stmt, &v);
  vec_append_to (&v, out);
}

void
_cs_stmt_writes (const CsStmt *stmt, GPtrArray *out)
{
  CsProxyVec v = CS_PROXY_VEC_INIT;
  _cs_stmt_writes_vec (stmt, &v);
  vec_append_to (&v, out);
}

gboolean
_cs_stmt_is_region (const CsStmt *stmt)
{
  return stmt->kind == CS_STMT_CALL && stmt->op != NULL && cs_op_is_fusion (stmt->op);
}

gboolean
_cs_stmt_is_nvfusion (const CsStmt *stmt)
{
  return _cs_stmt_is_region (stmt)
         && (stmt->callee == NULL || g_str_has_prefix (stmt->callee, "nvFusion"));
}

gboolean
_cs_sub_needs_tags (const CsStmt *sub, const CsStmt *stmt)
{
  return (sub->origin == 0 && stmt->origin != 0) || !sub->backward != !stmt->backward
         || (stmt->grad_sum && !sub->grad_sum);
}

void
_cs_sub_take_tags (CsStmt *sub, const CsStmt *stmt)
{
  if (sub->origin == 0)
    sub->origin = stmt->origin;
  sub->backward = stmt->backward;
  sub->grad_sum |= stmt->grad_sum;
}

void
_cs_stmt_flatten (CsTrace *trace, CsStmt *stmt, CsStmtVec *out)
{
  if (stmt->kind != CS_STMT_CALL || stmt->n_subs == 0
      || cs_op_has_tag (stmt->op, CS_OP_TAG_PRIM))
    {
      _cs_stmt_vec_push (out, stmt);
      return;
    }
  for (guint i = 0; i < stmt->n_subs; i++)
    {
      CsStmt *sub = stmt->subs[i];
      if (trace != NULL && _cs_sub_needs_tags (sub, stmt))
        {
          /* the subsymbol may be shared with the input trace: edit a private copy */
          sub = cs_trace_own_stmt (trace, sub);
          _cs_sub_take_tags (sub, stmt);
        }
      _cs_stmt_flatten (trace, sub, out);
    }
}

gboolean
_cs_stmt_is_cast (const CsStmt *stmt, CsProxy **in, CsDtype *to)
{
  const CsOp *sem;
  CsValue *a, *d;

  if (stmt->kind != CS_STMT_CALL || stmt->op == NULL)
    return FALSE;
  sem = cs_op_semantic (stmt->op);
  if (sem->id != CS_OP_PRIM_CONVERT_ELEMENT_TYPE)
    return FALSE;
  a = cs_stmt_arg (stmt, CS_ARG_A);
  d = cs_stmt_arg (stmt, CS_ARG_DTYPE);
  if (a == NULL || a->kind != CS_VALUE_PROXY || d == NULL || d->kind != CS_VALUE_DTYPE)
    return FALSE;
  if (in)
    *in = a->u.proxy;
  if (to)
    *to = d->u.dtype.dtype;
  return TRUE;
}

gboolean
_cs_stmt_is_cast_like (const CsStmt *stmt)
{
  if (stmt->kind != CS_STMT_CALL || stmt->op == NULL)
    return FALSE;
  return cs_op_semantic (stmt->op)->category == CS_OP_CAT_CAST;
}

/* ------------------------------------------------------------------------------------------ */
/* Proxy table compaction                                                                      */


static inline void
keep_mark (guint8 *keep, guint n, const CsProxy *p)
{
  if (p != NULL && p->id < n)
    keep[p->id] = 1;
}

static void
collect_all_proxies (const CsStmt *s, guint8 *keep, guint n, CsProxyVec *tmp, guint depth)
{
  if (depth > 64)
    return;
  if (s->kind == CS_STMT_CALL)
    {
      /* a call's reads and writes are its stored ids */
      const guint32 *io = cs_stmt_io (s);
      for (guint i = 0; i < s->n_in + s->n_out; i++)
        if (io[i] < n)
          keep[io[i]] = 1;
    }
  else
    {
      tmp->len = 0;
      _cs_stmt_reads_vec (s, tmp);
      _cs_stmt_writes_vec (s, tmp);
      for (guint i = 0; i < tmp->len; i++)
        keep_mark (keep, n, tmp->v[i]);
    }
  /* annotated (comments) and names (del) lie outside the first cache line: read them only
   * for the kinds that set them */
  if (s->kind == CS_STMT_COMMENT)
    keep_mark (keep, n, s->annotated);
  if (s->kind == CS_STMT_DEL)
    for (guint i = 0; i < s->n_names; i++)
      keep_mark (keep, n, s->names[i]);
  for (guint i = 0; i < s->n_subs; i++)
    collect_all_proxies (s->subs[i], keep, n, tmp, depth + 1);
}

/* The proxies no statement, parameter or default refers to are dropped by a filter
 * (CsTrace.proxy_keep), which lookups and listings through every layer of a derived trace
 * apply; the name tables stay as they are. */
void
_cs_trace_compact_proxies (CsTrace *trace)
{
  guint n = trace->next_proxy_id + 1;
  guint8 *keep = cs_arena_alloc (trace->arena, n);
  g_autoptr(GPtrArray) dflt = g_ptr_array_new ();

  for (guint i = 0; i < trace->n_params; i++)
    {
      keep_mark (keep, n, trace->params[i].name ? cs_trace_lookup_proxy (trace, trace->params[i].name)
                                               : NULL);
      if (trace->params[i].dflt)
        {
          g_ptr_array_set_size (dflt, 0);
          cs_value_collect_proxies (trace->params[i].dflt, dflt);
          for (guint j = 0; j < dflt->len; j++)
            keep_mark (keep, n, dflt->pdata[j]);
        }
    }
  {
    CsProxyVec tmp = CS_PROXY_VEC_INIT;

    for (guint i = 0; i < trace->n_stmts; i++)
      collect_all_proxies (trace->stmts[i], keep, n, &tmp, 0);
    _cs_proxy_vec_free (&tmp);
  }
  /* an earlier filter of this trace is superseded: what it dropped is unreferenced still */
  trace->proxy_keep = keep;
  trace->proxy_keep_n = n;
}
