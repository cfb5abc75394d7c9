/* cs-decompose.c: the decompose pass.  A statement becomes the statements its decomposition
 * (cs-decompositions.c) emits, with the decomposition's results renamed to the statement's own
 * outputs; cs_decompose_to_prims() repeats that down to prims, cs_decompose_trace() over a
 * whole trace.  Source: Thunder's subsymbols of an initial trace (reference/thunder-traces.md).
 */
#include "cs-config.h"

#include "cs-decompose-private.h"

#include "cs-meta.h"
#include "cs-ops.h"

#include <string.h>

G_DEFINE_QUARK (cs-decompose-error-quark, cs_decompose_error)

/* ------------------------------------------------------------------------------------------ */
/* Renaming the final values to the statement's outputs                                        */

/* @v with @from replaced by @to: @v itself when it does not reference @from, else a copy of
 * the nodes on the way to each reference (value nodes are shared, never edited). */
static CsValue *
subst_value (CsArena *a, CsValue *v, const CsProxy *from, CsProxy *to)
{
  CsValue *c;

  if (v == NULL)
    return NULL;
  switch (v->kind)
    {
    case CS_VALUE_PROXY:
      if (v->u.proxy != from)
        return v;
      c = CS_ARENA_NEW (a, CsValue);
      *c = *v;
      c->u.proxy = to;
      return c;
    case CS_VALUE_TUPLE:
    case CS_VALUE_LIST:
    case CS_VALUE_DICT:
    case CS_VALUE_SUBSCRIPT:
    case CS_VALUE_ATTR:
      for (guint i = 0; i < v->u.seq.n; i++)
        {
          CsValue *ni = subst_value (a, v->u.seq.items[i], from, to);
          if (ni == v->u.seq.items[i])
            continue;
          c = CS_ARENA_NEW (a, CsValue);
          *c = *v;
          c->u.seq.items = CS_ARENA_NEW_N (a, CsValue *, v->u.seq.n);
          memcpy (c->u.seq.items, v->u.seq.items, sizeof (CsValue *) * v->u.seq.n);
          c->u.seq.items[i] = ni;
          for (guint k = i + 1; k < v->u.seq.n; k++)
            c->u.seq.items[k] = subst_value (a, v->u.seq.items[k], from, to);
          return c;
        }
      return v;
    case CS_VALUE_CALL:
      for (guint i = 0; i < v->u.call.n_args; i++)
        {
          CsValue *ni = subst_value (a, v->u.call.args[i].value, from, to);
          if (ni == v->u.call.args[i].value)
            continue;
          c = CS_ARENA_NEW (a, CsValue);
          *c = *v;
          c->u.call.args = CS_ARENA_NEW_N (a, CsArg, v->u.call.n_args);
          memcpy (c->u.call.args, v->u.call.args, sizeof (CsArg) * v->u.call.n_args);
          c->u.call.args[i].value = ni;
          for (guint k = i + 1; k < v->u.call.n_args; k++)
            c->u.call.args[k].value = subst_value (a, v->u.call.args[k].value, from, to);
          return c;
        }
      return v;
    default:
      return v;
    }
}

/* Renames @from to @to in a statement the decomposition built (it owns its argument array and
 * its subsymbols); the renamed arguments and target go through the IR mutator. */
static void
subst_stmt (CsTrace *trace, CsStmt *st, const CsProxy *from, CsProxy *to)
{
  CsArena *a = trace->arena;
  CsValue *out = subst_value (a, st->out, from, to);
  gboolean changed = out != st->out;

  for (guint i = 0; i < st->n_args; i++)
    {
      CsValue *v = subst_value (a, st->args[i].value, from, to);
      changed |= v != st->args[i].value;
      st->args[i].value = v;
    }
  if (changed)
    cs_stmt_set_call (trace, st, st->args, st->n_args, out);
  for (guint i = 0; i < st->n_subs; i++)
    subst_stmt (trace, st->subs[i], from, to);
}

static void
dx_init (Dx *dx, CsTrace *trace, const CsStmt *stmt, const CsPolicy *policy)
{
  dx->trace = trace;
  dx->origin = stmt;
  dx->names_free_from = G_MAXUINT32;
  if (policy)
    dx->policy = *policy;
  else
    cs_policy_init_default (&dx->policy);
}

static gboolean
same_type (const CsProxy *a, const CsProxy *b)
{
  return a->kind == b->kind && a->dtype == b->dtype && same_dims (a->shape, a->rank, b->shape, b->rank);
}

/* Takes the name of @g, a proxy a decomposition made and then replaced, out of @trace's table,
 * and gives it back to the counter when it was the last one handed out (keeps numbering
 * contiguous). */
static void
give_back_name (CsTrace *trace, const CsProxy *g)
{
  cs_name_table_remove (trace->proxies, g->name);
  if (trace->next_name > 0)
    {
      guint64 n;
      if (_cs_parse_t_name (g->name, &n) && n == trace->next_name - 1)
        trace->next_name--;
    }
}

/* The decomposition made @g where the statement names @w: @w takes @g's type (when untyped) and
 * its place in @subs[@start..], and @g's name is given back.  FALSE with @error set when @w is
 * typed otherwise. */
static gboolean
adopt_output (Dx *dx, const CsStmt *stmt, GPtrArray *subs, guint start, CsProxy *w,
              CsProxy *g, GError **error)
{
  CsTrace *trace = dx->trace;

  if (w == g)
    return TRUE;
  if (w->typed && w->kind == CS_PROXY_TENSOR && !same_type (w, g))
    {
      g_autofree char *ws = cs_proxy_type_string (w);
      g_autofree char *gs = cs_proxy_type_string (g);

      _cs_decompose_fail (stmt, error, CS_DECOMPOSE_ERROR_TYPE, "output %s is typed \"%s\" but the decomposition gives \"%s\"",
               w->name, ws, gs);
      return FALSE;
    }
  if (!w->typed)
    cs_proxy_set_tensor (trace, w, g->dtype, g->shape, g->rank, &g->device);
  for (guint k = start; k < subs->len; k++)
    subst_stmt (trace, g_ptr_array_index (subs, k), g, w);
  give_back_name (trace, g);
  return TRUE;
}

/**
 * cs_decompose_stmt:
 *
 * See cs-decompose.h.
 */
gboolean
cs_decompose_stmt (CsTrace *trace, const CsStmt *stmt, const CsPolicy *policy, GPtrArray *out,
                   GError **error)
{
  return _cs_decompose_stmt_names (trace, stmt, policy, G_MAXUINT32, out, error);
}

/**
 * _cs_decompose_stmt_names: (skip)
 *
 * See cs-decompose.h.  The new statements are built directly at the end of @out, which is cut
 * back to its length on entry when the decomposition fails.
 */
gboolean
_cs_decompose_stmt_names (CsTrace *trace, const CsStmt *stmt, const CsPolicy *policy,
                          guint32 names_free_from, GPtrArray *out, GError **error)
{
  Dx dx;
  CsValue *res;
  guint start;

  g_return_val_if_fail (trace != NULL && stmt != NULL && out != NULL, FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);
  if (stmt->kind != CS_STMT_CALL)
    {
      g_set_error (error, CS_DECOMPOSE_ERROR, CS_DECOMPOSE_ERROR_ARGS, "not a call statement");
      return FALSE;
    }
  dx_init (&dx, trace, stmt, policy);
  dx.names_free_from = names_free_from;
  /* arguments that do not fit the op are reported by its meta before anything is built */
  if (cs_meta_supports (stmt))
    {
      CsMetaType types[64];
      guint n_types;

      GError *merr = NULL;

      if (!cs_meta_compute (trace, stmt, types, G_N_ELEMENTS (types), &n_types, &merr))
        {
          /* keep the message; the domain says what a caller can do about it */
          g_set_error_literal (error, CS_DECOMPOSE_ERROR,
                               g_error_matches (merr, CS_META_ERROR, CS_META_ERROR_UNSUPPORTED)
                               ? CS_DECOMPOSE_ERROR_UNSUPPORTED : CS_DECOMPOSE_ERROR_ARGS,
                               merr->message);
          g_error_free (merr);
          return FALSE;
        }
    }
  start = out->len;
  res = _cs_decompose_build (&dx, stmt, out, error);
  if (res != NULL)
    res = _cs_decompose_ensure_produced (&dx, out, start, res, error);
  if (res == NULL)
    goto fail;
  if (res->kind == CS_VALUE_PROXY && stmt->out != NULL && stmt->out->kind == CS_VALUE_PROXY)
    {
      /* the common case: one output */
      if (!adopt_output (&dx, stmt, out, start, stmt->out->u.proxy, res->u.proxy, error))
        goto fail;
    }
  else
    {
      g_autoptr (GPtrArray) got = g_ptr_array_new ();
      g_autoptr (GPtrArray) want = g_ptr_array_new ();

      _cs_decompose_proxy_leaves (res, got);
      _cs_decompose_proxy_leaves (stmt->out, want);
      if (stmt->out != NULL && got->len != want->len)
        {
          _cs_decompose_fail (stmt, error, CS_DECOMPOSE_ERROR_TYPE, "the decomposition gives %u outputs, the statement names %u",
                   got->len, want->len);
          goto fail;
        }
      for (guint i = 0; i < want->len; i++)
        if (!adopt_output (&dx, stmt, out, start, g_ptr_array_index (want, i),
                           g_ptr_array_index (got, i), error))
          goto fail;
    }
  return TRUE;

fail:
  g_ptr_array_set_size (out, start);
  return FALSE;
}

static gboolean
flatten_into (const CsStmt *st, GPtrArray *out, GError **error)
{
  if (cs_op_has_tag (st->op, CS_OP_TAG_PRIM))
    {
      g_ptr_array_add (out, (gpointer) st);
      return TRUE;
    }
  if (st->n_subs == 0)
    {
      _cs_decompose_fail (st, error, CS_DECOMPOSE_ERROR_UNSUPPORTED, "has no prims below it");
      return FALSE;
    }
  for (guint i = 0; i < st->n_subs; i++)
    if (!flatten_into (st->subs[i], out, error))
      return FALSE;
  return TRUE;
}

gboolean
cs_decompose_to_prims (CsTrace *trace, const CsStmt *stmt, const CsPolicy *policy, GPtrArray *out,
                       GError **error)
{
  g_autoptr (GPtrArray) one = g_ptr_array_new ();
  GError *local = NULL;

  g_return_val_if_fail (trace != NULL && stmt != NULL && out != NULL, FALSE);

  if (!cs_decompose_stmt (trace, stmt, policy, one, &local))
    {
      if (g_error_matches (local, CS_DECOMPOSE_ERROR, CS_DECOMPOSE_ERROR_PRIM))
        {
          /* a prim: a copy of itself */
          CsStmt *cp = cs_stmt_new_call (trace, stmt->op, stmt->callee, stmt->out, stmt->args, stmt->n_args);

          g_error_free (local);
          cp->origin = stmt->origin ? stmt->origin : stmt->id;
          cp->grad_sum = stmt->grad_sum;
          cp->type_comment = stmt->type_comment;
          g_ptr_array_add (out, cp);
          return TRUE;
        }
      g_propagate_error (error, local);
      return FALSE;
    }
  for (guint i = 0; i < one->len; i++)
    if (!flatten_into (g_ptr_array_index (one, i), out, error))
      return FALSE;
  return TRUE;
}

static gboolean
proxy_untyped (CsProxy *p, gpointer data)
{
  return !p->typed;
}

/* TRUE when the value tree @v references a proxy without a type (the proxies
 * cs_value_collect_proxies() lists). */
static gboolean
any_untyped_proxy (const CsValue *v)
{
  return cs_value_any_proxy (v, proxy_untyped, NULL);
}

/**
 * cs_decompose_trace: (see cs-decompose.h)
 *
 * cs_decompose_stmt types an untyped output proxy in place: that needs a trace that owns its
 * proxies (a deep copy); otherwise a derived trace, which shares them with @trace, is enough.
 * The derived trace shares the top-level statements too (cs_trace_derive_shared): only the
 * statements whose subsymbols are rebuilt are copied (cs_trace_own_stmt), the others (prims,
 * comments, unsupported calls - most of a joint trace) stay the input's.
 * Rather than walking @trace once more up front, the pass starts on a derived trace, checks
 * each top-level call's outputs before it touches the call, and at the first untyped output
 * starts over on a deep copy (nothing shared has been edited by then: only untyped outputs
 * are typed in place).
 */
CsTrace *
cs_decompose_trace (const CsTrace *trace, const CsPolicy *policy, GError **error)
{
  g_autoptr (CsTrace) copy = NULL;
  g_autoptr (GPtrArray) subs = NULL;
  gboolean deep = FALSE;

  g_return_val_if_fail (trace != NULL, NULL);
  subs = g_ptr_array_new ();
restart:
  copy = deep ? cs_trace_copy (trace, "decompose") : cs_trace_derive_shared (trace, "decompose");
  for (guint i = 0; i < copy->n_stmts; i++)
    {
      CsStmt *st = copy->stmts[i];
      GError *local = NULL;

      if (st->kind != CS_STMT_CALL)
        continue;
      if (!deep && any_untyped_proxy (st->out))
        {
          g_clear_pointer (&copy, cs_trace_unref);
          deep = TRUE;
          goto restart;
        }
      if (cs_op_has_tag (st->op, CS_OP_TAG_PRIM) || !cs_decompose_supports (st))
        continue;
      g_ptr_array_set_size (subs, 0);
      if (!_cs_decompose_stmt_names (copy, st, policy, _cs_decompose_names_free_from (copy), subs,
                                     &local))
        {
          if (g_error_matches (local, CS_DECOMPOSE_ERROR, CS_DECOMPOSE_ERROR_UNSUPPORTED))
            {
              g_clear_error (&local);
              continue;
            }
          g_propagate_error (error, local);
          return NULL;
        }
      /* the only edit of a top-level statement: on a private copy (the input's stays) */
      st = cs_trace_own_stmt (copy, st);
      copy->stmts[i] = st;
      cs_stmt_set_subs (copy, st, (CsStmt **) subs->pdata, subs->len);
    }
  return g_steal_pointer (&copy);
}
