/* test-kernels-attention.c: the CUDA executor's fused attention (kernels/cs-cuda-attention.c).
 *
 * Without a device: every case's program (the sdpa executor's statements from
 * `ltorch.scaled_dot_product_attention` through the pipeline with executors=sdpa,nvfuser,torch,
 * in bf16, f16, f32 and the f64 reference program) is generated and compiled by NVRTC to a
 * CUBIN for sm_90; the source holds no proxy name; dropout_p != 0 is refused.
 * With a device: each case runs forward and backward on the GPU and every output and gradient
 * (out, logsumexp with its padding, dq, dk, dv, the mask's gradient) is compared with the CPU
 * reference in f64 (core/cs-ref.c) by relative L2 error with a per-dtype bound; the GPU's f64
 * program agrees with the CPU's f64 run to 1e-12; the LLaMA stack and the torch.compile
 * sample pass PyTorch's accuracy verdict; where cuDNN loads, its fused attention (labels
 * "(cuDNN)") against the same reference, and CASTSCOPE_CUDNN=0 back on the kernels.  Without a
 * device those cases skip.
 */
#include "cs-config.h"

#include <math.h>
#include <string.h>

#include "cs-aten.h"
#include "cs-compare.h"
#include "cs-cuda-private.h"
#include "cs-parse.h"
#include "cs-pipeline.h"
#include "cs-ref.h"
#include "cs-tensor.h"

static gboolean have_device;

#define IMPORTS "import thunder\nimport thunder.core.dtypes as dtypes\n" \
  "import thunder.core.prims as prims\nimport thunder.torch as ltorch\nimport torch\n\n"

/* One attention problem: q [B, H, L, E], k [B, H, S, E], v [B, H, S, Ev]. */
typedef struct
{
  const char *dtype;     /* bf16, f16, f32 */
  int         B, H, L, S, E, Ev;
  gboolean    causal;
  const char *mask;      /* NULL, or the mask's type: "f32[2, 2, 37, 37]", "b8[1, 1, 37, 50]" */
  CsOpId      expect;    /* the forward statement the sdpa executor makes */
  gboolean    bshd;      /* inputs [B, L, H, E] transposed to [B, H, L, E] (strided views) */
  gboolean    merged;    /* as the LLaMA's and GPT's attention: inputs [B, L, H*E] reshaped to
                            [B, L, H, E] and transposed; the output transposed back and reshaped
                            to [B, L, H*Ev], so the kernels write out, dq, dk and dv laid out as
                            [B, L, H, E] (cs_cuda_program_new_output_slot) and no copy runs */
  gboolean    packed;    /* merged, and q, k, v split from one [B, L, 3*H*E] input (L = S, E = Ev:
                            the GPT's c_attn): the pieces are views, the backward's cat of dq, dk,
                            dv is written in place by the attention kernels; no split, copy or
                            cat kernel runs */
} AttCase;

#define FLASH CS_OP_EX_SDPAFX_GRAD_FORWARD_SCALED_DOT_PRODUCT_EFFICIENT_ATTENTION
#define MEMEF CS_OP_EX_SDPAEX_GRAD_FORWARD_SCALED_DOT_PRODUCT_EFFICIENT_ATTENTION

static const AttCase cases[] = {
  /* flash attention: bf16/f16, no mask, head dims equal */
  { "bf16", 2, 2, 37, 37, 64, 64, TRUE, NULL, FLASH },
  { "bf16", 1, 3, 1, 1, 64, 64, TRUE, NULL, FLASH },
  { "bf16", 1, 2, 130, 130, 128, 128, TRUE, NULL, FLASH },
  { "bf16", 2, 1, 37, 130, 80, 80, FALSE, NULL, FLASH },
  { "bf16", 1, 2, 130, 37, 64, 64, FALSE, NULL, FLASH },
  { "bf16", 1, 1, 70, 70, 256, 256, TRUE, NULL, FLASH },
  { "f16", 2, 2, 37, 37, 80, 80, FALSE, NULL, FLASH },
  /* memory-efficient: f32, or a mask */
  { "f32", 2, 2, 37, 130, 64, 64, FALSE, NULL, MEMEF },
  { "f32", 1, 2, 130, 130, 128, 128, TRUE, NULL, MEMEF },
  { "f32", 1, 1, 1, 1, 80, 80, FALSE, NULL, MEMEF },
  { "f32", 2, 1, 37, 37, 64, 40, FALSE, NULL, MEMEF },
  { "f32", 2, 2, 37, 37, 80, 80, FALSE, "f32[2, 2, 37, 37]", MEMEF },
  { "f32", 1, 2, 37, 50, 64, 64, FALSE, "b8[1, 1, 37, 50]", MEMEF },
  { "bf16", 2, 2, 37, 37, 64, 64, FALSE, "bf16[2, 2, 37, 37]", MEMEF },
  { "f32", 1, 2, 37, 37, 64, 64, TRUE, "f32[1, 1, 37, 37]", MEMEF },
  /* q, k, v as transposes of [B, L, H, E] tensors, as the LLaMA's attention makes them */
  { "bf16", 2, 3, 37, 37, 64, 64, TRUE, NULL, FLASH, TRUE },
  { "f32", 2, 3, 37, 45, 64, 64, FALSE, NULL, MEMEF, TRUE },
  /* the tensor-core forward (bf16/f16, head dims multiples of 16 up to 128) at odd sizes: f16,
     causal top-left with L < S and L > S, Ev != E, bool and float masks */
  { "f16", 1, 2, 70, 70, 64, 64, TRUE, NULL, FLASH },
  { "bf16", 1, 2, 37, 130, 64, 64, TRUE, NULL, MEMEF },
  { "bf16", 1, 1, 130, 37, 128, 128, TRUE, NULL, MEMEF },
  { "bf16", 2, 1, 37, 70, 64, 32, FALSE, NULL, MEMEF },
  { "bf16", 1, 2, 70, 45, 128, 128, FALSE, "b8[1, 1, 70, 45]", MEMEF },
  { "f16", 2, 1, 37, 70, 64, 64, TRUE, "f16[2, 1, 37, 70]", MEMEF },
  /* the tensor-core backward's two-stage tiles: several key and query tiles (64 rows at E = 64,
     32 at E = 128) with odd tails, causal and not, bf16 and f16 */
  { "f16", 1, 2, 150, 201, 128, 128, FALSE, NULL, FLASH },
  { "bf16", 1, 1, 201, 201, 64, 64, TRUE, NULL, FLASH },
  { "f16", 1, 1, 161, 97, 128, 128, TRUE, NULL, MEMEF },
  { "bf16", 1, 2, 97, 161, 64, 64, FALSE, "b8[1, 1, 97, 161]", MEMEF },
  /* head dims up to 32 without a mask: the backward's dQ and dK/dV kernels fit one launch
     (merge_adjacent_kernels), causal and not, L != S, several tiles */
  { "bf16", 2, 2, 37, 70, 32, 32, TRUE, NULL, MEMEF },
  { "f16", 1, 3, 97, 150, 16, 16, FALSE, NULL, FLASH },
  /* heads merged in the inputs and the output: the outputs written as [B, L, H, E], on tensor
     cores (bf16, causal; f16, L != S) and CUDA cores (f32, Ev != E) */
  { "bf16", 2, 3, 37, 37, 64, 64, TRUE, NULL, FLASH, FALSE, TRUE },
  { "f16", 1, 2, 70, 45, 64, 64, FALSE, NULL, FLASH, FALSE, TRUE },
  { "f32", 2, 3, 37, 45, 64, 40, FALSE, NULL, MEMEF, FALSE, TRUE },
  { "bf16", 2, 3, 37, 37, 64, 64, TRUE, NULL, FLASH, FALSE, TRUE, TRUE },
  { "f32", 1, 2, 45, 45, 40, 40, FALSE, NULL, MEMEF, FALSE, TRUE, TRUE },
};

/* Whether the forward of @c runs on the tensor-core kernel (kernels/cs-cuda-attention.c). */
static gboolean
case_tensor_cores (const AttCase *c)
{
  return (g_str_equal (c->dtype, "bf16") || g_str_equal (c->dtype, "f16")) && c->E % 16 == 0 && c->Ev % 16 == 0
         && c->E <= 128 && c->Ev <= 128;
}

/* Forward statements returning out and logsumexp as the user's outputs: the padded layouts
 * of sdpaex.py's metas (flash: L rounded up to 16, memory-efficient: to 32; the padding must
 * be 0) and an untyped logsumexp ([..., L]). */
static const char * const lse_traces[] = {
  IMPORTS
  "def computation(query_in, key_in, value_in):\n"
  "  # query_in: \"cuda:0 bf16[2, 2, 37, 64]\"\n"
  "  # key_in: \"cuda:0 bf16[2, 2, 37, 64]\"\n"
  "  # value_in: \"cuda:0 bf16[2, 2, 37, 64]\"\n"
  "  (attn_out, attn_lse, c0, c1, _, _, s0, s1, d0) = sdpafx_grad_forward_scaled_dot_product_efficient_attention("
  "query_in, key_in, value_in, 0.0, True, scale=None)\n"
  "  # attn_out: \"cuda:0 bf16[2, 2, 37, 64]\"\n"
  "  # attn_lse: \"cuda:0 f32[2, 2, 48]\"\n"
  "  return (attn_out, attn_lse)\n",
  IMPORTS
  "def computation(query_in, key_in, value_in, mask_in):\n"
  "  # query_in: \"cuda:0 f32[1, 2, 37, 40]\"\n"
  "  # key_in: \"cuda:0 f32[1, 2, 45, 40]\"\n"
  "  # value_in: \"cuda:0 f32[1, 2, 45, 24]\"\n"
  "  # mask_in: \"cuda:0 f32[1, 2, 37, 45]\"\n"
  "  (attn_out, attn_lse, s0, s1) = sdpaex_grad_forward_scaled_dot_product_efficient_attention("
  "query_in, key_in, value_in, mask_in, 0.0, False, scale=0.3)\n"
  "  # attn_out: \"cuda:0 f32[1, 2, 37, 24]\"\n"
  "  # attn_lse: \"cuda:0 f32[1, 2, 64]\"\n"
  "  return (attn_out, attn_lse)\n",
  IMPORTS
  "def computation(query_in, key_in, value_in):\n"
  "  # query_in: \"cuda:0 bf16[1, 3, 130, 128]\"\n"
  "  # key_in: \"cuda:0 bf16[1, 3, 37, 128]\"\n"
  "  # value_in: \"cuda:0 bf16[1, 3, 37, 128]\"\n"
  "  (attn_out, attn_lse, c0, c1, _, _, s0, s1, d0) = sdpafx_grad_forward_scaled_dot_product_efficient_attention("
  "query_in, key_in, value_in, 0.0, False, scale=0.125)\n"
  "  return (attn_out, attn_lse)\n",
};

static void
sdpa_policy (CsPolicy *policy)
{
  cs_policy_init_default (policy);
  cs_policy_set (policy, "executors", "sdpa,nvfuser,torch", NULL);
}

/* torch.compile graph pairs of the flash and efficient ATen ops (the cuDNN one is
 * data/aten/attention_softmax_bf16.txt): flash, bf16, causal, L = 37, logsumexp [1, 2, 37];
 * efficient, f32, with a float bias that gets a gradient, logsumexp padded to 64. */
#define AT_BF "bf16[1, 2, 37, 64][4736, 2368, 64, 1]cuda:0"
#define AT_F "f32[1, 2, 37, 64][4736, 2368, 64, 1]cuda:0"
#define AT_FB "f32[1, 2, 37, 37][2738, 1369, 37, 1]cuda:0"
#define AT_I "i64[][]cuda:0"
static const char * const aten_pairs[] = {
  " ===== Forward graph 0 =====\n"
  " class GraphModule(torch.nn.Module):\n"
  "    def forward(self, primals_1: \"" AT_BF "\", primals_2: \"" AT_BF "\", primals_3: \"" AT_BF "\"):\n"
  "        sdpa = torch.ops.aten._scaled_dot_product_flash_attention.default(primals_1, primals_2, primals_3, 0.0, True, scale = 0.125)\n"
  "        getitem: \"" AT_BF "\" = sdpa[0]\n"
  "        getitem_1: \"f32[1, 2, 37][74, 37, 1]cuda:0\" = sdpa[1]\n"
  "        getitem_2: \"" AT_I "\" = sdpa[6]\n"
  "        getitem_3: \"" AT_I "\" = sdpa[7];  sdpa = None\n"
  "        return (getitem, primals_1, primals_2, primals_3, getitem, getitem_1, getitem_2, getitem_3)\n"
  "\n"
  " ===== Backward graph 0 =====\n"
  " class GraphModule(torch.nn.Module):\n"
  "    def forward(self, primals_1: \"" AT_BF "\", primals_2: \"" AT_BF "\", primals_3: \"" AT_BF "\", getitem: \"" AT_BF "\", getitem_1: \"f32[1, 2, 37][74, 37, 1]cuda:0\", getitem_2: \"" AT_I "\", getitem_3: \"" AT_I "\", tangents_1: \"" AT_BF "\"):\n"
  "        bw = torch.ops.aten._scaled_dot_product_flash_attention_backward.default(tangents_1, primals_1, primals_2, primals_3, getitem, getitem_1, None, None, 37, 37, 0.0, True, getitem_2, getitem_3, scale = 0.125)\n"
  "        getitem_4: \"" AT_BF "\" = bw[0]\n"
  "        getitem_5: \"" AT_BF "\" = bw[1]\n"
  "        getitem_6: \"" AT_BF "\" = bw[2];  bw = None\n"
  "        return (getitem_4, getitem_5, getitem_6)\n"
  "\n",
  " ===== Forward graph 0 =====\n"
  " class GraphModule(torch.nn.Module):\n"
  "    def forward(self, primals_1: \"" AT_F "\", primals_2: \"" AT_F "\", primals_3: \"" AT_F "\", primals_4: \"" AT_FB "\"):\n"
  "        sdpa = torch.ops.aten._scaled_dot_product_efficient_attention.default(primals_1, primals_2, primals_3, primals_4, True)\n"
  "        getitem: \"" AT_F "\" = sdpa[0]\n"
  "        getitem_1: \"f32[1, 2, 64][128, 64, 1]cuda:0\" = sdpa[1]\n"
  "        getitem_2: \"" AT_I "\" = sdpa[2]\n"
  "        getitem_3: \"" AT_I "\" = sdpa[3];  sdpa = None\n"
  "        return (getitem, primals_1, primals_2, primals_3, primals_4, getitem, getitem_1, getitem_2, getitem_3)\n"
  "\n"
  " ===== Backward graph 0 =====\n"
  " class GraphModule(torch.nn.Module):\n"
  "    def forward(self, primals_1: \"" AT_F "\", primals_2: \"" AT_F "\", primals_3: \"" AT_F "\", primals_4: \"" AT_FB "\", getitem: \"" AT_F "\", getitem_1: \"f32[1, 2, 64][128, 64, 1]cuda:0\", getitem_2: \"" AT_I "\", getitem_3: \"" AT_I "\", tangents_1: \"" AT_F "\"):\n"
  "        bw = torch.ops.aten._scaled_dot_product_efficient_attention_backward.default(tangents_1, primals_1, primals_2, primals_3, primals_4, getitem, getitem_1, getitem_2, getitem_3, 0.0, [True, True, True, True])\n"
  "        getitem_4: \"" AT_F "\" = bw[0]\n"
  "        getitem_5: \"" AT_F "\" = bw[1]\n"
  "        getitem_6: \"" AT_F "\" = bw[2]\n"
  "        getitem_7: \"" AT_FB "\" = bw[3];  bw = None\n"
  "        return (getitem_4, getitem_5, getitem_6, getitem_7)\n"
  "\n",
};

/* @text (a torch.compile forward and backward graph) through the pipeline, sdpa policy. */
static CsPipeline *
aten_text_pipeline (const char *text)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTraceList) list = cs_parse_text (text, strlen (text), "attention-pair.txt", &error);
  CsPolicy policy;
  CsPipeline *pl;

  g_assert_no_error (error);
  g_assert_cmpint (cs_trace_aten_role (list->traces->pdata[0]), ==, CS_ATEN_GRAPH_FORWARD);
  sdpa_policy (&policy);
  pl = cs_pipeline_run_pair (list->traces->pdata[0], cs_aten_find_backward (list, 0), &policy, &error);
  g_assert_no_error (error);
  return pl;
}

static char *
case_name (const AttCase *c)
{
  return g_strdup_printf ("%s B%d H%d L%d S%d E%d Ev%d%s%s%s%s%s", c->dtype, c->B, c->H, c->L, c->S, c->E, c->Ev,
                          c->causal ? " causal" : "", c->mask ? " mask " : "", c->mask ? c->mask : "",
                          c->bshd ? " transposed" : "", c->packed ? " qkv packed" : c->merged ? " heads merged" : "");
}

/* The initial trace of @c: attn_out = sdpa(query_in, key_in, value_in, mask_in, dropout,
 * causal), returned (its cotangent drives the backward).  The names are words no kernel uses. */
static char *
case_text (const AttCase *c, double dropout)
{
  GString *s = g_string_new (IMPORTS);

  if (c->packed)
    g_string_append (s, "def computation(qkv_in):\n");
  else
    g_string_append_printf (s, "def computation(query_in, key_in, value_in%s):\n", c->mask ? ", mask_in" : "");
  if (c->bshd)
    {
      const char *nm[3] = { "query_in", "key_in", "value_in" };
      const int len[3] = { c->L, c->S, c->S }, hd[3] = { c->E, c->E, c->Ev };

      for (int i = 0; i < 3; i++)
        g_string_append_printf (s, "  # %s: \"cuda:0 %s[%d, %d, %d, %d]\"\n", nm[i], c->dtype, c->B, len[i], c->H, hd[i]);
      for (int i = 0; i < 3; i++)
        g_string_append_printf (s, "  %c_t = ltorch.transpose(%s, 1, 2)  # %c_t: \"cuda:0 %s[%d, %d, %d, %d]\"\n",
                                nm[i][0], nm[i], nm[i][0], c->dtype, c->B, c->H, len[i], hd[i]);
    }
  else if (c->packed)
    {
      const char *nm[3] = { "q_s", "k_s", "v_s" };

      g_string_append_printf (s, "  # qkv_in: \"cuda:0 %s[%d, %d, %d]\"\n", c->dtype, c->B, c->L, 3 * c->H * c->E);
      g_string_append_printf (s, "  (q_s, k_s, v_s) = ltorch.split(qkv_in, %d, 2)\n", c->H * c->E);
      for (int i = 0; i < 3; i++)
        g_string_append_printf (s, "  %c_r = ltorch.reshape(%s, (%d, %d, %d, %d))  # %c_r: \"cuda:0 %s[%d, %d, %d, %d]\"\n"
                                "  %c_t = ltorch.transpose(%c_r, 1, 2)  # %c_t: \"cuda:0 %s[%d, %d, %d, %d]\"\n",
                                nm[i][0], nm[i], c->B, c->L, c->H, c->E, nm[i][0], c->dtype, c->B, c->L, c->H, c->E,
                                nm[i][0], nm[i][0], nm[i][0], c->dtype, c->B, c->H, c->L, c->E);
    }
  else if (c->merged)
    {
      const char *nm[3] = { "query_in", "key_in", "value_in" };
      const int len[3] = { c->L, c->S, c->S }, hd[3] = { c->E, c->E, c->Ev };

      for (int i = 0; i < 3; i++)
        g_string_append_printf (s, "  # %s: \"cuda:0 %s[%d, %d, %d]\"\n", nm[i], c->dtype, c->B, len[i], c->H * hd[i]);
      for (int i = 0; i < 3; i++)
        g_string_append_printf (s, "  %c_r = ltorch.reshape(%s, (%d, %d, %d, %d))  # %c_r: \"cuda:0 %s[%d, %d, %d, %d]\"\n"
                                "  %c_t = ltorch.transpose(%c_r, 1, 2)  # %c_t: \"cuda:0 %s[%d, %d, %d, %d]\"\n",
                                nm[i][0], nm[i], c->B, len[i], c->H, hd[i], nm[i][0], c->dtype, c->B, len[i], c->H,
                                hd[i], nm[i][0], nm[i][0], nm[i][0], c->dtype, c->B, c->H, len[i], hd[i]);
    }
  else
    {
      g_string_append_printf (s, "  # query_in: \"cuda:0 %s[%d, %d, %d, %d]\"\n", c->dtype, c->B, c->H, c->L, c->E);
      g_string_append_printf (s, "  # key_in: \"cuda:0 %s[%d, %d, %d, %d]\"\n", c->dtype, c->B, c->H, c->S, c->E);
      g_string_append_printf (s, "  # value_in: \"cuda:0 %s[%d, %d, %d, %d]\"\n", c->dtype, c->B, c->H, c->S, c->Ev);
    }
  if (c->mask)
    g_string_append_printf (s, "  # mask_in: \"cuda:0 %s\"\n", c->mask);
  g_string_append_printf (s, "  attn_out = ltorch.scaled_dot_product_attention(%s, %s, %s, %s, %g, %s, "
                          "scale=None)  # attn_out: \"cuda:0 %s[%d, %d, %d, %d]\"\n",
                          c->bshd || c->merged || c->packed ? "q_t" : "query_in",
                          c->bshd || c->merged || c->packed ? "k_t" : "key_in",
                          c->bshd || c->merged || c->packed ? "v_t" : "value_in",
                          c->mask ? "mask_in" : "None", dropout, c->causal ? "True" : "False", c->dtype, c->B, c->H,
                          c->L, c->Ev);
  if (c->merged || c->packed)
    {
      g_string_append_printf (s, "  o_t = ltorch.transpose(attn_out, 1, 2)  # o_t: \"cuda:0 %s[%d, %d, %d, %d]\"\n"
                              "  o_r = ltorch.reshape(o_t, (%d, %d, %d))  # o_r: \"cuda:0 %s[%d, %d, %d]\"\n"
                              "  return (o_r,)\n", c->dtype, c->B, c->L, c->H, c->Ev, c->B, c->L, c->H * c->Ev,
                              c->dtype, c->B, c->L, c->H * c->Ev);
      return g_string_free (s, FALSE);
    }
  g_string_append (s, "  return (attn_out,)\n");
  return g_string_free (s, FALSE);
}

static CsPipeline *
case_pipeline (const AttCase *c, double dropout)
{
  g_autofree char *text = case_text (c, dropout);
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTrace) t = cs_parse_trace (text, "test", &error);
  CsPolicy policy;
  CsPipeline *pl;

  g_assert_no_error (error);
  sdpa_policy (&policy);
  pl = cs_pipeline_run (t, &policy, NULL, &error);
  g_assert_no_error (error);
  return pl;
}

static guint
count_op (const CsTrace *t, CsOpId id)
{
  guint n = 0;

  for (guint i = 0; t && i < t->n_stmts; i++)
    if (t->stmts[i]->kind == CS_STMT_CALL && t->stmts[i]->op && cs_op_semantic (t->stmts[i]->op)->id == id)
      n++;
  return n;
}

/* The steps whose label starts with @prefix and holds @what. */
static guint
count_steps_with (CsCudaProgram *p, const char *prefix, const char *what)
{
  guint n = 0;

  for (guint i = 0; i < p->steps->len; i++)
    {
      const char *l = ((CsCudaStep *) g_ptr_array_index (p->steps, i))->label;

      n += g_str_has_prefix (l, prefix) && strstr (l, what) != NULL;
    }
  return n;
}

/* The attention kernels the steps run, a launch that runs two of them (the backward's dQ and
 * dK/dV kernels, "A + B") counted as two. */
static guint
count_attention_steps (CsCudaProgram *p)
{
  guint n = 0;

  for (guint i = 0; i < p->steps->len; i++)
    {
      const CsCudaStep *s = g_ptr_array_index (p->steps, i);

      if (g_strcmp0 (s->kind_name, "attention") != 0)
        continue;
      n++;
      for (const char *c = strstr (s->label, " + "); c; c = strstr (c + 1, " + "))
        n++;
    }
  return n;
}

/* No proxy name of @t (its inputs and the statements' outputs) is a word of @src. */
static void
assert_no_names (const char *src, const CsTrace *t)
{
  g_autoptr(GPtrArray) leaves = cs_ref_dup_leaf_inputs (t);

  for (guint i = 0; i < leaves->len; i++)
    {
      const char *n = ((CsProxy *) g_ptr_array_index (leaves, i))->name;
      g_autofree char *pat = g_strdup_printf ("\\b%s\\b", n);

      g_assert_false (g_regex_match_simple (pat, src, 0, 0));
    }
}

/* ---- without a device: NVRTC ----------------------------------------------------------- */

/* Every case, exact and f64, generates attention kernels that NVRTC compiles for sm_90. */
static void
test_compile (void)
{
  for (guint c = 0; c < G_N_ELEMENTS (cases); c++)
    {
      g_autoptr(CsPipeline) pl = case_pipeline (&cases[c], 0.0);
      CsTrace *fwd = cs_pipeline_get_forward (pl), *bwd = cs_pipeline_get_backward (pl);
      g_autoptr(GError) error = NULL;
      g_autofree char *name = case_name (&cases[c]);
      CsPolicy policy;
      CsCudaProgram *p, *q;

      g_test_message ("%s", name);
      g_assert_cmpuint (count_op (fwd, cases[c].expect), ==, 1);
      g_assert_nonnull (bwd);
      sdpa_policy (&policy);
      p = cs_cuda_program_build_full (fwd, bwd, &policy, CS_CUDA_BUILD_DRY | CS_CUDA_BUILD_COMPILE, &error);
      g_assert_no_error (error);
      g_assert_nonnull (p);
      /* forward, rowsum(dO*O), dq, dk/dv (+ zeroes and the mask gradient's) */
      g_assert_cmpuint (count_attention_steps (p), >=, 4);
      g_assert_cmpuint (p->cubins->len, >=, 1);
      /* warp shuffles: the CUDA-core kernels broadcast a lane's value, the tensor-core ones
         reduce over the 4 threads of a row */
      g_assert_nonnull (strstr (p->source->str, case_tensor_cores (&cases[c]) ? "cs_shfl (" : "__shfl_sync"));
      /* bf16/f16 with head dims multiples of 16 up to 128: the tensor-core forward, else CUDA cores */
      g_assert_cmpuint (count_steps_with (p, "attention forward", "(tensor cores)"), ==,
                        case_tensor_cores (&cases[c]) ? 1 : 0);
      /* tensor cores, no mask, head dims up to 32: dQ and dK/dV in one launch (their two-stage
         tiles take 48 KiB of shared memory or less together) */
      g_assert_cmpuint (count_steps_with (p, "attention backward (tensor cores)", "dq"), ==,
                        case_tensor_cores (&cases[c]) ? 1 : 0);
      g_assert_cmpuint (count_steps_with (p, "attention backward (tensor cores)", "dq [") == 1
                        && count_steps_with (p, "attention backward (tensor cores)", "+ attention backward (tensor cores)") == 1,
                        ==, case_tensor_cores (&cases[c]) && cases[c].mask == NULL
                            && cases[c].E <= 32 && cases[c].Ev <= 32);
      g_assert_cmpuint (count_steps_with (p, "attention forward", "(CUDA cores)"), ==,
                        case_tensor_cores (&cases[c]) ? 0 : 1);
      g_assert_true ((strstr (p->source->str, g_str_equal (cases[c].dtype, "f16") ? "cs_mma_f16_16816 (d, x, y)"
                                                                                  : "cs_mma_bf16_16816 (d, x, y)")
                      != NULL) == case_tensor_cores (&cases[c]));
      /* the cases' q, k, v views are aligned to 8 elements: 8-byte tile loads, and 16-byte
       * cp.async ones with ldmatrix fragments: the forward's key and value tiles, the dQ
       * kernel's two stages of key and value tiles (dS K from the key tile transposed by
       * ldmatrix), the dK/dV kernel's two stages of q and dO tiles (P^T dO and dS^T Q
       * likewise); no transposed copies in shared memory */
      if (case_tensor_cores (&cases[c]))
        {
          g_assert_nonnull (strstr (p->source->str, "constexpr bool KRV = true;"));
          g_assert_nonnull (strstr (p->source->str, "constexpr bool KRA = true;"));
          g_assert_nonnull (strstr (p->source->str, "constexpr bool VRA = true;"));
          g_assert_nonnull (strstr (p->source->str, "constexpr bool QRA = true;"));
          g_assert_nonnull (strstr (p->source->str, "constexpr bool GRA = true;"));
          g_assert_nonnull (strstr (p->source->str, "cs_cp_async16 (&ks["));
          g_assert_nonnull (strstr (p->source->str, "cs_ldm_x4_t (fb, &vs["));
          g_assert_nonnull (strstr (p->source->str, "__shared__ v16_t ks_[2 * BN * KP / 8], vs_[2 * BN * VP / 8];"));
          g_assert_nonnull (strstr (p->source->str, "cs_cp_async16 (&kn["));
          g_assert_nonnull (strstr (p->source->str, "cs_cp_async16 (&vn["));
          g_assert_nonnull (strstr (p->source->str, "cs_ldm_x4 (fb, &vs["));
          g_assert_nonnull (strstr (p->source->str, "cs_ldm_x4_t (fb, &ks["));
          g_assert_nonnull (strstr (p->source->str, "__shared__ v16_t qs_[2 * BM * QP / 8], gs_[2 * BM * GP / 8];"));
          g_assert_nonnull (strstr (p->source->str, "cs_cp_async16 (&qn["));
          g_assert_nonnull (strstr (p->source->str, "cs_cp_async16 (&gn["));
          g_assert_nonnull (strstr (p->source->str, "cs_ldm_x4 (fb, &qs["));
          g_assert_nonnull (strstr (p->source->str, "cs_ldm_x4_t (fb, &qs["));
          g_assert_nonnull (strstr (p->source->str, "cs_ldm_x4_t (fb, &gs["));
          g_assert_null (strstr (p->source->str, "TP = "));
        }
      /* heads merged: out, dq, dk and dv are written as [B, L, H, E] through their strides, and
       * every transpose + reshape around the attention is a view */
      /* qkv packed: only the attention kernels run (the split pieces are views, the cat of the
       * gradients is written in place) */
      if (cases[c].packed)
        g_assert_cmpuint (count_steps_with (p, "attention", ""), ==, p->steps->len);
      if (cases[c].merged || cases[c].packed)
        {
          g_assert_cmpuint (count_steps_with (p, "", "copy"), ==, 0);
          g_assert_nonnull (strstr (p->source->str, "auto sto = [&] (long long i, acc_t v) { sto_at (0 + "));
          g_assert_nonnull (strstr (p->source->str, "auto stq = [&] (long long i, acc_t v) { stq_at (0 + "));
          g_assert_nonnull (strstr (p->source->str, "auto stk = [&] (long long i, acc_t v) { stk_at (0 + "));
          g_assert_nonnull (strstr (p->source->str, "auto stv = [&] (long long i, acc_t v) { stv_at (0 + "));
        }
      else
        g_assert_null (strstr (p->source->str, "sto_at"));
      assert_no_names (p->source->str, fwd);
      cs_cuda_program_free (p);

      {
        g_autoptr(CsTrace) f = cs_cuda_trace_to_f64 (fwd);
        g_autoptr(CsTrace) b = cs_cuda_trace_to_f64 (bwd);

        q = cs_cuda_program_build_full (f, b, &policy, CS_CUDA_BUILD_DRY | CS_CUDA_BUILD_COMPILE, &error);
        g_assert_no_error (error);
        g_assert_nonnull (q);
        g_assert_nonnull (strstr (q->source->str, "typedef double acc_t;"));
        g_assert_null (strstr (q->source->str, "typedef float acc_t;"));
        g_assert_null (strstr (q->source->str, "cs_mma_"));
        cs_cuda_program_free (q);
      }
    }
}

static CsTrace *
parse_text (const char *text)
{
  g_autoptr(GError) error = NULL;
  CsTrace *t = cs_parse_trace (text, "test", &error);

  g_assert_no_error (error);
  return t;
}

/* The logsumexp layouts compile too (exact and f64). */
static void
test_compile_lse (void)
{
  for (guint c = 0; c < G_N_ELEMENTS (lse_traces); c++)
    for (int f64 = 0; f64 < 2; f64++)
      {
        g_autoptr(CsTrace) t = parse_text (lse_traces[c]);
        g_autoptr(CsTrace) t64 = cs_cuda_trace_to_f64 (t);
        g_autoptr(GError) error = NULL;
        CsPolicy policy;
        CsCudaProgram *p;

        sdpa_policy (&policy);
        p = cs_cuda_program_build_full (f64 ? t64 : t, NULL, &policy, CS_CUDA_BUILD_DRY | CS_CUDA_BUILD_COMPILE,
                                        &error);
        g_assert_no_error (error);
        g_assert_cmpuint (p->outputs->len, ==, 2);
        g_assert_cmpuint (count_attention_steps (p), >=, 1);
        cs_cuda_program_free (p);
      }
}

/* The shared LLaMA stack (8 blocks, bf16, causal flash attention) builds and compiles with the
 * sdpa executor: one forward kernel shared by the 8 identical layers. */
static void
test_compile_llama (void)
{
  const char *dir = g_getenv ("CS_SHARED_TRACES");
  g_autofree char *path = dir ? g_build_filename (dir, "thunder_llama_stack_initial.txt", NULL) : NULL;
  g_autoptr(CsTraceList) list = NULL;
  g_autoptr(CsPipeline) pl = NULL;
  g_autoptr(GError) error = NULL;
  CsPolicy policy;
  CsCudaProgram *p;
  guint n_fwd = 0;
  gint fwd_kernel = -1;

  if (path == NULL || !g_file_test (path, G_FILE_TEST_EXISTS))
    {
      g_test_skip ("../shared/traces not present");
      return;
    }
  list = cs_parse_file (path, &error);
  g_assert_no_error (error);
  sdpa_policy (&policy);
  pl = cs_pipeline_run (g_ptr_array_index (list->traces, 0), &policy, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (count_op (cs_pipeline_get_forward (pl), FLASH), ==, 8);
  p = cs_cuda_program_build_full (cs_pipeline_get_forward (pl), cs_pipeline_get_backward (pl), &policy,
                                  CS_CUDA_BUILD_DRY | CS_CUDA_BUILD_COMPILE, &error);
  g_assert_no_error (error);
  g_assert_nonnull (p);
  for (guint i = 0; i < p->steps->len; i++)
    {
      CsCudaStep *s = g_ptr_array_index (p->steps, i);

      if (!g_str_has_prefix (s->label, "attention forward"))
        continue;
      /* identical layers: one kernel */
      if (fwd_kernel >= 0)
        g_assert_cmpint (fwd_kernel, ==, (gint) s->kernel);
      fwd_kernel = (gint) s->kernel;
      n_fwd++;
    }
  g_assert_cmpuint (n_fwd, ==, 8);
  cs_cuda_program_free (p);
}

/* Thunder's own final LLaMA traces (default executors without nvFuser: sdpafx statements, torch
 * ops, TorchCompile cross-entropy regions) as the CUDA executor builds them. */
static CsCudaProgram *
thunder_final_program (CsCudaBuildFlags flags, CsTrace **fwd, CsTrace **bwd, GError **error)
{
  const char *dir = g_getenv ("CS_SHARED_TRACES");
  g_autofree char *fp = dir ? g_build_filename (dir, "thunder_llama_stack_final_fwd.txt", NULL) : NULL;
  g_autofree char *bp = dir ? g_build_filename (dir, "thunder_llama_stack_final_bwd.txt", NULL) : NULL;
  g_autoptr(CsTraceList) fl = NULL;
  g_autoptr(CsTraceList) bl = NULL;
  CsPolicy policy;

  *fwd = *bwd = NULL;
  if (fp == NULL || !g_file_test (fp, G_FILE_TEST_EXISTS) || !g_file_test (bp, G_FILE_TEST_EXISTS))
    return NULL;
  fl = cs_parse_file (fp, error);
  g_assert_no_error (*error);
  bl = cs_parse_file (bp, error);
  g_assert_no_error (*error);
  *fwd = cs_trace_ref (g_ptr_array_index (fl->traces, 0));
  *bwd = cs_trace_ref (g_ptr_array_index (bl->traces, 0));
  sdpa_policy (&policy);
  return cs_cuda_program_build_full (*fwd, *bwd, &policy, flags, error);
}

static void
test_compile_thunder_final (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTrace) fwd = NULL;
  g_autoptr(CsTrace) bwd = NULL;
  CsCudaProgram *p = thunder_final_program (CS_CUDA_BUILD_DRY | CS_CUDA_BUILD_COMPILE, &fwd, &bwd, &error);

  if (fwd == NULL)
    {
      g_test_skip ("../shared/traces not present");
      return;
    }
  g_assert_cmpuint (count_op (fwd, FLASH), ==, 8);
  if (p == NULL && strstr (error->message, "torchcompile_xentropy") != NULL)
    {
      /* every sdpa statement before the cross-entropy region was built */
      g_test_skip (error->message);
      return;
    }
  g_assert_no_error (error);
  cs_cuda_program_free (p);
}

/* torch.compile's graphs: aten._scaled_dot_product_cudnn_attention and its backward (then the
 * flash and efficient pairs above). */
static CsPipeline *
aten_pipeline (void)
{
  const char *dir = g_getenv ("CS_DATA_DIR");
  g_autofree char *path = dir ? g_build_filename (dir, "aten", "attention_softmax_bf16.txt", NULL) : NULL;
  g_autoptr(CsTraceList) list = NULL;
  g_autoptr(GError) error = NULL;
  CsPolicy policy;
  CsPipeline *pl;

  if (path == NULL || !g_file_test (path, G_FILE_TEST_EXISTS))
    return NULL;
  list = cs_parse_file (path, &error);
  g_assert_no_error (error);
  sdpa_policy (&policy);
  pl = cs_pipeline_run_pair (g_ptr_array_index (list->traces, 0), cs_aten_find_backward (list, 0), &policy,
                             &error);
  g_assert_no_error (error);
  return pl;
}

static void
test_compile_aten (void)
{
  g_autoptr(CsPipeline) pl = aten_pipeline ();
  g_autoptr(GError) error = NULL;
  CsPolicy policy;
  CsCudaProgram *p;

  if (pl == NULL)
    {
      g_test_skip ("data/ not found");
      return;
    }
  g_assert_cmpuint (count_op (cs_pipeline_get_forward (pl), CS_OP_ATEN__SCALED_DOT_PRODUCT_CUDNN_ATTENTION), ==, 1);
  g_assert_cmpuint (count_op (cs_pipeline_get_backward (pl), CS_OP_ATEN__SCALED_DOT_PRODUCT_CUDNN_ATTENTION_BACKWARD),
                    ==, 1);
  sdpa_policy (&policy);
  p = cs_cuda_program_build_full (cs_pipeline_get_forward (pl), cs_pipeline_get_backward (pl), &policy,
                                  CS_CUDA_BUILD_DRY | CS_CUDA_BUILD_COMPILE, &error);
  g_assert_no_error (error);
  g_assert_nonnull (p);
  g_assert_cmpuint (count_attention_steps (p), >=, 4);
  cs_cuda_program_free (p);
  for (guint c = 0; c < G_N_ELEMENTS (aten_pairs); c++)
    {
      g_autoptr(CsPipeline) ap = aten_text_pipeline (aten_pairs[c]);

      p = cs_cuda_program_build_full (cs_pipeline_get_forward (ap), cs_pipeline_get_backward (ap), &policy,
                                      CS_CUDA_BUILD_DRY | CS_CUDA_BUILD_COMPILE, &error);
      g_assert_no_error (error);
      g_assert_cmpuint (count_attention_steps (p), >=, 4);
      cs_cuda_program_free (p);
    }
}

/* dropout_p = 0.1: refused with the statement's line, never run without dropout. */
static void
test_dropout_refused (void)
{
  g_autoptr(CsPipeline) pl = case_pipeline (&cases[0], 0.1);
  g_autoptr(GError) error = NULL;
  CsPolicy policy;
  CsCudaProgram *p;

  g_assert_cmpuint (count_op (cs_pipeline_get_forward (pl), FLASH), ==, 1);
  sdpa_policy (&policy);
  p = cs_cuda_program_build_full (cs_pipeline_get_forward (pl), cs_pipeline_get_backward (pl), &policy,
                                  CS_CUDA_BUILD_DRY, &error);
  g_assert_null (p);
  g_assert_error (error, CS_CUDA_ERROR, CS_CUDA_ERROR_UNSUPPORTED);
  g_assert_nonnull (strstr (error->message, "dropout_p = 0.1 is not supported"));
  g_assert_true (g_str_has_prefix (error->message, "line "));
}

/* ---- with a device ----------------------------------------------------------------------- */

static double
bound (CsDtype dt)
{
  switch (dt)
    {
    case CS_DTYPE_BF16: return 2e-2;
    case CS_DTYPE_F16: return 5e-3;
    case CS_DTYPE_F32: return 1e-5;
    default: return 1e-12;
    }
}

static void
fill_inputs (CsCudaProgram *p, CsTrace *fwd, CsTrace *bwd, GHashTable *env)
{
  g_autoptr(GPtrArray) fl = cs_ref_dup_leaf_inputs (fwd);
  g_autoptr(GPtrArray) bl = bwd ? cs_ref_dup_leaf_inputs (bwd) : g_ptr_array_new ();
  g_autoptr(GError) error = NULL;

  for (guint i = 0; i < p->inputs->len; i++)
    {
      CsCudaTensorInfo *in = &g_array_index (p->inputs, CsCudaTensorInfo, i);
      GPtrArray *leaves = in->backward ? bl : fl;
      CsProxy *px = NULL;
      g_autoptr(CsTensor) x = NULL;

      if (g_hash_table_contains (env, in->name))
        continue;
      for (guint j = 0; j < leaves->len; j++)
        if (g_strcmp0 (((CsProxy *) g_ptr_array_index (leaves, j))->name, in->name) == 0)
          px = g_ptr_array_index (leaves, j);
      g_assert_nonnull (px);
      x = cs_ref_random_input (in->backward ? bwd : fwd, px, 700 + i, &error);
      g_assert_no_error (error);
      cs_ref_env_insert (env, in->name, x);
    }
}

/* Poisons the arena (NaN bytes: an element nothing writes cannot pass), sets the inputs of
 * @env (converted to @p's dtypes), runs. */
static void
set_and_run (CsCudaProgram *p, GHashTable *env)
{
  g_autoptr(GError) error = NULL;

  g_assert_cmpint (cudaMemset (p->arena, 0xff, p->arena_bytes), ==, cudaSuccess);
  g_assert_true (cs_cuda_program_reset_state (p, NULL));   /* what the poison overwrote */
  for (guint i = 0; i < p->inputs->len; i++)
    {
      CsCudaTensorInfo *in = &g_array_index (p->inputs, CsCudaTensorInfo, i);
      g_autoptr(CsTensor) x = cs_tensor_convert (g_hash_table_lookup (env, in->name), in->dtype, &error);

      g_assert_no_error (error);
      g_assert_true (cs_cuda_program_set_input (p, i, x->data, cs_tensor_nbytes (x), &error));
    }
  g_assert_true (cs_cuda_program_run (p, FALSE, &error));
  g_assert_no_error (error);
}

static void
cpu_step (CsTrace *fwd, CsTrace *bwd, GHashTable *env, CsRefMode mode, GPtrArray **fo, GPtrArray **fn,
          GPtrArray **bo, GPtrArray **bn)
{
  g_autoptr(GHashTable) returned = cs_ref_env_new ();
  g_autoptr(GError) error = NULL;
  GHashTableIter it;
  gpointer k, v;

  g_assert_true (cs_ref_run_env (fwd, env, mode, 0, fo, fn, returned, &error));
  g_assert_no_error (error);
  if (bwd == NULL)
    return;
  g_hash_table_iter_init (&it, env);
  while (g_hash_table_iter_next (&it, &k, &v))
    if (!g_hash_table_contains (returned, k))
      cs_ref_env_insert (returned, k, v);
  g_assert_true (cs_ref_run_env (bwd, returned, mode, 0, bo, bn, NULL, &error));
  g_assert_no_error (error);
}

static CsTensor *
named (GPtrArray *outs, GPtrArray *names, const char *name)
{
  for (guint j = 0; outs && j < outs->len; j++)
    if (g_strcmp0 (g_ptr_array_index (names, j), name) == 0)
      return g_ptr_array_index (outs, j);
  return NULL;
}

static CsTensor *
get_output (CsCudaProgram *p, guint i)
{
  CsCudaTensorInfo *o = &g_array_index (p->outputs, CsCudaTensorInfo, i);
  g_autoptr(GError) error = NULL;
  CsTensor *t = cs_tensor_new (o->dtype, o->shape, o->rank, &error);

  g_assert_no_error (error);
  g_assert_true (cs_cuda_program_get_output (p, i, t->data, cs_tensor_nbytes (t), &error));
  return t;
}

/* Relative L2 error of @got against @ref (both finite everywhere). */
static double
rel_l2 (const CsTensor *got, const CsTensor *ref)
{
  double num = 0, den = 0;

  g_assert_cmpint (ref->numel, ==, got->numel);
  for (int64_t e = 0; e < got->numel; e++)
    {
      double a = cs_tensor_get_f64 (got, e), r = cs_tensor_get_f64 (ref, e);

      g_assert_false (isnan (a));
      g_assert_false (isnan (r));
      num += (a - r) * (a - r);
      den += r * r;
    }
  return den > 0 ? sqrt (num / den) : sqrt (num);
}

/* Runs @fwd + @bwd as @p (exact or f64) and compares every output with the CPU's f64 run;
 * returns how many float outputs were compared and the worst error / bound (f64 programs:
 * bound 1e-12). */
static double
compare_with_cpu (CsCudaProgram *p, CsTrace *fwd, CsTrace *bwd, GHashTable *env, const char *what, guint *n)
{
  g_autoptr(GPtrArray) fo = NULL, fn = NULL, bo = NULL, bn = NULL;
  double worst = 0;

  fill_inputs (p, fwd, bwd, env);
  set_and_run (p, env);
  cpu_step (fwd, bwd, env, CS_REF_F64, &fo, &fn, &bo, &bn);
  for (guint i = 0; i < p->outputs->len; i++)
    {
      CsCudaTensorInfo *o = &g_array_index (p->outputs, CsCudaTensorInfo, i);
      g_autoptr(CsTensor) got = get_output (p, i);
      CsTensor *ref = o->backward ? named (bo, bn, o->name) : named (fo, fn, o->name);
      double rel;

      g_assert_nonnull (ref);
      if (!cs_dtype_is_float (o->dtype))
        continue;
      rel = rel_l2 (got, ref);
      g_test_message ("%s %s %s (%s): rel.L2 %.3e (bound %.0e)", what, o->backward ? "grad" : "out", o->name,
                      cs_dtype_short_name (o->dtype), rel, bound (o->dtype));
      worst = MAX (worst, rel / bound (o->dtype));
      (*n)++;
    }
  return worst;
}

/* Every case on the GPU: the exact program against the CPU's f64 run, then the f64 program
 * against it to 1e-12. */
static void
test_gpu_cases (void)
{
  if (!have_device)
    {
      g_test_skip ("no CUDA device");
      return;
    }
  for (guint c = 0; c < G_N_ELEMENTS (cases); c++)
    {
      g_autoptr(CsPipeline) pl = case_pipeline (&cases[c], 0.0);
      CsTrace *fwd = cs_pipeline_get_forward (pl), *bwd = cs_pipeline_get_backward (pl);
      g_autoptr(GHashTable) env = cs_ref_env_new ();
      g_autoptr(GError) error = NULL;
      g_autofree char *name = case_name (&cases[c]);
      CsPolicy policy;
      CsCudaProgram *p;
      guint n = 0, n64 = 0;
      double worst;

      sdpa_policy (&policy);
      p = cs_cuda_program_build (fwd, bwd, &policy, &error);
      g_assert_no_error (error);
      worst = compare_with_cpu (p, fwd, bwd, env, name, &n);
      cs_cuda_program_free (p);
      /* out, dq, dk, dv (and the mask's gradient); qkv packed: out and the one gradient of
         the packed input (dq, dk, dv written in place into it) */
      g_assert_cmpuint (n, >=, cases[c].packed ? 2u : 4u);
      g_assert_cmpfloat (worst, <=, 1.0);

      p = cs_cuda_program_build_f64 (fwd, bwd, &policy, &error);
      g_assert_no_error (error);
      worst = compare_with_cpu (p, fwd, bwd, env, name, &n64);
      cs_cuda_program_free (p);
      g_assert_cmpuint (n64, ==, n);
      g_assert_cmpfloat (worst, <=, 1.0);
    }
}

/* cuDNN's fused attention (kernels/cs-cuda-cudnn.c) where libcudnn.so.9 loads: bf16 and f16,
 * causal and not, odd sizes, transposed views; each case's labels say which path ran (cuDNN
 * for the first, 128 x 128 causal, which every cuDNN 9.6+ takes on sm_90; older releases run
 * the kernels for a backward whose key count is not a multiple of 128), and every
 * output and gradient agrees with the CPU's f64 run within the dtype's bound (the last two: the
 * heads-merged and qkv-packed layouts, whose outputs are strided).  With
 * CASTSCOPE_CUDNN=0 the same program runs the kernels.  Skips without a device or cuDNN. */
static const AttCase cudnn_cases[] = {
  { "bf16", 2, 2, 128, 128, 64, 64, TRUE, NULL, FLASH },
  { "bf16", 1, 2, 67, 67, 64, 64, FALSE, NULL, FLASH },
  { "bf16", 1, 2, 67, 67, 128, 128, TRUE, NULL, FLASH },
  { "f16", 2, 2, 37, 37, 64, 64, TRUE, NULL, FLASH },
  { "f16", 1, 2, 130, 201, 128, 128, FALSE, NULL, FLASH },
  { "bf16", 2, 3, 37, 37, 64, 64, TRUE, NULL, FLASH, TRUE },
  { "bf16", 1, 2, 37, 130, 64, 64, TRUE, NULL, MEMEF },
  /* outputs laid out for the transposes that read them ([B, L, H, E] strides), and written in
     place into the backward's cat (qkv packed): cuDNN takes the outputs' strides */
  { "bf16", 2, 2, 128, 128, 64, 64, TRUE, NULL, FLASH, FALSE, TRUE },
  { "bf16", 2, 2, 128, 128, 64, 64, TRUE, NULL, FLASH, FALSE, TRUE, TRUE },
};

static void
test_gpu_cudnn (void)
{
  if (!have_device)
    {
      g_test_skip ("no CUDA device");
      return;
    }
  if (!cs_cuda_cudnn_enabled ())
    {
      g_test_skip (cs_cuda_cudnn_describe ());
      return;
    }
  g_test_message ("%s", cs_cuda_cudnn_describe ());
  /* the cases are small: below the default threshold of 131,072 scores the kernels run (the
     first case has 2 * 2 * 128 * 128 = 65,536), so the threshold is lifted here, and checked */
  {
    g_autoptr(CsPipeline) pl = case_pipeline (&cudnn_cases[0], 0.0);
    g_autoptr(GError) error = NULL;
    CsPolicy policy;
    CsCudaProgram *p;

    sdpa_policy (&policy);
    p = cs_cuda_program_build (cs_pipeline_get_forward (pl), cs_pipeline_get_backward (pl), &policy, &error);
    g_assert_no_error (error);
    g_assert_cmpuint (count_steps_with (p, "attention forward (cuDNN)", ""), ==, 0);
    g_assert_cmpuint (count_steps_with (p, "attention backward (cuDNN)", ""), ==, 0);
    cs_cuda_program_free (p);
  }
  g_setenv ("CASTSCOPE_CUDNN_MIN_SCORES", "0", TRUE);
  for (guint c = 0; c < G_N_ELEMENTS (cudnn_cases); c++)
    {
      g_autoptr(CsPipeline) pl = case_pipeline (&cudnn_cases[c], 0.0);
      CsTrace *fwd = cs_pipeline_get_forward (pl), *bwd = cs_pipeline_get_backward (pl);
      g_autoptr(GHashTable) env = cs_ref_env_new ();
      g_autoptr(GError) error = NULL;
      g_autofree char *name = case_name (&cudnn_cases[c]);
      CsPolicy policy;
      CsCudaProgram *p;
      guint n = 0, nf, nb;
      double worst;

      sdpa_policy (&policy);
      p = cs_cuda_program_build (fwd, bwd, &policy, &error);
      g_assert_no_error (error);
      nf = count_steps_with (p, "attention forward (cuDNN)", "");
      nb = count_steps_with (p, "attention backward (cuDNN)", "");
      g_test_message ("%s: forward %s, backward %s", name, nf ? "cuDNN" : "kernels (fallback)",
                      nb ? "cuDNN" : "kernels (fallback)");
      if (c == 0)
        {
          g_assert_cmpuint (nf, ==, 1);
          g_assert_cmpuint (nb, ==, 1);
          g_assert_cmpuint (p->n_cudnn_plans, ==, 2);
        }
      worst = compare_with_cpu (p, fwd, bwd, env, name, &n);
      g_assert_cmpuint (n, >=, cudnn_cases[c].packed ? 2u : 4u);
      g_assert_cmpfloat (worst, <=, 1.0);
      /* the program's CUDA graph replays cuDNN's kernels too */
      g_assert_true (cs_cuda_program_run (p, TRUE, &error));
      g_assert_no_error (error);
      g_assert_cmpint (cudaStreamSynchronize (p->stream), ==, cudaSuccess);
      cs_cuda_program_free (p);

      if (c == 0)
        {
          g_setenv ("CASTSCOPE_CUDNN", "0", TRUE);
          p = cs_cuda_program_build (fwd, bwd, &policy, &error);
          g_unsetenv ("CASTSCOPE_CUDNN");
          g_assert_no_error (error);
          g_assert_cmpuint (count_steps_with (p, "attention forward (cuDNN)", ""), ==, 0);
          g_assert_cmpuint (count_steps_with (p, "attention backward (cuDNN)", ""), ==, 0);
          g_assert_cmpuint (count_steps_with (p, "attention forward (tensor cores)", ""), ==, 1);
          cs_cuda_program_free (p);
        }
    }
  g_unsetenv ("CASTSCOPE_CUDNN_MIN_SCORES");
}

/* out and logsumexp (padding included) of every layout against the CPU's f64 run, exact and
 * f64 programs. */
static void
test_gpu_lse (void)
{
  if (!have_device)
    {
      g_test_skip ("no CUDA device");
      return;
    }
  for (guint c = 0; c < G_N_ELEMENTS (lse_traces); c++)
    for (int f64 = 0; f64 < 2; f64++)
      {
        g_autoptr(CsTrace) t = parse_text (lse_traces[c]);
        g_autoptr(GHashTable) env = cs_ref_env_new ();
        g_autoptr(GError) error = NULL;
        g_autofree char *what = g_strdup_printf ("logsumexp layout %u%s", c, f64 ? " f64" : "");
        CsPolicy policy;
        CsCudaProgram *p;
        guint n = 0;
        double worst;

        sdpa_policy (&policy);
        p = f64 ? cs_cuda_program_build_f64 (t, NULL, &policy, &error) : cs_cuda_program_build (t, NULL, &policy, &error);
        g_assert_no_error (error);
        worst = compare_with_cpu (p, t, NULL, env, what, &n);
        cs_cuda_program_free (p);
        g_assert_cmpuint (n, ==, 2);
        g_assert_cmpfloat (worst, <=, 1.0);
      }
}

/* The flash and efficient ATen pairs against the CPU's f64 run (out, logsumexp, gradients,
 * the bias's gradient), exact and f64 programs. */
static void
test_gpu_aten_pairs (void)
{
  if (!have_device)
    {
      g_test_skip ("no CUDA device");
      return;
    }
  for (guint c = 0; c < G_N_ELEMENTS (aten_pairs); c++)
    for (int f64 = 0; f64 < 2; f64++)
      {
        g_autoptr(CsPipeline) pl = aten_text_pipeline (aten_pairs[c]);
        CsTrace *fwd = cs_pipeline_get_forward (pl), *bwd = cs_pipeline_get_backward (pl);
        g_autoptr(GHashTable) env = cs_ref_env_new ();
        g_autoptr(GError) error = NULL;
        g_autofree char *what = g_strdup_printf ("aten pair %u%s", c, f64 ? " f64" : "");
        CsPolicy policy;
        CsCudaProgram *p;
        guint n = 0;
        double worst;

        sdpa_policy (&policy);
        p = f64 ? cs_cuda_program_build_f64 (fwd, bwd, &policy, &error) : cs_cuda_program_build (fwd, bwd, &policy, &error);
        g_assert_no_error (error);
        worst = compare_with_cpu (p, fwd, bwd, env, what, &n);
        cs_cuda_program_free (p);
        g_assert_cmpuint (n, >=, 5);
        g_assert_cmpfloat (worst, <=, 1.0);
      }
}

/* PyTorch's verdict (cs_accuracy_judge, as `castscope-cli run --check`) on every output and
 * gradient of @pl run on the GPU, the exact-dtype CPU run as the reference. */
static void
verdict_step (CsTrace *fwd, CsTrace *bwd, const char *what)
{
  g_autoptr(GHashTable) env = cs_ref_env_new ();
  g_autoptr(GPtrArray) fo = NULL, fn = NULL, bo = NULL, bn = NULL;
  g_autoptr(GPtrArray) eo = NULL, en = NULL, ebo = NULL, ebn = NULL;
  g_autoptr(GError) error = NULL;
  CsPolicy policy;
  CsCudaProgram *p;

  sdpa_policy (&policy);
  p = cs_cuda_program_build (fwd, bwd, &policy, &error);
  g_assert_no_error (error);
  /* a forward and a backward: one step each through cuDNN, four kernels without */
  g_assert_cmpuint (count_steps_with (p, "attention forward", ""), >=, 1);
  g_assert_cmpuint (count_steps_with (p, "attention backward", ""), >=, 1);
  fill_inputs (p, fwd, bwd, env);
  set_and_run (p, env);
  cpu_step (fwd, bwd, env, CS_REF_F64, &fo, &fn, &bo, &bn);
  cpu_step (fwd, bwd, env, CS_REF_EXACT, &eo, &en, &ebo, &ebn);
  for (guint i = 0; i < p->outputs->len; i++)
    {
      CsCudaTensorInfo *o = &g_array_index (p->outputs, CsCudaTensorInfo, i);
      g_autoptr(CsTensor) got = get_output (p, i);
      CsTensor *t = o->backward ? named (bo, bn, o->name) : named (fo, fn, o->name);
      CsTensor *r = o->backward ? named (ebo, ebn, o->name) : named (eo, en, o->name);
      CsAccuracy acc;

      g_assert_nonnull (t);
      g_assert_nonnull (r);
      cs_accuracy_judge (got, r, t, NULL, &acc);
      g_test_message ("%s %s: err %.3e ref_err %.3e ratio %.3g %s", what, o->name, acc.err, acc.ref_err, acc.ratio,
                      acc.pass ? "ok" : "FAIL");
      g_assert_true (acc.pass);
    }
  cs_cuda_program_free (p);
}

static void
verdict (CsPipeline *pl, const char *what)
{
  verdict_step (cs_pipeline_get_forward (pl), cs_pipeline_get_backward (pl), what);
}

/* Thunder's own final LLaMA traces (sdpafx statements as Thunder printed them). */
static void
test_gpu_thunder_final (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTrace) fwd = NULL;
  g_autoptr(CsTrace) bwd = NULL;
  CsCudaProgram *p;

  if (!have_device)
    {
      g_test_skip ("no CUDA device");
      return;
    }
  p = thunder_final_program (CS_CUDA_BUILD_DRY, &fwd, &bwd, &error);
  if (fwd == NULL)
    {
      g_test_skip ("../shared/traces not present");
      return;
    }
  if (p == NULL && strstr (error->message, "torchcompile_xentropy") != NULL)
    {
      g_test_skip (error->message);
      return;
    }
  g_assert_no_error (error);
  cs_cuda_program_free (p);
  verdict_step (fwd, bwd, "llama thunder final");
}

static void
test_gpu_llama (void)
{
  const char *dir = g_getenv ("CS_SHARED_TRACES");
  g_autofree char *path = dir ? g_build_filename (dir, "thunder_llama_stack_initial.txt", NULL) : NULL;
  g_autoptr(CsTraceList) list = NULL;
  g_autoptr(CsPipeline) pl = NULL;
  g_autoptr(GError) error = NULL;
  CsPolicy policy;

  if (!have_device)
    {
      g_test_skip ("no CUDA device");
      return;
    }
  if (path == NULL || !g_file_test (path, G_FILE_TEST_EXISTS))
    {
      g_test_skip ("../shared/traces not present");
      return;
    }
  list = cs_parse_file (path, &error);
  g_assert_no_error (error);
  sdpa_policy (&policy);
  pl = cs_pipeline_run (g_ptr_array_index (list->traces, 0), &policy, NULL, &error);
  g_assert_no_error (error);
  verdict (pl, "llama");
}

static void
test_gpu_aten (void)
{
  g_autoptr(CsPipeline) pl = NULL;

  if (!have_device)
    {
      g_test_skip ("no CUDA device");
      return;
    }
  pl = aten_pipeline ();
  if (pl == NULL)
    {
      g_test_skip ("data/ not found");
      return;
    }
  verdict (pl, "aten cudnn attention");
}

int
main (int argc, char **argv)
{
  int n = 0;
  int sms, maj, min;

  g_test_init (&argc, &argv, G_TEST_OPTION_ISOLATE_DIRS, NULL);
  have_device = cudaGetDeviceCount (&n) == cudaSuccess && n > 0
                && cs_cuda_init_device (&sms, &maj, &min, NULL);
  g_test_add_func ("/kernels/attention/nvrtc/cases-exact-and-f64", test_compile);
  g_test_add_func ("/kernels/attention/nvrtc/logsumexp-layouts", test_compile_lse);
  g_test_add_func ("/kernels/attention/nvrtc/llama-stack", test_compile_llama);
  g_test_add_func ("/kernels/attention/nvrtc/aten-cudnn", test_compile_aten);
  g_test_add_func ("/kernels/attention/nvrtc/llama-thunder-final", test_compile_thunder_final);
  g_test_add_func ("/kernels/attention/dropout-refused", test_dropout_refused);
  g_test_add_func ("/kernels/attention/gpu/cases-vs-cpu-f64", test_gpu_cases);
  g_test_add_func ("/kernels/attention/gpu/cudnn-vs-cpu-f64", test_gpu_cudnn);
  g_test_add_func ("/kernels/attention/gpu/logsumexp-layouts", test_gpu_lse);
  g_test_add_func ("/kernels/attention/gpu/llama-stack-verdict", test_gpu_llama);
  g_test_add_func ("/kernels/attention/gpu/aten-cudnn-verdict", test_gpu_aten);
  g_test_add_func ("/kernels/attention/gpu/aten-flash-efficient-vs-cpu-f64", test_gpu_aten_pairs);
  g_test_add_func ("/kernels/attention/gpu/llama-thunder-final-verdict", test_gpu_thunder_final);
  return g_test_run ();
}
