/* cs-group.c: layers, modules and chunks of a trace (see cs-group.h for the rules). */
#include "cs-config.h"

#include "cs-group.h"

#include <math.h>
#include <string.h>

#include "cs-ops.h"
#include "cs-stats.h"

#define NONE (-1)   /* no scope yet */
#define TOP  (-2)   /* anchored at the top level (a parameter without a layer index) */

typedef struct
{
  const CsTrace *trace;      /* the trace grouped */
  guint          n;          /* trace->n_stmts */
  gboolean      *member;     /* per index: a CALL that can belong to a group */
  const char   **srcloc;     /* per index: "models.py:147" of the last source comment, or NULL */
  GHashTable    *readers;    /* CsProxy* -> GArray of guint (indices reading it; n = return) */
  GHashTable    *written;    /* CsProxy* written by some CALL */
  GPtrArray     *ins;        /* per index: GPtrArray of CsProxy* read (NULL for non-members) */
  GPtrArray     *outs;       /* per index: GPtrArray of CsProxy* written */
  gboolean      *fwd;        /* scratch: statement feeds only the later anchor */
} Ctx;

/* ---------------------------------------------------------------------------------------- */
/* parameter names                                                                           */

static gboolean
all_digits (const char *s)
{
  if (*s == '\0')
    return FALSE;
  for (; *s; s++)
    if (!g_ascii_isdigit (*s))
      return FALSE;
  return TRUE;
}

/* `t_layers_0_attention_wq_weight`: *layer = "layers.0", *leaf = "attention_wq" (TRUE).
 * `t_norm_weight`: *layer = NULL (TRUE: a top-level parameter).  Anything else: FALSE. */
static gboolean
parse_param (const char *name, char **layer, char **leaf)
{
  g_auto(GStrv) tok = NULL;
  guint n, k, end;

  *layer = *leaf = NULL;
  if (name == NULL || !g_str_has_prefix (name, "t_") || name[2] == '\0')
    return FALSE;
  tok = g_strsplit (name + 2, "_", -1);
  n = g_strv_length (tok);
  end = n;
  if (end > 1 && (strcmp (tok[end - 1], "weight") == 0 || strcmp (tok[end - 1], "bias") == 0))
    end--;
  for (k = 1; k < end; k++)
    if (all_digits (tok[k]) && tok[k - 1][0] != '\0' && !all_digits (tok[k - 1]))
      break;
  if (k >= end)
    return TRUE;       /* no layer index (or nothing after it): a top-level parameter */
  {
    GString *l = g_string_new (NULL);
    GString *f = g_string_new (NULL);

    for (guint i = 0; i <= k; i++)
      g_string_append_printf (l, "%s%s", i ? "." : "", tok[i]);
    for (guint i = k + 1; i < end; i++)
      g_string_append_printf (f, "%s%s", f->len ? "_" : "", tok[i]);
    *layer = g_string_free (l, FALSE);
    *leaf = g_string_free (f, FALSE);
  }
  return TRUE;
}

/* "models.py:147: \tx = x + ..." -> "models.py:147" (in @trace's arena-lifetime text: a copy
 * kept in @keys). */
static const char *
srcloc_key (GHashTable *keys, const char *text)
{
  const char *c1 = text ? strchr (text, ':') : NULL;
  const char *c2 = c1 ? strchr (c1 + 1, ':') : NULL;
  g_autofree char *k = NULL;
  const char *found;

  if (c2 == NULL)
    return NULL;
  k = g_strndup (text, c2 - text);
  found = g_hash_table_lookup (keys, k);
  if (found == NULL)
    {
      found = g_strdup (k);
      g_hash_table_add (keys, (gpointer) found);
    }
  return found;
}

/* ---------------------------------------------------------------------------------------- */
/* context                                                                                   */

static gboolean
is_member (const CsStmt *s)
{
  return s->kind == CS_STMT_CALL && s->op->category != CS_OP_CAT_BOOKKEEPING
         && cs_op_semantic (s->op)->category != CS_OP_CAT_BOOKKEEPING;
}

static void
ctx_init (Ctx *c, const CsTrace *trace, GHashTable *keys)
{
  const char *loc = NULL;

  memset (c, 0, sizeof *c);
  c->trace = trace;
  c->n = trace->n_stmts;
  c->member = g_new0 (gboolean, c->n + 1);
  c->srcloc = g_new0 (const char *, c->n + 1);
  c->fwd = g_new0 (gboolean, c->n + 1);
  c->readers = g_hash_table_new_full (NULL, NULL, NULL, (GDestroyNotify) g_array_unref);
  c->written = g_hash_table_new (NULL, NULL);
  c->ins = g_ptr_array_new_full (c->n, (GDestroyNotify) g_ptr_array_unref);
  c->outs = g_ptr_array_new_full (c->n, (GDestroyNotify) g_ptr_array_unref);
  for (guint i = 0; i < c->n; i++)
    {
      const CsStmt *s = trace->stmts[i];
      GPtrArray *ins = NULL, *outs = NULL;

      if (s->kind == CS_STMT_COMMENT && s->comment_kind == CS_COMMENT_SRCLOC)
        loc = srcloc_key (keys, s->text);
      c->srcloc[i] = loc;
      if (is_member (s) || s->kind == CS_STMT_RETURN)
        {
          ins = g_ptr_array_new ();
          cs_stmt_collect_inputs (s, ins);
          if (s->kind == CS_STMT_RETURN && s->value != NULL)
            {
              /* the return value's proxies read by "the outside" */
              GPtrArray *stack = g_ptr_array_new ();
              g_ptr_array_add (stack, s->value);
              while (stack->len > 0)
                {
                  const CsValue *v = g_ptr_array_steal_index (stack, stack->len - 1);
                  if (v->kind == CS_VALUE_PROXY)
                    g_ptr_array_add (ins, v->u.proxy);
                  else if (v->kind == CS_VALUE_TUPLE || v->kind == CS_VALUE_LIST
                           || v->kind == CS_VALUE_DICT)
                    for (guint k = 0; k < v->u.seq.n; k++)
                      g_ptr_array_add (stack, v->u.seq.items[k]);
                }
              g_ptr_array_unref (stack);
            }
        }
      if (is_member (s))
        {
          c->member[i] = TRUE;
          outs = g_ptr_array_new ();
          cs_stmt_collect_outputs (s, outs);
          for (guint k = 0; k < outs->len; k++)
            g_hash_table_add (c->written, g_ptr_array_index (outs, k));
        }
      for (guint k = 0; ins != NULL && k < ins->len; k++)
        {
          CsProxy *p = g_ptr_array_index (ins, k);
          GArray *r = g_hash_table_lookup (c->readers, p);
          guint who = s->kind == CS_STMT_RETURN ? c->n : i;

          if (r == NULL)
            {
              r = g_array_new (FALSE, FALSE, sizeof (guint));
              g_hash_table_insert (c->readers, p, r);
            }
          if (r->len == 0 || g_array_index (r, guint, r->len - 1) != who)
            g_array_append_val (r, who);
        }
      if (ins != NULL && s->kind == CS_STMT_RETURN)
        g_clear_pointer (&ins, g_ptr_array_unref);
      g_ptr_array_add (c->ins, ins ? ins : g_ptr_array_new ());
      g_ptr_array_add (c->outs, outs ? outs : g_ptr_array_new ());
    }
}

static void
ctx_clear (Ctx *c)
{
  g_free (c->member);
  g_free (c->srcloc);
  g_free (c->fwd);
  g_hash_table_unref (c->readers);
  g_hash_table_unref (c->written);
  g_ptr_array_unref (c->ins);
  g_ptr_array_unref (c->outs);
}

/* The first parameter @i reads: its layer (NULL: top level) and leaf; FALSE when it reads
 * none. */
static gboolean
stmt_param (Ctx *c, guint i, char **layer, char **leaf)
{
  GPtrArray *ins = g_ptr_array_index (c->ins, i);
  gboolean top = FALSE;

  *layer = *leaf = NULL;
  for (guint k = 0; k < ins->len; k++)
    {
      const CsProxy *p = g_ptr_array_index (ins, k);
      char *l, *f;

      if (g_hash_table_contains (c->written, p) || !parse_param (p->name, &l, &f))
        continue;
      if (l != NULL)
        {
          *layer = l;
          *leaf = f;
          return TRUE;
        }
      top = TRUE;
    }
  return top;
}

/* Marks c->fwd for the statements at pos[lo..hi) (indices into @order) that feed only the
 * statement @anchor or other marked ones, walking back from hi - 1; stops at the first that
 * does not when @contiguous.  Returns how many were marked. */
static guint
mark_forward (Ctx *c, const guint *order, guint lo, guint hi, guint anchor, gboolean contiguous)
{
  guint n = 0;

  for (guint k = lo; k < hi; k++)
    c->fwd[order[k]] = FALSE;
  for (guint k = hi; k-- > lo;)
    {
      guint i = order[k];
      GPtrArray *outs = g_ptr_array_index (c->outs, i);
      gboolean ok = outs->len > 0, any = FALSE;

      for (guint o = 0; ok && o < outs->len; o++)
        {
          GArray *r = g_hash_table_lookup (c->readers, g_ptr_array_index (outs, o));

          for (guint j = 0; r != NULL && ok && j < r->len; j++)
            {
              guint who = g_array_index (r, guint, j);

              if (who == i)
                continue;
              any = TRUE;
              if (who != anchor && (who >= c->n || !c->fwd[who]))
                ok = FALSE;
            }
        }
      c->fwd[i] = ok && any;
      if (c->fwd[i])
        n++;
      else if (contiguous)
        break;
    }
  return n;
}

/* Fills the NONE entries of scope[order[k]] (k < n_order) from the anchors around them (see
 * the file comment of cs-group.h).  @opening / @closing collect (or, when @learn is FALSE,
 * supply) the source lines that open and close a scope.  @ends_join: statements before the
 * first anchor join it and statements after the last anchor join that (module level). */
static void
fill_gaps (Ctx *c, gint *scope, const guint *order, guint n_order, GHashTable *opening,
           GHashTable *closing, gboolean ends_join)
{
  g_autoptr(GArray) anchors = g_array_new (FALSE, FALSE, sizeof (guint));   /* positions */

  for (guint k = 0; k < n_order; k++)
    if (scope[order[k]] != NONE)
      g_array_append_val (anchors, k);
  if (anchors->len == 0)
    return;

  /* 1. gaps between two anchors */
  for (guint a = 0; a + 1 < anchors->len; a++)
    {
      guint pa = g_array_index (anchors, guint, a), pb = g_array_index (anchors, guint, a + 1);
      gint sa = scope[order[pa]], sb = scope[order[pb]];

      if (pb == pa + 1)
        continue;
      if (sa == sb)
        {
          for (guint k = pa + 1; k < pb; k++)
            scope[order[k]] = sa;
        }
      else if (sa >= 0 && sb >= 0)
        {
          mark_forward (c, order, pa + 1, pb, order[pb], FALSE);
          for (guint k = pa + 1; k < pb; k++)
            {
              guint i = order[k];

              scope[i] = c->fwd[i] ? sb : sa;
              if (c->srcloc[i] != NULL)
                g_hash_table_add (c->fwd[i] ? opening : closing, (gpointer) c->srcloc[i]);
            }
        }
    }
  /* 2. gaps next to the top level or the ends: a layer's own closing / opening lines */
  for (guint a = 0; a <= anchors->len; a++)
    {
      gint pa = a > 0 ? (gint) g_array_index (anchors, guint, a - 1) : -1;
      gint pb = a < anchors->len ? (gint) g_array_index (anchors, guint, a) : (gint) n_order;
      gint sa = pa >= 0 ? scope[order[pa]] : NONE;
      gint sb = pb < (gint) n_order ? scope[order[pb]] : NONE;

      if (pb <= pa + 1 || (sa >= 0 && sb >= 0))
        continue;
      if (ends_join && (sa == NONE || sb == NONE))
        {
          gint s = sa == NONE ? sb : sa;
          for (gint k = pa + 1; k < pb; k++)
            scope[order[k]] = s;
          continue;
        }
      if (sb >= 0)
        {
          /* the head of a layer after the top level: what feeds only its first anchor */
          mark_forward (c, order, (guint) (pa + 1), (guint) pb, order[pb], TRUE);
          for (gint k = pb - 1; k > pa && c->fwd[order[k]]; k--)
            scope[order[k]] = sb;
        }
      if (sa >= 0)
        {
          /* the tail of a layer before the top level: the lines that close other layers */
          for (gint k = pa + 1; k < pb; k++)
            {
              const char *loc = c->srcloc[order[k]];

              if (scope[order[k]] != NONE || loc == NULL || !g_hash_table_contains (closing, loc)
                  || g_hash_table_contains (opening, loc))
                break;
              scope[order[k]] = sa;
            }
        }
    }
}

/* ---------------------------------------------------------------------------------------- */
/* modules                                                                                   */

/* Longest '_'-component prefix @leaf shares with another entry of @leaves, trailing
 * one-letter components dropped; @leaf itself when it shares none. */
static char *
module_of_leaf (const char *leaf, GPtrArray *leaves)
{
  g_auto(GStrv) a = g_strsplit (leaf, "_", -1);
  guint na = g_strv_length (a), best = 0;
  GString *out;

  for (guint i = 0; i < leaves->len; i++)
    {
      const char *other = g_ptr_array_index (leaves, i);
      g_auto(GStrv) b = NULL;
      guint k = 0, nb;

      if (strcmp (other, leaf) == 0)
        continue;
      b = g_strsplit (other, "_", -1);
      nb = g_strv_length (b);
      while (k < na && k < nb && strcmp (a[k], b[k]) == 0)
        k++;
      best = MAX (best, k);
    }
  if (best == 0)
    best = na;
  while (best > 1 && strlen (a[best - 1]) == 1)
    best--;
  out = g_string_new (NULL);
  for (guint k = 0; k < best; k++)
    g_string_append_printf (out, "%s%s", k ? "_" : "", a[k]);
  return g_string_free (out, FALSE);
}

/* ---------------------------------------------------------------------------------------- */
/* summaries and signatures                                                                  */

static guint64
proxy_bytes (const CsProxy *p)
{
  if (p == NULL || p->kind != CS_PROXY_TENSOR || !p->typed)
    return 0;
  for (guint i = 0; i < p->rank; i++)
    if (p->shape[i] < 0)
      return 0;
  if (p->dtype == CS_DTYPE_F4_E2M1FN_X2)
    return (guint64) cs_shape_numel (p->shape, p->rank);
  return (guint64) cs_shape_numel (p->shape, p->rank) * cs_dtype_size_bytes (p->dtype);
}

static gboolean
low_precision_matmul (const CsStmt *s)
{
  g_autoptr(GPtrArray) ins = g_ptr_array_new ();
  gboolean any = FALSE;

  cs_stmt_collect_inputs (s, ins);
  for (guint i = 0; i < ins->len; i++)
    {
      const CsProxy *p = g_ptr_array_index (ins, i);

      if (p->kind != CS_PROXY_TENSOR || !cs_dtype_is_float (p->dtype))
        continue;
      if (p->dtype == CS_DTYPE_F32 || p->dtype == CS_DTYPE_F64)
        return FALSE;
      any = TRUE;
    }
  return any;
}

/* Adds the leaves of @s to @sum; returns the FLOPs of tensor-core matmuls among them. */
static double
summarise_leaves (const CsStmt *s, CsGroupSummary *sum)
{
  double tc = 0;

  if (s->n_subs > 0)
    {
      for (guint i = 0; i < s->n_subs; i++)
        tc += summarise_leaves (s->subs[i], sum);
      return tc;
    }
  if (s->kind != CS_STMT_CALL)
    return 0;
  sum->flops += cs_stats_stmt_flops (s);
  if (s->op->category == CS_OP_CAT_CAST)
    {
      g_autoptr(GPtrArray) ins = g_ptr_array_new ();
      const CsProxy *out = cs_stmt_get_output (s);

      cs_stmt_collect_inputs (s, ins);
      if (out != NULL && out->kind == CS_PROXY_TENSOR)
        {
          sum->n_casts++;
          if (ins->len > 0)
            {
              const CsProxy *in = g_ptr_array_index (ins, 0);

              if (in->kind == CS_PROXY_TENSOR && cs_dtype_is_float (in->dtype)
                  && cs_dtype_is_float (out->dtype))
                {
                  gsize a = cs_dtype_size_bytes (in->dtype), b = cs_dtype_size_bytes (out->dtype);
                  if (b > a)
                    sum->n_upcasts++;
                  else if (b < a)
                    sum->n_downcasts++;
                }
            }
        }
    }
  else if (s->op->category == CS_OP_CAT_MATMUL)
    {
      sum->n_matmuls++;
      if (low_precision_matmul (s))
        {
          sum->n_tensor_core_matmuls++;
          tc = cs_stats_stmt_flops (s);
        }
    }
  return tc;
}

static void
summarise_stmt (Ctx *c, guint i, CsGroupSummary *sum)
{
  CsGroupSummary one = { 0 };
  GPtrArray *ins = g_ptr_array_index (c->ins, i);
  GPtrArray *outs = g_ptr_array_index (c->outs, i);
  double tc_flops, read = 0, written = 0, compute_s, memory_s;

  tc_flops = summarise_leaves (c->trace->stmts[i], &one);
  for (guint k = 0; k < ins->len; k++)
    read += proxy_bytes (g_ptr_array_index (ins, k));
  for (guint k = 0; k < outs->len; k++)
    written += proxy_bytes (g_ptr_array_index (outs, k));
  compute_s = tc_flops / CS_STATS_TC_FLOPS_PER_S
              + (one.flops - tc_flops) / CS_STATS_F32_FLOPS_PER_S;
  memory_s = (read + written) / CS_STATS_HBM_BYTES_PER_S;
  sum->n_casts += one.n_casts;
  sum->n_upcasts += one.n_upcasts;
  sum->n_downcasts += one.n_downcasts;
  sum->n_matmuls += one.n_matmuls;
  sum->n_tensor_core_matmuls += one.n_tensor_core_matmuls;
  sum->flops += one.flops;
  sum->bytes += (guint64) written;
  sum->est_ms += MAX (compute_s, memory_s) * 1e3;
}

static guint64
hash_str (guint64 h, const char *s)
{
  for (; s && *s; s++)
    h = (h ^ (guchar) *s) * 1099511628211ull;
  return (h ^ 0xff) * 1099511628211ull;
}

/* Op structure of a statement: the semantic op, a fusion region by its prims. */
static guint64
hash_stmt (guint64 h, const CsStmt *s)
{
  if (cs_op_is_fusion (s->op))
    {
      h = hash_str (h, "fusion(");
      for (guint i = 0; i < s->n_subs; i++)
        if (s->subs[i]->kind == CS_STMT_CALL)
          h = hash_str (h, cs_op_semantic (s->subs[i]->op)->name);
      return hash_str (h, ")");
    }
  return hash_str (h, s->op->id == CS_OP_OPAQUE ? s->callee : cs_op_semantic (s->op)->name);
}

/* ---------------------------------------------------------------------------------------- */
/* building                                                                                  */

static gint
add_group (GArray *groups, CsGroupKind kind, char *name, char *label, gint parent)
{
  CsGroup g = { 0 };

  g.kind = kind;
  g.name = name;
  g.label = label;
  g.parent = parent;
  g.repeat_of = -1;
  g.n_same = 1;
  g.first = G_MAXUINT;
  g_array_append_val (groups, g);
  return (gint) groups->len - 1;
}

/**
 * cs_grouping_new:
 * @trace: (transfer none): any trace (initial, joint, fused, final, forward or backward)
 *
 * Finds the layers, their modules (or, for a trace without layer parameters of more than
 * CS_GROUP_CHUNK_MIN top-level calls, chunks of consecutive statements) by the rules of
 * cs-group.h, with a summary of each group and the repeats among the layers.  Linear in the
 * size of the trace (one pass to list what each statement reads and writes, one per level).
 * A trace without layers or chunks gives a grouping with no groups.
 * Returns: (transfer full): the grouping; free with cs_grouping_free()
 */
CsGrouping *
cs_grouping_new (const CsTrace *trace)
{
  g_autoptr(GHashTable) keys = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  g_autoptr(GHashTable) layer_index = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  g_autoptr(GHashTable) opening = g_hash_table_new (NULL, NULL);
  g_autoptr(GHashTable) closing = g_hash_table_new (NULL, NULL);
  g_autoptr(GPtrArray) layer_names = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(GPtrArray) layer_leaves = g_ptr_array_new_with_free_func ((GDestroyNotify) g_ptr_array_unref);
  g_autoptr(GArray) order = g_array_new (FALSE, FALSE, sizeof (guint));
  g_autoptr(GArray) groups = g_array_new (FALSE, TRUE, sizeof (CsGroup));
  CsGrouping *gr;
  gint *layer, *module;
  char **leaf;
  gint *layer_group;
  Ctx c;

  g_return_val_if_fail (trace != NULL, NULL);
  ctx_init (&c, trace, keys);
  gr = g_new0 (CsGrouping, 1);
  gr->ref_count = 1;
  gr->trace = trace;
  gr->stmt_group = g_new (gint, c.n + 1);
  for (guint i = 0; i < c.n; i++)
    gr->stmt_group[i] = -1;
  layer = g_new (gint, c.n + 1);
  module = g_new (gint, c.n + 1);
  leaf = g_new0 (char *, c.n + 1);

  /* anchors */
  for (guint i = 0; i < c.n; i++)
    {
      char *l = NULL, *f = NULL;

      layer[i] = NONE;
      module[i] = NONE;
      if (!c.member[i])
        continue;
      g_array_append_val (order, i);
      if (!stmt_param (&c, i, &l, &f))
        continue;
      if (l == NULL)
        {
          layer[i] = TOP;
          continue;
        }
      {
        gpointer v;

        if (!g_hash_table_lookup_extended (layer_index, l, NULL, &v))
          {
            v = GINT_TO_POINTER (layer_names->len);
            g_hash_table_insert (layer_index, g_strdup (l), v);
            g_ptr_array_add (layer_names, g_strdup (l));
            g_ptr_array_add (layer_leaves, g_ptr_array_new_with_free_func (g_free));
          }
        layer[i] = GPOINTER_TO_INT (v);
        {
          GPtrArray *lv = g_ptr_array_index (layer_leaves, layer[i]);
          gboolean seen = FALSE;

          for (guint k = 0; k < lv->len && !seen; k++)
            seen = strcmp (g_ptr_array_index (lv, k), f) == 0;
          if (!seen && f[0] != '\0')
            g_ptr_array_add (lv, g_strdup (f));
        }
        leaf[i] = f;
        g_free (l);
      }
    }

  if (layer_names->len > 0)
    {
      fill_gaps (&c, layer, (guint *) order->data, order->len, opening, closing, FALSE);
      layer_group = g_new (gint, layer_names->len);
      /* groups: each layer (in order of first member), then its modules */
      for (guint L = 0; L < layer_names->len; L++)
        {
          g_autoptr(GArray) mine = g_array_new (FALSE, FALSE, sizeof (guint));
          g_autoptr(GPtrArray) mod_names = g_ptr_array_new_with_free_func (g_free);
          GPtrArray *lv = g_ptr_array_index (layer_leaves, L);
          const char *lname = g_ptr_array_index (layer_names, L);

          layer_group[L] = add_group (groups, CS_GROUP_LAYER, g_strdup (lname), g_strdup (lname), -1);
          for (guint k = 0; k < order->len; k++)
            {
              guint i = g_array_index (order, guint, k);

              if (layer[i] != (gint) L)
                continue;
              g_array_append_val (mine, i);
              if (leaf[i] != NULL && leaf[i][0] != '\0')
                {
                  g_autofree char *m = module_of_leaf (leaf[i], lv);
                  guint mi;

                  for (mi = 0; mi < mod_names->len; mi++)
                    if (strcmp (g_ptr_array_index (mod_names, mi), m) == 0)
                      break;
                  if (mi == mod_names->len)
                    g_ptr_array_add (mod_names, g_steal_pointer (&m));
                  module[i] = (gint) mi;
                }
            }
          if (mod_names->len >= 2)
            {
              g_autoptr(GHashTable) mo = g_hash_table_new (NULL, NULL);
              g_autoptr(GHashTable) mc = g_hash_table_new (NULL, NULL);
              gint base = (gint) groups->len;

              fill_gaps (&c, module, (guint *) mine->data, mine->len, mo, mc, TRUE);
              for (guint mi = 0; mi < mod_names->len; mi++)
                add_group (groups, CS_GROUP_MODULE,
                           g_strdup_printf ("%s.%s", lname, (char *) g_ptr_array_index (mod_names, mi)),
                           g_strdup (g_ptr_array_index (mod_names, mi)), layer_group[L]);
              for (guint k = 0; k < mine->len; k++)
                {
                  guint i = g_array_index (mine, guint, k);
                  gr->stmt_group[i] = module[i] >= 0 ? base + module[i] : layer_group[L];
                }
            }
          else
            for (guint k = 0; k < mine->len; k++)
              gr->stmt_group[g_array_index (mine, guint, k)] = layer_group[L];
        }
      g_free (layer_group);
    }
  else if (order->len > CS_GROUP_CHUNK_MIN)
    {
      guint size = MAX (CS_GROUP_CHUNK_SIZE, (order->len + CS_GROUP_MAX_CHUNKS - 1) / CS_GROUP_MAX_CHUNKS);
      /* more than CS_GROUP_MAX_TOP chunks: CS_GROUP_NEST of them in an outer chunk each */
      guint outer = (order->len + size - 1) / size > CS_GROUP_MAX_TOP ? size * CS_GROUP_NEST : 0;
      gint parent = -1;

      for (guint k0 = 0; k0 < order->len; k0 += size)
        {
          guint k1 = MIN (k0 + size, order->len);
          gint g;

          if (outer > 0 && k0 % outer == 0)
            {
              guint o1 = MIN (k0 + outer, order->len);
              parent = add_group (groups, CS_GROUP_CHUNK,
                                  g_strdup_printf ("statements %u-%u", k0 + 1, o1),
                                  g_strdup_printf ("statements %u\u2013%u", k0 + 1, o1), -1);
            }
          g = add_group (groups, CS_GROUP_CHUNK,
                         g_strdup_printf ("statements %u-%u", k0 + 1, k1),
                         g_strdup_printf ("statements %u\u2013%u", k0 + 1, k1), parent);
          for (guint k = k0; k < k1; k++)
            gr->stmt_group[g_array_index (order, guint, k)] = g;
        }
    }

  /* counts, ranges, summaries, signatures */
  {
    CsGroup *gs = (CsGroup *) groups->data;

    for (guint g = 0; g < groups->len; g++)
      gs[g].signature = 14695981039346656037ull;
    for (guint k = 0; k < order->len; k++)
      {
        guint i = g_array_index (order, guint, k);
        gint g0 = gr->stmt_group[i];

        for (gint g = g0; g >= 0; g = gs[g].parent)
          {
            gs[g].n_stmts++;
            gs[g].first = MIN (gs[g].first, i);
            gs[g].last = MAX (gs[g].last, i);
            summarise_stmt (&c, i, &gs[g].summary);
            if (gs[g].kind == CS_GROUP_LAYER)
              {
                gs[g].signature = hash_stmt (gs[g].signature, trace->stmts[i]);
                gs[g].signature = hash_str (gs[g].signature, g0 != g ? gs[g0].label : "");
              }
          }
      }
    for (guint g = 0; g < groups->len; g++)
      {
        if (gs[g].kind == CS_GROUP_LAYER)
          gr->n_layers++;
        else if (gs[g].kind == CS_GROUP_CHUNK)
          gr->n_chunks++;
        if (gs[g].kind != CS_GROUP_LAYER)
          continue;
        for (guint h = 0; h < g; h++)
          if (gs[h].kind == CS_GROUP_LAYER && gs[h].repeat_of < 0
              && gs[h].signature == gs[g].signature && gs[h].n_stmts == gs[g].n_stmts)
            {
              gs[g].repeat_of = (gint) h;
              gs[h].n_same++;
              break;
            }
      }
    for (guint g = 0; g < groups->len; g++)
      if (gs[g].repeat_of >= 0)
        gs[g].n_same = gs[gs[g].repeat_of].n_same;
  }

  gr->n_groups = groups->len;
  gr->groups = (CsGroup *) g_array_free (g_steal_pointer (&groups), FALSE);
  for (guint i = 0; i < c.n; i++)
    g_free (leaf[i]);
  g_free (leaf);
  g_free (layer);
  g_free (module);
  ctx_clear (&c);
  return gr;
}

/**
 * cs_grouping_ref:
 * @grouping: a grouping
 *
 * Groupings are shared by the layouts of one trace (render/cs-layout-cache.h).
 * Returns: (transfer full): @grouping
 */
CsGrouping *
cs_grouping_ref (CsGrouping *grouping)
{
  g_return_val_if_fail (grouping != NULL, NULL);
  g_atomic_int_inc (&grouping->ref_count);
  return grouping;
}

/**
 * cs_grouping_free:
 * @grouping: (transfer full) (nullable): a grouping
 *
 * Drops a reference, as cs_grouping_unref() does (the name kept for g_autoptr users).
 */
void
cs_grouping_free (CsGrouping *grouping)
{
  cs_grouping_unref (grouping);
}

/**
 * cs_grouping_unref:
 * @grouping: (transfer full) (nullable): a grouping
 *
 * Drops a reference; the last one frees the grouping.
 */
void
cs_grouping_unref (CsGrouping *grouping)
{
  if (grouping == NULL || !g_atomic_int_dec_and_test (&grouping->ref_count))
    return;
  for (guint g = 0; g < grouping->n_groups; g++)
    {
      g_free (grouping->groups[g].name);
      g_free (grouping->groups[g].label);
    }
  g_free (grouping->groups);
  g_free (grouping->stmt_group);
  g_free (grouping);
}

/**
 * cs_grouping_is_within:
 * @grouping: a grouping
 * @group: a group index, or -1
 * @ancestor: a group index
 *
 * Returns: TRUE when @group is @ancestor or lies inside it
 */
gboolean
cs_grouping_is_within (const CsGrouping *grouping, gint group, gint ancestor)
{
  g_return_val_if_fail (grouping != NULL, FALSE);
  for (gint g = group; g >= 0 && (guint) g < grouping->n_groups; g = grouping->groups[g].parent)
    if (g == ancestor)
      return TRUE;
  return FALSE;
}

/**
 * cs_grouping_find:
 * @grouping: a grouping
 * @name: a group's full name ("layers.3", "layers.3.attention")
 *
 * Returns: the group index, or -1
 */
gint
cs_grouping_find (const CsGrouping *grouping, const char *name)
{
  g_return_val_if_fail (grouping != NULL, -1);
  for (guint g = 0; name != NULL && g < grouping->n_groups; g++)
    if (strcmp (grouping->groups[g].name, name) == 0)
      return (gint) g;
  return -1;
}

/**
 * cs_group_summary_text:
 * @group: a group
 *
 * One line for a collapsed group's box and the side panel: statements, casts up / down,
 * tensor-core matmuls of all, bytes written and the estimated time
 * ("171 ops · 24↑ 16↓ casts · 7/7 TC · 1.2 MiB · 3.1 µs").
 * Returns: (transfer full): the text
 */
char *
cs_group_summary_text (const CsGroup *group)
{
  const CsGroupSummary *s;
  g_autofree char *size = NULL;
  g_autofree char *t = NULL;

  g_return_val_if_fail (group != NULL, NULL);
  s = &group->summary;
  size = g_format_size_full (s->bytes, G_FORMAT_SIZE_IEC_UNITS);
  if (s->est_ms >= 1.0)
    t = g_strdup_printf ("%.3g ms", s->est_ms);
  else if (s->est_ms >= 1e-3)
    t = g_strdup_printf ("%.3g \u00b5s", s->est_ms * 1e3);
  else
    t = g_strdup_printf ("%.3g ns", s->est_ms * 1e6);
  return g_strdup_printf ("%u ops \u00b7 %u\u2191 %u\u2193 casts \u00b7 %u/%u TC \u00b7 %s \u00b7 %s",
                          group->n_stmts, s->n_upcasts, s->n_downcasts, s->n_tensor_core_matmuls,
                          s->n_matmuls, size, t);
}

/* The structure class of layer @g: the first layer with its structure. */
static gint
layer_class (const CsGrouping *grouping, gint g)
{
  return grouping->groups[g].repeat_of >= 0 ? grouping->groups[g].repeat_of : g;
}

/* TRUE when no drawn statement lies between layers @a and @b (a before @b in the trace) that
 * belongs to neither: folding them then makes no cycle through that statement. */
static gboolean
layers_adjacent (const CsGrouping *grouping, gint a, gint b)
{
  const CsTrace *t = grouping->trace;

  if (grouping->groups[b].first <= grouping->groups[a].last)
    return FALSE;
  for (guint i = grouping->groups[a].last + 1; i < grouping->groups[b].first; i++)
    if (is_member (t->stmts[i]) && !cs_grouping_is_within (grouping, grouping->stmt_group[i], a)
        && !cs_grouping_is_within (grouping, grouping->stmt_group[i], b))
      return FALSE;
  return TRUE;
}

/**
 * cs_grouping_fold_repeats:
 * @grouping: a grouping
 * @collapsed: per group: drawn as one node
 * @fold_of: (out caller-allocates): per group (n_groups entries): the first layer of the fold
 *   it belongs to (the representative, itself for the first), or -1 when it is not folded
 *
 * Finds the runs of repeated layers to draw as one node: two or more LAYER groups, consecutive
 * among the layers of one parent and in the trace (no other drawn statement between them), all
 * collapsed, all with the same structure (`repeat_of`).  The first layer of a run stands for
 * all of them; expanding any one (cs_render_options_set_group_expanded()) splits the run
 * around it ("layers 0-2" and "layers 4-7" stay folded when layers.3 is expanded).
 * Returns: the number of folds (runs of two or more layers)
 */
guint
cs_grouping_fold_repeats (const CsGrouping *grouping, const gboolean *collapsed, gint *fold_of)
{
  guint n_folds = 0;
  gint prev = -1;     /* the previous layer of the same parent, in index order */
  gint rep = -1;      /* the first layer of the run being grown */
  guint run = 0;

  g_return_val_if_fail (grouping != NULL && collapsed != NULL && fold_of != NULL, 0);
  for (guint g = 0; g < grouping->n_groups; g++)
    fold_of[g] = -1;
  for (guint g = 0; g < grouping->n_groups; g++)
    {
      const CsGroup *gr = &grouping->groups[g];
      gboolean joins;

      if (gr->kind != CS_GROUP_LAYER)
        continue;
      joins = prev >= 0 && rep >= 0 && collapsed[g] && gr->n_same > 1
              && grouping->groups[prev].parent == gr->parent
              && layer_class (grouping, (gint) g) == layer_class (grouping, rep)
              && layers_adjacent (grouping, prev, (gint) g);
      if (joins)
        {
          if (run == 1)
            {
              fold_of[rep] = rep;
              n_folds++;
            }
          fold_of[g] = rep;
          run++;
        }
      else if (collapsed[g] && gr->n_same > 1)
        {
          rep = (gint) g;
          run = 1;
        }
      else
        {
          rep = -1;
          run = 0;
        }
      prev = (gint) g;
    }
  return n_folds;
}

/**
 * cs_grouping_fold_label:
 * @grouping: a grouping
 * @fold_of: what cs_grouping_fold_repeats() filled
 * @rep: a fold's first layer (fold_of[@rep] == @rep)
 *
 * The title of a fold: "layers 0-7: same structure, 1 shown" when the names share their path
 * up to a numeric last component ("layers.0" ... "layers.7"), else "layers.0 … blocks.7: same
 * structure, 1 shown".
 * Returns: (transfer full): the text
 */
char *
cs_grouping_fold_label (const CsGrouping *grouping, const gint *fold_of, gint rep)
{
  gint last = rep;
  const char *a, *b, *da, *db;

  g_return_val_if_fail (grouping != NULL && fold_of != NULL, NULL);
  g_return_val_if_fail (rep >= 0 && (guint) rep < grouping->n_groups, NULL);
  for (guint g = (guint) rep; g < grouping->n_groups; g++)
    if (fold_of[g] == rep)
      last = (gint) g;
  a = grouping->groups[rep].name;
  b = grouping->groups[last].name;
  da = strrchr (a, '.');
  db = strrchr (b, '.');
  if (da != NULL && db != NULL && da - a == db - b && strncmp (a, b, da - a) == 0
      && all_digits (da + 1) && all_digits (db + 1))
    return g_strdup_printf ("%.*s %s-%s: same structure, 1 shown", (int) (da - a), a, da + 1,
                            db + 1);
  return g_strdup_printf ("%s \u2026 %s: same structure, 1 shown", a, b);
}
