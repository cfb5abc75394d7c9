/* emu-colred.c: the generated reduction kernels run on the CPU, on a machine without a GPU.
 *
 * A developer check, built with the CUDA executor and run by hand (about 9 minutes on 2 cores,
 * most of it case 7):
 *   build/tests/emu-colred [CASE]
 * Each case is a small region trace whose reductions take the column form (the 16-byte form:
 * the reduced dims leading, the columns a multiple of 8, split over several blocks, the last
 * block of a tile merging; and the scalar 32 x 8 tile), plus test-kernels-cuda's reductions
 * trace and its row-fused trace (case 8: LayerNorm, RMSNorm and softmax rows, a weight
 * gradient's column sums and their finalize kernel) and tests/test-membound-trace.h (case 9:
 * run it with CASTSCOPE_ROW_RPW=2 CASTSCOPE_PW_TILES=2 for the rows staged by cp.async and the
 * multi-tile pointwise form).  The program is built without a device (cs_cuda_program_generate: the dry build, 132
 * SMs); its generated CUDA source is compiled as C++17 by g++ with the emulation of
 * tests/emu-launch.h (threadIdx/blockIdx in two dims, __shared__ as statics, barriers of the
 * block's POSIX threads, shuffles through a per-warp exchange) plus atomicAdd, __threadfence
 * and __ldcg, loaded with dlopen; every step runs as a POSIX thread per CUDA thread, one block at
 * a time, on a host arena laid out as the device's (poisoned with 0xff bytes, NaN, first; the
 * split counters zeroed as a device build does).  The step runs twice (the last split block
 * must leave its counter at 0 for the next launch), then every output is compared with the
 * CPU f64 reference (core/cs-ref.c) by relative L2 error under test-kernels-cuda's per-dtype
 * bound (bf16 2e-2, f16 5e-3, f32 1e-4), and no output element may be NaN.
 *
 * Limits: kernel steps only (no matmuls); blocks run one after another, so it checks the
 * kernels' arithmetic, indexing and split bookkeeping, not the device's memory model or speed.
 */
#include "cs-config.h"

#include <dlfcn.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <glib/gstdio.h>

#include "cs-cuda-private.h"
#include "cs-parse.h"
#include "cs-policy.h"
#include "cs-ref.h"
#include "cs-tensor.h"
#include "test-membound-trace.h"
#include "test-row-fused-trace.h"
#include "emu-launch.h"

static const char emu_header[] =
  "// CPU emulation of the CUDA subset the generated region kernels use (developer check only).\n"
  EMU_HEADER_COMMON
  "static inline void __threadfence () { __atomic_thread_fence (__ATOMIC_SEQ_CST); }\n"
  "static inline int atomicAdd (int *p, int v) { return __atomic_fetch_add (p, v, __ATOMIC_SEQ_CST); }\n"
  "template <class T> static inline T __ldcg (const T *p) { return *p; }\n"
  "static inline float rsqrtf (float x) { return 1.0f / sqrtf (x); }\n"
  "static inline void cs_cp_async16 (void *s, const void *g) { memcpy (s, g, 16); }\n"
  "static inline void cs_cp_async_commit (void) {}\n"
  "static inline void cs_cp_async_wait0 (void) {}\n";

static double
bound (CsDtype dt)
{
  switch (dt)
    {
    case CS_DTYPE_BF16: return 2e-2;
    case CS_DTYPE_F16: return 5e-3;
    case CS_DTYPE_F32: return 1e-4;
    default: return 1e-12;
    }
}

/* Builds @text's program, runs it twice on the emulation and compares its outputs with the
 * CPU f64 reference; returns the largest error / bound (infinity for a NaN). */
static double
emu_check (const char *text, const char *what, const char *tag)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTrace) fwd = cs_parse_trace (text, "test", &error);
  g_autoptr(GHashTable) env = cs_ref_env_new ();
  g_autoptr(GPtrArray) fo = NULL, fn = NULL;
  g_autoptr(GPtrArray) fl = NULL;
  CsPolicy policy;
  CsCudaProgram *p;
  EmuLaunch launch;
  char *arena;
  void *h;
  double worst = 0;

  g_assert_no_error (error);
  fl = cs_ref_dup_leaf_inputs (fwd);
  cs_policy_init_default (&policy);
  g_assert_true (cs_policy_set (&policy, "executors", "nvfuser,torch", NULL));
  p = cs_cuda_program_generate (fwd, NULL, &policy, &error);
  g_assert_no_error (error);
  g_assert_nonnull (p);
  g_print ("%s\n", what);
  for (guint s = 0; s < p->steps->len; s++)
    g_print ("   step %s: %s\n", ((CsCudaStep *) p->steps->pdata[s])->kind_name,
             ((CsCudaStep *) p->steps->pdata[s])->label);

  launch = emu_load (emu_header, p, tag, &h);

  arena = g_malloc (MAX (p->arena_bytes, 1));
  memset (arena, 0xff, p->arena_bytes);   /* NaN poison */
  p->arena = arena;
  for (guint i = 0; i < p->buffers->len; i++)
    {
      CsCudaBuffer *b = &g_array_index (p->buffers, CsCudaBuffer, i);

      if (b->zeroed)
        memset (arena + b->offset, 0, b->size_bytes);
    }
  for (guint i = 0; i < p->inputs->len; i++)
    {
      CsCudaTensorInfo *in = &g_array_index (p->inputs, CsCudaTensorInfo, i);
      CsProxy *px = NULL;
      g_autoptr(CsTensor) x = NULL;

      for (guint j = 0; j < fl->len; j++)
        if (g_strcmp0 (((CsProxy *) g_ptr_array_index (fl, j))->name, in->name) == 0)
          px = g_ptr_array_index (fl, j);
      g_assert_nonnull (px);
      x = cs_ref_random_input (fwd, px, 100 + i, &error);
      g_assert_no_error (error);
      memcpy (cs_cuda_program_slot_ptr (p, g_array_index (p->input_slots, guint, i)), x->data, cs_tensor_nbytes (x));
      cs_ref_env_insert (env, in->name, x);
    }
  for (guint s = 0; s < p->setup_steps->len; s++)
    emu_step (p, g_ptr_array_index (p->setup_steps, s), launch);
  for (guint r = 0; r < 2; r++)
    for (guint s = 0; s < p->steps->len; s++)
      emu_step (p, g_ptr_array_index (p->steps, s), launch);
  g_assert_true (cs_ref_run_env (fwd, env, CS_REF_F64, 0, &fo, &fn, NULL, &error));
  g_assert_no_error (error);
  for (guint i = 0; i < p->buffers->len; i++)
    {
      CsCudaBuffer *b = &g_array_index (p->buffers, CsCudaBuffer, i);

      /* the split counters are back at 0 */
      if (b->zeroed)
        for (gsize e = 0; e < b->size_bytes; e++)
          if (arena[b->offset + e] != 0)
            {
              g_print ("  counter buffer %u not reset\n", i);
              worst = INFINITY;
              break;
            }
    }
  for (guint i = 0; i < p->outputs->len; i++)
    {
      CsCudaTensorInfo *o = &g_array_index (p->outputs, CsCudaTensorInfo, i);
      g_autoptr(CsTensor) got = cs_tensor_new (o->dtype, o->shape, o->rank, &error);
      CsTensor *ref = NULL;
      double num = 0, den = 0, rel;
      guint bad = 0;

      emu_output (p, i, got);
      for (guint j = 0; fo && j < fo->len; j++)
        if (g_strcmp0 (g_ptr_array_index (fn, j), o->name) == 0)
          ref = g_ptr_array_index (fo, j);
      g_assert_nonnull (ref);
      g_assert_cmpint (ref->numel, ==, got->numel);
      for (int64_t e = 0; e < got->numel; e++)
        {
          double a = cs_tensor_get_f64 (got, e), r = cs_tensor_get_f64 (ref, e);

          if (isnan (a))
            bad++;
          num += (a - r) * (a - r);
          den += r * r;
        }
      rel = den > 0 ? sqrt (num / den) : sqrt (num);
      g_print ("  out %s (%s): rel.L2 %.3e (bound %.0e)%s\n", o->name, cs_dtype_short_name (o->dtype), rel,
               bound (o->dtype), bad ? " NaN" : "");
      worst = MAX (worst, bad ? INFINITY : rel / bound (o->dtype));
    }
  p->arena = NULL;
  g_free (arena);
  dlclose (h);
  cs_cuda_program_free (p);
  return worst;
}

/* Column sums in the 16-byte form: split (bf16, cast back to bf16), Welford var_mean with a
 * partial last tile (264 columns), amax, two reduced dims, two kept dims with a broadcast
 * factor, f16, prod; the scalar tile (70 columns); the row-fused kernels' column sums; the
 * memory-bound forms' trace. */
static const char *const emu_cases[] = {
  "def computation(x):\n"
  "  # x: \"cuda:0 bf16[2000, 512]\"\n"
  "  [t2] = nvFusion0(x)\n"
  "    # t0 = prims.convert_element_type(x, dtypes.float32)  # t0: \"cuda:0 f32[2000, 512]\"\n"
  "    # t1 = prims.sum(t0, (0,))  # t1: \"cuda:0 f32[512]\"\n"
  "    # t2 = prims.convert_element_type(t1, dtypes.bfloat16)  # t2: \"cuda:0 bf16[512]\"\n"
  "  return (t2,)\n",
  "def computation(y):\n"
  "  # y: \"cuda:0 f32[3000, 264]\"\n"
  "  [t2, t3] = nvFusion0(y)\n"
  "    # (t2, t3) = prims.var_mean(y, (0,), correction=1)\n"
  "  return (t2, t3)\n",
  "def computation(z):\n"
  "  # z: \"cuda:0 bf16[700, 40]\"\n"
  "  [t1] = nvFusion0(z)\n"
  "    # t0 = prims.convert_element_type(z, dtypes.float32)  # t0: \"cuda:0 f32[700, 40]\"\n"
  "    # t1 = prims.amax(t0, (0,))  # t1: \"cuda:0 f32[40]\"\n"
  "  return (t1,)\n",
  "def computation(w):\n"
  "  # w: \"cuda:0 f32[4, 300, 128]\"\n"
  "  [t1] = nvFusion0(w)\n"
  "    # t1 = prims.sum(w, (0, 1))  # t1: \"cuda:0 f32[128]\"\n"
  "  return (t1,)\n",
  "def computation(u, b):\n"
  "  # u: \"cuda:0 bf16[2000, 4, 64]\"\n"
  "  # b: \"cuda:0 bf16[64]\"\n"
  "  [t4] = nvFusion0(u, b)\n"
  "    # t0 = prims.convert_element_type(u, dtypes.float32)  # t0: \"cuda:0 f32[2000, 4, 64]\"\n"
  "    # t1 = prims.convert_element_type(b, dtypes.float32)  # t1: \"cuda:0 f32[64]\"\n"
  "    # t2 = prims.broadcast_in_dim(t1, (2000, 4, 64), (2,))  # t2: \"cuda:0 f32[2000, 4, 64]\"\n"
  "    # t3 = prims.mul(t0, t2)  # t3: \"cuda:0 f32[2000, 4, 64]\"\n"
  "    # t4 = prims.sum(t3, (0,))  # t4: \"cuda:0 f32[4, 64]\"\n"
  "  return (t4,)\n",
  "def computation(h):\n"
  "  # h: \"cuda:0 f16[130, 24]\"\n"
  "  [t1] = nvFusion0(h)\n"
  "    # t0 = prims.convert_element_type(h, dtypes.float32)  # t0: \"cuda:0 f32[130, 24]\"\n"
  "    # t1 = prims.sum(t0, (0,))  # t1: \"cuda:0 f32[24]\"\n"
  "  return (t1,)\n",
  "def computation(q):\n"
  "  # q: \"cuda:0 f32[500, 16]\"\n"
  "  [t2] = nvFusion0(q)\n"
  "    # t0 = prims.mul(0.01, q)  # t0: \"cuda:0 f32[500, 16]\"\n"
  "    # t1 = prims.exp(t0)  # t1: \"cuda:0 f32[500, 16]\"\n"
  "    # t2 = prims.prod(t1, (0,))  # t2: \"cuda:0 f32[16]\"\n"
  "  return (t2,)\n",
  "def computation(x, y, b):\n"
  "  # x: \"cuda:0 bf16[37, 3000]\"\n"
  "  # y: \"cuda:0 f32[20000, 70]\"\n"
  "  # b: \"cuda:0 bf16[64]\"\n"
  "  [t1, t2, t3, t5, t9, t11, t12] = nvFusion0(x, y, b)\n"
  "    # t0 = prims.convert_element_type(x, dtypes.float32)  # t0: \"cuda:0 f32[37, 3000]\"\n"
  "    # t1 = prims.sum(t0, (1,))  # t1: \"cuda:0 f32[37]\"\n"
  "    # (t2, t3) = prims.var_mean(t0, (0,), correction=1)\n"
  "    # t4 = prims.broadcast_in_dim(t1, (37, 3000), (0,))  # t4: \"cuda:0 f32[37, 3000]\"\n"
  "    # t6 = prims.sub(t0, t4)  # t6: \"cuda:0 f32[37, 3000]\"\n"
  "    # t7 = prims.mul(0.001, t6)  # t7: \"cuda:0 f32[37, 3000]\"\n"
  "    # t70 = prims.exp(t7)  # t70: \"cuda:0 f32[37, 3000]\"\n"
  "    # t5 = prims.convert_element_type(t70, dtypes.bfloat16)  # t5: \"cuda:0 bf16[37, 3000]\"\n"
  "    # t8 = prims.convert_element_type(b, dtypes.float32)  # t8: \"cuda:0 f32[64]\"\n"
  "    # t9 = prims.amax(t8, (0,))  # t9: \"cuda:0 f32[]\"\n"
  "    # t10 = prims.mul(y, y)  # t10: \"cuda:0 f32[20000, 70]\"\n"
  "    # t11 = prims.sum(t10, (0,))  # t11: \"cuda:0 f32[70]\"\n"
  "    # (t12, t13) = prims.var_mean(y, (1,), correction=0)\n"
  "  return (t1, t2, t3, t5, t9, t11, t12)\n",
  row_fused_trace,
  membound_trace,
};

int
main (int argc, char **argv)
{
  int only = argc > 1 ? atoi (argv[1]) : -1;
  g_autofree char *gxx = g_find_program_in_path ("g++");
  g_autoptr(GError) derr = NULL;
  guint n_fail = 0;

  if (gxx == NULL)
    {
      g_printerr ("emu-colred: needs g++\n");
      return 77;
    }
  emu_dir = g_dir_make_tmp ("castscope-emu-XXXXXX", &derr);
  g_assert_no_error (derr);
  for (guint k = 0; k < G_N_ELEMENTS (emu_cases); k++)
    {
      g_autofree char *what = g_strdup_printf ("case %u", k);
      g_autofree char *tag = g_strdup_printf ("c%u", k);
      double worst;

      if (only >= 0 && (int) k != only)
        continue;
      worst = emu_check (emu_cases[k], what, tag);
      g_print ("  => worst ratio %.3g %s\n", worst, worst <= 1.0 ? "OK" : "FAIL");
      n_fail += !(worst <= 1.0);
    }
  g_rmdir (emu_dir);
  g_free (emu_dir);
  g_print ("%s\n", n_fail ? "FAILED" : "all OK");
  return n_fail ? 1 : 0;
}
