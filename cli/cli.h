/* cli.h - what the mpplan subcommands share: the handler type and the few helpers that
 * turn GOption parsing and GErrors into messages and exit codes.
 *
 * Each subcommand lives in cli/cmd-<name>.c, builds its own GOptionContext (the gio
 * pattern) and returns the process exit status: 0 ok, 1 runtime failure, 2 bad usage or
 * bad input, 3 no plan fits. */
#pragma once
#include <glib.h>

G_BEGIN_DECLS

/* A subcommand: ARGV[0] is the command name. DO_HELP: print its help to stdout, exit 0. */
typedef int (*MpCommandFunc) (int argc, char **argv, gboolean do_help);

int mp_cmd_validate (int argc, char **argv, gboolean do_help);
int mp_cmd_describe (int argc, char **argv, gboolean do_help);
int mp_cmd_plan (int argc, char **argv, gboolean do_help);
int mp_cmd_program (int argc, char **argv, gboolean do_help);

/* Parses ARGV with CTX (help disabled in CTX; we print it ourselves). Returns -1 to go on,
 * or the exit status to return at once (0 after printing help, 2 on a bad option). */
int mp_cli_parse (GOptionContext *ctx, int *argc, char ***argv, gboolean do_help);
/* Prints "mpplan: MESSAGE" then the command's help on stderr; returns 2. */
int mp_cli_usage (GOptionContext *ctx, const char *message);
/* Prints ERROR's message (each line prefixed "mpplan: " unless already located) on
 * stderr and returns its exit status. Takes ownership of ERROR. */
int mp_cli_fail (GError *error);

/* The text shared by every command's --help about exit codes. */
#define MP_CLI_EXIT_CODES \
  "Exit status: 0 success, 1 runtime failure, 2 bad usage or bad input, 3 no plan fits."

G_END_DECLS
