/* main.c - the `mpplan` command: dispatches `mpplan COMMAND [OPTIONS]` to cli/cmd-*.c.
 *
 * The gio pattern: a table of commands, `mpplan help [COMMAND]`, `mpplan --version`.
 * Only this folder turns errors into exit codes and text. */
#include "config.h"
#include "cli/cli.h"        /* defines: MpCommandFunc, mp_cmd_*, mp_cli_* */
#include "common/error.h"   /* defines: mp_error_exit_code */
#include "common/log.h"     /* defines: mp_log_init */

#include <errno.h>
#include <locale.h>
#include <stdio.h>
#include <string.h>

typedef struct {
  const char *name;
  MpCommandFunc func;
  const char *summary;
} Command;

/* Later issues add exec, calibrate, report, verify, import. */
static const Command commands[] = {
  { "plan", mp_cmd_plan, "Recommend how to split training over the cluster (main job)" },
  { "simulate", mp_cmd_simulate, "Time a plan's step instruction by instruction; write a trace" },
  { "describe", mp_cmd_describe, "Show what mpplan knows of a model or a cluster" },
  { "validate", mp_cmd_validate, "Check model, cluster, plan and profile files, reporting every problem" },
  { "calibrate", mp_cmd_calibrate, "Measure this machine (GEMM, memory, collectives) into a profile" },
  { "program", mp_cmd_program, "Show what one rank of a plan does in a step, instruction by instruction" },
  { "exec", mp_cmd_exec, "Run a plan for real under mpirun and measure it (host backend)" },
  { "report", mp_cmd_report, "Compare a prediction with a measurement, phase by phase (text, JSON, HTML)" },
  { "verify", mp_cmd_verify, "Plan, run the best plans under mpirun, and score the predictions" },
  { "compare", mp_cmd_compare, "The best plan of each framework (DDP, FSDP, Horovod, ...)" },
  { "import", mp_cmd_import, "Turn a Hugging Face config.json into a model YAML" },
  { NULL, NULL, NULL }
};

static const Command *
find_command (const char *name)
{
  for (const Command *c = commands; c->name; c++)
    if (strcmp (c->name, name) == 0)
      return c;
  return NULL;
}

static void
print_usage (FILE *out)
{
  fprintf (out, "Usage:\n  mpplan COMMAND [OPTIONS...]\n\nCommands:\n");
  for (const Command *c = commands; c->name; c++)
    fprintf (out, "  %-10s %s\n", c->name, c->summary);
  fprintf (out, "  %-10s %s\n", "help", "Show help for a command");
  fprintf (out, "  %-10s %s\n", "version", "Print the version");
  fprintf (out, "\nUse \"mpplan help COMMAND\" or \"mpplan COMMAND --help\" for the options of a "
                "command.\n%s\n", MP_CLI_EXIT_CODES);
}

int
mp_cli_parse (GOptionContext *ctx, int *argc, char ***argv, gboolean do_help)
{
  if (do_help)
    {
      g_autofree char *help = g_option_context_get_help (ctx, TRUE, NULL);
      fputs (help, stdout);
      return 0;
    }
  for (int i = 1; i < *argc; i++)
    if (strcmp ((*argv)[i], "--help") == 0 || strcmp ((*argv)[i], "-h") == 0)
      {
        g_autofree char *help = g_option_context_get_help (ctx, TRUE, NULL);
        fputs (help, stdout);
        return 0;
      }
  g_autoptr(GError) error = NULL;
  if (!g_option_context_parse (ctx, argc, argv, &error))
    return mp_cli_usage (ctx, error->message);
  /* Commands that take operands collect them with G_OPTION_REMAINING; anything GOption
   * left behind is an argument the command does not take. */
  if (*argc > 1)
    {
      g_autofree char *msg = g_strdup_printf ("unexpected argument '%s'", (*argv)[1]);
      return mp_cli_usage (ctx, msg);
    }
  return -1;
}

int
mp_cli_usage (GOptionContext *ctx, const char *message)
{
  g_autofree char *help = g_option_context_get_help (ctx, TRUE, NULL);
  fprintf (stderr, "mpplan: %s\n\n%s", message, help);
  return 2;
}

int
mp_cli_fail (GError *error)
{
  int status = mp_error_exit_code (error);
  g_auto (GStrv) lines = g_strsplit (error->message, "\n", -1);
  for (int i = 0; lines[i]; i++)
    fprintf (stderr, "%s\n", lines[i]);
  g_error_free (error);
  return status;
}

MpPlanResolved *
mp_cli_plan_load (const char *path, GError **error)
{
  g_autoptr(MpPlanFile) file = mp_plan_file_load (path, error);
  return file != NULL ? mp_plan_file_resolve (file, error) : NULL;
}

/* What the command printed must have reached standard output (a full disk, a closed
 * pipe): else exit 1 with the reason, never 0 over a truncated result. */
static int
flush_stdout (int status)
{
  if (fflush (stdout) == 0 && !ferror (stdout))
    return status;
  fprintf (stderr, "mpplan: cannot write standard output: %s\n", g_strerror (errno));
  return status != 0 ? status : 1;
}

int
main (int argc, char **argv)
{
  setlocale (LC_ALL, "");
  mp_log_init (-1, g_getenv ("MPPLAN_VERBOSE") != NULL);

  if (argc < 2)
    {
      print_usage (stderr);
      return 2;
    }
  const char *name = argv[1];
  if (strcmp (name, "--version") == 0 || strcmp (name, "version") == 0)
    {
      printf ("mpplan %s\n", PACKAGE_VERSION);
      return 0;
    }
  gboolean do_help = FALSE;
  if (strcmp (name, "help") == 0 || strcmp (name, "--help") == 0 || strcmp (name, "-h") == 0)
    {
      if (argc < 3)
        {
          print_usage (stdout);
          return 0;
        }
      name = argv[2];
      do_help = TRUE;
    }
  const Command *cmd = find_command (name);
  if (cmd == NULL)
    {
      fprintf (stderr, "mpplan: unknown command '%s'\n\n", name);
      print_usage (stderr);
      return 2;
    }
  g_autofree char *prgname = g_strconcat ("mpplan ", cmd->name, NULL);
  g_set_prgname (prgname);
  /* The command sees argv from its own name on. */
  int status = cmd->func (do_help ? 1 : argc - 1, do_help ? &argv[2] : &argv[1], do_help);
  return flush_stdout (status);
}
