/* cs-cli-bench.c: `castscope-cli bench`: the GPU benchmark workloads.
 *
 * Each workload (a trace file; by default every *.txt in data/bench/, the bundled samples at
 * benchmark size) is run fwd+bwd under the default policy and under matmul=upcast-f32 (the
 * seed's hazard), and reports GPU time (CUDA-graph replay) and latency (one launched and
 * synced step), medians of --iters samples after 5 warm-up steps
 * (reference/gpu-executor.md section 8, 6.3).  Thunder's default executors, as everywhere: the
 * sdpa statements and TorchCompile regions run as fused kernels of their own.
 */
#include "cs-config.h"

#include <stdio.h>
#include <string.h>

#include "cs-cli.h"
#include "cs-cli-policy.h"
#include "cs-cli-progress.h"
#include "cs-cli-run-cuda.h"

int
cs_cli_cmd_bench (int argc, char **argv)
{
  g_autoptr(GOptionContext) ctx = cs_cli_option_context_new ("[FILE...]",
                                                             "run the GPU benchmark workloads");
  g_auto(GStrv) files = NULL;
  g_auto(GStrv) policies = NULL;
  int iters = 20;
  gboolean json = FALSE, check = FALSE, default_only = FALSE;
  g_autofree char *dir = NULL;
  g_autoptr(GPtrArray) paths = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(GError) dev_error = NULL;
  g_autoptr(CsCliProgress) progress = NULL;
  int rc = CS_CLI_EXIT_OK;
  guint n_runs, run_no = 0;
  const GOptionEntry entries[] = {
    { "iters", 'n', 0, G_OPTION_ARG_INT, &iters, "timed samples per measure (default 20)", "N" },
    { "json", 0, 0, G_OPTION_ARG_NONE, &json, "one JSON object per run on stdout", NULL },
    { "check", 0, 0, G_OPTION_ARG_NONE, &check, "also compare with the CPU f64 reference", NULL },
    { "default-only", 0, 0, G_OPTION_ARG_NONE, &default_only, "skip the upcast-f32 policy run", NULL },
    { "policy", 'p', 0, G_OPTION_ARG_STRING_ARRAY, &policies, "extra key=value for both runs", "KEY=VALUE" },
    { G_OPTION_REMAINING, 0, 0, G_OPTION_ARG_FILENAME_ARRAY, &files, NULL, NULL },
    { NULL },
  };

  g_option_context_add_main_entries (ctx, entries, NULL);
  cs_cli_set_help (ctx, "Without FILE, runs every *.txt in data/bench/.  With no GPU it exits 1.\n",
                   CS_CLI_HELP_FILES);
  if (!cs_cli_parse_options (ctx, &argc, &argv))
    return CS_CLI_EXIT_USAGE;
  if (iters < 1)
    {
      cs_cli_error ("bench: --iters must be >= 1");
      return CS_CLI_EXIT_USAGE;
    }
  /* no GPU: one message, not one per workload and policy under empty headers */
  if (!cs_cli_cuda_check_device (&dev_error))
    {
      cs_cli_error ("bench: cannot run on a GPU: %s", dev_error->message);
      return CS_CLI_EXIT_INPUT;
    }
  if (files)
    for (guint i = 0; files[i]; i++)
      g_ptr_array_add (paths, g_strdup (files[i]));
  else
    {
      const char *d = g_getenv ("CS_BENCH_DIR");
      g_autoptr(GDir) gd = NULL;
      g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func (g_free);
      const char *n;

      dir = d ? g_strdup (d) : g_build_filename (CS_SOURCE_DATADIR, "bench", NULL);
      gd = g_dir_open (dir, 0, NULL);
      if (gd == NULL)
        {
          cs_cli_error ("bench: no workload folder %s (give trace files)", dir);
          return CS_CLI_EXIT_INPUT;
        }
      while ((n = g_dir_read_name (gd)))
        if (g_str_has_suffix (n, ".txt") && !g_str_has_suffix (n, "_bwd.txt"))
          g_ptr_array_add (names, g_strdup (n));
      g_ptr_array_sort (names, (GCompareFunc) g_strcmp0);
      for (guint i = 0; i < names->len; i++)
        g_ptr_array_add (paths, g_build_filename (dir, *(char **) g_ptr_array_index (names, i) ? g_ptr_array_index (names, i) : "", NULL));
    }

  progress = cs_cli_progress_new_stderr ();
  n_runs = paths->len * (default_only ? 1u : 2u);
  for (guint i = 0; i < paths->len; i++)
    for (guint pol = 0; pol < (default_only ? 1u : 2u); pol++)
      {
        const char *path = g_ptr_array_index (paths, i);
        g_autoptr(GError) error = NULL;
        g_autoptr(CsTrace) fwd = NULL;
        g_autoptr(CsTrace) bwd = NULL;
        CsPolicy policy;
        CsCliCudaOptions opts = { 0 };
        g_autofree char *label = NULL;
        g_autofree char *plabel = NULL;
        int r;

        run_no++;
        if (!cs_cli_policy_from_strv (policies, &policy, &error)
            || (pol == 1 && !cs_policy_set (&policy, "matmul", "upcast-f32", &error)))
          {
            cs_cli_error ("bench: %s", error->message);
            return CS_CLI_EXIT_USAGE;
          }
        cs_cli_progress_set_now (progress, "bench %u of %u: %s [%s]: reading and running the "
                                 "passes", run_no, n_runs, path, pol ? "upcast-f32" : "default");
        if (!cs_cli_cuda_load_step (path, &policy, &fwd, &bwd, &error))
          {
            cs_cli_error ("bench: %s: %s", path, error->message);
            rc = CS_CLI_EXIT_INPUT;
            continue;
          }
        label = g_strdup_printf ("%s [%s]", path, pol ? "upcast-f32" : "default");
        opts.check = check;
        opts.iters = (guint) iters;
        opts.json = json;
        opts.seed = 1;
        opts.name = label;
        plabel = g_strdup_printf ("bench %u of %u: %s", run_no, n_runs, label);
        opts.progress = progress;
        opts.progress_label = plabel;
        opts.command = "bench";
        cs_cli_progress_clear (progress);
        if (!json)
          printf ("==== %s ====\n", label);
        r = cs_cli_run_cuda (fwd, bwd, &policy, &opts);
        if (!json)
          printf ("\n");
        fflush (stdout);
        if (r != CS_CLI_EXIT_OK)
          rc = r;
      }
  return rc;
}
