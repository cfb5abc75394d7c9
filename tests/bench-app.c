/* bench-app.c: the app's own memory and times at model scale (a benchmark, not a test): a
 * CsWindow under Xvfb opens FILE, then changes the policy twice and goes back to the first
 * (a policy seen: kept), expands the middle top-level group and collapses it again.  After
 * each step it prints the wall time until the window is idle and drawn, the longest time the
 * GTK thread did not get back to its main loop during the step (a 5 ms timer's largest gap:
 * how long the window froze), the CPU time of all its threads during the step (user + system,
 * which a loaded machine does not stretch as it does the wall time) and of the GTK thread
 * alone ("gtk": what the window's own work cost the main loop), the resident set (VmRSS)
 * and its peak so far (VmHWM) of this process, in MiB, and the step's start on the monotonic
 * clock (s; `perf record -k CLOCK_MONOTONIC` timestamps, to cut a profile to one step with
 * `perf report --time`).  Numbers in tests/BENCH-RESULTS.md.
 *
 * Usage (GSK_RENDERER=cairo GTK_A11Y=none, as the GUI tests):
 *   xvfb-run -a -s '-screen 0 1600x1000x24' build/tests/bench-app FILE [STEP...]
 * STEP: KEY=VALUE (a policy knob, as the side panel sets it), expand (the middle top-level
 * group), collapse (it again), settle (until the GTK thread has nothing left to do: idle work
 * that GTK runs at a priority above G_PRIORITY_LOW after the window is no longer busy, such as
 * a widget's background layout); default: matmul=upcast-f32 fusion=dataflow fusion=consecutive
 * matmul=native expand collapse.
 */
#include "cs-config.h"

#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <gtk/gtk.h>

#include "cs-application.h"
#include "cs-window-private.h"

/* The main loop's responsiveness: the largest gap between two ticks of a 5 ms timer. */
static gint64 last_tick;        /* µs, monotonic */
static gint64 max_gap;          /* µs, since the last report() */
static gint64 cpu_at_start;     /* µs of CPU time (all threads) at the step's start */
static gint64 gtk_cpu_at_start; /* µs of CPU time of the GTK thread at the step's start */

/* CPU time of the whole process so far (user + system, every thread), µs. */
static gint64
cpu_now (void)
{
  struct rusage ru;

  getrusage (RUSAGE_SELF, &ru);
  return (gint64) (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * G_USEC_PER_SEC
         + ru.ru_utime.tv_usec + ru.ru_stime.tv_usec;
}

/* CPU time of the calling thread (the GTK thread: main() runs the main loop), µs. */
static gint64
thread_cpu_now (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_THREAD_CPUTIME_ID, &ts);
  return (gint64) ts.tv_sec * G_USEC_PER_SEC + ts.tv_nsec / 1000;
}

static gboolean
tick_cb (gpointer data)
{
  gint64 now = g_get_monotonic_time ();

  if (last_tick != 0 && now - last_tick > max_gap)
    max_gap = now - last_tick;
  last_tick = now;
  return G_SOURCE_CONTINUE;
}

static gboolean
flag_cb (gpointer data)
{
  *(gboolean *) data = TRUE;
  return G_SOURCE_REMOVE;
}

static void
spin_ms (guint ms)
{
  gboolean done = FALSE;

  g_timeout_add (ms, flag_cb, &done);
  while (!done)
    g_main_context_iteration (NULL, TRUE);
}

/* Until the window has nothing in flight (at most 300 s), then two frames. */
static void
wait_idle (CsWindow *win)
{
  gboolean timed_out = FALSE;
  guint id = g_timeout_add_seconds (300, flag_cb, &timed_out);

  for (int i = 0; i < 50 && g_main_context_iteration (NULL, FALSE); i++)
    ;
  while (!timed_out && _cs_window_is_busy (win))
    g_main_context_iteration (NULL, TRUE);
  if (!timed_out)
    g_source_remove (id);
  spin_ms (50);
}

/* Until an idle of G_PRIORITY_LOW runs (at most 300 s): every source of a higher priority,
 * widgets' background layout among them, has had nothing to do. */
static void
wait_settled (void)
{
  gboolean done = FALSE, timed_out = FALSE;
  guint id = g_timeout_add_seconds (300, flag_cb, &timed_out);

  g_idle_add_full (G_PRIORITY_LOW, flag_cb, &done, NULL);
  while (!done && !timed_out)
    g_main_context_iteration (NULL, TRUE);
  if (!timed_out)
    g_source_remove (id);
}

static void
report (const char *step, gint64 t0)
{
  g_autofree char *status = NULL;
  guint64 rss = 0, hwm = 0;

  if (g_file_get_contents ("/proc/self/status", &status, NULL, NULL))
    for (char *line = status; line && *line; line = strchr (line, '\n') ? strchr (line, '\n') + 1 : NULL)
      {
        if (g_str_has_prefix (line, "VmRSS:"))
          rss = g_ascii_strtoull (line + 6, NULL, 10);
        else if (g_str_has_prefix (line, "VmHWM:"))
          hwm = g_ascii_strtoull (line + 6, NULL, 10);
      }
  printf ("%-34s %9.0f ms  stall %6.0f ms  cpu %7.0f ms  gtk %7.0f ms  RSS %6.0f MiB"
          "  peak %6.0f MiB  at %.3f s\n", step, (g_get_monotonic_time () - t0) / 1000.0,
          max_gap / 1000.0, (cpu_now () - cpu_at_start) / 1000.0,
          (thread_cpu_now () - gtk_cpu_at_start) / 1000.0, rss / 1024.0, hwm / 1024.0, t0 / 1e6);
  fflush (stdout);
  max_gap = 0;
  last_tick = g_get_monotonic_time ();
  cpu_at_start = cpu_now ();
  gtk_cpu_at_start = thread_cpu_now ();
}

static void
set_policy (CsWindow *win, const char *action, const char *value, const char *step)
{
  gint64 t0 = g_get_monotonic_time ();

  g_action_group_change_action_state (G_ACTION_GROUP (win), action, g_variant_new_string (value));
  wait_idle (win);
  report (step, t0);
}

int
main (int argc, char **argv)
{
  g_autoptr(CsApplication) app = NULL;
  g_autoptr(GFile) file = NULL;
  g_autoptr(GError) error = NULL;
  CsWindow *win;
  CsLayout *l;
  gint64 t0;

  if (argc < 2)
    {
      fprintf (stderr, "usage: bench-app FILE\n");
      return 2;
    }
  gtk_disable_setlocale ();
  g_setenv ("GSETTINGS_BACKEND", "memory", TRUE);
  gtk_init ();
  app = cs_application_new (G_APPLICATION_NON_UNIQUE);
  if (!g_application_register (G_APPLICATION (app), NULL, &error))
    {
      fprintf (stderr, "bench-app: %s\n", error->message);
      return 1;
    }
  win = cs_window_new (app);
  gtk_window_set_default_size (GTK_WINDOW (win), 1600, 1000);
  gtk_window_present (GTK_WINDOW (win));
  spin_ms (200);
  g_timeout_add (5, tick_cb, NULL);
  report ("window shown", g_get_monotonic_time ());

  file = g_file_new_for_path (argv[1]);
  t0 = g_get_monotonic_time ();
  cs_window_open_file (win, file);
  wait_idle (win);
  report ("open (all passes, both views)", t0);
  if (win->analysis == NULL)
    {
      fprintf (stderr, "bench-app: %s did not open\n", argv[1]);
      return 1;
    }
  {
    const char *defaults[] = { "matmul=upcast-f32", "fusion=dataflow", "fusion=consecutive",
                               "matmul=native", "expand", "collapse", NULL };
    const char * const *steps = argc > 2 ? (const char * const *) argv + 2 : defaults;
    g_autofree char *mid = NULL;

    l = cs_graph_view_get_layout (win->forward_view);
    if (l != NULL && l->grouping != NULL)
      {
        guint n_top = 0, k = 0;

        for (guint g = 0; g < l->grouping->n_groups; g++)
          n_top += l->grouping->groups[g].parent < 0;
        for (guint g = 0; g < l->grouping->n_groups && mid == NULL; g++)
          if (l->grouping->groups[g].parent < 0 && k++ == n_top / 2)
            mid = g_strdup (l->grouping->groups[g].name);
      }
    for (guint i = 0; steps[i] != NULL; i++)
      {
        const char *eq = strchr (steps[i], '=');
        g_autofree char *what = NULL;

        if (eq != NULL)
          {
            g_autofree char *key = g_strndup (steps[i], eq - steps[i]);
            g_autofree char *action = g_strconcat ("policy-", key, NULL);

            what = g_strdup_printf ("policy %s", steps[i]);
            set_policy (win, action, eq + 1, what);
            continue;
          }
        if (strcmp (steps[i], "settle") == 0)
          {
            t0 = g_get_monotonic_time ();
            wait_settled ();
            report ("settle", t0);
            continue;
          }
        if (mid == NULL)
          continue;
        what = g_strdup_printf ("%s %s", steps[i], mid);
        t0 = g_get_monotonic_time ();
        cs_graph_view_set_group_expanded (win->forward_view, mid, strcmp (steps[i], "expand") == 0);
        wait_idle (win);
        report (what, t0);
      }
  }
  gtk_window_destroy (GTK_WINDOW (win));
  for (int i = 0; i < 50 && g_main_context_iteration (NULL, FALSE); i++)
    ;
  return 0;
}
