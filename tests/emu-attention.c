/* emu-attention.c: the attention kernels run on the CPU, on a machine without a GPU.
 *
 * A developer check, built with the CUDA executor and run by hand (a full sweep takes minutes):
 *   build/tests/emu-attention [CASE]
 * CASE: an index into test-kernels-attention.c's cases (the default runs all of them, each as
 * the exact and the f64 program), 100 + N for its logsumexp layout N, 200 for torch.compile's
 * cuDNN attention pair, 300 + N for its ATen flash (0) and efficient (1) pairs.  Each program is built without a device (CS_CUDA_BUILD_DRY); its
 * generated CUDA source is compiled as C++17 by g++ with a small emulation of what the kernels
 * use (threadIdx/blockIdx, __shared__ as statics, __syncthreads() as a barrier of the block's
 * threads, warp shuffles through a per-warp exchange between two barriers of the warp's 32
 * threads, the bf16/f16 conversions round-to-nearest-even, atomicAdd under a mutex, the
 * tensor-core mma.sync m16n8k16 as a gather of the warp's fragments by the PTX ISA's layout, an
 * f32 multiply-accumulate and a scatter of the accumulator fragments, ldmatrix m8n8.x4 (plain
 * and .trans) as a gather of the warp's row addresses, cp.async as a 16-byte copy that lands
 * at the thread's wait_group 0, or at once with CS_EMU_CP_EAGER=1),
 * loaded
 * with dlopen, and every step runs as a POSIX thread per CUDA thread, one block at a time, on a
 * host arena laid out as the device's.  Outputs are compared with the CPU f64 reference as the
 * GPU test does.
 *
 * Limits: kernel steps only (no cuBLASLt GEMM); every shuffle and barrier must be reached by all
 * threads of its warp or block (true of the attention kernels); the kernels are called through a
 * function type of twelve pointers (the x86-64 System V convention ignores the extra ones).  It
 * checks the kernels' arithmetic and indexing, not the device's memory model or speed.
 */
#define main att_test_main
#include "test-kernels-attention.c"
#undef main
#include <dlfcn.h>
#include <glib/gstdio.h>

/* The emulation put in front of the generated kernels (it replaces the jit preamble). */
static const char emu_header[] =
  "// CPU emulation of the CUDA subset the generated attention kernels use (developer check only).\n"
  "#include <pthread.h>\n"
  "#include <math.h>\n"
  "#include <string.h>\n"
  "#include <stdint.h>\n"
  "#include <stdio.h>\n"
  "#include <stdlib.h>\n"
  "#include <mutex>\n"
  "struct emu_uint3 { unsigned x, y, z; };\n"
  "static thread_local emu_uint3 threadIdx, blockIdx;\n"
  "static emu_uint3 blockDim, gridDim;\n"
  "static pthread_barrier_t emu_block_bar, emu_warp_bar[32];\n"
  "static double emu_xch[32][32];\n"
  "static std::mutex emu_mu;\n"
  "#define __global__\n"
  "#define __launch_bounds__(...)\n"
  "#define __restrict__ __restrict\n"
  "#define __shared__ static\n"
  "static inline void __syncthreads () { pthread_barrier_wait (&emu_block_bar); }\n"
  "template <class T> static inline T emu_shfl (T v, int src)\n"
  "{\n"
  "  int w = threadIdx.x / 32, l = threadIdx.x % 32;\n"
  "  emu_xch[w][l] = (double) v;\n"
  "  pthread_barrier_wait (&emu_warp_bar[w]);\n"
  "  T r = (T) emu_xch[w][src];\n"
  "  pthread_barrier_wait (&emu_warp_bar[w]);\n"
  "  return r;\n"
  "}\n"
  "template <class T> static inline T __shfl_sync (unsigned, T v, int src) { return emu_shfl (v, src); }\n"
  "static inline float cs_shfl (float v, int m) { return emu_shfl (v, (int) (threadIdx.x % 32) ^ m); }\n"
  "static inline double cs_shfl (double v, int m) { return emu_shfl (v, (int) (threadIdx.x % 32) ^ m); }\n"
  "static inline float __int_as_float (int i) { float f; memcpy (&f, &i, 4); return f; }\n"
  "static inline double __longlong_as_double (long long i) { double f; memcpy (&f, &i, 8); return f; }\n"
  "static inline float cs_bf2f (unsigned short h) { unsigned u = ((unsigned) h) << 16; float f; memcpy (&f, &u, 4); return f; }\n"
  "static inline unsigned short cs_f2bf (float f) { unsigned u; memcpy (&u, &f, 4); if ((u & 0x7fffffff) > 0x7f800000) return 0x7fc0; u += 0x7fff + ((u >> 16) & 1); return (unsigned short) (u >> 16); }\n"
  "static inline float cs_h2f (unsigned short h) { _Float16 x; memcpy (&x, &h, 2); return (float) x; }\n"
  "static inline unsigned short cs_f2h (float f) { _Float16 x = (_Float16) f; unsigned short h; memcpy (&h, &x, 2); return h; }\n"
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
  "  int w = threadIdx.x / 32, l = threadIdx.x % 32;\n"
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
  "  int w = threadIdx.x / 32, l = threadIdx.x % 32;\n"
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
  "}\n";

/* emu_launch(): one block at a time, a thread per CUDA thread. */
static const char emu_tail[] =
  "struct EmuArg { void (*fn) (); void **args; unsigned tid, bid; };\n"
  "typedef void (*EmuFn12) (void *, void *, void *, void *, void *, void *, void *, void *, void *, void *, void *, void *);\n"
  "static void *emu_thread (void *d)\n"
  "{\n"
  "  EmuArg *a = (EmuArg *) d;\n"
  "  threadIdx = { a->tid, 0, 0 };\n"
  "  blockIdx = { a->bid, 0, 0 };\n"
  "  void **v = a->args;\n"
  "  ((EmuFn12) a->fn) (v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10], v[11]);\n"
  "  if (emu_cp_n != 0) { fprintf (stderr, \"cp.async: %d copies pending at the thread's end\\n\", emu_cp_n); abort (); }\n"
  "  return NULL;\n"
  "}\n"
  "extern \"C\" int emu_launch (unsigned k, unsigned grid, unsigned block, void **args12)\n"
  "{\n"
  "  if (k >= sizeof (emu_kernels) / sizeof (emu_kernels[0])) return -1;\n"
  "  blockDim = { block, 1, 1 };\n"
  "  gridDim = { grid, 1, 1 };\n"
  "  for (unsigned b = 0; b < grid; b++)\n"
  "    {\n"
  "      pthread_t th[1024];\n"
  "      EmuArg as[1024];\n"
  "      pthread_barrier_init (&emu_block_bar, NULL, block);\n"
  "      for (unsigned w = 0; w < (block + 31) / 32; w++)\n"
  "        pthread_barrier_init (&emu_warp_bar[w], NULL, 32);\n"
  "      for (unsigned t = 0; t < block; t++)\n"
  "        {\n"
  "          as[t] = { emu_kernels[k], args12, t, b };\n"
  "          pthread_create (&th[t], NULL, emu_thread, &as[t]);\n"
  "        }\n"
  "      for (unsigned t = 0; t < block; t++)\n"
  "        pthread_join (th[t], NULL);\n"
  "      pthread_barrier_destroy (&emu_block_bar);\n"
  "      for (unsigned w = 0; w < (block + 31) / 32; w++)\n"
  "        pthread_barrier_destroy (&emu_warp_bar[w]);\n"
  "    }\n"
  "  return 0;\n"
  "}\n";

static char *emu_dir;

typedef int (*EmuLaunch) (unsigned, unsigned, unsigned, void **);

static double
emu_run (CsCudaProgram *p, CsTrace *fwd, CsTrace *bwd, GHashTable *env, const char *what, guint *n, const char *tag)
{
  g_autoptr(GString) src = g_string_new ("");
  g_autofree char *cpp = NULL, *so = NULL, *cmd = NULL;
  g_autoptr(GPtrArray) fo = NULL, fn = NULL, bo = NULL, bn = NULL;
  void *h;
  EmuLaunch launch;
  double worst = 0;
  char *arena;

  g_string_append (src, emu_header);
  g_string_append (src, p->source->str);
  g_string_append (src, "\nstatic void (*emu_kernels[]) () = {");
  for (guint k = 0; k < p->n_kernels; k++)
    g_string_append_printf (src, "%s(void (*) ()) k%u", k ? ", " : "", k);
  g_string_append (src, "};\n");
  g_string_append (src, emu_tail);
  cpp = g_strdup_printf ("%s/%s.cpp", emu_dir, tag);
  so = g_strdup_printf ("%s/%s.so", emu_dir, tag);
  g_assert_true (g_file_set_contents (cpp, src->str, -1, NULL));
  cmd = g_strdup_printf ("g++ -O1 -std=c++17 -shared -fPIC -pthread -w -o %s %s", so, cpp);
  g_assert_cmpint (system (cmd), ==, 0);
  h = dlopen (so, RTLD_NOW | RTLD_LOCAL);
  g_assert_nonnull (h);
  launch = (EmuLaunch) dlsym (h, "emu_launch");
  g_assert_nonnull (launch);

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
    {
      CsCudaStep *st = g_ptr_array_index (p->steps, s);
      void *args[12] = { 0 };

      g_assert_cmpint (st->kind, ==, CS_CUDA_STEP_KERNEL);
      g_assert_cmpuint (st->grid[1], ==, 1);
      g_assert_cmpuint (st->block[1], ==, 1);
      g_assert_cmpuint (st->args->len, <=, 12);
      for (guint a = 0; a < st->args->len; a++)
        args[a] = cs_cuda_program_slot_ptr (p, g_array_index (st->args, CsCudaKArg, a).slot);
      g_assert_cmpint (launch (st->kernel, st->grid[0], st->block[0], args), ==, 0);
    }
  cpu_step (fwd, bwd, env, CS_REF_F64, &fo, &fn, &bo, &bn);
  for (guint i = 0; i < p->outputs->len; i++)
    {
      CsCudaTensorInfo *o = &g_array_index (p->outputs, CsCudaTensorInfo, i);
      guint slot = g_array_index (p->output_slots, guint, i);
      g_autoptr(GError) error = NULL;
      g_autoptr(CsTensor) got = cs_tensor_new (o->dtype, o->shape, o->rank, &error);
      CsTensor *ref = o->backward ? named (bo, bn, o->name) : named (fo, fn, o->name);
      double rel;

      g_assert_no_error (error);
      {
        CsCudaSlot *ss = cs_cuda_program_slot (p, slot);
        gsize es = cs_dtype_size_bytes (ss->dtype);
        int64_t idx[CS_MAX_DIMS] = { 0 };
        char *base = cs_cuda_program_slot_ptr (p, slot);

        for (gsize e = 0; e < cs_cuda_slot_numel (ss); e++)
          {
            int64_t off = 0;

            for (guint j = 0; j < ss->rank; j++)
              off += idx[j] * ss->strides[j];
            memcpy ((char *) got->data + e * es, base + off * es, es);
            for (guint j = ss->rank; j-- > 0;)
              {
                if (++idx[j] < ss->shape[j])
                  break;
                idx[j] = 0;
              }
          }
      }
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
  g_unlink (so);
  g_unlink (cpp);
  return worst;
}

int
main (int argc, char **argv)
{
  int only = argc > 1 ? atoi (argv[1]) : -1;
  g_autofree char *gxx = g_find_program_in_path ("g++");
  g_autoptr(GError) derr = NULL;

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
        cs_cuda_program_free (p);
      }
  if (only == 200)
    {
      g_autoptr(CsPipeline) pl = aten_pipeline ();
      g_autoptr(GHashTable) env = cs_ref_env_new ();
      g_autoptr(GError) error = NULL;
      CsPolicy policy;
      CsCudaProgram *p;
      guint n = 0;
      double worst;

      sdpa_policy (&policy);
      p = cs_cuda_program_build_full (cs_pipeline_get_forward (pl), cs_pipeline_get_backward (pl), &policy,
                                      CS_CUDA_BUILD_DRY, &error);
      g_assert_no_error (error);
      for (guint s = 0; s < p->steps->len; s++)
        g_print ("step %s: %s\n", ((CsCudaStep *) p->steps->pdata[s])->kind_name, ((CsCudaStep *) p->steps->pdata[s])->label);
      worst = emu_run (p, cs_pipeline_get_forward (pl), cs_pipeline_get_backward (pl), env, "aten", &n, "aten");
      g_print ("  => worst ratio %.3g over %u outputs\n", worst, n);
      cs_cuda_program_free (p);
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
        cs_cuda_program_free (p);
      }
  g_rmdir (emu_dir);
  g_free (emu_dir);
  return 0;
}
