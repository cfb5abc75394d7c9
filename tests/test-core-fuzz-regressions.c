/* test-core-fuzz-regressions.c: replays every input in tests/fuzz/regressions/ (inputs that once
 * crashed, hung or leaked in a fuzzer) through what the fuzzers run, as a normal test.
 *
 * Each file: parse; a parse error must be a CS_PARSE_ERROR whose message starts with
 * "name:line:col: ".  A parsed list must print and parse again.  Each of its first four traces
 * runs through the pipeline under Thunder's default policy, the fuzzer's flipped policy and its
 * rounding=eager fusion=off policy (tests/fuzz/fuzz-pipeline.c); a pass may fail, but then with a GError, and every trace of a
 * finished pipeline must print.  Under ASan+UBSan this catches the original bug again.
 */
#include "cs-config.h"

#include <string.h>

#include "cs-parse.h"
#include "cs-pipeline.h"
#include "cs-policy.h"
#include "cs-print.h"

/* TRUE if @message is "name:LINE:COL: reason" with positive LINE and COL. */
static gboolean
has_location (const char *message, const char *name)
{
  const char *p;
  char *end;
  guint64 line, col;

  if (!g_str_has_prefix (message, name) || message[strlen (name)] != ':')
    return FALSE;
  p = message + strlen (name) + 1;
  line = g_ascii_strtoull (p, &end, 10);
  if (end == p || *end != ':' || line == 0)
    return FALSE;
  p = end + 1;
  col = g_ascii_strtoull (p, &end, 10);
  return end != p && end[0] == ':' && end[1] == ' ' && col > 0;
}

static void
run_policy (const CsTrace *trace, const CsPolicy *policy)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(CsPipeline) p = cs_pipeline_run (trace, policy, NULL, &error);

  if (p == NULL)
    {
      g_assert_nonnull (error);
      g_assert_nonnull (error->message);
      g_test_message ("pipeline (%s): %s", cs_policy_get (policy, "matmul"), error->message);
      return;
    }
  g_assert_no_error (error);
  for (guint i = 0; i < cs_pipeline_n_passes (p); i++)
    {
      g_autofree char *text = cs_print_trace (cs_pipeline_get_trace (p, i), CS_PRINT_DEFAULT);

      g_assert_nonnull (text);
    }
}

static void
replay (gconstpointer data)
{
  const char *path = data;
  g_autofree char *name = g_path_get_basename (path);
  g_autofree char *contents = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTraceList) list = NULL;
  gsize len = 0;
  CsPolicy def, flipped, eager;
  const char *flips[] = { "matmul=upcast-f32", "elementwise=native", "autocast=bf16",
                          "fusion=dataflow", "fuse-matmul=on", "fuse-linear=on",
                          "redundant-casts=keep" };

  g_assert_true (g_file_get_contents (path, &contents, &len, &error));
  g_assert_no_error (error);
  list = cs_parse_text (contents, len, name, &error);
  if (list == NULL)
    {
      g_assert_error (error, CS_PARSE_ERROR, error->code);
      if (!has_location (error->message, name))
        g_error ("parse error without name:line:col: %s", error->message);
      g_test_message ("parse: %s", error->message);
      return;
    }
  g_assert_no_error (error);

  {
    g_autofree char *text = cs_print_trace_list (list, CS_PRINT_DEFAULT);
    g_autoptr(GError) error2 = NULL;
    g_autoptr(CsTraceList) again = cs_parse_text (text, strlen (text), "printed", &error2);

    g_assert_no_error (error2);
    g_assert_nonnull (again);
  }

  cs_policy_init_default (&def);
  cs_policy_init_default (&flipped);
  cs_policy_init_default (&eager);
  g_assert_true (cs_policy_parse_assignment (&eager, "rounding=eager", NULL));
  g_assert_true (cs_policy_parse_assignment (&eager, "fusion=off", NULL));
  for (guint i = 0; i < G_N_ELEMENTS (flips); i++)
    {
      g_assert_true (cs_policy_parse_assignment (&flipped, flips[i], &error));
      g_assert_no_error (error);
    }
  for (guint i = 0; i < list->traces->len && i < 4; i++)
    {
      const CsTrace *t = g_ptr_array_index (list->traces, i);

      run_policy (t, &def);
      run_policy (t, &flipped);
      run_policy (t, &eager);
    }
}

/* g_ptr_array_sort passes pointers to the elements. */
static int
compare_paths (gconstpointer a, gconstpointer b)
{
  return strcmp (*(const char * const *) a, *(const char * const *) b);
}

static void
test_dir (gconstpointer data)
{
  g_assert_true (g_file_test ((const char *) data, G_FILE_TEST_IS_DIR));
}

int
main (int argc, char **argv)
{
  g_autofree char *dir = NULL;
  g_autoptr(GDir) d = NULL;
  g_autoptr(GPtrArray) paths = g_ptr_array_new_with_free_func (g_free);
  const char *entry;

  g_test_init (&argc, &argv, NULL);
  dir = g_test_build_filename (G_TEST_DIST, "fuzz", "regressions", NULL);
  g_test_add_data_func ("/core/fuzz/regressions/dir", dir, test_dir);
  d = g_dir_open (dir, 0, NULL);
  while (d != NULL && (entry = g_dir_read_name (d)) != NULL)
    if (g_str_has_suffix (entry, ".txt"))
      g_ptr_array_add (paths, g_build_filename (dir, entry, NULL));
  g_ptr_array_sort (paths, compare_paths);
  for (guint i = 0; i < paths->len; i++)
    {
      const char *path = g_ptr_array_index (paths, i);
      g_autofree char *base = g_path_get_basename (path);
      g_autofree char *test_path = NULL;

      base[strlen (base) - 4] = '\0';
      test_path = g_strdup_printf ("/core/fuzz/regressions/%s", base);
      g_test_add_data_func (test_path, path, replay);
    }
  return g_test_run ();
}
