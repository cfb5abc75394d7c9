/* cs-dtype.h: Thunder dtypes, devices and shapes.
 *
 * Mirrors thunder/core/dtypes.py and thunder/core/devices.py (reference/thunder-traces.md 1.3, 2.1).
 */
#pragma once

#include <glib.h>
#include <stdint.h>

G_BEGIN_DECLS

/* Maximum tensor rank castscope handles (nvFuser's limit is 8; we allow more for shape ops). */
#define CS_MAX_DIMS 16

/**
 * CsDtype:
 *
 * Every dtype Thunder knows, strong form.  Weakness is a separate flag (#CsDtypeRef.weak):
 * Thunder's weak and strong variants share one printed short name.
 */
typedef enum
{
  CS_DTYPE_B8,           /* bool8, "b8" */
  CS_DTYPE_U8,           /* uint8, "ui8" */
  CS_DTYPE_U64,          /* uint64, "ui64" (partly supported by Thunder) */
  CS_DTYPE_I8,           /* int8, "i8" */
  CS_DTYPE_I16,          /* int16, "i16" */
  CS_DTYPE_I32,          /* int32, "i32" */
  CS_DTYPE_I64,          /* int64, "i64" */
  CS_DTYPE_BF16,         /* bfloat16, "bf16" */
  CS_DTYPE_F16,          /* float16, "f16" */
  CS_DTYPE_F32,          /* float32, "f32" */
  CS_DTYPE_F64,          /* float64, "f64" */
  CS_DTYPE_F8_E5M2,      /* float8_e5m2, "f8_e5m2" */
  CS_DTYPE_F8_E5M2FNUZ,  /* float8_e5m2fnuz, "f8_e5m2fnuz" */
  CS_DTYPE_F8_E4M3FN,    /* float8_e4m3fn, "f8_e4m3fn" */
  CS_DTYPE_F8_E4M3FNUZ,  /* float8_e4m3fnuz, "f8_e4m3fnuz" */
  CS_DTYPE_F8_E8M0FNU,   /* float8_e8m0fnu, "f8_e8m0fnu" */
  CS_DTYPE_F4_E2M1FN_X2, /* float4_e2m1fn_x2, "f4_e2m1fn_x2" (two values per byte) */
  CS_DTYPE_C32,          /* complex32, "c32" */
  CS_DTYPE_C64,          /* complex64, "c64" */
  CS_DTYPE_C128,         /* complex128, "c128" */
  CS_N_DTYPES
} CsDtype;

/** CsDtypeKind: the coarse class of a dtype, as Thunder groups them. */
typedef enum
{
  CS_DTYPE_KIND_BOOL,
  CS_DTYPE_KIND_INT,     /* signed and unsigned integers */
  CS_DTYPE_KIND_FLOAT,
  CS_DTYPE_KIND_COMPLEX,
} CsDtypeKind;

/**
 * CsPyType:
 *
 * A Python number type used where Thunder takes a dtype (`float`, `int`, `bool`, `complex`,
 * printed bare).  They alias the weak dtypes float32_, int64_, bool8_, complex64_.
 */
typedef enum
{
  CS_PYTYPE_NONE = 0,    /* not a Python number type */
  CS_PYTYPE_BOOL,
  CS_PYTYPE_INT,
  CS_PYTYPE_FLOAT,
  CS_PYTYPE_COMPLEX,
} CsPyType;

/** CsDtypeRef: a dtype as a value (an argument such as `dtypes.float32_` or `float`). */
typedef struct
{
  CsDtype  dtype;        /* the strong dtype */
  guint8   weak;         /* 1 for Thunder's weak variant (`dtypes.float32_`) */
  guint8   pytype;       /* a CsPyType when printed as a bare Python type, else 0 */
} CsDtypeRef;

/** CsDeviceType: where a tensor lives. */
typedef enum
{
  CS_DEVICE_CPU,
  CS_DEVICE_CUDA,
  CS_DEVICE_META,
} CsDeviceType;

typedef struct
{
  CsDeviceType type;     /* cpu, cuda or meta */
  int          index;    /* CUDA ordinal; 0 for cpu and meta */
} CsDevice;

const char  *cs_dtype_short_name   (CsDtype dtype);
const char  *cs_dtype_long_name    (CsDtype dtype);
gboolean     cs_dtype_from_short   (const char *name, gsize len, CsDtype *out);
gboolean     cs_dtype_from_long    (const char *name, gsize len, CsDtype *out, gboolean *weak);
gsize        cs_dtype_size_bytes   (CsDtype dtype);
guint        cs_dtype_bits         (CsDtype dtype);
CsDtypeKind  cs_dtype_kind         (CsDtype dtype);
gboolean     cs_dtype_is_float     (CsDtype dtype);
gboolean     cs_dtype_is_inexact   (CsDtype dtype);
gboolean     cs_dtype_is_exact     (CsDtype dtype);
gboolean     cs_dtype_is_low_precision (CsDtype dtype);
gboolean     cs_dtype_is_fp8       (CsDtype dtype);
const char  *cs_pytype_name        (CsPyType t);
CsDtype      cs_pytype_dtype       (CsPyType t);

gboolean     cs_device_parse       (const char *text, gsize len, CsDevice *out);
char        *cs_device_to_string   (const CsDevice *dev);
gboolean     cs_device_equal       (const CsDevice *a, const CsDevice *b);

/** Number of elements of a shape; 1 for rank 0.  Saturates at G_MAXINT64 on overflow. */
int64_t      cs_shape_numel        (const int64_t *shape, guint rank);

G_END_DECLS
