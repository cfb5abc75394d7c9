/* cs-aten.h: torch.compile's printed graphs (PyTorch 2.11) as castscope traces.
 *
 * torch.compile prints FX GraphModules: the AOT Autograd forward, backward, joint and inference
 * graphs of `TORCH_LOGS=aot_graphs`, and Dynamo's graph of `TORCH_LOGS=graph_code` /
 * `GraphModule.print_readable()`.  Each node is a line
 *
 *     mm: "bf16[8192, 4096][4096, 1]cuda:0" = torch.ops.aten.mm.default(view, permute);  view = None
 *
 * (torch/fx/graph.py CodeGen._gen_python_code with verbose, include_stride and include_device:
 * dtype abbreviation (torch/utils/_dtype_abbrs.py), shape, stride, device), under
 * `# File: path:line in fn, code: src` comments; the graphs are framed by
 * torch/_dynamo/utils.py _format_graph_code (`TRACED GRAPH`, ` ===== Forward graph 0 =====`,
 * ` path class GraphModule(torch.nn.Module):`).  cs-parse-aten.c reads them into the trace IR
 * (one #CsTrace per graph) and cs-print-aten.c prints them back.
 *
 * A parsed graph keeps what the IR has no field for in a #CsAtenInfo hung on the trace
 * (CsTrace.aten): its role and title, the header lines, each tensor's strides, the node names
 * of Dynamo's renamed placeholders and the names of multi-output nodes whose `getitem` reads
 * the parser folded into the node's targets.  Passes do not carry it (a transformed graph holds
 * prims and fusion regions and prints in Thunder's format); cs_trace_copy() shares it.
 *
 * Naming: a forward graph is the trace `forward`, a backward graph `backward_fn` (so that the
 * pairing of Thunder's printed forward and `backward_fn` pairs them too), a joint graph
 * `joint`, any other graph `forward`.  The forward graph returns its user outputs followed by
 * the tensors it saves; the backward graph takes those saved tensors by the same names,
 * followed by `tangents_1, tangents_2...` (torch/_functorch/partitioners.py), which is how
 * castscope's CPU reference feeds one into the other.
 */
#pragma once

#include <glib.h>
#include <stdint.h>

#include "cs-ir.h"

G_BEGIN_DECLS

/** What an FX graph is, from its title (` ===== Forward graph 0 =====`) or its signature. */
typedef enum
{
  CS_ATEN_GRAPH_OTHER,     /* no title: print_readable() output, Dynamo's graph_code */
  CS_ATEN_GRAPH_FORWARD,   /* "Forward graph N": user outputs, then the saved tensors */
  CS_ATEN_GRAPH_BACKWARD,  /* "Backward graph N": saved tensors and tangents in, grads out */
  CS_ATEN_GRAPH_JOINT,     /* "Joint graph N": (primals, tangents) -> (outputs, grads) */
  CS_ATEN_GRAPH_INFERENCE, /* "Inference graph N" (no grad): outputs only */
} CsAtenRole;

typedef struct _CsAtenInfo CsAtenInfo;

/* Immutable once the parser has filled it; shared by reference between copies of a trace. */
struct _CsAtenInfo
{
  gint         ref_count;     /* atomic */
  CsAtenRole   role;          /* from the title */
  int          graph_id;      /* the N of the title, -1 when there is none */
  char        *title;         /* "Forward graph 0" (between the =====), or NULL */
  GPtrArray   *header;        /* char*: the lines before `class GraphModule`, as read (ANSI
                                 colours and log prefixes removed) */
  char        *class_prefix;  /* text before "class GraphModule" on its line (the file name
                                 _format_graph_code puts there, with its spaces), or "" */
  char        *class_name;    /* "GraphModule" */
  gboolean     return_list;   /* the return value was printed as a list `[a, b]` */
  GHashTable  *strides;       /* proxy name -> int64_t[1 + rank]: rank, then the strides in
                                 elements, outermost first */
  GHashTable  *raw_types;     /* proxy name -> annotation text of a non-tensor node ("Sym(s0)") */
  GHashTable  *node_names;    /* proxy name -> the node name the body uses for it (Dynamo's
                                 placeholders `l_x_ = L_x_`: proxy L_x_, node l_x_) */
  GHashTable  *collections;   /* GUINT_TO_POINTER (statement id) -> name of the tuple node a
                                 multi-output call wrote; its `getitem` reads became targets */
  char        *def_params;    /* joint graphs: the parameters of `def forward(self, ...)` as
                                 printed ("primals, tangents") when a pytree line flattens them;
                                 NULL otherwise (the trace's parameters are the flattened names) */
  char        *flatten_line;  /* joint graphs: the `a, b, = fx_pytree.tree_flatten_spec(...)`
                                 line as read (without indentation), or NULL */
  gboolean     annotations_line; /* joint graphs: the inputs' types were printed on one
                                 `a: "type"; b: "type";` line */
  gboolean     return_unflatten; /* the return value was `pytree.tree_unflatten(V, self._out_spec)` */
  gboolean     show_stride;   /* annotations carry strides (include_stride) */
  gboolean     show_device;   /* annotations carry the device (include_device) */
};

CsAtenInfo  *cs_aten_info_new         (void);
CsAtenInfo  *cs_aten_info_ref         (CsAtenInfo *info);
void         cs_aten_info_unref       (CsAtenInfo *info);

/**
 * cs_aten_info_get_strides:
 * @info: a graph's info
 * @name: a tensor proxy's name
 * @rank: (out): the rank the strides were read for
 *
 * Returns: (transfer none) (nullable): the strides printed for @name (elements, outermost
 *   first), NULL when none were printed
 */
const int64_t *cs_aten_info_get_strides (const CsAtenInfo *info, const char *name, guint *rank);

/**
 * cs_print_aten_to:
 * @out: where the text goes
 * @trace: a trace with CsTrace.aten set (a graph as read)
 *
 * Appends @trace in the format it was read in (the reverse of cs_parse_aten_text()): header
 * lines, the class and def lines, each node with its annotation and the `;  a = None` list of
 * the values it frees (torch/fx/graph.py's rule: a value is freed after its last use, a node
 * nobody uses right after itself), the `getitem` reads of multi-output nodes after them, the
 * return and the frame's closing lines.
 */
void         cs_print_aten_to         (GString *out, const CsTrace *trace);

/** The role name: "forward", "backward", "joint", "inference", "graph". */
const char  *cs_aten_role_name        (CsAtenRole role);

/**
 * cs_aten_dtype_abbr:
 * The abbreviation torch.utils._dtype_abbrs gives @dtype ("bf16", "f32", "b8", "u8",
 * "f8e4m3fn"); static.
 */
const char  *cs_aten_dtype_abbr       (CsDtype dtype);
/** cs_aten_dtype_from_abbr: the inverse of cs_aten_dtype_abbr() (@len bytes of @s). */
gboolean     cs_aten_dtype_from_abbr  (const char *s, gsize len, CsDtype *out);

/**
 * cs_trace_aten_role:
 * Returns: the role of @trace when it was read from a torch.compile graph, or -1 for a Thunder
 *   trace (or a pass's result)
 */
int          cs_trace_aten_role       (const CsTrace *trace);

/**
 * cs_aten_find_backward:
 * @list: the traces of a file
 * @index: a forward graph of @list
 *
 * The backward graph that belongs to forward graph @index: the first backward graph after it
 * with the same graph number (AOT's aot_id), else the first backward graph after it whose
 * inputs other than `tangents_*` are all among the forward's returned names.
 * Returns: (transfer none) (nullable): the backward trace, NULL when there is none
 */
CsTrace     *cs_aten_find_backward    (const CsTraceList *list, guint index);

/**
 * cs_aten_n_saved:
 * @forward: a forward graph
 * @backward: its backward graph
 *
 * How many of the forward's returned values the backward takes (the saved tensors, returned
 * last).  Returns: the count; the forward's user outputs are the ones before them
 */
guint        cs_aten_n_saved          (const CsTrace *forward, const CsTrace *backward);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (CsAtenInfo, cs_aten_info_unref)

G_END_DECLS
