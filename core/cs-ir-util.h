/* cs-ir-util.h: IR services shared by the passes (fuse, cse/dce/redundant casts, autocast,
 * delete-last-used, split, stats, diff, the pipeline).  Internal to core/ (tests may include
 * it).
 *
 * The passes work on a cs_trace_derive() of their input: top-level statements are the pass's
 * own (edited in place), while values, proxies and subsymbol statements are shared with the
 * input and rewritten copy-on-write (_cs_stmt_remap_reads(), cs_trace_own_stmt()), so edits
 * never reach the input trace.
 */
#pragma once

#include <glib.h>

#include "cs-ir.h"
#include "cs-ops.h"

G_BEGIN_DECLS

/* @a @b @c concatenated, NUL-terminated, in @arena (names and reasons the passes make for
 * every region or clone, without printf). */
const char *_cs_arena_concat         (CsArena *arena, const char *a, const char *b, const char *c);

/* Proxy map: CsProxy* -> CsProxy*, the substitution the passes apply to statements.  Entries
 * live in an array indexed by CsProxy.id (grown on demand), so lookups need no hashing; a
 * proxy whose slot another proxy holds (ids of another trace) goes to a hash table instead.
 * Keys keep their insertion order (for iteration). */
typedef struct _CsProxyMap CsProxyMap;

/* An empty map (no storage until the first insertion); free with _cs_proxy_map_free(). */
CsProxyMap *_cs_proxy_map_new        (void);
/* Frees @map and its storage, not the proxies it maps; NULL is allowed. */
void        _cs_proxy_map_free       (CsProxyMap *map);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (CsProxyMap, _cs_proxy_map_free)
/* Empties @map, keeping its storage (O(number of entries)). */
void        _cs_proxy_map_clear      (CsProxyMap *map);
/* Number of entries. */
guint       _cs_proxy_map_size       (const CsProxyMap *map);
/* The @i-th key in insertion order (i < size). */
CsProxy    *_cs_proxy_map_key        (const CsProxyMap *map, guint i);

/* Sets @from -> @to as given (no resolving). */
void        _cs_proxy_map_insert     (CsProxyMap *map, CsProxy *from, CsProxy *to);
/* Adds @from -> @to, resolving @to through the map first (so chains stay flat). */
void        _cs_proxy_map_add        (CsProxyMap *map, CsProxy *from, CsProxy *to);

/* Adds every key of @src to @dst, mapped to its final substitute in @src (a region's internal
 * substitutions, made visible to the statements after the region). */
void        _cs_proxy_map_absorb     (CsProxyMap *dst, const CsProxyMap *src);

/* Returns @v itself when no proxy in it is mapped, else a rewritten copy in @arena. */
CsValue    *_cs_value_remap          (CsArena *arena, CsValue *v, const CsProxyMap *map);
/* Rewrites every proxy read by @stmt (args, return value, unpack source, del names and,
 * recursively, the subsymbols' reads) through @map, copy-on-write: returns @stmt itself when
 * nothing is mapped, else @stmt edited in place when @trace owns it, else a copy owned by
 * @trace (cs_trace_own_stmt()); the caller puts the result where @stmt was. */
CsStmt     *_cs_stmt_remap_reads     (CsTrace *trace, CsStmt *stmt, const CsProxyMap *map);

/* Proxies read by the statement itself (args, RETURN value, UNPACK source, ANNASSIGN value);
 * not its subsymbols, not DEL names.  Appended to @out, duplicates possible. */
void        _cs_stmt_reads           (const CsStmt *stmt, GPtrArray *out);
/* Proxies written (CALL targets, UNPACK targets, ANNASSIGN target). */
void        _cs_stmt_writes          (const CsStmt *stmt, GPtrArray *out);

/* A growable list of proxies for the passes' inner loops: pushing is inline, the first 8
 * elements live in the struct itself and, once grown to its working size, a reused list
 * allocates nothing.  Zero-initialise (CS_PROXY_VEC_INIT), do not copy, release with
 * _cs_proxy_vec_free (or declare with g_auto). */
typedef struct
{
  CsProxy **v;       /* elements 0..len-1: inl, or heap storage once grown past it */
  guint     len;     /* number of elements */
  guint     cap;     /* slots in v; 0 until the first push */
  CsProxy  *inl[8];  /* first storage */
} CsProxyVec;

#define CS_PROXY_VEC_INIT { 0 }

/* Makes room for at least one more element of @a (doubling). */
void        _cs_proxy_vec_grow       (CsProxyVec *a);
/* Frees the storage of @a and leaves it empty. */
void        _cs_proxy_vec_free       (CsProxyVec *a);

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (CsProxyVec, _cs_proxy_vec_free)

static inline void
_cs_proxy_vec_push (CsProxyVec *a, CsProxy *p)
{
  if (G_UNLIKELY (a->len == a->cap))
    _cs_proxy_vec_grow (a);
  a->v[a->len++] = p;
}

/* CsProxyMap's layout, visible for the inline lookups below (the passes call them for every
 * argument they remap). */
typedef struct
{
  CsProxy *from;   /* key, NULL for a free slot */
  CsProxy *to;     /* value */
} CsProxyMapSlot;

/* Slots per chunk of a CsProxyMap (a power of two). */
#define CS_PROXY_MAP_CHUNK_BITS 12u
#define CS_PROXY_MAP_CHUNK      (1u << CS_PROXY_MAP_CHUNK_BITS)

struct _CsProxyMap
{
  CsProxyMapSlot **chunks; /* cap / CS_PROXY_MAP_CHUNK pointers: chunk c holds the slots of ids
                              c * CS_PROXY_MAP_CHUNK and up, indexed by id; NULL until a key
                              falls in it (a map of a few keys with large ids zeroes a few
                              chunks, not one slot per id) */
  guint64    *bits;    /* cap bits, one per id: set while its slot is in use */
  guint32     cap;     /* ids below cap have a bit and a chunk pointer (a multiple of
                          CS_PROXY_MAP_CHUNK; 0 for an empty map) */
  CsProxyVec  keys;    /* every key in insertion order */
  GHashTable *other;   /* keys whose slot holds another proxy (or id 0), or NULL */
};

/* One bit per slot, set while the slot is in use: a lookup of an unmapped proxy (most of
 * them) reads this small bitmap instead of the slots. */
static inline guint64 *
_cs_proxy_map_bits (const CsProxyMap *m)
{
  return m->bits;
}

/* The slot of id @id (< m->cap) in its chunk, which must exist (its bit is set). */
static inline CsProxyMapSlot *
_cs_proxy_map_slot (const CsProxyMap *m, guint32 id)
{
  return &m->chunks[id >> CS_PROXY_MAP_CHUNK_BITS][id & (CS_PROXY_MAP_CHUNK - 1)];
}

/* FALSE when no key of @map can be a proxy with id @id: its slot bit is clear and no key is
 * kept outside the slots (a test on ids alone, for the statements' stored def-use ids). */
static inline gboolean
_cs_proxy_map_may_hold_id (const CsProxyMap *map, guint32 id)
{
  return map->other != NULL
         || (id < map->cap && (map->bits[id / 64] & ((guint64) 1 << (id % 64))));
}

/* The entry for a key kept outside the slots (the `other` table), or NULL. */
CsProxy    *_cs_proxy_map_lookup_other (const CsProxyMap *map, const CsProxy *from);

/* The entry for @from, or NULL. */
static inline CsProxy *
_cs_proxy_map_lookup (const CsProxyMap *map, const CsProxy *from)
{
  guint32 id = from->id;

  if (id < map->cap && (map->bits[id / 64] & ((guint64) 1 << (id % 64)))
      && _cs_proxy_map_slot (map, id)->from == from)
    return _cs_proxy_map_slot (map, id)->to;
  return map->other ? _cs_proxy_map_lookup_other (map, from) : NULL;
}

/* Follows @p through the map to its final substitute (@p itself when unmapped). */
static inline CsProxy *
_cs_proxy_map_resolve (const CsProxyMap *map, CsProxy *p)
{
  CsProxy *q;
  guint guard = 0;

  while (p != NULL && (q = _cs_proxy_map_lookup (map, p)) != NULL && q != p && guard++ < 1000000)
    p = q;
  return p;
}

/* The same growable list for statements (see CsProxyVec): the passes' statement lists. */
typedef struct
{
  CsStmt  **v;       /* elements 0..len-1: inl, or heap storage once grown past it */
  guint     len;     /* number of elements */
  guint     cap;     /* slots in v; 0 until the first push */
  CsStmt   *inl[8];  /* first storage */
} CsStmtVec;

#define CS_STMT_VEC_INIT { 0 }

/* Makes room for at least one more element of @a (doubling). */
void        _cs_stmt_vec_grow        (CsStmtVec *a);
/* Frees the storage of @a and leaves it empty. */
void        _cs_stmt_vec_free        (CsStmtVec *a);

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (CsStmtVec, _cs_stmt_vec_free)

static inline void
_cs_stmt_vec_push (CsStmtVec *a, CsStmt *s)
{
  if (G_UNLIKELY (a->len == a->cap))
    _cs_stmt_vec_grow (a);
  a->v[a->len++] = s;
}

/* Reverses the order of @a's elements in place. */
static inline void
_cs_stmt_vec_reverse (CsStmtVec *a)
{
  for (guint i = 0; i < a->len / 2; i++)
    {
      CsStmt *t = a->v[i];
      a->v[i] = a->v[a->len - 1 - i];
      a->v[a->len - 1 - i] = t;
    }
}

/* Appends every proxy referenced by @v (depth first), as cs_value_collect_proxies. */
void        _cs_value_proxies_vec    (const CsValue *v, CsProxyVec *out);

/* The same lists as _cs_stmt_reads / _cs_stmt_writes, appended to a CsProxyVec.  Inline (the
 * passes' hottest walks): a CALL's plain proxy arguments and output are pushed directly, nested
 * values go through _cs_value_proxies_vec. */
static inline void
_cs_stmt_reads_vec (const CsStmt *stmt, CsProxyVec *out)
{
  switch (stmt->kind)
    {
    case CS_STMT_CALL:
      for (guint i = 0; i < stmt->n_args; i++)
        {
          const CsValue *v = stmt->args[i].value;
          if (v->kind == CS_VALUE_PROXY)
            _cs_proxy_vec_push (out, v->u.proxy);
          else if (v->kind >= CS_VALUE_TUPLE)
            _cs_value_proxies_vec (v, out);
        }
      break;
    case CS_STMT_RETURN:
    case CS_STMT_ANNASSIGN:
      _cs_value_proxies_vec (stmt->value, out);
      break;
    case CS_STMT_UNPACK:
      if (stmt->source)
        _cs_proxy_vec_push (out, stmt->source);
      break;
    default:
      break;
    }
}

static inline void
_cs_stmt_writes_vec (const CsStmt *stmt, CsProxyVec *out)
{
  switch (stmt->kind)
    {
    case CS_STMT_CALL:
    case CS_STMT_ANNASSIGN:
      if (stmt->out && stmt->out->kind == CS_VALUE_PROXY)
        _cs_proxy_vec_push (out, stmt->out->u.proxy);
      else
        _cs_value_proxies_vec (stmt->out, out);
      break;
    case CS_STMT_UNPACK:
      for (guint i = 0; i < stmt->n_targets; i++)
        if (stmt->targets[i] && stmt->targets[i]->kind == CS_VALUE_PROXY)
          _cs_proxy_vec_push (out, stmt->targets[i]->u.proxy);
      break;
    default:
      break;
    }
}

/* Flattens @stmt to the statements nvFuser executes directly (prims; statements without
 * subsymbols), depth first.  With @trace, subsymbols with origin 0 inherit @stmt's origin and
 * every subsymbol its BACKWARD tag (through copies owned by @trace where they differ); with
 * @trace NULL nothing is changed (inspection only). */
void        _cs_stmt_flatten         (CsTrace *trace, CsStmt *stmt, CsStmtVec *out);

/* TRUE for a prims.convert_element_type (or its torch executor form) whose input is a proxy;
 * @in and @to receive the input proxy and the target dtype. */
gboolean    _cs_stmt_is_cast         (const CsStmt *stmt, CsProxy **in, CsDtype *to);
/* TRUE for any cast statement (prims.convert_element_type, ltorch.to/float/...): its op's
 * semantic category is CS_OP_CAT_CAST. */
gboolean    _cs_stmt_is_cast_like    (const CsStmt *stmt);

/* TRUE when the subsymbol @sub lacks the origin, BACKWARD or grad_sum tag it inherits from
 * @stmt, the statement it decomposes; _cs_sub_take_tags gives them (to a statement the caller
 * owns). */
gboolean    _cs_sub_needs_tags       (const CsStmt *sub, const CsStmt *stmt);
/* Gives @sub @stmt's tags: its origin when @sub has none (0), its BACKWARD flag (replacing
 * @sub's) and its grad_sum (or-ed in). */
void        _cs_sub_take_tags        (CsStmt *sub, const CsStmt *stmt);

/* TRUE when @stmt is a region call (nvFusionK ...). */
gboolean    _cs_stmt_is_region       (const CsStmt *stmt);
/* TRUE for an nvFusion region call (the regions nvFuser's clean-ups - redundant casts, CSE
 * inside regions, rematerialization - rework); FALSE for other executors' regions
 * (TorchCompileK, CUDAGraphK) and every other statement. */
gboolean    _cs_stmt_is_nvfusion     (const CsStmt *stmt);

/* Drops from the trace every proxy no statement (at any level), parameter or default names:
 * sets the CsTrace.proxy_keep filter that lookups and listings apply.  The proxies stay in
 * their arenas and in the tables of the traces that share them. */
void        _cs_trace_compact_proxies (CsTrace *trace);

G_END_DECLS
