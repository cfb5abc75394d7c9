/* test-core-meta.c: shape/dtype inference (core/cs-meta.c).
 *
 * Every expected type is hand-computed from PyTorch/Thunder semantics (broadcasting, matmul
 * rules, promotion tables); error cases check that the message names the op and the line.
 * The bundled samples (data/ and data/bench/) must type-check statement by statement.
 */
#include "cs-config.h"

#include "cs-meta.h"
#include "cs-parse.h"
#include "cs-ops.h"

#include <string.h>

/* Builds a one-statement trace: @decls is "a bf16[8, 16]; b bf16[16]" (cuda:0 tensors), @stmt
 * one statement line.  The statement sits on line 2 + number of decls. */
static CsTrace *
make_trace (const char *decls, const char *stmt, guint *stmt_line)
{
  g_autoptr (GString) text = g_string_new (NULL);
  g_autoptr (GString) params = g_string_new (NULL);
  g_autoptr (GString) annots = g_string_new (NULL);
  g_auto (GStrv) parts = g_strsplit (decls, "; ", -1);
  guint n = 0;
  GError *error = NULL;
  CsTrace *trace;

  for (guint i = 0; parts[i] && *parts[i]; i++)
    {
      const char *sp = strchr (parts[i], ' ');
      g_autofree char *name = g_strndup (parts[i], sp - parts[i]);

      g_string_append_printf (params, "%s%s", n ? ", " : "", name);
      g_string_append_printf (annots, "  # %s: \"cuda:0 %s\"\n", name, sp + 1);
      n++;
    }
  g_string_append_printf (text, "def computation(%s):\n%s  %s\n  return None\n", params->str,
                          annots->str, stmt);
  trace = cs_parse_trace (text->str, "test", &error);
  g_assert_no_error (error);
  g_assert_nonnull (trace);
  *stmt_line = 2 + n;
  return trace;
}

static CsStmt *
find_call (CsTrace *trace)
{
  for (guint i = 0; i < trace->n_stmts; i++)
    if (trace->stmts[i]->kind == CS_STMT_CALL)
      return trace->stmts[i];
  g_assert_not_reached ();
  return NULL;
}

/* Infers and compares the type strings of the outputs (joined by "; "). */
static void
check (const char *decls, const char *stmt, const char *expected)
{
  guint line;
  g_autoptr (CsTrace) trace = make_trace (decls, stmt, &line);
  CsStmt *s = find_call (trace);
  GError *error = NULL;
  g_autoptr (GPtrArray) outs = g_ptr_array_new ();
  g_autoptr (GString) got = g_string_new (NULL);

  if (!cs_meta_infer (trace, s, &error))
    g_error ("%s: %s", stmt, error->message);
  cs_stmt_collect_outputs (s, outs);
  for (guint i = 0; i < outs->len; i++)
    {
      g_autofree char *ts = cs_proxy_type_string (g_ptr_array_index (outs, i));
      g_string_append_printf (got, "%s%s", i ? "; " : "", ts);
    }
  if (g_strcmp0 (got->str, expected) != 0)
    g_error ("%s: expected \"%s\", got \"%s\"", stmt, expected, got->str);
}

/* Expects an error of @code whose message contains "line N: <callee>" and @needle. */
static void
check_error (const char *decls, const char *stmt, CsMetaError code, const char *needle)
{
  guint line;
  g_autoptr (CsTrace) trace = make_trace (decls, stmt, &line);
  CsStmt *s = find_call (trace);
  GError *error = NULL;
  g_autofree char *prefix = g_strdup_printf ("line %u: %s: ", line, s->callee);

  g_assert_false (cs_meta_infer (trace, s, &error));
  g_assert_error (error, CS_META_ERROR, (gint) code);
  if (!g_str_has_prefix (error->message, prefix) || strstr (error->message, needle) == NULL)
    g_error ("message \"%s\" lacks \"%s\" or \"%s\"", error->message, prefix, needle);
  g_error_free (error);
}

static void
test_prims_shape (void)
{
  check ("a bf16[8, 16]", "t0 = prims.convert_element_type(a, dtypes.float32)", "cuda:0 f32[8, 16]");
  check ("b bf16[16]", "t0 = prims.broadcast_in_dim(b, (8, 16), (1,))", "cuda:0 bf16[8, 16]");
  check ("b f32[2, 64]", "t0 = prims.broadcast_in_dim(b, [2, 64, 1], [0, 1])", "cuda:0 f32[2, 64, 1]");
  check ("a f32[2, 64, 1]", "t0 = prims.broadcast_in_dim(a, (2, 64, 128), (0, 1, 2))", "cuda:0 f32[2, 64, 128]");
  check ("a i64[2, 64]", "t0 = prims.reshape(a, (128,))", "cuda:0 i64[128]");
  check ("k bf16[2, 4, 64, 32]", "t0 = prims.transpose(k, (0, 1, 3, 2))", "cuda:0 bf16[2, 4, 32, 64]");
  check ("a f32[4, 1, 3, 1]", "t0 = prims.squeeze(a, (1, 3))", "cuda:0 f32[4, 3]");
  check ("q bf16[2, 4, 64, 32]", "t0 = prims.slice_prim(q, [0, 0, 0, 16], [2, 4, 64, 32], [1, 1, 1, 1])",
         "cuda:0 bf16[2, 4, 64, 16]");
  /* ceil((10 - 1) / 3) = 3 */
  check ("a f32[10]", "t0 = prims.slice_prim(a, [1], [10], [3])", "cuda:0 f32[3]");
  check ("a bf16[2, 16]; b bf16[2, 16]", "t0 = prims.cat([a, b], -1)", "cuda:0 bf16[2, 32]");
  /* 128 + 0 + 1 = 129 along dim 1; interior 2 on dim 0: 4 + 3*2 = 10 */
  check ("a f32[4, 128]", "t0 = prims.pad(a, 0.0, [(0, 0, 2), (0, 1, 0)])", "cuda:0 f32[10, 129]");
  check ("a f32[3, 5]", "t0 = prims.shallow_copy(a)", "cuda:0 f32[3, 5]");
}

static void
test_prims_elementwise (void)
{
  check ("a f32[8, 16]; b f32[8, 16]", "t0 = prims.add(a, b)", "cuda:0 f32[8, 16]");
  check ("a f32[8, 16]", "t0 = prims.mul(0.5, a)", "cuda:0 f32[8, 16]");
  check ("a f32[8, 16]", "t0 = prims.exp(a)", "cuda:0 f32[8, 16]");
  check ("a f32[8, 16]", "t0 = prims.rsqrt(a)", "cuda:0 f32[8, 16]");
  check ("a f32[8]; b f32[8]", "t0 = prims.lt(a, b)", "cuda:0 b8[8]");
  check ("a i64[128, 1]", "t0 = prims.ne(a, -100)", "cuda:0 b8[128, 1]");
  check ("a f32[128, 1]", "t0 = prims.eq(a, float('inf'))", "cuda:0 b8[128, 1]");
  check ("a c64[4]", "t0 = prims.abs(a)", "cuda:0 f32[4]");
  check ("p b8[4, 4]; a bf16[4, 4]", "t0 = prims.where(p, a, -float('inf'))", "cuda:0 bf16[4, 4]");
  check ("a f32[8, 16]", "t0 = prims.pow(a, 2.0)", "cuda:0 f32[8, 16]");
  check ("a f32[]; b f32[]", "t0 = prims.div(a, b)", "cuda:0 f32[]");
}

static void
test_prims_reduction (void)
{
  check ("a f32[2, 4, 64, 64]", "t0 = prims.amax(a, (3,))", "cuda:0 f32[2, 4, 64]");
  check ("a f32[128, 1]", "t0 = prims.sum(a, (0, 1))", "cuda:0 f32[]");
  check ("a f32[2, 3, 4]", "t0 = prims.prod(a, (1,))", "cuda:0 f32[2, 4]");
  check ("a f32[2, 3, 4]", "t0 = prims.amin(a, (0, 2))", "cuda:0 f32[3]");
  check ("a f32[8, 32]", "(t0, t1) = prims.var_mean(a, (1,), correction=0)", "cuda:0 f32[8]; cuda:0 f32[8]");
  check ("a f32[8, 32]", "t0 = prims.argmax(a, 1)", "cuda:0 i64[8]");
}

static void
test_prims_matmul_index (void)
{
  check ("a bf16[8, 16]; w bf16[16, 16]", "t0 = prims.matmul(a, w)", "cuda:0 bf16[8, 16]");
  check ("a bf16[2, 4, 64, 32]; b bf16[2, 4, 32, 64]", "t0 = prims.matmul(a, b)", "cuda:0 bf16[2, 4, 64, 64]");
  check ("x bf16[64, 128]; w bf16[512, 128]; b bf16[512]", "t0 = prims.linear(x, w, b)", "cuda:0 bf16[64, 512]");
  check ("x bf16[2, 64, 128]; w bf16[344, 128]", "t0 = prims.linear(x, w, None)", "cuda:0 bf16[2, 64, 344]");
  check ("w bf16[512, 128]; i i64[128]", "t0 = prims.take(w, i, 0)", "cuda:0 bf16[128, 128]");
  check ("a f32[128, 513]; i i64[128, 1]", "t0 = prims.take_along_axis(a, i, 1)", "cuda:0 f32[128, 1]");
  check ("a f32[4, 5]; i i64[4, 2]", "t0 = prims.gather(a, i, 1)", "cuda:0 f32[4, 2]");
  check ("i i64[2, 3]; w f32[10, 4]", "t0 = prims.embedding(i, w)", "cuda:0 f32[2, 3, 4]");
  check ("", "t0 = prims.iota(64, start=0, step=1, device=devices.Device(\"cuda:0\"), dtype=dtypes.int64)",
         "cuda:0 i64[64]");
  check ("", "t0 = prims.full((2, 3), 0.0, device=devices.Device(\"cuda:0\"), dtype=dtypes.float32)",
         "cuda:0 f32[2, 3]");
  check ("", "t0 = prims.uniform((4, 8), 0.0, 1.0, device=devices.Device(\"cpu\"), dtype=dtypes.bfloat16)",
         "cpu bf16[4, 8]");
}

/* Every unary/binary elementwise prim of the op table: same shape; comparisons and isfinite/
 * signbit give bool; everything else keeps the input dtype (bitwise ops on int32). */
static void
test_prims_elementwise_all (void)
{
  guint n_unary = 0, n_binary = 0;

  for (guint id = 0; id < CS_N_OPS; id++)
    {
      const CsOp *op = cs_op_get (id);
      gboolean bitwise, is_bool;
      const char *dt;
      g_autofree char *decls = NULL, *stmt = NULL, *want = NULL;

      if (!cs_op_has_tag (op, CS_OP_TAG_PRIM) || op->category != CS_OP_CAT_ELEMENTWISE
          || op->id != (CsOpId) id || cs_op_has_tag (op, CS_OP_TAG_TERNARY))
        continue;
      {
        CsStmt probe = { 0 };
        probe.kind = CS_STMT_CALL;
        probe.op = op;
        probe.callee = op->name;
        if (!cs_meta_supports (&probe))
          continue;
      }
      bitwise = strstr (op->name, "bitwise") != NULL;
      dt = bitwise ? "i32" : "f32";
      is_bool = op->promo == CS_PROMO_ALWAYS_BOOL;
      want = g_strdup_printf ("cuda:0 %s[2, 3]", is_bool ? "b8" : dt);
      if (cs_op_has_tag (op, CS_OP_TAG_BINARY))
        {
          decls = g_strdup_printf ("a %s[2, 3]; b %s[2, 3]", dt, dt);
          stmt = g_strdup_printf ("t0 = %s(a, b)", op->name);
          n_binary++;
        }
      else
        {
          decls = g_strdup_printf ("a %s[2, 3]", dt);
          stmt = g_strdup_printf ("t0 = %s(a)", op->name);
          n_unary++;
        }
      check (decls, stmt, want);
    }
  /* the reference lists ~45 unary and ~25 binary elementwise prims */
  g_assert_cmpuint (n_unary, >=, 40);
  g_assert_cmpuint (n_binary, >=, 20);
  check_error ("a f32[2, 3]; b f16[2, 3]", "t0 = prims.add(a, b)", CS_META_ERROR_DTYPE, "same dtype");
  check_error ("a i64[2, 3]", "t0 = prims.mul(a, 0.5)", CS_META_ERROR_DTYPE, "float number");
}

static void
test_ltorch_elementwise (void)
{
  /* broadcast [8, 16] with [16]; bf16 stays bf16 */
  check ("a bf16[8, 16]; b bf16[16]", "t0 = ltorch.add(a, b, alpha=1)", "cuda:0 bf16[8, 16]");
  check ("a bf16[4, 1]; b bf16[1, 5]", "t0 = ltorch.sub(a, b, alpha=1)", "cuda:0 bf16[4, 5]");
  /* bf16 * python float stays bf16; bf16 * f16 -> f32 */
  check ("a bf16[3]", "t0 = ltorch.mul(a, 0.5)", "cuda:0 bf16[3]");
  check ("a bf16[3]; b f16[3]", "t0 = ltorch.mul(a, b)", "cuda:0 f32[3]");
  /* bf16 tensor with a 0-d f32 tensor stays bf16 (weak) */
  check ("a bf16[3]; b f32[]", "t0 = ltorch.mul(a, b)", "cuda:0 bf16[3]");
  /* int / int -> float32 */
  check ("a i64[4]; b i64[4]", "t0 = ltorch.true_divide(a, b)", "cuda:0 f32[4]");
  check ("a i64[4]", "t0 = ltorch.div(a, 2)", "cuda:0 f32[4]");
  check ("a i64[4]", "t0 = ltorch.exp(a)", "cuda:0 f32[4]");
  check ("a bf16[4]", "t0 = ltorch.neg(a)", "cuda:0 bf16[4]");
  for (guint i = 0; i < 7; i++)
    {
      static const char *ops[] = { "log", "tanh", "erf", "rsqrt", "sqrt", "reciprocal", "sigmoid" };
      g_autofree char *st = g_strdup_printf ("t0 = ltorch.%s(a)", ops[i]);
      check ("a f16[2, 3]", st, "cuda:0 f16[2, 3]");
    }
  check ("a bf16[2, 64, 344]", "t0 = ltorch.silu(a, False)", "cuda:0 bf16[2, 64, 344]");
  check ("a bf16[2, 64]", "t0 = ltorch.relu(a, False)", "cuda:0 bf16[2, 64]");
  check ("a bf16[64, 512]", "t0 = ltorch.gelu(a, approximate='tanh')", "cuda:0 bf16[64, 512]");
  check ("a bf16[64, 512]", "t0 = ltorch.gelu(a, approximate='none')", "cuda:0 bf16[64, 512]");
  check ("a f32[2, 64, 128]", "t0 = ltorch.pow(a, 2)", "cuda:0 f32[2, 64, 128]");
  check ("a i64[64, 1]; b i64[1, 64]", "t0 = ltorch.ge(a, b)", "cuda:0 b8[64, 64]");
  check ("p b8[64, 64]; a bf16[2, 4, 64, 64]", "t0 = ltorch.where(p, a, -float('inf'))",
         "cuda:0 bf16[2, 4, 64, 64]");
  check ("p b8[128, 1]; a i64[128, 1]", "t0 = ltorch.where(p, a, 512)", "cuda:0 i64[128, 1]");
  check ("a bf16[2, 4, 64, 64]", "t0 = ltorch.tril(a, 0, fill_value=-float('inf'))", "cuda:0 bf16[2, 4, 64, 64]");
  /* executor alias uses the ltorch meta */
  check ("a bf16[4, 8]; b bf16[8, 2]", "t0 = torch.matmul(a, b)", "cuda:0 bf16[4, 2]");
}

static void
test_ltorch_reduction_norm (void)
{
  check ("a f32[2, 4, 64, 64]", "t0 = ltorch.amax(a, -1, True)", "cuda:0 f32[2, 4, 64, 1]");
  check ("a f32[2, 4, 64, 64]", "t0 = ltorch.sum(a, -1, True, dtype=None)", "cuda:0 f32[2, 4, 64, 1]");
  check ("a b8[128, 1]", "t0 = ltorch.sum(a, None, False, dtype=None)", "cuda:0 i64[]");
  check ("a bf16[2, 3]", "t0 = ltorch.sum(a, 0, False, dtype=dtypes.float32)", "cuda:0 f32[3]");
  check ("a f32[2, 64, 128]", "t0 = ltorch.mean(a, -1, True, dtype=None)", "cuda:0 f32[2, 64, 1]");
  check ("a bf16[8, 32]", "t0 = ltorch.mean(a, [0, 1], False, dtype=None)", "cuda:0 bf16[]");
  check ("a bf16[8, 32]", "(t0, t1) = ltorch.var_mean(a, (1,), keepdim=True, correction=0)",
         "cuda:0 bf16[8, 1]; cuda:0 bf16[8, 1]");
  check ("a f32[128, 512]", "t0 = ltorch.logsumexp(a, 1, True)", "cuda:0 f32[128, 1]");
  check ("a bf16[2, 4, 64, 64]", "t0 = ltorch._softmax(a, -1, dtype=None)", "cuda:0 bf16[2, 4, 64, 64]");
  check ("a bf16[4, 8]", "t0 = ltorch.softmax(a, -1, dtype=dtypes.float32)", "cuda:0 f32[4, 8]");
  check ("a f32[128, 512]", "t0 = ltorch.log_softmax(a, 1, dtype=None)", "cuda:0 f32[128, 512]");
  check ("x bf16[8, 768]; w bf16[768]; b bf16[768]", "t0 = ltorch.layer_norm(x, [768], w, b, 1e-05)",
         "cuda:0 bf16[8, 768]");
  check ("x bf16[2, 8, 64]; w bf16[64]", "t0 = ltorch.rms_norm(x, [64], w, 1e-06)", "cuda:0 bf16[2, 8, 64]");
}

static void
test_ltorch_matmul (void)
{
  /* every operand-rank combination of torch.matmul */
  check ("a bf16[16]; b bf16[16]", "t0 = ltorch.matmul(a, b)", "cuda:0 bf16[]");
  check ("a bf16[16]; b bf16[3, 16, 5]", "t0 = ltorch.matmul(a, b)", "cuda:0 bf16[3, 5]");
  check ("a bf16[3, 7, 16]; b bf16[16]", "t0 = ltorch.matmul(a, b)", "cuda:0 bf16[3, 7]");
  check ("a bf16[8, 16]; b bf16[16, 4]", "t0 = ltorch.matmul(a, b)", "cuda:0 bf16[8, 4]");
  check ("a bf16[2, 64, 128]; b bf16[128, 32]", "t0 = ltorch.matmul(a, b)", "cuda:0 bf16[2, 64, 32]");
  check ("a bf16[5, 1, 8, 16]; b bf16[3, 16, 4]", "t0 = ltorch.matmul(a, b)", "cuda:0 bf16[5, 3, 8, 4]");
  check ("x bf16[2, 64, 128]; w bf16[344, 128]", "t0 = ltorch.linear(x, w, None)", "cuda:0 bf16[2, 64, 344]");
  check ("x bf16[64, 128]; w bf16[512, 128]; b bf16[512]", "t0 = torch.nn.functional.linear(x, w, b)",
         "cuda:0 bf16[64, 512]");
}

static void
test_ltorch_shape (void)
{
  check ("a bf16[2, 64, 128]", "t0 = ltorch.view(a, 2, 64, 4, 32)", "cuda:0 bf16[2, 64, 4, 32]");
  check ("a f32[2, 64, 512]", "t0 = ltorch.view(a, -1, 512)", "cuda:0 f32[128, 512]");
  check ("a i64[2, 64]", "t0 = ltorch.reshape(a, [128])", "cuda:0 i64[128]");
  check ("a bf16[2, 4, 64, 32]", "t0 = ltorch.reshape(a, (8, -1))", "cuda:0 bf16[8, 2048]");
  check ("a bf16[2, 64, 4, 32]", "t0 = ltorch.transpose(a, 1, 2)", "cuda:0 bf16[2, 4, 64, 32]");
  check ("a bf16[2, 64, 4, 32]", "t0 = ltorch.permute(a, 0, 2, 3, 1)", "cuda:0 bf16[2, 4, 32, 64]");
  check ("a bf16[2, 64, 4, 32]", "t0 = ltorch.permute(a, (3, 2, 1, 0))", "cuda:0 bf16[32, 4, 64, 2]");
  check ("a f32[128, 1]", "t0 = ltorch.expand(a, 128, 512)", "cuda:0 f32[128, 512]");
  check ("a f32[1, 4]", "t0 = ltorch.expand(a, 3, -1, 4)", "cuda:0 f32[3, 1, 4]");
  check ("a i64[64]", "t0 = ltorch.unsqueeze(a, -1)", "cuda:0 i64[64, 1]");
  check ("a i64[64]", "t0 = ltorch.unsqueeze(a, -2)", "cuda:0 i64[1, 64]");
  check ("a f32[4, 1, 3, 1]", "t0 = ltorch.squeeze(a, None)", "cuda:0 f32[4, 3]");
  check ("a f32[4, 1, 3, 1]", "t0 = ltorch.squeeze(a, 0)", "cuda:0 f32[4, 1, 3, 1]");
  check ("a f32[4, 1, 3, 1]", "t0 = ltorch.squeeze(a, -1)", "cuda:0 f32[4, 1, 3]");
  check ("a bf16[2, 4, 64, 32]", "t0 = ltorch.getitem(a, (..., slice(16,None,None)))", "cuda:0 bf16[2, 4, 64, 16]");
  check ("a bf16[64, 32]", "t0 = ltorch.getitem(a, slice(None,64,None))", "cuda:0 bf16[64, 32]");
  check ("a bf16[8, 32]", "t0 = ltorch.getitem(a, (1, None, slice(0,10,3)))", "cuda:0 bf16[1, 4]");
  check ("a bf16[8, 32]", "t0 = ltorch.getitem(a, -1)", "cuda:0 bf16[32]");
  check ("a bf16[2, 4, 64, 16]; b bf16[2, 4, 64, 16]", "t0 = ltorch.cat((a, b), -1)", "cuda:0 bf16[2, 4, 64, 32]");
  check ("a bf16[2, 3]; b f32[2, 3]", "t0 = ltorch.cat([a, b], 0)", "cuda:0 f32[4, 3]");
  check ("a bf16[2, 64, 3]", "(t0, t1, t2) = ltorch.split(a, (1, 1, 1), 2)",
         "cuda:0 bf16[2, 64, 1]; cuda:0 bf16[2, 64, 1]; cuda:0 bf16[2, 64, 1]");
  check ("a bf16[10, 4]", "(t0, t1, t2) = ltorch.split(a, 4)",
         "cuda:0 bf16[4, 4]; cuda:0 bf16[4, 4]; cuda:0 bf16[2, 4]");
  check ("a bf16[4, 8]", "t0 = ltorch.to(a, dtypes.float32, None, device=None, dtype=None, copy=False, memory_format=None)",
         "cuda:0 f32[4, 8]");
  check ("a bf16[4, 8]", "t0 = ltorch.to(a, devices.Device(\"cpu\"))", "cpu bf16[4, 8]");
  check ("a bf16[4, 8]", "t0 = ltorch.float(a)", "cuda:0 f32[4, 8]");
  check ("a f32[4, 8]; b f16[2]", "t0 = ltorch.type_as(a, b)", "cuda:0 f16[4, 8]");
  check ("a f32[2, 3, 4]", "t0 = ltorch.flatten(a, 1, -1)", "cuda:0 f32[2, 12]");
}

static void
test_ltorch_nn (void)
{
  check ("i i64[2, 64]; w bf16[512, 128]", "x = ltorch.embedding(i, w, None, None, 2.0, False, False)",
         "cuda:0 bf16[2, 64, 128]");
  check ("a bf16[2, 4, 64, 64]", "t0 = ltorch.dropout(a, 0.0, True, False)", "cuda:0 bf16[2, 4, 64, 64]");
  check ("a f32[128, 512]; t i64[128]", "t0 = ltorch.cross_entropy(a, t, None, None, -100, None, 'mean', 0.0)",
         "cuda:0 f32[]");
  check ("a f32[128, 512]; t i64[128]", "t0 = ltorch.cross_entropy(a, t, None, None, -100, None, 'none', 0.0)",
         "cuda:0 f32[128]");
  check ("a f32[4, 10, 7]; t i64[4, 7]", "t0 = ltorch.nll_loss(a, t, None, -100, 'none')", "cuda:0 f32[4, 7]");
  check ("q bf16[2, 4, 64, 32]; k bf16[2, 4, 80, 32]; v bf16[2, 4, 80, 16]",
         "y = ltorch.scaled_dot_product_attention(q, k, v, None, 0.0, True, scale=None)",
         "cuda:0 bf16[2, 4, 64, 16]");
  /* the sdpa executor's backward as Thunder's final traces print it, outputs untyped: the
   * gradients take the types of query, key, value (and the mask) */
  check ("g bf16[2, 4, 64, 16]; q bf16[2, 4, 64, 32]; k bf16[2, 4, 80, 32]; v bf16[2, 4, 80, 16]; "
         "o bf16[2, 4, 64, 16]; l f32[2, 4, 64]; cq i64[3]; ck i64[3]; ps i64[]; po i64[]",
         "(gq, gk, gv) = sdpafx_scaled_dot_product_efficient_attention_backward(g, q, k, v, o, l, cq, "
         "ck, 64, 80, 0.0, False, ps, po, scale=None)",
         "cuda:0 bf16[2, 4, 64, 32]; cuda:0 bf16[2, 4, 80, 32]; cuda:0 bf16[2, 4, 80, 16]");
  check ("g f32[2, 4, 64, 16]; q f32[2, 4, 64, 32]; k f32[2, 4, 80, 32]; v f32[2, 4, 80, 16]; "
         "m f32[1, 1, 64, 80]; o f32[2, 4, 64, 16]; l f32[2, 4, 64]; ps i64[]; po i64[]",
         "(gq, gk, gv, gm) = sdpaex_scaled_dot_product_efficient_attention_backward(g, q, k, v, m, o, "
         "l, ps, po, 0.0, False, scale=None)",
         "cuda:0 f32[2, 4, 64, 32]; cuda:0 f32[2, 4, 80, 32]; cuda:0 f32[2, 4, 80, 16]; "
         "cuda:0 f32[1, 1, 64, 80]");
  check ("g f32[2, 4, 64, 16]; q f32[2, 4, 64, 32]; k f32[2, 4, 80, 32]; v f32[2, 4, 80, 16]; "
         "o f32[2, 4, 64, 16]; l f32[2, 4, 64]; ps i64[]; po i64[]",
         "(gq, gk, gv, _) = sdpaex_scaled_dot_product_efficient_attention_backward(g, q, k, v, None, o, "
         "l, ps, po, 0.0, False, scale=None)",
         "cuda:0 f32[2, 4, 64, 32]; cuda:0 f32[2, 4, 80, 32]; cuda:0 f32[2, 4, 80, 16]");
  check ("a f32[128, 513]; i i64[128, 1]", "t0 = ltorch.take_along_dim(a, i, 1)", "cuda:0 f32[128, 1]");
  check ("", "t0 = ltorch.arange(64, None, 1, device=devices.Device(\"cuda:0\"), dtype=None)", "cuda:0 i64[64]");
  /* creation: dtype from the fill value's Python type, else float32 */
  check ("", "t0 = ltorch.full((2, 3), 1.5, device=devices.Device(\"cuda:0\"), dtype=None)", "cuda:0 f32[2, 3]");
  check ("", "t0 = ltorch.full([2], 7, device=devices.Device(\"cuda:0\"), dtype=None)", "cuda:0 i64[2]");
  check ("", "t0 = ltorch.full((2,), True, device=devices.Device(\"cuda:0\"), dtype=None)", "cuda:0 b8[2]");
  check ("", "t0 = ltorch.zeros(4, 5, device=devices.Device(\"cuda:0\"), dtype=dtypes.bfloat16)", "cuda:0 bf16[4, 5]");
  check ("", "t0 = ltorch.ones((3,), device=devices.Device(\"cuda:0\"), dtype=None)", "cuda:0 f32[3]");
  check ("a i64[3]", "t0 = ltorch.ones_like(a, device=None, dtype=None)", "cuda:0 i64[3]");
  check ("a bf16[3, 2]", "t0 = ltorch.full_like(a, 0.5, device=None, dtype=dtypes.float32)", "cuda:0 f32[3, 2]");
  /* uniform_like (dropout's draw): a's shape, dtype= when given, else a's */
  check ("a bf16[3, 2]", "t0 = ltorch.uniform_like(a, 0.0, 1.0, device=None, dtype=dtypes.float32)", "cuda:0 f32[3, 2]");
  check ("a bf16[3, 2]", "t0 = ltorch.uniform_like(a, maxval=2.0)", "cuda:0 bf16[3, 2]");
  /* ceil((10 - 1) / 4) = 3; a float start gives float32 */
  check ("", "t0 = ltorch.arange(1.0, 10, 4, device=devices.Device(\"cuda:0\"), dtype=None)", "cuda:0 f32[3]");
}

static void
test_typed_outputs (void)
{
  /* a typed output that agrees passes; one that disagrees is a MISMATCH naming both */
  check ("a bf16[8, 16]; w bf16[16, 16]", "t5 = ltorch.matmul(a, w)  # t5: \"cuda:0 bf16[8, 16]\"",
         "cuda:0 bf16[8, 16]");
  check_error ("a bf16[8, 16]; w bf16[16, 16]", "t5 = ltorch.matmul(a, w)  # t5: \"cuda:0 f32[8, 16]\"",
               CS_META_ERROR_MISMATCH, "bf16[8, 16]");
  check_error ("a bf16[8, 16]; w bf16[16, 16]", "t5 = ltorch.matmul(a, w)  # t5: \"cuda:0 bf16[8, 15]\"",
               CS_META_ERROR_MISMATCH, "t5");
}

static void
test_errors (void)
{
  check_error ("a bf16[8, 16]; b bf16[15, 16]", "t0 = ltorch.matmul(a, b)", CS_META_ERROR_SHAPE,
               "shapes [8, 16] and [15, 16] cannot be multiplied");
  check_error ("a bf16[8, 16]; b f32[16, 4]", "t0 = prims.matmul(a, b)", CS_META_ERROR_DTYPE, "differ in dtype");
  check_error ("a bf16[8, 16]; b bf16[7]", "t0 = ltorch.add(a, b, alpha=1)", CS_META_ERROR_SHAPE,
               "cannot be broadcast");
  check_error ("a f32[8, 16]; b f32[16]", "t0 = prims.add(a, b)", CS_META_ERROR_SHAPE, "same shape");
  check_error ("a f32[8, 16]", "t0 = ltorch.sum(a, 2, False, dtype=None)", CS_META_ERROR_SHAPE,
               "dim 2 is out of range");
  check_error ("a f32[8, 16]", "t0 = ltorch.transpose(a, 0, -3)", CS_META_ERROR_SHAPE, "out of range");
  check_error ("a f32[8, 16]", "t0 = prims.reshape(a, (3, 40))", CS_META_ERROR_SHAPE, "cannot reshape");
  check_error ("a f32[8, 16]", "t0 = ltorch.view(a, -1, 7)", CS_META_ERROR_SHAPE, "cannot reshape");
  check_error ("b f32[16]", "t0 = prims.broadcast_in_dim(b, (8, 15), (1,))", CS_META_ERROR_SHAPE,
               "cannot broadcast");
  check_error ("a f32[8, 16]", "t0 = prims.squeeze(a, (0,))", CS_META_ERROR_SHAPE, "cannot squeeze");
  check_error ("a f32[8, 16]", "t0 = prims.slice_prim(a, [0, 0], [9, 16], [1, 1])", CS_META_ERROR_SHAPE,
               "out of bounds");
  check_error ("p f32[4]; a f32[4]", "t0 = ltorch.where(p, a, 0)", CS_META_ERROR_DTYPE, "not bool");
  check_error ("x bf16[64, 128]; w bf16[512, 127]", "t0 = ltorch.linear(x, w, None)", CS_META_ERROR_SHAPE,
               "cannot be multiplied");
  check_error ("x bf16[8, 768]; w bf16[512]", "t0 = ltorch.layer_norm(x, [768], w, None, 1e-05)",
               CS_META_ERROR_SHAPE, "weight [512]");
  check_error ("a f32[128, 512]; t f32[64]", "t0 = ltorch.cross_entropy(a, t, None, None, -100, None, 'mean', 0.0)",
               CS_META_ERROR_DTYPE, "integer");
  check_error ("a f32[4, 5]", "t0 = ltorch.frobnicate(a)", CS_META_ERROR_UNSUPPORTED, "t0");
  check_error ("a bf16[4, 5]", "t0 = ltorch.getitem(a, (0, 1, 2))", CS_META_ERROR_SHAPE, "too many indices");
  check_error ("a bf16[4, 5]", "t0 = ltorch.split(a, (2, 1), 0)", CS_META_ERROR_SHAPE, "sum to 3");
}

/* A string argument of the schema (gelu's approximate, div's rounding_mode) passed something
 * else is refused by cs_meta_check_trace at the statement, as torch.nn.functional.gelu
 * refuses approximate=5 (its readers would take it for absent: approximate='none'), and so
 * are a keyword a Thunder symbol's schema does not declare and positional arguments past its
 * signature's. */
static void
test_string_args (void)
{
  static const struct { const char *stmt; const char *error; } cases[] = {
    { "t0 = ltorch.gelu(a, approximate=5)", "ltorch.gelu: argument 'approximate' takes a string or None, not 5" },
    { "t0 = ltorch.div(a, a, rounding_mode=1.5)", "ltorch.div: argument 'rounding_mode' takes a string or None, not 1.5" },
    { "t0 = ltorch.gelu(a, approximate='tanh')", NULL },
    /* Python's "got an unexpected keyword argument", for Thunder's own symbols */
    { "t0 = ltorch.gelu(a, approximate='tanh', bogus=3)", "ltorch.gelu: unexpected keyword argument 'bogus' (its arguments: a, approximate)" },
    { "t0 = prims.neg(a, bogus=3)", "prims.neg: unexpected keyword argument 'bogus' (its arguments: a)" },
    /* executor names read their semantic op's schema, whose keywords may be spelt otherwise */
    { "t0 = torch.nn.functional.gelu(a, approximate='tanh', bogus=3)", NULL },
    /* Python's "takes N positional arguments but M were given"; not for *args signatures */
    { "t0 = prims.neg(a, a)", "prims.neg: takes 1 positional argument but 2 were given" },
    { "t0 = ltorch.linear(a, a, None, a)", "ltorch.linear: takes 3 positional arguments but 4 were given" },
    { "t0 = ltorch.reshape(a, 2, 2)", NULL },
    { "t0 = ltorch.softmax(a, 0, None, 3)", NULL },
    { "t0 = ltorch.div(a, a, rounding_mode=None)", NULL },
    { "t0 = ltorch.div(a, a, rounding_mode='floor')", NULL },
  };

  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr (GError) error = NULL;
      g_autofree char *where = NULL;
      guint line;
      CsTrace *trace = make_trace ("a f32[4]", cases[i].stmt, &line);

      if (cases[i].error == NULL)
        {
          g_assert_true (cs_meta_check_trace (trace, &error));
          g_assert_no_error (error);
        }
      else
        {
          g_assert_false (cs_meta_check_trace (trace, &error));
          g_assert_error (error, CS_META_ERROR, CS_META_ERROR_ARGS);
          where = g_strdup_printf (":%u:3: ", line);
          g_assert_nonnull (strstr (error->message, where));
          g_assert_nonnull (strstr (error->message, cases[i].error));
        }
      cs_trace_unref (trace);
    }
}

/* Every bundled sample parses and every statement's printed type agrees with the inference. */
static void
check_sample_dir (const char *dir, guint *n_files)
{
  g_autoptr (GDir) d = g_dir_open (dir, 0, NULL);
  const char *name;

  g_assert_nonnull (d);
  while ((name = g_dir_read_name (d)) != NULL)
    {
      g_autofree char *path = g_build_filename (dir, name, NULL);
      g_autoptr (CsTraceList) list = NULL;
      g_autofree char *text = NULL;
      GError *error = NULL;
      CsTrace *trace;
      guint n_checked = 0;

      if (!g_str_has_suffix (name, ".txt"))
        continue;
      g_assert_true (g_file_get_contents (path, &text, NULL, NULL));
      g_assert_true (g_str_has_prefix (text, "# castscope sample:"));
      list = cs_parse_file (path, &error);
      g_assert_no_error (error);
      trace = g_ptr_array_index (list->traces, 0);
      for (guint i = 0; i < trace->n_stmts; i++)
        {
          CsStmt *s = trace->stmts[i];
          CsProxy *o;

          if (s->kind != CS_STMT_CALL)
            continue;
          /* every sample statement is typed and castscope has a meta rule for it */
          if (!cs_meta_supports (s))
            g_error ("%s: no meta for %s", path, s->callee);
          o = cs_stmt_get_output (s);
          g_assert_nonnull (o);
          g_assert_true (o->typed);
          if (!cs_meta_infer (trace, s, &error))
            g_error ("%s: %s", path, error->message);
          n_checked++;
        }
      g_assert_cmpuint (n_checked, >, 0);
      (*n_files)++;
    }
}

static void
test_samples (void)
{
  const char *data = g_getenv ("CS_DATA_DIR");
  g_autofree char *bench = NULL;
  guint n = 0;

  if (data == NULL)
    {
      g_test_skip ("CS_DATA_DIR not set");
      return;
    }
  check_sample_dir (data, &n);
  g_assert_cmpuint (n, >=, 6);
  bench = g_build_filename (data, "bench", NULL);
  check_sample_dir (bench, &n);
  g_assert_cmpuint (n, >=, 12);
}

/* The shared Thunder traces type-check too: every supported top-level statement's printed
 * type equals the inference. */
static void
test_shared_traces (void)
{
  const char *dir = g_getenv ("CS_SHARED_TRACES");
  static const char *files[] = {
    "thunder_a_seed_matmul_initial.txt", "thunder_b_mlp_gelu_initial.txt",
    "thunder_e_softmax_attention_initial.txt", "thunder_llama_stack_initial.txt",
    "nb_sdpa_initial_decomposition.txt",
  };
  guint n_checked = 0;

  if (dir == NULL || !g_file_test (dir, G_FILE_TEST_IS_DIR))
    {
      g_test_skip ("shared traces not available");
      return;
    }
  for (guint f = 0; f < G_N_ELEMENTS (files); f++)
    {
      g_autofree char *path = g_build_filename (dir, files[f], NULL);
      g_autoptr (CsTraceList) list = NULL;
      GError *error = NULL;
      CsTrace *trace;

      list = cs_parse_file (path, &error);
      g_assert_no_error (error);
      trace = g_ptr_array_index (list->traces, 0);
      for (guint i = 0; i < trace->n_stmts; i++)
        {
          CsStmt *s = trace->stmts[i];

          if (s->kind != CS_STMT_CALL || !cs_meta_supports (s) || cs_stmt_get_output (s) == NULL)
            continue;
          if (!cs_meta_infer (trace, s, &error))
            g_error ("%s: %s", path, error->message);
          n_checked++;
        }
    }
  /* the llama sample alone has hundreds of statements */
  g_assert_cmpuint (n_checked, >, 300);
}

/* Every statement (top level and every subsymbol level) of every shared trace whose inputs
 * are typed and whose op has a meta rule: the printed output types equal the inference. */
static guint n_meta_checked, n_meta_failed;

static void
meta_visit (CsTrace *t, const char *base, CsStmt *s)
{
  GError *error = NULL;
  g_autoptr (GPtrArray) ins = g_ptr_array_new ();
  gboolean typed = TRUE;

  for (guint i = 0; i < s->n_subs; i++)
    meta_visit (t, base, s->subs[i]);
  if (s->kind != CS_STMT_CALL || !cs_meta_supports (s) || s->out == NULL)
    return;
  cs_stmt_collect_inputs (s, ins);
  for (guint i = 0; i < ins->len; i++)
    {
      CsProxy *p = g_ptr_array_index (ins, i);
      typed &= p->typed && p->kind != CS_PROXY_OTHER;
    }
  if (!typed)
    return;
  n_meta_checked++;
  if (!cs_meta_infer (t, s, &error))
    {
      g_printerr ("# %s: %s\n", base, error->message);
      n_meta_failed++;
      g_clear_error (&error);
    }
}

static void
test_shared_all (void)
{
  const char *dir = g_getenv ("CS_SHARED_TRACES");
  g_autoptr (GDir) d = NULL;
  const char *name;

  if (dir == NULL || !g_file_test (dir, G_FILE_TEST_IS_DIR))
    {
      g_test_skip ("shared traces not available");
      return;
    }
  d = g_dir_open (dir, 0, NULL);
  while ((name = g_dir_read_name (d)) != NULL)
    {
      g_autofree char *path = g_build_filename (dir, name, NULL);
      g_autoptr (CsTraceList) list = NULL;
      GError *error = NULL;

      if (!g_str_has_suffix (name, ".txt"))
        continue;
      list = cs_parse_file (path, &error);
      g_assert_no_error (error);
      for (guint ti = 0; ti < list->traces->len; ti++)
        {
          CsTrace *t = g_ptr_array_index (list->traces, ti);
          for (guint i = 0; i < t->n_stmts; i++)
            meta_visit (t, name, t->stmts[i]);
        }
    }
  g_test_message ("%u statements checked, %u disagree", n_meta_checked, n_meta_failed);
  g_assert_cmpuint (n_meta_checked, >, 5000);
  g_assert_cmpuint (n_meta_failed, ==, 0);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);

  g_test_add_func ("/core/meta/prims/shape", test_prims_shape);
  g_test_add_func ("/core/meta/prims/elementwise", test_prims_elementwise);
  g_test_add_func ("/core/meta/prims/elementwise-all", test_prims_elementwise_all);
  g_test_add_func ("/core/meta/prims/reduction", test_prims_reduction);
  g_test_add_func ("/core/meta/prims/matmul-index-creation", test_prims_matmul_index);
  g_test_add_func ("/core/meta/ltorch/elementwise", test_ltorch_elementwise);
  g_test_add_func ("/core/meta/ltorch/reduction-norm", test_ltorch_reduction_norm);
  g_test_add_func ("/core/meta/ltorch/matmul", test_ltorch_matmul);
  g_test_add_func ("/core/meta/ltorch/shape", test_ltorch_shape);
  g_test_add_func ("/core/meta/ltorch/nn", test_ltorch_nn);
  g_test_add_func ("/core/meta/typed-outputs", test_typed_outputs);
  g_test_add_func ("/core/meta/errors", test_errors);
  g_test_add_func ("/core/meta/string-args", test_string_args);
  g_test_add_func ("/core/meta/samples", test_samples);
  g_test_add_func ("/core/meta/shared-traces", test_shared_traces);
  g_test_add_func ("/core/meta/shared-traces-all-levels", test_shared_all);

  return g_test_run ();
}
