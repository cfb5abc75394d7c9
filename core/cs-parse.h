/* cs-parse.h: the Thunder trace-text parser (reference/thunder-traces.md section 1).
 *
 * Trace text is data: nothing in it is executed.  Every error carries file:line:col.
 */
#pragma once

#include <glib.h>

#include "cs-ir.h"

G_BEGIN_DECLS

#define CS_PARSE_ERROR (cs_parse_error_quark ())
GQuark cs_parse_error_quark (void);

typedef enum
{
  CS_PARSE_ERROR_IO,         /* the file could not be read (missing, directory, permissions) */
  CS_PARSE_ERROR_EMPTY,      /* no trace in the input */
  CS_PARSE_ERROR_ENCODING,   /* not UTF-8 text (binary data) */
  CS_PARSE_ERROR_SYNTAX,     /* a statement does not follow the grammar */
  CS_PARSE_ERROR_TYPE,       /* a bad type string */
  CS_PARSE_ERROR_INDENT,     /* bad indentation */
  CS_PARSE_ERROR_LIMIT,      /* a line, nesting depth or file size over castscope's limits */
  CS_PARSE_ERROR_NAME,       /* a name used before it is defined, or never defined
                                (cs_validate_trace) */
} CsParseError;

/* Limits (clear errors past them, never a crash or a hang). */
#define CS_PARSE_MAX_LINE_BYTES   (4 * 1024 * 1024)   /* one line */
#define CS_PARSE_MAX_DEPTH        64                  /* bracket / subsymbol nesting */
#define CS_PARSE_MAX_FILE_BYTES   (1024 * 1024 * 1024)
#define CS_PARSE_MAX_LINES        (2 * 1024 * 1024)   /* lines in one input (bounds statements:
                                                         ~0.5 KiB of IR each) */
#define CS_PARSE_MAX_TRACES       4096                /* traces in one input (an arena each) */
#define CS_PARSE_MAX_IR_BYTES     ((gsize) 2 << 30)   /* IR memory for one input (values can
                                                         take ~28x the bytes of their text) */

/**
 * cs_parse_text:
 * @text: trace text (need not be NUL-terminated)
 * @len: bytes in @text
 * @name: file name used in error messages ("-" for stdin)
 * @error: return location for a #CS_PARSE_ERROR, message "name:line:col: reason"
 *
 * Parses one or more traces (concatenated, or a printed Python list of traces).
 * Returns: (transfer full): the traces, or NULL with @error set
 */
CsTraceList *cs_parse_text  (const char *text, gsize len, const char *name, GError **error);

/** Reads @path ("-" = stdin; any file, FIFO or device) up to cs_parse_max_input_bytes() and
 * parses it.  Errors as cs_parse_text plus CS_PARSE_ERROR_IO ("path: reason") and, over the
 * cap or with an invalid CASTSCOPE_MAX_INPUT_BYTES, LIMIT. */
CsTraceList *cs_parse_file  (const char *path, GError **error);

/** The cap on the bytes of one input: 1 GiB, or CASTSCOPE_MAX_INPUT_BYTES when smaller. */
gsize        cs_parse_max_input_bytes (void);

/** Parses the first trace of @text (convenience for tests). */
CsTrace     *cs_parse_trace (const char *text, const char *name, GError **error);

G_END_DECLS
