/* cs-compare.c: structural equality of traces, and the accuracy verdict of a computed tensor.
 *
 * Structural equality is used by the parser's round-trip tests (print then parse again gives
 * the same trace) and by pass tests.  Statement ids, source lines and pass annotations are not
 * compared: they are bookkeeping, not trace content.
 *
 * The accuracy verdict (cs_accuracy_judge()) is PyTorch's: torch._dynamo.utils.same() in
 * torch/_dynamo/utils.py, with an f64 run as its fp64_ref (see cs-compare.h).
 */
#include "cs-config.h"

#include "cs-compare.h"

#include "cs-half.h"
#include "cs-print.h"

#include <math.h>
#include <string.h>

static gboolean G_GNUC_PRINTF (2, 3)
differ (GString *why, const char *fmt, ...)
{
  va_list ap;

  if (why == NULL)
    return FALSE;
  va_start (ap, fmt);
  g_string_append_vprintf (why, fmt, ap);
  va_end (ap);
  return FALSE;
}

static char *
value_text (const CsValue *v)
{
  GString *s = g_string_new (NULL);

  if (v == NULL)
    g_string_append (s, "(nothing)");
  else
    cs_print_value_to (s, v);
  if (s->len > 80)
    {
      g_string_truncate (s, 77);
      g_string_append (s, "...");
    }
  return g_string_free (s, FALSE);
}

static gboolean
value_check (const CsValue *a, const CsValue *b, GString *why, const char *what)
{
  g_autofree char *ta = NULL, *tb = NULL;

  if (cs_value_equal_strict (a, b))
    return TRUE;
  ta = value_text (a);
  tb = value_text (b);
  return differ (why, "%s differs: %s vs %s", what, ta, tb);
}

static const char *
pname (const CsProxy *p)
{
  return p ? p->name : "(none)";
}

/**
 * cs_stmt_equal:
 * @a: a statement
 * @b: another statement
 * @why_not: (nullable): receives a description of the first difference
 *
 * Returns: %TRUE if @a and @b (with their subsymbols) are structurally equal
 */
gboolean
cs_stmt_equal (const CsStmt *a, const CsStmt *b, GString *why)
{
  if (a->kind != b->kind)
    return differ (why, "statement kinds differ (%d vs %d)", a->kind, b->kind);
  switch (a->kind)
    {
    case CS_STMT_CALL:
      if (g_strcmp0 (a->callee, b->callee) != 0)
        return differ (why, "callee %s vs %s", a->callee, b->callee);
      if (a->op != b->op)
        return differ (why, "op entries differ for %s", a->callee);
      if (a->n_args != b->n_args)
        return differ (why, "%s: %u vs %u arguments", a->callee, a->n_args, b->n_args);
      for (guint i = 0; i < a->n_args; i++)
        {
          char what[64];
          if (g_strcmp0 (a->args[i].name, b->args[i].name) != 0)
            return differ (why, "%s: argument %u keyword %s vs %s", a->callee, i,
                           a->args[i].name ? a->args[i].name : "(positional)",
                           b->args[i].name ? b->args[i].name : "(positional)");
          g_snprintf (what, sizeof what, "argument %u", i);
          if (!value_check (a->args[i].value, b->args[i].value, why, what))
            return FALSE;
        }
      if (!value_check (a->out, b->out, why, "target"))
        return FALSE;
      if (a->type_comment != b->type_comment)
        return differ (why, "type comment style %d vs %d", a->type_comment, b->type_comment);
      if (g_strcmp0 (a->type_comment_raw, b->type_comment_raw) != 0)
        return differ (why, "type comment \"%s\" vs \"%s\"", a->type_comment_raw ? a->type_comment_raw : "",
                       b->type_comment_raw ? b->type_comment_raw : "");
      break;
    case CS_STMT_UNPACK:
      if (g_strcmp0 (pname (a->source), pname (b->source)) != 0)
        return differ (why, "unpack source %s vs %s", pname (a->source), pname (b->source));
      if (a->n_targets != b->n_targets)
        return differ (why, "unpack of %s: %u vs %u targets", pname (a->source), a->n_targets, b->n_targets);
      for (guint i = 0; i < a->n_targets; i++)
        if (!value_check (a->targets[i], b->targets[i], why, "unpack target"))
          return FALSE;
      if (a->n_targets > 0 && a->unpack_style != b->unpack_style)
        return differ (why, "unpack style %d vs %d", a->unpack_style, b->unpack_style);
      break;
    case CS_STMT_ANNASSIGN:
      if (!value_check (a->out, b->out, why, "annotated target")
          || !value_check (a->value, b->value, why, "annotated value"))
        return FALSE;
      if (g_strcmp0 (a->type_comment_raw, b->type_comment_raw) != 0)
        return differ (why, "annotation type differs");
      break;
    case CS_STMT_DEL:
      if (a->n_names != b->n_names || a->del_brackets != b->del_brackets)
        return differ (why, "del of %u vs %u names", a->n_names, b->n_names);
      for (guint i = 0; i < a->n_names; i++)
        if (strcmp (a->names[i]->name, b->names[i]->name) != 0)
          return differ (why, "del %s vs %s", a->names[i]->name, b->names[i]->name);
      break;
    case CS_STMT_RETURN:
      if (a->return_bare != b->return_bare)
        return differ (why, "return value parenthesised differently");
      if (!value_check (a->value, b->value, why, "return value"))
        return FALSE;
      break;
    case CS_STMT_COMMENT:
      if (a->comment_kind != b->comment_kind)
        return differ (why, "comment kinds %d vs %d", a->comment_kind, b->comment_kind);
      if (g_strcmp0 (a->text, b->text) != 0)
        return differ (why, "comment \"%s\" vs \"%s\"", a->text ? a->text : "", b->text ? b->text : "");
      if (g_strcmp0 (pname (a->annotated), pname (b->annotated)) != 0)
        return differ (why, "comment names %s vs %s", pname (a->annotated), pname (b->annotated));
      break;
    case CS_STMT_BLANK:
      if (g_strcmp0 (a->text, b->text) != 0)
        return differ (why, "blank lines differ in whitespace");
      break;
    default:
      break;
    }
  if (a->n_subs != b->n_subs)
    return differ (why, "%u vs %u subsymbols", a->n_subs, b->n_subs);
  for (guint i = 0; i < a->n_subs; i++)
    if (!cs_stmt_equal (a->subs[i], b->subs[i], why))
      {
        if (why)
          {
            g_autofree char *where = g_strdup_printf ("subsymbol %u: ", i);
            g_string_prepend (why, where);
          }
        return FALSE;
      }
  return TRUE;
}

static gboolean
strv_equal (const char **a, guint na, const char **b, guint nb, GString *why, const char *what)
{
  if (na != nb)
    return differ (why, "%u vs %u %s", na, nb, what);
  for (guint i = 0; i < na; i++)
    if (strcmp (a[i], b[i]) != 0)
      return differ (why, "%s %u: \"%s\" vs \"%s\"", what, i, a[i], b[i]);
  return TRUE;
}

static gboolean
proxy_equal (const CsProxy *a, const CsProxy *b, GString *why)
{
  if (a->kind != b->kind || a->typed != b->typed || a->future != b->future
      || g_strcmp0 (a->type_raw, b->type_raw) != 0)
    return differ (why, "proxy %s: types differ", a->name);
  if (a->kind == CS_PROXY_TENSOR && a->typed)
    {
      if (a->dtype != b->dtype || a->rank != b->rank || !cs_device_equal (&a->device, &b->device))
        return differ (why, "proxy %s: tensor dtype, rank or device differ", a->name);
      for (guint i = 0; i < a->rank; i++)
        if (a->shape[i] != b->shape[i])
          return differ (why, "proxy %s: dim %u is %" G_GINT64_FORMAT " vs %" G_GINT64_FORMAT,
                         a->name, i, a->shape[i], b->shape[i]);
    }
  if (a->kind == CS_PROXY_NUMBER)
    {
      if (a->dtype != b->dtype || a->has_value != b->has_value
          || (a->has_value && !cs_value_equal_strict (a->value, b->value)))
        return differ (why, "proxy %s: number type or value differ", a->name);
    }
  return TRUE;
}

/**
 * cs_trace_equal:
 * @a: a trace
 * @b: another trace
 * @why_not: (nullable): receives a description of the first difference
 *
 * See cs-compare.h.
 * Returns: %TRUE if equal
 */
gboolean
cs_trace_equal (const CsTrace *a, const CsTrace *b, GString *why)
{
  GHashTableIter it;
  g_autoptr(GHashTable) pa_all = NULL;
  g_autoptr(GHashTable) pb_all = NULL;
  gpointer key, val;

  g_return_val_if_fail (a != NULL && b != NULL, FALSE);
  if (!strv_equal (a->leading, a->n_leading, b->leading, b->n_leading, why, "leading comment lines"))
    return FALSE;
  if (g_strcmp0 (a->provenance, b->provenance) != 0)
    return differ (why, "provenance \"%s\" vs \"%s\"", a->provenance ? a->provenance : "",
                   b->provenance ? b->provenance : "");
  if (!strv_equal (a->imports, a->n_imports, b->imports, b->n_imports, why, "imports")
      || !strv_equal (a->decorators, a->n_decorators, b->decorators, b->n_decorators, why, "decorators"))
    return FALSE;
  if (!a->blank_after_imports != !b->blank_after_imports)
    return differ (why, "blank line after the imports differs");
  if (!a->has_signature != !b->has_signature || g_strcmp0 (a->name, b->name) != 0)
    return differ (why, "signature name %s vs %s", a->name ? a->name : "-", b->name ? b->name : "-");
  if (a->n_params != b->n_params)
    return differ (why, "%u vs %u parameters", a->n_params, b->n_params);
  for (guint i = 0; i < a->n_params; i++)
    if (a->params[i].kind != b->params[i].kind
        || g_strcmp0 (a->params[i].name, b->params[i].name) != 0
        || !cs_value_equal_strict (a->params[i].dflt, b->params[i].dflt))
      return differ (why, "parameter %u differs", i);
  if (a->n_stmts != b->n_stmts)
    return differ (why, "%u vs %u statements", a->n_stmts, b->n_stmts);
  for (guint i = 0; i < a->n_stmts; i++)
    {
      GString *sub = why ? g_string_new (NULL) : NULL;
      if (!cs_stmt_equal (a->stmts[i], b->stmts[i], sub))
        {
          if (why)
            {
              g_string_append_printf (why, "statement %u (line %u vs %u): %s", i, a->stmts[i]->line,
                                      b->stmts[i]->line, sub->str);
              g_string_free (sub, TRUE);
            }
          return FALSE;
        }
      if (sub)
        g_string_free (sub, TRUE);
    }
  pa_all = cs_trace_dup_proxies (a);
  pb_all = cs_trace_dup_proxies (b);
  if (g_hash_table_size (pa_all) != g_hash_table_size (pb_all))
    return differ (why, "%u vs %u proxies", g_hash_table_size (pa_all), g_hash_table_size (pb_all));
  g_hash_table_iter_init (&it, pa_all);
  while (g_hash_table_iter_next (&it, &key, &val))
    {
      const CsProxy *pb = g_hash_table_lookup (pb_all, key);
      if (pb == NULL)
        return differ (why, "proxy %s missing in the second trace", (const char *) key);
      if (!proxy_equal (val, pb, why))
        return FALSE;
    }
  return TRUE;
}

/* ---- accuracy --------------------------------------------------------------------------- */

void
cs_accuracy_rule (CsDtype dtype, int64_t numel, gboolean training, CsAccuracyRule *rule)
{
  gboolean low = dtype == CS_DTYPE_BF16 || dtype == CS_DTYPE_F16 || cs_dtype_is_fp8 (dtype);

  g_return_if_fail (rule != NULL);
  if (!cs_dtype_is_float (dtype))
    {
      rule->k = rule->tol = rule->atol = 0;
      return;
    }
  /* same(): multiplier 3 for float16/bfloat16 results, else 2; 3 below 1000 elements */
  rule->k = low || numel < 1000 ? 3.0 : 2.0;
  /* torchbench.py: 1e-3 under --float16/--amp and for training on CUDA, else 1e-4 */
  rule->tol = low || training ? 1e-3 : 1e-4;
  rule->atol = rule->tol / 10.0;
}

/* @v rounded to nearest even in @dtype (the value a run storing @dtype would hold at best). */
static double
round_to_dtype (CsDtype dtype, double v)
{
  switch (dtype)
    {
    case CS_DTYPE_BF16: return cs_half_bf16_to_f32 (cs_half_bf16_from_f64 (v));
    case CS_DTYPE_F16: return cs_half_f16_to_f32 (cs_half_f16_from_f64 (v));
    case CS_DTYPE_F32: return (float) v;
    case CS_DTYPE_F8_E5M2: case CS_DTYPE_F8_E5M2FNUZ:
    case CS_DTYPE_F8_E4M3FN: case CS_DTYPE_F8_E4M3FNUZ:
      return cs_half_fp8_to_f64 (dtype, cs_half_fp8_from_f64 (dtype, v));
    default:
      return v;
    }
}

/* Two non-finite values agree: both NaN, or the same infinity. */
static gboolean
nonfinite_agree (double a, double b)
{
  return (isnan (a) && isnan (b)) || (isinf (a) && a == b);
}

void
cs_accuracy_judge (const CsTensor *x, const CsTensor *ref, const CsTensor *f64,
                   const CsAccuracyRule *rule, CsAccuracy *acc)
{
  double se = 0, sr = 0, sf = 0;
  gboolean mismatch_nan = FALSE, is_float;
  int64_t n;

  g_return_if_fail (x != NULL && f64 != NULL && acc != NULL);
  memset (acc, 0, sizeof *acc);
  n = MIN (x->numel, f64->numel);
  if (ref != NULL)
    n = MIN (n, ref->numel);
  if (rule != NULL)
    acc->rule = *rule;
  else
    cs_accuracy_rule (x->dtype, x->numel, TRUE, &acc->rule);
  acc->ref_kind = ref != NULL ? CS_ACCURACY_REF_EXACT : CS_ACCURACY_REF_FLOOR;
  acc->n = x->numel;
  acc->allclose = TRUE;
  is_float = cs_dtype_is_float (x->dtype);

  for (int64_t i = 0; i < n; i++)
    {
      double v = cs_tensor_get_f64 (x, i), t = cs_tensor_get_f64 (f64, i);
      double r = ref != NULL ? cs_tensor_get_f64 (ref, i) : (is_float ? round_to_dtype (x->dtype, t) : t);
      /* without a reference run the truth says where non-finite values belong */
      double rn = ref != NULL ? r : t;
      double d;

      if (!isfinite (v) || !isfinite (rn))
        {
          if (nonfinite_agree (v, rn))
            acc->n_nonfinite++;
          else
            {
              acc->n_nonfinite_mismatch++;
              mismatch_nan |= isnan (v) || isnan (rn);
            }
          continue;
        }
      if (!isfinite (t) || !isfinite (r))
        continue;   /* the truth (or its rounding) overflowed where both runs are finite */
      acc->n_compared++;
      d = v - t;
      se += d * d;
      sr += (r - t) * (r - t);
      sf += t * t;
      acc->max_abs = MAX (acc->max_abs, fabs (d));
      if (!(fabs (v - r) <= acc->rule.tol + acc->rule.tol * fabs (r)))
        acc->allclose = FALSE;
    }
  if (x->numel != f64->numel || (ref != NULL && ref->numel != x->numel))
    {
      acc->n_nonfinite_mismatch += ABS (x->numel - n);   /* missing elements never agree */
      mismatch_nan = TRUE;
    }

  if (acc->n_compared > 0)
    {
      acc->err = sqrt (se / (double) acc->n_compared);
      acc->ref_err = sqrt (sr / (double) acc->n_compared);
      acc->rms_f64 = sqrt (sf / (double) acc->n_compared);
    }
  acc->ratio = acc->ref_err > 0 ? acc->err / acc->ref_err : (acc->err > 0 ? INFINITY : 0.0);
  acc->bound = acc->rule.k * acc->ref_err + acc->rule.atol;

  if (acc->n_nonfinite_mismatch > 0)
    {
      acc->err = acc->max_abs = acc->ratio = mismatch_nan ? NAN : INFINITY;
      acc->allclose = FALSE;
      acc->pass = FALSE;
    }
  else if (!is_float)
    acc->pass = ref != NULL ? acc->allclose : acc->max_abs == 0;
  else
    acc->pass = acc->allclose || acc->err <= acc->bound;
}

double
cs_accuracy_margin (const CsAccuracy *acc)
{
  if (acc->n_nonfinite_mismatch > 0 || (!acc->pass && acc->rule.k == 0))
    return INFINITY;
  if (acc->bound > 0)
    return acc->err / acc->bound;
  return acc->err > 0 ? INFINITY : 0.0;
}

const char *
cs_accuracy_ref_kind_name (CsAccuracyRefKind kind)
{
  return kind == CS_ACCURACY_REF_EXACT ? "exact" : "floor";
}
