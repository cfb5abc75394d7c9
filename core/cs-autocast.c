/* cs-autocast.c: Thunder's autocast rules (see cs-autocast.h). */
#include "cs-config.h"

#include "cs-autocast.h"
#include "cs-ir-util.h"
#include "cs-meta.h"
#include "cs-ops.h"

#include <string.h>

G_DEFINE_QUARK (cs-autocast-error-quark, cs_autocast_error)

/* Number of leading positional operands the rule casts, or 0 when @op has no rule. */
static guint
autocast_n_operands (const CsOp *op, const char **what)
{
  switch (cs_op_semantic (op)->id)
    {
    case CS_OP_PRIM_MATMUL:
    case CS_OP_LTORCH_MATMUL:
      *what = "matmul";
      return 2;
    case CS_OP_PRIM_LINEAR:
    case CS_OP_LTORCH_LINEAR:
      *what = "linear";
      return 3;
    case CS_OP_PRIM_CONVOLUTION:
      *what = "convolution";
      return 3;
    case CS_OP_LTORCH_SCALED_DOT_PRODUCT_ATTENTION:
      *what = "scaled_dot_product_attention";
      return 3;
    default:
      return 0;
    }
}

static gboolean
castable (const CsProxy *p)
{
  return p->kind == CS_PROXY_TENSOR && p->typed
         && (p->dtype == CS_DTYPE_F32 || p->dtype == CS_DTYPE_F16 || p->dtype == CS_DTYPE_BF16);
}

/**
 * cs_autocast_trace: (see cs-autocast.h)
 */
CsTrace *
cs_autocast_trace (const CsTrace *trace, const CsPolicy *policy, GError **error)
{
  g_autoptr(CsTrace) t = NULL;
  g_autoptr(GPtrArray) out = g_ptr_array_new ();
  g_autoptr(GHashTable) changed = g_hash_table_new (g_direct_hash, g_direct_equal);
  g_autoptr(GPtrArray) tmp = g_ptr_array_new ();
  g_autoptr(CsProxyMap) map = _cs_proxy_map_new ();  /* a statement's downcasts */
  CsDtype target;
  const char *tname;

  g_return_val_if_fail (trace != NULL, NULL);
  g_return_val_if_fail (policy != NULL, NULL);

  /* off: nothing changes, so the result shares the input (cs_trace_derive, O(statements));
     on: the pass retypes proxies in place, which needs a deep copy */
  if (policy->autocast == CS_AUTOCAST_OFF)
    return cs_trace_derive (trace, "autocast");
  t = cs_trace_copy (trace, "autocast");
  target = policy->autocast == CS_AUTOCAST_BF16 ? CS_DTYPE_BF16 : CS_DTYPE_F16;
  tname = policy->autocast == CS_AUTOCAST_BF16 ? "bf16" : "f16";

  for (guint i = 0; i < t->n_stmts; i++)
    {
      CsStmt *s = t->stmts[i];
      const char *what = NULL;
      guint n_ops;
      gboolean reads_changed = FALSE;

      if (s->kind != CS_STMT_CALL || s->op == NULL)
        {
          g_ptr_array_add (out, s);
          continue;
        }
      n_ops = autocast_n_operands (s->op, &what);
      if (n_ops > 0)
        {
          gboolean any = FALSE;

          _cs_proxy_map_clear (map);

          for (guint k = 0; k < n_ops; k++)
            {
              CsValue *v = cs_stmt_get_arg (s, k, NULL);
              CsProxy *x, *y;
              CsArg args[2];
              CsStmt *c;

              if (v == NULL || v->kind != CS_VALUE_PROXY || !castable (v->u.proxy)
                  || v->u.proxy->dtype == target || _cs_proxy_map_lookup (map, v->u.proxy) != NULL)
                continue;
              x = v->u.proxy;
              y = cs_trace_new_tensor (t, "t", target, x->shape, x->rank, &x->device);
              args[0].name = NULL;
              args[0].value = cs_value_new_proxy (t->arena, x);
              args[1].name = NULL;
              args[1].value = cs_value_new_dtype (t->arena, target, FALSE);
              c = cs_stmt_new_call (t, cs_op_get (CS_OP_PRIM_CONVERT_ELEMENT_TYPE),
                                    "prims.convert_element_type",
                                    cs_value_new_proxy (t->arena, y), args, 2);
              c->origin = s->origin ? s->origin : s->id;
              c->why = cs_arena_printf (t->arena,
                                        "autocast: downcast %s operand %s from %s to %s "
                                        "(Thunder's autocast rule for %s)",
                                        what, x->name, cs_dtype_short_name (x->dtype), tname,
                                        what);
              g_ptr_array_add (out, c);
              _cs_proxy_map_insert (map, x, y);
              any = TRUE;
            }
          if (any)
            {
              s = _cs_stmt_remap_reads (t, s, map);
              g_ptr_array_set_size (tmp, 0);
              _cs_stmt_writes (s, tmp);
              for (guint j = 0; j < tmp->len; j++)
                {
                  CsProxy *o = tmp->pdata[j];
                  if (castable (o) && o->dtype != target)
                    {
                      cs_proxy_set_tensor (t, o, target, o->shape, o->rank, &o->device);
                      g_hash_table_add (changed, o);
                    }
                }
              s->type_comment_raw = NULL;
              s->subs = NULL;
              s->n_subs = 0;
            }
          g_ptr_array_add (out, s);
          continue;
        }

      /* downstream of a downcast: re-type by meta, drop the stale decomposition */
      g_ptr_array_set_size (tmp, 0);
      _cs_stmt_reads (s, tmp);
      for (guint j = 0; j < tmp->len && !reads_changed; j++)
        reads_changed = g_hash_table_contains (changed, tmp->pdata[j]);
      if (reads_changed)
        {
          CsMetaType types[16];
          guint n_types = 0;
          gboolean writes_tensor = FALSE;
          g_autoptr(GPtrArray) outs = g_ptr_array_new ();

          /* a statement that writes no tensor (prims.shape, a size) keeps its outputs: the
           * downcast changes dtypes only */
          _cs_stmt_writes (s, outs);
          for (guint j = 0; j < outs->len && !writes_tensor; j++)
            writes_tensor = ((CsProxy *) outs->pdata[j])->kind == CS_PROXY_TENSOR;
          if (!writes_tensor)
            {
              g_ptr_array_add (out, s);
              continue;
            }
          if (!cs_meta_compute (t, s, types, G_N_ELEMENTS (types), &n_types, error))
            {
              g_prefix_error (error, "%s:%u:%u: re-typing %s after an autocast downcast: ",
                              trace->file ? trace->file : "<trace>", s->line,
                              s->col ? s->col : 1, s->callee ? s->callee : "statement");
              return NULL;
            }
          for (guint j = 0; j < outs->len && j < n_types; j++)
            {
              CsProxy *o = outs->pdata[j];
              if (types[j].kind != CS_PROXY_TENSOR || o->kind != CS_PROXY_TENSOR)
                continue;
              if (o->dtype != types[j].dtype)
                {
                  cs_proxy_set_tensor (t, o, types[j].dtype, types[j].shape, types[j].rank,
                                       &types[j].device);
                  g_hash_table_add (changed, o);
                }
            }
          s->type_comment_raw = NULL;
          s->subs = NULL;
          s->n_subs = 0;
        }
      g_ptr_array_add (out, s);
    }
  cs_trace_set_stmts (t, (CsStmt **) out->pdata, out->len);
  return g_steal_pointer (&t);
}
