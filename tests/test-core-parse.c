/* test-core-parse.c: the Thunder trace parser and printer on real traces.
 *
 * Every file of $CS_SHARED_TRACES (real Thunder output, see its first line) and of
 * $CS_DATA_DIR must load, print back byte for byte (except the files listed in
 * inexact_files[] with the reason) and parse again into an identical trace.  Targeted checks
 * use values counted by hand or with grep on the files (the command is given next to each
 * number).
 */
#include "cs-config.h"

#include "cs-compare.h"
#include "cs-ops.h"
#include "cs-parse.h"
#include "cs-print.h"

#include <math.h>
#include <string.h>

/* Files whose printed form cannot equal the input byte for byte, and why. */
static const struct { const char *file; const char *why; } inexact_files[] = {
  { "nb_llama_bf16_augmented_forward_excerpt.txt",
    "the stored excerpt has no newline after its last line; print(trace) always ends with one" },
};

static const char *
shared_dir (void)
{
  return g_getenv ("CS_SHARED_TRACES");
}

static char *
shared_path (const char *file)
{
  const char *dir = shared_dir ();
  if (dir == NULL || !g_file_test (dir, G_FILE_TEST_IS_DIR))
    return NULL;
  return g_build_filename (dir, file, NULL);
}

static const char *
inexact_reason (const char *base)
{
  for (gsize i = 0; i < G_N_ELEMENTS (inexact_files); i++)
    if (strcmp (inexact_files[i].file, base) == 0)
      return inexact_files[i].why;
  return NULL;
}

/* Load, print, compare text, re-parse, compare structure. */
static void
check_round_trip (const char *path)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTraceList) list = NULL, again = NULL;
  g_autofree char *text = NULL, *printed = NULL, *base = g_path_get_basename (path);
  gsize len = 0;
  const char *why;

  g_assert_true (g_file_get_contents (path, &text, &len, NULL));
  list = cs_parse_text (text, len, path, &error);
  if (list == NULL)
    g_error ("%s does not parse: %s", path, error->message);
  g_assert_cmpuint (list->traces->len, >=, 1);

  printed = cs_print_trace_list (list, CS_PRINT_DEFAULT);
  why = inexact_reason (base);
  if (why == NULL && strstr (text, "] [__aot_graphs] ") != NULL)
    {
      /* A raw TORCH_LOGS=aot_graphs log (data/aten/NAME_bf16.txt and NAME_autocast.txt, as PyTorch
       * wrote them): the printer drops the glog prefixes, so the printed text is not the
       * input; it must be a fixed point instead (printing what it parses gives it back). */
      g_autoptr(CsTraceList) norm = cs_parse_text (printed, strlen (printed), "printed", &error);
      g_autofree char *twice = NULL;

      if (norm == NULL)
        g_error ("%s: printed text does not parse: %s", base, error->message);
      twice = cs_print_trace_list (norm, CS_PRINT_DEFAULT);
      g_test_message ("%s: a raw log; its glog prefixes are not printed back", base);
      g_assert_cmpstr (twice, ==, printed);
    }
  else if (why == NULL)
    {
      if (strcmp (printed, text) != 0)
        {
          /* point at the first differing line */
          const char *a = text, *b = printed;
          guint line = 1;
          while (*a && *a == *b)
            {
              if (*a == '\n')
                line++;
              a++;
              b++;
            }
          g_error ("%s: printed text differs from the input at line %u:\n  input:   %.80s\n  printed: %.80s",
                   base, line, a, b);
        }
    }
  else
    {
      /* the difference must be exactly the documented one */
      g_autofree char *with_nl = g_strconcat (text, "\n", NULL);
      g_test_message ("%s: not byte for byte: %s", base, why);
      g_assert_cmpstr (printed, ==, with_nl);
    }

  again = cs_parse_text (printed, strlen (printed), "printed", &error);
  if (again == NULL)
    g_error ("%s: printed text does not parse: %s", base, error->message);
  g_assert_cmpuint (again->traces->len, ==, list->traces->len);
  for (guint i = 0; i < list->traces->len; i++)
    {
      g_autoptr(GString) why_not = g_string_new (NULL);
      if (!cs_trace_equal (g_ptr_array_index (list->traces, i), g_ptr_array_index (again->traces, i),
                           why_not))
        g_error ("%s: trace %u differs after print + parse: %s", base, i, why_not->str);
    }
}

static guint
walk_dir (const char *dir, gboolean only_trace_ext)
{
  g_autoptr(GDir) d = g_dir_open (dir, 0, NULL);
  g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func (g_free);
  const char *name;

  if (d == NULL)
    return 0;
  guint n = 0;

  while ((name = g_dir_read_name (d)) != NULL)
    g_ptr_array_add (names, g_strdup (name));
  g_ptr_array_sort (names, (GCompareFunc) g_strcmp0);
  for (guint i = 0; i < names->len; i++)
    {
      const char *base = g_ptr_array_index (names, i);
      g_autofree char *path = g_build_filename (dir, base, NULL);
      if (g_file_test (path, G_FILE_TEST_IS_DIR))
        n += walk_dir (path, only_trace_ext); /* data/bench/ ... */
      else if (g_file_test (path, G_FILE_TEST_IS_REGULAR)
               && (!only_trace_ext || g_str_has_suffix (base, ".txt") || g_str_has_suffix (base, ".trace")))
        {
          check_round_trip (path);
          n++;
        }
    }
  return n;
}

static void
test_shared_round_trip (void)
{
  const char *dir = shared_dir ();
  guint n;

  if (dir == NULL || !g_file_test (dir, G_FILE_TEST_IS_DIR))
    {
      g_test_skip ("CS_SHARED_TRACES is not a folder");
      return;
    }
  n = walk_dir (dir, FALSE);
  /* 39 files when this test was written (ls ../shared/traces | wc -l) */
  g_assert_cmpuint (n, >=, 39);
}

static void
test_data_round_trip (void)
{
  const char *dir = g_getenv ("CS_DATA_DIR");

  if (dir == NULL || !g_file_test (dir, G_FILE_TEST_IS_DIR))
    {
      g_test_skip ("CS_DATA_DIR is not a folder");
      return;
    }
  g_test_message ("%u data files checked", walk_dir (dir, TRUE));
}

static CsTraceList *
load_shared (const char *file)
{
  g_autofree char *path = shared_path (file);
  g_autoptr(GError) error = NULL;
  CsTraceList *list;

  if (path == NULL)
    return NULL;
  list = cs_parse_file (path, &error);
  g_assert_no_error (error);
  return list;
}

static guint
count_calls (CsStmt **stmts, guint n, const char *callee, gboolean recurse)
{
  guint k = 0;
  for (guint i = 0; i < n; i++)
    {
      if (stmts[i]->kind == CS_STMT_CALL && strcmp (stmts[i]->callee, callee) == 0)
        k++;
      if (recurse)
        k += count_calls (stmts[i]->subs, stmts[i]->n_subs, callee, TRUE);
    }
  return k;
}

static guint
count_kind (const CsTrace *t, CsStmtKind kind)
{
  guint k = 0;
  for (guint i = 0; i < t->n_stmts; i++)
    k += t->stmts[i]->kind == kind;
  return k;
}

static CsStmt *
find_call (const CsTrace *t, const char *callee)
{
  for (guint i = 0; i < t->n_stmts; i++)
    if (t->stmts[i]->kind == CS_STMT_CALL && strcmp (t->stmts[i]->callee, callee) == 0)
      return t->stmts[i];
  return NULL;
}

static void
assert_tensor (CsTrace *t, const char *name, CsDtype dtype, guint rank, const int64_t *shape)
{
  CsProxy *p = cs_trace_lookup_proxy (t, name);
  g_assert_nonnull (p);
  g_assert_cmpint (p->kind, ==, CS_PROXY_TENSOR);
  g_assert_true (p->typed);
  g_assert_cmpint (p->dtype, ==, dtype);
  g_assert_cmpuint (p->rank, ==, rank);
  for (guint i = 0; i < rank; i++)
    g_assert_cmpint (p->shape[i], ==, shape[i]);
}

static void
test_seed_bwd (void)
{
  g_autoptr(CsTraceList) list = load_shared ("seed_foo_bwd.txt");
  CsTrace *t;
  CsStmt *st, *sum;
  static const int64_t s8_16[] = { 8, 16 };

  if (list == NULL)
    {
      g_test_skip ("no shared traces");
      return;
    }
  g_assert_cmpuint (list->traces->len, ==, 1);
  t = g_ptr_array_index (list->traces, 0);
  g_assert_cmpstr (t->name, ==, "backward_fn");
  g_assert_cmpuint (t->n_params, ==, 2);
  g_assert_cmpstr (t->params[0].name, ==, "saved_for_backward");
  g_assert_cmpstr (t->params[1].name, ==, "cotangents");
  g_assert_cmpstr (t->provenance, ==, "Backward pass");
  g_assert_cmpuint (t->n_imports, ==, 6);
  g_assert_cmpuint (t->n_decorators, ==, 2);
  g_assert_cmpstr (t->decorators[1], ==, "@no_autocast()");
  g_assert_cmpuint (t->n_leading, ==, 1);
  g_assert_true (g_str_has_prefix (t->leading[0], "# source: the seed issue"));

  /* C0 unpacks to t4, w (line 17 of the file) */
  st = NULL;
  for (guint i = 0; i < t->n_stmts; i++)
    if (t->stmts[i]->kind == CS_STMT_UNPACK && t->stmts[i]->source
        && strcmp (t->stmts[i]->source->name, "C0") == 0)
      st = t->stmts[i];
  g_assert_nonnull (st);
  g_assert_cmpuint (st->line, ==, 17);
  g_assert_cmpuint (st->n_targets, ==, 2);
  g_assert_cmpint (st->targets[0]->kind, ==, CS_VALUE_PROXY);
  g_assert_cmpstr (st->targets[0]->u.proxy->name, ==, "t4");
  g_assert_cmpstr (st->targets[1]->u.proxy->name, ==, "w");
  /* `# C1 (empty sequence)` is the empty unpack of C1 */
  g_assert_cmpint (t->stmts[5]->kind, ==, CS_STMT_UNPACK);
  g_assert_cmpuint (t->stmts[5]->n_targets, ==, 0);
  g_assert_cmpstr (t->stmts[5]->source->name, ==, "C1");

  /* t14 is a bf16 [8, 16] tensor on cuda:0 */
  assert_tensor (t, "t14", CS_DTYPE_BF16, 2, s8_16);
  g_assert_cmpint (cs_trace_lookup_proxy (t, "t14")->device.type, ==, CS_DEVICE_CUDA);
  g_assert_cmpint (cs_trace_lookup_proxy (t, "saved_for_backward")->kind, ==, CS_PROXY_COLLECTION);

  /* ltorch.sum: 3 subsymbols, the first with 1 nested subsymbol */
  sum = find_call (t, "ltorch.sum");
  g_assert_nonnull (sum);
  g_assert_cmpint (sum->op->id, ==, cs_op_lookup ("ltorch.sum")->id);
  g_assert_cmpuint (sum->n_subs, ==, 3);
  g_assert_cmpuint (sum->subs[0]->n_subs, ==, 1);
  g_assert_cmpstr (sum->subs[0]->callee, ==, "ltorch.to");
  g_assert_cmpstr (sum->subs[0]->subs[0]->callee, ==, "prims.convert_element_type");
  g_assert_cmpuint (sum->subs[1]->n_subs, ==, 0);
  g_assert_cmpuint (sum->subs[2]->n_subs, ==, 1);
  /* its arguments: t18, (0,), False, dtype=None */
  g_assert_cmpuint (sum->n_args, ==, 4);
  g_assert_cmpint (sum->args[1].value->kind, ==, CS_VALUE_TUPLE);
  g_assert_cmpuint (sum->args[1].value->u.seq.n, ==, 1);
  g_assert_cmpint (sum->args[1].value->u.seq.items[0]->u.i, ==, 0);
  g_assert_cmpint (sum->args[2].value->kind, ==, CS_VALUE_BOOL);
  g_assert_cmpstr (sum->args[3].name, ==, "dtype");
  g_assert_cmpint (sum->args[3].value->kind, ==, CS_VALUE_NONE);
  /* the to's dtype argument is a DTYPE value */
  g_assert_cmpint (sum->subs[0]->args[1].value->kind, ==, CS_VALUE_DTYPE);
  g_assert_cmpint (sum->subs[0]->args[1].value->u.dtype.dtype, ==, CS_DTYPE_F32);

  /* return (t19, t22, t16): a 3-tuple of proxies */
  st = cs_trace_get_return (t);
  g_assert_nonnull (st);
  g_assert_cmpint (st->value->kind, ==, CS_VALUE_TUPLE);
  g_assert_cmpuint (st->value->u.seq.n, ==, 3);
  g_assert_cmpint (st->value->u.seq.items[2]->kind, ==, CS_VALUE_PROXY);
  g_assert_cmpstr (st->value->u.seq.items[2]->u.proxy->name, ==, "t16");
  g_assert_false (st->return_bare);
}

static void
test_list_of_traces (void)
{
  g_autoptr(CsTraceList) list = load_shared ("nb_backward_traces_list.txt");
  CsTrace *t;

  if (list == NULL)
    {
      g_test_skip ("no shared traces");
      return;
    }
  g_assert_true (list->is_list);
  g_assert_cmpuint (list->traces->len, ==, 4);
  g_assert_cmpstr (((CsTrace *) g_ptr_array_index (list->traces, 0))->provenance, ==, "Backward pass");
  t = g_ptr_array_index (list->traces, 3);
  g_assert_cmpstr (t->provenance, ==, "Delete Last Used (took 0 milliseconds)");
  /* old unpack style, one element per line */
  g_assert_cmpint (t->stmts[2]->kind, ==, CS_STMT_UNPACK);
  g_assert_cmpint (t->stmts[2]->unpack_style, ==, CS_UNPACK_ONE_PER_LINE);
  g_assert_cmpuint (t->stmts[2]->n_targets, ==, 2);
  /* trailing space after the input annotation is kept verbatim */
  g_assert_cmpstr (t->stmts[0]->text, ==, "saved_for_backward: \"Collection\" ");
  /* the last trace: 5 del statements, 4 clear_collection calls (grep -c '^   del ' file) */
  g_assert_cmpuint (count_kind (t, CS_STMT_DEL), ==, 5);
  g_assert_cmpuint (count_calls (t->stmts, t->n_stmts, "clear_collection", FALSE), ==, 4);
  g_assert_cmpint (cs_trace_get_return (t)->value->kind, ==, CS_VALUE_TUPLE);
}

static void
test_concatenated (void)
{
  g_autoptr(CsTraceList) list = load_shared ("docs_inspecting_traces_add_mul.txt");
  CsTrace *a, *b;
  CsStmt *fusion;

  if (list == NULL)
    {
      g_test_skip ("no shared traces");
      return;
    }
  g_assert_false (list->is_list);
  g_assert_cmpuint (list->traces->len, ==, 2);
  a = g_ptr_array_index (list->traces, 0);
  b = g_ptr_array_index (list->traces, 1);
  g_assert_null (a->provenance);
  g_assert_cmpstr (b->provenance, ==, "Delete Last Used (took 0 milliseconds)");
  /* untyped annotations `# t0` and name-only type comments `# t2` */
  g_assert_cmpint (a->stmts[0]->comment_kind, ==, CS_COMMENT_INPUT);
  g_assert_cmpstr (a->stmts[0]->annotated->name, ==, "t0");
  g_assert_false (a->stmts[0]->annotated->typed);
  g_assert_cmpint (a->stmts[2]->type_comment, ==, CS_TYPECOMMENT_NAME);
  /* alpha=None keyword */
  g_assert_cmpstr (a->stmts[2]->args[2].name, ==, "alpha");
  fusion = find_call (b, "nvFusion0");
  g_assert_nonnull (fusion);
  g_assert_true (cs_op_is_fusion (fusion->op));
  g_assert_cmpint (fusion->out->kind, ==, CS_VALUE_LIST);
  g_assert_cmpuint (fusion->out->u.seq.n, ==, 2);
  g_assert_cmpuint (fusion->n_subs, ==, 2);
  g_assert_cmpstr (fusion->subs[1]->callee, ==, "prims.mul");
  /* return ((t2, t5), ()) */
  {
    CsValue *v = cs_trace_get_return (b)->value;
    g_assert_cmpint (v->kind, ==, CS_VALUE_TUPLE);
    g_assert_cmpuint (v->u.seq.n, ==, 2);
    g_assert_cmpint (v->u.seq.items[1]->kind, ==, CS_VALUE_TUPLE);
    g_assert_cmpuint (v->u.seq.items[1]->u.seq.n, ==, 0);
  }
}

static void
test_forward_return_pair (void)
{
  g_autoptr(CsTraceList) list = load_shared ("thunder_a_seed_matmul_final_fwd.txt");
  CsTrace *t;
  CsStmt *ret;
  CsValue *dict, *saved;

  if (list == NULL)
    {
      g_test_skip ("no shared traces");
      return;
    }
  t = g_ptr_array_index (list->traces, 0);
  ret = cs_trace_get_return (t);
  g_assert_true (ret->return_bare);
  g_assert_cmpuint (ret->value->u.seq.n, ==, 2);
  dict = ret->value->u.seq.items[0];
  saved = ret->value->u.seq.items[1];
  g_assert_cmpint (dict->kind, ==, CS_VALUE_DICT);
  g_assert_cmpuint (dict->u.seq.n, ==, 6);
  g_assert_cmpstr (dict->u.seq.items[0]->u.s, ==, "output");
  g_assert_cmpstr (dict->u.seq.items[4]->u.s, ==, "flat_output");
  /* ((w, t59), ()) */
  g_assert_cmpint (saved->kind, ==, CS_VALUE_TUPLE);
  g_assert_cmpuint (saved->u.seq.items[0]->u.seq.n, ==, 2);
  g_assert_cmpstr (saved->u.seq.items[0]->u.seq.items[1]->u.proxy->name, ==, "t59");
  /* source-location comments with a tab: 5 of them (grep -c 'fns.py:7:' file) */
  {
    guint n = 0;
    for (guint i = 0; i < t->n_stmts; i++)
      if (t->stmts[i]->kind == CS_STMT_COMMENT && t->stmts[i]->comment_kind == CS_COMMENT_SRCLOC)
        {
          n++;
          g_assert_cmpstr (t->stmts[i]->text, ==, "fns.py:7: \t    return torch.matmul(a + b, w)");
        }
    g_assert_cmpuint (n, ==, 5);
    g_assert_cmpuint (count_kind (t, CS_STMT_BLANK), ==, 5);
  }
  /* Tensor.to(a, torch.float32, copy=True): torch.float32 is a context NAME */
  {
    CsStmt *to = find_call (t, "Tensor.to");
    g_assert_nonnull (to);
    g_assert_cmpint (to->args[1].value->kind, ==, CS_VALUE_NAME);
    g_assert_cmpstr (to->args[1].value->u.s, ==, "torch.float32");
    g_assert_cmpint (to->args[0].value->kind, ==, CS_VALUE_PROXY);
  }
}

static void
test_llama (void)
{
  g_autoptr(CsTraceList) fwd = load_shared ("thunder_llama_stack_final_fwd.txt");
  g_autoptr(CsTraceList) bwd = load_shared ("thunder_llama_stack_final_bwd.txt");
  CsTrace *f, *b;

  if (fwd == NULL)
    {
      g_test_skip ("no shared traces");
      return;
    }
  f = g_ptr_array_index (fwd->traces, 0);
  b = g_ptr_array_index (bwd->traces, 0);
  /* grep -c '^  t[0-9]* = torch.nn.functional.linear(' thunder_llama_stack_final_fwd.txt -> 57 */
  g_assert_cmpuint (count_calls (f->stmts, f->n_stmts, "torch.nn.functional.linear", FALSE), ==, 57);
  /* grep -c '^  del ' thunder_llama_stack_final_fwd.txt -> 714 */
  g_assert_cmpuint (count_kind (f, CS_STMT_DEL), ==, 714);
  /* no nvFusion in a torch-executor trace (grep -c nvFusion -> 0) */
  g_assert_cmpuint (count_calls (f->stmts, f->n_stmts, "nvFusion0", TRUE), ==, 0);
  /* grep -c '^  t[0-9]* = torch.matmul(' thunder_llama_stack_final_bwd.txt -> 114 */
  g_assert_cmpuint (count_calls (b->stmts, b->n_stmts, "torch.matmul", FALSE), ==, 114);
  g_assert_cmpstr (b->name, ==, "backward_fn");
  {
    g_autoptr(CsTraceList) init = load_shared ("thunder_llama_stack_initial.txt");
    CsTrace *i = g_ptr_array_index (init->traces, 0);
    guint n_tuple_targets = 0;
    /* grep -c '^  (_, _, _, _) = prims.shape(\|^  (_, _, _) = prims.shape(' -> 17 */
    g_assert_cmpuint (count_calls (i->stmts, i->n_stmts, "prims.shape", FALSE), ==, 17);
    for (guint k = 0; k < i->n_stmts; k++)
      if (i->stmts[k]->kind == CS_STMT_CALL && strcmp (i->stmts[k]->callee, "prims.shape") == 0)
        {
          g_assert_cmpint (i->stmts[k]->out->kind, ==, CS_VALUE_TUPLE);
          g_assert_cmpint (i->stmts[k]->out->u.seq.items[0]->kind, ==, CS_VALUE_UNDERSCORE);
          g_assert_cmpint (i->stmts[k]->type_comment, ==, CS_TYPECOMMENT_NONE);
          n_tuple_targets++;
        }
    g_assert_cmpuint (n_tuple_targets, ==, 17);
  }
}

static void
test_symbolic_dims (void)
{
  static const char text[] =
    "def computation(a, i0):\n"
    "  # a: \"cuda:0 f32[[IntegerProxy name=i0, value=1, static=CONSTRAINT.CONSTRAINABLE], 4]\"\n"
    "  # i0: \"int 1\"\n"
    "  (i1, i2) = prims.shape(a)\n"
    "  t0 = prims.mul(a, 2.0)  # t0: \"cuda:0 f32[[IntegerProxy name=i0, value=1, static=CONSTRAINT.CONSTRAINABLE], 4]\"\n"
    "  return t0\n";
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTrace) t = cs_parse_trace (text, "sym", &error);
  g_autofree char *printed = NULL;
  CsProxy *a, *i0;

  g_assert_no_error (error);
  a = cs_trace_lookup_proxy (t, "a");
  g_assert_cmpuint (a->rank, ==, 2);
  g_assert_cmpint (a->shape[0], ==, -1);
  g_assert_cmpint (a->shape[1], ==, 4);
  g_assert_cmpstr (a->type_raw, ==,
                   "cuda:0 f32[[IntegerProxy name=i0, value=1, static=CONSTRAINT.CONSTRAINABLE], 4]");
  i0 = cs_trace_lookup_proxy (t, "i0");
  g_assert_cmpint (i0->kind, ==, CS_PROXY_NUMBER);
  g_assert_true (i0->has_value);
  g_assert_cmpint (i0->value->u.i, ==, 1);
  g_assert_cmpint (cs_trace_lookup_proxy (t, "i1")->kind, ==, CS_PROXY_OTHER);
  printed = cs_print_trace (t, CS_PRINT_DEFAULT);
  g_assert_cmpstr (printed, ==, text);
}

static void
test_values (void)
{
  static const char text[] =
    "def computation(x):\n"
    "  t1 = prims.where(x, 1e-05, -float('inf'))  # t1: \"cpu f32[]\"\n"
    "  t2 = prims.convert_element_type(1, float)  # t2: \"cpu f32[]\"\n"
    "  t3 = ltorch.getitem(x, (..., slice(None,-1,None)))  # t3: \"meta b8[2, 3]\"\n"
    "  t4 = prims.uniform((8, 10), 0.0, 1.0, device=devices.Device(\"cuda:0\"), dtype=dtypes.float32_)  # t4: \"cuda:1 f32[8, 10]\"\n"
    "  t5 = foo(x, memory_format=_torch_memory_format_0, s='it\\'s', n=-100, f=4096.0, g=0.08838834764831843)  # t5: \"cpu i64[]\"\n"
    "  (t6, (_, t7)) = unsloth_apply_rope_forward(x, t5)\n"
    "  [t8] = nvFusion0(t6, t7)\n"
    "    # _ = prims.convert_element_type(1, float)\n"
    "    # t8 = prims.add(t6, t7)  # t8: \"cpu f32[]\"\n"
    "  return {'output': t5, 'flat_args': [x]}, ((t1,), (True, 1e-05))\n";
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTrace) t = cs_parse_trace (text, "values", &error);
  g_autofree char *printed = NULL;
  CsStmt *s;

  g_assert_no_error (error);
  s = t->stmts[0];
  g_assert_cmpint (s->args[1].value->kind, ==, CS_VALUE_FLOAT);
  g_assert_cmpfloat (s->args[1].value->u.f, ==, 1e-05);
  g_assert_cmpstr (s->args[1].value->raw, ==, "1e-05"); /* literal text kept */
  g_assert_cmpint (s->args[2].value->kind, ==, CS_VALUE_FLOAT);
  g_assert_true (isinf (s->args[2].value->u.f) && s->args[2].value->u.f < 0);
  s = t->stmts[1];
  g_assert_cmpint (s->args[1].value->kind, ==, CS_VALUE_DTYPE);
  g_assert_cmpint (s->args[1].value->u.dtype.pytype, ==, CS_PYTYPE_FLOAT);
  s = t->stmts[2];
  g_assert_cmpint (s->args[1].value->u.seq.items[0]->kind, ==, CS_VALUE_ELLIPSIS);
  g_assert_cmpint (s->args[1].value->u.seq.items[1]->kind, ==, CS_VALUE_CALL);
  g_assert_cmpint (cs_trace_lookup_proxy (t, "t3")->device.type, ==, CS_DEVICE_META);
  s = t->stmts[3];
  g_assert_cmpint (s->args[4].value->kind, ==, CS_VALUE_DTYPE);
  g_assert_true (s->args[4].value->u.dtype.weak);
  g_assert_cmpint (cs_trace_lookup_proxy (t, "t4")->device.index, ==, 1);
  s = t->stmts[4];
  g_assert_cmpint (s->args[1].value->kind, ==, CS_VALUE_NAME);
  g_assert_cmpstr (s->args[2].value->u.s, ==, "it's");
  g_assert_cmpint (s->args[3].value->u.i, ==, -100);
  g_assert_cmpfloat (s->args[4].value->u.f, ==, 4096.0);
  g_assert_cmpstr (s->args[5].value->raw, ==, "0.08838834764831843");
  g_assert_null (s->args[3].value->raw); /* ints in canonical form keep no text */
  /* nested target with `_`: (t6, (_, t7)) */
  s = t->stmts[5];
  g_assert_cmpint (s->out->kind, ==, CS_VALUE_TUPLE);
  g_assert_cmpint (s->out->u.seq.items[1]->kind, ==, CS_VALUE_TUPLE);
  g_assert_cmpint (s->out->u.seq.items[1]->u.seq.items[0]->kind, ==, CS_VALUE_UNDERSCORE);
  g_assert_cmpstr (s->out->u.seq.items[1]->u.seq.items[1]->u.proxy->name, ==, "t7");
  g_assert_cmpint (s->op->id, ==, CS_OP_OPAQUE);
  /* a literal-only result inside a region: `_ = ...`, no type comment */
  s = t->stmts[6];
  g_assert_cmpuint (s->n_subs, ==, 2);
  g_assert_cmpint (s->subs[0]->out->kind, ==, CS_VALUE_UNDERSCORE);
  g_assert_cmpint (s->subs[0]->type_comment, ==, CS_TYPECOMMENT_NONE);
  s = t->stmts[7];
  g_assert_true (s->return_bare);
  printed = cs_print_trace (t, CS_PRINT_DEFAULT);
  g_assert_cmpstr (printed, ==, text);
}

static void
test_float_repr (void)
{
  /* Python 3: repr() of these floats */
  static const struct { double f; const char *repr; } cases[] = {
    { 1e-05, "1e-05" }, { 4096.0, "4096.0" }, { 0.1, "0.1" }, { 0.0001, "0.0001" },
    { 1e16, "1e+16" }, { 1e15, "1000000000000000.0" }, { -2.5, "-2.5" },
    { 0.08838834764831843, "0.08838834764831843" }, { 1.1111111111111112, "1.1111111111111112" },
    { 1.1754943508222875e-38, "1.1754943508222875e-38" }, { 0.0, "0.0" },
    { 0.1 + 0.2, "0.30000000000000004" }, { 123456789.0, "123456789.0" },
  };
  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *s = cs_print_float (cases[i].f);
      g_assert_cmpstr (s, ==, cases[i].repr);
    }
  {
    g_autofree char *inf = cs_print_float (-INFINITY), *nan = cs_print_float (NAN);
    g_assert_cmpstr (inf, ==, "-float('inf')");
    g_assert_cmpstr (nan, ==, "float('NaN')");
  }
}

static void
test_prologue (void)
{
  g_autoptr(CsTraceList) list = load_shared ("pr529_prologue.txt");
  CsTrace *t;
  CsStmt *s;

  if (list == NULL)
    {
      g_test_skip ("no shared traces");
      return;
    }
  t = g_ptr_array_index (list->traces, 0);
  g_assert_cmpuint (t->n_params, ==, 2);
  g_assert_cmpint (t->params[0].kind, ==, CS_PARAM_STAR);
  g_assert_cmpint (t->params[1].kind, ==, CS_PARAM_DSTAR);
  /* x: "cuda:0 f32[4, 128]" = args[0] */
  s = t->stmts[4];
  g_assert_cmpint (s->kind, ==, CS_STMT_ANNASSIGN);
  g_assert_cmpstr (s->out->u.proxy->name, ==, "x");
  g_assert_cmpint (s->value->kind, ==, CS_VALUE_SUBSCRIPT);
  g_assert_cmpstr (s->value->u.seq.items[0]->u.proxy->name, ==, "args");
  g_assert_cmpint (s->value->u.seq.items[1]->u.i, ==, 0);
  g_assert_cmpint (cs_trace_lookup_proxy (t, "x")->kind, ==, CS_PROXY_TENSOR);
  g_assert_cmpint (cs_trace_lookup_proxy (t, "cache_info_no_grad_sync")->kind, ==, CS_PROXY_NUMBER);
  g_assert_cmpint (cs_trace_lookup_proxy (t, "cache_info_no_grad_sync")->dtype, ==, CS_DTYPE_B8);
}

static void
test_printer_pass_built (void)
{
  /* A trace built the way passes build them: no raw text, line 0. */
  g_autoptr(CsTrace) t = cs_trace_new ("computation", "test");
  static const int64_t shape[] = { 8, 16 };
  CsDevice dev = { CS_DEVICE_CUDA, 0 };
  CsProxy *a = cs_trace_add_proxy (t, "a");
  CsProxy *t0, *t1;
  CsArg args[2];
  CsStmt *s, *sub, *fus, *ret;
  CsValue *items[2];
  g_autofree char *printed = NULL;
  CsStmt *stmts[3];

  cs_proxy_set_tensor (t, a, CS_DTYPE_BF16, shape, 2, &dev);
  t->params = CS_ARENA_NEW_N (t->arena, CsParam, 1);
  t->params[0].name = a->name;
  t->n_params = 1;
  t0 = cs_trace_new_tensor (t, "t", CS_DTYPE_F32, shape, 2, &dev);
  t1 = cs_trace_new_tensor (t, "t", CS_DTYPE_BF16, shape, 2, &dev);
  args[0] = (CsArg) { NULL, cs_value_new_proxy (t->arena, a) };
  args[1] = (CsArg) { NULL, cs_value_new_dtype (t->arena, CS_DTYPE_F32, FALSE) };
  s = cs_stmt_new_call (t, NULL, "prims.convert_element_type", cs_value_new_proxy (t->arena, t0), args, 2);
  args[0] = (CsArg) { NULL, cs_value_new_proxy (t->arena, t0) };
  args[1] = (CsArg) { NULL, cs_value_new_float (t->arena, 1e-05) };
  sub = cs_stmt_new_call (t, NULL, "prims.mul", cs_value_new_proxy (t->arena, t1), args, 2);
  items[0] = cs_value_new_proxy (t->arena, t1);
  fus = cs_stmt_new_call (t, NULL, "nvFusion0", cs_value_new_seq (t->arena, CS_VALUE_LIST, items, 1),
                          args, 1);
  cs_stmt_set_subs (t, fus, &sub, 1);
  ret = cs_stmt_new (t, CS_STMT_RETURN);
  ret->value = cs_value_new_seq (t->arena, CS_VALUE_TUPLE, items, 1);
  stmts[0] = s;
  stmts[1] = fus;
  stmts[2] = ret;
  cs_trace_set_stmts (t, stmts, 3);
  printed = cs_print_trace (t, CS_PRINT_DEFAULT);
  g_assert_cmpstr (printed, ==,
                   "def computation(a):\n"
                   "  t0 = prims.convert_element_type(a, dtypes.float32)  # t0: \"cuda:0 f32[8, 16]\"\n"
                   "  [t1] = nvFusion0(t0)\n"
                   "    # t1 = prims.mul(t0, 1e-05)  # t1: \"cuda:0 bf16[8, 16]\"\n"
                   "  return (t1,)\n");
  {
    g_autofree char *top = cs_print_trace (t, CS_PRINT_NO_SUBS);
    g_assert_null (strstr (top, "prims.mul"));
  }
  {
    /* a fusion call whose target a pass set to one proxy still prints as a list, untyped */
    g_autoptr(GString) one = g_string_new (NULL);
    fus->out = cs_value_new_proxy (t->arena, t1);
    cs_print_stmt_to (one, fus, 2, CS_PRINT_NO_SUBS);
    g_assert_cmpstr (one->str, ==, "  [t1] = nvFusion0(t0)\n");
  }
}

static void
test_tolerated_variants (void)
{
  /* a byte order mark, CRLF line ends and spaces on the blank line after the imports parse to
   * the same trace as the plain text */
  static const char plain[] =
    "import torch\n\n@torch.no_grad()\ndef f(a):\n  # a: \"cpu f32[2]\"\n  t0 = prims.neg(a)  # t0: \"cpu f32[2]\"\n  return t0\n";
  static const char variant[] =
    "\xef\xbb\xbfimport torch\r\n  \r\n@torch.no_grad()\r\ndef f(a):\r\n  # a: \"cpu f32[2]\"\r\n"
    "  t0 = prims.neg(a)  # t0: \"cpu f32[2]\"\r\n  return t0\r\n";
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTrace) a = cs_parse_trace (plain, "plain", &error);
  g_autoptr(CsTrace) b = NULL;
  g_autoptr(GString) why = g_string_new (NULL);

  g_assert_no_error (error);
  b = cs_parse_trace (variant, "variant", &error);
  g_assert_no_error (error);
  if (!cs_trace_equal (a, b, why))
    g_error ("variant differs: %s", why->str);
  /* non-ASCII UTF-8 in comments and strings is kept as is */
  {
    static const char utf8[] =
      "def f(a):\n"
      "  # models.py:7: \t    y = a * 2  # \xc3\xa9t\xc3\xa9 \xe6\xb8\xac\xe8\xa9\xa6\n"
      "  t0 = ltorch.foo(a, 'caf\xc3\xa9')  # t0: \"cpu f32[2]\"\n"
      "  return t0\n";
    g_autoptr(CsTrace) u = cs_parse_trace (utf8, "utf8", &error);
    g_autofree char *printed = NULL;
    g_assert_no_error (error);
    g_assert_cmpint (u->stmts[0]->comment_kind, ==, CS_COMMENT_SRCLOC);
    g_assert_cmpstr (u->stmts[1]->args[1].value->u.s, ==, "caf\xc3\xa9");
    printed = cs_print_trace (u, CS_PRINT_DEFAULT);
    g_assert_cmpstr (printed, ==, utf8);
  }
  /* the BOM shifts columns of line 1 only: an error there is reported in file columns */
  {
    static const char bad[] = "\xef\xbb\xbfhello\n";
    g_autoptr(CsTrace) c = cs_parse_trace (bad, "bom", &error);
    g_assert_null (c);
    g_assert_true (g_str_has_prefix (error->message, "bom:1:4: "));
  }
}

static void
test_prologue_forms (void)
{
  /* reference 1.2j: the annotated assignments of prologue traces */
  static const char text[] =
    "def prologue(*args, **kwargs):\n"
    "  # args: \"Any\"\n"
    "  prims.check_len(args, 2)\n"
    "  p0: \"Any\" = globals()['__function_obj']\n"
    "  module: \"Any\" = thunder.core.module.get_thunder_module(p0)\n"
    "  m: \"Any\" = args[1]\n"
    "  b0: \"bool True\" = m.training\n"
    "  t_0_weight: \"cuda:0 f32[256, 128]\" = module.get_parameter('0.weight')\n"
    "  i0: \"int ?\" = args[0]\n"
    "  f0: \"float 1.5\" = kwargs['eps']\n"
    "  return (t_0_weight, i0)\n";
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTrace) t = cs_parse_trace (text, "prologue", &error);
  g_autofree char *printed = NULL;
  CsValue *v;
  CsProxy *p;

  g_assert_no_error (error);
  /* globals()['__function_obj']: a subscript of a call */
  v = t->stmts[2]->value;
  g_assert_cmpint (v->kind, ==, CS_VALUE_SUBSCRIPT);
  g_assert_cmpint (v->u.seq.items[0]->kind, ==, CS_VALUE_CALL);
  g_assert_cmpstr (v->u.seq.items[0]->u.call.callee, ==, "globals");
  g_assert_cmpstr (v->u.seq.items[1]->u.s, ==, "__function_obj");
  /* m.training: an attribute of the proxy m */
  v = t->stmts[5]->value;
  g_assert_cmpint (v->kind, ==, CS_VALUE_ATTR);
  g_assert_cmpstr (v->u.seq.attr, ==, "training");
  g_assert_cmpstr (v->u.seq.items[0]->u.proxy->name, ==, "m");
  p = cs_trace_lookup_proxy (t, "b0");
  g_assert_cmpint (p->kind, ==, CS_PROXY_NUMBER);
  g_assert_true (p->has_value && p->value->u.b);
  p = cs_trace_lookup_proxy (t, "i0");
  g_assert_cmpint (p->kind, ==, CS_PROXY_NUMBER);
  g_assert_false (p->has_value);
  p = cs_trace_lookup_proxy (t, "f0");
  g_assert_cmpint (p->dtype, ==, CS_DTYPE_F64);
  g_assert_cmpfloat (p->value->u.f, ==, 1.5);
  g_assert_cmpint (cs_trace_lookup_proxy (t, "t_0_weight")->kind, ==, CS_PROXY_TENSOR);
  printed = cs_print_trace (t, CS_PRINT_DEFAULT);
  g_assert_cmpstr (printed, ==, text);
}

static void
test_old_printers (void)
{
  /* 2023-2024 printer forms (reference 1.2a/k/l, 1.6.13): `@no_autocast()`, `(trivial unpack)`,
   * `del [..]`, `return [t3]`, `clear_collection`, one-per-line unpack, `# No signature`. */
  static const char text[] =
    "# Constructed by Backward pass\n"
    "import torch\n"
    "\n"
    "@torch.no_grad()\n"
    "@no_autocast()\n"
    "def backward_fn(saved_for_backward, cotangents):\n"
    "  # x: \"cpu f32[2, 2]\" =  x  (trivial unpack)\n"
    "  # saved_for_backward: \"Collection\" \n"
    "  C0, \\\n"
    "  C1, \\\n"
    "  = saved_for_backward\n"
    "  clear_collection(saved_for_backward)\n"
    "  del [saved_for_backward, C1]\n"
    "  t3 = ltorch.softmax(C0, -1, dtype=None)  # t3\n"
    "  return [t3]\n"
    "\n"
    "# No signature available\n"
    "  # _ (unused)\n"
    "  return None\n";
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTraceList) list = cs_parse_text (text, strlen (text), "old", &error);
  g_autofree char *printed = NULL;
  CsTrace *t, *u;

  g_assert_no_error (error);
  g_assert_cmpuint (list->traces->len, ==, 2);
  t = g_ptr_array_index (list->traces, 0);
  g_assert_cmpint (t->stmts[0]->comment_kind, ==, CS_COMMENT_INPUT);
  g_assert_cmpstr (t->stmts[0]->annotated->name, ==, "x");
  g_assert_cmpint (t->stmts[0]->annotated->kind, ==, CS_PROXY_TENSOR);
  g_assert_cmpint (t->stmts[2]->kind, ==, CS_STMT_UNPACK);
  g_assert_cmpint (t->stmts[2]->unpack_style, ==, CS_UNPACK_ONE_PER_LINE);
  g_assert_cmpuint (t->stmts[2]->line, ==, 9);
  g_assert_cmpint (t->stmts[4]->kind, ==, CS_STMT_DEL);
  g_assert_true (t->stmts[4]->del_brackets);
  g_assert_cmpuint (t->stmts[4]->n_names, ==, 2);
  g_assert_cmpint (cs_trace_get_return (t)->value->kind, ==, CS_VALUE_LIST);
  u = g_ptr_array_index (list->traces, 1);
  g_assert_false (u->has_signature);
  g_assert_cmpint (cs_trace_get_return (u)->value->kind, ==, CS_VALUE_NONE);
  printed = cs_print_trace_list (list, CS_PRINT_DEFAULT);
  g_assert_cmpstr (printed, ==, text);
}

static void
test_wrap80_unpack (void)
{
  /* Thunder's unpack printer wraps when the parts pass 80 characters (prims.py
   * _make_parts_into_line_or_lines): 20 parts "tNN, " of 5 characters fill 80, the 17th part
   * would make 85 > 80, so the first line holds 16 parts. */
  GString *in = g_string_new ("def f(C0):\n  ");
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTrace) t = NULL;
  g_autofree char *printed = NULL;

  for (int i = 10; i < 30; i++)
    {
      if (i == 26)
        g_string_append (in, "\\\n  ");
      g_string_append_printf (in, "t%d, ", i);
    }
  g_string_append (in, "= C0\n");
  /* 16 parts of 5 = 80, no wrap before part 17 since pos (80) + 5 > 80 wraps: check both */
  t = cs_parse_trace (in->str, "wrap", &error);
  g_assert_no_error (error);
  g_assert_cmpuint (t->stmts[0]->n_targets, ==, 20);
  printed = cs_print_trace (t, CS_PRINT_DEFAULT);
  {
    const char *nl = strchr (printed + strlen ("def f(C0):\n"), '\n');
    /* first body line: 2 spaces + 16 parts (80 chars) + "\\" */
    g_assert_cmpint (nl - (printed + strlen ("def f(C0):\n")), ==, 2 + 80 + 1);
  }
  g_string_free (in, TRUE);
}

/* The def-use ids a parsed call holds (cs_stmt_io()), and the mutators' re-indexing. */
static void
test_def_use_ids (void)
{
  static const char text[] =
    "import torch\n"
    "from thunder.executors.torchex import no_autocast\n"
    "\n"
    "@torch.no_grad()\n"
    "@no_autocast\n"
    "def computation(a, b):\n"
    "  # a: \"cpu f32[4]\"\n"
    "  # b: \"cpu f32[4]\"\n"
    "  t0 = ltorch.add(a, b, alpha=None)  # t0: \"cpu f32[4]\"\n"
    "  t1 = ltorch.cat([t0, a, t0], 0)  # t1: \"cpu f32[12]\"\n"
    "  (t2, t3) = ltorch.split(t1, 6, 0)\n"
    "  return t2\n";
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTraceList) list = cs_parse_text (text, strlen (text), "def-use", &error);
  CsTrace *t;
  CsProxy *a, *b, *t0, *t1, *t2, *t3;
  CsStmt *add = NULL, *cat = NULL, *split = NULL;
  CsArg *args;

  g_assert_no_error (error);
  t = g_ptr_array_index (list->traces, 0);
  a = cs_trace_lookup_proxy (t, "a");
  b = cs_trace_lookup_proxy (t, "b");
  t0 = cs_trace_lookup_proxy (t, "t0");
  t1 = cs_trace_lookup_proxy (t, "t1");
  t2 = cs_trace_lookup_proxy (t, "t2");
  t3 = cs_trace_lookup_proxy (t, "t3");
  g_assert_nonnull (t3);
  for (guint i = 0; i < t->n_stmts; i++)
    if (t->stmts[i]->kind == CS_STMT_CALL)
      {
        if (add == NULL)
          add = t->stmts[i];
        else if (cat == NULL)
          cat = t->stmts[i];
        else
          split = t->stmts[i];
      }
  g_assert_nonnull (split);
  /* ids are distinct and nonzero */
  g_assert_cmpuint (a->id, !=, 0);
  g_assert_cmpuint (a->id, !=, b->id);
  g_assert_cmpuint (add->n_in, ==, 2);
  g_assert_cmpuint (add->n_out, ==, 1);
  g_assert_cmpuint (cs_stmt_io (add)[0], ==, a->id);
  g_assert_cmpuint (cs_stmt_io (add)[1], ==, b->id);
  g_assert_cmpuint (cs_stmt_io (add)[2], ==, t0->id);
  /* a list argument's proxies in order, duplicates kept */
  g_assert_cmpuint (cat->n_in, ==, 3);
  g_assert_cmpuint (cs_stmt_io (cat)[0], ==, t0->id);
  g_assert_cmpuint (cs_stmt_io (cat)[1], ==, a->id);
  g_assert_cmpuint (cs_stmt_io (cat)[2], ==, t0->id);
  g_assert_cmpuint (cs_stmt_io (cat)[3], ==, t1->id);
  /* three ids are held in the statement, four in an arena array */
  g_assert_true (cs_stmt_io (add) == add->io_words);
  g_assert_true (cs_stmt_io (cat) != cat->io_words);
  g_assert_cmpuint (split->n_in, ==, 1);
  g_assert_cmpuint (split->n_out, ==, 2);
  g_assert_cmpuint (cs_stmt_io (split)[1], ==, t2->id);
  g_assert_cmpuint (cs_stmt_io (split)[2], ==, t3->id);
  g_assert_true (cs_stmt_io_matches (split));

  /* an edit behind the mutators' back is seen; the mutators re-index */
  g_assert_cmpuint (add->n_args, ==, 3);
  args = CS_ARENA_NEW_N (t->arena, CsArg, 3);
  args[0] = add->args[1];
  args[1] = add->args[0];
  args[2] = add->args[2];
  add->args = args;
  g_assert_false (cs_stmt_io_matches (add));
  {
    /* the check's message names the first stale position, its stored id and the proxy now */
    g_autofree char *why = cs_stmt_io_mismatch (add);
    g_autofree char *want = g_strdup_printf ("stored 2 reads and 1 writes, the values hold 2 "
                                             "and 1; first difference at position 0 (read 0): "
                                             "stored id %u, the value holds b (id %u)",
                                             a->id, b->id);
    g_assert_cmpstr (why, ==, want);
  }
  cs_stmt_set_args (t, add, args, 3);
  g_assert_true (cs_stmt_io_matches (add));
  g_assert_null (cs_stmt_io_mismatch (add));
  g_assert_cmpuint (cs_stmt_io (add)[0], ==, b->id);
  g_assert_cmpuint (cs_stmt_io (add)[1], ==, a->id);
  {
    /* a target replaced behind the mutators' back: the stored write has no proxy now */
    CsValue *out = add->out;
    g_autofree char *why = NULL;
    add->out = cs_value_new_underscore (t->arena);
    why = cs_stmt_io_mismatch (add);
    g_assert_nonnull (strstr (why, "the values hold 2 and 0; first difference at position 2 "
                                   "(write 0): stored id"));
    g_assert_nonnull (strstr (why, ", the value holds nothing"));
    add->out = out;
  }
  cs_stmt_set_out (t, add, cs_value_new_underscore (t->arena));
  g_assert_cmpuint (add->n_in, ==, 2);
  g_assert_cmpuint (add->n_out, ==, 0);
  g_assert_cmpint (add->type_comment, ==, CS_TYPECOMMENT_NONE);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/core/parse/shared/round-trip", test_shared_round_trip);
  g_test_add_func ("/core/parse/data/round-trip", test_data_round_trip);
  g_test_add_func ("/core/parse/seed-bwd", test_seed_bwd);
  g_test_add_func ("/core/parse/list-of-traces", test_list_of_traces);
  g_test_add_func ("/core/parse/concatenated", test_concatenated);
  g_test_add_func ("/core/parse/forward-return-pair", test_forward_return_pair);
  g_test_add_func ("/core/parse/llama", test_llama);
  g_test_add_func ("/core/parse/symbolic-dims", test_symbolic_dims);
  g_test_add_func ("/core/parse/values", test_values);
  g_test_add_func ("/core/parse/prologue", test_prologue);
  g_test_add_func ("/core/parse/old-printers", test_old_printers);
  g_test_add_func ("/core/parse/prologue-forms", test_prologue_forms);
  g_test_add_func ("/core/parse/tolerated-variants", test_tolerated_variants);
  g_test_add_func ("/core/print/unpack-wrap80", test_wrap80_unpack);
  g_test_add_func ("/core/print/float-repr", test_float_repr);
  g_test_add_func ("/core/print/pass-built", test_printer_pass_built);
  g_test_add_func ("/core/ir/def-use-ids", test_def_use_ids);
  return g_test_run ();
}
