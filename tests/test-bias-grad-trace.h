/* test-bias-grad-trace.h: the trace of the bias-gradient epilogue tests, shared by
 * test-kernels-codegen.c (the plan, NVRTC compile) and test-kernels-cuda.c (values against the
 * f64 reference on the GPU). */
#pragma once

/* A linear's backward as Thunder's GPT backward holds it: the weight gradient t2 = gy^T @ xx
 * (gy [4, 64, 96] reshaped to [256, 96] and transposed: cuBLAS B transposed, A not), then a
 * region computing the bias gradient t5 = bf16(sum over rows of f32(gy)) beside a pointwise
 * output t6.  The matmul computes t5 in its epilogue (cs_cuda_gemm_set_bias_grad); the region
 * keeps only t6. */
static const char bias_grad_trace[] =
  "def computation(gy, xx):\n"
  "  # gy: \"cuda:0 bf16[4, 64, 96]\"\n"
  "  # xx: \"cuda:0 bf16[256, 80]\"\n"
  "  t0 = ltorch.reshape(gy, (256, 96))  # t0: \"cuda:0 bf16[256, 96]\"\n"
  "    # t0 = prims.reshape(gy, (256, 96))  # t0: \"cuda:0 bf16[256, 96]\"\n"
  "  t1 = prims.transpose(t0, (1, 0))  # t1: \"cuda:0 bf16[96, 256]\"\n"
  "  t2 = ltorch.matmul(t1, xx)  # t2: \"cuda:0 bf16[96, 80]\"\n"
  "    # t2 = prims.matmul(t1, xx)  # t2: \"cuda:0 bf16[96, 80]\"\n"
  "  [t5, t6] = nvFusion0(gy)\n"
  "    # t3 = prims.convert_element_type(gy, dtypes.float32)  # t3: \"cuda:0 f32[4, 64, 96]\"\n"
  "    # t4 = prims.sum(t3, (0, 1))  # t4: \"cuda:0 f32[96]\"\n"
  "    # t5 = prims.convert_element_type(t4, dtypes.bfloat16)  # t5: \"cuda:0 bf16[96]\"\n"
  "    # t7 = prims.mul(t3, 2.0)  # t7: \"cuda:0 f32[4, 64, 96]\"\n"
  "    # t6 = prims.convert_element_type(t7, dtypes.bfloat16)  # t6: \"cuda:0 bf16[4, 64, 96]\"\n"
  "  return (t2, t5, t6)\n";
