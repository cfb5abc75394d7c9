/* cs-print.h: prints traces in Thunder's format (TraceCtx.python / repr with every nesting level
 * of decomposition comments; reference/thunder-traces.md 1.1-1.5). */
#pragma once

#include <glib.h>

#include "cs-ir.h"

G_BEGIN_DECLS

typedef enum
{
  CS_PRINT_DEFAULT      = 0,      /* everything, all subsymbol levels (print(trace)) */
  CS_PRINT_NO_SUBS      = 1 << 0, /* top level only (trace.python()) */
  CS_PRINT_NO_LEADING   = 1 << 1, /* omit non-Thunder leading comments ("# source: ...") */
} CsPrintFlags;

/** Appends @trace to @out. */
void   cs_print_trace_to   (GString *out, const CsTrace *trace, CsPrintFlags flags);
/** Returns: (transfer full): the printed trace. */
char  *cs_print_trace      (const CsTrace *trace, CsPrintFlags flags);
/** Prints every trace of @list in its original arrangement (concatenated or as a Python list). */
char  *cs_print_trace_list (const CsTraceList *list, CsPrintFlags flags);
/** Prints one value as Thunder does (Python repr rules for floats and strings). */
void   cs_print_value_to   (GString *out, const CsValue *value);
/** Prints one statement at @indent spaces (with its subsymbols unless NO_SUBS). */
void   cs_print_stmt_to    (GString *out, const CsStmt *stmt, guint indent, CsPrintFlags flags);
/** A Python repr of @f (shortest round-trip: 1e-05, 4096.0, inf as float('inf')). */
char  *cs_print_float      (double f);
/** Appends Python's repr of @f (see cs_print_float). */
void   cs_print_float_to   (GString *out, double f);
/** Appends Python's repr of the str @s (single quotes unless @s holds ' and no "). */
void   cs_print_py_string_to (GString *out, const char *s);
/** Appends the type string of @proxy as printed between quotes (type_raw when set). */
void   cs_print_type_to    (GString *out, const CsProxy *proxy);

G_END_DECLS
