/* cs-cli-policy.c: `--policy key=value` and `--grad` helpers (see cs-cli-policy.h). */
#include "cs-config.h"

#include "cs-cli-policy.h"
#include "cs-cli.h"

#include <string.h>

gboolean
cs_cli_policy_from_strv (char **assignments, CsPolicy *policy, GError **error)
{
  cs_policy_init_default (policy);
  for (guint i = 0; assignments && assignments[i]; i++)
    {
      g_auto(GStrv) parts = NULL;
      g_autofree char *all = g_strstrip (g_strdup (assignments[i]));

      if (all[0] == '\0' || strspn (all, ", \t") == strlen (all))
        {
          g_set_error (error, CS_POLICY_ERROR, CS_POLICY_ERROR_KEY,
                       "--policy '%s' sets nothing: expected KEY=VALUE (e.g. matmul=upcast-f32; "
                       "see --help for the keys)", assignments[i]);
          return FALSE;
        }
      /* "a=x,b=y" sets two keys; a part without '=' continues the value before it, so a
         list value reads as written: "executors=nvfuser,torch,fusion=dataflow" */
      parts = g_strsplit (assignments[i], ",", -1);
      for (guint j = 0; parts[j]; j++)
        {
          g_autoptr(GString) one = NULL;

          g_strstrip (parts[j]);
          if (*parts[j] == '\0')
            continue;
          one = g_string_new (parts[j]);
          while (parts[j + 1] != NULL && strchr (parts[j + 1], '=') == NULL
                 && strchr (one->str, '=') != NULL)
            {
              g_strstrip (parts[++j]);
              if (*parts[j] != '\0')
                g_string_append_printf (one, ",%s", parts[j]);
            }
          if (!cs_policy_parse_assignment (policy, one->str, error))
            return FALSE;
        }
    }
  return TRUE;
}

char *
cs_cli_policy_describe (void)
{
  GString *s = g_string_new ("Cast policy (--policy KEY=VALUE, repeatable; first value is the "
                             "default, Thunder's):\n");
  CsPolicy def;

  cs_policy_init_default (&def);
  for (guint i = 0; cs_policy_keys[i]; i++)
    {
      const char * const *vals = cs_policy_values (cs_policy_keys[i]);
      g_autofree char *joined = g_strjoinv ("|", (char **) vals);
      g_string_append_printf (s, "  %-16s %s (default %s)\n", cs_policy_keys[i], joined,
                              cs_policy_get (&def, cs_policy_keys[i]));
    }
  return g_string_free (s, FALSE);
}

gboolean
cs_cli_grad_spec_parse (const char *text, CsGradSpec *spec, char ***names_out)
{
  memset (spec, 0, sizeof *spec);
  *names_out = NULL;
  if (text == NULL)
    return FALSE;
  if (strcmp (text, "none") == 0)
    {
      spec->none = TRUE;
      return TRUE;
    }
  if (strcmp (text, "all") == 0)
    {
      spec->all_float = TRUE;
      return TRUE;
    }
  if (strcmp (text, "auto") == 0)
    {
      spec->all_float = TRUE;
      spec->module_rule = TRUE;
      return TRUE;
    }
  /* an empty text names one empty input (refused as "," is), not an empty list ("none") */
  *names_out = text[0] == '\0' ? g_strdupv ((char *[]) { (char *) "", NULL })
                               : g_strsplit (text, ",", -1);
  for (guint i = 0; (*names_out)[i]; i++)
    g_strstrip ((*names_out)[i]);
  spec->names = (const char * const *) *names_out;
  return TRUE;
}

#include "cs-aten.h"
#include "cs-grad.h"
#include "cs-inductor.h"
#include "cs-parse.h"

static char *inductor_arg;   /* --inductor, or NULL */
static char *inductor_path;  /* the output-code file the last pipeline read, or NULL */

const char *
cs_cli_inductor_path (void)
{
  return inductor_path;
}

void
cs_cli_set_inductor (const char *arg)
{
  g_free (inductor_arg);
  inductor_arg = g_strdup (arg);
}

/* The pair pipeline with the regions of the --inductor file. */
static CsPipeline *
run_inductor (const CsTraceList *list, const char *path, guint index, const CsPolicy *policy,
              GError **error)
{
  g_autofree char *code_path = NULL;
  g_autoptr(CsInductorCode) code = NULL;

  if (cs_trace_aten_role (list->traces->pdata[index]) != CS_ATEN_GRAPH_FORWARD)
    {
      g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                   "--inductor: trace %u of %s is not a torch.compile forward graph; Inductor's "
                   "regions apply to the AOT graphs of TORCH_LOGS=aot_graphs", index, path);
      return NULL;
    }
  if (strcmp (inductor_arg, "auto") == 0)
    {
      code_path = cs_inductor_sibling_path (path);
      if (code_path == NULL || !g_file_test (code_path, G_FILE_TEST_EXISTS))
        {
          g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                       "--inductor auto: no output code beside %s (looked for %s)", path,
                       code_path ? code_path : "DIR/inductor/NAME.output_code for DIR/NAME.txt");
          return NULL;
        }
    }
  else
    code_path = g_strdup (inductor_arg);
  g_free (inductor_path);
  inductor_path = g_strdup (code_path);
  code = cs_inductor_parse_file (code_path, error);
  if (code == NULL)
    return NULL;
  return cs_pipeline_run_pair_inductor (list->traces->pdata[index],
                                        cs_aten_find_backward (list, index), policy, code, error);
}

CsPipeline *
cs_cli_run_pipeline_on_list (const CsTraceList *list, const char *path, guint index,
                             const CsPolicy *policy, const char *grad_text, GError **error)
{
  g_auto(GStrv) names = NULL;
  CsGradSpec spec;
  gboolean have_spec;

  if (index >= list->traces->len)
    {
      g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                   "%s holds %u trace(s); --index %u is out of range", path,
                   list->traces->len, index);
      return NULL;
    }
  have_spec = cs_cli_grad_spec_parse (grad_text, &spec, &names);
  /* a torch.compile forward graph runs with its backward graph (already differentiated):
   * which inputs require grad is AOT autograd's, so inputs named by --grad are refused (the
   * keywords all, auto and none are taken as they are) */
  if (names != NULL && cs_trace_aten_role (list->traces->pdata[index]) >= 0)
    {
      g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                   "--grad %s: trace %u of %s is a torch.compile graph, whose inputs that "
                   "require grad AOT autograd chose (its backward graph's outputs)",
                   grad_text, index, path);
      return NULL;
    }
  if (inductor_arg != NULL)
    return run_inductor (list, path, index, policy, error);
  if (cs_trace_aten_role (list->traces->pdata[index]) == CS_ATEN_GRAPH_FORWARD)
    return cs_pipeline_run_pair (list->traces->pdata[index], cs_aten_find_backward (list, index),
                                 policy, error);
  {
    CsPipeline *pl = cs_pipeline_run (list->traces->pdata[index], policy,
                                      have_spec ? &spec : NULL, error);
    /* a final trace is not differentiated again: inputs named by --grad would change
     * nothing (refused, as a name the trace lacks is) */
    if (pl != NULL && names != NULL && cs_pipeline_input_was_final (pl))
      {
        cs_pipeline_unref (pl);
        g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                     "--grad %s: trace %u of %s is already final (what Thunder runs): which "
                     "inputs require grad was decided when it was made, and its backward is a "
                     "trace of its own", grad_text, index, path);
        return NULL;
      }
    return pl;
  }
}

CsPipeline *
cs_cli_run_pipeline (const char *path, guint index, const CsPolicy *policy,
                     const char *grad_text, GError **error)
{
  g_autoptr(CsTraceList) list = NULL;

  list = cs_parse_file (path, error);
  if (list == NULL)
    return NULL;
  return cs_cli_run_pipeline_on_list (list, path, index, policy, grad_text, error);
}

char *
cs_cli_no_backward_reason (CsPipeline *pl, const char *path)
{
  if (cs_pipeline_input_was_final (pl))
    {
      g_autofree char *sib = NULL;

      if (g_str_has_suffix (path, "_fwd.txt"))
        {
          g_autofree char *stem = g_strndup (path, strlen (path) - strlen ("_fwd.txt"));
          sib = g_strconcat (stem, "_bwd.txt", NULL);
          if (!g_file_test (sib, G_FILE_TEST_EXISTS))
            g_clear_pointer (&sib, g_free);
        }
      return g_strdup_printf ("%s is already a final trace (what Thunder runs), which castscope "
                              "does not differentiate again: its backward is a trace of its own%s%s%s",
                              path, sib ? " (" : " (a backward_fn later in the file, --index N, "
                              "or its *_bwd.txt file)", sib ? sib : "", sib ? ")" : "");
    }
  return g_strdup ("nothing requires grad (no floating-point input, or --grad none)");
}

int
cs_cli_exit_for_error (const GError *error)
{
  if (error == NULL)
    return CS_CLI_EXIT_INPUT;
  /* an option value that does not fit the input: --index past the traces, --grad naming an
   * input the trace lacks or one that cannot require grad */
  if (error->domain == G_OPTION_ERROR
      || g_error_matches (error, CS_GRAD_ERROR, CS_GRAD_ERROR_SPEC))
    return CS_CLI_EXIT_USAGE;
  return CS_CLI_EXIT_INPUT;
}

