/* cs-cuda-plan.c: a device program's whole plan kept on disk (issue 20's warm start).
 *
 * A build turns the traces into steps, slots, buffers, the memory plan, the stream schedule and
 * the unique kernels' text (program_build's codegen phase).  All of that is a function of the
 * traces, the policy, the device, the libraries and this module's code, so it is written once
 * to the disk cache (cs_cuda_jit_cache_dir, `plan-<key>.bin`) and read back by a later build
 * with the same key instead of being generated again.  What needs the device (the arena, the
 * libraries loaded from the NVRTC cache, the cuBLASLt descriptors, cuDNN's plans) is still made
 * by the build from what was read.
 *
 * File: the magic "CSPLAN1\n", the format version (u32), the key (string), the payload's
 * length (u64) and 128-bit MurmurHash3 (16 bytes), then the payload: little-endian fixed-width numbers,
 * strings as a u32 length and bytes, every field written one by one (no struct padding), so
 * that the same program always gives the same bytes.  A file that fails any check (magic,
 * version, key, length, digest, a number out of range) is ignored with one line on stderr and
 * the plan is built as if there were none (then written anew).
 */
#define _GNU_SOURCE 1   /* dladdr */
#include "cs-config.h"

#include <dlfcn.h>
#include <string.h>
#include <sys/stat.h>

#include <glib/gstdio.h>

#include "cs-cuda-private.h"
#include "cs-print.h"

#define PLAN_MAGIC "CSPLAN1\n"
/* Bumped whenever the payload's layout changes. */
#define PLAN_FORMAT 2u

/* ---- writing ---- */

static void
put_u32 (GByteArray *b, guint32 v)
{
  guint8 x[4] = { (guint8) v, (guint8) (v >> 8), (guint8) (v >> 16), (guint8) (v >> 24) };

  g_byte_array_append (b, x, 4);
}

static void
put_u64 (GByteArray *b, guint64 v)
{
  put_u32 (b, (guint32) v);
  put_u32 (b, (guint32) (v >> 32));
}

static void
put_i64 (GByteArray *b, gint64 v)
{
  put_u64 (b, (guint64) v);
}

static void
put_f64 (GByteArray *b, double v)
{
  guint64 bits;

  memcpy (&bits, &v, sizeof bits);
  put_u64 (b, bits);
}

static void
put_str (GByteArray *b, const char *s)
{
  gsize n = s ? strlen (s) : 0;

  put_u32 (b, s ? (guint32) n : G_MAXUINT32);
  if (n)
    g_byte_array_append (b, (const guint8 *) s, (guint) n);
}

static void
put_uints (GByteArray *b, const GArray *a)
{
  put_u32 (b, a->len);
  for (guint i = 0; i < a->len; i++)
    put_u32 (b, g_array_index (a, guint, i));
}

/* ---- reading: every get_ checks the bounds; a failure sets r->bad and returns 0 ---- */

typedef struct
{
  const guint8 *d;      /* payload */
  gsize         n;      /* its bytes */
  gsize         at;     /* read position */
  gboolean      bad;    /* a read ran past the end or a value was out of range */
} Reader;

static guint32
get_u32 (Reader *r)
{
  const guint8 *x;

  if (r->bad || r->n - r->at < 4)
    {
      r->bad = TRUE;
      return 0;
    }
  x = r->d + r->at;
  r->at += 4;
  return (guint32) x[0] | (guint32) x[1] << 8 | (guint32) x[2] << 16 | (guint32) x[3] << 24;
}

static guint64
get_u64 (Reader *r)
{
  guint64 lo = get_u32 (r);

  return lo | (guint64) get_u32 (r) << 32;
}

static gint64
get_i64 (Reader *r)
{
  return (gint64) get_u64 (r);
}

static double
get_f64 (Reader *r)
{
  guint64 bits = get_u64 (r);
  double v;

  memcpy (&v, &bits, sizeof v);
  return v;
}

/* A value below @limit, else r->bad. */
static guint32
get_below (Reader *r, guint64 limit)
{
  guint32 v = get_u32 (r);

  if ((guint64) v >= limit)
    r->bad = TRUE;
  return r->bad ? 0 : v;
}

/* (transfer full): a string, or NULL (written as NULL, or on a failure). */
static char *
get_str (Reader *r)
{
  guint32 n = get_u32 (r);
  char *s;

  if (r->bad || n == G_MAXUINT32)
    return NULL;
  if (r->n - r->at < n || memchr (r->d + r->at, '\0', n) != NULL)
    {
      r->bad = TRUE;
      return NULL;
    }
  s = g_strndup ((const char *) r->d + r->at, n);
  r->at += n;
  return s;
}

/* Appends to @a (guint) a list written by put_uints, each value below @limit. */
static void
get_uints (Reader *r, GArray *a, guint64 limit)
{
  guint32 n = get_u32 (r);

  if (r->bad || (guint64) n * 4 > r->n - r->at)
    {
      r->bad = TRUE;
      return;
    }
  for (guint32 i = 0; i < n && !r->bad; i++)
    {
      guint v = get_below (r, limit);

      g_array_append_val (a, v);
    }
}

/* ---- hashing: MurmurHash3 x64_128 (Austin Appleby, public domain), seed 0 ---- */

static inline guint64
rotl64 (guint64 x, int r)
{
  return (x << r) | (x >> (64 - r));
}

static inline guint64
fmix64 (guint64 k)
{
  k ^= k >> 33;
  k *= G_GUINT64_CONSTANT (0xff51afd7ed558ccd);
  k ^= k >> 33;
  k *= G_GUINT64_CONSTANT (0xc4ceb9fe1a85ec53);
  k ^= k >> 33;
  return k;
}

static inline guint64
load64 (const guint8 *p)
{
  guint64 v;

  memcpy (&v, p, sizeof v);
  return GUINT64_FROM_LE (v);
}

/** cs_cuda_plan_hash128: see cs-cuda-private.h. */
void
cs_cuda_plan_hash128 (const guint8 *d, gsize n, guint8 out[16])
{
  const guint64 c1 = G_GUINT64_CONSTANT (0x87c37b91114253d5), c2 = G_GUINT64_CONSTANT (0x4cf5ad432745937f);
  guint64 h1 = 0, h2 = 0, k1 = 0, k2 = 0;
  gsize nblocks = n / 16;
  const guint8 *tail = d + nblocks * 16;

  for (gsize i = 0; i < nblocks; i++)
    {
      k1 = load64 (d + i * 16);
      k2 = load64 (d + i * 16 + 8);
      k1 *= c1; k1 = rotl64 (k1, 31); k1 *= c2; h1 ^= k1;
      h1 = rotl64 (h1, 27); h1 += h2; h1 = h1 * 5 + 0x52dce729;
      k2 *= c2; k2 = rotl64 (k2, 33); k2 *= c1; h2 ^= k2;
      h2 = rotl64 (h2, 31); h2 += h1; h2 = h2 * 5 + 0x38495ab5;
    }
  k1 = k2 = 0;
  switch (n & 15)
    {
    case 15: k2 ^= (guint64) tail[14] << 48; /* fall through */
    case 14: k2 ^= (guint64) tail[13] << 40; /* fall through */
    case 13: k2 ^= (guint64) tail[12] << 32; /* fall through */
    case 12: k2 ^= (guint64) tail[11] << 24; /* fall through */
    case 11: k2 ^= (guint64) tail[10] << 16; /* fall through */
    case 10: k2 ^= (guint64) tail[9] << 8;   /* fall through */
    case 9:  k2 ^= (guint64) tail[8];
             k2 *= c2; k2 = rotl64 (k2, 33); k2 *= c1; h2 ^= k2;
             /* fall through */
    case 8:  k1 ^= (guint64) tail[7] << 56;  /* fall through */
    case 7:  k1 ^= (guint64) tail[6] << 48;  /* fall through */
    case 6:  k1 ^= (guint64) tail[5] << 40;  /* fall through */
    case 5:  k1 ^= (guint64) tail[4] << 32;  /* fall through */
    case 4:  k1 ^= (guint64) tail[3] << 24;  /* fall through */
    case 3:  k1 ^= (guint64) tail[2] << 16;  /* fall through */
    case 2:  k1 ^= (guint64) tail[1] << 8;   /* fall through */
    case 1:  k1 ^= (guint64) tail[0];
             k1 *= c1; k1 = rotl64 (k1, 31); k1 *= c2; h1 ^= k1;
             break;
    default: break;
    }
  h1 ^= (guint64) n;
  h2 ^= (guint64) n;
  h1 += h2;
  h2 += h1;
  h1 = fmix64 (h1);
  h2 = fmix64 (h2);
  h1 += h2;
  h2 += h1;
  for (int i = 0; i < 8; i++)
    {
      out[i] = (guint8) (h1 >> (8 * i));
      out[8 + i] = (guint8) (h2 >> (8 * i));
    }
}

/* ---- the key ---- */

/* The file and its size and modification time of the module this code is in (the kernels
 * module, or a test binary linking it statically): a rebuilt executor gives another key. */
static void
module_identity (GString *s)
{
  Dl_info info;
  GStatBuf st;

  if (dladdr ((void *) module_identity, &info) == 0 || info.dli_fname == NULL || g_stat (info.dli_fname, &st) != 0)
    {
      g_string_append (s, "module ?\n");
      return;
    }
  g_string_append_printf (s, "module %s %" G_GINT64_FORMAT " %" G_GINT64_FORMAT " %ld\n", info.dli_fname,
                          (gint64) st.st_size, (gint64) st.st_mtim.tv_sec, (long) st.st_mtim.tv_nsec);
}

static int
cmp_str (gconstpointer a, gconstpointer b)
{
  return strcmp (*(const char *const *) a, *(const char *const *) b);
}

/**
 * cs_cuda_plan_key: see cs-cuda-private.h.
 */
char *
cs_cuda_plan_key (CsTrace *fwd, CsTrace *bwd, const CsPolicy *policy, const CsCudaProgram *p,
                  CsCudaBuildFlags flags)
{
  g_autoptr(GString) s = g_string_new (NULL);
  guint8 h[16];
  char hex[33];
  g_autofree char *pol = cs_policy_to_string (policy);
  g_auto(GStrv) env = g_get_environ ();
  int rt = 0, drv = 0;

  g_string_append_printf (s, "castscope plan %u\nflags %u dry %d\n", PLAN_FORMAT,
                          (guint) (flags & ~CS_CUDA_BUILD_PLAN_CACHE), (flags & CS_CUDA_BUILD_DRY) != 0);
  if (!(flags & CS_CUDA_BUILD_DRY))
    {
      cudaRuntimeGetVersion (&rt);
      cudaDriverGetVersion (&drv);
    }
  g_string_append_printf (s, "device sm_%d%d %d SMs cudnn %d runtime %d driver %d cublasLt %zu\n", p->cc_major,
                          p->cc_minor, p->n_sms, p->use_cudnn, rt, drv, (size_t) cublasLtGetVersion ());
  g_string_append_printf (s, "policy %s\n", pol);
  /* the executor's settings: every CASTSCOPE_* variable but the cache's own */
  qsort (env, g_strv_length (env), sizeof (char *), cmp_str);
  for (guint i = 0; env[i]; i++)
    if (g_str_has_prefix (env[i], "CASTSCOPE_") && !g_str_has_prefix (env[i], "CASTSCOPE_CACHE_DIR=")
        && !g_str_has_prefix (env[i], "CASTSCOPE_TEST_BREAK_KERNEL="))
      g_string_append_printf (s, "env %s\n", env[i]);
  module_identity (s);
  for (guint i = 0; i < 2; i++)
    {
      CsTrace *t = i == 0 ? fwd : bwd;
      gsize at = s->len;
      const char *nl;

      if (t == NULL)
        continue;
      g_string_append (s, i == 0 ? "forward\n" : "backward\n");
      at = s->len;
      cs_print_trace_to (s, t, CS_PRINT_NO_LEADING);
      /* without the provenance line `# Constructed by ... (took N milliseconds)`, the first */
      if (t->provenance != NULL && g_str_has_prefix (s->str + at, "# Constructed by ")
          && (nl = strchr (s->str + at, '\n')) != NULL)
        g_string_erase (s, (gssize) at, (gssize) (nl + 1 - (s->str + at)));
    }
  cs_cuda_plan_hash128 ((const guint8 *) s->str, s->len, h);
  for (guint i = 0; i < 16; i++)
    g_snprintf (hex + 2 * i, 3, "%02x", h[i]);
  return g_strdup (hex);
}

/**
 * cs_cuda_plan_path: see cs-cuda-private.h.
 */
char *
cs_cuda_plan_path (const char *key)
{
  g_autofree char *dir = NULL;
  g_autofree char *name = NULL;

  if (g_strcmp0 (g_getenv ("CASTSCOPE_NO_CACHE"), "1") == 0
      || g_strcmp0 (g_getenv ("CASTSCOPE_PLAN_CACHE"), "0") == 0)
    return NULL;
  dir = cs_cuda_jit_cache_dir ();
  name = g_strdup_printf ("plan-%s.bin", key);
  return g_build_filename (dir, name, NULL);
}

/* ---- the payload ---- */

static void
put_step (GByteArray *b, const CsCudaStep *s)
{
  put_u32 (b, s->kind);
  put_str (b, s->label);
  put_str (b, s->kind_name);
  put_u32 (b, s->backward);
  put_f64 (b, s->flops);
  put_f64 (b, s->bytes);
  put_f64 (b, s->floor_ms);
  put_uints (b, s->reads);
  put_uints (b, s->writes);
  put_u32 (b, s->kernel);
  put_u32 (b, s->mergeable);
  put_u64 (b, s->shared_bytes);
  put_u32 (b, s->args->len);
  for (guint i = 0; i < s->args->len; i++)
    put_u32 (b, g_array_index (s->args, CsCudaKArg, i).slot);
  for (guint i = 0; i < 3; i++)
    put_u32 (b, s->grid[i]);
  for (guint i = 0; i < 3; i++)
    put_u32 (b, s->block[i]);
  put_u32 (b, s->stream);
  put_u32 (b, s->n_waits);
  for (guint i = 0; i < s->n_waits; i++)
    put_u32 (b, s->waits[i]);
  put_u32 (b, s->signals);
  put_u32 (b, s->depth);
  if (s->kind == CS_CUDA_STEP_GEMM)
    {
      CsCudaGemmProblem pr;
      const CsCudaGemmProblem *g = &pr;

      cs_cuda_gemm_get_problem (s->gemm, &pr);

      put_u32 (b, g->slot_a);
      put_u32 (b, g->slot_b);
      put_u32 (b, g->slot_d);
      put_u32 (b, (guint32) g->slot_bias);
      put_u32 (b, g->bgrad);
      put_u32 (b, g->dtype);
      put_i64 (b, g->m);
      put_i64 (b, g->n);
      put_i64 (b, g->k);
      put_u32 (b, g->ta);
      put_u32 (b, g->tb);
      put_i64 (b, g->a_rows);
      put_i64 (b, g->a_cols);
      put_i64 (b, g->lda);
      put_i64 (b, g->b_rows);
      put_i64 (b, g->b_cols);
      put_i64 (b, g->ldb);
      put_i64 (b, g->ldd);
      put_u32 (b, (guint32) g->batch);
      put_i64 (b, g->stride_a);
      put_i64 (b, g->stride_b);
      put_i64 (b, g->stride_d);
      put_u32 (b, g->tf32);
    }
  else if (s->kind == CS_CUDA_STEP_CUDNN)
    {
      const CsCudnnSdpa *d = cs_cuda_cudnn_problem (s->cudnn);
      const gint sl[] = { d->q, d->k, d->v, d->o, d->stats, d->dO, d->dQ, d->dK, d->dV };
      const int64_t *st[] = { d->q_st, d->k_st, d->v_st, d->o_st, d->stats_st, d->do_st, d->dq_st, d->dk_st, d->dv_st };

      put_u32 (b, d->backward);
      put_u32 (b, d->dtype);
      put_i64 (b, d->b);
      put_i64 (b, d->h);
      put_i64 (b, d->sq);
      put_i64 (b, d->skv);
      put_i64 (b, d->d);
      put_i64 (b, d->dv);
      put_u32 (b, d->causal);
      put_f64 (b, d->scale);
      for (guint i = 0; i < G_N_ELEMENTS (sl); i++)
        put_u32 (b, (guint32) sl[i]);
      for (guint i = 0; i < G_N_ELEMENTS (st); i++)
        for (guint j = 0; j < 4; j++)
          put_i64 (b, st[i][j]);
    }
}

static void
put_infos (GByteArray *b, const GArray *infos, const GArray *slots)
{
  put_u32 (b, infos->len);
  for (guint i = 0; i < infos->len; i++)
    {
      const CsCudaTensorInfo *t = &g_array_index (infos, CsCudaTensorInfo, i);

      put_str (b, t->name);
      put_u32 (b, t->dtype);
      put_u32 (b, t->rank);
      for (guint j = 0; j < t->rank; j++)
        put_i64 (b, t->shape[j]);
      put_u32 (b, t->backward);
      put_u32 (b, (guint32) t->grad_of);
      put_u32 (b, g_array_index (slots, guint, i));
    }
}

/**
 * cs_cuda_plan_serialize: see cs-cuda-private.h.
 */
GBytes *
cs_cuda_plan_serialize (const CsCudaProgram *p, const char *key)
{
  GByteArray *pay = g_byte_array_new ();
  GByteArray *out = g_byte_array_new ();
  const GPtrArray *lists[2] = { p->steps, p->setup_steps };
  guint8 digest[16];

  put_u32 (pay, (guint32) p->n_sms);
  put_u32 (pay, (guint32) p->cc_major);
  put_u32 (pay, (guint32) p->cc_minor);
  put_u64 (pay, p->arena_bytes);
  put_u64 (pay, p->naive_bytes);
  put_u32 (pay, p->n_streams);
  put_u32 (pay, p->critical_path);
  put_str (pay, p->cudnn_consulted);
  put_u32 (pay, p->buffers->len);
  for (guint i = 0; i < p->buffers->len; i++)
    {
      const CsCudaBuffer *bf = &g_array_index (p->buffers, CsCudaBuffer, i);

      put_u64 (pay, bf->size_bytes);
      put_u32 (pay, (guint32) bf->first);
      put_u32 (pay, (guint32) bf->last);
      put_u64 (pay, bf->offset);
      put_u32 (pay, bf->pinned);
      put_u32 (pay, bf->zeroed);
    }
  put_u32 (pay, p->slots->len);
  for (guint i = 0; i < p->slots->len; i++)
    {
      const CsCudaSlot *sl = &g_array_index (p->slots, CsCudaSlot, i);

      put_u32 (pay, sl->dtype);
      put_u32 (pay, sl->rank);
      for (guint j = 0; j < sl->rank; j++)
        {
          put_i64 (pay, sl->shape[j]);
          put_i64 (pay, sl->strides[j]);
        }
      put_i64 (pay, sl->offset);
      put_u32 (pay, sl->buffer);
    }
  put_u32 (pay, p->kernels->len);
  for (guint i = 0; i < p->kernels->len; i++)
    {
      const CsCudaKernel *k = g_ptr_array_index (p->kernels, i);

      put_str (pay, k->attrs);
      put_str (pay, k->text);
    }
  for (guint l = 0; l < 2; l++)
    {
      put_u32 (pay, lists[l]->len);
      for (guint i = 0; i < lists[l]->len; i++)
        put_step (pay, g_ptr_array_index (lists[l], i));
    }
  put_infos (pay, p->inputs, p->input_slots);
  put_infos (pay, p->outputs, p->output_slots);

  cs_cuda_plan_hash128 (pay->data, pay->len, digest);
  g_byte_array_append (out, (const guint8 *) PLAN_MAGIC, 8);
  put_u32 (out, PLAN_FORMAT);
  put_str (out, key);
  put_u64 (out, pay->len);
  g_byte_array_append (out, digest, 16);
  g_byte_array_append (out, pay->data, pay->len);
  g_byte_array_unref (pay);
  return g_byte_array_free_to_bytes (out);
}

static void
get_step (Reader *r, CsCudaProgram *p, GPtrArray *list, guint index, guint n_kernels)
{
  guint64 nslots = p->slots->len;
  CsCudaStepKind kind = (CsCudaStepKind) get_below (r, CS_CUDA_STEP_CUDNN + 1);
  char *label = get_str (r);
  g_autofree char *kind_name = get_str (r);
  CsCudaStep *s;
  guint n;

  if (r->bad || label == NULL)
    {
      g_free (label);
      r->bad = TRUE;
      return;
    }
  s = g_new0 (CsCudaStep, 1);
  s->kind = kind;
  s->label = label;
  s->kind_name = kind_name ? g_intern_string (kind_name) : NULL;
  s->reads = g_array_new (FALSE, FALSE, sizeof (guint));
  s->writes = g_array_new (FALSE, FALSE, sizeof (guint));
  s->args = g_array_new (FALSE, FALSE, sizeof (CsCudaKArg));
  g_ptr_array_add (list, s);   /* freed with the list from here on */
  s->backward = get_below (r, 2);
  s->flops = get_f64 (r);
  s->bytes = get_f64 (r);
  s->floor_ms = get_f64 (r);
  get_uints (r, s->reads, nslots);
  get_uints (r, s->writes, nslots);
  s->kernel = get_u32 (r);
  if (kind == CS_CUDA_STEP_KERNEL && s->kernel >= n_kernels)
    r->bad = TRUE;
  s->mergeable = get_below (r, 2);
  s->shared_bytes = get_u64 (r);
  n = get_u32 (r);
  if ((guint64) n * 4 > r->n - r->at)
    r->bad = TRUE;
  for (guint i = 0; i < n && !r->bad; i++)
    {
      CsCudaKArg a = { get_below (r, nslots) };

      g_array_append_val (s->args, a);
    }
  for (guint i = 0; i < 3; i++)
    s->grid[i] = get_u32 (r);
  for (guint i = 0; i < 3; i++)
    s->block[i] = get_u32 (r);
  s->stream = get_below (r, CS_CUDA_MAX_STREAMS);
  s->n_waits = get_below (r, CS_CUDA_MAX_STREAMS);
  for (guint i = 0; i < s->n_waits; i++)
    s->waits[i] = get_below (r, index);   /* earlier steps only */
  s->signals = get_below (r, 2);
  s->depth = get_u32 (r);
  if (kind == CS_CUDA_STEP_GEMM && !r->bad)
    {
      CsCudaGemmProblem pr = { 0 };
      CsCudaGemmProblem *g = &pr;

      g->slot_a = get_below (r, nslots);
      g->slot_b = get_below (r, nslots);
      g->slot_d = get_below (r, nslots);
      g->slot_bias = (gint) get_u32 (r);
      if (g->slot_bias < -1 || (g->slot_bias >= 0 && (guint64) g->slot_bias >= nslots))
        r->bad = TRUE;
      g->bgrad = get_below (r, 2);
      g->dtype = (CsDtype) get_below (r, CS_DTYPE_C128 + 1);
      g->m = get_i64 (r);
      g->n = get_i64 (r);
      g->k = get_i64 (r);
      g->ta = (cublasOperation_t) get_u32 (r);
      g->tb = (cublasOperation_t) get_u32 (r);
      g->a_rows = get_i64 (r);
      g->a_cols = get_i64 (r);
      g->lda = get_i64 (r);
      g->b_rows = get_i64 (r);
      g->b_cols = get_i64 (r);
      g->ldb = get_i64 (r);
      g->ldd = get_i64 (r);
      g->batch = (int) get_u32 (r);
      g->stride_a = get_i64 (r);
      g->stride_b = get_i64 (r);
      g->stride_d = get_i64 (r);
      g->tf32 = get_below (r, 2);
      s->gemm = cs_cuda_gemm_new_from_problem (&pr);
    }
  else if (kind == CS_CUDA_STEP_CUDNN && !r->bad)
    {
      /* read here; the step is made again by cs_cuda_plan_restore (cuDNN's plan needs the
       * device), so only the problem is kept in the placeholder */
      CsCudnnSdpa *d = g_new0 (CsCudnnSdpa, 1);
      gint *sl[] = { &d->q, &d->k, &d->v, &d->o, &d->stats, &d->dO, &d->dQ, &d->dK, &d->dV };
      int64_t *st[] = { d->q_st, d->k_st, d->v_st, d->o_st, d->stats_st, d->do_st, d->dq_st, d->dk_st, d->dv_st };

      d->backward = get_below (r, 2);
      d->dtype = (CsDtype) get_below (r, CS_DTYPE_C128 + 1);
      d->b = get_i64 (r);
      d->h = get_i64 (r);
      d->sq = get_i64 (r);
      d->skv = get_i64 (r);
      d->d = get_i64 (r);
      d->dv = get_i64 (r);
      d->causal = get_below (r, 2);
      d->scale = get_f64 (r);
      for (guint i = 0; i < G_N_ELEMENTS (sl); i++)
        {
          *sl[i] = (gint) get_u32 (r);
          if (*sl[i] < -1 || (*sl[i] >= 0 && (guint64) *sl[i] >= nslots))
            r->bad = TRUE;
        }
      for (guint i = 0; i < G_N_ELEMENTS (st); i++)
        for (guint j = 0; j < 4; j++)
          st[i][j] = get_i64 (r);
      s->arg_vals = (void **) d;   /* the problem, until restore_cudnn_steps replaces the
                                      placeholder (step_free frees it either way) */
    }
}

static void
get_infos (Reader *r, CsCudaProgram *p, GArray *infos, GArray *slots)
{
  guint n = get_u32 (r);

  if ((guint64) n * 16 > r->n - r->at)
    r->bad = TRUE;
  for (guint i = 0; i < n && !r->bad; i++)
    {
      CsCudaTensorInfo t = { 0 };
      g_autofree char *name = get_str (r);
      guint slot;

      t.name = name ? g_string_chunk_insert (p->names, name) : NULL;
      t.dtype = (CsDtype) get_below (r, CS_DTYPE_C128 + 1);
      t.rank = get_below (r, CS_MAX_DIMS + 1);
      for (guint j = 0; j < t.rank; j++)
        t.shape[j] = get_i64 (r);
      t.backward = get_below (r, 2);
      t.grad_of = (int) get_u32 (r);
      slot = get_below (r, p->slots->len);
      g_array_append_val (infos, t);
      g_array_append_val (slots, slot);
    }
}

/* Turns the placeholder cuDNN steps of @p->steps (get_step) into real ones: each is made again
 * by cs_cuda_cudnn_sdpa_step (which plans it) and given the schedule the file holds.  FALSE
 * with *@why set when cuDNN refuses one. */
static gboolean
restore_cudnn_steps (CsCudaProgram *p, char **why)
{
  GPtrArray *steps = p->steps;

  for (guint i = 0; i < steps->len; i++)
    {
      CsCudaStep *old = g_ptr_array_index (steps, i), *s;
      CsCudnnSdpa d;

      if (old->kind != CS_CUDA_STEP_CUDNN)
        continue;
      d = *(CsCudnnSdpa *) old->arg_vals;
      if (!cs_cuda_cudnn_sdpa_step (p, &d, g_strdup (old->label), why))
        {
          g_autofree char *w = *why;

          *why = g_strdup_printf ("cuDNN refused its attention step (%s)", w ? w : "?");
          return FALSE;
        }
      s = g_ptr_array_steal_index (steps, steps->len - 1);   /* the step it added at the end */
      s->backward = old->backward;
      s->stream = old->stream;
      s->n_waits = old->n_waits;
      memcpy (s->waits, old->waits, sizeof s->waits);
      s->signals = old->signals;
      s->depth = old->depth;
      g_ptr_array_index (steps, i) = s;
      cs_cuda_program_step_free (old);
    }
  return TRUE;
}

/**
 * cs_cuda_plan_restore: see cs-cuda-private.h.
 */
gboolean
cs_cuda_plan_restore (CsCudaProgram *p, GBytes *data, const char *key, char **why)
{
  gsize n = 0;
  const guint8 *d = g_bytes_get_data (data, &n);
  Reader h = { d, n, 0, FALSE }, r;
  g_autofree char *fkey = NULL;
  guint64 plen;
  guint8 digest[16];
  GPtrArray *lists[2] = { p->steps, p->setup_steps };
  guint nk;

  *why = NULL;
  if (n < 8 || memcmp (d, PLAN_MAGIC, 8) != 0)
    {
      *why = g_strdup ("not a plan file");
      return FALSE;
    }
  h.at = 8;
  if (get_u32 (&h) != PLAN_FORMAT || h.bad)
    {
      *why = g_strdup ("another format version");
      return FALSE;
    }
  fkey = get_str (&h);
  if (g_strcmp0 (fkey, key) != 0)
    {
      *why = g_strdup ("made for another key");
      return FALSE;
    }
  plen = get_u64 (&h);
  if (h.bad || n - h.at < 16 || plen != n - h.at - 16)
    {
      *why = g_strdup ("truncated or the wrong length");
      return FALSE;
    }
  cs_cuda_plan_hash128 (d + h.at + 16, plen, digest);
  if (memcmp (digest, d + h.at, 16) != 0)
    {
      *why = g_strdup ("its checksum does not match (a corrupt file)");
      return FALSE;
    }
  r = (Reader) { d + h.at + 16, plen, 0, FALSE };
  if (p->names == NULL)
    p->names = g_string_chunk_new (1024);

  if ((int) get_u32 (&r) != p->n_sms || (int) get_u32 (&r) != p->cc_major || (int) get_u32 (&r) != p->cc_minor)
    r.bad = TRUE;
  p->arena_bytes = get_u64 (&r);
  p->naive_bytes = get_u64 (&r);
  p->n_streams = get_below (&r, CS_CUDA_MAX_STREAMS + 1);
  if (p->n_streams == 0)
    r.bad = TRUE;
  p->critical_path = get_u32 (&r);
  p->cudnn_consulted = get_str (&r);
  {
    guint nb = get_u32 (&r);

    if ((guint64) nb * 32 > r.n - r.at)
      r.bad = TRUE;
    for (guint i = 0; i < nb && !r.bad; i++)
      {
        CsCudaBuffer b = { 0 };

        b.size_bytes = get_u64 (&r);
        b.first = (gint) get_u32 (&r);
        b.last = (gint) get_u32 (&r);
        b.offset = get_u64 (&r);
        b.pinned = get_below (&r, 2);
        b.zeroed = get_below (&r, 2);
        if (b.offset % CS_CUDA_ALIGN != 0 || b.size_bytes > p->arena_bytes || b.offset > p->arena_bytes - b.size_bytes)
          r.bad = TRUE;
        g_array_append_val (p->buffers, b);
      }
  }
  {
    guint ns = get_u32 (&r);

    if ((guint64) ns * 20 > r.n - r.at)
      r.bad = TRUE;
    for (guint i = 0; i < ns && !r.bad; i++)
      {
        CsCudaSlot s = { 0 };
        gsize numel = 1, last = 0;
        const CsCudaBuffer *b;

        s.dtype = (CsDtype) get_below (&r, CS_DTYPE_C128 + 1);
        s.rank = get_below (&r, CS_MAX_DIMS + 1);
        for (guint j = 0; j < s.rank; j++)
          {
            s.shape[j] = get_i64 (&r);
            s.strides[j] = get_i64 (&r);
          }
        s.offset = get_i64 (&r);
        s.buffer = get_below (&r, p->buffers->len);
        if (r.bad)
          break;
        /* the last element a view addresses lies inside its buffer */
        for (guint j = 0; j < s.rank; j++)
          {
            if (s.shape[j] < 0 || s.strides[j] < 0 || s.shape[j] > G_MAXINT32 * (gint64) 64)
              r.bad = TRUE;
            else if (s.shape[j] > 0)
              last += (gsize) (s.shape[j] - 1) * (gsize) s.strides[j];
            numel *= (gsize) MAX (s.shape[j], 0);
          }
        b = &g_array_index (p->buffers, CsCudaBuffer, s.buffer);
        if (s.offset < 0 || (numel > 0 && ((gsize) s.offset + last + 1) * cs_dtype_size_bytes (s.dtype) > b->size_bytes))
          r.bad = TRUE;
        g_array_append_val (p->slots, s);
      }
  }
  nk = get_u32 (&r);
  if ((guint64) nk * 8 > r.n - r.at)
    r.bad = TRUE;
  for (guint i = 0; i < nk && !r.bad; i++)
    {
      g_autofree char *attrs = get_str (&r);
      g_autofree char *text = get_str (&r);

      if (attrs == NULL || text == NULL || cs_cuda_intern_kernel (p, attrs, text) != i)
        r.bad = TRUE;   /* NULL, or a kernel twice */
    }
  for (guint l = 0; l < 2 && !r.bad; l++)
    {
      guint nsteps = get_u32 (&r);

      if ((guint64) nsteps * 64 > r.n - r.at)
        r.bad = TRUE;
      for (guint i = 0; i < nsteps && !r.bad; i++)
        get_step (&r, p, lists[l], i, nk);
      for (guint i = 0; l == 1 && i < lists[l]->len && !r.bad; i++)
        if (((CsCudaStep *) g_ptr_array_index (lists[l], i))->kind != CS_CUDA_STEP_KERNEL)
          r.bad = TRUE;   /* constant fills are kernels */
    }
  get_infos (&r, p, p->inputs, p->input_slots);
  get_infos (&r, p, p->outputs, p->output_slots);
  if (!r.bad && r.at != r.n)
    r.bad = TRUE;
  if (r.bad)
    {
      *why = g_strdup ("a value out of range (a damaged or foreign file)");
      return FALSE;
    }
  if (p->cudnn_consulted != NULL && g_strcmp0 (p->cudnn_consulted, cs_cuda_cudnn_describe ()) != 0)
    {
      *why = g_strdup_printf ("made with %s, now %s", p->cudnn_consulted, cs_cuda_cudnn_describe ());
      return FALSE;
    }
  if (!restore_cudnn_steps (p, why))
    return FALSE;
  return TRUE;
}
