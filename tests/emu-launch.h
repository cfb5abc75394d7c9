/* emu-launch.h: the CUDA emulation's launcher and output reader, shared by emu-xentropy.c,
 * emu-colred.c and emu-attention.c (tools, not tests: they run the generated CUDA of kernels/ on
 * the CPU, each block one at a time with a POSIX thread per CUDA thread, the C++ text compiled
 * by the host compiler and loaded with dlopen).  Included after CsCudaProgram's declarations.
 *
 * Kernels are called through a trampoline per kernel (emu_call<kN>) that converts the step's
 * argument pointers to the kernel's own parameter types, so a kernel may take any number of
 * arguments; emu_launch() refuses a step whose argument count is not its kernel's. */
#ifndef CS_EMU_LAUNCH_H
#define CS_EMU_LAUNCH_H

#include <dlfcn.h>
#include <stdlib.h>
#include <glib/gstdio.h>

/* The emulation's common front (it replaces the jit preamble): threads, barriers, warp
 * shuffles, the 16-bit float conversions; each tool's emu_header adds what its kernels use. */
#define EMU_HEADER_COMMON \
  "#include <pthread.h>\n" \
  "#include <utility>\n" \
  "#include <math.h>\n" \
  "#include <string.h>\n" \
  "#include <stdint.h>\n" \
  "#include <stdio.h>\n" \
  "#include <stdlib.h>\n" \
  "struct emu_uint3 { unsigned x, y, z; };\n" \
  "struct uint2 { unsigned x, y; };\n" \
  "struct uint4 { unsigned x, y, z, w; };\n" \
  "struct float2 { float x, y; };\n" \
  "struct float4 { float x, y, z, w; };\n" \
  "struct double2 { double x, y; };\n" \
  "static inline float __uint_as_float (unsigned i) { float f; memcpy (&f, &i, 4); return f; }\n" \
  "static inline float cs_maxf (float a, float b) { return (a != a || a > b) ? a : b; }\n" \
  "static inline float cs_minf (float a, float b) { return (a != a || a < b) ? a : b; }\n" \
  "static inline double cs_maxd (double a, double b) { return (a != a || a > b) ? a : b; }\n" \
  "static inline double cs_mind (double a, double b) { return (a != a || a < b) ? a : b; }\n" \
  "static thread_local emu_uint3 threadIdx, blockIdx;\n" \
  "static thread_local unsigned emu_lin;   // the thread's linear index in its block\n" \
  "static emu_uint3 blockDim, gridDim;\n" \
  "static pthread_barrier_t emu_block_bar, emu_warp_bar[32];\n" \
  "static double emu_xch[32][32];\n" \
  "#define __global__\n" \
  "#define __launch_bounds__(...)\n" \
  "#define __restrict__ __restrict\n" \
  "#define __shared__ static\n" \
  "static inline void __syncthreads () { pthread_barrier_wait (&emu_block_bar); }\n" \
  "template <class T> static inline T emu_shfl (T v, int src)\n" \
  "{\n" \
  "  int w = emu_lin / 32, l = emu_lin % 32;\n" \
  "  emu_xch[w][l] = (double) v;\n" \
  "  pthread_barrier_wait (&emu_warp_bar[w]);\n" \
  "  T r = (T) emu_xch[w][src];\n" \
  "  pthread_barrier_wait (&emu_warp_bar[w]);\n" \
  "  return r;\n" \
  "}\n" \
  "template <class T> static inline T __shfl_sync (unsigned, T v, int src) { return emu_shfl (v, src); }\n" \
  "template <class T> static inline T __shfl_xor_sync (unsigned, T v, int m) { return emu_shfl (v, (int) (emu_lin % 32) ^ m); }\n" \
  "static inline float cs_shfl (float v, int m) { return emu_shfl (v, (int) (emu_lin % 32) ^ m); }\n" \
  "static inline double cs_shfl (double v, int m) { return emu_shfl (v, (int) (emu_lin % 32) ^ m); }\n" \
  "static inline float __int_as_float (int i) { float f; memcpy (&f, &i, 4); return f; }\n" \
  "static inline double __longlong_as_double (long long i) { double f; memcpy (&f, &i, 8); return f; }\n" \
  "typedef unsigned short cs_bf16_t;\n" \
  "typedef unsigned short cs_f16_t;\n" \
  "static inline float cs_bf2f (unsigned short h) { unsigned u = ((unsigned) h) << 16; float f; memcpy (&f, &u, 4); return f; }\n" \
  "static inline unsigned short cs_f2bf (float f) { unsigned u; memcpy (&u, &f, 4); if ((u & 0x7fffffff) > 0x7f800000) return 0x7fc0; u += 0x7fff + ((u >> 16) & 1); return (unsigned short) (u >> 16); }\n" \
  "static inline float cs_h2f (unsigned short h) { _Float16 x; memcpy (&x, &h, 2); return (float) x; }\n" \
  "static inline unsigned short cs_f2h (float f) { _Float16 x = (_Float16) f; unsigned short h; memcpy (&h, &x, 2); return h; }\n" \
  "static inline float cs_rbf (float f) { return cs_bf2f (cs_f2bf (f)); }\n" \
  "static inline unsigned short cs_bfbits (float f) { unsigned u; memcpy (&u, &f, 4); return (unsigned short) (u >> 16); }\n" \
  "static inline float cs_rh (float f) { return cs_h2f (cs_f2h (f)); }\n" \
  "// emu_call<F> (args): kernel F called with args[i] as its parameter i, whatever its arity.\n" \
  "template <class... A, std::size_t... I>\n" \
  "static inline void emu_call_i (void (*f) (A...), void **v, std::index_sequence<I...>) { f (static_cast<A> (v[I])...); }\n" \
  "template <class... A> static constexpr unsigned emu_arity (void (*) (A...)) { return sizeof... (A); }\n" \
  "template <auto F> static void emu_call (void **v) { emu_call_i (F, v, std::make_index_sequence<emu_arity (F)> ()); }\n" \
  "struct EmuKernel { void (*call) (void **); unsigned n_args; };\n" \
  "#define EMU_KERNEL(f) { emu_call<f>, emu_arity (f) }\n"

/* emu_launch(): one block at a time, a thread per CUDA thread; EMU_THREAD_END(), when the
 * tool's header defines it, runs in each thread after the kernel returns. */
static const char emu_tail[] =
  "#ifndef EMU_THREAD_END\n"
  "#define EMU_THREAD_END()\n"
  "#endif\n"
  "struct EmuArg { const EmuKernel *kern; void **args; unsigned tid, bid; };\n"
  "static void *emu_thread (void *d)\n"
  "{\n"
  "  EmuArg *a = (EmuArg *) d;\n"
  "  emu_lin = a->tid;\n"
  "  threadIdx = { a->tid % blockDim.x, a->tid / blockDim.x, 0 };\n"
  "  blockIdx = { a->bid % gridDim.x, a->bid / gridDim.x, 0 };\n"
  "  a->kern->call (a->args);\n"
  "  EMU_THREAD_END ();\n"
  "  return NULL;\n"
  "}\n"
  "extern \"C\" int emu_launch (unsigned k, unsigned gx, unsigned gy, unsigned bx, unsigned by, unsigned n_args, void **args)\n"
  "{\n"
  "  if (k >= sizeof (emu_kernels) / sizeof (emu_kernels[0]) || n_args != emu_kernels[k].n_args) return -1;\n"
  "  if (bx * by == 0 || bx * by > 1024) return -1;\n"
  "  unsigned grid = gx * gy, block = bx * by;\n"
  "  blockDim = { bx, by, 1 };\n"
  "  gridDim = { gx, gy, 1 };\n"
  "  for (unsigned b = 0; b < grid; b++)\n"
  "    {\n"
  "      static pthread_t th[1024];\n"
  "      static EmuArg as[1024];\n"
  "      pthread_barrier_init (&emu_block_bar, NULL, block);\n"
  "      for (unsigned w = 0; w < (block + 31) / 32; w++)\n"
  "        pthread_barrier_init (&emu_warp_bar[w], NULL, 32);\n"
  "      for (unsigned t = 0; t < block; t++)\n"
  "        {\n"
  "          as[t] = { &emu_kernels[k], args, t, b };\n"
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

/* emu_launch (kernel, grid x, grid y, block x, block y, number of arguments, arguments):
 * 0, or -1 for a kernel index out of range, an argument count not the kernel's or a block of
 * 0 or more than 1024 threads. */
typedef int (*EmuLaunch) (unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void **);

/* Compiles @header, @p's generated source, its kernel table and emu_tail as C++17 with g++
 * (emu_dir/@tag.cpp, kept when the compile fails) and loads the library; *@handle is for
 * dlclose().  Returns its emu_launch. */
static EmuLaunch
emu_load (const char *header, CsCudaProgram *p, const char *tag, void **handle)
{
  g_autoptr(GString) src = g_string_new (header);
  g_autofree char *cpp = g_strdup_printf ("%s/%s.cpp", emu_dir, tag);
  g_autofree char *so = g_strdup_printf ("%s/%s.so", emu_dir, tag);
  g_autofree char *cmd = g_strdup_printf ("g++ -O1 -std=c++17 -shared -fPIC -pthread -w -o %s %s", so, cpp);
  EmuLaunch launch;

  g_string_append (src, p->source->str);
  g_string_append (src, "\nstatic const EmuKernel emu_kernels[] = {");
  for (guint k = 0; k < p->n_kernels; k++)
    g_string_append_printf (src, "%sEMU_KERNEL (k%u)", k ? ", " : " ", k);
  g_string_append (src, " };\n");
  g_string_append (src, emu_tail);
  g_assert_true (g_file_set_contents (cpp, src->str, -1, NULL));
  g_assert_cmpint (system (cmd), ==, 0);
  *handle = dlopen (so, RTLD_NOW | RTLD_LOCAL);
  g_assert_nonnull (*handle);
  launch = (EmuLaunch) dlsym (*handle, "emu_launch");
  g_assert_nonnull (launch);
  g_unlink (so);
  g_unlink (cpp);
  return launch;
}

/* Launches @s (a kernel step of @p, its grid and block in two dims) on the emulation, its
 * arguments the slots' addresses in @p's host arena. */
static void
emu_step (CsCudaProgram *p, CsCudaStep *s, EmuLaunch launch)
{
  g_autofree void **args = g_new0 (void *, s->args->len + 1);

  g_assert_cmpint (s->kind, ==, CS_CUDA_STEP_KERNEL);
  g_assert_cmpuint (s->grid[2], ==, 1);
  g_assert_cmpuint (s->block[2], ==, 1);
  for (guint a = 0; a < s->args->len; a++)
    args[a] = cs_cuda_program_slot_ptr (p, g_array_index (s->args, CsCudaKArg, a).slot);
  g_assert_cmpint (launch (s->kernel, s->grid[0], s->grid[1], s->block[0], s->block[1], s->args->len, args), ==, 0);
}

/* The values of output @i of @p from the host arena, contiguous, in @got. */
static void
emu_output (CsCudaProgram *p, guint i, CsTensor *got)
{
  guint slot = g_array_index (p->output_slots, guint, i);
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

#endif
