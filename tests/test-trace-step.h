/* test-trace-step.h: a training step from a trace's text, and a scratch directory's removal,
 * shared by test-kernels-plan.c, bench-compile.c and launch-plan.c (each builds the CUDA
 * program of one step, the last two as tools that print errors instead of asserting). */
#pragma once

#include <string.h>

#include <glib/gstdio.h>

#include "cs-parse.h"
#include "cs-pipeline.h"

/* The pipeline of the first trace of @text (@len bytes; -1: NUL-terminated) under @policy,
 * its gradients by Thunder's rule (cs_pipeline_run()'s NULL spec); @name names the text in
 * parse errors.  Returns: (transfer full): the pipeline, or
 * NULL with @error set (a parse error, a text without a trace, or the failing pass's error). */
static inline CsPipeline *
trace_step_pipeline (const char *text, gssize len, const char *name, const CsPolicy *policy, GError **error)
{
  g_autoptr(CsTraceList) list = cs_parse_text (text, len < 0 ? strlen (text) : (gsize) len, name, error);

  if (list == NULL)
    return NULL;
  if (list->traces->len == 0)
    {
      g_set_error (error, G_FILE_ERROR, G_FILE_ERROR_INVAL, "%s: no trace", name);
      return NULL;
    }
  return cs_pipeline_run (g_ptr_array_index (list->traces, 0), policy, NULL, error);
}

/* Removes the files directly in @dir (a scratch directory from g_dir_make_tmp(): no
 * subdirectories), then @dir; a missing @dir is not an error. */
static inline void
trace_step_rm_dir (const char *dir)
{
  g_autoptr(GDir) d = g_dir_open (dir, 0, NULL);
  const char *n;

  while (d && (n = g_dir_read_name (d)))
    {
      g_autofree char *f = g_build_filename (dir, n, NULL);

      g_unlink (f);
    }
  g_rmdir (dir);
}
