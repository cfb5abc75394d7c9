/* test-core-decompose.c: ltorch -> prims decompositions (core/cs-decompositions.c, core/cs-decompose.c).
 *
 * Oracle: the decomposition comments Thunder printed in ../shared/traces.  Decomposing a
 * top-level ltorch statement must reproduce its printed subsymbols up to proxy names: same
 * callees in order, same literal arguments, same output dtypes and shapes, same dataflow (a
 * name-insensitive comparison that maps printed intermediates onto the new ones).
 * Ops without a printed oracle are checked by hand-counted structure (e.g. a bf16 ltorch.mul has
 * exactly 3 converts under Thunder's policy and none under elementwise=native).
 */
#include "cs-config.h"

#include "cs-decompose.h"
#include "cs-meta.h"
#include "cs-ops.h"
#include "cs-parse.h"
#include "cs-print.h"
#include "cs-ref.h"
#include "cs-tensor.h"

#include <math.h>

#include <string.h>

/* ------------------------------------------------------------------------------------------ */
/* Name-insensitive comparison                                                                 */

typedef struct
{
  GHashTable *map;   /* expected CsProxy* -> actual CsProxy* */
  GString    *why;   /* first difference */
} Cmp;

static gboolean cmp_stmt (Cmp *c, const CsStmt *e, const CsStmt *a);

static gboolean
cmp_value (Cmp *c, const CsValue *e, const CsValue *a)
{
  if (e == NULL || a == NULL)
    return e == a;
  if (e->kind != a->kind)
    {
      g_string_append_printf (c->why, "value kinds %d vs %d", e->kind, a->kind);
      return FALSE;
    }
  switch (e->kind)
    {
    case CS_VALUE_PROXY:
      {
        CsProxy *m = g_hash_table_lookup (c->map, e->u.proxy);
        if ((m ? m : e->u.proxy) != a->u.proxy)
          {
            g_string_append_printf (c->why, "reads %s where Thunder reads %s", a->u.proxy->name,
                                    e->u.proxy->name);
            return FALSE;
          }
        return TRUE;
      }
    case CS_VALUE_TUPLE:
    case CS_VALUE_LIST:
      if (e->u.seq.n != a->u.seq.n)
        {
          g_string_append (c->why, "sequence lengths differ");
          return FALSE;
        }
      for (guint i = 0; i < e->u.seq.n; i++)
        if (!cmp_value (c, e->u.seq.items[i], a->u.seq.items[i]))
          return FALSE;
      return TRUE;
    default:
      {
        /* equal values and equal printed text (quotes, float spelling) */
        GString *s1 = g_string_new (NULL), *s2 = g_string_new (NULL);
        gboolean ok;

        cs_print_value_to (s1, e);
        cs_print_value_to (s2, a);
        ok = cs_value_equal (e, a) && g_str_equal (s1->str, s2->str);
        if (!ok)
          g_string_append_printf (c->why, "literal %s where Thunder prints %s", s2->str, s1->str);
        g_string_free (s1, TRUE);
        g_string_free (s2, TRUE);
        return ok;
      }
    }
}

static void
leaves (const CsValue *v, GPtrArray *acc)
{
  if (v == NULL)
    return;
  if (v->kind == CS_VALUE_TUPLE || v->kind == CS_VALUE_LIST)
    {
      for (guint i = 0; i < v->u.seq.n; i++)
        leaves (v->u.seq.items[i], acc);
      return;
    }
  g_ptr_array_add (acc, (gpointer) v);
}

static gboolean
cmp_stmt (Cmp *c, const CsStmt *e, const CsStmt *a)
{
  g_autoptr (GPtrArray) le = g_ptr_array_new ();
  g_autoptr (GPtrArray) la = g_ptr_array_new ();

  if (g_strcmp0 (e->callee, a->callee) != 0)
    {
      g_string_append_printf (c->why, "callee %s where Thunder has %s", a->callee, e->callee);
      return FALSE;
    }
  if (e->n_args != a->n_args)
    {
      g_string_append_printf (c->why, "%s: %u args where Thunder has %u", e->callee, a->n_args, e->n_args);
      return FALSE;
    }
  for (guint i = 0; i < e->n_args; i++)
    {
      if (g_strcmp0 (e->args[i].name, a->args[i].name) != 0)
        {
          g_string_append_printf (c->why, "%s: arg %u named %s vs %s", e->callee, i,
                                  a->args[i].name ? a->args[i].name : "-",
                                  e->args[i].name ? e->args[i].name : "-");
          return FALSE;
        }
      if (!cmp_value (c, e->args[i].value, a->args[i].value))
        {
          g_string_append_printf (c->why, " (%s arg %u)", e->callee, i);
          return FALSE;
        }
    }
  leaves (e->out, le);
  leaves (a->out, la);
  if (le->len != la->len)
    {
      g_string_append_printf (c->why, "%s: %u outputs vs %u", e->callee, la->len, le->len);
      return FALSE;
    }
  for (guint i = 0; i < le->len; i++)
    {
      const CsValue *ve = g_ptr_array_index (le, i), *va = g_ptr_array_index (la, i);

      if (ve->kind == CS_VALUE_PROXY && va->kind == CS_VALUE_PROXY)
        {
          CsProxy *pe = ve->u.proxy, *pa = va->u.proxy;

          if (pe->typed && pe->kind == CS_PROXY_TENSOR)
            {
              g_autofree char *te = cs_proxy_type_string (pe);
              g_autofree char *ta = cs_proxy_type_string (pa);
              if (g_strcmp0 (te, ta) != 0)
                {
                  g_string_append_printf (c->why, "%s: output %s \"%s\" where Thunder has \"%s\"",
                                          e->callee, pa->name, ta, te);
                  return FALSE;
                }
            }
          if (pe != pa)
            g_hash_table_insert (c->map, pe, pa);
        }
      else if (ve->kind != va->kind)
        {
          g_string_append_printf (c->why, "%s: output kinds differ", e->callee);
          return FALSE;
        }
    }
  if (e->n_subs != a->n_subs)
    {
      g_string_append_printf (c->why, "%s: %u subsymbols where Thunder has %u", e->callee, a->n_subs, e->n_subs);
      return FALSE;
    }
  for (guint i = 0; i < e->n_subs; i++)
    if (!cmp_stmt (c, e->subs[i], a->subs[i]))
      return FALSE;
  return TRUE;
}

static gboolean
cmp_lists (CsStmt *const *e, guint ne, GPtrArray *a, GString *why)
{
  Cmp c = { g_hash_table_new (NULL, NULL), why };
  gboolean ok = TRUE;

  if (ne != a->len)
    {
      g_string_append_printf (why, "%u statements where Thunder has %u", a->len, ne);
      ok = FALSE;
    }
  for (guint i = 0; ok && i < ne; i++)
    ok = cmp_stmt (&c, e[i], g_ptr_array_index (a, i));
  g_hash_table_unref (c.map);
  return ok;
}

/* ------------------------------------------------------------------------------------------ */
/* Helpers                                                                                     */

static CsTrace *
parse_text (const char *text)
{
  GError *error = NULL;
  CsTrace *t = cs_parse_trace (text, "test", &error);

  g_assert_no_error (error);
  return t;
}

static CsStmt *
nth_call (CsTrace *t, guint n)
{
  for (guint i = 0; i < t->n_stmts; i++)
    if (t->stmts[i]->kind == CS_STMT_CALL && n-- == 0)
      return t->stmts[i];
  g_assert_not_reached ();
  return NULL;
}

/* Callees of a flat list, joined by spaces (module prefix dropped). */
static char *
callees (GPtrArray *stmts)
{
  GString *s = g_string_new (NULL);

  for (guint i = 0; i < stmts->len; i++)
    {
      const CsStmt *st = g_ptr_array_index (stmts, i);
      const char *dot = strrchr (st->callee, '.');
      g_string_append_printf (s, "%s%s", i ? " " : "", dot ? dot + 1 : st->callee);
    }
  return g_string_free (s, FALSE);
}

static guint
count_callee (GPtrArray *stmts, const char *callee)
{
  guint n = 0;

  for (guint i = 0; i < stmts->len; i++)
    {
      const CsStmt *st = g_ptr_array_index (stmts, i);
      if (g_strcmp0 (st->callee, callee) == 0)
        n++;
    }
  return n;
}

static GPtrArray *
decompose (CsTrace *t, CsStmt *s, const CsPolicy *policy, gboolean to_prims)
{
  GPtrArray *out = g_ptr_array_new ();
  GError *error = NULL;
  gboolean ok = to_prims ? cs_decompose_to_prims (t, s, policy, out, &error)
                         : cs_decompose_stmt (t, s, policy, out, &error);

  if (!ok)
    g_error ("%s: %s", s->callee, error->message);
  return out;
}

#define HEADER "def computation(%s):\n"

/* ------------------------------------------------------------------------------------------ */
/* Hand-checked cases                                                                          */

/* The seed add: t4 = ltorch.add(a, b, alpha=1) with a bf16[8, 16], b bf16[16] decomposes into
 * broadcast b -> cvt a -> cvt b -> prims.add (f32) -> cvt bf16 writing t4 (Thunder's printed
 * subsymbols in thunder_a_seed_matmul_initial.txt, written out here by hand). */
static void
test_seed_add (void)
{
  g_autoptr (CsTrace) t = parse_text (
    "def computation(a, b, w):\n"
    "  # a: \"cuda:0 bf16[8, 16]\"\n"
    "  # b: \"cuda:0 bf16[16]\"\n"
    "  # w: \"cuda:0 bf16[16, 16]\"\n"
    "  t4 = ltorch.add(a, b, alpha=1)  # t4: \"cuda:0 bf16[8, 16]\"\n"
    "  t5 = ltorch.matmul(t4, w)  # t5: \"cuda:0 bf16[8, 16]\"\n"
    "  return (t5,)\n");
  CsStmt *add = nth_call (t, 0), *mm = nth_call (t, 1);
  g_autoptr (GPtrArray) out = decompose (t, add, NULL, FALSE);
  g_autoptr (GPtrArray) out2 = NULL;
  g_autofree char *names = callees (out);
  CsStmt *bc, *last;
  g_autofree char *s_bc = NULL, *s_last = NULL;
  GString *buf = g_string_new (NULL);

  g_assert_cmpstr (names, ==, "broadcast_in_dim convert_element_type convert_element_type add convert_element_type");
  bc = g_ptr_array_index (out, 0);
  cs_print_stmt_to (buf, bc, 0, CS_PRINT_DEFAULT);
  /* the printed form of the broadcast, up to its fresh output name */
  g_assert_nonnull (strstr (buf->str, "prims.broadcast_in_dim(b, (8, 16), (1,))"));
  g_assert_nonnull (strstr (buf->str, "\"cuda:0 bf16[8, 16]\""));
  last = g_ptr_array_index (out, 4);
  g_assert_true (cs_stmt_get_output (last) == cs_stmt_get_output (add));
  g_string_truncate (buf, 0);
  cs_print_stmt_to (buf, last, 0, CS_PRINT_DEFAULT);
  g_assert_nonnull (strstr (buf->str, "t4 = prims.convert_element_type("));
  g_assert_nonnull (strstr (buf->str, "dtypes.bfloat16)"));
  /* the prims.add computes in f32 */
  g_assert_cmpint (cs_stmt_get_output (g_ptr_array_index (out, 3))->dtype, ==, CS_DTYPE_F32);

  out2 = decompose (t, mm, NULL, FALSE);
  g_assert_cmpuint (out2->len, ==, 1);
  g_string_truncate (buf, 0);
  cs_print_stmt_to (buf, g_ptr_array_index (out2, 0), 0, CS_PRINT_DEFAULT);
  g_assert_cmpstr (buf->str, ==, "t5 = prims.matmul(t4, w)  # t5: \"cuda:0 bf16[8, 16]\"\n");
  g_string_free (buf, TRUE);
}

static void
test_policy_elementwise (void)
{
  g_autoptr (CsTrace) t = parse_text (
    "def computation(a, b):\n"
    "  # a: \"cuda:0 bf16[4, 8]\"\n"
    "  # b: \"cuda:0 bf16[4, 8]\"\n"
    "  t0 = ltorch.mul(a, b)  # t0: \"cuda:0 bf16[4, 8]\"\n"
    "  t1 = ltorch._softmax(t0, -1, dtype=None)  # t1: \"cuda:0 bf16[4, 8]\"\n"
    "  return (t1,)\n");
  CsPolicy native;
  g_autoptr (GPtrArray) dflt = decompose (t, nth_call (t, 0), NULL, FALSE);
  g_autoptr (GPtrArray) nat = NULL;
  g_autoptr (GPtrArray) sm_dflt = decompose (t, nth_call (t, 1), NULL, TRUE);
  g_autoptr (GPtrArray) sm_nat = NULL;

  cs_policy_init_default (&native);
  native.elementwise = CS_ELEMENTWISE_NATIVE;
  nat = decompose (t, nth_call (t, 0), &native, FALSE);
  /* Thunder: cvt a, cvt b, f32 mul, cvt back = exactly 3 converts */
  g_assert_cmpuint (count_callee (dflt, "prims.convert_element_type"), ==, 3);
  g_assert_cmpuint (dflt->len, ==, 4);
  /* native: one bf16 prims.mul, no converts */
  g_assert_cmpuint (nat->len, ==, 1);
  g_assert_cmpuint (count_callee (nat, "prims.convert_element_type"), ==, 0);
  g_assert_cmpint (cs_stmt_get_output (g_ptr_array_index (nat, 0))->dtype, ==, CS_DTYPE_BF16);

  /* softmax flattened: Thunder upcasts once and downcasts once (to f32 ... to bf16) */
  sm_nat = decompose (t, nth_call (t, 1), &native, TRUE);
  {
    g_autofree char *d = callees (sm_dflt);
    g_autofree char *n = callees (sm_nat);
    g_assert_cmpstr (d, ==, "convert_element_type shallow_copy amax broadcast_in_dim shallow_copy "
                            "broadcast_in_dim sub exp shallow_copy sum broadcast_in_dim shallow_copy "
                            "broadcast_in_dim div convert_element_type");
    g_assert_cmpstr (n, ==, "shallow_copy shallow_copy amax broadcast_in_dim shallow_copy "
                            "broadcast_in_dim sub exp shallow_copy sum broadcast_in_dim shallow_copy "
                            "broadcast_in_dim div shallow_copy");
  }
}

static void
test_policy_matmul (void)
{
  g_autoptr (CsTrace) t = parse_text (
    "def computation(x, w, b):\n"
    "  # x: \"cuda:0 bf16[8, 16]\"\n"
    "  # w: \"cuda:0 bf16[32, 16]\"\n"
    "  # b: \"cuda:0 bf16[32]\"\n"
    "  t0 = ltorch.linear(x, w, b)  # t0: \"cuda:0 bf16[8, 32]\"\n"
    "  t1 = prims.linear(x, w, b)\n"
    "  t2 = ltorch.matmul(t0, w)  # t2: \"cuda:0 bf16[8, 16]\"\n"
    "  return (t2,)\n");
  CsPolicy up;
  g_autoptr (GPtrArray) nat = decompose (t, nth_call (t, 0), NULL, FALSE);
  g_autoptr (GPtrArray) ups = NULL;
  g_autoptr (GPtrArray) mm = NULL;
  g_autofree char *names = NULL;
  GError *error = NULL;
  g_autoptr (GPtrArray) tmp = g_ptr_array_new ();

  cs_policy_init_default (&up);
  up.matmul = CS_MATMUL_UPCAST_F32;
  g_assert_cmpuint (nat->len, ==, 1);
  g_assert_cmpstr (((CsStmt *) g_ptr_array_index (nat, 0))->callee, ==, "prims.linear");
  ups = decompose (t, nth_call (t, 0), &up, FALSE);
  names = callees (ups);
  /* x, w and bias to f32, an f32 linear, back to bf16 */
  g_assert_cmpstr (names, ==, "convert_element_type convert_element_type convert_element_type linear convert_element_type");
  g_assert_cmpint (cs_stmt_get_output (g_ptr_array_index (ups, 3))->dtype, ==, CS_DTYPE_F32);
  g_assert_true (cs_stmt_get_output (g_ptr_array_index (ups, 4)) == cs_stmt_get_output (nth_call (t, 0)));
  /* ltorch.matmul under upcast: cvt, cvt, f32 matmul, cvt */
  mm = decompose (t, nth_call (t, 2), &up, FALSE);
  g_free (names);
  names = callees (mm);
  g_assert_cmpstr (names, ==, "convert_element_type convert_element_type matmul convert_element_type");
  /* a prim has nothing one level down under the default policy */
  g_assert_false (cs_decompose_stmt (t, nth_call (t, 1), NULL, tmp, &error));
  g_assert_error (error, CS_DECOMPOSE_ERROR, CS_DECOMPOSE_ERROR_PRIM);
  g_clear_error (&error);
}

static void
test_structures (void)
{
  g_autoptr (CsTrace) t = parse_text (
    "def computation(x, lw, lb, i, k, lg, tg):\n"
    "  # x: \"cuda:0 bf16[8, 32]\"\n"
    "  # lw: \"cuda:0 bf16[32]\"\n"
    "  # lb: \"cuda:0 bf16[32]\"\n"
    "  # i: \"cuda:0 i64[5]\"\n"
    "  # k: \"cuda:0 bf16[2, 6, 4]\"\n"
    "  # lg: \"cuda:0 f32[4, 10]\"\n"
    "  # tg: \"cuda:0 i64[4]\"\n"
    "  t0 = ltorch.relu(x, False)  # t0: \"cuda:0 bf16[8, 32]\"\n"
    "  t1 = ltorch.layer_norm(x, (32,), lw, lb, 1e-05)  # t1: \"cuda:0 bf16[8, 32]\"\n"
    "  t2 = ltorch.rms_norm(x, (32,), lw, 1e-06)  # t2: \"cuda:0 bf16[8, 32]\"\n"
    "  t3 = ltorch.embedding(i, x, None, None, 2.0, False, False)  # t3: \"cuda:0 bf16[5, 32]\"\n"
    "  (t4, t5, t6) = ltorch.split(k, 2, 1)\n"
    "  t7 = ltorch.getitem(k, (1, slice(None,None,2)))  # t7: \"cuda:0 bf16[3, 4]\"\n"
    "  t8 = ltorch.dropout(x, 0.25, True, False)  # t8: \"cuda:0 bf16[8, 32]\"\n"
    "  t9 = ltorch.cross_entropy(lg, tg, None, None, 3, None, 'sum', 0.0)  # t9: \"cuda:0 f32[]\"\n"
    "  t10 = ltorch.gelu(x, approximate='tanh')  # t10: \"cuda:0 bf16[8, 32]\"\n"
    "  t11 = ltorch.contiguous(k)  # t11: \"cuda:0 bf16[2, 6, 4]\"\n"
    "  t12 = ltorch.flatten(k, 1, -1)  # t12: \"cuda:0 bf16[2, 24]\"\n"
    "  t13 = ltorch.gt(x, 0.5)  # t13: \"cuda:0 b8[8, 32]\"\n"
    "  t14 = ltorch.masked_fill(x, t13, 0)  # t14: \"cuda:0 bf16[8, 32]\"\n"
    "  t15 = ltorch.type_as(x, lg)  # t15: \"cuda:0 f32[8, 32]\"\n"
    "  t16 = ltorch.float(x)  # t16: \"cuda:0 f32[8, 32]\"\n"
    "  t17 = ltorch.uniform_like(x, maxval=2.0, minval=-1.0, dtype=dtypes.float32)  # t17: \"cuda:0 f32[8, 32]\"\n"
    "  return (t0,)\n");
  g_autoptr (GPtrArray) relu = decompose (t, nth_call (t, 0), NULL, FALSE);
  g_autoptr (GPtrArray) ln = decompose (t, nth_call (t, 1), NULL, FALSE);
  g_autoptr (GPtrArray) rms = decompose (t, nth_call (t, 2), NULL, FALSE);
  g_autoptr (GPtrArray) emb = decompose (t, nth_call (t, 3), NULL, FALSE);
  g_autoptr (GPtrArray) split = decompose (t, nth_call (t, 4), NULL, FALSE);
  g_autoptr (GPtrArray) gi = decompose (t, nth_call (t, 5), NULL, FALSE);
  g_autoptr (GPtrArray) drop = decompose (t, nth_call (t, 6), NULL, FALSE);
  g_autoptr (GPtrArray) xe = decompose (t, nth_call (t, 7), NULL, TRUE);
  g_autoptr (GPtrArray) gelu = decompose (t, nth_call (t, 8), NULL, TRUE);
  g_autoptr (GPtrArray) contig = decompose (t, nth_call (t, 9), NULL, FALSE);
  g_autoptr (GPtrArray) flat = decompose (t, nth_call (t, 10), NULL, FALSE);
  g_autoptr (GPtrArray) mfill = decompose (t, nth_call (t, 12), NULL, TRUE);
  g_autoptr (GPtrArray) tyas = decompose (t, nth_call (t, 13), NULL, FALSE);
  g_autoptr (GPtrArray) flt = decompose (t, nth_call (t, 14), NULL, FALSE);
  g_autoptr (GPtrArray) unif = decompose (t, nth_call (t, 15), NULL, FALSE);
  char *s;
  GString *buf = g_string_new (NULL);

  /* relu = where(a > 0, a, 0): two nested ltorch calls, no casts (bf16 comparisons do not upcast) */
  s = callees (relu);
  g_assert_cmpstr (s, ==, "gt where");
  g_free (s);
  g_assert_cmpstr (((CsStmt *) g_ptr_array_index (relu, 0))->subs[0]->callee, ==, "prims.gt");
  /* layer_norm: to, var_mean, add(eps), rsqrt, sub, mul, mul(weight), add(bias), to(out), to(mean), to(rstd) */
  s = callees (ln);
  g_assert_cmpstr (s, ==, "to var_mean add rsqrt sub mul mul add to to to");
  g_free (s);
  /* rms_norm: explicit upcast, mean(a*a), + eps, rsqrt, *, * weight, downcast */
  s = callees (rms);
  g_assert_cmpstr (s, ==, "convert_element_type mul mean add rsqrt mul mul convert_element_type");
  g_free (s);
  /* 1-d indices: a single take */
  s = callees (emb);
  g_assert_cmpstr (s, ==, "take");
  g_free (s);
  /* split 6 by 2 along dim 1: three slices of 2 */
  g_assert_cmpuint (split->len, ==, 3);
  g_assert_cmpuint (count_callee (split, "prims.slice_prim"), ==, 3);
  g_assert_cmpint (cs_stmt_get_output (g_ptr_array_index (split, 2))->shape[1], ==, 2);
  /* k[1, ::2]: slice [1:2, 0:6:2, 0:4] then squeeze (0,) */
  s = callees (gi);
  g_assert_cmpstr (s, ==, "slice_prim squeeze");
  g_free (s);
  /* dropout(p=0.25): uniform_like, lt(r, 0.75), mul(a, mask), mul(., 1/0.75) */
  s = callees (drop);
  g_assert_cmpstr (s, ==, "uniform_like lt mul mul");
  g_free (s);
  g_assert_cmpint (((CsStmt *) g_ptr_array_index (drop, 0))->op->id, ==, CS_OP_LTORCH_UNIFORM_LIKE);
  cs_print_stmt_to (buf, g_ptr_array_index (drop, 3), 0, CS_PRINT_NO_SUBS);
  g_assert_nonnull (strstr (buf->str, ", 1.3333333333333333)"));
  g_string_truncate (buf, 0);
  /* the uniform draws bf16 in x's shape on x's device, printed as Thunder prints devices */
  cs_print_stmt_to (buf, ((CsStmt *) g_ptr_array_index (drop, 0))->subs[0], 0, CS_PRINT_NO_SUBS);
  g_assert_nonnull (strstr (buf->str, "prims.uniform((8, 32), 0.0, 1.0, device=devices.Device(\"cuda:0\"), dtype=dtypes.bfloat16)"));
  g_string_truncate (buf, 0);
  /* uniform_like's minval and maxval by keyword (its schema names them), dtype= kept */
  g_assert_cmpuint (unif->len, ==, 1);
  cs_print_stmt_to (buf, g_ptr_array_index (unif, 0), 0, CS_PRINT_NO_SUBS);
  g_assert_nonnull (strstr (buf->str, "prims.uniform((8, 32), -1.0, 2.0, device=devices.Device(\"cuda:0\"), dtype=dtypes.float32)"));
  /* cross_entropy with ignore_index 3 inside [0, 10): take_along_axis then mask with where,
   * reduction 'sum': one prims.sum over the selected values, no division */
  g_assert_cmpuint (count_callee (xe, "prims.take_along_axis"), ==, 1);
  g_assert_cmpuint (count_callee (xe, "prims.pad"), ==, 0);
  g_assert_cmpuint (count_callee (xe, "prims.div"), ==, 0);
  /* log_softmax: one amax, one exp... then nll sum; where used for inf-masking and the target mask */
  g_assert_cmpuint (count_callee (xe, "prims.where"), ==, 2);
  /* gelu(tanh) on bf16: 9 ltorch ops = 6 muls (4 prims each or 3 with a number) ...: 31 prims */
  g_assert_cmpuint (gelu->len, ==, 31);
  g_assert_cmpuint (count_callee (gelu, "prims.tanh"), ==, 1);
  for (guint i = 0; i < gelu->len; i++)
    g_assert_true (cs_op_has_tag (((CsStmt *) g_ptr_array_index (gelu, i))->op, CS_OP_TAG_PRIM));
  /* contiguous(k): clang.stride_order with the row-major order (2, 1, 0) */
  cs_print_stmt_to (buf, g_ptr_array_index (contig, 0), 0, CS_PRINT_NO_SUBS);
  g_assert_cmpuint (contig->len, ==, 1);
  g_assert_nonnull (strstr (buf->str, "t11 = prims.stride_order(k, (2, 1, 0))"));
  /* flatten(k, 1, -1): one reshape to (2, 24) */
  g_string_truncate (buf, 0);
  cs_print_stmt_to (buf, g_ptr_array_index (flat, 0), 0, CS_PRINT_NO_SUBS);
  g_assert_nonnull (strstr (buf->str, "t12 = prims.reshape(k, (2, 24))"));
  /* masked_fill(x, m, 0) = where(m, 0, x): bf16 result, the int 0 becomes 0.0, no casts */
  g_assert_cmpuint (mfill->len, ==, 1);
  g_string_truncate (buf, 0);
  cs_print_stmt_to (buf, g_ptr_array_index (mfill, 0), 0, CS_PRINT_NO_SUBS);
  g_assert_nonnull (strstr (buf->str, "t14 = prims.where(t13, 0.0, x)"));
  /* type_as(x, lg): ltorch.to(x, dtypes.float32, None, device=devices.Device("cuda:0"), ...) */
  g_assert_cmpuint (tyas->len, ==, 1);
  g_string_truncate (buf, 0);
  cs_print_stmt_to (buf, g_ptr_array_index (tyas, 0), 0, CS_PRINT_NO_SUBS);
  if (!strstr (buf->str, "ltorch.to(x, dtypes.float32, None, device=devices.Device(\"cuda:0\"), dtype=None, copy=False, memory_format=None)"))
    g_error ("type_as printed %s", buf->str);
  /* x.float(): a bare convert, as Thunder records `xf = prims.convert_element_type(x, dtypes.float32)` */
  s = callees (flt);
  g_assert_cmpstr (s, ==, "convert_element_type");
  g_free (s);
  g_string_free (buf, TRUE);
}

/* creation ops: zeros -> ltorch.full -> prims.full; full_like -> prims.full in a's shape */
static void
test_creation (void)
{
  g_autoptr (CsTrace) t = parse_text (
    "def computation(a):\n"
    "  # a: \"cuda:0 bf16[4, 8]\"\n"
    "  t0 = ltorch.zeros(4, 5, device=devices.Device(\"cuda:0\"), dtype=dtypes.bfloat16)  # t0: \"cuda:0 bf16[4, 5]\"\n"
    "  t1 = ltorch.ones_like(a, device=None, dtype=None)  # t1: \"cuda:0 bf16[4, 8]\"\n"
    "  return (t0,)\n");
  g_autoptr (GPtrArray) z = decompose (t, nth_call (t, 0), NULL, FALSE);
  g_autoptr (GPtrArray) o = decompose (t, nth_call (t, 1), NULL, TRUE);
  GString *buf = g_string_new (NULL);

  g_assert_cmpuint (z->len, ==, 1);
  cs_print_stmt_to (buf, g_ptr_array_index (z, 0), 0, CS_PRINT_DEFAULT);
  g_assert_nonnull (strstr (buf->str, "t0 = ltorch.full((4, 5), 0, device=devices.Device(\"cuda:0\"), dtype=dtypes.bfloat16)"));
  g_assert_nonnull (strstr (buf->str, "# t0 = prims.full((4, 5), 0, device=devices.Device(\"cuda:0\"), dtype=dtypes.bfloat16)"));
  g_string_truncate (buf, 0);
  g_assert_cmpuint (o->len, ==, 1);
  cs_print_stmt_to (buf, g_ptr_array_index (o, 0), 0, CS_PRINT_DEFAULT);
  g_assert_nonnull (strstr (buf->str, "t1 = prims.full((4, 8), 1, device=devices.Device(\"cuda:0\"), dtype=dtypes.bfloat16)"));
  g_string_free (buf, TRUE);
}

static void
test_errors (void)
{
  g_autoptr (CsTrace) t = parse_text (
    "def computation(a):\n"
    "  # a: \"cuda:0 bf16[4, 8]\"\n"
    "  t0 = ltorch.frobnicate(a)\n"
    "  t1 = ltorch.getitem(a, (_i, 1))\n"   /* _i: a context name (the parser refuses an undefined i) */
    "  t2 = ltorch.mul(a, a)  # t2: \"cuda:0 f32[4, 8]\"\n"
    "  return (t0,)\n");
  g_autoptr (GPtrArray) out = g_ptr_array_new ();
  GError *error = NULL;

  g_assert_false (cs_decompose_stmt (t, nth_call (t, 0), NULL, out, &error));
  g_assert_error (error, CS_DECOMPOSE_ERROR, CS_DECOMPOSE_ERROR_UNSUPPORTED);
  g_assert_true (g_str_has_prefix (error->message, "line 3: ltorch.frobnicate: "));
  g_clear_error (&error);
  g_assert_false (cs_decompose_stmt (t, nth_call (t, 1), NULL, out, &error));
  g_assert_error (error, CS_DECOMPOSE_ERROR, CS_DECOMPOSE_ERROR_UNSUPPORTED);
  g_assert_true (g_str_has_prefix (error->message, "line 4: ltorch.getitem: "));
  g_clear_error (&error);
  /* printed output type disagrees with the decomposition's bf16 */
  g_assert_false (cs_decompose_stmt (t, nth_call (t, 2), NULL, out, &error));
  g_assert_error (error, CS_DECOMPOSE_ERROR, CS_DECOMPOSE_ERROR_TYPE);
  g_assert_nonnull (strstr (error->message, "line 5: ltorch.mul"));
  g_clear_error (&error);
  g_assert_cmpuint (out->len, ==, 0);
}

/* A negative sdpa scale: the decomposition multiplies q and k by sqrt(scale), which would be
 * NaN, so it is refused (a zero scale is not). */
static void
test_errors_sdpa_scale (void)
{
  g_autoptr (CsTrace) t = parse_text (
    "def computation(q):\n"
    "  # q: \"cuda:0 bf16[1, 2, 4, 8]\"\n"
    "  t0 = ltorch.scaled_dot_product_attention(q, q, q, None, 0.0, False, scale=-0.25)  # t0: \"cuda:0 bf16[1, 2, 4, 8]\"\n"
    "  t1 = ltorch.scaled_dot_product_attention(q, q, q, None, 0.0, False, scale=0.0)  # t1: \"cuda:0 bf16[1, 2, 4, 8]\"\n"
    "  return (t0, t1)\n");
  g_autoptr (GPtrArray) out = g_ptr_array_new ();
  GError *error = NULL;

  g_assert_false (cs_decompose_stmt (t, nth_call (t, 0), NULL, out, &error));
  g_assert_error (error, CS_DECOMPOSE_ERROR, CS_DECOMPOSE_ERROR_ARGS);
  g_assert_nonnull (strstr (error->message, "scale=-0.25 is negative"));
  g_clear_error (&error);
  g_assert_cmpuint (out->len, ==, 0);
  g_assert_true (cs_decompose_stmt (t, nth_call (t, 1), NULL, out, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (out->len, >, 0);
}

/* ------------------------------------------------------------------------------------------ */
/* Oracle: Thunder's printed subsymbols                                                        */

typedef struct
{
  guint match;       /* our decomposition equals Thunder's printed one */
  guint differ;      /* it does not (first_why says where) */
  guint untyped;     /* skipped: an input has no printed type (docs traces, old unpacks) */
  char *first_why;
} OpStat;

static gboolean
inputs_typed (const CsStmt *s)
{
  g_autoptr (GPtrArray) ins = g_ptr_array_new ();

  cs_stmt_collect_inputs (s, ins);
  for (guint i = 0; i < ins->len; i++)
    {
      CsProxy *p = g_ptr_array_index (ins, i);
      if (!p->typed || p->kind == CS_PROXY_OTHER)
        return FALSE;
    }
  return TRUE;
}

static void
op_stat_free (gpointer p)
{
  OpStat *s = p;
  g_free (s->first_why);
  g_free (s);
}

static guint n_unexpected;   /* differences in current-format traces (must stay 0) */

/* Checks one ltorch statement that carries printed subsymbols against our decomposition. */
static void
check_one (CsTrace *t, const char *path, CsStmt *s, GHashTable *stats)
{
  g_autoptr (GPtrArray) out = g_ptr_array_new ();
  g_autoptr (GString) why = g_string_new (NULL);
  GError *error = NULL;
  OpStat *st = g_hash_table_lookup (stats, s->callee);

  if (st == NULL)
    {
      st = g_new0 (OpStat, 1);
      g_hash_table_insert (stats, g_strdup (s->callee), st);
    }
  if (!inputs_typed (s))
    {
      st->untyped++;
      return;
    }
  if (!cs_decompose_stmt (t, s, NULL, out, &error))
    {
      g_string_append (why, error->message);
      g_clear_error (&error);
    }
  else if (cmp_lists (s->subs, s->n_subs, out, why))
    {
      st->match++;
      return;
    }
  st->differ++;
  {
    g_autofree char *base = g_path_get_basename (path);

    if (st->first_why == NULL)
      st->first_why = g_strdup_printf ("%s:%u: %s", base, s->line, why->str);
    /* Traces printed by older Thunder versions (2023-2024 docs, notebooks, issues) differ in
     * known ways: ltorch.to without memory_format, sdpa without dropout, cat keeping the tuple,
     * literal number conversions recorded as `_ = prims.convert_element_type(1, float)`. */
    if (!g_str_has_prefix (base, "nb_") && !g_str_has_prefix (base, "pr") && !g_str_has_prefix (base, "docs_")
        && !g_str_has_prefix (base, "seed_foo_") && !g_str_has_prefix (base, "issue"))
      {
        g_printerr ("# unexpected difference: %s:%u: %s: %s\n", base, s->line, s->callee, why->str);
        n_unexpected++;
      }
  }
}

/* Top-level ltorch statements, and (when @nested) the ltorch subsymbols under executor
 * statements such as `torch.matmul` / `Tensor.to` in final traces. */
static void
visit (CsTrace *t, const char *path, CsStmt *s, GHashTable *stats, gboolean nested)
{
  if (s->kind != CS_STMT_CALL || s->n_subs == 0)
    return;
  if (g_str_has_prefix (s->callee, "ltorch."))
    {
      if (cs_decompose_supports (s))
        check_one (t, path, s, stats);
      return;
    }
  if (!nested)
    return;
  for (guint i = 0; i < s->n_subs; i++)
    visit (t, path, s->subs[i], stats, nested);
}

static void
walk_file_full (const char *path, GHashTable *stats, gboolean nested)
{
  g_autoptr (CsTraceList) list = NULL;
  GError *error = NULL;

  list = cs_parse_file (path, &error);
  g_assert_no_error (error);
  for (guint ti = 0; ti < list->traces->len; ti++)
    {
      CsTrace *t = g_ptr_array_index (list->traces, ti);
      guint n = t->n_stmts;

      for (guint i = 0; i < n; i++)
        visit (t, path, t->stmts[i], stats, nested);
    }
}

static void
walk_file (const char *path, GHashTable *stats)
{
  walk_file_full (path, stats, FALSE);
}

static void
test_oracle (gconstpointer data)
{
  const char *const *files = data;
  const char *dir = g_getenv ("CS_SHARED_TRACES");
  g_autoptr (GHashTable) stats = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, op_stat_free);
  GHashTableIter it;
  gpointer k, v;
  guint total_match = 0, total_differ = 0;

  if (dir == NULL || !g_file_test (dir, G_FILE_TEST_IS_DIR))
    {
      g_test_skip ("shared traces not available");
      return;
    }
  for (guint i = 0; files[i]; i++)
    {
      g_autofree char *path = g_build_filename (dir, files[i], NULL);
      walk_file (path, stats);
    }
  g_hash_table_iter_init (&it, stats);
  while (g_hash_table_iter_next (&it, &k, &v))
    {
      OpStat *st = v;
      g_test_message ("%-40s match %4u differ %3u%s%s", (char *) k, st->match, st->differ,
                      st->first_why ? "  first: " : "", st->first_why ? st->first_why : "");
      total_match += st->match;
      total_differ += st->differ;
      if (st->differ)
        g_printerr ("# DIFF %s: %s\n", (char *) k, st->first_why);
    }
  g_test_message ("total: %u match, %u differ", total_match, total_differ);
  g_assert_cmpuint (total_match, >, 0);
  g_assert_cmpuint (total_differ, ==, 0);
}

static const char *const current_files[] = {
  "thunder_a_seed_matmul_initial.txt",
  "thunder_b_mlp_gelu_initial.txt",
  "thunder_e_softmax_attention_initial.txt",
  "thunder_llama_stack_initial.txt",
  NULL,
};

/* Every other shared trace (older Thunder versions, joint/backward traces): reported, and the
 * differences must be the known version drifts listed in the report. */
static void
test_oracle_all (void)
{
  const char *dir = g_getenv ("CS_SHARED_TRACES");
  g_autoptr (GHashTable) stats = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, op_stat_free);
  g_autoptr (GDir) d = NULL;
  const char *name;
  GHashTableIter it;
  gpointer k, v;
  guint total_match = 0;

  if (dir == NULL || !g_file_test (dir, G_FILE_TEST_IS_DIR))
    {
      g_test_skip ("shared traces not available");
      return;
    }
  d = g_dir_open (dir, 0, NULL);
  while ((name = g_dir_read_name (d)) != NULL)
    {
      g_autofree char *path = g_build_filename (dir, name, NULL);
      if (g_str_has_suffix (name, ".txt"))
        walk_file_full (path, stats, TRUE);
    }
  g_hash_table_iter_init (&it, stats);
  while (g_hash_table_iter_next (&it, &k, &v))
    {
      OpStat *st = v;
      g_test_message ("%-40s match %4u differ %3u untyped %3u%s%s", (char *) k, st->match, st->differ,
                      st->untyped, st->first_why ? "  first: " : "", st->first_why ? st->first_why : "");
      total_match += st->match;
    }
  g_test_message ("total: %u match", total_match);
  /* the current-format initial traces alone give 408 exact matches; with the ltorch
   * subsymbols of joint and final traces there are thousands */
  g_assert_cmpuint (total_match, >=, 2500);
  g_assert_cmpuint (n_unexpected, ==, 0);
}

/* ------------------------------------------------------------------------------------------ */
/* Bundled samples decompose to prims under every elementwise/matmul policy                     */

static void
test_samples (void)
{
  const char *data = g_getenv ("CS_DATA_DIR");
  static const char *names[] = { "seed_foo.txt", "mlp_gelu.txt", "ln_mlp_residual.txt",
                                 "rmsnorm_swiglu.txt", "attention_softmax.txt", "cross_entropy.txt" };
  guint converts[2] = { 0, 0 };

  if (data == NULL)
    {
      g_test_skip ("CS_DATA_DIR not set");
      return;
    }
  for (guint pol = 0; pol < 2; pol++)
    for (guint f = 0; f < G_N_ELEMENTS (names); f++)
      {
        g_autofree char *path = g_build_filename (data, names[f], NULL);
        g_autoptr (CsTraceList) list = NULL;
        GError *error = NULL;
        CsTrace *t;
        CsPolicy p;

        cs_policy_init_default (&p);
        if (pol == 1)
          p.elementwise = CS_ELEMENTWISE_NATIVE;
        list = cs_parse_file (path, &error);
        g_assert_no_error (error);
        t = g_ptr_array_index (list->traces, 0);
        for (guint i = 0; i < t->n_stmts; i++)
          {
            CsStmt *s = t->stmts[i];
            g_autoptr (GPtrArray) out = NULL;

            if (s->kind != CS_STMT_CALL)
              continue;
            out = decompose (t, s, &p, TRUE);
            g_assert_cmpuint (out->len, >, 0);
            for (guint k = 0; k < out->len; k++)
              {
                CsStmt *ps = g_ptr_array_index (out, k);
                g_assert_true (cs_op_has_tag (ps->op, CS_OP_TAG_PRIM));
                if (ps->op->id == CS_OP_PRIM_CONVERT_ELEMENT_TYPE)
                  converts[pol]++;
              }
          }
      }
  /* Thunder's policy casts around every bf16 elementwise op; native keeps only the explicit
   * conversions of cross_entropy: logits.float(), and nll_loss's count of valid targets
   * (bool mask -> int64 sum -> weak float32 for the division). */
  g_test_message ("converts: default %u, native %u", converts[0], converts[1]);
  g_assert_cmpuint (converts[0], >, 40);
  g_assert_cmpuint (converts[1], ==, 3);
}

/* cs_decompose_trace: a copy whose ltorch statements carry fresh subsymbols; the input is
 * untouched; the printed copy shows Thunder's decomposition comments. */
static void
test_trace (void)
{
  const char *data = g_getenv ("CS_DATA_DIR");
  g_autofree char *path = NULL;
  g_autoptr (CsTraceList) list = NULL;
  g_autoptr (CsTrace) dflt = NULL, up = NULL;
  g_autofree char *text = NULL;
  GError *error = NULL;
  CsTrace *t;
  CsPolicy p;

  if (data == NULL)
    {
      g_test_skip ("CS_DATA_DIR not set");
      return;
    }
  path = g_build_filename (data, "seed_foo.txt", NULL);
  list = cs_parse_file (path, &error);
  g_assert_no_error (error);
  t = g_ptr_array_index (list->traces, 0);
  dflt = cs_decompose_trace (t, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (nth_call (t, 0)->n_subs, ==, 0);
  g_assert_cmpuint (nth_call (dflt, 0)->n_subs, ==, 5);
  g_assert_cmpuint (nth_call (dflt, 1)->n_subs, ==, 1);
  text = cs_print_trace (dflt, CS_PRINT_DEFAULT);
  g_assert_nonnull (strstr (text, "  t4 = ltorch.add(a, b, alpha=1)  # t4: \"cuda:0 bf16[8, 16]\"\n"
                                  "    # t0 = prims.broadcast_in_dim(b, (8, 16), (1,))  # t0: \"cuda:0 bf16[8, 16]\"\n"
                                  "    # t1 = prims.convert_element_type(a, dtypes.float32)  # t1: \"cuda:0 f32[8, 16]\"\n"));
  g_assert_nonnull (strstr (text, "    # t5 = prims.matmul(t4, w)  # t5: \"cuda:0 bf16[8, 16]\"\n"));
  cs_policy_init_default (&p);
  p.matmul = CS_MATMUL_UPCAST_F32;
  up = cs_decompose_trace (t, &p, &error);
  g_assert_no_error (error);
  /* cvt t4, cvt w, f32 matmul, cvt back */
  g_assert_cmpuint (nth_call (up, 1)->n_subs, ==, 4);
  g_assert_cmpint (cs_stmt_get_output (nth_call (up, 1)->subs[2])->dtype, ==, CS_DTYPE_F32);
}

/* Bad input never crashes: every op of the table called with malformed arguments either
 * succeeds or fails with a message (meta, one level down, down to prims). */
static void
test_robust (void)
{
  static const char *patterns[] = {
    "", "a", "a, a", "a, 1", "1, a", "a, (0,)", "a, -7", "a, 99", "a, a, a", "a, None", "a, 'x'",
    "u", "u, u", "a, (0, 1, 2, 3, 4)", "(a, a), 0", "(a, z), 0", "a, slice(None,None,-1)",
    "a, dim=5", "z, z", "a, i", "i, a", "a, i, 1", "a, [(0, 0, 0)]", "a, 2.5, -1.0",
    "a, (..., None, None, 0)", "a, [1, 2], [0]", "q, q, q, None, 0.0, True", "a, 0, True",
    "a, dtypes.float32", "a, (3, -1)", "a, -1, 3", "a, 0, 1", "i, a, None, None, 2.0, False, False",
    "a, (4611686018427387904, 4611686018427387904)", "a, 9223372036854775807", "a, -9223372036854775807",
    "a, [0, 0], [2, 3], [9223372036854775807, 9223372036854775807]",
    "a, 0.0, [(9223372036854775807, 9223372036854775807, 9223372036854775807), (0, 0, 0)]",
    "0, 9223372036854775807, -9223372036854775807", "a, (1, 9223372036854775807, 1), 0",
    "a, (slice(-9223372036854775807,9223372036854775807,9223372036854775807), 0)",
    "a, 1, 4611686018427387904, 4611686018427387904",
  };
  guint n_ok = 0, n_err = 0;

  for (guint id = 0; id < CS_N_OPS; id++)
    {
      const CsOp *op = cs_op_get (id);

      if (op->name == NULL || op->name[0] == '\0' || op->category == CS_OP_CAT_FUSION
          || op->category == CS_OP_CAT_BOOKKEEPING || op->id != (CsOpId) id)
        continue;
      for (guint k = 0; k < G_N_ELEMENTS (patterns); k++)
        {
          g_autofree char *text = g_strdup_printf (
            "def computation(a, z, i, q, u):\n"
            "  # a: \"cuda:0 bf16[2, 3]\"\n"
            "  # z: \"cuda:0 f32[]\"\n"
            "  # i: \"cuda:0 i64[2, 3]\"\n"
            "  # q: \"cuda:0 bf16[1, 2, 4, 8]\"\n"
            "  t9 = %s(%s)\n"
            "  return (t9,)\n", op->name, patterns[k]);
          GError *error = NULL;
          g_autoptr (CsTrace) t = cs_parse_trace (text, "robust", &error);
          CsStmt *s;
          g_autoptr (GPtrArray) out = g_ptr_array_new ();
          g_autoptr (GPtrArray) flat = g_ptr_array_new ();

          if (t == NULL)
            {
              g_clear_error (&error);
              continue;
            }
          s = nth_call (t, 0);
          if (cs_meta_infer (t, s, &error))
            n_ok++;
          else
            {
              g_assert_nonnull (error);
              g_assert_cmpuint (strlen (error->message), >, 0);
              g_clear_error (&error);
              n_err++;
            }
          if (!cs_decompose_stmt (t, s, NULL, out, &error))
            {
              g_assert_nonnull (error);
              g_clear_error (&error);
            }
          if (!cs_decompose_to_prims (t, s, NULL, flat, &error))
            {
              g_assert_nonnull (error);
              g_clear_error (&error);
            }
        }
    }
  g_test_message ("%u accepted, %u rejected with a message", n_ok, n_err);
  g_assert_cmpuint (n_ok, >, 100);
  g_assert_cmpuint (n_err, >, 1000);
}

/* ------------------------------------------------------------------------------------------ */
/* Numerics: the flattened prims, run by core's f64 reference, equal the textbook formula      */

/* Input k of a test: smooth values in about [-2, 2], exactly representable in f32 (the test
 * traces take f32 inputs; the reference then computes in f64). */
static double
input_value (guint input, int64_t i)
{
  return (double) (float) (2.0 * sin (0.37 * (double) i + 1.3 * input + 0.5));
}

/* Replaces every CALL of @t by its prims (cs_decompose_to_prims), runs the result in f64 and
 * returns the first output as doubles.  @ints: an i64 input gets values i % classes, with
 * element 1 set to -100 (an ignored target). */
static double *
run_prims (const char *text, int64_t classes, int64_t *numel_out)
{
  GError *error = NULL;
  g_autoptr (CsTrace) t = cs_parse_trace (text, "numerics", &error);
  g_autoptr (GPtrArray) body = g_ptr_array_new ();
  g_autoptr (GPtrArray) leaves = NULL;
  g_autoptr (GPtrArray) outputs = NULL;
  CsTensor *ins[8];
  guint n_in;
  double *res;
  CsTensor *o;

  g_assert_no_error (error);
  for (guint i = 0; i < t->n_stmts; i++)
    {
      CsStmt *s = t->stmts[i];

      if (s->kind != CS_STMT_CALL)
        {
          g_ptr_array_add (body, s);
          continue;
        }
      if (!cs_decompose_to_prims (t, s, NULL, body, &error))
        g_error ("%s", error->message);
    }
  for (guint i = 0; i < body->len; i++)
    {
      CsStmt *s = g_ptr_array_index (body, i);
      if (s->kind == CS_STMT_CALL)
        g_assert_true (cs_op_has_tag (s->op, CS_OP_TAG_PRIM));
    }
  cs_trace_set_stmts (t, (CsStmt **) body->pdata, body->len);
  leaves = cs_ref_dup_leaf_inputs (t);
  n_in = leaves->len;
  g_assert_cmpuint (n_in, <=, G_N_ELEMENTS (ins));
  for (guint k = 0; k < n_in; k++)
    {
      CsProxy *p = g_ptr_array_index (leaves, k);
      int64_t n = cs_shape_numel (p->shape, p->rank);
      g_autofree double *v = g_new (double, MAX (n, 1));

      for (int64_t i = 0; i < n; i++)
        v[i] = p->dtype == CS_DTYPE_I64 ? (double) (i % classes) : input_value (k, i);
      if (p->dtype == CS_DTYPE_I64 && n > 1)
        v[1] = -100;
      ins[k] = cs_tensor_new_from_f64 (p->dtype, p->shape, p->rank, v, &error);
      g_assert_no_error (error);
    }
  if (!cs_ref_run (t, ins, n_in, CS_REF_F64, &outputs, &error))
    g_error ("%s", error->message);
  for (guint k = 0; k < n_in; k++)
    cs_tensor_unref (ins[k]);
  o = g_ptr_array_index (outputs, 0);
  res = cs_tensor_dup_f64 (o);
  *numel_out = cs_shape_numel (o->shape, o->rank);
  g_ptr_array_set_free_func (outputs, (GDestroyNotify) cs_tensor_unref);
  return res;
}

static void
assert_close (const double *got, const double *want, int64_t n, const char *what)
{
  for (int64_t i = 0; i < n; i++)
    if (fabs (got[i] - want[i]) > 1e-12 * (1.0 + fabs (want[i])))
      g_error ("%s: element %" G_GINT64_FORMAT ": %.17g, expected %.17g", what, i, got[i], want[i]);
}

#define ROWS 4
#define COLS 6

static void
test_numerics_norms (void)
{
  int64_t n;
  double x[ROWS * COLS], w[COLS], b[COLS], want[ROWS * COLS];
  g_autofree double *ln = NULL, *rms = NULL;

  for (int i = 0; i < ROWS * COLS; i++)
    x[i] = input_value (0, i);
  for (int j = 0; j < COLS; j++)
    {
      w[j] = input_value (1, j);
      b[j] = input_value (2, j);
    }
  ln = run_prims ("def computation(x, w, b):\n"
                  "  # x: \"cuda:0 f32[4, 6]\"\n  # w: \"cuda:0 f32[6]\"\n  # b: \"cuda:0 f32[6]\"\n"
                  "  t0 = ltorch.layer_norm(x, (6,), w, b, 1e-05)  # t0: \"cuda:0 f32[4, 6]\"\n"
                  "  return (t0,)\n", 1, &n);
  g_assert_cmpint (n, ==, ROWS * COLS);
  for (int r = 0; r < ROWS; r++)
    {
      double mean = 0, var = 0;
      for (int j = 0; j < COLS; j++)
        mean += x[r * COLS + j] / COLS;
      for (int j = 0; j < COLS; j++)
        var += (x[r * COLS + j] - mean) * (x[r * COLS + j] - mean) / COLS;   /* biased */
      for (int j = 0; j < COLS; j++)
        want[r * COLS + j] = (x[r * COLS + j] - mean) / sqrt (var + 1e-5) * w[j] + b[j];
    }
  assert_close (ln, want, n, "layer_norm");

  rms = run_prims ("def computation(x, w):\n"
                   "  # x: \"cuda:0 f32[4, 6]\"\n  # w: \"cuda:0 f32[6]\"\n"
                   "  t0 = ltorch.rms_norm(x, (6,), w, 1e-06)  # t0: \"cuda:0 f32[4, 6]\"\n"
                   "  return (t0,)\n", 1, &n);
  for (int r = 0; r < ROWS; r++)
    {
      double ms = 0;
      for (int j = 0; j < COLS; j++)
        ms += x[r * COLS + j] * x[r * COLS + j] / COLS;
      for (int j = 0; j < COLS; j++)
        want[r * COLS + j] = x[r * COLS + j] / sqrt (ms + 1e-6) * w[j];
    }
  assert_close (rms, want, n, "rms_norm");
}

static void
test_numerics_activations (void)
{
  static const struct { const char *stmt; int kind; } cases[] = {
    { "ltorch.gelu(x, approximate='none')", 0 },
    { "ltorch.gelu(x, approximate='tanh')", 1 },
    { "ltorch.silu(x, False)", 2 },
    { "ltorch.sigmoid(x)", 3 },
    { "ltorch.relu(x, False)", 4 },
    { "ltorch._softmax(x, -1, dtype=None)", 5 },
    { "ltorch.log_softmax(x, 1, dtype=None)", 6 },
  };
  double x[ROWS * COLS], want[ROWS * COLS];

  for (int i = 0; i < ROWS * COLS; i++)
    x[i] = input_value (0, i);
  for (guint c = 0; c < G_N_ELEMENTS (cases); c++)
    {
      g_autofree char *text = g_strdup_printf ("def computation(x):\n  # x: \"cuda:0 f32[4, 6]\"\n"
                                               "  t0 = %s  # t0: \"cuda:0 f32[4, 6]\"\n  return (t0,)\n",
                                               cases[c].stmt);
      int64_t n;
      g_autofree double *got = run_prims (text, 1, &n);

      for (int r = 0; r < ROWS; r++)
        {
          double mx = -INFINITY, se = 0;
          for (int j = 0; j < COLS; j++)
            mx = MAX (mx, x[r * COLS + j]);
          for (int j = 0; j < COLS; j++)
            se += exp (x[r * COLS + j] - mx);
          for (int j = 0; j < COLS; j++)
            {
              double v = x[r * COLS + j], *o = &want[r * COLS + j];
              switch (cases[c].kind)
                {
                case 0: *o = 0.5 * v * (1 + erf (v / sqrt (2.0))); break;
                case 1: *o = 0.5 * v * (1 + tanh (sqrt (2 / G_PI) * (v + 0.044715 * v * v * v))); break;
                case 2: *o = v / (1 + exp (-v)); break;
                case 3: *o = 1 / (1 + exp (-v)); break;
                case 4: *o = v > 0 ? v : 0; break;
                case 5: *o = exp (v - mx) / se; break;
                default: *o = v - mx - log (se); break;
                }
            }
        }
      g_assert_cmpint (n, ==, ROWS * COLS);
      assert_close (got, want, n, cases[c].stmt);
    }
}

/* cross_entropy (mean over valid targets; target 1 is ignore_index -100) and causal sdpa. */
static void
test_numerics_loss_attention (void)
{
  int64_t n;
  double x[ROWS * COLS];
  g_autofree double *ce = NULL, *att = NULL;
  double loss = 0;
  int valid = 0;

  for (int i = 0; i < ROWS * COLS; i++)
    x[i] = input_value (0, i);
  ce = run_prims ("def computation(x, t):\n"
                  "  # x: \"cuda:0 f32[4, 6]\"\n  # t: \"cuda:0 i64[4]\"\n"
                  "  t0 = ltorch.cross_entropy(x, t, None, None, -100, None, 'mean', 0.0)  # t0: \"cuda:0 f32[]\"\n"
                  "  return (t0,)\n", 5, &n);
  g_assert_cmpint (n, ==, 1);
  for (int r = 0; r < ROWS; r++)
    {
      int tgt = r == 1 ? -100 : r % 5;
      double mx = -INFINITY, se = 0;
      if (tgt < 0)
        continue;
      for (int j = 0; j < COLS; j++)
        mx = MAX (mx, x[r * COLS + j]);
      for (int j = 0; j < COLS; j++)
        se += exp (x[r * COLS + j] - mx);
      loss += -(x[r * COLS + tgt] - mx - log (se));
      valid++;
    }
  loss /= valid;
  assert_close (ce, &loss, 1, "cross_entropy");

  /* q, k, v [1, 2, 3, 4]: causal attention, scale 1/sqrt(4) */
  att = run_prims ("def computation(q, k, v):\n"
                   "  # q: \"cuda:0 f32[1, 2, 3, 4]\"\n  # k: \"cuda:0 f32[1, 2, 3, 4]\"\n"
                   "  # v: \"cuda:0 f32[1, 2, 3, 4]\"\n"
                   "  t0 = ltorch.scaled_dot_product_attention(q, k, v, None, 0.0, True, scale=None)  # t0: \"cuda:0 f32[1, 2, 3, 4]\"\n"
                   "  return (t0,)\n", 1, &n);
  g_assert_cmpint (n, ==, 24);
  for (int h = 0; h < 2; h++)
    for (int i = 0; i < 3; i++)
      {
        double s[3], mx = -INFINITY, se = 0;
        for (int j = 0; j <= i; j++)
          {
            s[j] = 0;
            for (int e = 0; e < 4; e++)
              s[j] += input_value (0, h * 12 + i * 4 + e) * input_value (1, h * 12 + j * 4 + e) / 2.0;
            mx = MAX (mx, s[j]);
          }
        for (int j = 0; j <= i; j++)
          se += exp (s[j] - mx);
        for (int e = 0; e < 4; e++)
          {
            double o = 0;
            for (int j = 0; j <= i; j++)
              o += exp (s[j] - mx) / se * input_value (2, h * 12 + j * 4 + e);
            assert_close (&att[h * 12 + i * 4 + e], &o, 1, "sdpa");
          }
      }
}

/* matmul through its three decomposition paths (nd @ 2d via reshapes, batched with an
 * expanded batch dim, 1-d operand), mean and var_mean, and 2-d embedding, against loops. */
static void
test_numerics_matmul_reductions (void)
{
  int64_t n;

  {
    /* a [2, 3, 4] @ b [4, 5]: reshape to [6, 4], 2-d matmul, reshape to [2, 3, 5] */
    g_autofree double *got = run_prims ("def computation(a, b):\n"
                                        "  # a: \"cuda:0 f32[2, 3, 4]\"\n  # b: \"cuda:0 f32[4, 5]\"\n"
                                        "  t0 = ltorch.matmul(a, b)  # t0: \"cuda:0 f32[2, 3, 5]\"\n"
                                        "  return (t0,)\n", 1, &n);
    g_assert_cmpint (n, ==, 30);
    for (int i = 0; i < 6; i++)
      for (int j = 0; j < 5; j++)
        {
          double o = 0;
          for (int k = 0; k < 4; k++)
            o += input_value (0, i * 4 + k) * input_value (1, k * 5 + j);
          assert_close (&got[i * 5 + j], &o, 1, "matmul nd@2d");
        }
  }
  {
    /* a [2, 1, 3, 4] @ b [3, 4, 2]: batch dims broadcast to [2, 3] */
    g_autofree double *got = run_prims ("def computation(a, b):\n"
                                        "  # a: \"cuda:0 f32[2, 1, 3, 4]\"\n  # b: \"cuda:0 f32[3, 4, 2]\"\n"
                                        "  t0 = ltorch.matmul(a, b)  # t0: \"cuda:0 f32[2, 3, 3, 2]\"\n"
                                        "  return (t0,)\n", 1, &n);
    g_assert_cmpint (n, ==, 36);
    for (int p = 0; p < 2; p++)
      for (int q = 0; q < 3; q++)
        for (int i = 0; i < 3; i++)
          for (int j = 0; j < 2; j++)
            {
              double o = 0;
              for (int k = 0; k < 4; k++)
                o += input_value (0, p * 12 + i * 4 + k) * input_value (1, q * 8 + k * 2 + j);
              assert_close (&got[((p * 3 + q) * 3 + i) * 2 + j], &o, 1, "matmul batched");
            }
  }
  {
    /* mean over dim 1 of [3, 5], keepdim */
    g_autofree double *got = run_prims ("def computation(a):\n  # a: \"cuda:0 f32[3, 5]\"\n"
                                        "  t0 = ltorch.mean(a, 1, True, dtype=None)  # t0: \"cuda:0 f32[3, 1]\"\n"
                                        "  return (t0,)\n", 1, &n);
    g_assert_cmpint (n, ==, 3);
    for (int i = 0; i < 3; i++)
      {
        double m = 0;
        for (int j = 0; j < 5; j++)
          m += input_value (0, i * 5 + j) / 5;
        assert_close (&got[i], &m, 1, "mean");
      }
  }
  {
    /* var_mean(correction=1) over dim 0 of [5, 2]: the variance output */
    g_autofree double *got = run_prims ("def computation(a):\n  # a: \"cuda:0 f32[5, 2]\"\n"
                                        "  (t0, t1) = ltorch.var_mean(a, 0, keepdim=False, correction=1)\n"
                                        "  return (t0, t1)\n", 1, &n);
    g_assert_cmpint (n, ==, 2);
    for (int j = 0; j < 2; j++)
      {
        double m = 0, v = 0;
        for (int i = 0; i < 5; i++)
          m += input_value (0, i * 2 + j) / 5;
        for (int i = 0; i < 5; i++)
          v += (input_value (0, i * 2 + j) - m) * (input_value (0, i * 2 + j) - m) / 4;
        assert_close (&got[j], &v, 1, "var_mean var");
      }
  }
  {
    /* split [4, 2] by 3 along dim 0 (pieces of 3 and 1 rows), and basic indexing w[1::2, -1] */
    g_autofree double *got = run_prims ("def computation(w, i):\n"
                                        "  # w: \"cuda:0 f32[4, 2]\"\n  # i: \"cuda:0 i64[3]\"\n"
                                        "  (t0, t2) = ltorch.split(w, 3, 0)\n"
                                        "  t1 = ltorch.getitem(w, (slice(1,None,2), -1))  # t1: \"cuda:0 f32[2]\"\n"
                                        "  return (t1,)\n", 4, &n);
    double want[2] = { input_value (0, 1 * 2 + 1), input_value (0, 3 * 2 + 1) };
    g_assert_cmpint (n, ==, 2);
    assert_close (got, want, 2, "getitem w[1::2, -1]");
  }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);

  g_test_add_func ("/core/decompose/seed-add", test_seed_add);
  g_test_add_func ("/core/decompose/policy/elementwise-native", test_policy_elementwise);
  g_test_add_func ("/core/decompose/policy/matmul-upcast", test_policy_matmul);
  g_test_add_func ("/core/decompose/structure", test_structures);
  g_test_add_func ("/core/decompose/errors", test_errors);
  g_test_add_func ("/core/decompose/errors/sdpa-scale", test_errors_sdpa_scale);
  g_test_add_func ("/core/decompose/creation", test_creation);
  g_test_add_data_func ("/core/decompose/oracle/thunder-initial", current_files, test_oracle);
  g_test_add_func ("/core/decompose/oracle/all-shared", test_oracle_all);
  g_test_add_func ("/core/decompose/samples", test_samples);
  g_test_add_func ("/core/decompose/trace", test_trace);
  g_test_add_func ("/core/decompose/robust", test_robust);
  g_test_add_func ("/core/decompose/numerics/norms", test_numerics_norms);
  g_test_add_func ("/core/decompose/numerics/activations", test_numerics_activations);
  g_test_add_func ("/core/decompose/numerics/loss-attention", test_numerics_loss_attention);
  g_test_add_func ("/core/decompose/numerics/matmul-reductions", test_numerics_matmul_reductions);

  return g_test_run ();
}
