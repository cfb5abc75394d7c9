/* cs-render.c: the CS_RENDER_ERROR domain and CsRenderOptions. */
#include "cs-config.h"

#include "cs-render-types.h"
#include "cs-layout-cache.h"

/**
 * cs_render_error_quark:
 *
 * The error domain of render/ (#CsRenderError codes): traces that cannot be drawn, Graphviz
 * failures (with Graphviz's own message), hard size limits, unwritable output files and
 * unknown export formats.
 * Returns: the quark
 */
G_DEFINE_QUARK (cs-render-error-quark, cs_render_error)

/**
 * cs_render_options_init:
 * @options: (out caller-allocates): options to fill
 *
 * Defaults: AUTO detail, CS_RENDER_DEFAULT_MAX_NODES, shapes on edges, no shapes on nodes,
 * bookkeeping hidden, "DejaVu Sans" 10 pt, AUTO collapse of groups, no per-statement or
 * per-group overrides, notes with the app's instructions (CS_RENDER_HINTS_APP).
 */
void
cs_render_options_init (CsRenderOptions *options)
{
  g_return_if_fail (options != NULL);
  *options = (CsRenderOptions) {
    .detail = CS_RENDER_DETAIL_AUTO,
    .expand = NULL,
    .collapse = CS_RENDER_COLLAPSE_AUTO,
    .group_expand = NULL,
    .max_nodes = 0,
    .max_edge_labels = 0,
    .edge_labels = TRUE,
    .node_shapes = FALSE,
    .bookkeeping = FALSE,
    .font_family = NULL,
    .font_size_pt = 10.0,
    .hints = CS_RENDER_HINTS_APP,
  };
}

/**
 * cs_render_options_clear:
 * @options: options filled by cs_render_options_init() or cs_render_options_copy()
 *
 * Frees what @options owns (the override table and the font name); the struct can be
 * initialised again afterwards.
 */
void
cs_render_options_clear (CsRenderOptions *options)
{
  g_return_if_fail (options != NULL);
  g_clear_pointer (&options->expand, g_hash_table_unref);
  g_clear_pointer (&options->group_expand, g_hash_table_unref);
  g_clear_pointer (&options->font_family, g_free);
  g_clear_pointer (&options->cache, cs_layout_cache_unref);
}

/**
 * cs_render_options_copy:
 * @src: options
 * @dst: (out caller-allocates): receives a deep copy (its previous content is not freed)
 */
void
cs_render_options_copy (const CsRenderOptions *src, CsRenderOptions *dst)
{
  g_return_if_fail (src != NULL && dst != NULL);
  *dst = *src;
  dst->font_family = g_strdup (src->font_family);
  if (src->cache != NULL)
    dst->cache = cs_layout_cache_ref (src->cache);
  dst->expand = NULL;
  if (src->expand != NULL)
    {
      GHashTableIter it;
      gpointer k, v;

      dst->expand = g_hash_table_new (NULL, NULL);
      g_hash_table_iter_init (&it, src->expand);
      while (g_hash_table_iter_next (&it, &k, &v))
        g_hash_table_insert (dst->expand, k, v);
    }
  dst->group_expand = NULL;
  if (src->group_expand != NULL)
    {
      GHashTableIter it;
      gpointer k, v;

      dst->group_expand = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
      g_hash_table_iter_init (&it, src->group_expand);
      while (g_hash_table_iter_next (&it, &k, &v))
        g_hash_table_insert (dst->group_expand, g_strdup (k), v);
    }
}

/**
 * cs_render_options_set_expanded:
 * @options: options
 * @stmt_id: CsStmt.id of a top-level statement or of a subsymbol
 * @expand: ON draws its subsymbols, OFF one node, DEFAULT removes the override
 *
 * Per-node expand / collapse on top of the detail level (the GUI's double click).
 */
void
cs_render_options_set_expanded (CsRenderOptions *options, guint32 stmt_id, CsRenderExpand expand)
{
  g_return_if_fail (options != NULL);
  if (expand == CS_RENDER_EXPAND_DEFAULT)
    {
      if (options->expand != NULL)
        g_hash_table_remove (options->expand, GUINT_TO_POINTER (stmt_id));
      return;
    }
  if (options->expand == NULL)
    options->expand = g_hash_table_new (NULL, NULL);
  g_hash_table_insert (options->expand, GUINT_TO_POINTER (stmt_id), GINT_TO_POINTER (expand));
}

/**
 * cs_render_options_get_expanded:
 * @options: options
 * @stmt_id: a statement id
 *
 * Returns: the override for @stmt_id, CS_RENDER_EXPAND_DEFAULT when none
 */
CsRenderExpand
cs_render_options_get_expanded (const CsRenderOptions *options, guint32 stmt_id)
{
  g_return_val_if_fail (options != NULL, CS_RENDER_EXPAND_DEFAULT);
  if (options->expand == NULL)
    return CS_RENDER_EXPAND_DEFAULT;
  return (CsRenderExpand) GPOINTER_TO_INT (g_hash_table_lookup (options->expand,
                                                                GUINT_TO_POINTER (stmt_id)));
}

/**
 * cs_render_options_set_group_expanded:
 * @options: options
 * @group_name: a group's full name (CsGroup.name: "layers.3", "layers.3.attention")
 * @expand: ON draws the group as a box of its statements, OFF as one node, DEFAULT removes
 *   the override (the collapse level decides)
 *
 * Per-group expand / collapse on top of @options->collapse (the GUI's double click on a
 * group, its side-panel tree).  Names are kept, so the same layer stays expanded under another
 * policy or pass.
 */
void
cs_render_options_set_group_expanded (CsRenderOptions *options, const char *group_name,
                                      CsRenderExpand expand)
{
  g_return_if_fail (options != NULL && group_name != NULL);
  if (expand == CS_RENDER_EXPAND_DEFAULT)
    {
      if (options->group_expand != NULL)
        g_hash_table_remove (options->group_expand, group_name);
      return;
    }
  if (options->group_expand == NULL)
    options->group_expand = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  g_hash_table_insert (options->group_expand, g_strdup (group_name), GINT_TO_POINTER (expand));
}

/**
 * cs_render_options_get_group_expanded:
 * @options: options
 * @group_name: a group's full name
 *
 * Returns: the override for @group_name, CS_RENDER_EXPAND_DEFAULT when none
 */
CsRenderExpand
cs_render_options_get_group_expanded (const CsRenderOptions *options, const char *group_name)
{
  g_return_val_if_fail (options != NULL, CS_RENDER_EXPAND_DEFAULT);
  if (options->group_expand == NULL || group_name == NULL)
    return CS_RENDER_EXPAND_DEFAULT;
  return (CsRenderExpand) GPOINTER_TO_INT (g_hash_table_lookup (options->group_expand, group_name));
}

/**
 * cs_render_collapse_from_string:
 * @text: "auto", "none", "layers", "modules" or "flat" (the CLI's `render --collapse`)
 * @out: (out): the level
 *
 * Returns: FALSE for any other text
 */
gboolean
cs_render_collapse_from_string (const char *text, CsRenderCollapse *out)
{
  static const struct { const char *name; CsRenderCollapse v; } names[] = {
    { "auto", CS_RENDER_COLLAPSE_AUTO }, { "none", CS_RENDER_COLLAPSE_NONE },
    { "layers", CS_RENDER_COLLAPSE_LAYERS }, { "modules", CS_RENDER_COLLAPSE_MODULES },
    { "flat", CS_RENDER_COLLAPSE_FLAT },
  };

  for (gsize i = 0; text != NULL && i < G_N_ELEMENTS (names); i++)
    if (g_ascii_strcasecmp (text, names[i].name) == 0)
      {
        *out = names[i].v;
        return TRUE;
      }
  return FALSE;
}
