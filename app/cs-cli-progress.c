/* cs-cli-progress.c: castscope-cli's progress line (see cs-cli-progress.h). */
#include "cs-config.h"

#include "cs-cli-progress.h"

#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

struct _CsCliProgress
{
  FILE    *out;              /* borrowed */
  gboolean enabled;          /* @out is a terminal */
  gint64   min_interval_us;  /* least time between two updates */
  guint    width;            /* terminal columns */
  gint64   last_us;          /* monotonic time of the last update, 0 = none yet */
  char    *last;             /* (nullable) the text of the line shown (before the cut to the
                                width), NULL when none is */
};

/* The printer of cs_cli_progress_new_stderr() alive now, for cs_cli_progress_clear_stderr(). */
static CsCliProgress *stderr_printer;

CsCliProgress *
cs_cli_progress_new (FILE *out, gboolean is_tty, gint64 min_interval_us, guint width)
{
  CsCliProgress *p = g_new0 (CsCliProgress, 1);

  p->out = out;
  p->enabled = is_tty && out != NULL;
  p->min_interval_us = MAX (min_interval_us, 0);
  p->width = width > 1 ? width : 80;
  return p;
}

CsCliProgress *
cs_cli_progress_new_stderr (void)
{
  struct winsize ws;
  guint width = 0;
  gboolean tty = isatty (STDERR_FILENO) == 1;

  if (tty && ioctl (STDERR_FILENO, TIOCGWINSZ, &ws) == 0)
    width = ws.ws_col;
  stderr_printer = cs_cli_progress_new (stderr, tty, 100 * 1000, width);
  return stderr_printer;
}

void
cs_cli_progress_clear_stderr (void)
{
  cs_cli_progress_clear (stderr_printer);
}

gboolean
cs_cli_progress_enabled (const CsCliProgress *p)
{
  return p != NULL && p->enabled;
}

static void
show (CsCliProgress *p, gboolean force, const char *fmt, va_list ap)
{
  g_autofree char *text = NULL;
  gint64 now;
  glong n;

  if (!cs_cli_progress_enabled (p))
    return;
  now = g_get_monotonic_time ();
  if (!force && p->last_us != 0 && now - p->last_us < p->min_interval_us)
    return;
  text = g_strdup_vprintf (fmt, ap);
  for (char *c = text; *c; c++)
    if (*c == '\n' || *c == '\r')
      *c = ' ';
  if (p->last && strcmp (p->last, text) == 0)
    return;
  /* cut to the width in characters, so that the line never wraps (the next \r would then
   * rewrite only its last row) */
  n = g_utf8_strlen (text, -1);
  if (n > (glong) p->width - 1)
    fprintf (p->out, "\r%.*s\033[K",
             (int) (g_utf8_offset_to_pointer (text, (glong) p->width - 1) - text), text);
  else
    fprintf (p->out, "\r%s\033[K", text);
  fflush (p->out);
  p->last_us = now;
  g_free (p->last);
  p->last = g_steal_pointer (&text);
}

void
cs_cli_progress_set (CsCliProgress *p, const char *fmt, ...)
{
  va_list ap;

  va_start (ap, fmt);
  show (p, FALSE, fmt, ap);
  va_end (ap);
}

void
cs_cli_progress_set_now (CsCliProgress *p, const char *fmt, ...)
{
  va_list ap;

  va_start (ap, fmt);
  show (p, TRUE, fmt, ap);
  va_end (ap);
}

void
cs_cli_progress_clear (CsCliProgress *p)
{
  if (!cs_cli_progress_enabled (p) || p->last == NULL)
    return;
  fputs ("\r\033[K", p->out);
  fflush (p->out);
  g_clear_pointer (&p->last, g_free);
  p->last_us = 0;
}

void
cs_cli_progress_free (CsCliProgress *p)
{
  if (p == NULL)
    return;
  if (p == stderr_printer)
    stderr_printer = NULL;
  cs_cli_progress_clear (p);
  g_free (p->last);
  g_free (p);
}
