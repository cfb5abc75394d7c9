/* cs-fuse-check.c: the invariant checker of fused traces (cs_fuse_check_invariants, see
 * cs-fuse.h).
 */
#include "cs-config.h"

#include "cs-fuse.h"
#include "cs-fuse-private.h"
#include "cs-ir-util.h"
#include "cs-ops.h"

/**
 * cs_fuse_check_invariants: (see cs-fuse.h)
 */
gboolean
cs_fuse_check_invariants (const CsTrace *trace, GError **error)
{
  g_autoptr(GHashTable) defined = g_hash_table_new (g_direct_hash, g_direct_equal);
  g_autoptr(GHashTable) top_defined = g_hash_table_new (g_direct_hash, g_direct_equal);
  g_autoptr(GPtrArray) tmp = g_ptr_array_new ();
  g_autoptr(GPtrArray) inputs = NULL;

  g_return_val_if_fail (trace != NULL, FALSE);

  inputs = cs_trace_dup_inputs (trace);
  for (guint i = 0; i < inputs->len; i++)
    {
      g_hash_table_add (defined, inputs->pdata[i]);
      g_hash_table_add (top_defined, inputs->pdata[i]);
    }
  for (guint i = 0; i < trace->n_stmts; i++)
    {
      CsStmt *s = trace->stmts[i];
      if (s->kind == CS_STMT_COMMENT && s->comment_kind == CS_COMMENT_INPUT && s->annotated)
        g_hash_table_add (top_defined, s->annotated);
    }

#define FAIL(...) \
  G_STMT_START { \
    g_set_error (error, CS_FUSE_ERROR, CS_FUSE_ERROR_INVARIANT, __VA_ARGS__); \
    return FALSE; \
  } G_STMT_END

  for (guint i = 0; i < trace->n_stmts; i++)
    {
      CsStmt *s = trace->stmts[i];

      if (_cs_stmt_is_region (s))
        {
          g_autoptr(GHashTable) inside = g_hash_table_new (g_direct_hash, g_direct_equal);
          g_autoptr(GHashTable) ext = g_hash_table_new (g_direct_hash, g_direct_equal);
          g_autoptr(GHashTable) args = g_hash_table_new (g_direct_hash, g_direct_equal);
          g_autoptr(GPtrArray) outs = g_ptr_array_new ();

          g_ptr_array_set_size (tmp, 0);
          _cs_stmt_reads (s, tmp);
          for (guint j = 0; j < tmp->len; j++)
            {
              if (!g_hash_table_contains (top_defined, tmp->pdata[j]))
                FAIL ("%s reads %s before it is produced", s->callee,
                      ((CsProxy *) tmp->pdata[j])->name);
              if (!g_hash_table_add (args, tmp->pdata[j]))
                FAIL ("%s lists input %s twice", s->callee, ((CsProxy *) tmp->pdata[j])->name);
            }
          for (guint k = 0; k < s->n_subs; k++)
            {
              CsStmt *sub = s->subs[k];
              /* a backward region may hold forward statements rematerialization recomputes
               * there (they keep their tags, as in Thunder); a forward region holds none of
               * the backward's */
              if (sub->backward && !s->backward)
                FAIL ("%s mixes forward and backward statements", s->callee);
              g_ptr_array_set_size (tmp, 0);
              _cs_stmt_reads (sub, tmp);
              for (guint j = 0; j < tmp->len; j++)
                {
                  CsProxy *p = tmp->pdata[j];
                  if (g_hash_table_contains (inside, p))
                    continue;
                  if (!g_hash_table_contains (args, p))
                    FAIL ("%s: %s reads %s, which is neither produced inside nor an input",
                          s->callee, sub->callee ? sub->callee : "?", p->name);
                  g_hash_table_add (ext, p);
                }
              g_ptr_array_set_size (tmp, 0);
              _cs_stmt_writes (sub, tmp);
              for (guint j = 0; j < tmp->len; j++)
                {
                  CsProxy *p = tmp->pdata[j];
                  if (!g_hash_table_add (inside, p) || g_hash_table_contains (defined, p))
                    FAIL ("%s: %s is produced twice (a statement in two regions?)", s->callee,
                          p->name);
                  g_hash_table_add (defined, p);
                }
            }
          _cs_stmt_writes (s, outs);
          for (guint j = 0; j < outs->len; j++)
            if (g_hash_table_contains (args, outs->pdata[j]))
              g_hash_table_add (ext, outs->pdata[j]);
          if (g_hash_table_size (ext) != g_hash_table_size (args))
            FAIL ("%s lists an input its prims never read", s->callee);
          for (guint j = 0; j < outs->len; j++)
            {
              /* an output that is an input passes it through (remove_redundant_casts
               * replaced the output by it, as in Thunder) */
              if (!g_hash_table_contains (inside, outs->pdata[j])
                  && !g_hash_table_contains (args, outs->pdata[j]))
                FAIL ("%s: output %s is neither produced inside nor an input", s->callee,
                      ((CsProxy *) outs->pdata[j])->name);
              g_hash_table_add (top_defined, outs->pdata[j]);
            }
          continue;
        }

      g_ptr_array_set_size (tmp, 0);
      _cs_stmt_reads (s, tmp);
      for (guint j = 0; j < tmp->len; j++)
        {
          CsProxy *p = tmp->pdata[j];
          if (!g_hash_table_contains (top_defined, p) && p->kind != CS_PROXY_OTHER)
            FAIL ("%s reads %s before it is produced",
                  s->callee ? s->callee : (s->kind == CS_STMT_RETURN ? "return" : "statement"),
                  p->name);
        }
      g_ptr_array_set_size (tmp, 0);
      _cs_stmt_writes (s, tmp);
      for (guint j = 0; j < tmp->len; j++)
        {
          CsProxy *p = tmp->pdata[j];
          if (g_hash_table_contains (defined, p) && !g_hash_table_contains (top_defined, p))
            FAIL ("%s is produced twice", p->name);
          g_hash_table_add (defined, p);
          g_hash_table_add (top_defined, p);
        }
    }
#undef FAIL
  return TRUE;
}
