/* cs-ir.h: castscope's trace IR: values, proxies, bound symbols (statements) and traces.
 *
 * The model mirrors Thunder's TraceCtx / BoundSymbol / Proxy (thunder/core/trace.py,
 * thunder/core/symbol.py, thunder/core/proxies.py) closely enough that a parsed trace prints
 * back byte for byte (reference/thunder-traces.md section 1).
 *
 * Ownership: one #CsArena per trace owns the values, proxies, statements and strings it
 * created; they die with the trace.  Traces are reference counted.  A pass never mutates its
 * input: it builds a new trace and returns it, either a deep copy (cs_trace_copy()), a new
 * one (cs_trace_new()), or - for the pipeline passes over large traces - a derived trace
 * (cs_trace_derive()) that shares the input's unchanged parts and keeps it alive.
 */
#pragma once

#include <glib.h>
#include <stdint.h>
#include <string.h>

#include "cs-dtype.h"

G_BEGIN_DECLS

typedef struct _CsArena   CsArena;
typedef struct _CsValue   CsValue;
typedef struct _CsProxy   CsProxy;
typedef struct _CsArg     CsArg;
typedef struct _CsStmt    CsStmt;
typedef struct _CsTrace   CsTrace;
typedef struct _CsNameTable CsNameTable;
typedef struct _CsOp      CsOp;   /* defined in cs-ops.h */

/* ------------------------------------------------------------------------------------------ */
/* Arena                                                                                       */

/**
 * cs_arena_new:
 *
 * A bump allocator: blocks of 64 KiB (or larger for big requests); everything is freed at once
 * by cs_arena_free().  Not thread-safe.
 * Returns: (transfer full): a new arena
 */
CsArena    *cs_arena_new          (void);
void        cs_arena_free         (CsArena *arena);
/* The arena's bump pointer, visible so that cs_arena_alloc()'s fast path is inline (the passes
 * make millions of small allocations); the block list is private to cs-ir.c. */
struct _CsArena
{
  guint8     *cur;      /* next free byte of the current block (16-byte aligned) */
  guint8     *end;      /* end of the current block's data; cur <= end */
  gsize       total;    /* bytes handed out */
  gpointer    head;     /* private: the block list (current block first) */
  guint8     *hole;     /* the bytes the last cs_arena_alloc_line() skipped to reach a line
                           boundary, for cs_arena_alloc_small() (16-byte aligned); hole <= hole_end */
  guint8     *hole_end; /* end of that gap */
};

/** _cs_arena_alloc_slow: (skip) cs_arena_alloc_uninit() when the current block is full;
 * @rounded is the request rounded up to 16 bytes.  The memory is not zeroed. */
gpointer    _cs_arena_alloc_slow  (CsArena *arena, gsize rounded);
#ifdef CS_ARENA_DEBUG_MALLOC
/* debugging builds only (-DCS_ARENA_DEBUG_MALLOC): every allocation is its own malloc block
 * of exactly @size bytes, so AddressSanitizer sees overflows between arena objects */
gpointer    _cs_arena_alloc_debug (CsArena *arena, gsize size);
#endif

/**
 * cs_arena_alloc:
 * Zeroed memory of @size bytes, aligned to 16 bytes; never NULL (aborts on OOM like g_malloc).
 * The memory is zeroed per call, while the object's lines are about to be written anyway
 * (blocks are not zeroed up front: a 64 KiB memset pushed them out of L1 before use).
 */
static inline gpointer
cs_arena_alloc_uninit (CsArena *arena, gsize size)
{
  gsize rounded = size == 0 ? 16 : (size + 15) & ~(gsize) 15;
  guint8 *p = arena->cur;

#ifdef CS_ARENA_DEBUG_MALLOC
  return _cs_arena_alloc_debug (arena, size);
#endif
  if (G_UNLIKELY ((gsize) (arena->end - p) < rounded))
    return _cs_arena_alloc_slow (arena, rounded);
  arena->cur = p + rounded;
  arena->total += rounded;
  return p;
}

static inline gpointer
cs_arena_alloc (CsArena *arena, gsize size)
{
  gsize rounded = size == 0 ? 16 : (size + 15) & ~(gsize) 15;
  gpointer p = cs_arena_alloc_uninit (arena, size);

#ifdef CS_ARENA_DEBUG_MALLOC
  rounded = size == 0 ? 1 : size;
#endif
  memset (p, 0, rounded);
  return p;
}
/**
 * cs_arena_alloc_small:
 * @size: bytes (rounded up to 16)
 *
 * Uninitialised memory as cs_arena_alloc_uninit() gives, taken from the gap the last
 * cs_arena_alloc_line() skipped when it is large enough (argument arrays and short strings
 * made between line-aligned statements and proxies fill it), else from the current block.
 * Returns: memory owned by @arena, aligned to 16 bytes
 */
static inline gpointer
cs_arena_alloc_small (CsArena *arena, gsize size)
{
  gsize rounded = size == 0 ? 16 : (size + 15) & ~(gsize) 15;
  guint8 *p = arena->hole;

#ifdef CS_ARENA_DEBUG_MALLOC
  return _cs_arena_alloc_debug (arena, size);
#endif
  if ((gsize) (arena->hole_end - p) >= rounded)
    {
      arena->hole = p + rounded;
      return p;
    }
  return cs_arena_alloc_uninit (arena, size);
}
char       *cs_arena_strdup       (CsArena *arena, const char *s);
char       *cs_arena_strndup      (CsArena *arena, const char *s, gsize len);
char       *cs_arena_printf       (CsArena *arena, const char *fmt, ...) G_GNUC_PRINTF (2, 3);
/** Copies @n pointers into the arena (for turning a GPtrArray into a fixed array). */
gpointer   *cs_arena_dup_ptrs     (CsArena *arena, gpointer const *ptrs, guint n);
/** Total bytes handed out (for benchmarks and limits). */
gsize       cs_arena_size_bytes   (CsArena *arena);
/**
 * cs_arena_alloc_line:
 * @size: bytes (rounded up to 16)
 *
 * Zeroed memory aligned to a 64-byte cache line, for objects whose first 64 bytes hold the
 * fields the passes read on every visit (CsStmt, CsProxy): aligned, they cost one line.  Skips
 * at most 48 bytes of the current block.
 * Returns: memory owned by @arena
 */
gpointer    cs_arena_alloc_line   (CsArena *arena, gsize size);
/** cs_arena_alloc_line() without the zeroing, for a copy that overwrites every byte. */
gpointer    cs_arena_alloc_line_uninit (CsArena *arena, gsize size);

#define CS_ARENA_NEW(arena, Type) ((Type *) cs_arena_alloc ((arena), sizeof (Type)))
#define CS_ARENA_NEW_N(arena, Type, n) ((Type *) cs_arena_alloc ((arena), sizeof (Type) * (gsize) (n)))

/* ------------------------------------------------------------------------------------------ */
/* Proxies                                                                                     */

typedef enum
{
  CS_PROXY_TENSOR,       /* TensorProxy: "cuda:0 bf16[8, 16]" */
  CS_PROXY_NUMBER,       /* IntegerProxy / FloatProxy / ...: "int 3", "float ?" */
  CS_PROXY_COLLECTION,   /* CollectionProxy: "Collection" (args, C0, saved_for_backward) */
  CS_PROXY_OTHER,        /* "Any", "tuple", "<class 'torch.dtype'>", or never typed */
} CsProxyKind;


/* ------------------------------------------------------------------------------------------ */
/* Values (arguments, kwargs, targets, return values)                                          */

typedef enum
{
  CS_VALUE_NONE,         /* None */
  CS_VALUE_BOOL,         /* True / False */
  CS_VALUE_INT,          /* Python int (fits int64) */
  CS_VALUE_FLOAT,        /* Python float, float('inf'), -float('inf'), float('NaN') */
  CS_VALUE_COMPLEX,      /* complex(re, im) */
  CS_VALUE_STRING,       /* 'text' (Python repr) */
  CS_VALUE_PROXY,        /* a reference to a proxy of the trace */
  CS_VALUE_UNDERSCORE,   /* `_` in a target list (a literal or dropped output) */
  CS_VALUE_NAME,         /* an identifier or dotted name that is not a proxy: torch.float32,
                            _torch_memory_format_0, float (as a non-dtype), operator.add */
  CS_VALUE_DTYPE,        /* dtypes.bfloat16, dtypes.float32_, bare `float` as a dtype */
  CS_VALUE_ELLIPSIS,     /* ... */
  /* the kinds from here on hold other values (TUPLE .. ATTR); keep them last: _cs_stmt_reads
     tests `kind >= CS_VALUE_TUPLE` */
  CS_VALUE_TUPLE,        /* (a, b) / (a,) / () */
  CS_VALUE_LIST,         /* [a, b] */
  CS_VALUE_DICT,         /* {'k': v, ...}; items are key, value, key, value */
  CS_VALUE_CALL,         /* DOTTED(args): devices.Device("cuda:0"), slice(None,-1,None), dataclass */
  CS_VALUE_SUBSCRIPT,    /* prologue only: args[0], cache_info['x']; items[0] = object, items[1] = index */
  CS_VALUE_ATTR,         /* prologue only: m.training (stored as NAME text "m.training" when
                            the base is not a proxy; ATTR keeps the proxy link) */
} CsValueKind;

struct _CsArg
{
  const char *name;      /* keyword name, or NULL for a positional argument */
  CsValue    *value;     /* never NULL */
};

struct _CsValue
{
  CsValueKind kind;      /* which member of u holds the value */
  union
  {
    gboolean     b;      /* BOOL */
    int64_t      i;      /* INT */
    double       f;      /* FLOAT */
    struct { double re, im; } c;     /* COMPLEX */
    const char  *s;      /* STRING (unescaped content), NAME (identifier text) */
    CsProxy     *proxy;  /* PROXY */
    CsDtypeRef   dtype;  /* DTYPE */
    struct
    {
      CsValue  **items;  /* TUPLE, LIST, DICT (k0, v0, k1, v1...), SUBSCRIPT (obj, index), ATTR (obj) */
      guint      n;      /* number of items (for DICT: 2 * pairs) */
      const char *attr;  /* ATTR: attribute name; unused (NULL) for the other kinds */
    } seq;
    struct
    {
      const char *callee; /* CALL: dotted callee text */
      CsArg      *args;   /* CALL: arguments in printed order */
      guint       n_args; /* entries of args */
    } call;
  } u;
  const char *raw;       /* as written, for INT/FLOAT/STRING/COMPLEX/CALL(slice) when the canonical
                            printing would differ (e.g. `1e-05`, double-quoted strings); else NULL */
  /* 40 bytes: a proxy's own value node (CsProxy.self) leaves room in the proxy's first cache
   * line for the fields the passes test (ATTR's name is in u.seq for that reason) */
};

struct _CsProxy
{
  /* The value `<this proxy>` (kind PROXY, u.proxy = this proxy), set up when the proxy is
   * made (cs_proxy_alloc(), cs_proxy_init_self()).  cs_value_new_proxy() hands it out instead
   * of allocating a node per reference, so a pass walking a statement's arguments finds the
   * value and the proxy's id in one cache line (value nodes are never edited in place: they
   * are shared). */
  CsValue      self;
  guint32      id;            /* 1-based creation index within the trace; 0 = invalid (in the
                                 first cache line, with self: the passes' marks read it for
                                 every use of the proxy) */
  /* flags, kind, dtype and device fill the rest of the first cache line: fusibility,
   * decompose, cse and delete-last-used test them for every proxy a statement reads or
   * writes */
  guint        typed : 1;     /* 1 when a type string was seen or set */
  guint        future : 1;    /* 1 for "FUTURE cuda:0 ..." (distributed async) */
  guint        has_value : 1; /* numbers: value below is known (not "?") */
  CsProxyKind  kind;          /* tensor, number, collection or other */
  CsDtype      dtype;         /* tensors: element dtype; numbers: B8, I64, F64 or C128 */
  CsDevice     device;        /* tensors: cpu / cuda:N / meta */
  const char  *name;          /* Python identifier, unique within its trace */
  guint        rank;          /* tensors: number of dims, <= CS_MAX_DIMS */
  int64_t     *shape;         /* tensors: rank extents, outermost first; -1 = symbolic dim */
  CsValue     *value;         /* numbers: the literal value when has_value, else NULL */
  const char  *type_raw;      /* text between the quotes as read; NULL for proxies made by passes.
                                 The printer prints it verbatim when set (symbolic dims, etc.) */
};

/* ------------------------------------------------------------------------------------------ */
/* Statements (bound symbols and the other printed lines of a trace body)                      */

typedef enum
{
  CS_STMT_CALL,          /* [targets = ] callee(args)  [# name: "type"]; a bound symbol */
  CS_STMT_UNPACK,        /* a, b, = source  (prims.unpack_sequence printer) */
  CS_STMT_ANNASSIGN,     /* prologue: name: "type" = expr */
  CS_STMT_DEL,           /* del a, b */
  CS_STMT_RETURN,        /* return [value] */
  CS_STMT_COMMENT,       /* a comment line at statement level (see CsCommentKind) */
  CS_STMT_BLANK,         /* an empty line inside the body */
} CsStmtKind;

typedef enum
{
  CS_COMMENT_OTHER,      /* any other comment text (kept verbatim) */
  CS_COMMENT_INPUT,      /* input annotation: `# a: "cuda:0 bf16[8, 16]"`, `# _ (unused)`, `# t0` */
  CS_COMMENT_SRCLOC,     /* source location: `# file.py:7: \tsource` */
  CS_COMMENT_HEADER,     /* header line printed before a bound symbol */
  CS_COMMENT_DETAIL,     /* unpack detail: `# C0: "Collection"`, `# None`, `# C1 (empty sequence)` */
} CsCommentKind;

typedef enum
{
  CS_TYPECOMMENT_NONE,   /* nothing after the call */
  CS_TYPECOMMENT_FULL,   /* `  # t4: "cuda:0 f32[4]"` */
  CS_TYPECOMMENT_NAME,   /* `  # t4` (docs that elide types) */
} CsTypeCommentStyle;

typedef enum
{
  CS_UNPACK_WRAP80,      /* current printer: wrapped with ` \` past 80 columns */
  CS_UNPACK_ONE_PER_LINE,/* pre-2024 printer: `a, \` one element per line */
} CsUnpackStyle;

/* How many def-use ids a CALL statement holds in itself (CsStmt.io_words); a statement with
 * more holds them in an arena array. */
#define CS_STMT_IO_INLINE 3

struct _CsStmt
{
  /* The fields every pass reads for every statement come first and fill one 64-byte cache line
   * (kind, op, args, out, subsymbols, flags): the passes are bound by memory latency. */
  CsStmtKind          kind;        /* what the statement is; says which fields apply */
  guint               n_args;      /* entries of args */
  const CsOp         *op;          /* CALL: op-table entry; never NULL (unknown names get the opaque op) */
  CsArg              *args;        /* CALL: arguments in printed order (positional, then keyword) */
  CsValue            *out;         /* CALL: target tree (PROXY / UNDERSCORE / TUPLE / LIST), NULL for a
                                      bare call */
  /* Decomposition (subsymbols), printed as comments one level deeper.  For a fusion call these
   * are the region's prims. */
  CsStmt            **subs;
  guint               n_subs;      /* entries of subs */
  guint32             owner;       /* serial of the trace whose arena holds it (CsTrace.serial);
                                      a trace may edit in place only statements it owns */
  guint               backward : 1;/* 1 if the grad pass tagged it BACKWARD */
  guint               region_fresh : 1; /* region call: outputs, inputs and subsymbols are as the
                                      last region refresh left them (cleared by any edit of the
                                      subsymbols or arguments; lets the refresh skip it) */
  guint               del_brackets : 1; /* DEL: 1 for the 2023 form `del [a, b]` */
  guint               return_bare : 1;  /* RETURN: value is a TUPLE of python_return's several args,
                                           printed without parentheses (the forward's
                                           `return {...}, ((saved), (others))`) */
  guint               grad_sum : 1;/* 1 for the grad pass's sum of a tensor's cotangents from
                                      two forward statements (autograd's gradient accumulation,
                                      an op of its own under rounding=eager) and for the
                                      statements it decomposes into */
  guint               type_comment : 2; /* CALL: a CsTypeCommentStyle, how the trailing
                                      `# name: "type"` is printed */
  guint               unpack_style : 1; /* UNPACK: a CsUnpackStyle */
  guint               comment_kind : 3; /* COMMENT: a CsCommentKind */
  guint32             origin;      /* id of the statement of the initial trace it derives from; 0 = none */
  const char         *callee;      /* CALL: callee as printed: "ltorch.add", "nvFusion0", "torch.matmul" */

  /* Second cache line: the fields a pass reads for some statements only. */
  guint32             id;          /* unique within the trace, 1-based; stable under cs_trace_copy */
  guint32             line;        /* 1-based source line of the statement's first character; 0 = made by a pass */
  guint32             col;         /* 1-based column */
  guint32             n_in;        /* CALL: how many of its def-use ids (cs_stmt_io()) are read ids */
  const char         *type_comment_raw; /* when the trailing type string differs from the proxy's, as read */
  CsValue            *value;       /* ANNASSIGN: out = PROXY value, type from the proxy; value = the
                                      expression.  RETURN: the value (NULL for a bare return) */
  CsProxy            *source;      /* UNPACK: the collection unpacked */

  /* Pass annotations (not printed in Thunder text; shown by the GUI and stats) */
  const char         *why;         /* rule that made this statement (e.g. "autocast: downcast
                                      matmul operand") or, for a fusion call, why the region ended */

  /* The fields of one kind each, sharing their storage: read them only for statements of
   * that kind (the others' bytes are the other kinds' fields). */
  union
  {
    struct
    {
      CsValue       **targets;     /* UNPACK: PROXY or UNDERSCORE values */
      guint           n_targets;   /* UNPACK: number of targets */
    };
    struct
    {
      CsProxy       **names;       /* DEL: deleted proxies */
      guint           n_names;     /* DEL: number of names */
    };
    struct
    {
      const char     *text;        /* COMMENT: text after "# " (without the leading indentation and
                                      "# "), NULL when printed from annotated; BLANK: the line's
                                      spaces, or NULL */
      CsProxy        *annotated;   /* COMMENT (INPUT/DETAIL): the proxy it names, if any */
    };
    struct
    {
      guint32         io_words[CS_STMT_IO_INLINE]; /* CALL: the def-use of the statement
                                      itself (not of its subsymbols): the ids (CsProxy.id) of
                                      the proxies its arguments read, in _cs_stmt_reads()
                                      order with duplicates, then n_out ids of those its target
                                      writes, here when n_in + n_out <= CS_STMT_IO_INLINE, else
                                      the address of an arena array holding them; read them
                                      through cs_stmt_io(); set by the constructors and
                                      mutators (cs_stmt_index()) */
      guint32         n_out;       /* CALL: written ids after the n_in read ids */
    };
  };
};

/* ------------------------------------------------------------------------------------------ */
/* Traces                                                                                      */

typedef enum
{
  CS_PARAM_PLAIN,        /* name or name=default */
  CS_PARAM_STAR,         /* *name, or a bare * when name is NULL */
  CS_PARAM_DSTAR,        /* **name */
} CsParamKind;

typedef struct
{
  CsParamKind  kind;     /* plain, *name or **name */
  const char  *name;     /* NULL only for a bare `*` */
  CsValue     *dflt;     /* default value or NULL */
} CsParam;

struct _CsTrace
{
  gint          ref_count;     /* atomic */
  CsArena      *arena;         /* owns everything below */

  const char   *file;          /* file the trace was read from, or NULL */
  const char  **leading;       /* comment lines before the trace that are not Thunder's
                                  (e.g. "# source: ..."), full text including "# " */
  guint         n_leading;     /* entries of leading */
  const char   *provenance;    /* text after "# Constructed by ", or NULL */
  const char  **imports;       /* import lines, verbatim ("import torch") */
  guint         n_imports;     /* entries of imports */
  gboolean      blank_after_imports; /* the empty line between imports and decorators */
  const char  **decorators;    /* "@torch.no_grad()", "@no_autocast" ... verbatim */
  guint         n_decorators;  /* entries of decorators */

  gboolean      has_signature; /* FALSE: "# No signature available" */
  const char   *name;          /* function name: computation, backward_fn, prologue ... */
  CsParam      *params;        /* the signature's parameters, in order */
  guint         n_params;      /* entries of params */

  CsStmt      **stmts;         /* body, in order; the last CS_STMT_RETURN ends it */
  guint         n_stmts;       /* entries of stmts */

  CsNameTable  *proxies;       /* name -> CsProxy *: every proxy of a parsed or copied trace; for
                                  a derived trace, those it added (the traces under proxy_base
                                  hold the shared ones) */
  guint32       next_proxy_id; /* id for the next proxy */
  guint32       next_stmt_id;  /* id for the next statement */
  guint32       next_name;     /* counter for cs_trace_fresh_name() */

  const char   *pass;          /* pipeline pass that made it ("parse", "autocast", "grad", ...) */
  gboolean      backward_tags; /* statements carry BACKWARD tags (joint traces) */

  guint32       serial;        /* unique per trace object in the process (ownership marks) */
  CsTrace      *base;          /* cs_trace_derive(): the trace whose statements, values, proxies
                                  and strings this one shares (a reference is held); NULL for
                                  parsed traces and deep copies */
  const CsTrace *proxy_base;   /* where proxy lookups continue after the own table `proxies`
                                  (a trace of the base chain), NULL when `proxies` is complete */
  const guint8 *proxy_keep;    /* NULL, or a filter set by the proxy compaction of dce: a proxy
                                  found through this trace's tables whose id is below
                                  proxy_keep_n and whose proxy_keep[id] is 0 is not part of the
                                  trace (lookups and listings skip it); arena memory */
  guint32       proxy_keep_n;  /* entries in proxy_keep */
  struct _CsAtenInfo *aten;    /* (nullable) a torch.compile graph as read (cs-aten.h): one
                                  reference, shared by cs_trace_copy(), not by cs_trace_derive() */
  int64_t      *shape_cache[8]; /* shape arrays in this trace's arena that cs_proxy_set_tensor()
                                  and cs_trace_copy() hand to further proxies of the same
                                  extents (shapes are never edited in place); direct-mapped by
                                  a hash of the extents, NULL = empty */
  guint8        shape_cache_rank[8]; /* rank of each shape_cache entry */
};

/** A file may hold several traces (concatenated, or a printed Python list of traces). */
typedef struct
{
  gint          ref_count;     /* atomic */
  char         *path;          /* display name of the source ("-" for stdin) */
  GPtrArray    *traces;        /* element-type CsTrace*, owned */
  gboolean      is_list;       /* printed as a Python list `[...]` (reference 1.2m) */
  GPtrArray    *separators;    /* char*: text between trace i and i+1 as read ("\n" or ",\n") */
  char         *trailer;       /* text after the last trace (e.g. "]\n"), or NULL */
} CsTraceList;

/* ---- values ---- */

CsValue    *cs_value_new_none     (CsArena *arena);
CsValue    *cs_value_new_bool     (CsArena *arena, gboolean b);
CsValue    *cs_value_new_int      (CsArena *arena, int64_t i);
CsValue    *cs_value_new_float    (CsArena *arena, double f);
CsValue    *cs_value_new_string   (CsArena *arena, const char *s);
CsValue    *cs_value_new_name     (CsArena *arena, const char *name);
CsValue    *cs_value_new_proxy    (CsArena *arena, CsProxy *proxy);
CsValue    *cs_value_new_underscore (CsArena *arena);
/**
 * cs_value_new_dtype:
 * `dtypes.<long name>`, with a trailing `_` when @weak.  For a valid @dtype the node is one
 * shared by every trace of the process (not in @arena): like every value node it must not be
 * edited; a caller that needs other fields (raw) makes its own node.
 * Returns: (transfer none): the value
 */
CsValue    *cs_value_new_dtype    (CsArena *arena, CsDtype dtype, gboolean weak);
CsValue    *cs_value_new_seq      (CsArena *arena, CsValueKind kind, CsValue **items, guint n);
/** A tuple or list of ints, e.g. a shape `(8, 16)` or dims `(0,)`. */
CsValue    *cs_value_new_int_seq  (CsArena *arena, CsValueKind kind, const int64_t *v, guint n);
CsValue    *cs_value_copy         (CsArena *arena, const CsValue *v, GHashTable *proxy_map);
gboolean    cs_value_equal        (const CsValue *a, const CsValue *b);
/** As cs_value_equal(), and the literal spelling (value->raw) must match at every level. */
gboolean    cs_value_equal_strict (const CsValue *a, const CsValue *b);
/** Reads an int tuple/list value into @out (up to @max); FALSE if @v is not a sequence of ints. */
gboolean    cs_value_get_int_seq  (const CsValue *v, int64_t *out, guint max, guint *n_out);
/** A dtype argument (dtypes.X, bare float/int/bool/complex, torch.X); FALSE if @v is none. */
gboolean    cs_value_get_dtype    (const CsValue *v, CsDtype *out);
/** A device argument (devices.Device("cuda:0"), torch.device(...), 'cuda:0'). */
gboolean    cs_value_get_device   (const CsValue *v, CsDevice *out);
/** Appends every proxy referenced by @v (depth first) to @out (element-type CsProxy*). */
void        cs_value_collect_proxies (const CsValue *v, GPtrArray *out);
/** A function called on a proxy by cs_value_any_proxy(); TRUE stops the walk. */
typedef gboolean (*CsProxyFunc) (CsProxy *proxy, gpointer data);
/**
 * cs_value_any_proxy:
 * Calls @fn on each proxy @v references, in cs_value_collect_proxies() order, until @fn
 * returns TRUE (the passes' tests and marks, without collecting the proxies into a list).
 * Returns: whether a call returned TRUE
 */
gboolean    cs_value_any_proxy    (const CsValue *v, CsProxyFunc fn, gpointer data);

/* ---- proxy name tables ---- */

/*
 * CsNameTable: a trace's proxies by name (open addressing with triangular probing, one word
 * a slot: the proxy's address with low bits of its name's hash in the address's unused top
 * bits, at most half of the slots used; tombstones for removals), keyed by CsProxy.name.  A lookup through a derived
 * trace's layers hashes the name once (cs_name_hash()) and probes each layer's table with it;
 * GHashTable would hash it again per layer.  Not thread-safe; owned by its trace.
 */
/** cs_name_hash: g_str_hash's hash of the NUL-terminated @name (h = h * 33 + c from 5381). */
guint32     cs_name_hash          (const char *name);
/** cs_name_table_new: an empty table. Returns: (transfer full) */
CsNameTable *cs_name_table_new    (void);
/** cs_name_table_free: frees @table (not the proxies); NULL is allowed. */
void        cs_name_table_free    (CsNameTable *table);
/** cs_name_table_lookup: the proxy named @name (@hash = cs_name_hash (@name)), or NULL. */
CsProxy    *cs_name_table_lookup  (const CsNameTable *table, const char *name, guint32 hash);
/**
 * cs_name_table_insert:
 * Adds @proxy under its name (@hash = cs_name_hash (@proxy->name)), replacing an entry of
 * the same name.
 */
void        cs_name_table_insert  (CsNameTable *table, CsProxy *proxy, guint32 hash);
/** _cs_name_table_insert_t: (skip) cs_name_table_insert() for a caller that knows whether the
 * name is "t<n>": @t_plus1 = n + 1, or 0 for any other name. */
void        _cs_name_table_insert_t (CsNameTable *table, CsProxy *proxy, guint32 hash,
                                     guint64 t_plus1);
/** cs_name_table_remove: removes the entry named @name; returns whether there was one. */
gboolean    cs_name_table_remove  (CsNameTable *table, const char *name);
/**
 * cs_name_table_t_bound:
 * A bound on the entries named "t<n>" (_cs_parse_t_name()): each has n < the bound, which is
 * 1 + the largest n inserted, lowered by one when that entry is removed (saturating at
 * G_MAXUINT32).  Thunder names tensors t0, t1, ...: fresh names from the bound on need no
 * lookup (_cs_decompose_names_free_from()).
 */
guint32     cs_name_table_t_bound (const CsNameTable *table);
/**
 * _cs_parse_t_name: (skip)
 * The n of a proxy name "t<n>" as a name counter writes it (decimal, no sign, no leading
 * zero, n <= G_MAXUINT32); FALSE for any other name.
 */
gboolean    _cs_parse_t_name      (const char *name, guint64 *n);
/** cs_name_table_size: the number of entries. */
guint       cs_name_table_size    (const CsNameTable *table);
/**
 * cs_name_table_next:
 * @pos: (inout): 0 to start; the iteration state
 * Returns: (transfer none) (nullable): the next entry's proxy, NULL when there is none left
 * (order unspecified; the table must not change during the iteration)
 */
CsProxy    *cs_name_table_next    (const CsNameTable *table, guint *pos);

/* ---- proxies ---- */

/**
 * cs_proxy_alloc:
 * A zeroed proxy in @arena, 64-byte aligned (its self value and id share a cache line), with
 * its self value set up (see CsProxy.self); the caller fills in the rest (name, id, type).
 * Returns: (transfer none): the proxy, owned by @arena
 */
CsProxy    *cs_proxy_alloc        (CsArena *arena);
/** cs_proxy_init_self: points @proxy's self value at @proxy (after a struct copy of another). */
void        cs_proxy_init_self    (CsProxy *proxy);

/**
 * cs_trace_lookup_proxy:
 * The proxy named @name visible in @trace: its own table first, then (for derived traces) the
 * tables of the traces it shares proxies with; NULL when the first table holding the name
 * has a proxy that the compaction filter (CsTrace.proxy_keep) of @trace or of a trace between
 * it and that table dropped.  Returns: (transfer none) (nullable)
 */
CsProxy    *cs_trace_lookup_proxy (const CsTrace *trace, const char *name);
/** _cs_trace_lookup_proxy_hashed: (skip) cs_trace_lookup_proxy() given @hash = cs_name_hash (@name). */
CsProxy    *_cs_trace_lookup_proxy_hashed (const CsTrace *trace, const char *name, guint32 hash);
/**
 * cs_trace_dup_proxies:
 * Every proxy visible in @trace (own table plus shared ones not shadowed by name), less those
 * the compaction filters drop (see cs_trace_lookup_proxy()).
 * Returns: (transfer container): name (const char *) -> CsProxy *
 */
GHashTable *cs_trace_dup_proxies  (const CsTrace *trace);
/** The number of proxies visible in @trace (see cs_trace_dup_proxies()). */
guint       cs_trace_n_proxies    (const CsTrace *trace);
/**
 * cs_trace_add_proxy:
 * Creates (or returns the existing) proxy @name in @trace, kind OTHER and untyped.
 */
CsProxy    *cs_trace_add_proxy    (CsTrace *trace, const char *name);
/**
 * _cs_trace_new_proxy: (skip)
 * A new proxy of @trace, kind OTHER and untyped, named @name: a string that lives as long as
 * @trace, not visible in @trace yet (the caller looked it up), @hash = cs_name_hash (@name),
 * @t_plus1 = n + 1 when @name is "t<n>" else 0 (see _cs_name_table_insert_t()).
 * Returns: (transfer none): the proxy
 */
CsProxy    *_cs_trace_new_proxy   (CsTrace *trace, const char *name, guint32 hash, guint64 t_plus1);
/**
 * _cs_proxy_new_unnamed: (skip)
 * @arena: where the proxy lives
 *
 * A proxy as _cs_trace_new_proxy() makes one (kind OTHER, untyped), with no name and id 0 and
 * in no trace yet, for a caller that names it afterwards with _cs_trace_name_proxy()
 * (_cs_decompose_fresh_proxy()).
 * Returns: (transfer none): the proxy
 */
CsProxy    *_cs_proxy_new_unnamed (CsArena *arena);
/**
 * _cs_trace_name_proxy: (skip)
 * The naming half of _cs_trace_new_proxy(): gives @proxy (from _cs_proxy_new_unnamed(), living
 * as long as @trace) the name @name (same conditions as there), the trace's next proxy id, and
 * a place in @trace's name table.
 */
void        _cs_trace_name_proxy  (CsTrace *trace, CsProxy *proxy, const char *name,
                                   guint32 hash, guint64 t_plus1);
/** Creates a new tensor proxy with a fresh name from @prefix (e.g. "t"). */
CsProxy    *cs_trace_new_tensor   (CsTrace *trace, const char *prefix, CsDtype dtype,
                                   const int64_t *shape, guint rank, const CsDevice *device);
/** Sets the tensor type of @proxy (clears type_raw); its shape array may be one that other
 * proxies of @trace share (CsTrace.shape_cache): never edit it in place. */
void        cs_proxy_set_tensor   (CsTrace *trace, CsProxy *proxy, CsDtype dtype,
                                   const int64_t *shape, guint rank, const CsDevice *device);
/** A name not used in @trace, "<prefix><n>" with the smallest free n from the trace counter. */
const char *cs_trace_fresh_name   (CsTrace *trace, const char *prefix);
/** Formats a proxy's type string as Thunder prints it: "cuda:0 bf16[8, 16]", "int 3", "Collection". */
char       *cs_proxy_type_string  (const CsProxy *proxy);
/** cs_proxy_type_append: appends cs_proxy_type_string()'s text to @s (no other allocation). */
void        cs_proxy_type_append  (GString *s, const CsProxy *proxy);
gboolean    cs_proxy_is_float_tensor (const CsProxy *proxy);

/* ---- statements ---- */

CsStmt     *cs_stmt_new           (CsTrace *trace, CsStmtKind kind);
/** A CALL statement; @op may be NULL to look @callee up in the op table.  @callee is copied
 * into the arena; @args (the array) is copied, its values are shared. */
CsStmt     *cs_stmt_new_call      (CsTrace *trace, const CsOp *op, const char *callee,
                                   CsValue *out, CsArg *args, guint n_args);
/** cs_stmt_new_call() for a @callee that outlives the trace (a literal or an op-table name,
 * NULL for the op's name): the string is not copied (the passes make tens of thousands). */
CsStmt     *cs_stmt_new_call_static (CsTrace *trace, const CsOp *op, const char *callee,
                                     CsValue *out, const CsArg *args, guint n_args);
/**
 * cs_stmt_index:
 * @trace: the trace whose arena receives the id array
 * @stmt: a CALL statement (other kinds are left as they are)
 *
 * Fills @stmt's def-use ids (cs_stmt_io(), CsStmt.n_in, n_out) from its arguments and target: the
 * constructors (cs_stmt_new_call(), the parser, the copies) and the mutators below call it,
 * so a pass reads a statement's reads and writes as integer arrays instead of walking its
 * value trees.  The proxies must have their ids (every proxy gets one when it is made).
 */
void        cs_stmt_index         (CsTrace *trace, CsStmt *stmt);
/**
 * cs_stmt_io:
 * @stmt: a CALL statement
 *
 * @stmt's def-use ids as cs_stmt_index() stored them: n_in read ids, then n_out written ids
 * (in @stmt itself when there are at most CS_STMT_IO_INLINE, else in its trace's arena).
 * Returns: (array) (transfer none): n_in + n_out ids, valid while @stmt is unchanged
 */
static inline const guint32 *
cs_stmt_io (const CsStmt *stmt)
{
  const guint32 *ids;

  if (stmt->n_in + stmt->n_out <= CS_STMT_IO_INLINE)
    return stmt->io_words;
  memcpy (&ids, stmt->io_words, sizeof ids);
  return ids;
}
/**
 * cs_stmt_set_args:
 * @args: (array length=n_args): the new arguments; the array is adopted (it must live as
 *   long as @trace: its arena, or the array of a statement @trace shares)
 *
 * The IR mutator for a CALL's arguments: replaces them and re-indexes (cs_stmt_index()).
 * @stmt must be one @trace may edit (cs_trace_own_stmt()).
 */
void        cs_stmt_set_args      (CsTrace *trace, CsStmt *stmt, CsArg *args, guint n_args);
/**
 * cs_stmt_set_out:
 * @out: (nullable): the new target tree
 *
 * The IR mutator for a CALL's target: replaces it and re-indexes (cs_stmt_index()); the
 * trailing type comment becomes FULL for a single proxy, else NONE, as cs_stmt_new_call()
 * sets it.  @stmt must be one @trace may edit.
 */
void        cs_stmt_set_out       (CsTrace *trace, CsStmt *stmt, CsValue *out);
/**
 * cs_stmt_set_call:
 * cs_stmt_set_args() and cs_stmt_set_out() in one step (one re-indexing); the type comment
 * is left as it is.
 */
void        cs_stmt_set_call      (CsTrace *trace, CsStmt *stmt, CsArg *args, guint n_args,
                                   CsValue *out);
/**
 * cs_stmt_io_matches:
 * Whether @stmt's stored def-use ids equal those cs_stmt_index() would store now (TRUE for
 * the kinds without them): the check the tests and CASTSCOPE_CHECK_IO=1 apply after each
 * pipeline pass, to every statement at every level.
 */
gboolean    cs_stmt_io_matches    (const CsStmt *stmt);
/**
 * cs_stmt_io_mismatch:
 * What cs_stmt_io_matches() found wrong, for the failure message of a check: the stored and
 * the present counts of reads and writes and the first position whose id differs (the stored
 * id, the proxy the values hold there, its name and id).
 * Returns: (transfer full) (nullable): the description, NULL when the ids match
 */
char       *cs_stmt_io_mismatch   (const CsStmt *stmt);
/** The single output proxy of a CALL whose target is one proxy, else NULL. */
CsProxy    *cs_stmt_get_output    (const CsStmt *stmt);
/** Appends every output proxy of a CALL/UNPACK/ANNASSIGN to @out. */
void        cs_stmt_collect_outputs (const CsStmt *stmt, GPtrArray *out);
/** Appends every proxy read by the statement's arguments (not its subsymbols) to @out. */
void        cs_stmt_collect_inputs  (const CsStmt *stmt, GPtrArray *out);
/** The general case of cs_stmt_get_arg(): counts positional arguments, then compares
 *  keyword names. */
CsValue    *_cs_stmt_get_arg_slow (const CsStmt *stmt, guint i, const char *kw);

/**
 * cs_stmt_get_arg:
 * @stmt: a CALL statement
 * @i: 0-based index among the positional arguments
 * @kw: (nullable): the keyword that may pass the same parameter (Python's `f(a, dtype=d)`)
 *
 * Inline: the first two positional arguments, the ones the passes ask for per statement, are
 * read directly when every argument up to them is positional.
 * Returns: (transfer none) (nullable): positional argument @i, or the keyword @kw, or NULL
 */
static inline CsValue *
cs_stmt_get_arg (const CsStmt *stmt, guint i, const char *kw)
{
  if (i < 2 && i < stmt->n_args && stmt->args[0].name == NULL && stmt->args[i].name == NULL)
    return stmt->args[i].value;
  return _cs_stmt_get_arg_slow (stmt, i, kw);
}
/** TRUE for statements that are bound symbols (CALL, UNPACK, ANNASSIGN, DEL, RETURN). */
gboolean    cs_stmt_is_symbol     (const CsStmt *stmt);
void        cs_stmt_set_subs      (CsTrace *trace, CsStmt *stmt, CsStmt **subs, guint n);

/* ---- traces ---- */

/** A new empty trace named @name ("computation"), pass "@pass". */
CsTrace    *cs_trace_new          (const char *name, const char *pass);
CsTrace    *cs_trace_ref          (CsTrace *trace);
void        cs_trace_unref        (CsTrace *trace);
/**
 * cs_trace_copy:
 * Deep copy into a fresh arena: proxies, statements (ids and origins kept), header lines.
 * Returns: (transfer full): the copy, with pass set to @pass (or kept when NULL)
 */
CsTrace    *cs_trace_copy         (const CsTrace *trace, const char *pass);
/**
 * cs_trace_derive:
 * @trace: the input of a pass
 * @pass: (nullable): pass name of the result
 *
 * A structurally shared copy for passes over large traces (the persistent-data-structure
 * technique of compilers that keep every intermediate program): the result holds a reference
 * to @trace and shares its header strings, values, proxies and subsymbol statements; only the
 * top-level statements are fresh shallow copies (struct, args/targets/names/subs arrays) that
 * the pass may edit in place.  Shared objects are immutable: a pass that would change a
 * subsymbol statement takes a private copy with cs_trace_own_stmt(), one that would change a
 * value builds a new one (as _cs_value_remap does), and a pass that retypes proxies must use
 * cs_trace_copy() instead.  Proxies created afterwards go to the result's own table; lookups
 * fall through to @trace's.  Ids, origins and names are kept, as with cs_trace_copy().
 * Cost: O(top-level statements); the subsymbols are not visited.
 * Returns: (transfer full): the derived trace
 */
CsTrace    *cs_trace_derive       (const CsTrace *trace, const char *pass);
/**
 * cs_trace_derive_shared:
 * @trace: the input of a pass
 * @pass: (nullable): pass name of the result
 *
 * As cs_trace_derive(), but the top-level statements are shared too (only the array of
 * statement pointers is the result's; a statement without an origin is still copied, to get
 * its id as origin): the pass must take a private copy with
 * cs_trace_own_stmt() before it edits any statement, top-level ones included.  For the passes
 * that rewrite few top-level statements (fuse, remove-redundant-casts, cse, dce,
 * delete-last-used).
 * Cost: O(top-level statements), pointers only.
 * Returns: (transfer full): the derived trace
 */
CsTrace    *cs_trace_derive_shared (const CsTrace *trace, const char *pass);
/**
 * cs_trace_own_stmt:
 * Returns @stmt when @trace owns it (stmt->owner == trace->serial), else a shallow copy in
 * @trace's arena (same id and origin; own args/targets/names/subs arrays; values and
 * subsymbols still shared) that the caller puts in place of @stmt.
 * Returns: (transfer none): a statement @trace may edit in place
 */
CsStmt     *cs_trace_own_stmt     (CsTrace *trace, CsStmt *stmt);
/** Replaces the body with @stmts (statements must belong to @trace's arena). */
void        cs_trace_set_stmts    (CsTrace *trace, CsStmt **stmts, guint n);
/** The final RETURN statement or NULL. */
CsStmt     *cs_trace_get_return   (const CsTrace *trace);
/** Input proxies named by the signature (in order; `*args`/`**kwargs` included). */
GPtrArray  *cs_trace_dup_inputs   (const CsTrace *trace);
/** Copy a statement (and its subsymbols) from another trace into @dst, mapping proxies by name
 *  through @proxy_map (src CsProxy* -> dst CsProxy*; missing ones are created by name). */
CsStmt     *cs_stmt_copy_into     (CsTrace *dst, const CsStmt *stmt, GHashTable *proxy_map);

CsTraceList *cs_trace_list_new    (const char *path);
CsTraceList *cs_trace_list_ref    (CsTraceList *list);
void         cs_trace_list_unref  (CsTraceList *list);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (CsTrace, cs_trace_unref)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (CsTraceList, cs_trace_list_unref)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (CsArena, cs_arena_free)

G_END_DECLS
