/* test-core-aten-profile.c: castscope's stats of the torch.compile samples against PyTorch's
 * own profiler (issue 22 acceptance: "stats agree with what PyTorch's own profiler reports for
 * the same graph (matmul count, dtypes)").
 *
 * data/aten/profile/<case>_<mode>.json is what generate.py's profile() wrote for one more
 * forward and backward step of the compiled function under torch.profiler (record_shapes): the
 * matmul-like aten ops it recorded, each with its input dims and types, in time order.
 *
 * How the two are counted:
 * - matmuls: the profiler's aten::mm, aten::addmm, aten::bmm and aten::baddbmm records (the
 *   `.out` overloads Inductor's extern kernels call: their last input is the output buffer)
 *   against castscope's n_matmuls of the final forward plus the final backward trace, and
 *   against the extern matmul kernels of Inductor's output code for the same compile;
 * - sdpa: the profiler records one aten::_scaled_dot_product_*_attention op for the forward and
 *   one ..._backward op (attention_softmax_bf16: cuDNN attention).  castscope keeps them as one
 *   statement each and counts no matmul for them (its stats count prims.matmul / prims.linear:
 *   an sdpa statement is not one), so they are matched statement for op, not in n_matmuls;
 * - dtypes and shapes: each profiler matmul's operands (and output) against the aten matmul
 *   statement castscope has for it, compared as multisets of "op dtype[shape] ... -> out"
 *   (the profiler's order is the GPU's, castscope's the graphs').  One difference is expected
 *   and counted: Inductor's post-grad pad_mm pass pads a bf16 matmul's contraction dim to a
 *   multiple of 8 when it benchmarks faster (rmsnorm_swiglu_autocast: K 172 runs as 176), a
 *   node the AOT graph castscope reads does not have.
 */
#include "cs-config.h"

#include <string.h>

#if CS_HAVE_JSON
#include <json-glib/json-glib.h>
#endif

#include "cs-aten.h"
#include "cs-inductor.h"
#include "cs-parse.h"
#include "cs-pipeline.h"
#include "cs-stats.h"

static const char *
data_dir (void)
{
  const char *dir = g_getenv ("CS_DATA_DIR");
  return dir ? dir : "data";
}

/* castscope's dtype for a profiler "Input type" string, NULL for a non-tensor input. */
static const char *
profiler_dtype (const char *t)
{
  static const struct { const char *torch, *abbr; } map[] = {
    { "c10::BFloat16", "bf16" }, { "c10::Half", "f16" }, { "float", "f32" },
    { "double", "f64" }, { "long int", "i64" }, { "int", "i32" }, { "bool", "b8" },
  };
  for (guint i = 0; i < G_N_ELEMENTS (map); i++)
    if (strcmp (t, map[i].torch) == 0)
      return map[i].abbr;
  return NULL;
}

static void
append_shape (GString *s, const char *dtype, const int64_t *dims, guint rank)
{
  g_string_append_printf (s, " %s[", dtype);
  for (guint d = 0; d < rank; d++)
    g_string_append_printf (s, "%s%" G_GINT64_FORMAT, d ? ", " : "", dims[d]);
  g_string_append_c (s, ']');
}

/* Operands of the aten matmuls: mm(a, b), bmm(a, b), addmm(bias, a, b), baddbmm(bias, a, b). */
static guint
n_operands (const char *op)
{
  return strcmp (op, "aten::addmm") == 0 || strcmp (op, "aten::baddbmm") == 0 ? 3 : 2;
}

static const char *
aten_matmul_op (const char *callee)
{
  static const char *const ops[] = { "mm", "addmm", "bmm", "baddbmm" };
  for (guint i = 0; i < G_N_ELEMENTS (ops); i++)
    {
      g_autofree char *c = g_strdup_printf ("torch.ops.aten.%s.default", ops[i]);
      if (strcmp (callee, c) == 0)
        return ops[i];
    }
  return NULL;
}

/* "aten::mm bf16[32, 64] bf16[64, 256] -> bf16[32, 256]" for each aten matmul statement of @t
 * (a graph as read), into @out; into @padded the same with the contraction dim K rounded up to
 * a multiple of 8, as Inductor's pad_mm pass (torch/_inductor/fx_passes/pad_mm.py) pads the
 * operands of a bf16/f16 matmul when its benchmark says the padded one is faster. */
static void
castscope_matmuls (const CsTrace *t, GPtrArray *out, GPtrArray *padded)
{
  for (guint i = 0; t != NULL && i < t->n_stmts; i++)
    {
      const CsStmt *s = t->stmts[i];
      const char *op = s->kind == CS_STMT_CALL && s->callee ? aten_matmul_op (s->callee) : NULL;
      g_autofree char *name = NULL;
      CsProxy *o;

      if (op == NULL)
        continue;
      name = g_strconcat ("aten::", op, NULL);
      o = cs_stmt_get_output (s);
      g_assert_nonnull (o);
      for (guint pad = 0; pad < 2; pad++)
        {
          GString *line = g_string_new (name);
          guint first = n_operands (name) - 2;     /* the first matrix operand */

          for (guint a = 0; a < n_operands (name); a++)
            {
              const CsValue *v = cs_stmt_get_arg (s, a, NULL);
              int64_t dims[CS_MAX_DIMS];

              g_assert_nonnull (v);
              g_assert_cmpint (v->kind, ==, CS_VALUE_PROXY);
              g_assert_cmpuint (v->u.proxy->rank, >=, a >= first ? 2 : 1);
              memcpy (dims, v->u.proxy->shape, sizeof (int64_t) * v->u.proxy->rank);
              if (pad && a == first)
                dims[v->u.proxy->rank - 1] = (dims[v->u.proxy->rank - 1] + 7) / 8 * 8;
              if (pad && a == first + 1)
                dims[v->u.proxy->rank - 2] = (dims[v->u.proxy->rank - 2] + 7) / 8 * 8;
              append_shape (line, cs_aten_dtype_abbr (v->u.proxy->dtype), dims, v->u.proxy->rank);
            }
          g_string_append (line, " ->");
          append_shape (line, cs_aten_dtype_abbr (o->dtype), o->shape, o->rank);
          g_ptr_array_add (pad ? padded : out, g_string_free (line, FALSE));
        }
    }
}

static guint
count_sdpa_stmts (const CsTrace *t)
{
  guint n = 0;
  for (guint i = 0; t != NULL && i < t->n_stmts; i++)
    n += t->stmts[i]->callee != NULL
         && strstr (t->stmts[i]->callee, "_scaled_dot_product_") != NULL;
  return n;
}

static gint
cmp_str (gconstpointer a, gconstpointer b)
{
  return strcmp (*(const char *const *) a, *(const char *const *) b);
}

#if CS_HAVE_JSON
/* The profiler's records of @path: matmul lines as castscope_matmuls() writes them, the sdpa
 * op count and the CUDA kernel count. */
static void
profiler_matmuls (const char *path, GPtrArray *out, guint *n_sdpa)
{
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(GError) error = NULL;
  JsonObject *root;
  JsonArray *ops;

  json_parser_load_from_file (parser, path, &error);
  g_assert_no_error (error);
  root = json_node_get_object (json_parser_get_root (parser));
  g_assert_cmpstr (json_object_get_string_member (root, "torch"), ==, "2.11.0+cu130");
  ops = json_object_get_array_member (root, "matmul_ops");
  *n_sdpa = 0;
  for (guint i = 0; i < json_array_get_length (ops); i++)
    {
      JsonObject *op = json_array_get_object_element (ops, i);
      const char *name = json_object_get_string_member (op, "name");
      JsonArray *dims = json_object_get_array_member (op, "input_dims");
      JsonArray *types = json_object_get_array_member (op, "input_types");
      g_autoptr(GString) line = NULL;
      g_autoptr(GPtrArray) tensors = g_ptr_array_new ();   /* input indices of tensors */

      if (strstr (name, "_scaled_dot_product_") != NULL)
        {
          (*n_sdpa)++;
          continue;
        }
      g_assert_cmpuint (json_array_get_length (dims), ==, json_array_get_length (types));
      for (guint k = 0; k < json_array_get_length (types); k++)
        if (profiler_dtype (json_array_get_string_element (types, k)) != NULL)
          g_ptr_array_add (tensors, GUINT_TO_POINTER (k));
      /* the operands, then the out= buffer of Inductor's extern kernel */
      g_assert_cmpuint (tensors->len, ==, n_operands (name) + 1);
      line = g_string_new (name);
      for (guint t = 0; t < tensors->len; t++)
        {
          guint k = GPOINTER_TO_UINT (tensors->pdata[t]);
          JsonArray *d = json_array_get_array_element (dims, k);
          int64_t shape[8];
          guint rank = json_array_get_length (d);

          g_assert_cmpuint (rank, <=, G_N_ELEMENTS (shape));
          for (guint r = 0; r < rank; r++)
            shape[r] = json_array_get_int_element (d, r);
          if (t == tensors->len - 1)
            g_string_append (line, " ->");
          append_shape (line, profiler_dtype (json_array_get_string_element (types, k)), shape,
                        rank);
        }
      g_ptr_array_add (out, g_string_free (g_steal_pointer (&line), FALSE));
    }
}
#endif

static void
test_profiles (void)
{
#if !CS_HAVE_JSON
  g_test_skip ("this build has no json-glib: the profiler records cannot be read");
#else
  g_autofree char *dir = g_build_filename (data_dir (), "aten", "profile", NULL);
  g_autoptr(GDir) d = NULL;
  g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(GError) error = NULL;
  const char *f;
  guint total_mm = 0, total_sdpa = 0, n_padded = 0;

  d = g_dir_open (dir, 0, &error);
  g_assert_no_error (error);
  while ((f = g_dir_read_name (d)) != NULL)
    if (g_str_has_suffix (f, ".json"))
      g_ptr_array_add (names, g_strndup (f, strlen (f) - 5));
  g_ptr_array_sort (names, cmp_str);
  /* the 16 samples generate.py profiled (8 cases x bf16 and autocast) */
  g_assert_cmpuint (names->len, ==, 16);

  for (guint i = 0; i < names->len; i++)
    {
      const char *name = names->pdata[i];
      g_autofree char *json = g_strconcat (dir, G_DIR_SEPARATOR_S, name, ".json", NULL);
      g_autofree char *txt_name = g_strconcat (name, ".txt", NULL);
      g_autofree char *txt = g_build_filename (data_dir (), "aten", txt_name, NULL);
      g_autofree char *code_name = g_strconcat (name, ".output_code", NULL);
      g_autofree char *code_path = g_build_filename (data_dir (), "aten", "inductor", code_name,
                                                     NULL);
      g_autoptr(GPtrArray) prof = g_ptr_array_new_with_free_func (g_free);
      g_autoptr(GPtrArray) cs = g_ptr_array_new_with_free_func (g_free);
      g_autoptr(GPtrArray) cs_padded = g_ptr_array_new_with_free_func (g_free);
      g_autoptr(CsTraceList) list = NULL;
      g_autoptr(CsPipeline) pl = NULL;
      g_autoptr(CsTraceStats) sf = NULL;
      g_autoptr(CsTraceStats) sb = NULL;
      g_autoptr(CsInductorCode) code = NULL;
      CsTrace *fw, *bw;
      guint n_sdpa = 0, n_extern_mm = 0;

      g_test_message ("%s", name);
      profiler_matmuls (json, prof, &n_sdpa);
      list = cs_parse_file (txt, &error);
      g_assert_no_error (error);
      fw = list->traces->pdata[0];
      bw = cs_aten_find_backward (list, 0);
      g_assert_nonnull (bw);
      pl = cs_pipeline_run_pair (fw, bw, NULL, &error);
      g_assert_no_error (error);
      sf = cs_stats_compute (cs_pipeline_get_forward (pl));
      sb = cs_stats_compute (cs_pipeline_get_backward (pl));

      /* matmul count: castscope's stats = the profiler's mm/addmm/bmm records */
      g_assert_cmpuint (sf->total.n_matmuls + sb->total.n_matmuls, ==, prof->len);
      /* = the extern matmul kernels Inductor launched */
      code = cs_inductor_parse_file (code_path, &error);
      g_assert_no_error (error);
      for (guint m = 0; m < code->graphs->len; m++)
        {
          const CsInductorGraph *g = code->graphs->pdata[m];
          for (guint k = 0; k < g->launches->len; k++)
            {
              const CsInductorLaunch *l = g->launches->pdata[k];
              n_extern_mm += g_str_has_prefix (l->callee, "extern_kernels.")
                             && g_str_has_suffix (l->callee, "mm");
            }
        }
      g_assert_cmpuint (n_extern_mm, ==, prof->len);
      /* sdpa: one statement per profiler op */
      g_assert_cmpuint (count_sdpa_stmts (fw) + count_sdpa_stmts (bw), ==, n_sdpa);

      /* operand and output dtypes and shapes, of the graphs as read (castscope's fusion pass
       * splits an addmm outside a region into its prims.matmul and a fused bias add): each
       * profiler record is a castscope matmul, exactly or with K padded by pad_mm */
      castscope_matmuls (fw, cs, cs_padded);
      castscope_matmuls (bw, cs, cs_padded);
      g_assert_cmpuint (cs->len, ==, prof->len);
      {
        g_autofree gboolean *used = g_new0 (gboolean, cs->len + 1);
        g_autofree gboolean *done = g_new0 (gboolean, prof->len + 1);
        for (guint pass = 0; pass < 2; pass++)
          for (guint k = 0; k < prof->len; k++)
            for (guint c = 0; c < cs->len && !done[k]; c++)
              if (!used[c] && strcmp (prof->pdata[k], (pass ? cs_padded : cs)->pdata[c]) == 0)
                {
                  used[c] = done[k] = TRUE;
                  n_padded += pass;
                }
        for (guint k = 0; k < prof->len; k++)
          {
            if (!done[k])
              g_test_message ("no castscope matmul for the profiler's %s",
                              (const char *) prof->pdata[k]);
            g_assert_true (done[k]);
          }
      }
      /* the stats' tensor-core matmuls: the profiler's matmuls whose two matrix operands are
       * bf16 or f16 */
      {
        guint n_tc = 0;
        for (guint k = 0; k < prof->len; k++)
          {
            g_auto(GStrv) w = g_strsplit (prof->pdata[k], " ", -1);
            guint a = strcmp (w[0], "aten::addmm") == 0 || strcmp (w[0], "aten::baddbmm") == 0;
            const char *m1 = NULL, *m2 = NULL;
            guint seen = 0;
            /* the words after the op: one "dtype[d0," per tensor, then its other dims */
            for (guint x = 1; w[x] && strcmp (w[x], "->") != 0; x++)
              if (strchr (w[x], '[') != NULL && seen++ >= a)
                {
                  if (m1 == NULL)
                    m1 = w[x];
                  else if (m2 == NULL)
                    m2 = w[x];
                }
            g_assert_nonnull (m2);
            n_tc += (g_str_has_prefix (m1, "bf16[") || g_str_has_prefix (m1, "f16["))
                    && (g_str_has_prefix (m2, "bf16[") || g_str_has_prefix (m2, "f16["));
          }
        g_assert_cmpuint (sf->total.n_tensor_core_matmuls + sb->total.n_tensor_core_matmuls, ==,
                          n_tc);
      }
      total_mm += prof->len;
      total_sdpa += n_sdpa;
    }
  /* the totals of the 16 records (read from the JSON files): 2 x (6 + 18 + 27 + 6 + 6 + 9 + 3)
   * matmuls (attention_softmax_autocast, gpt_block, llama_block, ln_mlp_residual, mlp_gelu,
   * rmsnorm_swiglu, seed_foo; attention_softmax_bf16 and cross_entropy have none) and the two
   * sdpa ops of attention_softmax_bf16 */
  g_assert_cmpuint (total_mm, ==, 6 + 2 * (18 + 27 + 6 + 6 + 9 + 3));
  g_assert_cmpuint (total_sdpa, ==, 2);
  /* one matmul ran padded: rmsnorm_swiglu_autocast's forward mm_2, [32, 172] @ [172, 64] in
   * the graph, [32, 176] @ [176, 64] in the profiler, its operands padded by the
   * constant_pad_nd_default and constant_pad_nd_default_1 nodes its output code names */
  g_assert_cmpuint (n_padded, ==, 1);
#endif
}

/* One hand-read record: mlp_gelu_bf16's profile (data/aten/profile/mlp_gelu_bf16.json) lists
 * 2 aten::addmm (the forward's two linears: bias [256], x [32, 64], w1^T [64, 256]; bias [64],
 * h [32, 256], w2^T [256, 64]) and 4 aten::mm (the backward), every operand c10::BFloat16. */
static void
test_mlp_gelu_record (void)
{
#if !CS_HAVE_JSON
  g_test_skip ("this build has no json-glib: the profiler records cannot be read");
#else
  g_autofree char *json = g_build_filename (data_dir (), "aten", "profile", "mlp_gelu_bf16.json",
                                            NULL);
  g_autoptr(GPtrArray) prof = g_ptr_array_new_with_free_func (g_free);
  guint n_sdpa = 0;

  profiler_matmuls (json, prof, &n_sdpa);
  g_assert_cmpuint (prof->len, ==, 6);
  g_assert_cmpuint (n_sdpa, ==, 0);
  g_assert_cmpstr (prof->pdata[0], ==,
                   "aten::addmm bf16[256] bf16[32, 64] bf16[64, 256] -> bf16[32, 256]");
  g_assert_cmpstr (prof->pdata[1], ==,
                   "aten::addmm bf16[64] bf16[32, 256] bf16[256, 64] -> bf16[32, 64]");
  g_assert_cmpstr (prof->pdata[2], ==, "aten::mm bf16[32, 64] bf16[64, 256] -> bf16[32, 256]");
#endif
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/core/aten-profile/mlp-gelu-record", test_mlp_gelu_record);
  g_test_add_func ("/core/aten-profile/samples", test_profiles);
  return g_test_run ();
}
