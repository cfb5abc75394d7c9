/* cs-print.c: prints traces in Lightning Thunder's format.
 *
 * Mirrors TraceCtx.python() (thunder/core/trace.py), BoundSymbol.python() and
 * default_python_printer (thunder/core/symbol.py), the unpack_sequence / return printers
 * (thunder/core/prims.py) and prettyprint (thunder/core/codeutils.py); see
 * reference/thunder-traces.md section 1.  Text read by the parser keeps its spelling (raw
 * literals, type_raw, comment text) so that a parsed trace prints back byte for byte; values,
 * proxies and statements made by passes are printed the way Thunder would print them.
 */
#include "cs-config.h"

#include "cs-print.h"

#include "cs-aten.h"
#include "cs-dtype.h"
#include "cs-ops.h"
#include "cs-str-private.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Width at which the unpack_sequence printer wraps (prims.py _make_parts_into_line_or_lines). */
#define CS_PRINT_UNPACK_WRAP 80

/* ------------------------------------------------------------------------------------------ */
/* Numbers and strings                                                                         */

/**
 * cs_print_float_to:
 * @out: string to append to
 * @f: the number
 *
 * Appends Python's repr() of a float: the shortest digit string that reads back as @f, in
 * fixed notation when the decimal exponent is in [-4, 16) (with ".0" for integral values),
 * otherwise `d.ddde-XX` with at least two exponent digits; `float('inf')`, `-float('inf')`
 * and `float('NaN')` as Thunder's baseutils prints them.
 * Source: Python's float_repr_style 'short' (repr), thunder/core/baseutils.py.
 */
void
cs_print_float_to (GString *out, double f)
{
  char ebuf[64], fbuf[400];
  int p, exp10;
  const char *e;

  if (isnan (f))
    {
      _cs_str_put (out, "float('NaN')");
      return;
    }
  if (isinf (f))
    {
      _cs_str_put (out, f > 0 ? "float('inf')" : "-float('inf')");
      return;
    }
  /* If any string of at most 15 significant digits reads back as f, the correctly rounded
   * 15-digit one does (doubles are spaced more finely than 15-digit decimals), and stripping
   * its trailing zeros gives the shortest; otherwise 16, then 17 digits (always enough). */
  for (p = 15; p <= 17; p++)
    {
      g_snprintf (ebuf, sizeof ebuf, "%.*e", p - 1, f);
      if (p == 17 || g_ascii_strtod (ebuf, NULL) == f)
        break;
    }
  e = strchr (ebuf, 'e');
  exp10 = e ? atoi (e + 1) : 0;
  if (p == 15 && e != NULL)
    {
      /* strip trailing zeros of the mantissa: "1.00000000000000e-05" -> "1e-05" */
      char *m_end = (char *) e;
      char *q = m_end;
      while (q > ebuf && q[-1] == '0')
        q--;
      if (q > ebuf && q[-1] == '.')
        q--;
      p = 0;
      for (char *d = ebuf; d < q; d++)
        p += g_ascii_isdigit (*d);
      memmove (q, m_end, strlen (m_end) + 1);
    }
  if (exp10 >= -4 && exp10 < 16)
    {
      int decimals = p - 1 - exp10;
      if (decimals < 0)
        decimals = 0;
      g_snprintf (fbuf, sizeof fbuf, "%.*f", decimals, f);
      _cs_str_put (out, fbuf);
      if (decimals == 0)
        _cs_str_put (out, ".0");
    }
  else
    _cs_str_put (out, ebuf);
}

/**
 * cs_print_float:
 * @f: the number
 *
 * See cs_print_float_to().
 * Returns: (transfer full): Python's repr of @f, e.g. "1e-05", "4096.0", "float('inf')"
 */
char *
cs_print_float (double f)
{
  GString *s = g_string_new (NULL);

  cs_print_float_to (s, f);
  return g_string_free (s, FALSE);
}

/**
 * cs_print_py_string_to:
 * @out: string to append to
 * @s: UTF-8 text (the str's content)
 *
 * Appends repr(s) as Python prints it: single quotes unless @s contains a single quote and no
 * double quote; backslash escapes for the quote, `\\`, `\n`, `\r`, `\t` and other control
 * characters (`\xNN`).  Printable non-ASCII characters are kept.
 * Source: CPython unicode_repr.
 */
void
cs_print_py_string_to (GString *out, const char *s)
{
  char q = '\'';

  if (strchr (s, '\'') != NULL && strchr (s, '"') == NULL)
    q = '"';
  g_string_append_c (out, q);
  for (const unsigned char *c = (const unsigned char *) s; *c; c++)
    {
      if (*c == (unsigned char) q || *c == '\\')
        {
          g_string_append_c (out, '\\');
          g_string_append_c (out, (char) *c);
        }
      else if (*c == '\n')
        _cs_str_put (out, "\\n");
      else if (*c == '\r')
        _cs_str_put (out, "\\r");
      else if (*c == '\t')
        _cs_str_put (out, "\\t");
      else if (*c < 0x20 || *c == 0x7f)
        g_string_append_printf (out, "\\x%02x", *c);
      else
        g_string_append_c (out, (char) *c);
    }
  g_string_append_c (out, q);
}

/**
 * cs_print_type_to:
 * @out: string to append to
 * @proxy: a proxy
 *
 * Appends the proxy's type string (without quotes): type_raw when the parser kept one, else
 * the string Thunder's `type_string()` gives ("cuda:0 bf16[8, 16]", "int 3", "Collection").
 * Source: thunder/core/proxies.py.
 */
void
cs_print_type_to (GString *out, const CsProxy *proxy)
{
  cs_proxy_type_append (out, proxy);
}

/* ------------------------------------------------------------------------------------------ */
/* Values                                                                                      */

static void
append_int (GString *out, int64_t i)
{
  char buf[24];
  int n = 0;
  uint64_t u = i < 0 ? (uint64_t) 0 - (uint64_t) i : (uint64_t) i;

  do
    {
      buf[n++] = (char) ('0' + u % 10);
      u /= 10;
    }
  while (u != 0);
  if (i < 0)
    g_string_append_c (out, '-');
  while (n > 0)
    g_string_append_c (out, buf[--n]);
}

static void
print_dtype (GString *out, const CsDtypeRef *d)
{
  if (d->pytype != CS_PYTYPE_NONE)
    {
      _cs_str_put (out, cs_pytype_name ((CsPyType) d->pytype));
      return;
    }
  _cs_str_put (out, "dtypes.");
  _cs_str_put (out, cs_dtype_long_name (d->dtype));
  if (d->weak)
    g_string_append_c (out, '_');
}

static void
print_call_value (GString *out, const CsValue *v)
{
  /* Thunder prints slices without spaces (baseutils), dataclass instances with ","; other
   * calls (devices.Device("cuda:0"), torch.device(...)) have a single argument. */
  const char *sep = strcmp (v->u.call.callee, "slice") == 0 ? "," : ", ";

  _cs_str_put (out, v->u.call.callee);
  g_string_append_c (out, '(');
  for (guint i = 0; i < v->u.call.n_args; i++)
    {
      if (i)
        _cs_str_put (out, sep);
      if (v->u.call.args[i].name)
        {
          _cs_str_put (out, v->u.call.args[i].name);
          g_string_append_c (out, '=');
        }
      cs_print_value_to (out, v->u.call.args[i].value);
    }
  g_string_append_c (out, ')');
}

/**
 * cs_print_value_to:
 * @out: string to append to
 * @value: a value
 *
 * Appends @value as Thunder's prettyprint does: proxies by name, Python reprs for literals,
 * collections with Python's rendering (`(a,)`, `()`, `[1, 2]`, `{'k': v}`), `dtypes.float32`,
 * bare Python types, `...`.  Literals keep the spelling they were read with (value->raw).
 * Source: thunder/core/codeutils.py prettyprint, thunder/core/baseutils.py.
 */
void
cs_print_value_to (GString *out, const CsValue *v)
{
  if (v == NULL)
    {
      _cs_str_put (out, "None");
      return;
    }
  /* a non-finite float keeps its spelling only when it is Python's (float('inf')): a
   * torch.compile graph's `-inf` is not a Python expression */
  if (v->raw != NULL
      && !(v->kind == CS_VALUE_FLOAT && !isfinite (v->u.f) && strstr (v->raw, "float(") == NULL))
    {
      _cs_str_put (out, v->raw);
      return;
    }
  switch (v->kind)
    {
    case CS_VALUE_NONE:
      _cs_str_put (out, "None");
      break;
    case CS_VALUE_BOOL:
      _cs_str_put (out, v->u.b ? "True" : "False");
      break;
    case CS_VALUE_INT:
      append_int (out, v->u.i);
      break;
    case CS_VALUE_FLOAT:
      cs_print_float_to (out, v->u.f);
      break;
    case CS_VALUE_COMPLEX:
      _cs_str_put (out, "complex(");
      cs_print_float_to (out, v->u.c.re);
      _cs_str_put (out, ", ");
      cs_print_float_to (out, v->u.c.im);
      g_string_append_c (out, ')');
      break;
    case CS_VALUE_STRING:
      cs_print_py_string_to (out, v->u.s ? v->u.s : "");
      break;
    case CS_VALUE_PROXY:
      _cs_str_put (out, v->u.proxy->name);
      break;
    case CS_VALUE_UNDERSCORE:
      g_string_append_c (out, '_');
      break;
    case CS_VALUE_NAME:
      _cs_str_put (out, v->u.s);
      break;
    case CS_VALUE_DTYPE:
      print_dtype (out, &v->u.dtype);
      break;
    case CS_VALUE_ELLIPSIS:
      _cs_str_put (out, "...");
      break;
    case CS_VALUE_TUPLE:
      g_string_append_c (out, '(');
      for (guint i = 0; i < v->u.seq.n; i++)
        {
          if (i)
            _cs_str_put (out, ", ");
          cs_print_value_to (out, v->u.seq.items[i]);
        }
      if (v->u.seq.n == 1)
        g_string_append_c (out, ',');
      g_string_append_c (out, ')');
      break;
    case CS_VALUE_LIST:
      g_string_append_c (out, '[');
      for (guint i = 0; i < v->u.seq.n; i++)
        {
          if (i)
            _cs_str_put (out, ", ");
          cs_print_value_to (out, v->u.seq.items[i]);
        }
      g_string_append_c (out, ']');
      break;
    case CS_VALUE_DICT:
      g_string_append_c (out, '{');
      for (guint i = 0; i + 1 < v->u.seq.n; i += 2)
        {
          if (i)
            _cs_str_put (out, ", ");
          cs_print_value_to (out, v->u.seq.items[i]);
          _cs_str_put (out, ": ");
          cs_print_value_to (out, v->u.seq.items[i + 1]);
        }
      g_string_append_c (out, '}');
      break;
    case CS_VALUE_CALL:
      print_call_value (out, v);
      break;
    case CS_VALUE_SUBSCRIPT:
      if (v->u.seq.n >= 1)
        cs_print_value_to (out, v->u.seq.items[0]);
      g_string_append_c (out, '[');
      if (v->u.seq.n >= 2)
        cs_print_value_to (out, v->u.seq.items[1]);
      g_string_append_c (out, ']');
      break;
    case CS_VALUE_ATTR:
      if (v->u.seq.n >= 1)
        cs_print_value_to (out, v->u.seq.items[0]);
      g_string_append_c (out, '.');
      _cs_str_put (out, v->u.seq.attr ? v->u.seq.attr : "");
      break;
    default:
      _cs_str_put (out, "<?>");
      break;
    }
}

/* A target tree: proxies by name, literals and dropped outputs as `_`. */
static void
print_target (GString *out, const CsValue *v)
{
  switch (v->kind)
    {
    case CS_VALUE_PROXY:
      _cs_str_put (out, v->u.proxy->name);
      break;
    case CS_VALUE_TUPLE:
    case CS_VALUE_LIST:
      g_string_append_c (out, v->kind == CS_VALUE_TUPLE ? '(' : '[');
      for (guint i = 0; i < v->u.seq.n; i++)
        {
          if (i)
            _cs_str_put (out, ", ");
          print_target (out, v->u.seq.items[i]);
        }
      if (v->kind == CS_VALUE_TUPLE && v->u.seq.n == 1)
        g_string_append_c (out, ',');
      g_string_append_c (out, v->kind == CS_VALUE_TUPLE ? ')' : ']');
      break;
    case CS_VALUE_NAME:
      _cs_str_put (out, v->u.s);
      break;
    default:
      g_string_append_c (out, '_');
      break;
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Statements                                                                                  */

static void
begin_line (GString *out, guint indent, gboolean commented)
{
  for (guint i = 0; i < indent; i++)
    g_string_append_c (out, ' ');
  if (commented)
    _cs_str_put (out, "# ");
}

static void
print_call (GString *out, const CsStmt *s)
{
  CsProxy *single = NULL;
  gboolean typecomment;

  gboolean fusion = cs_op_is_fusion (s->op);

  if (fusion && s->line == 0 && s->out != NULL && s->out->kind == CS_VALUE_PROXY)
    {
      /* made by a pass: Thunder prints fusion outputs as a list, even one: `[t6] = nvFusion1(...)` */
      g_string_append_c (out, '[');
      _cs_str_put (out, s->out->u.proxy->name);
      _cs_str_put (out, "] = ");
    }
  else if (s->out != NULL && !(s->out->kind == CS_VALUE_TUPLE && s->out->u.seq.n == 0))
    {
      print_target (out, s->out);
      _cs_str_put (out, " = ");
    }
  _cs_str_put (out, s->callee ? s->callee : s->op->name);
  g_string_append_c (out, '(');
  for (guint i = 0; i < s->n_args; i++)
    {
      if (i)
        _cs_str_put (out, ", ");
      if (s->args[i].name)
        {
          _cs_str_put (out, s->args[i].name);
          g_string_append_c (out, '=');
        }
      cs_print_value_to (out, s->args[i].value);
    }
  g_string_append_c (out, ')');

  if (s->out != NULL && s->out->kind == CS_VALUE_PROXY && !(fusion && s->line == 0))
    single = s->out->u.proxy;
  /* Parsed statements keep their style; statements made by passes (line 0) get Thunder's:
   * a type comment exactly when the output is a single proxy. */
  typecomment = s->line == 0 ? single != NULL : s->type_comment != CS_TYPECOMMENT_NONE;
  if (typecomment && single != NULL)
    {
      _cs_str_put (out, "  # ");
      _cs_str_put (out, single->name);
      if (s->type_comment == CS_TYPECOMMENT_NAME && s->line != 0)
        return;
      if (s->type_comment_raw != NULL)
        {
          _cs_str_put (out, ": \"");
          _cs_str_put (out, s->type_comment_raw);
          g_string_append_c (out, '"');
        }
      else if (single->typed)
        {
          _cs_str_put (out, ": \"");
          cs_print_type_to (out, single);
          g_string_append_c (out, '"');
        }
    }
}

/* prims.unpack_sequence's printer: parts "x, " then "= src", wrapped past 80 columns (or the
 * pre-2024 one-part-per-line form); every line gets the indent (and "# " when commented). */
static void
print_unpack (GString *out, const CsStmt *s, guint indent, gboolean commented)
{
  const char *src = s->source ? s->source->name : "?";
  guint pos = 0;
  GString *part;

  begin_line (out, indent, commented);
  if (s->n_targets == 0)
    {
      g_string_append_printf (out, "# %s (empty sequence)\n", src);
      return;
    }
  part = g_string_new (NULL);
  for (guint i = 0; i <= s->n_targets; i++)
    {
      g_string_truncate (part, 0);
      if (i < s->n_targets)
        {
          print_target (part, s->targets[i]);
          _cs_str_put (part, ", ");
        }
      else
        {
          _cs_str_put (part, "= ");
          _cs_str_put (part, src);
        }
      if (pos > 0 && (s->unpack_style == CS_UNPACK_ONE_PER_LINE
                      || pos + part->len > CS_PRINT_UNPACK_WRAP))
        {
          _cs_str_put (out, "\\\n");
          begin_line (out, indent, commented);
          pos = 0;
        }
      g_string_append_len (out, part->str, part->len);
      pos += part->len;
    }
  g_string_append_c (out, '\n');
  g_string_free (part, TRUE);
}

/* A comment statement: "# TEXT".  As a subsymbol the line's own "# " (from begin_line) is the
 * comment marker, so it is not repeated. */
static void
print_comment (GString *out, const CsStmt *s, gboolean commented)
{
  if (!commented)
    _cs_str_put (out, "# ");
  if (s->text != NULL)
    {
      _cs_str_put (out, s->text);
      return;
    }
  if (s->annotated != NULL)
    {
      _cs_str_put (out, s->annotated->name);
      if (s->annotated->typed)
        {
          _cs_str_put (out, ": \"");
          cs_print_type_to (out, s->annotated);
          g_string_append_c (out, '"');
        }
      return;
    }
  if (s->comment_kind == CS_COMMENT_DETAIL)
    _cs_str_put (out, "None");
  else if (s->comment_kind == CS_COMMENT_INPUT)
    _cs_str_put (out, "_ (unused)");
}

static void
print_stmt_line (GString *out, const CsStmt *s, guint indent, gboolean commented)
{
  switch (s->kind)
    {
    case CS_STMT_UNPACK:
      print_unpack (out, s, indent, commented);
      return;
    case CS_STMT_BLANK:
      if (s->text != NULL)
        _cs_str_put (out, s->text);
      g_string_append_c (out, '\n');
      return;
    default:
      break;
    }

  begin_line (out, indent, commented);
  switch (s->kind)
    {
    case CS_STMT_CALL:
      print_call (out, s);
      break;
    case CS_STMT_ANNASSIGN:
      {
        CsProxy *p = s->out && s->out->kind == CS_VALUE_PROXY ? s->out->u.proxy : NULL;
        _cs_str_put (out, p ? p->name : "_");
        _cs_str_put (out, ": \"");
        if (s->type_comment_raw)
          _cs_str_put (out, s->type_comment_raw);
        else if (p)
          cs_print_type_to (out, p);
        _cs_str_put (out, "\" = ");
        cs_print_value_to (out, s->value);
      }
      break;
    case CS_STMT_DEL:
      _cs_str_put (out, s->del_brackets ? "del [" : "del ");
      for (guint i = 0; i < s->n_names; i++)
        {
          if (i)
            _cs_str_put (out, ", ");
          _cs_str_put (out, s->names[i]->name);
        }
      if (s->del_brackets)
        g_string_append_c (out, ']');
      break;
    case CS_STMT_RETURN:
      _cs_str_put (out, "return");
      if (s->value != NULL)
        {
          g_string_append_c (out, ' ');
          if (s->return_bare && s->value->kind == CS_VALUE_TUPLE && s->value->raw == NULL)
            for (guint i = 0; i < s->value->u.seq.n; i++)
              {
                if (i)
                  _cs_str_put (out, ", ");
                cs_print_value_to (out, s->value->u.seq.items[i]);
              }
          else
            cs_print_value_to (out, s->value);
        }
      break;
    case CS_STMT_COMMENT:
      print_comment (out, s, commented);
      break;
    default:
      break;
    }
  g_string_append_c (out, '\n');
}

static void
print_stmt_rec (GString *out, const CsStmt *s, guint indent, gboolean commented,
                CsPrintFlags flags)
{
  print_stmt_line (out, s, indent, commented);
  if (flags & CS_PRINT_NO_SUBS)
    return;
  for (guint i = 0; i < s->n_subs; i++)
    print_stmt_rec (out, s->subs[i], indent + 2, TRUE, flags);
}

/**
 * cs_print_stmt_to:
 * @out: string to append to
 * @stmt: a statement
 * @indent: spaces before the statement (2 for a top-level statement of a trace body)
 * @flags: #CsPrintFlags (NO_SUBS: no decomposition comments)
 *
 * Appends the statement's line(s), each ending in "\n", followed by its subsymbols as
 * comments 2 spaces deeper (`    # t1 = prims.add(a, b)  # t1: "..."`), recursively.
 * Source: BoundSymbol.python / _get_lines (thunder/core/symbol.py).
 */
void
cs_print_stmt_to (GString *out, const CsStmt *stmt, guint indent, CsPrintFlags flags)
{
  g_return_if_fail (out != NULL && stmt != NULL);
  print_stmt_rec (out, stmt, indent, FALSE, flags);
}

/* ------------------------------------------------------------------------------------------ */
/* Traces                                                                                      */

static void
print_signature (GString *out, const CsTrace *t)
{
  if (!t->has_signature)
    {
      _cs_str_put (out, "# No signature available\n");
      return;
    }
  _cs_str_put (out, "def ");
  _cs_str_put (out, t->name ? t->name : "computation");
  g_string_append_c (out, '(');
  for (guint i = 0; i < t->n_params; i++)
    {
      const CsParam *p = &t->params[i];
      if (i)
        _cs_str_put (out, ", ");
      if (p->kind == CS_PARAM_STAR)
        g_string_append_c (out, '*');
      else if (p->kind == CS_PARAM_DSTAR)
        _cs_str_put (out, "**");
      if (p->name)
        _cs_str_put (out, p->name);
      if (p->dflt)
        {
          g_string_append_c (out, '=');
          cs_print_value_to (out, p->dflt);
        }
    }
  _cs_str_put (out, "):\n");
}

/**
 * cs_print_trace_to:
 * @out: string to append to
 * @trace: the trace
 * @flags: #CsPrintFlags
 *
 * Appends the whole trace: non-Thunder leading comments (unless NO_LEADING), the provenance
 * line `# Constructed by ...`, imports, the blank line, decorators, the signature and the
 * body (2-space indent, subsymbols as nested comments unless NO_SUBS).  The text ends with a
 * newline, as print(trace) gives.
 * Source: TraceCtx.python (thunder/core/trace.py).
 */
void
cs_print_trace_to (GString *out, const CsTrace *trace, CsPrintFlags flags)
{
  g_return_if_fail (out != NULL && trace != NULL);

  if (trace->aten != NULL)
    {
      /* a torch.compile graph as read prints in its own format */
      cs_print_aten_to (out, trace);
      return;
    }
  if (!(flags & CS_PRINT_NO_LEADING))
    for (guint i = 0; i < trace->n_leading; i++)
      {
        _cs_str_put (out, trace->leading[i]);
        g_string_append_c (out, '\n');
      }
  if (trace->provenance != NULL)
    {
      _cs_str_put (out, "# Constructed by ");
      _cs_str_put (out, trace->provenance);
      g_string_append_c (out, '\n');
    }
  for (guint i = 0; i < trace->n_imports; i++)
    {
      _cs_str_put (out, trace->imports[i]);
      g_string_append_c (out, '\n');
    }
  if (trace->blank_after_imports)
    g_string_append_c (out, '\n');
  for (guint i = 0; i < trace->n_decorators; i++)
    {
      _cs_str_put (out, trace->decorators[i]);
      g_string_append_c (out, '\n');
    }
  print_signature (out, trace);
  for (guint i = 0; i < trace->n_stmts; i++)
    print_stmt_rec (out, trace->stmts[i], 2, FALSE, flags);
}

/**
 * cs_print_trace:
 * @trace: the trace
 * @flags: #CsPrintFlags
 *
 * See cs_print_trace_to().
 * Returns: (transfer full): the printed trace
 */
char *
cs_print_trace (const CsTrace *trace, CsPrintFlags flags)
{
  GString *s;

  g_return_val_if_fail (trace != NULL, NULL);
  s = g_string_sized_new (4096);
  cs_print_trace_to (s, trace, flags);
  return g_string_free (s, FALSE);
}

/**
 * cs_print_trace_list:
 * @list: traces read from one file
 * @flags: #CsPrintFlags
 *
 * Prints every trace in its original arrangement: concatenated (each trace ends in a newline,
 * then the separator text as read, "\n" by default), or as the repr of a Python list
 * (reference 1.2m: leading `[`, every later line indented by one space, `,\n` between
 * traces, `]` and the trailer after the last one).  The first trace's leading comments come
 * before the `[`.
 * Returns: (transfer full): the text
 */
char *
cs_print_trace_list (const CsTraceList *list, CsPrintFlags flags)
{
  GString *out;

  g_return_val_if_fail (list != NULL, NULL);
  out = g_string_sized_new (8192);
  if (!list->is_list)
    {
      for (guint i = 0; i < list->traces->len; i++)
        {
          if (i > 0)
            {
              const char *sep = NULL;
              if (list->separators && i - 1 < list->separators->len)
                sep = g_ptr_array_index (list->separators, i - 1);
              _cs_str_put (out, sep ? sep : "\n");
            }
          cs_print_trace_to (out, g_ptr_array_index (list->traces, i), flags);
        }
      if (list->trailer)
        _cs_str_put (out, list->trailer);
      return g_string_free (out, FALSE);
    }

  {
    GString *inner = g_string_sized_new (8192);
    const CsTrace *first = list->traces->len ? g_ptr_array_index (list->traces, 0) : NULL;

    if (first && !(flags & CS_PRINT_NO_LEADING))
      for (guint i = 0; i < first->n_leading; i++)
        {
          _cs_str_put (out, first->leading[i]);
          g_string_append_c (out, '\n');
        }
    for (guint i = 0; i < list->traces->len; i++)
      {
        if (i > 0)
          {
            const char *sep = NULL;
            if (list->separators && i - 1 < list->separators->len)
              sep = g_ptr_array_index (list->separators, i - 1);
            _cs_str_put (inner, sep ? sep : ",\n");
          }
        cs_print_trace_to (inner, g_ptr_array_index (list->traces, i),
                           i == 0 ? (flags | CS_PRINT_NO_LEADING) : flags);
        if (inner->len > 0 && inner->str[inner->len - 1] == '\n')
          g_string_truncate (inner, inner->len - 1);
      }
    g_string_append_c (out, '[');
    for (gsize k = 0; k < inner->len; k++)
      {
        g_string_append_c (out, inner->str[k]);
        if (inner->str[k] == '\n')
          g_string_append_c (out, ' ');
      }
    _cs_str_put (out, list->trailer ? list->trailer : "]\n");
    g_string_free (inner, TRUE);
  }
  return g_string_free (out, FALSE);
}
