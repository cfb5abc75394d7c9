/* cs-ref-plan.c: the cost of a CPU reference run before it runs (see cs-ref-plan.h). */
#include "cs-config.h"

#include "cs-ref-plan.h"
#include "cs-ops.h"
#include "cs-ops-args.h"
#include "cs-tensor.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------------------------------------ */
/* Sizes of values                                                                             */

/* Elements of a typed tensor proxy (a symbolic extent counts 1), or -1 when it is no typed
 * tensor. */
static double
proxy_numel (const CsProxy *p)
{
  double n = 1;

  if (p == NULL || p->kind != CS_PROXY_TENSOR || !p->typed)
    return -1;
  for (guint i = 0; i < p->rank; i++)
    n *= p->shape[i] >= 0 ? (double) p->shape[i] : 1.0;
  return n;
}

/* Bytes the executor holds for @p's value: 8 an element (at least one element), 0 for
 * numbers and untyped values. */
static double
value_bytes (const CsProxy *p)
{
  double n = proxy_numel (p);

  return n < 0 ? 0 : MAX (n, 1.0) * 8.0;
}

/* Bytes of a #CsTensor of @dtype with @numel elements (cs_tensor_new allocates at least one). */
static double
tensor_bytes (CsDtype dtype, double numel)
{
  gsize esize = cs_tensor_supports_dtype (dtype) ? cs_dtype_size_bytes (dtype) : 8;

  return MAX (numel, 1.0) * (double) (esize ? esize : 8);
}

/* Bytes of the #CsTensor a run returns for @p in @mode (f64 mode returns floats as f64;
 * numbers become 0-d tensors of bool, int64 or float64). */
static double
returned_bytes (const CsProxy *p, CsRefMode mode)
{
  double n = proxy_numel (p);
  CsDtype d;

  if (p->kind == CS_PROXY_NUMBER)
    return p->dtype == CS_DTYPE_B8 ? 1 : 8;
  if (n < 0)
    return 0;
  d = p->dtype;
  if (mode == CS_REF_F64 && cs_dtype_kind (d) == CS_DTYPE_KIND_FLOAT)
    d = CS_DTYPE_F64;
  return tensor_bytes (d, n);
}

/* Bytes of the #CsTensor a caller makes for leaf input @p (cs_ref_random_input). */
static double
input_bytes (const CsProxy *p)
{
  double n = proxy_numel (p);

  if (p->kind == CS_PROXY_NUMBER)
    return 8;
  return n < 0 ? 0 : tensor_bytes (p->dtype, n);
}

/* ------------------------------------------------------------------------------------------ */
/* Replaying a run's liveness                                                                  */

typedef struct
{
  double bytes;          /* bytes of the value */
  guint  refs;           /* names bound to it plus holders */
} Node;

typedef struct
{
  GHashTable *env;       /* name (borrowed from the trace) -> Node* (one reference) */
  CsRefMode   mode;      /* the run replayed (value sizes, f32 kernels) */
  double      live;      /* bytes of values alive now */
  double      peak;      /* largest live (plus scratch) seen */
} Sim;

static Node *
node_new (Sim *sim, double bytes)
{
  Node *n = g_new (Node, 1);

  n->bytes = bytes;
  n->refs = 1;
  sim->live += bytes;
  sim->peak = MAX (sim->peak, sim->live);
  return n;
}

static void
node_unref (Sim *sim, Node *n)
{
  if (--n->refs > 0)
    return;
  sim->live -= n->bytes;
  g_free (n);
}

/* Binds @name to @n (a new reference); the value it held before loses one. */
static void
sim_bind (Sim *sim, const char *name, Node *n)
{
  Node *old = g_hash_table_lookup (sim->env, name);

  n->refs++;
  g_hash_table_replace (sim->env, (gpointer) name, n);
  if (old)
    node_unref (sim, old);
}

static void
sim_remove (Sim *sim, const char *name)
{
  Node *old = g_hash_table_lookup (sim->env, name);

  if (old)
    {
      g_hash_table_remove (sim->env, name);
      node_unref (sim, old);
    }
}

/* How cs-ref.c's exec_call() runs a statement. */
typedef enum
{
  RUN_NOTHING,   /* no tensor value: bookkeeping, get_grad, shape queries, unsupported */
  RUN_ALIAS,     /* the output is its first argument's value */
  RUN_KERNEL,    /* a reference kernel makes new values */
  RUN_SUBS,      /* through its subsymbols */
} RunKind;

/* Mirrors the dispatch of exec_call() in cs-ref.c (keep the two in step). */
static RunKind
run_kind (const CsStmt *s)
{
  const CsOp *sem = cs_op_semantic (s->op);

  switch (sem->id)
    {
    case CS_OP_PRIM_GET_GRAD:
    case CS_OP_PRIM_SHAPE:
    case CS_OP_LTORCH_SIZE:
    case CS_OP_PRIM_SIZE:
      return RUN_NOTHING;
    case CS_OP_PRIM_SHALLOW_COPY:
    case CS_OP_PRIM_CLONE:
    case CS_OP_PRIM_DEVICE_PUT:
    case CS_OP_PRIM_STRIDE_ORDER:
      return RUN_ALIAS;
    case CS_OP_PRIM_CONVERT_ELEMENT_TYPE: case CS_OP_PRIM_BROADCAST_IN_DIM:
    case CS_OP_PRIM_RESHAPE: case CS_OP_PRIM_VIEW: case CS_OP_PRIM_TRANSPOSE:
    case CS_OP_PRIM_SQUEEZE: case CS_OP_PRIM_SLICE_PRIM: case CS_OP_PRIM_CAT:
    case CS_OP_PRIM_PAD: case CS_OP_PRIM_FLIP: case CS_OP_PRIM_SUM: case CS_OP_PRIM_PROD:
    case CS_OP_PRIM_AMAX: case CS_OP_PRIM_AMIN: case CS_OP_PRIM_VAR: case CS_OP_PRIM_VAR_MEAN:
    case CS_OP_PRIM_ARGMAX: case CS_OP_PRIM_ARGMIN: case CS_OP_PRIM_TAKE:
    case CS_OP_PRIM_TAKE_ALONG_AXIS: case CS_OP_PRIM_GATHER: case CS_OP_PRIM_EMBEDDING:
    case CS_OP_PRIM_FULL: case CS_OP_PRIM_IOTA: case CS_OP_PRIM_UNIFORM:
    case CS_OP_PRIM_UNIFORM_PHILOX: case CS_OP_PRIM_MATMUL: case CS_OP_PRIM_LINEAR:
    case CS_OP_EX_SDPAFX_GRAD_FORWARD_SCALED_DOT_PRODUCT_EFFICIENT_ATTENTION:
    case CS_OP_EX_SDPAFX_SCALED_DOT_PRODUCT_EFFICIENT_ATTENTION_BACKWARD:
    case CS_OP_EX_SDPAEX_GRAD_FORWARD_SCALED_DOT_PRODUCT_EFFICIENT_ATTENTION:
    case CS_OP_EX_SDPAEX_SCALED_DOT_PRODUCT_EFFICIENT_ATTENTION_BACKWARD:
    case CS_OP_PRIM_INDEX_ADD: case CS_OP_PRIM_SCATTER_ADD: case CS_OP_PRIM_SCATTER:
    case CS_OP_PRIM_EMBEDDING_BACKWARD:
      return RUN_KERNEL;
    case CS_OP_PRIM_ERFCINV: case CS_OP_PRIM_ERFINV: case CS_OP_PRIM_NDTRI:
    case CS_OP_PRIM_DIGAMMA: case CS_OP_PRIM_FREXP: case CS_OP_PRIM_IMAG:
    case CS_OP_PRIM_ZETA: case CS_OP_PRIM_PY_FLOORDIV:
      return s->n_subs ? RUN_SUBS : RUN_NOTHING;
    case CS_OP_LTORCH_EMBEDDING_BACKWARD:
    case CS_OP_LTORCH_NLL_LOSS_BACKWARD:
      return s->n_subs ? RUN_SUBS : RUN_KERNEL;
    default:
      if (sem->category == CS_OP_CAT_ELEMENTWISE && cs_op_has_tag (sem, CS_OP_TAG_PRIM))
        return RUN_KERNEL;
      return s->n_subs ? RUN_SUBS : RUN_NOTHING;
    }
}

static const CsProxy *
arg_proxy (const CsStmt *s, CsArgName name)
{
  const CsValue *v = cs_stmt_arg (s, name);

  return v && v->kind == CS_VALUE_PROXY ? v->u.proxy : NULL;
}

static double
arg_numel (const CsStmt *s, CsArgName name)
{
  return MAX (proxy_numel (arg_proxy (s, name)), 1.0);
}

/* Whether the kernel computes in f32 (cs-ref.c's use_f32 on the first operand's dtype). */
static gboolean
uses_f32 (const Sim *sim, const CsProxy *p)
{
  return sim->mode == CS_REF_EXACT && p && p->typed
         && cs_dtype_kind (p->dtype) == CS_DTYPE_KIND_FLOAT && p->dtype != CS_DTYPE_F64;
}

/* Extent @from_end places before the last of @p (1 when unknown). */
static double
extent (const CsProxy *p, guint from_end)
{
  if (p == NULL || !p->typed || p->kind != CS_PROXY_TENSOR || p->rank <= from_end)
    return 1;
  return MAX ((double) p->shape[p->rank - 1 - from_end], 1.0);
}

/* The scratch a kernel holds while it runs, bytes (cs-ref.c: run_matmul, run_linear,
 * run_argext, run_sdpa_forward/backward, run_embedding_backward). */
static double
kernel_scratch (const Sim *sim, const CsStmt *s, double out_numel)
{
  const CsProxy *a;

  switch (cs_op_semantic (s->op)->id)
    {
    case CS_OP_PRIM_MATMUL:
      a = arg_proxy (s, CS_ARG_A);
      /* f32: copies of a and b and one batch of the result; f64: one batch of the result */
      if (uses_f32 (sim, a))
        return 4.0 * (arg_numel (s, CS_ARG_A) + arg_numel (s, CS_ARG_B) + MAX (out_numel, 1.0));
      return 8.0 * MAX (out_numel, 1.0);
    case CS_OP_PRIM_LINEAR:
      a = arg_proxy (s, CS_ARG_A);
      if (uses_f32 (sim, a))
        return 4.0 * (arg_numel (s, CS_ARG_A) + arg_numel (s, CS_ARG_W) + MAX (out_numel, 1.0));
      return 0;
    case CS_OP_PRIM_ARGMAX:
    case CS_OP_PRIM_ARGMIN:
      return 8.0 * MAX (out_numel, 1.0);
    case CS_OP_EX_SDPAFX_GRAD_FORWARD_SCALED_DOT_PRODUCT_EFFICIENT_ATTENTION:
    case CS_OP_EX_SDPAEX_GRAD_FORWARD_SCALED_DOT_PRODUCT_EFFICIENT_ATTENTION:
      return 8.0 * extent (arg_proxy (s, CS_ARG_KEY), 1);
    case CS_OP_EX_SDPAFX_SCALED_DOT_PRODUCT_EFFICIENT_ATTENTION_BACKWARD:
    case CS_OP_EX_SDPAEX_SCALED_DOT_PRODUCT_EFFICIENT_ATTENTION_BACKWARD:
      /* P and dS, L x S each */
      return 2.0 * 8.0 * extent (arg_proxy (s, CS_ARG_QUERY), 1) * extent (arg_proxy (s, CS_ARG_KEY), 1);
    case CS_OP_PRIM_EMBEDDING_BACKWARD:
    case CS_OP_LTORCH_EMBEDDING_BACKWARD:
      {
        const CsValue *nw = cs_stmt_arg (s, CS_ARG_NUM_WEIGHTS);
        double rows = nw && nw->kind == CS_VALUE_INT ? MAX ((double) nw->u.i, 1.0) : 1.0;

        return (uses_f32 (sim, arg_proxy (s, CS_ARG_GRAD)) ? 4.0 * MAX (out_numel, 1.0) : 0)
               + 8.0 * rows;
      }
    default:
      return 0;
    }
}

static void sim_stmts (Sim *sim, CsStmt * const *stmts, guint n);

/* A kernel: new values for every output proxy, plus scratch while it runs. */
static void
sim_kernel (Sim *sim, const CsStmt *s)
{
  g_autoptr (GPtrArray) outs = g_ptr_array_new ();
  g_autoptr (GPtrArray) nodes = g_ptr_array_new ();
  double out_numel = 0;

  if (s->out)
    cs_value_collect_proxies (s->out, outs);
  for (guint i = 0; i < outs->len; i++)
    {
      const CsProxy *p = g_ptr_array_index (outs, i);

      out_numel = MAX (out_numel, proxy_numel (p));
      g_ptr_array_add (nodes, node_new (sim, value_bytes (p)));
    }
  sim->peak = MAX (sim->peak, sim->live + kernel_scratch (sim, s, out_numel));
  for (guint i = 0; i < outs->len; i++)
    {
      const CsProxy *p = g_ptr_array_index (outs, i);
      Node *n = g_ptr_array_index (nodes, i);

      sim_bind (sim, p->name, n);
      node_unref (sim, n);
    }
}

static void
collect_sub_outputs (const CsStmt *s, GPtrArray *out)
{
  for (guint i = 0; i < s->n_subs; i++)
    {
      cs_stmt_collect_outputs (s->subs[i], out);
      collect_sub_outputs (s->subs[i], out);
    }
}

/* cs-ref.c's exec_subs(): the subsymbols run, then the names local to them are dropped. */
static void
sim_subs (Sim *sim, const CsStmt *s)
{
  g_autoptr (GPtrArray) inner = g_ptr_array_new ();
  g_autoptr (GPtrArray) outs = g_ptr_array_new ();
  g_autoptr (GPtrArray) fresh = g_ptr_array_new ();
  g_autoptr (GHashTable) out_names = g_hash_table_new (g_str_hash, g_str_equal);

  collect_sub_outputs (s, inner);
  cs_stmt_collect_outputs (s, outs);
  for (guint k = 0; k < outs->len; k++)
    g_hash_table_add (out_names, (gpointer) ((CsProxy *) g_ptr_array_index (outs, k))->name);
  for (guint i = 0; i < inner->len; i++)
    {
      const CsProxy *p = g_ptr_array_index (inner, i);

      if (!g_hash_table_contains (out_names, p->name) && !g_hash_table_contains (sim->env, p->name))
        g_ptr_array_add (fresh, (gpointer) p->name);
    }
  sim_stmts (sim, s->subs, s->n_subs);
  for (guint i = 0; i < fresh->len; i++)
    sim_remove (sim, g_ptr_array_index (fresh, i));
}

static void
sim_call (Sim *sim, const CsStmt *s)
{
  switch (run_kind (s))
    {
    case RUN_NOTHING:
      return;
    case RUN_ALIAS:
      {
        const CsProxy *a = arg_proxy (s, CS_ARG_A);
        const CsProxy *o = cs_stmt_get_output (s);
        Node *n = a ? g_hash_table_lookup (sim->env, a->name) : NULL;

        if (o == NULL)
          return;
        if (n == NULL)
          {
            sim_kernel (sim, s);   /* a literal argument: a new value */
            return;
          }
        sim_bind (sim, o->name, n);
        return;
      }
    case RUN_KERNEL:
      sim_kernel (sim, s);
      return;
    case RUN_SUBS:
      sim_subs (sim, s);
      return;
    }
}

static void
sim_stmts (Sim *sim, CsStmt * const *stmts, guint n)
{
  for (guint i = 0; i < n; i++)
    {
      const CsStmt *s = stmts[i];

      switch (s->kind)
        {
        case CS_STMT_CALL:
          sim_call (sim, s);
          break;
        case CS_STMT_UNPACK:
          /* the targets share the items of a bound sequence (no new bytes) */
          if (s->source && g_hash_table_contains (sim->env, s->source->name))
            for (guint k = 0; k < s->n_targets; k++)
              if (s->targets[k]->kind == CS_VALUE_PROXY)
                {
                  Node *z = node_new (sim, 0);

                  sim_bind (sim, s->targets[k]->u.proxy->name, z);
                  node_unref (sim, z);
                }
          break;
        case CS_STMT_DEL:
          for (guint k = 0; k < s->n_names; k++)
            sim_remove (sim, s->names[k]->name);
          break;
        default:
          break;
        }
    }
}

/* Bytes of the tensors flatten_return() makes for @v. */
static double
return_walk (const Sim *sim, const CsValue *v)
{
  double sum = 0;

  switch (v->kind)
    {
    case CS_VALUE_PROXY:
      return returned_bytes (v->u.proxy, sim->mode);
    case CS_VALUE_TUPLE:
    case CS_VALUE_LIST:
      for (guint i = 0; i < v->u.seq.n; i++)
        sum += return_walk (sim, v->u.seq.items[i]);
      return sum;
    case CS_VALUE_DICT:
      for (guint i = 1; i < v->u.seq.n; i += 2)
        sum += return_walk (sim, v->u.seq.items[i]);
      return sum;
    case CS_VALUE_BOOL:
      return 1;
    case CS_VALUE_INT:
    case CS_VALUE_FLOAT:
      return 8;
    default:
      return 0;
    }
}

void
cs_ref_estimate_run (const CsTrace *trace, CsRefMode mode, CsRefRunMemory *out)
{
  g_autoptr (GPtrArray) leaves = NULL;
  Sim sim = { NULL, mode, 0, 0 };
  const CsStmt *ret = NULL;

  g_return_if_fail (trace != NULL && out != NULL);
  memset (out, 0, sizeof *out);
  sim.env = g_hash_table_new (g_str_hash, g_str_equal);
  leaves = cs_ref_dup_leaf_inputs (trace);
  for (guint i = 0; i < leaves->len; i++)
    {
      const CsProxy *p = g_ptr_array_index (leaves, i);
      Node *n = node_new (&sim, value_bytes (p));

      out->input_bytes += input_bytes (p);
      sim_bind (&sim, p->name, n);
      node_unref (&sim, n);
    }
  for (guint i = 0; i < trace->n_stmts && ret == NULL; i++)
    {
      if (trace->stmts[i]->kind == CS_STMT_RETURN)
        ret = trace->stmts[i];
      else
        sim_stmts (&sim, &trace->stmts[i], 1);
    }
  if (ret && ret->value)
    out->output_bytes = return_walk (&sim, ret->value);
  out->peak_bytes = MAX (sim.peak, sim.live + out->output_bytes);
  {
    GHashTableIter it;
    gpointer k, v;

    g_hash_table_iter_init (&it, sim.env);
    while (g_hash_table_iter_next (&it, &k, &v))
      node_unref (&sim, v);   /* a node shared by several names goes with the last */
  }
  g_hash_table_unref (sim.env);
}

/* ------------------------------------------------------------------------------------------ */
/* A step                                                                                      */

static void
add_returned_names (const CsValue *v, GHashTable *names)
{
  g_autoptr (GPtrArray) ps = g_ptr_array_new ();

  cs_value_collect_proxies (v, ps);
  for (guint i = 0; i < ps->len; i++)
    g_hash_table_add (names, (gpointer) ((CsProxy *) g_ptr_array_index (ps, i))->name);
}

/* The largest #CsTensor of a returned proxy of @trace in its trace dtype, bytes. */
static double
largest_returned (const CsTrace *trace)
{
  const CsStmt *ret = trace ? cs_trace_get_return (trace) : NULL;
  g_autoptr (GPtrArray) ps = g_ptr_array_new ();
  double best = 0;

  if (ret == NULL || ret->value == NULL)
    return 0;
  cs_value_collect_proxies (ret->value, ps);
  for (guint i = 0; i < ps->len; i++)
    best = MAX (best, returned_bytes (g_ptr_array_index (ps, i), CS_REF_EXACT));
  return best;
}

void
cs_ref_estimate_step (const CsTrace *forward, const CsTrace *backward, CsRefStepFlags flags,
                      CsRefStepCost *out)
{
  CsRefMode modes[2];
  guint n_modes = 0;
  double held = 0, peak = 0;

  g_return_if_fail (out != NULL);
  memset (out, 0, sizeof *out);
  if (flags & CS_REF_STEP_EXACT)
    modes[n_modes++] = CS_REF_EXACT;
  if (flags & CS_REF_STEP_F64)
    modes[n_modes++] = CS_REF_F64;

  if (forward)
    {
      CsRefRunMemory m;

      cs_ref_estimate_run (forward, CS_REF_EXACT, &m);
      held += m.input_bytes;
      peak = MAX (peak, held);
      for (guint i = 0; i < n_modes; i++)
        {
          if (i > 0 || modes[i] != CS_REF_EXACT)
            cs_ref_estimate_run (forward, modes[i], &m);
          peak = MAX (peak, held + m.peak_bytes);
          held += m.output_bytes;
        }
    }
  if (backward)
    {
      g_autoptr (GHashTable) saved = g_hash_table_new (g_str_hash, g_str_equal);
      g_autoptr (GPtrArray) leaves = cs_ref_dup_leaf_inputs (backward);
      const CsStmt *fret = forward ? cs_trace_get_return (forward) : NULL;

      if (fret && fret->value)
        add_returned_names (fret->value, saved);
      /* the cotangents (leaves the forward does not return) are made once for both modes */
      for (guint i = 0; i < leaves->len; i++)
        {
          const CsProxy *p = g_ptr_array_index (leaves, i);

          if (!g_hash_table_contains (saved, p->name))
            held += input_bytes (p);
        }
      peak = MAX (peak, held);
      for (guint i = 0; i < n_modes; i++)
        {
          CsRefRunMemory m;

          cs_ref_estimate_run (backward, modes[i], &m);
          peak = MAX (peak, held + m.peak_bytes);
          held += m.output_bytes;
        }
    }
  if (flags & CS_REF_STEP_READBACK)
    peak = MAX (peak, held + MAX (largest_returned (forward), largest_returned (backward)));
  out->peak_bytes = peak;
  if (n_modes > 0)
    {
      double f = 0;

      if (forward)
        {
          cs_ref_estimate (forward, &f, NULL);
          out->flops += f;
        }
      if (backward)
        {
          cs_ref_estimate (backward, &f, NULL);
          out->flops += f;
        }
    }
}

gboolean
cs_ref_check_step (const CsRefStepCost *cost, guint64 max_bytes, double max_flops,
                   GError **error)
{
  g_return_val_if_fail (cost != NULL, FALSE);
  if (max_bytes != G_MAXUINT64 && cost->peak_bytes > (double) max_bytes)
    {
      g_autofree char *need = cs_format_size (cost->peak_bytes);
      g_autofree char *limit = cs_format_size ((double) max_bytes);

      g_set_error (error, CS_REF_ERROR, CS_REF_ERROR_VALUE,
                   "this step needs about %s of host memory on the CPU reference (estimate), "
                   "over the limit of %s", need, limit);
      return FALSE;
    }
  if (max_flops >= 0 && isfinite (max_flops) && cost->flops > max_flops)
    {
      g_autofree char *need = cs_format_flops (cost->flops);
      g_autofree char *limit = cs_format_flops (max_flops);

      g_set_error (error, CS_REF_ERROR, CS_REF_ERROR_VALUE,
                   "this step needs about %s on the CPU reference, over the limit of %s",
                   need, limit);
      return FALSE;
    }
  return TRUE;
}

/* ------------------------------------------------------------------------------------------ */
/* The machine's memory                                                                        */

/* The first unsigned number in file @path, or FALSE ("max", missing, unreadable). */
static gboolean
read_u64_file (const char *path, guint64 *out)
{
  g_autofree char *text = NULL;
  char *end = NULL;

  if (!g_file_get_contents (path, &text, NULL, NULL) || !g_ascii_isdigit (text[0]))
    return FALSE;
  *out = g_ascii_strtoull (text, &end, 10);
  return end != text;
}

/* The cgroup's memory limit and usage, or FALSE when there is no limit. */
static gboolean
cgroup_limit (guint64 *max, guint64 *cur)
{
  g_autofree char *self = NULL;

  /* v2: "0::/path" in /proc/self/cgroup, files under /sys/fs/cgroup/path */
  if (g_file_get_contents ("/proc/self/cgroup", &self, NULL, NULL))
    {
      g_auto (GStrv) lines = g_strsplit (self, "\n", -1);

      for (guint i = 0; lines[i]; i++)
        if (g_str_has_prefix (lines[i], "0::"))
          {
            g_autofree char *dir = g_build_filename ("/sys/fs/cgroup", lines[i] + 3, NULL);
            g_autofree char *fmax = g_build_filename (dir, "memory.max", NULL);
            g_autofree char *fcur = g_build_filename (dir, "memory.current", NULL);

            if (read_u64_file (fmax, max) && read_u64_file (fcur, cur))
              return TRUE;
          }
    }
  if (read_u64_file ("/sys/fs/cgroup/memory.max", max)
      && read_u64_file ("/sys/fs/cgroup/memory.current", cur))
    return TRUE;
  /* v1: an unlimited group reports a limit near 2^63 */
  if (read_u64_file ("/sys/fs/cgroup/memory/memory.limit_in_bytes", max)
      && read_u64_file ("/sys/fs/cgroup/memory/memory.usage_in_bytes", cur)
      && *max < ((guint64) 1 << 62))
    return TRUE;
  return FALSE;
}

/* The number of kB after @key in /proc/meminfo's text, in bytes, or 0. */
static guint64
meminfo_bytes (const char *meminfo, const char *key)
{
  const char *line = meminfo ? strstr (meminfo, key) : NULL;

  if (line == NULL)
    return 0;
  return g_ascii_strtoull (line + strlen (key), NULL, 10) * 1024;
}

void
cs_ref_machine_memory_from (const char *meminfo, guint64 phys_bytes, guint64 cgroup_max,
                            guint64 cgroup_current, CsRefMachineMemory *out)
{
  guint64 total = meminfo_bytes (meminfo, "MemTotal:");
  guint64 avail = meminfo_bytes (meminfo, "MemAvailable:");

  g_return_if_fail (out != NULL);
  if (total == 0)
    total = phys_bytes > 0 ? phys_bytes : (guint64) 8 << 30;
  if (avail == 0)
    avail = total / 2;
  if (cgroup_max != G_MAXUINT64)
    {
      guint64 room = cgroup_max > cgroup_current ? cgroup_max - cgroup_current : 0;

      total = MIN (total, MAX (cgroup_max, 1));
      avail = MIN (avail, room);
    }
  out->total_bytes = total;
  out->available_bytes = MIN (avail, total);
}

void
cs_ref_machine_memory (CsRefMachineMemory *out)
{
  g_autofree char *info = NULL;
  guint64 max = G_MAXUINT64, cur = 0, phys = 0;
  long pages = sysconf (_SC_PHYS_PAGES), page = sysconf (_SC_PAGESIZE);

  if (pages > 0 && page > 0)
    phys = (guint64) pages * (guint64) page;
  g_file_get_contents ("/proc/meminfo", &info, NULL, NULL);   /* NULL when unreadable */
  if (!cgroup_limit (&max, &cur))
    max = G_MAXUINT64;
  cs_ref_machine_memory_from (info, phys, max, cur, out);
}

guint64
cs_ref_available_memory (void)
{
  CsRefMachineMemory m;

  cs_ref_machine_memory (&m);
  return m.available_bytes;
}

guint64
cs_ref_memory_limit (const CsRefMachineMemory *machine, guint64 requested)
{
  g_return_val_if_fail (machine != NULL, 0);
  if (requested == CS_REF_MEMORY_DEFAULT)
    return (guint64) ((double) machine->available_bytes * CS_REF_DEFAULT_MEMORY_FRACTION);
  return MIN (requested, machine->total_bytes);
}

guint64
cs_ref_default_memory_limit (void)
{
  CsRefMachineMemory m;

  cs_ref_machine_memory (&m);
  return cs_ref_memory_limit (&m, CS_REF_MEMORY_DEFAULT);
}

CsRefMemoryVerdict
cs_ref_check_step_memory (const CsRefStepCost *cost, const CsRefMachineMemory *machine,
                          guint64 requested, GError **error)
{
  g_return_val_if_fail (cost != NULL && machine != NULL, CS_REF_MEMORY_OVER_MACHINE);
  if (cost->peak_bytes > (double) machine->total_bytes)
    {
      g_autofree char *need = cs_format_size (cost->peak_bytes);
      g_autofree char *has = cs_format_size ((double) machine->total_bytes);

      g_set_error (error, CS_REF_ERROR, CS_REF_ERROR_VALUE,
                   "this step needs about %s of host memory on the CPU reference (estimate), "
                   "this machine has %s", need, has);
      return CS_REF_MEMORY_OVER_MACHINE;
    }
  if (!cs_ref_check_step (cost, cs_ref_memory_limit (machine, requested), -1, error))
    return CS_REF_MEMORY_OVER_LIMIT;
  return CS_REF_MEMORY_FITS;
}

/* ------------------------------------------------------------------------------------------ */
/* Sizes as text                                                                               */

gboolean
cs_parse_size (const char *text, guint64 *out, GError **error)
{
  static const struct { const char *name; guint shift; } units[] = {
    { "", 0 }, { "b", 0 },
    { "k", 10 }, { "kb", 10 }, { "kib", 10 },
    { "m", 20 }, { "mb", 20 }, { "mib", 20 },
    { "g", 30 }, { "gb", 30 }, { "gib", 30 },
    { "t", 40 }, { "tb", 40 }, { "tib", 40 },
  };
  const char *p = text;
  g_autofree char *number = NULL;
  g_autofree char *unit = NULL;
  guint n_digits = 0;
  double v;

  g_return_val_if_fail (out != NULL, FALSE);
  if (text == NULL)
    text = p = "";
  while (g_ascii_isdigit (*p))
    p++, n_digits++;
  if (*p == '.')
    for (p++; g_ascii_isdigit (*p); p++)
      n_digits++;
  if (n_digits == 0)
    goto bad;
  number = g_strndup (text, (gsize) (p - text));
  while (*p == ' ')
    p++;
  unit = g_ascii_strdown (p, -1);
  for (gsize i = 0; i < G_N_ELEMENTS (units); i++)
    if (strcmp (unit, units[i].name) == 0)
      {
        v = g_ascii_strtod (number, NULL) * ldexp (1.0, (int) units[i].shift);
        if (!(v < 9223372036854775808.0))
          {
            g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                         "size '%s' is too large", text);
            return FALSE;
          }
        if (units[i].shift == 0 && v != floor (v))
          {
            g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                         "size '%s' is not a whole number of bytes (use a unit: 1.5G)", text);
            return FALSE;
          }
        *out = (guint64) v;
        return TRUE;
      }
bad:
  g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
               "cannot read '%s' as a size (bytes, or a number with K, M, G or T: 512M, 8G, "
               "1.5GiB)", text);
  return FALSE;
}

char *
cs_format_size (double bytes)
{
  static const char * const units[] = { "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
  double v = bytes;
  int u = -1;

  if (bytes == 1)
    return g_strdup ("1 byte");
  if (!(bytes >= 1024))
    return g_strdup_printf ("%.0f bytes", bytes);
  while (v >= 1024 && u + 1 < (int) G_N_ELEMENTS (units))
    {
      v /= 1024;
      u++;
    }
  if (v >= 100)
    return g_strdup_printf ("%.0f %s", v, units[u]);
  if (v >= 10)
    return g_strdup_printf ("%.1f %s", v, units[u]);
  return g_strdup_printf ("%.2f %s", v, units[u]);
}

char *
cs_format_flops (double flops)
{
  static const char * const units[] = { "kFLOP", "MFLOP", "GFLOP", "TFLOP", "PFLOP" };
  double v = flops;
  int u = -1;

  if (!isfinite (flops) || flops < 1e4)
    return g_strdup_printf ("%.0f FLOP", flops);
  if (flops >= 999.5e15)
    return g_strdup_printf ("%.2e FLOP", flops);
  while (v >= 999.5 && u + 1 < (int) G_N_ELEMENTS (units))
    {
      v /= 1000;
      u++;
    }
  if (v >= 99.95)
    return g_strdup_printf ("%.0f %s", v, units[u]);
  if (v >= 9.995)
    return g_strdup_printf ("%.1f %s", v, units[u]);
  return g_strdup_printf ("%.2f %s", v, units[u]);
}
