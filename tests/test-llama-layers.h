/* test-llama-layers.h: a deeper LLaMA stack made from the shared 8-block one, for
 * test-kernels-codegen.c (identical layers share kernels) and bench-compile.c (compile time of a
 * 32-layer step).
 *
 * ../shared/traces/thunder_llama_stack_initial.txt is Thunder's initial trace of an 8-block
 * model.  Every block opens with two RMSNorms whose first source comment is `# models.py:84:`
 * (attention_norm, ffn_norm) and the final norm after the last block opens with the same
 * comment, so block b spans the lines from the (2b)-th such comment to the (2b+2)-th.  The last
 * block reads one value made before it (the residual stream) and the tail reads one value it
 * makes; a copy of it for layer k renames its own t<N> names to t<k*100000+N>, its input to the
 * previous block's output and its parameters t_layers_7_* to t_layers_k_*, and the tail then
 * reads the last copy's output.  The signature and the parameter comments gain the new layers'
 * weights after layer 7's.
 */
#pragma once

#include <glib.h>
#include <stdlib.h>
#include <string.h>

typedef struct
{
  gint64 lo, hi;       /* t<N> numbers the block defines: [lo, hi] */
  gint64 incoming;     /* the t<N> it reads from before it */
  gint64 outgoing;     /* the t<N> of it the tail reads */
  guint  layer;        /* the copy being written */
  guint  last_layer;   /* the tail: the layer whose output it reads */
  gboolean tail;       /* renaming the tail, not a block */
} LlamaRename;

static gboolean
llama_rename_cb (const GMatchInfo *mi, GString *res, gpointer data)
{
  const LlamaRename *r = data;
  g_autofree char *num = g_match_info_fetch (mi, 1);
  gint64 n = g_ascii_strtoll (num, NULL, 10);

  if (r->tail)
    {
      if (n == r->outgoing && r->last_layer > 7)
        n = (gint64) r->last_layer * 100000 + r->outgoing;
    }
  else if (n >= r->lo && n <= r->hi)
    n = (gint64) r->layer * 100000 + n;
  else if (n == r->incoming)
    n = r->layer == 8 ? r->outgoing : (gint64) (r->layer - 1) * 100000 + r->outgoing;
  g_string_append_printf (res, "t%" G_GINT64_FORMAT, n);
  return FALSE;
}

/* The t<N> numbers in lines [a, b) of @lines into @set (as keys). */
static void
llama_numbers (char **lines, guint a, guint b, GHashTable *set, gint64 *max)
{
  g_autoptr(GRegex) re = g_regex_new ("\\bt([0-9]+)\\b", 0, 0, NULL);

  for (guint i = a; i < b; i++)
    {
      g_autoptr(GMatchInfo) mi = NULL;

      g_regex_match (re, lines[i], 0, &mi);
      while (g_match_info_matches (mi))
        {
          g_autofree char *num = g_match_info_fetch (mi, 1);
          gint64 n = g_ascii_strtoll (num, NULL, 10);

          g_hash_table_add (set, GINT_TO_POINTER ((gint) n));
          if (max && n > *max)
            *max = n;
          g_match_info_next (mi, NULL);
        }
    }
}

/**
 * llama_stack_layers:
 * @text: the 8-block initial trace (thunder_llama_stack_initial.txt)
 * @n_layers: layers of the result, >= 8
 *
 * Returns: (transfer full): the trace text of an @n_layers-block model, or NULL when @text does
 * not have the layout described above.
 */
static char *
llama_stack_layers (const char *text, guint n_layers)
{
  g_auto(GStrv) lines = g_strsplit (text, "\n", -1);
  guint n = g_strv_length (lines);
  guint occ[32], n_occ = 0;
  g_autoptr(GHashTable) pre = g_hash_table_new (NULL, NULL);
  g_autoptr(GHashTable) blk = g_hash_table_new (NULL, NULL);
  g_autoptr(GHashTable) tail = g_hash_table_new (NULL, NULL);
  g_autoptr(GRegex) tnum = g_regex_new ("\\bt([0-9]+)\\b", 0, 0, NULL);
  g_autoptr(GRegex) l7 = g_regex_new ("\\bt_layers_7_", 0, 0, NULL);
  LlamaRename r = { 0 };
  gint64 pre_max = -1;
  GString *out;
  GHashTableIter it;
  gpointer k;
  guint n_in = 0, n_out = 0;

  if (n_layers < 8)
    return NULL;
  for (guint i = 0; i < n && n_occ < G_N_ELEMENTS (occ); i++)
    if (g_str_has_prefix (lines[i], "  # models.py:84:"))
      occ[n_occ++] = i;
  if (n_occ != 17)
    return NULL;
  llama_numbers (lines, 0, occ[14], pre, &pre_max);
  llama_numbers (lines, occ[14], occ[16], blk, NULL);
  llama_numbers (lines, occ[16], n, tail, NULL);
  r.lo = G_MAXINT64;
  r.hi = -1;
  g_hash_table_iter_init (&it, blk);
  while (g_hash_table_iter_next (&it, &k, NULL))
    {
      gint64 v = GPOINTER_TO_INT (k);

      if (v <= pre_max)
        {
          if (!g_hash_table_contains (pre, k))
            return NULL;
          r.incoming = v;
          n_in++;
        }
      else
        {
          r.lo = MIN (r.lo, v);
          r.hi = MAX (r.hi, v);
          if (g_hash_table_contains (tail, k))
            {
              r.outgoing = v;
              n_out++;
            }
        }
    }
  if (n_in != 1 || n_out != 1 || r.hi >= 100000)
    return NULL;

  out = g_string_new (NULL);
  for (guint i = 0; i < occ[16]; i++)
    {
      const char *l = lines[i];

      if (g_str_has_prefix (l, "def computation("))
        {
          const char *at = strstr (l, "t_layers_7_ffn_norm_weight, ");

          if (at == NULL)
            {
              g_string_free (out, TRUE);
              return NULL;
            }
          at += strlen ("t_layers_7_ffn_norm_weight, ");
          g_string_append_len (out, l, at - l);
          for (guint layer = 8; layer < n_layers; layer++)
            {
              /* the parameters of layer 7, renamed */
              const char *p = strstr (l, "t_layers_7_");

              while (p && p < at)
                {
                  const char *e = strstr (p, ", ");

                  g_string_append_printf (out, "t_layers_%u_%.*s, ", layer, (int) (e - p) - 11, p + 11);
                  p = strstr (e, "t_layers_7_");
                }
            }
          g_string_append (out, at);
          g_string_append_c (out, '\n');
          continue;
        }
      g_string_append (out, l);
      g_string_append_c (out, '\n');
      if (g_str_has_prefix (l, "  # t_layers_7_ffn_norm_weight:"))
        {
          guint first = i;

          while (first > 0 && g_str_has_prefix (lines[first - 1], "  # t_layers_7_"))
            first--;
          for (guint layer = 8; layer < n_layers; layer++)
            for (guint j = first; j <= i; j++)
              g_string_append_printf (out, "  # t_layers_%u_%s\n", layer, lines[j] + strlen ("  # t_layers_7_"));
        }
    }
  for (guint layer = 8; layer < n_layers; layer++)
    {
      g_autofree char *lrep = g_strdup_printf ("t_layers_%u_", layer);

      r.layer = layer;
      r.tail = FALSE;
      for (guint i = occ[14]; i < occ[16]; i++)
        {
          g_autofree char *a = g_regex_replace_eval (tnum, lines[i], -1, 0, 0, llama_rename_cb, &r, NULL);
          g_autofree char *b = g_regex_replace_literal (l7, a, -1, 0, lrep, 0, NULL);

          g_string_append (out, b);
          g_string_append_c (out, '\n');
        }
    }
  r.tail = TRUE;
  r.last_layer = n_layers - 1;
  for (guint i = occ[16]; i < n; i++)
    {
      g_autofree char *a = g_regex_replace_eval (tnum, lines[i], -1, 0, 0, llama_rename_cb, &r, NULL);

      g_string_append (out, a);
      if (i + 1 < n)
        g_string_append_c (out, '\n');
    }
  return g_string_free (out, FALSE);
}
