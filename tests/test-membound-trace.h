/* test-membound-trace.h: the trace of the memory-bound kernel forms' tests, shared by
 * test-kernels-codegen.c (forms taken, NVRTC compile), test-kernels-cuda.c (values against the
 * f64 reference on the GPU) and emu-colred.c (the CPU emulation). */
#pragma once

/* Sizes just past the thresholds of the forms (132 SMs):
 * - a LayerNorm forward with weight and bias, bf16 [4225, 256] (a warp a row, 8 elements a
 *   lane in one 16-byte group; 4225 rows: 265 blocks of 16 at 2 rows a warp, the last warp with
 *   one row), its mean and rstd kept;
 * - an f32 RMSNorm [4300, 256] (f32 rows: two 16-byte chunks a group; 4300 rows, not a multiple
 *   of 16);
 * - the exact (erf) GELU on bf16 [1001, 2161] (2,163,161 elements: 529 blocks of 2 tiles of
 *   2048, the last one partial) and, in another region, an f32 output of the same shape (the f32
 *   store's two groups of four 1024 apart), each taking the multi-tile pointwise form;
 * - a column sum of the f32 [4300, 256] (the 16-byte column form, split over blocks whose
 *   last adds the partials);
 * - two RMSNorms whose normalised rows are also summed over the rows (a row-fused kernel with
 *   column sums and their finalize kernel, a block a row): bf16 [600, 2048] (264 row blocks,
 *   the most at 132 SMs: 33 partials a finalize lane) and bf16 [37, 2048] (37 partials, 5 a
 *   lane, the last lanes with 4). */
static const char membound_trace[] =
  "def computation(x, w, b, g, zf, y, u):\n"
  "  # x: \"cuda:0 bf16[4225, 256]\"\n"
  "  # w: \"cuda:0 bf16[256]\"\n"
  "  # b: \"cuda:0 bf16[256]\"\n"
  "  # g: \"cuda:0 bf16[1001, 2161]\"\n"
  "  # zf: \"cuda:0 f32[4300, 256]\"\n"
  "  # y: \"cuda:0 bf16[37, 2048]\"\n"
  "  # u: \"cuda:0 bf16[600, 2048]\"\n"
  "  [t8, t1, t5] = nvFusion0(x, w, b)\n"
  "    # t2 = prims.convert_element_type(x, dtypes.float32)  # t2: \"cuda:0 f32[4225, 256]\"\n"
  "    # (t0, t1) = prims.var_mean(t2, (1,), correction=0)\n"
  "    # t3 = prims.broadcast_in_dim(t0, [4225, 1], [0])  # t3: \"cuda:0 f32[4225, 1]\"\n"
  "    # t4 = prims.add(t3, 1e-05)  # t4: \"cuda:0 f32[4225, 1]\"\n"
  "    # t5 = prims.rsqrt(t4)  # t5: \"cuda:0 f32[4225, 1]\"\n"
  "    # t6 = prims.broadcast_in_dim(t1, (4225, 256), (0,))  # t6: \"cuda:0 f32[4225, 256]\"\n"
  "    # t7 = prims.sub(t2, t6)  # t7: \"cuda:0 f32[4225, 256]\"\n"
  "    # t9 = prims.broadcast_in_dim(t5, (4225, 256), (0, 1))  # t9: \"cuda:0 f32[4225, 256]\"\n"
  "    # t10 = prims.mul(t7, t9)  # t10: \"cuda:0 f32[4225, 256]\"\n"
  "    # t11 = prims.broadcast_in_dim(w, (4225, 256), (1,))  # t11: \"cuda:0 bf16[4225, 256]\"\n"
  "    # t12 = prims.convert_element_type(t11, dtypes.float32)  # t12: \"cuda:0 f32[4225, 256]\"\n"
  "    # t13 = prims.mul(t10, t12)  # t13: \"cuda:0 f32[4225, 256]\"\n"
  "    # t14 = prims.broadcast_in_dim(b, (4225, 256), (1,))  # t14: \"cuda:0 bf16[4225, 256]\"\n"
  "    # t15 = prims.convert_element_type(t14, dtypes.float32)  # t15: \"cuda:0 f32[4225, 256]\"\n"
  "    # t16 = prims.add(t13, t15)  # t16: \"cuda:0 f32[4225, 256]\"\n"
  "    # t8 = prims.convert_element_type(t16, dtypes.bfloat16)  # t8: \"cuda:0 bf16[4225, 256]\"\n"
  "  [t26] = nvFusion1(g)\n"
  "    # t20 = prims.convert_element_type(g, dtypes.float32)  # t20: \"cuda:0 f32[1001, 2161]\"\n"
  "    # t21 = prims.mul(t20, 0.7071067811865476)  # t21: \"cuda:0 f32[1001, 2161]\"\n"
  "    # t22 = prims.erf(t21)  # t22: \"cuda:0 f32[1001, 2161]\"\n"
  "    # t23 = prims.mul(0.5, t22)  # t23: \"cuda:0 f32[1001, 2161]\"\n"
  "    # t24 = prims.add(0.5, t23)  # t24: \"cuda:0 f32[1001, 2161]\"\n"
  "    # t25 = prims.mul(t20, t24)  # t25: \"cuda:0 f32[1001, 2161]\"\n"
  "    # t26 = prims.convert_element_type(t25, dtypes.bfloat16)  # t26: \"cuda:0 bf16[1001, 2161]\"\n"
  "  [t47] = nvFusion2(zf)\n"
  "    # t40 = prims.mul(zf, zf)  # t40: \"cuda:0 f32[4300, 256]\"\n"
  "    # t41 = prims.sum(t40, (1,))  # t41: \"cuda:0 f32[4300]\"\n"
  "    # t42 = prims.broadcast_in_dim(t41, [4300, 1], [0])  # t42: \"cuda:0 f32[4300, 1]\"\n"
  "    # t43 = prims.div(t42, 256.0)  # t43: \"cuda:0 f32[4300, 1]\"\n"
  "    # t44 = prims.add(t43, 1e-06)  # t44: \"cuda:0 f32[4300, 1]\"\n"
  "    # t45 = prims.rsqrt(t44)  # t45: \"cuda:0 f32[4300, 1]\"\n"
  "    # t46 = prims.broadcast_in_dim(t45, (4300, 256), (0, 1))  # t46: \"cuda:0 f32[4300, 256]\"\n"
  "    # t47 = prims.mul(zf, t46)  # t47: \"cuda:0 f32[4300, 256]\"\n"
  "  [t31] = nvFusion3(g)\n"
  "    # t32 = prims.convert_element_type(g, dtypes.float32)  # t32: \"cuda:0 f32[1001, 2161]\"\n"
  "    # t30 = prims.mul(t32, 0.01)  # t30: \"cuda:0 f32[1001, 2161]\"\n"
  "    # t31 = prims.exp(t30)  # t31: \"cuda:0 f32[1001, 2161]\"\n"
  "  [t48] = nvFusion4(zf)\n"
  "    # t48 = prims.sum(zf, (0,))  # t48: \"cuda:0 f32[256]\"\n"
  "  [t70, t69] = nvFusion5(u)\n"
  "    # t60 = prims.convert_element_type(u, dtypes.float32)  # t60: \"cuda:0 f32[600, 2048]\"\n"
  "    # t61 = prims.mul(t60, t60)  # t61: \"cuda:0 f32[600, 2048]\"\n"
  "    # t62 = prims.sum(t61, (1,))  # t62: \"cuda:0 f32[600]\"\n"
  "    # t63 = prims.broadcast_in_dim(t62, [600, 1], [0])  # t63: \"cuda:0 f32[600, 1]\"\n"
  "    # t64 = prims.div(t63, 2048.0)  # t64: \"cuda:0 f32[600, 1]\"\n"
  "    # t65 = prims.add(t64, 1e-06)  # t65: \"cuda:0 f32[600, 1]\"\n"
  "    # t66 = prims.rsqrt(t65)  # t66: \"cuda:0 f32[600, 1]\"\n"
  "    # t67 = prims.broadcast_in_dim(t66, (600, 2048), (0, 1))  # t67: \"cuda:0 f32[600, 2048]\"\n"
  "    # t68 = prims.mul(t60, t67)  # t68: \"cuda:0 f32[600, 2048]\"\n"
  "    # t69 = prims.convert_element_type(t68, dtypes.bfloat16)  # t69: \"cuda:0 bf16[600, 2048]\"\n"
  "    # t70 = prims.sum(t68, (0,))  # t70: \"cuda:0 f32[2048]\"\n"
  "  [t90, t89] = nvFusion6(y)\n"
  "    # t80 = prims.convert_element_type(y, dtypes.float32)  # t80: \"cuda:0 f32[37, 2048]\"\n"
  "    # t81 = prims.mul(t80, t80)  # t81: \"cuda:0 f32[37, 2048]\"\n"
  "    # t82 = prims.sum(t81, (1,))  # t82: \"cuda:0 f32[37]\"\n"
  "    # t83 = prims.broadcast_in_dim(t82, [37, 1], [0])  # t83: \"cuda:0 f32[37, 1]\"\n"
  "    # t84 = prims.div(t83, 2048.0)  # t84: \"cuda:0 f32[37, 1]\"\n"
  "    # t85 = prims.add(t84, 1e-06)  # t85: \"cuda:0 f32[37, 1]\"\n"
  "    # t86 = prims.rsqrt(t85)  # t86: \"cuda:0 f32[37, 1]\"\n"
  "    # t87 = prims.broadcast_in_dim(t86, (37, 2048), (0, 1))  # t87: \"cuda:0 f32[37, 2048]\"\n"
  "    # t88 = prims.mul(t80, t87)  # t88: \"cuda:0 f32[37, 2048]\"\n"
  "    # t89 = prims.convert_element_type(t88, dtypes.bfloat16)  # t89: \"cuda:0 bf16[37, 2048]\"\n"
  "    # t90 = prims.sum(t88, (0,))  # t90: \"cuda:0 f32[2048]\"\n"
  "  return (t8, t1, t5, t26, t31, t47, t48, t70, t69, t90, t89)\n";
