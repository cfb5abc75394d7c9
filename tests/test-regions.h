/* test-regions.h: helpers shared by test-core-fuse.c and test-core-pipeline.c: loading the
 * shared traces and comparing fusion regions "up to names" through a signature (the multiset
 * of prims, the casts inside, the types of the inputs the prims read and of the outputs).
 * Outputs that are also inputs are left out (Thunder prints `[t32, t10] = nvFusion1(t32)` when
 * remove_redundant_casts maps a region output back onto an input; castscope rewrites the
 * readers instead). */
#pragma once

#include <string.h>

#include "cs-fuse.h"
#include "cs-ir-util.h"
#include "cs-ops.h"
#include "cs-parse.h"
#include "cs-print.h"

static G_GNUC_UNUSED CsTrace *
load_shared (const char *name)
{
  const char *dir = g_getenv ("CS_SHARED_TRACES");
  g_autofree char *path = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTraceList) list = NULL;

  if (dir == NULL || !g_file_test (dir, G_FILE_TEST_IS_DIR))
    return NULL;
  path = g_build_filename (dir, name, NULL);
  list = cs_parse_file (path, &error);
  g_assert_no_error (error);
  g_assert_nonnull (list);
  g_assert_cmpuint (list->traces->len, >=, 1);
  return cs_trace_ref (list->traces->pdata[0]);
}

static G_GNUC_UNUSED gint
cmp_str (gconstpointer a, gconstpointer b)
{
  return strcmp (*(const char * const *) a, *(const char * const *) b);
}

static G_GNUC_UNUSED char *
sorted_join (GPtrArray *strs)
{
  GString *s = g_string_new (NULL);
  g_ptr_array_sort (strs, cmp_str);
  for (guint i = 0; i < strs->len; i++)
    g_string_append_printf (s, "%s%s", i ? " " : "", (const char *) strs->pdata[i]);
  return g_string_free (s, FALSE);
}

static G_GNUC_UNUSED char *
type_of (const CsProxy *p)
{
  return cs_proxy_type_string (p);
}

/* A region's signature, independent of proxy names. */
static G_GNUC_UNUSED char *
region_signature (const CsStmt *r)
{
  g_autoptr(GPtrArray) prims = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(GPtrArray) casts = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(GPtrArray) ins = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(GPtrArray) outs = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(GPtrArray) tmp = g_ptr_array_new ();
  g_autoptr(GHashTable) in_set = g_hash_table_new (g_direct_hash, g_direct_equal);
  g_autofree char *sp = NULL, *sc = NULL, *si = NULL, *so = NULL;

  for (guint i = 0; i < r->n_subs; i++)
    {
      const CsStmt *s = r->subs[i];
      CsProxy *in;
      CsDtype to;
      const CsOp *sem = cs_op_semantic (s->op);
      CsValue *a0 = cs_stmt_get_arg (s, 0, NULL);
      CsProxy *o = cs_stmt_get_output (s);
      /* a reshape to the same shape is the identity, like shallow_copy: Thunder decomposes
       * ltorch.reshape(t, -1, 512) to prims.reshape but ltorch.reshape(t, (64, 512)) to
       * prims.shallow_copy for the same no-op; count both as shallow_copy */
      if (sem->id == CS_OP_PRIM_RESHAPE && a0 && a0->kind == CS_VALUE_PROXY && o
          && a0->u.proxy->rank == o->rank
          && memcmp (a0->u.proxy->shape, o->shape, sizeof (int64_t) * o->rank) == 0)
        sem = cs_op_get (CS_OP_PRIM_SHALLOW_COPY);
      g_ptr_array_add (prims, g_strdup (sem->name));
      if (_cs_stmt_is_cast (s, &in, &to))
        g_ptr_array_add (casts, g_strdup_printf ("%s->%s", cs_dtype_short_name (in->dtype),
                                                 cs_dtype_short_name (to)));
    }
  /* inputs = what the prims read from outside (old Thunder listed unused fusion arguments
   * too, before PR #544 dropped them: nb_llama's nvFusion1(t147, t149, t162, t164)) */
  {
    g_autoptr(GHashTable) produced = g_hash_table_new (g_direct_hash, g_direct_equal);
    for (guint i = 0; i < r->n_subs; i++)
      {
        g_ptr_array_set_size (tmp, 0);
        _cs_stmt_reads (r->subs[i], tmp);
        for (guint j = 0; j < tmp->len; j++)
          if (!g_hash_table_contains (produced, tmp->pdata[j])
              && g_hash_table_add (in_set, tmp->pdata[j]))
            g_ptr_array_add (ins, type_of (tmp->pdata[j]));
        g_ptr_array_set_size (tmp, 0);
        _cs_stmt_writes (r->subs[i], tmp);
        for (guint j = 0; j < tmp->len; j++)
          g_hash_table_add (produced, tmp->pdata[j]);
      }
  }
  g_ptr_array_set_size (tmp, 0);
  _cs_stmt_writes (r, tmp);
  for (guint i = 0; i < tmp->len; i++)
    if (!g_hash_table_contains (in_set, tmp->pdata[i]))
      g_ptr_array_add (outs, type_of (tmp->pdata[i]));
  sp = sorted_join (prims);
  sc = sorted_join (casts);
  si = sorted_join (ins);
  so = sorted_join (outs);
  return g_strdup_printf ("prims[%s] casts[%s] in[%s] out[%s]", sp, sc, si, so);
}

static G_GNUC_UNUSED GPtrArray *
signatures (const CsTrace *t)
{
  GPtrArray *a = g_ptr_array_new_with_free_func (g_free);
  for (guint i = 0; i < t->n_stmts; i++)
    if (_cs_stmt_is_region (t->stmts[i]))
      g_ptr_array_add (a, region_signature (t->stmts[i]));
  return a;
}

static G_GNUC_UNUSED void
assert_same_regions (const CsTrace *ours, const CsTrace *thunders)
{
  g_autoptr(GPtrArray) a = signatures (ours);
  g_autoptr(GPtrArray) b = signatures (thunders);

  if (a->len != b->len)
    {
      g_autofree char *txt = cs_print_trace (ours, CS_PRINT_DEFAULT);
      g_test_message ("ours:\n%s", txt);
      for (guint i = 0; i < MAX (a->len, b->len); i++)
        g_test_message ("region %u:\n  ours    %s\n  thunder %s", i,
                        i < a->len ? (char *) a->pdata[i] : "-",
                        i < b->len ? (char *) b->pdata[i] : "-");
    }
  g_assert_cmpuint (a->len, ==, b->len);
  for (guint i = 0; i < a->len; i++)
    g_assert_cmpstr (a->pdata[i], ==, b->pdata[i]);
}

