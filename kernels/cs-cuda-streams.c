/* cs-cuda-streams.c: the step's launches spread over a few CUDA streams, for the graph capture.
 *
 * A training step is a list of launches in trace order, and most of them wait for nothing but
 * their inputs: a block's q, k and v projections, the weight gradients of the backward (dW =
 * dY^T X) beside the chain of input gradients (dX = dY W), the forward's gate and up
 * projections.  Captured on one stream they run one after another; at model scale every launch
 * is small and the GPU sits mostly idle between them.  Here each step is put on one of
 * CS_CUDA_MAX_STREAMS streams, and a step waits only for the steps it conflicts with: those
 * that wrote bytes of the arena it reads or writes (read after write, write after write) and
 * those that read bytes it writes (write after read).  Conflicts are found on the arena's bytes,
 * not on tensors, because the memory plan lends one buffer's bytes to another whose lifetime
 * follows it: the second's writer then waits for the first's last readers.
 *
 * Steps that fill the GPU on their own (a roofline floor of CS_CUDA_SATURATING_MS or more: the
 * large GEMMs and memory-bound kernels of a single wide layer) gain nothing from running beside
 * each other and lose some to shared caches, so they stay in trace order among themselves (as
 * if each wrote one extra cell, "the GPU"); the small launches of a model at small dims, which
 * leave most SMs idle, spread.
 *
 * The arena is cut into cells at every buffer boundary; each cell keeps its last writer and, per
 * stream, its latest reader since that write.  A step goes on the stream whose last step it
 * depends on (a chain continues without a wait), else on an unused stream, else on the stream
 * whose last step is the oldest.  Its waits are vector-clock filtered: a wait for step d of
 * stream s is left out when the step's stream already waited for d or a later step of s,
 * directly or through another wait.  The capture (cs-cuda-program.c ensure_graph) forks the
 * streams from the program's stream, records an event after every step another one waits for,
 * and joins them back at the end.  GEMMs on different streams use different cuBLASLt workspaces;
 * cuDNN attention steps, which share one cuDNN handle and workspace, all run on stream 0.
 *
 * This is how CUDA graphs express concurrency (the CUDA Programming Guide, "CUDA Graphs: stream
 * capture across streams"); PyTorch's autograd engine likewise runs independent backward work on
 * the streams its forward used.
 */
#include "cs-config.h"

#include "cs-cuda-private.h"

#include <stdlib.h>
#include <string.h>

static int
cmp_gsize (const void *a, const void *b)
{
  gsize x = *(const gsize *) a, y = *(const gsize *) b;

  return x < y ? -1 : x > y;
}

/* Index of @v in the sorted @edges[0..n) (present by construction). */
static guint
edge_index (const gsize *edges, guint n, gsize v)
{
  guint lo = 0, hi = n;

  while (hi - lo > 1)
    {
      guint mid = (lo + hi) / 2;

      if (edges[mid] <= v)
        lo = mid;
      else
        hi = mid;
    }
  return lo;
}

static gsize
buffer_end (const CsCudaBuffer *b)
{
  return b->offset + (b->size_bytes + CS_CUDA_ALIGN - 1) / CS_CUDA_ALIGN * CS_CUDA_ALIGN;
}

/* The cells [*c0, *c1) that slot @slot's buffer covers; G_MAXUINT: the GPU cell (index nc). */
static void
cells_of (CsCudaProgram *p, const gsize *edges, guint nc, guint slot, guint *c0, guint *c1)
{
  const CsCudaBuffer *b;

  if (slot == G_MAXUINT)
    {
      *c0 = nc;
      *c1 = nc + 1;
      return;
    }
  b = &g_array_index (p->buffers, CsCudaBuffer, cs_cuda_program_slot (p, slot)->buffer);
  *c0 = edge_index (edges, nc, b->offset);
  *c1 = edge_index (edges, nc, buffer_end (b));
}

/**
 * cs_cuda_program_schedule:
 * @p: a planned program (steps, liveness and arena offsets: after plan_arena)
 * @n_streams: streams to use, 1..CS_CUDA_MAX_STREAMS (1: every step on the program's stream,
 *   in order, no waits)
 *
 * Sets each step's stream, its waits (indices of earlier steps on other streams, at most one
 * per stream) and `signals` (a later step waits for it), p->n_streams (streams that received a
 * step) and p->critical_path (the longest chain of steps that must run one after another, in
 * steps).  Every pair of conflicting steps (one writes arena bytes the other reads or writes)
 * ends up ordered: on one stream, or through a chain of waits.  Deterministic; no device needed.
 */
void
cs_cuda_program_schedule (CsCudaProgram *p, guint n_streams)
{
  guint n = p->steps->len, nb = p->buffers->len, ne = 0, nc;
  g_autofree gsize *edges = g_new (gsize, 2 * (gsize) nb + 1);
  g_autofree gint *writer = NULL, *reader = NULL, *clock = NULL;
  gint tail[CS_CUDA_MAX_STREAMS];
  gint known[CS_CUDA_MAX_STREAMS][CS_CUDA_MAX_STREAMS];   /* known[a][s]: latest step of s that a waits for */
  guint used = 0, longest = 0;

  n_streams = CLAMP (n_streams, 1, CS_CUDA_MAX_STREAMS);
  for (guint i = 0; i < nb; i++)
    {
      const CsCudaBuffer *b = &g_array_index (p->buffers, CsCudaBuffer, i);

      if (b->first < 0)
        continue;
      edges[ne++] = b->offset;
      edges[ne++] = buffer_end (b);
    }
  qsort (edges, ne, sizeof (gsize), cmp_gsize);
  nc = 0;
  for (guint i = 0; i < ne; i++)
    if (nc == 0 || edges[i] != edges[nc - 1])
      edges[nc++] = edges[i];
  /* nc edges: cells 0..nc-2 of the arena, and cell nc: the saturating steps' "GPU" */
  writer = g_new (gint, nc + 1);
  reader = g_new (gint, (gsize) (nc + 1) * CS_CUDA_MAX_STREAMS);
  for (guint c = 0; c <= nc; c++)
    writer[c] = -1;
  for (guint c = 0; c < (gsize) (nc + 1) * CS_CUDA_MAX_STREAMS; c++)
    reader[c] = -1;
  clock = g_new (gint, (gsize) MAX (n, 1) * CS_CUDA_MAX_STREAMS);
  for (guint s = 0; s < CS_CUDA_MAX_STREAMS; s++)
    {
      tail[s] = -1;
      for (guint t = 0; t < CS_CUDA_MAX_STREAMS; t++)
        known[s][t] = -1;
    }

  for (guint j = 0; j < n; j++)
    {
      CsCudaStep *st = g_ptr_array_index (p->steps, j);
      const GArray *lists[2] = { st->reads, st->writes };
      gint dep[CS_CUDA_MAX_STREAMS];
      gint chosen = -1, d = 0;

      gboolean saturating = st->floor_ms >= CS_CUDA_SATURATING_MS;

      for (guint s = 0; s < CS_CUDA_MAX_STREAMS; s++)
        dep[s] = -1;
      /* the latest conflicting step on each stream (list 2: the GPU cell of a saturating step) */
      for (guint l = 0; l < 3; l++)
        for (guint k = 0; k < (l < 2 ? lists[l]->len : saturating ? 1u : 0u); k++)
          {
            guint c0, c1;

            cells_of (p, edges, nc, l < 2 ? g_array_index (lists[l], guint, k) : G_MAXUINT, &c0, &c1);
            for (guint c = c0; c < c1; c++)
              {
                gint w = writer[c];

                if (w >= 0)
                  {
                    CsCudaStep *ws = g_ptr_array_index (p->steps, w);

                    dep[ws->stream] = MAX (dep[ws->stream], w);
                  }
                if (l >= 1)
                  for (guint s = 0; s < n_streams; s++)
                    dep[s] = MAX (dep[s], reader[(gsize) c * CS_CUDA_MAX_STREAMS + s]);
              }
          }

      /* its stream: continue a chain it depends on, else an unused stream, else the oldest;
         cuDNN steps share one handle and workspace, so they all run on stream 0 */
      for (guint s = 0; s < n_streams; s++)
        if (dep[s] >= 0 && dep[s] == tail[s] && (chosen < 0 || dep[s] > dep[chosen]))
          chosen = (gint) s;
      if (st->kind == CS_CUDA_STEP_CUDNN)
        chosen = 0;
      for (guint s = 0; chosen < 0 && s < n_streams; s++)
        if (tail[s] < 0)
          chosen = (gint) s;
      if (chosen < 0)
        {
          chosen = 0;
          for (guint s = 1; s < n_streams; s++)
            if (tail[s] < tail[chosen])
              chosen = (gint) s;
        }
      st->stream = (guint) chosen;
      st->n_waits = 0;
      if (tail[chosen] >= 0)
        d = (gint) ((CsCudaStep *) g_ptr_array_index (p->steps, tail[chosen]))->depth;
      for (guint s = 0; s < n_streams; s++)
        {
          if (s == (guint) chosen || dep[s] < 0)
            continue;
          d = MAX (d, (gint) ((CsCudaStep *) g_ptr_array_index (p->steps, dep[s]))->depth);
          if (dep[s] <= known[chosen][s])
            continue;
          CsCudaStep *ds = g_ptr_array_index (p->steps, dep[s]);

          st->waits[st->n_waits++] = (guint) dep[s];
          ds->signals = TRUE;
          /* what the awaited step's stream knew then, this stream knows now */
          for (guint t = 0; t < n_streams; t++)
            known[chosen][t] = MAX (known[chosen][t], clock[(gsize) dep[s] * CS_CUDA_MAX_STREAMS + t]);
          known[chosen][s] = MAX (known[chosen][s], dep[s]);
        }
      st->depth = (guint) d + 1;
      longest = MAX (longest, st->depth);
      tail[chosen] = (gint) j;
      known[chosen][chosen] = (gint) j;
      for (guint t = 0; t < CS_CUDA_MAX_STREAMS; t++)
        clock[(gsize) j * CS_CUDA_MAX_STREAMS + t] = known[chosen][t];
      used |= 1u << chosen;

      /* its accesses, for the steps after it: reads first, so that a step reading and
         writing one cell leaves itself as that cell's writer */
      for (guint l = 0; l < 3; l++)
        for (guint k = 0; k < (l < 2 ? lists[l]->len : saturating ? 1u : 0u); k++)
          {
            guint c0, c1;

            cells_of (p, edges, nc, l < 2 ? g_array_index (lists[l], guint, k) : G_MAXUINT, &c0, &c1);
            for (guint c = c0; c < c1; c++)
              if (l == 0)
                reader[(gsize) c * CS_CUDA_MAX_STREAMS + chosen] = (gint) j;
              else
                {
                  writer[c] = (gint) j;
                  for (guint s = 0; s < CS_CUDA_MAX_STREAMS; s++)
                    reader[(gsize) c * CS_CUDA_MAX_STREAMS + s] = -1;
                }
          }
    }
  p->n_streams = (guint) g_bit_nth_msf (used, -1) + 1;
  if (n == 0)
    p->n_streams = 1;
  p->critical_path = longest;
}
