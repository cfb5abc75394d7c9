/* bench-ref.c: CPU reference executor timing (a benchmark, not a test).
 *
 * A bf16 MLP as Thunder's nvFuser executor leaves it: x[1024, 768] -> linear 3072 (torch) ->
 * GELU(tanh) as one fusion region of f32 prims between casts -> linear 768 (torch).  Runs the
 * trace in exact mode and in f64 mode and prints wall times, the matmul FLOP rate and the
 * rel-L2 error of the bf16 result.  Usage: bench-ref [REPS] (default 3; the best time counts).
 */
#include "cs-config.h"

#include "cs-parse.h"
#include "cs-ref.h"
#include "cs-tensor.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define M 1024
#define K 768
#define H 3072

static char *
mlp_trace (void)
{
  return g_strdup_printf (
    "def computation(x, w1, b1, w2, b2):\n"
    "  # x: \"cuda:0 bf16[%d, %d]\"\n"
    "  # w1: \"cuda:0 bf16[%d, %d]\"\n"
    "  # b1: \"cuda:0 bf16[%d]\"\n"
    "  # w2: \"cuda:0 bf16[%d, %d]\"\n"
    "  # b2: \"cuda:0 bf16[%d]\"\n"
    "  t0 = torch.nn.functional.linear(x, w1, b1)  # t0: \"cuda:0 bf16[%d, %d]\"\n"
    "    # t0 = ltorch.linear(x, w1, b1)  # t0: \"cuda:0 bf16[%d, %d]\"\n"
    "      # t0 = prims.linear(x, w1, b1)  # t0: \"cuda:0 bf16[%d, %d]\"\n"
    "  [t11] = nvFusion0(t0)\n"
    "    # t1 = prims.convert_element_type(t0, dtypes.float32)  # t1: \"cuda:0 f32[%d, %d]\"\n"
    "    # t2 = prims.mul(t1, t1)  # t2: \"cuda:0 f32[%d, %d]\"\n"
    "    # t3 = prims.mul(t2, t1)  # t3: \"cuda:0 f32[%d, %d]\"\n"
    "    # t4 = prims.mul(0.044715, t3)  # t4: \"cuda:0 f32[%d, %d]\"\n"
    "    # t5 = prims.add(t1, t4)  # t5: \"cuda:0 f32[%d, %d]\"\n"
    "    # t6 = prims.mul(0.7978845608028654, t5)  # t6: \"cuda:0 f32[%d, %d]\"\n"
    "    # t7 = prims.tanh(t6)  # t7: \"cuda:0 f32[%d, %d]\"\n"
    "    # t8 = prims.add(1.0, t7)  # t8: \"cuda:0 f32[%d, %d]\"\n"
    "    # t9 = prims.mul(0.5, t1)  # t9: \"cuda:0 f32[%d, %d]\"\n"
    "    # t10 = prims.mul(t9, t8)  # t10: \"cuda:0 f32[%d, %d]\"\n"
    "    # t11 = prims.convert_element_type(t10, dtypes.bfloat16)  # t11: \"cuda:0 bf16[%d, %d]\"\n"
    "  del t0\n"
    "  t12 = torch.nn.functional.linear(t11, w2, b2)  # t12: \"cuda:0 bf16[%d, %d]\"\n"
    "    # t12 = ltorch.linear(t11, w2, b2)  # t12: \"cuda:0 bf16[%d, %d]\"\n"
    "      # t12 = prims.linear(t11, w2, b2)  # t12: \"cuda:0 bf16[%d, %d]\"\n"
    "  del t11\n"
    "  return (t12,)\n",
    M, K, H, K, H, K, H, K,
    M, H, M, H, M, H,
    M, H, M, H, M, H, M, H, M, H, M, H, M, H, M, H, M, H, M, H, M, H,
    M, K, M, K, M, K);
}

int
main (int argc, char **argv)
{
  int reps = argc > 1 ? atoi (argv[1]) : 3;
  g_autofree char *text = mlp_trace ();
  g_autoptr (GError) error = NULL;
  g_autoptr (CsTrace) trace = cs_parse_trace (text, "bench-mlp", &error);
  g_autoptr (GPtrArray) leaves = NULL;
  g_autoptr (GPtrArray) inputs = g_ptr_array_new_with_free_func ((GDestroyNotify) cs_tensor_unref);
  double best[2] = { INFINITY, INFINITY }, best_cpu[2] = { INFINITY, INFINITY };
  double flops = 2.0 * 2.0 * M * (double) K * H;
  g_autoptr (GPtrArray) oe = NULL;
  g_autoptr (GPtrArray) of = NULL;

  if (trace == NULL)
    {
      fprintf (stderr, "bench-ref: %s\n", error->message);
      return 1;
    }
  if (reps < 1)
    reps = 1;
  leaves = cs_ref_dup_leaf_inputs (trace);
  for (guint i = 0; i < leaves->len; i++)
    {
      CsTensor *t = cs_ref_random_input (trace, g_ptr_array_index (leaves, i), 42, &error);
      if (t == NULL)
        {
          fprintf (stderr, "bench-ref: %s\n", error->message);
          return 1;
        }
      g_ptr_array_add (inputs, t);
    }

  for (int mode = 0; mode < 2; mode++)
    for (int r = 0; r < reps; r++)
      {
        g_autoptr (GPtrArray) out = NULL;
        gint64 t0 = g_get_monotonic_time ();
        clock_t c0 = clock ();
        double ms;

        if (!cs_ref_run (trace, (CsTensor **) inputs->pdata, inputs->len,
                         mode ? CS_REF_F64 : CS_REF_EXACT, &out, &error))
          {
            fprintf (stderr, "bench-ref: %s\n", error->message);
            return 1;
          }
        ms = (g_get_monotonic_time () - t0) / 1000.0;
        best[mode] = MIN (best[mode], ms);
        best_cpu[mode] = MIN (best_cpu[mode], (clock () - c0) * 1000.0 / CLOCKS_PER_SEC);
        if (mode == 0)
          {
            g_clear_pointer (&oe, g_ptr_array_unref);
            oe = g_steal_pointer (&out);
          }
        else
          {
            g_clear_pointer (&of, g_ptr_array_unref);
            of = g_steal_pointer (&out);
          }
      }

  {
    const CsTensor *e = g_ptr_array_index (oe, 0), *f = g_ptr_array_index (of, 0);
    double num = 0, den = 0;

    for (int64_t i = 0; i < e->numel; i++)
      {
        double a = cs_tensor_get_f64 (e, i), b = cs_tensor_get_f64 (f, i);
        num += (a - b) * (a - b);
        den += b * b;
      }
    printf ("bench-ref: bf16 MLP x[%d,%d] -> linear %d -> gelu(tanh) -> linear %d, best of %d\n",
            M, K, H, K, reps);
    printf ("  exact mode (bf16 storage, f32 math, sgemm): %8.1f ms wall, %8.1f ms CPU "
            "(matmuls %.1f GFLOP)\n", best[0], best_cpu[0], flops / 1e9);
    printf ("  f64 mode (dgemm):                           %8.1f ms wall, %8.1f ms CPU\n",
            best[1], best_cpu[1]);
    printf ("  output rel-L2 error exact vs f64: %.3e\n", sqrt (num / den));
  }
  return 0;
}
