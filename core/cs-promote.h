/* cs-promote.h: Thunder's elementwise type promotion.
 *
 * Mirrors thunder/core/utils.py (`elementwise_type_promotion`, the exact and inexact promotion
 * lattices, `ELEMENTWISE_TYPE_PROMOTION_KIND`, `_computation_dtype_map`) and the weak/strong
 * dtype model of thunder/core/dtypes.py; reference/thunder-traces.md sections 2.2 and 2.3.
 *
 * A dtype argument is a #CsDtypeRef:
 * - a tensor gives its strong dtype, except that a 0-d tensor gives the weak variant (Thunder's
 *   `true_dtype` rule), see cs_promote_arg_tensor();
 * - a Python number gives the weak dtype of its Python type with `pytype` set (`bool` = bool8_,
 *   `int` = int64_, `float` = float32_, `complex` = complex64_), see cs_promote_arg_number().
 * A result with `pytype` set means "a Python number type" (Thunder returns `float`, `int` ...);
 * its `dtype` field is the strong dtype a tensor of that type gets.
 */
#pragma once

#include <glib.h>

#include "cs-dtype.h"
#include "cs-ops.h"

G_BEGIN_DECLS

#define CS_PROMOTE_ERROR (cs_promote_error_quark ())
/** cs_promote_error_quark: the #GQuark of #CS_PROMOTE_ERROR (codes: #CsPromoteError). */
GQuark cs_promote_error_quark (void);

typedef enum
{
  CS_PROMOTE_ERROR_EMPTY,      /* no argument to promote */
  CS_PROMOTE_ERROR_NO_COMMON,  /* the lattice has no common dtype (e.g. two different fp8s) */
  CS_PROMOTE_ERROR_KIND,       /* CS_PROMO_NONE or an unknown kind passed as a promotion kind */
} CsPromoteError;

/**
 * cs_promote_arg_tensor:
 * @dtype: the tensor's dtype
 * @rank: the tensor's rank
 *
 * The promotion argument of a tensor: strong @dtype, or its weak variant when @rank is 0
 * (Thunder gives every 0-d TensorProxy a weak `true_dtype`, so it promotes like a Python
 * scalar).  Source: thunder/core/proxies.py TensorProxy.true_dtype.
 * Returns: the argument
 */
CsDtypeRef cs_promote_arg_tensor (CsDtype dtype, guint rank);

/**
 * cs_promote_arg_number:
 * @pytype: the Python type of the number (bool, int, float, complex)
 *
 * The promotion argument of a Python number: the weak dtype its type aliases, with `pytype`
 * set.  Source: thunder/core/dtypes.py `_numbertype_to_dtype_map`.
 * Returns: the argument
 */
CsDtypeRef cs_promote_arg_number (CsPyType pytype);

/**
 * cs_promote_dtypes:
 * @args: (array length=n): the arguments' dtypes (see the file comment)
 * @n: number of arguments, >= 1
 * @out: (out): the promotion dtype
 * @error: return location for a #CS_PROMOTE_ERROR
 *
 * Folds Thunder's promotion lattice over @args, starting from Python `bool`:
 * inexact beats exact; the exact chain is
 * `bool < bool8_ < bool8 < int < int8_ < int16_ < int32_ < int64_ < int8 < int16 < int32 < int64`
 * (a bool tensor with a Python int gives int8_) with uint8 branching off (uint8 with
 * int8/int16 or any weak int gives int16; with a strong int32/int64 that type); the inexact
 * chain is Python `float` < weak floats < strong floats (a weaker dtype never upcasts a stronger
 * one; bf16 with f16 at the same strength gives f32), and complex likewise, a float meeting a
 * complex turning into its complex counterpart (bf16 -> c64, f16 -> c32, f32 -> c64,
 * f64 -> c128) first.  uint64 promotes only with itself and bools/Python ints; an fp8 dtype
 * only with itself or with weaker floats (Thunder's tables have no entry for them; castscope
 * keeps the "weaker never upcasts stronger" rule for them).
 * Errors: CS_PROMOTE_ERROR_EMPTY when @n is 0, CS_PROMOTE_ERROR_NO_COMMON when two
 * arguments have no common dtype (message names both).
 * Source: thunder/core/utils.py `_elementwise_type_promotion`, both lattices.
 * Returns: TRUE on success
 */
gboolean   cs_promote_dtypes      (const CsDtypeRef *args,
                                   guint             n,
                                   CsDtypeRef       *out,
                                   GError          **error);

/**
 * cs_promote_elementwise:
 * @args: (array length=n): the arguments' dtypes
 * @n: number of arguments, >= 1
 * @kind: the op's promotion kind (not CS_PROMO_NONE)
 * @computation: (out) (optional): dtype the math runs in
 * @result: (out) (optional): dtype of the op's result
 * @error: return location for a #CS_PROMOTE_ERROR
 *
 * Thunder's (computation dtype, result dtype) pair for an elementwise op:
 * PRESERVE: (p, p); ALWAYS_BOOL: (p, bool); INT_TO_FLOAT: (float, float) when p is exact
 * (bools included), else DEFAULT; COMPLEX_TO_FLOAT: complex p gives its real dtype as result
 * (c32 computes in c64), else DEFAULT; BOOL_TO_LONG: (int, int) for a bool p, else DEFAULT;
 * NUMBER_TO_INT: when every argument is a Python number and p is a float, (p, int), else
 * DEFAULT; DEFAULT: (cs_promote_computation_dtype (p), p) keeping weakness.  p is the promotion
 * dtype of cs_promote_dtypes().  fp8 dtypes are low precision but are not upcast.
 * Errors: those of cs_promote_dtypes(), CS_PROMOTE_ERROR_KIND for CS_PROMO_NONE.
 * Source: thunder/core/utils.py `elementwise_type_promotion`; reference 2.3.
 * Returns: TRUE on success
 */
gboolean   cs_promote_elementwise (const CsDtypeRef *args,
                                   guint             n,
                                   CsPromoKind       kind,
                                   CsDtypeRef       *computation,
                                   CsDtypeRef       *result,
                                   GError          **error);

/**
 * cs_promote_computation_dtype:
 * @d: a dtype
 *
 * Thunder's `_computation_dtype_map`: bf16 and f16 compute in f32, complex32 in complex64;
 * every other dtype (fp8 included) computes in itself.
 * Source: thunder/core/utils.py `get_computation_dtype`.
 * Returns: the computation dtype
 */
CsDtype    cs_promote_computation_dtype (CsDtype d);

/**
 * cs_promote_dtype_ref_name:
 * @ref: a dtype argument
 *
 * Thunder's spelling of @ref for messages: `float`, `int`, `bfloat16`, `float32_`...
 * Returns: (transfer full): the name
 */
char      *cs_promote_dtype_ref_name (const CsDtypeRef *ref);

G_END_DECLS
