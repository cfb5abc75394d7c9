/* cs-cuda-plan.c: a device program's whole plan kept on disk (issue 20's warm start).
 *
 * A build turns the traces into steps, slots, buffers, the memory plan, the stream schedule and
 * the unique kernels' text (program_build's codegen phase).  All of that is a function of the
 * traces, the policy, the device, the libraries and this module's code, so it is written once
 * to the disk cache (cs_cuda_jit_cache_dir, `plan-<key>.bin`) and read back by a later build
 * with the same key instead of being generated again.  A device build also writes what the
 * device's libraries chose: every GEMM's cuBLASLt algorithm and the finalized cuDNN attention
 * plans in the form cuDNN serialises them, so that a warm build asks cuBLASLt's heuristics
 * nothing (their first query costs 100-140 ms a process) and builds no cuDNN plan.  What needs
 * the device (the arena, the libraries loaded from the NVRTC cache, the cuBLASLt descriptors,
 * the cuDNN plans made from their JSON) is still made by the build from what was read.
 *
 * File: the magic "CSPLAN1\n", the format version (u32), the key (string), the payload's
 * length (u64) and 128-bit MurmurHash3 (16 bytes), then the payload: little-endian
 * fixed-width numbers, strings as a u32 length and bytes, every field written one by one (no
 * struct padding), so that the same program always gives the same bytes.  The payload, in
 * order (io_payload): the device check, the memory plan, buffers, slots, kernels, steps,
 * constant fills, inputs, outputs; then the GEMM algorithms and the cuDNN plans, each part
 * after the identity (library version, device name, compute capability) it was made with.  A
 * file that fails any check (magic, version, key, length, digest, a number out of range) is
 * ignored with one line on stderr and the plan is built as if there were none (then written
 * anew); a library part of another identity is dropped alone (those GEMMs ask the heuristic,
 * those cuDNN plans are built) and the file is written again after the build.
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
#define PLAN_FORMAT 3u

/* ---- one description for both directions ----
 *
 * Each part of the payload is described once, by an io_* function that walks its fields in
 * file order; the same function writes them (Io.out set) or reads them back into the program
 * (Io.reading).  Reading checks every bound (a failure sets Io.bad, reads as 0 from then on);
 * the range checks that need what was read before (a slot below the slot count) are written
 * next to the field. */

typedef struct
{
  gboolean      reading;  /* TRUE: fill the fields from d; FALSE: append them to out */
  GByteArray   *out;      /* writing: the payload */
  const guint8 *d;        /* reading: the payload */
  gsize         n;        /* its bytes */
  gsize         at;       /* read position */
  gboolean      bad;      /* a read ran past the end or a value was out of range */
} Io;

static void
io_u32 (Io *io, guint32 *v)
{
  if (!io->reading)
    {
      guint8 x[4] = { (guint8) *v, (guint8) (*v >> 8), (guint8) (*v >> 16), (guint8) (*v >> 24) };

      g_byte_array_append (io->out, x, 4);
      return;
    }
  if (io->bad || io->n - io->at < 4)
    {
      io->bad = TRUE;
      *v = 0;
      return;
    }
  {
    const guint8 *x = io->d + io->at;

    io->at += 4;
    *v = (guint32) x[0] | (guint32) x[1] << 8 | (guint32) x[2] << 16 | (guint32) x[3] << 24;
  }
}

static void
io_u64 (Io *io, guint64 *v)
{
  guint32 lo = (guint32) *v, hi = (guint32) (*v >> 32);

  io_u32 (io, &lo);
  io_u32 (io, &hi);
  *v = (guint64) lo | (guint64) hi << 32;
}

/* @n raw bytes (a library's opaque record). */
static void
io_bytes (Io *io, void *p, gsize n)
{
  if (!io->reading)
    {
      g_byte_array_append (io->out, p, (guint) n);
      return;
    }
  if (io->bad || io->n - io->at < n)
    {
      io->bad = TRUE;
      memset (p, 0, n);
      return;
    }
  memcpy (p, io->d + io->at, n);
  io->at += n;
}

/* A string (u32 length, G_MAXUINT32 for NULL, then the bytes, no NUL inside).  Reading
 * replaces *@s by a new string (g_free) or NULL; writing leaves it. */
static void
io_str (Io *io, char **s)
{
  guint32 n = *s ? (guint32) strlen (*s) : G_MAXUINT32;

  io_u32 (io, &n);
  if (!io->reading)
    {
      if (n != G_MAXUINT32 && n > 0)
        g_byte_array_append (io->out, (const guint8 *) *s, n);
      return;
    }
  *s = NULL;
  if (io->bad || n == G_MAXUINT32)
    return;
  if (io->n - io->at < n || memchr (io->d + io->at, '\0', n) != NULL)
    {
      io->bad = TRUE;
      return;
    }
  *s = g_strndup ((const char *) io->d + io->at, n);
  io->at += n;
}

/* A count of items that take at least @min_bytes each: reading refuses one the rest of the
 * payload cannot hold (before anything is allocated for them). */
static guint
io_count (Io *io, guint n, gsize min_bytes)
{
  guint32 v = n;

  io_u32 (io, &v);
  if (io->reading && !io->bad && (guint64) v * min_bytes > io->n - io->at)
    io->bad = TRUE;
  return io->bad ? 0 : v;
}

/* The typed fields, any lvalue: the value converted to field type @T, written as a @W word by
 * @fn, and read back as a @T. */
#define IO_WORD(io, lv, fn, W, T)                                       \
  G_STMT_START {                                                        \
    W v_ = (W) (T) (lv);                                                \
    fn ((io), &v_);                                                     \
    if ((io)->reading)                                                  \
      (lv) = (T) v_;                                                    \
  } G_STMT_END
#define IO_U32(io, lv) IO_WORD (io, lv, io_u32, guint32, guint32)
/* A signed 32-bit value (two's complement in the file). */
#define IO_I32(io, lv) IO_WORD (io, lv, io_u32, guint32, gint32)
#define IO_U64(io, lv) IO_WORD (io, lv, io_u64, guint64, guint64)
#define IO_I64(io, lv) IO_WORD (io, lv, io_u64, guint64, gint64)
/* An unsigned value below @limit (evaluated when reading). */
#define IO_BELOW(io, lv, limit)                                         \
  G_STMT_START {                                                        \
    guint32 v_ = (guint32) (lv);                                        \
    io_u32 ((io), &v_);                                                 \
    if ((io)->reading)                                                  \
      {                                                                 \
        if ((guint64) v_ >= (guint64) (limit))                          \
          (io)->bad = TRUE;                                             \
        (lv) = (io)->bad ? 0 : v_;                                      \
      }                                                                 \
  } G_STMT_END
#define IO_BOOL(io, lv) IO_BELOW (io, lv, 2)
#define IO_DTYPE(io, lv) IO_BELOW (io, lv, CS_DTYPE_C128 + 1)
/* A slot index or -1 (none), the slot below @nslots. */
#define IO_SLOT_OR_NONE(io, lv, nslots)                                 \
  G_STMT_START {                                                        \
    IO_I32 (io, lv);                                                    \
    if ((io)->reading && ((lv) < -1 || ((lv) >= 0 && (guint64) (lv) >= (guint64) (nslots)))) \
      (io)->bad = TRUE;                                                 \
  } G_STMT_END
#define IO_F64(io, lv)                                                  \
  G_STMT_START {                                                        \
    double d_ = (lv);                                                   \
    guint64 v_;                                                         \
    memcpy (&v_, &d_, sizeof v_);                                       \
    io_u64 ((io), &v_);                                                 \
    if ((io)->reading)                                                  \
      {                                                                 \
        memcpy (&d_, &v_, sizeof d_);                                   \
        (lv) = d_;                                                      \
      }                                                                 \
  } G_STMT_END

/* The fields of one element of an io_array list, in file order: @e the element (writing: the
 * list's own; reading: a zeroed one to fill, appended after), @i its index, @data the caller's
 * (what its range checks need). */
typedef void (*IoElemFunc) (Io *io, void *e, guint i, gconstpointer data);

/* A GArray of elements that take at least @min_bytes each in the file: their count
 * (io_count), then each element's fields by @elem.  Reading appends the elements to @a (an
 * empty list) and stops after the first that sets Io.bad. */
static void
io_array (Io *io, GArray *a, gsize min_bytes, IoElemFunc elem, gconstpointer data)
{
  guint size = g_array_get_element_size (a);
  guint n = io_count (io, a->len, min_bytes);
  g_autofree void *e = io->reading && n > 0 ? g_malloc (size) : NULL;

  for (guint i = 0; i < n && !io->bad; i++)
    {
      if (!io->reading)
        {
          elem (io, a->data + (gsize) i * size, i, data);
          continue;
        }
      memset (e, 0, size);
      elem (io, e, i, data);
      g_array_append_vals (a, e, 1);
    }
}

/* A guint below *@data (a guint64). */
static void
io_uint_below (Io *io, void *e, guint i, gconstpointer data)
{
  (void) i;
  IO_BELOW (io, *(guint *) e, *(const guint64 *) data);
}

/* A guint list (GArray), each value below @limit. */
static void
io_uints (Io *io, GArray *a, guint64 limit)
{
  io_array (io, a, 4, io_uint_below, &limit);
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
  g_string_append_printf (s, "device %s sm_%d%d %d SMs cudnn %d runtime %d driver %d cublasLt %zu\n",
                          p->device_name ? p->device_name : "?", p->cc_major, p->cc_minor, p->n_sms, p->use_cudnn,
                          rt, drv, (size_t) cublasLtGetVersion ());
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
/* What a part of the payload was made with: the library's version, the device's name and its
 * compute capability.  Writing writes the arguments; reading replaces them by the file's. */
static void
io_identity (Io *io, guint64 *version, char **device, guint32 *cc_major, guint32 *cc_minor)
{
  io_u64 (io, version);
  io_str (io, device);
  io_u32 (io, cc_major);
  io_u32 (io, cc_minor);
}

/* A buffer of p->buffers, inside the arena of @data (the CsCudaProgram). */
static void
io_buffer (Io *io, void *e, guint i, gconstpointer data)
{
  CsCudaBuffer *b = e;
  gsize arena_bytes = ((const CsCudaProgram *) data)->arena_bytes;

  (void) i;
  IO_U64 (io, b->size_bytes);
  IO_I32 (io, b->first);
  IO_I32 (io, b->last);
  IO_U64 (io, b->offset);
  IO_BOOL (io, b->pinned);
  IO_BOOL (io, b->zeroed);
  if (io->reading && (b->offset % CS_CUDA_ALIGN != 0 || b->size_bytes > arena_bytes
                      || b->offset > arena_bytes - b->size_bytes))
    io->bad = TRUE;
}

/* A slot of p->slots, a view inside a buffer of @data (the CsCudaProgram, its buffers read). */
static void
io_slot (Io *io, void *e, guint i, gconstpointer data)
{
  CsCudaSlot *s = e;
  const GArray *buffers = ((const CsCudaProgram *) data)->buffers;
  gsize numel = 1, last = 0;
  const CsCudaBuffer *b;

  (void) i;

  IO_DTYPE (io, s->dtype);
  IO_BELOW (io, s->rank, CS_MAX_DIMS + 1);
  for (guint j = 0; j < s->rank; j++)
    {
      IO_I64 (io, s->shape[j]);
      IO_I64 (io, s->strides[j]);
    }
  IO_I64 (io, s->offset);
  IO_BELOW (io, s->buffer, buffers->len);
  if (!io->reading || io->bad)
    return;
  /* the last element a view addresses lies inside its buffer */
  for (guint j = 0; j < s->rank; j++)
    {
      if (s->shape[j] < 0 || s->strides[j] < 0 || s->shape[j] > G_MAXINT32 * (gint64) 64)
        io->bad = TRUE;
      else if (s->shape[j] > 0)
        last += (gsize) (s->shape[j] - 1) * (gsize) s->strides[j];
      numel *= (gsize) MAX (s->shape[j], 0);
    }
  b = &g_array_index (buffers, CsCudaBuffer, s->buffer);
  if (s->offset < 0 || (numel > 0 && ((gsize) s->offset + last + 1) * cs_dtype_size_bytes (s->dtype) > b->size_bytes))
    io->bad = TRUE;
}

static void
io_gemm (Io *io, CsCudaGemmProblem *g, guint nslots)
{
  IO_BELOW (io, g->slot_a, nslots);
  IO_BELOW (io, g->slot_b, nslots);
  IO_BELOW (io, g->slot_d, nslots);
  IO_SLOT_OR_NONE (io, g->slot_bias, nslots);
  IO_BOOL (io, g->bgrad);
  IO_DTYPE (io, g->dtype);
  IO_I64 (io, g->m);
  IO_I64 (io, g->n);
  IO_I64 (io, g->k);
  IO_BELOW (io, g->ta, CUBLAS_OP_C + 1);
  IO_BELOW (io, g->tb, CUBLAS_OP_C + 1);
  IO_I64 (io, g->a_rows);
  IO_I64 (io, g->a_cols);
  IO_I64 (io, g->lda);
  IO_I64 (io, g->b_rows);
  IO_I64 (io, g->b_cols);
  IO_I64 (io, g->ldb);
  IO_I64 (io, g->ldd);
  IO_I32 (io, g->batch);
  IO_I64 (io, g->stride_a);
  IO_I64 (io, g->stride_b);
  IO_I64 (io, g->stride_d);
  IO_BOOL (io, g->tf32);
}

static void
io_sdpa (Io *io, CsCudnnSdpa *d, guint nslots)
{
  gint *sl[] = { &d->q, &d->k, &d->v, &d->o, &d->stats, &d->dO, &d->dQ, &d->dK, &d->dV };
  int64_t *st[] = { d->q_st, d->k_st, d->v_st, d->o_st, d->stats_st, d->do_st, d->dq_st, d->dk_st, d->dv_st };

  IO_BOOL (io, d->backward);
  IO_DTYPE (io, d->dtype);
  IO_I64 (io, d->b);
  IO_I64 (io, d->h);
  IO_I64 (io, d->sq);
  IO_I64 (io, d->skv);
  IO_I64 (io, d->d);
  IO_I64 (io, d->dv);
  IO_BOOL (io, d->causal);
  IO_F64 (io, d->scale);
  for (guint i = 0; i < G_N_ELEMENTS (sl); i++)
    IO_SLOT_OR_NONE (io, *sl[i], nslots);
  for (guint i = 0; i < G_N_ELEMENTS (st); i++)
    for (guint j = 0; j < 4; j++)
      IO_I64 (io, st[i][j]);
}

/* A kernel argument of a step, its slot below *@data (a guint64). */
static void
io_karg (Io *io, void *e, guint i, gconstpointer data)
{
  (void) i;
  IO_BELOW (io, ((CsCudaKArg *) e)->slot, *(const guint64 *) data);
}

/* One step.  Reading: @s is a fresh step (its lists made, in its list already), @index its
 * place in that list, @n_kernels the unique kernels read.  A cuDNN step reads into a
 * placeholder: its problem kept in arg_vals until restore_cudnn_steps makes the real step (its
 * plan needs the device); step_free frees it either way. */
static void
io_step (Io *io, CsCudaStep *s, guint nslots, guint index, guint n_kernels)
{
  char *kind_name = (char *) s->kind_name;
  guint64 slot_limit = nslots;

  IO_BELOW (io, s->kind, CS_CUDA_STEP_CUDNN + 1);
  io_str (io, &s->label);
  io_str (io, &kind_name);
  if (io->reading)
    {
      s->kind_name = kind_name ? g_intern_string (kind_name) : NULL;
      g_free (kind_name);
      if (s->label == NULL)
        io->bad = TRUE;
    }
  IO_BOOL (io, s->backward);
  IO_F64 (io, s->flops);
  IO_F64 (io, s->bytes);
  IO_F64 (io, s->floor_ms);
  io_uints (io, s->reads, nslots);
  io_uints (io, s->writes, nslots);
  IO_U32 (io, s->kernel);
  if (io->reading && s->kind == CS_CUDA_STEP_KERNEL && s->kernel >= n_kernels)
    io->bad = TRUE;
  IO_BOOL (io, s->mergeable);
  IO_U64 (io, s->shared_bytes);
  io_array (io, s->args, 4, io_karg, &slot_limit);
  for (guint i = 0; i < 3; i++)
    IO_U32 (io, s->grid[i]);
  for (guint i = 0; i < 3; i++)
    IO_U32 (io, s->block[i]);
  IO_BELOW (io, s->stream, CS_CUDA_MAX_STREAMS);
  IO_BELOW (io, s->n_waits, CS_CUDA_MAX_STREAMS);
  for (guint i = 0; i < s->n_waits; i++)
    IO_BELOW (io, s->waits[i], index);   /* earlier steps only */
  IO_BOOL (io, s->signals);
  IO_U32 (io, s->depth);
  if (io->bad)
    return;
  if (s->kind == CS_CUDA_STEP_GEMM)
    {
      CsCudaGemmProblem g = { 0 };

      if (!io->reading)
        cs_cuda_gemm_get_problem (s->gemm, &g);
      io_gemm (io, &g, nslots);
      if (io->reading && !io->bad)
        s->gemm = cs_cuda_gemm_new_from_problem (&g);
    }
  else if (s->kind == CS_CUDA_STEP_CUDNN)
    {
      CsCudnnSdpa d = { 0 };

      if (!io->reading)
        d = *cs_cuda_cudnn_problem (s->cudnn);
      io_sdpa (io, &d, nslots);
      if (io->reading && !io->bad)
        s->arg_vals = (void **) g_memdup2 (&d, sizeof d);
    }
}

/* io_info's data: the program and the slot list parallel to the infos. */
typedef struct
{
  CsCudaProgram *p;      /* names interned in p->names, slots below p->slots->len */
  GArray        *slots;  /* guint: the slot of each info (reading appends to it) */
} IoInfos;

/* An input or output of the program and its slot (@data an IoInfos). */
static void
io_info (Io *io, void *e, guint i, gconstpointer data)
{
  const IoInfos *x = data;
  CsCudaTensorInfo *t = e;
  guint slot = io->reading ? 0 : g_array_index (x->slots, guint, i);
  char *name = (char *) t->name;

  io_str (io, &name);
  if (io->reading)
    {
      t->name = name ? g_string_chunk_insert (x->p->names, name) : NULL;
      g_free (name);
    }
  IO_DTYPE (io, t->dtype);
  IO_BELOW (io, t->rank, CS_MAX_DIMS + 1);
  for (guint j = 0; j < t->rank; j++)
    IO_I64 (io, t->shape[j]);
  IO_BOOL (io, t->backward);
  IO_I32 (io, t->grad_of);
  IO_BELOW (io, slot, x->p->slots->len);
  if (io->reading)
    g_array_append_val (x->slots, slot);
}

/* The inputs or outputs (@infos) and their slots (@slots, parallel). */
static void
io_infos (Io *io, CsCudaProgram *p, GArray *infos, GArray *slots)
{
  IoInfos x = { p, slots };

  io_array (io, infos, 16, io_info, &x);
}

G_STATIC_ASSERT (sizeof (cublasLtMatmulAlgo_t) % 8 == 0);

/* The algorithm each GEMM step runs with (the one its plan chose: tuned or the heuristic's),
 * after the identity of the cuBLASLt and device that chose it.  Read back only when that
 * identity is this process's (an algorithm is valid for the cuBLASLt version that made it:
 * cublasLtMatmulAlgo_t "can be trivially serialized and later restored for use with the same
 * version of cuBLAS library", NVIDIA's cuBLASLt documentation); then the build plans those
 * GEMMs without a heuristic query or check (cs_cuda_gemm_set_stored_algo).  A GEMM without one
 * (a dry build's plan), or another identity, is planned as without the file, and the file is
 * written again after the build (plan_stale). */
static void
io_gemm_algos (Io *io, CsCudaProgram *p)
{
  guint64 version = p->lt_version;
  char *device = p->device_name;
  guint32 maj = (guint32) p->cc_major, min = (guint32) p->cc_minor;
  gboolean same;
  guint n_gemm = 0, n, k = 0;

  io_identity (io, &version, &device, &maj, &min);
  same = !io->reading || (version == p->lt_version && g_strcmp0 (device, p->device_name) == 0
                          && maj == (guint32) p->cc_major && min == (guint32) p->cc_minor);
  if (io->reading)
    g_free (device);
  for (guint i = 0; i < p->steps->len; i++)
    n_gemm += ((CsCudaStep *) g_ptr_array_index (p->steps, i))->kind == CS_CUDA_STEP_GEMM;
  n = io_count (io, n_gemm, 4);
  if (io->reading && n != n_gemm)
    io->bad = TRUE;
  for (guint i = 0; i < p->steps->len && k < n && !io->bad; i++)
    {
      CsCudaStep *s = g_ptr_array_index (p->steps, i);
      cublasLtMatmulAlgo_t algo;
      guint64 *w = (guint64 *) &algo;
      gboolean has = FALSE;

      if (s->kind != CS_CUDA_STEP_GEMM)
        continue;
      k++;
      memset (&algo, 0, sizeof algo);
      if (!io->reading)
        has = cs_cuda_gemm_get_algo (s->gemm, &algo);
      IO_BOOL (io, has);
      for (guint j = 0; has && j < sizeof algo / 8; j++)
        IO_U64 (io, w[j]);
      if (!io->reading || io->bad)
        continue;
      if (has && same)
        {
          cs_cuda_gemm_set_stored_algo (s->gemm, &algo);
          p->n_gemm_algos_cached++;
        }
      else
        p->plan_stale = TRUE;
    }
}

/* The finalized cuDNN execution plans of the program's problems as cuDNN serialises them
 * (CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION; cs-cuda-cudnn.c), after the identity of the
 * cuDNN and device that made them.  Read into p->cudnn_saved, where cs_cuda_cudnn_sdpa_step
 * finds them; plans of another identity are dropped (then built again, and the file written
 * again after the build). */
static void
io_cudnn_plans (Io *io, CsCudaProgram *p)
{
  guint64 version = p->cudnn_version;
  char *device = p->device_name;
  guint32 maj = (guint32) p->cc_major, min = (guint32) p->cc_minor;
  guint n;

  io_identity (io, &version, &device, &maj, &min);
  n = io_count (io, p->cudnn_saved->len, 28);
  for (guint i = 0; i < n && !io->bad; i++)
    {
      CsCudnnSaved sv = { 0 };

      if (!io->reading)
        sv = *(CsCudnnSaved *) g_ptr_array_index (p->cudnn_saved, i);
      io_str (io, &sv.key);
      IO_I64 (io, sv.workspace);
      IO_I64 (io, sv.engine);
      io_str (io, &sv.json);
      if (!io->reading)
        continue;
      if (sv.key == NULL || sv.json == NULL || sv.workspace < 0)
        io->bad = TRUE;
      g_ptr_array_add (p->cudnn_saved, g_memdup2 (&sv, sizeof sv));   /* freed with the list */
    }
  if (io->reading && !io->bad && n > 0)
    {
      /* cuDNN is loaded only for a program with cuDNN steps, which these plans are for */
      guint64 now = p->use_cudnn ? cs_cuda_cudnn_version () : 0;

      if (version != now || g_strcmp0 (device, p->device_name) != 0 || maj != (guint32) p->cc_major
          || min != (guint32) p->cc_minor)
        {
          g_ptr_array_set_size (p->cudnn_saved, 0);
          p->plan_stale = TRUE;
        }
      else
        p->cudnn_version = version;
    }
  if (io->reading)
    g_free (device);
}

/* The whole payload, in file order. */
static void
io_payload (Io *io, CsCudaProgram *p)
{
  GPtrArray *lists[2] = { p->steps, p->setup_steps };
  guint32 sms = (guint32) p->n_sms, maj = (guint32) p->cc_major, min = (guint32) p->cc_minor;
  guint n;

  IO_U32 (io, sms);
  IO_U32 (io, maj);
  IO_U32 (io, min);
  if (io->reading && (sms != (guint32) p->n_sms || maj != (guint32) p->cc_major || min != (guint32) p->cc_minor))
    io->bad = TRUE;
  IO_U64 (io, p->arena_bytes);
  IO_U64 (io, p->naive_bytes);
  IO_BELOW (io, p->n_streams, CS_CUDA_MAX_STREAMS + 1);
  if (io->reading && p->n_streams == 0)
    io->bad = TRUE;
  IO_U32 (io, p->critical_path);
  io_str (io, &p->cudnn_consulted);

  io_array (io, p->buffers, 32, io_buffer, p);
  io_array (io, p->slots, 20, io_slot, p);
  n = io_count (io, p->kernels->len, 8);
  for (guint i = 0; i < n && !io->bad; i++)
    {
      CsCudaKernel *k = io->reading ? NULL : g_ptr_array_index (p->kernels, i);
      char *attrs = k ? k->attrs : NULL, *text = k ? k->text : NULL;

      io_str (io, &attrs);
      io_str (io, &text);
      if (io->reading && (attrs == NULL || text == NULL || cs_cuda_intern_kernel (p, attrs, text) != i))
        io->bad = TRUE;   /* NULL, or a kernel twice */
      if (io->reading)
        {
          g_free (attrs);
          g_free (text);
        }
    }
  for (guint l = 0; l < 2 && !io->bad; l++)
    {
      guint nsteps = io_count (io, lists[l]->len, 64);

      for (guint i = 0; i < nsteps && !io->bad; i++)
        {
          CsCudaStep *s;

          if (io->reading)
            {
              s = g_new0 (CsCudaStep, 1);
              s->reads = g_array_new (FALSE, FALSE, sizeof (guint));
              s->writes = g_array_new (FALSE, FALSE, sizeof (guint));
              s->args = g_array_new (FALSE, FALSE, sizeof (CsCudaKArg));
              g_ptr_array_add (lists[l], s);   /* freed with the list from here on */
            }
          else
            s = g_ptr_array_index (lists[l], i);
          io_step (io, s, p->slots->len, i, p->kernels->len);
          if (io->reading && l == 1 && s->kind != CS_CUDA_STEP_KERNEL)
            io->bad = TRUE;   /* constant fills are kernels */
        }
    }
  io_infos (io, p, p->inputs, p->input_slots);
  io_infos (io, p, p->outputs, p->output_slots);
  if (!io->bad)
    io_gemm_algos (io, p);
  if (!io->bad)
    io_cudnn_plans (io, p);
}

/**
 * cs_cuda_plan_serialize: see cs-cuda-private.h.
 */
GBytes *
cs_cuda_plan_serialize (const CsCudaProgram *p, const char *key)
{
  Io io = { .reading = FALSE, .out = g_byte_array_new () };
  GByteArray *out = g_byte_array_new ();
  Io head = { .reading = FALSE, .out = out };
  guint32 format = PLAN_FORMAT;
  char *k = (char *) key;
  guint64 len;
  guint8 digest[16];

  io_payload (&io, (CsCudaProgram *) p);   /* writing only reads the program */
  len = io.out->len;
  cs_cuda_plan_hash128 (io.out->data, io.out->len, digest);
  g_byte_array_append (out, (const guint8 *) PLAN_MAGIC, 8);
  io_u32 (&head, &format);
  io_str (&head, &k);
  io_u64 (&head, &len);
  g_byte_array_append (out, digest, 16);
  g_byte_array_append (out, io.out->data, io.out->len);
  g_byte_array_unref (io.out);
  return g_byte_array_free_to_bytes (out);
}

/* Turns the placeholder cuDNN steps of @p->steps (io_step) into real ones: each is made again
 * by cs_cuda_cudnn_sdpa_step (which loads its plan from p->cudnn_saved, or builds it) and
 * given the schedule the file holds.  FALSE with *@why set when cuDNN refuses one. */
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
  Io h = { .reading = TRUE, .d = d, .n = n, .at = 8 }, io;
  g_autofree char *fkey = NULL;
  guint32 format = 0;
  guint64 plen = 0;
  guint8 digest[16];

  *why = NULL;
  if (n < 8 || memcmp (d, PLAN_MAGIC, 8) != 0)
    {
      *why = g_strdup ("not a plan file");
      return FALSE;
    }
  io_u32 (&h, &format);
  if (format != PLAN_FORMAT || h.bad)
    {
      *why = g_strdup ("another format version");
      return FALSE;
    }
  io_str (&h, &fkey);
  if (g_strcmp0 (fkey, key) != 0)
    {
      *why = g_strdup ("made for another key");
      return FALSE;
    }
  io_u64 (&h, &plen);
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
  io = (Io) { .reading = TRUE, .d = d + h.at + 16, .n = plen };
  if (p->names == NULL)
    p->names = g_string_chunk_new (1024);
  io_payload (&io, p);
  if (!io.bad && io.at != io.n)
    io.bad = TRUE;
  if (io.bad)
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
