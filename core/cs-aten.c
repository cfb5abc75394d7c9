/* cs-aten.c: the information a torch.compile graph keeps beside the IR (see cs-aten.h). */
#include "cs-config.h"

#include "cs-aten.h"

#include <string.h>

/**
 * cs_aten_info_new:
 * Returns: (transfer full): an empty info (role OTHER, no graph number)
 */
CsAtenInfo *
cs_aten_info_new (void)
{
  CsAtenInfo *info = g_new0 (CsAtenInfo, 1);

  info->ref_count = 1;
  info->graph_id = -1;
  info->header = g_ptr_array_new_with_free_func (g_free);
  info->class_prefix = g_strdup ("");
  info->class_name = g_strdup ("GraphModule");
  info->strides = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  info->raw_types = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  info->node_names = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  info->collections = g_hash_table_new_full (g_direct_hash, g_direct_equal, NULL, g_free);
  return info;
}

/** cs_aten_info_ref: Returns: (transfer full): @info with one more reference (atomic). */
CsAtenInfo *
cs_aten_info_ref (CsAtenInfo *info)
{
  g_return_val_if_fail (info != NULL, NULL);
  g_atomic_int_inc (&info->ref_count);
  return info;
}

/** cs_aten_info_unref: drops a reference; the last frees @info (NULL is allowed). */
void
cs_aten_info_unref (CsAtenInfo *info)
{
  if (info == NULL || !g_atomic_int_dec_and_test (&info->ref_count))
    return;
  g_ptr_array_unref (info->header);
  g_free (info->title);
  g_free (info->class_prefix);
  g_free (info->class_name);
  g_hash_table_unref (info->strides);
  g_hash_table_unref (info->raw_types);
  g_hash_table_unref (info->node_names);
  g_hash_table_unref (info->collections);
  g_free (info->def_params);
  g_free (info->flatten_line);
  g_free (info);
}

/** cs_aten_info_get_strides: see cs-aten.h. */
const int64_t *
cs_aten_info_get_strides (const CsAtenInfo *info, const char *name, guint *rank)
{
  const int64_t *s;

  g_return_val_if_fail (info != NULL && name != NULL, NULL);
  s = g_hash_table_lookup (info->strides, name);
  if (s == NULL)
    return NULL;
  if (rank)
    *rank = (guint) s[0];
  return s + 1;
}

/** cs_aten_role_name: see cs-aten.h. */
const char *
cs_aten_role_name (CsAtenRole role)
{
  switch (role)
    {
    case CS_ATEN_GRAPH_FORWARD: return "forward";
    case CS_ATEN_GRAPH_BACKWARD: return "backward";
    case CS_ATEN_GRAPH_JOINT: return "joint";
    case CS_ATEN_GRAPH_INFERENCE: return "inference";
    case CS_ATEN_GRAPH_OTHER:
    default: return "graph";
    }
}

/* torch/utils/_dtype_abbrs.py */
static const struct
{
  CsDtype     dtype; /* the dtype abbreviated */
  const char *abbr;  /* its abbreviation in aten type strings */
} abbrs[] = {
  { CS_DTYPE_BF16, "bf16" },
  { CS_DTYPE_F64, "f64" },
  { CS_DTYPE_F32, "f32" },
  { CS_DTYPE_F16, "f16" },
  { CS_DTYPE_F8_E4M3FN, "f8e4m3fn" },
  { CS_DTYPE_F8_E5M2, "f8e5m2" },
  { CS_DTYPE_F8_E4M3FNUZ, "f8e4m3fnuz" },
  { CS_DTYPE_F8_E5M2FNUZ, "f8e5m2fnuz" },
  { CS_DTYPE_F8_E8M0FNU, "f8e8m0fnu" },
  { CS_DTYPE_F4_E2M1FN_X2, "f4e2m1fnx2" },
  { CS_DTYPE_C32, "c32" },
  { CS_DTYPE_C64, "c64" },
  { CS_DTYPE_C128, "c128" },
  { CS_DTYPE_I8, "i8" },
  { CS_DTYPE_I16, "i16" },
  { CS_DTYPE_I32, "i32" },
  { CS_DTYPE_I64, "i64" },
  { CS_DTYPE_B8, "b8" },
  { CS_DTYPE_U8, "u8" },
  { CS_DTYPE_U64, "u64" },
};

/** cs_aten_dtype_abbr: see cs-aten.h. */
const char *
cs_aten_dtype_abbr (CsDtype dtype)
{
  for (gsize i = 0; i < G_N_ELEMENTS (abbrs); i++)
    if (abbrs[i].dtype == dtype)
      return abbrs[i].abbr;
  return "?";
}

/** cs_aten_dtype_from_abbr: see cs-aten.h. */
gboolean
cs_aten_dtype_from_abbr (const char *s, gsize len, CsDtype *out)
{
  for (gsize i = 0; i < G_N_ELEMENTS (abbrs); i++)
    if (strlen (abbrs[i].abbr) == len && memcmp (abbrs[i].abbr, s, len) == 0)
      {
        *out = abbrs[i].dtype;
        return TRUE;
      }
  return FALSE;
}

/** cs_trace_aten_role: see cs-aten.h. */
int
cs_trace_aten_role (const CsTrace *trace)
{
  g_return_val_if_fail (trace != NULL, -1);
  return trace->aten ? (int) trace->aten->role : -1;
}

/* The names of the proxies @trace returns (flattened). */
static GHashTable *
returned_names (const CsTrace *trace)
{
  GHashTable *h = g_hash_table_new (g_str_hash, g_str_equal);
  CsStmt *ret = cs_trace_get_return (trace);
  g_autoptr(GPtrArray) ps = g_ptr_array_new ();

  if (ret && ret->value)
    cs_value_collect_proxies (ret->value, ps);
  for (guint i = 0; i < ps->len; i++)
    g_hash_table_add (h, (gpointer) ((CsProxy *) ps->pdata[i])->name);
  return h;
}

/* TRUE when every input of @bw except the tangents is returned by the forward. */
static gboolean
inputs_saved_by (const CsTrace *bw, GHashTable *fw_returns)
{
  guint n = 0;

  for (guint i = 0; i < bw->n_params; i++)
    {
      const char *p = bw->params[i].name;

      if (p == NULL || g_str_has_prefix (p, "tangents_"))
        continue;
      if (!g_hash_table_contains (fw_returns, p))
        return FALSE;
      n++;
    }
  return n > 0;
}

/** cs_aten_find_backward: see cs-aten.h. */
CsTrace *
cs_aten_find_backward (const CsTraceList *list, guint index)
{
  const CsTrace *fw;
  g_autoptr(GHashTable) rets = NULL;

  g_return_val_if_fail (list != NULL, NULL);
  if (index >= list->traces->len)
    return NULL;
  fw = g_ptr_array_index (list->traces, index);
  if (cs_trace_aten_role (fw) != CS_ATEN_GRAPH_FORWARD)
    return NULL;
  for (guint i = index + 1; i < list->traces->len; i++)
    {
      CsTrace *t = g_ptr_array_index (list->traces, i);

      if (cs_trace_aten_role (t) == CS_ATEN_GRAPH_FORWARD)
        break;   /* the next graph's pair starts */
      if (cs_trace_aten_role (t) == CS_ATEN_GRAPH_BACKWARD && fw->aten->graph_id >= 0
          && t->aten->graph_id == fw->aten->graph_id)
        return t;
    }
  rets = returned_names (fw);
  for (guint i = index + 1; i < list->traces->len; i++)
    {
      CsTrace *t = g_ptr_array_index (list->traces, i);

      if (cs_trace_aten_role (t) == CS_ATEN_GRAPH_BACKWARD && inputs_saved_by (t, rets))
        return t;
    }
  return NULL;
}

/** cs_aten_n_saved: see cs-aten.h. */
guint
cs_aten_n_saved (const CsTrace *forward, const CsTrace *backward)
{
  g_autoptr(GHashTable) rets = NULL;
  guint n = 0;

  g_return_val_if_fail (forward != NULL && backward != NULL, 0);
  rets = returned_names (forward);
  for (guint i = 0; i < backward->n_params; i++)
    if (backward->params[i].name && g_hash_table_contains (rets, backward->params[i].name))
      n++;
  return n;
}
