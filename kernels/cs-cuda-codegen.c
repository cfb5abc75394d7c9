/* cs-cuda-codegen.c: fusion region (a list of prims) -> CUDA C kernels.
 *
 * Design (reference/gpu-executor.md 4.1-4.3):
 *  - Every value is an expression evaluated at an index context: one C index expression per
 *    dim of the value.  Elementwise prims share their output's context; broadcast_in_dim,
 *    reshape, transpose, squeeze and slice derive their input's context from the output's;
 *    a leaf (a tensor made outside the region) is a strided load.  So broadcasting, transposed
 *    views and reshapes cost no copy.
 *  - Math runs in f32 registers (f64 for f64 values); a value whose dtype in the trace is bf16
 *    or f16 is rounded there (round to nearest even), so rounding happens exactly where the
 *    trace stores a reduced-precision value and nowhere else.
 *  - A region whose reductions all run along rows of one shape (size-1 dims aside: LayerNorm,
 *    RMSNorm, softmax and their backward row sums) is ONE row-fused kernel: a warp (rows up to
 *    1024) or a 256-thread block per row, one pass over the row per group of independent
 *    reductions (var_mean: a sum, then the centred squares), statistics in registers, then the
 *    row-shaped and per-row outputs; row elements are read once (16-byte loads or register
 *    arrays) when every lane holds the same count.  With a block per row it also accumulates
 *    the region's column sums over the rows (weight gradients).  See "Row-fused kernels".
 *  - Other reductions (sum, prod, amax, amin, var, var_mean) become a kernel with their
 *    pointwise prologue inlined: row form (a warp or a 256-thread block per output row) or
 *    column form (the reduction split over blockIdx.y into f32 partials that the last split
 *    block to finish merges, counted by atomics: no finalize kernel).  The column form reads 8
 *    consecutive columns a thread by 16-byte loads (8 rows x 256 columns a block, the last
 *    block of a tile merging its partials with all its threads) when the reduced dims lead and
 *    the columns are a multiple of 8, else a 32x8 tile of scalar loads counted per output.  var_mean there uses Welford's update and Chan's merge,
 *    never E[x^2]-E[x]^2.  The result is stored (as the region output, or as f32 scratch) and
 *    read back by later stages as a leaf.  Sums and extrema over size-1 dims only are views.
 *  - The remaining region outputs are grouped by shape: one pointwise kernel per shape, eight
 *    elements per thread with vector loads and stores of the contiguous tensors; an output
 *    that reshapes a contiguous region input is a view of it.
 *
 * Generated source never contains text from the trace: kernels are k<N>, parameters a<N>,
 * values v<N>, indices i<N>; numbers are formatted here from parsed values.
 */
#include "cs-config.h"

#include "cs-cuda-private.h"

#include <math.h>
#include <string.h>

typedef struct
{
  guint        rank;              /* dims of ix */
  const char  *ix[CS_MAX_DIMS];   /* C index expression per dim (pool strings) */
  const char  *flat;              /* when set: the ix are the row-major decomposition of this
                                   * flat index over the context's shape (a contiguous tensor
                                   * of that shape is read at `flat` without index math) */
  int64_t      shape[CS_MAX_DIMS];/* elements, valid when flat is set */
} Ctx;

typedef struct
{
  CsCudaProgram *p;         /* the program being built */
  GHashTable    *def;       /* CsProxy* -> CsStmt* defining it inside the region */
  GHashTable    *mat;       /* CsProxy* -> slot + 1, values stored inside the region */
  GStringChunk  *pool;      /* strings of the kernel being generated */
  GString       *body;      /* statements of the current kernel */
  GHashTable    *memo;      /* "proxy@ctx" -> var name */
  GHashTable    *reg;       /* CsProxy* -> var name: a row statistic held in a register by the
                             * row-fused kernel, valid at the row's own kept index only */
  const char   **row_ix;    /* row-fused kernel: index names of the kept non-1 dims */
  guint          row_nk;    /* their number */
  const char   **row_rix;   /* row-fused kernel: index names of the reduced non-1 dims */
  guint          row_nr;    /* their number */
  int            row_T;     /* elements per lane when the row loops are fully unrolled, else 0 */
  guint          row_pass;  /* the pass being emitted, from 1 */
  guint          row_out_pass; /* the row-fused kernel's output pass, as the probe numbered it */
  gboolean       row_probe; /* first emission: only records which row loads recur */
  GHashTable    *row_seen;  /* "slot@ctx" -> pass that first loaded it (probe) */
  GHashTable    *row_reused;/* "slot@ctx" loaded in more than one pass */
  GHashTable    *row_cache; /* "slot@ctx" -> register array holding the lane's elements */
  GString       *row_cache_decl; /* declarations of those arrays */
  guint          row_cache_regs; /* registers they take per thread */
  gboolean       row_vec;   /* row-fused kernel: lanes own groups of 8 consecutive row elements */
  GPtrArray     *row_vkeys; /* "slot@ctx" of row tensors read by 16-byte vector loads (probe) */
  GHashTable    *row_vcand; /* "slot@ctx" -> RowVec (probe) */
  GHashTable    *row_vname; /* "slot@ctx" -> union holding the lane's elements */
  guint          min_blocks;/* __launch_bounds__ minimum blocks per SM (0: none) */
  GPtrArray     *row_parts; /* row-fused kernel: slots of the column sums' per-block partials */
  gboolean       vec;       /* pointwise full tile: contiguous tensors come from vector loads */
  gboolean       vec_bad;   /* pointwise: a large tensor is read element by element */
  int64_t        vec_n;     /* pointwise: elements of the kernel */
  GArray        *vec_loads; /* element-type guint: parameters read through a vector load */
  GArray        *params;    /* element-type guint: slot per kernel parameter */
  GArray        *is_out;    /* element-type gboolean, parallel to params */
  guint          n_vars;    /* counter of the var names (v<n>, i<n>, c<n> ...) */
  guint          depth;     /* recursion guard */
  gboolean       big;       /* some index may reach 2^31: 64-bit index math */
  const char    *label;     /* the caller's name (region callee): prefix of errors, step labels */
} Gen;

/* A row tensor the row-fused kernel reads with vector loads: its slot and its offset at the
 * first element of a lane's group (`rv_`). */
typedef struct
{
  guint       slot;     /* the tensor's slot */
  const char *off;      /* C expression of that offset */
  gboolean    varying;  /* varies with the row (not a weight vector read by every row) */
  guint       pass;     /* the pass that reads it first (Gen.row_pass) */
} RowVec;

/* A row statistic of the row-fused kernel (Gen.reg). */
typedef struct
{
  const char *name;                /* register variable */
  CsDtype     dtype;               /* of the statistic (x's dtype for untyped var_mean outputs) */
  guint       rank;                /* of the statistic */
  int64_t     shape[CS_MAX_DIMS];  /* elements: the reduction's kept dims */
} RowReg;

/* The measurement knob @name (a CASTSCOPE_* environment variable that picks among forms of a
 * generated kernel, for the sweeps of kernels/BENCH-RESULTS.md): its value read as a decimal
 * integer the way atoi reads one (leading blanks and a sign taken, anything after the digits
 * ignored, no digits: 0) when that is within [@lo, @hi]; @dflt when the variable is unset or
 * its value is outside that range. */
static int
env_knob (const char *name, int lo, int hi, int dflt)
{
  const char *e = g_getenv (name);
  gint64 v;

  if (e == NULL)
    return dflt;
  v = g_ascii_strtoll (e, NULL, 10);
  return v >= lo && v <= hi ? (int) v : dflt;
}

/* ------------------------------------------------------------------------------------------ */

static const char *
ctype (CsDtype dt)
{
  switch (dt)
    {
    case CS_DTYPE_F64:
      return "double";
    case CS_DTYPE_B8:
      return "bool";
    case CS_DTYPE_U8: case CS_DTYPE_I8: case CS_DTYPE_I16: case CS_DTYPE_I32: case CS_DTYPE_I64:
    case CS_DTYPE_U64:
      return "long long";
    default:
      return "float";
    }
}

/** cs_cuda_storage_type: see cs-cuda-private.h. */
const char *
cs_cuda_storage_type (CsDtype dt)
{
  switch (dt)
    {
    case CS_DTYPE_BF16: case CS_DTYPE_F16: return "unsigned short";
    case CS_DTYPE_F32: return "float";
    case CS_DTYPE_F64: return "double";
    case CS_DTYPE_B8: case CS_DTYPE_U8: return "unsigned char";
    case CS_DTYPE_I8: return "signed char";
    case CS_DTYPE_I16: return "short";
    case CS_DTYPE_I32: return "int";
    case CS_DTYPE_I64: return "long long";
    case CS_DTYPE_U64: return "unsigned long long";
    default: return NULL;
    }
}

static gboolean
dtype_supported (CsDtype dt)
{
  return cs_cuda_storage_type (dt) != NULL;
}

static const char *
pool_printf (Gen *g, const char *fmt, ...) G_GNUC_PRINTF (2, 3);

static const char *
pool_printf (Gen *g, const char *fmt, ...)
{
  va_list ap;
  g_autofree char *s = NULL;

  va_start (ap, fmt);
  s = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  return g_string_chunk_insert (g->pool, s);
}

static const char *
new_var (Gen *g)
{
  return pool_printf (g, "v%u", g->n_vars++);
}

static const char *
new_idx (Gen *g, const char *expr)
{
  const char *name = pool_printf (g, "i%u", g->n_vars++);

  g_string_append_printf (g->body, "      const ix_t %s = %s;\n", name, expr);
  return name;
}

/* An index clamped into [0, @hi]: a bad index value never reads or writes outside a tensor. */
static const char *
clamp_idx (Gen *g, const char *expr, int64_t hi)
{
  const char *t = pool_printf (g, "c%u", g->n_vars++);

  g_string_append_printf (g->body, "      const long long %s = (long long) (%s);\n", t, expr);
  return new_idx (g, pool_printf (g, "(ix_t) (%s < 0 ? 0LL : (%s > %" G_GINT64_FORMAT "LL ? %" G_GINT64_FORMAT "LL : %s))",
                                  t, t, hi, hi, t));
}

/* A literal of C type @ct for @f (formatted here; NaN and infinities as bit patterns). */
static const char *
float_literal (Gen *g, double f, const char *ct)
{
  char buf[G_ASCII_DTOSTR_BUF_SIZE];

  if (strcmp (ct, "double") == 0)
    {
      if (isnan (f))
        return "__longlong_as_double(0x7ff8000000000000LL)";
      if (isinf (f))
        return f > 0 ? "__longlong_as_double(0x7ff0000000000000LL)"
                     : "__longlong_as_double((long long)0xfff0000000000000ULL)";
      g_ascii_formatd (buf, sizeof buf, "%.17e", f);
      return pool_printf (g, "%s", buf);
    }
  if (strcmp (ct, "float") == 0)
    {
      if (isnan (f))
        return "__int_as_float(0x7fc00000)";
      if (isinf (f))
        return f > 0 ? "__int_as_float(0x7f800000)" : "__int_as_float((int)0xff800000u)";
      g_ascii_formatd (buf, sizeof buf, "%.9e", (double) (float) f);
      return pool_printf (g, "%sf", buf);
    }
  if (strcmp (ct, "bool") == 0)
    return f != 0.0 ? "true" : "false";
  if (!isfinite (f))
    return "0LL";
  return pool_printf (g, "%" G_GINT64_FORMAT "LL", (gint64) f);
}

static const char *
ctx_key (const Ctx *c)
{
  GString *s = g_string_new ("");

  for (guint i = 0; i < c->rank; i++)
    {
      if (i)
        g_string_append_c (s, ',');
      g_string_append (s, c->ix[i]);
    }
  return g_string_free (s, FALSE);
}

static guint
param_of (Gen *g, guint slot, gboolean out)
{
  for (guint i = 0; i < g->params->len; i++)
    if (g_array_index (g->params, guint, i) == slot && g_array_index (g->is_out, gboolean, i) == out)
      return i;
  g_array_append_val (g->params, slot);
  g_array_append_val (g->is_out, out);
  return g->params->len - 1;
}

/* The extents of @shape that are not 1, in order; returns their number. */
static guint
non1_dims (const int64_t *shape, guint rank, int64_t *out)
{
  guint n = 0;

  for (guint j = 0; j < rank; j++)
    if (shape[j] != 1)
      out[n++] = shape[j];
  return n;
}

static gboolean
same_non1 (const int64_t *a, guint ar, const int64_t *b, guint br)
{
  int64_t na[CS_MAX_DIMS], nb[CS_MAX_DIMS];
  guint n = non1_dims (a, ar, na);

  return n == non1_dims (b, br, nb) && memcmp (na, nb, sizeof (int64_t) * n) == 0;
}

/* TRUE when slot @s is a row-major contiguous tensor of @c's shape (size-1 dims aside), so
 * that its offset at @c is @c's flat index. */
static gboolean
slot_is_flat_at (const CsCudaSlot *s, const Ctx *c)
{
  int64_t acc = 1;

  if (c->flat == NULL || !same_non1 (s->shape, s->rank, c->shape, c->rank))
    return FALSE;
  for (guint j = s->rank; j-- > 0;)
    {
      if (s->shape[j] == 1)
        continue;
      if (s->strides[j] != acc)
        return FALSE;
      acc *= s->shape[j];
    }
  return TRUE;
}

/* Offset expression of slot @s at context @c. */
static const char *
offset_expr (Gen *g, const CsCudaSlot *s, const Ctx *c)
{
  GString *e = g_string_new ("");
  const char *r;

  if (slot_is_flat_at (s, c))
    {
      g_string_free (e, TRUE);
      return c->flat;
    }

  for (guint j = 0; j < s->rank && j < c->rank; j++)
    {
      if (s->shape[j] == 1 || s->strides[j] == 0 || strcmp (c->ix[j], "0") == 0)
        continue;
      if (e->len)
        g_string_append (e, " + ");
      if (s->strides[j] == 1)
        g_string_append_printf (e, "%s", c->ix[j]);
      else
        g_string_append_printf (e, "%s * %" G_GINT64_FORMAT "LL", c->ix[j], s->strides[j]);
    }
  if (e->len == 0)
    g_string_append (e, "0");
  r = g_string_chunk_insert (g->pool, e->str);
  g_string_free (e, TRUE);
  return r;
}

static gint
cmp_guint (gconstpointer a, gconstpointer b)
{
  guint x = *(const guint *) a, y = *(const guint *) b;

  return x < y ? -1 : x > y;
}

static gboolean slot_vec_ok (const CsCudaSlot *s, const Ctx *c);
static const char *vec_type (CsDtype dt);

/* TRUE when slot @s at @c varies with both the row and the position in the row of the
 * row-fused kernel (a row tensor, not a per-row statistic or a weight vector). */
static gboolean
row_varying (Gen *g, const CsCudaSlot *s, const Ctx *c)
{
  gboolean has_o = FALSE, has_r = FALSE;

  for (guint j = 0; j < s->rank && j < c->rank; j++)
    {
      if (s->shape[j] == 1 || s->strides[j] == 0)
        continue;
      for (guint q = 0; q < g->row_nk; q++)
        if (strcmp (c->ix[j], g->row_ix[q]) == 0)
          has_o = TRUE;
      for (guint q = 0; q < g->row_nr; q++)
        if (strcmp (c->ix[j], g->row_rix[q]) == 0)
          has_r = TRUE;
    }
  return has_o && has_r;
}

#define CS_ROW_CACHE_REGS 64   /* registers per thread for row elements kept across passes */

/* TRUE when index @ix is defined before the first pass of the row-fused kernel: a kept row
 * index (g->row_ix) or a literal.  Indices computed in a pass's body (a view's unflattened
 * index, say) are not, so a load that needs them cannot move to the kernel's head. */
static gboolean
row_header_index (Gen *g, const char *ix)
{
  if (g_ascii_isdigit (ix[0]))
    return TRUE;
  for (guint q = 0; q < g->row_nk; q++)
    if (strcmp (ix, g->row_ix[q]) == 0)
      return TRUE;
  return FALSE;
}

/* Offset of slot @s at @c with the row index replaced by a lane's group start `rv_`, when the
 * slot can be read there with 16-byte loads: bf16/f16/f32, unit stride along the row, every
 * other stride and the view offset keeping 16-byte alignment.  NULL otherwise. */
static const char *
row_vec_offset (Gen *g, const CsCudaSlot *s, const Ctx *c)
{
  gsize es = cs_dtype_size_bytes (s->dtype);
  gboolean found = FALSE;
  Ctx c2;

  if (vec_type (s->dtype) == NULL || (s->offset * (int64_t) es) % 16 != 0 || g->row_nr != 1)
    return NULL;
  c2 = *c;
  c2.flat = NULL;
  for (guint j = 0; j < s->rank && j < c->rank; j++)
    {
      if (s->shape[j] == 1 || s->strides[j] == 0 || strcmp (c->ix[j], "0") == 0)
        continue;
      if (strcmp (c->ix[j], g->row_rix[0]) == 0)
        {
          if (found || s->strides[j] != 1)
            return NULL;
          found = TRUE;
          c2.ix[j] = "rv_";
        }
      else if ((s->strides[j] * (int64_t) es) % 16 != 0 || !row_header_index (g, c->ix[j]))
        return NULL;
    }
  return found ? offset_expr (g, s, &c2) : NULL;
}

/* Emits a load of slot @slot at @c; returns the variable. */
static const char *
emit_load (Gen *g, guint slot, const Ctx *c)
{
  CsCudaSlot *s = cs_cuda_program_slot (g->p, slot);
  guint a = param_of (g, slot, FALSE);
  const char *off = offset_expr (g, s, c);
  const char *v = new_var (g);
  const char *ct = ctype (s->dtype);
  g_autofree char *at = NULL;
  const char *keep = NULL;
  const char *voff;

  /* Row-fused kernel with 8-element groups: a row tensor that is contiguous along the row is
   * read by 16-byte loads before the first pass (VLn, kept for every pass). */
  if (g->row_vec && (voff = row_vec_offset (g, s, c)) != NULL)
    {
      g_autofree char *ck = (char *) ctx_key (c);
      g_autofree char *key = g_strdup_printf ("%u@%s", slot, ck);
      const char *name;

      if (g->row_probe)
        {
          if (!g_hash_table_contains (g->row_vcand, key))
            {
              RowVec *rv = g_new0 (RowVec, 1);

              rv->slot = slot;
              rv->off = voff;
              rv->varying = row_varying (g, s, c);
              rv->pass = g->row_pass;
              g_ptr_array_add (g->row_vkeys, g_strdup (key));
              g_hash_table_insert (g->row_vcand, g_strdup (key), rv);
            }
        }
      else if ((name = g_hash_table_lookup (g->row_vname, key)) != NULL)
        {
          if (s->dtype == CS_DTYPE_BF16)
            g_string_append_printf (g->body, "      const float %s = cs_bf2f (%s.e[t_]);\n", v, name);
          else if (s->dtype == CS_DTYPE_F16)
            g_string_append_printf (g->body, "      const float %s = cs_h2f (%s.e[t_]);\n", v, name);
          else
            g_string_append_printf (g->body, "      const float %s = %s.e[t_];\n", v, name);
          return v;
        }
    }

  /* Row-fused kernel, fully unrolled: a row element read in several passes is loaded once and
   * kept in a register array (rcN[t_]) instead of coming back from L1/L2. */
  if (g->row_T > 0 && row_varying (g, s, c))
    {
      g_autofree char *ck = (char *) ctx_key (c);
      char *key = g_strdup_printf ("%u@%s", slot, ck);
      const char *vt = (s->dtype == CS_DTYPE_BF16 || s->dtype == CS_DTYPE_F16) ? "float" : s->dtype == CS_DTYPE_B8 ? "bool" : ct;
      gpointer fp;

      if (g->row_probe)
        {
          if ((fp = g_hash_table_lookup (g->row_seen, key)) == NULL)
            g_hash_table_insert (g->row_seen, key, GUINT_TO_POINTER (g->row_pass));
          else
            {
              if (GPOINTER_TO_UINT (fp) != g->row_pass)
                g_hash_table_add (g->row_reused, g_strdup (key));
              g_free (key);
            }
        }
      else if (g_hash_table_contains (g->row_reused, key))
        {
          const char *name = g_hash_table_lookup (g->row_cache, key);

          if (name)
            {
              g_string_append_printf (g->body, "      const %s %s = %s[t_];\n", vt, v, name);
              g_free (key);
              return v;
            }
          if (g->row_cache_regs + (guint) g->row_T <= CS_ROW_CACHE_REGS)
            {
              keep = pool_printf (g, "rc%u", g->n_vars++);
              g_hash_table_insert (g->row_cache, key, (gpointer) keep);
              g_string_append_printf (g->row_cache_decl, "  %s %s[%d];\n", vt, keep, g->row_T);
              g->row_cache_regs += (guint) g->row_T;
            }
          else
            g_free (key);
        }
      else
        g_free (key);
    }

  if (g->vec && slot_vec_ok (s, c))
    {
      /* Read from the tensor's 8-element vector load (gen_pointwise). */
      if (!g_array_binary_search (g->vec_loads, &a, cmp_guint, NULL))
        {
          g_array_append_val (g->vec_loads, a);
          g_array_sort (g->vec_loads, cmp_guint);
        }
      at = g_strdup_printf ("L%u.e[k_]", a);
    }
  else
    at = g_strdup_printf ("a%u[%s]", a, off);

  switch (s->dtype)
    {
    case CS_DTYPE_BF16:
      g_string_append_printf (g->body, "      const float %s = cs_bf2f (%s);\n", v, at);
      break;
    case CS_DTYPE_F16:
      g_string_append_printf (g->body, "      const float %s = cs_h2f (%s);\n", v, at);
      break;
    case CS_DTYPE_B8:
      g_string_append_printf (g->body, "      const bool %s = %s != 0;\n", v, at);
      break;
    default:
      g_string_append_printf (g->body, "      const %s %s = (%s) %s;\n", ct, v, ct, at);
      break;
    }
  if (keep)
    g_string_append_printf (g->body, "      %s[t_] = %s;\n", keep, v);
  if (g->vec && !g_str_has_prefix (at, "L"))
    {
      /* A large tensor read element by element: the strided layout keeps it coalesced. */
      int64_t n = 1;

      for (guint j = 0; j < s->rank; j++)
        if (s->strides[j] != 0)
          n *= s->shape[j];
      if (n * 4 >= g->vec_n)
        g->vec_bad = TRUE;
    }
  return v;
}

static gboolean
unsupported (GError **error, const CsStmt *st, const char *why)
{
  g_set_error (error, CS_CUDA_ERROR, CS_CUDA_ERROR_UNSUPPORTED,
               "line %u: %s: %s is not supported by the CUDA executor", st ? st->line : 0,
               st && st->callee ? st->callee : "?", why);
  return FALSE;
}

/* @st's argument @name (read through the op's schema) when it is a proxy, else NULL. */
static CsProxy *
arg_proxy (const CsStmt *st, CsArgName name)
{
  CsValue *v = cs_stmt_arg (st, name);

  if (v && v->kind == CS_VALUE_PROXY)
    return v->u.proxy;
  return NULL;
}

static gboolean
ints_of (CsValue *v, int64_t *out, guint *n)
{
  if (v == NULL)
    return FALSE;
  if (v->kind == CS_VALUE_INT)
    {
      out[0] = v->u.i;
      *n = 1;
      return TRUE;
    }
  return cs_value_get_int_seq (v, out, CS_MAX_DIMS, n);
}

/* An int sequence argument read through the op's schema. */
static gboolean
schema_ints (const CsStmt *st, CsArgName name, int64_t *out, guint *n)
{
  return ints_of (cs_stmt_arg (st, name), out, n);
}

static gboolean
value_number (const CsValue *v, double *f)
{
  if (v == NULL)
    return FALSE;
  switch (v->kind)
    {
    case CS_VALUE_INT: *f = (double) v->u.i; return TRUE;
    case CS_VALUE_FLOAT: *f = v->u.f; return TRUE;
    case CS_VALUE_BOOL: *f = v->u.b ? 1.0 : 0.0; return TRUE;
    case CS_VALUE_PROXY:
      if (v->u.proxy->kind == CS_PROXY_NUMBER && v->u.proxy->has_value && v->u.proxy->value)
        return value_number (v->u.proxy->value, f);
      return FALSE;
    default:
      return FALSE;
    }
}

static const char *emit_value (Gen *g, CsProxy *x, const Ctx *c, GError **error);
static gboolean reduction_dims (const CsStmt *st, gboolean *red);
static gboolean reduction_is_trivial (const CsStmt *st);

/* An operand: a tensor proxy evaluated at @c, or a number formatted as C type @ct. */
static const char *
emit_operand (Gen *g, const CsStmt *st, guint i, const Ctx *c, const char *ct, GError **error)
{
  CsValue *v = cs_stmt_get_arg (st, i, NULL);
  double f;

  if (v == NULL)
    {
      unsupported (error, st, "a missing operand");
      return NULL;
    }
  if (v->kind == CS_VALUE_PROXY && v->u.proxy->kind == CS_PROXY_TENSOR)
    return emit_value (g, v->u.proxy, c, error);
  if (value_number (v, &f))
    return float_literal (g, f, ct);
  unsupported (error, st, "an operand that is neither a tensor nor a known number");
  return NULL;
}

static const char *
operand_ctype (const CsStmt *st, guint i, const char *dflt)
{
  CsValue *v = cs_stmt_get_arg (st, i, NULL);

  if (v && v->kind == CS_VALUE_PROXY && v->u.proxy->kind == CS_PROXY_TENSOR)
    return ctype (v->u.proxy->dtype);
  return dflt;
}

static const char *
round_wrap (Gen *g, CsDtype dt, const char *expr)
{
  if (dt == CS_DTYPE_BF16)
    return pool_printf (g, "cs_rbf (%s)", expr);
  if (dt == CS_DTYPE_F16)
    return pool_printf (g, "cs_rh (%s)", expr);
  return expr;
}

/* The registry formula's CUDA expression for a unary prim over a C type: @cexpr with every `@`
 * replaced by the operand @a (see CsEwUnary); NULL when the formula has none for that type. */
static const char *
unary_expr (Gen *g, const CsEwUnary *f, const char *ct, const char *a)
{
  const char *t = strcmp (ct, "double") == 0 ? f->cuda_f64
                  : strcmp (ct, "long long") == 0 ? f->cuda_int
                  : strcmp (ct, "bool") == 0 && f->cuda_bool ? f->cuda_bool : f->cuda_f32;
  GString *e;

  if (t == NULL)
    return NULL;
  e = g_string_new ("");
  for (const char *p = t; *p; p++)
    if (*p == '@')
      g_string_append (e, a);
    else
      g_string_append_c (e, *p);
  t = pool_printf (g, "%s", e->str);
  g_string_free (e, TRUE);
  return t;
}

/* A binary or ternary formula (CsEwBinary, CsEwTernary) seen the same way by the emitter. */
typedef struct
{
  guint         n;          /* operands: 2 or 3 */
  const char   *cuda[4];    /* expressions over float, double, long long, bool */
  guint         flags;      /* CsEwFlags */
} EwNary;

static gboolean
ew_nary (const CsOp *op, EwNary *f)
{
  if (op->ew2 != NULL)
    *f = (EwNary) { 2, { op->ew2->cuda_f32, op->ew2->cuda_f64, op->ew2->cuda_int, op->ew2->cuda_bool },
                    op->ew2->flags };
  else if (op->ew3 != NULL)
    *f = (EwNary) { 3, { op->ew3->cuda_f32, op->ew3->cuda_f64, op->ew3->cuda_int, op->ew3->cuda_bool },
                    op->ew3->flags };
  else
    return FALSE;
  return TRUE;
}

/* The formula's CUDA expression over C type @ct with `@<k>` replaced by operand @ops[k] and
 * `@t` by @ct; NULL when the formula has none for that type. */
static const char *
nary_expr (Gen *g, const EwNary *f, const char *ct, const char * const *ops)
{
  const char *t = strcmp (ct, "double") == 0 ? f->cuda[1]
                  : strcmp (ct, "long long") == 0 ? f->cuda[2]
                  : strcmp (ct, "bool") == 0 ? f->cuda[3] : f->cuda[0];
  GString *e;

  if (t == NULL)
    return NULL;
  e = g_string_new ("");
  for (const char *p = t; *p; p++)
    if (p[0] == '@' && p[1] == 't')
      g_string_append (e, ct), p++;
    else if (p[0] == '@' && p[1] >= '0' && p[1] < (char) ('0' + f->n))
      g_string_append (e, ops[p[1] - '0']), p++;
    else
      g_string_append_c (e, *p);
  t = pool_printf (g, "%s", e->str);
  g_string_free (e, TRUE);
  return t;
}

/* Index contexts --------------------------------------------------------------------------- */

static void
contig_strides (const int64_t *shape, guint rank, int64_t *st)
{
  int64_t acc = 1;

  for (guint j = rank; j-- > 0;)
    {
      st[j] = acc;
      acc *= shape[j];
    }
}

/* Context of x (shape xs) when y = reshape(x) is evaluated at @c (shape ys). */
static void
ctx_reshape (Gen *g, const Ctx *c, const int64_t *ys, guint yr, const int64_t *xs, guint xr, Ctx *out)
{
  int64_t yst[CS_MAX_DIMS], xst[CS_MAX_DIMS];
  GString *flat;
  const char *fv;

  if (yr == xr && (yr == 0 || memcmp (ys, xs, sizeof (int64_t) * yr) == 0))
    {
      *out = *c;
      return;
    }
  memset (out, 0, sizeof *out);
  out->rank = xr;
  if (same_non1 (ys, yr, xs, xr))
    {
      /* Only size-1 dims differ ([1, T, C] <-> [T, C]): the same indices, no flat index. */
      guint k = 0;

      for (guint j = 0; j < xr; j++)
        {
          if (xs[j] == 1)
            {
              out->ix[j] = "0";
              continue;
            }
          while (k < yr && ys[k] == 1)
            k++;
          out->ix[j] = c->ix[k++];
        }
      if (c->flat)
        {
          out->flat = c->flat;
          if (xr > 0)   /* a rank-0 proxy's shape is NULL */
            memcpy (out->shape, xs, sizeof (int64_t) * xr);
        }
      return;
    }
  contig_strides (ys, yr, yst);
  contig_strides (xs, xr, xst);
  if (c->flat && c->rank == yr && (yr == 0 || memcmp (c->shape, ys, sizeof (int64_t) * yr) == 0))
    fv = c->flat;
  else
    {
      flat = g_string_new ("");
      for (guint j = 0; j < yr; j++)
        {
          if (ys[j] == 1)
            continue;
          if (flat->len)
            g_string_append (flat, " + ");
          g_string_append_printf (flat, "%s * %" G_GINT64_FORMAT "LL", c->ix[j], yst[j]);
        }
      if (flat->len == 0)
        g_string_append (flat, "0");
      fv = new_idx (g, flat->str);
      g_string_free (flat, TRUE);
    }
  for (guint j = 0; j < xr; j++)
    {
      if (xs[j] == 1)
        out->ix[j] = "0";
      else if (j == 0)
        out->ix[j] = new_idx (g, pool_printf (g, "%s / %" G_GINT64_FORMAT "LL", fv, xst[j]));
      else
        out->ix[j] = new_idx (g, pool_printf (g, "(%s / %" G_GINT64_FORMAT "LL) %% %" G_GINT64_FORMAT "LL",
                                              fv, xst[j], xs[j]));
    }
  out->flat = fv;
  if (xr > 0)
    memcpy (out->shape, xs, sizeof (int64_t) * xr);
}

/* ------------------------------------------------------------------------------------------ */

static const char *
emit_prim (Gen *g, const CsStmt *st, CsProxy *y, const Ctx *c, GError **error)
{
  CsOpId id = cs_op_semantic (st->op)->id;
  const char *ct = ctype (y->dtype);
  const char *v = NULL, *a;
  EwNary nf;
  CsProxy *x;
  Ctx xc;

  memset (&xc, 0, sizeof xc);
  switch (id)
    {
    case CS_OP_PRIM_CONVERT_ELEMENT_TYPE:
      {
        CsValue *dv = cs_stmt_arg (st, CS_ARG_DTYPE);
        CsDtype to = y->dtype;

        if (dv && dv->kind == CS_VALUE_DTYPE)
          to = dv->u.dtype.dtype;
        a = emit_operand (g, st, 0, c, ct, error);
        if (!a)
          return NULL;
        v = new_var (g);
        if (to == CS_DTYPE_B8)
          g_string_append_printf (g->body, "      const bool %s = (%s) != 0;\n", v, a);
        else
          g_string_append_printf (g->body, "      const %s %s = %s;\n", ctype (to), v,
                                  round_wrap (g, to, pool_printf (g, "(%s) (%s)", ctype (to), a)));
        return v;
      }

    case CS_OP_PRIM_BROADCAST_IN_DIM:
      {
        int64_t shape[CS_MAX_DIMS], bdims[CS_MAX_DIMS];
        guint ns = 0, nb = 0;

        const int64_t *xshape;
        guint xrank;
        gpointer sv;
        RowReg *rr;

        x = arg_proxy (st, CS_ARG_A);
        if (!x || !schema_ints (st, CS_ARG_BROADCAST_DIMENSIONS, bdims, &nb))
          return unsupported (error, st, "this broadcast_in_dim form"), NULL;
        xshape = x->shape;
        xrank = x->rank;
        /* var_mean's outputs print without types in Thunder's traces: their shape is the one
         * the reduction stored (or holds in a register). */
        if (x->kind != CS_PROXY_TENSOR && g->reg && (rr = g_hash_table_lookup (g->reg, x)) != NULL)
          {
            xshape = rr->shape;
            xrank = rr->rank;
          }
        else if (x->kind != CS_PROXY_TENSOR && (sv = g_hash_table_lookup (g->mat, x)) != NULL)
          {
            CsCudaSlot *sl = cs_cuda_program_slot (g->p, GPOINTER_TO_UINT (sv) - 1);

            xshape = sl->shape;
            xrank = sl->rank;
          }
        else if (x->kind != CS_PROXY_TENSOR)
          return unsupported (error, st, "this broadcast_in_dim form"), NULL;
        if (nb != xrank)
          return unsupported (error, st, "this broadcast_in_dim form"), NULL;
        (void) schema_ints (st, CS_ARG_SHAPE, shape, &ns);
        xc.rank = xrank;
        for (guint j = 0; j < xrank; j++)
          {
            if (bdims[j] < 0 || (guint) bdims[j] >= c->rank)
              return unsupported (error, st, "a broadcast dimension out of range"), NULL;
            xc.ix[j] = xshape[j] == 1 ? "0" : c->ix[bdims[j]];
          }
        return emit_value (g, x, &xc, error);
      }

    case CS_OP_PRIM_RESHAPE:
    case CS_OP_PRIM_SHALLOW_COPY:
    case CS_OP_PRIM_STRIDE_ORDER:
    case CS_OP_PRIM_CLONE:
      x = arg_proxy (st, CS_ARG_A);
      if (!x || x->kind != CS_PROXY_TENSOR)
        return unsupported (error, st, "a reshape of a non-tensor"), NULL;
      ctx_reshape (g, c, y->shape, y->rank, x->shape, x->rank, &xc);
      return emit_value (g, x, &xc, error);

    case CS_OP_PRIM_SQUEEZE:
      {
        int64_t dims[CS_MAX_DIMS];
        guint nd = 0, k = 0;

        x = arg_proxy (st, CS_ARG_A);
        if (!x || !schema_ints (st, CS_ARG_DIMS, dims, &nd))
          return unsupported (error, st, "this squeeze form"), NULL;
        xc.rank = x->rank;
        for (guint j = 0; j < x->rank; j++)
          {
            gboolean sq = FALSE;

            for (guint q = 0; q < nd; q++)
              if ((dims[q] < 0 ? dims[q] + (int64_t) x->rank : dims[q]) == (int64_t) j)
                sq = TRUE;
            xc.ix[j] = sq ? "0" : (k < c->rank ? c->ix[k++] : "0");
          }
        return emit_value (g, x, &xc, error);
      }

    case CS_OP_PRIM_TRANSPOSE:
      {
        int64_t perm[CS_MAX_DIMS];
        guint np = 0;

        x = arg_proxy (st, CS_ARG_A);
        if (!x || !schema_ints (st, CS_ARG_PERMUTATION, perm, &np) || np != x->rank || np != c->rank)
          return unsupported (error, st, "this transpose form"), NULL;
        xc.rank = x->rank;
        for (guint k = 0; k < np; k++)
          {
            if (perm[k] < 0 || (guint) perm[k] >= np)
              return unsupported (error, st, "a permutation out of range"), NULL;
            xc.ix[perm[k]] = c->ix[k];
          }
        return emit_value (g, x, &xc, error);
      }

    case CS_OP_PRIM_SLICE_PRIM:
      {
        int64_t start[CS_MAX_DIMS], end[CS_MAX_DIMS], step[CS_MAX_DIMS];
        guint n1 = 0, n2 = 0, n3 = 0;

        x = arg_proxy (st, CS_ARG_A);
        if (!x || !schema_ints (st, CS_ARG_START_INDICES, start, &n1) || !schema_ints (st, CS_ARG_END_INDICES, end, &n2)
            || n1 != x->rank)
          return unsupported (error, st, "this slice form"), NULL;
        if (!schema_ints (st, CS_ARG_STRIDES, step, &n3))
          for (guint j = 0; j < x->rank; j++)
            step[j] = 1;
        xc.rank = x->rank;
        for (guint j = 0; j < x->rank; j++)
          xc.ix[j] = (start[j] == 0 && step[j] == 1) ? c->ix[j]
                     : new_idx (g, pool_printf (g, "%" G_GINT64_FORMAT "LL + %s * %" G_GINT64_FORMAT "LL",
                                                start[j], c->ix[j], step[j]));
        return emit_value (g, x, &xc, error);
      }

    case CS_OP_PRIM_PAD:
      {
        /* prims.pad(a, padding_value, ((lo, hi, interior), ...)): y[j] = x[(j - lo) / (interior + 1)]
         * where that is a whole in-range index, else the padding value.  The load uses a
         * clamped index, so it never reads outside x. */
        CsValue *cfg = cs_stmt_arg (st, CS_ARG_PADDING_CONFIG);
        const char *pv, *xv, *cond = "true";

        x = arg_proxy (st, CS_ARG_A);
        if (!x || !cfg || (cfg->kind != CS_VALUE_LIST && cfg->kind != CS_VALUE_TUPLE) || cfg->u.seq.n != x->rank)
          return unsupported (error, st, "this pad form"), NULL;
        pv = emit_operand (g, st, 1, c, ct, error);
        if (!pv)
          return NULL;
        xc.rank = x->rank;
        for (guint j = 0; j < x->rank; j++)
          {
            int64_t lhi[3];
            guint n3 = 0;
            const char *rel;

            if (!cs_value_get_int_seq (cfg->u.seq.items[j], lhi, 3, &n3) || n3 != 3 || lhi[2] < 0)
              return unsupported (error, st, "a padding config entry"), NULL;
            rel = new_idx (g, pool_printf (g, "%s - %" G_GINT64_FORMAT "LL", c->ix[j], lhi[0]));
            cond = pool_printf (g, "%s && %s >= 0 && %s %% %" G_GINT64_FORMAT "LL == 0 && %s / %" G_GINT64_FORMAT
                                "LL < %" G_GINT64_FORMAT "LL", cond, rel, rel, lhi[2] + 1, rel, lhi[2] + 1, x->shape[j]);
            xc.ix[j] = clamp_idx (g, pool_printf (g, "%s / %" G_GINT64_FORMAT "LL", rel, lhi[2] + 1),
                                  MAX (x->shape[j] - 1, 0));
          }
        xv = emit_value (g, x, &xc, error);
        if (!xv)
          return NULL;
        v = new_var (g);
        g_string_append_printf (g->body, "      const %s %s = (%s) ? (%s) (%s) : (%s) (%s);\n", ct, v, cond, ct,
                                xv, ct, pv);
        return v;
      }

    case CS_OP_PRIM_CAT:
      {
        /* prims.cat(tensors, dim): every input is read at a clamped index and the one whose
         * range holds the output index is selected (no branch, no read out of bounds). */
        CsValue *lst = cs_stmt_arg (st, CS_ARG_TENSORS);
        int64_t dim[1];
        guint nd = 0;
        int64_t off = 0;
        const char *acc = NULL;

        if (!lst || (lst->kind != CS_VALUE_LIST && lst->kind != CS_VALUE_TUPLE) || lst->u.seq.n == 0
            || !schema_ints (st, CS_ARG_DIM, dim, &nd) || nd != 1)
          return unsupported (error, st, "this cat form"), NULL;
        if (dim[0] < 0)
          dim[0] += y->rank;
        if (dim[0] < 0 || dim[0] >= (int64_t) c->rank)
          return unsupported (error, st, "a cat dim out of range"), NULL;
        v = new_var (g);
        g_string_append_printf (g->body, "      %s %s = 0;\n", ct, v);
        for (guint k = 0; k < lst->u.seq.n; k++)
          {
            CsValue *item = lst->u.seq.items[k];
            CsProxy *xi;
            const char *xv;
            int64_t len;

            if (item->kind != CS_VALUE_PROXY || item->u.proxy->kind != CS_PROXY_TENSOR)
              return unsupported (error, st, "a cat input that is not a tensor"), NULL;
            xi = item->u.proxy;
            len = xi->shape[dim[0]];
            xc = *c;
            xc.flat = NULL;
            xc.ix[dim[0]] = clamp_idx (g, pool_printf (g, "%s - %" G_GINT64_FORMAT "LL", c->ix[dim[0]], off),
                                       MAX (len - 1, 0));
            xv = emit_value (g, xi, &xc, error);
            if (!xv)
              return NULL;
            g_string_append_printf (g->body, "      if (%s >= %" G_GINT64_FORMAT "LL && %s < %" G_GINT64_FORMAT "LL) %s = (%s) (%s);\n",
                                    c->ix[dim[0]], off, c->ix[dim[0]], off + len, v, ct, xv);
            off += len;
            acc = xv;
          }
        (void) acc;
        return v;
      }

    case CS_OP_PRIM_FULL:
      {
        double f;

        if (!value_number (cs_stmt_arg (st, CS_ARG_FILL_VALUE), &f))
          return unsupported (error, st, "a fill value that is not a number"), NULL;
        return float_literal (g, f, ct);
      }

    case CS_OP_PRIM_IOTA:
      {
        double start = 0, stepv = 1;

        (void) value_number (cs_stmt_arg (st, CS_ARG_START), &start);
        (void) value_number (cs_stmt_arg (st, CS_ARG_STEP), &stepv);
        v = new_var (g);
        g_string_append_printf (g->body, "      const %s %s = (%s) (%s + %s * (%s));\n", ct, v, ct,
                                float_literal (g, start, ct), float_literal (g, stepv, ct),
                                c->rank ? c->ix[0] : "0");
        return v;
      }

    case CS_OP_PRIM_TAKE_ALONG_AXIS:
    case CS_OP_PRIM_GATHER:
      {
        /* take_along_axis(a, indices, dim) and gather(a, indices, dim) (torch.gather: the
         * output has the index's shape, which may be smaller than a's off dim): both read
         * a at the output's coordinates with coordinate dim replaced by the index. */
        CsProxy *ix;
        int64_t dim[1];
        guint nd = 0;
        const char *iv, *cl;

        x = arg_proxy (st, CS_ARG_A);
        ix = arg_proxy (st, CS_ARG_INDEX);
        if (!x || !ix || !schema_ints (st, CS_ARG_DIM, dim, &nd) || nd != 1)
          return unsupported (error, st, "this take_along_axis form"), NULL;
        if (dim[0] < 0)
          dim[0] += x->rank;
        iv = emit_value (g, ix, c, error);
        if (!iv)
          return NULL;
        /* Indices are clamped into range: a bad index never reads outside the tensor. */
        cl = clamp_idx (g, iv, x->shape[dim[0]] - 1);
        xc = *c;
        xc.flat = NULL;
        xc.rank = x->rank;
        xc.ix[dim[0]] = cl;
        return emit_value (g, x, &xc, error);
      }

    case CS_OP_PRIM_TAKE:
      {
        CsProxy *ix;
        int64_t dim[1];
        guint nd = 0;
        const char *iv, *cl;
        Ctx ic = { 0 };

        x = arg_proxy (st, CS_ARG_A);
        ix = arg_proxy (st, CS_ARG_INDEX);
        if (!x || !ix || ix->rank != 1 || !schema_ints (st, CS_ARG_DIM, dim, &nd) || nd != 1)
          return unsupported (error, st, "this take form"), NULL;
        if (dim[0] < 0)
          dim[0] += x->rank;
        ic.rank = 1;
        ic.ix[0] = c->ix[dim[0]];
        iv = emit_value (g, ix, &ic, error);
        if (!iv)
          return NULL;
        cl = clamp_idx (g, iv, x->shape[dim[0]] - 1);
        xc = *c;
        xc.flat = NULL;
        xc.ix[dim[0]] = cl;
        return emit_value (g, x, &xc, error);
      }

    case CS_OP_PRIM_EMBEDDING:
      {
        CsProxy *ix, *wt;
        const char *iv, *cl;
        Ctx ic = { 0 };

        ix = arg_proxy (st, CS_ARG_A);
        wt = arg_proxy (st, CS_ARG_WEIGHT);
        if (!ix || !wt || wt->rank != 2 || c->rank != ix->rank + 1)
          return unsupported (error, st, "this embedding form"), NULL;
        ic.rank = ix->rank;
        for (guint j = 0; j < ix->rank; j++)
          ic.ix[j] = c->ix[j];
        iv = emit_value (g, ix, &ic, error);
        if (!iv)
          return NULL;
        cl = clamp_idx (g, iv, wt->shape[0] - 1);
        xc.rank = 2;
        xc.ix[0] = cl;
        xc.ix[1] = c->ix[c->rank - 1];
        return emit_value (g, wt, &xc, error);
      }

    case CS_OP_PRIM_SUM:
    case CS_OP_PRIM_PROD:
    case CS_OP_PRIM_AMAX:
    case CS_OP_PRIM_AMIN:
      {
        /* Only trivial ones (size-1 dims reduced) get here: y[kept] = x[kept, 0...]. */
        gboolean red[CS_MAX_DIMS];
        const char *xv;
        guint k = 0;

        x = arg_proxy (st, CS_ARG_A);
        if (!reduction_is_trivial (st) || !reduction_dims (st, red))
          break;
        xc.rank = x->rank;
        for (guint j = 0; j < x->rank; j++)
          xc.ix[j] = red[j] ? "0" : (k < c->rank ? c->ix[k++] : "0");
        xv = emit_value (g, x, &xc, error);
        if (!xv)
          return NULL;
        v = new_var (g);
        g_string_append_printf (g->body, "      const %s %s = %s;\n", ct, v,
                                round_wrap (g, y->dtype, pool_printf (g, "(%s) (%s)", ct, xv)));
        return v;
      }

    default:
      break;
    }

  if (cs_op_semantic (st->op)->ew1 != NULL)
    {
      /* a unary prim: its registry formula; a bool result (isfinite, signbit) is computed
       * from the operand's own C type */
      const CsEwUnary *f = cs_op_semantic (st->op)->ew1;
      const char *oct = y->dtype == CS_DTYPE_B8 ? operand_ctype (st, 0, "float") : ct;
      const char *e;

      a = emit_operand (g, st, 0, c, oct, error);
      if (!a)
        return NULL;
      if ((e = unary_expr (g, f, oct, a)) == NULL)
        return unsupported (error, st, pool_printf (g, "%s on %s values", cs_op_semantic (st->op)->name, oct)), NULL;
      v = new_var (g);
      g_string_append_printf (g->body, "      const %s %s = %s;\n", y->dtype == CS_DTYPE_B8 ? "bool" : ct, v,
                              round_wrap (g, y->dtype, e));
      return v;
    }
  if (ew_nary (cs_op_semantic (st->op), &nf))
    {
      /* a binary or ternary prim: its registry formula, computed in the result's C type or,
       * for a bool result of the comparisons, in the operands' */
      const char *oct = (nf.flags & CS_EW_OPERAND_CTYPE) && y->dtype == CS_DTYPE_B8
                        ? operand_ctype (st, 0, operand_ctype (st, 1, "float")) : ct;
      const char *ops[3] = { NULL, NULL, NULL };
      const char *e;
      double pw;

      if ((nf.flags & CS_EW_SMALL_POWERS) && strcmp (oct, "long long") != 0
          && strcmp (oct, "bool") != 0 && value_number (cs_stmt_get_arg (st, 1, NULL), &pw)
          && (pw == 2.0 || pw == 3.0))
        {
          /* a float raised to the constant 2 or 3 is x*x (x*x*x), as PyTorch's pow kernel
           * does for these exponents: exact up to the products' rounding, and no powf call */
          a = emit_operand (g, st, 0, c, oct, error);
          if (!a)
            return NULL;
          v = new_var (g);
          g_string_append_printf (g->body, "      const %s %s = %s;\n", ct, v,
                                  round_wrap (g, y->dtype, pw == 2.0 ? pool_printf (g, "(%s) * (%s)", a, a)
                                              : pool_printf (g, "(%s) * (%s) * (%s)", a, a, a)));
          return v;
        }
      if (id == CS_OP_PRIM_DIV && strcmp (oct, "float") == 0
          && value_number (cs_stmt_get_arg (st, 1, NULL), &pw) && isfinite ((float) pw) && (float) pw != 0.0f
          && isnormal ((float) (1.0 / (double) (float) pw)))
        {
          /* an f32 quotient by a constant is the product with its reciprocal rounded to f32
           * (within 1.5 ulp of the quotient, exact for powers of two), as PyTorch's GELU
           * multiplies by M_SQRT1_2: a multiply instead of IEEE division's iteration */
          a = emit_operand (g, st, 0, c, oct, error);
          if (!a)
            return NULL;
          v = new_var (g);
          g_string_append_printf (g->body, "      const %s %s = %s;\n", ct, v,
                                  round_wrap (g, y->dtype, pool_printf (g, "(float) (%s) * %s", a,
                                              float_literal (g, 1.0 / (double) (float) pw, "float"))));
          return v;
        }
      for (guint i = 0; i < nf.n; i++)
        if ((ops[i] = emit_operand (g, st, i, c, i == 0 && (nf.flags & CS_EW_PREDICATE) ? "bool" : oct,
                                    error)) == NULL)
          return NULL;
      if ((e = nary_expr (g, &nf, oct, ops)) == NULL)
        return unsupported (error, st, pool_printf (g, "%s on %s values", cs_op_semantic (st->op)->name, oct)), NULL;
      v = new_var (g);
      g_string_append_printf (g->body, "      const %s %s = %s;\n", ct, v,
                              (nf.flags & CS_EW_SELECT) ? e : round_wrap (g, y->dtype, e));
      return v;
    }
  unsupported (error, st, "this prim");
  return NULL;
}

/* A row statistic at @c: valid only where @c's indices of its non-1 dims are the kernel's own
 * row (a statistic read at another row would need a second pass over memory). */
static const char *
reg_value (Gen *g, const RowReg *rr, const Ctx *c, GError **error)
{
  guint k = 0;

  if (c->rank == rr->rank)
    {
      for (guint j = 0; j < rr->rank; j++)
        {
          if (rr->shape[j] == 1)
            continue;
          if (k >= g->row_nk || strcmp (c->ix[j], g->row_ix[k]) != 0)
            break;
          k++;
        }
      if (k == g->row_nk)
        return rr->name;
    }
  g_set_error (error, CS_CUDA_ERROR, CS_CUDA_ERROR_UNSUPPORTED, "%s: a row statistic read at another row",
               g->label);
  return NULL;
}

static const char *
emit_value (Gen *g, CsProxy *x, const Ctx *c, GError **error)
{
  g_autofree char *key = NULL;
  g_autofree char *ck = NULL;
  const char *v;
  gpointer sv;
  CsStmt *st;
  RowReg *rr;

  if (g->reg && (rr = g_hash_table_lookup (g->reg, x)) != NULL)
    return reg_value (g, rr, c, error);

  if ((sv = g_hash_table_lookup (g->mat, x)) != NULL)
    {
      ck = (char *) ctx_key (c);
      key = g_strdup_printf ("%p@%s", (void *) x, ck);
      if ((v = g_hash_table_lookup (g->memo, key)) != NULL)
        return v;
      v = emit_load (g, GPOINTER_TO_UINT (sv) - 1, c);
      g_hash_table_insert (g->memo, g_steal_pointer (&key), (gpointer) v);
      return v;
    }
  if (x->kind != CS_PROXY_TENSOR)
    {
      g_set_error (error, CS_CUDA_ERROR, CS_CUDA_ERROR_UNSUPPORTED,
                   "%s: a region value that is not a tensor (%s)", g->label, x->name);
      return NULL;
    }
  if (!dtype_supported (x->dtype))
    {
      g_set_error (error, CS_CUDA_ERROR, CS_CUDA_ERROR_UNSUPPORTED, "%s: dtype %s of %s",
                   g->label, cs_dtype_short_name (x->dtype), x->name);
      return NULL;
    }
  if (g->depth > 4096)
    {
      g_set_error (error, CS_CUDA_ERROR, CS_CUDA_ERROR_UNSUPPORTED, "%s: expression too deep", g->label);
      return NULL;
    }
  ck = (char *) ctx_key (c);
  key = g_strdup_printf ("%p@%s", (void *) x, ck);
  v = g_hash_table_lookup (g->memo, key);
  if (v)
    return v;

  if ((sv = g_hash_table_lookup (g->mat, x)) != NULL)
    v = emit_load (g, GPOINTER_TO_UINT (sv) - 1, c);
  else if ((st = g_hash_table_lookup (g->def, x)) != NULL)
    {
      g->depth++;
      v = emit_prim (g, st, x, c, error);
      g->depth--;
    }
  else
    {
      gint slot = cs_cuda_program_lookup (g->p, x);

      if (slot < 0)
        {
          g_set_error (error, CS_CUDA_ERROR, CS_CUDA_ERROR_UNSUPPORTED,
                       "%s: value %s has no producer", g->label, x->name);
          return NULL;
        }
      v = emit_load (g, (guint) slot, c);
    }
  if (v)
    g_hash_table_insert (g->memo, g_steal_pointer (&key), (gpointer) v);
  return v;
}

/* Kernel assembly ------------------------------------------------------------------------- */

static void
gen_begin (Gen *g)
{
  g_string_truncate (g->body, 0);
  g_hash_table_remove_all (g->memo);
  g_array_set_size (g->params, 0);
  g_array_set_size (g->is_out, 0);
  g->big = FALSE;
}

/* The bf16 bits of f32 value @val: its upper half when the kernel's body defines @val as a
 * rounding to bf16 (`cs_rbf`: exactly representable, so the conversion would be the identity),
 * else the round-to-nearest-even conversion. */
static const char *
bf_store (Gen *g, const char *val)
{
  g_autofree char *def = g_strdup_printf ("const float %s = cs_rbf (", val);

  if (strstr (g->body->str, def) != NULL)
    return pool_printf (g, "cs_bfbits (%s)", val);
  return pool_printf (g, "cs_f2bf ((float) (%s))", val);
}

static void
store_stmt (Gen *g, GString *out, guint slot, const char *index, const char *val)
{
  CsCudaSlot *s = cs_cuda_program_slot (g->p, slot);
  guint a = param_of (g, slot, TRUE);

  switch (s->dtype)
    {
    case CS_DTYPE_BF16:
      g_string_append_printf (out, "      a%u[%s] = %s;\n", a, index, bf_store (g, val));
      break;
    case CS_DTYPE_F16:
      g_string_append_printf (out, "      a%u[%s] = cs_f2h ((float) (%s));\n", a, index, val);
      break;
    case CS_DTYPE_B8:
      g_string_append_printf (out, "      a%u[%s] = (%s) ? 1 : 0;\n", a, index, val);
      break;
    default:
      g_string_append_printf (out, "      a%u[%s] = (%s) (%s);\n", a, index, cs_cuda_storage_type (s->dtype), val);
      break;
    }
}

/* Appends @code to @out with the temporaries of one kernel (v<N>, i<N>, c<N>, rg<N>: new_var,
 * new_idx, clamp_idx, row registers) renumbered in order of first appearance, each family from
 * 0, and, when @strip_ll, the LL suffix of every integer literal dropped (a word ending in a
 * digit and LL).  The renumbering is a bijection on those identifiers, so the kernel means the
 * same; it makes the text of a kernel independent of how many temporaries earlier kernels of
 * its region took.  Words are maximal runs of [A-Za-z0-9_], so a number (0x7fc00000) is never
 * read as a name. */
static void
append_canonical (GString *out, const char *code, gboolean strip_ll, GHashTable *words, guint *next)
{
  const char *q = code;

  while (*q)
    {
      const char *w = q;
      gsize n;
      guint fam_len;

      if (!(g_ascii_isalnum (*q) || *q == '_'))
        {
          g_string_append_c (out, *q++);
          continue;
        }
      while (g_ascii_isalnum (*q) || *q == '_')
        q++;
      n = (gsize) (q - w);
      fam_len = (w[0] == 'r' && n > 1 && w[1] == 'g') ? 2 : (w[0] == 'v' || w[0] == 'i' || w[0] == 'c') ? 1 : 0;
      if (fam_len > 0 && n > fam_len)
        {
          gboolean digits = TRUE;

          for (gsize j = fam_len; j < n; j++)
            digits = digits && g_ascii_isdigit (w[j]);
          if (digits)
            {
              g_autofree char *word = g_strndup (w, n);
              const char *got = g_hash_table_lookup (words, word);

              if (got == NULL)
                {
                  guint f = fam_len == 2 ? 3 : w[0] == 'v' ? 0 : w[0] == 'i' ? 1 : 2;
                  char *nw = g_strdup_printf ("%.*s%u", (int) fam_len, w, next[f]++);

                  g_hash_table_insert (words, g_steal_pointer (&word), nw);
                  got = nw;
                }
              g_string_append (out, got);
              continue;
            }
        }
      if (strip_ll && n >= 3 && w[n - 1] == 'L' && w[n - 2] == 'L' && g_ascii_isdigit (w[n - 3]))
        n -= 2;
      g_string_append_len (out, w, (gssize) n);
    }
}

/** cs_cuda_intern_kernel: see cs-cuda-private.h. */
guint
cs_cuda_intern_kernel (CsCudaProgram *p, const char *attrs, const char *text)
{
  g_autofree char *key = g_strconcat (attrs, " @ ", text, NULL);
  gpointer v;
  CsCudaKernel *k;

  if (p->kernel_of != NULL && g_hash_table_lookup_extended (p->kernel_of, key, NULL, &v))
    return GPOINTER_TO_UINT (v);
  k = g_new0 (CsCudaKernel, 1);
  k->source = g_strdup_printf ("\nextern \"C\" __global__ void %s k%u %s", attrs, p->kernels->len, text);
  k->attrs = g_strdup (attrs);
  k->text = g_strdup (text);
  k->library = 0;
  g_ptr_array_add (p->kernels, k);
  g_string_append (p->source, k->source);
  p->n_kernels = p->kernels->len;
  if (p->kernel_of != NULL)
    g_hash_table_insert (p->kernel_of, g_steal_pointer (&key), GUINT_TO_POINTER (p->kernels->len - 1));
  return p->kernels->len - 1;
}

/* Builds `extern "C" __global__ void k<N>(params) {` + @code + `}`, interns it in the program
 * (a kernel whose text is identical to an earlier one's reuses it: identical layers share one
 * kernel) and records the step. */
static CsCudaStep *
gen_finish (Gen *g, const char *code, char *label, unsigned int grid_x, unsigned int grid_y,
            unsigned int block_x, unsigned int block_y)
{
  CsCudaProgram *p = g->p;
  guint k;
  CsCudaStep *step;
  double bytes = 0;
  g_autoptr(GString) text = g_string_new ("(");
  g_autoptr(GHashTable) words = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  guint next[4] = { 0 };
  g_autofree char *attrs = NULL;

  if (g->min_blocks > 0)
    attrs = g_strdup_printf ("__launch_bounds__(256, %u)", g->min_blocks);
  else
    attrs = g_strdup ("__launch_bounds__(256)");
  for (guint i = 0; i < g->params->len; i++)
    {
      CsCudaSlot *s = cs_cuda_program_slot (p, g_array_index (g->params, guint, i));
      gboolean out = g_array_index (g->is_out, gboolean, i);

      g_string_append_printf (text, "%s%s%s * __restrict__ a%u", i ? ", " : "", out ? "" : "const ",
                              cs_cuda_storage_type (s->dtype), i);
    }
  g_string_append (text, ")\n{\n");
  for (guint i = 0; i < g->params->len; i++)
    {
      CsCudaSlot *s = cs_cuda_program_slot (p, g_array_index (g->params, guint, i));

      if (g_array_index (p->buffers, CsCudaBuffer, s->buffer).size_bytes >= ((gsize) 1 << 31))
        g->big = TRUE;
    }
  /* Every index fits 32 bits unless g->big: int index math then (a 64-bit division by a
   * constant costs several times a 32-bit one), and decimal LL literals lose their suffix. */
  g_string_append (text, g->big ? "  typedef long long ix_t;\n" : "  typedef int ix_t;\n");
  append_canonical (text, code, !g->big, words, next);
  g_string_append (text, "}\n");
  k = cs_cuda_intern_kernel (p, attrs, text->str);

  step = cs_cuda_program_add_step (p, CS_CUDA_STEP_KERNEL, "fusion", label);
  step->kernel = k;
  step->mergeable = TRUE;
  step->grid[0] = grid_x;
  step->grid[1] = grid_y;
  step->grid[2] = 1;
  step->block[0] = block_x;
  step->block[1] = block_y;
  step->block[2] = 1;
  for (guint i = 0; i < g->params->len; i++)
    {
      CsCudaKArg arg = { g_array_index (g->params, guint, i) };
      CsCudaSlot *s = cs_cuda_program_slot (p, arg.slot);
      gsize n = 1;

      g_array_append_val (step->args, arg);
      if (g_array_index (g->is_out, gboolean, i))
        g_array_append_val (step->writes, arg.slot);
      else
        g_array_append_val (step->reads, arg.slot);
      for (guint j = 0; j < s->rank; j++)
        if (s->strides[j] != 0)
          n *= (gsize) s->shape[j];
      bytes += (double) n * (double) cs_dtype_size_bytes (s->dtype);
    }
  step->bytes = bytes;
  step->floor_ms = bytes / (CS_CUDA_PEAK_TBPS * 1e12) * 1e3;
  return step;
}

static char *
shape_str (const int64_t *shape, guint rank)
{
  GString *s = g_string_new ("[");

  for (guint i = 0; i < rank; i++)
    g_string_append_printf (s, "%s%" G_GINT64_FORMAT, i ? ", " : "", shape[i]);
  g_string_append_c (s, ']');
  return g_string_free (s, FALSE);
}

/* Decomposes flat index @flat over @shape into new index variables. */
static void
decompose (Gen *g, const char *flat, const int64_t *shape, guint rank, Ctx *c)
{
  int64_t st[CS_MAX_DIMS];
  gboolean first = TRUE;

  contig_strides (shape, rank, st);
  memset (c, 0, sizeof *c);
  c->rank = rank;
  c->flat = flat;
  if (rank > 0)   /* a rank-0 proxy's shape is NULL */
    memcpy (c->shape, shape, sizeof (int64_t) * rank);
  for (guint j = 0; j < rank; j++)
    {
      if (shape[j] == 1)
        c->ix[j] = "0";
      else if (first && st[j] == 1)
        c->ix[j] = flat;
      else if (first)
        c->ix[j] = new_idx (g, pool_printf (g, "%s / %" G_GINT64_FORMAT "LL", flat, st[j]));
      else if (st[j] == 1)
        c->ix[j] = new_idx (g, pool_printf (g, "%s %% %" G_GINT64_FORMAT "LL", flat, shape[j]));
      else
        c->ix[j] = new_idx (g, pool_printf (g, "(%s / %" G_GINT64_FORMAT "LL) %% %" G_GINT64_FORMAT "LL",
                                            flat, st[j], shape[j]));
      if (shape[j] != 1)
        first = FALSE;
    }
}

/* The vector type and element count of a 16-byte-or-more access to 8 elements of @dt, or NULL. */
static const char *
vec_type (CsDtype dt)
{
  switch (dt)
    {
    case CS_DTYPE_BF16: case CS_DTYPE_F16: return "uint4";        /* 8 x 2 bytes */
    case CS_DTYPE_F32: return "float4";                         /* 2 x (4 x 4 bytes) */
    default: return NULL;
    }
}

/* Slot @s can be read or written 8 elements at a time at flat index i (a multiple of 8): a
 * contiguous tensor of the kernel's shape whose first element is 16-byte aligned (the arena
 * aligns buffers to 256 bytes; a view's element offset must keep that). */
static gboolean
slot_vec_ok (const CsCudaSlot *s, const Ctx *c)
{
  return vec_type (s->dtype) && c->flat && strcmp (c->flat, "i") == 0 && slot_is_flat_at (s, c)
         && (s->offset * (int64_t) cs_dtype_size_bytes (s->dtype)) % 16 == 0;
}

/* Tiles of 2048 elements a block of gen_pointwise's vector form (U): each thread loads its
 * element groups of all U tiles before it computes any (U x 16 bytes a tensor in flight).
 * CASTSCOPE_PW_TILES (1-8) overrides the default: 4 from 2^27 elements, else 1 (measured on the
 * H200, kernels/BENCH-RESULTS.md run 45: 4 tiles took the GELU kernels at [8192, 16384] from
 * 3.3 to 3.4 TB/s and slowed those at [8192, 3072] by 3-8 %). */
static int
pointwise_tiles (Gen *g, int64_t N)
{
  /* set to a value outside 1-8: 1 */
  int dflt = g_getenv ("CASTSCOPE_PW_TILES") == NULL && N >= ((int64_t) 1 << 27) ? 4 : 1;
  int u = env_knob ("CASTSCOPE_PW_TILES", 1, 8, dflt);

  /* no more tiles a thread than keep every SM busy with some blocks */
  while (u > 1 && (N + 2048 * u - 1) / (2048 * u) < 4 * (int64_t) MAX (g->p->n_sms, 1))
    u /= 2;
  return u;
}

/* gen_pointwise's vector form over @U tiles a block: the loads of the tiles (@ldecl, @lloads,
 * tile u_ at base0 + u_ * 2048), then per tile its body (@vbody, the outputs' unions in @vpre
 * without the loads, @vstores, @vpost) reading tile u_'s loads through references (@lrefs);
 * a block with a partial tile takes the element-by-element path (@stores) for all its tiles. */
static gboolean
pointwise_tiled (Gen *g, GString *code, GString *vbody, GString *vstores, GString *vpost, GString *stores,
                 GString *ldecl, GString *lloads, GString *lrefs, GString *vpre, gboolean quads, const char *ixe,
                 int64_t N, int U, guint n, const char *ss)
{
  g_auto(GStrv) lines = g_strsplit (vpre->str, "\n", -1);
  g_autoptr(GString) wdecl = g_string_new ("");
  int64_t blocks;

  /* the output unions of vpre (its loads are in lloads) */
  for (guint q = 0; lines[q]; q++)
    if (g_str_has_prefix (lines[q], "      union {") && strstr (lines[q], "} W"))
      g_string_append_printf (wdecl, "    %s\n", lines[q]);
  g_string_append_printf (code, "  const ix_t n = %" G_GINT64_FORMAT "LL;\n", N);
  if (quads)
    g_string_append_printf (code, "  const ix_t base0 = (ix_t) blockIdx.x * %d + threadIdx.x * 4;\n"
                            "  if ((ix_t) blockIdx.x * %d + %d <= n)\n    {\n", 2048 * U, 2048 * U, 2048 * U);
  else
    g_string_append_printf (code, "  const ix_t base0 = ((ix_t) blockIdx.x * %d + threadIdx.x) * 8;\n"
                            "  if (base0 + %d < n)\n    {\n", 256 * U, 2048 * (U - 1) + 7);
  g_string_append (code, ldecl->str);
  g_string_append_printf (code, "#pragma unroll\n      for (int u_ = 0; u_ < %d; u_++)\n        {\n"
                          "          const ix_t base = base0 + u_ * 2048;\n", U);
  g_string_append (code, lloads->str);
  g_string_append (code, "        }\n");
  g_string_append_printf (code, "#pragma unroll\n      for (int u_ = 0; u_ < %d; u_++)\n        {\n"
                          "          const ix_t base = base0 + u_ * 2048;\n", U);
  g_string_append (code, lrefs->str);
  g_string_append (code, wdecl->str);
  g_string_append_printf (code, "#pragma unroll\n  for (int k_ = 0; k_ < 8; k_++)\n    {\n"
                          "      const ix_t i = %s;\n", ixe);
  g_string_append (code, vbody->str);
  g_string_append (code, vstores->str);
  g_string_append (code, "    }\n");
  g_string_append (code, vpost->str);
  g_string_append (code, "        }\n    }\n  else\n");
  g_string_append_printf (code, "    for (int u_ = 0; u_ < %d; u_++)\n    {\n"
                          "  const ix_t base = base0 + u_ * 2048;\n"
                          "  for (int k_ = 0; k_ < 8; k_++)\n    {\n"
                          "      const ix_t i = %s;\n      if (i >= n)\n        break;\n", U, ixe);
  g_string_append (code, g->body->str);
  g_string_append (code, stores->str);
  g_string_append (code, "    }\n    }\n");
  blocks = (N + 2048 * U - 1) / (2048 * U);
  if (blocks < 1)
    blocks = 1;
  gen_finish (g, code->str, g_strdup_printf ("%s pointwise %s (%u out, %d tiles a block)", g->label, ss, n, U),
              (unsigned int) blocks, 1, 256, 1);
  return TRUE;
}

/* One pointwise kernel writing @outs (slots), all of @shape; an output slot that is not
 * contiguous (laid out for the transpose that reads it) is stored at its strided offset. */
static gboolean
gen_pointwise (Gen *g, CsProxy **outs, guint *slots, guint n, const int64_t *shape, guint rank,
               GError **error)
{
  g_autoptr(GString) code = g_string_new ("");
  g_autoptr(GString) vbody = g_string_new ("");
  g_autoptr(GString) vstores = g_string_new ("");
  g_autoptr(GString) vpre = g_string_new ("");
  g_autoptr(GString) vpost = g_string_new ("");
  g_autoptr(GString) stores = g_string_new ("");
  g_autoptr(GString) ldecl = g_string_new ("");
  g_autoptr(GString) lloads = g_string_new ("");
  g_autoptr(GString) lrefs = g_string_new ("");
  g_autofree char *ss = shape_str (shape, rank);
  int64_t N = cs_shape_numel (shape, rank);
  int64_t blocks;
  gboolean vec, quads = FALSE;
  int U = pointwise_tiles (g, N);
  const char *ixe;
  Ctx c = { 0 };

  /* Eight elements per thread.  Full tiles take a branch-free unrolled path where every
   * contiguous tensor of the kernel's shape is read and written with vector accesses (one or
   * two loads per tensor instead of eight scalar ones, no unpacking of indices); the last,
   * partial tile reads and writes element by element.  Eight consecutive elements (one 16-byte
   * access for bf16/f16), or, when an f32 output is written, two groups of four 1024 apart so
   * that each store instruction of a warp fills whole 32-byte sectors (two 16-byte halves of a
   * sector written by two instructions cost twice the DRAM time).  With U tiles a block
   * (pointwise_tiles) each thread takes eight elements of each of U tiles 2048 apart. */
  for (guint k = 0; k < n; k++)
    if (cs_cuda_program_slot (g->p, slots[k])->dtype == CS_DTYPE_F32)
      quads = TRUE;
  ixe = quads ? "base + (k_ >> 2) * 1024 + (k_ & 3)" : "base + k_";
  gen_begin (g);
  g->vec = TRUE;
  g->vec_bad = FALSE;
  g->vec_n = N;
  decompose (g, "i", shape, rank, &c);
  for (guint k = 0; k < n; k++)
    {
      const char *v = emit_value (g, outs[k], &c, error);
      CsCudaSlot *so = cs_cuda_program_slot (g->p, slots[k]);

      if (!v)
        {
          g->vec = FALSE;
          return FALSE;
        }
      if (slot_vec_ok (so, &c))
        {
          guint a = param_of (g, slots[k], TRUE);
          const char *cv = so->dtype == CS_DTYPE_BF16 ? "cs_f2bf" : so->dtype == CS_DTYPE_F16 ? "cs_f2h" : "";
          gboolean f32 = so->dtype == CS_DTYPE_F32;
          const char *vt = f32 ? "float4" : quads ? "uint2" : "uint4";

          g_string_append_printf (vpre, "      union { %s v[%d]; %s e[8]; } W%u;\n", vt,
                                  (f32 || quads) ? 2 : 1, cs_cuda_storage_type (so->dtype), a);
          if (so->dtype == CS_DTYPE_BF16)
            g_string_append_printf (vstores, "      W%u.e[k_] = %s;\n", a, bf_store (g, v));
          else
            g_string_append_printf (vstores, "      W%u.e[k_] = %s ((float) (%s));\n", a, cv, v);
          if (quads)
            g_string_append_printf (vpost, "      *(%s *) (a%u + base) = W%u.v[0];\n"
                                    "      *(%s *) (a%u + base + 1024) = W%u.v[1];\n", vt, a, a, vt, a, a);
          else if (f32)
            g_string_append_printf (vpost, "      ((float4 *) (a%u + base))[0] = W%u.v[0];\n"
                                    "      ((float4 *) (a%u + base))[1] = W%u.v[1];\n", a, a, a, a);
          else
            g_string_append_printf (vpost, "      *(uint4 *) (a%u + base) = W%u.v[0];\n", a, a);
        }
      else
        store_stmt (g, vstores, slots[k], offset_expr (g, so, &c), v);
    }
  g->vec = FALSE;
  g_string_append (vbody, g->body->str);
  for (guint q = 0; q < g->vec_loads->len; q++)
    {
      guint a = g_array_index (g->vec_loads, guint, q);
      CsCudaSlot *sl = cs_cuda_program_slot (g->p, g_array_index (g->params, guint, a));
      gboolean f32 = sl->dtype == CS_DTYPE_F32;
      const char *vt = f32 ? "float4" : quads ? "uint2" : "uint4";

      g_string_append_printf (vpre, "      union { %s v[%d]; %s e[8]; } L%u;\n", vt, (f32 || quads) ? 2 : 1,
                              cs_cuda_storage_type (sl->dtype), a);
      /* the multi-tile form: L%u_[u_] holds tile u_'s elements, all tiles loaded first */
      g_string_append_printf (ldecl, "      union { %s v[%d]; %s e[8]; } L%u_[%d];\n", vt, (f32 || quads) ? 2 : 1,
                              cs_cuda_storage_type (sl->dtype), a, U);
      g_string_append_printf (lrefs, "          auto &L%u = L%u_[u_];\n", a, a);
      if (quads)
        g_string_append_printf (lloads, "          L%u_[u_].v[0] = *(const %s *) (a%u + base);\n"
                                "          L%u_[u_].v[1] = *(const %s *) (a%u + base + 1024);\n", a, vt, a, a, vt, a);
      else if (f32)
        g_string_append_printf (lloads, "          L%u_[u_].v[0] = ((const float4 *) (a%u + base))[0];\n"
                                "          L%u_[u_].v[1] = ((const float4 *) (a%u + base))[1];\n", a, a, a, a);
      else
        g_string_append_printf (lloads, "          L%u_[u_].v[0] = *(const uint4 *) (a%u + base);\n", a, a);
      if (quads)
        g_string_append_printf (vpre, "      L%u.v[0] = *(const %s *) (a%u + base);\n"
                                "      L%u.v[1] = *(const %s *) (a%u + base + 1024);\n", a, vt, a, a, vt, a);
      else if (f32)
        g_string_append_printf (vpre, "      L%u.v[0] = ((const float4 *) (a%u + base))[0];\n"
                                "      L%u.v[1] = ((const float4 *) (a%u + base))[1];\n", a, a, a, a);
      else
        g_string_append_printf (vpre, "      L%u.v[0] = *(const uint4 *) (a%u + base);\n", a, a);
    }
  vec = !g->vec_bad && (g->vec_loads->len > 0 || vpost->len > 0);
  g_array_set_size (g->vec_loads, 0);

  g_string_truncate (g->body, 0);
  g_hash_table_remove_all (g->memo);
  decompose (g, "i", shape, rank, &c);
  for (guint k = 0; k < n; k++)
    {
      const char *v = emit_value (g, outs[k], &c, error);

      if (!v)
        return FALSE;
      store_stmt (g, stores, slots[k], offset_expr (g, cs_cuda_program_slot (g->p, slots[k]), &c), v);
    }
  g->big |= N >= ((int64_t) 1 << 31) - 4096;
  if (!vec)
    {
      /* Nothing to vectorise, or a large tensor read through an index map (a pad, a
       * transpose): eight elements 256 apart, coalesced element by element. */
      g_string_append_printf (code, "  const ix_t n = %" G_GINT64_FORMAT "LL;\n", N);
      g_string_append (code, "  const ix_t base = (ix_t) blockIdx.x * 2048 + threadIdx.x;\n"
                             "  if (base + 7 * 256 < n)\n    {\n"
                             "#pragma unroll\n  for (int k_ = 0; k_ < 8; k_++)\n    {\n"
                             "      const ix_t i = base + k_ * 256;\n");
      g_string_append (code, g->body->str);
      g_string_append (code, stores->str);
      g_string_append (code, "    }\n    }\n  else\n    {\n"
                             "  for (int k_ = 0; k_ < 8; k_++)\n    {\n"
                             "      const ix_t i = base + k_ * 256;\n      if (i >= n)\n        break;\n");
      g_string_append (code, g->body->str);
      g_string_append (code, stores->str);
      g_string_append (code, "    }\n    }\n");
      gen_finish (g, code->str, g_strdup_printf ("%s pointwise %s (%u out)", g->label, ss, n),
                  (unsigned int) MAX ((N + 2047) / 2048, 1), 1, 256, 1);
      return TRUE;
    }
  if (U > 1)
    return pointwise_tiled (g, code, vbody, vstores, vpost, stores, ldecl, lloads, lrefs, vpre, quads, ixe, N, U, n, ss);
  g_string_append_printf (code, "  const ix_t n = %" G_GINT64_FORMAT "LL;\n", N);
  if (quads)
    g_string_append (code, "  const ix_t base = (ix_t) blockIdx.x * 2048 + threadIdx.x * 4;\n"
                           "  if ((ix_t) blockIdx.x * 2048 + 2048 <= n)\n    {\n");
  else
    g_string_append (code, "  const ix_t base = ((ix_t) blockIdx.x * 256 + threadIdx.x) * 8;\n"
                           "  if (base + 7 < n)\n    {\n");
  g_string_append (code, vpre->str);
  g_string_append_printf (code, "#pragma unroll\n  for (int k_ = 0; k_ < 8; k_++)\n    {\n"
                          "      const ix_t i = %s;\n", ixe);
  g_string_append (code, vbody->str);
  g_string_append (code, vstores->str);
  g_string_append (code, "    }\n");
  g_string_append (code, vpost->str);
  g_string_append_printf (code, "    }\n  else\n    {\n"
                          "  for (int k_ = 0; k_ < 8; k_++)\n    {\n"
                          "      const ix_t i = %s;\n      if (i >= n)\n        break;\n", ixe);
  g_string_append (code, g->body->str);
  g_string_append (code, stores->str);
  g_string_append (code, "    }\n    }\n");
  blocks = (N + 2047) / 2048;
  if (blocks < 1)
    blocks = 1;
  gen_finish (g, code->str, g_strdup_printf ("%s pointwise %s (%u out)", g->label, ss, n),
              (unsigned int) blocks, 1, 256, 1);
  return TRUE;
}

/* Row form: the reduced dims are the innermost ones, size-1 dims aside ([1, T, C] summed over
 * (0, 2) is T rows of C). */
static gboolean
reduction_is_row (const CsProxy *x, const gboolean *red)
{
  gboolean seen_red = FALSE;

  for (guint j = 0; j < x->rank; j++)
    {
      if (x->shape[j] == 1)
        continue;
      if (red[j])
        seen_red = TRUE;
      else if (seen_red)
        return FALSE;
    }
  return TRUE;
}

/* The reduced dims of reduction @st as flags over its input's dims. */
static gboolean
reduction_dims (const CsStmt *st, gboolean *red)
{
  CsProxy *x = arg_proxy (st, CS_ARG_A);
  int64_t dims[CS_MAX_DIMS];
  guint nd = 0;

  memset (red, 0, sizeof (gboolean) * CS_MAX_DIMS);
  if (!x || x->kind != CS_PROXY_TENSOR || !schema_ints (st, CS_ARG_DIMS, dims, &nd))
    return FALSE;
  for (guint i = 0; i < nd; i++)
    {
      int64_t d = dims[i] < 0 ? dims[i] + (int64_t) x->rank : dims[i];

      if (d < 0 || d >= (int64_t) x->rank)
        return FALSE;
      red[d] = TRUE;
    }
  return TRUE;
}

/* A sum, prod, amax or amin over size-1 dims only: the identity (a reshape), no kernel. */
static gboolean
reduction_is_trivial (const CsStmt *st)
{
  CsOpId id = cs_op_semantic (st->op)->id;
  CsProxy *x;
  gboolean red[CS_MAX_DIMS];

  if (id != CS_OP_PRIM_SUM && id != CS_OP_PRIM_PROD && id != CS_OP_PRIM_AMAX && id != CS_OP_PRIM_AMIN)
    return FALSE;
  x = arg_proxy (st, CS_ARG_A);
  if (!reduction_dims (st, red))
    return FALSE;
  for (guint j = 0; j < x->rank; j++)
    if (red[j] && x->shape[j] != 1)
      return FALSE;
  return TRUE;
}

typedef enum { RED_SUM, RED_PROD, RED_AMAX, RED_AMIN, RED_VAR_MEAN } RedKind;

static RedKind
red_kind (CsOpId id, gboolean *is_var_only)
{
  *is_var_only = FALSE;
  switch (id)
    {
    case CS_OP_PRIM_SUM: return RED_SUM;
    case CS_OP_PRIM_PROD: return RED_PROD;
    case CS_OP_PRIM_AMAX: return RED_AMAX;
    case CS_OP_PRIM_AMIN: return RED_AMIN;
    case CS_OP_PRIM_VAR: *is_var_only = TRUE; return RED_VAR_MEAN;
    default: return RED_VAR_MEAN;
    }
}

/* Accumulator code fragments for one reduction kind; state vars s0 (s1, s2 for Welford). */
static void
acc_init (GString *o, RedKind k, const char *at, const char *pfx)
{
  if (k == RED_VAR_MEAN)
    g_string_append_printf (o, "  %s %sn = 0, %sm = 0, %sq = 0;\n", at, pfx, pfx, pfx);
  else
    g_string_append_printf (o, "  %s %ss = %s;\n", at, pfx,
                            k == RED_SUM ? "0" : k == RED_PROD ? "1"
                            : k == RED_AMAX ? (strcmp (at, "double") == 0 ? "-__longlong_as_double(0x7ff0000000000000LL)" : "-__int_as_float(0x7f800000)")
                            : (strcmp (at, "double") == 0 ? "__longlong_as_double(0x7ff0000000000000LL)" : "__int_as_float(0x7f800000)"));
}

static void
acc_add (GString *o, RedKind k, const char *at, const char *pfx, const char *v)
{
  gboolean d = strcmp (at, "double") == 0;

  switch (k)
    {
    case RED_SUM: g_string_append_printf (o, "      %ss += (%s) (%s);\n", pfx, at, v); break;
    case RED_PROD: g_string_append_printf (o, "      %ss *= (%s) (%s);\n", pfx, at, v); break;
    case RED_AMAX: g_string_append_printf (o, "      %ss = %s (%ss, (%s) (%s));\n", pfx, d ? "cs_maxd" : "cs_maxf", pfx, at, v); break;
    case RED_AMIN: g_string_append_printf (o, "      %ss = %s (%ss, (%s) (%s));\n", pfx, d ? "cs_mind" : "cs_minf", pfx, at, v); break;
    case RED_VAR_MEAN:
      g_string_append_printf (o, "      { const %s x_ = (%s) (%s); %sn += 1; const %s d_ = x_ - %sm; %sm += d_ / %sn;"
                                 " %sq += d_ * (x_ - %sm); }\n", at, at, v, pfx, at, pfx, pfx, pfx, pfx, pfx);
      break;
    }
}

/* Merges state (pfx2) into (pfx). */
static void
acc_merge (GString *o, RedKind k, const char *at, const char *pfx, const char *pfx2, const char *ind)
{
  gboolean d = strcmp (at, "double") == 0;

  switch (k)
    {
    case RED_SUM: g_string_append_printf (o, "%s%ss += %ss;\n", ind, pfx, pfx2); break;
    case RED_PROD: g_string_append_printf (o, "%s%ss *= %ss;\n", ind, pfx, pfx2); break;
    case RED_AMAX: g_string_append_printf (o, "%s%ss = %s (%ss, %ss);\n", ind, pfx, d ? "cs_maxd" : "cs_maxf", pfx, pfx2); break;
    case RED_AMIN: g_string_append_printf (o, "%s%ss = %s (%ss, %ss);\n", ind, pfx, d ? "cs_mind" : "cs_minf", pfx, pfx2); break;
    case RED_VAR_MEAN:
      g_string_append_printf (o, "%sif (%sn > 0) { const %s nt_ = %sn + %sn; const %s d_ = %sm - %sm;"
                                 " %sm += d_ * %sn / nt_; %sq += %sq + d_ * d_ * %sn * %sn / nt_; %sn = nt_; }\n",
                              ind, pfx2, at, pfx, pfx2, at, pfx2, pfx, pfx, pfx2, pfx, pfx2, pfx, pfx2, pfx);
      break;
    }
}

static const char *comp_names_wf[] = { "n", "m", "q" };
static const char *comp_names_s[] = { "s" };

/* Stores the final outputs of reduction @k from state @pfx at flat output index @idx. */
static void
red_store (Gen *g, GString *o, RedKind k, gboolean var_only, const char *pfx, guint *slots,
           guint n_slots, double correction, const char *at, const char *idx)
{
  if (k != RED_VAR_MEAN)
    {
      store_stmt (g, o, slots[0], idx, pool_printf (g, "%ss", pfx));
      return;
    }
  {
    const char *var = pool_printf (g, "(%sq / (%sn - (%s) %s))", pfx, pfx, at,
                                   float_literal (g, correction, at));

    store_stmt (g, o, slots[0], idx, var);
    if (!var_only && n_slots > 1)
      store_stmt (g, o, slots[1], idx, pool_printf (g, "%sm", pfx));
  }
}

/* Butterfly merge of state @pfx across the 32 lanes of a warp. */
static void
shfl_merge (GString *o, RedKind k, const char *at, const char *pfx, const char *ind)
{
  const char **cn = k == RED_VAR_MEAN ? comp_names_wf : comp_names_s;
  guint nc = k == RED_VAR_MEAN ? 3 : 1;
  g_autofree char *ind2 = g_strdup_printf ("%s    ", ind);
  g_autofree char *pfx2 = g_strdup_printf ("%so", pfx);

  g_string_append_printf (o, "%sfor (int m_ = 16; m_ > 0; m_ >>= 1)\n%s  {\n", ind, ind);
  for (guint c = 0; c < nc; c++)
    g_string_append_printf (o, "%s    const %s %s%s = cs_shfl (%s%s, m_);\n", ind, at, pfx2, cn[c], pfx, cn[c]);
  acc_merge (o, k, at, pfx, pfx2, ind2);
  g_string_append_printf (o, "%s  }\n", ind);
}

/* Declares @name[8], one accumulator state of kind @k a column (fields s, or n, m, q). */
static void
acc_decl8 (GString *o, RedKind k, const char *at, const char *name)
{
  const char **cn = k == RED_VAR_MEAN ? comp_names_wf : comp_names_s;
  guint nc = k == RED_VAR_MEAN ? 3 : 1;

  g_string_append_printf (o, "  struct { %s %s; } %s[8];\n#pragma unroll\n  for (int k_ = 0; k_ < 8; k_++)\n    {\n",
                          at, k == RED_VAR_MEAN ? "n, m, q" : "s", name);
  acc_init (o, k, at, "z_");
  for (guint c = 0; c < nc; c++)
    g_string_append_printf (o, "      %s[k_].%s = z_%s;\n", name, cn[c], cn[c]);
  g_string_append (o, "    }\n");
}

/* The block's 8 x 256 states @name[8] (thread (y, x) holding columns 8x..8x+7 of row y) merged
 * over y in order through shared memory into state @pfx of column t_ (thread y * 32 + x). */
static void
col_merge_rows (GString *o, RedKind k, const char *at, const char *name, const char *pfx)
{
  const char **cn = k == RED_VAR_MEAN ? comp_names_wf : comp_names_s;
  guint nc = k == RED_VAR_MEAN ? 3 : 1;

  g_string_append (o, "#pragma unroll\n  for (int k_ = 0; k_ < 8; k_++)\n    {\n");
  for (guint c = 0; c < nc; c++)
    g_string_append_printf (o, "      sh_%s[threadIdx.y][threadIdx.x * 8 + k_] = %s[k_].%s;\n", cn[c], name, cn[c]);
  g_string_append (o, "    }\n  __syncthreads ();\n");
  acc_init (o, k, at, pfx);
  g_string_append (o, "  for (int y_ = 0; y_ < 8; y_++)\n    {\n");
  for (guint c = 0; c < nc; c++)
    g_string_append_printf (o, "      const %s o%s = sh_%s[y_][t_];\n", at, cn[c], cn[c]);
  acc_merge (o, k, at, pfx, "o", "      ");
  g_string_append (o, "    }\n");
}

/* Blocks an SM the column form's split aims at: 3, or CASTSCOPE_COL_BPS (1-16); 6 and 8 were
 * slower at [8192, 4096] and no faster at [8192, 768] (kernels/BENCH-RESULTS.md run 45). */
static int
col_blocks_an_sm (void)
{
  return env_knob ("CASTSCOPE_COL_BPS", 1, 16, 3);
}

/* The unroll of the 16-byte column form's two loops (the split's rows, the last block's
 * partials): CASTSCOPE_COL_UNROLL (2-32); unset or 0: 4 for the rows, the compiler's choice for
 * the partials.  The sums' order is the same at every unroll. */
static int
col_unroll (void)
{
  return env_knob ("CASTSCOPE_COL_UNROLL", 2, 32, 0);
}

/* Column form with 16-byte loads: a block is 8 rows x 256 columns, a thread 8 consecutive
 * columns of a row (one 16-byte load per contiguous bf16/f16 tensor, two for f32), the
 * reduction split over blockIdx.y into f32 partials; the last split block of a tile (an atomic
 * count per tile) merges the tile's partials with all its threads, in split order.  Needs the
 * reduced dims before the kept ones (x's flat index is r * O + o), O a multiple of 8, f32
 * accumulation and some contiguous tensor of x's shape to load as vectors.  Returns 1 when it
 * generated the kernel, 0 when the form does not apply (nothing emitted: the caller takes the
 * scalar column form), -1 on an error. */
static int
gen_col_vec (Gen *g, CsStmt *st, CsProxy *x, RedKind k, gboolean var_only, const gboolean *red,
             int64_t O, int64_t R, const int64_t *ks, guint nk, const int64_t *rs, guint nr,
             guint *slots, guint n_slots, double correction, const char *xs, GError **error)
{
  CsCudaProgram *p = g->p;
  const char **cn = k == RED_VAR_MEAN ? comp_names_wf : comp_names_s;
  guint nc = k == RED_VAR_MEAN ? 3 : 1;
  const char *at = "float";
  g_autoptr(GString) code = g_string_new ("");
  g_autoptr(GString) stores = g_string_new ("");
  g_autoptr(GString) vpre = g_string_new ("");
  Ctx oc = { 0 }, rc = { 0 }, xc = { 0 };
  gboolean seen_kept = FALSE;
  int64_t bx, S, max_s;
  guint part = 0, cnt = 0;
  const char *v;
  const int unroll = col_unroll ();

  if (O % 8 != 0 || O < 8 || !cs_dtype_is_float (x->dtype) || x->dtype == CS_DTYPE_F64)
    return 0;
  for (guint j = 0; j < x->rank; j++)
    {
      if (x->shape[j] == 1)
        continue;
      if (!red[j])
        seen_kept = TRUE;
      else if (seen_kept)
        return 0;
    }

  gen_begin (g);
  g->vec = TRUE;
  g->vec_bad = FALSE;
  g->vec_n = O * R;
  g_array_set_size (g->vec_loads, 0);
  decompose (g, "o", ks, nk, &oc);
  decompose (g, "r", rs, nr, &rc);
  xc.rank = x->rank;
  xc.flat = "i";
  if (x->rank > 0)   /* a rank-0 proxy's shape is NULL */
    memcpy (xc.shape, x->shape, sizeof (int64_t) * x->rank);
  for (guint j = 0, a = 0, b = 0; j < x->rank; j++)
    xc.ix[j] = red[j] ? rc.ix[b++] : oc.ix[a++];
  g->big |= O * R >= ((int64_t) 1 << 31) - 1024;
  v = emit_value (g, x, &xc, error);
  g->vec = FALSE;
  if (!v)
    return -1;
  if (g->vec_bad || g->vec_loads->len == 0)
    {
      g_array_set_size (g->vec_loads, 0);
      gen_begin (g);
      return 0;
    }
  for (guint q = 0; q < g->vec_loads->len; q++)
    {
      guint a = g_array_index (g->vec_loads, guint, q);
      CsCudaSlot *sl = cs_cuda_program_slot (p, g_array_index (g->params, guint, a));

      if (sl->dtype == CS_DTYPE_F32)
        g_string_append_printf (vpre, "      union { float4 v[2]; float e[8]; } L%u;\n"
                                "      L%u.v[0] = ((const float4 *) (a%u + base))[0];\n"
                                "      L%u.v[1] = ((const float4 *) (a%u + base))[1];\n", a, a, a, a, a);
      else
        g_string_append_printf (vpre, "      union { uint4 v[1]; %s e[8]; } L%u;\n"
                                "      L%u.v[0] = *(const uint4 *) (a%u + base);\n",
                                cs_cuda_storage_type (sl->dtype), a, a, a);
    }
  g_array_set_size (g->vec_loads, 0);

  /* Splits: about 3 blocks per SM (not tuned), at least 64 rows a split. */
  bx = (O + 255) / 256;
  S = (col_blocks_an_sm () * (int64_t) MAX (p->n_sms, 1) + bx - 1) / bx;
  max_s = (R + 63) / 64;
  S = MAX (MIN (MIN (S, max_s), 1024), 1);
  if (S > 1)
    {
      int64_t pshape[1] = { (int64_t) nc * S * O };
      int64_t cshape[1] = { bx };
      CsCudaBuffer *cb;

      part = cs_cuda_program_new_slot (p, CS_DTYPE_F32, pshape, 1);
      /* per tile: how many splits have stored their partials (0 between launches) */
      cnt = cs_cuda_program_new_slot (p, CS_DTYPE_I32, cshape, 1);
      cb = &g_array_index (p->buffers, CsCudaBuffer, cs_cuda_program_slot (p, cnt)->buffer);
      cb->pinned = TRUE;
      cb->zeroed = TRUE;
    }

  g_string_append_printf (code, "  const ix_t O = %" G_GINT64_FORMAT "LL, R = %" G_GINT64_FORMAT "LL;\n", O, R);
  g_string_append (code, "  const ix_t o8 = ((ix_t) blockIdx.x * 32 + threadIdx.x) * 8;\n");
  acc_decl8 (code, k, at, "A_");
  g_string_append_printf (code, "  if (o8 < O)\n#pragma unroll %d\n    for (ix_t r = (ix_t) blockIdx.y * 8 + threadIdx.y; r < R;"
                          " r += (ix_t) gridDim.y * 8)\n    {\n      const ix_t base = r * O + o8;\n", unroll ? unroll : 4);
  g_string_append (code, vpre->str);
  g_string_append (code, "#pragma unroll\n  for (int k_ = 0; k_ < 8; k_++)\n    {\n"
                         "      const ix_t o = o8 + k_;\n      const ix_t i = base + k_;\n");
  g_string_append (code, g->body->str);
  acc_add (code, k, at, "A_[k_].", v);
  g_string_append (code, "    }\n    }\n");
  for (guint c = 0; c < nc; c++)
    g_string_append_printf (code, "  __shared__ float sh_%s[8][256];\n", cn[c]);
  g_string_append (code, "  const int t_ = threadIdx.y * 32 + threadIdx.x;\n"
                         "  const ix_t o = (ix_t) blockIdx.x * 256 + t_;\n");
  col_merge_rows (code, k, at, "A_", "b_");
  if (S == 1)
    {
      red_store (g, stores, k, var_only, "b_", slots, n_slots, correction, at, "o");
      g_string_append_printf (code, "  if (o < O)\n    {\n%s    }\n", stores->str);
    }
  else
    {
      guint pp = param_of (g, part, TRUE), pc = param_of (g, cnt, TRUE);

      g_string_append (code, "  if (o < O)\n    {\n");
      for (guint c = 0; c < nc; c++)
        store_stmt (g, code, part, pool_printf (g, "%uLL * %" G_GINT64_FORMAT "LL + blockIdx.y * O + o", c, S * O),
                    pool_printf (g, "b_%s", cn[c]));
      /* The last split block of the tile merges its S partials: the partials are published by
       * each thread's fence before the barrier and the count, read from L2 after it; split s
       * goes to row s % 8 in split order, the rows then merge in order (the same result
       * whichever split comes last); the count goes back to 0 for the next launch. */
      g_string_append_printf (code, "    }\n  __shared__ int sh_last[1];\n  __threadfence ();\n  __syncthreads ();\n"
                                    "  if (t_ == 0)\n    sh_last[0] = atomicAdd (&a%u[blockIdx.x], 1) == %" G_GINT64_FORMAT " - 1;\n"
                                    "  __syncthreads ();\n  if (sh_last[0] == 0)\n    return;\n  __threadfence ();\n"
                                    "  if (t_ == 0)\n    a%u[blockIdx.x] = 0;\n", pc, S, pc);
      acc_decl8 (code, k, at, "F_");
      g_string_append_printf (code, "  if (o8 < O)\n%s    for (ix_t s_ = threadIdx.y; s_ < %" G_GINT64_FORMAT "LL; s_ += 8)\n    {\n",
                              unroll ? pool_printf (g, "#pragma unroll %d\n", unroll) : "", S);
      for (guint c = 0; c < nc; c++)
        g_string_append_printf (code, "      const float4 *p%s_ = (const float4 *) (a%u + %uLL * %" G_GINT64_FORMAT "LL + s_ * O + o8);\n"
                                      "      const float4 l%s_ = __ldcg (p%s_), h%s_ = __ldcg (p%s_ + 1);\n"
                                      "      const float e%s_[8] = { l%s_.x, l%s_.y, l%s_.z, l%s_.w, h%s_.x, h%s_.y, h%s_.z, h%s_.w };\n",
                                cn[c], pp, c, S * O, cn[c], cn[c], cn[c], cn[c],
                                cn[c], cn[c], cn[c], cn[c], cn[c], cn[c], cn[c], cn[c], cn[c]);
      g_string_append (code, "#pragma unroll\n      for (int k_ = 0; k_ < 8; k_++)\n        {\n");
      for (guint c = 0; c < nc; c++)
        g_string_append_printf (code, "          const float o%s = e%s_[k_];\n", cn[c], cn[c]);
      acc_merge (code, k, at, "F_[k_].", "o", "          ");
      g_string_append (code, "        }\n    }\n");
      col_merge_rows (code, k, at, "F_", "f_");
      red_store (g, stores, k, var_only, "f_", slots, n_slots, correction, at, "o");
      g_string_append_printf (code, "  if (o < O)\n    {\n%s    }\n", stores->str);
    }
  gen_finish (g, code->str,
              g_strdup_printf ("%s col-reduce %s (%" G_GINT64_FORMAT " cols over %" G_GINT64_FORMAT ", 8 a thread, %"
                               G_GINT64_FORMAT " splits%s)", g->label, xs, O, R, S, S > 1 ? ", the last adds them" : ""),
              (unsigned int) bx, (unsigned int) S, 32, 8);
  return 1;
}

static gboolean
gen_reduction (Gen *g, CsStmt *st, CsProxy **outs, guint n_outs, CsProxy *epi, GError **error)
{
  CsCudaProgram *p = g->p;
  CsOpId id = cs_op_semantic (st->op)->id;
  gboolean var_only;
  RedKind k = red_kind (id, &var_only);
  CsProxy *x = arg_proxy (st, CS_ARG_A);
  int64_t dims[CS_MAX_DIMS];
  guint nd = 0;
  gboolean red[CS_MAX_DIMS] = { 0 };
  int64_t ks[CS_MAX_DIMS], rs[CS_MAX_DIMS];
  guint nk = 0, nr = 0;
  int64_t O, R;
  gboolean row;
  double correction = 1.0;
  g_autoptr(GPtrArray) ys = g_ptr_array_new ();
  guint slots[2];
  guint n_slots = 0;
  const char *at;
  g_autoptr(GString) code = g_string_new ("");
  g_autoptr(GString) stores = g_string_new ("");
  g_autofree char *xs = NULL;
  const char **cn = k == RED_VAR_MEAN ? comp_names_wf : comp_names_s;
  guint nc = k == RED_VAR_MEAN ? 3 : 1;
  Ctx oc = { 0 }, rc = { 0 }, xc = { 0 };

  if (!x || x->kind != CS_PROXY_TENSOR || !schema_ints (st, CS_ARG_DIMS, dims, &nd))
    return unsupported (error, st, "this reduction form");
  if (k == RED_VAR_MEAN && !value_number (cs_stmt_arg (st, CS_ARG_CORRECTION), &correction))
    correction = 1.0;
  for (guint i = 0; i < nd; i++)
    {
      int64_t d = dims[i] < 0 ? dims[i] + (int64_t) x->rank : dims[i];

      if (d < 0 || d >= (int64_t) x->rank)
        return unsupported (error, st, "a reduction dim out of range");
      red[d] = TRUE;
    }
  for (guint j = 0; j < x->rank; j++)
    if (red[j])
      rs[nr++] = x->shape[j];
    else
      ks[nk++] = x->shape[j];
  O = cs_shape_numel (ks, nk);
  R = cs_shape_numel (rs, nr);
  row = reduction_is_row (x, red);
  /* f32 accumulation for float inputs (f64 for f64); integer sums count exactly in f64. */
  at = (x->dtype == CS_DTYPE_F64 || !cs_dtype_is_float (x->dtype)) ? "double" : "float";

  cs_stmt_collect_outputs (st, ys);
  if (ys->len == 0)
    return unsupported (error, st, "a reduction without outputs");
  for (guint i = 0; i < ys->len && i < 2; i++)
    {
      CsProxy *y = g_ptr_array_index (ys, i);

      /* The reduction's only use is a cast to a region output: store that output directly
       * (the cast is the store's conversion), skipping a kernel and the f32 scratch. */
      if (epi && ys->len == 1)
        y = epi;
      if (y->kind == CS_PROXY_TENSOR && y->typed)
        {
          if (!dtype_supported (y->dtype))
            return unsupported (error, st, "a reduction output dtype");
          slots[n_slots] = cs_cuda_program_new_slot (p, y->dtype, y->shape, y->rank);
        }
      else
        /* Multi-output prims print without types (var_mean): the kept dims, x's dtype. */
        slots[n_slots] = cs_cuda_program_new_slot (p, x->dtype, ks, nk);
      g_hash_table_insert (g->mat, y, GUINT_TO_POINTER (slots[n_slots] + 1));
      for (guint q = 0; q < n_outs; q++)
        if (outs[q] == y)
          cs_cuda_program_bind (p, y, slots[n_slots]);
      n_slots++;
    }
  xs = shape_str (x->shape, x->rank);

  gen_begin (g);
  if (row)
    {
      int G = R > 1024 ? 256 : 32;
      int64_t blocks = (O + (256 / G) - 1) / (256 / G);

      decompose (g, "o", ks, nk, &oc);
      decompose (g, "r", rs, nr, &rc);
      xc.rank = x->rank;
      for (guint j = 0, a = 0, b = 0; j < x->rank; j++)
        xc.ix[j] = red[j] ? rc.ix[b++] : oc.ix[a++];
      g->big |= O * R >= ((int64_t) 1 << 31) - 1024;
      {
        const char *v = emit_value (g, x, &xc, error);

        if (!v)
          return FALSE;
        g_string_append_printf (code, "  const ix_t O = %" G_GINT64_FORMAT "LL, R = %" G_GINT64_FORMAT "LL;\n", O, R);
        g_string_append_printf (code, "  const ix_t o = (ix_t) blockIdx.x * %d + threadIdx.x / %d;\n", 256 / G, G);
        g_string_append_printf (code, "  const int lane = threadIdx.x %% %d;\n", G);
        acc_init (code, k, at, "");
        g_string_append (code, "  if (o < O)\n#pragma unroll 4\n    for (ix_t r = lane; r < R; r += ");
        g_string_append_printf (code, "%d)\n    {\n", G);
        g_string_append (code, g->body->str);
        acc_add (code, k, at, "", v);
        g_string_append (code, "    }\n");
      }
      shfl_merge (code, k, at, "", "  ");
      if (G == 256)
        {
          for (guint c = 0; c < nc; c++)
            g_string_append_printf (code, "  __shared__ %s sh_%s[8];\n", at, cn[c]);
          g_string_append (code, "  if ((threadIdx.x & 31) == 0)\n    {\n");
          for (guint c = 0; c < nc; c++)
            g_string_append_printf (code, "      sh_%s[threadIdx.x >> 5] = %s;\n", cn[c], cn[c]);
          g_string_append (code, "    }\n  __syncthreads ();\n  if (threadIdx.x >= 32)\n    return;\n");
          acc_init (code, k, at, "t");
          g_string_append (code, "  if (threadIdx.x < 8)\n    {\n");
          for (guint c = 0; c < nc; c++)
            g_string_append_printf (code, "      t%s = sh_%s[threadIdx.x];\n", cn[c], cn[c]);
          g_string_append (code, "    }\n");
          for (guint c = 0; c < nc; c++)
            g_string_append_printf (code, "  %s = t%s;\n", cn[c], cn[c]);
          shfl_merge (code, k, at, "", "  ");
        }
      red_store (g, stores, k, var_only, "", slots, n_slots, correction, at, "o");
      g_string_append (code, "  if (o < O && lane == 0)\n    {\n");
      g_string_append (code, stores->str);
      g_string_append (code, "    }\n");
      gen_finish (g, code->str,
                  g_strdup_printf ("%s row-reduce %s (%" G_GINT64_FORMAT " rows of %" G_GINT64_FORMAT ")",
                                   g->label, xs, O, R),
                  (unsigned int) MAX (blocks, 1), 1, 256, 1);
      return TRUE;
    }

  if (strcmp (at, "float") == 0)
    {
      int rv = gen_col_vec (g, st, x, k, var_only, red, O, R, ks, nk, rs, nr, slots, n_slots, correction, xs,
                            error);

      if (rv != 0)
        return rv > 0;
    }
  /* Column form: a 32 x 8 tile; the reduction split over blockIdx.y into partials. */
  gen_begin (g);
  {
    int64_t bx = (O + 31) / 32;
    int64_t S = (8 * (int64_t) MAX (p->n_sms, 1) + bx - 1) / bx;   /* ~8 blocks per SM */
    int64_t max_s = (R + 63) / 64;
    guint part = 0, cnt = 0;
    const char *v;

    if (S > max_s)
      S = max_s;
    if (S > 1024)
      S = 1024;
    if (S < 1)
      S = 1;
    if (S > 1)
      {
        int64_t pshape[1] = { (int64_t) nc * S * O };

        int64_t cshape[1] = { O };
        CsCudaBuffer *cb;

        part = cs_cuda_program_new_slot (p, strcmp (at, "double") == 0 ? CS_DTYPE_F64 : CS_DTYPE_F32, pshape, 1);
        /* per output: how many splits have stored their partial (0 between launches) */
        cnt = cs_cuda_program_new_slot (p, CS_DTYPE_I32, cshape, 1);
        cb = &g_array_index (p->buffers, CsCudaBuffer, cs_cuda_program_slot (p, cnt)->buffer);
        cb->pinned = TRUE;
        cb->zeroed = TRUE;
      }
    decompose (g, "o", ks, nk, &oc);
    decompose (g, "r", rs, nr, &rc);
    xc.rank = x->rank;
    for (guint j = 0, a = 0, b = 0; j < x->rank; j++)
      xc.ix[j] = red[j] ? rc.ix[b++] : oc.ix[a++];
    g->big |= O * R >= ((int64_t) 1 << 31) - 1024;
    v = emit_value (g, x, &xc, error);
    if (!v)
      return FALSE;
    g_string_append_printf (code, "  const ix_t O = %" G_GINT64_FORMAT "LL, R = %" G_GINT64_FORMAT "LL;\n", O, R);
    g_string_append (code, "  const ix_t o = (ix_t) blockIdx.x * 32 + threadIdx.x;\n");
    acc_init (code, k, at, "");
    g_string_append (code, "  if (o < O)\n#pragma unroll 4\n    for (ix_t r = (ix_t) blockIdx.y * 8 + threadIdx.y; r < R;"
                           " r += (ix_t) gridDim.y * 8)\n    {\n");
    g_string_append (code, g->body->str);
    acc_add (code, k, at, "", v);
    g_string_append (code, "    }\n");
    for (guint c = 0; c < nc; c++)
      g_string_append_printf (code, "  __shared__ %s sh_%s[8][33];\n  sh_%s[threadIdx.y][threadIdx.x] = %s;\n",
                              at, cn[c], cn[c], cn[c]);
    g_string_append (code, "  __syncthreads ();\n  if (threadIdx.y != 0 || o >= O)\n    return;\n"
                           "  for (int t_ = 1; t_ < 8; t_++)\n    {\n");
    for (guint c = 0; c < nc; c++)
      g_string_append_printf (code, "      const %s o%s = sh_%s[t_][threadIdx.x];\n", at, cn[c], cn[c]);
    acc_merge (code, k, at, "", "o", "      ");
    g_string_append (code, "    }\n");
    if (S == 1)
      {
        red_store (g, stores, k, var_only, "", slots, n_slots, correction, at, "o");
        g_string_append (code, stores->str);
      }
    else
      {
        guint pp = param_of (g, part, TRUE), pc = param_of (g, cnt, TRUE);

        for (guint c = 0; c < nc; c++)
          store_stmt (g, code, part, pool_printf (g, "%uLL * %" G_GINT64_FORMAT "LL + blockIdx.y * O + o", c, S * O),
                      cn[c]);
        /* The last split to store output o's partial merges the S partials, in split order
         * (the same sum whichever split comes last), stores o and resets its counter: the
         * partials are published by the fence before the count, read from L2 after it. */
        g_string_append_printf (code, "  __threadfence ();\n  if (atomicAdd (&a%u[o], 1) != %" G_GINT64_FORMAT " - 1)\n"
                                      "    return;\n  __threadfence ();\n  a%u[o] = 0;\n", pc, S, pc);
        acc_init (code, k, at, "f");
        g_string_append_printf (code, "  for (ix_t t_ = 0; t_ < %" G_GINT64_FORMAT "LL; t_++)\n    {\n", S);
        for (guint c = 0; c < nc; c++)
          g_string_append_printf (code, "      const %s o%s = __ldcg (&a%u[%uLL * %" G_GINT64_FORMAT "LL + t_ * O + o]);\n",
                                  at, cn[c], pp, c, S * O);
        acc_merge (code, k, at, "f", "o", "      ");
        g_string_append (code, "    }\n");
        red_store (g, stores, k, var_only, "f", slots, n_slots, correction, at, "o");
        g_string_append (code, stores->str);
      }
    gen_finish (g, code->str,
                g_strdup_printf ("%s col-reduce %s (%" G_GINT64_FORMAT " cols over %" G_GINT64_FORMAT ", %" G_GINT64_FORMAT " splits%s)",
                                 g->label, xs, O, R, S, S > 1 ? ", the last adds them" : ""),
                (unsigned int) bx, (unsigned int) S, 32, 8);
  }
  return TRUE;
}

static gboolean
is_reduction (const CsStmt *st)
{
  switch (cs_op_semantic (st->op)->id)
    {
    case CS_OP_PRIM_SUM: case CS_OP_PRIM_PROD: case CS_OP_PRIM_AMAX: case CS_OP_PRIM_AMIN:
      return !reduction_is_trivial (st);
    case CS_OP_PRIM_VAR: case CS_OP_PRIM_VAR_MEAN:
      return TRUE;
    default:
      return FALSE;
    }
}

static gboolean
same_shape (const CsProxy *a, const CsProxy *b)
{
  return a->rank == b->rank && (a->rank == 0 || memcmp (a->shape, b->shape, sizeof (int64_t) * a->rank) == 0);
}

/* Row-fused kernels ------------------------------------------------------------------------
 *
 * A region whose reductions all run along rows of one shape (LayerNorm, RMSNorm, softmax and
 * their backward row sums) becomes ONE kernel: a warp (rows up to 1024) or a 256-thread block
 * per row makes a pass over the row per group of independent reductions, holds the row
 * statistics in registers, then writes the region's row-shaped outputs and, from lane 0, its
 * per-row outputs.  Later passes re-read the row from L1/L2 instead of a second kernel reading
 * HBM and f32 statistics.  Column reductions of the same region (bias and weight gradients)
 * stay separate kernels when they do not read a row statistic. */

typedef struct
{
  int64_t    kept[CS_MAX_DIMS];   /* kept extents other than 1, outermost first */
  guint      nk;                  /* entries of kept */
  int64_t    red[CS_MAX_DIMS];    /* reduced extents other than 1 */
  guint      nr;                  /* entries of red */
  GPtrArray *reds;                /* CsStmt*: the row reductions, in trace order */
  GArray    *phase;               /* guint per reduction: its pass, 1 + the latest pass it reads */
  guint      n_phases;            /* passes over the row: the largest entry of phase */
  GHashTable *red_phase;          /* CsProxy* (a row reduction's output) -> its pass */
  GPtrArray  *cols;               /* CsStmt*: column sums over the rows, accumulated by the
                                   * kernel (weight and bias gradients of a normalisation) */
  GPtrArray  *col_out;            /* CsProxy* per column sum: the region output it stores (its
                                   * result, or the cast of it) */
  int         G;                  /* threads per row */
  int         T;                  /* elements per lane when fully unrolled, else 0 */
} RowPlan;

/* The latest pass among the row reductions that @x reads (0: none), through the region's
 * prims. */
static guint
row_dep_phase (Gen *g, CsProxy *x, GHashTable *red_phase, GHashTable *seen)
{
  gpointer v;
  CsStmt *st;
  g_autoptr(GPtrArray) ins = NULL;
  guint ph = 0;

  if ((v = g_hash_table_lookup (red_phase, x)) != NULL)
    return GPOINTER_TO_UINT (v);
  if ((v = g_hash_table_lookup (seen, x)) != NULL)
    return GPOINTER_TO_UINT (v) - 1;
  st = g_hash_table_lookup (g->def, x);
  if (st == NULL)
    return 0;
  g_hash_table_insert (seen, x, GUINT_TO_POINTER (1));
  ins = g_ptr_array_new ();
  cs_stmt_collect_inputs (st, ins);
  for (guint i = 0; i < ins->len; i++)
    ph = MAX (ph, row_dep_phase (g, g_ptr_array_index (ins, i), red_phase, seen));
  g_hash_table_insert (seen, x, GUINT_TO_POINTER (ph + 1));
  return ph;
}

/* Fills @rp when the region's row reductions share one row shape and no column reduction reads
 * one of them. */
static CsProxy *reduction_epilogue (CsStmt *st, GHashTable *uses, GHashTable *user_of, GHashTable *is_out);

/* A column sum the row-fused kernel can accumulate: a float sum over exactly the rows of @rp
 * (its input's non-1 dims are the rows then the row elements) whose result is only stored, as
 * it is or through a cast, as a region output.  Returns that output, or NULL. */
static CsProxy *
row_col_sum (const RowPlan *rp, CsStmt *st, GHashTable *uses, GHashTable *user_of, GHashTable *is_out)
{
  CsProxy *x = arg_proxy (st, CS_ARG_A);
  CsProxy *y = cs_stmt_get_output (st);
  gboolean red[CS_MAX_DIMS];
  int64_t n1[CS_MAX_DIMS];
  guint n = 0, k = 0;
  CsProxy *epi;

  /* A block per row only: with a warp per row the 8 warps' sums (and the registers they take)
   * cost more than the separate column reduction (LayerNorm d=768 backward, run 12: 68 + 25 us
   * against 30 + 30 us). */
  if (rp->T == 0 || rp->G != 256 || cs_op_semantic (st->op)->id != CS_OP_PRIM_SUM || !x || !y || y->kind != CS_PROXY_TENSOR
      || !reduction_dims (st, red) || !cs_dtype_is_float (x->dtype) || x->dtype == CS_DTYPE_F64)
    return NULL;
  for (guint j = 0; j < x->rank; j++)
    if (x->shape[j] != 1)
      {
        if (red[j] != (k < rp->nk))
          return NULL;
        n1[n++] = x->shape[j];
        k++;
      }
  if (n != rp->nk + rp->nr || memcmp (n1, rp->kept, sizeof (int64_t) * rp->nk) != 0
      || memcmp (n1 + rp->nk, rp->red, sizeof (int64_t) * rp->nr) != 0)
    return NULL;
  if ((epi = reduction_epilogue (st, uses, user_of, is_out)) != NULL)
    return epi;
  if (g_hash_table_contains (is_out, y) && GPOINTER_TO_UINT (g_hash_table_lookup (uses, y)) == 1)
    return y;
  return NULL;
}

static gboolean
row_plan (Gen *g, CsStmt **prims, guint n_prims, RowPlan *rp, GHashTable *uses, GHashTable *user_of,
          GHashTable *is_out)
{
  GHashTable *red_phase = rp->red_phase;
  g_autoptr(GHashTable) seen = g_hash_table_new (NULL, NULL);
  g_autoptr(GPtrArray) cols = g_ptr_array_new ();
  int64_t R;

  for (guint i = 0; i < n_prims; i++)
    {
      CsStmt *st = prims[i];
      CsProxy *x;
      gboolean red[CS_MAX_DIMS];
      int64_t kept[CS_MAX_DIMS], rd[CS_MAX_DIMS];
      guint nk = 0, nr = 0;

      if (st->kind != CS_STMT_CALL || !is_reduction (st))
        continue;
      x = arg_proxy (st, CS_ARG_A);
      if (!x || !reduction_dims (st, red))
        return FALSE;
      if (!reduction_is_row (x, red))
        {
          g_ptr_array_add (cols, st);
          continue;
        }
      for (guint j = 0; j < x->rank; j++)
        if (x->shape[j] != 1)
          {
            if (red[j])
              rd[nr++] = x->shape[j];
            else
              kept[nk++] = x->shape[j];
          }
      if (rp->reds->len == 0)
        {
          memcpy (rp->kept, kept, sizeof kept);
          memcpy (rp->red, rd, sizeof rd);
          rp->nk = nk;
          rp->nr = nr;
        }
      else if (nk != rp->nk || nr != rp->nr || memcmp (kept, rp->kept, sizeof (int64_t) * nk) != 0
               || memcmp (rd, rp->red, sizeof (int64_t) * nr) != 0)
        return FALSE;
      g_ptr_array_add (rp->reds, st);
    }
  if (rp->reds->len == 0)
    return FALSE;
  R = cs_shape_numel (rp->red, rp->nr);
  if (R < 2)
    return FALSE;
  rp->G = R > 1024 ? 256 : 32;
  rp->T = (R % rp->G == 0 && R / rp->G <= 32) ? (int) (R / rp->G) : 0;
  for (guint i = 0; i < rp->reds->len; i++)
    {
      CsStmt *st = g_ptr_array_index (rp->reds, i);
      g_autoptr(GPtrArray) ys = g_ptr_array_new ();
      guint ph;

      g_hash_table_remove_all (seen);
      ph = 1 + row_dep_phase (g, arg_proxy (st, CS_ARG_A), red_phase, seen);
      g_array_append_val (rp->phase, ph);
      rp->n_phases = MAX (rp->n_phases, ph);
      cs_stmt_collect_outputs (st, ys);
      for (guint q = 0; q < ys->len; q++)
        g_hash_table_insert (red_phase, g_ptr_array_index (ys, q), GUINT_TO_POINTER (ph));
    }
  for (guint i = 0; i < cols->len; i++)
    {
      CsStmt *st = g_ptr_array_index (cols, i);
      CsProxy *y = row_col_sum (rp, st, uses, user_of, is_out);

      if (y && rp->cols->len < 4)
        {
          g_ptr_array_add (rp->cols, st);
          g_ptr_array_add (rp->col_out, y);
          continue;
        }
      g_hash_table_remove_all (seen);
      if (row_dep_phase (g, arg_proxy (st, CS_ARG_A), red_phase, seen) > 0)
        return FALSE;
    }
  return TRUE;
}

/* Context of a tensor of @shape in the row-fused kernel: its non-1 dims are the kept dims, then
 * (when @row) the reduced dims.  FALSE when the shape is neither. */
static gboolean
row_ctx (const RowPlan *rp, const char **oix, const char **rix, const int64_t *shape, guint rank,
         gboolean row, Ctx *c)
{
  int64_t n1[CS_MAX_DIMS];
  guint n = non1_dims (shape, rank, n1);
  guint k = 0;

  if (n != rp->nk + (row ? rp->nr : 0) || memcmp (n1, rp->kept, sizeof (int64_t) * rp->nk) != 0
      || (row && memcmp (n1 + rp->nk, rp->red, sizeof (int64_t) * rp->nr) != 0))
    return FALSE;
  memset (c, 0, sizeof *c);
  c->rank = rank;
  for (guint j = 0; j < rank; j++)
    {
      if (shape[j] == 1)
        {
          c->ix[j] = "0";
          continue;
        }
      c->ix[j] = k < rp->nk ? oix[k] : rix[k - rp->nk];
      k++;
    }
  return TRUE;
}

/* Index names for @n dims of extents @ext decomposed from @flat (one dim: @flat itself);
 * declarations appended to @decl. */
static void
row_names (Gen *g, const char *flat, const char *pfx, const int64_t *ext, guint n, const char **names,
           GString *decl, const char *ind)
{
  int64_t st[CS_MAX_DIMS];

  if (n == 1)
    {
      names[0] = flat;
      return;
    }
  contig_strides (ext, n, st);
  for (guint j = 0; j < n; j++)
    {
      names[j] = pool_printf (g, "%s%u", pfx, j);
      if (j == 0)
        g_string_append_printf (decl, "%sconst ix_t %s = %s / %" G_GINT64_FORMAT "LL;\n", ind, names[j], flat, st[j]);
      else
        g_string_append_printf (decl, "%sconst ix_t %s = (%s / %" G_GINT64_FORMAT "LL) %% %" G_GINT64_FORMAT "LL;\n",
                                ind, names[j], flat, st[j], ext[j]);
    }
}

/* The loop over a row's elements for lane `lane` of @G: fully unrolled when every lane has the
 * same count, up to 32 (all loads of the pass in flight at once), else unrolled by 4. */
static void
row_loop_head (GString *code, int64_t R, int G, gboolean vec)
{
  if (vec)
    g_string_append_printf (code, "#pragma unroll\n  for (int t_ = 0; t_ < %d; t_++)\n    {\n"
                            "      const ix_t r = ((t_ >> 3) * %d + lane) * 8 + (t_ & 7);\n", (int) (R / G), G);
  else if (R % G == 0 && R / G <= 32)
    g_string_append_printf (code, "#pragma unroll\n  for (int t_ = 0; t_ < %d; t_++)\n    {\n"
                            "      const ix_t r = lane + t_ * %d;\n", (int) (R / G), G);
  else
    g_string_append_printf (code, "#pragma unroll 4\n  for (ix_t r = lane; r < R; r += %d)\n    {\n", G);
}

/* Merges the lanes' states @pfx of reduction kind @k into one, the same in every lane of the row:
 * warp butterfly then lane 0's state (@G = 32), or warp states through shared memory merged by
 * every thread in the same order (@G = 256; @reads goes after a __syncthreads). */
static void
row_merge (Gen *g, GString *merges, GString *reads, RedKind k, const char *at, const char *pfx, int G)
{
  const char **cn = k == RED_VAR_MEAN ? comp_names_wf : comp_names_s;
  guint nc = k == RED_VAR_MEAN ? 3 : 1;

  shfl_merge (merges, k, at, pfx, "  ");
  if (G == 32)
    {
      for (guint c = 0; c < nc; c++)
        g_string_append_printf (merges, "  %s%s = __shfl_sync (0xffffffffu, %s%s, 0);\n", pfx, cn[c], pfx, cn[c]);
      return;
    }
  for (guint c = 0; c < nc; c++)
    g_string_append_printf (merges, "  __shared__ %s sh%s%s[8];\n  if ((threadIdx.x & 31) == 0)\n"
                            "    sh%s%s[threadIdx.x >> 5] = %s%s;\n", at, pfx, cn[c], pfx, cn[c], pfx, cn[c]);
  for (guint c = 0; c < nc; c++)
    g_string_append_printf (reads, "  %s%s = sh%s%s[0];\n", pfx, cn[c], pfx, cn[c]);
  g_string_append (reads, "  for (int w_ = 1; w_ < 8; w_++)\n    {\n");
  for (guint c = 0; c < nc; c++)
    g_string_append_printf (reads, "      const %s %so%s = sh%s%s[w_];\n", at, pfx, cn[c], pfx, cn[c]);
  acc_merge (reads, k, at, pfx, pool_printf (g, "%so", pfx), "      ");
  g_string_append (reads, "    }\n");
}

/* CASTSCOPE_ROW_LATEW=1: a one-row-a-warp kernel loads the weight vectors (row tensors the same
 * for every row) first read in its output pass at the start of that pass instead of before the
 * first, so that they do not hold registers through the reductions.  Off by default. */
static gboolean
row_late_weights (void)
{
  return env_knob ("CASTSCOPE_ROW_LATEW", 0, 1, 0) == 1;
}

/* The minimum blocks an SM of the warp-per-row kernels' launch bounds (what caps their
 * registers): 4, or CASTSCOPE_ROW_MINB (1-8). */
static int
row_min_blocks (void)
{
  return env_knob ("CASTSCOPE_ROW_MINB", 1, 8, 4);
}

/* Rows a warp of the row-fused kernel: 1, or (a warp a row, G = 32, with the row tensors in
 * 16-byte groups and no column sums) the rows a warp loads before its first row's passes, as
 * CASTSCOPE_ROW_RPW (2-4) asks.  Not the default: 2 and 3 rows a warp did not speed up the
 * LayerNorm forward at [8192, 768] (kernels/BENCH-RESULTS.md run 45). */
static int
row_rows_a_warp (Gen *g, const RowPlan *rp, int64_t O, int64_t R, int G, gboolean probe)
{
  /* a value above 4 asks for 4 */
  int rpw = MIN (env_knob ("CASTSCOPE_ROW_RPW", 1, G_MAXINT, 1), 4);
  int64_t row_bytes = 0;

  (void) R;
  if (G != 32 || rp->T <= 0 || rp->nr != 1 || rp->T % 8 != 0 || rpw < 2 || probe)
    return 1;
  /* the bytes of a row of the row tensors read by 16-byte loads (the probe's candidates) */
  for (guint q = 0; q < g->row_vkeys->len; q++)
    {
      RowVec *rv = g_hash_table_lookup (g->row_vcand, g_ptr_array_index (g->row_vkeys, q));

      if (rv->varying)
        row_bytes += (int64_t) rp->T * 32 * (int64_t) cs_dtype_size_bytes (cs_cuda_program_slot (g->p, rv->slot)->dtype);
    }
  /* no fewer blocks than 2 an SM; the rows staged in at most 48 KB of shared memory a block */
  while (rpw > 1 && ((O + 8 * rpw - 1) / (8 * rpw) < 2 * (int64_t) MAX (g->p->n_sms, 1)
                     || 8 * rpw * row_bytes > 48 * 1024))
    rpw--;
  return rpw;
}

/* Generates the row-fused kernel for @outs; sets @handled[i] for the outputs it stores (an
 * output of another shape that reads no row statistic is left to a pointwise kernel). */
static gboolean
gen_row_fused_emit (Gen *g, const RowPlan *rp, CsProxy **outs, guint n_outs, gboolean *handled,
                    gboolean probe, GError **error)
{
  CsCudaProgram *p = g->p;
  int64_t O = cs_shape_numel (rp->kept, rp->nk);
  int64_t R = cs_shape_numel (rp->red, rp->nr);
  int G = R > 1024 ? 256 : 32;
  const char *oix[CS_MAX_DIMS], *rix[CS_MAX_DIMS];
  g_autoptr(GString) code = g_string_new ("");
  g_autoptr(GString) rdec = g_string_new ("");
  g_autoptr(GString) row_body = g_string_new ("");
  g_autoptr(GString) row_stores = g_string_new ("");
  g_autoptr(GString) kept_body = g_string_new ("");
  g_autoptr(GString) kept_stores = g_string_new ("");
  g_autoptr(GPtrArray) row_outs = g_ptr_array_new ();
  g_autoptr(GPtrArray) row_vals = g_ptr_array_new ();
  g_autoptr(GPtrArray) kept_outs = g_ptr_array_new ();
  g_autoptr(GPtrArray) kept_vals = g_ptr_array_new ();
  g_autoptr(GString) col_adds = g_string_new ("");
  g_autoptr(GString) row_decl = g_string_new ("");
  g_autoptr(GString) row_post = g_string_new ("");
  g_autofree char *xs = NULL;
  guint slot, n_passes = 0;
  guint ncols = rp->cols->len;
  gsize header_len;
  int64_t blocks = G == 32 ? (O + 7) / 8 : O;
  int64_t P = 0;
  int rpw = 1;
  g_autoptr(GString) odecl = g_string_new ("");
  g_autoptr(GString) vinv = g_string_new ("");
  g_autoptr(GString) vvar = g_string_new ("");
  g_autoptr(GString) vrefs = g_string_new ("");
  g_autoptr(GString) vpre_rows = g_string_new ("");
  g_autoptr(GString) vlate = g_string_new ("");

  gen_begin (g);
  g->big |= O * R >= ((int64_t) 1 << 31) - 4096;
  g_string_append_printf (code, "  const ix_t O = %" G_GINT64_FORMAT "LL, R = %" G_GINT64_FORMAT "LL;\n", O, R);
  g_string_append_printf (code, "  const int lane = threadIdx.x %% %d;\n", G);
  if (ncols == 0)
    {
      rpw = row_rows_a_warp (g, rp, O, R, G, probe);
      if (rpw > 1)
        {
          blocks = (O + 8 * rpw - 1) / (8 * rpw);
          g_string_append_printf (code, "  const ix_t o_0 = ((ix_t) blockIdx.x * 8 + threadIdx.x / 32) * %d;\n", rpw);
          g_string_append (code, "  if (o_0 >= O)\n    return;\n");
        }
      else
        {
          g_string_append_printf (code, "  const ix_t o = (ix_t) blockIdx.x * %d + threadIdx.x / %d;\n", 256 / G, G);
          g_string_append (code, "  if (o >= O)\n    return;\n");
        }
    }
  else
    {
      /* Column sums: each block loops over rows, its lanes own fixed columns and keep their
       * sums in registers; per-block partials are summed by a second kernel. */
      blocks = MIN (blocks, (int64_t) MAX (p->n_sms, 1) * (G == 32 ? 4 : 2));
      P = blocks;
      for (guint c = 0; c < ncols; c++)
        g_string_append_printf (code, "  float ca%u[%d];\n#pragma unroll\n  for (int t_ = 0; t_ < %d; t_++)\n"
                                "    ca%u[t_] = 0.0f;\n", c, rp->T, rp->T, c);
      g_string_append_printf (code, "  for (ix_t o = (ix_t) blockIdx.x * %d + threadIdx.x / %d; o < O;"
                              " o += (ix_t) gridDim.x * %d)\n  {\n", 256 / G, G, 256 / G);
    }
  row_names (g, "o", "ko", rp->kept, rp->nk, oix, rpw > 1 ? odecl : code, "  ");
  row_names (g, "r", "kr", rp->red, rp->nr, rix, rdec, "      ");
  header_len = code->len;
  g->row_ix = oix;
  g->row_nk = rp->nk;
  g->row_rix = rix;
  g->row_nr = rp->nr;
  g->row_T = (R % G == 0 && R / G <= 32) ? (int) (R / G) : 0;
  g->row_probe = probe;
  g->row_cache_regs = 0;
  g_hash_table_remove_all (g->row_cache);
  g_string_truncate (g->row_cache_decl, 0);
  g->row_vec = rp->T > 0 && rp->nr == 1 && rp->T % 8 == 0;
  g_hash_table_remove_all (g->row_vname);
  if (!probe)
    for (guint q = 0; q < g->row_vkeys->len; q++)
      {
        const char *key = g_ptr_array_index (g->row_vkeys, q);
        RowVec *rv = g_hash_table_lookup (g->row_vcand, key);
        CsCudaSlot *sl = cs_cuda_program_slot (p, rv->slot);
        gboolean f32 = sl->dtype == CS_DTYPE_F32;
        guint regs = f32 ? (guint) rp->T : (guint) rp->T / 2;
        guint a;
        const char *name;

        if (g->row_cache_regs + regs > CS_ROW_CACHE_REGS)
          continue;
        g->row_cache_regs += regs;
        a = param_of (g, rv->slot, FALSE);
        name = pool_printf (g, "VL%u", g->n_vars++);
        g_hash_table_insert (g->row_vname, g_strdup (key), (gpointer) name);
        if (rpw > 1 && rv->varying)
          {
            /* the warp's rows by cp.async to shared memory (VSn[warp][q_], a lane's own 16-byte
             * chunks), each read back to VLn before its passes (vrefs) */
            guint nch = f32 ? (guint) rp->T / 4 : (guint) rp->T / 8;

            g_string_append_printf (vvar, "  union { %s v[%d]; %s e[%d]; } %s;\n",
                                    f32 ? "float4" : "uint4", nch, cs_cuda_storage_type (sl->dtype), rp->T, name);
            g_string_append_printf (vvar, "  __shared__ uint4 VS%s[8][%d][%u];\n", name, rpw, nch * 32);
            g_string_append_printf (vpre_rows, "#pragma unroll\n  for (int q_ = 0; q_ < %d; q_++)\n  {\n"
                                    "  const ix_t o = o_0 + q_;\n  if (o < O)\n  {\n%s#pragma unroll\n"
                                    "  for (int v_ = 0; v_ < %d; v_++)\n    {\n"
                                    "      const ix_t rv_ = (v_ * %d + lane) * 8;\n", rpw, odecl->str, rp->T / 8, G);
            if (f32)
              g_string_append_printf (vpre_rows, "      cs_cp_async16 (&VS%s[threadIdx.x / 32][q_][(2 * v_) * 32 + lane], a%u + %s);\n"
                                      "      cs_cp_async16 (&VS%s[threadIdx.x / 32][q_][(2 * v_ + 1) * 32 + lane], a%u + %s + 4);\n"
                                      "    }\n  }\n  }\n", name, a, rv->off, name, a, rv->off);
            else
              g_string_append_printf (vpre_rows, "      cs_cp_async16 (&VS%s[threadIdx.x / 32][q_][v_ * 32 + lane], a%u + %s);\n"
                                      "    }\n  }\n  }\n", name, a, rv->off);
            g_string_append_printf (vrefs, "#pragma unroll\n      for (int c_ = 0; c_ < %u; c_++)\n"
                                    "        *(uint4 *) &%s.v[c_] = VS%s[threadIdx.x / 32][q_][c_ * 32 + lane];\n",
                                    nch, name, name);
            continue;
          }
        {
          GString *d = rpw > 1 ? vinv : !rv->varying && rv->pass == g->row_out_pass && row_late_weights () ? vlate : code;

          g_string_append_printf (d, "  union { %s v[%d]; %s e[%d]; } %s;\n#pragma unroll\n"
                                  "  for (int v_ = 0; v_ < %d; v_++)\n    {\n"
                                  "      const ix_t rv_ = (v_ * %d + lane) * 8;\n",
                                  f32 ? "float4" : "uint4", f32 ? rp->T / 4 : rp->T / 8, cs_cuda_storage_type (sl->dtype),
                                  rp->T, name, rp->T / 8, G);
          if (f32)
            g_string_append_printf (d, "      %s.v[2 * v_] = *(const float4 *) (a%u + %s);\n"
                                    "      %s.v[2 * v_ + 1] = *(const float4 *) (a%u + %s + 4);\n    }\n",
                                    name, a, rv->off, name, a, rv->off);
          else
            g_string_append_printf (d, "      %s.v[v_] = *(const uint4 *) (a%u + %s);\n    }\n", name, a, rv->off);
        }
      }
  if (rpw > 1)
    {
      /* The warp's rows o_0 .. o_0 + rpw - 1: all their row tensors' copies to shared memory
       * (vpre_rows) issued at once; then each row's elements from there (vrefs), its weight
       * vector loads (vinv, from L1 after the first row: kept as 16-bit pairs in the loop
       * instead of floats hoisted out of it) and its passes. */
      g_string_append (code, vvar->str);
      g_string_append (code, vpre_rows->str);
      g_string_append (code, "  cs_cp_async_commit ();\n  cs_cp_async_wait0 ();\n");
      g_string_append_printf (code, "#pragma unroll 1\n  for (int q_ = 0; q_ < %d; q_++)\n  {\n"
                              "  const ix_t o = o_0 + q_;\n  if (o >= O)\n    break;\n", rpw);
      g_string_append (code, odecl->str);
      g_string_append (code, vrefs->str);
      g_string_append (code, vinv->str);
    }
  header_len = code->len;

  /* One pass over the row per group of independent reductions (var_mean: a sum, then the
   * centred squares about that mean in a second pass; exact where Welford's per-element
   * division made each lane a serial chain). */
  for (guint ph = 1; ph <= rp->n_phases; ph++)
    {
      g_autoptr(GString) accs = g_string_new ("");
      g_autoptr(GString) adds = g_string_new ("");
      g_autoptr(GString) merges = g_string_new ("");
      g_autoptr(GString) reads = g_string_new ("");
      g_autoptr(GString) regs = g_string_new ("");
      g_autoptr(GString) means = g_string_new ("");
      g_autoptr(GPtrArray) regs_new = g_ptr_array_new ();
      gboolean any_vm = FALSE;

      for (guint pass = 0; pass < 2; pass++)
        {
          if (pass == 1 && !any_vm)
            break;
          g->row_pass = n_passes + 1;
          g_hash_table_remove_all (g->memo);
          g_string_truncate (g->body, 0);
          g_string_truncate (accs, 0);
          g_string_truncate (adds, 0);
          g_string_truncate (merges, 0);
          g_string_truncate (reads, 0);
          for (guint i = 0; i < rp->reds->len; i++)
            {
              CsStmt *st = g_ptr_array_index (rp->reds, i);
              CsProxy *x = arg_proxy (st, CS_ARG_A);
              gboolean var_only;
              RedKind k = red_kind (cs_op_semantic (st->op)->id, &var_only);
              const char *at = (x->dtype == CS_DTYPE_F64 || !cs_dtype_is_float (x->dtype)) ? "double" : "float";
              const char *pfx = pool_printf (g, pass == 0 ? "p%u" : "p%uc", i);
              const char *v;
              Ctx xc;

              if (g_array_index (rp->phase, guint, i) != ph || (pass == 1 && k != RED_VAR_MEAN))
                continue;
              if (!row_ctx (rp, oix, rix, x->shape, x->rank, TRUE, &xc))
                return unsupported (error, st, "a row reduction of another shape");
              v = emit_value (g, x, &xc, error);
              if (!v)
                return FALSE;
              if (k == RED_VAR_MEAN)
                {
                  any_vm = TRUE;
                  if (pass == 1)
                    v = pool_printf (g, "((%s) (%s) - p%umu) * ((%s) (%s) - p%umu)", at, v, i, at, v, i);
                  k = RED_SUM;
                }
              acc_init (accs, k, at, pfx);
              acc_add (adds, k, at, pfx, v);
              row_merge (g, merges, reads, k, at, pfx, G);
              if (pass == 0 && red_kind (cs_op_semantic (st->op)->id, &var_only) == RED_VAR_MEAN)
                g_string_append_printf (means, "  const %s p%umu = p%us / (%s) %" G_GINT64_FORMAT ";\n", at, i, i,
                                        at, R);
            }
          g_string_append (code, accs->str);
          row_loop_head (code, R, G, g->row_vec);
          g_string_append (code, rdec->str);
          g_string_append (code, g->body->str);
          g_string_append (code, adds->str);
          g_string_append (code, "    }\n");
          g_string_append (code, merges->str);
          if (G != 32)
            {
              g_string_append (code, "  __syncthreads ();\n");
              g_string_append (code, reads->str);
            }
          if (pass == 0)
            g_string_append (code, means->str);
          n_passes++;
        }

      /* The statistics of this phase, as registers. */
      for (guint i = 0; i < rp->reds->len; i++)
        {
          CsStmt *st = g_ptr_array_index (rp->reds, i);
          CsProxy *x = arg_proxy (st, CS_ARG_A);
          gboolean var_only;
          RedKind k = red_kind (cs_op_semantic (st->op)->id, &var_only);
          const char *at = (x->dtype == CS_DTYPE_F64 || !cs_dtype_is_float (x->dtype)) ? "double" : "float";
          g_autoptr(GPtrArray) ys = g_ptr_array_new ();
          int64_t ks[CS_MAX_DIMS];
          gboolean red[CS_MAX_DIMS];
          guint nks = 0;
          double correction = 1.0;

          if (g_array_index (rp->phase, guint, i) != ph)
            continue;
          if (!reduction_dims (st, red))
            return unsupported (error, st, "this reduction form");
          if (k == RED_VAR_MEAN && !value_number (cs_stmt_arg (st, CS_ARG_CORRECTION), &correction))
            correction = 1.0;
          for (guint j = 0; j < x->rank; j++)
            if (!red[j])
              ks[nks++] = x->shape[j];
          cs_stmt_collect_outputs (st, ys);
          for (guint q = 0; q < ys->len && q < 2; q++)
            {
              CsProxy *y = g_ptr_array_index (ys, q);
              CsDtype dt = y->kind == CS_PROXY_TENSOR && y->typed ? y->dtype : x->dtype;
              const char *e;
              RowReg *rr;

              if (!dtype_supported (dt))
                return unsupported (error, st, "a reduction output dtype");
              if (k != RED_VAR_MEAN)
                e = pool_printf (g, "p%us", i);
              else if (q == 0)
                e = pool_printf (g, "(p%ucs / ((%s) %" G_GINT64_FORMAT " - (%s) %s))", i, at, R, at,
                                 float_literal (g, correction, at));
              else if (!var_only)
                e = pool_printf (g, "p%umu", i);
              else
                continue;
              rr = g_new0 (RowReg, 1);
              rr->name = pool_printf (g, "rg%u", g->n_vars++);
              rr->dtype = dt;
              if (y->kind == CS_PROXY_TENSOR && y->typed)
                {
                  rr->rank = y->rank;
                  if (y->rank > 0)   /* a rank-0 proxy's shape is NULL */
                    memcpy (rr->shape, y->shape, sizeof (int64_t) * y->rank);
                }
              else
                {
                  rr->rank = nks;
                  memcpy (rr->shape, ks, sizeof (int64_t) * nks);
                }
              g_string_append_printf (regs, "  const %s %s = %s;\n", ctype (dt), rr->name,
                                      round_wrap (g, dt, pool_printf (g, "(%s) (%s)", ctype (dt), e)));
              g_ptr_array_add (regs_new, y);
              g_ptr_array_add (regs_new, rr);
            }
        }
      g_string_append (code, regs->str);
      for (guint q = 0; q < regs_new->len; q += 2)
        g_hash_table_insert (g->reg, g_ptr_array_index (regs_new, q), g_ptr_array_index (regs_new, q + 1));
    }

  /* The outputs: row-shaped ones in a last pass, per-row ones from lane 0. */
  g->row_pass = n_passes + 1;
  if (probe)
    g->row_out_pass = g->row_pass;
  g_string_append (code, vlate->str);
  g_hash_table_remove_all (g->memo);
  g_string_truncate (g->body, 0);
  for (guint i = 0; i < n_outs; i++)
    {
      Ctx c;
      const char *v;

      if (g_ptr_array_find (row_outs, outs[i], NULL) || g_ptr_array_find (kept_outs, outs[i], NULL)
          || g_ptr_array_find (rp->col_out, outs[i], NULL))
        continue;
      if (g_hash_table_contains (g->reg, outs[i]))
        {
          /* A row statistic itself (var_mean's outputs may be untyped). */
          g_ptr_array_add (kept_outs, outs[i]);
          continue;
        }
      if (!row_ctx (rp, oix, rix, outs[i]->shape, outs[i]->rank, TRUE, &c))
        {
          g_autoptr(GHashTable) seen = g_hash_table_new (NULL, NULL);

          if (row_ctx (rp, oix, rix, outs[i]->shape, outs[i]->rank, FALSE, &c))
            g_ptr_array_add (kept_outs, outs[i]);
          else if (row_dep_phase (g, outs[i], rp->red_phase, seen) == 0)
            continue;
          else
            {
              g_set_error (error, CS_CUDA_ERROR, CS_CUDA_ERROR_UNSUPPORTED, "%s: output %s is not row-shaped",
                           g->label, outs[i]->name);
              return FALSE;
            }
          continue;
        }
      if (!dtype_supported (outs[i]->dtype))
        return unsupported (error, NULL, "an output dtype");
      v = emit_value (g, outs[i], &c, error);
      if (!v)
        return FALSE;
      g_ptr_array_add (row_outs, outs[i]);
      g_ptr_array_add (row_vals, (gpointer) v);
    }
  for (guint c = 0; c < ncols; c++)
    {
      CsStmt *st = g_ptr_array_index (rp->cols, c);
      CsProxy *x = arg_proxy (st, CS_ARG_A);
      const char *v;
      Ctx xc;

      if (!row_ctx (rp, oix, rix, x->shape, x->rank, TRUE, &xc))
        return unsupported (error, st, "a column sum of another shape");
      v = emit_value (g, x, &xc, error);
      if (!v)
        return FALSE;
      g_string_append_printf (col_adds, "      ca%u[t_] += (float) (%s);\n", c, v);
    }
  g_string_append (row_body, g->body->str);
  g_hash_table_remove_all (g->memo);
  g_string_truncate (g->body, 0);
  for (guint i = 0; i < kept_outs->len; i++)
    {
      CsProxy *y = g_ptr_array_index (kept_outs, i);
      RowReg *rr = g_hash_table_lookup (g->reg, y);
      const char *v;
      Ctx c;

      if (!rr && !dtype_supported (y->dtype))
        return unsupported (error, NULL, "an output dtype");
      if (rr)
        row_ctx (rp, oix, rix, rr->shape, rr->rank, FALSE, &c);
      else
        row_ctx (rp, oix, rix, y->shape, y->rank, FALSE, &c);
      v = emit_value (g, y, &c, error);
      if (!v)
        return FALSE;
      g_ptr_array_add (kept_vals, (gpointer) v);
    }
  g_string_append (kept_body, g->body->str);

  if (probe)
    return TRUE;

  /* Generated without a fault: now the output slots. */
  for (guint i = 0; i < n_outs; i++)
    handled[i] = g_ptr_array_find (row_outs, outs[i], NULL) || g_ptr_array_find (kept_outs, outs[i], NULL)
                 || g_ptr_array_find (rp->col_out, outs[i], NULL);
  for (guint i = 0; i < row_outs->len; i++)
    {
      CsProxy *y = g_ptr_array_index (row_outs, i);

      slot = cs_cuda_program_new_slot (p, y->dtype, y->shape, y->rank);
      if (g->row_vec && vec_type (y->dtype))
        {
          /* Gathered in a union, written after the pass by 16-byte stores. */
          gboolean f32 = y->dtype == CS_DTYPE_F32;
          guint a = param_of (g, slot, TRUE);
          const char *cv = y->dtype == CS_DTYPE_BF16 ? "cs_f2bf" : y->dtype == CS_DTYPE_F16 ? "cs_f2h" : "";

          g_string_append_printf (row_decl, "  union { %s v[%d]; %s e[%d]; } VW%u;\n", f32 ? "float4" : "uint4",
                                  f32 ? rp->T / 4 : rp->T / 8, cs_cuda_storage_type (y->dtype), rp->T, a);
          if (y->dtype == CS_DTYPE_BF16)
            g_string_append_printf (row_stores, "      VW%u.e[t_] = %s;\n", a,
                                    bf_store (g, g_ptr_array_index (row_vals, i)));
          else
            g_string_append_printf (row_stores, "      VW%u.e[t_] = %s ((float) (%s));\n", a, cv,
                                    (const char *) g_ptr_array_index (row_vals, i));
          g_string_append_printf (row_post, "#pragma unroll\n  for (int v_ = 0; v_ < %d; v_++)\n    {\n"
                                  "      const ix_t rv_ = (v_ * %d + lane) * 8;\n", rp->T / 8, G);
          if (f32)
            g_string_append_printf (row_post, "      *(float4 *) (a%u + o * R + rv_) = VW%u.v[2 * v_];\n"
                                    "      *(float4 *) (a%u + o * R + rv_ + 4) = VW%u.v[2 * v_ + 1];\n    }\n",
                                    a, a, a, a);
          else
            g_string_append_printf (row_post, "      *(uint4 *) (a%u + o * R + rv_) = VW%u.v[v_];\n    }\n", a, a);
        }
      else
        store_stmt (g, row_stores, slot, "o * R + r", g_ptr_array_index (row_vals, i));
      cs_cuda_program_bind (p, y, slot);
    }
  for (guint i = 0; i < kept_outs->len; i++)
    {
      CsProxy *y = g_ptr_array_index (kept_outs, i);
      RowReg *rr = g_hash_table_lookup (g->reg, y);

      if (rr)
        slot = cs_cuda_program_new_slot (p, rr->dtype, rr->shape, rr->rank);
      else
        slot = cs_cuda_program_new_slot (p, y->dtype, y->shape, y->rank);
      store_stmt (g, kept_stores, slot, "o", g_ptr_array_index (kept_vals, i));
      cs_cuda_program_bind (p, y, slot);
    }
  if (row_outs->len || ncols)
    {
      g_string_append (code, row_decl->str);
      row_loop_head (code, R, G, g->row_vec);
      g_string_append (code, rdec->str);
      g_string_append (code, row_body->str);
      g_string_append (code, row_stores->str);
      g_string_append (code, col_adds->str);
      g_string_append (code, "    }\n");
      g_string_append (code, row_post->str);
    }
  if (kept_outs->len)
    {
      g_string_append (code, "  if (lane == 0)\n    {\n");
      g_string_append (code, kept_body->str);
      g_string_append (code, kept_stores->str);
      g_string_append (code, "    }\n");
    }
  if (rpw > 1)
    g_string_append (code, "  }\n");
  if (ncols)
    {
      /* End of the row loop; then each block's column sums (a warp per row: the 8 warps'
       * sums merged through shared memory in a fixed order). */
      g_string_append (code, G == 256 ? "  __syncthreads ();\n  }\n" : "  }\n");
      if (G == 32)
        g_string_append_printf (code, "  __shared__ float csh[%" G_GINT64_FORMAT "];\n", 8 * R);
      for (guint c = 0; c < ncols; c++)
        {
          int64_t pshape[1] = { P * R };
          guint part = cs_cuda_program_new_slot (p, CS_DTYPE_F32, pshape, 1);
          guint pa = param_of (g, part, TRUE);

          g_ptr_array_add (g->row_parts, GUINT_TO_POINTER (part));
          if (G == 256)
            g_string_append_printf (code, "#pragma unroll\n  for (int t_ = 0; t_ < %d; t_++)\n"
                                    "    a%u[(ix_t) blockIdx.x * R + %s] = ca%u[t_];\n", rp->T, pa,
                                    g->row_vec ? "((t_ >> 3) * 256 + lane) * 8 + (t_ & 7)" : "lane + t_ * 256", c);
          else
            g_string_append_printf (code, "  __syncthreads ();\n#pragma unroll\n  for (int t_ = 0; t_ < %d; t_++)\n"
                                    "    csh[(threadIdx.x >> 5) * R + lane + t_ * 32] = ca%u[t_];\n  __syncthreads ();\n"
                                    "  for (int q_ = threadIdx.x; q_ < R; q_ += 256)\n    {\n"
                                    "      float s_ = 0.0f;\n      for (int w_ = 0; w_ < 8; w_++)\n"
                                    "        s_ += csh[w_ * R + q_];\n"
                                    "      a%u[(ix_t) blockIdx.x * R + q_] = s_;\n    }\n", rp->T, c, pa);
        }
    }
  g_string_insert (code, header_len, g->row_cache_decl->str);
  /* A warp per row: at least 4 blocks (32 warps) per SM, so that rows overlap each other's
   * passes (measured, run 11: LayerNorm d=768 forward 16.8 -> 14.4 us, backward 39.1 -> 29.6 us;
   * a block per row is best left alone: RMSNorm d=4096 45.5 -> 57.8 us). */
  g->min_blocks = G == 32 ? row_min_blocks () : 0;
  {
    CsProxy *x0 = arg_proxy (g_ptr_array_index (rp->reds, 0), CS_ARG_A);

    xs = shape_str (x0->shape, x0->rank);
  }
  gen_finish (g, code->str,
              g_strdup_printf ("%s row-fused %s (%" G_GINT64_FORMAT " rows of %" G_GINT64_FORMAT ", %u reductions in %u passes, %u+%u out, %u col sums%s)",
                               g->label, xs, O, R, rp->reds->len, n_passes, row_outs->len, kept_outs->len, ncols,
                               rpw > 1 ? pool_printf (g, ", %d rows a warp", rpw) : ""),
              (unsigned int) blocks, 1, 256, 1);
  g->min_blocks = 0;

  if (ncols)
    {
      /* The column sums: a block is 32 columns x 8 lanes of blocks' partials; lane y adds the
       * partials of blocks y, y + 8, ... in order (the loop unrolled whole up to 64 partials a
       * lane, so that its loads are all in flight before the first add), the 8 lane sums are
       * added in order through shared memory (a fixed order: the same sum every launch), and the
       * first lane stores the output (cast to its dtype when the sum's only use was that cast). */
      g_autoptr(GString) fin = g_string_new ("");
      const int64_t nj = (P + 7) / 8;

      gen_begin (g);
      g_string_append_printf (fin, "  const ix_t R = %" G_GINT64_FORMAT "LL;\n"
                              "  const ix_t c_ = (ix_t) blockIdx.x * 32 + threadIdx.x;\n", R);
      for (guint c = 0; c < ncols; c++)
        {
          CsProxy *y = g_ptr_array_index (rp->col_out, c);
          guint part = GPOINTER_TO_UINT (g_ptr_array_index (g->row_parts, c));
          guint pa = param_of (g, part, FALSE);

          slot = cs_cuda_program_new_slot (p, y->dtype, y->shape, y->rank);
          g_string_append (fin, "  {\n    float s_ = 0.0f;\n");
          if (nj <= 64)
            g_string_append_printf (fin, "    if (c_ < R)\n#pragma unroll\n"
                                    "      for (int j_ = 0; j_ < %" G_GINT64_FORMAT "; j_++)\n        {\n"
                                    "          const ix_t t_ = threadIdx.y + j_ * 8;\n%s"
                                    "          s_ += a%u[t_ * R + c_];\n        }\n",
                                    nj, P % 8 ? pool_printf (g, "          if (t_ >= %" G_GINT64_FORMAT ")\n            break;\n", P) : "", pa);
          else
            g_string_append_printf (fin, "    if (c_ < R)\n#pragma unroll 16\n"
                                    "      for (ix_t t_ = threadIdx.y; t_ < %" G_GINT64_FORMAT "LL; t_ += 8)\n"
                                    "        s_ += a%u[t_ * R + c_];\n", P, pa);
          g_string_append_printf (fin, "    __shared__ float fsh%u[8][33];\n    fsh%u[threadIdx.y][threadIdx.x] = s_;\n"
                                  "    __syncthreads ();\n    if (threadIdx.y == 0 && c_ < R)\n      {\n"
                                  "        float f_ = 0.0f;\n        for (int y_ = 0; y_ < 8; y_++)\n"
                                  "          f_ += fsh%u[y_][threadIdx.x];\n", c, c, c);
          store_stmt (g, fin, slot, "c_", round_wrap (g, y->dtype, "f_"));
          g_string_append (fin, "      }\n  }\n");
          cs_cuda_program_bind (p, y, slot);
        }
      gen_finish (g, fin->str, g_strdup_printf ("%s col sums finalize (%u x %" G_GINT64_FORMAT " over %" G_GINT64_FORMAT " blocks)",
                                                g->label, ncols, R, P),
                  (unsigned int) MAX ((R + 31) / 32, 1), 1, 32, 8);
    }
  return TRUE;
}

/* The row-fused kernel for @outs: a first emission finds the row elements read in more than one
 * pass, the second keeps those in registers (up to CS_ROW_CACHE_REGS per thread). */
static gboolean
gen_row_fused (Gen *g, const RowPlan *rp, CsProxy **outs, guint n_outs, gboolean *handled, GError **error)
{
  gboolean ok;

  g->row_seen = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  g->row_reused = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  g->row_cache = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  g->row_cache_decl = g_string_new ("");
  g->row_parts = g_ptr_array_new ();
  g->row_vkeys = g_ptr_array_new_with_free_func (g_free);
  g->row_vcand = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  g->row_vname = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  ok = gen_row_fused_emit (g, rp, outs, n_outs, handled, TRUE, error);
  g_hash_table_remove_all (g->reg);
  if (ok)
    ok = gen_row_fused_emit (g, rp, outs, n_outs, handled, FALSE, error);
  g_clear_pointer (&g->row_seen, g_hash_table_unref);
  g_clear_pointer (&g->row_reused, g_hash_table_unref);
  g_clear_pointer (&g->row_cache, g_hash_table_unref);
  g_clear_pointer (&g->row_parts, g_ptr_array_unref);
  g_clear_pointer (&g->row_vkeys, g_ptr_array_unref);
  g_clear_pointer (&g->row_vcand, g_hash_table_unref);
  g_clear_pointer (&g->row_vname, g_hash_table_unref);
  g->row_vec = FALSE;
  g_string_free (g->row_cache_decl, TRUE);
  g->row_cache_decl = NULL;
  g->row_T = 0;
  g->row_probe = FALSE;
  return ok;
}

/* The region output that reduction @st's only use converts it to, or NULL: the reduction
 * stores that output itself (the cast is the store's conversion). */
static CsProxy *
reduction_epilogue (CsStmt *st, GHashTable *uses, GHashTable *user_of, GHashTable *is_out)
{
  g_autoptr(GPtrArray) ro = g_ptr_array_new ();
  CsProxy *y, *z;
  CsStmt *user;

  cs_stmt_collect_outputs (st, ro);
  if (ro->len != 1 || GPOINTER_TO_UINT (g_hash_table_lookup (uses, g_ptr_array_index (ro, 0))) != 1)
    return NULL;
  y = g_ptr_array_index (ro, 0);
  user = g_hash_table_lookup (user_of, y);
  z = user ? cs_stmt_get_output (user) : NULL;
  if (user && cs_op_semantic (user->op)->id == CS_OP_PRIM_CONVERT_ELEMENT_TYPE && z
      && z->kind == CS_PROXY_TENSOR && cs_dtype_is_float (z->dtype) && y->kind == CS_PROXY_TENSOR
      && same_shape (y, z) && g_hash_table_contains (is_out, z))
    return z;
  return NULL;
}

gboolean
cs_cuda_codegen_region (CsCudaProgram *p, CsStmt **prims, guint n_prims, CsProxy **outs,
                        guint n_outs, const char *label, GError **error)
{
  Gen g = { 0 };
  g_autofree gboolean *done = g_new0 (gboolean, MAX (n_outs, 1));
  g_autofree guint *slots = g_new0 (guint, MAX (n_outs, 1));
  g_autofree CsProxy **group = g_new0 (CsProxy *, MAX (n_outs, 1));
  g_autofree CsProxy **alias = g_new0 (CsProxy *, MAX (n_outs, 1));
  g_autoptr(GHashTable) uses = g_hash_table_new (NULL, NULL);
  g_autoptr(GHashTable) user_of = g_hash_table_new (NULL, NULL);
  g_autoptr(GHashTable) is_out = g_hash_table_new (NULL, NULL);
  RowPlan rp = { 0 };
  gboolean fuse_rows;
  gboolean ok = FALSE;

  g.p = p;
  g.def = g_hash_table_new (NULL, NULL);
  g.mat = g_hash_table_new (NULL, NULL);
  g.pool = g_string_chunk_new (4096);
  g.body = g_string_new ("");
  g.memo = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  g.params = g_array_new (FALSE, FALSE, sizeof (guint));
  g.is_out = g_array_new (FALSE, FALSE, sizeof (gboolean));
  g.label = label;
  g.reg = g_hash_table_new_full (NULL, NULL, NULL, g_free);
  g.vec_loads = g_array_new (FALSE, FALSE, sizeof (guint));
  rp.reds = g_ptr_array_new ();
  rp.phase = g_array_new (FALSE, FALSE, sizeof (guint));
  rp.red_phase = g_hash_table_new (NULL, NULL);
  rp.cols = g_ptr_array_new ();
  rp.col_out = g_ptr_array_new ();

  for (guint i = 0; i < n_prims; i++)
    {
      g_autoptr(GPtrArray) o = g_ptr_array_new ();

      if (prims[i]->kind != CS_STMT_CALL)
        continue;
      cs_stmt_collect_outputs (prims[i], o);
      for (guint j = 0; j < o->len; j++)
        g_hash_table_insert (g.def, g_ptr_array_index (o, j), prims[i]);
    }

  /* Uses of every value (prim operands and region outputs), for the reduction epilogue. */
  for (guint i = 0; i < n_prims; i++)
    {
      g_autoptr(GPtrArray) ins = g_ptr_array_new ();

      if (prims[i]->kind != CS_STMT_CALL)
        continue;
      cs_stmt_collect_inputs (prims[i], ins);
      for (guint j = 0; j < ins->len; j++)
        {
          gpointer k = g_ptr_array_index (ins, j);

          g_hash_table_insert (uses, k, GUINT_TO_POINTER (GPOINTER_TO_UINT (g_hash_table_lookup (uses, k)) + 1));
          g_hash_table_insert (user_of, k, prims[i]);
        }
    }
  for (guint i = 0; i < n_outs; i++)
    {
      g_hash_table_insert (uses, outs[i], GUINT_TO_POINTER (GPOINTER_TO_UINT (g_hash_table_lookup (uses, outs[i])) + 1));
      g_hash_table_add (is_out, outs[i]);
    }

  /* 0. One row-fused kernel for the row reductions and the rest of the region, when they
   *    share a row shape (normalisations, softmax). */
  fuse_rows = row_plan (&g, prims, n_prims, &rp, uses, user_of, is_out);

  /* 1. Reductions, in trace order (the row ones later when fused). */
  for (guint i = 0; i < n_prims; i++)
    if (prims[i]->kind == CS_STMT_CALL && is_reduction (prims[i])
        && !(fuse_rows && (g_ptr_array_find (rp.reds, prims[i], NULL) || g_ptr_array_find (rp.cols, prims[i], NULL))))
      if (!gen_reduction (&g, prims[i], outs, n_outs, reduction_epilogue (prims[i], uses, user_of, is_out), error))
        goto out;

  /* 2. Outputs already produced: passthrough inputs and reduction results. */
mark_done:
  for (guint i = 0; i < n_outs; i++)
    {
      if (outs[i]->kind != CS_PROXY_TENSOR && !g_hash_table_contains (g.mat, outs[i])
          && !(fuse_rows && g_hash_table_contains (rp.red_phase, outs[i])))
        {
          g_set_error (error, CS_CUDA_ERROR, CS_CUDA_ERROR_UNSUPPORTED,
                       "%s: output %s is not a tensor", label, outs[i]->name);
          goto out;
        }
      if (g_hash_table_contains (g.mat, outs[i])
          || (!g_hash_table_contains (g.def, outs[i]) && cs_cuda_program_lookup (p, outs[i]) >= 0))
        done[i] = TRUE;
    }

  /* 3a. An output that is a reshape of another output of this region is a view of it, not
   *     a second copy of the same bytes (Thunder's regions often return both). */
  for (guint i = 0; i < n_outs; i++)
    {
      CsStmt *d = done[i] ? NULL : g_hash_table_lookup (g.def, outs[i]);
      CsOpId id = d ? cs_op_semantic (d->op)->id : CS_OP_OPAQUE;
      CsValue *src = id == CS_OP_PRIM_RESHAPE || id == CS_OP_PRIM_SHALLOW_COPY ? cs_stmt_arg (d, CS_ARG_A) : NULL;

      if (!d || (id != CS_OP_PRIM_RESHAPE && id != CS_OP_PRIM_SHALLOW_COPY) || !src
          || src->kind != CS_VALUE_PROXY)
        continue;
      for (guint j = 0; j < n_outs; j++)
        if (j != i && outs[j] == src->u.proxy && !alias[j]
            /* its source stays contiguous (not laid out for a transpose or in a cat) */
            && !g_hash_table_contains (p->want_perm, outs[j]) && !g_hash_table_contains (p->place_of, outs[j]))
          {
            alias[i] = outs[j];
            done[i] = TRUE;
          }
    }

  /* 3b. An output that is a reshape (or shallow copy) of a contiguous region input is a view
   *     of that input (Thunder's backward regions that only reshape the cotangent). */
  for (guint i = 0; i < n_outs; i++)
    {
      CsStmt *d = done[i] ? NULL : g_hash_table_lookup (g.def, outs[i]);
      CsOpId id = d ? cs_op_semantic (d->op)->id : CS_OP_OPAQUE;
      CsValue *src = id == CS_OP_PRIM_RESHAPE || id == CS_OP_PRIM_SHALLOW_COPY ? cs_stmt_arg (d, CS_ARG_A) : NULL;
      gint ss;

      if (!d || (id != CS_OP_PRIM_RESHAPE && id != CS_OP_PRIM_SHALLOW_COPY) || !src
          || src->kind != CS_VALUE_PROXY || g_hash_table_contains (g.def, src->u.proxy)
          || outs[i]->kind != CS_PROXY_TENSOR || src->u.proxy->kind != CS_PROXY_TENSOR
          || src->u.proxy->dtype != outs[i]->dtype || (ss = cs_cuda_program_lookup (p, src->u.proxy)) < 0
          || !cs_cuda_slot_is_contiguous (cs_cuda_program_slot (p, (guint) ss))
          || cs_cuda_slot_numel (cs_cuda_program_slot (p, (guint) ss)) != (gsize) cs_shape_numel (outs[i]->shape, outs[i]->rank))
        continue;
      cs_cuda_program_bind (p, outs[i], cs_cuda_program_reshape_view (p, (guint) ss, outs[i]->shape, outs[i]->rank));
      done[i] = TRUE;
    }

  /* 3c. An output that is a slice of a region input is a view of that input (ltorch.split's
   *     pieces): its offset moves to the slice's start, its strides scale by the steps. */
  for (guint i = 0; i < n_outs; i++)
    {
      CsStmt *d = done[i] ? NULL : g_hash_table_lookup (g.def, outs[i]);
      CsProxy *x = d && cs_op_semantic (d->op)->id == CS_OP_PRIM_SLICE_PRIM ? arg_proxy (d, CS_ARG_A) : NULL;
      int64_t start[CS_MAX_DIMS], end[CS_MAX_DIMS], step[CS_MAX_DIMS];
      guint n1 = 0, n2 = 0, n3 = 0;
      gint ss;
      CsCudaSlot v;
      gboolean ok_view = TRUE;

      if (x == NULL || g_hash_table_contains (g.def, x) || outs[i]->kind != CS_PROXY_TENSOR
          || x->dtype != outs[i]->dtype || x->rank != outs[i]->rank || (ss = cs_cuda_program_lookup (p, x)) < 0
          || !schema_ints (d, CS_ARG_START_INDICES, start, &n1) || !schema_ints (d, CS_ARG_END_INDICES, end, &n2)
          || n1 != x->rank)
        continue;
      if (!schema_ints (d, CS_ARG_STRIDES, step, &n3))
        for (guint j = 0; j < x->rank; j++)
          step[j] = 1;
      else if (n3 != x->rank)
        continue;
      v = *cs_cuda_program_slot (p, (guint) ss);
      if (v.rank != x->rank)
        continue;
      for (guint j = 0; j < v.rank; j++)
        {
          if (step[j] < 1 || start[j] < 0 || (outs[i]->shape[j] > 0 && start[j] + (outs[i]->shape[j] - 1) * step[j] >= v.shape[j]))
            ok_view = FALSE;
          v.offset += start[j] * v.strides[j];
          v.strides[j] *= step[j];
          v.shape[j] = outs[i]->shape[j];
        }
      if (!ok_view)
        continue;
      g_array_append_val (p->slots, v);
      cs_cuda_program_bind (p, outs[i], p->slots->len - 1);
      done[i] = TRUE;
    }

  if (fuse_rows)
    {
      g_autofree CsProxy **todo = g_new0 (CsProxy *, MAX (n_outs, 1));
      g_autofree guint *todo_at = g_new0 (guint, MAX (n_outs, 1));
      g_autofree gboolean *handled = g_new0 (gboolean, MAX (n_outs, 1));
      guint n_todo = 0;
      g_autoptr(GError) ferr = NULL;

      for (guint i = 0; i < n_outs; i++)
        if (!done[i])
          {
            todo_at[n_todo] = i;
            todo[n_todo++] = outs[i];
          }
      fuse_rows = FALSE;
      if (gen_row_fused (&g, &rp, todo, n_todo, handled, &ferr))
        for (guint i = 0; i < n_todo; i++)
          done[todo_at[i]] = handled[i];
      else
        {
          /* Not row-local after all: the row reductions as their own kernels, then pointwise. */
          g_debug ("%s: no row-fused kernel: %s", label, ferr->message);
          g_hash_table_remove_all (g.reg);
          for (guint i = 0; i < n_prims; i++)
            {
              CsStmt *st = prims[i];

              if ((g_ptr_array_find (rp.reds, st, NULL) || g_ptr_array_find (rp.cols, st, NULL))
                  && !gen_reduction (&g, st, outs, n_outs, reduction_epilogue (st, uses, user_of, is_out), error))
                goto out;
            }
          goto mark_done;
        }
      g_hash_table_remove_all (g.reg);
      g.row_ix = NULL;
      g.row_nk = 0;
    }

  /* 3. The rest: one pointwise kernel per output shape. */
  for (guint i = 0; i < n_outs; i++)
    {
      guint n = 0;

      if (done[i])
        continue;
      for (guint j = i; j < n_outs; j++)
        if (!done[j] && same_shape (outs[i], outs[j]))
          {
            gboolean dup = FALSE;

            for (guint q = 0; q < n; q++)
              if (group[q] == outs[j])
                dup = TRUE;
            done[j] = TRUE;
            if (dup)
              continue;
            if (!dtype_supported (outs[j]->dtype))
              {
                g_set_error (error, CS_CUDA_ERROR, CS_CUDA_ERROR_UNSUPPORTED, "%s: dtype %s of %s",
                             label, cs_dtype_short_name (outs[j]->dtype), outs[j]->name);
                goto out;
              }
            group[n] = outs[j];
            slots[n] = cs_cuda_program_new_output_slot (p, outs[j]);
            n++;
          }
      if (!gen_pointwise (&g, group, slots, n, outs[i]->shape, outs[i]->rank, error))
        goto out;
      for (guint q = 0; q < n; q++)
        cs_cuda_program_bind (p, group[q], slots[q]);
    }
  for (guint i = 0; i < n_outs; i++)
    if (alias[i])
      {
        gint src = cs_cuda_program_lookup (p, alias[i]);

        if (src < 0)
          {
            g_set_error (error, CS_CUDA_ERROR, CS_CUDA_ERROR_UNSUPPORTED, "%s: alias source %s missing",
                         label, alias[i]->name);
            goto out;
          }
        cs_cuda_program_bind (p, outs[i], cs_cuda_program_reshape_view (p, (guint) src, outs[i]->shape,
                                                                        outs[i]->rank));
      }
  ok = TRUE;

out:
  g_ptr_array_unref (rp.reds);
  g_array_unref (rp.phase);
  g_hash_table_unref (rp.red_phase);
  g_ptr_array_unref (rp.cols);
  g_ptr_array_unref (rp.col_out);
  g_hash_table_unref (g.reg);
  g_array_unref (g.vec_loads);
  g_hash_table_unref (g.def);
  g_hash_table_unref (g.mat);
  g_string_chunk_free (g.pool);
  g_string_free (g.body, TRUE);
  g_hash_table_unref (g.memo);
  g_array_unref (g.params);
  g_array_unref (g.is_out);
  return ok;
}

gboolean
cs_cuda_codegen_copy (CsCudaProgram *p, guint src, const char *label, guint *out_slot, GError **error)
{
  Gen g = { 0 };
  CsCudaSlot s = *cs_cuda_program_slot (p, src);
  g_autoptr(GString) code = g_string_new ("");
  g_autoptr(GString) stores = g_string_new ("");
  g_autofree char *ss = shape_str (s.shape, s.rank);
  int64_t N = cs_shape_numel (s.shape, s.rank);
  int64_t blocks = (N + 255) / 256;
  guint dst;
  const char *v;
  Ctx c = { 0 };
  CsCudaStep *step;

  if (!dtype_supported (s.dtype))
    {
      g_set_error (error, CS_CUDA_ERROR, CS_CUDA_ERROR_UNSUPPORTED, "%s: copy of dtype %s", label,
                   cs_dtype_short_name (s.dtype));
      return FALSE;
    }
  dst = cs_cuda_program_new_slot (p, s.dtype, s.shape, s.rank);
  g.p = p;
  g.pool = g_string_chunk_new (1024);
  g.body = g_string_new ("");
  g.memo = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  g.params = g_array_new (FALSE, FALSE, sizeof (guint));
  g.is_out = g_array_new (FALSE, FALSE, sizeof (gboolean));
  g.label = label;
  decompose (&g, "i", s.shape, s.rank, &c);
  v = emit_load (&g, src, &c);
  store_stmt (&g, stores, dst, "i", v);
  g_string_append_printf (code, "  const ix_t n = %" G_GINT64_FORMAT "LL;\n", N);
  g_string_append (code, "  for (ix_t i = (ix_t) blockIdx.x * blockDim.x + threadIdx.x; i < n;"
                         " i += (ix_t) gridDim.x * blockDim.x)\n    {\n");
  g_string_append (code, g.body->str);
  g_string_append (code, stores->str);
  g_string_append (code, "    }\n");
  if (blocks > 65535LL * 64)
    blocks = 65535LL * 64;
  step = gen_finish (&g, code->str, g_strdup_printf ("%s copy %s", label, ss), (unsigned int) MAX (blocks, 1), 1, 256, 1);
  step->kind_name = "copy";
  g_string_chunk_free (g.pool);
  g_string_free (g.body, TRUE);
  g_hash_table_unref (g.memo);
  g_array_unref (g.params);
  g_array_unref (g.is_out);
  *out_slot = dst;
  return TRUE;
}

/**
 * cs_cuda_codegen_scatter_add:
 * @a: slot of the base tensor; @idx: slot of the indices (i64/i32); @val: slot of the values
 * @dim: the scattered dim
 * @y: output proxy
 *
 * prims.scatter_add(a, index, value, dim): y = a, then y[..., index[e], ...] += value[e] for
 * every element e of index (torch.Tensor.scatter_add_).  A copy kernel then an atomicAdd
 * kernel (f32 and f64 outputs only); indices are clamped into range.
 */
gboolean
cs_cuda_codegen_scatter_add (CsCudaProgram *p, guint a, guint idx, guint val, int64_t dim,
                             const CsProxy *y, const char *label, guint *out_slot, GError **error)
{
  Gen g = { 0 };
  CsCudaSlot is = *cs_cuda_program_slot (p, idx);
  CsCudaSlot ys;
  g_autoptr(GString) code = g_string_new ("");
  int64_t N = cs_shape_numel (is.shape, is.rank);
  int64_t blocks = (N + 255) / 256;
  guint dst, pa;
  const char *iv, *vv, *cl;
  Ctx c = { 0 };
  int64_t st[CS_MAX_DIMS];

  if (y->dtype != CS_DTYPE_F32 && y->dtype != CS_DTYPE_F64)
    {
      g_set_error (error, CS_CUDA_ERROR, CS_CUDA_ERROR_UNSUPPORTED, "%s: scatter_add into %s (f32/f64 only)",
                   label, cs_dtype_short_name (y->dtype));
      return FALSE;
    }
  if (dim < 0)
    dim += y->rank;
  if (dim < 0 || dim >= (int64_t) y->rank || is.rank != y->rank)
    {
      g_set_error (error, CS_CUDA_ERROR, CS_CUDA_ERROR_UNSUPPORTED, "%s: scatter_add dim/rank", label);
      return FALSE;
    }
  if (!cs_cuda_codegen_copy (p, a, label, &dst, error))
    return FALSE;
  ys = *cs_cuda_program_slot (p, dst);
  contig_strides (ys.shape, ys.rank, st);
  g.p = p;
  g.pool = g_string_chunk_new (1024);
  g.body = g_string_new ("");
  g.memo = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  g.params = g_array_new (FALSE, FALSE, sizeof (guint));
  g.is_out = g_array_new (FALSE, FALSE, sizeof (gboolean));
  g.label = label;
  decompose (&g, "i", is.shape, is.rank, &c);
  iv = emit_load (&g, idx, &c);
  vv = emit_load (&g, val, &c);
  cl = clamp_idx (&g, iv, ys.shape[dim] - 1);
  pa = param_of (&g, dst, TRUE);
  g_string_append_printf (code, "  const ix_t n = %" G_GINT64_FORMAT "LL;\n", N);
  g_string_append (code, "  for (ix_t i = (ix_t) blockIdx.x * blockDim.x + threadIdx.x; i < n;"
                         " i += (ix_t) gridDim.x * blockDim.x)\n    {\n");
  g_string_append (code, g.body->str);
  g_string_append_printf (code, "      atomicAdd (&a%u[", pa);
  for (guint j = 0; j < ys.rank; j++)
    g_string_append_printf (code, "%s%s * %" G_GINT64_FORMAT "LL", j ? " + " : "", j == (guint) dim ? cl : c.ix[j], st[j]);
  if (ys.rank == 0)
    g_string_append (code, "0");
  g_string_append_printf (code, "], (%s) %s);\n    }\n", cs_cuda_storage_type (y->dtype), vv);
  if (blocks > 65535LL * 64)
    blocks = 65535LL * 64;
  gen_finish (&g, code->str, g_strdup_printf ("%s scatter_add", label), (unsigned int) MAX (blocks, 1), 1, 256, 1);
  g_string_chunk_free (g.pool);
  g_string_free (g.body, TRUE);
  g_hash_table_unref (g.memo);
  g_array_unref (g.params);
  g_array_unref (g.is_out);
  *out_slot = dst;
  return TRUE;
}

/**
 * cs_cuda_codegen_embedding_backward:
 * @grad: slot of the output gradient [..., D]; @idx: slot of the indices [...]
 * @padding_idx: rows with this index get no gradient (< 0: none)
 * @y: output proxy [num_weights, D]
 *
 * embedding_backward (torch.ops.aten.embedding_backward, dense, no scale_grad_by_freq):
 * dW[idx[i], :] += grad[i, :].  An f32 accumulator is zeroed, filled with atomicAdd (the
 * order of additions varies between runs: f32 rounding differences only), then stored in y's
 * dtype.  Indices are clamped into range.
 */
gboolean
cs_cuda_codegen_embedding_backward (CsCudaProgram *p, guint grad, guint idx, int64_t padding_idx,
                                    const CsProxy *y, const char *label, guint *out_slot, GError **error)
{
  Gen g = { 0 };
  CsCudaSlot gs = *cs_cuda_program_slot (p, grad);
  CsCudaSlot is = *cs_cuda_program_slot (p, idx);
  int64_t V, D, N, rows;
  guint acc, dst, pa;
  int64_t ashape[2];
  const char *iv, *gv, *cl;
  Ctx c = { 0 }, ic = { 0 };
  g_autoptr(GString) code = g_string_new ("");

  if (y->rank != 2 || gs.rank != is.rank + 1 || !dtype_supported (y->dtype))
    {
      g_set_error (error, CS_CUDA_ERROR, CS_CUDA_ERROR_UNSUPPORTED, "%s: embedding_backward shapes", label);
      return FALSE;
    }
  V = y->shape[0];
  D = y->shape[1];
  N = cs_shape_numel (gs.shape, gs.rank);
  rows = cs_shape_numel (is.shape, is.rank);
  ashape[0] = V;
  ashape[1] = D;
  acc = cs_cuda_program_new_slot (p, CS_DTYPE_F32, ashape, 2);
  dst = cs_cuda_program_new_slot (p, y->dtype, ashape, 2);
  g.p = p;
  g.pool = g_string_chunk_new (1024);
  g.body = g_string_new ("");
  g.memo = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  g.params = g_array_new (FALSE, FALSE, sizeof (guint));
  g.is_out = g_array_new (FALSE, FALSE, sizeof (gboolean));
  g.label = label;

  /* 1. zero the accumulator */
  gen_begin (&g);
  pa = param_of (&g, acc, TRUE);
  g_string_append_printf (code, "  for (ix_t i = (ix_t) blockIdx.x * blockDim.x + threadIdx.x; i < %" G_GINT64_FORMAT "LL;"
                          " i += (ix_t) gridDim.x * blockDim.x)\n    a%u[i] = 0.0f;\n", V * D, pa);
  gen_finish (&g, code->str, g_strdup_printf ("%s zero [%" G_GINT64_FORMAT ", %" G_GINT64_FORMAT "]", label, V, D),
              (unsigned int) MIN (MAX ((V * D + 255) / 256, 1), 65535 * 64), 1, 256, 1);

  /* 2. scatter-add the gradient rows */
  gen_begin (&g);
  g_string_truncate (code, 0);
  decompose (&g, "i", gs.shape, gs.rank, &c);
  ic.rank = is.rank;
  for (guint j = 0; j < is.rank; j++)
    ic.ix[j] = c.ix[j];
  iv = emit_load (&g, idx, &ic);
  gv = emit_load (&g, grad, &c);
  cl = clamp_idx (&g, iv, V - 1);
  pa = param_of (&g, acc, TRUE);
  g_string_append_printf (code, "  for (ix_t i = (ix_t) blockIdx.x * blockDim.x + threadIdx.x; i < %" G_GINT64_FORMAT "LL;"
                          " i += (ix_t) gridDim.x * blockDim.x)\n    {\n", N);
  g_string_append (code, g.body->str);
  g_string_append_printf (code, "      if ((long long) (%s) != %" G_GINT64_FORMAT "LL)\n"
                          "        atomicAdd (&a%u[%s * %" G_GINT64_FORMAT "LL + %s], (float) %s);\n    }\n",
                          iv, padding_idx, pa, cl, D, c.ix[gs.rank - 1], gv);
  gen_finish (&g, code->str, g_strdup_printf ("%s scatter %" G_GINT64_FORMAT " rows", label, rows),
              (unsigned int) MIN (MAX ((N + 255) / 256, 1), 65535 * 64), 1, 256, 1);

  /* 3. store in the output dtype */
  gen_begin (&g);
  g_string_truncate (code, 0);
  {
    g_autoptr(GString) st = g_string_new ("");
    guint pin = param_of (&g, acc, FALSE);

    store_stmt (&g, st, dst, "i", pool_printf (&g, "a%u[i]", pin));
    g_string_append_printf (code, "  for (ix_t i = (ix_t) blockIdx.x * blockDim.x + threadIdx.x; i < %" G_GINT64_FORMAT "LL;"
                            " i += (ix_t) gridDim.x * blockDim.x)\n    {\n%s    }\n", V * D, st->str);
  }
  gen_finish (&g, code->str, g_strdup_printf ("%s convert", label),
              (unsigned int) MIN (MAX ((V * D + 255) / 256, 1), 65535 * 64), 1, 256, 1);

  g_string_chunk_free (g.pool);
  g_string_free (g.body, TRUE);
  g_hash_table_unref (g.memo);
  g_array_unref (g.params);
  g_array_unref (g.is_out);
  *out_slot = dst;
  return TRUE;
}
