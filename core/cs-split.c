/* cs-split.c: joint trace -> forward `computation` + `backward_fn(saved_for_backward, cotangents)`.
 *
 * Source: thunder/transforms/autodiff.py split_into_forward_and_backward; the printed forms of
 * the unpacks, detail comments and returns follow reference/thunder-traces.md 1.2 i and l and
 * the traces thunder_a_seed_matmul_final_{fwd,bwd}.txt.
 */
#include "cs-config.h"

#include "cs-split.h"

#include "cs-ir-util.h"
#include "cs-ops.h"
#include "cs-ops-args.h"
#include "cs-print.h"

#include <string.h>

G_DEFINE_QUARK (cs-split-error-quark, cs_split_error)

enum { SIDE_DROP, SIDE_FWD, SIDE_BWD };

static CsValue *
dict_get (const CsValue *d, const char *key)
{
  if (d == NULL || d->kind != CS_VALUE_DICT)
    return NULL;
  for (guint i = 0; i + 1 < d->u.seq.n; i += 2)
    {
      const CsValue *k = d->u.seq.items[i];
      if (k->kind == CS_VALUE_STRING && g_strcmp0 (k->u.s, key) == 0)
        return d->u.seq.items[i + 1];
    }
  return NULL;
}

static gboolean
is_call_of (const CsStmt *s, CsOpId id)
{
  return s->kind == CS_STMT_CALL && cs_op_semantic (s->op)->id == id;
}

/* Leaves of a value tree (tuple/list/dict values), as tree_flatten does. */
static void
flatten_leaves (const CsValue *v, GPtrArray *out)
{
  if (v == NULL)
    return;
  switch (v->kind)
    {
    case CS_VALUE_TUPLE:
    case CS_VALUE_LIST:
      for (guint i = 0; i < v->u.seq.n; i++)
        flatten_leaves (v->u.seq.items[i], out);
      break;
    case CS_VALUE_DICT:
      for (guint i = 1; i < v->u.seq.n; i += 2)
        flatten_leaves (v->u.seq.items[i], out);
      break;
    default:
      g_ptr_array_add (out, (gpointer) v);
      break;
    }
}

/* Proxy sets: CsProxyMap's id-indexed slots. */
static inline void
set_add (CsProxyMap *set, CsProxy *p)
{
  _cs_proxy_map_insert (set, p, p);
}

static inline gboolean
set_has (const CsProxyMap *set, const CsProxy *p)
{
  return _cs_proxy_map_lookup (set, p) != NULL;
}

/* TRUE when @s reads @p (one of its arguments, at the top level). */
static gboolean
reads_proxy (const CsStmt *s, const CsProxy *p)
{
  for (guint i = 0; i < s->n_args; i++)
    {
      const CsValue *a = s->args[i].value;
      if (a != NULL && a->kind == CS_VALUE_PROXY && a->u.proxy == p)
        return TRUE;
    }
  return FALSE;
}

/* DCE of the backward part (walking backwards from the return). */
static void
dce_backward (const CsTrace *joint, guint8 *side, const CsStmt *ret)
{
  g_autoptr(CsProxyMap) needed = _cs_proxy_map_new ();
  g_autoptr(GPtrArray) ins = g_ptr_array_new ();
  g_autoptr(GPtrArray) io = g_ptr_array_new ();

  cs_stmt_collect_inputs (ret, ins);
  for (guint j = 0; j < ins->len; j++)
    set_add (needed, ins->pdata[j]);
  for (guint i = joint->n_stmts; i > 0; i--)
    {
      const CsStmt *s = joint->stmts[i - 1];
      gboolean keep = FALSE;

      if (side[i - 1] != SIDE_BWD)
        continue;
      if (s->kind != CS_STMT_CALL && s->kind != CS_STMT_UNPACK && s->kind != CS_STMT_ANNASSIGN)
        continue;
      g_ptr_array_set_size (io, 0);
      cs_stmt_collect_outputs (s, io);
      /* an output that is also an input (a region passing an input through) is not what the
       * statement produces (Thunder's dce asks producers(), which skips those) */
      for (guint j = 0; j < io->len && !keep; j++)
        keep = set_has (needed, io->pdata[j]) && !reads_proxy (s, io->pdata[j]);
      if (io->len == 0 && s->kind == CS_STMT_CALL)
        keep = cs_op_has_tag (s->op, CS_OP_TAG_DONT_DCE) && !is_call_of (s, CS_OP_PRIM_PUT_GRAD);
      if (!keep)
        {
          side[i - 1] = SIDE_DROP;
          continue;
        }
      g_ptr_array_set_size (io, 0);
      cs_stmt_collect_inputs (s, io);
      for (guint j = 0; j < io->len; j++)
        set_add (needed, io->pdata[j]);
    }
}

static CsProxy *
collection (CsTrace *t, const char *name)
{
  /* a proxy of that name shared from the joint is not retyped: this trace gets its own */
  guint32 hash = cs_name_hash (name);
  CsProxy *p = cs_name_table_lookup (t->proxies, name, hash);

  if (p == NULL)
    p = _cs_trace_new_proxy (t, cs_arena_strdup (t->arena, name), hash, 0);

  p->kind = CS_PROXY_COLLECTION;
  p->typed = 1;
  p->type_raw = NULL;
  return p;
}

static CsStmt *
comment (CsTrace *t, CsCommentKind kind, CsProxy *annotated, const char *fmt, ...)
  G_GNUC_PRINTF (4, 5);

static CsStmt *
comment (CsTrace *t, CsCommentKind kind, CsProxy *annotated, const char *fmt, ...)
{
  CsStmt *s = cs_stmt_new (t, CS_STMT_COMMENT);
  va_list ap;
  g_autofree char *text = NULL;

  va_start (ap, fmt);
  text = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  s->comment_kind = kind;
  s->text = cs_arena_strdup (t->arena, text);
  s->annotated = annotated;
  return s;
}

/* `a, b, = source` followed by one detail comment per element (PR #1672 format). */
static void
add_unpack (CsTrace *t, GPtrArray *body, CsProxy *source, CsValue **targets, guint n)
{
  CsStmt *u = cs_stmt_new (t, CS_STMT_UNPACK);

  u->source = source;
  u->targets = CS_ARENA_NEW_N (t->arena, CsValue *, MAX (n, 1));
  for (guint i = 0; i < n; i++)
    u->targets[i] = targets[i];
  u->n_targets = n;
  u->unpack_style = CS_UNPACK_WRAP80;
  g_ptr_array_add (body, u);
  for (guint i = 0; i < n; i++)
    {
      CsValue *v = targets[i];
      if (v->kind == CS_VALUE_PROXY)
        {
          /* `name: "type"`, put together without printf (one per saved tensor) */
          g_autofree char *ty = cs_proxy_type_string (v->u.proxy);
          gsize nl = strlen (v->u.proxy->name), tl = strlen (ty);
          char *text = cs_arena_alloc (t->arena, nl + tl + 5);
          CsStmt *c = cs_stmt_new (t, CS_STMT_COMMENT);

          memcpy (text, v->u.proxy->name, nl);
          memcpy (text + nl, ": \"", 3);
          memcpy (text + nl + 3, ty, tl);
          text[nl + 3 + tl] = '"';
          c->comment_kind = CS_COMMENT_DETAIL;
          c->text = text;
          c->annotated = v->u.proxy;
          g_ptr_array_add (body, c);
        }
      else
        g_ptr_array_add (body, comment (t, CS_COMMENT_DETAIL, NULL, "None"));
    }
}

static CsValue *
proxies_tuple (CsTrace *t, GPtrArray *ps)
{
  CsValue **items = CS_ARENA_NEW_N (t->arena, CsValue *, MAX (ps->len, 1));

  for (guint i = 0; i < ps->len; i++)
    items[i] = cs_value_new_proxy (t->arena, cs_trace_lookup_proxy (t, ((CsProxy *) ps->pdata[i])->name));
  return cs_value_new_seq (t->arena, CS_VALUE_TUPLE, items, ps->len);
}

/**
 * cs_split_forward_backward:
 * @joint: (transfer none): a joint trace
 * @forward: (out) (transfer full): the forward trace
 * @backward: (out) (transfer full) (nullable): the backward trace or NULL
 * @error: return location for a #CS_SPLIT_ERROR
 *
 * See cs-split.h.  Source: thunder/transforms/autodiff.py split_into_forward_and_backward.
 * Returns: TRUE on success
 */
gboolean
cs_split_forward_backward (const CsTrace *joint, CsTrace **forward, CsTrace **backward,
                           GError **error)
{
  const CsStmt *ret;
  CsValue *grads_v, *flat_v, *fwout_v;
  g_autoptr(CsProxyMap) fwd_names = _cs_proxy_map_new ();
  g_autoptr(GPtrArray) fw_outs = g_ptr_array_new ();
  g_autoptr(GPtrArray) flat_ps = g_ptr_array_new ();
  g_autoptr(GPtrArray) saved = g_ptr_array_new ();
  g_autoptr(GPtrArray) saved_t = g_ptr_array_new ();
  g_autoptr(GPtrArray) saved_o = g_ptr_array_new ();
  g_autoptr(CsProxyMap) saved_set = _cs_proxy_map_new ();
  g_autofree guint8 *side = NULL;
  g_autofree CsProxy **cots = NULL;
  g_autoptr(CsTrace) ft = NULL;
  g_autoptr(CsTrace) bt = NULL;
  g_autoptr(GPtrArray) fbody = g_ptr_array_new ();
  g_autoptr(GPtrArray) bbody = g_ptr_array_new ();
  g_autoptr(GPtrArray) outs = g_ptr_array_new ();
  g_autoptr(GPtrArray) ins = g_ptr_array_new ();
  guint next_side = SIDE_FWD, n_fw, n_bw_stmts = 0;
  gboolean any_grad = FALSE;

  g_return_val_if_fail (joint != NULL && forward != NULL && backward != NULL, FALSE);
  *forward = NULL;
  *backward = NULL;

  ret = cs_trace_get_return (joint);
  grads_v = ret ? dict_get (ret->value, "output") : NULL;
  flat_v = ret ? dict_get (ret->value, "flat_args") : NULL;
  fwout_v = ret ? dict_get (ret->value, "fw_flat_out") : NULL;
  if (grads_v == NULL || flat_v == NULL || fwout_v == NULL || grads_v->kind != CS_VALUE_TUPLE
      || (flat_v->kind != CS_VALUE_LIST && flat_v->kind != CS_VALUE_TUPLE))
    {
      g_set_error (error, CS_SPLIT_ERROR, CS_SPLIT_ERROR_NOT_JOINT,
                   "%s: the return of %s is not a joint trace's "
                   "{'output': (...), 'flat_args': [...], 'fw_flat_out': (...)}",
                   joint->file ? joint->file : "trace", joint->name ? joint->name : "?");
      return FALSE;
    }

  /* forward outputs and inputs are available in the forward */
  flatten_leaves (fwout_v, fw_outs);
  n_fw = fw_outs->len;
  cots = g_new0 (CsProxy *, MAX (n_fw, 1));
  for (guint i = 0; i < n_fw; i++)
    {
      const CsValue *v = fw_outs->pdata[i];
      if (v->kind == CS_VALUE_PROXY)
        set_add (fwd_names, v->u.proxy);
    }
  cs_value_collect_proxies (flat_v, flat_ps);
  for (guint i = 0; i < flat_ps->len; i++)
    set_add (fwd_names, flat_ps->pdata[i]);

  /* walk backwards: forward = what the forward outputs need */
  side = g_new0 (guint8, MAX (joint->n_stmts, 1));
  for (guint i = joint->n_stmts; i > 0; i--)
    {
      const CsStmt *s = joint->stmts[i - 1];
      gboolean is_fwd = FALSE;

      switch (s->kind)
        {
        case CS_STMT_RETURN:
          side[i - 1] = SIDE_DROP;
          next_side = SIDE_FWD;
          continue;
        case CS_STMT_DEL:
          side[i - 1] = SIDE_DROP;
          continue;
        case CS_STMT_COMMENT:
        case CS_STMT_BLANK:
          /* input annotations stay with the forward signature; source locations and headers
           * go with the statement after them (dropped on the backward side) */
          side[i - 1] = (s->kind == CS_STMT_COMMENT && s->comment_kind == CS_COMMENT_INPUT)
                        ? SIDE_FWD : (next_side == SIDE_FWD ? SIDE_FWD : SIDE_DROP);
          continue;
        default:
          break;
        }
      if (is_call_of (s, CS_OP_PRIM_GET_GRAD))
        {
          CsValue *a = cs_stmt_arg (s, CS_ARG_A);
          CsProxy *g = cs_stmt_get_output (s);
          gboolean placed = FALSE;
          for (guint k = 0; k < n_fw && !placed && a && a->kind == CS_VALUE_PROXY; k++)
            {
              const CsValue *v = fw_outs->pdata[k];
              if (cots[k] == NULL && v->kind == CS_VALUE_PROXY && v->u.proxy == a->u.proxy)
                {
                  cots[k] = g;
                  placed = TRUE;
                }
            }
          if (!placed || g == NULL)
            {
              g_set_error (error, CS_SPLIT_ERROR, CS_SPLIT_ERROR_BAD_TRACE,
                           "%s:%u: prims.get_grad of something that is not a forward output",
                           joint->file ? joint->file : "line", s->line);
              return FALSE;
            }
          side[i - 1] = SIDE_DROP;
          next_side = SIDE_BWD;
          continue;
        }
      g_ptr_array_set_size (outs, 0);
      cs_stmt_collect_outputs (s, outs);
      for (guint j = 0; j < outs->len && !is_fwd; j++)
        is_fwd = set_has (fwd_names, outs->pdata[j]);
      if (is_call_of (s, CS_OP_PRIM_UNPACK_TRIVIAL) || s->kind == CS_STMT_UNPACK
          || s->kind == CS_STMT_ANNASSIGN)
        is_fwd = TRUE;
      if (!is_fwd && is_call_of (s, CS_OP_PRIM_COPY_))
        {
          CsValue *dst = cs_stmt_get_arg (s, 1, NULL);
          is_fwd = dst && dst->kind == CS_VALUE_PROXY && set_has (fwd_names, dst->u.proxy);
        }
      if (is_fwd)
        {
          g_ptr_array_set_size (ins, 0);
          cs_stmt_collect_inputs (s, ins);
          for (guint j = 0; j < ins->len; j++)
            set_add (fwd_names, ins->pdata[j]);
          for (guint j = 0; j < outs->len; j++)
            set_add (fwd_names, outs->pdata[j]);
          side[i - 1] = SIDE_FWD;
        }
      else
        side[i - 1] = SIDE_BWD;
      next_side = side[i - 1];
    }

  /* backward: dead code out, then saved_for_backward = forward proxies it reads */
  for (guint i = 0; i < grads_v->u.seq.n; i++)
    any_grad |= grads_v->u.seq.items[i]->kind != CS_VALUE_NONE;
  {
    CsStmt tmp_ret = { .kind = CS_STMT_RETURN, .value = grads_v };
    dce_backward (joint, side, &tmp_ret);
  }
  for (guint i = 0; i < joint->n_stmts; i++)
    {
      if (side[i] != SIDE_BWD)
        continue;
      n_bw_stmts++;
      g_ptr_array_set_size (ins, 0);
      cs_stmt_collect_inputs (joint->stmts[i], ins);
      for (guint j = 0; j < ins->len; j++)
        {
          CsProxy *p = ins->pdata[j];
          if (set_has (fwd_names, p) && !set_has (saved_set, p))
            {
              set_add (saved_set, p);
              g_ptr_array_add (saved, p);
            }
        }
    }
  /* gradients that are forward values themselves (e.g. the grad of an input that is the
   * cotangent) are read by the return */
  {
    g_autoptr(GPtrArray) rins = g_ptr_array_new ();
    cs_value_collect_proxies (grads_v, rins);
    for (guint j = 0; j < rins->len; j++)
      {
        CsProxy *p = rins->pdata[j];
        if (set_has (fwd_names, p) && !set_has (saved_set, p))
          {
            set_add (saved_set, p);
            g_ptr_array_add (saved, p);
          }
      }
  }
  for (guint i = 0; i < saved->len; i++)
    {
      CsProxy *p = saved->pdata[i];
      g_ptr_array_add (p->kind == CS_PROXY_TENSOR ? saved_t : saved_o, p);
    }

  /* ---- the forward trace ---- */
  /* the joint's statements are shared (cs_trace_derive_shared); the BACKWARD tag is the only
   * edit, made on a private copy where it changes */
  ft = cs_trace_derive_shared (joint, "split-forward");
  for (guint i = 0; i < ft->n_stmts; i++)
    if (side[i] == SIDE_FWD)
      {
        CsStmt *s = ft->stmts[i];
        if (s->backward)
          {
            s = cs_trace_own_stmt (ft, s);
            s->backward = 0;
          }
        g_ptr_array_add (fbody, s);
      }
  {
    CsArena *a = ft->arena;
    CsValue *fwout, *flat;
    g_autoptr(GPtrArray) leaves = g_ptr_array_new ();
    CsValue **litems, *ditems[6], *pair[2], *saved_pair, *retv[2];
    CsStmt *r = cs_stmt_new (ft, CS_STMT_RETURN);
    /* the derived trace shares the joint's proxies and values */
    fwout = fwout_v;
    flat = flat_v;
    flatten_leaves (fwout, leaves);
    litems = CS_ARENA_NEW_N (a, CsValue *, MAX (leaves->len, 1));
    for (guint i = 0; i < leaves->len; i++)
      litems[i] = leaves->pdata[i];
    ditems[0] = cs_value_new_string (a, "output");
    ditems[1] = fwout;
    ditems[2] = cs_value_new_string (a, "flat_args");
    ditems[3] = flat;
    ditems[4] = cs_value_new_string (a, "flat_output");
    ditems[5] = cs_value_new_seq (a, CS_VALUE_TUPLE, litems, leaves->len);
    pair[0] = proxies_tuple (ft, saved_t);
    pair[1] = proxies_tuple (ft, saved_o);
    saved_pair = cs_value_new_seq (a, CS_VALUE_TUPLE, pair, 2);
    retv[0] = cs_value_new_seq (a, CS_VALUE_DICT, ditems, 6);
    retv[1] = saved_pair;
    r->value = cs_value_new_seq (a, CS_VALUE_TUPLE, retv, 2);
    r->return_bare = 1;
    r->origin = ret->origin ? ret->origin : ret->id;
    g_ptr_array_add (fbody, r);
    cs_trace_set_stmts (ft, (CsStmt **) fbody->pdata, fbody->len);
    ft->provenance = NULL;
    ft->backward_tags = FALSE;
  }

  if (n_bw_stmts == 0 && !any_grad)
    {
      *forward = g_steal_pointer (&ft);
      return TRUE;
    }

  /* ---- the backward trace ---- */
  bt = cs_trace_derive_shared (joint, "split-backward");
  {
    CsArena *a = bt->arena;
    CsProxy *sfb = collection (bt, "saved_for_backward");
    CsProxy *cot = collection (bt, "cotangents");
    CsProxy *c0 = collection (bt, "C0");
    CsProxy *c1 = collection (bt, "C1");
    CsValue *tv[2];
    CsValue **items;
    CsStmt *r;

    bt->name = "backward_fn";
    bt->has_signature = TRUE;
    bt->params = CS_ARENA_NEW_N (a, CsParam, 2);
    bt->params[0] = (CsParam) { CS_PARAM_PLAIN, "saved_for_backward", NULL };
    bt->params[1] = (CsParam) { CS_PARAM_PLAIN, "cotangents", NULL };
    bt->n_params = 2;
    bt->provenance = NULL;
    bt->n_leading = 0;
    bt->leading = NULL;

    g_ptr_array_add (bbody, comment (bt, CS_COMMENT_INPUT, sfb, "saved_for_backward: \"Collection\""));
    g_ptr_array_add (bbody, comment (bt, CS_COMMENT_INPUT, cot, "cotangents: \"Collection\""));
    tv[0] = cs_value_new_proxy (a, c0);
    tv[1] = cs_value_new_proxy (a, c1);
    add_unpack (bt, bbody, sfb, tv, 2);

    items = CS_ARENA_NEW_N (a, CsValue *, MAX (n_fw, 1));
    for (guint i = 0; i < n_fw; i++)
      items[i] = cots[i] ? cs_value_new_proxy (a, cs_trace_lookup_proxy (bt, cots[i]->name))
                         : cs_value_new_underscore (a);
    add_unpack (bt, bbody, cot, items, n_fw);

    items = CS_ARENA_NEW_N (a, CsValue *, MAX (saved_t->len, 1));
    for (guint i = 0; i < saved_t->len; i++)
      items[i] = cs_value_new_proxy (a, cs_trace_lookup_proxy (bt, ((CsProxy *) saved_t->pdata[i])->name));
    add_unpack (bt, bbody, c0, items, saved_t->len);
    if (saved_o->len > 0)
      {
        items = CS_ARENA_NEW_N (a, CsValue *, saved_o->len);
        for (guint i = 0; i < saved_o->len; i++)
          items[i] = cs_value_new_proxy (a, cs_trace_lookup_proxy (bt, ((CsProxy *) saved_o->pdata[i])->name));
        add_unpack (bt, bbody, c1, items, saved_o->len);
      }

    for (guint i = 0; i < bt->n_stmts; i++)
      if (side[i] == SIDE_BWD)
        {
          CsStmt *s = bt->stmts[i];
          if (!s->backward)
            {
              s = cs_trace_own_stmt (bt, s);
              s->backward = 1;
            }
          g_ptr_array_add (bbody, s);
        }
    r = cs_stmt_new (bt, CS_STMT_RETURN);
    r->value = (CsValue *) grads_v;
    r->origin = ret->origin ? ret->origin : ret->id;
    g_ptr_array_add (bbody, r);
    cs_trace_set_stmts (bt, (CsStmt **) bbody->pdata, bbody->len);
    bt->backward_tags = TRUE;
  }

  *forward = g_steal_pointer (&ft);
  *backward = g_steal_pointer (&bt);
  return TRUE;
}

/**
 * cs_split_dup_saved:
 * @forward: (transfer none): a forward trace from cs_split_forward_backward()
 *
 * Returns: (transfer full) (element-type CsProxy): the C0 proxies named in the return
 */
GPtrArray *
cs_split_dup_saved (const CsTrace *forward)
{
  GPtrArray *out = g_ptr_array_new ();
  const CsStmt *r = cs_trace_get_return (forward);
  const CsValue *v = r ? r->value : NULL;

  if (v != NULL && v->kind == CS_VALUE_TUPLE && v->u.seq.n == 2)
    {
      const CsValue *pair = v->u.seq.items[1];
      if (pair->kind == CS_VALUE_TUPLE && pair->u.seq.n == 2)
        cs_value_collect_proxies (pair->u.seq.items[0], out);
    }
  return out;
}

/* ------------------------------------------------------------------------------------------ */
/* Values saved more than once                                                                 */

typedef struct
{
  GHashTable *vn_of;      /* CsProxy * -> value number (GUINT_TO_POINTER, from 1) */
  GHashTable *by_key;     /* expression key (owned string) -> value number */
  GHashTable *producer;   /* CsProxy * -> the statement that makes it */
  guint       next;       /* the next value number */
} ValueNumbers;

/* The value number of @p: the one its producer gave it, else a number of its own (a trace
 * input, or a value no statement of the forward makes). */
static guint
vn_of_proxy (ValueNumbers *v, const CsProxy *p)
{
  gpointer n = g_hash_table_lookup (v->vn_of, p);

  if (n == NULL)
    {
      n = GUINT_TO_POINTER (v->next++);
      g_hash_table_insert (v->vn_of, (gpointer) p, n);
    }
  return GPOINTER_TO_UINT (n);
}

/* @value's part of an expression key: proxies by value number, other values as printed. */
static void
key_value (ValueNumbers *v, GString *key, const CsValue *value)
{
  if (value->kind == CS_VALUE_PROXY)
    g_string_append_printf (key, "%%%u", vn_of_proxy (v, value->u.proxy));
  else if (value->kind == CS_VALUE_TUPLE || value->kind == CS_VALUE_LIST)
    {
      g_string_append_c (key, value->kind == CS_VALUE_TUPLE ? '(' : '[');
      for (guint i = 0; i < value->u.seq.n; i++)
        {
          key_value (v, key, value->u.seq.items[i]);
          g_string_append_c (key, ',');
        }
      g_string_append_c (key, value->kind == CS_VALUE_TUPLE ? ')' : ']');
    }
  else
    cs_print_value_to (key, value);
}

/* Numbers @st's outputs: the k-th output of an expression seen before gets that expression's
 * k-th number.  Region calls are numbered through their subsymbols; random ops never repeat. */
static void
number_stmt (ValueNumbers *v, const CsStmt *st)
{
  g_autoptr(GString) key = NULL;
  g_autoptr(GPtrArray) outs = NULL;
  const CsOp *sem;

  if (st->kind != CS_STMT_CALL || st->op == NULL)
    return;
  if (_cs_stmt_is_region (st))
    {
      for (guint i = 0; i < st->n_subs; i++)
        number_stmt (v, st->subs[i]);
      return;
    }
  sem = cs_op_semantic (st->op);
  outs = g_ptr_array_new ();
  cs_stmt_collect_outputs (st, outs);
  key = g_string_new (sem->name);
  if ((st->op->tags | sem->tags) & CS_OP_TAG_RANDOM)
    g_string_append_printf (key, "@%u", st->id);   /* every random draw is a value of its own */
  g_string_append_c (key, '(');
  for (guint i = 0; i < st->n_args; i++)
    {
      if (st->args[i].name)
        g_string_append_printf (key, "%s=", st->args[i].name);
      key_value (v, key, st->args[i].value);
      g_string_append_c (key, ',');
    }
  g_string_append_c (key, ')');
  for (guint k = 0; k < outs->len; k++)
    {
      CsProxy *o = g_ptr_array_index (outs, k);
      g_autofree char *ok = g_strdup_printf ("%s#%u", key->str, k);
      gpointer n = g_hash_table_lookup (v->by_key, ok);

      if (n == NULL)
        {
          n = GUINT_TO_POINTER (v->next++);
          g_hash_table_insert (v->by_key, g_steal_pointer (&ok), n);
        }
      g_hash_table_insert (v->vn_of, o, n);
      g_hash_table_insert (v->producer, o, (gpointer) st);
    }
}

static void
saved_duplicate_free (gpointer data)
{
  CsSavedDuplicate *d = data;

  g_ptr_array_unref (d->saved);
  g_free (d);
}

/**
 * cs_split_duplicate_saved: (see cs-split.h)
 */
GPtrArray *
cs_split_duplicate_saved (const CsTrace *forward)
{
  GPtrArray *out = g_ptr_array_new_with_free_func (saved_duplicate_free);
  g_autoptr(GPtrArray) saved = NULL;
  g_autoptr(GHashTable) group_of = g_hash_table_new (NULL, NULL);   /* vn -> CsSavedDuplicate */
  g_autoptr(GHashTable) seen = g_hash_table_new (NULL, NULL);       /* proxies already listed */
  ValueNumbers v = { g_hash_table_new (NULL, NULL),
                     g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL),
                     g_hash_table_new (NULL, NULL), 1 };

  g_return_val_if_fail (forward != NULL, out);
  for (guint i = 0; i < forward->n_stmts; i++)
    number_stmt (&v, forward->stmts[i]);
  saved = cs_split_dup_saved (forward);
  for (guint i = 0; i < saved->len; i++)
    {
      CsProxy *p = g_ptr_array_index (saved, i);
      gpointer vn;
      CsSavedDuplicate *d;

      if (p->kind != CS_PROXY_TENSOR || !g_hash_table_add (seen, p))
        continue;
      vn = GUINT_TO_POINTER (vn_of_proxy (&v, p));
      d = g_hash_table_lookup (group_of, vn);
      if (d == NULL)
        {
          d = g_new0 (CsSavedDuplicate, 1);
          d->saved = g_ptr_array_new ();
          d->producer = g_hash_table_lookup (v.producer, p);
          g_hash_table_insert (group_of, vn, d);
          g_ptr_array_add (out, d);
        }
      g_ptr_array_add (d->saved, p);
      if (d->saved->len > 1)
        {
          guint64 n = cs_dtype_size_bytes (p->dtype);

          for (guint r = 0; r < p->rank; r++)
            n *= (guint64) MAX (p->shape[r], 0);
          d->extra_bytes += n;
        }
    }
  /* keep the values saved more than once */
  for (guint i = out->len; i-- > 0;)
    if (((CsSavedDuplicate *) g_ptr_array_index (out, i))->saved->len < 2)
      g_ptr_array_remove_index (out, i);
  g_hash_table_unref (v.vn_of);
  g_hash_table_unref (v.by_key);
  g_hash_table_unref (v.producer);
  return out;
}
