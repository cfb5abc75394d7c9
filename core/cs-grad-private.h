/* cs-grad-private.h: what the grad pass (cs-grad.c) shares with its VJP rules (cs-vjp.c):
 * the pass's context, its proxy maps and VJP records, and the small value tests both use.
 * Internal to core/.
 */
#pragma once

#include <glib.h>

#include "cs-grad.h"
#include "cs-ir.h"
#include "cs-ops.h"
#include "cs-ops-args.h"
#include "cs-policy.h"

G_BEGIN_DECLS

typedef struct
{
  CsOpId   rule;               /* semantic op id of the rule */
  CsStmt  *stmt;               /* the forward statement (in the joint trace) */
  CsProxy *aux;                /* nll_loss's augmented forward: total_weight (NULL: None) */
} VjpRecord;

/* A map from proxies to pointers (the grad pass's gradient table and proxy sets), without
 * hashing in the common case: one slot per proxy id below @n (a trace numbers its proxies
 * densely from 1), and a hash table for the rest - proxies created after the map, and any
 * second proxy with an id whose slot is taken.  A proxy is in its slot or in @rest, never in
 * both; entries are never removed. */
typedef struct
{
  CsProxy  *key;               /* the proxy whose id is the slot's index, NULL: free */
  gpointer  value;             /* its value */
} ProxySlot;

typedef struct
{
  ProxySlot  *slots;           /* indexed by CsProxy.id, @n of them */
  guint       n;               /* ids below it have a slot */
  GHashTable *rest;            /* CsProxy* -> gpointer, created when first needed */
} ProxyMap;

static inline void
pmap_init (ProxyMap *m, guint n)
{
  m->slots = g_new0 (ProxySlot, MAX (n, 1));
  m->n = n;
  m->rest = NULL;
}

static inline void
pmap_clear (ProxyMap *m)
{
  g_clear_pointer (&m->slots, g_free);
  g_clear_pointer (&m->rest, g_hash_table_unref);
  m->n = 0;
}

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (ProxyMap, pmap_clear)

static inline gboolean
pmap_contains (const ProxyMap *m, const CsProxy *p)
{
  if (p->id < m->n && m->slots[p->id].key == p)
    return TRUE;
  return m->rest != NULL && g_hash_table_contains (m->rest, p);
}

static inline gpointer
pmap_lookup (const ProxyMap *m, const CsProxy *p)
{
  if (p->id < m->n && m->slots[p->id].key == p)
    return m->slots[p->id].value;
  return m->rest != NULL ? g_hash_table_lookup (m->rest, p) : NULL;
}

static inline void
pmap_insert (ProxyMap *m, CsProxy *p, gpointer value)
{
  if (p->id < m->n && (m->slots[p->id].key == NULL || m->slots[p->id].key == p))
    {
      m->slots[p->id].key = p;
      m->slots[p->id].value = value;
      return;
    }
  if (m->rest == NULL)
    m->rest = g_hash_table_new (NULL, NULL);
  g_hash_table_insert (m->rest, p, value);
}

/* grad_from value of a gradient summed from the VJPs of several forward statements */
#define GRAD_FROM_MIXED G_MAXUINT

typedef struct
{
  CsTrace        *t;           /* the joint trace being built (shares the input's statements
                                  and proxies; owns the ones the pass makes) */
  CsArena        *a;           /* t->arena */
  const CsPolicy *policy;      /* decomposition policy */
  GPtrArray      *fwd;         /* CsStmt*: forward statements, in order */
  GArray         *records;     /* VjpRecord, in forward order */
  GPtrArray      *bw;          /* CsStmt*: backward statements being emitted */
  ProxyMap       *grads;       /* CsProxy* -> CsProxy*: accumulated gradient */
  ProxyMap       *grad_from;   /* CsProxy* -> GUINT_TO_POINTER: origin + 1 of the VJPs whose
                                  cotangents its gradient sums, GRAD_FROM_MIXED when they came
                                  from more than one forward statement */
  ProxyMap       *outputs;     /* CsProxy* set: proxies returned by the forward */
  CsStmt         *ret;         /* the forward's RETURN */
  const char     *why;         /* annotation of the statements being emitted ("VJP of ...") */
  guint32         origin;      /* origin id the statements being emitted derive from */
  GError         *error;       /* first error of a rule */
  GHashTable     *whys;        /* callee (string) -> its "grad: VJP of ..." annotation */
  const char     *why_by_op[CS_N_OPS]; /* the same for statements printed with their op's own
                                          name (callee == op->name), by op id: no hashing */
  guint32         names_free_from; /* fresh names from here on need no lookup
                                    (_cs_decompose_names_free_from) */
  ProxyMap       *req;         /* CsProxy* set: the inputs that require grad */
  gboolean        deep;        /* t is a deep copy of the input (else it shares its proxies) */
  gboolean        restart;     /* set when t must become a deep copy (see cs_grad_joint) */
} GradCtx;

/* ------------------------------------------------------------------------------------------ */
/* Small value tests shared by the pass and the rules                                          */

static inline gboolean
value_is_tensor (const CsValue *v)
{
  return v != NULL && v->kind == CS_VALUE_PROXY && v->u.proxy->kind == CS_PROXY_TENSOR;
}

static inline CsProxy *
value_tensor (const CsValue *v)
{
  return value_is_tensor (v) ? v->u.proxy : NULL;
}

/* A proxy that takes part in differentiation: a typed floating tensor (Thunder's
 * _is_differentiable uses is_inexact_dtype). */
static inline gboolean
is_diff (const CsProxy *p)
{
  return p != NULL && p->kind == CS_PROXY_TENSOR && cs_dtype_is_inexact (p->dtype);
}

static inline CsValue *
v_p (GradCtx *c, CsProxy *p)
{
  return cs_value_new_proxy (c->a, p);
}

/* Argument @name of @s's schema (cs-ops-list.h). */
static inline CsValue *
arg (const CsStmt *s, CsArgName name)
{
  return cs_stmt_arg (s, name);
}

/* The argument of @s at schema position @k (its first two for the elementwise rules), read
 * by the schema's name; positional argument @k when the schema has no argument there. */
static inline CsValue *
nth_arg (const CsStmt *s, guint k)
{
  const CsOp *sem = cs_op_semantic (s->op);

  if (k < sem->n_args && !sem->args[k].kw_only)
    return cs_stmt_arg (s, sem->args[k].name);
  return cs_stmt_get_arg (s, k, NULL);
}

/* Ops that create no gradient association (Thunder: comparisons registered as themselves,
 * nondifferentiable_vjp_symbols, argmax, shape). */
static inline gboolean
op_is_constant (CsOpId id)
{
  return cs_op_get (id)->diff == CS_OP_DIFF_CONST;
}

/* Whether cross-entropy is differentiated as Thunder's augmented forward/backward pairs
 * (thunder/core/transforms.py: log_softmax -> ltorch.log_softmax_backward, nll_loss ->
 * _nll_loss_helper + ltorch.nll_loss_backward).  Thunder uses them under every executor list;
 * castscope only when torchcompile_xentropy, the executor that claims them, is in the list,
 * so that other lists keep the written-out backward they had before (README, "Executors"). */
static inline gboolean
xentropy_rules (const GradCtx *c)
{
  return cs_policy_has_executor (c->policy, CS_EXECUTOR_TORCHCOMPILE_XENTROPY);
}

/* ------------------------------------------------------------------------------------------ */
/* Between the pass and the rules                                                              */

/*
 * _cs_grad_stmt_where:
 * @c: the pass's context
 * @s: (nullable): a statement
 *
 * Returns: (transfer none): "FILE:LINE" of @s in the arena of @c, else "statement producing
 * NAME" for a statement the pass made (no line).
 */
const char *_cs_grad_stmt_where (GradCtx *c, const CsStmt *s);

/*
 * _cs_vjp_exists:
 * @id: a semantic op id
 *
 * Source: thunder/core/transforms.py `_grad_fn_map` and `augmented_forward_impls`.
 * Returns: TRUE when cs-vjp.c's rule table has a VJP for @id (the op is not decomposed for grad)
 */
gboolean _cs_vjp_exists (CsOpId id);

/*
 * _cs_vjp_run:
 * @c: the pass's context (its gradient table, the backward statements being emitted)
 * @r: the record of one forward statement, run in reverse forward order
 *
 * Emits the backward statements of @r's VJP into c->bw and accumulates the gradients of its
 * inputs (put_grad: Thunder's ltorch.add of the cotangents).  Nothing happens when no gradient
 * reaches any output of the statement (Thunder skips that backward).  A malformed statement sets
 * c->error (CS_GRAD_ERROR_BAD_TRACE, with its location); later records then do nothing.
 */
void _cs_vjp_run (GradCtx *c, const VjpRecord *r);

G_END_DECLS
