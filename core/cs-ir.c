/* cs-ir.c: castscope's trace IR (see cs-ir.h). */
#include "cs-config.h"

#include "cs-ir.h"
#include "cs-ops.h"
#include "cs-aten.h"
#include "cs-str-private.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------------------------ */
/* Arena                                                                                       */

#define ARENA_BLOCK_BYTES (64 * 1024)
#define ARENA_ALIGN 16

typedef struct _ArenaBlock ArenaBlock;
struct _ArenaBlock
{
  ArenaBlock *next;   /* previously filled block, or NULL */
  gsize       size;   /* usable bytes in data */
  /* data follows, aligned to ARENA_ALIGN */
};

#define BLOCK_HEADER ((sizeof (ArenaBlock) + ARENA_ALIGN - 1) & ~(gsize) (ARENA_ALIGN - 1))
#define BLOCK_DATA(b) ((guint8 *) (b) + BLOCK_HEADER)

static ArenaBlock *
arena_block_new (gsize size)
{
  /* not zeroed: cs_arena_alloc zeroes what it hands out */
  ArenaBlock *b = g_malloc (BLOCK_HEADER + size);
  b->next = NULL;
  b->size = size;
  return b;
}

/**
 * cs_arena_new:
 *
 * See cs-ir.h.
 * Returns: (transfer full): a new, empty arena
 */
CsArena *
cs_arena_new (void)
{
  CsArena *a = g_new0 (CsArena, 1);
  ArenaBlock *b = arena_block_new (ARENA_BLOCK_BYTES);

  a->head = b;
  a->cur = BLOCK_DATA (b);
  a->end = a->cur + b->size;
  return a;
}

/** cs_arena_free: frees every block of @arena (NULL is allowed). */
void
cs_arena_free (CsArena *arena)
{
  ArenaBlock *b, *next;

  if (arena == NULL)
    return;
  for (b = arena->head; b != NULL; b = next)
    {
      next = b->next;
      g_free (b);
    }
  g_free (arena);
}

/**
 * _cs_arena_alloc_slow:
 * See cs-ir.h: a request bigger than a quarter block gets a block of its own behind the current
 * one; otherwise a fresh block becomes the current one (the rest of the old one is not used).
 * Returns: zeroed memory of @rounded bytes aligned to 16 bytes, owned by @arena
 */
gpointer
_cs_arena_alloc_slow (CsArena *arena, gsize rounded)
{
  ArenaBlock *b = arena->head, *nb;

  arena->total += rounded;
  if (rounded > ARENA_BLOCK_BYTES / 4)
    {
      nb = arena_block_new (rounded);
      nb->next = b->next;
      b->next = nb;
      return BLOCK_DATA (nb);
    }
  nb = arena_block_new (ARENA_BLOCK_BYTES);
  nb->next = b;
  arena->head = nb;
  arena->cur = BLOCK_DATA (nb) + rounded;
  arena->end = BLOCK_DATA (nb) + nb->size;
  return BLOCK_DATA (nb);
}

#ifdef CS_ARENA_DEBUG_MALLOC
gpointer
_cs_arena_alloc_debug (CsArena *arena, gsize size)
{
  ArenaBlock *head = arena->head;
  ArenaBlock *b = g_malloc (BLOCK_HEADER + (size ? size : 1));
  guint8 *data = BLOCK_DATA (b);

  b->size = size;
  b->next = head->next;
  head->next = b;
  arena->total += size;
  /* garbage, as a reused arena block would hold */
  memset (data, 0xa5, size ? size : 1);
  return data;
}
#endif

/** cs_arena_alloc_line: see cs-ir.h. */
gpointer
cs_arena_alloc_line (CsArena *arena, gsize size)
{
  gsize rounded = size == 0 ? 16 : (size + 15) & ~(gsize) 15;
  gpointer p = cs_arena_alloc_line_uninit (arena, size);
#ifdef CS_ARENA_DEBUG_MALLOC
  rounded = size == 0 ? 1 : size;
#endif

  memset (p, 0, rounded);
  return p;
}

/** cs_arena_alloc_line_uninit: see cs-ir.h. */
gpointer
cs_arena_alloc_line_uninit (CsArena *arena, gsize size)
{
  gsize rounded = size == 0 ? 16 : (size + 15) & ~(gsize) 15;
  /* the arena aligns to 16: skip to the next 64-byte boundary of the current block when the
   * object fits there, else over-allocate (a fresh block or a block of its own) and round up */
  guint8 *at = (guint8 *) (((guintptr) arena->cur + 63) & ~(guintptr) 63);
  guint8 *raw;

#ifdef CS_ARENA_DEBUG_MALLOC
  return _cs_arena_alloc_debug (arena, size);
#endif
  if (G_LIKELY (at <= arena->end && (gsize) (arena->end - at) >= rounded))
    {
      if (at > arena->cur)
        {
          arena->hole = arena->cur;
          arena->hole_end = at;
        }
      arena->total += (gsize) (at - arena->cur) + rounded;
      arena->cur = at + rounded;
      return at;
    }
  raw = cs_arena_alloc_uninit (arena, rounded + 48);
  return (gpointer) (((guintptr) raw + 63) & ~(guintptr) 63);
}

/** cs_arena_strndup: a NUL-terminated copy of the first @len bytes of @s in @arena. */
char *
cs_arena_strndup (CsArena *arena, const char *s, gsize len)
{
  char *d = cs_arena_alloc_uninit (arena, len + 1);
  memcpy (d, s, len);
  d[len] = '\0';
  return d;
}

/** cs_arena_strdup: a copy of @s in @arena; NULL gives NULL. */
char *
cs_arena_strdup (CsArena *arena, const char *s)
{
  if (s == NULL)
    return NULL;
  return cs_arena_strndup (arena, s, strlen (s));
}

/** cs_arena_printf: a printf-formatted string in @arena. */
char *
cs_arena_printf (CsArena *arena, const char *fmt, ...)
{
  va_list ap;
  g_autofree char *tmp = NULL;

  va_start (ap, fmt);
  tmp = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  return cs_arena_strdup (arena, tmp);
}

/** cs_arena_dup_ptrs: copies @n pointers into @arena (NULL when @n is 0). */
gpointer *
cs_arena_dup_ptrs (CsArena *arena, gpointer const *ptrs, guint n)
{
  gpointer *d;

  if (n == 0)
    return NULL;
  d = cs_arena_alloc_uninit (arena, sizeof (gpointer) * n);
  memcpy (d, ptrs, sizeof (gpointer) * n);
  return d;
}

/** cs_arena_size_bytes: bytes handed out so far. */
gsize
cs_arena_size_bytes (CsArena *arena)
{
  return arena->total;
}

/* ------------------------------------------------------------------------------------------ */
/* Proxy name tables                                                                           */

/* A slot is one word: 0 for empty, NAME_TOMBSTONE for a removed entry (probing goes on), else
 * the proxy's address with, on 64-bit machines, the low NAME_TAG_BITS bits of its name's hash
 * in the address's unused top bits (NAME_TAG_SHIFT up): a probe compares the tag before it
 * reads the proxy's name.  A table that meets an address using those bits (or any table on a
 * 32-bit machine) is untagged: its slots are plain addresses and every probe compares names. */
typedef guintptr NameSlot;

#define NAME_TOMBSTONE ((NameSlot) 1)
#if GLIB_SIZEOF_VOID_P == 8
#define NAME_TAG_SHIFT 48
#define NAME_TAG_BITS 16
#define NAME_ADDR_MASK ((((guintptr) 1) << NAME_TAG_SHIFT) - 1)
#endif

struct _CsNameTable
{
  NameSlot *slots;      /* mask + 1 slots (a power of two, at least 16) */
  guint32   mask;       /* capacity - 1 */
  guint32   n;          /* live entries */
  guint32   used;       /* live entries + tombstones; kept at most half the capacity */
  guint32   t_bound;    /* every "t<n>" entry has n < t_bound (saturating at G_MAXUINT32) */
  gboolean  untagged;   /* slots hold plain addresses (see NameSlot) */
  guint64   first[4];   /* bit c: some name ever inserted starts with byte c (never cleared);
                           a lookup of a name whose first byte is unset probes nothing: a
                           derived trace's lookup of a new "bw_" name passes through every
                           layer below it, which hold only "t<n>" and input names */
};

#define FIRST_BYTE_SEEN(t, name) \
  (((t)->first[(guchar) (name)[0] >> 6] >> ((guchar) (name)[0] & 63)) & 1)

/* The proxy of a live slot. */
static inline CsProxy *
name_slot_proxy (const CsNameTable *t, NameSlot sl)
{
#ifdef NAME_TAG_SHIFT
  if (!t->untagged)
    return (CsProxy *) (sl & NAME_ADDR_MASK);
#endif
  return (CsProxy *) sl;
}

/* Whether a live slot's tag allows its name to be @hash's (always TRUE untagged). */
static inline gboolean
name_slot_tag_ok (const CsNameTable *t, NameSlot sl, guint32 hash)
{
#ifdef NAME_TAG_SHIFT
  if (!t->untagged)
    return (sl >> NAME_TAG_SHIFT) == (hash & ((1u << NAME_TAG_BITS) - 1));
#endif
  return TRUE;
}

/* The slot word for @proxy named with @hash. */
static inline NameSlot
name_slot_make (const CsNameTable *t, CsProxy *proxy, guint32 hash)
{
#ifdef NAME_TAG_SHIFT
  if (!t->untagged)
    return (guintptr) proxy | ((guintptr) (hash & ((1u << NAME_TAG_BITS) - 1)) << NAME_TAG_SHIFT);
#endif
  return (guintptr) proxy;
}

gboolean
_cs_parse_t_name (const char *name, guint64 *n)
{
  const guchar *p = (const guchar *) name + 1;
  guint d = (guint) p[0] - '0';
  guint64 v = d;

  if (name[0] != 't' || d > 9 || (d == 0 && p[1] != '\0'))
    return FALSE;
  for (p++; *p; p++)
    {
      d = (guint) *p - '0';
      if (d > 9 || v > G_MAXUINT32)
        return FALSE;
      v = v * 10 + d;
    }
  if (v > G_MAXUINT32)
    return FALSE;
  *n = v;
  return TRUE;
}

guint32
cs_name_table_t_bound (const CsNameTable *table)
{
  return table->t_bound;
}

/* The hash is g_str_hash's (Bernstein's h * 33 + c): Thunder's sequential names (t0, t1, ...)
 * get nearby hashes, so a pass that adds thousands of them writes the table in nearly
 * sequential order instead of one cache miss per name; triangular probing (i + 1, i + 3,
 * i + 6, ...) keeps the clusters that nearby hashes make short. */
guint32
cs_name_hash (const char *name)
{
  guint32 h = 5381;

  for (const guchar *c = (const guchar *) name; *c; c++)
    h = h * 33 + *c;
  return h;
}

CsNameTable *
cs_name_table_new (void)
{
  CsNameTable *t = g_new0 (CsNameTable, 1);

  t->mask = 15;
  t->slots = g_new0 (NameSlot, t->mask + 1);
#ifndef NAME_TAG_SHIFT
  t->untagged = TRUE;
#endif
  return t;
}

void
cs_name_table_free (CsNameTable *table)
{
  if (table == NULL)
    return;
  g_free (table->slots);
  g_free (table);
}

/* The slot holding @name, or G_MAXUINT32 when there is none; *@free_at receives the first
 * empty or tombstone slot met (where an insertion goes) when @free_at is not NULL. */
static inline guint32
name_slot_find (const CsNameTable *t, const char *name, guint32 hash, guint32 *free_at)
{
  guint32 i = hash & t->mask, step = 0, first_free = G_MAXUINT32;

  for (;;)
    {
      NameSlot sl = t->slots[i];
      if (sl == 0)
        {
          if (free_at != NULL)
            *free_at = first_free != G_MAXUINT32 ? first_free : i;
          return G_MAXUINT32;
        }
      if (sl == NAME_TOMBSTONE)
        {
          if (first_free == G_MAXUINT32)
            first_free = i;
        }
      else if (name_slot_tag_ok (t, sl, hash) && strcmp (name_slot_proxy (t, sl)->name, name) == 0)
        return i;
      i = (i + ++step) & t->mask;
    }
}

CsProxy *
cs_name_table_lookup (const CsNameTable *table, const char *name, guint32 hash)
{
  guint32 i;

  if (!FIRST_BYTE_SEEN (table, name))
    return NULL;
  i = name_slot_find (table, name, hash, NULL);

  return i == G_MAXUINT32 ? NULL : name_slot_proxy (table, table->slots[i]);
}

/* Rebuilds the table with at most a quarter of its slots live (tombstones dropped), untagged when
 * @untag.  A tagged slot keeps the hash's low NAME_TAG_BITS bits, enough for the home slot
 * of a table up to that size; a larger table hashes the names again. */
static void
name_table_rehash (CsNameTable *t, gboolean untag)
{
  NameSlot *old = t->slots;
  guint32 old_cap = t->mask + 1, cap = 16;
  gboolean old_untagged = t->untagged;

  while (cap < 4 * (t->n + 1))
    cap *= 2;
  t->mask = cap - 1;
  t->slots = g_new0 (NameSlot, cap);
  t->used = t->n;
  t->untagged = old_untagged || untag;
  for (guint32 i = 0; i < old_cap; i++)
    if (old[i] != 0 && old[i] != NAME_TOMBSTONE)
      {
        CsProxy *p = (CsProxy *) old[i];
        guint32 hash, j, step = 0;

#ifdef NAME_TAG_SHIFT
        if (!old_untagged)
          p = (CsProxy *) (old[i] & NAME_ADDR_MASK);
#endif

#ifdef NAME_TAG_SHIFT
        if (!old_untagged && cap <= (1u << NAME_TAG_BITS))
          hash = (guint32) (old[i] >> NAME_TAG_SHIFT);
        else
#endif
          hash = cs_name_hash (p->name);
        j = hash & t->mask;
        while (t->slots[j] != 0)
          j = (j + ++step) & t->mask;
        t->slots[j] = name_slot_make (t, p, hash);
      }
  g_free (old);
}

/* n + 1 when @name is "t<n>", else 0 (the bound _cs_name_table_insert_t takes). */
static guint64
name_t_plus1 (const char *name)
{
  guint64 n;

  return name != NULL && name[0] == 't' && _cs_parse_t_name (name, &n) ? n + 1 : 0;
}

void
cs_name_table_insert (CsNameTable *table, CsProxy *proxy, guint32 hash)
{
  _cs_name_table_insert_t (table, proxy, hash, name_t_plus1 (proxy->name));
}

void
_cs_name_table_insert_t (CsNameTable *table, CsProxy *proxy, guint32 hash, guint64 t_plus1)
{
  guint32 i, at = 0;

  g_return_if_fail (proxy != NULL && proxy->name != NULL);
#ifdef NAME_TAG_SHIFT
  if (G_UNLIKELY (!table->untagged && ((guintptr) proxy & ~NAME_ADDR_MASK) != 0))
    name_table_rehash (table, TRUE);
#endif
  if (2 * (table->used + 1) > table->mask + 1)
    name_table_rehash (table, FALSE);
  i = name_slot_find (table, proxy->name, hash, &at);
  if (i != G_MAXUINT32)
    {
      table->slots[i] = name_slot_make (table, proxy, hash);
      return;
    }
  if (table->slots[at] == 0)
    table->used++;
  table->slots[at] = name_slot_make (table, proxy, hash);
  table->n++;
  table->first[(guchar) proxy->name[0] >> 6] |= G_GUINT64_CONSTANT (1) << ((guchar) proxy->name[0] & 63);
  if (t_plus1 > table->t_bound)
    table->t_bound = (guint32) MIN (t_plus1, (guint64) G_MAXUINT32);
}

gboolean
cs_name_table_remove (CsNameTable *table, const char *name)
{
  guint32 i;

  if (!FIRST_BYTE_SEEN (table, name))
    return FALSE;
  i = name_slot_find (table, name, cs_name_hash (name), NULL);

  if (i == G_MAXUINT32)
    return FALSE;
  table->slots[i] = NAME_TOMBSTONE;
  table->n--;
  /* removing the entry that set the bound lowers it by one: every other "t<m>" has m < n */
  if (name[0] == 't')
    {
      guint64 n;
      if (_cs_parse_t_name (name, &n) && n + 1 == table->t_bound)
        table->t_bound = (guint32) n;
    }
  return TRUE;
}

guint
cs_name_table_size (const CsNameTable *table)
{
  return table->n;
}

CsProxy *
cs_name_table_next (const CsNameTable *table, guint *pos)
{
  while (*pos <= table->mask)
    {
      NameSlot sl = table->slots[(*pos)++];
      if (sl != 0 && sl != NAME_TOMBSTONE)
        return name_slot_proxy (table, sl);
    }
  return NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* Values                                                                                      */

static CsValue *
value_new (CsArena *arena, CsValueKind kind)
{
  CsValue *v = CS_ARENA_NEW (arena, CsValue);
  v->kind = kind;
  return v;
}

/** cs_value_new_none: `None`. */
CsValue *
cs_value_new_none (CsArena *arena)
{
  return value_new (arena, CS_VALUE_NONE);
}

/** cs_value_new_bool: `True` / `False`. */
CsValue *
cs_value_new_bool (CsArena *arena, gboolean b)
{
  CsValue *v = value_new (arena, CS_VALUE_BOOL);
  v->u.b = b ? TRUE : FALSE;
  return v;
}

/** cs_value_new_int: a Python int. */
CsValue *
cs_value_new_int (CsArena *arena, int64_t i)
{
  CsValue *v = value_new (arena, CS_VALUE_INT);
  v->u.i = i;
  return v;
}

/** cs_value_new_float: a Python float (printed with Python's repr). */
CsValue *
cs_value_new_float (CsArena *arena, double f)
{
  CsValue *v = value_new (arena, CS_VALUE_FLOAT);
  v->u.f = f;
  return v;
}

/** cs_value_new_string: a Python str (content, unescaped). */
CsValue *
cs_value_new_string (CsArena *arena, const char *s)
{
  CsValue *v = value_new (arena, CS_VALUE_STRING);
  v->u.s = cs_arena_strdup (arena, s);
  return v;
}

/** cs_value_new_name: an identifier or dotted name that is not a proxy. */
CsValue *
cs_value_new_name (CsArena *arena, const char *name)
{
  CsValue *v = value_new (arena, CS_VALUE_NAME);
  v->u.s = cs_arena_strdup (arena, name);
  return v;
}

/** cs_value_new_proxy: a reference to @proxy (which must belong to the same trace). */
CsValue *
cs_value_new_proxy (CsArena *arena, CsProxy *proxy)
{
  CsValue *v;

  /* the proxy's own node; a proxy not made by cs_proxy_alloc() gets a fresh one */
  if (G_LIKELY (proxy != NULL && proxy->self.kind == CS_VALUE_PROXY && proxy->self.u.proxy == proxy))
    return &proxy->self;
  v = value_new (arena, CS_VALUE_PROXY);
  v->u.proxy = proxy;
  return v;
}

/** cs_value_new_underscore: `_` in a target list. */
CsValue *
cs_value_new_underscore (CsArena *arena)
{
  return value_new (arena, CS_VALUE_UNDERSCORE);
}

/* One node per dtype and weakness for the whole process (cs_value_new_dtype()): value nodes
 * are never edited in place, and the passes make one dtype argument per conversion. */
#define DTYPE_NODES(d) \
  { { .kind = CS_VALUE_DTYPE, .u.dtype = { (d), 0, CS_PYTYPE_NONE } }, \
    { .kind = CS_VALUE_DTYPE, .u.dtype = { (d), 1, CS_PYTYPE_NONE } } }
static CsValue dtype_nodes[][2] = {
  DTYPE_NODES (CS_DTYPE_B8), DTYPE_NODES (CS_DTYPE_U8), DTYPE_NODES (CS_DTYPE_U64),
  DTYPE_NODES (CS_DTYPE_I8), DTYPE_NODES (CS_DTYPE_I16), DTYPE_NODES (CS_DTYPE_I32),
  DTYPE_NODES (CS_DTYPE_I64), DTYPE_NODES (CS_DTYPE_BF16), DTYPE_NODES (CS_DTYPE_F16),
  DTYPE_NODES (CS_DTYPE_F32), DTYPE_NODES (CS_DTYPE_F64), DTYPE_NODES (CS_DTYPE_F8_E5M2),
  DTYPE_NODES (CS_DTYPE_F8_E5M2FNUZ), DTYPE_NODES (CS_DTYPE_F8_E4M3FN),
  DTYPE_NODES (CS_DTYPE_F8_E4M3FNUZ), DTYPE_NODES (CS_DTYPE_F8_E8M0FNU),
  DTYPE_NODES (CS_DTYPE_F4_E2M1FN_X2), DTYPE_NODES (CS_DTYPE_C32), DTYPE_NODES (CS_DTYPE_C64),
  DTYPE_NODES (CS_DTYPE_C128),
};
G_STATIC_ASSERT (G_N_ELEMENTS (dtype_nodes) == CS_N_DTYPES);

/** cs_value_new_dtype: `dtypes.<long name>`, with a trailing `_` when @weak (see cs-ir.h:
 * a node shared by every trace). */
CsValue *
cs_value_new_dtype (CsArena *arena, CsDtype dtype, gboolean weak)
{
  CsValue *v;

  if (G_LIKELY ((guint) dtype < CS_N_DTYPES))
    {
      v = &dtype_nodes[dtype][weak ? 1 : 0];
      g_assert (v->u.dtype.dtype == dtype);
      return v;
    }
  v = value_new (arena, CS_VALUE_DTYPE);
  v->u.dtype.dtype = dtype;
  v->u.dtype.weak = weak ? 1 : 0;
  v->u.dtype.pytype = CS_PYTYPE_NONE;
  return v;
}

/**
 * cs_value_new_seq:
 * @kind: CS_VALUE_TUPLE, CS_VALUE_LIST, CS_VALUE_DICT (k, v pairs), CS_VALUE_SUBSCRIPT
 * @items: @n values (copied into the arena as an array; the values themselves are shared)
 */
CsValue *
cs_value_new_seq (CsArena *arena, CsValueKind kind, CsValue **items, guint n)
{
  CsValue *v = value_new (arena, kind);
  v->u.seq.items = (CsValue **) cs_arena_dup_ptrs (arena, (gpointer const *) items, n);
  v->u.seq.n = n;
  return v;
}

/** cs_value_new_int_seq: a tuple or list of ints (shapes, dims). */
CsValue *
cs_value_new_int_seq (CsArena *arena, CsValueKind kind, const int64_t *vals, guint n)
{
  CsValue *v = value_new (arena, kind);

  v->u.seq.n = n;
  if (n > 0)
    {
      v->u.seq.items = CS_ARENA_NEW_N (arena, CsValue *, n);
      for (guint i = 0; i < n; i++)
        v->u.seq.items[i] = cs_value_new_int (arena, vals[i]);
    }
  return v;
}

static gboolean
value_has_items (CsValueKind kind)
{
  return kind == CS_VALUE_TUPLE || kind == CS_VALUE_LIST || kind == CS_VALUE_DICT
         || kind == CS_VALUE_SUBSCRIPT || kind == CS_VALUE_ATTR;
}

static CsProxy *proxy_map_get (CsTrace *dst, GHashTable *map, CsProxy *p);

/* Copies @v into @arena; proxies are translated through @map when @dst is given. */
static CsValue *
value_copy_full (CsArena *arena, CsTrace *dst, const CsValue *v, GHashTable *map)
{
  CsValue *c;

  if (v == NULL)
    return NULL;
  c = value_new (arena, v->kind);
  c->u = v->u;
  c->raw = cs_arena_strdup (arena, v->raw);
  switch (v->kind)
    {
    case CS_VALUE_STRING:
    case CS_VALUE_NAME:
      c->u.s = cs_arena_strdup (arena, v->u.s);
      break;
    case CS_VALUE_PROXY:
      if (dst != NULL)
        c->u.proxy = proxy_map_get (dst, map, v->u.proxy);
      else if (map != NULL)
        {
          CsProxy *np = g_hash_table_lookup (map, v->u.proxy);
          if (np != NULL)
            c->u.proxy = np;
        }
      break;
    case CS_VALUE_CALL:
      c->u.call.callee = cs_arena_strdup (arena, v->u.call.callee);
      c->u.call.n_args = v->u.call.n_args;
      c->u.call.args = v->u.call.n_args ? CS_ARENA_NEW_N (arena, CsArg, v->u.call.n_args) : NULL;
      for (guint i = 0; i < v->u.call.n_args; i++)
        {
          c->u.call.args[i].name = cs_arena_strdup (arena, v->u.call.args[i].name);
          c->u.call.args[i].value = value_copy_full (arena, dst, v->u.call.args[i].value, map);
        }
      break;
    default:
      if (value_has_items (v->kind))
        {
          c->u.seq.n = v->u.seq.n;
          c->u.seq.attr = v->kind == CS_VALUE_ATTR ? cs_arena_strdup (arena, v->u.seq.attr) : NULL;
          c->u.seq.items = v->u.seq.n ? CS_ARENA_NEW_N (arena, CsValue *, v->u.seq.n) : NULL;
          for (guint i = 0; i < v->u.seq.n; i++)
            c->u.seq.items[i] = value_copy_full (arena, dst, v->u.seq.items[i], map);
        }
      break;
    }
  return c;
}

/**
 * cs_value_copy:
 * @arena: destination arena
 * @v: value to copy (may be NULL)
 * @proxy_map: (nullable): old CsProxy* -> new CsProxy*; proxies not in the map are kept as is
 *
 * Returns: a deep copy of @v in @arena
 */
CsValue *
cs_value_copy (CsArena *arena, const CsValue *v, GHashTable *proxy_map)
{
  return value_copy_full (arena, NULL, v, proxy_map);
}

/* Structural equality; @strict also requires the same raw spelling at every level. */
static gboolean
value_equal (const CsValue *a, const CsValue *b, gboolean strict)
{
  if (a == b)
    return TRUE;
  if (a == NULL || b == NULL || a->kind != b->kind)
    return FALSE;
  if (strict && g_strcmp0 (a->raw, b->raw) != 0)
    return FALSE;
  switch (a->kind)
    {
    case CS_VALUE_NONE:
    case CS_VALUE_UNDERSCORE:
    case CS_VALUE_ELLIPSIS:
      return TRUE;
    case CS_VALUE_BOOL:
      return !a->u.b == !b->u.b;
    case CS_VALUE_INT:
      return a->u.i == b->u.i;
    case CS_VALUE_FLOAT:
      return a->u.f == b->u.f || (isnan (a->u.f) && isnan (b->u.f));
    case CS_VALUE_COMPLEX:
      return a->u.c.re == b->u.c.re && a->u.c.im == b->u.c.im;
    case CS_VALUE_STRING:
    case CS_VALUE_NAME:
      return g_strcmp0 (a->u.s, b->u.s) == 0;
    case CS_VALUE_PROXY:
      return g_strcmp0 (a->u.proxy->name, b->u.proxy->name) == 0;
    case CS_VALUE_DTYPE:
      return a->u.dtype.dtype == b->u.dtype.dtype && a->u.dtype.weak == b->u.dtype.weak
             && a->u.dtype.pytype == b->u.dtype.pytype;
    case CS_VALUE_CALL:
      if (g_strcmp0 (a->u.call.callee, b->u.call.callee) != 0 || a->u.call.n_args != b->u.call.n_args)
        return FALSE;
      for (guint i = 0; i < a->u.call.n_args; i++)
        if (g_strcmp0 (a->u.call.args[i].name, b->u.call.args[i].name) != 0
            || !value_equal (a->u.call.args[i].value, b->u.call.args[i].value, strict))
          return FALSE;
      return TRUE;
    case CS_VALUE_ATTR:
      if (g_strcmp0 (a->u.seq.attr, b->u.seq.attr) != 0)
        return FALSE;
      G_GNUC_FALLTHROUGH;
    case CS_VALUE_TUPLE:
    case CS_VALUE_LIST:
    case CS_VALUE_DICT:
    case CS_VALUE_SUBSCRIPT:
      if (a->u.seq.n != b->u.seq.n)
        return FALSE;
      for (guint i = 0; i < a->u.seq.n; i++)
        if (!value_equal (a->u.seq.items[i], b->u.seq.items[i], strict))
          return FALSE;
      return TRUE;
    default:
      return FALSE;
    }
}

/**
 * cs_value_equal:
 * Structural equality; proxies compare by name, floats by value (NaN equals NaN), the raw
 * spelling is ignored.
 */
gboolean
cs_value_equal (const CsValue *a, const CsValue *b)
{
  return value_equal (a, b, FALSE);
}

/**
 * cs_value_equal_strict:
 * As cs_value_equal(), and the raw spelling (`1e-05` vs `0.00001`) must match at every level:
 * the round-trip tests' notion of "identical".
 */
gboolean
cs_value_equal_strict (const CsValue *a, const CsValue *b)
{
  return value_equal (a, b, TRUE);
}

/**
 * cs_value_get_int_seq:
 * @v: a TUPLE or LIST of INT values (a single INT counts as a 1-sequence)
 * @out: (out caller-allocates): at least @max slots
 * @max: capacity of @out
 * @n_out: (out): number of ints read
 *
 * Returns: %FALSE if @v is not such a sequence or longer than @max
 */
gboolean
cs_value_get_int_seq (const CsValue *v, int64_t *out, guint max, guint *n_out)
{
  if (v == NULL)
    return FALSE;
  if (v->kind == CS_VALUE_INT)
    {
      if (max < 1)
        return FALSE;
      out[0] = v->u.i;
      *n_out = 1;
      return TRUE;
    }
  if (v->kind != CS_VALUE_TUPLE && v->kind != CS_VALUE_LIST)
    return FALSE;
  if (v->u.seq.n > max)
    return FALSE;
  for (guint i = 0; i < v->u.seq.n; i++)
    {
      const CsValue *it = v->u.seq.items[i];
      if (it->kind == CS_VALUE_INT)
        out[i] = it->u.i;
      else if (it->kind == CS_VALUE_PROXY && it->u.proxy->kind == CS_PROXY_NUMBER
               && it->u.proxy->has_value && it->u.proxy->value != NULL
               && it->u.proxy->value->kind == CS_VALUE_INT)
        out[i] = it->u.proxy->value->u.i;
      else
        return FALSE;
    }
  *n_out = v->u.seq.n;
  return TRUE;
}

/** cs_value_any_proxy: see cs-ir.h. */
gboolean
cs_value_any_proxy (const CsValue *v, CsProxyFunc fn, gpointer data)
{
  if (v == NULL)
    return FALSE;
  switch (v->kind)
    {
    case CS_VALUE_PROXY:
      return fn (v->u.proxy, data);
    case CS_VALUE_CALL:
      for (guint i = 0; i < v->u.call.n_args; i++)
        if (cs_value_any_proxy (v->u.call.args[i].value, fn, data))
          return TRUE;
      return FALSE;
    case CS_VALUE_TUPLE:
    case CS_VALUE_LIST:
    case CS_VALUE_DICT:
    case CS_VALUE_SUBSCRIPT:
    case CS_VALUE_ATTR:
      for (guint i = 0; i < v->u.seq.n; i++)
        {
          const CsValue *it = v->u.seq.items[i];
          /* most items are proxies or literals: no call for them */
          if (it == NULL)
            continue;
          if (it->kind == CS_VALUE_PROXY)
            {
              if (fn (it->u.proxy, data))
                return TRUE;
            }
          else if (value_has_items (it->kind) && cs_value_any_proxy (it, fn, data))
            return TRUE;
        }
      return FALSE;
    default:
      return FALSE;
    }
}

static gboolean
append_proxy (CsProxy *p, gpointer out)
{
  g_ptr_array_add (out, p);
  return FALSE;
}

/** cs_value_collect_proxies: appends every proxy referenced by @v (depth first) to @out. */
void
cs_value_collect_proxies (const CsValue *v, GPtrArray *out)
{
  cs_value_any_proxy (v, append_proxy, out);
}

/**
 * cs_value_get_dtype:
 * @v: (nullable): an argument value
 * @out: (out): the dtype
 *
 * Reads a dtype argument as traces print it: `dtypes.bfloat16`, `dtypes.float32_`, a bare
 * Python type (`float` -> float32, Thunder's numbertype alias) or `torch.float32`.
 * Returns: %FALSE if @v is no dtype
 */
gboolean
cs_value_get_dtype (const CsValue *v, CsDtype *out)
{
  if (v == NULL)
    return FALSE;
  if (v->kind == CS_VALUE_DTYPE)
    {
      *out = v->u.dtype.pytype ? cs_pytype_dtype (v->u.dtype.pytype) : v->u.dtype.dtype;
      return TRUE;
    }
  if (v->kind == CS_VALUE_NAME && v->u.s != NULL)
    {
      const char *s = v->u.s;
      gboolean weak;

      if (g_str_has_prefix (s, "torch."))
        s += 6;
      else if (g_str_has_prefix (s, "dtypes."))
        s += 7;
      return cs_dtype_from_long (s, strlen (s), out, &weak);
    }
  return FALSE;
}

/**
 * cs_value_get_device:
 * @v: (nullable): an argument value
 * @out: (out): the device
 *
 * Reads a device argument: `devices.Device("cuda:0")`, `torch.device("cuda:0")`,
 * `torch.device("cuda", 0)` or the string `'cuda:0'` (thunder/core/devices.py).
 * Returns: %FALSE if @v is no device
 */
gboolean
cs_value_get_device (const CsValue *v, CsDevice *out)
{
  if (v == NULL)
    return FALSE;
  if (v->kind == CS_VALUE_STRING)
    return cs_device_parse (v->u.s, strlen (v->u.s), out);
  if (v->kind == CS_VALUE_CALL && v->u.call.n_args >= 1
      && (g_str_has_suffix (v->u.call.callee, "Device") || g_str_has_suffix (v->u.call.callee, "device"))
      && v->u.call.args[0].value->kind == CS_VALUE_STRING)
    {
      const CsValue *s = v->u.call.args[0].value;

      if (v->u.call.n_args == 2 && v->u.call.args[1].value->kind == CS_VALUE_INT)
        {
          g_autofree char *t = g_strdup_printf ("%s:%" G_GINT64_FORMAT, s->u.s,
                                                v->u.call.args[1].value->u.i);
          return cs_device_parse (t, strlen (t), out);
        }
      return cs_device_parse (s->u.s, strlen (s->u.s), out);
    }
  return FALSE;
}

/* ------------------------------------------------------------------------------------------ */
/* Proxies                                                                                     */

/* TRUE when @p, found in the own table of @layer (@trace or a trace of its proxy_base chain),
 * passes the proxy_keep filters of every trace from @trace down to @layer. */
static gboolean
proxy_kept (const CsTrace *trace, const CsTrace *layer, const CsProxy *p)
{
  for (const CsTrace *u = trace; u != NULL; u = u->proxy_base)
    {
      if (u->proxy_keep != NULL && p->id < u->proxy_keep_n && !u->proxy_keep[p->id])
        return FALSE;
      if (u == layer)
        break;
    }
  return TRUE;
}

/** cs_proxy_init_self: see cs-ir.h. */
void
cs_proxy_init_self (CsProxy *proxy)
{
  memset (&proxy->self, 0, sizeof proxy->self);
  proxy->self.kind = CS_VALUE_PROXY;
  proxy->self.u.proxy = proxy;
}

/* the fields the passes read for every use of a proxy share its first cache line */
G_STATIC_ASSERT (GLIB_SIZEOF_VOID_P != 8
                 || G_STRUCT_OFFSET (CsProxy, device) + sizeof (CsDevice) <= 64);

/** cs_proxy_alloc: see cs-ir.h. */
CsProxy *
cs_proxy_alloc (CsArena *arena)
{
  CsProxy *p = cs_arena_alloc_line (arena, sizeof (CsProxy));

  cs_proxy_init_self (p);
  return p;
}

/** cs_trace_lookup_proxy: see cs-ir.h. */
CsProxy *
cs_trace_lookup_proxy (const CsTrace *trace, const char *name)
{
  return _cs_trace_lookup_proxy_hashed (trace, name, cs_name_hash (name));
}

/** _cs_trace_lookup_proxy_hashed: cs_trace_lookup_proxy() with @hash = cs_name_hash (@name). */
CsProxy *
_cs_trace_lookup_proxy_hashed (const CsTrace *trace, const char *name, guint32 hash)
{
  for (const CsTrace *t = trace; t != NULL; t = t->proxy_base)
    {
      CsProxy *p = cs_name_table_lookup (t->proxies, name, hash);
      if (p != NULL)
        return proxy_kept (trace, t, p) ? p : NULL;
    }
  return NULL;
}

/** cs_trace_dup_proxies: see cs-ir.h. */
GHashTable *
cs_trace_dup_proxies (const CsTrace *trace)
{
  GHashTable *all = g_hash_table_new (g_str_hash, g_str_equal);
  g_autoptr(GHashTable) dropped = g_hash_table_new (g_str_hash, g_str_equal);

  for (const CsTrace *t = trace; t != NULL; t = t->proxy_base)
    {
      CsProxy *v;
      guint pos = 0;
      while ((v = cs_name_table_next (t->proxies, &pos)) != NULL)
        {
          gpointer k = (gpointer) v->name;
          if (g_hash_table_contains (all, k) || g_hash_table_contains (dropped, k))
            continue;
          /* the first layer holding a name decides, as in cs_trace_lookup_proxy */
          if (proxy_kept (trace, t, v))
            g_hash_table_insert (all, k, v);
          else
            g_hash_table_add (dropped, k);
        }
    }
  return all;
}

/** cs_trace_n_proxies: see cs-ir.h. */
guint
cs_trace_n_proxies (const CsTrace *trace)
{
  g_autoptr(GHashTable) all = NULL;

  if (trace->proxy_base == NULL && trace->proxy_keep == NULL)
    return cs_name_table_size (trace->proxies);
  all = cs_trace_dup_proxies (trace);
  return g_hash_table_size (all);
}

/* The bytes a proxy with its name inline takes: two cache lines. */
#define PROXY_LINES 128

/* A zeroed proxy as cs_proxy_alloc() makes one, with its name a copy of @name: in the bytes
 * after the struct, up to the end of its second cache line, when it fits there (a separate
 * string would start a gap before the next line-aligned object), else next to it. */
static CsProxy *
proxy_alloc_named (CsArena *arena, const char *name)
{
  gsize len = strlen (name);
  CsProxy *p;
  char *copy;

  if (len + 1 <= PROXY_LINES - sizeof (CsProxy))
    {
      p = cs_arena_alloc_line (arena, PROXY_LINES);
      copy = (char *) (p + 1);
    }
  else
    {
      p = cs_arena_alloc_line (arena, sizeof (CsProxy));
      copy = cs_arena_alloc_small (arena, len + 1);
    }
  memcpy (copy, name, len + 1);
  cs_proxy_init_self (p);
  p->name = copy;
  return p;
}

/** cs_trace_add_proxy: see cs-ir.h.  Returns: (transfer none) */
CsProxy *
cs_trace_add_proxy (CsTrace *trace, const char *name)
{
  guint32 hash = cs_name_hash (name);
  CsProxy *p = _cs_trace_lookup_proxy_hashed (trace, name, hash);

  if (p != NULL)
    return p;
  p = proxy_alloc_named (trace->arena, name);
  p->kind = CS_PROXY_OTHER;
  p->dtype = CS_DTYPE_F32;
  _cs_trace_name_proxy (trace, p, p->name, hash, name_t_plus1 (name));
  return p;
}

/** _cs_trace_new_proxy: see cs-ir.h. */
CsProxy *
_cs_trace_new_proxy (CsTrace *trace, const char *name, guint32 hash, guint64 t_plus1)
{
  CsProxy *p = _cs_proxy_new_unnamed (trace->arena);

  _cs_trace_name_proxy (trace, p, name, hash, t_plus1);
  return p;
}

/** _cs_proxy_new_unnamed: see cs-ir.h. */
CsProxy *
_cs_proxy_new_unnamed (CsArena *arena)
{
  CsProxy *p = cs_proxy_alloc (arena);

  p->kind = CS_PROXY_OTHER;
  p->dtype = CS_DTYPE_F32;
  return p;
}

/** _cs_trace_name_proxy: see cs-ir.h. */
void
_cs_trace_name_proxy (CsTrace *trace, CsProxy *proxy, const char *name, guint32 hash,
                      guint64 t_plus1)
{
  proxy->name = name;
  proxy->id = ++trace->next_proxy_id;
  _cs_name_table_insert_t (trace->proxies, proxy, hash, t_plus1);
}

/**
 * cs_trace_fresh_name:
 * @prefix: name prefix ("t" for tensors, as Thunder)
 *
 * Returns: (transfer none): "<prefix><n>" unused in @trace, n from the trace's counter
 */
const char *
cs_trace_fresh_name (CsTrace *trace, const char *prefix)
{
  char buf[128];

  for (;;)
    {
      g_snprintf (buf, sizeof buf, "%s%u", prefix, trace->next_name++);
      if (cs_trace_lookup_proxy (trace, buf) == NULL)
        return cs_arena_strdup (trace->arena, buf);
    }
}

/* An array in @trace's arena holding the @rank extents @shape (@rank > 0): one a proxy of
 * @trace already has when CsTrace.shape_cache holds it, else a new one, remembered there. */
static int64_t *
trace_shape (CsTrace *trace, const int64_t *shape, guint rank)
{
  guint64 h = rank;
  guint slot;
  int64_t *c;

  for (guint i = 0; i < rank; i++)
    h = h * G_GUINT64_CONSTANT (0x9e3779b97f4a7c15) + (guint64) shape[i];
  slot = (guint) (h >> 61) & (G_N_ELEMENTS (trace->shape_cache) - 1);
  c = trace->shape_cache[slot];
  if (c != NULL && trace->shape_cache_rank[slot] == rank
      && memcmp (c, shape, sizeof (int64_t) * rank) == 0)
    return c;
  c = CS_ARENA_NEW_N (trace->arena, int64_t, rank);
  memcpy (c, shape, sizeof (int64_t) * rank);
  if (rank <= G_MAXUINT8)
    {
      trace->shape_cache[slot] = c;
      trace->shape_cache_rank[slot] = (guint8) rank;
    }
  return c;
}

/** cs_proxy_set_tensor: makes @proxy a typed tensor (shape copied or shared within @trace;
 * type_raw cleared). */
void
cs_proxy_set_tensor (CsTrace *trace, CsProxy *proxy, CsDtype dtype, const int64_t *shape,
                     guint rank, const CsDevice *device)
{
  g_return_if_fail (rank <= CS_MAX_DIMS);
  proxy->kind = CS_PROXY_TENSOR;
  proxy->dtype = dtype;
  proxy->rank = rank;
  proxy->shape = rank ? trace_shape (trace, shape, rank) : NULL;
  proxy->device = device ? *device : (CsDevice) { CS_DEVICE_CUDA, 0 };
  proxy->typed = 1;
  proxy->type_raw = NULL;
}

/**
 * cs_trace_new_tensor:
 * @prefix: name prefix ("t")
 * @device: (nullable): device, cuda:0 when NULL
 *
 * Returns: (transfer none): a new typed tensor proxy with a fresh name
 */
CsProxy *
cs_trace_new_tensor (CsTrace *trace, const char *prefix, CsDtype dtype, const int64_t *shape,
                     guint rank, const CsDevice *device)
{
  CsProxy *p = cs_trace_add_proxy (trace, cs_trace_fresh_name (trace, prefix));
  cs_proxy_set_tensor (trace, p, dtype, shape, rank, device);
  return p;
}

/* Python's repr of a float: the shortest digit string that round-trips; fixed notation when
 * the decimal exponent is in [-4, 16), else d.ddde[+-]XX, as Python's float_repr_style 'short'. */
static void
append_py_float (GString *out, double f)
{
  char ebuf[64], fbuf[400];
  int p, exp10;
  const char *e;

  if (isnan (f))
    {
      g_string_append (out, "float('NaN')");
      return;
    }
  if (isinf (f))
    {
      g_string_append (out, f > 0 ? "float('inf')" : "-float('inf')");
      return;
    }
  for (p = 1; p <= 17; p++)
    {
      g_snprintf (ebuf, sizeof ebuf, "%.*e", p - 1, f);
      if (g_ascii_strtod (ebuf, NULL) == f)
        break;
    }
  e = strchr (ebuf, 'e');
  exp10 = e ? atoi (e + 1) : 0;
  if (exp10 >= -4 && exp10 < 16)
    {
      int decimals = p - 1 - exp10;
      if (decimals < 0)
        decimals = 0;
      g_snprintf (fbuf, sizeof fbuf, "%.*f", decimals, f);
      g_string_append (out, fbuf);
      if (decimals == 0)
        g_string_append (out, ".0");
    }
  else
    g_string_append (out, ebuf);
}

/* Appends the decimal digits of @v (with a leading '-' when negative) to @s, as
 * printf's "%" G_GINT64_FORMAT writes them. */
static void
type_append_int (GString *s, int64_t v)
{
  char buf[24];
  guint n = 0;
  uint64_t u = v < 0 ? (uint64_t) 0 - (uint64_t) v : (uint64_t) v;

  do
    {
      buf[sizeof buf - 1 - n++] = (char) ('0' + u % 10);
      u /= 10;
    }
  while (u != 0);
  if (v < 0)
    buf[sizeof buf - 1 - n++] = '-';
  _cs_str_put_len (s, buf + sizeof buf - n, n);
}

/**
 * cs_proxy_type_append:
 * @s: string to append to
 * @proxy: a proxy
 *
 * Appends the type string cs_proxy_type_string() returns (type_raw verbatim when set), without
 * allocating anything but @s's growth (the printer calls it for every typed output).
 * Source: thunder/core/proxies.py `type_string`.
 */
void
cs_proxy_type_append (GString *s, const CsProxy *proxy)
{
  if (proxy->type_raw != NULL)
    {
      _cs_str_put (s, proxy->type_raw);
      return;
    }
  switch (proxy->kind)
    {
    case CS_PROXY_TENSOR:
      if (proxy->future)
        _cs_str_put_len (s, "FUTURE ", 7);
      switch (proxy->device.type)
        {
        case CS_DEVICE_CPU:
          _cs_str_put_len (s, "cpu", 3);
          break;
        case CS_DEVICE_META:
          _cs_str_put_len (s, "meta", 4);
          break;
        case CS_DEVICE_CUDA:
        default:
          _cs_str_put_len (s, "cuda:", 5);
          type_append_int (s, proxy->device.index);
          break;
        }
      g_string_append_c (s, ' ');
      _cs_str_put (s, cs_dtype_short_name (proxy->dtype));
      g_string_append_c (s, '[');
      for (guint i = 0; i < proxy->rank; i++)
        {
          if (i)
            _cs_str_put_len (s, ", ", 2);
          if (proxy->shape[i] < 0)
            g_string_append_c (s, '?');
          else
            type_append_int (s, proxy->shape[i]);
        }
      g_string_append_c (s, ']');
      break;
    case CS_PROXY_NUMBER:
      {
        const char *tn = "int";
        if (proxy->dtype == CS_DTYPE_B8)
          tn = "bool";
        else if (cs_dtype_is_float (proxy->dtype))
          tn = "float";
        else if (cs_dtype_kind (proxy->dtype) == CS_DTYPE_KIND_COMPLEX)
          tn = "complex";
        _cs_str_put (s, tn);
        g_string_append_c (s, ' ');
        if (!proxy->has_value || proxy->value == NULL)
          g_string_append_c (s, '?');
        else if (proxy->value->kind == CS_VALUE_BOOL)
          _cs_str_put (s, proxy->value->u.b ? "True" : "False");
        else if (proxy->value->kind == CS_VALUE_INT)
          type_append_int (s, proxy->value->u.i);
        else if (proxy->value->kind == CS_VALUE_FLOAT)
          {
            if (proxy->value->raw)
              _cs_str_put (s, proxy->value->raw);
            else
              append_py_float (s, proxy->value->u.f);
          }
        else
          g_string_append_c (s, '?');
      }
      break;
    case CS_PROXY_COLLECTION:
      _cs_str_put (s, "Collection");
      break;
    case CS_PROXY_OTHER:
    default:
      _cs_str_put (s, "Any");
      break;
    }
}

/**
 * cs_proxy_type_string:
 * @proxy: a proxy
 *
 * The type string as Thunder prints it between quotes: "cuda:0 bf16[8, 16]", "cpu f32[]",
 * "int 3", "float ?", "Collection".  Uses type_raw verbatim when set.
 * Source: thunder/core/proxies.py `type_string`.
 * Returns: (transfer full): the type string
 */
char *
cs_proxy_type_string (const CsProxy *proxy)
{
  GString *s;

  if (proxy->type_raw != NULL)
    return g_strdup (proxy->type_raw);
  s = g_string_sized_new (32);
  cs_proxy_type_append (s, proxy);
  return g_string_free (s, FALSE);
}

/** cs_proxy_is_float_tensor: a typed tensor of a real floating dtype. */
gboolean
cs_proxy_is_float_tensor (const CsProxy *proxy)
{
  return proxy != NULL && proxy->kind == CS_PROXY_TENSOR && proxy->typed
         && cs_dtype_is_float (proxy->dtype);
}

/* ------------------------------------------------------------------------------------------ */
/* Statements                                                                                  */

/* the fields every pass reads for every statement fill its first cache line (cs-ir.h) */
G_STATIC_ASSERT (GLIB_SIZEOF_VOID_P != 8
                 || G_STRUCT_OFFSET (CsStmt, callee) + sizeof (const char *) <= 64);

/* a statement is two cache lines: the fields every pass reads, then the rest */
G_STATIC_ASSERT (GLIB_SIZEOF_VOID_P != 8
                 || (G_STRUCT_OFFSET (CsStmt, id) == 64 && sizeof (CsStmt) == 128));

/** cs_stmt_new: an empty statement of @kind with a fresh id, in @trace's arena. */
CsStmt *
cs_stmt_new (CsTrace *trace, CsStmtKind kind)
{
  CsStmt *s = cs_arena_alloc_line (trace->arena, sizeof (CsStmt));
  s->kind = kind;
  s->id = ++trace->next_stmt_id;
  s->owner = trace->serial;
  s->op = cs_op_get (CS_OP_OPAQUE);
  return s;
}

/**
 * cs_stmt_new_call:
 * @op: (nullable): the op entry; looked up from @callee when NULL
 * @callee: (nullable): printed callee; the op's name when NULL
 * @out: (nullable): target tree
 * @args: (array length=n_args): arguments, copied (the values are shared)
 *
 * The trailing type comment is FULL when @out is a single proxy.
 * Returns: (transfer none): the statement (owned by @trace's arena)
 */
CsStmt *
cs_stmt_new_call (CsTrace *trace, const CsOp *op, const char *callee, CsValue *out,
                  CsArg *args, guint n_args)
{
  CsStmt *s = cs_stmt_new_call_static (trace, op, callee, out, args, n_args);

  if (callee != NULL)
    s->callee = cs_arena_strdup (trace->arena, callee);
  return s;
}

/** cs_stmt_new_call_static: see cs-ir.h. */
CsStmt *
cs_stmt_new_call_static (CsTrace *trace, const CsOp *op, const char *callee, CsValue *out,
                         const CsArg *args, guint n_args)
{
  CsStmt *s = cs_stmt_new (trace, CS_STMT_CALL);

  g_return_val_if_fail (op != NULL || callee != NULL, s);
  s->op = op ? op : cs_op_lookup (callee);
  s->callee = callee ? callee : s->op->name;
  s->out = out;
  s->n_args = n_args;
  if (n_args)
    {
      s->args = CS_ARENA_NEW_N (trace->arena, CsArg, n_args);
      memcpy (s->args, args, sizeof (CsArg) * n_args);
    }
  s->type_comment = (out != NULL && out->kind == CS_VALUE_PROXY) ? CS_TYPECOMMENT_FULL
                                                                 : CS_TYPECOMMENT_NONE;
  cs_stmt_index (trace, s);
  return s;
}

/* The ids cs_stmt_index() stores, appended to @ids: a CALL's argument reads in
 * _cs_stmt_reads() order (plain proxies directly, nested values depth first), then the proxies
 * its target writes.  Returns the number of reads. */
static gboolean
io_push_id (CsProxy *p, gpointer data)
{
  g_array_append_val ((GArray *) data, p->id);
  return FALSE;
}

static guint32
io_collect (const CsStmt *s, GArray *ids)
{
  guint32 n_in;

  for (guint i = 0; i < s->n_args; i++)
    {
      const CsValue *v = s->args[i].value;
      if (v->kind == CS_VALUE_PROXY)
        g_array_append_val (ids, v->u.proxy->id);
      else if (v->kind >= CS_VALUE_TUPLE)
        cs_value_any_proxy (v, io_push_id, ids);
    }
  n_in = ids->len;
  if (s->out != NULL && s->out->kind == CS_VALUE_PROXY)
    g_array_append_val (ids, s->out->u.proxy->id);
  else if (s->out != NULL)
    cs_value_any_proxy (s->out, io_push_id, ids);
  return n_in;
}

G_STATIC_ASSERT (sizeof (const guint32 *) <= sizeof (((CsStmt *) NULL)->io_words));

/* Stores the @n def-use ids @ids (@n_in read ids first) in @stmt: in CsStmt.io_words when
 * they fit there, else in an array of @trace's arena whose address io_words holds. */
static void
stmt_store_io (CsTrace *trace, CsStmt *stmt, const guint32 *ids, guint n_in, guint n)
{
  stmt->n_in = n_in;
  stmt->n_out = n - n_in;
  if (n <= CS_STMT_IO_INLINE)
    memcpy (stmt->io_words, ids, n * sizeof (guint32));
  else
    {
      guint32 *heap = cs_arena_alloc_small (trace->arena, n * sizeof (guint32));
      memcpy (heap, ids, n * sizeof (guint32));
      memcpy (stmt->io_words, &heap, sizeof heap);
    }
}

/** cs_stmt_index: see cs-ir.h. */
void
cs_stmt_index (CsTrace *trace, CsStmt *stmt)
{
  guint32 buf[32], n = 0, n_in = 0;
  gboolean simple = TRUE;

  if (stmt->kind != CS_STMT_CALL)
    return;
  /* the common case without a GArray: arguments that are proxies, literals, or tuples and
   * lists of those (shapes, dims, lists of tensors), and a proxy or flat list target */
  for (guint i = 0; i < stmt->n_args && simple; i++)
    {
      const CsValue *v = stmt->args[i].value;
      if (v->kind == CS_VALUE_PROXY && n < G_N_ELEMENTS (buf))
        buf[n++] = v->u.proxy->id;
      else if (v->kind == CS_VALUE_TUPLE || v->kind == CS_VALUE_LIST)
        for (guint k = 0; k < v->u.seq.n && simple; k++)
          {
            const CsValue *it = v->u.seq.items[k];
            if (it->kind == CS_VALUE_PROXY && n < G_N_ELEMENTS (buf))
              buf[n++] = it->u.proxy->id;
            else if (it->kind == CS_VALUE_PROXY || it->kind >= CS_VALUE_TUPLE)
              simple = FALSE;
          }
      else if (v->kind == CS_VALUE_PROXY || v->kind >= CS_VALUE_TUPLE)
        simple = FALSE;
    }
  n_in = n;
  if (simple && stmt->out != NULL)
    {
      const CsValue *o = stmt->out;
      if (o->kind == CS_VALUE_PROXY && n < G_N_ELEMENTS (buf))
        buf[n++] = o->u.proxy->id;
      else if (o->kind == CS_VALUE_PROXY)
        simple = FALSE;
      else if (o->kind == CS_VALUE_TUPLE || o->kind == CS_VALUE_LIST)
        {
          for (guint i = 0; i < o->u.seq.n && simple; i++)
            {
              const CsValue *it = o->u.seq.items[i];
              if (it->kind == CS_VALUE_PROXY && n < G_N_ELEMENTS (buf))
                buf[n++] = it->u.proxy->id;
              else if (it->kind == CS_VALUE_PROXY || it->kind >= CS_VALUE_TUPLE)
                simple = FALSE;
            }
        }
      else if (o->kind >= CS_VALUE_TUPLE)
        simple = FALSE;
    }
  if (!simple)
    {
      GArray *ids = g_array_sized_new (FALSE, FALSE, sizeof (guint32), 64);
      n_in = io_collect (stmt, ids);
      stmt_store_io (trace, stmt, (const guint32 *) ids->data, n_in, ids->len);
      g_array_free (ids, TRUE);
    }
  else
    stmt_store_io (trace, stmt, buf, n_in, n);
}

/** cs_stmt_set_args: see cs-ir.h. */
void
cs_stmt_set_args (CsTrace *trace, CsStmt *stmt, CsArg *args, guint n_args)
{
  stmt->args = args;
  stmt->n_args = n_args;
  cs_stmt_index (trace, stmt);
}

/** cs_stmt_set_out: see cs-ir.h. */
void
cs_stmt_set_out (CsTrace *trace, CsStmt *stmt, CsValue *out)
{
  stmt->out = out;
  stmt->type_comment = (out != NULL && out->kind == CS_VALUE_PROXY) ? CS_TYPECOMMENT_FULL
                                                                    : CS_TYPECOMMENT_NONE;
  cs_stmt_index (trace, stmt);
}

/** cs_stmt_set_call: see cs-ir.h. */
void
cs_stmt_set_call (CsTrace *trace, CsStmt *stmt, CsArg *args, guint n_args, CsValue *out)
{
  stmt->args = args;
  stmt->n_args = n_args;
  stmt->out = out;
  cs_stmt_index (trace, stmt);
}

/** cs_stmt_io_matches: see cs-ir.h. */
gboolean
cs_stmt_io_matches (const CsStmt *stmt)
{
  GArray *ids;
  guint32 n_in;
  gboolean ok;

  if (stmt->kind != CS_STMT_CALL)
    return TRUE;
  ids = g_array_new (FALSE, FALSE, sizeof (guint32));
  n_in = io_collect (stmt, ids);
  ok = n_in == stmt->n_in && ids->len == stmt->n_in + stmt->n_out
       && (ids->len == 0 || memcmp (ids->data, cs_stmt_io (stmt), ids->len * sizeof (guint32)) == 0);
  g_array_free (ids, TRUE);
  return ok;
}

/* Appends @p to the GPtrArray @data (cs_value_any_proxy() callback). */
static gboolean
io_push_proxy (CsProxy *p, gpointer data)
{
  g_ptr_array_add (data, p);
  return FALSE;
}

/** cs_stmt_io_mismatch: see cs-ir.h. */
char *
cs_stmt_io_mismatch (const CsStmt *stmt)
{
  g_autoptr(GPtrArray) ps = NULL;
  GString *msg;
  guint n_in = 0, n_all;

  if (cs_stmt_io_matches (stmt))
    return NULL;
  /* the proxies in io_collect() order: the reads, then the writes */
  ps = g_ptr_array_new ();
  for (guint i = 0; i < stmt->n_args; i++)
    {
      CsValue *v = stmt->args[i].value;
      if (v->kind == CS_VALUE_PROXY)
        g_ptr_array_add (ps, v->u.proxy);
      else if (v->kind >= CS_VALUE_TUPLE)
        cs_value_any_proxy (v, io_push_proxy, ps);
    }
  n_in = ps->len;
  if (stmt->out != NULL)
    cs_value_any_proxy (stmt->out, io_push_proxy, ps);
  n_all = ps->len;
  msg = g_string_new (NULL);
  g_string_append_printf (msg, "stored %u reads and %u writes, the values hold %u and %u",
                          stmt->n_in, stmt->n_out, n_in, n_all - n_in);
  for (guint k = 0; k < MAX (n_all, stmt->n_in + stmt->n_out); k++)
    {
      gboolean in_now = k < n_in, in_stored = k < stmt->n_in;
      const CsProxy *p = k < n_all ? ps->pdata[k] : NULL;
      gboolean have_stored = k < stmt->n_in + stmt->n_out;
      if (have_stored && p != NULL && in_now == in_stored && cs_stmt_io (stmt)[k] == p->id)
        continue;
      g_string_append_printf (msg, "; first difference at position %u (%s %u): stored ", k,
                              in_now ? "read" : "write", in_now ? k : k - n_in);
      if (have_stored)
        g_string_append_printf (msg, "id %u", cs_stmt_io (stmt)[k]);
      else
        g_string_append (msg, "nothing");
      if (p != NULL)
        g_string_append_printf (msg, ", the value holds %s (id %u)", p->name ? p->name : "?",
                                p->id);
      else
        g_string_append (msg, ", the value holds nothing");
      break;
    }
  return g_string_free (msg, FALSE);
}

/** cs_stmt_get_output: the single output proxy of a CALL/ANNASSIGN, else NULL. */
CsProxy *
cs_stmt_get_output (const CsStmt *stmt)
{
  if ((stmt->kind == CS_STMT_CALL || stmt->kind == CS_STMT_ANNASSIGN)
      && stmt->out != NULL && stmt->out->kind == CS_VALUE_PROXY)
    return stmt->out->u.proxy;
  return NULL;
}

/** cs_stmt_collect_outputs: appends the proxies bound by @stmt to @out. */
void
cs_stmt_collect_outputs (const CsStmt *stmt, GPtrArray *out)
{
  switch (stmt->kind)
    {
    case CS_STMT_CALL:
    case CS_STMT_ANNASSIGN:
      cs_value_collect_proxies (stmt->out, out);
      break;
    case CS_STMT_UNPACK:
      for (guint i = 0; i < stmt->n_targets; i++)
        cs_value_collect_proxies (stmt->targets[i], out);
      break;
    default:
      break;
    }
}

/** cs_stmt_collect_inputs: appends the proxies read by @stmt (not its subsymbols) to @out. */
void
cs_stmt_collect_inputs (const CsStmt *stmt, GPtrArray *out)
{
  switch (stmt->kind)
    {
    case CS_STMT_CALL:
      for (guint i = 0; i < stmt->n_args; i++)
        cs_value_collect_proxies (stmt->args[i].value, out);
      break;
    case CS_STMT_UNPACK:
      if (stmt->source)
        g_ptr_array_add (out, stmt->source);
      break;
    case CS_STMT_ANNASSIGN:
    case CS_STMT_RETURN:
      cs_value_collect_proxies (stmt->value, out);
      break;
    default:
      break;
    }
}

/**
 * _cs_stmt_get_arg_slow:
 * @i: positional index
 * @kw: (nullable): keyword name to look for when there is no positional argument @i
 *
 * cs_stmt_get_arg() without its inline fast path (see cs-ir.h).
 * Returns: (transfer none) (nullable): the argument value
 */
CsValue *
_cs_stmt_get_arg_slow (const CsStmt *stmt, guint i, const char *kw)
{
  guint pos = 0;

  for (guint k = 0; k < stmt->n_args; k++)
    {
      if (stmt->args[k].name == NULL)
        {
          if (pos == i)
            return stmt->args[k].value;
          pos++;
        }
    }
  if (kw != NULL)
    for (guint k = 0; k < stmt->n_args; k++)
      if (stmt->args[k].name != NULL && strcmp (stmt->args[k].name, kw) == 0)
        return stmt->args[k].value;
  return NULL;
}

/** cs_stmt_is_symbol: %TRUE for CALL, UNPACK, ANNASSIGN, DEL and RETURN. */
gboolean
cs_stmt_is_symbol (const CsStmt *stmt)
{
  return stmt->kind != CS_STMT_COMMENT && stmt->kind != CS_STMT_BLANK;
}

/** cs_stmt_set_subs: sets the subsymbols of @stmt (array copied into the arena). */
void
cs_stmt_set_subs (CsTrace *trace, CsStmt *stmt, CsStmt **subs, guint n)
{
  stmt->subs = (CsStmt **) cs_arena_dup_ptrs (trace->arena, (gpointer const *) subs, n);
  stmt->n_subs = n;
  stmt->region_fresh = 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Traces                                                                                      */

/**
 * cs_trace_new:
 * @name: function name ("computation")
 * @pass: (nullable): pass that makes it
 *
 * Returns: (transfer full): an empty trace with a signature and no statements
 */
CsTrace *
cs_trace_new (const char *name, const char *pass)
{
  static guint32 serials;
  CsTrace *t = g_new0 (CsTrace, 1);

  t->ref_count = 1;
  t->serial = (guint32) g_atomic_int_add ((gint *) &serials, 1) + 1;
  t->arena = cs_arena_new ();
  t->proxies = cs_name_table_new ();
  t->has_signature = name != NULL;
  t->name = cs_arena_strdup (t->arena, name);
  t->pass = cs_arena_strdup (t->arena, pass);
  return t;
}

/** cs_trace_ref: Returns: (transfer full): @trace */
CsTrace *
cs_trace_ref (CsTrace *trace)
{
  g_return_val_if_fail (trace != NULL, NULL);
  g_atomic_int_inc (&trace->ref_count);
  return trace;
}

/** cs_trace_unref: drops a reference; frees the arena with the last one. */
void
cs_trace_unref (CsTrace *trace)
{
  if (trace == NULL)
    return;
  if (g_atomic_int_dec_and_test (&trace->ref_count))
    {
      cs_name_table_free (trace->proxies);
      if (trace->aten != NULL)
        cs_aten_info_unref (trace->aten);
      cs_arena_free (trace->arena);
      if (trace->base != NULL)
        cs_trace_unref (trace->base);
      g_free (trace);
    }
}

static const char **
dup_strv (CsArena *arena, const char * const *v, guint n)
{
  const char **d;

  if (n == 0)
    return NULL;
  d = CS_ARENA_NEW_N (arena, const char *, n);
  for (guint i = 0; i < n; i++)
    d[i] = cs_arena_strdup (arena, v[i]);
  return d;
}

static CsProxy *
proxy_clone (CsTrace *dst, const CsProxy *p, GHashTable *map)
{
  CsProxy *np = proxy_alloc_named (dst->arena, p->name);
  const char *name = np->name;

  *np = *p;
  cs_proxy_init_self (np);
  np->name = name;
  np->type_raw = cs_arena_strdup (dst->arena, p->type_raw);
  if (p->rank)
    np->shape = trace_shape (dst, p->shape, p->rank);
  np->value = value_copy_full (dst->arena, NULL, p->value, NULL);
  cs_name_table_insert (dst->proxies, np, cs_name_hash (np->name));
  if (map)
    g_hash_table_insert (map, (gpointer) p, np);
  return np;
}

/* The proxy of @dst that stands for @p (a proxy of another trace): from the map, else by
 * name, else a clone of @p. */
static CsProxy *
proxy_map_get (CsTrace *dst, GHashTable *map, CsProxy *p)
{
  CsProxy *np;

  if (p == NULL)
    return NULL;
  np = map ? g_hash_table_lookup (map, p) : NULL;
  if (np != NULL)
    return np;
  np = cs_trace_lookup_proxy (dst, p->name);
  if (np == NULL)
    {
      np = proxy_clone (dst, p, NULL);
      np->id = ++dst->next_proxy_id;
    }
  if (map)
    g_hash_table_insert (map, p, np);
  return np;
}

static CsStmt *
stmt_copy (CsTrace *dst, const CsStmt *s, GHashTable *map, gboolean keep_id)
{
  CsArena *a = dst->arena;
  CsStmt *c = cs_arena_alloc_line_uninit (a, sizeof (CsStmt));

  *c = *s;
  c->owner = dst->serial;
  if (keep_id)
    {
      if (c->id > dst->next_stmt_id)
        dst->next_stmt_id = c->id;
    }
  else
    c->id = ++dst->next_stmt_id;
  if (c->origin == 0)
    c->origin = s->origin ? s->origin : s->id;
  c->callee = cs_arena_strdup (a, s->callee);
  c->type_comment_raw = cs_arena_strdup (a, s->type_comment_raw);
  if (s->kind == CS_STMT_COMMENT || s->kind == CS_STMT_BLANK)
    {
      c->text = cs_arena_strdup (a, s->text);
      c->annotated = proxy_map_get (dst, map, s->annotated);
    }
  c->why = cs_arena_strdup (a, s->why);
  if (s->n_args)
    {
      c->args = CS_ARENA_NEW_N (a, CsArg, s->n_args);
      for (guint i = 0; i < s->n_args; i++)
        {
          c->args[i].name = cs_arena_strdup (a, s->args[i].name);
          c->args[i].value = value_copy_full (a, dst, s->args[i].value, map);
        }
    }
  c->out = value_copy_full (a, dst, s->out, map);
  c->value = value_copy_full (a, dst, s->value, map);
  if (s->kind == CS_STMT_UNPACK && s->n_targets)
    {
      c->targets = CS_ARENA_NEW_N (a, CsValue *, s->n_targets);
      for (guint i = 0; i < s->n_targets; i++)
        c->targets[i] = value_copy_full (a, dst, s->targets[i], map);
    }
  c->source = proxy_map_get (dst, map, s->source);
  if (s->kind == CS_STMT_DEL && s->n_names)
    {
      c->names = CS_ARENA_NEW_N (a, CsProxy *, s->n_names);
      for (guint i = 0; i < s->n_names; i++)
        c->names[i] = proxy_map_get (dst, map, s->names[i]);
    }
  if (s->n_subs)
    {
      c->subs = CS_ARENA_NEW_N (a, CsStmt *, s->n_subs);
      for (guint i = 0; i < s->n_subs; i++)
        c->subs[i] = stmt_copy (dst, s->subs[i], map, keep_id);
    }
  cs_stmt_index (dst, c);
  return c;
}

/**
 * cs_stmt_copy_into:
 * @dst: destination trace
 * @stmt: a statement of another trace (or of @dst)
 * @proxy_map: (nullable): src proxy -> dst proxy; filled as proxies are created by name
 *
 * The copy gets fresh statement ids (its origin records where it came from).
 * Returns: (transfer none): the copy, owned by @dst
 */
CsStmt *
cs_stmt_copy_into (CsTrace *dst, const CsStmt *stmt, GHashTable *proxy_map)
{
  g_autoptr(GHashTable) local = NULL;

  if (proxy_map == NULL)
    proxy_map = local = g_hash_table_new (NULL, NULL);
  return stmt_copy (dst, stmt, proxy_map, FALSE);
}

/**
 * cs_trace_copy:
 * @trace: the trace to copy
 * @pass: (nullable): pass name of the copy
 *
 * Deep copy; statement ids, proxy ids and names are kept, so ids stay stable across passes.
 * Returns: (transfer full): the copy
 */
CsTrace *
cs_trace_copy (const CsTrace *trace, const char *pass)
{
  CsTrace *t = cs_trace_new (trace->name, pass ? pass : trace->pass);
  g_autoptr(GHashTable) map = g_hash_table_new (NULL, NULL);
  GHashTableIter it;
  gpointer key, val;
  CsArena *a = t->arena;

  t->has_signature = trace->has_signature;
  t->file = cs_arena_strdup (a, trace->file);
  t->leading = dup_strv (a, trace->leading, trace->n_leading);
  t->n_leading = trace->n_leading;
  t->provenance = cs_arena_strdup (a, trace->provenance);
  t->imports = dup_strv (a, trace->imports, trace->n_imports);
  t->n_imports = trace->n_imports;
  t->blank_after_imports = trace->blank_after_imports;
  t->decorators = dup_strv (a, trace->decorators, trace->n_decorators);
  t->n_decorators = trace->n_decorators;
  t->next_proxy_id = trace->next_proxy_id;
  t->next_name = trace->next_name;
  t->backward_tags = trace->backward_tags;
  t->aten = trace->aten ? cs_aten_info_ref (trace->aten) : NULL;

  {
    g_autoptr(GHashTable) all = cs_trace_dup_proxies (trace);
    g_hash_table_iter_init (&it, all);
    while (g_hash_table_iter_next (&it, &key, &val))
      proxy_clone (t, val, map);
  }

  t->n_params = trace->n_params;
  if (trace->n_params)
    {
      t->params = CS_ARENA_NEW_N (a, CsParam, trace->n_params);
      for (guint i = 0; i < trace->n_params; i++)
        {
          t->params[i].kind = trace->params[i].kind;
          t->params[i].name = cs_arena_strdup (a, trace->params[i].name);
          t->params[i].dflt = value_copy_full (a, t, trace->params[i].dflt, map);
        }
    }
  t->n_stmts = trace->n_stmts;
  if (trace->n_stmts)
    {
      t->stmts = CS_ARENA_NEW_N (a, CsStmt *, trace->n_stmts);
      for (guint i = 0; i < trace->n_stmts; i++)
        t->stmts[i] = stmt_copy (t, trace->stmts[i], map, TRUE);
    }
  if (trace->next_stmt_id > t->next_stmt_id)
    t->next_stmt_id = trace->next_stmt_id;
  return t;
}

/* A shallow copy of @s owned by @dst: struct and pointer arrays are new, values, proxies and
 * subsymbols shared. */
static CsStmt *
stmt_shallow (CsTrace *dst, const CsStmt *s)
{
  CsArena *a = dst->arena;
  CsStmt *c = cs_arena_alloc_line_uninit (a, sizeof (CsStmt));

  *c = *s;
  c->owner = dst->serial;
  if (c->origin == 0)
    c->origin = s->id;
  if (s->n_args)
    {
      c->args = CS_ARENA_NEW_N (a, CsArg, s->n_args);
      memcpy (c->args, s->args, sizeof (CsArg) * s->n_args);
    }
  if (s->kind == CS_STMT_UNPACK && s->n_targets)
    c->targets = (CsValue **) cs_arena_dup_ptrs (a, (gpointer const *) s->targets, s->n_targets);
  if (s->kind == CS_STMT_DEL && s->n_names)
    c->names = (CsProxy **) cs_arena_dup_ptrs (a, (gpointer const *) s->names, s->n_names);
  if (s->n_subs)
    c->subs = (CsStmt **) cs_arena_dup_ptrs (a, (gpointer const *) s->subs, s->n_subs);
  return c;
}

/** cs_trace_own_stmt: see cs-ir.h. */
CsStmt *
cs_trace_own_stmt (CsTrace *trace, CsStmt *stmt)
{
  if (stmt == NULL || stmt->owner == trace->serial)
    return stmt;
  return stmt_shallow (trace, stmt);
}

static CsTrace *
derive (const CsTrace *trace, const char *pass, gboolean share_stmts)
{
  CsTrace *t = cs_trace_new (NULL, pass ? pass : trace->pass);

  t->base = cs_trace_ref ((CsTrace *) trace);
  t->proxy_base = trace;
  t->has_signature = trace->has_signature;
  t->name = trace->name;
  t->file = trace->file;
  t->leading = trace->leading;
  t->n_leading = trace->n_leading;
  t->provenance = trace->provenance;
  t->imports = trace->imports;
  t->n_imports = trace->n_imports;
  t->blank_after_imports = trace->blank_after_imports;
  t->decorators = trace->decorators;
  t->n_decorators = trace->n_decorators;
  t->params = trace->params;
  t->n_params = trace->n_params;
  t->next_proxy_id = trace->next_proxy_id;
  t->next_stmt_id = trace->next_stmt_id;
  t->next_name = trace->next_name;
  t->backward_tags = trace->backward_tags;
  t->n_stmts = trace->n_stmts;
  if (trace->n_stmts)
    {
      t->stmts = CS_ARENA_NEW_N (t->arena, CsStmt *, trace->n_stmts);
      /* a statement without an origin gets its own id as origin, in a copy (as
       * cs_trace_copy does); inside the pipeline every statement has one after the first pass */
      for (guint i = 0; i < trace->n_stmts; i++)
        t->stmts[i] = (share_stmts && trace->stmts[i]->origin != 0)
                        ? trace->stmts[i] : stmt_shallow (t, trace->stmts[i]);
    }
  return t;
}

/** cs_trace_derive: see cs-ir.h. */
CsTrace *
cs_trace_derive (const CsTrace *trace, const char *pass)
{
  return derive (trace, pass, FALSE);
}

/** cs_trace_derive_shared: see cs-ir.h. */
CsTrace *
cs_trace_derive_shared (const CsTrace *trace, const char *pass)
{
  return derive (trace, pass, TRUE);
}

/** cs_trace_set_stmts: replaces the body (array copied; statements must be @trace's). */
void
cs_trace_set_stmts (CsTrace *trace, CsStmt **stmts, guint n)
{
  trace->stmts = (CsStmt **) cs_arena_dup_ptrs (trace->arena, (gpointer const *) stmts, n);
  trace->n_stmts = n;
}

/** cs_trace_get_return: the last RETURN statement of the body, or NULL. */
CsStmt *
cs_trace_get_return (const CsTrace *trace)
{
  for (guint i = trace->n_stmts; i > 0; i--)
    if (trace->stmts[i - 1]->kind == CS_STMT_RETURN)
      return trace->stmts[i - 1];
  return NULL;
}

/**
 * cs_trace_dup_inputs:
 * Returns: (transfer container) (element-type CsProxy): the proxies of the signature's
 * parameters, in order
 */
GPtrArray *
cs_trace_dup_inputs (const CsTrace *trace)
{
  GPtrArray *out = g_ptr_array_new ();

  for (guint i = 0; i < trace->n_params; i++)
    {
      CsProxy *p;
      if (trace->params[i].name == NULL)
        continue;
      p = cs_trace_lookup_proxy (trace, trace->params[i].name);
      if (p != NULL)
        g_ptr_array_add (out, p);
    }
  return out;
}

/* ------------------------------------------------------------------------------------------ */
/* Trace lists                                                                                 */

/** cs_trace_list_new: an empty list for @path.  Returns: (transfer full) */
CsTraceList *
cs_trace_list_new (const char *path)
{
  CsTraceList *l = g_new0 (CsTraceList, 1);

  l->ref_count = 1;
  l->path = g_strdup (path);
  l->traces = g_ptr_array_new_with_free_func ((GDestroyNotify) cs_trace_unref);
  l->separators = g_ptr_array_new_with_free_func (g_free);
  return l;
}

/** cs_trace_list_ref: Returns: (transfer full): @list */
CsTraceList *
cs_trace_list_ref (CsTraceList *list)
{
  g_atomic_int_inc (&list->ref_count);
  return list;
}

/** cs_trace_list_unref: drops a reference. */
void
cs_trace_list_unref (CsTraceList *list)
{
  if (list == NULL)
    return;
  if (g_atomic_int_dec_and_test (&list->ref_count))
    {
      g_ptr_array_unref (list->traces);
      g_ptr_array_unref (list->separators);
      g_free (list->trailer);
      g_free (list->path);
      g_free (list);
    }
}
