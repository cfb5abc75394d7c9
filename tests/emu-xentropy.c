/* emu-xentropy.c: the fused cross-entropy kernels run on the CPU, on a machine without a GPU.
 *
 * A developer check, built with the CUDA executor and run by hand (seconds to minutes):
 *   build/tests/emu-xentropy [CASE]
 * CASE: an index into emu_cases (the default runs all of them), each as the exact and the f64
 * program, then the exact one in the other forms of the backward (emu_modes); 100 around_trace, 101 lsm_trace, 102 Thunder's LLaMA loss regions (with
 * CS_SHARED_TRACES), 110 + N log-softmax as an output.  Each program is built without a device (CS_CUDA_BUILD_DRY); its generated
 * CUDA source is compiled as C++17 by g++ with a small emulation of what the kernels use
 * (threadIdx/blockIdx in two dims, __shared__ as statics, __syncthreads() as a barrier of the block's
 * threads, warp shuffles through a per-warp exchange between two barriers of the warp's 32
 * threads, uint2/uint4 as plain structs, the bf16/f16 conversions round-to-nearest-even),
 * loaded with dlopen, and every step runs as a POSIX thread per CUDA thread, one block at a
 * time, on a host arena laid out as the device's (poisoned with 0xff bytes, NaN, first).
 * Inputs and the comparison are test-kernels-xentropy.c's: every output and gradient against
 * the CPU f64 reference (core/cs-ref.c), normwise relative error under the per-dtype bound,
 * the same NaNs and infinities for the non-finite rows.
 *
 * Limits: kernel steps only; every shuffle and barrier must be reached by all threads of its
 * warp or block (true of these kernels).  It checks the kernels' arithmetic and indexing, not
 * the device's memory model or speed.
 */
#define main xent_test_main
#include "test-kernels-xentropy.c"
#undef main
#include "emu-launch.h"

/* The emulation put in front of the generated kernels (it replaces the jit preamble). */
static const char emu_header[] =
  "// CPU emulation of the CUDA subset the generated cross-entropy kernels use (developer check only).\n"
  EMU_HEADER_COMMON
  "static inline void cs_cp_async16 (void *s, const void *g) { memcpy (s, g, 16); }\n"
  "static inline void cs_cp_async_commit (void) {}\n"
  "static inline void cs_cp_async_wait0 (void) {}\n";

/* check_step() of test-kernels-xentropy.c on the emulation: returns the number of outputs
 * compared; *@worst the largest error / bound. */
static guint
emu_check_step (CsTrace *fwd, CsTrace *bwd, int64_t V, gboolean f64, const char *what, const char *tag, double *worst)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GHashTable) env = cs_ref_env_new ();
  g_autoptr(GHashTable) returned = cs_ref_env_new ();
  g_autoptr(GPtrArray) fo = NULL, fn = NULL, bo = NULL, bn = NULL;
  g_autoptr(GPtrArray) fl = cs_ref_dup_leaf_inputs (fwd);
  g_autoptr(GPtrArray) bl = bwd ? cs_ref_dup_leaf_inputs (bwd) : g_ptr_array_new ();
  CsPolicy policy;
  CsCudaProgram *p;
  EmuLaunch launch;
  char *arena;
  void *h;
  guint n = 0;

  xent_policy (&policy);
  p = f64 ? cs_cuda_program_generate_f64 (fwd, bwd, &policy, &error) : cs_cuda_program_generate (fwd, bwd, &policy, &error);
  g_assert_no_error (error);
  g_assert_nonnull (p);
  g_print ("%s%s\n", what, f64 ? " [f64 program]" : "");
  for (guint s = 0; s < p->steps->len; s++)
    g_print ("   step %s: %s (%.3g MB)\n", ((CsCudaStep *) p->steps->pdata[s])->kind_name,
             ((CsCudaStep *) p->steps->pdata[s])->label, ((CsCudaStep *) p->steps->pdata[s])->bytes / 1e6);

  launch = emu_load (emu_header, p, tag, &h);

  arena = g_malloc (MAX (p->arena_bytes, 1));
  memset (arena, 0xff, p->arena_bytes);   /* NaN poison */
  p->arena = arena;
  for (guint i = 0; i < p->inputs->len; i++)
    {
      CsCudaTensorInfo *in = &g_array_index (p->inputs, CsCudaTensorInfo, i);
      GPtrArray *leaves = in->backward ? bl : fl;
      g_autoptr(CsTensor) x = make_input (in, V, 1000 + i);
      g_autoptr(CsTensor) xr = NULL;

      if (f64 && cs_dtype_is_float (in->dtype))
        {
          CsDtype tdt = CS_DTYPE_F32;

          for (guint j = 0; j < leaves->len; j++)
            if (g_strcmp0 (((CsProxy *) g_ptr_array_index (leaves, j))->name, in->name) == 0)
              tdt = ((CsProxy *) g_ptr_array_index (leaves, j))->dtype;
          xr = cs_tensor_new (tdt, in->shape, in->rank, &error);
          g_assert_no_error (error);
          for (int64_t e = 0; e < x->numel; e++)
            cs_tensor_set_f64 (xr, e, cs_tensor_get_f64 (x, e));
          for (int64_t e = 0; e < x->numel; e++)
            cs_tensor_set_f64 (x, e, cs_tensor_get_f64 (xr, e));
        }
      memcpy (cs_cuda_program_slot_ptr (p, g_array_index (p->input_slots, guint, i)), x->data, cs_tensor_nbytes (x));
      cs_ref_env_insert (env, in->name, xr ? xr : x);
    }
  for (guint s = 0; s < p->steps->len; s++)
    emu_step (p, g_ptr_array_index (p->steps, s), launch);
  cs_ref_run_env (fwd, env, CS_REF_F64, 0, &fo, &fn, returned, &error);
  g_assert_no_error (error);
  {
    GHashTableIter it;
    gpointer k, v;

    g_hash_table_iter_init (&it, env);
    while (g_hash_table_iter_next (&it, &k, &v))
      if (!g_hash_table_contains (returned, k))
        cs_ref_env_insert (returned, k, v);
  }
  if (bwd)
    cs_ref_run_env (bwd, returned, CS_REF_F64, 0, &bo, &bn, NULL, &error);
  g_assert_no_error (error);
  for (guint i = 0; i < p->outputs->len; i++)
    {
      CsCudaTensorInfo *o = &g_array_index (p->outputs, CsCudaTensorInfo, i);
      g_autoptr(CsTensor) got = cs_tensor_new (o->dtype, o->shape, o->rank, &error);
      CsTensor *ref = o->backward ? named (bo, bn, o->name) : named (fo, fn, o->name);
      double num = 0, den = 0, rel, b = rel_bound (o->dtype, f64);
      guint bad = 0;

      emu_output (p, i, got);
      g_assert_nonnull (ref);
      g_assert_cmpint (ref->numel, ==, got->numel);
      for (int64_t e = 0; e < got->numel; e++)
        {
          double a = cs_tensor_get_f64 (got, e), r = cs_tensor_get_f64 (ref, e);

          if (special_inputs && !isfinite (r))
            {
              if (isnan (r) ? !isnan (a) : a != r)
                bad++;
              continue;
            }
          if (isnan (a))
            bad++;
          num += (a - r) * (a - r);
          den += r * r;
        }
      if (special_inputs && !o->backward && o->rank == 1)
        bad += !(cs_tensor_get_f64 (got, 0) == INFINITY) + !(cs_tensor_get_f64 (got, 1) == 0.0)
               + !isnan (cs_tensor_get_f64 (got, 2)) + !isfinite (cs_tensor_get_f64 (got, 3))
               + !isnan (cs_tensor_get_f64 (got, 5)) + !(cs_tensor_get_f64 (got, 6) == INFINITY);
      rel = den > 0 ? sqrt (num / den) : sqrt (num);
      g_print ("  %s %s %s (%s): rel.L2 %.3e (bound %.0e)%s\n", what, o->backward ? "grad" : "out", o->name,
               cs_dtype_short_name (o->dtype), rel, b, bad ? " WRONG NaN/inf" : "");
      *worst = MAX (*worst, bad ? INFINITY : b > 0 ? rel / b : rel);
      n++;
    }
  p->arena = NULL;
  g_free (arena);
  dlclose (h);
  cs_cuda_program_free (p);
  return n;
}

typedef struct
{
  Case     c;
  gboolean special;   /* test_gpu_non_finite's inputs */
} EmuCase;

/* test_gpu_vs_cpu's shapes and dtypes, smaller where it does not change the kernel's path. */
static const EmuCase emu_cases[] = {
  { { 7, 37, CS_DTYPE_BF16, "mean" }, FALSE },      /* element by element */
  { { 7, 1000, CS_DTYPE_BF16, "sum" }, FALSE },     /* 8-element groups */
  { { 7, 1000, CS_DTYPE_F32, "mean" }, FALSE },     /* 4-element groups */
  { { 3, 50304, CS_DTYPE_BF16, "mean" }, FALSE },   /* the benchmark's rows */
  { { 2, 50304, CS_DTYPE_F32, "none" }, FALSE },
  { { 5, 1000, CS_DTYPE_F16, "mean" }, FALSE },
  { { 1, 1, CS_DTYPE_F32, "mean" }, FALSE },
  { { 4, 1002, CS_DTYPE_BF16, "sum" }, FALSE },     /* 2-element groups */
  { { 2, 2053, CS_DTYPE_F32, "sum" }, FALSE },      /* V odd, more than a block's loop */
  { { 8, 37, CS_DTYPE_F32, "none" }, TRUE },
  { { 8, 1000, CS_DTYPE_BF16, "none" }, TRUE },
  { { 8, 40, CS_DTYPE_F32, "sum" }, TRUE },
  { { 8, 1100, CS_DTYPE_F32, "none" }, TRUE },
};

/* The forms of the backward each case runs in (CASTSCOPE_XENT_FUSED, cs-cuda-xentropy.c): fused
 * into the rows kernel with the row in registers where it fits, fused with a second read of the
 * row at 512 threads, the three passes, fused with the row in shared memory and registers. */
static const char *emu_modes[] = { "1", "reread512", "0", "split" };

int
main (int argc, char **argv)
{
  int only = argc > 1 ? atoi (argv[1]) : -1;
  g_autofree char *gxx = g_find_program_in_path ("g++");
  g_autoptr(GError) derr = NULL;
  guint n_fail = 0;

  if (gxx == NULL)
    {
      g_printerr ("emu-xentropy: needs g++\n");
      return 77;
    }
  emu_dir = g_dir_make_tmp ("castscope-emu-XXXXXX", &derr);
  g_assert_no_error (derr);
  for (guint md = 0; md < G_N_ELEMENTS (emu_modes); md++)
  for (guint k = 0; k < G_N_ELEMENTS (emu_cases); k++)
    for (int f64 = 0; f64 < 2; f64++)
      {
        const Case *c = &emu_cases[k].c;
        g_autoptr(CsPipeline) pl = NULL;
        g_autofree char *what = NULL, *tag = g_strdup_printf ("x%u_%u_%d", md, k, f64);
        double worst = 0;
        guint n;

        if (only >= 0 && (int) k != only)
          continue;
        special_inputs = emu_cases[k].special;
        if (special_inputs && f64)
          continue;   /* the GPU test checks these on the exact program only */
        if (md > 0 && f64)
          continue;   /* the other forms: the exact program */
        g_setenv ("CASTSCOPE_XENT_FUSED", emu_modes[md], TRUE);
        pl = case_pipeline (c);
        what = g_strdup_printf ("R %" G_GINT64_FORMAT " V %" G_GINT64_FORMAT " %s %s%s (CASTSCOPE_XENT_FUSED=%s)",
                                c->R, c->V, cs_dtype_short_name (c->dt), c->reduction,
                                special_inputs ? " non-finite" : "", emu_modes[md]);
        n = emu_check_step (cs_pipeline_get_forward (pl), cs_pipeline_get_backward (pl), c->V, f64, what, tag, &worst);
        g_print ("  => worst ratio %.3g over %u outputs %s\n", worst, n, worst <= 1.0 && n >= 2 ? "OK" : "FAIL");
        n_fail += !(worst <= 1.0 && n >= 2);
      }
  g_setenv ("CASTSCOPE_XENT_FUSED", "1", TRUE);
  special_inputs = FALSE;
  if (only < 0 || only == 100)
    {
      g_autoptr(CsPipeline) pl = around_pipeline ();
      double worst = 0;
      guint n;

      rounds_inside = TRUE;
      for (int f64 = 0; f64 < 2; f64++)
        {
          g_autofree char *tag = g_strdup_printf ("around_%d", f64);

          worst = 0;
          n = emu_check_step (cs_pipeline_get_forward (pl), cs_pipeline_get_backward (pl), 40, f64, "around", tag, &worst);
          g_print ("  => worst ratio %.3g over %u outputs %s\n", worst, n, worst <= 1.0 && n == 2 ? "OK" : "FAIL");
          n_fail += !(worst <= 1.0 && n == 2);
        }
      rounds_inside = FALSE;
    }
  if (only < 0 || only == 101)
    {
      g_autoptr(CsPipeline) pl = lsm_pipeline ();
      double worst = 0;
      guint n = emu_check_step (cs_pipeline_get_forward (pl), cs_pipeline_get_backward (pl), 33, FALSE, "lsm", "lsm", &worst);

      g_print ("  => worst ratio %.3g over %u outputs %s\n", worst, n, worst <= 1.0 && n == 3 ? "OK" : "FAIL");
      n_fail += !(worst <= 1.0 && n == 3);
    }
  for (guint k = 0; k < G_N_ELEMENTS (logp_cases); k++)
    {
      /* cached in registers at 256 and 1024 threads; 2-element groups; element by element */
      const Case *lc = logp_cases;
      g_autofree char *what = NULL, *tag = g_strdup_printf ("logp%u", k);
      g_autoptr(CsPipeline) pl = NULL;
      double worst = 0;
      guint n;

      if (only >= 0 && only != 110 + (int) k)
        continue;
      pl = logp_pipeline (lc[k].R, lc[k].V, lc[k].dt);
      what = g_strdup_printf ("log-softmax out R %" G_GINT64_FORMAT " V %" G_GINT64_FORMAT " %s", lc[k].R, lc[k].V,
                              cs_dtype_short_name (lc[k].dt));
      n = emu_check_step (cs_pipeline_get_forward (pl), cs_pipeline_get_backward (pl), lc[k].V, FALSE, what, tag, &worst);
      g_print ("  => worst ratio %.3g over %u outputs %s\n", worst, n, worst <= 1.0 && n == 2 ? "OK" : "FAIL");
      n_fail += !(worst <= 1.0 && n == 2);
    }
  if (only < 0 || only == 102)
    {
      g_autoptr(CsTrace) fwd = NULL;
      g_autoptr(CsTrace) bwd = NULL;

      if (thunder_llama_step (&fwd, &bwd))
        for (int f64 = 0; f64 < 2; f64++)
          {
            g_autofree char *tag = g_strdup_printf ("llama_%d", f64);
            double worst = 0;
            guint n = emu_check_step (fwd, bwd, 512, f64, "llama TorchCompile0/1", tag, &worst);

            g_print ("  => worst ratio %.3g over %u outputs %s\n", worst, n, worst <= 1.0 && n == 2 ? "OK" : "FAIL");
            n_fail += !(worst <= 1.0 && n == 2);
          }
      else
        g_print ("llama TorchCompile0/1: skipped (CS_SHARED_TRACES not set)\n");
    }
  g_rmdir (emu_dir);
  g_free (emu_dir);
  g_print ("%s\n", n_fail ? "FAILED" : "all OK");
  return n_fail ? 1 : 0;
}
