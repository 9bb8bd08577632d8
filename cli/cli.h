/* cli.h - what the mpplan subcommands share: the handler type and the few helpers that
 * turn GOption parsing and GErrors into messages and exit codes.
 *
 * Each subcommand lives in cli/cmd-<name>.c, builds its own GOptionContext (the gio
 * pattern) and returns the process exit status: 0 ok, 1 runtime failure, 2 bad usage or
 * bad input, 3 no plan fits. */
#pragma once
#include <glib.h>
#include "planner/planner.h"

G_BEGIN_DECLS

/* A subcommand: ARGV[0] is the command name. DO_HELP: print its help to stdout, exit 0. */
typedef int (*MpCommandFunc) (int argc, char **argv, gboolean do_help);

int mp_cmd_validate (int argc, char **argv, gboolean do_help);
int mp_cmd_describe (int argc, char **argv, gboolean do_help);
int mp_cmd_plan (int argc, char **argv, gboolean do_help);
int mp_cmd_simulate (int argc, char **argv, gboolean do_help);
int mp_cmd_calibrate (int argc, char **argv, gboolean do_help);

/* The calibration profile for *CLUSTER (cli/profile.c): EXPLICIT_PATH (--profile), else
 * the cluster's own or, for `host`, this machine's (mp_cost_profile_for_cluster); *CLUSTER
 * is then replaced by the copy the profile calibrates (mp_cost_profile_apply; the loaded
 * one freed). NULL without error when none applies (*CLUSTER unchanged). */
struct _MpCluster;
struct _MpCostProfile;
struct _MpCostProfile *mp_cli_cluster_profile (struct _MpCluster **cluster,
                                               const char *explicit_path, GError **error);
/* What most commands start from: a model and a cluster (paths or zoo names), the
 * calibration profile for the cluster (as mp_cli_cluster_profile) and the cost context
 * over them. mp_cli_inputs_load prints any error and returns its exit status (0: loaded);
 * mp_cli_inputs_try_load returns it in ERROR instead; mp_cli_inputs_clear frees what was
 * loaded (after a failure too). */
typedef struct {
  struct _MpModel *model;
  struct _MpCluster *cluster;
  struct _MpCostProfile *profile;   /* NULL: none applies */
  struct _MpCostContext *ctx;
} MpCliInputs;
int mp_cli_inputs_load (MpCliInputs *in, const char *model, const char *cluster,
                        const char *profile_path);
gboolean mp_cli_inputs_try_load (MpCliInputs *in, const char *model, const char *cluster,
                                 const char *profile_path, GError **error);
void mp_cli_inputs_clear (MpCliInputs *in);
/* --memory-headroom TEXT onto CTX: a fraction of each device's memory (0 <= f < 1, e.g.
 * 0.05) or a size (4GiB); NULL leaves none. FALSE with MP_ERROR_INPUT for anything else. */
gboolean mp_cli_memory_headroom (struct _MpCostContext *ctx, const char *text,
                                 GError **error);
#define MP_CLI_HEADROOM_HELP \
  "Memory each device must leave free beyond the modelled reserve: a fraction of its " \
  "memory (0.05) or a size (4GiB); default 0"

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (MpCliInputs, mp_cli_inputs_clear)

/* The text of --help about where profiles come from. */
#define MP_CLI_PROFILE_HELP \
  "Calibration: a profile measured by `mpplan calibrate` replaces the built-in curves. It " \
  "comes from --profile FILE, else the cluster file's `profile:` key (relative to that " \
  "file), else for the `host` cluster from $MPPLAN_PROFILE or " \
  "$XDG_CACHE_HOME/mpplan/host-profile.yaml (~/.cache/mpplan/...) when it was measured on " \
  "this machine (same hostname). MPPLAN_PROFILE= (empty) turns that off."
int mp_cmd_program (int argc, char **argv, gboolean do_help);
int mp_cmd_exec (int argc, char **argv, gboolean do_help);
int mp_cmd_import (int argc, char **argv, gboolean do_help);
int mp_cmd_compare (int argc, char **argv, gboolean do_help);
int mp_cmd_report (int argc, char **argv, gboolean do_help);
int mp_cmd_verify (int argc, char **argv, gboolean do_help);

/* `plan --emit` (cmd-emit.c). Is ID a framework --emit knows? FALSE with MP_ERROR_USAGE
 * listing them. */
gboolean mp_cli_framework_check (const char *id, GError **error);
/* Writes the launch files of BEST for framework ID into DIR (NULL: a folder named ID), or
 * when the framework cannot run BEST, of the best plan it can run (searched with OPTS;
 * the reason and that plan on stderr). Returns the exit status. */
int mp_cli_emit (const char *id, const char *dir, const MpPlan *best,
                 const MpCostContext *ctx, const MpSearchOptions *opts);

/* Parses ARGV with CTX (help disabled in CTX; we print it ourselves). Returns -1 to go on,
 * or the exit status to return at once (0 after printing help, 2 on a bad option or on an
 * argument left over: a command that takes operands collects them with
 * G_OPTION_REMAINING). */
int mp_cli_parse (GOptionContext *ctx, int *argc, char ***argv, gboolean do_help);
/* Prints "mpplan: MESSAGE" then the command's help on stderr; returns 2. */
int mp_cli_usage (GOptionContext *ctx, const char *message);
/* Prints ERROR's message (each line prefixed "mpplan: " unless already located) on
 * stderr and returns its exit status. Takes ownership of ERROR. */
int mp_cli_fail (GError *error);
/* The plan file PATH, loaded and resolved (mp_plan_file_resolve). Caller owns; NULL with
 * ERROR set. */
MpPlanResolved *mp_cli_plan_load (const char *path, GError **error);

/* The largest --batch (sequences per optimizer step) a command takes: a model file's
 * training.global_batch has the same bound (model/). */
#define MP_CLI_MAX_BATCH 1000000000

/* The text shared by every command's --help about exit codes. */
#define MP_CLI_EXIT_CODES \
  "Exit status: 0 success, 1 runtime failure, 2 bad usage or bad input, 3 no plan fits."

G_END_DECLS
