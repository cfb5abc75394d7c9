/* cs-cli-info.c: `castscope-cli info FILE [--json]`: what a trace file holds.
 *
 * Per trace: name, signature, provenance, statement counts (top level and with every
 * subsymbol level), ops by callee, tensor proxies by dtype, fusion regions (with their prims),
 * and casts (convert_element_type / to / type conversions, by target dtype, top level and
 * inside fusion regions; with --casts or --json every cast that runs, with its line).
 */
#include "cs-config.h"

#include <stdio.h>
#include <string.h>

#if CS_HAVE_JSON
#include <json-glib/json-glib.h>
#endif

#include "cs-cli.h"
#include "cs-ops.h"
#include "cs-parse.h"
#include "cs-print.h"

typedef struct
{
  guint       n_top;          /* top-level statements (blank lines and comments included) */
  guint       n_symbols;      /* top-level bound symbols (calls, unpacks, dels, returns, ...) */
  guint       n_all;          /* statements at every level, subsymbols included */
  guint       n_comments;     /* top-level comment lines */
  GHashTable *ops;            /* callee -> count, top level */
  GHashTable *ops_all;        /* callee -> count, every level */
  GHashTable *dtypes;         /* dtype short name -> tensor proxies */
  guint       n_tensors;      /* tensor proxies */
  GPtrArray  *regions;        /* CsStmt* fusion calls */
  guint       n_casts_top;    /* cast symbols at top level */
  guint       n_casts_fused;  /* cast prims inside fusion regions */
  guint       n_casts_all;    /* cast symbols at every level */
  GHashTable *cast_targets;   /* target dtype -> casts at every level */
  GPtrArray  *casts;          /* CastSite*: every cast that runs (top level or in a region) */
} TraceInfo;

typedef struct
{
  const CsStmt *stmt;         /* the cast statement */
  const CsStmt *region;       /* the fusion call holding it, or NULL at top level */
  const char   *from;         /* source dtype short name, "?" when unknown */
  const char   *to;           /* target dtype short name */
} CastSite;

static void
info_clear (TraceInfo *ti)
{
  g_hash_table_unref (ti->ops);
  g_hash_table_unref (ti->ops_all);
  g_hash_table_unref (ti->dtypes);
  g_hash_table_unref (ti->cast_targets);
  g_ptr_array_unref (ti->regions);
  g_ptr_array_unref (ti->casts);
}

static void
bump (GHashTable *h, const char *key)
{
  gpointer old = g_hash_table_lookup (h, key);
  g_hash_table_replace (h, g_strdup (key), GUINT_TO_POINTER (GPOINTER_TO_UINT (old) + 1));
}

/* The dtype a cast produces: the DTYPE argument, else the output tensor's dtype. */
static const char *
cast_target (const CsStmt *s)
{
  CsProxy *out = cs_stmt_get_output (s);

  for (guint i = 0; i < s->n_args; i++)
    if (s->args[i].value->kind == CS_VALUE_DTYPE)
      return cs_dtype_short_name (s->args[i].value->u.dtype.dtype);
  if (out && out->kind == CS_PROXY_TENSOR && out->typed)
    return cs_dtype_short_name (out->dtype);
  return "?";
}

static gboolean
is_cast (const CsStmt *s)
{
  return s->kind == CS_STMT_CALL && cs_op_semantic (s->op)->category == CS_OP_CAT_CAST;
}

/* The dtype a cast reads: its first tensor argument's. */
static const char *
cast_source (const CsStmt *s)
{
  for (guint i = 0; i < s->n_args; i++)
    if (s->args[i].value->kind == CS_VALUE_PROXY)
      {
        const CsProxy *p = s->args[i].value->u.proxy;
        if (p->kind == CS_PROXY_TENSOR && p->typed)
          return cs_dtype_short_name (p->dtype);
        return "?";
      }
  return "number";
}

static void
add_cast_site (TraceInfo *ti, const CsStmt *s, const CsStmt *region)
{
  CastSite *c = g_new0 (CastSite, 1);
  c->stmt = s;
  c->region = region;
  c->from = cast_source (s);
  c->to = cast_target (s);
  g_ptr_array_add (ti->casts, c);
}

/* @region: the fusion call whose prims these are (NULL elsewhere); @depth: 0 = top level */
static void
walk (TraceInfo *ti, CsStmt *const *stmts, guint n, const CsStmt *region, guint depth)
{
  for (guint i = 0; i < n; i++)
    {
      const CsStmt *s = stmts[i];
      ti->n_all++;
      if (s->kind == CS_STMT_CALL)
        bump (ti->ops_all, s->callee);
      if (is_cast (s))
        {
          ti->n_casts_all++;
          bump (ti->cast_targets, cast_target (s));
          if (region != NULL && depth == 1)
            ti->n_casts_fused++;
          if (depth == 0 || (region != NULL && depth == 1))
            add_cast_site (ti, s, depth == 0 ? NULL : region);
        }
      walk (ti, s->subs, s->n_subs,
            depth == 0 && s->kind == CS_STMT_CALL && cs_op_is_fusion (s->op) ? s : NULL, depth + 1);
    }
}

static void
info_collect (TraceInfo *ti, const CsTrace *t)
{
  GHashTableIter it;
  gpointer key, val;

  memset (ti, 0, sizeof *ti);
  ti->ops = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  ti->ops_all = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  ti->dtypes = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  ti->cast_targets = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  ti->regions = g_ptr_array_new ();
  ti->casts = g_ptr_array_new_with_free_func (g_free);
  ti->n_top = t->n_stmts;
  for (guint i = 0; i < t->n_stmts; i++)
    {
      const CsStmt *s = t->stmts[i];
      if (cs_stmt_is_symbol (s))
        ti->n_symbols++;
      if (s->kind == CS_STMT_COMMENT)
        ti->n_comments++;
      if (s->kind == CS_STMT_CALL)
        {
          bump (ti->ops, s->callee);
          if (cs_op_is_fusion (s->op))
            g_ptr_array_add (ti->regions, (gpointer) s);
        }
      if (is_cast (s))
        ti->n_casts_top++;
    }
  walk (ti, t->stmts, t->n_stmts, NULL, 0);
  g_autoptr(GHashTable) all_proxies = cs_trace_dup_proxies (t);
  g_hash_table_iter_init (&it, all_proxies);
  while (g_hash_table_iter_next (&it, &key, &val))
    {
      const CsProxy *p = val;
      if (p->kind == CS_PROXY_TENSOR && p->typed)
        {
          ti->n_tensors++;
          bump (ti->dtypes, cs_dtype_short_name (p->dtype));
        }
    }
}

static gint
cmp_count_desc (gconstpointer a, gconstpointer b, gpointer user_data)
{
  GHashTable *h = user_data;
  const char *ka = *(const char **) a, *kb = *(const char **) b;
  guint ca = GPOINTER_TO_UINT (g_hash_table_lookup (h, ka));
  guint cb = GPOINTER_TO_UINT (g_hash_table_lookup (h, kb));

  if (ca != cb)
    return ca > cb ? -1 : 1;
  return strcmp (ka, kb);
}

/* Keys of a counter, most frequent first (ties by name). */
static GPtrArray *
sorted_keys (GHashTable *h)
{
  GPtrArray *keys = g_ptr_array_new ();
  GHashTableIter it;
  gpointer key;

  g_hash_table_iter_init (&it, h);
  while (g_hash_table_iter_next (&it, &key, NULL))
    g_ptr_array_add (keys, key);
  g_ptr_array_sort_with_data (keys, cmp_count_desc, h);
  return keys;
}

static void
print_counter (GString *out, const char *title, GHashTable *h)
{
  g_autoptr(GPtrArray) keys = sorted_keys (h);

  g_string_append_printf (out, "  %s:", title);
  if (keys->len == 0)
    g_string_append (out, " none");
  g_string_append_c (out, '\n');
  for (guint i = 0; i < keys->len; i++)
    g_string_append_printf (out, "    %-44s %u\n", (const char *) keys->pdata[i],
                            GPOINTER_TO_UINT (g_hash_table_lookup (h, keys->pdata[i])));
}

static guint
region_n_outputs (const CsStmt *s)
{
  if (s->out == NULL)
    return 0;
  if (s->out->kind == CS_VALUE_LIST || s->out->kind == CS_VALUE_TUPLE)
    return s->out->u.seq.n;
  return 1;
}

static void
signature_text (GString *out, const CsTrace *t)
{
  if (!t->has_signature)
    {
      g_string_append (out, "(no signature)");
      return;
    }
  g_string_append_printf (out, "%s(", t->name);
  for (guint i = 0; i < t->n_params; i++)
    g_string_append_printf (out, "%s%s%s", i ? ", " : "",
                            t->params[i].kind == CS_PARAM_STAR ? "*"
                            : t->params[i].kind == CS_PARAM_DSTAR ? "**" : "",
                            t->params[i].name ? t->params[i].name : "");
  g_string_append_c (out, ')');
}

static void
print_cast_sites (GString *out, const TraceInfo *ti)
{
  for (guint i = 0; i < ti->casts->len; i++)
    {
      const CastSite *c = ti->casts->pdata[i];
      CsProxy *o = cs_stmt_get_output (c->stmt);
      g_string_append_printf (out, "    line %-6u %-5s -> %-5s %-10s %s%s%s\n", c->stmt->line, c->from,
                              c->to, o ? o->name : "_", c->stmt->callee,
                              c->region ? " in " : "", c->region ? c->region->callee : "");
    }
}

static void
print_text (const char *path, const CsTraceList *list, gboolean list_casts)
{
  GString *out = g_string_new (NULL);

  g_string_append_printf (out, "%s: %u trace%s%s\n", path, list->traces->len,
                          list->traces->len == 1 ? "" : "s",
                          list->is_list ? " (a printed list of traces)" : "");
  for (guint k = 0; k < list->traces->len; k++)
    {
      const CsTrace *t = g_ptr_array_index (list->traces, k);
      TraceInfo ti;

      info_collect (&ti, t);
      g_string_append_printf (out, "\ntrace %u: ", k);
      signature_text (out, t);
      g_string_append_c (out, '\n');
      if (t->provenance)
        g_string_append_printf (out, "  constructed by: %s\n", t->provenance);
      g_string_append_printf (out, "  statements: %u top-level (%u bound symbols, %u comment lines), "
                                   "%u with every subsymbol level\n",
                              ti.n_top, ti.n_symbols, ti.n_comments, ti.n_all);
      g_string_append_printf (out, "  proxies: %u (%u typed tensors)\n",
                              cs_trace_n_proxies (t), ti.n_tensors);
      print_counter (out, "tensors by dtype", ti.dtypes);
      g_string_append_printf (out, "  fusion regions: %u\n", ti.regions->len);
      for (guint i = 0; i < ti.regions->len; i++)
        {
          const CsStmt *r = ti.regions->pdata[i];
          g_string_append_printf (out, "    %-12s line %-6u %u inputs, %u outputs, %u prims\n",
                                  r->callee, r->line, r->n_args, region_n_outputs (r), r->n_subs);
        }
      g_string_append_printf (out, "  casts: %u top-level, %u inside fusion regions, %u at every level\n",
                              ti.n_casts_top, ti.n_casts_fused, ti.n_casts_all);
      print_counter (out, "casts by target dtype (every level)", ti.cast_targets);
      if (list_casts)
        {
          g_string_append_printf (out, "  casts that run (top level and in fusion regions): %u\n",
                                  ti.casts->len);
          print_cast_sites (out, &ti);
        }
      print_counter (out, "ops (top level)", ti.ops);
      info_clear (&ti);
    }
  fputs (out->str, stdout);
  g_string_free (out, TRUE);
}

#if CS_HAVE_JSON
static void
json_counter (JsonBuilder *b, const char *member, GHashTable *h)
{
  g_autoptr(GPtrArray) keys = sorted_keys (h);

  json_builder_set_member_name (b, member);
  json_builder_begin_object (b);
  for (guint i = 0; i < keys->len; i++)
    {
      json_builder_set_member_name (b, keys->pdata[i]);
      json_builder_add_int_value (b, GPOINTER_TO_UINT (g_hash_table_lookup (h, keys->pdata[i])));
    }
  json_builder_end_object (b);
}

static void
print_json (const char *path, const CsTraceList *list)
{
  g_autoptr(JsonBuilder) b = json_builder_new ();
  g_autoptr(JsonGenerator) gen = json_generator_new ();
  g_autoptr(JsonNode) root = NULL;
  g_autofree char *text = NULL;

  json_builder_begin_object (b);
  json_builder_set_member_name (b, "file");
  json_builder_add_string_value (b, path);
  json_builder_set_member_name (b, "is_list");
  json_builder_add_boolean_value (b, list->is_list);
  json_builder_set_member_name (b, "traces");
  json_builder_begin_array (b);
  for (guint k = 0; k < list->traces->len; k++)
    {
      const CsTrace *t = g_ptr_array_index (list->traces, k);
      TraceInfo ti;

      info_collect (&ti, t);
      json_builder_begin_object (b);
      json_builder_set_member_name (b, "name");
      if (t->has_signature)
        json_builder_add_string_value (b, t->name);
      else
        json_builder_add_null_value (b);
      json_builder_set_member_name (b, "params");
      json_builder_begin_array (b);
      for (guint i = 0; i < t->n_params; i++)
        if (t->params[i].name)
          json_builder_add_string_value (b, t->params[i].name);
      json_builder_end_array (b);
      json_builder_set_member_name (b, "provenance");
      if (t->provenance)
        json_builder_add_string_value (b, t->provenance);
      else
        json_builder_add_null_value (b);
      json_builder_set_member_name (b, "statements");
      json_builder_begin_object (b);
      json_builder_set_member_name (b, "top_level");
      json_builder_add_int_value (b, ti.n_top);
      json_builder_set_member_name (b, "bound_symbols");
      json_builder_add_int_value (b, ti.n_symbols);
      json_builder_set_member_name (b, "comments");
      json_builder_add_int_value (b, ti.n_comments);
      json_builder_set_member_name (b, "all_levels");
      json_builder_add_int_value (b, ti.n_all);
      json_builder_end_object (b);
      json_builder_set_member_name (b, "proxies");
      json_builder_add_int_value (b, cs_trace_n_proxies (t));
      json_builder_set_member_name (b, "tensors");
      json_builder_add_int_value (b, ti.n_tensors);
      json_counter (b, "tensor_dtypes", ti.dtypes);
      json_counter (b, "ops", ti.ops);
      json_counter (b, "ops_all_levels", ti.ops_all);
      json_builder_set_member_name (b, "fusion_regions");
      json_builder_begin_array (b);
      for (guint i = 0; i < ti.regions->len; i++)
        {
          const CsStmt *r = ti.regions->pdata[i];
          json_builder_begin_object (b);
          json_builder_set_member_name (b, "name");
          json_builder_add_string_value (b, r->callee);
          json_builder_set_member_name (b, "line");
          json_builder_add_int_value (b, r->line);
          json_builder_set_member_name (b, "inputs");
          json_builder_add_int_value (b, r->n_args);
          json_builder_set_member_name (b, "outputs");
          json_builder_add_int_value (b, region_n_outputs (r));
          json_builder_set_member_name (b, "prims");
          json_builder_add_int_value (b, r->n_subs);
          json_builder_end_object (b);
        }
      json_builder_end_array (b);
      json_builder_set_member_name (b, "casts");
      json_builder_begin_object (b);
      json_builder_set_member_name (b, "top_level");
      json_builder_add_int_value (b, ti.n_casts_top);
      json_builder_set_member_name (b, "in_fusion_regions");
      json_builder_add_int_value (b, ti.n_casts_fused);
      json_builder_set_member_name (b, "all_levels");
      json_builder_add_int_value (b, ti.n_casts_all);
      json_counter (b, "by_target_dtype", ti.cast_targets);
      json_builder_set_member_name (b, "sites");
      json_builder_begin_array (b);
      for (guint i = 0; i < ti.casts->len; i++)
        {
          const CastSite *c = ti.casts->pdata[i];
          CsProxy *o = cs_stmt_get_output (c->stmt);
          json_builder_begin_object (b);
          json_builder_set_member_name (b, "line");
          json_builder_add_int_value (b, c->stmt->line);
          json_builder_set_member_name (b, "op");
          json_builder_add_string_value (b, c->stmt->callee);
          json_builder_set_member_name (b, "output");
          if (o)
            json_builder_add_string_value (b, o->name);
          else
            json_builder_add_null_value (b);
          json_builder_set_member_name (b, "from");
          json_builder_add_string_value (b, c->from);
          json_builder_set_member_name (b, "to");
          json_builder_add_string_value (b, c->to);
          json_builder_set_member_name (b, "region");
          if (c->region)
            json_builder_add_string_value (b, c->region->callee);
          else
            json_builder_add_null_value (b);
          json_builder_end_object (b);
        }
      json_builder_end_array (b);
      json_builder_end_object (b);
      json_builder_end_object (b);
      info_clear (&ti);
    }
  json_builder_end_array (b);
  json_builder_end_object (b);
  root = json_builder_get_root (b);
  json_generator_set_root (gen, root);
  json_generator_set_pretty (gen, TRUE);
  text = json_generator_to_data (gen, NULL);
  fputs (text, stdout);
  fputc ('\n', stdout);
}
#endif

/**
 * cs_cli_cmd_info:
 * @argc: arguments, argv[0] = "info"
 * @argv: `[--json] [--casts] FILE|-`
 *
 * Summarises every trace of FILE: statements, ops by callee, tensor dtypes, fusion regions
 * and casts (text, or JSON through json-glib).
 * Returns: CS_CLI_EXIT_OK, CS_CLI_EXIT_INPUT (the parser's "file:line:col: reason" on
 * stderr) or CS_CLI_EXIT_USAGE
 */
int
cs_cli_cmd_info (int argc, char **argv)
{
  gboolean json = FALSE, list_casts = FALSE;
  g_auto(GStrv) files = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(GOptionContext) ctx = cs_cli_option_context_new ("FILE", "summarise a trace file");
  g_autoptr(CsTraceList) list = NULL;
  const GOptionEntry entries[] = {
    { "json", 'j', 0, G_OPTION_ARG_NONE, &json, "Write the summary as JSON (cast sites included)", NULL },
    { "casts", 'c', 0, G_OPTION_ARG_NONE, &list_casts,
      "List every cast that runs: line, source -> target dtype, output, fusion region", NULL },
    { G_OPTION_REMAINING, 0, 0, G_OPTION_ARG_FILENAME_ARRAY, &files, NULL, NULL },
    { NULL }
  };

  g_option_context_add_main_entries (ctx, entries, NULL);
  g_option_context_set_summary (ctx,
    "Summarises every trace of a file: statements, ops by name, tensor dtypes, fusion\n"
    "regions and casts.");
  cs_cli_set_help (ctx, NULL, CS_CLI_HELP_TRACE);
  if (!cs_cli_parse_options (ctx, &argc, &argv))
    return CS_CLI_EXIT_USAGE;
  if (files == NULL || files[0] == NULL || files[1] != NULL)
    {
      fprintf (stderr, "castscope-cli: info: expected exactly one FILE (or '-')\n"
                       "Try 'castscope-cli info --help'.\n");
      return CS_CLI_EXIT_USAGE;
    }
#if !CS_HAVE_JSON
  if (json)
    {
      fprintf (stderr, "castscope-cli: info: --json needs json-glib, which this build lacks\n");
      return CS_CLI_EXIT_USAGE;
    }
#endif
  list = cs_parse_file (files[0], &error);
  if (list == NULL)
    {
      cs_cli_error ("%s", error->message);
      return CS_CLI_EXIT_INPUT;
    }
#if CS_HAVE_JSON
  if (json)
    print_json (files[0], list);
  else
#endif
    print_text (files[0], list, list_casts);
  return CS_CLI_EXIT_OK;
}
