/* test-cli-run-limits.c: `castscope-cli run` refuses a step whose estimated host memory is over
 * the limit (--max-memory, or the default share of the machine's memory) or over the machine's
 * whole memory (whatever --max-memory says) before allocating anything, with the estimate and
 * the limit or the machine's memory in the message; and writes no progress when stderr is not
 * a terminal.  The CLI is spawned directly ($CS_CLI) with pipes; its peak
 * resident memory comes from wait4(). */
#include "cs-config.h"

#include "cs-ref-plan.h"

#include <glib/gstdio.h>
#include <math.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct
{
  int    status;     /* exit code */
  char  *out;        /* stdout */
  char  *err;        /* stderr */
  double maxrss_mib; /* the child's peak resident memory, MiB */
  double wall_ms;    /* wall time, ms */
} Run;

static void
run_clear (Run *r)
{
  g_free (r->out);
  g_free (r->err);
}

static const char *
cli (void)
{
  const char *p = g_getenv ("CS_CLI");

  g_assert_nonnull (p);
  g_assert_true (g_file_test (p, G_FILE_TEST_IS_EXECUTABLE));
  return p;
}

static gpointer
drain (gpointer data)
{
  int fd = GPOINTER_TO_INT (data);
  GString *s = g_string_new (NULL);
  char buf[4096];
  gssize got;

  while ((got = read (fd, buf, sizeof buf)) > 0)
    g_string_append_len (s, buf, got);
  close (fd);
  return g_string_free (s, FALSE);
}

/* Runs the CLI with @args (NULL-terminated, without argv[0]). */
static Run
run (const char *const *args)
{
  g_autoptr (GPtrArray) argv = g_ptr_array_new ();
  g_autoptr (GError) error = NULL;
  Run r = { 0 };
  int out_fd = -1, err_fd = -1, status = 0;
  struct rusage ru;
  GThread *to, *te;
  GPid pid;
  gint64 t0 = g_get_monotonic_time ();

  g_ptr_array_add (argv, (gpointer) cli ());
  for (guint i = 0; args[i]; i++)
    g_ptr_array_add (argv, (gpointer) args[i]);
  g_ptr_array_add (argv, NULL);
  if (!g_spawn_async_with_pipes (NULL, (char **) argv->pdata, NULL, G_SPAWN_DO_NOT_REAP_CHILD,
                                 NULL, NULL, &pid, NULL, &out_fd, &err_fd, &error))
    g_error ("cannot run %s: %s", cli (), error->message);
  to = g_thread_new ("out", drain, GINT_TO_POINTER (out_fd));
  te = g_thread_new ("err", drain, GINT_TO_POINTER (err_fd));
  r.out = g_thread_join (to);
  r.err = g_thread_join (te);
  g_assert_cmpint (wait4 (pid, &status, 0, &ru), ==, pid);
  g_spawn_close_pid (pid);
  r.wall_ms = (g_get_monotonic_time () - t0) / 1000.0;
  g_assert_true (WIFEXITED (status));
  r.status = WEXITSTATUS (status);
  r.maxrss_mib = ru.ru_maxrss / 1024.0;   /* Linux: KiB */
  return r;
}

/* The estimate in "needs about 48.0 GiB of host memory", in bytes (-1 when absent). */
static double
estimate_in (const char *err)
{
  static const char * const units[] = { "bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
  const char *p = strstr (err, "needs about ");
  char unit[8] = "";
  double v = 0;

  if (p == NULL || sscanf (p, "needs about %lf %7s", &v, unit) != 2)
    return -1;
  for (guint i = 0; i < G_N_ELEMENTS (units); i++)
    if (strcmp (unit, units[i]) == 0)
      return v * ldexp (1.0, 10 * (int) i);
  return -1;
}

/* This machine's total memory as the CLI names it ("23.5 GiB"). */
static char *
machine_total (double *bytes)
{
  CsRefMachineMemory m;

  cs_ref_machine_memory (&m);
  if (bytes)
    *bytes = (double) m.total_bytes;
  return cs_format_size ((double) m.total_bytes);
}

/* The refusal of a step over the machine's memory, after "needs about X". */
static void
assert_over_machine (const char *err, const char *advice)
{
  g_autofree char *total = machine_total (NULL);
  g_autofree char *want = g_strdup_printf (" of host memory on the CPU reference (estimate), "
                                           "this machine has %s: %s\n", total, advice);

  if (!g_str_has_prefix (err, "castscope-cli: run: this step needs about ")
      || !g_str_has_suffix (err, want))
    g_error ("want \"...%s\", got \"%s\"", want, err);
  g_assert_null (strstr (err, "--max-memory"));
}

static char *
write_trace (const char *dir, const char *name, const char *text)
{
  char *path = g_build_filename (dir, name, NULL);

  g_assert_true (g_file_set_contents (path, text, -1, NULL));
  return path;
}

/* Refused before anything is allocated: a sub-kilobyte trace whose tensors hold 2 GiB each in
 * bf16 (the executor keeps 8 bytes an element: 8 GiB per value).  Under --max-memory 8G the
 * message names the estimate (at least the three 8 GiB input values, by hand) and the limit;
 * the process never grows past what parsing and the passes take (well under 256 MiB). */
static void
test_refuse_2gib_tensors (void)
{
  g_autofree char *dir = g_dir_make_tmp ("cs-limits-XXXXXX", NULL);
  g_autofree char *path = write_trace (dir, "big.txt",
    "import thunder\n"
    "import thunder.torch as ltorch\n"
    "import torch\n"
    "from thunder.executors.torchex import no_autocast\n\n"
    "@torch.no_grad()\n"
    "@no_autocast\n"
    "def computation(a, b, c):\n"
    "  # a: \"cuda:0 bf16[32768, 32768]\"\n"
    "  # b: \"cuda:0 bf16[32768, 32768]\"\n"
    "  # c: \"cuda:0 bf16[32768, 32768]\"\n"
    "  t0 = ltorch.add(a, b)  # t0: \"cuda:0 bf16[32768, 32768]\"\n"
    "  t1 = ltorch.mul(t0, c)  # t1: \"cuda:0 bf16[32768, 32768]\"\n"
    "  return (t1,)\n");
  Run r = run ((const char *[]) { "run", path, "--max-memory", "8G", NULL });
  double est = estimate_in (r.err);

  g_test_message ("exit %d in %.0f ms, peak RSS %.1f MiB: %s", r.status, r.wall_ms, r.maxrss_mib,
                  r.err);
  g_assert_cmpint (r.status, ==, 1);
  g_assert_cmpstr (r.out, ==, "");
  g_assert_true (g_str_has_prefix (r.err, "castscope-cli: run: this step needs about "));
  {
    double total;
    g_autofree char *t = machine_total (&total);
    g_autofree char *want = g_strdup_printf (" of host memory on the CPU reference (estimate), "
                                             "over the limit of 8.00 GiB (raise it with "
                                             "--max-memory, up to this machine's %s)\n", t);

    /* a machine with less memory than the estimate: no limit helps, and none is offered */
    if (est > total)
      assert_over_machine (r.err, "run it on the GPU with --device cuda, or shrink the shapes");
    else
      g_assert_true (g_str_has_suffix (r.err, want));
  }
  g_assert_cmpfloat (est, >=, 3 * 8.0 * (1u << 30));
  g_assert_cmpfloat (r.maxrss_mib, <, 256);
  run_clear (&r);

  /* SIZE forms: 8192M and plain bytes mean the same limit */
  r = run ((const char *[]) { "run", path, "--max-memory", "8589934592", NULL });
  g_assert_cmpint (r.status, ==, 1);
  g_assert_true (strstr (r.err, "over the limit of 8.00 GiB") || strstr (r.err, "this machine has"));
  run_clear (&r);
  r = run ((const char *[]) { "run", path, "--max-memory=8192M", NULL });
  g_assert_cmpint (r.status, ==, 1);
  g_assert_true (strstr (r.err, "over the limit of 8.00 GiB") || strstr (r.err, "this machine has"));
  run_clear (&r);
  g_unlink (path);
  g_rmdir (dir);
}

/* The default limit is a share of this machine's memory: a trace of 2^40-element tensors
 * (8 TiB a value) is over it on any machine, and the message says where the limit comes
 * from. */
static void
test_refuse_default_limit (void)
{
  g_autofree char *dir = g_dir_make_tmp ("cs-limits-XXXXXX", NULL);
  g_autofree char *path = write_trace (dir, "huge.txt",
    "import thunder\n"
    "import thunder.torch as ltorch\n"
    "import torch\n"
    "from thunder.executors.torchex import no_autocast\n\n"
    "@torch.no_grad()\n"
    "@no_autocast\n"
    "def computation(a, b):\n"
    "  # a: \"cuda:0 bf16[1048576, 1048576]\"\n"
    "  # b: \"cuda:0 bf16[1048576, 1048576]\"\n"
    "  t0 = ltorch.add(a, b)  # t0: \"cuda:0 bf16[1048576, 1048576]\"\n"
    "  return (t0,)\n");
  Run r = run ((const char *[]) { "run", path, NULL });

  g_test_message ("exit %d in %.0f ms, peak RSS %.1f MiB: %s", r.status, r.wall_ms, r.maxrss_mib,
                  r.err);
  g_assert_cmpint (r.status, ==, 1);
  g_assert_cmpfloat (estimate_in (r.err), >=, 2 * 8.0 * 1099511627776.0);
  /* over any machine: the machine is named, and no --max-memory is offered */
  assert_over_machine (r.err, "run it on the GPU with --device cuda, or shrink the shapes");
  g_assert_cmpfloat (r.maxrss_mib, <, 256);
  run_clear (&r);
  /* issue 21: --max-memory above the machine's memory once let such a step grow until the
   * kernel killed it (exit 137, no message); the limit stops at the machine's memory */
  r = run ((const char *[]) { "run", path, "--max-memory", "100T", NULL });
  g_test_message ("--max-memory 100T: exit %d in %.0f ms, peak RSS %.1f MiB: %s", r.status,
                  r.wall_ms, r.maxrss_mib, r.err);
  g_assert_cmpint (r.status, ==, 1);
  g_assert_cmpfloat (estimate_in (r.err), <, 100.0 * 1099511627776.0);
  assert_over_machine (r.err, "run it on the GPU with --device cuda, or shrink the shapes");
  g_assert_cmpfloat (r.maxrss_mib, <, 256);
  run_clear (&r);
  /* --device cuda is checked too (its host side: inputs and one output, 2 TiB each in bf16),
   * before any GPU is looked for */
  r = run ((const char *[]) { "run", path, "--device", "cuda", "--max-memory", "100T", NULL });
  g_assert_cmpint (r.status, ==, 1);
  assert_over_machine (r.err, "shrink the shapes");
  g_assert_cmpfloat (estimate_in (r.err), >=, 2 * 2.0 * 1099511627776.0);
  run_clear (&r);
  g_unlink (path);
  g_rmdir (dir);
}

/* The case: the cross-entropy benchmark (logits bf16[8192, 50304]) once grew to 24 GB
 * on the CPU reference before the kernel killed it.  Now it is refused up front. */
static void
test_refuse_cross_entropy_bench (void)
{
  g_autofree char *path = g_build_filename (g_getenv ("CS_DATA_DIR"), "bench",
                                            "cross_entropy_v50304.txt", NULL);
  Run r = run ((const char *[]) { "run", path, "--max-memory", "16G", NULL });

  g_test_message ("exit %d in %.0f ms, peak RSS %.1f MiB: %s", r.status, r.wall_ms, r.maxrss_mib,
                  r.err);
  g_assert_cmpint (r.status, ==, 1);
  /* logits: 412 M elements; the forward alone holds them as f64 values in both modes */
  g_assert_cmpfloat (estimate_in (r.err), >, 16.0 * (1u << 30));
  {
    double total;
    g_autofree char *t = machine_total (&total);
    g_autofree char *want = g_strdup_printf ("over the limit of 16.0 GiB (raise it with "
                                             "--max-memory, up to this machine's %s)\n", t);

    if (estimate_in (r.err) > total)
      assert_over_machine (r.err, "run it on the GPU with --device cuda, or shrink the shapes");
    else
      g_assert_true (g_str_has_suffix (r.err, want));
  }
  g_assert_cmpfloat (r.maxrss_mib, <, 256);
  run_clear (&r);
}

/* Bad sizes are usage errors (exit 2) naming the value; a good one lets a small step run. */
static void
test_max_memory_values (void)
{
  g_autofree char *seed = g_build_filename (g_getenv ("CS_DATA_DIR"), "seed_foo.txt", NULL);
  static const char * const bad[] = { "12Q", "-1", "", "1.5.5G", "nan" };

  for (gsize i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      g_autofree char *want = g_strdup_printf ("castscope-cli: run: --max-memory: cannot read "
                                               "'%s' as a size", bad[i]);
      Run r = run ((const char *[]) { "run", seed, "--max-memory", bad[i], NULL });

      g_assert_cmpint (r.status, ==, 2);
      g_assert_true (g_str_has_prefix (r.err, want));
      run_clear (&r);
    }
  {
    Run r = run ((const char *[]) { "run", seed, "--max-memory", "1.5GiB", NULL });

    g_assert_cmpint (r.status, ==, 0);
    g_assert_true (g_str_has_prefix (r.out, "device: cpu (reference), seed 0\n"));
    /* stderr is a pipe: no progress line, not one byte */
    g_assert_cmpstr (r.err, ==, "");
    run_clear (&r);
  }
  {
    /* the seed's step needs 19 KiB by the estimate (tests/test-core-ref-limits checks it
     * against the run): refused under 1 KiB */
    Run r = run ((const char *[]) { "run", seed, "--max-memory", "1K", NULL });

    g_autofree char *total = machine_total (NULL);
    g_autofree char *want = g_strdup_printf ("over the limit of 1.00 KiB (raise it with "
                                             "--max-memory, up to this machine's %s)\n", total);

    g_assert_cmpint (r.status, ==, 1);
    g_assert_true (g_str_has_suffix (r.err, want));
    run_clear (&r);
  }
  {
    Run r = run ((const char *[]) { "run", "--help", NULL });

    g_assert_cmpint (r.status, ==, 0);
    g_assert_nonnull (strstr (r.out, "--max-memory=SIZE"));
    g_assert_nonnull (strstr (r.out, "75% of the memory available"));
    g_assert_nonnull (strstr (r.out, "MemAvailable of /proc/meminfo"));
    run_clear (&r);
  }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/cli/run-limits/refuse-2gib-tensors", test_refuse_2gib_tensors);
  g_test_add_func ("/cli/run-limits/refuse-default-limit", test_refuse_default_limit);
  g_test_add_func ("/cli/run-limits/refuse-cross-entropy-bench", test_refuse_cross_entropy_bench);
  g_test_add_func ("/cli/run-limits/max-memory-values", test_max_memory_values);
  return g_test_run ();
}
