/* test-row-fused-trace.h: the trace of the row-fused kernel tests, shared by
 * test-kernels-codegen.c (kernel counts, NVRTC compile) and test-kernels-cuda.c (values against
 * the f64 reference on the GPU). */
#pragma once

/* Normalisations as row-fused kernels: LayerNorm with var_mean and a column sum over its rows
 * (block per row, R = 2048 > 1024, each block looping over rows),
 * a two-pass softmax (amax, then a sum of exp reading it; R = 1500, not a multiple of 256) with
 * a bf16 per-row output, an RMSNorm over [1, T, C] summed over (0, 2) (warp per row, 24
 * elements per lane: fully unrolled) with a trivial sum over size-1 dims and a bf16 column sum
 * of the squares (its own kernel), and a region whose
 * output reads a row statistic across rows (falls back to a row reduction + a pointwise kernel,
 * whose f32 input and output take 8-element vector accesses). */
static const char row_fused_trace[] =
  "def computation(x, w, sc, zz, qq):\n"
  "  # x: \"cuda:0 bf16[40, 2048]\"\n"
  "  # w: \"cuda:0 bf16[2048]\"\n"
  "  # sc: \"cuda:0 bf16[70, 1500]\"\n"
  "  # zz: \"cuda:0 bf16[1, 50, 768]\"\n"
  "  # qq: \"cuda:0 f32[24, 24]\"\n"
  "  [t0, t1, t8, t43] = nvFusion0(x, w)\n"
  "    # t2 = prims.convert_element_type(x, dtypes.float32)  # t2: \"cuda:0 f32[40, 2048]\"\n"
  "    # (t0, t1) = prims.var_mean(t2, (1,), correction=0)\n"
  "    # t3 = prims.broadcast_in_dim(t0, [40, 1], [0])  # t3: \"cuda:0 f32[40, 1]\"\n"
  "    # t4 = prims.add(t3, 1e-05)  # t4: \"cuda:0 f32[40, 1]\"\n"
  "    # t5 = prims.rsqrt(t4)  # t5: \"cuda:0 f32[40, 1]\"\n"
  "    # t6 = prims.broadcast_in_dim(t1, (40, 2048), (0,))  # t6: \"cuda:0 f32[40, 2048]\"\n"
  "    # t7 = prims.sub(t2, t6)  # t7: \"cuda:0 f32[40, 2048]\"\n"
  "    # t9 = prims.broadcast_in_dim(t5, (40, 2048), (0, 1))  # t9: \"cuda:0 f32[40, 2048]\"\n"
  "    # t10 = prims.mul(t7, t9)  # t10: \"cuda:0 f32[40, 2048]\"\n"
  "    # t11 = prims.broadcast_in_dim(w, (40, 2048), (1,))  # t11: \"cuda:0 bf16[40, 2048]\"\n"
  "    # t12 = prims.convert_element_type(t11, dtypes.float32)  # t12: \"cuda:0 f32[40, 2048]\"\n"
  "    # t13 = prims.mul(t10, t12)  # t13: \"cuda:0 f32[40, 2048]\"\n"
  "    # t8 = prims.convert_element_type(t13, dtypes.bfloat16)  # t8: \"cuda:0 bf16[40, 2048]\"\n"
  "    # t43 = prims.sum(t10, (0,))  # t43: \"cuda:0 f32[2048]\"\n"
  "  [t20, t21] = nvFusion1(sc)\n"
  "    # t14 = prims.convert_element_type(sc, dtypes.float32)  # t14: \"cuda:0 f32[70, 1500]\"\n"
  "    # t15 = prims.amax(t14, (1,))  # t15: \"cuda:0 f32[70]\"\n"
  "    # t16 = prims.broadcast_in_dim(t15, (70, 1500), (0,))  # t16: \"cuda:0 f32[70, 1500]\"\n"
  "    # t17 = prims.sub(t14, t16)  # t17: \"cuda:0 f32[70, 1500]\"\n"
  "    # t18 = prims.exp(t17)  # t18: \"cuda:0 f32[70, 1500]\"\n"
  "    # t19 = prims.sum(t18, (1,))  # t19: \"cuda:0 f32[70]\"\n"
  "    # t22 = prims.broadcast_in_dim(t19, (70, 1500), (0,))  # t22: \"cuda:0 f32[70, 1500]\"\n"
  "    # t23 = prims.div(t18, t22)  # t23: \"cuda:0 f32[70, 1500]\"\n"
  "    # t20 = prims.convert_element_type(t23, dtypes.bfloat16)  # t20: \"cuda:0 bf16[70, 1500]\"\n"
  "    # t21 = prims.convert_element_type(t19, dtypes.bfloat16)  # t21: \"cuda:0 bf16[70]\"\n"
  "  [t30, t31, t35] = nvFusion2(zz)\n"
  "    # t24 = prims.convert_element_type(zz, dtypes.float32)  # t24: \"cuda:0 f32[1, 50, 768]\"\n"
  "    # t25 = prims.mul(t24, t24)  # t25: \"cuda:0 f32[1, 50, 768]\"\n"
  "    # t26 = prims.sum(t25, (0, 2))  # t26: \"cuda:0 f32[50]\"\n"
  "    # t27 = prims.broadcast_in_dim(t26, [1, 50, 1], [1])  # t27: \"cuda:0 f32[1, 50, 1]\"\n"
  "    # t28 = prims.div(t27, 768.0)  # t28: \"cuda:0 f32[1, 50, 1]\"\n"
  "    # t29 = prims.add(t28, 1e-06)  # t29: \"cuda:0 f32[1, 50, 1]\"\n"
  "    # t32 = prims.rsqrt(t29)  # t32: \"cuda:0 f32[1, 50, 1]\"\n"
  "    # t33 = prims.broadcast_in_dim(t32, (1, 50, 768), (0, 1, 2))  # t33: \"cuda:0 f32[1, 50, 768]\"\n"
  "    # t34 = prims.mul(t24, t33)  # t34: \"cuda:0 f32[1, 50, 768]\"\n"
  "    # t30 = prims.convert_element_type(t34, dtypes.bfloat16)  # t30: \"cuda:0 bf16[1, 50, 768]\"\n"
  "    # t31 = prims.sum(t29, (0, 2))  # t31: \"cuda:0 f32[50]\"\n"
  "    # t36 = prims.sum(t25, (0, 1))  # t36: \"cuda:0 f32[768]\"\n"
  "    # t35 = prims.convert_element_type(t36, dtypes.bfloat16)  # t35: \"cuda:0 bf16[768]\"\n"
  "  [t40] = nvFusion3(qq)\n"
  "    # t41 = prims.sum(qq, (1,))  # t41: \"cuda:0 f32[24]\"\n"
  "    # t42 = prims.broadcast_in_dim(t41, (24, 24), (1,))  # t42: \"cuda:0 f32[24, 24]\"\n"
  "    # t40 = prims.sub(qq, t42)  # t40: \"cuda:0 f32[24, 24]\"\n"
  "  return (t0, t1, t8, t43, t20, t21, t30, t31, t35, t40)\n";
