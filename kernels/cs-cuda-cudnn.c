/* cs-cuda-cudnn.c: scaled dot product attention through cuDNN 9's fused flash attention.
 *
 * What Thunder's cudnn executor runs (thunder/executors/cudnnex.py, through cudnn-frontend's
 * sdpa node): cuDNN's backend graph API describes the attention as an operation graph of
 * matmuls, pointwise ops and reductions, and cuDNN's runtime-fusion engine recognises that
 * graph as one flash-attention kernel (forward: out and the softmax statistics; backward: dQ,
 * dK, dV).  This file builds those graphs in C, in the form cudnn-frontend's composite SDPA
 * nodes lower to (read there; none of its code is used):
 *
 *   forward   S = Q K^T (f32), S *= scale, [causal: S = row >= col ? S : -inf],
 *             M = rowmax S, E = exp(S - M), Z = rowsum E, stats = M + log Z,
 *             P = E / Z (rounded to the tensors' dtype), O = P V
 *   backward  Dsum = rowsum(dO * O), S = scale Q K^T [masked], P = exp(S - stats),
 *             dV = P^T dO, dS = P (dO V^T - Dsum) scale, dK = dS^T Q, dQ = dS K (through an
 *             f32 accumulator, then cast)
 *
 * The library is never linked: libcudnn.so.9 is opened at run time (dlopen) the first time a
 * device program asks, from CASTSCOPE_CUDNN_LIB (a path to the .so; the sub-libraries beside
 * it are loaded first so the dispatcher finds them) or the plain name (LD_LIBRARY_PATH).  Its
 * enumerations are the numbers of cuDNN 9's cudnn_graph.h (stable within the major version),
 * written here so that no cuDNN header is needed to build.  CASTSCOPE_CUDNN=0 turns the path
 * off.  When the library is missing, the version is older than 9.6, or a case cannot be
 * expressed or finalized, cs-cuda-attention.c runs its own kernels instead.
 *
 * Plans (operation graph, heuristics mode A, the first engine config that finalizes) are
 * built while the program's steps are made, one per distinct problem (shapes, strides,
 * dtype, causal, scale: identical layers share one) and kept with the program; the device
 * pointers (arena offsets, one workspace shared by the program's cuDNN steps) are bound once
 * the arena exists, so a step is one cudnnBackendExecute on the program's stream, which a CUDA
 * graph captures like any launch.
 */
#include "cs-config.h"

#include "cs-cuda-private.h"

#include <dlfcn.h>
#include <math.h>
#include <string.h>

/* ---- cuDNN 9 ABI: the numbers of cudnn_graph.h this file uses ------------------------------ */

typedef void *CudnnHandle;
typedef void *CudnnDesc;
typedef int CudnnStatus;

enum
{
  DT_FLOAT = 0, DT_HALF = 2, DT_INT32 = 4, DT_BF16 = 9, DT_BOOL = 11,
};
enum
{
  PW_ADD = 0, PW_MUL = 1, PW_DIV = 6, PW_SUB = 9, PW_EXP = 13, PW_LOG = 15, PW_IDENTITY = 21,
  PW_CMP_GE = 303, PW_GEN_INDEX = 501, PW_BINARY_SELECT = 601,
};
enum { RED_ADD = 0, RED_MAX = 3 };
enum
{
  T_HANDLE = 0, T_DATA_TYPE = 1, T_BOOLEAN = 2, T_INT64 = 3, T_FLOAT = 4, T_VOID_PTR = 6, T_HEUR_MODE = 8,
  T_POINTWISE_MODE = 14, T_DESC = 15, T_REDUCTION_OP = 18, T_CHAR = 24,
};
enum
{
  D_POINTWISE = 0, D_ENGINE = 2, D_ENGINECFG = 3, D_ENGINEHEUR = 4, D_PLAN = 5, D_OP_POINTWISE = 13,
  D_OPGRAPH = 15, D_VARIANT_PACK = 16, D_TENSOR = 17, D_MATMUL = 18, D_OP_MATMUL = 19, D_REDUCTION = 21,
  D_OP_REDUCTION = 22, D_OP_RESHAPE = 31,
};
enum
{
  A_POINTWISE_MODE = 0, A_POINTWISE_MATH_PREC = 1, A_POINTWISE_AXIS = 9,
  A_ENGINEHEUR_MODE = 200, A_ENGINEHEUR_OPERATION_GRAPH = 201, A_ENGINEHEUR_RESULTS = 202,
  A_ENGINECFG_ENGINE = 300,
  A_PLAN_HANDLE = 400, A_PLAN_ENGINE_CONFIG = 401, A_PLAN_WORKSPACE_SIZE = 402, A_PLAN_JSON = 405,
  A_OP_PW_DESC = 750, A_OP_PW_X = 751, A_OP_PW_B = 752, A_OP_PW_Y = 753, A_OP_PW_ALPHA1 = 754,
  A_OP_PW_ALPHA2 = 755, A_OP_PW_T = 758,
  A_OPGRAPH_HANDLE = 800, A_OPGRAPH_OPS = 801,
  A_TENSOR_ALIGNMENT = 900, A_TENSOR_DATA_TYPE = 901, A_TENSOR_DIMS = 902, A_TENSOR_STRIDES = 903,
  A_TENSOR_UID = 906, A_TENSOR_VIRTUAL = 907, A_TENSOR_BY_VALUE = 908,
  A_VP_UIDS = 1000, A_VP_POINTERS = 1001, A_VP_WORKSPACE = 1003,
  A_ENGINE_GLOBAL_INDEX = 1301,
  A_MATMUL_COMP_TYPE = 1500, A_OP_MATMUL_A = 1520, A_OP_MATMUL_B = 1521, A_OP_MATMUL_C = 1522,
  A_OP_MATMUL_DESC = 1523,
  A_REDUCTION_OPERATOR = 1600, A_REDUCTION_COMP_TYPE = 1601,
  A_OP_RED_X = 1610, A_OP_RED_Y = 1611, A_OP_RED_DESC = 1612,
  A_OP_RESHAPE_X = 2200, A_OP_RESHAPE_Y = 2201,
};
enum { HEUR_MODE_A = 3 };

/* The entry points, resolved from the library. */
typedef struct
{
  size_t      (*get_version) (void);
  const char *(*get_error_string) (CudnnStatus);
  void        (*get_last_error_string) (char *, size_t);
  CudnnStatus (*create) (CudnnHandle *);
  CudnnStatus (*set_stream) (CudnnHandle, cudaStream_t);
  CudnnStatus (*create_desc) (int, CudnnDesc *);
  CudnnStatus (*destroy_desc) (CudnnDesc);
  CudnnStatus (*finalize) (CudnnDesc);
  CudnnStatus (*set_attr) (CudnnDesc, int, int, int64_t, const void *);
  CudnnStatus (*get_attr) (CudnnDesc, int, int, int64_t, int64_t *, void *);
  CudnnStatus (*execute) (CudnnHandle, CudnnDesc, CudnnDesc);
} CudnnApi;

static CudnnApi api;
static gboolean api_ok;          /* the library loaded, every symbol resolved, version >= 9.6 */
static char *api_why;            /* why not, or "cuDNN 9.x.y (path)" */
static size_t api_version;       /* cudnnGetVersion(): major * 10000 + minor * 100 + patch */
static CudnnHandle handle;       /* one per process, created on first use */
static int handle_device = -1;   /* the device it was created on */
static GMutex cudnn_lock;        /* handle, its stream and the plans built on it */

#define MIN_VERSION 90600        /* dQ's f32 accumulator needs no memset from 9.6 on */

static void
load_once (void)
{
  const char *path = g_getenv ("CASTSCOPE_CUDNN_LIB");
  void *lib;

  if (path != NULL && *path != '\0')
    {
      /* the dispatcher opens its sub-libraries by soname: load them from beside it first */
      static const char *const subs[] = { "libcudnn_graph.so.9", "libcudnn_engines_runtime_compiled.so.9",
                                          "libcudnn_engines_precompiled.so.9", "libcudnn_heuristic.so.9" };
      g_autofree char *dir = g_path_get_dirname (path);

      for (guint i = 0; i < G_N_ELEMENTS (subs); i++)
        {
          g_autofree char *sub = g_build_filename (dir, subs[i], NULL);

          (void) dlopen (sub, RTLD_NOW | RTLD_GLOBAL);
        }
    }
  else
    path = "libcudnn.so.9";
  lib = dlopen (path, RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL)
    {
      const char *e = dlerror ();

      api_why = g_strdup_printf ("cuDNN not loaded: %s", e ? e : path);
      return;
    }
#define SYM(field, name)                                                     \
  if ((*(void **) &api.field = dlsym (lib, name)) == NULL)                   \
    {                                                                        \
      api_why = g_strdup_printf ("cuDNN at %s lacks %s", path, name);        \
      return;                                                                \
    }
  SYM (get_version, "cudnnGetVersion");
  SYM (get_error_string, "cudnnGetErrorString");
  SYM (get_last_error_string, "cudnnGetLastErrorString");
  SYM (create, "cudnnCreate");
  SYM (set_stream, "cudnnSetStream");
  SYM (create_desc, "cudnnBackendCreateDescriptor");
  SYM (destroy_desc, "cudnnBackendDestroyDescriptor");
  SYM (finalize, "cudnnBackendFinalize");
  SYM (set_attr, "cudnnBackendSetAttribute");
  SYM (get_attr, "cudnnBackendGetAttribute");
  SYM (execute, "cudnnBackendExecute");
#undef SYM
  api_version = api.get_version ();
  if (api_version < MIN_VERSION || api_version >= 100000)
    {
      api_why = g_strdup_printf ("cuDNN %zu.%zu.%zu at %s: 9.6 to 9.x needed", api_version / 10000,
                                 api_version / 100 % 100, api_version % 100, path);
      return;
    }
  api_why = g_strdup_printf ("cuDNN %zu.%zu.%zu (%s)", api_version / 10000, api_version / 100 % 100,
                             api_version % 100, path);
  api_ok = TRUE;
}

static gboolean
loaded (void)
{
  static gsize once;

  if (g_once_init_enter (&once))
    {
      load_once ();
      g_debug ("%s", api_why);
      g_once_init_leave (&once, 1);
    }
  return api_ok;
}

/**
 * cs_cuda_cudnn_enabled:
 *
 * Whether device programs run attention through cuDNN: the environment variable
 * CASTSCOPE_CUDNN is not "0" (read on every call, for A/B runs in one process) and
 * libcudnn.so.9 (9.6 or newer) loaded (tried once per process; see the file's comment).
 * Returns: TRUE when cs_cuda_cudnn_sdpa_step() may be tried
 */
gboolean
cs_cuda_cudnn_enabled (void)
{
  return g_strcmp0 (g_getenv ("CASTSCOPE_CUDNN"), "0") != 0 && loaded ();
}

/** cs_cuda_cudnn_version: see cs-cuda-private.h. */
gsize
cs_cuda_cudnn_version (void)
{
  return loaded () ? api_version : 0;
}

/** cs_cuda_cudnn_saved_free: see cs-cuda-private.h. */
void
cs_cuda_cudnn_saved_free (gpointer saved)
{
  CsCudnnSaved *sv = saved;

  if (sv == NULL)
    return;
  g_free (sv->key);
  g_free (sv->json);
  g_free (sv);
}

/**
 * cs_cuda_cudnn_describe:
 *
 * The loaded library ("cuDNN 9.19.0 (libcudnn.so.9)") or why none is used, for logs and
 * benchmark notes.  Loads the library if that was not tried yet.
 * Returns: (transfer none): a static string
 */
const char *
cs_cuda_cudnn_describe (void)
{
  loaded ();
  return api_why;
}

/* ---- graph building ------------------------------------------------------------------------ */

#define MAX_DESCS 96

/* One graph (or plan) being built: every descriptor made (destroyed with it) and the first
 * failure. */
typedef struct
{
  CudnnDesc   descs[MAX_DESCS];   /* tensors and ops, destroyed once the plan is final */
  guint       n_descs;            /* entries of descs, <= MAX_DESCS */
  CudnnDesc   ops[40];            /* the operations, in order */
  guint       n_ops;              /* entries of ops, <= G_N_ELEMENTS (ops) */
  int64_t     next_uid;           /* virtual tensors' ids */
  CudnnStatus status;             /* first failure, CUDNN_STATUS_SUCCESS (0) if none */
  char        where[96];          /* the call that failed */
  char        last[512];          /* cudnnGetLastErrorString() right after it */
} Gb;

static void
gb_check (Gb *g, CudnnStatus st, const char *what)
{
  if (st != 0 && g->status == 0)
    {
      g->status = st;
      g_strlcpy (g->where, what, sizeof g->where);
      g->last[0] = '\0';
      api.get_last_error_string (g->last, sizeof g->last);
    }
}

static CudnnDesc
gb_desc (Gb *g, int type)
{
  CudnnDesc d = NULL;

  if (g->status != 0)
    return NULL;
  if (g->n_descs >= MAX_DESCS)
    {
      gb_check (g, 3 /* BAD_PARAM */, "too many descriptors");
      return NULL;
    }
  gb_check (g, api.create_desc (type, &d), "cudnnBackendCreateDescriptor");
  if (d != NULL)
    g->descs[g->n_descs++] = d;
  return d;
}

static void
gb_set (Gb *g, CudnnDesc d, int attr, int type, int64_t n, const void *v, const char *what)
{
  if (g->status == 0)
    gb_check (g, api.set_attr (d, attr, type, n, v), what);
}

static void
gb_final (Gb *g, CudnnDesc d, const char *what)
{
  if (g->status == 0)
    gb_check (g, api.finalize (d), what);
}

static void
gb_free (Gb *g)
{
  for (guint i = g->n_descs; i-- > 0;)
    api.destroy_desc (g->descs[i]);
  g->n_descs = 0;
}

/* A 4-d tensor: @uid (0: a new virtual one), dtype @dt, dims and strides; by value: a host
 * scalar bound at execution. */
static CudnnDesc
gb_tensor (Gb *g, int64_t uid, int dt, const int64_t *dims, const int64_t *strides, gboolean virt,
           gboolean by_value)
{
  CudnnDesc t = gb_desc (g, D_TENSOR);
  int64_t align = 16;
  gboolean v = virt, bv = by_value;

  if (uid == 0)
    uid = g->next_uid++;
  gb_set (g, t, A_TENSOR_DATA_TYPE, T_DATA_TYPE, 1, &dt, "tensor dtype");
  gb_set (g, t, A_TENSOR_DIMS, T_INT64, 4, dims, "tensor dims");
  gb_set (g, t, A_TENSOR_STRIDES, T_INT64, 4, strides, "tensor strides");
  gb_set (g, t, A_TENSOR_UID, T_INT64, 1, &uid, "tensor uid");
  gb_set (g, t, A_TENSOR_ALIGNMENT, T_INT64, 1, &align, "tensor alignment");
  if (v)
    gb_set (g, t, A_TENSOR_VIRTUAL, T_BOOLEAN, 1, &v, "tensor virtual");
  if (bv)
    gb_set (g, t, A_TENSOR_BY_VALUE, T_BOOLEAN, 1, &bv, "tensor by value");
  gb_final (g, t, "tensor finalize");
  return t;
}

/* A virtual tensor of @dt with @dims, packed row-major. */
static CudnnDesc
gb_virtual (Gb *g, int dt, int64_t d0, int64_t d1, int64_t d2, int64_t d3)
{
  int64_t dims[4] = { d0, d1, d2, d3 };
  int64_t st[4] = { d1 * d2 * d3, d2 * d3, d3, 1 };

  return gb_tensor (g, 0, dt, dims, st, TRUE, FALSE);
}

/* A by-value f32 scalar (uid @uid). */
static CudnnDesc
gb_scalar (Gb *g, int64_t uid)
{
  static const int64_t one[4] = { 1, 1, 1, 1 };

  return gb_tensor (g, uid, DT_FLOAT, one, one, FALSE, TRUE);
}

static void
gb_op (Gb *g, CudnnDesc op, const char *what)
{
  gb_final (g, op, what);
  if (g->status == 0 && g->n_ops < G_N_ELEMENTS (g->ops))
    g->ops[g->n_ops++] = op;
  else if (g->status == 0)
    gb_check (g, 3, "too many operations");
}

/* y = mode(x[, b[, t]]) with math precision @prec (GEN_INDEX: along @axis). */
static void
gb_pointwise (Gb *g, int mode, int prec, CudnnDesc x, CudnnDesc b, CudnnDesc t, CudnnDesc y, int64_t axis)
{
  CudnnDesc pw = gb_desc (g, D_POINTWISE), op;
  float one = 1.0f;

  gb_set (g, pw, A_POINTWISE_MODE, T_POINTWISE_MODE, 1, &mode, "pointwise mode");
  gb_set (g, pw, A_POINTWISE_MATH_PREC, T_DATA_TYPE, 1, &prec, "pointwise precision");
  if (mode == PW_GEN_INDEX)
    gb_set (g, pw, A_POINTWISE_AXIS, T_INT64, 1, &axis, "pointwise axis");
  gb_final (g, pw, "pointwise finalize");
  op = gb_desc (g, D_OP_POINTWISE);
  gb_set (g, op, A_OP_PW_DESC, T_DESC, 1, &pw, "pointwise op desc");
  gb_set (g, op, A_OP_PW_X, T_DESC, 1, &x, "pointwise x");
  if (b != NULL)
    gb_set (g, op, A_OP_PW_B, T_DESC, 1, &b, "pointwise b");
  if (t != NULL)
    gb_set (g, op, A_OP_PW_T, T_DESC, 1, &t, "pointwise t");
  gb_set (g, op, A_OP_PW_Y, T_DESC, 1, &y, "pointwise y");
  gb_set (g, op, A_OP_PW_ALPHA1, T_FLOAT, 1, &one, "pointwise alpha1");
  gb_set (g, op, A_OP_PW_ALPHA2, T_FLOAT, 1, &one, "pointwise alpha2");
  gb_op (g, op, "pointwise op finalize");
}

/* c = a @ b (f32 accumulation). */
static void
gb_matmul (Gb *g, CudnnDesc a, CudnnDesc b, CudnnDesc c)
{
  CudnnDesc mm = gb_desc (g, D_MATMUL), op;
  int comp = DT_FLOAT;

  gb_set (g, mm, A_MATMUL_COMP_TYPE, T_DATA_TYPE, 1, &comp, "matmul compute type");
  gb_final (g, mm, "matmul finalize");
  op = gb_desc (g, D_OP_MATMUL);
  gb_set (g, op, A_OP_MATMUL_A, T_DESC, 1, &a, "matmul a");
  gb_set (g, op, A_OP_MATMUL_B, T_DESC, 1, &b, "matmul b");
  gb_set (g, op, A_OP_MATMUL_C, T_DESC, 1, &c, "matmul c");
  gb_set (g, op, A_OP_MATMUL_DESC, T_DESC, 1, &mm, "matmul desc");
  gb_op (g, op, "matmul op finalize");
}

/* y = reduce(x) over the dims where y has extent 1. */
static void
gb_reduce (Gb *g, int red, CudnnDesc x, CudnnDesc y)
{
  CudnnDesc rd = gb_desc (g, D_REDUCTION), op;
  int comp = DT_FLOAT;

  gb_set (g, rd, A_REDUCTION_OPERATOR, T_REDUCTION_OP, 1, &red, "reduction operator");
  gb_set (g, rd, A_REDUCTION_COMP_TYPE, T_DATA_TYPE, 1, &comp, "reduction compute type");
  gb_final (g, rd, "reduction finalize");
  op = gb_desc (g, D_OP_REDUCTION);
  gb_set (g, op, A_OP_RED_X, T_DESC, 1, &x, "reduction x");
  gb_set (g, op, A_OP_RED_Y, T_DESC, 1, &y, "reduction y");
  gb_set (g, op, A_OP_RED_DESC, T_DESC, 1, &rd, "reduction desc");
  gb_op (g, op, "reduction op finalize");
}

/* y = x seen through another shape and strides (a transposed view). */
static void
gb_reshape (Gb *g, CudnnDesc x, CudnnDesc y)
{
  CudnnDesc op = gb_desc (g, D_OP_RESHAPE);

  gb_set (g, op, A_OP_RESHAPE_X, T_DESC, 1, &x, "reshape x");
  gb_set (g, op, A_OP_RESHAPE_Y, T_DESC, 1, &y, "reshape y");
  gb_op (g, op, "reshape op finalize");
}

/* The tensors' ids in the variant pack. */
enum
{
  U_Q = 1, U_K, U_V, U_O, U_STATS, U_DO, U_DQ, U_DK, U_DV, U_SCALE, U_NEGINF, U_ONE, U_DSUM, U_DQ_ACC,
  U_FIRST_VIRTUAL = 100,
};

/* The causal mask on scores @s ([b, h, sq, skv] f32): keep row >= col, else -inf. */
static CudnnDesc
gb_causal (Gb *g, const CsCudnnSdpa *d, CudnnDesc s, CudnnDesc neginf)
{
  CudnnDesc row = gb_virtual (g, DT_INT32, d->b, d->h, d->sq, d->skv);
  CudnnDesc col = gb_virtual (g, DT_INT32, d->b, d->h, d->sq, d->skv);
  CudnnDesc keep = gb_virtual (g, DT_BOOL, d->b, d->h, d->sq, d->skv);
  CudnnDesc out = gb_virtual (g, DT_FLOAT, d->b, d->h, d->sq, d->skv);

  gb_pointwise (g, PW_GEN_INDEX, DT_FLOAT, s, NULL, NULL, row, 2);
  gb_pointwise (g, PW_GEN_INDEX, DT_FLOAT, s, NULL, NULL, col, 3);
  gb_pointwise (g, PW_CMP_GE, DT_BOOL, row, col, NULL, keep, 0);
  gb_pointwise (g, PW_BINARY_SELECT, DT_FLOAT, s, neginf, keep, out, 0);
  return out;
}

/* @st with its last two strides swapped, as @dims (a transposed view). */
static void
swap_last (const int64_t *in, int64_t *out)
{
  out[0] = in[0];
  out[1] = in[1];
  out[2] = in[3];
  out[3] = in[2];
}

static int
cudnn_dtype (CsDtype dt)
{
  return dt == CS_DTYPE_BF16 ? DT_BF16 : DT_HALF;
}

static void
graph_forward (Gb *g, const CsCudnnSdpa *d)
{
  int io = cudnn_dtype (d->dtype);
  int64_t qd[4] = { d->b, d->h, d->sq, d->d }, ktd[4] = { d->b, d->h, d->d, d->skv }, kts[4];
  int64_t vd[4] = { d->b, d->h, d->skv, d->dv }, od[4] = { d->b, d->h, d->sq, d->dv };
  int64_t sd[4] = { d->b, d->h, d->sq, 1 };
  CudnnDesc q, kt, v, o, stats, scale, neginf, s, s1, m, e, z, lz, p, sub;

  swap_last (d->k_st, kts);
  q = gb_tensor (g, U_Q, io, qd, d->q_st, FALSE, FALSE);
  kt = gb_tensor (g, U_K, io, ktd, kts, FALSE, FALSE);
  v = gb_tensor (g, U_V, io, vd, d->v_st, FALSE, FALSE);
  o = gb_tensor (g, U_O, io, od, d->o_st, FALSE, FALSE);
  stats = gb_tensor (g, U_STATS, DT_FLOAT, sd, d->stats_st, FALSE, FALSE);
  scale = gb_scalar (g, U_SCALE);
  neginf = d->causal ? gb_scalar (g, U_NEGINF) : NULL;

  s = gb_virtual (g, DT_FLOAT, d->b, d->h, d->sq, d->skv);
  gb_matmul (g, q, kt, s);
  s1 = gb_virtual (g, DT_FLOAT, d->b, d->h, d->sq, d->skv);
  gb_pointwise (g, PW_MUL, DT_FLOAT, s, scale, NULL, s1, 0);
  if (d->causal)
    s1 = gb_causal (g, d, s1, neginf);
  m = gb_virtual (g, DT_FLOAT, d->b, d->h, d->sq, 1);
  gb_reduce (g, RED_MAX, s1, m);
  sub = gb_virtual (g, DT_FLOAT, d->b, d->h, d->sq, d->skv);
  gb_pointwise (g, PW_SUB, DT_FLOAT, s1, m, NULL, sub, 0);
  e = gb_virtual (g, DT_FLOAT, d->b, d->h, d->sq, d->skv);
  gb_pointwise (g, PW_EXP, DT_FLOAT, sub, NULL, NULL, e, 0);
  z = gb_virtual (g, DT_FLOAT, d->b, d->h, d->sq, 1);
  gb_reduce (g, RED_ADD, e, z);
  lz = gb_virtual (g, DT_FLOAT, d->b, d->h, d->sq, 1);
  gb_pointwise (g, PW_LOG, DT_FLOAT, z, NULL, NULL, lz, 0);
  gb_pointwise (g, PW_ADD, DT_FLOAT, m, lz, NULL, stats, 0);
  p = gb_virtual (g, io, d->b, d->h, d->sq, d->skv);
  gb_pointwise (g, PW_DIV, DT_FLOAT, e, z, NULL, p, 0);
  gb_matmul (g, p, v, o);
}

static void
graph_backward (Gb *g, const CsCudnnSdpa *d)
{
  int io = cudnn_dtype (d->dtype);
  int64_t b = d->b, h = d->h, sq = d->sq, skv = d->skv;
  int64_t qd[4] = { b, h, sq, d->d }, ktd[4] = { b, h, d->d, skv }, kd[4] = { b, h, skv, d->d };
  int64_t vtd[4] = { b, h, d->dv, skv }, od[4] = { b, h, sq, d->dv }, vd[4] = { b, h, skv, d->dv };
  int64_t sd[4] = { b, h, sq, 1 }, ss[4] = { h * sq, sq, 1, 1 };
  int64_t qacc_st[4] = { h * sq * d->d, sq * d->d, d->d, 1 };
  int64_t td[4] = { b, h, skv, sq }, ts[4] = { h * sq * skv, sq * skv, 1, skv };
  int64_t kts[4], vts[4];
  CudnnDesc q, kt, k2, vt, o, dO, stats, dq, dk, dv, scale, one, neginf;
  CudnnDesc dsum0, dsum1, dsum, s, s1, s2, pexp, pt, dp, dp1, ds, ds1, dst, dqacc;

  swap_last (d->k_st, kts);
  swap_last (d->v_st, vts);
  q = gb_tensor (g, U_Q, io, qd, d->q_st, FALSE, FALSE);
  kt = gb_tensor (g, U_K, io, ktd, kts, FALSE, FALSE);
  vt = gb_tensor (g, U_V, io, vtd, vts, FALSE, FALSE);
  o = gb_tensor (g, U_O, io, od, d->o_st, FALSE, FALSE);
  dO = gb_tensor (g, U_DO, io, od, d->do_st, FALSE, FALSE);
  stats = gb_tensor (g, U_STATS, DT_FLOAT, sd, d->stats_st, FALSE, FALSE);
  dq = gb_tensor (g, U_DQ, io, qd, d->dq_st, FALSE, FALSE);
  dk = gb_tensor (g, U_DK, io, kd, d->dk_st, FALSE, FALSE);
  dv = gb_tensor (g, U_DV, io, vd, d->dv_st, FALSE, FALSE);
  scale = gb_scalar (g, U_SCALE);
  one = gb_scalar (g, U_ONE);
  neginf = d->causal ? gb_scalar (g, U_NEGINF) : NULL;

  /* Dsum = rowsum(dO * O), kept in the workspace (f32 [b, h, sq, 1]) */
  dsum0 = gb_virtual (g, DT_FLOAT, b, h, sq, d->dv);
  gb_pointwise (g, PW_MUL, DT_FLOAT, dO, o, NULL, dsum0, 0);
  dsum1 = gb_virtual (g, DT_FLOAT, b, h, sq, 1);
  gb_reduce (g, RED_ADD, dsum0, dsum1);
  dsum = gb_tensor (g, U_DSUM, DT_FLOAT, sd, ss, FALSE, FALSE);
  gb_pointwise (g, PW_MUL, DT_FLOAT, dsum1, one, NULL, dsum, 0);

  /* P = exp(scale Q K^T [masked] - stats) */
  s = gb_virtual (g, DT_FLOAT, b, h, sq, skv);
  gb_matmul (g, q, kt, s);
  s1 = gb_virtual (g, DT_FLOAT, b, h, sq, skv);
  gb_pointwise (g, PW_MUL, DT_FLOAT, s, scale, NULL, s1, 0);
  s2 = gb_virtual (g, DT_FLOAT, b, h, sq, skv);
  gb_pointwise (g, PW_SUB, DT_FLOAT, s1, stats, NULL, s2, 0);
  if (d->causal)
    s2 = gb_causal (g, d, s2, neginf);
  pexp = gb_virtual (g, DT_FLOAT, b, h, sq, skv);
  gb_pointwise (g, PW_EXP, DT_FLOAT, s2, NULL, NULL, pexp, 0);

  /* dV = P^T dO */
  pt = gb_tensor (g, 0, io, td, ts, TRUE, FALSE);
  gb_reshape (g, pexp, pt);
  gb_matmul (g, pt, dO, dv);

  /* dS = P (dO V^T - Dsum) scale */
  dp = gb_virtual (g, DT_FLOAT, b, h, sq, skv);
  gb_matmul (g, dO, vt, dp);
  dp1 = gb_virtual (g, DT_FLOAT, b, h, sq, skv);
  gb_pointwise (g, PW_SUB, DT_FLOAT, dp, dsum, NULL, dp1, 0);
  ds = gb_virtual (g, DT_FLOAT, b, h, sq, skv);
  gb_pointwise (g, PW_MUL, DT_FLOAT, dp1, pexp, NULL, ds, 0);
  ds1 = gb_virtual (g, DT_FLOAT, b, h, sq, skv);
  gb_pointwise (g, PW_MUL, DT_FLOAT, ds, scale, NULL, ds1, 0);

  /* dK = dS^T Q */
  dst = gb_tensor (g, 0, io, td, ts, TRUE, FALSE);
  gb_reshape (g, ds1, dst);
  gb_matmul (g, dst, q, dk);

  /* dQ = dS K, accumulated in f32 (workspace), then cast */
  k2 = gb_tensor (g, 0, io, kd, d->k_st, TRUE, FALSE);
  gb_reshape (g, kt, k2);
  dqacc = gb_tensor (g, U_DQ_ACC, DT_FLOAT, qd, qacc_st, FALSE, FALSE);
  gb_matmul (g, ds1, k2, dqacc);
  gb_pointwise (g, PW_IDENTITY, DT_FLOAT, dqacc, NULL, NULL, dq, 0);
}

/* ---- plans --------------------------------------------------------------------------------- */

/* One finalized execution plan (shared by the steps of one problem). */
typedef struct
{
  CudnnDesc plan;          /* the execution plan */
  int64_t   workspace;     /* its workspace, bytes */
  int64_t   engine;        /* the engine's global index */
} CudnnPlan;

static void
plan_free (gpointer data)
{
  CudnnPlan *pl = data;

  if (pl->plan != NULL)
    api.destroy_desc (pl->plan);
  g_free (pl);
}

/* A step's problem, bound pointers and variant pack. */
struct _CsCudaCudnn
{
  CsCudnnSdpa desc;        /* the problem (its slots) */
  CudnnPlan  *plan;        /* owned by the program's plan table */
  float       scale;       /* by-value scalars: their host copies */
  float       neginf;      /* the causal mask's fill: -inf (-FLT_MAX before cuDNN 9.10) */
  float       one;         /* 1.0f */
  gsize       extra;       /* bytes of the workspace's front this step uses itself (Dsum, the
                              dQ accumulator, or the statistics nobody asked for) */
  CudnnDesc   pack;        /* the variant pack, once bound */
};

/** cs_cuda_cudnn_problem: see cs-cuda-private.h. */
const CsCudnnSdpa *
cs_cuda_cudnn_problem (const CsCudaCudnn *c)
{
  return &c->desc;
}

/* The problem's key: everything the graph is specialised on. */
static char *
plan_key (const CsCudnnSdpa *d)
{
  GString *s = g_string_new (NULL);
  const int64_t *sts[] = { d->q_st, d->k_st, d->v_st, d->o_st, d->stats_st, d->do_st, d->dq_st, d->dk_st, d->dv_st };

  g_string_append_printf (s, "%s %d %d b%" G_GINT64_FORMAT " h%" G_GINT64_FORMAT " q%" G_GINT64_FORMAT
                          " k%" G_GINT64_FORMAT " d%" G_GINT64_FORMAT " v%" G_GINT64_FORMAT " %.17g",
                          d->backward ? "bwd" : "fwd", (int) d->dtype, d->causal, d->b, d->h, d->sq, d->skv, d->d,
                          d->dv, d->scale);
  for (guint i = 0; i < G_N_ELEMENTS (sts); i++)
    g_string_append_printf (s, " [%" G_GINT64_FORMAT ",%" G_GINT64_FORMAT ",%" G_GINT64_FORMAT ",%"
                            G_GINT64_FORMAT "]", sts[i][0], sts[i][1], sts[i][2], sts[i][3]);
  return g_string_free (s, FALSE);
}

static char *
gb_error (const Gb *g)
{
  return g_strdup_printf ("%s: %s%s%s", g->where, api.get_error_string (g->status), g->last[0] ? ": " : "", g->last);
}

/* Builds the graph of @d and the first plan heuristics mode A offers that finalizes; NULL
 * with *@why set when none does.  Holds cudnn_lock. */
static CudnnPlan *
plan_build (const CsCudnnSdpa *d, char **why)
{
  Gb g = { .next_uid = U_FIRST_VIRTUAL };
  CudnnDesc graph, heur;
  CudnnDesc cfgs[16];
  int64_t n_cfg = 0;
  int mode = HEUR_MODE_A;
  CudnnPlan *pl = NULL;
  GString *tried = g_string_new (NULL);

  if (d->backward)
    graph_backward (&g, d);
  else
    graph_forward (&g, d);
  graph = gb_desc (&g, D_OPGRAPH);
  gb_set (&g, graph, A_OPGRAPH_OPS, T_DESC, g.n_ops, g.ops, "operation graph ops");
  gb_set (&g, graph, A_OPGRAPH_HANDLE, T_HANDLE, 1, &handle, "operation graph handle");
  gb_final (&g, graph, "operation graph finalize");
  heur = gb_desc (&g, D_ENGINEHEUR);
  gb_set (&g, heur, A_ENGINEHEUR_OPERATION_GRAPH, T_DESC, 1, &graph, "heuristics graph");
  gb_set (&g, heur, A_ENGINEHEUR_MODE, T_HEUR_MODE, 1, &mode, "heuristics mode");
  gb_final (&g, heur, "heuristics finalize");
  if (g.status == 0)
    gb_check (&g, api.get_attr (heur, A_ENGINEHEUR_RESULTS, T_DESC, 0, &n_cfg, NULL), "heuristics count");
  n_cfg = MIN (n_cfg, (int64_t) G_N_ELEMENTS (cfgs));
  for (int64_t i = 0; i < n_cfg; i++)
    cfgs[i] = gb_desc (&g, D_ENGINECFG);
  if (g.status == 0 && n_cfg > 0)
    gb_check (&g, api.get_attr (heur, A_ENGINEHEUR_RESULTS, T_DESC, n_cfg, &n_cfg, cfgs), "heuristics results");
  if (g.status == 0 && n_cfg == 0)
    {
      g.status = 3000;   /* NOT_SUPPORTED */
      g_strlcpy (g.where, "heuristics: no engine config", sizeof g.where);
      api.get_last_error_string (g.last, sizeof g.last);
    }
  for (int64_t i = 0; g.status == 0 && i < n_cfg; i++)
    {
      CudnnDesc plan = NULL;
      CudnnStatus st;
      int64_t got = 0, ws = 0, engine = -1;
      CudnnDesc eng = NULL;

      if (api.create_desc (D_PLAN, &plan) != 0)
        continue;
      st = api.set_attr (plan, A_PLAN_HANDLE, T_HANDLE, 1, &handle);
      if (st == 0)
        st = api.set_attr (plan, A_PLAN_ENGINE_CONFIG, T_DESC, 1, &cfgs[i]);
      if (st == 0)
        st = api.finalize (plan);
      if (st != 0)
        {
          char last[256] = "";

          api.get_last_error_string (last, sizeof last);
          g_string_append_printf (tried, "; config %" G_GINT64_FORMAT ": %s %s", i, api.get_error_string (st), last);
          api.destroy_desc (plan);
          continue;
        }
      api.get_attr (plan, A_PLAN_WORKSPACE_SIZE, T_INT64, 1, &got, &ws);
      if (api.create_desc (D_ENGINE, &eng) == 0)
        {
          if (api.get_attr (cfgs[i], A_ENGINECFG_ENGINE, T_DESC, 1, &got, &eng) == 0)
            api.get_attr (eng, A_ENGINE_GLOBAL_INDEX, T_INT64, 1, &got, &engine);
          api.destroy_desc (eng);
        }
      pl = g_new0 (CudnnPlan, 1);
      pl->plan = plan;
      pl->workspace = ws;
      pl->engine = engine;
      break;
    }
  if (pl == NULL)
    {
      if (g.status != 0)
        *why = gb_error (&g);
      else
        *why = g_strdup_printf ("no engine config finalized (%" G_GINT64_FORMAT " tried%s)", n_cfg, tried->str);
    }
  g_string_free (tried, TRUE);
  gb_free (&g);
  return pl;
}

/* The finalized @plan as cuDNN serialises it (CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION,
 * what cudnn-frontend's ExecutionPlan getJsonRepresentation reads), or NULL when cuDNN does not
 * serialise this plan's engine. */
static char *
plan_json (CudnnDesc plan)
{
  int64_t n = 0;
  char *text;

  if (api.get_attr (plan, A_PLAN_JSON, T_CHAR, 0, &n, NULL) != 0 || n <= 0 || n > (G_GINT64_CONSTANT (1) << 30))
    return NULL;
  text = g_malloc0 ((gsize) n + 1);
  if (api.get_attr (plan, A_PLAN_JSON, T_CHAR, n, &n, text) != 0 || text[0] == '\0')
    {
      g_free (text);
      return NULL;
    }
  return text;
}

/* A plan made again from its serialised form @sv (on a new plan descriptor: the JSON, the
 * handle, finalize; cudnn-frontend's ExecutionPlanBuilder loadFromJson), or NULL with *@why
 * set when cuDNN refuses it.  Holds cudnn_lock. */
static CudnnPlan *
plan_load (const CsCudnnSaved *sv, char **why)
{
  gsize len = strlen (sv->json);
  CudnnStatus st = 0;
  CudnnPlan *pl;

  /* the text without its NUL, as written; then with it, in case a release counts it */
  for (guint attempt = 0; attempt < 2; attempt++)
    {
      CudnnDesc plan = NULL;
      int64_t got = 0, ws = 0;

      if ((st = api.create_desc (D_PLAN, &plan)) != 0)
        break;
      st = api.set_attr (plan, A_PLAN_JSON, T_CHAR, (int64_t) (len + attempt), sv->json);
      if (st == 0)
        st = api.set_attr (plan, A_PLAN_HANDLE, T_HANDLE, 1, &handle);
      if (st == 0)
        st = api.finalize (plan);
      if (st == 0)
        st = api.get_attr (plan, A_PLAN_WORKSPACE_SIZE, T_INT64, 1, &got, &ws);
      if (st != 0)
        {
          api.destroy_desc (plan);
          continue;
        }
      pl = g_new0 (CudnnPlan, 1);
      pl->plan = plan;
      pl->workspace = ws;
      pl->engine = sv->engine;
      return pl;
    }
  {
    char last[256] = "";

    api.get_last_error_string (last, sizeof last);
    *why = g_strdup_printf ("loading the serialised plan: %s %s", api.get_error_string (st), last);
  }
  return NULL;
}

/* The serialised plan of problem @key in @p, or NULL. */
static CsCudnnSaved *
saved_find (CsCudaProgram *p, const char *key, guint *index)
{
  for (guint i = 0; p->cudnn_saved != NULL && i < p->cudnn_saved->len; i++)
    {
      CsCudnnSaved *sv = g_ptr_array_index (p->cudnn_saved, i);

      if (strcmp (sv->key, key) == 0)
        {
          *index = i;
          return sv;
        }
    }
  return NULL;
}

/**
 * cs_cuda_cudnn_sdpa_step:
 * @p: a device program being built (cs_cuda_cudnn_enabled() was TRUE for it)
 * @d: the problem: shapes, strides (elements) of the 4-d [b, h, rows, cols] views of its
 *   slots, dtype (bf16 or f16), causal flag (top-left, PyTorch's is_causal), scale
 * @label: (transfer full): the step's label
 * @why: (out): on FALSE, why cuDNN does not take the problem
 *
 * Finds the plan of @d (cached in the program by the problem's key), else loads it from its
 * serialised form in p->cudnn_saved (the plan file's, cs-cuda-plan.c), else builds it (and
 * keeps its serialised form there, for the plan file), and adds one
 * CS_CUDA_STEP_CUDNN step reading q, k, v (and backward o, dO, stats) and writing o and stats
 * (backward dQ, dK, dV).  The pointers are bound by cs_cuda_cudnn_bind() once the arena
 * exists.  Errors: none; FALSE means "run the attention kernels instead".
 * Returns: TRUE when the step was added
 */
gboolean
cs_cuda_cudnn_sdpa_step (CsCudaProgram *p, const CsCudnnSdpa *d, char *label, char **why)
{
  g_autofree char *key = NULL;
  g_autofree char *own_label = label;
  CudnnPlan *pl;
  CsCudaStep *step;
  CsCudaCudnn *c;
  double flops;
  guint reads[6], writes[3], nr = 0, nw = 0;

  *why = NULL;
  if (p->cudnn_consulted == NULL && g_strcmp0 (g_getenv ("CASTSCOPE_CUDNN"), "0") != 0)
    p->cudnn_consulted = g_strdup (cs_cuda_cudnn_describe ());
  if (!cs_cuda_cudnn_enabled ())
    {
      *why = g_strdup (cs_cuda_cudnn_describe ());
      return FALSE;
    }
  if (d->dtype != CS_DTYPE_BF16 && d->dtype != CS_DTYPE_F16)
    {
      *why = g_strdup ("not bf16 or f16");
      return FALSE;
    }
  if (d->d % 8 != 0 || d->dv % 8 != 0 || d->d > 128 || d->dv > 128 || (d->sq == 1 && d->skv == 1))
    {
      *why = g_strdup_printf ("head dims %" G_GINT64_FORMAT "/%" G_GINT64_FORMAT " or 1 x 1 scores", d->d, d->dv);
      return FALSE;
    }
  /* the releases cudnn-frontend's sdpa nodes refuse or work around (known bugs): 9.10.0 and
     9.10.1 altogether, and up to 9.15 a backward whose key count is not a multiple of 128
     (the frontend adds a padding mask there; we run the kernels instead) */
  if (api_version == 91000 || api_version == 91001 || (d->backward && api_version <= 91500 && d->skv % 128 != 0))
    {
      *why = g_strdup_printf ("cuDNN %zu with %s S = %" G_GINT64_FORMAT " (a known bug of that release)", api_version,
                              d->backward ? "backward" : "forward", d->skv);
      return FALSE;
    }
  key = plan_key (d);
  g_mutex_lock (&cudnn_lock);
  if (handle == NULL)
    {
      CudnnStatus st = api.create (&handle);

      if (st != 0)
        {
          g_mutex_unlock (&cudnn_lock);
          *why = g_strdup_printf ("cudnnCreate: %s", api.get_error_string (st));
          handle = NULL;
          return FALSE;
        }
      handle_device = p->device;
    }
  if (handle_device != p->device)
    {
      g_mutex_unlock (&cudnn_lock);
      *why = g_strdup ("the cuDNN handle belongs to another device");
      return FALSE;
    }
  if (p->cudnn_plans == NULL)
    p->cudnn_plans = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, plan_free);
  pl = g_hash_table_lookup (p->cudnn_plans, key);
  if (pl == NULL)
    {
      gint64 t0 = g_get_monotonic_time ();
      guint at = 0;
      CsCudnnSaved *sv = saved_find (p, key, &at);
      gboolean from_saved = FALSE;

      if (sv != NULL)
        {
          g_autofree char *no = NULL;

          pl = plan_load (sv, &no);
          from_saved = pl != NULL;
          if (pl != NULL)
            p->n_cudnn_loaded++;
          else
            {
              g_debug ("cuDNN sdpa %s: %s; building it", key, no);
              g_ptr_array_remove_index (p->cudnn_saved, at);
              p->plan_stale = TRUE;   /* the file is written again with the new plan */
            }
        }
      if (pl == NULL)
        {
          pl = plan_build (d, why);
          if (pl != NULL)
            {
              CsCudnnSaved *nsv = g_new0 (CsCudnnSaved, 1);

              nsv->json = plan_json (pl->plan);
              if (nsv->json != NULL)
                {
                  nsv->key = g_strdup (key);
                  nsv->workspace = pl->workspace;
                  nsv->engine = pl->engine;
                  if (p->cudnn_saved == NULL)
                    p->cudnn_saved = g_ptr_array_new_with_free_func (cs_cuda_cudnn_saved_free);
                  g_ptr_array_add (p->cudnn_saved, nsv);
                  p->cudnn_version = api_version;
                }
              else
                cs_cuda_cudnn_saved_free (nsv);
            }
        }
      p->cudnn_ms += (double) (g_get_monotonic_time () - t0) / 1000.0;
      if (pl == NULL)
        {
          g_mutex_unlock (&cudnn_lock);
          g_debug ("cuDNN sdpa %s: %s", key, *why);
          return FALSE;
        }
      g_debug ("cuDNN sdpa %s: engine %" G_GINT64_FORMAT ", workspace %" G_GINT64_FORMAT " bytes, %s in %.1f ms", key,
               pl->engine, pl->workspace, from_saved ? "loaded" : "built",
               (double) (g_get_monotonic_time () - t0) / 1000.0);
      g_hash_table_insert (p->cudnn_plans, g_strdup (key), pl);
      p->n_cudnn_plans++;
    }
  g_mutex_unlock (&cudnn_lock);

  c = g_new0 (CsCudaCudnn, 1);
  c->desc = *d;
  c->plan = pl;
  c->scale = (float) d->scale;
  c->neginf = api_version < 91000 ? -G_MAXFLOAT : -INFINITY;   /* older engines want the lowest finite */
  c->one = 1.0f;
  if (d->backward)
    c->extra = CS_CUDA_ALIGN_UP ((gsize) (d->b * d->h * d->sq) * 4)
               + CS_CUDA_ALIGN_UP ((gsize) (d->b * d->h * d->sq * d->d) * 4);
  else if (d->stats < 0)
    c->extra = CS_CUDA_ALIGN_UP ((gsize) (d->b * d->h * d->sq) * 4);
  p->cudnn_workspace_bytes = MAX (p->cudnn_workspace_bytes, c->extra + (gsize) pl->workspace);

  step = cs_cuda_program_add_step (p, CS_CUDA_STEP_CUDNN, "attention", g_steal_pointer (&own_label));
  step->cudnn = c;
  if (d->backward)
    {
      reads[nr++] = (guint) d->q;
      reads[nr++] = (guint) d->k;
      reads[nr++] = (guint) d->v;
      reads[nr++] = (guint) d->o;
      reads[nr++] = (guint) d->dO;
      reads[nr++] = (guint) d->stats;
      writes[nw++] = (guint) d->dQ;
      writes[nw++] = (guint) d->dK;
      writes[nw++] = (guint) d->dV;
      flops = 2.0 * (double) (d->b * d->h) * (double) d->sq * (double) d->skv * (double) (3 * d->d + 2 * d->dv);
    }
  else
    {
      reads[nr++] = (guint) d->q;
      reads[nr++] = (guint) d->k;
      reads[nr++] = (guint) d->v;
      writes[nw++] = (guint) d->o;
      if (d->stats >= 0)
        writes[nw++] = (guint) d->stats;
      flops = 2.0 * (double) (d->b * d->h) * (double) d->sq * (double) d->skv * (double) (d->d + d->dv);
    }
  if (d->causal)
    flops *= 0.5;
  step->bytes = 0;
  for (guint i = 0; i < nr; i++)
    {
      const CsCudaSlot *s = cs_cuda_program_slot (p, reads[i]);

      g_array_append_val (step->reads, reads[i]);
      step->bytes += (double) cs_cuda_slot_numel (s) * (double) cs_dtype_size_bytes (s->dtype);
    }
  for (guint i = 0; i < nw; i++)
    {
      const CsCudaSlot *s = cs_cuda_program_slot (p, writes[i]);

      g_array_append_val (step->writes, writes[i]);
      step->bytes += (double) cs_cuda_slot_numel (s) * (double) cs_dtype_size_bytes (s->dtype);
    }
  step->flops = flops;
  step->floor_ms = MAX (step->bytes / (CS_CUDA_PEAK_TBPS * 1e12), flops / (CS_CUDA_PEAK_BF16_TFLOPS * 1e12)) * 1e3;
  return TRUE;
}

/**
 * cs_cuda_cudnn_bind:
 * @p: a device program whose arena and cuDNN workspace (p->cudnn_workspace) are allocated
 * @c: one of its cuDNN steps
 *
 * Makes the step's variant pack: the device pointers of its slots, the workspace (the step's
 * own f32 buffers at its front, cuDNN's after them) and the host scalars.
 * Errors: CS_CUDA_ERROR_RUNTIME with cuDNN's message.
 * Returns: TRUE on success
 */
gboolean
cs_cuda_cudnn_bind (CsCudaProgram *p, CsCudaCudnn *c, GError **error)
{
  const CsCudnnSdpa *d = &c->desc;
  Gb g = { 0 };
  int64_t uids[16];
  void *ptrs[16];
  int64_t n = 0;
  char *ws = p->cudnn_workspace;
  void *cudnn_ws = ws + c->extra;
  CudnnDesc pack;

#define PUT(uid, ptr) (uids[n] = (uid), ptrs[n] = (ptr), n++)
  PUT (U_Q, cs_cuda_program_slot_ptr (p, (guint) d->q));
  PUT (U_K, cs_cuda_program_slot_ptr (p, (guint) d->k));
  PUT (U_V, cs_cuda_program_slot_ptr (p, (guint) d->v));
  PUT (U_SCALE, &c->scale);
  if (d->causal)
    PUT (U_NEGINF, &c->neginf);
  if (d->backward)
    {
      PUT (U_O, cs_cuda_program_slot_ptr (p, (guint) d->o));
      PUT (U_DO, cs_cuda_program_slot_ptr (p, (guint) d->dO));
      PUT (U_STATS, cs_cuda_program_slot_ptr (p, (guint) d->stats));
      PUT (U_DQ, cs_cuda_program_slot_ptr (p, (guint) d->dQ));
      PUT (U_DK, cs_cuda_program_slot_ptr (p, (guint) d->dK));
      PUT (U_DV, cs_cuda_program_slot_ptr (p, (guint) d->dV));
      PUT (U_ONE, &c->one);
      PUT (U_DSUM, ws);
      PUT (U_DQ_ACC, ws + CS_CUDA_ALIGN_UP ((gsize) (d->b * d->h * d->sq) * 4));
    }
  else
    {
      PUT (U_O, cs_cuda_program_slot_ptr (p, (guint) d->o));
      PUT (U_STATS, d->stats >= 0 ? cs_cuda_program_slot_ptr (p, (guint) d->stats) : ws);
    }
#undef PUT
  if (api.create_desc (D_VARIANT_PACK, &pack) != 0)
    {
      g_set_error (error, CS_CUDA_ERROR, CS_CUDA_ERROR_RUNTIME, "cuDNN: no variant pack");
      return FALSE;
    }
  g.descs[g.n_descs++] = pack;
  gb_set (&g, pack, A_VP_UIDS, T_INT64, n, uids, "variant pack ids");
  gb_set (&g, pack, A_VP_POINTERS, T_VOID_PTR, n, ptrs, "variant pack pointers");
  gb_set (&g, pack, A_VP_WORKSPACE, T_VOID_PTR, 1, &cudnn_ws, "variant pack workspace");
  gb_final (&g, pack, "variant pack finalize");
  if (g.status != 0)
    {
      g_autofree char *msg = gb_error (&g);

      gb_free (&g);
      g_set_error (error, CS_CUDA_ERROR, CS_CUDA_ERROR_RUNTIME, "cuDNN: %s", msg);
      return FALSE;
    }
  if (c->pack != NULL)
    api.destroy_desc (c->pack);
  c->pack = pack;
  return TRUE;
}

/**
 * cs_cuda_cudnn_run:
 * @p: the program
 * @c: a bound cuDNN step
 *
 * Enqueues the step on p->stream (cudnnSetStream, cudnnBackendExecute): no host sync, so a
 * stream capture records it into the program's CUDA graph.
 * Errors: CS_CUDA_ERROR_RUNTIME with cuDNN's message.
 * Returns: TRUE on success
 */
gboolean
cs_cuda_cudnn_run (CsCudaProgram *p, CsCudaCudnn *c, GError **error)
{
  CudnnStatus st;

  g_mutex_lock (&cudnn_lock);
  st = api.set_stream (handle, p->stream);
  if (st == 0)
    st = api.execute (handle, c->plan->plan, c->pack);
  if (st != 0)
    {
      char last[512] = "";

      api.get_last_error_string (last, sizeof last);
      g_mutex_unlock (&cudnn_lock);
      g_set_error (error, CS_CUDA_ERROR, CS_CUDA_ERROR_RUNTIME, "cudnnBackendExecute: %s %s",
                   api.get_error_string (st), last);
      return FALSE;
    }
  g_mutex_unlock (&cudnn_lock);
  return TRUE;
}

/**
 * cs_cuda_cudnn_free:
 * @c: (nullable): a step's cuDNN part
 *
 * Frees the step's variant pack and itself; the plan belongs to the program's table.
 */
void
cs_cuda_cudnn_free (CsCudaCudnn *c)
{
  if (c == NULL)
    return;
  if (c->pack != NULL)
    api.destroy_desc (c->pack);
  g_free (c);
}
