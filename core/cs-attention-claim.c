/* cs-attention-claim.c: castscope's attention claim (see cs-attention-claim.h).
 *
 * Semantics of the replacement: torch.nn.functional.scaled_dot_product_attention (attn_mask
 * None, dropout_p 0, is_causal False) is softmax(q @ k.transpose(-2, -1) * scale, -1) @ v;
 * Thunder's ltorch.scaled_dot_product_attention has the same signature (thunder/torch/
 * __init__.py).
 */
#include "cs-config.h"

#include "cs-attention-claim.h"

#include "cs-ir-util.h"
#include "cs-meta.h"
#include "cs-ops.h"
#include "cs-ops-args.h"

#include <math.h>
#include <string.h>

/* Per-proxy facts of the trace: the top-level statement that writes it, and how many
 * top-level statements read it (the return included). */
typedef struct
{
  GHashTable *def;      /* CsProxy* -> index + 1 of its writing statement */
  GHashTable *readers;  /* CsProxy* -> number of reading statements */
} UseInfo;

static void
use_info_init (UseInfo *u, const CsTrace *t)
{
  g_autoptr(GPtrArray) tmp = g_ptr_array_new ();

  u->def = g_hash_table_new (g_direct_hash, g_direct_equal);
  u->readers = g_hash_table_new (g_direct_hash, g_direct_equal);
  for (guint i = 0; i < t->n_stmts; i++)
    {
      const CsStmt *s = t->stmts[i];

      g_ptr_array_set_size (tmp, 0);
      _cs_stmt_writes (s, tmp);
      for (guint j = 0; j < tmp->len; j++)
        g_hash_table_insert (u->def, tmp->pdata[j], GUINT_TO_POINTER (i + 1));
      g_ptr_array_set_size (tmp, 0);
      _cs_stmt_reads (s, tmp);
      for (guint j = 0; j < tmp->len; j++)
        {
          gboolean seen = FALSE;
          for (guint k = 0; k < j && !seen; k++)   /* count a statement once */
            seen = tmp->pdata[k] == tmp->pdata[j];
          if (!seen)
            g_hash_table_insert (u->readers, tmp->pdata[j],
                                 GUINT_TO_POINTER (GPOINTER_TO_UINT (
                                   g_hash_table_lookup (u->readers, tmp->pdata[j])) + 1));
        }
    }
}

static void
use_info_clear (UseInfo *u)
{
  g_hash_table_unref (u->def);
  g_hash_table_unref (u->readers);
}

/* The statement (and its index) that writes @p when it is a top-level call of op @id whose
 * single output is @p and which no statement but one reads. */
static const CsStmt *
sole_use_def (const CsTrace *t, const UseInfo *u, const CsProxy *p, CsOpId id, guint *index)
{
  guint i = GPOINTER_TO_UINT (g_hash_table_lookup (u->def, p));
  const CsStmt *s;

  if (i == 0 || GPOINTER_TO_UINT (g_hash_table_lookup (u->readers, p)) != 1)
    return NULL;
  s = t->stmts[i - 1];
  if (s->kind != CS_STMT_CALL || s->op == NULL || s->op->id != id || cs_stmt_get_output (s) != p
      || s->n_subs != 0)
    return NULL;
  *index = i - 1;
  return s;
}

static CsProxy *
proxy_of (const CsValue *v)
{
  return v != NULL && v->kind == CS_VALUE_PROXY ? v->u.proxy : NULL;
}

static gboolean
number_literal (const CsValue *v, double *out)
{
  if (v == NULL)
    return FALSE;
  if (v->kind == CS_VALUE_INT)
    *out = (double) v->u.i;
  else if (v->kind == CS_VALUE_FLOAT)
    *out = v->u.f;
  else
    return FALSE;
  return TRUE;
}

static gboolean
int_literal (const CsValue *v, int64_t *out)
{
  if (v == NULL || v->kind != CS_VALUE_INT)
    return FALSE;
  *out = v->u.i;
  return TRUE;
}

static gboolean
cuda_4d_float (const CsProxy *p)
{
  return p != NULL && p->kind == CS_PROXY_TENSOR && p->typed && p->rank == 4
         && p->device.type == CS_DEVICE_CUDA && cs_dtype_is_float (p->dtype);
}

/* Every argument of @s is one of @kws (by keyword) or at a position below @n_pos. */
static gboolean
args_within (const CsStmt *s, guint n_pos, const char * const *kws)
{
  guint pos = 0;

  for (guint i = 0; i < s->n_args; i++)
    {
      gboolean ok = FALSE;

      if (s->args[i].name == NULL)
        {
          ok = pos++ < n_pos;
        }
      else
        for (guint k = 0; kws[k] != NULL && !ok; k++)
          ok = strcmp (kws[k], s->args[i].name) == 0;
      if (!ok)
        return FALSE;
    }
  return TRUE;
}

/* The matched pattern (indices into the trace's statements, -1 for an absent scale). */
typedef struct
{
  int      transpose, mm1, scale, softmax; /* k's transpose, q @ k^T, scale, softmax (the
                                              final matmul is match_at's @i) */
  int      tril;          /* the causal mask's ltorch.tril, -1 for none (is_causal=False) */
  CsProxy *q, *k, *v;     /* the attention's operands */
  CsValue *scale_value;   /* the literal to pass as scale= (NULL: build one from @scale_num) */
  double   scale_num;     /* the scale's value (a div: 1 / divisor), 1: none */
} Match;

/* When @x is written by `ltorch.tril(y, 0, fill_value=-float('inf'))` (the causal mask:
 * torch's is_causal keeps the lower triangle, diagonal included, top-left aligned) that only
 * the next statement reads, records it in @m and returns y; else returns @x. */
static CsProxy *
tril_input (const CsTrace *t, const UseInfo *u, CsProxy *x, Match *m)
{
  static const char * const kw[] = { "a", "diagonal", "fill_value", NULL };
  const CsStmt *s;
  const CsValue *diag, *fill;
  int64_t d = 0;
  double f = 0;
  guint idx;

  if (x == NULL || (s = sole_use_def (t, u, x, CS_OP_LTORCH_TRIL, &idx)) == NULL
      || !args_within (s, 2, kw))
    return x;
  diag = cs_stmt_arg (s, CS_ARG_DIAGONAL);
  fill = cs_stmt_arg (s, CS_ARG_FILL_VALUE);
  if ((diag != NULL && (!int_literal (diag, &d) || d != 0)) || !number_literal (fill, &f)
      || !(isinf (f) && f < 0) || proxy_of (cs_stmt_arg (s, CS_ARG_A)) == NULL)
    return x;
  m->tril = (int) idx;
  return proxy_of (cs_stmt_arg (s, CS_ARG_A));
}

/* Whether top-level statement @i of @t is the final matmul of a pattern; fills @m. */
static gboolean
match_at (CsTrace *t, const UseInfo *u, guint i, Match *m)
{
  static const char * const mm_kw[] = { "a", "b", NULL };
  static const char * const sm_kw[] = { "a", "dim", "dtype", "_stacklevel", NULL };
  static const char * const tr_kw[] = { "a", "dim0", "dim1", NULL };
  static const char * const bin_kw[] = { "a", "b", NULL };
  const CsStmt *mm2 = t->stmts[i], *sm, *sc = NULL, *mm1, *tr;
  CsProxy *p3, *x, *p1, *p0;
  const CsValue *dtype, *dim;
  int64_t d, d0, d1;
  guint idx;

  memset (m, 0, sizeof *m);
  if (mm2->kind != CS_STMT_CALL || mm2->op == NULL || mm2->op->id != CS_OP_LTORCH_MATMUL
      || mm2->n_args != 2 || !args_within (mm2, 2, mm_kw) || cs_stmt_get_output (mm2) == NULL)
    return FALSE;
  p3 = proxy_of (cs_stmt_arg (mm2, CS_ARG_A));
  m->v = proxy_of (cs_stmt_arg (mm2, CS_ARG_B));
  if (p3 == NULL || m->v == NULL)
    return FALSE;

  /* softmax over the last dim, no dtype (ltorch._softmax takes it keyword-only, ltorch.softmax
   * at position 2 too) */
  sm = sole_use_def (t, u, p3, CS_OP_LTORCH__SOFTMAX, &idx);
  if (sm == NULL)
    sm = sole_use_def (t, u, p3, CS_OP_LTORCH_SOFTMAX, &idx);
  if (sm == NULL || !args_within (sm, sm->op->id == CS_OP_LTORCH_SOFTMAX ? 3 : 2, sm_kw))
    return FALSE;
  m->softmax = (int) idx;
  x = proxy_of (cs_stmt_arg (sm, CS_ARG_A));
  dim = cs_stmt_arg (sm, CS_ARG_DIM);
  dtype = cs_stmt_arg (sm, CS_ARG_DTYPE);
  if (x == NULL || !int_literal (dim, &d) || (d != -1 && d != 3)
      || (dtype != NULL && dtype->kind != CS_VALUE_NONE))
    return FALSE;

  /* the causal mask (tril with -inf above the diagonal) and the scale, in either order */
  m->scale = -1;
  m->tril = -1;
  m->scale_num = 1.0;
  x = tril_input (t, u, x, m);
  if ((sc = sole_use_def (t, u, x, CS_OP_LTORCH_MUL, &idx)) != NULL
      || (sc = sole_use_def (t, u, x, CS_OP_LTORCH_DIV, &idx)) != NULL)
    {
      const CsValue *a = cs_stmt_arg (sc, CS_ARG_A), *b = cs_stmt_arg (sc, CS_ARG_B);
      double c;

      if (sc->n_args != 2 || !args_within (sc, 2, bin_kw))
        return FALSE;
      m->scale = (int) idx;
      if (sc->op->id == CS_OP_LTORCH_MUL && number_literal (a, &c) && proxy_of (b) != NULL)
        {
          p1 = proxy_of (b);
          m->scale_value = (CsValue *) a;
        }
      else if (number_literal (b, &c) && proxy_of (a) != NULL)
        {
          p1 = proxy_of (a);
          if (sc->op->id == CS_OP_LTORCH_MUL)
            m->scale_value = (CsValue *) b;
          else if (c == 0)
            return FALSE;
          else
            c = 1.0 / c;
        }
      else
        return FALSE;
      m->scale_num = c;
      if (m->tril < 0)
        p1 = tril_input (t, u, p1, m);
    }
  else
    p1 = x;
  if (p1 == NULL)
    return FALSE;
  /* the sdpa decomposition scales q and k by sqrt(scale), which a negative (or NaN) scale
   * makes NaN; -inf times a scale that is not positive is no longer a mask */
  if (!(m->scale_num >= 0) || (m->tril >= 0 && !(m->scale_num > 0)))
    return FALSE;

  /* q @ k.transpose(-2, -1) */
  mm1 = sole_use_def (t, u, p1, CS_OP_LTORCH_MATMUL, &idx);
  if (mm1 == NULL || mm1->n_args != 2 || !args_within (mm1, 2, mm_kw))
    return FALSE;
  m->mm1 = (int) idx;
  m->q = proxy_of (cs_stmt_arg (mm1, CS_ARG_A));
  p0 = proxy_of (cs_stmt_arg (mm1, CS_ARG_B));
  if (m->q == NULL || p0 == NULL)
    return FALSE;
  tr = sole_use_def (t, u, p0, CS_OP_LTORCH_TRANSPOSE, &idx);
  if (tr == NULL || tr->n_args != 3 || !args_within (tr, 3, tr_kw))
    return FALSE;
  m->transpose = (int) idx;
  m->k = proxy_of (cs_stmt_arg (tr, CS_ARG_A));
  if (m->k == NULL || !int_literal (cs_stmt_arg (tr, CS_ARG_DIM0), &d0) || !int_literal (cs_stmt_arg (tr, CS_ARG_DIM1), &d1))
    return FALSE;
  d0 = d0 < 0 ? d0 + 4 : d0;
  d1 = d1 < 0 ? d1 + 4 : d1;
  if (!((d0 == 2 && d1 == 3) || (d0 == 3 && d1 == 2)))
    return FALSE;

  /* the types sdpa takes: 4-D CUDA tensors of one float dtype, one batch and head count, q's
   * and k's head dims equal, k's and v's sequence lengths equal */
  if (!cuda_4d_float (m->q) || !cuda_4d_float (m->k) || !cuda_4d_float (m->v)
      || m->k->dtype != m->q->dtype || m->v->dtype != m->q->dtype)
    return FALSE;
  for (guint j = 0; j < 2; j++)
    if (m->k->shape[j] != m->q->shape[j] || m->v->shape[j] != m->q->shape[j])
      return FALSE;
  if (m->q->shape[3] != m->k->shape[3] || m->k->shape[2] != m->v->shape[2])
    return FALSE;
  return TRUE;
}

/* The sdpa statement replacing @m, typed by the op's meta as @mm2's output; NULL when the meta
 * disagrees. */
static CsStmt *
build_sdpa (CsTrace *t, const CsStmt *mm2, const Match *m)
{
  CsArena *a = t->arena;
  CsProxy *out = cs_stmt_get_output (mm2);
  CsArg args[7];
  CsMetaType types[2];
  guint n_types = 0;
  CsStmt *s;

  args[0] = (CsArg) { NULL, cs_value_new_proxy (a, m->q) };
  args[1] = (CsArg) { NULL, cs_value_new_proxy (a, m->k) };
  args[2] = (CsArg) { NULL, cs_value_new_proxy (a, m->v) };
  args[3] = (CsArg) { NULL, cs_value_new_none (a) };
  args[4] = (CsArg) { NULL, cs_value_new_float (a, 0.0) };
  args[5] = (CsArg) { NULL, cs_value_new_bool (a, m->tril >= 0) };
  args[6] = (CsArg) { "scale", m->scale_value ? m->scale_value
                                              : cs_value_new_float (a, m->scale_num) };
  s = cs_stmt_new_call_static (t, cs_op_get (CS_OP_LTORCH_SCALED_DOT_PRODUCT_ATTENTION), NULL,
                               mm2->out, args, G_N_ELEMENTS (args));
  if (!cs_meta_compute (t, s, types, G_N_ELEMENTS (types), &n_types, NULL) || n_types != 1
      || types[0].kind != CS_PROXY_TENSOR || types[0].dtype != out->dtype
      || types[0].rank != out->rank
      || memcmp (types[0].shape, out->shape, out->rank * sizeof (int64_t)) != 0)
    return NULL;
  s->id = mm2->id;
  s->origin = mm2->origin ? mm2->origin : mm2->id;
  s->line = mm2->line;
  s->col = mm2->col;
  s->type_comment = mm2->type_comment;
  s->type_comment_raw = mm2->type_comment_raw;
  s->backward = mm2->backward;
  s->why = CS_ATTENTION_CLAIM_WHY;
  return s;
}

CsTrace *
cs_attention_claim_trace (const CsTrace *trace, const CsPolicy *policy, guint *n_claimed)
{
  CsTrace *t;
  UseInfo u;
  gboolean *drop;
  GPtrArray *stmts;
  guint n = 0;

  g_return_val_if_fail (trace != NULL, NULL);
  if (n_claimed)
    *n_claimed = 0;
  if (policy == NULL || policy->attention != CS_ATTENTION_FUSED)
    return cs_trace_ref ((CsTrace *) trace);

  t = cs_trace_derive_shared (trace, "claim-attention");
  use_info_init (&u, t);
  drop = g_new0 (gboolean, t->n_stmts);
  for (guint i = 0; i < t->n_stmts; i++)
    {
      Match m;
      CsStmt *s;

      if (!match_at (t, &u, i, &m) || drop[m.transpose] || drop[m.mm1] || drop[m.softmax]
          || (m.scale >= 0 && drop[m.scale]) || (m.tril >= 0 && drop[m.tril]))
        continue;
      if ((s = build_sdpa (t, t->stmts[i], &m)) == NULL)
        continue;
      drop[m.transpose] = drop[m.mm1] = drop[m.softmax] = TRUE;
      if (m.scale >= 0)
        drop[m.scale] = TRUE;
      if (m.tril >= 0)
        drop[m.tril] = TRUE;
      t->stmts[i] = s;
      n++;
    }
  use_info_clear (&u);
  if (n == 0)
    {
      g_free (drop);
      cs_trace_unref (t);
      return cs_trace_ref ((CsTrace *) trace);
    }
  stmts = g_ptr_array_sized_new (t->n_stmts);
  for (guint i = 0; i < t->n_stmts; i++)
    if (!drop[i])
      g_ptr_array_add (stmts, t->stmts[i]);
  cs_trace_set_stmts (t, (CsStmt **) stmts->pdata, stmts->len);
  g_ptr_array_free (stmts, TRUE);
  g_free (drop);
  if (n_claimed)
    *n_claimed = n;
  return t;
}
