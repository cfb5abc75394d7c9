/* test-kernels-streams.c: the graph's launches spread over streams (kernels/cs-cuda-streams.c),
 * checked on dry builds (no device).
 *
 * For real training steps (the shared 8-block LLaMA, the same stack at 32 layers, the 4-block
 * GPT, the bundled samples) the schedule must order every pair of steps that conflict on arena
 * bytes - found here independently, pair by pair, from the slots' buffers - either on one
 * stream or through a chain of waits (happens-before as bit sets).  And it must find the
 * concurrency that is there: a LLaMA block's q, k, v projections do not depend on each other,
 * so the longest chain is shorter than the step.  With one stream every step is on stream 0
 * with no waits, and the longest chain is the step itself; so it is for a step whose launches
 * each fill the GPU (CS_CUDA_SATURATING_MS), whatever streams there are.  A schedule with a needed wait
 * taken out must fail the check (the check can fail).
 */
#include "cs-config.h"

#include <stdlib.h>
#include <string.h>

#include "cs-cuda-private.h"
#include "cs-parse.h"
#include "cs-pipeline.h"
#include "test-llama-layers.h"

static char *
read_trace_text (const char *dir, const char *name)
{
  g_autofree char *path = NULL;
  char *text = NULL;

  if (dir == NULL)
    return NULL;
  path = g_build_filename (dir, name, NULL);
  if (!g_file_get_contents (path, &text, NULL, NULL))
    return NULL;
  return text;
}

/* The dry-built program of the training step of @text under the default policy. */
static CsCudaProgram *
build_text (const char *text)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTraceList) list = cs_parse_text (text, strlen (text), "trace", &error);
  g_autoptr(CsPipeline) pl = NULL;
  CsPolicy policy;
  CsCudaProgram *p;

  g_assert_no_error (error);
  cs_policy_init_default (&policy);
  pl = cs_pipeline_run (g_ptr_array_index (list->traces, 0), &policy, NULL, &error);
  g_assert_no_error (error);
  p = cs_cuda_program_build_full (cs_pipeline_get_forward (pl), cs_pipeline_get_backward (pl), &policy,
                                  CS_CUDA_BUILD_DRY, &error);
  g_assert_no_error (error);
  return p;
}

static gsize
aligned_end (const CsCudaBuffer *b)
{
  return b->offset + (b->size_bytes + 255) / 256 * 256;
}

/* TRUE when steps @a and @b touch overlapping arena bytes and one of them writes them. */
static gboolean
conflict (CsCudaProgram *p, const CsCudaStep *a, const CsCudaStep *b)
{
  const GArray *la[2] = { a->reads, a->writes }, *lb[2] = { b->reads, b->writes };

  if (a->floor_ms >= CS_CUDA_SATURATING_MS && b->floor_ms >= CS_CUDA_SATURATING_MS)
    return TRUE;   /* two steps that each fill the GPU keep their order */
  for (guint x = 0; x < 2; x++)
    for (guint y = 0; y < 2; y++)
      {
        if (x == 0 && y == 0)
          continue;   /* two reads */
        for (guint i = 0; i < la[x]->len; i++)
          for (guint j = 0; j < lb[y]->len; j++)
            {
              const CsCudaBuffer *ba = &g_array_index (p->buffers, CsCudaBuffer,
                                                       cs_cuda_program_slot (p, g_array_index (la[x], guint, i))->buffer);
              const CsCudaBuffer *bb = &g_array_index (p->buffers, CsCudaBuffer,
                                                       cs_cuda_program_slot (p, g_array_index (lb[y], guint, j))->buffer);

              if (ba->size_bytes > 0 && bb->size_bytes > 0 && ba->offset < aligned_end (bb)
                  && bb->offset < aligned_end (ba))
                return TRUE;
            }
      }
  return FALSE;
}

/* Number of conflicting pairs the schedule leaves unordered (0 = a valid schedule); also checks
 * the waits' form. */
static guint
unordered_pairs (CsCudaProgram *p)
{
  guint n = p->steps->len, words = (n + 63) / 64, bad = 0;
  g_autofree guint64 *hb = g_new0 (guint64, (gsize) n * words);   /* hb[j]: steps before j */
  gint last[CS_CUDA_MAX_STREAMS];

  for (guint s = 0; s < CS_CUDA_MAX_STREAMS; s++)
    last[s] = -1;
  for (guint j = 0; j < n; j++)
    {
      const CsCudaStep *st = g_ptr_array_index (p->steps, j);
      guint64 *row = hb + (gsize) j * words;
      gint preds[CS_CUDA_MAX_STREAMS];
      guint np = 0;

      g_assert_cmpuint (st->stream, <, p->n_streams);
      g_assert_cmpuint (st->n_waits, <, CS_CUDA_MAX_STREAMS);
      if (last[st->stream] >= 0)
        preds[np++] = last[st->stream];
      for (guint w = 0; w < st->n_waits; w++)
        {
          const CsCudaStep *ws = g_ptr_array_index (p->steps, st->waits[w]);

          g_assert_cmpuint (st->waits[w], <, j);
          g_assert_cmpuint (ws->stream, !=, st->stream);
          g_assert_true (ws->signals);
          preds[np++] = (gint) st->waits[w];
        }
      for (guint k = 0; k < np; k++)
        {
          const guint64 *pr = hb + (gsize) preds[k] * words;

          for (guint w = 0; w < words; w++)
            row[w] |= pr[w];
          row[preds[k] / 64] |= (guint64) 1 << (preds[k] % 64);
        }
      last[st->stream] = (gint) j;
      for (guint i = 0; i < j; i++)
        if (!(row[i / 64] >> (i % 64) & 1) && conflict (p, g_ptr_array_index (p->steps, i), st))
          bad++;
    }
  return bad;
}

static void
check_program (CsCudaProgram *p, const char *what, gboolean expect_concurrency)
{
  guint n = p->steps->len;

  g_test_message ("%s: %u launches on %u streams, the longest chain %u", what, n, p->n_streams,
                  p->critical_path);
  g_assert_cmpuint (unordered_pairs (p), ==, 0);
  g_assert_cmpuint (p->critical_path, <=, n);
  g_assert_cmpuint (p->critical_path, >=, 1);
  if (expect_concurrency)
    {
      g_assert_cmpuint (p->n_streams, >, 1);
      g_assert_cmpuint (p->critical_path, <, n);
    }

  /* one stream: the trace's order, nothing to wait for */
  cs_cuda_program_schedule (p, 1);
  g_assert_cmpuint (p->n_streams, ==, 1);
  g_assert_cmpuint (p->critical_path, ==, n);
  for (guint j = 0; j < n; j++)
    {
      const CsCudaStep *st = g_ptr_array_index (p->steps, j);

      g_assert_cmpuint (st->stream, ==, 0);
      g_assert_cmpuint (st->n_waits, ==, 0);
    }
  g_assert_cmpuint (unordered_pairs (p), ==, 0);

  /* the check fails when a needed wait is gone: take out one step's waits at a time until a
     conflict is left unordered */
  if (expect_concurrency)
    {
      gboolean caught = FALSE;

      cs_cuda_program_schedule (p, CS_CUDA_MAX_STREAMS);
      for (guint j = 0; j < n && !caught; j++)
        {
          CsCudaStep *st = g_ptr_array_index (p->steps, j);
          guint keep = st->n_waits;

          if (keep == 0)
            continue;
          st->n_waits = 0;
          caught = unordered_pairs (p) > 0;
          st->n_waits = keep;
        }
      g_assert_true (caught);
      g_assert_cmpuint (unordered_pairs (p), ==, 0);
    }
}

static void
test_llama (gconstpointer data)
{
  guint layers = GPOINTER_TO_UINT (data);
  g_autofree char *text = read_trace_text (g_getenv ("CS_SHARED_TRACES"), "thunder_llama_stack_initial.txt");
  g_autofree char *deep = NULL;
  g_autofree char *what = NULL;
  CsCudaProgram *p;
  guint per_block_chain;

  if (text == NULL)
    {
      g_test_skip ("CS_SHARED_TRACES does not hold thunder_llama_stack_initial.txt");
      return;
    }
  if (layers > 8)
    deep = llama_stack_layers (text, layers);
  p = build_text (deep ? deep : text);
  what = g_strdup_printf ("LLaMA, %u blocks", layers);
  check_program (p, what, TRUE);
  cs_cuda_program_schedule (p, CS_CUDA_MAX_STREAMS);
  /* A block's seven forward projections: q, k and v read the same norm output and none reads
     another's result; gate and up likewise.  So each block's chain is at least three launches
     shorter than its launches (two saved on q/k/v, one on gate/up), forward alone. */
  per_block_chain = (p->steps->len - p->critical_path) / layers;
  g_test_message ("launches off the longest chain per block: %u", per_block_chain);
  g_assert_cmpuint (p->steps->len - p->critical_path, >=, 3 * layers);
  cs_cuda_program_free (p);
}

static void
test_file (gconstpointer data)
{
  const char *rel = data;
  const char *srcdir = g_getenv ("G_TEST_SRCDIR");
  g_autofree char *path = g_build_filename (srcdir ? srcdir : ".", rel, NULL);
  g_autofree char *text = NULL;
  CsCudaProgram *p;

  g_assert_true (g_file_get_contents (path, &text, NULL, NULL));
  p = build_text (text);
  check_program (p, rel, strstr (rel, "gpt_stack") != NULL);
  cs_cuda_program_free (p);
}

/* data/bench/ln_mlp_residual_d768.txt: 8192 rows of 768 and 3072.  Every one of its launches
 * fills the GPU on its own (the smallest floor is the LayerNorm's, 8192 x 768 bf16 read and
 * written with its statistics: 25 MB at 4.25 TB/s, 5.9 us), so the schedule keeps the trace's
 * order: the longest chain is the whole step. */
static void
test_saturating (void)
{
  const char *srcdir = g_getenv ("G_TEST_SRCDIR");
  g_autofree char *path = g_build_filename (srcdir ? srcdir : ".", "..", "data", "bench",
                                            "ln_mlp_residual_d768.txt", NULL);
  g_autofree char *text = NULL;
  CsCudaProgram *p;

  g_assert_true (g_file_get_contents (path, &text, NULL, NULL));
  p = build_text (text);
  for (guint j = 0; j < p->steps->len; j++)
    g_assert_cmpfloat (((CsCudaStep *) g_ptr_array_index (p->steps, j))->floor_ms, >=, CS_CUDA_SATURATING_MS);
  g_assert_cmpuint (unordered_pairs (p), ==, 0);
  g_assert_cmpuint (p->critical_path, ==, p->steps->len);
  cs_cuda_program_free (p);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_data_func ("/kernels/streams/llama8", GUINT_TO_POINTER (8), test_llama);
  g_test_add_data_func ("/kernels/streams/llama32", GUINT_TO_POINTER (32), test_llama);
  g_test_add_data_func ("/kernels/streams/gpt4", "oracle/gpt_stack4_initial.txt", test_file);
  g_test_add_data_func ("/kernels/streams/seed", "../data/seed_foo.txt", test_file);
  g_test_add_data_func ("/kernels/streams/mlp", "../data/mlp_gelu.txt", test_file);
  g_test_add_data_func ("/kernels/streams/rmsnorm-swiglu", "../data/rmsnorm_swiglu.txt", test_file);
  g_test_add_data_func ("/kernels/streams/cross-entropy", "../data/cross_entropy.txt", test_file);
  g_test_add_func ("/kernels/streams/saturating", test_saturating);
  return g_test_run ();
}
