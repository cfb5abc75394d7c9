/* cs-ops-args.c: statement arguments read through the op schema (see cs-ops-args.h). */
#include "cs-config.h"

#include "cs-ops-args.h"

#include <stdlib.h>
#include <string.h>

/** cs_stmt_schema_op: see cs-ops-args.h. */
const CsOp *
cs_stmt_schema_op (const CsStmt *stmt)
{
  const CsOp *op = stmt->op ? stmt->op : cs_op_lookup (stmt->callee ? stmt->callee : "");

  return op->n_args > 0 ? op : cs_op_semantic (op);
}

/** cs_stmt_arg: see cs-ops-args.h. */
CsValue *
cs_stmt_arg (const CsStmt *stmt, CsArgName name)
{
  const CsOp *op;
  guint pos;

  g_return_val_if_fail (stmt != NULL, NULL);
  op = cs_stmt_schema_op (stmt);
  if (cs_op_find_arg (op, name, &pos) == NULL)
    {
      g_critical ("cs_stmt_arg: %s has no argument '%s' in its schema", op->name, cs_arg_name (name));
      return NULL;
    }
  return cs_stmt_get_arg (stmt, pos, cs_arg_name (name));
}

/** cs_stmt_arg_if_declared: see cs-ops-args.h. */
CsValue *
cs_stmt_arg_if_declared (const CsStmt *stmt, CsArgName name)
{
  g_return_val_if_fail (stmt != NULL, NULL);
  if (cs_op_find_arg (cs_stmt_schema_op (stmt), name, NULL) == NULL)
    return NULL;
  return cs_stmt_arg (stmt, name);
}

/** cs_stmt_arg_number: see cs-ops-args.h. */
gboolean
cs_stmt_arg_number (const CsStmt *stmt, CsArgName name, double *out)
{
  const CsOp *op;
  const CsOpArg *a;
  CsValue *v;
  char *end;

  g_return_val_if_fail (stmt != NULL && out != NULL, FALSE);
  op = cs_stmt_schema_op (stmt);
  a = cs_op_find_arg (op, name, NULL);
  g_return_val_if_fail (a != NULL, FALSE);
  v = cs_stmt_arg (stmt, name);
  if (v == NULL)
    {
      if (a->dflt == NULL)
        return FALSE;
      *out = g_ascii_strtod (a->dflt, &end);
      return end != a->dflt && *end == '\0';
    }
  switch (v->kind)
    {
    case CS_VALUE_INT: *out = (double) v->u.i; return TRUE;
    case CS_VALUE_FLOAT: *out = v->u.f; return TRUE;
    case CS_VALUE_BOOL: *out = v->u.b ? 1.0 : 0.0; return TRUE;
    default: return FALSE;
    }
}

/** cs_stmt_find_non_string_arg: see cs-ops-args.h. */
const CsOpArg *
cs_stmt_find_non_string_arg (const CsStmt *stmt, const CsValue **value_out)
{
  const CsOp *op;

  g_return_val_if_fail (stmt != NULL, NULL);
  if (stmt->kind != CS_STMT_CALL)
    return NULL;
  op = cs_stmt_schema_op (stmt);
  for (guint i = 0; i < op->n_args; i++)
    {
      const CsOpArg *a = &op->args[i];
      const CsValue *v;
      if (a->kind != CS_ARG_KIND_STRING)
        continue;
      v = cs_stmt_get_arg (stmt, i, cs_arg_name (a->name));
      if (v == NULL || v->kind == CS_VALUE_STRING || v->kind == CS_VALUE_NONE)
        continue;
      if (value_out != NULL)
        *value_out = v;
      return a;
    }
  return NULL;
}

/* The schema of a call of one of Thunder's own symbols (callee ltorch.* or prims.*, whose
 * schemas follow thunder/torch/__init__.py and thunder/core/prims.py), NULL for any other
 * statement or an op without a schema: what the keyword and positional checks apply to. */
static const CsOp *
thunder_schema_op (const CsStmt *stmt)
{
  const CsOp *op;

  if (stmt->kind != CS_STMT_CALL || stmt->callee == NULL
      || !(g_str_has_prefix (stmt->callee, "ltorch.") || g_str_has_prefix (stmt->callee, "prims.")))
    return NULL;
  op = cs_stmt_schema_op (stmt);
  return op->n_args > 0 ? op : NULL;
}

/** cs_stmt_find_unknown_keyword: see cs-ops-args.h. */
const char *
cs_stmt_find_unknown_keyword (const CsStmt *stmt)
{
  const CsOp *op;

  g_return_val_if_fail (stmt != NULL, NULL);
  if ((op = thunder_schema_op (stmt)) == NULL)
    return NULL;
  for (guint i = 0; i < stmt->n_args; i++)
    {
      const char *kw = stmt->args[i].name;
      gboolean declared = FALSE;
      if (kw == NULL)
        continue;
      for (guint k = 0; k < op->n_args && !declared; k++)
        declared = strcmp (cs_arg_name (op->args[k].name), kw) == 0;
      if (!declared)
        return kw;
    }
  return NULL;
}

/** cs_stmt_count_extra_positional: see cs-ops-args.h. */
guint
cs_stmt_count_extra_positional (const CsStmt *stmt, guint *n_declared)
{
  const CsOp *op;
  guint n_pos = 0, n_given = 0;

  g_return_val_if_fail (stmt != NULL, 0);
  if ((op = thunder_schema_op (stmt)) == NULL || op->variadic)
    return 0;
  for (guint k = 0; k < op->n_args; k++)
    n_pos += !op->args[k].kw_only;
  for (guint i = 0; i < stmt->n_args; i++)
    n_given += stmt->args[i].name == NULL;
  if (n_declared != NULL)
    *n_declared = n_pos;
  return n_given > n_pos ? n_given - n_pos : 0;
}
