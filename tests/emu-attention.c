/* emu-attention.c: the attention kernels run on the CPU, on a machine without a GPU.
 *
 * A developer check, built with the CUDA executor and run by hand (a full sweep takes minutes):
 *   build/tests/emu-attention [CASE]
 * CASE: an index into test-kernels-attention.c's cases (the default runs all of them, each as
 * the exact and the f64 program, then every one of the others), 100 + N for its logsumexp
 * layout N, 200 for torch.compile's cuDNN attention pair (data/aten/, with CS_DATA_DIR), 300 + N
 * for its ATen flash (0) and efficient (1) pairs; the exit status is 1 when any case fails, 77
 * when case 200 alone was asked for without its data.
 * Each program is built without a device (CS_CUDA_BUILD_DRY); its generated CUDA source is
 * compiled as C++17 by g++ with tests/emu-launch.h's emulation (threadIdx/blockIdx, __shared__
 * as statics, __syncthreads() as a barrier of the block's threads, warp shuffles through a
 * per-warp exchange between two barriers of the warp's 32 threads, the bf16/f16 conversions
 * round-to-nearest-even) plus atomicAdd under a mutex, the tensor-core mma.sync m16n8k16 as a
 * gather of the warp's fragments by the PTX ISA's layout, an f32 multiply-accumulate and a
 * scatter of the accumulator fragments, ldmatrix m8n8.x4 (plain and .trans) as a gather of the
 * warp's row addresses, cp.async as a 16-byte copy that lands at the thread's wait_group 0, or
 * at once with CS_EMU_CP_EAGER=1; loaded with dlopen, and every step runs as a POSIX thread per
 * CUDA thread, one block at a time, on a host arena laid out as the device's.  Outputs are
 * compared with the CPU f64 reference as the GPU test does.
 *
 * Limits: kernel steps only (no cuBLASLt GEMM); every shuffle and barrier must be reached by all
 * threads of its warp or block (true of the attention kernels).  It checks the kernels'
 * arithmetic and indexing, not the device's memory model or speed.
 */
#define main att_test_main
#include "test-kernels-attention.c"
#undef main
#include "emu-launch.h"

/* The emulation put in front of the generated kernels (it replaces the jit preamble). */
static const char emu_header[] =
  "// CPU emulation of the CUDA subset the generated attention kernels use (developer check only).\n"
  EMU_HEADER_COMMON
  "#include <mutex>\n"
  "static std::mutex emu_mu;\n"
  "static inline float atomicAdd (float *p, float v) { std::lock_guard<std::mutex> g (emu_mu); float o = *p; *p = o + v; return o; }\n"
  "static inline double atomicAdd (double *p, double v) { std::lock_guard<std::mutex> g (emu_mu); double o = *p; *p = o + v; return o; }\n"
  "// mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}: the warp's fragments gathered through a\n"
  "// per-warp exchange, D = A B + C in f32 (exact products, summed in k order), scattered back.\n"
  "// Layouts (PTX ISA, Matrix Fragments for mma.m16n8k16 with floating point type), g = lane >> 2,\n"
  "// t = lane % 4: A a_i (i = 0..7, register i / 2, half i % 2): row g + 8 * ((i >> 1) & 1),\n"
  "// col 2 t + (i & 1) + 8 * (i >> 2); B b_i (i = 0..3): row 2 t + (i & 1) + 8 * (i >> 1), col g;\n"
  "// C/D c_i (i = 0..3): row g + 8 * (i >> 1), col 2 t + (i & 1).\n"
  "static unsigned emu_mma_a[32][32][4], emu_mma_b[32][32][2];\n"
  "static float emu_mma_c[32][32][4];\n"
  "template <bool BF> static inline void emu_mma (float *d, const unsigned *a, const unsigned *b)\n"
  "{\n"
  "  int w = emu_lin / 32, l = emu_lin % 32;\n"
  "  auto f = [] (unsigned h) -> float { return BF ? cs_bf2f ((unsigned short) h) : cs_h2f ((unsigned short) h); };\n"
  "  for (int r = 0; r < 4; r++) { emu_mma_a[w][l][r] = a[r]; emu_mma_c[w][l][r] = d[r]; }\n"
  "  emu_mma_b[w][l][0] = b[0]; emu_mma_b[w][l][1] = b[1];\n"
  "  pthread_barrier_wait (&emu_warp_bar[w]);\n"
  "  float A[16][16], B[16][8], C[16][8];\n"
  "  for (int ln = 0; ln < 32; ln++)\n"
  "    {\n"
  "      int g = ln >> 2, t = ln & 3;\n"
  "      for (int i = 0; i < 8; i++)\n"
  "        A[g + 8 * ((i >> 1) & 1)][2 * t + (i & 1) + 8 * (i >> 2)] = f ((emu_mma_a[w][ln][i >> 1] >> (16 * (i & 1))) & 0xffff);\n"
  "      for (int i = 0; i < 4; i++)\n"
  "        B[2 * t + (i & 1) + 8 * (i >> 1)][g] = f ((emu_mma_b[w][ln][i >> 1] >> (16 * (i & 1))) & 0xffff);\n"
  "      for (int i = 0; i < 4; i++)\n"
  "        C[g + 8 * (i >> 1)][2 * t + (i & 1)] = emu_mma_c[w][ln][i];\n"
  "    }\n"
  "  pthread_barrier_wait (&emu_warp_bar[w]);\n"
  "  int g = l >> 2, t = l & 3;\n"
  "  for (int i = 0; i < 4; i++)\n"
  "    {\n"
  "      int r = g + 8 * (i >> 1), c = 2 * t + (i & 1);\n"
  "      float acc = C[r][c];\n"
  "      for (int k = 0; k < 16; k++) acc += A[r][k] * B[k][c];\n"
  "      d[i] = acc;\n"
  "    }\n"
  "}\n"
  "static inline void cs_mma_bf16_16816 (float *d, const unsigned *a, const unsigned *b) { emu_mma<true> (d, a, b); }\n"
  "static inline void cs_mma_f16_16816 (float *d, const unsigned *a, const unsigned *b) { emu_mma<false> (d, a, b); }\n"
  "// ldmatrix.sync.aligned.m8n8.x4{,.trans}.shared.b16: the warp's row addresses gathered (lane\n"
  "// 8 j + r: row r of matrix j, 8 consecutive 16-bit elements); PTX ISA layout: lane l's register\n"
  "// j holds matrix j's elements (l / 4, 2 (l % 4)) and (l / 4, 2 (l % 4) + 1), with .trans\n"
  "// (2 (l % 4), l / 4) and (2 (l % 4) + 1, l / 4); the first in the low half.\n"
  "static const unsigned short *emu_ldm_p[32][32];\n"
  "template <bool TR> static inline void emu_ldm (unsigned *r, const void *p)\n"
  "{\n"
  "  int w = emu_lin / 32, l = emu_lin % 32;\n"
  "  if (((uintptr_t) p) % 16 != 0) { fprintf (stderr, \"ldmatrix: unaligned row\\n\"); abort (); }\n"
  "  emu_ldm_p[w][l] = (const unsigned short *) p;\n"
  "  pthread_barrier_wait (&emu_warp_bar[w]);\n"
  "  for (int j = 0; j < 4; j++)\n"
  "    {\n"
  "      unsigned lo, hi;\n"
  "      if (TR) { lo = emu_ldm_p[w][8 * j + 2 * (l % 4)][l / 4]; hi = emu_ldm_p[w][8 * j + 2 * (l % 4) + 1][l / 4]; }\n"
  "      else { lo = emu_ldm_p[w][8 * j + l / 4][2 * (l % 4)]; hi = emu_ldm_p[w][8 * j + l / 4][2 * (l % 4) + 1]; }\n"
  "      r[j] = lo | (hi << 16);\n"
  "    }\n"
  "  pthread_barrier_wait (&emu_warp_bar[w]);\n"
  "}\n"
  "static inline void cs_ldm_x4 (unsigned *r, const void *p) { emu_ldm<false> (r, p); }\n"
  "static inline void cs_ldm_x4_t (unsigned *r, const void *p) { emu_ldm<true> (r, p); }\n"
  "// cp.async.cg.shared.global 16 bytes (both addresses 16-byte aligned): the source read at\n"
  "// once, the shared destination written only when the thread waits (wait_group 0), the latest\n"
  "// the PTX ISA allows, so a tile used before its wait and barrier reads stale data; with\n"
  "// CS_EMU_CP_EAGER=1 in the environment written at once, the earliest, so a copy into a stage\n"
  "// other warps still read races with them.  A thread that ends with copies pending aborts.\n"
  "struct emu_cp_t { void *s; unsigned char d[16]; };\n"
  "static thread_local emu_cp_t emu_cp_q[1024];\n"
  "static thread_local int emu_cp_n;\n"
  "static int emu_cp_eager = -1;\n"
  "static inline void cs_cp_async16 (void *s, const void *g)\n"
  "{\n"
  "  if (((uintptr_t) s | (uintptr_t) g) % 16 != 0) { fprintf (stderr, \"cp.async: unaligned\\n\"); abort (); }\n"
  "  if (emu_cp_eager < 0) emu_cp_eager = getenv (\"CS_EMU_CP_EAGER\") != NULL && atoi (getenv (\"CS_EMU_CP_EAGER\")) != 0;\n"
  "  if (emu_cp_eager) { memcpy (s, g, 16); return; }\n"
  "  if (emu_cp_n == 1024) { fprintf (stderr, \"cp.async: too many pending copies\\n\"); abort (); }\n"
  "  emu_cp_q[emu_cp_n].s = s;\n"
  "  memcpy (emu_cp_q[emu_cp_n++].d, g, 16);\n"
  "}\n"
  "static inline void cs_cp_async_commit () {}\n"
  "static inline void cs_cp_async_wait0 ()\n"
  "{\n"
  "  for (int i = 0; i < emu_cp_n; i++) memcpy (emu_cp_q[i].s, emu_cp_q[i].d, 16);\n"
  "  emu_cp_n = 0;\n"
  "}\n"
  "#define EMU_THREAD_END() \\\n"
  "  if (emu_cp_n != 0) { fprintf (stderr, \"cp.async: %d copies pending at the thread's end\\n\", emu_cp_n); abort (); }\n";

static double
emu_run (CsCudaProgram *p, CsTrace *fwd, CsTrace *bwd, GHashTable *env, const char *what, guint *n, const char *tag)
{
  g_autoptr(GPtrArray) fo = NULL, fn = NULL, bo = NULL, bn = NULL;
  void *h;
  EmuLaunch launch;
  double worst = 0;
  char *arena;

  launch = emu_load (emu_header, p, tag, &h);

  arena = g_malloc (MAX (p->arena_bytes, 1));
  memset (arena, 0xff, p->arena_bytes);
  p->arena = arena;
  fill_inputs (p, fwd, bwd, env);
  for (guint i = 0; i < p->inputs->len; i++)
    {
      CsCudaTensorInfo *in = &g_array_index (p->inputs, CsCudaTensorInfo, i);
      g_autoptr(GError) error = NULL;
      g_autoptr(CsTensor) x = cs_tensor_convert (g_hash_table_lookup (env, in->name), in->dtype, &error);

      g_assert_no_error (error);
      memcpy (cs_cuda_program_slot_ptr (p, g_array_index (p->input_slots, guint, i)), x->data, cs_tensor_nbytes (x));
    }
  for (guint s = 0; s < p->steps->len; s++)
    emu_step (p, g_ptr_array_index (p->steps, s), launch);
  cpu_step (fwd, bwd, env, CS_REF_F64, &fo, &fn, &bo, &bn);
  for (guint i = 0; i < p->outputs->len; i++)
    {
      CsCudaTensorInfo *o = &g_array_index (p->outputs, CsCudaTensorInfo, i);
      g_autoptr(GError) error = NULL;
      g_autoptr(CsTensor) got = cs_tensor_new (o->dtype, o->shape, o->rank, &error);
      CsTensor *ref = o->backward ? named (bo, bn, o->name) : named (fo, fn, o->name);
      double rel;

      g_assert_no_error (error);
      emu_output (p, i, got);
      g_assert_nonnull (ref);
      if (!cs_dtype_is_float (o->dtype))
        continue;
      rel = rel_l2 (got, ref);
      g_print ("  %s %s %s (%s): rel.L2 %.3e (bound %.0e)\n", what, o->backward ? "grad" : "out", o->name,
               cs_dtype_short_name (o->dtype), rel, bound (o->dtype));
      worst = MAX (worst, rel / bound (o->dtype));
      (*n)++;
    }
  p->arena = NULL;
  g_free (arena);
  dlclose (h);
  return worst;
}

int
main (int argc, char **argv)
{
  int only = argc > 1 ? atoi (argv[1]) : -1;
  g_autofree char *gxx = g_find_program_in_path ("g++");
  g_autoptr(GError) derr = NULL;
  guint n_fail = 0;
  gboolean skipped = FALSE;

  if (gxx == NULL)
    {
      g_printerr ("emu-attention: needs g++\n");
      return 77;
    }
  emu_dir = g_dir_make_tmp ("castscope-emu-XXXXXX", &derr);
  g_assert_no_error (derr);

  for (guint c = 0; c < G_N_ELEMENTS (cases); c++)
    for (int f64 = 0; f64 < 2; f64++)
      {
        g_autoptr(CsPipeline) pl = NULL;
        CsTrace *fwd, *bwd;
        g_autoptr(GHashTable) env = cs_ref_env_new ();
        g_autoptr(GError) error = NULL;
        g_autofree char *name = case_name (&cases[c]);
        g_autofree char *tag = g_strdup_printf ("c%u_%d", c, f64);
        g_autoptr(CsTrace) f = NULL, b = NULL;
        CsPolicy policy;
        CsCudaProgram *p;
        guint n = 0;
        double worst;

        if (only >= 0 && (int) c != only)
          continue;
        pl = case_pipeline (&cases[c], 0.0);
        fwd = cs_pipeline_get_forward (pl);
        bwd = cs_pipeline_get_backward (pl);
        sdpa_policy (&policy);
        if (f64)
          {
            f = cs_cuda_trace_to_f64 (fwd);
            b = cs_cuda_trace_to_f64 (bwd);
          }
        p = cs_cuda_program_build_full (f64 ? f : fwd, f64 ? b : bwd, &policy, CS_CUDA_BUILD_DRY, &error);
        g_assert_no_error (error);
        g_print ("%s%s\n", name, f64 ? " [f64 program]" : "");
        for (guint s = 0; s < p->steps->len; s++)
          g_print ("   step %s: %s\n", ((CsCudaStep *) p->steps->pdata[s])->kind_name, ((CsCudaStep *) p->steps->pdata[s])->label);
        worst = emu_run (p, f64 ? f : fwd, f64 ? b : bwd, env, name, &n, tag);
        g_print ("  => worst ratio %.3g over %u outputs %s\n", worst, n, worst <= 1.0 && n >= (cases[c].packed ? 2u : 4u) ? "OK" : "FAIL");
        n_fail += !(worst <= 1.0 && n >= (cases[c].packed ? 2u : 4u));
        cs_cuda_program_free (p);
      }
  if (only < 0 || only == 200)
    {
      g_autoptr(CsPipeline) pl = aten_pipeline ();
      g_autoptr(GHashTable) env = cs_ref_env_new ();
      g_autoptr(GError) error = NULL;
      CsPolicy policy;
      CsCudaProgram *p;
      guint n = 0;
      double worst;

      if (pl != NULL)
        {
          sdpa_policy (&policy);
          p = cs_cuda_program_build_full (cs_pipeline_get_forward (pl), cs_pipeline_get_backward (pl), &policy,
                                          CS_CUDA_BUILD_DRY, &error);
          g_assert_no_error (error);
          for (guint s = 0; s < p->steps->len; s++)
            g_print ("step %s: %s\n", ((CsCudaStep *) p->steps->pdata[s])->kind_name,
                     ((CsCudaStep *) p->steps->pdata[s])->label);
          worst = emu_run (p, cs_pipeline_get_forward (pl), cs_pipeline_get_backward (pl), env, "aten", &n, "aten");
          g_print ("  => worst ratio %.3g over %u outputs %s\n", worst, n, worst <= 1.0 && n >= 5 ? "OK" : "FAIL");
          n_fail += !(worst <= 1.0 && n >= 5);
          cs_cuda_program_free (p);
        }
      else
        {
          g_print ("aten: skipped (CS_DATA_DIR not set)\n");
          skipped = TRUE;
        }
    }
  for (guint c = 0; c < G_N_ELEMENTS (aten_pairs); c++)
    for (int f64 = 0; f64 < 2; f64++)
      {
        g_autoptr(CsPipeline) pl = NULL;
        g_autoptr(CsTrace) f = NULL, b = NULL;
        g_autoptr(GHashTable) env = cs_ref_env_new ();
        g_autoptr(GError) error = NULL;
        g_autofree char *tag = g_strdup_printf ("a%u_%d", c, f64);
        CsPolicy policy;
        CsCudaProgram *p;
        guint n = 0;
        double worst;

        if (only >= 0 && only != 300 + (int) c)
          continue;
        pl = aten_text_pipeline (aten_pairs[c]);
        f = f64 ? cs_cuda_trace_to_f64 (cs_pipeline_get_forward (pl)) : cs_trace_ref (cs_pipeline_get_forward (pl));
        b = f64 ? cs_cuda_trace_to_f64 (cs_pipeline_get_backward (pl)) : cs_trace_ref (cs_pipeline_get_backward (pl));
        sdpa_policy (&policy);
        p = cs_cuda_program_build_full (f, b, &policy, CS_CUDA_BUILD_DRY, &error);
        g_assert_no_error (error);
        g_print ("aten pair %u%s\n", c, f64 ? " [f64]" : "");
        worst = emu_run (p, f, b, env, tag, &n, tag);
        g_print ("  => worst ratio %.3g over %u outputs %s\n", worst, n, worst <= 1.0 && n >= 5 ? "OK" : "FAIL");
        n_fail += !(worst <= 1.0 && n >= 5);
        cs_cuda_program_free (p);
      }
  for (guint c = 0; c < G_N_ELEMENTS (lse_traces); c++)
    for (int f64 = 0; f64 < 2; f64++)
      {
        g_autoptr(CsTrace) t = parse_text (lse_traces[c]);
        g_autoptr(CsTrace) t64 = cs_cuda_trace_to_f64 (t);
        g_autoptr(GHashTable) env = cs_ref_env_new ();
        g_autoptr(GError) error = NULL;
        g_autofree char *tag = g_strdup_printf ("l%u_%d", c, f64);
        CsPolicy policy;
        CsCudaProgram *p;
        guint n = 0;
        double worst;

        if (only >= 0 && only != 100 + (int) c)
          continue;
        sdpa_policy (&policy);
        p = cs_cuda_program_build_full (f64 ? t64 : t, NULL, &policy, CS_CUDA_BUILD_DRY, &error);
        g_assert_no_error (error);
        g_print ("lse layout %u%s\n", c, f64 ? " [f64]" : "");
        worst = emu_run (p, f64 ? t64 : t, NULL, env, tag, &n, tag);
        g_print ("  => worst ratio %.3g over %u outputs %s\n", worst, n, worst <= 1.0 && n == 2 ? "OK" : "FAIL");
        n_fail += !(worst <= 1.0 && n == 2);
        cs_cuda_program_free (p);
      }
  g_rmdir (emu_dir);
  g_free (emu_dir);
  g_print ("%s\n", n_fail ? "FAILED" : "all OK");
  return n_fail ? 1 : only == 200 && skipped ? 77 : 0;
}
