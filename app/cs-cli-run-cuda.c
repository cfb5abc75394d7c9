/* cs-cli-run-cuda.c: `castscope-cli run --device cuda` (see cs-cli-run-cuda.h). */
#include "cs-config.h"

#include "cs-cli-run-cuda.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cs-cli.h"
#include "cs-compare.h"
#include "cs-lens.h"
#include "cs-cuda-loader.h"
#include "cs-half.h"
#include "cs-parse.h"
#include "cs-pipeline.h"
#include "cs-ref.h"
#include "cs-tensor.h"

gboolean
cs_cli_cpu_affordable (double flops, double max_elems)
{
  return flops <= 2e10 && max_elems <= (double) (1 << 24);
}

gboolean
cs_cli_cuda_load_step (const char *path, const CsPolicy *policy, CsTrace **fwd, CsTrace **bwd,
                       GError **error)
{
  g_autoptr(CsTraceList) list = cs_parse_file (path, error);
  CsTrace *first;

  *fwd = NULL;
  *bwd = NULL;
  if (list == NULL)
    return FALSE;
  first = g_ptr_array_index (list->traces, 0);
  if (cs_trace_is_final (first))
    {
      *fwd = cs_trace_ref (first);
      for (guint i = 1; i < list->traces->len; i++)
        {
          CsTrace *t = g_ptr_array_index (list->traces, i);

          if (g_strcmp0 (t->name, "backward_fn") == 0)
            *bwd = cs_trace_ref (t);
        }
      if (*bwd == NULL && g_str_has_suffix (path, "_fwd.txt"))
        {
          g_autofree char *stem = g_strndup (path, strlen (path) - strlen ("_fwd.txt"));
          g_autofree char *bpath = g_strconcat (stem, "_bwd.txt", NULL);

          if (g_file_test (bpath, G_FILE_TEST_EXISTS))
            {
              g_autoptr(CsTraceList) bl = cs_parse_file (bpath, error);

              if (bl == NULL)
                {
                  g_clear_pointer (fwd, cs_trace_unref);
                  return FALSE;
                }
              *bwd = cs_trace_ref (g_ptr_array_index (bl->traces, 0));
            }
        }
      return TRUE;
    }
  {
    g_autoptr(CsPipeline) pl = cs_pipeline_run (first, policy, NULL, error);
    CsTrace *b;

    if (pl == NULL)
      return FALSE;
    *fwd = cs_trace_ref (cs_pipeline_get_forward (pl));
    b = cs_pipeline_get_backward (pl);
    *bwd = b ? cs_trace_ref (b) : NULL;
  }
  return TRUE;
}

static guint64
splitmix64 (guint64 *state)
{
  guint64 z = (*state += 0x9E3779B97F4A7C15ull);

  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* Benchmark inputs without the reference: uniform with the variance of cs_ref_random_input's
 * normal(0, 1) / sqrt(last extent) (rank >= 2), integers in [0, 16), fair-coin bools.  About
 * 3 ns an element, where the reference's Box-Muller costs several times that on 400 M logits. */
static void
fast_fill (CsTensor *t, guint64 seed)
{
  guint64 st = seed * 0x2545F4914F6CDD1Dull + 12345;
  double scale = sqrt (3.0) * (t->rank >= 2 ? 1.0 / sqrt ((double) MAX (t->shape[t->rank - 1], 1)) : 1.0);

  for (int64_t i = 0; i < t->numel; i++)
    {
      guint64 r = splitmix64 (&st);
      float x = (float) (((double) (r >> 11) * (1.0 / 9007199254740992.0) * 2.0 - 1.0) * scale);

      switch (t->dtype)
        {
        case CS_DTYPE_BF16: ((guint16 *) t->data)[i] = cs_half_bf16_from_f32 (x); break;
        case CS_DTYPE_F16: ((guint16 *) t->data)[i] = cs_half_f16_from_f32 (x); break;
        case CS_DTYPE_F32: ((float *) t->data)[i] = x; break;
        case CS_DTYPE_F64: ((double *) t->data)[i] = x; break;
        default: cs_tensor_set_f64 (t, i, cs_dtype_is_float (t->dtype) ? x : (t->dtype == CS_DTYPE_B8 ? (double) (r & 1) : (double) (r % 16)));
        }
    }
}

static CsProxy *
find_leaf (GPtrArray *leaves, const char *name)
{
  for (guint i = 0; i < leaves->len; i++)
    {
      CsProxy *p = g_ptr_array_index (leaves, i);

      if (g_strcmp0 (p->name, name) == 0)
        return p;
    }
  return NULL;
}

static CsTensor *
find_named (GPtrArray *outs, GPtrArray *names, const char *name)
{
  for (guint i = 0; outs && i < outs->len && i < names->len; i++)
    if (g_strcmp0 (g_ptr_array_index (names, i), name) == 0)
      return g_ptr_array_index (outs, i);
  return NULL;
}

static void
json_escape (GString *s, const char *text)
{
  g_string_append_c (s, '"');
  for (const char *c = text; *c; c++)
    {
      if (*c == '"' || *c == '\\')
        g_string_append_c (s, '\\');
      if ((unsigned char) *c < 0x20)
        g_string_append_printf (s, "\\u%04x", *c);
      else
        g_string_append_c (s, *c);
    }
  g_string_append_c (s, '"');
}

gboolean
cs_cli_cuda_check_device (GError **error)
{
  const CsCudaBackend *be = cs_cuda_loader_get (error);
  CsCudaDeviceInfo dev;

  return be != NULL && be->device_info (&dev, error);
}

/* --check's reference runs, statement by statement on the progress line. */
typedef struct
{
  const CsCliCudaOptions *opts;    /* the run's options (progress_label) */
  const char             *mode;    /* "f64" / "exact-dtype" */
  const char             *trace;   /* "forward" / "backward" */
} CheckProgress;

static const char *
progress_label (const CsCliCudaOptions *opts)
{
  return opts->progress_label ? opts->progress_label : opts->name ? opts->name : "run";
}

static void
check_progress_cb (guint done, guint total, gpointer data)
{
  const CheckProgress *cp = data;

  cs_cli_progress_set (cp->opts->progress, "%s: --check, CPU %s reference, %s: statement %u "
                       "of %u", progress_label (cp->opts), cp->mode, cp->trace, MIN (done + 1, total),
                       total);
}

static void
json_error (GString *s, double v)
{
  if (isnan (v))
    g_string_append (s, "\"nan\"");
  else if (isinf (v))
    g_string_append (s, "\"inf\"");
  else
    g_string_append_printf (s, "%.6e", v);
}

/* One judged output of --check. */
typedef struct
{
  guint       index;        /* program output index */
  char       *label;        /* "out  t5       bf16[8, 16]" */
  char       *type;         /* "bf16[8, 16]" */
  CsAccuracy  acc;          /* the verdict */
  gboolean    has_ref;      /* a reference value was found */
  CsLensRange range;        /* dynamic range of the GPU's result (core/cs-lens.h) */
} CheckRow;

static void
check_row_clear (gpointer data)
{
  g_free (((CheckRow *) data)->label);
  g_free (((CheckRow *) data)->type);
}

/* Worst first: failures, then the largest cs_accuracy_margin(), then program order. */
static int
check_row_worst_first (gconstpointer a, gconstpointer b)
{
  const CheckRow *x = a, *y = b;
  double mx = x->has_ref ? cs_accuracy_margin (&x->acc) : INFINITY;
  double my = y->has_ref ? cs_accuracy_margin (&y->acc) : INFINITY;
  gboolean px = x->has_ref && x->acc.pass, py = y->has_ref && y->acc.pass;

  if (px != py)
    return px ? 1 : -1;
  if (isnan (mx) != isnan (my))
    return isnan (mx) ? -1 : 1;
  if (mx != my && !isnan (mx))
    return mx > my ? -1 : 1;
  return x->index < y->index ? -1 : x->index > y->index;
}

/* Runs the CPU reference in @mode: the forward on @env, the backward on the forward's returned
 * tensors plus @env's cotangents.  Outputs and names by trace. */
static gboolean
cpu_reference (const CsCliCudaOptions *opts, CsTrace *fwd, CsTrace *bwd, GHashTable *env,
               CsRefMode mode, GPtrArray **fwd_out, GPtrArray **fwd_names, GPtrArray **bwd_out,
               GPtrArray **bwd_names, GError **error)
{
  g_autoptr(GHashTable) returned = cs_ref_env_new ();
  const char *m = mode == CS_REF_F64 ? "f64" : "exact-dtype";
  CheckProgress fp = { opts, m, "forward" }, bp = { opts, m, "backward" };
  CsRefRunOptions fro = { NULL, check_progress_cb, &fp, 0 };
  CsRefRunOptions bro = { NULL, check_progress_cb, &bp, 0 };

  if (!cs_ref_run_env_full (fwd, env, mode, opts->seed, &fro, fwd_out, fwd_names, returned, error))
    {
      g_prefix_error (error, "CPU reference (%s, forward): ", m);
      return FALSE;
    }
  if (bwd)
    {
      GHashTableIter it;
      gpointer k, v;

      /* The backward reads the saved tensors by name, plus the cotangents. */
      g_hash_table_iter_init (&it, env);
      while (g_hash_table_iter_next (&it, &k, &v))
        if (!g_hash_table_contains (returned, k))
          cs_ref_env_insert (returned, k, v);
      if (!cs_ref_run_env_full (bwd, returned, mode, opts->seed, &bro, bwd_out, bwd_names, NULL,
                                error))
        {
          g_prefix_error (error, "CPU reference (%s, backward): ", m);
          return FALSE;
        }
    }
  return TRUE;
}

/* The GPU f64 program on the same inputs (converted to f64): output i of it is output i of
 * @prog in f64 (kernels/cs-cuda.h, program_new_f64). */
static GPtrArray *
gpu_f64_reference (const CsCudaBackend *be, CsTrace *fwd, CsTrace *bwd, const CsPolicy *policy,
                   GHashTable *env, GError **error)
{
  CsCudaProgram *q = be->program_new_f64 (fwd, bwd, policy, error);
  g_autoptr(GPtrArray) outs = NULL;

  if (q == NULL)
    return NULL;
  for (guint i = 0; i < be->program_n_inputs (q); i++)
    {
      const CsCudaTensorInfo *in = be->program_input (q, i);
      CsTensor *x = g_hash_table_lookup (env, in->name);
      g_autoptr(CsTensor) y = NULL;

      if (x == NULL || (y = cs_tensor_convert (x, in->dtype, error)) == NULL
          || !be->program_set_input (q, i, y->data, cs_tensor_nbytes (y), error))
        {
          if (x == NULL)
            g_set_error (error, CS_CUDA_ERROR, CS_CUDA_ERROR_INPUT, "input %s has no value", in->name);
          goto fail;
        }
    }
  if (!be->program_run (q, FALSE, error))
    goto fail;
  outs = g_ptr_array_new_with_free_func ((GDestroyNotify) cs_tensor_unref);
  for (guint i = 0; i < be->program_n_outputs (q); i++)
    {
      const CsCudaTensorInfo *o = be->program_output (q, i);
      CsTensor *t = cs_tensor_new (o->dtype, o->shape, o->rank, error);

      if (t == NULL || !be->program_get_output (q, i, t->data, cs_tensor_nbytes (t), error))
        {
          if (t)
            cs_tensor_unref (t);
          goto fail;
        }
      g_ptr_array_add (outs, t);
    }
  be->program_free (q);
  return g_steal_pointer (&outs);
fail:
  g_prefix_error (error, "GPU f64 reference: ");
  be->program_free (q);
  return NULL;
}

static char *
fmt_measure (const CsAccuracy *a, double v)
{
  if (a->n_compared == 0 && a->n > 0 && isfinite (v))
    return g_strdup ("-");
  return g_strdup_printf ("%.3e", v);
}

static void
json_measure (GString *s, const CsAccuracy *a, double v)
{
  if (a->n_compared == 0 && a->n > 0 && isfinite (v))
    g_string_append (s, "null");
  else
    json_error (s, v);
}

/* `, "range": {...}`: an output's dynamic range, the members of castscope-cli run --json's CPU
 * report (amax, min_nonzero, zeros, non_finite, formats: per f16/bf16/e4m3/e5m2 overflow,
 * flush_to_zero, subnormal, headroom (null when infinite), overflow_risk, underflow_risk). */
static void
json_range (GString *s, const CsLensRange *r)
{
  g_string_append_printf (s, ", \"range\": {\"amax\": %.6e, \"min_nonzero\": %.6e, \"zeros\": %"
                          G_GINT64_FORMAT ", \"non_finite\": %" G_GINT64_FORMAT ", \"formats\": {",
                          r->amax, r->min_nonzero, r->n_zero, r->n_nonfinite);
  for (guint f = 0; f < CS_LENS_N_FMTS; f++)
    {
      const CsLensFit *fit = &r->fit[f];

      g_string_append_printf (s, "%s\"%s\": {\"overflow\": %" G_GINT64_FORMAT ", \"flush_to_zero\": %"
                              G_GINT64_FORMAT ", \"subnormal\": %" G_GINT64_FORMAT ", \"headroom\": ",
                              f ? ", " : "", cs_lens_format_name (f), fit->n_overflow, fit->n_flush,
                              fit->n_subnormal);
      if (isfinite (fit->headroom))
        g_string_append_printf (s, "%.6e", fit->headroom);
      else
        g_string_append (s, "null");
      g_string_append_printf (s, ", \"overflow_risk\": %s, \"underflow_risk\": %s}",
                              fit->overflow_risk ? "true" : "false",
                              fit->underflow_risk ? "true" : "false");
    }
  g_string_append (s, "}}");
}

/**
 * cs_cli_cuda_start_up:
 *
 * Loads the CUDA executor and begins cuBLASLt's start-up on a thread of its own (the
 * backend's start_up), so that it runs while the caller reads the trace and runs the passes;
 * cs_cli_run_cuda's build waits for it and reports it.  Does nothing when the executor cannot
 * be loaded (cs_cli_run_cuda then reports why).
 */
void
cs_cli_cuda_start_up (void)
{
  const CsCudaBackend *be = cs_cuda_loader_get (NULL);

  if (be != NULL && be->start_up != NULL)
    be->start_up ();
}

int
cs_cli_run_cuda (CsTrace *fwd, CsTrace *bwd, const CsPolicy *policy, const CsCliCudaOptions *opts)
{
  g_autoptr(GError) error = NULL;
  const CsCudaBackend *be = cs_cuda_loader_get (&error);
  CsCudaDeviceInfo dev;
  CsCudaProgram *prog = NULL;
  g_autoptr(GHashTable) env = NULL;
  g_autoptr(GPtrArray) fwd_out = NULL, fwd_names = NULL, bwd_out = NULL, bwd_names = NULL;
  g_autoptr(GPtrArray) fwd_ex = NULL, fwd_ex_names = NULL, bwd_ex = NULL, bwd_ex_names = NULL;
  g_autoptr(GPtrArray) gpu_f64 = NULL;
  g_autoptr(GPtrArray) fleaves = NULL, bleaves = NULL;
  g_autoptr(GArray) rows = NULL;
  g_autoptr(GString) report = g_string_new ("");
  g_autoptr(GString) json = g_string_new ("{");
  guint n_fail = 0;
  int rc = CS_CLI_EXIT_INPUT;
  CsCudaTimes times;
  gboolean cpu_exact = FALSE, cpu_f64 = FALSE;
  double check_ms = 0;
  const char *cmd = opts->command ? opts->command : "run";   /* names the command in errors */

  if (be == NULL || !be->device_info (&dev, &error))
    {
      cs_cli_error ("%s: --device cuda: %s (--device cpu runs the CPU reference executor "
                    "instead)", cmd, error->message);
      return CS_CLI_EXIT_INPUT;
    }
  if (opts->check)
    {
      /* The CPU reference (exact-dtype and f64 runs) where affordable or asked for; the f64
       * run from the GPU f64 program otherwise, or when asked for. */
      cpu_exact = opts->reference == CS_CLI_REFERENCE_CPU || opts->cpu_affordable;
      cpu_f64 = cpu_exact && opts->reference != CS_CLI_REFERENCE_GPU;
    }
  cs_cli_progress_set_now (opts->progress, "%s: compiling the step for the GPU (NVRTC, cuBLASLt "
                           "plans)", progress_label (opts));
  prog = be->program_new (fwd, bwd, policy, &error);
  if (prog == NULL)
    {
      cs_cli_error ("%s: --device cuda: %s", cmd, error->message);
      return CS_CLI_EXIT_INPUT;
    }
  if (opts->dump_source)
    {
      g_autoptr(GError) e2 = NULL;

      if (!g_file_set_contents (opts->dump_source, be->program_source (prog), -1, &e2))
        cs_cli_error ("%s: --dump-source: %s", cmd, e2->message);
    }

  /* Inputs: the reference's random inputs (same seed, same values on every machine) when the
   * CPU reference runs; the fast generator otherwise. */
  env = cs_ref_env_new ();
  fleaves = cs_ref_dup_leaf_inputs (fwd);
  bleaves = bwd ? cs_ref_dup_leaf_inputs (bwd) : g_ptr_array_new ();
  for (guint i = 0; i < be->program_n_inputs (prog); i++)
    {
      const CsCudaTensorInfo *in = be->program_input (prog, i);
      CsTrace *t = in->backward ? bwd : fwd;
      CsProxy *px = find_leaf (in->backward ? bleaves : fleaves, in->name);
      g_autoptr(CsTensor) x = NULL;

      if (px == NULL)
        {
          cs_cli_error ("%s: --device cuda: input %s is not a leaf input of the %s trace", cmd,
                        in->name, in->backward ? "backward" : "forward");
          goto out;
        }
      if (cpu_exact)
        x = cs_ref_random_input (t, px, opts->seed + i, &error);
      else if ((x = cs_tensor_new (in->dtype, in->shape, in->rank, &error)) != NULL)
        fast_fill (x, opts->seed + i);
      if (x == NULL || !be->program_set_input (prog, i, x->data, cs_tensor_nbytes (x), &error))
        {
          cs_cli_error ("%s: --device cuda: input %s: %s", cmd, in->name, error->message);
          goto out;
        }
      cs_ref_env_insert (env, in->name, x);
    }

  cs_cli_progress_set_now (opts->progress, "%s: running the step on the GPU", progress_label (opts));
  if (!be->program_run (prog, !opts->no_graph, &error))
    {
      cs_cli_error ("%s: --device cuda: %s", cmd, error->message);
      goto out;
    }

  if (opts->check)
    {
      gint64 t0 = g_get_monotonic_time ();

      if (cpu_exact
          && !cpu_reference (opts, fwd, bwd, env, CS_REF_EXACT, &fwd_ex, &fwd_ex_names,
                             &bwd_ex, &bwd_ex_names, &error))
        {
          cs_cli_error ("%s: --check: %s", cmd, error->message);
          goto out;
        }
      if (cpu_f64
          && !cpu_reference (opts, fwd, bwd, env, CS_REF_F64, &fwd_out, &fwd_names,
                             &bwd_out, &bwd_names, &error))
        {
          cs_cli_error ("%s: --check: %s", cmd, error->message);
          goto out;
        }
      if (!cpu_f64)
        cs_cli_progress_set_now (opts->progress, "%s: --check, the f64 reference on the GPU",
                                 progress_label (opts));
      if (!cpu_f64 && (gpu_f64 = gpu_f64_reference (be, fwd, bwd, policy, env, &error)) == NULL)
        {
          cs_cli_error ("%s: --check: %s", cmd, error->message);
          goto out;
        }
      check_ms = (g_get_monotonic_time () - t0) / 1000.0;
    }

  g_string_append_printf (report, "device: %s (sm_%d%d, %d SMs), runtime %d, driver %d, NVRTC %d.%d, cuBLASLt %zu\n",
                          dev.name, dev.cc_major, dev.cc_minor, dev.n_sms, dev.runtime_version,
                          dev.driver_version, dev.nvrtc_major, dev.nvrtc_minor, dev.cublaslt_version);
  g_string_append (json, "\"device\": ");
  json_escape (json, dev.name);
  if (opts->name)
    {
      g_string_append_printf (report, "trace: %s\n", opts->name);
      g_string_append (json, ", \"trace\": ");
      json_escape (json, opts->name);
    }
  {
    g_autofree char *ps = cs_policy_to_string (policy);

    g_string_append_printf (report, "policy: %s\n", ps);
    g_string_append (json, ", \"policy\": ");
    json_escape (json, ps);
  }
  if (opts->check)
    {
      g_string_append_printf (report,
                              "check: f64 run on the %s; reference error from %s (CPU reference %.3g GFLOP)\n"
                              "  err: RMSE vs f64; ref_err: the same for the reference; pass: err <= k * ref_err + atol,\n"
                              "  or every element within allclose(tol) of the reference (tried first)\n"
                              "  (PyTorch's torch._dynamo.utils.same with fp64_ref)\n",
                              cpu_f64 ? "CPU" : "GPU",
                              cpu_exact ? "the exact-dtype CPU run (exact)" : "the rounding floor (floor: f64 rounded to the dtype)",
                              opts->cpu_gflop);
      g_string_append_printf (json, ", \"reference\": {\"f64\": \"%s\", \"ref\": \"%s\", \"check_ms\": %.3f}",
                              cpu_f64 ? "cpu" : "gpu", cpu_exact ? "exact" : "floor", check_ms);
    }
  g_string_append (json, ", \"outputs\": [");

  rows = g_array_new (FALSE, TRUE, sizeof (CheckRow));
  g_array_set_clear_func (rows, check_row_clear);
  for (guint i = 0; i < be->program_n_outputs (prog); i++)
    {
      const CsCudaTensorInfo *o = be->program_output (prog, i);
      g_autoptr(CsTensor) got = cs_tensor_new (o->dtype, o->shape, o->rank, &error);
      g_autofree char *ts = NULL;
      CheckRow row = { 0 };

      if (got == NULL || !be->program_get_output (prog, i, got->data, cs_tensor_nbytes (got), &error))
        {
          cs_cli_error ("%s: --device cuda: output %s: %s", cmd, o->name, error->message);
          goto out;
        }
      ts = cs_tensor_type_string (got);
      row.index = i;
      row.label = g_strdup_printf ("%s %-8s %-22s", o->backward ? "grad" : "out ", o->name, ts);
      row.type = g_strdup (ts);
      cs_lens_range (got, &row.range);
      if (opts->check)
        {
          CsTensor *t = NULL, *r = NULL;
          CsAccuracyRule rule;

          if (gpu_f64 != NULL)
            t = i < gpu_f64->len ? g_ptr_array_index (gpu_f64, i) : NULL;
          else
            t = o->backward ? find_named (bwd_out, bwd_names, o->name) : find_named (fwd_out, fwd_names, o->name);
          if (cpu_exact)
            r = o->backward ? find_named (bwd_ex, bwd_ex_names, o->name) : find_named (fwd_ex, fwd_ex_names, o->name);
          row.has_ref = t != NULL && t->numel == got->numel && (!cpu_exact || (r != NULL && r->numel == got->numel));
          if (row.has_ref)
            {
              cs_accuracy_rule (got->dtype, got->numel, bwd != NULL, &rule);
              cs_accuracy_judge (got, cpu_exact ? r : NULL, t, &rule, &row.acc);
            }
          if (!row.has_ref || !row.acc.pass)
            n_fail++;
        }
      else if (got->numel <= (1 << 24))
        {
          double sum = 0;

          for (int64_t e = 0; e < got->numel; e++)
            sum += fabs (cs_tensor_get_f64 (got, e));
          row.acc.err = got->numel ? sum / got->numel : 0.0;   /* mean |x|, for the report */
          row.acc.n_compared = 1;
        }
      g_array_append_val (rows, row);
    }
  if (opts->check)
    g_array_sort (rows, check_row_worst_first);
  for (guint i = 0; i < rows->len; i++)
    {
      const CheckRow *row = &g_array_index (rows, CheckRow, i);
      const CsCudaTensorInfo *o = be->program_output (prog, row->index);
      const CsAccuracy *a = &row->acc;

      g_string_append (report, row->label);
      g_string_append_printf (json, "%s{\"name\": ", i ? ", " : "");
      json_escape (json, o->name);
      g_string_append_printf (json, ", \"backward\": %s, \"type\": ", o->backward ? "true" : "false");
      json_escape (json, row->type);
      if (opts->check && !row->has_ref)
        {
          g_string_append (report, "  no reference value  FAIL\n");
          g_string_append (json, ", \"check\": \"no reference\", \"pass\": false}");
          continue;
        }
      if (opts->check)
        {
          g_autofree char *e = fmt_measure (a, a->err), *r = fmt_measure (a, a->ref_err);
          g_autofree char *q = a->n_compared == 0 && a->n > 0 && isfinite (a->ratio)
                               ? g_strdup ("-") : g_strdup_printf ("%.3g", a->ratio);

          g_string_append_printf (report, "  err %s  ref_err %s (%s)  ratio %-7s k %g  %s", e, r,
                                  cs_accuracy_ref_kind_name (a->ref_kind), q, a->rule.k,
                                  a->pass ? "ok" : a->n_nonfinite_mismatch ? "FAIL (NaN/inf)" : "FAIL");
          if (a->n_nonfinite)
            g_string_append_printf (report, "  non-finite %" G_GINT64_FORMAT " (as in the reference)", a->n_nonfinite);
          if (a->n_nonfinite_mismatch)
            g_string_append_printf (report, "  MISMATCH: %" G_GINT64_FORMAT " NaN/inf elements disagree",
                                    a->n_nonfinite_mismatch);
          /* JSON has no inf or NaN: non-finite errors are the strings "inf" and "nan" */
          g_string_append (json, ", \"err\": ");
          json_measure (json, a, a->err);
          g_string_append (json, ", \"ref_err\": ");
          json_measure (json, a, a->ref_err);
          g_string_append_printf (json, ", \"ref\": \"%s\", \"ratio\": ", cs_accuracy_ref_kind_name (a->ref_kind));
          json_measure (json, a, a->ratio);
          g_string_append_printf (json, ", \"k\": %g, \"tol\": %g, \"atol\": %g, \"bound\": ", a->rule.k,
                                  a->rule.tol, a->rule.atol);
          json_error (json, a->bound);
          g_string_append (json, ", \"rel_l2\": ");
          json_measure (json, a, a->rms_f64 > 0 ? a->err / a->rms_f64 : a->err);
          g_string_append (json, ", \"max_abs\": ");
          json_measure (json, a, a->max_abs);
          g_string_append_printf (json, ", \"allclose\": %s, \"non_finite\": %" G_GINT64_FORMAT
                                  ", \"non_finite_mismatch\": %" G_GINT64_FORMAT ", \"pass\": %s",
                                  a->allclose ? "true" : "false", a->n_nonfinite,
                                  a->n_nonfinite_mismatch, a->pass ? "true" : "false");
        }
      else if (a->n_compared)
        g_string_append_printf (report, "  mean|x| %.4e", a->err);
      {
        g_autofree char *rs = cs_lens_range_summary (&row->range);

        /* the dynamic range of what the GPU stored, against f16, bf16 and fp8 */
        g_string_append_printf (report, "  amax %.3e", row->range.amax);
        if (rs[0])
          g_string_append_printf (report, "  range: %s", rs);
        g_string_append (report, "\n");
        json_range (json, &row->range);
      }
      g_string_append (json, "}");
    }
  g_string_append (json, "]");

  if (opts->iters > 0)
    {
      cs_cli_progress_set_now (opts->progress, "%s: timing %u steps on the GPU",
                               progress_label (opts), opts->iters);
      if (!be->program_time (prog, opts->iters, &times, &error))
        {
          cs_cli_error ("%s: --device cuda: timing: %s", cmd, error->message);
          goto out;
        }
      g_string_append_printf (report, "\n%-4s %-62s %10s %10s %9s %7s\n", "", "step", "ms", "floor ms",
                              "rate", "%floor");
      g_string_append (json, ", \"steps\": [");
      for (guint i = 0; i < times.steps->len; i++)
        {
          CsCudaStepTiming *s = &g_array_index (times.steps, CsCudaStepTiming, i);
          double rate = s->flops > 0 ? s->flops / (s->median_ms * 1e-3) / 1e12 : s->bytes / (s->median_ms * 1e-3) / 1e12;

          g_string_append_printf (report, "%-4s %-62.62s %10.4f %10.4f %6.1f %s %6.1f\n", s->backward ? "bwd" : "fwd",
                                  s->label, s->median_ms, s->floor_ms, rate, s->flops > 0 ? "TF" : "TB",
                                  s->median_ms > 0 ? 100.0 * s->floor_ms / s->median_ms : 0.0);
          g_string_append_printf (json, "%s{\"label\": ", i ? ", " : "");
          json_escape (json, s->label);
          g_string_append_printf (json, ", \"kind\": \"%s\", \"backward\": %s, \"ms\": %.6f, \"floor_ms\": %.6f,"
                                  " \"flops\": %.0f, \"bytes\": %.0f}", s->kind, s->backward ? "true" : "false",
                                  s->median_ms, s->floor_ms, s->flops, s->bytes);
        }
      g_string_append (json, "]");
      if (times.step_reps > 0)
        {
          /* CASTSCOPE_STEP_REPS: each step alone in a CUDA graph, no event between launches */
          g_string_append_printf (report, "\nper step alone in a CUDA graph of %u repeats (CASTSCOPE_STEP_REPS):"
                                  " after an L2 flush / back to back; for memory-bound steps the rates of a"
                                  " device-to-device copy of the same bytes timed the same two ways\n"
                                  "%-4s %-62s %10s %6s %10s %6s    %11s %10s\n", times.step_reps, "", "step",
                                  "alone ms", "rate", "warm ms", "rate", "copy alone", "copy warm");
          for (guint i = 0; i < times.steps->len; i++)
            {
              CsCudaStepTiming *s = &g_array_index (times.steps, CsCudaStepTiming, i);
              double w = s->flops > 0 ? s->flops : s->bytes;

              g_string_append_printf (report, "%-4s %-62.62s %10.4f %6.1f %10.4f %6.1f %s", s->backward ? "bwd" : "fwd",
                                      s->label, s->alone_ms, s->alone_ms > 0 ? w / (s->alone_ms * 1e-3) / 1e12 : 0.0,
                                      s->warm_ms, s->warm_ms > 0 ? w / (s->warm_ms * 1e-3) / 1e12 : 0.0,
                                      s->flops > 0 ? "TF" : "TB");
              if (s->copy_alone_ms > 0 && s->copy_warm_ms > 0)
                g_string_append_printf (report, " %11.1f %10.1f TB", s->bytes / (s->copy_alone_ms * 1e-3) / 1e12,
                                        s->bytes / (s->copy_warm_ms * 1e-3) / 1e12);
              g_string_append_c (report, '\n');
            }
        }
      g_string_append_printf (report,
                              "\nstep: GPU time (graph replay) %.4f ms (min %.4f), latency (launch+sync) %.4f ms,"
                              " stream launches %.4f ms; floor %.4f ms; %u kernels + %u matmuls; median of %u\n"
                              "graph: %u stream%s, the longest chain of launches %u\n"
                              "build %.1f ms (%u NVRTC cache hits): device %.1f, %s %.1f, setup %.1f,"
                              " kernels %.1f, matmul plans %.1f ms (%u distinct, the first %.1f ms; of the plans, %.1f ms"
                              " waiting for cuBLASLt's start-up); arena %.1f MiB (no reuse: %.1f MiB)\n"
                              "cuBLASLt start-up %.1f ms on its own thread, begun %.1f ms before the build\n"
                              "from the plan cache: %u of %u matmul algorithms, %u of %u cuDNN plans"
                              " (cuDNN plans %.1f ms)\n",
                              times.graph_ms, times.graph_min_ms, times.latency_ms, times.stream_ms, times.floor_ms,
                              times.n_kernels, times.n_matmuls, times.n_samples, times.n_streams, times.n_streams == 1 ? "" : "s", times.critical_path,
                              times.compile_ms, times.cache_hits, times.device_ms,
                              times.plan_cached ? "plan from the cache" : "codegen", times.codegen_ms, times.setup_ms, times.kernels_ms, times.plans_ms,
                              times.n_gemm_plans, times.first_plan_ms, times.lt_wait_ms, times.arena_bytes / 1048576.0,
                              times.naive_bytes / 1048576.0, times.lt_startup_ms, times.lt_lead_ms,
                              times.n_gemm_algos_cached, times.n_matmuls, times.n_cudnn_loaded, times.n_cudnn_plans,
                              times.cudnn_ms);
      g_string_append_printf (json, ", \"graph_ms\": %.6f, \"graph_min_ms\": %.6f, \"latency_ms\": %.6f,"
                              " \"stream_ms\": %.6f, \"floor_ms\": %.6f, \"kernels\": %u, \"matmuls\": %u,"
                              " \"samples\": %u, \"build_ms\": %.3f, \"build_phases_ms\": {\"device\": %.3f,"
                              " \"codegen\": %.3f, \"setup\": %.3f, \"kernels\": %.3f, \"plans\": %.3f},"
                              " \"plan_cached\": %s, \"cublaslt_startup_ms\": %.3f, \"cublaslt_wait_ms\": %.3f,"
                              " \"cublaslt_lead_ms\": %.3f, \"arena_bytes\": %zu, \"streams\": %u, \"critical_path\": %u",
                              times.graph_ms, times.graph_min_ms, times.latency_ms, times.stream_ms, times.floor_ms,
                              times.n_kernels, times.n_matmuls, times.n_samples, times.compile_ms,
                              times.device_ms, times.codegen_ms, times.setup_ms, times.kernels_ms, times.plans_ms,
                              times.plan_cached ? "true" : "false", times.lt_startup_ms, times.lt_wait_ms,
                              times.lt_lead_ms, times.arena_bytes, times.n_streams,
                              times.critical_path);
    }
  cs_cli_progress_clear (opts->progress);
  g_string_append_printf (json, ", \"check\": %s, \"failed\": %u}\n",
                          opts->check ? "true" : "false", n_fail);
  if (opts->json)
    fputs (json->str, stdout);
  else
    {
      fputs (report->str, stdout);
      if (opts->check)
        printf ("check: %s (%u of %u outputs fail; reference %.1f ms)\n", n_fail ? "FAILED" : "passed",
                n_fail, be->program_n_outputs (prog), check_ms);
    }
  fflush (stdout);
  if (n_fail)
    cs_cli_error ("%s: --check failed: %u output(s) outside PyTorch's accuracy bound "
                  "(k * ref_err + atol)", cmd, n_fail);
  rc = n_fail ? CS_CLI_EXIT_INPUT : CS_CLI_EXIT_OK;

out:
  be->program_free (prog);
  return rc;
}
