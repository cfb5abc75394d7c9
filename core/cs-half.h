/* cs-half.h: conversions between f32/f64 and the narrow float formats (bf16, f16, fp8).
 *
 * Every narrowing conversion rounds to nearest, ties to even, as CUDA's __float2bfloat16_rn /
 * __float2half_rn and PyTorch's c10::BFloat16 / c10::Half do; subnormals are kept (no flush to
 * zero).  Overflow: bf16, f16 and f8_e5m2 give +-inf; f8_e4m3fn (no inf) gives NaN, as
 * PyTorch's c10::Float8_e4m3fn does; the fnuz variants give their single NaN 0x80.
 * NaN: bf16 0x7FC0, f16 0x7E00 (sign kept), fp8 the format's NaN.
 *
 * Bit layouts (sign / exponent / mantissa, exponent bias):
 *   bf16 1/8/7 bias 127; f16 1/5/10 bias 15; e4m3fn 1/4/3 bias 7 (max 448, NaN S.1111.111);
 *   e5m2 1/5/2 bias 15 (IEEE-like, max 57344); e4m3fnuz bias 8 (max 240); e5m2fnuz bias 16
 *   (max 57344); fnuz formats have no -0 and NaN = 0x80.
 * Source: IEEE 754-2008 binary16; the OCP 8-bit floating point spec (E4M3/E5M2);
 * c10/util/BFloat16.h, Half.h, Float8_*.h in PyTorch for NaN and overflow choices.
 */
#pragma once

#include <glib.h>

#include "cs-dtype.h"

G_BEGIN_DECLS

/** cs_half_bf16_from_f32: f32 -> bf16 bits, round to nearest even.  Returns: the bits */
guint16  cs_half_bf16_from_f32   (float  x);
/** cs_half_bf16_from_f64: f64 -> bf16 bits, rounded once (no double rounding through f32). */
guint16  cs_half_bf16_from_f64   (double x);
/** cs_half_bf16_to_f32: bf16 bits -> f32 (exact). */
float    cs_half_bf16_to_f32     (guint16 h);
/** cs_half_f16_from_f32: f32 -> IEEE binary16 bits, round to nearest even. */
guint16  cs_half_f16_from_f32    (float  x);
/** cs_half_f16_from_f64: f64 -> binary16 bits, rounded once. */
guint16  cs_half_f16_from_f64    (double x);
/** cs_half_f16_to_f32: binary16 bits -> f32 (exact). */
float    cs_half_f16_to_f32      (guint16 h);

/** cs_half_round_bf16: the f32 nearest to @x that a bf16 can hold (x rounded through bf16). */
float    cs_half_round_bf16      (float  x);
/** cs_half_round_f16: @x rounded through binary16. */
float    cs_half_round_f16       (float  x);

/**
 * cs_half_fp8_supported:
 * @dtype: a dtype
 * Returns: TRUE for the fp8 formats cs_half_fp8_from_f64() handles: f8_e4m3fn, f8_e5m2,
 * f8_e4m3fnuz, f8_e5m2fnuz (not f8_e8m0fnu or fp4)
 */
gboolean cs_half_fp8_supported   (CsDtype dtype);
/**
 * cs_half_fp8_from_f64:
 * @dtype: an fp8 dtype with cs_half_fp8_supported()
 * @x: the value
 *
 * f64 -> fp8 bits, round to nearest even, overflow as described in the file comment.
 * Returns: the byte (0 for an unsupported dtype)
 */
guint8   cs_half_fp8_from_f64    (CsDtype dtype, double x);
/** cs_half_fp8_to_f64: fp8 bits -> f64 (exact); NaN for an unsupported dtype. */
double   cs_half_fp8_to_f64      (CsDtype dtype, guint8 bits);

/* Bulk forms (n elements; src and dst must not overlap). */
/** cs_half_bf16_from_f32_n: @n f32 at @src -> bf16 bits at @dst, as cs_half_bf16_from_f32(). */
void     cs_half_bf16_from_f32_n (const float *src, guint16 *dst, gsize n);
/** cs_half_bf16_to_f32_n: @n bf16 bits at @src -> f32 at @dst, as cs_half_bf16_to_f32(). */
void     cs_half_bf16_to_f32_n   (const guint16 *src, float *dst, gsize n);
/** cs_half_f16_from_f32_n: @n f32 at @src -> binary16 bits at @dst, as cs_half_f16_from_f32(). */
void     cs_half_f16_from_f32_n  (const float *src, guint16 *dst, gsize n);
/** cs_half_f16_to_f32_n: @n binary16 bits at @src -> f32 at @dst, as cs_half_f16_to_f32(). */
void     cs_half_f16_to_f32_n    (const guint16 *src, float *dst, gsize n);

G_END_DECLS
