/* test-strided-view-trace.h: views the CUDA executor makes without a copy, shared by
 * test-kernels-codegen.c (the plan) and test-kernels-cuda.c (values on the GPU against the f64
 * reference). */
#pragma once

/* A reshape of a transposed tensor whose split dims keep their strides (t3: [6, 4, 8] with
 * strides (8, 48, 1) as [6, 4, 2, 4], strides (8, 48, 4, 1): a view), one that must copy (t1:
 * [8, 6] transposed, flattened), and a split of a region input into strided slices that stay
 * views (t5, t6, t7), one of them reshaped as a view again (t8), and a region whose output is a
 * step-2 slice of its input (t9: a view too). */
static const char strided_view_trace[] =
  "def computation(xa, xb, xc):\n"
  "  # xa: \"cuda:0 f32[6, 8]\"\n"
  "  # xb: \"cuda:0 f32[4, 6, 8]\"\n"
  "  # xc: \"cuda:0 bf16[3, 5, 24]\"\n"
  "  t0 = prims.transpose(xa, (1, 0))  # t0: \"cuda:0 f32[8, 6]\"\n"
  "  t1 = prims.reshape(t0, (48,))  # t1: \"cuda:0 f32[48]\"\n"
  "  t2 = prims.transpose(xb, (1, 0, 2))  # t2: \"cuda:0 f32[6, 4, 8]\"\n"
  "  t3 = prims.reshape(t2, (6, 4, 2, 4))  # t3: \"cuda:0 f32[6, 4, 2, 4]\"\n"
  "  [t5, t6, t7] = ltorch.split(xc, 8, 2)\n"
  "    # t5 = prims.slice_prim(xc, [0, 0, 0], [3, 5, 8], [1, 1, 1])  # t5: \"cuda:0 bf16[3, 5, 8]\"\n"
  "    # t6 = prims.slice_prim(xc, [0, 0, 8], [3, 5, 16], [1, 1, 1])  # t6: \"cuda:0 bf16[3, 5, 8]\"\n"
  "    # t7 = prims.slice_prim(xc, [0, 0, 16], [3, 5, 24], [1, 1, 1])  # t7: \"cuda:0 bf16[3, 5, 8]\"\n"
  "  t8 = prims.reshape(t6, (3, 5, 2, 4))  # t8: \"cuda:0 bf16[3, 5, 2, 4]\"\n"
  "  [t9] = nvFusion0(xc)\n"
  "    # t9 = prims.slice_prim(xc, [0, 1, 16], [3, 5, 24], [1, 2, 1])  # t9: \"cuda:0 bf16[3, 2, 8]\"\n"
  "  return (t1, t3, t5, t9, t8, t7)\n";
