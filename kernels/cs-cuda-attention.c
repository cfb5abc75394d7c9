/* cs-cuda-attention.c: fused scaled dot product attention, forward and backward, on the GPU.
 *
 * The statements of Thunder's sdpa executor (thunder/executors/sdpaex.py:
 * sdpafx_grad_forward_scaled_dot_product_efficient_attention, sdpaex_grad_forward_..., and their
 * `..._backward`) and the ATen backend ops torch.compile's graphs hold
 * (aten._scaled_dot_product_{cudnn,flash,efficient}_attention and their `_backward`) become
 * generated kernels, compiled by NVRTC with the region kernels (same naming `k<N>`, same
 * dedupe by text, no trace name in the source: shapes, strides, dtypes, scale and the causal
 * flag are compile-time constants).
 *
 * Forward (FlashAttention's online softmax, no scores in memory): a block of 8 warps holds 8
 * query rows, one per warp; key and value tiles of BN rows go through shared memory, lane t of
 * a warp scores key j0 + t against its row, the warp keeps the running max m, the running sum
 * l and the output row (lane d holds columns d, d + 32, ...), rescaled by exp(m_old - m_new)
 * per tile.  out = acc / l, logsumexp = m + log(l) (natural log, over the scaled and masked
 * scores, as PyTorch's kernels store it), written at [b, i] of the logsumexp tensor the trace
 * types (its last extent padded to 16 or 32 by the executors: the padding is written 0, as the
 * CPU reference leaves it).
 *
 * Backward (FlashAttention-2): D = rowsum(dO * O) per query row (one warp a row), then two
 * kernels that recompute P = exp(scale q.k + mask - logsumexp) tile by tile: dQ with a warp per
 * query row and a lane per key (dS = P (dO.v - D), dQ = scale dS K; the mask's gradient dS is
 * added there with atomics into an f32/f64 accumulator, then stored in the mask's dtype), and
 * dK, dV with a warp per key and a lane per query row (dV = P^T dO, dK = scale dS^T Q).  No
 * atomics on dQ, dK or dV.
 *
 * Arithmetic is f32 for bf16/f16/f32 tensors (values are rounded once, where a kernel stores
 * them) and f64 for f64 tensors, so the f64 reference program (cs-cuda-f64.c) runs the same
 * kernels in double.
 *
 * Tensor cores: bf16 and f16 tensors whose head dims E and Ev are multiples of 16 up to 128 run
 * the same algorithms on mma.sync.aligned.m16n8k16 (cs_mma_{bf16,f16}_16816 of the jit
 * preamble, f32 accumulators), FlashAttention-2 style: a block of 4 warps owns 64 query rows
 * (forward, dQ) or 64 keys (dK/dV), 16 a warp, its own operand's fragments in registers, the
 * other operands' tiles in shared memory as 16-bit payloads, row-major with rows padded by 16
 * bytes, copied by cp.async (the backward kernels in two stages: the next tile is copied while
 * the current one is used), their B fragments read by ldmatrix (.trans where the product takes
 * the tile untransposed: P V, dS K, P^T dO, dS^T Q); softmax, masks and the
 * logsumexp on the f32 accumulator fragments, as the CUDA-core kernels compute them.  The
 * differences: P (forward), P^T and dS (backward) are rounded to the tensor dtype as mma
 * operands (FlashAttention's own rounding), sums run in the tensor cores' order.  Everything
 * else (f32, f64 and so the f64 reference program, other head dims) runs on CUDA cores; the
 * step labels say "(tensor cores)" or "(CUDA cores)".  Causal is PyTorch's is_causal: the top-left
 * triangle (key j > query i masked), also when L != S.  A boolean mask keeps the scores where
 * it is true; a float mask is added.  dropout_p != 0 is refused (PyTorch's Philox stream is
 * not reproduced).
 *
 * cuDNN: in device programs where libcudnn.so.9 loads (cs-cuda-cudnn.c), bf16/f16 attention
 * without a mask whose operands cuDNN can view as [b, h, rows, cols] runs as one cuDNN fused
 * flash-attention step a direction instead (labels "(cuDNN)"), what Thunder's cudnn executor
 * runs; the kernels above remain for everything else and with CASTSCOPE_CUDNN=0.
 */
#include "cs-config.h"

#include "cs-cuda-private.h"

#include <math.h>
#include <string.h>

#define ATT_WARPS 8                  /* warps (= query or key rows) per block */
#define ATT_SMEM_BYTES 46080         /* static shared memory a kernel may take (48 KiB - 3 KiB) */
#define ATT_MAX_HEAD 256             /* largest head dim (E and Ev) */

/* What the schemas (core/cs-ops-list.h) do not say of one attention op: its arguments
 * (query, dropout_p, is_causal, scale, out, logsumexp ...) are read through its schema.  The same
 * table as the CPU reference's (core/cs-ref.c), from thunder/executors/sdpaex.py and ATen's
 * native_functions.yaml. */
typedef struct
{
  gboolean    backward;  /* a `_backward` statement */
  gboolean    has_mask;  /* the op takes a mask */
  CsArgName   mask;      /* attn_mask / attn_bias (when has_mask) */
  CsArgName   grad_out;  /* backward: grad_out, or ATen's efficient backward's grad_out_ */
  guint       n_out;     /* forward: outputs; backward: 3, or 4 with grad_attn_mask */
  gboolean    cum;       /* forward: outputs 2 and 3 are cum_seq_q / cum_seq_k */
} AttLayout;

static const AttLayout fw_flash = { FALSE, FALSE, 0, 0, 9, TRUE };
static const AttLayout fw_mem = { FALSE, TRUE, CS_ARG_ATTN_MASK, 0, 4, FALSE };
static const AttLayout fw_aten_cudnn = { FALSE, TRUE, CS_ARG_ATTN_BIAS, 0, 9, TRUE };
static const AttLayout fw_aten_flash = { FALSE, FALSE, 0, 0, 9, TRUE };
static const AttLayout fw_aten_mem = { FALSE, TRUE, CS_ARG_ATTN_BIAS, 0, 4, FALSE };
static const AttLayout bw_flash = { TRUE, FALSE, 0, CS_ARG_GRAD_OUT, 3, FALSE };
static const AttLayout bw_mem = { TRUE, TRUE, CS_ARG_ATTN_MASK, CS_ARG_GRAD_OUT, 4, FALSE };
static const AttLayout bw_aten_cudnn = { TRUE, TRUE, CS_ARG_ATTN_BIAS, CS_ARG_GRAD_OUT, 3, FALSE };
static const AttLayout bw_aten_flash = { TRUE, FALSE, 0, CS_ARG_GRAD_OUT, 3, FALSE };
static const AttLayout bw_aten_mem = { TRUE, TRUE, CS_ARG_ATTN_BIAS, CS_ARG_GRAD_OUT_, 4, FALSE };

static const AttLayout *
layout_of (const CsStmt *st)
{
  switch (cs_op_semantic (st->op)->id)
    {
    case CS_OP_EX_SDPAFX_GRAD_FORWARD_SCALED_DOT_PRODUCT_EFFICIENT_ATTENTION: return &fw_flash;
    case CS_OP_EX_SDPAFX_SCALED_DOT_PRODUCT_EFFICIENT_ATTENTION_BACKWARD: return &bw_flash;
    case CS_OP_EX_SDPAEX_GRAD_FORWARD_SCALED_DOT_PRODUCT_EFFICIENT_ATTENTION: return &fw_mem;
    case CS_OP_EX_SDPAEX_SCALED_DOT_PRODUCT_EFFICIENT_ATTENTION_BACKWARD: return &bw_mem;
    case CS_OP_ATEN__SCALED_DOT_PRODUCT_CUDNN_ATTENTION: return &fw_aten_cudnn;
    case CS_OP_ATEN__SCALED_DOT_PRODUCT_CUDNN_ATTENTION_BACKWARD: return &bw_aten_cudnn;
    case CS_OP_ATEN__SCALED_DOT_PRODUCT_FLASH_ATTENTION: return &fw_aten_flash;
    case CS_OP_ATEN__SCALED_DOT_PRODUCT_FLASH_ATTENTION_BACKWARD: return &bw_aten_flash;
    case CS_OP_ATEN__SCALED_DOT_PRODUCT_EFFICIENT_ATTENTION: return &fw_aten_mem;
    case CS_OP_ATEN__SCALED_DOT_PRODUCT_EFFICIENT_ATTENTION_BACKWARD: return &bw_aten_mem;
    default: return NULL;
    }
}

/**
 * cs_cuda_attention_handles:
 * @st: a top-level CALL statement
 *
 * Whether @st is one of the attention statements this file runs: the sdpa executor's four
 * (sdpafx_/sdpaex_ forward and backward) or ATen's six SDPA backend ops.
 * Returns: TRUE when cs_cuda_attention_call() takes @st
 */
gboolean
cs_cuda_attention_handles (const CsStmt *st)
{
  return st->kind == CS_STMT_CALL && st->op != NULL && layout_of (st) != NULL;
}

/* ---- small helpers ---------------------------------------------------------------------- */

static gboolean G_GNUC_PRINTF (3, 4)
afail (GError **error, const CsStmt *st, const char *fmt, ...)
{
  va_list ap;
  g_autofree char *msg = NULL;

  va_start (ap, fmt);
  msg = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  if (st->line)
    g_set_error (error, CS_CUDA_ERROR, CS_CUDA_ERROR_UNSUPPORTED, "line %u:%u: %s: %s", st->line, st->col,
                 st->callee, msg);
  else
    g_set_error (error, CS_CUDA_ERROR, CS_CUDA_ERROR_UNSUPPORTED, "%s: %s", st->callee, msg);
  return FALSE;
}

static gboolean
number_of (const CsValue *v, double *f)
{
  if (v == NULL)
    return FALSE;
  switch (v->kind)
    {
    case CS_VALUE_INT: *f = (double) v->u.i; return TRUE;
    case CS_VALUE_FLOAT: *f = v->u.f; return TRUE;
    case CS_VALUE_BOOL: *f = v->u.b ? 1.0 : 0.0; return TRUE;
    case CS_VALUE_PROXY:
      if (v->u.proxy->kind == CS_PROXY_NUMBER && v->u.proxy->has_value && v->u.proxy->value)
        return number_of (v->u.proxy->value, f);
      return FALSE;
    default:
      return FALSE;
    }
}

/* A literal argument @name, read through the op's schema (None or absent: @dflt). */
static gboolean
flag_of (const CsStmt *st, CsArgName name, double dflt, double *out, GError **error)
{
  const CsValue *v = cs_stmt_arg (st, name);

  *out = dflt;
  if (v == NULL || v->kind == CS_VALUE_NONE)
    return TRUE;
  if (!number_of (v, out) || !isfinite (*out))
    return afail (error, st, "%s must be a finite number literal", cs_arg_name (name));
  return TRUE;
}

/* The slot of tensor argument @name (read through the op's schema), or -1 (an error set) when
 * it is not a known tensor. */
static gint
tensor_arg (CsCudaProgram *p, const CsStmt *st, CsArgName name, GError **error)
{
  CsValue *v = cs_stmt_arg (st, name);
  gint s = v && v->kind == CS_VALUE_PROXY ? cs_cuda_program_lookup (p, v->u.proxy) : -1;

  if (s < 0)
    afail (error, st, "argument %s is not a tensor the CUDA executor holds", cs_arg_name (name));
  return s;
}

/* Output item @k of @st: a proxy, or NULL (`_`, absent). */
static CsProxy *
out_item (const CsStmt *st, guint k)
{
  const CsValue *o = st->out;

  if (o == NULL)
    return NULL;
  if (o->kind == CS_VALUE_PROXY)
    return k == 0 ? o->u.proxy : NULL;
  if ((o->kind == CS_VALUE_TUPLE || o->kind == CS_VALUE_LIST) && k < o->u.seq.n
      && o->u.seq.items[k]->kind == CS_VALUE_PROXY)
    return o->u.seq.items[k]->u.proxy;
  return NULL;
}

static gboolean
is_att_float (CsDtype dt)
{
  return dt == CS_DTYPE_BF16 || dt == CS_DTYPE_F16 || dt == CS_DTYPE_F32 || dt == CS_DTYPE_F64;
}

/* `[a, b, c]` */
static char *
shape_text (const int64_t *shape, guint rank)
{
  GString *s = g_string_new ("[");

  for (guint i = 0; i < rank; i++)
    g_string_append_printf (s, "%s%" G_GINT64_FORMAT, i ? ", " : "", shape[i]);
  g_string_append_c (s, ']');
  return g_string_free (s, FALSE);
}

/* ---- kernels: text, interning, steps ---------------------------------------------------- */

/* One generated kernel being written: its parameters (slots, in order) and body. */
typedef struct
{
  CsCudaProgram *p;        /* the program it is added to */
  GArray        *params;   /* element-type guint: slot ids */
  GArray        *is_out;   /* element-type gboolean */
  GString       *body;     /* the code between the braces */
  guint          threads;  /* threads a block (a multiple of 32, at most 256) */
} AttGen;

static void
gen_init (AttGen *g, CsCudaProgram *p)
{
  g->p = p;
  g->params = g_array_new (FALSE, FALSE, sizeof (guint));
  g->is_out = g_array_new (FALSE, FALSE, sizeof (gboolean));
  g->body = g_string_new ("");
  g->threads = ATT_WARPS * 32;
}

static void
gen_clear (AttGen *g)
{
  g_array_unref (g->params);
  g_array_unref (g->is_out);
  g_string_free (g->body, TRUE);
}

/* Parameter a<N> for @slot (N returned).  A slot read and written gets one parameter. */
static guint
gen_param (AttGen *g, guint slot, gboolean out)
{
  for (guint i = 0; i < g->params->len; i++)
    if (g_array_index (g->params, guint, i) == slot)
      {
        if (out)
          g_array_index (g->is_out, gboolean, i) = TRUE;
        return i;
      }
  g_array_append_val (g->params, slot);
  g_array_append_val (g->is_out, out);
  return g->params->len - 1;
}

/* A lambda `name (i) -> acc_t` that reads element @i of parameter a<param> (a slot of @dt) as
 * the accumulator type. */
static void
gen_loader (AttGen *g, const char *name, guint param, CsDtype dt)
{
  const char *conv = dt == CS_DTYPE_BF16 ? "cs_bf2f" : dt == CS_DTYPE_F16 ? "cs_h2f" : "";

  g_string_append_printf (g->body, "  auto %s = [&] (long long i) -> acc_t { return (acc_t) %s (a%u[i]); };\n",
                          name, conv, param);
}

/* A lambda `name (i, v)` that stores the accumulator value @v as element @i of a<param>. */
static void
gen_storer (AttGen *g, const char *name, guint param, CsDtype dt)
{
  switch (dt)
    {
    case CS_DTYPE_BF16:
      g_string_append_printf (g->body, "  auto %s = [&] (long long i, acc_t v) { a%u[i] = cs_f2bf ((float) v); };\n",
                              name, param);
      break;
    case CS_DTYPE_F16:
      g_string_append_printf (g->body, "  auto %s = [&] (long long i, acc_t v) { a%u[i] = cs_f2h ((float) v); };\n",
                              name, param);
      break;
    default:
      g_string_append_printf (g->body, "  auto %s = [&] (long long i, acc_t v) { a%u[i] = (%s) v; };\n",
                              name, param, cs_cuda_storage_type (dt));
      break;
    }
}

/* The accumulator type's typedef, -inf, exp and log, and the warp reductions. */
static void
gen_acc (AttGen *g, gboolean f64)
{
  if (f64)
    g_string_append (g->body,
                     "  typedef double acc_t;\n"
                     "  const acc_t ninf = -__longlong_as_double (0x7ff0000000000000LL);\n"
                     "  auto ex = [] (acc_t x) -> acc_t { return exp (x); };\n"
                     "  auto lg = [] (acc_t x) -> acc_t { return log (x); };\n");
  else
    g_string_append (g->body,
                     "  typedef float acc_t;\n"
                     "  const acc_t ninf = -__int_as_float (0x7f800000);\n"
                     "  auto ex = [] (acc_t x) -> acc_t { return expf (x); };\n"
                     "  auto lg = [] (acc_t x) -> acc_t { return logf (x); };\n");
  g_string_append (g->body,
                   "  auto wmax = [] (acc_t v) -> acc_t {\n"
                   "    for (int o = 16; o > 0; o >>= 1) { acc_t u = cs_shfl (v, o); v = u > v ? u : v; }\n"
                   "    return v; };\n"
                   "  auto wsum = [] (acc_t v) -> acc_t {\n"
                   "    for (int o = 16; o > 0; o >>= 1) v += cs_shfl (v, o);\n"
                   "    return v; };\n");
}

/* Adds the finished kernel to the program (or finds its identical twin) and its step. */
static CsCudaStep *
gen_finish (AttGen *g, char *label, guint64 grid_x, double flops)
{
  CsCudaProgram *p = g->p;
  g_autoptr(GString) text = g_string_new ("(");
  g_autofree char *attrs = g_strdup_printf ("__launch_bounds__(%u)", g->threads);
  guint k;
  CsCudaStep *step;
  double bytes = 0;

  for (guint i = 0; i < g->params->len; i++)
    {
      const CsCudaSlot *s = cs_cuda_program_slot (p, g_array_index (g->params, guint, i));

      g_string_append_printf (text, "%s%s%s * __restrict__ a%u", i ? ", " : "",
                              g_array_index (g->is_out, gboolean, i) ? "" : "const ", cs_cuda_storage_type (s->dtype), i);
    }
  g_string_append (text, ")\n{\n");
  g_string_append (text, g->body->str);
  g_string_append (text, "}\n");
  k = cs_cuda_intern_kernel (p, attrs, text->str);
  step = cs_cuda_program_add_step (p, CS_CUDA_STEP_KERNEL, "attention", label);
  step->kernel = k;
  step->grid[0] = (unsigned int) MAX (grid_x, 1);
  step->grid[1] = 1;
  step->grid[2] = 1;
  step->block[0] = g->threads;
  step->block[1] = 1;
  step->block[2] = 1;
  for (guint i = 0; i < g->params->len; i++)
    {
      CsCudaKArg arg = { g_array_index (g->params, guint, i) };
      const CsCudaSlot *s = cs_cuda_program_slot (p, arg.slot);

      g_array_append_val (step->args, arg);
      if (g_array_index (g->is_out, gboolean, i))
        g_array_append_val (step->writes, arg.slot);
      else
        g_array_append_val (step->reads, arg.slot);
      bytes += (double) cs_cuda_slot_numel (s) * (double) cs_dtype_size_bytes (s->dtype);
    }
  step->flops = flops;
  step->bytes = bytes;
  step->floor_ms = MAX (bytes / (CS_CUDA_PEAK_TBPS * 1e12), flops / (CS_CUDA_PEAK_F32_TFLOPS * 1e12)) * 1e3;
  g_array_set_size (g->params, 0);
  g_array_set_size (g->is_out, 0);
  g_string_truncate (g->body, 0);
  g->threads = ATT_WARPS * 32;
  return step;
}

/* A kernel that zeroes contiguous slot @slot (an output the executor does not model: RNG
 * state, cumulative sequence lengths, the logsumexp of compute_log_sumexp=False; or an
 * accumulator). */
static void
gen_zero (CsCudaProgram *p, guint slot, const char *what)
{
  AttGen g;
  const CsCudaSlot *s = cs_cuda_program_slot (p, slot);
  gsize n = cs_cuda_slot_numel (s);
  guint a;

  if (n == 0)
    return;
  gen_init (&g, p);
  a = gen_param (&g, slot, TRUE);
  g_string_append_printf (g.body, "  for (long long i = (long long) blockIdx.x * blockDim.x + threadIdx.x; i < %zuLL;"
                          " i += (long long) gridDim.x * blockDim.x)\n    a%u[i] = 0;\n", n, a);
  gen_finish (&g, g_strdup_printf ("attention zero %s", what), MIN ((n + 255) / 256, (gsize) 65535 * 64), 0);
  gen_clear (&g);
}

/* ---- operands ---------------------------------------------------------------------------- */

/* One operand of the attention kernels: a [batch..., rows, cols] tensor view whose last dim is
 * unit-stride (else copied), addressed as batch offset + row * row_stride + col. */
typedef struct
{
  guint   slot;         /* the slot read */
  int64_t row_stride;   /* elements */
} AttOperand;

/* Normalises @slot to a view whose last dim has stride 1 (a copy when it has not). */
static gboolean
operand (CsCudaProgram *p, guint slot, const char *label, AttOperand *op, GError **error)
{
  const CsCudaSlot *s = cs_cuda_program_slot (p, slot);

  if (s->rank >= 1 && s->strides[s->rank - 1] != 1 && s->shape[s->rank - 1] > 1)
    {
      if (!cs_cuda_codegen_copy (p, slot, label, &slot, error))
        return FALSE;
      s = cs_cuda_program_slot (p, slot);
    }
  op->slot = slot;
  op->row_stride = s->rank >= 2 ? (s->shape[s->rank - 2] > 1 ? s->strides[s->rank - 2] : 0) : 0;
  return TRUE;
}

/* Appends `auto <name> = [] (long long b) -> long long { return ...; };`: the element offset of
 * batch @b (row-major over @bshape[0..nbd)) in @s, whose dims are right-aligned to the batch
 * dims followed by (rows, cols), from the slot's first element (its own offset is in the
 * kernel argument's pointer): a dim of extent 1 (broadcast) contributes nothing.  With
 * @contig the offsets of a contiguous tensor of @s's shape (the mask gradient's layout). */
static void
gen_batch_offset (AttGen *g, const char *name, const CsCudaSlot *s, const int64_t *bshape, guint nbd,
                  gboolean contig)
{
  int64_t cst[CS_MAX_DIMS];
  int64_t inner = 1;
  gboolean any = FALSE;
  guint lead = s->rank >= 2 ? s->rank - 2 : 0;   /* the slot's batch dims */

  cst[s->rank ? s->rank - 1 : 0] = 1;
  for (gint d = (gint) s->rank - 2; d >= 0; d--)
    cst[d] = cst[d + 1] * s->shape[d + 1];
  g_string_append_printf (g->body, "  auto %s = [] (long long b) -> long long { return 0", name);
  for (gint d = (gint) nbd - 1; d >= 0; d--)
    {
      gint sd = (gint) lead - ((gint) nbd - d);   /* the slot's dim aligned with batch dim d */

      if (sd >= 0 && s->shape[sd] > 1)
        {
          int64_t stride = contig ? cst[sd] : s->strides[sd];

          if (stride != 0)
            {
              g_string_append_printf (g->body, " + (b / %" G_GINT64_FORMAT "LL %% %" G_GINT64_FORMAT "LL) * %"
                                      G_GINT64_FORMAT "LL", inner, bshape[d], stride);
              any = TRUE;
            }
        }
      inner *= bshape[d];
    }
  if (!any)
    g_string_append (g->body, " + 0 * b");
  g_string_append (g->body, "; };\n");
}

/* ---- the statement -------------------------------------------------------------------- */

/* Everything a statement's kernels are specialised on. */
typedef struct
{
  const CsStmt *st;                /* the attention statement */
  const char *name;                /* the first output's proxy name, for step labels */
  guint   rank;                    /* of q, k, v */
  int64_t bshape[CS_MAX_DIMS];     /* the batch dims (all but the last two) */
  guint   nbd;                     /* their number */
  int64_t nb;                      /* their product */
  int64_t L, S, E, Ev;             /* queries, keys, head dims of q/k and v */
  gboolean causal;                 /* top-left triangle masked */
  double  scale;                   /* score scale (default 1/sqrt(E)) */
  gboolean f64;                    /* f64 arithmetic (f64 tensors) */
  CsDtype dtype;                   /* of q, k and v */
  gint    mask;                    /* slot of the mask, or -1 */
  CsDtype mask_dtype;              /* B8 (keep where true) or a float (added) */
  int64_t mask_si, mask_sj;        /* mask strides along L and S (0 where broadcast) */
  int64_t mask_ci, mask_cj;        /* contiguous strides of the mask's shape along L and S */
} Att;

/* The mask operand: broadcastable to [batch..., L, S] right-aligned, any strides. */
static gboolean
att_mask (CsCudaProgram *p, Att *a, GError **error)
{
  const CsCudaSlot *m = cs_cuda_program_slot (p, (guint) a->mask);
  int64_t cst[CS_MAX_DIMS];

  a->mask_dtype = m->dtype;
  if (m->rank < 1 || m->rank > a->rank || (m->dtype != CS_DTYPE_B8 && !is_att_float (m->dtype)))
    return afail (error, a->st, "attn_mask must be a bool or float tensor of rank 1 to %u", a->rank);
  for (guint d = 0; d < m->rank; d++)
    {
      guint fd = d + (a->rank - m->rank);
      int64_t full = fd == a->rank - 1 ? a->S : fd == a->rank - 2 ? a->L : a->bshape[fd];

      if (m->shape[d] != full && m->shape[d] != 1)
        return afail (error, a->st, "attn_mask does not broadcast to [..., %" G_GINT64_FORMAT ", %"
                      G_GINT64_FORMAT "]", a->L, a->S);
    }
  cst[m->rank - 1] = 1;
  for (gint d = (gint) m->rank - 2; d >= 0; d--)
    cst[d] = cst[d + 1] * m->shape[d + 1];
  a->mask_sj = m->shape[m->rank - 1] > 1 ? m->strides[m->rank - 1] : 0;
  a->mask_cj = m->shape[m->rank - 1] > 1 ? cst[m->rank - 1] : 0;
  a->mask_si = m->rank >= 2 && m->shape[m->rank - 2] > 1 ? m->strides[m->rank - 2] : 0;
  a->mask_ci = m->rank >= 2 && m->shape[m->rank - 2] > 1 ? cst[m->rank - 2] : 0;
  return TRUE;
}

/* Shapes, dtypes and literals of @st into @a. */
static gboolean
att_setup (CsCudaProgram *p, const CsStmt *st, const AttLayout *lay, guint q, guint k, guint v, Att *a,
           GError **error)
{
  const CsCudaSlot *qs = cs_cuda_program_slot (p, q), *ks = cs_cuda_program_slot (p, k);
  const CsCudaSlot *vs = cs_cuda_program_slot (p, v);
  double dropout, causal;

  memset (a, 0, sizeof *a);
  a->st = st;
  a->name = "_";
  for (guint i = 0; i < 3; i++)
    if (out_item (st, i) != NULL)
      {
        a->name = out_item (st, i)->name;
        break;
      }
  a->mask = -1;
  if (qs->rank < 2 || ks->rank != qs->rank || vs->rank != qs->rank)
    return afail (error, st, "query, key and value must be tensors of one rank >= 2");
  a->rank = qs->rank;
  a->nbd = qs->rank - 2;
  a->nb = 1;
  for (guint d = 0; d < a->nbd; d++)
    {
      if (ks->shape[d] != qs->shape[d] || vs->shape[d] != qs->shape[d])
        return afail (error, st, "query, key and value differ in batch dimension %u", d);
      a->bshape[d] = qs->shape[d];
      a->nb *= qs->shape[d];
    }
  a->L = qs->shape[a->rank - 2];
  a->E = qs->shape[a->rank - 1];
  a->S = ks->shape[a->rank - 2];
  a->Ev = vs->shape[a->rank - 1];
  if (ks->shape[a->rank - 1] != a->E || vs->shape[a->rank - 2] != a->S)
    return afail (error, st, "key must be [..., S, E] and value [..., S, Ev]");
  if (qs->dtype != ks->dtype || qs->dtype != vs->dtype || !is_att_float (qs->dtype))
    return afail (error, st, "query, key and value must share one of bf16, f16, f32, f64 (got %s, %s, %s)",
                  cs_dtype_short_name (qs->dtype), cs_dtype_short_name (ks->dtype),
                  cs_dtype_short_name (vs->dtype));
  if (a->E < 1 || a->Ev < 1 || a->E > ATT_MAX_HEAD || a->Ev > ATT_MAX_HEAD)
    return afail (error, st, "head dims %" G_GINT64_FORMAT " and %" G_GINT64_FORMAT
                  ": the CUDA attention kernels take 1 to %d", a->E, a->Ev, ATT_MAX_HEAD);
  if (a->L < 1 || a->S < 1 || a->nb < 1 || a->nb * a->L > G_MAXINT32 || a->nb * a->S > G_MAXINT32)
    return afail (error, st, "empty or too large attention (%" G_GINT64_FORMAT " x %" G_GINT64_FORMAT
                  " x %" G_GINT64_FORMAT ")", a->nb, a->L, a->S);
  a->f64 = qs->dtype == CS_DTYPE_F64;
  a->dtype = qs->dtype;
  if (!flag_of (st, CS_ARG_DROPOUT_P, 0.0, &dropout, error)
      || !flag_of (st, CS_ARG_IS_CAUSAL, 0.0, &causal, error)
      || !flag_of (st, CS_ARG_SCALE, 1.0 / sqrt ((double) a->E), &a->scale, error))
    return FALSE;
  if (dropout != 0.0)
    return afail (error, st, "dropout_p = %g is not supported on --device cuda (the attention kernels "
                  "have no dropout: PyTorch's Philox stream is not reproduced)", dropout);
  a->causal = causal != 0.0;
  if (lay->has_mask)
    {
      CsValue *mv = cs_stmt_arg (st, lay->mask);

      if (mv != NULL && mv->kind != CS_VALUE_NONE)
        {
          a->mask = tensor_arg (p, st, lay->mask, error);
          if (a->mask < 0 || !att_mask (p, a, error))
            return FALSE;
        }
    }
  return TRUE;
}

/* The constants every kernel of @a starts with. */
static void
gen_consts (AttGen *g, const Att *a)
{
  gen_acc (g, a->f64);
  g_string_append_printf (g->body,
                          "  constexpr int L = %" G_GINT64_FORMAT ", S = %" G_GINT64_FORMAT ", E = %" G_GINT64_FORMAT
                          ", EV = %" G_GINT64_FORMAT ";\n"
                          "  constexpr int NE = (E + 31) / 32, NV = (EV + 31) / 32, W = %d;\n"
                          "  constexpr bool CAUSAL = %s;\n"
                          "  const acc_t scale = (acc_t) %.17g;\n"
                          "  const int w = threadIdx.x >> 5, lane = threadIdx.x & 31;\n",
                          a->L, a->S, a->E, a->Ev, ATT_WARPS, a->causal ? "true" : "false", a->scale);
}

/* The mask applied to score `sc` of (b, i, j): `ldm`, `mb` and `gmb` (gradient) declared. */
static void
gen_mask_decl (AttGen *g, CsCudaProgram *p, const Att *a, gint gm_acc)
{
  const CsCudaSlot *m;
  guint pm;

  if (a->mask < 0)
    return;
  m = cs_cuda_program_slot (p, (guint) a->mask);
  pm = gen_param (g, (guint) a->mask, FALSE);
  if (a->mask_dtype == CS_DTYPE_B8)
    g_string_append_printf (g->body, "  auto ldm = [&] (long long i) -> bool { return a%u[i] != 0; };\n", pm);
  else
    gen_loader (g, "ldm", pm, a->mask_dtype);
  gen_batch_offset (g, "mb", m, a->bshape, a->nbd, FALSE);
  g_string_append_printf (g->body, "  constexpr long long MI = %" G_GINT64_FORMAT "LL, MJ = %" G_GINT64_FORMAT "LL;\n",
                          a->mask_si, a->mask_sj);
  if (gm_acc >= 0)
    {
      guint pg = gen_param (g, (guint) gm_acc, TRUE);

      gen_batch_offset (g, "gmb", m, a->bshape, a->nbd, TRUE);
      g_string_append_printf (g->body, "  constexpr long long GI = %" G_GINT64_FORMAT "LL, GJ = %" G_GINT64_FORMAT "LL;\n"
                              "  acc_t * __restrict__ gacc = a%u;\n", a->mask_ci, a->mask_cj, pg);
    }
}

/* mask_apply's statement at indentation @indent (a static buffer, valid until the next call). */
static const char *
mask_apply_in (const Att *a, const char *indent)
{
  static char buf[256];

  if (a->mask < 0)
    return "";
  g_snprintf (buf, sizeof buf, "%s%s", indent,
              a->mask_dtype == CS_DTYPE_B8 ? "if (!ldm (mb (b) + (long long) i * MI + (long long) j * MJ)) sc = ninf;\n"
                                           : "sc += ldm (mb (b) + (long long) i * MI + (long long) j * MJ);\n");
  return buf;
}

/* `sc` masked for key j of row i of batch b (valid stays as is; a masked score is ninf). */
static const char *
mask_apply (const Att *a)
{
  if (a->mask < 0)
    return "";
  return a->mask_dtype == CS_DTYPE_B8
         ? "          if (!ldm (mb (b) + (long long) i * MI + (long long) j * MJ)) sc = ninf;\n"
         : "          sc += ldm (mb (b) + (long long) i * MI + (long long) j * MJ);\n";
}

/* Largest power of two <= 32 with @fixed + bn * @per_row bytes within the shared budget. */
static int
tile_rows (gsize fixed, gsize per_row)
{
  int bn = 32;

  while (bn > 1 && fixed + (gsize) bn * per_row > ATT_SMEM_BYTES)
    bn /= 2;
  return bn;
}

/* Declares an operand: loader `name`, batch offset `nameb`, row stride `NAMER`. */
static void
gen_operand (AttGen *g, CsCudaProgram *p, const Att *a, const char *name, const char *rs, const AttOperand *op)
{
  const CsCudaSlot *s = cs_cuda_program_slot (p, op->slot);
  guint pa = gen_param (g, op->slot, FALSE);
  g_autofree char *bname = g_strconcat (name, "b", NULL);

  gen_loader (g, name, pa, s->dtype);
  gen_batch_offset (g, bname, s, a->bshape, a->nbd, FALSE);
  g_string_append_printf (g->body, "  constexpr long long %s = %" G_GINT64_FORMAT "LL;\n", rs, op->row_stride);
}

/* Declares a raw operand (its 16-bit payloads, no conversion): `name (i) -> unsigned`, batch
 * offset `nameb`, row stride `NAMER`, and `name4 (i)`: elements i .. i + 3 as one 8-byte load
 * (element i in the low bits), valid where `NAMEV` is true: the view's offset, row and batch
 * strides are multiples of 4 elements (its buffer is 256-byte aligned), so every row start and
 * every 4th column of a row is 8-byte aligned; `namep (i)`: the address of element i, 16-byte
 * aligned at every 8th column where `NAMEA` is true (the same with multiples of 8). */
static void
gen_raw_operand (AttGen *g, CsCudaProgram *p, const Att *a, const char *name, const char *rs, const AttOperand *op)
{
  const CsCudaSlot *s = cs_cuda_program_slot (p, op->slot);
  guint pa = gen_param (g, op->slot, FALSE);
  g_autofree char *bname = g_strconcat (name, "b", NULL);
  gboolean vec = s->offset % 4 == 0 && op->row_stride % 4 == 0;
  gboolean vec8 = s->offset % 8 == 0 && op->row_stride % 8 == 0;

  for (guint d = 0; d + 2 < s->rank; d++)
    {
      if (s->shape[d] > 1 && s->strides[d] % 4 != 0)
        vec = FALSE;
      if (s->shape[d] > 1 && s->strides[d] % 8 != 0)
        vec8 = FALSE;
    }
  g_string_append_printf (g->body, "  auto %s = [&] (long long i) -> unsigned { return (unsigned) a%u[i]; };\n"
                          "  auto %s4 = [&] (long long i) -> unsigned long long"
                          " { return *(const unsigned long long *) &a%u[i]; };\n"
                          "  auto %sp = [&] (long long i) -> const void * { return &a%u[i]; };\n"
                          "  constexpr bool %sV = %s;\n"
                          "  constexpr bool %sA = %s;\n",
                          name, pa, name, pa, name, pa, rs, vec ? "true" : "false", rs, vec8 ? "true" : "false");
  gen_batch_offset (g, bname, s, a->bshape, a->nbd, FALSE);
  g_string_append_printf (g->body, "  constexpr long long %s = %" G_GINT64_FORMAT "LL;\n", rs, op->row_stride);
}

/* Declares `ldl` (logsumexp, contiguous, @lstride per batch) and `ldd` (D). */
static void
gen_lse_d (AttGen *g, CsCudaProgram *p, guint lse, int64_t lstride, guint dbuf)
{
  guint pl = gen_param (g, lse, FALSE), pd = gen_param (g, dbuf, FALSE);

  gen_loader (g, "ldl", pl, cs_cuda_program_slot (p, lse)->dtype);
  g_string_append_printf (g->body, "  auto ldd = [&] (long long i) -> acc_t { return a%u[i]; };\n"
                          "  constexpr long long LSTRIDE = %" G_GINT64_FORMAT "LL;\n", pd, lstride);
}

/* The inputs of an attention kernel of @a, its first parameters in this order: the constants
 * (gen_consts), q, k and v (row strides QR, KR, VR) as accumulator loaders `ldq`, `ldk`, `ldv`
 * (gen_operand: the CUDA-core kernels) or, with @raw, as 16-bit payloads `rq`, `rk`, `rv`
 * (gen_raw_operand: the tensor-core kernels); a backward kernel's (@go not NULL) dO as `ldg` /
 * `rg` (GR), the logsumexp and D (gen_lse_d: slots @lse, @lstride values per batch, and
 * @dbuf); then the mask (gen_mask_decl, with its gradient's accumulator @gm_acc, -1: none). */
static void
gen_inputs (AttGen *g, CsCudaProgram *p, const Att *a, gboolean raw, const AttOperand *q, const AttOperand *k,
            const AttOperand *v, const AttOperand *go, guint lse, int64_t lstride, guint dbuf, gint gm_acc)
{
  void (*decl) (AttGen *, CsCudaProgram *, const Att *, const char *, const char *, const AttOperand *)
    = raw ? gen_raw_operand : gen_operand;

  gen_consts (g, a);
  decl (g, p, a, raw ? "rq" : "ldq", "QR", q);
  decl (g, p, a, raw ? "rk" : "ldk", "KR", k);
  decl (g, p, a, raw ? "rv" : "ldv", "VR", v);
  if (go != NULL)
    {
      decl (g, p, a, raw ? "rg" : "ldg", "GR", go);
      gen_lse_d (g, p, lse, lstride, dbuf);
    }
  gen_mask_decl (g, p, a, gm_acc);
}

/* Output slot @slot as the next parameter, written through the storer `name (i, v)`
 * (gen_storer, in the slot's dtype), where i is the element's row-major index in the slot's
 * shape: a slot that is not contiguous (an output laid out for the transpose that reads it,
 * cs_cuda_program_new_output_slot) is written at that element's strided offset. */
static void
gen_output (AttGen *g, CsCudaProgram *p, const char *name, guint slot)
{
  const CsCudaSlot *s = cs_cuda_program_slot (p, slot);
  guint pa = gen_param (g, slot, TRUE);
  g_autofree char *raw = NULL;
  int64_t inner = 1;

  if (cs_cuda_slot_is_contiguous (s))
    {
      gen_storer (g, name, pa, s->dtype);
      return;
    }
  raw = g_strdup_printf ("%s_at", name);
  gen_storer (g, raw, pa, s->dtype);
  g_string_append_printf (g->body, "  auto %s = [&] (long long i, acc_t v) { %s (0", name, raw);
  for (gint d = (gint) s->rank - 1; d >= 0; d--)
    {
      if (s->shape[d] > 1)
        g_string_append_printf (g->body, " + (i / %" G_GINT64_FORMAT "LL %% %" G_GINT64_FORMAT "LL) * %"
                                G_GINT64_FORMAT "LL", inner, s->shape[d], s->strides[d]);
      inner *= s->shape[d];
    }
  g_string_append (g->body, ", v); };\n");
}

/* The forward's outputs: out (slot @out, storer `sto`) and, with @has_lse, the logsumexp (slot
 * @lse, storer `stl`). */
static void
gen_forward_outputs (AttGen *g, CsCudaProgram *p, guint out, gint lse, gboolean has_lse)
{
  gen_output (g, p, "sto", out);
  if (has_lse)
    gen_output (g, p, "stl", (guint) lse);
}

/* gen_finish for a tensor-core kernel: its floor from the bf16/f16 tensor-core peak. */
static CsCudaStep *
gen_finish_tc (AttGen *g, char *label, guint64 grid_x, double flops)
{
  CsCudaStep *step = gen_finish (g, label, grid_x, flops);

  step->floor_ms = MAX (step->bytes / (CS_CUDA_PEAK_TBPS * 1e12), flops / (CS_CUDA_PEAK_BF16_TFLOPS * 1e12)) * 1e3;
  return step;
}

/* Occurrences of @needle in @hay. */
static guint
count_of (const char *hay, const char *needle)
{
  guint n = 0;

  for (const char *c = strstr (hay, needle); c; c = strstr (c + 1, needle))
    n++;
  return n;
}

/* Marks a backward tensor-core kernel (dQ, or dK/dV) as one that may share a launch with the
 * other (merge_adjacent_kernels: the two read the same operands and write different
 * gradients), with its static shared memory: @bytes, for the @n_decls `__shared__`
 * declarations its generator wrote into @body; a body with other declarations (a mask's) is
 * left alone. */
static void
mark_mergeable (CsCudaStep *step, const char *body, guint n_decls, gsize bytes)
{
  if (count_of (body, "__shared__") != n_decls)
    return;
  step->mergeable = TRUE;
  step->shared_bytes = bytes;
}

/* The forward kernel: out [nb, L, Ev] (slot @out), logsumexp (slot @lse, -1: none) with
 * @lstride elements per batch (>= L: written at [b, i], the rest 0; else not written). */
static void
gen_forward (CsCudaProgram *p, const Att *a, const AttOperand *q, const AttOperand *k, const AttOperand *v,
             guint out, gint lse, int64_t lstride)
{
  AttGen g;
  gsize acc = a->f64 ? 8 : 4;
  int bn = tile_rows (ATT_WARPS * a->E * acc, (a->E + 1 + a->Ev) * acc);
  int64_t rows = MAX (a->L, lse >= 0 && lstride >= a->L ? lstride : 0);
  int64_t tiles = (rows + ATT_WARPS - 1) / ATT_WARPS;
  gboolean has_lse = lse >= 0 && lstride >= a->L;
  g_autofree char *shp = shape_text (cs_cuda_program_slot (p, q->slot)->shape, a->rank);

  gen_init (&g, p);
  gen_inputs (&g, p, a, FALSE, q, k, v, NULL, 0, 0, 0, -1);
  gen_forward_outputs (&g, p, out, lse, has_lse);
  g_string_append_printf (g.body,
    "  constexpr int BN = %d;\n"
    "  constexpr long long TILES = %" G_GINT64_FORMAT "LL, LSTRIDE = %" G_GINT64_FORMAT "LL;\n"
    "  __shared__ acc_t qs[W][E];\n"
    "  __shared__ acc_t ks[BN][E + 1];\n"
    "  __shared__ acc_t vs[BN][EV];\n"
    "  const long long b = blockIdx.x / TILES;\n"
    "  const int i0 = (int) (blockIdx.x %% TILES) * W, i = i0 + w;\n"
    "  const bool row_ok = i < L;\n"
    "  const long long qo = ldqb (b) + (long long) i * QR, ko = ldkb (b), vo = ldvb (b);\n"
    "  for (int e = lane; e < E; e += 32)\n"
    "    qs[w][e] = row_ok ? ldq (qo + e) : (acc_t) 0;\n"
    "  acc_t m = ninf, l = 0, o[NV];\n"
    "  for (int r = 0; r < NV; r++) o[r] = 0;\n"
    "  const int last = L < i0 + W ? L : i0 + W;\n"
    "  const int jend = last <= i0 ? 0 : (CAUSAL ? (S < last ? S : last) : S);\n"
    "  for (int j0 = 0; j0 < jend; j0 += BN)\n"
    "    {\n"
    "      __syncthreads ();\n"
    "      for (int x = threadIdx.x; x < BN * E; x += W * 32)\n"
    "        { const int t = x / E, e = x %% E, j = j0 + t;\n"
    "          ks[t][e] = j < S ? ldk (ko + (long long) j * KR + e) : (acc_t) 0; }\n"
    "      for (int x = threadIdx.x; x < BN * EV; x += W * 32)\n"
    "        { const int t = x / EV, e = x %% EV, j = j0 + t;\n"
    "          vs[t][e] = j < S ? ldv (vo + (long long) j * VR + e) : (acc_t) 0; }\n"
    "      __syncthreads ();\n"
    "      acc_t sc = ninf;\n"
    "      const int j = j0 + lane;\n"
    "      if (lane < BN && j < S && row_ok)\n"
    "        {\n"
    "          acc_t dot = 0;\n"
    "          for (int e = 0; e < E; e++) dot += qs[w][e] * ks[lane][e];\n"
    "          sc = dot * scale;\n"
    "%s"
    "          if (CAUSAL && j > i) sc = ninf;\n"
    "        }\n"
    "      const acc_t mt = wmax (sc), mn = m > mt ? m : mt;\n"
    "      acc_t pj = 0, alpha = 1;\n"
    "      if (mn != ninf)\n"
    "        { pj = sc == ninf ? (acc_t) 0 : ex (sc - mn); alpha = ex (m - mn); }\n"
    "      l = l * alpha + wsum (pj);\n"
    "      for (int r = 0; r < NV; r++) o[r] *= alpha;\n"
    "      for (int t = 0; t < BN; t++)\n"
    "        {\n"
    "          const acc_t pt = __shfl_sync (0xffffffffu, pj, t);\n"
    "          for (int r = 0; r < NV; r++)\n"
    "            { const int d = lane + 32 * r; if (d < EV) o[r] += pt * vs[t][d]; }\n"
    "        }\n"
    "      m = mn;\n"
    "    }\n"
    "  if (row_ok)\n"
    "    for (int r = 0; r < NV; r++)\n"
    "      { const int d = lane + 32 * r; if (d < EV) sto ((b * L + i) * EV + d, o[r] / l); }\n",
    bn, tiles, lstride, mask_apply (a));
  if (has_lse)
    g_string_append (g.body,
                     "  if (lane == 0 && i < LSTRIDE)\n"
                     "    stl (b * LSTRIDE + i, row_ok ? m + lg (l) : (acc_t) 0);\n");
  gen_finish (&g, g_strdup_printf ("attention forward (CUDA cores) %s %s x %" G_GINT64_FORMAT "%s%s", a->name, shp, a->S,
                                   a->causal ? " causal" : "", a->mask >= 0 ? " masked" : ""),
              (guint64) (a->nb * tiles),
              2.0 * (double) a->nb * (double) a->L * (double) a->S * (double) (a->E + a->Ev) * (a->causal ? 0.5 : 1.0));
  gen_clear (&g);
}

/* ---- tensor cores ------------------------------------------------------------------------- */

#define ATT_TC_ROWS 64    /* query rows a block of the tensor-core kernels (16 a warp) */
#define ATT_TC_KEYS 64    /* key and value rows a shared-memory tile */
#define ATT_TC_MAX_HEAD 128

/* Whether @a runs on the tensor-core kernels: bf16 or f16 tensors, both head dims multiples of
 * 16 up to 128 (the m16n8k16 fragments tile them exactly, the tiles fit the shared budget). */
static gboolean
att_tensor_cores (const Att *a)
{
  return (a->dtype == CS_DTYPE_BF16 || a->dtype == CS_DTYPE_F16) && a->E % 16 == 0 && a->Ev % 16 == 0
         && a->E <= ATT_TC_MAX_HEAD && a->Ev <= ATT_TC_MAX_HEAD;
}

/* A tile load of the tensor-core kernels: rows @r0 .. @r0 + @rows of raw operand @name (row
 * stride @rs, batch offset @base, @limit rows valid, the rest 0) into shared memory, row-major
 * at @dst (row pitch @pitch); 8-byte loads where the operand allows them. */
static void
gen_tile_load (AttGen *g, const char *name, const char *rs, const char *base, const char *r0, const char *rows,
               const char *cols, const char *limit, const char *dst, const char *pitch)
{
  g_string_append_printf (g->body,
    "      if (%sV)\n"
    "        for (int x = threadIdx.x; x < %s * (%s / 4); x += NT)\n"
    "          { const int t = x / (%s / 4), e = (x %% (%s / 4)) * 4, r = %s + t;\n"
    "            const unsigned long long u = r < %s ? %s4 (%s + (long long) r * %s + e) : 0ull;\n"
    "            *(unsigned long long *) &%s[t * %s + e] = u;\n"
    "          }\n"
    "      else\n"
    "        for (int x = threadIdx.x; x < %s * %s; x += NT)\n"
    "          { const int t = x / %s, e = x %% %s, r = %s + t;\n"
    "            const unsigned short u = (unsigned short) (r < %s ? %s (%s + (long long) r * %s + e) : 0u);\n"
    "            %s[t * %s + e] = u;\n"
    "          }\n",
    rs, rows, cols, cols, cols, r0, limit, name, base, rs, dst, pitch,
    rows, cols, cols, cols, r0, limit, name, base, rs, dst, pitch);
}

/* A tile load as gen_tile_load's that, where the operand's
 * `NAMEA` holds, issues 16-byte cp.async copies (rows at or past @limit stored as zeros) and
 * commits them as one group: the tile is complete once each thread has run cs_cp_async_wait0
 * and then a block barrier.  @pitch must be a multiple of 8 elements, @cols of 8, @dst 16-byte
 * aligned, and the kernel must declare the 16-byte type `v16_t`. */
static void
gen_tile_load_async (AttGen *g, const char *name, const char *rs, const char *base, const char *r0,
                     const char *rows, const char *cols, const char *limit, const char *dst, const char *pitch)
{
  g_string_append_printf (g->body,
    "      if (%sA)\n"
    "        {\n"
    "          for (int x = threadIdx.x; x < %s * (%s / 8); x += NT)\n"
    "            { const int t = x / (%s / 8), e = (x %% (%s / 8)) * 8, r = %s + t;\n"
    "              if (r < %s) cs_cp_async16 (&%s[t * %s + e], %sp (%s + (long long) r * %s + e));\n"
    "              else *(v16_t *) &%s[t * %s + e] = v16_t { 0ull, 0ull }; }\n"
    "          cs_cp_async_commit ();\n"
    "        }\n"
    "      else\n"
    "        {\n",
    rs, rows, cols, cols, cols, r0, limit, dst, pitch, name, base, rs, dst, pitch);
  gen_tile_load (g, name, rs, base, r0, rows, cols, limit, dst, pitch);
  g_string_append (g->body, "        }\n");
}

/* The lambdas every tensor-core kernel of @a declares: `mma` (cs_mma_*_16816 of the dtype),
 * `pk` (two f32 values rounded to the dtype, packed as one fragment register), the 16-byte
 * shared-memory type `v16_t`, and the lane's fragment coordinates: gq = lane / 4 and
 * tq = lane % 4 (mma fragments), lm = lane / 8 and lr8 = lane % 8 (the matrix and row whose
 * address the lane gives ldmatrix). */
static void
gen_tc_helpers (AttGen *g, const Att *a)
{
  gboolean bf = a->dtype == CS_DTYPE_BF16;

  g_string_append_printf (g->body,
    "  auto mma = [] (float *d, const unsigned *x, const unsigned *y) { %s (d, x, y); };\n"
    "  auto pk = [] (float x, float y) -> unsigned { return (unsigned) %s (x) | ((unsigned) %s (y) << 16); };\n"
    "  struct alignas (16) v16_t { unsigned long long lo, hi; };\n"
    "  const int gq = lane >> 2, tq = lane & 3, lm = lane >> 3, lr8 = lane & 7;\n",
    bf ? "cs_mma_bf16_16816" : "cs_mma_f16_16816", bf ? "cs_f2bf" : "cs_f2h", bf ? "cs_f2bf" : "cs_f2h");
}

/* The A fragments `frag[cols / 16][4]` of a warp's 16 rows @r0 and @r1 (= @r0 + 8, as the
 * m16n8k16 layout pairs them) of a raw operand, read from global memory through the element
 * lambda `elem (row, col) -> unsigned` (0 past the valid rows). */
static void
gen_a_frags (AttGen *g, const char *frag, const char *elem, const char *cols, const char *r0, const char *r1)
{
  g_string_append_printf (g->body,
    "  unsigned %s[%s / 16][4];\n"
    "#pragma unroll\n"
    "  for (int kk = 0; kk < %s / 16; kk++)\n"
    "    {\n"
    "      const int e = kk * 16 + tq * 2;\n"
    "      %s[kk][0] = %s (%s, e) | (%s (%s, e + 1) << 16);\n"
    "      %s[kk][1] = %s (%s, e) | (%s (%s, e + 1) << 16);\n"
    "      %s[kk][2] = %s (%s, e + 8) | (%s (%s, e + 9) << 16);\n"
    "      %s[kk][3] = %s (%s, e + 8) | (%s (%s, e + 9) << 16);\n"
    "    }\n",
    frag, cols, cols, frag, elem, r0, elem, r0, frag, elem, r1, elem, r1, frag, elem, r0, elem, r0,
    frag, elem, r1, elem, r1);
}

/* `acc (x)` += A (the warp's 16 rows, A fragments `af[kk]`) times the transpose of rows @row0 ..
 * @row0 + @rows of the shared row-major tile @tile (row pitch @pitch): D[16][rows] =
 * A[16][cols] tile^T, the tile's rows the n dimension (n-tiles of 8: acc[n]) and its @cols
 * columns the k dimension; the B fragments come from cs_ldm_x4, two n-tiles of 8 rows x 16
 * columns a load. */
static void
gen_mma_nt (AttGen *g, const char *acc, const char *af, const char *tile, const char *pitch, const char *row0,
            const char *rows, const char *cols)
{
  g_string_append_printf (g->body,
    "#pragma unroll\n"
    "      for (int kk = 0; kk < %s / 16; kk++)\n"
    "#pragma unroll\n"
    "        for (int np = 0; np < %s / 16; np++)\n"
    "          {\n"
    "            unsigned fb[4];\n"
    "            cs_ldm_x4 (fb, &%s[(%s + np * 16 + (lm >> 1) * 8 + lr8) * %s + kk * 16 + (lm & 1) * 8]);\n"
    "            mma (%s[2 * np], %s[kk], fb);\n"
    "            mma (%s[2 * np + 1], %s[kk], fb + 2);\n"
    "          }\n",
    cols, rows, tile, row0, pitch, acc, af, acc, af);
}

/* `acc (x)` += A times the shared row-major tile @tile (row pitch @pitch) itself: the tile's
 * rows the k dimension (16 a step, the A fragments `af[kt]`, one per 16 rows) and its @cols
 * columns the n dimension (acc[n], 8 a tile); the B fragments come from cs_ldm_x4_t
 * (transposed on the way: 16 rows x two n-tiles of 8 columns a load).  @kt names the k step
 * of the enclosing loop. */
static void
gen_mma_nn (AttGen *g, const char *acc, const char *af, const char *tile, const char *pitch, const char *cols)
{
  g_string_append_printf (g->body,
    "#pragma unroll\n"
    "          for (int np = 0; np < %s / 16; np++)\n"
    "            {\n"
    "              unsigned fb[4];\n"
    "              cs_ldm_x4_t (fb, &%s[(kt * 16 + (lm & 1) * 8 + lr8) * %s + np * 16 + (lm >> 1) * 8]);\n"
    "              mma (%s[2 * np], %s, fb);\n"
    "              mma (%s[2 * np + 1], %s, fb + 2);\n"
    "            }\n",
    cols, tile, pitch, acc, af, acc, af);
}

/* The A fragments `name[4]` of a 16-column k step from the f32 accumulator fragments of its
 * two n-tiles `acc[n0]` and `acc[n0 + 1]` (@n0 an expression), rounded to the dtype. */
static void
gen_pack_a (AttGen *g, const char *name, const char *acc, const char *n0)
{
  g_string_append_printf (g->body,
    "          const unsigned %s[4] = { pk (%s[%s][0], %s[%s][1]), pk (%s[%s][2], %s[%s][3]),\n"
    "                                   pk (%s[%s + 1][0], %s[%s + 1][1]), pk (%s[%s + 1][2], %s[%s + 1][3]) };\n",
    name, acc, n0, acc, n0, acc, n0, acc, n0, acc, n0, acc, n0, acc, n0, acc, n0);
}

/* The tensor-core forward kernel (FlashAttention-2): a block of 4 warps owns 64 query rows,
 * 16 a warp, its q fragments held in registers for the whole key loop; key and value tiles of
 * 64 rows go through shared memory row-major as 16-bit payloads, rows padded by 8 elements
 * (16 bytes) so the 8 rows an ldmatrix phase reads fall in distinct banks.  The B fragments
 * come from cs_ldm_x4 (keys: two n-tiles of 8 keys x 16 head elements a load) and cs_ldm_x4_t
 * (values, transposed on the way: 16 keys x two n-tiles of 8 value elements a load).  Per tile
 * a warp computes its 16 x 64 scores with cs_mma_*_16816 (E / 16 k-steps for each of 8 n-tiles
 * of 8 keys), scales and masks them on the f32 accumulator fragments
 * (thread (g, t) of the warp, g = lane / 4, t = lane % 4, holds rows g and g + 8 and keys
 * 2t, 2t + 1 of each n-tile), updates the row max (over the 4 threads of a row) and the
 * thread's partial row sum, rescales the output fragments, and multiplies P (rounded to the
 * tensor dtype, the score fragments re-packed as A fragments) by the value tile.  The row sums
 * are reduced over the quad at the end; out = acc / l and logsumexp = m + log(l) as the CUDA-core
 * kernel writes them (the padding rows of the logsumexp 0). */
static void
gen_forward_tc (CsCudaProgram *p, const Att *a, const AttOperand *q, const AttOperand *k, const AttOperand *v,
                guint out, gint lse, int64_t lstride)
{
  AttGen g;
  int64_t rows = MAX (a->L, lse >= 0 && lstride >= a->L ? lstride : 0);
  int64_t tiles = (rows + ATT_TC_ROWS - 1) / ATT_TC_ROWS;
  gboolean has_lse = lse >= 0 && lstride >= a->L;
  g_autofree char *shp = shape_text (cs_cuda_program_slot (p, q->slot)->shape, a->rank);
  double flops;

  gen_init (&g, p);
  g.threads = 128;
  gen_inputs (&g, p, a, TRUE, q, k, v, NULL, 0, 0, 0, -1);
  gen_forward_outputs (&g, p, out, lse, has_lse);
  gen_tc_helpers (&g, a);
  g_string_append_printf (g.body,
    "  constexpr int BM = %d, BN = %d, KP = E + 8, VP = EV + 8, NT = 128;\n"
    "  constexpr long long TILES = %" G_GINT64_FORMAT "LL, LSTRIDE = %" G_GINT64_FORMAT "LL;\n"
    "  __shared__ v16_t ks_[BN * KP / 8], vs_[BN * VP / 8];\n"
    "  unsigned short * const ks = (unsigned short *) ks_, * const vs = (unsigned short *) vs_;\n"
    "  const long long b = blockIdx.x / TILES;\n"
    "  const int i0 = (int) (blockIdx.x %% TILES) * BM;\n"
    "  const int r0 = i0 + w * 16 + gq, r1 = r0 + 8;\n"
    "  const long long qo = rqb (b), ko = rkb (b), vo = rvb (b);\n"
    "  auto qe = [&] (int r, int e) -> unsigned { return r < L ? rq (qo + (long long) r * QR + e) : 0u; };\n",
    ATT_TC_ROWS, ATT_TC_KEYS, tiles, lstride);
  gen_a_frags (&g, "qf", "qe", "E", "r0", "r1");
  g_string_append (g.body,
    "  float o[EV / 8][4];\n"
    "#pragma unroll\n"
    "  for (int n = 0; n < EV / 8; n++) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;\n"
    "  acc_t mr[2] = { ninf, ninf }, lr[2] = { 0, 0 };\n"
    "  const int last = L < i0 + BM ? L : i0 + BM;\n"
    "  const int jend = last <= i0 ? 0 : (CAUSAL ? (S < last ? S : last) : S);\n"
    "  if (jend > 0)\n"
    "    {\n"
    "      const int j0 = 0;\n");
  gen_tile_load_async (&g, "rk", "KR", "ko", "j0", "BN", "E", "S", "ks", "KP");
  g_string_append (g.body,
    "    }\n"
    "  for (int j0 = 0; j0 < jend; j0 += BN)\n"
    "    {\n"
    "      cs_cp_async_wait0 ();\n"
    "      __syncthreads ();\n");
  gen_tile_load_async (&g, "rv", "VR", "vo", "j0", "BN", "EV", "S", "vs", "VP");
  g_string_append_printf (g.body,
    "      float s[BN / 8][4];\n"
    "#pragma unroll\n"
    "      for (int n = 0; n < BN / 8; n++) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;\n");
  gen_mma_nt (&g, "s", "qf", "ks", "KP", "0", "BN", "E");
  g_string_append_printf (g.body,
    "      acc_t mt[2] = { ninf, ninf };\n"
    "#pragma unroll\n"
    "      for (int n = 0; n < BN / 8; n++)\n"
    "#pragma unroll\n"
    "        for (int c = 0; c < 4; c++)\n"
    "          {\n"
    "            const int i = c < 2 ? r0 : r1, j = j0 + n * 8 + tq * 2 + (c & 1);\n"
    "            acc_t sc = ninf;\n"
    "            if (i < L && j < S)\n"
    "              {\n"
    "                sc = s[n][c] * scale;\n"
    "%s"
    "                if (CAUSAL && j > i) sc = ninf;\n"
    "              }\n"
    "            s[n][c] = sc;\n"
    "            mt[c >> 1] = sc > mt[c >> 1] ? sc : mt[c >> 1];\n"
    "          }\n"
    "      acc_t alpha[2];\n"
    "#pragma unroll\n"
    "      for (int h = 0; h < 2; h++)\n"
    "        {\n"
    "          for (int o2 = 1; o2 < 4; o2 <<= 1) { const acc_t u = cs_shfl (mt[h], o2); mt[h] = u > mt[h] ? u : mt[h]; }\n"
    "          const acc_t mn = mr[h] > mt[h] ? mr[h] : mt[h];\n"
    "          alpha[h] = mn != ninf ? ex (mr[h] - mn) : (acc_t) 1;\n"
    "          mr[h] = mn;\n"
    "        }\n"
    "      acc_t ps[2] = { 0, 0 };\n"
    "#pragma unroll\n"
    "      for (int n = 0; n < BN / 8; n++)\n"
    "#pragma unroll\n"
    "        for (int c = 0; c < 4; c++)\n"
    "          {\n"
    "            const acc_t mn = mr[c >> 1], sc = s[n][c];\n"
    "            const acc_t pj = (mn == ninf || sc == ninf) ? (acc_t) 0 : ex (sc - mn);\n"
    "            s[n][c] = pj;\n"
    "            ps[c >> 1] += pj;\n"
    "          }\n"
    "      lr[0] = lr[0] * alpha[0] + ps[0];\n"
    "      lr[1] = lr[1] * alpha[1] + ps[1];\n"
    "#pragma unroll\n"
    "      for (int n = 0; n < EV / 8; n++)\n"
    "        { o[n][0] *= alpha[0]; o[n][1] *= alpha[0]; o[n][2] *= alpha[1]; o[n][3] *= alpha[1]; }\n"
    "      cs_cp_async_wait0 ();\n"
    "      __syncthreads ();\n"
    "      if (j0 + BN < jend)\n"
    "        {\n"
    "          const int j1 = j0 + BN;\n",
    mask_apply (a));
  gen_tile_load_async (&g, "rk", "KR", "ko", "j1", "BN", "E", "S", "ks", "KP");
  g_string_append (g.body,
    "        }\n"
    "#pragma unroll\n"
    "      for (int kt = 0; kt < BN / 16; kt++)\n"
    "        {\n");
  gen_pack_a (&g, "pa", "s", "2 * kt");
  gen_mma_nn (&g, "o", "pa", "vs", "VP", "EV");
  g_string_append (g.body,
    "        }\n"
    "    }\n"
    "#pragma unroll\n"
    "  for (int h = 0; h < 2; h++)\n"
    "    for (int o2 = 1; o2 < 4; o2 <<= 1) lr[h] += cs_shfl (lr[h], o2);\n"
    "#pragma unroll\n"
    "  for (int n = 0; n < EV / 8; n++)\n"
    "#pragma unroll\n"
    "    for (int c = 0; c < 4; c++)\n"
    "      {\n"
    "        const int i = c < 2 ? r0 : r1, d = n * 8 + tq * 2 + (c & 1);\n"
    "        if (i < L) sto ((b * L + i) * EV + d, o[n][c] / lr[c >> 1]);\n"
    "      }\n");
  if (has_lse)
    g_string_append (g.body,
                     "  if (tq == 0)\n"
                     "    for (int h = 0; h < 2; h++)\n"
                     "      { const int i = h ? r1 : r0;\n"
                     "        if (i < LSTRIDE) stl (b * LSTRIDE + i, i < L ? mr[h] + lg (lr[h]) : (acc_t) 0); }\n");
  flops = 2.0 * (double) a->nb * (double) a->L * (double) a->S * (double) (a->E + a->Ev) * (a->causal ? 0.5 : 1.0);
  gen_finish_tc (&g, g_strdup_printf ("attention forward (tensor cores) %s %s x %" G_GINT64_FORMAT "%s%s",
                                      a->name, shp, a->S, a->causal ? " causal" : "",
                                      a->mask >= 0 ? " masked" : ""),
                 (guint64) (a->nb * tiles), flops);
  gen_clear (&g);
}

/* D[b * L + i] = sum_d dO[b, i, d] * O[b, i, d], in the accumulator type (slot @dbuf). */
static void
gen_rowdot (CsCudaProgram *p, const Att *a, const AttOperand *go, const AttOperand *o, guint dbuf)
{
  AttGen g;
  int64_t tiles = (a->L + ATT_WARPS - 1) / ATT_WARPS;
  guint pd;

  gen_init (&g, p);
  gen_consts (&g, a);
  gen_operand (&g, p, a, "ldg", "GR", go);
  gen_operand (&g, p, a, "ldo", "OR", o);
  pd = gen_param (&g, dbuf, TRUE);
  g_string_append_printf (g.body,
    "  constexpr long long TILES = %" G_GINT64_FORMAT "LL;\n"
    "  const long long b = blockIdx.x / TILES;\n"
    "  const int i = (int) (blockIdx.x %% TILES) * W + w;\n"
    "  if (i >= L) return;\n"
    "  const long long go = ldgb (b) + (long long) i * GR, oo = ldob (b) + (long long) i * OR;\n"
    "  acc_t s = 0;\n"
    "  for (int d = lane; d < EV; d += 32) s += ldg (go + d) * ldo (oo + d);\n"
    "  s = wsum (s);\n"
    "  if (lane == 0) a%u[b * L + i] = s;\n", tiles, pd);
  gen_finish (&g, g_strdup_printf ("attention backward %s rowsum(dO*O) [%" G_GINT64_FORMAT ", %" G_GINT64_FORMAT "]",
                                   a->name, a->nb, a->L),
              (guint64) (a->nb * tiles), 2.0 * (double) a->nb * (double) a->L * (double) a->Ev);
  gen_clear (&g);
}

/* dQ (slot @dq) and the mask gradient's accumulation (slot @gm_acc, -1: none): a warp per
 * query row, a lane per key of each tile. */
static void
gen_backward_dq (CsCudaProgram *p, const Att *a, const AttOperand *q, const AttOperand *k, const AttOperand *v,
                 const AttOperand *go, guint lse, int64_t lstride, guint dbuf, guint dq, gint gm_acc)
{
  AttGen g;
  gsize acc = a->f64 ? 8 : 4;
  int bn = tile_rows (ATT_WARPS * (a->E + a->Ev) * acc, (a->E + a->Ev + 2) * acc);
  int64_t tiles = (a->L + ATT_WARPS - 1) / ATT_WARPS;

  gen_init (&g, p);
  gen_inputs (&g, p, a, FALSE, q, k, v, go, lse, lstride, dbuf, gm_acc);
  gen_output (&g, p, "stq", dq);
  g_string_append_printf (g.body,
    "  constexpr int BN = %d;\n"
    "  constexpr long long TILES = %" G_GINT64_FORMAT "LL;\n"
    "  __shared__ acc_t qs[W][E];\n"
    "  __shared__ acc_t gs[W][EV];\n"
    "  __shared__ acc_t ks[BN][E + 1];\n"
    "  __shared__ acc_t vs[BN][EV + 1];\n"
    "  const long long b = blockIdx.x / TILES;\n"
    "  const int i0 = (int) (blockIdx.x %% TILES) * W, i = i0 + w;\n"
    "  const bool row_ok = i < L;\n"
    "  const long long qo = ldqb (b) + (long long) i * QR, gofs = ldgb (b) + (long long) i * GR;\n"
    "  const long long ko = ldkb (b), vo = ldvb (b);\n"
    "  for (int e = lane; e < E; e += 32) qs[w][e] = row_ok ? ldq (qo + e) : (acc_t) 0;\n"
    "  for (int e = lane; e < EV; e += 32) gs[w][e] = row_ok ? ldg (gofs + e) : (acc_t) 0;\n"
    "  const acc_t lse_i = row_ok ? ldl (b * LSTRIDE + i) : (acc_t) 0;\n"
    "  const acc_t d_i = row_ok ? ldd (b * L + i) : (acc_t) 0;\n"
    "  acc_t dq[NE];\n"
    "  for (int r = 0; r < NE; r++) dq[r] = 0;\n"
    "  const int last = L < i0 + W ? L : i0 + W;\n"
    "  const int jend = last <= i0 ? 0 : (CAUSAL ? (S < last ? S : last) : S);\n"
    "  for (int j0 = 0; j0 < jend; j0 += BN)\n"
    "    {\n"
    "      __syncthreads ();\n"
    "      for (int x = threadIdx.x; x < BN * E; x += W * 32)\n"
    "        { const int t = x / E, e = x %% E, j = j0 + t;\n"
    "          ks[t][e] = j < S ? ldk (ko + (long long) j * KR + e) : (acc_t) 0; }\n"
    "      for (int x = threadIdx.x; x < BN * EV; x += W * 32)\n"
    "        { const int t = x / EV, e = x %% EV, j = j0 + t;\n"
    "          vs[t][e] = j < S ? ldv (vo + (long long) j * VR + e) : (acc_t) 0; }\n"
    "      __syncthreads ();\n"
    "      acc_t ds = 0;\n"
    "      const int j = j0 + lane;\n"
    "      if (lane < BN && j < S && row_ok)\n"
    "        {\n"
    "          acc_t dot = 0, dp = 0;\n"
    "          for (int e = 0; e < E; e++) dot += qs[w][e] * ks[lane][e];\n"
    "          acc_t sc = dot * scale;\n"
    "%s"
    "          if (CAUSAL && j > i) sc = ninf;\n"
    "          const acc_t pij = sc == ninf ? (acc_t) 0 : ex (sc - lse_i);\n"
    "          for (int e = 0; e < EV; e++) dp += gs[w][e] * vs[lane][e];\n"
    "          ds = pij * (dp - d_i);\n"
    "%s"
    "        }\n"
    "      for (int t = 0; t < BN; t++)\n"
    "        {\n"
    "          const acc_t dt = __shfl_sync (0xffffffffu, ds, t);\n"
    "          for (int r = 0; r < NE; r++)\n"
    "            { const int e = lane + 32 * r; if (e < E) dq[r] += dt * ks[t][e]; }\n"
    "        }\n"
    "    }\n"
    "  if (row_ok)\n"
    "    for (int r = 0; r < NE; r++)\n"
    "      { const int e = lane + 32 * r; if (e < E) stq ((b * L + i) * E + e, dq[r] * scale); }\n",
    bn, tiles, mask_apply (a),
    gm_acc >= 0 ? "          atomicAdd (&gacc[gmb (b) + (long long) i * GI + (long long) j * GJ], ds);\n" : "");
  gen_finish (&g, g_strdup_printf ("attention backward (CUDA cores) %s dq [%" G_GINT64_FORMAT ", %" G_GINT64_FORMAT ", %"
                                   G_GINT64_FORMAT "] x %" G_GINT64_FORMAT, a->name, a->nb, a->L, a->E, a->S),
              (guint64) (a->nb * tiles),
              2.0 * (double) a->nb * (double) a->L * (double) a->S * (double) (2 * a->E + a->Ev)
              * (a->causal ? 0.5 : 1.0));
  gen_clear (&g);
}

/* dK (slot @dk) and dV (slot @dv): a warp per key, a lane per query row of each tile. */
static void
gen_backward_dkdv (CsCudaProgram *p, const Att *a, const AttOperand *q, const AttOperand *k, const AttOperand *v,
                   const AttOperand *go, guint lse, int64_t lstride, guint dbuf, guint dk, guint dv)
{
  AttGen g;
  gsize acc = a->f64 ? 8 : 4;
  int bm = tile_rows (ATT_WARPS * (a->E + a->Ev) * acc, (a->E + a->Ev + 4) * acc);
  int64_t tiles = (a->S + ATT_WARPS - 1) / ATT_WARPS;

  gen_init (&g, p);
  gen_inputs (&g, p, a, FALSE, q, k, v, go, lse, lstride, dbuf, -1);
  gen_output (&g, p, "stk", dk);
  gen_output (&g, p, "stv", dv);
  g_string_append_printf (g.body,
    "  constexpr int BM = %d;\n"
    "  constexpr long long TILES = %" G_GINT64_FORMAT "LL;\n"
    "  __shared__ acc_t ks[W][E];\n"
    "  __shared__ acc_t vs[W][EV];\n"
    "  __shared__ acc_t qs[BM][E + 1];\n"
    "  __shared__ acc_t gs[BM][EV + 1];\n"
    "  __shared__ acc_t ls[BM], dd[BM];\n"
    "  const long long b = blockIdx.x / TILES;\n"
    "  const int j0 = (int) (blockIdx.x %% TILES) * W, j = j0 + w;\n"
    "  const bool key_ok = j < S;\n"
    "  const long long ko = ldkb (b) + (long long) j * KR, vo = ldvb (b) + (long long) j * VR;\n"
    "  const long long qo = ldqb (b), gofs = ldgb (b);\n"
    "  for (int e = lane; e < E; e += 32) ks[w][e] = key_ok ? ldk (ko + e) : (acc_t) 0;\n"
    "  for (int e = lane; e < EV; e += 32) vs[w][e] = key_ok ? ldv (vo + e) : (acc_t) 0;\n"
    "  acc_t dk[NE], dv[NV];\n"
    "  for (int r = 0; r < NE; r++) dk[r] = 0;\n"
    "  for (int r = 0; r < NV; r++) dv[r] = 0;\n"
    "  const int istart = CAUSAL ? (j0 / BM) * BM : 0;\n"
    "  for (int i0 = istart; i0 < L; i0 += BM)\n"
    "    {\n"
    "      __syncthreads ();\n"
    "      for (int x = threadIdx.x; x < BM * E; x += W * 32)\n"
    "        { const int t = x / E, e = x %% E, r = i0 + t;\n"
    "          qs[t][e] = r < L ? ldq (qo + (long long) r * QR + e) : (acc_t) 0; }\n"
    "      for (int x = threadIdx.x; x < BM * EV; x += W * 32)\n"
    "        { const int t = x / EV, e = x %% EV, r = i0 + t;\n"
    "          gs[t][e] = r < L ? ldg (gofs + (long long) r * GR + e) : (acc_t) 0; }\n"
    "      for (int x = threadIdx.x; x < BM; x += W * 32)\n"
    "        { const int r = i0 + x;\n"
    "          ls[x] = r < L ? ldl (b * LSTRIDE + r) : (acc_t) 0;\n"
    "          dd[x] = r < L ? ldd (b * L + r) : (acc_t) 0; }\n"
    "      __syncthreads ();\n"
    "      acc_t pij = 0, ds = 0;\n"
    "      const int i = i0 + lane;\n"
    "      if (lane < BM && i < L && key_ok)\n"
    "        {\n"
    "          acc_t dot = 0, dp = 0;\n"
    "          for (int e = 0; e < E; e++) dot += qs[lane][e] * ks[w][e];\n"
    "          acc_t sc = dot * scale;\n"
    "%s"
    "          if (CAUSAL && j > i) sc = ninf;\n"
    "          pij = sc == ninf ? (acc_t) 0 : ex (sc - ls[lane]);\n"
    "          for (int e = 0; e < EV; e++) dp += gs[lane][e] * vs[w][e];\n"
    "          ds = pij * (dp - dd[lane]);\n"
    "        }\n"
    "      for (int t = 0; t < BM; t++)\n"
    "        {\n"
    "          const acc_t pt = __shfl_sync (0xffffffffu, pij, t), dt = __shfl_sync (0xffffffffu, ds, t);\n"
    "          for (int r = 0; r < NV; r++)\n"
    "            { const int e = lane + 32 * r; if (e < EV) dv[r] += pt * gs[t][e]; }\n"
    "          for (int r = 0; r < NE; r++)\n"
    "            { const int e = lane + 32 * r; if (e < E) dk[r] += dt * qs[t][e]; }\n"
    "        }\n"
    "    }\n"
    "  if (key_ok)\n"
    "    {\n"
    "      for (int r = 0; r < NE; r++)\n"
    "        { const int e = lane + 32 * r; if (e < E) stk ((b * S + j) * E + e, dk[r] * scale); }\n"
    "      for (int r = 0; r < NV; r++)\n"
    "        { const int e = lane + 32 * r; if (e < EV) stv ((b * S + j) * EV + e, dv[r]); }\n"
    "    }\n",
    bm, tiles, mask_apply (a));
  gen_finish (&g, g_strdup_printf ("attention backward (CUDA cores) %s dk dv [%" G_GINT64_FORMAT ", %" G_GINT64_FORMAT ", %"
                                   G_GINT64_FORMAT "] x %" G_GINT64_FORMAT, a->name, a->nb, a->S, a->E, a->L),
              (guint64) (a->nb * tiles),
              2.0 * (double) a->nb * (double) a->L * (double) a->S * (double) (a->E + 2 * a->Ev)
              * (a->causal ? 0.5 : 1.0));
  gen_clear (&g);
}

/* Rows of the other operand's shared tiles in the tensor-core backward kernels: 64 where two
 * stages (double buffering) of two row-major 16-bit tiles of @cols_a and @cols_b columns (each
 * row padded by 8 elements) and two f32 values a row fit the shared budget, else 32. */
static int
tc_tile (int64_t cols_a, int64_t cols_b)
{
  for (int t = 64; t > 32; t /= 2)
    if (2 * ((gsize) t * (gsize) (cols_a + 8 + cols_b + 8) * 2 + 8 * (gsize) t) <= ATT_SMEM_BYTES)
      return t;
  return 32;
}

/* The tensor-core dQ kernel (FlashAttention-2, P recomputed from logsumexp): a block of 4 warps
 * owns 64 query rows (16 a warp; q and dO fragments in registers); key and value tiles of BN
 * rows go through shared memory row-major, two stages: tile t + 1 is copied (cp.async) into one
 * stage while tile t is used from the other, rows padded by 8 elements (16 bytes) so the 8 rows
 * an ldmatrix phase reads fall in distinct banks.  S = Q K^T and dP = dO V^T take their B
 * fragments from cs_ldm_x4 on the key and value tiles, dQ += dS K from cs_ldm_x4_t on the key
 * tile (no transposed copy).  dS = P (dP - D) is rounded to the dtype as the A fragments of
 * dS K; the mask's gradient dS is added with atomics into the f32 accumulator (slot @gm_acc,
 * -1: none). */
static void
gen_backward_dq_tc (CsCudaProgram *p, const Att *a, const AttOperand *q, const AttOperand *k, const AttOperand *v,
                    const AttOperand *go, guint lse, int64_t lstride, guint dbuf, guint dq, gint gm_acc)
{
  AttGen g;
  int bn = tc_tile (a->E, a->Ev);
  int64_t tiles = (a->L + ATT_TC_ROWS - 1) / ATT_TC_ROWS;
  double flops = 2.0 * (double) a->nb * (double) a->L * (double) a->S * (double) (2 * a->E + a->Ev)
                 * (a->causal ? 0.5 : 1.0);

  gen_init (&g, p);
  g.threads = 128;
  gen_inputs (&g, p, a, TRUE, q, k, v, go, lse, lstride, dbuf, gm_acc);
  gen_output (&g, p, "stq", dq);
  gen_tc_helpers (&g, a);
  g_string_append_printf (g.body,
    "  constexpr int BM = %d, BN = %d, KP = E + 8, VP = EV + 8, NT = 128;\n"
    "  constexpr long long TILES = %" G_GINT64_FORMAT "LL;\n"
    "  __shared__ v16_t ks_[2 * BN * KP / 8], vs_[2 * BN * VP / 8];\n"
    "  unsigned short * const ks0 = (unsigned short *) ks_, * const vs0 = (unsigned short *) vs_;\n"
    "  const long long b = blockIdx.x / TILES;\n"
    "  const int i0 = (int) (blockIdx.x %% TILES) * BM;\n"
    "  const int r0 = i0 + w * 16 + gq, r1 = r0 + 8;\n"
    "  const long long qo = rqb (b), ko = rkb (b), vo = rvb (b), gofs = rgb (b);\n"
    "  auto qe = [&] (int r, int e) -> unsigned { return r < L ? rq (qo + (long long) r * QR + e) : 0u; };\n"
    "  auto ge = [&] (int r, int e) -> unsigned { return r < L ? rg (gofs + (long long) r * GR + e) : 0u; };\n",
    ATT_TC_ROWS, bn, tiles);
  gen_a_frags (&g, "qf", "qe", "E", "r0", "r1");
  gen_a_frags (&g, "gf", "ge", "EV", "r0", "r1");
  g_string_append (g.body,
    "  const acc_t lse_r[2] = { r0 < L ? ldl (b * LSTRIDE + r0) : (acc_t) 0, r1 < L ? ldl (b * LSTRIDE + r1) : (acc_t) 0 };\n"
    "  const acc_t d_r[2] = { r0 < L ? ldd (b * L + r0) : (acc_t) 0, r1 < L ? ldd (b * L + r1) : (acc_t) 0 };\n"
    "  float dqa[E / 8][4];\n"
    "#pragma unroll\n"
    "  for (int n = 0; n < E / 8; n++) dqa[n][0] = dqa[n][1] = dqa[n][2] = dqa[n][3] = 0.0f;\n"
    "  const int last = L < i0 + BM ? L : i0 + BM;\n"
    "  const int jend = last <= i0 ? 0 : (CAUSAL ? (S < last ? S : last) : S);\n"
    "  if (jend > 0)\n"
    "    {\n"
    "      const int j1 = 0;\n"
    "      unsigned short * const kn = ks0, * const vn = vs0;\n");
  gen_tile_load_async (&g, "rk", "KR", "ko", "j1", "BN", "E", "S", "kn", "KP");
  gen_tile_load_async (&g, "rv", "VR", "vo", "j1", "BN", "EV", "S", "vn", "VP");
  g_string_append (g.body,
    "    }\n"
    "  for (int j0 = 0, it = 0; j0 < jend; j0 += BN, it++)\n"
    "    {\n"
    "      cs_cp_async_wait0 ();\n"
    "      __syncthreads ();\n"
    "      const unsigned short * const ks = ks0 + (it & 1) * (BN * KP), * const vs = vs0 + (it & 1) * (BN * VP);\n"
    "      if (j0 + BN < jend)\n"
    "        {\n"
    "          const int j1 = j0 + BN;\n"
    "          unsigned short * const kn = ks0 + ((it + 1) & 1) * (BN * KP), * const vn = vs0 + ((it + 1) & 1) * (BN * VP);\n");
  gen_tile_load_async (&g, "rk", "KR", "ko", "j1", "BN", "E", "S", "kn", "KP");
  gen_tile_load_async (&g, "rv", "VR", "vo", "j1", "BN", "EV", "S", "vn", "VP");
  g_string_append (g.body,
    "        }\n"
    "#pragma unroll 1\n"
    "      for (int kt = 0; kt < BN / 16; kt++)\n"
    "        {\n"
    "          float s[2][4] = { { 0.0f, 0.0f, 0.0f, 0.0f }, { 0.0f, 0.0f, 0.0f, 0.0f } };\n"
    "          float dp[2][4] = { { 0.0f, 0.0f, 0.0f, 0.0f }, { 0.0f, 0.0f, 0.0f, 0.0f } };\n");
  gen_mma_nt (&g, "s", "qf", "ks", "KP", "kt * 16", "16", "E");
  gen_mma_nt (&g, "dp", "gf", "vs", "VP", "kt * 16", "16", "EV");
  g_string_append_printf (g.body,
    "#pragma unroll\n"
    "          for (int n = 0; n < 2; n++)\n"
    "#pragma unroll\n"
    "            for (int c = 0; c < 4; c++)\n"
    "              {\n"
    "                const int i = c < 2 ? r0 : r1, j = j0 + kt * 16 + n * 8 + tq * 2 + (c & 1);\n"
    "                acc_t ds = 0;\n"
    "                if (i < L && j < S)\n"
    "                  {\n"
    "                    acc_t sc = s[n][c] * scale;\n"
    "%s"
    "                    if (CAUSAL && j > i) sc = ninf;\n"
    "                    const acc_t pij = sc == ninf ? (acc_t) 0 : ex (sc - lse_r[c >> 1]);\n"
    "                    ds = pij * (dp[n][c] - d_r[c >> 1]);\n"
    "%s"
    "                  }\n"
    "                s[n][c] = ds;\n"
    "              }\n",
    mask_apply_in (a, "                    "),
    gm_acc >= 0 ? "                    atomicAdd (&gacc[gmb (b) + (long long) i * GI + (long long) j * GJ], ds);\n" : "");
  gen_pack_a (&g, "da", "s", "0");
  gen_mma_nn (&g, "dqa", "da", "ks", "KP", "E");
  g_string_append (g.body,
    "        }\n"
    "    }\n"
    "#pragma unroll\n"
    "  for (int n = 0; n < E / 8; n++)\n"
    "#pragma unroll\n"
    "    for (int c = 0; c < 4; c++)\n"
    "      {\n"
    "        const int i = c < 2 ? r0 : r1, e = n * 8 + tq * 2 + (c & 1);\n"
    "        if (i < L) stq ((b * L + i) * E + e, dqa[n][c] * scale);\n"
    "      }\n");
  {
    /* ks_ and vs_: two stages of BN rows of E + 8 and Ev + 8 16-bit values */
    g_autofree char *body = g_strdup (g.body->str);
    CsCudaStep *step = gen_finish_tc (&g, g_strdup_printf ("attention backward (tensor cores) %s dq [%" G_GINT64_FORMAT ", %"
                                                          G_GINT64_FORMAT ", %" G_GINT64_FORMAT "] x %" G_GINT64_FORMAT, a->name,
                                                          a->nb, a->L, a->E, a->S),
                                      (guint64) (a->nb * tiles), flops);

    mark_mergeable (step, body, 1, (gsize) 2 * (gsize) bn * (gsize) (a->E + 8 + a->Ev + 8) * 2);
  }
  gen_clear (&g);
}

/* The loads of query tile i1 of the dK, dV kernel into the stage at qn, gn (q and dO, cp.async
 * where aligned), ln and dn (its logsumexp and D, plain loads). */
static void
gen_dkdv_stage (AttGen *g)
{
  gen_tile_load_async (g, "rq", "QR", "qo", "i1", "BM", "E", "L", "qn", "QP");
  gen_tile_load_async (g, "rg", "GR", "gofs", "i1", "BM", "EV", "L", "gn", "GP");
  g_string_append (g->body,
    "      for (int x = threadIdx.x; x < BM; x += NT)\n"
    "        { const int r = i1 + x;\n"
    "          ln[x] = r < L ? ldl (b * LSTRIDE + r) : (acc_t) 0;\n"
    "          dn[x] = r < L ? ldd (b * L + r) : (acc_t) 0; }\n");
}

/* The tensor-core dK, dV kernel (FlashAttention-2: P recomputed from logsumexp, D read): a
 * block of 4 warps owns 64 keys (16 a warp; k and v fragments in registers); query tiles of BM
 * rows (q and dO, row-major, rows padded by 8 elements) with their logsumexp and D go through
 * shared memory in two stages as the dQ kernel's key tiles do.  S^T = K Q^T and dP^T = V dO^T
 * take their B fragments from cs_ldm_x4 on the q and dO tiles, dV += P^T dO and dK += dS^T Q
 * from cs_ldm_x4_t on the same tiles (no transposed copies).  P^T and dS^T are rounded to the
 * dtype as A fragments. */
static void
gen_backward_dkdv_tc (CsCudaProgram *p, const Att *a, const AttOperand *q, const AttOperand *k, const AttOperand *v,
                      const AttOperand *go, guint lse, int64_t lstride, guint dbuf, guint dk, guint dv)
{
  AttGen g;
  int bm = tc_tile (a->E, a->Ev);
  int64_t tiles = (a->S + ATT_TC_ROWS - 1) / ATT_TC_ROWS;
  double flops = 2.0 * (double) a->nb * (double) a->L * (double) a->S * (double) (2 * a->E + 2 * a->Ev)
                 * (a->causal ? 0.5 : 1.0);

  gen_init (&g, p);
  g.threads = 128;
  gen_inputs (&g, p, a, TRUE, q, k, v, go, lse, lstride, dbuf, -1);
  gen_output (&g, p, "stk", dk);
  gen_output (&g, p, "stv", dv);
  gen_tc_helpers (&g, a);
  g_string_append_printf (g.body,
    "  constexpr int BN = %d, BM = %d, QP = E + 8, GP = EV + 8, NT = 128;\n"
    "  constexpr long long TILES = %" G_GINT64_FORMAT "LL;\n"
    "  __shared__ v16_t qs_[2 * BM * QP / 8], gs_[2 * BM * GP / 8];\n"
    "  unsigned short * const qs0 = (unsigned short *) qs_, * const gs0 = (unsigned short *) gs_;\n"
    "  __shared__ acc_t ls_[2][BM], dd_[2][BM];\n"
    "  const long long b = blockIdx.x / TILES;\n"
    "  const int j0 = (int) (blockIdx.x %% TILES) * BN;\n"
    "  const int c0 = j0 + w * 16 + gq, c1 = c0 + 8;\n"
    "  const long long qo = rqb (b), ko = rkb (b), vo = rvb (b), gofs = rgb (b);\n"
    "  auto ke = [&] (int r, int e) -> unsigned { return r < S ? rk (ko + (long long) r * KR + e) : 0u; };\n"
    "  auto ve = [&] (int r, int e) -> unsigned { return r < S ? rv (vo + (long long) r * VR + e) : 0u; };\n",
    ATT_TC_ROWS, bm, tiles);
  gen_a_frags (&g, "kf", "ke", "E", "c0", "c1");
  gen_a_frags (&g, "vf", "ve", "EV", "c0", "c1");
  g_string_append (g.body,
    "  float dka[E / 8][4], dva[EV / 8][4];\n"
    "#pragma unroll\n"
    "  for (int n = 0; n < E / 8; n++) dka[n][0] = dka[n][1] = dka[n][2] = dka[n][3] = 0.0f;\n"
    "#pragma unroll\n"
    "  for (int n = 0; n < EV / 8; n++) dva[n][0] = dva[n][1] = dva[n][2] = dva[n][3] = 0.0f;\n"
    "  const int ibeg = j0 < S ? (CAUSAL ? (j0 / BM) * BM : 0) : L;\n"
    "  if (ibeg < L)\n"
    "    {\n"
    "      const int i1 = ibeg;\n"
    "      unsigned short * const qn = qs0, * const gn = gs0;\n"
    "      acc_t * const ln = ls_[0], * const dn = dd_[0];\n");
  gen_dkdv_stage (&g);
  g_string_append (g.body,
    "    }\n"
    "  for (int i0 = ibeg, it = 0; i0 < L; i0 += BM, it++)\n"
    "    {\n"
    "      cs_cp_async_wait0 ();\n"
    "      __syncthreads ();\n"
    "      const unsigned short * const qs = qs0 + (it & 1) * (BM * QP), * const gs = gs0 + (it & 1) * (BM * GP);\n"
    "      const acc_t * const ls = ls_[it & 1], * const dd = dd_[it & 1];\n"
    "      if (i0 + BM < L)\n"
    "        {\n"
    "          const int i1 = i0 + BM;\n"
    "          unsigned short * const qn = qs0 + ((it + 1) & 1) * (BM * QP), * const gn = gs0 + ((it + 1) & 1) * (BM * GP);\n"
    "          acc_t * const ln = ls_[(it + 1) & 1], * const dn = dd_[(it + 1) & 1];\n");
  gen_dkdv_stage (&g);
  g_string_append (g.body,
    "        }\n"
    "#pragma unroll 1\n"
    "      for (int kt = 0; kt < BM / 16; kt++)\n"
    "        {\n"
    "          float s[2][4] = { { 0.0f, 0.0f, 0.0f, 0.0f }, { 0.0f, 0.0f, 0.0f, 0.0f } };\n"
    "          float dp[2][4] = { { 0.0f, 0.0f, 0.0f, 0.0f }, { 0.0f, 0.0f, 0.0f, 0.0f } };\n");
  gen_mma_nt (&g, "s", "kf", "qs", "QP", "kt * 16", "16", "E");
  gen_mma_nt (&g, "dp", "vf", "gs", "GP", "kt * 16", "16", "EV");
  g_string_append_printf (g.body,
    "#pragma unroll\n"
    "          for (int n = 0; n < 2; n++)\n"
    "#pragma unroll\n"
    "            for (int c = 0; c < 4; c++)\n"
    "              {\n"
    "                const int j = c < 2 ? c0 : c1, t = kt * 16 + n * 8 + tq * 2 + (c & 1), i = i0 + t;\n"
    "                acc_t pij = 0, ds = 0;\n"
    "                if (i < L && j < S)\n"
    "                  {\n"
    "                    acc_t sc = s[n][c] * scale;\n"
    "%s"
    "                    if (CAUSAL && j > i) sc = ninf;\n"
    "                    pij = sc == ninf ? (acc_t) 0 : ex (sc - ls[t]);\n"
    "                    ds = pij * (dp[n][c] - dd[t]);\n"
    "                  }\n"
    "                s[n][c] = pij;\n"
    "                dp[n][c] = ds;\n"
    "              }\n",
    mask_apply_in (a, "                    "));
  gen_pack_a (&g, "pa", "s", "0");
  gen_pack_a (&g, "da", "dp", "0");
  gen_mma_nn (&g, "dva", "pa", "gs", "GP", "EV");
  gen_mma_nn (&g, "dka", "da", "qs", "QP", "E");
  g_string_append (g.body,
    "        }\n"
    "    }\n"
    "#pragma unroll\n"
    "  for (int c = 0; c < 4; c++)\n"
    "    {\n"
    "      const int j = c < 2 ? c0 : c1;\n"
    "      if (j >= S) continue;\n"
    "#pragma unroll\n"
    "      for (int n = 0; n < E / 8; n++) stk ((b * S + j) * E + n * 8 + tq * 2 + (c & 1), dka[n][c] * scale);\n"
    "#pragma unroll\n"
    "      for (int n = 0; n < EV / 8; n++) stv ((b * S + j) * EV + n * 8 + tq * 2 + (c & 1), dva[n][c]);\n"
    "    }\n");
  {
    /* qs_ and gs_: two stages of BM rows of E + 8 and Ev + 8 16-bit values; ls_ and dd_: two
     * stages of BM accumulators each (counted as 8 bytes, an upper bound) */
    g_autofree char *body = g_strdup (g.body->str);
    CsCudaStep *step = gen_finish_tc (&g, g_strdup_printf ("attention backward (tensor cores) %s dk dv [%" G_GINT64_FORMAT ", %"
                                                          G_GINT64_FORMAT ", %" G_GINT64_FORMAT "] x %" G_GINT64_FORMAT, a->name,
                                                          a->nb, a->S, a->E, a->L),
                                      (guint64) (a->nb * tiles), flops);

    mark_mergeable (step, body, 2, (gsize) 2 * (gsize) bm * (gsize) (a->E + 8 + a->Ev + 8) * 2
                                   + (gsize) 2 * 2 * (gsize) bm * sizeof (double));
  }
  gen_clear (&g);
}

/* ---- cuDNN (cs-cuda-cudnn.c) --------------------------------------------------------------- */

/* The batch dims of @a as cuDNN's (b, h): all but the last folded into b, the last h. */
static void
cudnn_bh (const Att *a, int64_t *b, int64_t *h)
{
  *b = 1;
  *h = a->nbd >= 1 ? a->bshape[a->nbd - 1] : 1;
  for (guint d = 0; d + 1 < a->nbd; d++)
    *b *= a->bshape[d];
}

/* The [b, h, rows, cols] strides of slot @slot (an operand or an output; batch dims those of
 * @a) into @st: FALSE when the outer batch dims do not fold into one stride, a dim of extent > 1
 * broadcasts (stride 0), the last dim is not unit-stride or a stride or the start is not
 * 16-byte aligned (cuDNN's tensors are). */
static gboolean
cudnn_view (CsCudaProgram *p, const Att *a, guint slot, int64_t *st)
{
  const CsCudaSlot *s = cs_cuda_program_slot (p, slot);
  gsize es = cs_dtype_size_bytes (s->dtype);
  int64_t b, h, rows = s->shape[s->rank - 2], cols = s->shape[s->rank - 1];
  gint inner = -1, prev = -1;   /* the innermost outer batch dim of extent > 1; the last seen */

  if (s->rank != a->rank || (cols > 1 && s->strides[s->rank - 1] != 1) || ((gsize) s->offset * es) % 16 != 0)
    return FALSE;
  cudnn_bh (a, &b, &h);
  st[3] = 1;
  st[2] = rows > 1 ? s->strides[s->rank - 2] : cols;
  st[1] = h > 1 ? s->strides[a->nbd - 1] : st[2] * rows;
  /* the outer batch dims fold into b when each (of extent > 1) steps over the next inner one */
  for (gint d = (gint) a->nbd - 2; d >= 0; d--)
    {
      if (s->shape[d] == 1)
        continue;
      if (prev >= 0 && s->strides[d] != s->strides[prev] * s->shape[prev])
        return FALSE;
      if (inner < 0)
        inner = d;
      prev = d;
    }
  st[0] = inner >= 0 ? s->strides[inner] : st[1] * h;
  for (int i = 0; i < 3; i++)
    {
      int64_t ext = i == 0 ? b : i == 1 ? h : rows;

      if (ext > 1 && (st[i] <= 0 || ((gsize) st[i] * es) % 16 != 0))
        return FALSE;
    }
  return TRUE;
}

/* Attention with fewer scores (b * h * L * S) than this runs on the kernels even where cuDNN
 * loads: on the H200 the 8-block LLaMA's [2, 4, 64, 64] (32,768 scores) took 0.625 ms a step
 * through cuDNN against 0.520 on the kernels, the 4-block GPT's [4, 4, 128, 128] (262,144)
 * 0.342 against 0.404 (kernels/BENCH-RESULTS.md, run 39); the default lies between.
 * CASTSCOPE_CUDNN_MIN_SCORES=N sets it (0: cuDNN for every case it can express). */
static double
cudnn_min_scores (void)
{
  return (double) cs_cuda_env_uint ("CASTSCOPE_CUDNN_MIN_SCORES", 0, G_MAXUINT64, 131072);
}

/* The attention of @a through cuDNN (cs_cuda_cudnn_sdpa_step) when the program uses it and the
 * case fits: bf16/f16, no mask, every operand and output a [b, h, rows, cols] view cuDNN takes
 * (outputs as cs_cuda_program_new_output_slot laid them out), the logsumexp f32 with @lstride values a batch (forward 0: not kept).
 * Forward: @o NULL, @out0 the output; backward: @o and @go given, @out0..2 dq, dk, dv, @lse
 * read.  TRUE when the step was added (its label says "(cuDNN)"); else the kernels run. */
static gboolean
try_cudnn (CsCudaProgram *p, const Att *a, const AttOperand *q, const AttOperand *k, const AttOperand *v,
           const AttOperand *o, const AttOperand *go, guint out0, guint out1, guint out2, gint lse,
           int64_t lstride)
{
  CsCudnnSdpa d;
  g_autofree char *why = NULL;
  g_autofree char *shp = NULL;
  gboolean backward = go != NULL;
  char *label;

  if (!p->use_cudnn || a->mask >= 0 || (a->dtype != CS_DTYPE_BF16 && a->dtype != CS_DTYPE_F16))
    return FALSE;
  memset (&d, 0, sizeof d);
  d.backward = backward;
  d.dtype = a->dtype;
  cudnn_bh (a, &d.b, &d.h);
  d.sq = a->L;
  d.skv = a->S;
  if ((double) d.b * (double) d.h * (double) d.sq * (double) d.skv < cudnn_min_scores ())
    return FALSE;
  d.d = a->E;
  d.dv = a->Ev;
  d.causal = a->causal;
  d.scale = a->scale;
  d.q = (gint) q->slot;
  d.k = (gint) k->slot;
  d.v = (gint) v->slot;
  d.dO = d.dQ = d.dK = d.dV = -1;
  if (!cudnn_view (p, a, q->slot, d.q_st) || !cudnn_view (p, a, k->slot, d.k_st) || !cudnn_view (p, a, v->slot, d.v_st))
    {
      g_debug ("cuDNN attention %s: q, k or v is a view cuDNN does not take", a->name);
      return FALSE;
    }
  if (lse >= 0 && (cs_cuda_program_slot (p, (guint) lse)->dtype != CS_DTYPE_F32
                   || !cs_cuda_slot_is_contiguous (cs_cuda_program_slot (p, (guint) lse))))
    return FALSE;
  d.stats = lse >= 0 && lstride >= a->L ? lse : -1;
  d.stats_st[3] = 1;
  d.stats_st[2] = 1;
  d.stats_st[1] = d.stats >= 0 ? lstride : a->L;
  d.stats_st[0] = d.stats_st[1] * d.h;
  /* the outputs as their slots lay them out: packed, or in the order of the transpose that
     reads them, or in place in a cat (cs_cuda_program_new_output_slot) */
  if (!backward)
    {
      if (!cudnn_view (p, a, out0, d.o_st))
        return FALSE;
      d.o = (gint) out0;
    }
  else
    {
      if (d.stats < 0 || !cudnn_view (p, a, o->slot, d.o_st) || !cudnn_view (p, a, go->slot, d.do_st)
          || !cudnn_view (p, a, out0, d.dq_st) || !cudnn_view (p, a, out1, d.dk_st)
          || !cudnn_view (p, a, out2, d.dv_st))
        return FALSE;
      d.o = (gint) o->slot;
      d.dO = (gint) go->slot;
      d.dQ = (gint) out0;
      d.dK = (gint) out1;
      d.dV = (gint) out2;
    }
  shp = shape_text (cs_cuda_program_slot (p, q->slot)->shape, a->rank);
  label = g_strdup_printf ("attention %s (cuDNN) %s %s x %" G_GINT64_FORMAT "%s", backward ? "backward" : "forward",
                           a->name, shp, a->S, a->causal ? " causal" : "");
  if (!cs_cuda_cudnn_sdpa_step (p, &d, label, &why))
    {
      g_debug ("cuDNN attention %s: %s", a->name, why);
      return FALSE;
    }
  return TRUE;
}

/* Stores accumulator slot @acc into slot @dst of another dtype, element by element. */
static void
gen_convert (CsCudaProgram *p, guint acc, guint dst, const char *what)
{
  AttGen g;
  const CsCudaSlot *s = cs_cuda_program_slot (p, dst);
  gsize n = cs_cuda_slot_numel (s);
  guint pa, pd;

  gen_init (&g, p);
  gen_acc (&g, cs_cuda_program_slot (p, acc)->dtype == CS_DTYPE_F64);
  pa = gen_param (&g, acc, FALSE);
  pd = gen_param (&g, dst, TRUE);
  gen_storer (&g, "st", pd, s->dtype);
  g_string_append_printf (g.body, "  for (long long i = (long long) blockIdx.x * blockDim.x + threadIdx.x; i < %zuLL;"
                          " i += (long long) gridDim.x * blockDim.x)\n    st (i, a%u[i]);\n", n, pa);
  gen_finish (&g, g_strdup_printf ("attention convert %s", what), MIN ((n + 255) / 256, (gsize) 65535 * 64), 0);
  gen_clear (&g);
}

/* A new slot for output @px (typed: its dtype and shape, which must hold @numel elements when
 * @numel >= 0; contiguous, or in the layout its transpose's reshape wants:
 * cs_cuda_program_new_output_slot), else a contiguous one of @dt and @shape. */
static gboolean
out_slot (CsCudaProgram *p, const CsStmt *st, const CsProxy *px, CsDtype dt, const int64_t *shape, guint rank,
          int64_t numel, guint *slot, GError **error)
{
  if (px != NULL && px->kind == CS_PROXY_TENSOR && px->typed)
    {
      if (numel >= 0 && cs_shape_numel (px->shape, px->rank) != numel)
        return afail (error, st, "output %s has %" G_GINT64_FORMAT " elements, the attention gives %"
                      G_GINT64_FORMAT, px->name, cs_shape_numel (px->shape, px->rank), numel);
      if (cs_cuda_storage_type (px->dtype) == NULL)
        return afail (error, st, "output %s has dtype %s", px->name, cs_dtype_short_name (px->dtype));
      *slot = cs_cuda_program_new_output_slot (p, px);
      return TRUE;
    }
  *slot = cs_cuda_program_new_slot (p, dt, shape, rank);
  return TRUE;
}

/* A contiguous slot of @slot: itself, or a copy. */
static gboolean
contiguous (CsCudaProgram *p, guint slot, const char *label, guint *out, GError **error)
{
  if (cs_cuda_slot_is_contiguous (cs_cuda_program_slot (p, slot)))
    {
      *out = slot;
      return TRUE;
    }
  return cs_cuda_codegen_copy (p, slot, label, out, error);
}

static gboolean
run_forward (CsCudaProgram *p, const CsStmt *st, const AttLayout *lay, GError **error)
{
  gint qi = tensor_arg (p, st, CS_ARG_QUERY, error), ki, vi;
  AttOperand q, k, v;
  Att a;
  CsCudaSlot qs;   /* a copy: new slots may move the slot array */
  int64_t oshape[CS_MAX_DIMS];
  guint out, lse;
  CsProxy *lp = out_item (st, 1);
  int64_t lstride;

  if (qi < 0 || (ki = tensor_arg (p, st, CS_ARG_KEY, error)) < 0
      || (vi = tensor_arg (p, st, CS_ARG_VALUE, error)) < 0)
    return FALSE;
  if (!att_setup (p, st, lay, (guint) qi, (guint) ki, (guint) vi, &a, error))
    return FALSE;
  qs = *cs_cuda_program_slot (p, (guint) qi);
  memcpy (oshape, qs.shape, sizeof (int64_t) * a.rank);
  oshape[a.rank - 1] = a.Ev;
  if (!out_slot (p, st, out_item (st, 0), qs.dtype, oshape, a.rank, a.nb * a.L * a.Ev, &out, error))
    return FALSE;
  /* logsumexp: as the trace types it ([..., L] padded, [..., L, 1] for cuDNN, [..., 0] when not
     asked for), else [..., L] in the accumulator's dtype */
  if (!out_slot (p, st, lp, a.f64 ? CS_DTYPE_F64 : CS_DTYPE_F32, qs.shape, a.rank - 1, -1, &lse, error))
    return FALSE;
  if (!is_att_float (cs_cuda_program_slot (p, lse)->dtype))
    return afail (error, st, "logsumexp must be a float tensor");
  lstride = (int64_t) cs_cuda_slot_numel (cs_cuda_program_slot (p, lse)) / a.nb;
  if (lstride < a.L && lstride != 0)
    return afail (error, st, "logsumexp holds %" G_GINT64_FORMAT " values per batch, fewer than L = %"
                  G_GINT64_FORMAT, lstride, a.L);
  if (!operand (p, (guint) qi, "attention", &q, error) || !operand (p, (guint) ki, "attention", &k, error)
      || !operand (p, (guint) vi, "attention", &v, error))
    return FALSE;
  if (try_cudnn (p, &a, &q, &k, &v, NULL, NULL, out, 0, 0, lstride >= a.L ? (gint) lse : -1, lstride))
    {
      if (lstride > a.L)
        {
          /* cuDNN writes [b, i < L] only: the padding 0 first, as the kernels and the CPU leave
             it (the zero step goes before the cuDNN step) */
          CsCudaStep *zero;

          gen_zero (p, lse, "logsumexp padding");
          zero = g_ptr_array_steal_index (p->steps, p->steps->len - 1);
          g_ptr_array_insert (p->steps, (gint) p->steps->len - 1, zero);
        }
    }
  else if (att_tensor_cores (&a))
    gen_forward_tc (p, &a, &q, &k, &v, out, (gint) lse, lstride);
  else
    gen_forward (p, &a, &q, &k, &v, out, (gint) lse, lstride);
  cs_cuda_program_bind (p, out_item (st, 0), out);
  if (lp != NULL)
    cs_cuda_program_bind (p, lp, lse);
  /* the outputs the executor does not model: zeros, as the CPU reference gives them */
  for (guint i = 2; i < lay->n_out; i++)
    {
      CsProxy *px = out_item (st, i);
      int64_t cum[1] = { qs.shape[0] + 1 };
      gboolean is_cum = lay->cum && (i == 2 || i == 3);
      guint z;

      if (px == NULL || px->kind != CS_PROXY_TENSOR)
        continue;
      if (!out_slot (p, st, px, CS_DTYPE_I64, cum, is_cum ? 1 : 0, -1, &z, error))
        return FALSE;
      gen_zero (p, z, px->typed ? cs_dtype_short_name (px->dtype) : "i64");
      cs_cuda_program_bind (p, px, z);
    }
  if (lstride == 0)
    gen_zero (p, lse, "logsumexp");
  return TRUE;
}

static gboolean
run_backward (CsCudaProgram *p, const CsStmt *st, const AttLayout *lay, GError **error)
{
  gint gi = tensor_arg (p, st, lay->grad_out, error), qi = -1, ki = -1, vi = -1, oi = -1, li = -1;
  AttOperand go, q, k, v, o;
  Att a;
  guint dq, dk, dv, dbuf, lse;
  gint gm_acc = -1;
  guint gm = 0;
  CsProxy *gmp = lay->n_out == 4 ? out_item (st, 3) : NULL;
  int64_t lstride, dshape[1];
  const CsCudaSlot *qs, *ks, *vs;

  if (gi < 0 || (qi = tensor_arg (p, st, CS_ARG_QUERY, error)) < 0 || (ki = tensor_arg (p, st, CS_ARG_KEY, error)) < 0
      || (vi = tensor_arg (p, st, CS_ARG_VALUE, error)) < 0 || (oi = tensor_arg (p, st, CS_ARG_OUT, error)) < 0
      || (li = tensor_arg (p, st, CS_ARG_LOGSUMEXP, error)) < 0)
    return FALSE;
  if (!att_setup (p, st, lay, (guint) qi, (guint) ki, (guint) vi, &a, error))
    return FALSE;
  if ((gint64) cs_cuda_slot_numel (cs_cuda_program_slot (p, (guint) gi)) != a.nb * a.L * a.Ev
      || (gint64) cs_cuda_slot_numel (cs_cuda_program_slot (p, (guint) oi)) != a.nb * a.L * a.Ev
      || cs_cuda_program_slot (p, (guint) gi)->rank != a.rank || cs_cuda_program_slot (p, (guint) oi)->rank != a.rank)
    return afail (error, st, "grad_out and out must be [..., L, Ev]");
  if (!is_att_float (cs_cuda_program_slot (p, (guint) li)->dtype))
    return afail (error, st, "logsumexp must be a float tensor");
  lstride = (int64_t) cs_cuda_slot_numel (cs_cuda_program_slot (p, (guint) li)) / a.nb;
  if (lstride < a.L)
    return afail (error, st, "logsumexp holds %" G_GINT64_FORMAT " values per batch, fewer than L = %"
                  G_GINT64_FORMAT, lstride, a.L);
  if (!operand (p, (guint) gi, "attention", &go, error) || !operand (p, (guint) qi, "attention", &q, error)
      || !operand (p, (guint) ki, "attention", &k, error) || !operand (p, (guint) vi, "attention", &v, error)
      || !operand (p, (guint) oi, "attention", &o, error)
      || !contiguous (p, (guint) li, "attention", &lse, error))
    return FALSE;
  qs = cs_cuda_program_slot (p, (guint) qi);
  ks = cs_cuda_program_slot (p, (guint) ki);
  vs = cs_cuda_program_slot (p, (guint) vi);
  {
    CsDtype qd = qs->dtype, kd = ks->dtype, vd = vs->dtype;
    int64_t qsh[CS_MAX_DIMS], ksh[CS_MAX_DIMS], vsh[CS_MAX_DIMS];
    guint r = a.rank;

    memcpy (qsh, qs->shape, sizeof (int64_t) * r);
    memcpy (ksh, ks->shape, sizeof (int64_t) * r);
    memcpy (vsh, vs->shape, sizeof (int64_t) * r);
    if (!out_slot (p, st, out_item (st, 0), qd, qsh, r, a.nb * a.L * a.E, &dq, error)
        || !out_slot (p, st, out_item (st, 1), kd, ksh, r, a.nb * a.S * a.E, &dk, error)
        || !out_slot (p, st, out_item (st, 2), vd, vsh, r, a.nb * a.S * a.Ev, &dv, error))
      return FALSE;
  }
  if (gmp != NULL && gmp->kind == CS_PROXY_TENSOR && a.mask >= 0 && a.mask_dtype != CS_DTYPE_B8)
    {
      const CsCudaSlot *ms = cs_cuda_program_slot (p, (guint) a.mask);
      int64_t msh[CS_MAX_DIMS];
      guint mr = ms->rank;

      memcpy (msh, ms->shape, sizeof (int64_t) * mr);
      if (!out_slot (p, st, gmp, ms->dtype, msh, mr, (int64_t) cs_cuda_slot_numel (ms), &gm, error))
        return FALSE;
      gm_acc = (gint) cs_cuda_program_new_slot (p, a.f64 ? CS_DTYPE_F64 : CS_DTYPE_F32, msh, mr);
      gen_zero (p, (guint) gm_acc, "attn_mask gradient");
    }
  /* cuDNN's fused backward where it takes the case (no mask gradient), else the kernels */
  if (gm_acc >= 0 || !try_cudnn (p, &a, &q, &k, &v, &o, &go, dq, dk, dv, (gint) lse, lstride))
    {
      dshape[0] = a.nb * a.L;
      dbuf = cs_cuda_program_new_slot (p, a.f64 ? CS_DTYPE_F64 : CS_DTYPE_F32, dshape, 1);
      gen_rowdot (p, &a, &go, &o, dbuf);
      if (att_tensor_cores (&a))
        {
          gen_backward_dq_tc (p, &a, &q, &k, &v, &go, lse, lstride, dbuf, dq, gm_acc);
          gen_backward_dkdv_tc (p, &a, &q, &k, &v, &go, lse, lstride, dbuf, dk, dv);
        }
      else
        {
          gen_backward_dq (p, &a, &q, &k, &v, &go, lse, lstride, dbuf, dq, gm_acc);
          gen_backward_dkdv (p, &a, &q, &k, &v, &go, lse, lstride, dbuf, dk, dv);
        }
    }
  if (gm_acc >= 0)
    {
      gen_convert (p, (guint) gm_acc, gm, "attn_mask gradient");
      cs_cuda_program_bind (p, gmp, gm);
    }
  if (out_item (st, 0))
    cs_cuda_program_bind (p, out_item (st, 0), dq);
  if (out_item (st, 1))
    cs_cuda_program_bind (p, out_item (st, 1), dk);
  if (out_item (st, 2))
    cs_cuda_program_bind (p, out_item (st, 2), dv);
  return TRUE;
}

/**
 * cs_cuda_attention_call:
 * @p: the program being built
 * @st: a statement cs_cuda_attention_handles() accepts
 *
 * Adds the kernels of one attention statement and binds its outputs.  Forward: q [..., L, E],
 * k [..., S, E], v [..., S, Ev] of one float dtype (bf16, f16, f32, f64), E and Ev at most 256,
 * an optional bool or float mask broadcastable to [..., L, S], is_causal, scale (None:
 * 1/sqrt(E)); outputs out [..., L, Ev] in q's dtype, logsumexp as the trace types it (natural
 * log of the row sums of exp(scale q k^T + mask), f32, its last extent padded by the executors:
 * sdpaex.py's meta) and zeros for the outputs the executor does not model (cumulative sequence
 * lengths, Philox seed and offset, debug mask), as the CPU reference (core/cs-ref.c) gives them.
 * Backward: (dq, dk, dv[, d attn_mask]) from grad_out, q, k, v, out and logsumexp.  Through
 * cuDNN's fused attention where it takes the case (try_cudnn), else the generated kernels.
 * Errors: CS_CUDA_ERROR_UNSUPPORTED, with the statement's line: dropout_p != 0, head dims
 * over 256, shapes that do not match, a mask that does not broadcast.
 * Returns: TRUE on success
 */
gboolean
cs_cuda_attention_call (CsCudaProgram *p, CsStmt *st, GError **error)
{
  const AttLayout *lay = layout_of (st);

  g_return_val_if_fail (lay != NULL, FALSE);
  if (!lay->backward && out_item (st, 0) == NULL)
    return afail (error, st, "no output proxy for the attention's result");
  return lay->backward ? run_backward (p, st, lay, error) : run_forward (p, st, lay, error);
}
