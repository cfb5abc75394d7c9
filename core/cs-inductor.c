/* cs-inductor.c: Inductor's fusion plan from TORCH_LOGS=output_code (see cs-inductor.h).
 *
 * Source of the printed format: torch/_inductor/graph.py (GraphLowering.codegen, the
 * `# AOT ID:` header), torch/_inductor/codegen/common.py (get_kernel_metadata: the Source
 * Nodes, Source node to ATen node mapping and Graph fragment comments),
 * torch/_inductor/codegen/wrapper.py (the `call(self, args)` body), PyTorch 2.11.
 */
#include "cs-config.h"

#include "cs-inductor.h"
#include "cs-ir-util.h"
#include "cs-ops.h"
#include "cs-parse.h"

#include <glib/gstdio.h>
#include <string.h>

G_DEFINE_QUARK (cs-inductor-error-quark, cs_inductor_error)

/* ------------------------------------------------------------------------------------------ */
/* Objects                                                                                     */

static void
node_free (CsInductorNode *n)
{
  g_free (n->name);
  g_free (n->target);
  g_ptr_array_unref (n->refs);
  g_free (n);
}

static void
kernel_free (CsInductorKernel *k)
{
  g_free (k->name);
  g_ptr_array_unref (k->nodes);
  g_free (k);
}

static void
launch_free (CsInductorLaunch *l)
{
  g_free (l->callee);
  g_ptr_array_unref (l->args);
  g_ptr_array_unref (l->source_nodes);
  g_free (l);
}

static void
graph_free (CsInductorGraph *g)
{
  g_free (g->aot_id);
  g_ptr_array_unref (g->kernels);
  g_ptr_array_unref (g->launches);
  g_free (g);
}

CsInductorCode *
cs_inductor_code_ref (CsInductorCode *code)
{
  g_return_val_if_fail (code != NULL, NULL);
  g_atomic_int_inc (&code->ref_count);
  return code;
}

void
cs_inductor_code_unref (CsInductorCode *code)
{
  if (code == NULL || !g_atomic_int_dec_and_test (&code->ref_count))
    return;
  g_free (code->path);
  g_ptr_array_unref (code->graphs);
  g_free (code);
}

/* ------------------------------------------------------------------------------------------ */
/* Parsing                                                                                     */

typedef struct
{
  const char *name;     /* display name */
  guint       line;     /* current line, 1-based */
  guint       off;      /* bytes of log prefix removed from the current line */
  GError    **error;    /* (nullable) the caller's; set by pfail() */
} P;

static gboolean G_GNUC_PRINTF (4, 5)
pfail (P *p, guint line, guint col, const char *fmt, ...)
{
  va_list ap;
  g_autofree char *msg = NULL;

  va_start (ap, fmt);
  msg = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  g_set_error (p->error, CS_INDUCTOR_ERROR, CS_INDUCTOR_ERROR_SYNTAX, "%s:%u:%u: %s", p->name,
               line, col, msg);
  return FALSE;
}

static gboolean
is_ident_char (char c)
{
  return g_ascii_isalnum (c) || c == '_';
}

/* Length of the glog prefix of @s (`V1202 06:42:17.663000 1991 path.py:2552] `, then the
 * `[0/0] ` and `[__output_code] ` tags), 0 when @s has none. */
static gsize
log_prefix_len (const char *s, gsize n)
{
  gsize i = 0;

  if (n < 6 || strchr ("IWEDVC", s[0]) == NULL || !g_ascii_isdigit (s[1]))
    return 0;
  while (i < n && s[i] != ']' && s[i] != '\n')
    i++;
  if (i >= n || s[i] != ']' || memchr (s, ' ', i) == NULL)
    return 0;
  i++;
  for (guint tag = 0; tag < 2; tag++)
    {
      gsize j = i;
      while (j < n && s[j] == ' ')
        j++;
      if (j < n && s[j] == '[')
        {
          const char *close = memchr (s + j, ']', n - j);
          if (close == NULL)
            break;
          i = (gsize) (close - s) + 1;
        }
    }
  if (i < n && s[i] == ' ')
    i++;
  return i;
}

/* The identifier at @s (NULL-terminated), or NULL when @s does not start with one. */
static char *
ident_at (const char *s)
{
  gsize n = 0;
  while (is_ident_char (s[n]))
    n++;
  return n > 0 && !g_ascii_isdigit (s[0]) ? g_strndup (s, n) : NULL;
}

/* Splits the text between the parentheses that open at @open (the index of '(') into the
 * top-level comma-separated items; returns the index just past the matching ')', or 0 when
 * the line ends first.  Brackets and quoted strings nest. */
static gsize
split_args (const char *s, gsize open, GPtrArray *items)
{
  int depth = 0;
  gsize start = open + 1;
  char quote = 0;

  for (gsize i = open; s[i]; i++)
    {
      char c = s[i];
      if (quote)
        {
          if (c == '\\' && s[i + 1])
            i++;
          else if (c == quote)
            quote = 0;
          continue;
        }
      if (c == '\'' || c == '"')
        quote = c;
      else if (c == '(' || c == '[' || c == '{')
        depth++;
      else if (c == ')' || c == ']' || c == '}')
        {
          if (--depth == 0)
            {
              g_autofree char *last = g_strstrip (g_strndup (s + start, i - start));
              if (*last)
                g_ptr_array_add (items, g_steal_pointer (&last));
              return i + 1;
            }
        }
      else if (c == ',' && depth == 1)
        {
          g_ptr_array_add (items, g_strstrip (g_strndup (s + start, i - start)));
          start = i + 1;
        }
    }
  return 0;
}

/* The tensor a launch argument passes: the identifier itself, or X of
 * `reinterpret_tensor(X, ...)`; "" for keywords, numbers and other expressions. */
static char *
launch_arg_name (const char *a)
{
  static const char rt[] = "reinterpret_tensor(";

  if (strchr (a, '=') != NULL)
    return NULL;                 /* keyword: not positional */
  if (g_str_has_prefix (a, rt))
    a += sizeof rt - 1;
  {
    char *id = ident_at (a);
    if (id == NULL)
      return g_strdup ("");
    if (a[strlen (id)] != '\0' && a[strlen (id)] != ',' && a[strlen (id)] != ' ')
      {
        g_free (id);
        return g_strdup ("");
      }
    return id;
  }
}

static CsInductorGraph *
graph_new (const char *aot_id, guint line)
{
  CsInductorGraph *g = g_new0 (CsInductorGraph, 1);
  const char *us = strchr (aot_id, '_');

  g->aot_id = g_strdup (aot_id);
  g->graph_id = -1;
  g->role = CS_ATEN_GRAPH_OTHER;
  g->line = line;
  if (us != NULL)
    {
      if (us > aot_id && g_ascii_isdigit (aot_id[0]))
        g->graph_id = (int) g_ascii_strtoll (aot_id, NULL, 10);
      if (strcmp (us + 1, "forward") == 0)
        g->role = CS_ATEN_GRAPH_FORWARD;
      else if (strcmp (us + 1, "backward") == 0)
        g->role = CS_ATEN_GRAPH_BACKWARD;
      else if (strcmp (us + 1, "inference") == 0)
        g->role = CS_ATEN_GRAPH_INFERENCE;
    }
  g->kernels = g_ptr_array_new_with_free_func ((GDestroyNotify) kernel_free);
  g->launches = g_ptr_array_new_with_free_func ((GDestroyNotify) launch_free);
  return g;
}

/* One Graph fragment line (after "#   "): `%name : ... = PlaceHolder[target=x]` or
 * `%name : ... = call_function[target=T](args = (...), kwargs = {...})`. */
static gboolean
parse_fragment_line (P *p, const char *s, guint col0, GPtrArray *nodes)
{
  CsInductorNode *n;
  const char *eq, *cf;
  char *name = ident_at (s + 1);

  if (name == NULL)
    return pfail (p, p->line, col0 + 1, "expected a node name after '%%' in the Graph fragment");
  n = g_new0 (CsInductorNode, 1);
  n->name = name;
  n->refs = g_ptr_array_new_with_free_func (g_free);
  n->index = -1;
  n->line = p->line;
  n->col = col0 + 1;
  g_ptr_array_add (nodes, n);
  {
    const char *ty = strstr (s, " : Tensor \"");
    if (ty != NULL)
      {
        const char *d = ty + strlen (" : Tensor \"");
        const char *br = strchr (d, '[');
        if (br != NULL && cs_aten_dtype_from_abbr (d, (gsize) (br - d), &n->dtype))
          {
            const char *c = br + 1;
            n->typed = TRUE;
            while (*c && *c != ']' && n->rank < CS_MAX_DIMS)
              {
                char *end;
                while (*c == ' ' || *c == ',')
                  c++;
                if (*c == ']')
                  break;
                n->shape[n->rank++] = g_ascii_isdigit (*c) ? g_ascii_strtoll (c, &end, 10) : -1;
                if (g_ascii_isdigit (*c))
                  c = end;
                else
                  while (*c && *c != ',' && *c != ']')
                    c++;
              }
          }
      }
  }
  eq = strstr (s, "= PlaceHolder[");
  cf = strstr (s, "= call_function[target=");
  if (eq != NULL && (cf == NULL || eq < cf))
    return TRUE;
  if (cf == NULL)
    return pfail (p, p->line, col0, "Graph fragment node '%s' is neither a PlaceHolder nor a "
                  "call_function", name);
  {
    const char *t = cf + strlen ("= call_function[target=");
    const char *close = strchr (t, ']');
    const char *a;

    if (close == NULL)
      return pfail (p, p->line, col0 + (guint) (t - s), "unterminated call_function[target=");
    n->target = g_strndup (t, (gsize) (close - t));
    for (a = close; (a = strchr (a, '%')) != NULL; a++)
      {
        char *r = ident_at (a + 1);
        if (r != NULL)
          g_ptr_array_add (n->refs, r);
      }
    if (strcmp (n->target, "operator.getitem") == 0)
      {
        const char *c = strstr (close, "args = (%");
        if (c != NULL && (c = strchr (c, ',')) != NULL)
          n->index = g_ascii_strtoll (c + 1, NULL, 10);
      }
  }
  return TRUE;
}

/* A launch line inside call(): `K.run(...)`, `extern_kernels.X(...)`, or
 * `bufN = torch.ops.aten.X.default(...)`.  Returns TRUE and leaves *@out NULL for any other
 * line. */
static gboolean
parse_launch (P *p, CsInductorGraph *g, const char *s, guint col0, GPtrArray *pending_src,
              CsInductorLaunch **out)
{
  const char *c = s, *open;
  CsInductorLaunchKind kind;
  g_autofree char *callee = NULL;
  const CsInductorKernel *kernel = NULL;
  g_autoptr(GPtrArray) items = g_ptr_array_new_with_free_func (g_free);
  CsInductorLaunch *l;

  *out = NULL;
  if (g_str_has_prefix (c, "extern_kernels."))
    kind = CS_INDUCTOR_LAUNCH_EXTERN;
  else if (g_str_has_prefix (c, "buf") && strstr (c, " = torch.ops.") != NULL)
    {
      c = strstr (c, " = torch.ops.") + 3;
      kind = CS_INDUCTOR_LAUNCH_EXTERN;
    }
  else if (g_str_has_prefix (c, "triton_") && strstr (c, ".run(") != NULL)
    kind = CS_INDUCTOR_LAUNCH_TRITON;
  else
    return TRUE;
  open = strchr (c, '(');
  if (open == NULL)
    return TRUE;
  if (kind == CS_INDUCTOR_LAUNCH_TRITON)
    {
      callee = g_strndup (c, (gsize) (strstr (c, ".run(") - c));
      for (guint i = 0; i < g->kernels->len && kernel == NULL; i++)
        {
          const CsInductorKernel *k = g->kernels->pdata[i];
          if (strcmp (k->name, callee) == 0)
            kernel = k;
        }
      if (kernel == NULL)
        {
          g_set_error (p->error, CS_INDUCTOR_ERROR, CS_INDUCTOR_ERROR_NAME,
                       "%s:%u:%u: kernel '%s' is launched but module %s does not define it",
                       p->name, p->line, col0 + (guint) (c - s), callee, g->aot_id);
          return FALSE;
        }
    }
  else
    callee = g_strndup (c, (gsize) (open - c));
  if (split_args (s, (gsize) (open - s), items) == 0)
    return pfail (p, p->line, col0 + (guint) (open - s), "the arguments of %s do not close on "
                  "this line", callee);
  l = g_new0 (CsInductorLaunch, 1);
  l->kind = kind;
  l->callee = g_steal_pointer (&callee);
  l->kernel = kernel;
  l->args = g_ptr_array_new_with_free_func (g_free);
  for (guint i = 0; i < items->len; i++)
    {
      char *a = launch_arg_name (items->pdata[i]);
      if (a != NULL)
        g_ptr_array_add (l->args, a);
    }
  l->source_nodes = g_ptr_array_new_with_free_func (g_free);
  for (guint i = 0; i < pending_src->len; i++)
    g_ptr_array_add (l->source_nodes, g_strdup (pending_src->pdata[i]));
  l->line = p->line;
  l->col = col0 + (guint) (c - s);
  if (kind == CS_INDUCTOR_LAUNCH_TRITON)
    g->n_triton++;
  else
    g->n_extern++;
  *out = l;
  return TRUE;
}

/**
 * cs_inductor_parse_text: (see cs-inductor.h)
 */
CsInductorCode *
cs_inductor_parse_text (const char *text, gsize len, const char *name, GError **error)
{
  g_autoptr(CsInductorCode) code = g_new0 (CsInductorCode, 1);
  g_autoptr(GPtrArray) frag = NULL;             /* CsInductorNode*: the fragment being read */
  g_autoptr(GPtrArray) pending_src = g_ptr_array_new_with_free_func (g_free);
  CsInductorGraph *g = NULL;
  P p = { name ? name : "<output_code>", 0, 0, error };
  gboolean in_frag = FALSE, in_call = FALSE, in_string = FALSE;
  gboolean call_done = FALSE;
  guint string_line = 0, call_line = 0;
  gsize pos = 0;

  g_return_val_if_fail (text != NULL || len == 0, NULL);
  code->ref_count = 1;
  code->path = g_strdup (p.name);
  code->graphs = g_ptr_array_new_with_free_func ((GDestroyNotify) graph_free);

  while (pos < len)
    {
      const char *nl = memchr (text + pos, '\n', len - pos);
      gsize n = nl ? (gsize) (nl - (text + pos)) : len - pos;
      g_autofree char *line = NULL;
      const char *s;
      gsize pre, ind;
      guint col0;

      p.line++;
      pre = log_prefix_len (text + pos, n);
      line = g_strndup (text + pos + pre, n - pre);
      if (strlen (line) != n - pre)
        {
          pfail (&p, p.line, 1, "a NUL byte in the text");
          return NULL;
        }
      g_strchomp (line);
      pos += n + 1;
      for (ind = 0; line[ind] == ' '; ind++)
        ;
      s = line + ind;
      col0 = (guint) (pre + ind + 1);

      if (in_string)
        {
          if (strstr (s, "'''") != NULL)
            in_string = FALSE;
          continue;
        }
      if (g_str_has_prefix (s, "# AOT ID: ['"))
        {
          const char *id = s + strlen ("# AOT ID: ['");
          const char *q = strchr (id, '\'');
          g_autofree char *aot = NULL;

          if (g != NULL && !call_done)
            {
              pfail (&p, p.line, col0, "module %s ends before the return of its call", g->aot_id);
              return NULL;
            }
          if (q == NULL)
            {
              pfail (&p, p.line, col0, "unterminated AOT ID");
              return NULL;
            }
          aot = g_strndup (id, (gsize) (q - id));
          g = graph_new (aot, p.line);
          g_ptr_array_add (code->graphs, g);
          in_frag = in_call = call_done = FALSE;
          g_clear_pointer (&frag, g_ptr_array_unref);
          continue;
        }
      if (g == NULL)
        continue;
      if (!in_call)
        {
          if (g_str_has_prefix (s, "# kernel path:"))
            {
              g_clear_pointer (&frag, g_ptr_array_unref);
              frag = g_ptr_array_new_with_free_func ((GDestroyNotify) node_free);
              in_frag = FALSE;
            }
          else if (frag != NULL && strcmp (s, "# Graph fragment:") == 0)
            in_frag = TRUE;
          else if (in_frag && g_str_has_prefix (s, "#   %"))
            {
              if (!parse_fragment_line (&p, s + 4, col0 + 4, frag))
                return NULL;
            }
          else if (in_frag && g_str_has_prefix (s, "#   return"))
            in_frag = FALSE;
          else if (ind == 0 && strstr (s, " = async_compile.triton('") != NULL)
            {
              CsInductorKernel *k = g_new0 (CsInductorKernel, 1);
              k->name = g_strndup (s, (gsize) (strchr (s, ' ') - s));
              k->nodes = frag ? g_steal_pointer (&frag)
                              : g_ptr_array_new_with_free_func ((GDestroyNotify) node_free);
              k->line = p.line;
              k->col = col0;
              g_ptr_array_add (g->kernels, k);
              in_frag = FALSE;
              if (strstr (s, "'''") != NULL && strstr (strstr (s, "'''") + 3, "'''") == NULL)
                {
                  in_string = TRUE;
                  string_line = p.line;
                }
            }
          else if (strcmp (s, "def call(self, args):") == 0 && !call_done)
            {
              in_call = TRUE;
              call_line = p.line;
            }
          continue;
        }
      /* inside call(self, args) */
      if (ind <= 4 && *s != '\0')
        {
          pfail (&p, p.line, col0, "module %s: call ends before its return", g->aot_id);
          return NULL;
        }
      if (g_str_has_prefix (s, "# Topologically Sorted Source Nodes: ["))
        {
          const char *b = s + strlen ("# Topologically Sorted Source Nodes: [");
          const char *e = strchr (b, ']');
          g_auto(GStrv) names = NULL;
          g_autofree char *list = NULL;

          if (e == NULL)
            {
              pfail (&p, p.line, col0, "unterminated list of source nodes");
              return NULL;
            }
          g_ptr_array_set_size (pending_src, 0);
          list = g_strndup (b, (gsize) (e - b));
          names = g_strsplit (list, ", ", -1);
          for (guint i = 0; names[i]; i++)
            if (*names[i])
              g_ptr_array_add (pending_src, g_strdup (names[i]));
          continue;
        }
      if (ind == 8 && g_str_has_prefix (s, "return"))
        {
          in_call = FALSE;
          call_done = TRUE;
          continue;
        }
      {
        CsInductorLaunch *l = NULL;
        if (!parse_launch (&p, g, s, col0, pending_src, &l))
          return NULL;
        if (l != NULL)
          {
            g_ptr_array_add (g->launches, l);
            g_ptr_array_set_size (pending_src, 0);
          }
      }
    }
  if (in_string)
    {
      pfail (&p, p.line, 1, "the file ends inside the source string of the kernel defined at "
             "line %u", string_line);
      return NULL;
    }
  if (g != NULL && !call_done)
    {
      if (call_line != 0)
        pfail (&p, p.line, 1, "the file ends inside the call of module %s (line %u) before "
               "its return", g->aot_id, call_line);
      else
        pfail (&p, p.line, 1, "the file ends before the call of module %s", g->aot_id);
      return NULL;
    }
  if (code->graphs->len == 0)
    {
      g_set_error (error, CS_INDUCTOR_ERROR, CS_INDUCTOR_ERROR_EMPTY,
                   "%s: no module of Inductor's output code (no '# AOT ID:' line): expected "
                   "what TORCH_LOGS=output_code prints", p.name);
      return NULL;
    }
  return g_steal_pointer (&code);
}

/**
 * cs_inductor_parse_file: (see cs-inductor.h)
 */
CsInductorCode *
cs_inductor_parse_file (const char *path, GError **error)
{
  g_autofree char *text = NULL;
  gsize len = 0;
  GStatBuf st;
  GError *local = NULL;

  g_return_val_if_fail (path != NULL, NULL);
  if (g_stat (path, &st) == 0 && (guint64) st.st_size > CS_PARSE_MAX_FILE_BYTES)
    {
      g_set_error (error, CS_INDUCTOR_ERROR, CS_INDUCTOR_ERROR_IO,
                   "%s: %" G_GUINT64_FORMAT " bytes, over castscope's limit of %u", path,
                   (guint64) st.st_size, (guint) CS_PARSE_MAX_FILE_BYTES);
      return NULL;
    }
  if (!g_file_get_contents (path, &text, &len, &local))
    {
      g_set_error (error, CS_INDUCTOR_ERROR, CS_INDUCTOR_ERROR_IO, "%s", local->message);
      g_error_free (local);
      return NULL;
    }
  return cs_inductor_parse_text (text, len, path, error);
}

const CsInductorGraph *
cs_inductor_code_find_graph (const CsInductorCode *code, CsAtenRole role, int graph_id)
{
  g_return_val_if_fail (code != NULL, NULL);
  for (guint i = 0; i < code->graphs->len; i++)
    {
      const CsInductorGraph *g = code->graphs->pdata[i];
      if (g->role == role && (graph_id < 0 || g->graph_id < 0 || g->graph_id == graph_id))
        return g;
    }
  return NULL;
}

char *
cs_inductor_sibling_path (const char *aten_path)
{
  g_autofree char *dir = NULL;
  g_autofree char *base = NULL;
  g_autofree char *file = NULL;

  g_return_val_if_fail (aten_path != NULL, NULL);
  if (!g_str_has_suffix (aten_path, ".txt"))
    return NULL;
  dir = g_path_get_dirname (aten_path);
  base = g_path_get_basename (aten_path);
  base[strlen (base) - 4] = '\0';
  file = g_strconcat (base, ".output_code", NULL);
  return g_build_filename (dir, "inductor", file, NULL);
}

gboolean
cs_inductor_stmt_is_region (const CsStmt *stmt)
{
  g_return_val_if_fail (stmt != NULL, FALSE);
  return _cs_stmt_is_region (stmt) && stmt->callee != NULL
         && g_str_has_prefix (stmt->callee, "triton_");
}

/* ------------------------------------------------------------------------------------------ */
/* Regions over the graph                                                                      */

/* The op of a call_function target or a statement's callee, for matching: without
 * "torch.ops." and the overload, the view family as one ("aten.view": Inductor's post-grad
 * graph prints AOT's view as reshape or _unsafe_view). */
static char *
op_key (const char *target)
{
  const char *t = g_str_has_prefix (target, "torch.ops.") ? target + 10 : target;
  const char *dot = strchr (t, '.');
  const char *dot2 = dot ? strchr (dot + 1, '.') : NULL;
  char *k = dot2 ? g_strndup (t, (gsize) (dot2 - t)) : g_strdup (t);

  if (strcmp (k, "aten.reshape") == 0 || strcmp (k, "aten._unsafe_view") == 0)
    {
      g_free (k);
      k = g_strdup ("aten.view");
    }
  return k;
}

typedef struct
{
  CsTrace     *t;          /* the result (derived from the input) */
  const char  *path;       /* display name of the output code */
  GHashTable  *by_name;    /* node or input name -> CsStmt* (NULL value: a graph input) */
  GHashTable  *coll_of;    /* CsStmt* -> name of the tuple node it writes (multi-output) */
  GHashTable  *index;      /* CsStmt* -> its index in t->stmts, + 1 */
  GHashTable  *by_op;      /* op_key() of the callee -> GPtrArray of CsStmt*, graph order */
  guint       *owner;      /* per statement index: region number + 1, 0 = outside regions */
  GError     **error;      /* (nullable) the caller's; set by ffail() */
  GPtrArray   *recomp;     /* per region: GArray of the statement indices its fragment names
                              that an earlier region holds (Inductor recomputes or reads them) */
} F;

static gboolean G_GNUC_PRINTF (5, 6)
ffail (F *f, CsInductorError code, guint line, guint col, const char *fmt, ...)
{
  va_list ap;
  g_autofree char *msg = NULL;

  va_start (ap, fmt);
  msg = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  g_set_error (f->error, CS_INDUCTOR_ERROR, code, "%s:%u:%u: %s", f->path, line, col, msg);
  return FALSE;
}

static gboolean
f_has_name (F *f, const char *name)
{
  return g_hash_table_contains (f->by_name, name);
}

static CsStmt *
f_stmt (F *f, const char *name)
{
  return g_hash_table_lookup (f->by_name, name);
}

static guint
f_index (F *f, const CsStmt *s)
{
  return GPOINTER_TO_UINT (g_hash_table_lookup (f->index, s)) - 1;
}

/* The name the fragment's node @s stands for: its single output, or its tuple node. */
static const char *
f_value_name (F *f, const CsStmt *s)
{
  CsProxy *o = cs_stmt_get_output (s);
  if (o != NULL)
    return o->name;
  return g_hash_table_lookup (f->coll_of, s);
}

/* A name for @s in messages: its value name, else its first output, else its callee. */
static const char *
f_stmt_label (F *f, const CsStmt *s)
{
  const char *nm = f_value_name (f, s);
  g_autoptr(GPtrArray) outs = NULL;

  if (nm != NULL)
    return nm;
  outs = g_ptr_array_new ();
  if (s->kind == CS_STMT_CALL)
    cs_stmt_collect_outputs (s, outs);
  if (outs->len > 0)
    return ((CsProxy *) outs->pdata[0])->name;
  return s->callee ? s->callee : "?";
}

static void
f_index_trace (F *f)
{
  const CsTrace *t = f->t;
  g_autoptr(GPtrArray) ins = cs_trace_dup_inputs (t);

  for (guint i = 0; i < ins->len; i++)
    g_hash_table_insert (f->by_name, (gpointer) ((CsProxy *) ins->pdata[i])->name, NULL);
  const CsAtenInfo *info = NULL;

  /* the graph as read holds the names of multi-output nodes (CsAtenInfo.collections); a pass's
   * result does not carry the info, so look along the traces it derives from (statement ids are
   * kept) */
  for (const CsTrace *b = t; b != NULL && info == NULL; b = b->base)
    info = b->aten;
  for (guint i = 0; i < t->n_stmts; i++)
    {
      CsStmt *s = t->stmts[i];
      g_autoptr(GPtrArray) outs = g_ptr_array_new ();
      GPtrArray *list;

      g_hash_table_insert (f->index, s, GUINT_TO_POINTER (i + 1));
      if (s->kind != CS_STMT_CALL)
        continue;
      cs_stmt_collect_outputs (s, outs);
      for (guint k = 0; k < outs->len; k++)
        g_hash_table_insert (f->by_name, (gpointer) ((CsProxy *) outs->pdata[k])->name, s);
      if (info != NULL && info->collections != NULL)
        {
          const char *coll = g_hash_table_lookup (info->collections, GUINT_TO_POINTER (s->id));
          if (coll != NULL)
            {
              g_hash_table_insert (f->by_name, (gpointer) coll, s);
              g_hash_table_insert (f->coll_of, s, (gpointer) coll);
            }
        }
      if (s->callee == NULL)
        continue;
      {
        char *key = op_key (s->callee);
        list = g_hash_table_lookup (f->by_op, key);
        if (list == NULL)
          {
            list = g_ptr_array_new ();
            g_hash_table_insert (f->by_op, key, list);
          }
        else
          g_free (key);
      }
      g_ptr_array_add (list, s);
    }
}

/* Adds @s to region @r unless a region already holds it. */
static void
f_claim (F *f, CsStmt *s, guint r, GArray *members)
{
  guint i = f_index (f, s);
  if (f->owner[i] != 0)
    {
      GArray *rc = f->recomp->pdata[r];
      if (f->owner[i] != r + 1)
        {
          for (guint k = 0; k < rc->len; k++)
            if (g_array_index (rc, guint, k) == i)
              return;
          g_array_append_val (rc, i);
        }
      return;
    }
  f->owner[i] = r + 1;
  g_array_append_val (members, i);
}

/* The first launch of a kernel: the nodes its fragment names. */
static gboolean
f_map_first (F *f, const CsInductorLaunch *l, guint r, GArray *members, GString *unknown)
{
  const CsInductorKernel *k = l->kernel;
  const CsInductorNode *first_unknown = NULL;
  guint n_known = 0, n_calls = 0;

  for (guint i = 0; i < k->nodes->len; i++)
    {
      const CsInductorNode *n = k->nodes->pdata[i];
      CsStmt *s;

      if (n->target == NULL)
        continue;
      n_calls++;
      if (!f_has_name (f, n->name))
        {
          if (first_unknown == NULL)
            first_unknown = n;
          g_string_append_printf (unknown, "%s%s", unknown->len ? ", " : "", n->name);
          continue;
        }
      n_known++;
      {
        CsProxy *pr = cs_trace_lookup_proxy (f->t, n->name);
        gboolean same = !n->typed || pr == NULL || pr->kind != CS_PROXY_TENSOR
                        || (pr->dtype == n->dtype && pr->rank == n->rank);
        for (guint d = 0; same && n->typed && pr != NULL && pr->kind == CS_PROXY_TENSOR
                          && d < n->rank; d++)
          same = n->shape[d] < 0 || pr->shape[d] < 0 || n->shape[d] == pr->shape[d];
        if (!same)
          {
            g_autofree char *want = cs_proxy_type_string (pr);
            g_autoptr(GString) have = g_string_new (cs_aten_dtype_abbr (n->dtype));
            g_string_append_c (have, '[');
            for (guint d = 0; d < n->rank; d++)
              g_string_append_printf (have, "%s%" G_GINT64_FORMAT, d ? ", " : "", n->shape[d]);
            g_string_append_c (have, ']');
            return ffail (f, CS_INDUCTOR_ERROR_NAME, n->line, n->col,
                          "kernel '%s': node '%s' is %s in its Graph fragment but \"%s\" in "
                          "graph '%s': is this the output code of another graph?", k->name,
                          n->name, have->str, want, f->t->name ? f->t->name : "?");
          }
      }
      if ((s = f_stmt (f, n->name)) != NULL)
        f_claim (f, s, r, members);
    }
  if (n_calls == 0)
    return ffail (f, CS_INDUCTOR_ERROR_NAME, k->line, k->col,
                  "kernel '%s' has no Graph fragment: castscope cannot tell which nodes of "
                  "graph '%s' it computes", k->name, f->t->name ? f->t->name : "?");
  if (n_known == 0)
    return ffail (f, CS_INDUCTOR_ERROR_NAME, first_unknown->line, first_unknown->col,
                  "kernel '%s': node '%s' is not a node of graph '%s' (nor is any other node "
                  "of its Graph fragment): is this the output code of another graph?",
                  k->name, first_unknown->name, f->t->name ? f->t->name : "?");
  return TRUE;
}

/* TRUE when the type printed for fragment node @n fits @p: the same dtype and number of
 * elements (a pointwise kernel runs on the flat buffer, so Inductor launches one kernel for
 * tensors of different shapes and one numel). */
static gboolean
type_fits (const CsInductorNode *n, const CsProxy *p)
{
  int64_t a = 1, b = 1;

  if (!n->typed || p == NULL || p->kind != CS_PROXY_TENSOR)
    return TRUE;
  if (p->dtype != n->dtype)
    return FALSE;
  for (guint d = 0; d < n->rank; d++)
    {
      if (n->shape[d] < 0)
        return TRUE;
      a *= n->shape[d];
    }
  for (guint d = 0; d < p->rank; d++)
    {
      if (p->shape[d] < 0)
        return TRUE;
      b *= p->shape[d];
    }
  return a == b;
}

typedef struct
{
  F                       *f;       /* the output code being read (graph, indexes) */
  const CsInductorKernel  *k;       /* the kernel whose fragment is matched */
  GHashTable              *bound;   /* fragment name -> graph name */
  GPtrArray               *pick;    /* per fragment node: the CsStmt* matched, or NULL */
  gboolean                 any;     /* nodes a region holds already may match */
  guint                    steps;   /* search budget used */
} M;

static gboolean
m_is_frag_node (const CsInductorKernel *k, const char *name)
{
  for (guint q = 0; q < k->nodes->len; q++)
    {
      const CsInductorNode *m = k->nodes->pdata[q];
      if (m->target != NULL && strcmp (m->name, name) == 0)
        return TRUE;
    }
  return FALSE;
}

/* Matches fragment nodes j.. (backtracking); TRUE when all matched. */
static gboolean
m_match (M *m, guint j)
{
  F *f = m->f;
  const CsInductorNode *n;
  g_autofree char *key = NULL;
  GPtrArray *cands;
  g_autoptr(GPtrArray) reads = NULL;

  if (j == m->k->nodes->len)
    return TRUE;
  if (++m->steps > 100000)
    return FALSE;
  n = m->k->nodes->pdata[j];
  if (n->target == NULL)
    return m_match (m, j + 1);
  if (strcmp (n->target, "operator.getitem") == 0)
    {
      const char *tup = n->refs->len == 1 ? g_hash_table_lookup (m->bound, n->refs->pdata[0])
                                          : NULL;
      CsStmt *s = tup ? f_stmt (f, tup) : NULL;
      g_autoptr(GPtrArray) outs = g_ptr_array_new ();
      gboolean ok;

      if (s != NULL && n->index >= 0)
        cs_stmt_collect_outputs (s, outs);
      if (n->index < 0 || (guint64) n->index >= outs->len)
        return m_match (m, j + 1);        /* a post-grad tuple: no constraint */
      g_hash_table_insert (m->bound, n->name,
                           (gpointer) ((CsProxy *) outs->pdata[n->index])->name);
      ok = m_match (m, j + 1);
      if (!ok)
        g_hash_table_remove (m->bound, n->name);
      return ok;
    }
  key = op_key (n->target);
  cands = g_hash_table_lookup (f->by_op, key);
  if (cands == NULL)
    return m_match (m, j + 1);            /* an op of the post-grad graph only */
  reads = g_ptr_array_new ();
  for (guint c = 0; c < cands->len; c++)
    {
      CsStmt *s = cands->pdata[c];
      g_autoptr(GPtrArray) newly = g_ptr_array_new ();
      gboolean ok = TRUE;
      const char *vn;

      if (!m->any && f->owner[f_index (f, s)] != 0)
        continue;
      if (g_ptr_array_find (m->pick, s, NULL))
        continue;
      if (!type_fits (n, cs_stmt_get_output (s)))
        continue;
      g_ptr_array_set_size (reads, 0);
      _cs_stmt_reads (s, reads);
      if (reads->len != n->refs->len)
        continue;
      for (guint a = 0; a < reads->len && ok; a++)
        {
          const char *ref = n->refs->pdata[a];
          const char *want = g_hash_table_lookup (m->bound, ref);
          const char *have = ((CsProxy *) reads->pdata[a])->name;
          if (want != NULL)
            ok = strcmp (want, have) == 0;
          else if (m_is_frag_node (m->k, ref))
            ok = FALSE;                   /* a fragment node read before it is matched */
          else
            {
              g_hash_table_insert (m->bound, (gpointer) ref, (gpointer) have);
              g_ptr_array_add (newly, (gpointer) ref);
            }
        }
      vn = ok ? f_value_name (f, s) : NULL;
      if (ok)
        {
          if (vn != NULL)
            g_hash_table_insert (m->bound, n->name, (gpointer) vn);
          m->pick->pdata[j] = s;
          if (m_match (m, j + 1))
            return TRUE;
          m->pick->pdata[j] = NULL;
          g_hash_table_remove (m->bound, n->name);
        }
      for (guint a = 0; a < newly->len; a++)
        g_hash_table_remove (m->bound, newly->pdata[a]);
    }
  return FALSE;
}

/* A repeated launch of a kernel: its first launch's fragment instantiated on the graph (the
 * placeholders the first launch passes by name bound to this launch's arguments at the same
 * positions; every node matched by op, type and arguments; nodes no region holds first). */
static gboolean
f_map_repeat (F *f, const CsInductorLaunch *l, const CsInductorLaunch *first, guint r,
              GArray *members)
{
  const CsInductorKernel *k = l->kernel;
  g_autoptr(GHashTable) bound = g_hash_table_new (g_str_hash, g_str_equal);
  g_autoptr(GPtrArray) pick = g_ptr_array_new ();
  M m = { f, k, bound, pick, FALSE, 0 };
  guint n_mapped = 0;
  gboolean ok;

  for (guint i = 0; i < first->args->len && i < l->args->len; i++)
    {
      const char *fa = first->args->pdata[i], *ra = l->args->pdata[i];
      if (*fa == '\0' || *ra == '\0' || !f_has_name (f, ra))
        continue;
      for (guint j = 0; j < k->nodes->len; j++)
        {
          const CsInductorNode *n = k->nodes->pdata[j];
          if (n->target == NULL && strcmp (n->name, fa) == 0)
            g_hash_table_insert (bound, n->name, (gpointer) ra);
        }
    }
  g_ptr_array_set_size (pick, k->nodes->len);
  ok = m_match (&m, 0);
  if (!ok)
    {
      m.any = TRUE;
      m.steps = 0;
      ok = m_match (&m, 0);
    }
  for (guint j = 0; ok && j < pick->len; j++)
    if (pick->pdata[j] != NULL)
      {
        f_claim (f, pick->pdata[j], r, members);
        n_mapped++;
      }
  if (!ok || n_mapped == 0)
    return ffail (f, CS_INDUCTOR_ERROR_NAME, l->line, l->col,
                  "repeated launch of '%s': no nodes of graph '%s' match its Graph fragment "
                  "(line %u) with the arguments it passes", k->name,
                  f->t->name ? f->t->name : "?", k->line);
  return TRUE;
}

/* Statement-level dataflow of the trace: for each statement index, the indices of the
 * statements that read its outputs (succ) and of those that produced what it reads (pred). */
static void
f_dataflow (F *f, GPtrArray *succ, GPtrArray *pred)
{
  CsTrace *t = f->t;
  g_autoptr(GHashTable) producer = g_hash_table_new (NULL, NULL);
  g_autoptr(GPtrArray) tmp = g_ptr_array_new ();

  for (guint i = 0; i < t->n_stmts; i++)
    {
      g_ptr_array_add (succ, g_array_new (FALSE, FALSE, sizeof (guint)));
      g_ptr_array_add (pred, g_array_new (FALSE, FALSE, sizeof (guint)));
      g_ptr_array_set_size (tmp, 0);
      _cs_stmt_reads (t->stmts[i], tmp);
      for (guint k = 0; k < tmp->len; k++)
        {
          guint pi = GPOINTER_TO_UINT (g_hash_table_lookup (producer, tmp->pdata[k]));
          if (pi != 0)
            {
              pi--;
              g_array_append_val ((GArray *) succ->pdata[pi], i);
              g_array_append_val ((GArray *) pred->pdata[i], pi);
            }
        }
      g_ptr_array_set_size (tmp, 0);
      _cs_stmt_writes (t->stmts[i], tmp);
      for (guint k = 0; k < tmp->len; k++)
        g_hash_table_insert (producer, tmp->pdata[k], GUINT_TO_POINTER (i + 1));
    }
}

/* Marks in @mark (value @gen) the statements outside regions reachable from a region's
 * @members along @edges, through statements outside regions only. */
static void
f_reach (F *f, GArray *members, GPtrArray *edges, guint *mark, guint gen)
{
  g_autoptr(GArray) stack = g_array_new (FALSE, FALSE, sizeof (guint));

  for (guint i = 0; i < members->len; i++)
    g_array_append_val (stack, g_array_index (members, guint, i));
  while (stack->len > 0)
    {
      guint i = g_array_index (stack, guint, stack->len - 1);
      GArray *e = edges->pdata[i];
      g_array_set_size (stack, stack->len - 1);
      for (guint k = 0; k < e->len; k++)
        {
          guint j = g_array_index (e, guint, k);
          if (f->owner[j] != 0 || mark[j] == gen)
            continue;
          mark[j] = gen;
          g_array_append_val (stack, j);
        }
    }
}

/* Inductor's post-grad passes replace some AOT nodes with their own (prepare_softmax_online
 * for amax, sub, exp, sum): those nodes are in no fragment, yet they lie between nodes of one
 * kernel.  Each statement outside regions that is both reachable from region r and reaches
 * region r (through statements outside regions) is computed by that kernel: it joins r.  Its
 * name goes to @absorbed[r]. */
static void
f_absorb (F *f, GPtrArray *regions, GPtrArray *absorbed)
{
  CsTrace *t = f->t;
  g_autoptr(GPtrArray) succ = g_ptr_array_new_with_free_func ((GDestroyNotify) g_array_unref);
  g_autoptr(GPtrArray) pred = g_ptr_array_new_with_free_func ((GDestroyNotify) g_array_unref);
  g_autofree guint *down = g_new0 (guint, t->n_stmts + 1);
  g_autofree guint *up = g_new0 (guint, t->n_stmts + 1);
  guint gen = 0;

  f_dataflow (f, succ, pred);
  for (guint r = 0; r < regions->len; r++)
    {
      GArray *m = regions->pdata[r];
      GString *names = absorbed->pdata[r];

      gen++;
      f_reach (f, m, succ, down, gen);
      f_reach (f, m, pred, up, gen);
      for (guint i = 0; i < t->n_stmts; i++)
        if (f->owner[i] == 0 && down[i] == gen && up[i] == gen)
          {
            f->owner[i] = r + 1;
            g_array_append_val (m, i);
            g_string_append_printf (names, "%s%s", names->len ? ", " : "",
                                    f_stmt_label (f, t->stmts[i]));
          }
    }
}

static gint
cmp_guint (gconstpointer a, gconstpointer b)
{
  guint x = *(const guint *) a, y = *(const guint *) b;
  return x < y ? -1 : x > y;
}

/* A min-heap of item numbers keyed by their priority (graph index of their first statement). */
typedef struct
{
  GArray      *h;          /* guint item numbers */
  const guint *key;        /* item -> priority */
} Heap;

static void
heap_push (Heap *q, guint item)
{
  guint i = q->h->len;
  g_array_append_val (q->h, item);
  while (i > 0)
    {
      guint up = (i - 1) / 2;
      guint *a = (guint *) q->h->data;
      if (q->key[a[up]] <= q->key[a[i]])
        break;
      guint tmp = a[up];
      a[up] = a[i];
      a[i] = tmp;
      i = up;
    }
}

static guint
heap_pop (Heap *q)
{
  guint *a = (guint *) q->h->data;
  guint top = a[0], n = q->h->len - 1, i = 0;

  a[0] = a[n];
  g_array_set_size (q->h, n);
  a = (guint *) q->h->data;
  for (;;)
    {
      guint l = 2 * i + 1, r = l + 1, m = i;
      if (l < n && q->key[a[l]] < q->key[a[m]])
        m = l;
      if (r < n && q->key[a[r]] < q->key[a[m]])
        m = r;
      if (m == i)
        break;
      guint tmp = a[m];
      a[m] = a[i];
      a[i] = tmp;
      i = m;
    }
  return top;
}

/* The region statement of @members (graph indices, sorted). */
/* Copies of @stmt's prims, appended to @out, writing fresh proxies (@map: original -> copy,
 * shared by the statements of one region so that copies read copies). */
static void
f_copy_prims (F *f, CsStmt *stmt, CsProxyMap *map, CsStmtVec *out)
{
  CsTrace *t = f->t;
  g_auto(CsStmtVec) flat = CS_STMT_VEC_INIT;
  g_autoptr(GPtrArray) w = g_ptr_array_new ();

  _cs_stmt_flatten (t, stmt, &flat);
  for (guint i = 0; i < flat.len; i++)
    {
      CsStmt *s = flat.v[i], *c;
      CsArg *args;
      gboolean ok = s->kind == CS_STMT_CALL;

      g_ptr_array_set_size (w, 0);
      _cs_stmt_writes (s, w);
      for (guint k = 0; k < w->len && ok; k++)
        ok = ((CsProxy *) w->pdata[k])->kind == CS_PROXY_TENSOR;
      if (!ok)
        continue;                          /* only tensor-valued prims are copied */
      for (guint k = 0; k < w->len; k++)
        {
          CsProxy *p = w->pdata[k];
          _cs_proxy_map_insert (map, p, cs_trace_new_tensor (t, "t", p->dtype, p->shape, p->rank,
                                                             &p->device));
        }
      args = CS_ARENA_NEW_N (t->arena, CsArg, MAX (s->n_args, 1));
      for (guint k = 0; k < s->n_args; k++)
        {
          args[k].name = s->args[k].name;
          args[k].value = _cs_value_remap (t->arena, s->args[k].value, map);
        }
      c = cs_stmt_new_call_static (t, s->op, s->callee, _cs_value_remap (t->arena, s->out, map),
                                   args, s->n_args);
      c->type_comment = s->type_comment;
      c->backward = s->backward;
      c->origin = s->origin ? s->origin : s->id;
      c->line = s->line;
      c->col = s->col;
      _cs_stmt_vec_push (out, c);
    }
}

static CsStmt *
f_region (F *f, const CsInductorLaunch *l, GArray *members, GArray *copies, const char *unknown,
          const char *absorbed, GHashTable *escapes)
{
  CsTrace *t = f->t;
  g_auto(CsStmtVec) flat = CS_STMT_VEC_INIT;
  g_autoptr(GHashTable) inside = g_hash_table_new (NULL, NULL);
  g_autoptr(GHashTable) seen = g_hash_table_new (NULL, NULL);
  g_autoptr(GPtrArray) ins = g_ptr_array_new ();
  g_autoptr(GPtrArray) outs = g_ptr_array_new ();
  g_autoptr(GPtrArray) tmp = g_ptr_array_new ();
  CsStmt *first = t->stmts[g_array_index (members->len ? members : copies, guint, 0)];
  CsStmt *region;
  CsValue **items;
  CsArg *args;

  if (members->len == 0)
    {
      /* only nodes earlier regions hold (Inductor recomputes them, or the fragment names the
       * nodes whose output it reads through a post-grad node such as pad_mm's
       * constant_pad_nd): a region of copies, with no output */
      g_autoptr(CsProxyMap) map = _cs_proxy_map_new ();
      for (guint i = 0; i < copies->len; i++)
        f_copy_prims (f, t->stmts[g_array_index (copies, guint, i)], map, &flat);
    }
  for (guint i = 0; i < members->len; i++)
    {
      CsStmt *m = t->stmts[g_array_index (members, guint, i)];
      _cs_stmt_flatten (t, m, &flat);
      g_ptr_array_set_size (tmp, 0);
      _cs_stmt_writes (m, tmp);
      for (guint k = 0; k < tmp->len; k++)
        if (g_hash_table_contains (escapes, tmp->pdata[k]))
          g_ptr_array_add (outs, tmp->pdata[k]);
    }
  for (guint i = 0; i < flat.len; i++)
    {
      g_ptr_array_set_size (tmp, 0);
      _cs_stmt_reads (flat.v[i], tmp);
      for (guint k = 0; k < tmp->len; k++)
        {
          CsProxy *p = tmp->pdata[k];
          if (!g_hash_table_contains (inside, p) && !g_hash_table_contains (seen, p))
            {
              g_hash_table_add (seen, p);
              g_ptr_array_add (ins, p);
            }
        }
      g_ptr_array_set_size (tmp, 0);
      _cs_stmt_writes (flat.v[i], tmp);
      for (guint k = 0; k < tmp->len; k++)
        g_hash_table_add (inside, tmp->pdata[k]);
    }
  region = cs_stmt_new_call_static (t, cs_op_get (CS_OP_FUSION),
                                    cs_arena_strdup (t->arena, l->callee), NULL, NULL, 0);
  region->type_comment = CS_TYPECOMMENT_NONE;
  region->backward = first->backward;
  region->origin = first->origin ? first->origin : first->id;
  region->line = first->line;
  region->col = first->col;
  region->why = cs_arena_printf (t->arena, "Inductor kernel (%s:%u)%s%s%s%s%s", f->path,
                                 l->line, members->len ? "" : "; copies of earlier kernels' nodes",
                                 *unknown ? "; post-grad nodes not in the graph: " : "", unknown,
                                 *absorbed ? "; also the graph nodes between its nodes: " : "", absorbed);
  cs_stmt_set_subs (t, region, flat.v, flat.len);
  items = CS_ARENA_NEW_N (t->arena, CsValue *, MAX (outs->len, 1));
  for (guint i = 0; i < outs->len; i++)
    items[i] = cs_value_new_proxy (t->arena, outs->pdata[i]);
  args = CS_ARENA_NEW_N (t->arena, CsArg, MAX (ins->len, 1));
  for (guint i = 0; i < ins->len; i++)
    {
      args[i].name = NULL;
      args[i].value = cs_value_new_proxy (t->arena, ins->pdata[i]);
    }
  cs_stmt_set_call (t, region, args, ins->len,
                    cs_value_new_seq (t->arena, CS_VALUE_LIST, items, outs->len));
  return region;
}

static void
string_free_all (gpointer s)
{
  g_string_free (s, TRUE);
}

/**
 * cs_inductor_fuse_trace: (see cs-inductor.h)
 */
CsTrace *
cs_inductor_fuse_trace (const CsTrace *trace, const CsInductorGraph *graph, const char *path,
                        GError **error)
{
  g_autoptr(CsTrace) t = NULL;
  g_autoptr(GHashTable) by_name = g_hash_table_new (g_str_hash, g_str_equal);
  g_autoptr(GHashTable) coll_of = g_hash_table_new (NULL, NULL);
  g_autoptr(GHashTable) index = g_hash_table_new (NULL, NULL);
  g_autoptr(GHashTable) by_op = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
                                                       (GDestroyNotify) g_ptr_array_unref);
  g_autoptr(GHashTable) first_launch = g_hash_table_new (NULL, NULL);
  g_autoptr(GPtrArray) regions = g_ptr_array_new_with_free_func ((GDestroyNotify) g_array_unref);
  g_autoptr(GPtrArray) unknowns = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(GPtrArray) launches = g_ptr_array_new ();
  g_autoptr(GPtrArray) recomp = g_ptr_array_new_with_free_func ((GDestroyNotify) g_array_unref);
  g_autoptr(GPtrArray) absorbed = g_ptr_array_new_with_free_func (string_free_all);
  g_autoptr(GHashTable) producer = g_hash_table_new (NULL, NULL);
  g_autoptr(GHashTable) escapes = g_hash_table_new (NULL, NULL);
  g_autoptr(GPtrArray) tmp = g_ptr_array_new ();
  g_autofree guint *owner = NULL;
  g_autofree guint *item_of = NULL;
  g_autofree guint *key = NULL;
  g_autofree guint *n_deps = NULL;
  g_autofree guint *region_item = NULL;
  g_autoptr(GHashTable) producer_stmt = g_hash_table_new (NULL, NULL);
  g_autoptr(GPtrArray) users = NULL;  /* item -> GArray of dependent items */
  g_autoptr(GPtrArray) order = g_ptr_array_new ();
  g_autoptr(GArray) heap = g_array_new (FALSE, FALSE, sizeof (guint));
  Heap q;
  F f;
  guint n_items = 0, n_regions;

  g_return_val_if_fail (trace != NULL && graph != NULL, NULL);
  if (cs_trace_get_return (trace) == NULL)
    {
      g_set_error (error, CS_INDUCTOR_ERROR, CS_INDUCTOR_ERROR_GRAPH,
                   "%s: trace '%s' has no return statement; cannot fuse",
                   trace->file ? trace->file : "<trace>", trace->name ? trace->name : "?");
      return NULL;
    }
  t = cs_trace_derive_shared (trace, "fuse");
  owner = g_new0 (guint, t->n_stmts + 1);
  f = (F) { t, path ? path : "<output_code>", by_name, coll_of, index, by_op, owner, error,
            recomp };
  f_index_trace (&f);

  /* region membership, launch by launch: first launches take their fragment's nodes; repeated
   * launches, mapped after them, instantiate it */
  for (guint i = 0; i < graph->launches->len; i++)
    {
      const CsInductorLaunch *l = graph->launches->pdata[i];
      const CsInductorLaunch *first;
      GArray *members;
      GString *unknown;
      guint r = launches->len;
      gboolean ok;

      if (l->kind != CS_INDUCTOR_LAUNCH_TRITON)
        continue;
      first = g_hash_table_lookup (first_launch, l->kernel);
      if (first == NULL)
        g_hash_table_insert (first_launch, (gpointer) l->kernel, (gpointer) l);
      members = g_array_new (FALSE, FALSE, sizeof (guint));
      unknown = g_string_new (NULL);
      g_ptr_array_add (regions, members);
      g_ptr_array_add (recomp, g_array_new (FALSE, FALSE, sizeof (guint)));
      g_ptr_array_add (launches, (gpointer) l);
      ok = first == NULL ? f_map_first (&f, l, r, members, unknown)
                         : f_map_repeat (&f, l, first, r, members);
      g_ptr_array_add (unknowns, g_string_free (unknown, FALSE));
      if (!ok)
        return NULL;
    }
  n_regions = launches->len;
  for (guint r = 0; r < n_regions; r++)
    g_ptr_array_add (absorbed, g_string_new (NULL));
  f_absorb (&f, regions, absorbed);

  /* items: one per region (with members, or only nodes earlier regions hold: a region of
   * their copies), one per statement outside regions */
  item_of = g_new0 (guint, t->n_stmts + 1);
  key = g_new0 (guint, t->n_stmts + n_regions + 1);
  region_item = g_new0 (guint, n_regions + 1);
  for (guint r = 0; r < n_regions; r++)
    {
      GArray *m = regions->pdata[r];
      GArray *rc = recomp->pdata[r];
      region_item[r] = G_MAXUINT;
      g_array_sort (m, cmp_guint);
      g_array_sort (rc, cmp_guint);
      if (m->len == 0 && rc->len == 0)
        {
          const CsInductorLaunch *l = launches->pdata[r];
          g_set_error (error, CS_INDUCTOR_ERROR, CS_INDUCTOR_ERROR_NAME,
                       "%s:%u:%u: kernel '%s' computes no node of graph '%s'", f.path, l->line,
                       l->col, l->callee, t->name ? t->name : "?");
          return NULL;
        }
      region_item[r] = n_items;
      key[n_items++] = g_array_index (m->len ? m : rc, guint, 0);
    }
  for (guint i = 0; i < t->n_stmts; i++)
    {
      if (owner[i] != 0)
        item_of[i] = region_item[owner[i] - 1];
      else
        {
          item_of[i] = n_items;
          key[n_items++] = i;
        }
    }

  /* producers, and the values read outside the item that produces them */
  for (guint i = 0; i < t->n_stmts; i++)
    {
      g_ptr_array_set_size (tmp, 0);
      _cs_stmt_writes (t->stmts[i], tmp);
      for (guint k = 0; k < tmp->len; k++)
        {
          g_hash_table_insert (producer, tmp->pdata[k], GUINT_TO_POINTER (item_of[i] + 1));
          g_hash_table_insert (producer_stmt, tmp->pdata[k], GUINT_TO_POINTER (i + 1));
        }
    }
  n_deps = g_new0 (guint, n_items + 1);
  users = g_ptr_array_new_with_free_func ((GDestroyNotify) g_array_unref);
  for (guint it = 0; it < n_items; it++)
    g_ptr_array_add (users, g_array_new (FALSE, FALSE, sizeof (guint)));
  {
    g_autoptr(GHashTable) edge = g_hash_table_new (g_int64_hash, g_int64_equal);
    g_autoptr(GArray) keys = g_array_new (FALSE, FALSE, sizeof (gint64));
    for (guint i = 0; i < t->n_stmts; i++)
      {
        CsStmt *s = t->stmts[i];
        g_ptr_array_set_size (tmp, 0);
        _cs_stmt_reads (s, tmp);
        if (s->kind == CS_STMT_DEL)
          for (guint k = 0; k < s->n_names; k++)
            g_ptr_array_add (tmp, s->names[k]);
        for (guint k = 0; k < tmp->len; k++)
          {
            guint pi = GPOINTER_TO_UINT (g_hash_table_lookup (producer, tmp->pdata[k]));
            gint64 *e;
            if (pi == 0 || pi - 1 == item_of[i])
              continue;
            g_hash_table_add (escapes, tmp->pdata[k]);
            g_array_set_size (keys, keys->len + 1);
            e = &g_array_index (keys, gint64, keys->len - 1);
            *e = (gint64) (pi - 1) * (gint64) (n_items + 1) + item_of[i];
          }
      }
    /* a region of copies reads what its copied statements read from outside them */
    for (guint r = 0; r < n_regions; r++)
      {
        GArray *m = regions->pdata[r], *rc = recomp->pdata[r];
        if (m->len > 0)
          continue;
        for (guint c = 0; c < rc->len; c++)
          {
            g_ptr_array_set_size (tmp, 0);
            _cs_stmt_reads (t->stmts[g_array_index (rc, guint, c)], tmp);
            for (guint k = 0; k < tmp->len; k++)
              {
                guint ps = GPOINTER_TO_UINT (g_hash_table_lookup (producer_stmt, tmp->pdata[k]));
                guint pi = GPOINTER_TO_UINT (g_hash_table_lookup (producer, tmp->pdata[k]));
                gboolean internal = FALSE;
                gint64 *e;
                for (guint q2 = 0; q2 < rc->len && ps != 0; q2++)
                  internal |= g_array_index (rc, guint, q2) == ps - 1;
                if (pi == 0 || internal)
                  continue;
                g_hash_table_add (escapes, tmp->pdata[k]);
                g_array_set_size (keys, keys->len + 1);
                e = &g_array_index (keys, gint64, keys->len - 1);
                *e = (gint64) (pi - 1) * (gint64) (n_items + 1) + region_item[r];
              }
          }
      }
    for (guint k = 0; k < keys->len; k++)
      {
        gint64 *e = &g_array_index (keys, gint64, k);
        if (g_hash_table_contains (edge, e))
          continue;
        g_hash_table_add (edge, e);
        {
          guint from = (guint) (*e / (n_items + 1)), to = (guint) (*e % (n_items + 1));
          g_array_append_val ((GArray *) users->pdata[from], to);
          n_deps[to]++;
        }
      }

    /* Kahn's order, ties by graph position */
    q = (Heap) { heap, key };
    for (guint it = 0; it < n_items; it++)
      if (n_deps[it] == 0)
        heap_push (&q, it);
    {
      g_autofree CsStmt **item_stmt = g_new0 (CsStmt *, n_items + 1);
      g_autofree guint *item_region = g_new0 (guint, n_items + 1);

      for (guint r = 0; r < n_regions; r++)
        item_region[region_item[r]] = r + 1;
      for (guint i = 0; i < t->n_stmts; i++)
        if (owner[i] == 0)
          item_stmt[item_of[i]] = t->stmts[i];
      while (heap->len > 0)
        {
          guint it = heap_pop (&q);
          GArray *u = users->pdata[it];

          if (item_region[it] != 0)
            {
              guint r = item_region[it] - 1;
              g_ptr_array_add (order, f_region (&f, launches->pdata[r], regions->pdata[r],
                                                recomp->pdata[r], unknowns->pdata[r],
                                                ((GString *) absorbed->pdata[r])->str, escapes));
            }
          else
            g_ptr_array_add (order, item_stmt[it]);
          for (guint k = 0; k < u->len; k++)
            if (--n_deps[g_array_index (u, guint, k)] == 0)
              heap_push (&q, g_array_index (u, guint, k));
        }
    }
  }
  if (order->len != n_items)
    {
      g_set_error (error, CS_INDUCTOR_ERROR, CS_INDUCTOR_ERROR_GRAPH,
                   "%s: the kernels of module %s, as castscope maps them to graph '%s', depend "
                   "on each other in a cycle", f.path, graph->aot_id, t->name ? t->name : "?");
      return NULL;
    }
  cs_trace_set_stmts (t, (CsStmt **) order->pdata, order->len);
  return g_steal_pointer (&t);
}
