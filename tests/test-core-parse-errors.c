/* test-core-parse-errors.c: malformed input gives a located error, never a crash or a hang.
 *
 * Each case states the exact "file:line:col" the message must start with (columns are 1-based
 * bytes, counted by hand from the input written next to it), the error code, and a phrase of
 * the reason.  The last tests mutate the shared traces (truncations, byte flips, line
 * duplication) with a fixed seed: every result must be a trace list or a located error.
 */
#include "cs-config.h"

#include "cs-compare.h"
#include "cs-parse.h"
#include "cs-print.h"
#include "cs-validate.h"

#include <fcntl.h>
#include <glib/gstdio.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct
{
  const char *name;      /* g_test case name */
  const char *text;      /* input */
  CsParseError code;     /* expected code */
  const char *where;     /* expected message prefix "t:LINE:COL: " */
  const char *reason;    /* a phrase the message contains */
  gsize       len;       /* bytes of text when it holds a NUL; 0 = strlen */
} ErrorCase;

static const ErrorCase cases[] = {
  /* "  t0 = prims.add(a," is 19 bytes: the missing ')' is at column 20 */
  { "truncated-call", "def f(a):\n  t0 = prims.add(a,\n", CS_PARSE_ERROR_SYNTAX, "t:2:20: ",
    "')' to close the argument list" },
  /* "  t0 = prims.reshape(a, [8, 16))": the ')' at column 31 cannot close the '[' */
  { "unbalanced-brackets", "def f(a):\n  t0 = prims.reshape(a, [8, 16))\n", CS_PARSE_ERROR_SYNTAX,
    "t:2:31: ", "',' or ']'" },
  /* tuple never closed: the line is 31 bytes, so the end of line is column 32 */
  { "unclosed-tuple", "def f(a):\n  t0 = prims.reshape(a, (8, 16)\n", CS_PARSE_ERROR_SYNTAX,
    "t:2:32: ", "')'" },
  /* `  # a: "cuda:0 bf17[8, 16]"`: the dtype starts at column 16 */
  { "bad-dtype", "def f(a):\n  # a: \"cuda:0 bf17[8, 16]\"\n", CS_PARSE_ERROR_TYPE, "t:2:16: ",
    "unknown dtype 'bf17'" },
  /* device `cuda0` at column 9 */
  { "bad-device", "def f(a):\n  # a: \"cuda0 f32[2]\"\n", CS_PARSE_ERROR_TYPE, "t:2:9: ",
    "unknown device" },
  /* shape "[2, x]": the x is column 20 */
  { "bad-dim", "def f(a):\n  # a: \"cpu f32[2, x]\"\n", CS_PARSE_ERROR_TYPE, "t:2:20: ",
    "expected a dimension" },
  /* missing closing quote: the opening quote is column 8 */
  { "unterminated-type", "def f(a):\n  # a: \"cpu f32[2]\n  t0 = f(a)\n", CS_PARSE_ERROR_TYPE,
    "t:2:8: ", "missing closing" },
  /* a type comment with an unknown dtype after a call: `  t0 = f(a)  # t0: "cpu q8[]"`, q8 at 25 */
  { "bad-type-comment", "def f(a):\n  t0 = f(a)  # t0: \"cpu q8[]\"\n", CS_PARSE_ERROR_TYPE,
    "t:2:25: ", "unknown dtype 'q8'" },
  /* three spaces of indentation: column 4 */
  { "odd-indent", "def f(a):\n   t0 = f(a)\n", CS_PARSE_ERROR_INDENT, "t:2:4: ",
    "multiples of 2" },
  /* a subsymbol comment two levels deeper than anything open: column 7 */
  { "orphan-subsymbol", "def f(a):\n  # a: \"cpu f32[2]\"\n      # t0 = prims.neg(a)  # t0: \"cpu f32[2]\"\n",
    CS_PARSE_ERROR_INDENT, "t:3:7: ", "no statement at 4 spaces" },
  /* an indented statement that is not a comment */
  { "indented-statement", "def f(a):\n  t0 = f(a)\n    t1 = g(t0)\n", CS_PARSE_ERROR_INDENT,
    "t:3:5: ", "unexpected indentation" },
  { "tab-indent", "def f(a):\n  \tt0 = f(a)\n", CS_PARSE_ERROR_INDENT, "t:2:3: ", "tab" },
  /* the 0xff byte is line 3 column 3 */
  { "binary-garbage", "def f(a):\n  return a\nab\xff\xfe\x01\x02", CS_PARSE_ERROR_ENCODING, "t:3:3: ",
    "not UTF-8" },
  { "empty-file", "", CS_PARSE_ERROR_EMPTY, "t:1:1: ", "empty input" },
  /* only comments and blank lines: reported at the last line */
  { "no-trace", "# just a comment\n\n", CS_PARSE_ERROR_EMPTY, "t:2:1: ", "no trace found" },
  { "not-a-trace", "hello world\n", CS_PARSE_ERROR_SYNTAX, "t:1:1: ", "not part of a trace header" },
  { "no-def", "import torch\n\n@torch.no_grad()\n", CS_PARSE_ERROR_SYNTAX, "t:3:17: ",
    "ends before the trace's 'def' line" },
  { "bad-signature", "def f(a:\n  return a\n", CS_PARSE_ERROR_SYNTAX, "t:1:8: ", "',' or ')'" },
  /* `  t0 = f('abc)`: the string starts at column 10 */
  { "unterminated-string", "def f(a):\n  t0 = f('abc)\n", CS_PARSE_ERROR_SYNTAX, "t:2:10: ",
    "unterminated string" },
  /* the type comment names another proxy: column 16 */
  { "type-comment-name", "def f(a):\n  t0 = f(a)  # t9: \"cpu f32[]\"\n", CS_PARSE_ERROR_SYNTAX,
    "t:2:16: ", "names 't9' but the statement binds 't0'" },
  { "int-overflow", "def f(a):\n  t0 = f(a, 99999999999999999999)\n", CS_PARSE_ERROR_LIMIT, "t:2:13: ",
    "does not fit in 64 bits" },
  { "garbage-after-call", "def f(a):\n  t0 = f(a) junk\n", CS_PARSE_ERROR_SYNTAX, "t:2:12: ",
    "end of line or '  # '" },
  /* an unpack whose continuation never comes */
  { "unpack-eof", "def f(C0):\n  t0, t1, \\\n", CS_PARSE_ERROR_SYNTAX, "t:2:12: ", "past the end" },
  { "unpack-bad-continuation", "def f(C0):\n  t0, \\\n    t1, = C0\n", CS_PARSE_ERROR_INDENT, "t:3:1: ",
    "continuation" },
  { "del-nothing", "def f(a):\n  del \n", CS_PARSE_ERROR_SYNTAX, "t:2:7: ", "a name to delete" },
  /* a printed list without its closing ']' (last line "  return a", 10 bytes + the list indent) */
  { "list-unclosed", "[def f(a):\n   return a\n", CS_PARSE_ERROR_SYNTAX, "t:2:12: ", "end with ']'" },
  { "list-bad-indent", "[def f(a):\n  return a\nx]\n", CS_PARSE_ERROR_INDENT, "t:3:1: ", "one-space" },
  /* UTF-8 check: a truncated 2-byte sequence after 27 ASCII bytes ("  # 0123456789012" is 17
   * bytes, so the 0xc3 is column 18 of line 2) */
  { "bad-utf8-after-ascii", "def f(a):\n  # 0123456789012\xc3(\n", CS_PARSE_ERROR_ENCODING, "t:2:18: ",
    "not UTF-8" },
  /* a NUL after valid non-ASCII text: "  # d\xc3\xa9j\xc3\xa0 " is 11 bytes, the NUL is byte 12 */
  { "nul-after-utf8", "def f(a):\n  # d\xc3\xa9j\xc3\xa0 \x00\n", CS_PARSE_ERROR_ENCODING, "t:2:12: ",
    "not UTF-8", 10 + 11 + 1 + 1 },
  { "value-garbage", "def f(a):\n  t0 = f(a, @)\n", CS_PARSE_ERROR_SYNTAX, "t:2:13: ", "expected a value" },
  /* Names (issue 21 item 5, cs_validate_trace), each at the use.  "  t1 = prims.neg(" is 16
   * bytes: t0 is column 18 of line 2, defined on line 3 */
  { "use-before-def", "def f(a):\n  t1 = prims.neg(t0)\n  t0 = prims.neg(a)\n  return t1\n",
    CS_PARSE_ERROR_NAME, "t:2:18: ", "'t0' is used before it is defined (on line 3)" },
  /* "  t0 = prims.add(a, " is 20 bytes: zz at column 21 */
  { "undefined-name", "def f(a):\n  t0 = prims.add(a, zz)\n  return t0\n", CS_PARSE_ERROR_NAME,
    "t:2:21: ", "'zz' is not defined: not a parameter of f()" },
  /* inside a tuple argument, after a keyword: "  t0 = prims.reshape(a, shape=(2, " is 34
   * bytes */
  { "undefined-name-nested", "def f(a):\n  t0 = prims.reshape(a, shape=(2, n))\n  return t0\n",
    CS_PARSE_ERROR_NAME, "t:2:35: ", "'n' is not defined" },
  /* the return reads t1 before line 3 makes it: "  return " is 9 bytes */
  { "return-before-def", "def f(a):\n  return t1\n  t1 = prims.neg(a)\n", CS_PARSE_ERROR_NAME,
    "t:2:10: ", "'t1' is used before it is defined (on line 3)" },
  /* del of a name made later: "  del " is 6 bytes */
  { "del-before-def", "def f(a):\n  del t0\n  t0 = prims.neg(a)\n  return a\n", CS_PARSE_ERROR_NAME,
    "t:2:7: ", "'t0' is used before it is defined (on line 3)" },
  /* an unpack of a collection made later: "  t0, t1, = " is 12 bytes */
  { "unpack-before-def", "def f(a):\n  t0, t1, = c0\n  c0 = prims.foo(a)\n  return t0\n",
    CS_PARSE_ERROR_NAME, "t:2:13: ", "'c0' is used before it is defined (on line 3)" },
  /* inside a decomposition: the first subsymbol reads t2, which the second makes;
   * "    # t1 = prims.neg(" is 21 bytes: t2 at column 22 */
  { "sub-use-before-def", "def f(a):\n  t1 = ltorch.neg(a)\n    # t1 = prims.neg(t2)\n"
    "    # t2 = prims.neg(a)\n  return t1\n", CS_PARSE_ERROR_NAME, "t:3:22: ",
    "'t2' is used before it is defined (on line 4)" },
  /* Python's "duplicate argument 'a' in function definition": "def f(a, b, " is 12 bytes */
  { "duplicate-parameter", "def f(a, b, a):\n  return a\n", CS_PARSE_ERROR_SYNTAX, "t:1:13: ",
    "parameter 'a' appears twice in the signature of f()" },
  /* the second trace of a printed list: the column counts the list's one-space indent
   * (" t1 = prims.neg(" after the indent: "   t1 = prims.neg(" is 18 bytes) */
  { "list-use-before-def", "[def f(a):\n   return a,\n def g(a):\n   t1 = prims.neg(t0)\n"
    "   t0 = prims.neg(a)\n   return t1]\n", CS_PARSE_ERROR_NAME, "t:4:19: ",
    "'t0' is used before it is defined (on line 5)" },
};

static void
run_case (gconstpointer data)
{
  const ErrorCase *c = data;
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTraceList) list = cs_parse_text (c->text, c->len ? c->len : strlen (c->text), "t", &error);

  g_assert_null (list);
  g_assert_error (error, CS_PARSE_ERROR, (gint) c->code);
  if (!g_str_has_prefix (error->message, c->where) || strstr (error->message, c->reason) == NULL)
    g_error ("case %s: message \"%s\" should start with \"%s\" and contain \"%s\"", c->name,
             error->message, c->where, c->reason);
}

static void
test_long_line (void)
{
  /* a 10 MB line: over CS_PARSE_MAX_LINE_BYTES (4 MiB), reported at the first byte past it */
  gsize n = 10 * 1000 * 1000;
  g_autofree char *text = g_malloc (n + 32);
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTraceList) list = NULL;
  g_autofree char *where = g_strdup_printf ("t:2:%d: ", CS_PARSE_MAX_LINE_BYTES + 1);

  memcpy (text, "def f(a):\n  # ", 14);
  memset (text + 14, 'x', n);
  text[14 + n] = '\n';
  list = cs_parse_text (text, 15 + n, "t", &error);
  g_assert_null (list);
  g_assert_error (error, CS_PARSE_ERROR, CS_PARSE_ERROR_LIMIT);
  g_assert_true (g_str_has_prefix (error->message, where));
}

static void
test_deep_brackets (void)
{
  /* 100000 '(' after "  return ": the 65th bracket (column 10 + 64 = 74) is one too deep */
  gsize n = 100000;
  GString *s = g_string_new ("def f(a):\n  return ");
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTraceList) list = NULL;

  for (gsize i = 0; i < n; i++)
    g_string_append_c (s, '(');
  g_string_append_c (s, '\n');
  list = cs_parse_text (s->str, s->len, "t", &error);
  g_string_free (s, TRUE);
  g_assert_null (list);
  g_assert_error (error, CS_PARSE_ERROR, CS_PARSE_ERROR_LIMIT);
  g_assert_cmpstr (error->message, ==, "t:2:74: brackets nested deeper than 64 levels");
}

static void
test_deep_brackets_in_type_and_targets (void)
{
  /* nested targets (((((... = f() count against the same limit: first '(' at column 3 */
  GString *s = g_string_new ("def f(a):\n  ");
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTraceList) list = NULL;

  for (int i = 0; i < 1000; i++)
    g_string_append_c (s, '(');
  g_string_append (s, "t0 = f(a)\n");
  list = cs_parse_text (s->str, s->len, "t", &error);
  g_string_free (s, TRUE);
  g_assert_null (list);
  g_assert_error (error, CS_PARSE_ERROR, CS_PARSE_ERROR_LIMIT);
  g_assert_true (g_str_has_prefix (error->message, "t:2:67: "));
}

static void
test_deep_subsymbols (void)
{
  /* Subsymbol comments each one level deeper: level 64 (body line 65, file line 66) is over the
   * limit; its indent is 2 * 65 = 130 spaces, so the error is at column 131. */
  GString *s = g_string_new ("def f(a):\n");
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTraceList) list = NULL;

  for (int d = 0; d < 200; d++)
    {
      for (int k = 0; k < 2 * (d + 1); k++)
        g_string_append_c (s, ' ');
      if (d > 0)
        g_string_append (s, "# ");
      g_string_append_printf (s, "t%d = prims.neg(a)\n", d);
    }
  list = cs_parse_text (s->str, s->len, "t", &error);
  g_string_free (s, TRUE);
  g_assert_null (list);
  g_assert_error (error, CS_PARSE_ERROR, CS_PARSE_ERROR_LIMIT);
  g_assert_true (g_str_has_prefix (error->message, "t:66:131: "));
}

static void
test_many_traces (void)
{
  /* 5000 one-line traces "def fN():": trace 4097 (line 4097) is over CS_PARSE_MAX_TRACES */
  GString *s = g_string_new (NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTraceList) list = NULL;

  for (int i = 0; i < 5000; i++)
    g_string_append_printf (s, "def f%d():\n", i);
  list = cs_parse_text (s->str, s->len, "t", &error);
  g_string_free (s, TRUE);
  g_assert_null (list);
  g_assert_error (error, CS_PARSE_ERROR, CS_PARSE_ERROR_LIMIT);
  g_assert_cmpstr (error->message, ==, "t:4097:1: more than 4096 traces in one input");
}

static void
test_many_lines (void)
{
  /* CS_PARSE_MAX_LINES + 1 lines of "  del a": the first line past the limit is reported */
  gsize n = CS_PARSE_MAX_LINES + 1;
  GString *s = g_string_sized_new (n * 8 + 16);
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTraceList) list = NULL;
  g_autofree char *want = g_strdup_printf ("t:%d:1: more than %d lines", CS_PARSE_MAX_LINES + 1,
                                           CS_PARSE_MAX_LINES);

  g_string_append (s, "def f(a):\n");
  for (gsize i = 1; i < n; i++)
    g_string_append (s, "  del a\n");
  list = cs_parse_text (s->str, s->len, "t", &error);
  g_string_free (s, TRUE);
  g_assert_null (list);
  g_assert_error (error, CS_PARSE_ERROR, CS_PARSE_ERROR_LIMIT);
  if (!g_str_has_prefix (error->message, want))
    g_error ("got \"%s\", want it to start with \"%s\"", error->message, want);
}

static void
test_file_errors (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTraceList) list = cs_parse_file ("/nonexistent/castscope/trace.txt", &error);
  g_autofree char *dir = g_dir_make_tmp ("cs-parse-XXXXXX", NULL);

  g_assert_null (list);
  g_assert_error (error, CS_PARSE_ERROR, CS_PARSE_ERROR_IO);
  /* no line and column: nothing was read */
  g_assert_cmpstr (error->message, ==, "/nonexistent/castscope/trace.txt: cannot read: No such "
                   "file or directory");
  g_clear_error (&error);
  list = cs_parse_file (dir, &error);
  g_assert_null (list);
  g_assert_error (error, CS_PARSE_ERROR, CS_PARSE_ERROR_IO);
  g_assert_nonnull (strstr (error->message, "directory"));
  g_rmdir (dir);
}

/* Every outcome is a list or an error "name:LINE:COL: reason" with LINE inside the input. */
static void
check_outcome (const char *text, gsize len)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTraceList) list = cs_parse_text (text, len, "m", &error);
  guint line = 0, col = 0, n_lines = 1;

  if (list != NULL)
    {
      /* what parses must print, and the printed text must parse into an equal trace */
      g_autofree char *printed = cs_print_trace_list (list, CS_PRINT_DEFAULT);
      g_autoptr(CsTraceList) again = cs_parse_text (printed, strlen (printed), "printed", &error);
      if (again == NULL)
        g_error ("printed text of a mutated input does not parse: %s\n--- input:\n%.*s\n--- printed:\n%s",
                 error->message, (int) len, text, printed);
      g_assert_cmpuint (again->traces->len, ==, list->traces->len);
      for (guint i = 0; i < list->traces->len; i++)
        {
          g_autoptr(GString) why = g_string_new (NULL);
          if (!cs_trace_equal (list->traces->pdata[i], again->traces->pdata[i], why))
            g_error ("mutated input: trace %u differs after print + parse: %s\n--- input:\n%.*s", i,
                     why->str, (int) len, text);
        }
      return;
    }
  g_assert_nonnull (error);
  g_assert_true (error->domain == CS_PARSE_ERROR);
  if (sscanf (error->message, "m:%u:%u: ", &line, &col) != 2)
    g_error ("unlocated error: %s", error->message);
  for (gsize i = 0; i < len; i++)
    n_lines += text[i] == '\n';
  g_assert_cmpuint (line, >=, 1);
  g_assert_cmpuint (line, <=, n_lines);
  g_assert_cmpuint (col, >=, 1);
}

static void
test_mutations (void)
{
  const char *dir = g_getenv ("CS_SHARED_TRACES");
  static const char *files[] = { "seed_foo_bwd.txt", "nb_backward_traces_list.txt",
                                 "thunder_nvfuser_b_mlp_gelu_default_final_bwd.txt",
                                 "docs_inspecting_traces_add_mul.txt", "pr529_prologue.txt",
                                 "nb_sdpa_initial_decomposition.txt", "issue2729_int_fusion_unwrap_return.txt",
                                 "thunder_a_seed_matmul_final_fwd.txt", "pr1113_literal_outputs_underscore.txt" };
  g_autoptr(GRand) rand = g_rand_new_with_seed (20261129);
  guint n_runs = 0;
  guint n_mut = g_getenv ("CS_PARSE_MUTATIONS") ? (guint) atoi (g_getenv ("CS_PARSE_MUTATIONS")) : 300;

  if (dir == NULL || !g_file_test (dir, G_FILE_TEST_IS_DIR))
    {
      g_test_skip ("CS_SHARED_TRACES is not a folder");
      return;
    }
  for (gsize f = 0; f < G_N_ELEMENTS (files); f++)
    {
      g_autofree char *path = g_build_filename (dir, files[f], NULL);
      g_autofree char *text = NULL;
      gsize len;

      g_assert_true (g_file_get_contents (path, &text, &len, NULL));
      /* truncation at every 7th byte */
      for (gsize cut = 0; cut < len; cut += 7, n_runs++)
        check_outcome (text, cut);
      /* random edits: replace, insert or delete a byte; duplicate or drop a line
       * (CS_PARSE_MUTATIONS per file, 300 by default) */
      for (guint k = 0; k < n_mut; k++, n_runs++)
        {
          static const char bytes[] = "()[]{},:\"'# \n\\=_.-0a\t\xff";
          GString *m = g_string_new_len (text, (gssize) len);
          guint edits = 1 + (guint) g_rand_int_range (rand, 0, 3);
          for (guint e = 0; e < edits && m->len > 0; e++)
            {
              gsize pos = (gsize) g_rand_int_range (rand, 0, (gint32) m->len);
              char b = bytes[g_rand_int_range (rand, 0, sizeof bytes - 1)];
              switch (g_rand_int_range (rand, 0, 5))
                {
                case 0: m->str[pos] = b; break;
                case 1: g_string_insert_c (m, (gssize) pos, b); break;
                case 2: g_string_erase (m, (gssize) pos, 1); break;
                case 3:
                case 4:
                  {
                    /* the line holding pos: duplicate it (3) or drop it (4) */
                    gsize a = pos, z = pos;
                    while (a > 0 && m->str[a - 1] != '\n')
                      a--;
                    while (z < m->len && m->str[z] != '\n')
                      z++;
                    if (z < m->len)
                      z++;
                    if (g_rand_int_range (rand, 0, 5) == 3 || e % 2 == 0)
                      {
                        g_autofree char *line = g_strndup (m->str + a, z - a);
                        g_string_insert (m, (gssize) a, line);
                      }
                    else
                      g_string_erase (m, (gssize) a, (gssize) (z - a));
                  }
                  break;
                }
            }
          check_outcome (m->str, m->len);
          g_string_free (m, TRUE);
        }
    }
  g_test_message ("%u mutated inputs parsed or rejected with a located error", n_runs);
}

/* Issue 21 item 6: one cap for every input cs_parse_file reads (the CLI's files and stdin, the
 * app's Open): a regular file over the cap is refused from its size, a FIFO once the cap is
 * passed, /dev/zero at its first NUL byte.  CASTSCOPE_MAX_INPUT_BYTES lowers the 1 GiB cap to
 * 4096 bytes here so that no test reads a gigabyte. */
static gpointer
fifo_writer (gpointer path)
{
  /* 1 MiB of comment lines (a valid trace prefix), far over the 4096-byte cap */
  int fd = g_open (path, O_WRONLY, 0);
  char line[64];
  gsize sent = 0;

  memset (line, ' ', sizeof line);
  line[0] = '#';
  line[sizeof line - 1] = '\n';
  g_assert_cmpint (fd, >=, 0);
  while (sent < ((gsize) 1 << 20))
    {
      gssize n = write (fd, line, sizeof line);
      if (n <= 0)
        break;   /* the reader closed the FIFO (EPIPE): it stopped at the cap */
      sent += (gsize) n;
    }
  close (fd);
  return GSIZE_TO_POINTER (sent);
}

/* What cs_validate_trace lets through: context names, dotted names, builtins, a name only
 * the return of an excerpt reads, a name bound by an input annotation of a trace without a
 * signature, a decomposition that reads what the statements before it made, and a top-level
 * statement that reads what an earlier decomposition made. */
static void
test_names_accepted (void)
{
  static const char * const ok[] = {
    "def f(a):\n  t0 = ltorch.to(a, _torch_memory_format_0, torch.float32, float)\n  return t0\n",
    "def f(a):\n  t0 = prims.neg(a)\n  return {'output': t0, 'flat_args': [a, t1866]}\n",
    "# No signature available\n  # a: \"cpu f32[2]\"\n  t0 = prims.neg(a)\n  return t0\n",
    "def f(a):\n  t0 = prims.neg(a)\n  t1 = ltorch.mul(t0, a)\n    # t2 = prims.mul(t0, a)\n"
    "    # t1 = prims.neg(t2)\n  return t1\n",
    /* a top-level statement reading what an earlier decomposition made */
    "def f(a):\n  t1 = ltorch.neg(a)\n    # t2 = prims.neg(a)\n    # t1 = prims.neg(t2)\n"
    "  t3 = prims.neg(t2)\n  return t3\n",
  };

  for (gsize i = 0; i < G_N_ELEMENTS (ok); i++)
    {
      g_autoptr(GError) error = NULL;
      g_autoptr(CsTraceList) list = cs_parse_text (ok[i], strlen (ok[i]), "t", &error);
      if (list == NULL)
        g_error ("case %" G_GSIZE_FORMAT ": %s", i, error->message);
    }
}

/* The return statement's names, which cs_validate_trace() lets through for excerpts, are
 * checked by cs_validate_return() before a transform (cs_pipeline_run() refuses them). */
static void
test_return_names (void)
{
  static const char excerpt[] =
    "def f(a):\n  t0 = prims.neg(a)\n  return {'output': t0, 'flat_args': [a, t1866]}\n";
  static const char bound[] =
    "def f(a):\n  t0 = prims.neg(a)\n  return {'output': t0, 'flat_args': [a, float, _ctx_0]}\n";
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTraceList) list = cs_parse_text (excerpt, strlen (excerpt), "t", &error);
  g_autoptr(CsTraceList) list2 = NULL;

  g_assert_no_error (error);
  g_assert_false (cs_validate_return (list->traces->pdata[0], &error));
  g_assert_error (error, CS_PARSE_ERROR, CS_PARSE_ERROR_NAME);
  /* at the return statement: line 3, column 3 */
  g_assert_true (g_str_has_suffix (error->message, ":3:3: 't1866' is returned but not defined: "
                                   "not a parameter of f() and not made by any statement of "
                                   "the trace"));
  g_clear_error (&error);
  /* builtins and context names are constants, as in cs_validate_trace() */
  list2 = cs_parse_text (bound, strlen (bound), "t", &error);
  g_assert_no_error (error);
  g_assert_true (cs_validate_return (list2->traces->pdata[0], &error));
  g_assert_no_error (error);
}

static void
test_input_cap (void)
{
  g_autofree char *dir = g_dir_make_tmp ("castscope-cap-XXXXXX", NULL);
  g_autofree char *big = g_build_filename (dir, "big.txt", NULL);
  g_autofree char *fifo = g_build_filename (dir, "fifo", NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTraceList) list = NULL;
  g_autofree char *want = NULL;
  GString *text = g_string_new (NULL);
  GThread *writer;

  g_assert_nonnull (dir);
  signal (SIGPIPE, SIG_IGN);   /* the writer sees EPIPE when the parser stops reading */
  g_assert_cmpuint (cs_parse_max_input_bytes (), ==, 1u << 30);
  g_setenv ("CASTSCOPE_MAX_INPUT_BYTES", "4096", TRUE);
  g_assert_cmpuint (cs_parse_max_input_bytes (), ==, 4096);

  /* a regular file of 4097 bytes: refused from its size */
  while (text->len < 4097)
    g_string_append_c (text, '#');
  g_string_truncate (text, 4096);
  g_string_append_c (text, '\n');
  g_assert_cmpuint (text->len, ==, 4097);
  g_assert_true (g_file_set_contents (big, text->str, (gssize) text->len, NULL));
  list = cs_parse_file (big, &error);
  g_assert_null (list);
  g_assert_error (error, CS_PARSE_ERROR, CS_PARSE_ERROR_LIMIT);
  want = g_strdup_printf ("%s: input larger than 4096 bytes (4 KiB), the cap "
                          "CASTSCOPE_MAX_INPUT_BYTES sets (unset it for the 1 GiB cap); is this a "
                          "trace file?", big);
  if (!g_str_has_prefix (error->message, want))
    g_error ("got \"%s\", want it to start with \"%s\"", error->message, want);
  g_clear_error (&error);
  g_clear_pointer (&want, g_free);

  /* the same text less its last byte is exactly at the cap: read and parsed (one comment
   * line and no trace: the parser's own "no trace" error, not the cap) */
  g_assert_true (g_file_set_contents (big, text->str, 4096, NULL));
  list = cs_parse_file (big, &error);
  g_assert_null (list);
  g_assert_nonnull (error);
  g_assert_false (g_error_matches (error, CS_PARSE_ERROR, CS_PARSE_ERROR_LIMIT));
  g_clear_error (&error);

  /* a FIFO that would deliver 1 MiB: refused once the cap is passed */
  g_assert_cmpint (mkfifo (fifo, 0600), ==, 0);
  writer = g_thread_new ("fifo-writer", fifo_writer, fifo);
  list = cs_parse_file (fifo, &error);
  g_assert_null (list);
  g_assert_error (error, CS_PARSE_ERROR, CS_PARSE_ERROR_LIMIT);
  want = g_strdup_printf ("%s: input larger than 4096 bytes", fifo);
  if (!g_str_has_prefix (error->message, want))
    g_error ("got \"%s\", want it to start with \"%s\"", error->message, want);
  g_clear_error (&error);
  g_clear_pointer (&want, g_free);
  /* the writer could send at most the cap plus what the pipe buffers before it saw EPIPE */
  g_assert_cmpuint (GPOINTER_TO_SIZE (g_thread_join (writer)), <, (gsize) 1 << 20);

  /* /dev/zero, endless: its first byte is a NUL, which no trace holds */
  g_unsetenv ("CASTSCOPE_MAX_INPUT_BYTES");
  list = cs_parse_file ("/dev/zero", &error);
  g_assert_null (list);
  g_assert_error (error, CS_PARSE_ERROR, CS_PARSE_ERROR_ENCODING);
  g_assert_true (g_str_has_prefix (error->message, "/dev/zero:1:1: not UTF-8 text (byte 0x00)"));
  g_clear_error (&error);

  /* a value that is not a smaller positive number is an error (cs_parse_max_input_bytes()
   * reports the 1 GiB cap it leaves) */
  {
    static const char * const bad[] = { "0", "99999999999", "abc", "64K", "-5", "" };

    g_assert_true (g_file_set_contents (big, "# small\n", -1, NULL));
    for (gsize i = 0; i < G_N_ELEMENTS (bad); i++)
      {
        g_autofree char *msg = g_strdup_printf ("CASTSCOPE_MAX_INPUT_BYTES='%s' is not a number "
                                                "of bytes from 1 to 1073741824 (it lowers the "
                                                "1 GiB cap on one input; unset it for that cap)",
                                                bad[i]);

        g_setenv ("CASTSCOPE_MAX_INPUT_BYTES", bad[i], TRUE);
        g_assert_cmpuint (cs_parse_max_input_bytes (), ==, 1u << 30);
        list = cs_parse_file (big, &error);
        g_assert_null (list);
        g_assert_error (error, CS_PARSE_ERROR, CS_PARSE_ERROR_LIMIT);
        g_assert_cmpstr (error->message, ==, msg);
        g_clear_error (&error);
      }
  }
  g_unsetenv ("CASTSCOPE_MAX_INPUT_BYTES");

  g_remove (big);
  g_remove (fifo);
  g_rmdir (dir);
  g_string_free (text, TRUE);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *path = g_strdup_printf ("/core/parse/errors/%s", cases[i].name);
      g_test_add_data_func (path, &cases[i], run_case);
    }
  g_test_add_func ("/core/parse/errors/long-line", test_long_line);
  g_test_add_func ("/core/parse/errors/deep-brackets", test_deep_brackets);
  g_test_add_func ("/core/parse/errors/deep-targets", test_deep_brackets_in_type_and_targets);
  g_test_add_func ("/core/parse/errors/deep-subsymbols", test_deep_subsymbols);
  g_test_add_func ("/core/parse/errors/file", test_file_errors);
  g_test_add_func ("/core/parse/errors/many-traces", test_many_traces);
  g_test_add_func ("/core/parse/errors/many-lines", test_many_lines);
  g_test_add_func ("/core/parse/errors/mutations", test_mutations);
  g_test_add_func ("/core/parse/errors/input-cap", test_input_cap);
  g_test_add_func ("/core/parse/errors/names-accepted", test_names_accepted);
  g_test_add_func ("/core/parse/errors/return-names", test_return_names);
  return g_test_run ();
}
