/* cs-grad.c: the grad transform (joint forward+backward trace); its VJP rules are in cs-vjp.c.
 *
 * Source: thunder/transforms/autodiff.py (grad_transform_on_trace, _group_get_grad_bsyms),
 * thunder/core/transforms.py (register_grad rules for prims, augmented_forward_impls /
 * backward_impls, restore_reduced_dims, grad_chooser_backward), thunder/torch/__init__.py
 * (_sum_grad); reference/thunder-traces.md 5.1, 5.2.
 *
 * How it works (mirrors AugmentedForwardProcessor):
 * - the joint trace is derived from the input (statements and proxies shared; a deep copy when
 *   a decomposition must type an untyped output); its statements go through a work queue;
 * - a statement without a differentiable argument (no floating tensor) is kept as is;
 * - a statement with a rule is kept (it is its own forward) and a VJP record is queued;
 * - otherwise its decomposition (parsed subsymbols, else cs_decompose_stmt) goes to the front
 *   of the queue;
 * - at the return the records run in reverse: each reads its output gradients (accumulated
 *   put_grads, or `prims.get_grad` for a forward output) and emits backward statements,
 *   ending in put_grads that accumulate with `ltorch.add`.
 */
#include "cs-config.h"

#include "cs-grad-private.h"

#include "cs-decompose.h"
#include "cs-dist.h"
#include "cs-executors.h"
#include "cs-meta.h"
#include "cs-ops.h"
#include "cs-ops-args.h"
#include "cs-promote.h"

#include <math.h>
#include <string.h>

G_DEFINE_QUARK (cs-grad-error-quark, cs_grad_error)

#define MAX_WORK_STEPS 2000000  /* statements processed before we call it a cycle */

/* ------------------------------------------------------------------------------------------ */
/* Statements                                                                                  */

const char *
_cs_grad_stmt_where (GradCtx *c, const CsStmt *s)
{
  const char *out = "?";
  CsProxy *p = s ? cs_stmt_get_output (s) : NULL;

  if (s != NULL && s->line > 0)
    return cs_arena_printf (c->a, "%s:%u", c->t->file ? c->t->file : "line", s->line);
  if (p != NULL)
    out = p->name;
  return cs_arena_printf (c->a, "statement producing %s", out);
}

/* cs_value_any_proxy() over the proxies cs_stmt_collect_outputs() lists. */
static gboolean
stmt_any_output (const CsStmt *s, CsProxyFunc fn, gpointer data)
{
  switch (s->kind)
    {
    case CS_STMT_CALL:
    case CS_STMT_ANNASSIGN:
      return cs_value_any_proxy (s->out, fn, data);
    case CS_STMT_UNPACK:
      for (guint i = 0; i < s->n_targets; i++)
        if (cs_value_any_proxy (s->targets[i], fn, data))
          return TRUE;
      return FALSE;
    default:
      return FALSE;
    }
}

/* cs_value_any_proxy() over the proxies cs_stmt_collect_inputs() lists. */
static gboolean
stmt_any_input (const CsStmt *s, CsProxyFunc fn, gpointer data)
{
  switch (s->kind)
    {
    case CS_STMT_CALL:
      for (guint i = 0; i < s->n_args; i++)
        if (cs_value_any_proxy (s->args[i].value, fn, data))
          return TRUE;
      return FALSE;
    case CS_STMT_UNPACK:
      return s->source != NULL && fn (s->source, data);
    case CS_STMT_ANNASSIGN:
    case CS_STMT_RETURN:
      return cs_value_any_proxy (s->value, fn, data);
    default:
      return FALSE;
    }
}

/* ------------------------------------------------------------------------------------------ */
/* The pass                                                                                    */

static gboolean
proxy_is_diff (CsProxy *p, gpointer data)
{
  return is_diff (p);
}

static gboolean
is_constant_call (const CsStmt *s, CsOpId sem)
{
  return op_is_constant (sem) || !stmt_any_input (s, proxy_is_diff, NULL);
}

static gboolean
proxy_is_untyped (CsProxy *p, gpointer data)
{
  return !p->typed;
}

/* The statements @s stands for, one level down, into @out: Thunder's decomposition built under
 * the policy (cs_decompose_stmt), else as recorded in the trace (the subsymbols printed as
 * comments).  Returns FALSE with @error set when there is none, or with c->restart set when
 * @s has an untyped output and t shares its proxies with the input. */
static gboolean
decomposition (GradCtx *c, CsStmt *s, GPtrArray *out, GError **error)
{
  g_autoptr(GError) local = NULL;

  /* the decomposition types an untyped output in place: not on proxies shared with the
   * input trace (the caller starts over on a deep copy) */
  if (!c->deep && cs_value_any_proxy (s->out, proxy_is_untyped, NULL))
    {
      c->restart = TRUE;
      return FALSE;
    }
  if (_cs_decompose_stmt_names (c->t, s, c->policy, c->names_free_from, out, &local))
    return TRUE;
  g_ptr_array_set_size (out, 0);
  for (guint i = 0; i < s->n_subs; i++)
    g_ptr_array_add (out, s->subs[i]);
  if (out->len > 0)
    return TRUE;
  if (g_error_matches (local, CS_DECOMPOSE_ERROR, CS_DECOMPOSE_ERROR_PRIM)
      || g_error_matches (local, CS_DECOMPOSE_ERROR, CS_DECOMPOSE_ERROR_UNSUPPORTED))
    g_set_error (error, CS_GRAD_ERROR, CS_GRAD_ERROR_NO_RULE,
                 "%s: %s: no VJP rule and no decomposition (castscope differentiates prims "
                 "and the ltorch ops Thunder has rules for; other ops need a decomposition or "
                 "their printed subsymbols)", _cs_grad_stmt_where (c, s), s->callee);
  else
    {
      /* the decomposition's error names the same statement ("line N: callee: ...") */
      g_autofree char *same = s->line > 0 ? g_strdup_printf ("line %u: %s: ", s->line, s->callee)
                                          : g_strdup_printf ("%s: ", s->callee);

      g_set_error (error, local->domain, local->code, "%s: %s: decomposing for grad: %s",
                   _cs_grad_stmt_where (c, s), s->callee,
                   local->message + (g_str_has_prefix (local->message, same) ? strlen (same) : 0));
    }
  return FALSE;
}

/* Stops at the first output the grad pass cannot use (stored in *@data). */
static gboolean
proxy_not_static_tensor (CsProxy *p, gpointer data)
{
  if (p->kind != CS_PROXY_TENSOR || !p->typed)
    {
      *(CsProxy **) data = p;
      return TRUE;
    }
  for (guint k = 0; k < p->rank; k++)
    if (p->shape[k] < 0)
      {
        *(CsProxy **) data = p;
        return TRUE;
      }
  return FALSE;
}

static gboolean
outputs_typed (GradCtx *c, CsStmt *s, GError **error)
{
  CsProxy *p = NULL;

  /* tuple outputs (var_mean) print no type comment: infer them as Thunder's meta would */
  if (stmt_any_output (s, proxy_is_untyped, NULL))
    {
      g_autoptr(GError) local = NULL;
      if (!cs_meta_infer (c->t, s, &local))
        {
          g_propagate_prefixed_error (error, g_steal_pointer (&local),
                                      "%s: grad needs the output types: ", _cs_grad_stmt_where (c, s));
          return FALSE;
        }
    }
  if (!stmt_any_output (s, proxy_not_static_tensor, &p))
    return TRUE;
  if (p->kind != CS_PROXY_TENSOR || !p->typed)
    g_set_error (error, CS_GRAD_ERROR, CS_GRAD_ERROR_BAD_TRACE,
                 "%s: %s: output %s has no tensor type (the grad pass needs typed "
                 "outputs; run the meta pass first)", _cs_grad_stmt_where (c, s), s->callee, p->name);
  else
    g_set_error (error, CS_GRAD_ERROR, CS_GRAD_ERROR_BAD_TRACE,
                 "%s: %s: output %s has a symbolic shape; the grad pass needs static "
                 "shapes", _cs_grad_stmt_where (c, s), s->callee, p->name);
  return FALSE;
}

/* Walks the statements of @work, a stack (the next statement last), replacing each statement
 * without a rule by its decomposition. */
static gboolean
forward_walk (GradCtx *c, GPtrArray *work, GError **error)
{
  guint steps = 0;
  g_autoptr(GPtrArray) subs = g_ptr_array_new ();

  while (work->len > 0)
    {
      CsStmt *s = g_ptr_array_steal_index_fast (work, work->len - 1);
      CsOpId sem;

      if (++steps > MAX_WORK_STEPS)
        {
          g_set_error (error, CS_GRAD_ERROR, CS_GRAD_ERROR_LIMIT,
                       "%s: decomposition does not terminate (more than %d statements)",
                       _cs_grad_stmt_where (c, s), MAX_WORK_STEPS);
          return FALSE;
        }
      switch (s->kind)
        {
        case CS_STMT_RETURN:
          if (c->ret == NULL)
            c->ret = s;
          continue;
        case CS_STMT_DEL:
          continue;
        case CS_STMT_CALL:
          break;
        default:
          if (c->ret == NULL)
            g_ptr_array_add (c->fwd, s);
          continue;
        }
      if (c->ret != NULL)
        continue;   /* statements after the return are dead */
      sem = cs_op_semantic (s->op)->id;
      if (sem == CS_OP_PRIM_GET_GRAD || sem == CS_OP_PRIM_PUT_GRAD)
        {
          g_set_error (error, CS_GRAD_ERROR, CS_GRAD_ERROR_BAD_TRACE,
                       "%s: %s: this trace already has a backward (joint trace); the grad pass "
                       "takes a forward trace", _cs_grad_stmt_where (c, s), s->callee);
          return FALSE;
        }
      /* checks, unpacks and other bookkeeping create no gradient association */
      if (s->op->category == CS_OP_CAT_BOOKKEEPING || is_constant_call (s, sem))
        {
          g_ptr_array_add (c->fwd, s);
          continue;
        }
      /* an executor's grad transform comes before the grad rules (Thunder's
         _get_gradfn_and_executor walks the executor list first): the sdpa executor takes
         scaled_dot_product_attention whole */
      if (sem == CS_OP_LTORCH_SCALED_DOT_PRODUCT_ATTENTION)
        {
          CsSdpaBackend be = cs_executor_sdpa_backend (s, c->policy);
          if (be != CS_SDPA_NONE)
            {
              CsStmt *f;
              VjpRecord r;

              if (!outputs_typed (c, s, error))
                return FALSE;
              f = cs_executor_sdpa_forward (c->t, s, be, c->names_free_from);
              r.rule = f->op->id;
              r.stmt = f;
              r.aux = NULL;
              g_ptr_array_add (c->fwd, f);
              g_array_append_val (c->records, r);
              continue;
            }
        }
      /* nll_loss's augmented forward (thunder/core/transforms.py nll_loss_aug_fwd): the
         decomposition (_nll_loss_helper) is the forward, not differentiated; its total_weight
         (the divisor of 'mean') is kept for ltorch.nll_loss_backward */
      if (sem == CS_OP_LTORCH_NLL_LOSS && xentropy_rules (c))
        {
          VjpRecord r = { sem, s, NULL };
          CsValue *red = arg (s, CS_ARG_REDUCTION);

          if (!outputs_typed (c, s, error))
            return FALSE;
          g_ptr_array_set_size (subs, 0);
          if (!decomposition (c, s, subs, error))
            return FALSE;
          for (guint i = 0; i < subs->len; i++)
            g_ptr_array_add (c->fwd, subs->pdata[i]);
          if (subs->len > 0 && (red == NULL || (red->kind == CS_VALUE_STRING
                                                && g_strcmp0 (red->u.s, "mean") == 0)))
            {
              CsStmt *last = subs->pdata[subs->len - 1];
              r.aux = value_tensor (nth_arg (last, 1));
            }
          g_array_append_val (c->records, r);
          continue;
        }
      if (_cs_vjp_exists (sem))
        {
          VjpRecord r = { sem, s, NULL };
          if (!outputs_typed (c, s, error))
            return FALSE;
          g_ptr_array_add (c->fwd, s);
          g_array_append_val (c->records, r);
          continue;
        }
      if (cs_op_is_fusion (s->op))
        {
          g_set_error (error, CS_GRAD_ERROR, CS_GRAD_ERROR_BAD_TRACE,
                       "%s: %s: the grad pass runs before fusion; this trace is already fused",
                       _cs_grad_stmt_where (c, s), s->callee);
          return FALSE;
        }
      g_ptr_array_set_size (subs, 0);
      /* the decomposition's statements go on the stack, the first one on top */
      if (!decomposition (c, s, subs, error))
        return FALSE;
      for (guint i = subs->len; i > 0; i--)
        g_ptr_array_add (work, subs->pdata[i - 1]);
    }
  if (c->ret == NULL)
    {
      g_set_error (error, CS_GRAD_ERROR, CS_GRAD_ERROR_BAD_TRACE,
                   "%s: trace %s has no return statement", c->t->file ? c->t->file : "trace",
                   c->t->name ? c->t->name : "?");
      return FALSE;
    }
  return TRUE;
}

static CsValue *
dict_get (const CsValue *d, const char *key)
{
  if (d == NULL || d->kind != CS_VALUE_DICT)
    return NULL;
  for (guint i = 0; i + 1 < d->u.seq.n; i += 2)
    {
      const CsValue *k = d->u.seq.items[i];
      if (k->kind == CS_VALUE_STRING && g_strcmp0 (k->u.s, key) == 0)
        return d->u.seq.items[i + 1];
    }
  return NULL;
}

enum { LIVE = 1, GET_GRAD = 2 };

static gboolean
proxy_is_needed (CsProxy *p, gpointer data)
{
  return pmap_contains ((ProxyMap *) data, p);
}

static gboolean
proxy_mark_needed (CsProxy *p, gpointer data)
{
  pmap_insert ((ProxyMap *) data, p, p);
  return FALSE;
}

static gboolean
proxy_any (CsProxy *p, gpointer data)
{
  return TRUE;
}

/* Thunder's dce - keep what the return needs (walking backwards) plus comments, unpacks and
 * DONT_DCE statements - followed by Thunder's _group_get_grad_bsyms: every live get_grad
 * moves to where the first one is.  The get_grads are noted during the dce walk, while each
 * statement is at hand, so the grouping does not read the statements again.  A call with
 * outputs is kept when one of them is needed, one without outputs when it is DONT_DCE or
 * opaque; a del never; anything else always. */
static GPtrArray *
dce_and_group_get_grads (const CsTrace *t, GPtrArray *stmts)
{
  g_auto(ProxyMap) needed_map = { 0 };
  ProxyMap *needed = &needed_map;
  g_autofree guint8 *mark = g_new0 (guint8, MAX (stmts->len, 1));
  GPtrArray *out = g_ptr_array_sized_new (stmts->len);
  guint first = G_MAXUINT;

  pmap_init (needed, t->next_proxy_id + 1);
  for (guint i = stmts->len; i > 0; i--)
    {
      const CsStmt *s = stmts->pdata[i - 1];
      gboolean keep;

      switch (s->kind)
        {
        case CS_STMT_DEL:
          continue;
        case CS_STMT_CALL:
          if (stmt_any_output (s, proxy_any, NULL))
            keep = stmt_any_output (s, proxy_is_needed, needed);
          else
            keep = cs_op_has_tag (s->op, CS_OP_TAG_DONT_DCE) || s->op->id == CS_OP_OPAQUE;
          break;
        default:
          keep = TRUE;
          break;
        }
      if (!keep)
        continue;
      mark[i - 1] = LIVE;
      if (s->kind == CS_STMT_CALL && s->op->id == CS_OP_PRIM_GET_GRAD)
        {
          mark[i - 1] |= GET_GRAD;
          first = i - 1;
        }
      stmt_any_input (s, proxy_mark_needed, needed);
    }
  for (guint i = 0; i < stmts->len; i++)
    {
      if (i == first)
        for (guint j = i; j < stmts->len; j++)
          if (mark[j] == (LIVE | GET_GRAD))
            g_ptr_array_add (out, stmts->pdata[j]);
      if (mark[i] == LIVE)
        g_ptr_array_add (out, stmts->pdata[i]);
    }
  return out;
}

static const char *
import_module (const char *line)
{
  static char buf[256];
  const char *p = line;
  gsize n = 0;

  if (g_str_has_prefix (p, "import "))
    p += 7;
  else if (g_str_has_prefix (p, "from "))
    p += 5;
  while (p[n] && p[n] != ' ' && n + 1 < sizeof buf)
    n++;
  memcpy (buf, p, n);
  buf[n] = 0;
  return buf;
}

static gint
import_cmp (gconstpointer a, gconstpointer b)
{
  const char *la = *(const char **) a, *lb = *(const char **) b;
  g_autofree char *ma = g_strdup (import_module (la));
  return strcmp (ma, import_module (lb));
}

/* Adds the imports a trace with prims/dtypes/ltorch statements needs, sorted by module as
 * TraceCtx.python does, the no_autocast import kept last. */
static void
ensure_imports (CsTrace *t)
{
  static const char * const wanted[] = {
    "import thunder", "import thunder.core.dtypes as dtypes", "import thunder.core.prims as prims",
    "import thunder.torch as ltorch", "import torch",
  };
  g_autoptr(GPtrArray) lines = g_ptr_array_new ();
  const char *last = NULL;

  for (guint i = 0; i < t->n_imports; i++)
    {
      if (strstr (t->imports[i], "no_autocast") != NULL)
        last = t->imports[i];
      else
        g_ptr_array_add (lines, (gpointer) t->imports[i]);
    }
  for (guint w = 0; w < G_N_ELEMENTS (wanted); w++)
    {
      gboolean have = FALSE;
      for (guint i = 0; i < lines->len && !have; i++)
        have = strcmp (lines->pdata[i], wanted[w]) == 0;
      if (!have)
        g_ptr_array_add (lines, cs_arena_strdup (t->arena, wanted[w]));
    }
  g_ptr_array_sort (lines, import_cmp);
  if (last != NULL)
    g_ptr_array_add (lines, (gpointer) last);
  t->imports = (const char **) cs_arena_dup_ptrs (t->arena, lines->pdata, lines->len);
  t->n_imports = lines->len;
}

static gboolean
mark_requires_grad (GradCtx *c, GPtrArray *inputs, const CsGradSpec *spec, GError **error)
{
  if (spec != NULL && spec->none)
    return TRUE;
  if (spec != NULL && spec->names != NULL)
    {
      for (guint k = 0; spec->names[k] != NULL; k++)
        {
          CsProxy *p = NULL;
          for (guint i = 0; i < inputs->len && p == NULL; i++)
            if (strcmp (((CsProxy *) inputs->pdata[i])->name, spec->names[k]) == 0)
              p = inputs->pdata[i];
          if (p == NULL)
            {
              g_set_error (error, CS_GRAD_ERROR, CS_GRAD_ERROR_SPEC,
                           "input '%s' requested for grad is not a parameter of %s",
                           spec->names[k], c->t->name ? c->t->name : "the trace");
              return FALSE;
            }
          if (!is_diff (p))
            {
              g_set_error (error, CS_GRAD_ERROR, CS_GRAD_ERROR_SPEC,
                           "input '%s' cannot require grad: it is not a floating-point tensor",
                           spec->names[k]);
              return FALSE;
            }
          pmap_insert (c->req, p, p);
        }
      return TRUE;
    }
  if (spec != NULL && spec->module_rule)
    {
      g_autoptr(GHashTable) synced = cs_grad_data_parallel_params (c->t);
      if (synced != NULL)
        {
          for (guint i = 0; i < inputs->len; i++)
            {
              CsProxy *p = inputs->pdata[i];
              if (g_hash_table_contains (synced, p->name) && is_diff (p))
                pmap_insert (c->req, p, p);
            }
          return TRUE;
        }
    }
  for (guint i = 0; i < inputs->len; i++)
    {
      CsProxy *p = inputs->pdata[i];
      if (spec != NULL && spec->module_rule && cs_grad_input_is_module_buffer (p->name))
        continue;
      if (is_diff (p))
        pmap_insert (c->req, p, p);
    }
  return TRUE;
}

GHashTable *
cs_grad_data_parallel_params (const CsTrace *trace)
{
  GHashTable *names = NULL;

  g_return_val_if_fail (trace != NULL, NULL);
  for (guint i = 0; i < trace->n_stmts; i++)
    {
      const CsStmt *s = trace->stmts[i];
      const CsValue *a;
      CsDistParallelType pt;

      if (s->kind != CS_STMT_CALL || cs_op_semantic (s->op)->id != CS_OP_DIST_SYNCHRONIZE
          || !cs_dist_parallel_type (cs_stmt_arg (s, CS_ARG_DISTPARALLEL_TYPE), &pt)
          || (pt != CS_DIST_PARALLEL_REPLICATED && pt != CS_DIST_PARALLEL_FULLY_SHARDED))
        continue;
      a = cs_stmt_get_arg (s, 0, NULL);
      if (a == NULL || a->kind != CS_VALUE_PROXY || a->u.proxy->kind != CS_PROXY_TENSOR)
        continue;
      if (names == NULL)
        names = g_hash_table_new (g_str_hash, g_str_equal);
      g_hash_table_add (names, (gpointer) a->u.proxy->name);
    }
  return names;
}

gboolean
cs_grad_input_is_module_buffer (const char *name)
{
  g_return_val_if_fail (name != NULL, FALSE);
  return g_str_has_prefix (name, "t_") && name[2] != '\0'
         && !g_str_has_suffix (name, "_weight") && !g_str_has_suffix (name, "_bias");
}

/**
 * cs_grad_joint:
 * @initial: (transfer none): an initial (ltorch-level) trace
 * @spec: (nullable): which inputs require grad; NULL = all floating inputs
 * @error: return location for a #CS_GRAD_ERROR
 *
 * See cs-grad.h.  Source: thunder/transforms/autodiff.py grad_transform_on_trace.
 * Returns: (transfer full): the joint trace, or NULL with @error set
 */
CsTrace *
cs_grad_joint (const CsTrace *initial, const CsGradSpec *spec, GError **error)
{
  g_autoptr(CsTrace) t = NULL;
  g_autoptr(GPtrArray) inputs = NULL;
  g_autoptr(GPtrArray) all = NULL;
  g_autoptr(GPtrArray) grouped = NULL;
  g_autoptr(GPtrArray) work = NULL;
  g_autoptr(GPtrArray) fwd = g_ptr_array_new ();
  g_autoptr(GArray) records = g_array_new (FALSE, FALSE, sizeof (VjpRecord));
  g_autoptr(GPtrArray) bw = g_ptr_array_new ();
  g_autoptr(GHashTable) whys = g_hash_table_new (g_str_hash, g_str_equal);
  g_auto(ProxyMap) grads = { 0 };
  g_auto(ProxyMap) grad_from = { 0 };
  g_auto(ProxyMap) outputs = { 0 };
  g_auto(ProxyMap) req = { 0 };
  g_autoptr(GPtrArray) outp = g_ptr_array_new ();
  GradCtx c = { 0 };
  CsValue *rv, *outv, *flat, *gtuple, *dict;
  CsValue **gitems, *ditems[6];
  CsStmt *ret;
  CsPolicy dflt;

  g_return_val_if_fail (initial != NULL, NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  /* The joint trace shares the input's proxies and statements (cs_trace_derive_shared): grad
   * edits no statement or proxy of its input, except that decomposing a statement types its
   * untyped outputs in place; at the first such statement the walk starts over on a deep copy
   * (cs_trace_copy), as cs_decompose_trace does. */
  cs_policy_init_default (&dflt);
  for (gboolean deep = FALSE;; deep = TRUE)
    {
      g_clear_pointer (&t, cs_trace_unref);
      g_clear_pointer (&inputs, g_ptr_array_unref);
      g_clear_pointer (&work, g_ptr_array_unref);
      pmap_clear (&req);
      g_ptr_array_set_size (fwd, 0);
      g_array_set_size (records, 0);
      g_ptr_array_set_size (bw, 0);
      g_hash_table_remove_all (whys);
      t = deep ? cs_trace_copy (initial, "grad") : cs_trace_derive_shared (initial, "grad");
      memset (&c, 0, sizeof c);
      c.t = t;
      c.a = t->arena;
      c.policy = (spec && spec->policy) ? spec->policy : &dflt;
      c.fwd = fwd;
      c.records = records;
      c.bw = bw;
      c.whys = whys;
      c.names_free_from = _cs_decompose_names_free_from (t);
      c.deep = deep;
      pmap_init (&req, t->next_proxy_id + 1);
      c.req = &req;

      inputs = cs_trace_dup_inputs (t);
      if (!mark_requires_grad (&c, inputs, spec, error))
        return NULL;

      work = g_ptr_array_sized_new (t->n_stmts);
      for (guint i = t->n_stmts; i > 0; i--)
        g_ptr_array_add (work, t->stmts[i - 1]);
      if (forward_walk (&c, work, error))
        break;
      if (!c.restart || deep)
        return NULL;
    }
  /* every forward proxy exists now: the maps get a slot for each */
  pmap_init (&grads, t->next_proxy_id + 1);
  pmap_init (&grad_from, t->next_proxy_id + 1);
  pmap_init (&outputs, t->next_proxy_id + 1);
  c.grads = &grads;
  c.grad_from = &grad_from;
  c.outputs = &outputs;

  /* the forward outputs */
  rv = c.ret->value;
  outv = dict_get (rv, "output");
  if (outv == NULL)
    outv = rv;
  if (outv == NULL)
    outv = cs_value_new_seq (c.a, CS_VALUE_TUPLE, NULL, 0);
  else if (outv->kind != CS_VALUE_TUPLE)
    outv = cs_value_new_seq (c.a, CS_VALUE_TUPLE, &outv, 1);
  cs_value_collect_proxies (outv, outp);
  for (guint i = 0; i < outp->len; i++)
    pmap_insert (&outputs, outp->pdata[i], outp->pdata[i]);

  flat = dict_get (rv, "flat_args");
  if (flat != NULL && flat->kind != CS_VALUE_LIST && flat->kind != CS_VALUE_TUPLE)
    flat = NULL;
  if (flat == NULL)
    {
      CsValue **items = CS_ARENA_NEW_N (c.a, CsValue *, MAX (inputs->len, 1));
      for (guint i = 0; i < inputs->len; i++)
        items[i] = v_p (&c, inputs->pdata[i]);
      flat = cs_value_new_seq (c.a, CS_VALUE_LIST, items, inputs->len);
    }

  /* the backward: records in reverse order */
  if (!(spec != NULL && spec->none))
    for (guint i = records->len; i > 0; i--)
      {
        _cs_vjp_run (&c, &g_array_index (records, VjpRecord, i - 1));
        if (c.error != NULL)
          {
            g_propagate_error (error, c.error);
            return NULL;
          }
      }

  /* return {'output': grads, 'flat_args': [...], 'fw_flat_out': outputs} */
  gitems = CS_ARENA_NEW_N (c.a, CsValue *, MAX (flat->u.seq.n, 1));
  for (guint i = 0; i < flat->u.seq.n; i++)
    {
      CsProxy *p = value_tensor (flat->u.seq.items[i]);
      CsProxy *g = (p != NULL && pmap_contains (&req, p)) ? pmap_lookup (&grads, p) : NULL;
      gitems[i] = g ? v_p (&c, g) : cs_value_new_none (c.a);
    }
  gtuple = cs_value_new_seq (c.a, CS_VALUE_TUPLE, gitems, flat->u.seq.n);
  ditems[0] = cs_value_new_string (c.a, "output");
  ditems[1] = gtuple;
  ditems[2] = cs_value_new_string (c.a, "flat_args");
  ditems[3] = flat;
  ditems[4] = cs_value_new_string (c.a, "fw_flat_out");
  ditems[5] = outv;
  dict = cs_value_new_seq (c.a, CS_VALUE_DICT, ditems, 6);
  ret = cs_stmt_new (t, CS_STMT_RETURN);
  ret->value = dict;
  ret->origin = c.ret->origin ? c.ret->origin : c.ret->id;

  all = g_ptr_array_new ();
  for (guint i = 0; i < fwd->len; i++)
    g_ptr_array_add (all, fwd->pdata[i]);
  for (guint i = 0; i < bw->len; i++)
    g_ptr_array_add (all, bw->pdata[i]);
  g_ptr_array_add (all, ret);
  grouped = dce_and_group_get_grads (t, all);
  cs_trace_set_stmts (t, (CsStmt **) grouped->pdata, grouped->len);

  ensure_imports (t);
  t->provenance = "Grad transform pass";
  t->backward_tags = TRUE;
  t->pass = "grad";
  return g_steal_pointer (&t);
}
