/* test-kernels-plan.c: the whole-plan cache (kernels/cs-cuda-plan.c) on dry builds (no device).
 *
 * For bundled samples, the 4-block GPT and the shared 8-block LLaMA: a dry build with
 * CS_CUDA_BUILD_PLAN_CACHE into an empty cache directory generates the plan and writes
 * plan-<key>.bin; a second build reads it (plan_cached) and must hold the same program: every
 * buffer (size, liveness, offset), slot, kernel text, step (label, kind, reads, writes, kernel,
 * arguments, launch shape, schedule), constant fill, input and output, and it serialises to the
 * same bytes.  A damaged file (one flipped byte, a truncated file, a payload changed under a
 * recomputed checksum, another key) is refused: the build generates the plan again, with the
 * same result, and rewrites the file.
 *
 * The parts a device build adds (every GEMM's cuBLASLt algorithm, the serialised cuDNN plans,
 * each after the library version, device name and compute capability that made it) are given
 * to a dry program by hand: they must come back bit for bit; a part of another cuBLASLt or
 * cuDNN version, or another device, is dropped (the rest of the plan is used, the file marked
 * for rewriting); a part that is damaged (a flag out of range, a wrong count, a truncated
 * string) under a consistent checksum refuses the whole file.
 */
#define _GNU_SOURCE 1   /* memmem */
#include "cs-config.h"

#include <string.h>

#include <glib/gstdio.h>

#include "cs-cuda-private.h"
#include "test-trace-step.h"

typedef struct
{
  CsPipeline  *pl;       /* the step of the trace */
  CsPolicy     policy;   /* the default, executors nvfuser,torch */
} Step;

/* Loads the trace file @path into @s; FALSE when it cannot be read. */
static gboolean
step_load (Step *s, const char *path)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *text = NULL;
  gsize len = 0;

  if (!g_file_get_contents (path, &text, &len, NULL))
    return FALSE;
  cs_policy_init_default (&s->policy);
  g_assert_true (cs_policy_set (&s->policy, "executors", "nvfuser,torch", NULL));
  s->pl = trace_step_pipeline (text, (gssize) len, path, &s->policy, &error);
  g_assert_no_error (error);
  return TRUE;
}

static void
step_clear (Step *s)
{
  g_clear_pointer (&s->pl, cs_pipeline_unref);
}

static CsCudaProgram *
build (Step *s)
{
  g_autoptr(GError) error = NULL;
  CsCudaProgram *p = cs_cuda_program_build_full (cs_pipeline_get_forward (s->pl), cs_pipeline_get_backward (s->pl),
                                                 &s->policy, CS_CUDA_BUILD_DRY | CS_CUDA_BUILD_PLAN_CACHE, &error);

  g_assert_no_error (error);
  g_assert_nonnull (p);
  return p;
}

static void
assert_uints_equal (const GArray *a, const GArray *b)
{
  g_assert_cmpuint (a->len, ==, b->len);
  g_assert_cmpmem (a->data, a->len * sizeof (guint), b->data, b->len * sizeof (guint));
}

static void
assert_steps_equal (const GPtrArray *x, const GPtrArray *y)
{
  g_assert_cmpuint (x->len, ==, y->len);
  for (guint i = 0; i < x->len; i++)
    {
      const CsCudaStep *a = g_ptr_array_index (x, i), *b = g_ptr_array_index (y, i);

      g_assert_cmpint (a->kind, ==, b->kind);
      g_assert_cmpstr (a->label, ==, b->label);
      g_assert_cmpstr (a->kind_name, ==, b->kind_name);
      g_assert_cmpint (a->backward, ==, b->backward);
      g_assert_cmpfloat (a->flops, ==, b->flops);
      g_assert_cmpfloat (a->bytes, ==, b->bytes);
      g_assert_cmpfloat (a->floor_ms, ==, b->floor_ms);
      assert_uints_equal (a->reads, b->reads);
      assert_uints_equal (a->writes, b->writes);
      g_assert_cmpuint (a->args->len, ==, b->args->len);
      for (guint j = 0; j < a->args->len; j++)
        g_assert_cmpuint (g_array_index (a->args, CsCudaKArg, j).slot, ==, g_array_index (b->args, CsCudaKArg, j).slot);
      if (a->kind == CS_CUDA_STEP_KERNEL)
        g_assert_cmpuint (a->kernel, ==, b->kernel);
      g_assert_cmpint (a->mergeable, ==, b->mergeable);
      g_assert_cmpuint (a->shared_bytes, ==, b->shared_bytes);
      g_assert_cmpmem (a->grid, sizeof a->grid, b->grid, sizeof b->grid);
      g_assert_cmpmem (a->block, sizeof a->block, b->block, sizeof b->block);
      g_assert_cmpuint (a->stream, ==, b->stream);
      g_assert_cmpuint (a->n_waits, ==, b->n_waits);
      g_assert_cmpmem (a->waits, a->n_waits * sizeof (guint), b->waits, b->n_waits * sizeof (guint));
      g_assert_cmpint (a->signals, ==, b->signals);
      g_assert_cmpuint (a->depth, ==, b->depth);
      if (a->kind == CS_CUDA_STEP_GEMM)
        {
          CsCudaGemmProblem ga, gb;

          memset (&ga, 0, sizeof ga);
          memset (&gb, 0, sizeof gb);
          cs_cuda_gemm_get_problem (a->gemm, &ga);
          cs_cuda_gemm_get_problem (b->gemm, &gb);
          g_assert_cmpuint (ga.slot_a, ==, gb.slot_a);
          g_assert_cmpuint (ga.slot_b, ==, gb.slot_b);
          g_assert_cmpuint (ga.slot_d, ==, gb.slot_d);
          g_assert_cmpint (ga.slot_bias, ==, gb.slot_bias);
          g_assert_cmpint (ga.m, ==, gb.m);
          g_assert_cmpint (ga.n, ==, gb.n);
          g_assert_cmpint (ga.k, ==, gb.k);
          g_assert_cmpint (ga.lda, ==, gb.lda);
          g_assert_cmpint (ga.ldb, ==, gb.ldb);
          g_assert_cmpint (ga.batch, ==, gb.batch);
          g_assert_cmpint (ga.stride_a, ==, gb.stride_a);
          g_assert_cmpint (ga.ta, ==, gb.ta);
          g_assert_cmpint (ga.tb, ==, gb.tb);
          g_assert_cmpint (ga.tf32, ==, gb.tf32);
          g_assert_cmpint (ga.bgrad, ==, gb.bgrad);
        }
    }
}

static void
assert_infos_equal (const GArray *a, const GArray *as, const GArray *b, const GArray *bs)
{
  g_assert_cmpuint (a->len, ==, b->len);
  assert_uints_equal (as, bs);
  for (guint i = 0; i < a->len; i++)
    {
      const CsCudaTensorInfo *x = &g_array_index (a, CsCudaTensorInfo, i), *y = &g_array_index (b, CsCudaTensorInfo, i);

      g_assert_cmpstr (x->name, ==, y->name);
      g_assert_cmpint (x->dtype, ==, y->dtype);
      g_assert_cmpuint (x->rank, ==, y->rank);
      g_assert_cmpmem (x->shape, x->rank * sizeof (int64_t), y->shape, y->rank * sizeof (int64_t));
      g_assert_cmpint (x->backward, ==, y->backward);
      g_assert_cmpint (x->grad_of, ==, y->grad_of);
    }
}

/* @b (read from the cache) is the program @a (generated). */
static void
assert_programs_equal (const CsCudaProgram *a, const CsCudaProgram *b)
{
  g_assert_cmpuint (a->buffers->len, ==, b->buffers->len);
  for (guint i = 0; i < a->buffers->len; i++)
    {
      const CsCudaBuffer *x = &g_array_index (a->buffers, CsCudaBuffer, i), *y = &g_array_index (b->buffers, CsCudaBuffer, i);

      g_assert_cmpuint (x->size_bytes, ==, y->size_bytes);
      g_assert_cmpint (x->first, ==, y->first);
      g_assert_cmpint (x->last, ==, y->last);
      g_assert_cmpuint (x->offset, ==, y->offset);
      g_assert_cmpint (x->pinned, ==, y->pinned);
      g_assert_cmpint (x->zeroed, ==, y->zeroed);
    }
  g_assert_cmpuint (a->slots->len, ==, b->slots->len);
  for (guint i = 0; i < a->slots->len; i++)
    {
      const CsCudaSlot *x = &g_array_index (a->slots, CsCudaSlot, i), *y = &g_array_index (b->slots, CsCudaSlot, i);

      g_assert_cmpint (x->dtype, ==, y->dtype);
      g_assert_cmpuint (x->rank, ==, y->rank);
      g_assert_cmpmem (x->shape, x->rank * sizeof (int64_t), y->shape, y->rank * sizeof (int64_t));
      g_assert_cmpmem (x->strides, x->rank * sizeof (int64_t), y->strides, y->rank * sizeof (int64_t));
      g_assert_cmpint (x->offset, ==, y->offset);
      g_assert_cmpuint (x->buffer, ==, y->buffer);
    }
  g_assert_cmpuint (a->n_kernels, ==, b->n_kernels);
  g_assert_cmpstr (a->source->str, ==, b->source->str);
  g_assert_cmpstr (a->full_source, ==, b->full_source);
  g_assert_cmpuint (a->arena_bytes, ==, b->arena_bytes);
  g_assert_cmpuint (a->naive_bytes, ==, b->naive_bytes);
  g_assert_cmpuint (a->n_streams, ==, b->n_streams);
  g_assert_cmpuint (a->critical_path, ==, b->critical_path);
  assert_steps_equal (a->steps, b->steps);
  assert_steps_equal (a->setup_steps, b->setup_steps);
  assert_infos_equal (a->inputs, a->input_slots, b->inputs, b->input_slots);
  assert_infos_equal (a->outputs, a->output_slots, b->outputs, b->output_slots);
}

/* The one plan file in @dir. */
static char *
plan_file (const char *dir)
{
  g_autoptr(GDir) d = g_dir_open (dir, 0, NULL);
  const char *n;
  char *found = NULL;

  g_assert_nonnull (d);
  while ((n = g_dir_read_name (d)))
    if (g_str_has_prefix (n, "plan-") && g_str_has_suffix (n, ".bin"))
      {
        g_assert_null (found);
        found = g_build_filename (dir, n, NULL);
      }
  g_assert_nonnull (found);
  return found;
}

/* The 72 bytes before the payload: magic 8, format 4, key length 4 + 32, payload length 8,
 * hash 16. */
#define HEADER 72

/* @bytes with its payload's digest recomputed. */
static void
fix_digest (guint8 *bytes, gsize len)
{
  cs_cuda_plan_hash128 (bytes + HEADER, len - HEADER, bytes + HEADER - 16);
}

/* Writes @len bytes to @path, builds (the file must be refused, the plan generated again and
 * equal to @ref, the file rewritten), then builds again from the rewritten file. */
static void
assert_refused (Step *s, const char *path, const guint8 *bytes, gsize len, const CsCudaProgram *ref)
{
  CsCudaProgram *p;

  g_assert_true (g_file_set_contents (path, (const char *) bytes, (gssize) len, NULL));
  p = build (s);
  g_assert_false (p->plan_cached);
  assert_programs_equal (ref, p);
  cs_cuda_program_free (p);
  p = build (s);
  g_assert_true (p->plan_cached);
  cs_cuda_program_free (p);
}

static gsize gemm_part_at (const guint8 *d, gsize n);

/* A test's step and the plan file its first build wrote. */
typedef struct
{
  Step           s;     /* the trace's step */
  char          *dir;   /* the cache directory (CASTSCOPE_CACHE_DIR), made empty */
  char          *file;  /* the plan file the first build wrote in it */
  CsCudaProgram *gen;   /* that build's program (generated, not read) */
} Planned;

/* Loads the trace @path into @c->s and builds it once into a new, empty cache directory; FALSE
 * (nothing made) when the trace cannot be read. */
static gboolean
planned_begin (Planned *c, const char *path)
{
  memset (c, 0, sizeof *c);
  if (!step_load (&c->s, path))
    return FALSE;
  c->dir = g_dir_make_tmp ("cs-plan-XXXXXX", NULL);
  g_assert_nonnull (c->dir);
  g_setenv ("CASTSCOPE_CACHE_DIR", c->dir, TRUE);
  c->gen = build (&c->s);
  g_assert_false (c->gen->plan_cached);
  c->file = plan_file (c->dir);
  return TRUE;
}

/* Frees what planned_begin made and removes its cache directory. */
static void
planned_end (Planned *c)
{
  cs_cuda_program_free (c->gen);
  step_clear (&c->s);
  g_unsetenv ("CASTSCOPE_CACHE_DIR");
  trace_step_rm_dir (c->dir);
  g_free (c->dir);
  g_free (c->file);
}

static void
test_round_trip (gconstpointer data)
{
  const char *name = data;
  g_autofree char *path = NULL;
  g_autofree char *orig = NULL;
  Planned c;
  CsCudaProgram *gen, *got;
  g_autoptr(GBytes) b1 = NULL;
  g_autoptr(GBytes) b2 = NULL;
  g_autoptr(GBytes) b3 = NULL;
  gsize len = 0;

  if (g_str_has_prefix (name, "shared:"))
    {
      const char *sh = g_getenv ("CS_SHARED_TRACES");

      if (sh == NULL)
        {
          g_test_skip ("CS_SHARED_TRACES is not set: the shared traces are not present");
          return;
        }
      path = g_build_filename (sh, name + strlen ("shared:"), NULL);
    }
  else
    path = g_test_build_filename (G_TEST_DIST, name, NULL);
  if (!planned_begin (&c, path))
    {
      g_test_skip (g_str_has_prefix (name, "shared:") ? "the shared traces (CS_SHARED_TRACES) are not present"
                                                      : "trace not found");
      return;
    }
  gen = c.gen;
  got = build (&c.s);
  g_assert_true (got->plan_cached);
  assert_programs_equal (gen, got);
  /* deterministic: the generated and the read program serialise to the file's bytes */
  b1 = cs_cuda_plan_serialize (gen, "k");
  b2 = cs_cuda_plan_serialize (got, "k");
  g_assert_true (g_bytes_equal (b1, b2));
  cs_cuda_program_free (got);

  g_assert_true (g_file_get_contents (c.file, &orig, &len, NULL));
  g_assert_cmpuint (len, >, HEADER + 64);
  {
    g_autofree guint8 *bad = g_memdup2 (orig, len);
    const gsize at[] = { 3, 20, HEADER - 10, HEADER + 5, len / 2, len - 1 };

    /* one flipped byte anywhere: magic, key, digest, payload */
    for (guint i = 0; i < G_N_ELEMENTS (at); i++)
      {
        memcpy (bad, orig, len);
        bad[at[i]] ^= 0x5a;
        assert_refused (&c.s, c.file, bad, len, gen);
      }
    /* truncated, and a header alone */
    assert_refused (&c.s, c.file, (const guint8 *) orig, len - 7, gen);
    assert_refused (&c.s, c.file, (const guint8 *) orig, 12, gen);
    /* a consistent file whose payload says another device (132 -> 131 SMs) */
    memcpy (bad, orig, len);
    bad[HEADER] ^= 1;
    fix_digest (bad, len);
    assert_refused (&c.s, c.file, bad, len, gen);
    /* a consistent file whose last output names a slot that does not exist (the last field
       before the GEMM part and its identity) */
    memcpy (bad, orig, len);
    memset (bad + gemm_part_at (bad, len) - (8 + 4 + 3 + 8) - 4, 0xff, 4);
    fix_digest (bad, len);
    assert_refused (&c.s, c.file, bad, len, gen);
  }
  /* another key: the bytes of a plan made for "k" */
  b3 = cs_cuda_plan_serialize (gen, "0000");
  assert_refused (&c.s, c.file, g_bytes_get_data (b3, NULL), g_bytes_get_size (b3), gen);

  planned_end (&c);
}

static char *file_key (const char *file);
static guint give_device_parts (CsCudaProgram *p);

/* Payload bytes changed under a recomputed checksum, at many places: each file is either
 * refused or read into a program that passes the build's own checks; none crashes (the
 * sanitizer builds run this too). */
static void
test_damaged_payloads (void)
{
  g_autofree char *path = g_test_build_filename (G_TEST_DIST, "..", "data", "mlp_gelu.txt", NULL);
  g_autofree char *orig = NULL;
  g_autofree guint8 *bad = NULL;
  Planned c;
  gsize len = 0;
  guint refused = 0, n = 0;
  GRand *rand = g_rand_new_with_seed (20);

  g_assert_true (planned_begin (&c, path));
  {
    /* with the parts a device build adds, so that the damage reaches them too */
    g_autofree char *key = file_key (c.file);
    g_autoptr(GBytes) b = NULL;

    give_device_parts (c.gen);
    b = cs_cuda_plan_serialize (c.gen, key);
    g_assert_true (g_file_set_contents (c.file, g_bytes_get_data (b, NULL), (gssize) g_bytes_get_size (b), NULL));
  }
  g_assert_true (g_file_get_contents (c.file, &orig, &len, NULL));
  bad = g_memdup2 (orig, len);
  for (gsize at = HEADER; at < len; at += 1 + g_rand_int_range (rand, 0, 23), n++)
    {
      CsCudaProgram *p;

      memcpy (bad, orig, len);
      bad[at] ^= (guint8) g_rand_int_range (rand, 1, 256);
      fix_digest (bad, len);
      g_assert_true (g_file_set_contents (c.file, (const char *) bad, (gssize) len, NULL));
      p = build (&c.s);
      refused += !p->plan_cached;
      cs_cuda_program_free (p);
    }
  g_test_message ("%u damaged payloads, %u refused", n, refused);
  g_assert_cmpuint (n, >, 50);
  g_assert_cmpuint (refused, >, n / 10);   /* labels, kernel text, floats: read as written */
  g_rand_free (rand);
  planned_end (&c);
}

/* The key of the plan file @file (plan-<key>.bin). */
static char *
file_key (const char *file)
{
  g_autofree char *base = g_path_get_basename (file);

  g_assert_true (g_str_has_prefix (base, "plan-") && g_str_has_suffix (base, ".bin"));
  return g_strndup (base + 5, strlen (base) - 5 - 4);
}

/* A made-up algorithm for GEMM step @i: 8 words no two steps share. */
static void
fake_algo (guint i, cublasLtMatmulAlgo_t *algo)
{
  guint64 *w = (guint64 *) algo;

  for (guint j = 0; j < sizeof *algo / 8; j++)
    w[j] = G_GUINT64_CONSTANT (0x9e3779b97f4a7c15) * (i + 1) + j;
}

/* Gives every GEMM step of @p an algorithm (fake_algo) and @p two serialised cuDNN plans, as a
 * device build would have; returns the GEMM steps. */
static guint
give_device_parts (CsCudaProgram *p)
{
  guint n = 0;

  for (guint i = 0; i < p->steps->len; i++)
    {
      CsCudaStep *s = g_ptr_array_index (p->steps, i);
      cublasLtMatmulAlgo_t algo;

      if (s->kind != CS_CUDA_STEP_GEMM)
        continue;
      fake_algo (i, &algo);
      cs_cuda_gemm_set_stored_algo (s->gemm, &algo);
      n++;
    }
  for (guint i = 0; i < 2; i++)
    {
      CsCudnnSaved *sv = g_new0 (CsCudnnSaved, 1);

      sv->key = g_strdup_printf ("fwd problem %u", i);
      sv->json = g_strdup_printf ("{\"engine\": %u, \"knobs\": [1, 2, 3]}", 8 + i);
      sv->workspace = 4096 * (i + 1);
      sv->engine = 8 + i;
      g_ptr_array_add (p->cudnn_saved, sv);
    }
  return n;
}

/* @p's GEMM steps hold the algorithms give_device_parts gave (@want) or none from the file. */
static void
assert_algos (const CsCudaProgram *p, gboolean want)
{
  for (guint i = 0; i < p->steps->len; i++)
    {
      CsCudaStep *s = g_ptr_array_index (p->steps, i);
      cublasLtMatmulAlgo_t a, b;

      if (s->kind != CS_CUDA_STEP_GEMM)
        continue;
      g_assert_cmpint (cs_cuda_gemm_has_stored_algo (s->gemm), ==, want);
      if (!want)
        {
          g_assert_false (cs_cuda_gemm_get_algo (s->gemm, &a));   /* a dry build plans none */
          continue;
        }
      fake_algo (i, &a);
      g_assert_true (cs_cuda_gemm_get_algo (s->gemm, &b));
      g_assert_cmpmem (&a, sizeof a, &b, sizeof b);
    }
}

static void
assert_saved_equal (const GPtrArray *a, const GPtrArray *b)
{
  g_assert_cmpuint (a->len, ==, b->len);
  for (guint i = 0; i < a->len; i++)
    {
      const CsCudnnSaved *x = g_ptr_array_index (a, i), *y = g_ptr_array_index (b, i);

      g_assert_cmpstr (x->key, ==, y->key);
      g_assert_cmpstr (x->json, ==, y->json);
      g_assert_cmpint (x->workspace, ==, y->workspace);
      g_assert_cmpint (x->engine, ==, y->engine);
    }
}

/* Writes @p's plan for @key to @file, builds from it; the program must come from the file. */
static CsCudaProgram *
build_from (Step *s, const CsCudaProgram *p, const char *key, const char *file)
{
  g_autoptr(GBytes) b = cs_cuda_plan_serialize (p, key);
  CsCudaProgram *got;

  g_assert_true (g_file_set_contents (file, g_bytes_get_data (b, NULL), (gssize) g_bytes_get_size (b), NULL));
  got = build (s);
  g_assert_true (got->plan_cached);
  return got;
}

/* The offset in @d (@n bytes) of the GEMM part: its identity (cuBLASLt version, "dry", 9, 0). */
static gsize
gemm_part_at (const guint8 *d, gsize n)
{
  guint8 id[8 + 4 + 3 + 8];
  guint64 v = cublasLtGetVersion ();
  const guint8 *hit;

  for (guint i = 0; i < 8; i++)
    id[i] = (guint8) (v >> (8 * i));
  memcpy (id + 8, "\3\0\0\0dry\11\0\0\0\0\0\0\0", 4 + 3 + 8);
  hit = memmem (d, n, id, sizeof id);
  g_assert_nonnull (hit);
  g_assert_null (memmem (hit + 1, n - (gsize) (hit + 1 - d), id, sizeof id));   /* once */
  return (gsize) (hit - d) + sizeof id;
}

static void
test_device_parts (void)
{
  g_autofree char *path = g_test_build_filename (G_TEST_DIST, "..", "data", "mlp_gelu.txt", NULL);
  g_autofree char *key = NULL;
  Planned c;
  CsCudaProgram *gen, *got;
  guint n_gemm;

  g_assert_true (planned_begin (&c, path));
  gen = c.gen;
  key = file_key (c.file);

  /* a dry build's own file: no algorithm, no cuDNN plan */
  got = build (&c.s);
  g_assert_true (got->plan_cached);
  g_assert_cmpuint (got->n_gemm_algos_cached, ==, 0);
  g_assert_cmpuint (got->cudnn_saved->len, ==, 0);
  assert_algos (got, FALSE);
  cs_cuda_program_free (got);

  /* with a device build's parts: read back as written, and written again to the same bytes */
  n_gemm = give_device_parts (gen);
  g_assert_cmpuint (n_gemm, >, 0);
  got = build_from (&c.s, gen, key, c.file);
  g_assert_cmpuint (got->n_gemm_algos_cached, ==, n_gemm);
  g_assert_false (got->plan_stale);
  assert_algos (got, TRUE);
  assert_saved_equal (gen->cudnn_saved, got->cudnn_saved);
  assert_programs_equal (gen, got);
  {
    g_autoptr(GBytes) b1 = cs_cuda_plan_serialize (gen, key);
    g_autoptr(GBytes) b2 = cs_cuda_plan_serialize (got, key);

    g_assert_true (g_bytes_equal (b1, b2));
  }
  cs_cuda_program_free (got);

  /* another cuBLASLt: the algorithms are dropped, the cuDNN plans kept */
  gen->lt_version++;
  got = build_from (&c.s, gen, key, c.file);
  gen->lt_version--;
  g_assert_cmpuint (got->n_gemm_algos_cached, ==, 0);
  g_assert_true (got->plan_stale);
  assert_algos (got, FALSE);
  assert_saved_equal (gen->cudnn_saved, got->cudnn_saved);
  assert_programs_equal (gen, got);
  cs_cuda_program_free (got);

  /* another cuDNN: its plans are dropped, the algorithms kept */
  gen->cudnn_version = 91900;
  got = build_from (&c.s, gen, key, c.file);
  gen->cudnn_version = 0;
  g_assert_cmpuint (got->n_gemm_algos_cached, ==, n_gemm);
  g_assert_true (got->plan_stale);
  g_assert_cmpuint (got->cudnn_saved->len, ==, 0);
  cs_cuda_program_free (got);

  /* another device (same compute capability and SM count): both dropped */
  g_free (gen->device_name);
  gen->device_name = g_strdup ("NVIDIA H100");
  got = build_from (&c.s, gen, key, c.file);
  g_free (gen->device_name);
  gen->device_name = g_strdup ("dry");
  g_assert_cmpuint (got->n_gemm_algos_cached, ==, 0);
  g_assert_cmpuint (got->cudnn_saved->len, ==, 0);
  g_assert_true (got->plan_stale);
  cs_cuda_program_free (got);

  /* damaged parts under a consistent checksum: the whole file refused */
  {
    g_autoptr(GBytes) good = cs_cuda_plan_serialize (gen, key);
    gsize len = g_bytes_get_size (good);
    g_autofree guint8 *bad = g_memdup2 (g_bytes_get_data (good, NULL), len);
    gsize at = gemm_part_at (bad, len);
    guint32 count;

    memcpy (&count, bad + at, 4);
    g_assert_cmpuint (GUINT32_FROM_LE (count), ==, n_gemm);
    /* the first GEMM's flag "has an algorithm" out of range */
    g_assert_cmpuint (bad[at + 4], ==, 1);
    bad[at + 4] = 2;
    fix_digest (bad, len);
    assert_refused (&c.s, c.file, bad, len, gen);
    /* one GEMM more than the steps have */
    memcpy (bad, g_bytes_get_data (good, NULL), len);
    bad[at] += 1;
    fix_digest (bad, len);
    assert_refused (&c.s, c.file, bad, len, gen);
    /* the payload cut inside the last cuDNN plan's JSON (the length field and checksum made to
       agree) */
    for (gsize cut = 1; cut <= 9; cut += 8)
      {
        guint64 plen = len - cut - HEADER;

        memcpy (bad, g_bytes_get_data (good, NULL), len);
        for (guint i = 0; i < 8; i++)
          bad[HEADER - 24 + i] = (guint8) (plen >> (8 * i));
        fix_digest (bad, len - cut);
        assert_refused (&c.s, c.file, bad, len - cut, gen);
      }
    /* a wrong digest over the new parts alone */
    memcpy (bad, g_bytes_get_data (good, NULL), len);
    bad[at + 9] ^= 0x10;
    assert_refused (&c.s, c.file, bad, len, gen);
  }
  planned_end (&c);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_unsetenv ("CASTSCOPE_NO_CACHE");
  g_unsetenv ("CASTSCOPE_PLAN_CACHE");
  g_test_add_data_func ("/kernels/plan/seed", "../data/seed_foo.txt", test_round_trip);
  g_test_add_data_func ("/kernels/plan/mlp", "../data/mlp_gelu.txt", test_round_trip);
  g_test_add_data_func ("/kernels/plan/rmsnorm-swiglu", "../data/rmsnorm_swiglu.txt", test_round_trip);
  g_test_add_data_func ("/kernels/plan/cross-entropy", "../data/cross_entropy.txt", test_round_trip);
  g_test_add_data_func ("/kernels/plan/gpt4", "oracle/gpt_stack4_initial.txt", test_round_trip);
  g_test_add_data_func ("/kernels/plan/llama8", "shared:thunder_llama_stack_initial.txt", test_round_trip);
  g_test_add_func ("/kernels/plan/damaged-payloads", test_damaged_payloads);
  g_test_add_func ("/kernels/plan/device-parts", test_device_parts);
  return g_test_run ();
}
