/* fuzz-parse.c: libFuzzer harness for the trace parser and printer.
 *
 * Any input: parse; if it parses, print it and parse the printed text again (the round trip
 * must also succeed).  Crashes, hangs, leaks and sanitizer reports are bugs.
 * Run long:  ./dev.sh fuzz 600   (or build-fuzz/tests/fuzz/fuzz-parse CORPUS_DIR)
 */
#include "cs-config.h"

#include <stdint.h>
#include <stdlib.h>

#include "cs-parse.h"
#include "cs-print.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTraceList) list = cs_parse_text ((const char *) data, size, "fuzz", &error);

  if (list != NULL)
    {
      g_autofree char *text = cs_print_trace_list (list, CS_PRINT_DEFAULT);
      g_autoptr(GError) error2 = NULL;
      g_autoptr(CsTraceList) again = cs_parse_text (text, strlen (text), "fuzz-printed", &error2);

      /* What castscope printed must parse again. */
      if (again == NULL)
        abort ();
    }
  return 0;
}
