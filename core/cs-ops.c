/* cs-ops.c: the op table (identity of every symbol castscope knows; see cs-ops.h). */
#include "cs-config.h"

#include "cs-ops.h"

#include <string.h>

#define CS_OP_TABLE_ROW(id_, name_, cat_, tags_, promo_, alias_) \
  { CS_OP_##id_, name_, NULL, CS_OP_CAT_##cat_, (tags_), CS_PROMO_##promo_, CS_OP_##alias_ },

static CsOp op_table[CS_N_OPS] = {
  CS_OP_TABLE (CS_OP_TABLE_ROW)
};
#undef CS_OP_TABLE_ROW

static GHashTable *op_by_name;   /* printed name -> CsOp*, built once */

static gpointer
build_index (gpointer data)
{
  GHashTable *h = g_hash_table_new (g_str_hash, g_str_equal);

  for (guint i = 0; i < CS_N_OPS; i++)
    {
      const char *dot = strrchr (op_table[i].name, '.');
      /* cs_op_semantic() (inline) relies on the table being indexed by id */
      g_assert (op_table[i].id == (CsOpId) i);
      op_table[i].short_name = dot ? dot + 1 : op_table[i].name;
      if (op_table[i].name[0] != '\0' && i != CS_OP_FUSION)
        g_hash_table_insert (h, (gpointer) op_table[i].name, &op_table[i]);
    }
  op_by_name = h;
  return h;
}

static void
ensure_index (void)
{
  static GOnce once = G_ONCE_INIT;
  g_once (&once, build_index, NULL);
}

/* "nvFusion12", "TorchCompile0", "CUDAGraph3": a prefix followed by decimal digits only. */
static gboolean
is_fusion_name (const char *callee)
{
  static const char * const prefixes[] = { "nvFusion", "TorchCompile", "CUDAGraph" };

  for (gsize i = 0; i < G_N_ELEMENTS (prefixes); i++)
    {
      gsize n = strlen (prefixes[i]);
      if (strncmp (callee, prefixes[i], n) == 0 && callee[n] != '\0')
        {
          const char *p = callee + n;
          while (*p >= '0' && *p <= '9')
            p++;
          if (*p == '\0')
            return TRUE;
        }
    }
  return FALSE;
}

/**
 * cs_op_lookup:
 * @callee: the callee as printed
 *
 * See cs-ops.h.  Thread-safe.
 * Returns: (transfer none): never NULL
 */
const CsOp *
cs_op_lookup (const char *callee)
{
  const CsOp *op;

  g_return_val_if_fail (callee != NULL, &op_table[CS_OP_OPAQUE]);
  ensure_index ();
  op = g_hash_table_lookup (op_by_name, callee);
  if (op != NULL)
    return op;
  if (is_fusion_name (callee))
    return &op_table[CS_OP_FUSION];
  return &op_table[CS_OP_OPAQUE];
}

/** cs_op_get: the entry for @id.  Returns: (transfer none) */
const CsOp *
cs_op_get (CsOpId id)
{
  g_return_val_if_fail (id < CS_N_OPS, &op_table[CS_OP_OPAQUE]);
  ensure_index ();
  return &op_table[id];
}

/** cs_op_category_name: "elementwise", "reduction", ... (static). */
const char *
cs_op_category_name (CsOpCategory cat)
{
  static const char * const names[CS_N_OP_CATS] = {
    [CS_OP_CAT_ELEMENTWISE] = "elementwise",
    [CS_OP_CAT_REDUCTION] = "reduction",
    [CS_OP_CAT_SHAPE] = "shape",
    [CS_OP_CAT_CAST] = "cast",
    [CS_OP_CAT_MATMUL] = "matmul",
    [CS_OP_CAT_FUSION] = "fusion",
    [CS_OP_CAT_BOOKKEEPING] = "bookkeeping",
    [CS_OP_CAT_CREATION] = "creation",
    [CS_OP_CAT_INDEXING] = "indexing",
    [CS_OP_CAT_COMPOSITE] = "composite",
    [CS_OP_CAT_ATTENTION] = "attention",
    [CS_OP_CAT_OPAQUE] = "opaque",
  };
  g_return_val_if_fail (cat < CS_N_OP_CATS, "?");
  return names[cat];
}

/** cs_op_has_tag: %TRUE if @op carries @tag. */
gboolean
cs_op_has_tag (const CsOp *op, CsOpTag tag)
{
  return op != NULL && (op->tags & tag) != 0;
}

/** cs_op_is_fusion: %TRUE for nvFusionK / TorchCompileK / CUDAGraphK calls. */
gboolean
cs_op_is_fusion (const CsOp *op)
{
  return op != NULL && op->id == CS_OP_FUSION;
}
