/* cs-print-aten.c: a torch.compile graph as read, printed back in its own format (cs-aten.h).
 *
 * Follows torch/fx/graph.py CodeGen._gen_python_code (verbose): `name: "annotation" = target(
 * args, k = v)`, operators and methods pretty-printed, `;  a = b = None` after the node where
 * a value is used for the last time, then GraphModule.print_readable's indentation and
 * torch/_dynamo/utils.py _format_graph_code's frame.
 */
#include "cs-config.h"

#include "cs-aten.h"

#include "cs-print.h"

#include <string.h>

typedef struct
{
  const CsTrace *trace;   /* the trace printed */
  const CsAtenInfo *info; /* the graph's node names and collections */
} Pr;

/* The name the body uses for @px (Dynamo's renamed placeholders differ from the proxy's). */
static const char *
node_name (const Pr *pr, const CsProxy *px)
{
  const char *n = g_hash_table_lookup (pr->info->node_names, px->name);
  return n ? n : px->name;
}

static void
print_dims (GString *out, const int64_t *v, guint n)
{
  g_string_append_c (out, '[');
  for (guint i = 0; i < n; i++)
    g_string_append_printf (out, "%s%" G_GINT64_FORMAT, i ? ", " : "", v[i]);
  g_string_append_c (out, ']');
}

/* The annotation of @px without quotes: "bf16[8, 16][16, 1]cuda:0". */
static gboolean
print_annotation (GString *out, const Pr *pr, const CsProxy *px)
{
  const char *raw = g_hash_table_lookup (pr->info->raw_types, px->name);
  guint srank = 0;
  const int64_t *st;

  if (raw != NULL)
    {
      g_string_append (out, raw);
      return TRUE;
    }
  if (px->kind != CS_PROXY_TENSOR || !px->typed)
    return FALSE;
  g_string_append (out, cs_aten_dtype_abbr (px->dtype));
  print_dims (out, px->shape, px->rank);
  st = cs_aten_info_get_strides (pr->info, px->name, &srank);
  if (st != NULL && srank == px->rank)
    print_dims (out, st, srank);
  else if (pr->info->show_stride)
    {
      /* a node made after parsing: row-major strides */
      int64_t s[CS_MAX_DIMS], acc = 1;
      for (guint i = px->rank; i-- > 0;)
        {
          s[i] = acc;
          acc *= MAX (px->shape[i], 1);
        }
      print_dims (out, s, px->rank);
    }
  if (pr->info->show_device)
    {
      g_autofree char *d = cs_device_to_string (&px->device);
      g_string_append (out, d);
    }
  return TRUE;
}

static void print_value (GString *out, const Pr *pr, const CsValue *v);

static void
print_seq (GString *out, const Pr *pr, const CsValue *v, char open, char close)
{
  g_string_append_c (out, open);
  for (guint i = 0; i < v->u.seq.n; i++)
    {
      if (i)
        g_string_append (out, ", ");
      print_value (out, pr, v->u.seq.items[i]);
    }
  if (v->kind == CS_VALUE_TUPLE && v->u.seq.n == 1)
    g_string_append_c (out, ',');
  g_string_append_c (out, close);
}

/* Values as torch.fx _get_repr writes them. */
static void
print_value (GString *out, const Pr *pr, const CsValue *v)
{
  switch (v->kind)
    {
    case CS_VALUE_PROXY:
      g_string_append (out, node_name (pr, v->u.proxy));
      return;
    case CS_VALUE_TUPLE:
      print_seq (out, pr, v, '(', ')');
      return;
    case CS_VALUE_LIST:
      print_seq (out, pr, v, '[', ']');
      return;
    case CS_VALUE_CALL:
      g_string_append (out, v->u.call.callee);
      g_string_append_c (out, '(');
      for (guint i = 0; i < v->u.call.n_args; i++)
        {
          if (i)
            g_string_append (out, ", ");
          if (v->u.call.args[i].name)
            g_string_append_printf (out, "%s=", v->u.call.args[i].name);
          print_value (out, pr, v->u.call.args[i].value);
        }
      g_string_append_c (out, ')');
      return;
    case CS_VALUE_DTYPE:
      if (v->raw)
        g_string_append (out, v->raw);
      else
        g_string_append_printf (out, "torch.%s", cs_dtype_long_name (v->u.dtype.dtype));
      return;
    case CS_VALUE_FLOAT:
      /* torch.fx prints non-finite floats as inf, -inf and nan */
      if (v->raw)
        g_string_append (out, v->raw);
      else
        cs_print_value_to (out, v);
      return;
    case CS_VALUE_ELLIPSIS:
      g_string_append (out, "...");
      return;
    case CS_VALUE_UNDERSCORE:
      g_string_append (out, "_");
      return;
    default:
      /* None, bools, numbers, strings, names: Python's repr, as Thunder prints them */
      cs_print_value_to (out, v);
      return;
    }
}

static const struct
{
  const char *callee; /* a binary call printed infix: "operator.<name>" */
  const char *op;     /* the operator printed between its two arguments */
} binops[] = {
  { "operator.add", "+" }, { "operator.sub", "-" }, { "operator.mul", "*" },
  { "operator.truediv", "/" }, { "operator.floordiv", "//" }, { "operator.matmul", "@" },
  { "operator.pow", "**" }, { "operator.mod", "%" }, { "operator.eq", "==" },
  { "operator.ne", "!=" }, { "operator.lt", "<" }, { "operator.le", "<=" },
  { "operator.gt", ">" }, { "operator.ge", ">=" }, { "operator.and_", "&" },
  { "operator.or_", "|" }, { "operator.xor", "^" }, { "operator.lshift", "<<" },
  { "operator.rshift", ">>" },
};

/* The right-hand side of a call statement. */
static void
print_rhs (GString *out, const Pr *pr, const CsStmt *s)
{
  const char *c = s->callee;
  guint first = 0;

  for (gsize i = 0; i < G_N_ELEMENTS (binops); i++)
    if (strcmp (c, binops[i].callee) == 0 && s->n_args == 2)
      {
        print_value (out, pr, s->args[0].value);
        g_string_append_printf (out, " %s ", binops[i].op);
        print_value (out, pr, s->args[1].value);
        return;
      }
  if ((strcmp (c, "operator.neg") == 0 || strcmp (c, "operator.invert") == 0) && s->n_args == 1)
    {
      g_string_append_c (out, c[9] == 'n' ? '-' : '~');
      print_value (out, pr, s->args[0].value);
      return;
    }
  if (strcmp (c, "operator.getitem") == 0 && s->n_args == 2)
    {
      print_value (out, pr, s->args[0].value);
      g_string_append_c (out, '[');
      print_value (out, pr, s->args[1].value);
      g_string_append_c (out, ']');
      return;
    }
  if (g_str_has_prefix (c, "Tensor.") && s->n_args >= 1)
    {
      print_value (out, pr, s->args[0].value);
      g_string_append_printf (out, ".%s", c + 7);
      first = 1;
    }
  else
    g_string_append (out, c);
  g_string_append_c (out, '(');
  for (guint i = first; i < s->n_args; i++)
    {
      if (i > first)
        g_string_append (out, ", ");
      if (s->args[i].name)
        g_string_append_printf (out, "%s = ", s->args[i].name);
      print_value (out, pr, s->args[i].value);
    }
  g_string_append_c (out, ')');
}

/* ------------------------------------------------------------------------------------------ */
/* Freed values: FX's last-use rule over the graph's nodes                                     */

typedef struct
{
  const char *name;        /* node name */
  GPtrArray  *inputs;      /* const char*: input node names, first appearance order, no repeats */
  gboolean    placeholder; /* a graph input */
  gboolean    output;      /* the output node (the return) */
  gboolean    has_users;   /* a later node reads it */
  GPtrArray  *frees;       /* const char*: what this node frees, in FX's order */
} Node;

static void
node_free (gpointer p)
{
  Node *n = p;
  g_ptr_array_unref (n->inputs);
  g_ptr_array_unref (n->frees);
  g_free (n);
}

static Node *
node_new (GPtrArray *nodes, GHashTable *by_name, const char *name)
{
  Node *n = g_new0 (Node, 1);

  n->name = name;
  n->inputs = g_ptr_array_new ();
  n->frees = g_ptr_array_new ();
  g_ptr_array_add (nodes, n);
  if (name)
    g_hash_table_insert (by_name, (gpointer) name, n);
  return n;
}

static void
add_inputs (const Pr *pr, Node *n, const CsValue *v)
{
  if (v == NULL)
    return;
  switch (v->kind)
    {
    case CS_VALUE_PROXY:
      {
        const char *nm = node_name (pr, v->u.proxy);
        for (guint i = 0; i < n->inputs->len; i++)
          if (strcmp (n->inputs->pdata[i], nm) == 0)
            return;
        g_ptr_array_add (n->inputs, (gpointer) nm);
        return;
      }
    case CS_VALUE_TUPLE:
    case CS_VALUE_LIST:
      for (guint i = 0; i < v->u.seq.n; i++)
        add_inputs (pr, n, v->u.seq.items[i]);
      return;
    case CS_VALUE_CALL:
      for (guint i = 0; i < v->u.call.n_args; i++)
        add_inputs (pr, n, v->u.call.args[i].value);
      return;
    default:
      return;
    }
}

/* One node per placeholder, call (a multi-output call: the tuple node and a node per read
 * output) and the return, in order. */
static GPtrArray *
build_nodes (const Pr *pr)
{
  GPtrArray *nodes = g_ptr_array_new_with_free_func (node_free);
  g_autoptr(GHashTable) by_name = g_hash_table_new (g_str_hash, g_str_equal);
  const CsTrace *t = pr->trace;

  for (guint i = 0; i < t->n_params; i++)
    {
      CsProxy *px = cs_trace_lookup_proxy (t, t->params[i].name);
      Node *n = node_new (nodes, by_name, px ? node_name (pr, px) : t->params[i].name);
      n->placeholder = TRUE;
    }
  for (guint i = 0; i < t->n_stmts; i++)
    {
      const CsStmt *s = t->stmts[i];
      const char *coll = g_hash_table_lookup (pr->info->collections, GUINT_TO_POINTER (s->id));

      if (s->kind == CS_STMT_RETURN)
        {
          Node *n = node_new (nodes, by_name, NULL);
          n->output = TRUE;
          add_inputs (pr, n, s->value);
          continue;
        }
      if (s->kind != CS_STMT_CALL)
        continue;
      {
        Node *n = node_new (nodes, by_name, coll ? coll : (s->out && s->out->kind == CS_VALUE_PROXY)
                                                  ? node_name (pr, s->out->u.proxy) : "?");
        for (guint k = 0; k < s->n_args; k++)
          add_inputs (pr, n, s->args[k].value);
        if (coll && s->out && s->out->kind == CS_VALUE_TUPLE)
          for (guint k = 0; k < s->out->u.seq.n; k++)
            if (s->out->u.seq.items[k]->kind == CS_VALUE_PROXY)
              {
                Node *g = node_new (nodes, by_name, node_name (pr, s->out->u.seq.items[k]->u.proxy));
                g_ptr_array_add (g->inputs, (gpointer) coll);
              }
      }
    }
  /* last uses, from the end (torch/fx/graph.py register_last_uses) */
  {
    g_autoptr(GHashTable) seen = g_hash_table_new (g_str_hash, g_str_equal);

    for (guint i = nodes->len; i-- > 0;)
      {
        Node *n = nodes->pdata[i];
        for (guint k = 0; k < n->inputs->len; k++)
          {
            Node *in = g_hash_table_lookup (by_name, n->inputs->pdata[k]);
            if (in)
              in->has_users = TRUE;
            if (!g_hash_table_contains (seen, n->inputs->pdata[k]))
              {
                g_hash_table_add (seen, n->inputs->pdata[k]);
                g_ptr_array_add (n->frees, n->inputs->pdata[k]);
              }
          }
      }
    for (guint i = 0; i < nodes->len; i++)
      {
        Node *n = nodes->pdata[i];
        if (!n->placeholder && !n->output && !n->has_users && n->name)
          g_ptr_array_add (n->frees, (gpointer) n->name);
      }
  }
  return nodes;
}

static void
print_frees (GString *out, const Node *n)
{
  if (n == NULL || n->frees->len == 0 || n->placeholder || n->output)
    return;
  g_string_append (out, ";  ");
  for (guint i = 0; i < n->frees->len; i++)
    g_string_append_printf (out, "%s = ", (const char *) n->frees->pdata[i]);
  g_string_append (out, "None");
}

/** cs_print_aten_to: see cs-aten.h. */
void
cs_print_aten_to (GString *out, const CsTrace *trace)
{
  Pr pr = { trace, trace ? trace->aten : NULL };
  g_autoptr(GPtrArray) nodes = NULL;
  const char *ind = "        ";
  guint ni;
  gboolean logged = FALSE;

  g_return_if_fail (out != NULL && trace != NULL && trace->aten != NULL);
  for (guint i = 0; i < pr.info->header->len; i++)
    {
      const char *h = pr.info->header->pdata[i];
      g_string_append_printf (out, "%s\n", h);
      logged = logged || g_str_has_prefix (h, "TRACED GRAPH");
    }
  g_string_append_printf (out, "%sclass %s(torch.nn.Module):\n", pr.info->class_prefix,
                          pr.info->class_name);
  g_string_append (out, "    def forward(self");
  if (pr.info->def_params)
    g_string_append_printf (out, ", %s", pr.info->def_params);
  else
    for (guint i = 0; i < trace->n_params; i++)
      {
        CsProxy *px = cs_trace_lookup_proxy (trace, trace->params[i].name);

        g_string_append_printf (out, ", %s", trace->params[i].name);
        if (px != NULL)
          {
            gsize at = out->len;
            g_string_append (out, ": \"");
            if (print_annotation (out, &pr, px))
              g_string_append_c (out, '"');
            else
              g_string_truncate (out, at);
          }
      }
  g_string_append (out, "):\n");
  if (pr.info->annotations_line)
    {
      g_string_append (out, ind);
      for (guint i = 0; i < trace->n_params; i++)
        {
          CsProxy *px = cs_trace_lookup_proxy (trace, trace->params[i].name);
          g_string_append_printf (out, "%s: \"", trace->params[i].name);
          if (px)
            print_annotation (out, &pr, px);
          g_string_append (out, "\"; ");
        }
      g_string_append (out, "\n    \n");
    }
  if (pr.info->flatten_line)
    g_string_append_printf (out, "%s%s\n", ind, pr.info->flatten_line);
  /* Dynamo's renamed placeholders */
  for (guint i = 0; i < trace->n_params; i++)
    {
      const char *nn = g_hash_table_lookup (pr.info->node_names, trace->params[i].name);
      if (nn != NULL)
        g_string_append_printf (out, "%s%s = %s\n", ind, nn, trace->params[i].name);
    }

  nodes = build_nodes (&pr);
  ni = trace->n_params;
  for (guint i = 0; i < trace->n_stmts; i++)
    {
      const CsStmt *s = trace->stmts[i];

      switch (s->kind)
        {
        case CS_STMT_BLANK:
          g_string_append_printf (out, "%s\n", ind);
          break;
        case CS_STMT_COMMENT:
          g_string_append_printf (out, "%s# %s\n", ind, s->text ? s->text : "");
          break;
        case CS_STMT_RETURN:
          g_string_append_printf (out, "%sreturn", ind);
          if (s->value)
            {
              g_string_append_c (out, ' ');
              if (pr.info->return_unflatten)
                g_string_append (out, "pytree.tree_unflatten(");
              print_value (out, &pr, s->value);
              if (pr.info->return_unflatten)
                g_string_append (out, ", self._out_spec)");
            }
          g_string_append_c (out, '\n');
          ni++;
          break;
        case CS_STMT_CALL:
          {
            const char *coll = g_hash_table_lookup (pr.info->collections, GUINT_TO_POINTER (s->id));
            Node *n = ni < nodes->len ? nodes->pdata[ni++] : NULL;

            g_string_append (out, ind);
            if (coll)
              g_string_append (out, coll);
            else if (s->out && s->out->kind == CS_VALUE_PROXY)
              {
                const CsProxy *px = s->out->u.proxy;
                gsize at;

                g_string_append (out, node_name (&pr, px));
                at = out->len;
                g_string_append (out, ": \"");
                if (print_annotation (out, &pr, px))
                  g_string_append_c (out, '"');
                else
                  g_string_truncate (out, at);
              }
            else
              g_string_append (out, "_");
            g_string_append (out, " = ");
            print_rhs (out, &pr, s);
            print_frees (out, n);
            g_string_append_c (out, '\n');
            if (coll && s->out && s->out->kind == CS_VALUE_TUPLE)
              for (guint k = 0; k < s->out->u.seq.n; k++)
                if (s->out->u.seq.items[k]->kind == CS_VALUE_PROXY)
                  {
                    const CsProxy *px = s->out->u.seq.items[k]->u.proxy;
                    Node *g = ni < nodes->len ? nodes->pdata[ni++] : NULL;
                    gsize at;

                    g_string_append_printf (out, "%s%s", ind, node_name (&pr, px));
                    at = out->len;
                    g_string_append (out, ": \"");
                    if (print_annotation (out, &pr, px))
                      g_string_append_c (out, '"');
                    else
                      g_string_truncate (out, at);
                    g_string_append_printf (out, " = %s[%u]", coll, k);
                    print_frees (out, g);
                    g_string_append_c (out, '\n');
                  }
            break;
          }
        default:
          break;
        }
    }
  g_string_append_printf (out, "%s\n", ind);
  if (logged)
    g_string_append_c (out, '\n');
}
