/* cs-cli-run-cuda.c: `castscope-cli run --device cuda` (see cs-cli-run-cuda.h). */
#include "cs-config.h"

#include "cs-cli-run-cuda.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cs-cli.h"
#include "cs-cuda-loader.h"
#include "cs-half.h"
#include "cs-parse.h"
#include "cs-pipeline.h"
#include "cs-ref.h"
#include "cs-tensor.h"

/* Relative L2 error bound ||gpu - ref|| / ||ref|| per output dtype (METHOD.md: bf16 operands
 * land between 1e-3 and 1e-2, tf32 near 3e-4, f32 far under 1e-3). */
static double
tolerance (CsDtype dt, gboolean tf32)
{
  switch (dt)
    {
    case CS_DTYPE_BF16: return 2e-2;
    case CS_DTYPE_F16: return 5e-3;
    case CS_DTYPE_F32: return tf32 ? 5e-3 : 1e-4;
    case CS_DTYPE_F64: return 1e-9;
    default: return 0.0;   /* integers and bools must match exactly */
    }
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

int
cs_cli_run_cuda (CsTrace *fwd, CsTrace *bwd, const CsPolicy *policy, const CsCliCudaOptions *opts)
{
  g_autoptr(GError) error = NULL;
  const CsCudaBackend *be = cs_cuda_loader_get (&error);
  CsCudaDeviceInfo dev;
  CsCudaProgram *prog = NULL;
  g_autoptr(GHashTable) env = NULL;
  g_autoptr(GHashTable) returned = NULL;
  g_autoptr(GPtrArray) fwd_out = NULL, fwd_names = NULL, bwd_out = NULL, bwd_names = NULL;
  g_autoptr(GPtrArray) fleaves = NULL, bleaves = NULL;
  g_autoptr(GString) report = g_string_new ("");
  g_autoptr(GString) json = g_string_new ("{");
  guint n_fail = 0;
  int rc = CS_CLI_EXIT_INPUT;
  CsCudaTimes times;
  gboolean timed = FALSE;

  if (be == NULL || !be->device_info (&dev, &error))
    {
      cs_cli_error ("--device cuda: %s (--device cpu runs the CPU reference executor instead)",
                    error->message);
      return CS_CLI_EXIT_INPUT;
    }
  prog = be->program_new (fwd, bwd, policy, &error);
  if (prog == NULL)
    {
      cs_cli_error ("--device cuda: %s", error->message);
      return CS_CLI_EXIT_INPUT;
    }
  if (opts->dump_source)
    {
      g_autoptr(GError) e2 = NULL;

      if (!g_file_set_contents (opts->dump_source, be->program_source (prog), -1, &e2))
        cs_cli_error ("--dump-source: %s", e2->message);
    }

  /* Inputs: the reference's random inputs (same seed, same values on every machine). */
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
          cs_cli_error ("--device cuda: input %s is not a leaf input of the %s trace", in->name,
                        in->backward ? "backward" : "forward");
          goto out;
        }
      if (opts->check)
        x = cs_ref_random_input (t, px, opts->seed + i, &error);
      else if ((x = cs_tensor_new (in->dtype, in->shape, in->rank, &error)) != NULL)
        fast_fill (x, opts->seed + i);
      if (x == NULL || !be->program_set_input (prog, i, x->data, cs_tensor_nbytes (x), &error))
        {
          cs_cli_error ("--device cuda: input %s: %s", in->name, error->message);
          goto out;
        }
      cs_ref_env_insert (env, in->name, x);
    }

  if (!be->program_run (prog, !opts->no_graph, &error))
    {
      cs_cli_error ("--device cuda: %s", error->message);
      goto out;
    }

  if (opts->check)
    {
      returned = cs_ref_env_new ();
      if (!cs_ref_run_env (fwd, env, CS_REF_F64, opts->seed, &fwd_out, &fwd_names, returned, &error))
        {
          cs_cli_error ("--check: CPU reference (forward): %s", error->message);
          goto out;
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
          if (!cs_ref_run_env (bwd, returned, CS_REF_F64, opts->seed, &bwd_out, &bwd_names, NULL, &error))
            {
              cs_cli_error ("--check: CPU reference (backward): %s", error->message);
              goto out;
            }
        }
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
  g_string_append (json, ", \"outputs\": [");

  for (guint i = 0; i < be->program_n_outputs (prog); i++)
    {
      const CsCudaTensorInfo *o = be->program_output (prog, i);
      g_autoptr(CsTensor) got = cs_tensor_new (o->dtype, o->shape, o->rank, &error);
      CsTensor *ref = NULL;
      double maxabs = 0, rel = 0;
      CsTensorErrorStats st;
      gboolean bad_nan = FALSE, pass = TRUE;
      g_autofree char *ts = NULL;

      if (got == NULL || !be->program_get_output (prog, i, got->data, cs_tensor_nbytes (got), &error))
        {
          cs_cli_error ("--device cuda: output %s: %s", o->name, error->message);
          goto out;
        }
      ts = cs_tensor_type_string (got);
      g_string_append_printf (report, "%s %-8s %-22s", o->backward ? "grad" : "out ", o->name, ts);
      g_string_append_printf (json, "%s{\"name\": ", i ? ", " : "");
      json_escape (json, o->name);
      g_string_append_printf (json, ", \"backward\": %s, \"type\": ", o->backward ? "true" : "false");
      json_escape (json, ts);
      if (opts->check)
        {
          ref = o->backward ? find_named (bwd_out, bwd_names, o->name) : find_named (fwd_out, fwd_names, o->name);
          if (ref == NULL || ref->numel != got->numel)
            {
              g_string_append (report, "  no reference value\n");
              g_string_append (json, ", \"check\": \"no reference\"}");
              n_fail++;
              continue;
            }
          /* NaN anywhere, or inf on one side only, makes the errors NaN or inf: written
           * `err <= tol`, the test fails for both (never `!(err > tol)`, true for NaN). */
          cs_tensor_measure_error (got, ref, &st);
          rel = st.rel_l2;
          maxabs = st.max_abs;
          bad_nan = st.n_mismatch > 0;
          pass = !bad_nan && rel <= tolerance (o->dtype, policy->allow_tf32)
                 && (tolerance (o->dtype, FALSE) > 0 || maxabs == 0);
          if (!pass)
            n_fail++;
          g_string_append_printf (report, "  rel.L2 %.3e  max|d| %.3e  tol %.0e  %s\n", rel, maxabs,
                                  tolerance (o->dtype, policy->allow_tf32),
                                  pass ? "ok" : (bad_nan ? "MISMATCH (NaN/inf)" : "MISMATCH"));
          /* JSON has no inf or NaN: non-finite errors are the strings "inf" and "nan" */
          g_string_append (json, ", \"rel_l2\": ");
          json_error (json, rel);
          g_string_append (json, ", \"max_abs\": ");
          json_error (json, maxabs);
          g_string_append_printf (json, ", \"non_finite_mismatch\": %" G_GINT64_FORMAT
                                  ", \"pass\": %s", st.n_mismatch, pass ? "true" : "false");
        }
      else if (got->numel <= (1 << 24))
        {
          double s = 0;

          for (int64_t e = 0; e < got->numel; e++)
            s += fabs (cs_tensor_get_f64 (got, e));
          g_string_append_printf (report, "  mean|x| %.4e\n", got->numel ? s / got->numel : 0.0);
        }
      else
        g_string_append (report, "\n");
      g_string_append (json, "}");
    }
  g_string_append (json, "]");

  if (opts->iters > 0)
    {
      if (!be->program_time (prog, opts->iters, &times, &error))
        {
          cs_cli_error ("--device cuda: timing: %s", error->message);
          goto out;
        }
      timed = TRUE;
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
      g_string_append_printf (report,
                              "\nstep: GPU time (graph replay) %.4f ms (min %.4f), latency (launch+sync) %.4f ms,"
                              " stream launches %.4f ms; floor %.4f ms; %u kernels + %u matmuls; median of %u\n"
                              "build %.1f ms (%u NVRTC cache hits); arena %.1f MiB (no reuse: %.1f MiB)\n",
                              times.graph_ms, times.graph_min_ms, times.latency_ms, times.stream_ms, times.floor_ms,
                              times.n_kernels, times.n_matmuls, times.n_samples, times.compile_ms, times.cache_hits,
                              times.arena_bytes / 1048576.0, times.naive_bytes / 1048576.0);
      g_string_append_printf (json, ", \"graph_ms\": %.6f, \"graph_min_ms\": %.6f, \"latency_ms\": %.6f,"
                              " \"stream_ms\": %.6f, \"floor_ms\": %.6f, \"kernels\": %u, \"matmuls\": %u,"
                              " \"samples\": %u, \"build_ms\": %.3f, \"arena_bytes\": %zu",
                              times.graph_ms, times.graph_min_ms, times.latency_ms, times.stream_ms, times.floor_ms,
                              times.n_kernels, times.n_matmuls, times.n_samples, times.compile_ms,
                              times.arena_bytes);
    }
  (void) timed;
  g_string_append_printf (json, ", \"check\": %s, \"failed\": %u}\n",
                          opts->check ? "true" : "false", n_fail);
  if (opts->json)
    fputs (json->str, stdout);
  else
    {
      fputs (report->str, stdout);
      if (opts->check)
        printf ("check: %s (%u of %u outputs outside tolerance)\n", n_fail ? "FAILED" : "passed", n_fail,
                be->program_n_outputs (prog));
    }
  fflush (stdout);
  if (n_fail)
    cs_cli_error ("--check failed: %u output(s) differ from the CPU f64 reference", n_fail);
  rc = n_fail ? CS_CLI_EXIT_INPUT : CS_CLI_EXIT_OK;

out:
  be->program_free (prog);
  return rc;
}
