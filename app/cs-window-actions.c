/* cs-window-actions.c: CsWindow's actions (win.*), the cast-policy panel, find and export.
 *
 * Every cast-policy knob is a stateful action `win.policy-<key>` (string state, the value
 * name of cs-policy.h), so the side panel's dropdowns, the Cast Policy menu and tests all
 * change the policy the same way; the CLI spells the same keys and values (`--policy k=v`).
 */
#include "cs-config.h"

#include "cs-window-private.h"

#include <string.h>

#include "cs-ops.h"

/* ------------------------------------------------------------------------------------------ */
/* Policy knobs                                                                                */

typedef struct
{
  const char *key;       /* a cs_policy_keys entry */
  const char *label;     /* shown in the panel */
  const char *tooltip;   /* what the knob changes (DESIGN.md "The cast policy") */
} KnobLabel;

static const KnobLabel knob_labels[] = {
  { "matmul", "Matmul precision",
    "native keeps matmul/linear in the operands' dtype (tensor cores); upcast-f32 converts the "
    "operands to f32 and the result back (tensor cores idle)" },
  { "elementwise", "Elementwise compute",
    "f32: Thunder computes bf16/f16 elementwise math in f32 (the computation dtype); native: "
    "in the operands' dtype" },
  { "autocast", "Autocast",
    "Thunder's autocast: downcast f32 operands of matmul, linear and sdpa to bf16 or f16" },
  { "fusion", "Fusion",
    "How fusion regions are grouped: consecutive (thunder.jit), dataflow (ThunderFX) or off" },
  { "fuse-matmul", "Fuse matmul", "nvFuser takes matmul into its regions (nv_enable_matmul)" },
  { "fuse-linear", "Fuse linear", "nvFuser takes linear into its regions (nv_enable_linear)" },
  { "redundant-casts", "Redundant casts",
    "remove: nvFuser drops the bf16 round trip between fused ops; keep: no cast is dropped, "
    "every op Thunder's decomposition writes rounds (the ops inside a composite such as gelu "
    "too)" },
  { "rounding", "Rounding",
    "fused: a value stays in f32 inside a fusion region and is rounded once, where the region "
    "stores it (nvFuser, Thunder's default); eager: every op you wrote rounds its result to its "
    "dtype, as PyTorch eager does (a composite such as gelu still rounds once).  Run under each "
    "to compare their error against f64" },
  { "tf32", "TF32", "f32 matmuls may use TF32 tensor cores (GPU run only)" },
  { "attention", "Attention",
    "pattern: keep a hand-written matmul, softmax, matmul as the trace says (Thunder); fused: "
    "castscope claims it as one scaled_dot_product_attention, which the sdpa executor runs "
    "fused forward and backward.  The scores are then not rounded to bf16: the numerics "
    "change" },
};

static const KnobLabel *
knob_label (const char *key)
{
  for (gsize i = 0; i < G_N_ELEMENTS (knob_labels); i++)
    if (strcmp (knob_labels[i].key, key) == 0)
      return &knob_labels[i];
  return NULL;
}

static void
update_policy_label (CsWindow *self)
{
  g_autofree char *text = cs_policy_to_string (&self->policy);

  gtk_label_set_text (self->policy_label, text);
}

/* The panel and the menu follow the action states (set by either, or by a test). */
void
_cs_window_sync_policy (CsWindow *self)
{
  self->syncing = TRUE;
  for (guint k = 0; k < self->n_policy_keys; k++)
    {
      const char *key = cs_policy_keys[k];
      const char *value = cs_policy_get (&self->policy, key);
      const char * const *values = cs_policy_values (key);

      for (guint v = 0; values != NULL && values[v] != NULL; v++)
        if (g_strcmp0 (values[v], value) == 0)
          gtk_drop_down_set_selected (self->policy_dropdowns[k], v);
    }
  self->syncing = FALSE;
  update_policy_label (self);
}

static void
policy_change_state (GSimpleAction *action, GVariant *state, gpointer user_data)
{
  CsWindow *self = CS_WINDOW (user_data);
  const char *name = g_action_get_name (G_ACTION (action));
  const char *key = name + strlen ("policy-");
  const char *value = g_variant_get_string (state, NULL);
  CsPolicy policy = self->policy;
  g_autoptr(GError) error = NULL;

  if (!cs_policy_set (&policy, key, value, &error))
    {
      cs_window_show_error (self, error->message);
      _cs_window_sync_policy (self);
      return;
    }
  g_simple_action_set_state (action, state);
  if (cs_policy_equal (&policy, &self->policy))
    return;
  self->policy = policy;
  _cs_window_sync_policy (self);
  _cs_window_recompute (self);
}

static void
policy_dropdown_notify_cb (GtkDropDown *dropdown, GParamSpec *pspec, CsWindow *self)
{
  const char *key = g_object_get_data (G_OBJECT (dropdown), "cs-policy-key");
  const char * const *values = cs_policy_values (key);
  guint selected = gtk_drop_down_get_selected (dropdown);
  g_autofree char *action = NULL;

  if (self->syncing || values == NULL || selected >= g_strv_length ((char **) values))
    return;
  action = g_strconcat ("policy-", key, NULL);
  g_action_group_change_action_state (G_ACTION_GROUP (self), action,
                                      g_variant_new_string (values[selected]));
}

/* The dropdown's button shows its value ellipsized (a long executors list must not widen the
 * policy panel); its popup list shows the values whole. */
static void
knob_button_setup_cb (GtkSignalListItemFactory *factory, GtkListItem *item, gpointer data)
{
  GtkWidget *label = gtk_label_new (NULL);

  gtk_label_set_xalign (GTK_LABEL (label), 0);
  gtk_label_set_ellipsize (GTK_LABEL (label), PANGO_ELLIPSIZE_END);
  gtk_label_set_width_chars (GTK_LABEL (label), 10);
  gtk_label_set_max_width_chars (GTK_LABEL (label), 14);
  gtk_list_item_set_child (item, label);
}

static void
knob_list_setup_cb (GtkSignalListItemFactory *factory, GtkListItem *item, gpointer data)
{
  GtkWidget *label = gtk_label_new (NULL);

  gtk_label_set_xalign (GTK_LABEL (label), 0);
  gtk_list_item_set_child (item, label);
}

static void
knob_bind_cb (GtkSignalListItemFactory *factory, GtkListItem *item, gpointer data)
{
  GtkStringObject *value = gtk_list_item_get_item (item);
  GtkWidget *label = gtk_list_item_get_child (item);

  gtk_label_set_text (GTK_LABEL (label), gtk_string_object_get_string (value));
  gtk_widget_set_tooltip_text (label, gtk_string_object_get_string (value));
}

static GtkListItemFactory *
knob_factory_new (gboolean button)
{
  GtkListItemFactory *factory = gtk_signal_list_item_factory_new ();

  g_signal_connect (factory, "setup",
                    button ? G_CALLBACK (knob_button_setup_cb) : G_CALLBACK (knob_list_setup_cb),
                    NULL);
  g_signal_connect (factory, "bind", G_CALLBACK (knob_bind_cb), NULL);
  return factory;
}

/**
 * _cs_window_init_policy_panel:
 *
 * Builds one labelled dropdown per cs_policy_keys entry (values from cs_policy_values) in the
 * side panel, one stateful action per key, and the radio items of the Cast Policy menu.
 */
void
_cs_window_init_policy_panel (CsWindow *self)
{
  guint n = g_strv_length ((char **) cs_policy_keys);

  self->n_policy_keys = n;
  self->policy_dropdowns = g_new0 (GtkDropDown *, n);
  for (guint k = 0; k < n; k++)
    {
      const char *key = cs_policy_keys[k];
      const char * const *values = cs_policy_values (key);
      const KnobLabel *kl = knob_label (key);
      g_autofree char *action_name = g_strconcat ("policy-", key, NULL);
      g_autofree char *detailed = g_strconcat ("win.", action_name, NULL);
      g_autoptr(GSimpleAction) action = NULL;
      g_autoptr(GMenu) section = g_menu_new ();
      GtkWidget *label;
      GtkWidget *dropdown;

      action = g_simple_action_new_stateful (action_name, G_VARIANT_TYPE_STRING,
                                             g_variant_new_string (cs_policy_get (&self->policy, key)));
      g_signal_connect (action, "change-state", G_CALLBACK (policy_change_state), self);
      g_action_map_add_action (G_ACTION_MAP (self), G_ACTION (action));

      label = gtk_label_new (kl ? kl->label : key);
      gtk_label_set_xalign (GTK_LABEL (label), 0);
      gtk_widget_set_hexpand (label, TRUE);
      dropdown = gtk_drop_down_new_from_strings ((const char * const *) values);
      {
        g_autoptr(GtkListItemFactory) button = knob_factory_new (TRUE);
        g_autoptr(GtkListItemFactory) list = knob_factory_new (FALSE);

        gtk_drop_down_set_factory (GTK_DROP_DOWN (dropdown), button);
        gtk_drop_down_set_list_factory (GTK_DROP_DOWN (dropdown), list);
      }
      gtk_widget_set_name (dropdown, key);
      g_object_set_data_full (G_OBJECT (dropdown), "cs-policy-key", g_strdup (key), g_free);
      if (kl != NULL)
        {
          gtk_widget_set_tooltip_text (label, kl->tooltip);
          gtk_widget_set_tooltip_text (dropdown, kl->tooltip);
        }
      gtk_grid_attach (self->policy_grid, label, 0, (int) k, 1, 1);
      gtk_grid_attach (self->policy_grid, dropdown, 1, (int) k, 1, 1);
      self->policy_dropdowns[k] = GTK_DROP_DOWN (dropdown);
      g_signal_connect (dropdown, "notify::selected", G_CALLBACK (policy_dropdown_notify_cb), self);

      for (guint v = 0; values != NULL && values[v] != NULL; v++)
        {
          g_autoptr(GMenuItem) item = g_menu_item_new (values[v], NULL);

          g_menu_item_set_action_and_target_value (item, detailed, g_variant_new_string (values[v]));
          g_menu_append_item (section, item);
        }
      g_menu_append_submenu (self->policy_submenu, kl ? kl->label : key, G_MENU_MODEL (section));
    }
  _cs_window_sync_policy (self);
}

/* ------------------------------------------------------------------------------------------ */
/* Find                                                                                        */

static gboolean
contains_ci (const char *hay, const char *needle)
{
  g_autofree char *h = NULL;
  g_autofree char *n = NULL;

  if (hay == NULL)
    return FALSE;
  h = g_utf8_strdown (hay, -1);
  n = g_utf8_strdown (needle, -1);
  return strstr (h, n) != NULL;
}

static gboolean
stmt_matches (const CsStmt *stmt, const char *needle)
{
  g_autoptr(GPtrArray) proxies = NULL;

  if (stmt->kind != CS_STMT_CALL)
    return FALSE;
  if (stmt->callee != NULL && contains_ci (stmt->callee, needle))
    return TRUE;
  proxies = g_ptr_array_new ();
  cs_stmt_collect_inputs (stmt, proxies);
  cs_stmt_collect_outputs (stmt, proxies);
  for (guint i = 0; i < proxies->len; i++)
    {
      const CsProxy *p = g_ptr_array_index (proxies, i);
      if (strcmp (p->name, needle) == 0)
        return TRUE;
    }
  return FALSE;
}

/* What Find matches besides the shown statements themselves: the statements derived from an
 * op of the initial trace that matches (ltorch.silu, which the passes decomposed into
 * neg/exp/reciprocal inside a region), counted once per such op. */
typedef struct
{
  GHashTable *origin_hits; /* initial-trace statement id -> id of the outermost initial op
                              that matches and encloses it (itself, or the op whose
                              decomposition holds it): the op it counts for */
  GHashTable *excluded;    /* such ops that a direct match derives from or lies in: ops
                              still shown as themselves */
  GHashTable *seen;        /* such ops already matched by an earlier statement */
} FindOrigins;

/* Maps in @hits the ids of @s and its subs (at every level) to the outermost op matching
 * @needle that encloses them: @root when not 0, else @s when its own op matches. */
static void
origin_hits_add (const CsStmt *s, const char *needle, guint32 root, GHashTable *hits)
{
  if (root == 0 && s->kind == CS_STMT_CALL && s->callee != NULL && !cs_op_is_fusion (s->op)
      && contains_ci (s->callee, needle))
    root = s->id;
  if (root != 0)
    g_hash_table_insert (hits, GUINT_TO_POINTER (s->id), GUINT_TO_POINTER (root));
  for (guint i = 0; i < s->n_subs; i++)
    origin_hits_add (s->subs[i], needle, root, hits);
}

/* Adds to fo->excluded the op (fo->origin_hits) that @s, or anything inside it, is or
 * derives from. */
static void
exclude_subtree (const CsStmt *s, FindOrigins *fo)
{
  guint32 keys[2] = { s->id, s->origin };

  for (guint k = 0; k < 2; k++)
    {
      gpointer root = g_hash_table_lookup (fo->origin_hits, GUINT_TO_POINTER (keys[k]));

      if (keys[k] != 0 && root != NULL)
        g_hash_table_add (fo->excluded, root);
    }
  for (guint i = 0; i < s->n_subs; i++)
    exclude_subtree (s->subs[i], fo);
}

/* Every statement matching, at every level (a region's prims, a decomposition's), in trace
 * order; a wrapper whose own prim matches too counts once, as the prim (the op itself).
 * With @fo, a statement that does not match itself but derives from an initial op that does
 * (fo->origin_hits, not fo->excluded) matches too: the first such statement of each such op
 * only, so a decomposed op counts once.  @direct (nullable) gets each direct match's
 * statement. */
static void
collect_matches (const CsStmt *s, const char *needle, GArray *out, FindOrigins *fo,
                 GPtrArray *direct)
{
  guint before = out->len;

  for (guint i = 0; i < s->n_subs; i++)
    collect_matches (s->subs[i], needle, out, fo, direct);
  if (out->len == before && stmt_matches (s, needle))
    {
      g_array_append_val (out, s->id);
      if (direct != NULL)
        g_ptr_array_add (direct, (gpointer) s);
    }
  else if (out->len > before && cs_op_is_fusion (s->op) && contains_ci (s->callee, needle))
    g_array_insert_val (out, before, s->id);
  else if (out->len == before && fo != NULL && s->kind == CS_STMT_CALL && s->origin != 0
           && !cs_op_is_fusion (s->op))
    {
      gpointer root = g_hash_table_lookup (fo->origin_hits, GUINT_TO_POINTER (s->origin));

      if (root != NULL && !g_hash_table_contains (fo->excluded, root)
          && !g_hash_table_contains (fo->seen, root))
        {
          g_hash_table_add (fo->seen, root);
          g_array_append_val (out, s->id);
        }
    }
}

/* The shown family's initial trace (pass "initial", else its first pass), or NULL. */
static CsTrace *
initial_trace (CsWindow *self)
{
  CsFamily family = _cs_window_get_family (self);
  guint n;

  if (self->analysis == NULL || (n = cs_analysis_n_passes (self->analysis, family)) == 0)
    return NULL;
  for (guint i = 0; i < n; i++)
    if (g_strcmp0 (cs_analysis_pass_name (self->analysis, family, i), "initial") == 0)
      return cs_analysis_get_trace (self->analysis, family, i);
  return cs_analysis_get_trace (self->analysis, family, 0);
}

/* Appends to @out the matches of @needle in @trace (collect_matches()), those by origin
 * (against @initial, nullable) included. */
static void
collect_trace_matches (const CsTrace *trace, const CsTrace *initial, const char *needle,
                       GArray *out)
{
  g_autoptr(GArray) scratch = g_array_new (FALSE, FALSE, sizeof (guint32));
  g_autoptr(GPtrArray) direct = g_ptr_array_new ();
  FindOrigins fo;

  if (initial == NULL)
    {
      for (guint i = 0; i < trace->n_stmts; i++)
        collect_matches (trace->stmts[i], needle, out, NULL, NULL);
      return;
    }
  fo.origin_hits = g_hash_table_new (NULL, NULL);
  fo.excluded = g_hash_table_new (NULL, NULL);
  fo.seen = g_hash_table_new (NULL, NULL);
  for (guint i = 0; i < initial->n_stmts; i++)
    origin_hits_add (initial->stmts[i], needle, 0, fo.origin_hits);
  /* the ops shown as themselves first: what derives from them needs no second match */
  for (guint i = 0; i < trace->n_stmts; i++)
    collect_matches (trace->stmts[i], needle, scratch, NULL, direct);
  for (guint i = 0; i < direct->len; i++)
    exclude_subtree (direct->pdata[i], &fo);
  for (guint i = 0; i < trace->n_stmts; i++)
    collect_matches (trace->stmts[i], needle, out, &fo, NULL);
  g_hash_table_unref (fo.origin_hits);
  g_hash_table_unref (fo.excluded);
  g_hash_table_unref (fo.seen);
}

static void
find_step (CsWindow *self, const char *needle, gboolean restart, gboolean backwards)
{
  CsTrace *trace = _cs_window_get_shown_trace (self);
  CsGraphView *view = _cs_window_get_view (self, _cs_window_get_family (self));
  CsLayout *layout = cs_graph_view_get_layout (view);
  g_autoptr(GHashTable) set = NULL;
  GArray *matches;
  guint32 next;
  guint pos = 0;
  g_autofree char *msg = NULL;

  if (trace == NULL || needle == NULL || needle[0] == '\0')
    {
      gtk_label_set_text (self->status_message, "");
      g_clear_pointer (&self->search_matches, g_array_unref);
      cs_graph_view_set_found (view, NULL);
      return;
    }
  if (restart || self->search_matches == NULL || g_strcmp0 (self->search_needle, needle) != 0)
    {
      g_clear_pointer (&self->search_matches, g_array_unref);
      g_free (self->search_needle);
      self->search_needle = g_strdup (needle);
      self->search_matches = g_array_new (FALSE, FALSE, sizeof (guint32));
      /* layers, modules and chunks by name */
      for (guint g = 0; layout != NULL && layout->grouping != NULL && g < layout->grouping->n_groups; g++)
        if (contains_ci (layout->grouping->groups[g].name, needle))
          {
            guint32 gid = CS_LAYOUT_GROUP_ID (g);
            g_array_append_val (self->search_matches, gid);
          }
      collect_trace_matches (trace, initial_trace (self), needle, self->search_matches);
      restart = TRUE;
    }
  matches = self->search_matches;
  if (matches->len == 0)
    {
      msg = g_strdup_printf ("Nothing matches “%s” (ops, tensors, regions and layers searched, "
                             "collapsed ones too)", needle);
      gtk_label_set_text (self->status_message, msg);
      cs_graph_view_set_found (view, NULL);
      return;
    }
  set = g_hash_table_new (NULL, NULL);
  for (guint i = 0; i < matches->len; i++)
    g_hash_table_add (set, GUINT_TO_POINTER (g_array_index (matches, guint32, i)));
  cs_graph_view_set_found (view, set);
  pos = backwards ? matches->len - 1 : 0;
  if (!restart)
    for (guint i = 0; i < matches->len; i++)
      if (g_array_index (matches, guint32, i) == self->search_last)
        {
          pos = backwards ? (i + matches->len - 1) % matches->len : (i + 1) % matches->len;
          break;
        }
  next = g_array_index (matches, guint32, pos);
  self->search_last = next;
  msg = g_strdup_printf ("“%s”: match %u of %u (Enter: next, Shift+Enter: previous)", needle,
                         pos + 1, matches->len);
  gtk_label_set_text (self->status_message, msg);
  _cs_window_select_stmt (self, next, TRUE);
}

/**
 * _cs_window_find_next:
 * @needle: an op name part ("matmul", "tanh", "prims.add"), a tensor name ("t5"), a region
 *   ("nvFusion2") or a group ("layers.3"); ops, regions and groups match case-insensitively
 *   by part, tensors by whole name; an op of the initial trace that the passes decomposed
 *   ("silu", now neg/exp/reciprocal in a region) matches the statements derived from it
 *   (CsStmt.origin), once per initial op: the first of them in trace order
 * @restart: search from the first match instead of after the last one
 *
 * Finds every statement at every level of the shown trace (inside fusion regions, inside
 * decompositions, inside collapsed layers) and every layer, module and chunk that matches,
 * draws all matches with a halo, and selects the next one, revealing it (its collapsed layer
 * or statement is expanded and the view scrolls to it); wraps around.  The status bar says
 * which match of how many, or that nothing matches.
 */
void
_cs_window_find_next (CsWindow *self, const char *needle, gboolean restart)
{
  find_step (self, needle, restart, FALSE);
}

/** _cs_window_find_previous: as _cs_window_find_next(), the match before the last one. */
void
_cs_window_find_previous (CsWindow *self, const char *needle)
{
  find_step (self, needle, FALSE, TRUE);
}

void
_cs_window_search_changed_cb (CsWindow *self, GtkSearchEntry *entry)
{
  _cs_window_find_next (self, gtk_editable_get_text (GTK_EDITABLE (entry)), TRUE);
}

void
_cs_window_search_activate_cb (CsWindow *self, GtkSearchEntry *entry)
{
  _cs_window_find_next (self, gtk_editable_get_text (GTK_EDITABLE (entry)), FALSE);
}

void
_cs_window_search_previous_cb (CsWindow *self, GtkSearchEntry *entry)
{
  _cs_window_find_previous (self, gtk_editable_get_text (GTK_EDITABLE (entry)));
}

/* ------------------------------------------------------------------------------------------ */
/* Open and export (GtkFileChooserNative: GTK 4.8 has no GtkFileDialog)                        */

static void
open_response_cb (GtkNativeDialog *dialog, int response, CsWindow *self)
{
  if (response == GTK_RESPONSE_ACCEPT)
    {
      g_autoptr(GFile) file = gtk_file_chooser_get_file (GTK_FILE_CHOOSER (dialog));

      if (file != NULL)
        cs_window_open_file (self, file);
    }
  g_object_unref (dialog);
}

static void
open_recent_activated (GSimpleAction *action, GVariant *param, gpointer user_data)
{
  g_autoptr(GFile) file = g_file_new_for_uri (g_variant_get_string (param, NULL));

  cs_window_open_file (CS_WINDOW (user_data), file);
}

#define CS_RECENT_MAX 10

static int
recent_compare (gconstpointer a, gconstpointer b)
{
  GtkRecentInfo *x = *(GtkRecentInfo **) a;
  GtkRecentInfo *y = *(GtkRecentInfo **) b;
  GDateTime *tx = gtk_recent_info_get_modified (x);   /* (transfer none) */
  GDateTime *ty = gtk_recent_info_get_modified (y);

  return -g_date_time_compare (tx, ty);
}

/**
 * _cs_window_update_recent:
 *
 * Refills the Open Recent menu with the newest (at most 10) files castscope opened that still
 * exist, from GtkRecentManager.
 */
void
_cs_window_update_recent (CsWindow *self)
{
  GList *items = gtk_recent_manager_get_items (gtk_recent_manager_get_default ());
  g_autoptr(GPtrArray) mine = g_ptr_array_new ();
  const char *app = g_get_application_name ();

  for (GList *l = items; l != NULL; l = l->next)
    {
      GtkRecentInfo *info = l->data;

      if (app != NULL && gtk_recent_info_has_application (info, app) && gtk_recent_info_exists (info))
        g_ptr_array_add (mine, info);
    }
  g_ptr_array_sort (mine, recent_compare);
  g_menu_remove_all (self->recent_submenu);
  for (guint i = 0; i < mine->len && i < CS_RECENT_MAX; i++)
    {
      GtkRecentInfo *info = g_ptr_array_index (mine, i);
      g_autoptr(GMenuItem) item = g_menu_item_new (gtk_recent_info_get_display_name (info), NULL);

      g_menu_item_set_action_and_target_value (item, "win.open-recent",
                                               g_variant_new_string (gtk_recent_info_get_uri (info)));
      g_menu_append_item (self->recent_submenu, item);
    }
  g_list_free_full (items, (GDestroyNotify) gtk_recent_info_unref);
}

static void
open_activated (GSimpleAction *action, GVariant *param, gpointer user_data)
{
  CsWindow *self = CS_WINDOW (user_data);
  GtkFileChooserNative *dialog;
  g_autoptr(GtkFileFilter) traces = gtk_file_filter_new ();
  g_autoptr(GtkFileFilter) all = gtk_file_filter_new ();

  dialog = gtk_file_chooser_native_new ("Open Trace", GTK_WINDOW (self),
                                        GTK_FILE_CHOOSER_ACTION_OPEN, "_Open", "_Cancel");
  gtk_file_filter_set_name (traces, "Thunder traces (*.txt, *.py)");
  gtk_file_filter_add_pattern (traces, "*.txt");
  gtk_file_filter_add_pattern (traces, "*.py");
  gtk_file_filter_add_pattern (traces, "*.trace");
  gtk_file_chooser_add_filter (GTK_FILE_CHOOSER (dialog), traces);
  gtk_file_filter_set_name (all, "All files");
  gtk_file_filter_add_pattern (all, "*");
  gtk_file_chooser_add_filter (GTK_FILE_CHOOSER (dialog), all);
  g_signal_connect (dialog, "response", G_CALLBACK (open_response_cb), self);
  gtk_native_dialog_show (GTK_NATIVE_DIALOG (dialog));
}

static void
export_response_cb (GtkNativeDialog *dialog, int response, CsWindow *self)
{
  if (response == GTK_RESPONSE_ACCEPT)
    {
      g_autoptr(GFile) file = gtk_file_chooser_get_file (GTK_FILE_CHOOSER (dialog));
      g_autofree char *path = file ? g_file_get_path (file) : NULL;
      g_autoptr(GError) error = NULL;
      CsGraphView *view = _cs_window_get_view (self, _cs_window_get_family (self));

      if (path == NULL)
        cs_window_show_error (self, "Export needs a local file");
      else if (!cs_graph_view_export (view, path, &error))
        cs_window_show_error (self, error->message);
      else
        {
          g_autofree char *msg = g_strdup_printf ("Exported %s", path);
          gtk_label_set_text (self->status_message, msg);
        }
    }
  g_object_unref (dialog);
}

static void
export_activated (GSimpleAction *action, GVariant *param, gpointer user_data)
{
  CsWindow *self = CS_WINDOW (user_data);
  GtkFileChooserNative *dialog;
  static const struct { const char *name; const char *pattern; } formats[] = {
    { "SVG image", "*.svg" }, { "PNG image", "*.png" }, { "PDF document", "*.pdf" },
  };

  dialog = gtk_file_chooser_native_new ("Export View", GTK_WINDOW (self),
                                        GTK_FILE_CHOOSER_ACTION_SAVE, "_Export", "_Cancel");
  for (gsize i = 0; i < G_N_ELEMENTS (formats); i++)
    {
      g_autoptr(GtkFileFilter) filter = gtk_file_filter_new ();

      gtk_file_filter_set_name (filter, formats[i].name);
      gtk_file_filter_add_pattern (filter, formats[i].pattern);
      gtk_file_chooser_add_filter (GTK_FILE_CHOOSER (dialog), filter);
    }
  gtk_file_chooser_set_current_name (GTK_FILE_CHOOSER (dialog),
                                     _cs_window_get_family (self) == CS_FAMILY_BACKWARD
                                     ? "backward.svg" : "forward.svg");
  g_signal_connect (dialog, "response", G_CALLBACK (export_response_cb), self);
  gtk_native_dialog_show (GTK_NATIVE_DIALOG (dialog));
}

/* ------------------------------------------------------------------------------------------ */
/* View actions                                                                                */

static CsGraphView *
visible_view (CsWindow *self)
{
  return _cs_window_get_view (self, _cs_window_get_family (self));
}

static void
find_activated (GSimpleAction *action, GVariant *param, gpointer user_data)
{
  CsWindow *self = CS_WINDOW (user_data);

  gtk_search_bar_set_search_mode (self->search_bar, TRUE);
  gtk_widget_grab_focus (GTK_WIDGET (self->search_entry));
}

static void
zoom_in_activated (GSimpleAction *action, GVariant *param, gpointer user_data)
{
  cs_graph_view_zoom_by (visible_view (CS_WINDOW (user_data)), 1.25);
}

static void
zoom_out_activated (GSimpleAction *action, GVariant *param, gpointer user_data)
{
  cs_graph_view_zoom_by (visible_view (CS_WINDOW (user_data)), 0.8);
}

static void
zoom_fit_activated (GSimpleAction *action, GVariant *param, gpointer user_data)
{
  cs_graph_view_fit (visible_view (CS_WINDOW (user_data)));
}

static void
dismiss_diff_activated (GSimpleAction *action, GVariant *param, gpointer user_data)
{
  CsWindow *self = CS_WINDOW (user_data);

  g_clear_pointer (&self->previous, cs_analysis_unref);
  gtk_info_bar_set_revealed (self->diff_bar, FALSE);
  cs_graph_view_set_diff_base (self->forward_view, NULL);
  cs_graph_view_set_diff_base (self->backward_view, NULL);
  _cs_window_update_compare (self);   /* a compare falls back to the pass before */
}

static void
run_activated (GSimpleAction *action, GVariant *param, gpointer user_data)
{
  _cs_window_run (CS_WINDOW (user_data));
}

static void
first_divergence_activated (GSimpleAction *action, GVariant *param, gpointer user_data)
{
  _cs_window_jump_to_divergence (CS_WINDOW (user_data));
}

static void
close_activated (GSimpleAction *action, GVariant *param, gpointer user_data)
{
  gtk_window_destroy (GTK_WINDOW (user_data));
}

static void
show_family_activated (GSimpleAction *action, GVariant *param, gpointer user_data)
{
  CsWindow *self = CS_WINDOW (user_data);

  gtk_stack_set_visible_child_name (self->graph_stack, g_variant_get_string (param, NULL));
}

static void
legend_changed (GSimpleAction *action, GVariant *state, gpointer user_data)
{
  CsWindow *self = CS_WINDOW (user_data);
  gboolean show = g_variant_get_boolean (state);

  g_simple_action_set_state (action, state);
  cs_graph_view_set_show_legend (self->forward_view, show);
  cs_graph_view_set_show_legend (self->backward_view, show);
  gtk_widget_set_visible (GTK_WIDGET (self->legend_area), show);
  gtk_widget_set_visible (GTK_WIDGET (self->legend_heading), show);
}

static void
fold_repeats_changed (GSimpleAction *action, GVariant *state, gpointer user_data)
{
  CsWindow *self = CS_WINDOW (user_data);
  gboolean fold = g_variant_get_boolean (state);

  g_simple_action_set_state (action, state);
  cs_graph_view_set_fold_repeats (self->forward_view, fold);
  cs_graph_view_set_fold_repeats (self->backward_view, fold);
  cs_graph_view_set_fold_repeats (self->compare_view, fold);
}

static void
precision_lens_changed (GSimpleAction *action, GVariant *state, gpointer user_data)
{
  CsWindow *self = CS_WINDOW (user_data);
  gboolean on = g_variant_get_boolean (state);

  g_simple_action_set_state (action, state);
  cs_graph_view_set_precision_lens (self->forward_view, on);
  cs_graph_view_set_precision_lens (self->backward_view, on);
  cs_graph_view_set_precision_lens (self->compare_view, on);
  gtk_widget_queue_draw (GTK_WIDGET (self->legend_area));
}

static void
compare_changed (GSimpleAction *action, GVariant *state, gpointer user_data)
{
  CsWindow *self = CS_WINDOW (user_data);

  g_simple_action_set_state (action, state);
  self->comparing = g_variant_get_boolean (state);
  _cs_window_update_compare (self);
}

static const GActionEntry win_actions[] = {
  { "compare", NULL, NULL, "false", compare_changed },
  { "legend", NULL, NULL, "true", legend_changed },
  { "fold-repeats", NULL, NULL, "true", fold_repeats_changed },
  { "precision-lens", NULL, NULL, "false", precision_lens_changed },
  { "open", open_activated, NULL, NULL, NULL },
  { "open-recent", open_recent_activated, "s", NULL, NULL },
  { "export", export_activated, NULL, NULL, NULL },
  { "find", find_activated, NULL, NULL, NULL },
  { "run", run_activated, NULL, NULL, NULL },
  { "first-divergence", first_divergence_activated, NULL, NULL, NULL },
  { "zoom-in", zoom_in_activated, NULL, NULL, NULL },
  { "zoom-out", zoom_out_activated, NULL, NULL, NULL },
  { "zoom-fit", zoom_fit_activated, NULL, NULL, NULL },
  { "dismiss-diff", dismiss_diff_activated, NULL, NULL, NULL },
  { "close", close_activated, NULL, NULL, NULL },
  { "show", show_family_activated, "s", NULL, NULL },
};

/**
 * _cs_window_init_actions:
 *
 * Adds win.open, win.open-recent(uri), win.export, win.find, win.run, win.first-divergence
 * (select the last run's first divergence), win.zoom-in, win.zoom-out, win.zoom-fit,
 * win.dismiss-diff, win.close, win.show("forward"|"backward"), the boolean win.legend (draw the
 * dtype legend on both graphs), the boolean win.fold-repeats (draw each run of layers with the
 * same structure as one node, the default), the boolean win.precision-lens (compute dtypes on edges and
 * rounding points on both graphs) and the boolean win.compare (the side-by-side compare).  Accelerators are set by
 * CsApplication.
 */
void
_cs_window_init_actions (CsWindow *self)
{
  g_action_map_add_action_entries (G_ACTION_MAP (self), win_actions, G_N_ELEMENTS (win_actions),
                                   self);
}
