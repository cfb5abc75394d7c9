/* test-duplicate-saved-trace.h: a final forward whose two fusion regions each make the f32 cast
 * of x, both saved for the backward (lightning-thunder#1501: nvFuser's CSE works per region),
 * shared by test-core-split.c (cs_split_duplicate_saved) and test-render-graph.c (the saved
 * nodes' flag).  t1 and t4 are other values (neg and exp of it); w is saved once. */
#pragma once

static const char duplicate_saved_trace[] =
  "@torch.no_grad()\n"
  "@no_autocast\n"
  "def computation(x, w):\n"
  "  # x: \"cuda:0 bf16[4, 8]\"\n"
  "  # w: \"cuda:0 bf16[8, 8]\"\n"
  "  [t0, t1] = nvFusion0(x)\n"
  "    # t0 = prims.convert_element_type(x, dtypes.float32)  # t0: \"cuda:0 f32[4, 8]\"\n"
  "    # t1 = prims.neg(t0)  # t1: \"cuda:0 f32[4, 8]\"\n"
  "  t2 = torch.matmul(x, w)  # t2: \"cuda:0 bf16[4, 8]\"\n"
  "  [t3, t4] = nvFusion1(x, t2)\n"
  "    # t3 = prims.convert_element_type(x, dtypes.float32)  # t3: \"cuda:0 f32[4, 8]\"\n"
  "    # t5 = prims.convert_element_type(t2, dtypes.float32)  # t5: \"cuda:0 f32[4, 8]\"\n"
  "    # t6 = prims.mul(t3, t5)  # t6: \"cuda:0 f32[4, 8]\"\n"
  "    # t4 = prims.exp(t6)  # t4: \"cuda:0 f32[4, 8]\"\n"
  "  return {'output': t4, 'flat_args': [x, w]}, ((t0, t1, t3, t4, w), ())\n";
