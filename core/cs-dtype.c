/* cs-dtype.c: Thunder dtypes, devices and shapes (thunder/core/dtypes.py, devices.py). */
#include "cs-config.h"

#include "cs-dtype.h"

#include <stdio.h>
#include <string.h>

typedef struct
{
  const char  *short_name;  /* as printed in type strings: "bf16" */
  const char  *long_name;   /* as printed as a value: dtypes.<long_name> */
  guint        bits;        /* storage bits per element (fp4 x2 packs two values in 8 bits) */
  CsDtypeKind  kind;        /* bool, int, float or complex */
} DtypeInfo;

static const DtypeInfo dtype_info[CS_N_DTYPES] = {
  [CS_DTYPE_B8]           = { "b8",           "bool8",            8,   CS_DTYPE_KIND_BOOL },
  [CS_DTYPE_U8]           = { "ui8",          "uint8",            8,   CS_DTYPE_KIND_INT },
  [CS_DTYPE_U64]          = { "ui64",         "uint64",           64,  CS_DTYPE_KIND_INT },
  [CS_DTYPE_I8]           = { "i8",           "int8",             8,   CS_DTYPE_KIND_INT },
  [CS_DTYPE_I16]          = { "i16",          "int16",            16,  CS_DTYPE_KIND_INT },
  [CS_DTYPE_I32]          = { "i32",          "int32",            32,  CS_DTYPE_KIND_INT },
  [CS_DTYPE_I64]          = { "i64",          "int64",            64,  CS_DTYPE_KIND_INT },
  [CS_DTYPE_BF16]         = { "bf16",         "bfloat16",         16,  CS_DTYPE_KIND_FLOAT },
  [CS_DTYPE_F16]          = { "f16",          "float16",          16,  CS_DTYPE_KIND_FLOAT },
  [CS_DTYPE_F32]          = { "f32",          "float32",          32,  CS_DTYPE_KIND_FLOAT },
  [CS_DTYPE_F64]          = { "f64",          "float64",          64,  CS_DTYPE_KIND_FLOAT },
  [CS_DTYPE_F8_E5M2]      = { "f8_e5m2",      "float8_e5m2",      8,   CS_DTYPE_KIND_FLOAT },
  [CS_DTYPE_F8_E5M2FNUZ]  = { "f8_e5m2fnuz",  "float8_e5m2fnuz",  8,   CS_DTYPE_KIND_FLOAT },
  [CS_DTYPE_F8_E4M3FN]    = { "f8_e4m3fn",    "float8_e4m3fn",    8,   CS_DTYPE_KIND_FLOAT },
  [CS_DTYPE_F8_E4M3FNUZ]  = { "f8_e4m3fnuz",  "float8_e4m3fnuz",  8,   CS_DTYPE_KIND_FLOAT },
  [CS_DTYPE_F8_E8M0FNU]   = { "f8_e8m0fnu",   "float8_e8m0fnu",   8,   CS_DTYPE_KIND_FLOAT },
  [CS_DTYPE_F4_E2M1FN_X2] = { "f4_e2m1fn_x2", "float4_e2m1fn_x2", 8,   CS_DTYPE_KIND_FLOAT },
  [CS_DTYPE_C32]          = { "c32",          "complex32",        32,  CS_DTYPE_KIND_COMPLEX },
  [CS_DTYPE_C64]          = { "c64",          "complex64",        64,  CS_DTYPE_KIND_COMPLEX },
  [CS_DTYPE_C128]         = { "c128",         "complex128",       128, CS_DTYPE_KIND_COMPLEX },
};

/**
 * cs_dtype_short_name:
 * @dtype: a dtype
 *
 * The short name Thunder prints in type strings ("bf16", "f32", "b8").
 * Source: thunder/core/dtypes.py `shortname`.
 * Returns: (transfer none): a static string
 */
const char *
cs_dtype_short_name (CsDtype dtype)
{
  g_return_val_if_fail (dtype < CS_N_DTYPES, "?");
  return dtype_info[dtype].short_name;
}

/**
 * cs_dtype_long_name:
 * @dtype: a dtype
 *
 * The attribute name in `thunder.core.dtypes` ("bfloat16"), printed as `dtypes.bfloat16`.
 * Returns: (transfer none): a static string
 */
const char *
cs_dtype_long_name (CsDtype dtype)
{
  g_return_val_if_fail (dtype < CS_N_DTYPES, "?");
  return dtype_info[dtype].long_name;
}

/**
 * cs_dtype_from_short:
 * @name: text holding a short name ("bf16"); need not be NUL-terminated
 * @len: its length in bytes
 * @out: (out): the dtype
 *
 * Returns: %TRUE if @name is exactly one of Thunder's short names
 */
gboolean
cs_dtype_from_short (const char *name, gsize len, CsDtype *out)
{
  for (guint i = 0; i < CS_N_DTYPES; i++)
    {
      const char *s = dtype_info[i].short_name;
      if (strlen (s) == len && memcmp (s, name, len) == 0)
        {
          *out = (CsDtype) i;
          return TRUE;
        }
    }
  return FALSE;
}

/**
 * cs_dtype_from_long:
 * @name: text such as "bfloat16" or "float32_" (weak: trailing underscore); not NUL-terminated
 * @len: its length in bytes
 * @out: (out): the dtype
 * @weak: (out) (optional): %TRUE for the weak variant
 *
 * Only the exact attribute names of thunder.core.dtypes are accepted.
 * Returns: %TRUE if @name names a Thunder dtype
 */
gboolean
cs_dtype_from_long (const char *name, gsize len, CsDtype *out, gboolean *weak)
{
  gboolean is_weak = FALSE;

  if (len > 0 && name[len - 1] == '_')
    {
      is_weak = TRUE;
      len--;
    }
  for (guint i = 0; i < CS_N_DTYPES; i++)
    {
      const char *s = dtype_info[i].long_name;
      if (strlen (s) == len && memcmp (s, name, len) == 0)
        {
          *out = (CsDtype) i;
          if (weak)
            *weak = is_weak;
          return TRUE;
        }
    }
  return FALSE;
}

/**
 * cs_dtype_size_bytes:
 * @dtype: a dtype
 *
 * Bytes of storage per element; the packed fp4 x2 type counts one byte per pair.
 * Returns: bytes
 */
gsize
cs_dtype_size_bytes (CsDtype dtype)
{
  g_return_val_if_fail (dtype < CS_N_DTYPES, 0);
  return dtype_info[dtype].bits / 8;
}

/** cs_dtype_bits: storage bits per element. */
guint
cs_dtype_bits (CsDtype dtype)
{
  g_return_val_if_fail (dtype < CS_N_DTYPES, 0);
  return dtype_info[dtype].bits;
}

/** cs_dtype_kind: bool, int, float or complex. */
CsDtypeKind
cs_dtype_kind (CsDtype dtype)
{
  g_return_val_if_fail (dtype < CS_N_DTYPES, CS_DTYPE_KIND_FLOAT);
  return dtype_info[dtype].kind;
}

/** cs_dtype_is_float: %TRUE for real floating dtypes (bf16, f16, f32, f64, fp8, fp4). */
gboolean
cs_dtype_is_float (CsDtype dtype)
{
  return cs_dtype_kind (dtype) == CS_DTYPE_KIND_FLOAT;
}

/** cs_dtype_is_inexact: floats and complex (Thunder's `inexact_dtypes`). */
gboolean
cs_dtype_is_inexact (CsDtype dtype)
{
  CsDtypeKind k = cs_dtype_kind (dtype);
  return k == CS_DTYPE_KIND_FLOAT || k == CS_DTYPE_KIND_COMPLEX;
}

/** cs_dtype_is_exact: bools and integers (Thunder's `exact_dtypes`). */
gboolean
cs_dtype_is_exact (CsDtype dtype)
{
  return !cs_dtype_is_inexact (dtype);
}

/**
 * cs_dtype_is_low_precision:
 * @dtype: a dtype
 *
 * Thunder's `low_precision_dtypes`: floats of at most 2 bytes (bf16, f16, fp8, fp4) and
 * complex32.  These are the dtypes the arithmetic prims refuse, so math on them is upcast.
 * Returns: %TRUE for a low-precision dtype
 */
gboolean
cs_dtype_is_low_precision (CsDtype dtype)
{
  if (dtype == CS_DTYPE_C32)
    return TRUE;
  return cs_dtype_is_float (dtype) && dtype_info[dtype].bits <= 16;
}

/** cs_dtype_is_fp8: the float8 and float4 variants (no upcast computation dtype in Thunder). */
gboolean
cs_dtype_is_fp8 (CsDtype dtype)
{
  return dtype >= CS_DTYPE_F8_E5M2 && dtype <= CS_DTYPE_F4_E2M1FN_X2;
}

/** cs_pytype_name: "bool", "int", "float", "complex" (printed bare as dtype arguments). */
const char *
cs_pytype_name (CsPyType t)
{
  switch (t)
    {
    case CS_PYTYPE_BOOL: return "bool";
    case CS_PYTYPE_INT: return "int";
    case CS_PYTYPE_FLOAT: return "float";
    case CS_PYTYPE_COMPLEX: return "complex";
    case CS_PYTYPE_NONE:
    default: return NULL;
    }
}

/**
 * cs_pytype_dtype:
 * @t: a Python number type
 *
 * The (weak) dtype Thunder aliases it to: bool -> bool8_, int -> int64_, float -> float32_,
 * complex -> complex64_ (thunder/core/dtypes.py).
 * Returns: the strong dtype of that weak alias
 */
CsDtype
cs_pytype_dtype (CsPyType t)
{
  switch (t)
    {
    case CS_PYTYPE_BOOL: return CS_DTYPE_B8;
    case CS_PYTYPE_INT: return CS_DTYPE_I64;
    case CS_PYTYPE_COMPLEX: return CS_DTYPE_C64;
    case CS_PYTYPE_FLOAT:
    case CS_PYTYPE_NONE:
    default: return CS_DTYPE_F32;
    }
}

/**
 * cs_device_parse:
 * @text: "cpu", "meta" or "cuda:N" (not NUL-terminated); plain "cuda" means cuda:0
 * @len: bytes
 * @out: (out): the device
 *
 * Source: thunder/core/devices.py device strings.
 * Returns: %TRUE on success
 */
gboolean
cs_device_parse (const char *text, gsize len, CsDevice *out)
{
  if (len == 3 && memcmp (text, "cpu", 3) == 0)
    {
      *out = (CsDevice) { CS_DEVICE_CPU, 0 };
      return TRUE;
    }
  if (len == 4 && memcmp (text, "meta", 4) == 0)
    {
      *out = (CsDevice) { CS_DEVICE_META, 0 };
      return TRUE;
    }
  if (len >= 4 && memcmp (text, "cuda", 4) == 0)
    {
      int idx = 0;
      if (len == 4)
        {
          *out = (CsDevice) { CS_DEVICE_CUDA, 0 };
          return TRUE;
        }
      if (text[4] != ':' || len == 5 || len > 5 + 6)
        return FALSE;
      for (gsize i = 5; i < len; i++)
        {
          if (text[i] < '0' || text[i] > '9')
            return FALSE;
          idx = idx * 10 + (text[i] - '0');
        }
      *out = (CsDevice) { CS_DEVICE_CUDA, idx };
      return TRUE;
    }
  return FALSE;
}

/** cs_device_to_string: "cpu", "meta", "cuda:0".  Returns: (transfer full) */
char *
cs_device_to_string (const CsDevice *dev)
{
  switch (dev->type)
    {
    case CS_DEVICE_CPU: return g_strdup ("cpu");
    case CS_DEVICE_META: return g_strdup ("meta");
    case CS_DEVICE_CUDA:
    default: return g_strdup_printf ("cuda:%d", dev->index);
    }
}

/** cs_device_equal: same type and index. */
gboolean
cs_device_equal (const CsDevice *a, const CsDevice *b)
{
  return a->type == b->type && a->index == b->index;
}

/**
 * cs_shape_numel:
 * @shape: extents, outermost first (a negative extent, i.e. symbolic, counts as 1)
 * @rank: number of dims
 *
 * Returns: the element count; 1 for rank 0; G_MAXINT64 on overflow
 */
int64_t
cs_shape_numel (const int64_t *shape, guint rank)
{
  int64_t n = 1;

  for (guint i = 0; i < rank; i++)
    {
      int64_t d = shape[i] < 0 ? 1 : shape[i];
      if (d != 0 && n > G_MAXINT64 / d)
        return G_MAXINT64;
      n *= d;
    }
  return n;
}
