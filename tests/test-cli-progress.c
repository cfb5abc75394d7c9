/* test-cli-progress.c: castscope-cli's progress line (app/cs-cli-progress.h) driven with a
 * fake "is a terminal" flag on a memory stream: the exact bytes it writes on a terminal, and
 * that it writes nothing at all on anything else. */
#include "cs-config.h"

#include <stdio.h>
#include <string.h>

#include "cs-cli-progress.h"

typedef struct
{
  char  *buf;    /* open_memstream's buffer */
  size_t len;
  FILE  *f;
} Mem;

static void
mem_open (Mem *m)
{
  m->buf = NULL;
  m->len = 0;
  m->f = open_memstream (&m->buf, &m->len);
  g_assert_nonnull (m->f);
}

/* What was written so far (flushed). */
static const char *
mem_text (Mem *m)
{
  fflush (m->f);
  return m->buf ? m->buf : "";
}

static void
mem_close (Mem *m)
{
  fclose (m->f);
  free (m->buf);
}

/* Not a terminal (a pipe, a file, the tests' spawned commands): not one byte. */
static void
test_not_a_tty (void)
{
  Mem m;
  CsCliProgress *p;

  mem_open (&m);
  p = cs_cli_progress_new (m.f, FALSE, 0, 80);
  g_assert_false (cs_cli_progress_enabled (p));
  cs_cli_progress_set (p, "run: statement %u of %u", 1u, 10u);
  cs_cli_progress_set_now (p, "compiling");
  cs_cli_progress_clear (p);
  cs_cli_progress_set_now (p, "again");
  cs_cli_progress_free (p);
  g_assert_cmpstr (mem_text (&m), ==, "");
  g_assert_cmpuint (m.len, ==, 0);
  mem_close (&m);
  /* NULL printers are no-ops */
  cs_cli_progress_set (NULL, "x");
  cs_cli_progress_clear (NULL);
  cs_cli_progress_free (NULL);
}

/* A terminal: "\r" + text + erase-to-end; the same text twice is written once; the line is
 * cut to width - 1 characters (UTF-8 aware); newlines become spaces; clear erases the line
 * once. */
static void
test_tty (void)
{
  Mem m;
  CsCliProgress *p;

  mem_open (&m);
  p = cs_cli_progress_new (m.f, TRUE, 0, 20);
  g_assert_true (cs_cli_progress_enabled (p));
  cs_cli_progress_set (p, "run: %s %u of %u", "statement", 3u, 9u);
  g_assert_cmpstr (mem_text (&m), ==, "\rrun: statement 3 of\033[K");
  cs_cli_progress_set (p, "run: %s %u of %u", "statement", 3u, 9u);
  g_assert_cmpstr (mem_text (&m), ==, "\rrun: statement 3 of\033[K");
  cs_cli_progress_set (p, "a\nb");
  g_assert_cmpstr (mem_text (&m), ==, "\rrun: statement 3 of\033[K\ra b\033[K");
  cs_cli_progress_clear (p);
  cs_cli_progress_clear (p);
  cs_cli_progress_free (p);   /* nothing shown: writes nothing */
  g_assert_cmpstr (mem_text (&m), ==, "\rrun: statement 3 of\033[K\ra b\033[K\r\033[K");
  mem_close (&m);

  mem_open (&m);
  p = cs_cli_progress_new (m.f, TRUE, 0, 6);
  cs_cli_progress_set (p, "\xc3\xa9t\xc3\xa9 long");   /* "été long": 5 characters kept */
  g_assert_cmpstr (mem_text (&m), ==, "\r\xc3\xa9t\xc3\xa9 l\033[K");
  cs_cli_progress_free (p);   /* erases the line it shows */
  g_assert_cmpstr (mem_text (&m), ==, "\r\xc3\xa9t\xc3\xa9 l\033[K\r\033[K");
  mem_close (&m);
}

/* Updates closer than the interval are dropped, except cs_cli_progress_set_now(). */
static void
test_interval (void)
{
  Mem m;
  CsCliProgress *p;

  mem_open (&m);
  p = cs_cli_progress_new (m.f, TRUE, (gint64) G_USEC_PER_SEC * 3600, 80);
  cs_cli_progress_set (p, "one");
  cs_cli_progress_set (p, "two");
  cs_cli_progress_set_now (p, "three");
  cs_cli_progress_set (p, "four");
  g_assert_cmpstr (mem_text (&m), ==, "\rone\033[K\rthree\033[K");
  cs_cli_progress_clear (p);
  /* after a clear the next update shows at once */
  cs_cli_progress_set (p, "five");
  g_assert_cmpstr (mem_text (&m), ==, "\rone\033[K\rthree\033[K\r\033[K\rfive\033[K");
  cs_cli_progress_free (p);
  mem_close (&m);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/cli/progress/not-a-tty", test_not_a_tty);
  g_test_add_func ("/cli/progress/tty", test_tty);
  g_test_add_func ("/cli/progress/interval", test_interval);
  return g_test_run ();
}
