/* test-transposed-output-trace.h: the trace of the transposed-output tests, shared by
 * test-kernels-codegen.c (no copy, the strided store, NVRTC compile) and test-kernels-cuda.c
 * (values against the f64 reference on the GPU). */
#pragma once

/* RoPE backward's dK as the LLaMA's backward holds it: a region's output t2 [B, H, T, D]
 * (bf16) that a top-level transpose to [B, T, H, D] and a reshape to [B, T, H*D] read.  The
 * executor lays t2 out as [B, T, H, D] (cs_cuda_program_new_output_slot), so the reshape is a
 * view and no copy runs; the region's other output t3 (f32, same shape, also returned) stays
 * contiguous and is stored by 8-element vector stores, t2 element by element at its strided
 * offset.  2 x 3 x 37 x 64 = 14208 elements: full 2048-element tiles and a partial one. */
static const char transposed_output_trace[] =
  "def computation(xq, cq):\n"
  "  # xq: \"cuda:0 bf16[2, 3, 37, 64]\"\n"
  "  # cq: \"cuda:0 bf16[37, 64]\"\n"
  "  [t2, t3] = nvFusion0(xq, cq)\n"
  "    # t0 = prims.convert_element_type(xq, dtypes.float32)  # t0: \"cuda:0 f32[2, 3, 37, 64]\"\n"
  "    # t1 = prims.broadcast_in_dim(cq, (2, 3, 37, 64), (2, 3))  # t1: \"cuda:0 bf16[2, 3, 37, 64]\"\n"
  "    # t4 = prims.convert_element_type(t1, dtypes.float32)  # t4: \"cuda:0 f32[2, 3, 37, 64]\"\n"
  "    # t5 = prims.mul(t0, t4)  # t5: \"cuda:0 f32[2, 3, 37, 64]\"\n"
  "    # t2 = prims.convert_element_type(t5, dtypes.bfloat16)  # t2: \"cuda:0 bf16[2, 3, 37, 64]\"\n"
  "    # t3 = prims.add(t0, t4)  # t3: \"cuda:0 f32[2, 3, 37, 64]\"\n"
  "  t7 = prims.transpose(t2, (0, 2, 1, 3))  # t7: \"cuda:0 bf16[2, 37, 3, 64]\"\n"
  "  t8 = prims.reshape(t7, (2, 37, 192))  # t8: \"cuda:0 bf16[2, 37, 192]\"\n"
  "  return (t8, t3)\n";
