/* test-core-dtype.c: dtypes, devices, op table and IR basics. */
#include "cs-config.h"

#include "cs-dtype.h"
#include "cs-ir.h"
#include "cs-ops.h"

#include <string.h>

static void
test_short_names (void)
{
  /* Every short name Thunder prints (reference/thunder-traces.md 1.3) parses back. */
  static const char * const names[] = { "b8", "ui8", "ui64", "i8", "i16", "i32", "i64", "bf16",
                                        "f16", "f32", "f64", "f8_e5m2", "f8_e5m2fnuz",
                                        "f8_e4m3fn", "f8_e4m3fnuz", "f8_e8m0fnu",
                                        "f4_e2m1fn_x2", "c32", "c64", "c128" };
  CsDtype d;

  for (gsize i = 0; i < G_N_ELEMENTS (names); i++)
    {
      g_assert_true (cs_dtype_from_short (names[i], strlen (names[i]), &d));
      g_assert_cmpstr (cs_dtype_short_name (d), ==, names[i]);
    }
  g_assert_false (cs_dtype_from_short ("f31", 3, &d));
  g_assert_false (cs_dtype_from_short ("bf1", 3, &d));
}

static void
test_sizes_and_kinds (void)
{
  g_assert_cmpuint (cs_dtype_size_bytes (CS_DTYPE_BF16), ==, 2);
  g_assert_cmpuint (cs_dtype_size_bytes (CS_DTYPE_F32), ==, 4);
  g_assert_cmpuint (cs_dtype_size_bytes (CS_DTYPE_C128), ==, 16);
  g_assert_cmpuint (cs_dtype_size_bytes (CS_DTYPE_F8_E4M3FN), ==, 1);
  g_assert_true (cs_dtype_is_low_precision (CS_DTYPE_BF16));
  g_assert_true (cs_dtype_is_low_precision (CS_DTYPE_F16));
  g_assert_true (cs_dtype_is_low_precision (CS_DTYPE_F8_E5M2));
  g_assert_true (cs_dtype_is_low_precision (CS_DTYPE_C32));
  g_assert_false (cs_dtype_is_low_precision (CS_DTYPE_F32));
  g_assert_false (cs_dtype_is_low_precision (CS_DTYPE_I16));
  g_assert_true (cs_dtype_is_exact (CS_DTYPE_B8));
  g_assert_true (cs_dtype_is_inexact (CS_DTYPE_C64));
}

static void
test_long_names (void)
{
  CsDtype d;
  gboolean weak = TRUE;

  g_assert_true (cs_dtype_from_long ("bfloat16", 8, &d, &weak));
  g_assert_cmpint (d, ==, CS_DTYPE_BF16);
  g_assert_false (weak);
  g_assert_true (cs_dtype_from_long ("float32_", 8, &d, &weak));
  g_assert_cmpint (d, ==, CS_DTYPE_F32);
  g_assert_true (weak);
  g_assert_false (cs_dtype_from_long ("float", 5, &d, &weak));
}

static void
test_devices (void)
{
  CsDevice dev;
  g_autofree char *s = NULL;

  g_assert_true (cs_device_parse ("cuda:3", 6, &dev));
  g_assert_cmpint (dev.type, ==, CS_DEVICE_CUDA);
  g_assert_cmpint (dev.index, ==, 3);
  s = cs_device_to_string (&dev);
  g_assert_cmpstr (s, ==, "cuda:3");
  g_assert_true (cs_device_parse ("cpu", 3, &dev));
  g_assert_cmpint (dev.type, ==, CS_DEVICE_CPU);
  g_assert_false (cs_device_parse ("cuda:", 5, &dev));
  g_assert_false (cs_device_parse ("cuda:x", 6, &dev));
  g_assert_false (cs_device_parse ("gpu", 3, &dev));
}

static void
test_op_lookup (void)
{
  const CsOp *op = cs_op_lookup ("prims.convert_element_type");

  g_assert_cmpint (op->id, ==, CS_OP_PRIM_CONVERT_ELEMENT_TYPE);
  g_assert_cmpint (op->category, ==, CS_OP_CAT_CAST);
  g_assert_true (cs_op_has_tag (op, CS_OP_TAG_FUSIBLE));
  g_assert_cmpstr (op->short_name, ==, "convert_element_type");

  op = cs_op_lookup ("torch.matmul");
  g_assert_cmpint (op->category, ==, CS_OP_CAT_MATMUL);
  g_assert_cmpint (cs_op_semantic (op)->id, ==, CS_OP_LTORCH_MATMUL);

  g_assert_true (cs_op_is_fusion (cs_op_lookup ("nvFusion12")));
  g_assert_true (cs_op_is_fusion (cs_op_lookup ("TorchCompile0")));
  g_assert_false (cs_op_is_fusion (cs_op_lookup ("nvFusion")));
  g_assert_false (cs_op_is_fusion (cs_op_lookup ("nvFusion1x")));
  g_assert_cmpint (cs_op_lookup ("apex.my_op")->id, ==, CS_OP_OPAQUE);
  g_assert_false (cs_op_has_tag (cs_op_lookup ("prims.matmul"), CS_OP_TAG_FUSIBLE));
  g_assert_true (cs_op_has_tag (cs_op_lookup ("prims.reshape"), CS_OP_TAG_SHAPE_OP));
}

static void
test_type_string (void)
{
  g_autoptr(CsTrace) t = cs_trace_new ("computation", "test");
  int64_t shape[] = { 8, 16 };
  CsDevice dev = { CS_DEVICE_CUDA, 0 };
  CsProxy *p = cs_trace_new_tensor (t, "t", CS_DTYPE_BF16, shape, 2, &dev);
  CsProxy *n = cs_trace_add_proxy (t, "f3");
  g_autofree char *s = cs_proxy_type_string (p);
  g_autofree char *s0 = NULL;
  g_autofree char *sn = NULL;

  g_assert_cmpstr (p->name, ==, "t0");
  g_assert_cmpstr (s, ==, "cuda:0 bf16[8, 16]");
  cs_proxy_set_tensor (t, p, CS_DTYPE_F32, NULL, 0, NULL);
  s0 = cs_proxy_type_string (p);
  g_assert_cmpstr (s0, ==, "cuda:0 f32[]");
  n->kind = CS_PROXY_NUMBER;
  n->dtype = CS_DTYPE_F32;
  n->has_value = 1;
  n->value = cs_value_new_float (t->arena, 1e-05);
  sn = cs_proxy_type_string (n);
  g_assert_cmpstr (sn, ==, "float 1e-05");
}

static void
test_float_repr (void)
{
  /* Python's repr(x) for each x, as CPython prints it. */
  static const struct { double v; const char *repr; } cases[] = {
    { 1e-05, "float 1e-05" }, { 4096.0, "float 4096.0" }, { 100000.0, "float 100000.0" },
    { 0.5, "float 0.5" }, { 1e16, "float 1e+16" }, { 0.0001, "float 0.0001" },
    { 0.08838834764831843, "float 0.08838834764831843" }, { -2.5, "float -2.5" },
    { 1.1754943508222875e-38, "float 1.1754943508222875e-38" }, { 123456789012345.6, "float 123456789012345.6" },
  };
  g_autoptr(CsTrace) t = cs_trace_new ("computation", "test");
  CsProxy *n = cs_trace_add_proxy (t, "f0");

  n->kind = CS_PROXY_NUMBER;
  n->dtype = CS_DTYPE_F32;
  n->has_value = 1;
  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *s = NULL;
      n->value = cs_value_new_float (t->arena, cases[i].v);
      s = cs_proxy_type_string (n);
      g_assert_cmpstr (s, ==, cases[i].repr);
    }
}

static void
test_trace_copy (void)
{
  g_autoptr(CsTrace) t = cs_trace_new ("computation", "a");
  g_autoptr(CsTrace) c = NULL;
  int64_t shape[] = { 4 };
  CsProxy *a = cs_trace_new_tensor (t, "t", CS_DTYPE_F32, shape, 1, NULL);
  CsProxy *b = cs_trace_new_tensor (t, "t", CS_DTYPE_F32, shape, 1, NULL);
  CsArg args[2] = { { NULL, cs_value_new_proxy (t->arena, a) },
                    { NULL, cs_value_new_float (t->arena, 2.0) } };
  CsStmt *s = cs_stmt_new_call (t, NULL, "prims.mul", cs_value_new_proxy (t->arena, b), args, 2);
  CsStmt *stmts[1] = { s };
  CsStmt *cs;

  cs_trace_set_stmts (t, stmts, 1);
  c = cs_trace_copy (t, "b");
  g_assert_cmpstr (c->pass, ==, "b");
  g_assert_cmpuint (c->n_stmts, ==, 1);
  cs = c->stmts[0];
  g_assert_true (cs != s);
  g_assert_cmpuint (cs->id, ==, s->id);
  g_assert_cmpint (cs->op->id, ==, CS_OP_PRIM_MUL);
  /* The copy's proxies belong to the copy. */
  g_assert_true (cs_stmt_get_output (cs) == cs_trace_lookup_proxy (c, "t1"));
  g_assert_true (cs_stmt_get_output (cs) != b);
  g_assert_true (cs->args[0].value->u.proxy == cs_trace_lookup_proxy (c, "t0"));
  g_assert_cmpfloat (cs->args[1].value->u.f, ==, 2.0);
}

/* The proxy name table against a GHashTable model: 3,000 names inserted, a third removed
 * (the entries probed past a removed one must stay reachable), names replaced and re-added
 * over tombstones, iteration visiting each entry once.  The hash is GLib's g_str_hash, and
 * djb2 from 5381: "" hashes to 5381, "a" to 5381 * 33 + 97 = 177670. */
static void
test_name_table (void)
{
  g_autoptr(CsTrace) t = cs_trace_new ("computation", "a");
  CsNameTable *nt = cs_name_table_new ();
  g_autoptr(GHashTable) model = g_hash_table_new (g_str_hash, g_str_equal);
  CsProxy *p, *q;
  guint pos = 0, seen = 0;

  g_assert_cmpuint (cs_name_hash (""), ==, 5381);
  g_assert_cmpuint (cs_name_hash ("a"), ==, 177670);
  g_assert_cmpuint (cs_name_hash ("bw_t12345"), ==, g_str_hash ("bw_t12345"));

  for (guint i = 0; i < 3000; i++)
    {
      p = CS_ARENA_NEW (t->arena, CsProxy);
      p->name = cs_arena_printf (t->arena, i % 2 ? "t%u" : "bw_t%u", i);
      p->id = i + 1;
      cs_name_table_insert (nt, p, cs_name_hash (p->name));
      g_hash_table_insert (model, (gpointer) p->name, p);
    }
  g_assert_cmpuint (cs_name_table_size (nt), ==, 3000);
  for (guint i = 0; i < 3000; i += 3)
    {
      const char *name = cs_arena_printf (t->arena, i % 2 ? "t%u" : "bw_t%u", i);
      g_assert_true (cs_name_table_remove (nt, name));
      g_assert_false (cs_name_table_remove (nt, name));
      g_hash_table_remove (model, name);
    }
  g_assert_cmpuint (cs_name_table_size (nt), ==, 2000);
  for (guint i = 0; i < 3000; i++)
    {
      const char *name = cs_arena_printf (t->arena, i % 2 ? "t%u" : "bw_t%u", i);
      q = cs_name_table_lookup (nt, name, cs_name_hash (name));
      g_assert_true (q == g_hash_table_lookup (model, name));
      if (q != NULL)
        g_assert_cmpuint (q->id, ==, i + 1);
    }
  /* same name again: the entry is replaced, the size unchanged */
  p = CS_ARENA_NEW (t->arena, CsProxy);
  p->name = "t1";
  cs_name_table_insert (nt, p, cs_name_hash ("t1"));
  g_assert_cmpuint (cs_name_table_size (nt), ==, 2000);
  g_assert_true (cs_name_table_lookup (nt, "t1", cs_name_hash ("t1")) == p);
  g_assert_null (cs_name_table_lookup (nt, "t0", cs_name_hash ("t0")));
  while ((q = cs_name_table_next (nt, &pos)) != NULL)
    {
      g_assert_true (g_hash_table_contains (model, q->name));
      seen++;
    }
  g_assert_cmpuint (seen, ==, 2000);
  /* removed names come back (over their tombstones), each once */
  for (guint i = 0; i < 3000; i += 3)
    {
      p = CS_ARENA_NEW (t->arena, CsProxy);
      p->name = cs_arena_printf (t->arena, i % 2 ? "t%u" : "bw_t%u", i);
      cs_name_table_insert (nt, p, cs_name_hash (p->name));
      g_assert_true (cs_name_table_lookup (nt, p->name, cs_name_hash (p->name)) == p);
    }
  g_assert_cmpuint (cs_name_table_size (nt), ==, 3000);
  cs_name_table_free (nt);

  /* the "t<n>" bound: 1 + the largest n, lowered by one when that entry goes */
  {
    const char *names[] = { "t5", "t12", "bw_t99", "x", "t012" };
    guint64 n = 0;
    nt = cs_name_table_new ();
    g_assert_cmpuint (cs_name_table_t_bound (nt), ==, 0);
    for (guint i = 0; i < G_N_ELEMENTS (names); i++)
      {
        p = CS_ARENA_NEW (t->arena, CsProxy);
        p->name = names[i];
        cs_name_table_insert (nt, p, cs_name_hash (p->name));
      }
    g_assert_cmpuint (cs_name_table_t_bound (nt), ==, 13);
    g_assert_true (cs_name_table_remove (nt, "t5"));
    g_assert_cmpuint (cs_name_table_t_bound (nt), ==, 13);
    g_assert_true (cs_name_table_remove (nt, "t12"));
    g_assert_cmpuint (cs_name_table_t_bound (nt), ==, 12);
    cs_name_table_free (nt);
    g_assert_true (_cs_parse_t_name ("t0", &n) && n == 0);
    g_assert_true (_cs_parse_t_name ("t4294967295", &n) && n == G_MAXUINT32);
    g_assert_false (_cs_parse_t_name ("t4294967296", &n));
    g_assert_false (_cs_parse_t_name ("t012", &n));
    g_assert_false (_cs_parse_t_name ("t", &n));
    g_assert_false (_cs_parse_t_name ("t1a", &n));
  }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/core/dtype/short-names", test_short_names);
  g_test_add_func ("/core/dtype/sizes-kinds", test_sizes_and_kinds);
  g_test_add_func ("/core/dtype/long-names", test_long_names);
  g_test_add_func ("/core/dtype/devices", test_devices);
  g_test_add_func ("/core/ops/lookup", test_op_lookup);
  g_test_add_func ("/core/ir/type-string", test_type_string);
  g_test_add_func ("/core/ir/float-repr", test_float_repr);
  g_test_add_func ("/core/ir/trace-copy", test_trace_copy);
  g_test_add_func ("/core/ir/name-table", test_name_table);
  return g_test_run ();
}
