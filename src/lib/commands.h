/* The words of the command line, shared by the CLI (which prints them
 * without a daemon: `cairn help`) and cairnd (which runs the commands and
 * prints a command's usage when its arguments are wrong). */
#ifndef CAIRN_LIB_COMMANDS_H
#define CAIRN_LIB_COMMANDS_H

#include <stdio.h>

/* The usage line of `volume WORD ...` (WORD: create, start, ...), or NULL
 * for a word that is not a volume command. */
const char *cmd_volume_usage(const char *word);
/* Every command with its usage and a line of help, one per line. */
void cmd_print_help(FILE *out);

#endif
