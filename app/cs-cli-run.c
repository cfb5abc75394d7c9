/* cs-cli-run.c: `castscope-cli run FILE --device cpu`: one training step (forward, then
 * backward when there is one) on the CPU reference executor (core/cs-ref.h), in exact mode and
 * in f64 mode, with every output's error against the f64 run.
 *
 * The file goes through the pipeline under --policy (cs_cli_run_pipeline); a trace that is
 * already final runs as it is, with its backward taken from the same file (a `backward_fn`
 * trace) or from a sibling `*_bwd.txt` beside a `*_fwd.txt` (said on stderr, since stats and
 * transform of the file alone report no backward).
 */
#include "cs-config.h"

#include "cs-cli.h"
#include "cs-cli-policy.h"
#include "cs-cli-progress.h"
#include "cs-cli-run-cuda.h"

#include "cs-compare.h"
#include "cs-lens.h"
#include "cs-parse.h"
#include "cs-pipeline.h"
#include "cs-ref.h"
#include "cs-ref-plan.h"
#include "cs-tensor.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#if CS_HAVE_JSON
#include <json-glib/json-glib.h>
#endif

/* Error of one output against the f64 truth. */
typedef struct
{
  char      *name;      /* proxy name ("" for literals) */
  CsTensor  *exact;     /* exact-mode value (trace dtype) */
  CsAccuracy acc;       /* exact vs f64, reference error = the rounding floor of the dtype */
  guint      order;     /* position in the trace's return (ties of the sort keep it) */
  CsLensRange range;    /* dynamic range of the f64 (true) values against f16, bf16, fp8 */
  char      *grad_of;   /* backward: the forward input this is the gradient of, or NULL */
} RunOutput;

static void
run_output_free (RunOutput *o)
{
  g_free (o->name);
  g_free (o->grad_of);
  if (o->exact)
    cs_tensor_unref (o->exact);
  g_free (o);
}

/* The exact run's accuracy against f64.  The CPU reference has no second run to judge it by,
 * so the reference error is the rounding floor (f64 rounded once to the output dtype): ratio
 * is how many roundings' worth of error the trace accumulated, and the verdict says whether
 * that is within PyTorch's k (cs_accuracy_rule) -- a lens, not a check. */
static void
measure (RunOutput *o, const CsTensor *e, const CsTensor *t, gboolean training)
{
  CsAccuracyRule rule;

  cs_accuracy_rule (e->dtype, e->numel, training, &rule);
  cs_accuracy_judge (e, NULL, t, &rule, &o->acc);
}

/* Worst first: largest cs_accuracy_margin(), then trace order. */
static int
output_worst_first (gconstpointer a, gconstpointer b)
{
  const RunOutput *x = *(const RunOutput * const *) a, *y = *(const RunOutput * const *) b;
  double mx = cs_accuracy_margin (&x->acc), my = cs_accuracy_margin (&y->acc);

  if (isnan (mx) != isnan (my))
    return isnan (mx) ? -1 : 1;
  if (mx != my && !isnan (mx))
    return mx > my ? -1 : 1;
  return x->order < y->order ? -1 : x->order > y->order;
}

/* The CPU report's verdict word: "ok", "above" (error past k times the floor), "MISMATCH"
 * (NaN/inf where f64 has none, or the reverse). */
static const char *
lens_verdict (const CsAccuracy *a)
{
  return a->n_nonfinite_mismatch ? "MISMATCH" : a->pass ? "ok" : "above";
}

/* "1.234e-03", "inf", "nan"; "-" for a finite measure over no element (every element of @a
 * non-finite): never a zero error for a tensor of NaNs. */
static char *
fmt_err (const CsAccuracy *a, double v)
{
  if (a->n_compared == 0 && a->n > 0 && isfinite (v))
    return g_strdup ("-");
  return g_strdup_printf ("%.3e", v);
}

/* The return dict of a forward (`return {'output': ..., 'flat_args': [...]}, (saved...)`),
 * or NULL. */
static const CsValue *
return_dict (const CsTrace *trace)
{
  const CsStmt *ret = cs_trace_get_return (trace);
  const CsValue *v = ret ? ret->value : NULL;

  while (v && (v->kind == CS_VALUE_TUPLE || v->kind == CS_VALUE_LIST) && v->u.seq.n > 0
         && v->u.seq.items[0]->kind != CS_VALUE_PROXY)
    v = v->u.seq.items[0];
  return v && v->kind == CS_VALUE_DICT ? v : NULL;
}

/* The flat_args names of a forward, in order (element-type utf8, borrowed), or NULL. */
static GPtrArray *
flat_arg_names (const CsTrace *trace)
{
  const CsValue *d = trace ? return_dict (trace) : NULL;

  for (guint i = 0; d && i + 1 < d->u.seq.n; i += 2)
    {
      const CsValue *k = d->u.seq.items[i], *v = d->u.seq.items[i + 1];

      if (k->kind == CS_VALUE_STRING && k->u.s && strcmp (k->u.s, "flat_args") == 0
          && (v->kind == CS_VALUE_LIST || v->kind == CS_VALUE_TUPLE))
        {
          GPtrArray *names = g_ptr_array_new ();
          for (guint j = 0; j < v->u.seq.n; j++)
            g_ptr_array_add (names, (gpointer) (v->u.seq.items[j]->kind == CS_VALUE_PROXY
                                                ? v->u.seq.items[j]->u.proxy->name : "?"));
          return names;
        }
    }
  return NULL;
}

/* Names of the proxies under the 'output' key of a forward's return dict
 * (`return {'output': ..., 'flat_args': ...}, (saved...)`), or NULL when the return has no
 * such dict (then every output is primary). */
static GHashTable *
primary_output_names (const CsTrace *trace)
{
  const CsValue *v = return_dict (trace);
  GHashTable *names = NULL;

  if (v == NULL)
    return NULL;
  for (guint i = 0; i + 1 < v->u.seq.n; i += 2)
    {
      const CsValue *k = v->u.seq.items[i];

      if (k->kind == CS_VALUE_STRING && k->u.s && strcmp (k->u.s, "output") == 0)
        {
          g_autoptr (GPtrArray) ps = g_ptr_array_new ();

          names = g_hash_table_new (g_str_hash, g_str_equal);
          cs_value_collect_proxies (v->u.seq.items[i + 1], ps);
          for (guint j = 0; j < ps->len; j++)
            g_hash_table_add (names, (gpointer) ((CsProxy *) g_ptr_array_index (ps, j))->name);
        }
    }
  return names;
}

static gboolean
name_is_leaf (GPtrArray *leaves, const char *name)
{
  for (guint i = 0; i < leaves->len; i++)
    if (strcmp (((CsProxy *) g_ptr_array_index (leaves, i))->name, name) == 0)
      return TRUE;
  return FALSE;
}

/* A value for leaf @p: DIR/<name>.npy when --inputs has it, else seeded random. */
static CsTensor *
leaf_value (const CsTrace *trace, const CsProxy *p, const char *inputs_dir, guint64 seed,
            GError **error)
{
  if (inputs_dir)
    {
      g_autofree char *file = g_strconcat (p->name, ".npy", NULL);
      g_autofree char *path = g_build_filename (inputs_dir, file, NULL);

      if (g_file_test (path, G_FILE_TEST_EXISTS))
        {
          g_autoptr (CsTensor) t = cs_tensor_load_npy (path, error);

          if (t == NULL)
            return NULL;
          if (p->typed && p->kind == CS_PROXY_TENSOR)
            {
              if (!cs_tensor_same_shape (t, p->shape, p->rank))
                {
                  g_autofree char *want = cs_proxy_type_string (p);
                  g_autofree char *got = cs_tensor_type_string (t);
                  g_set_error (error, CS_REF_ERROR, CS_REF_ERROR_INPUT,
                               "%s holds %s but %s is \"%s\"", path, got, p->name, want);
                  return NULL;
                }
              if (t->dtype != p->dtype)
                return cs_tensor_convert (t, p->dtype, error);
            }
          return g_steal_pointer (&t);
        }
    }
  return cs_ref_random_input (trace, p, seed, error);
}

typedef struct
{
  const char *label;        /* "forward" / "backward" */
  const char *trace_name;   /* computation, backward_fn */
  GPtrArray  *outputs;      /* RunOutput* */
  GHashTable *primary;      /* names under 'output' (forward), or NULL = all primary */
  double      exact_ms;     /* wall time of the exact-mode run */
  double      f64_ms;       /* wall time of the f64 run */
  const RunOutput *first_divergence; /* the output made earliest in the trace whose error is
                                        past k * ref_err + atol (verdict "above"), or NULL */
  guint       first_line;   /* its producing statement's source line (0 = unknown) */
} RunReport;

static void first_divergence (const CsTrace *trace, RunReport *rep);

/* The progress line of the runs (stderr on a terminal; silent otherwise), and what it says. */
static CsCliProgress *run_progress;

typedef struct
{
  const char *trace;        /* "forward" / "backward" */
  const char *mode;         /* "trace dtypes" / "f64" */
} RunProgressLabel;

static void
ref_progress_cb (guint done, guint total, gpointer data)
{
  const RunProgressLabel *l = data;

  cs_cli_progress_set (run_progress, "run: CPU reference, %s in %s: statement %u of %u",
                       l->trace, l->mode, MIN (done + 1, total), total);
}

/* Runs @trace in both modes on @env_exact / @env_f64 (leaf values by name; missing leaves are
 * made and added to both) and fills @rep.  @ret_exact/@ret_f64 receive the returned values by
 * name (for the backward). */
static gboolean
run_both (const CsTrace *trace, GHashTable *env_exact, GHashTable *env_f64,
          const char *inputs_dir, guint64 seed, GHashTable *ret_exact, GHashTable *ret_f64,
          GPtrArray *grad_of, gboolean training, RunReport *rep, GError **error)
{
  g_autoptr (GPtrArray) leaves = cs_ref_dup_leaf_inputs (trace);
  g_autoptr (GPtrArray) oe = NULL, of = NULL, ne = NULL;
  g_autoptr (GHashTable) seen = g_hash_table_new (g_str_hash, g_str_equal);
  gint64 t0;

  for (guint i = 0; i < leaves->len; i++)
    {
      const CsProxy *p = g_ptr_array_index (leaves, i);

      if (!g_hash_table_contains (env_exact, p->name))
        {
          g_autoptr (CsTensor) v = leaf_value (trace, p, inputs_dir, seed, error);

          if (v == NULL)
            return FALSE;
          cs_ref_env_insert (env_exact, p->name, v);
          cs_ref_env_insert (env_f64, p->name, v);
        }
    }

  t0 = g_get_monotonic_time ();
  {
    RunProgressLabel l = { rep->label, "trace dtypes" };
    CsRefRunOptions ro = { NULL, ref_progress_cb, &l, 0 };

    if (!cs_ref_run_env_full (trace, env_exact, CS_REF_EXACT, seed, &ro, &oe, &ne, ret_exact,
                              error))
      return FALSE;
  }
  rep->exact_ms = (g_get_monotonic_time () - t0) / 1000.0;
  t0 = g_get_monotonic_time ();
  {
    RunProgressLabel l = { rep->label, "f64" };
    CsRefRunOptions ro = { NULL, ref_progress_cb, &l, 0 };

    if (!cs_ref_run_env_full (trace, env_f64, CS_REF_F64, seed, &ro, &of, NULL, ret_f64, error))
      return FALSE;
  }
  rep->f64_ms = (g_get_monotonic_time () - t0) / 1000.0;

  rep->trace_name = trace->name ? trace->name : "";
  rep->primary = primary_output_names (trace);
  rep->outputs = g_ptr_array_new_with_free_func ((GDestroyNotify) run_output_free);
  for (guint i = 0; i < oe->len; i++)
    {
      CsTensor *e = g_ptr_array_index (oe, i), *f = g_ptr_array_index (of, i);
      const char *name = g_ptr_array_index (ne, i);
      RunOutput *o;

      if (e == NULL || f == NULL)
        continue;
      /* skip the inputs echoed back (flat_args, saved inputs) and repeats */
      if (name[0] && (name_is_leaf (leaves, name) || g_hash_table_contains (seen, name)))
        continue;
      if (name[0])
        g_hash_table_add (seen, (gpointer) name);
      o = g_new0 (RunOutput, 1);
      o->name = g_strdup (name[0] ? name : "(literal)");
      if (grad_of && grad_of->len == oe->len)
        o->grad_of = g_strdup (g_ptr_array_index (grad_of, i));
      o->exact = cs_tensor_ref (e);
      o->order = rep->outputs->len;
      measure (o, e, f, training);
      cs_lens_range (f, &o->range);
      g_ptr_array_add (rep->outputs, o);
    }
  g_ptr_array_sort (rep->outputs, output_worst_first);
  first_divergence (trace, rep);
  return TRUE;
}

/* The precision lens's "first divergence" (core/cs-lens.h): of the outputs whose error is past
 * PyTorch's bound against the rounding floor, the one whose producing statement comes first. */
static void
first_divergence (const CsTrace *trace, RunReport *rep)
{
  g_autofree CsLensItem *items = g_new0 (CsLensItem, rep->outputs->len + 1);
  gint at;

  for (guint i = 0; i < rep->outputs->len; i++)
    {
      const RunOutput *o = g_ptr_array_index (rep->outputs, i);

      items[i].name = o->name;
      items[i].acc = &o->acc;
    }
  at = cs_lens_first_divergence (trace, items, rep->outputs->len, &rep->first_line);
  rep->first_divergence = at >= 0 ? g_ptr_array_index (rep->outputs, at) : NULL;
}

static gboolean
is_primary (const RunReport *rep, const RunOutput *o)
{
  return rep->primary == NULL || g_hash_table_contains (rep->primary, o->name);
}

static void
print_report (const RunReport *rep, gboolean all)
{
  const RunOutput *worst = NULL;
  guint n_saved = 0;

  printf ("%s (%s): exact %.1f ms, f64 %.1f ms\n", rep->label, rep->trace_name, rep->exact_ms,
          rep->f64_ms);
  for (guint i = 0; i < rep->outputs->len; i++)
    {
      const RunOutput *o = g_ptr_array_index (rep->outputs, i);
      const CsAccuracy *a = &o->acc;
      g_autofree char *ty = NULL, *e = NULL, *r = NULL, *ma = NULL, *q = NULL, *l2 = NULL;

      if (!all && !is_primary (rep, o))
        {
          n_saved++;
          if (worst == NULL)
            worst = o;   /* sorted worst first */
          continue;
        }
      ty = cs_tensor_type_string (o->exact);
      e = fmt_err (a, a->err);
      r = fmt_err (a, a->ref_err);
      ma = fmt_err (a, a->max_abs);
      q = a->n_compared == 0 && a->n > 0 && isfinite (a->ratio) ? g_strdup ("-")
                                                                 : g_strdup_printf ("%.3g", a->ratio);
      l2 = fmt_err (a, a->rms_f64 > 0 ? a->err / a->rms_f64 : a->err);
      printf ("  %-12s %-22s err %s  ref_err %s (floor)  ratio %-8s %-8s max_abs_err %s  rel_l2_err %s",
              o->name, ty, e, r, q, lens_verdict (a), ma, l2);
      if (a->n_nonfinite)
        printf ("  non-finite %" G_GINT64_FORMAT " (as in f64)", a->n_nonfinite);
      if (a->n_nonfinite_mismatch)
        printf ("  MISMATCH: %" G_GINT64_FORMAT " NaN/inf elements disagree with f64",
                a->n_nonfinite_mismatch);
      if (o->grad_of)
        printf ("  (grad of %s)", o->grad_of);
      {
        g_autofree char *rs = cs_lens_range_summary (&o->range);

        printf ("  amax %.3e", o->range.amax);
        if (rs[0])
          printf ("  range: %s", rs);
      }
      printf ("\n");
    }
  if (rep->first_divergence)
    {
      const RunOutput *d = rep->first_divergence;

      printf ("  first divergence: %s", d->name);
      if (rep->first_line)
        printf (" (line %u)", rep->first_line);
      printf (", ratio %.3g: the earliest output whose error is past k * ref_err + atol\n",
              d->acc.ratio);
    }
  if (n_saved)
    {
      g_autofree char *e = fmt_err (&worst->acc, worst->acc.err);

      printf ("  saved for backward: %u more output%s, worst %s (err %s, ratio %.3g, %s); "
              "--all-outputs lists %s\n", n_saved, n_saved == 1 ? "" : "s", worst->name, e,
              worst->acc.ratio, lens_verdict (&worst->acc), n_saved == 1 ? "it" : "them");
    }
}

#if CS_HAVE_JSON
/* JSON has no inf or NaN: a non-finite error is written as the string "inf" or "nan"; a
 * finite measure over no element (all non-finite, agreeing) as null. */
static void
json_add_measure (JsonBuilder *b, const CsAccuracy *a, double v)
{
  if (a->n_compared == 0 && a->n > 0 && isfinite (v))
    json_builder_add_null_value (b);
  else if (isnan (v))
    json_builder_add_string_value (b, "nan");
  else if (isinf (v))
    json_builder_add_string_value (b, "inf");
  else
    json_builder_add_double_value (b, v);
}

/* The "range" member of an output (core/cs-lens.h): writes {amax, min_nonzero, zeros, non_finite, formats: {f16|bf16|e4m3|e5m2: {overflow,
 * flush_to_zero, subnormal, headroom, overflow_risk, underflow_risk}}}; headroom is null for an
 * all-zero tensor (infinite). */
static void
json_range (JsonBuilder *b, const CsLensRange *r)
{
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "amax");
  json_builder_add_double_value (b, r->amax);
  json_builder_set_member_name (b, "min_nonzero");
  json_builder_add_double_value (b, r->min_nonzero);
  json_builder_set_member_name (b, "zeros");
  json_builder_add_int_value (b, r->n_zero);
  json_builder_set_member_name (b, "non_finite");
  json_builder_add_int_value (b, r->n_nonfinite);
  json_builder_set_member_name (b, "formats");
  json_builder_begin_object (b);
  for (guint f = 0; f < CS_LENS_N_FMTS; f++)
    {
      const CsLensFit *fit = &r->fit[f];

      json_builder_set_member_name (b, cs_lens_format_name (f));
      json_builder_begin_object (b);
      json_builder_set_member_name (b, "overflow");
      json_builder_add_int_value (b, fit->n_overflow);
      json_builder_set_member_name (b, "flush_to_zero");
      json_builder_add_int_value (b, fit->n_flush);
      json_builder_set_member_name (b, "subnormal");
      json_builder_add_int_value (b, fit->n_subnormal);
      json_builder_set_member_name (b, "headroom");
      if (isfinite (fit->headroom))
        json_builder_add_double_value (b, fit->headroom);
      else
        json_builder_add_null_value (b);
      json_builder_set_member_name (b, "overflow_risk");
      json_builder_add_boolean_value (b, fit->overflow_risk);
      json_builder_set_member_name (b, "underflow_risk");
      json_builder_add_boolean_value (b, fit->underflow_risk);
      json_builder_end_object (b);
    }
  json_builder_end_object (b);
  json_builder_end_object (b);
}

static void
json_report (JsonBuilder *b, const RunReport *rep)
{
  json_builder_set_member_name (b, rep->label);
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "trace");
  json_builder_add_string_value (b, rep->trace_name);
  json_builder_set_member_name (b, "exact_ms");
  json_builder_add_double_value (b, rep->exact_ms);
  json_builder_set_member_name (b, "f64_ms");
  json_builder_add_double_value (b, rep->f64_ms);
  json_builder_set_member_name (b, "first_divergence");
  if (rep->first_divergence)
    {
      json_builder_begin_object (b);
      json_builder_set_member_name (b, "name");
      json_builder_add_string_value (b, rep->first_divergence->name);
      json_builder_set_member_name (b, "line");
      json_builder_add_int_value (b, rep->first_line);
      json_builder_set_member_name (b, "ratio");
      json_add_measure (b, &rep->first_divergence->acc, rep->first_divergence->acc.ratio);
      json_builder_end_object (b);
    }
  else
    json_builder_add_null_value (b);
  json_builder_set_member_name (b, "outputs");
  json_builder_begin_array (b);
  for (guint i = 0; i < rep->outputs->len; i++)
    {
      const RunOutput *o = g_ptr_array_index (rep->outputs, i);

      json_builder_begin_object (b);
      json_builder_set_member_name (b, "name");
      json_builder_add_string_value (b, o->name);
      json_builder_set_member_name (b, "dtype");
      json_builder_add_string_value (b, cs_dtype_short_name (o->exact->dtype));
      json_builder_set_member_name (b, "shape");
      json_builder_begin_array (b);
      for (guint d = 0; d < o->exact->rank; d++)
        json_builder_add_int_value (b, o->exact->shape[d]);
      json_builder_end_array (b);
      json_builder_set_member_name (b, "err");
      json_add_measure (b, &o->acc, o->acc.err);
      json_builder_set_member_name (b, "ref_err");
      json_add_measure (b, &o->acc, o->acc.ref_err);
      json_builder_set_member_name (b, "ref");
      json_builder_add_string_value (b, cs_accuracy_ref_kind_name (o->acc.ref_kind));
      json_builder_set_member_name (b, "ratio");
      json_add_measure (b, &o->acc, o->acc.ratio);
      json_builder_set_member_name (b, "k");
      json_builder_add_double_value (b, o->acc.rule.k);
      json_builder_set_member_name (b, "atol");
      json_builder_add_double_value (b, o->acc.rule.atol);
      json_builder_set_member_name (b, "verdict");
      json_builder_add_string_value (b, o->acc.n_nonfinite_mismatch ? "mismatch"
                                        : o->acc.pass ? "ok" : "above");
      json_builder_set_member_name (b, "max_abs_err");
      json_add_measure (b, &o->acc, o->acc.max_abs);
      json_builder_set_member_name (b, "rel_l2_err");
      json_add_measure (b, &o->acc, o->acc.rms_f64 > 0 ? o->acc.err / o->acc.rms_f64 : o->acc.err);
      json_builder_set_member_name (b, "non_finite");
      json_builder_add_int_value (b, o->acc.n_nonfinite);
      json_builder_set_member_name (b, "non_finite_mismatch");
      json_builder_add_int_value (b, o->acc.n_nonfinite_mismatch);
      if (o->grad_of)
        {
          json_builder_set_member_name (b, "grad_of");
          json_builder_add_string_value (b, o->grad_of);
        }
      json_builder_set_member_name (b, "range");
      json_range (b, &o->range);
      json_builder_set_member_name (b, "saved_for_backward");
      json_builder_add_boolean_value (b, !is_primary (rep, o));
      json_builder_end_object (b);
    }
  json_builder_end_array (b);
  json_builder_end_object (b);
}
#endif

static gboolean
save_outputs (const char *dir, const RunReport *rep, GError **error)
{
  if (g_mkdir_with_parents (dir, 0755) != 0)
    {
      g_set_error (error, CS_TENSOR_ERROR, CS_TENSOR_ERROR_IO, "cannot create %s", dir);
      return FALSE;
    }
  for (guint i = 0; i < rep->outputs->len; i++)
    {
      const RunOutput *o = g_ptr_array_index (rep->outputs, i);
      g_autofree char *file = NULL;
      g_autofree char *path = NULL;

      if (!g_regex_match_simple ("^[A-Za-z_][A-Za-z0-9_]*$", o->name, 0, 0))
        continue;   /* names from the trace become file names only when they are identifiers */
      file = g_strconcat (o->name, ".npy", NULL);
      path = g_build_filename (dir, file, NULL);
      if (!cs_tensor_save_npy (o->exact, path, error))
        return FALSE;
    }
  return TRUE;
}

/* The backward for a final forward trace: a `backward_fn` later in the same file, or the
 * first trace of a sibling *_bwd.txt beside a *_fwd.txt (then *@sibling is its path). */
static CsTrace *
find_backward (const char *path, guint index, char **sibling, GError **error)
{
  g_autoptr (CsTraceList) list = NULL;

  list = cs_parse_file (path, error);
  if (list == NULL)
    return NULL;
  for (guint i = index + 1; i < list->traces->len; i++)
    {
      CsTrace *t = g_ptr_array_index (list->traces, i);
      if (t->name && strcmp (t->name, "backward_fn") == 0)
        return cs_trace_ref (t);
    }
  if (g_str_has_suffix (path, "_fwd.txt"))
    {
      g_autofree char *sib = g_strndup (path, strlen (path) - strlen ("_fwd.txt"));
      g_autofree char *bpath = g_strconcat (sib, "_bwd.txt", NULL);
      g_autoptr (CsTraceList) bl = NULL;

      if (!g_file_test (bpath, G_FILE_TEST_EXISTS))
        return NULL;
      bl = cs_parse_file (bpath, error);
      if (bl == NULL)
        return NULL;
      if (bl->traces->len > 0)
        {
          *sibling = g_steal_pointer (&bpath);
          return cs_trace_ref (g_ptr_array_index (bl->traces, 0));
        }
    }
  return NULL;
}

/* --max-memory SIZE (cs_parse_size) */
static guint64 max_memory;
static gboolean max_memory_given;

static gboolean
max_memory_cb (const char *name, const char *value, gpointer data, GError **error)
{
  if (!cs_parse_size (value, &max_memory, error))
    {
      g_prefix_error (error, "%s: ", name);
      return FALSE;
    }
  max_memory_given = TRUE;
  return TRUE;
}

/* --max-gflop N: a number (digits, a fraction, an exponent), said as --max-memory says a bad
 * size, not as GLib's "Cannot parse double value" */
static double max_gflop;

static gboolean
max_gflop_cb (const char *name, const char *value, gpointer data, GError **error)
{
  char *end = NULL;
  double v = g_ascii_strtod (value, &end);

  if (value[0] == '\0' || end == NULL || *end != '\0' || !isfinite (v) || v < 0)
    {
      g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                   "%s: cannot read '%s' as a number of GFLOP (a finite number >= 0: 200, 0.5, "
                   "1e3)", name, value);
      return FALSE;
    }
  max_gflop = v;
  return TRUE;
}

int
cs_cli_cmd_run (int argc, char **argv)
{
  g_auto (GStrv) policy_args = NULL;
  g_autofree char *grad = NULL;
  g_autofree char *device = NULL;
  g_autofree char *inputs_dir = NULL;
  g_autofree char *save_dir = NULL;
  g_autofree char *desc = NULL;
  g_autofree char *pdesc = NULL;
  gboolean json = FALSE, no_backward = FALSE, all_outputs = FALSE;
  gboolean check = FALSE;   /* --device cuda */
  gint iters = 0;           /* --device cuda */
  gint64 seed = 0;
  double est_f1 = 0, est_f2 = 0, est_m1 = 0, est_m2 = 0;   /* cs_ref_estimate of fw, bw */
  g_autofree char *reference = NULL;   /* --device cuda --check */
  gint index = 0;
  g_autoptr (GOptionContext) ctx = NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (CsCliProgress) progress = NULL;   /* before pl: freed after it */
  g_autoptr (CsPipeline) pl = NULL;
  g_autoptr (CsTrace) own_bwd = NULL;
  g_autofree char *sibling = NULL;    /* the *_bwd.txt own_bwd comes from, or NULL */
  const char *no_bwd_why = NULL;      /* why no backward runs (forward only), or NULL */
  g_autoptr (GPtrArray) flat_args = NULL;
  g_autoptr (GHashTable) env_e = cs_ref_env_new ();
  g_autoptr (GHashTable) env_f = cs_ref_env_new ();
  g_autoptr (GHashTable) ret_e = cs_ref_env_new ();
  g_autoptr (GHashTable) ret_f = cs_ref_env_new ();
  RunReport fwd_rep = { "forward", NULL, NULL, NULL, 0, 0 };
  RunReport bwd_rep = { "backward", NULL, NULL, NULL, 0, 0 };
  CsPolicy policy;
  CsTrace *fw, *bw;
  int rc = CS_CLI_EXIT_OK;
  GOptionEntry entries[] = {
    { "device", 'd', 0, G_OPTION_ARG_STRING, &device, "Where to run: cpu (default) or cuda", "cpu|cuda" },
    { "seed", 's', 0, G_OPTION_ARG_INT64, &seed, "Seed for random inputs and random prims (default 0)", "N" },
    { "inputs", 0, 0, G_OPTION_ARG_FILENAME, &inputs_dir, "Read input NAME from DIR/NAME.npy when present (else random)", "DIR" },
    { "save", 0, 0, G_OPTION_ARG_FILENAME, &save_dir, "Write every output (exact mode) to DIR/NAME.npy; bf16 as float32", "DIR" },
    { "json", 'j', 0, G_OPTION_ARG_NONE, &json, "Print one JSON object: {file, device, seed, forward, backward}", NULL },
    { "policy", 'p', 0, G_OPTION_ARG_STRING_ARRAY, &policy_args, "Set a cast policy knob (repeatable)", "KEY=VALUE" },
    { "grad", 'g', 0, G_OPTION_ARG_STRING, &grad, "Inputs that require grad: names, 'auto' (default: float inputs but module buffers, as Thunder), 'all' or 'none'", "A,B|auto|all|none" },
    { "index", 'i', 0, G_OPTION_ARG_INT, &index, "Which trace of the file (default 0)", "N" },
    { "forward-only", 0, 0, G_OPTION_ARG_NONE, &no_backward, "Do not run the backward trace", NULL },
    { "all-outputs", 'a', 0, G_OPTION_ARG_NONE, &all_outputs, "List the tensors saved for backward too (text output)", NULL },
    { "max-gflop", 0, 0, G_OPTION_ARG_CALLBACK, (gpointer) max_gflop_cb, "Refuse steps estimated above this many GFLOP (default 200, about a minute on one core)", "N" },
    { "max-memory", 0, 0, G_OPTION_ARG_CALLBACK, (gpointer) max_memory_cb, "Refuse steps estimated to need more host memory than SIZE (512M, 8G, 1.5GiB or bytes; default 75% of the available memory, see below)", "SIZE" },
    { "check", 0, 0, G_OPTION_ARG_NONE, &check, "With --device cuda: judge every output and gradient against an f64 run as PyTorch's accuracy check does (exit 1 on a failure)", NULL },
    { "reference", 0, 0, G_OPTION_ARG_STRING, &reference, "With --check: where the f64 run comes from: auto (default: the CPU reference when it takes seconds, else the GPU in f64), cpu or gpu", "auto|cpu|gpu" },
    { "iters", 'n', 0, G_OPTION_ARG_INT, &iters, "With --device cuda: time N steps (CUDA-graph GPU time, latency, each region and matmul)", "N" },
    { NULL },
  };

  ctx = cs_cli_option_context_new ("FILE", "run one training step on the CPU reference (exact "
                                   "dtypes and f64) or the GPU (--device cuda) and report each "
                                   "output's error");
  g_option_context_add_main_entries (ctx, entries, NULL);
  desc = g_strconcat ("Random inputs: floats normal(0, 1) scaled by 1/sqrt(last extent) for rank >= 2,\n"
                      "integers in [0, bound) where bound is the extent they index (else 16),\n"
                      "bools a fair coin; cotangents the same way.\n"
                      "Errors (worst first): err is the RMSE of the exact run against the f64 run;\n"
                      "ref_err (floor) the RMSE of the f64 values rounded once to the output dtype;\n"
                      "ratio err / ref_err; ok when err <= k * ref_err + atol with PyTorch's k, atol for\n"
                      "the dtype, or when every element is within allclose(tol) of the reference\n"
                      "(torch._dynamo.utils.same tries that first), above when neither; max_abs_err is\n"
                      "max |exact - f64|, rel_l2_err ||exact - f64|| / ||f64||.  NaN and inf where\n"
                      "f64 has the same are left out (non-finite N); elsewhere they are a MISMATCH\n"
                      "and make the errors nan or inf (JSON: the strings \"nan\" and \"inf\").\n"
                      "With --device cuda --check the GPU's err is judged against the exact run's\n"
                      "(ref exact) where the CPU reference is affordable, else against the floor.\n\n"

                      "Backward: the pipeline's, or for a final forward trace (what Thunder runs)\n"
                      "a backward_fn later in the same file, else the *_bwd.txt beside a\n"
                      "*_fwd.txt (stderr then says \"backward: taken from X_bwd.txt beside it\").\n"
                      "Without one the report says \"forward only: no backward trace\" and why.\n\n"
                      "Limits: before anything is allocated, the step's peak host memory is\n"
                      "estimated from the traces' liveness (8 bytes an element per live value on\n"
                      "the CPU reference, kernel scratch, the returned tensors; with --device\n"
                      "cuda the inputs and one output) and its work in FLOP.  A step over\n"
                      "--max-memory or --max-gflop is refused with both numbers.  SIZE is bytes,\n"
                      "or a number with K, M, G or T (KiB, MB...: all powers of 1024).  The\n"
                      "default memory limit is 75% of the memory available when the run starts:\n"
                      "MemAvailable of /proc/meminfo, or the cgroup's limit minus its usage when\n"
                      "that is smaller.  No limit goes past the machine's memory (MemTotal, or the\n"
                      "cgroup's limit when smaller): a step estimated over it is refused whatever\n"
                      "--max-memory says.\n"
                      "Progress: when stderr is a terminal, one line there names the statement\n"
                      "running; nothing is written when it is not a terminal.\n\n",
                      (pdesc = cs_cli_policy_describe ()), NULL);
  cs_cli_set_help (ctx, desc, CS_CLI_HELP_TRACE);
  max_memory_given = FALSE;
  max_gflop = CS_REF_DEFAULT_MAX_FLOPS / 1e9;
  if (!cs_cli_parse_options (ctx, &argc, &argv))
    return CS_CLI_EXIT_USAGE;
  if (index < 0)
    {
      cs_cli_error ("run: --index must be >= 0");
      return CS_CLI_EXIT_USAGE;
    }
  if (seed < 0)
    {
      cs_cli_error ("run: --seed must be >= 0");
      return CS_CLI_EXIT_USAGE;
    }
  if (argc != 2)
    {
      cs_cli_error ("run: expected one FILE (try --help)");
      return CS_CLI_EXIT_USAGE;
    }
  if (reference && strcmp (reference, "auto") != 0 && strcmp (reference, "cpu") != 0
      && strcmp (reference, "gpu") != 0)
    {
      cs_cli_error ("run: unknown --reference '%s' (auto, cpu or gpu)", reference);
      return CS_CLI_EXIT_USAGE;
    }
  if (device && strcmp (device, "cpu") != 0 && strcmp (device, "cuda") != 0)
    {
      cs_cli_error ("run: unknown device '%s' (cpu or cuda)", device);
      return CS_CLI_EXIT_USAGE;
    }
  if ((check || iters != 0) && !(device && strcmp (device, "cuda") == 0))
    {
      cs_cli_error ("run: --check and --iters need --device cuda (on the CPU every output is "
                    "compared with the f64 reference anyway, and nothing is timed)");
      return CS_CLI_EXIT_USAGE;
    }
  if (reference && !check)
    {
      cs_cli_error ("run: --reference needs --device cuda --check (it picks where the check's "
                    "f64 run comes from; on the CPU the f64 run is always the CPU reference)");
      return CS_CLI_EXIT_USAGE;
    }
  if (iters < 0)
    {
      cs_cli_error ("run: --iters must be >= 0");
      return CS_CLI_EXIT_USAGE;
    }
  if (!cs_cli_policy_from_strv (policy_args, &policy, &error))
    {
      cs_cli_error ("run: %s", error->message);
      return CS_CLI_EXIT_USAGE;
    }
#if !CS_HAVE_JSON
  if (json)
    {
      cs_cli_error ("run: --json needs json-glib, which this build lacks");
      return CS_CLI_EXIT_USAGE;
    }
#endif
  if (inputs_dir && !g_file_test (inputs_dir, G_FILE_TEST_IS_DIR))
    {
      cs_cli_error ("run: --inputs %s is not a directory", inputs_dir);
      return CS_CLI_EXIT_INPUT;
    }

  progress = cs_cli_progress_new_stderr ();
  run_progress = progress;
  if (device && strcmp (device, "cuda") == 0)
    cs_cli_cuda_start_up ();   /* cuBLASLt's start-up beside the reading and the passes */
  cs_cli_progress_set_now (progress, "run: reading %s and running the passes", argv[1]);
  pl = cs_cli_run_pipeline (argv[1], (guint) index, &policy, grad, &error);
  cs_cli_progress_clear (progress);
  if (pl == NULL)
    {
      cs_cli_error ("%s", error->message);
      return cs_cli_exit_for_error (error);
    }
  fw = cs_pipeline_get_forward (pl);
  bw = cs_pipeline_get_backward (pl);
  if (fw == bw)
    fw = NULL;   /* the file's own backward_fn: run it alone */
  if (fw && bw == NULL && cs_pipeline_input_was_final (pl) && !no_backward)
    {
      own_bwd = find_backward (argv[1], (guint) index, &sibling, &error);
      if (own_bwd == NULL && error)
        {
          cs_cli_error ("%s", error->message);
          return CS_CLI_EXIT_INPUT;
        }
      bw = own_bwd;
      if (bw == NULL)
        no_bwd_why = "the file is a final forward trace, with no backward_fn after it and no "
                     "*_bwd.txt beside it";
    }
  else if (fw && bw == NULL)
    no_bwd_why = "nothing requires grad: no floating-point input, or --grad none";
  if (no_backward)
    {
      bw = NULL;
      no_bwd_why = "--forward-only";
    }
  if (bw && sibling)
    {
      /* the backward comes from another file: say which (stats and transform describe the
       * named file alone, whose backward is none) */
      g_autofree char *base = g_path_get_basename (sibling);

      cs_cli_progress_clear (progress);
      fprintf (stderr, "castscope-cli: run: backward: taken from %s beside it\n", base);
    }

  /* Cost check before anything is allocated: a trace sized for a GPU would run for hours or
   * exhaust the machine's memory on the CPU reference (run on cpu, or cuda --check where it
   * runs the CPU reference); the CUDA run needs its inputs and one output at a time on the
   * host.  cuda --check takes its f64 run from the GPU when the CPU reference would be too
   * costly, unless --reference cpu asks for it. */
  if (fw)
    cs_ref_estimate (fw, &est_f1, &est_m1);
  if (bw)
    cs_ref_estimate (bw, &est_f2, &est_m2);
  {
    gboolean cuda = device && strcmp (device, "cuda") == 0;
    gboolean ref_cpu = check && reference && strcmp (reference, "cpu") == 0;
    gboolean ref_gpu = check && reference && strcmp (reference, "gpu") == 0;
    gboolean cpu_exact = cuda && check
                         && (ref_cpu || cs_cli_cpu_affordable (est_f1 + est_f2, MAX (est_m1, est_m2)));
    CsRefStepFlags flags = !cuda ? CS_REF_STEP_EXACT | CS_REF_STEP_F64 : CS_REF_STEP_READBACK;
    CsRefMachineMemory machine;
    CsRefMemoryVerdict verdict;
    CsRefStepCost cost;

    if (cpu_exact)
      flags |= CS_REF_STEP_EXACT | (ref_gpu ? 0 : CS_REF_STEP_F64);
    cs_ref_estimate_step (fw, bw, flags, &cost);
    cs_ref_machine_memory (&machine);
    verdict = cs_ref_check_step_memory (&cost, &machine,
                                        max_memory_given ? max_memory : CS_REF_MEMORY_DEFAULT,
                                        &error);
    if (verdict == CS_REF_MEMORY_OVER_MACHINE)
      {
        /* no limit helps: say what would */
        cs_cli_error ("run: %s: %s", error->message,
                      !cuda ? "run it on the GPU with --device cuda, or shrink the shapes"
                      : cpu_exact && !ref_gpu
                      ? "--check --reference gpu takes the f64 run from the GPU instead of the "
                        "CPU reference, or shrink the shapes"
                      : "shrink the shapes");
        return CS_CLI_EXIT_INPUT;
      }
    if (verdict == CS_REF_MEMORY_OVER_LIMIT)
      {
        g_autofree char *total = cs_format_size ((double) machine.total_bytes);

        cs_cli_error ("run: %s (%sraise it with --max-memory, up to this machine's %s)",
                      error->message,
                      max_memory_given ? "" : "75% of the memory available now; ", total);
        return CS_CLI_EXIT_INPUT;
      }
    if ((!cuda || ref_cpu) && !cs_ref_check_step (&cost, G_MAXUINT64, max_gflop * 1e9, &error))
      {
        cs_cli_error ("run: %s (raise it with --max-gflop)", error->message);
        return CS_CLI_EXIT_INPUT;
      }
  }

  if (device && strcmp (device, "cuda") == 0)
    {
      /* The CUDA executor (kernels/, loaded at run time): app/cs-cli-run-cuda.c. */
      CsCliCudaOptions copts = { 0 };

      if (fw == NULL)
        {
          cs_cli_error ("run --device cuda: the file holds no forward trace");
          return CS_CLI_EXIT_INPUT;
        }
      copts.check = check;
      copts.iters = iters > 0 ? (guint) iters : 0;
      copts.json = json;
      copts.seed = (guint64) seed;
      copts.name = argv[1];
      copts.reference = reference == NULL || strcmp (reference, "auto") == 0 ? CS_CLI_REFERENCE_AUTO
                        : strcmp (reference, "cpu") == 0 ? CS_CLI_REFERENCE_CPU : CS_CLI_REFERENCE_GPU;
      copts.cpu_affordable = cs_cli_cpu_affordable (est_f1 + est_f2, MAX (est_m1, est_m2));
      copts.cpu_gflop = (est_f1 + est_f2) / 1e9;
      copts.progress = progress;
      return cs_cli_run_cuda (fw, bw, &policy, &copts);
    }

  if (fw && !run_both (fw, env_e, env_f, inputs_dir, (guint64) seed, ret_e, ret_f, NULL,
                       bw != NULL, &fwd_rep, &error))
    {
      cs_cli_error ("run: forward: %s", error->message);
      return CS_CLI_EXIT_INPUT;
    }
  flat_args = flat_arg_names (fw);
  if (bw && !run_both (bw, fw ? ret_e : env_e, fw ? ret_f : env_f, inputs_dir, (guint64) seed + 1,
                       NULL, NULL, flat_args, TRUE, &bwd_rep, &error))
    {
      cs_cli_error ("run: backward: %s", error->message);
      rc = CS_CLI_EXIT_INPUT;
      goto out;
    }
  cs_cli_progress_clear (progress);

  if (save_dir)
    {
      if ((fwd_rep.outputs && !save_outputs (save_dir, &fwd_rep, &error))
          || (bwd_rep.outputs && !save_outputs (save_dir, &bwd_rep, &error)))
        {
          cs_cli_error ("run: --save: %s", error->message);
          rc = CS_CLI_EXIT_INPUT;
          goto out;
        }
    }

#if CS_HAVE_JSON
  if (json)
    {
      g_autoptr (JsonBuilder) b = json_builder_new ();
      g_autoptr (JsonGenerator) gen = json_generator_new ();
      g_autoptr (JsonNode) root = NULL;
      g_autofree char *pol = cs_policy_to_string (&policy);
      g_autofree char *text = NULL;

      json_builder_begin_object (b);
      json_builder_set_member_name (b, "file");
      json_builder_add_string_value (b, argv[1]);
      json_builder_set_member_name (b, "device");
      json_builder_add_string_value (b, "cpu");
      json_builder_set_member_name (b, "seed");
      json_builder_add_int_value (b, seed);
      json_builder_set_member_name (b, "policy");
      json_builder_add_string_value (b, pol);
      if (fwd_rep.outputs)
        json_report (b, &fwd_rep);
      if (bwd_rep.outputs)
        json_report (b, &bwd_rep);
      json_builder_end_object (b);
      root = json_builder_get_root (b);
      json_generator_set_root (gen, root);
      json_generator_set_pretty (gen, TRUE);
      text = json_generator_to_data (gen, NULL);
      printf ("%s\n", text);
      goto out;
    }
#endif
  printf ("device: cpu (reference), seed %" G_GINT64_FORMAT "\n", seed);
  {
    /* the policy line (as --device cuda prints it) when it is not Thunder's defaults, so two
     * tables under rounding=fused and rounding=eager say which is which */
    CsPolicy def;

    cs_policy_init_default (&def);
    if (!cs_policy_equal (&policy, &def))
      {
        g_autofree char *pol = cs_policy_to_string (&policy);
        printf ("policy: %s\n", pol);
      }
  }
  if (fwd_rep.outputs)
    print_report (&fwd_rep, all_outputs);
  if (bwd_rep.outputs)
    print_report (&bwd_rep, all_outputs);
  else if (fwd_rep.outputs && no_bwd_why)
    printf ("forward only: no backward trace (%s)\n", no_bwd_why);

out:
  g_clear_pointer (&fwd_rep.outputs, g_ptr_array_unref);
  g_clear_pointer (&bwd_rep.outputs, g_ptr_array_unref);
  g_clear_pointer (&fwd_rep.primary, g_hash_table_unref);
  g_clear_pointer (&bwd_rep.primary, g_hash_table_unref);
  return rc;
}
