/* cs-validate.c: def-before-use and undefined-name checks of a parsed trace (cs-validate.h). */
#include "cs-config.h"

#include "cs-validate.h"

#include <string.h>

#include "cs-parse.h"

typedef struct
{
  const CsTrace *trace;     /* the trace checked */
  const char    *name;      /* input name for messages */
  const char    *text;      /* source text or NULL */
  gsize          len;       /* bytes of text */
  guint          n;         /* entries of the arrays below: proxy ids 0 .. n-1 */
  guint8        *top;       /* [id] 1 once a top-level statement (or a parameter) defined it */
  guint8        *sub;       /* [id] 1 once a subsymbol defined it (visible from then on, at
                               every level: the text defines it before the use) */
  guint32       *top_line;  /* [id] line of the top-level statement that defines it, 0 = none */
  guint32       *sub_line;  /* [id] line of the first subsymbol that defines it, 0 = none */
  const char    *unbound;   /* what a bare name nothing binds "is": "not defined", or for the
                               return statement (cs_validate_return) "returned but not defined" */
} Check;

/* Python's builtins that a trace may name as values (types as dtypes or arguments). */
static gboolean
is_builtin (const char *s)
{
  static const char * const names[] = {
    "bool", "int", "float", "complex", "str", "bytes", "slice", "tuple", "list", "dict", "set",
    "object", "type", "len", "range", "getattr", "isinstance", "Ellipsis", "NotImplemented",
  };

  for (gsize i = 0; i < G_N_ELEMENTS (names); i++)
    if (strcmp (s, names[i]) == 0)
      return TRUE;
  return FALSE;
}

static gboolean
is_ident_char (char c)
{
  return g_ascii_isalnum (c) || c == '_';
}

/* The byte offset of line @line (1-based) in the text, or -1. */
static gssize
line_offset (const Check *c, guint32 line)
{
  gsize off = 0;

  for (guint32 l = 1; l < line; l++)
    {
      const char *nl = memchr (c->text + off, '\n', c->len - off);
      if (nl == NULL)
        return -1;
      off = (gsize) (nl - c->text) + 1;
    }
  return (gssize) off;
}

/* Where @stmt uses @ident: the first whole-word occurrence after the statement's start (past
 * the callee's '(' for a call, past '=' for an unpack, past the keyword for return and del),
 * as *@line_out and *@col_out (1-based, bytes).  Falls back to the statement's position. */
static void
locate_use (const Check *c, const CsStmt *s, const char *ident, guint32 *line_out,
            guint32 *col_out)
{
  gssize start;
  gsize off, end, n = strlen (ident);
  char after;

  *line_out = s->line;
  *col_out = s->col ? s->col : 1;
  if (c->text == NULL || s->line == 0 || n == 0)
    return;
  start = line_offset (c, s->line);
  if (start < 0)
    return;
  off = (gsize) start + (s->col > 0 ? s->col - 1 : 0);
  after = s->kind == CS_STMT_CALL ? '(' : s->kind == CS_STMT_UNPACK || s->kind == CS_STMT_ANNASSIGN ? '=' : 0;
  if (s->kind == CS_STMT_RETURN || s->kind == CS_STMT_DEL)
    {
      /* past the keyword */
      while (off < c->len && is_ident_char (c->text[off]))
        off++;
    }
  else if (after != 0)
    {
      const char *p = memchr (c->text + off, after, c->len - off);
      if (p != NULL)
        off = (gsize) (p - c->text) + 1;
    }
  for (end = off; end + n <= c->len; end++)
    {
      if (memcmp (c->text + end, ident, n) != 0)
        continue;
      if (end > 0 && is_ident_char (c->text[end - 1]))
        continue;
      if (end + n < c->len && is_ident_char (c->text[end + n]))
        continue;
      {
        guint32 line = s->line;
        gsize bol = (gsize) start;
        for (gsize k = (gsize) start; k < end; k++)
          if (c->text[k] == '\n')
            {
              line++;
              bol = k + 1;
            }
        *line_out = line;
        *col_out = (guint32) (end - bol) + 1;
      }
      return;
    }
}

static void
mark_outputs (Check *c, const CsStmt *s, gboolean in_sub)
{
  g_autoptr(GPtrArray) outs = g_ptr_array_new ();

  cs_stmt_collect_outputs (s, outs);
  for (guint i = 0; i < outs->len; i++)
    {
      const CsProxy *p = outs->pdata[i];
      if (p->id >= c->n)
        continue;
      if (in_sub)
        c->sub[p->id] = 1;
      else
        c->top[p->id] = 1;
    }
}

/* Records for every proxy the first line that defines it, at top level and in a
 * decomposition (for the messages). */
static void
note_definitions (Check *c, CsStmt *const *stmts, guint n, gboolean in_sub)
{
  g_autoptr(GPtrArray) outs = g_ptr_array_new ();

  for (guint i = 0; i < n; i++)
    {
      const CsStmt *s = stmts[i];

      g_ptr_array_set_size (outs, 0);
      cs_stmt_collect_outputs (s, outs);
      for (guint k = 0; k < outs->len; k++)
        {
          const CsProxy *p = outs->pdata[k];
          guint32 *lines = in_sub ? c->sub_line : c->top_line;
          if (p->id < c->n && lines[p->id] == 0)
            lines[p->id] = s->line ? s->line : 1;
        }
      if (s->n_subs > 0)
        note_definitions (c, s->subs, s->n_subs, TRUE);
    }
}

static gboolean
fail_proxy (const Check *c, const CsStmt *s, const CsProxy *p, GError **error)
{
  guint32 line, col;
  guint32 top = p->id < c->n ? c->top_line[p->id] : 0;
  guint32 sub = p->id < c->n ? c->sub_line[p->id] : 0;
  guint32 def = top != 0 && (sub == 0 || top < sub) ? top : sub;

  locate_use (c, s, p->name, &line, &col);
  if (def != 0)
    g_set_error (error, CS_PARSE_ERROR, CS_PARSE_ERROR_NAME,
                 "%s:%u:%u: '%s' is used before it is defined (on line %u)", c->name, line, col,
                 p->name, def);
  else
    g_set_error (error, CS_PARSE_ERROR, CS_PARSE_ERROR_NAME,
                 "%s:%u:%u: '%s' is not defined before this statement", c->name, line, col,
                 p->name);
  return FALSE;
}

/* Every proxy and bare name @v reads (through tuples, lists, dicts, calls, subscripts,
 * attributes): defined, and names only when @names is set. */
static gboolean
check_value (const Check *c, const CsStmt *s, const CsValue *v, gboolean in_sub,
             gboolean names, GError **error)
{
  if (v == NULL)
    return TRUE;
  switch (v->kind)
    {
    case CS_VALUE_PROXY:
      {
        const CsProxy *p = v->u.proxy;
        if (p->id < c->n && !c->top[p->id] && !c->sub[p->id])
          return fail_proxy (c, s, p, error);
        return TRUE;
      }
    case CS_VALUE_NAME:
      {
        const char *id = v->u.s;
        guint32 line, col;
        if (!names || id == NULL || id[0] == '_' || strchr (id, '.') != NULL || is_builtin (id))
          return TRUE;
        locate_use (c, s, id, &line, &col);
        g_set_error (error, CS_PARSE_ERROR, CS_PARSE_ERROR_NAME,
                     "%s:%u:%u: '%s' is %s: not a parameter of %s() and not made by any "
                     "statement of the trace", c->name, line, col, id, c->unbound,
                     c->trace->name ? c->trace->name : "the trace");
        return FALSE;
      }
    case CS_VALUE_TUPLE:
    case CS_VALUE_LIST:
    case CS_VALUE_DICT:
    case CS_VALUE_SUBSCRIPT:
    case CS_VALUE_ATTR:
      for (guint i = 0; i < v->u.seq.n; i++)
        if (!check_value (c, s, v->u.seq.items[i], in_sub, names, error))
          return FALSE;
      return TRUE;
    case CS_VALUE_CALL:
      for (guint i = 0; i < v->u.call.n_args; i++)
        if (!check_value (c, s, v->u.call.args[i].value, in_sub, names, error))
          return FALSE;
      return TRUE;
    default:
      return TRUE;
    }
}

static gboolean
check_stmts (Check *c, CsStmt *const *stmts, guint n, gboolean in_sub, GError **error)
{
  for (guint i = 0; i < n; i++)
    {
      const CsStmt *s = stmts[i];

      switch (s->kind)
        {
        case CS_STMT_CALL:
          for (guint k = 0; k < s->n_args; k++)
            if (!check_value (c, s, s->args[k].value, in_sub, TRUE, error))
              return FALSE;
          break;
        case CS_STMT_UNPACK:
          if (s->source != NULL && s->source->id < c->n && !c->top[s->source->id]
              && !c->sub[s->source->id])
            return fail_proxy (c, s, s->source, error);
          break;
        case CS_STMT_ANNASSIGN:
          if (!check_value (c, s, s->value, in_sub, TRUE, error))
            return FALSE;
          break;
        case CS_STMT_RETURN:
          if (!check_value (c, s, s->value, in_sub, FALSE, error))
            return FALSE;
          break;
        case CS_STMT_DEL:
          for (guint k = 0; k < s->n_names; k++)
            {
              const CsProxy *p = s->names[k];
              if (p->id < c->n && !c->top[p->id] && !c->sub[p->id])
                return fail_proxy (c, s, p, error);
            }
          break;
        case CS_STMT_COMMENT:
          /* an input annotation defines its proxy (traces printed without a signature) */
          if (s->comment_kind == CS_COMMENT_INPUT && s->annotated != NULL
              && s->annotated->id < c->n)
            c->top[s->annotated->id] = 1;
          break;
        default:
          break;
        }
      /* the decomposition runs before the statement's targets exist */
      if (s->n_subs > 0 && !check_stmts (c, s->subs, s->n_subs, TRUE, error))
        return FALSE;
      mark_outputs (c, s, in_sub);
    }
  return TRUE;
}

gboolean
cs_validate_trace (const CsTrace *trace, const char *name, const char *text, gsize len,
                   GError **error)
{
  Check c = { 0 };
  g_autoptr(GPtrArray) inputs = NULL;
  gboolean ok;

  g_return_val_if_fail (trace != NULL, FALSE);
  c.trace = trace;
  c.name = name ? name : "<input>";
  c.unbound = "not defined";
  c.text = text;
  c.len = text ? len : 0;
  c.n = trace->next_proxy_id + 1;
  c.top = g_new0 (guint8, c.n);
  c.sub = g_new0 (guint8, c.n);
  c.top_line = g_new0 (guint32, c.n);
  c.sub_line = g_new0 (guint32, c.n);

  inputs = cs_trace_dup_inputs (trace);
  for (guint i = 0; i < inputs->len; i++)
    {
      const CsProxy *p = inputs->pdata[i];
      if (p->id < c.n)
        c.top[p->id] = 1;
    }
  note_definitions (&c, trace->stmts, trace->n_stmts, FALSE);
  ok = check_stmts (&c, trace->stmts, trace->n_stmts, FALSE, error);

  g_free (c.top);
  g_free (c.sub);
  g_free (c.top_line);
  g_free (c.sub_line);
  return ok;
}

gboolean
cs_validate_return (const CsTrace *trace, GError **error)
{
  /* no proxy arrays (n = 0): the proxies were checked when the trace was parsed, and no
   * text: the error points at the return statement */
  Check c = { 0 };
  const CsStmt *ret;

  g_return_val_if_fail (trace != NULL, FALSE);
  ret = cs_trace_get_return (trace);
  if (ret == NULL)
    return TRUE;
  c.trace = trace;
  c.name = trace->file ? trace->file : "<trace>";
  c.unbound = "returned but not defined";
  return check_value (&c, ret, ret->value, FALSE, TRUE, error);
}
