/* cs-parallel.h: a parallel for over the independent items of a pass (regions), on a pool of
 * worker threads that live as long as the process (one less than CASTSCOPE_THREADS or the
 * processor count, made on first use).
 *
 * The passes use it only where each item's result depends on that item alone, so the output
 * does not depend on the number of threads or on which thread did what (tests compare
 * CASTSCOPE_THREADS=1 with the default).  Workers allocate in arenas of their own
 * (cs_arena_absorb() hands them to the trace afterwards).
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/**
 * CsParallelFunc:
 * @begin: first item of the chunk
 * @end: one past the last item (begin < end)
 * @worker: the calling worker's index, 0 .. n_workers - 1 (0 is the calling thread): state
 *   kept per worker (an arena, scratch maps) is indexed by it
 * @data: the caller's data
 */
typedef void (*CsParallelFunc) (guint begin, guint end, guint worker, gpointer data);

/**
 * _cs_parallel_workers:
 * @n_items: how many independent items the pass has
 *
 * How many workers a pass should use for @n_items: 1 (run inline) below 64 items, else the
 * number of processors (at most 16, at most one per 32 items).  The environment variable
 * CASTSCOPE_THREADS, a positive number, overrides the processor count (1 = everything on the
 * calling thread).
 * Returns: >= 1
 */
guint       _cs_parallel_workers     (guint n_items);

/**
 * _cs_parallel_for:
 * @n: number of items
 * @n_workers: from _cs_parallel_workers() (1 runs @fn once on the calling thread)
 * @grain: items per chunk (>= 1); chunks are handed out in order, first come first served
 * @fn: called for every chunk, from the calling thread and the pool's threads
 * @data: passed to @fn
 *
 * Runs @fn over [0, @n) in chunks of @grain and returns when every chunk is done.  @fn must
 * not touch state another chunk writes; GLib and castscope's per-thread scratch (proxy maps,
 * mark arrays) are safe.
 */
void        _cs_parallel_for         (guint          n,
                                      guint          n_workers,
                                      guint          grain,
                                      CsParallelFunc fn,
                                      gpointer       data);

/**
 * _cs_parallel_set_max_threads:
 * @n: the most workers a pass may use from now on (1 = none besides the calling thread); 0
 *   goes back to CASTSCOPE_THREADS or the processor count
 *
 * For tests that compare the output of one and several threads.  Not to be called while a
 * pass runs.
 */
void        _cs_parallel_set_max_threads (guint n);

/**
 * _cs_parallel_set_eager:
 * @on: TRUE: _cs_parallel_workers() shares out any job of two or more items (as many workers
 *   as items, up to the thread limit); FALSE: back to the thresholds above
 *
 * For tests that run small traces (the shared ones) through the parallel paths.  Not to be
 * called while a pass runs.
 */
void        _cs_parallel_set_eager   (gboolean on);
/** _cs_parallel_jobs_run: how many _cs_parallel_for() calls ran on more than one worker since
 *  the process started (for tests: proof that the parallel path was taken). */
guint       _cs_parallel_jobs_run    (void);

/**
 * cs_runtime_init:
 *
 * Process-wide settings the passes want; a program calls it once at startup, before it starts
 * threads.  The passes allocate and free hundreds of MiB per pipeline run (arena blocks,
 * id-indexed scratch arrays, each worker's arena).  With glibc's defaults, freed memory goes
 * back to the kernel (trimmed heaps, unmapped large blocks) and the next pass faults fresh,
 * zeroed pages in.  This keeps it in the process for reuse (glibc: mmap threshold 32 MiB,
 * trim threshold 1 GiB): on the generated 10,000-statement trace, about 6 % of the
 * pipeline's time on the GPU machine's 16-core host (tests/BENCH-RESULTS.md).  The price is a
 * resident size that stays at its peak.  Does nothing with other C libraries.
 */
void        cs_runtime_init          (void);
G_END_DECLS
