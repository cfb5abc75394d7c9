/* test-render-group.c: render/cs-group.c, the layers and modules of a trace.
 *
 * The expected values are worked out from the trace text itself, not from the code under test:
 * in Thunder's initial trace of the 8-block LLaMA (../shared/traces/thunder_llama_stack_initial.txt)
 * every block starts with its attention RMSNorm, whose first line carries the source comment
 * `# models.py:84: xf = x.float()`; each block has two such norms and the final norm is the
 * 17th.  So block N is the text from the (2N)-th to the (2N+2)-th of those comments (0-based),
 * its attention module the text up to the (2N+1)-th, its ffn_norm module the lines from there
 * to the line reading t_layers_N_ffn_norm_weight, and its feed_forward module the rest.  A
 * top-level statement is a line indented by two spaces that is not a comment, a `return`, a
 * `del` or a `prims.shape` (bookkeeping); its decomposition is printed as comments below it,
 * so `= prims.linear(` / `= prims.matmul(` / `= prims.convert_element_type(` count the leaf
 * prims of the block.
 */
#include "cs-config.h"

#include <string.h>

#include "cs-parse.h"
#include "cs-render.h"

static char *
shared_path (const char *name)
{
  const char *dir = g_getenv ("CS_SHARED_TRACES");
  char *path;

  if (dir == NULL)
    return NULL;
  path = g_build_filename (dir, name, NULL);
  if (!g_file_test (path, G_FILE_TEST_IS_REGULAR))
    g_clear_pointer (&path, g_free);
  return path;
}

static gboolean
is_stmt_line (const char *line)
{
  return g_str_has_prefix (line, "  ") && line[2] != ' ' && line[2] != '#' && line[2] != '\0'
         && !g_str_has_prefix (line + 2, "return") && !g_str_has_prefix (line + 2, "del ")
         && strstr (line, "= prims.shape(") == NULL;
}

static guint
count_in (char **lines, guint from, guint to, const char *needle)
{
  guint n = 0;

  for (guint i = from; i < to; i++)
    for (const char *p = strstr (lines[i], needle); p != NULL; p = strstr (p + 1, needle))
      n++;
  return n;
}

static guint
count_stmts (char **lines, guint from, guint to)
{
  guint n = 0;

  for (guint i = from; i < to; i++)
    if (is_stmt_line (lines[i]))
      n++;
  return n;
}

static void
test_llama_layers (void)
{
  g_autofree char *path = shared_path ("thunder_llama_stack_initial.txt");
  g_autofree char *text = NULL;
  g_auto(GStrv) lines = NULL;
  g_autoptr(CsTraceList) list = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(CsGrouping) gr = NULL;
  guint norms[32], n_norms = 0, n_lines;
  CsTrace *trace;

  if (path == NULL)
    {
      g_test_skip ("thunder_llama_stack_initial.txt not found");
      return;
    }
  g_assert_true (g_file_get_contents (path, &text, NULL, NULL));
  lines = g_strsplit (text, "\n", -1);
  n_lines = g_strv_length (lines);
  for (guint i = 0; i < n_lines && n_norms < G_N_ELEMENTS (norms); i++)
    if (g_str_has_prefix (lines[i], "  # models.py:84:"))
      norms[n_norms++] = i;
  g_assert_cmpuint (n_norms, ==, 17);

  list = cs_parse_file (path, &error);
  g_assert_no_error (error);
  trace = g_ptr_array_index (list->traces, 0);
  gr = cs_grouping_new (trace);
  g_assert_cmpuint (gr->n_layers, ==, 8);
  g_assert_cmpuint (gr->n_chunks, ==, 0);

  for (guint N = 0; N < 8; N++)
    {
      g_autofree char *name = g_strdup_printf ("layers.%u", N);
      g_autofree char *attn = g_strdup_printf ("layers.%u.attention", N);
      g_autofree char *ffn_norm = g_strdup_printf ("layers.%u.ffn_norm", N);
      g_autofree char *ff = g_strdup_printf ("layers.%u.feed_forward", N);
      g_autofree char *ffn_w = g_strdup_printf ("t_layers_%u_ffn_norm_weight", N);
      guint a = norms[2 * N], b = norms[2 * N + 1], e = norms[2 * N + 2], w = b;
      gint g = cs_grouping_find (gr, name);
      const CsGroup *L;

      while (w < e && !(is_stmt_line (lines[w]) && strstr (lines[w], ffn_w) != NULL))
        w++;
      g_assert_cmpuint (w, <, e);
      g_assert_cmpint (g, >=, 0);
      L = &gr->groups[g];
      g_test_message ("%s: %u statements (text: %u)", name, L->n_stmts, count_stmts (lines, a, e));
      g_assert_cmpint (L->kind, ==, CS_GROUP_LAYER);
      g_assert_cmpuint (L->n_stmts, ==, count_stmts (lines, a, e));
      g_assert_cmpuint (L->summary.n_matmuls, ==,
                        count_in (lines, a, e, "= prims.linear(") + count_in (lines, a, e, "= prims.matmul("));
      /* every operand is bf16 in the initial trace: all of them on tensor cores */
      g_assert_cmpuint (L->summary.n_tensor_core_matmuls, ==, L->summary.n_matmuls);
      g_assert_cmpuint (L->summary.n_matmuls, ==, 9);   /* 7 linears + q.k^T and p.v */
      g_assert_cmpuint (L->summary.n_casts, ==, count_in (lines, a, e, "= prims.convert_element_type("));
      g_assert_cmpuint (L->summary.n_upcasts, ==, count_in (lines, a, e, ", dtypes.float32)  #"));
      g_assert_cmpuint (L->summary.n_downcasts, ==, count_in (lines, a, e, ", dtypes.bfloat16)  #"));
      g_assert_cmpfloat (L->summary.est_ms, >, 0);
      /* modules */
      g_assert_cmpint (cs_grouping_find (gr, attn), >, g);
      g_assert_cmpint (gr->groups[cs_grouping_find (gr, attn)].parent, ==, g);
      g_assert_cmpuint (gr->groups[cs_grouping_find (gr, attn)].n_stmts, ==, count_stmts (lines, a, b));
      g_assert_cmpuint (gr->groups[cs_grouping_find (gr, ffn_norm)].n_stmts, ==, count_stmts (lines, b, w + 1));
      g_assert_cmpuint (gr->groups[cs_grouping_find (gr, ff)].n_stmts, ==, count_stmts (lines, w + 1, e));
      g_assert_cmpstr (gr->groups[cs_grouping_find (gr, ff)].label, ==, "feed_forward");
      /* identical blocks: every later one repeats layers.0 */
      g_assert_cmpint (L->repeat_of, ==, N == 0 ? -1 : cs_grouping_find (gr, "layers.0"));
      g_assert_cmpuint (L->n_same, ==, 8);
    }
  /* the head (cos, sin, embedding) and the tail (final norm, output, loss) stay at the top */
  for (guint i = 0; i < trace->n_stmts; i++)
    if (trace->stmts[i]->kind == CS_STMT_CALL
        && (g_strcmp0 (trace->stmts[i]->callee, "ltorch.embedding") == 0
            || g_strcmp0 (trace->stmts[i]->callee, "ltorch.cross_entropy") == 0))
      g_assert_cmpint (gr->stmt_group[i], ==, -1);
  {
    g_autofree char *s = cs_group_summary_text (&gr->groups[0]);
    g_test_message ("layers.0: %s", s);
    g_assert_nonnull (strstr (s, "9/9 TC"));
  }
}

/* Thunder's own final traces (fused regions, the backward in reverse order): 8 layers each. */
static void
test_llama_final (void)
{
  const char *names[] = { "thunder_llama_stack_final_fwd.txt", "thunder_llama_stack_final_bwd.txt" };

  for (gsize k = 0; k < G_N_ELEMENTS (names); k++)
    {
      g_autofree char *path = shared_path (names[k]);
      g_autoptr(CsTraceList) list = NULL;
      g_autoptr(GError) error = NULL;
      g_autoptr(CsGrouping) gr = NULL;
      guint in_layers = 0, total = 0;
      CsTrace *trace;

      if (path == NULL)
        {
          g_test_skip ("LLaMA final traces not found");
          return;
        }
      list = cs_parse_file (path, &error);
      g_assert_no_error (error);
      trace = g_ptr_array_index (list->traces, 0);
      gr = cs_grouping_new (trace);
      for (guint g = 0; g < gr->n_groups; g++)
        if (gr->groups[g].kind == CS_GROUP_LAYER)
          {
            g_test_message ("%s %s: %u statements, repeat of %d", names[k], gr->groups[g].name,
                            gr->groups[g].n_stmts, gr->groups[g].repeat_of);
            in_layers += gr->groups[g].n_stmts;
          }
      for (guint i = 0; i < trace->n_stmts; i++)
        if (trace->stmts[i]->kind == CS_STMT_CALL)
          total++;
      g_assert_cmpuint (gr->n_layers, ==, 8);
      /* most of the model lies in its blocks */
      g_assert_cmpuint (in_layers, >, total / 2);
      for (guint L = 0; L < 8; L++)
        {
          g_autofree char *name = g_strdup_printf ("layers.%u", L);
          g_assert_cmpint (cs_grouping_find (gr, name), >=, 0);
        }
    }
}

/* A trace without parameters of more than CS_GROUP_CHUNK_MIN statements is cut in chunks of
 * CS_GROUP_CHUNK_SIZE: 1,001 statements -> 250, 250, 250, 250, 1. */
static void
test_chunks (void)
{
  GString *s = g_string_new ("def computation(x):\n  # x: \"cuda:0 f32[4]\"\n");
  g_autoptr(CsTrace) t = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(CsGrouping) gr = NULL;
  g_autofree char *text = NULL;

  g_string_append (s, "  t0 = prims.neg(x)  # t0: \"cuda:0 f32[4]\"\n");
  for (guint i = 1; i <= 1000; i++)
    g_string_append_printf (s, "  t%u = prims.neg(t%u)  # t%u: \"cuda:0 f32[4]\"\n", i, i - 1, i);
  g_string_append (s, "  return t1000\n");
  text = g_string_free (s, FALSE);
  t = cs_parse_trace (text, "chain", &error);
  g_assert_no_error (error);
  gr = cs_grouping_new (t);
  g_assert_cmpuint (gr->n_layers, ==, 0);
  g_assert_cmpuint (gr->n_chunks, ==, 5);
  g_assert_cmpuint (gr->groups[0].n_stmts, ==, 250);
  g_assert_cmpuint (gr->groups[4].n_stmts, ==, 1);
  g_assert_cmpstr (gr->groups[1].name, ==, "statements 251-500");
}

/* 20,001 statements: 81 chunks of 250 (the last one of 1), above CS_GROUP_MAX_TOP, so nested
 * 10 to an outer chunk of 2,500: 9 outer chunks (8 full, the last holding the single
 * statement's chunk), 90 groups in all. */
static void
test_nested_chunks (void)
{
  GString *s = g_string_new ("def computation(x):\n  # x: \"cuda:0 f32[4]\"\n");
  g_autoptr(CsTrace) t = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(CsGrouping) gr = NULL;
  g_autofree char *text = NULL;
  guint outer = 0;

  g_string_append (s, "  t0 = prims.neg(x)  # t0: \"cuda:0 f32[4]\"\n");
  for (guint i = 1; i <= 20000; i++)
    g_string_append_printf (s, "  t%u = prims.neg(t%u)  # t%u: \"cuda:0 f32[4]\"\n", i, i - 1, i);
  g_string_append (s, "  return t20000\n");
  text = g_string_free (s, FALSE);
  t = cs_parse_trace (text, "chain", &error);
  g_assert_no_error (error);
  gr = cs_grouping_new (t);
  g_assert_cmpuint (gr->n_chunks, ==, 90);
  for (guint g = 0; g < gr->n_groups; g++)
    if (gr->groups[g].parent < 0)
      {
        outer++;
        g_assert_cmpuint (gr->groups[g].n_stmts, ==, outer < 9 ? 2500 : 1);
      }
    else
      g_assert_cmpuint (gr->groups[gr->groups[g].parent].n_stmts, >=, gr->groups[g].n_stmts);
  g_assert_cmpuint (outer, ==, 9);
  g_assert_cmpstr (gr->groups[0].name, ==, "statements 1-2500");
  g_assert_cmpstr (gr->groups[1].name, ==, "statements 1-250");
  g_assert_cmpint (gr->groups[1].parent, ==, 0);
}

/* A small trace (the GELU MLP) gets no groups: it is drawn as before. */
static void
test_small (void)
{
  g_autofree char *path = g_build_filename (g_getenv ("CS_DATA_DIR"), "mlp_gelu.txt", NULL);
  g_autoptr(CsTraceList) list = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(CsGrouping) gr = NULL;

  list = cs_parse_file (path, &error);
  g_assert_no_error (error);
  gr = cs_grouping_new (g_ptr_array_index (list->traces, 0));
  g_assert_cmpuint (gr->n_groups, ==, 0);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/render/group/llama-layers", test_llama_layers);
  g_test_add_func ("/render/group/llama-final", test_llama_final);
  g_test_add_func ("/render/group/chunks", test_chunks);
  g_test_add_func ("/render/group/nested-chunks", test_nested_chunks);
  g_test_add_func ("/render/group/small", test_small);
  return g_test_run ();
}
