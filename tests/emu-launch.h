/* emu-launch.h: the CUDA emulation's launcher and output reader, shared by emu-xentropy.c and
 * emu-colred.c (tools, not tests: they run the generated CUDA of kernels/ on the CPU, each block
 * one at a time with a POSIX thread per CUDA thread, the C++ text compiled by the host compiler
 * and loaded with dlopen).  Included after the file's own emu_header and CsCudaProgram. */
#ifndef CS_EMU_LAUNCH_H
#define CS_EMU_LAUNCH_H

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
