/* cs-inductor.h: Inductor's fusion plan, read from what `TORCH_LOGS=output_code` prints.
 *
 * For each AOT graph it compiles (forward, then backward), Inductor prints one Python module
 * (torch/_inductor/graph.py, GraphLowering.codegen): a header `# AOT ID: ['0_forward']`, the
 * definition of every Triton kernel it generated and a `call(self, args)` that runs them in
 * order.  Above each definition Inductor prints the kernel's metadata
 * (torch/_inductor/codegen/common.py, get_kernel_metadata):
 *
 *     # kernel path: <cache>/6b/c6bhq...py
 *     # Topologically Sorted Source Nodes: [gelu], Original ATen: [aten.gelu]
 *     # Source node to ATen node mapping:
 *     #   gelu => add, add_1, convert_element_type_3, ...
 *     # Graph fragment:
 *     #   %addmm : Tensor "bf16[32, 256][256, 1]cuda:0" = PlaceHolder[target=addmm]
 *     #   %convert_element_type_3 : Tensor "f32[..]" = call_function[target=torch.ops.prims.
 *     #       convert_element_type.default](args = (%addmm, torch.float32), kwargs = {})
 *     #   return %convert_element_type_4
 *     triton_poi_fused_gelu_0 = async_compile.triton('triton_poi_fused_gelu_0', '''...''')
 *
 * and in `call` each launch (`triton_poi_fused_gelu_0.run(buf0, buf1, 8192, stream=stream0)`)
 * or extern kernel (`extern_kernels.addmm(...)`, `buf0 = torch.ops.aten.X.default(...)`) under
 * a `# Topologically Sorted Source Nodes: [...]` comment.  The "Graph fragment" names the nodes
 * of the (post-grad) AOT graph the kernel computes: these are the node names of the
 * `TORCH_LOGS=aot_graphs` graph (cs-aten.h), except for the few nodes Inductor's post-grad
 * passes add (`var_mean` of the layer-norm decomposition, `constant_pad_nd_default` of pad_mm).
 * The "Source Nodes" are Dynamo's node names (`linear`, `gelu`) in a forward graph, not AOT
 * node names, so castscope takes a kernel's nodes from its fragment.
 *
 * Inductor prints one definition per distinct kernel source: a kernel launched twice (the same
 * cast on two weights) has the fragment of its first launch only.  castscope maps a repeated
 * launch by instantiating that fragment on the graph: the fragment's placeholders that the
 * first launch passes by name (graph inputs) are bound to what the repeated launch passes at
 * the same argument positions, then each fragment node is matched, in order, to the first
 * graph node with the same target whose tensor arguments are the bound values (a node not yet
 * in a region first).
 *
 * A node Inductor computes in two kernels (it inlines cheap pointwise producers into several
 * consumers) belongs, in castscope's IR, to the first region in launch order; the later region
 * reads it as an input.  Extern kernels stay outside regions, as matmuls.
 */
#pragma once

#include <glib.h>

#include "cs-aten.h"
#include "cs-ir.h"

G_BEGIN_DECLS

#define CS_INDUCTOR_ERROR (cs_inductor_error_quark ())
/** cs_inductor_error_quark: the #GQuark of #CS_INDUCTOR_ERROR (codes: #CsInductorError). */
GQuark cs_inductor_error_quark (void);

typedef enum
{
  CS_INDUCTOR_ERROR_IO,        /* the file could not be read */
  CS_INDUCTOR_ERROR_SYNTAX,    /* a line that breaks the printed format, or a truncated module */
  CS_INDUCTOR_ERROR_EMPTY,     /* no `# AOT ID:` module in the input */
  CS_INDUCTOR_ERROR_NAME,      /* a kernel whose nodes are not nodes of the graph, a launch of
                                  an undefined kernel */
  CS_INDUCTOR_ERROR_GRAPH,     /* the code does not fit the graph (no module for it, a cycle) */
} CsInductorError;

/** One line of a kernel's "Graph fragment". */
typedef struct
{
  char        *name;       /* the FX node name after `%` ("convert_element_type_3") */
  char        *target;     /* call_function target ("torch.ops.aten.mul.Tensor",
                              "operator.getitem"); NULL for a PlaceHolder */
  GPtrArray   *refs;       /* char*: the `%name`s its args and kwargs read, in order */
  int64_t      index;      /* operator.getitem: the literal index; -1 otherwise */
  gboolean     typed;      /* a tensor type was printed (`Tensor "f32[2, 4][4, 1]cuda:0"`) */
  CsDtype      dtype;      /* typed: its dtype */
  guint        rank;       /* typed: number of dims (<= CS_MAX_DIMS) */
  int64_t      shape[CS_MAX_DIMS]; /* typed: extents, outermost first; -1 symbolic */
  guint        line;       /* 1-based line of the file */
  guint        col;        /* 1-based column of the name (after `%`) */
} CsInductorNode;

/** One Triton kernel definition (`NAME = async_compile.triton('NAME', ...)`). */
typedef struct
{
  char        *name;       /* "triton_poi_fused_gelu_0" */
  GPtrArray   *nodes;      /* CsInductorNode*: the Graph fragment in printed order (placeholders
                              and call_function nodes) */
  guint        line;       /* line of the async_compile statement */
  guint        col;        /* column of its first character */
} CsInductorKernel;

typedef enum
{
  CS_INDUCTOR_LAUNCH_TRITON,   /* `K.run(...)` of a Triton kernel defined in the module */
  CS_INDUCTOR_LAUNCH_EXTERN,   /* `extern_kernels.mm(...)` or a fallback `torch.ops.aten.X(...)` */
} CsInductorLaunchKind;

/** One kernel run by `call(self, args)`, in call order. */
typedef struct
{
  CsInductorLaunchKind kind; /* a Triton kernel's run, or an extern call */
  char        *callee;     /* the kernel name, "extern_kernels.mm" or
                              "torch.ops.aten._scaled_dot_product_cudnn_attention.default" */
  const CsInductorKernel *kernel; /* TRITON: its definition (owned by the graph); else NULL */
  GPtrArray   *args;       /* char*: the positional arguments, each the identifier it passes
                              ("buf0", "primals_3"; the tensor of a `reinterpret_tensor(X, ..)`)
                              or "" for any other expression */
  GPtrArray   *source_nodes; /* char*: the "Topologically Sorted Source Nodes" above it */
  guint        line;       /* 1-based line of the launch */
  guint        col;        /* 1-based column of the callee */
} CsInductorLaunch;

/** One module of the output code: what Inductor generated for one AOT graph. */
typedef struct
{
  char        *aot_id;     /* "0_forward", "0_backward", "0_inference" */
  int          graph_id;   /* the number before the underscore, -1 when there is none */
  CsAtenRole   role;       /* FORWARD, BACKWARD, INFERENCE or OTHER, from the AOT ID */
  GPtrArray   *kernels;    /* CsInductorKernel*, in definition order */
  GPtrArray   *launches;   /* CsInductorLaunch*, in call order */
  guint        n_triton;   /* launches of Triton kernels (Inductor's regions) */
  guint        n_extern;   /* extern and fallback kernels */
  guint        line;       /* line of the `# AOT ID:` header */
} CsInductorGraph;

/** A parsed output_code file; reference counted. */
typedef struct
{
  gint         ref_count;  /* atomic */
  char        *path;       /* display name of the source */
  GPtrArray   *graphs;     /* CsInductorGraph*, in file order */
} CsInductorCode;

/**
 * cs_inductor_parse_text:
 * @text: the output as torch.compile printed it (glog prefixes `V1202 06:42:17.663000 1991
 *   torch/_inductor/graph.py:2552] [0/0] [__output_code] ` are removed; `#` lines before the
 *   first record are skipped)
 * @len: bytes of @text
 * @name: display name for errors
 * @error: return location for a #CS_INDUCTOR_ERROR, message "name:line:col: reason"
 *
 * Reads every module (`# AOT ID:`), its kernel definitions with their Graph fragments and the
 * launches of its `call`.  Errors: EMPTY (no module), SYNTAX (a fragment line or launch that
 * does not parse, a module cut before the `return` of its `call` or inside a kernel's source
 * string), NAME (a launch of a kernel the module does not define).
 * Returns: (transfer full): the code, or NULL with @error set
 */
CsInductorCode *cs_inductor_parse_text  (const char *text,
                                         gsize       len,
                                         const char *name,
                                         GError    **error);

/**
 * cs_inductor_parse_file:
 * As cs_inductor_parse_text() on the file at @path (read up to #CS_PARSE_MAX_FILE_BYTES).
 * Errors: IO for a file that cannot be read.
 * Returns: (transfer full): the code, or NULL with @error set
 */
CsInductorCode *cs_inductor_parse_file  (const char *path,
                                         GError    **error);

/** cs_inductor_code_ref: takes a reference (atomic; @code must not be NULL).
 * Returns: (transfer full): @code */
CsInductorCode *cs_inductor_code_ref    (CsInductorCode *code);
/** cs_inductor_code_unref: drops a reference (atomic); frees @code, its path and graphs at
 * zero; NULL is allowed. */
void            cs_inductor_code_unref  (CsInductorCode *code);

/**
 * cs_inductor_code_find_graph:
 * @code: parsed output code
 * @role: FORWARD, BACKWARD or INFERENCE
 * @graph_id: the AOT graph number (the N of "Forward graph N"), or -1 for any
 *
 * Returns: (transfer none) (nullable): the first module of that role and number, or NULL
 */
const CsInductorGraph *cs_inductor_code_find_graph (const CsInductorCode *code,
                                                    CsAtenRole            role,
                                                    int                   graph_id);

/**
 * cs_inductor_fuse_trace:
 * @trace: (transfer none): a torch.compile graph after castscope's decompose pass (its
 *   top-level statements are the graph's nodes, named as printed)
 * @graph: the module Inductor generated for that graph
 * @path: (nullable): display name of the output code, for errors
 * @error: return location for a #CS_INDUCTOR_ERROR, message "file:line:col: reason" naming
 *   the output-code line
 *
 * Inductor's fusion in place of castscope's: every Triton launch of @graph becomes one region
 * call named by its kernel (`[outs] = triton_poi_fused_gelu_0(ins)`), whose subsymbols are its
 * nodes' statements flattened to prims, in graph order; stmt->why says "Inductor kernel" and,
 * where the fragment names nodes the AOT graph lacks (post-grad nodes), which.  Every other
 * statement stays outside.  The statements are then ordered by their dependences, ties broken
 * by graph order (a region sits where its first node was, unless its inputs come later).
 * A region's outputs are the values read outside it (or returned), its inputs the values its
 * prims read from outside, in first-appearance order, as castscope's own regions.
 * Nodes the fragment names that @trace lacks (post-grad nodes) are skipped; the statements
 * outside regions that lie between nodes of one region (what those post-grad nodes replaced)
 * join it.  A kernel whose nodes all belong to earlier regions gets a region of copies of them
 * (fresh proxies, no outputs: a later DCE drops it).
 * Errors: NAME for a kernel none of whose fragment nodes is a node of @trace, a fragment node
 * whose printed dtype or shape is not that of the graph node of its name, a kernel without a
 * Graph fragment, or a repeated launch whose fragment cannot be matched; GRAPH for a trace
 * without a return or regions that would form a cycle.
 * Returns: (transfer full): the fused trace (pass "fuse"), or NULL with @error set
 */
CsTrace        *cs_inductor_fuse_trace  (const CsTrace         *trace,
                                         const CsInductorGraph *graph,
                                         const char            *path,
                                         GError               **error);

/**
 * cs_inductor_stmt_is_region:
 * Returns: whether @stmt is a region made by cs_inductor_fuse_trace() (a fusion call whose
 *   callee is a Triton kernel name, `triton_...`): the executor "inductor"
 */
gboolean        cs_inductor_stmt_is_region (const CsStmt *stmt);

/**
 * cs_inductor_sibling_path:
 * @aten_path: the path of a torch.compile graph file, "DIR/NAME.txt"
 *
 * Where generate.py writes the output code of the same compile: "DIR/inductor/NAME.output_code".
 * Returns: (transfer full) (nullable): that path, or NULL when @aten_path does not end in ".txt"
 */
char           *cs_inductor_sibling_path (const char *aten_path);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (CsInductorCode, cs_inductor_code_unref)

G_END_DECLS
