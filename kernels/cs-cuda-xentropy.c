/* cs-cuda-xentropy.c: the torchcompile_xentropy executor's regions as fused cross-entropy kernels.
 *
 * Thunder's torchcompile_xentropy executor (thunder/executors/torch_compile.py) groups a
 * cross-entropy and the statements around it into `TorchCompileN` regions (core/cs-fuse-regions.c
 * forms them the same way).  Their subsymbols are the pieces of cross_entropy's decomposition
 * (thunder/torch/__init__.py: log_softmax, then _nll_loss_helper's neg, unsqueeze, ne, where,
 * pad, take_along_dim, sum, true_divide) or, in the backward, nll_loss_backward followed by
 * log_softmax_backward.  This file reads a region symbolically: every value it holds gets a
 * role (the logits, the targets, log-softmax, the row losses, their sum, the count of rows not
 * ignored, their mean, the logits' gradient) by checking each statement's arguments against what
 * the decomposition computes.  Statements the executor swept in around the cross-entropy run
 * through the ordinary region codegen (cs_cuda_codegen_region): those on region inputs alone
 * before the kernels (a division or rounding of the logits or the cotangent, a log_softmax
 * along another dim), those reading what the kernels write after them (a division of the loss,
 * the gradient's converts).  A statement that fits neither, one reading values the kernels keep
 * to themselves, or a region output of such a value, is a CS_CUDA_ERROR_UNSUPPORTED error
 * naming the statement, never a silently different result.  Then:
 *
 *  - forward, one block per row: the row of logits is read once (vector loads of up to 16
 *    bytes: 8 bf16 / f16, 4 f32 or 2 f64 elements a load when V allows) with an online max / sum
 *    of exponentials in the accumulation type (f32, f64 when the tensors are f64),
 *    logsumexp = max + log(sum) as ltorch.logsumexp computes it (a row whose max is +-inf or
 *    NaN takes Thunder's shift of 0, in a second read), log-softmax written if the region
 *    outputs it (from the row kept in registers when a thread's share fits: 256 threads, or
 *    1024 for long rows such as bf16 V = 50304; else a second read, mostly from L2), and the
 *    row loss -(x[t] - lse) (0 for rows whose target is ignore_index; NaN for a target out of
 *    range);
 *  - the reduction, one block: the row losses summed in a fixed order, the rows whose target is
 *    not ignore_index counted, sum / count for 'mean' (0 / 0 = NaN as in PyTorch);
 *  - backward, one block per row: nll_loss_backward's grad has one non-zero per row,
 *    gn = -g / count ('mean'), -g ('sum') or -g[r] ('none') at the target and 0 on ignored
 *    rows, so log_softmax_backward's grad - exp(logp) * rowsum(grad) is
 *    exp(logp[j]) * (-gn) + (j == t ? gn : 0), written in the dtype of the region's output
 *    (the converts after it folded in).  logp is one read of the saved log-softmax, or, when the
 *    forward's rows kernel wrote it and nothing else touches it (no program output, no other
 *    step, the logits not written since), recomputed from the logits and the logsumexp: that
 *    rows kernel is then rewritten (take_rows_rec, drop_logp_pass) into its one-pass form
 *    writing the logsumexp [R] instead of log-softmax [R, V], and the saved log-softmax's proxy
 *    is unbound, so the step moves the logits three times (read forward, read backward, the
 *    gradient written) and no [R, V] intermediate;
 *  - the backward fused into that rows kernel (fuse_backward, the default; CASTSCOPE_XENT_FUSED=0
 *    keeps the three passes): when the cotangent, the targets and total_weight are known when
 *    the forward's rows kernel runs (program inputs or values written before it; 'mean''s
 *    total_weight the forward's count of the same targets, then counted by a one-block kernel
 *    inserted before it), the rows kernel computes the gradient above in a second pass over
 *    its row, from registers where a 256-thread block's share of the row fits (kept from pass
 *    1), else from shared memory and registers (two 512-thread blocks an SM, up to 44 KB +
 *    28 registers a thread: bf16 rows up to V = 51200, f32 up to 25600), else reading the row again (the block
 *    read it in pass 1: mostly from L2), and no backward kernel is left: the step reads the
 *    logits once and writes the gradient once.
 *
 * Roundings: log-softmax is rounded to its trace dtype before the row loss reads it (and when
 * the backward recomputes it: x - lse in the forward's accumulation type, rounded the same way,
 * so the values the saved tensor would hold), the sum
 * to its dtype before the mean divides it, the gradient at the target to nll_loss_backward's
 * dtype and the result to every narrower dtype a convert in the region takes it through.
 * Kernel text holds only numbers and dtypes chosen here (no trace text); equal structure gives
 * byte-identical kernels, shared through the program's kernel table and the NVRTC disk cache.
 */
#include "cs-config.h"

#include "cs-cuda-private.h"

#include <math.h>
#include <string.h>

#define XENT_THREADS 256           /* threads per block, but for the rows kernel of a cached row */
#define XENT_CACHE_REGS_256  64    /* registers a thread of a 256-thread block may hold of its row */
#define XENT_CACHE_REGS_1024 32    /* ... of a 1024-thread block (64 registers a thread at most) */
#define XENT_UNROLL 4              /* 16-byte groups a thread loads at once in the one-pass loop */
#define XENT_QUAD_UNROLL 2         /* ... in the other row loops (emit_row_loop's QUAD) */
#define XENT_SPLIT_SMEM 45056      /* bytes of a row a 512-thread block keeps in shared memory (SPLIT) */
#define XENT_SPLIT_REGS 28         /* registers a thread of it keeps of the rest (SPLIT) */

typedef enum
{
  XR_LEAF_F,    /* a float region input, through reshapes and exact converts */
  XR_T,         /* an integer region input (targets, a count), through reshapes */
  XR_VALID,     /* targets != ignore_index */
  XR_TSAFE,     /* where (valid, targets, V) */
  XR_LOGP,      /* log_softmax (logits) along the last dim */
  XR_NEGLOGP,   /* -log_softmax */
  XR_PADNEG,    /* pad (-log_softmax, 0.0) with one column after the last */
  XR_ROWLOSS,   /* per-row loss: -logp[target], 0 for ignored rows */
  XR_SUM,       /* sum of the row losses */
  XR_COUNT,     /* number of rows whose target is not ignore_index */
  XR_MEAN,      /* SUM / COUNT */
  XR_GNLL,      /* nll_loss_backward's result */
  XR_GX,        /* log_softmax_backward (GNLL, logp), through reshapes and converts */
  XR_EPI,       /* computed after the kernels from what they write (and region inputs) */
} XRole;

typedef struct
{
  XRole    role;     /* what the value is; the fields below by role */
  CsProxy *leaf;     /* LEAF_F, T: the region input the value is */
  CsDtype  round;    /* LEAF_F, GX: the narrowest float dtype the value went through */
  int64_t  ignore;   /* VALID, TSAFE: the ignore_index compared with */
  int64_t  fill;     /* TSAFE: the index ignored rows take (V for the pad column) */
} XVal;

typedef enum { XRED_NONE, XRED_SUM, XRED_MEAN } XRed;

typedef struct
{
  GHashTable *vals;        /* CsProxy* -> XVal* */
  const char *label;       /* the region's name, for errors */

  /* forward */
  gboolean    fwd;         /* a log-softmax was found */
  CsProxy    *x;           /* logits (region input) */
  int64_t     R, V;        /* rows, vocabulary */
  CsDtype     logp_dtype;  /* log_softmax's output dtype */
  CsProxy    *t;           /* targets (region input), NULL when no loss reads them */
  int64_t     ignore;      /* ignore_index of the loss */
  CsDtype     row_dtype;   /* dtype of the row losses */
  CsDtype     sum_dtype;   /* dtype of their sum */

  /* backward */
  gboolean    bwd;         /* an nll_loss_backward was found */
  CsProxy    *g;           /* its cotangent (region input) */
  CsProxy    *lp;          /* the saved log-softmax (region input) */
  CsProxy    *bt;          /* targets */
  CsProxy    *tw;          /* total_weight (region input) or NULL */
  XRed        bred;        /* its reduction */
  int64_t     bignore;     /* its ignore_index */
  int64_t     bR, bV;      /* rows, classes of the saved log-softmax */
  CsDtype     gnll_dtype;  /* dtype of nll_loss_backward's result */
  gboolean    gx_seen;     /* a log_softmax_backward consumed it */

  /* elementwise statements around the cross-entropy, run by the region codegen */
  GPtrArray  *pro;         /* element-type CsStmt*: on region inputs only, before the kernels */
  GPtrArray  *epi;         /* element-type CsStmt*: on what the kernels write, after them */
  GHashTable *used;        /* CsProxy*: read by a statement that is not in pro */
} XCtx;

/* ------------------------------------------------------------------------------------------ */
/* Reading the region                                                                          */

static gboolean
unsupported (XCtx *c, const CsStmt *st, GError **error, const char *fmt, ...) G_GNUC_PRINTF (4, 5);

static gboolean
unsupported (XCtx *c, const CsStmt *st, GError **error, const char *fmt, ...)
{
  va_list ap;
  g_autofree char *msg = NULL;

  va_start (ap, fmt);
  msg = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  if (st != NULL && st->line)
    g_set_error (error, CS_CUDA_ERROR, CS_CUDA_ERROR_UNSUPPORTED,
                 "line %u:%u: %s%s%s: %s (the fused cross-entropy kernels of --device cuda run "
                 "log_softmax, nll_loss or cross_entropy with weight=None and label_smoothing=0, "
                 "and their backward)", st->line, st->col, c->label,
                 g_strcmp0 (st->callee, c->label) != 0 ? ": " : "",
                 g_strcmp0 (st->callee, c->label) != 0 && st->callee ? st->callee : "", msg);
  else
    g_set_error (error, CS_CUDA_ERROR, CS_CUDA_ERROR_UNSUPPORTED, "%s: %s%s%s", c->label,
                 st && st->callee ? st->callee : "", st && st->callee ? ": " : "", msg);
  return FALSE;
}

static XVal *
val_of (XCtx *c, const CsValue *v)
{
  if (v == NULL || v->kind != CS_VALUE_PROXY)
    return NULL;
  return g_hash_table_lookup (c->vals, v->u.proxy);
}

/* The role of @st's positional operand @i (the first operand, or the second of an elementwise
 * op: the ops of one case differ in their schemas' names for it). */
static XVal *
operand_val (XCtx *c, const CsStmt *st, guint i)
{
  return val_of (c, cs_stmt_get_arg (st, i, NULL));
}

/* The role of @st's argument @name, read through the op's schema. */
static XVal *
arg_val (XCtx *c, const CsStmt *st, CsArgName name)
{
  return val_of (c, cs_stmt_arg (st, name));
}

static void
set_val (XCtx *c, CsProxy *y, const XVal *v)
{
  XVal *n = g_new (XVal, 1);

  *n = *v;
  g_hash_table_insert (c->vals, y, n);
}

/* @v as an int: a literal, or a number proxy with a known int value. */
static gboolean
value_int (const CsValue *v, int64_t *out)
{
  if (v == NULL)
    return FALSE;
  if (v->kind == CS_VALUE_INT)
    {
      *out = v->u.i;
      return TRUE;
    }
  if (v->kind == CS_VALUE_PROXY && v->u.proxy->kind == CS_PROXY_NUMBER && v->u.proxy->has_value
      && v->u.proxy->value && v->u.proxy->value->kind == CS_VALUE_INT)
    {
      *out = v->u.proxy->value->u.i;
      return TRUE;
    }
  return FALSE;
}

/* @st's argument @name (through the op's schema) as an int; FALSE when absent or not an int. */
static gboolean
arg_int (const CsStmt *st, CsArgName name, int64_t *out)
{
  return value_int (cs_stmt_arg (st, name), out);
}

/* TRUE when @st's argument @name (through the op's schema) is absent or None. */
static gboolean
arg_none (const CsStmt *st, CsArgName name)
{
  const CsValue *v = cs_stmt_arg (st, name);

  return v == NULL || v->kind == CS_VALUE_NONE;
}

/* @st's string argument @name (through the op's schema); @dflt when absent, NULL when it is
 * not a string. */
static const char *
arg_string (const CsStmt *st, CsArgName name, const char *dflt)
{
  const CsValue *v = cs_stmt_arg (st, name);

  if (v == NULL)
    return dflt;
  return v->kind == CS_VALUE_STRING ? v->u.s : NULL;
}

static gboolean
parse_reduction (const char *s, XRed *out)
{
  if (g_strcmp0 (s, "mean") == 0)
    *out = XRED_MEAN;
  else if (g_strcmp0 (s, "sum") == 0)
    *out = XRED_SUM;
  else if (g_strcmp0 (s, "none") == 0)
    *out = XRED_NONE;
  else
    return FALSE;
  return TRUE;
}

static int64_t
numel (const CsProxy *p)
{
  return cs_shape_numel (p->shape, p->rank);
}

/* TRUE when every value of float dtype @from is one of @to (bf16 and f16 are not nested). */
static gboolean
exact_convert (CsDtype from, CsDtype to)
{
  if (from == to || to == CS_DTYPE_F64)
    return TRUE;
  if (to == CS_DTYPE_F32)
    return from == CS_DTYPE_BF16 || from == CS_DTYPE_F16;
  return FALSE;
}

/* The dim argument @name of @st (through the op's schema), normalised against @rank; FALSE when
 * it is not the last dim. */
static gboolean
last_dim_arg (const CsStmt *st, CsArgName name, guint rank)
{
  int64_t d;

  if (!arg_int (st, name, &d))
    return FALSE;
  if (d < 0)
    d += rank;
  return rank > 0 && d == (int64_t) rank - 1;
}

static gboolean
is_float_tensor (const CsProxy *p)
{
  return p->kind == CS_PROXY_TENSOR && p->typed && cs_dtype_is_float (p->dtype);
}

static gboolean
is_int_tensor (const CsProxy *p)
{
  return p->kind == CS_PROXY_TENSOR && p->typed
         && (p->dtype == CS_DTYPE_I64 || p->dtype == CS_DTYPE_I32);
}

/* The forward's one loss: its targets and ignore_index agree with any seen before. */
static gboolean
note_loss (XCtx *c, const CsStmt *st, CsProxy *t, int64_t ignore, GError **error)
{
  if (c->t != NULL && (c->t != t || c->ignore != ignore))
    return unsupported (c, st, error, "a second loss with other targets or another ignore_index");
  if (numel (t) != c->R)
    return unsupported (c, st, error, "targets of %" G_GINT64_FORMAT " elements for %" G_GINT64_FORMAT
                        " rows", numel (t), c->R);
  c->t = t;
  c->ignore = ignore;
  return TRUE;
}

/* Records the forward's log-softmax of @x (rank >= 1, along its last dim) with output @y. */
static gboolean
note_logsoftmax (XCtx *c, const CsStmt *st, const XVal *x, const CsProxy *xp, CsDtype ydt, GError **error)
{
  int64_t V = xp->rank ? xp->shape[xp->rank - 1] : 1;

  if (c->fwd && (c->x != x->leaf || c->V != V))
    return unsupported (c, st, error, "a second log-softmax in one region");
  if (V < 1 || numel (xp) < 1)
    return unsupported (c, st, error, "log-softmax of an empty tensor");
  c->fwd = TRUE;
  c->x = x->leaf;
  c->V = V;
  c->R = numel (xp) / V;
  c->logp_dtype = ydt;
  return TRUE;
}

static gboolean interp (XCtx *c, CsStmt *st, guint depth, GError **error);

typedef enum { AROUND_NONE, AROUND_PRO, AROUND_EPI } XAround;

/* Whether @st (no cross-entropy op) can run through the region codegen around the kernels: PRO
 * when every tensor it reads is a region input (or made from them by PRO statements), EPI when
 * it reads values the kernels write (log-softmax, row losses, sum, count, mean, gradient) and
 * otherwise region inputs.  Values the kernels keep to themselves (the mask, -log-softmax, the
 * gradient of nll_loss) cannot be read: NONE. */
static XAround
around (XCtx *c, const CsStmt *st)
{
  g_autoptr(GPtrArray) ins = g_ptr_array_new ();
  g_autoptr(GPtrArray) outs = g_ptr_array_new ();
  gboolean epi = FALSE;

  cs_stmt_collect_inputs (st, ins);
  cs_stmt_collect_outputs (st, outs);
  if (outs->len == 0 || cs_op_is_fusion (st->op))
    return AROUND_NONE;
  for (guint i = 0; i < outs->len; i++)
    {
      CsProxy *o = g_ptr_array_index (outs, i);

      if (o->kind != CS_PROXY_TENSOR || !o->typed)
        return AROUND_NONE;
    }
  for (guint i = 0; i < ins->len; i++)
    {
      CsProxy *x = g_ptr_array_index (ins, i);
      XVal *v = g_hash_table_lookup (c->vals, x);

      if (x->kind != CS_PROXY_TENSOR)
        continue;
      if (v == NULL)
        return AROUND_NONE;
      switch (v->role)
        {
        case XR_LEAF_F: case XR_T:
          break;
        case XR_LOGP: case XR_ROWLOSS: case XR_SUM: case XR_COUNT: case XR_MEAN: case XR_GX: case XR_EPI:
          epi = TRUE;
          break;
        default:
          return AROUND_NONE;
        }
    }
  return epi ? AROUND_EPI : AROUND_PRO;
}

/* Records @st in @list (c->pro or c->epi) and gives its outputs their role: a PRO output is a
 * value of its own (a region input to the kernels), an EPI output is EPI. */
static gboolean
add_around (XCtx *c, CsStmt *st, GPtrArray *list)
{
  g_autoptr(GPtrArray) outs = g_ptr_array_new ();

  g_ptr_array_add (list, st);
  cs_stmt_collect_outputs (st, outs);
  for (guint i = 0; i < outs->len; i++)
    {
      CsProxy *o = g_ptr_array_index (outs, i);
      XVal v = { 0 };

      v.leaf = o;
      v.round = o->dtype;
      v.role = list == c->epi ? XR_EPI : cs_dtype_is_float (o->dtype) ? XR_LEAF_F : XR_T;
      set_val (c, o, &v);
    }
  return TRUE;
}

static gboolean
interp_subs (XCtx *c, CsStmt *st, guint depth, GError **error)
{
  g_autoptr(GPtrArray) outs = g_ptr_array_new ();

  if (st->n_subs == 0 || depth > 32)
    return unsupported (c, st, error, "not an operation of a cross-entropy");
  for (guint i = 0; i < st->n_subs; i++)
    if (!interp (c, st->subs[i], depth + 1, error))
      return FALSE;
  cs_stmt_collect_outputs (st, outs);
  for (guint i = 0; i < outs->len; i++)
    if (!g_hash_table_contains (c->vals, g_ptr_array_index (outs, i)))
      return unsupported (c, st, error, "its decomposition does not compute %s",
                          ((CsProxy *) g_ptr_array_index (outs, i))->name);
  return TRUE;
}

/* Gives the output of @st a role from its arguments' roles (the comment at the top), or makes
 * it a statement around the kernels, or falls back on its subsymbols; errors name the
 * statement. */
static gboolean
interp_one (XCtx *c, CsStmt *st, guint depth, GError **error)
{
  CsProxy *y;
  CsOpId id;
  XVal *a, *b, nv = { 0 };

  if (st->kind != CS_STMT_CALL)
    return TRUE;
  id = cs_op_semantic (st->op)->id;
  y = cs_stmt_get_output (st);
  a = operand_val (c, st, 0);
  switch (id)
    {
    case CS_OP_PRIM_CONVERT_ELEMENT_TYPE:
    case CS_OP_LTORCH_TO:
      if (y == NULL || a == NULL || y->kind != CS_PROXY_TENSOR || !y->typed)
        break;
      nv = *a;
      if (a->role == XR_LEAF_F && is_float_tensor (y))
        {
          if (!exact_convert (a->round, y->dtype))
            break;   /* a rounding of a region input: computed before the kernels */
        }
      else if (a->role == XR_GX && is_float_tensor (y))
        {
          if (exact_convert (a->round, y->dtype))
            ;
          else if (a->round == CS_DTYPE_F32 || a->round == CS_DTYPE_F64)
            nv.round = y->dtype;
          else
            return unsupported (c, st, error, "the gradient is rounded to two 16-bit dtypes");
        }
      else if ((a->role == XR_T || a->role == XR_VALID) && !cs_dtype_is_float (y->dtype))
        ;   /* targets to another integer dtype; the mask as 0/1 integers (sum's decomposition) */
      else if (a->role == XR_COUNT)
        ;
      else if ((a->role == XR_SUM || a->role == XR_MEAN)
               && y->dtype == cs_stmt_get_arg (st, 0, NULL)->u.proxy->dtype)
        ;
      else
        break;
      set_val (c, y, &nv);
      return TRUE;

    case CS_OP_PRIM_SHALLOW_COPY: case CS_OP_LTORCH_CONTIGUOUS:
    case CS_OP_PRIM_RESHAPE: case CS_OP_LTORCH_RESHAPE: case CS_OP_LTORCH_VIEW: case CS_OP_PRIM_VIEW:
    case CS_OP_LTORCH_FLATTEN: case CS_OP_LTORCH_UNSQUEEZE: case CS_OP_LTORCH_SQUEEZE:
    case CS_OP_PRIM_SQUEEZE: case CS_OP_PRIM_BROADCAST_IN_DIM:
      {
        CsValue *av = cs_stmt_get_arg (st, 0, NULL);

        if (y == NULL || a == NULL || y->kind != CS_PROXY_TENSOR || av->kind != CS_VALUE_PROXY
            || numel (y) != numel (av->u.proxy) || y->dtype != av->u.proxy->dtype)
          break;
        /* Every tensor the kernels write is contiguous and a reshape keeps the flat order. */
        if (a->role == XR_NEGLOGP || a->role == XR_PADNEG || a->role == XR_GNLL)
          break;
        set_val (c, y, a);
        return TRUE;
      }

    case CS_OP_LTORCH_LOG_SOFTMAX:
      {
        CsProxy *xp = cs_stmt_get_arg (st, 0, NULL)->u.proxy;

        if (y != NULL && a != NULL && a->role == XR_LEAF_F
            && (!last_dim_arg (st, CS_ARG_DIM, xp->rank) || (c->fwd && c->x != a->leaf)))
          break;   /* along another dim, or of another tensor: the region codegen's (before the kernels) */
        if (y == NULL || a == NULL || a->role != XR_LEAF_F)
          return unsupported (c, st, error, "log_softmax of a value that is not the logits");
        if (!note_logsoftmax (c, st, a, xp, y->dtype, error))
          return FALSE;
        nv.role = XR_LOGP;
        set_val (c, y, &nv);
        return TRUE;
      }

    case CS_OP_LTORCH_NEG: case CS_OP_PRIM_NEG:
      if (y == NULL || a == NULL || a->role != XR_LOGP)
        break;
      nv.role = XR_NEGLOGP;
      set_val (c, y, &nv);
      return TRUE;

    case CS_OP_LTORCH_NE: case CS_OP_PRIM_NE:
      {
        int64_t k;

        if (y == NULL || a == NULL || a->role != XR_T || !value_int (cs_stmt_get_arg (st, 1, NULL), &k))
          break;
        nv.role = XR_VALID;
        nv.leaf = a->leaf;
        nv.ignore = k;
        set_val (c, y, &nv);
        return TRUE;
      }

    case CS_OP_LTORCH_WHERE: case CS_OP_PRIM_WHERE:
      {
        int64_t k;

        b = operand_val (c, st, 1);
        if (y == NULL || a == NULL || b == NULL || a->role != XR_VALID || b->role != XR_T
            || b->leaf != a->leaf || !value_int (cs_stmt_get_arg (st, 2, NULL), &k))
          break;
        nv.role = XR_TSAFE;
        nv.leaf = a->leaf;
        nv.ignore = a->ignore;
        nv.fill = k;
        set_val (c, y, &nv);
        return TRUE;
      }

    case CS_OP_PRIM_PAD:
      {
        CsValue *pv = cs_stmt_arg (st, CS_ARG_PADDING_VALUE), *cfg = cs_stmt_arg (st, CS_ARG_PADDING_CONFIG);
        CsProxy *xp = cs_stmt_get_arg (st, 0, NULL)->u.proxy;
        gboolean ok = a != NULL && a->role == XR_NEGLOGP && pv != NULL && cfg != NULL
                      && (cfg->kind == CS_VALUE_LIST || cfg->kind == CS_VALUE_TUPLE) && cfg->u.seq.n == xp->rank
                      && ((pv->kind == CS_VALUE_FLOAT && pv->u.f == 0.0) || (pv->kind == CS_VALUE_INT && pv->u.i == 0));

        for (guint j = 0; ok && j < xp->rank; j++)
          {
            int64_t lhi[3];
            guint n = 0;

            ok = cs_value_get_int_seq (cfg->u.seq.items[j], lhi, 3, &n) && n == 3 && lhi[0] == 0 && lhi[2] == 0
                 && lhi[1] == (j + 1 == xp->rank ? 1 : 0);
          }
        if (!ok || y == NULL)
          break;
        nv.role = XR_PADNEG;
        set_val (c, y, &nv);
        return TRUE;
      }

    case CS_OP_LTORCH_TAKE_ALONG_DIM: case CS_OP_PRIM_TAKE_ALONG_AXIS:
      {
        CsProxy *xp = cs_stmt_get_arg (st, 0, NULL)->u.proxy;

        b = operand_val (c, st, 1);
        if (y == NULL || a == NULL || b == NULL || a->role != XR_PADNEG || b->role != XR_TSAFE
            || !last_dim_arg (st, CS_ARG_DIM, xp->rank) || b->fill != c->V || numel (y) != c->R)
          break;
        if (!note_loss (c, st, b->leaf, b->ignore, error))
          return FALSE;
        c->row_dtype = y->dtype;
        nv.role = XR_ROWLOSS;
        set_val (c, y, &nv);
        return TRUE;
      }

    case CS_OP_LTORCH_SUM: case CS_OP_PRIM_SUM:
      {
        CsProxy *xp;

        if (y == NULL || a == NULL || y->kind != CS_PROXY_TENSOR)
          break;
        xp = cs_stmt_get_arg (st, 0, NULL)->u.proxy;
        if (numel (y) == numel (xp) && (a->role == XR_SUM || a->role == XR_COUNT || a->role == XR_MEAN
                                        || (a->role == XR_ROWLOSS && numel (y) > 1)))
          {
            set_val (c, y, a);   /* a sum over size-1 dims only */
            return TRUE;
          }
        if (numel (y) != 1)
          break;
        if (a->role == XR_ROWLOSS)
          {
            nv.role = XR_SUM;
            c->sum_dtype = y->dtype;
          }
        else if (a->role == XR_VALID && c->fwd)
          {
            if (!note_loss (c, st, a->leaf, a->ignore, error))
              return FALSE;
            nv.role = XR_COUNT;
          }
        else
          break;
        set_val (c, y, &nv);
        return TRUE;
      }

    case CS_OP_LTORCH_TRUE_DIVIDE: case CS_OP_PRIM_DIV: case CS_OP_LTORCH_DIV:
      b = operand_val (c, st, 1);
      if (y == NULL || a == NULL || b == NULL || a->role != XR_SUM || b->role != XR_COUNT
          || (id == CS_OP_LTORCH_DIV && !arg_none (st, CS_ARG_ROUNDING_MODE)))
        break;
      nv.role = XR_MEAN;
      set_val (c, y, &nv);
      return TRUE;

    case CS_OP_LTORCH_NLL_LOSS:
    case CS_OP_LTORCH_CROSS_ENTROPY:
      {
        gboolean ce = id == CS_OP_LTORCH_CROSS_ENTROPY;
        CsProxy *xp = cs_stmt_get_arg (st, 0, NULL) ? cs_stmt_get_arg (st, 0, NULL)->u.proxy : NULL;
        XRed red;
        int64_t ignore = ce ? -100 : -1;   /* nll_loss's ignore_index=None is -1 in Thunder */
        const CsValue *lsv = cs_stmt_arg_if_declared (st, CS_ARG_LABEL_SMOOTHING);

        b = arg_val (c, st, CS_ARG_TARGET);
        if (y == NULL || a == NULL || b == NULL || b->role != XR_T || xp == NULL || xp->rank != 2)
          return unsupported (c, st, error, "operands other than 2-D logits and 1-D targets");
        if (a->role != (ce ? XR_LEAF_F : XR_LOGP))
          return unsupported (c, st, error, "an input that is not %s", ce ? "the logits" : "a log-softmax");
        if (!arg_none (st, CS_ARG_WEIGHT))
          return unsupported (c, st, error, "a class weight");
        if (ce && (!arg_none (st, CS_ARG_SIZE_AVERAGE) || !arg_none (st, CS_ARG_REDUCE)))
          return unsupported (c, st, error, "size_average or reduce (deprecated) set");
        if (ce && lsv && !(lsv->kind == CS_VALUE_FLOAT && lsv->u.f == 0.0) && !(lsv->kind == CS_VALUE_INT && lsv->u.i == 0))
          return unsupported (c, st, error, "label_smoothing other than 0");
        if (!arg_none (st, CS_ARG_IGNORE_INDEX) && !arg_int (st, CS_ARG_IGNORE_INDEX, &ignore))
          return unsupported (c, st, error, "ignore_index is not an int literal");
        if (!parse_reduction (arg_string (st, CS_ARG_REDUCTION, "mean"), &red))
          return unsupported (c, st, error, "an unknown reduction");
        if (ce && !note_logsoftmax (c, st, a, xp, xp->dtype, error))
          return FALSE;
        if (!note_loss (c, st, b->leaf, ignore, error))
          return FALSE;
        c->row_dtype = c->sum_dtype = y->dtype;
        nv.role = red == XRED_NONE ? XR_ROWLOSS : red == XRED_SUM ? XR_SUM : XR_MEAN;
        set_val (c, y, &nv);
        return TRUE;
      }

    case CS_OP_LTORCH_NLL_LOSS_BACKWARD:
      {
        XVal *gv = a, *lv = arg_val (c, st, CS_ARG_A), *tv = arg_val (c, st, CS_ARG_TARGET);
        const CsValue *twv = cs_stmt_arg (st, CS_ARG_TOTAL_WEIGHT);
        XVal *twval = val_of (c, twv);
        CsProxy *lp;
        XRed red;

        if (y == NULL || gv == NULL || lv == NULL || tv == NULL || gv->role != XR_LEAF_F || lv->role != XR_LEAF_F
            || tv->role != XR_T)
          return unsupported (c, st, error, "operands that are not region inputs (g, log-softmax, targets)");
        lp = lv->leaf;
        if (c->bwd)
          return unsupported (c, st, error, "a second nll_loss_backward in one region");
        if (!arg_none (st, CS_ARG_WEIGHT))
          return unsupported (c, st, error, "a class weight");
        if (!parse_reduction (arg_string (st, CS_ARG_REDUCTION, NULL), &red))
          return unsupported (c, st, error, "an unknown reduction");
        if (!arg_int (st, CS_ARG_IGNORE_INDEX, &c->bignore))
          return unsupported (c, st, error, "ignore_index is not an int literal");
        if (twv != NULL && twv->kind != CS_VALUE_NONE
            && (twval == NULL || (twval->role != XR_T && twval->role != XR_LEAF_F) || numel (twval->leaf) != 1))
          return unsupported (c, st, error, "total_weight is not a one-element region input");
        if (lp->rank != 2 && lp->rank != 1)
          return unsupported (c, st, error, "a log-softmax of rank %u (2-D or 1-D only)", lp->rank);
        c->bR = lp->rank == 2 ? lp->shape[0] : 1;
        c->bV = lp->shape[lp->rank - 1];
        if (c->bR < 1 || c->bV < 1)
          return unsupported (c, st, error, "an empty log-softmax");
        if (numel (tv->leaf) != c->bR || numel (gv->leaf) != (red == XRED_NONE ? c->bR : 1)
            || numel (y) != c->bR * c->bV)
          return unsupported (c, st, error, "shapes of g, targets and log-softmax do not agree");
        c->bwd = TRUE;
        c->g = gv->leaf;
        c->lp = lp;
        c->bt = tv->leaf;
        c->tw = twval ? twval->leaf : NULL;
        c->bred = red;
        c->gnll_dtype = y->dtype;
        nv.role = XR_GNLL;
        set_val (c, y, &nv);
        return TRUE;
      }

    case CS_OP_LTORCH_LOG_SOFTMAX_BACKWARD:
      {
        XVal *ov = arg_val (c, st, CS_ARG_OUTPUT);
        CsProxy *gp = cs_stmt_get_arg (st, 0, NULL)->u.proxy;

        if (y != NULL && a != NULL && a->role != XR_GNLL)
          break;   /* not of a cross-entropy: the region codegen's (before the kernels) */
        if (y == NULL || a == NULL || ov == NULL || a->role != XR_GNLL || ov->role != XR_LEAF_F
            || ov->leaf != c->lp || ov->round != c->lp->dtype || !last_dim_arg (st, CS_ARG_DIM, gp->rank))
          return unsupported (c, st, error, "not the backward of nll_loss_backward's result through the saved log-softmax");
        if (c->gx_seen)
          return unsupported (c, st, error, "a second log_softmax_backward in one region");
        c->gx_seen = TRUE;
        nv.role = XR_GX;
        nv.round = y->dtype;
        set_val (c, y, &nv);
        return TRUE;
      }

    default:
      break;
    }
  switch (around (c, st))
    {
    case AROUND_PRO:
      return add_around (c, st, c->pro);
    case AROUND_EPI:
      return add_around (c, st, c->epi);
    default:
      break;
    }
  if (st->n_subs > 0)
    return interp_subs (c, st, depth, error);
  return unsupported (c, st, error, "not an operation of a cross-entropy (or not on the values it computes)");
}

/* interp_one(), then what @st reads is marked used unless @st runs before the kernels (a PRO
 * value only PRO statements read need not be stored). */
static gboolean
interp (XCtx *c, CsStmt *st, guint depth, GError **error)
{
  guint n_pro = c->pro->len;

  if (!interp_one (c, st, depth, error))
    return FALSE;
  if (c->pro->len == n_pro || g_ptr_array_index (c->pro, c->pro->len - 1) != st)
    {
      g_autoptr(GPtrArray) ins = g_ptr_array_new ();

      cs_stmt_collect_inputs (st, ins);
      for (guint i = 0; i < ins->len; i++)
        g_hash_table_add (c->used, g_ptr_array_index (ins, i));
    }
  return TRUE;
}

/* ------------------------------------------------------------------------------------------ */
/* Kernel text                                                                                 */

static const char *
xstorage (CsDtype dt)
{
  switch (dt)
    {
    case CS_DTYPE_BF16: case CS_DTYPE_F16: case CS_DTYPE_F32: case CS_DTYPE_F64:
    case CS_DTYPE_I32: case CS_DTYPE_I64: case CS_DTYPE_B8:
      return cs_cuda_storage_type (dt);
    default:
      return NULL;
    }
}

/* Element types of one kernel: the accumulation type and its spellings. */
typedef struct
{
  gboolean    dbl;    /* accumulate in double */
  const char *A;      /* "float" / "double" */
} XTypes;

/* An element of dtype @dt read into the accumulation type. */
static char *
x_load (const XTypes *ty, CsDtype dt, const char *e)
{
  switch (dt)
    {
    case CS_DTYPE_BF16: return g_strdup_printf ("((%s) cs_bf2f (%s))", ty->A, e);
    case CS_DTYPE_F16: return g_strdup_printf ("((%s) cs_h2f (%s))", ty->A, e);
    default: return g_strdup_printf ("((%s) (%s))", ty->A, e);
    }
}

/* @e (accumulation type) rounded to dtype @dt, still in the accumulation type. */
static char *
x_round (const XTypes *ty, CsDtype dt, const char *e)
{
  switch (dt)
    {
    case CS_DTYPE_BF16: return g_strdup_printf ("((%s) cs_rbf ((float) (%s)))", ty->A, e);
    case CS_DTYPE_F16: return g_strdup_printf ("((%s) cs_rh ((float) (%s)))", ty->A, e);
    case CS_DTYPE_F32: return ty->dbl ? g_strdup_printf ("((double) (float) (%s))", e) : g_strdup (e);
    default: return g_strdup (e);
    }
}

/* @e stored as dtype @dt. */
static char *
x_store (CsDtype dt, const char *e)
{
  switch (dt)
    {
    case CS_DTYPE_BF16: return g_strdup_printf ("cs_f2bf ((float) (%s))", e);
    case CS_DTYPE_F16: return g_strdup_printf ("cs_f2h ((float) (%s))", e);
    default: return g_strdup_printf ("((%s) (%s))", xstorage (dt), e);
    }
}

static void
x_types (XTypes *ty, gboolean dbl)
{
  ty->dbl = dbl;
  ty->A = dbl ? "double" : "float";
}

static const char *
x_inf (const XTypes *ty)
{
  return ty->dbl ? "__longlong_as_double (0x7ff0000000000000LL)" : "__int_as_float (0x7f800000)";
}

static const char *
x_nan (const XTypes *ty)
{
  return ty->dbl ? "__longlong_as_double (0x7ff8000000000000LL)" : "__int_as_float (0x7fc00000)";
}

/* The 4-element vector type for elements of @bytes bytes, or NULL. */
static const char *
quad_type (gsize bytes)
{
  return bytes == 2 ? "uint2" : bytes == 4 ? "uint4" : NULL;
}

/* The vector type of @bytes (4, 8 or 16) bytes, or NULL. */
static const char *
vec_type (gsize bytes)
{
  return bytes == 4 ? "unsigned int" : bytes == 8 ? "uint2" : bytes == 16 ? "uint4" : NULL;
}

/* Elements a group of the row loop (XLOOP_QUAD) takes for the rows of @V elements of the
 * @n slots @slots: the most that keep every access at most 16 bytes (8 bf16, 4 f32, 2 f64 for
 * the widest tensor), with V and every slot's first element a multiple of it (buffers are
 * 256-byte aligned, so each row's group is aligned to its size); 1 when no group of 2 fits. */
static guint
group_elems (CsCudaProgram *p, const guint *slots, guint n, int64_t V)
{
  gsize es = 1;
  guint ge;

  for (guint i = 0; i < n; i++)
    es = MAX (es, cs_dtype_size_bytes (cs_cuda_program_slot (p, slots[i])->dtype));
  ge = (guint) (16 / es);
  for (; ge > 1; ge /= 2)
    {
      gboolean ok = V % ge == 0;

      for (guint i = 0; ok && i < n; i++)
        {
          CsCudaSlot *s = cs_cuda_program_slot (p, slots[i]);

          ok = s->offset % ge == 0 && vec_type (ge * cs_dtype_size_bytes (s->dtype)) != NULL;
        }
      if (ok)
        break;
    }
  return ge;
}

/* Rows of @V elements of @slot can be read 4 at a time: 2- or 4-byte elements, V % 4 == 0 and
 * a first element aligned to 4 elements (buffers are 256-byte aligned). */
static gboolean
quad_ok (CsCudaProgram *p, guint slot, int64_t V)
{
  CsCudaSlot *s = cs_cuda_program_slot (p, slot);
  gsize es = cs_dtype_size_bytes (s->dtype);

  return quad_type (es) != NULL && V % 4 == 0 && (s->offset % 4) == 0;
}

/* The kernel text `(params)\n{ ... }` of @body with parameters @slots (@is_out parallel). */
static char *
kernel_text (CsCudaProgram *p, const char *body, const guint *slots, const gboolean *is_out, guint n)
{
  GString *text = g_string_new ("(");

  for (guint i = 0; i < n; i++)
    g_string_append_printf (text, "%s%s%s * __restrict__ a%u", i ? ", " : "", is_out[i] ? "" : "const ",
                            xstorage (cs_cuda_program_slot (p, slots[i])->dtype), i);
  g_string_append (text, ")\n{\n  typedef long long ix_t;\n");
  g_string_append (text, body);
  g_string_append (text, "}\n");
  return g_string_free (text, FALSE);
}

/* Sets @step's parameters to @slots (@is_out parallel), its reads, writes and byte count. */
static void
set_step_args (CsCudaProgram *p, CsCudaStep *step, const guint *slots, const gboolean *is_out, guint n)
{
  double bytes = 0;

  g_array_set_size (step->args, 0);
  g_array_set_size (step->reads, 0);
  g_array_set_size (step->writes, 0);
  for (guint i = 0; i < n; i++)
    {
      CsCudaKArg arg = { slots[i] };
      CsCudaSlot *s = cs_cuda_program_slot (p, slots[i]);

      g_array_append_val (step->args, arg);
      g_array_append_val (is_out[i] ? step->writes : step->reads, slots[i]);
      bytes += (double) cs_cuda_slot_numel (s) * (double) cs_dtype_size_bytes (s->dtype);
    }
  step->bytes = bytes;
  step->floor_ms = bytes / (CS_CUDA_PEAK_TBPS * 1e12) * 1e3;
}

/* Adds kernel @body with parameters @slots (@is_out parallel) to the program, shared with an
 * identical kernel already there, and its step (grid @grid blocks of @nt threads). */
static CsCudaStep *
add_kernel (CsCudaProgram *p, const char *body, const guint *slots, const gboolean *is_out, guint n,
            char *label, unsigned int grid, guint nt)
{
  g_autofree char *attrs = g_strdup_printf ("__launch_bounds__(%u)", nt);
  g_autofree char *text = kernel_text (p, body, slots, is_out, n);
  guint k;
  CsCudaStep *step;

  k = cs_cuda_intern_kernel (p, attrs, text);
  step = cs_cuda_program_add_step (p, CS_CUDA_STEP_KERNEL, "fusion", label);
  step->kernel = k;
  step->grid[0] = MAX (grid, 1);
  step->grid[1] = step->grid[2] = 1;
  step->block[0] = nt;
  step->block[1] = step->block[2] = 1;
  set_step_args (p, step, slots, is_out, n);
  return step;
}

/* Gives @step the kernel @body (@nt threads a block, at least @minb blocks an SM when not 0) and
 * parameters @slots: a kernel of its own (or an identical one already there). */
static void
replace_kernel (CsCudaProgram *p, CsCudaStep *step, const char *body, const guint *slots, const gboolean *is_out,
                guint n, guint nt, guint minb)
{
  g_autofree char *attrs = minb ? g_strdup_printf ("__launch_bounds__(%u, %u)", nt, minb)
                                : g_strdup_printf ("__launch_bounds__(%u)", nt);
  g_autofree char *text = kernel_text (p, body, slots, is_out, n);

  /* the kernel it ran before stays in the list until the build renumbers the kernels the
   * steps run (renumber_kernels), which leaves it out */
  step->kernel = cs_cuda_intern_kernel (p, attrs, text);
  step->block[0] = nt;
  set_step_args (p, step, slots, is_out, n);
}

/* Block-wide reduction of the accumulation-type variable @var over @nt threads (every thread
 * gets the total): warp shuffles, then the nt / 32 warp totals in shared memory @sh. */
static void
emit_block_sum (GString *o, const XTypes *ty, const char *var, const char *sh, guint nt)
{
  g_string_append_printf (o,
    "  for (int o_ = 16; o_ > 0; o_ >>= 1)\n"
    "    %s += cs_shfl (%s, o_);\n"
    "  __syncthreads ();\n"
    "  if ((threadIdx.x & 31) == 0)\n"
    "    %s[threadIdx.x >> 5] = %s;\n"
    "  __syncthreads ();\n"
    "  %s = (%s) 0;\n"
    "  for (int w_ = 0; w_ < %d; w_++)\n"
    "    %s += %s[w_];\n",
    var, var, sh, var, var, ty->A, nt / 32, var, sh);
}

/* The online max / sum-exp update of (m, s, fl) by the accumulation-type expression @v. */
static void
emit_online (GString *o, const XTypes *ty, const char *v, const char *ind)
{
  const char *E = ty->dbl ? "exp" : "expf";

  g_string_append_printf (o,
    "%s{\n"
    "%s  const %s v_ = %s;\n"
    "%s  if (v_ != v_) fl |= 1;\n"
    "%s  else if (v_ == INF_) fl |= 2;\n"
    "%s  if (v_ > m) { s = s * %s (m - v_) + (%s) 1; m = v_; }\n"
    "%s  else if (m > -INF_) s += %s (v_ - m);\n"
    "%s}\n",
    ind, ind, ty->A, v, ind, ind, ind, E, ty->A, ind, E, ind);
}

/* The update of (m, s) by one group of @ge elements, element k read by @ld (accumulation
 * type): the group's max m_g first, s = s * e^(m - max(m, m_g)) + sum e^(v - max(m, m_g)), one
 * rescale a group, e^x as exp2f (x * log2 e) in f32 (exp in f64); NaN and +inf are found after
 * the loop (the flag of the one-pass loop in rows_kernel_text). */
static void
emit_group_update (GString *o, const XTypes *ty, guint ge, const char *ld, const char *ind)
{
  const char *ex_r = ty->dbl ? "exp (m - mg)" : "exp2f ((m - mg) * 1.4426950408889634f)";
  const char *ex_s = ty->dbl ? "exp (v_[k] - ms)" : "exp2f ((v_[k] - ms) * 1.4426950408889634f)";

  g_string_append_printf (o,
    "%s%s v_[%u], mg = -INF_;\n"
    "#pragma unroll\n"
    "%sfor (int k = 0; k < %u; k++)\n"
    "%s  {\n"
    "%s    v_[k] = %s;\n"
    "%s    mg = v_[k] > mg ? v_[k] : mg;\n"
    "%s  }\n"
    "%sif (mg > m)\n"
    "%s  {\n"
    "%s    s = s * %s;\n"
    "%s    m = mg;\n"
    "%s  }\n"
    "%sconst %s ms = m == -INF_ ? (%s) 0 : m;\n"
    "#pragma unroll\n"
    "%sfor (int k = 0; k < %u; k++)\n"
    "%s  s += %s;\n",
    ind, ty->A, ge, ind, ge, ind, ind, ld, ind, ind, ind, ind, ind, ex_r, ind, ind, ind, ty->A, ty->A,
    ind, ge, ind, ex_s);
}

/* One tensor of a row loop (emit_row_loop). */
typedef struct
{
  const char *name;   /* "q0": union variable */
  const char *ptr;    /* row pointer expression */
  CsDtype     dtype;  /* element dtype */
  gboolean    out;    /* written by the loop (else read) */
} XQuad;

/* How a row loop reads the first (input) tensor of its XQuads. */
typedef enum
{
  XLOOP_SCALAR,   /* element j by element: `j`, loads written by the caller */
  XLOOP_QUAD,     /* groups of @ge elements: `qN.e[k]`, global vector loads and stores */
  XLOOP_FILL,     /* the groups of q0 loaded into rc[] (an unrolled count per thread), then CACHED */
  XLOOP_CACHED,   /* the same groups, q0 taken from rc[] instead of memory */
} XLoop;

/* A loop of the block's @nt threads over the row's elements j = 0..V-1: @elem is the
 * per-element code with `j` and, for QUAD / FILL / CACHED, `k` (0..ge-1 within the group) and
 * `qN.e[k]` for each tensor of @q (inputs loaded before, outputs stored after).  QUAD takes
 * groups of @ge elements (group_elems()), FILL and CACHED groups of 4; FILL and CACHED run @nc
 * groups per thread (c_ = 0..nc-1, group threadIdx.x + c_ * nt) so that rc[c_] is a register. */
static void
emit_row_loop (GString *o, XLoop mode, guint nt, guint nc, guint ge, const XQuad *q, guint nq, const char *elem)
{
  if (mode != XLOOP_QUAD)
    ge = 4;
  if (mode == XLOOP_SCALAR)
    {
      g_string_append_printf (o, "  for (ix_t j = threadIdx.x; j < V; j += %u)\n    {\n", nt);
      g_string_append (o, elem);
      g_string_append (o, "    }\n");
      return;
    }
  if (mode == XLOOP_FILL)
    {
      /* every load first (independent, in flight together), then the groups from rc[] */
      g_string_append_printf (o, "#pragma unroll\n  for (int c_ = 0; c_ < %u; c_++)\n    {\n"
                              "      const ix_t g_ = threadIdx.x + (ix_t) c_ * %u;\n"
                              "      if (g_ < V / 4)\n        rc[c_] = ((const %s *) (%s))[g_];\n    }\n",
                              nc, nt, quad_type (cs_dtype_size_bytes (q[0].dtype)), q[0].ptr);
      mode = XLOOP_CACHED;
    }
  if (mode == XLOOP_QUAD)
    {
      /* XENT_QUAD_UNROLL groups a thread an iteration, every input's loads first (in flight
       * together), then each group computed and stored */
      g_string_append_printf (o, "  for (ix_t g0_ = threadIdx.x; g0_ < V / %u; g0_ += %u)\n    {\n", ge,
                              XENT_QUAD_UNROLL * nt);
      for (guint i = 0; i < nq; i++)
        {
          const char *qt = vec_type (ge * cs_dtype_size_bytes (q[i].dtype));

          if (q[i].out)
            continue;
          g_string_append_printf (o, "      union { %s u; %s e[%u]; } %s_[%u];\n", qt, xstorage (q[i].dtype), ge,
                                  q[i].name, XENT_QUAD_UNROLL);
          g_string_append_printf (o, "#pragma unroll\n      for (int u_ = 0; u_ < %u; u_++)\n"
                                  "        if (g0_ + u_ * %u < V / %u)\n"
                                  "          %s_[u_].u = ((const %s *) (%s))[g0_ + u_ * %u];\n",
                                  XENT_QUAD_UNROLL, nt, ge, q[i].name, qt, q[i].ptr, nt);
        }
      g_string_append_printf (o, "#pragma unroll\n      for (int u_ = 0; u_ < %u; u_++)\n        {\n"
                              "      const ix_t g_ = g0_ + u_ * %u;\n"
                              "      if (g_ >= V / %u)\n        break;\n", XENT_QUAD_UNROLL, nt, ge);
      for (guint i = 0; i < nq; i++)
        {
          const char *qt = vec_type (ge * cs_dtype_size_bytes (q[i].dtype));

          if (q[i].out)
            g_string_append_printf (o, "      union { %s u; %s e[%u]; } %s;\n", qt, xstorage (q[i].dtype), ge, q[i].name);
          else
            g_string_append_printf (o, "      auto &%s = %s_[u_];\n", q[i].name, q[i].name);
        }
      g_string_append_printf (o, "#pragma unroll\n      for (int k = 0; k < %u; k++)\n        {\n"
                              "          const ix_t j = g_ * %u + k;\n          (void) j;\n", ge, ge);
      g_string_append (o, elem);
      g_string_append (o, "        }\n");
      for (guint i = 0; i < nq; i++)
        if (q[i].out)
          g_string_append_printf (o, "      ((%s *) (%s))[g_] = %s.u;\n", vec_type (ge * cs_dtype_size_bytes (q[i].dtype)),
                                  q[i].ptr, q[i].name);
      g_string_append (o, "        }\n    }\n");
      return;
    }
  g_string_append_printf (o, "#pragma unroll\n  for (int c_ = 0; c_ < %u; c_++)\n    {\n"
                          "      const ix_t g_ = threadIdx.x + (ix_t) c_ * %u;\n"
                          "      if (g_ >= V / 4)\n        break;\n", nc, nt);
  for (guint i = 0; i < nq; i++)
    {
      const char *qt = vec_type (ge * cs_dtype_size_bytes (q[i].dtype));

      g_string_append_printf (o, "      union { %s u; %s e[%u]; } %s;\n", qt, xstorage (q[i].dtype), ge, q[i].name);
      if (q[i].out)
        continue;
      if (i == 0 && mode == XLOOP_CACHED)
        g_string_append_printf (o, "      %s.u = rc[c_];\n", q[i].name);
      else
        g_string_append_printf (o, "      %s.u = ((const %s *) (%s))[g_];\n", q[i].name, qt, q[i].ptr);
    }
  g_string_append_printf (o, "#pragma unroll\n      for (int k = 0; k < %u; k++)\n        {\n"
                          "          const ix_t j = g_ * %u + k;\n          (void) j;\n", ge, ge);
  g_string_append (o, elem);
  g_string_append (o, "        }\n");
  for (guint i = 0; i < nq; i++)
    if (q[i].out)
      g_string_append_printf (o, "      ((%s *) (%s))[g_] = %s.u;\n", vec_type (ge * cs_dtype_size_bytes (q[i].dtype)),
                              q[i].ptr, q[i].name);
  g_string_append (o, "    }\n");
}

/* ------------------------------------------------------------------------------------------ */
/* Forward                                                                                     */

/* A contiguous slot of @proxy's values (a copy when the bound slot is strided). */
static gboolean
contiguous_input (CsCudaProgram *p, XCtx *c, CsProxy *proxy, guint *out, GError **error)
{
  gint s = cs_cuda_program_lookup (p, proxy);

  if (s < 0)
    return unsupported (c, NULL, error, "input %s is not a known tensor", proxy->name);
  if (!cs_cuda_slot_is_contiguous (cs_cuda_program_slot (p, (guint) s))
      && !cs_cuda_codegen_copy (p, (guint) s, c->label, (guint *) &s, error))
    return FALSE;
  *out = (guint) s;
  return TRUE;
}

typedef struct
{
  CsProxy *proxy;   /* region output */
  XRole    role;    /* SUM, COUNT or MEAN */
  guint    slot;    /* its new slot */
} XScalarOut;

/* The block merge of the threads' (m, s, fl) and the row's logsumexp `lse`: max + log(sum), or
 * Thunder's shift of 0 (NaN with a NaN) for a row whose max is not finite, in a second read of
 * the row through @ld_x (`x[j]`). */
static void
emit_merge_lse (GString *o, const XTypes *ty, guint nt, const char *ld_x)
{
  const char *E = ty->dbl ? "exp" : "expf", *L = ty->dbl ? "log" : "logf";
  guint nw = nt / 32;

  g_string_append_printf (o,
    "  for (int o_ = 16; o_ > 0; o_ >>= 1)\n"
    "    {\n"
    "      const %s m2 = cs_shfl (m, o_), s2 = cs_shfl (s, o_);\n"
    "      const %s mn = m2 > m ? m2 : m;\n"
    "      fl |= __shfl_xor_sync (0xffffffffu, fl, o_);\n"
    "      s = (m > -INF_ ? s * %s (m - mn) : (%s) 0) + (m2 > -INF_ ? s2 * %s (m2 - mn) : (%s) 0);\n"
    "      m = mn;\n"
    "    }\n"
    "  if ((threadIdx.x & 31) == 0)\n"
    "    {\n"
    "      sh_m[threadIdx.x >> 5] = m;\n"
    "      sh_s[threadIdx.x >> 5] = s;\n"
    "      sh_f[threadIdx.x >> 5] = fl;\n"
    "    }\n"
    "  __syncthreads ();\n"
    "  m = sh_m[0];\n"
    "  for (int w_ = 1; w_ < %u; w_++)\n"
    "    {\n"
    "      m = sh_m[w_] > m ? sh_m[w_] : m;\n"
    "      fl |= sh_f[w_];\n"
    "    }\n"
    "  fl |= sh_f[0];\n"
    "  s = (%s) 0;\n"
    "  for (int w_ = 0; w_ < %u; w_++)\n"
    "    if (sh_m[w_] > -INF_)\n"
    "      s += sh_s[w_] * %s (sh_m[w_] - m);\n",
    ty->A, ty->A, E, ty->A, E, ty->A, nw, ty->A, nw, E);
  g_string_append_printf (o, "  %s lse;\n  if (fl == 0 && m > -INF_)\n    lse = %s (s) + m;\n  else\n    {\n", ty->A, L);
  g_string_append_printf (o, "      const %s sh = (fl & 1) ? %s : (%s) 0;\n      %s s2 = (%s) 0;\n",
                          ty->A, x_nan (ty), ty->A, ty->A, ty->A);
  g_string_append_printf (o, "      for (ix_t j = threadIdx.x; j < V; j += %u)\n        s2 += %s (%s - sh);\n", nt, E, ld_x);
  emit_block_sum (o, ty, "s2", "sh_s", nt);
  g_string_append_printf (o, "      lse = %s (s2) + sh;\n    }\n", L);
}

/* The rows kernel's parameters (gen_forward): the same parameters give the same text. */
typedef struct
{
  XTypes   ty;           /* accumulation type */
  int64_t  V;            /* row length */
  CsDtype  xdt;          /* logits */
  CsDtype  logp_dtype;   /* log-softmax (written, or the dtype it is rounded to) */
  CsDtype  row_dtype;    /* row losses */
  int64_t  ignore;       /* ignore_index */
  gboolean have_rows;    /* targets read, row losses written */
  gboolean write_logp;   /* log-softmax written */
  gboolean write_lse;    /* logsumexp written, [R] in the accumulation type */
  guint    ge1;          /* elements a group of pass 1 (group_elems() of x), 1: element by element */
  guint    ge2;          /* of the log-softmax pass when not cached (of x and log-softmax) */
  gboolean cache_ok;     /* the 4-element groups of x (and log-softmax) may be kept in registers */

  /* the backward fused in (fuse_backward): the gradient written from the row as pass 2 */
  gboolean write_grad;   /* the logits' gradient written; write_logp and write_lse are then FALSE */
  CsDtype  g_dtype;      /* the cotangent */
  gboolean g_rows;       /* the cotangent has one value a row ('none'), else one */
  gboolean have_tw;      /* the cotangent divided by total_weight (a parameter) */
  CsDtype  tw_dtype;     /* total_weight */
  gboolean own_bt;       /* the gradient's targets are a parameter of their own (else the loss's) */
  int64_t  bignore;      /* nll_loss_backward's ignore_index */
  CsDtype  gnll_dtype;   /* nll_loss_backward's result */
  CsDtype  odt;          /* the gradient as stored */
  CsDtype  ord;          /* the narrowest dtype the gradient is rounded to */
  guint    nt;           /* threads a block */
  guint    gcache;       /* groups of ge1 elements of x a thread keeps in registers from pass 1
                            for the gradient (0: the gradient pass reads the row again) */
  guint    geg;          /* elements a group of that second read (group_elems() of x and the
                            gradient), 1: element by element */
  guint    gsmem;        /* with gcache: the row's first groups (16 bytes each) kept in shared
                            memory instead, the registers holding groups gsmem.. (0: none) */
} XRowsK;

/* The body of the rows kernel for @k, its parameters a0 = logits, then (have_rows) targets,
 * (write_logp) log-softmax, (have_rows) row losses, (write_lse) logsumexp; @nt_out: its threads
 * a block (one block per row). */
static char *
rows_kernel_text (const XRowsK *k, guint *nt_out)
{
  g_autoptr(GString) o = g_string_new ("");
  const XTypes *ty = &k->ty;
  guint n = 0, ax, at = 0, al = 0, ar = 0, alse = 0, ag = 0, atw = 0, abt = 0, agx = 0;
  guint nt = XENT_THREADS, nw, nc = 0;
  g_autofree char *ld_x = x_load (ty, k->xdt, "x[j]");

  ax = n++;
  if (k->have_rows)
    at = n++;
  if (k->write_logp)
    al = n++;
  if (k->have_rows)
    ar = n++;
  if (k->write_lse)
    alse = n++;
  if (k->write_grad)
    {
      ag = n++;
      if (k->have_tw)
        atw = n++;
      if (k->own_bt)
        abt = n++;
      agx = n++;
      nt = k->nt;
    }
  /* With log-softmax written, the row is read twice: from registers when a thread's share of
   * it fits (4-element groups, unrolled), at 1024 threads a block for long rows. */
  if (k->write_logp && k->cache_ok)
    {
      int64_t G = k->V / 4;
      guint qr = (guint) cs_dtype_size_bytes (k->xdt);   /* 32-bit registers per group */

      if ((G + 255) / 256 * qr <= XENT_CACHE_REGS_256)
        nc = (guint) ((G + 255) / 256);
      else if ((G + 1023) / 1024 * qr <= XENT_CACHE_REGS_1024)
        {
          nt = 1024;
          nc = (guint) ((G + 1023) / 1024);
        }
    }
  nw = nt / 32;
  g_string_append_printf (o, "  const ix_t V = %" G_GINT64_FORMAT "LL;\n", k->V);
  g_string_append_printf (o, "  const %s INF_ = %s;\n", ty->A, x_inf (ty));
  g_string_append (o, "  const ix_t row = (ix_t) blockIdx.x;\n");
  g_string_append_printf (o, "  const %s *x = a%u + row * V;\n", xstorage (k->xdt), ax);
  g_string_append_printf (o, "  __shared__ %s sh_m[%u], sh_s[%u];\n  __shared__ int sh_f[%u];\n", ty->A, nw, nw, nw);
  g_string_append_printf (o, "  %s m = -INF_, s = (%s) 0;\n  int fl = 0;\n", ty->A, ty->A);
  /* pass 1: online max and sum of exponentials */
  if (k->write_grad && k->gcache > 0)
    {
      /* every group of the thread's share loaded into rc[] first (in flight together), then
       * each group's update as in the loop below; rc[] stays for the gradient pass */
      guint ge = k->ge1;
      const char *vt = vec_type (ge * cs_dtype_size_bytes (k->xdt));
      g_autofree char *ld_g = x_load (ty, k->xdt, "rc[c_].e[k]");

      g_autofree char *base = k->gsmem ? g_strdup_printf ("%uLL + ", k->gsmem) : g_strdup ("");

      if (k->gsmem)
        {
          /* groups 0..gsmem-1 copied to shared memory asynchronously, each thread its own (so
           * it waits for its copies only) */
          g_string_append_printf (o,
            "  __shared__ %s sx[%u];\n"
            "  for (int i_ = threadIdx.x; i_ < %u; i_ += %u)\n"
            "    cs_cp_async16 (&sx[i_], (const %s *) x + i_);\n"
            "  cs_cp_async_commit ();\n", vt, k->gsmem, k->gsmem, nt, vt);
        }
      g_string_append_printf (o,
        "  union { %s u; %s e[%u]; } rc[%u];\n"
        "#pragma unroll\n"
        "  for (int c_ = 0; c_ < %u; c_++)\n"
        "    if (%sthreadIdx.x + (ix_t) c_ * %u < V / %u)\n"
        "      rc[c_].u = ((const %s *) x)[%sthreadIdx.x + (ix_t) c_ * %u];\n"
        "#pragma unroll\n"
        "  for (int c_ = 0; c_ < %u; c_++)\n"
        "    if (%sthreadIdx.x + (ix_t) c_ * %u < V / %u)\n"
        "      {\n",
        vt, xstorage (k->xdt), ge, k->gcache, k->gcache, base, nt, ge, vt, base, nt, k->gcache, base, nt, ge);
      emit_group_update (o, ty, ge, ld_g, "        ");
      g_string_append (o, "      }\n");
      if (k->gsmem)
        {
          g_autofree char *ld_s = x_load (ty, k->xdt, "q_.e[k]");

          g_string_append_printf (o,
            "  cs_cp_async_wait0 ();\n"
            "  for (int i_ = threadIdx.x; i_ < %u; i_ += %u)\n"
            "    {\n"
            "      union { %s u; %s e[%u]; } q_;\n"
            "      q_.u = sx[i_];\n", k->gsmem, nt, vt, xstorage (k->xdt), ge);
          emit_group_update (o, ty, ge, ld_s, "      ");
          g_string_append (o, "    }\n");
        }
      g_string_append (o, "  fl = m == INF_ ? 2 : s != s ? 1 : 0;\n");
    }
  else if (!k->write_logp && k->ge1 > 1)
    {
      /* XENT_UNROLL groups of ge1 elements loaded together, then each group's max m_g taken
       * first: s = s * e^(m - max(m, m_g)) + sum e^(v - max(m, m_g)), one rescale a group, e^x
       * as exp2f (x * log2 e) in f32 (exp in f64).  NaN and +inf are found after the loop, not
       * per element: a +inf element makes m +inf (flag 2: s is then NaN, e^(inf - inf)), a NaN
       * one makes s NaN for good (NaN * 0 is NaN, so the rescale keeps it; the exponent is
       * taken against 0 while m is -inf): flag 1 when m is not +inf.  A thread with both has
       * flag 2 only; the shift of 0 then still gives NaN (the second read sums e^NaN). */
      guint ge = k->ge1;
      const char *vt = vec_type (ge * cs_dtype_size_bytes (k->xdt));
      g_autofree char *ld_g = x_load (ty, k->xdt, "q_[u_].e[k]");

      g_string_append_printf (o,
        "  for (ix_t g0 = threadIdx.x; g0 < V / %u; g0 += %u)\n"
        "    {\n"
        "      union { %s u; %s e[%u]; } q_[%u];\n"
        "#pragma unroll\n"
        "      for (int u_ = 0; u_ < %u; u_++)\n"
        "        if (g0 + u_ * %u < V / %u)\n"
        "          q_[u_].u = ((const %s *) x)[g0 + u_ * %u];\n"
        "#pragma unroll\n"
        "      for (int u_ = 0; u_ < %u; u_++)\n"
        "        if (g0 + u_ * %u < V / %u)\n"
        "          {\n",
        ge, XENT_UNROLL * nt, vt, xstorage (k->xdt), ge, XENT_UNROLL, XENT_UNROLL, nt, ge, vt, nt,
        XENT_UNROLL, nt, ge);
      emit_group_update (o, ty, ge, ld_g, "            ");
      g_string_append (o, "          }\n    }\n  fl = m == INF_ ? 2 : s != s ? 1 : 0;\n");
    }
  else
    {
      g_autoptr(GString) e = g_string_new ("");
      XQuad q = { "q0", "x", k->xdt, FALSE };
      XLoop l1 = nc > 0 ? XLOOP_FILL : k->ge1 > 1 ? XLOOP_QUAD : XLOOP_SCALAR;
      g_autofree char *ld_q = x_load (ty, k->xdt, "q0.e[k]");

      if (nc > 0)
        g_string_append_printf (o, "  %s rc[%u];\n", quad_type (cs_dtype_size_bytes (k->xdt)), nc);
      emit_online (e, ty, l1 != XLOOP_SCALAR ? ld_q : ld_x, l1 != XLOOP_SCALAR ? "          " : "      ");
      emit_row_loop (o, l1, nt, nc, k->ge1, &q, 1, e->str);
    }
  emit_merge_lse (o, ty, nt, ld_x);
  if (k->write_lse)
    g_string_append_printf (o, "  if (threadIdx.x == 0)\n    a%u[row] = lse;\n", alse);
  /* pass 2: log-softmax */
  if (k->write_logp)
    {
      g_autoptr(GString) e = g_string_new ("");
      XLoop l2 = nc > 0 ? XLOOP_CACHED : k->ge2 > 1 ? XLOOP_QUAD : XLOOP_SCALAR;
      g_autofree char *ld_q = x_load (ty, k->xdt, "q0.e[k]");
      g_autofree char *diff = g_strdup_printf ("%s - lse", l2 != XLOOP_SCALAR ? ld_q : ld_x);
      g_autofree char *sv = x_store (k->logp_dtype, diff);
      XQuad q[2] = { { "q0", "x", k->xdt, FALSE }, { "q1", "y", k->logp_dtype, TRUE } };

      g_string_append_printf (o, "  %s *y = a%u + row * V;\n", xstorage (k->logp_dtype), al);
      if (l2 != XLOOP_SCALAR)
        g_string_append_printf (e, "          q1.e[k] = %s;\n", sv);
      else
        g_string_append_printf (e, "      y[j] = %s;\n", sv);
      emit_row_loop (o, l2, nt, nc, k->ge2, q, 2, e->str);
    }
  /* the row loss -(logp[t]) with logp[t] = x[t] - lse rounded to log-softmax's dtype */
  if (k->have_rows)
    {
      g_autofree char *xt = x_load (ty, k->xdt, "x[tg]");
      g_autofree char *lp = g_strdup_printf ("%s - lse", xt);
      g_autofree char *lpr = x_round (ty, k->logp_dtype, lp);
      g_autofree char *neg = g_strdup_printf ("-(%s)", lpr);
      g_autofree char *nr = x_round (ty, k->row_dtype, neg);
      g_autofree char *st_r = x_store (k->row_dtype, "loss");

      g_string_append_printf (o,
        "  if (threadIdx.x == 0)\n"
        "    {\n"
        "      const long long tg = (long long) a%u[row];\n"
        "      %s loss;\n"
        "      if (tg == %" G_GINT64_FORMAT "LL)\n"
        "        loss = (%s) 0;\n"
        "      else if (tg < 0 || tg >= V)\n"
        "        loss = %s;\n"
        "      else\n"
        "        loss = %s;\n"
        "      a%u[row] = %s;\n"
        "    }\n",
        at, ty->A, k->ignore, ty->A, x_nan (ty), nr, ar, st_r);
    }
  /* pass 2 (the backward fused in): nll_loss_backward's value gn at the target (0 on an ignored
   * row, NaN for a target out of range), then log_softmax_backward's
   * (j == t ? gn : 0) - exp (logp[j]) * gn with logp[j] = x[j] - lse rounded as the forward
   * would have stored it, from rc[] or a second read of the row (from L2: the block read it
   * in pass 1) */
  if (k->write_grad)
    {
      g_autoptr(GString) e = g_string_new ("");
      gboolean cached = k->gcache > 0;
      guint ge = cached ? k->ge1 : k->geg;
      g_autofree char *ga = g_strdup_printf (k->g_rows ? "a%u[row]" : "a%u[0]", ag);
      g_autofree char *ta = g_strdup_printf ("a%u[0]", atw);
      g_autofree char *gval = x_load (ty, k->g_dtype, ga);
      g_autofree char *twv = k->have_tw ? x_load (ty, k->tw_dtype, ta) : NULL;
      g_autofree char *gn = k->have_tw ? g_strdup_printf ("-(%s) / %s", gval, twv) : g_strdup_printf ("-(%s)", gval);
      g_autofree char *gnr = x_round (ty, k->gnll_dtype, gn);
      g_autofree char *ld = x_load (ty, k->xdt, cached ? "rc[c_].e[k]" : ge > 1 ? "q0.e[k]" : "x[j]");
      g_autofree char *diff = g_strdup_printf ("%s - lse", ld);
      g_autofree char *lpv = x_round (ty, k->logp_dtype, diff);
      g_autofree char *ex = ty->dbl ? g_strdup_printf ("exp (%s)", lpv)
                                    : g_strdup_printf ("exp2f ((%s) * 1.4426950408889634f)", lpv);
      g_autofree char *v = g_strdup_printf ("(j == tb ? gn : (%s) 0) - %s * gn", ty->A, ex);
      g_autofree char *vr = k->ord != k->odt ? x_round (ty, k->ord, v) : g_strdup (v);
      g_autofree char *sv = x_store (k->odt, vr);

      g_string_append_printf (o, "  %s *y = a%u + row * V;\n", xstorage (k->odt), agx);
      g_string_append_printf (o, "  const long long tb = (long long) a%u[row];\n", k->own_bt ? abt : at);
      g_string_append_printf (o, "  %s gn;\n  if (tb == %" G_GINT64_FORMAT "LL)\n    gn = (%s) 0;\n"
                              "  else if (tb < 0 || tb >= V)\n    gn = %s;\n  else\n    gn = %s;\n",
                              ty->A, k->bignore, ty->A, x_nan (ty), gnr);
      if (cached)
        {
          /* the group's gradient stored in 16-byte pieces (one or two), or one narrower store */
          gsize ob = ge * cs_dtype_size_bytes (k->odt);
          guint np = ob > 16 ? (guint) (ob / 16) : 1;
          const char *ot = ob > 16 ? "uint4" : vec_type (ob);

          g_autofree char *base = k->gsmem ? g_strdup_printf ("%uLL + ", k->gsmem) : g_strdup ("");

          if (k->gsmem)
            {
              /* the groups in shared memory (rc[] below: those in registers) */
              g_autofree char *ld_s = x_load (ty, k->xdt, "rs_.e[k]");
              g_autofree char *diff_s = g_strdup_printf ("%s - lse", ld_s);
              g_autofree char *lpv_s = x_round (ty, k->logp_dtype, diff_s);
              g_autofree char *ex_s = ty->dbl ? g_strdup_printf ("exp (%s)", lpv_s)
                                              : g_strdup_printf ("exp2f ((%s) * 1.4426950408889634f)", lpv_s);
              g_autofree char *v_s = g_strdup_printf ("(j == tb ? gn : (%s) 0) - %s * gn", ty->A, ex_s);
              g_autofree char *vr_s = k->ord != k->odt ? x_round (ty, k->ord, v_s) : g_strdup (v_s);
              g_autofree char *sv_s = x_store (k->odt, vr_s);

              g_string_append_printf (o,
                "  for (int i_ = threadIdx.x; i_ < %u; i_ += %u)\n"
                "    {\n"
                "      const ix_t g_ = i_;\n"
                "      union { %s u; %s e[%u]; } rs_;\n"
                "      rs_.u = sx[i_];\n"
                "      union { %s u[%u]; %s e[%u]; } q1;\n"
                "#pragma unroll\n"
                "      for (int k = 0; k < %u; k++)\n"
                "        {\n"
                "          const ix_t j = g_ * %u + k;\n"
                "          q1.e[k] = %s;\n"
                "        }\n"
                "#pragma unroll\n"
                "      for (int h_ = 0; h_ < %u; h_++)\n"
                "        ((%s *) y)[g_ * %u + h_] = q1.u[h_];\n"
                "    }\n",
                k->gsmem, nt, vec_type (ge * cs_dtype_size_bytes (k->xdt)), xstorage (k->xdt), ge, ot, np,
                xstorage (k->odt), ge, ge, ge, sv_s, np, ot, np);
            }
          g_string_append_printf (o,
            "#pragma unroll\n"
            "  for (int c_ = 0; c_ < %u; c_++)\n"
            "    {\n"
            "      const ix_t g_ = %sthreadIdx.x + (ix_t) c_ * %u;\n"
            "      if (g_ >= V / %u)\n"
            "        break;\n"
            "      union { %s u[%u]; %s e[%u]; } q1;\n"
            "#pragma unroll\n"
            "      for (int k = 0; k < %u; k++)\n"
            "        {\n"
            "          const ix_t j = g_ * %u + k;\n"
            "          q1.e[k] = %s;\n"
            "        }\n"
            "#pragma unroll\n"
            "      for (int h_ = 0; h_ < %u; h_++)\n"
            "        ((%s *) y)[g_ * %u + h_] = q1.u[h_];\n"
            "    }\n",
            k->gcache, base, nt, ge, ot, np, xstorage (k->odt), ge, ge, ge, sv, np, ot, np);
        }
      else
        {
          XQuad q[2] = { { "q0", "x", k->xdt, FALSE }, { "q1", "y", k->odt, TRUE } };

          if (ge > 1)
            g_string_append_printf (e, "          q1.e[k] = %s;\n", sv);
          else
            g_string_append_printf (e, "      y[j] = %s;\n", sv);
          emit_row_loop (o, ge > 1 ? XLOOP_QUAD : XLOOP_SCALAR, nt, 0, ge, q, 2, e->str);
        }
    }
  *nt_out = nt;
  return g_string_free (g_steal_pointer (&o), FALSE);
}

/* ------------------------------------------------------------------------------------------ */
/* The forward's log-softmax, recomputed by the backward                                        */

/* A rows step that writes log-softmax (gen_forward), and the kernel it becomes when the
 * backward recomputes log-softmax from the logits and the logsumexp instead of reading it
 * (gen_backward): the same kernel without the log-softmax pass, writing the logsumexp. */
typedef struct
{
  CsCudaStep    *step;       /* the step */
  guint          index;      /* its index in p->steps */
  char          *source;     /* its kernel's source when recorded */
  XRowsK         k;          /* the kernel's parameters */
  guint          slots[4];   /* the step's parameters */
  gboolean       is_out[4];  /* which of them it writes */
  guint          n;          /* their number */
  guint          lps;        /* of them, the log-softmax */
  gint           ts;         /* the forward's targets slot, or -1 */
  gint           count;      /* the slot of the region's count of rows not ignored (the
                                reduction kernel's output, counting ts), or -1 */
} XRowsRec;

static void
rows_rec_free (XRowsRec *r)
{
  g_free (r->source);
  g_free (r);
}

/* Records in p->xent_rows @step (the last of @p, rows kernel @k writing log-softmax, parameters @slots). */
static void
note_rows_step (CsCudaProgram *p, CsCudaStep *step, const XRowsK *k, const guint *slots, const gboolean *is_out,
                guint n, guint lps)
{
  XRowsRec *r = g_new0 (XRowsRec, 1);

  r->step = step;
  r->index = p->steps->len - 1;
  r->source = g_strdup (((CsCudaKernel *) g_ptr_array_index (p->kernels, step->kernel))->source);
  r->k = *k;
  memcpy (r->slots, slots, n * sizeof (guint));
  memcpy (r->is_out, is_out, n * sizeof (gboolean));
  r->n = n;
  r->lps = lps;
  r->ts = r->count = -1;
  if (p->xent_rows == NULL)
    p->xent_rows = g_ptr_array_new_with_free_func ((GDestroyNotify) rows_rec_free);
  g_ptr_array_add (p->xent_rows, r);
}

static guint
slot_buffer (CsCudaProgram *p, guint slot)
{
  return cs_cuda_program_slot (p, slot)->buffer;
}

static gboolean
step_touches (CsCudaProgram *p, const CsCudaStep *s, guint buffer, gboolean writes_only)
{
  for (guint l = writes_only ? 1 : 0; l < 2; l++)
    {
      GArray *a = l ? s->writes : s->reads;

      for (guint j = 0; j < a->len; j++)
        if (slot_buffer (p, g_array_index (a, guint, j)) == buffer)
          return TRUE;
    }
  return FALSE;
}

/* The record of the forward rows step that wrote the log-softmax the backward reads through
 * slot @lp (R x V rows), removed from the table, when the backward may recompute it instead:
 * that step (of the forward) is the only one that touched the log-softmax's buffer, the
 * buffer is no program output, @lp views it whole, and no step after it wrote the logits'
 * buffer.  NULL otherwise. */
static XRowsRec *
take_rows_rec (CsCudaProgram *p, guint lp, int64_t R, int64_t V)
{
  CsCudaSlot *ls = cs_cuda_program_slot (p, lp);
  guint b = ls->buffer;
  gint writer = -1;
  XRowsRec *rec = NULL;

  if (!p->backward_active || !cs_cuda_slot_is_contiguous (ls) || (int64_t) cs_cuda_slot_numel (ls) != R * V)
    return NULL;
  for (guint i = 0; i < p->steps->len; i++)
    if (step_touches (p, g_ptr_array_index (p->steps, i), b, FALSE))
      {
        if (writer >= 0)
          return NULL;
        writer = (gint) i;
      }
  if (writer < 0)
    return NULL;
  for (guint i = 0; i < p->output_slots->len; i++)
    if (slot_buffer (p, g_array_index (p->output_slots, guint, i)) == b)
      return NULL;
  for (guint i = 0; p->xent_rows != NULL && i < p->xent_rows->len; i++)
    {
      XRowsRec *r = g_ptr_array_index (p->xent_rows, i);
      CsCudaStep *s = g_ptr_array_index (p->steps, writer);

      if (r->step == s && r->index == (guint) writer && !s->backward && s->kind == CS_CUDA_STEP_KERNEL
          && strcmp (((CsCudaKernel *) g_ptr_array_index (p->kernels, s->kernel))->source, r->source) == 0)
        {
          rec = g_ptr_array_steal_index (p->xent_rows, i);
          break;
        }
    }
  if (rec == NULL)
    return NULL;
  if (rec->k.V != V || slot_buffer (p, rec->lps) != b || cs_cuda_program_slot (p, rec->lps)->offset != ls->offset
      || cs_cuda_program_slot (p, rec->lps)->dtype != ls->dtype)
    goto no;
  for (guint i = (guint) writer + 1; i < p->steps->len; i++)
    if (step_touches (p, g_ptr_array_index (p->steps, i), slot_buffer (p, rec->slots[0]), TRUE))
      goto no;
  return rec;
no:
  rows_rec_free (rec);
  return NULL;
}

/* Turns @rec's step into the rows kernel without the log-softmax pass, writing the logsumexp
 * [R] to a new slot instead (the last parameter); returns that slot. */
static guint
drop_logp_pass (CsCudaProgram *p, XRowsRec *rec, int64_t R)
{
  XRowsK k = rec->k;
  guint slots[4], n = 0, nt, lse;
  gboolean is_out[4];
  g_autofree char *body = NULL;

  lse = cs_cuda_program_new_slot (p, k.ty.dbl ? CS_DTYPE_F64 : CS_DTYPE_F32, &R, 1);
  for (guint i = 0; i < rec->n; i++)
    if (rec->slots[i] != rec->lps)
      {
        slots[n] = rec->slots[i];
        is_out[n++] = rec->is_out[i];
      }
  slots[n] = lse;
  is_out[n++] = TRUE;
  k.write_logp = FALSE;
  k.write_lse = TRUE;
  body = rows_kernel_text (&k, &nt);
  replace_kernel (p, rec->step, body, slots, is_out, n, nt, 0);
  return lse;
}

/* How fuse_backward fuses (CASTSCOPE_XENT_FUSED): unset or "1", AUTO: the gradient from the row
 * kept in registers at 256 threads when a thread's share fits, else as SPLIT where the row fits
 * that, else from a second read at 512 threads; "0", OFF: the three-pass form (rows,
 * reduction, backward); "reread", "reread512", "reread1024": always the second read, at 256,
 * 512 or 1024 threads a block; "split", SPLIT: rows of 16-byte groups that fit XENT_SPLIT_SMEM
 * + XENT_SPLIT_REGS kept in shared memory and registers at two blocks of 512 an SM (else a
 * second read at 256 threads). */
typedef enum { XFUSE_OFF, XFUSE_AUTO, XFUSE_REREAD, XFUSE_SPLIT } XFuse;

static XFuse
fuse_mode (guint *nt)
{
  static gsize warned;   /* a value not understood is reported once a process */
  const char *env = g_getenv ("CASTSCOPE_XENT_FUSED");

  *nt = XENT_THREADS;
  if (g_strcmp0 (env, "0") == 0)
    return XFUSE_OFF;
  if (g_strcmp0 (env, "split") == 0)
    return XFUSE_SPLIT;
  if (g_strcmp0 (env, "reread") == 0 || g_strcmp0 (env, "reread512") == 0
      || g_strcmp0 (env, "reread1024") == 0)
    {
      guint64 v = g_ascii_strtoull (env + 6, NULL, 10);

      if (v == 512 || v == 1024)
        *nt = (guint) v;
      return XFUSE_REREAD;
    }
  if (env != NULL && *env != '\0' && strcmp (env, "1") != 0 && g_once_init_enter (&warned))
    {
      g_printerr ("castscope: CASTSCOPE_XENT_FUSED=%s ignored: not 0, 1, split, reread, "
                  "reread512 or reread1024; using 1\n", env);
      g_once_init_leave (&warned, 1);
    }
  return XFUSE_AUTO;
}

/* TRUE when a step from index @from on writes @buffer. */
static gboolean
written_from (CsCudaProgram *p, guint buffer, guint from)
{
  for (guint i = from; i < p->steps->len; i++)
    if (step_touches (p, g_ptr_array_index (p->steps, i), buffer, TRUE))
      return TRUE;
  return FALSE;
}

/* TRUE when slots @a and @b view the same elements (buffer, offset, dtype, size). */
static gboolean
same_view (CsCudaProgram *p, guint a, guint b)
{
  CsCudaSlot *x = cs_cuda_program_slot (p, a), *y = cs_cuda_program_slot (p, b);

  return x->buffer == y->buffer && x->offset == y->offset && x->dtype == y->dtype
         && cs_cuda_slot_numel (x) == cs_cuda_slot_numel (y);
}

/* A one-block kernel counting the targets of slot @ts (@R of them) that are not @ignore, into a
 * new slot shaped as @like in its dtype (the value the reduction kernel writes for the count),
 * labelled with region @label, inserted before step @rec (whose index and that of every later record move up by one);
 * returns the new slot. */
static guint
insert_count_step (CsCudaProgram *p, XRowsRec *rec, guint ts, int64_t R, int64_t ignore, guint like, const char *label)
{
  CsCudaSlot *ls = cs_cuda_program_slot (p, like);
  CsDtype dt = ls->dtype;
  guint nv = cs_cuda_program_new_slot (p, dt, ls->shape, ls->rank);
  guint slots[2] = { ts, nv };
  gboolean is_out[2] = { FALSE, TRUE };
  g_autoptr(GString) o = g_string_new ("");
  g_autofree char *val = g_strdup_printf (cs_dtype_is_float (dt) ? "(%s) n" : "n", rec->k.ty.A);
  g_autofree char *stv = dt == CS_DTYPE_B8 ? g_strdup_printf ("(%s) ? 1 : 0", val) : x_store (dt, val);
  CsCudaStep *step;
  guint at = rec->index;

  /* 1024 threads, each one's loads unrolled (in flight together) */
  g_string_append (o, "  __shared__ long long sh_n[32];\n  long long n = 0;\n");
  g_string_append_printf (o, "#pragma unroll 8\n  for (ix_t r = threadIdx.x; r < %" G_GINT64_FORMAT "LL; r += 1024)\n"
                          "    n += (long long) a0[r] != %" G_GINT64_FORMAT "LL;\n", R, ignore);
  g_string_append (o,
    "  for (int o_ = 16; o_ > 0; o_ >>= 1)\n"
    "    n += __shfl_xor_sync (0xffffffffu, n, o_);\n"
    "  if ((threadIdx.x & 31) == 0)\n"
    "    sh_n[threadIdx.x >> 5] = n;\n"
    "  __syncthreads ();\n"
    "  if (threadIdx.x != 0)\n"
    "    return;\n"
    "  n = 0;\n"
    "  for (int w_ = 0; w_ < 32; w_++)\n"
    "    n += sh_n[w_];\n");
  g_string_append_printf (o, "  a1[0] = %s;\n", stv);
  step = add_kernel (p, o->str, slots, is_out, 2, g_strdup_printf ("%s cross-entropy count %" G_GINT64_FORMAT " rows",
                                                                   label, R), 1, 1024);
  step->backward = FALSE;
  g_ptr_array_steal_index (p->steps, p->steps->len - 1);
  g_ptr_array_insert (p->steps, (gint) at, step);
  for (guint i = 0; p->xent_rows != NULL && i < p->xent_rows->len; i++)
    {
      XRowsRec *r = g_ptr_array_index (p->xent_rows, i);

      if (r->index >= at)
        r->index++;
    }
  rec->index++;
  return nv;
}

/* The backward of @c fused into @rec's forward rows step, when everything the gradient needs is
 * known when that step runs: the cotangent and the targets are written by no step from it on
 * (program inputs, or values of the forward before it), and 'mean''s total_weight either too or
 * it is the forward's count of the same targets (then counted by a kernel inserted before the
 * step: insert_count_step).  The step becomes the rows kernel with a second pass over the row
 * writing the gradient (dtype @odt, rounded to @ord) to a new slot *@gx, instead of the
 * log-softmax: the logits are read from DRAM once for both.  FALSE (nothing changed) when it
 * does not fit or CASTSCOPE_XENT_FUSED=0; @dbl: the backward accumulates in f64. */
static gboolean
fuse_backward (CsCudaProgram *p, XCtx *c, XRowsRec *rec, gboolean dbl, CsDtype odt, CsDtype ord, gboolean have_tw,
               guint *gx)
{
  XRowsK k = rec->k;
  guint mode_nt, slots[10], n = 0, nt, xs = rec->slots[0], gxs, tv = 0;
  gboolean is_out[10];
  gint gs = cs_cuda_program_lookup (p, c->g), bts = cs_cuda_program_lookup (p, c->bt);
  gint tws = have_tw ? cs_cuda_program_lookup (p, c->tw) : -1;
  gboolean count_here = FALSE;
  int64_t shape2[2] = { c->bR, c->bV };
  XFuse mode = fuse_mode (&mode_nt);
  g_autofree char *body = NULL;

  if (mode == XFUSE_OFF || (dbl && !k.ty.dbl) || gs < 0 || bts < 0 || (have_tw && tws < 0))
    return FALSE;
  if (!cs_cuda_slot_is_contiguous (cs_cuda_program_slot (p, (guint) gs))
      || !cs_cuda_slot_is_contiguous (cs_cuda_program_slot (p, (guint) bts))
      || written_from (p, slot_buffer (p, (guint) gs), rec->index)
      || written_from (p, slot_buffer (p, (guint) bts), rec->index))
    return FALSE;
  if (have_tw)
    {
      if (!cs_cuda_slot_is_contiguous (cs_cuda_program_slot (p, (guint) tws)))
        return FALSE;
      if (!written_from (p, slot_buffer (p, (guint) tws), rec->index))
        tv = (guint) tws;
      else if (rec->count >= 0 && rec->ts >= 0 && same_view (p, (guint) tws, (guint) rec->count)
               && same_view (p, (guint) bts, (guint) rec->ts) && k.ignore == c->bignore)
        count_here = TRUE;
      else
        return FALSE;
    }
  if (count_here)
    tv = insert_count_step (p, rec, (guint) rec->ts, c->bR, c->bignore, (guint) tws, c->label);
  gxs = cs_cuda_program_new_slot (p, odt, shape2, 2);
  for (guint i = 0; i < rec->n; i++)
    if (rec->slots[i] != rec->lps)
      {
        slots[n] = rec->slots[i];
        is_out[n++] = rec->is_out[i];
      }
  k.write_logp = FALSE;
  k.write_lse = FALSE;
  k.write_grad = TRUE;
  k.g_dtype = c->g->dtype;
  k.g_rows = c->bred == XRED_NONE;
  k.have_tw = have_tw;
  k.tw_dtype = have_tw ? cs_cuda_program_slot (p, tv)->dtype : CS_DTYPE_F32;
  k.own_bt = !(k.have_rows && same_view (p, (guint) bts, rec->slots[1]));
  k.bignore = c->bignore;
  k.gnll_dtype = c->gnll_dtype;
  k.odt = odt;
  k.ord = ord;
  slots[n] = (guint) gs; is_out[n++] = FALSE;
  if (have_tw)
    {
      slots[n] = tv; is_out[n++] = FALSE;
    }
  if (k.own_bt)
    {
      slots[n] = (guint) bts; is_out[n++] = FALSE;
    }
  slots[n] = gxs; is_out[n++] = TRUE;
  {
    guint xg[2] = { xs, gxs };

    k.geg = group_elems (p, xg, 2, c->bV);
  }
  k.nt = mode_nt;
  k.gcache = 0;
  k.gsmem = 0;
  if (mode == XFUSE_AUTO && k.ge1 > 1)
    {
      /* the thread's groups of ge1 elements (16 bytes, or 8 / 4 for rows that need narrower
       * groups) in registers at 256 threads a block; longer rows: as SPLIT below, else read
       * again at 512 threads (one 1024-thread block an SM holding the row in registers leaves
       * no other block to overlap its loads: run 42) */
      int64_t G = c->bV / k.ge1;
      guint rpg = (guint) (k.ge1 * cs_dtype_size_bytes (k.xdt) / 4);

      if ((G + 255) / 256 * rpg <= XENT_CACHE_REGS_256)
        {
          k.nt = 256;
          k.gcache = (guint) ((G + 255) / 256);
        }
      else
        {
          mode = XFUSE_SPLIT;
          k.nt = 512;
        }
    }
  if (mode == XFUSE_SPLIT && k.ge1 * cs_dtype_size_bytes (k.xdt) == 16)
    {
      /* two blocks of 512 an SM, each with its row's first groups in shared memory (up to
       * XENT_SPLIT_SMEM bytes) and the rest in registers (up to XENT_SPLIT_REGS): one block
       * loads while the other computes */
      int64_t G = c->bV / k.ge1, S = MIN (G, XENT_SPLIT_SMEM / 16);
      guint nr = (guint) ((G - S + 511) / 512);

      if (nr * 4 <= XENT_SPLIT_REGS)
        {
          k.nt = 512;
          k.gcache = MAX (nr, 1);
          k.gsmem = (guint) S;
        }
    }
  body = rows_kernel_text (&k, &nt);
  replace_kernel (p, rec->step, body, slots, is_out, n, nt, k.gsmem > 0 ? 2 : 0);
  {
    char *label = g_strdup_printf ("%s and %s gradient", rec->step->label, c->label);

    g_free (rec->step->label);
    rec->step->label = label;
  }
  *gx = gxs;
  return TRUE;
}

static gboolean
gen_forward (CsCudaProgram *p, XCtx *c, GPtrArray *outs, GError **error)
{
  XTypes ty;
  guint xs, ts = 0, lps = 0, rows = 0;
  gboolean have_rows = FALSE;
  gboolean want_logp = FALSE, want_rows = FALSE, need_rows = FALSE;
  g_autoptr(GArray) scal = g_array_new (FALSE, FALSE, sizeof (XScalarOut));
  int64_t shape2[2] = { c->R, c->V }, shape1[1] = { c->R };
  CsDtype xdt = c->x->dtype;
  gboolean dbl;
  CsCudaStep *step;
  XRowsRec *rec = NULL;

  for (guint i = 0; i < outs->len; i++)
    {
      CsProxy *o = g_ptr_array_index (outs, i);
      XVal *v = g_hash_table_lookup (c->vals, o);

      if (v == NULL)
        continue;
      if (v->role == XR_LOGP)
        want_logp = TRUE;
      else if (v->role == XR_ROWLOSS)
        want_rows = TRUE;
      else if (v->role == XR_SUM || v->role == XR_COUNT || v->role == XR_MEAN)
        need_rows |= v->role != XR_COUNT;
    }
  dbl = xdt == CS_DTYPE_F64 || c->logp_dtype == CS_DTYPE_F64 || (c->t && c->row_dtype == CS_DTYPE_F64);
  x_types (&ty, dbl);
  if (!contiguous_input (p, c, c->x, &xs, error))
    return FALSE;
  if ((gint64) cs_cuda_slot_numel (cs_cuda_program_slot (p, xs)) != c->R * c->V)
    return unsupported (c, NULL, error, "logits of %zu elements for %" G_GINT64_FORMAT " x %" G_GINT64_FORMAT,
                        cs_cuda_slot_numel (cs_cuda_program_slot (p, xs)), c->R, c->V);
  if (c->t != NULL && !contiguous_input (p, c, c->t, &ts, error))
    return FALSE;
  if (!xstorage (xdt) || !cs_dtype_is_float (xdt) || !cs_dtype_is_float (c->logp_dtype)
      || (c->t && (!xstorage (c->t->dtype) || !cs_dtype_is_float (c->row_dtype))))
    return unsupported (c, NULL, error, "dtypes the kernels do not store");

  /* 1. the rows kernel */
  {
    XRowsK k = { 0 };
    guint slots[4], n = 0;
    gboolean is_out[4];
    guint nt;
    g_autofree char *body = NULL;

    if (want_logp)
      lps = cs_cuda_program_new_slot (p, c->logp_dtype, shape2, 2);
    if (c->t && (want_rows || need_rows))
      {
        rows = cs_cuda_program_new_slot (p, c->row_dtype, shape1, 1);
        have_rows = TRUE;
      }
    k.ty = ty;
    k.V = c->V;
    k.xdt = xdt;
    k.logp_dtype = c->logp_dtype;
    k.row_dtype = have_rows ? c->row_dtype : CS_DTYPE_F32;
    k.ignore = c->ignore;
    k.have_rows = have_rows;
    k.write_logp = want_logp;
    k.ge1 = group_elems (p, &xs, 1, c->V);
    if (want_logp)
      {
        guint xl[2] = { xs, lps };

        k.ge2 = group_elems (p, xl, 2, c->V);
        k.cache_ok = quad_ok (p, xs, c->V) && quad_ok (p, lps, c->V);
      }
    slots[n] = xs; is_out[n++] = FALSE;
    if (have_rows)
      {
        slots[n] = ts; is_out[n++] = FALSE;
      }
    if (want_logp)
      {
        slots[n] = lps; is_out[n++] = TRUE;
      }
    if (have_rows)
      {
        slots[n] = rows; is_out[n++] = TRUE;
      }
    body = rows_kernel_text (&k, &nt);
    step = add_kernel (p, body, slots, is_out, n,
                       g_strdup_printf ("%s cross-entropy rows %" G_GINT64_FORMAT " x %" G_GINT64_FORMAT, c->label,
                                        c->R, c->V),
                       (unsigned int) c->R, nt);
    if (want_logp)
      {
        note_rows_step (p, step, &k, slots, is_out, n, lps);
        rec = g_ptr_array_index (p->xent_rows, p->xent_rows->len - 1);
        if (c->t != NULL)
          rec->ts = (gint) ts;
      }
  }

  /* 2. outputs; the reduction kernel for the scalars */
  for (guint i = 0; i < outs->len; i++)
    {
      CsProxy *o = g_ptr_array_index (outs, i);
      XVal *v = g_hash_table_lookup (c->vals, o);
      XScalarOut so = { o, 0, 0 };

      if (v == NULL)
        continue;
      switch (v->role)
        {
        case XR_LOGP:
          if (o->dtype != c->logp_dtype)
            return unsupported (c, NULL, error, "output %s: log-softmax in another dtype", o->name);
          cs_cuda_program_bind (p, o, cs_cuda_program_reshape_view (p, lps, o->shape, o->rank));
          break;
        case XR_ROWLOSS:
          if (o->dtype != c->row_dtype || !have_rows)
            return unsupported (c, NULL, error, "output %s: row losses in another dtype", o->name);
          cs_cuda_program_bind (p, o, cs_cuda_program_reshape_view (p, rows, o->shape, o->rank));
          break;
        case XR_SUM: case XR_COUNT: case XR_MEAN:
          if (c->t == NULL || !xstorage (o->dtype))
            return unsupported (c, NULL, error, "output %s: a loss without targets", o->name);
          so.role = v->role;
          so.slot = cs_cuda_program_new_slot (p, o->dtype, o->shape, o->rank);
          if (v->role == XR_COUNT && rec != NULL && rec->count < 0)
            rec->count = (gint) so.slot;
          g_array_append_val (scal, so);
          cs_cuda_program_bind (p, o, so.slot);
          break;
        default:
          break;
        }
    }
  if (scal->len > 0)
    {
      g_autoptr(GString) o = g_string_new ("");
      guint slots[8], n = 0;
      gboolean is_out[8];
      g_autofree char *ld_r = x_load (&ty, c->row_dtype, "a0[r]");
      g_autofree char *sumr = NULL;
      CsDtype sdt = c->sum_dtype;

      if (scal->len > 6)
        return unsupported (c, NULL, error, "more than 6 scalar outputs");
      if (!cs_dtype_is_float (sdt))
        sdt = c->row_dtype;
      sumr = x_round (&ty, sdt, "s");
      slots[n] = have_rows ? rows : ts; is_out[n++] = FALSE;
      slots[n] = ts; is_out[n++] = FALSE;
      g_string_append_printf (o, "  __shared__ %s sh_s[8];\n  __shared__ long long sh_n[8];\n", ty.A);
      g_string_append_printf (o, "  %s s = (%s) 0;\n  long long n = 0;\n", ty.A, ty.A);
      g_string_append_printf (o, "  for (ix_t r = threadIdx.x; r < %" G_GINT64_FORMAT "LL; r += 256)\n    {\n", c->R);
      if (have_rows)
        g_string_append_printf (o, "      s += %s;\n", ld_r);
      g_string_append_printf (o, "      n += (long long) a1[r] != %" G_GINT64_FORMAT "LL;\n    }\n", c->ignore);
      g_string_append (o,
        "  for (int o_ = 16; o_ > 0; o_ >>= 1)\n"
        "    {\n"
        "      s += cs_shfl (s, o_);\n"
        "      n += __shfl_xor_sync (0xffffffffu, n, o_);\n"
        "    }\n"
        "  if ((threadIdx.x & 31) == 0)\n"
        "    {\n"
        "      sh_s[threadIdx.x >> 5] = s;\n"
        "      sh_n[threadIdx.x >> 5] = n;\n"
        "    }\n"
        "  __syncthreads ();\n"
        "  if (threadIdx.x != 0)\n"
        "    return;\n");
      g_string_append_printf (o, "  s = (%s) 0;\n  n = 0;\n", ty.A);
      g_string_append (o, "  for (int w_ = 0; w_ < 8; w_++)\n    {\n      s += sh_s[w_];\n      n += sh_n[w_];\n    }\n");
      g_string_append_printf (o, "  const %s sum = %s;\n", ty.A, sumr);
      for (guint i = 0; i < scal->len; i++)
        {
          XScalarOut *so = &g_array_index (scal, XScalarOut, i);
          CsDtype dt = cs_cuda_program_slot (p, so->slot)->dtype;
          g_autofree char *val = NULL;
          g_autofree char *stv = NULL;

          if (so->role == XR_SUM)
            val = g_strdup ("sum");
          else if (so->role == XR_COUNT)
            val = cs_dtype_is_float (dt) ? g_strdup_printf ("(%s) n", ty.A) : g_strdup ("n");
          else
            val = g_strdup_printf ("sum / (%s) n", ty.A);
          stv = dt == CS_DTYPE_B8 ? g_strdup_printf ("(%s) ? 1 : 0", val) : x_store (dt, val);
          g_string_append_printf (o, "  a%u[0] = %s;\n", n, stv);
          slots[n] = so->slot;
          is_out[n++] = TRUE;
        }
      add_kernel (p, o->str, slots, is_out, n,
                  g_strdup_printf ("%s cross-entropy reduce %" G_GINT64_FORMAT " rows", c->label, c->R), 1,
                  XENT_THREADS);
    }
  return TRUE;
}

/* ------------------------------------------------------------------------------------------ */
/* Backward                                                                                    */

static gboolean
gen_backward (CsCudaProgram *p, XCtx *c, GPtrArray *outs, GError **error)
{
  XTypes ty;
  guint lps = 0, ts, gs, tws = 0, gxs, xs = 0, lses = 0;
  XRowsRec *rec = NULL;
  gboolean have_tw = c->tw != NULL && c->bred == XRED_MEAN;
  CsDtype odt = CS_DTYPE_F32, ord = CS_DTYPE_F32;
  gboolean have_out = FALSE;
  int64_t shape2[2] = { c->bR, c->bV };
  CsDtype ldt = c->lp->dtype;
  gboolean dbl;

  for (guint i = 0; i < outs->len; i++)
    {
      CsProxy *o = g_ptr_array_index (outs, i);
      XVal *v = g_hash_table_lookup (c->vals, o);

      if (v == NULL || v->role != XR_GX)
        continue;
      if (have_out && (o->dtype != odt || v->round != ord))
        return unsupported (c, NULL, error, "outputs %s: the gradient in two dtypes", o->name);
      odt = o->dtype;
      ord = v->round;
      have_out = TRUE;
    }
  if (!have_out)
    return TRUE;
  if (!xstorage (ldt) || !cs_dtype_is_float (ldt) || !cs_dtype_is_float (odt) || !xstorage (odt)
      || !xstorage (c->g->dtype) || !cs_dtype_is_float (c->g->dtype) || !xstorage (c->bt->dtype)
      || (c->tw && !xstorage (c->tw->dtype)))
    return unsupported (c, NULL, error, "dtypes the kernels do not store");
  dbl = ldt == CS_DTYPE_F64 || odt == CS_DTYPE_F64 || c->gnll_dtype == CS_DTYPE_F64;
  /* the log-softmax the forward's rows kernel would write, recomputed here from the logits and
   * the logsumexp (that kernel then writes the logsumexp instead) */
  {
    gint ls = cs_cuda_program_lookup (p, c->lp);

    rec = ls >= 0 ? take_rows_rec (p, (guint) ls, c->bR, c->bV) : NULL;
  }
  if (rec != NULL && fuse_backward (p, c, rec, dbl, odt, ord, have_tw, &gxs))
    {
      g_hash_table_remove (p->slot_of, c->lp);
      rows_rec_free (rec);
      for (guint i = 0; i < outs->len; i++)
        {
          CsProxy *o = g_ptr_array_index (outs, i);
          XVal *v = g_hash_table_lookup (c->vals, o);

          if (v != NULL && v->role == XR_GX)
            cs_cuda_program_bind (p, o, cs_cuda_program_reshape_view (p, gxs, o->shape, o->rank));
        }
      return TRUE;
    }
  if (rec != NULL)
    {
      dbl |= rec->k.ty.dbl;
      xs = rec->slots[0];
      lses = drop_logp_pass (p, rec, c->bR);
      /* what read it now reads the logits: a later statement reading it finds it unbound */
      g_hash_table_remove (p->slot_of, c->lp);
    }
  x_types (&ty, dbl);
  if ((rec == NULL && !contiguous_input (p, c, c->lp, &lps, error)) || !contiguous_input (p, c, c->bt, &ts, error)
      || !contiguous_input (p, c, c->g, &gs, error)
      || (have_tw && !contiguous_input (p, c, c->tw, &tws, error)))
    {
      g_clear_pointer (&rec, rows_rec_free);
      return FALSE;
    }
  gxs = cs_cuda_program_new_slot (p, odt, shape2, 2);
  {
    g_autoptr(GString) o = g_string_new ("");
    g_autoptr(GString) e = g_string_new ("");
    guint slots[6], n = 0, ag, atw = 0, at, ge;
    gboolean is_out[6];
    const char *E = dbl ? "exp" : "expf";
    CsDtype idt = rec ? rec->k.xdt : ldt;   /* the row read: logits or log-softmax */
    g_autofree char *gval = NULL, *twv = NULL, *gn = NULL, *gnr = NULL, *ld = NULL, *lpv = NULL;
    g_autofree char *v = NULL, *vr = NULL, *sv = NULL;
    XQuad q[2] = { { "q0", "xr", idt, FALSE }, { "q1", "y", odt, TRUE } };

    if (rec)
      {
        slots[n] = xs; is_out[n++] = FALSE;
        slots[n] = lses; is_out[n++] = FALSE;
      }
    else
      {
        slots[n] = lps; is_out[n++] = FALSE;
      }
    at = n; slots[n] = ts; is_out[n++] = FALSE;
    ag = n; slots[n] = gs; is_out[n++] = FALSE;
    if (have_tw)
      {
        atw = n; slots[n] = tws; is_out[n++] = FALSE;
      }
    slots[n] = gxs; is_out[n++] = TRUE;
    {
      guint rw[2] = { slots[0], gxs };

      ge = group_elems (p, rw, 2, c->bV);
    }
    {
      g_autofree char *ga = g_strdup_printf (c->bred == XRED_NONE ? "a%u[row]" : "a%u[0]", ag);
      g_autofree char *ta = g_strdup_printf ("a%u[0]", atw);

      gval = x_load (&ty, c->g->dtype, ga);
      twv = have_tw ? x_load (&ty, c->tw->dtype, ta) : NULL;
    }
    ld = x_load (&ty, idt, ge > 1 ? "q0.e[k]" : "xr[j]");
    if (rec)
      {
        /* log-softmax as the forward would have stored it: x - lse in its dtype */
        g_autofree char *diff = g_strdup_printf ("%s - lse", ld);

        lpv = x_round (&ty, rec->k.logp_dtype, diff);
      }
    else
      lpv = g_strdup (ld);
    gn = have_tw ? g_strdup_printf ("-(%s) / %s", gval, twv) : g_strdup_printf ("-(%s)", gval);
    gnr = x_round (&ty, c->gnll_dtype, gn);
    g_string_append_printf (o, "  const ix_t V = %" G_GINT64_FORMAT "LL;\n", c->bV);
    g_string_append (o, "  const ix_t row = (ix_t) blockIdx.x;\n");
    g_string_append_printf (o, "  const %s *xr = a0 + row * V;\n", xstorage (idt));
    if (rec)
      g_string_append_printf (o, "  const %s lse = (%s) a1[row];\n", ty.A, ty.A);
    g_string_append_printf (o, "  %s *y = a%u + row * V;\n", xstorage (odt), n - 1);
    g_string_append_printf (o, "  const long long tg = (long long) a%u[row];\n", at);
    /* nll_loss_backward's value at the target (0 on an ignored row; NaN for a target out of
     * range) */
    g_string_append_printf (o, "  %s gn;\n  if (tg == %" G_GINT64_FORMAT "LL)\n    gn = (%s) 0;\n"
                            "  else if (tg < 0 || tg >= V)\n    gn = %s;\n  else\n    gn = %s;\n",
                            ty.A, c->bignore, ty.A, x_nan (&ty), gnr);
    /* grad - exp(logp) * rowsum(grad), rowsum(grad) = gn */
    v = g_strdup_printf ("(j == tg ? gn : (%s) 0) - %s (%s) * gn", ty.A, E, lpv);
    /* rounded to the narrowest dtype a convert took it through, stored in the output's */
    vr = ord != odt ? x_round (&ty, ord, v) : g_strdup (v);
    sv = x_store (odt, vr);
    if (ge > 1)
      g_string_append_printf (e, "          q1.e[k] = %s;\n", sv);
    else
      g_string_append_printf (e, "      y[j] = %s;\n", sv);
    emit_row_loop (o, ge > 1 ? XLOOP_QUAD : XLOOP_SCALAR, XENT_THREADS, 0, ge, q, 2, e->str);
    add_kernel (p, o->str, slots, is_out, n,
                g_strdup_printf ("%s cross-entropy backward %" G_GINT64_FORMAT " x %" G_GINT64_FORMAT, c->label,
                                 c->bR, c->bV),
                (unsigned int) c->bR, XENT_THREADS);
  }
  g_clear_pointer (&rec, rows_rec_free);
  for (guint i = 0; i < outs->len; i++)
    {
      CsProxy *o = g_ptr_array_index (outs, i);
      XVal *v = g_hash_table_lookup (c->vals, o);

      if (v != NULL && v->role == XR_GX)
        cs_cuda_program_bind (p, o, cs_cuda_program_reshape_view (p, gxs, o->shape, o->rank));
    }
  return TRUE;
}

/* ------------------------------------------------------------------------------------------ */
/* Statements around the kernels                                                               */

static void
flatten_prims (CsStmt *st, GPtrArray *out)
{
  if (st->kind != CS_STMT_CALL)
    return;
  if (st->n_subs == 0 || cs_op_has_tag (st->op, CS_OP_TAG_PRIM)
      || cs_op_has_tag (cs_op_semantic (st->op), CS_OP_TAG_PRIM))
    {
      g_ptr_array_add (out, st);
      return;
    }
  for (guint i = 0; i < st->n_subs; i++)
    flatten_prims (st->subs[i], out);
}

/* The statements @list (c->pro when @pro, else c->epi) as one region of the ordinary codegen
 * (cs_cuda_codegen_region), its outputs: for PRO, the values the cross-entropy or a region
 * output reads; for EPI, the region outputs among theirs. */
static gboolean
run_around (CsCudaProgram *p, XCtx *c, GPtrArray *list, gboolean pro, GPtrArray *outs, GError **error)
{
  g_autoptr(GPtrArray) prims = g_ptr_array_new ();
  g_autoptr(GPtrArray) want = g_ptr_array_new ();

  for (guint i = 0; i < list->len; i++)
    {
      g_autoptr(GPtrArray) o = g_ptr_array_new ();

      flatten_prims (g_ptr_array_index (list, i), prims);
      cs_stmt_collect_outputs (g_ptr_array_index (list, i), o);
      for (guint j = 0; j < o->len; j++)
        {
          CsProxy *y = g_ptr_array_index (o, j);

          if ((pro ? g_hash_table_contains (c->used, y) : FALSE) || g_ptr_array_find (outs, y, NULL))
            g_ptr_array_add (want, y);
        }
    }
  if (want->len == 0)
    return TRUE;
  return cs_cuda_codegen_region (p, (CsStmt **) prims->pdata, prims->len, (CsProxy **) want->pdata, want->len,
                                 c->label, error);
}

/* ------------------------------------------------------------------------------------------ */

/**
 * cs_cuda_xentropy_region:
 * @p: the program being built
 * @st: a `TorchCompileN` region call (cs_executor_of_stmt() is TORCHCOMPILE_XENTROPY)
 * @outs: the region's output proxies
 *
 * Reads the region's subsymbols as a cross-entropy forward (log_softmax, nll_loss or
 * cross_entropy with weight=None and label_smoothing=0, reductions mean, sum and none, any
 * ignore_index; or Thunder's decomposition of them) or backward (nll_loss_backward then
 * log_softmax_backward), then adds the fused kernels described at the top of this file and binds
 * every output: log-softmax [R, V], row losses, their sum, the count of rows not ignored, the
 * mean, the logits' gradient (and reshapes of them); an output that is a reshape of a region
 * input becomes a view of it.  Shapes: logits [.., V] with the log-softmax along the last dim
 * (R = numel / V rows), targets of R integers (i64 or i32).
 * Errors: CS_CUDA_ERROR_UNSUPPORTED naming the statement or output the kernels do not compute.
 * Returns: TRUE on success
 */
gboolean
cs_cuda_xentropy_region (CsCudaProgram *p, CsStmt *st, GPtrArray *outs, GError **error)
{
  XCtx c = { 0 };
  gboolean ok = FALSE;
  GPtrArray *need = NULL;

  c.vals = g_hash_table_new_full (NULL, NULL, NULL, g_free);
  c.used = g_hash_table_new (NULL, NULL);
  c.pro = g_ptr_array_new ();
  c.epi = g_ptr_array_new ();
  c.label = st->callee ? st->callee : "TorchCompile";
  for (guint i = 0; i < st->n_args; i++)
    {
      g_autoptr(GPtrArray) ins = g_ptr_array_new ();

      cs_value_collect_proxies (st->args[i].value, ins);
      for (guint j = 0; j < ins->len; j++)
        {
          CsProxy *x = g_ptr_array_index (ins, j);
          XVal v = { 0 };

          v.leaf = x;
          v.round = x->dtype;
          if (is_float_tensor (x))
            v.role = XR_LEAF_F;
          else if (is_int_tensor (x))
            v.role = XR_T;
          else
            continue;
          set_val (&c, x, &v);
        }
    }
  for (guint i = 0; i < st->n_subs; i++)
    if (!interp (&c, st->subs[i], 0, error))
      goto out;
  if (!c.fwd && !c.bwd && c.pro->len == 0)
    {
      unsupported (&c, st, error, "no log_softmax, nll_loss, cross_entropy or nll_loss_backward among its subsymbols");
      goto out;
    }
  if (c.bwd && !c.gx_seen)
    {
      unsupported (&c, st, error, "nll_loss_backward without the log_softmax_backward that consumes it");
      goto out;
    }
  /* every output must be something the kernels or the statements around them write, or a
   * view of an input */
  for (guint i = 0; i < outs->len; i++)
    {
      CsProxy *o = g_ptr_array_index (outs, i);
      XVal *v = g_hash_table_lookup (c.vals, o);

      if (o->kind != CS_PROXY_TENSOR)
        continue;
      if (v == NULL)
        {
          unsupported (&c, st, error, "output %s is not computed by its subsymbols", o->name);
          goto out;
        }
      switch (v->role)
        {
        case XR_LOGP: case XR_ROWLOSS: case XR_SUM: case XR_COUNT: case XR_MEAN: case XR_GX: case XR_EPI:
          break;
        case XR_LEAF_F: case XR_T:
          if (o->dtype == v->leaf->dtype && (v->role == XR_T || v->round == v->leaf->dtype))
            {
              g_hash_table_add (c.used, v->leaf);
              break;
            }
          /* fall through */
        default:
          unsupported (&c, st, error, "output %s is an intermediate of the cross-entropy that the "
                       "fused kernels do not write", o->name);
          goto out;
        }
    }
  /* what the kernels must store: the region's outputs and what the statements after them read */
  need = g_ptr_array_new ();
  for (guint i = 0; i < outs->len; i++)
    g_ptr_array_add (need, g_ptr_array_index (outs, i));
  for (guint i = 0; i < c.epi->len; i++)
    {
      g_autoptr(GPtrArray) ins = g_ptr_array_new ();

      cs_stmt_collect_inputs (g_ptr_array_index (c.epi, i), ins);
      for (guint j = 0; j < ins->len; j++)
        {
          XVal *v = g_hash_table_lookup (c.vals, g_ptr_array_index (ins, j));

          if (v != NULL && v->role != XR_LEAF_F && v->role != XR_T && v->role != XR_EPI
              && !g_ptr_array_find (need, g_ptr_array_index (ins, j), NULL))
            g_ptr_array_add (need, g_ptr_array_index (ins, j));
        }
    }
  if (c.pro->len > 0 && !run_around (p, &c, c.pro, TRUE, outs, error))
    goto out;
  if (c.fwd && !gen_forward (p, &c, need, error))
    goto out;
  if (c.bwd && !gen_backward (p, &c, need, error))
    goto out;
  if (c.epi->len > 0 && !run_around (p, &c, c.epi, FALSE, outs, error))
    goto out;
  for (guint i = 0; i < outs->len; i++)
    {
      CsProxy *o = g_ptr_array_index (outs, i);
      XVal *v = g_hash_table_lookup (c.vals, o);
      guint src;

      if (o->kind != CS_PROXY_TENSOR || v == NULL || (v->role != XR_LEAF_F && v->role != XR_T)
          || v->leaf == o)
        continue;
      if (!contiguous_input (p, &c, v->leaf, &src, error))
        goto out;
      cs_cuda_program_bind (p, o, cs_cuda_program_reshape_view (p, src, o->shape, o->rank));
    }
  ok = TRUE;
out:
  g_hash_table_unref (c.vals);
  g_hash_table_unref (c.used);
  g_ptr_array_unref (c.pro);
  g_ptr_array_unref (c.epi);
  g_clear_pointer (&need, g_ptr_array_unref);
  return ok;
}
