/* cs-ops.c: the op registry (every symbol castscope knows and what it means; see cs-ops.h and
 * the rows of cs-ops-list.h). */
#include "cs-config.h"

#include "cs-ops.h"

#include "cs-dtype.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------------------------ */
/* Formulas of the unary elementwise prims that are not one libm call (thunder/core/prims.py;
 * the values torch computes)                                                                  */

static double ew_neg (double x) { return -x; }
static float ew_negf (float x) { return -x; }
static double ew_reciprocal (double x) { return 1.0 / x; }
static float ew_reciprocalf (float x) { return 1.0f / x; }
static double ew_rsqrt (double x) { return 1.0 / sqrt (x); }
static float ew_rsqrtf (float x) { return 1.0f / sqrtf (x); }
static double ew_round (double x) { return nearbyint (x); }    /* half to even, as torch.round */
static float ew_roundf (float x) { return nearbyintf (x); }
static double ew_sign (double x) { return isnan (x) ? x : (x > 0) - (x < 0); }
static float ew_signf (float x) { return isnan (x) ? x : (float) ((x > 0) - (x < 0)); }
static double ew_signbit (double x) { return signbit (x) ? 1.0 : 0.0; }
static float ew_signbitf (float x) { return signbit (x) ? 1.0f : 0.0f; }
static double ew_isfinite (double x) { return isfinite (x) ? 1.0 : 0.0; }
static float ew_isfinitef (float x) { return isfinite (x) ? 1.0f : 0.0f; }
static double ew_real (double x) { return x; }
static float ew_realf (float x) { return x; }
static double ew_bitwise_not (double x) { return (double) ~(gint64) x; }
static float ew_bitwise_notf (float x) { return (float) ~(gint64) x; }

/* ------------------------------------------------------------------------------------------ */
/* Formulas of the binary and ternary elementwise prims (thunder/core/prims.py; the values
 * torch computes).  Integer formulas take and give integer values held as doubles.            */

static double ew_add (double a, double b) { return a + b; }
static float ew_addf (float a, float b) { return a + b; }
static double ew_sub (double a, double b) { return a - b; }
static float ew_subf (float a, float b) { return a - b; }
static double ew_mul (double a, double b) { return a * b; }
static float ew_mulf (float a, float b) { return a * b; }
static double ew_div (double a, double b) { return a / b; }
static float ew_divf (float a, float b) { return a / b; }

/* prims.div on integers truncates toward zero (C division, Thunder's prim; ltorch's
 * floor_divide decomposes to it plus a correction) */
static gboolean
ew_div_int (double a, double b, double *out)
{
  if (b == 0)
    return FALSE;
  *out = (double) ((gint64) a / (gint64) b);
  return TRUE;
}

/* torch.fmod: the sign of the dividend (C fmod) */
static gboolean
ew_fmod_int (double a, double b, double *out)
{
  if (b == 0)
    return FALSE;
  *out = fmod (a, b);
  return TRUE;
}

/* torch.remainder (Python's %): the sign of the divisor */
static double
ew_remainder (double a, double b)
{
  double r = fmod (a, b);

  if (r != 0 && ((r < 0) != (b < 0)))
    r += b;
  return r;
}
static float ew_remainderf (float a, float b) { return (float) ew_remainder (a, b); }

static gboolean
ew_remainder_int (double a, double b, double *out)
{
  if (b == 0)
    return FALSE;
  *out = ew_remainder (a, b);
  return TRUE;
}

/* torch.maximum / torch.minimum propagate NaN */
static double ew_maximum (double a, double b) { return isnan (a) || isnan (b) ? NAN : (a > b ? a : b); }
static float ew_maximumf (float a, float b) { return (float) ew_maximum (a, b); }
static double ew_minimum (double a, double b) { return isnan (a) || isnan (b) ? NAN : (a < b ? a : b); }
static float ew_minimumf (float a, float b) { return (float) ew_minimum (a, b); }

/* comparisons: 1 or 0, stored as bool (ALWAYS_BOOL) */
static double ew_eq (double a, double b) { return a == b; }
static float ew_eqf (float a, float b) { return a == b; }
static double ew_ne (double a, double b) { return a != b; }
static float ew_nef (float a, float b) { return a != b; }
static double ew_lt (double a, double b) { return a < b; }
static float ew_ltf (float a, float b) { return a < b; }
static double ew_le (double a, double b) { return a <= b; }
static float ew_lef (float a, float b) { return a <= b; }
static double ew_gt (double a, double b) { return a > b; }
static float ew_gtf (float a, float b) { return a > b; }
static double ew_ge (double a, double b) { return a >= b; }
static float ew_gef (float a, float b) { return a >= b; }

/* bitwise ops on two's-complement int64 (bools as 0/1) */
static gboolean
ew_bitwise_and (double a, double b, double *out)
{
  *out = (double) ((gint64) a & (gint64) b);
  return TRUE;
}

static gboolean
ew_bitwise_or (double a, double b, double *out)
{
  *out = (double) ((gint64) a | (gint64) b);
  return TRUE;
}

static gboolean
ew_bitwise_xor (double a, double b, double *out)
{
  *out = (double) ((gint64) a ^ (gint64) b);
  return TRUE;
}

/* a << b: 0 once every bit is shifted out (b < 0 or b >= 64), as torch's kernel */
static gboolean
ew_left_shift (double a, double b, double *out)
{
  *out = (b < 0 || b >= 64) ? 0.0 : (double) ((gint64) ((guint64) (gint64) a << (int) b));
  return TRUE;
}

/* a >> b: arithmetic, the shift clamped to [0, 63] (the sign fills in) */
static gboolean
ew_right_shift (double a, double b, double *out)
{
  *out = (double) ((gint64) a >> (int) CLAMP (b, 0, 63));
  return TRUE;
}

/* where(pred, a, b) selects; lerp(start, end, weight) = start + weight * (end - start) */
static double ew_where (double p, double a, double b) { return p != 0 ? a : b; }
static double ew_lerp (double a, double b, double w) { return a + w * (b - a); }
static float ew_lerpf (float a, float b, float w) { return a + w * (b - a); }

/* ------------------------------------------------------------------------------------------ */
/* The DEF column's helper macros (see cs-ops-list.h)                                          */

/* SCHEMA (ARG (A, TENSOR), ARG (SHAPE, INTS), OPT (BETA, NUMBER, "1.0"), KWOPT (DTYPE, ...)) */
#define SCHEMA(...) \
  .args = (const CsOpArg[]) { __VA_ARGS__ }, \
  .n_args = sizeof ((const CsOpArg[]) { __VA_ARGS__ }) / sizeof (CsOpArg)
#define ARG(nm, kind) { CS_ARG_##nm, CS_ARG_KIND_##kind, FALSE, NULL }
#define OPT(nm, kind, d) { CS_ARG_##nm, CS_ARG_KIND_##kind, FALSE, d }
#define KWOPT(nm, kind, d) { CS_ARG_##nm, CS_ARG_KIND_##kind, TRUE, d }
#define KWARG(nm, kind) { CS_ARG_##nm, CS_ARG_KIND_##kind, TRUE, NULL }
/* the signature ends in *args: more positional arguments than the schema names */
#define VARIADIC .variadic = TRUE
#define UNARY_SCHEMA SCHEMA (ARG (A, OPERAND))
#define BINARY_SCHEMA SCHEMA (ARG (A, OPERAND), ARG (B, OPERAND))

/* A unary prim computed by one libm function and its CUDA namesake (fn, fnf) */
#define EW1_LIBM(fn, fl) \
  UNARY_SCHEMA, \
  .ew1 = &(const CsEwUnary) { fn, fn##f, #fn "f (@)", #fn " (@)", NULL, NULL, (fl) }
/* Float-only libm functions (the transcendentals) */
#define EW1_MATH(fn) EW1_LIBM (fn, CS_EW_FLOAT_ONLY)
/* A unary prim with its own formula: f64 and f32 functions and CUDA expressions */
#define EW1(f64_, f32_, cf_, cd_, ci_, cb_, fl) \
  UNARY_SCHEMA, \
  .ew1 = &(const CsEwUnary) { f64_, f32_, cf_, cd_, ci_, cb_, (fl) }
/* A binary prim: f64, f32 and integer functions, CUDA expressions over float, double, long
 * long and bool (see CsEwBinary) */
#define EW2(f64_, f32_, i64_, cf_, cd_, ci_, cb_, fl) \
  BINARY_SCHEMA, \
  .ew2 = &(const CsEwBinary) { f64_, f32_, i64_, cf_, cd_, ci_, cb_, (fl) }
/* A C operator on every type: arithmetic in the result's C type, a bool result as is */
#define EW2_OP(nm, op, i64_) \
  EW2 (ew_##nm, ew_##nm##f, i64_, "(@t) (@0) " op " (@t) (@1)", "(@t) (@0) " op " (@t) (@1)", \
       "(@t) (@0) " op " (@t) (@1)", "(@0) " op " (@1)", 0)
/* A comparison: computed in the operands' C type, a bool result */
#define EW2_CMP(nm, op) \
  EW2 (ew_##nm, ew_##nm##f, NULL, "(@0) " op " (@1)", "(@0) " op " (@1)", "(@0) " op " (@1)", \
       "(@0) " op " (@1)", CS_EW_OPERAND_CTYPE)
/* A bitwise operator: integers and bools only */
#define EW2_BITWISE(fn, op) \
  EW2 (NULL, NULL, fn, NULL, NULL, "(@t) (@0) " op " (@t) (@1)", "(@0) " op " (@1)", CS_EW_INT_ONLY)
/* A float function of libm and CUDA (fn, fnf), float values only in CUDA */
#define EW2_LIBM(fn, i64_, fl) \
  EW2 (fn, fn##f, i64_, #fn "f (@0, @1)", #fn " (@0, @1)", NULL, NULL, (fl))
/* A ternary prim: f64 and f32 functions, CUDA expressions (see CsEwTernary) */
#define EW3(args_, f64_, f32_, cf_, cd_, ci_, cb_, fl) \
  args_, \
  .ew3 = &(const CsEwTernary) { f64_, f32_, cf_, cd_, ci_, cb_, (fl) }
/* An ltorch (or clang) op that decomposes to one prim under its own promotion kind */
#define LOWERS_TO(prim) .lowers_to = CS_OP_##prim
#define DIFF_VJP .diff = CS_OP_DIFF_VJP
#define DIFF_CONST .diff = CS_OP_DIFF_CONST
#define EXEC(bits) .exec = (bits)
/* META (SAME), META_ARG (EW, CS_PROMO_INT_TO_FLOAT): the meta family (see CsMetaKind) */
#define META(kind) .meta = CS_META_##kind
#define META_ARG(kind, a) .meta = CS_META_##kind, .meta_arg = (a)
#define CPU CS_OP_EXEC_CPU
#define CUDA CS_OP_EXEC_CUDA

#define CS_UNPAREN(...) __VA_ARGS__
#define CS_OP_TABLE_ROW(id_, name_, cat_, tags_, promo_, alias_, def_) \
  [CS_OP_##id_] = { CS_OP_##id_, name_, NULL, CS_OP_CAT_##cat_, (tags_), CS_PROMO_##promo_, \
                    CS_OP_##alias_, CS_UNPAREN def_ },

static CsOp op_table[CS_N_OPS] = {
  CS_OP_TABLE (CS_OP_TABLE_ROW)
};
#undef CS_OP_TABLE_ROW

/* cs_op_semantic() follows alias_of by pointer arithmetic: the table is indexed by id */
G_STATIC_ASSERT (G_N_ELEMENTS (op_table) == CS_N_OPS);

static const char * const arg_names[] = {
#define CS_ARG_NAME_ROW(id, kw) [CS_ARG_##id] = kw,
  CS_ARG_NAMES (CS_ARG_NAME_ROW)
#undef CS_ARG_NAME_ROW
};
G_STATIC_ASSERT (G_N_ELEMENTS (arg_names) == CS_N_ARG_NAMES);

static GHashTable *op_by_name;   /* printed name -> CsOp*, built once */

static gpointer
build_index (gpointer data)
{
  GHashTable *h = g_hash_table_new (g_str_hash, g_str_equal);

  for (guint i = 0; i < CS_N_OPS; i++)
    {
      const char *dot = strrchr (op_table[i].name, '.');
      /* cs_op_semantic() (inline) relies on the table being indexed by id */
      g_assert (op_table[i].id == (CsOpId) i);
      op_table[i].short_name = dot ? dot + 1 : op_table[i].name;
      /* a formula says which executors it feeds */
      if (op_table[i].ew1 != NULL)
        {
          const CsEwUnary *f = op_table[i].ew1;

          if (f->f64 != NULL && f->f32 != NULL)
            op_table[i].exec |= CS_OP_EXEC_CPU;
          if (f->cuda_f32 != NULL || f->cuda_int != NULL)
            op_table[i].exec |= CS_OP_EXEC_CUDA;
        }
      if (op_table[i].ew2 != NULL)
        {
          const CsEwBinary *f = op_table[i].ew2;

          if (f->f64 != NULL || f->i64 != NULL)
            op_table[i].exec |= CS_OP_EXEC_CPU;
          if (f->cuda_f32 != NULL || f->cuda_int != NULL || f->cuda_bool != NULL)
            op_table[i].exec |= CS_OP_EXEC_CUDA;
        }
      if (op_table[i].ew3 != NULL)
        {
          const CsEwTernary *f = op_table[i].ew3;

          if (f->f64 != NULL)
            op_table[i].exec |= CS_OP_EXEC_CPU;
          if (f->cuda_f32 != NULL || f->cuda_int != NULL || f->cuda_bool != NULL)
            op_table[i].exec |= CS_OP_EXEC_CUDA;
        }
      /* elementwise rows: the meta family of their kind (cs-meta.c's generic elementwise
       * rules), unless the row declares one */
      if (op_table[i].meta == CS_META_NONE && op_table[i].category == CS_OP_CAT_ELEMENTWISE
          && op_table[i].promo != CS_PROMO_NONE)
        {
          if (op_table[i].tags & CS_OP_TAG_PRIM)
            op_table[i].meta = CS_META_EW_PRIM;
          else if (op_table[i].tags & (CS_OP_TAG_UNARY | CS_OP_TAG_BINARY | CS_OP_TAG_TERNARY))
            {
              op_table[i].meta = CS_META_EW;
              op_table[i].meta_arg = op_table[i].promo;
            }
        }
      if (op_table[i].name[0] != '\0' && i != CS_OP_FUSION)
        g_hash_table_insert (h, (gpointer) op_table[i].name, &op_table[i]);
    }
  op_by_name = h;
  return h;
}

static void
ensure_index (void)
{
  static GOnce once = G_ONCE_INIT;
  g_once (&once, build_index, NULL);
}

/* "nvFusion12", "TorchCompile0", "CUDAGraph3": a prefix followed by decimal digits only. */
static gboolean
is_fusion_name (const char *callee)
{
  static const char * const prefixes[] = { "nvFusion", "TorchCompile", "CUDAGraph" };

  for (gsize i = 0; i < G_N_ELEMENTS (prefixes); i++)
    {
      gsize n = strlen (prefixes[i]);
      if (strncmp (callee, prefixes[i], n) == 0 && callee[n] != '\0')
        {
          const char *p = callee + n;
          while (*p >= '0' && *p <= '9')
            p++;
          if (*p == '\0')
            return TRUE;
        }
    }
  return FALSE;
}

/**
 * cs_op_lookup:
 * @callee: the callee as printed
 *
 * See cs-ops.h.  Thread-safe.
 * Returns: (transfer none): never NULL
 */
const CsOp *
cs_op_lookup (const char *callee)
{
  const CsOp *op;

  g_return_val_if_fail (callee != NULL, &op_table[CS_OP_OPAQUE]);
  ensure_index ();
  op = g_hash_table_lookup (op_by_name, callee);
  if (op != NULL)
    return op;
  if (g_str_has_prefix (callee, "torch.ops."))
    {
      /* torch.compile's OpOverloads, `torch.ops.<namespace>.<op>.<overload>`: the row of
       * `<namespace>.<op>` (aten.mm, prims.convert_element_type); overloads of one op take
       * compatible arguments where castscope reads them */
      const char *ns = callee + strlen ("torch.ops.");
      const char *d1 = strchr (ns, '.');
      const char *d2 = d1 ? strchr (d1 + 1, '.') : NULL;
      gsize n = d2 ? (gsize) (d2 - ns) : strlen (ns);
      char buf[128];

      if (d1 != NULL && n < sizeof buf)
        {
          memcpy (buf, ns, n);
          buf[n] = '\0';
          op = g_hash_table_lookup (op_by_name, buf);
          if (op != NULL)
            return op;
        }
    }
  if (is_fusion_name (callee))
    return &op_table[CS_OP_FUSION];
  return &op_table[CS_OP_OPAQUE];
}

/** cs_op_get: the entry for @id.  Returns: (transfer none) */
const CsOp *
cs_op_get (CsOpId id)
{
  g_return_val_if_fail (id < CS_N_OPS, &op_table[CS_OP_OPAQUE]);
  ensure_index ();
  return &op_table[id];
}

/** cs_op_category_name: "elementwise", "reduction", ... (static). */
const char *
cs_op_category_name (CsOpCategory cat)
{
  static const char * const names[CS_N_OP_CATS] = {
    [CS_OP_CAT_ELEMENTWISE] = "elementwise",
    [CS_OP_CAT_REDUCTION] = "reduction",
    [CS_OP_CAT_SHAPE] = "shape",
    [CS_OP_CAT_CAST] = "cast",
    [CS_OP_CAT_MATMUL] = "matmul",
    [CS_OP_CAT_FUSION] = "fusion",
    [CS_OP_CAT_BOOKKEEPING] = "bookkeeping",
    [CS_OP_CAT_CREATION] = "creation",
    [CS_OP_CAT_INDEXING] = "indexing",
    [CS_OP_CAT_COMPOSITE] = "composite",
    [CS_OP_CAT_ATTENTION] = "attention",
    [CS_OP_CAT_DISTRIBUTED] = "distributed",
    [CS_OP_CAT_OPAQUE] = "opaque",
  };
  g_return_val_if_fail (cat < CS_N_OP_CATS, "?");
  return names[cat];
}

/** cs_op_has_tag: %TRUE if @op carries @tag. */
gboolean
cs_op_has_tag (const CsOp *op, CsOpTag tag)
{
  return op != NULL && (op->tags & tag) != 0;
}

/** cs_op_is_fusion: %TRUE for nvFusionK / TorchCompileK / CUDAGraphK calls. */
gboolean
cs_op_is_fusion (const CsOp *op)
{
  return op != NULL && op->id == CS_OP_FUSION;
}

/** cs_arg_name: see cs-ops.h. */
const char *
cs_arg_name (CsArgName name)
{
  g_return_val_if_fail ((guint) name < CS_N_ARG_NAMES, "?");
  return arg_names[name];
}

/** cs_op_find_arg: see cs-ops.h. */
const CsOpArg *
cs_op_find_arg (const CsOp *op, CsArgName name, guint *pos)
{
  g_return_val_if_fail (op != NULL, NULL);
  for (guint i = 0; i < op->n_args; i++)
    if (op->args[i].name == name)
      {
        if (pos)
          *pos = op->args[i].kw_only ? G_MAXUINT : i;
        return &op->args[i];
      }
  return NULL;
}

