/* cs-parse.c: the Lightning Thunder trace-text parser.
 *
 * Reads what TraceCtx.python() / print(trace) print (thunder/core/trace.py, symbol.py,
 * prims.py printers, codeutils.prettyprint) into the IR of cs-ir.h.  The grammar and its edge
 * cases are reference/thunder-traces.md section 1 (1.5 grammar, 1.6 checklist).
 *
 * Design:
 *  - The input is validated as UTF-8, split into lines (each at most CS_PARSE_MAX_LINE_BYTES)
 *    and, for a printed Python list of traces, stripped of the list's `[`, one-space indent
 *    and `,` separators.  Traces are then cut at column-0 header lines.
 *  - Body lines are classified by indentation: 2 spaces is a top-level statement; a comment
 *    line 2*(k+1) spaces deep whose text has statement shape is a subsymbol of the statement
 *    open at depth k-1 (the nesting is kept on an explicit stack, bounded by
 *    CS_PARSE_MAX_DEPTH).
 *  - Values are read by a recursive-descent reader whose depth is bounded by
 *    CS_PARSE_MAX_DEPTH (bracket nesting), so no input recurses without bound.
 *  - Identifiers are resolved after the whole trace is read: a name bound anywhere (target,
 *    unpack, annotation, signature parameter) is a proxy; others stay CS_VALUE_NAME (or become
 *    a bare-Python-type CS_VALUE_DTYPE in a dtype position).
 *  - Everything is linear in the input: hash tables for names, no rescans.
 *
 * Trace text is data: nothing in it is executed or evaluated.
 */
#include "cs-config.h"

#include "cs-parse.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <glib/gstdio.h>

#include "cs-ops.h"
#include "cs-print.h"
#include "cs-validate.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/**
 * cs_parse_error_quark:
 *
 * The error domain of the parser (#CsParseError codes); messages are "name:line:col: reason".
 * Returns: the quark
 */
G_DEFINE_QUARK (cs-parse-error-quark, cs_parse_error)

/* ------------------------------------------------------------------------------------------ */
/* Lines and parser state                                                                      */

typedef struct
{
  const char *s;         /* line content (after a list's `[` / one-space indent); not NUL-ended */
  guint32     len;       /* bytes, without the newline */
  guint32     lineno;    /* 1-based line number in the input */
  guint32     col0;      /* bytes stripped before s (0, or 1 in a printed list) */
  guint32     trace_end : 1; /* list mode: the `,` after this line ended a trace */
} Line;

typedef struct
{
  CsValue *value;        /* a CS_VALUE_NAME read from an identifier */
  guint    dtype_pos;    /* 1 when it sits where Thunder puts a dtype */
} Pending;

/* The ints the parser keeps one node of per trace (dims, axes, alpha=1, small constants). */
#define LIT_INT_MIN (-16)
#define LIT_INT_MAX 255

typedef struct
{
  const char *name;      /* file name for messages */
  GArray     *lines;     /* Line */
  CsTrace    *trace;     /* trace being built */
  GArray     *pending;   /* Pending: identifiers resolved when the trace is complete */
  GPtrArray  *scratch;   /* stack of values for sequences being read (nested reads push) */
  GArray     *scratch_args; /* stack of CsArg for argument lists being read */
  GString    *tmp;       /* scratch text */
  GHashTable *types;     /* type text -> first proxy typed with it (this trace; not numbers) */
  GHashTable *strings;   /* callee and keyword texts of this trace -> their one arena copy */
  /* literal values of this trace, one node each (value nodes are immutable and shared) */
  struct
  {
    CsValue  *none;      /* None */
    CsValue  *boolean[2];/* False, True */
    CsValue  *underscore;/* `_` targets */
    CsValue  *ints[LIT_INT_MAX - LIT_INT_MIN + 1]; /* canonically written ints in range */
    CsValue  *dtypes[CS_N_DTYPES][2]; /* dtypes.X by dtype and weakness */
  } lit;
  gsize       ir_done;   /* arena bytes of the traces already parsed (CS_PARSE_MAX_IR_BYTES) */
} Parser;

typedef struct
{
  Parser     *p;         /* the parser (literals, errors) */
  const Line *line;      /* the line being read */
  const char *s;         /* read position */
  const char *end;       /* end of the line content */
  guint       depth;     /* bracket nesting */
} Cur;

enum
{
  VAL_DTYPE_POS = 1 << 0,
};

static gboolean G_GNUC_PRINTF (6, 7)
fail_at (Parser *p, GError **error, CsParseError code, guint32 line, guint32 col,
         const char *fmt, ...)
{
  va_list ap;
  g_autofree char *msg = NULL;

  va_start (ap, fmt);
  msg = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  g_set_error (error, CS_PARSE_ERROR, code, "%s:%u:%u: %s", p->name, line, col, msg);
  return FALSE;
}

static guint32
cur_col (const Cur *c)
{
  return (guint32) (c->s - c->line->s) + 1 + c->line->col0;
}

/* A short printable excerpt of the text at the cursor, for messages. */
static char *
cur_here (const Cur *c)
{
  gsize n = (gsize) (c->end - c->s);
  GString *s;

  if (n == 0)
    return g_strdup ("end of line");
  if (n > 24)
    n = 24;
  s = g_string_new ("'");
  for (gsize i = 0; i < n; i++)
    {
      unsigned char ch = (unsigned char) c->s[i];
      if (ch < 0x20 || ch == 0x7f)
        g_string_append_printf (s, "\\x%02x", ch);
      else
        g_string_append_c (s, (char) ch);
    }
  if ((gsize) (c->end - c->s) > n)
    g_string_append (s, "...");
  g_string_append_c (s, '\'');
  return g_string_free (s, FALSE);
}

static gboolean G_GNUC_PRINTF (4, 5)
cur_fail (Cur *c, GError **error, CsParseError code, const char *fmt, ...)
{
  va_list ap;
  g_autofree char *msg = NULL;

  va_start (ap, fmt);
  msg = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  return fail_at (c->p, error, code, c->line->lineno, cur_col (c), "%s", msg);
}

static gboolean
cur_expected (Cur *c, GError **error, const char *what)
{
  g_autofree char *here = cur_here (c);
  return cur_fail (c, error, CS_PARSE_ERROR_SYNTAX, "expected %s, found %s", what, here);
}

static void
cur_init (Cur *c, Parser *p, const Line *line, gsize offset)
{
  c->p = p;
  c->line = line;
  c->s = line->s + offset;
  c->end = line->s + line->len;
  c->depth = 0;
}

/* Python identifier bytes: 1 = may continue an identifier, 2 = may start one (ASCII letters,
 * '_', and any byte of a multi-byte UTF-8 character). */
static const guint8 ident_table[256] = {
  0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
  0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0,
  0, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 0, 0, 0, 0, 3,
  0, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 0, 0, 0, 0, 0,
  3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3,
  3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3,
  3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3,
  3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3,
};

static inline gboolean
is_ident_start (unsigned char ch)
{
  return (ident_table[ch] & 2) != 0;
}

static inline gboolean
is_ident_char (unsigned char ch)
{
  return (ident_table[ch] & 1) != 0;
}

/* Length of the identifier at @s (0 if none). */
static gsize
ident_len (const char *s, const char *end)
{
  const char *q = s;

  if (q >= end || !is_ident_start ((unsigned char) *q))
    return 0;
  while (q < end && is_ident_char ((unsigned char) *q))
    q++;
  return (gsize) (q - s);
}

/* Length of a dotted name `a.b.c` at @s (0 if none). */
static gsize
dotted_len (const char *s, const char *end)
{
  gsize n = ident_len (s, end);

  if (n == 0)
    return 0;
  while (s + n + 1 < end && s[n] == '.' && is_ident_start ((unsigned char) s[n + 1]))
    n += 1 + ident_len (s + n + 1, end);
  return n;
}

static gboolean
cur_lit (Cur *c, const char *lit)
{
  gsize n = strlen (lit);

  if ((gsize) (c->end - c->s) >= n && memcmp (c->s, lit, n) == 0)
    {
      c->s += n;
      return TRUE;
    }
  return FALSE;
}

static gboolean
cur_peek_lit (const Cur *c, const char *lit)
{
  gsize n = strlen (lit);
  return (gsize) (c->end - c->s) >= n && memcmp (c->s, lit, n) == 0;
}

static void
cur_skip_spaces (Cur *c)
{
  while (c->s < c->end && *c->s == ' ')
    c->s++;
}

/* A NUL-terminated copy of the first @n bytes of @s in the trace's arena (in the gap before
 * the last statement or proxy when it fits: cs_arena_alloc_small()). */
static char *
arena_ndup (Parser *p, const char *s, gsize n)
{
  char *d = cs_arena_alloc_small (p->trace->arena, n + 1);

  memcpy (d, s, n);
  d[n] = '\0';
  return d;
}

/* A copy of the @n pointers at @ptrs in the trace's arena, as arena_ndup() places it. */
static gpointer
arena_dup_ptrs (Parser *p, gpointer const *ptrs, guint n)
{
  gpointer *d;

  if (n == 0)
    return NULL;
  d = cs_arena_alloc_small (p->trace->arena, sizeof (gpointer) * n);
  memcpy (d, ptrs, sizeof (gpointer) * n);
  return d;
}

/* The arena copy of the first @n bytes of @s, one per distinct text in the trace: callees and
 * keyword names repeat on most statements. */
static const char *
arena_intern (Parser *p, const char *s, gsize n)
{
  char key[128];
  char *copy;

  if (n >= sizeof key)
    return arena_ndup (p, s, n);
  memcpy (key, s, n);
  key[n] = '\0';
  copy = g_hash_table_lookup (p->strings, key);
  if (copy == NULL)
    {
      copy = arena_ndup (p, s, n);
      g_hash_table_add (p->strings, copy);
    }
  return copy;
}

/* The callee text of a call: the op table's own name when it is the same text (no copy),
 * else the trace's one copy of it. */
static const char *
callee_intern (Parser *p, const char *s, gsize n, const CsOp **op_out)
{
  char key[128];
  const CsOp *op;

  if (n >= sizeof key)
    {
      const char *callee = arena_ndup (p, s, n);
      *op_out = cs_op_lookup (callee);
      return callee;
    }
  memcpy (key, s, n);
  key[n] = '\0';
  op = cs_op_lookup (key);
  *op_out = op;
  if (op->name != NULL && strcmp (op->name, key) == 0)
    return op->name;
  return arena_intern (p, s, n);
}

static CsValue *
value_new (Parser *p, CsValueKind kind)
{
  CsValue *v = cs_arena_alloc_small (p->trace->arena, sizeof (CsValue));

  memset (v, 0, sizeof (CsValue));
  v->kind = kind;
  return v;
}

/* The trace's one node for the literal kept in *@slot, of kind @kind: made (zeroed) on first
 * use; the caller sets its payload, the same on every call. */
static CsValue *
lit_value (Parser *p, CsValue **slot, CsValueKind kind)
{
  if (*slot == NULL)
    *slot = value_new (p, kind);
  return *slot;
}

/* ------------------------------------------------------------------------------------------ */
/* Literals                                                                                    */

/* Reads a number at the cursor (optionally negative). */
static CsValue *
read_number (Cur *c, GError **error)
{
  const char *start = c->s, *q = c->s;
  gboolean is_float = FALSE;
  char buf[128];
  gsize len;
  CsValue *v;

  if (q < c->end && *q == '-')
    q++;
  while (q < c->end && g_ascii_isdigit (*q))
    q++;
  if (q < c->end && *q == '.')
    {
      is_float = TRUE;
      q++;
      while (q < c->end && g_ascii_isdigit (*q))
        q++;
    }
  if (q < c->end && (*q == 'e' || *q == 'E'))
    {
      const char *e = q + 1;
      if (e < c->end && (*e == '+' || *e == '-'))
        e++;
      if (e < c->end && g_ascii_isdigit (*e))
        {
          is_float = TRUE;
          q = e;
          while (q < c->end && g_ascii_isdigit (*q))
            q++;
        }
    }
  len = (gsize) (q - start);
  if (len == 0 || (len == 1 && *start == '-') || (q < c->end && is_ident_char ((unsigned char) *q)))
    {
      cur_expected (c, error, "a number");
      return NULL;
    }
  if (len >= sizeof buf)
    {
      cur_fail (c, error, CS_PARSE_ERROR_LIMIT, "number literal longer than %u characters",
                (guint) sizeof buf - 1);
      return NULL;
    }
  memcpy (buf, start, len);
  buf[len] = '\0';
  if (is_float)
    {
      /* The literal keeps its text (the brief: floats print as read); a float made by a pass
       * has raw == NULL and prints as Python's repr. */
      v = value_new (c->p, CS_VALUE_FLOAT);
      v->u.f = g_ascii_strtod (buf, NULL);
      v->raw = arena_ndup (c->p, buf, len);
    }
  else
    {
      char *endp = NULL;
      gint64 i;
      errno = 0;
      i = g_ascii_strtoll (buf, &endp, 10);
      if (errno == ERANGE)
        {
          cur_fail (c, error, CS_PARSE_ERROR_LIMIT, "integer %s does not fit in 64 bits", buf);
          return NULL;
        }
      /* canonical: no leading zeros, no "-0" */
      {
        const char *d = buf[0] == '-' ? buf + 1 : buf;
        gboolean canonical = !((d[0] == '0' && d[1] != '\0') || (buf[0] == '-' && i == 0));

        if (canonical && i >= LIT_INT_MIN && i <= LIT_INT_MAX)
          v = lit_value (c->p, &c->p->lit.ints[i - LIT_INT_MIN], CS_VALUE_INT);
        else
          {
            v = value_new (c->p, CS_VALUE_INT);
            if (!canonical)
              v->raw = arena_ndup (c->p, buf, len);
          }
        v->u.i = i;
      }
    }
  c->s = q;
  return v;
}

static int
hexval (char ch)
{
  if (ch >= '0' && ch <= '9')
    return ch - '0';
  if (ch >= 'a' && ch <= 'f')
    return ch - 'a' + 10;
  if (ch >= 'A' && ch <= 'F')
    return ch - 'A' + 10;
  return -1;
}

/* Reads a Python string literal ('...' or "...", with backslash escapes). */
static CsValue *
read_string (Cur *c, GError **error)
{
  const char *start = c->s, *q = c->s + 1;
  char quote = *c->s;
  GString *content = g_string_new (NULL);
  CsValue *v;

  while (q < c->end && *q != quote)
    {
      if (*q == '\\' && q + 1 < c->end)
        {
          char e = q[1];
          int nhex = 0;
          q += 2;
          switch (e)
            {
            case 'n': g_string_append_c (content, '\n'); break;
            case 't': g_string_append_c (content, '\t'); break;
            case 'r': g_string_append_c (content, '\r'); break;
            case 'a': g_string_append_c (content, '\a'); break;
            case 'b': g_string_append_c (content, '\b'); break;
            case 'f': g_string_append_c (content, '\f'); break;
            case 'v': g_string_append_c (content, '\v'); break;
            case '0': g_string_append_c (content, '\0'); break;
            case '\\': case '\'': case '"': g_string_append_c (content, e); break;
            case 'x': nhex = 2; break;
            case 'u': nhex = 4; break;
            case 'U': nhex = 8; break;
            default:
              g_string_append_c (content, '\\');
              g_string_append_c (content, e);
              break;
            }
          if (nhex)
            {
              gunichar u = 0;
              for (int k = 0; k < nhex; k++)
                {
                  int h = q < c->end ? hexval (*q) : -1;
                  if (h < 0)
                    {
                      c->s = q;
                      cur_fail (c, error, CS_PARSE_ERROR_SYNTAX, "bad \\%c escape in a string", e);
                      g_string_free (content, TRUE);
                      return NULL;
                    }
                  u = u * 16 + (gunichar) h;
                  q++;
                }
              if (!g_unichar_validate (u) || u == 0)
                {
                  c->s = q;
                  cur_fail (c, error, CS_PARSE_ERROR_SYNTAX, "bad character escape in a string");
                  g_string_free (content, TRUE);
                  return NULL;
                }
              g_string_append_unichar (content, u);
            }
        }
      else
        g_string_append_c (content, *q++);
    }
  if (q >= c->end)
    {
      g_string_free (content, TRUE);
      cur_fail (c, error, CS_PARSE_ERROR_SYNTAX, "unterminated string");
      return NULL;
    }
  q++;
  v = value_new (c->p, CS_VALUE_STRING);
  if (memchr (content->str, '\0', content->len) != NULL)
    {
      /* A NUL inside a str: keep the text (castscope strings are NUL-terminated). */
      v->u.s = arena_ndup (c->p, content->str, strlen (content->str));
      v->raw = arena_ndup (c->p, start, (gsize) (q - start));
    }
  else
    {
      v->u.s = arena_ndup (c->p, content->str, content->len);
      g_string_truncate (c->p->tmp, 0);
      cs_print_py_string_to (c->p->tmp, v->u.s);
      if (c->p->tmp->len != (gsize) (q - start) || memcmp (c->p->tmp->str, start, c->p->tmp->len) != 0)
        v->raw = arena_ndup (c->p, start, (gsize) (q - start));
    }
  g_string_free (content, TRUE);
  c->s = q;
  return v;
}

/* ------------------------------------------------------------------------------------------ */
/* Values                                                                                      */

static CsValue *read_value (Cur *c, guint flags, GError **error);
static gboolean read_args (Cur *c, const CsOp *op, CsArg **args_out, guint *n_out,
                           GError **error);

static gboolean
enter (Cur *c, GError **error)
{
  if (c->depth >= CS_PARSE_MAX_DEPTH)
    return cur_fail (c, error, CS_PARSE_ERROR_LIMIT, "brackets nested deeper than %d levels",
                     CS_PARSE_MAX_DEPTH);
  c->depth++;
  return TRUE;
}

static CsValue *
finish_seq (Parser *p, CsValueKind kind, guint start)
{
  CsValue *v = value_new (p, kind);
  guint n = p->scratch->len - start;

  v->u.seq.n = n;
  if (n)
    v->u.seq.items = (CsValue **) arena_dup_ptrs (p,
                                                      (gpointer const *) p->scratch->pdata + start, n);
  g_ptr_array_set_size (p->scratch, start);
  return v;
}

/* `(...)`, `[...]` or `{...}` at the cursor. */
static CsValue *
read_bracketed (Cur *c, GError **error)
{
  Parser *p = c->p;
  char open = *c->s;
  char close = open == '(' ? ')' : open == '[' ? ']' : '}';
  guint start = p->scratch->len;
  gboolean trailing_comma = FALSE;
  CsValue *v;

  if (!enter (c, error))
    return NULL;
  c->s++;
  cur_skip_spaces (c);
  while (c->s < c->end && *c->s != close)
    {
      CsValue *item = read_value (c, 0, error);
      if (item == NULL)
        goto fail;
      g_ptr_array_add (p->scratch, item);
      cur_skip_spaces (c);
      if (open == '{')
        {
          if (!cur_lit (c, ":"))
            {
              cur_expected (c, error, "':' in a dict");
              goto fail;
            }
          cur_skip_spaces (c);
          item = read_value (c, 0, error);
          if (item == NULL)
            goto fail;
          g_ptr_array_add (p->scratch, item);
          cur_skip_spaces (c);
        }
      trailing_comma = FALSE;
      if (c->s < c->end && *c->s == ',')
        {
          c->s++;
          trailing_comma = TRUE;
          cur_skip_spaces (c);
        }
      else if (c->s < c->end && *c->s != close)
        {
          char what[32];
          g_snprintf (what, sizeof what, "',' or '%c'", close);
          cur_expected (c, error, what);
          goto fail;
        }
    }
  if (c->s >= c->end)
    {
      char what[48];
      g_snprintf (what, sizeof what, "'%c' to close the '%c'", close, open);
      cur_expected (c, error, what);
      goto fail;
    }
  c->s++;
  c->depth--;
  if (open == '(' && p->scratch->len - start == 1 && !trailing_comma)
    {
      /* a parenthesised value, not a tuple */
      v = g_ptr_array_index (p->scratch, start);
      g_ptr_array_set_size (p->scratch, start);
      return v;
    }
  return finish_seq (p, open == '(' ? CS_VALUE_TUPLE : open == '[' ? CS_VALUE_LIST : CS_VALUE_DICT,
                     start);

fail:
  g_ptr_array_set_size (p->scratch, start);
  return NULL;
}

/* `float('inf')`, `float('NaN')`, `complex(re, im)` become numbers; other calls stay CALL
 * values.  The spelling is kept in raw when the printer would write it differently. */
static CsValue *
read_call_value (Cur *c, const char *callee_s, gsize callee_len, GError **error)
{
  Parser *p = c->p;
  const char *start = callee_s;
  CsArg *args = NULL;
  guint n_args = 0;
  CsValue *v;

  if (!enter (c, error))
    return NULL;
  if (!read_args (c, NULL, &args, &n_args, error))
    return NULL;
  c->depth--;

  if (callee_len == 5 && memcmp (callee_s, "float", 5) == 0 && n_args == 1
      && args[0].name == NULL && args[0].value->kind == CS_VALUE_STRING)
    {
      const char *s = args[0].value->u.s;
      double f;
      if (g_ascii_strcasecmp (s, "inf") == 0 || g_ascii_strcasecmp (s, "infinity") == 0)
        f = INFINITY;
      else if (g_ascii_strcasecmp (s, "-inf") == 0)
        f = -INFINITY;
      else if (g_ascii_strcasecmp (s, "nan") == 0)
        f = NAN;
      else
        goto generic;
      v = value_new (p, CS_VALUE_FLOAT);
      v->u.f = f;
      goto check_raw;
    }
  if (callee_len == 7 && memcmp (callee_s, "complex", 7) == 0 && n_args == 2
      && args[0].name == NULL && args[1].name == NULL)
    {
      double re, im;
      CsValue *a = args[0].value, *b = args[1].value;
      if ((a->kind == CS_VALUE_FLOAT || a->kind == CS_VALUE_INT)
          && (b->kind == CS_VALUE_FLOAT || b->kind == CS_VALUE_INT))
        {
          re = a->kind == CS_VALUE_FLOAT ? a->u.f : (double) a->u.i;
          im = b->kind == CS_VALUE_FLOAT ? b->u.f : (double) b->u.i;
          v = value_new (p, CS_VALUE_COMPLEX);
          v->u.c.re = re;
          v->u.c.im = im;
          goto check_raw;
        }
    }

generic:
  v = value_new (p, CS_VALUE_CALL);
  v->u.call.callee = arena_ndup (p, callee_s, callee_len);
  v->u.call.args = args;
  v->u.call.n_args = n_args;

check_raw:
  g_string_truncate (p->tmp, 0);
  cs_print_value_to (p->tmp, v);
  if (p->tmp->len != (gsize) (c->s - start) || memcmp (p->tmp->str, start, p->tmp->len) != 0)
    v->raw = arena_ndup (p, start, (gsize) (c->s - start));
  return v;
}

static CsValue *
read_name_value (Cur *c, guint flags, GError **error)
{
  Parser *p = c->p;
  const char *start = c->s;
  gsize n = dotted_len (c->s, c->end);
  CsValue *v;
  Pending pend;

  c->s += n;
  if (n == 4 && memcmp (start, "None", 4) == 0)
    return lit_value (p, &p->lit.none, CS_VALUE_NONE);
  if (n == 4 && memcmp (start, "True", 4) == 0)
    {
      v = lit_value (p, &p->lit.boolean[1], CS_VALUE_BOOL);
      v->u.b = TRUE;
      return v;
    }
  if (n == 5 && memcmp (start, "False", 5) == 0)
    return lit_value (p, &p->lit.boolean[0], CS_VALUE_BOOL);
  if (c->s < c->end && *c->s == '(')
    return read_call_value (c, start, n, error);
  if (n > 7 && memcmp (start, "dtypes.", 7) == 0)
    {
      CsDtype dt;
      gboolean weak = FALSE;
      if (cs_dtype_from_long (start + 7, n - 7, &dt, &weak))
        {
          v = lit_value (p, &p->lit.dtypes[dt][weak ? 1 : 0], CS_VALUE_DTYPE);
          v->u.dtype.dtype = dt;
          v->u.dtype.weak = weak ? 1 : 0;
          return v;
        }
    }
  if (n < 128 && memchr (start, '.', n) == NULL)
    {
      /* fast path: a name bound earlier is a proxy right away (the common case) */
      char key[128];
      CsProxy *px;
      memcpy (key, start, n);
      key[n] = '\0';
      px = cs_name_table_lookup (p->trace->proxies, key, cs_name_hash (key));
      if (px != NULL)
        {
          return cs_value_new_proxy (p->trace->arena, px);
        }
    }
  /* bound later, or never (a context name): resolved when the trace is complete */
  v = value_new (p, CS_VALUE_NAME);
  v->u.s = arena_ndup (p, start, n);
  pend.value = v;
  pend.dtype_pos = (flags & VAL_DTYPE_POS) ? 1 : 0;
  g_array_append_val (p->pending, pend);
  return v;
}

/* Postfix subscripts and attributes: `args[0]`, `cache_info['x']`, `globals()['f']`. */
static CsValue *
read_postfix (Cur *c, CsValue *v, GError **error)
{
  Parser *p = c->p;

  while (v != NULL && c->s < c->end && (*c->s == '[' || *c->s == '.'))
    {
      if (*c->s == '[')
        {
          CsValue *idx, *sub;
          if (!enter (c, error))
            return NULL;
          c->s++;
          cur_skip_spaces (c);
          idx = read_value (c, 0, error);
          if (idx == NULL)
            return NULL;
          cur_skip_spaces (c);
          if (!cur_lit (c, "]"))
            {
              cur_expected (c, error, "']'");
              return NULL;
            }
          c->depth--;
          sub = value_new (p, CS_VALUE_SUBSCRIPT);
          sub->u.seq.items = CS_ARENA_NEW_N (p->trace->arena, CsValue *, 2);
          sub->u.seq.items[0] = v;
          sub->u.seq.items[1] = idx;
          sub->u.seq.n = 2;
          v = sub;
        }
      else
        {
          gsize n = ident_len (c->s + 1, c->end);
          CsValue *attr;
          if (n == 0)
            {
              c->s++;
              cur_expected (c, error, "an attribute name after '.'");
              return NULL;
            }
          attr = value_new (p, CS_VALUE_ATTR);
          attr->u.seq.items = CS_ARENA_NEW_N (p->trace->arena, CsValue *, 1);
          attr->u.seq.items[0] = v;
          attr->u.seq.n = 1;
          attr->u.seq.attr = arena_ndup (p, c->s + 1, n);
          c->s += 1 + n;
          v = attr;
        }
    }
  return v;
}

static CsValue *
read_value (Cur *c, guint flags, GError **error)
{
  unsigned char ch;
  CsValue *v;

  if (c->s >= c->end)
    {
      cur_expected (c, error, "a value");
      return NULL;
    }
  ch = (unsigned char) *c->s;
  if (ch == '(' || ch == '[' || ch == '{')
    return read_postfix (c, read_bracketed (c, error), error);
  if (ch == '\'' || ch == '"')
    return read_string (c, error);
  if (cur_peek_lit (c, "..."))
    {
      c->s += 3;
      return value_new (c->p, CS_VALUE_ELLIPSIS);
    }
  if (ch == '-' && c->s + 1 < c->end && is_ident_start ((unsigned char) c->s[1]))
    {
      /* -float('inf') */
      const char *minus = c->s;
      c->s++;
      v = read_value (c, flags, error);
      if (v == NULL)
        return NULL;
      if (v->kind != CS_VALUE_FLOAT)
        {
          c->s = minus;
          cur_fail (c, error, CS_PARSE_ERROR_SYNTAX, "'-' before a value that is not a number");
          return NULL;
        }
      v->u.f = -v->u.f;
      v->raw = NULL;
      g_string_truncate (c->p->tmp, 0);
      cs_print_value_to (c->p->tmp, v);
      if (c->p->tmp->len != (gsize) (c->s - minus) || memcmp (c->p->tmp->str, minus, c->p->tmp->len) != 0)
        v->raw = arena_ndup (c->p, minus, (gsize) (c->s - minus));
      return v;
    }
  if (g_ascii_isdigit (ch) || ch == '-' || (ch == '.' && c->s + 1 < c->end && g_ascii_isdigit (c->s[1])))
    return read_number (c, error);
  if (is_ident_start (ch))
    return read_postfix (c, read_name_value (c, flags, error), error);
  cur_expected (c, error, "a value");
  return NULL;
}

/* `(arg, arg, kw=value)` at the cursor.  @op decides which positions hold dtypes. */
static gboolean
read_args (Cur *c, const CsOp *op, CsArg **args_out, guint *n_out, GError **error)
{
  Parser *p = c->p;
  guint start = p->scratch_args->len;
  guint pos = 0;
  gboolean cast = op != NULL && op->category == CS_OP_CAT_CAST;

  if (!cur_lit (c, "("))
    return cur_expected (c, error, "'('");
  cur_skip_spaces (c);
  while (c->s < c->end && *c->s != ')')
    {
      CsArg arg = { NULL, NULL };
      gsize n = ident_len (c->s, c->end);
      guint flags = 0;

      if (n > 0 && c->s + n < c->end && c->s[n] == '='
          && !(c->s + n + 1 < c->end && c->s[n + 1] == '='))
        {
          arg.name = arena_intern (p, c->s, n);
          c->s += n + 1;
          if (n == 5 && memcmp (arg.name, "dtype", 5) == 0)
            flags |= VAL_DTYPE_POS;
        }
      else
        {
          if (cast && pos == 1)
            flags |= VAL_DTYPE_POS;
          pos++;
        }
      arg.value = read_value (c, flags, error);
      if (arg.value == NULL)
        goto fail;
      g_array_append_val (p->scratch_args, arg);
      cur_skip_spaces (c);
      if (c->s < c->end && *c->s == ',')
        {
          c->s++;
          cur_skip_spaces (c);
        }
      else if (c->s < c->end && *c->s != ')')
        {
          cur_expected (c, error, "',' or ')' in an argument list");
          goto fail;
        }
    }
  if (c->s >= c->end)
    {
      cur_expected (c, error, "')' to close the argument list");
      goto fail;
    }
  c->s++;
  *n_out = p->scratch_args->len - start;
  *args_out = NULL;
  if (*n_out)
    {
      *args_out = cs_arena_alloc_small (p->trace->arena, sizeof (CsArg) * *n_out);
      memcpy (*args_out, &g_array_index (p->scratch_args, CsArg, start), sizeof (CsArg) * *n_out);
    }
  g_array_set_size (p->scratch_args, start);
  return TRUE;

fail:
  g_array_set_size (p->scratch_args, start);
  return FALSE;
}

/* ------------------------------------------------------------------------------------------ */
/* Type strings                                                                                */

static gboolean
type_fail (Parser *p, const Line *line, guint32 col, GError **error, const char *fmt, ...)
  G_GNUC_PRINTF (5, 6);

static gboolean
type_fail (Parser *p, const Line *line, guint32 col, GError **error, const char *fmt, ...)
{
  va_list ap;
  g_autofree char *msg = NULL;

  va_start (ap, fmt);
  msg = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  return fail_at (p, error, CS_PARSE_ERROR_TYPE, line->lineno, col, "bad type string: %s", msg);
}

/**
 * parse_type_into:
 * Reads a type string (the text between the quotes, reference 1.3) into @px: tensor
 * `[FUTURE ]DEVICE DTYPE[dims]` (symbolic dims `[IntegerProxy ...]` and `?` read as -1),
 * number `int 3` / `float ?` / `bool True` / `complex (1+2j)`, `Collection`, or anything else
 * (kept as an OTHER type).  @col is the column of the first character of @s.
 */
static gboolean
parse_type_into (Parser *p, CsProxy *px, const char *s, gsize len, const Line *line, guint32 col,
                 GError **error)
{
  CsArena *arena = p->trace->arena;
  const char *end = s + len, *q = s;
  int64_t dims[CS_MAX_DIMS];
  guint rank = 0;
  gboolean tensorish;

  px->type_raw = arena_ndup (p, s, len);
  px->typed = 1;
  px->future = 0;
  px->has_value = 0;
  px->value = NULL;
  px->rank = 0;
  px->shape = NULL;

  tensorish = (len > 0 && s[len - 1] == ']')
              || (len >= 4 && (memcmp (s, "cpu ", 4) == 0 || memcmp (s, "cuda", 4) == 0
                               || memcmp (s, "meta ", MIN (len, 5)) == 0
                               || memcmp (s, "FUTURE ", MIN (len, 7)) == 0));
  if (len > 4 && memcmp (s, "int ", 4) == 0)
    tensorish = FALSE;
  if (len > 5 && (memcmp (s, "bool ", 5) == 0))
    tensorish = FALSE;
  if (len > 6 && memcmp (s, "float ", 6) == 0)
    tensorish = FALSE;
  if (len > 8 && memcmp (s, "complex ", 8) == 0)
    tensorish = FALSE;

  if (tensorish)
    {
      const char *dev_s, *dev_e, *dt_s;
      CsDevice dev;
      CsDtype dt;

      if (len >= 7 && memcmp (s, "FUTURE ", 7) == 0)
        {
          px->future = 1;
          q += 7;
        }
      dev_s = q;
      if ((gsize) (end - q) > 29 && memcmp (q, "thunder.devices.Device(type='", 29) == 0)
        {
          /* mid-2024 printer bug (PR #700 thread): thunder.devices.Device(type='cuda:0') */
          const char *close = memchr (q + 29, '\'', (gsize) (end - q - 29));
          static const char idx_kw[] = ", index=";
          if (close != NULL && (gsize) (end - close - 1) > sizeof idx_kw - 1
              && memcmp (close + 1, idx_kw, sizeof idx_kw - 1) == 0)
            {
              /* FutureTensorProxy.type_string() formats the Device itself (its repr):
               * thunder.devices.Device(type='cuda', index=0) (thunder/core/devices.py) */
              const char *d = close + sizeof idx_kw, *de = d;
              g_autofree char *spec = NULL;

              while (de < end && *de >= '0' && *de <= '9')
                de++;
              if (de == d || de >= end || *de != ')')
                return type_fail (p, line, col + (guint32) (d - s), error, "unterminated device");
              spec = g_strdup_printf ("%.*s:%.*s", (int) (close - q - 29), q + 29, (int) (de - d), d);
              if (!cs_device_parse (spec, strlen (spec), &dev))
                return type_fail (p, line, col + (guint32) (q - s + 29), error, "unknown device");
              dev_e = de + 1;
            }
          else
            {
              if (close == NULL || close + 2 > end || close[1] != ')')
                return type_fail (p, line, col + (guint32) (q - s), error, "unterminated device");
              if (!cs_device_parse (q + 29, (gsize) (close - q - 29), &dev))
                return type_fail (p, line, col + (guint32) (q - s + 29), error, "unknown device");
              dev_e = close + 2;
            }
        }
      else
        {
          dev_e = q;
          while (dev_e < end && *dev_e != ' ')
            dev_e++;
          if (!cs_device_parse (dev_s, (gsize) (dev_e - dev_s), &dev))
            return type_fail (p, line, col + (guint32) (dev_s - s), error,
                              "unknown device '%.*s' (expected cpu, meta or cuda:N)",
                              (int) MIN (dev_e - dev_s, 40), dev_s);
        }
      if (dev_e >= end || *dev_e != ' ')
        return type_fail (p, line, col + (guint32) (dev_e - s), error,
                          "expected ' ' and a dtype after the device");
      dt_s = dev_e + 1;
      q = dt_s;
      while (q < end && *q != '[')
        q++;
      if (!cs_dtype_from_short (dt_s, (gsize) (q - dt_s), &dt))
        return type_fail (p, line, col + (guint32) (dt_s - s), error, "unknown dtype '%.*s'",
                          (int) MIN (q - dt_s, 40), dt_s);
      if (q >= end)
        return type_fail (p, line, col + (guint32) (q - s), error, "expected '[' and the shape");
      q++;
      while (q < end && *q != ']')
        {
          if (rank >= CS_MAX_DIMS)
            return type_fail (p, line, col + (guint32) (q - s), error,
                              "more than %d dimensions", CS_MAX_DIMS);
          if (*q == '[')
            {
              /* symbolic dim: [IntegerProxy name=i0, value=1, static=...] */
              int depth = 0;
              const char *d0 = q;
              do
                {
                  if (*q == '[')
                    depth++;
                  else if (*q == ']')
                    depth--;
                  q++;
                }
              while (q < end && depth > 0);
              if (depth != 0)
                return type_fail (p, line, col + (guint32) (d0 - s), error,
                                  "unbalanced '[' in a symbolic dimension");
              dims[rank++] = -1;
            }
          else if (*q == '?')
            {
              dims[rank++] = -1;
              q++;
            }
          else if (g_ascii_isdigit (*q))
            {
              int64_t d = 0;
              while (q < end && g_ascii_isdigit (*q))
                {
                  if (d > (G_MAXINT64 - 9) / 10)
                    return type_fail (p, line, col + (guint32) (q - s), error,
                                      "dimension too large");
                  d = d * 10 + (*q - '0');
                  q++;
                }
              dims[rank++] = d;
            }
          else
            return type_fail (p, line, col + (guint32) (q - s), error,
                              "expected a dimension (an integer)");
          if (q < end && *q == ',')
            {
              q++;
              if (q < end && *q == ' ')
                q++;
            }
          else if (q < end && *q != ']')
            return type_fail (p, line, col + (guint32) (q - s), error, "expected ',' or ']' in the shape");
        }
      if (q >= end)
        return type_fail (p, line, col + (guint32) len, error, "missing ']' at the end of the shape");
      q++;
      if (q != end)
        return type_fail (p, line, col + (guint32) (q - s), error, "unexpected text after the shape");
      px->kind = CS_PROXY_TENSOR;
      px->dtype = dt;
      px->device = dev;
      px->rank = rank;
      if (rank)
        {
          px->shape = cs_arena_alloc_small (arena, sizeof (int64_t) * rank);
          memcpy (px->shape, dims, sizeof (int64_t) * rank);
        }
      return TRUE;
    }

  {
    static const struct { const char *word; CsDtype dtype; } numbers[] = {
      { "int ", CS_DTYPE_I64 }, { "bool ", CS_DTYPE_B8 },
      { "float ", CS_DTYPE_F64 }, { "complex ", CS_DTYPE_C128 },
    };
    for (guint i = 0; i < G_N_ELEMENTS (numbers); i++)
      {
        gsize wl = strlen (numbers[i].word);
        if (len > wl && memcmp (s, numbers[i].word, wl) == 0)
          {
            const char *lit = s + wl;
            gsize ll = len - wl;
            px->kind = CS_PROXY_NUMBER;
            px->dtype = numbers[i].dtype;
            if (ll == 1 && *lit == '?')
              return TRUE;
            if (numbers[i].dtype == CS_DTYPE_B8)
              {
                if (ll == 4 && memcmp (lit, "True", 4) == 0)
                  px->value = cs_value_new_bool (arena, TRUE);
                else if (ll == 5 && memcmp (lit, "False", 5) == 0)
                  px->value = cs_value_new_bool (arena, FALSE);
                else
                  return type_fail (p, line, col + (guint32) wl, error,
                                    "expected True, False or ? after 'bool'");
              }
            else if (numbers[i].dtype == CS_DTYPE_I64 || numbers[i].dtype == CS_DTYPE_F64)
              {
                Line fake = *line;
                Cur c;
                CsValue *v;
                fake.s = lit;
                fake.len = (guint32) ll;
                fake.col0 = col - 1 + (guint32) wl;
                cur_init (&c, p, &fake, 0);
                if (numbers[i].dtype == CS_DTYPE_F64 && !(g_ascii_isdigit (*lit) || *lit == '-' || *lit == '.'))
                  v = read_value (&c, 0, error);
                else
                  v = read_number (&c, error);
                if (v == NULL)
                  {
                    if (error && *error)
                      (*error)->code = CS_PARSE_ERROR_TYPE;
                    return FALSE;
                  }
                if (c.s != c.end || (v->kind != CS_VALUE_INT && v->kind != CS_VALUE_FLOAT))
                  return type_fail (p, line, col + (guint32) wl, error, "bad number after '%.*s'",
                                    (int) wl - 1, s);
                px->value = v;
              }
            else
              return TRUE; /* complex: value kept only in type_raw */
            px->has_value = 1;
            return TRUE;
          }
      }
  }
  if (len == 10 && memcmp (s, "Collection", 10) == 0)
    px->kind = CS_PROXY_COLLECTION;
  else
    px->kind = CS_PROXY_OTHER;
  return TRUE;
}

/* Applies a type string read for @px: the first one types the proxy; a later, different one is
 * validated and returned in *differs (the statement keeps it as type_comment_raw). */
static gboolean
apply_type (Parser *p, CsProxy *px, const char *s, gsize len, const Line *line, guint32 col,
            const char **differs, GError **error)
{
  *differs = NULL;
  if (!px->typed)
    {
      /* Most proxies of a trace share a few type strings: reuse the first parse of each. */
      char key[256];
      const CsProxy *tmpl = NULL;
      if (len < sizeof key)
        {
          memcpy (key, s, len);
          key[len] = '\0';
          tmpl = g_hash_table_lookup (p->types, key);
        }
      if (tmpl != NULL)
        {
          px->kind = tmpl->kind;
          px->dtype = tmpl->dtype;
          px->device = tmpl->device;
          px->future = tmpl->future;
          px->typed = 1;
          px->type_raw = tmpl->type_raw;
          px->rank = tmpl->rank;
          px->shape = tmpl->shape; /* shapes are never edited in place: one array per type */
          return TRUE;
        }
      if (!parse_type_into (p, px, s, len, line, col, error))
        return FALSE;
      if (len < sizeof key && px->kind != CS_PROXY_NUMBER)
        g_hash_table_insert (p->types, (gpointer) px->type_raw, px);
      return TRUE;
    }
  if (px->type_raw != NULL && strlen (px->type_raw) == len && memcmp (px->type_raw, s, len) == 0)
    return TRUE;
  {
    CsProxy scratch = { 0 };
    scratch.name = px->name;
    if (!parse_type_into (p, &scratch, s, len, line, col, error))
      return FALSE;
    *differs = scratch.type_raw;
  }
  return TRUE;
}

/* Reads `"TYPE"` at the cursor (the quotes included). */
static gboolean
read_quoted_type (Cur *c, const char **s, gsize *len, guint32 *col, GError **error)
{
  const char *close;

  if (!cur_lit (c, "\""))
    return cur_expected (c, error, "'\"' starting a type string");
  close = memchr (c->s, '"', (gsize) (c->end - c->s));
  if (close == NULL)
    {
      c->s--;
      return cur_fail (c, error, CS_PARSE_ERROR_TYPE, "bad type string: missing closing '\"'");
    }
  *s = c->s;
  *len = (gsize) (close - c->s);
  *col = cur_col (c);
  c->s = close + 1;
  return TRUE;
}

/* ------------------------------------------------------------------------------------------ */
/* Statements                                                                                  */

static CsProxy *
bind_name (Parser *p, const char *s, gsize n)
{
  char buf[256];
  CsProxy *px;

  if (n < sizeof buf)
    {
      memcpy (buf, s, n);
      buf[n] = '\0';
      px = cs_name_table_lookup (p->trace->proxies, buf, cs_name_hash (buf));
      if (px != NULL)
        return px;
      return cs_trace_add_proxy (p->trace, buf);
    }
  else
    {
      g_autofree char *name = g_strndup (s, n);
      return cs_trace_add_proxy (p->trace, name);
    }
}

/* A target tree: IDENT, `_`, `(t, ...)`, `[t, ...]`. */
static CsValue *
read_target (Cur *c, GError **error)
{
  Parser *p = c->p;

  if (c->s < c->end && (*c->s == '(' || *c->s == '['))
    {
      char close = *c->s == '(' ? ')' : ']';
      CsValueKind kind = *c->s == '(' ? CS_VALUE_TUPLE : CS_VALUE_LIST;
      guint start = p->scratch->len;
      if (!enter (c, error))
        return NULL;
      c->s++;
      while (c->s < c->end && *c->s != close)
        {
          CsValue *t = read_target (c, error);
          if (t == NULL)
            goto fail;
          g_ptr_array_add (p->scratch, t);
          if (cur_lit (c, ","))
            cur_skip_spaces (c);
          else if (c->s < c->end && *c->s != close)
            {
              char what[40];
              g_snprintf (what, sizeof what, "',' or '%c' in the targets", close);
              cur_expected (c, error, what);
              goto fail;
            }
        }
      if (!cur_lit (c, close == ')' ? ")" : "]"))
        {
          cur_expected (c, error, close == ')' ? "')' closing the targets" : "']' closing the targets");
          goto fail;
        }
      c->depth--;
      return finish_seq (p, kind, start);
    fail:
      g_ptr_array_set_size (p->scratch, start);
      return NULL;
    }
  else
    {
      gsize n = ident_len (c->s, c->end);
      CsValue *v;
      if (n == 0)
        {
          cur_expected (c, error, "a target name");
          return NULL;
        }
      if (n == 1 && *c->s == '_')
        v = lit_value (p, &p->lit.underscore, CS_VALUE_UNDERSCORE);
      else
        v = cs_value_new_proxy (p->trace->arena, bind_name (p, c->s, n));
      c->s += n;
      return v;
    }
}

/* Statement-shape check for comment text (subsymbol lines), without reporting errors. */
static gboolean
looks_like_statement (const char *s, const char *end)
{
  gsize n;

  if ((gsize) (end - s) >= 4 && memcmp (s, "del ", 4) == 0)
    return TRUE;
  if ((gsize) (end - s) >= 6 && memcmp (s, "return", 6) == 0
      && ((gsize) (end - s) == 6 || s[6] == ' '))
    return TRUE;
  if (s < end && (*s == '(' || *s == '['))
    {
      /* a bracketed target list followed by " = " */
      int depth = 0;
      const char *q = s;
      for (; q < end; q++)
        {
          if (*q == '(' || *q == '[')
            depth++;
          else if (*q == ')' || *q == ']')
            {
              if (--depth == 0)
                {
                  q++;
                  break;
                }
            }
          else if (!(is_ident_char ((unsigned char) *q) || *q == ',' || *q == ' '))
            return FALSE;
        }
      return depth == 0 && (gsize) (end - q) >= 3 && memcmp (q, " = ", 3) == 0;
    }
  n = dotted_len (s, end);
  if (n == 0)
    return FALSE;
  s += n;
  if (s < end && *s == '(')
    return TRUE;
  if ((gsize) (end - s) >= 3 && memcmp (s, " = ", 3) == 0)
    return TRUE;
  if (s < end && *s == ',')
    return TRUE;
  if ((gsize) (end - s) >= 3 && memcmp (s, ": \"", 3) == 0)
    {
      /* annotated assignment NAME: "TYPE" = ..., not an annotation comment */
      const char *close = memchr (s + 3, '"', (gsize) (end - s - 3));
      return close != NULL && (gsize) (end - close) >= 4 && memcmp (close + 1, " = ", 3) == 0
             && g_strstr_len (close, end - close, "(trivial unpack)") == NULL;
    }
  return FALSE;
}

/* Where the statement text of line @li starts: after the indent, plus "# " when commented. */
static gsize
content_offset (const Line *l, guint indent, gboolean commented)
{
  return indent + (commented ? 2 : 0);
}

/* prims.unpack_sequence printer output: `a, b, = src`, possibly over several lines ending in
 * ` \` (wrap at 80, or one part per line before 2024).  *li advances over continuation lines. */
static CsStmt *
parse_unpack (Parser *p, guint *li, guint indent, gboolean commented, GError **error)
{
  CsTrace *t = p->trace;
  CsStmt *st = cs_stmt_new (t, CS_STMT_UNPACK);
  guint start = p->scratch->len;
  gboolean one_per_line = TRUE;
  guint n_lines = 0;
  Cur c;

  st->op = cs_op_get (CS_OP_PRIM_UNPACK_SEQUENCE);
  for (;;)
    {
      const Line *l = &g_array_index (p->lines, Line, *li);
      guint parts_here = 0;

      cur_init (&c, p, l, content_offset (l, indent, commented));
      n_lines++;
      for (;;)
        {
          gsize n;
          if (cur_lit (&c, "= "))
            {
              n = ident_len (c.s, c.end);
              if (n == 0)
                {
                  cur_expected (&c, error, "the name of the unpacked collection");
                  goto fail;
                }
              st->source = bind_name (p, c.s, n);
              c.s += n;
              if (c.s != c.end)
                {
                  cur_expected (&c, error, "end of line after the unpack");
                  goto fail;
                }
              if (parts_here > 1 || (parts_here == 1 && n_lines == 1))
                one_per_line = FALSE;
              goto done;
            }
          if (c.s < c.end && *c.s == '\\' && c.s + 1 == c.end)
            break;
          n = ident_len (c.s, c.end);
          if (n == 0)
            {
              cur_expected (&c, error, "a name, '_' or '= SOURCE' in an unpack");
              goto fail;
            }
          {
            CsValue *v;
            if (n == 1 && *c.s == '_')
              v = lit_value (p, &p->lit.underscore, CS_VALUE_UNDERSCORE);
            else
              v = cs_value_new_proxy (p->trace->arena, bind_name (p, c.s, n));
            g_ptr_array_add (p->scratch, v);
          }
          c.s += n;
          if (!cur_lit (&c, ", "))
            {
              cur_expected (&c, error, "', ' after a name in an unpack");
              goto fail;
            }
          parts_here++;
        }
      /* continuation */
      if (parts_here != 1)
        one_per_line = FALSE;
      if (*li + 1 >= p->lines->len)
        {
          c.s = c.end;
          cur_fail (&c, error, CS_PARSE_ERROR_SYNTAX, "unpack continues past the end of the input");
          goto fail;
        }
      {
        const Line *nl = &g_array_index (p->lines, Line, *li + 1);
        gsize off = content_offset (nl, indent, commented);
        gboolean ok = nl->len >= off;
        for (guint k = 0; ok && k < indent; k++)
          ok = nl->s[k] == ' ';
        if (ok && commented)
          ok = nl->s[indent] == '#' && nl->s[indent + 1] == ' ';
        if (ok && nl->len > indent && nl->s[indent] == ' ')
          ok = FALSE;
        if (!ok)
          {
            fail_at (p, error, CS_PARSE_ERROR_INDENT, nl->lineno, 1 + nl->col0,
                     "unpack continuation line must have the indentation of its first line (%u spaces%s)",
                     indent, commented ? " and '# '" : "");
            goto fail;
          }
      }
      (*li)++;
    }

done:
  st->n_targets = p->scratch->len - start;
  st->targets = (CsValue **) arena_dup_ptrs (p, (gpointer const *) p->scratch->pdata + start,
                                                st->n_targets);
  g_ptr_array_set_size (p->scratch, start);
  st->unpack_style = (one_per_line && n_lines > 1) ? CS_UNPACK_ONE_PER_LINE : CS_UNPACK_WRAP80;
  return st;

fail:
  g_ptr_array_set_size (p->scratch, start);
  return NULL;
}

static gboolean
names_del (Cur *c, CsStmt *st, gboolean brackets, GError **error)
{
  Parser *p = c->p;
  guint start = p->scratch->len;

  for (;;)
    {
      gsize n = ident_len (c->s, c->end);
      if (n == 0)
        {
          cur_expected (c, error, "a name to delete");
          goto fail;
        }
      g_ptr_array_add (p->scratch, bind_name (p, c->s, n));
      c->s += n;
      if (!cur_lit (c, ", "))
        break;
    }
  if (brackets && !cur_lit (c, "]"))
    {
      cur_expected (c, error, "']' closing 'del ['");
      goto fail;
    }
  if (c->s != c->end)
    {
      cur_expected (c, error, "end of line after 'del'");
      goto fail;
    }
  st->n_names = p->scratch->len - start;
  st->names = (CsProxy **) arena_dup_ptrs (p, (gpointer const *) p->scratch->pdata + start,
                                              st->n_names);
  g_ptr_array_set_size (p->scratch, start);
  return TRUE;

fail:
  g_ptr_array_set_size (p->scratch, start);
  return FALSE;
}

/* The trailing `  # NAME: "TYPE"` / `  # NAME` of a call statement. */
static gboolean
read_type_comment (Cur *c, CsStmt *st, GError **error)
{
  Parser *p = c->p;
  CsProxy *out = st->out && st->out->kind == CS_VALUE_PROXY ? st->out->u.proxy : NULL;
  const char *name_s = c->s;
  gsize n = ident_len (c->s, c->end);

  if (n == 0)
    return cur_expected (c, error, "the output name in the type comment");
  if (out == NULL)
    return cur_fail (c, error, CS_PARSE_ERROR_SYNTAX,
                     "a type comment needs a single output proxy (the statement's target is not one name)");
  if (strlen (out->name) != n || memcmp (out->name, name_s, n) != 0)
    return cur_fail (c, error, CS_PARSE_ERROR_SYNTAX,
                     "the type comment names '%.*s' but the statement binds '%s'",
                     (int) MIN (n, 64), name_s, out->name);
  c->s += n;
  if (c->s == c->end)
    {
      st->type_comment = CS_TYPECOMMENT_NAME;
      return TRUE;
    }
  if (!cur_lit (c, ": "))
    return cur_expected (c, error, "': \"TYPE\"' or end of line in the type comment");
  {
    const char *ts, *differs = NULL;
    gsize tl;
    guint32 col;
    if (!read_quoted_type (c, &ts, &tl, &col, error))
      return FALSE;
    if (!apply_type (p, out, ts, tl, c->line, col, &differs, error))
      return FALSE;
    st->type_comment_raw = differs;
  }
  if (c->s != c->end)
    return cur_expected (c, error, "end of line after the type comment");
  st->type_comment = CS_TYPECOMMENT_FULL;
  return TRUE;
}

/**
 * parse_statement:
 * Parses the statement starting on line *li (text after @indent spaces and, when @commented,
 * after "# ").  Continuation lines of an unpack are consumed (*li is left on the last one).
 */
static CsStmt *
parse_statement (Parser *p, guint *li, guint indent, gboolean commented, GError **error)
{
  CsTrace *t = p->trace;
  const Line *l = &g_array_index (p->lines, Line, *li);
  CsStmt *st;
  Cur c;
  gsize n;

  cur_init (&c, p, l, content_offset (l, indent, commented));
  if (cur_peek_lit (&c, "del "))
    {
      gboolean br;
      c.s += 4;
      st = cs_stmt_new (t, CS_STMT_DEL);
      st->op = cs_op_get (CS_OP_PRIM_PYTHON_DEL);
      br = cur_lit (&c, "[");
      st->del_brackets = br;
      if (!names_del (&c, st, br, error))
        return NULL;
      goto located;
    }
  if (cur_peek_lit (&c, "return") && (c.end - c.s == 6 || c.s[6] == ' '))
    {
      st = cs_stmt_new (t, CS_STMT_RETURN);
      st->op = cs_op_get (CS_OP_PRIM_PYTHON_RETURN);
      c.s += 6;
      if (c.s < c.end)
        {
          guint start = p->scratch->len;
          c.s++;
          if (c.s == c.end)
            goto located; /* `return ` (python_return without args) */
          for (;;)
            {
              CsValue *v = read_value (&c, 0, error);
              if (v == NULL)
                {
                  g_ptr_array_set_size (p->scratch, start);
                  return NULL;
                }
              g_ptr_array_add (p->scratch, v);
              if (!cur_lit (&c, ", "))
                break;
            }
          if (c.s != c.end)
            {
              g_ptr_array_set_size (p->scratch, start);
              cur_expected (&c, error, "end of line after the return value");
              return NULL;
            }
          if (p->scratch->len - start == 1)
            {
              st->value = g_ptr_array_index (p->scratch, start);
              g_ptr_array_set_size (p->scratch, start);
            }
          else
            {
              st->value = finish_seq (p, CS_VALUE_TUPLE, start);
              st->return_bare = 1;
            }
        }
      goto located;
    }

  n = ident_len (c.s, c.end);
  if (n > 0 && c.s + n < c.end && c.s[n] == ',')
    {
      st = parse_unpack (p, li, indent, commented, error);
      if (st == NULL)
        return NULL;
      goto located;
    }
  if (n > 0 && (gsize) (c.end - c.s) > n + 3 && memcmp (c.s + n, ": \"", 3) == 0)
    {
      /* prologue: NAME: "TYPE" = expr */
      const char *ts, *differs = NULL;
      gsize tl;
      guint32 col;
      CsProxy *px = bind_name (p, c.s, n);
      st = cs_stmt_new (t, CS_STMT_ANNASSIGN);
      st->out = cs_value_new_proxy (p->trace->arena, px);
      c.s += n + 2;
      if (!read_quoted_type (&c, &ts, &tl, &col, error))
        return NULL;
      if (!apply_type (p, px, ts, tl, l, col, &differs, error))
        return NULL;
      st->type_comment_raw = differs;
      if (!cur_lit (&c, " = "))
        {
          cur_expected (&c, error, "' = ' after the annotation");
          return NULL;
        }
      st->value = read_value (&c, 0, error);
      if (st->value == NULL)
        return NULL;
      if (c.s != c.end)
        {
          cur_expected (&c, error, "end of line");
          return NULL;
        }
      goto located;
    }

  /* [targets = ] callee(args) [  # type comment] */
  {
    CsValue *out = NULL;
    gsize dn;
    const char *callee_s;

    dn = dotted_len (c.s, c.end);
    if (c.s < c.end && (*c.s == '(' || *c.s == '[' || (dn > 0 && dn == n && cur_col (&c) > 0
                                                        && (gsize) (c.end - c.s) > n + 2
                                                        && memcmp (c.s + n, " = ", 3) == 0)))
      {
        out = read_target (&c, error);
        if (out == NULL)
          return NULL;
        if (!cur_lit (&c, " = "))
          {
            cur_expected (&c, error, "' = ' after the targets");
            return NULL;
          }
      }
    dn = dotted_len (c.s, c.end);
    if (dn == 0)
      {
        cur_expected (&c, error, "a statement (a call, unpack, del or return)");
        return NULL;
      }
    callee_s = c.s;
    c.s += dn;
    if (c.s >= c.end || *c.s != '(')
      {
        cur_expected (&c, error, "'(' after the callee");
        return NULL;
      }
    st = cs_stmt_new (t, CS_STMT_CALL);
    st->callee = callee_intern (p, callee_s, dn, &st->op);
    st->out = out;
    if (!read_args (&c, st->op, &st->args, &st->n_args, error))
      return NULL;
    cs_stmt_index (t, st);
    if (c.s != c.end)
      {
        if (!cur_lit (&c, "  # "))
          {
            cur_expected (&c, error, "end of line or '  # ' and a type comment after the call");
            return NULL;
          }
        if (!read_type_comment (&c, st, error))
          return NULL;
      }
  }

located:
  st->line = l->lineno;
  st->col = (guint32) content_offset (l, indent, commented) + 1 + l->col0;
  return st;
}

/* ------------------------------------------------------------------------------------------ */
/* Comment lines                                                                               */

static gboolean
is_ident_text (const char *s, const char *end)
{
  return s < end && ident_len (s, end) == (gsize) (end - s);
}

/* `file:123: ` somewhere before any quote: a source-location comment (reference 1.2b). */
static gboolean
looks_like_srcloc (const char *s, const char *end)
{
  const char *q = s;

  if (s >= end || *s == ' ' || *s == '"')
    return FALSE;
  for (; q < end && *q != '"'; q++)
    {
      if (*q == ':' && q + 1 < end && g_ascii_isdigit (q[1]) && q > s)
        {
          const char *d = q + 1;
          while (d < end && g_ascii_isdigit (*d))
            d++;
          if (d + 1 < end && d[0] == ':' && (d[1] == ' ' || d[1] == '\t'))
            return TRUE;
        }
    }
  return FALSE;
}

/**
 * parse_comment:
 * Classifies a comment line that is not a subsymbol statement (reference 1.2 a-c, i): input
 * annotations (typing the proxy they name), unpack details, `# X (empty sequence)` (an empty
 * unpack), source locations, and any other text.  @after_unpack: the previous statement at the
 * same level was an unpack or one of its details.
 */
static CsStmt *
parse_comment (Parser *p, guint li, guint indent, gboolean after_unpack, GError **error)
{
  const Line *l = &g_array_index (p->lines, Line, li);
  CsTrace *t = p->trace;
  const char *s = l->s + indent + 2, *end = l->s + l->len;
  gsize n = ident_len (s, end);
  CsStmt *st;

  st = cs_stmt_new (t, CS_STMT_COMMENT);
  st->line = l->lineno;
  st->col = indent + 1 + l->col0;

  /* `# X (empty sequence)`: the unpack printer's line for an empty collection; as a subsymbol
   * Thunder comments it once more (`# # X (empty sequence)`). */
  {
    const char *u = s;
    gsize un = n;
    if (indent > 2 && (gsize) (end - s) > 2 && s[0] == '#' && s[1] == ' ')
      {
        u = s + 2;
        un = ident_len (u, end);
      }
    else if (indent > 2)
      un = 0;
    if (un > 0 && (gsize) (end - u) == un + 17 && memcmp (u + un, " (empty sequence)", 17) == 0)
      {
        st->kind = CS_STMT_UNPACK;
        st->op = cs_op_get (CS_OP_PRIM_UNPACK_SEQUENCE);
        st->source = bind_name (p, u, un);
        return st;
      }
  }

  st->comment_kind = CS_COMMENT_OTHER;
  if (n > 0 && (gsize) (end - s) > n + 3 && memcmp (s + n, ": \"", 3) == 0)
    {
      const char *ts = s + n + 3;
      const char *close = memchr (ts, '"', (gsize) (end - ts));
      if (close != NULL)
        {
          CsProxy *px = bind_name (p, s, n);
          const char *differs = NULL;
          if (!apply_type (p, px, ts, (gsize) (close - ts), l, (guint32) (ts - l->s) + 1 + l->col0,
                           &differs, error))
            return NULL;
          st->comment_kind = after_unpack ? CS_COMMENT_DETAIL : CS_COMMENT_INPUT;
          st->annotated = px;
          if (close + 1 != end || differs != NULL)
            st->text = arena_ndup (p, s, (gsize) (end - s));
          return st;
        }
      fail_at (p, error, CS_PARSE_ERROR_TYPE, l->lineno, (guint32) (ts - l->s) + l->col0,
               "bad type string: missing closing '\"'");
      return NULL;
    }
  if (after_unpack && (gsize) (end - s) == 4 && memcmp (s, "None", 4) == 0)
    {
      st->comment_kind = CS_COMMENT_DETAIL;
      st->text = arena_ndup (p, s, 4);
      return st;
    }
  if ((gsize) (end - s) == 10 && memcmp (s, "_ (unused)", 10) == 0)
    {
      st->comment_kind = CS_COMMENT_INPUT;
      st->text = arena_ndup (p, s, 10);
      return st;
    }
  if (is_ident_text (s, end))
    {
      st->comment_kind = after_unpack ? CS_COMMENT_DETAIL : CS_COMMENT_INPUT;
      st->annotated = bind_name (p, s, n);
      if (st->annotated->typed)
        st->text = arena_ndup (p, s, (gsize) (end - s));
      return st;
    }
  if (looks_like_srcloc (s, end))
    st->comment_kind = CS_COMMENT_SRCLOC;
  st->text = arena_ndup (p, s, (gsize) (end - s));
  return st;
}

/* ------------------------------------------------------------------------------------------ */
/* Bodies                                                                                      */

typedef struct
{
  CsStmt    *stmt;       /* open statement at this depth */
  GPtrArray *kids;       /* its subsymbols so far */
} Open;

static void
close_open (Parser *p, Open *open, guint *n_open, guint keep)
{
  while (*n_open > keep)
    {
      Open *o = &open[--(*n_open)];
      if (o->kids->len)
        {
          o->stmt->subs = (CsStmt **) arena_dup_ptrs (p,
                                                         (gpointer const *) o->kids->pdata, o->kids->len);
          o->stmt->n_subs = o->kids->len;
        }
      g_ptr_array_set_size (o->kids, 0);
      o->stmt = NULL;
    }
}

static gboolean
parse_body (Parser *p, guint first, guint last, GError **error)
{
  CsTrace *t = p->trace;
  Open open[CS_PARSE_MAX_DEPTH + 1];
  guint n_open = 0;
  g_autoptr(GPtrArray) top = g_ptr_array_new ();
  gboolean ok = FALSE;
  gboolean after_unpack[CS_PARSE_MAX_DEPTH + 1] = { FALSE };

  for (guint i = 0; i <= CS_PARSE_MAX_DEPTH; i++)
    {
      open[i].stmt = NULL;
      open[i].kids = g_ptr_array_new ();
    }

  for (guint li = first; li < last; li++)
    {
      const Line *l = &g_array_index (p->lines, Line, li);
      guint indent = 0, depth;
      gboolean commented;
      CsStmt *st;

      while (indent < l->len && l->s[indent] == ' ')
        indent++;
      if (indent == l->len)
        {
          st = cs_stmt_new (t, CS_STMT_BLANK);
          st->line = l->lineno;
          st->col = 1;
          if (l->len > 0)
            st->text = arena_ndup (p, l->s, l->len);
          close_open (p, open, &n_open, 0);
          g_ptr_array_add (top, st);
          after_unpack[0] = FALSE;
          continue;
        }
      if (l->s[indent] == '\t')
        {
          fail_at (p, error, CS_PARSE_ERROR_INDENT, l->lineno, indent + 1 + l->col0,
                   "tab in indentation (trace bodies are indented with spaces)");
          goto out;
        }
      if (indent % 2 != 0 || indent == 0)
        {
          fail_at (p, error, CS_PARSE_ERROR_INDENT, l->lineno, indent + 1 + l->col0,
                   "indentation of %u spaces (trace bodies use multiples of 2, at least 2)", indent);
          goto out;
        }
      depth = indent / 2 - 1;
      commented = l->len >= indent + 2 && l->s[indent] == '#' && l->s[indent + 1] == ' ';
      if (!commented && l->len == indent + 1 && l->s[indent] == '#')
        commented = FALSE;

      if (depth == 0)
        {
          close_open (p, open, &n_open, 0);
          if (commented)
            {
              st = parse_comment (p, li, indent, after_unpack[0], error);
              if (st == NULL)
                goto out;
            }
          else
            {
              st = parse_statement (p, &li, indent, FALSE, error);
              if (st == NULL)
                goto out;
              if (st->kind == CS_STMT_CALL && top->len > 0)
                {
                  CsStmt *prev = g_ptr_array_index (top, top->len - 1);
                  if (prev->kind == CS_STMT_COMMENT && prev->comment_kind == CS_COMMENT_OTHER)
                    prev->comment_kind = CS_COMMENT_HEADER;
                }
              open[0].stmt = st;
              n_open = 1;
            }
          after_unpack[0] = st->kind == CS_STMT_UNPACK
                            || (st->kind == CS_STMT_COMMENT && st->comment_kind == CS_COMMENT_DETAIL);
          g_ptr_array_add (top, st);
          /* one line adds at most ~28x its bytes of IR, so checking per statement bounds it */
          if (p->ir_done + cs_arena_size_bytes (t->arena) > CS_PARSE_MAX_IR_BYTES)
            {
              fail_at (p, error, CS_PARSE_ERROR_LIMIT, l->lineno, 1 + l->col0,
                       "the input needs more than %" G_GSIZE_FORMAT " MiB of memory as IR",
                       CS_PARSE_MAX_IR_BYTES >> 20);
              goto out;
            }
          continue;
        }

      /* depth >= 1: a comment of a subsymbol level */
      if (!commented)
        {
          fail_at (p, error, CS_PARSE_ERROR_INDENT, l->lineno, indent + 1 + l->col0,
                   "unexpected indentation of %u spaces (only subsymbol comments are indented "
                   "more than 2 spaces)", indent);
          goto out;
        }
      if (depth > CS_PARSE_MAX_DEPTH - 1)
        {
          fail_at (p, error, CS_PARSE_ERROR_LIMIT, l->lineno, indent + 1 + l->col0,
                   "subsymbols nested deeper than %d levels", CS_PARSE_MAX_DEPTH - 1);
          goto out;
        }
      if (depth > n_open)
        {
          fail_at (p, error, CS_PARSE_ERROR_INDENT, l->lineno, indent + 1 + l->col0,
                   "comment indented %u spaces but there is no statement at %u spaces for it "
                   "to be a subsymbol of", indent, indent - 2);
          goto out;
        }
      close_open (p, open, &n_open, depth);
      if (looks_like_statement (l->s + indent + 2, l->s + l->len))
        {
          st = parse_statement (p, &li, indent, TRUE, error);
          if (st == NULL)
            goto out;
          g_ptr_array_add (open[depth - 1].kids, st);
          open[depth].stmt = st;
          n_open = depth + 1;
          after_unpack[depth] = st->kind == CS_STMT_UNPACK;
        }
      else
        {
          st = parse_comment (p, li, indent, after_unpack[depth], error);
          if (st == NULL)
            goto out;
          g_ptr_array_add (open[depth - 1].kids, st);
          after_unpack[depth] = st->kind == CS_STMT_UNPACK
                                || (st->kind == CS_STMT_COMMENT && st->comment_kind == CS_COMMENT_DETAIL);
        }
      if (p->ir_done + cs_arena_size_bytes (t->arena) > CS_PARSE_MAX_IR_BYTES)
        {
          fail_at (p, error, CS_PARSE_ERROR_LIMIT, l->lineno, 1 + l->col0,
                   "the input needs more than %" G_GSIZE_FORMAT " MiB of memory as IR",
                   CS_PARSE_MAX_IR_BYTES >> 20);
          goto out;
        }
    }
  close_open (p, open, &n_open, 0);
  t->stmts = (CsStmt **) cs_arena_dup_ptrs (t->arena, (gpointer const *) top->pdata, top->len);
  t->n_stmts = top->len;
  ok = TRUE;

out:
  for (guint i = 0; i <= CS_PARSE_MAX_DEPTH; i++)
    g_ptr_array_free (open[i].kids, TRUE);
  return ok;
}

/* cs_stmt_index() for @s and its subsymbols. */
static void
index_stmt_tree (CsTrace *t, CsStmt *s)
{
  cs_stmt_index (t, s);
  for (guint i = 0; i < s->n_subs; i++)
    index_stmt_tree (t, s->subs[i]);
}

/* Identifiers become proxies when the trace binds them anywhere (reference 1.4, 1.6.17); the
 * statements read them as proxies from then on, so they are indexed again when one did. */
static void
resolve_pending (Parser *p)
{
  CsTrace *t = p->trace;
  gboolean resolved = FALSE;

  for (guint i = 0; i < p->pending->len; i++)
    {
      Pending *pe = &g_array_index (p->pending, Pending, i);
      CsValue *v = pe->value;
      const char *dot = strchr (v->u.s, '.');
      CsProxy *px;

      if (dot == NULL)
        {
          px = cs_name_table_lookup (t->proxies, v->u.s, cs_name_hash (v->u.s));
          if (px != NULL)
            {
              v->kind = CS_VALUE_PROXY;
              v->u.proxy = px;
              resolved = TRUE;
            }
          else if (pe->dtype_pos)
            {
              static const struct { const char *name; CsPyType t; } pytypes[] = {
                { "bool", CS_PYTYPE_BOOL }, { "int", CS_PYTYPE_INT },
                { "float", CS_PYTYPE_FLOAT }, { "complex", CS_PYTYPE_COMPLEX },
              };
              for (guint k = 0; k < G_N_ELEMENTS (pytypes); k++)
                if (strcmp (v->u.s, pytypes[k].name) == 0)
                  {
                    v->kind = CS_VALUE_DTYPE;
                    v->u.dtype.dtype = cs_pytype_dtype (pytypes[k].t);
                    v->u.dtype.weak = 1;
                    v->u.dtype.pytype = pytypes[k].t;
                    break;
                  }
            }
        }
      else
        {
          g_autofree char *base = g_strndup (v->u.s, (gsize) (dot - v->u.s));
          px = cs_name_table_lookup (t->proxies, base, cs_name_hash (base));
          if (px != NULL)
            {
              CsValue *pv = cs_value_new_proxy (t->arena, px);
              const char *attr = dot + 1;
              v->kind = CS_VALUE_ATTR;
              v->u.seq.attr = attr;
              v->u.seq.items = CS_ARENA_NEW_N (t->arena, CsValue *, 1);
              v->u.seq.items[0] = pv;
              v->u.seq.n = 1;
              resolved = TRUE;
            }
        }
    }
  g_array_set_size (p->pending, 0);
  if (resolved)
    for (guint i = 0; i < t->n_stmts; i++)
      index_stmt_tree (t, t->stmts[i]);
}

/* ------------------------------------------------------------------------------------------ */
/* Trace headers and files                                                                     */

static gboolean
line_is_blank (const Line *l)
{
  for (guint i = 0; i < l->len; i++)
    if (l->s[i] != ' ' && l->s[i] != '\t')
      return FALSE;
  return TRUE;
}

static gboolean
line_starts (const Line *l, const char *lit)
{
  gsize n = strlen (lit);
  return l->len >= n && memcmp (l->s, lit, n) == 0;
}

/* A column-0 line that Thunder prints as part of a trace header. */
static gboolean
is_header_line (const Line *l)
{
  return line_starts (l, "# Constructed by ") || line_starts (l, "import ")
         || line_starts (l, "from ") || line_starts (l, "@") || line_starts (l, "def ")
         || line_starts (l, "# No signature available");
}

static gboolean
parse_signature (Parser *p, const Line *l, GError **error)
{
  CsTrace *t = p->trace;
  Cur c;
  gsize n;
  GArray *params = g_array_new (FALSE, TRUE, sizeof (CsParam));
  g_autoptr(GHashTable) seen = g_hash_table_new (NULL, NULL); /* the parameters' proxies */
  gboolean ok = FALSE;

  cur_init (&c, p, l, 4);
  n = ident_len (c.s, c.end);
  if (n == 0)
    {
      cur_expected (&c, error, "the function name after 'def '");
      goto out;
    }
  t->name = arena_ndup (p, c.s, n);
  c.s += n;
  if (!cur_lit (&c, "("))
    {
      cur_expected (&c, error, "'(' after the function name");
      goto out;
    }
  while (c.s < c.end && *c.s != ')')
    {
      CsParam prm = { CS_PARAM_PLAIN, NULL, NULL };
      if (cur_lit (&c, "**"))
        prm.kind = CS_PARAM_DSTAR;
      else if (cur_lit (&c, "*"))
        prm.kind = CS_PARAM_STAR;
      n = ident_len (c.s, c.end);
      if (n == 0 && prm.kind != CS_PARAM_STAR)
        {
          cur_expected (&c, error, "a parameter name");
          goto out;
        }
      if (n > 0)
        {
          CsProxy *px = bind_name (p, c.s, n);
          /* Python refuses the function: "duplicate argument 'x' in function definition" */
          if (!g_hash_table_add (seen, px))
            {
              cur_fail (&c, error, CS_PARSE_ERROR_SYNTAX,
                        "parameter '%s' appears twice in the signature of %s()", px->name,
                        t->name);
              goto out;
            }
          prm.name = px->name;
          c.s += n;
        }
      if (prm.kind == CS_PARAM_PLAIN && cur_lit (&c, "="))
        {
          prm.dflt = read_value (&c, 0, error);
          if (prm.dflt == NULL)
            goto out;
        }
      g_array_append_val (params, prm);
      if (cur_lit (&c, ","))
        cur_skip_spaces (&c);
      else if (c.s < c.end && *c.s != ')')
        {
          cur_expected (&c, error, "',' or ')' in the parameters");
          goto out;
        }
    }
  if (!cur_lit (&c, "):"))
    {
      cur_expected (&c, error, "'):' ending the signature");
      goto out;
    }
  if (c.s != c.end)
    {
      cur_expected (&c, error, "end of line after the signature");
      goto out;
    }
  t->n_params = params->len;
  if (params->len)
    {
      t->params = CS_ARENA_NEW_N (t->arena, CsParam, params->len);
      memcpy (t->params, params->data, sizeof (CsParam) * params->len);
    }
  t->has_signature = TRUE;
  ok = TRUE;

out:
  g_array_free (params, TRUE);
  return ok;
}

static const char **
strv_to_arena (CsTrace *t, GPtrArray *v, guint *n)
{
  *n = v->len;
  if (v->len == 0)
    return NULL;
  return (const char **) cs_arena_dup_ptrs (t->arena, (gpointer const *) v->pdata, v->len);
}

/**
 * parse_one_trace:
 * Parses the trace starting at line *li (after any separator blank lines).  On return *li is
 * the first line after the trace body (trailing blank lines of the body are left for the
 * separator).
 */
static CsTrace *
parse_one_trace (Parser *p, guint *li, gboolean list_mode, GError **error)
{
  g_autoptr(CsTrace) t = cs_trace_new (NULL, "parse");
  g_autoptr(GPtrArray) leading = g_ptr_array_new ();
  g_autoptr(GPtrArray) imports = g_ptr_array_new ();
  g_autoptr(GPtrArray) decorators = g_ptr_array_new ();
  guint n = p->lines->len;
  guint i = *li, body0, body1;
  gboolean have_sig = FALSE;
  const Line *l = NULL;

  t->has_signature = FALSE;
  p->trace = t;
  g_hash_table_remove_all (p->types);
  g_hash_table_remove_all (p->strings);
  memset (&p->lit, 0, sizeof p->lit);
  t->file = cs_arena_strdup (t->arena, p->name);

  /* leading non-Thunder comments (and blank lines among them) */
  while (i < n)
    {
      l = &g_array_index (p->lines, Line, i);
      if (is_header_line (l))
        break;
      if (line_is_blank (l) || line_starts (l, "#"))
        {
          g_ptr_array_add (leading, arena_ndup (p, l->s, l->len));
          i++;
          continue;
        }
      break;
    }
  if (i >= n)
    {
      const Line *last = n ? &g_array_index (p->lines, Line, n - 1) : NULL;
      fail_at (p, error, CS_PARSE_ERROR_EMPTY, last ? last->lineno : 1, 1,
               "no trace found (expected a 'def NAME(...):' line)");
      return NULL;
    }

  /* header: provenance, imports, blank line, decorators, signature */
  while (i < n && !have_sig)
    {
      l = &g_array_index (p->lines, Line, i);
      if (line_starts (l, "# Constructed by ") && t->provenance == NULL && imports->len == 0
          && decorators->len == 0)
        t->provenance = arena_ndup (p, l->s + 17, l->len - 17);
      else if ((line_starts (l, "import ") || line_starts (l, "from ")) && decorators->len == 0
               && !t->blank_after_imports)
        g_ptr_array_add (imports, arena_ndup (p, l->s, l->len));
      else if (line_is_blank (l) && !t->blank_after_imports && decorators->len == 0
               && (imports->len > 0 || t->provenance != NULL))
        t->blank_after_imports = TRUE;
      else if (line_starts (l, "@"))
        g_ptr_array_add (decorators, arena_ndup (p, l->s, l->len));
      else if (line_starts (l, "def "))
        {
          if (!parse_signature (p, l, error))
            return NULL;
          have_sig = TRUE;
        }
      else if (l->len == 24 && line_starts (l, "# No signature available"))
        {
          t->has_signature = FALSE;
          have_sig = TRUE;
        }
      else
        {
          const char *what = l->len > 0 && l->s[0] == ' '
                             ? "an indented line before the 'def' line of the trace"
                             : "a line that is not part of a trace header (expected '# Constructed by', "
                               "an import, a decorator or 'def NAME(...):')";
          fail_at (p, error, CS_PARSE_ERROR_SYNTAX, l->lineno, 1 + l->col0, "%s", what);
          return NULL;
        }
      i++;
      if (list_mode && l->trace_end && !have_sig)
        {
          fail_at (p, error, CS_PARSE_ERROR_SYNTAX, l->lineno, l->len + 1 + l->col0,
                   "trace ends before its 'def' line");
          return NULL;
        }
    }
  if (!have_sig)
    {
      const Line *last = &g_array_index (p->lines, Line, n - 1);
      fail_at (p, error, CS_PARSE_ERROR_SYNTAX, last->lineno, last->len + 1 + last->col0,
               "the input ends before the trace's 'def' line");
      return NULL;
    }

  /* body: indented or blank lines up to the next column-0 line (or the list separator) */
  body0 = i;
  body1 = i;
  if (!(list_mode && l->trace_end))
    while (i < n)
      {
        const Line *b = &g_array_index (p->lines, Line, i);
        if (b->len > 0 && b->s[0] != ' ' && !line_is_blank (b))
          break;
        i++;
        if (!line_is_blank (b))
          body1 = i;
        if (list_mode && b->trace_end)
          break;
      }
  if (!parse_body (p, body0, body1, error))
    return NULL;
  resolve_pending (p);

  t->leading = strv_to_arena (t, leading, &t->n_leading);
  t->imports = strv_to_arena (t, imports, &t->n_imports);
  t->decorators = strv_to_arena (t, decorators, &t->n_decorators);
  *li = body1;
  p->trace = NULL;
  return g_steal_pointer (&t);
}

/* The first byte of @s that is not 7-bit ASCII or is NUL (@s + @len if none). */
static const char *
first_non_ascii (const char *s, gsize len)
{
  const char *end = s + len;

  while (end - s >= 8)
    {
      guint64 x;
      memcpy (&x, s, 8);
      if (((x & G_GUINT64_CONSTANT (0x8080808080808080))
           | ((x - G_GUINT64_CONSTANT (0x0101010101010101)) & ~x & G_GUINT64_CONSTANT (0x8080808080808080))) != 0)
        break;
      s += 8;
    }
  for (; s < end; s++)
    if ((guchar) *s >= 0x80 || *s == '\0')
      return s;
  return end;
}

/* Splits @buf into lines (checking the line length limit). */
static gboolean
split_lines (Parser *p, const char *buf, gsize len, gboolean *final_newline, GError **error)
{
  const char *s = buf, *end = buf + len;
  guint32 lineno = 1;

  *final_newline = len > 0 && buf[len - 1] == '\n';
  while (s < end)
    {
      const char *nl = memchr (s, '\n', (gsize) (end - s));
      const char *e = nl ? nl : end;
      Line l = { 0 };
      if (lineno > CS_PARSE_MAX_LINES)
        return fail_at (p, error, CS_PARSE_ERROR_LIMIT, lineno, 1, "more than %d lines in one input",
                        CS_PARSE_MAX_LINES);
      if ((gsize) (e - s) > CS_PARSE_MAX_LINE_BYTES)
        return fail_at (p, error, CS_PARSE_ERROR_LIMIT, lineno, CS_PARSE_MAX_LINE_BYTES + 1,
                        "line longer than %d bytes", CS_PARSE_MAX_LINE_BYTES);
      if (e > s && e[-1] == '\r')
        e--;
      l.s = s;
      l.len = (guint32) (e - s);
      l.lineno = lineno++;
      g_array_append_val (p->lines, l);
      if (nl == NULL)
        break;
      s = nl + 1;
    }
  return TRUE;
}

/* A printed Python list of traces: `[` before the first trace, one-space indent on every
 * later line, `,` after each trace but the last, `]` after the last (reference 1.2m). */
static gboolean
unwrap_list (Parser *p, guint first, CsTraceList *list, gboolean final_newline, GError **error)
{
  guint n = p->lines->len;
  guint last = n;
  Line *l;

  while (last > first && line_is_blank (&g_array_index (p->lines, Line, last - 1)))
    last--;
  l = &g_array_index (p->lines, Line, first);
  l->s++;
  l->len--;
  l->col0 = 1;
  for (guint i = first + 1; i < n; i++)
    {
      l = &g_array_index (p->lines, Line, i);
      if (l->len == 0)
        continue;
      if (l->s[0] != ' ')
        return fail_at (p, error, CS_PARSE_ERROR_INDENT, l->lineno, 1,
                        "expected the one-space indent of a printed list of traces");
      l->s++;
      l->len--;
      l->col0 = 1;
    }
  l = &g_array_index (p->lines, Line, last - 1);
  if (l->len == 0 || l->s[l->len - 1] != ']')
    return fail_at (p, error, CS_PARSE_ERROR_SYNTAX, l->lineno, l->len + 1 + l->col0,
                    "a printed list of traces must end with ']'");
  l->len--;
  {
    GString *tr = g_string_new ("]");
    for (guint i = last; i < n; i++)
      g_string_append_c (tr, '\n');
    if (final_newline)
      g_string_append_c (tr, '\n');
    list->trailer = g_string_free (tr, FALSE);
  }
  for (guint i = first; i + 1 < last; i++)
    {
      Line *cur = &g_array_index (p->lines, Line, i);
      guint j = i + 1;
      if (cur->len == 0 || cur->s[cur->len - 1] != ',')
        continue;
      while (j < last && g_array_index (p->lines, Line, j).len == 0)
        j++;
      if (j < last && is_header_line (&g_array_index (p->lines, Line, j)))
        {
          cur->len--;
          cur->trace_end = 1;
        }
    }
  return TRUE;
}

/**
 * cs_parse_text:
 * @text: trace text (need not be NUL-terminated)
 * @len: bytes in @text
 * @name: file name used in error messages ("-" for stdin)
 * @error: return location for a #CS_PARSE_ERROR
 *
 * Parses one or more traces: concatenated (blank lines between them) or a printed Python list
 * of traces.  Every error message is "name:line:col: reason" with 1-based line and column
 * (bytes).  Limits: CS_PARSE_MAX_FILE_BYTES input, CS_PARSE_MAX_LINE_BYTES per line,
 * CS_PARSE_MAX_DEPTH bracket and subsymbol nesting.  Time and memory are linear in @len.
 * Every trace read is checked by cs_validate_trace() (names defined before use, no undefined
 * operand).
 * Errors: EMPTY (nothing to parse), ENCODING (not UTF-8 or a NUL byte), SYNTAX, TYPE, INDENT,
 * LIMIT, NAME.
 * Source: reference/thunder-traces.md section 1 (the printers of TraceCtx and BoundSymbol).
 * Returns: (transfer full): the traces, or NULL with @error set
 */
CsTraceList *
cs_parse_text (const char *text, gsize len, const char *name, GError **error)
{
  Parser p = { 0 };
  g_autoptr(CsTraceList) list = NULL;
  const char *bad = NULL;
  gboolean final_newline = FALSE, is_list = FALSE;
  guint i = 0, n_sep_blank = 0;
  CsTraceList *ret = NULL;

  g_return_val_if_fail (text != NULL || len == 0, NULL);
  p.name = name ? name : "<input>";
  if (len > CS_PARSE_MAX_FILE_BYTES)
    {
      fail_at (&p, error, CS_PARSE_ERROR_LIMIT, 1, 1, "input larger than %d bytes",
               CS_PARSE_MAX_FILE_BYTES);
      return NULL;
    }
  if (len == 0)
    {
      fail_at (&p, error, CS_PARSE_ERROR_EMPTY, 1, 1, "empty input (no trace)");
      return NULL;
    }
  /* Traces are almost all ASCII: skip it 8 bytes at a time, validate from the first other byte */
  bad = first_non_ascii (text, len);
  if (bad < text + len && !g_utf8_validate_len (bad, (gsize) (text + len - bad), &bad))
    {
      guint32 line = 1, col = 1;
      for (const char *q = text; q < bad; q++)
        {
          if (*q == '\n')
            {
              line++;
              col = 1;
            }
          else
            col++;
        }
      fail_at (&p, error, CS_PARSE_ERROR_ENCODING, line, col,
               "not UTF-8 text (byte 0x%02x); is this a binary file?", (guint) (guchar) *bad);
      return NULL;
    }

  /* torch.compile's FX graphs have their own reader (cs-parse-aten.c) */
  {
    CsParseFormat fmt = cs_parse_get_default_format ();

    if (fmt == CS_PARSE_FORMAT_AUTO)
      fmt = cs_parse_detect_format (text, len);
    if (fmt == CS_PARSE_FORMAT_ATEN)
      return cs_parse_aten_text (text, len, p.name, error);
  }

  p.lines = g_array_new (FALSE, TRUE, sizeof (Line));
  p.pending = g_array_new (FALSE, FALSE, sizeof (Pending));
  p.scratch = g_ptr_array_new ();
  p.scratch_args = g_array_new (FALSE, FALSE, sizeof (CsArg));
  p.tmp = g_string_new (NULL);
  p.types = g_hash_table_new (g_str_hash, g_str_equal);
  p.strings = g_hash_table_new (g_str_hash, g_str_equal);
  list = cs_trace_list_new (p.name);

  /* No copy of the input: every read is bounded by line lengths, and numbers are copied to a
   * small NUL-terminated buffer before strtod/strtoll. */
  if (!split_lines (&p, text, len, &final_newline, error))
    goto out;
  if (p.lines->len > 0)
    {
      /* a UTF-8 byte order mark (editors on Windows) is not part of the trace */
      Line *first = &g_array_index (p.lines, Line, 0);
      if (first->len >= 3 && memcmp (first->s, "\xef\xbb\xbf", 3) == 0)
        {
          first->s += 3;
          first->len -= 3;
          first->col0 = 3;
        }
    }

  /* A list starts with `[` right before a header line (after any leading comments). */
  {
    guint k = 0;
    while (k < p.lines->len)
      {
        const Line *l = &g_array_index (p.lines, Line, k);
        if (is_header_line (l) || !(line_is_blank (l) || line_starts (l, "#")))
          break;
        k++;
      }
    if (k < p.lines->len)
      {
        const Line *l = &g_array_index (p.lines, Line, k);
        if (l->len > 1 && l->s[0] == '[')
          {
            Line probe = *l;
            probe.s++;
            probe.len--;
            if (is_header_line (&probe))
              {
                /* leading comments stay outside the list: parse them with the first trace */
                if (!unwrap_list (&p, k, list, final_newline, error))
                  goto out;
                is_list = TRUE;
              }
          }
      }
  }
  list->is_list = is_list;

  while (i < p.lines->len)
    {
      CsTrace *t;

      if (list->traces->len > 0)
        {
          /* separator: blank lines between traces */
          n_sep_blank = 0;
          while (i < p.lines->len && line_is_blank (&g_array_index (p.lines, Line, i)))
            {
              n_sep_blank++;
              i++;
            }
          if (i >= p.lines->len)
            break;
          {
            GString *sep = g_string_new (is_list ? ",\n" : "");
            for (guint k = 0; k < n_sep_blank; k++)
              g_string_append_c (sep, '\n');
            g_ptr_array_add (list->separators, g_string_free (sep, FALSE));
          }
        }
      if (list->traces->len >= CS_PARSE_MAX_TRACES)
        {
          const Line *l = &g_array_index (p.lines, Line, i);
          fail_at (&p, error, CS_PARSE_ERROR_LIMIT, l->lineno, 1 + l->col0,
                   "more than %d traces in one input", CS_PARSE_MAX_TRACES);
          goto out;
        }
      t = parse_one_trace (&p, &i, is_list, error);
      if (t == NULL)
        goto out;
      if (!cs_validate_trace (t, p.name, text, len, error))
        {
          cs_trace_unref (t);
          goto out;
        }
      p.ir_done += cs_arena_size_bytes (t->arena);
      g_ptr_array_add (list->traces, t);
    }

  if (!is_list)
    {
      /* trailer: blank lines after the last trace */
      GString *tr = g_string_new (NULL);
      guint last_body = p.lines->len;
      while (last_body > 0 && line_is_blank (&g_array_index (p.lines, Line, last_body - 1)))
        last_body--;
      for (guint k = last_body; k < p.lines->len; k++)
        g_string_append_c (tr, '\n');
      if (tr->len > 0 && !final_newline)
        g_string_truncate (tr, tr->len - 1);
      list->trailer = tr->len ? g_string_free (tr, FALSE) : (g_string_free (tr, TRUE), NULL);
    }
  ret = g_steal_pointer (&list);

out:
  g_array_free (p.lines, TRUE);
  g_array_free (p.pending, TRUE);
  g_ptr_array_free (p.scratch, TRUE);
  g_array_free (p.scratch_args, TRUE);
  g_string_free (p.tmp, TRUE);
  g_hash_table_unref (p.types);
  g_hash_table_unref (p.strings);
  return ret;
}

/**
 * cs_parse_max_input_bytes:
 *
 * The most bytes castscope reads from one input (a file, a special file such as a FIFO or
 * /dev/zero, standard input, a file the app opens): CS_PARSE_MAX_FILE_BYTES (1 GiB), or the
 * environment variable CASTSCOPE_MAX_INPUT_BYTES when it holds a smaller positive number of
 * bytes (tests use it to reach the cap quickly).  Read once per call.  Any other value of the
 * variable gives the 1 GiB here, and makes cs_parse_file() fail with CS_PARSE_ERROR_LIMIT.
 * Returns: the cap in bytes, 1 to CS_PARSE_MAX_FILE_BYTES
 */
gsize
cs_parse_max_input_bytes (void)
{
  const char *env = g_getenv ("CASTSCOPE_MAX_INPUT_BYTES");
  guint64 v = 0;

  if (env != NULL && g_ascii_string_to_unsigned (env, 10, 1, CS_PARSE_MAX_FILE_BYTES, &v, NULL))
    return (gsize) v;
  return CS_PARSE_MAX_FILE_BYTES;
}

/* The cap of cs_parse_max_input_bytes(), or FALSE with CS_PARSE_ERROR_LIMIT when
 * CASTSCOPE_MAX_INPUT_BYTES is set to something that is not a number of bytes from 1 to
 * CS_PARSE_MAX_FILE_BYTES (a typo must not leave the cap as it was unnoticed). */
static gboolean
input_cap (gsize *cap, GError **error)
{
  const char *env = g_getenv ("CASTSCOPE_MAX_INPUT_BYTES");
  guint64 v = 0;

  *cap = CS_PARSE_MAX_FILE_BYTES;
  if (env == NULL)
    return TRUE;
  if (!g_ascii_string_to_unsigned (env, 10, 1, CS_PARSE_MAX_FILE_BYTES, &v, NULL))
    {
      g_set_error (error, CS_PARSE_ERROR, CS_PARSE_ERROR_LIMIT,
                   "CASTSCOPE_MAX_INPUT_BYTES='%s' is not a number of bytes from 1 to %d (it "
                   "lowers the 1 GiB cap on one input; unset it for that cap)", env,
                   CS_PARSE_MAX_FILE_BYTES);
      return FALSE;
    }
  *cap = (gsize) v;
  return TRUE;
}

/* "NAME: input larger than N bytes ..." (CS_PARSE_ERROR_LIMIT) */
static void
fail_too_large (GError **error, const char *name, gsize cap)
{
  static const char * const units[] = { "KiB", "MiB", "GiB" };
  double v = (double) cap;
  int k = -1;
  g_autofree char *human = NULL;

  while (v >= 1024 && k < 2)
    {
      v /= 1024;
      k++;
    }
  if (k >= 0)
    human = g_strdup_printf (" (%.4g %s)", v, units[k]);
  g_set_error (error, CS_PARSE_ERROR, CS_PARSE_ERROR_LIMIT,
               "%s: input larger than %" G_GSIZE_FORMAT " bytes%s, %s; is this a trace file?",
               name, cap, human ? human : "",
               cap < CS_PARSE_MAX_FILE_BYTES
               ? "the cap CASTSCOPE_MAX_INPUT_BYTES sets (unset it for the 1 GiB cap)"
               : "the most castscope reads from one input (CASTSCOPE_MAX_INPUT_BYTES=N lowers "
                 "the cap)");
}

/* Reads all of @fd (a file, FIFO, device or stdin) up to cs_parse_max_input_bytes(): a regular
 * file over the cap is refused from its size before reading, anything else once the cap is
 * passed.  Reading stops early at a NUL byte, which no trace holds (cs_parse_text reports it
 * with its line and column): /dev/zero is refused after its first chunk.
 * Returns: (transfer full): the bytes (NUL-terminated, *@len_out without it), or NULL with a
 * CS_PARSE_ERROR_IO or CS_PARSE_ERROR_LIMIT error naming @name */
static char *
read_capped (int fd, const char *name, gsize *len_out, GError **error)
{
  struct stat st;
  gsize cap, len = 0, alloc;
  char *buf;

  if (!input_cap (&cap, error))
    return NULL;
  alloc = MIN ((gsize) 1 << 16, cap + 1);

  if (fstat (fd, &st) == 0 && S_ISREG (st.st_mode))
    {
      if ((guint64) st.st_size > cap)
        {
          fail_too_large (error, name, cap);
          return NULL;
        }
      alloc = (gsize) st.st_size + 1;   /* one more byte to see the end (or growth) */
    }
  /* invariant: len <= alloc <= cap + 1; len == cap + 1 means over the cap */
  buf = g_malloc (alloc + 1);
  for (;;)
    {
      gssize got;

      if (len == alloc)
        {
          alloc = MIN (alloc * 2, cap + 1);
          buf = g_realloc (buf, alloc + 1);
        }
      got = read (fd, buf + len, alloc - len);
      if (got < 0 && errno == EINTR)
        continue;
      if (got < 0)
        {
          int saved = errno;
          g_free (buf);
          g_set_error (error, CS_PARSE_ERROR, CS_PARSE_ERROR_IO, "%s: cannot read: %s", name,
                       g_strerror (saved));
          return NULL;
        }
      if (got == 0)
        break;
      len += (gsize) got;
      if (memchr (buf + len - (gsize) got, '\0', (gsize) got) != NULL)
        break;
      if (len > cap)
        {
          g_free (buf);
          fail_too_large (error, name, cap);
          return NULL;
        }
    }
  buf[len] = '\0';
  *len_out = len;
  return buf;
}

/**
 * cs_parse_file:
 * @path: a file, or "-" for standard input
 * @error: return location for a #CS_PARSE_ERROR
 *
 * Reads @path and parses it with cs_parse_text().  Every input, whatever it is (a file, a FIFO,
 * a device, standard input), is read up to cs_parse_max_input_bytes() and refused past it.
 * Errors: CS_PARSE_ERROR_IO (missing file, a directory, unreadable) with the message
 * "path: reason" (no line and column: there is no position), CS_PARSE_ERROR_LIMIT for an
 * input over the cap or a CASTSCOPE_MAX_INPUT_BYTES that is no number of bytes from 1 to
 * 1 GiB, and the errors of cs_parse_text.
 * Returns: (transfer full): the traces, or NULL with @error set
 */
CsTraceList *
cs_parse_file (const char *path, GError **error)
{
  g_autofree char *contents = NULL;
  gsize len = 0;
  int fd;

  g_return_val_if_fail (path != NULL, NULL);
  if (strcmp (path, "-") == 0)
    {
      contents = read_capped (STDIN_FILENO, "-", &len, error);
      return contents ? cs_parse_text (contents, len, "-", error) : NULL;
    }
  if (g_file_test (path, G_FILE_TEST_IS_DIR))
    {
      g_set_error (error, CS_PARSE_ERROR, CS_PARSE_ERROR_IO, "%s: is a directory, not a trace file",
                   path);
      return NULL;
    }
  fd = g_open (path, O_RDONLY | O_CLOEXEC, 0);
  if (fd < 0)
    {
      int saved = errno;
      g_set_error (error, CS_PARSE_ERROR, CS_PARSE_ERROR_IO, "%s: cannot read: %s", path,
                   g_strerror (saved));
      return NULL;
    }
  contents = read_capped (fd, path, &len, error);
  close (fd);
  if (contents == NULL)
    return NULL;
  return cs_parse_text (contents, len, path, error);
}

/**
 * cs_parse_trace:
 * @text: NUL-terminated trace text
 * @name: (nullable): name for messages
 * @error: return location for a #CS_PARSE_ERROR
 *
 * Parses @text and returns its first trace (convenience for tests and tools).
 * Returns: (transfer full): the first trace, or NULL with @error set
 */
CsTrace *
cs_parse_trace (const char *text, const char *name, GError **error)
{
  g_autoptr(CsTraceList) list = NULL;

  g_return_val_if_fail (text != NULL, NULL);
  list = cs_parse_text (text, strlen (text), name ? name : "<string>", error);
  if (list == NULL)
    return NULL;
  return cs_trace_ref (g_ptr_array_index (list->traces, 0));
}
