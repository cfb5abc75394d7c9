/* cs-cuda-blas.c: matmul and linear through cuBLASLt.
 *
 * Row-major tensors on a column-major library by the operand swap (reference/gpu-executor.md
 * 2.1; llm.c matmul_cublaslt, PyTorch CuBlasLtMatrixLayout): D[M,N] = A[M,K] B[K,N] is computed as
 * D^T (N x M, col-major, ld N) = B^T (N x K) A^T (K x M).  A transposed view (a permute in the
 * trace) becomes a transpose flag; nothing is materialised.  bf16/f16 operands accumulate in f32
 * (CUBLAS_COMPUTE_32F) on tensor cores; f32 runs as true f32 unless the policy allows TF32
 * (CUBLAS_COMPUTE_32F_FAST_TF32); f64 uses CUBLAS_COMPUTE_64F.
 */
#include "cs-config.h"

#include "cs-cuda-private.h"

#include <stdio.h>
#include <string.h>

struct _CsCudaGemm
{
  guint              slot_a;       /* cuBLAS "A" = our right operand B [.., K, N] */
  guint              slot_b;       /* cuBLAS "B" = our left operand A [.., M, K] */
  guint              slot_d;       /* D [.., M, N], contiguous */
  gint               slot_bias;    /* bias [N] or -1 (with bgrad: the bias gradient [M] written) */
  gboolean           bgrad;        /* epilogue BGRADB: slot_bias receives sum_k A[i, k] */
  CsDtype            dtype;        /* operand and output dtype */
  int64_t            m, n, k;      /* col-major problem: m = N, n = M, k = K */
  cublasOperation_t  ta, tb;       /* transpose flags of cuBLAS A and B */
  int64_t            a_rows, a_cols, lda;  /* stored layout of cuBLAS A */
  int64_t            b_rows, b_cols, ldb;  /* stored layout of cuBLAS B */
  int64_t            ldd;          /* = m */
  int                batch;        /* batch count, 1 = plain */
  int64_t            stride_a, stride_b, stride_d; /* batch strides, elements (0 = broadcast) */
  gboolean           tf32;         /* f32 operands may use TF32 */
  /* the fields above are the problem (CsCudaGemmProblem); the rest is the plan */

  cublasLtMatmulDesc_t    op;      /* built by cs_cuda_gemm_plan */
  cublasLtMatrixLayout_t  la, lb, ld; /* layouts of cuBLAS A, B and D */
  cublasLtMatmulAlgo_t    algo;       /* the algorithm run (heuristic or stored) */
  gboolean                planned;    /* op, la, lb, ld and algo are set */
  gboolean                stored;   /* algo came from the plan file (cs_cuda_gemm_set_stored_algo):
                                       planning takes it without a query or check */
  gboolean                borrowed; /* op, la, lb, ld belong to an identical GEMM of the same
                                       program (cs_cuda_gemm_plan's @plans); not destroyed here */
};

static cudaDataType_t
cuda_type (CsDtype dt)
{
  switch (dt)
    {
    case CS_DTYPE_BF16: return CUDA_R_16BF;
    case CS_DTYPE_F16:  return CUDA_R_16F;
    case CS_DTYPE_F32:  return CUDA_R_32F;
    case CS_DTYPE_F64:  return CUDA_R_64F;
    default:            return CUDA_R_32F;
    }
}

/* A logical [R, C] matrix with strides (sr, sc) as a col-major stored matrix such that op(X)
 * is C x R (the transpose of the row-major view).  FALSE when neither layout fits. */
static gboolean
describe_operand (int64_t R, int64_t C, int64_t sr, int64_t sc, cublasOperation_t *op,
                  int64_t *rows, int64_t *cols, int64_t *ld)
{
  if (C == 1)
    sc = 1;
  if (R == 1)
    sr = C;
  if (sc == 1 && sr >= C)
    {
      *op = CUBLAS_OP_N;
      *rows = C;
      *cols = R;
      *ld = MAX (sr, 1);
      return TRUE;
    }
  if (sr == 1 && sc >= R)
    {
      *op = CUBLAS_OP_T;
      *rows = R;
      *cols = C;
      *ld = MAX (sc, 1);
      return TRUE;
    }
  return FALSE;
}

/* Batch stride of the leading dims [0, nb) of @s if they flatten to one uniform stride;
 * 0 when the slot has no batch dims.  FALSE if they do not flatten. */
static gboolean
batch_stride (const CsCudaSlot *s, guint nb, int64_t *stride)
{
  if (nb == 0)
    {
      *stride = 0;
      return TRUE;
    }
  for (guint i = 0; i + 1 < nb; i++)
    if (s->shape[i + 1] != 1 && s->strides[i] != s->strides[i + 1] * s->shape[i + 1])
      return FALSE;
  *stride = s->strides[nb - 1];
  return TRUE;
}

CsCudaGemm *
cs_cuda_gemm_new (CsCudaProgram *p, guint a, guint b, guint d, gint bias, double *flops,
                  GError **error)
{
  CsCudaSlot *sa = cs_cuda_program_slot (p, a);
  CsCudaSlot *sb = cs_cuda_program_slot (p, b);
  CsCudaSlot *sd = cs_cuda_program_slot (p, d);
  g_autofree CsCudaGemm *g = g_new0 (CsCudaGemm, 1);
  int64_t M, N, K, batch = 1;
  int64_t sam, sak, sbk, sbn;

  if (sa->rank < 2 || sb->rank < 2)
    {
      g_set_error (error, CS_CUDA_ERROR, CS_CUDA_ERROR_UNSUPPORTED,
                   "matmul of a 1-D tensor is not supported by the CUDA executor");
      return NULL;
    }
  if (sa->dtype != sb->dtype || sa->dtype != sd->dtype
      || (sa->dtype != CS_DTYPE_BF16 && sa->dtype != CS_DTYPE_F16 && sa->dtype != CS_DTYPE_F32
          && sa->dtype != CS_DTYPE_F64))
    {
      g_set_error (error, CS_CUDA_ERROR, CS_CUDA_ERROR_UNSUPPORTED,
                   "matmul operands %s @ %s -> %s: cuBLASLt path needs one float dtype",
                   cs_dtype_short_name (sa->dtype), cs_dtype_short_name (sb->dtype),
                   cs_dtype_short_name (sd->dtype));
      return NULL;
    }
  M = sa->shape[sa->rank - 2];
  K = sa->shape[sa->rank - 1];
  N = sb->shape[sb->rank - 1];
  if (sb->shape[sb->rank - 2] != K)
    {
      g_set_error (error, CS_CUDA_ERROR, CS_CUDA_ERROR_INPUT, "matmul shapes disagree: K %" G_GINT64_FORMAT
                   " vs %" G_GINT64_FORMAT, K, sb->shape[sb->rank - 2]);
      return NULL;
    }
  sam = sa->strides[sa->rank - 2];
  sak = sa->strides[sa->rank - 1];
  sbk = sb->strides[sb->rank - 2];
  sbn = sb->strides[sb->rank - 1];

  /* Fold A's batch dims into M when B has none and A is row-major over (batch..., M). */
  if (sa->rank > 2 && sb->rank == 2)
    {
      gboolean fold = (sak == 1 || K == 1);

      for (guint i = 0; fold && i + 1 < sa->rank - 1; i++)
        if (sa->shape[i + 1] != 1 && sa->strides[i] != sa->strides[i + 1] * sa->shape[i + 1])
          fold = FALSE;
      if (fold)
        {
          for (guint i = 0; i < sa->rank - 2; i++)
            M *= sa->shape[i];
        }
      else
        {
          for (guint i = 0; i < sa->rank - 2; i++)
            batch *= sa->shape[i];
          if (!batch_stride (sa, sa->rank - 2, &g->stride_b))
            goto bad_layout;
          g->stride_a = 0;
        }
    }
  else if (sa->rank > 2 || sb->rank > 2)
    {
      const CsCudaSlot *big = sa->rank >= sb->rank ? sa : sb;

      for (guint i = 0; i < big->rank - 2; i++)
        batch *= big->shape[i];
      if (sa->rank > 2 && sb->rank > 2)
        {
          if (sa->rank != sb->rank)
            goto bad_layout;
          for (guint i = 0; i < sa->rank - 2; i++)
            if (sa->shape[i] != sb->shape[i])
              goto bad_layout;
        }
      if (!batch_stride (sa, sa->rank - 2, &g->stride_b)
          || !batch_stride (sb, sb->rank - 2, &g->stride_a))
        goto bad_layout;
    }
  g->batch = (int) batch;
  g->stride_d = M * N;

  if (!describe_operand (K, N, sbk, sbn, &g->ta, &g->a_rows, &g->a_cols, &g->lda)
      || !describe_operand (M, K, sam, sak, &g->tb, &g->b_rows, &g->b_cols, &g->ldb))
    goto bad_layout;
  /* After folding, A's row stride must cover the folded M: it does since it is row-major. */

  g->slot_a = b;
  g->slot_b = a;
  g->slot_d = d;
  g->slot_bias = bias;
  g->dtype = sa->dtype;
  g->m = N;
  g->n = M;
  g->k = K;
  g->ldd = N;
  g->tf32 = p->policy.allow_tf32;
  if (flops)
    *flops = 2.0 * (double) M * (double) N * (double) K * (double) batch;
  return g_steal_pointer (&g);

bad_layout:
  g_set_error (error, CS_CUDA_ERROR, CS_CUDA_ERROR_UNSUPPORTED,
               "matmul operand layout not expressible for cuBLASLt (strides %" G_GINT64_FORMAT ",%"
               G_GINT64_FORMAT " and %" G_GINT64_FORMAT ",%" G_GINT64_FORMAT ")",
               sam, sak, sbk, sbn);
  return NULL;
}

gboolean
cs_cuda_gemm_set_bias_grad (CsCudaGemm *g, guint bgrad)
{
  /* our A [M, K] is cuBLAS's B (transposed): its sum over k is the bias gradient, one value per
     column of cuBLAS's D (n = M) */
  if (g->slot_bias >= 0 || g->batch != 1 || g->ta != CUBLAS_OP_N || g->tb != CUBLAS_OP_T
      || (g->dtype != CS_DTYPE_BF16 && g->dtype != CS_DTYPE_F16))
    return FALSE;
  g->slot_bias = (gint) bgrad;
  g->bgrad = TRUE;
  return TRUE;
}

static gboolean
set_batch (cublasLtMatrixLayout_t l, int batch, int64_t stride, GError **error)
{
  gboolean ok = FALSE;

  if (batch <= 1)
    return TRUE;
  CS_CUBLAS_CHECK (cublasLtMatrixLayoutSetAttribute (l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch,
                                                     sizeof batch), error);
  CS_CUBLAS_CHECK (cublasLtMatrixLayoutSetAttribute (l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                     &stride, sizeof stride), error);
  ok = TRUE;
out:
  return ok;
}

#define CS_GEMM_TOP_K 8   /* algorithms asked of the heuristic and timed */

/* Autotuning results, shared by the programs of this process and kept on disk: a key naming the
 * problem (shape, layouts, types, epilogue) -> the fastest algorithm measured. */
static char *gemm_key (CsCudaGemm *g);

static GHashTable *tuned;                 /* char* -> cublasLtMatmulAlgo_t*; guarded by `tuned` */
static char       *tuned_path;            /* the disk copy for this device and cuBLASLt, or NULL */
G_LOCK_DEFINE_STATIC (tuned);

/* The file that keeps this device's tuned algorithms: one per compute capability, SM count and
 * cuBLASLt version, since an algorithm is valid only for the cuBLASLt that produced it (the
 * cuBLASLt docs: cublasLtMatmulAlgo_t "can be trivially serialized and later restored for use
 * with the same version of cuBLAS library").  NULL when CASTSCOPE_NO_CACHE=1. */
static char *
tuned_file (CsCudaProgram *p)
{
  g_autofree char *dir = NULL;
  g_autofree char *name = NULL;

  if (g_strcmp0 (g_getenv ("CASTSCOPE_NO_CACHE"), "1") == 0)
    return NULL;
  dir = cs_cuda_jit_cache_dir ();
  name = g_strdup_printf ("gemm-algos-sm%d%d-%dsm-cublaslt%zu.tsv", p->cc_major, p->cc_minor,
                          p->n_sms, cublasLtGetVersion ());
  return g_build_filename (dir, name, NULL);
}

/* Creates the table on first use and fills it from the disk copy: lines `KEY<TAB>HEX`, HEX the
 * algorithm's bytes; a line that does not read as one (a torn write) is skipped.  Call with the
 * lock held. */
static void
tuned_load_locked (CsCudaProgram *p)
{
  g_autofree char *text = NULL;
  g_auto(GStrv) lines = NULL;

  if (tuned != NULL)
    return;
  tuned = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  tuned_path = tuned_file (p);
  if (tuned_path == NULL || !g_file_get_contents (tuned_path, &text, NULL, NULL))
    return;
  lines = g_strsplit (text, "\n", -1);
  for (guint i = 0; lines[i] != NULL; i++)
    {
      const char *tab = strchr (lines[i], '\t');
      cublasLtMatmulAlgo_t algo;
      guchar *bytes = (guchar *) &algo;
      gboolean good = tab != NULL && strlen (tab + 1) == 2 * sizeof algo;

      for (gsize k = 0; good && k < sizeof algo; k++)
        {
          int hi = g_ascii_xdigit_value (tab[1 + 2 * k]), lo = g_ascii_xdigit_value (tab[2 + 2 * k]);

          good = hi >= 0 && lo >= 0;
          bytes[k] = (guchar) (hi * 16 + lo);
        }
      if (good)
        g_hash_table_replace (tuned, g_strndup (lines[i], (gsize) (tab - lines[i])),
                              g_memdup2 (&algo, sizeof algo));
    }
}

/* Appends KEY's algorithm to the disk copy (one write of one line; a failed write only means
 * the next process tunes again). */
static void
tuned_append (const char *key, const cublasLtMatmulAlgo_t *algo)
{
  g_autoptr(GString) line = g_string_new (key);
  g_autofree char *dir = NULL;
  const guchar *bytes = (const guchar *) algo;
  FILE *f;

  if (tuned_path == NULL)
    return;
  g_string_append_c (line, '\t');
  for (gsize k = 0; k < sizeof *algo; k++)
    g_string_append_printf (line, "%02x", bytes[k]);
  g_string_append_c (line, '\n');
  dir = g_path_get_dirname (tuned_path);
  if (g_mkdir_with_parents (dir, 0755) != 0 || (f = fopen (tuned_path, "a")) == NULL)
    return;
  fwrite (line->str, 1, line->len, f);
  fclose (f);
}

/* The algorithm already tuned for @g's problem @key (gemm_key; this process or an earlier one), checked with
 * cublasLtMatmulAlgoCheck against @g's descriptors; FALSE when there is none or it no longer
 * applies. */
static gboolean
tuned_lookup (CsCudaProgram *p, CsCudaGemm *g, const char *key)
{
  cublasLtMatmulAlgo_t algo;
  cublasLtMatmulHeuristicResult_t check;
  gboolean hit;

  G_LOCK (tuned);
  tuned_load_locked (p);
  {
    cublasLtMatmulAlgo_t *a = g_hash_table_lookup (tuned, key);

    hit = a != NULL;
    if (hit)
      algo = *a;
  }
  G_UNLOCK (tuned);
  if (!hit)
    return FALSE;
  if (g_strcmp0 (g_getenv ("CASTSCOPE_GEMM_CHECK_CACHED"), "0") != 0
      && (cublasLtMatmulAlgoCheck (p->lt, g->op, g->la, g->lb, g->ld, g->ld, &algo, &check)
            != CUBLAS_STATUS_SUCCESS
          || check.workspaceSize > p->workspace_bytes))
    return FALSE;
  g->algo = algo;
  return TRUE;
}

static char *
gemm_key (CsCudaGemm *g)
{
  return g_strdup_printf ("%d %" G_GINT64_FORMAT " %" G_GINT64_FORMAT " %" G_GINT64_FORMAT " %d %d %"
                          G_GINT64_FORMAT " %" G_GINT64_FORMAT " %d %" G_GINT64_FORMAT " %" G_GINT64_FORMAT
                          " %" G_GINT64_FORMAT " %d %d", (int) g->dtype, g->m, g->n, g->k, (int) g->ta,
                          (int) g->tb, g->lda, g->ldb, g->batch, g->stride_a, g->stride_b, g->stride_d,
                          g->slot_bias < 0 ? 0 : g->bgrad ? 2 : 1, g->tf32);
}

/* Times the heuristic's top algorithms on the program's own buffers (before any input is set,
 * so nothing meaningful is overwritten) and keeps the fastest: the heuristic's first choice is
 * 5-10 % off the best on the smaller GEMMs (reference/gpu-executor.md 1 and 2.3).  One warm-up
 * then the best of 3 single launches per algorithm; algorithms that fail to launch are skipped.
 * @key: gemm_key (@g). */
static gboolean
gemm_autotune (CsCudaProgram *p, CsCudaGemm *g, const char *key,
               const cublasLtMatmulHeuristicResult_t *heur, int n, GError **error)
{
  cudaEvent_t e0 = NULL, e1 = NULL;
  float best_ms = G_MAXFLOAT;
  gboolean ok = FALSE;
  cublasLtMatmulAlgo_t *hit;

  G_LOCK (tuned);
  tuned_load_locked (p);
  G_UNLOCK (tuned);

  CS_CU_CHECK (cudaEventCreate (&e0), error);
  CS_CU_CHECK (cudaEventCreate (&e1), error);
  for (int i = 0; i < n; i++)
    {
      float t_min = G_MAXFLOAT;

      if (heur[i].state != CUBLAS_STATUS_SUCCESS)
        continue;
      g->algo = heur[i].algo;
      if (!cs_cuda_gemm_run (p, g, 0, NULL))
        continue;
      for (int r = 0; r < 3; r++)
        {
          float ms = 0;

          CS_CU_CHECK (cudaEventRecord (e0, p->stream), error);
          if (!cs_cuda_gemm_run (p, g, 0, error))
            goto out;
          CS_CU_CHECK (cudaEventRecord (e1, p->stream), error);
          CS_CU_CHECK (cudaEventSynchronize (e1), error);
          CS_CU_CHECK (cudaEventElapsedTime (&ms, e0, e1), error);
          t_min = MIN (t_min, ms);
        }
      if (t_min < best_ms)
        {
          best_ms = t_min;
          G_LOCK (tuned);
          g_hash_table_replace (tuned, g_strdup (key), g_memdup2 (&heur[i].algo, sizeof heur[i].algo));
          G_UNLOCK (tuned);
        }
    }
  CS_CU_CHECK (cudaStreamSynchronize (p->stream), error);
  G_LOCK (tuned);
  hit = g_hash_table_lookup (tuned, key);
  g->algo = hit ? *hit : heur[0].algo;
  G_UNLOCK (tuned);
  if (hit)
    tuned_append (key, &g->algo);
  ok = TRUE;
out:
  if (e0)
    cudaEventDestroy (e0);
  if (e1)
    cudaEventDestroy (e1);
  return ok;
}

/**
 * cs_cuda_gemm_plan:
 *
 * Creates the descriptors, asks the heuristic for its top algorithms and keeps the fastest on
 * this device (reference/gpu-executor.md 2.2); done once per program, before any run or graph
 * capture.  A problem is timed once per device and cuBLASLt version: the winner is kept in the
 * process and in the disk cache (cs_cuda_jit_cache_dir, `gemm-algos-*.tsv`), and a problem
 * found there is only checked (cublasLtMatmulAlgoCheck) instead of queried and timed.
 * CASTSCOPE_GEMM_AUTOTUNE=0 keeps the heuristic's first choice and bypasses the table;
 * CASTSCOPE_NO_CACHE=1 keeps the table in memory only; CASTSCOPE_GEMM_CHECK_CACHED=0 trusts a
 * cached algorithm without cublasLtMatmulAlgoCheck (whose first call pays cuBLASLt's start-up).
 * A GEMM given its algorithm from the plan file (cs_cuda_gemm_set_stored_algo) takes it as it
 * is: descriptors only.  @plans (may be NULL): gemm_key ->
 * CsCudaGemm of the GEMMs this program planned so far; a GEMM without bias whose problem is
 * there borrows that one's descriptors and algorithm, and a new one is added.
 */
gboolean
cs_cuda_gemm_plan (CsCudaProgram *p, CsCudaGemm *g, GHashTable *plans, GError **error)
{
  cudaDataType_t t = cuda_type (g->dtype);
  cublasComputeType_t ct;
  cudaDataType_t scale = CUDA_R_32F;
  cublasLtMatmulPreference_t pref = NULL;
  cublasLtMatmulHeuristicResult_t heur[CS_GEMM_TOP_K];
  int n_found = 0;
  gboolean ok = FALSE;
  uint64_t ws = p->workspace_bytes;
  gboolean autotune = g_strcmp0 (g_getenv ("CASTSCOPE_GEMM_AUTOTUNE"), "0") != 0;
  g_autofree char *key = NULL;

  /* The same problem planned before in this program (identical layers): share its descriptors
   * and algorithm.  A bias epilogue holds its bias pointer in the descriptor, so it is not
   * shared. */
  if (plans != NULL && g->slot_bias < 0)
    {
      CsCudaGemm *same;

      key = gemm_key (g);
      same = g_hash_table_lookup (plans, key);
      if (same != NULL)
        {
          g->op = same->op;
          g->la = same->la;
          g->lb = same->lb;
          g->ld = same->ld;
          g->algo = same->algo;
          g->borrowed = TRUE;
          g->planned = TRUE;
          return TRUE;
        }
    }

  if (g->dtype == CS_DTYPE_F64)
    {
      ct = CUBLAS_COMPUTE_64F;
      scale = CUDA_R_64F;
    }
  else if (g->dtype == CS_DTYPE_F32)
    ct = g->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  else
    ct = CUBLAS_COMPUTE_32F;

  CS_CUBLAS_CHECK (cublasLtMatmulDescCreate (&g->op, ct, scale), error);
  CS_CUBLAS_CHECK (cublasLtMatmulDescSetAttribute (g->op, CUBLASLT_MATMUL_DESC_TRANSA, &g->ta,
                                                   sizeof g->ta), error);
  CS_CUBLAS_CHECK (cublasLtMatmulDescSetAttribute (g->op, CUBLASLT_MATMUL_DESC_TRANSB, &g->tb,
                                                   sizeof g->tb), error);
  if (g->slot_bias >= 0)
    {
      cublasLtEpilogue_t epi = g->bgrad ? CUBLASLT_EPILOGUE_BGRADB : CUBLASLT_EPILOGUE_BIAS;
      void *bias = cs_cuda_program_slot_ptr (p, (guint) g->slot_bias);

      CS_CUBLAS_CHECK (cublasLtMatmulDescSetAttribute (g->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi,
                                                       sizeof epi), error);
      CS_CUBLAS_CHECK (cublasLtMatmulDescSetAttribute (g->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                       &bias, sizeof bias), error);
      CS_CUBLAS_CHECK (cublasLtMatmulDescSetAttribute (g->op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                                                       &t, sizeof t), error);
    }
  CS_CUBLAS_CHECK (cublasLtMatrixLayoutCreate (&g->la, t, g->a_rows, g->a_cols, g->lda), error);
  CS_CUBLAS_CHECK (cublasLtMatrixLayoutCreate (&g->lb, t, g->b_rows, g->b_cols, g->ldb), error);
  CS_CUBLAS_CHECK (cublasLtMatrixLayoutCreate (&g->ld, t, g->m, g->n, g->ldd), error);
  if (!set_batch (g->la, g->batch, g->stride_a, error)
      || !set_batch (g->lb, g->batch, g->stride_b, error)
      || !set_batch (g->ld, g->batch, g->stride_d, error))
    goto out;

  /* An algorithm from the plan file (chosen by this cuBLASLt on this device, checked by the
   * file's identity and digest) needs no query and no check: those are what pay cuBLASLt's
   * first-use cost of its heuristics. */
  if (key == NULL)
    key = gemm_key (g);
  if (g->stored)
    {
      g->planned = TRUE;
      ok = TRUE;
      goto out;
    }
  /* A problem tuned before (an identical layer, or an earlier run on this device) needs no
   * heuristic query and no timing. */
  if (autotune && tuned_lookup (p, g, key))
    {
      g->planned = TRUE;
      ok = TRUE;
      goto out;
    }

  CS_CUBLAS_CHECK (cublasLtMatmulPreferenceCreate (&pref), error);
  CS_CUBLAS_CHECK (cublasLtMatmulPreferenceSetAttribute (pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                         &ws, sizeof ws), error);
  CS_CUBLAS_CHECK (cublasLtMatmulAlgoGetHeuristic (p->lt, g->op, g->la, g->lb, g->ld, g->ld, pref,
                                                   CS_GEMM_TOP_K, heur, &n_found), error);
  if (n_found < 1)
    {
      g_set_error (error, CS_CUDA_ERROR, CS_CUDA_ERROR_CUBLAS,
                   "cuBLASLt found no algorithm for %s", cs_cuda_gemm_describe (g));
      goto out;
    }
  g->algo = heur[0].algo;
  if (n_found > 1 && autotune && !gemm_autotune (p, g, key, heur, n_found, error))
    goto out;
  g->planned = TRUE;
  ok = TRUE;
out:
  if (ok && plans != NULL && g->slot_bias < 0)
    g_hash_table_insert (plans, g_steal_pointer (&key), g);
  if (pref)
    cublasLtMatmulPreferenceDestroy (pref);
  return ok;
}

/* ---- cuBLASLt's start-up on a thread of its own ---- */

typedef struct
{
  GThread          *thread;    /* running or joined start-up, NULL before the first begin */
  int               device;    /* the device it started on */
  cublasLtHandle_t  lt;        /* the handle it made (programs on that device share it) */
  gint64            t_begin;   /* g_get_monotonic_time() at the begin */
  double            ms;        /* its duration */
  gboolean          joined;    /* the first join happened */
  char             *error;     /* what failed, or NULL */
  gboolean          decided;   /* cs_cuda_lt_startup_want_heuristics was called */
  gboolean          want;      /* its answer: warm the heuristics up */
  gboolean          warmed;    /* the thread ran (or tried) the heuristic query and check */
} LtStartup;

static LtStartup lt_startup;
G_LOCK_DEFINE_STATIC (lt_startup);
static GMutex lt_decide_lock;   /* decided, want */
static GCond  lt_decide_cond;

/** cs_cuda_lt_startup_want_heuristics: see cs-cuda-private.h. */
void
cs_cuda_lt_startup_want_heuristics (gboolean want)
{
  g_mutex_lock (&lt_decide_lock);
  if (!lt_startup.decided)
    {
      lt_startup.decided = TRUE;
      lt_startup.want = want;
      g_cond_broadcast (&lt_decide_cond);
    }
  g_mutex_unlock (&lt_decide_lock);
}

/* The start-up's work: the device's primary context and a handle; then, when the first build
 * wants cuBLASLt's heuristics, one heuristic query and one algorithm check of a small bf16
 * GEMM, which is where cuBLASLt's first-use cost lies (kernels/BENCH-RESULTS.md, run 46). */
static gpointer
lt_startup_run (gpointer data)
{
  gboolean want;
  cublasLtMatmulDesc_t op = NULL;
  cublasLtMatrixLayout_t l = NULL;
  cublasLtMatmulPreference_t pref = NULL;
  cublasLtMatmulHeuristicResult_t heur;
  cublasLtMatmulHeuristicResult_t check;
  int found = 0;
  uint64_t ws = 32u << 20;
  const char *failed = NULL;

  if (cudaSetDevice (lt_startup.device) != cudaSuccess || cudaFree (NULL) != cudaSuccess)
    failed = "the device context";
  else if (cublasLtCreate (&lt_startup.lt) != CUBLAS_STATUS_SUCCESS)
    {
      lt_startup.lt = NULL;
      failed = "cublasLtCreate";
    }
  g_mutex_lock (&lt_decide_lock);
  while (!lt_startup.decided)
    g_cond_wait (&lt_decide_cond, &lt_decide_lock);
  want = lt_startup.want;
  g_mutex_unlock (&lt_decide_lock);
  lt_startup.warmed = failed == NULL && want;
  if (lt_startup.warmed
      && (cublasLtMatmulDescCreate (&op, CUBLAS_COMPUTE_32F, CUDA_R_32F) != CUBLAS_STATUS_SUCCESS
           || cublasLtMatrixLayoutCreate (&l, CUDA_R_16BF, 64, 64, 64) != CUBLAS_STATUS_SUCCESS
           || cublasLtMatmulPreferenceCreate (&pref) != CUBLAS_STATUS_SUCCESS
           || cublasLtMatmulPreferenceSetAttribute (pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                                    sizeof ws) != CUBLAS_STATUS_SUCCESS
           || cublasLtMatmulAlgoGetHeuristic (lt_startup.lt, op, l, l, l, l, pref, 1, &heur, &found)
                != CUBLAS_STATUS_SUCCESS || found < 1
           || cublasLtMatmulAlgoCheck (lt_startup.lt, op, l, l, l, l, &heur.algo, &check) != CUBLAS_STATUS_SUCCESS))
    failed = "the first heuristic query and algorithm check";
  if (pref)
    cublasLtMatmulPreferenceDestroy (pref);
  if (l)
    cublasLtMatrixLayoutDestroy (l);
  if (op)
    cublasLtMatmulDescDestroy (op);
  cudaGetLastError ();
  if (failed)
    lt_startup.error = g_strdup (failed);
  lt_startup.ms = (double) (g_get_monotonic_time () - lt_startup.t_begin) / 1000.0;
  return data;
}

/** cs_cuda_lt_startup_begin: see cs-cuda-private.h. */
void
cs_cuda_lt_startup_begin (int device)
{
  G_LOCK (lt_startup);
  if (lt_startup.thread == NULL)
    {
      lt_startup.device = device;
      lt_startup.t_begin = g_get_monotonic_time ();
      lt_startup.thread = g_thread_new ("cs-cublaslt-startup", lt_startup_run, NULL);
    }
  G_UNLOCK (lt_startup);
}

/** cs_cuda_lt_startup_join: see cs-cuda-private.h. */
cublasLtHandle_t
cs_cuda_lt_startup_join (int device, double *ms, double *waited_ms, gint64 *t_begin)
{
  gint64 t0 = g_get_monotonic_time ();
  cublasLtHandle_t lt = NULL;

  cs_cuda_lt_startup_begin (device);
  cs_cuda_lt_startup_want_heuristics (TRUE);   /* no build said: warm them up */
  G_LOCK (lt_startup);
  if (!lt_startup.joined)
    {
      g_thread_join (lt_startup.thread);
      lt_startup.joined = TRUE;
      *ms = lt_startup.ms;
      if (lt_startup.error)
        g_debug ("cuBLASLt start-up: %s failed", lt_startup.error);
    }
  else
    *ms = 0;   /* an earlier program waited for it */
  *t_begin = lt_startup.t_begin;
  if (lt_startup.device == device && lt_startup.error == NULL)
    lt = lt_startup.lt;
  G_UNLOCK (lt_startup);
  *waited_ms = (double) (g_get_monotonic_time () - t0) / 1000.0;
  return lt;
}

/** cs_cuda_gemm_get_algo: see cs-cuda-private.h. */
gboolean
cs_cuda_gemm_get_algo (const CsCudaGemm *g, cublasLtMatmulAlgo_t *algo)
{
  if (!g->planned && !g->stored)
    return FALSE;
  *algo = g->algo;
  return TRUE;
}

/** cs_cuda_gemm_set_stored_algo: see cs-cuda-private.h. */
void
cs_cuda_gemm_set_stored_algo (CsCudaGemm *g, const cublasLtMatmulAlgo_t *algo)
{
  g->algo = *algo;
  g->stored = TRUE;
}

/** cs_cuda_gemm_has_stored_algo: see cs-cuda-private.h. */
gboolean
cs_cuda_gemm_has_stored_algo (const CsCudaGemm *g)
{
  return g->stored;
}

/* The fields CsCudaGemm shares with CsCudaGemmProblem: one list drives both copies. */
#define GEMM_PROBLEM_FIELDS(X)                                                               \
  X (slot_a) X (slot_b) X (slot_d) X (slot_bias) X (bgrad) X (dtype) X (m) X (n) X (k) X (ta)  \
  X (tb) X (a_rows) X (a_cols) X (lda) X (b_rows) X (b_cols) X (ldb) X (ldd) X (batch)          \
  X (stride_a) X (stride_b) X (stride_d) X (tf32)

/** cs_cuda_gemm_get_problem: see cs-cuda-private.h. */
void
cs_cuda_gemm_get_problem (const CsCudaGemm *g, CsCudaGemmProblem *pr)
{
#define TO_PROBLEM(f) pr->f = g->f;
  memset (pr, 0, sizeof *pr);
  GEMM_PROBLEM_FIELDS (TO_PROBLEM)
#undef TO_PROBLEM
}

/** cs_cuda_gemm_new_from_problem: see cs-cuda-private.h. */
CsCudaGemm *
cs_cuda_gemm_new_from_problem (const CsCudaGemmProblem *pr)
{
  CsCudaGemm *g = g_new0 (CsCudaGemm, 1);

#define FROM_PROBLEM(f) g->f = pr->f;
  GEMM_PROBLEM_FIELDS (FROM_PROBLEM)
#undef FROM_PROBLEM
  return g;
}

gboolean
cs_cuda_gemm_run (CsCudaProgram *p, CsCudaGemm *g, guint stream, GError **error)
{
  void *ws = stream == 0 ? p->workspace : p->side_workspaces[stream - 1];
  float alpha = 1.0f, beta = 0.0f;
  double alpha_d = 1.0, beta_d = 0.0;
  const void *pa = &alpha, *pb = &beta;
  void *A = cs_cuda_program_slot_ptr (p, g->slot_a);
  void *B = cs_cuda_program_slot_ptr (p, g->slot_b);
  void *D = cs_cuda_program_slot_ptr (p, g->slot_d);
  gboolean ok = FALSE;

  if (g->dtype == CS_DTYPE_F64)
    {
      pa = &alpha_d;
      pb = &beta_d;
    }
  CS_CUBLAS_CHECK (cublasLtMatmul (p->lt, g->op, pa, A, g->la, B, g->lb, pb, D, g->ld, D, g->ld,
                                   &g->algo, ws, p->workspace_bytes, cs_cuda_program_stream (p, stream)), error);
  ok = TRUE;
out:
  return ok;
}

void
cs_cuda_gemm_free (CsCudaGemm *g)
{
  if (g == NULL)
    return;
  if (g->borrowed)
    {
      g_free (g);
      return;
    }
  if (g->la)
    cublasLtMatrixLayoutDestroy (g->la);
  if (g->lb)
    cublasLtMatrixLayoutDestroy (g->lb);
  if (g->ld)
    cublasLtMatrixLayoutDestroy (g->ld);
  if (g->op)
    cublasLtMatmulDescDestroy (g->op);
  g_free (g);
}

char *
cs_cuda_gemm_describe (CsCudaGemm *g)
{
  return g_strdup_printf ("%s%s %" G_GINT64_FORMAT "x%" G_GINT64_FORMAT "x%" G_GINT64_FORMAT
                          "%s%s (M x N x K)%s",
                          cs_dtype_short_name (g->dtype),
                          g->dtype == CS_DTYPE_F32 ? (g->tf32 ? "/tf32" : "/true-f32") : "",
                          g->n, g->m, g->k,
                          g->ta == CUBLAS_OP_T ? " B^T" : "", g->tb == CUBLAS_OP_T ? " A^T" : "",
                          g->slot_bias < 0 ? "" : g->bgrad ? " +bias grad" : " +bias");
}
