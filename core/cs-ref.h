/* cs-ref.h: the CPU reference executor.
 *
 * Runs a trace statement by statement on host tensors (#CsTensor).  Prims have reference
 * kernels here; every other call (ltorch symbols, torch-executor names, nvFusion regions) runs
 * its subsymbols recursively, exactly as Thunder's decomposition defines it
 * (reference/thunder-traces.md 1.2g-h, 3).  Bookkeeping statements (input annotations, unpack,
 * del, return, comments, clear_mutable_collection, checks) are handled; nothing in the trace
 * text is executed as code.
 *
 * Two modes:
 * - CS_REF_EXACT: every value has its trace dtype.  Each prim output is rounded to its dtype
 *   (bf16/f16/fp8 round to nearest even, as a GPU stores them); float math runs in f32 for
 *   f32/bf16/f16/fp8 prims and in f64 for f64 prims, like PyTorch's opmath.  matmul/linear with
 *   bf16/f16/f32 operands multiply in f32 with f32 accumulation (cblas_sgemm) and round the
 *   output once, like cuBLAS with fp32 accumulation; f64 uses cblas_dgemm.  Reductions
 *   accumulate in f64 and round once to the output dtype.
 * - CS_REF_F64: every float value is kept in f64; conversions between float dtypes are no-ops.
 *   The ground truth for error measurements.
 *
 * Values are held as f64 internally, so integer values must stay within +-2^53 (indices,
 * counts and shapes always do).
 *
 * Reference kernels: convert_element_type, broadcast_in_dim, reshape/view, transpose, squeeze,
 * slice_prim, cat, pad, flip, shallow_copy/clone/device_put/stride_order, every unary and
 * binary elementwise prim of reference 3.1 on floats and ints (not erfinv, erfcinv, ndtri,
 * digamma, zeta, frexp, py_floordiv, complex), where, lerp, sum/prod/amax/amin, var,
 * var_mean, argmax/argmin, matmul (torch.matmul semantics: 1-D operands, broadcast batch
 * dims), linear, take, take_along_axis, gather, scatter, scatter_add, index_add, embedding,
 * embedding_backward, full, iota, uniform/uniform_philox (GRand stream, not CUDA's Philox),
 * shape/size; executor calls without subsymbols: sdpafx/sdpaex attention forward (dropout 0,
 * top-left causal mask) and the sdpafx backward, ltorch.nll_loss_backward,
 * ltorch.embedding_backward.  Everything else runs through its subsymbols or fails with
 * CS_REF_ERROR_UNSUPPORTED naming the callee and its line.
 *
 * Inputs are the trace's "leaf inputs" (cs_ref_dup_leaf_inputs()): the signature's parameters,
 * except that a parameter unpacked by the trace (`C0, C1, = saved_for_backward`,
 * `t46, = cotangents`) is replaced, recursively, by the proxies it unpacks into; plus the
 * outputs of `prims.get_grad` in joint traces (cotangents fed from outside).  A backward trace
 * therefore takes the saved tensors and cotangents by name: run the forward with
 * cs_ref_run_env(), whose @returned table maps every returned proxy name to its tensor, then
 * run the backward with that same table plus the cotangents (Thunder's split keeps the saved
 * proxies' names in the backward's unpack lines).
 */
#pragma once

#include <glib.h>

#include "cs-ir.h"
#include "cs-tensor.h"

G_BEGIN_DECLS

#define CS_REF_ERROR (cs_ref_error_quark ())
/** cs_ref_error_quark: the #GQuark of #CS_REF_ERROR (codes: #CsRefError). */
GQuark cs_ref_error_quark (void);

typedef enum
{
  CS_REF_ERROR_UNSUPPORTED, /* an op with no CPU reference and no subsymbols */
  CS_REF_ERROR_SHAPE,       /* operand shapes do not fit the op, or differ from the trace */
  CS_REF_ERROR_DTYPE,       /* a dtype the op does not take, or differing from the trace */
  CS_REF_ERROR_INPUT,       /* missing, extra or mistyped inputs */
  CS_REF_ERROR_UNBOUND,     /* a name used before any statement produced it */
  CS_REF_ERROR_VALUE,       /* bad argument values: index out of range, division by zero... */
  CS_REF_ERROR_CANCELLED,   /* CsRefRunOptions.cancel was set during the run */
} CsRefError;

typedef enum
{
  CS_REF_EXACT,             /* trace dtypes, rounding at every prim output */
  CS_REF_F64,               /* every float in f64 */
} CsRefMode;

/**
 * cs_ref_dup_leaf_inputs:
 * @trace: a trace
 *
 * The proxies a run binds from outside, in order (see the file comment).
 * Returns: (transfer container) (element-type CsProxy): borrowed proxies of @trace
 */
GPtrArray  *cs_ref_dup_leaf_inputs (const CsTrace *trace);

/**
 * cs_ref_env_new:
 * Returns: (transfer full): an empty name -> #CsTensor table (keys and values owned)
 */
GHashTable *cs_ref_env_new         (void);
/** cs_ref_env_insert: binds @name to @tensor in @env (takes a new reference). */
void        cs_ref_env_insert      (GHashTable *env, const char *name, CsTensor *tensor);

/**
 * cs_ref_index_bound:
 * @trace: a trace
 * @proxy: an integer tensor proxy of @trace
 *
 * The exclusive upper bound valid indices in @proxy must respect: the smallest extent of the
 * indexed dimension over every take / take_along_axis / gather / embedding statement (at any
 * subsymbol depth) that uses @proxy as its index.
 * Returns: the bound, or 0 when @proxy is never used as an index
 */
int64_t     cs_ref_index_bound     (const CsTrace *trace, const CsProxy *proxy);

/**
 * cs_ref_random_input:
 * @trace: the trace (for index bounds)
 * @proxy: a leaf input of @trace
 * @seed: seed; the value for a leaf is seeded with @seed plus its position hash, so it does not
 *   depend on the other inputs
 * @error: return location for a #CS_REF_ERROR
 *
 * A random tensor of @proxy's dtype and shape (cs_tensor_fill_random(), floats normal(0,1)
 * scaled by 1/sqrt(last extent) for rank >= 2 operands so matmul outputs stay O(1); integers
 * bounded by cs_ref_index_bound() or 16); number proxies give a 0-d tensor of their value when
 * known.  Errors: CS_REF_ERROR_INPUT for untyped proxies, symbolic dims or collections.
 * Returns: (transfer full): the tensor or NULL with @error set
 */
CsTensor   *cs_ref_random_input    (const CsTrace *trace,
                                    const CsProxy *proxy,
                                    guint64        seed,
                                    GError       **error);

/**
 * cs_ref_estimate:
 * @trace: a trace
 * @flops: (out) (optional): work estimate: 2*M*N*K per matmul/linear plus one per output
 *   element of every other prim (subsymbols counted where the statement has no direct kernel)
 * @max_tensor_elems: (out) (optional): elements of the largest typed tensor the trace makes
 *
 * A cheap size check before a run (the CPU reference does about 2e10 f32 FLOP/s and holds
 * every value as f64, 8 bytes per element): callers refuse traces sized for a GPU.
 */
void        cs_ref_estimate        (const CsTrace *trace,
                                    double        *flops,
                                    double        *max_tensor_elems);

/**
 * cs_ref_run_env:
 * @trace: the trace to run
 * @env: (element-type utf8 CsTensor): a value for every leaf input, by proxy name (extra
 *   names are ignored); read only
 * @mode: CS_REF_EXACT or CS_REF_F64
 * @seed: seed for random prims (prims.uniform): the k-th random statement uses @seed + k
 * @outputs: (out) (transfer full) (element-type CsTensor): the return value flattened depth
 *   first (dict values in order); numbers become 0-d tensors (b8, i64 or f64), None becomes a
 *   NULL element.  In CS_REF_F64 mode float tensors come back as f64.
 * @output_names: (out) (optional) (transfer full) (element-type utf8): the proxy name of each
 *   output ("" for literals and None)
 * @returned: (nullable): when set, receives name -> tensor for every returned proxy
 * @error: return location for a #CS_REF_ERROR (messages "file:line: ...", naming the
 *   statement's callee), #CS_TENSOR_ERROR
 *
 * Runs @trace.  Inputs must match their proxies' dtype and shape when those are typed.
 * Returns: TRUE on success
 */
gboolean    cs_ref_run_env         (const CsTrace *trace,
                                    GHashTable    *env,
                                    CsRefMode      mode,
                                    guint64        seed,
                                    GPtrArray    **outputs,
                                    GPtrArray    **output_names,
                                    GHashTable    *returned,
                                    GError       **error);

/**
 * CsRefProgressFunc:
 * @done: top-level statements of the trace finished so far
 * @total: top-level statements of the trace (CsTrace.n_stmts)
 * @user_data: CsRefRunOptions.progress_data
 *
 * Called on the running thread before each top-level statement and once with @done == @total
 * at the end; it must return quickly (post to another thread, do not draw).
 */
typedef void (*CsRefProgressFunc) (guint done, guint total, gpointer user_data);

/* Options of cs_ref_run_env_full(). */
typedef struct
{
  const gint        *cancel;        /* (nullable) read with g_atomic_int_get() before every
                                       statement (at every subsymbol depth), between matmul
                                       row blocks (64 rows or about 2^28 multiply-adds, the
                                       larger) and per attention row: nonzero stops the run
                                       with CS_REF_ERROR_CANCELLED */
  CsRefProgressFunc  progress;      /* (nullable) see #CsRefProgressFunc */
  gpointer           progress_data; /* passed to @progress */
  guint64            peak_bytes;    /* out: the run's peak host memory, bytes, counted at its
                                       allocations: every tensor value (8 bytes an element),
                                       kernel scratch (matmul's f32 operand copies...) and the
                                       returned #CsTensors; not the caller's inputs.
                                       cs_ref_estimate_run() estimates it beforehand */
} CsRefRunOptions;

/**
 * cs_ref_run_env_full:
 * @opts: (nullable) (inout): cancellation, progress, and the measured peak memory
 *
 * cs_ref_run_env() with options (the other arguments as there).  A run stays on the calling
 * thread; runs on different threads are independent.
 * Returns: TRUE on success; FALSE with @error set (CS_REF_ERROR_CANCELLED when cancelled)
 */
gboolean    cs_ref_run_env_full    (const CsTrace   *trace,
                                    GHashTable      *env,
                                    CsRefMode        mode,
                                    guint64          seed,
                                    CsRefRunOptions *opts,
                                    GPtrArray      **outputs,
                                    GPtrArray      **output_names,
                                    GHashTable      *returned,
                                    GError         **error);

/**
 * cs_ref_run:
 * @trace: the trace to run
 * @inputs: (array length=n_inputs): one tensor per leaf input, in cs_ref_dup_leaf_inputs()
 *   order (numbers as 0-d tensors)
 * @n_inputs: must equal the number of leaf inputs
 * @mode: CS_REF_EXACT or CS_REF_F64
 * @outputs: (out) (transfer full) (element-type CsTensor): flattened return values, as
 *   cs_ref_run_env()
 * @error: return location for a #CS_REF_ERROR
 *
 * Positional form of cs_ref_run_env() (random prims seeded with 0).
 * Returns: TRUE on success
 */
gboolean    cs_ref_run             (const CsTrace *trace,
                                    CsTensor     **inputs,
                                    guint          n_inputs,
                                    CsRefMode      mode,
                                    GPtrArray    **outputs,
                                    GError       **error);

G_END_DECLS
