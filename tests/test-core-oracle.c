/* test-core-oracle.c: castscope against what the real Thunder printed (issue 18).
 *
 * tests/oracle/traces/<case>__<config>.txt are thunder-kit outputs (commit 1e22aacb1, the H200;
 * tests/oracle/README.md): each holds Thunder's INITIAL trace and its FINAL FORWARD and FINAL
 * BACKWARD traces, among others.  For every file the INITIAL trace goes through castscope's
 * pipeline under the policy that matches the config (nvstub_default: Thunder's default
 * executors with nvFuser; ex_default: the same without nvFuser; ex_torch: executors=torch) and
 * the final traces are compared with Thunder's, up to names:
 * - the fusion regions in order, each by its signature (test-regions.h: the multiset of
 *   prims, the casts inside, the types of the inputs and outputs, an output that is an input
 *   included) and by the order of its prims and of its outputs (every region as Thunder's);
 * - the prims.convert_element_type statements of the whole trace, at every level;
 * - saved_for_backward (the types of the saved tensors, as a multiset).
 * Every difference that remains is listed in `known` with the Thunder code path that causes
 * it; the test fails on any other difference and on a listed one that is gone (so the list
 * stays true).
 */
#include "cs-config.h"

#include <string.h>

#include "cs-fuse.h"
#include "cs-pipeline.h"
#include "cs-policy.h"
#include "cs-split.h"
#include "test-regions.h"

/* A difference that remains: where, and the comparison's text for it. */
typedef struct
{
  const char *file;    /* trace file name */
  const char *what;    /* "forward region 3", "backward casts", "saved" */
  const char *diff;    /* the exact difference text (see region_diff and the callers) */
  const char *why;     /* the cause, with the Thunder code path */
} Known;

static const Known known[] = {
  { "cross_entropy__ex_torch.txt", "saved",
    "thunder+[cuda:0 i64[128], cuda:0 i64[]] castscope+[cuda:0 f32[], cuda:0 i64[128, 1]]",
    "cross-entropy without torchcompile_xentropy (executors=torch): Thunder differentiates "
    "ltorch.log_softmax and ltorch.nll_loss by their augmented forward/backward pairs under "
    "every executor list (thunder/core/transforms.py: log_softmax_aug_fwd, nll_loss_aug_fwd "
    "saving _nll_loss_helper's total_weight, nll_loss_backward -> ltorch.nll_loss_backward("
    "g, log_probs, flat target, None, 'mean', -100, total_weight); cross_entropy__ex_torch's "
    "GRAD JOINT, t88), so it saves the flat targets and the i64 count; castscope's grad pass "
    "uses those pairs only when torchcompile_xentropy is in the list (cs-grad-private.h "
    "xentropy_rules) and otherwise differentiates the written-out decomposition (the "
    "clamped, unsqueezed targets of take_along_axis and the count converted to f32 for "
    "prims.div are saved); not a fusion difference (no nvFuser in this config)" },
  { "block_with_buffers__ex_torch.txt", "saved",
    "thunder+[cuda:0 i64[64], cuda:0 i64[]] castscope+[cuda:0 f32[], cuda:0 i64[64, 1]]",
    "the same cross-entropy grad difference as cross_entropy__ex_torch (cs-grad-private.h "
    "xentropy_rules against thunder/core/transforms.py nll_loss_aug_fwd / nll_loss_backward)" },
};

/* The policy of a config (the part of the file name after "__"). */
static gboolean
policy_for_config (const char *config, CsPolicy *p)
{
  cs_policy_init_default (p);
  if (g_str_equal (config, "nvstub_default"))
    return TRUE;
  if (g_str_equal (config, "ex_default"))
    return cs_policy_parse_assignment (p, "executors=sdpa,torchcompile_xentropy,custom_op,torch,python",
                                       NULL);
  if (g_str_equal (config, "ex_torch"))
    return cs_policy_parse_assignment (p, "executors=torch", NULL);
  return FALSE;
}

/* The section tags of the file in order ("INITIAL", "FINAL FORWARD", ...; "" for an untagged
 * section): each section is one trace of the parsed list. */
static GPtrArray *
section_tags (const char *text)
{
  GPtrArray *tags = g_ptr_array_new_with_free_func (g_free);
  const char *p = text;

  while ((p = strstr (p, "\n# ===== [")) != NULL)
    {
      const char *eol = strchr (p + 1, '\n');
      g_autofree char *line = g_strndup (p + 1, eol ? (gsize) (eol - p - 1) : strlen (p + 1));
      const char *tag = "";
      static const char *const names[] = { "[INITIAL]", "[GRAD JOINT]", "[FUSED JOINT]",
                                           "[FINAL FORWARD]", "[FINAL BACKWARD]" };
      for (guint i = 0; i < G_N_ELEMENTS (names); i++)
        if (strstr (line, names[i]) != NULL)
          tag = names[i];
      g_ptr_array_add (tags, g_strndup (tag + (*tag ? 1 : 0), *tag ? strlen (tag) - 2 : 0));
      p = eol ? eol : p + 1;
    }
  return tags;
}

static gint
tag_index (GPtrArray *tags, const char *tag)
{
  for (guint i = 0; i < tags->len; i++)
    if (g_str_equal (tags->pdata[i], tag))
      return (gint) i;
  return -1;
}

/* prims.convert_element_type statements of @t at every level (each statement once). */
static guint
count_casts_rec (CsStmt *const *stmts, guint n)
{
  guint c = 0;
  for (guint i = 0; i < n; i++)
    {
      const CsStmt *s = stmts[i];
      if (s->kind != CS_STMT_CALL)
        continue;
      if (s->n_subs > 0)
        c += count_casts_rec (s->subs, s->n_subs);
      else if (_cs_stmt_is_cast (s, NULL, NULL))
        c++;
    }
  return c;
}

static char *
join_sorted (GPtrArray *a)
{
  GString *s = g_string_new (NULL);
  g_ptr_array_sort (a, cmp_str);
  for (guint i = 0; i < a->len; i++)
    g_string_append_printf (s, "%s%s", i ? ", " : "", (const char *) a->pdata[i]);
  return g_string_free (s, FALSE);
}

/* "part thunder+[...] castscope+[...]": the strings of each list the other does not match,
 * "" when they agree.  Equal strings match first; then "Any" (a proxy Thunder's printed trace
 * leaves untyped, such as the outputs of a tuple-returning call) matches any one string of
 * castscope's left over. */
static char *
list_diff (const char *part, GPtrArray *ours, GPtrArray *thunders)
{
  g_autofree gboolean *ua = g_new0 (gboolean, ours->len + 1);
  g_autofree gboolean *ub = g_new0 (gboolean, thunders->len + 1);
  g_autoptr(GPtrArray) la = g_ptr_array_new ();
  g_autoptr(GPtrArray) lb = g_ptr_array_new ();
  g_autofree char *ta = NULL, *tb = NULL;

  for (guint i = 0; i < ours->len; i++)
    for (guint j = 0; j < thunders->len && !ua[i]; j++)
      if (!ub[j] && g_str_equal (ours->pdata[i], thunders->pdata[j]))
        ua[i] = ub[j] = TRUE;
  for (guint i = 0; i < ours->len; i++)
    for (guint j = 0; j < thunders->len && !ua[i]; j++)
      if (!ub[j] && g_str_equal (thunders->pdata[j], "Any"))
        ua[i] = ub[j] = TRUE;
  for (guint i = 0; i < ours->len; i++)
    if (!ua[i])
      g_ptr_array_add (la, ours->pdata[i]);
  for (guint j = 0; j < thunders->len; j++)
    if (!ub[j])
      g_ptr_array_add (lb, thunders->pdata[j]);
  if (la->len == 0 && lb->len == 0)
    return g_strdup ("");
  ta = join_sorted (la);
  tb = join_sorted (lb);
  return g_strdup_printf ("%s%sthunder+[%s] castscope+[%s]", part, *part ? " " : "", tb, ta);
}

/* The parts of a region's signature: its prims (a reshape to the same shape counted as the
 * shallow_copy it is), the casts inside, the types of its inputs (what its subsymbols read
 * from outside) and of its outputs, those that are inputs included (Thunder prints `[t500,
 * t349] = nvFusion2(t500)` when remove_redundant_casts maps an output back onto an input:
 * block_with_buffers__nvstub_default.txt's backward nvFusion2). */
static void
region_parts (const CsStmt *r, GPtrArray **prims, GPtrArray **casts, GPtrArray **ins,
              GPtrArray **outs)
{
  g_autoptr(GPtrArray) tmp = g_ptr_array_new ();
  g_autoptr(GHashTable) in_set = g_hash_table_new (g_direct_hash, g_direct_equal);
  g_autoptr(GHashTable) produced = g_hash_table_new (g_direct_hash, g_direct_equal);

  *prims = g_ptr_array_new_with_free_func (g_free);
  *casts = g_ptr_array_new_with_free_func (g_free);
  *ins = g_ptr_array_new_with_free_func (g_free);
  *outs = g_ptr_array_new_with_free_func (g_free);
  for (guint i = 0; i < r->n_subs; i++)
    {
      const CsStmt *s = r->subs[i];
      const CsOp *sem = cs_op_semantic (s->op);
      CsValue *a0 = cs_stmt_get_arg (s, 0, NULL);
      CsProxy *o = cs_stmt_get_output (s), *in;
      CsDtype to;
      if (sem->id == CS_OP_PRIM_RESHAPE && a0 && a0->kind == CS_VALUE_PROXY && o
          && a0->u.proxy->rank == o->rank
          && memcmp (a0->u.proxy->shape, o->shape, sizeof (int64_t) * o->rank) == 0)
        sem = cs_op_get (CS_OP_PRIM_SHALLOW_COPY);
      g_ptr_array_add (*prims, g_strdup (sem->name));
      if (_cs_stmt_is_cast (s, &in, &to))
        g_ptr_array_add (*casts, in->typed ? g_strdup_printf ("%s->%s",
                                                              cs_dtype_short_name (in->dtype),
                                                              cs_dtype_short_name (to))
                                           : g_strdup ("Any"));
      g_ptr_array_set_size (tmp, 0);
      _cs_stmt_reads (s, tmp);
      for (guint j = 0; j < tmp->len; j++)
        if (!g_hash_table_contains (produced, tmp->pdata[j])
            && g_hash_table_add (in_set, tmp->pdata[j]))
          g_ptr_array_add (*ins, cs_proxy_type_string (tmp->pdata[j]));
      g_ptr_array_set_size (tmp, 0);
      _cs_stmt_writes (s, tmp);
      for (guint j = 0; j < tmp->len; j++)
        g_hash_table_add (produced, tmp->pdata[j]);
    }
  g_ptr_array_set_size (tmp, 0);
  _cs_stmt_writes (r, tmp);
  for (guint i = 0; i < tmp->len; i++)
    g_ptr_array_add (*outs, cs_proxy_type_string (tmp->pdata[i]));
}

/* TRUE when the two regions run the same prims in the same order (Thunder's consumer order
 * after rematerialization is toposort_bsym_dag's; a reshape to the same shape counts as the
 * shallow_copy it is, as in region_parts) and list outputs of the same types in the same
 * order (a rematerialized consumer keeps its outputs' order: the LayerNorm backward's weight
 * and bias gradients before the input's). */
static gboolean
same_order (const CsStmt *ours, const CsStmt *thunders)
{
  GPtrArray *a[4], *b[4];
  gboolean same;

  region_parts (ours, &a[0], &a[1], &a[2], &a[3]);
  region_parts (thunders, &b[0], &b[1], &b[2], &b[3]);
  same = a[0]->len == b[0]->len && a[3]->len == b[3]->len;
  for (guint i = 0; i < a[0]->len && same; i++)
    same = g_str_equal (a[0]->pdata[i], b[0]->pdata[i]);
  for (guint i = 0; i < a[3]->len && same; i++)
    same = g_str_equal (a[3]->pdata[i], b[3]->pdata[i]) || g_str_equal (b[3]->pdata[i], "Any");
  for (guint i = 0; i < 4; i++)
    {
      g_ptr_array_unref (a[i]);
      g_ptr_array_unref (b[i]);
    }
  return same;
}

/* "" when the regions agree up to names, else what differs, part by part. */
static char *
region_diff (const CsStmt *ours, const CsStmt *thunders)
{
  static const char *const names[] = { "prims", "casts", "in", "out" };
  GPtrArray *a[4], *b[4];
  GString *s = g_string_new (NULL);

  region_parts (ours, &a[0], &a[1], &a[2], &a[3]);
  region_parts (thunders, &b[0], &b[1], &b[2], &b[3]);
  for (guint i = 0; i < 4; i++)
    {
      g_autofree char *d = list_diff (names[i], a[i], b[i]);
      if (*d)
        g_string_append_printf (s, "%s%s", s->len ? "; " : "", d);
      g_ptr_array_unref (a[i]);
      g_ptr_array_unref (b[i]);
    }
  return g_string_free (s, FALSE);
}

static GPtrArray *
regions_of (const CsTrace *t)
{
  GPtrArray *a = g_ptr_array_new ();
  for (guint i = 0; i < t->n_stmts; i++)
    if (_cs_stmt_is_region (t->stmts[i]))
      g_ptr_array_add (a, t->stmts[i]);
  return a;
}

static const Known *
find_known (const char *file, const char *what)
{
  for (guint i = 0; i < G_N_ELEMENTS (known); i++)
    if (known[i].file && g_str_equal (known[i].file, file) && g_str_equal (known[i].what, what))
      return &known[i];
  return NULL;
}

/* Checks one comparison: @diff must be "" unless `known` lists (@file, @what), then it must be
 * exactly the listed text.  Counts the mismatches in *@n_bad (each one reported). */
static void
check (const char *file, const char *what, const char *diff, guint *n_bad, guint *n_known)
{
  const Known *k = find_known (file, what);

  if (k != NULL)
    {
      (*n_known)++;
      if (!g_str_equal (k->diff, diff))
        {
          g_test_message ("%s: %s: the known difference changed:\n  listed: %s\n  now:    %s",
                          file, what, k->diff, *diff ? diff : "(none)");
          (*n_bad)++;
        }
      return;
    }
  if (*diff)
    {
      g_test_message ("%s: %s: %s", file, what, diff);
      (*n_bad)++;
    }
}

static GPtrArray *
saved_types (const CsTrace *fw)
{
  g_autoptr(GPtrArray) saved = cs_split_dup_saved (fw);
  GPtrArray *types = g_ptr_array_new_with_free_func (g_free);
  for (guint i = 0; i < saved->len; i++)
    g_ptr_array_add (types, cs_proxy_type_string (saved->pdata[i]));
  return types;
}

/* Regions compared, and those whose prims run in Thunder's order. */
static guint n_regions_compared, n_regions_same_order;

static void
compare_side (const char *file, const char *side, const CsTrace *ours, const CsTrace *thunders,
              guint *n_bad, guint *n_known)
{
  g_autoptr(GPtrArray) a = regions_of (ours);
  g_autoptr(GPtrArray) b = regions_of (thunders);
  g_autofree char *what = g_strdup_printf ("%s regions", side);
  g_autofree char *count = NULL;
  g_autofree char *casts = NULL;
  guint ca = count_casts_rec (ours->stmts, ours->n_stmts);
  guint cb = count_casts_rec (thunders->stmts, thunders->n_stmts);

  count = a->len == b->len ? g_strdup ("")
                           : g_strdup_printf ("thunder %u castscope %u", b->len, a->len);
  check (file, what, count, n_bad, n_known);
  for (guint i = 0; i < MIN (a->len, b->len); i++)
    {
      g_autofree char *w = g_strdup_printf ("%s region %u", side, i);
      g_autofree char *d = region_diff (a->pdata[i], b->pdata[i]);
      check (file, w, d, n_bad, n_known);
      n_regions_compared++;
      if (same_order (a->pdata[i], b->pdata[i]))
        n_regions_same_order++;
      else
        g_test_message ("%s: %s: prims or outputs not in Thunder's order", file, w);
    }
  g_free (what);
  what = g_strdup_printf ("%s casts", side);
  casts = ca == cb ? g_strdup ("") : g_strdup_printf ("thunder %u castscope %u", cb, ca);
  check (file, what, casts, n_bad, n_known);
}

static void
test_oracle_traces (void)
{
  const char *srcdir = g_getenv ("G_TEST_SRCDIR");
  g_autofree char *dir = NULL;
  g_autoptr(GDir) d = NULL;
  g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func (g_free);
  guint n_bad = 0, n_known = 0, n_files = 0;
  const char *name;

  dir = g_build_filename (srcdir ? srcdir : ".", "oracle", "traces", NULL);
  d = g_dir_open (dir, 0, NULL);
  if (d == NULL)
    {
      g_test_skip ("tests/oracle/traces not found");
      return;
    }
  while ((name = g_dir_read_name (d)) != NULL)
    if (g_str_has_suffix (name, ".txt") && strstr (name, "__") != NULL)
      g_ptr_array_add (names, g_strdup (name));
  g_ptr_array_sort (names, cmp_str);

  for (guint f = 0; f < names->len; f++)
    {
      const char *file = names->pdata[f];
      g_autofree char *path = g_build_filename (dir, file, NULL);
      g_autofree char *text = NULL;
      g_autofree char *config = NULL;
      g_autoptr(GError) error = NULL;
      g_autoptr(CsTraceList) list = NULL;
      g_autoptr(GPtrArray) tags = NULL;
      g_autoptr(CsPipeline) pl = NULL;
      gint ii, fi, bi;
      CsPolicy p;

      config = g_strndup (strstr (file, "__") + 2, strlen (strstr (file, "__") + 2) - 4);
      g_assert_true (policy_for_config (config, &p));
      g_assert_true (g_file_get_contents (path, &text, NULL, NULL));
      tags = section_tags (text);
      list = cs_parse_file (path, &error);
      g_assert_no_error (error);
      g_assert_cmpuint (list->traces->len, ==, tags->len);
      ii = tag_index (tags, "INITIAL");
      fi = tag_index (tags, "FINAL FORWARD");
      bi = tag_index (tags, "FINAL BACKWARD");
      g_assert_cmpint (ii, >=, 0);
      g_assert_cmpint (fi, >=, 0);
      pl = cs_pipeline_run (list->traces->pdata[ii], &p, NULL, &error);
      g_assert_no_error (error);
      compare_side (file, "forward", cs_pipeline_get_forward (pl), list->traces->pdata[fi],
                    &n_bad, &n_known);
      if (bi >= 0)
        {
          g_autoptr(GPtrArray) sa = saved_types (cs_pipeline_get_forward (pl));
          g_autoptr(GPtrArray) sb = saved_types (list->traces->pdata[fi]);
          g_autofree char *sd = list_diff ("", sa, sb);
          g_assert_nonnull (cs_pipeline_get_backward (pl));
          compare_side (file, "backward", cs_pipeline_get_backward (pl),
                        list->traces->pdata[bi], &n_bad, &n_known);
          check (file, "saved", sd, &n_bad, &n_known);
        }
      n_files++;
    }
  g_test_message ("%u oracle files, %u known differences, %u of %u regions in Thunder's order",
                  n_files, n_known, n_regions_same_order, n_regions_compared);
  /* the order of the prims inside a region and of its outputs: every one of the 108 regions
   * as Thunder's (the rematerialized consumers toposorted as Thunder does, their outputs in
   * the order they had; the casts remove_redundant_casts leaves unread kept until
   * nvFuserExecutor.cse, which keeps the first of two equal casts; the prims flattened out of
   * a backward composite without the BACKWARD tag, so that CSE keeps them apart from the
   * equal top-level prims, as Thunder's BoundSymbolRHS does) */
  g_assert_cmpuint (n_regions_compared, ==, 108);
  g_assert_cmpuint (n_regions_same_order, ==, 108);
  g_assert_cmpuint (n_files, >, 0);
  /* every listed difference was seen */
  {
    guint n_listed = 0;
    for (guint i = 0; i < G_N_ELEMENTS (known); i++)
      n_listed += known[i].file != NULL;
    g_assert_cmpuint (n_known, ==, n_listed);
  }
  g_assert_cmpuint (n_bad, ==, 0);
}

/* The statement of @t (top level or inside a region) that writes @p, or NULL. */
static const CsStmt *
producer_of (const CsTrace *t, const CsProxy *p)
{
  g_autoptr(GPtrArray) tmp = g_ptr_array_new ();
  for (guint i = 0; i < t->n_stmts; i++)
    {
      const CsStmt *s = t->stmts[i];
      guint n = _cs_stmt_is_region (s) ? s->n_subs : 1;
      for (guint k = 0; k < n; k++)
        {
          const CsStmt *x = _cs_stmt_is_region (s) ? s->subs[k] : s;
          g_ptr_array_set_size (tmp, 0);
          _cs_stmt_writes (x, tmp);
          for (guint j = 0; j < tmp->len; j++)
            if (tmp->pdata[j] == p)
              return x;
        }
    }
  return NULL;
}

/* Saved for backward by expression: RMSNorm and LayerNorm save rsqrt(var + eps) as f32[N, 1]
 * (Thunder's final forwards: the f32 [4, 32, 1] tensor they save is a prims.rsqrt output), not
 * the variance; the producer is found in castscope's forward and in Thunder's. */
static void
test_oracle_saved_rsqrt (void)
{
  static const char *const files[] = { "rmsnorm_swiglu__nvstub_default.txt",
                                       "layernorm__nvstub_default.txt" };
  const char *srcdir = g_getenv ("G_TEST_SRCDIR");

  for (guint f = 0; f < G_N_ELEMENTS (files); f++)
    {
      g_autofree char *path = g_build_filename (srcdir ? srcdir : ".", "oracle", "traces",
                                                files[f], NULL);
      g_autofree char *text = NULL;
      g_autoptr(GError) error = NULL;
      g_autoptr(CsTraceList) list = NULL;
      g_autoptr(GPtrArray) tags = NULL;
      g_autoptr(CsPipeline) pl = NULL;
      const CsTrace *sides[2];
      CsPolicy p;

      if (!g_file_get_contents (path, &text, NULL, NULL))
        {
          g_test_skip ("tests/oracle/traces not found");
          return;
        }
      tags = section_tags (text);
      list = cs_parse_file (path, &error);
      g_assert_no_error (error);
      cs_policy_init_default (&p);
      pl = cs_pipeline_run (list->traces->pdata[tag_index (tags, "INITIAL")], &p, NULL, &error);
      g_assert_no_error (error);
      sides[0] = cs_pipeline_get_forward (pl);
      sides[1] = list->traces->pdata[tag_index (tags, "FINAL FORWARD")];
      for (guint k = 0; k < 2; k++)
        {
          g_autoptr(GPtrArray) saved = cs_split_dup_saved (sides[k]);
          guint n_rsqrt = 0, n_f32_n1 = 0;
          for (guint i = 0; i < saved->len; i++)
            {
              const CsProxy *sp = saved->pdata[i];
              const CsStmt *w;
              if (!sp->typed || sp->dtype != CS_DTYPE_F32 || sp->rank != 3 || sp->shape[2] != 1)
                continue;
              n_f32_n1++;
              w = producer_of (sides[k], sp);
              g_assert_nonnull (w);
              if (cs_op_semantic (w->op)->id == CS_OP_PRIM_RSQRT)
                n_rsqrt++;
            }
          g_assert_cmpuint (n_f32_n1, ==, 1);
          g_assert_cmpuint (n_rsqrt, ==, 1);
        }
    }
}

/* The regions of @t that list one of their inputs as an output, as "callee:name" (the
 * input's name), in order. */
static char *
pass_through_outputs (const CsTrace *t)
{
  GString *s = g_string_new (NULL);
  g_autoptr(GPtrArray) ins = g_ptr_array_new ();
  g_autoptr(GPtrArray) outs = g_ptr_array_new ();

  for (guint i = 0; i < t->n_stmts; i++)
    {
      const CsStmt *r = t->stmts[i];
      if (!_cs_stmt_is_region (r))
        continue;
      g_ptr_array_set_size (ins, 0);
      g_ptr_array_set_size (outs, 0);
      _cs_stmt_reads (r, ins);
      _cs_stmt_writes (r, outs);
      for (guint j = 0; j < outs->len; j++)
        for (guint k = 0; k < ins->len; k++)
          if (outs->pdata[j] == ins->pdata[k])
            g_string_append_printf (s, "%s%s:%s", s->len ? " " : "", r->callee,
                                    ((CsProxy *) outs->pdata[j])->name);
    }
  return g_string_free (s, FALSE);
}

/* A region output remove_redundant_casts maps back onto one of the region's inputs stays an
 * output: Thunder's final backward of block_with_buffers prints `[t500, t349] =
 * nvFusion2(t500)` (the bf16 -> f32 -> bf16 round trip of t500 folded onto t500; the matmul's
 * reshape t349 reads it); castscope's backward has the same region with its own name for the
 * input (t209), and no other region passes an input through, in either trace. */
static void
test_oracle_pass_through (void)
{
  const char *srcdir = g_getenv ("G_TEST_SRCDIR");
  g_autofree char *path = g_build_filename (srcdir ? srcdir : ".", "oracle", "traces",
                                            "block_with_buffers__nvstub_default.txt", NULL);
  g_autofree char *text = NULL;
  g_autofree char *ours = NULL, *thunders = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(CsTraceList) list = NULL;
  g_autoptr(GPtrArray) tags = NULL;
  g_autoptr(CsPipeline) pl = NULL;
  CsPolicy p;

  if (!g_file_get_contents (path, &text, NULL, NULL))
    {
      g_test_skip ("tests/oracle/traces not found");
      return;
    }
  tags = section_tags (text);
  list = cs_parse_file (path, &error);
  g_assert_no_error (error);
  cs_policy_init_default (&p);
  pl = cs_pipeline_run (list->traces->pdata[tag_index (tags, "INITIAL")], &p, NULL, &error);
  g_assert_no_error (error);
  thunders = pass_through_outputs (list->traces->pdata[tag_index (tags, "FINAL BACKWARD")]);
  ours = pass_through_outputs (cs_pipeline_get_backward (pl));
  g_assert_cmpstr (thunders, ==, "nvFusion2:t500");
  g_assert_cmpstr (ours, ==, "nvFusion2:t209");
  g_assert_true (cs_fuse_check_invariants (cs_pipeline_get_backward (pl), &error));
  g_assert_no_error (error);
}

/* Without nvFuser (Thunder's default executors less nvfuser, as the shared LLaMA traces were
 * printed) no fusion pass runs, hence no remove_redundant_casts and no CSE: castscope's final
 * traces hold exactly as many prims.convert_element_type as Thunder's (376 forward, 720
 * backward; 330 and 672 while castscope still ran CSE). */
static void
test_llama_torch_casts (void)
{
  g_autoptr(CsTrace) init = load_shared ("thunder_llama_stack_initial.txt");
  g_autoptr(CsTrace) tf = load_shared ("thunder_llama_stack_final_fwd.txt");
  g_autoptr(CsTrace) tb = load_shared ("thunder_llama_stack_final_bwd.txt");
  g_autoptr(CsPipeline) pl = NULL;
  g_autoptr(GError) error = NULL;
  CsPolicy p;

  if (init == NULL || tf == NULL || tb == NULL)
    {
      g_test_skip ("needs ../shared/traces/thunder_llama_stack_*.txt");
      return;
    }
  cs_policy_init_default (&p);
  g_assert_true (cs_policy_parse_assignment (&p, "executors=sdpa,torchcompile_xentropy,custom_op,"
                                                 "torch,python", NULL));
  pl = cs_pipeline_run (init, &p, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (count_casts_rec (tf->stmts, tf->n_stmts), ==, 376);
  g_assert_cmpuint (count_casts_rec (tb->stmts, tb->n_stmts), ==, 720);
  g_assert_cmpuint (count_casts_rec (cs_pipeline_get_forward (pl)->stmts,
                                     cs_pipeline_get_forward (pl)->n_stmts), ==, 376);
  g_assert_cmpuint (count_casts_rec (cs_pipeline_get_backward (pl)->stmts,
                                     cs_pipeline_get_backward (pl)->n_stmts), ==, 720);
}

/* True when @fw saves a proxy named @name, or (@name NULL) one a prims.transpose produces. */
static gboolean
saves (const CsTrace *fw, const char *name)
{
  g_autoptr(GPtrArray) saved = cs_split_dup_saved (fw);
  for (guint i = 0; i < saved->len; i++)
    {
      const CsProxy *sp = saved->pdata[i];
      const CsStmt *w = name ? NULL : producer_of (fw, sp);
      if (name ? g_str_equal (sp->name, name)
               : w != NULL && cs_op_semantic (w->op)->id == CS_OP_PRIM_TRANSPOSE)
        return TRUE;
    }
  return FALSE;
}

/* softmax(q @ k^T * s) @ v: with matmul fusion the transpose of k sits in a region with the
 * matmul and rematerialization recomputes it in the backward region (the cut passes k, an input
 * of the producer, half the weight of its transpose): k is saved, not transpose(k).  With the
 * torch executor alone there is no rematerialization and Thunder saves transpose(k)
 * (thunder_e_softmax_attention_final_fwd.txt: t133 = torch.permute(k, ...)). */
static void
test_attention_saves_k (void)
{
  g_autoptr(CsTrace) init = load_shared ("thunder_e_softmax_attention_initial.txt");
  g_autoptr(CsTrace) tf = load_shared ("thunder_e_softmax_attention_final_fwd.txt");
  g_autoptr(GError) error = NULL;
  CsPolicy p;

  if (init == NULL || tf == NULL)
    {
      g_test_skip ("needs ../shared/traces/thunder_e_softmax_attention_*.txt");
      return;
    }
  {
    g_autoptr(CsPipeline) pl = NULL;
    cs_policy_init_default (&p);
    p.fuse_matmul = TRUE;
    pl = cs_pipeline_run (init, &p, NULL, &error);
    g_assert_no_error (error);
    g_assert_true (saves (cs_pipeline_get_forward (pl), "k"));
    g_assert_false (saves (cs_pipeline_get_forward (pl), NULL));
  }
  {
    g_autoptr(CsPipeline) pl = NULL;
    cs_policy_init_default (&p);
    g_assert_true (cs_policy_parse_assignment (&p, "executors=torch", NULL));
    pl = cs_pipeline_run (init, &p, NULL, &error);
    g_assert_no_error (error);
    g_assert_false (saves (cs_pipeline_get_forward (pl), "k"));
    g_assert_true (saves (cs_pipeline_get_forward (pl), NULL));
    g_assert_false (saves (tf, "k"));
  }
}

/* The Thunder traces of ../shared/traces that have final counterparts: castscope's pipeline on
 * the initial trace against Thunder's final forward and backward, under the executors Thunder
 * ran (each file's header): regions with their prims, casts and saved_for_backward, as for the
 * oracle files (differences listed in known[] under the final forward's name). */
static void
test_shared_traces (void)
{
  static const struct { const char *initial, *final, *policy; } cases[] = {
    { "thunder_a_seed_matmul", "thunder_a_seed_matmul", "executors=torch" },
    { "thunder_b_mlp_gelu", "thunder_b_mlp_gelu", "executors=torch" },
    { "thunder_e_softmax_attention", "thunder_e_softmax_attention", "executors=torch" },
    { "thunder_llama_stack", "thunder_llama_stack",
      "executors=sdpa,torchcompile_xentropy,custom_op,torch,python" },
    { "thunder_a_seed_matmul", "thunder_nvfuser_a_seed_matmul_default", NULL },
    { "thunder_a_seed_matmul", "thunder_nvfuser_a_seed_matmul_linear_matmul", "fuse-matmul=on;fuse-linear=on" },
    { "thunder_b_mlp_gelu", "thunder_nvfuser_b_mlp_gelu_default", NULL },
    { "thunder_b_mlp_gelu", "thunder_nvfuser_b_mlp_gelu_linear_matmul", "fuse-matmul=on;fuse-linear=on" },
  };
  const char *dir = g_getenv ("CS_SHARED_TRACES");
  guint n_bad = 0, n_known = 0, n = 0;

  for (gsize c = 0; dir != NULL && c < G_N_ELEMENTS (cases); c++)
    {
      g_autofree char *ip = g_strdup_printf ("%s/%s_initial.txt", dir, cases[c].initial);
      g_autofree char *fp = g_strdup_printf ("%s/%s_final_fwd.txt", dir, cases[c].final);
      g_autofree char *bp = g_strdup_printf ("%s/%s_final_bwd.txt", dir, cases[c].final);
      g_autofree char *file = g_strdup_printf ("%s_final_fwd.txt", cases[c].final);
      g_autoptr(GError) error = NULL;
      g_autoptr(CsTraceList) il = NULL, fl = NULL, bl = NULL;
      g_autoptr(CsPipeline) pl = NULL;
      g_autoptr(GPtrArray) sa = NULL, sb = NULL;
      g_autofree char *sd = NULL;
      CsPolicy p;

      if (!g_file_test (ip, G_FILE_TEST_EXISTS) || !g_file_test (fp, G_FILE_TEST_EXISTS))
        continue;
      cs_policy_init_default (&p);
      if (cases[c].policy)
        {
          g_auto(GStrv) kv = g_strsplit (cases[c].policy, ";", -1);

          for (guint k = 0; kv[k]; k++)
            g_assert_true (cs_policy_parse_assignment (&p, kv[k], NULL));
        }
      il = cs_parse_file (ip, &error);
      g_assert_no_error (error);
      fl = cs_parse_file (fp, &error);
      g_assert_no_error (error);
      bl = cs_parse_file (bp, &error);
      g_assert_no_error (error);
      pl = cs_pipeline_run (il->traces->pdata[0], &p, NULL, &error);
      g_assert_no_error (error);
      compare_side (file, "forward", cs_pipeline_get_forward (pl), fl->traces->pdata[0], &n_bad, &n_known);
      compare_side (file, "backward", cs_pipeline_get_backward (pl), bl->traces->pdata[0], &n_bad, &n_known);
      sa = saved_types (cs_pipeline_get_forward (pl));
      sb = saved_types (fl->traces->pdata[0]);
      sd = list_diff ("", sa, sb);
      check (file, "saved", sd, &n_bad, &n_known);
      n++;
    }
  if (n == 0)
    {
      g_test_skip ("../shared/traces not found");
      return;
    }
  g_test_message ("%u shared trace pairs, %u known differences", n, n_known);
  g_assert_cmpuint (n, ==, G_N_ELEMENTS (cases));
  g_assert_cmpuint (n_bad, ==, 0);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/core/oracle/traces", test_oracle_traces);
  g_test_add_func ("/core/oracle/saved-rsqrt", test_oracle_saved_rsqrt);
  g_test_add_func ("/core/oracle/pass-through", test_oracle_pass_through);
  g_test_add_func ("/core/oracle/shared-traces", test_shared_traces);
  g_test_add_func ("/core/oracle/llama-torch-casts", test_llama_torch_casts);
  g_test_add_func ("/core/oracle/attention-saves-k", test_attention_saves_k);
  return g_test_run ();
}
