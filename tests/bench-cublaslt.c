/* bench-cublaslt.c: where cuBLASLt's start-up goes (a benchmark, not a test; needs a GPU).
 *
 *   bench-cublaslt [--algo FILE [--concurrent]]
 *
 * Times, in one process and in this order, each call a device build makes first: the device
 * count, the primary context (cudaFree(0)), cublasLtCreate, the descriptors of a bf16 GEMM
 * (4096 x 4096 x 4096), its first heuristic query (top 8), a second query of another problem,
 * the first and second cublasLtMatmulAlgoCheck, a second handle and its first query, then the
 * first and second cublasLtMatmul (each synchronised).  One line per call: `name ms`.  Run it
 * with CUDA_MODULE_LOADING=EAGER too to see what lazy loading defers.
 *
 * --algo FILE: when FILE does not exist, the run above, then the heuristic's first algorithm
 * of the 4096^3 GEMM written to FILE (its 64 bytes).  When it exists, what a warm build does
 * instead (the algorithm read back, as from the plan file): context, handle, descriptors, the
 * device's name (cuDeviceGetName through the runtime's driver entry point, then
 * cudaGetDeviceProperties), one attribute of the read algorithm, the first and second
 * cublasLtMatmul with it (no heuristic query, no check before), and only then the first
 * heuristic query and algorithm check.  --concurrent: that heuristic query runs on a second
 * thread begun right after cublasLtCreate (as the start-up thread would), its time printed
 * when it ends.
 */
#include "cs-config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* The 4096^3 bf16 GEMM both orders time, and what running it takes. */
typedef struct
{
  int64_t                    n;         /* m = n = k */
  cublasLtHandle_t           lt;        /* the first handle */
  cublasLtMatmulDesc_t       op;        /* descs (n, n, n) */
  cublasLtMatrixLayout_t     la, lb, ld;
  cublasLtMatmulPreference_t pref;      /* a workspace of ws_bytes at the most */
  uint64_t                   ws_bytes;  /* 32 MiB */
  void                      *a, *b, *d, *ws;  /* device buffers: A, B (zeroed), D, the workspace */
} Gemm;

/* The calls both orders begin with, each timed by mark: the device count, the primary
 * context, cublasLtCreate, then the descriptors and the preference of @g's GEMM (one mark).
 * FALSE when there is no device (then nothing after the count is made). */
static gboolean
gemm_start (Gemm *g)
{
  int count = 0;

  g->n = 4096;
  g->ws_bytes = 32u << 20;
  mark ("cudaGetDeviceCount", cudaGetDeviceCount (&count) != cudaSuccess || count < 1);
  if (count < 1)
    return FALSE;
  mark ("cudaFree(0) (primary context)", cudaFree (NULL));
  mark ("cublasLtCreate", cublasLtCreate (&g->lt));
  descs (g->n, g->n, g->n, &g->op, &g->la, &g->lb, &g->ld);
  cublasLtMatmulPreferenceCreate (&g->pref);
  cublasLtMatmulPreferenceSetAttribute (g->pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &g->ws_bytes,
                                        sizeof g->ws_bytes);
  mark ("descriptors (4096^3 bf16)", 0);
  return TRUE;
}

/* @g's device buffers (cudaMalloc, A and B zeroed), timed as one mark. */
static void
gemm_buffers (Gemm *g)
{
  size_t bytes = (size_t) g->n * (size_t) g->n * 2;

  cudaMalloc (&g->a, bytes);
  cudaMalloc (&g->b, bytes);
  cudaMalloc (&g->d, bytes);
  cudaMalloc (&g->ws, g->ws_bytes);
  cudaMemset (g->a, 0, bytes);
  cudaMemset (g->b, 0, bytes);
  cudaDeviceSynchronize ();
  mark ("buffers (cudaMalloc, cudaMemset)", 0);
}

/* One cublasLtMatmul of @g with @algo on the default stream, then a device synchronisation;
 * non-zero when either fails. */
static int
gemm_run (const Gemm *g, const cublasLtMatmulAlgo_t *algo)
{
  float alpha = 1.0f, beta = 0.0f;

  return cublasLtMatmul (g->lt, g->op, &alpha, g->a, g->la, g->b, g->lb, &beta, g->d, g->ld, g->d, g->ld, algo,
                         g->ws, g->ws_bytes, 0)
         || cudaDeviceSynchronize ();
}

/* The warm-build order: see the file's comment.  @algo: read from the file. */
static cublasLtMatmulHeuristicResult_t conc_heur[8];
static cublasLtHandle_t conc_lt;
static cublasLtMatmulDesc_t conc_op;
static cublasLtMatrixLayout_t conc_la, conc_lb, conc_ld;
static cublasLtMatmulPreference_t conc_pref;

static gpointer
concurrent_query (gpointer data)
{
  gint64 t = g_get_monotonic_time ();
  int found = 0;
  int st = cublasLtMatmulAlgoGetHeuristic (conc_lt, conc_op, conc_la, conc_lb, conc_ld, conc_ld, conc_pref, 8,
                                           conc_heur, &found);

  printf ("%-40s %9.2f ms%s\n", "[thread] first heuristic query", (double) (g_get_monotonic_time () - t) / 1000.0,
          st || found < 1 ? "  (failed)" : "");
  fflush (stdout);
  return data;
}

typedef int (*GetNameFunc) (char *name, int len, int dev);

static int
restored (const cublasLtMatmulAlgo_t *algo, gboolean concurrent)
{
  int found = 0;
  Gemm g = { 0 };
  cublasLtMatmulHeuristicResult_t heur[8], check;
  gint64 t0 = g_get_monotonic_time ();
  GetNameFunc get_name = NULL;
  enum cudaDriverEntryPointQueryResult q;
  char name[256] = "";
  struct cudaDeviceProp prop;
  int id = -1;
  size_t got = 0;
  GThread *th = NULL;

  t_last = t0;
  if (!gemm_start (&g))
    return 77;
  if (concurrent)
    {
      conc_lt = g.lt;
      descs (g.n, g.n, g.n, &conc_op, &conc_la, &conc_lb, &conc_ld);
      conc_pref = g.pref;
      th = g_thread_new ("query", concurrent_query, NULL);
      mark ("[main] second thread begun", 0);
    }
  mark ("cuDeviceGetName (driver entry point)",
        cudaGetDriverEntryPointByVersion ("cuDeviceGetName", (void **) &get_name, 12000, cudaEnableDefault, &q)
        || get_name == NULL || get_name (name, sizeof name, 0) != 0);
  mark ("cudaGetDeviceProperties", cudaGetDeviceProperties (&prop, 0));
  mark ("read algorithm: its CUBLASLT_ALGO_CONFIG_ID",
        cublasLtMatmulAlgoConfigGetAttribute (algo, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof id, &got));
  gemm_buffers (&g);
  mark ("first cublasLtMatmul + sync (read algorithm)", gemm_run (&g, algo));
  mark ("second cublasLtMatmul + sync", gemm_run (&g, algo));
  if (th != NULL)
    {
      g_thread_join (th);
      mark ("[main] joined the second thread", 0);
    }
  mark ("heuristic query after the matmuls",
        cublasLtMatmulAlgoGetHeuristic (g.lt, g.op, g.la, g.lb, g.ld, g.ld, g.pref, 8, heur, &found) || found < 1);
  mark ("first cublasLtMatmulAlgoCheck", cublasLtMatmulAlgoCheck (g.lt, g.op, g.la, g.lb, g.ld, g.ld, algo, &check));
  printf ("%-40s %9.2f ms\n", "total", (double) (g_get_monotonic_time () - t0) / 1000.0);
  printf ("device %s, algorithm id %d, same as the new query's first: %s\n", name, id,
          found > 0 && memcmp (&heur[0].algo, algo, sizeof *algo) == 0 ? "yes" : "no");
  return 0;
}

int
main (int argc, char **argv)
{
  const char *algo_file = NULL;
  gboolean concurrent = FALSE;
  g_autofree char *saved = NULL;
  gsize saved_len = 0;
  int found = 0, found2 = 0;
  Gemm g = { 0 };
  cublasLtHandle_t lt2 = NULL;
  cublasLtMatmulDesc_t op2;
  cublasLtMatrixLayout_t la2, lb2, ld2;
  cublasLtMatmulHeuristicResult_t heur[8], heur2[8], check;
  gint64 t0 = g_get_monotonic_time ();

  for (int i = 1; i < argc; i++)
    if (strcmp (argv[i], "--algo") == 0 && i + 1 < argc)
      algo_file = argv[++i];
    else if (strcmp (argv[i], "--concurrent") == 0)
      concurrent = TRUE;
  if (algo_file != NULL && g_file_get_contents (algo_file, &saved, &saved_len, NULL))
    {
      cublasLtMatmulAlgo_t algo;

      if (saved_len != sizeof algo)
        {
          fprintf (stderr, "%s: not an algorithm (%zu bytes)\n", algo_file, saved_len);
          return 1;
        }
      memcpy (&algo, saved, sizeof algo);
      return restored (&algo, concurrent);
    }
  t_last = t0;
  if (!gemm_start (&g))
    return 77;
  mark ("first heuristic query (top 8)",
        cublasLtMatmulAlgoGetHeuristic (g.lt, g.op, g.la, g.lb, g.ld, g.ld, g.pref, 8, heur, &found) || found < 1);
  descs (g.n, 1024, 11008, &op2, &la2, &lb2, &ld2);
  mark ("second heuristic query (another shape)",
        cublasLtMatmulAlgoGetHeuristic (g.lt, op2, la2, lb2, ld2, ld2, g.pref, 8, heur2, &found2) || found2 < 1);
  mark ("first cublasLtMatmulAlgoCheck",
        cublasLtMatmulAlgoCheck (g.lt, g.op, g.la, g.lb, g.ld, g.ld, &heur[0].algo, &check));
  mark ("second cublasLtMatmulAlgoCheck",
        cublasLtMatmulAlgoCheck (g.lt, op2, la2, lb2, ld2, ld2, &heur2[0].algo, &check));
  mark ("second handle: cublasLtCreate", cublasLtCreate (&lt2));
  mark ("second handle: first heuristic query",
        cublasLtMatmulAlgoGetHeuristic (lt2, g.op, g.la, g.lb, g.ld, g.ld, g.pref, 8, heur, &found) || found < 1);
  gemm_buffers (&g);
  mark ("first cublasLtMatmul + sync", gemm_run (&g, &heur[0].algo));
  mark ("second cublasLtMatmul + sync", gemm_run (&g, &heur[0].algo));
  printf ("%-40s %9.2f ms\n", "total", (double) (g_get_monotonic_time () - t0) / 1000.0);
  if (algo_file != NULL && !g_file_set_contents (algo_file, (const char *) &heur[0].algo, sizeof heur[0].algo, NULL))
    {
      fprintf (stderr, "cannot write %s\n", algo_file);
      return 1;
    }
  return 0;
}
