/* cs-dellast.c: the "Delete Last Used" pass (see cs-dellast.h). */
#include "cs-config.h"

#include "cs-dellast.h"
#include "cs-ir-util.h"
#include "cs-ops.h"

/* Adds @p to the set (a flag per proxy id, ids beyond the trace's counter in @extra);
 * TRUE when it was not there. */
static gboolean
seen_add (guint8 *seen, guint n, GHashTable *extra, CsProxy *p)
{
  if (p->id == 0 || p->id >= n)
    return g_hash_table_add (extra, p);
  if (seen[p->id])
    return FALSE;
  seen[p->id] = 1;
  return TRUE;
}

/**
 * cs_dellast_trace: (see cs-dellast.h)
 */
CsTrace *
cs_dellast_trace (const CsTrace *trace, gboolean clear_collections)
{
  g_autoptr(CsTrace) t = NULL;
  g_autoptr(GHashTable) seen_extra = g_hash_table_new (g_direct_hash, g_direct_equal);
  g_autofree guint8 *seen = NULL;
  guint n_seen;
  g_autoptr(GPtrArray) dels = g_ptr_array_new ();
  g_autoptr(GPtrArray) rev = g_ptr_array_new ();   /* output, reversed */
  g_autoptr(GPtrArray) tmp = g_ptr_array_new ();
  g_autoptr(GPtrArray) body = g_ptr_array_new ();
  g_auto(CsProxyVec) uses = CS_PROXY_VEC_INIT;
  CsStmt *ret;

  g_return_val_if_fail (trace != NULL, NULL);

  t = cs_trace_derive_shared (trace, "delete-last-used");
  n_seen = t->next_proxy_id + 1;
  seen = g_new0 (guint8, n_seen);
  for (guint i = 0; i < t->n_stmts; i++)
    if (t->stmts[i]->kind != CS_STMT_DEL)
      g_ptr_array_add (body, t->stmts[i]);

  ret = NULL;
  for (guint i = body->len; i-- > 0;)
    if (((CsStmt *) body->pdata[i])->kind == CS_STMT_RETURN)
      {
        ret = body->pdata[i];
        break;
      }
  if (ret != NULL)
    {
      _cs_stmt_reads (ret, tmp);
      for (guint j = 0; j < tmp->len; j++)
        seen_add (seen, n_seen, seen_extra, tmp->pdata[j]);
    }

  /* backwards: the first sight of a proxy (written or read) is its last use */
  for (guint i = body->len; i-- > 0;)
    {
      CsStmt *s = body->pdata[i];

      if (s->kind == CS_STMT_RETURN || s->kind == CS_STMT_COMMENT || s->kind == CS_STMT_BLANK)
        {
          g_ptr_array_add (rev, s);
          continue;
        }
      g_ptr_array_set_size (dels, 0);
      uses.len = 0;
      _cs_stmt_writes_vec (s, &uses);
      _cs_stmt_reads_vec (s, &uses);
      for (guint j = 0; j < uses.len; j++)
        if (seen_add (seen, n_seen, seen_extra, uses.v[j]))
          g_ptr_array_add (dels, uses.v[j]);
      if (dels->len > 0)
        {
          CsStmt *d = cs_stmt_new (t, CS_STMT_DEL);
          d->names = (CsProxy **) cs_arena_dup_ptrs (t->arena, dels->pdata, dels->len);
          d->n_names = dels->len;
          d->origin = s->origin;
          d->backward = s->backward;
          d->why = "delete-last-used: last use";
          g_ptr_array_add (rev, d);
          if (clear_collections)
            for (guint j = 0; j < dels->len; j++)
              {
                CsProxy *p = dels->pdata[j];
                CsArg arg = { NULL, NULL };
                CsStmt *c;
                if (p->kind != CS_PROXY_COLLECTION)
                  continue;
                arg.value = cs_value_new_proxy (t->arena, p);
                c = cs_stmt_new_call (t, cs_op_get (CS_OP_EX_CLEAR_MUTABLE_COLLECTION),
                                      "clear_mutable_collection", NULL, &arg, 1);
                c->origin = s->origin;
                c->backward = s->backward;
                g_ptr_array_add (rev, c);
              }
        }
      g_ptr_array_add (rev, s);
    }

  /* reverse into order, moving unpack detail comments above the del/clear lines that follow
   * their unpack */
  {
    g_autoptr(GPtrArray) out = g_ptr_array_new ();
    for (guint i = rev->len; i-- > 0;)
      g_ptr_array_add (out, rev->pdata[i]);
    for (guint i = 0; i < out->len; i++)
      {
        CsStmt *s = out->pdata[i];
        guint j, k;
        if (s->kind != CS_STMT_UNPACK)
          continue;
        /* out[i+1 .. j) are clears/del of s, out[j .. k) its detail comments */
        j = i + 1;
        while (j < out->len
               && (((CsStmt *) out->pdata[j])->kind == CS_STMT_DEL
                   || (((CsStmt *) out->pdata[j])->kind == CS_STMT_CALL
                       && ((CsStmt *) out->pdata[j])->op->id == CS_OP_EX_CLEAR_MUTABLE_COLLECTION
                       && ((CsStmt *) out->pdata[j])->line == 0)))
          j++;
        k = j;
        while (k < out->len && ((CsStmt *) out->pdata[k])->kind == CS_STMT_COMMENT
               && ((CsStmt *) out->pdata[k])->comment_kind == CS_COMMENT_DETAIL)
          k++;
        if (j > i + 1 && k > j)
          {
            /* rotate [i+1, k) so that the details come first */
            g_autoptr(GPtrArray) rot = g_ptr_array_new ();
            for (guint m = j; m < k; m++)
              g_ptr_array_add (rot, out->pdata[m]);
            for (guint m = i + 1; m < j; m++)
              g_ptr_array_add (rot, out->pdata[m]);
            for (guint m = 0; m < rot->len; m++)
              out->pdata[i + 1 + m] = rot->pdata[m];
          }
      }
    cs_trace_set_stmts (t, (CsStmt **) out->pdata, out->len);
  }
  return g_steal_pointer (&t);
}
