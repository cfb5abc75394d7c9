/* cs-parallel.c: the passes' parallel for (see cs-parallel.h), on a GThreadPool. */
#include "cs-config.h"

#include "cs-parallel.h"

#include <stdlib.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#define CS_PARALLEL_MAX 16

/* The hand-off of a task to a pool thread goes through GLib's GAsyncQueue, whose locks
 * ThreadSanitizer does not see when GLib is not instrumented (the system's is not): without
 * these annotations it reports every worker read of what the calling thread set up.  The way
 * back is the atomic pending counter, which it sees. */
#if defined(__SANITIZE_THREAD__)
#define CS_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define CS_TSAN 1
#endif
#endif
#ifdef CS_TSAN
void __tsan_acquire (void *addr);
void __tsan_release (void *addr);
#define TSAN_ACQUIRE(addr) __tsan_acquire (addr)
#define TSAN_RELEASE(addr) __tsan_release (addr)
#else
#define TSAN_ACQUIRE(addr) ((void) 0)
#define TSAN_RELEASE(addr) ((void) 0)
#endif

typedef struct
{
  guint          n;          /* items */
  guint          grain;      /* items per chunk */
  CsParallelFunc fn;
  gpointer       data;
  gint           next;       /* atomic: next chunk to hand out */
  gint           pending;    /* atomic: pool tasks not finished yet */
  GMutex         lock;       /* with done: the calling thread waits for pending == 0 */
  GCond          done;
} Job;

typedef struct
{
  Job   *job;
  guint  worker;             /* 1 .. n_workers - 1 */
} Task;

static void
run_chunks (Job *job, guint worker)
{
  for (;;)
    {
      guint c = (guint) g_atomic_int_add (&job->next, 1);
      guint64 begin = (guint64) c * job->grain;
      if (begin >= job->n)
        break;
      job->fn ((guint) begin, (guint) MIN ((guint64) job->n, begin + job->grain), worker, job->data);
    }
}

static void
pool_task (gpointer task_data, gpointer user_data)
{
  Task *task = task_data;
  Job *job;

  TSAN_ACQUIRE (task);
  job = task->job;
  run_chunks (job, task->worker);
  g_free (task);
  g_mutex_lock (&job->lock);
  if (g_atomic_int_dec_and_test (&job->pending))
    g_cond_signal (&job->done);
  g_mutex_unlock (&job->lock);
}

static guint override_threads;   /* 0 = none (_cs_parallel_set_max_threads) */
static gint jobs_run;            /* atomic */

/* CASTSCOPE_THREADS or the processor count, at most CS_PARALLEL_MAX */
static guint
default_threads (void)
{
  static gsize once = 0;
  static guint value;

  if (g_once_init_enter (&once))
    {
      const char *env = g_getenv ("CASTSCOPE_THREADS");
      char *end = NULL;
      gint64 n = env != NULL && *env != '\0' ? g_ascii_strtoll (env, &end, 10) : 0;
      /* unset, empty, not a whole positive number ("4x"): one worker per processor */
      if (n <= 0 || end == NULL || *end != '\0')
        n = g_get_num_processors ();
      value = (guint) CLAMP (n, 1, CS_PARALLEL_MAX);
      g_once_init_leave (&once, 1);
    }
  return value;
}

/* _cs_parallel_set_eager(): share out any job of two or more items (tests) */
static gint eager;

static guint
max_threads (void)
{
  return override_threads != 0 ? override_threads : default_threads ();
}

static GThreadPool *
shared_pool (void)
{
  static gsize once = 0;
  static GThreadPool *pool;

  if (g_once_init_enter (&once))
    {
      /* exclusive: its threads start now and stay, so what they keep per thread (the
       * passes' id-indexed scratch arrays, megabytes each) is made once per process, not
       * once per pass (a shared pool stops idle threads); never freed (process-wide) */
      pool = g_thread_pool_new (pool_task, NULL, (gint) MAX (1u, default_threads () - 1), TRUE, NULL);
      g_once_init_leave (&once, 1);
    }
  return pool;
}

/** _cs_parallel_set_max_threads: see cs-parallel.h.  The pool's size is fixed when it is
 *  first used (from CASTSCOPE_THREADS or the processor count): a larger @n still gets @n
 *  workers' worth of chunks, run by fewer threads. */
void
_cs_parallel_set_max_threads (guint n)
{
  override_threads = MIN (n, CS_PARALLEL_MAX);
}

/** cs_runtime_init: see cs-parallel.h. */
void
cs_runtime_init (void)
{
#ifdef __GLIBC__
  mallopt (M_MMAP_THRESHOLD, 32 * 1024 * 1024);
  mallopt (M_TRIM_THRESHOLD, 1024 * 1024 * 1024);
#endif
}

/** _cs_parallel_set_eager: see cs-parallel.h. */
void
_cs_parallel_set_eager (gboolean on)
{
  g_atomic_int_set (&eager, on ? 1 : 0);
}

/** _cs_parallel_jobs_run: see cs-parallel.h. */
guint
_cs_parallel_jobs_run (void)
{
  return (guint) g_atomic_int_get (&jobs_run);
}

/** _cs_parallel_workers: see cs-parallel.h. */
guint
_cs_parallel_workers (guint n_items)
{
  if (g_atomic_int_get (&eager))
    return n_items < 2 ? 1 : MIN (max_threads (), n_items);
  if (n_items < 64)
    return 1;
  return MAX (1u, MIN (max_threads (), n_items / 32));
}

/** _cs_parallel_for: see cs-parallel.h. */
void
_cs_parallel_for (guint n, guint n_workers, guint grain, CsParallelFunc fn, gpointer data)
{
  Job job = { 0 };
  GThreadPool *pool;

  g_return_if_fail (fn != NULL && grain > 0);
  if (n == 0)
    return;
  if (n_workers <= 1)
    {
      fn (0, n, 0, data);
      return;
    }
  g_atomic_int_inc (&jobs_run);
  job.n = n;
  job.grain = grain;
  job.fn = fn;
  job.data = data;
  job.pending = (gint) n_workers - 1;
  g_mutex_init (&job.lock);
  g_cond_init (&job.done);
  pool = shared_pool ();
  for (guint w = 1; w < n_workers; w++)
    {
      Task *task = g_new (Task, 1);
      task->job = &job;
      task->worker = w;
      TSAN_RELEASE (task);
      g_thread_pool_push (pool, task, NULL);
    }
  run_chunks (&job, 0);
  g_mutex_lock (&job.lock);
  while (g_atomic_int_get (&job.pending) > 0)
    g_cond_wait (&job.done, &job.lock);
  g_mutex_unlock (&job.lock);
  g_mutex_clear (&job.lock);
  g_cond_clear (&job.done);
}
