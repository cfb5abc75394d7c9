/* cs-cse.c: remove_redundant_casts, CSE and DCE (see cs-cse.h).
 *
 * Source: thunder/executors/nvfuserex_impl.py (remove_redundant_casts, nvFuser cse),
 * thunder/core/transform_common.py (cse_single_bsym, dce); reference/thunder-traces.md 7.1-7.3.
 */
#include "cs-config.h"

#include "cs-cse.h"
#include "cs-fuse-private.h"
#include "cs-ops.h"

#include <string.h>

/* ------------------------------------------------------------------------------------------ */
/* remove_redundant_casts                                                                      */

typedef struct
{
  GHashTable *repl;    /* proxy -> equivalent original proxy */
  GHashTable *inter;   /* cast output -> most original float source */
} CastMaps;

/* Processes one statement; returns FALSE when it is dropped. */
static gboolean
rrc_stmt (CsTrace *t, CsStmt *s, CastMaps *m)
{
  CsProxy *x, *out, *orig;
  CsDtype to;

  _cs_stmt_remap_reads (t, s, m->repl);
  if (!_cs_stmt_is_cast (s, &x, &to))
    return TRUE;
  out = cs_stmt_get_output (s);
  if (out == NULL || x->kind != CS_PROXY_TENSOR || !x->typed || !cs_dtype_is_float (x->dtype)
      || !cs_dtype_is_float (to))
    return TRUE;
  orig = g_hash_table_lookup (m->inter, x);
  if (orig == NULL)
    orig = x;
  if (orig->dtype == to)
    {
      _cs_proxy_map_add (m->repl, out, orig);
      return FALSE;
    }
  if (orig != x)
    {
      g_autoptr(GHashTable) one = _cs_proxy_map_new ();
      g_hash_table_insert (one, x, orig);
      /* only the cast's own input is rewritten (its first argument) */
      _cs_stmt_remap_reads (t, s, one);
    }
  g_hash_table_insert (m->inter, out, orig);
  return TRUE;
}

/**
 * cs_cse_remove_redundant_casts: (see cs-cse.h)
 */
CsTrace *
cs_cse_remove_redundant_casts (const CsTrace *trace)
{
  g_autoptr(CsTrace) t = NULL;
  g_autoptr(GPtrArray) kept = g_ptr_array_new ();
  CastMaps outer;

  g_return_val_if_fail (trace != NULL, NULL);

  t = cs_trace_copy (trace, "remove-redundant-casts");
  outer.repl = _cs_proxy_map_new ();
  outer.inter = _cs_proxy_map_new ();
  for (guint i = 0; i < t->n_stmts; i++)
    {
      CsStmt *s = t->stmts[i];

      if (_cs_stmt_is_region (s))
        {
          CastMaps inner = { _cs_proxy_map_new (), _cs_proxy_map_new () };
          g_autoptr(GPtrArray) subs = g_ptr_array_new ();
          GHashTableIter it;
          gpointer k, v;

          _cs_stmt_remap_reads (t, s, outer.repl);
          for (guint j = 0; j < s->n_subs; j++)
            if (rrc_stmt (t, s->subs[j], &inner))
              g_ptr_array_add (subs, s->subs[j]);
          cs_stmt_set_subs (t, s, (CsStmt **) subs->pdata, subs->len);
          /* replaced region outputs: later statements read the original instead */
          g_hash_table_iter_init (&it, inner.repl);
          while (g_hash_table_iter_next (&it, &k, &v))
            _cs_proxy_map_add (outer.repl, k, _cs_proxy_map_resolve (inner.repl, v));
          g_hash_table_unref (inner.repl);
          g_hash_table_unref (inner.inter);
          g_ptr_array_add (kept, s);
          continue;
        }
      if (rrc_stmt (t, s, &outer))
        g_ptr_array_add (kept, s);
    }
  cs_trace_set_stmts (t, (CsStmt **) kept->pdata, kept->len);
  g_hash_table_unref (outer.repl);
  g_hash_table_unref (outer.inter);
  _cs_regions_refresh (t, FALSE);
  return g_steal_pointer (&t);
}

/* ------------------------------------------------------------------------------------------ */
/* CSE                                                                                         */

static void
key_value (GString *k, const CsValue *v)
{
  if (v == NULL)
    {
      g_string_append (k, "~");
      return;
    }
  g_string_append_printf (k, "%d:", (int) v->kind);
  switch (v->kind)
    {
    case CS_VALUE_BOOL:
      g_string_append_c (k, v->u.b ? 'T' : 'F');
      break;
    case CS_VALUE_INT:
      g_string_append_printf (k, "%" G_GINT64_FORMAT, v->u.i);
      break;
    case CS_VALUE_FLOAT:
      g_string_append_printf (k, "%a", v->u.f);
      break;
    case CS_VALUE_COMPLEX:
      g_string_append_printf (k, "%a,%a", v->u.c.re, v->u.c.im);
      break;
    case CS_VALUE_STRING:
    case CS_VALUE_NAME:
      g_string_append_printf (k, "%zu'%s", strlen (v->u.s ? v->u.s : ""), v->u.s ? v->u.s : "");
      break;
    case CS_VALUE_PROXY:
      g_string_append_printf (k, "%p", (void *) v->u.proxy);
      break;
    case CS_VALUE_DTYPE:
      g_string_append_printf (k, "%d/%d/%d", v->u.dtype.dtype, v->u.dtype.weak, v->u.dtype.pytype);
      break;
    case CS_VALUE_TUPLE:
    case CS_VALUE_LIST:
    case CS_VALUE_DICT:
    case CS_VALUE_SUBSCRIPT:
    case CS_VALUE_ATTR:
      g_string_append_printf (k, "%u(", v->u.seq.n);
      for (guint i = 0; i < v->u.seq.n; i++)
        {
          key_value (k, v->u.seq.items[i]);
          g_string_append_c (k, ',');
        }
      g_string_append_c (k, ')');
      if (v->attr)
        g_string_append (k, v->attr);
      break;
    case CS_VALUE_CALL:
      g_string_append_printf (k, "%s(", v->u.call.callee ? v->u.call.callee : "");
      for (guint i = 0; i < v->u.call.n_args; i++)
        {
          g_string_append_printf (k, "%s=", v->u.call.args[i].name ? v->u.call.args[i].name : "");
          key_value (k, v->u.call.args[i].value);
          g_string_append_c (k, ',');
        }
      g_string_append_c (k, ')');
      break;
    default:
      break;
    }
}

/* The CSE key of @s, or NULL when @s must never be merged. */
static char *
cse_key (const CsStmt *s)
{
  const CsOp *sem;
  GString *k;

  if (s->kind != CS_STMT_CALL || s->op == NULL || s->out == NULL || _cs_stmt_is_region (s))
    return NULL;
  sem = cs_op_semantic (s->op);
  if ((s->op->tags | sem->tags) & (CS_OP_TAG_RANDOM | CS_OP_TAG_DONT_DCE))
    return NULL;
  if (sem->category == CS_OP_CAT_ATTENTION || sem->id == CS_OP_PRIM_GET_GRAD
      || sem->category == CS_OP_CAT_OPAQUE || sem->category == CS_OP_CAT_BOOKKEEPING)
    return NULL;
  k = g_string_new (NULL);
  g_string_append_printf (k, "%d|%s|%d|", (int) s->op->id, s->callee ? s->callee : "",
                          s->backward ? 1 : 0);
  for (guint i = 0; i < s->n_args; i++)
    {
      g_string_append_printf (k, "%s=", s->args[i].name ? s->args[i].name : "");
      key_value (k, s->args[i].value);
      g_string_append_c (k, ';');
    }
  return g_string_free (k, FALSE);
}

/* Maps the outputs of @dup to those of @orig; FALSE when their shapes differ. */
static gboolean
map_outputs (GHashTable *map, const CsStmt *dup, const CsStmt *orig)
{
  g_autoptr(GPtrArray) a = g_ptr_array_new ();
  g_autoptr(GPtrArray) b = g_ptr_array_new ();

  _cs_stmt_writes (dup, a);
  _cs_stmt_writes (orig, b);
  if (a->len != b->len || a->len == 0)
    return FALSE;
  for (guint i = 0; i < a->len; i++)
    if (a->pdata[i] != b->pdata[i])
      _cs_proxy_map_add (map, a->pdata[i], b->pdata[i]);
  return TRUE;
}

/* Returns FALSE when @s is a duplicate (dropped). */
static gboolean
cse_stmt (CsTrace *t, CsStmt *s, GHashTable *map, GHashTable *seen)
{
  char *key;
  CsStmt *prev;

  _cs_stmt_remap_reads (t, s, map);
  key = cse_key (s);
  if (key == NULL)
    return TRUE;
  prev = g_hash_table_lookup (seen, key);
  if (prev != NULL && map_outputs (map, s, prev))
    {
      g_free (key);
      return FALSE;
    }
  g_hash_table_insert (seen, key, s);
  return TRUE;
}

/**
 * cs_cse_trace: (see cs-cse.h)
 */
CsTrace *
cs_cse_trace (const CsTrace *trace)
{
  g_autoptr(CsTrace) t = NULL;
  g_autoptr(GPtrArray) kept = g_ptr_array_new ();
  g_autoptr(GHashTable) map = _cs_proxy_map_new ();
  g_autoptr(GHashTable) seen = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);

  g_return_val_if_fail (trace != NULL, NULL);

  t = cs_trace_copy (trace, "cse");
  for (guint i = 0; i < t->n_stmts; i++)
    {
      CsStmt *s = t->stmts[i];

      if (_cs_stmt_is_region (s))
        {
          g_autoptr(GHashTable) imap = _cs_proxy_map_new ();
          g_autoptr(GHashTable) iseen = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
                                                               NULL);
          g_autoptr(GPtrArray) subs = g_ptr_array_new ();
          GHashTableIter it;
          gpointer k, v;

          _cs_stmt_remap_reads (t, s, map);
          for (guint j = 0; j < s->n_subs; j++)
            if (cse_stmt (t, s->subs[j], imap, iseen))
              g_ptr_array_add (subs, s->subs[j]);
          cs_stmt_set_subs (t, s, (CsStmt **) subs->pdata, subs->len);
          g_hash_table_iter_init (&it, imap);
          while (g_hash_table_iter_next (&it, &k, &v))
            _cs_proxy_map_add (map, k, _cs_proxy_map_resolve (imap, v));
          g_ptr_array_add (kept, s);
          continue;
        }
      if (cse_stmt (t, s, map, seen))
        g_ptr_array_add (kept, s);
    }
  cs_trace_set_stmts (t, (CsStmt **) kept->pdata, kept->len);
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
  t = cs_trace_copy (trace, "dce");
  _cs_regions_refresh (t, TRUE);
  _cs_trace_compact_proxies (t);
  return t;
}
