/*
** main.c -- the tpusim executable: everything else is in the library.
*/
#include "cli.h"

int main(int argc, char **argv) { return cli_main(argc, argv, stdout, stderr); }
