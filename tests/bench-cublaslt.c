/* bench-cublaslt.c: where cuBLASLt's start-up goes (a benchmark, not a test; needs a GPU).
 *
 *   bench-cublaslt
 *
 * Times, in one process and in this order, each call a device build makes first: the device
 * count, the primary context (cudaFree(0)), cublasLtCreate, the descriptors of a bf16 GEMM
 * (4096 x 4096 x 4096), its first heuristic query (top 8), a second query of another problem,
 * the first and second cublasLtMatmulAlgoCheck, a second handle and its first query, then the
 * first and second cublasLtMatmul (each synchronised).  One line per call: `name ms`.  Run it
 * with CUDA_MODULE_LOADING=EAGER too to see what lazy loading defers.
 */
#include "cs-config.h"

#include <stdio.h>
#include <stdlib.h>

#include <glib.h>
#include <cuda_runtime.h>
#include <cublasLt.h>

static gint64 t_last;

static void
mark (const char *what, int status)
{
  gint64 now = g_get_monotonic_time ();

  printf ("%-40s %9.2f ms%s\n", what, (double) (now - t_last) / 1000.0, status ? "  (failed)" : "");
  fflush (stdout);
  t_last = g_get_monotonic_time ();
}

/* Descriptors of a bf16 GEMM D[m, n] = A[m, k] B[k, n], column-major, f32 compute. */
static void
descs (int64_t m, int64_t n, int64_t k, cublasLtMatmulDesc_t *op, cublasLtMatrixLayout_t *la,
       cublasLtMatrixLayout_t *lb, cublasLtMatrixLayout_t *ld)
{
  cublasLtMatmulDescCreate (op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  cublasLtMatrixLayoutCreate (la, CUDA_R_16BF, m, k, m);
  cublasLtMatrixLayoutCreate (lb, CUDA_R_16BF, k, n, k);
  cublasLtMatrixLayoutCreate (ld, CUDA_R_16BF, m, n, m);
}

int
main (void)
{
  int count = 0, found = 0, found2 = 0;
  cublasLtHandle_t lt = NULL, lt2 = NULL;
  cublasLtMatmulDesc_t op, op2;
  cublasLtMatrixLayout_t la, lb, ld, la2, lb2, ld2;
  cublasLtMatmulPreference_t pref;
  cublasLtMatmulHeuristicResult_t heur[8], heur2[8], check;
  uint64_t ws_bytes = 32u << 20;
  void *a = NULL, *b = NULL, *d = NULL, *ws = NULL;
  const int64_t n = 4096;
  float alpha = 1.0f, beta = 0.0f;
  gint64 t0 = g_get_monotonic_time ();

  t_last = t0;
  mark ("cudaGetDeviceCount", cudaGetDeviceCount (&count) != cudaSuccess || count < 1);
  if (count < 1)
    return 77;
  mark ("cudaFree(0) (primary context)", cudaFree (NULL));
  mark ("cublasLtCreate", cublasLtCreate (&lt));
  descs (n, n, n, &op, &la, &lb, &ld);
  cublasLtMatmulPreferenceCreate (&pref);
  cublasLtMatmulPreferenceSetAttribute (pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes, sizeof ws_bytes);
  mark ("descriptors (4096^3 bf16)", 0);
  mark ("first heuristic query (top 8)",
        cublasLtMatmulAlgoGetHeuristic (lt, op, la, lb, ld, ld, pref, 8, heur, &found) || found < 1);
  descs (n, 1024, 11008, &op2, &la2, &lb2, &ld2);
  mark ("second heuristic query (another shape)",
        cublasLtMatmulAlgoGetHeuristic (lt, op2, la2, lb2, ld2, ld2, pref, 8, heur2, &found2) || found2 < 1);
  mark ("first cublasLtMatmulAlgoCheck", cublasLtMatmulAlgoCheck (lt, op, la, lb, ld, ld, &heur[0].algo, &check));
  mark ("second cublasLtMatmulAlgoCheck", cublasLtMatmulAlgoCheck (lt, op2, la2, lb2, ld2, ld2, &heur2[0].algo, &check));
  mark ("second handle: cublasLtCreate", cublasLtCreate (&lt2));
  mark ("second handle: first heuristic query",
        cublasLtMatmulAlgoGetHeuristic (lt2, op, la, lb, ld, ld, pref, 8, heur, &found) || found < 1);
  cudaMalloc (&a, (size_t) n * n * 2);
  cudaMalloc (&b, (size_t) n * n * 2);
  cudaMalloc (&d, (size_t) n * n * 2);
  cudaMalloc (&ws, ws_bytes);
  cudaMemset (a, 0, (size_t) n * n * 2);
  cudaMemset (b, 0, (size_t) n * n * 2);
  cudaDeviceSynchronize ();
  mark ("buffers (cudaMalloc, cudaMemset)", 0);
  mark ("first cublasLtMatmul + sync",
        cublasLtMatmul (lt, op, &alpha, a, la, b, lb, &beta, d, ld, d, ld, &heur[0].algo, ws, ws_bytes, 0)
        || cudaDeviceSynchronize ());
  mark ("second cublasLtMatmul + sync",
        cublasLtMatmul (lt, op, &alpha, a, la, b, lb, &beta, d, ld, d, ld, &heur[0].algo, ws, ws_bytes, 0)
        || cudaDeviceSynchronize ());
  printf ("%-40s %9.2f ms\n", "total", (double) (g_get_monotonic_time () - t0) / 1000.0);
  return 0;
}
