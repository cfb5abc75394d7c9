/* test-fd.h: central finite differences of the f64 CPU reference against a trace's VJPs, shared
 * by test-core-grad and test-core-registry (a test-only header, included once per program). */
#pragma once

#include <glib.h>
#include <math.h>

#include "cs-decompose.h"
#include "cs-grad.h"
#include "cs-parse.h"
#include "cs-ref.h"
#include "cs-tensor.h"

static CsTrace *
fd_parse (const char *text)
{
  g_autoptr(GError) error = NULL;
  CsTrace *t = cs_parse_trace (text, "test", &error);

  g_assert_no_error (error);
  g_assert_nonnull (t);
  return t;
}

static CsValue *
fd_dict_get (const CsValue *d, const char *key)
{
  g_assert_nonnull (d);
  g_assert_cmpint (d->kind, ==, CS_VALUE_DICT);
  for (guint i = 0; i + 1 < d->u.seq.n; i += 2)
    if (g_strcmp0 (d->u.seq.items[i]->u.s, key) == 0)
      return d->u.seq.items[i + 1];
  return NULL;
}

/* Forward value L(x) = sum_k <cot_k, out_k(x)> of @init in f64. */
static double
loss_f64 (const CsTrace *init, GHashTable *env, GPtrArray *outs_names, GHashTable *cots)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GHashTable) ret = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
                                                      (GDestroyNotify) cs_tensor_unref);
  g_autoptr(GPtrArray) outputs = NULL;
  double l = 0;

  gboolean ok = cs_ref_run_env (init, env, CS_REF_F64, 0, &outputs, NULL, ret, &error);
  g_assert_no_error (error);
  g_assert_true (ok);
  for (guint k = 0; k < outs_names->len; k++)
    {
      CsTensor *o = g_hash_table_lookup (ret, outs_names->pdata[k]);
      CsTensor *c = g_hash_table_lookup (cots, outs_names->pdata[k]);
      g_assert_nonnull (o);
      g_assert_nonnull (c);
      g_assert_cmpint (o->numel, ==, c->numel);
      for (int64_t i = 0; i < o->numel; i++)
        l += cs_tensor_get_f64 (o, i) * cs_tensor_get_f64 (c, i);
    }
  return l;
}

static void
fill (CsTensor *t, guint64 seed, double lo, double hi, int64_t bound)
{
  GRand *r = g_rand_new_with_seed ((guint32) seed);

  for (int64_t i = 0; i < t->numel; i++)
    {
      if (cs_dtype_is_float (t->dtype))
        cs_tensor_set_f64 (t, i, g_rand_double_range (r, lo, hi));
      else if (t->dtype == CS_DTYPE_B8)
        cs_tensor_set_f64 (t, i, g_rand_boolean (r));
      else
        cs_tensor_set_f64 (t, i, g_rand_int_range (r, 0, (gint32) MAX (bound, 1)));
    }
  g_rand_free (r);
}

static CsTensor *
tensor_for (const CsProxy *p)
{
  g_autoptr(GError) error = NULL;
  CsTensor *t = cs_tensor_new (p->dtype, p->shape, p->rank, &error);

  g_assert_no_error (error);
  return t;
}

/* Checks every gradient of @text's joint trace (decomposed, run in f64) against central
 * differences of its forward; inputs uniform in [lo, hi]; integer inputs in [0, 4). */
static void
check_fd_full (const char *text, double lo, double hi, double tol, const char * const *names)
{
  g_autoptr(CsTrace) init = fd_parse (text);
  g_autoptr(GError) error = NULL;
  CsGradSpec spec = { .all_float = TRUE, .names = names };
  g_autoptr(CsTrace) joint = cs_grad_joint (init, &spec, &error);
  g_autoptr(CsTrace) djoint = NULL;
  g_autoptr(CsTrace) dinit = NULL;
  g_autoptr(GPtrArray) inputs = cs_trace_dup_inputs (init);
  g_autoptr(GHashTable) env = cs_ref_env_new ();
  g_autoptr(GHashTable) cots = cs_ref_env_new ();
  g_autoptr(GPtrArray) outs_names = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(GHashTable) ret = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
                                                      (GDestroyNotify) cs_tensor_unref);
  g_autoptr(GPtrArray) outputs = NULL;
  CsValue *grads, *fwout;
  guint n_checked = 0;

  g_assert_no_error (error);
  g_assert_nonnull (joint);
  djoint = cs_decompose_trace (joint, NULL, &error);
  g_assert_no_error (error);
  dinit = cs_decompose_trace (init, NULL, &error);
  g_assert_no_error (error);

  for (guint i = 0; i < inputs->len; i++)
    {
      CsProxy *p = inputs->pdata[i];
      g_autoptr(CsTensor) t = tensor_for (p);
      int64_t bound = cs_ref_index_bound (init, p);
      fill (t, 17 + i, lo, hi, bound > 0 ? bound : 4);
      cs_ref_env_insert (env, p->name, t);
    }
  grads = fd_dict_get (cs_trace_get_return (joint)->value, "output");
  fwout = fd_dict_get (cs_trace_get_return (joint)->value, "fw_flat_out");
  for (guint k = 0; k < fwout->u.seq.n; k++)
    {
      CsProxy *o = fwout->u.seq.items[k]->u.proxy;
      g_autoptr(CsTensor) c = tensor_for (o);
      fill (c, 101 + k, -1.0, 1.0, 1);
      cs_ref_env_insert (cots, o->name, c);
      g_ptr_array_add (outs_names, g_strdup (o->name));
    }
  /* the joint's leaf inputs: the forward inputs plus one cotangent per get_grad */
  {
    g_autoptr(GHashTable) jenv = cs_ref_env_new ();
    GHashTableIter it;
    gpointer k, v;
    g_hash_table_iter_init (&it, env);
    while (g_hash_table_iter_next (&it, &k, &v))
      cs_ref_env_insert (jenv, k, v);
    for (guint i = 0; i < djoint->n_stmts; i++)
      {
        CsStmt *s = djoint->stmts[i];
        if (s->kind == CS_STMT_CALL && s->op->id == CS_OP_PRIM_GET_GRAD)
          cs_ref_env_insert (jenv, cs_stmt_get_output (s)->name,
                             g_hash_table_lookup (cots, cs_stmt_get_arg (s, 0, NULL)->u.proxy->name));
      }
    gboolean ok = cs_ref_run_env (djoint, jenv, CS_REF_F64, 0, &outputs, NULL, ret, &error);
    if (g_error_matches (error, CS_REF_ERROR, CS_REF_ERROR_UNSUPPORTED))
      {
        /* the backward uses an op the CPU reference does not run yet */
        g_autofree char *msg = g_strdup_printf ("CPU reference: %s", error->message);
        g_test_skip (msg);
        return;
      }
    g_assert_no_error (error);
    g_assert_true (ok);
  }

  for (guint i = 0; i < inputs->len; i++)
    {
      CsProxy *p = inputs->pdata[i];
      CsValue *gv = grads->u.seq.items[i];
      CsTensor *x = g_hash_table_lookup (env, p->name);
      CsTensor *g;
      double max_err = 0, max_g = 0;

      if (gv->kind != CS_VALUE_PROXY)
        continue;
      g = g_hash_table_lookup (ret, gv->u.proxy->name);
      g_assert_nonnull (g);
      g_assert_cmpint (g->numel, ==, x->numel);
      /* every element of small tensors, 12 spread-out elements of large ones */
      for (int64_t j = 0; j < x->numel; j += x->numel > 24 ? x->numel / 12 + 1 : 1)
        {
          double x0 = cs_tensor_get_f64 (x, j);
          double h = 1e-6 * MAX (1.0, fabs (x0));
          double lp, lm, fd, an = cs_tensor_get_f64 (g, j);
          cs_tensor_set_f64 (x, j, x0 + h);
          lp = loss_f64 (dinit, env, outs_names, cots);
          cs_tensor_set_f64 (x, j, x0 - h);
          lm = loss_f64 (dinit, env, outs_names, cots);
          cs_tensor_set_f64 (x, j, x0);
          fd = (lp - lm) / (2 * h);
          max_err = MAX (max_err, fabs (fd - an));
          max_g = MAX (max_g, MAX (fabs (fd), fabs (an)));
        }
      g_test_message ("d/d%s: max |fd - vjp| = %.3g, max |grad| = %.3g", p->name, max_err, max_g);
      g_assert_cmpfloat (max_g, >, 0.0);
      g_assert_cmpfloat (max_err / max_g, <, tol);
      n_checked++;
    }
  g_assert_cmpuint (n_checked, >, 0);
}

