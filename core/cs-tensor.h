/* cs-tensor.h: host tensors for the CPU reference executor, test data and .npy files.
 *
 * A #CsTensor is a reference-counted, contiguous, C-order (row-major, outermost dimension
 * first) array of one dtype.  Storage per dtype: b8 and ui8 as uint8 (bools are 0 or 1), i8,
 * i16, i32, i64, ui64 as the matching C integer, bf16 and f16 as uint16 bit patterns, f32 as
 * float, f64 as double, the fp8 formats as their uint8 bit patterns (cs-half.h).  Complex and
 * fp4 dtypes are not supported (CS_TENSOR_ERROR_DTYPE).
 */
#pragma once

#include <glib.h>
#include <stdint.h>

#include "cs-dtype.h"

G_BEGIN_DECLS

#define CS_TENSOR_ERROR (cs_tensor_error_quark ())
/** cs_tensor_error_quark: the #GQuark of #CS_TENSOR_ERROR (codes: #CsTensorError). */
GQuark cs_tensor_error_quark (void);

typedef enum
{
  CS_TENSOR_ERROR_DTYPE,   /* a dtype host tensors do not hold (complex, fp4, f8_e8m0fnu) */
  CS_TENSOR_ERROR_SHAPE,   /* negative extent, rank over CS_MAX_DIMS, mismatched shapes */
  CS_TENSOR_ERROR_SIZE,    /* more than CS_TENSOR_MAX_BYTES */
  CS_TENSOR_ERROR_IO,      /* a file could not be read or written */
  CS_TENSOR_ERROR_FORMAT,  /* a malformed or unsupported .npy file */
} CsTensorError;

/* Largest tensor castscope allocates on the host (bytes): a clear error past it, never an
 * abort inside the allocator. */
#define CS_TENSOR_MAX_BYTES ((gsize) 32 << 30)

typedef struct
{
  gint      ref_count;          /* atomic */
  CsDtype   dtype;              /* element dtype */
  guint     rank;               /* number of dimensions, <= CS_MAX_DIMS */
  int64_t   shape[CS_MAX_DIMS]; /* extents, outermost first; entries past rank are 1 */
  int64_t   numel;              /* product of shape (1 for rank 0) */
  gsize     elem_bytes;         /* bytes per element in storage */
  gpointer  data;               /* numel * elem_bytes bytes, C order, 64-byte aligned */
} CsTensor;

/** cs_tensor_supports_dtype: TRUE when host tensors can hold @dtype. */
gboolean    cs_tensor_supports_dtype (CsDtype dtype);

/**
 * cs_tensor_new:
 * @dtype: element dtype
 * @shape: (array length=rank) (nullable): extents, outermost first (NULL when @rank is 0)
 * @rank: number of dimensions
 * @error: return location for a #CS_TENSOR_ERROR
 *
 * A zero-filled tensor.  Errors: CS_TENSOR_ERROR_DTYPE, CS_TENSOR_ERROR_SHAPE (negative
 * extent, rank > CS_MAX_DIMS), CS_TENSOR_ERROR_SIZE (over CS_TENSOR_MAX_BYTES).
 * Returns: (transfer full): the tensor, or NULL with @error set
 */
CsTensor   *cs_tensor_new            (CsDtype        dtype,
                                      const int64_t *shape,
                                      guint          rank,
                                      GError       **error);
/** cs_tensor_ref: takes a reference (atomic; @t must not be NULL).
 * Returns: (transfer full): @t */
CsTensor   *cs_tensor_ref            (CsTensor      *t);
/** cs_tensor_unref: drops a reference (atomic); frees @t and its data at zero; NULL is allowed. */
void        cs_tensor_unref          (CsTensor      *t);
/** cs_tensor_copy: a deep copy.  Returns: (transfer full): never NULL */
CsTensor   *cs_tensor_copy           (const CsTensor *t);
/** cs_tensor_nbytes: storage size in bytes. */
gsize       cs_tensor_nbytes         (const CsTensor *t);

/**
 * cs_tensor_get_f64:
 * @t: a tensor
 * @i: flat element index, 0 <= i < numel
 *
 * The element as a double (exact for every dtype except int64/uint64 values past 2^53).
 * Returns: the value
 */
double      cs_tensor_get_f64        (const CsTensor *t, int64_t i);
/**
 * cs_tensor_set_f64:
 * Stores @v converted to the tensor's dtype: floats round to nearest even (overflow to inf,
 * or NaN for e4m3fn), integers truncate toward zero and wrap modulo 2^bits like a C cast
 * of an in-range value (NaN and inf store 0), bools store v != 0.
 */
void        cs_tensor_set_f64        (CsTensor      *t,
                                      int64_t        i,
                                      double         v);
/**
 * cs_tensor_dup_f64:
 * Returns: (transfer full): numel doubles holding every element (the "f64 view"); g_free it
 */
double     *cs_tensor_dup_f64        (const CsTensor *t);
/**
 * cs_tensor_new_from_f64:
 * @values: (array): numel values, C order
 *
 * A tensor of @dtype holding @values, each converted as cs_tensor_set_f64() does.
 * Returns: (transfer full): the tensor, or NULL with @error set (errors of cs_tensor_new())
 */
CsTensor   *cs_tensor_new_from_f64   (CsDtype        dtype,
                                      const int64_t *shape,
                                      guint          rank,
                                      const double  *values,
                                      GError       **error);
/**
 * cs_tensor_convert:
 * Converts every element to @dtype (rounding as cs_tensor_set_f64()).
 * Returns: (transfer full): a new tensor, or NULL with @error set (unsupported dtype)
 */
CsTensor   *cs_tensor_convert        (const CsTensor *t, CsDtype dtype, GError **error);
/** cs_tensor_same_shape: TRUE when ranks and extents are equal. */
gboolean    cs_tensor_same_shape     (const CsTensor *a, const int64_t *shape, guint rank);
/** cs_tensor_type_string: "bf16[64, 128]" (caller frees). */
char       *cs_tensor_type_string    (const CsTensor *t);

/* Error of a computed tensor against a reference (cs_tensor_measure_error()). */
typedef struct
{
  double  max_abs;      /* max |a - ref| */
  double  max_rel;      /* max |a - ref| / max(|ref|, 1e-3 * max|ref|) */
  double  rel_l2;       /* ||a - ref||_2 / ||ref||_2 (normwise relative error) */
  gint64  n_nonfinite;  /* NaN or inf elements of a */
  gint64  n_mismatch;   /* elements where a or ref is NaN, or exactly one of them is inf, or
                         * both are inf of opposite signs */
} CsTensorErrorStats;

/**
 * cs_tensor_measure_error:
 * @a: the computed tensor
 * @ref: the reference (truth), as many elements as @a
 * @stats: (out caller-allocates): the errors
 *
 * Measures @a against @ref element by element (flat order).  Non-finite values are never
 * skipped: an element where @a is inf and @ref finite (or the reverse) makes every error
 * +inf; a NaN in @a or @ref makes every error NaN, so a tolerance test written
 * `err <= tol` fails.  Infinities of the same sign in both agree (error 0 for that element).
 */
void        cs_tensor_measure_error  (const CsTensor     *a,
                                      const CsTensor     *ref,
                                      CsTensorErrorStats *stats);

/**
 * cs_tensor_fill_random:
 * @t: the tensor to fill
 * @seed: RNG seed (the same seed, dtype and shape give the same values on every machine:
 *   GLib's Mersenne Twister, GRand, seeded with the two 32-bit halves of @seed)
 * @scale: float standard deviation
 * @int_bound: exclusive upper bound for integer dtypes (> 0)
 *
 * Fills @t with documented distributions:
 * floats: normal(0, 1) * @scale (Box-Muller on GRand doubles), rounded to the dtype;
 * integers: uniform in [0, @int_bound) (indices for take/embedding/gather need a bound);
 * uint8 additionally clamps the bound to 256, int8 to 128;
 * bools: a fair coin.
 */
void        cs_tensor_fill_random    (CsTensor      *t,
                                      guint64        seed,
                                      double         scale,
                                      int64_t        int_bound);
/**
 * cs_tensor_fill_uniform:
 * Fills @t with uniform values in [@lo, @hi) from GRand seeded with @seed, rounded to the dtype
 * (the CPU reference of prims.uniform; not bit-identical to CUDA's Philox stream).
 */
void        cs_tensor_fill_uniform   (CsTensor      *t,
                                      guint64        seed,
                                      double         lo,
                                      double         hi);

/**
 * cs_tensor_save_npy:
 * @t: the tensor
 * @path: file to write
 * @error: return location for a #CS_TENSOR_ERROR
 *
 * Writes NumPy .npy format 1.0: little endian, C order.  Dtypes map to '|b1', '|u1', '|i1',
 * '<i2', '<i4', '<i8', '<u8', '<f2', '<f4', '<f8'.  bf16 and fp8 have no NumPy dtype: they are
 * saved as '<f4' (float32), which holds every bf16/fp8 value exactly, so NumPy reads the true
 * values and cs_tensor_load_npy() followed by cs_tensor_convert() to bf16 gives the same bits.
 * Errors: CS_TENSOR_ERROR_IO.
 * Returns: TRUE on success
 */
gboolean    cs_tensor_save_npy       (const CsTensor *t, const char *path, GError **error);
/** cs_tensor_to_npy_bytes: the .npy file contents cs_tensor_save_npy() writes. */
GBytes     *cs_tensor_to_npy_bytes   (const CsTensor *t);
/**
 * cs_tensor_load_npy:
 * Reads a .npy file (format 1.0, 2.0 or 3.0; little endian or single-byte; C order) with one of
 * the dtypes cs_tensor_save_npy() writes.  Errors: CS_TENSOR_ERROR_IO, CS_TENSOR_ERROR_FORMAT
 * with the reason (bad magic, Fortran order, big endian, unsupported descr, truncated data),
 * CS_TENSOR_ERROR_SIZE.
 * Returns: (transfer full): the tensor, or NULL with @error set
 */
CsTensor   *cs_tensor_load_npy       (const char *path, GError **error);
/** cs_tensor_from_npy_bytes: as cs_tensor_load_npy() on in-memory contents; @name for messages. */
CsTensor   *cs_tensor_from_npy_bytes (const guint8 *data, gsize len, const char *name,
                                      GError **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (CsTensor, cs_tensor_unref)

G_END_DECLS
