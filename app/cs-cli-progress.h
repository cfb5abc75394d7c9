/* cs-cli-progress.h: one self-overwriting status line on a terminal for castscope-cli's long
 * steps (the CPU reference statement by statement, the GPU compile and run, bench's
 * workloads).
 *
 * Shown only when the stream is a terminal: with stderr redirected (a pipe, a file, the
 * tests) nothing at all is written, so error output stays exactly what it was.  Each update
 * rewrites the line ("\r", the text cut to the terminal's width, "\033[K" to erase the rest);
 * cs_cli_progress_clear() erases it before a command prints its report or an error.
 */
#pragma once

#include <glib.h>
#include <stdio.h>

G_BEGIN_DECLS

typedef struct _CsCliProgress CsCliProgress;

/**
 * cs_cli_progress_new:
 * @out: the stream the line goes to (borrowed; outlives the printer)
 * @is_tty: whether @out is a terminal; FALSE makes every call a no-op
 * @min_interval_us: updates closer together than this many microseconds are dropped (0: none);
 *   cs_cli_progress_set_now() always prints
 * @width: columns of the terminal (the line is cut to @width - 1 characters); 0 for 80
 *
 * The printer with its terminal test given (for tests: a memory stream with @is_tty TRUE).
 * Returns: (transfer full): the printer
 */
CsCliProgress *cs_cli_progress_new        (FILE          *out,
                                           gboolean       is_tty,
                                           gint64         min_interval_us,
                                           guint          width);

/**
 * cs_cli_progress_new_stderr:
 *
 * The printer castscope-cli uses: on stderr, enabled when isatty(2), at most 10 updates a
 * second, the width from the terminal (TIOCGWINSZ).
 * Returns: (transfer full): the printer
 */
CsCliProgress *cs_cli_progress_new_stderr (void);

/** cs_cli_progress_enabled: TRUE when the printer writes anything (its stream is a terminal). */
gboolean       cs_cli_progress_enabled    (const CsCliProgress *p);

/**
 * cs_cli_progress_set:
 * @p: (nullable): a printer; NULL does nothing
 * @fmt: printf format of the line (one line, no newline)
 *
 * Shows the line, unless the last one was shown less than the interval ago or is the same.
 */
void           cs_cli_progress_set        (CsCliProgress *p,
                                           const char    *fmt,
                                           ...) G_GNUC_PRINTF (2, 3);

/** cs_cli_progress_set_now: cs_cli_progress_set() that ignores the interval (a new step). */
void           cs_cli_progress_set_now    (CsCliProgress *p,
                                           const char    *fmt,
                                           ...) G_GNUC_PRINTF (2, 3);

/** cs_cli_progress_clear: erases the line if one is shown (@p may be NULL). */
void           cs_cli_progress_clear      (CsCliProgress *p);

/**
 * cs_cli_progress_clear_stderr:
 *
 * Erases the line of the cs_cli_progress_new_stderr() printer alive now, if any: cs_cli_error()
 * calls it so that a message never lands on the end of a progress line.
 */
void           cs_cli_progress_clear_stderr (void);

/** cs_cli_progress_free: clears the line and frees @p (NULL is fine). */
void           cs_cli_progress_free       (CsCliProgress *p);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (CsCliProgress, cs_cli_progress_free)

G_END_DECLS
