/* cs-parse.h: the Thunder trace-text parser (reference/thunder-traces.md section 1).
 *
 * Trace text is data: nothing in it is executed.  Every error carries file:line:col.
 */
#pragma once

#include <glib.h>

#include "cs-ir.h"

G_BEGIN_DECLS

#define CS_PARSE_ERROR (cs_parse_error_quark ())
/** cs_parse_error_quark: the #GQuark of #CS_PARSE_ERROR (codes: #CsParseError). */
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

/** The text formats castscope reads. */
typedef enum
{
  CS_PARSE_FORMAT_AUTO,      /* decided from the content (cs_parse_detect_format()) */
  CS_PARSE_FORMAT_THUNDER,   /* Lightning Thunder's printed traces */
  CS_PARSE_FORMAT_ATEN,      /* torch.compile's printed FX graphs (cs-aten.h) */
} CsParseFormat;

/**
 * cs_parse_detect_format:
 * @text: input text (need not be NUL-terminated)
 * @len: bytes in @text
 *
 * torch.compile's graphs are recognised by a line (colours and log prefixes aside) that starts
 * with `TRACED GRAPH`, `class GraphModule(`, `def forward(self` or holds
 * `= torch.ops.aten.`, before any line of Thunder's (`def computation(`, `# Constructed by`,
 * `import thunder`).  Returns: CS_PARSE_FORMAT_ATEN or CS_PARSE_FORMAT_THUNDER
 */
CsParseFormat cs_parse_detect_format (const char *text, gsize len);

/**
 * cs_parse_set_default_format:
 * @format: the format cs_parse_text() and cs_parse_file() assume; AUTO (the default) detects it
 *
 * Process-wide (the CLI's `--format`); set it before parsing starts.
 */
void         cs_parse_set_default_format (CsParseFormat format);
/** cs_parse_get_default_format: what cs_parse_set_default_format() set. */
CsParseFormat cs_parse_get_default_format (void);
/**
 * cs_parse_format_from_string:
 * @s: "auto", "thunder" or "aten"
 * Returns: FALSE for any other text
 */
gboolean     cs_parse_format_from_string (const char *s, CsParseFormat *out);

/**
 * cs_parse_aten_text:
 * @text: torch.compile graph text (need not be NUL-terminated; UTF-8, checked by the caller)
 * @len: bytes in @text
 * @name: file name for messages
 * @error: return location for a #CS_PARSE_ERROR, message "name:line:col: reason"
 *
 * Parses every FX graph of @text into a trace (see cs-aten.h): the log lines of
 * `TORCH_LOGS=aot_graphs` / `graph_code` or print_readable() output, ANSI colour codes and
 * glog prefixes (`I0101 12:00:00.000000 123 file.py:45] [0/0] [__aot_graphs] `) removed.
 * Lines outside a graph are skipped.  Errors: EMPTY (no graph), SYNTAX, TYPE, INDENT, LIMIT.
 * Returns: (transfer full): the graphs, or NULL with @error set
 */
CsTraceList *cs_parse_aten_text (const char *text, gsize len, const char *name, GError **error);

/**
 * cs_parse_text:
 * @text: trace text (need not be NUL-terminated)
 * @len: bytes in @text
 * @name: file name used in error messages ("-" for stdin)
 * @error: return location for a #CS_PARSE_ERROR, message "name:line:col: reason"
 *
 * Parses one or more traces (concatenated, or a printed Python list of traces).  Text in
 * torch.compile's format (cs_parse_detect_format(), or cs_parse_set_default_format()) goes to
 * cs_parse_aten_text().
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
