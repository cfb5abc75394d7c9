/* fuzz-pipeline.c: libFuzzer harness for parse -> every pass -> print.
 *
 * Each parsed trace runs through the whole pipeline under the default policy, under a policy
 * with every knob flipped, and under rounding=eager with fusion=off (the eager cast removal on
 * the top level; the flipped policy's redundant-casts=keep overrides rounding); every
 * intermediate trace is printed.  Errors from the passes
 * are fine (bad input); crashes, hangs, leaks and sanitizer reports are bugs.
 */
#include "cs-config.h"

#include <stdint.h>
#include <string.h>

#include "cs-parse.h"
#include "cs-pipeline.h"
#include "cs-policy.h"
#include "cs-print.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

static void
run_policy (CsTrace *trace, const CsPolicy *policy)
{
  g_autoptr(GError) error = NULL;
  CsPipeline *p = cs_pipeline_run (trace, policy, NULL, &error);

  if (p == NULL)
    return;
  for (guint i = 0; i < cs_pipeline_n_passes (p); i++)
    {
      g_autofree char *text = cs_print_trace (cs_pipeline_get_trace (p, i), CS_PRINT_DEFAULT);
      (void) text;
    }
  cs_pipeline_unref (p);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTraceList) list = NULL;
  CsPolicy def, flipped, eager;

  /* Keep single runs short: the pipeline is linear-ish, but fuzz inputs stay small. */
  if (size > 16384)
    return 0;
  list = cs_parse_text ((const char *) data, size, "fuzz", &error);
  if (list == NULL)
    return 0;
  cs_policy_init_default (&def);
  cs_policy_init_default (&flipped);
  g_assert_true (cs_policy_parse_assignment (&flipped, "matmul=upcast-f32", NULL));
  g_assert_true (cs_policy_parse_assignment (&flipped, "elementwise=native", NULL));
  g_assert_true (cs_policy_parse_assignment (&flipped, "autocast=bf16", NULL));
  g_assert_true (cs_policy_parse_assignment (&flipped, "fusion=dataflow", NULL));
  g_assert_true (cs_policy_parse_assignment (&flipped, "fuse-matmul=on", NULL));
  g_assert_true (cs_policy_parse_assignment (&flipped, "fuse-linear=on", NULL));
  g_assert_true (cs_policy_parse_assignment (&flipped, "redundant-casts=keep", NULL));
  cs_policy_init_default (&eager);
  g_assert_true (cs_policy_parse_assignment (&eager, "rounding=eager", NULL));
  g_assert_true (cs_policy_parse_assignment (&eager, "fusion=off", NULL));
  for (guint i = 0; i < list->traces->len && i < 4; i++)
    {
      CsTrace *t = g_ptr_array_index (list->traces, i);
      run_policy (t, &def);
      run_policy (t, &flipped);
      run_policy (t, &eager);
    }
  return 0;
}
