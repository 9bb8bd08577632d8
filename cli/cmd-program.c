/* cmd-program.c - `mpplan program -p plan.yaml [--rank R] [--json]`: print what one rank
 * of a plan does in a training step, instruction by instruction, in the plan's pipeline
 * schedule (the program the simulator times and the executor runs). */
#include "config.h"
#include "cli/cli.h"
#include "common/error.h"
#include "common/output.h"
#include "planner/planner.h"

#include <stdio.h>

/* Loads PLAN_PATH and prints RANK's program; returns the exit status. */
static int
print_program (const char *plan_path, gint64 rank, gboolean as_json)
{
  GError *error = NULL;
  g_autoptr(MpPlanResolved) res = mp_cli_plan_load (plan_path, &error);
  if (res == NULL)
    return mp_cli_fail (error);
  guint world = res->plan->world_size;
  if (rank < 0 || rank >= world)
    {
      fprintf (stderr, "mpplan: rank %" G_GINT64_FORMAT " is out of range: %s has %u rank%s "
               "(0 to %u)\n", rank, plan_path, world, world == 1 ? "" : "s", world - 1);
      return 2;
    }
  g_autoptr(MpProgram) program = mp_program_build (res->ctx, res->plan, (guint) rank);
  if (as_json)
    {
      g_autoptr(JsonNode) root = mp_program_to_json (program, res->model);
      return mp_json_write ("-", root, &error) ? 0 : mp_cli_fail (error);
    }
  g_autofree char *text = mp_program_text (program, res->model);
  fputs (text, stdout);
  return 0;
}

int
mp_cmd_program (int argc, char **argv, gboolean do_help)
{
  g_autofree char *plan_path = NULL;
  gint64 rank = 0;
  gboolean as_json = FALSE;
  const GOptionEntry entries[] = {
    { "plan", 'p', 0, G_OPTION_ARG_FILENAME, &plan_path, "Plan file (mpplan plan -o)", "FILE" },
    { "rank", 'r', 0, G_OPTION_ARG_INT64, &rank, "World rank to show (default 0)", "R" },
    { "json", 0, 0, G_OPTION_ARG_NONE, &as_json, "Print one JSON object (docs/json.md)", NULL },
    G_OPTION_ENTRY_NULL
  };
  g_autoptr(GOptionContext) ctx = g_option_context_new (NULL);
  g_option_context_set_help_enabled (ctx, FALSE);
  g_option_context_set_summary (
      ctx, "Print one rank's program for a training step under a plan: forward and backward "
           "of each layer and micro-batch in the pipeline schedule's order, sends and "
           "receives with their peers and tags, gradient buckets, ZeRO gathers, the "
           "optimizer step.");
  g_option_context_set_description (ctx, MP_CLI_EXIT_CODES);
  g_option_context_add_main_entries (ctx, entries, NULL);
  int status = mp_cli_parse (ctx, &argc, &argv, do_help);
  if (status >= 0)
    return status;
  if (plan_path == NULL)
    return mp_cli_usage (ctx, "no plan file given (-p plan.yaml)");
  return print_program (plan_path, rank, as_json);
}
