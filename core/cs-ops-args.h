/* cs-ops-args.h: reading a statement's arguments through its op's schema (the op table's
 * argument rows, core/cs-ops-list.h), never by literal position and name.  It sits above both
 * the IR (cs-ir.h) and the op table (cs-ops.h), which know nothing of each other. */
#pragma once

#include "cs-ir.h"
#include "cs-ops.h"

G_BEGIN_DECLS

/**
 * cs_stmt_schema_op:
 * @stmt: a call statement
 *
 * The op whose schema @stmt's arguments follow: its own entry's when that declares one (an
 * alias with a signature of its own: ltorch.softmax passes dtype by position, the
 * ltorch._softmax it aliases takes it keyword-only), else the entry it implements.
 * Returns: (transfer none): the op (n_args 0 for an op without a schema)
 */
const CsOp   *cs_stmt_schema_op  (const CsStmt *stmt);
/**
 * cs_stmt_arg:
 * @stmt: a call statement
 * @name: an argument of the schema of @stmt's semantic op (executor names read the schema of
 *   the op they implement: torch_broadcast_in_dim_prim_impl reads prims.broadcast_in_dim's;
 *   an alias with a schema of its own reads that: ltorch.softmax's, not ltorch._softmax's)
 *
 * Reads an argument through the op's schema: by its position, or by its keyword.  Asking for
 * an argument the schema does not declare is a programming error (g_critical, NULL).
 * Returns: (transfer none) (nullable): the argument's value; NULL when the statement does not
 * pass it (the schema's default applies)
 */
CsValue      *cs_stmt_arg        (const CsStmt *stmt, CsArgName name);
/**
 * cs_stmt_arg_if_declared:
 * @stmt: a call statement
 * @name: an argument name
 *
 * cs_stmt_arg() for code shared by ops whose schemas differ (a builder for sum and amax, of
 * which only sum takes dtype=): an argument the schema does not declare reads as absent.
 * Returns: (transfer none) (nullable): the argument's value; NULL when the schema does not
 * declare @name or the statement does not pass it
 */
CsValue      *cs_stmt_arg_if_declared (const CsStmt *stmt, CsArgName name);
/**
 * cs_stmt_arg_number:
 * @stmt: a call statement
 * @name: a number argument of the schema, with a numeric default
 * @out: (out): its value: the statement's, else the schema's default
 *
 * Returns: FALSE when the statement passes something other than a number (or a numeric
 * argument without a default is missing)
 */
gboolean      cs_stmt_arg_number (const CsStmt *stmt, CsArgName name, double *out);
/**
 * cs_stmt_find_non_string_arg:
 * @stmt: a call statement
 * @value_out: (out) (optional): the value passed for the argument returned
 *
 * The string arguments of a schema (CS_ARG_KIND_STRING: gelu's approximate, div's
 * rounding_mode, a loss's reduction) take a string literal or None, as PyTorch's functions
 * demand; the readers of such an argument take anything else for absent (the schema's
 * default), which would compute another function than the one printed.  Ops without a
 * schema have none.  cs_meta_check_trace() refuses a statement this finds.
 * Returns: (nullable): the schema row of the first string argument @stmt passes something
 * else for, NULL when there is none
 */
const CsOpArg *cs_stmt_find_non_string_arg (const CsStmt *stmt, const CsValue **value_out);

/**
 * cs_stmt_find_unknown_keyword:
 * @stmt: a call statement
 *
 * A keyword argument @stmt passes that its op's schema does not declare, for Thunder's own
 * symbols (callees `ltorch.*` and `prims.*`, whose schemas follow thunder/torch/__init__.py
 * and thunder/core/prims.py): Python would raise "got an unexpected keyword argument", and
 * castscope would ignore it.  Executor and torch.compile names are not checked (their
 * schemas are their semantic op's, and aten's carry only the arguments castscope reads), nor
 * ops without a schema.  cs_meta_check_trace() refuses a statement this finds.
 * Returns: (nullable): the first such keyword (owned by @stmt), NULL when there is none
 */
const char   *cs_stmt_find_unknown_keyword (const CsStmt *stmt);

/**
 * cs_stmt_count_extra_positional:
 * @stmt: a call statement
 * @n_declared: (out) (optional): the positional parameters of its op's schema
 *
 * The positional arguments @stmt passes beyond its op's positional parameters, for Thunder's
 * own symbols (callees `ltorch.*` and `prims.*`; thunder/torch/__init__.py and
 * thunder/core/prims.py): Python would raise "takes N positional arguments but M were given",
 * and castscope would ignore the extra ones.  Ops whose signature ends in `*args` (reshape's
 * `*shape`; CsOp.variadic) and ops without a schema are not checked, nor executor and
 * torch.compile names (as cs_stmt_find_unknown_keyword()).  cs_meta_check_trace() refuses a
 * statement this counts any for.
 * Returns: the number of extra positional arguments (0: none; @n_declared is then unset when
 * the op is not checked)
 */
guint         cs_stmt_count_extra_positional (const CsStmt *stmt, guint *n_declared);

G_END_DECLS
