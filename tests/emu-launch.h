/* emu-launch.h: the CUDA emulation's launcher and output reader, shared by emu-xentropy.c and
 * emu-colred.c (tools, not tests: they run the generated CUDA of kernels/ on the CPU, each block
 * one at a time with a POSIX thread per CUDA thread, the C++ text compiled by the host compiler
 * and loaded with dlopen).  Included after CsCudaProgram's declarations. */
#ifndef CS_EMU_LAUNCH_H
#define CS_EMU_LAUNCH_H

/* The emulation's common front (it replaces the jit preamble): threads, barriers, warp
 * shuffles, the 16-bit float conversions; each tool's emu_header adds what its kernels use. */
#define EMU_HEADER_COMMON \
  "#include <pthread.h>\n" \
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
  "static inline float cs_rh (float f) { return cs_h2f (cs_f2h (f)); }\n"

/* emu_launch(): one block at a time, a thread per CUDA thread. */
static const char emu_tail[] =
  "struct EmuArg { void (*fn) (); void **args; unsigned tid, bid; };\n"
  "typedef void (*EmuFn12) (void *, void *, void *, void *, void *, void *, void *, void *, void *, void *, void *, void *);\n"
  "static void *emu_thread (void *d)\n"
  "{\n"
  "  EmuArg *a = (EmuArg *) d;\n"
  "  emu_lin = a->tid;\n"
  "  threadIdx = { a->tid % blockDim.x, a->tid / blockDim.x, 0 };\n"
  "  blockIdx = { a->bid % gridDim.x, a->bid / gridDim.x, 0 };\n"
  "  void **v = a->args;\n"
  "  ((EmuFn12) a->fn) (v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10], v[11]);\n"
  "  return NULL;\n"
  "}\n"
  "extern \"C\" int emu_launch (unsigned k, unsigned gx, unsigned gy, unsigned bx, unsigned by, void **args12)\n"
  "{\n"
  "  if (k >= sizeof (emu_kernels) / sizeof (emu_kernels[0]) || bx * by > 1024) return -1;\n"
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

typedef int (*EmuLaunch) (unsigned, unsigned, unsigned, unsigned, unsigned, void **);

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
