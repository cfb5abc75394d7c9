/* test-core-policy.c: the cast policy struct and its key=value spelling (core/cs-policy.c). */
#include "cs-config.h"

#include <string.h>

#include "cs-policy.h"

/* Thunder's defaults (DESIGN.md table): native, f32, off, consecutive, off, off, remove. */
static void
test_defaults (void)
{
  CsPolicy p;

  memset (&p, 0xff, sizeof p);
  cs_policy_init_default (&p);
  g_assert_cmpint (p.matmul, ==, CS_MATMUL_NATIVE);
  g_assert_cmpint (p.elementwise, ==, CS_ELEMENTWISE_F32);
  g_assert_cmpint (p.autocast, ==, CS_AUTOCAST_OFF);
  g_assert_cmpint (p.fusion, ==, CS_FUSION_CONSECUTIVE);
  g_assert_false (p.fuse_matmul);
  g_assert_false (p.fuse_linear);
  g_assert_cmpint (p.redundant_casts, ==, CS_REDUNDANT_CASTS_REMOVE);
  g_assert_cmpint (p.rounding, ==, CS_ROUNDING_FUSED);
  g_assert_cmpstr (cs_policy_get (&p, "rounding"), ==, "fused");
  g_assert_cmpint (p.attention, ==, CS_ATTENTION_PATTERN);
  g_assert_cmpstr (cs_policy_get (&p, "attention"), ==, "pattern");
  g_assert_false (p.allow_tf32);
  /* Thunder's default executors (thunder/__init__.py at 1e22aacb1), cuDNN not installed */
  g_assert_cmpuint (p.n_executors, ==, 6);
  g_assert_cmpint (p.executors[0], ==, CS_EXECUTOR_SDPA);
  g_assert_cmpint (p.executors[1], ==, CS_EXECUTOR_TORCHCOMPILE_XENTROPY);
  g_assert_cmpint (p.executors[2], ==, CS_EXECUTOR_NVFUSER);
  g_assert_cmpint (p.executors[3], ==, CS_EXECUTOR_CUSTOM_OP);
  g_assert_cmpint (p.executors[4], ==, CS_EXECUTOR_TORCH);
  g_assert_cmpint (p.executors[5], ==, CS_EXECUTOR_PYTHON);
  g_assert_false (cs_policy_has_executor (&p, CS_EXECUTOR_CUDNN));
  g_assert_cmpstr (cs_policy_get (&p, "executors"), ==,
                   "sdpa,torchcompile_xentropy,nvfuser,custom_op,torch,python");
}

/* executors=: Thunder's names in priority order; errors name the bad executor */
static void
test_executors (void)
{
  CsPolicy p, before;
  g_autoptr(GError) e1 = NULL;
  g_autoptr(GError) e2 = NULL;
  g_autoptr(GError) e3 = NULL;

  cs_policy_init_default (&p);
  g_assert_true (cs_policy_parse_assignment (&p, "executors=nvfuser, torch", NULL));
  g_assert_cmpuint (p.n_executors, ==, 2);
  g_assert_cmpint (cs_policy_executor_rank (&p, CS_EXECUTOR_NVFUSER), ==, 0);
  g_assert_cmpint (cs_policy_executor_rank (&p, CS_EXECUTOR_TORCH), ==, 1);
  g_assert_cmpint (cs_policy_executor_rank (&p, CS_EXECUTOR_SDPA), ==, -1);
  g_assert_cmpstr (cs_policy_get (&p, "executors"), ==, "nvfuser,torch");
  before = p;
  g_assert_false (cs_policy_set (&p, "executors", "nvfuser,apex", &e1));
  g_assert_error (e1, CS_POLICY_ERROR, CS_POLICY_ERROR_VALUE);
  g_assert_nonnull (strstr (e1->message, "'apex'"));
  g_assert_nonnull (strstr (e1->message, "torchcompile_xentropy"));
  g_assert_false (cs_policy_set (&p, "executors", "torch,torch", &e2));
  g_assert_nonnull (strstr (e2->message, "twice"));
  g_assert_false (cs_policy_set (&p, "executors", "", &e3));
  g_assert_error (e3, CS_POLICY_ERROR, CS_POLICY_ERROR_VALUE);
  g_assert_true (cs_policy_equal (&p, &before));
  /* order matters */
  g_assert_true (cs_policy_set (&p, "executors", "torch,nvfuser", NULL));
  g_assert_false (cs_policy_equal (&p, &before));
}

static void
test_set_each_key (void)
{
  CsPolicy p;
  g_autoptr(GError) error = NULL;

  cs_policy_init_default (&p);
  g_assert_true (cs_policy_parse_assignment (&p, "matmul=upcast-f32", &error));
  g_assert_no_error (error);
  g_assert_cmpint (p.matmul, ==, CS_MATMUL_UPCAST_F32);
  g_assert_true (cs_policy_set (&p, "elementwise", "native", NULL));
  g_assert_cmpint (p.elementwise, ==, CS_ELEMENTWISE_NATIVE);
  g_assert_true (cs_policy_set (&p, "autocast", "f16", NULL));
  g_assert_cmpint (p.autocast, ==, CS_AUTOCAST_F16);
  g_assert_true (cs_policy_set (&p, "fusion", "dataflow", NULL));
  g_assert_cmpint (p.fusion, ==, CS_FUSION_DATAFLOW);
  g_assert_true (cs_policy_set (&p, "fuse-matmul", "on", NULL));
  g_assert_true (p.fuse_matmul);
  g_assert_true (cs_policy_set (&p, "fuse-linear", "true", NULL));
  g_assert_true (p.fuse_linear);
  g_assert_true (cs_policy_set (&p, "redundant-casts", "keep", NULL));
  g_assert_cmpint (p.redundant_casts, ==, CS_REDUNDANT_CASTS_KEEP);
  g_assert_true (cs_policy_set (&p, "rounding", "eager", NULL));
  g_assert_cmpint (p.rounding, ==, CS_ROUNDING_EAGER);
  g_assert_true (cs_policy_set (&p, "tf32", "on", NULL));
  g_assert_true (p.allow_tf32);
  g_assert_true (cs_policy_set (&p, "fuse-matmul", "off", NULL));
  g_assert_false (p.fuse_matmul);
}

static void
test_errors (void)
{
  CsPolicy p, before;
  g_autoptr(GError) e1 = NULL;
  g_autoptr(GError) e2 = NULL;
  g_autoptr(GError) e3 = NULL;

  cs_policy_init_default (&p);
  before = p;
  g_assert_false (cs_policy_parse_assignment (&p, "matmul=fp8", &e1));
  g_assert_error (e1, CS_POLICY_ERROR, CS_POLICY_ERROR_VALUE);
  /* the message lists the accepted values */
  g_assert_nonnull (strstr (e1->message, "upcast-f32"));
  g_assert_false (cs_policy_parse_assignment (&p, "precision=native", &e2));
  g_assert_error (e2, CS_POLICY_ERROR, CS_POLICY_ERROR_KEY);
  g_assert_nonnull (strstr (e2->message, "redundant-casts"));
  g_assert_false (cs_policy_parse_assignment (&p, "matmul", &e3));
  g_assert_error (e3, CS_POLICY_ERROR, CS_POLICY_ERROR_KEY);
  g_assert_true (cs_policy_equal (&p, &before));
}

static void
test_roundtrip_string (void)
{
  CsPolicy p, q;
  g_autofree char *s = NULL;
  g_auto(GStrv) parts = NULL;

  cs_policy_init_default (&p);
  g_assert_true (cs_policy_set (&p, "matmul", "upcast-f32", NULL));
  g_assert_true (cs_policy_set (&p, "fusion", "off", NULL));
  s = cs_policy_to_string (&p);
  g_assert_cmpstr (s, ==, "matmul=upcast-f32 elementwise=f32 autocast=off fusion=off "
                          "fuse-matmul=off fuse-linear=off redundant-casts=remove tf32=off "
                          "executors=sdpa,torchcompile_xentropy,nvfuser,custom_op,torch,python");
  /* parsing the string back gives the same policy */
  cs_policy_init_default (&q);
  g_assert_false (cs_policy_equal (&p, &q));
  parts = g_strsplit (s, " ", -1);
  for (guint i = 0; parts[i]; i++)
    g_assert_true (cs_policy_parse_assignment (&q, parts[i], NULL));
  g_assert_true (cs_policy_equal (&p, &q));
}

/* grad-reduce (distributed traces) is written only when it is not native, and round-trips */
static void
test_grad_reduce_string (void)
{
  CsPolicy p, q;
  g_autofree char *s = NULL;
  g_auto(GStrv) parts = NULL;

  cs_policy_init_default (&p);
  g_assert_cmpint (p.grad_reduce, ==, CS_GRAD_REDUCE_NATIVE);
  g_assert_cmpstr (cs_policy_get (&p, "grad-reduce"), ==, "native");
  g_assert_true (cs_policy_set (&p, "grad-reduce", "f32", NULL));
  g_assert_cmpint (p.grad_reduce, ==, CS_GRAD_REDUCE_F32);
  s = cs_policy_to_string (&p);
  g_assert_cmpstr (s, ==, "matmul=native elementwise=f32 autocast=off fusion=consecutive "
                          "fuse-matmul=off fuse-linear=off redundant-casts=remove tf32=off "
                          "grad-reduce=f32 "
                          "executors=sdpa,torchcompile_xentropy,nvfuser,custom_op,torch,python");
  cs_policy_init_default (&q);
  g_assert_false (cs_policy_equal (&p, &q));
  parts = g_strsplit (s, " ", -1);
  for (guint i = 0; parts[i]; i++)
    g_assert_true (cs_policy_parse_assignment (&q, parts[i], NULL));
  g_assert_true (cs_policy_equal (&p, &q));
  g_assert_true (cs_policy_set (&p, "grad-reduce", "bf16", NULL));
  g_assert_cmpint (p.grad_reduce, ==, CS_GRAD_REDUCE_BF16);
}

/* ddp-bucket-mb (distributed traces) is written only when it is not off, round-trips, and
 * stands for Thunder's bucket_size_in_mb */
static void
test_ddp_bucket_string (void)
{
  CsPolicy p, q;
  g_autofree char *s = NULL;
  g_auto(GStrv) parts = NULL;
  g_autofree char *d = NULL;

  cs_policy_init_default (&p);
  g_assert_cmpint (p.ddp_bucket, ==, CS_DDP_BUCKET_OFF);
  g_assert_cmpfloat (cs_policy_ddp_bucket_mb (&p), ==, -1);
  d = cs_policy_to_string (&p);
  g_assert_null (strstr (d, "ddp-bucket-mb"));
  g_assert_true (cs_policy_set (&p, "ddp-bucket-mb", "25", NULL));
  g_assert_cmpfloat (cs_policy_ddp_bucket_mb (&p), ==, 25.0);
  s = cs_policy_to_string (&p);
  g_assert_cmpstr (s, ==, "matmul=native elementwise=f32 autocast=off fusion=consecutive "
                          "fuse-matmul=off fuse-linear=off redundant-casts=remove tf32=off "
                          "ddp-bucket-mb=25 "
                          "executors=sdpa,torchcompile_xentropy,nvfuser,custom_op,torch,python");
  cs_policy_init_default (&q);
  g_assert_false (cs_policy_equal (&p, &q));
  parts = g_strsplit (s, " ", -1);
  for (guint i = 0; parts[i]; i++)
    g_assert_true (cs_policy_parse_assignment (&q, parts[i], NULL));
  g_assert_true (cs_policy_equal (&p, &q));
  g_assert_true (cs_policy_set (&p, "ddp-bucket-mb", "1", NULL));
  g_assert_cmpfloat (cs_policy_ddp_bucket_mb (&p), ==, 1.0);
  g_assert_true (cs_policy_set (&p, "ddp-bucket-mb", "0", NULL));
  g_assert_cmpfloat (cs_policy_ddp_bucket_mb (&p), ==, 0.0);
  g_assert_false (cs_policy_set (&p, "ddp-bucket-mb", "7", NULL));
}

/* rounding (issue 19) is written only when it is eager, so every default policy string (and
 * every golden) reads as before the key; eager round-trips and differs from fused */
static void
test_rounding_string (void)
{
  CsPolicy p, q;
  g_autofree char *def = NULL;
  g_autofree char *s = NULL;
  g_auto(GStrv) parts = NULL;
  g_autoptr(GError) error = NULL;

  cs_policy_init_default (&p);
  def = cs_policy_to_string (&p);
  g_assert_null (strstr (def, "rounding"));
  g_assert_true (cs_policy_parse_assignment (&p, "rounding=eager", NULL));
  s = cs_policy_to_string (&p);
  g_assert_cmpstr (s, ==, "matmul=native elementwise=f32 autocast=off fusion=consecutive "
                          "fuse-matmul=off fuse-linear=off redundant-casts=remove rounding=eager "
                          "tf32=off "
                          "executors=sdpa,torchcompile_xentropy,nvfuser,custom_op,torch,python");
  cs_policy_init_default (&q);
  g_assert_false (cs_policy_equal (&p, &q));
  parts = g_strsplit (s, " ", -1);
  for (guint i = 0; parts[i]; i++)
    g_assert_true (cs_policy_parse_assignment (&q, parts[i], NULL));
  g_assert_true (cs_policy_equal (&p, &q));
  /* a bad value lists the accepted ones */
  g_assert_false (cs_policy_set (&q, "rounding", "once", &error));
  g_assert_error (error, CS_POLICY_ERROR, CS_POLICY_ERROR_VALUE);
  g_assert_nonnull (strstr (error->message, "fused, eager"));
  g_assert_cmpint (q.rounding, ==, CS_ROUNDING_EAGER);
}

/* attention (issue 20) is written only when fused, round-trips, and refuses other values. */
static void
test_attention_string (void)
{
  CsPolicy p, q;
  g_autofree char *def = NULL;
  g_autofree char *s = NULL;
  g_auto(GStrv) parts = NULL;
  g_autoptr(GError) error = NULL;

  cs_policy_init_default (&p);
  def = cs_policy_to_string (&p);
  g_assert_null (strstr (def, "attention"));
  g_assert_true (cs_policy_parse_assignment (&p, "attention=fused", NULL));
  g_assert_cmpint (p.attention, ==, CS_ATTENTION_FUSED);
  s = cs_policy_to_string (&p);
  g_assert_cmpstr (s, ==, "matmul=native elementwise=f32 autocast=off fusion=consecutive "
                          "fuse-matmul=off fuse-linear=off redundant-casts=remove tf32=off "
                          "executors=sdpa,torchcompile_xentropy,nvfuser,custom_op,torch,python "
                          "attention=fused");
  cs_policy_init_default (&q);
  g_assert_false (cs_policy_equal (&p, &q));
  parts = g_strsplit (s, " ", -1);
  for (guint i = 0; parts[i]; i++)
    g_assert_true (cs_policy_parse_assignment (&q, parts[i], NULL));
  g_assert_true (cs_policy_equal (&p, &q));
  g_assert_false (cs_policy_set (&q, "attention", "flash", &error));
  g_assert_error (error, CS_POLICY_ERROR, CS_POLICY_ERROR_VALUE);
  g_assert_nonnull (strstr (error->message, "pattern, fused"));
  g_assert_cmpint (q.attention, ==, CS_ATTENTION_FUSED);
}

static void
test_keys_values (void)
{
  guint n = 0;

  for (; cs_policy_keys[n]; n++)
    {
      const char * const *vals = cs_policy_values (cs_policy_keys[n]);
      CsPolicy p;
      g_assert_nonnull (vals);
      cs_policy_init_default (&p);
      /* every listed value is accepted and read back */
      for (guint v = 0; vals[v]; v++)
        {
          g_assert_true (cs_policy_set (&p, cs_policy_keys[n], vals[v], NULL));
          g_assert_cmpstr (cs_policy_get (&p, cs_policy_keys[n]), ==, vals[v]);
        }
    }
  /* matmul elementwise autocast fusion fuse-matmul fuse-linear redundant-casts rounding tf32
   * grad-reduce ddp-bucket-mb executors attention */
  g_assert_cmpuint (n, ==, 13);
  g_assert_null (cs_policy_values ("nope"));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, G_TEST_OPTION_ISOLATE_DIRS, NULL);
  g_test_add_func ("/core/policy/defaults", test_defaults);
  g_test_add_func ("/core/policy/set-each-key", test_set_each_key);
  g_test_add_func ("/core/policy/errors", test_errors);
  g_test_add_func ("/core/policy/roundtrip-string", test_roundtrip_string);
  g_test_add_func ("/core/policy/ddp-bucket-string", test_ddp_bucket_string);
  g_test_add_func ("/core/policy/keys-values", test_keys_values);
  g_test_add_func ("/core/policy/grad-reduce-string", test_grad_reduce_string);
  g_test_add_func ("/core/policy/executors", test_executors);
  g_test_add_func ("/core/policy/rounding-string", test_rounding_string);
  g_test_add_func ("/core/policy/attention-string", test_attention_string);
  return g_test_run ();
}
