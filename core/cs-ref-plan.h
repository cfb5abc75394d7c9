/* cs-ref-plan.h: what a CPU reference run will cost, worked out from the traces before
 * anything is allocated, and the limits callers check it against.
 *
 * The memory estimate replays a run's liveness without computing: it walks the statements as
 * the executor (cs-ref.c) does and keeps, per bound name, the bytes of its value: 8 bytes an
 * element for every tensor value (the executor holds values as f64), shared by the names an
 * identity prim (shallow_copy, clone, device_put, stride_order) binds; a value is released
 * when its last name goes (`del`, a rebinding, or the end of a decomposition whose locals it
 * was, as cs-ref.c drops them); each kernel adds its scratch while it runs (matmul/linear in
 * exact mode copy their operands and result to f32; argmax/argmin, attention and
 * embedding_backward keep a buffer); the return converts every returned value to a #CsTensor.
 * The peak over that walk is what CsRefRunOptions.peak_bytes measures during the real run.
 * Shapes come from the proxies' types: an untyped value counts 0 bytes, a symbolic extent 1.
 */
#pragma once

#include <glib.h>

#include "cs-ir.h"
#include "cs-ref.h"

G_BEGIN_DECLS

/* Memory of one cs_ref_run_env() of a trace in one mode (cs_ref_estimate_run()). */
typedef struct
{
  double peak_bytes;     /* peak while it runs (as CsRefRunOptions.peak_bytes counts), bytes */
  double output_bytes;   /* the returned #CsTensors, one per occurrence in the return value
                            (what the caller holds after the run), bytes */
  double input_bytes;    /* the leaf inputs as #CsTensors in their trace dtypes (what the
                            caller makes before the run; not part of @peak_bytes), bytes */
} CsRefRunMemory;

/**
 * cs_ref_estimate_run:
 * @trace: a trace
 * @mode: the mode it will run in (f64 mode returns float tensors as f64)
 * @out: (out caller-allocates): the estimate
 *
 * Estimates the host memory of one cs_ref_run_env() of @trace (see the file comment).  Cheap:
 * one walk over the statements, nothing allocated per element.
 */
void        cs_ref_estimate_run        (const CsTrace  *trace,
                                        CsRefMode       mode,
                                        CsRefRunMemory *out);

/* Which runs a step makes (cs_ref_estimate_step()); flags. */
typedef enum
{
  CS_REF_STEP_EXACT    = 1 << 0,  /* forward then backward in CS_REF_EXACT */
  CS_REF_STEP_F64      = 1 << 1,  /* forward then backward in CS_REF_F64, after the exact run
                                     of the same trace when both are set */
  CS_REF_STEP_READBACK = 1 << 2,  /* then the outputs come back from a device one at a time
                                     into #CsTensors of their trace dtypes (the CUDA run) */
} CsRefStepFlags;

/* Cost of one training step (cs_ref_estimate_step()). */
typedef struct
{
  double flops;             /* work on the CPU reference: cs_ref_estimate() of the forward
                               plus the backward, counted once however many modes run (the
                               measure castscope-cli run --max-gflop has always limited),
                               FLOP; 0 when no trace runs on the CPU reference */
  double peak_bytes;        /* host memory at the step's peak, bytes */
} CsRefStepCost;

/**
 * cs_ref_estimate_step:
 * @forward: (nullable): the forward trace
 * @backward: (nullable): the backward trace; its leaf inputs that @forward returns by name
 *   (saved_for_backward) come from the forward's runs, the others (cotangents) are made
 * @flags: the runs, as castscope-cli run and the app's Run make them: with EXACT and F64 the
 *   forward runs in both modes, then the backward in both, each mode's backward taking that
 *   mode's forward outputs; every input and every run's returned tensors are held to the end
 * @out: (out caller-allocates): the cost
 *
 * The peak is the largest of: the held tensors plus each run's cs_ref_estimate_run() peak,
 * in order; with READBACK, the held tensors plus the largest returned tensor.
 */
void        cs_ref_estimate_step       (const CsTrace  *forward,
                                        const CsTrace  *backward,
                                        CsRefStepFlags  flags,
                                        CsRefStepCost  *out);

/**
 * cs_ref_check_step:
 * @cost: a step's cost
 * @max_bytes: host memory limit, bytes (G_MAXUINT64: none)
 * @max_flops: work limit, FLOP (a negative number or +inf: none)
 * @error: return location for CS_REF_ERROR_VALUE
 *
 * Refuses a step over a limit, memory first, with a message naming the estimate and the
 * limit in human units (cs_format_size(), cs_format_flops()): "this step needs about 24.7 GiB
 * of host memory on the CPU reference (estimate), over the limit of 17.0 GiB" or "... about
 * 7.10 TFLOP on the CPU reference, over the limit of 200 GFLOP".  Callers append how to
 * change the limit.
 * Returns: TRUE when the step is within both limits
 */
gboolean    cs_ref_check_step          (const CsRefStepCost *cost,
                                        guint64              max_bytes,
                                        double               max_flops,
                                        GError             **error);

/* The machine's memory as this process sees it (cs_ref_machine_memory()). */
typedef struct
{
  guint64 total_bytes;      /* the most this process can ever have: MemTotal of /proc/meminfo,
                               lowered to the cgroup's limit when that is smaller, bytes (> 0) */
  guint64 available_bytes;  /* what it may still use now: MemAvailable, lowered to the cgroup's
                               limit minus its usage when that is smaller, bytes
                               (<= total_bytes) */
} CsRefMachineMemory;

/**
 * cs_ref_machine_memory_from:
 * @meminfo: (nullable): the text of /proc/meminfo ("MemTotal:  24117248 kB\nMemAvailable:
 *   ..."), or NULL when it cannot be read
 * @phys_bytes: the physical RAM sysconf reports (pages times page size), 0 when unknown
 * @cgroup_max: the cgroup's memory limit, bytes (v2 memory.max, v1 limit_in_bytes), or
 *   G_MAXUINT64 when there is none
 * @cgroup_current: the cgroup's usage, bytes (ignored without a limit)
 * @out: (out caller-allocates): the machine's memory
 *
 * Works out #CsRefMachineMemory from what the system reports, without reading anything
 * (cs_ref_machine_memory() reads it): total is MemTotal (else @phys_bytes, else 8 GiB);
 * available is MemAvailable (else half of total); both are lowered to what the cgroup allows
 * (its limit; its limit minus usage), and available never exceeds total.
 */
void        cs_ref_machine_memory_from (const char         *meminfo,
                                        guint64             phys_bytes,
                                        guint64             cgroup_max,
                                        guint64             cgroup_current,
                                        CsRefMachineMemory *out);

/**
 * cs_ref_machine_memory:
 * @out: (out caller-allocates): the machine's memory
 *
 * Reads /proc/meminfo, sysconf and the process's cgroup (v2 memory.max and memory.current, or
 * v1 memory.limit_in_bytes and memory.usage_in_bytes) into cs_ref_machine_memory_from().
 */
void        cs_ref_machine_memory      (CsRefMachineMemory *out);

/**
 * cs_ref_available_memory:
 *
 * The memory this process may still use: cs_ref_machine_memory()'s available_bytes.
 * Returns: the bytes
 */
guint64     cs_ref_available_memory    (void);

/* Default work limit of a step on the CPU reference, FLOP (castscope-cli run --max-gflop 200,
 * about a minute on one core; the app's Run). */
#define CS_REF_DEFAULT_MAX_FLOPS 200e9

/* Share of the available memory that is the default memory limit of a run. */
#define CS_REF_DEFAULT_MEMORY_FRACTION 0.75

/* cs_ref_memory_limit()'s @requested when no limit was asked for: the default. */
#define CS_REF_MEMORY_DEFAULT G_MAXUINT64

/**
 * cs_ref_memory_limit:
 * @machine: the machine's memory
 * @requested: the limit asked for (castscope-cli run --max-memory), bytes, or
 *   CS_REF_MEMORY_DEFAULT
 *
 * The memory limit of a run: CS_REF_DEFAULT_MEMORY_FRACTION of the available memory by
 * default; a requested limit as asked, but never above the machine's total memory (a limit
 * past it would let the kernel's OOM killer end the run instead of a refusal).
 * Returns: bytes
 */
guint64     cs_ref_memory_limit        (const CsRefMachineMemory *machine,
                                        guint64                   requested);

/**
 * cs_ref_default_memory_limit:
 *
 * cs_ref_memory_limit() of this machine with CS_REF_MEMORY_DEFAULT: the limit castscope-cli
 * run and the app's Run use unless told otherwise.
 * Returns: bytes
 */
guint64     cs_ref_default_memory_limit (void);

/* What cs_ref_check_step_memory() decided. */
typedef enum
{
  CS_REF_MEMORY_FITS,          /* the estimate is within the limit */
  CS_REF_MEMORY_OVER_LIMIT,    /* over the limit but within the machine's total memory: a
                                  higher limit (up to the total) would let it run */
  CS_REF_MEMORY_OVER_MACHINE,  /* over the machine's total memory: no limit makes it fit */
} CsRefMemoryVerdict;

/**
 * cs_ref_check_step_memory:
 * @cost: a step's cost
 * @machine: the machine's memory
 * @requested: the limit asked for, bytes, or CS_REF_MEMORY_DEFAULT (see cs_ref_memory_limit())
 * @error: return location for CS_REF_ERROR_VALUE, set unless the step fits
 *
 * Checks a step's estimated peak host memory against cs_ref_memory_limit().  Over the
 * machine's total memory the message names the estimate and the machine: "this step needs
 * about 37.6 GiB of host memory on the CPU reference (estimate), this machine has 23.5 GiB";
 * over the limit only, the estimate and the limit as cs_ref_check_step() does.  Callers
 * append what to do: a higher limit helps only with CS_REF_MEMORY_OVER_LIMIT.
 * Returns: the verdict
 */
CsRefMemoryVerdict cs_ref_check_step_memory (const CsRefStepCost      *cost,
                                             const CsRefMachineMemory *machine,
                                             guint64                   requested,
                                             GError                  **error);

/**
 * cs_parse_size:
 * @text: a size: a number (digits, optionally a fraction) then an optional unit: none or B
 *   for bytes, K, M, G, T (optionally followed by "iB" or "B"; case-insensitive) for 2^10,
 *   2^20, 2^30, 2^40 bytes: "512M", "8G", "1.5GiB", "1048576"
 * @out: (out): the size in bytes (rounded down)
 * @error: return location for a G_OPTION_ERROR_BAD_VALUE message
 *
 * Returns: TRUE on success; FALSE for an empty or malformed size, a negative one, a fraction
 *   of a byte ("1.5" without a unit) or one over 2^63 bytes
 */
gboolean    cs_parse_size              (const char *text,
                                        guint64    *out,
                                        GError    **error);

/**
 * cs_format_size:
 * @bytes: a size in bytes
 *
 * The size in binary units with three significant digits ("512 MiB", "1.50 GiB", "977 KiB",
 * "12 bytes", "1 byte").
 * Returns: (transfer full): the text
 */
char       *cs_format_size             (double bytes);

/**
 * cs_format_flops:
 * @flops: an amount of work, FLOP
 *
 * The work in the decimal unit that fits with three significant digits ("4608 FLOP",
 * "1.07 GFLOP", "4.40 TFLOP", "812 PFLOP"), FLOP counts below 10^4 in full; past 10^21
 * ("EFLOP" and up) in powers of ten ("2.00e+27 FLOP").
 * Returns: (transfer full): the text
 */
char       *cs_format_flops            (double flops);

G_END_DECLS
