/* cs-cuda-program.c: a training step (forward + backward trace) as a list of GPU steps.
 *
 * Walks Thunder's final traces (reference/thunder-traces.md: `computation` returns
 * ({'output', 'flat_args', 'flat_output'}, saved_for_backward); `backward_fn(saved_for_backward,
 * cotangents)` unpacks them and returns one gradient per flat arg).  Each fusion region becomes
 * generated kernels (cs-cuda-codegen.c), matmul/linear a cuBLASLt call (cs-cuda-blas.c); shape
 * ops outside regions are views (a permute feeding a matmul becomes a transpose flag), copied
 * only when a reshape's strides cannot be viewed.  Before the walk the build plans layouts: a
 * tensor that a transpose and a reshape read is written in the transpose's order, the pieces of
 * a cat of such chains straight into the cat's output (plan_layouts, plan_cats), and a bias
 * gradient a region would sum goes to the weight gradient's matmul epilogue (plan_bias_grads).
 * Constant fills (kernels that read nothing) run
 * once when the program is built, not in every step.  Buffers are placed in one arena by a first-fit
 * plan over their live ranges (reference/gpu-executor.md 6.2): one cudaMalloc per program, none
 * on the hot path.  The whole step can be captured once into a CUDA graph and replayed (6.1).
 */
#include "cs-config.h"

#include "cs-cuda-private.h"
#include "cs-dist.h"
#include "cs-executors.h"
#include "cs-meta.h"

#include <errno.h>
#include <math.h>
#include <string.h>

/* ---- slots and buffers ---- */

guint
cs_cuda_program_new_buffer (CsCudaProgram *p, gsize size_bytes)
{
  CsCudaBuffer b = { 0 };

  b.size_bytes = size_bytes;
  b.first = -1;
  b.last = -1;
  g_array_append_val (p->buffers, b);
  return p->buffers->len - 1;
}

CsCudaSlot *
cs_cuda_program_slot (CsCudaProgram *p, guint slot)
{
  g_assert (slot < p->slots->len);
  return &g_array_index (p->slots, CsCudaSlot, slot);
}

static void
contiguous_strides (const int64_t *shape, guint rank, int64_t *strides)
{
  int64_t acc = 1;

  for (guint j = rank; j-- > 0;)
    {
      strides[j] = acc;
      acc *= MAX (shape[j], 1);
    }
}

static guint
add_slot (CsCudaProgram *p, const CsCudaSlot *s)
{
  g_array_append_val (p->slots, *s);
  return p->slots->len - 1;
}

guint
cs_cuda_program_new_slot (CsCudaProgram *p, CsDtype dtype, const int64_t *shape, guint rank)
{
  CsCudaSlot s = { 0 };
  int64_t n = cs_shape_numel (shape, rank);

  s.dtype = dtype;
  s.rank = rank;
  if (rank > 0)   /* a rank-0 proxy's shape is NULL */
    memcpy (s.shape, shape, sizeof (int64_t) * rank);
  contiguous_strides (shape, rank, s.strides);
  s.buffer = cs_cuda_program_new_buffer (p, (gsize) MAX (n, 1) * cs_dtype_size_bytes (dtype));
  return add_slot (p, &s);
}

gsize
cs_cuda_slot_numel (const CsCudaSlot *s)
{
  return (gsize) cs_shape_numel (s->shape, s->rank);
}

gboolean
cs_cuda_slot_is_contiguous (const CsCudaSlot *s)
{
  int64_t st[CS_MAX_DIMS];

  contiguous_strides (s->shape, s->rank, st);
  for (guint j = 0; j < s->rank; j++)
    if (s->shape[j] != 1 && s->strides[j] != st[j])
      return FALSE;
  return TRUE;
}

gint
cs_cuda_program_lookup (CsCudaProgram *p, const CsProxy *proxy)
{
  gpointer v = g_hash_table_lookup (p->slot_of, proxy);

  return v ? (gint) GPOINTER_TO_UINT (v) - 1 : -1;
}

void
cs_cuda_program_bind (CsCudaProgram *p, const CsProxy *proxy, guint slot)
{
  g_hash_table_insert (p->slot_of, (gpointer) proxy, GUINT_TO_POINTER (slot + 1));
}

CsCudaStep *
cs_cuda_program_add_step (CsCudaProgram *p, CsCudaStepKind kind, const char *kind_name, char *label)
{
  CsCudaStep *s = g_new0 (CsCudaStep, 1);

  s->kind = kind;
  s->kind_name = kind_name;
  s->label = label;
  s->backward = p->backward_active;
  s->reads = g_array_new (FALSE, FALSE, sizeof (guint));
  s->writes = g_array_new (FALSE, FALSE, sizeof (guint));
  s->args = g_array_new (FALSE, FALSE, sizeof (CsCudaKArg));
  g_ptr_array_add (p->steps, s);
  return s;
}

/** cs_cuda_program_step_free: see cs-cuda-private.h. */
void
cs_cuda_program_step_free (gpointer data)
{
  CsCudaStep *s = data;

  g_free (s->label);
  g_array_unref (s->reads);
  g_array_unref (s->writes);
  g_array_unref (s->args);
  g_free (s->arg_ptrs);
  g_free (s->arg_vals);
  cs_cuda_gemm_free (s->gemm);
  cs_cuda_cudnn_free (s->cudnn);
  g_free (s);
}

void *
cs_cuda_program_slot_ptr (CsCudaProgram *p, guint slot)
{
  CsCudaSlot *s = cs_cuda_program_slot (p, slot);
  CsCudaBuffer *b = &g_array_index (p->buffers, CsCudaBuffer, s->buffer);

  return (char *) p->arena + b->offset + (gsize) s->offset * cs_dtype_size_bytes (s->dtype);
}

/* ---- trace walking ---- */

static gboolean
fail (GError **error, CsCudaError code, const CsStmt *st, const char *fmt, ...) G_GNUC_PRINTF (4, 5);

static gboolean
fail (GError **error, CsCudaError code, const CsStmt *st, const char *fmt, ...)
{
  va_list ap;
  g_autofree char *msg = NULL;

  va_start (ap, fmt);
  msg = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  if (st && st->line)
    g_set_error (error, CS_CUDA_ERROR, code, "line %u:%u: %s", st->line, st->col, msg);
  else
    g_set_error (error, CS_CUDA_ERROR, code, "%s", msg);
  return FALSE;
}

/* The slot of @st's first positional argument when it is a tensor, -1 if not: the source of
 * the view and shape ops, which all take it first whatever their schemas call it. */
static gint
slot_of_first (CsCudaProgram *p, const CsStmt *st)
{
  CsValue *v = cs_stmt_get_arg (st, 0, NULL);

  if (v == NULL || v->kind != CS_VALUE_PROXY)
    return -1;
  return cs_cuda_program_lookup (p, v->u.proxy);
}

/* The slot of @st's tensor argument @name (read through the op's schema), -1 if none. */
static gint
slot_of_arg (CsCudaProgram *p, const CsStmt *st, CsArgName name)
{
  CsValue *v = cs_stmt_arg (st, name);

  if (v == NULL || v->kind != CS_VALUE_PROXY)
    return -1;
  return cs_cuda_program_lookup (p, v->u.proxy);
}

static void
flatten_prims (CsStmt *st, GPtrArray *out)
{
  if (st->kind != CS_STMT_CALL)
    return;
  /* Executor names of prims (torch_div_prim_impl) run as the prim they implement. */
  if (st->n_subs == 0 || cs_op_has_tag (st->op, CS_OP_TAG_PRIM)
      || cs_op_has_tag (cs_op_semantic (st->op), CS_OP_TAG_PRIM))
    {
      g_ptr_array_add (out, st);
      return;
    }
  for (guint i = 0; i < st->n_subs; i++)
    flatten_prims (st->subs[i], out);
}

static guint
view_of (CsCudaProgram *p, guint src, const int64_t *shape, guint rank, const int64_t *strides)
{
  CsCudaSlot s = *cs_cuda_program_slot (p, src);

  s.rank = rank;
  if (rank > 0)   /* a rank-0 proxy's shape is NULL */
    {
      memcpy (s.shape, shape, sizeof (int64_t) * rank);
      memcpy (s.strides, strides, sizeof (int64_t) * rank);
    }
  return add_slot (p, &s);
}

/**
 * cs_cuda_program_reshape_view:
 * A contiguous view of @shape over the (contiguous) slot @src's bytes.
 * Returns: the new slot
 */
guint
cs_cuda_program_reshape_view (CsCudaProgram *p, guint src, const int64_t *shape, guint rank)
{
  int64_t st[CS_MAX_DIMS];

  g_assert (cs_cuda_slot_is_contiguous (cs_cuda_program_slot (p, src)));
  contiguous_strides (shape, rank, st);
  return view_of (p, src, shape, rank, st);
}

/* The strides of a view of @shape (rank @rank) over a tensor of @old_shape and @old_strides
 * (rank @old_rank, the same elements in row-major order) without moving any element, when one
 * exists: runs of old dims that are contiguous with each other split or merge freely, others
 * must map dim for dim.  PyTorch's computeStride (aten/src/ATen/TensorUtils.cpp).  FALSE when
 * the reshape needs a copy. */
static gboolean
view_strides (const int64_t *old_shape, const int64_t *old_strides, guint old_rank, const int64_t *shape,
              guint rank, int64_t *strides)
{
  int64_t chunk, tensor_numel = 1, view_numel = 1;
  gint view_d = (gint) rank - 1;

  if (old_rank == 0 || cs_shape_numel (old_shape, old_rank) == 0)
    return FALSE;
  chunk = old_strides[old_rank - 1];
  for (gint d = (gint) old_rank - 1; d >= 0; d--)
    {
      tensor_numel *= old_shape[d];
      if (d == 0 || (old_shape[d - 1] != 1 && old_strides[d - 1] != tensor_numel * chunk))
        {
          while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1))
            {
              strides[view_d] = view_numel * chunk;
              view_numel *= shape[view_d];
              view_d--;
            }
          if (view_numel != tensor_numel)
            return FALSE;
          if (d > 0)
            {
              chunk = old_strides[d - 1];
              tensor_numel = 1;
              view_numel = 1;
            }
        }
    }
  return view_d == -1;
}

/* Reshape-like: a view when one exists (a contiguous source, or strides that split or merge
 * as the reshape does: view_strides), else a copy then a view. */
static gboolean
reshape_view (CsCudaProgram *p, guint src, const CsProxy *y, const char *label, guint *out, GError **error)
{
  int64_t st[CS_MAX_DIMS];
  CsCudaSlot *s = cs_cuda_program_slot (p, src);

  if (cs_shape_numel (y->shape, y->rank) != (int64_t) cs_cuda_slot_numel (s))
    return fail (error, CS_CUDA_ERROR_INPUT, NULL, "%s: reshape of %zu elements to %s", label,
                 cs_cuda_slot_numel (s), y->name);
  if (!cs_cuda_slot_is_contiguous (s))
    {
      if (view_strides (s->shape, s->strides, s->rank, y->shape, y->rank, st))
        {
          *out = view_of (p, src, y->shape, y->rank, st);
          return TRUE;
        }
      if (!cs_cuda_codegen_copy (p, src, label, &src, error))
        return FALSE;
    }
  contiguous_strides (y->shape, y->rank, st);
  *out = view_of (p, src, y->shape, y->rank, st);
  return TRUE;
}

/* How transpose_perm() read a transpose or permute. */
typedef enum
{
  PERM_OK,
  PERM_OUT_OF_RANGE,     /* transpose(x, d0, d1) with a dim outside the rank */
  PERM_NOT_UNDERSTOOD,   /* arguments that are neither two dims nor a permutation */
} PermRead;

/* The permutation (as written: entries may be negative) of transpose/permute @st of a tensor of
 * @rank dims: `prims.transpose(x, (0, 2, 1, 3))`, `ltorch.permute(x, 1, 0)`, `ltorch.transpose(x,
 * d0, d1)`; @np gets its length. */
static PermRead
transpose_perm (const CsStmt *st, guint rank, int64_t *perm, guint *np)
{
  CsValue *a1 = cs_stmt_get_arg (st, 1, NULL);
  CsValue *a2 = cs_stmt_get_arg (st, 2, NULL);

  *np = 0;
  if (a1 && a1->kind == CS_VALUE_INT && a2 && a2->kind == CS_VALUE_INT)
    {
      int64_t d0 = a1->u.i < 0 ? a1->u.i + rank : a1->u.i;
      int64_t d1 = a2->u.i < 0 ? a2->u.i + rank : a2->u.i;

      if (d0 < 0 || d1 < 0 || d0 >= rank || d1 >= rank)
        return PERM_OUT_OF_RANGE;
      for (guint j = 0; j < rank; j++)
        perm[j] = j;
      perm[d0] = d1;
      perm[d1] = d0;
      *np = rank;
      return PERM_OK;
    }
  if (a1 != NULL && cs_value_get_int_seq (a1, perm, CS_MAX_DIMS, np) && *np == rank)
    return PERM_OK;
  /* ltorch.permute(x, 1, 0) spelled with positional ints */
  *np = 0;
  for (guint j = 1; j <= rank; j++)
    {
      CsValue *v = cs_stmt_get_arg (st, j, NULL);

      if (!v || v->kind != CS_VALUE_INT)
        return PERM_NOT_UNDERSTOOD;
      perm[(*np)++] = v->u.i;
    }
  return PERM_OK;
}

static gboolean
handle_view (CsCudaProgram *p, CsStmt *st, CsOpId id, CsProxy *y, GError **error)
{
  gint src = slot_of_first (p, st);
  CsCudaSlot s;
  guint out = 0;
  int64_t strides[CS_MAX_DIMS];

  if (src < 0)
    return fail (error, CS_CUDA_ERROR_UNSUPPORTED, st, "%s: input is not a known tensor", st->callee);
  s = *cs_cuda_program_slot (p, (guint) src);
  switch (id)
    {
    case CS_OP_LTORCH_PERMUTE:
    case CS_OP_LTORCH_TRANSPOSE:
    case CS_OP_PRIM_TRANSPOSE:
      {
        int64_t perm[CS_MAX_DIMS];
        guint np = 0;

        switch (transpose_perm (st, s.rank, perm, &np))
          {
          case PERM_OUT_OF_RANGE:
            return fail (error, CS_CUDA_ERROR_INPUT, st, "transpose dims out of range");
          case PERM_NOT_UNDERSTOOD:
            return fail (error, CS_CUDA_ERROR_UNSUPPORTED, st, "%s: permutation not understood", st->callee);
          default:
            break;
          }
        for (guint k = 0; k < np; k++)
          {
            int64_t d = perm[k] < 0 ? perm[k] + s.rank : perm[k];

            if (d < 0 || d >= s.rank)
              return fail (error, CS_CUDA_ERROR_INPUT, st, "permutation out of range");
            strides[k] = s.strides[d];
          }
        if (y->rank != np)
          return fail (error, CS_CUDA_ERROR_INPUT, st, "permute result rank mismatch");
        out = view_of (p, (guint) src, y->shape, y->rank, strides);
        break;
      }

    case CS_OP_LTORCH_EXPAND:
    case CS_OP_PRIM_BROADCAST_IN_DIM:
      {
        int64_t bd[CS_MAX_DIMS];
        guint nb = 0;

        if (id == CS_OP_PRIM_BROADCAST_IN_DIM)
          {
            if (!cs_value_get_int_seq (cs_stmt_arg (st, CS_ARG_BROADCAST_DIMENSIONS), bd, CS_MAX_DIMS, &nb)
                || nb != s.rank)
              return fail (error, CS_CUDA_ERROR_UNSUPPORTED, st, "broadcast_in_dim form");
          }
        else
          {
            if (y->rank < s.rank)
              return fail (error, CS_CUDA_ERROR_INPUT, st, "expand to a lower rank");
            for (guint j = 0; j < s.rank; j++)
              bd[j] = y->rank - s.rank + j;
          }
        for (guint k = 0; k < y->rank; k++)
          strides[k] = 0;
        for (guint j = 0; j < s.rank; j++)
          if (bd[j] >= 0 && bd[j] < y->rank)
            strides[bd[j]] = (s.shape[j] == 1 && y->shape[bd[j]] != 1) ? 0 : s.strides[j];
        out = view_of (p, (guint) src, y->shape, y->rank, strides);
        break;
      }

    case CS_OP_LTORCH_CONTIGUOUS:
      if (cs_cuda_slot_is_contiguous (&s))
        out = (guint) src;
      else if (!cs_cuda_codegen_copy (p, (guint) src, st->callee, &out, error))
        return FALSE;
      break;

    default: /* reshape, view, flatten, squeeze, unsqueeze, shallow_copy */
      if (!reshape_view (p, (guint) src, y, st->callee, &out, error))
        return FALSE;
      break;
    }
  cs_cuda_program_bind (p, y, out);
  return TRUE;
}

/* When @g (D = A @ B, A in slot @a) is the weight gradient of a linear whose bias gradient a
 * later region computes (p->bias_grads: o from the output gradient g), and A is that g as [N, M]
 * (reshaped to [M, N] and transposed: the same bytes), @g computes o as its epilogue
 * (cs_cuda_gemm_set_bias_grad): o gets a slot and joins p->epilogue_outs, the region skips it.
 * Returns: o's slot, or -1 */
static gint
claim_bias_grad (CsCudaProgram *p, guint a, CsCudaGemm *g, const CsProxy *y)
{
  for (guint i = 0; i < p->bias_grads->len; i++)
    {
      CsCudaBiasGrad *bg = g_ptr_array_index (p->bias_grads, i);
      gint gs = cs_cuda_program_lookup (p, bg->g);
      CsCudaSlot *sa = cs_cuda_program_slot (p, a), *sg;
      int64_t n = bg->g->shape[bg->g->rank - 1];
      guint o;

      if (gs < 0 || cs_cuda_program_lookup (p, bg->o) >= 0 || y->dtype != bg->o->dtype)
        continue;
      sg = cs_cuda_program_slot (p, (guint) gs);
      if (!cs_cuda_slot_is_contiguous (sg) || sa->rank != 2 || sa->buffer != sg->buffer || sa->offset != sg->offset
          || sa->shape[0] != n || sa->shape[0] * sa->shape[1] != (int64_t) cs_cuda_slot_numel (sg)
          || sa->strides[0] != 1 || (sa->shape[1] > 1 && sa->strides[1] != n))
        continue;
      o = cs_cuda_program_new_slot (p, bg->o->dtype, bg->o->shape, 1);
      if (!cs_cuda_gemm_set_bias_grad (g, o))
        return -1;
      cs_cuda_program_bind (p, bg->o, o);
      g_hash_table_add (p->epilogue_outs, bg->o);
      return (gint) o;
    }
  return -1;
}

static gboolean
handle_matmul (CsCudaProgram *p, CsStmt *st, gboolean linear, CsProxy *y, GError **error)
{
  gint a = slot_of_arg (p, st, CS_ARG_A);
  gint b = slot_of_arg (p, st, linear ? CS_ARG_W : CS_ARG_B);
  gint bias = -1;
  guint d;
  double flops = 0;
  CsCudaGemm *g;
  CsCudaStep *step;
  g_autofree char *desc = NULL;
  double bytes;
  gint bgrad;

  if (linear)
    {
      CsValue *bv = cs_stmt_arg (st, CS_ARG_BIAS);

      if (bv && bv->kind == CS_VALUE_PROXY)
        {
          bias = cs_cuda_program_lookup (p, bv->u.proxy);
          if (bias < 0)
            return fail (error, CS_CUDA_ERROR_UNSUPPORTED, st, "linear: bias is not a known tensor");
        }
    }
  if (a < 0 || b < 0)
    return fail (error, CS_CUDA_ERROR_UNSUPPORTED, st, "%s: operands are not known tensors", st->callee);
  if (linear)
    {
      CsCudaSlot *w = cs_cuda_program_slot (p, (guint) b);
      CsCudaSlot *x = cs_cuda_program_slot (p, (guint) a);
      int64_t shape[2], strides[2];

      if (w->rank != 2)
        return fail (error, CS_CUDA_ERROR_UNSUPPORTED, st, "linear weight of rank %u", w->rank);
      if (x->rank == 1)
        return fail (error, CS_CUDA_ERROR_UNSUPPORTED, st, "linear of a 1-D input");
      shape[0] = w->shape[1];
      shape[1] = w->shape[0];
      strides[0] = w->strides[1];
      strides[1] = w->strides[0];
      /* view_of appends to p->slots, which may move it: w and x are not used after this */
      b = (gint) view_of (p, (guint) b, shape, 2, strides);
    }
  if (bias >= 0)
    {
      CsCudaSlot *bs = cs_cuda_program_slot (p, (guint) bias);

      if (!cs_cuda_slot_is_contiguous (bs) && !cs_cuda_codegen_copy (p, (guint) bias, st->callee, (guint *) &bias, error))
        return FALSE;
    }
  d = cs_cuda_program_new_slot (p, y->dtype, y->shape, y->rank);
  g = cs_cuda_gemm_new (p, (guint) a, (guint) b, d, bias, &flops, NULL);
  if (!g)
    {
      /* A layout cuBLASLt cannot take (batch dims of a permuted view): make the strided
       * operands contiguous and try again. */
      if (!cs_cuda_slot_is_contiguous (cs_cuda_program_slot (p, (guint) a))
          && !cs_cuda_codegen_copy (p, (guint) a, st->callee, (guint *) &a, error))
        return FALSE;
      if (!cs_cuda_slot_is_contiguous (cs_cuda_program_slot (p, (guint) b))
          && !cs_cuda_codegen_copy (p, (guint) b, st->callee, (guint *) &b, error))
        return FALSE;
      g = cs_cuda_gemm_new (p, (guint) a, (guint) b, d, bias, &flops, error);
    }
  if (!g)
    {
      g_prefix_error (error, "line %u: %s: ", st->line, st->callee);
      return FALSE;
    }
  bgrad = linear ? -1 : claim_bias_grad (p, (guint) a, g, y);
  desc = cs_cuda_gemm_describe (g);
  step = cs_cuda_program_add_step (p, CS_CUDA_STEP_GEMM, "matmul",
                                   g_strdup_printf ("%s -> %s %s", linear ? "linear" : "matmul", y->name, desc));
  step->gemm = g;
  step->flops = flops;
  g_array_append_val (step->reads, a);
  g_array_append_val (step->reads, b);
  if (bias >= 0)
    g_array_append_val (step->reads, bias);
  g_array_append_val (step->writes, d);
  if (bgrad >= 0)
    g_array_append_val (step->writes, bgrad);
  bytes = 0;
  for (guint i = 0; i < step->reads->len; i++)
    bytes += (double) cs_cuda_slot_numel (cs_cuda_program_slot (p, g_array_index (step->reads, guint, i)))
             * cs_dtype_size_bytes (y->dtype);
  bytes += (double) cs_cuda_slot_numel (cs_cuda_program_slot (p, d)) * cs_dtype_size_bytes (y->dtype);
  step->bytes = bytes;
  {
    double peak = y->dtype == CS_DTYPE_F32 ? (p->policy.allow_tf32 ? CS_CUDA_PEAK_TF32_TFLOPS : CS_CUDA_PEAK_F32_TFLOPS)
                  : y->dtype == CS_DTYPE_F64 ? 0.5 * CS_CUDA_PEAK_F32_TFLOPS : CS_CUDA_PEAK_BF16_TFLOPS;

    step->floor_ms = MAX (flops / (peak * 1e12), bytes / (CS_CUDA_PEAK_TBPS * 1e12)) * 1e3;
  }
  cs_cuda_program_bind (p, y, d);
  return TRUE;
}

/* A distributed prim as a world of one (thunder/distributed/prims.py): a collective of one rank
 * (all_reduce of any op, broadcast, all_gather and reduce_scatter with a group of 1) holds its
 * input, and so do wait, synchronize, update_bucket_view, stash_grad_for_fsdp and the
 * tensor-parallel synchronizes: the output is bound to the input's device buffer, no kernel and
 * no NCCL call (NCCL itself would copy the buffer onto itself).  A larger group needs NCCL
 * across processes, which this executor does not have. */
static gboolean
handle_dist_world_of_one (CsCudaProgram *p, CsStmt *st, CsOpId id, GPtrArray *tensors, GError **error)
{
  gint src = slot_of_first (p, st);
  guint n = cs_dist_stmt_group_size (st);

  if (n > 1)
    return fail (error, CS_CUDA_ERROR_UNSUPPORTED, st, "%s: a process group of %u ranks needs NCCL "
                 "across processes; the CUDA executor runs a distributed trace as a world of one",
                 st->callee, n);
  if (id == CS_OP_DIST_PACK || id == CS_OP_DIST_UNPACK || id == CS_OP_DIST_PACK_FOR_FSDP
      || id == CS_OP_DIST_UNPACK_FOR_FSDP)
    return fail (error, CS_CUDA_ERROR_UNSUPPORTED, st, "%s: gradient buckets have no CUDA "
                 "implementation (the CPU reference runs them)", st->callee);
  if (src < 0 || tensors->len != 1)
    return fail (error, CS_CUDA_ERROR_UNSUPPORTED, st, "%s: input is not a known tensor", st->callee);
  cs_cuda_program_bind (p, g_ptr_array_index (tensors, 0), (guint) src);
  return TRUE;
}

static gboolean
is_view_op (CsOpId id)
{
  switch (id)
    {
    case CS_OP_LTORCH_RESHAPE: case CS_OP_LTORCH_VIEW: case CS_OP_LTORCH_FLATTEN:
    case CS_OP_PRIM_RESHAPE: case CS_OP_PRIM_SHALLOW_COPY: case CS_OP_LTORCH_CONTIGUOUS:
    case CS_OP_LTORCH_UNSQUEEZE: case CS_OP_LTORCH_SQUEEZE: case CS_OP_PRIM_SQUEEZE:
    case CS_OP_LTORCH_PERMUTE: case CS_OP_LTORCH_TRANSPOSE: case CS_OP_PRIM_TRANSPOSE:
    case CS_OP_LTORCH_EXPAND: case CS_OP_PRIM_BROADCAST_IN_DIM: case CS_OP_PRIM_STRIDE_ORDER:
      return TRUE;
    default:
      return FALSE;
    }
}

static gboolean handle_matmul (CsCudaProgram *p, CsStmt *st, gboolean linear, CsProxy *y, GError **error);
static GPtrArray *live_prims (GPtrArray *prims, GPtrArray *outs);
static gboolean is_cat (const CsStmt *st);
static gboolean cat_args (const CsStmt *st, guint rank, CsValue **list, guint *dim);
static CsProxy *tensor_arg0 (const CsStmt *st);

static gboolean
is_matmul_prim (const CsStmt *st)
{
  CsOpId id = cs_op_semantic (st->op)->id;

  return id == CS_OP_PRIM_MATMUL || id == CS_OP_PRIM_LINEAR || id == CS_OP_LTORCH_MATMUL
         || id == CS_OP_LTORCH_LINEAR;
}

/* A region may hold matmul/linear prims (nv_enable_linear / nv_enable_matmul): split it there.
 * Each pointwise/reduction segment becomes generated kernels whose outputs are the values that
 * later prims or the region's outputs read; each matmul goes to cuBLASLt. */
static gboolean
run_region (CsCudaProgram *p, GPtrArray *prims, GPtrArray *outs, const char *label, GError **error)
{
  guint start = 0;

  for (guint i = 0; i <= prims->len; i++)
    {
      CsStmt *st = i < prims->len ? g_ptr_array_index (prims, i) : NULL;
      g_autoptr(GPtrArray) seg_outs = NULL;
      g_autoptr(GHashTable) later = NULL;

      if (st && !is_matmul_prim (st))
        continue;
      if (i > start)
        {
          later = g_hash_table_new (NULL, NULL);
          seg_outs = g_ptr_array_new ();
          for (guint j = i; j < prims->len; j++)
            {
              g_autoptr(GPtrArray) ins = g_ptr_array_new ();

              cs_stmt_collect_inputs (g_ptr_array_index (prims, j), ins);
              for (guint q = 0; q < ins->len; q++)
                g_hash_table_add (later, g_ptr_array_index (ins, q));
            }
          for (guint j = 0; j < outs->len; j++)
            g_hash_table_add (later, g_ptr_array_index (outs, j));
          for (guint j = start; j < i; j++)
            {
              g_autoptr(GPtrArray) o = g_ptr_array_new ();

              cs_stmt_collect_outputs (g_ptr_array_index (prims, j), o);
              for (guint q = 0; q < o->len; q++)
                if (g_hash_table_contains (later, g_ptr_array_index (o, q)))
                  g_ptr_array_add (seg_outs, g_ptr_array_index (o, q));
            }
          if (seg_outs->len > 0
              && !cs_cuda_codegen_region (p, (CsStmt **) prims->pdata + start, i - start,
                                          (CsProxy **) seg_outs->pdata, seg_outs->len, label, error))
            return FALSE;
        }
      if (st)
        {
          CsProxy *y = cs_stmt_get_output (st);
          CsOpId id = cs_op_semantic (st->op)->id;

          if (y == NULL || y->kind != CS_PROXY_TENSOR)
            return fail (error, CS_CUDA_ERROR_UNSUPPORTED, st, "%s without one tensor output", st->callee);
          if (!handle_matmul (p, st, id == CS_OP_PRIM_LINEAR || id == CS_OP_LTORCH_LINEAR, y, error))
            return FALSE;
        }
      start = i + 1;
    }
  return TRUE;
}

/* Whether every piece of cat @st is bound to its place in the slot planned for the cat's
 * output @c (plan_cats): then @c is bound to that slot.  FALSE (nothing bound) otherwise. */
static gboolean
cat_in_place (CsCudaProgram *p, const CsStmt *st, CsProxy *c)
{
  guint cs = GPOINTER_TO_UINT (g_hash_table_lookup (p->cat_slot, c)) - 1;
  CsCudaSlot *cat = cs_cuda_program_slot (p, cs);
  CsValue *list;
  guint dim;
  int64_t off = 0;

  if (!cat_args (st, c->rank, &list, &dim))
    return FALSE;
  for (guint j = 0; j < list->u.seq.n; j++)
    {
      CsValue *iv = list->u.seq.items[j];
      gint xs = iv->kind == CS_VALUE_PROXY ? cs_cuda_program_lookup (p, iv->u.proxy) : -1;
      CsCudaSlot *x;

      if (xs < 0)
        return FALSE;
      cat = cs_cuda_program_slot (p, cs);
      x = cs_cuda_program_slot (p, (guint) xs);
      if (x->buffer != cat->buffer || x->rank != cat->rank || x->offset != cat->offset + off * cat->strides[dim])
        return FALSE;
      for (guint k = 0; k < x->rank; k++)
        if ((k == dim ? FALSE : x->shape[k] != cat->shape[k]) || (x->shape[k] > 1 && x->strides[k] != cat->strides[k]))
          return FALSE;
      off += x->shape[dim];
    }
  if (off != cat->shape[dim])
    return FALSE;
  cs_cuda_program_bind (p, c, cs);
  return TRUE;
}

static gboolean
handle_call (CsCudaProgram *p, CsStmt *st, GError **error)
{
  const CsOp *sem = cs_op_semantic (st->op);
  CsOpId id = sem->id;
  g_autoptr(GPtrArray) outs = g_ptr_array_new ();
  g_autoptr(GPtrArray) tensors = g_ptr_array_new ();

  cs_stmt_collect_outputs (st, outs);
  for (guint i = 0; i < outs->len; i++)
    {
      CsProxy *o = g_ptr_array_index (outs, i);

      if (o->kind == CS_PROXY_TENSOR)
        g_ptr_array_add (tensors, o);
    }

  /* a cat whose pieces their producers wrote in place (plan_cats): its output, no kernel */
  if (is_cat (st) && tensors->len == 1 && g_hash_table_contains (p->cat_slot, tensors->pdata[0])
      && cat_in_place (p, st, tensors->pdata[0]))
    return TRUE;
  /* the sdpa executor's statements and ATen's SDPA ops: fused attention kernels */
  if (cs_cuda_attention_handles (st))
    return cs_cuda_attention_call (p, st, error);
  if (cs_executor_of_stmt (st) == CS_EXECUTOR_SDPA)
    return fail (error, CS_CUDA_ERROR_UNSUPPORTED, st, "%s: no CUDA attention kernel", st->callee);
  /* TorchCompile regions: fused cross-entropy kernels */
  if (cs_executor_of_stmt (st) == CS_EXECUTOR_TORCHCOMPILE_XENTROPY)
    return cs_cuda_xentropy_region (p, st, outs, error);
  if (cs_op_is_fusion (st->op))
    {
      g_autoptr(GPtrArray) prims = g_ptr_array_new ();

      for (guint i = 0; i < st->n_subs; i++)
        flatten_prims (st->subs[i], prims);
      if (prims->len == 0)
        return fail (error, CS_CUDA_ERROR_UNSUPPORTED, st, "%s has no subsymbols (its prims were not printed)",
                     st->callee);
      /* outputs a matmul epilogue computed already (bias gradients): not again, nor what only
         they need */
      if (g_hash_table_size (p->epilogue_outs) > 0)
        {
          guint n = outs->len;

          for (guint i = outs->len; i-- > 0;)
            if (g_hash_table_contains (p->epilogue_outs, outs->pdata[i]))
              g_ptr_array_remove_index (outs, i);
          if (outs->len < n)
            {
              GPtrArray *live = live_prims (prims, outs);

              g_ptr_array_unref (prims);
              prims = live;
            }
        }
      /* Every output, typed or not: multi-output prims (var_mean) print no types. */
      if (!run_region (p, prims, outs, st->callee, error))
        {
          if (st->line)
            g_prefix_error (error, "line %u: ", st->line);
          return FALSE;
        }
      return TRUE;
    }
  if (sem->category == CS_OP_CAT_BOOKKEEPING)
    return TRUE;
  if (outs->len == 0)
    return TRUE;   /* no result: nothing to run on the GPU */
  if (tensors->len == 0)
    return fail (error, CS_CUDA_ERROR_UNSUPPORTED, st, "%s: outputs without tensor types; no CUDA implementation",
                 st->callee);
  if (sem->category == CS_OP_CAT_DISTRIBUTED)
    return handle_dist_world_of_one (p, st, id, tensors, error);
  if (id == CS_OP_LTORCH_MATMUL || id == CS_OP_PRIM_MATMUL)
    return handle_matmul (p, st, FALSE, g_ptr_array_index (tensors, 0), error);
  if (id == CS_OP_LTORCH_LINEAR || id == CS_OP_PRIM_LINEAR)
    return handle_matmul (p, st, TRUE, g_ptr_array_index (tensors, 0), error);
  if (id == CS_OP_PRIM_SCATTER_ADD && tensors->len == 1)
    {
      gint a = slot_of_arg (p, st, CS_ARG_A), ix = slot_of_arg (p, st, CS_ARG_INDEX);
      gint v = slot_of_arg (p, st, CS_ARG_VALUE);
      CsValue *dv = cs_stmt_arg (st, CS_ARG_DIM);
      guint out;

      if (a < 0 || ix < 0 || v < 0 || !dv || dv->kind != CS_VALUE_INT)
        return fail (error, CS_CUDA_ERROR_UNSUPPORTED, st, "scatter_add form");
      if (!cs_cuda_codegen_scatter_add (p, (guint) a, (guint) ix, (guint) v, dv->u.i, g_ptr_array_index (tensors, 0),
                                        st->callee, &out, error))
        return FALSE;
      cs_cuda_program_bind (p, g_ptr_array_index (tensors, 0), out);
      return TRUE;
    }
  if ((id == CS_OP_LTORCH_EMBEDDING_BACKWARD || id == CS_OP_PRIM_EMBEDDING_BACKWARD) && tensors->len == 1)
    {
      gint gr = slot_of_arg (p, st, CS_ARG_GRAD), ix = slot_of_arg (p, st, CS_ARG_INDICES);
      CsValue *pv = cs_stmt_arg (st, CS_ARG_PADDING_IDX);
      CsValue *sv = cs_stmt_arg (st, CS_ARG_SCALE_GRAD_BY_FREQ);
      guint out;

      if (gr < 0 || ix < 0)
        return fail (error, CS_CUDA_ERROR_UNSUPPORTED, st, "embedding_backward operands");
      if (sv && sv->kind == CS_VALUE_BOOL && sv->u.b)
        return fail (error, CS_CUDA_ERROR_UNSUPPORTED, st, "embedding_backward with scale_grad_by_freq");
      if (!cs_cuda_codegen_embedding_backward (p, (guint) gr, (guint) ix,
                                               pv && pv->kind == CS_VALUE_INT ? pv->u.i : -1,
                                               g_ptr_array_index (tensors, 0), st->callee, &out, error))
        return FALSE;
      cs_cuda_program_bind (p, g_ptr_array_index (tensors, 0), out);
      return TRUE;
    }
  if (is_view_op (id) && tensors->len == 1)
    return handle_view (p, st, id, g_ptr_array_index (tensors, 0), error);
  if (st->n_subs > 0 || cs_op_has_tag (st->op, CS_OP_TAG_PRIM) || cs_op_has_tag (sem, CS_OP_TAG_PRIM))
    {
      g_autoptr(GPtrArray) prims = g_ptr_array_new ();

      flatten_prims (st, prims);
      if (!cs_cuda_codegen_region (p, (CsStmt **) prims->pdata, prims->len, (CsProxy **) tensors->pdata,
                                   tensors->len, st->callee, error))
        {
          if (st->line)
            g_prefix_error (error, "line %u: ", st->line);
          return FALSE;
        }
      return TRUE;
    }
  return fail (error, CS_CUDA_ERROR_UNSUPPORTED, st, "%s: no CUDA implementation and no decomposition",
               st->callee);
}

/* Binds the proxies of an unpack target list to the items of @src. */
static gboolean
bind_tree (CsCudaProgram *p, CsValue *target, CsValue *src, const CsStmt *st, GError **error)
{
  if (target->kind == CS_VALUE_UNDERSCORE || src == NULL)
    return TRUE;
  if (target->kind != CS_VALUE_PROXY)
    return TRUE;
  if (src->kind == CS_VALUE_PROXY)
    {
      gint s = cs_cuda_program_lookup (p, src->u.proxy);
      CsValue *coll = g_hash_table_lookup (p->collection_of, src->u.proxy);

      if (s >= 0)
        cs_cuda_program_bind (p, target->u.proxy, (guint) s);
      else if (coll)
        g_hash_table_insert (p->collection_of, target->u.proxy, coll);
      return TRUE;
    }
  if (src->kind == CS_VALUE_TUPLE || src->kind == CS_VALUE_LIST)
    g_hash_table_insert (p->collection_of, target->u.proxy, src);
  return TRUE;
}

static void
add_io (CsCudaProgram *p, GArray *infos, GArray *slots, const CsProxy *proxy, guint slot,
        gboolean backward, int grad_of)
{
  CsCudaTensorInfo info = { 0 };
  CsCudaSlot *s = cs_cuda_program_slot (p, slot);

  info.name = proxy->name;
  info.dtype = s->dtype;
  info.rank = s->rank;
  memcpy (info.shape, s->shape, sizeof (int64_t) * s->rank);
  info.backward = backward;
  info.grad_of = grad_of;
  g_array_append_val (infos, info);
  g_array_append_val (slots, slot);
  g_array_index (p->buffers, CsCudaBuffer, s->buffer).pinned = TRUE;
}

static CsValue *
dict_get (CsValue *dict, const char *key)
{
  if (dict == NULL || dict->kind != CS_VALUE_DICT)
    return NULL;
  for (guint i = 0; i + 1 < dict->u.seq.n; i += 2)
    {
      CsValue *k = dict->u.seq.items[i];

      if (k->kind == CS_VALUE_STRING && g_strcmp0 (k->u.s, key) == 0)
        return dict->u.seq.items[i + 1];
    }
  return NULL;
}

/* Thunder prints no types for the tuple outputs of a bound symbol (the sdpa executor's
 * backward `(t4889, t4890, t4891) = sdpafx_..._backward(...)` in a final trace): they get the
 * types the op's meta gives (core/cs-meta.h, Thunder's meta functions), in place.  An op without
 * meta leaves them untyped, and the statement that reads one says so. */
static void
type_tuple_outputs (CsTrace *t, CsStmt *st)
{
  g_autoptr(GPtrArray) outs = NULL;

  if (st->out == NULL || (st->out->kind != CS_VALUE_TUPLE && st->out->kind != CS_VALUE_LIST))
    return;
  outs = g_ptr_array_new ();
  cs_stmt_collect_outputs (st, outs);
  for (guint i = 0; i < outs->len; i++)
    if (((CsProxy *) g_ptr_array_index (outs, i))->kind == CS_PROXY_OTHER)
      {
        cs_meta_infer (t, st, NULL);
        return;
      }
}

static gboolean
walk (CsCudaProgram *p, CsTrace *t, CsProxy *cotangents, CsValue **ret, GError **error)
{
  for (guint i = 0; i < t->n_stmts; i++)
    {
      CsStmt *st = t->stmts[i];

      switch (st->kind)
        {
        case CS_STMT_CALL:
          type_tuple_outputs (t, st);
          if (!handle_call (p, st, error))
            return FALSE;
          break;
        case CS_STMT_UNPACK:
          {
            CsValue *coll = st->source ? g_hash_table_lookup (p->collection_of, st->source) : NULL;

            if (st->source && st->source == cotangents)
              {
                for (guint j = 0; j < st->n_targets; j++)
                  {
                    CsValue *tv = st->targets[j];
                    CsProxy *c;
                    guint slot;

                    if (tv->kind != CS_VALUE_PROXY)
                      continue;
                    c = tv->u.proxy;
                    if (c->kind != CS_PROXY_TENSOR || !c->typed)
                      return fail (error, CS_CUDA_ERROR_UNSUPPORTED, st, "cotangent %s has no tensor type", c->name);
                    slot = cs_cuda_program_new_slot (p, c->dtype, c->shape, c->rank);
                    cs_cuda_program_bind (p, c, slot);
                    add_io (p, p->inputs, p->input_slots, c, slot, TRUE, -1);
                  }
                break;
              }
            if (coll == NULL)
              return fail (error, CS_CUDA_ERROR_UNSUPPORTED, st, "unpack of %s, which is not a known collection",
                           st->source ? st->source->name : "?");
            for (guint j = 0; j < st->n_targets && j < coll->u.seq.n; j++)
              if (!bind_tree (p, st->targets[j], coll->u.seq.items[j], st, error))
                return FALSE;
            break;
          }
        case CS_STMT_RETURN:
          *ret = st->value;
          break;
        default:
          break;
        }
    }
  return TRUE;
}

/* The backward of a torch.compile graph pair (core/cs-aten.h): its parameters are tensors the
 * forward returned, by the same names (the saved tensors, torch/_functorch/partitioners.py),
 * then the cotangents `tangents_1, tangents_2, ...`, one per user output.  A parameter that
 * names a returned forward tensor reads that tensor's slot; every other tensor parameter is a
 * cotangent input of the program.  A parameter that is neither (a name the forward never
 * returned, not `tangents_*`) is refused. */
static gboolean
bind_saved_by_name (CsCudaProgram *p, CsValue *forward_return, GPtrArray *params, GError **error)
{
  g_autoptr(GPtrArray) rets = g_ptr_array_new ();
  g_autoptr(GHashTable) by_name = g_hash_table_new (g_str_hash, g_str_equal);

  cs_value_collect_proxies (forward_return, rets);
  for (guint i = 0; i < rets->len; i++)
    {
      CsProxy *r = g_ptr_array_index (rets, i);

      if (r->name && cs_cuda_program_lookup (p, r) >= 0)
        g_hash_table_insert (by_name, (gpointer) r->name, r);
    }
  for (guint i = 0; i < params->len; i++)
    {
      CsProxy *x = g_ptr_array_index (params, i);
      CsProxy *r = x->name ? g_hash_table_lookup (by_name, x->name) : NULL;
      guint slot;

      if (r != NULL)
        {
          cs_cuda_program_bind (p, x, (guint) cs_cuda_program_lookup (p, r));
          continue;
        }
      if (x->kind != CS_PROXY_TENSOR)
        continue;
      if (x->name == NULL || !g_str_has_prefix (x->name, "tangents_"))
        return fail (error, CS_CUDA_ERROR_UNSUPPORTED, NULL,
                     "backward input %s is neither a tensor the forward returns nor a tangents_N "
                     "cotangent", x->name ? x->name : "?");
      if (!x->typed)
        return fail (error, CS_CUDA_ERROR_UNSUPPORTED, NULL, "cotangent %s has no tensor type", x->name);
      slot = cs_cuda_program_new_slot (p, x->dtype, x->shape, x->rank);
      cs_cuda_program_bind (p, x, slot);
      add_io (p, p->inputs, p->input_slots, x, slot, TRUE, -1);
    }
  return TRUE;
}

/* ---- layouts chosen for a transpose's reshape ---- */

/* Whether @st reads a tensor through its strides as it comes: a fusion region (strided loads),
 * an attention statement (operands whose last dim has unit stride), a return (a program output
 * is gathered on the host; a saved tensor's readers in the backward are checked by name). */
static gboolean
reads_any_layout (const CsStmt *st)
{
  if (st->kind == CS_STMT_RETURN)
    return TRUE;
  if (st->kind != CS_STMT_CALL || st->op == NULL)
    return FALSE;
  return cs_cuda_attention_handles (st)
         || (cs_op_is_fusion (st->op) && cs_executor_of_stmt (st) != CS_EXECUTOR_TORCHCOMPILE_XENTROPY);
}

/* Whether @st is a reshape-like view that copies a tensor that is not contiguous. */
static gboolean
reshapes (const CsStmt *st)
{
  if (st->kind != CS_STMT_CALL || st->op == NULL)
    return FALSE;
  switch (cs_op_semantic (st->op)->id)
    {
    case CS_OP_LTORCH_RESHAPE: case CS_OP_LTORCH_VIEW: case CS_OP_LTORCH_FLATTEN:
    case CS_OP_PRIM_RESHAPE: case CS_OP_LTORCH_CONTIGUOUS:
      return TRUE;
    default:
      return FALSE;
    }
}

/* @t's statements reading each proxy: CsProxy* (or, with @by_name, its name) -> GPtrArray of
 * CsStmt*, the proxy once per statement. */
static GHashTable *
uses_of (CsTrace *t, gboolean by_name)
{
  GHashTable *uses = by_name ? g_hash_table_new_full (g_str_hash, g_str_equal, NULL, (GDestroyNotify) g_ptr_array_unref)
                             : g_hash_table_new_full (NULL, NULL, NULL, (GDestroyNotify) g_ptr_array_unref);

  for (guint i = 0; i < t->n_stmts; i++)
    {
      CsStmt *st = t->stmts[i];
      g_autoptr(GPtrArray) ins = g_ptr_array_new ();

      if (st->kind != CS_STMT_CALL && st->kind != CS_STMT_RETURN)
        continue;
      cs_stmt_collect_inputs (st, ins);
      for (guint j = 0; j < ins->len; j++)
        {
          CsProxy *x = g_ptr_array_index (ins, j);
          gpointer key = by_name ? (gpointer) x->name : (gpointer) x;
          GPtrArray *u;

          if (key == NULL)
            continue;
          u = g_hash_table_lookup (uses, key);
          if (u == NULL)
            {
              u = g_ptr_array_new ();
              g_hash_table_insert (uses, key, u);
            }
          if (u->len == 0 || g_ptr_array_index (u, u->len - 1) != st)
            g_ptr_array_add (u, st);
        }
    }
  return uses;
}

/* Whether every statement of @u but @except reads any layout; where one is the forward's
 * return @fwd_ret, the backward's readers of @name (@bwd_uses) must too. */
static gboolean
uses_read_any_layout (GPtrArray *u, const CsStmt *except, const CsStmt *fwd_ret, const char *name,
                      GHashTable *bwd_uses)
{
  for (guint k = 0; u && k < u->len; k++)
    {
      const CsStmt *c = g_ptr_array_index (u, k);
      GPtrArray *bu;

      if (c == except)
        continue;
      if (!reads_any_layout (c))
        return FALSE;
      if (c != fwd_ret || bwd_uses == NULL || name == NULL)
        continue;
      bu = g_hash_table_lookup (bwd_uses, name);
      for (guint q = 0; bu && q < bu->len; q++)
        if (!reads_any_layout (g_ptr_array_index (bu, q)))
          return FALSE;
    }
  return TRUE;
}

/* Fills p->want_perm for trace @t (@bwd_uses: the backward's uses by name when @t is the
 * forward, else NULL): a tensor x whose top-level transpose y = transpose(x, perm) (the last
 * dim kept) a reshape reads, and whose other readers take any layout, is to be laid out in
 * perm's order by the kernel that writes it (cs_cuda_program_new_output_slot): y is then
 * contiguous, the reshape a view, and the copy it made is gone.  Readers in the backward of a
 * saved x count too (by name: Thunder's backward unpacks the saved tensors under the forward's
 * names). */
static void
plan_layouts_of (CsCudaProgram *p, CsTrace *t, GHashTable *bwd_uses)
{
  g_autoptr(GHashTable) uses = uses_of (t, FALSE);
  const CsStmt *ret = NULL;

  for (guint i = 0; i < t->n_stmts; i++)
    if (t->stmts[i]->kind == CS_STMT_RETURN)
      ret = t->stmts[i];
  for (guint i = 0; i < t->n_stmts; i++)
    {
      CsStmt *st = t->stmts[i];
      CsValue *a0;
      CsProxy *x, *y;
      int64_t perm[CS_MAX_DIMS];
      guint np = 0;
      GPtrArray *yu;
      gboolean reshaped = FALSE;

      if (st->kind != CS_STMT_CALL || st->op == NULL)
        continue;
      switch (cs_op_semantic (st->op)->id)
        {
        case CS_OP_LTORCH_PERMUTE: case CS_OP_LTORCH_TRANSPOSE: case CS_OP_PRIM_TRANSPOSE:
          break;
        default:
          continue;
        }
      a0 = cs_stmt_get_arg (st, 0, NULL);
      y = cs_stmt_get_output (st);
      if (a0 == NULL || a0->kind != CS_VALUE_PROXY || y == NULL || y->kind != CS_PROXY_TENSOR)
        continue;
      x = a0->u.proxy;
      if (x->kind != CS_PROXY_TENSOR || !x->typed || x->rank < 2 || y->rank != x->rank
          || g_hash_table_contains (p->want_perm, x)
          || transpose_perm (st, x->rank, perm, &np) != PERM_OK || np != x->rank)
        continue;
      for (guint k = 0; k < np; k++)
        if (perm[k] < 0)
          perm[k] += x->rank;
      if (perm[np - 1] != (int64_t) np - 1)
        continue;
      yu = g_hash_table_lookup (uses, y);
      for (guint k = 0; yu && k < yu->len; k++)
        reshaped |= reshapes (g_ptr_array_index (yu, k));
      if (!reshaped || !uses_read_any_layout (g_hash_table_lookup (uses, x), st, ret, x->name, bwd_uses))
        continue;
      g_hash_table_insert (p->want_perm, x, g_memdup2 (perm, sizeof perm));
    }
}

/* ---- cats of transposed pieces written in place ---- */

static gboolean
is_cat (const CsStmt *st)
{
  CsOpId id = st->kind == CS_STMT_CALL && st->op ? cs_op_semantic (st->op)->id : CS_OP_OPAQUE;

  return id == CS_OP_LTORCH_CAT || id == CS_OP_PRIM_CAT;
}

/* The tensor list and the (non-negative) dim of cat @st, output rank @rank; FALSE if unread. */
static gboolean
cat_args (const CsStmt *st, guint rank, CsValue **list, guint *dim)
{
  CsValue *l = cs_stmt_arg (st, CS_ARG_TENSORS);
  CsValue *d = cs_stmt_arg (st, CS_ARG_DIM);
  int64_t dv;

  if (l == NULL || (l->kind != CS_VALUE_LIST && l->kind != CS_VALUE_TUPLE) || d == NULL || d->kind != CS_VALUE_INT)
    return FALSE;
  dv = d->u.i < 0 ? d->u.i + rank : d->u.i;
  if (dv < 0 || dv >= rank)
    return FALSE;
  *list = l;
  *dim = (guint) dv;
  return TRUE;
}

/* Fills p->place_of from the top-level cats of @t whose every piece x is reshape(transpose(z))
 * with x, the transpose's result y and z each read by the next statement of that chain only:
 * the kernel writing z (cs_cuda_program_new_output_slot) writes it into x's place in the cat's
 * output, so the transpose and the reshape are views of it and the cat is that output
 * (handle_call), no copy and no cat kernel. */
static void
plan_cats (CsCudaProgram *p, CsTrace *t)
{
  g_autoptr(GHashTable) uses = uses_of (t, FALSE);
  g_autoptr(GHashTable) def = g_hash_table_new (NULL, NULL);

  for (guint i = 0; i < t->n_stmts; i++)
    {
      g_autoptr(GPtrArray) o = g_ptr_array_new ();

      if (t->stmts[i]->kind != CS_STMT_CALL)
        continue;
      cs_stmt_collect_outputs (t->stmts[i], o);
      for (guint q = 0; q < o->len; q++)
        g_hash_table_insert (def, o->pdata[q], t->stmts[i]);
    }
  for (guint i = 0; i < t->n_stmts; i++)
    {
      CsStmt *st = t->stmts[i];
      CsProxy *c = st->kind == CS_STMT_CALL ? cs_stmt_get_output (st) : NULL;
      CsValue *list;
      guint dim;
      int64_t off = 0;
      g_autoptr(GPtrArray) places = g_ptr_array_new_with_free_func (g_free);
      g_autoptr(GPtrArray) zs = g_ptr_array_new ();

      if (!is_cat (st) || c == NULL || c->kind != CS_PROXY_TENSOR || !c->typed || !cat_args (st, c->rank, &list, &dim))
        continue;
      for (guint j = 0; j < list->u.seq.n; j++)
        {
          CsValue *iv = list->u.seq.items[j];
          CsProxy *x = iv->kind == CS_VALUE_PROXY ? iv->u.proxy : NULL;
          CsStmt *dx = x ? g_hash_table_lookup (def, x) : NULL, *dy;
          CsProxy *y = dx ? tensor_arg0 (dx) : NULL, *z;
          GPtrArray *xu = x ? g_hash_table_lookup (uses, x) : NULL, *yu, *zu;
          CsCudaCatPlace *pl;
          guint np = 0;

          if (x == NULL || x->kind != CS_PROXY_TENSOR || !x->typed || x->dtype != c->dtype || x->rank != c->rank
              || !xu || xu->len != 1 || !reshapes (dx) || cs_op_semantic (dx->op)->id == CS_OP_LTORCH_CONTIGUOUS
              || y == NULL
              || (yu = g_hash_table_lookup (uses, y)) == NULL || yu->len != 1
              || (dy = g_hash_table_lookup (def, y)) == NULL)
            break;
          switch (cs_op_semantic (dy->op)->id)
            {
            case CS_OP_LTORCH_PERMUTE: case CS_OP_LTORCH_TRANSPOSE: case CS_OP_PRIM_TRANSPOSE:
              break;
            default:
              dy = NULL;
              break;
            }
          z = dy ? tensor_arg0 (dy) : NULL;
          if (z == NULL || z->rank != y->rank || z->dtype != c->dtype || g_hash_table_contains (p->place_of, z)
              || (zu = g_hash_table_lookup (uses, z)) == NULL || zu->len != 1)
            break;
          pl = g_new0 (CsCudaCatPlace, 1);
          if (transpose_perm (dy, z->rank, pl->perm, &np) != PERM_OK || np != z->rank)
            {
              g_free (pl);
              break;
            }
          for (guint k = 0; k < np; k++)
            if (pl->perm[k] < 0)
              pl->perm[k] += z->rank;
          pl->cat = c;
          pl->x = x;
          pl->y = y;
          pl->off = off;
          pl->dim = dim;
          off += x->shape[dim];
          g_ptr_array_add (places, pl);
          g_ptr_array_add (zs, z);
        }
      if (places->len != list->u.seq.n || off != c->shape[dim])
        continue;
      for (guint j = 0; j < places->len; j++)
        {
          g_hash_table_insert (p->place_of, zs->pdata[j], places->pdata[j]);
          places->pdata[j] = NULL;   /* owned by place_of now */
        }
    }
}

/* ---- bias gradients a dW matmul's epilogue computes ---- */

/* The prim of @def defining @x when it is a convert_element_type, else NULL. */
static CsStmt *
def_convert (GHashTable *def, CsProxy *x)
{
  CsStmt *d = x ? g_hash_table_lookup (def, x) : NULL;

  return d && cs_op_semantic (d->op)->id == CS_OP_PRIM_CONVERT_ELEMENT_TYPE ? d : NULL;
}

/* The tensor proxy argument @i of @st, or NULL. */
static CsProxy *
tensor_arg0 (const CsStmt *st)
{
  CsValue *v = st ? cs_stmt_get_arg (st, 0, NULL) : NULL;

  return v && v->kind == CS_VALUE_PROXY && v->u.proxy->kind == CS_PROXY_TENSOR && v->u.proxy->typed ? v->u.proxy : NULL;
}

/* Fills p->bias_grads from the fusion regions of @t: an output o [N] of a region defined as
 * convert_element_type(sum(convert_element_type(g, f32), (0, ..., r-2)), d) with g [..., N] a
 * region input of dtype d (bf16 or f16) and o read by no prim of the region: a linear's bias
 * gradient, which handle_matmul() lets the weight gradient's matmul compute (its A operand being
 * g reshaped to [M, N] and transposed) when that matmul comes first.  Summing the same d values
 * in f32 and rounding once to d, the epilogue computes what the region would, in another
 * order. */
static void
plan_bias_grads (CsCudaProgram *p, CsTrace *t)
{
  for (guint i = 0; i < t->n_stmts; i++)
    {
      CsStmt *st = t->stmts[i];
      g_autoptr(GPtrArray) prims = NULL;
      g_autoptr(GPtrArray) outs = NULL;
      g_autoptr(GHashTable) def = NULL;
      g_autoptr(GHashTable) read = NULL;

      if (st->kind != CS_STMT_CALL || st->op == NULL || !cs_op_is_fusion (st->op)
          || cs_executor_of_stmt (st) == CS_EXECUTOR_TORCHCOMPILE_XENTROPY)
        continue;
      prims = g_ptr_array_new ();
      for (guint j = 0; j < st->n_subs; j++)
        flatten_prims (st->subs[j], prims);
      def = g_hash_table_new (NULL, NULL);
      read = g_hash_table_new (NULL, NULL);
      for (guint j = 0; j < prims->len; j++)
        {
          g_autoptr(GPtrArray) o = g_ptr_array_new ();
          g_autoptr(GPtrArray) in = g_ptr_array_new ();

          if (((CsStmt *) prims->pdata[j])->kind != CS_STMT_CALL)
            continue;
          cs_stmt_collect_outputs (prims->pdata[j], o);
          for (guint q = 0; q < o->len; q++)
            g_hash_table_insert (def, o->pdata[q], prims->pdata[j]);
          cs_stmt_collect_inputs (prims->pdata[j], in);
          for (guint q = 0; q < in->len; q++)
            g_hash_table_add (read, in->pdata[q]);
        }
      outs = g_ptr_array_new ();
      cs_stmt_collect_outputs (st, outs);
      for (guint j = 0; j < outs->len; j++)
        {
          CsProxy *o = outs->pdata[j], *sm, *c, *g;
          CsStmt *d0 = def_convert (def, o), *d1, *d2;
          int64_t dims[CS_MAX_DIMS];
          guint nd = 0;
          gboolean rows = TRUE;
          CsCudaBiasGrad *bg;

          if (o->kind != CS_PROXY_TENSOR || !o->typed || o->rank != 1 || g_hash_table_contains (read, o)
              || (o->dtype != CS_DTYPE_BF16 && o->dtype != CS_DTYPE_F16)
              || (sm = tensor_arg0 (d0)) == NULL || sm->dtype != CS_DTYPE_F32)
            continue;
          d1 = g_hash_table_lookup (def, sm);
          if (d1 == NULL || cs_op_semantic (d1->op)->id != CS_OP_PRIM_SUM || (c = tensor_arg0 (d1)) == NULL
              || c->dtype != CS_DTYPE_F32 || c->rank < 2
              || !cs_value_get_int_seq (cs_stmt_arg (d1, CS_ARG_DIMS), dims, CS_MAX_DIMS, &nd)
              || nd != c->rank - 1)
            continue;
          for (guint k = 0; k < nd; k++)
            rows &= (dims[k] < 0 ? dims[k] + c->rank : dims[k]) == (int64_t) k;
          d2 = def_convert (def, c);
          g = tensor_arg0 (d2);
          if (!rows || g == NULL || g_hash_table_contains (def, g) || g->dtype != o->dtype || g->rank != c->rank
              || memcmp (g->shape, c->shape, sizeof (int64_t) * c->rank) != 0
              || o->shape[0] != g->shape[g->rank - 1])
            continue;
          bg = g_new0 (CsCudaBiasGrad, 1);
          bg->g = g;
          bg->o = o;
          g_ptr_array_add (p->bias_grads, bg);
        }
    }
}

/* The prims of a region that its outputs @outs need: the others (the prims of a bias gradient
 * a matmul epilogue computed instead) dropped, order kept. */
static GPtrArray *
live_prims (GPtrArray *prims, GPtrArray *outs)
{
  g_autoptr(GHashTable) live = g_hash_table_new (NULL, NULL);
  GPtrArray *keep = g_ptr_array_new ();
  g_autofree gboolean *kept = g_new0 (gboolean, MAX (prims->len, 1));

  for (guint i = 0; i < outs->len; i++)
    g_hash_table_add (live, outs->pdata[i]);
  for (guint i = prims->len; i-- > 0;)
    {
      g_autoptr(GPtrArray) o = g_ptr_array_new ();
      g_autoptr(GPtrArray) in = g_ptr_array_new ();

      cs_stmt_collect_outputs (prims->pdata[i], o);
      for (guint q = 0; q < o->len && !kept[i]; q++)
        kept[i] = g_hash_table_contains (live, o->pdata[q]);
      if (!kept[i])
        continue;
      cs_stmt_collect_inputs (prims->pdata[i], in);
      for (guint q = 0; q < in->len; q++)
        g_hash_table_add (live, in->pdata[q]);
    }
  for (guint i = 0; i < prims->len; i++)
    if (kept[i])
      g_ptr_array_add (keep, prims->pdata[i]);
  return keep;
}

/* p->want_perm for the forward @fwd and the backward @bwd (nullable), and p->bias_grads
 * (unless CASTSCOPE_GEMM_BGRAD=0: the regions keep their column sums). */
static void
plan_layouts (CsCudaProgram *p, CsTrace *fwd, CsTrace *bwd)
{
  g_autoptr(GHashTable) bwd_uses = bwd ? uses_of (bwd, TRUE) : NULL;

  plan_layouts_of (p, fwd, bwd_uses);
  plan_cats (p, fwd);
  if (bwd)
    {
      plan_layouts_of (p, bwd, NULL);
      plan_cats (p, bwd);
    }
  if (g_strcmp0 (g_getenv ("CASTSCOPE_GEMM_BGRAD"), "0") != 0)
    {
      plan_bias_grads (p, fwd);
      if (bwd)
        plan_bias_grads (p, bwd);
    }
}

/* A slot for @z in its piece of the cat's output (p->place_of, plan_cats): that output's slot
 * (made contiguous by the first piece), x the piece's view of it, y = x viewed as y's shape
 * (view_strides), z = y's dims put back by the transpose's permutation.  -1 when y is not a
 * view of x's strides (then z gets a slot of its own). */
static gint
placed_slot (CsCudaProgram *p, const CsProxy *z, const CsCudaCatPlace *pl)
{
  gpointer cv = g_hash_table_lookup (p->cat_slot, pl->cat);
  CsCudaSlot c, s = { 0 };
  int64_t ys[CS_MAX_DIMS];

  if (cv == NULL)
    {
      cv = GUINT_TO_POINTER (cs_cuda_program_new_slot (p, pl->cat->dtype, pl->cat->shape, pl->cat->rank) + 1);
      g_hash_table_insert (p->cat_slot, pl->cat, cv);
    }
  c = *cs_cuda_program_slot (p, GPOINTER_TO_UINT (cv) - 1);
  if (!view_strides (pl->x->shape, c.strides, c.rank, pl->y->shape, pl->y->rank, ys))
    return -1;
  s.dtype = z->dtype;
  s.rank = z->rank;
  if (z->rank > 0)   /* a rank-0 proxy's shape is NULL */
    memcpy (s.shape, z->shape, sizeof (int64_t) * z->rank);
  for (guint k = 0; k < z->rank; k++)
    s.strides[pl->perm[k]] = ys[k];
  s.offset = c.offset + pl->off * c.strides[pl->dim];
  s.buffer = c.buffer;
  return (gint) add_slot (p, &s);
}

guint
cs_cuda_program_new_output_slot (CsCudaProgram *p, const CsProxy *y)
{
  const int64_t *perm = g_hash_table_lookup (p->want_perm, y);
  const CsCudaCatPlace *pl = g_hash_table_lookup (p->place_of, y);
  int64_t pshape[CS_MAX_DIMS], pst[CS_MAX_DIMS];
  CsCudaSlot s = { 0 };
  gint placed;

  if (pl != NULL && (placed = placed_slot (p, y, pl)) >= 0)
    return (guint) placed;
  if (perm == NULL)
    return cs_cuda_program_new_slot (p, y->dtype, y->shape, y->rank);
  /* the transpose's shape, contiguous; dim perm[k] of y gets stride k of it */
  for (guint k = 0; k < y->rank; k++)
    pshape[k] = y->shape[perm[k]];
  contiguous_strides (pshape, y->rank, pst);
  s.dtype = y->dtype;
  s.rank = y->rank;
  if (y->rank > 0)   /* a rank-0 proxy's shape is NULL */
    memcpy (s.shape, y->shape, sizeof (int64_t) * y->rank);
  for (guint k = 0; k < y->rank; k++)
    s.strides[perm[k]] = pst[k];
  s.buffer = cs_cuda_program_new_buffer (p, (gsize) MAX (cs_shape_numel (y->shape, y->rank), 1)
                                         * cs_dtype_size_bytes (y->dtype));
  return add_slot (p, &s);
}

/* ---- constant fills ---- */

/* Moves the constant fills out of the per-step list into p->setup_steps: kernel steps that read
 * no slot (their result depends on nothing: the zeros the attention kernels give the sdpa
 * outputs the executor does not model, RNG state and sequence lengths) and whose every written
 * buffer no other step writes or reads before them and is no program input.  Such a buffer holds
 * the same bytes after every step, so it is filled once when the program is built and pinned
 * (the arena never lends its bytes to another buffer).  A buffer a later step writes too (the
 * zeroed accumulator of a scatter) keeps its fill in every step.  Generated kernels draw no
 * random numbers, so a step without inputs computes the same values each time. */
static void
hoist_constant_fills (CsCudaProgram *p)
{
  g_autofree guint *writers = g_new0 (guint, MAX (p->buffers->len, 1));
  g_autofree gint *first_read = g_new (gint, MAX (p->buffers->len, 1));
  g_autoptr(GPtrArray) keep = g_ptr_array_new_with_free_func (NULL);
  GPtrArray *old = p->steps;

  for (guint b = 0; b < p->buffers->len; b++)
    first_read[b] = -1;
  for (guint i = 0; i < p->input_slots->len; i++)
    writers[cs_cuda_program_slot (p, g_array_index (p->input_slots, guint, i))->buffer] += 2;
  for (guint i = 0; i < old->len; i++)
    {
      CsCudaStep *s = g_ptr_array_index (old, i);

      for (guint j = 0; j < s->writes->len; j++)
        writers[cs_cuda_program_slot (p, g_array_index (s->writes, guint, j))->buffer]++;
      for (guint j = 0; j < s->reads->len; j++)
        {
          guint b = cs_cuda_program_slot (p, g_array_index (s->reads, guint, j))->buffer;

          if (first_read[b] < 0)
            first_read[b] = (gint) i;
        }
    }
  for (guint i = 0; i < old->len; i++)
    {
      CsCudaStep *s = g_ptr_array_index (old, i);
      gboolean hoist = s->kind == CS_CUDA_STEP_KERNEL && s->reads->len == 0 && s->writes->len > 0;

      for (guint j = 0; hoist && j < s->writes->len; j++)
        {
          guint b = cs_cuda_program_slot (p, g_array_index (s->writes, guint, j))->buffer;

          /* a step writing one buffer through two slots counts it twice */
          guint own = 0;

          for (guint q = 0; q < s->writes->len; q++)
            own += cs_cuda_program_slot (p, g_array_index (s->writes, guint, q))->buffer == b;
          hoist = writers[b] == own && (first_read[b] < 0 || first_read[b] > (gint) i);
        }
      if (!hoist)
        {
          g_ptr_array_add (keep, s);
          continue;
        }
      for (guint j = 0; j < s->writes->len; j++)
        g_array_index (p->buffers, CsCudaBuffer,
                       cs_cuda_program_slot (p, g_array_index (s->writes, guint, j))->buffer).pinned = TRUE;
      g_ptr_array_add (p->setup_steps, s);
    }
  /* the steps move, nothing is freed */
  g_ptr_array_set_free_func (old, NULL);
  g_ptr_array_set_size (old, 0);
  for (guint i = 0; i < keep->len; i++)
    g_ptr_array_add (old, g_ptr_array_index (keep, i));
  g_ptr_array_set_free_func (old, cs_cuda_program_step_free);
}

/* ---- memory plan ---- */

static void
liveness (CsCudaProgram *p)
{
  for (guint i = 0; i < p->steps->len; i++)
    {
      CsCudaStep *s = g_ptr_array_index (p->steps, i);
      GArray *lists[2] = { s->reads, s->writes };

      for (guint l = 0; l < 2; l++)
        for (guint j = 0; j < lists[l]->len; j++)
          {
            CsCudaSlot *sl = cs_cuda_program_slot (p, g_array_index (lists[l], guint, j));
            CsCudaBuffer *b = &g_array_index (p->buffers, CsCudaBuffer, sl->buffer);

            if (b->first < 0)
              b->first = (gint) i;
            b->last = (gint) i;
          }
    }
}

typedef struct { gsize off, end; gint first, last; } Placed;

static gint
by_size_desc (gconstpointer a, gconstpointer b, gpointer data)
{
  GArray *bufs = data;
  const CsCudaBuffer *x = &g_array_index (bufs, CsCudaBuffer, *(const guint *) a);
  const CsCudaBuffer *y = &g_array_index (bufs, CsCudaBuffer, *(const guint *) b);

  return x->size_bytes < y->size_bytes ? 1 : x->size_bytes > y->size_bytes ? -1 : 0;
}

/* Streams for the captured step: CASTSCOPE_STREAMS (1 .. CS_CUDA_MAX_STREAMS; 1 = one stream,
 * the launches in trace order), by default CS_CUDA_MAX_STREAMS. */
static guint
graph_streams (void)
{
  return (guint) cs_cuda_env_uint ("CASTSCOPE_STREAMS", 1, CS_CUDA_MAX_STREAMS, CS_CUDA_MAX_STREAMS);
}

/* A buffer smaller than CS_CUDA_LEND_GAP_BYTES takes no bytes of a buffer used fewer than
 * CS_CUDA_LEND_GAP steps before its first use (or after its last): reused at once, they would
 * make its first writer wait for the other buffer's last readers, a wait the graph's streams
 * (cs-cuda-streams.c) need not otherwise make.  Large buffers belong to steps that fill the GPU,
 * which keep their order anyway, and are lent at once. */
#define CS_CUDA_LEND_GAP 4
#define CS_CUDA_LEND_GAP_BYTES ((gsize) 16 << 20)

/* First fit over the live intervals, biggest buffers first; returns the arena size.  The placed
 * buffers are kept sorted by offset, so each placement is one pass over them. */
static gsize
plan_arena (CsCudaProgram *p)
{
  g_autoptr(GArray) order = g_array_new (FALSE, FALSE, sizeof (guint));
  g_autoptr(GArray) placed = g_array_new (FALSE, FALSE, sizeof (Placed));
  gsize total = 0;
  gint n = (gint) p->steps->len;
  gboolean spread = graph_streams () > 1;   /* the graph will use several streams */

  for (guint i = 0; i < p->buffers->len; i++)
    {
      CsCudaBuffer *b = &g_array_index (p->buffers, CsCudaBuffer, i);

      if (b->pinned)
        {
          b->first = 0;
          b->last = MAX (n, 1);
        }
      p->naive_bytes += (b->size_bytes + CS_CUDA_ALIGN - 1) / CS_CUDA_ALIGN * CS_CUDA_ALIGN;
      g_array_append_val (order, i);
    }
  g_array_sort_with_data (order, by_size_desc, p->buffers);
  for (guint k = 0; k < order->len; k++)
    {
      guint i = g_array_index (order, guint, k);
      CsCudaBuffer *b = &g_array_index (p->buffers, CsCudaBuffer, i);
      gsize size = (b->size_bytes + CS_CUDA_ALIGN - 1) / CS_CUDA_ALIGN * CS_CUDA_ALIGN;
      gsize off = 0;
      gint gap = size < CS_CUDA_LEND_GAP_BYTES && spread ? CS_CUDA_LEND_GAP : 0;
      guint at;
      Placed me;

      if (b->first < 0)
        {
          b->offset = 0;   /* never touched: any address will do, nothing reads it */
          continue;
        }
      /* @placed is sorted by offset: the first gap among the buffers live at the same time */
      for (guint j = 0; j < placed->len; j++)
        {
          Placed *q = &g_array_index (placed, Placed, j);

          if (!(q->first <= b->last + gap && b->first <= q->last + gap))
            continue;
          if (off + size <= q->off)
            break;
          off = MAX (off, q->end);
        }
      b->offset = off;
      me.off = off;
      me.end = off + size;
      me.first = b->first;
      me.last = b->last;
      /* insert after every placed buffer at an offset <= off */
      {
        guint lo = 0, hi = placed->len;

        while (lo < hi)
          {
            guint mid = (lo + hi) / 2;

            if (g_array_index (placed, Placed, mid).off <= off)
              lo = mid + 1;
            else
              hi = mid;
          }
        at = lo;
      }
      g_array_insert_val (placed, at, me);
      total = MAX (total, me.end);
    }
  return MAX (total, CS_CUDA_ALIGN);
}

/* ---- caching pool ---- */

/* Device blocks of freed programs, reused by the next program of a similar size (bench and the
 * GUI build many programs in one process; cudaMalloc+cudaFree of 64 MiB costs ~161 us, of
 * several GiB far more: reference/gpu-executor.md 6.2).  Never returned to the driver. */
typedef struct
{
  void  *ptr;     /* device pointer */
  gsize  bytes;   /* block size */
} PoolBlock;

G_LOCK_DEFINE_STATIC (pool);
static GArray *pool_blocks;   /* element-type PoolBlock */

static cudaError_t
pool_alloc (void **ptr, gsize bytes, gsize *got)
{
  gint best = -1;

  G_LOCK (pool);
  if (pool_blocks)
    for (guint i = 0; i < pool_blocks->len; i++)
      {
        PoolBlock *b = &g_array_index (pool_blocks, PoolBlock, i);

        /* Smallest block that fits without wasting more than half of it. */
        if (b->bytes >= bytes && b->bytes <= 2 * bytes
            && (best < 0 || b->bytes < g_array_index (pool_blocks, PoolBlock, best).bytes))
          best = (gint) i;
      }
  if (best >= 0)
    {
      PoolBlock b = g_array_index (pool_blocks, PoolBlock, best);

      g_array_remove_index_fast (pool_blocks, (guint) best);
      G_UNLOCK (pool);
      *ptr = b.ptr;
      *got = b.bytes;
      return cudaSuccess;
    }
  G_UNLOCK (pool);
  *got = bytes;
  return cudaMalloc (ptr, bytes);
}

static void
pool_release (void *ptr, gsize bytes)
{
  PoolBlock b = { ptr, bytes };

  if (ptr == NULL)
    return;
  G_LOCK (pool);
  if (pool_blocks == NULL)
    pool_blocks = g_array_new (FALSE, FALSE, sizeof (PoolBlock));
  g_array_append_val (pool_blocks, b);
  G_UNLOCK (pool);
}

/* ---- building ---- */



void
cs_cuda_program_free (CsCudaProgram *p)
{
  if (p == NULL)
    return;
  if (p->graph)
    cudaGraphExecDestroy (p->graph);
  g_clear_pointer (&p->steps, g_ptr_array_unref);
  g_clear_pointer (&p->setup_steps, g_ptr_array_unref);
  g_clear_pointer (&p->xent_rows, g_ptr_array_unref);
  for (guint i = 0; i < p->n_libraries; i++)
    if (p->libraries[i])
      cudaLibraryUnload ((cudaLibrary_t) p->libraries[i]);
  g_free (p->libraries);
  g_clear_pointer (&p->kernels, g_ptr_array_unref);
  g_clear_pointer (&p->kernel_of, g_hash_table_unref);
  g_clear_pointer (&p->cubins, g_ptr_array_unref);
  pool_release (p->arena, p->arena_alloc_bytes);
  pool_release (p->workspace, p->workspace_bytes);
  for (guint i = 0; i + 1 < CS_CUDA_MAX_STREAMS; i++)
    {
      pool_release (p->side_workspaces[i], p->workspace_bytes);
      if (p->side_streams[i])
        cudaStreamDestroy (p->side_streams[i]);
    }
  pool_release (p->cudnn_workspace, p->cudnn_workspace_alloc);
  g_clear_pointer (&p->cudnn_plans, g_hash_table_unref);
  g_clear_pointer (&p->cudnn_saved, g_ptr_array_unref);
  g_free (p->device_name);
  if (p->lt && !p->lt_shared)
    cublasLtDestroy (p->lt);
  if (p->stream)
    cudaStreamDestroy (p->stream);
  g_array_unref (p->buffers);
  g_array_unref (p->slots);
  if (p->source)
    g_string_free (p->source, TRUE);
  g_hash_table_unref (p->slot_of);
  g_hash_table_unref (p->collection_of);
  g_clear_pointer (&p->want_perm, g_hash_table_unref);
  g_clear_pointer (&p->bias_grads, g_ptr_array_unref);
  g_clear_pointer (&p->epilogue_outs, g_hash_table_unref);
  g_clear_pointer (&p->place_of, g_hash_table_unref);
  g_clear_pointer (&p->cat_slot, g_hash_table_unref);
  g_array_unref (p->inputs);
  g_array_unref (p->input_slots);
  g_array_unref (p->outputs);
  g_array_unref (p->output_slots);
  g_clear_pointer (&p->timings, g_array_unref);
  g_free (p->full_source);
  g_clear_pointer (&p->f64_traces[0], cs_trace_unref);
  g_clear_pointer (&p->f64_traces[1], cs_trace_unref);
  g_free (p->cudnn_consulted);
  if (p->names)
    g_string_chunk_free (p->names);
  g_free (p);
}

/**
 * cs_cuda_program_build:
 * @fwd: the forward trace (`computation`)
 * @bwd: (nullable): the backward trace (`backward_fn`)
 *
 * Steps, arena, NVRTC program, cuBLASLt plans.  Errors: CS_CUDA_ERROR_* (unsupported op with
 * its line, NVRTC log, runtime call).
 * Returns: (transfer full): the program or NULL
 */
static void
kernel_free (gpointer data)
{
  CsCudaKernel *k = data;

  g_free (k->source);
  g_free (k->attrs);
  g_free (k->text);
  g_free (k);
}

/* ---- adjacent kernels in one launch ---- */

/* TRUE when steps @a and @b touch a common buffer that one of them writes. */
static gboolean
steps_conflict (CsCudaProgram *p, const CsCudaStep *a, const CsCudaStep *b)
{
  const GArray *aw[2] = { a->writes, b->writes }, *other[2][2] = { { b->reads, b->writes }, { a->reads, a->writes } };

  for (guint s = 0; s < 2; s++)
    for (guint i = 0; i < aw[s]->len; i++)
      {
        guint wb = cs_cuda_program_slot (p, g_array_index (aw[s], guint, i))->buffer;

        for (guint l = 0; l < 2; l++)
          for (guint j = 0; j < other[s][l]->len; j++)
            if (cs_cuda_program_slot (p, g_array_index (other[s][l], guint, j))->buffer == wb)
              return TRUE;
      }
  return FALSE;
}

/* Appends @body (a kernel body of the code generator) to @out with its parameters a<N> renamed
 * a<N + @shift> and the launch builtins it reads replaced by the names merged_text declares
 * (cs_bx, cs_by, cs_tx, cs_ty) and by the literal grid and block extents of its own launch. */
static void
append_rebased (GString *out, const char *body, guint shift, const CsCudaStep *s)
{
  static const char *const builtin[] = { "blockIdx.x", "blockIdx.y", "threadIdx.x", "threadIdx.y",
                                         "gridDim.x", "gridDim.y", "blockDim.x", "blockDim.y" };
  char lit[4][16];
  const char *with[8] = { "cs_bx", "cs_by", "cs_tx", "cs_ty", lit[0], lit[1], lit[2], lit[3] };

  g_snprintf (lit[0], sizeof lit[0], "(%uu)", s->grid[0]);
  g_snprintf (lit[1], sizeof lit[1], "(%uu)", s->grid[1]);
  g_snprintf (lit[2], sizeof lit[2], "(%uu)", s->block[0]);
  g_snprintf (lit[3], sizeof lit[3], "(%uu)", s->block[1]);
  for (const char *c = body; *c;)
    {
      gboolean left = c == body || !(g_ascii_isalnum (c[-1]) || c[-1] == '_' || c[-1] == '.');
      guint b;

      for (b = 0; b < G_N_ELEMENTS (builtin); b++)
        if (left && strncmp (c, builtin[b], strlen (builtin[b])) == 0)
          break;
      if (b < G_N_ELEMENTS (builtin))
        {
          g_string_append (out, with[b]);
          c += strlen (builtin[b]);
          continue;
        }
      if (left && *c == 'a' && g_ascii_isdigit (c[1]))
        {
          const char *e = c + 1;

          while (g_ascii_isdigit (*e))
            e++;
          if (!(g_ascii_isalnum (*e) || *e == '_'))
            {
              g_string_append_printf (out, "a%u", (guint) g_ascii_strtoull (c + 1, NULL, 10) + shift);
              c = e;
              continue;
            }
        }
      g_string_append_c (out, *c++);
    }
}

/* Bytes of static shared memory @text declares (`__shared__ T name[N]...` with literal
 * extents), or G_MAXSIZE when a declaration is not of that form. */
static gsize
shared_bytes (const char *text)
{
  gsize total = 0;

  for (const char *c = strstr (text, "__shared__ "); c; c = strstr (c + 1, "__shared__ "))
    {
      const char *t = c + strlen ("__shared__ ");
      const char *br = strchr (t, '[');
      const char *semi = strchr (t, ';');
      gsize el, n = 1;

      if (br == NULL || semi == NULL || br > semi)
        return G_MAXSIZE;
      if (g_str_has_prefix (t, "double ") || g_str_has_prefix (t, "long long ")
          || g_str_has_prefix (t, "unsigned long long "))
        el = 8;
      else if (g_str_has_prefix (t, "float ") || g_str_has_prefix (t, "int ") || g_str_has_prefix (t, "unsigned int "))
        el = 4;
      else
        return G_MAXSIZE;
      for (const char *d = br; d < semi && *d == '[';)
        {
          char *end = NULL;
          guint64 v = g_ascii_strtoull (d + 1, &end, 10);

          if (end == d + 1 || *end != ']' || v == 0)
            return G_MAXSIZE;
          n *= v;
          d = end + 1;
        }
      if (strchr (br, ',') && strchr (br, ',') < semi)
        return G_MAXSIZE;   /* several arrays in one declaration */
      total += n * el;
    }
  return total;
}

/* The text (parameters and body) of one kernel that runs kernel @ka's body in the first
 * grid[0] * grid[1] blocks of step @a and @kb's in the next ones of step @b, each with the
 * block and thread indices of its own launch; or NULL when a text is not of the generator's
 * form.  Every block runs one of the two bodies whole, so their barriers and returns stay
 * theirs. */
static char *
merged_text (const CsCudaKernel *ka, const CsCudaStep *a, const CsCudaKernel *kb, const CsCudaStep *b)
{
  const CsCudaKernel *ks[2] = { ka, kb };
  const CsCudaStep *ss[2] = { a, b };
  const char *body[2];
  gsize plen[2];
  GString *t = g_string_new ("(");
  guint na = a->args->len, ga = a->grid[0] * a->grid[1];

  for (guint i = 0; i < 2; i++)
    {
      const char *x = ks[i]->text;
      const char *close = x ? strstr (x, ")\n{\n") : NULL;

      if (x == NULL || x[0] != '(' || close == NULL || !g_str_has_suffix (x, "}\n")
          || strstr (x, "blockIdx.z") || strstr (x, "threadIdx.z") || strstr (x, "gridDim.z")
          || strstr (x, "blockDim.z") || strstr (x, "cs_bx") || strstr (x, "cs_tx"))
        {
          g_string_free (t, TRUE);
          return NULL;
        }
      plen[i] = (gsize) (close - x) - 1;
      body[i] = close + 4;
    }
  g_string_append_len (t, ka->text + 1, (gssize) plen[0]);
  if (plen[0] > 0 && plen[1] > 0)
    g_string_append (t, ", ");
  {
    g_autofree char *pb = g_strndup (kb->text + 1, plen[1]);

    append_rebased (t, pb, na, b);
  }
  g_string_append (t, ")\n{\n");
  for (guint i = 0; i < 2; i++)
    {
      g_autofree char *bd = g_strndup (body[i], strlen (body[i]) - 2);   /* without the final "}\n" */
      const CsCudaStep *s = ss[i];

      g_string_append (t, i == 0 ? "  if (blockIdx.x < " : "  else\n");
      if (i == 0)
        g_string_append_printf (t, "%uu)\n", ga);
      if (i == 0)
        g_string_append (t, "  {\n  const unsigned int cs_b = blockIdx.x;\n");
      else
        g_string_append_printf (t, "  {\n  const unsigned int cs_b = blockIdx.x - %uu;\n", ga);
      g_string_append_printf (t, "  const unsigned int cs_bx = cs_b %% %uu, cs_by = cs_b / %uu;\n", s->grid[0], s->grid[0]);
      g_string_append_printf (t, "  const unsigned int cs_tx = threadIdx.x %% %uu, cs_ty = threadIdx.x / %uu;\n",
                              s->block[0], s->block[0]);
      g_string_append (t, "  (void) cs_bx; (void) cs_by; (void) cs_tx; (void) cs_ty;\n");
      append_rebased (t, bd, i == 0 ? 0 : na, s);
      g_string_append (t, "  }\n");
    }
  g_string_append (t, "}\n");
  return g_string_free (t, FALSE);
}

/* The static shared memory one kernel may declare (CUDA's limit without opting in), bytes. */
#define CS_CUDA_STATIC_SMEM_BYTES 49152

/* Whether mergeable steps @a and @b (their kernels @ka, @kb) may run in one launch as far as
 * their blocks go; sets @attrs to the merged kernel's launch attributes.  Region kernels: 256
 * threads a block, the same launch attributes (or one that adds a minimum of blocks per SM,
 * the row kernels' occupancy floor, which the merged kernel keeps) and at most 12 KiB of
 * shared arrays each (both live in the merged kernel).  Kernels that state their shared
 * memory (the backward attention kernels): the same threads a block and attributes, and
 * both shared footprints together within the static limit. */
static gboolean
blocks_mergeable (const CsCudaStep *a, const CsCudaKernel *ka, const CsCudaStep *b,
                  const CsCudaKernel *kb, const char **attrs)
{
  guint ta = a->block[0] * a->block[1] * a->block[2], tb = b->block[0] * b->block[1] * b->block[2];

  *attrs = NULL;
  if (ta != tb)
    return FALSE;
  if (a->shared_bytes > 0 || b->shared_bytes > 0)
    {
      if (a->shared_bytes == 0 || b->shared_bytes == 0 || g_strcmp0 (ka->attrs, kb->attrs) != 0
          || a->shared_bytes + b->shared_bytes > CS_CUDA_STATIC_SMEM_BYTES)
        return FALSE;
      *attrs = ka->attrs;
      return TRUE;
    }
  if (ta != 256)
    return FALSE;
  if (g_strcmp0 (ka->attrs, kb->attrs) == 0 || g_strcmp0 (kb->attrs, "__launch_bounds__(256)") == 0)
    *attrs = ka->attrs;
  else if (g_strcmp0 (ka->attrs, "__launch_bounds__(256)") == 0)
    *attrs = kb->attrs;
  if (*attrs != NULL && (shared_bytes (ka->text) > 12288 || shared_bytes (kb->text) > 12288))
    *attrs = NULL;
  return *attrs != NULL;
}

/* Puts adjacent independent kernels in one launch: step i and step i + 1, both mergeable
 * kernels (CsCudaStep.mergeable: generated region kernels, the backward attention kernels) of
 * the same trace whose blocks fit together (blocks_mergeable), where neither writes a buffer
 * the other reads or writes, become one step whose kernel runs the first's blocks then the
 * second's (merged_text).  A merged step is not merged again.  Unused kernels are dropped
 * afterwards (renumber_kernels). */
static void
merge_adjacent_kernels (CsCudaProgram *p)
{
  GPtrArray *old = p->steps;
  g_autoptr(GPtrArray) out = g_ptr_array_new ();
  /* what merging two kernels with the same launches gave before (identical layers): "ka kb
   * grids blocks args shared" -> merged kernel + 1, or 0 when they did not fit */
  g_autoptr(GHashTable) merged = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);

  for (guint i = 0; i < old->len; i++)
    {
      CsCudaStep *a = g_ptr_array_index (old, i);
      CsCudaStep *b = i + 1 < old->len ? g_ptr_array_index (old, i + 1) : NULL;
      CsCudaKernel *ka, *kb;
      g_autofree char *text = NULL;
      g_autofree char *mkey = NULL;
      const char *attrs;
      gpointer known;
      guint mk;
      CsCudaStep *m;

      if (b == NULL || a->kind != CS_CUDA_STEP_KERNEL || b->kind != CS_CUDA_STEP_KERNEL || !a->mergeable
          || !b->mergeable || a->backward != b->backward || a->block[2] != 1 || b->block[2] != 1
          || a->grid[2] != 1 || b->grid[2] != 1
          || (guint64) a->grid[0] * a->grid[1] + (guint64) b->grid[0] * b->grid[1] > G_MAXINT32
          || steps_conflict (p, a, b))
        {
          g_ptr_array_add (out, a);
          continue;
        }
      ka = g_ptr_array_index (p->kernels, a->kernel);
      kb = g_ptr_array_index (p->kernels, b->kernel);
      mkey = g_strdup_printf ("%u %u %u %u %u %u %u %u %u %u %u %" G_GSIZE_FORMAT " %" G_GSIZE_FORMAT, a->kernel,
                              b->kernel, a->grid[0], a->grid[1], a->block[0], a->block[1], b->grid[0], b->grid[1],
                              b->block[0], b->block[1], a->args->len, a->shared_bytes, b->shared_bytes);
      if (g_hash_table_lookup_extended (merged, mkey, NULL, &known))
        mk = GPOINTER_TO_UINT (known);
      else
        {
          mk = 0;
          if (blocks_mergeable (a, ka, b, kb, &attrs) && (text = merged_text (ka, a, kb, b)) != NULL)
            mk = cs_cuda_intern_kernel (p, attrs, text) + 1;
          g_hash_table_insert (merged, g_steal_pointer (&mkey), GUINT_TO_POINTER (mk));
        }
      if (mk == 0)
        {
          g_ptr_array_add (out, a);
          continue;
        }
      m = g_new0 (CsCudaStep, 1);
      m->kind = CS_CUDA_STEP_KERNEL;
      m->kind_name = a->kind_name;
      m->label = g_strdup_printf ("%s + %s", a->label, b->label);
      m->backward = a->backward;
      m->bytes = a->bytes + b->bytes;
      m->floor_ms = a->floor_ms + b->floor_ms;
      m->reads = g_array_new (FALSE, FALSE, sizeof (guint));
      m->writes = g_array_new (FALSE, FALSE, sizeof (guint));
      m->args = g_array_new (FALSE, FALSE, sizeof (CsCudaKArg));
      g_array_append_vals (m->reads, a->reads->data, a->reads->len);
      g_array_append_vals (m->reads, b->reads->data, b->reads->len);
      g_array_append_vals (m->writes, a->writes->data, a->writes->len);
      g_array_append_vals (m->writes, b->writes->data, b->writes->len);
      g_array_append_vals (m->args, a->args->data, a->args->len);
      g_array_append_vals (m->args, b->args->data, b->args->len);
      m->grid[0] = a->grid[0] * a->grid[1] + b->grid[0] * b->grid[1];
      m->grid[1] = m->grid[2] = 1;
      m->block[0] = a->block[0] * a->block[1];
      m->block[1] = m->block[2] = 1;
      m->shared_bytes = a->shared_bytes + b->shared_bytes;
      m->kernel = mk - 1;
      g_ptr_array_add (out, m);
      cs_cuda_program_step_free (a);
      cs_cuda_program_step_free (b);
      i++;
    }
  g_ptr_array_set_free_func (old, NULL);
  g_ptr_array_set_size (old, 0);
  for (guint i = 0; i < out->len; i++)
    g_ptr_array_add (old, g_ptr_array_index (out, i));
  g_ptr_array_set_free_func (old, cs_cuda_program_step_free);
}

/* Rebuilds p->kernels and p->source from the kernels the steps (then the constant fills) run,
 * in that order, each interned again (so one kernel per step under CS_CUDA_BUILD_NO_DEDUPE):
 * kernels no step runs any more (the halves of merged launches) are dropped. */
static void
renumber_kernels (CsCudaProgram *p, gboolean dedupe)
{
  GPtrArray *old = p->kernels;
  GPtrArray *lists[2] = { p->steps, p->setup_steps };

  p->kernels = g_ptr_array_new_with_free_func (kernel_free);
  g_string_truncate (p->source, 0);
  g_clear_pointer (&p->kernel_of, g_hash_table_unref);
  if (dedupe)
    p->kernel_of = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  for (guint l = 0; l < 2; l++)
    for (guint i = 0; i < lists[l]->len; i++)
      {
        CsCudaStep *s = g_ptr_array_index (lists[l], i);
        CsCudaKernel *k;

        if (s->kind != CS_CUDA_STEP_KERNEL)
          continue;
        k = g_ptr_array_index (old, s->kernel);
        s->kernel = cs_cuda_intern_kernel (p, k->attrs, k->text);
      }
  p->n_kernels = p->kernels->len;
  g_ptr_array_unref (old);
}

/**
 * cs_cuda_program_reset_state:
 * @p: a built device program
 * @error: a CUDA error
 *
 * Writes the state a program keeps from step to step, as its build does: the zeroed buffers
 * (scatter accumulators, the split column sums' arrival counters) set to 0 and the constant
 * fills (kernels that read nothing, p->setup_steps) run once into their pinned buffers.  A
 * step leaves that state as it found it, so this is needed only after something else wrote
 * the arena (a test's NaN poison).  Synchronises the program's stream.
 *
 * Returns: FALSE with @error set on a CUDA failure
 */
gboolean
cs_cuda_program_reset_state (CsCudaProgram *p, GError **error)
{
  gboolean ok = FALSE;

  for (guint i = 0; i < p->buffers->len; i++)
    {
      CsCudaBuffer *b = &g_array_index (p->buffers, CsCudaBuffer, i);

      if (b->zeroed)
        CS_CU_CHECK (cudaMemsetAsync ((char *) p->arena + b->offset, 0, b->size_bytes, p->stream), error);
    }
  for (guint i = 0; i < p->setup_steps->len; i++)
    {
      CsCudaStep *s = g_ptr_array_index (p->setup_steps, i);
      dim3 grid = { s->grid[0], s->grid[1], s->grid[2] }, block = { s->block[0], s->block[1], s->block[2] };

      CS_CU_CHECK (cudaLaunchKernel (s->func, grid, block, s->arg_ptrs, 0, p->stream), error);
      /* the test hook of launch_steps: a wrong result in what the kernel writes */
      for (guint k = 0; p->break_kernel >= 0 && s->kernel == (guint) p->break_kernel && k < s->writes->len; k++)
        {
          guint w = g_array_index (s->writes, guint, k);
          const CsCudaSlot *ws = cs_cuda_program_slot (p, w);
          gsize n = MIN ((gsize) 64, (gsize) cs_cuda_slot_numel (ws) * cs_dtype_size_bytes (ws->dtype));

          CS_CU_CHECK (cudaMemsetAsync (cs_cuda_program_slot_ptr (p, w), 0x40, n, p->stream), error);
        }
    }
  CS_CU_CHECK (cudaStreamSynchronize (p->stream), error);
  ok = TRUE;
out:
  return ok;
}

/* The unique kernels to CUBINs: cs_cuda_jit_compile_kernels() split over
 * cs_cuda_jit_n_programs() NVRTC programs. */
static gboolean
compile_kernels (CsCudaProgram *p, GError **error)
{
  gint64 t0 = g_get_monotonic_time ();
  gboolean ok;

  ok = cs_cuda_jit_compile_kernels (p->kernels, cs_cuda_jit_n_programs (p->kernels->len), p->cc_major,
                                    p->cc_minor, &p->cubins, &p->cache_hits, error);
  p->nvrtc_ms = (double) (g_get_monotonic_time () - t0) / 1000.0;
  return ok;
}

/* Milliseconds of wall time since @t0 (a g_get_monotonic_time() value). */
static double
ms_since (gint64 t0)
{
  return (double) (g_get_monotonic_time () - t0) / 1000.0;
}

/* Looks up kernel step @s's function in its loaded library and points its argument array at
 * the arena slots it reads and writes. */
static gboolean
step_get_kernel (CsCudaProgram *p, CsCudaStep *s, GError **error)
{
  g_autofree char *name = g_strdup_printf ("k%u", s->kernel);
  CsCudaKernel *kk = g_ptr_array_index (p->kernels, s->kernel);
  cudaKernel_t k = NULL;
  gboolean ok = FALSE;

  CS_CU_CHECK (cudaLibraryGetKernel (&k, (cudaLibrary_t) p->libraries[kk->library], name), error);
  s->func = (void *) k;
  s->arg_vals = g_new0 (void *, MAX (s->args->len, 1));
  s->arg_ptrs = g_new0 (void *, MAX (s->args->len, 1));
  for (guint j = 0; j < s->args->len; j++)
    {
      s->arg_vals[j] = cs_cuda_program_slot_ptr (p, g_array_index (s->args, CsCudaKArg, j).slot);
      s->arg_ptrs[j] = &s->arg_vals[j];
    }
  ok = TRUE;
out:
  return ok;
}

/* A program with its containers made and nothing else: what program_build fills. */
static CsCudaProgram *
program_alloc (const CsPolicy *policy, CsCudaBuildFlags flags)
{
  CsCudaProgram *p = g_new0 (CsCudaProgram, 1);

  p->policy = *policy;
  p->lt_version = cublasLtGetVersion ();
  p->cudnn_saved = g_ptr_array_new_with_free_func (cs_cuda_cudnn_saved_free);
  p->buffers = g_array_new (FALSE, FALSE, sizeof (CsCudaBuffer));
  p->slots = g_array_new (FALSE, FALSE, sizeof (CsCudaSlot));
  p->steps = g_ptr_array_new_with_free_func (cs_cuda_program_step_free);
  p->setup_steps = g_ptr_array_new_with_free_func (cs_cuda_program_step_free);
  p->source = g_string_new ("");
  p->kernels = g_ptr_array_new_with_free_func (kernel_free);
  if (!(flags & CS_CUDA_BUILD_NO_DEDUPE))
    p->kernel_of = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  p->slot_of = g_hash_table_new (NULL, NULL);
  p->collection_of = g_hash_table_new (NULL, NULL);
  p->want_perm = g_hash_table_new_full (NULL, NULL, NULL, g_free);
  p->bias_grads = g_ptr_array_new_with_free_func (g_free);
  p->place_of = g_hash_table_new_full (NULL, NULL, NULL, g_free);
  p->cat_slot = g_hash_table_new (NULL, NULL);
  p->epilogue_outs = g_hash_table_new (NULL, NULL);
  p->inputs = g_array_new (FALSE, FALSE, sizeof (CsCudaTensorInfo));
  p->input_slots = g_array_new (FALSE, FALSE, sizeof (guint));
  p->outputs = g_array_new (FALSE, FALSE, sizeof (CsCudaTensorInfo));
  p->output_slots = g_array_new (FALSE, FALSE, sizeof (guint));
  {
    const char *brk = g_getenv ("CASTSCOPE_TEST_BREAK_KERNEL");

    p->break_kernel = brk != NULL && g_ascii_isdigit (brk[0]) ? (gint) g_ascii_strtoll (brk, NULL, 10) : -1;
  }
  return p;
}

/* Reads the plan of @key from @path into @p (cs_cuda_plan_restore).  On a refused file, one
 * line on stderr, and @p is replaced by a fresh program with the same device fields. */
static gboolean
plan_load (CsCudaProgram **pp, const char *path, const char *key, const CsPolicy *policy,
           CsCudaBuildFlags flags)
{
  CsCudaProgram *p = *pp, *q;
  g_autofree char *why = NULL;
  g_autoptr(GBytes) bytes = NULL;
  char *contents = NULL;
  gsize len = 0;

  if (!g_file_get_contents (path, &contents, &len, NULL))
    return FALSE;   /* none yet */
  bytes = g_bytes_new_take (contents, len);
  if (cs_cuda_plan_restore (p, bytes, key, &why))
    return TRUE;
  g_printerr ("castscope: ignoring the cached plan %s: %s\n", path, why ? why : "refused");
  q = program_alloc (policy, flags);
  q->n_sms = p->n_sms;
  q->cc_major = p->cc_major;
  q->cc_minor = p->cc_minor;
  q->device = p->device;
  q->use_cudnn = p->use_cudnn;
  q->device_name = g_strdup (p->device_name);
  cs_cuda_program_free (p);
  *pp = q;
  return FALSE;
}

/* Writes @p's plan for @key to @path (atomically); a failure is one line on stderr.  Dry
 * builds write it after their codegen phase, device builds at their end (with the matmul
 * algorithms and cuDNN plans chosen). */
static void
plan_save (CsCudaProgram *p, const char *path, const char *key)
{
  g_autoptr(GBytes) bytes = cs_cuda_plan_serialize (p, key);
  g_autofree char *dir = g_path_get_dirname (path);
  g_autoptr(GError) err = NULL;
  gsize len = 0;
  const char *data = g_bytes_get_data (bytes, &len);

  if (g_mkdir_with_parents (dir, 0755) != 0
      || !g_file_set_contents (path, data, (gssize) len, &err))
    g_printerr ("castscope: cannot write the plan cache %s: %s\n", path, err ? err->message : g_strerror (errno));
}

static CsCudaProgram *
program_build (CsTrace *fwd, CsTrace *bwd, const CsPolicy *policy, CsCudaBuildFlags flags, GError **error)
{
  gboolean dry = (flags & CS_CUDA_BUILD_DRY) != 0;
  CsCudaProgram *p = program_alloc (policy, flags);
  g_autoptr(GPtrArray) fin = NULL;
  CsValue *fret = NULL, *bret = NULL, *saved = NULL, *flat_out = NULL, *flat_args = NULL;
  gint64 t0 = g_get_monotonic_time (), t_phase = t0;
  gboolean ok = FALSE;
  g_autofree char *plan_key = NULL;
  g_autofree char *plan_path = NULL;

  if (dry)
    {
      p->n_sms = 132;
      p->cc_major = 9;
      p->cc_minor = 0;
      p->device_name = g_strdup ("dry");
    }
  else
    {
      if (!cs_cuda_init_device (&p->n_sms, &p->cc_major, &p->cc_minor, error))
        goto out;
      CS_CU_CHECK (cudaFree (NULL), error);   /* creates the primary context now */
    }
  p->device_ms = ms_since (t0);
  t_phase = g_get_monotonic_time ();
  if (!dry)
    {
      CS_CU_CHECK (cudaGetDevice (&p->device), error);
      p->device_name = cs_cuda_device_name (p->device);
      p->use_cudnn = TRUE;   /* cs-cuda-cudnn.c loads the library at the first attention */
      /* cuBLASLt's start-up beside the codegen, setup and kernels phases (unless start_up
       * began it before the build); the matmul plans wait for it */
      cs_cuda_lt_startup_begin (p->device);
    }

  /* The whole plan from the disk cache when an earlier build made it (device builds; dry
   * ones when asked). */
  if (!(flags & CS_CUDA_BUILD_NO_DEDUPE) && (!dry || (flags & CS_CUDA_BUILD_PLAN_CACHE)))
    {
      plan_key = cs_cuda_plan_key (fwd, bwd, policy, p, flags);
      plan_path = cs_cuda_plan_path (plan_key);
    }
  if (plan_path != NULL && plan_load (&p, plan_path, plan_key, policy, flags))
    {
      p->plan_cached = TRUE;
      if (!dry)
        {
          /* the start-up thread warms cuBLASLt's heuristics up only when a GEMM will ask them */
          gboolean need = FALSE;

          for (guint i = 0; i < p->steps->len && !need; i++)
            {
              CsCudaStep *s = g_ptr_array_index (p->steps, i);

              need = s->kind == CS_CUDA_STEP_GEMM && !cs_cuda_gemm_has_stored_algo (s->gemm);
            }
          cs_cuda_lt_startup_want_heuristics (need);
        }
      goto planned;
    }
  if (!dry)
    cs_cuda_lt_startup_want_heuristics (TRUE);

  /* Forward: tensor parameters are the inputs. */
  fin = cs_trace_dup_inputs (fwd);
  for (guint i = 0; i < fin->len; i++)
    {
      CsProxy *x = g_ptr_array_index (fin, i);
      guint slot;

      if (x->kind != CS_PROXY_TENSOR)
        continue;
      if (!x->typed || !x->shape)
        {
          fail (error, CS_CUDA_ERROR_UNSUPPORTED, NULL, "input %s has no tensor type", x->name);
          goto out;
        }
      slot = cs_cuda_program_new_slot (p, x->dtype, x->shape, x->rank);
      cs_cuda_program_bind (p, x, slot);
      add_io (p, p->inputs, p->input_slots, x, slot, FALSE, -1);
    }
  plan_layouts (p, fwd, bwd);
  p->backward_active = FALSE;
  if (!walk (p, fwd, NULL, &fret, error))
    goto out;
  if (fret == NULL)
    {
      fail (error, CS_CUDA_ERROR_UNSUPPORTED, NULL, "the forward trace has no return statement");
      goto out;
    }
  if ((fret->kind == CS_VALUE_TUPLE) && fret->u.seq.n == 2 && fret->u.seq.items[0]->kind == CS_VALUE_DICT)
    {
      CsValue *d = fret->u.seq.items[0];

      saved = fret->u.seq.items[1];
      flat_out = dict_get (d, "flat_output");
      if (!flat_out)
        flat_out = dict_get (d, "output");
      flat_args = dict_get (d, "flat_args");
    }
  else if (fret->kind == CS_VALUE_DICT)
    {
      flat_out = dict_get (fret, "flat_output");
      if (!flat_out)
        flat_out = dict_get (fret, "output");
    }
  else
    flat_out = fret;
  {
    g_autoptr(GPtrArray) ps = g_ptr_array_new ();

    if (flat_out)
      cs_value_collect_proxies (flat_out, ps);
    for (guint i = 0; i < ps->len; i++)
      {
        CsProxy *o = g_ptr_array_index (ps, i);
        gint s = cs_cuda_program_lookup (p, o);

        if (o->kind != CS_PROXY_TENSOR && s < 0)
          continue;
        if (s < 0)
          {
            fail (error, CS_CUDA_ERROR_UNSUPPORTED, NULL, "forward output %s is never computed", o->name);
            goto out;
          }
        add_io (p, p->outputs, p->output_slots, o, (guint) s, FALSE, -1);
      }
  }

  /* Backward: (saved_for_backward, cotangents). */
  if (bwd)
    {
      g_autoptr(GPtrArray) bin = cs_trace_dup_inputs (bwd);
      CsProxy *cot = NULL;

      p->backward_active = TRUE;
      if (bin->len == 2 && saved != NULL)
        {
          g_hash_table_insert (p->collection_of, g_ptr_array_index (bin, 0), saved);
          cot = g_ptr_array_index (bin, 1);
        }
      else if (saved == NULL && flat_out != NULL)
        {
          if (!bind_saved_by_name (p, flat_out, bin, error))
            goto out;
        }
      else
        {
          fail (error, CS_CUDA_ERROR_UNSUPPORTED, NULL,
                "the backward trace must take (saved_for_backward, cotangents) and the forward must "
                "return saved_for_backward, or (torch.compile) take the forward's returned tensors "
                "by name and tangents_N");
          goto out;
        }
      if (!walk (p, bwd, cot, &bret, error))
        goto out;
      if (bret)
        {
          CsValue *items = bret;
          guint n = (items->kind == CS_VALUE_TUPLE || items->kind == CS_VALUE_LIST) ? items->u.seq.n : 1;

          for (guint i = 0; i < n; i++)
            {
              CsValue *v = n == 1 && items->kind != CS_VALUE_TUPLE && items->kind != CS_VALUE_LIST ? items : items->u.seq.items[i];
              gint s;
              int grad_of = -1;

              if (v->kind != CS_VALUE_PROXY || v->u.proxy->kind != CS_PROXY_TENSOR)
                continue;
              s = cs_cuda_program_lookup (p, v->u.proxy);
              if (s < 0)
                {
                  fail (error, CS_CUDA_ERROR_UNSUPPORTED, NULL, "gradient %s is never computed", v->u.proxy->name);
                  goto out;
                }
              if (flat_args && (flat_args->kind == CS_VALUE_LIST || flat_args->kind == CS_VALUE_TUPLE)
                  && i < flat_args->u.seq.n && flat_args->u.seq.items[i]->kind == CS_VALUE_PROXY)
                {
                  CsProxy *arg = flat_args->u.seq.items[i]->u.proxy;

                  for (guint q = 0; q < p->inputs->len; q++)
                    if (g_array_index (p->input_slots, guint, q) == (guint) cs_cuda_program_lookup (p, arg))
                      grad_of = (int) q;
                }
              else if (i < p->inputs->len)
                grad_of = (int) i;
              add_io (p, p->outputs, p->output_slots, v->u.proxy, (guint) s, TRUE, grad_of);
            }
        }
    }

  /* Constant fills run once, adjacent independent kernels share a launch, then the memory
   * plan, one allocation. */
  hoist_constant_fills (p);
  merge_adjacent_kernels (p);
  renumber_kernels (p, !(flags & CS_CUDA_BUILD_NO_DEDUPE));
  liveness (p);
  p->arena_bytes = plan_arena (p);
  cs_cuda_program_schedule (p, graph_streams ());
  if (plan_path != NULL && dry)
    plan_save (p, plan_path, plan_key);
planned:
  g_clear_pointer (&p->kernel_of, g_hash_table_unref);   /* the build's lookup table only */
  p->full_source = g_strconcat (cs_cuda_jit_preamble (), p->source->str, NULL);
  p->codegen_ms = ms_since (t_phase);
  t_phase = g_get_monotonic_time ();
  if (dry)
    {
      if ((flags & CS_CUDA_BUILD_COMPILE) && !compile_kernels (p, error))
        goto out;
      p->kernels_ms = ms_since (t_phase);
      p->compile_ms = ms_since (t0);
      ok = TRUE;
      goto out;
    }
  CS_CU_CHECK (cudaStreamCreateWithFlags (&p->stream, cudaStreamNonBlocking), error);
  CS_CU_CHECK (pool_alloc (&p->arena, p->arena_bytes, &p->arena_alloc_bytes), error);
  CS_CU_CHECK (pool_alloc (&p->workspace, 32u << 20, &p->workspace_bytes), error);
  for (guint i = 1; i < p->n_streams; i++)
    {
      gsize got = 0;

      CS_CU_CHECK (cudaStreamCreateWithFlags (&p->side_streams[i - 1], cudaStreamNonBlocking), error);
      CS_CU_CHECK (pool_alloc (&p->side_workspaces[i - 1], p->workspace_bytes, &got), error);
    }
  p->setup_ms = ms_since (t_phase);
  t_phase = g_get_monotonic_time ();

  /* Kernels: the unique ones, compiled as a few NVRTC programs at once, each loaded as a
   * library. */
  if (p->n_kernels > 0)
    {
      if (!compile_kernels (p, error))
        goto out;
      p->n_libraries = p->cubins->len;
      p->libraries = g_new0 (void *, p->n_libraries);
      for (guint i = 0; i < p->n_libraries; i++)
        if (!cs_cuda_jit_load (g_ptr_array_index (p->cubins, i), &p->libraries[i], error))
          goto out;
      g_clear_pointer (&p->cubins, g_ptr_array_unref);
    }
  for (guint i = 0; i < p->steps->len; i++)
    if (((CsCudaStep *) g_ptr_array_index (p->steps, i))->kind == CS_CUDA_STEP_KERNEL
        && !step_get_kernel (p, g_ptr_array_index (p->steps, i), error))
      goto out;
  for (guint i = 0; i < p->setup_steps->len; i++)
    if (!step_get_kernel (p, g_ptr_array_index (p->setup_steps, i), error))
      goto out;
  if (!cs_cuda_program_reset_state (p, error))
    goto out;
  p->kernels_ms = ms_since (t_phase);
  t_phase = g_get_monotonic_time ();
  {
    gint64 lt_begin = 0;

    p->lt = cs_cuda_lt_startup_join (p->device, &p->lt_startup_ms, &p->lt_wait_ms, &lt_begin);
    p->lt_shared = p->lt != NULL;
    p->lt_lead_ms = lt_begin < t0 ? (double) (t0 - lt_begin) / 1000.0 : 0.0;
    if (p->lt == NULL)
      CS_CUBLAS_CHECK (cublasLtCreate (&p->lt), error);
  }
  {
    g_autoptr(GHashTable) plans = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);

    for (guint i = 0; i < p->steps->len; i++)
      {
        CsCudaStep *s = g_ptr_array_index (p->steps, i);

        if (s->kind != CS_CUDA_STEP_GEMM)
          continue;
        if (!cs_cuda_gemm_plan (p, s->gemm, plans, error))
          goto out;
        if (p->first_plan_ms == 0)
          p->first_plan_ms = ms_since (t_phase);
      }
    p->n_gemm_plans = g_hash_table_size (plans);
  }
  /* cuDNN steps: their plans were built with the steps; one workspace, then the pointers */
  if (p->cudnn_workspace_bytes > 0)
    CS_CU_CHECK (pool_alloc (&p->cudnn_workspace, p->cudnn_workspace_bytes, &p->cudnn_workspace_alloc), error);
  for (guint i = 0; i < p->steps->len; i++)
    {
      CsCudaStep *s = g_ptr_array_index (p->steps, i);

      if (s->kind == CS_CUDA_STEP_CUDNN && !cs_cuda_cudnn_bind (p, s->cudnn, error))
        goto out;
    }
  p->plans_ms = ms_since (t_phase);
  p->compile_ms = ms_since (t0);
  /* the plan with what the device chose (matmul algorithms, cuDNN plans), when it was made
   * now or a part of the file could not be used; not timed as a phase of the build */
  if (plan_path != NULL && (!p->plan_cached || p->plan_stale))
    plan_save (p, plan_path, plan_key);
  ok = TRUE;

out:
  if (!ok)
    {
      cs_cuda_program_free (p);
      return NULL;
    }
  return p;
}

CsCudaProgram *
cs_cuda_program_build (CsTrace *fwd, CsTrace *bwd, const CsPolicy *policy, GError **error)
{
  return program_build (fwd, bwd, policy, CS_CUDA_BUILD_DEVICE, error);
}

/**
 * cs_cuda_program_generate:
 *
 * Everything cs_cuda_program_build() does that needs no device: the steps, the memory plan and
 * the generated source (for sm_90 with 132 SMs).  For tests on machines without a GPU; the
 * result may only be inspected and freed.
 * Returns: (transfer full): the program or NULL with @error set
 */
CsCudaProgram *
cs_cuda_program_generate (CsTrace *fwd, CsTrace *bwd, const CsPolicy *policy, GError **error)
{
  return program_build (fwd, bwd, policy, CS_CUDA_BUILD_DRY, error);
}

/**
 * cs_cuda_program_build_full:
 * @flags: CS_CUDA_BUILD_DEVICE (= cs_cuda_program_build), CS_CUDA_BUILD_DRY (=
 *   cs_cuda_program_generate), DRY | COMPILE (also the NVRTC compile, CUBINs kept in p->cubins:
 *   what a device build does before it loads them), NO_DEDUPE (tests: every step its own kernel)
 *
 * Errors: as cs_cuda_program_build().
 * Returns: (transfer full): the program or NULL with @error set
 */
CsCudaProgram *
cs_cuda_program_build_full (CsTrace *fwd, CsTrace *bwd, const CsPolicy *policy, CsCudaBuildFlags flags,
                            GError **error)
{
  return program_build (fwd, bwd, policy, flags, error);
}

/* ---- running ---- */

cudaStream_t
cs_cuda_program_stream (CsCudaProgram *p, guint i)
{
  return i == 0 ? p->stream : p->side_streams[i - 1];
}

/* Launches step @s on stream @si (0: p->stream; a kernel, a cuDNN call or a cuBLASLt matmul).
 * Errors: the CUDA or cuBLASLt error of the launch, prefixed with the step's label for the
 * libraries' steps. */
static gboolean
launch_step (CsCudaProgram *p, CsCudaStep *s, guint si, GError **error)
{
  cudaStream_t stream = cs_cuda_program_stream (p, si);
  gboolean ok = FALSE;

  if (s->kind == CS_CUDA_STEP_KERNEL)
    {
      dim3 grid = { s->grid[0], s->grid[1], s->grid[2] };
      dim3 block = { s->block[0], s->block[1], s->block[2] };

      CS_CU_CHECK (cudaLaunchKernel (s->func, grid, block, s->arg_ptrs, 0, stream), error);
      if (p->break_kernel >= 0 && s->kernel == (guint) p->break_kernel && s->writes->len > 0)
        {
          /* test hook: a wrong result in every tensor the kernel writes (the first 64
             bytes set to 0x40: 3.0 in bf16 and f16, 3.004 in f32) */
          for (guint k = 0; k < s->writes->len; k++)
            {
              guint w = g_array_index (s->writes, guint, k);
              const CsCudaSlot *ws = cs_cuda_program_slot (p, w);
              gsize nb = MIN ((gsize) 64, (gsize) cs_cuda_slot_numel (ws) * cs_dtype_size_bytes (ws->dtype));

              CS_CU_CHECK (cudaMemsetAsync (cs_cuda_program_slot_ptr (p, w), 0x40, nb, stream), error);
            }
        }
    }
  else if (s->kind == CS_CUDA_STEP_CUDNN)
    {
      if (!cs_cuda_cudnn_run (p, s->cudnn, error))
        {
          g_prefix_error (error, "%s: ", s->label);
          return FALSE;
        }
    }
  else if (!cs_cuda_gemm_run (p, s->gemm, si, error))
    {
      g_prefix_error (error, "%s: ", s->label);
      return FALSE;
    }
  ok = TRUE;
out:
  return ok;
}

/* Launches every step.  @events (may be NULL): one recorded before each step and one after the
 * last, for per-step timing.  @spread (NULL, or n_steps + CS_CUDA_MAX_STREAMS zeroed entries
 * the caller destroys with destroy_events() once the capture has ended): the steps on the
 * schedule's streams (cs_cuda_program_schedule), forked from p->stream and joined back into it,
 * for the graph capture; NULL: every step on p->stream in order.  Errors: the CUDA or cuBLASLt
 * error of a launch. */
static gboolean
launch_steps (CsCudaProgram *p, cudaEvent_t *events, cudaEvent_t *spread, GError **error)
{
  guint n = p->steps->len;
  gboolean ok = FALSE;

  if (spread)
    {
      cudaEvent_t *fork = &spread[n];

      CS_CU_CHECK (cudaEventCreateWithFlags (fork, cudaEventDisableTiming), error);
      CS_CU_CHECK (cudaEventRecord (*fork, p->stream), error);
      for (guint k = 1; k < p->n_streams; k++)
        CS_CU_CHECK (cudaStreamWaitEvent (p->side_streams[k - 1], *fork, 0), error);
    }
  for (guint i = 0; i < n; i++)
    {
      CsCudaStep *s = g_ptr_array_index (p->steps, i);
      guint si = spread ? s->stream : 0;
      cudaStream_t stream = cs_cuda_program_stream (p, si);

      if (events)
        CS_CU_CHECK (cudaEventRecord (events[i], p->stream), error);
      for (guint w = 0; spread && w < s->n_waits; w++)
        CS_CU_CHECK (cudaStreamWaitEvent (stream, spread[s->waits[w]], 0), error);
      if (!launch_step (p, s, si, error))
        goto out;
      if (spread && s->signals)
        {
          CS_CU_CHECK (cudaEventCreateWithFlags (&spread[i], cudaEventDisableTiming), error);
          CS_CU_CHECK (cudaEventRecord (spread[i], stream), error);
        }
    }
  for (guint k = 1; spread && k < p->n_streams; k++)
    {
      cudaEvent_t *join = &spread[n + k];

      CS_CU_CHECK (cudaEventCreateWithFlags (join, cudaEventDisableTiming), error);
      CS_CU_CHECK (cudaEventRecord (*join, p->side_streams[k - 1]), error);
      CS_CU_CHECK (cudaStreamWaitEvent (p->stream, *join, 0), error);
    }
  if (events)
    CS_CU_CHECK (cudaEventRecord (events[n], p->stream), error);
  ok = TRUE;
out:
  return ok;
}

static void
destroy_events (cudaEvent_t *ev, guint n)
{
  for (guint i = 0; ev && i < n; i++)
    if (ev[i])
      cudaEventDestroy (ev[i]);
  g_free (ev);
}

static gboolean
ensure_graph (CsCudaProgram *p, GError **error)
{
  cudaGraph_t graph = NULL;
  guint n_ev = p->steps->len + CS_CUDA_MAX_STREAMS;
  cudaEvent_t *ev = p->n_streams > 1 ? g_new0 (cudaEvent_t, n_ev) : NULL;
  gboolean ok = FALSE;

  if (p->graph)
    {
      g_free (ev);
      return TRUE;
    }
  CS_CU_CHECK (cudaStreamBeginCapture (p->stream, cudaStreamCaptureModeThreadLocal), error);
  if (!launch_steps (p, NULL, ev, error))
    {
      cudaStreamEndCapture (p->stream, &graph);
      goto out;
    }
  CS_CU_CHECK (cudaStreamEndCapture (p->stream, &graph), error);
  CS_CU_CHECK (cudaGraphInstantiate (&p->graph, graph, 0), error);
  ok = TRUE;
out:
  if (graph)
    cudaGraphDestroy (graph);
  destroy_events (ev, n_ev);
  return ok;
}

gboolean
cs_cuda_program_run (CsCudaProgram *p, gboolean use_graph, GError **error)
{
  gboolean ok = FALSE;

  if (use_graph)
    {
      if (!ensure_graph (p, error))
        return FALSE;
      CS_CU_CHECK (cudaGraphLaunch (p->graph, p->stream), error);
    }
  else if (!launch_steps (p, NULL, NULL, error))
    return FALSE;
  CS_CU_CHECK (cudaStreamSynchronize (p->stream), error);
  CS_CU_CHECK (cudaGetLastError (), error);
  ok = TRUE;
out:
  return ok;
}

gboolean
cs_cuda_program_set_input (CsCudaProgram *p, guint index, const void *host, gsize n_bytes, GError **error)
{
  guint slot;
  CsCudaSlot *s;
  gboolean ok = FALSE;

  if (index >= p->inputs->len)
    return fail (error, CS_CUDA_ERROR_INPUT, NULL, "input index %u out of range (%u inputs)", index, p->inputs->len);
  slot = g_array_index (p->input_slots, guint, index);
  s = cs_cuda_program_slot (p, slot);
  if (n_bytes != cs_cuda_slot_numel (s) * cs_dtype_size_bytes (s->dtype))
    return fail (error, CS_CUDA_ERROR_INPUT, NULL, "input %u: %zu bytes given, %zu expected", index, n_bytes,
                 cs_cuda_slot_numel (s) * cs_dtype_size_bytes (s->dtype));
  CS_CU_CHECK (cudaMemcpy (cs_cuda_program_slot_ptr (p, slot), host, n_bytes, cudaMemcpyHostToDevice), error);
  ok = TRUE;
out:
  return ok;
}

gboolean
cs_cuda_program_get_output (CsCudaProgram *p, guint index, void *host, gsize n_bytes, GError **error)
{
  guint slot;
  CsCudaSlot *s;
  gsize es, n;
  gboolean ok = FALSE;
  g_autofree char *span = NULL;

  if (index >= p->outputs->len)
    return fail (error, CS_CUDA_ERROR_INPUT, NULL, "output index %u out of range (%u outputs)", index, p->outputs->len);
  slot = g_array_index (p->output_slots, guint, index);
  s = cs_cuda_program_slot (p, slot);
  es = cs_dtype_size_bytes (s->dtype);
  n = cs_cuda_slot_numel (s);
  if (n_bytes != n * es)
    return fail (error, CS_CUDA_ERROR_INPUT, NULL, "output %u: %zu bytes given, %zu expected", index, n_bytes, n * es);
  if (cs_cuda_slot_is_contiguous (s))
    {
      CS_CU_CHECK (cudaMemcpy (host, cs_cuda_program_slot_ptr (p, slot), n_bytes, cudaMemcpyDeviceToHost), error);
    }
  else
    {
      /* A strided view (e.g. a permute returned as an output): gather on the host. */
      int64_t max_off = 0;
      int64_t idx[CS_MAX_DIMS] = { 0 };

      for (guint j = 0; j < s->rank; j++)
        max_off += (s->shape[j] - 1) * s->strides[j];
      span = g_malloc ((gsize) (max_off + 1) * es);
      CS_CU_CHECK (cudaMemcpy (span, cs_cuda_program_slot_ptr (p, slot), (gsize) (max_off + 1) * es,
                               cudaMemcpyDeviceToHost), error);
      for (gsize i = 0; i < n; i++)
        {
          int64_t off = 0;

          for (guint j = 0; j < s->rank; j++)
            off += idx[j] * s->strides[j];
          memcpy ((char *) host + i * es, span + off * es, es);
          for (guint j = s->rank; j-- > 0;)
            {
              if (++idx[j] < s->shape[j])
                break;
              idx[j] = 0;
            }
        }
    }
  ok = TRUE;
out:
  return ok;
}

static int
cmp_double (gconstpointer a, gconstpointer b)
{
  double x = *(const double *) a, y = *(const double *) b;

  return x < y ? -1 : x > y ? 1 : 0;
}

static double
median (double *v, guint n)
{
  qsort (v, n, sizeof (double), (int (*) (const void *, const void *)) cmp_double);
  return n ? v[n / 2] : 0.0;
}

/* CASTSCOPE_STEP_REPS (1-1000; unset or 0: off): how many repeats of each step the per-step
 * graph timing (time_alone) captures. */
static guint
step_reps (void)
{
  const char *e = g_getenv ("CASTSCOPE_STEP_REPS");
  int r = e ? atoi (e) : 0;

  return r >= 1 && r <= 1000 ? (guint) r : 0;
}

/* What one repeat of a capture_reps() graph runs after its flush: step @step when non-NULL,
 * else a device-to-device copy of @copy_bytes from @copy_src to @copy_dst when @copy_bytes > 0,
 * else nothing. */
typedef struct
{
  CsCudaStep *step;            /* the step to repeat, or NULL */
  void       *copy_dst;        /* device buffer of at least copy_bytes; used when step is NULL */
  const void *copy_src;        /* device buffer of at least copy_bytes */
  size_t      copy_bytes;      /* bytes a copy repeat moves each way (reads and writes as many) */
} RepWork;

/* Captures into @exec a graph of @reps repeats of: a memset of @flush_bytes at @flush (when
 * @flush_bytes > 0), then @w's step or copy.  Errors: the CUDA error of the capture. */
static gboolean
capture_reps (CsCudaProgram *p, const RepWork *w, guint reps, void *flush, size_t flush_bytes,
              cudaGraphExec_t *exec, GError **error)
{
  cudaGraph_t graph = NULL;
  gboolean ok = FALSE;

  *exec = NULL;
  CS_CU_CHECK (cudaStreamBeginCapture (p->stream, cudaStreamCaptureModeThreadLocal), error);
  for (guint r = 0; r < reps; r++)
    {
      cudaError_t e = flush_bytes > 0 ? cudaMemsetAsync (flush, (int) (r & 0xff), flush_bytes, p->stream) : cudaSuccess;

      if (e == cudaSuccess && w->step == NULL && w->copy_bytes > 0)
        e = cudaMemcpyAsync (w->copy_dst, w->copy_src, w->copy_bytes, cudaMemcpyDeviceToDevice, p->stream);
      if (e != cudaSuccess)
        g_set_error (error, CS_CUDA_ERROR, CS_CUDA_ERROR_RUNTIME, "%s failed: %s (%s)",
                     flush_bytes > 0 ? "cudaMemsetAsync or cudaMemcpyAsync" : "cudaMemcpyAsync",
                     cudaGetErrorString (e), cudaGetErrorName (e));
      if (e != cudaSuccess || (w->step && !launch_step (p, w->step, 0, error)))
        {
          cudaStreamEndCapture (p->stream, &graph);
          goto out;
        }
    }
  CS_CU_CHECK (cudaStreamEndCapture (p->stream, &graph), error);
  CS_CU_CHECK (cudaGetLastError (), error);
  CS_CU_CHECK (cudaGraphInstantiate (exec, graph, 0), error);
  ok = TRUE;
out:
  if (graph)
    cudaGraphDestroy (graph);
  return ok;
}

/* The median over @iters replays (after one untimed replay) of @exec, ms.  Errors: CUDA's. */
static gboolean
replay_median (CsCudaProgram *p, cudaGraphExec_t exec, guint iters, double *ms_out, GError **error)
{
  g_autofree double *v = g_new0 (double, iters);
  cudaEvent_t a = NULL, b = NULL;
  gboolean ok = FALSE;

  CS_CU_CHECK (cudaEventCreate (&a), error);
  CS_CU_CHECK (cudaEventCreate (&b), error);
  CS_CU_CHECK (cudaGraphLaunch (exec, p->stream), error);
  for (guint it = 0; it < iters; it++)
    {
      float ms = 0;

      CS_CU_CHECK (cudaEventRecord (a, p->stream), error);
      CS_CU_CHECK (cudaGraphLaunch (exec, p->stream), error);
      CS_CU_CHECK (cudaEventRecord (b, p->stream), error);
      CS_CU_CHECK (cudaEventSynchronize (b), error);
      CS_CU_CHECK (cudaEventElapsedTime (&ms, a, b), error);
      v[it] = ms;
    }
  *ms_out = median (v, iters);
  ok = TRUE;
out:
  if (a)
    cudaEventDestroy (a);
  if (b)
    cudaEventDestroy (b);
  return ok;
}

/* Times @w alone and warm as time_alone() describes: *@alone_ms and *@warm_ms, ms a repeat;
 * @flush_ms is the replay of the @flush memsets' own graph.  Errors: CUDA's. */
static gboolean
time_work (CsCudaProgram *p, const RepWork *w, guint reps, guint iters, void *flush, size_t flush_bytes,
           double flush_ms, double *alone_ms, double *warm_ms, GError **error)
{
  cudaGraphExec_t ex = NULL;
  double ms = 0;

  if (!capture_reps (p, w, reps, NULL, 0, &ex, error) || !replay_median (p, ex, iters, &ms, error))
    goto fail;
  *warm_ms = ms / reps;
  cudaGraphExecDestroy (ex);
  if (!capture_reps (p, w, reps, flush, flush_bytes, &ex, error) || !replay_median (p, ex, iters, &ms, error))
    goto fail;
  *alone_ms = MAX (ms - flush_ms, 0.0) / reps;
  cudaGraphExecDestroy (ex);
  return TRUE;
fail:
  if (ex)
    cudaGraphExecDestroy (ex);
  return FALSE;
}

/* The per-step graph timing CASTSCOPE_STEP_REPS=@reps asks for: for each step alone, a graph of
 * @reps back-to-back repeats (its warm_ms: the median replay over @reps, inputs left in L2 by
 * the repeat before when they fit), and a graph of @reps repeats each after a memset of twice
 * the L2 (its alone_ms: that replay less a graph of the memsets alone, over @reps; the memset
 * leaves L2 full of dirty lines, as a producer's output would).  Both without the event between
 * steps of the step table; the gap between a graph's launches stays in.  For each memory-bound
 * step (no flops, some bytes) the same two graphs of a cudaMemcpyAsync device-to-device copy
 * that reads and writes half the step's bytes each (copy_alone_ms, copy_warm_ms): the copy
 * ceiling at that size under the same protocol.  Fills the fields of p->timings, then runs the
 * program once more so that its outputs are a step's again (a step repeated alone may have
 * overwritten a buffer another step reads).  Errors: CUDA's, or a step's launch error. */
static gboolean
time_alone (CsCudaProgram *p, guint reps, guint iters, GError **error)
{
  int dev = 0, l2 = 0;
  void *flush = NULL, *copy_a = NULL, *copy_b = NULL;
  size_t fb, copy_max = 0;
  cudaGraphExec_t fx = NULL;
  double f_ms = 0;
  RepWork none = { 0 };
  gboolean ok = FALSE;

  CS_CU_CHECK (cudaGetDevice (&dev), error);
  CS_CU_CHECK (cudaDeviceGetAttribute (&l2, cudaDevAttrL2CacheSize, dev), error);
  fb = (size_t) MAX (l2, 1 << 20) * 2;
  CS_CU_CHECK (cudaMalloc (&flush, fb), error);
  for (guint i = 0; i < p->timings->len; i++)
    {
      CsCudaStepTiming *st = &g_array_index (p->timings, CsCudaStepTiming, i);

      if (st->flops == 0 && st->bytes > 0)
        copy_max = MAX (copy_max, (size_t) (st->bytes / 2));
    }
  if (copy_max > 0)
    {
      CS_CU_CHECK (cudaMalloc (&copy_a, copy_max), error);
      CS_CU_CHECK (cudaMalloc (&copy_b, copy_max), error);
      CS_CU_CHECK (cudaMemset (copy_a, 0, copy_max), error);
    }
  if (!capture_reps (p, &none, reps, flush, fb, &fx, error) || !replay_median (p, fx, iters, &f_ms, error))
    goto out;
  for (guint i = 0; i < p->steps->len; i++)
    {
      CsCudaStepTiming *st = &g_array_index (p->timings, CsCudaStepTiming, i);
      RepWork w = { .step = g_ptr_array_index (p->steps, i) };
      RepWork copy = { .copy_dst = copy_b, .copy_src = copy_a, .copy_bytes = (size_t) (st->bytes / 2) };

      if (!time_work (p, &w, reps, iters, flush, fb, f_ms, &st->alone_ms, &st->warm_ms, error))
        goto out;
      if (st->flops == 0 && copy.copy_bytes > 0
          && !time_work (p, &copy, reps, iters, flush, fb, f_ms, &st->copy_alone_ms, &st->copy_warm_ms, error))
        goto out;
    }
  if (!cs_cuda_program_run (p, FALSE, error))
    goto out;
  ok = TRUE;
out:
  if (fx)
    cudaGraphExecDestroy (fx);
  if (flush)
    cudaFree (flush);
  if (copy_a)
    cudaFree (copy_a);
  if (copy_b)
    cudaFree (copy_b);
  return ok;
}

gboolean
cs_cuda_program_time (CsCudaProgram *p, guint iters, CsCudaTimes *t, GError **error)
{
  guint n = p->steps->len;
  g_autofree cudaEvent_t *ev = g_new0 (cudaEvent_t, n + 1);
  g_autofree double *per = g_new0 (double, (gsize) (n + 1) * MAX (iters, 1));
  g_autofree double *samples = g_new0 (double, MAX (iters, 1));
  g_autofree double *col = g_new0 (double, MAX (iters, 1));
  cudaEvent_t a = NULL, b = NULL;
  gboolean ok = FALSE;

  memset (t, 0, sizeof *t);
  if (iters < 1)
    iters = 1;
  for (guint i = 0; i <= n; i++)
    CS_CU_CHECK (cudaEventCreate (&ev[i]), error);
  CS_CU_CHECK (cudaEventCreate (&a), error);
  CS_CU_CHECK (cudaEventCreate (&b), error);
  for (guint w = 0; w < 5; w++)
    if (!cs_cuda_program_run (p, FALSE, error))
      goto out;

  /* Per step, plain stream launches with events between steps. */
  for (guint it = 0; it < iters; it++)
    {
      float ms = 0;

      if (!launch_steps (p, ev, NULL, error))
        goto out;
      CS_CU_CHECK (cudaEventSynchronize (ev[n]), error);
      for (guint i = 0; i < n; i++)
        {
          CS_CU_CHECK (cudaEventElapsedTime (&ms, ev[i], ev[i + 1]), error);
          per[(gsize) i * iters + it] = ms;
        }
      CS_CU_CHECK (cudaEventElapsedTime (&ms, ev[0], ev[n]), error);
      samples[it] = ms;
    }
  t->stream_ms = median (samples, iters);
  g_clear_pointer (&p->timings, g_array_unref);
  p->timings = g_array_new (FALSE, TRUE, sizeof (CsCudaStepTiming));
  for (guint i = 0; i < n; i++)
    {
      CsCudaStep *s = g_ptr_array_index (p->steps, i);
      CsCudaStepTiming st = { 0 };

      memcpy (col, per + (gsize) i * iters, sizeof (double) * iters);
      st.label = s->label;
      st.kind = s->kind_name;
      st.backward = s->backward;
      st.median_ms = median (col, iters);
      st.flops = s->flops;
      st.bytes = s->bytes;
      st.floor_ms = s->floor_ms;
      g_array_append_val (p->timings, st);
      t->floor_ms += s->floor_ms;
      if (s->kind == CS_CUDA_STEP_GEMM)
        t->n_matmuls++;
      else
        t->n_kernels++;   /* generated kernels and cuDNN's attention */
    }
  t->steps = p->timings;

  /* GPU time: graph replays, one event pair each, no host sync in between. */
  if (!cs_cuda_program_run (p, TRUE, error))
    goto out;
  for (guint it = 0; it < iters; it++)
    {
      float ms = 0;

      CS_CU_CHECK (cudaEventRecord (a, p->stream), error);
      CS_CU_CHECK (cudaGraphLaunch (p->graph, p->stream), error);
      CS_CU_CHECK (cudaEventRecord (b, p->stream), error);
      CS_CU_CHECK (cudaEventSynchronize (b), error);
      CS_CU_CHECK (cudaEventElapsedTime (&ms, a, b), error);
      samples[it] = ms;
    }
  t->graph_ms = median (samples, iters);
  t->graph_min_ms = samples[0];

  /* Latency: launch one step and wait for it, host clock around both. */
  for (guint it = 0; it < iters; it++)
    {
      gint64 t0 = g_get_monotonic_time ();

      CS_CU_CHECK (cudaGraphLaunch (p->graph, p->stream), error);
      CS_CU_CHECK (cudaStreamSynchronize (p->stream), error);
      samples[it] = (double) (g_get_monotonic_time () - t0) / 1000.0;
    }
  t->latency_ms = median (samples, iters);
  CS_CU_CHECK (cudaGetLastError (), error);
  if (step_reps () > 0 && !time_alone (p, step_reps (), iters, error))
    goto out;
  t->step_reps = step_reps ();
  t->n_samples = iters;
  t->n_streams = p->n_streams;
  t->critical_path = p->critical_path;
  t->compile_ms = p->compile_ms;
  t->device_ms = p->device_ms;
  t->codegen_ms = p->codegen_ms;
  t->setup_ms = p->setup_ms;
  t->kernels_ms = p->kernels_ms;
  t->plans_ms = p->plans_ms;
  t->n_gemm_plans = p->n_gemm_plans;
  t->first_plan_ms = p->first_plan_ms;
  t->plan_cached = p->plan_cached;
  t->n_gemm_algos_cached = p->n_gemm_algos_cached;
  t->n_cudnn_plans = p->n_cudnn_plans;
  t->n_cudnn_loaded = p->n_cudnn_loaded;
  t->cudnn_ms = p->cudnn_ms;
  t->lt_startup_ms = p->lt_startup_ms;
  t->lt_wait_ms = p->lt_wait_ms;
  t->lt_lead_ms = p->lt_lead_ms;
  t->cache_hits = p->cache_hits;
  t->arena_bytes = p->arena_bytes;
  t->naive_bytes = p->naive_bytes;
  ok = TRUE;
out:
  for (guint i = 0; i <= n; i++)
    if (ev[i])
      cudaEventDestroy (ev[i]);
  if (a)
    cudaEventDestroy (a);
  if (b)
    cudaEventDestroy (b);
  return ok;
}
