/* cs-tensor.c: host tensors (see cs-tensor.h). */
#include "cs-config.h"

#include "cs-tensor.h"
#include "cs-half.h"

#include <errno.h>
#include <math.h>
#include <string.h>

G_DEFINE_QUARK (cs-tensor-error-quark, cs_tensor_error)

static gsize
storage_bytes (CsDtype dtype)
{
  switch (dtype)
    {
    case CS_DTYPE_B8: case CS_DTYPE_U8: case CS_DTYPE_I8:
    case CS_DTYPE_F8_E5M2: case CS_DTYPE_F8_E5M2FNUZ:
    case CS_DTYPE_F8_E4M3FN: case CS_DTYPE_F8_E4M3FNUZ:
      return 1;
    case CS_DTYPE_I16: case CS_DTYPE_BF16: case CS_DTYPE_F16:
      return 2;
    case CS_DTYPE_I32: case CS_DTYPE_F32:
      return 4;
    case CS_DTYPE_I64: case CS_DTYPE_U64: case CS_DTYPE_F64:
      return 8;
    default:
      return 0;
    }
}

gboolean
cs_tensor_supports_dtype (CsDtype dtype)
{
  return dtype < CS_N_DTYPES && storage_bytes (dtype) != 0;
}

CsTensor *
cs_tensor_new (CsDtype dtype, const int64_t *shape, guint rank, GError **error)
{
  CsTensor *t;
  int64_t numel = 1;
  gsize esize;

  if (!cs_tensor_supports_dtype (dtype))
    {
      g_set_error (error, CS_TENSOR_ERROR, CS_TENSOR_ERROR_DTYPE,
                   "host tensors do not support dtype %s",
                   dtype < CS_N_DTYPES ? cs_dtype_short_name (dtype) : "?");
      return NULL;
    }
  if (rank > CS_MAX_DIMS)
    {
      g_set_error (error, CS_TENSOR_ERROR, CS_TENSOR_ERROR_SHAPE,
                   "rank %u is over castscope's limit of %d dimensions", rank, CS_MAX_DIMS);
      return NULL;
    }
  esize = storage_bytes (dtype);
  for (guint i = 0; i < rank; i++)
    {
      if (shape[i] < 0)
        {
          g_set_error (error, CS_TENSOR_ERROR, CS_TENSOR_ERROR_SHAPE,
                       "dimension %u has negative extent %" G_GINT64_FORMAT, i, shape[i]);
          return NULL;
        }
      if (shape[i] != 0 && numel > (int64_t) (CS_TENSOR_MAX_BYTES / esize) / shape[i])
        {
          g_set_error (error, CS_TENSOR_ERROR, CS_TENSOR_ERROR_SIZE,
                       "a %s tensor of this shape is larger than the host limit of %"
                       G_GSIZE_FORMAT " GiB", cs_dtype_short_name (dtype),
                       CS_TENSOR_MAX_BYTES >> 30);
          return NULL;
        }
      numel *= shape[i];
    }

  t = g_new0 (CsTensor, 1);
  t->ref_count = 1;
  t->dtype = dtype;
  t->rank = rank;
  for (guint i = 0; i < CS_MAX_DIMS; i++)
    t->shape[i] = i < rank ? shape[i] : 1;
  t->numel = numel;
  t->elem_bytes = esize;
  t->data = g_aligned_alloc0 (MAX (numel, 1), esize, 64);
  return t;
}

CsTensor *
cs_tensor_ref (CsTensor *t)
{
  g_return_val_if_fail (t != NULL, NULL);
  g_atomic_int_inc (&t->ref_count);
  return t;
}

void
cs_tensor_unref (CsTensor *t)
{
  if (t == NULL)
    return;
  if (g_atomic_int_dec_and_test (&t->ref_count))
    {
      g_aligned_free (t->data);
      g_free (t);
    }
}

gsize
cs_tensor_nbytes (const CsTensor *t)
{
  return (gsize) t->numel * t->elem_bytes;
}

CsTensor *
cs_tensor_copy (const CsTensor *t)
{
  CsTensor *c = cs_tensor_new (t->dtype, t->shape, t->rank, NULL);

  g_assert (c != NULL);
  memcpy (c->data, t->data, cs_tensor_nbytes (t));
  return c;
}

double
cs_tensor_get_f64 (const CsTensor *t, int64_t i)
{
  switch (t->dtype)
    {
    case CS_DTYPE_B8: case CS_DTYPE_U8: return ((const guint8 *) t->data)[i];
    case CS_DTYPE_I8: return ((const gint8 *) t->data)[i];
    case CS_DTYPE_I16: return ((const gint16 *) t->data)[i];
    case CS_DTYPE_I32: return ((const gint32 *) t->data)[i];
    case CS_DTYPE_I64: return (double) ((const gint64 *) t->data)[i];
    case CS_DTYPE_U64: return (double) ((const guint64 *) t->data)[i];
    case CS_DTYPE_BF16: return cs_half_bf16_to_f32 (((const guint16 *) t->data)[i]);
    case CS_DTYPE_F16: return cs_half_f16_to_f32 (((const guint16 *) t->data)[i]);
    case CS_DTYPE_F32: return ((const float *) t->data)[i];
    case CS_DTYPE_F64: return ((const double *) t->data)[i];
    case CS_DTYPE_F8_E5M2: case CS_DTYPE_F8_E5M2FNUZ:
    case CS_DTYPE_F8_E4M3FN: case CS_DTYPE_F8_E4M3FNUZ:
      return cs_half_fp8_to_f64 (t->dtype, ((const guint8 *) t->data)[i]);
    default:
      g_assert_not_reached ();
      return NAN;
    }
}

static gint64
to_i64 (double v)
{
  if (isnan (v))
    return 0;
  if (v >= 9223372036854775808.0)
    return G_MAXINT64;
  if (v < -9223372036854775808.0)
    return G_MININT64;
  return (gint64) v;   /* truncates toward zero */
}

void
cs_tensor_set_f64 (CsTensor *t, int64_t i, double v)
{
  switch (t->dtype)
    {
    case CS_DTYPE_B8: ((guint8 *) t->data)[i] = v != 0.0; break;
    case CS_DTYPE_U8: ((guint8 *) t->data)[i] = (guint8) (guint64) to_i64 (v); break;
    case CS_DTYPE_I8: ((gint8 *) t->data)[i] = (gint8) to_i64 (v); break;
    case CS_DTYPE_I16: ((gint16 *) t->data)[i] = (gint16) to_i64 (v); break;
    case CS_DTYPE_I32: ((gint32 *) t->data)[i] = (gint32) to_i64 (v); break;
    case CS_DTYPE_I64: ((gint64 *) t->data)[i] = to_i64 (v); break;
    case CS_DTYPE_U64:
      ((guint64 *) t->data)[i] = v >= 18446744073709551616.0 ? G_MAXUINT64
                                 : v >= 0 ? (guint64) v : (guint64) to_i64 (v);
      break;
    case CS_DTYPE_BF16: ((guint16 *) t->data)[i] = cs_half_bf16_from_f64 (v); break;
    case CS_DTYPE_F16: ((guint16 *) t->data)[i] = cs_half_f16_from_f64 (v); break;
    case CS_DTYPE_F32: ((float *) t->data)[i] = (float) v; break;
    case CS_DTYPE_F64: ((double *) t->data)[i] = v; break;
    case CS_DTYPE_F8_E5M2: case CS_DTYPE_F8_E5M2FNUZ:
    case CS_DTYPE_F8_E4M3FN: case CS_DTYPE_F8_E4M3FNUZ:
      ((guint8 *) t->data)[i] = cs_half_fp8_from_f64 (t->dtype, v);
      break;
    default:
      g_assert_not_reached ();
    }
}

double *
cs_tensor_dup_f64 (const CsTensor *t)
{
  double *out = g_new (double, MAX (t->numel, 1));

  switch (t->dtype)
    {
    case CS_DTYPE_F32:
      for (int64_t i = 0; i < t->numel; i++)
        out[i] = ((const float *) t->data)[i];
      break;
    case CS_DTYPE_F64:
      memcpy (out, t->data, (gsize) t->numel * sizeof (double));
      break;
    case CS_DTYPE_BF16:
      for (int64_t i = 0; i < t->numel; i++)
        out[i] = cs_half_bf16_to_f32 (((const guint16 *) t->data)[i]);
      break;
    default:
      for (int64_t i = 0; i < t->numel; i++)
        out[i] = cs_tensor_get_f64 (t, i);
      break;
    }
  return out;
}

CsTensor *
cs_tensor_new_from_f64 (CsDtype dtype, const int64_t *shape, guint rank, const double *values,
                        GError **error)
{
  CsTensor *t = cs_tensor_new (dtype, shape, rank, error);

  if (t == NULL)
    return NULL;
  switch (dtype)
    {
    case CS_DTYPE_F32:
      for (int64_t i = 0; i < t->numel; i++)
        ((float *) t->data)[i] = (float) values[i];
      break;
    case CS_DTYPE_F64:
      memcpy (t->data, values, (gsize) t->numel * sizeof (double));
      break;
    default:
      for (int64_t i = 0; i < t->numel; i++)
        cs_tensor_set_f64 (t, i, values[i]);
      break;
    }
  return t;
}

CsTensor *
cs_tensor_convert (const CsTensor *t, CsDtype dtype, GError **error)
{
  g_autofree double *v = NULL;

  if (dtype == t->dtype)
    return cs_tensor_copy (t);
  v = cs_tensor_dup_f64 (t);
  return cs_tensor_new_from_f64 (dtype, t->shape, t->rank, v, error);
}

gboolean
cs_tensor_same_shape (const CsTensor *a, const int64_t *shape, guint rank)
{
  if (a->rank != rank)
    return FALSE;
  for (guint i = 0; i < rank; i++)
    if (a->shape[i] != shape[i])
      return FALSE;
  return TRUE;
}

char *
cs_tensor_type_string (const CsTensor *t)
{
  GString *s = g_string_new (cs_dtype_short_name (t->dtype));

  g_string_append_c (s, '[');
  for (guint i = 0; i < t->rank; i++)
    g_string_append_printf (s, "%s%" G_GINT64_FORMAT, i ? ", " : "", t->shape[i]);
  g_string_append_c (s, ']');
  return g_string_free (s, FALSE);
}

void
cs_tensor_measure_error (const CsTensor *a, const CsTensor *ref, CsTensorErrorStats *stats)
{
  double tmax = 0, num = 0, den = 0;
  gboolean any_nan = FALSE, any_inf = FALSE;
  int64_t n;

  g_return_if_fail (a != NULL && ref != NULL && stats != NULL);

  memset (stats, 0, sizeof *stats);
  n = MIN (a->numel, ref->numel);
  for (int64_t i = 0; i < ref->numel; i++)
    {
      double v = fabs (cs_tensor_get_f64 (ref, i));
      if (isfinite (v))
        tmax = MAX (tmax, v);
    }
  for (int64_t i = 0; i < a->numel; i++)
    if (!isfinite (cs_tensor_get_f64 (a, i)))
      stats->n_nonfinite++;
  for (int64_t i = 0; i < n; i++)
    {
      double x = cs_tensor_get_f64 (a, i), r = cs_tensor_get_f64 (ref, i), d;

      if (isnan (x) || isnan (r))
        {
          any_nan = TRUE;
          stats->n_mismatch++;
          continue;
        }
      if (isinf (x) || isinf (r))
        {
          if (x != r)   /* one finite, or opposite signs */
            {
              any_inf = TRUE;
              stats->n_mismatch++;
            }
          continue;
        }
      d = fabs (x - r);
      num += d * d;
      den += r * r;
      stats->max_abs = MAX (stats->max_abs, d);
      stats->max_rel = MAX (stats->max_rel, d / MAX (fabs (r), MAX (1e-3 * tmax, 1e-30)));
    }
  stats->rel_l2 = den > 0 ? sqrt (num / den) : sqrt (num);
  if (any_nan)
    stats->max_abs = stats->max_rel = stats->rel_l2 = NAN;
  else if (any_inf)
    stats->max_abs = stats->max_rel = stats->rel_l2 = INFINITY;
}

/* ---- random -------------------------------------------------------------------------- */

static GRand *
rand_for_seed (guint64 seed)
{
  guint32 words[2] = { (guint32) (seed & 0xffffffffu), (guint32) (seed >> 32) };

  return g_rand_new_with_seed_array (words, 2);
}

void
cs_tensor_fill_random (CsTensor *t, guint64 seed, double scale, int64_t int_bound)
{
  GRand *rand = rand_for_seed (seed);
  CsDtypeKind kind = cs_dtype_kind (t->dtype);

  if (int_bound < 1)
    int_bound = 1;
  if (t->dtype == CS_DTYPE_U8 && int_bound > 256)
    int_bound = 256;
  if (t->dtype == CS_DTYPE_I8 && int_bound > 128)
    int_bound = 128;
  if (t->dtype == CS_DTYPE_I16 && int_bound > 32768)
    int_bound = 32768;

  for (int64_t i = 0; i < t->numel; i++)
    {
      double v;

      if (t->dtype == CS_DTYPE_B8)
        v = g_rand_boolean (rand) ? 1.0 : 0.0;
      else if (kind == CS_DTYPE_KIND_INT)
        v = (double) (int64_t) (g_rand_double (rand) * (double) int_bound);
      else
        {
          double u1 = g_rand_double (rand), u2 = g_rand_double (rand);
          v = sqrt (-2.0 * log (1.0 - u1)) * cos (2.0 * G_PI * u2) * scale;
        }
      cs_tensor_set_f64 (t, i, v);
    }
  g_rand_free (rand);
}

void
cs_tensor_fill_uniform (CsTensor *t, guint64 seed, double lo, double hi)
{
  GRand *rand = rand_for_seed (seed);

  for (int64_t i = 0; i < t->numel; i++)
    cs_tensor_set_f64 (t, i, lo + (hi - lo) * g_rand_double (rand));
  g_rand_free (rand);
}

/* ---- .npy ---------------------------------------------------------------------------- */

static const char *
npy_descr (CsDtype dtype)
{
  switch (dtype)
    {
    case CS_DTYPE_B8: return "|b1";
    case CS_DTYPE_U8: return "|u1";
    case CS_DTYPE_I8: return "|i1";
    case CS_DTYPE_I16: return "<i2";
    case CS_DTYPE_I32: return "<i4";
    case CS_DTYPE_I64: return "<i8";
    case CS_DTYPE_U64: return "<u8";
    case CS_DTYPE_F16: return "<f2";
    case CS_DTYPE_F64: return "<f8";
    default: return "<f4";   /* f32, bf16 and fp8 (exact in f32) */
    }
}

GBytes *
cs_tensor_to_npy_bytes (const CsTensor *t)
{
  g_autoptr (GString) dict = g_string_new (NULL);
  g_autoptr (CsTensor) stored = NULL;
  const CsTensor *src = t;
  GByteArray *out;
  guint16 hlen;
  guint8 pre[10] = { 0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, 0, 0 };

  if (t->dtype == CS_DTYPE_BF16 || cs_dtype_is_fp8 (t->dtype))
    {
      stored = cs_tensor_convert (t, CS_DTYPE_F32, NULL);
      src = stored;
    }

  g_string_append_printf (dict, "{'descr': '%s', 'fortran_order': False, 'shape': (",
                          npy_descr (src->dtype));
  for (guint i = 0; i < src->rank; i++)
    g_string_append_printf (dict, "%" G_GINT64_FORMAT "%s", src->shape[i],
                            src->rank == 1 ? "," : (i + 1 < src->rank ? ", " : ""));
  g_string_append (dict, "), }");
  /* pad with spaces so that the data starts on a 64-byte boundary; end with '\n' */
  while ((10 + dict->len + 1) % 64 != 0)
    g_string_append_c (dict, ' ');
  g_string_append_c (dict, '\n');
  hlen = (guint16) dict->len;
  pre[8] = hlen & 0xff;
  pre[9] = hlen >> 8;

  out = g_byte_array_sized_new (10 + dict->len + cs_tensor_nbytes (src));
  g_byte_array_append (out, pre, 10);
  g_byte_array_append (out, (const guint8 *) dict->str, dict->len);
  /* storage is host order; castscope targets little-endian hosts */
  G_STATIC_ASSERT (G_BYTE_ORDER == G_LITTLE_ENDIAN);
  g_byte_array_append (out, src->data, cs_tensor_nbytes (src));
  return g_byte_array_free_to_bytes (out);
}

gboolean
cs_tensor_save_npy (const CsTensor *t, const char *path, GError **error)
{
  g_autoptr (GBytes) bytes = cs_tensor_to_npy_bytes (t);
  g_autoptr (GError) local = NULL;
  gsize len;
  const char *data = g_bytes_get_data (bytes, &len);

  if (!g_file_set_contents (path, data, (gssize) len, &local))
    {
      g_set_error (error, CS_TENSOR_ERROR, CS_TENSOR_ERROR_IO, "%s", local->message);
      return FALSE;
    }
  return TRUE;
}

static gboolean
fmt_error (GError **error, const char *name, const char *what)
{
  g_set_error (error, CS_TENSOR_ERROR, CS_TENSOR_ERROR_FORMAT, "%s: not a usable .npy file: %s",
               name, what);
  return FALSE;
}

/* Finds `'key':` in the header dict and returns the text after it (spaces skipped). */
static const char *
dict_value (const char *dict, const char *key)
{
  g_autofree char *pat = g_strdup_printf ("'%s':", key);
  const char *p = strstr (dict, pat);

  if (p == NULL)
    {
      g_free (pat);
      pat = g_strdup_printf ("\"%s\":", key);
      p = strstr (dict, pat);
      if (p == NULL)
        return NULL;
    }
  p += strlen (pat);
  while (*p == ' ')
    p++;
  return p;
}

CsTensor *
cs_tensor_from_npy_bytes (const guint8 *data, gsize len, const char *name, GError **error)
{
  static const struct { const char *descr; CsDtype dtype; } descrs[] = {
    { "|b1", CS_DTYPE_B8 }, { "|u1", CS_DTYPE_U8 }, { "|i1", CS_DTYPE_I8 },
    { "<i2", CS_DTYPE_I16 }, { "<i4", CS_DTYPE_I32 }, { "<i8", CS_DTYPE_I64 },
    { "<u8", CS_DTYPE_U64 }, { "<f2", CS_DTYPE_F16 }, { "<f4", CS_DTYPE_F32 },
    { "<f8", CS_DTYPE_F64 }, { "<b1", CS_DTYPE_B8 }, { "<u1", CS_DTYPE_U8 },
    { "<i1", CS_DTYPE_I8 },
  };
  gsize hlen, off;
  g_autofree char *dict = NULL;
  const char *p;
  CsDtype dtype = CS_DTYPE_F32;
  gboolean found = FALSE;
  int64_t shape[CS_MAX_DIMS];
  guint rank = 0;
  CsTensor *t;

  if (len < 10 || memcmp (data, "\x93NUMPY", 6) != 0)
    return fmt_error (error, name, "bad magic (expected \\x93NUMPY)"), NULL;
  if (data[6] == 1)
    {
      hlen = data[8] | ((gsize) data[9] << 8);
      off = 10;
    }
  else if (data[6] == 2 || data[6] == 3)
    {
      if (len < 12)
        return fmt_error (error, name, "truncated header"), NULL;
      hlen = data[8] | ((gsize) data[9] << 8) | ((gsize) data[10] << 16) | ((gsize) data[11] << 24);
      off = 12;
    }
  else
    return fmt_error (error, name, "unknown format version"), NULL;
  if (hlen > len - off)
    return fmt_error (error, name, "truncated header"), NULL;
  dict = g_strndup ((const char *) data + off, hlen);
  off += hlen;

  p = dict_value (dict, "descr");
  if (p == NULL || (*p != '\'' && *p != '"'))
    return fmt_error (error, name, "no 'descr' in the header"), NULL;
  for (gsize i = 0; i < G_N_ELEMENTS (descrs); i++)
    if (strncmp (p + 1, descrs[i].descr, 3) == 0 && (p[4] == '\'' || p[4] == '"'))
      {
        dtype = descrs[i].dtype;
        found = TRUE;
      }
  if (!found)
    {
      g_autofree char *msg = NULL;
      const char *end = strpbrk (p + 1, "'\"");

      msg = g_strdup_printf ("unsupported dtype descr %.*s (little-endian bool, int, uint8, "
                             "uint64, f2, f4, f8 only)", end ? (int) (end - p + 1) : 8, p);
      return fmt_error (error, name, msg), NULL;
    }

  p = dict_value (dict, "fortran_order");
  if (p == NULL)
    return fmt_error (error, name, "no 'fortran_order' in the header"), NULL;
  if (strncmp (p, "True", 4) == 0)
    return fmt_error (error, name, "Fortran-order arrays are not supported"), NULL;

  p = dict_value (dict, "shape");
  if (p == NULL || *p != '(')
    return fmt_error (error, name, "no 'shape' tuple in the header"), NULL;
  p++;
  for (;;)
    {
      char *end;
      gint64 v;

      while (*p == ' ' || *p == ',')
        p++;
      if (*p == ')')
        break;
      errno = 0;
      v = g_ascii_strtoll (p, &end, 10);
      if (end == p || errno != 0 || v < 0)
        return fmt_error (error, name, "bad extent in 'shape'"), NULL;
      if (rank >= CS_MAX_DIMS)
        return fmt_error (error, name, "too many dimensions"), NULL;
      shape[rank++] = v;
      p = end;
    }

  t = cs_tensor_new (dtype, shape, rank, error);
  if (t == NULL)
    return NULL;
  if (len - off != cs_tensor_nbytes (t))
    {
      g_autofree char *msg = g_strdup_printf ("data is %" G_GSIZE_FORMAT " bytes, the header "
                                              "promises %" G_GSIZE_FORMAT, len - off,
                                              cs_tensor_nbytes (t));
      cs_tensor_unref (t);
      return fmt_error (error, name, msg), NULL;
    }
  memcpy (t->data, data + off, cs_tensor_nbytes (t));
  if (dtype == CS_DTYPE_B8)
    for (int64_t i = 0; i < t->numel; i++)
      ((guint8 *) t->data)[i] = ((guint8 *) t->data)[i] != 0;
  return t;
}

CsTensor *
cs_tensor_load_npy (const char *path, GError **error)
{
  g_autofree char *contents = NULL;
  g_autoptr (GError) local = NULL;
  gsize len;

  if (!g_file_get_contents (path, &contents, &len, &local))
    {
      g_set_error (error, CS_TENSOR_ERROR, CS_TENSOR_ERROR_IO, "%s", local->message);
      return NULL;
    }
  return cs_tensor_from_npy_bytes ((const guint8 *) contents, len, path, error);
}
