/* cs-aten-lower.c: aten ops without an ltorch twin, lowered to ltorch calls (see
 * cs-aten-private.h).
 *
 * Sources: the ATen kernels' formulas as torch/_decomp/decompositions.py and
 * torch/_refs/__init__.py write them (PyTorch 2.11): addmm, t, _softmax/_log_softmax and their
 * backward_data, native_layer_norm(_backward), gelu_backward (none and tanh), threshold_,
 * sigmoid_, tanh_ and silu_backward, rsub, scalar_tensor, embedding, detach/alias; split and
 * split_with_sizes (ltorch.split, the pieces the graph reads), gather,
 * bitwise_not and logical_not/and/or/xor (torch/_refs/__init__.py: a non-bool operand counts
 * as `a != 0`, then `&`, `|`, `^` on bools, broadcast to the result's shape); Inductor's
 * prims.fma (torch/_inductor/inductor_prims.py).
 */
#include "cs-config.h"

#include "cs-aten-private.h"

#include "cs-decompose.h"
#include "cs-ops.h"
#include "cs-ops-args.h"

#include <math.h>
#include <string.h>

typedef struct
{
  const CsAtenLowerCtx *ctx;   /* the arena and the emitter of the lowered calls */
  const CsStmt         *s;     /* the aten statement being lowered */
  GError              **error; /* lfail()'s; an emitted call's error stands */
} L;

static gpointer G_GNUC_PRINTF (3, 4)
lfail (L *l, CsDecomposeError code, const char *fmt, ...)
{
  va_list ap;
  g_autofree char *msg = NULL;

  if (l->error != NULL && *l->error != NULL)
    return NULL;   /* an error from an emitted call stands */
  va_start (ap, fmt);
  msg = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  g_set_error (l->error, CS_DECOMPOSE_ERROR, code, "line %u: %s: %s", l->s->line, l->s->callee, msg);
  return NULL;
}

/* Argument @name of the statement's schema (the aten row's, from native_functions.yaml). */
static CsValue *
sa (L *l, CsArgName name)
{
  return cs_stmt_arg (l->s, name);
}

static CsProxy *
tensor (const CsValue *v)
{
  return v && v->kind == CS_VALUE_PROXY && v->u.proxy->kind == CS_PROXY_TENSOR && v->u.proxy->typed
         ? v->u.proxy : NULL;
}

static gboolean
is_none (const CsValue *v)
{
  return v == NULL || v->kind == CS_VALUE_NONE;
}

static CsValue *
vint (L *l, int64_t i)
{
  return cs_value_new_int (l->ctx->arena, i);
}

static CsValue *
vfloat (L *l, double f)
{
  return cs_value_new_float (l->ctx->arena, f);
}

static CsValue *
vbool (L *l, gboolean b)
{
  return cs_value_new_bool (l->ctx->arena, b);
}

static CsValue *
vdims (L *l, const int64_t *d, guint n)
{
  return cs_value_new_int_seq (l->ctx->arena, CS_VALUE_LIST, d, n);
}

/* callee(args...), positional; NULL ends the list. */
static CsValue *
call (L *l, const char *callee, ...)
{
  CsArg args[8];
  guint n = 0;
  va_list ap;
  CsValue *v;

  if (l->error != NULL && *l->error != NULL)
    return NULL;
  va_start (ap, callee);
  while ((v = va_arg (ap, CsValue *)) != NULL)
    {
      g_assert (n < G_N_ELEMENTS (args));
      args[n].name = NULL;
      args[n++].value = v;
    }
  va_end (ap);
  return l->ctx->call (l->ctx->data, callee, args, n, l->error);
}

/* Propagates NULL: every helper below returns NULL once an emitted call failed. */
#define CHECK(v) do { if ((v) == NULL) return NULL; } while (0)

static CsValue *
to_dtype (L *l, CsValue *v, CsDtype d)
{
  CsProxy *t = tensor (v);
  CsArg args[2];

  CHECK (v);
  if (t == NULL || t->dtype == d)
    return v;
  args[0].name = NULL;
  args[0].value = v;
  args[1].name = NULL;
  args[1].value = cs_value_new_dtype (l->ctx->arena, d, FALSE);
  return l->ctx->call (l->ctx->data, "ltorch.to", args, 2, l->error);
}

/* ATen's opmath: bf16/f16 values computed in f32. */
static CsValue *
up (L *l, CsValue *v)
{
  CsProxy *t = tensor (v);

  if (t && (t->dtype == CS_DTYPE_BF16 || t->dtype == CS_DTYPE_F16))
    return to_dtype (l, v, CS_DTYPE_F32);
  return v;
}

/* @v in the dtype the graph printed for @want (a target value). */
static CsValue *
fit (L *l, CsValue *v, const CsValue *want)
{
  CsProxy *w = tensor (want);

  CHECK (v);
  return w ? to_dtype (l, v, w->dtype) : v;
}

static CsValue *mul (L *l, CsValue *a, CsValue *b) { CHECK (a); CHECK (b); return call (l, "ltorch.mul", a, b, NULL); }
static CsValue *add (L *l, CsValue *a, CsValue *b) { CHECK (a); CHECK (b); return call (l, "ltorch.add", a, b, NULL); }
static CsValue *sub (L *l, CsValue *a, CsValue *b) { CHECK (a); CHECK (b); return call (l, "ltorch.sub", a, b, NULL); }
static CsValue *div_ (L *l, CsValue *a, CsValue *b) { CHECK (a); CHECK (b); return call (l, "ltorch.true_divide", a, b, NULL); }
static CsValue *un (L *l, const char *f, CsValue *a) { CHECK (a); return call (l, f, a, NULL); }

static CsValue *
sum_dims (L *l, CsValue *a, const int64_t *dims, guint n, gboolean keepdim)
{
  CHECK (a);
  return call (l, "ltorch.sum", a, vdims (l, dims, n), vbool (l, keepdim), NULL);
}

/* The targets @stmt names: for a single proxy output that proxy's value; for a tuple the
 * items of @vals at the positions that are proxies (cs-aten-private.h). */
static CsValue *
outputs (L *l, CsValue **vals, guint n)
{
  const CsValue *out = l->s->out;
  CsValue **items;
  guint k = 0;

  if (out == NULL || out->kind == CS_VALUE_PROXY)
    return n > 0 ? fit (l, vals[0], out) : NULL;
  if (out->kind != CS_VALUE_TUPLE || out->u.seq.n > n)
    return lfail (l, CS_DECOMPOSE_ERROR_ARGS, "names %u outputs, the op has %u",
                  out->kind == CS_VALUE_TUPLE ? out->u.seq.n : 1, n);
  items = CS_ARENA_NEW_N (l->ctx->arena, CsValue *, MAX (out->u.seq.n, 1));
  for (guint i = 0; i < out->u.seq.n; i++)
    if (out->u.seq.items[i]->kind == CS_VALUE_PROXY)
      {
        if (vals[i] == NULL)
          return lfail (l, CS_DECOMPOSE_ERROR_UNSUPPORTED, "output %u is not computed", i);
        if ((items[k++] = fit (l, vals[i], out->u.seq.items[i])) == NULL)
          return NULL;
      }
  return cs_value_new_seq (l->ctx->arena, CS_VALUE_TUPLE, items, k);
}

/* Is output @i of the statement read? */
static gboolean
wanted (L *l, guint i)
{
  const CsValue *out = l->s->out;

  if (out == NULL || out->kind == CS_VALUE_PROXY)
    return i == 0;
  return out->kind == CS_VALUE_TUPLE && i < out->u.seq.n
         && out->u.seq.items[i]->kind == CS_VALUE_PROXY;
}

static gboolean
number (const CsValue *v, double *out)
{
  if (v == NULL)
    return FALSE;
  if (v->kind == CS_VALUE_INT)
    *out = (double) v->u.i;
  else if (v->kind == CS_VALUE_FLOAT)
    *out = v->u.f;
  else if (v->kind == CS_VALUE_BOOL)
    *out = v->u.b;
  else
    return FALSE;
  return TRUE;
}

/* The normalized (innermost @k) and outer dimensions of a rank-@rank tensor. */
static void
norm_dims (guint rank, guint k, int64_t *inner, int64_t *outer, guint *n_outer)
{
  *n_outer = 0;
  for (guint i = 0; i < rank; i++)
    {
      if (i + k >= rank)
        inner[i + k - rank] = i;
      else
        outer[(*n_outer)++] = i;
    }
}

/* ------------------------------------------------------------------------------------------ */

static CsValue *
lower_addmm (L *l)
{
  CsValue *bias = sa (l, CS_ARG_SELF), *m1 = sa (l, CS_ARG_MAT1), *m2 = sa (l, CS_ARG_MAT2);
  double beta = 1, alpha = 1;
  CsValue *mm;

  if (!tensor (m1) || !tensor (m2) || bias == NULL)
    return lfail (l, CS_DECOMPOSE_ERROR_ARGS, "needs a bias and two typed matrices");
  if ((sa (l, CS_ARG_BETA) && !number (sa (l, CS_ARG_BETA), &beta))
      || (sa (l, CS_ARG_ALPHA) && !number (sa (l, CS_ARG_ALPHA), &alpha)))
    return lfail (l, CS_DECOMPOSE_ERROR_ARGS, "beta and alpha must be numbers");
  mm = call (l, "ltorch.matmul", m1, m2, NULL);
  if (alpha != 1)
    mm = mul (l, mm, vfloat (l, alpha));
  if (beta == 0)
    return fit (l, mm, l->s->out);
  if (beta != 1)
    bias = mul (l, bias, vfloat (l, beta));
  return fit (l, add (l, bias, mm), l->s->out);
}

static CsValue *
lower_t (L *l)
{
  CsValue *a = sa (l, CS_ARG_SELF);
  CsProxy *ta = tensor (a);

  if (!ta || ta->rank > 2)
    return lfail (l, CS_DECOMPOSE_ERROR_ARGS, "needs a typed tensor of at most 2 dims");
  if (ta->rank < 2)
    return call (l, "prims.shallow_copy", a, NULL);
  return call (l, "ltorch.transpose", a, vint (l, 0), vint (l, 1), NULL);
}

static CsValue *
lower_softmax (L *l, gboolean log)
{
  CsValue *a = sa (l, CS_ARG_SELF), *dim = sa (l, CS_ARG_DIM), *h2f = sa (l, CS_ARG_HALF_TO_FLOAT);
  CsArg args[3] = { { NULL, a }, { NULL, dim }, { "dtype", NULL } };

  if (!tensor (a) || dim == NULL || dim->kind != CS_VALUE_INT)
    return lfail (l, CS_DECOMPOSE_ERROR_ARGS, "needs a typed tensor and an int dim");
  args[2].value = h2f && h2f->kind == CS_VALUE_BOOL && h2f->u.b
                  ? cs_value_new_dtype (l->ctx->arena, CS_DTYPE_F32, FALSE)
                  : cs_value_new_none (l->ctx->arena);
  return fit (l, l->ctx->call (l->ctx->data, log ? "ltorch.log_softmax" : "ltorch._softmax",
                               args, 3, l->error), l->s->out);
}

/* _softmax_backward_data(grad, y, dim, input_dtype): y * (g - sum(g * y, dim)); the log form
 * g - exp(y) * sum(g, dim) */
static CsValue *
lower_softmax_backward (L *l, gboolean log)
{
  CsValue *g = up (l, sa (l, CS_ARG_GRAD_OUTPUT)), *y = up (l, sa (l, CS_ARG_OUTPUT));
  CsValue *dim = sa (l, CS_ARG_DIM);
  CsProxy *ty = tensor (sa (l, CS_ARG_OUTPUT));
  int64_t d;
  CsValue *r;

  if (!tensor (g) || !ty || dim == NULL || dim->kind != CS_VALUE_INT)
    return lfail (l, CS_DECOMPOSE_ERROR_ARGS, "needs typed tensors and an int dim");
  d = dim->u.i < 0 ? dim->u.i + ty->rank : dim->u.i;
  if (log)
    r = sub (l, g, mul (l, un (l, "ltorch.exp", y), sum_dims (l, g, &d, 1, TRUE)));
  else
    {
      CsValue *gy = mul (l, g, y);
      r = sub (l, gy, mul (l, y, sum_dims (l, gy, &d, 1, TRUE)));
    }
  return fit (l, r, l->s->out);
}

static gboolean
normalized_k (L *l, const CsValue *ns, guint rank, guint *k)
{
  int64_t v[CS_MAX_DIMS];
  guint n;

  if (!cs_value_get_int_seq (ns, v, CS_MAX_DIMS, &n) || n == 0 || n > rank)
    return lfail (l, CS_DECOMPOSE_ERROR_ARGS, "normalized_shape must be 1 to %u ints", rank) != NULL;
  *k = n;
  return TRUE;
}

/* native_layer_norm(x, normalized_shape, w, b, eps) -> (y, mean, rstd) */
static CsValue *
lower_layer_norm (L *l)
{
  CsValue *x0 = sa (l, CS_ARG_INPUT), *w = sa (l, CS_ARG_WEIGHT), *b = sa (l, CS_ARG_BIAS);
  CsProxy *tx = tensor (x0);
  double eps;
  guint k, n_outer;
  int64_t inner[CS_MAX_DIMS], outer[CS_MAX_DIMS];
  CsValue *x, *vm, *var, *mean, *rstd, *y, *vals[3];
  CsArg vargs[4];

  if (!tx || !number (sa (l, CS_ARG_EPS), &eps))
    return lfail (l, CS_DECOMPOSE_ERROR_ARGS, "needs a typed input and a number eps");
  if (!normalized_k (l, sa (l, CS_ARG_NORMALIZED_SHAPE), tx->rank, &k))
    return NULL;
  norm_dims (tx->rank, k, inner, outer, &n_outer);
  x = up (l, x0);
  CHECK (x);
  vargs[0] = (CsArg) { NULL, x };
  vargs[1] = (CsArg) { NULL, vdims (l, inner, k) };
  vargs[2] = (CsArg) { "keepdim", vbool (l, TRUE) };
  vargs[3] = (CsArg) { "correction", vint (l, 0) };
  vm = l->ctx->call (l->ctx->data, "ltorch.var_mean", vargs, 4, l->error);
  CHECK (vm);
  if (vm->kind != CS_VALUE_TUPLE || vm->u.seq.n != 2)
    return lfail (l, CS_DECOMPOSE_ERROR_ARGS, "var_mean gave no (var, mean) pair");
  var = vm->u.seq.items[0];
  mean = vm->u.seq.items[1];
  rstd = un (l, "ltorch.rsqrt", add (l, var, vfloat (l, eps)));
  y = mul (l, sub (l, x, mean), rstd);
  if (!is_none (w))
    y = mul (l, y, w);
  if (!is_none (b))
    y = add (l, y, b);
  vals[0] = y;
  vals[1] = mean;
  vals[2] = rstd;
  CHECK (y);
  CHECK (rstd);
  return outputs (l, vals, 3);
}

/* native_layer_norm_backward(g, x, normalized_shape, mean, rstd, w, b, output_mask)
 *   -> (grad_input, grad_weight, grad_bias) */
static CsValue *
lower_layer_norm_backward (L *l)
{
  CsValue *g = up (l, sa (l, CS_ARG_GRAD_OUT)), *x = up (l, sa (l, CS_ARG_INPUT));
  CsValue *mean = sa (l, CS_ARG_MEAN), *rstd = sa (l, CS_ARG_RSTD), *w = sa (l, CS_ARG_WEIGHT);
  CsProxy *tx = tensor (sa (l, CS_ARG_INPUT));
  guint k, n_outer;
  int64_t inner[CS_MAX_DIMS], outer[CS_MAX_DIMS], nelem = 1;
  CsValue *xhat, *vals[3] = { NULL, NULL, NULL };

  if (!tx || !tensor (g) || !tensor (mean) || !tensor (rstd))
    return lfail (l, CS_DECOMPOSE_ERROR_ARGS, "needs typed grad, input, mean and rstd");
  if (!normalized_k (l, sa (l, CS_ARG_NORMALIZED_SHAPE), tx->rank, &k))
    return NULL;
  norm_dims (tx->rank, k, inner, outer, &n_outer);
  for (guint i = 0; i < k; i++)
    nelem *= tx->shape[inner[i]];
  xhat = mul (l, sub (l, x, mean), rstd);
  if (wanted (l, 0))
    {
      CsValue *gw = is_none (w) ? g : mul (l, g, w);
      CsValue *a = sum_dims (l, gw, inner, k, TRUE);
      CsValue *bsum = sum_dims (l, mul (l, gw, xhat), inner, k, TRUE);
      CsValue *inner_v = sub (l, sub (l, mul (l, gw, vint (l, nelem)), a), mul (l, xhat, bsum));

      vals[0] = mul (l, div_ (l, rstd, vint (l, nelem)), inner_v);
      CHECK (vals[0]);
    }
  if (wanted (l, 1))
    {
      CsValue *gx = mul (l, g, xhat);
      vals[1] = n_outer ? sum_dims (l, gx, outer, n_outer, FALSE) : gx;
      CHECK (vals[1]);
    }
  if (wanted (l, 2))
    {
      vals[2] = n_outer ? sum_dims (l, g, outer, n_outer, FALSE) : g;
      CHECK (vals[2]);
    }
  return outputs (l, vals, 3);
}

/* gelu_backward(grad, x, approximate='none'|'tanh') */
static CsValue *
lower_gelu_backward (L *l)
{
  CsValue *g = up (l, sa (l, CS_ARG_GRAD_OUTPUT)), *x = up (l, sa (l, CS_ARG_SELF));
  CsValue *ap = sa (l, CS_ARG_APPROXIMATE);
  const char *mode = ap && ap->kind == CS_VALUE_STRING ? ap->u.s : "none";
  CsValue *r;

  if (!tensor (g) || !tensor (x))
    return lfail (l, CS_DECOMPOSE_ERROR_ARGS, "needs two typed tensors");
  if (ap == NULL && l->s->n_args > 2 && l->s->args[2].name == NULL
      && l->s->args[2].value->kind == CS_VALUE_STRING)
    mode = l->s->args[2].value->u.s;
  if (strcmp (mode, "none") == 0)
    {
      /* cdf = (1 + erf(x / sqrt 2)) / 2, pdf = exp(-x^2 / 2) / sqrt(2 pi) */
      CsValue *cdf = mul (l, add (l, un (l, "ltorch.erf", mul (l, x, vfloat (l, M_SQRT1_2))),
                                  vfloat (l, 1.0)), vfloat (l, 0.5));
      CsValue *pdf = mul (l, un (l, "ltorch.exp", mul (l, mul (l, x, x), vfloat (l, -0.5))),
                          vfloat (l, 0.5 * M_2_SQRTPI * M_SQRT1_2));
      r = mul (l, g, add (l, cdf, mul (l, x, pdf)));
    }
  else if (strcmp (mode, "tanh") == 0)
    {
      /* torch/_decomp/decompositions.py gelu_backward, approximate='tanh' */
      const double kbeta = M_SQRT2 * M_2_SQRTPI * 0.5, kkappa = 0.044715;
      CsValue *x2 = mul (l, x, x);
      CsValue *inner = mul (l, add (l, x, mul (l, mul (l, x2, x), vfloat (l, kkappa))), vfloat (l, kbeta));
      CsValue *th = un (l, "ltorch.tanh", inner);
      CsValue *left = mul (l, x, vfloat (l, 0.5));
      CsValue *right = add (l, th, vfloat (l, 1.0));
      CsValue *dleft = mul (l, right, vfloat (l, 0.5));
      CsValue *dtanh = sub (l, vfloat (l, 1.0), mul (l, th, th));
      CsValue *dinner = mul (l, add (l, mul (l, x2, vfloat (l, 3 * kkappa)), vfloat (l, 1.0)),
                             vfloat (l, kbeta));
      CsValue *dright = mul (l, mul (l, left, dtanh), dinner);
      r = mul (l, g, add (l, dleft, dright));
    }
  else
    return lfail (l, CS_DECOMPOSE_ERROR_UNSUPPORTED, "approximate='%s' is not lowered", mode);
  return fit (l, r, l->s->out);
}

static CsValue *
lower_threshold_backward (L *l)
{
  CsValue *g = sa (l, CS_ARG_GRAD_OUTPUT), *x = sa (l, CS_ARG_SELF), *th = sa (l, CS_ARG_THRESHOLD);
  CsValue *m;

  if (!tensor (g) || !tensor (x) || th == NULL)
    return lfail (l, CS_DECOMPOSE_ERROR_ARGS, "needs two typed tensors and a threshold");
  m = call (l, "ltorch.le", x, th, NULL);
  CHECK (m);
  return fit (l, call (l, "ltorch.where", m, vint (l, 0), g, NULL), l->s->out);
}

static CsValue *
lower_act_backward (L *l, CsOpId id)
{
  /* sigmoid_backward and tanh_backward(grad_output, output), silu_backward(grad_output, self) */
  CsValue *g = up (l, sa (l, CS_ARG_GRAD_OUTPUT));
  CsValue *y = up (l, sa (l, id == CS_OP_ATEN_SILU_BACKWARD ? CS_ARG_SELF : CS_ARG_OUTPUT));
  CsValue *one = vfloat (l, 1.0), *r;

  if (!tensor (g) || !tensor (y))
    return lfail (l, CS_DECOMPOSE_ERROR_ARGS, "needs two typed tensors");
  switch (id)
    {
    case CS_OP_ATEN_SIGMOID_BACKWARD:   /* g * y * (1 - y), y = sigmoid(x) */
      r = mul (l, g, mul (l, y, sub (l, one, y)));
      break;
    case CS_OP_ATEN_TANH_BACKWARD:      /* g * (1 - y^2), y = tanh(x) */
      r = mul (l, g, sub (l, one, mul (l, y, y)));
      break;
    default:                            /* silu: g * s * (1 + x * (1 - s)), s = sigmoid(x) */
      {
        CsValue *s = un (l, "ltorch.sigmoid", y);
        r = mul (l, g, mul (l, s, add (l, one, mul (l, y, sub (l, one, s)))));
      }
      break;
    }
  return fit (l, r, l->s->out);
}

/* The truth value of @v as torch/_refs logical_* take it: a bool tensor as it is, another
 * tensor as `v != 0`, a number as the bool literal `v != 0`. */
static CsValue *
truth (L *l, CsValue *v)
{
  CsProxy *t = tensor (v);
  double x;

  CHECK (v);
  if (t != NULL)
    return t->dtype == CS_DTYPE_B8 ? v : call (l, "ltorch.ne", v, vint (l, 0), NULL);
  if (!number (v, &x))
    return lfail (l, CS_DECOMPOSE_ERROR_ARGS, "operands must be tensors or numbers");
  return vbool (l, x != 0);
}

/* @v expanded to the shape the graph printed for the statement's output (ltorch.expand), for
 * the prims that do not broadcast; numbers and tensors of that shape are left as they are. */
static CsValue *
expand_to_out (L *l, CsValue *v)
{
  CsProxy *t = tensor (v), *o = tensor (l->s->out);

  CHECK (v);
  if (t == NULL || o == NULL
      || (t->rank == o->rank
          && (t->rank == 0 || memcmp (t->shape, o->shape, t->rank * sizeof (int64_t)) == 0)))
    return v;
  return call (l, "ltorch.expand", v, vdims (l, o->shape, o->rank), NULL);
}

/* split(self, split_size, dim=0) and split_with_sizes(self, split_sizes, dim=0):
 * ltorch.split, whose pieces the graph reads by position (a graph that reads only some of
 * them names `_` for the others up to the last it reads) */
static CsValue *
lower_split (L *l)
{
  /* split(self, split_size, dim=0), split_with_sizes(self, split_sizes, dim=0) */
  CsValue *a = sa (l, CS_ARG_SELF), *sz = cs_stmt_arg_if_declared (l->s, CS_ARG_SPLIT_SIZE);
  CsValue *dim = sa (l, CS_ARG_DIM), *pieces;

  if (sz == NULL)
    sz = cs_stmt_arg_if_declared (l->s, CS_ARG_SPLIT_SIZES);
  if (!tensor (a) || sz == NULL)
    return lfail (l, CS_DECOMPOSE_ERROR_ARGS, "needs a typed tensor and the split sizes");
  pieces = call (l, "ltorch.split", a, sz, dim ? dim : vint (l, 0), NULL);
  CHECK (pieces);
  if (pieces->kind != CS_VALUE_TUPLE && pieces->kind != CS_VALUE_LIST)
    return outputs (l, &pieces, 1);
  return outputs (l, pieces->u.seq.items, pieces->u.seq.n);
}

/* gather(self, dim, index, *, sparse_grad=False): out[i][j] = self[index[i][j]][j] (dim 0),
 * index no larger than self outside dim: prims.gather(self, index, dim) (sparse_grad only
 * changes the layout of the gradient) */
static CsValue *
lower_gather (L *l)
{
  CsValue *a = sa (l, CS_ARG_SELF), *dim = sa (l, CS_ARG_DIM), *idx = sa (l, CS_ARG_INDEX);
  CsProxy *ti = tensor (idx);

  if (!tensor (a) || ti == NULL || dim == NULL || dim->kind != CS_VALUE_INT)
    return lfail (l, CS_DECOMPOSE_ERROR_ARGS, "needs a typed tensor, an int dim and a typed index");
  if (cs_dtype_kind (ti->dtype) != CS_DTYPE_KIND_INT)
    return lfail (l, CS_DECOMPOSE_ERROR_ARGS, "index must be an integer tensor, got %s",
                  cs_dtype_short_name (ti->dtype));
  return call (l, "prims.gather", a, idx, dim, NULL);
}

/* bitwise_not on integers and bools (on bools: logical not) and logical_not/and/or/xor */
static CsValue *
lower_logical (L *l, CsOpId id)
{
  CsValue *a = sa (l, CS_ARG_SELF), *b = cs_stmt_arg_if_declared (l->s, CS_ARG_OTHER);
  CsProxy *ta = tensor (a);

  if (a == NULL)
    return lfail (l, CS_DECOMPOSE_ERROR_ARGS, "needs an operand");
  switch (id)
    {
    case CS_OP_ATEN_BITWISE_NOT:
      if (ta == NULL || cs_dtype_kind (ta->dtype) == CS_DTYPE_KIND_FLOAT
          || cs_dtype_kind (ta->dtype) == CS_DTYPE_KIND_COMPLEX)
        return lfail (l, CS_DECOMPOSE_ERROR_ARGS, "needs a typed integer or bool tensor");
      return call (l, "prims.bitwise_not", a, NULL);
    case CS_OP_ATEN_LOGICAL_NOT:
      if (ta == NULL)
        return lfail (l, CS_DECOMPOSE_ERROR_ARGS, "needs a typed tensor");
      if (ta->dtype == CS_DTYPE_B8)
        return call (l, "prims.bitwise_not", a, NULL);
      return call (l, "ltorch.eq", a, vint (l, 0), NULL);
    default:
      if (b == NULL || (ta == NULL && tensor (b) == NULL))
        return lfail (l, CS_DECOMPOSE_ERROR_ARGS, "needs two operands, one a typed tensor");
      a = expand_to_out (l, truth (l, a));
      b = expand_to_out (l, truth (l, b));
      CHECK (a);
      CHECK (b);
      return call (l, id == CS_OP_ATEN_LOGICAL_AND ? "prims.bitwise_and"
                      : id == CS_OP_ATEN_LOGICAL_OR ? "prims.bitwise_or" : "prims.bitwise_xor",
                   a, b, NULL);
    }
}

/** _cs_aten_lower: see cs-aten-private.h. */
CsValue *
_cs_aten_lower (const CsAtenLowerCtx *ctx, const CsStmt *stmt, GError **error)
{
  L l = { ctx, stmt, error };
  const CsOp *op;

  g_return_val_if_fail (ctx != NULL && stmt != NULL, NULL);
  op = cs_op_semantic (stmt->op);
  switch (op->id)
    {
    case CS_OP_ATEN_ADDMM:
      return lower_addmm (&l);
    case CS_OP_ATEN_T:
      return lower_t (&l);
    case CS_OP_ATEN__SOFTMAX:
    case CS_OP_ATEN__LOG_SOFTMAX:
      return lower_softmax (&l, op->id == CS_OP_ATEN__LOG_SOFTMAX);
    case CS_OP_ATEN__SOFTMAX_BACKWARD_DATA:
    case CS_OP_ATEN__LOG_SOFTMAX_BACKWARD_DATA:
      return lower_softmax_backward (&l, op->id == CS_OP_ATEN__LOG_SOFTMAX_BACKWARD_DATA);
    case CS_OP_ATEN_NATIVE_LAYER_NORM:
      return lower_layer_norm (&l);
    case CS_OP_ATEN_NATIVE_LAYER_NORM_BACKWARD:
      return lower_layer_norm_backward (&l);
    case CS_OP_ATEN_GELU_BACKWARD:
      return lower_gelu_backward (&l);
    case CS_OP_ATEN_THRESHOLD_BACKWARD:
      return lower_threshold_backward (&l);
    case CS_OP_ATEN_SIGMOID_BACKWARD:
    case CS_OP_ATEN_TANH_BACKWARD:
    case CS_OP_ATEN_SILU_BACKWARD:
      return lower_act_backward (&l, op->id);
    case CS_OP_ATEN_GATHER:
      return lower_gather (&l);
    case CS_OP_ATEN_SPLIT:
    case CS_OP_ATEN_SPLIT_WITH_SIZES:
      return lower_split (&l);
    case CS_OP_ATEN_BITWISE_NOT:
    case CS_OP_ATEN_LOGICAL_NOT:
    case CS_OP_ATEN_LOGICAL_AND:
    case CS_OP_ATEN_LOGICAL_OR:
    case CS_OP_ATEN_LOGICAL_XOR:
      return lower_logical (&l, op->id);
    case CS_OP_ATEN_PRIMS_FMA:
      {
        /* fma(a, b, c) = a * b + c, broadcast.  Inductor's kernel rounds once; the lowering
         * rounds the product to the operands' dtype before the add (ltorch.mul, ltorch.add:
         * at most half an ulp of the product more, f32 in the graphs Inductor prints) */
        CsValue *a = sa (&l, CS_ARG_A), *b = sa (&l, CS_ARG_B), *c = sa (&l, CS_ARG_C);

        if (a == NULL || b == NULL || c == NULL || (!tensor (a) && !tensor (b) && !tensor (c)))
          return lfail (&l, CS_DECOMPOSE_ERROR_ARGS, "needs three operands, one a typed tensor");
        return fit (&l, add (&l, mul (&l, a, b), c), stmt->out);
      }
    case CS_OP_ATEN_RSUB:
      {
        /* rsub(a, b, alpha=1) = b - alpha * a */
        CsValue *a = sa (&l, CS_ARG_SELF), *b = sa (&l, CS_ARG_OTHER), *al = sa (&l, CS_ARG_ALPHA);
        double alpha = 1;

        if (a == NULL || b == NULL || (al && !number (al, &alpha)))
          return lfail (&l, CS_DECOMPOSE_ERROR_ARGS, "needs two operands and a number alpha");
        if (alpha != 1)
          a = mul (&l, a, vfloat (&l, alpha));
        return fit (&l, sub (&l, b, a), stmt->out);
      }
    case CS_OP_ATEN_SCALAR_TENSOR:
      {
        /* scalar_tensor(s, dtype=, device=): full((), s) */
        CsProxy *to = tensor (stmt->out);
        CsValue *s = sa (&l, CS_ARG_S);
        CsArg args[4];
        char *dev;

        if (to == NULL || s == NULL)
          return lfail (&l, CS_DECOMPOSE_ERROR_ARGS, "needs a typed output and a value");
        dev = cs_device_to_string (&to->device);
        args[0] = (CsArg) { NULL, cs_value_new_int_seq (ctx->arena, CS_VALUE_TUPLE, NULL, 0) };
        args[1] = (CsArg) { NULL, s };
        args[2] = (CsArg) { "device", cs_value_new_string (ctx->arena, dev) };
        args[3] = (CsArg) { "dtype", cs_value_new_dtype (ctx->arena, to->dtype, FALSE) };
        g_free (dev);
        return ctx->call (ctx->data, "ltorch.full", args, 4, error);
      }
    case CS_OP_ATEN_EMBEDDING:
      {
        /* embedding(weight, indices, padding_idx=-1, ...): ltorch.embedding(indices, weight) */
        CsValue *w = sa (&l, CS_ARG_WEIGHT), *i = sa (&l, CS_ARG_INDICES);

        if (!tensor (w) || !tensor (i))
          return lfail (&l, CS_DECOMPOSE_ERROR_ARGS, "needs a typed weight and typed indices");
        return call (&l, "ltorch.embedding", i, w, NULL);
      }
    case CS_OP_ATEN_DETACH:
    case CS_OP_ATEN_ALIAS:
    case CS_OP_ATEN_LIFT_FRESH_COPY:
      {
        CsValue *a = sa (&l, CS_ARG_SELF);

        if (!tensor (a))
          return lfail (&l, CS_DECOMPOSE_ERROR_ARGS, "needs a typed tensor");
        return call (&l, "prims.shallow_copy", a, NULL);
      }
    default:
      return lfail (&l, CS_DECOMPOSE_ERROR_UNSUPPORTED, "castscope has no lowering for this op");
    }
}
