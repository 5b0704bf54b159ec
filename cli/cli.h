/*
** cli.h -- the `tpusim` command line.
**
** The whole program is cli_main with its streams passed in, so tests run
** commands in-process and read what they print; main() only forwards.
** Exit codes (contract): 0 success, 1 bad input or nothing possible,
** 2 usage error (including a subcommand that is not built yet), 3 the
** plan simulated does not fit in memory (its report is printed all the
** same, so a script can tell "ran, but would not run" from success).
*/
#ifndef TPUSIM_CLI_H
#define TPUSIM_CLI_H

#include <stdio.h>

#define TPUSIM_VERSION "0.1.0"

enum { CLI_OK = 0, CLI_BAD_INPUT = 1, CLI_USAGE = 2, CLI_DOES_NOT_FIT = 3 };

int cli_main(int argc, char **argv, FILE *out, FILE *err);

#endif
