/* cs-lens.c: the precision lens's analyses (cs-lens.h). */
#include "cs-config.h"

#include "cs-lens.h"

#include <math.h>
#include <string.h>

#include "cs-ir-util.h"
#include "cs-ops.h"
#include "cs-promote.h"

/* ------------------------------------------------------------------------------------------ */
/* Storage and compute dtype                                                                   */

static const CsProxy *
first_float_tensor (GPtrArray *proxies)
{
  for (guint i = 0; i < proxies->len; i++)
    {
      const CsProxy *p = g_ptr_array_index (proxies, i);

      if (p->kind == CS_PROXY_TENSOR && cs_dtype_is_float (p->dtype))
        return p;
    }
  return NULL;
}

/* The wider of two float dtypes by bits (the first on a tie: bf16 against f16). */
static CsDtype
wider (CsDtype a, CsDtype b)
{
  return cs_dtype_bits (b) > cs_dtype_bits (a) ? b : a;
}

/* The widest float dtype of @stmt's tensor inputs, or @dflt when it has none. */
static CsDtype
widest_input (const CsStmt *stmt, CsDtype dflt)
{
  g_autoptr(GPtrArray) ins = g_ptr_array_new ();
  gboolean any = FALSE;
  CsDtype w = dflt;

  cs_stmt_collect_inputs (stmt, ins);
  for (guint i = 0; i < ins->len; i++)
    {
      const CsProxy *p = g_ptr_array_index (ins, i);

      if (p->kind != CS_PROXY_TENSOR || !cs_dtype_is_float (p->dtype))
        continue;
      w = any ? wider (w, p->dtype) : p->dtype;
      any = TRUE;
    }
  return w;
}

/* The widest float dtype written by the leaf statements under @stmt (into @w). */
static void
widest_leaf_output (const CsStmt *stmt, CsDtype *w, guint depth)
{
  if (depth > 64)
    return;
  for (guint i = 0; i < stmt->n_subs; i++)
    {
      const CsStmt *sub = stmt->subs[i];

      if (sub->kind != CS_STMT_CALL)
        continue;
      if (sub->n_subs > 0)
        widest_leaf_output (sub, w, depth + 1);
      else
        {
          g_autoptr(GPtrArray) outs = g_ptr_array_new ();

          cs_stmt_collect_outputs (sub, outs);
          for (guint k = 0; k < outs->len; k++)
            {
              const CsProxy *p = g_ptr_array_index (outs, k);

              if (p->kind == CS_PROXY_TENSOR && cs_dtype_is_float (p->dtype))
                *w = wider (*w, p->dtype);
            }
        }
    }
}

gboolean
cs_lens_stmt_precision (const CsStmt *stmt, CsStmtPrecision *out)
{
  g_autoptr(GPtrArray) outs = NULL;
  const CsProxy *o;
  const CsOp *sem;
  CsDtype compute;

  g_return_val_if_fail (stmt != NULL && out != NULL, FALSE);
  memset (out, 0, sizeof *out);
  if (stmt->kind != CS_STMT_CALL || stmt->op == NULL)
    return FALSE;
  outs = g_ptr_array_new ();
  cs_stmt_collect_outputs (stmt, outs);
  o = first_float_tensor (outs);
  if (o == NULL)
    return FALSE;
  sem = cs_op_semantic (stmt->op);
  switch (sem->category)
    {
    case CS_OP_CAT_CAST:
      compute = widest_input (stmt, o->dtype);
      break;
    case CS_OP_CAT_MATMUL:
      compute = widest_input (stmt, o->dtype);
      /* bf16 / f16 operands: fp32 accumulation on tensor cores */
      if (compute == CS_DTYPE_BF16 || compute == CS_DTYPE_F16 || cs_dtype_is_fp8 (compute))
        compute = CS_DTYPE_F32;
      break;
    case CS_OP_CAT_SHAPE:
    case CS_OP_CAT_INDEXING:
    case CS_OP_CAT_CREATION:
    case CS_OP_CAT_BOOKKEEPING:
      compute = o->dtype;
      break;
    default:
      if (stmt->n_subs > 0)
        {
          compute = o->dtype;
          widest_leaf_output (stmt, &compute, 0);
        }
      else if (sem->tags & CS_OP_TAG_PRIM)
        compute = o->dtype;
      else
        compute = cs_promote_computation_dtype (widest_input (stmt, o->dtype));
      break;
    }
  out->storage = o->dtype;
  out->compute = cs_dtype_is_float (compute) ? compute : o->dtype;
  out->rounds = cs_dtype_bits (out->compute) > cs_dtype_bits (out->storage);
  return TRUE;
}

/* ------------------------------------------------------------------------------------------ */
/* Casts the user wrote that a pass removed                                                    */

static void
collect_written (const CsStmt *s, GHashTable *names, guint depth)
{
  g_autoptr(GPtrArray) outs = NULL;

  if (depth > 64 || s->kind != CS_STMT_CALL)
    return;
  outs = g_ptr_array_new ();
  cs_stmt_collect_outputs (s, outs);
  for (guint i = 0; i < outs->len; i++)
    g_hash_table_add (names, (gpointer) ((const CsProxy *) g_ptr_array_index (outs, i))->name);
  for (guint i = 0; i < s->n_subs; i++)
    collect_written (s->subs[i], names, depth + 1);
}

/* Adds to @names every proxy name @s reads, at every level (its arguments, its subsymbols'). */
static void
collect_read (const CsStmt *s, GHashTable *names, guint depth)
{
  g_autoptr(GPtrArray) ins = NULL;

  if (depth > 64)
    return;
  ins = g_ptr_array_new ();
  cs_stmt_collect_inputs (s, ins);
  for (guint i = 0; i < ins->len; i++)
    g_hash_table_add (names, (gpointer) ((const CsProxy *) g_ptr_array_index (ins, i))->name);
  for (guint i = 0; i < s->n_subs; i++)
    collect_read (s->subs[i], names, depth + 1);
}

typedef struct
{
  GHashTable *user;       /* initial stmt id -> const CsStmt* (the user's casts) */
  GHashTable *after;      /* names written and read in the trace after the pass (a cast the
                             pass left unread goes in the passes after it) */
  GHashTable *readers;    /* name -> GPtrArray of const CsStmt* reading it (leaf statements of
                             the trace before, regions' prims included) */
  GPtrArray  *result;     /* CsRemovedCast* (g_free): the casts found, returned */
} RemovedWalk;

static void
index_readers (const CsStmt *s, GHashTable *readers, guint depth)
{
  g_autoptr(GPtrArray) ins = NULL;

  if (depth > 64 || s->kind != CS_STMT_CALL)
    return;
  if (s->n_subs > 0 && !(s->op->tags & CS_OP_TAG_PRIM))
    {
      for (guint i = 0; i < s->n_subs; i++)
        index_readers (s->subs[i], readers, depth + 1);
      if (!cs_op_is_fusion (s->op))
        return;
    }
  ins = g_ptr_array_new ();
  cs_stmt_collect_inputs (s, ins);
  for (guint i = 0; i < ins->len; i++)
    {
      const CsProxy *p = g_ptr_array_index (ins, i);
      GPtrArray *list = g_hash_table_lookup (readers, p->name);

      if (list == NULL)
        {
          list = g_ptr_array_new ();
          g_hash_table_insert (readers, (gpointer) p->name, list);
        }
      g_ptr_array_add (list, (gpointer) s);
    }
}

static const CsProxy *
output_of (const CsStmt *s)
{
  return cs_stmt_get_output (s);
}

/* The first reader of @name (through statements the pass removed) that is still there after
 * the pass: the statement now reading the unrounded value.  Returns its output name. */
static const char *
surviving_reader (RemovedWalk *w, const char *name, guint depth)
{
  GPtrArray *list = g_hash_table_lookup (w->readers, name);

  if (list == NULL || depth > 16)
    return NULL;
  for (guint i = 0; i < list->len; i++)
    {
      const CsStmt *r = g_ptr_array_index (list, i);
      const CsProxy *o = output_of (r);

      if (o == NULL || cs_op_is_fusion (r->op))
        continue;
      if (g_hash_table_contains (w->after, o->name))
        return o->name;
      {
        const char *deeper = surviving_reader (w, o->name, depth + 1);

        if (deeper != NULL)
          return deeper;
      }
    }
  return NULL;
}

/* @backward: the side of the top-level statement @s sits in (a backward region may hold
 * forward statements rematerialization recomputes there). */
static void
walk_removed (RemovedWalk *w, const CsStmt *s, const char *region, gboolean backward,
              guint depth)
{
  CsProxy *in;
  CsDtype to;

  if (depth > 64 || s->kind != CS_STMT_CALL)
    return;
  if (_cs_stmt_is_cast (s, &in, &to) && in->kind == CS_PROXY_TENSOR)
    {
      const CsStmt *user = s->origin ? g_hash_table_lookup (w->user, GUINT_TO_POINTER (s->origin)) : NULL;
      const CsProxy *o = output_of (s);

      if (user != NULL && o != NULL && !g_hash_table_contains (w->after, o->name)
          && in->dtype != to)
        {
          CsRemovedCast *c = g_new0 (CsRemovedCast, 1);

          c->user = user;
          c->cast = s;
          c->from = in->dtype;
          c->to = to;
          c->region = region;
          c->backward = backward;
          c->reader = surviving_reader (w, o->name, 0);
          g_ptr_array_add (w->result, c);
        }
      return;
    }
  if (s->op != NULL && !(s->op->tags & CS_OP_TAG_PRIM))
    {
      const char *r = _cs_stmt_is_region (s) ? s->callee : region;

      for (guint i = 0; i < s->n_subs; i++)
        walk_removed (w, s->subs[i], r, backward, depth + 1);
    }
}

GPtrArray *
cs_lens_removed_user_casts (const CsTrace *initial, const CsTrace *before, const CsTrace *after)
{
  RemovedWalk w;

  g_return_val_if_fail (initial != NULL && before != NULL && after != NULL, NULL);
  w.result = g_ptr_array_new_with_free_func (g_free);
  w.user = g_hash_table_new (NULL, NULL);
  for (guint i = 0; i < initial->n_stmts; i++)
    if (_cs_stmt_is_cast_like (initial->stmts[i]))
      g_hash_table_insert (w.user, GUINT_TO_POINTER (initial->stmts[i]->id),
                           (gpointer) initial->stmts[i]);
  if (g_hash_table_size (w.user) == 0)
    {
      g_hash_table_unref (w.user);
      return w.result;
    }
  w.after = g_hash_table_new (g_str_hash, g_str_equal);
  w.readers = g_hash_table_new_full (g_str_hash, g_str_equal, NULL,
                                     (GDestroyNotify) g_ptr_array_unref);
  for (guint i = 0; i < after->n_stmts; i++)
    collect_written (after->stmts[i], w.after, 0);
  {
    /* remove_redundant_casts leaves the casts it makes unread in place (nvFuserExecutor.cse
     * and dce remove them): what nothing reads is gone */
    g_autoptr(GHashTable) read = g_hash_table_new (g_str_hash, g_str_equal);
    GHashTableIter it;
    gpointer key;

    for (guint i = 0; i < after->n_stmts; i++)
      collect_read (after->stmts[i], read, 0);
    g_hash_table_iter_init (&it, w.after);
    while (g_hash_table_iter_next (&it, &key, NULL))
      if (!g_hash_table_contains (read, key))
        g_hash_table_iter_remove (&it);
  }
  for (guint i = 0; i < before->n_stmts; i++)
    index_readers (before->stmts[i], w.readers, 0);
  for (guint i = 0; i < before->n_stmts; i++)
    walk_removed (&w, before->stmts[i], NULL, before->stmts[i]->backward, 0);
  g_hash_table_unref (w.user);
  g_hash_table_unref (w.after);
  g_hash_table_unref (w.readers);
  return w.result;
}

/* ------------------------------------------------------------------------------------------ */
/* First divergence                                                                            */

static gboolean
stmt_writes (const CsStmt *st, const char *name)
{
  g_autoptr(GPtrArray) outs = g_ptr_array_new ();

  cs_stmt_collect_outputs (st, outs);
  for (guint k = 0; k < outs->len; k++)
    if (strcmp (((const CsProxy *) g_ptr_array_index (outs, k))->name, name) == 0)
      return TRUE;
  return FALSE;
}

/* Where @name is made in @trace: the index of the top-level statement writing it (G_MAXUINT
 * for none) and, inside a fusion region, the index of the region's prim writing it. */
static void
producer_position (const CsTrace *trace, const char *name, guint *top, guint *sub)
{
  *top = *sub = G_MAXUINT;
  for (guint i = 0; i < trace->n_stmts; i++)
    {
      const CsStmt *st = trace->stmts[i];

      if (st->kind != CS_STMT_CALL || !stmt_writes (st, name))
        continue;
      *top = i;
      if (cs_op_is_fusion (st->op))
        for (guint k = 0; k < st->n_subs; k++)
          if (st->subs[k]->kind == CS_STMT_CALL && stmt_writes (st->subs[k], name))
            {
              *sub = k;
              break;
            }
      return;
    }
}

gint
cs_lens_first_divergence (const CsTrace *trace, const CsLensItem *items, guint n_items,
                          guint *line)
{
  guint best_top = G_MAXUINT, best_sub = G_MAXUINT;
  gint found = -1;

  g_return_val_if_fail (trace != NULL && (items != NULL || n_items == 0), -1);
  if (line != NULL)
    *line = 0;
  for (guint i = 0; i < n_items; i++)
    {
      guint top, sub;

      if (items[i].acc == NULL || items[i].acc->pass || items[i].name == NULL)
        continue;
      producer_position (trace, items[i].name, &top, &sub);
      if (found < 0 || top < best_top || (top == best_top && sub < best_sub))
        {
          best_top = top;
          best_sub = sub;
          found = (gint) i;
          if (line != NULL)
            *line = top < trace->n_stmts ? trace->stmts[top]->line : 0;
        }
    }
  return found;
}

/* ------------------------------------------------------------------------------------------ */
/* Dynamic range                                                                               */

gboolean
cs_dtype_range (CsDtype dtype, CsDtypeRange *out)
{
  int mant, emax, emin;     /* significand bits after the point, exponent range */
  double max;

  g_return_val_if_fail (out != NULL, FALSE);
  memset (out, 0, sizeof *out);
  out->has_inf = TRUE;
  out->tie_overflows = TRUE;
  switch (dtype)
    {
    case CS_DTYPE_F16:      mant = 10; emax = 15;   emin = -14;   break;
    case CS_DTYPE_BF16:     mant = 7;  emax = 127;  emin = -126;  break;
    case CS_DTYPE_F32:      mant = 23; emax = 127;  emin = -126;  break;
    case CS_DTYPE_F64:      mant = 52; emax = 1023; emin = -1022; break;
    case CS_DTYPE_F8_E5M2:  mant = 2;  emax = 15;   emin = -14;   break;
    case CS_DTYPE_F8_E4M3FN:
      /* no inf; the all-ones significand at the top exponent is NaN, so the largest finite
       * value is 1.110b x 2^8 = 448 (OCP OFP8 v1.0, table 1) */
      out->max_finite = 448.0;
      out->min_normal = ldexp (1.0, -6);
      out->min_subnormal = ldexp (1.0, -9);
      out->overflow_at = 448.0 + 16.0;     /* half of the ulp 2^(8-3) = 32 */
      out->has_inf = FALSE;
      out->tie_overflows = FALSE;           /* 448's significand ends in 0: a tie goes down */
      return TRUE;
    default:
      return FALSE;
    }
  max = ldexp (2.0 - ldexp (1.0, -mant), emax);
  out->max_finite = max;
  out->min_normal = ldexp (1.0, emin);
  out->min_subnormal = ldexp (1.0, emin - mant);
  out->overflow_at = dtype == CS_DTYPE_F64 ? INFINITY : max + ldexp (1.0, emax - mant - 1);
  return TRUE;
}

static const CsDtype lens_fmt_dtype[CS_LENS_N_FMTS] = {
  CS_DTYPE_F16, CS_DTYPE_BF16, CS_DTYPE_F8_E4M3FN, CS_DTYPE_F8_E5M2,
};
static const char *const lens_fmt_name[CS_LENS_N_FMTS] = { "f16", "bf16", "e4m3", "e5m2" };

const char *
cs_lens_format_name (CsLensFormat fmt)
{
  return fmt < CS_LENS_N_FMTS ? lens_fmt_name[fmt] : "?";
}

CsDtype
cs_lens_format_dtype (CsLensFormat fmt)
{
  return fmt < CS_LENS_N_FMTS ? lens_fmt_dtype[fmt] : CS_DTYPE_F32;
}

void
cs_lens_range (const CsTensor *x, CsLensRange *out)
{
  CsDtypeRange rg[CS_LENS_N_FMTS];
  gint64 n_nonzero = 0;
  gboolean any = FALSE;

  g_return_if_fail (x != NULL && out != NULL);
  memset (out, 0, sizeof *out);
  for (guint f = 0; f < CS_LENS_N_FMTS; f++)
    cs_dtype_range (lens_fmt_dtype[f], &rg[f]);
  out->n = x->numel;
  for (int64_t i = 0; i < x->numel; i++)
    {
      double v = cs_tensor_get_f64 (x, i), a;

      if (!isfinite (v))
        {
          out->n_nonfinite++;
          continue;
        }
      a = fabs (v);
      if (a == 0)
        {
          out->n_zero++;
          continue;
        }
      n_nonzero++;
      out->amax = MAX (out->amax, a);
      out->min_nonzero = any ? MIN (out->min_nonzero, a) : a;
      any = TRUE;
      for (guint f = 0; f < CS_LENS_N_FMTS; f++)
        {
          CsLensFit *fit = &out->fit[f];

          if (a > rg[f].overflow_at || (a == rg[f].overflow_at && rg[f].tie_overflows))
            fit->n_overflow++;
          else if (a <= rg[f].min_subnormal / 2)
            fit->n_flush++;
          else if (a < rg[f].min_normal)
            fit->n_subnormal++;
        }
    }
  for (guint f = 0; f < CS_LENS_N_FMTS; f++)
    {
      CsLensFit *fit = &out->fit[f];

      fit->headroom = out->amax > 0 ? log2 (rg[f].max_finite / out->amax) : INFINITY;
      fit->overflow_risk = fit->n_overflow > 0 || fit->headroom < 1.0;
      fit->underflow_risk = fit->n_flush > 0 || (n_nonzero > 0 && fit->n_subnormal * 100 > n_nonzero);
    }
}

char *
cs_lens_range_summary (const CsLensRange *r)
{
  GString *s = g_string_new (NULL);

  g_return_val_if_fail (r != NULL, NULL);
  for (guint f = 0; f < CS_LENS_N_FMTS; f++)
    {
      const CsLensFit *fit = &r->fit[f];
      gboolean first = TRUE;

      if (!fit->overflow_risk && !fit->underflow_risk)
        continue;
      g_string_append_printf (s, "%s%s: ", s->len ? "; " : "", lens_fmt_name[f]);
#define ITEM(...) do { g_string_append (s, first ? "" : ", "); g_string_append_printf (s, __VA_ARGS__); first = FALSE; } while (0)
      if (fit->n_overflow > 0)
        ITEM ("%" G_GINT64_FORMAT " overflow", fit->n_overflow);
      else if (fit->overflow_risk)
        ITEM ("overflow risk (headroom %.2g doublings)", fit->headroom);
      if (fit->n_flush > 0)
        ITEM ("%" G_GINT64_FORMAT " flush to zero", fit->n_flush);
      if (fit->n_subnormal > 0 && fit->underflow_risk)
        ITEM ("%" G_GINT64_FORMAT " subnormal", fit->n_subnormal);
#undef ITEM
    }
  return g_string_free (s, FALSE);
}
